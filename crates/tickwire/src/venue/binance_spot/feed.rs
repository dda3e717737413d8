//! The Binance Spot [`Feed`]: decoded messages become normalized events on the decoder thread,
//! and depth diffs keep one synchronised order book per symbol, with the same events the USD-M
//! feed writes.
//!
//! - bookTicker: one `Quote` (venue_seq = `u`; Spot's has no time, so `NO_EXCHANGE_TS`).
//! - trade and aggTrade: one `Trade` (venue_seq = the trade id, exchange time = `T`; aggressor
//!   `Ask` when `m`, the buyer being the maker).
//! - diff depth (`@depth`, `@depth@100ms`): through [`SpotBookSync`], which emits levels, a
//!   derived `Quote` when the top changes, snapshots and gaps (exchange time = `E`).
//! - partial depth (`@depth5`, ...): its levels as `BookLevel` events (venue_seq =
//!   `lastUpdateId`, no exchange time), no book; routed by the stream name's symbol.
//! - replies, REST bodies and events not read here (`serverShutdown`, ...): counted by kind
//!   ([`MESSAGE_KINDS`]); replies to the control thread's requests are passed on.
//! - a message that does not decode: counted, and one sample per second kept for the log.
//! - `serverShutdown` (JSON, on both the JSON and the SBE streams): the venue will close the
//!   connection; a reconnect notice to the control thread, which replaces the connection
//!   make-before-break.
//!
//! The SBE streams (`binance-spot-sbe`: `sbe-market-data-streams.md`) come as binary frames
//! ([`Feed::on_binary`], decoded in place by [`super::sbe`]) beside JSON text frames for
//! control, which [`Feed::on_message`] reads as above:
//! - `@bestBidAsk` (`BestBidAskStreamEvent`): one `Quote`, venue_seq = `bookUpdateId`, exchange
//!   time = `eventTime` (microseconds, to ns).
//! - `@trade` (`TradesStreamEvent`): one `Trade` per trade of the message.
//! - `@depth` (`DepthDiffStreamEvent`): through the same [`SpotBookSync`] as JSON diffs
//!   (`firstBookUpdateId`/`lastBookUpdateId` are `U`/`u`).
//! - `@depth20` (`DepthSnapshotStreamEvent`): its levels, as partial depth.
//! - a frame that does not decode, an unknown template id or another schema id: counted as
//!   malformed and skipped; each unknown template id is logged once, with the id. A newer
//!   version of schema 1 is decoded by its block lengths and counted (`sbe_newer_version`).

use super::decode::{self, DepthUpdate, Message, PartialDepth};
use super::sync::{DiffHeader, SpotBookSync};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, EventKind, InstrumentId, Side, Trade, VenueId,
};
use crate::net::ConnId;
use crate::venue::binance::decode::{DecodeError, Levels, TradeKind};
use crate::venue::binance::sync::{SyncConfig, SyncStats};
use crate::venue::feed::{
    EventSink, Feed, FeedCounters, FeedWriters as Writers, MalformedSample, MalformedSampler,
    MessageKind, ReplyQueue, SnapshotReply, SnapshotRequest, StreamActivity, StreamFloors,
    SymbolIndex, VenueReply,
};
use std::sync::Arc;

const NS_PER_MS: u64 = 1_000_000;

/// How a feed is set up.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    /// The venue's id in this process (its index in the appliance's venue list).
    pub venue_id: VenueId,
    /// The venue's name, for printed events.
    pub venue_name: String,
    /// Symbols as the venue spells them (upper case); a symbol's instrument id is
    /// `instrument_base` plus its index here.
    pub symbols: Vec<String>,
    /// The subscribed channels, in the venue file's order (streams are symbol × channel).
    pub channels: Vec<String>,
    pub instrument_base: InstrumentId,
    /// Whether a diff depth stream is subscribed, so the feed keeps books.
    pub books: bool,
    pub sync: SyncConfig,
}

/// The messages a Binance Spot connection carries, by their `"e"` event type where they have
/// one, as [`FeedCounters`] counts them (positions are `Kind`'s).
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("bookTicker"),
    MessageKind::market("depthUpdate"),
    MessageKind::market("trade"),
    MessageKind::market("aggTrade"),
    // `<symbol>@depth5/10/20`: `lastUpdateId`, `bids`, `asks` on a named stream.
    MessageKind::market("partialDepth"),
    // `{"result":null,"id":N}`: a SUBSCRIBE or UNSUBSCRIBE succeeded.
    MessageKind::other("ack"),
    // The LIST_SUBSCRIPTIONS answer.
    MessageKind::other("subscriptions"),
    // Any other `result` (GET_PROPERTY's).
    MessageKind::other("result"),
    // `{"error":..}` or `{"code":..,"msg":..}`: a refused request.
    MessageKind::other("error"),
    // An event this build does not read (`serverShutdown`, `avgPrice`, ...).
    MessageKind::other("unknown_event"),
    // A REST depth snapshot's body on the stream (or a raw partial depth message, which has
    // the same shape and names no symbol).
    MessageKind::other("depth_snapshot"),
    // SBE `BestBidAskStreamEvent` (`@bestBidAsk`).
    MessageKind::market("bestBidAsk"),
    // `serverShutdown`: the venue is about to close the connection.
    MessageKind::other("server_shutdown"),
    // An SBE frame of a newer version of schema 1, decoded by its block lengths.
    MessageKind::other("sbe_newer_version"),
    // An SBE frame with a template id this build does not know (also counted as malformed).
    MessageKind::other("sbe_unknown_template"),
];

/// A message's position in [`MESSAGE_KINDS`].
#[derive(Clone, Copy)]
enum Kind {
    BookTicker = 0,
    DepthUpdate = 1,
    Trade = 2,
    AggTrade = 3,
    PartialDepth = 4,
    Ack = 5,
    Subscriptions = 6,
    Result = 7,
    Error = 8,
    UnknownEvent = 9,
    DepthSnapshot = 10,
    BestBidAsk = 11,
    ServerShutdown = 12,
    SbeNewerVersion = 13,
    SbeUnknownTemplate = 14,
}

// Every `Kind` has its entry in the table (a position past it would count nothing).
const _: () = assert!(MESSAGE_KINDS.len() == Kind::SbeUnknownTemplate as usize + 1);

/// Unknown SBE template ids logged so far, at most this many (each once).
const TEMPLATES_LOGGED: usize = 8;

/// The kinds of stream a symbol can have, each mapped to its position in the venue's channels.
#[derive(Clone, Copy)]
enum StreamKind {
    BookTicker = 0,
    DiffDepth = 1,
    PartialDepth = 2,
    Trade = 3,
    AggTrade = 4,
}

const STREAM_KINDS: usize = 5;

fn channel_kind(channel: &str) -> Option<StreamKind> {
    let partial = channel
        .strip_prefix("depth")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    Some(match channel {
        // SBE's `@bestBidAsk` is JSON's bookTicker with an event time.
        "bookTicker" | "bestBidAsk" => StreamKind::BookTicker,
        "trade" => StreamKind::Trade,
        "aggTrade" => StreamKind::AggTrade,
        _ if crate::venue::binance::is_diff_depth_channel(channel) => StreamKind::DiffDepth,
        _ if partial => StreamKind::PartialDepth,
        _ => return None,
    })
}

/// Replies kept for the control thread; more than this many waiting means it is wedged.
const REPLIES_KEPT: usize = 64;

pub struct SpotFeed {
    config: FeedConfig,
    symbols: SymbolIndex,
    books: Vec<Option<SpotBookSync>>,
    writers: Writers,
    malformed: MalformedSampler,
    /// Per stream kind, its channel's position in `config.channels`.
    channel_of: [Option<usize>; STREAM_KINDS],
    /// Per stream: the duplicate filter.
    floors: StreamFloors,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    /// The unknown SBE template ids and foreign schema ids already logged (each is logged
    /// once), as `(is a schema id, id)`; `None` is a free slot.
    templates_logged: [Option<(bool, u16)>; TEMPLATES_LOGGED],
}

impl SpotFeed {
    pub fn new(config: FeedConfig) -> (SpotFeed, FeedCounters) {
        let mut channel_of = [None; STREAM_KINDS];
        for (position, channel) in config.channels.iter().enumerate() {
            if let Some(kind) = channel_kind(channel) {
                channel_of[kind as usize].get_or_insert(position);
            }
        }
        let channels = config.channels.len().max(1);
        let activity = Arc::new(StreamActivity::new(config.symbols.len(), channels));
        let (writers, counters) = FeedCounters::new(MESSAGE_KINDS, activity.clone());
        let floors = StreamFloors::new(config.symbols.len() * channels);
        let books = config
            .symbols
            .iter()
            .enumerate()
            .map(|(index, _)| {
                config.books.then(|| {
                    SpotBookSync::new(
                        config.instrument_base + index as InstrumentId,
                        config.venue_id,
                        config.sync,
                    )
                })
            })
            .collect();
        let symbols = SymbolIndex::new(&config.symbols);
        let feed = SpotFeed {
            config,
            symbols,
            books,
            writers,
            malformed: MalformedSampler::default(),
            channel_of,
            floors,
            activity: activity.clone(),
            replies: ReplyQueue::new(REPLIES_KEPT),
            templates_logged: [None; TEMPLATES_LOGGED],
        };
        (feed, counters)
    }

    /// The duplicate filter: whether message `id` of `kind` for `instrument`, received on
    /// `conn`, is new. A message whose id was delivered already (the same update from a second
    /// connection during a rotation) is dropped and counted; when the copy came from another
    /// connection than the first, both agree on that id, which the rotation switch waits for.
    #[inline]
    fn admit(
        &mut self,
        instrument: usize,
        kind: StreamKind,
        id: u64,
        conn: ConnId,
        recv_ts_ns: u64,
    ) -> bool {
        let Some(channel) = self.channel_of[kind as usize] else {
            // A stream the venue file does not subscribe: nothing to compare it with.
            return true;
        };
        let stream = instrument * self.activity.channels() + channel;
        let fresh = self
            .floors
            .admit(&self.activity, stream, id, conn, recv_ts_ns);
        if !fresh {
            self.writers.duplicates.increment();
        }
        fresh
    }

    fn reply(&mut self, reply: VenueReply) {
        if !self.replies.push(reply) {
            self.writers.replies_dropped.increment();
        }
    }

    fn header(
        &self,
        instrument: usize,
        kind: EventKind,
        exch_ms: u64,
        recv_ts_ns: u64,
        seq: u64,
    ) -> EventHeader {
        crate::venue::binance::feed::event_header(
            self.config.venue_id,
            self.config.instrument_base + instrument as InstrumentId,
            kind,
            exch_ms,
            recv_ts_ns,
            seq,
        )
    }

    fn depth(
        &mut self,
        instrument: usize,
        depth: &DepthUpdate<'_>,
        recv_ts_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let exch_ts_ns = depth.event_time_ms.saturating_mul(NS_PER_MS);
        if let Some(Some(book)) = self.books.get_mut(instrument) {
            let before = book.stats();
            let header = DiffHeader {
                first_update_id: depth.first_update_id,
                final_update_id: depth.final_update_id,
                exch_ts_ns,
                recv_ts_ns,
            };
            book.on_diff(header, depth.bids.iter(), depth.asks.iter(), &mut |event| {
                sink.push(event)
            });
            let after = book.stats();
            self.count_book(before, after);
            return;
        }
        // No book for it: the levels as they came.
        self.levels(
            instrument,
            (depth.bids, depth.asks),
            depth.event_time_ms,
            depth.final_update_id,
            recv_ts_ns,
            sink,
        );
    }

    /// A message's levels as `BookLevel` events, bids then asks, the last one flagged `LAST`.
    fn levels(
        &self,
        instrument: usize,
        (bids, asks): (Levels<'_>, Levels<'_>),
        exch_ms: u64,
        seq: u64,
        recv_ts_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let total = bids.len() + asks.len();
        let mut index = 0;
        for (side, levels) in [(Side::Bid, bids), (Side::Ask, asks)] {
            for (price, qty) in levels {
                index += 1;
                let mut header =
                    self.header(instrument, EventKind::BookLevel, exch_ms, recv_ts_ns, seq);
                if index != total {
                    header.flags &= !flags::LAST;
                }
                sink.push(Event::new(
                    header,
                    Body::BookLevel(BookLevel::new(side, price, qty)),
                ));
            }
        }
    }

    fn partial_depth(
        &self,
        instrument: usize,
        partial: &PartialDepth<'_>,
        recv_ts_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        self.levels(
            instrument,
            (partial.bids, partial.asks),
            0,
            partial.last_update_id,
            recv_ts_ns,
            sink,
        );
    }

    fn count_book(&mut self, before: SyncStats, after: SyncStats) {
        crate::venue::binance::feed::count_book(&mut self.writers, before, after);
    }

    /// An SBE frame that does not decode: counted and skipped. An unknown template id (also
    /// counted by kind) or another schema's id has its first frame offered to the log (each id
    /// once), so the log names every id this build does not know without a flood.
    fn sbe_malformed(&mut self, error: super::sbe::SbeError, payload: &[u8], recv_ts_ns: u64) {
        use super::sbe::SbeError;
        self.writers.malformed.increment();
        let once = match error {
            SbeError::UnknownTemplate { template_id } => {
                self.writers.message(Kind::SbeUnknownTemplate as usize);
                Some((false, template_id))
            }
            SbeError::SchemaMismatch { schema_id, .. } => Some((true, schema_id)),
            _ => None,
        };
        if let Some(id) = once {
            if self.templates_logged.contains(&Some(id)) {
                return;
            }
            if let Some(slot) = self.templates_logged.iter_mut().find(|slot| slot.is_none()) {
                *slot = Some(id);
                // A first sighting is logged whatever the sampler's interval (at most
                // `TEMPLATES_LOGGED` times in all).
                self.malformed
                    .offer_now(self.config.venue_id, &error, 0, payload, recv_ts_ns);
            }
            return;
        }
        self.malformed
            .offer(self.config.venue_id, &error, 0, payload, recv_ts_ns);
    }

    /// A `Quote`, `Trade`s or `BookLevel`s from one SBE frame, through the book for a diff.
    fn on_sbe(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        message: super::sbe::Message<'_>,
        sink: &mut EventSink<'_>,
    ) {
        use super::sbe::Message as Sbe;
        if message.schema_version() > super::sbe::SCHEMA_VERSION {
            self.writers.message(Kind::SbeNewerVersion as usize);
        }
        let Some(instrument) = self.symbols.find(message.symbol()) else {
            self.writers.unknown_symbol.increment();
            return;
        };
        let (kind, id, count) = match &message {
            Sbe::BestBidAsk(m) => (StreamKind::BookTicker, m.book_update_id, Kind::BestBidAsk),
            Sbe::Trades(m) => {
                // Trade ids rise within a message: its last is the message's id.
                let Some(last) = m.trades.iter().map(|trade| trade.trade_id).max() else {
                    self.writers.message(Kind::Trade as usize);
                    return;
                };
                (StreamKind::Trade, last, Kind::Trade)
            }
            Sbe::DepthDiff(m) => (StreamKind::DiffDepth, m.final_update_id, Kind::DepthUpdate),
            Sbe::DepthSnapshot(m) => (
                StreamKind::PartialDepth,
                m.book_update_id,
                Kind::PartialDepth,
            ),
        };
        if !self.admit(instrument, kind, id, conn, recv_ts_ns) {
            return;
        }
        self.writers.message(count as usize);
        if let Sbe::DepthDiff(diff) = &message {
            if let Some(Some(book)) = self.books.get_mut(instrument) {
                let before = book.stats();
                let header = DiffHeader {
                    first_update_id: diff.first_update_id,
                    final_update_id: diff.final_update_id,
                    exch_ts_ns: diff.event_time_ns,
                    recv_ts_ns,
                };
                book.on_diff(header, diff.bids.iter(), diff.asks.iter(), &mut |event| {
                    sink.push(event)
                });
                let after = book.stats();
                self.count_book(before, after);
                return;
            }
        }
        let target = super::sbe::EventTarget {
            venue_id: self.config.venue_id,
            instrument_id: self.config.instrument_base + instrument as InstrumentId,
            recv_ts_ns,
        };
        super::sbe::events(&message, target, &mut |event| sink.push(event));
    }

    fn malformed(&mut self, venue_error: DecodeError, payload: &[u8], recv_ts_ns: u64) {
        self.writers.malformed.increment();
        self.malformed.offer(
            self.config.venue_id,
            &venue_error.kind,
            venue_error.offset,
            payload,
            recv_ts_ns,
        );
    }
}

/// The index of the symbol a stream name names (`btcusdt@depth5` names `BTCUSDT`): symbols
/// are upper case in the venue file and lower case in stream names.
fn symbol_of_stream(symbols: &SymbolIndex, stream: &[u8]) -> Option<usize> {
    symbols.find_ignore_case(decode::stream_symbol(stream))
}

impl Feed for SpotFeed {
    fn on_message(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        let message = match decode::decode(payload) {
            Ok(message) => message,
            Err(error) => {
                self.malformed(error, payload, recv_ts_ns);
                return;
            }
        };
        let symbol = match &message {
            Message::BookTicker(m) => Some(m.symbol),
            Message::Depth(m) => Some(m.symbol),
            Message::Trade(m) => Some(m.symbol),
            Message::PartialDepth(_)
            | Message::DepthSnapshot(_)
            | Message::Ack { .. }
            | Message::Subscriptions { .. }
            | Message::Reply { .. }
            | Message::ErrorReply { .. }
            | Message::Unknown { .. } => None,
        };
        let found = match &message {
            Message::PartialDepth(m) => Some(symbol_of_stream(&self.symbols, m.stream)),
            _ => symbol.map(|symbol| self.symbols.find(symbol)),
        };
        let instrument = match found {
            Some(Some(instrument)) => Some(instrument),
            Some(None) => {
                self.writers.unknown_symbol.increment();
                return;
            }
            None => None,
        };
        if let Some(instrument) = instrument {
            let fresh = match &message {
                Message::BookTicker(m) => self.admit(
                    instrument,
                    StreamKind::BookTicker,
                    m.update_id,
                    conn,
                    recv_ts_ns,
                ),
                Message::Depth(m) => self.admit(
                    instrument,
                    StreamKind::DiffDepth,
                    m.final_update_id,
                    conn,
                    recv_ts_ns,
                ),
                Message::PartialDepth(m) => self.admit(
                    instrument,
                    StreamKind::PartialDepth,
                    m.last_update_id,
                    conn,
                    recv_ts_ns,
                ),
                Message::Trade(m) => {
                    let kind = match m.kind {
                        TradeKind::Trade => StreamKind::Trade,
                        TradeKind::AggTrade => StreamKind::AggTrade,
                    };
                    self.admit(instrument, kind, m.trade_id, conn, recv_ts_ns)
                }
                Message::DepthSnapshot(_)
                | Message::Ack { .. }
                | Message::Subscriptions { .. }
                | Message::Reply { .. }
                | Message::ErrorReply { .. }
                | Message::Unknown { .. } => true,
            };
            if !fresh {
                return;
            }
        }
        match (message, instrument) {
            (Message::BookTicker(ticker), Some(instrument)) => {
                self.writers.message(Kind::BookTicker as usize);
                let header = self.header(
                    instrument,
                    EventKind::Quote,
                    // Spot's bookTicker carries no time.
                    0,
                    recv_ts_ns,
                    ticker.update_id,
                );
                sink.push(Event::new(
                    header,
                    Body::Quote(crate::event::Quote {
                        bid_px: ticker.bid_px,
                        bid_sz: ticker.bid_qty,
                        ask_px: ticker.ask_px,
                        ask_sz: ticker.ask_qty,
                    }),
                ));
            }
            (Message::Trade(trade), Some(instrument)) => {
                self.writers.message(match trade.kind {
                    TradeKind::Trade => Kind::Trade as usize,
                    TradeKind::AggTrade => Kind::AggTrade as usize,
                });
                let header = self.header(
                    instrument,
                    EventKind::Trade,
                    trade.trade_time_ms,
                    recv_ts_ns,
                    trade.trade_id,
                );
                let aggressor = if trade.buyer_is_maker {
                    Side::Ask
                } else {
                    Side::Bid
                };
                sink.push(Event::new(
                    header,
                    Body::Trade(Trade::new(
                        trade.price,
                        trade.qty,
                        trade.trade_id,
                        aggressor,
                    )),
                ));
            }
            (Message::Depth(depth), Some(instrument)) => {
                self.writers.message(Kind::DepthUpdate as usize);
                self.depth(instrument, &depth, recv_ts_ns, sink);
            }
            (Message::PartialDepth(partial), Some(instrument)) => {
                self.writers.message(Kind::PartialDepth as usize);
                self.partial_depth(instrument, &partial, recv_ts_ns, sink);
            }
            // Every market message names a symbol, and one the feed does not list returned
            // above: these cannot happen, and would be a symbol the feed cannot route.
            (
                Message::BookTicker(_)
                | Message::Depth(_)
                | Message::Trade(_)
                | Message::PartialDepth(_),
                None,
            ) => self.writers.unknown_symbol.increment(),
            (Message::ErrorReply { id, code, msg }, _) => {
                self.writers.message(Kind::Error as usize);
                if let Some(id) = id {
                    self.reply(VenueReply::new(self.config.venue_id, id, Some(code), msg));
                }
            }
            (
                Message::Unknown {
                    event_type: b"serverShutdown",
                    ..
                },
                _,
            ) => {
                // "Please establish a new connection as soon as possible": make-before-break.
                self.writers.message(Kind::ServerShutdown as usize);
                self.reply(VenueReply::reconnect_notice(self.config.venue_id, conn));
            }
            (Message::Unknown { .. }, _) => self.writers.message(Kind::UnknownEvent as usize),
            (Message::Ack { id }, _) => {
                self.writers.message(Kind::Ack as usize);
                if let Some(id) = id {
                    self.reply(VenueReply::new(self.config.venue_id, id, None, b""));
                }
            }
            (Message::Subscriptions { .. }, _) => {
                self.writers.message(Kind::Subscriptions as usize)
            }
            (Message::Reply { .. }, _) => self.writers.message(Kind::Result as usize),
            (Message::DepthSnapshot(_), _) => self.writers.message(Kind::DepthSnapshot as usize),
        }
    }

    /// A binary frame: one SBE market-data message.
    fn on_binary(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        match super::sbe::decode(payload) {
            Ok(message) => self.on_sbe(conn, recv_ts_ns, message, sink),
            Err(error) => self.sbe_malformed(error, payload, recv_ts_ns),
        }
    }

    fn on_snapshot(&mut self, reply: SnapshotReply, now_ns: u64, sink: &mut EventSink<'_>) {
        let index = reply.instrument.wrapping_sub(self.config.instrument_base) as usize;
        let Some(Some(book)) = self.books.get_mut(index) else {
            return;
        };
        let before = book.stats();
        match reply.result {
            Ok(snapshot) => book.on_snapshot(
                snapshot.sequence,
                snapshot.bids.iter().copied(),
                snapshot.asks.iter().copied(),
                reply.recv_ts_ns,
                &mut |event| sink.push(event),
            ),
            Err(_) => book.on_snapshot_failed(now_ns),
        }
        let after = book.stats();
        self.count_book(before, after);
    }

    fn snapshot_events(&self, reply: &SnapshotReply) -> usize {
        // The snapshot's levels between its begin and end markers and the quote after it, then
        // each buffered diff replayed: one event per level and a quote.
        const AROUND: usize = 4;
        let levels = reply
            .result
            .as_ref()
            .map_or(0, |snapshot| snapshot.bids.len() + snapshot.asks.len());
        let index = reply.instrument.wrapping_sub(self.config.instrument_base) as usize;
        let buffered = self
            .books
            .get(index)
            .and_then(Option::as_ref)
            .map_or(0, |book| book.buffered_levels() + book.buffered_diffs());
        levels + buffered + AROUND
    }

    fn snapshot_requests(&mut self, now_ns: u64, request: &mut dyn FnMut(SnapshotRequest)) {
        let venue = self.config.venue_id;
        for book in self.books.iter_mut().flatten() {
            if let Some(wanted) = book.snapshot_request(now_ns) {
                request(SnapshotRequest {
                    venue,
                    instrument: wanted.instrument_id,
                });
            }
        }
    }

    fn on_disconnect(
        &mut self,
        _conn: ConnId,
        instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let base = self.config.instrument_base;
        for instrument in instruments {
            let index = instrument.wrapping_sub(base) as usize;
            if index >= self.books.len() {
                continue;
            }
            let before = self.books[index].as_ref().map(SpotBookSync::stats);
            match self.books[index].as_mut() {
                // The book emits the gap and resynchronises.
                Some(book) => book.on_disconnect(now_ns, &mut |event| sink.push(event)),
                None => sink.push(crate::venue::feed::reconnect_gap(
                    self.config.venue_id,
                    instrument,
                    now_ns,
                )),
            }
            if let (Some(before), Some(book)) = (before, self.books[index].as_ref()) {
                let after = book.stats();
                self.count_book(before, after);
            }
        }
    }

    fn take_malformed(&mut self) -> Option<MalformedSample> {
        self.malformed.take()
    }

    fn take_reply(&mut self) -> Option<VenueReply> {
        self.replies.pop()
    }

    fn book_events(&self, instrument: InstrumentId) -> usize {
        instrument
            .checked_sub(self.config.instrument_base)
            .and_then(|index| self.books.get(index as usize))
            .and_then(Option::as_ref)
            .filter(|sync| sync.is_live())
            .map_or(0, |sync| crate::venue::emit::order_book_events(sync.book()))
    }

    fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) -> usize {
        let base = self.config.instrument_base;
        let selected = crate::venue::emit::selected_books(instrument, base, self.books.len());
        let books = self.books.get(selected.clone()).unwrap_or_default();
        let books = books.iter().zip(selected).map(|(sync, index)| {
            let book = sync
                .as_ref()
                .filter(|sync| sync.is_live())
                .map(|sync| (sync.book(), sync.last_update_id().unwrap_or(0)));
            (base + index as InstrumentId, book)
        });
        crate::venue::emit::order_books_snapshot(
            self.config.venue_id,
            instrument,
            now_ns,
            books,
            &mut |event| sink.push(event),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spot_messages_become_the_usdm_events_and_replies_go_through_the_shared_queues() {
        let (mut feed, counters) = SpotFeed::new(FeedConfig {
            venue_id: 2,
            venue_name: "spot".to_owned(),
            symbols: vec!["BTCUSDT".to_owned()],
            channels: vec!["bookTicker".to_owned(), "depth5@100ms".to_owned()],
            instrument_base: 10,
            books: false,
            sync: SyncConfig::default(),
        });
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        let ticker = br#"{"stream":"btcusdt@bookTicker","data":{"u":50093239212,"s":"BTCUSDT","b":"61837.63000000","B":"3.78826000","a":"61837.64000000","A":"1.54698000"}}"#;
        let second = 2_000_000_000;
        feed.on_message(0, second, ticker, &mut sink);
        // The same update from a second connection: a duplicate.
        feed.on_message(1, second, ticker, &mut sink);
        let partial = br#"{"stream":"btcusdt@depth5@100ms","data":{"lastUpdateId":160,"bids":[["0.0024","10"]],"asks":[["0.0026","100"]]}}"#;
        feed.on_message(0, second, partial, &mut sink);
        feed.on_message(0, second, br#"{"result":null,"id":7}"#, &mut sink);
        feed.on_message(
            0,
            second,
            br#"{"code":2,"msg":"Invalid request: too many parameters","id":8}"#,
            &mut sink,
        );
        feed.on_message(
            0,
            second,
            br#"{"e":"serverShutdown","E":1770123456789}"#,
            &mut sink,
        );
        feed.on_message(
            0,
            second,
            br#"{"u":1,"s":"ETHUSDT","b":"1","B":"1","a":"1","A":"1"}"#,
            &mut sink,
        );
        feed.on_message(0, second, br#"{"u":1,"s":"BTCUSDT""#, &mut sink);
        sink.publish();
        assert_eq!(counters.message("bookTicker"), 1);
        assert_eq!(counters.message("partialDepth"), 1);
        assert_eq!(counters.duplicates.get(), 1);
        assert_eq!(counters.message("ack"), 1);
        assert_eq!(counters.message("error"), 1);
        assert_eq!(counters.message("server_shutdown"), 1);
        assert_eq!(counters.unknown_symbol.get(), 1);
        assert_eq!(counters.malformed.get(), 1);
        let quote = consumer.try_pop().expect("the quote");
        assert_eq!(quote.header.venue_seq, 50093239212);
        assert_eq!(quote.header.instrument_id, 10);
        assert_ne!(quote.header.flags & flags::NO_EXCHANGE_TS, 0);
        let Body::Quote(body) = quote.body() else {
            panic!("a quote");
        };
        assert_eq!(
            body.ask_sz,
            crate::fixed::Fixed::parse_str("1.54698").unwrap()
        );
        let bid = consumer.try_pop().expect("the partial depth's bid");
        assert_eq!(bid.header.venue_seq, 160);
        assert_eq!(bid.header.flags & flags::LAST, 0);
        let ask = consumer.try_pop().expect("the partial depth's ask");
        assert_ne!(ask.header.flags & flags::LAST, 0);
        assert!(consumer.try_pop().is_none());
        let ack = feed.take_reply().expect("the ack is passed on");
        assert_eq!((ack.id, ack.error), (7, None));
        let refusal = feed.take_reply().expect("the refusal is passed on");
        assert_eq!((refusal.id, refusal.error), (8, Some(2)));
        let shutdown = feed
            .take_reply()
            .expect("serverShutdown asks for a new connection");
        assert_eq!(
            shutdown.kind,
            crate::venue::feed::ReplyKind::ReconnectNotice
        );
        assert!(feed.take_malformed().is_some());
    }

    /// SBE frames (laid out as the schema says: header, block, groups, symbol) become
    /// the same events as the JSON messages; a diff goes through the book; an unknown template
    /// is malformed, counted by kind and logged once with its id.
    #[test]
    fn sbe_frames_become_the_same_events_and_unknown_templates_are_logged_once() {
        use crate::venue::binance_spot::sbe;
        let (mut feed, counters) = SpotFeed::new(FeedConfig {
            venue_id: 1,
            venue_name: "sbe".to_owned(),
            symbols: vec!["BTCUSDT".to_owned()],
            channels: vec!["bestBidAsk".to_owned(), "depth".to_owned()],
            instrument_base: 0,
            books: true,
            sync: SyncConfig::default(),
        });
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        // BestBidAskStreamEvent (10001): eventTime, bookUpdateId, priceExponent,
        // qtyExponent, bid price, bid qty, ask price, ask qty; then the symbol.
        let mut frame = Vec::new();
        for value in [50u16, sbe::BEST_BID_ASK_TEMPLATE_ID, sbe::SCHEMA_ID, 0] {
            frame.extend_from_slice(&value.to_le_bytes());
        }
        frame.extend_from_slice(&1_700_000_000_000_000i64.to_le_bytes());
        frame.extend_from_slice(&42i64.to_le_bytes());
        frame.extend_from_slice(&[(-2i8) as u8, (-8i8) as u8]);
        for mantissa in [6_180_020i64, 250_700_000, 6_180_030, 251_000_000] {
            frame.extend_from_slice(&mantissa.to_le_bytes());
        }
        frame.push(7);
        frame.extend_from_slice(b"BTCUSDT");
        feed.on_binary(3, 5, &frame, &mut sink);
        // The same update again: a duplicate.
        feed.on_binary(4, 6, &frame, &mut sink);
        let mut unknown = frame.clone();
        unknown[2..4].copy_from_slice(&10_099u16.to_le_bytes());
        feed.on_binary(3, 7, &unknown, &mut sink);
        let logged = feed
            .take_malformed()
            .expect("the unknown template is logged");
        feed.on_binary(3, 8, &unknown, &mut sink);
        assert!(feed.take_malformed().is_none(), "each id once");
        let mut foreign = frame.clone();
        foreign[4..6].copy_from_slice(&7u16.to_le_bytes());
        feed.on_binary(3, 9, &foreign, &mut sink);
        let schema = feed.take_malformed().expect("another schema is logged");
        assert!(schema.error().contains("schema 7"), "{}", schema.error());
        feed.on_binary(3, 10, &foreign, &mut sink);
        assert!(feed.take_malformed().is_none(), "each schema id once");
        feed.on_binary(3, 11, &frame[..20], &mut sink);
        sink.publish();
        assert!(logged.error().contains("10099"), "{}", logged.error());
        assert_eq!(counters.message("bestBidAsk"), 1);
        assert_eq!(counters.duplicates.get(), 1);
        assert_eq!(counters.message("sbe_unknown_template"), 2);
        assert_eq!(
            counters.malformed.get(),
            5,
            "two unknown templates, two foreign schemas, one truncated"
        );
        let quote = consumer.try_pop().expect("the quote");
        assert_eq!(quote.header.venue_seq, 42);
        assert_eq!(quote.header.exchange_ts_ns, 1_700_000_000_000_000_000);
        let Body::Quote(body) = quote.body() else {
            panic!("a quote");
        };
        assert_eq!(
            body.bid_px,
            crate::fixed::Fixed::parse_str("61800.20").unwrap()
        );
        assert_eq!(body.ask_sz, crate::fixed::Fixed::parse_str("2.51").unwrap());
        assert!(consumer.try_pop().is_none());
    }
}
