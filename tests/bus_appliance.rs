//! The appliance with `[bus]`: every event the strategy sees is on the shared-memory bus, in the
//! same order, with tickwire's own statuses and gaps; the directory names every instrument;
//! readers' snapshot requests are answered into the stream, throttled and counted; the bus is
//! marked closed when the appliance stops.

use crate::support::appliance::{self, Setup};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;
use tickwire::event::{Body, Event, EventKind};
use tickwire_bus::{BusReader, SnapshotRequest, Start};
use tickwire_sim::source::{Source, SyntheticConfig, SyntheticSource};

/// The simulator's two symbols at `rate` messages per second.
fn synthetic(rate: f64) -> Box<dyn Source> {
    Box::new(
        SyntheticSource::new(SyntheticConfig {
            symbols: 2,
            rate_per_sec: rate,
            ..SyntheticConfig::default()
        })
        .unwrap(),
    )
}

fn bus_setup(path: &Path, extra: &str) -> Setup {
    Setup {
        symbols: vec!["BTCUSDT", "ETHUSDT"],
        channels: vec!["bookTicker", "depth@100ms", "aggTrade"],
        appliance_extra: format!(
            "[bus]\npath = {:?}\ncapacity = 65536\n{extra}",
            path.display().to_string()
        ),
        ..Setup::default()
    }
}

/// Reads everything the reader has not read yet.
fn drain(reader: &mut BusReader, into: &mut Vec<Event>) -> u64 {
    let mut buffer = vec![
        Event::new(
            tickwire::venue::feed::own_header(0, 0, 0),
            Body::Gap(Default::default())
        );
        1024
    ];
    let mut missed = 0;
    loop {
        let batch = reader.read(&mut buffer).expect("the bus reads");
        missed += batch.missed;
        into.extend_from_slice(&buffer[..batch.count]);
        if batch.count == 0 && batch.missed == 0 {
            return missed;
        }
    }
}

#[test]
fn every_event_the_strategy_sees_is_on_the_bus_in_order_and_the_bus_closes_with_the_appliance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut pair = appliance::start(synthetic(2_000.0), |_| {}, bus_setup(&path, ""));
    // Opened at the oldest event: the ring (65536) holds the whole session.
    let mut reader = BusReader::open(&path, Start::Oldest, 1024)
        .expect("the bus exists once the appliance runs");
    let directory = reader.directory();
    assert_eq!(directory.len(), 2, "{directory:?}");
    assert_eq!(
        directory
            .iter()
            .map(|entry| (entry.venue.as_str(), entry.symbol.as_str(), entry.venue_id))
            .collect::<Vec<_>>(),
        [("sim", "BTCUSDT", 0), ("sim", "ETHUSDT", 0)]
    );
    assert_ne!(directory[0].instrument_id, directory[1].instrument_id);
    let mut on_bus = Vec::new();
    pair.run_until(
        Duration::from_secs(20),
        "books in sync and trades",
        |pair| {
            pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
                && pair.count(|event| event.kind() == EventKind::Trade) >= 20
        },
    );
    assert_eq!(drain(&mut reader, &mut on_bus), 0);
    assert!(!reader.is_closed());
    let metrics = pair.session.render_metrics();
    assert!(
        metrics.contains("tickwire_bus_events_published_total")
            && metrics.contains("tickwire_bus_directory_entries 2"),
        "{metrics}"
    );
    let seen = pair.finish();
    assert_eq!(drain(&mut reader, &mut on_bus), 0);
    assert!(
        reader.is_closed(),
        "a stopped appliance marks its bus closed"
    );
    assert_eq!(
        on_bus.len(),
        seen.len(),
        "the bus has exactly the strategy's events"
    );
    let first_difference = on_bus
        .iter()
        .zip(&seen)
        .position(|(bus, strategy)| bus != strategy);
    assert_eq!(first_difference, None, "the same events in the same order");
    for kind in [
        EventKind::VenueStatus,
        EventKind::SnapshotBegin,
        EventKind::BookLevel,
        EventKind::Quote,
        EventKind::Trade,
    ] {
        assert!(
            on_bus.iter().any(|event| event.kind() == kind),
            "no {kind:?} on the bus"
        );
    }
}

#[test]
fn snapshot_requests_are_answered_into_the_stream_throttled_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut pair = appliance::start(
        synthetic(1_000.0),
        |_| {},
        bus_setup(&path, "snapshot_interval_ms = 60000\n"),
    );
    pair.run_until(Duration::from_secs(20), "books in sync", |pair| {
        pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
    });
    let mut reader = BusReader::open(&path, Start::Latest, 1024).unwrap();
    let strategy_snapshots = pair.count(|event| event.kind() == EventKind::SnapshotBegin);
    let socket = UnixDatagram::unbound().unwrap();
    let target = tickwire_bus::request_socket_path(&path);
    let every = SnapshotRequest {
        venue_id: SnapshotRequest::ALL_VENUES,
        instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
    };
    socket
        .send_to(&every.to_bytes(), &target)
        .expect("the appliance listens");
    // Asked again at once: inside the interval, throttled.
    socket.send_to(&every.to_bytes(), &target).unwrap();
    // Garbage and a venue that does not exist: invalid.
    socket.send_to(b"not a request", &target).unwrap();
    socket
        .send_to(
            &SnapshotRequest {
                venue_id: 7,
                instrument_id: 0,
            }
            .to_bytes(),
            &target,
        )
        .unwrap();
    let mut on_bus = Vec::new();
    pair.run_until(Duration::from_secs(10), "both books on the bus", |_| {
        drain(&mut reader, &mut on_bus);
        on_bus
            .iter()
            .filter(|event| event.kind() == EventKind::SnapshotEnd)
            .count()
            >= 2
    });
    let begins: Vec<u32> = on_bus
        .iter()
        .filter(|event| event.kind() == EventKind::SnapshotBegin)
        .map(|event| event.header.instrument_id)
        .collect();
    assert_eq!(begins.len(), 2, "one snapshot per instrument: {begins:?}");
    // Each snapshot is begin, its levels, end, with the counts it announced.
    for instrument in begins {
        let events: Vec<&Event> = on_bus
            .iter()
            .filter(|event| event.header.instrument_id == instrument)
            .skip_while(|event| event.kind() != EventKind::SnapshotBegin)
            .take_while(|event| event.kind() != EventKind::SnapshotEnd)
            .collect();
        let Body::SnapshotBegin(counts) = events[0].body() else {
            unreachable!()
        };
        let levels = events
            .iter()
            .filter(|event| event.kind() == EventKind::BookLevel)
            .count();
        assert_eq!(levels as u32, counts.bid_levels + counts.ask_levels);
        assert!(levels > 0);
    }
    let requests = pair.session.bus().unwrap().requests();
    assert_eq!(requests.accepted, 2, "{requests:?}");
    assert_eq!(requests.throttled, 2, "{requests:?}");
    assert_eq!(requests.invalid, 2, "{requests:?}");
    assert_eq!(pair.session.runtime.bus_books_served.get(), 2);
    // The strategy never sees what readers asked for.
    pair.run_for(Duration::from_millis(200));
    assert_eq!(
        pair.count(|event| event.kind() == EventKind::SnapshotBegin),
        strategy_snapshots
    );
    pair.finish();
}

#[test]
fn a_second_appliance_on_the_same_bus_fails_to_start_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let first = appliance::start(synthetic(100.0), |_| {}, bus_setup(&path, ""));
    let other = tempfile::tempdir().unwrap();
    let sim = tickwire_sim::Sim::start(
        tickwire_sim::SimOptions::new(other.path().join("sim")),
        synthetic(100.0),
    )
    .unwrap();
    let config = appliance::write_configs(other.path(), &sim, &bus_setup(&path, ""));
    let loaded = tickwire::config::load(&config).unwrap();
    let error = tickwire::control::Session::start(
        &loaded,
        tickwire::clock::Clock::calibrate(),
        tickwire::control::SessionExtras::default(),
    )
    .err()
    .expect("a second writer is refused");
    let message = error.to_string();
    assert!(
        message.contains("written by another appliance")
            && message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    drop(sim);
    first.finish();
}
