//! Client pings and per-slot last-read times through the runtime, against the simulator on
//! loopback: `Runtime::ping` reaches the server as ping frames whose pongs are read and dropped,
//! never delivered, and `Runtime::last_read_ns` advances while bytes arrive and stands still
//! while the simulator stalls (`Faults::stall_after`). Every case runs on both backends (io_uring
//! skips with a printed reason where it cannot be set up).
//!
//! The runtime is driven without a control `Session`, so no lifecycle timer (staleness,
//! rotation, reconnects) acts on the stream behind the test's back; slot 0 has no venue feed, so
//! every frame the network thread delivers is counted in `frames_undecoded`.

use std::path::Path;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config;
use tickwire::net::engine::{StreamSpec, WebSocketTarget};
use tickwire::net::{BackendChoice, NetError, Transport, TransportConfig};
use tickwire::pipeline::{NetStatus, NetStatusKind, Runtime, RuntimeOptions};
use tickwire::tls::{server_name, TlsSettings};
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::{Faults, Sim, SimHandle, SimOptions};

const CONN: u32 = 0;
const DEADLINE: Duration = Duration::from_secs(5);

/// The configured backends this host can run, by their config names.
fn backends() -> Vec<&'static str> {
    let mut out = Vec::new();
    match Transport::open(
        BackendChoice::IoUring,
        TransportConfig::default(),
        Clock::monotonic(),
    ) {
        Ok(_) => out.push("io-uring"),
        Err(NetError::UringSetup(error)) => crate::support::common::skip_io_uring(&error),
        Err(error) => panic!("{error}"),
    }
    out.push("epoll");
    out
}

struct Client {
    runtime: Runtime,
    sim: SimHandle,
    clock: Clock,
    backend: &'static str,
    statuses: Vec<NetStatus>,
    _dir: tempfile::TempDir,
}

impl Client {
    /// A simulator replaying a synthetic BTCUSDT bookTicker at `rate_per_sec` with `faults`,
    /// and a runtime on `backend` with one stream open on slot 0 at `path`.
    fn start(backend: &'static str, rate_per_sec: f64, faults: Faults, path: &str) -> Client {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::calibrate();
        let mut options = SimOptions::new(dir.path().join("sim"));
        options.clock = clock;
        options.faults = faults;
        let source = SyntheticSource::new(SyntheticConfig {
            symbols: 1,
            rate_per_sec,
            channels: vec!["bookTicker".to_owned()],
            ..SyntheticConfig::default()
        })
        .unwrap();
        let sim = Sim::start(options, Box::new(source)).expect("the simulator starts");
        let config_path = write_config(dir.path(), backend);
        let loaded = config::load(&config_path).expect("the test config is valid");
        let runtime =
            Runtime::start(&loaded, clock, RuntimeOptions::default()).expect("the runtime starts");
        let mut client = Client {
            runtime,
            sim,
            clock,
            backend,
            statuses: Vec::new(),
            _dir: dir,
        };
        assert_eq!(client.runtime.last_read_ns(CONN), 0, "never opened");
        let before_open_ns = clock.now_ns();
        let spec = client.spec(path);
        client.runtime.open_stream(CONN, 1, spec).unwrap();
        client.wait_until("the stream opens", |client| {
            client
                .statuses
                .iter()
                .any(|status| matches!(status.kind, NetStatusKind::Open))
        });
        // Reset to the open time when the stream was opened; the handshake's reads since are
        // later still.
        let opened_read_ns = client.runtime.last_read_ns(CONN);
        assert!(
            opened_read_ns >= before_open_ns && opened_read_ns <= clock.now_ns(),
            "{backend}: last read {opened_read_ns} outside [{before_open_ns}, now]"
        );
        client
    }

    fn spec(&self, path: &str) -> StreamSpec {
        let tls = TlsSettings::new()
            .extra_ca_file(self.sim.ca_pem_path())
            .build()
            .unwrap();
        StreamSpec {
            addr: self.sim.addr(),
            tls: Some((tls, server_name(self.sim.host(), None).unwrap())),
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: self.sim.host().to_owned(),
                port: self.sim.addr().port(),
                path: path.to_owned(),
                secure: true,
                max_message_bytes: 1 << 20,
                headers: Vec::new(),
            }),
        }
    }

    /// Takes statuses until `done` holds; panics after `DEADLINE` or if the stream closes.
    fn wait_until(&mut self, what: &str, done: impl Fn(&Client) -> bool) {
        let started = Instant::now();
        loop {
            self.statuses.extend(self.runtime.take_statuses());
            assert!(
                self.runtime.all_running(),
                "{}: a hot thread ended",
                self.backend
            );
            assert!(
                !self
                    .statuses
                    .iter()
                    .any(|status| matches!(status.kind, NetStatusKind::Closed { .. })),
                "{}: {what}: the stream closed: {:?}",
                self.backend,
                self.statuses
            );
            if done(self) {
                return;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "{}: timed out waiting for: {what}; sim {:?}",
                self.backend,
                self.sim.stats().connections
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn pings_received(&self) -> u64 {
        self.sim
            .stats()
            .connections
            .first()
            .map_or(0, |conn| conn.pings_received)
    }

    fn finish(mut self) {
        self.statuses.extend(self.runtime.take_statuses());
        assert!(
            !self
                .statuses
                .iter()
                .any(|status| matches!(status.kind, NetStatusKind::Closed { .. })),
            "{}: the stream closed: {:?}",
            self.backend,
            self.statuses
        );
        let panicked = self.runtime.shutdown();
        assert!(panicked.is_empty(), "threads panicked: {panicked:?}");
        self.sim.stop();
    }
}

fn write_config(dir: &Path, backend: &str) -> std::path::PathBuf {
    let path = dir.join("tickwire.toml");
    std::fs::write(
        &path,
        format!(
            "venues = []\n[log]\nlevel = \"warn\"\n\
             [net]\nbackend = \"{backend}\"\nwait = \"block\"\nblock_timeout_us = 1000\n\
             max_connections = 4\n\
             [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n\
             [threads.decoder]\nfuse_into = \"net\"\n\
             [threads.strategy]\nwait = \"park\"\nspin_iterations = 100\npark_timeout_us = 1000\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn each_ping_reaches_the_server_and_its_pong_is_read_but_not_delivered() {
    // Pings count against the simulator's 10 incoming messages per second, as at Binance.
    const PINGS: u64 = 6;
    for backend in backends() {
        // No stream subscribed: the only bytes after the upgrade are the pongs.
        let mut client = Client::start(backend, 100.0, Faults::default(), "/public/ws");
        assert_eq!(client.pings_received(), 0);
        let before_pings_ns = client.runtime.last_read_ns(CONN);
        for _ in 0..PINGS {
            client.runtime.ping(CONN).unwrap();
        }
        client.wait_until("every ping reaches the server", |client| {
            client.pings_received() == PINGS
        });
        // A pong is a read: the last-read time moves past the pings' send time.
        client.wait_until("the pongs are read", |client| {
            client.runtime.last_read_ns(CONN) > before_pings_ns
        });
        // Stale pings on slots without a stream (never opened, out of range) fail nothing.
        client.runtime.ping(1).unwrap();
        client.runtime.ping(1000).unwrap();
        assert!(client.runtime.drain(Duration::from_secs(2)));
        assert_eq!(
            client.pings_received(),
            PINGS,
            "{backend}: exactly one per call"
        );
        assert_eq!(
            client.runtime.frames_undecoded.get(),
            0,
            "{backend}: a pong was delivered as a message"
        );
        // The stream still carries messages: a subscription's reply is the first frame.
        client
            .runtime
            .send_text(
                CONN,
                r#"{"method":"SUBSCRIBE","params":["btcusdt@bookTicker"],"id":1}"#.to_owned(),
            )
            .unwrap();
        client.wait_until("the stream delivers data after the pings", |client| {
            client.runtime.frames_undecoded.get() >= 2
        });
        client.finish();
    }
}

#[test]
fn last_read_advances_with_data_and_stands_still_during_a_stall() {
    const STALL: Duration = Duration::from_millis(1500);
    for backend in backends() {
        let faults = Faults {
            stall_after: Some((100, STALL)),
            ..Faults::default()
        };
        let mut client = Client::start(
            backend,
            400.0,
            faults,
            "/public/stream?streams=btcusdt@bookTicker",
        );
        // While data flows, each read moves the time on, and it stays close to now.
        client.wait_until("data flows", |client| {
            client.runtime.frames_undecoded.get() >= 10
        });
        let first_ns = client.runtime.last_read_ns(CONN);
        client.wait_until("the last-read time advances", |client| {
            client.runtime.last_read_ns(CONN) > first_ns
        });
        let lag_ns = client
            .clock
            .now_ns()
            .saturating_sub(client.runtime.last_read_ns(CONN));
        assert!(lag_ns < 500_000_000, "{backend}: last read {lag_ns} ns ago");
        // The stall: the simulator sends nothing, and messages due meanwhile are lost.
        client.wait_until("the simulator stalls", |client| {
            client
                .sim
                .stats()
                .connections
                .first()
                .is_some_and(|conn| conn.messages_lost > 0)
        });
        // Let what the simulator wrote before the stall arrive.
        std::thread::sleep(Duration::from_millis(100));
        let stalled_ns = client.runtime.last_read_ns(CONN);
        let frames = client.runtime.frames_undecoded.get();
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            client.runtime.last_read_ns(CONN),
            stalled_ns,
            "{backend}: the last-read time moved while nothing was sent"
        );
        assert_eq!(client.runtime.frames_undecoded.get(), frames);
        let silent_ns = client.clock.now_ns().saturating_sub(stalled_ns);
        assert!(
            silent_ns >= 800_000_000,
            "{backend}: silent for only {silent_ns} ns by the last-read time"
        );
        // The stall ends and the time moves on again.
        client.wait_until("data flows again after the stall", |client| {
            client.runtime.last_read_ns(CONN) > stalled_ns
        });
        client.finish();
    }
}
