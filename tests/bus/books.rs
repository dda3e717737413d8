//! The book rules through a real `BusWriter`: a reader that attaches mid-stream and asks for a
//! snapshot ends with the same books as one that saw everything, and as the writer's own.

use super::bus_dir;
use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tickwire::event::{flags, Body, BookLevel, Event, EventHeader, EventKind, Side, Snapshot};
use tickwire::fixed::Fixed;
use tickwire_bus::{request_socket_path, BusOptions, BusWriter, Geometry, SnapshotRequest};
use tickwire_client::{Books, Client, Next, Start};

const INSTRUMENTS: [u32; 2] = [7, 8];

type Levels = BTreeMap<(u8, i64), i64>;

fn event(instrument_id: u32, flags: u8, body: Body) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: 0,
            venue_seq: 0,
            instrument_id,
            venue_id: 1,
            kind: EventKind::Quote,
            flags,
        },
        body,
    )
}

/// What the appliance does for a request: the book as it stands, bracketed.
fn write_snapshot(writer: &mut BusWriter, instrument: u32, levels: &Levels) {
    writer.write(&event(
        instrument,
        0,
        Body::SnapshotBegin(Snapshot::default()),
    ));
    for (&(side, price), &size) in levels {
        let side = if side == 1 { Side::Bid } else { Side::Ask };
        writer.write(&event(
            instrument,
            flags::SNAPSHOT,
            Body::BookLevel(BookLevel::new(side, Fixed(price), Fixed(size))),
        ));
    }
    writer.write(&event(
        instrument,
        0,
        Body::SnapshotEnd(Snapshot::default()),
    ));
}

/// Reads until the bus closes, following books; returns them.
fn follow(mut client: Client) -> Books {
    let deadline = std::time::Instant::now() + super::PATIENCE;
    loop {
        assert!(std::time::Instant::now() < deadline, "no close within 20 s");
        match client.wait(Duration::from_millis(20)).unwrap() {
            Next::Closed => return client.books().unwrap().clone(),
            Next::Overrun { missed, .. } => panic!("the ring is large enough: {missed} missed"),
            Next::Events(_) | Next::Idle => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_late_joiner_given_a_snapshot_ends_with_the_books_of_a_reader_that_saw_everything() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(1 << 16, 4).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, 1, 0).unwrap();
    let requests = UnixDatagram::bind(request_socket_path(&path)).unwrap();
    requests.set_nonblocking(true).unwrap();
    let stats = writer.stats();
    // Every book begins empty and valid, so a reader from the start knows it at once.
    let mut books: BTreeMap<u32, Levels> =
        INSTRUMENTS.iter().map(|&i| (i, Levels::new())).collect();
    for instrument in INSTRUMENTS {
        write_snapshot(&mut writer, instrument, &books[&instrument]);
    }
    writer.publish();
    let everything = Client::options()
        .start(Start::Oldest)
        .follow_books(true)
        .attach(&path)
        .unwrap();
    let everything = std::thread::spawn(move || follow(everything));
    let writing = std::thread::spawn(move || {
        // A deterministic walk of level changes, removals (size 0) included.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut snapshots = 0;
        for step in 0..6000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let instrument = INSTRUMENTS[(state % 2) as usize];
            let side = 1 + ((state >> 8) % 2) as u8;
            let price = 100 + ((state >> 16) % 20) as i64;
            let size = ((state >> 32) % 4) as i64;
            let levels = books.get_mut(&instrument).unwrap();
            if size == 0 {
                levels.remove(&(side, price));
            } else {
                levels.insert((side, price), size);
            }
            let side = if side == 1 { Side::Bid } else { Side::Ask };
            writer.write(&event(
                instrument,
                0,
                Body::BookLevel(BookLevel::new(side, Fixed(price), Fixed(size))),
            ));
            if step % 32 == 31 {
                writer.publish();
                let mut bytes = [0u8; 16];
                while let Ok(received) = requests.recv(&mut bytes) {
                    let request = SnapshotRequest::from_bytes(&bytes[..received]).unwrap();
                    for instrument in INSTRUMENTS {
                        if request.instrument_id == SnapshotRequest::ALL_INSTRUMENTS
                            || request.instrument_id == instrument
                        {
                            write_snapshot(&mut writer, instrument, &books[&instrument]);
                            snapshots += 1;
                        }
                    }
                }
                writer.publish();
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        writer.publish();
        (books, snapshots, writer)
    });
    // Mid-stream: the late joiner sees levels of books it does not know, then its snapshot.
    let deadline = std::time::Instant::now() + super::PATIENCE;
    while stats.cursor() < 2000 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    let late = Client::options()
        .start(Start::Latest)
        .follow_books(true)
        .attach(&path)
        .unwrap();
    assert_eq!(late.counters().snapshot_requests, 1, "asked at attach");
    let late = std::thread::spawn(move || follow(late));
    let (oracle, snapshots, writer) = writing.join().unwrap();
    assert!(snapshots >= 2, "the late joiner's request was answered");
    drop(writer);
    let (everything, late) = (everything.join().unwrap(), late.join().unwrap());
    for instrument in INSTRUMENTS {
        let full = everything.book(1, instrument).unwrap();
        let joined = late.book(1, instrument).unwrap();
        assert!(full.is_valid() && joined.is_valid());
        assert_eq!(full, joined, "instrument {instrument}");
        let levels: Levels = full
            .bids()
            .map(|(price, size)| ((1, price.0), size.0))
            .chain(full.asks().map(|(price, size)| ((2, price.0), size.0)))
            .collect();
        assert_eq!(levels, oracle[&instrument], "the writer's own book");
    }
}
