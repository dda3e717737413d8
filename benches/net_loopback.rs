//! End-to-end loopback benchmark of the network engine: from the moment a local server hands a
//! WebSocket frame to the kernel (`write`) to the moment its payload sits in the frame ring, for
//! both backends (io_uring, epoll) and both wait modes (busy-poll, block), beside a raw-TCP
//! busy-polling reader (a non-blocking `recv` loop, no WebSocket) as the physical floor.
//!
//! The server thread (pinned to one core) writes 180-byte text frames, each carrying the
//! clock's time just before its `write`; the engine (pinned to the other core) polls, and after
//! each poll the bench drains the ring on the same thread and records now minus the embedded
//! time. Every payload is checked (sequence number, length) before it counts.
//!
//! Two runs per variant: `paced` (one message every 50 us: latency, the number to quote) and
//! `burst` (as fast as the server can write: messages per second).
//!
//! Run: `cargo bench --bench net_loopback` (`TICKWIRE_BENCH_MESSAGES`, default 20000 per run;
//! `TICKWIRE_BENCH_CORES=S,E` for the server and engine cores).

use hdrhistogram::Histogram;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::engine::{split_frame, NetEngine, StreamEvent, StreamSpec, WebSocketTarget};
use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
use tickwire::ring::frame_ring;

const PAYLOAD_BYTES: usize = 180;
const PACE: Duration = Duration::from_micros(50);

fn cores() -> (usize, usize) {
    if let Ok(text) = std::env::var("TICKWIRE_BENCH_CORES") {
        let cores: Vec<usize> = text
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        if let [server, engine] = cores[..] {
            return (server, engine);
        }
    }
    let ids = tickwire::thread::allowed_cores();
    match ids[..] {
        [.., server, engine] => (server, engine),
        [only] => (only, only),
        [] => (0, 0),
    }
}

fn pin(core: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

/// A server frame (unmasked) with a text payload: `seq ts padding`, 180 bytes.
fn frame(seq: u64, ts: u64, out: &mut Vec<u8>) {
    out.clear();
    // FIN and opcode 1 (text); 180 > 125, so length 126 and a 16-bit length follow.
    out.push(0x81);
    out.push(126);
    out.extend_from_slice(&(PAYLOAD_BYTES as u16).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(format!("{seq:020} {ts:020} ").as_bytes());
    out.resize(start + PAYLOAD_BYTES, b'x');
}

fn parse_payload(payload: &[u8]) -> Option<(u64, u64)> {
    if payload.len() != PAYLOAD_BYTES {
        return None;
    }
    let text = std::str::from_utf8(&payload[..42]).ok()?;
    let mut parts = text.split(' ');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Accepts one connection, answers the upgrade, then writes `count` frames (paced or not).
fn server(listener: TcpListener, clock: Clock, count: u64, paced: bool, core: usize) {
    pin(core);
    let (mut stream, _) = listener.accept().expect("accept");
    stream.set_nodelay(true).ok();
    let mut request = Vec::new();
    let mut buf = [0u8; 2048];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = std::io::Read::read(&mut stream, &mut buf).expect("read request");
        assert!(n > 0, "client left during the upgrade");
        request.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&request);
    let key = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("Sec-WebSocket-Key: ")
                .or_else(|| line.strip_prefix("sec-websocket-key: "))
        })
        .expect("key")
        .trim()
        .to_owned();
    let accept = String::from_utf8_lossy(&tickwire::ws::accept_key(key.as_bytes())).into_owned();
    write!(
        stream,
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    .expect("write response");
    // Give the client a moment to see the upgrade before timing starts.
    std::thread::sleep(Duration::from_millis(50));
    let mut out = Vec::with_capacity(256);
    for seq in 0..count {
        if paced {
            // Sleep, not spin: a venue's packets arrive from a NIC, and a server thread spinning
            // on its core would starve the kernel work (softirq) that delivers loopback traffic
            // from that core, which shows up as tick-sized (4 ms) delays on the receiving side.
            std::thread::sleep(PACE);
        }
        frame(seq, clock.now_ns(), &mut out);
        stream.write_all(&out).expect("write frame");
    }
    // Close frame, then wait for the client to go.
    stream.write_all(&[0x88, 0x02, 0x03, 0xe8]).ok();
    let _ = std::io::Read::read(&mut stream, &mut buf);
}

struct Result {
    latency: Histogram<u64>,
    elapsed: Duration,
    messages: u64,
}

fn run_engine(
    backend: BackendChoice,
    wait: WaitMode,
    clock: Clock,
    count: u64,
    paced: bool,
) -> Option<Result> {
    let (server_core, engine_core) = cores();
    let config = TransportConfig {
        max_connections: 4,
        ..TransportConfig::default()
    };
    let (transport, _) = match Transport::open(backend, config, clock) {
        Ok(opened) => opened,
        Err(error) => {
            println!("| {backend:?} | {wait:?} | unavailable: {error} |");
            return None;
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || server(listener, clock, count, paced, server_core));
    pin(engine_core);
    let (producer, mut frames) = frame_ring(8 << 20);
    let mut engine = NetEngine::new(transport, producer, wait, config.max_connections);
    engine
        .open(
            0,
            StreamSpec {
                addr,
                tls: None,
                preamble: None,
                websocket: Some(WebSocketTarget {
                    host: "127.0.0.1".into(),
                    port: addr.port(),
                    path: "/".into(),
                    secure: false,
                    max_message_bytes: 1 << 20,
                    headers: Vec::new(),
                }),
            },
        )
        .unwrap();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
    let mut expected = 0u64;
    let mut closed = false;
    let mut first: Option<Instant> = None;
    while !closed {
        engine
            .poll(&mut |_, event| {
                if let StreamEvent::Closed { error, .. } = event {
                    if let Some(error) = error {
                        panic!("stream failed: {error}");
                    }
                    closed = true;
                }
            })
            .unwrap();
        frames.drain(usize::MAX, |_, frame| {
            let now = clock.now_ns();
            let (_, payload) = split_frame(frame).expect("frame");
            let (seq, sent) = parse_payload(payload).expect("payload");
            assert_eq!(seq, expected, "lost or reordered message");
            expected += 1;
            first.get_or_insert_with(Instant::now);
            latency.saturating_record(now.saturating_sub(sent).max(1));
        });
    }
    server.join().unwrap();
    assert_eq!(expected, count, "not every message arrived");
    Some(Result {
        latency,
        elapsed: first.map_or(Duration::ZERO, |first| first.elapsed()),
        messages: expected,
    })
}

/// The floor: a non-blocking `recv` loop busy-polling the socket, parsing the same frames by
/// hand (no engine, no ring).
fn run_raw(clock: Clock, count: u64, paced: bool) -> Result {
    let (server_core, engine_core) = cores();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || server(listener, clock, count, paced, server_core));
    pin(engine_core);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        .unwrap();
    stream.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
    let mut expected = 0u64;
    let mut upgraded = false;
    let mut first: Option<Instant> = None;
    while expected < count {
        match std::io::Read::read(&mut stream, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let now = clock.now_ns();
                pending.extend_from_slice(&buf[..n]);
                if !upgraded {
                    if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        upgraded = true;
                    } else {
                        continue;
                    }
                }
                let mut at = 0;
                while pending.len() - at >= 4 + PAYLOAD_BYTES {
                    let payload = &pending[at + 4..at + 4 + PAYLOAD_BYTES];
                    let (seq, sent) = parse_payload(payload).expect("payload");
                    assert_eq!(seq, expected);
                    expected += 1;
                    first.get_or_insert_with(Instant::now);
                    latency.saturating_record(now.saturating_sub(sent).max(1));
                    at += 4 + PAYLOAD_BYTES;
                }
                pending.drain(..at);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(error) => panic!("{error}"),
        }
    }
    drop(stream);
    server.join().unwrap();
    Result {
        latency,
        elapsed: first.map_or(Duration::ZERO, |first| first.elapsed()),
        messages: expected,
    }
}

fn row(name: &str, mode: &str, result: &Result) {
    let h = &result.latency;
    println!(
        "| {name} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.9) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.value_at_quantile(0.999) as f64 / 1e3,
        h.max() as f64 / 1e3,
        result.messages as f64 / result.elapsed.as_secs_f64().max(1e-9) / 1e6,
    );
}

fn main() {
    let benching = std::env::args().any(|arg| arg == "--bench");
    let count: u64 = if benching {
        std::env::var("TICKWIRE_BENCH_MESSAGES")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(20_000)
    } else {
        200
    };
    let clock = Clock::calibrate();
    let (server_core, engine_core) = cores();
    println!(
        "net loopback: {count} messages of {PAYLOAD_BYTES} B per run; server on core {server_core}, engine on core {engine_core}; clock {:?}",
        clock.source()
    );
    let variants = [
        (
            BackendChoice::IoUring,
            "io_uring",
            WaitMode::BusyPoll,
            "busy-poll",
        ),
        (
            BackendChoice::IoUring,
            "io_uring",
            WaitMode::Block {
                timeout: Duration::from_millis(1),
            },
            "block",
        ),
        (
            BackendChoice::Epoll,
            "epoll",
            WaitMode::BusyPoll,
            "busy-poll",
        ),
        (
            BackendChoice::Epoll,
            "epoll",
            WaitMode::Block {
                timeout: Duration::from_millis(1),
            },
            "block",
        ),
    ];
    for (paced, title) in [
        (true, "paced, a 50 us sleep between messages"),
        (false, "burst"),
    ] {
        println!();
        println!("### {title}: write() on the server to payload in the frame ring");
        println!();
        println!("| path | wait | p50 us | p90 us | p99 us | p99.9 us | max us | M msg/s |");
        println!("|---|---|---|---|---|---|---|---|");
        let raw = run_raw(clock, count, paced);
        row("raw TCP recv loop (floor)", "busy-poll", &raw);
        for (backend, name, wait, mode) in variants {
            if let Some(result) = run_engine(backend, wait, clock, count, paced) {
                row(&format!("tickwire {name}"), mode, &result);
            }
        }
    }
}
