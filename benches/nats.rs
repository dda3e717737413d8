//! The event stream through NATS, end to end on this host: a `BusWriter` at a set rate, the
//! bridge (`tickwire_nats::bridge::run`, in this process on its own threads), one `nats-server`
//! on loopback (Debian's package), and a `NatsClient` consumer; beside it a bus `Client` reading
//! the same bus, for the shared-memory figure.
//!
//! `cargo bench --bench nats` (or `scripts/bench-nats`) prints the following; with `--cluster`
//! (root and iproute2) the same through a three-server cluster across network namespaces
//! (`tests/support/netns.rs`): the bridge in one namespace publishing to server 1, the consumer in
//! another subscribed at server 3, so every event crosses a cluster route and two veth pairs.
//!
//!
//! - latency: from the event's write to the bus (its `recv_ts_ns`, the wall clock when the writer
//!   wrote it) to the moment each consumer holds it, p50 / p99 / p99.9 / max, at a steady
//!   rate (`--latency-rate`, default 20,000 events/s and 200,000 events/s);
//! - throughput: rates from `--rates` (default 250k to 2M events/s), each for `--seconds`: events
//!   written, bridged, dropped by the bridge, received and reported missed by the consumer; the
//!   highest rate with no drop and no loss is the sustained rate.
//!
//! Before anything is timed, the consumer checks every event it gets: each instrument's trade
//! ids strictly increasing, the price equal to the trade id; a run whose consumer saw anything
//! else aborts. Events: trades of `--instruments` instruments in turn (default 16), written in 1 ms batches
//! (the writer sleeps between batches; it never spins).

#[path = "../tests/support/netns.rs"]
mod netns;

use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Side, Trade};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};
use tickwire_client::{Client, Next, Start};
use tickwire_nats::bridge::{self, BridgeCounters, BridgeOptions};
use tickwire_nats::{NatsClient, NatsOptions};

/// Instruments the trades go round (`--instruments`, default 16): how many events one subject
/// gets per bus batch, and so how many share a message.
static INSTRUMENTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(16);

fn instruments() -> u32 {
    INSTRUMENTS.load(Ordering::Relaxed)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// A trade; `timed` ones carry the write time in `exchange_ts_ns` too, warm-up ones 0 there,
/// so consumers count and time only the run's own.
fn trade(instrument_id: u32, position: u64, now: u64, timed: bool) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: if timed { now } else { 0 },
            recv_ts_ns: now,
            venue_seq: position,
            instrument_id,
            venue_id: 0,
            kind: EventKind::Trade,
            flags: 0,
        },
        Body::Trade(Trade::new(
            Fixed(position as i64),
            Fixed(1),
            position,
            Side::Bid,
        )),
    )
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nats_server_binary() -> Option<PathBuf> {
    ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

fn start_server(binary: &std::path::Path, port: u16) -> Option<Server> {
    let child = Command::new(binary)
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Server(child))
}

/// What one consumer saw in a run.
struct Seen {
    latency_ns: Histogram<u64>,
    received: u64,
    missed: u64,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap(),
            received: 0,
            missed: 0,
        }
    }

    /// Checks and times one event; the trade ids of each instrument must increase.
    fn take(&mut self, event: &Event, last: &mut [u64]) {
        let now = now_ns();
        let Body::Trade(trade) = event.body() else {
            panic!("not a trade: {event:?}")
        };
        assert_eq!(trade.price.0 as u64, trade.trade_id, "a damaged event");
        let slot = &mut last[event.header.instrument_id as usize];
        assert!(
            trade.trade_id + 1 > *slot,
            "reordered or repeated: {event:?}"
        );
        *slot = trade.trade_id + 1;
        if event.header.exchange_ts_ns == 0 {
            return;
        }
        let _ = self
            .latency_ns
            .record(now.saturating_sub(event.header.recv_ts_ns).max(1));
        self.received += 1;
    }
}

fn run_nats_consumer(url: String, stop: Arc<AtomicBool>, ready: Arc<AtomicBool>) -> Seen {
    let mut client = NatsClient::connect(NatsOptions::new(
        bridge::parse_servers(&url).unwrap(),
        vec!["tickwire.bench.*.*.trade".into()],
    ))
    .unwrap();
    let mut seen = Seen::new();
    let mut last = vec![0u64; instruments() as usize + 1];
    // Drains for up to a second after the writer stops.
    let mut quiet_since: Option<Instant> = None;
    loop {
        match client.wait(Duration::from_millis(20)).unwrap() {
            Next::Events(events) => {
                ready.store(true, Ordering::Relaxed);
                quiet_since = None;
                for event in events {
                    seen.take(event, &mut last);
                }
            }
            Next::Overrun { missed, .. } => seen.missed += missed,
            Next::NewEpoch { .. } | Next::Closed | Next::Removed | Next::Idle => {
                if stop.load(Ordering::Relaxed) {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(500) {
                        return seen;
                    }
                }
            }
        }
    }
}

fn run_bus_consumer(path: PathBuf, stop: Arc<AtomicBool>) -> Seen {
    let mut client = Client::options()
        .start(Start::Oldest)
        .batch(1024)
        .attach(&path)
        .unwrap();
    let mut seen = Seen::new();
    let mut last = vec![0u64; instruments() as usize + 1];
    loop {
        match client.wait(Duration::from_millis(20)).unwrap() {
            Next::Events(events) => {
                for event in events {
                    seen.take(event, &mut last);
                }
            }
            Next::Overrun { missed, .. } => seen.missed += missed,
            Next::NewEpoch { .. } | Next::Closed | Next::Removed | Next::Idle => {
                if stop.load(Ordering::Relaxed) && client.lag() == 0 {
                    return seen;
                }
            }
        }
    }
}

struct RunResult {
    written: u64,
    /// Events the bridge dropped, and the bus overran it by, during the timed part.
    dropped: u64,
    overrun: u64,
    nats: Seen,
    bus: Option<Seen>,
    counters: Arc<BridgeCounters>,
}

/// Where the bridge and the NATS consumer run and which servers they use: on loopback to one
/// server, or each in a network namespace of the cluster (`--cluster`).
#[derive(Clone)]
struct Placement {
    bridge_url: String,
    consumer_url: String,
    bridge_namespace: Option<String>,
    consumer_namespace: Option<String>,
}

/// Runs `work` on a thread, inside `namespace` when given.
fn spawn_in<T: Send + 'static>(
    namespace: &Option<String>,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    match namespace {
        Some(namespace) => netns::in_namespace(namespace, work),
        None => std::thread::spawn(work),
    }
}

/// One run: `rate` events/s for `seconds`.
fn run(placement: &Placement, rate: u64, seconds: f64, with_bus_consumer: bool) -> RunResult {
    let dir = tempfile::Builder::new()
        .prefix("tw-bench-nats-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let path = dir.path().join("bus");
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(1 << 22, u64::from(instruments()) + 1).unwrap(),
        group: None,
    };
    let mut bus = BusWriter::create(&options, now_ns(), now_ns()).unwrap();
    for instrument_id in 0..=instruments() {
        bus.add_instrument(&DirectoryEntry {
            instrument_id,
            venue_id: 0,
            venue: "sim".into(),
            symbol: format!("SYM{instrument_id}"),
            venue_symbol: format!("sym{instrument_id}"),
        })
        .unwrap();
    }
    let stop_bridge = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(BridgeCounters::default());
    let bridge_thread = {
        let mut options = BridgeOptions::new(
            path.clone(),
            bridge::parse_servers(&placement.bridge_url).unwrap(),
            "bench".into(),
        );
        options.queue_messages = 8192;
        let stop = Arc::clone(&stop_bridge);
        let counters = Arc::clone(&counters);
        spawn_in(&placement.bridge_namespace, move || {
            bridge::run(&options, &stop, counters)
        })
    };
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let nats_thread = {
        let (url, stop, ready) = (
            placement.consumer_url.clone(),
            Arc::clone(&stop_consumers),
            Arc::clone(&ready),
        );
        spawn_in(&placement.consumer_namespace, move || {
            run_nats_consumer(url, stop, ready)
        })
    };
    // Until the consumer has an event (bridge attached, subscription made): warm-up events,
    // not counted (the consumer only checks them).
    let mut position = vec![0u64; instruments() as usize + 1];
    let started = Instant::now();
    while !ready.load(Ordering::Relaxed) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing came through"
        );
        let now = now_ns();
        // At most 16 instruments: a warm-up burst of thousands of one-event messages would
        // overflow the bridge's queue before anything is timed.
        for instrument in 1..=instruments().min(16) {
            bus.write(&trade(
                instrument,
                position[instrument as usize],
                now,
                false,
            ));
            position[instrument as usize] += 1;
        }
        bus.publish();
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    let dropped_before = counters.events_dropped.load(Ordering::Relaxed);
    let overrun_before = counters.bus_missed.load(Ordering::Relaxed);
    let bus_thread = with_bus_consumer.then(|| {
        let (path, stop) = (path.clone(), Arc::clone(&stop_consumers));
        std::thread::spawn(move || run_bus_consumer(path, stop))
    });
    // The timed part: one batch per millisecond.
    let per_ms = (rate / 1000).max(1);
    let total_ms = (seconds * 1000.0) as u64;
    let mut written = 0u64;
    let mut instrument = 1u32;
    let start = Instant::now();
    for ms in 0..total_ms {
        let now = now_ns();
        for _ in 0..per_ms {
            bus.write(&trade(instrument, position[instrument as usize], now, true));
            position[instrument as usize] += 1;
            instrument = instrument % instruments() + 1;
        }
        bus.publish();
        written += per_ms;
        let next = start + Duration::from_millis(ms + 1);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    stop_consumers.store(true, Ordering::Relaxed);
    let bus_seen = bus_thread.map(|thread| thread.join().unwrap());
    let nats = nats_thread.join().unwrap();
    stop_bridge.store(true, Ordering::Relaxed);
    bridge_thread.join().unwrap().unwrap();
    RunResult {
        written,
        dropped: counters.events_dropped.load(Ordering::Relaxed) - dropped_before,
        overrun: counters.bus_missed.load(Ordering::Relaxed) - overrun_before,
        nats,
        bus: bus_seen,
        counters,
    }
}

fn percentiles(histogram: &Histogram<u64>) -> String {
    let us = |ns: u64| ns as f64 / 1000.0;
    format!(
        "p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us ({} events)",
        us(histogram.value_at_quantile(0.50)),
        us(histogram.value_at_quantile(0.99)),
        us(histogram.value_at_quantile(0.999)),
        us(histogram.max()),
        histogram.len()
    )
}

fn argument(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1).cloned())
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this with no timing wanted.
    if std::env::args().any(|arg| arg == "--test") || !std::env::args().any(|arg| arg == "--bench")
    {
        println!("nats: run with `cargo bench --bench nats`");
        return;
    }
    let Some(binary) = nats_server_binary() else {
        println!("SKIPPED: no nats-server binary (apt-get install nats-server)");
        return;
    };
    // --cluster: three servers in three network namespaces, the bridge in a fourth, the consumer
    // in a fifth; the bridge publishes to one server, the consumer subscribes at another, so
    // every event crosses a route and two veth pairs.
    let cluster = std::env::args().any(|arg| arg == "--cluster");
    let mut _server = None;
    let mut _topology = None;
    let placement = if cluster {
        if !netns::available() {
            println!("SKIPPED: --cluster needs root and ip (iproute2)");
            return;
        }
        let mut topology = netns::Topology::build(&[11, 12, 13, 20, 31]);
        netns::start_cluster(&mut topology, &binary, [11, 12, 13]);
        let placement = Placement {
            bridge_url: format!("nats://{}.11:4222", netns::SUBNET),
            consumer_url: format!("nats://{}.13:4222", netns::SUBNET),
            bridge_namespace: Some(topology.node(20)),
            consumer_namespace: Some(topology.node(31)),
        };
        _topology = Some(topology);
        placement
    } else {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap();
        let Some(server) = start_server(&binary, port) else {
            println!("SKIPPED: nats-server did not start");
            return;
        };
        _server = Some(server);
        let url = format!("nats://127.0.0.1:{port}");
        Placement {
            bridge_url: url.clone(),
            consumer_url: url,
            bridge_namespace: None,
            consumer_namespace: None,
        }
    };
    let path_label = if cluster {
        "through the NATS cluster"
    } else {
        "through NATS (1 server)"
    };
    if let Some(count) = argument("--instruments").and_then(|n| n.parse::<u32>().ok()) {
        INSTRUMENTS.store(count.clamp(1, 60_000), Ordering::Relaxed);
    }
    let instrument_count = instruments();
    let seconds: f64 = argument("--seconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let latency_rates: Vec<u64> = argument("--latency-rates")
        .unwrap_or_else(|| "20000,200000".into())
        .split(',')
        .filter_map(|rate| rate.parse().ok())
        .collect();
    for rate in latency_rates {
        let result = run(&placement, rate, seconds, true);
        println!("latency at {rate} events/s, {instrument_count} instruments, {seconds} s:");
        if let Some(bus) = &result.bus {
            println!("  shared-memory bus: {}", percentiles(&bus.latency_ns));
        }
        println!("  {path_label}: {}", percentiles(&result.nats.latency_ns));
        println!(
            "  bridge: {} messages for {} events ({:.1} events/message), {} dropped; consumer missed {}",
            result.counters.messages_published.load(Ordering::Relaxed),
            result.counters.events_read.load(Ordering::Relaxed),
            result.counters.events_read.load(Ordering::Relaxed) as f64
                / result.counters.messages_published.load(Ordering::Relaxed).max(1) as f64,
            result.dropped,
            result.nats.missed
        );
    }
    let rates: Vec<u64> = argument("--rates")
        .unwrap_or_else(|| "250000,500000,1000000,1500000,2000000".into())
        .split(',')
        .filter_map(|rate| rate.parse().ok())
        .collect();
    let mut sustained = 0;
    println!("throughput ({seconds} s per rate, {instrument_count} instruments):");
    for rate in rates {
        let result = run(&placement, rate, seconds, false);
        let (dropped, overruns) = (result.dropped, result.overrun);
        let clean = dropped == 0 && overruns == 0 && result.nats.missed == 0;
        if clean && result.nats.received == result.written {
            sustained = sustained.max(rate);
        }
        println!(
            "  {rate:>9} events/s: written {}, bridged {} in {} messages, bridge dropped {dropped}, \
             bus overrun {overruns}, consumer received {} missed {}, NATS p50 {:.1} us p99 {:.1} us{}",
            result.written,
            result.counters.events_read.load(Ordering::Relaxed),
            result.counters.messages_published.load(Ordering::Relaxed),
            result.nats.received,
            result.nats.missed,
            result.nats.latency_ns.value_at_quantile(0.5) as f64 / 1000.0,
            result.nats.latency_ns.value_at_quantile(0.99) as f64 / 1000.0,
            if clean { "" } else { "  <- loss" }
        );
    }
    println!("highest rate without a drop or a loss: {sustained} events/s");
}
