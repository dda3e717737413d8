//! Ring benchmarks: tickwire's rings beside `rtrb` and crossbeam's `ArrayQueue`, in one run.
//!
//! - `spsc_throughput/*`: items per second from a producer pinned to one core to a consumer pinned
//!   to another, per item (`try_push`/`try_pop` or the peer's equivalent) and in batches of 64
//!   (for 64-byte events also read in place: tickwire's `read_chunk` and rtrb's).
//! - `spsc_round_trip/*`: one item to an echo thread on the other core and back over a second
//!   ring; the one-way latency is half of it.
//! - `frame_throughput/*`: 64..320-byte frames (the size of Binance bookTicker and trade
//!   messages) through the frame ring, against `rtrb` used as a byte ring with a length prefix.
//!
//! Every consumer checks what it receives (sequence numbers in order, frame lengths and bytes),
//! so a broken ring cannot produce a fast number. Run with `scripts/bench-rings` (or
//! `cargo bench --bench rings`); see BENCHMARKING.md for the method and the results.

mod ring_peers;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ring_peers::*;
use std::time::Duration;
use tickwire::event::Event;

fn spsc_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("spsc_throughput");
    group.throughput(Throughput::Elements(ITEMS_PER_ITER));
    type Run = fn(u64) -> Duration;
    let runs: [(&str, &str, Run); 11] = [
        ("u64", "tickwire", tickwire_per_item::<u64>),
        ("u64", "rtrb", rtrb_per_item::<u64>),
        ("u64", "crossbeam_array_queue", crossbeam_per_item::<u64>),
        ("u64_batch64", "tickwire", tickwire_batched::<u64>),
        ("u64_batch64", "rtrb", rtrb_batched::<u64>),
        ("event64B", "tickwire", tickwire_per_item::<Event>),
        ("event64B", "rtrb", rtrb_per_item::<Event>),
        (
            "event64B",
            "crossbeam_array_queue",
            crossbeam_per_item::<Event>,
        ),
        ("event64B_batch64", "tickwire", tickwire_batched::<Event>),
        (
            "event64B_batch64",
            "tickwire_read_chunk",
            tickwire_read_chunk::<Event>,
        ),
        ("event64B_batch64", "rtrb", rtrb_batched::<Event>),
    ];
    for (item, ring_name, run) in runs {
        group.bench_function(BenchmarkId::new(ring_name, item), |b| {
            b.iter_custom(|iters| run(iters * ITEMS_PER_ITER))
        });
    }
    group.finish();
}

fn spsc_round_trip(c: &mut Criterion) {
    let mut group = c.benchmark_group("spsc_round_trip");
    group.bench_function("tickwire", |b| b.iter_custom(tickwire_rt));
    group.bench_function("rtrb", |b| b.iter_custom(rtrb_rt));
    group.bench_function("crossbeam_array_queue", |b| b.iter_custom(crossbeam_rt));
    group.finish();
}

fn frame_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame_throughput");
    group.throughput(Throughput::Elements(FRAMES_PER_ITER));
    group.bench_function("tickwire_frame_ring", |b| {
        b.iter_custom(|iters| tickwire_frames(iters * FRAMES_PER_ITER))
    });
    group.bench_function("rtrb_bytes", |b| {
        b.iter_custom(|iters| rtrb_frames(iters * FRAMES_PER_ITER))
    });
    group.finish();
}

fn config() -> Criterion {
    let (producer, consumer) = bench_cores();
    eprintln!("producer on core {producer}, consumer on core {consumer}");
    Criterion::default()
        .sample_size(40)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
}

criterion_group! {
    name = benches;
    config = config();
    targets = spsc_throughput, spsc_round_trip, frame_throughput
}
criterion_main!(benches);
