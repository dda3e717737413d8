//! `tickwire tail` as a user runs it: decode-format lines, filters, and a clean end when the
//! pipe closes or a stop signal comes.

use super::{bus_dir, event_at};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use tickwire::event::json::write_event;
use tickwire::event::{Body, Event, EventHeader, EventKind, Quote};
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

fn writer(path: &Path, capacity: u64) -> BusWriter {
    let options = BusOptions {
        path: path.to_owned(),
        geometry: Geometry::new(capacity, 4).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, 5, 0).unwrap();
    for (venue_id, instrument_id, venue, symbol) in
        [(1, 1, "sim", "SYM1"), (2, 5, "other", "OTHER5")]
    {
        writer
            .add_instrument(&DirectoryEntry {
                instrument_id,
                venue_id,
                venue: venue.into(),
                symbol: symbol.into(),
                venue_symbol: symbol.to_lowercase(),
            })
            .unwrap();
    }
    writer
}

fn quote(venue_id: u16, instrument_id: u32) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: 1,
            recv_ts_ns: 2,
            venue_seq: 3,
            instrument_id,
            venue_id,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote::default()),
    )
}

#[test]
fn tail_prints_the_decode_lines_its_filters_keep_then_stops_on_sigterm() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut bus = writer(&path, 1024);
    let mut other = event_at(5, 9);
    other.header.venue_id = 2;
    let unknown = event_at(6, 10);
    for event in [event_at(1, 0), quote(1, 1), other, event_at(1, 1), unknown] {
        bus.write(&event);
    }
    drop(bus);
    let mut child = tickwire()
        .args([
            "tail", "--from", "oldest", "--venue", "sim", "--kind", "trade", "--bus",
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut expected = Vec::new();
    for event in [event_at(1, 0), event_at(1, 1)] {
        write_event(&mut expected, "sim", b"SYM1", &event);
    }
    // An instrument the directory does not name passes the venue filter with symbol `?`.
    write_event(&mut expected, "sim", b"?", &unknown);
    let expected = String::from_utf8(expected).unwrap();
    let expected: Vec<&str> = expected.lines().chain(["{\"type\":\"closed\"}"]).collect();
    for want in expected {
        assert_eq!(lines.next().unwrap().unwrap(), want);
    }
    // SAFETY: kill(2) on the child's pid, which has not been reaped (it is waited for below).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status:?} {stderr}");
}

#[test]
fn tail_ends_cleanly_when_its_reader_closes_the_pipe() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut bus = writer(&path, 8192);
    // More than a pipe holds, so tail is still writing when the pipe closes.
    for position in 0..8000 {
        bus.write(&event_at(1, position));
    }
    bus.publish();
    let mut child = tickwire()
        .args(["tail", "--from", "oldest", "--bus"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(
        first.starts_with("{\"type\":\"trade\",\"venue\":\"sim\",\"symbol\":\"SYM1\""),
        "{first}"
    );
    drop(stdout);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(bus);
}

#[test]
fn tail_names_a_missing_bus_and_an_unknown_kind() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let output = tickwire()
        .args(["tail", "--bus"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no bus at"), "{stderr}");
    let output = tickwire()
        .args(["tail", "--kind", "trades", "--bus"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--kind trades: no such kind; valid: quote, trade"),
        "{stderr}"
    );
}

#[test]
fn tail_with_nothing_to_read_names_bus_config_and_nats() {
    let output = tickwire().arg("tail").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for option in ["--bus PATH", "--config FILE", "--nats URL"] {
        assert!(stderr.contains(option), "{option} not named: {stderr}");
    }
}

#[test]
fn tail_stats_counts_the_events_of_each_second() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut bus = writer(&path, 1024);
    for position in 0..100 {
        bus.write(&event_at(1, position));
    }
    bus.publish();
    let mut child = tickwire()
        .args([
            "tail", "--stats", "--from", "oldest", "--kind", "quote", "--bus",
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let stats: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(stats["type"], "stats", "{line}");
    // The ring's 100 events are read within the first second; none is a quote.
    assert_eq!(stats["events_per_s"], 100, "{line}");
    assert_eq!(stats["matched_per_s"], 0, "{line}");
    assert_eq!(stats["lag"], 0, "{line}");
    assert_eq!(stats["missed_total"], 0, "{line}");
    assert_eq!(stats["epoch"], 5, "{line}");
    // SAFETY: kill(2) on the child's pid, which has not been reaped (it is waited for below).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    assert!(child.wait().unwrap().success());
    drop(bus);
}
