//! `tickwire sim`: the venue simulator as a command, until SIGINT or SIGTERM (or, with
//! `--exit-when-done`, until its source is exhausted and every message sent).

use super::signals::StopSignals;
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::sim::source::CaptureSource;
use tickwire::sim::source::Source;
use tickwire::sim::source::{SyntheticConfig, SyntheticSource};
use tickwire::sim::{Faults, Pace, Sim, SimOptions, Start};

/// The simulator's options on the command line.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Address to listen on (loopback only is the intent; the certificate names loopback).
    #[arg(long, default_value = "127.0.0.1:9443")]
    listen: SocketAddr,
    /// Where the throwaway CA certificate is written (as ca.pem).
    #[arg(long, default_value = "/tmp/tickwire-sim", value_name = "DIR")]
    cert_dir: PathBuf,
    /// Replay this capture (plain or gzip, `<recv ns> <json>` per line) instead of a synthetic
    /// market.
    #[arg(long, value_name = "FILE")]
    source: Option<PathBuf>,
    /// Synthetic market: number of symbols.
    #[arg(long, default_value_t = 2)]
    symbols: usize,
    /// Synthetic market: messages per second over all symbols.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Synthetic market: random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pace: the recorded (or synthetic) pace times this factor.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Pace: send as fast as the clients take it.
    #[arg(long, conflicts_with = "speed")]
    as_fast_as_possible: bool,
    /// Start the source at once instead of when the first client subscribes.
    #[arg(long)]
    start_immediately: bool,
    /// Exit once the source is exhausted (a capture's end).
    #[arg(long)]
    exit_when_done: bool,
    /// Seconds between WebSocket pings (Binance: 180).
    #[arg(long, default_value_t = 180.0, value_name = "SECONDS")]
    ping_interval: f64,
    /// Seconds without a pong before the connection is closed (Binance: 600).
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    pong_timeout: f64,
    /// Fault: close (code 1000) after N messages.
    #[arg(long, value_name = "N")]
    close_after: Option<u64>,
    /// Fault: reset the TCP connection after N messages.
    #[arg(long, value_name = "N")]
    reset_after: Option<u64>,
    /// Fault: after N messages send nothing for --stall-seconds (TCP stays open).
    #[arg(long, value_name = "N", requires = "stall_seconds")]
    stall_after: Option<u64>,
    #[arg(long, value_name = "SECONDS")]
    stall_seconds: Option<f64>,
    /// Fault: every Nth message is sent as invalid JSON.
    #[arg(long, value_name = "N")]
    malformed_every: Option<u64>,
    /// Fault: after N messages send one text frame of --oversized-bytes.
    #[arg(long, value_name = "N", requires = "oversized_bytes")]
    oversized_after: Option<u64>,
    #[arg(long, value_name = "BYTES")]
    oversized_bytes: Option<usize>,
    /// Fault: send each message as K WebSocket frames.
    #[arg(long, value_name = "K")]
    fragment_into: Option<u32>,
    /// Fault: after N messages leave out one depthUpdate (breaks the client's `pu` chain).
    #[arg(long, value_name = "N")]
    skip_depth_after: Option<u64>,
    /// Fault: the first K REST depth requests fail with HTTP 503.
    #[arg(long, default_value_t = 0, value_name = "K")]
    rest_errors: u32,
    /// Fault: wait this long before answering a TLS handshake.
    #[arg(long, value_name = "MS")]
    handshake_delay_ms: Option<u64>,
    /// Fault: serve a certificate for another host name.
    #[arg(long)]
    wrong_host_cert: bool,
    /// Fault: ignore the client's requests (SUBSCRIBE, ...): no reply, no subscription.
    #[arg(long)]
    ignore_requests: bool,
    /// Connection faults apply to the first K connections.
    #[arg(long, default_value_t = 1, value_name = "K")]
    fault_connections: u32,
    /// Latency stamps for benchmarks: write one record per bookTicker sent on the first
    /// connection, 16 bytes: its update id `u`, then the send time in ns since the Unix epoch
    /// (CLOCK_REALTIME-based), both u64 little-endian. A client on this host joins them with its
    /// own receive times by `u`. The bytes on the wire do not change.
    #[arg(long, value_name = "FILE")]
    stamps: Option<PathBuf>,
}

fn seconds(value: f64, name: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("--{name} must be a non-negative number of seconds"))
}

pub fn sim(args: SimArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sim: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: SimArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let source: Box<dyn Source> = match &args.source {
        Some(path) => Box::new(
            CaptureSource::open(path)
                .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
        ),
        None => Box::new(
            SyntheticSource::new(SyntheticConfig {
                symbols: args.symbols,
                rate_per_sec: args.rate,
                seed: args.seed,
                ..SyntheticConfig::default()
            })
            .map_err(|error| anyhow::anyhow!("synthetic market: {error}"))?,
        ),
    };
    let mut options = SimOptions::new(&args.cert_dir);
    options.listen = args.listen;
    options.clock = Clock::calibrate();
    options.pace = if args.as_fast_as_possible {
        Pace::AsFastAsPossible
    } else {
        if !(args.speed > 0.0 && args.speed.is_finite()) {
            anyhow::bail!("--speed must be a positive number");
        }
        Pace::Recorded { speed: args.speed }
    };
    if args.start_immediately {
        options.start = Start::Immediately;
    }
    options.ping_interval = seconds(args.ping_interval, "ping-interval")?;
    options.pong_timeout = seconds(args.pong_timeout, "pong-timeout")?;
    options.faults = Faults {
        close_after: args.close_after,
        reset_after: args.reset_after,
        stall_after: match (args.stall_after, args.stall_seconds) {
            (Some(after), Some(secs)) => Some((after, seconds(secs, "stall-seconds")?)),
            _ => None,
        },
        malformed_every: args.malformed_every,
        oversized_after: args.oversized_after.zip(args.oversized_bytes),
        fragment_into: args.fragment_into,
        skip_depth_after: args.skip_depth_after,
        rest_errors: args.rest_errors,
        handshake_delay: args.handshake_delay_ms.map(Duration::from_millis),
        wrong_host_cert: args.wrong_host_cert,
        ignore_requests: args.ignore_requests,
        fault_connections: args.fault_connections,
    };
    let stamp_writer = match &args.stamps {
        Some(path) => {
            let (producer, consumer) = tickwire::ring::ring(1 << 16);
            options.stamps = Some(producer);
            Some(StampWriter::start(path, consumer)?)
        }
        None => None,
    };
    let sim = Sim::start(options, source)?;
    let addr = sim.addr();
    eprintln!("sim: listening on {addr} (WebSocket and REST over TLS)");
    eprintln!("sim: CA certificate: {}", sim.ca_pem_path().display());
    eprintln!("sim: combined streams: wss://{addr}/stream?streams=btcusdt@bookTicker/...");
    eprintln!("sim: raw stream:       wss://{addr}/ws/btcusdt@bookTicker");
    eprintln!("sim: depth snapshot:   https://{addr}/fapi/v1/depth?symbol=BTCUSDT&limit=1000");
    loop {
        if let Some(signal) = signals.wait(Duration::from_millis(200))? {
            eprintln!("sim: signal {signal}; stopping");
            break;
        }
        if args.exit_when_done && sim.stats().source_done {
            eprintln!("sim: source exhausted; stopping");
            break;
        }
    }
    let stats = sim.stats();
    drop(sim);
    eprintln!(
        "sim: {} connections, {} messages sent",
        stats.connections_accepted, stats.messages_sent
    );
    if let Some(writer) = stamp_writer {
        let written = writer.finish()?;
        eprintln!(
            "sim: {written} stamps written ({} lost to a full ring)",
            stats.stamp_overflows
        );
    }
    Ok(())
}

/// Drains the stamp ring to a file on a thread of its own.
struct StampWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<std::io::Result<u64>>,
}

impl StampWriter {
    fn start(
        path: &std::path::Path,
        mut stamps: tickwire::ring::Consumer<tickwire::strategy::stamps::Stamp>,
    ) -> anyhow::Result<StampWriter> {
        use std::io::Write;
        let file = std::fs::File::create(path)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sim-stamps".to_owned())
            .spawn(move || -> std::io::Result<u64> {
                let mut out = std::io::BufWriter::new(file);
                let mut written = 0u64;
                loop {
                    let stopping = thread_stop.load(std::sync::atomic::Ordering::Acquire);
                    let mut result = Ok(());
                    let drained = stamps.drain(usize::MAX, |stamp| {
                        if result.is_ok() {
                            result = out
                                .write_all(&stamp.key.to_le_bytes())
                                .and_then(|()| out.write_all(&stamp.send_ns.to_le_bytes()));
                            written += 1;
                        }
                    });
                    result?;
                    if stopping && drained == 0 {
                        out.flush()?;
                        return Ok(written);
                    }
                    if drained == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            })?;
        Ok(StampWriter { stop, thread })
    }

    fn finish(self) -> anyhow::Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the stamp writer panicked"))?
            .map_err(|error| anyhow::anyhow!("writing stamps: {error}"))
    }
}
