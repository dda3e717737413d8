//! The appliance with `[bus]`: every event the strategy sees is on the shared-memory bus, in the
//! same order, with tickwire's own statuses and gaps; the directory names every instrument;
//! readers' snapshot requests are answered into the stream, throttled and counted; the bus is
//! marked closed when the appliance stops.

use crate::support::appliance;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tickwire::event::{Body, Event, EventKind};
use tickwire_bus::{BusReader, SnapshotRequest, Start};
use tickwire_sim::source::{Source, SyntheticConfig};

/// The simulator's two symbols at `rate` messages per second.
fn synthetic(rate: f64) -> Box<dyn Source> {
    appliance::synthetic_two(rate, SyntheticConfig::default().book_levels)
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
    let mut pair = appliance::start(synthetic(2_000.0), |_| {}, appliance::bus_setup(&path, ""));
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
        appliance::bus_setup(&path, "snapshot_interval_ms = 60000\n"),
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
    let books = &pair.session.runtime.bus_book_requests;
    assert_eq!(books.served.get(), 2);
    assert_eq!(books.queued.get(), 2);
    assert_eq!(books.refused.get(), 0);
    assert_eq!(books.waiting(), 0);
    assert!(
        books.levels.get() >= 2 * 3,
        "each book's levels, begin and end"
    );
    // The strategy never sees what readers asked for.
    pair.run_for(Duration::from_millis(200));
    assert_eq!(
        pair.count(|event| event.kind() == EventKind::SnapshotBegin),
        strategy_snapshots
    );
    pair.finish();
}

/// Issue 32: the decoder's queue for the readers' budget holds `[bus] snapshot_queue_books`
/// books; a request for more has the rest refused, counted and shown in `/metrics`.
#[test]
fn book_requests_beyond_the_decoders_queue_are_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut pair = appliance::start(
        synthetic(1_000.0),
        |_| {},
        appliance::bus_setup(
            &path,
            "snapshot_interval_ms = 60000
snapshot_levels_per_s = 1000
snapshot_queue_books = 1
",
        ),
    );
    pair.run_until(Duration::from_secs(20), "books in sync", |pair| {
        pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
    });
    let mut reader = BusReader::open(&path, Start::Latest, 1024).unwrap();
    let socket = UnixDatagram::unbound().unwrap();
    let every = SnapshotRequest {
        venue_id: SnapshotRequest::ALL_VENUES,
        instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
    };
    socket
        .send_to(&every.to_bytes(), tickwire_bus::request_socket_path(&path))
        .expect("the appliance listens");
    let mut on_bus = Vec::new();
    pair.run_until(Duration::from_secs(10), "the book that fit", |pair| {
        drain(&mut reader, &mut on_bus);
        pair.session.runtime.bus_book_requests.served.get() == 1
    });
    let books = &pair.session.runtime.bus_book_requests;
    assert_eq!(books.queued.get(), 1);
    assert_eq!(books.refused.get(), 1, "the second found the queue full");
    let metrics = pair.session.render_metrics();
    for line in [
        "tickwire_bus_book_requests_total{result=\"queued\"} 1",
        "tickwire_bus_book_requests_total{result=\"refused\"} 1",
        "tickwire_bus_books_served_total 1",
        "tickwire_bus_book_queue 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    pair.finish();
}

#[test]
fn a_second_appliance_on_the_same_bus_fails_to_start_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let first = appliance::start(synthetic(100.0), |_| {}, appliance::bus_setup(&path, ""));
    let other = tempfile::tempdir().unwrap();
    let sim = tickwire_sim::Sim::start(
        tickwire_sim::SimOptions::new(other.path().join("sim")),
        synthetic(100.0),
    )
    .unwrap();
    let config = appliance::write_configs(other.path(), &sim, &appliance::bus_setup(&path, ""));
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

/// Reads everything the client has now; returns whether it saw an overrun.
fn drain_client(client: &mut tickwire_client::Client) -> bool {
    use tickwire_client::Next;
    let mut lapped = false;
    loop {
        match client.poll().expect("the client reads") {
            Next::Events(_) | Next::NewEpoch { .. } | Next::Closed => {}
            Next::Overrun { .. } => lapped = true,
            Next::Idle | Next::Removed => return lapped,
        }
    }
}

type Levels = Vec<(tickwire::fixed::Fixed, tickwire::fixed::Fixed)>;

/// Every valid book of a client: (venue, instrument) -> (bids, asks).
fn valid_books(client: &tickwire_client::Client) -> Vec<((u16, u32), (Levels, Levels))> {
    let mut books: Vec<_> = client
        .books()
        .expect("the client follows books")
        .iter()
        .filter(|(_, book)| book.is_valid())
        .map(|(key, book)| (key, (book.bids().collect(), book.asks().collect())))
        .collect();
    books.sort_by_key(|(key, _)| *key);
    books
}

#[test]
fn a_late_joiner_and_a_lapped_reader_end_with_the_books_of_a_reader_that_saw_everything() {
    use tickwire_client::{Client, Start};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    // A ring of 4096 events, so that a reader that stops reading is lapped within a second.
    // A budget whose burst fits twice in the small ring (check-config's rule).
    let mut setup = appliance::bus_setup(
        &path,
        "snapshot_interval_ms = 50\nsnapshot_levels_per_s = 50000\n",
    );
    setup.appliance_extra = setup
        .appliance_extra
        .replace("capacity = 65536", "capacity = 16384");
    let mut pair = appliance::start(synthetic(3_000.0), |_| {}, setup);
    let open = |start| {
        Client::options()
            .start(start)
            .follow_books(true)
            .attach(&path)
            .expect("the bus exists")
    };
    // Reads from the bus's first event on a thread of its own, as fast as events come: it never
    // falls behind (a burst at start is more than the ring holds between two control ticks).
    let mut everything = open(Start::Oldest);
    let reader = std::thread::spawn(move || {
        use tickwire_client::Next;
        loop {
            match everything
                .wait(Duration::from_millis(5))
                .expect("the client reads")
            {
                Next::Overrun { missed, .. } => panic!("the full reader was lapped by {missed}"),
                Next::Closed => return everything,
                Next::Events(_) | Next::NewEpoch { .. } | Next::Idle | Next::Removed => {}
            }
        }
    });
    // Attaches now and does not read until it has been lapped.
    let mut lapped = open(Start::Latest);
    let mut was_lapped = false;
    // Joins in the middle of the session.
    pair.run_for(Duration::from_millis(500));
    eprintln!(
        "cursor after 0.5 s: {}",
        pair.session.bus().unwrap().stats().cursor()
    );
    let mut late = open(Start::Latest);
    pair.run_until(
        Duration::from_secs(20),
        "the lapped reader lapped and every book rebuilt",
        |_| {
            drain_client(&mut late);
            if lapped.lag() > 16384 || was_lapped {
                was_lapped |= drain_client(&mut lapped);
            }
            was_lapped && valid_books(&late).len() == 2 && valid_books(&lapped).len() == 2
        },
    );
    assert!(lapped.counters().missed > 0, "{:?}", lapped.counters());
    pair.run_for(Duration::from_millis(300));
    pair.finish();
    // Everything to the end of the stream (the bus is closed): the same position for all three.
    let everything = reader.join().expect("the full reader was never lapped");
    drain_client(&mut late);
    assert!(
        !drain_client(&mut lapped),
        "not lapped again after it caught up"
    );
    let reference = valid_books(&everything);
    assert_eq!(reference.len(), 2);
    assert!(reference
        .iter()
        .all(|(_, (bids, asks))| !bids.is_empty() && !asks.is_empty()));
    assert_eq!(valid_books(&late), reference, "the late joiner's books");
    assert_eq!(valid_books(&lapped), reference, "the lapped reader's books");
}

#[test]
fn tail_reads_the_bus_an_appliance_config_names() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut pair = appliance::start(synthetic(1_000.0), |_| {}, appliance::bus_setup(&path, ""));
    pair.run_until(Duration::from_secs(20), "trades", |pair| {
        pair.count(|event| event.kind() == EventKind::Trade) >= 3
    });
    let config = pair.dir.path().join("tickwire.toml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["tail", "--from", "oldest", "--kind", "trade", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..3 {
        let line = lines.next().unwrap().unwrap();
        assert!(
            line.starts_with("{\"type\":\"trade\",\"venue\":\"sim\",\"symbol\":\""),
            "{line}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    pair.finish();
    // A config without [bus] names no bus: a clear error.
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, "[threads]\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["tail", "--config"])
        .arg(&plain)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no [bus] table"), "{stderr}");
}

#[test]
fn a_consumer_outlives_an_appliance_restart_and_goes_on_with_the_new_epoch() {
    use tickwire_client::{Client, Next};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut first = appliance::start(synthetic(1_000.0), |_| {}, appliance::bus_setup(&path, ""));
    let mut client = Client::attach(&path).expect("the first appliance's bus");
    let first_epoch = client.epoch();
    let mut last_old_ns = 0;
    first.run_until(
        Duration::from_secs(20),
        "events on the bus",
        |_| match client.poll() {
            Ok(Next::Events(events)) => {
                last_old_ns = events
                    .iter()
                    .map(|event| event.header.recv_ts_ns)
                    .max()
                    .unwrap_or(0);
                true
            }
            _ => false,
        },
    );
    first.finish();
    // The stop is reported once the old bus is read to its end.
    let mut closed = false;
    for _ in 0..1000 {
        match client.poll().expect("the client reads") {
            Next::Closed => {
                closed = true;
                break;
            }
            Next::Events(events) => {
                for event in events.iter() {
                    last_old_ns = last_old_ns.max(event.header.recv_ts_ns);
                }
            }
            Next::Idle => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("before the restart: {other:?}"),
        }
    }
    assert!(closed, "a stopped appliance's bus reads as closed");
    let mut second = appliance::start(synthetic(1_000.0), |_| {}, appliance::bus_setup(&path, ""));
    let mut new_epoch = None;
    let mut after = Vec::new();
    second.run_until(Duration::from_secs(20), "the new epoch's events", |_| {
        loop {
            match client.poll().expect("the client reads") {
                Next::NewEpoch { epoch } => new_epoch = Some(epoch),
                Next::Events(events) => after.extend_from_slice(&events),
                Next::Idle => break,
                other => panic!("after the restart: {other:?}"),
            }
        }
        new_epoch.is_some() && after.iter().any(|event| event.kind() == EventKind::Quote)
    });
    let new_epoch = new_epoch.unwrap();
    assert!(new_epoch > first_epoch, "{new_epoch} after {first_epoch}");
    assert_eq!(client.epoch(), new_epoch);
    // Nothing of the old bus after the new epoch: every event was received after the last one
    // the old appliance published.
    assert!(
        after
            .iter()
            .all(|event| event.header.recv_ts_ns > last_old_ns),
        "an old event after the new epoch"
    );
    second.finish();
}

/// Issue 33: on the smallest ring `check-config` accepts for 1,000-level books (8,192 slots, with
/// a budget whose burst fits twice), a reader that asks for every book in a loop never laps a
/// reader that did not ask: the budget and the capacity rule together keep the books one reader
/// asks for from storming the others. Prints what was measured.
#[test]
fn a_reader_asking_for_books_in_a_loop_never_laps_one_that_did_not_on_the_smallest_ring() {
    use tickwire_client::{Client, Next, Start as ClientStart};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut setup = appliance::bus_setup(
        &path,
        "snapshot_interval_ms = 10\nsnapshot_levels_per_s = 20000\n",
    );
    setup.appliance_extra = setup
        .appliance_extra
        .replace("capacity = 65536", "capacity = 8192");
    // Loaded as `check-config` loads it: the ring is accepted for 1,000-level books.
    let mut pair = appliance::start(appliance::synthetic_two(2_000.0, 1_000), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "books in sync", |pair| {
        pair.count(|event| event.kind() == EventKind::SnapshotEnd) >= 2
    });
    // The reader that does not ask: reads as events come, on a thread of its own.
    let mut bystander = Client::options()
        .start(ClientStart::Latest)
        .attach(&path)
        .expect("the bus exists");
    let reader = std::thread::spawn(move || {
        let (mut events, mut begins) = (0u64, 0u64);
        loop {
            match bystander
                .wait(Duration::from_millis(5))
                .expect("the client reads")
            {
                Next::Events(batch) => {
                    events += batch.len() as u64;
                    begins += batch
                        .iter()
                        .filter(|event| event.kind() == EventKind::SnapshotBegin)
                        .count() as u64;
                }
                Next::Closed => return (bystander.counters(), events, begins),
                Next::Overrun { .. } | Next::NewEpoch { .. } | Next::Idle | Next::Removed => {}
            }
        }
    });
    // The reader that asks for every book, every 5 ms, for 3 s.
    let socket = UnixDatagram::unbound().unwrap();
    let every = SnapshotRequest {
        venue_id: SnapshotRequest::ALL_VENUES,
        instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
    }
    .to_bytes();
    let request_path = tickwire_bus::request_socket_path(&path);
    let started = std::time::Instant::now();
    let mut asked = 0;
    while started.elapsed() < Duration::from_secs(3) {
        socket
            .send_to(&every, &request_path)
            .expect("the appliance listens");
        asked += 1;
        pair.run_for(Duration::from_millis(5));
    }
    let books = &pair.session.runtime.bus_book_requests;
    let (served, levels) = (books.served.get(), books.levels.get());
    pair.finish();
    let (counters, events, begins) = reader.join().expect("the bystander never panicked");
    eprintln!(
        "measured: {asked} requests for every book in 3 s; {served} books served ({levels} \
         levels); the reader that did not ask read {events} events ({begins} snapshots), \
         {} overruns, {} missed",
        counters.overruns, counters.missed
    );
    assert!(
        served >= 4,
        "the asking reader's books were served: {served}"
    );
    assert!(begins >= 4, "the bystander saw them go by: {begins}");
    assert_eq!(
        (counters.overruns, counters.missed),
        (0, 0),
        "the reader that did not ask was never lapped"
    );
}
