//! HTTP/1.1 on the simulator's port, sans-IO: the request head parser, the routing of the
//! venue's paths, the WebSocket upgrade check (RFC 6455 section 4.2) and response writing.
//! Request bodies are not supported: the venue's market-data API is all `GET`.

use base64::Engine as _;
use tickwire::ws::accept_key;

/// The longest request head accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// A parsed request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    pub headers: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("request head longer than {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    #[error("malformed request: {0}")]
    Malformed(&'static str),
}

impl Request {
    /// The first header named `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Whether a comma-separated header holds `token` (case-insensitive).
    pub fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(key, _)| key.eq_ignore_ascii_case(name))
            .flat_map(|(_, value)| value.split(','))
            .any(|item| item.trim().eq_ignore_ascii_case(token))
    }

    /// Whether the connection stays open after the response (RFC 9112 section 9.3).
    pub fn keep_alive(&self) -> bool {
        if self.header_has_token("connection", "close") {
            return false;
        }
        self.version == "HTTP/1.1" || self.header_has_token("connection", "keep-alive")
    }

    pub fn has_body(&self) -> bool {
        self.header("transfer-encoding").is_some()
            || self
                .header("content-length")
                .is_some_and(|len| len.trim() != "0")
    }
}

/// Parses the request head at the front of `input`: the request and its length in bytes, or
/// `None` until the blank line that ends it has arrived.
pub fn parse_request(input: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
    let Some(end) = input.windows(4).position(|window| window == b"\r\n\r\n") else {
        if input.len() > MAX_HEAD_BYTES {
            return Err(HttpError::HeadTooLarge);
        }
        return Ok(None);
    };
    if end > MAX_HEAD_BYTES {
        return Err(HttpError::HeadTooLarge);
    }
    let head = std::str::from_utf8(&input[..end])
        .map_err(|_| HttpError::Malformed("the head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed(
            "the request line is not METHOD TARGET VERSION",
        ));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HttpError::Malformed(
            "the version is not HTTP/1.0 or HTTP/1.1",
        ));
    }
    if method.is_empty() || !target.starts_with('/') {
        return Err(HttpError::Malformed("the target is not an absolute path"));
    }
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or(HttpError::Malformed("a header line has no colon"))?;
        if name.is_empty() || name.contains(' ') {
            return Err(HttpError::Malformed("a header name is empty or has spaces"));
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Some((
        Request {
            method: method.to_owned(),
            target: target.to_owned(),
            version: version.to_owned(),
            headers,
        },
        end + 4,
    )))
}

/// The routed entry points of Binance USD-M market streams since the 2026 split (the notice
/// "Important WebSocket Change Notice: Base URL Split & Migration", 2026-03-06; the legacy
/// `/ws` and `/stream` were decommissioned on 2026-04-23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryPoint {
    /// `/public`: high-frequency public market data.
    Public,
    /// `/market`: regular market data.
    Market,
}

impl EntryPoint {
    /// Whether this entry point serves `stream` (`<symbol>@<channel>`), by the notice's table:
    /// `/public` has `@bookTicker`, `!bookTicker`, `@depth<levels>`, `@depth` (and
    /// `@rpiDepth@500ms`, whose page says URL PATH `/public`); `/market` has the rest
    /// (`@aggTrade`, `@markPrice`, klines, tickers, `@forceOrder`, ...). `@trade`, which the
    /// stream pages do not list, is served on `/public` as the venue's users observe it.
    pub fn serves(self, stream: &str) -> bool {
        let channel = stream
            .split_once('@')
            .map_or(stream, |(_, channel)| channel);
        let channel = channel.split_once('@').map_or(channel, |(name, _)| name);
        let public = matches!(channel, "bookTicker" | "trade" | "rpiDepth")
            || stream == "!bookTicker"
            || channel
                .strip_prefix("depth")
                .is_some_and(|levels| levels.is_empty() || levels.parse::<u32>().is_ok());
        public == (self == EntryPoint::Public)
    }

    pub fn path(self) -> &'static str {
        match self {
            EntryPoint::Public => "/public",
            EntryPoint::Market => "/market",
        }
    }
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// A WebSocket endpoint of an entry point: `<entry>/ws`, `<entry>/ws/<stream>[/<stream>..]`
    /// (raw payloads) or `<entry>/stream?streams=<a>/<b>` (combined payloads), with the streams
    /// named in the URL.
    Stream {
        streams: Vec<String>,
        combined: bool,
        entry: EntryPoint,
    },
    /// The single entry point (`/ws...`, `/stream...`): Binance Spot's, and the one Binance
    /// retired for USD-M on 2026-04-23 (the USD-M server refuses it).
    Single {
        streams: Vec<String>,
        combined: bool,
    },
    /// `GET /fapi/v1/depth?symbol=..&limit=..`.
    Depth {
        symbol: Option<String>,
        limit: Option<String>,
    },
    NotFound,
}

/// Routes a request target (path and query).
pub fn route(target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let params = || {
        query.split('&').filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(key)?, percent_decode(value)?))
        })
    };
    let param = |name: &str| {
        params()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    };
    let split_streams = |list: &str| -> Vec<String> {
        list.split('/')
            .filter(|stream| !stream.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if path == "/fapi/v1/depth" || path == "/api/v3/depth" {
        return Route::Depth {
            symbol: param("symbol"),
            limit: param("limit"),
        };
    }
    let (entry, rest) = if let Some(rest) = path.strip_prefix("/public") {
        (Some(EntryPoint::Public), rest)
    } else if let Some(rest) = path.strip_prefix("/market") {
        (Some(EntryPoint::Market), rest)
    } else {
        (None, path)
    };
    let stream = match rest {
        "/ws" | "/ws/" => Some((Vec::new(), false)),
        "/stream" | "/stream/" => Some((
            param("streams")
                .map(|list| split_streams(&list))
                .unwrap_or_default(),
            true,
        )),
        _ => rest
            .strip_prefix("/ws/")
            .and_then(percent_decode)
            .map(|list| (split_streams(&list), false)),
    };
    match (entry, stream) {
        (Some(entry), Some((streams, combined))) => Route::Stream {
            streams,
            combined,
            entry,
        },
        (None, Some((streams, combined))) => Route::Single { streams, combined },
        _ => Route::NotFound,
    }
}

/// Decodes `%XX` escapes (clients may send `@` as `%40`); `None` for a bad escape or non-UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(byte);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Checks an upgrade request (RFC 6455 section 4.2.1) and returns the 101 response, or the
/// status and message of the refusal.
pub fn upgrade_response(request: &Request) -> Result<Vec<u8>, (u16, &'static str)> {
    if request.method != "GET" || request.version != "HTTP/1.1" {
        return Err((400, "a WebSocket upgrade is a GET over HTTP/1.1"));
    }
    if request.header("host").is_none() {
        return Err((400, "missing Host header"));
    }
    if !request.header_has_token("connection", "upgrade") {
        return Err((400, "the Connection header does not hold Upgrade"));
    }
    if request.header("sec-websocket-version") != Some("13") {
        return Err((426, "Sec-WebSocket-Version must be 13"));
    }
    let key = request
        .header("sec-websocket-key")
        .ok_or((400, "missing Sec-WebSocket-Key"))?;
    let nonce_ok = base64::engine::general_purpose::STANDARD
        .decode(key)
        .is_ok_and(|nonce| nonce.len() == 16);
    if !nonce_ok {
        return Err((400, "Sec-WebSocket-Key is not 16 bytes in base64"));
    }
    let accept = accept_key(key.as_bytes());
    let mut response = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
        Connection: Upgrade\r\nSec-WebSocket-Accept: "
        .to_vec();
    response.extend_from_slice(&accept);
    response.extend_from_slice(b"\r\n\r\n");
    Ok(response)
}

/// A complete response with a body and its exact `Content-Length`.
pub fn response(status: u16, content_type: &str, body: &[u8], keep_alive: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: {connection}\r\n",
        body.len()
    )
    .into_bytes();
    if status == 426 {
        out.extend_from_slice(b"Sec-WebSocket-Version: 13\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A JSON response in Binance's error shape, `{"code":..,"msg":".."}`.
pub fn json_error(status: u16, code: i64, msg: &str, keep_alive: bool) -> Vec<u8> {
    let msg = serde_json::Value::String(msg.to_owned());
    let body = format!("{{\"code\":{code},\"msg\":{msg}}}");
    response(status, "application/json", body.as_bytes(), keep_alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_head_and_leaves_what_follows() {
        let input = b"GET /ws/btcusdt@depth HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\r\n\x81";
        let (request, consumed) = parse_request(input).unwrap().unwrap();
        assert_eq!(consumed, input.len() - 1);
        assert!(request.header_has_token("CONNECTION", "upgrade"));
        assert_eq!(request.header("host"), Some("x"));
        assert!(parse_request(&input[..20]).unwrap().is_none());
        assert!(parse_request(b"GET\r\n\r\n").is_err());
    }

    #[test]
    fn routes_the_venue_paths() {
        assert_eq!(
            route("/public/stream?streams=btcusdt@bookTicker/ethusdt%40depth@100ms"),
            Route::Stream {
                streams: vec!["btcusdt@bookTicker".into(), "ethusdt@depth@100ms".into()],
                combined: true,
                entry: EntryPoint::Public,
            }
        );
        assert_eq!(
            route("/market/ws/btcusdt@aggTrade"),
            Route::Stream {
                streams: vec!["btcusdt@aggTrade".into()],
                combined: false,
                entry: EntryPoint::Market,
            }
        );
        assert_eq!(
            route("/public/ws"),
            Route::Stream {
                streams: vec![],
                combined: false,
                entry: EntryPoint::Public,
            }
        );
        // The single entry point, in both modes (retired for USD-M).
        assert_eq!(
            route("/stream?streams=btcusdt@bookTicker"),
            Route::Single {
                streams: vec!["btcusdt@bookTicker".into()],
                combined: true
            }
        );
        assert_eq!(
            route("/ws/btcusdt@aggTrade"),
            Route::Single {
                streams: vec!["btcusdt@aggTrade".into()],
                combined: false
            }
        );
        assert_eq!(
            route("/ws"),
            Route::Single {
                streams: vec![],
                combined: false
            }
        );
        assert_eq!(route("/private2/ws"), Route::NotFound);
        assert_eq!(
            route("/fapi/v1/depth?limit=5&symbol=BTCUSDT"),
            Route::Depth {
                symbol: Some("BTCUSDT".into()),
                limit: Some("5".into())
            }
        );
        assert_eq!(route("/fapi/v1/ticker"), Route::NotFound);
        assert_eq!(route("/public/ws/%zz"), Route::NotFound);
    }

    #[test]
    fn entry_points_serve_the_notices_streams() {
        for stream in [
            "btcusdt@bookTicker",
            "btcusdt@depth",
            "btcusdt@depth@100ms",
            "btcusdt@depth20@500ms",
            "btcusdt@trade",
            "btcusdt@rpiDepth@500ms",
            "!bookTicker",
        ] {
            assert!(EntryPoint::Public.serves(stream), "{stream}");
            assert!(!EntryPoint::Market.serves(stream), "{stream}");
        }
        for stream in [
            "btcusdt@aggTrade",
            "btcusdt@markPrice",
            "btcusdt@markPrice@1s",
            "btcusdt@kline_1m",
            "!forceOrder@arr",
            "btcusdt@depthx",
        ] {
            assert!(EntryPoint::Market.serves(stream), "{stream}");
            assert!(!EntryPoint::Public.serves(stream), "{stream}");
        }
    }

    #[test]
    fn the_upgrade_answers_with_the_rfc_example_accept_key() {
        // RFC 6455 section 1.3's example nonce and accept value.
        let (request, _) = parse_request(
            b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        let response = String::from_utf8(upgrade_response(&request).unwrap()).unwrap();
        assert!(response.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    }
}
