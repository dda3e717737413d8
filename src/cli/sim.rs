//! `tickwire sim`: the venue simulator as a command, until SIGINT or SIGTERM (or, with
//! `--exit-when-done`, until its source is exhausted and every message sent). `--venue` picks
//! the protocol: Binance USDⓈ-M (the default), Binance Spot (the same server in Spot's shapes,
//! limits and REST path), Thalex's WebSocket JSON-RPC API, or a Databento Live Subscription
//! Gateway (plain TCP, DBN).

use super::signals::StopSignals;
use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire_sim::bybit::{self, BybitFaults, BybitOptions};
use tickwire_sim::databento::{
    self, DatabentoFaults, DatabentoOptions, DatabentoSource, InjectedError,
};
use tickwire_sim::okx::{self, OkxFaults, OkxOptions};
use tickwire_sim::sbe::SbeSource;
use tickwire_sim::source::CaptureSource;
use tickwire_sim::source::Source;
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::spot::SpotSource;
use tickwire_sim::thalex::{self, ThalexFaults, ThalexOptions};
use tickwire_sim::{Faults, Pace, Sim, SimOptions, Start};

/// The protocols `tickwire sim` speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimVenue {
    /// Binance USDⓈ-M Futures: WebSocket market streams and REST depth snapshots.
    Binance,
    /// Binance Spot: the JSON market streams in Spot's shapes (bookTicker without times, depth
    /// without `pu`), `/api/v3/depth`, Spot's limits (5 messages/s, a ping every 20 s) and
    /// stream names. Its market is the synthetic one or a capture (`--source`).
    BinanceSpot,
    /// Binance Spot's SBE market data streams: `@trade`, `@bestBidAsk`, `@depth` and `@depth20`
    /// as binary SBE frames (the official generated encoder), an `X-MBX-APIKEY` header on every
    /// upgrade (`--api-key`), JSON control messages, `/api/v3/depth`, Spot's limits.
    BinanceSpotSbe,
    /// Thalex: the WebSocket JSON-RPC API at /ws/api/v2 (login, subscriptions, a synthetic
    /// market per connection).
    Thalex,
    /// Databento's Live Subscription Gateway: CRAM authentication, subscriptions, DBN records
    /// from a shared synthetic MBO market, a DBN file or a benchmark batch (plain TCP).
    Databento,
    /// Bybit v5's public WebSocket: spot at /v5/public/spot and linear at /v5/public/linear
    /// (subscribe, unsubscribe and ping ops; books, trades, tickers and liquidations from a
    /// synthetic market per subscription).
    Bybit,
    /// Nasdaq TotalView-ITCH 5.0 over MoldUDP64: a raw ITCH file (`--source`) or a generated
    /// market sent to the two multicast lines of a nasdaq-itch venue file (`--itch-venue`), with
    /// faults (`--itch-faults`), heartbeats, an end of session and a re-request server.
    Itch,
    /// OKX v5's WebSocket: /ws/v5/public and /ws/v5/business (subscribe and unsubscribe with
    /// args objects, login, the text ping; books with the venue's checksum, trades, tickers,
    /// mark and index prices, funding rates, open interest and liquidations from a synthetic
    /// market per subscription).
    Okx,
}

/// The default of `--rate` per venue: Binance's is over all symbols of the one shared market,
/// Thalex's per connection.
const BINANCE_RATE: f64 = 1000.0;
const THALEX_RATE: f64 = 100.0;
/// Bybit's per connection, over its subscriptions in turn.
const BYBIT_RATE: f64 = 100.0;
/// OKX's per connection, over its subscriptions in turn.
const OKX_RATE: f64 = 100.0;
/// Databento's is records per second of the shared market (or of a file's replay).
const DATABENTO_RATE: f64 = 1000.0;

/// The default of `--listen` per venue: Binance and Thalex on TLS, Databento on the gateway's
/// port.
const TLS_LISTEN: &str = "127.0.0.1:9443";
const DATABENTO_LISTEN: &str = "127.0.0.1:13000";

/// The default of `--symbols` for Binance.
const BINANCE_SYMBOLS: usize = 2;

/// The simulator's options on the command line.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// The venue to simulate.
    #[arg(long, value_enum, default_value_t = SimVenue::Binance)]
    venue: SimVenue,
    /// Address to listen on (loopback only is the intent; the certificate names loopback).
    /// Default: 127.0.0.1:9443, or 127.0.0.1:13000 for databento.
    #[arg(long, alias = "addr")]
    listen: Option<SocketAddr>,
    /// Where the throwaway CA certificate is written (as ca.pem).
    #[arg(long, default_value = "/tmp/tickwire-sim", value_name = "DIR")]
    cert_dir: PathBuf,
    /// Replay this capture (plain or gzip, `<recv ns> <json>` per line; what `tickwire record
    /// --venue` writes) instead of a synthetic market: Binance's streams; Thalex's recorded
    /// notifications, to each connection for the channels it subscribes (at the recorded pace
    /// times --speed, or --as-fast-as-possible); a Databento gateway session's DBN records, to
    /// each session as --file replays a DBN file.
    #[arg(long, value_name = "FILE")]
    source: Option<PathBuf>,
    /// Synthetic market: number of symbols (binance, default 2; databento: N instruments
    /// named SIM0001.., instead of ESM5 and NQM5).
    #[arg(long)]
    symbols: Option<usize>,
    /// Synthetic market: messages per second over all symbols (binance, default 1000), per
    /// connection over its channels (thalex, default 100), or records per second of the shared
    /// MBO market or of a file's replay (databento, default 1000; 0: as fast as clients read).
    #[arg(long)]
    rate: Option<f64>,
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
    /// Thalex fault: during the stall the server is hung, answering neither pings nor requests
    /// (a client's read timeout is what notices).
    #[arg(long, requires = "stall_after")]
    stall_silent: bool,
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
    /// Fault: every Nth REST depth request fails with HTTP 503 (counting from the first), for as
    /// long as the run lasts.
    #[arg(long, value_name = "N")]
    rest_error_every: Option<u32>,
    /// Fault: each faulty connection gets one of --stall-after, --close-after and --reset-after,
    /// in turn by connection (with a large --fault-connections, every kind again and again).
    #[arg(long)]
    rotate_faults: bool,
    /// Fault: wait this long before answering a TLS handshake.
    #[arg(long, value_name = "MS")]
    handshake_delay_ms: Option<u64>,
    /// Fault: serve a certificate for another host name.
    #[arg(long)]
    wrong_host_cert: bool,
    /// Fault: ignore the client's requests (SUBSCRIBE, ...): no reply, no subscription.
    #[arg(long)]
    ignore_requests: bool,
    /// Binance Spot SBE: the one API key accepted in `X-MBX-APIKEY` (default: any non-empty
    /// key; a missing one is refused with 401 either way).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Binance Spot SBE fault: after N messages send the `serverShutdown` event, then close.
    #[arg(long, value_name = "N")]
    server_shutdown_after: Option<u64>,
    /// Thalex (and Bybit: the symbols both categories serve, default BTCUSDT, ETHUSDT and,
    /// on linear, BTC-26DEC25): the instruments served, comma separated; commas inside `[..]`
    /// (a combination's legs) do not split. Default: BTC-PERPETUAL, ETH-PERPETUAL, BTC-27JUN25,
    /// BTC-27JUN25-100000-C, [BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1] and the future
    /// roll [BTC-PERPETUAL:-1,BTC-27JUN25:1].
    #[arg(long, value_name = "NAME,..")]
    instruments: Option<String>,
    /// Bybit fault: after N data messages, every book's next message is a snapshot with
    /// `u` = 1 (the service's restart).
    #[arg(long, value_name = "N")]
    restart_after: Option<u64>,
    /// Bybit fault: after N data messages, every book's next delta skips one `u`.
    #[arg(long, value_name = "N")]
    skip_u_after: Option<u64>,
    /// OKX fault: every Nth update of an incremental book (books, books-l2-tbt,
    /// books50-l2-tbt) carries a wrong checksum.
    #[arg(long, value_name = "N")]
    corrupt_checksum_every: Option<u64>,
    /// OKX: after N data messages, every incremental book's next update resets its sequence
    /// (the documented maintenance case: `seqId` below `prevSeqId`; no break).
    #[arg(long, value_name = "N")]
    seq_reset_after: Option<u64>,
    /// Thalex: requests per connection per second beyond which requests fail with code 4
    /// (default 50).
    #[arg(long, value_name = "N")]
    request_limit: Option<u32>,
    /// Thalex fault: after N data messages send the system reconnect event, then close with
    /// 1001 after MS milliseconds.
    #[arg(long, value_name = "N:MS", value_parser = count_and_millis)]
    reconnect_event_after: Option<(u64, Duration)>,
    /// Databento: replay this DBN file (.dbn or .dbn.zst, any DBN version; sent as v3) to each
    /// session instead of the synthetic market.
    #[arg(long, value_name = "FILE", conflicts_with = "records")]
    file: Option<PathBuf>,
    /// Databento: replay --file in a loop.
    #[arg(long = "loop", requires = "file")]
    looping: bool,
    /// Databento: records of the synthetic market kept for replays (`start=`).
    #[arg(long, value_name = "N")]
    history: Option<usize>,
    /// Databento benchmark mode: make N MBO records once, then send them to each session as
    /// fast as the socket takes them, then a SystemMsg "tickwire benchmark end: N records" and
    /// a close.
    #[arg(long, value_name = "N")]
    records: Option<u64>,
    /// Databento: the dataset served (default GLBX.MDP3).
    #[arg(long, value_name = "NAME")]
    dataset: Option<String>,
    /// Databento fault: write each record in two pieces with a pause between.
    #[arg(long)]
    split_writes: bool,
    /// Databento fault: after N records an ErrorMsg (--error-code, --error-text), then close.
    #[arg(long, value_name = "N")]
    error_after: Option<u64>,
    #[arg(
        long,
        value_name = "CODE",
        default_value_t = 6,
        requires = "error_after"
    )]
    error_code: u8,
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "tickwire sim: injected error",
        requires = "error_after"
    )]
    error_text: String,
    /// Databento fault: after N records a SystemMsg slow reader warning.
    #[arg(long, value_name = "N")]
    slow_reader_warning_after: Option<u64>,
    /// Databento fault: close this many seconds after start_session.
    #[arg(long, value_name = "SECONDS")]
    close_after_seconds: Option<f64>,
    /// Databento fault: authentication fails whatever the key.
    #[arg(long)]
    refuse_auth: bool,
    /// Connection faults apply to the first K connections.
    #[arg(long, default_value_t = 1, value_name = "K")]
    fault_connections: u32,
    /// Latency stamps for benchmarks: write one record per bookTicker sent on the first
    /// connection, 16 bytes: its update id `u`, then the send time in ns since the Unix epoch
    /// (CLOCK_REALTIME-based), both u64 little-endian. A client on this host joins them with its
    /// own receive times by `u`. The bytes on the wire do not change.
    #[arg(long, value_name = "FILE")]
    stamps: Option<PathBuf>,
    /// ITCH: the nasdaq-itch venue file whose lines (`url`, `nasdaq_itch.line_b`), interface,
    /// re-request server and session the simulator sends to and serves.
    #[arg(long, value_name = "FILE")]
    itch_venue: Option<PathBuf>,
    /// ITCH faults, `name=value` pairs: drop_a, drop_b, drop_both (the re-request server has
    /// them), lose (nobody has them: a gap), reorder, duplicate, in parts per million of the
    /// packets; late_b, in packets.
    #[arg(long, value_name = "SPEC")]
    itch_faults: Option<String>,
    /// ITCH: messages of the generated market (default 100000); --symbols stocks (default 100).
    #[arg(long, value_name = "N")]
    itch_messages: Option<usize>,
}

fn count_and_millis(text: &str) -> Result<(u64, Duration), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(count, millis)| Some((count.parse().ok()?, millis.parse().ok()?)));
    parsed
        .map(|(count, millis)| (count, Duration::from_millis(millis)))
        .ok_or_else(|| format!("expected N:MS (two whole numbers), not {text:?}"))
}

/// Splits `a,b,[c:-1,d:1]` at the commas outside brackets.
fn split_instruments(list: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (at, byte) in list.bytes().enumerate() {
        match byte {
            b'[' => depth += 1,
            b']' => depth -= 1,
            b',' if depth == 0 => {
                names.push(list[start..at].trim().to_owned());
                start = at + 1;
            }
            _ => {}
        }
    }
    names.push(list[start..].trim().to_owned());
    names.retain(|name| !name.is_empty());
    names
}

fn seconds(value: f64, name: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("--{name} must be a non-negative number of seconds"))
}

pub fn sim(args: SimArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a terminal: a redirected stderr (a log file, a pipe) gets plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
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
    check_flags(&args)?;
    match args.venue {
        SimVenue::Thalex => return run_thalex(args),
        SimVenue::Databento => return run_databento(args),
        SimVenue::Bybit => return run_bybit(args),
        SimVenue::Itch => return run_itch(args),
        SimVenue::Okx => return run_okx(args),
        SimVenue::Binance | SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe => {}
    }
    let sbe = args.venue == SimVenue::BinanceSpotSbe;
    let spot = args.venue == SimVenue::BinanceSpot || sbe;
    let signals = StopSignals::block()?;
    let source: Box<dyn Source> = match &args.source {
        Some(path) => Box::new(
            CaptureSource::open(path)
                .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
        ),
        None => Box::new(
            SyntheticSource::new(SyntheticConfig {
                symbols: args.symbols.unwrap_or(BINANCE_SYMBOLS),
                rate_per_sec: args.rate.unwrap_or(BINANCE_RATE),
                seed: args.seed,
                // Spot's market also trades one by one (`@trade`) beside the aggregates.
                channels: if spot {
                    ["bookTicker", "depth@100ms", "trade", "aggTrade"]
                        .map(str::to_owned)
                        .to_vec()
                } else {
                    SyntheticConfig::default().channels
                },
                ..SyntheticConfig::default()
            })
            .map_err(|error| anyhow::anyhow!("synthetic market: {error}"))?,
        ),
    };
    let (source, mut options): (Box<dyn Source>, SimOptions) = if sbe {
        let mut options = SimOptions::binance_spot_sbe(&args.cert_dir);
        options.api_key.clone_from(&args.api_key);
        (Box::new(SbeSource::new(source)), options)
    } else if spot {
        (
            Box::new(SpotSource::new(source)),
            SimOptions::binance_spot(&args.cert_dir),
        )
    } else {
        (source, SimOptions::new(&args.cert_dir))
    };
    options.listen = tls_listen(&args);
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
    // The flags' defaults are USD-M's; Spot's own (20 s, 60 s) stand unless they are given.
    if !spot || args.ping_interval != 180.0 {
        options.ping_interval = seconds(args.ping_interval, "ping-interval")?;
    }
    if !spot || args.pong_timeout != 600.0 {
        options.pong_timeout = seconds(args.pong_timeout, "pong-timeout")?;
    }
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
        rest_error_every: args.rest_error_every,
        rotate_faults: args.rotate_faults,
        handshake_delay: args.handshake_delay_ms.map(Duration::from_millis),
        wrong_host_cert: args.wrong_host_cert,
        ignore_requests: args.ignore_requests,
        server_shutdown_after: args.server_shutdown_after,
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
    let mut sim = Sim::start(options, source)?;
    let addr = sim.addr();
    eprintln!("sim: listening on {addr} (WebSocket and REST over TLS)");
    eprintln!("sim: CA certificate: {}", sim.ca_pem_path().display());
    if sbe {
        eprintln!("sim: SBE streams:      wss://{addr}/stream?streams=btcusdt@bestBidAsk/btcusdt@depth/... (header X-MBX-APIKEY)");
        eprintln!("sim: raw stream:       wss://{addr}/ws/btcusdt@bestBidAsk");
    } else if spot {
        eprintln!("sim: combined streams: wss://{addr}/stream?streams=btcusdt@bookTicker/...");
        eprintln!("sim: raw stream:       wss://{addr}/ws/btcusdt@bookTicker");
    } else {
        eprintln!(
            "sim: venue file url:   wss://{addr} (the host root; tickwire routes the channels)"
        );
        eprintln!(
            "sim: combined streams: wss://{addr}/public/stream?streams=btcusdt@bookTicker/... \
             (bookTicker, depth, trade), wss://{addr}/market/stream?streams=btcusdt@aggTrade/... \
             (aggTrade, markPrice)"
        );
        eprintln!("sim: raw stream:       wss://{addr}/public/ws/btcusdt@bookTicker");
    }
    let depth_path = if spot {
        "/api/v3/depth"
    } else {
        "/fapi/v1/depth"
    };
    eprintln!("sim: depth snapshot:   https://{addr}{depth_path}?symbol=BTCUSDT&limit=1000");
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
    // Stopped first, so that the count is final: the pacer sends nothing after it, and a soak
    // test compares it with what the client received.
    sim.stop();
    let stats = sim.stats();
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

/// Refuses the flags the chosen venue has no use for, naming them. Flags with a default count as
/// given when their value differs from it.
fn check_flags(args: &SimArgs) -> anyhow::Result<()> {
    let databento_only = [
        ("--file", args.file.is_some()),
        ("--history", args.history.is_some()),
        ("--records", args.records.is_some()),
        ("--dataset", args.dataset.is_some()),
        ("--split-writes", args.split_writes),
        ("--error-after", args.error_after.is_some()),
        (
            "--slow-reader-warning-after",
            args.slow_reader_warning_after.is_some(),
        ),
        ("--close-after-seconds", args.close_after_seconds.is_some()),
        ("--refuse-auth", args.refuse_auth),
    ];
    let sbe_only = [
        ("--api-key", args.api_key.is_some()),
        (
            "--server-shutdown-after",
            args.server_shutdown_after.is_some(),
        ),
    ];
    let not_sbe = args.venue != SimVenue::BinanceSpotSbe;
    let bybit_only = [
        ("--restart-after", args.restart_after.is_some()),
        ("--skip-u-after", args.skip_u_after.is_some()),
    ];
    let itch_only = [
        ("--itch-venue", args.itch_venue.is_some()),
        ("--itch-faults", args.itch_faults.is_some()),
        ("--itch-messages", args.itch_messages.is_some()),
    ];
    let okx_only = [
        (
            "--corrupt-checksum-every",
            args.corrupt_checksum_every.is_some(),
        ),
        ("--seq-reset-after", args.seq_reset_after.is_some()),
    ];
    let (venue, ignored): (&str, Vec<(&str, bool)>) = match args.venue {
        SimVenue::Binance | SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe => (
            match args.venue {
                SimVenue::Binance => "binance",
                SimVenue::BinanceSpot => "binance-spot",
                _ => "binance-spot-sbe",
            },
            vec![
                ("--instruments", args.instruments.is_some()),
                ("--request-limit", args.request_limit.is_some()),
                ("--stall-silent", args.stall_silent),
                (
                    "--reconnect-event-after",
                    args.reconnect_event_after.is_some(),
                ),
            ]
            .into_iter()
            .chain(databento_only)
            .chain(sbe_only.map(|(flag, given)| (flag, given && not_sbe)))
            .chain(bybit_only)
            .chain(itch_only)
            .chain(okx_only)
            .collect(),
        ),
        SimVenue::Thalex => (
            "thalex",
            vec![
                ("--symbols", args.symbols.is_some()),
                // The pace of a replay (`--source`).
                ("--speed", args.speed != 1.0 && args.source.is_none()),
                (
                    "--as-fast-as-possible",
                    args.as_fast_as_possible && args.source.is_none(),
                ),
                ("--start-immediately", args.start_immediately),
                ("--exit-when-done", args.exit_when_done),
                ("--ping-interval", args.ping_interval != 180.0),
                ("--pong-timeout", args.pong_timeout != 600.0),
                ("--malformed-every", args.malformed_every.is_some()),
                ("--oversized-after", args.oversized_after.is_some()),
                ("--fragment-into", args.fragment_into.is_some()),
                ("--skip-depth-after", args.skip_depth_after.is_some()),
                ("--rest-errors", args.rest_errors != 0),
                ("--rest-error-every", args.rest_error_every.is_some()),
                ("--rotate-faults", args.rotate_faults),
                ("--handshake-delay-ms", args.handshake_delay_ms.is_some()),
                ("--wrong-host-cert", args.wrong_host_cert),
                ("--ignore-requests", args.ignore_requests),
                ("--stamps", args.stamps.is_some()),
            ]
            .into_iter()
            .chain(databento_only)
            .chain(sbe_only.map(|(flag, given)| (flag, given && not_sbe)))
            .chain(bybit_only)
            .chain(itch_only)
            .chain(okx_only)
            .collect(),
        ),
        SimVenue::Databento => (
            "databento",
            vec![
                ("--source", args.source.is_some() && args.file.is_some()),
                ("--speed", args.speed != 1.0),
                ("--as-fast-as-possible", args.as_fast_as_possible),
                ("--start-immediately", args.start_immediately),
                ("--exit-when-done", args.exit_when_done),
                ("--ping-interval", args.ping_interval != 180.0),
                ("--pong-timeout", args.pong_timeout != 600.0),
                ("--stall-silent", args.stall_silent),
                ("--malformed-every", args.malformed_every.is_some()),
                ("--oversized-after", args.oversized_after.is_some()),
                ("--fragment-into", args.fragment_into.is_some()),
                ("--skip-depth-after", args.skip_depth_after.is_some()),
                ("--rest-errors", args.rest_errors != 0),
                ("--rest-error-every", args.rest_error_every.is_some()),
                ("--rotate-faults", args.rotate_faults),
                ("--handshake-delay-ms", args.handshake_delay_ms.is_some()),
                ("--wrong-host-cert", args.wrong_host_cert),
                ("--ignore-requests", args.ignore_requests),
                ("--request-limit", args.request_limit.is_some()),
                (
                    "--reconnect-event-after",
                    args.reconnect_event_after.is_some(),
                ),
                ("--stamps", args.stamps.is_some()),
            ]
            .into_iter()
            .chain(sbe_only)
            .chain(bybit_only)
            .chain(itch_only)
            .chain(okx_only)
            .collect(),
        ),
        SimVenue::Bybit => (
            "bybit",
            vec![
                ("--symbols", args.symbols.is_some()),
                ("--source", args.source.is_some()),
                ("--speed", args.speed != 1.0),
                ("--as-fast-as-possible", args.as_fast_as_possible),
                ("--start-immediately", args.start_immediately),
                ("--exit-when-done", args.exit_when_done),
                ("--ping-interval", args.ping_interval != 180.0),
                ("--pong-timeout", args.pong_timeout != 600.0),
                ("--malformed-every", args.malformed_every.is_some()),
                ("--oversized-after", args.oversized_after.is_some()),
                ("--fragment-into", args.fragment_into.is_some()),
                ("--skip-depth-after", args.skip_depth_after.is_some()),
                ("--rest-errors", args.rest_errors != 0),
                ("--rest-error-every", args.rest_error_every.is_some()),
                ("--rotate-faults", args.rotate_faults),
                ("--handshake-delay-ms", args.handshake_delay_ms.is_some()),
                ("--wrong-host-cert", args.wrong_host_cert),
                ("--ignore-requests", args.ignore_requests),
                ("--request-limit", args.request_limit.is_some()),
                (
                    "--reconnect-event-after",
                    args.reconnect_event_after.is_some(),
                ),
                ("--stamps", args.stamps.is_some()),
            ]
            .into_iter()
            .chain(databento_only)
            .chain(sbe_only)
            .chain(itch_only)
            .chain(okx_only)
            .collect(),
        ),
        SimVenue::Itch => (
            "itch",
            vec![
                ("--listen", args.listen.is_some()),
                ("--speed", args.speed != 1.0),
                ("--as-fast-as-possible", args.as_fast_as_possible),
                ("--start-immediately", args.start_immediately),
                ("--exit-when-done", args.exit_when_done),
                ("--ping-interval", args.ping_interval != 180.0),
                ("--pong-timeout", args.pong_timeout != 600.0),
                ("--close-after", args.close_after.is_some()),
                ("--reset-after", args.reset_after.is_some()),
                ("--stall-after", args.stall_after.is_some()),
                ("--stall-silent", args.stall_silent),
                ("--malformed-every", args.malformed_every.is_some()),
                ("--oversized-after", args.oversized_after.is_some()),
                ("--fragment-into", args.fragment_into.is_some()),
                ("--skip-depth-after", args.skip_depth_after.is_some()),
                ("--rest-errors", args.rest_errors != 0),
                ("--rest-error-every", args.rest_error_every.is_some()),
                ("--rotate-faults", args.rotate_faults),
                ("--handshake-delay-ms", args.handshake_delay_ms.is_some()),
                ("--wrong-host-cert", args.wrong_host_cert),
                ("--ignore-requests", args.ignore_requests),
                ("--instruments", args.instruments.is_some()),
                ("--request-limit", args.request_limit.is_some()),
                (
                    "--reconnect-event-after",
                    args.reconnect_event_after.is_some(),
                ),
                ("--stamps", args.stamps.is_some()),
            ]
            .into_iter()
            .chain(databento_only)
            .chain(sbe_only)
            .chain(bybit_only)
            .chain(okx_only)
            .collect(),
        ),
        SimVenue::Okx => (
            "okx",
            vec![
                ("--symbols", args.symbols.is_some()),
                ("--source", args.source.is_some()),
                ("--speed", args.speed != 1.0),
                ("--as-fast-as-possible", args.as_fast_as_possible),
                ("--start-immediately", args.start_immediately),
                ("--exit-when-done", args.exit_when_done),
                ("--ping-interval", args.ping_interval != 180.0),
                ("--pong-timeout", args.pong_timeout != 600.0),
                ("--malformed-every", args.malformed_every.is_some()),
                ("--oversized-after", args.oversized_after.is_some()),
                ("--fragment-into", args.fragment_into.is_some()),
                ("--skip-depth-after", args.skip_depth_after.is_some()),
                ("--rest-errors", args.rest_errors != 0),
                ("--rest-error-every", args.rest_error_every.is_some()),
                ("--rotate-faults", args.rotate_faults),
                ("--handshake-delay-ms", args.handshake_delay_ms.is_some()),
                ("--wrong-host-cert", args.wrong_host_cert),
                ("--ignore-requests", args.ignore_requests),
                ("--request-limit", args.request_limit.is_some()),
                (
                    "--reconnect-event-after",
                    args.reconnect_event_after.is_some(),
                ),
                ("--stamps", args.stamps.is_some()),
            ]
            .into_iter()
            .chain(databento_only)
            .chain(sbe_only)
            .chain(bybit_only)
            .chain(itch_only)
            .collect(),
        ),
    };
    let given: Vec<&str> = ignored
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
    if !given.is_empty() {
        anyhow::bail!(
            "{} not used with --venue {venue}; leave {} out",
            given.join(", "),
            if given.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// `tickwire sim --venue thalex`: the Thalex server until SIGINT or SIGTERM.
fn run_thalex(args: SimArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let mut options = ThalexOptions::new(&args.cert_dir);
    options.listen = tls_listen(&args);
    options.seed = args.seed;
    options.rate = args.rate.unwrap_or(THALEX_RATE);
    if let Some(list) = &args.instruments {
        options.instruments = split_instruments(list);
        if options.instruments.is_empty() {
            anyhow::bail!("--instruments names no instrument");
        }
    }
    if let Some(limit) = args.request_limit {
        options.request_limit_per_sec = limit;
    }
    options.faults = ThalexFaults {
        close_after: args.close_after,
        reset_after: args.reset_after,
        stall_after: match (args.stall_after, args.stall_seconds) {
            (Some(after), Some(secs)) => Some((after, seconds(secs, "stall-seconds")?)),
            _ => None,
        },
        stall_silent: args.stall_silent,
        reconnect_event_after: args.reconnect_event_after,
        fault_connections: args.fault_connections,
    };
    if let Some(path) = &args.source {
        if !(args.speed > 0.0 && args.speed.is_finite()) {
            anyhow::bail!("--speed must be a positive number");
        }
        let recording = thalex::Recording::open(path)?;
        if recording.is_empty() {
            anyhow::bail!("{}: no Thalex notification to replay", path.display());
        }
        eprintln!(
            "sim: replaying {}: {} notifications of {} channels ({} other lines passed over), {}",
            path.display(),
            recording.len(),
            recording.channels().len(),
            recording.passed_over(),
            if args.as_fast_as_possible {
                "as fast as clients read".to_owned()
            } else {
                format!("at {}x the recorded pace", args.speed)
            }
        );
        options.replay = Some(thalex::Replay {
            recording: std::sync::Arc::new(recording),
            pace: if args.as_fast_as_possible {
                thalex::ReplayPace::AsFastAsPossible
            } else {
                thalex::ReplayPace::Recorded { speed: args.speed }
            },
        });
    }
    let instruments = match &options.replay {
        Some(replay) => replay.recording.channels().join(" "),
        None => options.instruments.join(" "),
    };
    let sim = thalex::start(options)?;
    eprintln!("sim: Thalex WebSocket API on {} (TLS)", sim.addr());
    eprintln!("sim: URL: {}", sim.url());
    eprintln!("sim: CA certificate: {}", sim.ca_pem_path().display());
    if args.source.is_some() {
        eprintln!("sim: channels: {instruments}");
    } else {
        eprintln!("sim: instruments: {instruments}");
    }
    eprintln!(
        "sim: login key id {}; the test-only private key is tickwire_sim::thalex::TEST_PRIVATE_KEY_PEM",
        thalex::TEST_KEY_ID
    );
    loop {
        if let Some(signal) = signals.wait(Duration::from_millis(200))? {
            eprintln!("sim: signal {signal}; stopping");
            break;
        }
    }
    let stats = sim.stats();
    drop(sim);
    eprintln!(
        "sim: {} connections, {} logins ({} failed), {} data messages sent",
        stats.websocket_connections, stats.logins_ok, stats.logins_failed, stats.data_messages_sent
    );
    Ok(())
}

/// `tickwire sim --venue bybit`: the Bybit server (both categories) until SIGINT or SIGTERM.
fn run_bybit(args: SimArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let mut options = BybitOptions::new(&args.cert_dir);
    options.listen = tls_listen(&args);
    options.seed = args.seed;
    options.rate = args.rate.unwrap_or(BYBIT_RATE);
    if let Some(list) = &args.instruments {
        let symbols = split_instruments(list);
        if symbols.is_empty() {
            anyhow::bail!("--instruments names no symbol");
        }
        options.spot_symbols = symbols.clone();
        options.linear_symbols = symbols;
    }
    options.faults = BybitFaults {
        close_after: args.close_after,
        reset_after: args.reset_after,
        stall_after: match (args.stall_after, args.stall_seconds) {
            (Some(after), Some(secs)) => Some((after, seconds(secs, "stall-seconds")?)),
            _ => None,
        },
        stall_silent: args.stall_silent,
        restart_after: args.restart_after,
        skip_u_after: args.skip_u_after,
        fault_connections: args.fault_connections,
    };
    let spot = options.spot_symbols.join(" ");
    let linear = options.linear_symbols.join(" ");
    let sim = bybit::start(options)?;
    eprintln!("sim: Bybit v5 public WebSocket on {} (TLS)", sim.addr());
    eprintln!(
        "sim: URL: {} (symbols: {spot})",
        sim.url(bybit::Category::Spot)
    );
    eprintln!(
        "sim: URL: {} (symbols: {linear})",
        sim.url(bybit::Category::Linear)
    );
    eprintln!("sim: CA certificate: {}", sim.ca_pem_path().display());
    loop {
        if let Some(signal) = signals.wait(Duration::from_millis(200))? {
            eprintln!("sim: signal {signal}; stopping");
            break;
        }
    }
    let stats = sim.stats();
    drop(sim);
    eprintln!(
        "sim: {} connections, {} topics subscribed, {} requests refused, {} data messages sent",
        stats.websocket_connections,
        stats.topics_subscribed,
        stats.requests_refused,
        stats.data_messages_sent
    );
    Ok(())
}

/// `tickwire sim --venue okx`: the OKX server (both entry points) until SIGINT or SIGTERM.
fn run_okx(args: SimArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let mut options = OkxOptions::new(&args.cert_dir);
    options.listen = tls_listen(&args);
    options.seed = args.seed;
    options.rate = args.rate.unwrap_or(OKX_RATE);
    if let Some(list) = &args.instruments {
        let instruments = split_instruments(list);
        if instruments.is_empty() {
            anyhow::bail!("--instruments names no instrument");
        }
        options.instruments = instruments;
    }
    options.faults = OkxFaults {
        close_after: args.close_after,
        reset_after: args.reset_after,
        stall_after: match (args.stall_after, args.stall_seconds) {
            (Some(after), Some(secs)) => Some((after, seconds(secs, "stall-seconds")?)),
            _ => None,
        },
        stall_silent: args.stall_silent,
        corrupt_checksum_every: args.corrupt_checksum_every,
        seq_reset_after: args.seq_reset_after,
        fault_connections: args.fault_connections,
    };
    let instruments = options.instruments.join(" ");
    let sim = okx::start(options)?;
    eprintln!("sim: OKX v5 WebSocket on {} (TLS)", sim.addr());
    eprintln!("sim: URL: {} (instruments: {instruments})", sim.url(false));
    eprintln!("sim: URL: {} (trades-all)", sim.url(true));
    eprintln!("sim: CA certificate: {}", sim.ca_pem_path().display());
    loop {
        if let Some(signal) = signals.wait(Duration::from_millis(200))? {
            eprintln!("sim: signal {signal}; stopping");
            break;
        }
    }
    let stats = sim.stats();
    drop(sim);
    eprintln!(
        "sim: {} connections, {} streams subscribed, {} requests refused, {} data messages \
         sent, {} checksums corrupted",
        stats.websocket_connections,
        stats.streams_subscribed,
        stats.requests_refused,
        stats.data_messages_sent,
        stats.corruptions_injected
    );
    Ok(())
}

fn tls_listen(args: &SimArgs) -> SocketAddr {
    args.listen
        .unwrap_or_else(|| TLS_LISTEN.parse().expect("a valid default address"))
}

/// `tickwire sim --venue databento`: the mock Live Subscription Gateway until SIGINT or SIGTERM.
fn run_databento(args: SimArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let mut options = DatabentoOptions {
        listen: args
            .listen
            .unwrap_or_else(|| DATABENTO_LISTEN.parse().expect("a valid default address")),
        rate: args.rate.unwrap_or(DATABENTO_RATE),
        seed: args.seed,
        ..DatabentoOptions::default()
    };
    if let Some(list) = &args.instruments {
        options.symbols = split_instruments(list);
        if options.symbols.is_empty() {
            anyhow::bail!("--instruments names no instrument");
        }
    } else if let Some(count) = args.symbols {
        options.symbols = databento::numbered_symbols(count);
    }
    if let Some(history) = args.history {
        options.history = history;
    }
    if let Some(dataset) = &args.dataset {
        options.dataset = dataset.clone();
    }
    options.source = match (args.file.as_ref().or(args.source.as_ref()), args.records) {
        // A DBN file, or a `tickwire record --venue` recording of a gateway session (told
        // apart by their bytes).
        (Some(path), _) => DatabentoSource::File {
            path: path.clone(),
            looping: args.looping,
        },
        (None, Some(records)) => DatabentoSource::Benchmark { records },
        (None, None) => DatabentoSource::Synthetic,
    };
    let stall_seconds = |secs: f64| {
        if secs == f64::INFINITY {
            Ok(Duration::MAX)
        } else {
            seconds(secs, "stall-seconds")
        }
    };
    options.faults = DatabentoFaults {
        split_writes: args.split_writes,
        error_after: args.error_after.map(|after_records| InjectedError {
            after_records,
            code: args.error_code,
            text: args.error_text.clone(),
        }),
        stall_after: match (args.stall_after, args.stall_seconds) {
            (Some(after), Some(secs)) => Some((after, stall_seconds(secs)?)),
            _ => None,
        },
        slow_reader_warning_after: args.slow_reader_warning_after,
        close_after: args.close_after,
        close_after_time: args
            .close_after_seconds
            .map(|secs| seconds(secs, "close-after-seconds"))
            .transpose()?,
        reset_after: args.reset_after,
        refuse_auth: args.refuse_auth,
        fault_connections: args.fault_connections,
    };
    let source = match &options.source {
        DatabentoSource::Synthetic => format!(
            "a synthetic MBO market at {} records/s{}, the last {} kept for replays",
            options.rate,
            if options.rate == 0.0 {
                " (as fast as clients read)"
            } else {
                ""
            },
            options.history
        ),
        DatabentoSource::File { path, looping } => format!(
            "{}{}",
            path.display(),
            if *looping { ", looping" } else { ", once" }
        ),
        DatabentoSource::Benchmark { records } => {
            format!("benchmark mode, a batch of {records} MBO records per session")
        }
    };
    let sim = databento::start(options)
        .map_err(|error| anyhow::anyhow!("Databento gateway simulator: {error}"))?;
    eprintln!(
        "sim: listening on {} (Databento Live Subscription Gateway, plain TCP)",
        sim.addr()
    );
    eprintln!(
        "sim: API key {} (tickwire_sim::databento::TEST_API_KEY), dataset {}",
        sim.api_key(),
        sim.dataset()
    );
    eprintln!("sim: source: {source}");
    let mut instruments: Vec<String> = sim
        .instruments()
        .iter()
        .take(20)
        .map(|(symbol, id)| format!("{symbol}={id}"))
        .collect();
    if sim.instruments().len() > 20 {
        instruments.push(format!("and {} more", sim.instruments().len() - 20));
    }
    eprintln!("sim: instruments: {}", instruments.join(" "));
    loop {
        if let Some(signal) = signals.wait(Duration::from_millis(200))? {
            eprintln!("sim: signal {signal}; stopping");
            break;
        }
    }
    let stats = sim.stats();
    drop(sim);
    eprintln!(
        "sim: {} connections, {} sessions ({} auths failed), {} records sent, {} heartbeats",
        stats.connections_accepted,
        stats.sessions_started,
        stats.auths_failed,
        stats.records_sent,
        stats.heartbeats_sent
    );
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

/// `tickwire sim --venue itch`: the session of a raw ITCH file (`--source`) or of a generated
/// market, sent to the lines of the nasdaq-itch venue file `--itch-venue` with the faults of
/// `--itch-faults`, its re-request server answering; ends with the session, or on SIGINT or
/// SIGTERM (the session's end of session is still sent).
fn run_itch(args: SimArgs) -> anyhow::Result<()> {
    use tickwire::venue::nasdaq_itch::config::{self as itch_config, ItchConfig};
    use tickwire_sim::itch::{self, ItchSim, ItchSimOptions, ItchSource};
    let Some(path) = &args.itch_venue else {
        anyhow::bail!("--venue itch needs --itch-venue FILE, a nasdaq-itch venue file (config/venues/nasdaq-itch-sim.toml)");
    };
    let venue = tickwire::config::load_venue(path).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    let table = ItchConfig::of(&venue)
        .ok_or_else(|| anyhow::anyhow!("{}: not a nasdaq-itch venue file", path.display()))?;
    let line_a = itch_config::multicast(&format!("{}:{}", venue.url.host, venue.url.port))
        .map_err(|error| anyhow::anyhow!(error))?;
    let Some(line_b) = table.line_b.as_deref() else {
        anyhow::bail!(
            "{}: the simulator sends two lines; set nasdaq_itch.line_b",
            path.display()
        );
    };
    let line_b = itch_config::multicast(line_b).map_err(|error| anyhow::anyhow!(error))?;
    let Some(rerequest) = table.rerequest.as_deref() else {
        anyhow::bail!(
            "{}: set nasdaq_itch.rerequest, where the simulator serves re-requests",
            path.display()
        );
    };
    let rerequest: std::net::SocketAddrV4 = rerequest.parse()?;
    let interface = itch::interface_address(&table.interface)?;
    let session = table
        .session
        .as_deref()
        .and_then(itch_config::session)
        .map_or(*b"TICKWIRE01", |session| session.0);
    let source = match &args.source {
        Some(raw) => ItchSource::Raw(std::fs::read(raw)?),
        None => ItchSource::Generate {
            seed: args.seed,
            stocks: u16::try_from(args.symbols.unwrap_or(100)).unwrap_or(u16::MAX),
            live: 20_000,
            messages: args.itch_messages.unwrap_or(100_000),
        },
    };
    let faults = itch::parse_faults(args.itch_faults.as_deref().unwrap_or(""))
        .map_err(|error| anyhow::anyhow!("--itch-faults: {error}"))?;
    let signals = StopSignals::block()?;
    let sim = ItchSim::start(ItchSimOptions {
        line_a,
        line_b,
        interface,
        rerequest,
        session,
        source,
        messages_per_packet: 8,
        packet_rate: args.rate.map_or(10_000, |rate| rate.max(0.0) as u64),
        faults,
        seed: args.seed,
        heartbeat_ms: 100,
        linger_ms: 2_000,
        ttl: 1,
        record_send_times: false,
    })
    .map_err(|error| anyhow::anyhow!("ITCH simulator: {error}"))?;
    eprintln!(
        "sim: ITCH over MoldUDP64 to {line_a} (A) and {line_b} (B) from {interface}; \
         re-requests at {}",
        sim.rerequest
    );
    while !sim.finished() {
        if signals.wait(Duration::from_millis(100))?.is_some() {
            sim.stop();
            break;
        }
    }
    let stats = sim.wait()?;
    eprintln!(
        "sim: {} messages in {} packets; dropped on A {}, on B {}, on both {}, lost {} \
         ({} messages); reordered {}, duplicated {}; {} re-requests, {} answers",
        stats.messages,
        stats.packets,
        stats.dropped_a,
        stats.dropped_b,
        stats.dropped_both,
        stats.lost,
        stats.lost_messages,
        stats.reordered,
        stats.duplicated,
        stats.requests,
        stats.answers
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instrument_lists_split_outside_brackets() {
        assert_eq!(
            split_instruments("BTC-PERPETUAL, [A:-1,B:1],ETH-PERPETUAL,"),
            vec!["BTC-PERPETUAL", "[A:-1,B:1]", "ETH-PERPETUAL"]
        );
    }

    #[test]
    fn reconnect_fault_takes_count_and_millis() {
        assert_eq!(
            count_and_millis("5:250"),
            Ok((5, Duration::from_millis(250)))
        );
        assert!(count_and_millis("5").is_err());
        assert!(count_and_millis("x:1").is_err());
    }
}
