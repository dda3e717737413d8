//! L3 (market-by-order) book benchmarks: `tickwire::book::mbo::MboBook` (open-addressing order
//! table, sorted `Vec` levels) against the plain `HashMap` + `BTreeMap` book it replaced
//! (`tests/support/mbo_oracle.rs`), on generated MBO streams (`tests/support/mbo_stream.rs`:
//! adds around a random-walk mid, whole and partial cancels, price and size modifies, trade +
//! fill + cancel executions; no invalid records and no clears).
//!
//! - `mbo_cme_ids`: 2,000,000 records, order ids shaped like CME's (13-digit, rising with gaps),
//!   about 10,000 resting orders.
//! - `mbo_random_ids`: 1,000,000 records, uniformly random 64-bit ids, about 10,000 resting.
//! - `mbo_sequential_ids`: 1,000,000 records, ids 1, 2, 3, ..., about 1,000 resting.
//!
//! Each replay starts from a cleared book (the fast one presized with `with_capacity`) and
//! applies every record, folding every `LevelUpdate` into a checksum. Criterion's throughput is
//! records, so its time per element is the ns per record. Before anything is timed, both books
//! replay every stream once and must end with the same levels, the same orders and the same
//! checksum of updates. A paired run then replays the two books in turn for 10 rounds and prints
//! each one's fastest replay in ns per record: the comparison to trust on a busy machine.
//!
//! Run with `cargo bench --bench mbo_book`; the figures and the machine are in BENCHMARKING.md
//! ("L3 (MBO) book").

#[path = "../tests/support/mbo_oracle.rs"]
mod mbo_oracle;
#[path = "../tests/support/mbo_stream.rs"]
mod mbo_stream;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mbo_oracle::PlainMboBook;
use mbo_stream::{IdPattern, Record, Stream};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tickwire::book::mbo::{LevelUpdate, MboBook};
use tickwire::book::BookSide;

/// Orders and levels reserved in the fast book: more than any stream here rests.
const ORDERS: usize = 65_536;
const LEVELS_PER_SIDE: usize = 4_096;

struct Workload {
    name: &'static str,
    records: Vec<Record>,
}

fn workloads() -> Vec<Workload> {
    [
        ("mbo_cme_ids", IdPattern::CmeLike, 10_000, 2_000_000),
        ("mbo_random_ids", IdPattern::Random, 10_000, 1_000_000),
        (
            "mbo_sequential_ids",
            IdPattern::Sequential,
            1_000,
            1_000_000,
        ),
    ]
    .into_iter()
    .map(|(name, ids, target_orders, count)| Workload {
        name,
        records: Stream::new(7, ids, target_orders).clean().records(count),
    })
    .collect()
}

/// Folds an update into a checksum that depends on every field and on the order of updates.
#[inline]
fn fold(checksum: u64, update: LevelUpdate) -> u64 {
    let side = match update.side {
        BookSide::Bid => 1,
        BookSide::Ask => 2,
    };
    (checksum.rotate_left(5) ^ update.price as u64 ^ update.size ^ u64::from(update.count) ^ side)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The two books behind one face, so one replay loop drives both.
trait Book {
    fn apply_record(&mut self, record: &Record, checksum: &mut u64) -> bool;
    fn reset(&mut self);
}

impl Book for MboBook {
    #[inline]
    fn apply_record(&mut self, record: &Record, checksum: &mut u64) -> bool {
        self.apply(
            record.action,
            record.side,
            record.order_id,
            record.price,
            record.size,
            &mut |update| *checksum = fold(*checksum, update),
        )
        .is_ok()
    }

    fn reset(&mut self) {
        self.clear(&mut |_| {});
    }
}

impl Book for PlainMboBook {
    #[inline]
    fn apply_record(&mut self, record: &Record, checksum: &mut u64) -> bool {
        self.apply(
            record.action,
            record.side,
            record.order_id,
            record.price,
            record.size,
            &mut |update| *checksum = fold(*checksum, update),
        )
        .is_ok()
    }

    fn reset(&mut self) {
        self.clear(&mut |_| {});
    }
}

/// Replays `records` into `book` from empty; returns the checksum of the updates and how many
/// records were accepted.
fn replay(book: &mut impl Book, records: &[Record]) -> (u64, usize) {
    book.reset();
    let mut checksum = 0u64;
    let mut accepted = 0usize;
    for record in records {
        accepted += usize::from(book.apply_record(black_box(record), &mut checksum));
    }
    (checksum, accepted)
}

/// Both books replay the workload and must end the same; prints what the stream looks like.
fn check_books_agree(workload: &Workload) {
    let mut fast = MboBook::with_capacity(ORDERS, LEVELS_PER_SIDE);
    let mut plain = PlainMboBook::new();
    let fast_run = replay(&mut fast, &workload.records);
    let plain_run = replay(&mut plain, &workload.records);
    assert_eq!(fast_run, plain_run, "{}: updates differ", workload.name);
    assert_eq!(
        fast_run.1,
        workload.records.len(),
        "{}: rejects",
        workload.name
    );
    for side in [BookSide::Bid, BookSide::Ask] {
        assert_eq!(fast.levels(side), plain.levels(side), "{}", workload.name);
    }
    assert_eq!(fast.orders(), plain.orders(), "{}", workload.name);
    for order_id in plain.order_ids() {
        assert_eq!(
            fast.order(order_id),
            plain.order(order_id),
            "{}",
            workload.name
        );
    }
    let mut actions = [0usize; 5];
    for record in &workload.records {
        if let Some(slot) = b"ACMTF".iter().position(|&a| a == record.action) {
            actions[slot] += 1;
        }
    }
    let share = |n: usize| 100.0 * n as f64 / workload.records.len() as f64;
    println!(
        "{}: {} records (A {:.0}%, C {:.0}%, M {:.0}%, T {:.0}%, F {:.0}%), books agree; at the \
         end {} orders rest on {} bid and {} ask levels",
        workload.name,
        workload.records.len(),
        share(actions[0]),
        share(actions[1]),
        share(actions[2]),
        share(actions[3]),
        share(actions[4]),
        fast.orders(),
        fast.level_count(BookSide::Bid),
        fast.level_count(BookSide::Ask),
    );
}

fn time<T>(work: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    black_box(work());
    start.elapsed()
}

/// Replays the two books in turn, round after round, and prints each one's fastest replay. On a
/// shared 2-core VM other processes steal whole samples; interleaving and keeping the minimum
/// compares the books under the same conditions, as `benches/book.rs` does.
fn paired_minimums(workload: &Workload) {
    const ROUNDS: usize = 10;
    let mut fast = MboBook::with_capacity(ORDERS, LEVELS_PER_SIDE);
    let mut plain = PlainMboBook::new();
    let per_record = |elapsed: Duration| elapsed.as_nanos() as f64 / workload.records.len() as f64;
    let (mut fast_best, mut plain_best) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        fast_best = fast_best.min(per_record(time(|| replay(&mut fast, &workload.records))));
        plain_best = plain_best.min(per_record(time(|| replay(&mut plain, &workload.records))));
    }
    println!(
        "{}, paired minimum of {ROUNDS} rounds: fast {fast_best:.1} ns/record ({:.1} M records/s), \
         plain {plain_best:.1} ns/record ({:.1} M records/s), plain/fast {:.2}x",
        workload.name,
        1e3 / fast_best,
        1e3 / plain_best,
        plain_best / fast_best,
    );
}

fn bench_mbo(c: &mut Criterion) {
    let workloads = workloads();
    for workload in &workloads {
        check_books_agree(workload);
    }
    for workload in &workloads {
        paired_minimums(workload);
    }
    for workload in &workloads {
        let mut group = c.benchmark_group(workload.name);
        group.throughput(Throughput::Elements(workload.records.len() as u64));
        let mut fast = MboBook::with_capacity(ORDERS, LEVELS_PER_SIDE);
        group.bench_function("fast", |b| {
            b.iter(|| replay(black_box(&mut fast), &workload.records))
        });
        // The plain book is reused the same way: its `clear` keeps the `HashMap`'s capacity
        // (the `BTreeMap`s allocate nodes as they grow in any case).
        let mut plain = PlainMboBook::new();
        group.bench_function("plain", |b| {
            b.iter(|| replay(black_box(&mut plain), &workload.records))
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(8));
    targets = bench_mbo
}
criterion_main!(benches);
