//! The recorder on a fake clock and real files: what it writes reads back, rotation, gaps,
//! write errors, damaged files.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;
use tickwire_bus::event::{
    flags, Body, Event, EventHeader, EventKind, GapReason, Quote, Side, Trade,
};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::DirectoryEntry;
use tickwire_record::{Clock, ReadError, Recorder, RecorderConfig, RecordingReader, Replay};

// The workspace's visible skips (a line on stderr, a count when the binary exits).
#[path = "../../../tests/support/skip.rs"]
mod skip;

/// 2024-08-07 23:59:58 UTC.
const BEFORE_MIDNIGHT_NS: u64 = 1_723_075_198_000_000_000;
const SECOND_NS: u64 = 1_000_000_000;

#[derive(Clone, Default)]
struct FakeClock {
    wall_ns: Rc<Cell<u64>>,
    monotonic_ns: Rc<Cell<u64>>,
}

impl FakeClock {
    fn at(wall_ns: u64) -> FakeClock {
        let clock = FakeClock::default();
        clock.wall_ns.set(wall_ns);
        clock
    }

    /// Both clocks move forward by `ns`.
    fn advance(&self, ns: u64) {
        self.wall_ns.set(self.wall_ns.get() + ns);
        self.monotonic_ns.set(self.monotonic_ns.get() + ns);
    }

    /// The wall clock is set to `wall_ns`; the monotonic clock moves a little, as it would.
    fn jump_to(&self, wall_ns: u64) {
        self.wall_ns.set(wall_ns);
        self.monotonic_ns.set(self.monotonic_ns.get() + 1_000);
    }
}

impl Clock for FakeClock {
    fn wall_ns(&self) -> u64 {
        self.wall_ns.get()
    }
    fn monotonic_ns(&self) -> u64 {
        self.monotonic_ns.get()
    }
}

fn entry(venue_id: u16, venue: &str, instrument_id: u32, symbol: &str) -> DirectoryEntry {
    DirectoryEntry {
        instrument_id,
        venue_id,
        venue: venue.to_owned(),
        symbol: symbol.to_owned(),
        venue_symbol: symbol.to_ascii_lowercase(),
    }
}

fn directory() -> Vec<DirectoryEntry> {
    vec![
        entry(0, "binance-usdm", 1, "BTCUSDT"),
        entry(0, "binance-usdm", 2, "ETHUSDT"),
        entry(1, "thalex", 1, "BTC-PERPETUAL"),
    ]
}

fn quote(venue_id: u16, instrument_id: u32, n: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: BEFORE_MIDNIGHT_NS + n,
            recv_ts_ns: BEFORE_MIDNIGHT_NS + n * 10,
            venue_seq: 5_000_000_000 + n,
            instrument_id,
            venue_id,
            kind: EventKind::Quote,
            flags: flags::LAST,
        },
        Body::Quote(Quote {
            bid_px: Fixed(60_000_000_000_000 + n as i64),
            bid_sz: Fixed(1_500_000_000),
            ask_px: Fixed(60_000_100_000_000),
            ask_sz: Fixed(250_000_000),
        }),
    )
}

fn trade(venue_id: u16, instrument_id: u32, n: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: BEFORE_MIDNIGHT_NS + n,
            recv_ts_ns: BEFORE_MIDNIGHT_NS + n * 10 + 1,
            venue_seq: n,
            instrument_id,
            venue_id,
            kind: EventKind::Trade,
            flags: flags::LAST,
        },
        Body::Trade(Trade::new(
            Fixed(60_000_000_000_000),
            Fixed(1_000_000),
            n,
            Side::Ask,
        )),
    )
}

fn config(dir: &Path) -> RecorderConfig {
    let mut config = RecorderConfig::new(dir);
    config
        .datasets
        .insert("binance-usdm".to_owned(), "BINANCE.USDM".to_owned());
    config
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the directory")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
}

fn read_all(path: &Path) -> (Vec<Event>, Option<ReadError>) {
    let mut reader = RecordingReader::open(path).expect("the file opens");
    let mut events = Vec::new();
    loop {
        match reader.next_event() {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, None),
            Err(error) => return (events, Some(error)),
        }
    }
}

fn replay_all(paths: &[PathBuf]) -> Vec<Event> {
    let mut replay = Replay::open(paths).expect("the files open");
    let mut events = Vec::new();
    while let Some(next) = replay.next_event() {
        events.push(next.expect("no damage"));
    }
    events
}

#[test]
fn one_file_per_venue_reads_back_the_same_events_with_symbol_mappings() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    let mut sent: Vec<Event> = Vec::new();
    for n in 0..5000 {
        sent.push(quote(0, 1 + (n % 2) as u32, n));
        sent.push(trade(1, 1, n));
    }
    for batch in sent.chunks(256) {
        recorder.record(batch);
        clock.advance(SECOND_NS / 10);
        recorder.tick();
    }
    let stats = recorder.close();
    assert_eq!(stats.events, sent.len() as u64);
    assert_eq!(stats.fell_back, 0);
    assert_eq!(stats.files_opened, 2);
    assert!(stats.frames > 2, "flushed every second: {stats:?}");
    let files = files_in(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    let name = |path: &PathBuf| path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name(&files[0]).starts_with("binance-usdm-20240807T225958Z"),
        "{files:?}"
    );
    assert!(name(&files[1]).starts_with("thalex-"), "{files:?}");
    assert_eq!(
        tickwire_record::venue_of_file_name(&name(&files[0])),
        Some("binance-usdm")
    );
    assert_eq!(
        tickwire_record::venue_of_file_name("binance-usdm-20240807T225958Z-2.dbn.zst"),
        Some("binance-usdm")
    );
    assert_eq!(tickwire_record::venue_of_file_name("notes.txt"), None);
    for (venue_id, path) in [(0u16, &files[0]), (1, &files[1])] {
        let (events, error) = read_all(path);
        assert!(error.is_none(), "{error:?}");
        let expected: Vec<Event> = sent
            .iter()
            .filter(|event| event.header.venue_id == venue_id)
            .copied()
            .collect();
        assert_eq!(events, expected);
    }
    let reader = RecordingReader::open(&files[0]).expect("opens");
    let metadata = reader.metadata();
    assert_eq!(metadata.dataset, "BINANCE.USDM");
    assert_eq!(metadata.schema, None, "mixed record types");
    let mut mapped: Vec<(String, String)> = metadata
        .mappings
        .iter()
        .map(|mapping| {
            (
                mapping.raw_symbol.clone(),
                mapping.intervals[0].symbol.clone(),
            )
        })
        .collect();
    mapped.sort();
    assert_eq!(
        mapped,
        [
            ("BTCUSDT".to_owned(), "1".to_owned()),
            ("ETHUSDT".to_owned(), "2".to_owned())
        ]
    );
    let thalex = RecordingReader::open(&files[1]).expect("opens");
    assert_eq!(
        thalex.metadata().dataset,
        "THALEX",
        "the default: the venue name in capitals"
    );
    // Merged in receive-time order, every event once.
    let merged = replay_all(&files);
    let mut by_time = sent.clone();
    by_time.sort_by_key(|event| event.header.recv_ts_ns);
    assert_eq!(merged, by_time);
}

#[test]
fn a_clock_jump_across_midnight_neither_loses_nor_duplicates_a_rotation() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    let mut n = 0;
    let mut step = |recorder: &mut Recorder<FakeClock>| {
        recorder.record(&[quote(0, 1, n)]);
        n += 1;
        recorder.tick();
    };
    step(&mut recorder);
    // Across midnight: one rotation.
    clock.advance(3 * SECOND_NS);
    recorder.tick();
    step(&mut recorder);
    assert_eq!(recorder.stats().files_opened, 2);
    // Back across midnight (an NTP step): no rotation, the events stay in today's file.
    clock.jump_to(BEFORE_MIDNIGHT_NS - 10 * SECOND_NS);
    step(&mut recorder);
    // Forward across the same midnight again: still no rotation.
    clock.jump_to(BEFORE_MIDNIGHT_NS + 20 * SECOND_NS);
    step(&mut recorder);
    assert_eq!(
        recorder.stats().files_opened,
        2,
        "the same midnight rotates once"
    );
    // A jump of three days: one rotation, not three.
    clock.jump_to(BEFORE_MIDNIGHT_NS + 3 * 86_400 * SECOND_NS);
    step(&mut recorder);
    assert_eq!(recorder.stats().files_opened, 3);
    let stats = recorder.close();
    assert_eq!(stats.events, 5);
    let files = files_in(dir.path());
    assert_eq!(files.len(), 3, "{files:?}");
    let counts: Vec<usize> = files.iter().map(|path| read_all(path).0.len()).collect();
    assert_eq!(counts, [1, 3, 1]);
}

#[test]
fn files_rotate_by_size_and_a_restart_never_appends() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut config = config(dir.path());
    config.max_file_bytes = Some(4096);
    config.max_frame_bytes = 8192;
    let mut recorder = Recorder::new(config.clone(), clock.clone());
    recorder.learn(&directory());
    let sent: Vec<Event> = (0..20_000).map(|n| quote(0, 1, n * 7919)).collect();
    recorder.record(&sent);
    let stats = recorder.close();
    assert!(stats.files_opened > 2, "{stats:?}");
    // A second recorder at the same wall second: a new file beside the old ones.
    let mut again = Recorder::new(config, clock.clone());
    again.learn(&directory());
    again.record(&sent[..10]);
    again.close();
    let files = files_in(dir.path());
    assert_eq!(files.len() as u64, stats.files_opened + 1);
    let all = replay_all(&files);
    assert_eq!(all.len(), sent.len() + 10);
    let mut expected = sent.clone();
    expected.extend_from_slice(&sent[..10]);
    expected.sort_by_key(|event| event.header.recv_ts_ns);
    let mut got = all.clone();
    got.sort_by_key(|event| event.header.recv_ts_ns);
    assert_eq!(got, expected);
}

fn recorder_gap_lost(event: &Event) -> Option<u64> {
    match event.body() {
        Body::Gap(gap)
            if event.header.flags & flags::DERIVED != 0
                && gap.reason() == GapReason::RingOverflow
                && event.header.instrument_id == u32::MAX =>
        {
            Some(gap.received_seq - gap.expected_seq)
        }
        _ => None,
    }
}

#[test]
fn an_overrun_writes_a_counted_gap_into_every_venue_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    recorder.record(&[quote(0, 1, 1), trade(1, 1, 2)]);
    recorder.overrun(1234);
    recorder.record(&[quote(0, 1, 3)]);
    let stats = recorder.close();
    assert_eq!(
        (stats.overruns, stats.missed, stats.gaps_written),
        (1, 1234, 2)
    );
    for path in files_in(dir.path()) {
        let (events, error) = read_all(&path);
        assert!(error.is_none());
        let gaps: Vec<u64> = events.iter().filter_map(recorder_gap_lost).collect();
        assert_eq!(gaps, [1234], "{}", path.display());
        assert_eq!(
            recorder_gap_lost(&events[1]),
            Some(1234),
            "after the first event"
        );
        if let Body::Gap(gap) = events[1].body() {
            assert_eq!(gap.expected_seq, 2, "the bus position the loss starts at");
        }
    }
}

#[test]
fn an_unwritable_directory_is_retried_and_the_loss_is_marked() {
    let base = tempfile::tempdir().expect("a temporary directory");
    // A path under a regular file: no process, root included, can create a file there.
    let blocker = base.path().join("out");
    std::fs::write(&blocker, b"not a directory").expect("write");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut config = config(&blocker);
    config.retry_interval = Duration::from_secs(2);
    let mut recorder = Recorder::new(config, clock.clone());
    recorder.learn(&directory());
    recorder.record(&[quote(0, 1, 1), quote(0, 1, 2)]);
    assert_eq!(
        recorder.stats().write_errors,
        1,
        "one attempt, then the retry interval"
    );
    assert_eq!(recorder.stats().lost, 2);
    clock.advance(SECOND_NS);
    recorder.tick();
    recorder.record(&[quote(0, 1, 3)]);
    assert_eq!(
        recorder.stats().write_errors,
        1,
        "no retry before the interval"
    );
    assert_eq!(recorder.stats().lost, 3);
    // The operator fixes the directory; the next retry opens a file that starts with the gap.
    std::fs::remove_file(&blocker).expect("remove");
    std::fs::create_dir(&blocker).expect("mkdir");
    clock.advance(2 * SECOND_NS);
    recorder.tick();
    recorder.record(&[quote(0, 1, 4)]);
    let stats = recorder.close();
    assert_eq!(stats.lost, 3);
    assert_eq!(stats.gaps_written, 1);
    let files = files_in(&blocker);
    assert_eq!(files.len(), 1);
    let (events, _) = read_all(&files[0]);
    assert_eq!(events.len(), 2);
    assert_eq!(recorder_gap_lost(&events[0]), Some(3));
    assert_eq!(events[1], quote(0, 1, 4));
}

#[test]
fn a_cut_or_corrupt_file_reads_up_to_the_damage_and_names_the_offset() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    let sent: Vec<Event> = (0..3000).map(|n| quote(0, 1, n)).collect();
    for batch in sent.chunks(100) {
        recorder.record(batch);
        recorder.flush();
    }
    recorder.close();
    let path = files_in(dir.path()).remove(0);
    let bytes = std::fs::read(&path).expect("read");
    let cut_path = dir.path().join("cut.dbn.zst");
    let mut last_count = 0;
    let mut cuts = 0;
    for cut in (1..bytes.len()).step_by(97) {
        std::fs::write(&cut_path, &bytes[..cut]).expect("write");
        let Ok(mut reader) = RecordingReader::open(&cut_path) else {
            // Cut inside the metadata frame: nothing to read, and open says so.
            continue;
        };
        let mut events = Vec::new();
        let error = loop {
            match reader.next_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break None,
                Err(error) => break Some(error),
            }
        };
        assert_eq!(events[..], sent[..events.len()], "a prefix, in order");
        assert!(
            events.len() >= last_count,
            "a longer file never reads fewer events"
        );
        assert_eq!(
            events.len() % 100,
            0,
            "whole frames: every flush is one frame"
        );
        last_count = events.len();
        // A cut exactly between two frames looks like a whole, shorter file; anywhere else
        // the reader says where the cut frame starts.
        if let Some(error) = error {
            assert_eq!(error.path, cut_path);
            assert!(error.offset <= cut as u64 && error.offset > 0, "{error}");
            assert!(error.to_string().contains("byte offset"), "{error}");
            cuts += 1;
        }
    }
    assert!(cuts > 10);
    // A flipped byte in the middle: events up to the damaged frame, then the error.
    let mut corrupt = bytes.clone();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 0xff;
    std::fs::write(&cut_path, &corrupt).expect("write");
    let (events, error) = read_all(&cut_path);
    let error = error.expect("a corrupt frame is reported");
    assert!(events.len() < sent.len());
    assert_eq!(events[..], sent[..events.len()]);
    assert!(error.offset <= middle as u64, "{error}");
}

/// Issue 33: what a reader says about a cut, a missing or a foreign file is for people: no Rust
/// debug forms (`Custom { kind: ... }`), no errno, no offset where there is none.
#[test]
fn a_cut_missing_or_foreign_file_is_named_in_words() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    for batch in 0..20 {
        let events: Vec<Event> = (0..100).map(|n| quote(0, 1, batch * 100 + n)).collect();
        recorder.record(&events);
        recorder.flush();
    }
    recorder.close();
    let path = files_in(dir.path()).remove(0);
    let bytes = std::fs::read(&path).expect("read");
    let rust_internals = ["Custom {", "kind:", "os error", "while decoding"];
    let cut_path = dir.path().join("cut.dbn.zst");
    std::fs::write(&cut_path, &bytes[..bytes.len() - 7]).expect("write");
    let (_, error) = read_all(&cut_path);
    let text = error.expect("a cut frame is damage").to_string();
    assert!(
        text.contains("the file ends inside a zstd frame") && text.contains("byte offset"),
        "{text}"
    );
    for internal in rust_internals {
        assert!(!text.contains(internal), "{internal:?} in {text}");
    }
    let missing = dir.path().join("missing.dbn.zst");
    let text = RecordingReader::open(&missing)
        .err()
        .expect("no file")
        .to_string();
    assert_eq!(
        text,
        format!("{}: cannot open: no such file", missing.display())
    );
    let foreign = dir.path().join("foreign.dbn.zst");
    std::fs::write(&foreign, b"not a recording at all").expect("write");
    let text = RecordingReader::open(&foreign)
        .err()
        .expect("not a recording")
        .to_string();
    assert!(text.contains("not a recording"), "{text}");
    assert!(!text.contains("byte offset"), "{text}");
    for internal in rust_internals {
        assert!(!text.contains(internal), "{internal:?} in {text}");
    }
}

/// A small tmpfs, unmounted when dropped.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    /// `None` (with the reason printed) where this process may not mount (not root).
    fn mount(path: PathBuf, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(&path).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            skip::skipped("cannot mount a tmpfs here (needs root) to fill a disk");
            return None;
        }
        Some(SmallDisk { path })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}

#[test]
fn a_full_disk_is_an_error_counted_retried_and_marked_as_a_gap() {
    let base = tempfile::tempdir().expect("a temporary directory");
    let Some(disk) = SmallDisk::mount(base.path().join("disk"), "1m") else {
        return;
    };
    // Fill it.
    let filler = disk.path.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).expect("create the filler");
        let chunk = vec![0x5a_u8; 64 << 10];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
    }
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(&disk.path), clock.clone());
    recorder.learn(&directory());
    let sent: Vec<Event> = (0..2000).map(|n| quote(0, 1, n * 7919)).collect();
    recorder.record(&sent[..1000]);
    recorder.flush();
    let full = recorder.stats();
    assert!(full.write_errors >= 1, "{full:?}");
    assert!(full.lost > 0, "{full:?}");
    // Space again; the retry opens a new file that starts with the loss.
    std::fs::remove_file(&filler).expect("remove the filler");
    clock.advance(2 * SECOND_NS);
    recorder.tick();
    recorder.record(&sent[1000..]);
    let stats = recorder.close();
    assert_eq!(stats.lost, full.lost, "nothing lost after the retry");
    let newest = files_in(&disk.path)
        .into_iter()
        .filter(|path| RecordingReader::open(path).is_ok())
        .filter_map(|path| {
            let (events, _) = read_all(&path);
            recorder_gap_lost(events.first()?).map(|lost| (lost, events))
        })
        .next()
        .expect("a file that starts with the gap");
    assert_eq!(newest.0, stats.lost, "the gap counts every lost event");
    assert_eq!(newest.1[1..], sent[1000..]);
    // Every event was either written or counted as lost.
    let written: usize = files_in(&disk.path)
        .iter()
        .filter(|path| path.file_name() != filler.file_name())
        .map(|path| match RecordingReader::open(path) {
            Ok(_) => read_all(path)
                .0
                .iter()
                .filter(|event| recorder_gap_lost(event).is_none())
                .count(),
            Err(_) => 0,
        })
        .sum();
    assert_eq!(written as u64 + stats.lost, sent.len() as u64);
}

#[test]
fn an_instrument_that_appears_later_is_recorded_at_once_and_mapped_by_the_next_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    recorder.record(&[quote(0, 1, 1)]);
    // Instrument 3 is published before the recorder has taken in its directory entry.
    recorder.record(&[quote(0, 3, 2)]);
    recorder.learn(&[entry(0, "binance-usdm", 3, "SOLUSDT")]);
    recorder.record(&[quote(0, 3, 3)]);
    recorder.tick();
    assert_eq!(
        recorder.stats().files_opened,
        1,
        "not within a second of opening"
    );
    clock.advance(SECOND_NS);
    recorder.tick();
    assert_eq!(
        recorder.stats().files_opened,
        2,
        "rotated to map the new instrument"
    );
    recorder.record(&[quote(0, 3, 4)]);
    recorder.close();
    let files = files_in(dir.path());
    assert_eq!(files.len(), 2);
    let (first, _) = read_all(&files[0]);
    assert_eq!(first, [quote(0, 1, 1), quote(0, 3, 2), quote(0, 3, 3)]);
    let mapped = |path: &Path| -> Vec<String> {
        let reader = RecordingReader::open(path).expect("opens");
        let mut symbols: Vec<String> = reader
            .metadata()
            .mappings
            .iter()
            .map(|mapping| mapping.raw_symbol.clone())
            .collect();
        symbols.sort();
        symbols
    };
    assert_eq!(mapped(&files[0]), ["BTCUSDT", "ETHUSDT"]);
    assert_eq!(mapped(&files[1]), ["BTCUSDT", "ETHUSDT", "SOLUSDT"]);
    assert_eq!(read_all(&files[1]).0, [quote(0, 3, 4)]);
}

#[test]
fn names_dbn_cannot_hold_are_fitted_not_allowed_to_fail_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(RecorderConfig::new(dir.path()), clock.clone());
    let long_venue = "a-venue-name-far-longer-than-sixteen";
    let long_symbol = "Ünïcødé-".repeat(12);
    recorder.learn(&[entry(4, long_venue, 9, &long_symbol)]);
    recorder.record(&[quote(4, 9, 1)]);
    let stats = recorder.close();
    assert_eq!((stats.write_errors, stats.lost, stats.events), (0, 0, 1));
    let files = files_in(dir.path());
    let reader = RecordingReader::open(&files[0]).expect("opens");
    assert_eq!(reader.metadata().dataset, "A-VENUE-NAME-FA");
    let symbol = &reader.metadata().mappings[0].raw_symbol;
    assert_eq!(symbol.len(), dbn::SYMBOL_CSTR_LEN - 1);
    assert!(symbol.starts_with("?n?c?d?-?n?c?d?-"), "{symbol}");
    assert_eq!(read_all(&files[0]).0, [quote(4, 9, 1)]);
}

#[test]
fn a_damaged_bus_is_a_gap_of_unknown_size_in_every_venue_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut recorder = Recorder::new(config(dir.path()), clock.clone());
    recorder.learn(&directory());
    recorder.record(&[quote(0, 1, 1), trade(1, 1, 2), quote(0, 2, 3)]);
    recorder.bus_damaged();
    let stats = recorder.close();
    assert_eq!((stats.bus_damaged, stats.gaps_written), (1, 2));
    for path in files_in(dir.path()) {
        let (events, _) = read_all(&path);
        let last = events.last().expect("events");
        match last.body() {
            Body::Gap(gap) => {
                assert_eq!(gap.reason(), GapReason::Unknown);
                assert_eq!((gap.expected_seq, gap.received_seq), (3, 3));
                assert_eq!(last.header.instrument_id, u32::MAX);
            }
            other => panic!("{other:?} is not the damage's gap"),
        }
    }
}

/// The `dbn_recording` fuzz target's seeds (fuzz/seeds/dbn_recording/): small recordings of
/// quotes, trades, a gap and several frames, as the recorder writes them. Under
/// `TICKWIRE_WRITE_SEEDS=1` this writes them; otherwise it checks that every committed seed still
/// reads back whole with today's reader, so the fuzzer starts from files it can go deep into.
#[test]
fn fuzz_seeds() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/dbn_recording");
    if std::env::var_os("TICKWIRE_WRITE_SEEDS").is_some() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
        let mut recorder = Recorder::new(config(dir.path()), clock.clone());
        recorder.learn(&directory());
        for n in 0..6 {
            recorder.record(&[quote(0, 1 + (n % 2) as u32, n), trade(1, 1, n)]);
            if n == 3 {
                recorder.overrun(7);
            }
            clock.advance(SECOND_NS);
            recorder.tick();
        }
        recorder.close();
        std::fs::create_dir_all(&seeds).expect("make the seeds folder");
        for file in files_in(dir.path()) {
            let venue =
                tickwire_record::venue_of_file_name(&file.file_name().unwrap().to_string_lossy())
                    .expect("a recording's name")
                    .to_owned();
            std::fs::copy(&file, seeds.join(venue)).expect("write a seed");
        }
    }
    if !seeds.is_dir() {
        skip::skipped(format_args!(
            "{} is not here (a checkout without fuzz/)",
            seeds.display()
        ));
        return;
    }
    let files = files_in(&seeds);
    assert!(files.len() >= 2, "{files:?}");
    for file in files {
        let (events, error) = read_all(&file);
        assert!(error.is_none(), "{}: {error:?}", file.display());
        assert!(
            events.len() >= 6,
            "{}: {} events",
            file.display(),
            events.len()
        );
    }
}

/// A file whose DBN prelude claims gigabytes of metadata is refused with an error that says so,
/// before the `dbn` decoder would allocate what the field claims (the `dbn_recording` fuzz
/// target found a 2.5 GB allocation from a 9-byte file).
#[test]
fn a_metadata_length_no_recording_has_is_refused_before_it_is_allocated() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (length, refused) in [
        (u32::MAX, true),
        (tickwire_record::MAX_METADATA_BYTES + 1, true),
        (tickwire_record::MAX_METADATA_BYTES, false),
    ] {
        let mut plain = b"DBN".to_vec();
        plain.push(dbn::DBN_VERSION);
        plain.extend_from_slice(&length.to_le_bytes());
        plain.extend_from_slice(&[0; 16]);
        let path = dir.path().join(format!("{length}.dbn.zst"));
        std::fs::write(&path, zstd::bulk::compress(&plain, 1).expect("compress")).expect("write");
        let error = RecordingReader::open(&path).err().expect("refused");
        assert_eq!(
            error.to_string().contains("more than a recording holds"),
            refused,
            "{length}: {error}"
        );
    }
}

/// A file in another DBN version than tickwire writes is refused at open, by name. The `dbn`
/// decoder would upgrade a v1 or v2 file record by record and panic on a record shorter than its
/// old struct: this is the `dbn_recording` fuzz target's input (a v1 file whose instrument
/// definition is 76 bytes, where v1's is 360), as found.
#[test]
fn a_file_in_another_dbn_version_is_refused_by_name_not_upgraded() {
    const FOUND: &str =
        "44424e01940000000000000000000000000000000000000000000000000400000000000000\
        000000000000000000000000f500000000000000000000000000000000000004000000000000000000000000\
        00000000000000f50000000000000000000000000000000000000000000000000000000000000000000000000\
        0000000000000002e2e2e2e2e2e2e2e262e2e2e2e2e2e2e2e2e2e2e2e2e131313131313131313131313131313\
        13131313131313131313131313131313131313131313131313131313131313131313131313131313131313131\
        3131313000000000000000000000000000000000000000000007a4600ea";
    let found: Vec<u8> = (0..FOUND.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&FOUND[at..at + 2], 16).expect("hex"))
        .collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    for version in [1u8, 2, dbn::DBN_VERSION + 1] {
        let mut plain = found.clone();
        plain[3] = version;
        let path = dir.path().join(format!("v{version}.dbn.zst"));
        std::fs::write(&path, zstd::bulk::compress(&plain, 1).expect("compress")).expect("write");
        let error = RecordingReader::open(&path).err().expect("refused");
        assert!(
            error
                .to_string()
                .contains(&format!("DBN version {version} (tickwire records")),
            "{error}"
        );
    }
}

/// DBN metadata and records sit on an 8-byte grid; a record of an odd number of 4-byte words,
/// or metadata whose length breaks the grid, is damage named as such, where `dbn` 0.73 would
/// panic on the misaligned record after it (found by the `dbn_recording` fuzz target).
#[test]
fn records_off_the_eight_byte_grid_are_damage_not_a_panic() {
    use dbn::encode::dbn::MetadataEncoder;
    let metadata = dbn::Metadata::builder()
        .dataset("TEST".to_owned())
        .schema(None)
        .start(0)
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .build();
    let mut header = Vec::new();
    MetadataEncoder::new(&mut header)
        .encode(&metadata)
        .expect("metadata");
    assert_eq!(header.len() % 8, 0, "DBN pads its metadata to 8 bytes");
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A 20-byte record (5 words of 4 bytes), then a whole one behind it.
    let mut odd_record = header.clone();
    odd_record.extend_from_slice(&[5, dbn::rtype::MBO]);
    odd_record.extend_from_slice(&[0; 18]);
    odd_record.extend_from_slice(&[4, dbn::rtype::MBO]);
    odd_record.extend_from_slice(&[0; 14]);
    // Metadata 4 bytes longer than a whole number of words.
    let mut odd_metadata = header.clone();
    let length = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) + 4;
    odd_metadata[4..8].copy_from_slice(&length.to_le_bytes());
    odd_metadata.extend_from_slice(&[0; 4]);
    odd_metadata.extend_from_slice(&[4, dbn::rtype::MBO]);
    odd_metadata.extend_from_slice(&[0; 14]);
    for (name, plain, what) in [
        ("odd-record", odd_record, "a record of 20 bytes"),
        (
            "odd-metadata",
            odd_metadata,
            "not a whole number of 8-byte words",
        ),
    ] {
        let path = dir.path().join(format!("{name}.dbn.zst"));
        std::fs::write(&path, zstd::bulk::compress(&plain, 1).expect("compress")).expect("write");
        let error = match RecordingReader::open(&path) {
            Err(error) => error,
            Ok(mut reader) => reader.next_event().expect_err("damage"),
        };
        assert!(error.to_string().contains(what), "{name}: {error}");
    }
}

fn snapshot_marker(venue_id: u16, instrument_id: u32, kind: EventKind, n: u64) -> Event {
    use tickwire_bus::event::Snapshot;
    let body = match kind {
        EventKind::SnapshotBegin => Body::SnapshotBegin(Snapshot::default()),
        _ => Body::SnapshotEnd(Snapshot::default()),
    };
    Event::new(
        EventHeader {
            exchange_ts_ns: BEFORE_MIDNIGHT_NS + n,
            recv_ts_ns: BEFORE_MIDNIGHT_NS + n * 10,
            venue_seq: n,
            instrument_id,
            venue_id,
            kind,
            flags: 0,
        },
        body,
    )
}

/// A whole (empty) snapshot of one book.
fn snapshot(venue_id: u16, instrument_id: u32, n: u64) -> [Event; 2] {
    [
        snapshot_marker(venue_id, instrument_id, EventKind::SnapshotBegin, n),
        snapshot_marker(venue_id, instrument_id, EventKind::SnapshotEnd, n + 1),
    ]
}

const ALL: u32 = tickwire_record::recorder::ALL_INSTRUMENTS;

#[test]
fn every_file_asks_for_the_books_it_lacks_at_open_rotation_and_after_an_overrun_with_back_off() {
    use tickwire_record::recorder::{BOOK_FOLLOW_UP, BOOK_FOLLOW_UP_MAX};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clock = FakeClock::at(BEFORE_MIDNIGHT_NS - 3600 * SECOND_NS);
    let mut config = config(dir.path());
    config.max_file_bytes = Some(4096);
    config.max_frame_bytes = 8192;
    let mut recorder = Recorder::new(config, clock.clone());
    // One venue, two instruments.
    recorder.learn(&directory()[..2]);
    let follow_up = BOOK_FOLLOW_UP.as_nanos() as u64;

    // Nothing recorded, no file: nothing to ask for.
    assert_eq!(recorder.books_to_request(), []);
    // A file opens (a recorder that attached to a running appliance: deltas, no snapshot): every
    // book of its venue is asked for at once, and not again before the follow-up.
    recorder.record(&[quote(0, 1, 1)]);
    assert_eq!(recorder.books_to_request(), [(0, ALL)]);
    clock.advance(follow_up / 2);
    assert_eq!(recorder.books_to_request(), []);
    // One book came whole; the other is asked for alone at the follow-up.
    recorder.record(&snapshot(0, 1, 2));
    clock.advance(follow_up);
    assert_eq!(recorder.books_to_request(), [(0, 2)]);
    recorder.record(&snapshot(0, 2, 4));
    clock.advance(BOOK_FOLLOW_UP_MAX.as_nanos() as u64);
    assert_eq!(recorder.books_to_request(), [], "the file has every book");

    // An overrun: every book is lost and asked for again, then the missing ones at waits that
    // double (a lapped reader backs off), never at two requests in one follow-up.
    recorder.overrun(10);
    clock.advance(follow_up);
    assert_eq!(recorder.books_to_request(), [(0, ALL)]);
    let mut waits = Vec::new();
    let mut since = 0;
    for _ in 0..(4 * BOOK_FOLLOW_UP_MAX.as_millis() as u64 / 10) {
        clock.advance(10_000_000);
        since += 10_000_000;
        let asked = recorder.books_to_request();
        if !asked.is_empty() {
            assert_eq!(asked, [(0, ALL)]);
            waits.push(since);
            since = 0;
        }
    }
    assert!(waits.len() >= 3, "{waits:?}");
    assert!(
        waits.windows(2).all(|pair| pair[1] >= pair[0]),
        "waits never shrink: {waits:?}"
    );
    assert!(waits[1] >= 2 * follow_up, "{waits:?}");
    assert!(
        waits
            .iter()
            .all(|&wait| wait <= BOOK_FOLLOW_UP_MAX.as_nanos() as u64 + 50_000_000),
        "{waits:?}"
    );

    // A gap for every instrument of the venue unbooks the file too.
    recorder.record(&snapshot(0, 1, 10));
    recorder.record(&snapshot(0, 2, 12));
    clock.advance(BOOK_FOLLOW_UP_MAX.as_nanos() as u64);
    assert_eq!(recorder.books_to_request(), []);

    // Rotation by size: the new file holds no book and asks for every one at once.
    let before = recorder.open_files();
    let mut n = 100;
    while recorder.open_files() == before {
        let batch: Vec<Event> = (0..500).map(|i| quote(0, 1, (n + i) * 7919)).collect();
        recorder.record(&batch);
        n += 500;
    }
    assert_eq!(recorder.books_to_request(), [(0, ALL)]);
    let stats = recorder.close();
    assert!(stats.book_requests >= 6, "{stats:?}");
}
