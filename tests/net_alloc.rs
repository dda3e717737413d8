//! Issue 32: the network thread allocates nothing in steady state. The engine is polled on this
//! thread, as the network thread polls it, against the simulator (in-process, its own threads)
//! streaming Binance messages over TLS and WebSocket, with a ping every 200 ms that the engine
//! answers; after a warm-up (the connection, the handshakes, the first messages), the
//! allocations of polling and draining the frame ring are counted by the binary's counting
//! allocator (this thread's only): none, on each backend and wait mode.

use crate::support::counting_alloc::allocations;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::engine::{
    split_frame, split_tag, NetEngine, StreamEvent, StreamSpec, WebSocketTarget,
};
use tickwire::net::{BackendChoice, NetError, Transport, TransportConfig, WaitMode};
use tickwire::ring::frame_ring;
use tickwire::tls::{server_name, TlsSettings};
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::{Pace, Sim, SimOptions};

/// Messages received before counting, then counted.
const WARM_UP: u64 = 5_000;
const COUNTED: u64 = 20_000;

#[test]
fn polling_a_tls_websocket_stream_allocates_nothing() {
    for backend in [BackendChoice::IoUring, BackendChoice::Epoll] {
        for wait in [
            WaitMode::BusyPoll,
            WaitMode::Block {
                timeout: Duration::from_millis(2),
            },
        ] {
            let name = format!("{backend:?}/{wait:?}");
            let config = TransportConfig::default();
            let transport = match Transport::open(backend, config, Clock::monotonic()) {
                Ok((transport, _)) => transport,
                Err(NetError::UringSetup(error)) => {
                    println!("SKIPPED {name}: {error}");
                    continue;
                }
                Err(error) => panic!("{name}: {error}"),
            };
            let dir = tempfile::tempdir().expect("temporary directory");
            let mut options = SimOptions::new(dir.path().join("certs"));
            options.pace = Pace::Recorded { speed: 1.0 };
            // A ping every 200 ms (the venue counts pongs against its 10 messages a second),
            // each answered with a pong (TLS and WebSocket writes in the
            // steady state too); a missing pong would close the stream within a second.
            options.ping_interval = Duration::from_millis(200);
            options.pong_timeout = Duration::from_secs(1);
            let source = SyntheticSource::new(SyntheticConfig {
                symbols: 2,
                rate_per_sec: 20_000.0,
                channels: vec!["bookTicker".to_owned(), "aggTrade".to_owned()],
                ..SyntheticConfig::default()
            })
            .expect("source");
            let sim = Sim::start(options, Box::new(source)).expect("simulator");
            let (producer, mut frames) = frame_ring(16 << 20);
            let mut engine = NetEngine::new(transport, producer, wait, config.max_connections);
            let tls = TlsSettings::new()
                .extra_ca_file(sim.ca_pem_path())
                .build()
                .expect("TLS");
            let path = "/public/stream?streams=btcusdt@bookTicker/ethusdt@bookTicker";
            engine
                .open(
                    0,
                    StreamSpec {
                        addr: sim.addr(),
                        tls: Some((tls, server_name(sim.host(), None).expect("name"))),
                        preamble: None,
                        websocket: Some(WebSocketTarget {
                            host: sim.host().to_owned(),
                            port: sim.addr().port(),
                            path: path.to_owned(),
                            secure: true,
                            max_message_bytes: 1 << 20,
                            headers: Vec::new(),
                        }),
                    },
                )
                .expect("open");

            let mut events = Vec::with_capacity(64);
            let mut received = 0_u64;
            let mut bytes = 0_u64;
            let mut counted_from = None;
            let deadline = Instant::now() + Duration::from_secs(60);
            while received < WARM_UP + COUNTED {
                assert!(
                    Instant::now() < deadline,
                    "{name}: {received} messages in 60 s"
                );
                if received >= WARM_UP && counted_from.is_none() {
                    counted_from = Some(allocations());
                }
                engine
                    .poll(&mut |conn, event| events.push((conn, event)))
                    .expect("poll");
                frames.drain(usize::MAX, |tag, frame| {
                    let (conn, _) = split_tag(tag);
                    let (_, payload) = split_frame(frame).expect("a timestamped frame");
                    assert_eq!(conn, 0);
                    received += 1;
                    bytes += payload.len() as u64;
                });
                for (_, event) in events.drain(..) {
                    if let StreamEvent::Closed { close_code, error } = event {
                        panic!("{name}: closed ({close_code:?}, {error:?})");
                    }
                }
            }
            let allocated = allocations() - counted_from.expect("counted");
            println!(
                "{name}: {COUNTED}+ messages ({bytes} bytes in all) polled with {allocated} \
                 allocations"
            );
            assert_eq!(allocated, 0, "{name}: the network engine allocated");
            assert!(
                !engine.take_overflow(0),
                "{name}: the frame ring overflowed"
            );
            drop(engine);
            drop(sim);
        }
    }
}
