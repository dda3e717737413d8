//! DBN throughput: tickwire's Databento path against the official `dbn` and `databento` crates,
//! on the same MBO records, in one run.
//!
//! **File decode** (in memory, one thread). The mock gateway's benchmark batch
//! (`tickwire_sim::databento::benchmark_batch`: a consistent synthetic MBO market of two
//! instruments from empty books) behind a DBN v3 metadata header, timed as:
//!
//! - `tickwire`: the bytes fed to a `RecordStream` in 64 KiB chunks (what a network read
//!   delivers), every record through the `Normalizer` (the L3 book, `BookLevel`/`Quote`/`Trade`
//!   events), the events counted by the callback (no collection grows in the timed loop). A
//!   fresh stream and normalizer per repetition: the books start empty, as the records expect.
//! - `dbn DbnDecoder`: `dbn::decode::DbnDecoder` over the byte slice, `decode_record_ref` until
//!   the end, reading each record's header (`ts_event`, `instrument_id`) into a checksum: the
//!   official crate's decode alone, no book and no events.
//! - `dbn DbnFsm`: the official sans-IO FSM fed in 64 KiB chunks through `space`/`fill`, then
//!   `process_batch`/`next_buffered_record` (the loop the `databento` live client runs), with
//!   the same checksum.
//!
//! Before timing, one pass of each must agree: the same record count (the batch's), the same
//! header checksum for the two `dbn` passes, at least half an event per record from tickwire,
//! no book errors and no short records in the normalizer. Then the three are alternated round by
//! round (`DATABENTO_BENCH_ROUNDS`, default 7) and the median of each is reported, with the median
//! of the per-round ratios.
//!
//! **Live** (over loopback TCP). The mock gateway in benchmark mode
//! (`DatabentoSource::Benchmark`, `DATABENTO_BENCH_LIVE_RECORDS`, default 10,000,000 records)
//! writes its batch as fast as the socket takes it. Then:
//!
//! - `tickwire`: the appliance (`control::Session` from config files written here: one venue
//!   of `kind = "databento"`, `channels = ["mbo"]`, `recovery = "gap"`) for each configuration
//!   in `CONFIGS`; the bench watches the feed's `mbo` message count (MBO records delivered to the
//!   normalizer) every millisecond until all N arrived. Records/s is N over the time from the
//!   first record seen to the last. Without loss means: all N delivered on the first
//!   connection (the gateway accepted one), no `Overrun` or `ConnectionLost` transition, no
//!   frame ring refusal, no event ring overflow, no `Gap` event, no malformed record.
//!   Latency: the runtime's receive (the network thread's read) to strategy (the strategy
//!   stage taking the event) histogram over every event of the run.
//! - `databento LiveClient`: the official client (tokio current-thread runtime on this
//!   thread) against the same gateway, `subscribe` mbo, `start`, `next_record` until the
//!   gateway's end marker (a `SystemMsg` starting with `BENCHMARK_END`), counting MBO records;
//!   records/s from its first record to its last.
//!
//! **Paced** (over loopback TCP, latency at a fixed rate). A fresh mock gateway per run with its
//! synthetic MBO market at 100,000 and then 1,000,000 records a second (its generator wakes every
//! millisecond and stamps each record's `ts_event` with the wall clock as it makes it); after a
//! 0.7 s warm-up, a window of `DATABENTO_BENCH_PACED_SECONDS` (default 3):
//!
//! - `tickwire` (configurations `PACED_CONFIGS`): a `Strategy` on the strategy thread records,
//!   per data event (`BookLevel`, `Quote`, `Trade`) whose record was made inside the window, the
//!   time from `ts_event` to the stage taking the event; beside it the runtime's own
//!   receive-to-strategy histogram over the run. Without loss means: every record the gateway
//!   had sent at the window's end arrives, on its one connection, with no malformed record, no
//!   gateway error, no ring refusal and no gap, and the gateway never skipped records for a
//!   slow reader.
//! - `databento LiveClient`: per MBO record made inside the window, `ts_event` to `next_record`
//!   returning it (the wall clock read there).
//!
//! Both clocks are the wall clock (tickwire's `Clock` is calibrated to `CLOCK_REALTIME`), so
//! the two measure the same span: the gateway's wake-up and write, loopback, and the client.
//!
//! Run: `cargo bench --bench databento` (about 40 s after the build: the live batch is made once
//! per gateway, about 0.6 GB for 10 M records). `DATABENTO_BENCH_PART=file`, `=live` or `=paced`
//! runs one part; `DATABENTO_BENCH_CONFIGS=1,0` picks live configurations by index in `CONFIGS`.

use anyhow::{bail, ensure, Context};
use dbn::decode::dbn::fsm::{DbnFsm, ProcessResult};
use dbn::decode::{DbnDecoder, DecodeRecordRef};
use dbn::encode::DbnMetadataEncoder;
use dbn::{MboMsg, MetadataBuilder, SType, Schema, SystemMsg};
use hdrhistogram::Histogram;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickwire::clock::{system_realtime_ns, Clock};
use tickwire::config;
use tickwire::control::{Session, SessionExtras};
use tickwire::event::{Event, EventKind};
use tickwire::lifecycle::Reason;
use tickwire::metrics::LatencySummary;
use tickwire::strategy::{Market, Strategy};
use tickwire::venue::databento::normalize::Normalizer;
use tickwire::venue::databento::stream::{Item, RecordStream};
use tickwire_sim::databento::{
    self, DatabentoOptions, DatabentoSource, BENCHMARK_END, FIRST_INSTRUMENT_ID, TEST_API_KEY,
};

/// Records in the in-memory file.
const FILE_RECORDS: u64 = 2_000_000;
/// What a network read delivers at most (`net.recv_buffer_bytes`' default).
const CHUNK_BYTES: usize = 64 * 1024;
/// Instruments of the synthetic market (the gateway's default symbols).
const SYMBOLS: [&str; 2] = ["ESM5", "NQM5"];
const SEED: u64 = 1;
/// The tickwire instrument id of the first symbol (any base will do for the normalizer).
const INSTRUMENT_BASE: u32 = 1;
const KEY_VARIABLE: &str = "TICKWIRE_BENCH_DATABENTO_KEY";

fn env_u64(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument is ignored.
    let part = std::env::var("DATABENTO_BENCH_PART").unwrap_or_default();
    print_machine();
    if part.is_empty() || part == "file" {
        file_decode(env_u64("DATABENTO_BENCH_ROUNDS", 7)?)?;
    }
    if part.is_empty() || part == "live" {
        live(env_u64("DATABENTO_BENCH_LIVE_RECORDS", 10_000_000)?)?;
    }
    if part.is_empty() || part == "paced" {
        paced(Duration::from_secs(env_u64(
            "DATABENTO_BENCH_PACED_SECONDS",
            3,
        )?))?;
    }
    Ok(())
}

fn sh(command: &str) -> String {
    std::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|error| format!("unavailable ({error})"))
}

fn print_machine() {
    println!("machine:");
    println!(
        "{}",
        sh("lscpu | grep -E '^(CPU\\(s\\)|Model name|Thread\\(s\\) per core|Hypervisor vendor|L1d cache|L2 cache|L3 cache):'")
    );
    println!("kernel: {}", sh("uname -r"));
    let governor = sh("cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null");
    println!(
        "governor: {}",
        if governor.is_empty() {
            "none (no cpufreq)"
        } else {
            &governor
        }
    );
    println!(
        "clocksource: {}",
        sh("cat /sys/devices/system/clocksource/clocksource0/current_clocksource")
    );
    println!("load average: {}", sh("cut -d' ' -f1-3 /proc/loadavg"));
    println!("commit: {}", sh("git rev-parse --short HEAD 2>/dev/null"));
    println!();
}

// ----------------------------------------------------------------------------------------------
// File decode
// ----------------------------------------------------------------------------------------------

/// The batch behind a DBN v3 metadata header, as a `.dbn` file of the session would hold it.
fn dbn_file(records: u64) -> anyhow::Result<(Vec<u8>, u64)> {
    let (batch, made) = databento::benchmark_batch(SYMBOLS.len(), SEED, records);
    let metadata = MetadataBuilder::new()
        .dataset("GLBX.MDP3".to_owned())
        .schema(Some(Schema::Mbo))
        .start(0)
        .stype_in(Some(SType::RawSymbol))
        .stype_out(SType::InstrumentId)
        .build();
    let mut bytes = Vec::with_capacity(batch.len() + 1024);
    DbnMetadataEncoder::new(&mut bytes).encode(&metadata)?;
    bytes.extend_from_slice(&batch);
    Ok((bytes, made))
}

/// What a pass saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PassResult {
    records: u64,
    events: u64,
    /// Sum of every record's `ts_event` and `instrument_id` (the `dbn` passes).
    checksum: u64,
}

/// tickwire: `RecordStream` in 64 KiB chunks, every record normalized, events counted.
fn tickwire_pass(bytes: &[u8]) -> anyhow::Result<(PassResult, Normalizer)> {
    let mut stream = RecordStream::new();
    let mut normalizer = Normalizer::new(0);
    let mut result = PassResult::default();
    let mut events = 0u64;
    let mut count = |_event| events += 1;
    for chunk in bytes.chunks(CHUNK_BYTES) {
        stream.feed(chunk);
        while let Some(item) = stream.next() {
            match item? {
                Item::Metadata(metadata) => normalizer.on_metadata(&metadata),
                Item::Record(record) => {
                    result.records += 1;
                    let instrument = record
                        .header()
                        .instrument_id
                        .wrapping_sub(FIRST_INSTRUMENT_ID)
                        .wrapping_add(INSTRUMENT_BASE);
                    // A book error is counted by the normalizer and checked after the pass.
                    let _ = normalizer.normalize(record, instrument, 0, &mut count);
                }
            }
        }
    }
    stream.finish()?;
    result.events = events;
    Ok((result, normalizer))
}

/// `dbn`'s `DbnDecoder` over the slice.
fn dbn_decoder_pass(bytes: &[u8]) -> anyhow::Result<PassResult> {
    let mut decoder = DbnDecoder::new(bytes)?;
    let mut result = PassResult::default();
    while let Some(record) = decoder.decode_record_ref()? {
        let header = record.header();
        result.records += 1;
        result.checksum = result
            .checksum
            .wrapping_add(header.ts_event)
            .wrapping_add(u64::from(header.instrument_id));
    }
    Ok(result)
}

/// `dbn`'s `DbnFsm` fed in 64 KiB chunks, records taken in batches as the live client does.
fn dbn_fsm_pass(bytes: &[u8]) -> anyhow::Result<PassResult> {
    let mut fsm = DbnFsm::builder().build()?;
    let mut result = PassResult::default();
    let mut rest = bytes;
    loop {
        while let Some(record) = fsm.next_buffered_record() {
            let header = record.header();
            result.records += 1;
            result.checksum = result
                .checksum
                .wrapping_add(header.ts_event)
                .wrapping_add(u64::from(header.instrument_id));
        }
        match fsm.process_batch() {
            ProcessResult::ReadMore(_) => {
                if rest.is_empty() {
                    break;
                }
                let space = fsm.space();
                let take = space.len().min(CHUNK_BYTES).min(rest.len());
                space[..take].copy_from_slice(&rest[..take]);
                fsm.fill(take);
                rest = &rest[take..];
            }
            ProcessResult::Metadata(_) | ProcessResult::Record(_) => {}
            ProcessResult::Err(error) => return Err(error.into()),
        }
    }
    ensure!(fsm.data().is_empty(), "the DbnFsm pass ended mid-record");
    Ok(result)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn file_decode(rounds: u64) -> anyhow::Result<()> {
    let made_at = Instant::now();
    let (bytes, records) = dbn_file(FILE_RECORDS)?;
    println!(
        "file decode: {records} MBO records ({} instruments), {:.1} MB of DBN v3 in memory (made in {:.1} s), fed in {} KiB chunks; {rounds} rounds, the passes alternated",
        SYMBOLS.len(),
        bytes.len() as f64 / 1e6,
        made_at.elapsed().as_secs_f64(),
        CHUNK_BYTES / 1024
    );

    // Check before timing.
    let (tickwire, normalizer) = tickwire_pass(&bytes)?;
    let counters = *normalizer.counters();
    let decoder = dbn_decoder_pass(&bytes)?;
    let fsm = dbn_fsm_pass(&bytes)?;
    ensure!(
        tickwire.records == records && decoder.records == records && fsm.records == records,
        "record counts differ: batch {records}, tickwire {}, DbnDecoder {}, DbnFsm {}",
        tickwire.records,
        decoder.records,
        fsm.records
    );
    ensure!(
        decoder.checksum == fsm.checksum,
        "the dbn passes read different headers"
    );
    ensure!(
        counters.mbo == records && counters.book_errors == 0 && counters.short == 0,
        "normalizer: {counters:?}"
    );
    ensure!(
        tickwire.events * 2 > records,
        "only {} events for {records} records",
        tickwire.events
    );
    println!(
        "checked: {records} records in each pass, {} events from tickwire ({:.2} per record), no book errors, dbn passes agree",
        tickwire.events,
        tickwire.events as f64 / records as f64
    );

    type Pass = fn(&[u8]) -> anyhow::Result<PassResult>;
    let passes: [(&str, Pass); 3] = [
        ("tickwire RecordStream + Normalizer (events)", |bytes| {
            tickwire_pass(bytes).map(|(result, _)| result)
        }),
        (
            "dbn DbnDecoder::decode_record_ref (decode only)",
            dbn_decoder_pass,
        ),
        ("dbn DbnFsm process_batch (decode only)", dbn_fsm_pass),
    ];
    let mut ns_per_record = vec![Vec::new(); passes.len()];
    let mut ratios = vec![Vec::new(); passes.len()];
    for _ in 0..rounds {
        let mut round = Vec::new();
        for (index, (_, pass)) in passes.iter().enumerate() {
            let started = Instant::now();
            let result = black_box(pass(black_box(&bytes))?);
            let elapsed = started.elapsed();
            ensure!(result.records == records, "a timed pass lost records");
            let ns = elapsed.as_nanos() as f64 / records as f64;
            ns_per_record[index].push(ns);
            round.push(ns);
        }
        for (index, ns) in round.iter().enumerate() {
            // tickwire's time over the peer's: how many times slower tickwire is.
            ratios[index].push(round[0] / ns);
        }
    }
    println!();
    println!("| pass | ns/record (median) | min..max | M records/s | tickwire time / this (per-round median) |");
    println!("|---|--:|--:|--:|--:|");
    for (index, (name, _)) in passes.iter().enumerate() {
        let samples = &mut ns_per_record[index];
        let (min, max) = samples
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let ns = median(samples);
        println!(
            "| {name} | {ns:.1} | {min:.1}..{max:.1} | {:.1} | {:.2}x |",
            1e3 / ns,
            median(&mut ratios[index])
        );
    }
    println!();
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// Live
// ----------------------------------------------------------------------------------------------

/// One appliance configuration to measure.
struct LiveConfig {
    name: &'static str,
    /// The appliance file's `[net]` and `[threads.*]` tables.
    toml: &'static str,
}

const CONFIGS: &[LiveConfig] = &[
    LiveConfig {
        name: "net+decoder fused (epoll, block), strategy parked on its own thread",
        toml:
            "[net]\nbackend = \"epoll\"\nwait = \"block\"\nblock_timeout_us = 1000\n\
               [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nwait = \"park\"\nspin_iterations = 1000\npark_timeout_us = 100\n",
    },
    LiveConfig {
        name: "net+decoder fused (epoll, busy-poll), strategy parked on its own thread",
        toml:
            "[net]\nbackend = \"epoll\"\nwait = \"busy-poll\"\n\
               [threads.net]\nwait = \"spin\"\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nwait = \"park\"\nspin_iterations = 1000\npark_timeout_us = 100\n",
    },
    LiveConfig {
        name: "net+decoder fused (epoll, busy-poll, 256 KiB reads), strategy parked on its own thread",
        toml: "[net]\nbackend = \"epoll\"\nwait = \"busy-poll\"\nrecv_buffer_bytes = 262144\n\
               [threads.net]\nwait = \"spin\"\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nwait = \"park\"\nspin_iterations = 1000\npark_timeout_us = 100\n",
    },
    LiveConfig {
        name: "net+decoder fused (io_uring, busy-poll, 256 KiB reads), strategy parked on its own thread",
        toml: "[net]\nbackend = \"io-uring\"\nwait = \"busy-poll\"\nrecv_buffer_bytes = 262144\n\
               [threads.net]\nwait = \"spin\"\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nwait = \"park\"\nspin_iterations = 1000\npark_timeout_us = 100\n",
    },
    LiveConfig {
        name: "net+decoder+strategy on one thread (epoll, block)",
        toml: "[net]\nbackend = \"epoll\"\nwait = \"block\"\nblock_timeout_us = 1000\n\
               [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nfuse_into = \"net\"\n",
    },
    LiveConfig {
        name: "net+decoder+strategy on one thread (epoll, busy-poll)",
        toml: "[net]\nbackend = \"epoll\"\nwait = \"busy-poll\"\n\
               [threads.net]\nwait = \"spin\"\n\
               [threads.decoder]\nfuse_into = \"net\"\n\
               [threads.strategy]\nfuse_into = \"net\"\n",
    },
];

/// Sizes every configuration shares.
const COMMON_TOML: &str = "[log]\nlevel = \"warn\"\n\
    [rings]\nframe_ring_bytes = 67108864\nevent_ring_slots = 262144\n";

struct LiveResult {
    records: u64,
    seconds: f64,
    latency: LatencySummary,
    events: u64,
}

fn live(records: u64) -> anyhow::Result<()> {
    let configs: Vec<&LiveConfig> = match std::env::var("DATABENTO_BENCH_CONFIGS") {
        Ok(list) => list
            .split(',')
            .filter_map(|index| index.trim().parse::<usize>().ok())
            .filter_map(|index| CONFIGS.get(index))
            .collect(),
        Err(_) => CONFIGS.iter().collect(),
    };
    let made_at = Instant::now();
    let mut sim = databento::start(DatabentoOptions {
        symbols: SYMBOLS.iter().map(|s| (*s).to_owned()).collect(),
        source: DatabentoSource::Benchmark { records },
        seed: SEED,
        // A slow reader is measured, not cut off.
        write_timeout: Duration::from_secs(60),
        ..DatabentoOptions::default()
    })?;
    let records = sim.benchmark_records();
    println!(
        "live: the mock gateway on {} in benchmark mode, {records} MBO records per session (made in {:.1} s), written in 256 KiB slices as fast as the socket takes them",
        sim.addr(),
        made_at.elapsed().as_secs_f64()
    );
    println!();
    println!("| client | config | records | M records/s | events | receive->strategy p50 | p99 | p99.9 | max |");
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|");
    let mut best: Option<f64> = None;
    let mut peer_rates = Vec::new();
    for config in configs {
        let result = tickwire_live(&sim, records, config)
            .with_context(|| format!("tickwire live, {}", config.name))?;
        let rate = result.records as f64 / result.seconds;
        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
        let us = |ns: u64| ns as f64 / 1e3;
        println!(
            "| tickwire | {} | {} | {:.2} | {} | {:.1} us | {:.1} us | {:.1} us | {:.1} us |",
            config.name,
            result.records,
            rate / 1e6,
            result.events,
            us(result.latency.p50_ns),
            us(result.latency.p99_ns),
            us(result.latency.p999_ns),
            us(result.latency.max_ns),
        );
        // The peer after each tickwire run: both under the same conditions.
        let (peer_records, peer_seconds) = databento_live(&sim, records)?;
        let peer_rate = peer_records as f64 / peer_seconds;
        peer_rates.push(peer_rate);
        println!(
            "| databento LiveClient 0.64 (next_record) | tokio current-thread | {peer_records} | {:.2} | - | - | - | - | - |",
            peer_rate / 1e6
        );
    }
    sim.stop();
    if let Some(best) = best {
        let peer = median(&mut peer_rates);
        println!();
        println!(
            "best tickwire {:.2} M records/s; databento LiveClient median {:.2} M records/s; ratio {:.2}x (goals: 10 M records/s without loss, 3x the client)",
            best / 1e6,
            peer / 1e6,
            best / peer
        );
    }
    Ok(())
}

/// The appliance `live` describes, with the venue of `venue_toml`, loaded from files written
/// to a scratch directory (the API key in the environment, as a user's would be).
fn appliance_config(
    sim: &databento::DatabentoHandle,
    live: &LiveConfig,
) -> anyhow::Result<config::LoadedConfig> {
    std::env::set_var(KEY_VARIABLE, TEST_API_KEY);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("databento.toml"), venue_toml(sim))?;
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        format!("venues = [\"databento.toml\"]\n{COMMON_TOML}{}", live.toml),
    )?;
    config::load(&appliance).map_err(|error| anyhow::anyhow!("{error}"))
}

/// The venue file: the gateway's mbo for both symbols, `recovery = "gap"`, and a reconnect
/// delay of ten minutes so that a lost stream cannot hide behind a second session.
fn venue_toml(sim: &databento::DatabentoHandle) -> String {
    format!(
        "name = \"databento-bench\"\nkind = \"databento\"\n\
         url = \"tcp://127.0.0.1:{}\"\n\
         symbols = [{}]\nchannels = [\"mbo\"]\n\
         [databento]\ndataset = \"GLBX.MDP3\"\nrecovery = \"gap\"\n\
         [credentials]\napi_key_env = \"{KEY_VARIABLE}\"\n\
         [reconnect]\ninitial_delay_ms = 600000\nmax_delay_ms = 600000\n",
        sim.addr().port(),
        SYMBOLS
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

fn tickwire_live(
    sim: &databento::DatabentoHandle,
    records: u64,
    live: &LiveConfig,
) -> anyhow::Result<LiveResult> {
    let loaded = appliance_config(sim, live)?;
    let connections_before = sim.stats().connections_accepted;
    let mut session = Session::start(&loaded, Clock::calibrate(), SessionExtras::default())
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut first: Option<Instant> = None;
    let mut last_seen = 0;
    let mut last_change = Instant::now();
    let finished;
    loop {
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        ensure!(session.runtime.all_running(), "a hot thread ended");
        let delivered = session.feeds[0].1.message("mbo");
        let now = Instant::now();
        if delivered > 0 && first.is_none() {
            first = Some(now);
        }
        if delivered != last_seen {
            last_seen = delivered;
            last_change = now;
        }
        if delivered >= records {
            finished = last_change;
            break;
        }
        if now > deadline {
            bail!(
                "{delivered} of {records} records after 120 s; transitions {:?}",
                session
                    .venues
                    .counters(0)
                    .transitions
                    .nonzero()
                    .collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    // Checks, on what was counted when the last record arrived.
    let transitions = session.venues.counters(0).transitions;
    let delivered = session.feeds[0].1.message("mbo");
    ensure!(
        delivered == records,
        "{delivered} records delivered, {records} sent"
    );
    ensure!(
        sim.stats().connections_accepted - connections_before == 1,
        "the appliance connected more than once"
    );
    // A stream lost before its end could not have delivered all N on one connection (the
    // reconnect delay is ten minutes); the gateway's own close after the end may be counted.
    ensure!(
        transitions.get(Reason::Overrun) == 0,
        "lost the stream: {:?}",
        transitions.nonzero().collect::<Vec<_>>()
    );
    ensure!(
        session.runtime.frame_ring.overflows() == 0,
        "frame ring refused {} chunks",
        session.runtime.frame_ring.overflows()
    );
    let counters = &session.feeds[0].1;
    ensure!(
        counters.malformed.get() == 0
            && counters.book_refused.get() == 0
            && counters.duplicates.get() == 0,
        "malformed {} refused by the book {} duplicates {}",
        counters.malformed.get(),
        counters.book_refused.get(),
        counters.duplicates.get()
    );
    // Let the strategy take what is left, the gateway's close after its end marker included
    // (its status and gaps), then check the event side.
    let settle = Instant::now() + Duration::from_secs(10);
    let mut events = session.runtime.events_received.get();
    // The tick that sees the close hands the decoder its gaps: they arrive after that tick.
    let mut closed_before = false;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        let now = session.runtime.events_received.get();
        if (now == events && closed_before) || Instant::now() > settle {
            break;
        }
        let transitions = session.venues.counters(0).transitions;
        closed_before =
            transitions.get(Reason::ConnectionLost) + transitions.get(Reason::ClosedByVenue) > 0;
        events = now;
    }
    ensure!(
        session.runtime.event_ring.overflows() == 0,
        "event ring overflowed {} times",
        session.runtime.event_ring.overflows()
    );
    // The gateway closes the session after its end marker, and `recovery = "gap"` gives each
    // instrument a `Gap` for that close. Every other source of a gap is excluded above or here:
    // a full event ring (its overflow count), a broken stream (`malformed`), a gateway error
    // (its `error` message count).
    let closes = session
        .venues
        .counters(0)
        .transitions
        .get(Reason::ConnectionLost)
        + session
            .venues
            .counters(0)
            .transitions
            .get(Reason::ClosedByVenue);
    let gaps = session.runtime.gaps.get();
    ensure!(
        session.feeds[0].1.message("error") == 0,
        "the gateway sent an error"
    );
    ensure!(
        gaps <= closes * SYMBOLS.len() as u64,
        "{gaps} gap events for {closes} closes of the session"
    );
    ensure!(
        events * 2 > records,
        "only {events} events for {records} records"
    );
    // Every latency value recorded so far (the collector asks, the strategy hands over).
    let collector = &mut session.runtime.wire_to_strategy;
    for _ in 0..50 {
        collector.collect();
        if collector.total().len() >= events {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let latency = LatencySummary::of(collector.total());
    let failed = session.shutdown();
    ensure!(failed.is_empty(), "threads panicked: {failed:?}");
    let seconds = (finished - first.unwrap_or(finished)).as_secs_f64();
    Ok(LiveResult {
        records,
        seconds,
        latency,
        events,
    })
}

/// The official client, connected to the gateway at `addr`, subscribed to the symbols' mbo and
/// started.
async fn client_session(addr: std::net::SocketAddr) -> anyhow::Result<::databento::LiveClient> {
    let mut client = ::databento::LiveClient::builder()
        .addr(addr)
        .await?
        .key(TEST_API_KEY)?
        .dataset("GLBX.MDP3")
        .build()
        .await?;
    client
        .subscribe(
            ::databento::live::Subscription::builder()
                .symbols(SYMBOLS.to_vec())
                .schema(Schema::Mbo)
                .build(),
        )
        .await?;
    client.start().await?;
    Ok(client)
}

/// The official client reads a whole session; returns (MBO records, seconds first to last).
fn databento_live(sim: &databento::DatabentoHandle, records: u64) -> anyhow::Result<(u64, f64)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let addr = sim.addr();
    runtime.block_on(async move {
        let mut client = client_session(addr).await?;
        let mut count = 0u64;
        let mut checksum = 0u64;
        let mut first = None;
        let mut last = Instant::now();
        let mut ended = false;
        while let Some(record) = client.next_record().await? {
            if let Some(mbo) = record.get::<MboMsg>() {
                if first.is_none() {
                    first = Some(Instant::now());
                }
                count += 1;
                checksum = checksum.wrapping_add(mbo.order_id);
                if count == records {
                    last = Instant::now();
                }
            } else if let Some(system) = record.get::<SystemMsg>() {
                if system
                    .msg()
                    .is_ok_and(|text| text.starts_with(BENCHMARK_END))
                {
                    ended = true;
                    break;
                }
            }
        }
        black_box(checksum);
        ensure!(ended, "the session ended without the end marker");
        ensure!(count == records, "{count} of {records} records");
        let seconds = (last - first.unwrap_or(last)).as_secs_f64();
        anyhow::Ok((count, seconds))
    })
}

// ----------------------------------------------------------------------------------------------
// Paced
// ----------------------------------------------------------------------------------------------

/// Rates of the paced part, records a second.
const PACED_RATES: [f64; 2] = [100_000.0, 1_000_000.0];
/// The paced configurations: indexes into `CONFIGS` (strategy on its own thread, block and
/// busy-poll; all on one thread, block).
const PACED_CONFIGS: [usize; 3] = [0, 1, 4];
/// Before the window: the session starts, the snapshot passes, the caches warm.
const PACED_WARMUP: Duration = Duration::from_millis(700);

fn histogram() -> anyhow::Result<Histogram<u64>> {
    // 1 ns to 10 s, three significant digits (as the runtime's own histograms).
    Ok(Histogram::new_with_bounds(1, 10_000_000_000, 3)?)
}

/// The strategy of the paced runs: per data event whose record was made inside the window,
/// the time from the gateway making it (`ts_event`) to the strategy taking it.
struct MadeToStrategy {
    window: std::ops::Range<u64>,
    latency: Arc<Mutex<Histogram<u64>>>,
}

impl Strategy for MadeToStrategy {
    fn on_events(&mut self, events: &[Event], _market: &Market, now_ns: u64) {
        let mut latency = self
            .latency
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for event in events {
            let header = &event.header;
            let data = matches!(
                header.kind,
                EventKind::BookLevel | EventKind::Quote | EventKind::Trade
            );
            if data && self.window.contains(&header.exchange_ts_ns) {
                latency.saturating_record(now_ns.saturating_sub(header.exchange_ts_ns));
            }
        }
    }
}

/// One paced run's figures.
struct PacedResult {
    /// Records (tickwire: events) made inside the window that reached the consumer.
    measured: u64,
    made_to_consumer: LatencySummary,
    /// tickwire only: the runtime's receive-to-strategy histogram over the whole run.
    receive_to_strategy: Option<LatencySummary>,
}

fn paced(window: Duration) -> anyhow::Result<()> {
    println!(
        "paced: the mock gateway's synthetic MBO market at a fixed rate (its generator wakes every millisecond and stamps ts_event), {:.1} s warm-up then a {:.1} s window; latency from the gateway making a record (ts_event) to the consumer taking it",
        PACED_WARMUP.as_secs_f64(),
        window.as_secs_f64()
    );
    println!();
    println!("| client | config | rate | measured | made->consumer p50 | p99 | p99.9 | max | receive->strategy p50 | p99 |");
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    for rate in PACED_RATES {
        let runs = PACED_CONFIGS
            .iter()
            .map(|&index| Some(&CONFIGS[index]))
            .chain([None]);
        for config in runs {
            // A fresh gateway per run: its counters are the run's, and nothing is left over.
            let sim = databento::start(DatabentoOptions {
                symbols: SYMBOLS.iter().map(|s| (*s).to_owned()).collect(),
                source: DatabentoSource::Synthetic,
                rate,
                seed: SEED,
                ..DatabentoOptions::default()
            })?;
            let (client, name, result) = match config {
                Some(config) => (
                    "tickwire",
                    config.name,
                    tickwire_paced(&sim, config, window)
                        .with_context(|| format!("tickwire paced, {}", config.name))?,
                ),
                None => (
                    "databento LiveClient 0.64 (next_record)",
                    "tokio current-thread",
                    databento_paced(&sim, window)?,
                ),
            };
            ensure!(
                sim.stats().slow_reader_skips == 0,
                "{client} fell behind the gateway's history"
            );
            let (receive_p50, receive_p99) = result
                .receive_to_strategy
                .map_or(("-".to_owned(), "-".to_owned()), |summary| {
                    (us(summary.p50_ns), us(summary.p99_ns))
                });
            let latency = result.made_to_consumer;
            println!(
                "| {client} | {name} | {:.0} k/s | {} | {} | {} | {} | {} | {receive_p50} | {receive_p99} |",
                rate / 1e3,
                result.measured,
                us(latency.p50_ns),
                us(latency.p99_ns),
                us(latency.p999_ns),
                us(latency.max_ns),
            );
        }
    }
    Ok(())
}

fn tickwire_paced(
    sim: &databento::DatabentoHandle,
    live: &LiveConfig,
    window: Duration,
) -> anyhow::Result<PacedResult> {
    let loaded = appliance_config(sim, live)?;
    let start = system_realtime_ns() + PACED_WARMUP.as_nanos() as u64;
    let latency = Arc::new(Mutex::new(histogram()?));
    let strategy = MadeToStrategy {
        window: start..start + window.as_nanos() as u64,
        latency: Arc::clone(&latency),
    };
    let mut session = Session::start(
        &loaded,
        Clock::calibrate(),
        SessionExtras {
            strategy: Some(Box::new(strategy)),
            ..SessionExtras::default()
        },
    )
    .map_err(|error| anyhow::anyhow!("{error}"))?;
    let end = Instant::now() + PACED_WARMUP + window;
    while Instant::now() < end {
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        ensure!(session.runtime.all_running(), "a hot thread ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Without loss: every record the gateway had sent by now arrives, on the one connection.
    let sent = sim.stats().records_sent;
    let settle = Instant::now() + Duration::from_secs(10);
    loop {
        session.tick().map_err(|error| anyhow::anyhow!("{error}"))?;
        let delivered = session.feeds[0].1.message("mbo");
        if delivered >= sent {
            break;
        }
        ensure!(
            Instant::now() < settle,
            "{delivered} of the {sent} records sent arrived"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    ensure!(
        sim.stats().connections_accepted == 1,
        "the appliance connected more than once"
    );
    let counters = &session.feeds[0].1;
    ensure!(
        counters.malformed.get() == 0
            && counters.book_refused.get() == 0
            && counters.duplicates.get() == 0
            && counters.message("error") == 0,
        "malformed {} refused by the book {} duplicates {} gateway errors {}",
        counters.malformed.get(),
        counters.book_refused.get(),
        counters.duplicates.get(),
        counters.message("error")
    );
    ensure!(
        session.runtime.frame_ring.overflows() == 0 && session.runtime.event_ring.overflows() == 0,
        "a ring refused data"
    );
    ensure!(session.runtime.gaps.get() == 0, "the strategy got a gap");
    let collector = &mut session.runtime.wire_to_strategy;
    collector.collect();
    let receive_to_strategy = LatencySummary::of(collector.total());
    let failed = session.shutdown();
    ensure!(failed.is_empty(), "threads panicked: {failed:?}");
    let made_to_consumer = LatencySummary::of(&latency.lock().unwrap_or_else(|p| p.into_inner()));
    ensure!(
        made_to_consumer.count > 0,
        "no event made inside the window reached the strategy"
    );
    Ok(PacedResult {
        measured: made_to_consumer.count,
        made_to_consumer,
        receive_to_strategy: Some(receive_to_strategy),
    })
}

/// The official client at a paced gateway: per MBO record made inside the window, the time
/// from `ts_event` to `next_record` returning it.
fn databento_paced(
    sim: &databento::DatabentoHandle,
    window: Duration,
) -> anyhow::Result<PacedResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let addr = sim.addr();
    let mut latency = histogram()?;
    let start = system_realtime_ns() + PACED_WARMUP.as_nanos() as u64;
    let range = start..start + window.as_nanos() as u64;
    let end = Instant::now() + PACED_WARMUP + window;
    let records = runtime.block_on(async {
        let mut client = client_session(addr).await?;
        let mut records = 0u64;
        while Instant::now() < end {
            let next = tokio::time::timeout(Duration::from_secs(5), client.next_record()).await;
            let Ok(next) = next else {
                bail!("no record for 5 s");
            };
            let Some(record) = next? else {
                bail!("the gateway ended the session");
            };
            if let Some(mbo) = record.get::<MboMsg>() {
                let now = system_realtime_ns();
                records += 1;
                if range.contains(&mbo.hd.ts_event) {
                    latency.saturating_record(now.saturating_sub(mbo.hd.ts_event));
                }
            }
        }
        anyhow::Ok(records)
    })?;
    let made_to_consumer = LatencySummary::of(&latency);
    ensure!(
        records > 0 && made_to_consumer.count > 0,
        "no record made inside the window arrived"
    );
    Ok(PacedResult {
        measured: made_to_consumer.count,
        made_to_consumer,
        receive_to_strategy: None,
    })
}
