//! What the control thread publishes for the serving thread: one immutable [`Published`] value,
//! replaced whole (see the module doc of `serve` for why an `ArcSwap`).

use serde::Serialize;

/// The appliance as the control thread last saw it.
#[derive(Debug, Default)]
pub struct Published {
    /// `/metrics` in the Prometheus text exposition format (0.0.4), without the serving plane's
    /// own counters, which the serving thread appends.
    pub metrics_text: String,
    /// Why the appliance is not ready (a venue not live, a stale stream, a hot thread ended);
    /// empty when it is.
    pub problems: Vec<String>,
    pub venues: Vec<VenueView>,
    /// Per-stage latency over the last window.
    pub latency: Vec<StageLatency>,
    /// The last windows' latency, oldest first (the last is `latency`'s window): what the
    /// status page plots as soon as it opens. Shared, as it changes once a window.
    pub latency_history: std::sync::Arc<Vec<LatencyPoint>>,
}

/// One window of [`Published::latency_history`].
#[derive(Debug, Clone, Serialize)]
pub struct LatencyPoint {
    /// Counts the windows since the appliance started: a reader appends the points whose
    /// `window` is above the last it has.
    pub window: u64,
    pub stages: Vec<StageLatency>,
}

/// One venue for `/v1/venues`.
#[derive(Debug, Clone, Serialize)]
pub struct VenueView {
    pub name: String,
    /// The decoder that decodes it (its index in `[[threads.decoders]]`) and that decoder's
    /// thread (`tw-decoder-1`; `tw-net` for a decoder fused into the network thread).
    pub decoder: usize,
    pub decoder_thread: String,
    /// Every connection of the venue is live.
    pub live: bool,
    pub connections: Vec<ConnectionView>,
    pub attempts_total: u64,
    pub reconnects_total: u64,
    pub messages_total: u64,
    /// Venue messages per second over the last window.
    pub messages_per_second: f64,
    pub received_bytes_total: u64,
    pub streams: Vec<StreamView>,
    /// What the venue's feed counts beside its messages (a datagram venue's per-line
    /// duplicates, kernel drops, re-requests), by name; absent when it counts nothing.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub feed_counts: std::collections::BTreeMap<&'static str, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionView {
    pub index: usize,
    pub state: &'static str,
    /// Why it last changed state (`dns-failed`, `closed-by-venue`, ...).
    pub reason: Option<&'static str>,
    /// Failed attempts in a row.
    pub failures: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamView {
    pub name: String,
    pub stale: bool,
    pub messages_total: u64,
    /// Since the stream last delivered; `None` before its first message.
    pub last_message_age_seconds: Option<f64>,
}

/// Latency percentiles of one stage over the last window, in nanoseconds.
#[derive(Debug, Clone, Serialize)]
pub struct StageLatency {
    pub stage: &'static str,
    pub window_seconds: f64,
    pub count: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// One instrument for `/v1/instruments`: fixed for the appliance's life.
#[derive(Debug, Clone, Serialize)]
pub struct InstrumentView {
    pub venue: String,
    pub symbol: String,
    pub instrument_id: u32,
}
