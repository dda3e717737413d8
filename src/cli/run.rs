//! `tickwire run`: the control thread of a running appliance.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config::{self, LoadedConfig, LogFormat};
use tickwire::pipeline::Runtime;
use tickwire::systemd::{HeartbeatCheck, Notifier};
use tickwire::thread;

use super::signals::StopSignals;
use tickwire::control::{Session, SessionExtras};

/// How often the control thread does its routine work (metrics, reports, staleness) when
/// nothing wakes it sooner.
const CONTROL_TICK: Duration = Duration::from_millis(20);

pub fn run(config_path: &Path, log_level: Option<&str>, print_events: bool) -> ExitCode {
    let loaded = match config::load(config_path) {
        Ok(loaded) => loaded,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    init_logging(&loaded, log_level);
    match serve(&loaded, print_events) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(loaded: &LoadedConfig, level_override: Option<&str>) {
    let level = level_override.unwrap_or(loaded.appliance.log.level.as_str());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second initialisation (tests calling in) is harmless: the first subscriber stays.
    let _ = match loaded.appliance.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

fn serve(loaded: &LoadedConfig, print_events: bool) -> anyhow::Result<()> {
    // Block the stop signals before any thread starts, so every thread inherits the mask and the
    // signals are taken here, synchronously, by `sigtimedwait`.
    let signals = StopSignals::block()?;
    let appliance = &loaded.appliance;
    // Before any thread starts, so that every one but the pinned hot threads inherits them.
    if !appliance.process.housekeeping_cores.is_empty() {
        thread::pin_housekeeping(&appliance.process.housekeeping_cores)?;
        tracing::info!(
            cores = ?appliance.process.housekeeping_cores,
            "the control thread and the threads it starts run on the housekeeping cores"
        );
    }
    if appliance.process.mlockall {
        let locked = thread::lock_memory(appliance.process.on_privilege_error)?;
        tracing::info!(locked, "mlockall");
    }
    let clock = Clock::calibrate();
    tracing::info!(source = ?clock.source(), tsc_hz = ?clock.tsc_hz(), "clock calibrated");
    let notifier = match Notifier::from_env() {
        Ok(notifier) => notifier,
        Err(error) => {
            tracing::warn!("{error}; running without systemd notifications");
            Notifier::disabled()
        }
    };
    let mut session = Session::start(
        loaded,
        clock,
        SessionExtras {
            print_events,
            ..SessionExtras::default()
        },
    )?;
    let bridge = start_bridge(loaded)?;
    let report_interval = Duration::from_millis(appliance.metrics.report_interval_ms);
    // The control thread's routine work (stream status, snapshot requests and replies, printed
    // events) cannot wait for the next report, so it wakes every CONTROL_TICK; the hot threads'
    // heartbeats are judged at half of WatchdogSec, as systemd wants a ping well within it.
    let tick = CONTROL_TICK;
    let watchdog_every = notifier.watchdog_interval().map(|watchdog| watchdog / 2);
    let mut last_watchdog = Instant::now();
    let threads = session.runtime.heartbeats.len();
    let mut ready_sent = false;
    if loaded.venues.is_empty() {
        let status = format!("running: {threads} hot threads, no venues configured");
        log_notify_error(notifier.ready(&status));
        ready_sent = true;
    } else {
        log_notify_error(notifier.status(&session.venues.status_line(threads)));
    }
    tracing::info!(config = %loaded.path.display(), "running; SIGINT or SIGTERM stops");
    let beats = |runtime: &Runtime| -> Vec<u64> {
        runtime
            .heartbeats
            .iter()
            .map(|(_, beats)| beats.get())
            .collect()
    };
    let mut last_beats = beats(&session.runtime);
    let mut watchdog = HeartbeatCheck::new(last_beats.clone());
    let mut watchdog_withheld = false;
    let mut last_report = Instant::now();
    let stop_reason = loop {
        // Sleeps until a stage or worker hands the control thread work, a connection's timer
        // falls due, a stop signal comes, or the tick passes (issue 24: each step of a
        // reconnect used to wait for a tick).
        if session.wait(tick, signals.fd())? == tickwire::thread::Woken::Extra {
            if let Some(signal) = signals.take()? {
                break format!("signal {signal}");
            }
        }
        if !session.runtime.all_running() {
            break "a hot thread ended".to_owned();
        }
        if session.tick()? {
            // READY=1 once every configured venue is live (sd_notify ignores a second one).
            if !ready_sent && session.venues.all_live() {
                log_notify_error(notifier.ready(&session.venues.status_line(threads)));
                ready_sent = true;
            } else {
                log_notify_error(notifier.status(&session.venues.status_line(threads)));
            }
        }
        if watchdog_every.is_some_and(|every| last_watchdog.elapsed() >= every) {
            last_watchdog = Instant::now();
            match watchdog.advance(beats(&session.runtime)) {
                Ok(()) => {
                    log_notify_error(notifier.watchdog_ping());
                    watchdog_withheld = false;
                }
                Err(stuck) if !watchdog_withheld => {
                    let names: Vec<&str> = stuck
                        .iter()
                        .map(|&index| session.runtime.heartbeats[index].0.as_str())
                        .collect();
                    tracing::error!(
                        threads = %names.join(", "),
                        "hot threads made no progress; withholding the systemd watchdog ping"
                    );
                    watchdog_withheld = true;
                }
                Err(_) => {}
            }
        }
        if last_report.elapsed() < report_interval {
            continue;
        }
        last_report = Instant::now();
        let runtime = &mut session.runtime;
        runtime.wire_to_strategy.collect();
        let latency = runtime.wire_to_strategy.take_interval();
        runtime.receive_to_decoded.collect();
        let decode_latency = runtime.receive_to_decoded.take_interval();
        runtime.decoded_to_strategy.collect();
        let ring_latency = runtime.decoded_to_strategy.take_interval();
        let (rss_kb, _) = tickwire::control::memory_kb();
        let now_beats = beats(runtime);
        let loops: Vec<String> = runtime
            .heartbeats
            .iter()
            .zip(now_beats.iter().zip(&last_beats))
            .map(|((name, _), (now, before))| format!("{name}={}", now - before))
            .collect();
        last_beats = now_beats;
        tracing::info!(
            poll_loops = %loops.join(" "),
            events = runtime.events_received.get(),
            frames_undecoded = runtime.frames_undecoded.get(),
            frame_ring_overflows = runtime.frame_ring.overflows(),
            event_ring_overflows = runtime.event_ring.overflows(),
            gaps = runtime.gaps.get(),
            receive_to_decoded = %decode_latency,
            decoded_to_strategy = %ring_latency,
            wire_to_strategy = %latency,
            rss_kb,
            "report"
        );
        venue_reports(&session);
    };
    tracing::info!(reason = %stop_reason, "stopping");
    if stop_reason.starts_with("signal") {
        signals.exit_on_next();
    }
    log_notify_error(notifier.stopping(&format!("stopping: {stop_reason}")));
    let print_dropped = session.print_dropped();
    if print_dropped > 0 {
        tracing::warn!(
            lines = print_dropped,
            "printed events lost: stdout did not keep up"
        );
    }
    if let Some(bridge) = bridge {
        bridge.stop();
    }
    let stopping = Instant::now();
    // What the last report interval saw, then the clean stop: close frames, rings drained.
    venue_reports(&session);
    let failed = session.shutdown();
    tracing::info!(
        took_ms = stopping.elapsed().as_millis() as u64,
        "stopped: connections closed, rings drained"
    );
    if !failed.is_empty() {
        anyhow::bail!("hot threads panicked: {}", failed.join(", "));
    }
    if stop_reason.starts_with("a hot thread") {
        anyhow::bail!("{stop_reason}");
    }
    Ok(())
}

/// One line per venue: what its feed decoded, and its connections' lifecycle.
fn venue_reports(session: &tickwire::control::Session) {
    for (index, (venue, counters)) in session.feeds.iter().enumerate() {
        let lifecycle = session.venues.counters(index);
        let reasons: Vec<String> = lifecycle
            .transitions
            .nonzero()
            .map(|(reason, count)| format!("{}:{count}", reason.name()))
            .collect();
        let states: Vec<&str> = session
            .venues
            .states(index)
            .iter()
            .map(|state| state.name())
            .collect();
        // The venue's own message kinds, those it sent: `bookTicker:120 depthUpdate:40`.
        let messages: Vec<String> = counters
            .messages()
            .filter(|(_, count)| *count > 0)
            .map(|(kind, count)| format!("{}:{count}", kind.name))
            .collect();
        tracing::info!(
            venue = %venue,
            messages = %messages.join(" "),
            malformed = counters.malformed.get(),
            unknown_symbol = counters.unknown_symbol.get(),
            duplicates = counters.duplicates.get(),
            book_syncs = counters.book_syncs.get(),
            book_gaps = counters.book_gaps.get(),
            book_resyncs = counters.book_resyncs.get(),
            book_refused = counters.book_refused.get(),
            book_limits = counters.book_limits.get(),
            connections = %states.join(","),
            attempts = lifecycle.attempts,
            postponed_attempts = lifecycle.postponed,
            rotations = lifecycle.rotations,
            stale_streams = lifecycle.stale_streams,
            recovered_streams = lifecycle.recovered_streams,
            transitions = %reasons.join(" "),
            "venue report"
        );
    }
}

fn log_notify_error(result: std::io::Result<()>) {
    if let Err(error) = result {
        tracing::warn!("notifying systemd failed: {error}");
    }
}

/// The NATS bridge as a thread of the appliance (`[bridge] in_appliance = true`): a bus consumer
/// like any other, reading the bus file this process writes, never touching a hot thread.
struct InApplianceBridge {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<(), tickwire_nats::BridgeError>>,
    counters: std::sync::Arc<tickwire_nats::BridgeCounters>,
}

impl InApplianceBridge {
    fn stop(self) {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(%error, "nats bridge"),
            Err(_) => tracing::error!("the nats bridge thread panicked"),
        }
        let get = tickwire_nats::BridgeCounters::get;
        tracing::info!(
            events_read = get(&self.counters.events_read),
            messages_published = get(&self.counters.messages_published),
            events_dropped = get(&self.counters.events_dropped),
            bus_missed = get(&self.counters.bus_missed),
            "nats bridge stopped"
        );
    }
}

fn start_bridge(loaded: &LoadedConfig) -> anyhow::Result<Option<InApplianceBridge>> {
    let appliance = &loaded.appliance;
    let (Some(bridge), Some(bus)) = (&appliance.bridge, &appliance.bus) else {
        return Ok(None);
    };
    if !bridge.in_appliance {
        return Ok(None);
    }
    let servers = tickwire_nats::bridge::parse_servers(&bridge.nats_urls.join(","))
        .map_err(|message| anyhow::anyhow!("[bridge] nats_urls: {message}"))?;
    let mut options =
        tickwire_nats::BridgeOptions::new(bus.resolved_path(), servers, bridge.resolved_name());
    options.queue_messages = bridge.queue_messages;
    options.jetstream =
        bridge
            .jetstream_stream
            .as_ref()
            .map(|stream| tickwire_nats::JetStreamOptions {
                stream: stream.clone(),
                max_age: Duration::from_secs(bridge.jetstream_max_age_s),
                max_bytes: bridge.jetstream_max_bytes,
            });
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counters = std::sync::Arc::new(tickwire_nats::BridgeCounters::default());
    tracing::info!(appliance = %options.appliance, "nats bridge: a thread of the appliance");
    let thread = {
        let (stop, counters) = (
            std::sync::Arc::clone(&stop),
            std::sync::Arc::clone(&counters),
        );
        std::thread::Builder::new()
            .name("bridge".into())
            .spawn(move || tickwire_nats::bridge::run(&options, &stop, counters))?
    };
    Ok(Some(InApplianceBridge {
        stop,
        thread,
        counters,
    }))
}
