//! The opening handshake (RFC 6455 section 4.1): the request we write and every way the
//! server's answer can be right, incomplete or wrong.

use tickwire::config::Endpoint;
use tickwire::ws::{accept_key, Handshake, HandshakeError, HandshakeStatus, Request};

/// RFC 6455 section 1.3's example nonce, whose key is `dGhlIHNhbXBsZSBub25jZQ==`.
const RFC_NONCE: [u8; 16] = *b"the sample nonce";
const RFC_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

fn request(host: &str, port: u16, secure: bool, path: &str) -> String {
    let mut handshake = Handshake::with_nonce(RFC_NONCE);
    let bytes = handshake
        .request(&Request {
            host,
            port,
            secure,
            path,
            headers: &[],
        })
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

fn ok_response() -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {RFC_ACCEPT}\r\n\r\n"
    )
}

fn parse(response: &str) -> Result<HandshakeStatus, HandshakeError> {
    Handshake::with_nonce(RFC_NONCE).parse_response(response.as_bytes())
}

#[test]
fn rfc_accept_value() {
    assert_eq!(
        &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        RFC_ACCEPT.as_bytes()
    );
    assert_eq!(
        Handshake::with_nonce(RFC_NONCE).key(),
        "dGhlIHNhbXBsZSBub25jZQ=="
    );
}

#[test]
fn random_keys_are_16_bytes_of_base64_and_differ() {
    let first = Handshake::new().unwrap();
    let second = Handshake::new().unwrap();
    assert_eq!(first.key().len(), 24);
    assert!(first.key().ends_with("=="));
    assert_ne!(first.key(), second.key());
}

#[test]
fn request_text() {
    assert_eq!(
        request(
            "fstream.binance.com",
            443,
            true,
            "/stream?streams=btcusdt@bookTicker"
        ),
        "GET /stream?streams=btcusdt@bookTicker HTTP/1.1\r\n\
         Host: fstream.binance.com\r\n\
         Upgrade: websocket\r\n\
         Connection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    // The port appears only when it is not the scheme's default.
    assert!(request("h", 80, false, "/").contains("\r\nHost: h\r\n"));
    assert!(request("h", 443, false, "/").contains("\r\nHost: h:443\r\n"));
    assert!(request("h", 9443, true, "/").contains("\r\nHost: h:9443\r\n"));
    assert!(request("::1", 9001, false, "/").contains("\r\nHost: [::1]:9001\r\n"));
}

#[test]
fn request_from_an_endpoint_with_extra_headers() {
    let endpoint = Endpoint::parse("wss://fstream.binance.com/ws/btcusdt@depth@0ms").unwrap();
    let headers = [
        ("Origin", "https://example.com"),
        ("Sec-WebSocket-Protocol", "json"),
    ];
    let mut handshake = Handshake::with_nonce(RFC_NONCE);
    let text = handshake
        .request(&Request {
            headers: &headers,
            ..Request::from_endpoint(&endpoint)
        })
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("GET /ws/btcusdt@depth@0ms HTTP/1.1\r\nHost: fstream.binance.com\r\n"));
    assert!(text.ends_with("Origin: https://example.com\r\nSec-WebSocket-Protocol: json\r\n\r\n"));
    // A subprotocol was offered, so the server may choose it.
    let response = ok_response().replace("\r\n\r\n", "\r\nSec-WebSocket-Protocol: json\r\n\r\n");
    assert!(matches!(
        handshake.parse_response(response.as_bytes()),
        Ok(HandshakeStatus::Done { .. })
    ));
}

#[test]
fn request_refuses_injection_and_duplicates() {
    let mut handshake = Handshake::with_nonce(RFC_NONCE);
    let base = Request {
        host: "h",
        port: 80,
        secure: false,
        path: "/",
        headers: &[],
    };
    for bad in [
        Request {
            host: "h\r\nX: y",
            ..base
        },
        Request { host: "", ..base },
        Request {
            path: "/a b",
            ..base
        },
        Request { path: "a", ..base },
        Request {
            headers: &[("X", "a\r\nInjected: 1")],
            ..base
        },
        Request {
            headers: &[("Bad Name", "v")],
            ..base
        },
        Request {
            headers: &[("host", "other")],
            ..base
        },
        Request {
            headers: &[("Sec-WebSocket-Extensions", "permessage-deflate")],
            ..base
        },
    ] {
        assert!(
            matches!(
                handshake.request(&bad),
                Err(HandshakeError::InvalidRequest(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn response_byte_by_byte_then_frames_stay_with_the_caller() {
    let mut bytes = ok_response().into_bytes();
    let header_len = bytes.len();
    bytes.extend_from_slice(&[0x81, 0x02, b'h', b'i']);
    let mut handshake = Handshake::with_nonce(RFC_NONCE);
    for end in 0..header_len {
        assert_eq!(
            handshake.parse_response(&bytes[..end]),
            Ok(HandshakeStatus::NeedMore),
            "after {end} bytes"
        );
    }
    assert_eq!(
        handshake.parse_response(&bytes),
        Ok(HandshakeStatus::Done {
            consumed: header_len
        })
    );
}

#[test]
fn response_in_two_pieces_at_every_split() {
    let bytes = ok_response().into_bytes();
    for cut in 0..bytes.len() {
        let mut handshake = Handshake::with_nonce(RFC_NONCE);
        assert_eq!(
            handshake.parse_response(&bytes[..cut]),
            Ok(HandshakeStatus::NeedMore)
        );
        assert_eq!(
            handshake.parse_response(&bytes),
            Ok(HandshakeStatus::Done {
                consumed: bytes.len()
            }),
            "cut {cut}"
        );
    }
}

#[test]
fn header_names_and_tokens_are_case_insensitive() {
    let response = format!(
        "HTTP/1.1 101 Web Socket Protocol Handshake\r\nupgrade: WebSocket\r\n\
         CONNECTION: keep-alive, UPGRADE\r\nServer: nginx\r\nsec-websocket-accept:{RFC_ACCEPT}  \r\n\r\n"
    );
    assert!(matches!(parse(&response), Ok(HandshakeStatus::Done { .. })));
}

#[test]
fn not_http_fails_at_once() {
    // A TLS alert (wss port spoken to in plain text), an SSH banner: no need to wait.
    let error = Handshake::with_nonce(RFC_NONCE)
        .parse_response(&[0x15, 0x03, 0x01])
        .unwrap_err();
    assert!(matches!(error, HandshakeError::NotHttp(_)));
    assert_eq!(
        error.to_string(),
        "the server did not answer in HTTP; its first bytes: \"\\x15\\x03\\x01\""
    );
    assert!(matches!(
        parse("SSH-2.0-OpenSSH_9.6\r\n"),
        Err(HandshakeError::NotHttp(_))
    ));
    assert_eq!(parse("HTT"), Ok(HandshakeStatus::NeedMore));
}

#[test]
fn wrong_status_is_named() {
    let error = parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").unwrap_err();
    assert_eq!(
        error.to_string(),
        "server answered 200 OK instead of 101 Switching Protocols"
    );
    // The status line is enough: the rest need not arrive.
    let error = parse("HTTP/1.1 404 Not Found\r\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "server answered 404 Not Found instead of 101 Switching Protocols"
    );
    let long_reason = format!("HTTP/1.1 400 {}\r\n", "x".repeat(200));
    let message = parse(&long_reason).unwrap_err().to_string();
    assert!(message.starts_with("server answered 400 xxx"), "{message}");
    assert!(
        message.contains("... instead of 101"),
        "truncated: {message}"
    );
    assert!(matches!(
        parse("HTTP/1.1 abc\r\n"),
        Err(HandshakeError::MalformedStatusLine(_))
    ));
}

#[test]
fn missing_or_wrong_headers() {
    let without = |name: &str| {
        ok_response()
            .split("\r\n")
            .filter(|line| !line.starts_with(name))
            .collect::<Vec<_>>()
            .join("\r\n")
    };
    assert_eq!(
        parse(&without("Upgrade")),
        Err(HandshakeError::MissingHeader("Upgrade"))
    );
    assert_eq!(
        parse(&without("Connection")),
        Err(HandshakeError::MissingHeader("Connection"))
    );
    assert_eq!(
        parse(&without("Sec-WebSocket-Accept")),
        Err(HandshakeError::MissingHeader("Sec-WebSocket-Accept"))
    );
    let wrong_upgrade = ok_response().replace("Upgrade: websocket", "Upgrade: h2c");
    assert_eq!(
        parse(&wrong_upgrade).unwrap_err().to_string(),
        "the response's `Upgrade` header is \"h2c\", expected \"websocket\""
    );
    let wrong_connection = ok_response().replace("Connection: Upgrade", "Connection: close");
    assert!(matches!(
        parse(&wrong_connection),
        Err(HandshakeError::UnexpectedHeader {
            name: "Connection",
            ..
        })
    ));
    let wrong_accept = ok_response().replace(RFC_ACCEPT, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    let error = parse(&wrong_accept).unwrap_err();
    assert!(matches!(error, HandshakeError::AcceptMismatch { .. }));
    assert!(error.to_string().contains(RFC_ACCEPT), "{error}");
    let extension = ok_response().replace(
        "\r\n\r\n",
        "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
    );
    assert!(matches!(
        parse(&extension),
        Err(HandshakeError::UnexpectedHeader {
            name: "Sec-WebSocket-Extensions",
            ..
        })
    ));
    let protocol = ok_response().replace("\r\n\r\n", "\r\nSec-WebSocket-Protocol: chat\r\n\r\n");
    assert!(matches!(
        parse(&protocol),
        Err(HandshakeError::UnexpectedHeader {
            name: "Sec-WebSocket-Protocol",
            ..
        })
    ));
    let folded = ok_response().replace("\r\n\r\n", "\r\n folded\r\n\r\n");
    assert!(matches!(
        parse(&folded),
        Err(HandshakeError::MalformedHeader(_))
    ));
}

#[test]
fn oversized_header_block_is_refused() {
    let mut response = "HTTP/1.1 101 Switching Protocols\r\n".to_owned();
    while response.len() < 17 * 1024 {
        response.push_str("X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let mut handshake = Handshake::with_nonce(RFC_NONCE);
    // Fed in pieces, as it would arrive; it fails once 16 KiB have come with no end.
    let mut result = Ok(HandshakeStatus::NeedMore);
    for end in (0..=response.len()).step_by(1000) {
        result = handshake.parse_response(&response.as_bytes()[..end]);
        if result.is_err() {
            assert!(end >= 16 * 1024);
            break;
        }
    }
    assert_eq!(result, Err(HandshakeError::HeaderTooLarge));
}
