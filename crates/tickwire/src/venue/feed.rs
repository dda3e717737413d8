//! What the decoder stage needs from a venue: a [`Feed`] turns the venue's messages into events,
//! and asks the control thread for the REST snapshots its books start from.
//!
//! **Invariant:** a feed never does I/O, never blocks and never allocates per message. It takes
//! bytes and writes events into an [`EventSink`]; a snapshot it needs is a [`SnapshotRequest`]
//! the decoder stage forwards to the control thread, and the answer comes back as a
//! [`SnapshotReply`] through a ring.

use crate::event::{Body, Event, EventHeader, EventKind, Gap, GapReason, InstrumentId, VenueId};
use crate::fixed::Fixed;
use crate::metrics::{CounterReader, CounterWriter};
use crate::ring::Producer;
use std::sync::Arc;

/// The instrument id a gap carries when it concerns every instrument of a venue (events lost in
/// a full ring, a dropped connection).
pub const ALL_INSTRUMENTS: InstrumentId = InstrumentId::MAX;

/// What the decoder stage does around a publication that its [`EventSink`] makes: mark it (for
/// decoded-to-strategy latency) before the events become visible, wake the consumer after.
pub trait Publisher {
    /// `count` events are about to be published.
    fn before(&mut self, count: usize);
    /// They were.
    fn after(&mut self);
}

/// Where a feed writes events: the decoder-to-strategy ring, written without publishing (the
/// stage publishes once per batch). An event the ring cannot take is counted by the ring; the
/// first event written after such a loss is preceded by a `Gap` (`RingOverflow`) for the whole
/// venue, so the strategy always learns that it missed something.
///
/// With a [`Publisher`] (the decoder stage's), the sink also publishes by itself every
/// [`EventSink::PUBLISH_EVERY`] events: a message that makes hundreds of events (a Databento
/// chunk of 64 KiB makes about 600) lets the strategy start on the first ones while the rest
/// are decoded, instead of all of them waiting for the last.
pub struct EventSink<'a> {
    events: &'a mut Producer<Event>,
    /// Set while events are being lost; cleared once the gap announcing the loss is written.
    lost: &'a mut bool,
    /// Written and not yet published.
    written: usize,
    /// Written in all, published or not.
    total: usize,
    publisher: Option<&'a mut dyn Publisher>,
}

impl<'a> EventSink<'a> {
    /// Events a sink with a publisher writes before it publishes them by itself.
    pub const PUBLISH_EVERY: usize = 64;

    /// A sink that publishes only when asked ([`EventSink::publish`]).
    pub fn new(events: &'a mut Producer<Event>, lost: &'a mut bool) -> EventSink<'a> {
        EventSink {
            events,
            lost,
            written: 0,
            total: 0,
            publisher: None,
        }
    }

    /// A sink that also publishes every [`EventSink::PUBLISH_EVERY`] events, with `publisher`
    /// around each publication (its own and those asked for).
    pub fn with_publisher(
        events: &'a mut Producer<Event>,
        lost: &'a mut bool,
        publisher: &'a mut dyn Publisher,
    ) -> EventSink<'a> {
        EventSink {
            publisher: Some(publisher),
            ..EventSink::new(events, lost)
        }
    }

    /// Writes one event (published with the stage's batch, or by the sink's publisher).
    #[inline]
    pub fn push(&mut self, event: Event) {
        if *self.lost {
            let gap = Event::new(
                EventHeader {
                    exchange_ts_ns: 0,
                    recv_ts_ns: event.header.recv_ts_ns,
                    venue_seq: 0,
                    instrument_id: ALL_INSTRUMENTS,
                    venue_id: event.header.venue_id,
                    kind: EventKind::Gap,
                    flags: crate::event::flags::NO_EXCHANGE_TS,
                },
                Body::Gap(Gap::new(GapReason::RingOverflow, 0, 0)),
            );
            if self.events.try_write(gap).is_err() {
                return;
            }
            *self.lost = false;
            self.written += 1;
            self.total += 1;
        }
        match self.events.try_write(event) {
            Ok(()) => {
                self.written += 1;
                self.total += 1;
                if self.written >= Self::PUBLISH_EVERY && self.publisher.is_some() {
                    self.publish();
                }
            }
            Err(_) => *self.lost = true,
        }
    }

    /// Events written and not yet published.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Events written through this sink in all, published or not.
    pub fn total_written(&self) -> usize {
        self.total
    }

    /// Publishes what was written since the last publication; returns how many events that was.
    pub fn publish(&mut self) -> usize {
        let count = std::mem::take(&mut self.written);
        match self.publisher.as_deref_mut() {
            Some(publisher) if count > 0 => {
                publisher.before(count);
                self.events.publish();
                publisher.after();
            }
            _ => self.events.publish(),
        }
        count
    }

    /// Slots the event ring has free.
    pub fn free_slots(&mut self) -> usize {
        self.events.free_slots()
    }
}

/// The header of an event tickwire makes itself (a gap, a status) rather than decodes: no
/// exchange time, no venue sequence, complete on its own. `Event::new` sets the kind.
pub fn own_header(venue: VenueId, instrument: InstrumentId, now_ns: u64) -> EventHeader {
    EventHeader {
        exchange_ts_ns: 0,
        recv_ts_ns: now_ns,
        venue_seq: 0,
        instrument_id: instrument,
        venue_id: venue,
        kind: EventKind::Gap,
        flags: crate::event::flags::NO_EXCHANGE_TS | crate::event::flags::LAST,
    }
}

/// The `Gap` (`Reconnect`) an instrument gets when the connection carrying it dropped.
pub fn reconnect_gap(venue: VenueId, instrument: InstrumentId, now_ns: u64) -> Event {
    Event::new(
        own_header(venue, instrument, now_ns),
        Body::Gap(Gap::new(GapReason::Reconnect, 0, 0)),
    )
}

/// A feed's request for a book snapshot, by instrument (the control thread knows the symbol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub venue: VenueId,
    pub instrument: InstrumentId,
}

/// A REST depth snapshot, parsed on the control thread.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DepthSnapshot {
    /// Binance `lastUpdateId`.
    pub last_update_id: u64,
    /// Best first.
    pub bids: Vec<(Fixed, Fixed)>,
    /// Best first.
    pub asks: Vec<(Fixed, Fixed)>,
}

/// The control thread's answer to a [`SnapshotRequest`]. It travels boxed, so the ring slot
/// stays small; the box is made on the control thread and freed on the decoder thread, once per
/// snapshot (a rare event, not a per-message cost).
#[derive(Debug)]
pub struct SnapshotReply {
    pub venue: VenueId,
    pub instrument: InstrumentId,
    pub result: Result<DepthSnapshot, String>,
    /// When the reply was received, for the snapshot events' `recv_ts_ns`.
    pub recv_ts_ns: u64,
}

/// A message a feed could not decode, kept for a rate-limited log line on the control thread:
/// what went wrong and the first bytes of the message.
#[derive(Clone, Copy)]
pub struct MalformedSample {
    pub venue: VenueId,
    /// The decoder's description of the error, truncated to the buffer.
    error: [u8; MalformedSample::ERROR_BYTES],
    error_len: usize,
    pub offset: usize,
    pub len: usize,
    pub head: [u8; MalformedSample::HEAD_BYTES],
    pub head_len: usize,
}

impl MalformedSample {
    pub const HEAD_BYTES: usize = 160;
    pub const ERROR_BYTES: usize = 96;

    /// Formats `error` into a fixed buffer: no allocation, so a decoder thread may call it.
    pub fn new(
        venue: VenueId,
        error: &dyn std::fmt::Display,
        offset: usize,
        message: &[u8],
    ) -> Self {
        let mut error_text = [0u8; Self::ERROR_BYTES];
        let error_len = {
            let mut cursor = std::io::Cursor::new(&mut error_text[..]);
            // A longer description is cut at the buffer's end.
            let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{error}"));
            cursor.position() as usize
        };
        let mut head = [0u8; Self::HEAD_BYTES];
        let head_len = message.len().min(Self::HEAD_BYTES);
        head[..head_len].copy_from_slice(&message[..head_len]);
        MalformedSample {
            venue,
            error: error_text,
            error_len,
            offset,
            len: message.len(),
            head,
            head_len,
        }
    }

    /// What the decoder said was wrong.
    pub fn error(&self) -> String {
        String::from_utf8_lossy(&self.error[..self.error_len]).into_owned()
    }

    /// The sample as lossy text, marked when truncated.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head[..self.head_len]).into_owned();
        if self.len > self.head_len {
            text.push_str(&format!("... ({} bytes)", self.len));
        }
        text
    }
}

/// A feed's malformed-message sample for the control thread's log: at most one waiting, and at
/// most one a second (a venue sending garbage cannot flood the log). No allocation.
#[derive(Default)]
pub struct MalformedSampler {
    sample: Option<MalformedSample>,
    last_ns: Option<u64>,
}

impl MalformedSampler {
    pub const INTERVAL_NS: u64 = 1_000_000_000;

    /// Keeps a sample of `message` unless one waits or the last was taken under a second ago.
    pub fn offer(
        &mut self,
        venue: VenueId,
        error: &dyn std::fmt::Display,
        offset: usize,
        message: &[u8],
        recv_ts_ns: u64,
    ) {
        let due = self
            .last_ns
            .is_none_or(|last| recv_ts_ns.saturating_sub(last) >= Self::INTERVAL_NS);
        if self.sample.is_none() && due {
            self.last_ns = Some(recv_ts_ns);
            self.sample = Some(MalformedSample::new(venue, error, offset, message));
        }
    }

    pub fn take(&mut self) -> Option<MalformedSample> {
        self.sample.take()
    }
}

/// A feed's replies waiting for the decoder stage to pass them on, bounded: a reply that does
/// not fit is refused (the feed counts it).
pub struct ReplyQueue {
    replies: std::collections::VecDeque<VenueReply>,
    capacity: usize,
}

impl ReplyQueue {
    pub fn new(capacity: usize) -> ReplyQueue {
        ReplyQueue {
            replies: std::collections::VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Queues `reply`; false when the queue is full and the reply was dropped.
    pub fn push(&mut self, reply: VenueReply) -> bool {
        if self.replies.len() == self.capacity {
            return false;
        }
        self.replies.push_back(reply);
        true
    }

    pub fn pop(&mut self) -> Option<VenueReply> {
        self.replies.pop_front()
    }
}

/// What a [`VenueReply`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// The answer to request `id`.
    Response,
    /// The venue will close the connection soon: replace it before it does.
    ReconnectNotice,
    /// The venue reported a condition that answers no request (Databento's gateway messages):
    /// logged and counted. `error` is the venue's error code for an error; for other notices
    /// the low byte of `id` is the venue's notice code.
    Notice,
}

/// A venue's answer to a request the control thread sent (a subscription), relayed by the
/// decoder stage: `id` is the request's id, `error` the venue's error code when it refused.
#[derive(Clone, Copy)]
pub struct VenueReply {
    pub venue: VenueId,
    pub id: u64,
    pub error: Option<i64>,
    pub kind: ReplyKind,
    message_len: u8,
    message: [u8; VenueReply::MESSAGE_BYTES],
}

impl VenueReply {
    /// The venue's error text is kept to this many bytes, so that a reply stays small (it is
    /// copied through a queue and a ring): the log shows the start of a longer text.
    pub const MESSAGE_BYTES: usize = 64;

    /// A reply; `message` (the venue's error text) is cut to `MESSAGE_BYTES`. No allocation.
    pub fn new(venue: VenueId, id: u64, error: Option<i64>, message: &[u8]) -> VenueReply {
        let mut text = [0u8; Self::MESSAGE_BYTES];
        let message_len = message.len().min(Self::MESSAGE_BYTES);
        text[..message_len].copy_from_slice(&message[..message_len]);
        VenueReply {
            venue,
            id,
            error,
            kind: ReplyKind::Response,
            message: text,
            message_len: message_len as u8,
        }
    }

    /// A notice from the venue on connection `conn` (see [`ReplyKind::Notice`]).
    pub fn notice(
        venue: VenueId,
        conn: crate::net::ConnId,
        code: u8,
        error: Option<i64>,
        message: &[u8],
    ) -> VenueReply {
        VenueReply {
            kind: ReplyKind::Notice,
            ..VenueReply::new(
                venue,
                (u64::from(conn) << 32) | u64::from(code),
                error,
                message,
            )
        }
    }

    /// The venue announced that it will soon close connection `conn` (Thalex's `system`
    /// `reconnect` event): `id` carries the slot in its upper half, like a request id.
    pub fn reconnect_notice(venue: VenueId, conn: crate::net::ConnId) -> VenueReply {
        VenueReply {
            kind: ReplyKind::ReconnectNotice,
            ..VenueReply::new(venue, u64::from(conn) << 32, None, b"")
        }
    }

    /// The venue's error text, if it sent one.
    pub fn message(&self) -> String {
        String::from_utf8_lossy(&self.message[..usize::from(self.message_len)]).into_owned()
    }
}

impl std::fmt::Debug for VenueReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VenueReply")
            .field("venue", &self.venue)
            .field("id", &self.id)
            .field("error", &self.error)
            .field("kind", &self.kind)
            .field("message", &self.message())
            .finish()
    }
}

/// Per stream (symbol and channel) of a venue, what the decoder thread last saw, for the control
/// thread's staleness watchdog and rotation switch. Stream `symbol * channels + channel`, in the
/// venue file's order.
///
/// **Invariant:** one writer (the decoder thread), relaxed stores of whole words: the control
/// thread reads a recent value of each, never a torn one, and nothing on the hot path waits.
pub struct StreamActivity {
    channels: usize,
    /// Receive time of the stream's latest message that reached the strategy (0: none yet).
    last_ns: Box<[std::sync::atomic::AtomicU64]>,
    /// Receive time of the latest message that two connections both delivered (the second
    /// copy was dropped): they agree on that update id.
    agree_ns: Box<[std::sync::atomic::AtomicU64]>,
    /// Messages delivered per stream (one writer: a load and a store, no locked instruction).
    messages: Box<[std::sync::atomic::AtomicU64]>,
    /// Per stream: 1 + the connection whose subscription the venue last confirmed by naming the
    /// stream in its answer (0: none since the control thread cleared it). Venues that list
    /// what they accepted (Thalex) set it; the control thread clears a request's streams before
    /// sending it and reads which the answer left out.
    accepted: Box<[std::sync::atomic::AtomicU64]>,
    /// Per stream: the exchange time (ns) of its latest record, where the venue can replay from
    /// a time (Databento); 0 for none. The control thread resubscribes from it.
    replay_from: Box<[std::sync::atomic::AtomicU64]>,
}

impl StreamActivity {
    pub fn new(symbols: usize, channels: usize) -> StreamActivity {
        let zeros = || {
            (0..symbols * channels)
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect()
        };
        StreamActivity {
            channels,
            last_ns: zeros(),
            agree_ns: zeros(),
            messages: zeros(),
            accepted: zeros(),
            replay_from: zeros(),
        }
    }

    pub fn streams(&self) -> usize {
        self.last_ns.len()
    }

    pub fn channels(&self) -> usize {
        self.channels
    }

    #[inline]
    pub fn saw(&self, stream: usize, recv_ts_ns: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if let (Some(last), Some(count)) = (self.last_ns.get(stream), self.messages.get(stream)) {
            last.store(recv_ts_ns, Relaxed);
            count.store(count.load(Relaxed) + 1, Relaxed);
        }
    }

    /// Messages the stream delivered.
    pub fn messages(&self, stream: usize) -> u64 {
        self.messages
            .get(stream)
            .map_or(0, |cell| cell.load(std::sync::atomic::Ordering::Relaxed))
    }

    #[inline]
    pub fn agreed(&self, stream: usize, recv_ts_ns: u64) {
        if let Some(cell) = self.agree_ns.get(stream) {
            cell.store(recv_ts_ns, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn last_ns(&self, stream: usize) -> u64 {
        self.last_ns
            .get(stream)
            .map_or(0, |cell| cell.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The venue confirmed `stream` on connection `conn`.
    #[inline]
    pub fn accept(&self, stream: usize, conn: crate::net::ConnId) {
        if let Some(cell) = self.accepted.get(stream) {
            cell.store(u64::from(conn) + 1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Forgets any confirmation of `stream` (before asking for it again).
    pub fn clear_accepted(&self, stream: usize) {
        if let Some(cell) = self.accepted.get(stream) {
            cell.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Records that `stream`'s latest record happened at `exchange_ns` (a venue that replays
    /// from a time).
    #[inline]
    pub fn mark_replay(&self, stream: usize, exchange_ns: u64) {
        if let Some(cell) = self.replay_from.get(stream) {
            cell.store(exchange_ns, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The exchange time of `stream`'s latest record (0: none), for a replay.
    pub fn replay_from(&self, stream: usize) -> u64 {
        self.replay_from
            .get(stream)
            .map_or(0, |cell| cell.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The connection the venue last confirmed `stream` on, if any since it was cleared.
    pub fn accepted_on(&self, stream: usize) -> Option<crate::net::ConnId> {
        let value = self
            .accepted
            .get(stream)
            .map_or(0, |cell| cell.load(std::sync::atomic::Ordering::Relaxed));
        (value > 0).then(|| (value - 1) as crate::net::ConnId)
    }

    pub fn agree_ns(&self, stream: usize) -> u64 {
        self.agree_ns
            .get(stream)
            .map_or(0, |cell| cell.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// One venue's decoding, driven by the decoder stage.
pub trait Feed: Send {
    /// One message received on connection `conn` (one of the venue's) at `recv_ts_ns`.
    fn on_message(
        &mut self,
        conn: crate::net::ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    );

    /// A snapshot the feed asked for arrived (or failed).
    fn on_snapshot(&mut self, reply: SnapshotReply, now_ns: u64, sink: &mut EventSink<'_>);

    /// Snapshots the feed needs now; called once per decoder round.
    fn snapshot_requests(&mut self, now_ns: u64, request: &mut dyn FnMut(SnapshotRequest));

    /// Connection `conn`, which carried `instruments`, dropped: their books are invalid and each
    /// owes the strategy a gap (unless, for a venue that tracks which connection delivers what,
    /// another connection already carries them).
    fn on_disconnect(
        &mut self,
        conn: crate::net::ConnId,
        instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    );

    /// A malformed message to log, if one is waiting (at most one per second is kept).
    fn take_malformed(&mut self) -> Option<MalformedSample>;

    /// A reply to one of the control thread's requests, if one is waiting.
    fn take_reply(&mut self) -> Option<VenueReply>;
}

/// What the control thread reads about a feed. The names are Binance's; a Thalex feed counts
/// `ticker` and `lwt` messages as `book_tickers`, `book` as `depth_updates`, `recent_trades` as
/// `trades` and `price_index` as `mark_prices`.
pub struct FeedCounters {
    pub book_tickers: CounterReader,
    pub depth_updates: CounterReader,
    pub trades: CounterReader,
    pub mark_prices: CounterReader,
    pub replies: CounterReader,
    /// Error replies from the venue (a refused SUBSCRIBE, ...).
    pub error_replies: CounterReader,
    /// Market events of a type we do not know.
    pub unknown: CounterReader,
    /// Messages for a symbol the venue file does not list.
    pub unknown_symbol: CounterReader,
    pub malformed: CounterReader,
    /// Book sync: `pu` breaks (each emitted as a gap).
    pub book_gaps: CounterReader,
    pub book_resyncs: CounterReader,
    pub book_syncs: CounterReader,
    /// Messages dropped because their update id was already delivered (the same message from
    /// a second connection during a rotation, or an older one).
    pub duplicates: CounterReader,
    /// Replies to requests the control thread could not take in time.
    pub replies_dropped: CounterReader,
    /// Book events whose size saturated `Fixed` (`flags::SATURATED`: a level's total above
    /// 9,223,372,036 units; Databento MBO books).
    pub book_saturated: CounterReader,
    /// Per stream: when it last delivered, when two connections agreed on it.
    pub activity: Arc<StreamActivity>,
}

/// The decoder thread's side of [`FeedCounters`].
pub struct FeedWriters {
    pub book_tickers: CounterWriter,
    pub depth_updates: CounterWriter,
    pub trades: CounterWriter,
    pub mark_prices: CounterWriter,
    pub replies: CounterWriter,
    pub error_replies: CounterWriter,
    pub unknown: CounterWriter,
    pub unknown_symbol: CounterWriter,
    pub malformed: CounterWriter,
    pub book_gaps: CounterWriter,
    pub book_resyncs: CounterWriter,
    pub book_syncs: CounterWriter,
    pub duplicates: CounterWriter,
    pub replies_dropped: CounterWriter,
    pub book_saturated: CounterWriter,
}

impl FeedCounters {
    /// A feed's counters: the decoder thread's writers and the control thread's readers.
    pub fn new(activity: Arc<StreamActivity>) -> (FeedWriters, FeedCounters) {
        let counter = crate::metrics::counter;
        let (book_tickers, book_tickers_r) = counter();
        let (depth_updates, depth_updates_r) = counter();
        let (trades, trades_r) = counter();
        let (mark_prices, mark_prices_r) = counter();
        let (replies, replies_r) = counter();
        let (error_replies, error_replies_r) = counter();
        let (unknown, unknown_r) = counter();
        let (unknown_symbol, unknown_symbol_r) = counter();
        let (malformed, malformed_r) = counter();
        let (book_gaps, book_gaps_r) = counter();
        let (book_resyncs, book_resyncs_r) = counter();
        let (book_syncs, book_syncs_r) = counter();
        let (duplicates, duplicates_r) = counter();
        let (replies_dropped, replies_dropped_r) = counter();
        let (book_saturated, book_saturated_r) = counter();
        let writers = FeedWriters {
            book_tickers,
            depth_updates,
            trades,
            mark_prices,
            replies,
            error_replies,
            unknown,
            unknown_symbol,
            malformed,
            book_gaps,
            book_resyncs,
            book_syncs,
            duplicates,
            replies_dropped,
            book_saturated,
        };
        let counters = FeedCounters {
            book_tickers: book_tickers_r,
            depth_updates: depth_updates_r,
            trades: trades_r,
            mark_prices: mark_prices_r,
            replies: replies_r,
            error_replies: error_replies_r,
            unknown: unknown_r,
            unknown_symbol: unknown_symbol_r,
            malformed: malformed_r,
            book_gaps: book_gaps_r,
            book_resyncs: book_resyncs_r,
            book_syncs: book_syncs_r,
            duplicates: duplicates_r,
            replies_dropped: replies_dropped_r,
            book_saturated: book_saturated_r,
            activity,
        };
        (writers, counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::ring;

    fn event(seq: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns: 0,
                venue_seq: seq,
                instrument_id: 1,
                venue_id: 0,
                kind: EventKind::Gap,
                flags: 0,
            },
            Body::Gap(Gap::new(GapReason::Unknown, 0, 0)),
        )
    }

    #[derive(Debug, PartialEq)]
    enum Call {
        Before(usize),
        After,
    }

    /// Records what the sink told it, in order.
    #[derive(Default)]
    struct Calls {
        calls: Vec<Call>,
    }

    impl Publisher for Calls {
        fn before(&mut self, count: usize) {
            self.calls.push(Call::Before(count));
        }
        fn after(&mut self) {
            self.calls.push(Call::After);
        }
    }

    #[test]
    fn a_sink_with_a_publisher_publishes_every_batch_of_events_and_the_rest_when_asked() {
        let (mut producer, mut consumer) = ring::<Event>(1024);
        let mut lost = false;
        let mut calls = Calls::default();
        let total = 2 * EventSink::PUBLISH_EVERY + 22;
        {
            let mut sink = EventSink::with_publisher(&mut producer, &mut lost, &mut calls);
            for seq in 0..total {
                sink.push(event(seq as u64));
            }
            assert_eq!(sink.written(), 22);
            assert_eq!(sink.total_written(), total);
            assert_eq!(sink.publish(), 22);
            assert_eq!(sink.publish(), 0, "nothing left to publish");
        }
        let every = EventSink::PUBLISH_EVERY;
        assert_eq!(
            calls.calls,
            [
                Call::Before(every),
                Call::After,
                Call::Before(every),
                Call::After,
                Call::Before(22),
                Call::After
            ]
        );
        let seqs: Vec<u64> = std::iter::from_fn(|| consumer.try_pop())
            .map(|event| event.header.venue_seq)
            .collect();
        assert_eq!(seqs, (0..total as u64).collect::<Vec<_>>());
    }

    #[test]
    fn a_sink_without_a_publisher_publishes_only_when_asked() {
        let (mut producer, mut consumer) = ring::<Event>(1024);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        for seq in 0..3 * EventSink::PUBLISH_EVERY {
            sink.push(event(seq as u64));
        }
        assert!(consumer.try_pop().is_none(), "published before asked");
        let mut sink = EventSink::new(&mut producer, &mut lost);
        // A new sink over the same ring publishes what the last one wrote.
        sink.publish();
        assert_eq!(
            std::iter::from_fn(|| consumer.try_pop()).count(),
            3 * EventSink::PUBLISH_EVERY
        );
    }
}
