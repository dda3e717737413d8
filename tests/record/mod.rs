//! Issue 21: the appliance records its bus to DBN files and `tickwire replay` gives the same
//! events back; `tickwire record --events` survives `kill -9`; damage is named; Databento's
//! Python packages read the files.
//!
//! The Python checks need `databento-dbn` and `zstandard` (and `databento` for the pandas
//! path): they skip with a printed reason where those are missing, unless
//! `TICKWIRE_REQUIRE_DBN_PYTHON=1` (set by `.ci/run`), which makes a missing package a failure.

use crate::support::appliance;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::event::json::write_event;
use tickwire::event::{Body, Event, EventKind, Side};
use tickwire_record::{RecordingReader, Replay};
use tickwire_sim::source::{Source, SyntheticConfig};

fn synthetic(rate: f64) -> Box<dyn Source> {
    appliance::synthetic_two(rate, SyntheticConfig::default().book_levels)
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| path.to_string_lossy().ends_with(".dbn.zst"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn replay_library(files: &[PathBuf]) -> Vec<Event> {
    let mut replay = Replay::open(files).expect("the recordings open");
    let mut events = Vec::new();
    while let Some(next) = replay.next_event() {
        events.push(next.expect("no damage"));
    }
    events
}

/// `recorded` less the books the recorder asked for (bus-only snapshots, which the strategy
/// does not see), checked to be what the strategy saw, in order, up to where the recording ends.
fn without_requested_books(recorded: &[Event], seen: &[Event]) -> Vec<Event> {
    let mut kept = Vec::with_capacity(recorded.len());
    let mut next = 0;
    for event in recorded {
        if seen.get(next) == Some(event) {
            kept.push(*event);
            next += 1;
        } else {
            assert!(
                matches!(
                    event.kind(),
                    EventKind::SnapshotBegin | EventKind::BookLevel | EventKind::SnapshotEnd
                ),
                "an event the strategy did not see that is no requested book: {event:?}"
            );
        }
    }
    kept
}

/// The valid books `events` leave, by `(venue_id, instrument_id)`.
type Levels = Vec<(tickwire::fixed::Fixed, tickwire::fixed::Fixed)>;
fn books_of(events: &[Event]) -> Vec<((u16, u32), (Levels, Levels))> {
    let mut books = tickwire_client::Books::new();
    books.apply_all(events);
    let mut valid: Vec<_> = books
        .iter()
        .filter(|(_, book)| book.is_valid())
        .map(|(key, book)| (key, (book.bids().collect(), book.asks().collect())))
        .collect();
    valid.sort_by_key(|(key, _)| *key);
    valid
}

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

/// Whether Python has `modules`; prints why the test skips, or fails under
/// `TICKWIRE_REQUIRE_DBN_PYTHON=1`.
fn python_has(modules: &str, install: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required = std::env::var("TICKWIRE_REQUIRE_DBN_PYTHON").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_DBN_PYTHON=1 but Python lacks {modules} ({install})"
        );
        crate::support::skip::skipped(format_args!("Python lacks {modules} ({install})"));
    }
    ok
}

/// What the Python reader prints for the quotes and trades among `events`.
fn expected_python_lines(events: &[Event]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter_map(|event| {
            let header = &event.header;
            match event.body() {
                Body::Quote(quote) => Some(serde_json::json!({
                    "type": "quote",
                    "ts_event": header.exchange_ts_ns,
                    "ts_recv": header.recv_ts_ns,
                    "instrument_id": header.instrument_id,
                    "publisher_id": header.venue_id,
                    "bid_px": quote.bid_px.0,
                    "ask_px": quote.ask_px.0,
                    "bid_sz": quote.bid_sz.0,
                    "ask_sz": quote.ask_sz.0,
                })),
                Body::Trade(trade) => Some(serde_json::json!({
                    "type": "trade",
                    "ts_event": header.exchange_ts_ns,
                    "ts_recv": header.recv_ts_ns,
                    "instrument_id": header.instrument_id,
                    "publisher_id": header.venue_id,
                    "price": trade.price.0,
                    "size": trade.size.0,
                    "side": match trade.aggressor() {
                        Side::Bid => "B",
                        Side::Ask => "A",
                        Side::None => "N",
                    },
                })),
                _ => None,
            }
        })
        .collect()
}

/// The Python reader's JSON lines for `files` (`--pandas` for the `databento` path).
fn python_lines(files: &[PathBuf], pandas: bool) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/record/read_dbn.py");
    let mut command = Command::new("python3");
    command.arg(script);
    if pandas {
        command.arg("--pandas");
    }
    let output = command.args(files).output().expect("python3 runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn the_appliance_records_what_its_strategy_sees_and_replay_gives_the_same_events_back() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("tickwire.bus");
    let out = dir.path().join("recordings");
    let extra = format!(
        "[record]\ndir = {:?}\nflush_interval_ms = 100\n",
        out.display().to_string()
    );
    let mut pair = appliance::start(
        synthetic(2_000.0),
        |_| {},
        appliance::bus_setup(&bus, &extra),
    );
    pair.run_until(
        Duration::from_secs(20),
        "books in sync and trades",
        |pair| {
            pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
                && pair.count(|event| event.kind() == EventKind::Trade) >= 20
        },
    );
    // The recorder's counters on /metrics, as of its last loop.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = pair.session.render_metrics();
        let recorded = metrics
            .lines()
            .find_map(|line| line.strip_prefix("tickwire_record_events_total "))
            .and_then(|value| value.parse::<u64>().ok())
            .expect("the recorder's events counter");
        if recorded > 0 {
            assert!(
                metrics.contains("tickwire_record_files_total 1"),
                "{metrics}"
            );
            assert!(
                metrics.contains("tickwire_record_overruns_total 0"),
                "{metrics}"
            );
            assert!(
                metrics.contains("tickwire_record_write_errors_total 0"),
                "{metrics}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the recorder counted nothing: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = pair.finish();
    let files = recordings(&out);
    assert_eq!(files.len(), 1, "one venue, one file: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("sim-"), "{name}");

    // The library reader: every event the strategy saw, byte for byte, in order, and the books
    // the recorder asked for when its file opened (issue 33), which only the bus carries.
    let replayed = replay_library(&files);
    assert_eq!(
        without_requested_books(&replayed, &seen),
        seen,
        "the same events in the same order"
    );
    assert_eq!(books_of(&replayed), books_of(&seen));
    assert_eq!(books_of(&seen).len(), 2);
    for kind in [
        EventKind::VenueStatus,
        EventKind::SnapshotBegin,
        EventKind::BookLevel,
        EventKind::SnapshotEnd,
        EventKind::Quote,
        EventKind::Trade,
    ] {
        assert!(
            replayed.iter().any(|event| event.kind() == kind),
            "no {kind:?}"
        );
    }
    let reader = RecordingReader::open(&files[0]).unwrap();
    let metadata = reader.metadata();
    assert_eq!(metadata.dataset, "BINANCE.USDM");
    let mut symbols: Vec<&str> = metadata
        .mappings
        .iter()
        .map(|mapping| mapping.raw_symbol.as_str())
        .collect();
    symbols.sort_unstable();
    assert_eq!(symbols, ["BTCUSDT", "ETHUSDT"]);
    let symbol_of = |instrument_id: u32| -> String {
        metadata
            .mappings
            .iter()
            .find(|mapping| mapping.intervals[0].symbol == instrument_id.to_string())
            .map_or("?".to_owned(), |mapping| mapping.raw_symbol.clone())
    };

    // `tickwire replay` through the print strategy: the lines the live print strategy writes
    // for the events the live strategy saw.
    let output = tickwire()
        .args(["replay", "--as-fast-as-possible", "--strategy", "print"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut expected = Vec::new();
    for event in &replayed {
        let symbol = if event.header.instrument_id == u32::MAX {
            "*".to_owned()
        } else {
            symbol_of(event.header.instrument_id)
        };
        write_event(&mut expected, "sim", symbol.as_bytes(), event);
    }
    let expected = String::from_utf8(expected).unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    let first_line_difference = printed
        .lines()
        .zip(expected.lines())
        .position(|(a, b)| a != b);
    assert_eq!(first_line_difference, None);
    assert_eq!(printed.lines().count(), replayed.len());

    // `tickwire replay --bus`: the same events on a bus of its own, for any consumer.
    let replay_bus = dir.path().join("replay.bus");
    let status = tickwire()
        .args([
            "replay",
            "--as-fast-as-possible",
            "--strategy",
            "none",
            "--bus",
        ])
        .arg(&replay_bus)
        .args(&files)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let mut reader = tickwire_bus::BusReader::open(&replay_bus, tickwire_bus::Start::Oldest, 1024)
        .expect("the replay's bus stays after the replay");
    assert!(
        reader.is_closed(),
        "the replay's bus is closed when it ends"
    );
    let mut on_bus = Vec::new();
    let mut buffer = vec![seen[0]; 1024];
    loop {
        let batch = reader.read(&mut buffer).expect("the bus reads");
        assert_eq!(batch.missed, 0);
        if batch.count == 0 {
            break;
        }
        on_bus.extend_from_slice(&buffer[..batch.count]);
    }
    assert_eq!(
        on_bus, replayed,
        "the replay's bus holds the recorded events in order"
    );
    let mut directory: Vec<(String, String)> = reader
        .directory()
        .into_iter()
        .map(|entry| (entry.venue, entry.symbol))
        .collect();
    directory.sort();
    assert_eq!(
        directory,
        [
            ("sim".to_owned(), "BTCUSDT".to_owned()),
            ("sim".to_owned(), "ETHUSDT".to_owned())
        ]
    );

    // Databento's Python reader gets the same quotes and trades.
    if python_has(
        "databento_dbn, zstandard",
        "pip install databento-dbn zstandard",
    ) {
        let mut lines = python_lines(&files, false);
        let end = lines.pop().expect("an end line");
        assert_eq!(end["end"], "whole");
        assert_eq!(end["records"], replayed.len() as u64);
        assert_eq!(lines, expected_python_lines(&replayed));
    }
    if python_has("databento", "pip install databento") {
        let mut lines = python_lines(&files, true);
        lines.pop();
        assert_eq!(lines, expected_python_lines(&replayed));
    }
}

/// Reads a recording with tickwire's own reader: the events and whether it ended in damage.
fn read_file(path: &Path) -> (Vec<Event>, Option<tickwire_record::ReadError>) {
    let mut reader = RecordingReader::open(path).expect("a recording opens past its metadata");
    let mut events = Vec::new();
    loop {
        match reader.next_event() {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, None),
            Err(error) => return (events, Some(error)),
        }
    }
}

#[test]
fn a_recorder_process_killed_with_sigkill_leaves_files_that_read_to_the_last_flush() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("tickwire.bus");
    let out = dir.path().join("recordings");
    let mut pair = appliance::start(synthetic(3_000.0), |_| {}, appliance::bus_setup(&bus, ""));
    pair.run_until(Duration::from_secs(20), "trades", |pair| {
        pair.count(|event| event.kind() == EventKind::Trade) >= 3
    });
    let mut child = tickwire()
        .args(["record", "--events", "--bus"])
        .arg(&bus)
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Past two flushes (every second by default), and into the third.
    std::thread::sleep(Duration::from_millis(2_600));
    child.kill().unwrap();
    child.wait().unwrap();
    let files = recordings(&out);
    assert_eq!(files.len(), 1, "{files:?}");
    let killed = files[0].clone();
    let killed_bytes = std::fs::read(&killed).unwrap();
    let (events, error) = read_file(&killed);
    // A kill between frames leaves a whole file; inside one, the damage is named.
    if let Some(error) = &error {
        assert!(error.offset <= killed_bytes.len() as u64, "{error}");
    }
    assert!(events.len() > 100, "two flushes' worth: {}", events.len());

    // A restart writes a new file and never touches the old one; this time the bus is found
    // through the appliance's config, as `tickwire tail --config` finds it.
    let config = pair.dir.path().join("tickwire.toml");
    let status = tickwire()
        .args(["record", "--events", "--duration", "1.5", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let seen = pair.finish();
    assert_eq!(
        std::fs::read(&killed).unwrap(),
        killed_bytes,
        "the old file is untouched"
    );
    let files = recordings(&out);
    assert_eq!(files.len(), 2, "{files:?}");
    // Both started from the bus's oldest event: each is a prefix of what the strategy saw
    // (with the books the recorder asked for).
    for path in &files {
        let (events, _) = read_file(path);
        assert!(!events.is_empty());
        let strategy_events = without_requested_books(&events, &seen);
        assert_eq!(
            strategy_events[..],
            seen[..strategy_events.len()],
            "{}",
            path.display()
        );
    }
    if python_has(
        "databento_dbn, zstandard",
        "pip install databento-dbn zstandard",
    ) {
        let mut lines = python_lines(std::slice::from_ref(&killed), false);
        let end = lines.pop().expect("an end line");
        assert_eq!(end["records"], events.len() as u64, "{end}");
        assert_eq!(end["end"], if error.is_some() { "cut" } else { "whole" });
        assert_eq!(lines, expected_python_lines(&events));
    }
}

#[test]
fn replay_of_a_damaged_file_gives_the_events_before_the_damage_then_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("tickwire.bus");
    let out = dir.path().join("recordings");
    let extra = format!(
        "[record]\ndir = {:?}\nflush_interval_ms = 20\n",
        out.display().to_string()
    );
    let mut pair = appliance::start(
        synthetic(3_000.0),
        |_| {},
        appliance::bus_setup(&bus, &extra),
    );
    let started = Instant::now();
    pair.run_until(Duration::from_secs(20), "trades", |pair| {
        pair.count(|event| event.kind() == EventKind::Trade) >= 30
    });
    // Several frames: at least a few flush intervals.
    std::thread::sleep(Duration::from_millis(300).saturating_sub(started.elapsed()));
    let seen = pair.finish();
    let files = recordings(&out);
    let bytes = std::fs::read(&files[0]).unwrap();
    let cut = dir.path().join("sim-cut.dbn.zst");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let (before_damage, error) = read_file(&cut);
    let error = error.expect("a cut inside a frame is damage");
    let (whole, _) = read_file(&files[0]);
    assert!(before_damage.len() < whole.len());
    assert_eq!(
        without_requested_books(&whole, &seen),
        seen,
        "the whole file holds what the strategy saw"
    );
    let output = tickwire()
        .args(["replay", "--as-fast-as-possible", "--strategy", "print"])
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&cut.display().to_string())
            && stderr.contains(&format!("byte offset {}", error.offset)),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().count(),
        before_damage.len(),
        "every event before the damage is replayed"
    );
    // Arguments: events mode needs a bus.
    let output = tickwire()
        .args(["record", "--events", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_appliance_killed_with_sigkill_leaves_recordings_that_read_to_the_last_flush() {
    let dir = tempfile::tempdir().unwrap();
    let sim = tickwire_sim::Sim::start(
        tickwire_sim::SimOptions::new(dir.path().join("sim")),
        synthetic(3_000.0),
    )
    .expect("the simulator starts");
    let bus = dir.path().join("tickwire.bus");
    let out = dir.path().join("recordings");
    let extra = format!(
        "[record]\ndir = {:?}\nflush_interval_ms = 200\n",
        out.display().to_string()
    );
    let config = appliance::write_configs(dir.path(), &sim, &appliance::bus_setup(&bus, &extra));
    let run = |what: &str| {
        // Only this run's file counts: a restarted appliance's wait must not be satisfied by
        // the bytes of the first one's (which left the second run half a second, too little on
        // a loaded machine to record anything, and could start it in the first run's second,
        // whose file name it would then share).
        let earlier = recordings(&out);
        let mut child = tickwire()
            .args(["run", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the recorder has written records past the metadata, then past a few
        // more flushes, and kill the whole appliance.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let bytes: u64 = recordings(&out)
                .iter()
                .filter(|path| !earlier.contains(path))
                .filter_map(|path| std::fs::metadata(path).ok())
                .map(|meta| meta.len())
                .sum();
            if bytes > 20_000 {
                break;
            }
            assert!(Instant::now() < deadline, "{what}: no recording grew");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        child.kill().unwrap();
        child.wait().unwrap();
    };
    run("first appliance");
    let first = recordings(&out);
    assert_eq!(first.len(), 1, "{first:?}");
    let first_bytes = std::fs::read(&first[0]).unwrap();
    let (events, error) = read_file(&first[0]);
    assert!(events.len() > 100, "{}", events.len());
    if let Some(error) = &error {
        assert!(error.offset <= first_bytes.len() as u64, "{error}");
    }
    assert!(
        events.iter().any(|event| event.kind() == EventKind::Quote),
        "the recording holds market data"
    );
    // A restarted appliance records into a new file and leaves the cut one as it was. Files are
    // named to the second: the restart comes in a later second than the first file's.
    std::thread::sleep(Duration::from_millis(1_100));
    run("restarted appliance");
    let files = recordings(&out);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(std::fs::read(&first[0]).unwrap(), first_bytes);
    let (restarted, _) = read_file(&files[1]);
    assert!(restarted.len() > 100);
}

/// Issue 33: a recorder that attaches to an appliance whose ring no longer holds the books'
/// first snapshots asks for every book, so that its file alone rebuilds them: replayed, it
/// ends with the books of a reader that saw everything (the strategy).
#[test]
fn a_recording_started_against_a_running_appliance_replays_into_the_live_books() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("tickwire.bus");
    let out = dir.path().join("recordings");
    // The smallest ring check-config accepts for the simulator's 1,000-level books.
    let mut setup = appliance::bus_setup(&bus, "snapshot_levels_per_s = 20000\n");
    setup.appliance_extra = setup
        .appliance_extra
        .replace("capacity = 65536", "capacity = 8192");
    let mut pair = appliance::start(synthetic(5_000.0), |_| {}, setup);
    // The ring has gone round twice since the books' first snapshots.
    pair.run_until(Duration::from_secs(30), "the ring lapped twice", |pair| {
        pair.session.bus().unwrap().stats().cursor() > 2 * 8192
            && pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
    });
    let mut child = tickwire()
        .args(["record", "--events", "--duration", "4", "--bus"])
        .arg(&bus)
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    pair.run_for(Duration::from_millis(2_500));
    let seen = pair.finish();
    assert!(child.wait().unwrap().success());
    let files = recordings(&out);
    assert_eq!(files.len(), 1, "{files:?}");
    let (recorded, error) = read_file(&files[0]);
    assert!(error.is_none(), "{error:?}");
    let first_begin = recorded
        .iter()
        .position(|event| event.kind() == EventKind::SnapshotBegin);
    assert!(
        first_begin.is_some_and(|first| first > 0),
        "the file starts inside the stream (deltas) and then holds snapshots: {first_begin:?}"
    );
    let live = books_of(&seen);
    assert_eq!(live.len(), 2, "both books valid at the end of the stream");
    assert_eq!(
        books_of(&recorded),
        live,
        "the file alone ends with the live books"
    );
}
