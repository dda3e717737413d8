//! Several decoders (issue 36): how far one venue's flood reaches into another venue's latency,
//! and how decoding scales with decoder threads. One command runs both parts:
//! `cargo bench --bench decoders` (it prints the machine first).
//!
//! **Isolation.** A Binance USD-M venue (the simulator's synthetic market, one symbol's
//! bookTicker at `DECODERS_BENCH_QUOTE_RATE`, default 2,000 messages a second) and a Databento
//! venue (the mock gateway's synthetic MBO market at `DECODERS_BENCH_FLOOD_RATE`, default
//! 1,000,000 records a second), on an appliance with two decoders, three runs: no flood (the
//! Databento venue absent), the flood on the Binance venue's decoder, the flood on the other
//! decoder. Each run: a warm-up, then a window of `DECODERS_BENCH_SECONDS` (default 3) in which
//! a strategy records, per Binance quote (as sent, not derived), the time from the network
//! thread's receive stamp to the strategy taking it. Before a run's figures are printed: at least
//! 500 quotes measured, no frame or event ring refusal on the Binance venue's decoder, and with a
//! flood, MBO records delivered throughout the window. Beside each run's figures, decoder 0's
//! own receive-to-decoded percentiles over the whole run (the Binance venue's decoder: with the
//! flood on the other decoder, its quotes alone), from the runtime's per-decoder histograms
//! (`LatencyCollector::source_totals`): whether a quote's delay comes before its decoding (the
//! network thread, the decoder) or after it (its event ring, the strategy).
//! A fourth run puts the flood on the other decoder in pulses (`PULSE_ON` at the rate, then
//! `PULSE_OFF` with none, repeated) and sorts the quotes of that one run by the phase their
//! receive stamp falls in (`PULSE_GUARD` at each phase's edges left out): quotes while the flood
//! runs against quotes while it rests, in the same process, on the same host, in the same
//! seconds. Runs measured a few seconds apart differ by more than the goal's 10 % on a shared
//! host (the no-flood p99 moved between 59 and 113 us from run to run on a 16-core VM); the
//! pulsed run's two halves share whatever the host does meanwhile.
//! Goal: with the flood on the other decoder,
//! Binance p99 within 10 % of no flood (in the pulsed run: flooding within 10 % of resting). The strategy is one thread for every decoder, so the
//! flood's events still pass through it: the figure shows what separate decoders isolate and
//! what they cannot.
//!
//! **Throughput.** For each decoder count in `DECODERS_BENCH_COUNTS` (default: 1, 2, 4 and 8,
//! those the host has `count + 2` cores for), that many mock gateways in benchmark mode, each
//! writing `DECODERS_BENCH_RECORDS` (default 1,000,000) MBO records as fast as the socket takes
//! them, one venue each, each venue on a decoder of its own. Records/s is all records over the
//! time from the first record seen to the last; events/s the events the decoders published over
//! the same time. Checked first: every record of every gateway delivered, no frame ring refusal,
//! no malformed record.
//!
//! Timings on a shared 2-core VM are noisy and cannot show scaling; the command runs offline on
//! any machine and prints which one.

use anyhow::{bail, ensure, Context};
use hdrhistogram::Histogram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config;
use tickwire::control::{Session, SessionExtras};
use tickwire::event::{flags, Event, EventKind};
use tickwire::metrics::LatencySummary;
use tickwire::strategy::{Market, Strategy};
use tickwire_sim::databento::{self, DatabentoOptions, DatabentoSource, TEST_API_KEY};
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::{Sim, SimOptions};

const KEY_VARIABLE: &str = "TICKWIRE_BENCH_DATABENTO_KEY";
const SYMBOLS: [&str; 2] = ["ESM5", "NQM5"];
const WARMUP: Duration = Duration::from_millis(1_500);
/// The pulsed flood's phases, and what is left out at each phase's edges (the flood's backlog
/// draining, the clocks of the gateway and the appliance agreeing to well within it).
const PULSE_ON: Duration = Duration::from_millis(250);
const PULSE_OFF: Duration = Duration::from_millis(250);
const PULSE_GUARD: Duration = Duration::from_millis(50);

fn env_u64(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    let part = std::env::var("DECODERS_BENCH_PART").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "machine: {cores} cores available to this process; {}",
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| text
                .lines()
                .find(|line| line.starts_with("model name"))
                .map(|line| line.split(':').nth(1).unwrap_or("").trim().to_owned()))
            .unwrap_or_else(|| "cpu model unknown".to_owned())
    );
    std::env::set_var(KEY_VARIABLE, TEST_API_KEY);
    if part.is_empty() || part == "isolation" {
        isolation(
            env_u64("DECODERS_BENCH_QUOTE_RATE", 2_000)? as f64,
            env_u64("DECODERS_BENCH_FLOOD_RATE", 1_000_000)? as f64,
            Duration::from_secs(env_u64("DECODERS_BENCH_SECONDS", 3)?),
        )?;
    }
    if part.is_empty() || part == "throughput" {
        let counts: Vec<usize> = match std::env::var("DECODERS_BENCH_COUNTS") {
            Ok(list) => list
                .split(',')
                .filter_map(|count| count.trim().parse().ok())
                .collect(),
            Err(_) => [1, 2, 4, 8]
                .into_iter()
                .filter(|&count| count == 1 || count + 2 <= cores)
                .collect(),
        };
        throughput(&counts, env_u64("DECODERS_BENCH_RECORDS", 1_000_000)?)?;
    }
    Ok(())
}

const COMMON: &str = "[log]\nlevel = \"warn\"\n\
    [rings]\nframe_ring_bytes = 67108864\nevent_ring_slots = 262144\n\
    [net]\nbackend = \"epoll\"\nwait = \"block\"\nblock_timeout_us = 1000\nmax_connections = 64\n\
    [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n";

const DECODER: &str = "[[threads.decoders]]\nwait = \"spin-then-yield\"\nspin_iterations = 1000\n";

const STRATEGY: &str =
    "[threads.strategy]\nwait = \"park\"\nspin_iterations = 1000\npark_timeout_us = 100\n";

fn databento_venue(name: &str, gateway: &databento::DatabentoHandle, decoder: usize) -> String {
    format!(
        "decoder = {decoder}\nname = {name:?}\nkind = \"databento\"\n\
         url = \"tcp://127.0.0.1:{}\"\n\
         symbols = [{}]\nchannels = [\"mbo\"]\n\
         [databento]\ndataset = \"GLBX.MDP3\"\nrecovery = \"gap\"\n\
         [credentials]\napi_key_env = \"{KEY_VARIABLE}\"\n\
         [reconnect]\ninitial_delay_ms = 600000\nmax_delay_ms = 600000\n",
        gateway.addr().port(),
        SYMBOLS
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// Per Binance quote (venue 0, as sent) taken inside the window: receive to strategy. With
/// `pulses` (the gateway's start, ns since the epoch), a quote received in a flood phase goes to
/// `latency`, one received in a resting phase to `resting`, one near a phase's edge to neither.
struct QuoteLatency {
    window: Arc<Mutex<Option<(Instant, Instant)>>>,
    latency: Arc<Mutex<Histogram<u64>>>,
    resting: Arc<Mutex<Histogram<u64>>>,
    pulses: Option<u64>,
}

/// Which histogram a quote received at `recv_ns` belongs to, for a pulsed flood from `start_ns`:
/// `Some(true)` flooding, `Some(false)` resting, `None` near an edge.
fn pulse_phase(start_ns: u64, recv_ns: u64) -> Option<bool> {
    let ns = |duration: Duration| duration.as_nanos() as u64;
    let (on, off, guard) = (ns(PULSE_ON), ns(PULSE_OFF), ns(PULSE_GUARD));
    let within = recv_ns.checked_sub(start_ns)? % (on + off);
    if within >= guard && within + guard < on {
        Some(true)
    } else if within >= on + guard && within + guard < on + off {
        Some(false)
    } else {
        None
    }
}

impl Strategy for QuoteLatency {
    fn on_events(&mut self, events: &[Event], _market: &Market, now_ns: u64) {
        let inside = self
            .window
            .lock()
            .ok()
            .and_then(|window| *window)
            .is_some_and(|(from, to)| {
                let now = Instant::now();
                now >= from && now < to
            });
        if !inside {
            return;
        }
        let mut latency = self
            .latency
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut resting = self
            .resting
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for event in events {
            let header = &event.header;
            if header.venue_id == 0
                && header.kind == EventKind::Quote
                && header.flags & flags::DERIVED == 0
            {
                let value = now_ns.saturating_sub(header.recv_ts_ns).max(1);
                match self
                    .pulses
                    .map(|start| pulse_phase(start, header.recv_ts_ns))
                {
                    None | Some(Some(true)) => latency.saturating_record(value),
                    Some(Some(false)) => resting.saturating_record(value),
                    Some(None) => {}
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flood {
    None,
    SameDecoder,
    OtherDecoder,
    /// On the other decoder, in pulses.
    Pulsed,
}

fn isolation(quote_rate: f64, flood_rate: f64, window: Duration) -> anyhow::Result<()> {
    println!();
    println!(
        "isolation: Binance bookTicker at {quote_rate:.0}/s beside a Databento MBO flood at {:.0} k records/s; two decoders; Binance quote receive->strategy over a {:.1} s window after {:.1} s",
        flood_rate / 1e3,
        window.as_secs_f64(),
        WARMUP.as_secs_f64()
    );
    println!();
    println!("| flood | quotes | p50 | p90 | p99 | p99.9 | max | flood records in window | decoder 0 receive->decoded p50 / p99 / p99.9 (whole run) |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut p99 = Vec::new();
    let mut pulsed = None;
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    let row = |name: &str, summary: &LatencySummary, records: &str, decoded: &str| {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {records} | {decoded} |",
            summary.count,
            us(summary.p50_ns),
            us(summary.p90_ns),
            us(summary.p99_ns),
            us(summary.p999_ns),
            us(summary.max_ns),
        );
    };
    for flood in [
        Flood::None,
        Flood::SameDecoder,
        Flood::OtherDecoder,
        Flood::Pulsed,
    ] {
        let (summary, resting, records, decoded) =
            isolation_run(quote_rate, flood_rate, window, flood)?;
        let decoded = format!(
            "{} / {} / {} ({} values)",
            us(decoded.p50_ns),
            us(decoded.p99_ns),
            us(decoded.p999_ns),
            decoded.count
        );
        let name = match flood {
            Flood::None => "none",
            Flood::SameDecoder => "on the Binance venue's decoder",
            Flood::OtherDecoder => "on the other decoder",
            Flood::Pulsed => "pulsed on the other decoder: quotes while it floods",
        };
        row(name, &summary, &records.to_string(), &decoded);
        if let Some(resting) = resting {
            row(
                "pulsed on the other decoder: quotes while it rests (same run)",
                &resting,
                "",
                "",
            );
            pulsed = Some((summary.p99_ns as f64, resting.p99_ns as f64));
        } else {
            p99.push(summary.p99_ns as f64);
        }
    }
    if let [none, same, other] = p99[..] {
        println!();
        println!(
            "Binance p99: flood on the other decoder {:.2}x no flood (goal: at most 1.10x); on the same decoder {:.2}x",
            other / none,
            same / none
        );
    }
    if let Some((flooding, resting)) = pulsed {
        println!(
            "Binance p99 in the pulsed run: while the other decoder's flood runs {:.2}x while it rests (goal: at most 1.10x)",
            flooding / resting
        );
    }
    Ok(())
}

fn isolation_run(
    quote_rate: f64,
    flood_rate: f64,
    window: Duration,
    flood: Flood,
) -> anyhow::Result<(LatencySummary, Option<LatencySummary>, u64, LatencySummary)> {
    let dir = tempfile::tempdir()?;
    let clock = Clock::calibrate();
    let mut options = SimOptions::new(dir.path().join("sim"));
    options.clock = clock;
    let source = SyntheticSource::new(SyntheticConfig {
        symbols: 1,
        rate_per_sec: quote_rate,
        ..SyntheticConfig::default()
    })?;
    let sim = Sim::start(options, Box::new(source))?;
    let port = sim.addr().port();
    std::fs::write(
        dir.path().join("binance.toml"),
        format!(
            "decoder = 0\nname = \"binance\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:{port}\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n[tls]\nextra_ca_file = {:?}\n",
            sim.ca_pem_path().display().to_string()
        ),
    )?;
    let gateway = match flood {
        Flood::None => None,
        Flood::SameDecoder | Flood::OtherDecoder | Flood::Pulsed => {
            Some(databento::start(DatabentoOptions {
                symbols: SYMBOLS.iter().map(|s| (*s).to_owned()).collect(),
                source: DatabentoSource::Synthetic,
                rate: flood_rate,
                pulse: (flood == Flood::Pulsed).then_some((PULSE_ON, PULSE_OFF)),
                seed: 1,
                ..DatabentoOptions::default()
            })?)
        }
    };
    let mut venues = vec!["\"binance.toml\"".to_owned()];
    if let Some(gateway) = &gateway {
        let decoder = usize::from(flood != Flood::SameDecoder);
        std::fs::write(
            dir.path().join("databento.toml"),
            databento_venue("databento", gateway, decoder),
        )?;
        venues.push("\"databento.toml\"".to_owned());
    }
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        format!(
            "venues = [{}]\n{COMMON}{DECODER}{DECODER}{STRATEGY}",
            venues.join(", ")
        ),
    )?;
    let loaded = config::load(&appliance).map_err(|error| anyhow::anyhow!("{error}"))?;
    let window_at = Arc::new(Mutex::new(None));
    let histogram = || Histogram::new_with_bounds(1, 10_000_000_000, 3);
    let latency = Arc::new(Mutex::new(histogram()?));
    let resting = Arc::new(Mutex::new(histogram()?));
    let pulses = gateway
        .as_ref()
        .filter(|_| flood == Flood::Pulsed)
        .map(databento::DatabentoHandle::started_ns);
    let mut session = Session::start(
        &loaded,
        clock,
        SessionExtras {
            strategy: Some(Box::new(QuoteLatency {
                window: window_at.clone(),
                latency: latency.clone(),
                resting: resting.clone(),
                pulses,
            })),
            ..SessionExtras::default()
        },
    )
    .map_err(|error| anyhow::anyhow!("{error}"))?;
    let mbo = |session: &Session| {
        session
            .feeds
            .get(1)
            .map_or(0, |(_, counters)| counters.message("mbo"))
    };
    let started = Instant::now();
    let from = started + WARMUP;
    let to = from + window;
    if let Ok(mut slot) = window_at.lock() {
        *slot = Some((from, to));
    }
    let mut records_at_from = None;
    while Instant::now() < to + Duration::from_millis(100) {
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        ensure!(session.runtime.all_running(), "a hot thread ended");
        if records_at_from.is_none() && Instant::now() >= from {
            records_at_from = Some(mbo(&session));
        }
        session
            .wait(Duration::from_millis(10), None)
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    let records = mbo(&session) - records_at_from.unwrap_or(0);
    // Decoder 0's own receive-to-decoded over the whole run (warm-up included; with the flood
    // on it, the flood's records too): whether a quote's time goes before its decoding (the
    // network thread, the decoder) or after (the event ring, the strategy). The decoder hands
    // its histogram over when asked, at its next pass.
    session.runtime.receive_to_decoded.collect();
    std::thread::sleep(Duration::from_millis(20));
    session.runtime.receive_to_decoded.collect();
    let decoded = session
        .runtime
        .receive_to_decoded
        .source_totals()
        .next()
        .map(LatencySummary::of)
        .ok_or_else(|| anyhow::anyhow!("no decoder's receive-to-decoded"))?;
    ensure!(
        decoded.count > 0,
        "decoder 0 recorded no receive-to-decoded"
    );
    let binance = &session.runtime.decoders[0];
    ensure!(
        binance.frame_ring.overflows() == 0 && binance.event_ring.overflows() == 0,
        "the Binance venue's decoder refused frames or events"
    );
    if flood != Flood::None {
        ensure!(
            records as f64 >= 0.5 * window.as_secs_f64() * 1e3,
            "the flood delivered only {records} records in the window"
        );
    }
    let summary_of = |histogram: &Arc<Mutex<Histogram<u64>>>| {
        histogram
            .lock()
            .map(|histogram| LatencySummary::of(&histogram))
            .map_err(|_| anyhow::anyhow!("poisoned"))
    };
    let summary = summary_of(&latency)?;
    ensure!(
        summary.count >= 500,
        "only {} Binance quotes measured",
        summary.count
    );
    let resting = if pulses.is_some() {
        let resting = summary_of(&resting)?;
        ensure!(
            resting.count >= 500,
            "only {} Binance quotes measured while the flood rested",
            resting.count
        );
        Some(resting)
    } else {
        None
    };
    let failed = session.shutdown();
    ensure!(failed.is_empty(), "threads panicked: {failed:?}");
    drop(sim);
    if let Some(mut gateway) = gateway {
        gateway.stop();
    }
    Ok((summary, resting, records, decoded))
}

fn throughput(counts: &[usize], records: u64) -> anyhow::Result<()> {
    println!();
    println!(
        "throughput: N mock gateways in benchmark mode, {records} MBO records each as fast as the socket takes them, one venue per gateway, each venue on a decoder of its own"
    );
    println!();
    println!(
        "| decoders | records | seconds | M records/s | M events/s | per decoder M events/s |"
    );
    println!("|--:|--:|--:|--:|--:|---|");
    for &count in counts {
        let (all_records, seconds, per_decoder) =
            throughput_run(count, records).with_context(|| format!("{count} decoders"))?;
        let events: u64 = per_decoder.iter().sum();
        println!(
            "| {count} | {all_records} | {seconds:.2} | {:.2} | {:.2} | {} |",
            all_records as f64 / seconds / 1e6,
            events as f64 / seconds / 1e6,
            per_decoder
                .iter()
                .map(|events| format!("{:.2}", *events as f64 / seconds / 1e6))
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    Ok(())
}

/// Records sent in all, seconds from the first record to the last, and the events each decoder
/// published.
fn throughput_run(count: usize, records: u64) -> anyhow::Result<(u64, f64, Vec<u64>)> {
    let dir = tempfile::tempdir()?;
    let mut gateways = Vec::new();
    let mut venues = Vec::new();
    for index in 0..count {
        let gateway = databento::start(DatabentoOptions {
            symbols: SYMBOLS.iter().map(|s| (*s).to_owned()).collect(),
            source: DatabentoSource::Benchmark { records },
            seed: 1 + index as u64,
            write_timeout: Duration::from_secs(60),
            ..DatabentoOptions::default()
        })?;
        let file = format!("databento-{index}.toml");
        std::fs::write(
            dir.path().join(&file),
            databento_venue(&format!("databento-{index}"), &gateway, index),
        )?;
        venues.push(format!("{file:?}"));
        gateways.push(gateway);
    }
    // Each gateway's own count (its seed's market ends on a whole batch).
    let per_gateway: Vec<u64> = gateways.iter().map(|g| g.benchmark_records()).collect();
    let appliance = dir.path().join("tickwire.toml");
    // Each decoder's frame ring holds its gateway's whole run (DBN records are 56 bytes, framed
    // in chunks): a decoder that falls behind its gateway then slows the count down instead of
    // overflowing, which would close the raw stream (see `net::engine`).
    let ring_bytes = (records * 96).next_power_of_two().clamp(64 << 20, 1 << 30);
    std::fs::write(
        &appliance,
        format!(
            "venues = [{}]\n{}{}{STRATEGY}",
            venues.join(", "),
            COMMON.replace(
                "frame_ring_bytes = 67108864",
                &format!("frame_ring_bytes = {ring_bytes}")
            ),
            DECODER.repeat(count)
        ),
    )?;
    let loaded = config::load(&appliance).map_err(|error| anyhow::anyhow!("{error}"))?;
    let mut session = Session::start(&loaded, Clock::calibrate(), SessionExtras::default())
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut first: Option<Instant> = None;
    let mut last_total = 0;
    let mut last_change = Instant::now();
    let expected: u64 = per_gateway.iter().sum();
    let finished = loop {
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        ensure!(session.runtime.all_running(), "a hot thread ended");
        let total: u64 = session
            .feeds
            .iter()
            .map(|(_, counters)| counters.message("mbo"))
            .sum();
        let now = Instant::now();
        if total > 0 && first.is_none() {
            first = Some(now);
        }
        if total != last_total {
            last_total = total;
            last_change = now;
        }
        if total >= expected {
            break last_change;
        }
        // A refused chunk closes its raw stream (reconnected only after the venue's long
        // delay): say so now rather than wait out the deadline.
        ensure!(
            session.runtime.frame_ring.overflows() == 0,
            "frame rings refused {} chunks with {total} of {expected} records decoded: the \
             decoders fell a whole ring behind their gateways",
            session.runtime.frame_ring.overflows()
        );
        if now > deadline {
            bail!("{total} of {expected} records after 300 s");
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    let events: Vec<u64> = session
        .runtime
        .decoders
        .iter()
        .map(|view| view.load.events.get())
        .collect();
    ensure!(
        session.runtime.frame_ring.overflows() == 0,
        "frame rings refused {} chunks",
        session.runtime.frame_ring.overflows()
    );
    for ((name, counters), &sent) in session.feeds.iter().zip(&per_gateway) {
        ensure!(
            counters.message("mbo") == sent && counters.malformed.get() == 0,
            "{name}: {} records of {sent}, {} malformed",
            counters.message("mbo"),
            counters.malformed.get()
        );
    }
    let failed = session.shutdown();
    ensure!(failed.is_empty(), "threads panicked: {failed:?}");
    for mut gateway in gateways {
        gateway.stop();
    }
    let seconds = (finished - first.unwrap_or(finished)).as_secs_f64();
    ensure!(seconds > 0.0, "no time passed");
    Ok((expected, seconds, events))
}
