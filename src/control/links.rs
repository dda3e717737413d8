//! The control thread's side of the connection lifecycle: every venue's connections with their
//! state machines ([`crate::lifecycle::Connection`]), subscriptions, the staleness watchdog and
//! planned rotation.
//!
//! A venue's streams (symbol × channel) are split into shards of at most
//! `max_streams_per_connection` streams, a symbol's channels always together. Each shard owns two
//! stream slots: the active connection, and a spare that a rotation opens beside it
//! (make-before-break). The decoder's feed drops whatever update id it has delivered already, so
//! while both run the strategy sees each message once; the switch waits until, on every stream
//! with recent traffic, both connections delivered the same update id (or until
//! `lifecycle.rotation_overlap_ms` has passed).
//!
//! The strategy hears about it all through `VenueStatus` events, written by the decoder thread
//! in order with the market events: a shard's connection going live (`Live`, instrument
//! [`ALL_INSTRUMENTS`], detail = shard) and down (`Disconnected`), and each stream going stale
//! and recovering (`Stale` / `Recovered`, the stream's instrument, detail = channel index).

use crate::config::{LoadedConfig, VenueConfig, VenueKind};
use crate::event::{Body, Event, InstrumentId, VenueId, VenueState, VenueStatus};
use crate::lifecycle::{Action, ConnState, Connection, Reason, ReasonCounts, StormBreaker, Timing};
use crate::net::engine::StreamSpec;
use crate::net::ConnId;
use crate::pipeline::{NetStatus, NetStatusKind, Runtime, RuntimeError};
use crate::venue::binance::subscribe::subscribe_request;
use crate::venue::feed::{ReplyKind, StreamActivity, VenueReply, ALL_INSTRUMENTS};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

const NS_PER_MS: u64 = 1_000_000;
/// After a failed rotation, the next try waits this long.
const ROTATION_RETRY_NS: u64 = 60_000 * NS_PER_MS;
/// A stream counts as active for the rotation switch if it delivered within this window.
const ACTIVE_WINDOW_NS: u64 = 2_000 * NS_PER_MS;
/// Stream ends kept for reports and tests.
const ENDS_KEPT: usize = 64;

/// How a venue stream ended.
#[derive(Clone, Debug)]
pub struct StreamEnd {
    pub conn: u32,
    /// The WebSocket close code the venue sent, if it sent one.
    pub close_code: Option<u16>,
    /// What went wrong, if anything did.
    pub error: Option<String>,
}

struct Shard {
    instruments: Range<InstrumentId>,
    /// Streams of the venue's activity table this shard carries.
    streams: Range<usize>,
    requests: Vec<Vec<String>>,
    /// Per request, per name: the stream it subscribes (`None` for the `system` channel).
    request_streams: Vec<Vec<Option<usize>>>,
    conns: [Connection; 2],
    /// When each connection last sent a heartbeat ping.
    pinged_ns: [u64; 2],
    /// The venue announced it will close the active connection: rotate now.
    rotate_requested: bool,
    generations: [u32; 2],
    /// Which of `conns` carries the shard.
    active: usize,
    /// When the running rotation started.
    rotation: Option<u64>,
    next_rotation_ns: u64,
    /// Per stream of the shard: since when it is stale.
    stale_since: Vec<Option<u64>>,
}

impl VenueLinks {
    /// Whether the venue could be prepared and every shard's active connection is live.
    fn live(&self) -> bool {
        self.spec.is_some()
            && self
                .shards
                .iter()
                .all(|shard| shard.conns[shard.active].state() == ConnState::Live)
    }
}

/// A venue login: the key id and the private key (PEM). Never printed.
#[derive(Clone)]
pub struct Login {
    pub key_id: String,
    pub private_key_pem: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

struct VenueLinks {
    name: String,
    kind: VenueKind,
    /// Sent as the first request of every connection, when the venue file has a key.
    login: Option<Login>,
    ping_interval_ns: Option<u64>,
    read_timeout_ns: Option<u64>,
    /// Per stream, its name in logs and metrics.
    stream_names: Vec<String>,
    id: VenueId,
    channels: Vec<String>,
    /// Per channel: its staleness threshold.
    thresholds: Vec<Option<u64>>,
    rotate_after_ns: u64,
    rotation_overlap_ns: u64,
    breaker: StormBreaker,
    /// `None` when the stream could not be prepared (the error was logged).
    spec: Option<StreamSpec>,
    shards: Vec<Shard>,
    activity: Arc<StreamActivity>,
    /// A Databento venue's session settings and symbols (its request is built per connection,
    /// with the replay start of the moment).
    databento: Option<(crate::config::DatabentoConfig, Vec<String>)>,
}

/// Counters of a venue's lifecycle, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Transitions per reason, every connection of the venue together.
    pub transitions: ReasonCounts,
    pub attempts: u64,
    /// Attempts the storm breaker postponed.
    pub postponed: u64,
    pub rotations: u64,
    /// Rotations switched before every active stream agreed (the overlap ran out).
    pub forced_rotations: u64,
    pub stale_streams: u64,
    pub recovered_streams: u64,
    pub refused_requests: u64,
    /// Channels the venue left out of a subscription's answer (Thalex drops invalid ones).
    pub rejected_channels: u64,
    /// Logins the venue refused.
    pub refused_logins: u64,
    /// Requests the venue refused for its rate limit (each recycles the connection).
    pub throttled_requests: u64,
    /// Announcements that the venue will close a connection soon (Thalex `reconnect`).
    pub reconnect_notices: u64,
    /// Errors the venue reported on a running session (Databento `ErrorMsg`).
    pub venue_errors: u64,
    /// Warnings that tickwire reads too slowly (Databento's slow-reader notice).
    pub slow_reader_warnings: u64,
    /// Other notices (Databento: subscription acknowledgements, replay completed, end of
    /// interval).
    pub venue_notices: u64,
}

/// Every venue's connections.
pub struct Venues {
    venues: Vec<VenueLinks>,
    /// By slot: (venue, shard, which of the pair).
    slots: Vec<Option<(usize, usize, usize)>>,
    counters: Vec<LinkCounters>,
    /// Streams that ended (closed by the venue, reset, or failed), all venues together.
    pub streams_ended: u64,
    /// The most recent ends, oldest first (at most 64).
    pub ends: VecDeque<StreamEnd>,
    out: Vec<Action>,
    /// A connection changed state since `take_changed` was last called.
    changed: bool,
}

/// What a venue contributes to the slot plan.
pub struct VenuePlan<'a> {
    pub config: &'a VenueConfig,
    pub id: VenueId,
    pub instrument_base: InstrumentId,
    pub activity: Arc<StreamActivity>,
    pub spec: Option<StreamSpec>,
    pub login: Option<Login>,
}

impl Venues {
    /// Plans every venue's shards and slots. Returns the slot-to-venue map for the decoder.
    pub fn plan(
        plans: Vec<VenuePlan<'_>>,
        max_connections: u32,
        seed: u64,
    ) -> Result<(Venues, Vec<VenueId>), crate::venue::VenueError> {
        let mut venues = Vec::new();
        let mut slots: Vec<Option<(usize, usize, usize)>> = Vec::new();
        let mut conn_venues = Vec::new();
        for (venue_index, plan) in plans.into_iter().enumerate() {
            let config = plan.config;
            let timing = Timing::new(&config.reconnect, &config.lifecycle);
            let secure = config.url.scheme.is_tls();
            let channels = config.channels.len().max(1);
            let mut shards = Vec::new();
            for (shard_index, shard) in crate::venue::shards(config)?.into_iter().enumerate() {
                let first = slots.len() as ConnId;
                if first + 2 > max_connections {
                    return Err(crate::venue::VenueError::TooManyConnections {
                        venue: config.name.clone(),
                        max: max_connections,
                    });
                }
                let batches = shard.requests.len() + usize::from(plan.login.is_some());
                let conn = |slot: ConnId| {
                    Connection::new(
                        slot,
                        secure,
                        timing,
                        &config.reconnect,
                        batches,
                        seed ^ (u64::from(slot) << 17),
                    )
                };
                for which in 0..2 {
                    slots.push(Some((venue_index, shard_index, which)));
                    conn_venues.push(plan.id);
                }
                let base = plan.instrument_base;
                let symbols = shard.symbols.clone();
                let mut next_stream = symbols.start * channels;
                let request_streams = shard
                    .requests
                    .iter()
                    .map(|names| {
                        names
                            .iter()
                            .map(|name| {
                                let system = config.kind == VenueKind::Thalex
                                    && name == crate::venue::thalex::channel::SYSTEM_CHANNEL;
                                (!system).then(|| {
                                    next_stream += 1;
                                    next_stream - 1
                                })
                            })
                            .collect()
                    })
                    .collect();
                shards.push(Shard {
                    request_streams,
                    pinged_ns: [0; 2],
                    rotate_requested: false,
                    instruments: base + symbols.start as InstrumentId
                        ..base + symbols.end as InstrumentId,
                    streams: symbols.start * channels..symbols.end * channels,
                    stale_since: vec![None; symbols.len() * channels],
                    requests: shard.requests,
                    conns: [conn(first), conn(first + 1)],
                    generations: [0; 2],
                    active: 0,
                    rotation: None,
                    next_rotation_ns: 0,
                });
            }
            venues.push(VenueLinks {
                name: config.name.clone(),
                kind: config.kind,
                login: plan.login,
                ping_interval_ns: config.lifecycle.ping_interval().map(|ms| ms * NS_PER_MS),
                read_timeout_ns: config.lifecycle.read_timeout().map(|ms| ms * NS_PER_MS),
                stream_names: crate::venue::stream_names(config),
                id: plan.id,
                thresholds: config
                    .channels
                    .iter()
                    .map(|channel| {
                        config
                            .staleness
                            .threshold_ms(channel)
                            .map(|ms| ms * NS_PER_MS)
                    })
                    .collect(),
                channels: config.channels.clone(),
                rotate_after_ns: config.lifecycle.rotate_after_ms * NS_PER_MS,
                rotation_overlap_ns: config.lifecycle.rotation_overlap_ms * NS_PER_MS,
                breaker: StormBreaker::new(config.reconnect.max_attempts_per_minute),
                spec: plan.spec,
                shards,
                activity: plan.activity,
                databento: config
                    .databento
                    .clone()
                    .map(|databento| (databento, config.symbols.clone())),
            });
        }
        let counters = vec![LinkCounters::default(); venues.len()];
        Ok((
            Venues {
                venues,
                slots,
                counters,
                streams_ended: 0,
                ends: VecDeque::new(),
                out: Vec::new(),
                changed: false,
            },
            conn_venues,
        ))
    }

    /// Starts every shard's first connection.
    pub fn start(&mut self, now_ns: u64, runtime: &mut Runtime) -> Result<(), RuntimeError> {
        for venue in 0..self.venues.len() {
            if self.venues[venue].spec.is_none() {
                continue;
            }
            for shard in 0..self.venues[venue].shards.len() {
                let links = &mut self.venues[venue];
                let active = links.shards[shard].active;
                links.shards[shard].conns[active].start(now_ns, &mut links.breaker, &mut self.out);
                self.apply(venue, shard, active, now_ns, runtime)?;
            }
        }
        Ok(())
    }

    pub fn name(&self, venue: usize) -> &str {
        self.venues
            .get(venue)
            .map_or("?", |links| links.name.as_str())
    }

    /// A status report from the network thread.
    pub fn on_status(
        &mut self,
        now_ns: u64,
        status: NetStatus,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let Some(Some((venue, shard, which))) = self.slots.get(status.conn as usize).copied()
        else {
            return Ok(());
        };
        if self.venues[venue].shards[shard].generations[which] != status.generation {
            // About a stream this slot no longer has.
            return Ok(());
        }
        let name = self.venues[venue].name.clone();
        let conn = &mut self.venues[venue].shards[shard].conns[which];
        match status.kind {
            NetStatusKind::Connected => conn.on_connected(now_ns, &mut self.out),
            NetStatusKind::Secured => conn.on_secured(now_ns, &mut self.out),
            NetStatusKind::Open => conn.on_open(now_ns, &mut self.out),
            NetStatusKind::Closed {
                close_code,
                reason,
                error,
            } => {
                let expected = conn.state() == ConnState::Closing;
                if !expected {
                    self.streams_ended += 1;
                    match &error {
                        Some(error) => {
                            tracing::warn!(venue = %name, conn = status.conn, ?close_code, "venue stream ended: {error}")
                        }
                        None => {
                            tracing::warn!(venue = %name, conn = status.conn, ?close_code, "venue closed the stream")
                        }
                    }
                    if self.ends.len() == ENDS_KEPT {
                        self.ends.pop_front();
                    }
                    self.ends.push_back(StreamEnd {
                        conn: status.conn,
                        close_code,
                        error,
                    });
                }
                conn.on_closed(now_ns, reason, &mut self.out);
            }
            NetStatusKind::OpenFailed { error } => {
                self.streams_ended += 1;
                tracing::error!(venue = %name, conn = status.conn, "cannot open the venue stream: {error}");
                self.ends.push_back(StreamEnd {
                    conn: status.conn,
                    close_code: None,
                    error: Some(error),
                });
                conn.on_closed(now_ns, Reason::OpenRefused, &mut self.out);
            }
        }
        self.apply(venue, shard, which, now_ns, runtime)
    }

    /// A venue's answer to a subscription request.
    pub fn on_reply(
        &mut self,
        now_ns: u64,
        reply: VenueReply,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let slot = (reply.id >> 32) as usize;
        let Some(Some((venue, shard, which))) = self.slots.get(slot).copied() else {
            return Ok(());
        };
        if self.venues[venue].id != reply.venue {
            return Ok(());
        }
        let name = self.venues[venue].name.clone();
        if reply.kind == ReplyKind::Notice {
            self.on_notice(venue, slot, &reply);
            if reply.error == Some(crate::venue::databento::feed::STREAM_BROKEN) {
                // The feed cannot read the connection's stream any further: start afresh.
                let conn = &mut self.venues[venue].shards[shard].conns[which];
                conn.recycle_for(now_ns, Reason::ProtocolError, &mut self.out);
                return self.apply(venue, shard, which, now_ns, runtime);
            }
            return Ok(());
        }
        let mut reply = reply;
        if self.venues[venue].kind == VenueKind::Databento
            && reply.id & 0xffff_ffff == crate::venue::databento::feed::SESSION_STARTED
        {
            // The gateway started the session (its DBN stream began): that answers the
            // connection's one request.
            match self.venues[venue].shards[shard].conns[which].oldest_outstanding() {
                Some(id) => reply.id = id,
                None => return Ok(()),
            }
        }
        if reply.kind == ReplyKind::ReconnectNotice {
            self.counters[venue].reconnect_notices += 1;
            let shard = &mut self.venues[venue].shards[shard];
            if shard.active == which {
                tracing::info!(
                    venue = %name,
                    conn = slot,
                    "the venue announced it will close the connection: opening a replacement \
                     before it does"
                );
                shard.rotate_requested = true;
            }
            return Ok(());
        }
        let links = &self.venues[venue];
        let Some(batch) = links.shards[shard].conns[which].batch_of(reply.id) else {
            return Ok(());
        };
        let login_batches = usize::from(links.login.is_some());
        if links.kind == VenueKind::Thalex
            && reply.error == Some(crate::venue::thalex::subscribe::THROTTLED)
        {
            // A request lost to the venue's rate limit: start again on a fresh connection,
            // after the backoff, rather than run without it.
            tracing::warn!(
                venue = %name,
                conn = slot,
                "the venue throttled a request ({}); reconnecting after the backoff to send it \
                 again",
                reply.message()
            );
            self.counters[venue].throttled_requests += 1;
            let conn = &mut self.venues[venue].shards[shard].conns[which];
            conn.recycle_for(now_ns, Reason::Throttled, &mut self.out);
            return self.apply(venue, shard, which, now_ns, runtime);
        }
        if batch < login_batches {
            let conn = &mut self.venues[venue].shards[shard].conns[which];
            match reply.error {
                None => tracing::info!(venue = %name, conn = slot, "logged in"),
                Some(code) => {
                    tracing::error!(
                        venue = %name,
                        conn = slot,
                        code,
                        "the venue refused the login: {}; public channels carry on, private ones \
                         stay silent (check credentials.key_id and the key)",
                        reply.message()
                    );
                    self.counters[venue].refused_logins += 1;
                }
            }
            conn.on_ack(now_ns, reply.id, &mut self.out);
            return self.apply(venue, shard, which, now_ns, runtime);
        }
        if reply.error.is_none() && links.kind == VenueKind::Thalex {
            self.check_accepted(venue, shard, which, batch - login_batches);
        }
        let conn = &mut self.venues[venue].shards[shard].conns[which];
        match reply.error {
            None => conn.on_ack(now_ns, reply.id, &mut self.out),
            Some(code) => {
                tracing::error!(
                    venue = %name,
                    conn = slot,
                    request = reply.id & 0xffff_ffff,
                    code,
                    "the venue refused a subscription request: {}; its streams stay silent \
                     (check symbols and channels)",
                    reply.message()
                );
                self.counters[venue].refused_requests += 1;
                conn.on_refused(now_ns, reply.id, &mut self.out);
            }
        }
        self.apply(venue, shard, which, now_ns, runtime)
    }

    /// A condition the venue reported on a connection: a log line and a counter.
    fn on_notice(&mut self, venue: usize, slot: usize, reply: &VenueReply) {
        let name = &self.venues[venue].name;
        let counters = &mut self.counters[venue];
        let message = reply.message();
        if let Some(code) = reply.error {
            counters.venue_errors += 1;
            let what = u8::try_from(code)
                .ok()
                .and_then(|code| dbn::ErrorCode::try_from(code).ok())
                .map_or_else(|| format!("code {code}"), |code| format!("{code:?}"));
            tracing::error!(venue = %name, conn = slot, code, "the venue reported an error ({what}): {message}");
            return;
        }
        let code = (reply.id & 0xff) as u8;
        match dbn::SystemCode::try_from(code) {
            Ok(dbn::SystemCode::SlowReaderWarning) => {
                counters.slow_reader_warnings += 1;
                tracing::warn!(venue = %name, conn = slot, "the venue says tickwire reads too slowly: {message}");
            }
            Ok(other) => {
                counters.venue_notices += 1;
                tracing::info!(venue = %name, conn = slot, "venue notice ({other:?}): {message}");
            }
            Err(_) => {
                counters.venue_notices += 1;
                tracing::info!(venue = %name, conn = slot, code, "venue notice: {message}");
            }
        }
    }

    /// After a subscription answer: which of the batch's streams the venue left out.
    fn check_accepted(&mut self, venue: usize, shard: usize, which: usize, batch: usize) {
        let links = &self.venues[venue];
        let slot = links.shards[shard].conns[which].slot();
        let Some(streams) = links.shards[shard].request_streams.get(batch) else {
            return;
        };
        let rejected: Vec<&str> = streams
            .iter()
            .flatten()
            .filter(|&&stream| links.activity.accepted_on(stream) != Some(slot))
            .map(|&stream| links.stream_names[stream].as_str())
            .collect();
        if rejected.is_empty() {
            return;
        }
        tracing::warn!(
            venue = %links.name,
            conn = slot,
            channels = %rejected.join(" "),
            "the venue left channels out of its subscription answer (an unknown instrument or \
             parameter): they stay silent (check symbols and channels)"
        );
        self.counters[venue].rejected_channels += rejected.len() as u64;
    }

    /// Timers, staleness and rotation; call every control tick.
    pub fn tick(&mut self, now_ns: u64, runtime: &mut Runtime) -> Result<(), RuntimeError> {
        for venue in 0..self.venues.len() {
            for shard in 0..self.venues[venue].shards.len() {
                for which in 0..2 {
                    let links = &mut self.venues[venue];
                    links.shards[shard].conns[which].tick(
                        now_ns,
                        &mut links.breaker,
                        &mut self.out,
                    );
                    self.apply(venue, shard, which, now_ns, runtime)?;
                }
                self.heartbeat(venue, shard, now_ns, runtime)?;
                self.staleness(venue, shard, now_ns, runtime)?;
                self.rotation(venue, shard, now_ns, runtime)?;
            }
            self.counters[venue].postponed = self.venues[venue].breaker.postponed;
        }
        Ok(())
    }

    /// Closes every connection for good (shutdown); `all_closed` says when they are.
    pub fn close_all(&mut self, now_ns: u64, runtime: &mut Runtime) -> Result<(), RuntimeError> {
        for venue in 0..self.venues.len() {
            for shard in 0..self.venues[venue].shards.len() {
                for which in 0..2 {
                    self.venues[venue].shards[shard].conns[which].retire(
                        now_ns,
                        Reason::Shutdown,
                        &mut self.out,
                    );
                    self.apply(venue, shard, which, now_ns, runtime)?;
                }
            }
        }
        Ok(())
    }

    /// Whether a connection changed state since the last call (and clears it).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Whether no connection has a socket any more.
    pub fn all_closed(&self) -> bool {
        self.venues
            .iter()
            .flat_map(|links| &links.shards)
            .flat_map(|shard| &shard.conns)
            .all(|conn| !conn.state().has_socket())
    }

    /// Whether every shard of every venue is live.
    pub fn all_live(&self) -> bool {
        self.venues.iter().all(VenueLinks::live)
    }

    /// Venues whose every shard is live, of all venues.
    pub fn live_count(&self) -> (usize, usize) {
        let live = self.venues.iter().filter(|links| links.live()).count();
        (live, self.venues.len())
    }

    pub fn status_line(&self, threads: usize) -> String {
        let (live, all) = self.live_count();
        format!("running: {threads} hot threads; {live}/{all} venues live")
    }

    /// A venue's lifecycle counters.
    pub fn counters(&self, venue: usize) -> LinkCounters {
        let mut counters = self.counters.get(venue).cloned().unwrap_or_default();
        if let Some(links) = self.venues.get(venue) {
            counters.transitions = ReasonCounts::default();
            counters.attempts = 0;
            for conn in links.shards.iter().flat_map(|shard| &shard.conns) {
                counters.transitions.merge(conn.counts());
                counters.attempts += conn.attempts;
            }
        }
        counters
    }

    /// The state of each shard's active connection of a venue.
    pub fn states(&self, venue: usize) -> Vec<ConnState> {
        self.venues.get(venue).map_or_else(Vec::new, |links| {
            links
                .shards
                .iter()
                .map(|shard| shard.conns[shard.active].state())
                .collect()
        })
    }

    /// Carries out what a connection's machine asked for.
    fn apply(
        &mut self,
        venue: usize,
        shard_index: usize,
        which: usize,
        now_ns: u64,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let links = &mut self.venues[venue];
        let shard = &mut links.shards[shard_index];
        let slot = shard.conns[which].slot();
        let is_active = shard.active == which;
        for action in self.out.drain(..) {
            match action {
                Action::Open => {
                    let Some(spec) = links.spec.clone() else {
                        continue;
                    };
                    shard.generations[which] = shard.generations[which].wrapping_add(1);
                    runtime.open_stream(slot, shard.generations[which], spec)?;
                }
                Action::Subscribe { id, batch } => {
                    let login_batches = usize::from(links.login.is_some());
                    if batch < login_batches {
                        if let Some(login) = &links.login {
                            match login_request(id, login) {
                                Ok(text) => runtime.send_text(slot, text)?,
                                // Checked at start-up, so this cannot happen unless the clock
                                // is before 1970; the ack timeout then recycles the connection.
                                Err(error) => {
                                    tracing::error!(venue = %links.name, "login token: {error}")
                                }
                            }
                        }
                        continue;
                    }
                    let batch = batch - login_batches;
                    let Some(names) = shard.requests.get(batch) else {
                        continue;
                    };
                    let text = match links.kind {
                        VenueKind::Databento => {
                            let Some((config, symbols)) = &links.databento else {
                                continue;
                            };
                            let channels = links.channels.len().max(1);
                            let shard_symbols =
                                shard.streams.start / channels..shard.streams.end / channels;
                            let starts = databento_starts(
                                config,
                                &links.activity,
                                shard_symbols.clone(),
                                channels,
                            );
                            let first = shard
                                .streams
                                .clone()
                                .all(|stream| links.activity.replay_from(stream) == 0);
                            crate::venue::databento::subscribe::session_request(
                                config,
                                &links.channels,
                                &symbols[shard_symbols],
                                &starts,
                                first,
                                id,
                            )
                        }
                        VenueKind::Thalex => {
                            // The answer names what the venue accepted; forget older answers.
                            for stream in shard.request_streams[batch].iter().flatten() {
                                links.activity.clear_accepted(*stream);
                            }
                            crate::venue::thalex::subscribe::subscribe_request(id, names)
                        }
                        _ => subscribe_request(id, names),
                    };
                    runtime.send_text(slot, text)?;
                }
                Action::Close => runtime.close_stream(slot)?,
                Action::Abort => runtime.abort_stream(slot)?,
                Action::Down { gap } => {
                    if gap && is_active {
                        runtime.notify_disconnect(links.id, slot, shard.instruments.clone())?;
                    }
                }
                Action::Transition { from, to, reason } => {
                    self.changed = true;
                    let conn = &shard.conns[which];
                    let role = if is_active { "active" } else { "spare" };
                    let retry_in_ms = conn
                        .retry_at_ns()
                        .map(|at| at.saturating_sub(now_ns) / NS_PER_MS);
                    match to {
                        ConnState::BackingOff | ConnState::Stale => tracing::warn!(
                            venue = %links.name,
                            conn = slot,
                            role,
                            from = from.name(),
                            to = to.name(),
                            reason = reason.name(),
                            failures = conn.failures(),
                            ?retry_in_ms,
                            "connection state"
                        ),
                        ConnState::GaveUp => tracing::error!(
                            venue = %links.name,
                            conn = slot,
                            failures = conn.failures(),
                            "connection state: gave up after reconnect.max_attempts failures in \
                             a row; the venue stays down until restarted"
                        ),
                        _ => tracing::info!(
                            venue = %links.name,
                            conn = slot,
                            role,
                            from = from.name(),
                            to = to.name(),
                            reason = reason.name(),
                            "connection state"
                        ),
                    }
                    if !is_active {
                        continue;
                    }
                    let state = if to == ConnState::Live {
                        Some(VenueState::Live)
                    } else if matches!(from, ConnState::Live | ConnState::Stale)
                        && !matches!(to, ConnState::Live | ConnState::Stale)
                    {
                        Some(VenueState::Disconnected)
                    } else {
                        None
                    };
                    if let Some(state) = state {
                        runtime.send_status(status_event(
                            links.id,
                            ALL_INSTRUMENTS,
                            state,
                            reason,
                            shard_index as u64,
                            now_ns,
                        ))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Heartbeat pings on each open connection of a shard, and the read timeout: a connection
    /// that read nothing at all (not even the answers to its pings) is recycled.
    fn heartbeat(
        &mut self,
        venue: usize,
        shard_index: usize,
        now_ns: u64,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let links = &mut self.venues[venue];
        if links.ping_interval_ns.is_none() && links.read_timeout_ns.is_none() {
            return Ok(());
        }
        for which in 0..2 {
            let shard = &mut links.shards[shard_index];
            let conn = &shard.conns[which];
            // Past `Upgrading` the network thread has reported the stream open, so its
            // last-read time belongs to this stream.
            if !matches!(
                conn.state(),
                ConnState::Subscribing | ConnState::Live | ConnState::Stale
            ) {
                shard.pinged_ns[which] = 0;
                continue;
            }
            let slot = conn.slot();
            if let Some(interval) = links.ping_interval_ns {
                if now_ns.saturating_sub(shard.pinged_ns[which]) >= interval {
                    shard.pinged_ns[which] = now_ns;
                    runtime.ping(slot)?;
                }
            }
            let Some(timeout) = links.read_timeout_ns else {
                continue;
            };
            let last = runtime.last_read_ns(slot).max(conn.since_ns());
            if now_ns.saturating_sub(last) > timeout {
                tracing::warn!(
                    venue = %links.name,
                    conn = slot,
                    silent_ms = now_ns.saturating_sub(last) / NS_PER_MS,
                    "nothing read on the connection, not even pongs: recycling it"
                );
                shard.conns[which].recycle_for(now_ns, Reason::ReadTimeout, &mut self.out);
                self.apply(venue, shard_index, which, now_ns, runtime)?;
                return Ok(());
            }
        }
        Ok(())
    }

    /// The per-stream watchdog of a shard's live connection.
    fn staleness(
        &mut self,
        venue: usize,
        shard_index: usize,
        now_ns: u64,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let links = &mut self.venues[venue];
        let channels = links.channels.len().max(1);
        let shard = &mut links.shards[shard_index];
        let active = &shard.conns[shard.active];
        let Some(live_since) = active.live_since_ns() else {
            return Ok(());
        };
        if active.state() != ConnState::Live {
            return Ok(());
        }
        let mut watched = 0;
        let mut stale = 0;
        let mut newly_stale = Vec::new();
        for stream in shard.streams.clone() {
            let Some(threshold) = links.thresholds.get(stream % channels).copied().flatten() else {
                continue;
            };
            watched += 1;
            let last = links.activity.last_ns(stream);
            let index = stream - shard.streams.start;
            let instrument = shard.instruments.start + (index / channels) as InstrumentId;
            match shard.stale_since[index] {
                None => {
                    if now_ns.saturating_sub(last.max(live_since)) > threshold {
                        shard.stale_since[index] = Some(now_ns);
                        stale += 1;
                        self.counters[venue].stale_streams += 1;
                        newly_stale.push(stream);
                        runtime.send_status(status_event(
                            links.id,
                            instrument,
                            VenueState::Stale,
                            Reason::AllStreamsStale,
                            (stream % channels) as u64,
                            now_ns,
                        ))?;
                    }
                }
                Some(since) => {
                    if last > since.saturating_sub(threshold) && now_ns - last <= threshold {
                        shard.stale_since[index] = None;
                        self.counters[venue].recovered_streams += 1;
                        tracing::info!(
                            venue = %links.name,
                            stream = %links.stream_names[stream].clone(),
                            "stream recovered"
                        );
                        runtime.send_status(status_event(
                            links.id,
                            instrument,
                            VenueState::Recovered,
                            Reason::Recovered,
                            (stream % channels) as u64,
                            now_ns,
                        ))?;
                    } else {
                        stale += 1;
                    }
                }
            }
        }
        if !newly_stale.is_empty() {
            let names: Vec<String> = newly_stale
                .iter()
                .map(|&stream| links.stream_names[stream].clone())
                .collect();
            tracing::warn!(venue = %links.name, streams = %names.join(" "), "streams stale");
        }
        if watched > 0 && stale == watched {
            let active = shard.active;
            shard.conns[active].recycle(now_ns, &mut self.out);
            self.apply(venue, shard_index, active, now_ns, runtime)?;
        }
        Ok(())
    }

    /// Planned rotation: open the spare, switch when both agree, retire the old one.
    fn rotation(
        &mut self,
        venue: usize,
        shard_index: usize,
        now_ns: u64,
        runtime: &mut Runtime,
    ) -> Result<(), RuntimeError> {
        let links = &mut self.venues[venue];
        let shard = &mut links.shards[shard_index];
        let active = shard.active;
        let spare = 1 - active;
        let Some(started) = shard.rotation else {
            let planned = links.rotate_after_ns > 0
                && now_ns >= shard.next_rotation_ns
                && shard.conns[active]
                    .live_since_ns()
                    .is_some_and(|since| now_ns.saturating_sub(since) >= links.rotate_after_ns);
            let due = (planned || shard.rotate_requested)
                && shard.conns[active].state() == ConnState::Live
                && shard.conns[spare].state() == ConnState::Idle;
            if due {
                shard.rotate_requested = false;
                tracing::info!(
                    venue = %links.name,
                    conn = shard.conns[active].slot(),
                    spare = shard.conns[spare].slot(),
                    "rotation: opening a replacement connection"
                );
                shard.rotation = Some(now_ns);
                shard.conns[spare].start(now_ns, &mut links.breaker, &mut self.out);
                self.apply(venue, shard_index, spare, now_ns, runtime)?;
            }
            return Ok(());
        };
        let spare_state = shard.conns[spare].state();
        let active_state = shard.conns[active].state();
        if !matches!(active_state, ConnState::Live | ConnState::Stale) {
            // The old connection dropped mid-rotation: a live spare takes over, anything else
            // is abandoned and the active connection's own reconnect carries on.
            shard.rotation = None;
            if spare_state == ConnState::Live {
                shard.active = spare;
                self.counters[venue].rotations += 1;
                tracing::warn!(venue = %links.name, "rotation: the old connection dropped; the replacement takes over");
                runtime.send_status(status_event(
                    links.id,
                    ALL_INSTRUMENTS,
                    VenueState::Live,
                    Reason::Rotation,
                    shard_index as u64,
                    now_ns,
                ))?;
                // The old connection's own reconnect is moot now: it becomes the idle spare.
                shard.conns[active].retire(now_ns, Reason::Rotation, &mut self.out);
                self.apply(venue, shard_index, active, now_ns, runtime)?;
            } else {
                shard.next_rotation_ns = now_ns + ROTATION_RETRY_NS;
                shard.conns[spare].retire(now_ns, Reason::Rotation, &mut self.out);
                self.apply(venue, shard_index, spare, now_ns, runtime)?;
            }
            return Ok(());
        }
        match spare_state {
            ConnState::Live => {
                // Agreement counts from the rotation's start: only the spare can agree with the
                // old connection, and a feed may see the spare's first message before this
                // thread has marked the spare live.
                let since = started;
                let overlap_since = shard.conns[spare].live_since_ns().unwrap_or(now_ns);
                let mut active_streams = 0;
                let mut agreed = 0;
                for stream in shard.streams.clone() {
                    if now_ns.saturating_sub(links.activity.last_ns(stream)) <= ACTIVE_WINDOW_NS {
                        active_streams += 1;
                        if links.activity.agree_ns(stream) >= since {
                            agreed += 1;
                        }
                    }
                }
                let forced = now_ns.saturating_sub(overlap_since) >= links.rotation_overlap_ns;
                if agreed == active_streams || forced {
                    let forced = forced && agreed < active_streams;
                    self.counters[venue].rotations += 1;
                    if forced {
                        self.counters[venue].forced_rotations += 1;
                    }
                    tracing::info!(
                        venue = %links.name,
                        old = shard.conns[active].slot(),
                        new = shard.conns[spare].slot(),
                        agreed,
                        active_streams,
                        forced,
                        overlap_ms = now_ns.saturating_sub(started) / NS_PER_MS,
                        "rotation: switched to the replacement connection"
                    );
                    shard.active = spare;
                    shard.rotation = None;
                    shard.conns[active].retire(now_ns, Reason::Retired, &mut self.out);
                    self.apply(venue, shard_index, active, now_ns, runtime)?;
                }
            }
            ConnState::BackingOff | ConnState::GaveUp | ConnState::Idle => {
                tracing::warn!(
                    venue = %links.name,
                    "rotation: the replacement connection failed; the current one carries on \
                     and the rotation is retried in a minute"
                );
                shard.rotation = None;
                shard.next_rotation_ns = now_ns + ROTATION_RETRY_NS;
                shard.conns[spare].retire(now_ns, Reason::Rotation, &mut self.out);
                self.apply(venue, shard_index, spare, now_ns, runtime)?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The `public/login` request for `login`, with a token made now.
/// Per schema, where a Databento resubscription replays from: with `recovery = "replay"`, the
/// earliest of the latest record times of the shard's symbols that had any (`None`: live only).
/// The feed skips what the replay repeats.
fn databento_starts(
    config: &crate::config::DatabentoConfig,
    activity: &StreamActivity,
    symbols: std::ops::Range<usize>,
    channels: usize,
) -> Vec<Option<u64>> {
    (0..channels)
        .map(|channel| {
            if config.recovery != crate::config::Recovery::Replay {
                return None;
            }
            symbols
                .clone()
                .map(|symbol| activity.replay_from(symbol * channels + channel))
                .filter(|&ns| ns > 0)
                .min()
        })
        .collect()
}

fn login_request(id: u64, login: &Login) -> Result<String, crate::venue::thalex::auth::AuthError> {
    let iat = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let token =
        crate::venue::thalex::auth::login_token(&login.key_id, &login.private_key_pem, iat)?;
    Ok(crate::venue::thalex::auth::login_request(id, &token))
}

fn status_event(
    venue: VenueId,
    instrument: InstrumentId,
    state: VenueState,
    reason: Reason,
    detail: u64,
    now_ns: u64,
) -> Event {
    Event::new(
        crate::venue::feed::own_header(venue, instrument, now_ns),
        Body::VenueStatus(VenueStatus::new(state, reason as u32, detail)),
    )
}

/// The slots a loaded config needs: two per shard of every venue.
pub fn slots_needed(loaded: &LoadedConfig) -> usize {
    loaded
        .venues
        .iter()
        .map(|venue| {
            crate::venue::shards(&venue.venue)
                .map(|shards| shards.len() * 2)
                .unwrap_or(0)
        })
        .sum()
}

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
    /// Why the appliance is not healthy: every venue's connection that is not live, every
    /// stale stream. Empty when all is well.
    pub fn health_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for links in &self.venues {
            if links.spec.is_none() {
                problems.push(format!(
                    "venue {}: its connection could not be prepared (see the log)",
                    links.name
                ));
                continue;
            }
            for (index, shard) in links.shards.iter().enumerate() {
                let conn = &shard.conns[shard.active];
                if conn.state() != ConnState::Live {
                    problems.push(format!(
                        "venue {} connection {index}: {} (failures in a row: {})",
                        links.name,
                        conn.state().name(),
                        conn.failures()
                    ));
                    continue;
                }
                for (offset, stale) in shard.stale_since.iter().enumerate() {
                    if stale.is_some() {
                        let stream = shard.streams.start + offset;
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
            for shard in &links.shards {
                for stream in shard.streams.clone() {
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
                    let stale = shard.stale_since[stream - shard.streams.start].is_some();
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
