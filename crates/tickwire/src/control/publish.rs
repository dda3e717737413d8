//! What the control thread hands the serving thread (`serve`): every [`PUBLISH_EVERY_NS`] and
//! whenever a connection changes state, one `serve::Published` with the venues' view, the
//! health problems, the Prometheus text and the recent latency percentiles.

use super::Session;
use crate::serve::snapshot::{LatencyPoint, Published, StageLatency};
use hdrhistogram::Histogram;
use std::sync::Arc;

/// How often the control thread publishes for the serving thread: a scrape or a status page
/// sees numbers at most this old. Rendering everything takes tens of microseconds.
pub const PUBLISH_EVERY_NS: u64 = 100_000_000;
/// The latency percentiles and message rates cover at least this long a window.
const WINDOW_NS: u64 = 1_000_000_000;
/// How many windows of latency the control thread keeps for the status page's plot (two
/// minutes at one a second).
pub const LATENCY_HISTORY: usize = 120;

/// The previous window's totals, from which the next window's rates and percentiles are taken.
#[derive(Default)]
pub struct Window {
    pub(super) published_ns: u64,
    started_ns: u64,
    /// Per venue: messages delivered at the window's start.
    messages: Vec<u64>,
    rates: Vec<f64>,
    /// Per stage: the since-start histogram's recorded buckets at the window's start, as
    /// `(value, count)`: a few hundred pairs rather than a 200 KiB copy of the histogram.
    totals: Vec<Vec<(u64, u64)>>,
    latency: Vec<StageLatency>,
    /// The last [`LATENCY_HISTORY`] windows' latency, oldest first; replaced whole once a
    /// window, so that each publish shares it rather than copying it.
    history: Arc<Vec<LatencyPoint>>,
    /// Windows closed since the start.
    windows: u64,
}

impl Session {
    /// Publishes for the serving thread, if there is one.
    pub(super) fn publish(&mut self, now_ns: u64) {
        if self.http.is_none() {
            return;
        }
        let published = self.build_published(now_ns);
        if let Some(http) = &self.http {
            http.publish(published);
        }
        self.window.published_ns = now_ns;
    }

    /// Everything the serving thread shows.
    pub(super) fn build_published(&mut self, now_ns: u64) -> Published {
        // Renders first: it merges what the recorders handed over into the totals.
        let metrics_text = self.render_metrics();
        let messages: Vec<u64> = self
            .feeds
            .iter()
            .map(|(_, feed)| feed.messages().map(|(_, count)| count).sum())
            .collect();
        let elapsed_ns = now_ns.saturating_sub(self.window.started_ns);
        if elapsed_ns >= WINDOW_NS || self.window.messages.len() != messages.len() {
            let seconds = elapsed_ns as f64 / 1e9;
            self.window.rates = messages
                .iter()
                .enumerate()
                .map(|(index, &now)| {
                    let before = self.window.messages.get(index).copied().unwrap_or(now);
                    if seconds > 0.0 {
                        now.saturating_sub(before) as f64 / seconds
                    } else {
                        0.0
                    }
                })
                .collect();
            let stages = self.stage_totals();
            let mut latency = Vec::with_capacity(stages.len());
            let mut totals = Vec::with_capacity(stages.len());
            for (index, (stage, total)) in stages.into_iter().enumerate() {
                let before = self.window.totals.get(index).map_or(&[][..], Vec::as_slice);
                let recent = difference(&total, before);
                let count: u64 = recent.iter().map(|&(_, count)| count).sum();
                latency.push(StageLatency {
                    stage,
                    window_seconds: seconds,
                    count,
                    p50_ns: quantile(&recent, count, 0.5),
                    p90_ns: quantile(&recent, count, 0.9),
                    p99_ns: quantile(&recent, count, 0.99),
                    p999_ns: quantile(&recent, count, 0.999),
                    max_ns: recent.last().map_or(0, |&(value, _)| value),
                });
                totals.push(total);
            }
            self.window.windows += 1;
            let mut history = Vec::with_capacity(LATENCY_HISTORY);
            let keep = self.window.history.len().min(LATENCY_HISTORY - 1);
            history.extend_from_slice(&self.window.history[self.window.history.len() - keep..]);
            history.push(LatencyPoint {
                window: self.window.windows,
                stages: latency.clone(),
            });
            self.window.history = Arc::new(history);
            self.window.latency = latency;
            self.window.totals = totals;
            self.window.messages = messages.clone();
            self.window.started_ns = now_ns;
        }
        let mut venues = self.venues.views(now_ns);
        for (index, venue) in venues.iter_mut().enumerate() {
            let decoder = self.runtime.decoder_of(index as crate::event::VenueId);
            venue.decoder = decoder;
            venue.decoder_thread = self
                .runtime
                .decoders
                .get(decoder)
                .map(|view| view.thread.clone())
                .unwrap_or_default();
            venue.messages_total = messages.get(index).copied().unwrap_or(0);
            if let Some((_, feed)) = self.feeds.get(index) {
                venue.feed_counts = feed.tallies().collect();
            }
            venue.messages_per_second = self.window.rates.get(index).copied().unwrap_or(0.0);
            venue.received_bytes_total = self
                .runtime
                .venue_traffic
                .get(index)
                .map_or(0, |(_, bytes)| bytes.get());
        }
        Published {
            metrics_text,
            problems: self.health_problems(),
            venues,
            latency: self.window.latency.clone(),
            latency_history: Arc::clone(&self.window.history),
        }
    }

    /// Each stage's since-start histogram's recorded buckets.
    fn stage_totals(&self) -> Vec<(&'static str, Vec<(u64, u64)>)> {
        let runtime = &self.runtime;
        let mut stages = vec![
            (
                "receive_to_decoded",
                recorded(runtime.receive_to_decoded.total()),
            ),
            (
                "decoded_to_strategy",
                recorded(runtime.decoded_to_strategy.total()),
            ),
            (
                "receive_to_strategy",
                recorded(runtime.wire_to_strategy.total()),
            ),
        ];
        if let Some(send) = runtime.send_to_strategy.as_ref() {
            stages.push(("send_to_strategy", recorded(send.total())));
        }
        stages
    }
}

/// The histogram's non-empty buckets as `(highest equivalent value, count)`, lowest first.
fn recorded(histogram: &Histogram<u64>) -> Vec<(u64, u64)> {
    histogram
        .iter_recorded()
        .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
        .collect()
}

/// `now - before`, bucket by bucket (both lowest first; counts only grow, so a bucket of
/// `before` is always in `now`), without the buckets left empty.
fn difference(now: &[(u64, u64)], before: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut before = before.iter().peekable();
    let mut out = Vec::new();
    for &(value, count) in now {
        while before.next_if(|&&(earlier, _)| earlier < value).is_some() {}
        let was = before
            .next_if(|&&(earlier, _)| earlier == value)
            .map_or(0, |&(_, count)| count);
        if count > was {
            out.push((value, count - was));
        }
    }
    out
}

/// The value at quantile `q` of buckets holding `total` values, as hdrhistogram reports it
/// (the highest equivalent value of the bucket holding the value of rank ceil(q * total)).
fn quantile(buckets: &[(u64, u64)], total: u64, q: f64) -> u64 {
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(value, count) in buckets {
        seen += count;
        if seen >= rank {
            return value;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_percentiles_match_a_histogram_of_the_window_alone() {
        let mut total = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
        let mut window = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).unwrap();
        for value in 1..5_000u64 {
            total.record(value * 37).unwrap();
        }
        let before = recorded(&total);
        for value in 1..3_000u64 {
            let value = 1_000 + value * value;
            total.record(value).unwrap();
            window.record(value).unwrap();
        }
        let recent = difference(&recorded(&total), &before);
        let count: u64 = recent.iter().map(|&(_, count)| count).sum();
        assert_eq!(count, window.len());
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                quantile(&recent, count, q),
                window.highest_equivalent(window.value_at_quantile(q)),
                "{q}"
            );
        }
        assert_eq!(quantile(&[], 0, 0.5), 0);
    }
}
