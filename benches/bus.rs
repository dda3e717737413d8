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
//! Partitions (issue 36: one ring per decoder): `bus_publish/partition-1-of-2/<capacity>` is the
//! same loop writing partition 1 of a bus of two (each decoder writes its own partition with
//! its own writer, so the cost per event should be the one-partition figure);
//! `bus_read_merge/partitions/<n>` is a reader's cost per event reading a bus of 1 or 2
//! partitions (2: the events alternate between the partitions in batches of 64, as two busy
//! decoders publish), the merge included, checked to read every event once and in order per
//! partition.
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
    create_partitioned(dir, capacity, 1).remove(0)
}

fn create_partitioned(dir: &Path, capacity: u64, partitions: u32) -> Vec<BusWriter> {
    let options = BusOptions {
        path: dir.join("bench.bus"),
        geometry: Geometry::new(capacity, 16)
            .and_then(|geometry| geometry.with_partitions(partitions))
            .expect("a valid geometry"),
        group: None,
    };
    BusWriter::create_partitioned(&options, 1, 0).expect("create the bus under /dev/shm")
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
    assert_eq!(
        reader.partition_cursor(writer.partition()),
        writer.written(),
        "every write published"
    );
    let mut out = vec![quote(0); 4096];
    let batch = reader.read(&mut out).expect("read the bus");
    assert!(batch.count > 0);
    assert_eq!(batch.partition, writer.partition());
    let first = reader.positions()[writer.partition() as usize] - batch.count as u64;
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
    // Partition 1 of 2: its own writer, its own claim and cursor.
    let capacity = 1u64 << 16;
    let dir = tempfile::Builder::new()
        .prefix("tickwire-bench-bus")
        .tempdir_in("/dev/shm")
        .expect("a temp dir under /dev/shm");
    let mut writers = create_partitioned(dir.path(), capacity, 2);
    let mut writer = writers.pop().expect("two writers");
    assert_eq!(writer.partition(), 1);
    let mut template = quote(0);
    check_reader_sees_writes(&mut writer, &mut template);
    group.bench_function(BenchmarkId::new("partition-1-of-2", capacity), |b| {
        b.iter_custom(|events| {
            let first = writer.written();
            let start = Instant::now();
            write_events(&mut writer, &mut template, first, events);
            start.elapsed()
        })
    });
    check_ring_holds_the_tail(&writer);
    assert_eq!(writers[0].written(), 0, "partition 0 untouched");
    group.finish();
}

/// A reader's cost per event, the merge of the partitions included: events written (untimed)
/// in chunks the rings hold, alternating between the partitions every 64, then read (timed)
/// and checked: every event once, each partition's in order.
fn bus_read_merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("bus_read_merge");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(4));
    let capacity = 1u64 << 16;
    for partitions in [1u32, 2] {
        let dir = tempfile::Builder::new()
            .prefix("tickwire-bench-bus")
            .tempdir_in("/dev/shm")
            .expect("a temp dir under /dev/shm");
        let mut writers = create_partitioned(dir.path(), capacity, partitions);
        let mut reader =
            BusReader::open(writers[0].path(), Start::Latest, 256).expect("open the bus");
        let mut out = vec![quote(0); 256];
        let mut template = quote(0);
        let mut next = vec![0u64; partitions as usize];
        group.bench_function(BenchmarkId::new("partitions", partitions), |b| {
            b.iter_custom(|events| {
                let mut elapsed = Duration::ZERO;
                let mut left = events;
                while left > 0 {
                    // Half a ring per partition at most: nothing is lapped.
                    let chunk = left.min(capacity / 2 * u64::from(partitions));
                    let mut written = 0;
                    while written < chunk {
                        for writer in writers.iter_mut() {
                            let count = BATCH.min(chunk - written);
                            let first = writer.written();
                            write_events(writer, &mut template, first, count);
                            written += count;
                        }
                    }
                    let start = Instant::now();
                    let mut read = 0;
                    while read < chunk {
                        let batch = reader.read(black_box(&mut out)).expect("read the bus");
                        read += batch.count as u64;
                        black_box(&out[..batch.count]);
                        let k = batch.partition as usize;
                        assert_eq!(batch.missed, 0);
                        if let Some(first) = out[..batch.count].first() {
                            assert_eq!(first.header.venue_seq, next[k], "partition {k} in order");
                            next[k] += batch.count as u64;
                        }
                    }
                    elapsed += start.elapsed();
                    left -= chunk;
                }
                elapsed
            })
        });
        for (k, writer) in writers.iter().enumerate() {
            assert_eq!(
                next[k],
                writer.written(),
                "partition {k}: every event read once"
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bus_publish, bus_read_merge);
criterion_main!(benches);
