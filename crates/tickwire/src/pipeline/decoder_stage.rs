//! The decoder stage: frames from the network stage into venue events for the strategy stage.
//!
//! It hands each frame to its connection's venue [`Feed`] (frames of a connection without one
//! are counted as undecoded) and publishes the events once per batch, as soon as the batch is
//! decoded. Before each publication it pushes a [`PublishMark`] (events published so far, and
//! when) into the ring beside the event ring, from which the strategy stage finds each event's
//! publication for decoded-to-strategy latency.
//!
//! Its control work runs apart from the decoding, in `housekeep`, which the thread calls after
//! every stage of the thread has polled (on a fused thread, after the strategy took the round's
//! events): it relays the feeds' replies to subscription requests after every round that decoded,
//! and, in a round that caught up with the frame ring (and at least every
//! [`CONTROL_MAX_DEFER_NS`] during a backlog), the feeds' snapshot requests and the replies back,
//! the control thread's [`DecoderCommand`]s, the books bus readers asked for as far as their
//! budget goes ([`super::book_requests`]), the feeds' timers, and one malformed-message sample
//! per feed per second. An idle decoder runs it when a command or a reply waits, and otherwise
//! every [`CONTROL_IDLE_NS`].
//!
//! The pipeline has one such stage per decoder (`[[threads.decoders]]`). Each holds the feeds
//! of its own venues and a [`Vacant`] feed in the place of every other venue, so that venue ids
//! index its feeds directly; the network stage routes only its venues' frames to it, and the
//! control thread only their commands and snapshots.
//!
//! **Invariant:** the decoder's control work never waits for the stream to pause: a network
//! stage that blocks until data arrives hands this stage a frame in nearly every round while the
//! stream flows.

use super::book_requests::{BookRequestConfig, BookRequestReaders, BookRequests};
use super::rings::{DecoderEnds, PublishMark};
use super::{StagePoll, BATCHES_PER_POLL, EVENT_BATCH, HIGHEST_LATENCY_NS};
use crate::clock::Clock;
use crate::event::{Event, InstrumentId, VenueId};
use crate::metrics::{self, CounterReader, CounterWriter, LatencyCollector, LatencyRecorder};
use crate::net::ConnId;
use crate::ring::{self, FrameConsumer};
use crate::thread::Wakeup;
use crate::venue::feed::{
    EventCounts, EventSink, Feed, MalformedSample, Publisher, SnapshotReply, SnapshotRequest,
    VenueEvents, VenueReply,
};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Free event slots the decoder wants before it decodes another batch in the same round (a
/// frame may become many events: a depth diff is one per level), or half the event ring if that
/// is less: a ring of 4,096 slots or fewer would otherwise never have the room, and the decoder
/// would take one frame a round.
const EVENT_ROOM_PER_BATCH: usize = 4096;
/// The longest the decoder defers its control work (snapshot requests and replies, disconnects)
/// while frames keep filling whole batches. Far below a REST round trip, so a book's sync is never
/// held back by it, and far above a batch's decoding time, so a backlog is not interrupted often.
const CONTROL_MAX_DEFER_NS: u64 = 1_000_000;
/// How often an idle decoder runs its control work when nothing asks for it sooner (no frame
/// decoded, no command or snapshot reply waiting): the feeds' timers (a datagram venue's line
/// waits, in milliseconds), snapshot retries and the readers' book budget. A spinning thread
/// polls every few hundred nanoseconds, and running all of it each time made up half of its
/// idle round, which a frame arriving meanwhile waits for.
const CONTROL_IDLE_NS: u64 = 20_000;
/// The longest a snapshot reply waits for room in the event ring (see `DecoderStage::poll`):
/// far longer than a strategy that keeps up takes to drain a full ring, and short beside the
/// REST round trip the book already waited. Past it the reply goes in anyway, and whatever does
/// not fit is lost and marked by a `RingOverflow` gap, as before the wait existed: a ring smaller
/// than one snapshot, or a strategy that has stopped, must not hold every book back for good.
const SNAPSHOT_HOLD_MAX_NS: u64 = 10_000_000;

/// Work the control thread hands the decoder thread.
#[derive(Debug)]
pub enum DecoderCommand {
    /// A status event for the strategy (a connection or a stream changed state), written in
    /// order with the market events.
    Status(Event),
    /// A reader of the event bus asked for books: the book of `instrument` (`ALL_INSTRUMENTS`:
    /// every book of the venue) joins the readers' queue, and the venue's feed writes it to the
    /// bus only, in order with its updates, once the readers' budget pays for it
    /// ([`super::book_requests`]).
    EmitBooks {
        venue: VenueId,
        instrument: InstrumentId,
    },
    /// An artificial stall, for tests and diagnostics: the decoder does nothing at all (no
    /// frame, no command) for `ns` from when it takes this command, as if its core were taken
    /// away; its frame ring fills meanwhile (and refuses, counted, once full).
    Hold { ns: u64 },
}

/// The decoder stage: drains frames into the venue feeds, writes events.
pub(super) struct DecoderStage {
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
    /// The strategy's thread, once it has started (shared by every decoder; a decoder on the
    /// strategy's own thread wakes itself, which costs one load).
    strategy_wakeup: Arc<OnceLock<Wakeup>>,
    clock: Clock,
    snapshot_requests: ring::Producer<SnapshotRequest>,
    snapshot_replies: ring::Consumer<Box<SnapshotReply>>,
    /// A snapshot reply taken from its ring that waits for room in the event ring, and since
    /// when.
    held_snapshot: Option<(Box<SnapshotReply>, u64)>,
    /// Slots in the event ring.
    events_capacity: usize,
    /// `EVENT_ROOM_PER_BATCH`, or half the event ring if that is less.
    event_room_per_batch: usize,
    malformed: ring::Producer<MalformedSample>,
    /// Disconnections (gaps due) and status events from the control thread.
    commands: ring::Consumer<DecoderCommand>,
    /// When the control work last ran (see `DecoderStage::housekeep`).
    last_control_ns: u64,
    /// Whether the last poll caught up with the frame ring: the next `housekeep` runs the
    /// control work then.
    caught_up: bool,
    /// Whether a poll decoded frames since the last `housekeep`: their feeds may have replies,
    /// snapshot requests or a malformed sample to hand on.
    decoded: bool,
    /// Per venue: messages and bytes handed to its feed.
    traffic: Vec<(CounterWriter, CounterWriter)>,
    /// Per venue and event kind: the events written, counted by the sink.
    event_counts: EventCounts,
    receive_to_decoded: LatencyRecorder,
    /// Receive times of the current batch's frames, for `receive_to_decoded`.
    batch_recv_ns: [u64; EVENT_BATCH],
    /// Per publication: events published so far and when, for decoded-to-strategy latency.
    publish_marks: ring::Producer<PublishMark>,
    published: u64,
    /// Events per frame in the last batch that decoded any (at least 1): how many frames the
    /// event ring has room for.
    events_per_frame: usize,
    /// The shared-memory event bus, written with the event ring (see `EventSink`).
    bus: Option<tickwire_bus::BusWriter>,
    /// The books bus readers asked for, waiting for their budget.
    book_requests: BookRequests,
    /// Wakes the control thread after a round that handed it replies or snapshot requests.
    control_wakeup: Option<crate::thread::ControlWakeup>,
    /// Events published, publications, and ns spent in rounds that found work.
    load: DecoderLoad,
    /// Until when a `DecoderCommand::Hold` stalls the stage (0: not held).
    held_until_ns: u64,
}

/// A decoder's own load counters, written by its thread alone.
struct DecoderLoad {
    events: CounterWriter,
    publications: CounterWriter,
    busy_ns: CounterWriter,
}

/// The control thread's view of one decoder's load.
#[derive(Clone)]
pub struct DecoderLoadReaders {
    /// Events the decoder published to the strategy (and the bus).
    pub events: CounterReader,
    /// Publications (batches) they went out in: events / publications is the mean batch size.
    pub publications: CounterReader,
    /// Nanoseconds the decoder spent in poll rounds that found work.
    pub busy_ns: CounterReader,
}

/// What the control thread keeps of the decoder stage.
pub(super) struct DecoderReaders {
    pub load: DecoderLoadReaders,
    pub frames_undecoded: CounterReader,
    /// Per venue: messages and bytes its feed was handed.
    pub venue_traffic: Vec<(CounterReader, CounterReader)>,
    /// Per venue: the events written for the strategy, by kind.
    pub venue_events: Vec<VenueEvents>,
    pub receive_to_decoded: LatencyCollector,
    /// The books bus readers asked for: queued, deferred, refused, served.
    pub book_requests: BookRequestReaders,
}

/// The decoder stage's side of the event bus: the writer, if the appliance has a bus, and the
/// budget for the books its readers ask for.
pub(super) struct DecoderBus<'c> {
    pub writer: Option<tickwire_bus::BusWriter>,
    pub book_requests: &'c BookRequestConfig,
}

impl DecoderStage {
    /// The stage with its venue feeds (by venue id), the venue of each connection slot, the bus
    /// and its rings. It wakes no one until [`DecoderStage::wake_strategy_with`] names the
    /// strategy's thread.
    pub(super) fn new(
        clock: Clock,
        feeds: Vec<Box<dyn Feed>>,
        conn_venues: Vec<VenueId>,
        bus: DecoderBus<'_>,
        rings: DecoderEnds,
        control_wakeup: Option<crate::thread::ControlWakeup>,
        latency_digits: u8,
    ) -> Result<(DecoderStage, DecoderReaders), metrics::HistogramError> {
        let (undecoded, frames_undecoded) = metrics::counter();
        let (book_requests, book_request_readers) = BookRequests::new(bus.book_requests);
        let (receive_to_decoded, receive_to_decoded_reader) =
            metrics::latency("receive_to_decoded", HIGHEST_LATENCY_NS, latency_digits)?;
        let (traffic, venue_traffic): (Vec<_>, Vec<_>) = feeds
            .iter()
            .map(|_| {
                let (messages, messages_reader) = metrics::counter();
                let (bytes, bytes_reader) = metrics::counter();
                ((messages, bytes), (messages_reader, bytes_reader))
            })
            .unzip();
        let (event_counts, venue_events) = EventCounts::new(feeds.len());
        let events_capacity = rings.events.capacity();
        let (events, events_reader) = metrics::counter();
        let (publications, publications_reader) = metrics::counter();
        let (busy_ns, busy_reader) = metrics::counter();
        let stage = DecoderStage {
            frames: rings.frames,
            events: rings.events,
            feeds,
            conn_venues,
            replies: rings.replies,
            events_lost: false,
            undecoded,
            strategy_wakeup: Arc::new(OnceLock::new()),
            clock,
            snapshot_requests: rings.snapshot_requests,
            snapshot_replies: rings.snapshot_replies,
            held_snapshot: None,
            events_capacity,
            event_room_per_batch: EVENT_ROOM_PER_BATCH.min(events_capacity / 2),
            malformed: rings.malformed,
            commands: rings.commands,
            last_control_ns: 0,
            caught_up: true,
            decoded: false,
            traffic,
            event_counts,
            receive_to_decoded,
            batch_recv_ns: [0; EVENT_BATCH],
            publish_marks: rings.publish_marks,
            published: 0,
            events_per_frame: 1,
            bus: bus.writer,
            book_requests,
            control_wakeup,
            load: DecoderLoad {
                events,
                publications,
                busy_ns,
            },
            held_until_ns: 0,
        };
        let readers = DecoderReaders {
            load: DecoderLoadReaders {
                events: events_reader,
                publications: publications_reader,
                busy_ns: busy_reader,
            },
            frames_undecoded,
            venue_traffic,
            venue_events,
            receive_to_decoded: receive_to_decoded_reader,
            book_requests: book_request_readers,
        };
        Ok((stage, readers))
    }

    /// Has each publication wake the strategy stage's thread, once `slot` holds it (set when
    /// that thread starts; every decoder shares the slot).
    pub(super) fn wake_strategy_with(&mut self, slot: Arc<OnceLock<Wakeup>>) {
        self.strategy_wakeup = slot;
    }
}

/// The feed of a venue another decoder decodes: it has nothing and does nothing. Its frames,
/// commands and snapshots never reach this decoder (they are routed to the venue's own), so
/// none of its methods is ever reached with work.
pub(super) struct Vacant;

impl Feed for Vacant {
    fn on_message(&mut self, _: ConnId, _: u64, _: &[u8], _: &mut EventSink<'_>) {}

    fn on_snapshot(&mut self, _: SnapshotReply, _: u64, _: &mut EventSink<'_>) {}

    fn snapshot_requests(&mut self, _: u64, _: &mut dyn FnMut(SnapshotRequest)) {}

    fn on_disconnect(&mut self, _: ConnId, _: Range<InstrumentId>, _: u64, _: &mut EventSink<'_>) {}

    fn take_malformed(&mut self) -> Option<MalformedSample> {
        None
    }

    fn take_reply(&mut self) -> Option<VenueReply> {
        None
    }

    fn book_events(&self, _: InstrumentId) -> usize {
        0
    }

    fn emit_books(&mut self, _: InstrumentId, _: u64, _: &mut EventSink<'_>) -> usize {
        0
    }
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

/// The decoder stage's side of a publication: marked (and counted) before, the strategy woken
/// after.
struct Publication<'p> {
    marks: &'p mut ring::Producer<PublishMark>,
    published: &'p mut u64,
    clock: Clock,
    wakeup: Option<&'p Wakeup>,
    load: &'p mut DecoderLoad,
}

/// Binds `$sink`, the stage's event sink (counting, with the bus, publishing through
/// `$publication` with its marks and wake-up). A macro: it borrows the stage's fields one by one,
/// and leaves the others to the caller.
macro_rules! stage_sink {
    ($stage:ident, $publication:ident, $sink:ident) => {
        let mut $publication = Publication {
            marks: &mut $stage.publish_marks,
            published: &mut $stage.published,
            clock: $stage.clock,
            wakeup: $stage.strategy_wakeup.get(),
            load: &mut $stage.load,
        };
        let mut $sink = EventSink::with_publisher(
            &mut $stage.events,
            &mut $stage.events_lost,
            &mut $publication,
        )
        .counting(&mut $stage.event_counts)
        .with_bus($stage.bus.as_mut());
    };
}

impl Publisher for Publication<'_> {
    #[inline]
    fn before(&mut self, count: usize) {
        if count > 0 {
            self.load.events.add(count as u64);
            self.load.publications.increment();
        }
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
        let started_ns = self.clock.now_ns();
        if self.held_until_ns != 0 {
            if started_ns < self.held_until_ns {
                return false;
            }
            self.held_until_ns = 0;
        }
        let undecoded = &mut self.undecoded;
        let feeds = &mut self.feeds;
        let conn_venues = &self.conn_venues;
        let clock = self.clock;
        let traffic = &mut self.traffic;
        let batch_recv_ns = &mut self.batch_recv_ns;
        let events_per_frame = &mut self.events_per_frame;
        let event_room_per_batch = self.event_room_per_batch;
        stage_sink!(self, publication, sink);
        let mut drained = 0;
        let mut caught_up = true;
        // Up to `BATCHES_PER_POLL` batches while the frame ring has full ones and the event ring
        // has room, each published at once: a network stage on the same thread can hand over
        // far more than one batch per round at high rates, and one batch a round would let the
        // frame ring overflow.
        for round in 0..BATCHES_PER_POLL {
            // No more frames than the event ring has room for at the rate the last batch made
            // events, `event_room_per_batch` kept spare: a WebSocket frame makes one event or a
            // few dozen, a raw byte stream's chunk (Databento's 64 KiB of DBN) a thousand, and 64
            // such chunks would overrun a ring that a strategy on the same thread cannot drain
            // before this round ends. The first batch of a round takes at least one frame, so
            // that a ring smaller than the spare room, or a frame that made more events than the
            // ring holds, never stops decoding for good.
            let room = sink.free_slots().saturating_sub(event_room_per_batch);
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
                let (conn, kind) = crate::net::engine::split_tag(tag);
                if kind == crate::net::engine::FrameKind::Disconnect {
                    // The connection went down, and this notice follows its last frame (the
                    // network thread wrote it behind them): its instruments' gaps are due now.
                    let notice = crate::net::engine::split_frame(frame).and_then(|(_, payload)| {
                        crate::net::engine::DisconnectNotice::from_bytes(payload)
                    });
                    match notice.and_then(|notice| {
                        feeds
                            .get_mut(usize::from(notice.venue))
                            .map(|feed| (feed, notice))
                    }) {
                        Some((feed, notice)) => {
                            feed.on_disconnect(conn, notice.instruments, clock.now_ns(), &mut sink)
                        }
                        None => undecoded.increment(),
                    }
                    return;
                }
                let venue = conn_venues
                    .get(conn as usize)
                    .copied()
                    .unwrap_or(VenueId::MAX);
                let feed = feeds.get_mut(venue as usize);
                match (feed, crate::net::engine::split_frame(frame)) {
                    (Some(feed), Some((recv_ts_ns, payload))) => {
                        if kind == crate::net::engine::FrameKind::Binary {
                            feed.on_binary(conn, recv_ts_ns, payload, &mut sink);
                        } else if let Some(line) = kind.datagram_line() {
                            if let Some((drops, datagram)) =
                                crate::net::engine::split_datagram(payload)
                            {
                                feed.on_datagram(
                                    conn, line, recv_ts_ns, drops, datagram, &mut sink,
                                );
                            }
                        } else {
                            feed.on_message(conn, recv_ts_ns, payload, &mut sink);
                        }
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
            let now_ns = self.clock.now_ns();
            // One clock read per batch: each frame's decode finished by now.
            for &recv_ts_ns in &batch_recv_ns[..decoded] {
                self.receive_to_decoded
                    .record(now_ns.saturating_sub(recv_ts_ns));
            }
            caught_up = batch < frames;
            // Each batch is published as soon as it is decoded, the last one too: the control
            // work (replies, snapshots, commands, the feeds' timers: `housekeep`) comes after
            // the strategy can see the batch, never between the decode and the strategy.
            sink.publish();
            if caught_up || sink.free_slots() < event_room_per_batch {
                break;
            }
        }
        // Whether the control work is due at the next `housekeep`: once the decoder has caught up
        // with the frame ring (see there).
        self.caught_up = caught_up;
        if drained > 0 {
            self.decoded = true;
            self.load
                .busy_ns
                .add(self.clock.now_ns().saturating_sub(started_ns));
        }
        drained > 0
    }

    /// The decoder's control work, after every stage of its thread has polled: on a fused
    /// thread the strategy has then taken this round's events already, so none of this stands
    /// between a frame's decode and its strategy.
    fn housekeep(&mut self) -> bool {
        if self.held_until_ns != 0 {
            return false;
        }
        let now_ns = self.clock.now_ns();
        let caught_up = self.caught_up;
        let decoded = std::mem::take(&mut self.decoded);
        // Control work (snapshot replies, disconnects, requests) runs once the decoder has caught
        // up with the frame ring, and during a backlog at least every `CONTROL_MAX_DEFER_NS`.
        // Waiting for a round that finds the ring empty is not enough: a network stage that
        // blocks until data arrives hands this stage a frame in nearly every round while the
        // stream flows, and an empty ring then comes only with a pause in the stream, which an
        // evenly paced stream may not make for seconds, while every book waiting for its
        // snapshot buffers diffs (the demo's receive-to-strategy p99 reached seconds). Caught up
        // and idle, it runs when something asks for it, and otherwise every `CONTROL_IDLE_NS`.
        let since_control_ns = now_ns.saturating_sub(self.last_control_ns);
        let control_due = if caught_up {
            decoded
                || since_control_ns >= CONTROL_IDLE_NS
                || self.held_snapshot.is_some()
                || !self.snapshot_replies.is_empty()
                || !self.commands.is_empty()
        } else {
            since_control_ns >= CONTROL_MAX_DEFER_NS
        };
        if !decoded && !control_due {
            return false;
        }
        let feeds = &mut self.feeds;
        stage_sink!(self, publication, sink);
        // Replies to the control thread's requests go out at once: a connection waits on them.
        let mut control = 0;
        // Whether this round handed the control thread something to act on.
        let mut for_control = false;
        for feed in feeds.iter_mut() {
            while let Some(reply) = feed.take_reply() {
                control += 1;
                for_control = true;
                // Sized for many requests per connection; a full ring means the control thread
                // is wedged, and its ack timeout will recycle the connection.
                let _ = self.replies.try_push(reply);
            }
        }
        self.receive_to_decoded.flush_if_requested();
        if control_due {
            self.last_control_ns = now_ns;
            // A snapshot makes one event per level at once, and a venue's books all ask for
            // theirs together at start and after a reconnect: ten 1,000-level Binance books make
            // 20,000 events in one go (issue 24). So a reply waits here, the later ones behind it
            // in order, until the event ring has room for all of its events (or is empty, for
            // one larger than the ring), and the ring need hold only the largest snapshot rather
            // than every book's together; for at most `SNAPSHOT_HOLD_MAX_NS`.
            loop {
                let (reply, held_since_ns) = match self.held_snapshot.take() {
                    Some(held) => held,
                    None => match self.snapshot_replies.try_pop() {
                        Some(reply) => (reply, now_ns),
                        None => break,
                    },
                };
                let events = feeds
                    .get(reply.venue as usize)
                    .map_or(0, |feed| feed.snapshot_events(&reply));
                if sink.free_slots() < events.min(self.events_capacity)
                    && now_ns.saturating_sub(held_since_ns) < SNAPSHOT_HOLD_MAX_NS
                {
                    self.held_snapshot = Some((reply, held_since_ns));
                    break;
                }
                control += 1;
                if let Some(feed) = feeds.get_mut(reply.venue as usize) {
                    feed.on_snapshot(*reply, now_ns, &mut sink);
                }
            }
            while let Some(command) = self.commands.try_pop() {
                control += 1;
                match command {
                    DecoderCommand::Status(event) => sink.push(event),
                    DecoderCommand::EmitBooks { venue, instrument } => {
                        self.book_requests.request(venue, instrument, now_ns);
                    }
                    DecoderCommand::Hold { ns } => {
                        self.held_until_ns = now_ns.saturating_add(ns).max(1);
                    }
                }
            }
            // The readers' books, as far as their budget pays, after this round's requests.
            sink.bus_only(true);
            control += self.book_requests.serve(now_ns, feeds, &mut sink);
            sink.bus_only(false);
            let requests = &mut self.snapshot_requests;
            let malformed = &mut self.malformed;
            for feed in feeds.iter_mut() {
                feed.tick(now_ns, &mut sink);
                feed.snapshot_requests(now_ns, &mut |request| {
                    for_control = true;
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
        // Once per round, after the replies and requests are published: a connection waits on
        // its acknowledgements and a book on its snapshot, so the control thread acts now.
        if for_control {
            if let Some(wakeup) = &self.control_wakeup {
                wakeup.wake();
            }
        }
        if control > 0 {
            self.load
                .busy_ns
                .add(self.clock.now_ns().saturating_sub(now_ns));
        }
        control > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RingsConfig;
    use crate::net::engine::FrameKind;
    use crate::pipeline::net_stage::{NetCommand, NetStatus};
    use crate::pipeline::rings::{DecoderControlEnds, Rings, StrategyInput};
    use crate::ring::FrameProducer;
    use crate::venue::feed::DepthSnapshot;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    impl DecoderStage {
        /// One round of the stage's thread: the poll, then the control work.
        fn round(&mut self) -> bool {
            let decoded = self.poll();
            let controlled = self.housekeep();
            decoded || controlled
        }
    }

    /// A feed with one book that wants one snapshot; it counts the snapshots it is handed. With
    /// `levels_out`, it writes one `BookLevel` event per level of each snapshot, the snapshot's
    /// `recv_ts_ns` as the event's `venue_seq` and the level's index as its size, so that a
    /// reader can tell whether every snapshot arrived whole and in order.
    struct OneBook {
        wants_snapshot: bool,
        levels_out: bool,
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

        fn on_snapshot(&mut self, reply: SnapshotReply, now_ns: u64, sink: &mut EventSink<'_>) {
            self.snapshots.fetch_add(1, Ordering::Relaxed);
            let (true, Ok(snapshot)) = (self.levels_out, reply.result) else {
                return;
            };
            let mut header = crate::venue::feed::own_header(reply.venue, reply.instrument, now_ns);
            header.venue_seq = reply.recv_ts_ns;
            for (index, &(price, _)) in snapshot.bids.iter().enumerate() {
                let level = crate::event::BookLevel::new(
                    crate::event::Side::Bid,
                    price,
                    crate::fixed::Fixed(index as i64),
                );
                sink.push(Event::new(header, crate::event::Body::BookLevel(level)));
            }
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

        fn book_events(&self, _instrument: InstrumentId) -> usize {
            0
        }

        fn emit_books(
            &mut self,
            _instrument: InstrumentId,
            _now_ns: u64,
            _sink: &mut EventSink<'_>,
        ) -> usize {
            0
        }
    }

    /// The decoder stage with one `OneBook` feed on connection 0, and the other ends of its
    /// rings: the frame producer, the request consumer and the reply producer among them.
    struct Bench {
        stage: DecoderStage,
        frames: FrameProducer,
        control: DecoderControlEnds,
        snapshots: Arc<AtomicUsize>,
        _strategy: StrategyInput,
        _net: (ring::Consumer<NetCommand>, ring::Producer<NetStatus>),
    }

    impl Bench {
        fn new() -> Bench {
            Bench::with_event_slots(1 << 16)
        }

        fn with_event_slots(event_ring_slots: usize) -> Bench {
            let rings = Rings::one(&RingsConfig {
                frame_ring_bytes: 1 << 20,
                event_ring_slots,
            });
            let snapshots = Arc::new(AtomicUsize::new(0));
            let feed = OneBook {
                wants_snapshot: true,
                levels_out: false,
                snapshots: snapshots.clone(),
            };
            let (stage, _readers) = DecoderStage::new(
                Clock::monotonic(),
                vec![Box::new(feed)],
                vec![0],
                DecoderBus {
                    writer: None,
                    book_requests: &BookRequestConfig::default(),
                },
                rings.decoder,
                None,
                3,
            )
            .expect("the histogram's bounds are valid");
            Bench {
                stage,
                frames: rings.frames,
                control: rings.control,
                snapshots,
                _strategy: rings.strategy,
                _net: (rings.commands, rings.statuses),
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
            assert!(self
                .control
                .snapshot_replies
                .try_push(Box::new(reply))
                .is_ok());
        }
    }

    /// A decoder stage with a `OneBook` feed writing levels out and an event ring of `event_slots`: the stage,
    /// its snapshot reply producer, the strategy's ends and the count of snapshots handed over.
    fn levels_bench(
        event_slots: usize,
    ) -> (
        DecoderStage,
        DecoderControlEnds,
        StrategyInput,
        Arc<AtomicUsize>,
        FrameProducer,
    ) {
        let rings = Rings::one(&RingsConfig {
            frame_ring_bytes: 1 << 16,
            event_ring_slots: event_slots,
        });
        let snapshots = Arc::new(AtomicUsize::new(0));
        let feed = OneBook {
            wants_snapshot: false,
            levels_out: true,
            snapshots: snapshots.clone(),
        };
        let (stage, _readers) = DecoderStage::new(
            Clock::monotonic(),
            vec![Box::new(feed)],
            vec![0],
            DecoderBus {
                writer: None,
                book_requests: &BookRequestConfig::default(),
            },
            rings.decoder,
            None,
            3,
        )
        .expect("the histogram's bounds are valid");
        (
            stage,
            rings.control,
            rings.strategy,
            snapshots,
            rings.frames,
        )
    }

    /// A snapshot reply for a `OneBook` writing levels out: `levels` bids, `id` as its `recv_ts_ns`.
    fn levels_reply(id: u64, levels: usize) -> Box<SnapshotReply> {
        let one = crate::fixed::Fixed::from_units(1).expect("1 fits");
        Box::new(SnapshotReply {
            venue: 0,
            instrument: 0,
            result: Ok(DepthSnapshot {
                sequence: id,
                bids: vec![(one, one); levels],
                asks: Vec::new(),
            }),
            recv_ts_ns: id,
        })
    }

    /// Replies that make far more events together than the event ring holds (six snapshots of
    /// 400 levels, 1,024 slots) are held back until the strategy makes room: every snapshot
    /// reaches the strategy whole and in order, and nothing is lost (a lost event would show as
    /// a hole in a snapshot's levels, and the sink would write a `RingOverflow` gap).
    #[test]
    fn snapshots_wait_for_room_in_the_event_ring_and_arrive_whole_and_in_order() {
        const SNAPSHOTS: u64 = 6;
        const LEVELS: usize = 400;
        let (mut stage, mut control, mut strategy, snapshots, _frames) = levels_bench(1024);
        assert_eq!(strategy.events.capacity(), 1024);
        for id in 1..=SNAPSHOTS {
            assert!(control
                .snapshot_replies
                .try_push(levels_reply(id, LEVELS))
                .is_ok());
        }
        let mut received = Vec::new();
        let mut held_at_least_once = false;
        // Each round delivers what fits and the strategy then drains the ring, as its thread
        // would; twice the snapshots in rounds is more than enough.
        for _ in 0..2 * SNAPSHOTS {
            stage.round();
            held_at_least_once |= stage.held_snapshot.is_some();
            while let Some(event) = strategy.events.try_pop() {
                received.push(event);
            }
        }
        assert!(
            held_at_least_once,
            "the ring is too small for all of them at once"
        );
        assert_eq!(snapshots.load(Ordering::Relaxed), SNAPSHOTS as usize);
        let expected: Vec<(u64, i64)> = (1..=SNAPSHOTS)
            .flat_map(|id| (0..LEVELS as i64).map(move |index| (id, index)))
            .collect();
        let got: Vec<(u64, i64)> = received
            .iter()
            .map(|event| {
                let crate::event::Body::BookLevel(level) = event.body() else {
                    panic!("only levels were written, got {:?}", event.body());
                };
                (event.header.venue_seq, level.size.0)
            })
            .collect();
        assert_eq!(got, expected);
    }

    /// A snapshot larger than the whole event ring can never find room while anything sits in
    /// the ring: it waits at most `SNAPSHOT_HOLD_MAX_NS`, then goes in (what does not fit is
    /// lost and marked by a gap), and the replies behind it are not held back for good.
    #[test]
    fn a_snapshot_larger_than_the_event_ring_is_held_for_a_bounded_time() {
        let (mut stage, mut control, mut strategy, snapshots, _frames) = levels_bench(1024);
        for reply in [
            levels_reply(1, 1),
            levels_reply(2, 1500),
            levels_reply(3, 1),
        ] {
            assert!(control.snapshot_replies.try_push(reply).is_ok());
        }
        stage.round();
        assert_eq!(
            snapshots.load(Ordering::Relaxed),
            1,
            "the small one went in"
        );
        assert!(
            stage.held_snapshot.is_some(),
            "the large one waits while the ring holds the small one's event"
        );
        stage.round();
        assert_eq!(snapshots.load(Ordering::Relaxed), 1, "and still waits");
        std::thread::sleep(Duration::from_nanos(2 * SNAPSHOT_HOLD_MAX_NS));
        stage.round();
        assert_eq!(
            snapshots.load(Ordering::Relaxed),
            2,
            "the large one went in once the wait ran out"
        );
        // The last one waits for room: the large one filled the ring.
        while strategy.events.try_pop().is_some() {}
        stage.round();
        assert_eq!(
            snapshots.load(Ordering::Relaxed),
            3,
            "the one behind it followed"
        );
        let mut gaps = 0;
        while let Some(event) = strategy.events.try_pop() {
            if let crate::event::Body::Gap(gap) = event.body() {
                assert_eq!(gap.reason(), crate::event::GapReason::RingOverflow);
                gaps += 1;
            }
        }
        assert_eq!(gaps, 1, "the loss is marked by one gap");
    }

    /// An idle decoder skips its control work until something asks for it: a decoded frame, a
    /// snapshot reply or a command each runs it in the very next round, whatever the idle timer
    /// (`CONTROL_IDLE_NS`) says; with nothing of the kind, the feed is not even asked.
    #[test]
    fn an_idle_decoder_runs_its_control_work_only_when_something_asks_for_it() {
        // The idle timer put far off, so that only what asks can make the control work run.
        let far = |bench: &mut Bench| bench.stage.last_control_ns = u64::MAX / 2;
        let mut bench = Bench::new();
        far(&mut bench);
        assert!(!bench.stage.round(), "nothing to do");
        assert!(
            bench.control.snapshot_requests.try_pop().is_none(),
            "the feed was not asked for its requests: the control work did not run"
        );
        bench.receive(1);
        assert!(bench.stage.round());
        assert!(
            bench.control.snapshot_requests.try_pop().is_some(),
            "a decoded frame ran the control work"
        );
        far(&mut bench);
        bench.reply();
        bench.stage.round();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            1,
            "a waiting snapshot reply ran it"
        );
        far(&mut bench);
        assert!(bench
            .control
            .commands
            .try_push(DecoderCommand::Hold { ns: 1_000_000_000 })
            .is_ok());
        bench.stage.round();
        assert_ne!(bench.stage.held_until_ns, 0, "a waiting command ran it");
    }

    /// A network stage that blocks until data arrives hands the decoder a frame in every round
    /// while the stream flows: the snapshot request and reply must still pass at once, not wait
    /// for a round without frames (which an evenly paced stream may not give for seconds).
    #[test]
    fn snapshot_requests_and_replies_pass_while_every_round_has_a_frame() {
        let mut bench = Bench::new();
        bench.receive(1);
        assert!(bench.stage.round());
        assert!(
            bench.control.snapshot_requests.try_pop().is_some(),
            "the request went out in the first round"
        );
        bench.reply();
        bench.receive(1);
        bench.stage.round();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            1,
            "the reply reached the feed in the next round"
        );
    }

    /// An event ring smaller than `EVENT_ROOM_PER_BATCH` still lets the decoder take a whole
    /// batch of frames a round, not one frame at a time.
    #[test]
    fn a_small_event_ring_still_takes_whole_batches() {
        let mut bench = Bench::with_event_slots(1024);
        bench.receive(EVENT_BATCH);
        assert!(bench.stage.round());
        let left = bench.stage.frames.drain(EVENT_BATCH, |_, _| {});
        assert_eq!(left, 0, "one round took every frame");
    }

    /// During a backlog (every round drains a whole batch) the control work waits at most
    /// `CONTROL_MAX_DEFER_NS`.
    #[test]
    fn a_backlog_defers_control_work_for_a_bounded_time() {
        let mut bench = Bench::new();
        bench.receive(1);
        bench.stage.round();
        assert!(bench.control.snapshot_requests.try_pop().is_some());
        bench.reply();
        bench.receive((BATCHES_PER_POLL + 4) * EVENT_BATCH);
        bench.stage.last_control_ns = bench.stage.clock.now_ns();
        bench.stage.round();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            0,
            "a full batch right after control work defers the next"
        );
        std::thread::sleep(Duration::from_nanos(2 * CONTROL_MAX_DEFER_NS));
        bench.stage.round();
        assert_eq!(
            bench.snapshots.load(Ordering::Relaxed),
            1,
            "the reply passed once the deferral ran out, in the middle of the backlog"
        );
    }
}
