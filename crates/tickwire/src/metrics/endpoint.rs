//! The metrics endpoint: a minimal HTTP/1.1 server on the control thread, polled on every control
//! tick, never blocking it: a non-blocking listener, non-blocking connections, each request read
//! and answered as its bytes arrive, one response per connection (`Connection: close`).
//!
//! It serves whatever the caller renders for a path; `control::Session` renders `/metrics`
//! (Prometheus text exposition format 0.0.4) and `/healthz`. It reads counters and histograms
//! the hot threads publish; it never touches the hot path.
//!
//! **Invariant:** a client that sends nothing, sends slowly or reads slowly costs the control
//! thread nothing but a buffer: it is dropped after [`CLIENT_DEADLINE`], and at most
//! [`MAX_CLIENTS`] are served at once.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A connection is dropped when its request and response take longer than this.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CLIENTS: usize = 16;
/// A request head larger than this is refused (a scraper sends a few hundred bytes).
pub const MAX_HEAD_BYTES: usize = 8192;

/// What the caller answers for a path.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

struct Client {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The response, once rendered, and how much of it is written.
    out: Vec<u8>,
    written: usize,
}

pub struct MetricsEndpoint {
    listener: TcpListener,
    clients: Vec<Client>,
    /// Requests answered, for tests and the log.
    pub served: u64,
}

impl MetricsEndpoint {
    pub fn bind(addr: SocketAddr) -> io::Result<MetricsEndpoint> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(MetricsEndpoint {
            listener,
            clients: Vec::new(),
            served: 0,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts, reads and answers what is ready now. `render` is called once per complete
    /// request with its path (query string included).
    pub fn poll(&mut self, render: &mut dyn FnMut(&str) -> Response) {
        while self.clients.len() < MAX_CLIENTS {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_ok() {
                        self.clients.push(Client {
                            stream,
                            since: Instant::now(),
                            head: Vec::new(),
                            out: Vec::new(),
                            written: 0,
                        });
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    tracing::debug!("metrics endpoint: accept failed: {error}");
                    break;
                }
            }
        }
        let mut index = 0;
        while index < self.clients.len() {
            let done = self.serve(index, render);
            if done {
                self.clients.swap_remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// Moves one client on; returns whether it is finished (answered, failed or too slow).
    fn serve(&mut self, index: usize, render: &mut dyn FnMut(&str) -> Response) -> bool {
        let client = &mut self.clients[index];
        if client.since.elapsed() > CLIENT_DEADLINE {
            return true;
        }
        if client.out.is_empty() {
            let mut buf = [0u8; 2048];
            loop {
                match client.stream.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(count) => client.head.extend_from_slice(&buf[..count]),
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return true,
                }
                if client.head.len() > MAX_HEAD_BYTES {
                    break;
                }
            }
            let Some(out) = answer(&client.head, render) else {
                return false;
            };
            client.out = out;
            self.served += 1;
        }
        let client = &mut self.clients[index];
        while client.written < client.out.len() {
            match client.stream.write(&client.out[client.written..]) {
                Ok(0) => return true,
                Ok(count) => client.written += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return false,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        true
    }
}

/// The bytes that answer a request whose head so far is `head`, `None` while the head is not
/// complete (no blank line yet, and within [`MAX_HEAD_BYTES`]): 431 for a head too large, 400
/// for a request line that is not `METHOD /path HTTP/1.x`, 405 for a method other than GET and
/// HEAD, else what `render` makes of the path (its body left out for HEAD). Sans-IO, so that it
/// is fuzzed (`fuzz/fuzz_targets/metrics_request.rs`).
pub fn answer(head: &[u8], render: &mut dyn FnMut(&str) -> Response) -> Option<Vec<u8>> {
    let response = if head.len() > MAX_HEAD_BYTES {
        text(431, "request head too large\n")
    } else if let Some(end) = find(head, b"\r\n\r\n") {
        match parse_request_line(&head[..end]) {
            Some(("GET" | "HEAD", path)) => render(path),
            Some(_) => text(405, "only GET and HEAD\n"),
            None => text(400, "bad request\n"),
        }
    } else {
        return None;
    };
    Some(encode(&response, head.starts_with(b"HEAD ")))
}

fn text(status: u16, body: &str) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_owned(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// `GET /metrics HTTP/1.1` → `("GET", "/metrics")`.
fn parse_request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line_end = find(head, b"\r\n").unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).ok()?;
    let mut parts = line.split(' ');
    let method = parts.next()?;
    let path = parts.next()?;
    let version = parts.next()?;
    (version.starts_with("HTTP/1.") && parts.next().is_none() && path.starts_with('/'))
        .then_some((method, path))
}

fn encode(response: &Response, head_only: bool) -> Vec<u8> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(response.body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, endpoint: &mut MetricsEndpoint, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let mut response = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            endpoint.poll(&mut |path| Response {
                status: if path == "/metrics" { 200 } else { 404 },
                content_type: "text/plain",
                body: format!("path {path}\n"),
            });
            let mut buf = [0u8; 1024];
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(count) => response.extend_from_slice(&buf[..count]),
                Err(_) => {}
            }
        }
        String::from_utf8(response).unwrap()
    }

    #[test]
    fn answers_get_and_refuses_the_rest() {
        let mut endpoint = MetricsEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = endpoint.local_addr().unwrap();
        let ok = get(
            addr,
            &mut endpoint,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\npath /metrics\n"), "{ok}");
        assert!(ok.contains("Content-Length: 14\r\n"), "{ok}");
        let missing = get(addr, &mut endpoint, b"GET /nope HTTP/1.0\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 Not Found"), "{missing}");
        let post = get(addr, &mut endpoint, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let junk = get(addr, &mut endpoint, b"hello\r\n\r\n");
        assert!(junk.starts_with("HTTP/1.1 400"), "{junk}");
        let head = get(addr, &mut endpoint, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        assert_eq!(endpoint.served, 5);
    }
}
