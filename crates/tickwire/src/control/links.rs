//! The control plane's link logic, sans-IO: every venue's connections with their state machines
//! ([`crate::lifecycle::Connection`]), subscriptions, heartbeats, the staleness watchdog and
//! planned rotation. It takes network statuses, venue replies and time, and returns
//! [`LinkCommand`]s; `control::apply` carries them out on the runtime, `control::link_view`
//! renders the state as metrics and health. It holds no runtime and names no venue: what
//! differs between venues comes from each venue's [`Protocol`].
//!
//! A venue's streams (symbol × channel) are split into shards of at most
//! `max_streams_per_connection` streams, a symbol's channels together as far as the venue
//! serves them on one entry point (a venue with several, such as Binance USD-M's `/public` and
//! `/market`, gives each shard its own WebSocket path: `Shard::path`). Each shard owns two
//! links: the [`Role::Active`] connection, and a [`Role::Spare`] that a rotation opens beside it
//! (make-before-break). The decoder's feed drops whatever update id it has delivered already, so
//! while both run the strategy sees each message once; the switch waits until, on every stream
//! with recent traffic, both connections delivered the same update id (or until
//! `lifecycle.rotation_overlap_ms` has passed). A switch swaps the two links, so a slot keeps its
//! connection and changes its role.
//!
//! The strategy hears about it all through `VenueStatus` events ([`LinkCommand::Event`]), written
//! by the decoder thread in order with the market events: a shard's connection going live
//! (`Live`, instrument [`ALL_INSTRUMENTS`], detail = shard) and down (`Disconnected`), and each
//! stream going stale and recovering (`Stale` / `Recovered`, the stream's instrument, detail =
//! channel index).
//!
//! **Invariant:** nothing here blocks or does I/O beyond logging; the one shared state it reads
//! is each venue's [`StreamActivity`] (relaxed atomics the decoder thread writes), and the
//! network thread's last-read times come in as an argument of [`Venues::tick`].

use crate::config::{LoadedConfig, VenueConfig};
use crate::event::{Body, Event, InstrumentId, VenueId, VenueState, VenueStatus};
use crate::lifecycle::{Action, ConnState, Connection, Reason, ReasonCounts, StormBreaker, Timing};
use crate::net::ConnId;
use crate::pipeline::{NetStatus, NetStatusKind};
use crate::venue::feed::{ReplyKind, StreamActivity, VenueReply, ALL_INSTRUMENTS};
use crate::venue::login::Login;
use crate::venue::protocol::{NoticeKind, Protocol, Response, SubscribeContext};
use crate::venue::resolve::Resolved;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

pub(crate) use super::link_view::label;

const NS_PER_MS: u64 = 1_000_000;
/// After a failed rotation, the next try waits this long.
const ROTATION_RETRY_NS: u64 = 60_000 * NS_PER_MS;
/// A stream counts as active for the rotation switch if it delivered within this window.
const ACTIVE_WINDOW_NS: u64 = 2_000 * NS_PER_MS;
/// Stream ends kept for reports and tests.
const ENDS_KEPT: usize = 64;

/// What a connection of a shard is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It carries the shard.
    Active,
    /// Idle, or opened by a rotation beside the active one.
    Spare,
}

impl Role {
    pub const BOTH: [Role; 2] = [Role::Active, Role::Spare];

    pub fn other(self) -> Role {
        match self {
            Role::Active => Role::Spare,
            Role::Spare => Role::Active,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Spare => "spare",
        }
    }
}

/// Where a stream slot (a connection id of the network thread) belongs now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRef {
    /// Index of the venue, in the appliance file's order.
    pub venue: usize,
    pub shard: usize,
    pub role: Role,
}

/// What the link logic asks of the runtime; `control::apply` carries it out.
#[derive(Debug)]
pub enum LinkCommand {
    /// Start an attempt on `slot` with the prepared stream of venue `venue` (an index): resolve
    /// its host, then open it (a literal IP address at once; a name through
    /// [`Venues::on_resolved`], which answers with `Connect`). `generation` tags the answer and
    /// the statuses that will come back about it.
    Open {
        venue: usize,
        slot: ConnId,
        generation: u32,
    },
    /// Open the stream of the attempt `generation` on `slot` at `addr`, the address its lookup
    /// gave.
    Connect {
        venue: usize,
        slot: ConnId,
        generation: u32,
        addr: std::net::SocketAddr,
    },
    /// Send a text message (a login or subscription request).
    Send { slot: ConnId, text: String },
    /// Send a heartbeat ping.
    Ping { slot: ConnId },
    /// Send a datagram venue's request (a re-request its feed made) on socket `line` of its
    /// slot.
    SendDatagram {
        slot: ConnId,
        line: crate::net::udp::DatagramLine,
        datagram: crate::net::udp::OutDatagram,
    },
    /// Start the closing handshake.
    Close { slot: ConnId },
    /// Drop the socket at once.
    Abort { slot: ConnId },
    /// The connection carrying `instruments` of `venue` dropped: the decoder owes gaps.
    Disconnected {
        venue: VenueId,
        slot: ConnId,
        instruments: Range<InstrumentId>,
    },
    /// A status event for the strategy, written by the decoder thread in order with the
    /// market events.
    Event(Event),
}

/// How a venue stream ended.
#[derive(Clone, Debug)]
pub struct StreamEnd {
    pub conn: u32,
    /// The WebSocket close code the venue sent, if it sent one.
    pub close_code: Option<u16>,
    /// What went wrong, if anything did.
    pub error: Option<String>,
}

/// One connection of a shard and what goes with its socket.
pub(super) struct Link {
    pub(super) conn: Connection,
    /// Tags the statuses of the connection's current stream.
    generation: u32,
    /// When the connection last sent a heartbeat ping.
    pinged_ns: u64,
}

pub(super) struct Shard {
    instruments: Range<InstrumentId>,
    /// Indexes into the venue file's `symbols`.
    symbols: Range<usize>,
    /// Streams of the venue's activity table this shard carries (`symbol * channels +
    /// channel`), symbol-major, in the order its requests name them.
    pub(super) streams: Vec<usize>,
    /// The WebSocket path of its connections when the venue has several entry points.
    path: Option<String>,
    requests: Vec<Vec<String>>,
    /// Per request, per name: the stream it subscribes (`None` for a connection-wide channel).
    request_streams: Vec<Vec<Option<usize>>>,
    pub(super) active: Link,
    spare: Link,
    /// The venue announced it will close the active connection: rotate now.
    rotate_requested: bool,
    /// When the running rotation started.
    rotation: Option<u64>,
    next_rotation_ns: u64,
    /// Per stream of the shard: since when it is stale.
    pub(super) stale_since: Vec<Option<u64>>,
}

impl Shard {
    fn link(&self, role: Role) -> &Link {
        match role {
            Role::Active => &self.active,
            Role::Spare => &self.spare,
        }
    }

    fn link_mut(&mut self, role: Role) -> &mut Link {
        match role {
            Role::Active => &mut self.active,
            Role::Spare => &mut self.spare,
        }
    }
}

impl VenueLinks {
    /// Every stream of the venue's shards with whether it is stale, in the venue's stream
    /// order (symbol-major), whichever entry point's shard carries it.
    pub(super) fn streams_in_order(&self) -> Vec<(usize, bool)> {
        let mut streams: Vec<(usize, bool)> = self
            .shards
            .iter()
            .flat_map(|shard| {
                shard
                    .streams
                    .iter()
                    .zip(&shard.stale_since)
                    .map(|(&stream, stale)| (stream, stale.is_some()))
            })
            .collect();
        streams.sort_unstable_by_key(|&(stream, _)| stream);
        streams
    }
}

pub(super) struct VenueLinks {
    pub(super) name: String,
    protocol: &'static dyn Protocol,
    /// The venue file, for the requests made per connection.
    config: VenueConfig,
    /// Sent as the first request of every connection, when the venue file has a key.
    login: Option<Login>,
    ping_interval_ns: Option<u64>,
    read_timeout_ns: Option<u64>,
    /// Per stream, its name in logs and metrics.
    pub(super) stream_names: Vec<String>,
    id: VenueId,
    /// Channels per symbol (at least 1).
    channels: usize,
    /// Per channel: its staleness threshold.
    thresholds: Vec<Option<u64>>,
    rotate_after_ns: u64,
    rotation_overlap_ns: u64,
    breaker: StormBreaker,
    /// Whether the venue's stream could be prepared (else the error was logged, and its
    /// connections never start).
    pub(super) prepared: bool,
    pub(super) shards: Vec<Shard>,
    pub(super) activity: Arc<StreamActivity>,
}

impl VenueLinks {
    /// Whether the venue could be prepared and every shard's active connection is live.
    pub(super) fn live(&self) -> bool {
        self.prepared
            && self
                .shards
                .iter()
                .all(|shard| shard.active.conn.state() == ConnState::Live)
    }
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
    /// Channels the venue left out of a subscription's answer (a venue that drops invalid channels from its answer; `Protocol::answer_lists_accepted`).
    pub rejected_channels: u64,
    /// Logins the venue refused.
    pub refused_logins: u64,
    /// Requests the venue refused for its rate limit (each recycles the connection).
    pub throttled_requests: u64,
    /// Announcements that the venue will close a connection soon (`ReplyKind::ReconnectNotice`).
    pub reconnect_notices: u64,
    /// Errors the venue reported on a running session (`NoticeKind::Error`).
    pub venue_errors: u64,
    /// Warnings that tickwire reads too slowly (`NoticeKind::SlowReader`).
    pub slow_reader_warnings: u64,
    /// Other notices (acknowledgements, a replay completed: `NoticeKind::Other`).
    pub venue_notices: u64,
}

/// Every venue's connections.
pub struct Venues {
    pub(super) venues: Vec<VenueLinks>,
    /// By slot (connection id): where it belongs now.
    slots: Vec<Option<SlotRef>>,
    counters: Vec<LinkCounters>,
    /// Streams that ended (closed by the venue, reset, or failed), all venues together.
    pub streams_ended: u64,
    /// The most recent ends, oldest first (at most 64).
    pub ends: VecDeque<StreamEnd>,
    /// What the connection machines asked for, turned into commands by `follow`.
    actions: Vec<Action>,
    /// A connection changed state since `take_changed` was last called.
    changed: bool,
}

/// What a venue contributes to the slot plan.
pub struct VenuePlan<'a> {
    pub config: &'a VenueConfig,
    pub id: VenueId,
    pub instrument_base: InstrumentId,
    pub activity: Arc<StreamActivity>,
    /// Whether the venue's stream could be prepared (`venue::subscribe_spec`); the applier
    /// holds the prepared stream.
    pub prepared: bool,
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
        let mut slots: Vec<Option<SlotRef>> = Vec::new();
        let mut conn_venues = Vec::new();
        for (venue_index, plan) in plans.into_iter().enumerate() {
            let config = plan.config;
            let protocol = config.kind.protocol();
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
                let link = |slot: ConnId| Link {
                    conn: Connection::new(
                        slot,
                        secure,
                        timing,
                        &config.reconnect,
                        batches,
                        seed ^ (u64::from(slot) << 17),
                    ),
                    generation: 0,
                    pinged_ns: 0,
                };
                for role in Role::BOTH {
                    slots.push(Some(SlotRef {
                        venue: venue_index,
                        shard: shard_index,
                        role,
                    }));
                    conn_venues.push(plan.id);
                }
                let base = plan.instrument_base;
                let symbols = shard.symbols.clone();
                let streams: Vec<usize> = symbols
                    .clone()
                    .flat_map(|symbol| {
                        shard
                            .channels
                            .iter()
                            .map(move |&channel| symbol * channels + channel)
                    })
                    .collect();
                let mut next_stream = streams.iter().copied();
                let request_streams = shard
                    .requests
                    .iter()
                    .map(|names| {
                        names
                            .iter()
                            .map(|name| {
                                if protocol.names_a_stream(name) {
                                    next_stream.next()
                                } else {
                                    None
                                }
                            })
                            .collect()
                    })
                    .collect();
                shards.push(Shard {
                    request_streams,
                    rotate_requested: false,
                    instruments: base + symbols.start as InstrumentId
                        ..base + symbols.end as InstrumentId,
                    stale_since: vec![None; streams.len()],
                    streams,
                    path: shard.path,
                    symbols,
                    requests: shard.requests,
                    active: link(first),
                    spare: link(first + 1),
                    rotation: None,
                    next_rotation_ns: 0,
                });
            }
            venues.push(VenueLinks {
                name: config.name.clone(),
                protocol,
                config: config.clone(),
                login: plan.login,
                // Saturating: every key is bounded by the config check, and a value that got
                // past it must not wrap into a short timer (issue 32).
                ping_interval_ns: config
                    .lifecycle
                    .ping_interval()
                    .map(|ms| ms.saturating_mul(NS_PER_MS)),
                read_timeout_ns: config
                    .lifecycle
                    .read_timeout()
                    .map(|ms| ms.saturating_mul(NS_PER_MS)),
                stream_names: crate::venue::stream_names(config),
                id: plan.id,
                thresholds: config
                    .channels
                    .iter()
                    .map(|channel| {
                        config
                            .staleness
                            .threshold_ms(channel)
                            .map(|ms| ms.saturating_mul(NS_PER_MS))
                    })
                    .collect(),
                channels,
                rotate_after_ns: config.lifecycle.rotate_after_ms.saturating_mul(NS_PER_MS),
                rotation_overlap_ns: config
                    .lifecycle
                    .rotation_overlap_ms
                    .saturating_mul(NS_PER_MS),
                breaker: StormBreaker::new(config.reconnect.max_attempts_per_minute),
                prepared: plan.prepared,
                shards,
                activity: plan.activity,
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
                actions: Vec::new(),
                changed: false,
            },
            conn_venues,
        ))
    }

    /// By slot: the WebSocket path its connections take when its venue has several entry
    /// points (`None`: the venue's own), for the applier.
    pub fn slot_paths(&self) -> Vec<Option<String>> {
        self.slots
            .iter()
            .map(|slot| slot.and_then(|at| self.venues[at.venue].shards[at.shard].path.clone()))
            .collect()
    }

    /// Starts every shard's first connection.
    pub fn start(&mut self, now_ns: u64, out: &mut Vec<LinkCommand>) {
        for venue in 0..self.venues.len() {
            if !self.venues[venue].prepared {
                continue;
            }
            for shard in 0..self.venues[venue].shards.len() {
                let links = &mut self.venues[venue];
                links.shards[shard].active.conn.start(
                    now_ns,
                    &mut links.breaker,
                    &mut self.actions,
                );
                self.follow(
                    SlotRef {
                        venue,
                        shard,
                        role: Role::Active,
                    },
                    now_ns,
                    out,
                );
            }
        }
    }

    pub fn name(&self, venue: usize) -> &str {
        self.venues
            .get(venue)
            .map_or("?", |links| links.name.as_str())
    }

    /// Where slot `slot` belongs now.
    pub fn slot(&self, slot: ConnId) -> Option<SlotRef> {
        self.slots.get(slot as usize).copied().flatten()
    }

    /// A status report from the network thread.
    pub fn on_status(&mut self, now_ns: u64, status: NetStatus, out: &mut Vec<LinkCommand>) {
        let Some(at) = self.slot(status.conn) else {
            return;
        };
        let links = &mut self.venues[at.venue];
        let link = links.shards[at.shard].link_mut(at.role);
        if link.generation != status.generation {
            // About a stream this slot no longer has.
            return;
        }
        let name = &links.name;
        let conn = &mut link.conn;
        match status.kind {
            NetStatusKind::Connected => conn.on_connected(now_ns, &mut self.actions),
            NetStatusKind::Secured => conn.on_secured(now_ns, &mut self.actions),
            NetStatusKind::Open => conn.on_open(now_ns, &mut self.actions),
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
                conn.on_closed(now_ns, reason, &mut self.actions);
            }
            NetStatusKind::OpenFailed { error } => {
                self.streams_ended += 1;
                tracing::error!(venue = %name, conn = status.conn, "cannot open the venue stream: {error}");
                self.ends.push_back(StreamEnd {
                    conn: status.conn,
                    close_code: None,
                    error: Some(error),
                });
                conn.on_closed(now_ns, Reason::OpenRefused, &mut self.actions);
            }
        }
        self.follow(at, now_ns, out);
    }

    /// The answer to an attempt's address lookup: the attempt connects to the address, or, when
    /// the host did not resolve, fails with `dns-failed` and backs off like any other failure.
    /// An answer about an attempt that is over (a shutdown meanwhile) is dropped.
    pub fn on_resolved(&mut self, now_ns: u64, resolved: Resolved, out: &mut Vec<LinkCommand>) {
        let Some(at) = self.slot(resolved.slot) else {
            return;
        };
        if at.venue != resolved.venue {
            return;
        }
        let links = &mut self.venues[at.venue];
        let link = links.shards[at.shard].link_mut(at.role);
        if link.generation != resolved.generation || link.conn.state() != ConnState::Connecting {
            return;
        }
        match resolved.result {
            Ok(addr) => out.push(LinkCommand::Connect {
                venue: at.venue,
                slot: resolved.slot,
                generation: resolved.generation,
                addr,
            }),
            Err(error) => {
                tracing::warn!(
                    venue = %links.name,
                    conn = resolved.slot,
                    host = %links.config.url.host,
                    "cannot resolve the venue's host: {error}"
                );
                link.conn
                    .on_closed(now_ns, Reason::DnsFailed, &mut self.actions);
                self.follow(at, now_ns, out);
            }
        }
    }

    /// The earliest deadline of any connection's timers (timeouts, backoffs, paced requests):
    /// the control thread need not sleep past it.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.venues
            .iter()
            .flat_map(|links| &links.shards)
            .flat_map(|shard| [&shard.active, &shard.spare])
            .filter_map(|link| link.conn.next_deadline_ns())
            .min()
    }

    /// A venue's answer to a request, or a notice it sent on a connection.
    pub fn on_reply(&mut self, now_ns: u64, reply: VenueReply, out: &mut Vec<LinkCommand>) {
        let slot = (reply.id >> 32) as usize;
        let Some(Some(at)) = self.slots.get(slot).copied() else {
            return;
        };
        if self.venues[at.venue].id != reply.venue {
            return;
        }
        let protocol = self.venues[at.venue].protocol;
        let name = self.venues[at.venue].name.clone();
        match reply.kind {
            ReplyKind::Datagram => {
                let line = crate::net::udp::DatagramLine::from_index((reply.id & 0xff) as usize);
                let datagram = crate::net::udp::OutDatagram::new(reply.payload());
                if let (Some(line), Some(datagram)) = (line, datagram) {
                    out.push(LinkCommand::SendDatagram {
                        slot: slot as ConnId,
                        line,
                        datagram,
                    });
                }
                return;
            }
            ReplyKind::Notice => {
                let notice = protocol.read_notice(&reply);
                self.on_notice(at.venue, slot, &reply, &notice.kind);
                if notice.stream_broken {
                    // The feed cannot read the connection's stream any further: start afresh.
                    let link = self.venues[at.venue].shards[at.shard].link_mut(at.role);
                    link.conn
                        .recycle_for(now_ns, Reason::ProtocolError, &mut self.actions);
                    self.follow(at, now_ns, out);
                }
                return;
            }
            ReplyKind::ReconnectNotice => {
                self.counters[at.venue].reconnect_notices += 1;
                if at.role == Role::Active {
                    tracing::info!(
                        venue = %name,
                        conn = slot,
                        "the venue announced it will close the connection: opening a replacement \
                         before it does"
                    );
                    self.venues[at.venue].shards[at.shard].rotate_requested = true;
                }
                return;
            }
            ReplyKind::Resubscribe => {
                // The feed needs one stream afresh (its book broke): ask the venue for it again
                // on the connection that carries it, or start the connection afresh.
                let stream = (reply.id & 0xffff_ffff) as usize;
                let links = &self.venues[at.venue];
                let Some(stream_name) = links.stream_names.get(stream) else {
                    return;
                };
                let requests = links.protocol.resubscribe_requests(stream_name);
                tracing::info!(
                    venue = %name,
                    conn = slot,
                    stream = %stream_name,
                    "the feed needs the stream afresh: {}",
                    if requests.is_empty() { "recycling the connection" } else { "resubscribing" }
                );
                let link = self.venues[at.venue].shards[at.shard].link_mut(at.role);
                if requests.is_empty() {
                    link.conn
                        .recycle_for(now_ns, Reason::ProtocolError, &mut self.actions);
                    self.follow(at, now_ns, out);
                } else {
                    let conn = link.conn.slot();
                    for text in requests {
                        out.push(LinkCommand::Send { slot: conn, text });
                    }
                }
                return;
            }
            ReplyKind::Response => {}
        }
        let response = protocol.read_response(&reply);
        let mut reply = reply;
        if response == Response::SessionStarted {
            // The venue started the session: that answers the connection's one request.
            let link = self.venues[at.venue].shards[at.shard].link(at.role);
            match link.conn.oldest_outstanding() {
                Some(id) => reply.id = id,
                None => return,
            }
        }
        let links = &self.venues[at.venue];
        let Some(batch) = links.shards[at.shard].link(at.role).conn.batch_of(reply.id) else {
            return;
        };
        let login_batches = usize::from(links.login.is_some());
        if response == Response::Throttled {
            // A request lost to the venue's rate limit: start again on a fresh connection,
            // after the backoff, rather than run without it.
            tracing::warn!(
                venue = %name,
                conn = slot,
                "the venue throttled a request ({}); reconnecting after the backoff to send it \
                 again",
                reply.message()
            );
            self.counters[at.venue].throttled_requests += 1;
            let link = self.venues[at.venue].shards[at.shard].link_mut(at.role);
            link.conn
                .recycle_for(now_ns, Reason::Throttled, &mut self.actions);
            self.follow(at, now_ns, out);
            return;
        }
        if batch < login_batches {
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
                    self.counters[at.venue].refused_logins += 1;
                }
            }
            let link = self.venues[at.venue].shards[at.shard].link_mut(at.role);
            link.conn.on_ack(now_ns, reply.id, &mut self.actions);
            self.follow(at, now_ns, out);
            return;
        }
        if reply.error.is_none() && protocol.answer_lists_accepted() {
            self.check_accepted(at, batch - login_batches);
        }
        let link = self.venues[at.venue].shards[at.shard].link_mut(at.role);
        match reply.error {
            None => link.conn.on_ack(now_ns, reply.id, &mut self.actions),
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
                self.counters[at.venue].refused_requests += 1;
                link.conn.on_refused(now_ns, reply.id, &mut self.actions);
            }
        }
        self.follow(at, now_ns, out);
    }

    /// A condition the venue reported on a connection: a log line and a counter.
    fn on_notice(&mut self, venue: usize, slot: usize, reply: &VenueReply, kind: &NoticeKind) {
        let name = &self.venues[venue].name;
        let counters = &mut self.counters[venue];
        let message = reply.message();
        match kind {
            NoticeKind::Error { what } => {
                counters.venue_errors += 1;
                tracing::error!(venue = %name, conn = slot, code = ?reply.error, "the venue reported an error ({what}): {message}");
            }
            NoticeKind::SlowReader => {
                counters.slow_reader_warnings += 1;
                tracing::warn!(venue = %name, conn = slot, "the venue says tickwire reads too slowly: {message}");
            }
            NoticeKind::Other { what } => {
                counters.venue_notices += 1;
                tracing::info!(venue = %name, conn = slot, "venue notice ({what}): {message}");
            }
        }
    }

    /// After a subscription answer: which of the batch's streams the venue left out.
    fn check_accepted(&mut self, at: SlotRef, batch: usize) {
        let links = &self.venues[at.venue];
        let shard = &links.shards[at.shard];
        let slot = shard.link(at.role).conn.slot();
        let Some(streams) = shard.request_streams.get(batch) else {
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
        self.counters[at.venue].rejected_channels += rejected.len() as u64;
    }

    /// Timers, heartbeats, staleness and rotation; call every control tick. `last_read_ns`
    /// says when the network thread last read anything on a slot.
    pub fn tick(
        &mut self,
        now_ns: u64,
        last_read_ns: &dyn Fn(ConnId) -> u64,
        out: &mut Vec<LinkCommand>,
    ) {
        for venue in 0..self.venues.len() {
            for shard in 0..self.venues[venue].shards.len() {
                for role in Role::BOTH {
                    let links = &mut self.venues[venue];
                    links.shards[shard].link_mut(role).conn.tick(
                        now_ns,
                        &mut links.breaker,
                        &mut self.actions,
                    );
                    self.follow(SlotRef { venue, shard, role }, now_ns, out);
                }
                self.heartbeat(venue, shard, now_ns, last_read_ns, out);
                self.staleness(venue, shard, now_ns, out);
                self.rotation(venue, shard, now_ns, out);
            }
            self.counters[venue].postponed = self.venues[venue].breaker.postponed;
        }
    }

    /// Closes every connection for good (shutdown); `all_closed` says when they are.
    pub fn close_all(&mut self, now_ns: u64, out: &mut Vec<LinkCommand>) {
        for venue in 0..self.venues.len() {
            for shard in 0..self.venues[venue].shards.len() {
                for role in Role::BOTH {
                    self.venues[venue].shards[shard].link_mut(role).conn.retire(
                        now_ns,
                        Reason::Shutdown,
                        &mut self.actions,
                    );
                    self.follow(SlotRef { venue, shard, role }, now_ns, out);
                }
            }
        }
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
            .flat_map(|shard| [&shard.active, &shard.spare])
            .all(|link| !link.conn.state().has_socket())
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
            for link in links
                .shards
                .iter()
                .flat_map(|shard| [&shard.active, &shard.spare])
            {
                counters.transitions.merge(link.conn.counts());
                counters.attempts += link.conn.attempts;
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
                .map(|shard| shard.active.conn.state())
                .collect()
        })
    }

    /// The state of a shard's connection in `role`.
    pub fn state(&self, venue: usize, shard: usize, role: Role) -> Option<ConnState> {
        let shard = self.venues.get(venue)?.shards.get(shard)?;
        Some(shard.link(role).conn.state())
    }

    /// The rotation's switch: the spare becomes the active connection (and the slot map says
    /// so).
    fn switch(&mut self, venue: usize, shard: usize) {
        let links = &mut self.venues[venue];
        let shard_links = &mut links.shards[shard];
        std::mem::swap(&mut shard_links.active, &mut shard_links.spare);
        for role in Role::BOTH {
            let slot = shard_links.link(role).conn.slot() as usize;
            if let Some(entry) = self.slots.get_mut(slot) {
                *entry = Some(SlotRef { venue, shard, role });
            }
        }
    }

    /// Turns what a connection's machine asked for into commands.
    fn follow(&mut self, at: SlotRef, now_ns: u64, out: &mut Vec<LinkCommand>) {
        let mut actions = std::mem::take(&mut self.actions);
        let links = &mut self.venues[at.venue];
        let shard = &mut links.shards[at.shard];
        let is_active = at.role == Role::Active;
        for action in actions.drain(..) {
            let slot = shard.link(at.role).conn.slot();
            match action {
                Action::Open => {
                    if !links.prepared {
                        continue;
                    }
                    let link = shard.link_mut(at.role);
                    link.generation = link.generation.wrapping_add(1);
                    out.push(LinkCommand::Open {
                        venue: at.venue,
                        slot,
                        generation: link.generation,
                    });
                }
                Action::Subscribe { id, batch } => {
                    let login_batches = usize::from(links.login.is_some());
                    if batch < login_batches {
                        if let Some(login) = &links.login {
                            match links.protocol.login_request(id, login) {
                                Ok(text) => out.push(LinkCommand::Send { slot, text }),
                                // Checked at start-up, so this cannot happen unless the clock
                                // is before 1970; the ack timeout then recycles the connection.
                                Err(error) => {
                                    tracing::error!(venue = %links.name, "login request: {error}")
                                }
                            }
                        }
                        continue;
                    }
                    let batch = batch - login_batches;
                    let Some(names) = shard.requests.get(batch) else {
                        continue;
                    };
                    if links.protocol.answer_lists_accepted() {
                        // The answer names what the venue accepted; forget older answers.
                        for stream in shard.request_streams[batch].iter().flatten() {
                            links.activity.clear_accepted(*stream);
                        }
                    }
                    let request = SubscribeContext {
                        id,
                        names,
                        venue: &links.config,
                        symbols: shard.symbols.clone(),
                        streams: &shard.streams,
                        activity: &links.activity,
                    };
                    if let Some(text) = links.protocol.subscribe_request(&request) {
                        out.push(LinkCommand::Send { slot, text });
                    }
                }
                Action::Close => out.push(LinkCommand::Close { slot }),
                Action::Abort => out.push(LinkCommand::Abort { slot }),
                Action::Down { gap } => {
                    if gap && is_active {
                        out.push(LinkCommand::Disconnected {
                            venue: links.id,
                            slot,
                            instruments: shard.instruments.clone(),
                        });
                    }
                }
                Action::Transition { from, to, reason } => {
                    self.changed = true;
                    let conn = &shard.link(at.role).conn;
                    let role = at.role.name();
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
                        ConnState::Idle
                        | ConnState::Connecting
                        | ConnState::TlsHandshake
                        | ConnState::Upgrading
                        | ConnState::Subscribing
                        | ConnState::Live
                        | ConnState::Closing => tracing::info!(
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
                    // Live, and down when it stops being live; and down again, with the reason,
                    // whenever an attempt of a shard that is not live fails, so a strategy
                    // learns why the venue stays away (`dns-failed`, `connect-failed`, ...)
                    // instead of hearing nothing at all.
                    let attempt_failed =
                        matches!(
                            from,
                            ConnState::Connecting
                                | ConnState::TlsHandshake
                                | ConnState::Upgrading
                                | ConnState::Subscribing
                        ) && matches!(to, ConnState::BackingOff | ConnState::GaveUp);
                    let state = if to == ConnState::Live {
                        Some(VenueState::Live)
                    } else if attempt_failed
                        || matches!(from, ConnState::Live | ConnState::Stale)
                            && !matches!(to, ConnState::Live | ConnState::Stale)
                    {
                        Some(VenueState::Disconnected)
                    } else {
                        None
                    };
                    if let Some(state) = state {
                        out.push(LinkCommand::Event(status_event(
                            links.id,
                            ALL_INSTRUMENTS,
                            state,
                            reason,
                            at.shard as u64,
                            now_ns,
                        )));
                    }
                }
            }
        }
        self.actions = actions;
    }

    /// Heartbeat pings on each open connection of a shard, and the read timeout: a connection
    /// that read nothing at all (not even the answers to its pings) is recycled.
    fn heartbeat(
        &mut self,
        venue: usize,
        shard: usize,
        now_ns: u64,
        last_read_ns: &dyn Fn(ConnId) -> u64,
        out: &mut Vec<LinkCommand>,
    ) {
        let links = &mut self.venues[venue];
        if links.ping_interval_ns.is_none() && links.read_timeout_ns.is_none() {
            return;
        }
        for role in Role::BOTH {
            let link = links.shards[shard].link_mut(role);
            // Past `Upgrading` the network thread has reported the stream open, so its
            // last-read time belongs to this stream.
            if !matches!(
                link.conn.state(),
                ConnState::Subscribing | ConnState::Live | ConnState::Stale
            ) {
                link.pinged_ns = 0;
                continue;
            }
            let slot = link.conn.slot();
            if let Some(interval) = links.ping_interval_ns {
                if now_ns.saturating_sub(link.pinged_ns) >= interval {
                    link.pinged_ns = now_ns;
                    // A ping frame, the venue's own ping message, or both (`Protocol::heartbeat`).
                    let heartbeat = links.protocol.heartbeat();
                    if heartbeat.frame() {
                        out.push(LinkCommand::Ping { slot });
                    }
                    if let Some(text) = heartbeat.message() {
                        out.push(LinkCommand::Send {
                            slot,
                            text: text.to_owned(),
                        });
                    }
                }
            }
            let Some(timeout) = links.read_timeout_ns else {
                continue;
            };
            let last = last_read_ns(slot).max(link.conn.since_ns());
            if now_ns.saturating_sub(last) > timeout {
                tracing::warn!(
                    venue = %links.name,
                    conn = slot,
                    silent_ms = now_ns.saturating_sub(last) / NS_PER_MS,
                    "nothing read on the connection, not even pongs: recycling it"
                );
                link.conn
                    .recycle_for(now_ns, Reason::ReadTimeout, &mut self.actions);
                self.follow(SlotRef { venue, shard, role }, now_ns, out);
                return;
            }
        }
    }

    /// The per-stream watchdog of a shard's live connection.
    fn staleness(
        &mut self,
        venue: usize,
        shard_index: usize,
        now_ns: u64,
        out: &mut Vec<LinkCommand>,
    ) {
        let links = &mut self.venues[venue];
        let channels = links.channels;
        let shard = &mut links.shards[shard_index];
        let active = &shard.active.conn;
        let Some(live_since) = active.live_since_ns() else {
            return;
        };
        if active.state() != ConnState::Live {
            return;
        }
        let mut watched = 0;
        let mut stale = 0;
        let mut newly_stale = Vec::new();
        let first_symbol = shard.symbols.start;
        for (index, &stream) in shard.streams.iter().enumerate() {
            let Some(threshold) = links.thresholds.get(stream % channels).copied().flatten() else {
                continue;
            };
            watched += 1;
            let last = links.activity.last_ns(stream);
            let instrument =
                shard.instruments.start + (stream / channels - first_symbol) as InstrumentId;
            match shard.stale_since[index] {
                None => {
                    if now_ns.saturating_sub(last.max(live_since)) > threshold {
                        shard.stale_since[index] = Some(now_ns);
                        stale += 1;
                        self.counters[venue].stale_streams += 1;
                        newly_stale.push(stream);
                        out.push(LinkCommand::Event(status_event(
                            links.id,
                            instrument,
                            VenueState::Stale,
                            Reason::AllStreamsStale,
                            (stream % channels) as u64,
                            now_ns,
                        )));
                    }
                }
                Some(since) => {
                    if last > since.saturating_sub(threshold)
                        && now_ns.saturating_sub(last) <= threshold
                    {
                        shard.stale_since[index] = None;
                        self.counters[venue].recovered_streams += 1;
                        tracing::info!(
                            venue = %links.name,
                            stream = %links.stream_names[stream].clone(),
                            "stream recovered"
                        );
                        out.push(LinkCommand::Event(status_event(
                            links.id,
                            instrument,
                            VenueState::Recovered,
                            Reason::Recovered,
                            (stream % channels) as u64,
                            now_ns,
                        )));
                    } else if now_ns.saturating_sub(last.max(live_since)) > threshold {
                        // Still stale, and silent for the threshold on this connection too. A
                        // stream still marked stale from the connection before is not held
                        // against a connection that went live a moment ago and has not had the
                        // time to deliver (a control thread woken by the acknowledgement gets
                        // here before the first message).
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
            shard.active.conn.recycle(now_ns, &mut self.actions);
            self.follow(
                SlotRef {
                    venue,
                    shard: shard_index,
                    role: Role::Active,
                },
                now_ns,
                out,
            );
        }
    }

    /// Planned rotation: open the spare, switch when both agree, retire the old one.
    fn rotation(
        &mut self,
        venue: usize,
        shard_index: usize,
        now_ns: u64,
        out: &mut Vec<LinkCommand>,
    ) {
        let active_at = SlotRef {
            venue,
            shard: shard_index,
            role: Role::Active,
        };
        let spare_at = SlotRef {
            role: Role::Spare,
            ..active_at
        };
        let links = &mut self.venues[venue];
        let shard = &mut links.shards[shard_index];
        let Some(started) = shard.rotation else {
            let planned = links.rotate_after_ns > 0
                && now_ns >= shard.next_rotation_ns
                && shard
                    .active
                    .conn
                    .live_since_ns()
                    .is_some_and(|since| now_ns.saturating_sub(since) >= links.rotate_after_ns);
            let due = (planned || shard.rotate_requested)
                && shard.active.conn.state() == ConnState::Live
                && shard.spare.conn.state() == ConnState::Idle;
            if due {
                shard.rotate_requested = false;
                tracing::info!(
                    venue = %links.name,
                    conn = shard.active.conn.slot(),
                    spare = shard.spare.conn.slot(),
                    "rotation: opening a replacement connection"
                );
                shard.rotation = Some(now_ns);
                shard
                    .spare
                    .conn
                    .start(now_ns, &mut links.breaker, &mut self.actions);
                self.follow(spare_at, now_ns, out);
            }
            return;
        };
        let spare_state = shard.spare.conn.state();
        let active_state = shard.active.conn.state();
        if !matches!(active_state, ConnState::Live | ConnState::Stale) {
            // The old connection dropped mid-rotation: a live spare takes over, anything else
            // is abandoned and the active connection's own reconnect carries on.
            shard.rotation = None;
            if spare_state == ConnState::Live {
                self.counters[venue].rotations += 1;
                tracing::warn!(venue = %links.name, "rotation: the old connection dropped; the replacement takes over");
                out.push(LinkCommand::Event(status_event(
                    links.id,
                    ALL_INSTRUMENTS,
                    VenueState::Live,
                    Reason::Rotation,
                    shard_index as u64,
                    now_ns,
                )));
                self.switch(venue, shard_index);
                // The old connection's own reconnect is moot now: it becomes the idle spare.
                self.venues[venue].shards[shard_index].spare.conn.retire(
                    now_ns,
                    Reason::Rotation,
                    &mut self.actions,
                );
                self.follow(spare_at, now_ns, out);
            } else {
                shard.next_rotation_ns = now_ns + ROTATION_RETRY_NS;
                shard
                    .spare
                    .conn
                    .retire(now_ns, Reason::Rotation, &mut self.actions);
                self.follow(spare_at, now_ns, out);
            }
            return;
        }
        match spare_state {
            ConnState::Live => {
                // Agreement counts from the rotation's start: only the spare can agree with the
                // old connection, and a feed may see the spare's first message before this
                // thread has marked the spare live.
                let since = started;
                let overlap_since = shard.spare.conn.live_since_ns().unwrap_or(now_ns);
                let mut active_streams = 0;
                let mut agreed = 0;
                for &stream in &shard.streams {
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
                        old = shard.active.conn.slot(),
                        new = shard.spare.conn.slot(),
                        agreed,
                        active_streams,
                        forced,
                        overlap_ms = now_ns.saturating_sub(started) / NS_PER_MS,
                        "rotation: switched to the replacement connection"
                    );
                    shard.rotation = None;
                    self.switch(venue, shard_index);
                    self.venues[venue].shards[shard_index].spare.conn.retire(
                        now_ns,
                        Reason::Retired,
                        &mut self.actions,
                    );
                    self.follow(spare_at, now_ns, out);
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
                shard
                    .spare
                    .conn
                    .retire(now_ns, Reason::Rotation, &mut self.actions);
                self.follow(spare_at, now_ns, out);
            }
            ConnState::Connecting
            | ConnState::TlsHandshake
            | ConnState::Upgrading
            | ConnState::Subscribing
            | ConnState::Stale
            | ConnState::Closing => {}
        }
    }
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

#[cfg(test)]
mod tests;
