//! A small blocking HTTPS client for the few REST calls a feed needs (Binance depth snapshots).
//!
//! It runs on the control thread only, never on a hot thread: it resolves, connects, handshakes
//! and reads with blocking sockets under one deadline. One request per connection
//! (`Connection: close`), HTTP/1.1, bodies by `Content-Length`, chunked encoding, or to the end of
//! the stream. A snapshot every few minutes at most does not deserve a connection pool; what it
//! deserves is a clear error when the venue misbehaves, which is what [`RestError`] gives.

use crate::config::{Endpoint, Scheme};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest body accepted: a 1000-level Binance snapshot is about 60 KiB.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Why a REST call failed.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("{url}: cannot resolve: {reason}")]
    Resolve { url: String, reason: String },
    #[error("{url}: {stage}: {source}")]
    Io {
        url: String,
        stage: &'static str,
        source: std::io::Error,
    },
    #[error("{url}: TLS: {reason}")]
    Tls { url: String, reason: String },
    #[error("{url}: no answer within {timeout_ms} ms")]
    Timeout { url: String, timeout_ms: u64 },
    #[error("{url}: malformed HTTP response: {reason}")]
    Malformed { url: String, reason: &'static str },
    #[error("{url}: the response is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    /// The venue's `Content-Length` says more than the response may hold (or more than any
    /// integer does): refused before reading the body.
    #[error("{url}: the response declares a body of {declared} bytes (Content-Length), more than the {limit} accepted")]
    DeclaredTooLarge {
        url: String,
        declared: String,
        limit: usize,
    },
}

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// What a REST client needs to reach one venue's API.
#[derive(Clone)]
pub struct RestClient {
    endpoint: Endpoint,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    timeout: Duration,
}

impl RestClient {
    /// A client for `endpoint` (`https://` needs `tls`, `http://` must have none).
    pub fn new(
        endpoint: Endpoint,
        tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
        timeout: Duration,
    ) -> RestClient {
        RestClient {
            endpoint,
            tls,
            timeout,
        }
    }

    /// `GET <endpoint><path_and_query>`; any status is a response, only transport and protocol
    /// failures are errors.
    pub fn get(&self, path_and_query: &str) -> Result<Response, RestError> {
        let url = format!(
            "{}://{}:{}{path_and_query}",
            if self.tls.is_some() { "https" } else { "http" },
            self.endpoint.host,
            self.endpoint.port
        );
        let deadline = Instant::now() + self.timeout;
        let timeout_error = || RestError::Timeout {
            url: url.clone(),
            timeout_ms: self.timeout.as_millis() as u64,
        };
        let io_error = |stage: &'static str| {
            let url = url.clone();
            move |source: std::io::Error| {
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) {
                    RestError::Timeout {
                        url: url.clone(),
                        timeout_ms: 0,
                    }
                } else {
                    RestError::Io {
                        url: url.clone(),
                        stage,
                        source,
                    }
                }
            }
        };
        let addr = (self.endpoint.host.as_str(), self.endpoint.port)
            .to_socket_addrs()
            .map_err(|error| error.to_string())
            .and_then(|mut addrs| addrs.next().ok_or_else(|| "no address".to_owned()))
            .map_err(|reason| RestError::Resolve {
                url: url.clone(),
                reason,
            })?;
        let socket =
            TcpStream::connect_timeout(&addr, self.timeout).map_err(io_error("connect"))?;
        let remaining = deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .ok_or_else(timeout_error)?;
        socket
            .set_read_timeout(Some(remaining))
            .and_then(|()| socket.set_write_timeout(Some(remaining)))
            .map_err(io_error("socket options"))?;
        let _ = socket.set_nodelay(true);
        let host_header = if self.endpoint.host.contains(':') {
            format!("[{}]:{}", self.endpoint.host, self.endpoint.port)
        } else {
            format!("{}:{}", self.endpoint.host, self.endpoint.port)
        };
        let request = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: tickwire/{}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        let raw = match &self.tls {
            Some((config, name)) => {
                let connection = rustls::ClientConnection::new(config.clone(), name.clone())
                    .map_err(|error| RestError::Tls {
                        url: url.clone(),
                        reason: error.to_string(),
                    })?;
                let mut stream = rustls::StreamOwned::new(connection, socket);
                exchange(&mut stream, request.as_bytes(), deadline, &url)?
            }
            None => {
                let mut socket = socket;
                exchange(&mut socket, request.as_bytes(), deadline, &url)?
            }
        };
        parse_response(&raw).map_err(|reason| RestError::Malformed { url, reason })
    }
}

/// Builds the client for a venue's `rest_url`, with the venue's TLS trust.
pub fn client_for(
    endpoint: &Endpoint,
    tls: &crate::config::TlsConfig,
    timeout: Duration,
) -> Result<RestClient, String> {
    let tls_pair = match endpoint.scheme {
        Scheme::Https => {
            let config = crate::tls::TlsSettings::from_venue(tls)
                .build()
                .map_err(|error| error.to_string())?;
            let name = crate::tls::server_name(&endpoint.host, tls.sni.as_deref())
                .map_err(|error| error.to_string())?;
            Some((config, name))
        }
        Scheme::Http => None,
        other => return Err(format!("{other:?} is not a REST scheme")),
    };
    Ok(RestClient::new(endpoint.clone(), tls_pair, timeout))
}

/// Writes the request and reads to the end of the stream (the request asked for
/// `Connection: close`), within `deadline`.
fn exchange(
    stream: &mut (impl Read + Write),
    request: &[u8],
    deadline: Instant,
    url: &str,
) -> Result<Vec<u8>, RestError> {
    let map = |stage: &'static str| {
        move |source: std::io::Error| match source.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => RestError::Timeout {
                url: url.to_owned(),
                timeout_ms: 0,
            },
            _ => classify_tls(url, stage, source),
        }
    };
    stream.write_all(request).map_err(map("send"))?;
    stream.flush().map_err(map("send"))?;
    let mut raw = Vec::with_capacity(64 << 10);
    let mut chunk = [0u8; 16 << 10];
    loop {
        if Instant::now() >= deadline {
            return Err(RestError::Timeout {
                url: url.to_owned(),
                timeout_ms: 0,
            });
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                raw.extend_from_slice(&chunk[..read]);
                if raw.len() > MAX_RESPONSE_BYTES {
                    return Err(RestError::TooLarge {
                        url: url.to_owned(),
                        limit: MAX_RESPONSE_BYTES,
                    });
                }
                match response_progress(&raw) {
                    Progress::Incomplete => {}
                    Progress::Complete => break,
                    Progress::TooLarge(declared) => {
                        return Err(RestError::DeclaredTooLarge {
                            url: url.to_owned(),
                            declared: declared.to_owned(),
                            limit: MAX_RESPONSE_BYTES,
                        })
                    }
                }
            }
            // A peer that closes without close_notify after a complete response is common.
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {
                break
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(map("receive")(error)),
        }
    }
    Ok(raw)
}

/// A rustls error surfaces as an `io::Error` wrapping it: name TLS when it is one.
fn classify_tls(url: &str, stage: &'static str, source: std::io::Error) -> RestError {
    let is_tls = source
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
    if is_tls {
        RestError::Tls {
            url: url.to_owned(),
            reason: source.to_string(),
        }
    } else {
        RestError::Io {
            url: url.to_owned(),
            stage,
            source,
        }
    }
}

/// What the bytes read so far say about where the response ends.
#[derive(Debug, PartialEq, Eq)]
enum Progress<'a> {
    /// Read on (to the length, or to the end of the stream).
    Incomplete,
    /// A whole response with a `Content-Length` body: the reader need not wait for the peer to
    /// close.
    Complete,
    /// The `Content-Length` (the venue's text) puts the response's end past
    /// `MAX_RESPONSE_BYTES`, or past any integer.
    TooLarge(&'a str),
}

/// Where `raw`'s response ends, by its `Content-Length`. The length is the venue's: the sum is
/// checked, never wrapped (a release build has no overflow checks; issue 32), and a length that
/// takes the response past `MAX_RESPONSE_BYTES` is refused at once rather than waited for. A
/// length that is not a number is left to [`parse_response`], which refuses it.
fn response_progress(raw: &[u8]) -> Progress<'_> {
    let Some(head_end) = find(raw, b"\r\n\r\n") else {
        return Progress::Incomplete;
    };
    let head = &raw[..head_end];
    let Some(text) = header(head, "content-length") else {
        return Progress::Incomplete;
    };
    let length = match text.trim().parse::<usize>() {
        Ok(length) => length,
        Err(error) if *error.kind() == std::num::IntErrorKind::PosOverflow => {
            return Progress::TooLarge(text)
        }
        Err(_) => return Progress::Incomplete,
    };
    match head_end
        .checked_add(4)
        .and_then(|body_start| body_start.checked_add(length))
    {
        Some(end) if end <= MAX_RESPONSE_BYTES => {
            if raw.len() >= end {
                Progress::Complete
            } else {
                Progress::Incomplete
            }
        }
        _ => Progress::TooLarge(text),
    }
}

/// Splits a raw response into status and decoded body.
pub fn parse_response(raw: &[u8]) -> Result<Response, &'static str> {
    let head_end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = &raw[..head_end];
    let body = &raw[head_end + 4..];
    let status_line_end = find(head, b"\r\n").unwrap_or(head.len());
    let status_line = std::str::from_utf8(&head[..status_line_end]).map_err(|_| "status line")?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err("not HTTP/1.x");
    }
    let status = parts
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("status code")?;
    let chunked = header(head, "transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else if let Some(length) = header(head, "content-length") {
        let length: usize = length.trim().parse().map_err(|_| "content-length")?;
        body.get(..length)
            .ok_or("body shorter than content-length")?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok(Response { status, body })
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(body.len());
    loop {
        let line_end = find(body, b"\r\n").ok_or("chunk size line")?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|_| "chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "chunk size")?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or("chunk shorter than its size")?;
        out.extend_from_slice(chunk);
        // `size` is the venue's: checked, though `get(..size)` above already bounds it.
        let next = size.checked_add(2).ok_or("chunk size")?;
        body = body.get(next..).ok_or("chunk without CRLF")?;
    }
}

fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(head).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_bodies() {
        let plain = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        assert_eq!((plain.status, plain.body.as_slice()), (200, &b"hello"[..]));
        let chunked = parse_response(
            b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (chunked.status, chunked.body.as_slice()),
            (503, &b"abcde"[..])
        );
        let to_end = parse_response(b"HTTP/1.0 404 Not Found\r\n\r\n{}").unwrap();
        assert_eq!((to_end.status, to_end.body.as_slice()), (404, &b"{}"[..]));
    }

    #[test]
    fn refuses_malformed_responses() {
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 2x0 OK\r\n\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }

    #[test]
    fn knows_when_a_sized_response_is_complete() {
        assert_eq!(
            response_progress(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab"),
            Progress::Incomplete
        );
        assert_eq!(
            response_progress(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"),
            Progress::Complete
        );
        assert_eq!(
            response_progress(b"HTTP/1.1 200 OK\r\n\r\nabc"),
            Progress::Incomplete
        );
    }

    /// Issue 32: `head_end + 4 + length` with the venue's Content-Length wrapped in a release
    /// build: `usize::MAX` made the sum small, and the response counted as complete. A length
    /// past the limit (or past any integer) is now a clear error before the body is read.
    #[test]
    fn a_huge_content_length_is_a_clear_error_not_a_wrap() {
        for declared in [
            usize::MAX.to_string(),
            (usize::MAX - 3).to_string(),
            (MAX_RESPONSE_BYTES + 1).to_string(),
            "99999999999999999999999999999".to_owned(),
        ] {
            let raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\n\r\n{{}}");
            assert_eq!(
                response_progress(raw.as_bytes()),
                Progress::TooLarge(&declared),
                "{declared}"
            );
            // Through the reader: refused at once, naming the length and the limit.
            let mut stream = Scripted {
                reply: std::io::Cursor::new(raw.into_bytes()),
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            let error = exchange(
                &mut stream,
                b"GET / HTTP/1.1\r\n\r\n",
                deadline,
                "http://venue",
            )
            .expect_err("refused");
            assert!(
                matches!(error, RestError::DeclaredTooLarge { .. }),
                "{error}"
            );
            let text = error.to_string();
            assert!(
                text.contains(&declared) && text.contains(&MAX_RESPONSE_BYTES.to_string()),
                "{text}"
            );
        }
        // The largest body that fits is still read.
        let fits = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(response_progress(fits), Progress::Complete);
        // Chunk sizes are the venue's too: a huge one is malformed, never a wrap.
        assert!(parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nab\r\n0\r\n\r\n"
        )
        .is_err());
    }

    /// A stream that answers with a fixed reply and swallows what is written.
    struct Scripted {
        reply: std::io::Cursor<Vec<u8>>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reply.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
