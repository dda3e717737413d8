//! The C header (`clients/c/tickwire_bus.h`) and the Python package (`clients/python`) read the
//! same bus as the Rust reader, field for field.
//!
//! A [`BusWriter`] fills a bus in a temporary folder with a few thousand events of every kind
//! (random fields, extreme prices, unknown enum bytes) and a directory; then `dump.c` (built with
//! `cc`) and `dump.py` print every event in one canonical text line each, which must equal what
//! [`BusReader`] reads, printed here ([`canonical`]). The C example `tail.c` must print exactly
//! the JSON lines of `tickwire_bus::event::json::write_event`. Also: a lapped reader's exact
//! missed count, a bus of another layout version (and files that are no bus) refused with a
//! clear error, snapshot requests' bytes, and the Python `Books` against an oracle of the rules.
//!
//! A missing `cc` or numpy skips with a printed reason, unless
//! `TICKWIRE_REQUIRE_BUS_CLIENTS=1` (set by `.ci/run`), which makes it a failure.

mod restart;

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use tickwire_bus::event::{
    Bar, Body, BookLevel, Event, EventHeader, EventKind, Gap, GapReason, Imbalance, Liquidation,
    Quote, Reference, Side, Snapshot, Statistic, Trade, TradingStatus, VenueStatus,
};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{
    request_socket_path, BusError, BusOptions, BusReader, BusWriter, DirectoryEntry, Geometry,
    SnapshotRequest, Start,
};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether a tool this test needs is here; prints why the test skips, or fails under
/// `TICKWIRE_REQUIRE_BUS_CLIENTS=1`.
fn available(what: &str, probe: &mut Command, install: &str) -> bool {
    let ok = probe
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required =
            std::env::var("TICKWIRE_REQUIRE_BUS_CLIENTS").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_BUS_CLIENTS=1 but {what} is missing ({install})"
        );
        crate::support::skip::skipped(format_args!("{what} is not installed ({install})"));
    }
    ok
}

pub(crate) fn cc_available() -> bool {
    available(
        "a C compiler (cc)",
        Command::new("cc").arg("--version"),
        "apt-get install -y gcc",
    )
}

fn numpy_available() -> bool {
    available(
        "python3 with numpy",
        Command::new("python3").args(["-c", "import numpy"]),
        "pip install numpy",
    )
}

/// Builds a C program of the bus clients with warnings as errors; returns the binary.
pub(crate) fn build_c(source: &Path, dir: &Path) -> PathBuf {
    build_c_with(source, &root().join("clients/c"), dir)
}

/// [`build_c`] with `tickwire_bus.h` taken from `include`.
fn build_c_with(source: &Path, include: &Path, dir: &Path) -> PathBuf {
    let binary = dir.join(source.file_stem().unwrap());
    let output = Command::new("cc")
        .args([
            "-std=c11",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-I",
        ])
        .arg(include)
        .arg("-o")
        .arg(&binary)
        .arg(source)
        .output()
        .expect("run cc");
    assert!(
        output.status.success(),
        "cc {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run a bus client")
}

fn python(args: &[&str]) -> Output {
    run(Command::new("python3")
        .arg(root().join("tests/bus_clients/dump.py"))
        .args(args)
        .env("PYTHONPATH", root().join("clients/python"))
        .env("PYTHONIOENCODING", "utf-8"))
}

fn stdout_of(output: &Output, who: &str) -> String {
    assert!(
        output.status.success(),
        "{who} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

/// Compares two dumps line by line, so that a failure shows the first line that differs.
fn assert_same(expected: &str, actual: &str, who: &str) {
    let expected: Vec<&str> = expected.lines().collect();
    let actual: Vec<&str> = actual.lines().collect();
    for (index, (want, got)) in expected.iter().zip(&actual).enumerate() {
        assert_eq!(got, want, "{who}: line {index} differs");
    }
    assert_eq!(actual.len(), expected.len(), "{who}: line count");
}

/// A deterministic generator (xorshift64*), so that a failure reproduces.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    /// A price or size: mostly ordinary, sometimes the extremes and the "no price" value.
    fn fixed(&mut self) -> Fixed {
        match self.below(10) {
            0 => Fixed(i64::MAX),
            1 => Fixed(i64::MIN),
            2 => Fixed(0),
            3 => Fixed(-(self.below(1_000_000_000_000) as i64)),
            _ => Fixed(self.below(100_000 * 1_000_000_000) as i64),
        }
    }

    /// A small book price, so that levels of one book meet again.
    fn level_price(&mut self) -> Fixed {
        Fixed((100 + self.below(8) as i64) * 1_000_000_000 / 4)
    }
}

/// Event `position` of the test stream: every kind, random fields, books that change.
fn event_at(random: &mut Random, position: u64) -> Event {
    let kind = match random.below(17) {
        index @ 0..=12 => EventKind::ALL[index as usize],
        _ => EventKind::BookLevel,
    };
    let venue_id = random.below(3) as u16;
    let instrument_id = match (kind, random.below(20)) {
        (EventKind::Gap, 0..=3) => u32::MAX,
        (EventKind::VenueStatus, 0..=9) => 0,
        (_, 0) => 99,
        (_, pick) => 1 + (pick % 5) as u32,
    };
    let header = EventHeader {
        exchange_ts_ns: random.next(),
        recv_ts_ns: random.next(),
        venue_seq: position,
        instrument_id,
        venue_id,
        kind,
        flags: random.below(256) as u8,
    };
    let byte = |random: &mut Random| random.below(256) as u8;
    let body = match kind {
        EventKind::Quote => Body::Quote(Quote {
            bid_px: random.fixed(),
            bid_sz: random.fixed(),
            ask_px: random.fixed(),
            ask_sz: random.fixed(),
        }),
        EventKind::Trade => Body::Trade(Trade {
            price: random.fixed(),
            size: random.fixed(),
            trade_id: random.next(),
            aggressor_side: random.below(4) as u8,
            _reserved: [0; 7],
        }),
        EventKind::BookLevel => Body::BookLevel(BookLevel {
            price: random.level_price(),
            size: if random.below(4) == 0 {
                Fixed(0)
            } else {
                Fixed(random.below(10_000_000_000) as i64)
            },
            side: [1, 1, 2, 2, 0, 3][random.below(6) as usize],
            _reserved: [0; 15],
        }),
        EventKind::SnapshotBegin | EventKind::SnapshotEnd => {
            let snapshot = Snapshot {
                bid_levels: random.next() as u32,
                ask_levels: random.next() as u32,
                snapshot_id: random.next(),
                _reserved: [0; 2],
            };
            if kind == EventKind::SnapshotBegin {
                Body::SnapshotBegin(snapshot)
            } else {
                Body::SnapshotEnd(snapshot)
            }
        }
        EventKind::Gap => Body::Gap(Gap {
            expected_seq: random.next(),
            received_seq: random.next(),
            reason: random.below(6) as u8,
            _reserved: [0; 15],
        }),
        EventKind::VenueStatus => Body::VenueStatus(VenueStatus {
            state: random.below(7) as u8,
            reason_code: random.next() as u32,
            detail: random.next(),
            ..VenueStatus::default()
        }),
        EventKind::Reference => Body::Reference(Reference {
            price: random.fixed(),
            kind: random.below(4) as u8,
            ..Reference::default()
        }),
        EventKind::Bar => Body::Bar(Bar {
            open: random.fixed(),
            high: random.fixed(),
            low: random.fixed(),
            close: random.fixed(),
        }),
        EventKind::TradingStatus => Body::TradingStatus(TradingStatus {
            action: random.next() as u16,
            reason: random.next() as u16,
            trading_event: random.next() as u16,
            is_trading: [b'Y', b'N', b'~', 0][random.below(4) as usize],
            is_quoting: byte(random),
            is_short_sell_restricted: byte(random),
            _reserved: [0; 23],
        }),
        EventKind::Imbalance => Body::Imbalance(Imbalance {
            ref_price: random.fixed(),
            cont_book_clr_price: random.fixed(),
            paired_qty: random.next() as u32,
            total_imbalance_qty: random.next() as u32,
            side: random.below(4) as u8,
            auction_type: byte(random),
            significant_imbalance: byte(random),
            unpaired_side: random.below(4) as u8,
            auction_status: byte(random),
            freeze_status: byte(random),
            num_extensions: byte(random),
            _reserved: 0,
        }),
        EventKind::Statistic => Body::Statistic(Statistic {
            price: random.fixed(),
            quantity: if random.below(3) == 0 {
                Statistic::NO_QUANTITY
            } else {
                random.next() as i64
            },
            ts_ref: random.next(),
            stat_type: random.next() as u16,
            channel_id: random.next() as u16,
            update_action: byte(random),
            stat_flags: byte(random),
            _reserved: [0; 2],
        }),
        EventKind::Liquidation => Body::Liquidation(Liquidation {
            price: random.fixed(),
            size: random.fixed(),
            position_side: random.below(4) as u8,
            _reserved: [0; 15],
        }),
    };
    Event::new(header, body)
}

/// The directory of the test bus: most instruments of venues 0..3, a later entry that renames
/// one, names cut to their field (one in the middle of a character), a name that fills its field.
fn directory() -> Vec<DirectoryEntry> {
    let mut entries = Vec::new();
    for venue_id in 0..3u16 {
        for instrument_id in 1..=5u32 {
            if (venue_id, instrument_id) == (2, 5) {
                continue;
            }
            entries.push(DirectoryEntry {
                instrument_id,
                venue_id,
                venue: ["binance-usdm", "thalex", "databento-glbx"][venue_id as usize].into(),
                symbol: format!("SYM{venue_id}{instrument_id}"),
                venue_symbol: format!("sym{venue_id}{instrument_id}"),
            });
        }
    }
    entries.push(DirectoryEntry {
        instrument_id: 1,
        venue_id: 0,
        venue: "binance-usdm".into(),
        symbol: "BTCUSDT".into(),
        venue_symbol: "btcusdt".into(),
    });
    entries.push(DirectoryEntry {
        instrument_id: 2,
        venue_id: 1,
        venue: "v".repeat(32),
        symbol: "é".repeat(60),
        venue_symbol: "x".repeat(200),
    });
    entries
}

/// A new bus at `path` with the test directory.
fn create_bus(path: &Path, capacity: u64) -> BusWriter {
    let options = BusOptions {
        path: path.to_owned(),
        geometry: Geometry::new(capacity, 64).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, 0x5eed_0000_0001, 1_700_000_000_000_000_000)
        .expect("create the bus");
    for entry in directory() {
        writer.add_instrument(&entry).unwrap();
    }
    writer
}

/// Writes the test stream's first `total` events, publishing every few.
fn fill(writer: &mut BusWriter, total: u64) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    for position in 0..total {
        writer.write(&event_at(&mut random, position));
        if position % 7 == 6 {
            writer.publish();
        }
    }
    writer.publish();
}

/// Writes `total` events into a new bus at `path` and closes it.
fn write_bus(path: &Path, capacity: u64, total: u64) {
    let mut writer = create_bus(path, capacity);
    fill(&mut writer, total);
    drop(writer);
}

/// One event as the canonical line of `dump.c` and `dump.py`.
fn canonical(position: u64, event: &Event, names: &BTreeMap<(u16, u32), DirectoryEntry>) -> String {
    let header = &event.header;
    let symbol = names
        .get(&(header.venue_id, header.instrument_id))
        .map_or("-", |entry| entry.symbol.as_str());
    let mut line = format!(
        "{position} {} v={} i={} f={} ex={} rx={} seq={} sym={symbol} |",
        header.kind.name(),
        header.venue_id,
        header.instrument_id,
        header.flags,
        header.exchange_ts_ns,
        header.recv_ts_ns,
        header.venue_seq
    );
    let fields: Vec<(&str, String)> = match event.body() {
        Body::Quote(quote) => vec![
            ("bid_px", quote.bid_px.to_string()),
            ("bid_sz", quote.bid_sz.to_string()),
            ("ask_px", quote.ask_px.to_string()),
            ("ask_sz", quote.ask_sz.to_string()),
        ],
        Body::Trade(trade) => vec![
            ("price", trade.price.to_string()),
            ("size", trade.size.to_string()),
            ("trade_id", trade.trade_id.to_string()),
            ("aggressor", trade.aggressor_side.to_string()),
        ],
        Body::BookLevel(level) => vec![
            ("side", level.side.to_string()),
            ("price", level.price.to_string()),
            ("size", level.size.to_string()),
        ],
        Body::SnapshotBegin(snapshot) | Body::SnapshotEnd(snapshot) => vec![
            ("bid_levels", snapshot.bid_levels.to_string()),
            ("ask_levels", snapshot.ask_levels.to_string()),
            ("snapshot_id", snapshot.snapshot_id.to_string()),
        ],
        Body::Gap(gap) => vec![
            ("expected", gap.expected_seq.to_string()),
            ("received", gap.received_seq.to_string()),
            ("reason", gap.reason.to_string()),
        ],
        Body::VenueStatus(status) => vec![
            ("state", status.state.to_string()),
            ("reason_code", status.reason_code.to_string()),
            ("detail", status.detail.to_string()),
        ],
        Body::Reference(reference) => vec![
            ("price", reference.price.to_string()),
            ("kind", reference.kind.to_string()),
        ],
        Body::Bar(bar) => vec![
            ("open", bar.open.to_string()),
            ("high", bar.high.to_string()),
            ("low", bar.low.to_string()),
            ("close", bar.close.to_string()),
        ],
        Body::TradingStatus(status) => vec![
            ("action", status.action.to_string()),
            ("reason", status.reason.to_string()),
            ("trading_event", status.trading_event.to_string()),
            ("is_trading", status.is_trading.to_string()),
            ("is_quoting", status.is_quoting.to_string()),
            ("ssr", status.is_short_sell_restricted.to_string()),
        ],
        Body::Imbalance(imbalance) => vec![
            ("ref_price", imbalance.ref_price.to_string()),
            (
                "cont_book_clr_price",
                imbalance.cont_book_clr_price.to_string(),
            ),
            ("paired_qty", imbalance.paired_qty.to_string()),
            (
                "total_imbalance_qty",
                imbalance.total_imbalance_qty.to_string(),
            ),
            ("side", imbalance.side.to_string()),
            ("auction_type", imbalance.auction_type.to_string()),
            (
                "significant_imbalance",
                imbalance.significant_imbalance.to_string(),
            ),
            ("unpaired_side", imbalance.unpaired_side.to_string()),
            ("auction_status", imbalance.auction_status.to_string()),
            ("freeze_status", imbalance.freeze_status.to_string()),
            ("num_extensions", imbalance.num_extensions.to_string()),
        ],
        Body::Statistic(statistic) => vec![
            ("price", statistic.price.to_string()),
            ("quantity", statistic.quantity.to_string()),
            ("ts_ref", statistic.ts_ref.to_string()),
            ("stat_type", statistic.stat_type.to_string()),
            ("channel_id", statistic.channel_id.to_string()),
            ("update_action", statistic.update_action.to_string()),
            ("stat_flags", statistic.stat_flags.to_string()),
        ],
        Body::Liquidation(liquidation) => vec![
            ("price", liquidation.price.to_string()),
            ("size", liquidation.size.to_string()),
            ("position_side", liquidation.position_side.to_string()),
        ],
    };
    for (label, value) in fields {
        line.push_str(&format!(" {label}={value}"));
    }
    line.push_str(" | raw=");
    for word in event.payload_words() {
        line.push_str(&format!("{word:016x}"));
    }
    line
}

/// Reads every event `reader` can still read, in batches of 256, as the canonical dump.
fn rust_dump(reader: &mut BusReader) -> String {
    let mut out = format!(
        "open capacity={} epoch={} cursor={} closed={}\n",
        reader.capacity(),
        reader.epoch(),
        reader.cursor(),
        u8::from(reader.is_closed())
    );
    let entries = reader.directory();
    let mut names = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        out.push_str(&format!(
            "dir {index} v={} i={} venue={} symbol={} venue_symbol={}\n",
            entry.venue_id, entry.instrument_id, entry.venue, entry.symbol, entry.venue_symbol
        ));
        names.insert((entry.venue_id, entry.instrument_id), entry.clone());
    }
    let mut events = vec![Event::new(blank_header(), Body::Quote(Quote::default())); 256];
    // A bus of several partitions: each event's position is its partition's, named first.
    let several = reader.partitions() > 1;
    loop {
        let batch = reader.read(&mut events).expect("the Rust reader reads");
        if batch.missed > 0 && several {
            out.push_str(&format!(
                "missed {} partition={}\n",
                batch.missed, batch.partition
            ));
        } else if batch.missed > 0 {
            out.push_str(&format!("missed {}\n", batch.missed));
        }
        if batch.count == 0 && batch.missed == 0 {
            break;
        }
        let first = reader.positions()[batch.partition as usize] - batch.count as u64;
        for (index, event) in events[..batch.count].iter().enumerate() {
            if several {
                out.push_str(&format!("{}:", batch.partition));
            }
            out.push_str(&canonical(first + index as u64, event, &names));
            out.push('\n');
        }
    }
    let positions: Vec<String> = reader.positions().iter().map(u64::to_string).collect();
    out.push_str(&format!("end position={}\n", positions.join(",")));
    out
}

fn blank_header() -> EventHeader {
    EventHeader {
        exchange_ts_ns: 0,
        recv_ts_ns: 0,
        venue_seq: 0,
        instrument_id: 0,
        venue_id: 0,
        kind: EventKind::Quote,
        flags: 0,
    }
}

/// What `tail.c` must print: the decode format's lines, named as tail.c documents.
fn expected_tail(path: &Path) -> Vec<u8> {
    let mut reader = BusReader::open(path, Start::Oldest, 256).unwrap();
    let entries = reader.directory();
    let mut out = Vec::new();
    let mut events = vec![Event::new(blank_header(), Body::Quote(Quote::default())); 256];
    loop {
        let batch = reader.read(&mut events).unwrap();
        if batch.count == 0 && batch.missed == 0 {
            break;
        }
        for event in &events[..batch.count] {
            let header = &event.header;
            let exact = entries.iter().rev().find(|entry| {
                entry.venue_id == header.venue_id && entry.instrument_id == header.instrument_id
            });
            let venue = exact
                .or_else(|| {
                    entries
                        .iter()
                        .rev()
                        .find(|entry| entry.venue_id == header.venue_id)
                })
                .map_or_else(
                    || format!("venue-{}", header.venue_id),
                    |entry| entry.venue.clone(),
                );
            let symbol = match exact {
                Some(entry) => entry.symbol.clone(),
                None if header.instrument_id == 0 || header.instrument_id == u32::MAX => "*".into(),
                None => header.instrument_id.to_string(),
            };
            tickwire_bus::event::json::write_event(&mut out, &venue, symbol.as_bytes(), event);
        }
    }
    out
}

const TOTAL: u64 = 3000;

#[test]
fn c_and_python_read_every_field_of_every_event_as_rust_does() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    write_bus(&bus, 4096, TOTAL);
    let mut reader = BusReader::open(&bus, Start::Oldest, 256).unwrap();
    let expected = rust_dump(&mut reader);
    assert_eq!(reader.position(), TOTAL);
    for kind in EventKind::ALL {
        assert!(
            expected.contains(&format!(" {} v=", kind.name())),
            "the stream holds a {kind:?}"
        );
    }
    let bus_arg = bus.to_str().unwrap();
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        assert_same(
            &expected,
            &stdout_of(&run(Command::new(&dump).arg(&bus)), "dump.c"),
            "C",
        );
        // A batch of one and a batch that wraps unevenly read the same.
        for batch in ["1", "100"] {
            let output = run(Command::new(&dump).args(["--batch", batch]).arg(&bus));
            assert_same(
                &expected,
                &stdout_of(&output, "dump.c"),
                "C, another batch size",
            );
        }
        let tail = build_c(&root().join("clients/c/example/tail.c"), dir.path());
        let output = run(Command::new(&tail)
            .args(["--oldest", "--until-closed"])
            .arg(&bus));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let want = expected_tail(&bus);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&want),
            "tail.c prints the decode format's lines"
        );
        assert_eq!(output.stdout, want, "byte for byte");
        assert_eq!(
            want.iter().filter(|&&byte| byte == b'\n').count() as u64,
            TOTAL
        );
    }
    if numpy_available() {
        assert_same(
            &expected,
            &stdout_of(&python(&[bus_arg]), "dump.py"),
            "Python",
        );
        let output = python(&["--batch", "100", bus_arg]);
        assert_same(
            &expected,
            &stdout_of(&output, "dump.py"),
            "Python, batch 100",
        );
    }
}

#[test]
fn a_lapped_reader_misses_exactly_what_the_claim_says_in_every_language() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    let capacity = 1024;
    let total = 5000;
    // A Rust reader at position 0 while the writer laps it five times over.
    let mut writer = create_bus(&bus, capacity);
    let mut early = BusReader::open(&bus, Start::Latest, 256).unwrap();
    assert_eq!(early.position(), 0);
    fill(&mut writer, total);
    drop(writer);
    // The claim word (layout.rs: offset 128) says which positions the writer may have reused.
    let bytes = std::fs::read(&bus).unwrap();
    let claim = u64::from_le_bytes(bytes[128..136].try_into().unwrap());
    assert!(
        claim >= total && claim - capacity > total - capacity,
        "claim {claim}"
    );
    let lost = claim - capacity;
    let mut events = vec![Event::new(blank_header(), Body::Quote(Quote::default())); 256];
    let mut missed_lines = Vec::new();
    let mut read = 0u64;
    loop {
        let before = early.position();
        let batch = early.read(&mut events).unwrap();
        if batch.count == 0 && batch.missed == 0 {
            break;
        }
        if batch.missed > 0 {
            missed_lines.push(format!("missed {}", batch.missed));
        }
        for (index, event) in events[..batch.count].iter().enumerate() {
            let position = before + batch.missed + index as u64;
            assert_eq!(
                event.header.venue_seq, position,
                "event {position} is its own"
            );
            read += 1;
        }
    }
    assert_eq!(
        missed_lines,
        vec![format!("missed {lost}")],
        "Rust: one exact overrun"
    );
    assert_eq!(read + lost, total);
    let check = |output: &str, who: &str| {
        let overruns: Vec<&str> = output
            .lines()
            .filter(|line| line.starts_with("missed"))
            .collect();
        assert_eq!(overruns, missed_lines, "{who}: the overrun");
        let kept: Vec<&str> = output
            .lines()
            .filter(|line| line.contains(" | raw="))
            .collect();
        assert_eq!(
            kept.len() as u64,
            total - lost,
            "{who}: the events after it"
        );
        for (index, line) in kept.iter().enumerate() {
            let position = lost + index as u64;
            assert!(
                line.starts_with(&format!("{position} "))
                    && line.contains(&format!(" seq={position} ")),
                "{who}: event {position} is its own: {line}"
            );
        }
        assert!(
            output.ends_with(&format!("end position={total}\n")),
            "{who}"
        );
    };
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        let output = run(Command::new(&dump).args(["--from", "0"]).arg(&bus));
        check(&stdout_of(&output, "dump.c"), "C");
    }
    if numpy_available() {
        let output = python(&["--from", "0", bus.to_str().unwrap()]);
        check(&stdout_of(&output, "dump.py"), "Python");
    }
}

#[test]
fn c_and_python_merge_partitions_and_count_one_partitions_overrun_as_rust_does() {
    // Two partitions (two decoders): venues 0 and 2 on partition 0, venue 1 on partition 1, as
    // an appliance assigns whole venues to decoders. Partition 0 gets about 1600 of the 2400
    // events in a ring of 1024 (lapped); partition 1 about 800 (kept whole: below the ring less
    // the 64 positions the writer claims ahead).
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    let mut writers = two_partitions(&bus, 0x5eed_0000_0002);
    for entry in directory() {
        writers[0].add_instrument(&entry).unwrap();
    }
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    let mut written = [Vec::new(), Vec::new()];
    for position in 0..2400 {
        let event = event_at(&mut random, position);
        let k = usize::from(event.header.venue_id == 1);
        writers[k].write(&event);
        written[k].push(position);
        if position % 7 == 6 {
            writers[k].publish();
        }
    }
    drop(writers);
    assert!(
        written[0].len() > 1024 + 100 && written[1].len() < 1024 - 64,
        "{} and {}",
        written[0].len(),
        written[1].len()
    );
    let mut reader = BusReader::open(&bus, Start::Oldest, 256).unwrap();
    reader.seek(&[0]);
    let expected = rust_dump(&mut reader);
    // Every event of partition 1 once, in order; partition 0's loss exact and reported once.
    let mut seen = [Vec::new(), Vec::new()];
    let mut missed = [0u64; 2];
    for line in expected.lines() {
        if let Some(rest) = line.strip_prefix("missed ") {
            let (count, partition) = rest.split_once(" partition=").unwrap();
            missed[partition.parse::<usize>().unwrap()] += count.parse::<u64>().unwrap();
        } else if let Some((k, rest)) = line.split_once(':').filter(|_| line.contains(" seq=")) {
            let seq = rest
                .split(" seq=")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            seen[k.parse::<usize>().unwrap()].push(seq.parse::<u64>().unwrap());
        }
    }
    assert_eq!(missed[1], 0);
    assert_eq!(
        seen[1], written[1],
        "partition 1: every event once, in order"
    );
    assert!(missed[0] > 0, "partition 0 was lapped");
    assert_eq!(
        seen[0],
        written[0][missed[0] as usize..],
        "partition 0: the loss is exact, the rest whole and in order"
    );
    assert_eq!(expected.matches("missed ").count(), 1, "one overrun");
    assert!(expected.ends_with(&format!(
        "end position={},{}\n",
        written[0].len(),
        written[1].len()
    )));
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        let output = run(Command::new(&dump).args(["--from", "0"]).arg(&bus));
        assert_same(
            &expected,
            &stdout_of(&output, "dump.c"),
            "C, two partitions",
        );
    }
    if numpy_available() {
        let output = python(&["--from", "0", bus.to_str().unwrap()]);
        assert_same(
            &expected,
            &stdout_of(&output, "dump.py"),
            "Python, two partitions",
        );
    }
}

#[test]
fn another_layout_version_and_files_that_are_no_bus_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("bus");
    write_bus(&good, 1024, 10);
    let mut bytes = std::fs::read(&good).unwrap();
    // A bus of layout version 2 (one ring, before partitions); the readers read version 3.
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let version_2 = dir.path().join("bus-v2");
    std::fs::write(&version_2, &bytes).unwrap();
    let not_a_bus = dir.path().join("notes.txt");
    std::fs::write(&not_a_bus, "these are not the bytes of a bus\n".repeat(200)).unwrap();
    let short = dir.path().join("bus-short");
    std::fs::write(&short, &std::fs::read(&good).unwrap()[..8192]).unwrap();
    let missing = dir.path().join("nothing-here");
    // A FIFO: refused at once, without hanging the reader in open(2).
    let fifo = dir.path().join("fifo");
    let c_fifo = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o644) }, 0);
    let cases: [(&Path, &str); 5] = [
        (
            &fifo,
            "is not a tickwire bus: it is a FIFO, not a regular file",
        ),
        (
            &version_2,
            "has layout version 2; this reader reads version 3",
        ),
        (&not_a_bus, "is not a tickwire bus (no TICKWBUS magic)"),
        (&short, "is damaged: 8192 bytes, shorter than the"),
        (&missing, "no bus at"),
    ];
    // The Rust reader's words are the reference the others follow.
    for (path, message) in cases {
        let error = BusReader::open(path, Start::Oldest, 16)
            .err()
            .expect("refused");
        assert!(error.to_string().contains(message), "Rust: {error}");
        if path == version_2 {
            assert!(matches!(
                error,
                BusError::LayoutVersion {
                    found: 2,
                    supported: 3,
                    ..
                }
            ));
        }
    }
    let check = |output: Output, path: &Path, message: &str, who: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{who} {}: {stderr}",
            path.display()
        );
        assert!(output.stdout.is_empty(), "{who}: nothing read");
        assert!(
            stderr.contains(message) && stderr.contains(path.to_str().unwrap()),
            "{who} says {message:?} naming the file: {stderr}"
        );
        assert_eq!(
            stderr.lines().count(),
            1,
            "{who}: one line, no traceback: {stderr}"
        );
    };
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        let tail = build_c(&root().join("clients/c/example/tail.c"), dir.path());
        for (path, message) in cases {
            check(run(Command::new(&dump).arg(path)), path, message, "dump.c");
            check(run(Command::new(&tail).arg(path)), path, message, "tail.c");
        }
    }
    if numpy_available() {
        for (path, message) in cases {
            check(python(&[path.to_str().unwrap()]), path, message, "dump.py");
        }
        // The exception itself, for Python users: its class and fields.
        let output = run(Command::new("python3")
            .args([
                "-c",
                "import sys, tickwire_bus as tw\n\
                 try:\n    tw.Bus(sys.argv[1])\n\
                 except tw.LayoutVersionMismatch as e:\n    print(e.found, e.supported)",
            ])
            .arg(&version_2)
            .env("PYTHONPATH", root().join("clients/python")));
        assert_eq!(stdout_of(&output, "python3"), "2 3\n");
    }
}

#[test]
fn c_and_python_readers_built_for_layout_2_refuse_a_bus_of_layout_3_naming_both() {
    // Readers as they were before partitions: the C header and the Python package with their
    // layout version 2, the one thing a reader checks a bus's layout by (a version-2 reader
    // would otherwise read partition 0 alone and miss every other decoder's events).
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    write_bus(&bus, 1024, 10);
    let expected = format!(
        "bus {} has layout version 3; this reader reads version 2",
        bus.display()
    );
    let refused = |output: Output, who: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{who}: {stderr}");
        assert!(output.stdout.is_empty(), "{who}: nothing read");
        assert!(stderr.contains(&expected), "{who}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{who}: one line: {stderr}");
    };
    let old = |text: String, from: &str, to: &str| {
        assert_eq!(
            text.matches(from).count(),
            1,
            "the version is set once: {from}"
        );
        text.replace(from, to)
    };
    if cc_available() {
        let include = dir.path().join("v2");
        std::fs::create_dir(&include).unwrap();
        let header = std::fs::read_to_string(root().join("clients/c/tickwire_bus.h")).unwrap();
        std::fs::write(
            include.join("tickwire_bus.h"),
            old(
                header,
                "#define TW_LAYOUT_VERSION 3u\n",
                "#define TW_LAYOUT_VERSION 2u\n",
            ),
        )
        .unwrap();
        let dump = build_c_with(
            &root().join("tests/bus_clients/dump.c"),
            &include,
            dir.path(),
        );
        refused(
            run(Command::new(&dump).arg(&bus)),
            "dump.c built for layout 2",
        );
    }
    if numpy_available() {
        let package = dir.path().join("py2/tickwire_bus");
        std::fs::create_dir_all(&package).unwrap();
        for file in std::fs::read_dir(root().join("clients/python/tickwire_bus")).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|ext| ext == "py") {
                let mut text = std::fs::read_to_string(&file).unwrap();
                if file.file_name().unwrap() == "layout.py" {
                    text = old(text, "\nLAYOUT_VERSION = 3\n", "\nLAYOUT_VERSION = 2\n");
                }
                std::fs::write(package.join(file.file_name().unwrap()), text).unwrap();
            }
        }
        let output = run(Command::new("python3")
            .arg(root().join("tests/bus_clients/dump.py"))
            .arg(&bus)
            .env("PYTHONPATH", dir.path().join("py2")));
        refused(output, "dump.py with the layout 2 package");
    }
}

#[test]
fn c_and_python_refuse_a_bus_of_an_owner_they_do_not_trust_unless_named() {
    // As tests/bus/owners.rs for the Rust reader: a bus file of another user (uid 65534) in a
    // folder every user may write, like /dev/shm, could be a forged feed.
    if !crate::bus::is_root() {
        crate::support::skip::skipped("a bus of a second user (uid 65534) needs root to make");
        return;
    }
    const NOBODY: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let bus = dir.path().join("tickwire.bus");
    write_bus(&bus, 1024, 10);
    std::os::unix::fs::chown(&bus, Some(NOBODY), Some(NOBODY)).unwrap();
    let rust = BusReader::open(&bus, Start::Oldest, 16)
        .err()
        .expect("refused");
    assert!(
        matches!(rust, BusError::Untrusted { uid: NOBODY, .. }),
        "{rust:?}"
    );
    let owner = tickwire_bus::describe_user(NOBODY);
    let refused = |output: Output, who: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{who}: {stderr}");
        assert!(output.stdout.is_empty(), "{who}: nothing read");
        assert!(
            stderr.contains(&format!(
                "bus {} belongs to {owner}, whom this reader does not trust",
                bus.display()
            )) && stderr.contains("forged feed"),
            "{who}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{who}: one line: {stderr}");
    };
    let accepted = |output: Output, who: &str| {
        let stdout = stdout_of(&output, who);
        assert!(stdout.starts_with("open capacity=1024"), "{who}: {stdout}");
    };
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        refused(run(Command::new(&dump).arg(&bus)), "dump.c");
        accepted(
            run(Command::new(&dump).args(["--owner", "65534"]).arg(&bus)),
            "dump.c --owner",
        );
        refused(
            run(Command::new(&dump).args(["--owner", "0"]).arg(&bus)),
            "dump.c --owner 0",
        );
    }
    if numpy_available() {
        let path = bus.to_str().unwrap();
        refused(python(&[path]), "dump.py");
        accepted(python(&["--owner", "65534", path]), "dump.py --owner");
        if let Some(name) = tickwire_bus::user_name(NOBODY) {
            accepted(python(&["--owner", &name, path]), "dump.py --owner NAME");
        }
        let output = run(Command::new("python3")
            .args([
                "-c",
                "import sys, tickwire_bus as tw\n\
                 try:\n    tw.Bus(sys.argv[1])\n\
                 except tw.UntrustedOwner as e:\n    print(e.uid)",
            ])
            .arg(&bus)
            .env("PYTHONPATH", root().join("clients/python")));
        assert_eq!(stdout_of(&output, "python3"), format!("{NOBODY}\n"));
    }
    // The directory's owner, when no one else may write there, is trusted by default.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let in_home = home.join("tickwire.bus");
    std::fs::rename(&bus, &in_home).unwrap();
    std::os::unix::fs::chown(&home, Some(NOBODY), Some(NOBODY)).unwrap();
    BusReader::open(&in_home, Start::Oldest, 16).expect("the directory owner's bus");
    if cc_available() {
        let dump = dir.path().join("dump");
        accepted(
            run(Command::new(&dump).arg(&in_home)),
            "dump.c in the owner's directory",
        );
    }
    if numpy_available() {
        accepted(
            python(&[in_home.to_str().unwrap()]),
            "dump.py in the owner's directory",
        );
    }
}

#[test]
fn snapshot_requests_from_c_and_python_carry_the_bytes_rust_reads() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    write_bus(&bus, 1024, 10);
    let socket = UnixDatagram::bind(request_socket_path(&bus)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let receive = || {
        let mut buffer = [0u8; 64];
        let len = socket.recv(&mut buffer).expect("a request within 10 s");
        SnapshotRequest::from_bytes(&buffer[..len]).expect("a valid request")
    };
    let bus_arg = bus.to_str().unwrap();
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        let output = run(Command::new(&dump)
            .args(["--request", "2", "4294967295"])
            .arg(&bus));
        stdout_of(&output, "dump.c --request");
        assert_eq!(
            receive(),
            SnapshotRequest {
                venue_id: 2,
                instrument_id: SnapshotRequest::ALL_INSTRUMENTS
            }
        );
    }
    if numpy_available() {
        stdout_of(
            &python(&["--request", "65535", "7", bus_arg]),
            "dump.py --request",
        );
        assert_eq!(
            receive(),
            SnapshotRequest {
                venue_id: SnapshotRequest::ALL_VENUES,
                instrument_id: 7
            }
        );
    }
    // No appliance listening: a clear error, not a crash.
    drop(socket);
    std::fs::remove_file(request_socket_path(&bus)).unwrap();
    if cc_available() {
        let dump = build_c(&root().join("tests/bus_clients/dump.c"), dir.path());
        let output = run(Command::new(&dump).args(["--request", "1", "1"]).arg(&bus));
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is the appliance running"), "{stderr}");
    }
    if numpy_available() {
        let output = python(&["--request", "1", "1", bus_arg]);
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is the appliance running"), "{stderr}");
    }
}

/// The rules of the bus's books (briefs' bookrules), written plainly: the oracle of `Books`.
#[derive(Default)]
struct OracleBook {
    state: &'static str,
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    /// The partition its last snapshot began in.
    partition: u32,
}

fn oracle_books(path: &Path) -> String {
    let mut reader = BusReader::open(path, Start::Oldest, 256).unwrap();
    let mut books: BTreeMap<(u16, u32), OracleBook> = BTreeMap::new();
    let mut events = vec![Event::new(blank_header(), Body::Quote(Quote::default())); 256];
    loop {
        let batch = reader.read(&mut events).unwrap();
        if batch.missed > 0 {
            // An overrun of one partition: its books are unknown, the others' untouched.
            for book in books.values_mut() {
                if book.partition == batch.partition {
                    *book = OracleBook {
                        state: "unknown",
                        partition: batch.partition,
                        ..OracleBook::default()
                    };
                }
            }
        }
        if batch.count == 0 && batch.missed == 0 {
            break;
        }
        for event in &events[..batch.count] {
            let key = (event.header.venue_id, event.header.instrument_id);
            match event.body() {
                Body::SnapshotBegin(_) => {
                    books.insert(
                        key,
                        OracleBook {
                            state: "building",
                            partition: batch.partition,
                            ..OracleBook::default()
                        },
                    );
                }
                Body::BookLevel(level) => {
                    let Some(book) = books.get_mut(&key).filter(|book| book.state != "unknown")
                    else {
                        continue;
                    };
                    let side = match level.side {
                        1 => &mut book.bids,
                        2 => &mut book.asks,
                        _ => continue,
                    };
                    if level.size.raw() == 0 {
                        side.remove(&level.price.raw());
                    } else {
                        side.insert(level.price.raw(), level.size.raw());
                    }
                }
                Body::SnapshotEnd(_) => {
                    if let Some(book) = books.get_mut(&key).filter(|book| book.state == "building")
                    {
                        book.state = "valid";
                    }
                }
                Body::Gap(_) => {
                    for (other, book) in books.iter_mut() {
                        if *other == key || (other.0 == key.0 && key.1 == u32::MAX) {
                            *book = OracleBook {
                                state: "unknown",
                                ..OracleBook::default()
                            };
                        }
                    }
                }
                Body::Quote(_)
                | Body::Trade(_)
                | Body::VenueStatus(_)
                | Body::Reference(_)
                | Body::Bar(_)
                | Body::TradingStatus(_)
                | Body::Imbalance(_)
                | Body::Statistic(_)
                | Body::Liquidation(_) => {}
            }
        }
    }
    let mut out = String::new();
    for ((venue, instrument), book) in &books {
        let text = |levels: Vec<(&i64, &i64)>| {
            levels
                .iter()
                .map(|(price, size)| format!("{price}:{size}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        out.push_str(&format!(
            "book v={venue} i={instrument} {} bids={} asks={}\n",
            book.state,
            text(book.bids.iter().rev().collect()),
            text(book.asks.iter().collect())
        ));
    }
    out
}

#[test]
fn python_books_follow_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    // The random stream, then an ending that leaves books in every state: venue 0's rebuilt
    // and valid, venue 1's first book building, venue 2's invalidated by a venue-wide gap.
    let mut writer = create_bus(&bus, 4096);
    fill(&mut writer, TOTAL);
    let mut random = Random(7);
    let mut position = TOTAL;
    let mut write = |writer: &mut BusWriter, venue_id: u16, instrument_id: u32, body: Body| {
        let header = EventHeader {
            venue_id,
            instrument_id,
            venue_seq: position,
            ..blank_header()
        };
        writer.write(&Event::new(header, body));
        position += 1;
    };
    for (venue_id, instrument_id) in [(0, 1), (0, 2), (1, 1), (2, 1), (2, 2)] {
        write(
            &mut writer,
            venue_id,
            instrument_id,
            Body::SnapshotBegin(Snapshot::default()),
        );
        for index in 0..12 {
            let side = if index % 2 == 0 { Side::Bid } else { Side::Ask };
            let level = BookLevel::new(side, random.level_price(), Fixed(1 + index));
            write(&mut writer, venue_id, instrument_id, Body::BookLevel(level));
        }
        if (venue_id, instrument_id) != (1, 1) {
            write(
                &mut writer,
                venue_id,
                instrument_id,
                Body::SnapshotEnd(Snapshot::default()),
            );
        }
    }
    let gap = Gap::new(GapReason::Reconnect, 0, 0);
    write(&mut writer, 2, u32::MAX, Body::Gap(gap));
    drop(writer);
    let expected = oracle_books(&bus);
    // The stream exercises every state, and books with levels on both sides.
    for state in [" valid ", " building ", " unknown "] {
        assert!(expected.contains(state), "a {state} book:\n{expected}");
    }
    assert!(
        expected
            .lines()
            .any(|line| !line.contains("bids= ") && !line.ends_with("asks=")),
        "a book with levels:\n{expected}"
    );
    if numpy_available() {
        let output = python(&["--books", bus.to_str().unwrap()]);
        assert_same(
            &expected,
            &stdout_of(&output, "dump.py --books"),
            "Python books",
        );
    }
}

/// A bus of two partitions of 1,024 slots each at `bus`: its two writers, partition 0's first.
fn two_partitions(bus: &Path, epoch: u64) -> Vec<BusWriter> {
    let options = BusOptions {
        path: bus.to_owned(),
        geometry: Geometry::new(1024, 64).unwrap().with_partitions(2).unwrap(),
        group: None,
    };
    BusWriter::create_partitioned(&options, epoch, 1).unwrap()
}

/// `python3 -c script bus` with the package on its path and its stdin and stdout piped.
fn python_piped(script: &str, bus: &Path) -> std::process::Child {
    Command::new("python3")
        .args(["-c", script])
        .arg(bus)
        .env("PYTHONPATH", root().join("clients/python"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Issue 36: on a bus of two partitions (two decoders), an overrun of one partition makes only
/// that partition's books unknown; the other decoder's books stay valid. The Python reader
/// reads both books, then partition 1's writer laps it, then it reads on.
#[test]
fn python_books_invalidate_only_the_lapped_partitions_books() {
    if !numpy_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    let mut writers = two_partitions(&bus, 0x5eed_0000_0036);
    let mut random = Random(36);
    let mut position = 0;
    let mut write = |writer: &mut BusWriter, venue_id: u16, body: Body| {
        let header = EventHeader {
            venue_id,
            instrument_id: 1,
            venue_seq: position,
            ..blank_header()
        };
        writer.write(&Event::new(header, body));
        writer.publish();
        position += 1;
    };
    // Partition 0: venue 0's book; partition 1: venue 1's.
    for (k, venue_id) in [(0, 0u16), (1, 1)] {
        write(
            &mut writers[k],
            venue_id,
            Body::SnapshotBegin(Snapshot::default()),
        );
        for index in 0..6 {
            let side = if index % 2 == 0 { Side::Bid } else { Side::Ask };
            let level = BookLevel::new(side, random.level_price(), Fixed(1 + index));
            write(&mut writers[k], venue_id, Body::BookLevel(level));
        }
        write(
            &mut writers[k],
            venue_id,
            Body::SnapshotEnd(Snapshot::default()),
        );
    }
    let script = r#"
import sys
import tickwire_bus as tw
bus = tw.Bus(sys.argv[1], start="oldest")
books = tw.Books()
def drain():
    overruns = []
    while True:
        result = bus.read(256)
        events, missed = result
        if missed:
            overruns.append((result.partition, missed))
        books.apply(events, missed, result.partition)
        if len(events) == 0 and missed == 0:
            return overruns
def show(overruns):
    states = " ".join(f"v={v}:{books.books[(v, 1)].state}" for v in (0, 1))
    print(f"{states} overruns={overruns}", flush=True)
show(drain())
sys.stdin.readline()
show(drain())
"#;
    let mut child = python_piped(script, &bus);
    use std::io::{BufRead, Write};
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "v=0:valid v=1:valid overruns=[]\n");
    // Partition 1 laps the reader; partition 0 writes one trade.
    for _ in 0..2000 {
        write(&mut writers[1], 1, Body::Trade(Trade::default()));
    }
    write(&mut writers[0], 0, Body::Trade(Trade::default()));
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("v=0:valid v=1:unknown overruns=[(1, "),
        "only partition 1 lapped, only its book unknown: {line}"
    );
    assert!(child.wait().unwrap().success());
}

/// Issue 33: the Python `Books` backs off after an overrun instead of asking for every book again
/// at once. Ten overruns in a row (a small ring lapped by snapshots) ask once, not ten times; the
/// owed request goes after the back-off, in a later `apply`.
#[test]
fn python_books_back_off_after_an_overrun_instead_of_asking_again_at_once() {
    if !numpy_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("bus");
    let _writer = create_bus(&bus, 1024);
    let listener = UnixDatagram::bind(request_socket_path(&bus)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = r#"
import sys, time
import numpy as np
import tickwire_bus as tw
from tickwire_bus import books as books_module
bus = tw.Bus(sys.argv[1])
books = tw.Books(bus)
empty = np.zeros(0, dtype=tw.EVENT_DTYPE)
for _ in range(10):
    books.apply(empty, missed=100)
print("storm done", flush=True)
sys.stdin.readline()
time.sleep(2 * books_module.FOLLOW_UP_S + 0.1)
books.apply(empty)
print("owed paid", flush=True)
"#;
    let mut child = python_piped(script, &bus);
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    use std::io::{BufRead, Write};
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "storm done\n");
    let received = |listener: &UnixDatagram| {
        let mut requests = Vec::new();
        let mut bytes = [0u8; 32];
        while let Ok(count) = listener.recv(&mut bytes) {
            requests.push(SnapshotRequest::from_bytes(&bytes[..count]).unwrap());
        }
        requests
    };
    let every_book = SnapshotRequest {
        venue_id: SnapshotRequest::ALL_VENUES,
        instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
    };
    let storm = received(&listener);
    // The first overrun asks at once; the nine after it within the back-off do not (a loaded
    // host that stalls the script past a back-off may let one more through).
    assert!(
        !storm.is_empty() && storm.len() <= 2 && storm.iter().all(|r| *r == every_book),
        "{storm:?}"
    );
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "owed paid\n");
    assert!(child.wait().unwrap().success());
    assert_eq!(
        received(&listener),
        [every_book],
        "the owed request goes once the back-off has passed"
    );
}
