//! `tickwire demo`: the simulator and the appliance in one process, on loopback, with a live view.
//!
//! The simulator serves a synthetic market (or a capture) over WebSocket and TLS on an ephemeral
//! loopback port, with a CA it makes on the spot; the appliance is configured through ordinary
//! config files written to a temporary directory (so the demo runs the same config path as
//! `tickwire run`), connects, syncs its books from the simulator's REST snapshots and feeds the
//! strategy thread. Every second the view shows each symbol's best bid and ask, the message rate,
//! and the latency from the simulator's send to the strategy, measured with the simulator's send
//! stamps (see `strategy::stamps`). The serving plane runs too: its status page's URL and the
//! bus's path are printed first and stay at the top of the view. On a terminal the view is one
//! table redrawn in place; otherwise it is plain lines, one per symbol per refresh.
//!
//! Threads are set up for a 2-core machine: the network thread blocks in the kernel and decodes
//! inline, the strategy thread parks until woken, and the simulator's threads sleep between
//! messages, so nothing spins.

use super::signals::StopSignals;
use hdrhistogram::Histogram;
use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config;
use tickwire::control::{Session, SessionExtras};
use tickwire::metrics::LatencySummary;
use tickwire::ring;
use tickwire::strategy::stamps::Stamp;
use tickwire_sim::source::CaptureSource;
use tickwire_sim::source::Source;
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::{Pace, Sim, SimOptions};

/// The demo's knobs, from the command line.
pub struct DemoArgs {
    pub duration: Duration,
    pub symbols: usize,
    pub rate: f64,
    pub source: Option<PathBuf>,
    pub speed: f64,
    /// Where the serving plane listens (loopback).
    pub http: std::net::SocketAddr,
}

/// How often the control thread does its routine work between screen refreshes.
const TICK: Duration = Duration::from_millis(20);
const REFRESH: Duration = Duration::from_secs(1);

pub fn demo(args: DemoArgs) -> ExitCode {
    init_logging();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("demo: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    // The screen is the demo's output; logs say only what went wrong, unless RUST_LOG asks.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Totals the view keeps across refreshes.
struct Totals {
    send_to_strategy: Histogram<u64>,
    wire_to_strategy: Histogram<u64>,
}

fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let signals = StopSignals::block()?;
    let clock = Clock::calibrate();
    let dir = TempDir::new()?;

    let (source, symbols, channels): (Box<dyn Source>, Vec<String>, Vec<String>) =
        match &args.source {
            Some(path) => {
                let (symbols, channels) = scan_streams(path)?;
                let source = CaptureSource::open(path)
                    .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
                (Box::new(source), symbols, channels)
            }
            None => {
                let config = SyntheticConfig {
                    symbols: args.symbols,
                    rate_per_sec: args.rate,
                    ..SyntheticConfig::default()
                };
                let channels = config.channels.clone();
                let source = SyntheticSource::new(config)
                    .map_err(|error| anyhow::anyhow!("synthetic market: {error}"))?;
                let symbols = source.symbols().map(str::to_owned).collect();
                (Box::new(source), symbols, channels)
            }
        };
    let (stamp_tx, stamp_rx) = ring::ring::<Stamp>(1 << 16);
    let mut options = SimOptions::new(dir.path().join("sim"));
    options.pace = Pace::Recorded { speed: args.speed };
    options.stamps = Some(stamp_tx);
    options.clock = clock;
    let sim = Sim::start(options, source)?;
    let port = sim.addr().port();
    let appliance_path = write_configs(
        dir.path(),
        port,
        sim.ca_pem_path(),
        &symbols,
        &channels,
        args.http,
    )?;
    let loaded = config::load(&appliance_path).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    let mut session = Session::start(
        &loaded,
        clock,
        SessionExtras {
            stamps: Some(stamp_rx),
            ..SessionExtras::default()
        },
    )?;

    let terminal = std::io::stdout().is_terminal();
    if terminal {
        // A clear screen for the table that each refresh redraws from the top.
        print!("\x1b[2J\x1b[H");
    }
    let source_name = match &args.source {
        Some(path) => format!("capture {} at {}x", path.display(), args.speed),
        None => format!("synthetic, {} symbols, {} msg/s", symbols.len(), args.rate),
    };
    println!(
        "tickwire demo: simulator on wss://127.0.0.1:{port} ({source_name}); {}; {} s",
        session.runtime.net_backend,
        args.duration.as_secs_f64()
    );
    let status_url = session
        .http_addr()
        .map(|addr| format!("http://{addr}/"))
        .unwrap_or_default();
    println!(
        "status page: {status_url} (JSON: {status_url}v1/quotes, metrics: {status_url}metrics)"
    );
    if let Some(bus) = session.bus() {
        println!(
            "event bus: {} (from another terminal: tickwire tail --bus {})",
            bus.path().display(),
            bus.path().display()
        );
    }
    let mut totals = Totals {
        send_to_strategy: Histogram::new_with_bounds(1, 10_000_000_000, 3)?,
        wire_to_strategy: Histogram::new_with_bounds(1, 10_000_000_000, 3)?,
    };
    let started = Instant::now();
    let mut last_refresh = Instant::now();
    let mut last_events = 0;
    let mut last_messages = 0;
    let stop = loop {
        if session.wait(TICK, signals.fd())? == tickwire::thread::Woken::Extra {
            if let Some(signal) = signals.take()? {
                break format!("signal {signal}");
            }
        }
        session.tick()?;
        if !session.runtime.all_running() {
            break "a hot thread ended".to_owned();
        }
        let done = started.elapsed() >= args.duration;
        if last_refresh.elapsed() >= REFRESH || done {
            let seconds = last_refresh.elapsed().as_secs_f64();
            last_refresh = Instant::now();
            let view = View::take(&mut session, &mut totals);
            let rate = (view.events - last_events) as f64 / seconds;
            let message_rate = (view.messages - last_messages) as f64 / seconds;
            last_events = view.events;
            last_messages = view.messages;
            view.show(
                &session,
                terminal,
                &status_url,
                started.elapsed(),
                message_rate,
                rate,
            );
        }
        if done {
            break "duration reached".to_owned();
        }
    };
    // Final figures, then stop the appliance before the simulator so no close is mistaken for
    // a venue failure.
    let view = View::take(&mut session, &mut totals);
    let failed = session.shutdown();
    let sim_stats = sim.stats();
    drop(sim);
    let send = LatencySummary::of(&totals.send_to_strategy);
    let wire = LatencySummary::of(&totals.wire_to_strategy);
    println!();
    println!(
        "tickwire demo: stopped ({stop}) after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "  simulator sent {} messages; the appliance decoded {} messages into {} events",
        sim_stats.messages_sent, view.messages, view.events
    );
    println!(
        "  latency, simulator send to strategy (quotes): {}",
        format_summary(&send)
    );
    println!(
        "  latency, receive to strategy (every event but snapshot levels; diffs buffered during a book sync included): {}",
        format_summary(&wire)
    );
    println!(
        "  drops {} (frame ring {}, event ring {}), gaps {}, reconnects {}, malformed {}, unstamped quotes {}",
        view.frame_drops + view.event_drops,
        view.frame_drops,
        view.event_drops,
        view.gaps,
        view.reconnects,
        view.malformed,
        view.unstamped
    );
    if !failed.is_empty() {
        anyhow::bail!("hot threads panicked: {}", failed.join(", "));
    }
    if view.messages == 0 {
        anyhow::bail!("no message reached the appliance; see the log above");
    }
    if stop.starts_with("a hot thread") {
        anyhow::bail!("{stop}");
    }
    Ok(())
}

/// One refresh's figures.
struct View {
    messages: u64,
    events: u64,
    interval_send: LatencySummary,
    frame_drops: u64,
    event_drops: u64,
    gaps: u64,
    reconnects: u64,
    malformed: u64,
    unstamped: u64,
}

impl View {
    fn take(session: &mut Session, totals: &mut Totals) -> View {
        let runtime = &mut session.runtime;
        let mut interval_send = LatencySummary::default();
        if let Some(collector) = runtime.send_to_strategy.as_mut() {
            collector.collect();
            let _ = totals.send_to_strategy.add(collector.interval());
            interval_send = collector.take_interval();
        }
        runtime.wire_to_strategy.collect();
        let _ = totals
            .wire_to_strategy
            .add(runtime.wire_to_strategy.interval());
        runtime.wire_to_strategy.take_interval();
        let messages = session
            .feeds
            .iter()
            .map(|(_, counters)| counters.market_messages())
            .sum();
        let malformed = session
            .feeds
            .iter()
            .map(|(_, counters)| counters.malformed.get())
            .sum();
        View {
            messages,
            events: runtime.events_received.get(),
            interval_send,
            frame_drops: runtime.frame_ring.overflows(),
            event_drops: runtime.event_ring.overflows(),
            gaps: runtime.gaps.get(),
            reconnects: session.venues.streams_ended,
            malformed,
            unstamped: runtime
                .unstamped
                .as_ref()
                .map_or(0, |counter| counter.get()),
        }
    }

    fn show(
        &self,
        session: &Session,
        terminal: bool,
        status_url: &str,
        elapsed: Duration,
        message_rate: f64,
        event_rate: f64,
    ) {
        let mut out = String::new();
        if terminal {
            // Home, then each line overwritten and cleared to its end, then the rest of the
            // screen cleared: one table redrawn in place, without the flicker of clearing the
            // whole screen first.
            out.push_str("\x1b[H");
            out.push_str(&format!(
                "tickwire demo  t={:.0}s  {message_rate:.0} msg/s  {event_rate:.0} events/s\n\
                 status page: {status_url}\n",
                elapsed.as_secs_f64()
            ));
            // The bus's path stays in the header (the lines printed before the first redraw
            // are overwritten by it), so that it can be copied while the demo runs.
            if let Some(bus) = session.bus() {
                out.push_str(&format!(
                    "event bus: {} (from another terminal: tickwire tail --bus {})\n",
                    bus.path().display(),
                    bus.path().display()
                ));
            }
            out.push('\n');
            out.push_str(&format!(
                "{:<10} {:>14} {:>12} {:>14} {:>12} {:>10} {:>14}\n",
                "symbol", "bid", "bid qty", "ask", "ask qty", "spread", "mid"
            ));
        }
        for instrument in &session.instruments {
            let Some(entry) = session.runtime.board.read(instrument.id) else {
                continue;
            };
            let quote = entry.quote;
            let spread = quote.ask_px.raw().saturating_sub(quote.bid_px.raw());
            let mid = (quote.ask_px.to_f64() + quote.bid_px.to_f64()) / 2.0;
            let spread = tickwire::fixed::Fixed(spread);
            if terminal {
                out.push_str(&format!(
                    "{:<10} {:>14} {:>12} {:>14} {:>12} {:>10} {:>14.4}\n",
                    instrument.symbol,
                    quote.bid_px.to_string(),
                    quote.bid_sz.to_string(),
                    quote.ask_px.to_string(),
                    quote.ask_sz.to_string(),
                    spread.to_string(),
                    mid
                ));
            } else {
                out.push_str(&format!(
                    "t={:.0}s {} bid {} x {} ask {} x {} spread {} mid {mid:.4}\n",
                    elapsed.as_secs_f64(),
                    instrument.symbol,
                    quote.bid_px,
                    quote.bid_sz,
                    quote.ask_px,
                    quote.ask_sz,
                    spread
                ));
            }
        }
        let latency = format_summary(&self.interval_send);
        let counts = format!(
            "drops {} gaps {} reconnects {} malformed {}",
            self.frame_drops + self.event_drops,
            self.gaps,
            self.reconnects,
            self.malformed
        );
        if terminal {
            out.push_str(&format!(
                "\nsend->strategy (last second): {latency}\n{counts}\nCtrl-C stops\n"
            ));
        } else {
            out.push_str(&format!(
                "t={:.0}s {message_rate:.0} msg/s {event_rate:.0} events/s; send->strategy {latency}; {counts}\n",
                elapsed.as_secs_f64()
            ));
        }
        if terminal {
            out = out.replace('\n', "\x1b[K\n");
            out.push_str("\x1b[J");
        }
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        let _ = lock.write_all(out.as_bytes());
        let _ = lock.flush();
    }
}

fn format_summary(summary: &LatencySummary) -> String {
    if summary.count == 0 {
        return "no samples".to_owned();
    }
    let us = |ns: u64| ns as f64 / 1_000.0;
    format!(
        "p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us ({} samples)",
        us(summary.p50_ns),
        us(summary.p99_ns),
        us(summary.p999_ns),
        us(summary.max_ns),
        summary.count
    )
}

/// The symbols and channels a capture holds, from its `"stream":"<symbol>@<channel>"` fields.
fn scan_streams(path: &Path) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let mut lines = super::decode::open_lines(path)
        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
    let mut symbols = BTreeSet::new();
    let mut channels = BTreeSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if lines.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let (_, message) = super::decode::split_line(&line);
        let Some(start) = find(message, b"\"stream\":\"") else {
            continue;
        };
        let rest = &message[start + 10..];
        let Some(end) = rest.iter().position(|&byte| byte == b'"') else {
            continue;
        };
        let stream = String::from_utf8_lossy(&rest[..end]);
        if let Some((symbol, channel)) = stream.split_once('@') {
            symbols.insert(symbol.to_ascii_uppercase());
            channels.insert(channel.to_owned());
        }
    }
    if symbols.is_empty() {
        anyhow::bail!(
            "{}: no combined-stream messages (\"stream\":\"<symbol>@<channel>\") found",
            path.display()
        );
    }
    Ok((
        symbols.into_iter().collect(),
        channels.into_iter().collect(),
    ))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Writes the venue and appliance files the demo runs with; returns the appliance file.
fn write_configs(
    dir: &Path,
    port: u16,
    ca_file: &Path,
    symbols: &[String],
    channels: &[String],
    http: std::net::SocketAddr,
) -> anyhow::Result<PathBuf> {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|item| format!("{item:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let venue = format!(
        "# Written by `tickwire demo`.\n\
         name = \"demo-sim\"\n\
         kind = \"binance-usdm-futures\"\n\
         url = \"wss://127.0.0.1:{port}\"\n\
         rest_url = \"https://127.0.0.1:{port}\"\n\
         symbols = [{}]\n\
         channels = [{}]\n\
         [tls]\n\
         extra_ca_file = {:?}\n",
        list(symbols),
        list(channels),
        ca_file.display().to_string()
    );
    std::fs::write(dir.join("venue.toml"), venue)?;
    let appliance = "# Written by `tickwire demo`: sized for a 2-core machine, nothing spins.\n\
         venues = [\"venue.toml\"]\n\
         [log]\nlevel = \"warn\"\n\
         [metrics]\nreport_interval_ms = 1000\n\
         [rings]\nframe_ring_bytes = 16777216\nevent_ring_slots = 65536\n\
         [net]\nwait = \"block\"\nblock_timeout_us = 1000\nmax_connections = 4\nmax_message_bytes = 4194304\n\
         [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n\
         [threads.decoder]\nfuse_into = \"net\"\n\
         [threads.strategy]\nwait = \"park\"\nspin_iterations = 100\npark_timeout_us = 1000\n";
    // The demo's own bus, in its private directory, so that `tickwire tail --bus` can read it
    // while the demo runs (and two demos never share one).
    let appliance = format!(
        "{appliance}[bus]\npath = {:?}\ncapacity = 65536\n[http]\nlisten = \"{http}\"\n",
        dir.join("tickwire.bus").display().to_string()
    );
    let path = dir.join("tickwire.toml");
    std::fs::write(&path, appliance)?;
    Ok(path)
}

/// A private directory for the demo's CA and config files, removed at the end.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let path = std::env::temp_dir().join(format!("tickwire-demo-{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir { path })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
