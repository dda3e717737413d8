//! The peer of `scripts/bench-http`: a plain axum server, on the same stack and runtime as the
//! serving plane (axum on hyper, a current-thread tokio runtime), answering the comparison's
//! endpoint, a random 256-character hex string per request, on every path.
//!
//! Usage: plain-axum ADDR (prints `listening on ADDR` once it is bound).

use axum::Router;
use std::net::SocketAddr;

fn main() -> anyhow::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned())
        .parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("listening on {}", listener.local_addr()?);
        let app = Router::new().fallback(random_hex);
        axum::serve(listener, app).await?;
        anyhow::Ok(())
    })
}

/// 128 random bytes as 256 lowercase hex digits.
async fn random_hex() -> String {
    let mut bytes = [0u8; 128];
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(256);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}
