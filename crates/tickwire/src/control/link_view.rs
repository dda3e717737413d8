//! The view of the link logic: the appliance's health (`/healthz`) and the lifecycle and
//! per-stream metrics (Prometheus text), rendered from [`Venues`]' state and counters. Nothing
//! here decides or acts.

use super::links::{LinkCounters, Venues};
use crate::lifecycle::{ConnState, Reason};

/// A counter family of the lifecycle: its name, its help text, and how to read it.
type CounterFamily = (&'static str, &'static str, fn(&LinkCounters) -> u64);

/// Prometheus label values: backslash, double quote and line feed escaped.
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Venues {
    /// Every venue's connections and streams for `/v1/venues`; the feed counters (messages,
    /// rates, bytes) and the decoder are the caller's to fill.
    pub fn views(&self, now_ns: u64) -> Vec<crate::serve::snapshot::VenueView> {
        use crate::serve::snapshot::{ConnectionView, StreamView, VenueView};
        self.venues
            .iter()
            .enumerate()
            .map(|(index, links)| {
                let counters = self.counters(index);
                let connections = links
                    .shards
                    .iter()
                    .enumerate()
                    .map(|(index, shard)| {
                        let conn = &shard.active.conn;
                        ConnectionView {
                            index,
                            state: conn.state().name(),
                            reason: conn.last_reason().map(Reason::name),
                            failures: conn.failures(),
                        }
                    })
                    .collect();
                let streams = links
                    .streams_in_order()
                    .into_iter()
                    .map(|(stream, stale)| {
                        let last = links.activity.last_ns(stream);
                        StreamView {
                            name: links.stream_names[stream].clone(),
                            stale,
                            messages_total: links.activity.messages(stream),
                            last_message_age_seconds: (last > 0)
                                .then(|| now_ns.saturating_sub(last) as f64 / 1e9),
                        }
                    })
                    .collect();
                VenueView {
                    name: links.name.clone(),
                    decoder: 0,
                    decoder_thread: String::new(),
                    live: links.live(),
                    connections,
                    attempts_total: counters.attempts,
                    reconnects_total: counters.transitions.get(Reason::ClosedByVenue)
                        + counters.transitions.get(Reason::ConnectionLost)
                        + counters.transitions.get(Reason::ProtocolError),
                    messages_total: 0,
                    messages_per_second: 0.0,
                    received_bytes_total: 0,
                    streams,
                    feed_counts: std::collections::BTreeMap::new(),
                }
            })
            .collect()
    }

    /// Why the appliance is not healthy: every venue's connection that is not live, every
    /// stale stream. Empty when all is well.
    pub fn health_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for links in &self.venues {
            if !links.prepared {
                problems.push(format!(
                    "venue {}: its connection could not be prepared (see the log)",
                    links.name
                ));
                continue;
            }
            for (index, shard) in links.shards.iter().enumerate() {
                let conn = &shard.active.conn;
                if conn.state() != ConnState::Live {
                    // The reason it is where it is: `backing-off after dns-failed`.
                    let why = conn
                        .last_reason()
                        .map(|reason| format!(" after {}", reason.name()))
                        .unwrap_or_default();
                    problems.push(format!(
                        "venue {} connection {index}: {}{why} (failures in a row: {})",
                        links.name,
                        conn.state().name(),
                        conn.failures()
                    ));
                    continue;
                }
                for (offset, stale) in shard.stale_since.iter().enumerate() {
                    if stale.is_some() {
                        let stream = shard.streams[offset];
                        problems.push(format!(
                            "venue {}: stream {} stale",
                            links.name,
                            links.stream_names[stream].clone()
                        ));
                    }
                }
            }
        }
        problems
    }

    /// Appends every venue's lifecycle and per-stream metrics (Prometheus text format).
    pub fn render_metrics(&self, out: &mut String, now_ns: u64) {
        use std::fmt::Write;
        let _ = writeln!(
            out,
            "# HELP tickwire_venue_live Whether every connection of the venue is live.\n\
             # TYPE tickwire_venue_live gauge"
        );
        for links in &self.venues {
            let live = links.live();
            let _ = writeln!(
                out,
                "tickwire_venue_live{{venue=\"{}\"}} {}",
                label(&links.name),
                u8::from(live)
            );
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_connection_transitions_total Connection state transitions, by reason.\n\
             # TYPE tickwire_connection_transitions_total counter"
        );
        let counters: Vec<LinkCounters> = (0..self.venues.len())
            .map(|index| self.counters(index))
            .collect();
        for (links, counters) in self.venues.iter().zip(&counters) {
            for reason in crate::lifecycle::Reason::ALL {
                let _ = writeln!(
                    out,
                    "tickwire_connection_transitions_total{{venue=\"{}\",reason=\"{}\"}} {}",
                    label(&links.name),
                    reason.name(),
                    counters.transitions.get(reason)
                );
            }
        }
        let families: [CounterFamily; 14] = [
            (
                "tickwire_connection_attempts_total",
                "Connection attempts started.",
                |c| c.attempts,
            ),
            (
                "tickwire_connection_attempts_postponed_total",
                "Attempts the storm breaker postponed.",
                |c| c.postponed,
            ),
            (
                "tickwire_reconnects_total",
                "Connections that ended and were replaced by a new attempt (not rotations).",
                |c| {
                    c.transitions.get(Reason::ClosedByVenue)
                        + c.transitions.get(Reason::ConnectionLost)
                        + c.transitions.get(Reason::ProtocolError)
                },
            ),
            (
                "tickwire_rotations_total",
                "Planned rotations (make-before-break).",
                |c| c.rotations,
            ),
            (
                "tickwire_rotations_forced_total",
                "Rotations switched before every stream agreed.",
                |c| c.forced_rotations,
            ),
            (
                "tickwire_streams_stale_total",
                "Streams that went stale.",
                |c| c.stale_streams,
            ),
            (
                "tickwire_subscriptions_refused_total",
                "Subscription requests the venue refused.",
                |c| c.refused_requests,
            ),
            (
                "tickwire_subscription_channels_rejected_total",
                "Channels a venue left out of its answer to a subscription.",
                |c| c.rejected_channels,
            ),
            (
                "tickwire_logins_refused_total",
                "Logins the venue refused.",
                |c| c.refused_logins,
            ),
            (
                "tickwire_requests_throttled_total",
                "Requests the venue refused for its request rate.",
                |c| c.throttled_requests,
            ),
            (
                "tickwire_reconnect_notices_total",
                "Announcements that the venue would soon close a connection.",
                |c| c.reconnect_notices,
            ),
            (
                "tickwire_venue_errors_total",
                "Errors the venue reported on a running session.",
                |c| c.venue_errors,
            ),
            (
                "tickwire_slow_reader_warnings_total",
                "Warnings from the venue that tickwire reads too slowly.",
                |c| c.slow_reader_warnings,
            ),
            (
                "tickwire_venue_notices_total",
                "Other notices from the venue (acknowledgements, replay completed, ...).",
                |c| c.venue_notices,
            ),
        ];
        for (name, help, value) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (links, counters) in self.venues.iter().zip(&counters) {
                let _ = writeln!(
                    out,
                    "{name}{{venue=\"{}\"}} {}",
                    label(&links.name),
                    value(counters)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_stream_messages_total Messages a stream delivered to the strategy (duplicates excluded).\n\
             # TYPE tickwire_stream_messages_total counter"
        );
        let mut stale_lines = String::new();
        let mut age_lines = String::new();
        for links in &self.venues {
            {
                for (stream, stale) in links.streams_in_order() {
                    let name = links.stream_names[stream].clone();
                    let labels = format!(
                        "venue=\"{}\",stream=\"{}\"",
                        label(&links.name),
                        label(&name)
                    );
                    let _ = writeln!(
                        out,
                        "tickwire_stream_messages_total{{{labels}}} {}",
                        links.activity.messages(stream)
                    );
                    let _ = writeln!(
                        stale_lines,
                        "tickwire_stream_stale{{{labels}}} {}",
                        u8::from(stale)
                    );
                    let last = links.activity.last_ns(stream);
                    if last > 0 {
                        let _ = writeln!(
                            age_lines,
                            "tickwire_stream_last_message_age_seconds{{{labels}}} {:.6}",
                            now_ns.saturating_sub(last) as f64 / 1e9
                        );
                    }
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP tickwire_stream_stale Whether the stream is stale now.\n\
             # TYPE tickwire_stream_stale gauge\n{stale_lines}\
             # HELP tickwire_stream_last_message_age_seconds Time since the stream last delivered.\n\
             # TYPE tickwire_stream_last_message_age_seconds gauge\n{age_lines}"
        );
        out.pop();
    }
}
