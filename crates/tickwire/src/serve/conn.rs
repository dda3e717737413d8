//! Connections: the accept loop with its cap, hyper's HTTP/1.1 connection with the head-size
//! and head-time limits, and a write deadline on every socket.
//!
//! hyper (under axum) rather than `axum::serve`: the limits a public-facing server needs are
//! hyper's connection options (`header_read_timeout`, `max_buf_size`), which `axum::serve` does
//! not expose.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio::time::Sleep;

use super::Shared;

/// The connection limits, from `[http]`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub max_head_bytes: usize,
    pub header_timeout: Duration,
    pub write_timeout: Duration,
}

/// Accepts until `stop` fires; each connection is served by a task of its own. At most
/// `max_connections` are open at once: the next waits in the kernel's backlog until one ends.
/// Every request passes the `Host` and `Origin` checks (`hosts`) before the routes, and every
/// answer gets [`secure_headers`].
pub async fn accept_loop(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let counters = shared.counters.clone();
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = &mut stop => return,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors or memory: wait rather than spin on the error.
                    tracing::warn!("http: accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => return,
        };
        counters.connections.fetch_add(1, Ordering::Relaxed);
        // The address this connection reached: the one its `Host` must name (a wildcard
        // listener has one per interface).
        let local = match stream.local_addr() {
            Ok(local) => local,
            Err(error) => {
                tracing::debug!("http: a connection without a local address: {error}");
                continue;
            }
        };
        // Small responses go out at once rather than after Nagle's delay.
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Deadline::new(stream, limits.write_timeout));
        let counters = counters.clone();
        let app = app.clone();
        let request_shared = shared.clone();
        // Counted and checked here rather than in a middleware, which would box every
        // request's future.
        let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
            let shared = &request_shared;
            shared.counters.requests.fetch_add(1, Ordering::Relaxed);
            let refused = shared.hosts.check(
                request.uri().path(),
                request.headers(),
                local,
                &shared.counters,
            );
            let mut app = app.clone();
            async move {
                let mut response = match refused {
                    Some(refused) => refused,
                    None => tower_service::Service::call(&mut app, request).await?,
                };
                secure_headers(response.headers_mut());
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.max_head_bytes)
                .keep_alive(true)
                .serve_connection(io, service)
                .with_upgrades();
            if let Err(error) = connection.await {
                if error.is_timeout() {
                    counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!("http: connection ended: {error}");
            }
            drop(permit);
        });
    }
}

/// What every answer carries: its type is the one it says (`nosniff`: a JSON answer is never
/// run as a script), and no page of another origin may embed it (`Cross-Origin-Resource-Policy`).
/// No `Access-Control-Allow-*` header is ever sent, so a page of another origin cannot read an
/// answer either. The status page adds its own (`api::status_page`).
pub fn secure_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

/// A socket whose writes fail with `TimedOut` once one has waited longer than the deadline: a
/// client that stops reading cannot hold a connection (or a WebSocket) open for ever.
pub struct Deadline {
    stream: TcpStream,
    timeout: Duration,
    /// Armed while a write waits for room.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl Deadline {
    fn new(stream: TcpStream, timeout: Duration) -> Deadline {
        Deadline {
            stream,
            timeout,
            waiting: None,
        }
    }

    /// `Pending` while the deadline is not reached (the sleep wakes the task at it), an error
    /// once it is.
    fn check(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let timeout = self.timeout;
        let sleep = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Deadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Deadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Pending => self.check(cx),
            ready => {
                self.waiting = None;
                ready
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.check(cx),
            ready => {
                self.waiting = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
