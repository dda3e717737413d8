//! The network engine end to end over loopback against independent servers the test starts:
//! Python's `websockets` over TLS with a throwaway CA (fragmented messages, a ping, a 10 MiB
//! message, an echo, a server close), a TLS server whose certificate names another host, and a
//! server that speaks plain HTTP. Every case runs on both backends (io_uring skips with a printed
//! reason where it cannot be set up).
//!
//! Needs `python3` with `websockets` (`pip install websockets`; `.ci/run` installs it). Without
//! it the tests skip with a printed reason, unless `TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS=1` (set by
//! `.ci/run`) turns the skip into a failure.

use crate::support::common;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::engine::{
    split_frame, split_tag, FrameKind, NetEngine, StreamError, StreamEvent, StreamSpec,
    WebSocketTarget,
};
use tickwire::net::{BackendChoice, NetError, Transport, TransportConfig, WaitMode};
use tickwire::ring::{frame_ring, FrameConsumer};
use tickwire::tls::{server_name, TlsSettings};

const BIG: usize = 10 * 1024 * 1024;

/// A throwaway CA and a server certificate for `names`, as PEM files in `dir`.
fn certificates(dir: &Path, names: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let cert = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(scenario: &str, tls: Option<(&Path, &Path)>) -> Server {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/ws_server.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(scenario);
    if let Some((cert, key)) = tls {
        command.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .strip_prefix("READY ")
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("server did not start: {line:?}"));
    Server { child, port }
}

fn engines(ring_bytes: usize) -> Vec<(String, NetEngine, FrameConsumer)> {
    let mut out = Vec::new();
    for backend in [BackendChoice::IoUring, BackendChoice::Epoll] {
        for wait in [
            WaitMode::BusyPoll,
            WaitMode::Block {
                timeout: Duration::from_millis(2),
            },
        ] {
            let config = TransportConfig::default();
            match Transport::open(backend, config, Clock::monotonic()) {
                Ok((transport, _)) => {
                    let (tx, rx) = frame_ring(ring_bytes);
                    out.push((
                        format!("{backend:?}/{wait:?}"),
                        NetEngine::new(transport, tx, wait, config.max_connections),
                        rx,
                    ));
                }
                Err(NetError::UringSetup(error)) => crate::support::common::skip_io_uring(&error),
                Err(error) => panic!("{error}"),
            }
        }
    }
    out
}

fn wss_spec(port: u16, ca: &Path, host: &str) -> StreamSpec {
    let config = TlsSettings::new().extra_ca_file(ca).build().unwrap();
    StreamSpec {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        tls: Some((config, server_name(host, None).unwrap())),
        preamble: None,
        websocket: Some(WebSocketTarget {
            host: host.to_owned(),
            port,
            path: "/stream?streams=btcusdt@bookTicker".to_owned(),
            secure: true,
            max_message_bytes: 16 << 20,
            headers: Vec::new(),
        }),
    }
}

/// The messages a stream received, its close code and its error.
type Outcome = (Vec<(FrameKind, Vec<u8>)>, Option<u16>, Option<StreamError>);

/// Polls until the stream closes; returns the messages received and the close.
fn run_to_close(
    name: &str,
    engine: &mut NetEngine,
    frames: &mut FrameConsumer,
    on_open: &[&str],
    already_open: bool,
) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut messages = Vec::new();
    let mut closed = None;
    let mut opened = already_open;
    let mut last_ts = 0;
    while closed.is_none() {
        assert!(
            Instant::now() < deadline,
            "{name}: no close after 60 s; got {} messages",
            messages.len()
        );
        let mut events = Vec::new();
        engine
            .poll(&mut |conn, event| events.push((conn, event)))
            .unwrap();
        frames.drain(usize::MAX, |tag, frame| {
            let (conn, kind) = split_tag(tag);
            assert_eq!(conn, 7, "{name}");
            let (ts, payload) = split_frame(frame).expect("timestamped frame");
            assert!(ts >= last_ts, "{name}: receive timestamps went back");
            last_ts = ts;
            messages.push((kind, payload.to_vec()));
        });
        for (conn, event) in events {
            assert_eq!(conn, 7, "{name}");
            match event {
                StreamEvent::Open => {
                    opened = true;
                    for text in on_open {
                        engine.send_text(7, text).unwrap();
                    }
                }
                StreamEvent::Closed { close_code, error } => closed = Some((close_code, error)),
                StreamEvent::Connected | StreamEvent::Secured => {}
            }
        }
    }
    let (code, error) = closed.unwrap();
    if error.is_none() {
        assert!(opened, "{name}: closed cleanly without opening");
    }
    (messages, code, error)
}

#[test]
fn websocket_over_tls_against_python_websockets() {
    if !common::python_websockets_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path(), &["localhost", "127.0.0.1"]);
    for (name, mut engine, mut frames) in engines(64 << 20) {
        let server = start_server("script", Some((&cert, &key)));
        engine
            .open(7, wss_spec(server.port, &ca, "localhost"))
            .unwrap();
        let (messages, code, error) =
            run_to_close(&name, &mut engine, &mut frames, &["subscribe"], false);
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(code, Some(4000), "{name}");
        let texts: Vec<String> = messages
            .iter()
            .filter(|(kind, _)| *kind == FrameKind::Text)
            .map(|(_, bytes)| String::from_utf8(bytes.clone()).unwrap())
            .collect();
        assert_eq!(
            texts,
            ["hello", "frag-mented", "pong-ok", "echo:subscribe"],
            "{name}"
        );
        let binary: Vec<&Vec<u8>> = messages
            .iter()
            .filter(|(kind, _)| *kind == FrameKind::Binary)
            .map(|(_, bytes)| bytes)
            .collect();
        assert_eq!(binary.len(), 1, "{name}");
        assert_eq!(binary[0].len(), BIG, "{name}");
        assert!(
            binary[0]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == ((i * 7) % 251) as u8),
            "{name}: the 10 MiB message is corrupted"
        );
        assert_eq!(messages[3].0, FrameKind::Binary, "{name}: out of order");
    }
}

#[test]
fn a_certificate_for_another_name_is_a_clear_tls_error() {
    if !common::python_websockets_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path(), &["other.example"]);
    for (name, mut engine, mut frames) in engines(1 << 20) {
        let server = start_server("script", Some((&cert, &key)));
        engine
            .open(7, wss_spec(server.port, &ca, "localhost"))
            .unwrap();
        let (messages, _, error) = run_to_close(&name, &mut engine, &mut frames, &[], false);
        assert!(messages.is_empty(), "{name}");
        let message = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("TLS")
                && message.contains("localhost")
                && message.contains("other.example"),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_plain_http_server_is_a_clear_error() {
    if !common::python_websockets_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ca, _, _) = certificates(dir.path(), &["localhost"]);
    for (name, mut engine, mut frames) in engines(1 << 20) {
        // wss:// to a server that speaks plain HTTP: TLS sees no TLS.
        let server = start_server("http", None);
        engine
            .open(7, wss_spec(server.port, &ca, "localhost"))
            .unwrap();
        let (_, _, error) = run_to_close(&name, &mut engine, &mut frames, &[], false);
        let message = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("TLS"), "{name}: {message}");
        drop(server);
        // ws:// to it: the upgrade is answered 200 instead of 101.
        let server = start_server("http", None);
        let spec = StreamSpec {
            addr: SocketAddr::from(([127, 0, 0, 1], server.port)),
            tls: None,
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: "localhost".to_owned(),
                port: server.port,
                path: "/".to_owned(),
                secure: false,
                max_message_bytes: 1 << 20,
                headers: Vec::new(),
            }),
        };
        engine.open(7, spec).unwrap();
        let (_, _, error) = run_to_close(&name, &mut engine, &mut frames, &[], false);
        let message = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("200") && message.contains("101"),
            "{name}: {message}"
        );
    }
}

/// A full frame ring never blocks the network loop: the message is dropped, counted against its
/// stream and the stream flagged; once the decoder catches up, messages flow again.
#[test]
fn a_full_frame_ring_drops_counts_and_flags_without_blocking() {
    use std::io::{Read, Write};
    const FIRST: usize = 200;
    for (name, mut engine, mut frames) in engines(64 * 1024) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).unwrap();
                request.extend_from_slice(&buf[..n]);
            }
            let text = String::from_utf8_lossy(&request).to_string();
            let key = text
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("sec-websocket-key")
                        .then(|| value.trim().to_owned())
                })
                .unwrap();
            let accept = tickwire::ws::accept_key(key.as_bytes());
            write!(
                stream,
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Accept: {}\r\n\r\n",
                String::from_utf8_lossy(&accept)
            )
            .unwrap();
            // 200 binary messages of 1000 bytes: 200 KB into a 64 KiB ring nobody drains.
            for seq in 0..FIRST {
                let mut frame = vec![0x82, 126];
                frame.extend_from_slice(&1000u16.to_be_bytes());
                frame.extend(std::iter::repeat_n(seq as u8, 1000));
                stream.write_all(&frame).unwrap();
            }
            go_rx.recv().unwrap();
            // After the test drained the ring: one more message, then a close.
            stream.write_all(&[0x81, 0x04]).unwrap();
            stream.write_all(b"last").unwrap();
            stream.write_all(&[0x88, 0x02, 0x03, 0xe8]).unwrap();
            let _ = stream.read(&mut buf);
        });
        let spec = StreamSpec {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            tls: None,
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: "127.0.0.1".to_owned(),
                port,
                path: "/".to_owned(),
                secure: false,
                max_message_bytes: 1 << 20,
                headers: Vec::new(),
            }),
        };
        engine.open(7, spec).unwrap();
        // Poll without draining until every message was either written or dropped.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            engine.poll(&mut |_, _| {}).unwrap();
            let stats = engine.stats(7).expect("stream open");
            if stats.messages + stats.dropped == FIRST as u64 {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: {stats:?}");
        }
        let stats = engine.stats(7).unwrap();
        assert!(stats.dropped > 0 && stats.overflowed, "{name}: {stats:?}");
        assert!(engine.take_overflow(7), "{name}");
        assert!(
            !engine.take_overflow(7),
            "{name}: the flag clears once taken"
        );
        // What was kept is whole and in order.
        let mut kept = Vec::new();
        frames.drain(usize::MAX, |_, frame| {
            let (_, payload) = split_frame(frame).unwrap();
            assert_eq!(payload.len(), 1000);
            kept.push(payload[0]);
        });
        assert_eq!(kept.len() as u64, stats.messages, "{name}");
        assert!(kept.windows(2).all(|pair| pair[0] < pair[1]), "{name}");
        go_tx.send(()).unwrap();
        let (messages, code, error) = run_to_close(&name, &mut engine, &mut frames, &[], true);
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(code, Some(1000), "{name}");
        assert_eq!(messages, [(FrameKind::Text, b"last".to_vec())], "{name}");
        server.join().unwrap();
    }
}
