//! Counters and latency histograms that hot threads update without locks and the control thread
//! reads.
//!
//! - [`counter`] gives a [`CounterWriter`] (one per counter, owned by the one thread that counts)
//!   and any number of [`CounterReader`]s. One writer means an increment is a plain load and store
//!   on a line nobody else writes: no `lock`-prefixed instruction, no contention.
//! - [`latency`] gives a [`LatencyRecorder`] for the hot thread and a [`LatencyCollector`] for the
//!   control thread. The recorder writes into its own `hdrhistogram` (no allocation once created);
//!   when the collector asks, the recorder swaps in an empty histogram and sends the full one
//!   over an SPSC ring, and the collector merges it, resets it and sends it back. Histograms
//!   circulate; none is ever allocated or shared in steady state.
//!
//! **Invariant:** a hot thread's metric update never blocks, allocates or makes a syscall; if
//! the control thread falls behind, the hot thread keeps recording into the histogram it has and
//! nothing is lost, only reported later.

use crate::ring::spsc;
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Creates a counter: one writer, cloneable readers.
pub fn counter() -> (CounterWriter, CounterReader) {
    let cell = Arc::new(CachePadded::new(AtomicU64::new(0)));
    (
        CounterWriter {
            cell: cell.clone(),
            value: 0,
        },
        CounterReader { cell },
    )
}

/// Several counters read as one: their sum (a counter each decoder keeps of its own).
#[derive(Clone, Default)]
pub struct CounterSum {
    parts: Vec<CounterReader>,
}

impl CounterSum {
    pub fn new(parts: Vec<CounterReader>) -> CounterSum {
        CounterSum { parts }
    }

    pub fn get(&self) -> u64 {
        self.parts.iter().map(CounterReader::get).sum()
    }

    /// The counters summed, in order.
    pub fn parts(&self) -> &[CounterReader] {
        &self.parts
    }
}

/// The one writer of a counter. Not `Clone`: a second writer would lose increments.
pub struct CounterWriter {
    cell: Arc<CachePadded<AtomicU64>>,
    /// The writer's own copy, so an increment never reads the shared line.
    value: u64,
}

impl CounterWriter {
    #[inline]
    pub fn add(&mut self, amount: u64) {
        self.value = self.value.wrapping_add(amount);
        self.cell.store(self.value, Ordering::Relaxed);
    }

    #[inline]
    pub fn increment(&mut self) {
        self.add(1);
    }

    pub fn get(&self) -> u64 {
        self.value
    }
}

/// Reads a counter from any thread.
#[derive(Clone)]
pub struct CounterReader {
    cell: Arc<CachePadded<AtomicU64>>,
}

impl CounterReader {
    pub fn get(&self) -> u64 {
        self.cell.load(Ordering::Relaxed)
    }
}

/// Histograms in circulation per recorder: the one being recorded and one spare, which is with
/// the collector (or on its way there or back) between hand-overs. A third would only let the
/// recorder hand over twice before the collector has merged once, which it never needs: the
/// collector asks once per report and answers at once, and a recorder that finds no spare
/// keeps recording and hands over on the next call (nothing is lost). Each histogram is about
/// 28 KiB resident (2 digits), so this is 28 KiB per stage the lean profile does not keep.
/// Both rings can hold all of them, so a push never fails.
const HISTOGRAMS_PER_RECORDER: usize = 2;

/// Why a latency histogram could not be created.
#[derive(Debug, thiserror::Error)]
#[error("latency histogram `{stage}`: {source}")]
pub struct HistogramError {
    stage: String,
    source: hdrhistogram::CreationError,
}

/// Creates a recorder/collector pair for one stage, recording values from 1 to
/// `highest_trackable_ns` with `significant_digits` (1 to 5) of precision. Values above the
/// highest are recorded as the highest (and counted in [`LatencyCollector::saturated`]).
pub fn latency(
    stage: &str,
    highest_trackable_ns: u64,
    significant_digits: u8,
) -> Result<(LatencyRecorder, LatencyCollector), HistogramError> {
    let make = || {
        Histogram::<u64>::new_with_bounds(1, highest_trackable_ns.max(2), significant_digits)
            .map_err(|source| HistogramError {
                stage: stage.to_owned(),
                source,
            })
    };
    let current = Box::new(make()?);
    let (full_tx, full_rx) = spsc::ring(HISTOGRAMS_PER_RECORDER);
    let (mut empty_tx, empty_rx) = spsc::ring(HISTOGRAMS_PER_RECORDER);
    for _ in 1..HISTOGRAMS_PER_RECORDER {
        if empty_tx.try_push(Box::new(make()?)).is_err() {
            unreachable!("the ring holds every histogram in circulation");
        }
    }
    let shared = Arc::new(RecorderShared {
        flush_requested: CachePadded::new(AtomicBool::new(false)),
        saturated: CachePadded::new(AtomicU64::new(0)),
    });
    let interval = make()?;
    let total = make()?;
    let own_total = make()?;
    Ok((
        LatencyRecorder {
            current,
            highest: highest_trackable_ns.max(2),
            saturated: 0,
            full_tx,
            empty_rx,
            shared: shared.clone(),
        },
        LatencyCollector {
            stage: stage.to_owned(),
            sources: vec![Source {
                full_rx,
                empty_tx,
                shared,
                total: own_total,
            }],
            interval,
            total,
        },
    ))
}

struct RecorderShared {
    /// Set by the collector, cleared by the recorder when it hands over its histogram.
    flush_requested: CachePadded<AtomicBool>,
    /// Values recorded above the highest trackable value; written by the recorder only.
    saturated: CachePadded<AtomicU64>,
}

/// The hot thread's side: record, and hand over when asked.
pub struct LatencyRecorder {
    current: Box<Histogram<u64>>,
    highest: u64,
    saturated: u64,
    full_tx: spsc::Producer<Box<Histogram<u64>>>,
    empty_rx: spsc::Consumer<Box<Histogram<u64>>>,
    shared: Arc<RecorderShared>,
}

impl LatencyRecorder {
    /// Records one latency in ns. Never allocates: out-of-range values are clamped.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if ns > self.highest {
            self.saturated += 1;
            self.shared
                .saturated
                .store(self.saturated, Ordering::Relaxed);
        }
        self.current.saturating_record(ns.max(1));
    }

    /// Values recorded so far that have not been handed over.
    pub fn pending(&self) -> u64 {
        self.current.len()
    }

    /// Hands the current histogram to the collector if it asked and a spare is back. Cheap when
    /// it did not ask (one relaxed load of a line the collector rarely writes): call it once per
    /// batch or when idle.
    #[inline]
    pub fn flush_if_requested(&mut self) {
        if self.shared.flush_requested.load(Ordering::Relaxed) {
            self.flush();
        }
    }

    /// Hands the current histogram over now if a spare is back; otherwise keeps recording into
    /// it (nothing is lost) and tries again on the next call.
    pub fn flush(&mut self) {
        let Some(spare) = self.empty_rx.try_pop() else {
            return;
        };
        let full = std::mem::replace(&mut self.current, spare);
        if let Err(full) = self.full_tx.try_push(full) {
            // Cannot happen: the ring holds every histogram there is. Keep the data regardless
            // (the spare leaves circulation; no recorded value is lost).
            self.current = full;
            return;
        }
        self.shared.flush_requested.store(false, Ordering::Relaxed);
    }
}

/// One recorder's rings, as its collector holds them.
struct Source {
    full_rx: spsc::Consumer<Box<Histogram<u64>>>,
    empty_tx: spsc::Producer<Box<Histogram<u64>>>,
    shared: Arc<RecorderShared>,
    /// This recorder's own values since start (a joined collector's parts apart: one
    /// decoder's receive-to-decoded).
    total: Histogram<u64>,
}

/// The control thread's side: one recorder's, or several merged ([`LatencyCollector::join`]:
/// the decoders' receive-to-decoded, one histogram for all of them).
pub struct LatencyCollector {
    stage: String,
    sources: Vec<Source>,
    interval: Histogram<u64>,
    /// Everything collected since start (for the metrics endpoint).
    total: Histogram<u64>,
}

impl LatencyCollector {
    pub fn stage(&self) -> &str {
        &self.stage
    }

    /// Asks the recorders for their histograms (each answers at its next
    /// `flush_if_requested`).
    pub fn request(&self) {
        for source in &self.sources {
            source.shared.flush_requested.store(true, Ordering::Relaxed);
        }
    }

    /// Takes `other`'s recorders in: from now on this collector merges theirs with its own
    /// (made with the same bounds, as every stage's are). What `other` had collected is added.
    pub fn join(&mut self, other: LatencyCollector) {
        let _ = self.interval.add(&other.interval);
        let _ = self.total.add(&other.total);
        self.sources.extend(other.sources);
    }

    /// Merges whatever the recorders have handed over into the interval histogram, returns the
    /// spares, and asks for the next hand-over. Returns how many values arrived.
    pub fn collect(&mut self) -> u64 {
        let mut arrived = 0;
        for source in &mut self.sources {
            while let Some(mut histogram) = source.full_rx.try_pop() {
                arrived += histogram.len();
                // Both come from the same bounds, so adding cannot fail; on the impossible error
                // the values are dropped from the report, never the hot path.
                let _ = self.interval.add(&*histogram);
                let _ = self.total.add(&*histogram);
                let _ = source.total.add(&*histogram);
                histogram.reset();
                if source.empty_tx.try_push(histogram).is_err() {
                    unreachable!("the ring holds every histogram in circulation");
                }
            }
        }
        self.request();
        arrived
    }

    /// Everything collected since the last [`LatencyCollector::take_interval`].
    pub fn interval(&self) -> &Histogram<u64> {
        &self.interval
    }

    /// Everything collected since start.
    pub fn total(&self) -> &Histogram<u64> {
        &self.total
    }

    /// Everything collected since start from each recorder apart, in the order they were
    /// joined (the decoders' receive-to-decoded: decoder 0 first).
    pub fn source_totals(&self) -> impl Iterator<Item = &Histogram<u64>> + '_ {
        self.sources.iter().map(|source| &source.total)
    }

    /// Returns a summary of the interval and starts a new one.
    pub fn take_interval(&mut self) -> LatencySummary {
        let summary = LatencySummary::of(&self.interval);
        self.interval.reset();
        summary
    }

    /// Values the recorders clamped to the highest trackable value, since start.
    pub fn saturated(&self) -> u64 {
        self.sources
            .iter()
            .map(|source| source.shared.saturated.load(Ordering::Relaxed))
            .sum()
    }
}

/// Percentiles of one histogram, for logs and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        if histogram.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: histogram.len(),
            min_ns: histogram.min(),
            p50_ns: histogram.value_at_quantile(0.50),
            p90_ns: histogram.value_at_quantile(0.90),
            p99_ns: histogram.value_at_quantile(0.99),
            p999_ns: histogram.value_at_quantile(0.999),
            max_ns: histogram.max(),
        }
    }
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} min={}ns p50={}ns p90={}ns p99={}ns p99.9={}ns max={}ns",
            self.count,
            self.min_ns,
            self.p50_ns,
            self.p90_ns,
            self.p99_ns,
            self.p999_ns,
            self.max_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_has_one_writer_and_many_readers() {
        let (mut writer, reader) = counter();
        let other = reader.clone();
        writer.increment();
        writer.add(41);
        assert_eq!(writer.get(), 42);
        assert_eq!(reader.get(), 42);
        assert_eq!(other.get(), 42);
    }

    #[test]
    fn counter_is_exact_across_threads() {
        let (mut writer, reader) = counter();
        let hot = std::thread::spawn(move || {
            for _ in 0..1_000_000 {
                writer.increment();
            }
        });
        let mut last = 0;
        while !hot.is_finished() {
            let now = reader.get();
            assert!(now >= last, "a counter never goes back");
            last = now;
        }
        hot.join().unwrap();
        assert_eq!(reader.get(), 1_000_000);
    }

    #[test]
    fn every_recorded_value_reaches_the_collector() {
        let (mut recorder, mut collector) = latency("test", 1_000_000_000, 3).unwrap();
        // Nothing is handed over before the collector asks.
        recorder.record(100);
        recorder.flush_if_requested();
        assert_eq!(collector.collect(), 0);
        // Asked now (collect asks): the next check hands over.
        recorder.record(200);
        recorder.flush_if_requested();
        assert_eq!(recorder.pending(), 0);
        assert_eq!(collector.collect(), 2);
        // Many rounds: histograms circulate without loss.
        for round in 0..50u64 {
            for value in 1..=100 {
                recorder.record(value * 1_000 + round);
            }
            recorder.flush_if_requested();
            collector.collect();
        }
        let summary = collector.take_interval();
        assert_eq!(summary.count, 2 + 50 * 100);
        assert_eq!(summary.min_ns, 100);
        assert!(summary.max_ns >= 100_000 && summary.max_ns < 100_200);
        assert_eq!(collector.take_interval().count, 0);
    }

    #[test]
    fn a_joined_collector_keeps_each_recorders_values_apart_too() {
        let (mut first, mut collector) = latency("test", 1_000_000, 3).unwrap();
        let (mut second, other) = latency("test", 1_000_000, 3).unwrap();
        collector.join(other);
        collector.request();
        first.record(100);
        second.record(7_000);
        second.record(9_000);
        first.flush_if_requested();
        second.flush_if_requested();
        assert_eq!(collector.collect(), 3);
        assert_eq!(collector.total().len(), 3);
        let parts: Vec<(u64, u64)> = collector
            .source_totals()
            .map(|part| (part.len(), part.max()))
            .collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], (1, 100));
        assert_eq!(parts[1].0, 2);
        assert!(parts[1].1 >= 9_000 && parts[1].1 < 9_010);
    }

    #[test]
    fn a_slow_collector_loses_nothing() {
        let (mut recorder, mut collector) = latency("test", 1_000_000, 2).unwrap();
        collector.request();
        for _ in 0..10 {
            for _ in 0..10 {
                recorder.record(5_000);
            }
            // Only as many hand-overs as there are spares; then it keeps recording.
            recorder.flush();
        }
        collector.collect();
        recorder.flush();
        collector.collect();
        assert_eq!(collector.take_interval().count, 100);
    }

    #[test]
    fn out_of_range_values_are_clamped_and_counted() {
        let (mut recorder, mut collector) = latency("test", 1_000, 2).unwrap();
        recorder.record(0);
        recorder.record(5_000);
        collector.request();
        recorder.flush_if_requested();
        collector.collect();
        let summary = collector.take_interval();
        assert_eq!(summary.count, 2);
        assert_eq!(summary.min_ns, 1);
        assert!(summary.max_ns >= 1_000);
        assert_eq!(collector.saturated(), 1);
    }

    #[test]
    fn recorder_and_collector_work_across_threads() {
        let (mut recorder, mut collector) = latency("test", 10_000_000, 3).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let hot = std::thread::spawn(move || {
            for value in 1..=200_000u64 {
                recorder.record(value % 5_000 + 1);
                if value % 64 == 0 {
                    recorder.flush_if_requested();
                }
            }
            // Stay until everything is handed over.
            while recorder.pending() > 0 {
                recorder.flush_if_requested();
                std::thread::yield_now();
            }
            drop(done_tx);
        });
        let mut total = 0;
        loop {
            total += collector.collect();
            if done_rx.try_recv() == Err(std::sync::mpsc::TryRecvError::Disconnected) {
                total += collector.collect();
                break;
            }
            std::thread::yield_now();
        }
        hot.join().unwrap();
        assert_eq!(total, 200_000);
    }
}
