//! Nasdaq ITCH 5.0 over MoldUDP64, wire to strategy (issue 37): the real `tickwire run` in one
//! network namespace reading lines A and B of `tickwire_sim::itch` (the simulator behind
//! `tickwire sim --venue itch`) sending from another, over a veth pair this bench creates
//! (`tests/support/netns.rs`). Root and iproute2; without them it says so and exits.
//!
//! `cargo bench --bench itch_wire` (a few minutes). What it measures:
//! - **Wire to strategy**, per message: the simulator keeps the CLOCK_REALTIME time just before
//!   it hands each packet to its socket (line A; line B follows at once), the appliance's
//!   built-in `arrivals` strategy the CLOCK_REALTIME time when each message's last event reached
//!   it (`[strategy] name = "arrivals"`, written at exit); the two are joined by MoldUDP64
//!   sequence number. One host, one clock. p50 / p99 / p99.9 / max at 100k and 1M messages/s
//!   (`--rates`), `--seconds` each (default 2), 8 messages a packet (`--per-packet`).
//! - **Lossless**: every message sent has an arrival and no packet needed a re-request (the
//!   simulator's re-request server counts them). Then the highest lossless rate: doubling from
//!   the table's highest lossless rate in 1 s runs until a loss, a re-request, or the sender
//!   falling below 90 % of the rate asked (its limit, not the appliance's), or 16 M/s.
//! - **Recovery**: at 100k messages/s with 0.2 % of packets dropped on both lines (the
//!   appliance waits `line_wait_ms` for the other line, then asks the re-request server), the
//!   time from a dropped packet's send to its messages reaching the strategy, beside the other
//!   messages of the same run (which wait behind a gap, as the arbiter delivers in order).
//!
//! Before anything is timed, each run checks its output: the arrivals are exactly the sequence
//! numbers sent, each once (a message whose record is missing is a loss, one recorded twice or
//! never sent fails the run).
//!
//! Threads: the simulator's sender pinned to core 0, the appliance's network thread (with the
//! decoder and the strategy fused into it) busy-polling on core 1: two busy threads. The
//! appliance's other threads are kept on core 0 (`[process] housekeeping_cores`, the tuned
//! layout), the simulator's re-request server too; they sleep.

#[path = "../tests/support/netns.rs"]
mod netns;

use hdrhistogram::Histogram;
use std::net::SocketAddrV4;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickwire_sim::itch::{ItchFaults, ItchSim, ItchSimOptions, ItchSimStats, ItchSource};

const GROUP_A: std::net::Ipv4Addr = std::net::Ipv4Addr::new(239, 192, 57, 1);
const GROUP_B: std::net::Ipv4Addr = std::net::Ipv4Addr::new(239, 192, 57, 2);
const PORT: u16 = 26577;
const REREQUEST_PORT: u16 = 26578;

struct Outcome {
    stats: ItchSimStats,
    /// The rate the sender achieved, messages/s.
    achieved: f64,
    /// Messages with no arrival.
    missing: u64,
    /// Latency of every message that arrived (ns), and of those in packets dropped on both
    /// lines.
    all: Histogram<u64>,
    recovered: Histogram<u64>,
}

/// The appliance, started in the receiver's namespace; returns once its sockets are open.
fn start_appliance(pair: &netns::Pair, dir: &Path, records: u64) -> Result<Child, String> {
    let venue = format!(
        "name = \"itch\"\nkind = \"nasdaq-itch\"\nurl = \"udp://{GROUP_A}:{PORT}\"\n\
         symbols = [\"*\"]\nchannels = [\"itch\"]\n[nasdaq_itch]\n\
         line_b = \"{GROUP_B}:{PORT}\"\ninterface = \"{}\"\n\
         rerequest = \"{}:{REREQUEST_PORT}\"\nmax_orders = 1048576\nmax_levels = 262144\n",
        pair.receiver_veth, pair.sender_address
    );
    std::fs::write(dir.join("venue.toml"), venue).map_err(|e| e.to_string())?;
    let appliance = dir.join("tickwire.toml");
    std::fs::write(
        &appliance,
        format!(
            "venues = [\"venue.toml\"]\n[net]\nbackend = \"io-uring\"\n\
             [process]\nhousekeeping_cores = [0]\n\
             [threads.net]\ncore = 1\nwait = \"spin\"\n\
             [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nfuse_into = \"net\"\n\
             [strategy]\nname = \"arrivals\"\nrecord_file = \"{}\"\nrecord_capacity = {}\n",
            dir.join("arrivals").display(),
            records + 1024
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.receiver,
            env!("CARGO_BIN_EXE_tickwire"),
        ])
        .args(["run", "--config"])
        .arg(&appliance)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("tickwire run: {e}"))?;
    let (log, _reader) = netns::collect_lines(child.stderr.take().expect("piped"));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        // The connection moves on from connecting once both lines are joined.
        if log.lock().unwrap().contains("upgrading") {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "tickwire run ended ({status}): {}",
                log.lock().unwrap()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    Err(format!(
        "the appliance never joined its lines: {}",
        log.lock().unwrap()
    ))
}

fn run(
    pair: &netns::Pair,
    rate: u64,
    seconds: f64,
    per_packet: usize,
    faults: ItchFaults,
) -> Result<Outcome, String> {
    let messages = ((rate as f64 * seconds) as usize).max(per_packet);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut appliance = start_appliance(pair, dir.path(), messages as u64)?;
    let options = ItchSimOptions {
        line_a: SocketAddrV4::new(GROUP_A, PORT),
        line_b: SocketAddrV4::new(GROUP_B, PORT),
        interface: pair.sender_address,
        rerequest: SocketAddrV4::new(pair.sender_address, REREQUEST_PORT),
        session: *b"WIRE000037",
        source: ItchSource::Generate {
            seed: 37,
            stocks: 500,
            live: 20_000,
            messages,
        },
        messages_per_packet: per_packet,
        packet_rate: rate / per_packet as u64,
        faults,
        seed: 11,
        heartbeat_ms: 100,
        linger_ms: 600,
        ttl: 1,
        record_send_times: true,
    };
    let sender = netns::in_namespace(&pair.sender, move || {
        netns::pin(0);
        let sim = ItchSim::start(options).map_err(|e| format!("the simulator: {e}"))?;
        sim.wait_with_send_times()
            .map_err(|e| format!("the simulator: {e}"))
    });
    let sent = sender
        .join()
        .map_err(|_| "the simulator panicked".to_owned())?;
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(appliance.id() as i32, libc::SIGTERM) };
    let status = appliance.wait().map_err(|e| e.to_string())?;
    let (stats, sent) = sent?;
    if !status.success() {
        return Err(format!("tickwire run exited with {status}"));
    }
    let bytes = std::fs::read(dir.path().join("arrivals"))
        .map_err(|e| format!("the arrivals file: {e}"))?;
    // The send time of each message by sequence number (from 1).
    let mut send_ns = vec![0u64; messages + 1];
    let mut dropped = vec![false; messages + 1];
    for packet in &sent {
        for sequence in packet.sequence..packet.sequence + u64::from(packet.count) {
            send_ns[sequence as usize] = packet.realtime_ns;
            dropped[sequence as usize] = packet.dropped_both;
        }
    }
    let mut seen = vec![false; messages + 1];
    let mut all = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let mut recovered = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    for record in bytes.chunks_exact(16) {
        let sequence = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
        let at = u64::from_le_bytes(record[8..].try_into().expect("8 bytes"));
        let index = usize::try_from(sequence).unwrap_or(usize::MAX);
        if index == 0 || index > messages || send_ns[index] == 0 {
            return Err(format!("an arrival for sequence {sequence}, never sent"));
        }
        if seen[index] {
            return Err(format!("sequence {sequence} arrived twice"));
        }
        seen[index] = true;
        let latency = at.saturating_sub(send_ns[index]).max(1);
        all.record(latency).map_err(|e| e.to_string())?;
        if dropped[index] {
            recovered.record(latency).map_err(|e| e.to_string())?;
        }
    }
    let missing = seen[1..].iter().filter(|seen| !**seen).count() as u64;
    let span = match (sent.first(), sent.last()) {
        (Some(first), Some(last)) => last.realtime_ns.saturating_sub(first.realtime_ns),
        _ => 0,
    };
    let achieved = if span > 0 {
        stats.messages as f64 * 1e9 / span as f64
    } else {
        0.0
    };
    Ok(Outcome {
        stats,
        achieved,
        missing,
        all,
        recovered,
    })
}

fn us(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

fn main() {
    let mut rates = vec![100_000u64, 1_000_000];
    let mut seconds = 2.0f64;
    let mut per_packet = 8usize;
    let mut search = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rates" => {
                rates = args
                    .next()
                    .expect("--rates LIST")
                    .split(',')
                    .map(|r| r.parse().expect("a rate"))
                    .collect()
            }
            "--seconds" => seconds = args.next().expect("--seconds S").parse().expect("seconds"),
            "--per-packet" => per_packet = args.next().expect("--per-packet N").parse().expect("N"),
            "--no-search" => search = false,
            _ => {} // cargo bench passes --bench
        }
    }
    if !netns::available() {
        println!("itch_wire: skipped: needs root and iproute2 (network namespaces)");
        return;
    }
    let pair = netns::Pair::create("w", 57).expect("namespaces");
    println!("{}", netns::host_line());
    println!("{per_packet} messages a packet; latency from the sender's send to the strategy");
    println!();
    println!("| rate msg/s | sent msg/s | messages | missing | re-requests | p50 us | p99 us | p99.9 us | max us |");
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut lossless = 0u64;
    for &rate in &rates {
        match run(&pair, rate, seconds, per_packet, ItchFaults::default()) {
            Ok(outcome) => {
                if outcome.missing == 0 && outcome.stats.requests == 0 {
                    lossless = lossless.max((outcome.achieved as u64).min(rate));
                }
                let h = &outcome.all;
                println!(
                    "| {rate} | {:.0} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    outcome.achieved,
                    outcome.stats.messages,
                    outcome.missing,
                    outcome.stats.requests,
                    us(h, 0.5),
                    us(h, 0.99),
                    us(h, 0.999),
                    h.max() as f64 / 1000.0
                );
            }
            Err(error) => println!("| {rate} | failed: {error} |"),
        }
    }
    println!();
    let faults = ItchFaults {
        drop_both: 2_000,
        ..ItchFaults::default()
    };
    match run(&pair, 100_000, seconds.max(2.0), per_packet, faults) {
        Ok(outcome) => {
            println!(
                "recovery at 100k msg/s, {} of {} packets dropped on both lines, {} re-requests, \
                 {} messages missing:",
                outcome.stats.dropped_both,
                outcome.stats.packets,
                outcome.stats.requests,
                outcome.missing
            );
            println!();
            println!("| messages | count | p50 us | p99 us | max us |");
            println!("|---|--:|--:|--:|--:|");
            for (name, h) in [
                ("in packets dropped on both lines", &outcome.recovered),
                ("all", &outcome.all),
            ] {
                println!(
                    "| {name} | {} | {:.1} | {:.1} | {:.1} |",
                    h.len(),
                    us(h, 0.5),
                    us(h, 0.99),
                    h.max() as f64 / 1000.0
                );
            }
        }
        Err(error) => println!("recovery: failed: {error}"),
    }
    if !search {
        return;
    }
    println!();
    let mut best = lossless;
    let mut rate = (best * 2).max(200_000);
    let mut why = "16 M/s reached".to_owned();
    while rate <= 16_000_000 {
        match run(&pair, rate, 1.0, per_packet, ItchFaults::default()) {
            Ok(outcome) => {
                if outcome.missing > 0 || outcome.stats.requests > 0 {
                    why = format!(
                        "at {rate}/s: {} of {} messages missing, {} re-requests",
                        outcome.missing, outcome.stats.messages, outcome.stats.requests
                    );
                    break;
                }
                best = best.max((outcome.achieved as u64).min(rate));
                if outcome.achieved < rate as f64 * 0.9 {
                    why = format!(
                        "the sender reached {:.0}/s of {rate}/s asked",
                        outcome.achieved
                    );
                    break;
                }
            }
            Err(error) => {
                why = format!("at {rate}/s: {error}");
                break;
            }
        }
        rate *= 2;
    }
    println!("highest lossless rate: {best} messages/s ({why})");
}
