//! The opening handshake of RFC 6455 section 4.1, sans-IO: [`Handshake::request`] writes the
//! HTTP/1.1 upgrade request, [`Handshake::parse_response`] checks the server's answer as its
//! bytes arrive.
//!
//! The response is read from the caller's buffer in place: nothing is allocated, and what the
//! caller sees on failure is a short, printable excerpt of what the server said, so a log line
//! tells a wrong URL (`200 OK`, `404 Not Found`), a plain-HTTP port and a non-HTTP server apart.

use super::EntropyError;
use crate::config::Endpoint;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha1::{Digest, Sha1};
use std::fmt;

/// The largest response header block accepted. Servers answer an upgrade with a few hundred
/// bytes; a header block this long means something else is talking.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 16 << 10;

/// The GUID that section 1.3 appends to the key before hashing.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A status line longer than this without its CRLF is refused (no real server sends one).
const MAX_STATUS_LINE_BYTES: usize = 1024;

/// The headers [`Handshake::request`] writes itself, which extra headers may not repeat.
const OWN_HEADERS: [&str; 5] = [
    "host",
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
];

/// What to ask for: the target of the upgrade request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// A DNS name or IP literal (IPv6 without brackets; they are added).
    pub host: &'a str,
    pub port: u16,
    /// `wss` (TLS): decides which port is the default, and so left out of `Host`.
    pub secure: bool,
    /// The request target, path and query: `/stream?streams=btcusdt@bookTicker`.
    pub path: &'a str,
    /// Extra header fields, such as `Origin` or `Sec-WebSocket-Protocol`.
    pub headers: &'a [(&'a str, &'a str)],
}

impl<'a> Request<'a> {
    /// The request for a `ws://` or `wss://` endpoint from a venue file.
    pub fn from_endpoint(endpoint: &'a Endpoint) -> Self {
        Self {
            host: &endpoint.host,
            port: endpoint.port,
            secure: endpoint.scheme.is_tls(),
            path: &endpoint.path,
            headers: &[],
        }
    }
}

/// Where the response stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeStatus {
    /// The header block is not complete: call again with everything received so far.
    NeedMore,
    /// The server accepted. The first `consumed` bytes were the response; any bytes after them
    /// are already WebSocket frames and must be the start of the first
    /// [`Client::read`](super::Client::read) input.
    Done { consumed: usize },
}

/// Why the handshake failed. The texts are meant for a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Entropy(#[from] EntropyError),
    #[error("invalid handshake request: {0}")]
    InvalidRequest(&'static str),
    #[error("the server did not answer in HTTP; its first bytes: \"{0}\"")]
    NotHttp(Excerpt),
    #[error("malformed HTTP status line: \"{0}\"")]
    MalformedStatusLine(Excerpt),
    #[error("server answered {0} instead of 101 Switching Protocols")]
    UnexpectedStatus(Excerpt),
    #[error("malformed HTTP header line: \"{0}\"")]
    MalformedHeader(Excerpt),
    #[error("the response has no `{0}` header")]
    MissingHeader(&'static str),
    #[error("the response's `{name}` header is \"{value}\", expected {expected}")]
    UnexpectedHeader {
        name: &'static str,
        value: Excerpt,
        expected: &'static str,
    },
    #[error(
        "Sec-WebSocket-Accept is \"{received}\", expected \"{}\" (RFC 6455 section 4.1)",
        String::from_utf8_lossy(.expected)
    )]
    AcceptMismatch {
        received: Excerpt,
        /// base64(SHA-1(key + GUID)), ASCII.
        expected: [u8; 28],
    },
    #[error("response header block exceeds {MAX_RESPONSE_HEADER_BYTES} bytes")]
    HeaderTooLarge,
}

/// Up to 64 bytes of what the server sent, kept inline so that an error needs no allocation;
/// displayed with non-printable bytes escaped and `...` when cut.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Excerpt {
    bytes: [u8; Excerpt::CAPACITY],
    len: u8,
    truncated: bool,
}

impl Excerpt {
    const CAPACITY: usize = 64;

    pub fn new(source: &[u8]) -> Self {
        let len = source.len().min(Self::CAPACITY);
        let mut bytes = [0; Self::CAPACITY];
        bytes[..len].copy_from_slice(&source[..len]);
        Self {
            bytes,
            len: len as u8,
            truncated: source.len() > len,
        }
    }

    /// The bytes kept (at most 64).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Display for Excerpt {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.as_bytes().utf8_chunks() {
            for character in chunk.valid().chars() {
                if character.is_ascii_control() {
                    write!(formatter, "\\x{:02x}", u32::from(character))?;
                } else if character.is_control() {
                    write!(formatter, "{}", character.escape_default())?;
                } else {
                    write!(formatter, "{character}")?;
                }
            }
            for byte in chunk.invalid() {
                write!(formatter, "\\x{byte:02x}")?;
            }
        }
        if self.truncated {
            formatter.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Excerpt {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "\"{self}\"")
    }
}

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (section 4.1):
/// base64(SHA-1(key + GUID)), 28 ASCII bytes.
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let mut hasher = Sha1::new();
    hasher.update(key);
    hasher.update(ACCEPT_GUID);
    let digest = hasher.finalize();
    let mut accept = [0_u8; 28];
    // 20 bytes encode to exactly 28 base64 characters, so this cannot fail.
    let _ = BASE64.encode_slice(digest, &mut accept);
    accept
}

/// One opening handshake: the key we send and the answer we expect.
#[derive(Clone, Debug)]
pub struct Handshake {
    /// base64 of 16 random bytes (section 4.1).
    key: [u8; 24],
    expected_accept: [u8; 28],
    /// Whether the request offered a subprotocol, without which the server may not pick one.
    offered_protocol: bool,
    status_checked: bool,
    /// How far the response has been searched for the end of its header block.
    searched_bytes: usize,
}

impl Handshake {
    /// A handshake with a fresh random key.
    pub fn new() -> Result<Self, HandshakeError> {
        let mut nonce = [0_u8; 16];
        getrandom::fill(&mut nonce).map_err(EntropyError)?;
        Ok(Self::with_nonce(nonce))
    }

    /// A handshake with the given 16-byte nonce; tests use the RFC's example.
    pub fn with_nonce(nonce: [u8; 16]) -> Self {
        let mut key = [0_u8; 24];
        // 16 bytes encode to exactly 24 base64 characters, so this cannot fail.
        let _ = BASE64.encode_slice(nonce, &mut key);
        Self {
            key,
            expected_accept: accept_key(&key),
            offered_protocol: false,
            status_checked: false,
            searched_bytes: 0,
        }
    }

    /// The `Sec-WebSocket-Key` value sent.
    pub fn key(&self) -> &str {
        // base64 is ASCII.
        std::str::from_utf8(&self.key).unwrap_or_default()
    }

    /// The upgrade request, ready for the socket.
    pub fn request(&mut self, request: &Request<'_>) -> Result<Vec<u8>, HandshakeError> {
        let mut out = Vec::with_capacity(256);
        self.write_request(request, &mut out)?;
        Ok(out)
    }

    /// Appends the upgrade request to `out`. Refuses values that would break the request or
    /// smuggle a header (CR, LF, other controls), extra headers that repeat one this writes,
    /// and `Sec-WebSocket-Extensions`, since this client implements no extension.
    pub fn write_request(
        &mut self,
        request: &Request<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), HandshakeError> {
        if request.host.is_empty() || !request.host.bytes().all(is_visible) {
            return Err(HandshakeError::InvalidRequest(
                "host is empty or has spaces or control characters",
            ));
        }
        if !request.path.starts_with('/') || !request.path.bytes().all(is_visible) {
            return Err(HandshakeError::InvalidRequest(
                "path must start with `/` and have no spaces or control characters",
            ));
        }
        for (name, value) in request.headers {
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return Err(HandshakeError::InvalidRequest(
                    "header name is not an HTTP token",
                ));
            }
            if value
                .bytes()
                .any(|byte| byte.is_ascii_control() && byte != b'\t')
            {
                return Err(HandshakeError::InvalidRequest(
                    "header value has a control character",
                ));
            }
            if OWN_HEADERS.iter().any(|own| name.eq_ignore_ascii_case(own)) {
                return Err(HandshakeError::InvalidRequest(
                    "extra headers may not repeat Host, Upgrade, Connection or Sec-WebSocket-Key/Version",
                ));
            }
            if name.eq_ignore_ascii_case("sec-websocket-extensions") {
                return Err(HandshakeError::InvalidRequest(
                    "this client implements no WebSocket extension",
                ));
            }
        }

        let bracketed = request.host.contains(':') && !request.host.starts_with('[');
        let default_port = if request.secure { 443 } else { 80 };
        let mut host = Vec::with_capacity(request.host.len() + 8);
        if bracketed {
            host.push(b'[');
        }
        host.extend_from_slice(request.host.as_bytes());
        if bracketed {
            host.push(b']');
        }
        if request.port != default_port {
            host.push(b':');
            host.extend_from_slice(request.port.to_string().as_bytes());
        }

        out.extend_from_slice(b"GET ");
        out.extend_from_slice(request.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(&host);
        out.extend_from_slice(
            b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ",
        );
        out.extend_from_slice(&self.key);
        out.extend_from_slice(b"\r\nSec-WebSocket-Version: 13\r\n");
        for (name, value) in request.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.trim().as_bytes());
            out.extend_from_slice(b"\r\n");
            if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                self.offered_protocol = true;
            }
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Checks the response so far: `received` is every byte the server has sent since the
    /// request, from the first one. Fails as soon as the bytes show the answer is wrong (not
    /// HTTP, not 101), so a caller need not wait for a header block that may never end.
    pub fn parse_response(&mut self, received: &[u8]) -> Result<HandshakeStatus, HandshakeError> {
        let prefix = &received[..received.len().min(5)];
        if !b"HTTP/".starts_with(prefix) {
            return Err(HandshakeError::NotHttp(Excerpt::new(
                &received[..received.len().min(16)],
            )));
        }
        if !self.status_checked {
            let searchable = &received[..received.len().min(MAX_STATUS_LINE_BYTES)];
            match find(searchable, b"\r\n") {
                Some(line_end) => {
                    check_status_line(&received[..line_end])?;
                    self.status_checked = true;
                }
                None if received.len() >= MAX_STATUS_LINE_BYTES => {
                    return Err(HandshakeError::MalformedStatusLine(Excerpt::new(received)))
                }
                None => return Ok(HandshakeStatus::NeedMore),
            }
        }

        let limit = received.len().min(MAX_RESPONSE_HEADER_BYTES);
        // A terminator may straddle the previous call's end: back up by its length less one.
        let from = self.searched_bytes.saturating_sub(3).min(limit);
        let Some(end) = find(&received[from..limit], b"\r\n\r\n").map(|at| from + at + 4) else {
            self.searched_bytes = limit;
            if received.len() >= MAX_RESPONSE_HEADER_BYTES {
                return Err(HandshakeError::HeaderTooLarge);
            }
            return Ok(HandshakeStatus::NeedMore);
        };
        self.check_headers(&received[..end - 4])?;
        Ok(HandshakeStatus::Done { consumed: end })
    }

    /// Checks the header fields of section 4.1's client requirements 2-6.
    fn check_headers(&self, block: &[u8]) -> Result<(), HandshakeError> {
        let mut upgrade = None;
        let mut connection = None;
        let mut accept = None;
        // The first line is the status line, checked already.
        for line in block.split(|&byte| byte == b'\n').skip(1) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&byte| byte == b':') else {
                return Err(HandshakeError::MalformedHeader(Excerpt::new(line)));
            };
            let name = &line[..colon];
            // RFC 9112 section 5.1: no whitespace before the colon; and a line starting with
            // whitespace is obsolete line folding, which section 5.2 lets a client refuse.
            if name.is_empty() || !name.iter().copied().all(is_token_byte) {
                return Err(HandshakeError::MalformedHeader(Excerpt::new(line)));
            }
            let value = line[colon + 1..].trim_ascii();
            if name.eq_ignore_ascii_case(b"upgrade") {
                upgrade = Some(value);
            } else if name.eq_ignore_ascii_case(b"connection") {
                connection = Some(value);
            } else if name.eq_ignore_ascii_case(b"sec-websocket-accept") {
                accept = Some(value);
            } else if name.eq_ignore_ascii_case(b"sec-websocket-extensions") && !value.is_empty() {
                return Err(HandshakeError::UnexpectedHeader {
                    name: "Sec-WebSocket-Extensions",
                    value: Excerpt::new(value),
                    expected: "none (no extension was offered)",
                });
            } else if name.eq_ignore_ascii_case(b"sec-websocket-protocol") && !self.offered_protocol
            {
                return Err(HandshakeError::UnexpectedHeader {
                    name: "Sec-WebSocket-Protocol",
                    value: Excerpt::new(value),
                    expected: "none (no subprotocol was offered)",
                });
            }
        }

        let upgrade = upgrade.ok_or(HandshakeError::MissingHeader("Upgrade"))?;
        if !has_token(upgrade, b"websocket") {
            return Err(HandshakeError::UnexpectedHeader {
                name: "Upgrade",
                value: Excerpt::new(upgrade),
                expected: "\"websocket\"",
            });
        }
        let connection = connection.ok_or(HandshakeError::MissingHeader("Connection"))?;
        if !has_token(connection, b"upgrade") {
            return Err(HandshakeError::UnexpectedHeader {
                name: "Connection",
                value: Excerpt::new(connection),
                expected: "a token list with \"Upgrade\"",
            });
        }
        let accept = accept.ok_or(HandshakeError::MissingHeader("Sec-WebSocket-Accept"))?;
        if accept != self.expected_accept {
            return Err(HandshakeError::AcceptMismatch {
                received: Excerpt::new(accept),
                expected: self.expected_accept,
            });
        }
        Ok(())
    }
}

/// Checks `HTTP/1.x 101 ...`: section 4.1 requires exactly 101.
fn check_status_line(line: &[u8]) -> Result<(), HandshakeError> {
    let malformed = || HandshakeError::MalformedStatusLine(Excerpt::new(line));
    let Some(rest) = line.strip_prefix(b"HTTP/1.") else {
        return Err(malformed());
    };
    // The minor version digit, a space, then the three-digit code (RFC 9112 section 4).
    let status = match rest {
        [minor, b' ', status @ ..] if minor.is_ascii_digit() => status,
        _ => return Err(malformed()),
    };
    match status {
        [b'1', b'0', b'1', ..] if status.get(3).is_none_or(|&byte| byte == b' ') => Ok(()),
        [a, b, c, ..]
            if [a, b, c].iter().all(|digit| digit.is_ascii_digit())
                && status.get(3).is_none_or(|&byte| byte == b' ') =>
        {
            Err(HandshakeError::UnexpectedStatus(Excerpt::new(status)))
        }
        _ => Err(malformed()),
    }
}

/// Whether a comma-separated header value lists `token`, ASCII case-insensitively.
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&byte| byte == b',')
        .any(|item| item.trim_ascii().eq_ignore_ascii_case(token))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Printable ASCII, no space: what a host or request target may contain.
fn is_visible(byte: u8) -> bool {
    byte.is_ascii_graphic()
}

/// `tchar` of RFC 9110 section 5.6.2.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_NONCE: [u8; 16] = *b"the sample nonce";

    fn response(accept: &str) -> String {
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\n\r\n"
        )
    }

    #[test]
    fn rfc_example_key_and_accept() {
        // RFC 6455 section 1.3: the nonce "the sample nonce" and its accept value.
        let handshake = Handshake::with_nonce(RFC_NONCE);
        assert_eq!(handshake.key(), "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(
            &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn status_line_checks() {
        assert_eq!(
            check_status_line(b"HTTP/1.1 101 Switching Protocols"),
            Ok(())
        );
        assert_eq!(check_status_line(b"HTTP/1.1 101"), Ok(()));
        assert!(matches!(
            check_status_line(b"HTTP/1.1 200 OK"),
            Err(HandshakeError::UnexpectedStatus(_))
        ));
        assert!(matches!(
            check_status_line(b"HTTP/1.1 1010 x"),
            Err(HandshakeError::MalformedStatusLine(_))
        ));
        assert!(matches!(
            check_status_line(b"HTTP/2 101"),
            Err(HandshakeError::MalformedStatusLine(_))
        ));
    }

    #[test]
    fn accepts_the_rfc_response() {
        let mut handshake = Handshake::with_nonce(RFC_NONCE);
        let text = response("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(
            handshake.parse_response(text.as_bytes()),
            Ok(HandshakeStatus::Done {
                consumed: text.len()
            })
        );
    }

    #[test]
    fn excerpt_escapes_and_truncates() {
        let excerpt = Excerpt::new(b"\x16\x03\x01ok\xff");
        assert_eq!(excerpt.to_string(), "\\x16\\x03\\x01ok\\xff");
        let long = Excerpt::new(&[b'a'; 100]);
        assert_eq!(long.to_string(), format!("{}...", "a".repeat(64)));
    }
}
