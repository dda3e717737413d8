//! `/metrics` in the Prometheus text exposition format (0.0.4), rendered on the control thread
//! from counters and histograms the hot threads publish, and handed to the serving thread
//! (`control::publish`), which adds its own counters.

use super::Session;
use crate::metrics::LatencyCollector;
use std::fmt::Write;

/// Bucket bounds of `tickwire_latency_seconds`, in nanoseconds: 1-2.5-5 steps from 1 µs to
/// 10 s, which spans a loopback hop to a stalled connection. Fixed, so that histograms of
/// every appliance aggregate.
pub const LATENCY_BUCKETS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

impl Session {
    /// Why the appliance is not ready; empty when every venue is live and fresh and every hot
    /// thread runs.
    pub fn health_problems(&self) -> Vec<String> {
        let mut problems = self.venues.health_problems();
        if !self.runtime.all_running() {
            problems.push("a hot thread ended".to_owned());
        }
        problems
    }

    /// Every metric, in the Prometheus text format.
    pub fn render_metrics(&mut self) -> String {
        let mut out = String::with_capacity(16 << 10);
        let runtime = &mut self.runtime;
        let counters: [(&str, &str, u64); 4] = [
            (
                "tickwire_events_total",
                "Events the strategy thread received.",
                runtime.events_received.get(),
            ),
            (
                "tickwire_gap_events_total",
                "Gap events the strategy thread received.",
                runtime.gaps.get(),
            ),
            (
                "tickwire_frames_undecoded_total",
                "Frames from a connection without a feed.",
                runtime.frames_undecoded.get(),
            ),
            (
                "tickwire_print_lines_dropped_total",
                "Printed event lines and strategy summaries lost because stdout did not keep up.",
                self.printed.iter().map(|reader| reader.dropped()).sum(),
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_ring_drops_total Items a full ring refused (dropped and counted, never blocked on).\n\
             # TYPE tickwire_ring_drops_total counter\n\
             tickwire_ring_drops_total{{ring=\"frame\"}} {}\n\
             tickwire_ring_drops_total{{ring=\"event\"}} {}",
            runtime.frame_ring.overflows(),
            runtime.event_ring.overflows()
        );
        let _ = writeln!(
            out,
            "# HELP tickwire_ring_high_water The most a ring's consumer found waiting in one drain (frame ring: bytes; event ring: events).\n\
             # TYPE tickwire_ring_high_water gauge\n\
             tickwire_ring_high_water{{ring=\"frame\"}} {}\n\
             tickwire_ring_high_water{{ring=\"event\"}} {}",
            runtime.frame_ring.high_water(),
            runtime.event_ring.high_water()
        );
        render_decoders(&mut out, runtime);
        if let Some(bus) = &self.bus {
            bus.render_metrics(&mut out, &runtime.bus_book_requests);
        }
        if let Some(recorder) = &self.recorder {
            recorder.render_metrics(&mut out);
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_thread_loops_total Poll-loop rounds per hot thread (its heartbeat).\n\
             # TYPE tickwire_thread_loops_total counter"
        );
        for (name, beats) in &runtime.heartbeats {
            let _ = writeln!(
                out,
                "tickwire_thread_loops_total{{thread=\"{}\"}} {}",
                super::links::label(name),
                beats.get()
            );
        }
        // Venue feeds: messages by the venue's own kinds, what was dropped and why, events by
        // kind, book events, bytes.
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_messages_total Venue messages the venue's feed delivered, by the venue's own message kind.\n\
             # TYPE tickwire_venue_messages_total counter"
        );
        for (venue, feed) in &self.feeds {
            let venue = super::links::label(venue);
            for (kind, value) in feed.messages() {
                let _ = writeln!(
                    out,
                    "tickwire_venue_messages_total{{venue=\"{venue}\",kind=\"{}\"}} {value}",
                    kind.name
                );
            }
        }
        // What a feed counts beside its messages (a datagram venue's per-line duplicates,
        // kernel drops, re-requests, gaps).
        let mut tally_help = false;
        for (venue, feed) in &self.feeds {
            let venue = super::links::label(venue);
            for (name, value) in feed.tallies() {
                if !tally_help {
                    tally_help = true;
                    let _ = writeln!(
                        out,
                        "# HELP tickwire_venue_feed_counts_total What a venue's feed counts beside its messages, by name: per line of a datagram venue the messages it delivered first, its duplicates and the kernel's drops; re-requests, gaps given up.\n\
                         # TYPE tickwire_venue_feed_counts_total counter"
                    );
                }
                let _ = writeln!(
                    out,
                    "tickwire_venue_feed_counts_total{{venue=\"{venue}\",count=\"{name}\"}} {value}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_messages_dropped_total Venue messages dropped, by reason: malformed (did not decode), unknown_symbol (for a symbol the venue file does not list), duplicate (delivered already).\n\
             # TYPE tickwire_venue_messages_dropped_total counter"
        );
        for (venue, feed) in &self.feeds {
            let venue = super::links::label(venue);
            for (reason, value) in [
                ("malformed", feed.malformed.get()),
                ("unknown_symbol", feed.unknown_symbol.get()),
                ("duplicate", feed.duplicates.get()),
            ] {
                let _ = writeln!(
                    out,
                    "tickwire_venue_messages_dropped_total{{venue=\"{venue}\",reason=\"{reason}\"}} {value}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_replies_dropped_total Venue replies to the control thread's requests dropped because it did not take them in time.\n\
             # TYPE tickwire_venue_replies_dropped_total counter"
        );
        for (venue, feed) in &self.feeds {
            let _ = writeln!(
                out,
                "tickwire_venue_replies_dropped_total{{venue=\"{}\"}} {}",
                super::links::label(venue),
                feed.replies_dropped.get()
            );
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_events_total Normalized events written for the strategy, by venue and event kind.\n\
             # TYPE tickwire_venue_events_total counter"
        );
        for ((venue, _), events) in self.feeds.iter().zip(&runtime.venue_events) {
            let venue = super::links::label(venue);
            for kind in crate::event::EventKind::ALL {
                let _ = writeln!(
                    out,
                    "tickwire_venue_events_total{{venue=\"{venue}\",kind=\"{}\"}} {}",
                    kind.name(),
                    events.get(kind)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_book_events_total Order book events: sync (a snapshot applied), gap (continuity lost), resync (the book rebuilt from a new snapshot), refused (an update the book refused, unchanged), saturated (a size above what an event holds), limit (a book dropped or a symbol mapping refused at a configured bound, with a gap).\n\
             # TYPE tickwire_venue_book_events_total counter"
        );
        for (venue, feed) in &self.feeds {
            let venue = super::links::label(venue);
            for (kind, value) in [
                ("sync", feed.book_syncs.get()),
                ("gap", feed.book_gaps.get()),
                ("resync", feed.book_resyncs.get()),
                ("refused", feed.book_refused.get()),
                ("saturated", feed.book_saturated.get()),
                ("limit", feed.book_limits.get()),
            ] {
                let _ = writeln!(
                    out,
                    "tickwire_venue_book_events_total{{venue=\"{venue}\",event=\"{kind}\"}} {value}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_received_bytes_total Payload bytes handed to the venue's decoder.\n\
             # TYPE tickwire_venue_received_bytes_total counter"
        );
        for ((venue, _), (_, bytes)) in self.feeds.iter().zip(&runtime.venue_traffic) {
            let _ = writeln!(
                out,
                "tickwire_venue_received_bytes_total{{venue=\"{}\"}} {}",
                super::links::label(venue),
                bytes.get()
            );
        }
        self.venues.render_metrics(&mut out, self.clock.now_ns());
        // Latency per stage, since start, as cumulative buckets (hdrhistogram's counts at or
        // below each bound, to its 3 significant digits).
        let _ = writeln!(
            out,
            "# HELP tickwire_latency_seconds Per-stage latency since start: receive (the network \
             thread reaping the bytes) to decoded (the decoder's batch done), decoded (published) \
             to the strategy taking the event, receive to the strategy.\n\
             # TYPE tickwire_latency_seconds histogram"
        );
        let mut stages: Vec<(&str, &mut LatencyCollector)> = vec![
            ("receive_to_decoded", &mut runtime.receive_to_decoded),
            ("decoded_to_strategy", &mut runtime.decoded_to_strategy),
            ("receive_to_strategy", &mut runtime.wire_to_strategy),
        ];
        if let Some(send) = runtime.send_to_strategy.as_mut() {
            stages.push(("send_to_strategy", send));
        }
        for (stage, collector) in stages {
            collector.collect();
            let total = collector.total();
            for bound_ns in LATENCY_BUCKETS_NS {
                let count = if total.is_empty() {
                    0
                } else {
                    total.count_between(0, bound_ns)
                };
                let _ = writeln!(
                    out,
                    "tickwire_latency_seconds_bucket{{stage=\"{stage}\",le=\"{}\"}} {count}",
                    bound_ns as f64 / 1e9
                );
            }
            let sum: f64 = total
                .iter_recorded()
                .map(|value| value.value_iterated_to() as f64 * value.count_at_value() as f64)
                .sum();
            let _ = writeln!(
                out,
                "tickwire_latency_seconds_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {}\n\
                 tickwire_latency_seconds_sum{{stage=\"{stage}\"}} {:.9}\n\
                 tickwire_latency_seconds_count{{stage=\"{stage}\"}} {}",
                total.len(),
                sum / 1e9,
                total.len()
            );
        }
        let (rss, peak) = memory_kb();
        let _ = writeln!(
            out,
            "# HELP tickwire_resident_memory_bytes Resident set size.\n\
             # TYPE tickwire_resident_memory_bytes gauge\ntickwire_resident_memory_bytes {}\n\
             # HELP tickwire_resident_memory_peak_bytes Peak resident set size.\n\
             # TYPE tickwire_resident_memory_peak_bytes gauge\ntickwire_resident_memory_peak_bytes {}",
            rss * 1024,
            peak * 1024
        );
        out
    }
}

/// `VmRSS` and `VmHWM` from `/proc/self/status`, in KiB (0 where unreadable).
pub fn memory_kb() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Per decoder: events, batches, busy time, its rings' drops and fill, undecoded frames; and
/// each venue's decoder.
fn render_decoders(out: &mut String, runtime: &crate::pipeline::Runtime) {
    use std::fmt::Write as _;
    type Family = (
        &'static str,
        &'static str,
        &'static str,
        fn(&crate::pipeline::DecoderView) -> String,
    );
    let families: [Family; 8] = [
        (
            "tickwire_decoder_events_total",
            "counter",
            "Events a decoder published to the strategy (and the bus).",
            |view| view.load.events.get().to_string(),
        ),
        (
            "tickwire_decoder_batches_total",
            "counter",
            "Publications (batches) a decoder's events went out in; events / batches is the mean batch size.",
            |view| view.load.publications.get().to_string(),
        ),
        (
            "tickwire_decoder_busy_seconds_total",
            "counter",
            "Time a decoder spent in poll rounds that found work.",
            |view| format!("{:.9}", view.load.busy_ns.get() as f64 / 1e9),
        ),
        (
            "tickwire_decoder_frames_undecoded_total",
            "counter",
            "Frames a decoder had no feed for.",
            |view| view.frames_undecoded.get().to_string(),
        ),
        (
            "tickwire_decoder_frame_ring_drops_total",
            "counter",
            "Frames a decoder's full frame ring refused (the decoder fell behind).",
            |view| view.frame_ring.overflows().to_string(),
        ),
        (
            "tickwire_decoder_event_ring_drops_total",
            "counter",
            "Events a decoder's full event ring refused (the strategy fell behind).",
            |view| view.event_ring.overflows().to_string(),
        ),
        (
            "tickwire_decoder_frame_ring_high_water",
            "gauge",
            "The most bytes a decoder found waiting in its frame ring in one drain.",
            |view| view.frame_ring.high_water().to_string(),
        ),
        (
            "tickwire_decoder_event_ring_high_water",
            "gauge",
            "The most events the strategy found waiting in a decoder's event ring in one drain.",
            |view| view.event_ring.high_water().to_string(),
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (index, view) in runtime.decoders.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{decoder=\"{index}\",thread=\"{}\"}} {}",
                super::links::label(&view.thread),
                value(view)
            );
        }
    }
}
