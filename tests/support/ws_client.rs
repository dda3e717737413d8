//! A blocking WebSocket client for the simulator tests: tickwire's sans-IO `ws::Client` over a
//! rustls stream that trusts the run's CA, so that a test sees pings, pongs, close codes and
//! replies one by one.

use rustls::{ClientConnection, StreamOwned};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use tickwire::tls::{server_name, TlsSettings};
use tickwire::ws;

/// A TLS stream over loopback.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// What the next read gave.
#[derive(Debug, PartialEq)]
pub enum WsEvent {
    Text(String),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
    /// The server closed TCP.
    Eof,
    /// Nothing within the timeout.
    Timeout,
}

/// A TLS connection to `addr`, checking the certificate for `host` against the CA in `ca_pem`.
pub fn tls_stream(addr: SocketAddr, host: &str, ca_pem: &Path) -> TlsStream {
    let config = TlsSettings::new().extra_ca_file(ca_pem).build().unwrap();
    let session = ClientConnection::new(config, server_name(host, None).unwrap()).unwrap();
    StreamOwned::new(session, TcpStream::connect(addr).unwrap())
}

/// Sends the upgrade request for `path` and reads the answer: `Ok` with the bytes after a valid
/// 101 response, `Err` with the response head otherwise.
pub fn upgrade(
    tls: &mut TlsStream,
    host: &str,
    path: &str,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let port = tls.sock.peer_addr().unwrap().port();
    let mut handshake = ws::Handshake::new().unwrap();
    let request = handshake
        .request(&ws::Request {
            host,
            port,
            secure: true,
            path,
            headers: &[],
        })
        .unwrap();
    tls.write_all(&request).unwrap();
    tls.sock.set_read_timeout(Some(timeout)).unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match handshake.parse_response(&received) {
            Ok(ws::HandshakeStatus::Done { consumed }) => {
                received.drain(..consumed);
                return Ok(received);
            }
            Ok(_) => {}
            Err(_) => return Err(String::from_utf8_lossy(&received).into_owned()),
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(String::from_utf8_lossy(&received).into_owned()),
            Ok(read) => received.extend_from_slice(&chunk[..read]),
        }
    }
}

/// An open WebSocket connection read one event at a time.
pub struct WsTestClient {
    pub tls: TlsStream,
    pub ws: ws::Client,
    received: Vec<u8>,
    /// Whether the pongs the sans-IO client queues for pings are sent (a client that ignores
    /// pings sends none).
    pub auto_pong: bool,
}

impl WsTestClient {
    /// Connects, upgrades to `path` and panics if the server does not accept.
    pub fn connect(
        addr: SocketAddr,
        host: &str,
        ca_pem: &Path,
        path: &str,
        timeout: Duration,
    ) -> WsTestClient {
        let mut tls = tls_stream(addr, host, ca_pem);
        let received = upgrade(&mut tls, host, path, timeout)
            .unwrap_or_else(|head| panic!("the upgrade to {path} failed: {head}"));
        WsTestClient {
            tls,
            ws: ws::Client::new(ws::Config::default()).unwrap(),
            received,
            auto_pong: true,
        }
    }

    pub fn send_text(&mut self, text: &str) {
        self.ws
            .send(ws::MessageKind::Text, text.as_bytes())
            .unwrap();
        self.flush();
    }

    /// Sends whatever the sans-IO client queued.
    pub fn flush(&mut self) {
        let output = self.ws.output().to_vec();
        self.ws.consume_output(output.len());
        if !output.is_empty() {
            let _ = self.tls.write_all(&output);
        }
    }

    /// The next message or control frame, `Eof` when the server closed TCP, `Timeout` after
    /// `timeout` without either.
    pub fn next(&mut self, timeout: Duration) -> WsEvent {
        let deadline = Instant::now() + timeout;
        loop {
            let (consumed, event) = {
                let read = self.ws.read(&self.received).expect("valid server frames");
                let event = match read.event {
                    ws::Event::Message { payload, .. } => Some(WsEvent::Text(
                        String::from_utf8(payload.to_vec()).expect("UTF-8 text"),
                    )),
                    ws::Event::Ping { payload } => Some(WsEvent::Ping(payload.to_vec())),
                    ws::Event::Pong { payload } => Some(WsEvent::Pong(payload.to_vec())),
                    ws::Event::Close { code, reason } => {
                        Some(WsEvent::Close(code, reason.to_owned()))
                    }
                    ws::Event::NeedMore
                    | ws::Event::Partial
                    | ws::Event::Discarded
                    | ws::Event::Closed => None,
                };
                (read.consumed, event)
            };
            self.received.drain(..consumed);
            if self.auto_pong || matches!(event, Some(WsEvent::Close(..))) {
                self.flush();
            } else {
                // A client that ignores pings: its queued pongs are never sent.
                let pending = self.ws.output().len();
                self.ws.consume_output(pending);
            }
            if let Some(event) = event {
                return event;
            }
            if consumed > 0 {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return WsEvent::Timeout;
            }
            self.tls
                .sock
                .set_read_timeout(Some(deadline - now))
                .unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.tls.read(&mut chunk) {
                Ok(0) => return WsEvent::Eof,
                Ok(read) => self.received.extend_from_slice(&chunk[..read]),
                Err(error)
                    if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return WsEvent::Timeout
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                    ) =>
                {
                    return WsEvent::Eof
                }
                Err(error) => panic!("read failed: {error}"),
            }
        }
    }
}
