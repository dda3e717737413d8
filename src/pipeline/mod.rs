//! The running appliance: rings wired between the stages, hot threads started from the plan,
//! and the control thread's report loop.
//!
//! ```text
//!  net stage --(frame ring: FrameProducer/FrameConsumer)--> decoder stage
//!  decoder stage --(event ring: spsc::Producer<Event>/Consumer<Event>)--> strategy stage
//! ```
//!
//! Each hot thread runs the stages the plan gave it, in pipeline order, in one poll loop: poll
//! every stage, count a heartbeat, and wait as its strategy says when no stage had work.
//!
//! The network stage owns a [`NetEngine`], created on the network thread itself (io_uring's
//! SINGLE_ISSUER ties the ring to the thread that made it). The control thread prepares each
//! venue's stream (DNS, TLS settings: blocking work) and hands it over through a command ring;
//! the network thread reports streams opening and closing through a status ring, and stores each
//! slot's last-read time where the control thread loads it without a lock.
//!
//! The decoder stage hands each frame to its connection's venue [`Feed`] (frames of a connection
//! without one are counted as undecoded), publishes the events once per batch, and relays the
//! feeds' snapshot requests to the control thread and the replies back. The strategy stage
//! records wire-to-strategy latency for every event, keeps the quote board, and, when the
//! simulator's send stamps are wired in, send-to-strategy latency per quote.

use crate::clock::Clock;
use crate::config::{LoadedConfig, NetBackend, NetWait, Stage};
use crate::event::{flags, Body, Event, InstrumentId, VenueId};
use crate::lifecycle::{self, Reason};
use crate::metrics::{self, CounterReader, CounterWriter, LatencyCollector, LatencyRecorder};
use crate::net::engine::{NetEngine, StreamEvent, StreamSpec};
use crate::net::{BackendChoice, ConnId, SocketOptions, Transport, TransportConfig, WaitMode};
use crate::ring::{self, FrameConsumer, FrameProducer, RingStats};
use crate::strategy::board::QuoteBoard;
use crate::strategy::stamps::{Stamp, StampMatcher};
use crate::strategy::{Market, Strategy};
use crate::thread::{self, HotThread, ThreadError, Wakeup};
use crate::venue::feed::{
    EventSink, Feed, MalformedSample, Publisher, SnapshotReply, SnapshotRequest, VenueReply,
};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Events the decoder writes before publishing them as one batch.
const EVENT_BATCH: usize = 64;
/// Batches a stage handles per poll round at most, while there are full ones.
const BATCHES_PER_POLL: usize = 16;
/// Free event slots the decoder wants before it decodes another batch in the same round (a
/// frame may become many events: a depth diff is one per level).
const EVENT_ROOM_PER_BATCH: usize = 4096;
/// The longest the decoder defers its control work (snapshot requests and replies, disconnects)
/// while frames keep filling whole batches. Far below a REST round trip, so a book's sync is never
/// held back by it, and far above a batch's decoding time, so a backlog is not interrupted often.
const CONTROL_MAX_DEFER_NS: u64 = 1_000_000;
/// Highest latency the stage histograms track: 10 s (anything above is clamped and counted).
const HIGHEST_LATENCY_NS: u64 = 10_000_000_000;

/// One stage's state on its thread. `poll` does a bounded amount of work and says whether it
/// found any.
trait StagePoll: Send {
    /// Called once on the stage's own thread before the first poll.
    fn start(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn poll(&mut self) -> bool;
    /// Called when the thread is about to stop.
    fn finish(&mut self) {}
}

/// A request from the control thread to the network thread.
pub enum NetCommand {
    /// Open stream slot `conn`; its statuses carry `generation`, so that a late report about a
    /// slot's previous stream is never taken for one about the new one.
    Open {
        conn: ConnId,
        generation: u32,
        spec: Box<StreamSpec>,
    },
    /// Start the WebSocket closing handshake (code 1000).
    Close { conn: ConnId },
    /// Drop the socket at once, without an event.
    Abort { conn: ConnId },
    /// Send a text message (a subscription request) on an open stream.
    Send { conn: ConnId, text: String },
    /// Send a WebSocket ping on an open stream (a venue whose heartbeat is the client's ping);
    /// nothing when the slot has no open WebSocket stream.
    Ping { conn: ConnId },
}

/// A stream state change, from the network thread to the control thread.
#[derive(Debug)]
pub struct NetStatus {
    pub conn: ConnId,
    pub generation: u32,
    pub kind: NetStatusKind,
}

#[derive(Debug)]
pub enum NetStatusKind {
    Connected,
    Secured,
    Open,
    Closed {
        close_code: Option<u16>,
        /// The lifecycle's name for how it ended.
        reason: Reason,
        error: Option<String>,
    },
    /// An `Open` command the engine refused.
    OpenFailed {
        error: String,
    },
}

/// Work the control thread hands the decoder thread.
#[derive(Debug)]
pub enum DecoderCommand {
    /// The connection carrying these instruments of a venue dropped: gaps are due.
    Disconnected {
        venue: VenueId,
        /// The connection slot that dropped.
        conn: ConnId,
        instruments: Range<InstrumentId>,
    },
    /// A status event for the strategy (a connection or a stream changed state), written in
    /// order with the market events.
    Status(Event),
}

/// What the network stage needs to build its engine on its own thread.
struct NetSetup {
    backend: BackendChoice,
    wait: WaitMode,
    transport: TransportConfig,
    clock: Clock,
    frames: FrameProducer,
    /// Per slot: the engine's last-read times, shared with `Runtime::last_read_ns`.
    last_read: Arc<[AtomicU64]>,
}

/// The network stage: a `NetEngine` over the configured backend, fed by the command ring.
struct NetStage {
    setup: Option<NetSetup>,
    engine: Option<NetEngine>,
    commands: ring::Consumer<NetCommand>,
    statuses: ring::Producer<NetStatus>,
    /// The backend line for the log, filled in by `start`.
    backend: Arc<std::sync::Mutex<String>>,
    /// Per slot: the generation of its current stream.
    generations: Vec<u32>,
}

impl StagePoll for NetStage {
    fn start(&mut self) -> Result<(), String> {
        let setup = self.setup.take().ok_or("network stage started twice")?;
        let (transport, why) = Transport::open(setup.backend, setup.transport, setup.clock)
            .map_err(|error| error.to_string())?;
        if let Ok(mut backend) = self.backend.lock() {
            *backend = why;
        }
        self.engine = Some(NetEngine::with_last_read(
            transport,
            setup.frames,
            setup.wait,
            setup.last_read,
        ));
        Ok(())
    }

    fn poll(&mut self) -> bool {
        // Borrowed in place: the engine (its transport's rings and buffers) is never moved.
        let NetStage {
            engine,
            commands,
            statuses: status_ring,
            generations,
            ..
        } = self;
        let Some(engine) = engine.as_mut() else {
            return false;
        };
        // The status ring is sized for every stream's changes between two control ticks; a full
        // ring means the control thread is wedged, and the watchdog will say so.
        let mut report = |status: NetStatus| {
            let _ = status_ring.try_push(status);
        };
        let mut commanded = false;
        while let Some(command) = commands.try_pop() {
            commanded = true;
            match command {
                NetCommand::Open {
                    conn,
                    generation,
                    spec,
                } => {
                    if let Some(slot) = generations.get_mut(conn as usize) {
                        *slot = generation;
                    }
                    if let Err(error) = engine.open(conn, *spec) {
                        report(NetStatus {
                            conn,
                            generation,
                            kind: NetStatusKind::OpenFailed {
                                error: error.to_string(),
                            },
                        });
                    }
                }
                NetCommand::Close { conn } => engine.close(conn, 1000),
                NetCommand::Abort { conn } => engine.abort(conn),
                // A stream that closed meanwhile cannot take it; its Closed status says why.
                NetCommand::Send { conn, text } => {
                    let _ = engine.send_text(conn, &text);
                }
                // Likewise: a ping that finds its stream gone (a stale command after a close)
                // is dropped; there is nothing to keep alive.
                NetCommand::Ping { conn } => {
                    let _ = engine.ping(conn);
                }
            }
        }
        let mut statuses = Vec::new();
        let worked = match engine.poll(&mut |conn, event| statuses.push((conn, event))) {
            Ok(count) => count > 0,
            Err(_) => false,
        };
        for (conn, event) in statuses {
            let kind = match event {
                StreamEvent::Connected => NetStatusKind::Connected,
                StreamEvent::Secured => NetStatusKind::Secured,
                StreamEvent::Open => NetStatusKind::Open,
                StreamEvent::Closed { close_code, error } => NetStatusKind::Closed {
                    close_code,
                    reason: lifecycle::reason_of(error.as_ref()),
                    error: error.map(|error| error.to_string()),
                },
            };
            let generation = generations.get(conn as usize).copied().unwrap_or(0);
            report(NetStatus {
                conn,
                generation,
                kind,
            });
        }
        worked || commanded
    }
}

/// The decoder stage: drains frames into the venue feeds, writes events.
struct DecoderStage {
    frames: FrameConsumer,
    events: ring::Producer<Event>,
    /// By venue id.
    feeds: Vec<Box<dyn Feed>>,
    /// By connection slot: the venue whose feed decodes it (`VenueId::MAX`: none).
    conn_venues: Vec<VenueId>,
    replies: ring::Producer<VenueReply>,
    /// Events are being lost to a full event ring (see `EventSink`).
    events_lost: bool,
    undecoded: CounterWriter,
    strategy_wakeup: Option<Wakeup>,
    clock: Clock,
    snapshot_requests: ring::Producer<SnapshotRequest>,
    snapshot_replies: ring::Consumer<Box<SnapshotReply>>,
    malformed: ring::Producer<MalformedSample>,
    /// Disconnections (gaps due) and status events from the control thread.
    commands: ring::Consumer<DecoderCommand>,
    /// When the control work last ran (see `DecoderStage::poll`).
    last_control_ns: u64,
    /// Per venue: messages and bytes handed to its feed.
    traffic: Vec<(CounterWriter, CounterWriter)>,
    receive_to_decoded: LatencyRecorder,
    /// Receive times of the current batch's frames, for `receive_to_decoded`.
    batch_recv_ns: [u64; EVENT_BATCH],
    /// Per publication: events published so far and when, for decoded-to-strategy latency.
    publish_marks: ring::Producer<PublishMark>,
    published: u64,
    /// Events per frame in the last batch that decoded any (at least 1): how many frames the
    /// event ring has room for.
    events_per_frame: usize,
}

/// A publication of the decoder: after it, `events` events in all had been published, at
/// `at_ns`. The strategy stage finds each event's publication by its position.
#[derive(Clone, Copy, Debug)]
struct PublishMark {
    events: u64,
    at_ns: u64,
}

/// Notes a publication of `count` events, before it is made, so that the strategy never takes
/// an event whose publication it cannot find (a full mark ring drops the mark: the strategy then
/// times those events against a later publication).
fn mark_publication(
    marks: &mut ring::Producer<PublishMark>,
    published: &mut u64,
    count: usize,
    at_ns: u64,
) {
    if count > 0 {
        *published += count as u64;
        let _ = marks.try_push(PublishMark {
            events: *published,
            at_ns,
        });
    }
}

/// The decoder stage's side of a publication: marked before, the strategy woken after.
struct Publication<'p> {
    marks: &'p mut ring::Producer<PublishMark>,
    published: &'p mut u64,
    clock: Clock,
    wakeup: Option<&'p Wakeup>,
}

impl Publisher for Publication<'_> {
    #[inline]
    fn before(&mut self, count: usize) {
        mark_publication(self.marks, self.published, count, self.clock.now_ns());
    }

    #[inline]
    fn after(&mut self) {
        if let Some(wakeup) = self.wakeup {
            wakeup.wake();
        }
    }
}

impl StagePoll for DecoderStage {
    fn finish(&mut self) {
        self.receive_to_decoded.flush();
    }

    fn poll(&mut self) -> bool {
        let undecoded = &mut self.undecoded;
        let feeds = &mut self.feeds;
        let conn_venues = &self.conn_venues;
        let traffic = &mut self.traffic;
        let batch_recv_ns = &mut self.batch_recv_ns;
        let events_per_frame = &mut self.events_per_frame;
        let mut publication = Publication {
            marks: &mut self.publish_marks,
            published: &mut self.published,
            clock: self.clock,
            wakeup: self.strategy_wakeup.as_ref(),
        };
        let mut sink =
            EventSink::with_publisher(&mut self.events, &mut self.events_lost, &mut publication);
        let mut drained = 0;
        let mut now_ns = 0;
        let mut caught_up = true;
        // Up to `BATCHES_PER_POLL` batches while the frame ring has full ones and the event ring
        // has room, each published at once: a network stage on the same thread can hand over
        // far more than one batch per round at high rates, and one batch a round would let the
        // frame ring overflow.
        for round in 0..BATCHES_PER_POLL {
            // No more frames than the event ring has room for at the rate the last batch made
            // events, `EVENT_ROOM_PER_BATCH` kept spare: a WebSocket frame makes one event or a
            // few dozen, a raw byte stream's chunk (Databento's 64 KiB of DBN) a thousand, and 64
            // such chunks would overrun a ring that a strategy on the same thread cannot drain
            // before this round ends. The first batch of a round takes at least one frame, so
            // that a ring smaller than the spare room, or a frame that made more events than the
            // ring holds, never stops decoding for good.
            let room = sink.free_slots().saturating_sub(EVENT_ROOM_PER_BATCH);
            let mut frames = (room / (*events_per_frame).max(1)).min(EVENT_BATCH);
            if round == 0 {
                frames = frames.max(1);
            }
            if frames == 0 {
                caught_up = false;
                break;
            }
            let mut decoded = 0;
            let events_before = sink.total_written();
            let batch = self.frames.drain(frames, |tag, frame| {
                let (conn, _kind) = crate::net::engine::split_tag(tag);
                let venue = conn_venues
                    .get(conn as usize)
                    .copied()
                    .unwrap_or(VenueId::MAX);
                let feed = feeds.get_mut(venue as usize);
                match (feed, crate::net::engine::split_frame(frame)) {
                    (Some(feed), Some((recv_ts_ns, payload))) => {
                        feed.on_message(conn, recv_ts_ns, payload, &mut sink);
                        if let Some((messages, bytes)) = traffic.get_mut(venue as usize) {
                            messages.increment();
                            bytes.add(payload.len() as u64);
                        }
                        if let Some(slot) = batch_recv_ns.get_mut(decoded) {
                            *slot = recv_ts_ns;
                            decoded += 1;
                        }
                        // A frame that makes `EventSink::PUBLISH_EVERY` events or more (a byte
                        // stream's chunk) has the sink publish them as they come, rather than
                        // after the other frames of the batch.
                    }
                    _ => undecoded.increment(),
                }
            });
            drained += batch;
            if batch > 0 {
                let batch_events = sink.total_written() - events_before;
                *events_per_frame = batch_events.div_ceil(batch).max(1);
            }
            now_ns = self.clock.now_ns();
            // One clock read per batch: each frame's decode finished by now.
            for &recv_ts_ns in &batch_recv_ns[..decoded] {
                self.receive_to_decoded
                    .record(now_ns.saturating_sub(recv_ts_ns));
            }
            caught_up = batch < frames;
            if caught_up || sink.free_slots() < EVENT_ROOM_PER_BATCH {
                break;
            }
            sink.publish();
        }
        // Replies to the control thread's requests go out at once: a connection waits on them.
        let mut control = 0;
        for feed in feeds.iter_mut() {
            while let Some(reply) = feed.take_reply() {
                control += 1;
                // Sized for many requests per connection; a full ring means the control thread
                // is wedged, and its ack timeout will recycle the connection.
                let _ = self.replies.try_push(reply);
            }
        }
        // Control work (snapshot replies, disconnects, requests) runs once the decoder has caught
        // up with the frame ring, and during a backlog at least every `CONTROL_MAX_DEFER_NS`.
        // Waiting for a round that finds the ring empty is not enough: a network stage that
        // blocks until data arrives hands this stage a frame in nearly every round while the
        // stream flows, and an empty ring then comes only with a pause in the stream, which an
        // evenly paced stream may not make for seconds, while every book waiting for its
        // snapshot buffers diffs (the demo's receive-to-strategy p99 reached seconds).
        self.receive_to_decoded.flush_if_requested();
        if caught_up || now_ns.saturating_sub(self.last_control_ns) >= CONTROL_MAX_DEFER_NS {
            self.last_control_ns = now_ns;
            while let Some(reply) = self.snapshot_replies.try_pop() {
                control += 1;
                if let Some(feed) = feeds.get_mut(reply.venue as usize) {
                    feed.on_snapshot(*reply, now_ns, &mut sink);
                }
            }
            while let Some(command) = self.commands.try_pop() {
                control += 1;
                match command {
                    DecoderCommand::Disconnected {
                        venue,
                        conn,
                        instruments,
                    } => {
                        if let Some(feed) = feeds.get_mut(venue as usize) {
                            feed.on_disconnect(conn, instruments, now_ns, &mut sink);
                        }
                    }
                    DecoderCommand::Status(event) => sink.push(event),
                }
            }
            let requests = &mut self.snapshot_requests;
            let malformed = &mut self.malformed;
            for feed in feeds.iter_mut() {
                feed.snapshot_requests(now_ns, &mut |request| {
                    // The request ring holds far more than the instruments a venue has; a
                    // full one means the control thread is wedged and the watchdog says so.
                    let _ = requests.try_push(request);
                });
                if let Some(sample) = feed.take_malformed() {
                    let _ = malformed.try_push(sample);
                }
            }
        }
        sink.publish();
        drained > 0 || control > 0
    }
}

/// The strategy stage: drains events, records how long they took from the wire, keeps the quote
/// board.
struct StrategyStage {
    events: ring::Consumer<Event>,
    clock: Clock,
    received: CounterWriter,
    gaps: CounterWriter,
    wire_to_strategy: LatencyRecorder,
    board: Arc<QuoteBoard>,
    stamps: Option<(StampMatcher, LatencyRecorder, CounterWriter)>,
    user: Option<Box<dyn Strategy>>,
    market: Market,
    decoded_to_strategy: LatencyRecorder,
    publish_marks: ring::Consumer<PublishMark>,
    /// The publication the next events belong to, and how many events were taken so far.
    mark: PublishMark,
    taken: u64,
    /// The events of the current batch, for the user's strategy (capacity `EVENT_BATCH`).
    batch: Vec<Event>,
    next_timer_ns: u64,
}

impl StagePoll for StrategyStage {
    fn poll(&mut self) -> bool {
        // Several batches per round while they are full, so that a backlog drains at the rate
        // a decoder on the same thread can produce it: up to the ring's capacity, which is what
        // one decoder round may publish (a byte stream's chunks make a thousand events each;
        // `BATCHES_PER_POLL` batches a round let a fused decoder, then the network stage's frame
        // ring, fall behind a Databento stream).
        let mut drained = 0;
        let rounds = (self.events.capacity() / EVENT_BATCH).max(BATCHES_PER_POLL);
        for _ in 0..rounds {
            let batch = self.poll_batch();
            drained += batch;
            if batch < EVENT_BATCH {
                break;
            }
        }
        drained > 0
    }

    fn finish(&mut self) {
        self.wire_to_strategy.flush();
        self.decoded_to_strategy.flush();
        if let Some((_, send_latency, _)) = self.stamps.as_mut() {
            send_latency.flush();
        }
        if let Some(user) = self.user.as_mut() {
            user.finish(&self.market);
        }
    }
}

impl StrategyStage {
    /// One batch of events: bookkeeping, the market, the user's strategy; returns how many.
    fn poll_batch(&mut self) -> usize {
        let clock = self.clock;
        let received = &mut self.received;
        let gaps = &mut self.gaps;
        let latency = &mut self.wire_to_strategy;
        let board = &self.board;
        let stamps = &mut self.stamps;
        let market = &mut self.market;
        let batch = &mut self.batch;
        let keep = self.user.is_some();
        let decoded_latency = &mut self.decoded_to_strategy;
        let marks = &mut self.publish_marks;
        let mark = &mut self.mark;
        let taken = &mut self.taken;
        let mut last_ns = 0;
        let drained = self.events.drain(EVENT_BATCH, |event| {
            let now_ns = clock.now_ns();
            last_ns = now_ns;
            received.increment();
            // The event's publication: the first mark that covers its position.
            *taken += 1;
            while mark.events < *taken {
                match marks.try_pop() {
                    Some(next) => *mark = next,
                    None => break,
                }
            }
            if mark.events >= *taken {
                decoded_latency.record(now_ns.saturating_sub(mark.at_ns));
            }
            // A snapshot's levels came over REST, not the wire: their receive time is the
            // snapshot's, so they would measure the sync, not the pipeline.
            if event.header.flags & flags::SNAPSHOT == 0 {
                latency.record(now_ns.saturating_sub(event.header.recv_ts_ns));
            }
            match event.body() {
                Body::Quote(quote) => {
                    board.publish(event.header.instrument_id, &quote);
                    // Only quotes the venue sent as such carry a simulator stamp.
                    if event.header.flags & flags::DERIVED == 0 {
                        if let Some((matcher, send_latency, unstamped)) = stamps.as_mut() {
                            match matcher.send_ns(event.header.venue_seq) {
                                Some(send_ns) => {
                                    send_latency.record(now_ns.saturating_sub(send_ns))
                                }
                                None => unstamped.increment(),
                            }
                        }
                    }
                }
                Body::Gap(_) => gaps.increment(),
                _ => {}
            }
            market.apply(&event);
            if keep {
                batch.push(event);
            }
        });
        if let Some(user) = self.user.as_mut() {
            if !self.batch.is_empty() {
                user.on_events(&self.batch, &self.market, last_ns);
                self.batch.clear();
            }
            if let Some(interval) = user.timer_interval_ns() {
                // The batch's last clock read, or one now for an idle round.
                let now_ns = if drained > 0 {
                    last_ns
                } else {
                    self.clock.now_ns()
                };
                if now_ns >= self.next_timer_ns {
                    if self.next_timer_ns > 0 {
                        user.on_timer(&self.market, now_ns);
                    }
                    self.next_timer_ns = now_ns + interval;
                }
            }
        }
        self.wire_to_strategy.flush_if_requested();
        self.decoded_to_strategy.flush_if_requested();
        if let Some((_, send_latency, _)) = self.stamps.as_mut() {
            send_latency.flush_if_requested();
        }
        drained
    }
}

/// What a caller adds to the config to start an appliance.
#[derive(Default)]
pub struct RuntimeOptions {
    /// By venue id (the venue's index in the config): the feed that decodes it.
    pub feeds: Vec<Box<dyn Feed>>,
    /// By connection slot: the venue id whose feed decodes the slot's frames (`VenueId::MAX`
    /// for none).
    pub conn_venues: Vec<VenueId>,
    /// Instrument ids the quote board holds (ids at or above are not shown).
    pub board_instruments: usize,
    /// The simulator's send stamps, for send-to-strategy latency (the demo and benchmarks).
    pub stamps: Option<ring::Consumer<Stamp>>,
    /// User code called for every event on the strategy thread.
    pub strategy: Option<Box<dyn Strategy>>,
}

/// What the control thread can read about a running appliance.
pub struct Runtime {
    stop: Arc<AtomicBool>,
    threads: Vec<HotThread<()>>,
    /// Per thread: its name and a counter of poll-loop rounds (the watchdog's heartbeat).
    pub heartbeats: Vec<(String, CounterReader)>,
    pub frames_undecoded: CounterReader,
    pub events_received: CounterReader,
    /// Gap events the strategy received.
    pub gaps: CounterReader,
    pub wire_to_strategy: LatencyCollector,
    /// Receive to decoded (the decoder stage's batch done), per message.
    pub receive_to_decoded: LatencyCollector,
    /// Decoded (the decoder published the event) to the strategy taking it, per event.
    pub decoded_to_strategy: LatencyCollector,
    /// Per venue: messages and bytes its feed was handed.
    pub venue_traffic: Vec<(CounterReader, CounterReader)>,
    /// Simulator send to strategy, per quote, when stamps were wired in.
    pub send_to_strategy: Option<LatencyCollector>,
    /// Quotes that found no send stamp.
    pub unstamped: Option<CounterReader>,
    /// The latest quote per instrument.
    pub board: Arc<QuoteBoard>,
    /// Refusals of the net-to-decoder frame ring (the decoder fell behind).
    pub frame_ring: RingStats,
    /// Refusals of the decoder-to-strategy event ring (the strategy fell behind).
    pub event_ring: RingStats,
    /// The network backend in use and why, for the log.
    pub net_backend: String,
    /// Per slot: the network thread's last-read times (`Runtime::last_read_ns`).
    last_read: Arc<[AtomicU64]>,
    commands: ring::Producer<NetCommand>,
    statuses: ring::Consumer<NetStatus>,
    net_wakeup: Option<Wakeup>,
    decoder_wakeup: Option<Wakeup>,
    snapshot_requests: ring::Consumer<SnapshotRequest>,
    snapshot_replies: ring::Producer<Box<SnapshotReply>>,
    malformed: ring::Consumer<MalformedSample>,
    decoder_commands: ring::Producer<DecoderCommand>,
    replies: ring::Consumer<VenueReply>,
    /// Per hot thread: whether its last poll round found no work (for draining at shutdown).
    idle: Vec<Arc<AtomicBool>>,
}

impl Runtime {
    /// Wires the rings and starts the hot threads the config plans, last stage first so each
    /// producer knows how to wake its consumer.
    pub fn start(
        config: &LoadedConfig,
        clock: Clock,
        options: RuntimeOptions,
    ) -> Result<Runtime, RuntimeError> {
        let appliance = &config.appliance;
        let (frame_tx, frame_rx) = ring::frame_ring(appliance.rings.frame_ring_bytes);
        let (event_tx, event_rx) = ring::ring::<Event>(appliance.rings.event_ring_slots);
        let (undecoded_writer, frames_undecoded) = metrics::counter();
        let (received_writer, events_received) = metrics::counter();
        let (gaps_writer, gaps) = metrics::counter();
        let (request_tx, snapshot_requests) = ring::ring::<SnapshotRequest>(1024);
        let (snapshot_replies, reply_rx) = ring::ring::<Box<SnapshotReply>>(1024);
        let (malformed_tx, malformed) = ring::ring::<MalformedSample>(64);
        let (decoder_commands, decoder_command_rx) = ring::ring::<DecoderCommand>(4096);
        let (reply_tx, replies) = ring::ring::<VenueReply>(1024);
        let board = Arc::new(QuoteBoard::new(options.board_instruments));
        let (stamps, send_to_strategy, unstamped) = match options.stamps {
            Some(consumer) => {
                let (recorder, collector) =
                    metrics::latency("send_to_strategy", HIGHEST_LATENCY_NS, 3)?;
                let (unstamped_writer, unstamped) = metrics::counter();
                (
                    Some((StampMatcher::new(consumer), recorder, unstamped_writer)),
                    Some(collector),
                    Some(unstamped),
                )
            }
            None => (None, None, None),
        };
        let (wire_recorder, wire_to_strategy) =
            metrics::latency("wire_to_strategy", HIGHEST_LATENCY_NS, 3)?;
        let (decoded_recorder, receive_to_decoded) =
            metrics::latency("receive_to_decoded", HIGHEST_LATENCY_NS, 3)?;
        let (to_strategy_recorder, decoded_to_strategy) =
            metrics::latency("decoded_to_strategy", HIGHEST_LATENCY_NS, 3)?;
        // A mark per publication; the event ring holds at most this many publications of one
        // event each, so the mark ring never fills before the event ring does.
        let (mark_tx, mark_rx) =
            ring::ring::<PublishMark>(appliance.rings.event_ring_slots.next_power_of_two());
        let (traffic, venue_traffic): (Vec<_>, Vec<_>) = options
            .feeds
            .iter()
            .map(|_| {
                let (messages, messages_r) = metrics::counter();
                let (bytes, bytes_r) = metrics::counter();
                ((messages, bytes), (messages_r, bytes_r))
            })
            .unzip();
        let frame_ring = frame_rx.stats();
        let event_ring = event_rx.stats();
        let net_config = &appliance.net;
        let (commands, command_rx) = ring::ring::<NetCommand>(256);
        let (status_tx, statuses) = ring::ring::<NetStatus>(1024);
        let backend_line = Arc::new(std::sync::Mutex::new(String::new()));
        let last_read: Arc<[AtomicU64]> = (0..net_config.max_connections)
            .map(|_| AtomicU64::new(0))
            .collect();
        let mut net = Some(NetStage {
            setup: Some(NetSetup {
                backend: match net_config.backend {
                    NetBackend::Auto => BackendChoice::Auto,
                    NetBackend::IoUring => BackendChoice::IoUring,
                    NetBackend::Epoll => BackendChoice::Epoll,
                },
                wait: match net_config.wait {
                    NetWait::BusyPoll => WaitMode::BusyPoll,
                    NetWait::Block => WaitMode::Block {
                        timeout: Duration::from_micros(net_config.block_timeout_us),
                    },
                },
                transport: TransportConfig {
                    max_connections: net_config.max_connections,
                    recv_buffer_bytes: net_config.recv_buffer_bytes,
                    recv_buffers: net_config.recv_buffers,
                    connect_timeout: Duration::from_millis(net_config.connect_timeout_ms),
                    socket: SocketOptions {
                        rcvbuf_bytes: net_config.rcvbuf_bytes,
                        busy_poll_us: net_config.busy_poll_us,
                    },
                },
                clock,
                frames: frame_tx,
                last_read: last_read.clone(),
            }),
            engine: None,
            commands: command_rx,
            statuses: status_tx,
            backend: backend_line.clone(),
            generations: vec![0; net_config.max_connections as usize],
        });
        let mut decoder = Some(DecoderStage {
            frames: frame_rx,
            events: event_tx,
            feeds: options.feeds,
            conn_venues: options.conn_venues,
            replies: reply_tx,
            events_lost: false,
            undecoded: undecoded_writer,
            strategy_wakeup: None,
            clock,
            snapshot_requests: request_tx,
            snapshot_replies: reply_rx,
            malformed: malformed_tx,
            commands: decoder_command_rx,
            last_control_ns: 0,
            traffic,
            receive_to_decoded: decoded_recorder,
            batch_recv_ns: [0; EVENT_BATCH],
            events_per_frame: 1,
            publish_marks: mark_tx,
            published: 0,
        });
        let mut strategy = Some(StrategyStage {
            events: event_rx,
            clock,
            received: received_writer,
            gaps: gaps_writer,
            wire_to_strategy: wire_recorder,
            board: board.clone(),
            stamps,
            user: options.strategy,
            market: Market::new(options.board_instruments),
            decoded_to_strategy: to_strategy_recorder,
            publish_marks: mark_rx,
            mark: PublishMark {
                events: 0,
                at_ns: 0,
            },
            taken: 0,
            batch: Vec::with_capacity(EVENT_BATCH),
            next_timer_ns: 0,
        });

        let plans = thread::plan(&appliance.threads, appliance.process.on_privilege_error);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut heartbeats = Vec::new();
        let mut net_wakeup = None;
        let mut decoder_wakeup = None;
        let mut idle = Vec::new();
        // Start the plan's threads from the last stage backwards.
        for plan in plans.iter().rev() {
            let mut stages: Vec<Box<dyn StagePoll>> = Vec::new();
            for stage in &plan.stages {
                match stage {
                    Stage::Net => {
                        if let Some(net) = net.take() {
                            stages.push(Box::new(net));
                        }
                    }
                    Stage::Decoder => {
                        if let Some(decoder) = decoder.take() {
                            stages.push(Box::new(decoder));
                        }
                    }
                    Stage::Strategy => {
                        if let Some(strategy) = strategy.take() {
                            stages.push(Box::new(strategy));
                        }
                    }
                }
            }
            let (mut heartbeat, heartbeat_reader) = metrics::counter();
            heartbeats.push((plan.spec.name.clone(), heartbeat_reader));
            let thread_stop = stop.clone();
            let thread_idle = Arc::new(AtomicBool::new(false));
            idle.push(thread_idle.clone());
            let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
            let hot = thread::spawn(&plan.spec, move |waiter| {
                for stage in stages.iter_mut() {
                    if let Err(error) = stage.start() {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                }
                let _ = ready_tx.send(Ok(()));
                while !thread_stop.load(Ordering::Relaxed) {
                    let mut worked = false;
                    for stage in stages.iter_mut() {
                        worked |= stage.poll();
                    }
                    heartbeat.increment();
                    thread_idle.store(!worked, Ordering::Relaxed);
                    if worked {
                        waiter.reset();
                    } else {
                        waiter.idle(|| thread_stop.load(Ordering::Relaxed));
                    }
                }
                for stage in stages.iter_mut() {
                    stage.finish();
                }
            });
            let hot = match hot {
                Ok(hot) => hot,
                Err(error) => {
                    stop_all(&stop, threads);
                    return Err(error.into());
                }
            };
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    let _ = hot.join();
                    stop_all(&stop, threads);
                    return Err(RuntimeError::Stage {
                        thread: plan.spec.name.clone(),
                        error,
                    });
                }
                Err(_) => {
                    stop_all(&stop, threads);
                    return Err(RuntimeError::Stage {
                        thread: plan.spec.name.clone(),
                        error: "the thread ended during start-up".to_owned(),
                    });
                }
            }
            if plan.stages.first() == Some(&Stage::Net) {
                net_wakeup = Some(hot.wakeup.clone());
            }
            if plan.stages.contains(&Stage::Decoder) {
                decoder_wakeup = Some(hot.wakeup.clone());
            }
            tracing::info!(
                thread = %hot.name,
                stages = ?plan.stages,
                core = ?hot.pinned_core,
                realtime = hot.realtime,
                wait = ?plan.spec.wait,
                "hot thread started"
            );
            // The stage feeding this thread's first stage wakes it.
            if plan.stages.first() == Some(&Stage::Strategy) {
                if let Some(decoder) = decoder.as_mut() {
                    decoder.strategy_wakeup = Some(hot.wakeup.clone());
                }
            }
            threads.push(hot);
        }
        heartbeats.reverse();
        let net_backend = backend_line
            .lock()
            .map(|line| line.clone())
            .unwrap_or_default();
        Ok(Runtime {
            stop,
            threads,
            heartbeats,
            frames_undecoded,
            events_received,
            gaps,
            wire_to_strategy,
            receive_to_decoded,
            decoded_to_strategy,
            venue_traffic,
            send_to_strategy,
            unstamped,
            board,
            frame_ring,
            event_ring,
            net_backend,
            last_read,
            commands,
            statuses,
            net_wakeup,
            decoder_wakeup,
            snapshot_requests,
            snapshot_replies,
            malformed,
            decoder_commands,
            replies,
            idle,
        })
    }

    /// Snapshot requests the feeds made since the last call.
    pub fn take_snapshot_requests(&mut self) -> Vec<SnapshotRequest> {
        let mut out = Vec::new();
        while let Some(request) = self.snapshot_requests.try_pop() {
            out.push(request);
        }
        out
    }

    /// Hands a snapshot (or its failure) to the decoder thread.
    pub fn deliver_snapshot(&mut self, reply: SnapshotReply) -> Result<(), RuntimeError> {
        self.snapshot_replies
            .try_push(Box::new(reply))
            .map_err(|_| RuntimeError::CommandRingFull)?;
        self.wake_decoder();
        Ok(())
    }

    /// Tells the decoder thread that the connection carrying `instruments` of `venue` dropped,
    /// so its feed emits gaps.
    pub fn notify_disconnect(
        &mut self,
        venue: VenueId,
        conn: ConnId,
        instruments: Range<InstrumentId>,
    ) -> Result<(), RuntimeError> {
        self.decoder_command(DecoderCommand::Disconnected {
            venue,
            conn,
            instruments,
        })
    }

    /// Hands a status event to the decoder thread, which writes it in order with the market
    /// events.
    pub fn send_status(&mut self, event: Event) -> Result<(), RuntimeError> {
        self.decoder_command(DecoderCommand::Status(event))
    }

    fn decoder_command(&mut self, command: DecoderCommand) -> Result<(), RuntimeError> {
        self.decoder_commands
            .try_push(command)
            .map_err(|_| RuntimeError::CommandRingFull)?;
        self.wake_decoder();
        Ok(())
    }

    /// Replies to the control thread's requests that the feeds relayed.
    pub fn take_replies(&mut self) -> Vec<VenueReply> {
        let mut out = Vec::new();
        while let Some(reply) = self.replies.try_pop() {
            out.push(reply);
        }
        out
    }

    /// Malformed messages the feeds kept for logging (at most one per feed per second).
    pub fn take_malformed(&mut self) -> Vec<MalformedSample> {
        let mut out = Vec::new();
        while let Some(sample) = self.malformed.try_pop() {
            out.push(sample);
        }
        out
    }

    fn wake_decoder(&self) {
        if let Some(wakeup) = &self.decoder_wakeup {
            wakeup.wake();
        }
    }

    /// Hands a prepared stream to the network thread (prepare it with `venue::subscribe_spec`
    /// on this, the control thread). `conn` must be below `net.max_connections`.
    pub fn open_stream(
        &mut self,
        conn: ConnId,
        generation: u32,
        spec: StreamSpec,
    ) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Open {
            conn,
            generation,
            spec: Box::new(spec),
        })
    }

    /// Starts the WebSocket closing handshake on `conn`.
    pub fn close_stream(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Close { conn })
    }

    /// Drops `conn`'s socket at once.
    pub fn abort_stream(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Abort { conn })
    }

    /// Sends a text message on `conn`.
    pub fn send_text(&mut self, conn: ConnId, text: String) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Send { conn, text })
    }

    /// Sends a WebSocket ping on `conn` (RFC 6455 section 5.5.2, its payload the send time),
    /// for a venue whose heartbeat is the client's ping. A slot without an open WebSocket stream
    /// ignores it, so a ping racing a close fails nothing. The server's pong is never delivered
    /// as a message; it shows only as a read in [`Runtime::last_read_ns`].
    pub fn ping(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Ping { conn })
    }

    /// When `conn` last read anything (data, pongs, TLS records): the receive timestamp of the
    /// network thread's latest completion on the slot, in ns since the epoch on the clock of
    /// frames' receive times; the time its stream was opened until it reads anything; 0 for a
    /// slot never opened or out of range. A lock-free load of a word the network thread stores.
    /// Meaningful once the slot's `Open` status arrived: before the network thread takes an
    /// `Open` command, the slot still shows its previous stream.
    pub fn last_read_ns(&self, conn: ConnId) -> u64 {
        self.last_read
            .get(conn as usize)
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    fn net_command(&mut self, command: NetCommand) -> Result<(), RuntimeError> {
        self.commands
            .try_push(command)
            .map_err(|_| RuntimeError::CommandRingFull)?;
        if let Some(wakeup) = &self.net_wakeup {
            wakeup.wake();
        }
        Ok(())
    }

    /// Waits until every hot thread has found no work twice in a row (the rings are drained),
    /// or `timeout` passes; returns whether they went idle.
    pub fn drain(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut quiet_rounds = 0;
        while std::time::Instant::now() < deadline {
            for thread in &self.threads {
                thread.wakeup.wake();
            }
            std::thread::sleep(Duration::from_millis(2));
            if self.idle.iter().all(|idle| idle.load(Ordering::Relaxed)) {
                quiet_rounds += 1;
                if quiet_rounds == 2 {
                    return true;
                }
            } else {
                quiet_rounds = 0;
            }
        }
        false
    }

    /// Stream state changes the network thread reported since the last call.
    pub fn take_statuses(&mut self) -> Vec<NetStatus> {
        let mut out = Vec::new();
        while let Some(status) = self.statuses.try_pop() {
            out.push(status);
        }
        out
    }

    /// Whether every hot thread is still running.
    pub fn all_running(&self) -> bool {
        self.threads.iter().all(|thread| !thread.is_finished())
    }

    /// Asks every hot thread to stop and waits for them. Returns the names of threads that
    /// panicked.
    pub fn shutdown(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut panicked = Vec::new();
        for thread in self.threads {
            thread.wakeup.wake();
            let name = thread.name.clone();
            if thread.join().is_err() {
                panicked.push(name);
            }
        }
        panicked
    }
}

fn stop_all(stop: &AtomicBool, threads: Vec<HotThread<()>>) {
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.wakeup.wake();
        let _ = thread.join();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error(transparent)]
    Histogram(#[from] metrics::HistogramError),
    #[error("thread `{thread}` could not start its stages: {error}")]
    Stage { thread: String, error: String },
    #[error("a ring from the control thread to a hot thread is full")]
    CommandRingFull,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::engine::FrameKind;
    use crate::venue::feed::DepthSnapshot;
    use std::sync::atomic::AtomicUsize;

    /// A feed with one book that wants one snapshot; it counts the snapshots it is handed.
    struct OneBook {
        wants_snapshot: bool,
        snapshots: Arc<AtomicUsize>,
    }

    impl Feed for OneBook {
        fn on_message(
            &mut self,
            _conn: ConnId,
            _recv_ts_ns: u64,
            _payload: &[u8],
            _sink: &mut EventSink<'_>,
        ) {
        }

        fn on_snapshot(&mut self, _reply: SnapshotReply, _now_ns: u64, _sink: &mut EventSink<'_>) {
            self.snapshots.fetch_add(1, Ordering::Relaxed);
        }

        fn snapshot_requests(&mut self, _now_ns: u64, request: &mut dyn FnMut(SnapshotRequest)) {
            if std::mem::take(&mut self.wants_snapshot) {
                request(SnapshotRequest {
                    venue: 0,
                    instrument: 0,
                });
            }
        }

        fn on_disconnect(
            &mut self,
            _conn: ConnId,
            _instruments: Range<InstrumentId>,
            _now_ns: u64,
            _sink: &mut EventSink<'_>,
        ) {
        }

        fn take_malformed(&mut self) -> Option<MalformedSample> {
            None
        }

        fn take_reply(&mut self) -> Option<VenueReply> {
            None
        }
    }

    /// The decoder stage with one `OneBook` feed on connection 0, and the other ends of its
    /// rings: the frame producer, the request consumer and the reply producer.
    struct Bench {
        stage: DecoderStage,
        frames: FrameProducer,
        requests: ring::Consumer<SnapshotRequest>,
        replies: ring::Producer<Box<SnapshotReply>>,
        snapshots: Arc<AtomicUsize>,
        _events: ring::Consumer<Event>,
        _malformed: ring::Consumer<MalformedSample>,
        _commands: ring::Producer<DecoderCommand>,
        _replies: ring::Consumer<VenueReply>,
    }

    impl Bench {
        fn new() -> Bench {
            let (frames, frame_rx) = ring::frame_ring(1 << 20);
            let (event_tx, events) = ring::ring::<Event>(1 << 16);
            let (request_tx, requests) = ring::ring::<SnapshotRequest>(16);
            let (replies, reply_rx) = ring::ring::<Box<SnapshotReply>>(16);
            let (malformed_tx, malformed) = ring::ring::<MalformedSample>(16);
            let (commands, command_rx) = ring::ring::<DecoderCommand>(16);
            let (reply_tx, venue_replies) = ring::ring::<VenueReply>(16);
            let snapshots = Arc::new(AtomicUsize::new(0));
            let feed = OneBook {
                wants_snapshot: true,
                snapshots: snapshots.clone(),
            };
            let stage = DecoderStage {
                frames: frame_rx,
                events: event_tx,
                feeds: vec![Box::new(feed)],
                conn_venues: vec![0],
                replies: reply_tx,
                events_lost: false,
                undecoded: metrics::counter().0,
                strategy_wakeup: None,
                clock: Clock::monotonic(),
                snapshot_requests: request_tx,
                snapshot_replies: reply_rx,
                malformed: malformed_tx,
                commands: command_rx,
                last_control_ns: 0,
                traffic: Vec::new(),
                receive_to_decoded: metrics::latency("t", 1_000_000, 2).unwrap().0,
                batch_recv_ns: [0; EVENT_BATCH],
                events_per_frame: 1,
                publish_marks: ring::ring::<PublishMark>(16).0,
                published: 0,
            };
            Bench {
                stage,
                frames,
                requests,
                replies,
                snapshots,
                _events: events,
                _malformed: malformed,
                _commands: commands,
                _replies: venue_replies,
            }
        }

        /// Writes `count` frames for connection 0, as the network stage does.
        fn receive(&mut self, count: usize) {
            let mut frame = [0u8; 10];
            frame[8..].copy_from_slice(b"{}");
            // Connection 0: its id bits are zero.
            let tag = (FrameKind::Text as u32) << 24;
            for _ in 0..count {
                self.frames
                    .try_push(tag, &frame)
                    .expect("the frame ring has room");
            }
        }

        fn reply(&mut self) {
            let reply = SnapshotReply {
                venue: 0,
                instrument: 0,
                result: Ok(DepthSnapshot::default()),
                recv_ts_ns: 0,
            };
            assert!(self.replies.try_push(Box::new(reply)).is_ok());
        }
    }

    /// A network stage that blocks until data arrives hands the decoder a frame in every round
    /// while the stream flows: the snapshot request and reply must still pass at once, not wait
    /// for a round without frames (which an evenly paced stream may not give for seconds).
    #[test]
    fn snapshot_requests_and_replies_pass_while_every_round_has_a_frame() {
        let mut bench = Bench::new();
        bench.receive(1);
        assert!(bench.stage.poll());
        assert!(
            bench.requests.try_pop().is_some(),
            "the request went out in the first round"
        );
        bench.reply();
        bench.receive(1);
        bench.stage.poll();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            1,
            "the reply reached the feed in the next round"
        );
    }

    /// During a backlog (every round drains a whole batch) the control work waits at most
    /// `CONTROL_MAX_DEFER_NS`.
    #[test]
    fn a_backlog_defers_control_work_for_a_bounded_time() {
        let mut bench = Bench::new();
        bench.receive(1);
        bench.stage.poll();
        assert!(bench.requests.try_pop().is_some());
        bench.reply();
        bench.receive((BATCHES_PER_POLL + 4) * EVENT_BATCH);
        bench.stage.last_control_ns = bench.stage.clock.now_ns();
        bench.stage.poll();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            0,
            "a full batch right after control work defers the next"
        );
        std::thread::sleep(Duration::from_nanos(2 * CONTROL_MAX_DEFER_NS));
        bench.stage.poll();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            1,
            "the reply passed once the deferral ran out, in the middle of the backlog"
        );
    }
}
