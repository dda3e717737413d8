//! The appliance against the simulator, as the integration tests start them: a real `Sim`
//! (TLS, WebSocket, REST) and a real appliance `Session` configured through ordinary config
//! files, with a recording strategy on the strategy thread. The Thalex and Databento tests use the
//! same `Pair` with their own simulators.

#![allow(
    dead_code,
    reason = "the storm test, a binary of its own, uses a part of it"
)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config;
use tickwire::control::{Session, SessionExtras};
use tickwire::event::{Body, Event, GapReason};
use tickwire::strategy::{Market, Strategy};
use tickwire_sim::databento::DatabentoHandle;
use tickwire_sim::source::{Source, SyntheticConfig, SyntheticSource};
use tickwire_sim::thalex::ThalexHandle;
use tickwire_sim::{Sim, SimHandle, SimOptions};

/// Every event the strategy thread saw, in order.
#[derive(Clone, Default)]
pub struct Recorded {
    pub events: Arc<Mutex<Vec<Event>>>,
}

impl Strategy for Recorded {
    fn on_events(&mut self, batch: &[Event], _market: &Market, _now_ns: u64) {
        if let Ok(mut events) = self.events.lock() {
            events.extend_from_slice(batch);
        }
    }
}

impl Recorded {
    pub fn snapshot(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// A simulator beside a running appliance session, with what its strategy recorded.
pub struct Pair<S = SimHandle> {
    pub sim: S,
    pub session: Session,
    pub recorded: Recorded,
    pub dir: tempfile::TempDir,
}

/// What a simulator says of itself when a test's wait times out.
pub trait SimReport {
    fn report(&self) -> String;
}

impl SimReport for SimHandle {
    fn report(&self) -> String {
        format!("{:?}", self.stats().connections)
    }
}

impl SimReport for ThalexHandle {
    fn report(&self) -> String {
        format!("{:?}", self.stats())
    }
}

impl SimReport for DatabentoHandle {
    fn report(&self) -> String {
        format!("{:?}", self.stats())
    }
}

/// Starts the appliance on the config file `appliance` (in `dir`) with a recording strategy,
/// beside `sim`.
pub fn start_session<S>(sim: S, dir: tempfile::TempDir, appliance: &Path, clock: Clock) -> Pair<S> {
    start_session_resolving(sim, dir, appliance, clock, None)
}

/// [`start_session`] with `resolver` looking up venue hosts (the system's when `None`).
pub fn start_session_resolving<S>(
    sim: S,
    dir: tempfile::TempDir,
    appliance: &Path,
    clock: Clock,
    resolver: Option<Arc<dyn tickwire::venue::resolve::Resolve>>,
) -> Pair<S> {
    let loaded = config::load(appliance).expect("the test config is valid");
    let recorded = Recorded::default();
    let session = Session::start(
        &loaded,
        clock,
        SessionExtras {
            strategy: Some(Box::new(recorded.clone())),
            resolver,
            ..SessionExtras::default()
        },
    )
    .expect("the appliance starts");
    Pair {
        sim,
        session,
        recorded,
        dir,
    }
}

pub struct Setup {
    pub symbols: Vec<&'static str>,
    pub channels: Vec<&'static str>,
    pub max_message_bytes: usize,
    pub connect_timeout_ms: u64,
    /// How long the network thread blocks in the kernel waiting for data.
    pub block_timeout_us: u64,
    /// TOML appended to the venue file (`[reconnect]`, `[lifecycle]`, `[staleness]`, ...).
    pub venue_extra: String,
    /// TOML appended to the appliance file (`[metrics]`, `[strategy]`, ...).
    pub appliance_extra: String,
    /// Connect here instead of the simulator's port (a proxy in front of it, a closed port).
    pub port: Option<u16>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            symbols: vec!["BTCUSDT"],
            channels: vec!["bookTicker", "depth@100ms", "trade"],
            max_message_bytes: 1 << 20,
            connect_timeout_ms: 5_000,
            block_timeout_us: 1_000,
            venue_extra: String::new(),
            appliance_extra: String::new(),
            port: None,
        }
    }
}

pub fn quote_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn write_configs(dir: &Path, sim: &SimHandle, setup: &Setup) -> PathBuf {
    let port = setup.port.unwrap_or(sim.addr().port());
    std::fs::write(
        dir.join("venue.toml"),
        format!(
            "name = \"sim\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:{port}\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n{}\n",
            quote_list(&setup.symbols),
            quote_list(&setup.channels),
            sim.ca_pem_path().display().to_string(),
            setup.venue_extra
        ),
    )
    .unwrap();
    write_appliance(dir, "venue.toml", setup)
}

/// The appliance file the tests use, loading `venue_file` (relative to `dir`).
pub fn write_appliance(dir: &Path, venue_file: &str, setup: &Setup) -> PathBuf {
    let appliance = dir.join("tickwire.toml");
    std::fs::write(
        &appliance,
        format!(
            "venues = [{venue_file:?}]\n[log]\nlevel = \"warn\"\n\
             [rings]\nframe_ring_bytes = 16777216\nevent_ring_slots = 262144\n\
             [net]\nwait = \"block\"\nblock_timeout_us = {}\nmax_connections = 4\n\
             max_message_bytes = {}\nconnect_timeout_ms = {}\n\
             [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n\
             [threads.decoder]\nfuse_into = \"net\"\n\
             [threads.strategy]\nwait = \"park\"\nspin_iterations = 100\npark_timeout_us = 1000\n{}\n",
            setup.block_timeout_us,
            setup.max_message_bytes,
            setup.connect_timeout_ms,
            setup.appliance_extra
        ),
    )
    .unwrap();
    appliance
}

pub fn start(source: Box<dyn Source>, options: impl FnOnce(&mut SimOptions), setup: Setup) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::calibrate();
    let mut sim_options = SimOptions::new(dir.path().join("sim"));
    sim_options.clock = clock;
    options(&mut sim_options);
    let sim = Sim::start(sim_options, source).expect("the simulator starts");
    let appliance = write_configs(dir.path(), &sim, &setup);
    start_session(sim, dir, &appliance, clock)
}

pub fn synthetic(rate: f64) -> Box<dyn Source> {
    Box::new(
        SyntheticSource::new(SyntheticConfig {
            symbols: 1,
            rate_per_sec: rate,
            ..SyntheticConfig::default()
        })
        .unwrap(),
    )
}

/// The simulator's two symbols (BTCUSDT, ETHUSDT) at `rate` messages per second, with books of
/// `levels` levels a side.
pub fn synthetic_two(rate: f64, levels: usize) -> Box<dyn Source> {
    Box::new(
        SyntheticSource::new(SyntheticConfig {
            symbols: 2,
            rate_per_sec: rate,
            book_levels: levels,
            ..SyntheticConfig::default()
        })
        .unwrap(),
    )
}

/// Both of [`synthetic_two`]'s symbols with book tickers, depth and trades, and a `[bus]` of
/// 65536 slots at `bus`, then `extra` in the appliance file.
pub fn bus_setup(bus: &Path, extra: &str) -> Setup {
    Setup {
        symbols: vec!["BTCUSDT", "ETHUSDT"],
        channels: vec!["bookTicker", "depth@100ms", "aggTrade"],
        appliance_extra: format!(
            "[bus]\npath = {:?}\ncapacity = 65536\n{extra}",
            bus.display().to_string()
        ),
        ..Setup::default()
    }
}

impl<S: SimReport> Pair<S> {
    /// Runs the control thread's work until `done` says so; panics after `timeout`.
    pub fn run_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&mut Pair<S>) -> bool,
    ) {
        let started = Instant::now();
        loop {
            self.session.tick().expect("control tick");
            assert!(self.session.runtime.all_running(), "a hot thread ended");
            if done(self) {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out after {timeout:?} waiting for: {what}; ends {:?}; counters {:?}; sim {}",
                self.session.venues.ends,
                self.session.venues.counters(0),
                self.sim.report()
            );
            // As `tickwire run` waits: until a stage or worker hands the control thread work or
            // a timer falls due, at most a tick.
            self.session
                .wait(Duration::from_millis(10), None)
                .expect("control wait");
        }
    }

    /// Keeps the control thread running for `duration`.
    pub fn run_for(&mut self, duration: Duration) {
        let until = Instant::now() + duration;
        self.run_until(duration * 2, "time to pass", |_| Instant::now() >= until);
    }
}

impl<S> Pair<S> {
    /// How many recorded events `what` picks.
    pub fn count(&self, what: impl Fn(&Event) -> bool) -> usize {
        self.recorded.snapshot().iter().filter(|e| what(e)).count()
    }

    pub fn counters(&self) -> &tickwire::venue::feed::FeedCounters {
        &self.session.feeds[0].1
    }

    pub fn decoded(&self) -> u64 {
        let counters = self.counters();
        counters.message("bookTicker")
            + counters.message("depthUpdate")
            + counters.message("trade")
            + counters.message("aggTrade")
    }

    pub fn gaps(&self, reason: GapReason) -> usize {
        self.recorded
            .snapshot()
            .iter()
            .filter(|event| matches!(event.body(), Body::Gap(gap) if gap.reason() == reason))
            .count()
    }

    pub fn finish(self) -> Vec<Event> {
        let failed = self.session.shutdown();
        assert!(failed.is_empty(), "threads panicked: {failed:?}");
        self.recorded.snapshot()
    }
}

/// A loopback port with nothing listening on it (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}
