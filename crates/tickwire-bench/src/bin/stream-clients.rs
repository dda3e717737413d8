//! `scripts/bench-http`'s /v1/stream load: N WebSocket clients on one current-thread runtime,
//! each counting the messages it receives over one window, against the bus's own count of the
//! events it published in that window (read from `/metrics` just before and just after).
//!
//! Usage: stream-clients HOST:PORT CLIENTS SECONDS. Prints `bus N`, then `client N` per client
//! (`client -CODE` for a client the server closed, with its close code).

use futures_util::StreamExt;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(clients), Some(seconds)) = (args.next(), args.next(), args.next()) else {
        anyhow::bail!("usage: stream-clients HOST:PORT CLIENTS SECONDS");
    };
    let clients: usize = clients.parse()?;
    let window = Duration::from_secs_f64(seconds.parse()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async move {
        let counts: Vec<Arc<AtomicI64>> =
            (0..clients).map(|_| Arc::new(AtomicI64::new(0))).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for count in &counts {
            let (mut socket, _) =
                tokio_tungstenite::connect_async(format!("ws://{addr}/v1/stream")).await?;
            let (count, stop) = (count.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let next = tokio::time::timeout(Duration::from_millis(200), socket.next());
                    match next.await {
                        Err(_) => {}
                        Ok(Some(Ok(Message::Text(_)))) => {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Some(Ok(Message::Close(frame)))) => {
                            let code = frame.map_or(1005, |frame| u16::from(frame.code));
                            count.store(-i64::from(code), Ordering::Relaxed);
                            return;
                        }
                        Ok(Some(Ok(_))) => {}
                        Ok(Some(Err(_)) | None) => {
                            count.store(-1006, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            }));
        }
        // Every client is subscribed once its handshake is done; the window starts now.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let bus_before = published(&addr)?;
        let before: Vec<i64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        tokio::time::sleep(window).await;
        let bus_after = published(&addr)?;
        let after: Vec<i64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            let _ = task.await;
        }
        println!("bus {}", bus_after.saturating_sub(bus_before));
        for (begin, end) in before.into_iter().zip(after) {
            let received = if end < 0 { end } else { end - begin };
            println!("client {received}");
        }
        anyhow::Ok(())
    })
}

/// `tickwire_bus_events_published_total` from `/metrics` (a blocking request: the clients'
/// sockets buffer meanwhile, and the window is seconds long).
fn published(addr: &str) -> anyhow::Result<u64> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    // The address asked for as the Host: the serving plane answers no other name (421).
    stream.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    text.lines()
        .find_map(|line| line.strip_prefix("tickwire_bus_events_published_total "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no tickwire_bus_events_published_total in /metrics"))
}
