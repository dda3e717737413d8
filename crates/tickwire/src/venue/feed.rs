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
///
/// With a bus ([`EventSink::with_bus`]), every event is also written to the shared-memory event
/// bus first, whatever the strategy's ring does with it: the bus never refuses an event (its
/// readers are lapped instead), so an event lost to a full strategy ring is still on the bus, and
/// the `RingOverflow` gap that tells the strategy so is the strategy's alone. The bus is published
/// with the ring. While [`EventSink::bus_only`] is set (a book snapshot a bus reader asked for),
/// events go to the bus only.
pub struct EventSink<'a> {
    events: &'a mut Producer<Event>,
    /// Set while events are being lost; cleared once the gap announcing the loss is written.
    lost: &'a mut bool,
    /// Written and not yet published.
    written: usize,
    /// Written in all, published or not.
    total: usize,
    publisher: Option<&'a mut dyn Publisher>,
    /// Where the events written are counted by venue and kind, if anywhere.
    counts: Option<&'a mut EventCounts>,
    /// The shared-memory event bus, if the appliance has one.
    bus: Option<&'a mut tickwire_bus::BusWriter>,
    /// Events go to the bus only (see the type's doc).
    bus_only: bool,
    /// Bus-only events written and not yet published.
    bus_pending: usize,
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
            counts: None,
            bus: None,
            bus_only: false,
            bus_pending: 0,
        }
    }

    /// The same sink, writing every event to `bus` as well (see the type's doc).
    pub fn with_bus(self, bus: Option<&'a mut tickwire_bus::BusWriter>) -> EventSink<'a> {
        EventSink { bus, ..self }
    }

    /// From now on events go to the bus only (`true`), or everywhere again (`false`).
    pub fn bus_only(&mut self, only: bool) {
        self.bus_only = only;
    }

    /// Whether the sink writes to a bus.
    pub fn has_bus(&self) -> bool {
        self.bus.is_some()
    }

    /// Names an instrument in the bus's directory at once, ahead of every event written after
    /// this call: for a feed that names its instruments as they come (a `*` venue file whose
    /// exchange feed sends its own stock directory). Without a bus there is nothing to name.
    /// No allocation; a lock shared with the other decoders' namings, never with events.
    pub fn name_instrument(
        &mut self,
        naming: &tickwire_bus::Naming<'_>,
    ) -> Result<(), tickwire_bus::DirectoryFull> {
        match self.bus.as_deref_mut() {
            Some(bus) => bus.add_naming(naming),
            None => Ok(()),
        }
    }

    /// The same sink, counting every event it writes by venue and kind in `counts`, published
    /// with the events.
    pub fn counting(self, counts: &'a mut EventCounts) -> EventSink<'a> {
        EventSink {
            counts: Some(counts),
            ..self
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
    ///
    /// The ring's path is all that is inlined at a feed's call sites; the bus's copy and the gap
    /// after a loss are calls of their own.
    #[inline]
    pub fn push(&mut self, event: Event) {
        if (self.bus.is_some() || self.bus_only) && self.write_bus(&event) {
            return;
        }
        if *self.lost && !self.write_gap(&event) {
            return;
        }
        match self.events.try_write(event) {
            Ok(()) => {
                if let Some(counts) = self.counts.as_deref_mut() {
                    counts.count(&event);
                }
                self.written += 1;
                self.total += 1;
                if self.written >= Self::PUBLISH_EVERY && self.publisher.is_some() {
                    self.publish();
                }
            }
            Err(_) => *self.lost = true,
        }
    }

    /// The event to the bus, if the sink has one; true when the sink writes the bus only (the
    /// event then goes nowhere else).
    #[inline(never)]
    fn write_bus(&mut self, event: &Event) -> bool {
        match self.bus.as_deref_mut() {
            Some(bus) => {
                bus.write(event);
                if self.bus_only {
                    self.bus_pending += 1;
                    if self.bus_pending >= Self::PUBLISH_EVERY {
                        self.bus_pending = 0;
                        bus.publish();
                    }
                }
                self.bus_only
            }
            None => self.bus_only,
        }
    }

    /// After events were lost to a full ring, the gap that says so, before `event`; false when
    /// the ring is still full (`event` is lost too, and the gap still owed).
    #[cold]
    #[inline(never)]
    fn write_gap(&mut self, event: &Event) -> bool {
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
            return false;
        }
        if let Some(counts) = self.counts.as_deref_mut() {
            counts.count(&gap);
        }
        *self.lost = false;
        self.written += 1;
        self.total += 1;
        true
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
        if let Some(bus) = self.bus.as_deref_mut() {
            self.bus_pending = 0;
            bus.publish();
        }
        // Nothing in the ring waits (a decoder's idle rounds): nothing to count, stamp or make
        // visible.
        if self.written == 0 && self.events.unpublished() == 0 {
            return 0;
        }
        let count = std::mem::take(&mut self.written);
        if let Some(counts) = self.counts.as_deref_mut() {
            counts.publish();
        }
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
    /// The venue's sequence number of the book as the snapshot shows it: the number the venue's
    /// book code compares the stream's updates with. Each venue with REST snapshots says in its
    /// module which field of its own this holds (Binance USD-M and Spot: the depth body's
    /// `lastUpdateId`).
    pub sequence: u64,
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
/// what went wrong and the first bytes of the message. Also, once per feed and limit, the
/// message at which a bound of the appliance was reached ([`SampleKind::Limit`]).
#[derive(Clone, Copy)]
pub struct MalformedSample {
    pub venue: VenueId,
    /// What the sample is for: the control thread words its log line after it.
    pub kind: SampleKind,
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
            kind: SampleKind::Malformed,
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

/// What a [`MalformedSample`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleKind {
    /// A message that did not decode (or that a book refused): skipped.
    Malformed,
    /// A bound of the appliance was reached at this message (a Databento L3 book's order limit,
    /// a gateway session's instrument mappings): the instrument got a gap. Logged once per feed
    /// and limit; the venue's `limit` book events count every time.
    Limit,
}

/// Symbol to index, for a feed that routes messages by the symbol they name: a linear scan,
/// which for the handful of symbols one connection carries beats hashing (it compares lengths
/// first, and symbols differ early).
pub struct SymbolIndex {
    names: Vec<Box<[u8]>>,
}

impl SymbolIndex {
    /// The venue file's symbols, as the venue spells them.
    pub fn new(symbols: &[String]) -> SymbolIndex {
        SymbolIndex {
            names: symbols
                .iter()
                .map(|symbol| symbol.as_bytes().into())
                .collect(),
        }
    }

    /// The index of `symbol`, spelled exactly.
    #[inline]
    pub fn find(&self, symbol: &[u8]) -> Option<usize> {
        self.names.iter().position(|name| **name == *symbol)
    }

    /// The index of `symbol` in any ASCII case (a stream name's lower-case symbol).
    pub fn find_ignore_case(&self, symbol: &[u8]) -> Option<usize> {
        self.names
            .iter()
            .position(|name| name.eq_ignore_ascii_case(symbol))
    }
}

/// A feed's duplicate filter: per stream of the venue's activity table, the highest update id
/// delivered and the connection that delivered it. While a rotation's two connections carry the
/// same stream, each message passes once; a copy from the other connection marks the stream as
/// agreeing (`StreamActivity::agreed`), which the rotation's switch waits for.
pub struct StreamFloors {
    floors: Vec<(u64, crate::net::ConnId)>,
}

impl StreamFloors {
    pub fn new(streams: usize) -> StreamFloors {
        StreamFloors {
            floors: vec![(0, 0); streams],
        }
    }

    /// Whether message `id` of `stream`, received on `conn`, is new (and then marks the stream
    /// seen in `activity`). A stream outside the table passes.
    #[inline]
    pub fn admit(
        &mut self,
        activity: &StreamActivity,
        stream: usize,
        id: u64,
        conn: crate::net::ConnId,
        recv_ts_ns: u64,
    ) -> bool {
        let Some(floor) = self.floors.get_mut(stream) else {
            return true;
        };
        if id <= floor.0 {
            if conn != floor.1 {
                activity.agreed(stream, recv_ts_ns);
            }
            return false;
        }
        *floor = (id, conn);
        activity.saw(stream, recv_ts_ns);
        true
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

    /// Keeps a sample of `message` whatever the interval, in place of one waiting: for a
    /// condition the feed logs once (each unknown SBE template id), which the interval must not
    /// hide. The caller bounds how often it calls this.
    pub fn offer_now(
        &mut self,
        venue: VenueId,
        error: &dyn std::fmt::Display,
        offset: usize,
        message: &[u8],
        recv_ts_ns: u64,
    ) {
        self.last_ns = Some(recv_ts_ns);
        self.sample = Some(MalformedSample::new(venue, error, offset, message));
    }

    /// Keeps a [`SampleKind::Limit`] sample of `message` whatever the interval (see
    /// [`MalformedSampler::offer_now`]): the caller offers one per limit and feed.
    pub fn offer_limit(
        &mut self,
        venue: VenueId,
        error: &dyn std::fmt::Display,
        message: &[u8],
        recv_ts_ns: u64,
    ) {
        self.offer_now(venue, error, 0, message, recv_ts_ns);
        if let Some(sample) = self.sample.as_mut() {
            sample.kind = SampleKind::Limit;
        }
    }

    /// The waiting sample, if any. Asked on every decoder round: an empty sampler answers
    /// without moving the (half-kilobyte) sample slot.
    #[inline]
    pub fn take(&mut self) -> Option<MalformedSample> {
        self.sample.as_ref()?;
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
    /// The feed needs one stream afresh (a break in its book's sequence, a crossed book, for a
    /// venue whose books start from the stream's own snapshots): the low half of `id` is the
    /// stream's index in the venue's activity table; the control side sends
    /// `Protocol::resubscribe_requests` on the connection (the upper half of `id`).
    Resubscribe,
    /// A datagram venue's request to send (a MoldUDP64 re-request), made on the decoder thread
    /// and sent by the network thread: the upper half of `id` is the slot, the low byte the
    /// socket (`net::udp::DatagramLine`), [`VenueReply::payload`] the bytes.
    Datagram,
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

    /// The feed asks for stream `stream` (its index in the venue's activity table) afresh on
    /// connection `conn` (see [`ReplyKind::Resubscribe`]).
    pub fn resubscribe(venue: VenueId, conn: crate::net::ConnId, stream: u32) -> VenueReply {
        VenueReply {
            kind: ReplyKind::Resubscribe,
            ..VenueReply::new(
                venue,
                (u64::from(conn) << 32) | u64::from(stream),
                None,
                b"",
            )
        }
    }

    /// A datagram to send on socket `line` of datagram slot `conn` (see
    /// [`ReplyKind::Datagram`]); `None` when longer than [`VenueReply::MESSAGE_BYTES`].
    pub fn datagram(
        venue: VenueId,
        conn: crate::net::ConnId,
        line: crate::net::udp::DatagramLine,
        bytes: &[u8],
    ) -> Option<VenueReply> {
        if bytes.len() > Self::MESSAGE_BYTES {
            return None;
        }
        Some(VenueReply {
            kind: ReplyKind::Datagram,
            ..VenueReply::new(venue, (u64::from(conn) << 32) | line as u64, None, bytes)
        })
    }

    /// The reply's bytes as they are (a datagram's; the venue's error text otherwise).
    pub fn payload(&self) -> &[u8] {
        &self.message[..usize::from(self.message_len)]
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

    /// One binary message (a WebSocket binary frame) on connection `conn`: for a venue whose
    /// events come as binary frames beside JSON text control frames (Binance Spot SBE). The
    /// default reads it like any other message.
    fn on_binary(
        &mut self,
        conn: crate::net::ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        self.on_message(conn, recv_ts_ns, payload, sink);
    }

    /// One datagram of a datagram venue ([`crate::net::engine::FrameKind::LineA`] and its
    /// kin): on socket `line` of slot `conn`, received at `recv_ts_ns` (the kernel's time where
    /// it gave one), the socket's kernel drop count by then `kernel_drops`. The default reads
    /// it like any other message.
    fn on_datagram(
        &mut self,
        conn: crate::net::ConnId,
        line: crate::net::udp::DatagramLine,
        recv_ts_ns: u64,
        kernel_drops: u32,
        datagram: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        let _ = (line, kernel_drops);
        self.on_message(conn, recv_ts_ns, datagram, sink);
    }

    /// The feed's timers at `now_ns` (the decoder stage's clock), once per decoder round with
    /// its control work: a datagram venue's gap waits and re-requests. The default has none.
    fn tick(&mut self, now_ns: u64, sink: &mut EventSink<'_>) {
        let _ = (now_ns, sink);
    }

    /// A snapshot the feed asked for arrived (or failed). The default, for a venue whose books
    /// start from its own stream and which never asks for one, ignores it.
    fn on_snapshot(&mut self, reply: SnapshotReply, now_ns: u64, sink: &mut EventSink<'_>) {
        let _ = (reply, now_ns, sink);
    }

    /// At most how many events [`Feed::on_snapshot`] would write for `reply` now: the decoder
    /// stage holds a reply back until the event ring has room for them all. This default counts
    /// the snapshot's levels and the few events around them (its begin and end markers, the
    /// quote after it); a feed that also replays what it buffered adds that.
    fn snapshot_events(&self, reply: &SnapshotReply) -> usize {
        const AROUND: usize = 4;
        match &reply.result {
            Ok(snapshot) => snapshot.bids.len() + snapshot.asks.len() + AROUND,
            Err(_) => AROUND,
        }
    }

    /// Snapshots the feed needs now; called once per decoder round. The default asks for none
    /// (a venue whose books start from its own stream).
    fn snapshot_requests(&mut self, now_ns: u64, request: &mut dyn FnMut(SnapshotRequest)) {
        let _ = (now_ns, request);
    }

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

    /// How many events [`Feed::emit_books`] would write now for the one book of `instrument`
    /// (never [`ALL_INSTRUMENTS`]): its levels and the begin and end of its snapshot (of each, for
    /// an instrument with two: a Databento MBO book and its MBP-10 levels); 0 for a book out of
    /// sync or an instrument without one, which `emit_books` skips. The decoder stage charges
    /// it to the readers' snapshot budget before it asks for the book.
    fn book_events(&self, instrument: InstrumentId) -> usize;

    /// A reader of the event bus asked for the book of `instrument` ([`ALL_INSTRUMENTS`]: every
    /// book of the venue): write each book that is in sync as a snapshot of how it stands now
    /// (`SnapshotBegin`, its levels, `SnapshotEnd`: [`crate::venue::emit::book_snapshot`]) into
    /// `sink`, which the decoder stage has set to send them to the bus only. Returns the books
    /// written. A book out of sync is skipped: its own next snapshot will reach the bus.
    fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) -> usize;
}

/// A kind of message a venue sends, as its feed counts it: an entry of the venue's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageKind {
    /// As the venue's documentation names it (`bookTicker`, `price_index`, `mbp-10`...), or,
    /// for what the venue leaves unnamed, what it is (`ack`, `error`, `unknown_event`).
    pub name: &'static str,
    /// Whether the kind carries market data (the demo's message rate counts these).
    pub market_data: bool,
    /// Not a kind of message but a count the feed keeps beside them, in the same table (a
    /// datagram venue's per-line duplicates, kernel drops, re-requests): shown by
    /// [`FeedCounters::tallies`], never among [`FeedCounters::messages`].
    pub tally: bool,
}

impl MessageKind {
    /// A kind that carries market data.
    pub const fn market(name: &'static str) -> MessageKind {
        MessageKind {
            name,
            market_data: true,
            tally: false,
        }
    }

    /// A kind that does not (a reply, a notice, a message the feed does not decode).
    pub const fn other(name: &'static str) -> MessageKind {
        MessageKind {
            name,
            market_data: false,
            tally: false,
        }
    }

    /// A count the feed keeps that is no kind of message (see [`MessageKind::tally`]).
    pub const fn tally(name: &'static str) -> MessageKind {
        MessageKind {
            name,
            market_data: false,
            tally: true,
        }
    }
}

/// What the control thread reads about a feed: per kind of the venue's own message table, the
/// messages its feed delivered, then what went wrong, named for what it is on every venue.
pub struct FeedCounters {
    /// The venue's message kinds (its feed's table), and per kind the messages delivered
    /// (duplicates, malformed messages and messages for unknown symbols are counted apart).
    kinds: &'static [MessageKind],
    messages: Box<[CounterReader]>,
    /// Messages (or a message's trades) for a symbol or instrument the venue file does not
    /// list: dropped.
    pub unknown_symbol: CounterReader,
    /// Messages that did not decode (a DBN record shorter than its layout included): dropped,
    /// one sample a second logged.
    pub malformed: CounterReader,
    /// Messages dropped because they were delivered already (the same message from a second
    /// connection during a rotation, an older one, a replay's repeat).
    pub duplicates: CounterReader,
    /// Replies to requests the control thread could not take in time.
    pub replies_dropped: CounterReader,
    /// Books brought in sync (a snapshot applied).
    pub book_syncs: CounterReader,
    /// Books that lost continuity (a `pu` break, a dropped connection's book), each told to the
    /// strategy as a gap.
    pub book_gaps: CounterReader,
    /// Books thrown away and synchronised again from a new snapshot.
    pub book_resyncs: CounterReader,
    /// Book updates the book refused (a Databento MBO record for an order it does not hold):
    /// the book is unchanged.
    pub book_refused: CounterReader,
    /// Book events whose size saturated `Fixed` (`flags::SATURATED`: a level's total above
    /// 9,223,372,036 units; Databento MBO books).
    pub book_saturated: CounterReader,
    /// Books dropped, or symbol mappings refused, because a bound of the appliance was reached
    /// (`databento.max_orders_per_book`, `databento.max_instrument_mappings`), each told to the
    /// strategy as a gap (`GapReason::Limit`, also counted in `book_gaps`).
    pub book_limits: CounterReader,
    /// Per stream: when it last delivered, when two connections agreed on it.
    pub activity: Arc<StreamActivity>,
}

impl FeedCounters {
    /// A feed's counters for the venue whose message table is `kinds`: the decoder thread's
    /// writers and the control thread's readers.
    pub fn new(
        kinds: &'static [MessageKind],
        activity: Arc<StreamActivity>,
    ) -> (FeedWriters, FeedCounters) {
        let counter = crate::metrics::counter;
        let (message_writers, messages): (Vec<_>, Vec<_>) = kinds.iter().map(|_| counter()).unzip();
        let (unknown_symbol, unknown_symbol_r) = counter();
        let (malformed, malformed_r) = counter();
        let (duplicates, duplicates_r) = counter();
        let (replies_dropped, replies_dropped_r) = counter();
        let (book_syncs, book_syncs_r) = counter();
        let (book_gaps, book_gaps_r) = counter();
        let (book_resyncs, book_resyncs_r) = counter();
        let (book_refused, book_refused_r) = counter();
        let (book_saturated, book_saturated_r) = counter();
        let (book_limits, book_limits_r) = counter();
        let writers = FeedWriters {
            messages: message_writers.into_boxed_slice(),
            unknown_symbol,
            malformed,
            duplicates,
            replies_dropped,
            book_syncs,
            book_gaps,
            book_resyncs,
            book_refused,
            book_saturated,
            book_limits,
        };
        let counters = FeedCounters {
            kinds,
            messages: messages.into_boxed_slice(),
            unknown_symbol: unknown_symbol_r,
            malformed: malformed_r,
            duplicates: duplicates_r,
            replies_dropped: replies_dropped_r,
            book_syncs: book_syncs_r,
            book_gaps: book_gaps_r,
            book_resyncs: book_resyncs_r,
            book_refused: book_refused_r,
            book_saturated: book_saturated_r,
            book_limits: book_limits_r,
            activity,
        };
        (writers, counters)
    }

    /// Every kind of the venue's table with the messages of that kind delivered, in table order.
    pub fn messages(&self) -> impl Iterator<Item = (MessageKind, u64)> + '_ {
        self.kinds
            .iter()
            .zip(self.messages.iter())
            .filter(|(kind, _)| !kind.tally)
            .map(|(kind, count)| (*kind, count.get()))
    }

    /// The feed's tallies (see [`MessageKind::tally`]) by name, in table order.
    pub fn tallies(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.kinds
            .iter()
            .zip(self.messages.iter())
            .filter(|(kind, _)| kind.tally)
            .map(|(kind, count)| (kind.name, count.get()))
    }

    /// The tally named `name` (0 for a name not in the venue's table).
    pub fn tally(&self, name: &str) -> u64 {
        self.tallies()
            .find(|(tally, _)| *tally == name)
            .map_or(0, |(_, count)| count)
    }

    /// Messages of the kind named `name` delivered (0 for a name not in the venue's table).
    pub fn message(&self, name: &str) -> u64 {
        self.messages()
            .find(|(kind, _)| kind.name == name)
            .map_or(0, |(_, count)| count)
    }

    /// Messages delivered that carry market data, of every kind.
    pub fn market_messages(&self) -> u64 {
        self.messages()
            .filter(|(kind, _)| kind.market_data)
            .map(|(_, count)| count)
            .sum()
    }
}

/// The decoder thread's side of [`FeedCounters`].
pub struct FeedWriters {
    /// By the position of a kind in the venue's table.
    messages: Box<[CounterWriter]>,
    pub unknown_symbol: CounterWriter,
    pub malformed: CounterWriter,
    pub duplicates: CounterWriter,
    pub replies_dropped: CounterWriter,
    pub book_syncs: CounterWriter,
    pub book_gaps: CounterWriter,
    pub book_resyncs: CounterWriter,
    pub book_refused: CounterWriter,
    pub book_saturated: CounterWriter,
    pub book_limits: CounterWriter,
}

impl FeedWriters {
    /// Counts one message of the kind at `kind` in the venue's table (a position past the
    /// table's end counts nothing: a feed's kinds are its table's positions).
    #[inline]
    pub fn message(&mut self, kind: usize) {
        if let Some(counter) = self.messages.get_mut(kind) {
            counter.increment();
        }
    }

    /// Counts `count` messages of the kind at `kind` (see [`FeedWriters::message`]).
    #[inline]
    pub fn add_messages(&mut self, kind: usize, count: u64) {
        if let Some(counter) = self.messages.get_mut(kind) {
            counter.add(count);
        }
    }

    /// Messages of the kind at `kind` counted so far (for a feed's own tests).
    pub fn messages(&self, kind: usize) -> u64 {
        self.messages.get(kind).map_or(0, CounterWriter::get)
    }
}

/// Per venue, the events written into the event ring by kind, counted where every feed's events
/// pass (the decoder stage's [`EventSink`], which also writes the gaps and statuses no feed
/// makes). Plain counts per event, published to the control thread's readers when the sink
/// publishes the events: no shared cache line is written per event.
pub struct EventCounts {
    /// By venue id, by [`EventKind::index`]: counted since the last publication.
    pending: Box<[[u64; EventKind::COUNT]]>,
    writers: Box<[[CounterWriter; EventKind::COUNT]]>,
}

/// The control thread's side of one venue's [`EventCounts`].
pub struct VenueEvents {
    /// By [`EventKind::index`].
    counters: Box<[CounterReader]>,
}

impl VenueEvents {
    /// Events of `kind` the venue's feed (and the decoder stage on its behalf) wrote.
    pub fn get(&self, kind: EventKind) -> u64 {
        self.counters
            .get(kind.index())
            .map_or(0, CounterReader::get)
    }
}

impl EventCounts {
    /// Counts for `venues` venues (ids `0..venues`; events of other ids are not counted), and
    /// their readers by venue id.
    pub fn new(venues: usize) -> (EventCounts, Vec<VenueEvents>) {
        let mut writers = Vec::with_capacity(venues);
        let mut readers = Vec::with_capacity(venues);
        for _ in 0..venues {
            let mut counters = Vec::with_capacity(EventKind::COUNT);
            writers.push(std::array::from_fn(|_| {
                let (writer, reader) = crate::metrics::counter();
                counters.push(reader);
                writer
            }));
            readers.push(VenueEvents {
                counters: counters.into_boxed_slice(),
            });
        }
        let counts = EventCounts {
            pending: vec![[0; EventKind::COUNT]; venues].into_boxed_slice(),
            writers: writers.into_boxed_slice(),
        };
        (counts, readers)
    }

    #[inline]
    fn count(&mut self, event: &Event) {
        if let Some(slot) = self
            .pending
            .get_mut(usize::from(event.header.venue_id))
            .and_then(|venue| venue.get_mut(event.header.kind.index()))
        {
            *slot += 1;
        }
    }

    /// Publishes what was counted since the last call.
    pub fn publish(&mut self) {
        for (pending, writers) in self.pending.iter_mut().zip(self.writers.iter_mut()) {
            for (count, writer) in pending.iter_mut().zip(writers.iter_mut()) {
                if *count > 0 {
                    writer.add(std::mem::take(count));
                }
            }
        }
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

    #[test]
    fn a_counting_sink_counts_events_by_venue_and_kind_when_it_publishes() {
        let (mut producer, _consumer) = ring::<Event>(1024);
        let mut lost = false;
        let (mut counts, venues) = EventCounts::new(2);
        let mut sink = EventSink::new(&mut producer, &mut lost).counting(&mut counts);
        let quote = |venue: VenueId| {
            let mut header = event(0).header;
            header.venue_id = venue;
            Event::new(header, Body::Quote(crate::event::Quote::default()))
        };
        sink.push(quote(1));
        sink.push(quote(1));
        sink.push(event(0));
        // A venue id beyond the counted ones is written, not counted (and nothing panics).
        sink.push(quote(7));
        assert_eq!(
            venues[1].get(EventKind::Quote),
            0,
            "counted before published"
        );
        sink.publish();
        assert_eq!(venues[1].get(EventKind::Quote), 2);
        assert_eq!(venues[0].get(EventKind::Gap), 1);
        assert_eq!(venues[0].get(EventKind::Quote), 0);
        let total: u64 = venues
            .iter()
            .flat_map(|venue| EventKind::ALL.map(|kind| venue.get(kind)))
            .sum();
        assert_eq!(total, 3);
    }

    #[test]
    fn the_gap_a_full_ring_owes_is_counted_as_a_gap() {
        let (mut producer, mut consumer) = ring::<Event>(2);
        let mut lost = false;
        let (mut counts, venues) = EventCounts::new(1);
        let mut sink = EventSink::new(&mut producer, &mut lost).counting(&mut counts);
        let capacity = sink.free_slots();
        for seq in 0..capacity + 1 {
            sink.push(event(seq as u64));
        }
        sink.publish();
        assert_eq!(
            venues[0].get(EventKind::Gap),
            capacity as u64,
            "the lost one not counted"
        );
        while consumer.try_pop().is_some() {}
        let mut sink = EventSink::new(&mut producer, &mut lost).counting(&mut counts);
        sink.push(Event::new(
            event(0).header,
            Body::Quote(crate::event::Quote::default()),
        ));
        sink.publish();
        assert_eq!(
            venues[0].get(EventKind::Gap),
            capacity as u64 + 1,
            "the overflow gap"
        );
        assert_eq!(venues[0].get(EventKind::Quote), 1);
    }

    #[test]
    fn feed_counters_read_the_venues_own_message_kinds() {
        const KINDS: &[MessageKind] =
            &[MessageKind::market("bookTicker"), MessageKind::other("ack")];
        let (mut writers, counters) = FeedCounters::new(KINDS, Arc::new(StreamActivity::new(1, 1)));
        writers.message(0);
        writers.message(0);
        writers.message(1);
        // A position past the table counts nothing.
        writers.message(2);
        assert_eq!(counters.message("bookTicker"), 2);
        assert_eq!(counters.message("ack"), 1);
        assert_eq!(counters.message("depthUpdate"), 0);
        assert_eq!(counters.market_messages(), 2);
        let listed: Vec<(&str, u64)> = counters
            .messages()
            .map(|(kind, count)| (kind.name, count))
            .collect();
        assert_eq!(listed, [("bookTicker", 2), ("ack", 1)]);
    }
}
