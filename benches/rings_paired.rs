//! The ring comparison, paired: every round runs each ring once, in rotating order, and the
//! report gives each ring's median and, more to the point, the median of the per-round ratio
//! tickwire / peer.
//!
//! Why: on a VM the cost of moving a cache line between the two vCPUs changes over time (the host
//! moves vCPUs between physical cores), and per-item SPSC throughput is bimodal with it: the same
//! binary measures 25 or 70 M items/s from one minute to the next. A Criterion run measures one
//! ring for seconds, then the next, so two rings can land in different modes and compare by luck.
//! Alternating them every round puts both under the same conditions, so the per-round ratio is
//! stable even when the absolute numbers are not.
//!
//! Run: `cargo bench --bench rings_paired` (or `scripts/bench-rings`, which runs both targets).
//! `TICKWIRE_BENCH_ROUNDS` (default 15) sets the number of rounds.

mod ring_peers;

use ring_peers::*;
use std::time::Duration;
use tickwire::event::Event;

type Run = fn(u64) -> Duration;

struct Workload {
    name: &'static str,
    unit: &'static str,
    items: u64,
    /// (ring name, run); the first is tickwire.
    rings: Vec<(&'static str, Run)>,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then run one tiny round as
    // a smoke test.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let rounds: usize = if benching {
        std::env::var("TICKWIRE_BENCH_ROUNDS")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(15)
    } else {
        1
    };
    let scale = if benching { 1 } else { 100 };
    let (producer, consumer) = bench_cores();
    println!("paired ring comparison: {rounds} rounds, producer on core {producer}, consumer on core {consumer}");
    let workloads = [
        Workload {
            name: "u64 per item",
            unit: "M items/s",
            items: 2_000_000 / scale,
            rings: vec![
                ("tickwire", tickwire_per_item::<u64>),
                ("rtrb", rtrb_per_item::<u64>),
                ("crossbeam_array_queue", crossbeam_per_item::<u64>),
            ],
        },
        Workload {
            name: "64-byte event per item",
            unit: "M items/s",
            items: 2_000_000 / scale,
            rings: vec![
                ("tickwire", tickwire_per_item::<Event>),
                ("rtrb", rtrb_per_item::<Event>),
                ("crossbeam_array_queue", crossbeam_per_item::<Event>),
            ],
        },
        Workload {
            name: "u64 in batches of 64",
            unit: "M items/s",
            items: 10_000_000 / scale,
            rings: vec![
                ("tickwire", tickwire_batched::<u64>),
                ("rtrb", rtrb_batched::<u64>),
            ],
        },
        Workload {
            name: "64..320-byte frames",
            unit: "M frames/s",
            items: 1_000_000 / scale,
            rings: vec![
                ("tickwire_frame_ring", tickwire_frames),
                ("rtrb_bytes", rtrb_frames),
            ],
        },
        Workload {
            name: "round trip (ping-pong)",
            unit: "ns per round trip",
            items: 200_000 / scale,
            rings: vec![
                ("tickwire", tickwire_rt),
                ("rtrb", rtrb_rt),
                ("crossbeam_array_queue", crossbeam_rt),
            ],
        },
    ];
    println!();
    println!("| workload | ring | median | min..max over rounds | median ratio tickwire/ring (per round) |");
    println!("|---|---|---|---|---|");
    for workload in &workloads {
        let latency = workload.unit.starts_with("ns");
        let mut values: Vec<Vec<f64>> = vec![Vec::new(); workload.rings.len()];
        for round in 0..rounds {
            let count = workload.rings.len();
            for offset in 0..count {
                let index = (round + offset) % count;
                let elapsed = (workload.rings[index].1)(workload.items).as_secs_f64();
                let value = if latency {
                    elapsed * 1e9 / workload.items as f64
                } else {
                    workload.items as f64 / elapsed / 1e6
                };
                values[index].push(value);
            }
        }
        for (index, (ring_name, _)) in workload.rings.iter().enumerate() {
            // Ratio > 1 means tickwire is better (faster throughput, or shorter round trip).
            let mut ratios: Vec<f64> = values[0]
                .iter()
                .zip(&values[index])
                .map(|(ours, theirs)| {
                    if latency {
                        theirs / ours
                    } else {
                        ours / theirs
                    }
                })
                .collect();
            let ratio = if index == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}x", median(&mut ratios))
            };
            let mut sorted = values[index].clone();
            let (min, max) = (
                sorted.iter().copied().fold(f64::INFINITY, f64::min),
                sorted.iter().copied().fold(0.0, f64::max),
            );
            println!(
                "| {} | {} | {:.1} {} | {:.1}..{:.1} | {} |",
                workload.name,
                ring_name,
                median(&mut sorted),
                workload.unit,
                min,
                max,
                ratio
            );
        }
    }
    println!();
    println!("ratio: tickwire's advantage in the same round (above 1.00x: tickwire faster)");
}
