//! What the control thread hands the serving thread (`serve`): every [`PUBLISH_EVERY_NS`] and
//! whenever a connection changes state, one `serve::Published` with the venues' view, the
//! health problems, the Prometheus text and the recent latency percentiles.

use super::Session;
use crate::serve::snapshot::{Published, StageLatency};
use hdrhistogram::Histogram;

/// How often the control thread publishes for the serving thread: a scrape or a status page
/// sees numbers at most this old. Rendering everything takes tens of microseconds.
pub const PUBLISH_EVERY_NS: u64 = 100_000_000;
/// The latency percentiles and message rates cover at least this long a window.
const WINDOW_NS: u64 = 1_000_000_000;

/// The previous window's totals, from which the next window's rates and percentiles are taken.
#[derive(Default)]
pub struct Window {
    pub(super) published_ns: u64,
    started_ns: u64,
    /// Per venue: messages delivered at the window's start.
    messages: Vec<u64>,
    rates: Vec<f64>,
    /// Per stage: the since-start histogram at the window's start.
    totals: Vec<Histogram<u64>>,
    latency: Vec<StageLatency>,
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
                let mut recent = total.clone();
                if let Some(before) = self.window.totals.get(index) {
                    // The totals only grow, so the difference is the window; on the
                    // impossible error the window shows everything since start.
                    if recent.subtract(before).is_err() {
                        recent = total.clone();
                    }
                }
                latency.push(StageLatency {
                    stage,
                    window_seconds: seconds,
                    count: recent.len(),
                    p50_ns: recent.value_at_quantile(0.5),
                    p90_ns: recent.value_at_quantile(0.9),
                    p99_ns: recent.value_at_quantile(0.99),
                    p999_ns: recent.value_at_quantile(0.999),
                    max_ns: recent.max(),
                });
                totals.push(total);
            }
            self.window.latency = latency;
            self.window.totals = totals;
            self.window.messages = messages.clone();
            self.window.started_ns = now_ns;
        }
        let mut venues = self.venues.views(now_ns);
        for (index, venue) in venues.iter_mut().enumerate() {
            venue.messages_total = messages.get(index).copied().unwrap_or(0);
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
        }
    }

    /// Each stage's since-start histogram, copied.
    fn stage_totals(&self) -> Vec<(&'static str, Histogram<u64>)> {
        let runtime = &self.runtime;
        let mut stages = vec![
            (
                "receive_to_decoded",
                runtime.receive_to_decoded.total().clone(),
            ),
            (
                "decoded_to_strategy",
                runtime.decoded_to_strategy.total().clone(),
            ),
            (
                "receive_to_strategy",
                runtime.wire_to_strategy.total().clone(),
            ),
        ];
        if let Some(send) = runtime.send_to_strategy.as_ref() {
            stages.push(("send_to_strategy", send.total().clone()));
        }
        stages
    }
}
