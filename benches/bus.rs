//! The bus's publish cost on the hot path: `BusWriter::write` for every event and one `publish`
//! per 64 events (the decoder's batch), into a bus file under /dev/shm, reported per event (the
//! issue's goal: at most 20 ns).
//!
//! `bus_publish/bus/<capacity>` drives the writer as the decoder stage does. Each event is the
//! same quote with its sequence and receive time changed, as a decoder fills a fresh event.
//! Nobody reads during the timing: what readers cost the writer (the cache lines they pull) is
//! measured across processes by `benches/bus_latency`'s throughput runs.
//!
//! Two sizes: 65,536 slots (4 MiB, about the last-level cache share of one core here) and 2^20
//! slots (64 MiB, far past any cache, so every store goes to memory).
//!
//! Before timing, a reader opened on the same file checks that it sees exactly the events
//! written; after timing, a reader checks that the ring holds the last events in order, so a
//! writer that skipped its stores cannot produce a fast number. The cross-process latency and the
//! throughput with readers are `benches/bus_latency` (`scripts/bench-bus`), outside the workspace.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};
use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Quote};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusReader, BusWriter, Geometry, Start};

/// Events per `publish`, as the decoder stage publishes once per decoded batch.
const BATCH: u64 = 64;

fn quote(sequence: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: 1_700_000_000_000_000_000,
            recv_ts_ns: 1_700_000_000_000_000_000 + sequence,
            venue_seq: sequence,
            instrument_id: 7,
            venue_id: 1,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote {
            bid_px: Fixed(9_500_010_000_000),
            bid_sz: Fixed(1_250_000_000),
            ask_px: Fixed(9_500_020_000_000),
            ask_sz: Fixed(3_000_000_000),
        }),
    )
}

/// Writes `count` events starting at sequence `first`, publishing every `BATCH`, as the
/// decoder does: the template's sequence and receive time change per event.
#[inline]
fn write_events(writer: &mut BusWriter, template: &mut Event, first: u64, count: u64) {
    let mut sequence = first;
    let end = first + count;
    while sequence < end {
        let batch_end = (sequence + BATCH).min(end);
        while sequence < batch_end {
            template.header.venue_seq = sequence;
            template.header.recv_ts_ns = 1_700_000_000_000_000_000 + sequence;
            writer.write(black_box(template));
            sequence += 1;
        }
        writer.publish();
    }
}

fn create(dir: &Path, capacity: u64) -> BusWriter {
    let options = BusOptions {
        path: dir.join("bench.bus"),
        geometry: Geometry::new(capacity, 16).expect("a valid geometry"),
        group: None,
    };
    BusWriter::create(&options, 1, 0).expect("create the bus under /dev/shm")
}

/// A reader opened before the writes sees exactly the events written, in order.
fn check_reader_sees_writes(writer: &mut BusWriter, template: &mut Event) {
    let mut reader = BusReader::open(writer.path(), Start::Latest, 256).expect("open the bus");
    let first = writer.written();
    let count = 1_000;
    write_events(writer, template, first, count);
    let mut out = vec![quote(0); 256];
    let mut expected = first;
    while expected < first + count {
        let batch = reader.read(&mut out).expect("read the bus");
        assert_eq!(batch.missed, 0, "a reader that keeps up misses nothing");
        assert!(batch.count > 0, "published events are readable");
        for event in &out[..batch.count] {
            let mut want = quote(expected);
            want.header.recv_ts_ns = 1_700_000_000_000_000_000 + expected;
            assert_eq!(event.to_words(), want.to_words(), "event {expected}");
            expected += 1;
        }
    }
}

/// After timing: the ring holds the last events written, in order, and all of them published.
fn check_ring_holds_the_tail(writer: &BusWriter) {
    let mut reader = BusReader::open(writer.path(), Start::Oldest, 4096).expect("open the bus");
    assert_eq!(reader.cursor(), writer.written(), "every write published");
    let mut out = vec![quote(0); 4096];
    let batch = reader.read(&mut out).expect("read the bus");
    assert!(batch.count > 0);
    let first = reader.position() - batch.count as u64;
    for (offset, event) in out[..batch.count].iter().enumerate() {
        assert_eq!(
            event.header.venue_seq,
            first + offset as u64,
            "ring in order"
        );
        assert_eq!(event.kind(), EventKind::Quote);
    }
}

fn bus_publish(c: &mut Criterion) {
    let mut group = c.benchmark_group("bus_publish");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(4));
    for capacity in [1u64 << 16, 1 << 20] {
        let dir = tempfile::Builder::new()
            .prefix("tickwire-bench-bus")
            .tempdir_in("/dev/shm")
            .expect("a temp dir under /dev/shm");
        let mut writer = create(dir.path(), capacity);
        let mut template = quote(0);
        check_reader_sees_writes(&mut writer, &mut template);
        // One iteration is one event: Criterion's time per iteration is the cost per event.
        group.bench_function(BenchmarkId::new("bus", capacity), |b| {
            b.iter_custom(|events| {
                let first = writer.written();
                let start = Instant::now();
                write_events(&mut writer, &mut template, first, events);
                start.elapsed()
            })
        });
        check_ring_holds_the_tail(&writer);
    }
    group.finish();
}

criterion_group!(benches, bus_publish);
criterion_main!(benches);
