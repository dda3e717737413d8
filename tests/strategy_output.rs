//! Issue 32, item 10: the built-in strategies (`print`, `mid`, `quoter`) neither write, lock
//! stdout, log nor allocate on the strategy thread. Each runs on a thread of its own, as on the
//! pinned strategy thread, while this thread drains its output ring as the control thread does;
//! over the steady state the strategy thread makes no write syscall (`syscw` of
//! `/proc/thread-self/io`), no allocation (the binary's counting allocator, which counts the
//! calling thread's), and no `tracing` event (a subscriber installed for that thread writes
//! nothing), and every line comes out of the ring complete and in order.

use crate::support::counting_alloc::allocations;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tickwire::config::{StrategyConfig, StrategyName};
use tickwire::event::{
    flags, Body, Event, EventHeader, EventKind, Gap, GapReason, Quote, Side, Trade, VenueState,
    VenueStatus,
};
use tickwire::fixed::Fixed;
use tickwire::strategy::builtin::{self, EventNames, InstrumentName};
use tickwire::strategy::output::OutputReader;
use tickwire::strategy::{Market, Strategy};

const INSTRUMENTS: u32 = 3;
const BATCH: usize = 64;
const BATCHES: usize = 400;
/// A timer call every this many batches.
const TIMER_EVERY: usize = 20;

fn names() -> EventNames {
    EventNames::new(
        vec!["binance".to_owned()],
        ["BTCUSDT", "ETHUSDT", "SOLUSDT"]
            .iter()
            .map(|symbol| InstrumentName {
                venue: "binance".to_owned(),
                symbol: (*symbol).to_owned(),
            })
            .collect(),
    )
}

/// A market's worth of events: quotes and trades on every instrument, now and then a gap or a
/// status, in batches of `BATCH`.
fn batches() -> Vec<Vec<Event>> {
    let fixed = |value: i64| Fixed::from_units(value).expect("in range");
    let mut batches = Vec::new();
    let mut seq = 0_u64;
    for _ in 0..BATCHES + 10 {
        let mut batch = Vec::with_capacity(BATCH);
        for _ in 0..BATCH {
            seq += 1;
            let instrument = (seq % u64::from(INSTRUMENTS)) as u32;
            let base = 60_000 + (seq % 50) as i64;
            let (kind, body) = match seq % 97 {
                0 => (
                    EventKind::Gap,
                    Body::Gap(Gap::new(GapReason::Reconnect, 0, 0)),
                ),
                1 => (
                    EventKind::VenueStatus,
                    Body::VenueStatus(VenueStatus::new(VenueState::Live, 0, 0)),
                ),
                tick if tick % 3 == 0 => (
                    EventKind::Trade,
                    Body::Trade(Trade::new(
                        fixed(base),
                        fixed(2),
                        seq,
                        if tick % 2 == 0 { Side::Bid } else { Side::Ask },
                    )),
                ),
                _ => (
                    EventKind::Quote,
                    Body::Quote(Quote {
                        bid_px: fixed(base),
                        bid_sz: fixed(3),
                        ask_px: fixed(base + 1),
                        ask_sz: fixed(1),
                    }),
                ),
            };
            batch.push(Event::new(
                EventHeader {
                    exchange_ts_ns: seq,
                    recv_ts_ns: seq + 1,
                    venue_seq: seq,
                    instrument_id: instrument,
                    venue_id: 0,
                    kind,
                    flags: flags::LAST,
                },
                body,
            ));
        }
        batches.push(batch);
    }
    batches
}

/// Write syscalls this thread has made, if the kernel keeps the count.
fn write_syscalls() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("syscw: "))
        .and_then(|count| count.trim().parse().ok())
}

/// A `tracing` writer that keeps what it is given.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the strategy thread did over the steady state, and what came out of the ring.
struct Run {
    allocations: u64,
    write_syscalls: Option<u64>,
    logged_through_tracing: Vec<u8>,
    stdout: Vec<u8>,
    log_lines: Vec<String>,
    dropped: u64,
}

/// Runs `strategy` over the batches on a thread of its own (the first 10 batches and a timer
/// call warm it up) while this thread drains `reader`.
fn run(mut strategy: Box<dyn Strategy>, mut reader: OutputReader) -> Run {
    let batches = batches();
    let done = Arc::new(AtomicBool::new(false));
    let captured = Captured::default();
    let strategy_thread = {
        let done = Arc::clone(&done);
        let captured = captured.clone();
        let captured_probe = captured.clone();
        std::thread::spawn(move || {
            let mut market = Market::new(INSTRUMENTS as usize);
            let mut now_ns = 1_000_000_000;
            let (warm_up, steady) = batches.split_at(10);
            for batch in warm_up {
                for event in batch {
                    market.apply(event);
                }
                strategy.on_events(batch, &market, now_ns);
            }
            strategy.on_timer(&market, now_ns);
            let subscriber = tracing_subscriber::fmt()
                .with_writer(move || captured.clone())
                .with_max_level(tracing::Level::TRACE)
                .finish();
            let _tracing = tracing::subscriber::set_default(subscriber);
            // The probes work: a log line on this thread is captured, a write is counted.
            tracing::info!("probe");
            assert!(!std::mem::take(&mut *captured_probe.0.lock().unwrap()).is_empty());
            if let Some(before) = write_syscalls() {
                std::fs::write("/dev/null", b"probe").expect("write /dev/null");
                assert!(
                    write_syscalls().expect("syscw") > before,
                    "syscw counts writes"
                );
            }
            let writes_before = write_syscalls();
            let before = allocations();
            for (index, batch) in steady.iter().enumerate() {
                for event in batch {
                    market.apply(event);
                }
                strategy.on_events(batch, &market, now_ns);
                if index % TIMER_EVERY == TIMER_EVERY - 1 {
                    now_ns += 1_000_000_000;
                    strategy.on_timer(&market, now_ns);
                }
            }
            let allocated = allocations() - before;
            let writes = write_syscalls()
                .zip(writes_before)
                .map(|(after, before)| after - before);
            done.store(true, Ordering::Release);
            (allocated, writes, strategy)
        })
    };
    // The control thread's side: drain while the strategy runs, then what is left.
    let mut stdout = Vec::new();
    let mut log_lines = Vec::new();
    while !done.load(Ordering::Acquire) {
        reader
            .drain(&mut stdout, |line| log_lines.push(line.to_owned()))
            .expect("drain");
        std::thread::yield_now();
    }
    let (allocations, write_syscalls, _strategy) = strategy_thread.join().expect("strategy");
    reader
        .drain(&mut stdout, |line| log_lines.push(line.to_owned()))
        .expect("drain");
    let logged_through_tracing = std::mem::take(&mut *captured.0.lock().unwrap());
    Run {
        allocations,
        write_syscalls,
        logged_through_tracing,
        stdout,
        log_lines,
        dropped: reader.dropped(),
    }
}

fn built(name: StrategyName) -> (Box<dyn Strategy>, OutputReader) {
    let config = StrategyConfig {
        name,
        summary_interval_ms: 1_000,
        ..StrategyConfig::default()
    };
    let (strategy, reader) = builtin::from_config(&config, names());
    (strategy.expect("a strategy"), reader.expect("an output"))
}

fn assert_quiet(name: &str, run: &Run) {
    assert_eq!(run.allocations, 0, "{name}: the strategy thread allocated");
    match run.write_syscalls {
        Some(writes) => assert_eq!(writes, 0, "{name}: the strategy thread wrote"),
        None => println!("{name}: /proc/thread-self/io has no syscw here; writes not counted"),
    }
    assert!(
        run.logged_through_tracing.is_empty(),
        "{name}: the strategy thread logged: {}",
        String::from_utf8_lossy(&run.logged_through_tracing)
    );
    assert_eq!(run.dropped, 0, "{name}");
}

#[test]
fn print_writes_nothing_on_its_thread_and_every_line_comes_out_in_order() {
    let (strategy, reader) = built(StrategyName::Print);
    let run = run(strategy, reader);
    assert_quiet("print", &run);
    // Every event, in order, as `EventNames::write` prints it.
    let mut expected = Vec::new();
    let names = names();
    for batch in batches() {
        for event in &batch {
            names.write(&mut expected, event);
        }
    }
    assert_eq!(
        run.stdout.len(),
        expected.len(),
        "the printed lines are complete"
    );
    assert!(run.stdout == expected, "the printed lines are in order");
    assert!(run.log_lines.is_empty());
}

#[test]
fn mid_and_quoter_summaries_go_through_the_ring_not_the_log() {
    let timers = BATCHES / TIMER_EVERY;
    for (name, strategy, per_timer) in [
        ("mid", StrategyName::Mid, 1),
        ("quoter", StrategyName::Quoter, INSTRUMENTS as usize),
    ] {
        let (strategy, reader) = built(strategy);
        let run = run(strategy, reader);
        assert_quiet(name, &run);
        assert!(run.stdout.is_empty(), "{name}");
        // The warm-up's timer call: `mid` has no rate yet; `quoter` summarises every book.
        let warm_up = if name == "mid" { 0 } else { per_timer };
        assert_eq!(
            run.log_lines.len(),
            warm_up + timers * per_timer,
            "{name}: {:?}",
            run.log_lines
        );
        assert!(
            run.log_lines.iter().all(|line| line.starts_with(name)),
            "{name}: {:?}",
            run.log_lines
        );
    }
}
