//! `tickwire replay`: recordings back through a strategy, and optionally onto a bus.
//!
//! The backtest path: the files `tickwire record --events` (or `[record]`) wrote are read with
//! `tickwire_record::Replay` (receive-time order across files and venues, each file in its
//! recorded order) and handed to a built-in strategy the way the strategy stage hands live
//! events (`Market::apply` per event, then `Strategy::on_events` per batch of at most 64).
//! With `--bus`, the same events are published to a bus of its own, so that any bus consumer
//! (`tickwire tail`, a Python reader, a user's process) runs against history.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickwire::config::{StrategyConfig, StrategyName};
use tickwire::event::Event;
use tickwire::strategy::builtin::{self, EventNames, InstrumentName};
use tickwire::strategy::{Market, Strategy};
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};
use tickwire_record::{venue_of_file_name, Replay};

/// The strategy stage's batch size, which replay keeps so that strategies see the same shapes.
const BATCH: usize = 64;
/// The most instrument ids a replay keeps names and market state for.
const MAX_INSTRUMENTS: usize = 1 << 20;

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The recordings (`.dbn.zst` files), of any venues and days.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Pace: 1 replays at the recorded pace, 10 ten times faster (by the receive times).
    #[arg(
        long,
        value_name = "X",
        default_value_t = 1.0,
        conflicts_with = "as_fast_as_possible"
    )]
    pub speed: f64,
    /// No pacing: every event as soon as the strategy takes it.
    #[arg(long)]
    pub as_fast_as_possible: bool,
    /// The built-in strategy: print (every event as a JSON line, the `tickwire decode`
    /// format), mid, quoter or none.
    #[arg(long, value_name = "NAME", default_value = "print", value_parser = ["print", "mid", "quoter", "none"])]
    pub strategy: String,
    /// Also publish the events to a new bus at this path (readers that fall a ring behind are
    /// lapped, as on the appliance's bus).
    #[arg(long, value_name = "PATH")]
    pub bus: Option<PathBuf>,
}

/// Names for the print strategy and the bus's directory, from the files' names (the venue)
/// and metadata (each instrument's symbol).
fn names(replay: &Replay) -> (EventNames, Vec<DirectoryEntry>) {
    let mut venues: BTreeMap<u16, String> = BTreeMap::new();
    let mut instruments: BTreeMap<u32, DirectoryEntry> = BTreeMap::new();
    for source in replay.sources() {
        let Some(venue_id) = source.venue_id else {
            continue;
        };
        let file_name = source
            .path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let venue = venue_of_file_name(&file_name)
            .map_or_else(|| source.metadata.dataset.clone(), str::to_owned);
        venues.entry(venue_id).or_insert_with(|| venue.clone());
        for mapping in &source.metadata.mappings {
            for interval in &mapping.intervals {
                if let Ok(instrument_id) = interval.symbol.parse::<u32>() {
                    instruments.entry(instrument_id).or_insert(DirectoryEntry {
                        instrument_id,
                        venue_id,
                        venue: venue.clone(),
                        symbol: mapping.raw_symbol.clone(),
                        venue_symbol: mapping.raw_symbol.clone(),
                    });
                }
            }
        }
    }
    let venue_count = venues
        .keys()
        .next_back()
        .map_or(0, |&last| usize::from(last) + 1);
    let mut venue_names = vec!["?".to_owned(); venue_count];
    for (venue_id, name) in venues {
        venue_names[usize::from(venue_id)] = name;
    }
    // Instrument ids index vectors (names, the market state): only as far as the largest mapped
    // id, which the appliance numbers densely from 0, and never past a million, so that a
    // stray id in a file cannot make a replay allocate gigabytes (an instrument past it is
    // named `?` and has no market state, as on the appliance).
    let instrument_count = instruments
        .keys()
        .next_back()
        .map_or(0, |&last| last as usize + 1)
        .min(MAX_INSTRUMENTS);
    let mut instrument_names = vec![
        InstrumentName {
            venue: "?".to_owned(),
            symbol: "?".to_owned(),
        };
        instrument_count
    ];
    for entry in instruments.values() {
        if let Some(slot) = instrument_names.get_mut(entry.instrument_id as usize) {
            *slot = InstrumentName {
                venue: entry.venue.clone(),
                symbol: entry.symbol.clone(),
            };
        }
    }
    (
        EventNames::new(venue_names, instrument_names),
        instruments.into_values().collect(),
    )
}

pub fn replay(args: ReplayArgs) -> ExitCode {
    let paced_ok = args.speed.is_finite() && args.speed > 0.0;
    if !args.as_fast_as_possible && !paced_ok {
        eprintln!("tickwire replay: --speed must be a positive number");
        return ExitCode::from(2);
    }
    let mut replay = match Replay::open(&args.files) {
        Ok(replay) => replay,
        Err(error) => {
            eprintln!("tickwire replay: {error}");
            return ExitCode::FAILURE;
        }
    };
    let (names, directory) = names(&replay);
    let instrument_count = names.instruments().len();
    let strategy_config = StrategyConfig {
        name: match args.strategy.as_str() {
            "print" => StrategyName::Print,
            "mid" => StrategyName::Mid,
            "quoter" => StrategyName::Quoter,
            _ => StrategyName::None,
        },
        // No periodic summaries: a replay has no wall-clock period of its own.
        summary_interval_ms: 0,
        ..StrategyConfig::default()
    };
    let (mut strategy, mut output): (Option<Box<dyn Strategy>>, _) =
        builtin::from_config(&strategy_config, names);
    // The strategy's lines go through its ring; this thread writes them out after each batch
    // (and stops writing, as the print strategy always has, once stdout fails: `| head`).
    let mut output_failed = false;
    let mut write_output = move |output: &mut Option<tickwire::strategy::output::OutputReader>| {
        let Some(reader) = output.as_mut() else {
            return;
        };
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut sink = std::io::sink();
        let target: &mut dyn std::io::Write = if output_failed { &mut sink } else { &mut out };
        let result = reader
            .drain(target, tickwire::strategy::output::log_line)
            .and_then(|()| target.flush());
        if result.is_err() {
            output_failed = true;
        }
    };
    let mut market = Market::new(instrument_count);
    let mut bus = match &args.bus {
        Some(path) => match open_bus(path, &directory) {
            Ok(bus) => Some(bus),
            Err(error) => {
                eprintln!("tickwire replay: {error}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };

    let started = Instant::now();
    let mut first_recv_ns: Option<u64> = None;
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut damaged = 0u32;
    let mut events = 0u64;
    let mut deliver = |batch: &mut Vec<Event>, market: &mut Market| {
        if batch.is_empty() {
            return;
        }
        for event in batch.iter() {
            market.apply(event);
        }
        let now_ns = batch.last().map_or(0, |event| event.header.recv_ts_ns);
        if let Some(strategy) = strategy.as_mut() {
            strategy.on_events(batch, market, now_ns);
        }
        write_output(&mut output);
        if let Some(bus) = bus.as_mut() {
            for event in batch.iter() {
                bus.write(event);
            }
            bus.publish();
        }
        batch.clear();
    };
    while let Some(next) = replay.next_event() {
        let event = match next {
            Ok(event) => event,
            Err(error) => {
                // Everything before the damage has been read; hand it over first.
                deliver(&mut batch, &mut market);
                eprintln!("tickwire replay: {error}");
                damaged += 1;
                continue;
            }
        };
        events += 1;
        if !args.as_fast_as_possible {
            let recv_ns = event.header.recv_ts_ns;
            let first = *first_recv_ns.get_or_insert(recv_ns);
            let due = Duration::from_nanos(
                (recv_ns.saturating_sub(first) as f64 / args.speed).min(u64::MAX as f64) as u64,
            );
            let elapsed = started.elapsed();
            if due > elapsed {
                deliver(&mut batch, &mut market);
                std::thread::sleep(due - elapsed);
            }
        }
        batch.push(event);
        if batch.len() == BATCH {
            deliver(&mut batch, &mut market);
        }
    }
    deliver(&mut batch, &mut market);
    if let Some(strategy) = strategy.as_mut() {
        strategy.finish(&market);
    }
    write_output(&mut output);
    eprintln!(
        "replay: {events} events from {} files in {:.3} s",
        args.files.len(),
        started.elapsed().as_secs_f64()
    );
    if damaged > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn open_bus(path: &std::path::Path, directory: &[DirectoryEntry]) -> Result<BusWriter, String> {
    let geometry = Geometry::new(1 << 18, 4096)?;
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let options = BusOptions {
        path: path.to_path_buf(),
        geometry,
        group: None,
    };
    let mut writer = BusWriter::create(&options, now_ns, now_ns)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    for entry in directory {
        writer
            .add_instrument(entry)
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    Ok(writer)
}
