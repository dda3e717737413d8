//! The Binance USDⓈ-M Futures [`Feed`]: decoded messages become normalized events on the decoder
//! thread, and depth diffs keep one synchronised order book per symbol.
//!
//! - bookTicker: one `Quote` (venue_seq = `u`, exchange time = `T`).
//! - trade and aggTrade: one `Trade` (venue_seq = the trade id; aggressor `Ask` when `m`, the
//!   buyer being the maker).
//! - diff depth (`@depth`, `@depth@100ms`, ...): through [`BookSync`], which emits levels, a
//!   derived `Quote` (flag `DERIVED`) when the top changes, snapshots and gaps.
//! - partial depth (`@depth5`, ...): its levels as `BookLevel` events, no book (each message
//!   carries the top levels whole).
//! - markPriceUpdate: a `Reference` mark and a `Reference` index.
//! - replies and unknown event types: counted by kind ([`MESSAGE_KINDS`]); replies to the
//!   control thread's requests are passed on.
//! - a message that does not decode: counted, and one sample per second kept for the log.

use super::decode::{self, DepthUpdate, Message};
use super::sync::{BookSync, DiffHeader, SyncConfig};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, EventKind, InstrumentId, Reference, ReferenceKind,
    Side, Trade, VenueId,
};
use crate::net::ConnId;
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

/// The messages a Binance USDⓈ-M Futures connection carries, by their `"e"` event type where
/// they have one, as [`FeedCounters`] counts them (positions are [`Kind`]'s).
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("bookTicker"),
    MessageKind::market("depthUpdate"),
    MessageKind::market("trade"),
    MessageKind::market("aggTrade"),
    MessageKind::market("markPriceUpdate"),
    // `{"result":null,"id":N}`: a SUBSCRIBE or UNSUBSCRIBE succeeded.
    MessageKind::other("ack"),
    // The LIST_SUBSCRIPTIONS answer.
    MessageKind::other("subscriptions"),
    // Any other `result` (GET_PROPERTY's).
    MessageKind::other("result"),
    // `{"error":..}` or `{"code":..,"msg":..}`: a refused request.
    MessageKind::other("error"),
    // A market event whose `"e"` this build does not know.
    MessageKind::other("unknown_event"),
    // A REST depth snapshot's body on the stream: not the stream's to carry.
    MessageKind::other("depth_snapshot"),
];

/// A message's position in [`MESSAGE_KINDS`].
#[derive(Clone, Copy)]
enum Kind {
    BookTicker = 0,
    DepthUpdate = 1,
    Trade = 2,
    AggTrade = 3,
    MarkPriceUpdate = 4,
    Ack = 5,
    Subscriptions = 6,
    Result = 7,
    Error = 8,
    UnknownEvent = 9,
    DepthSnapshot = 10,
}

// Every `Kind` has its entry in the table (a position past it would count nothing).
const _: () = assert!(MESSAGE_KINDS.len() == Kind::DepthSnapshot as usize + 1);

/// The kinds of stream a symbol can have, each mapped to its position in the venue's channels.
#[derive(Clone, Copy)]
enum StreamKind {
    BookTicker = 0,
    DiffDepth = 1,
    PartialDepth = 2,
    Trade = 3,
    AggTrade = 4,
    MarkPrice = 5,
}

const STREAM_KINDS: usize = 6;

fn channel_kind(channel: &str) -> Option<StreamKind> {
    let partial = channel
        .strip_prefix("depth")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    Some(match channel {
        "bookTicker" => StreamKind::BookTicker,
        "trade" => StreamKind::Trade,
        "aggTrade" => StreamKind::AggTrade,
        _ if crate::venue::binance::is_diff_depth_channel(channel) => StreamKind::DiffDepth,
        _ if partial => StreamKind::PartialDepth,
        _ if channel.starts_with("markPrice") => StreamKind::MarkPrice,
        _ => return None,
    })
}

/// Replies kept for the control thread; more than this many waiting means it is wedged.
const REPLIES_KEPT: usize = 64;

pub struct BinanceFeed {
    config: FeedConfig,
    symbols: SymbolIndex,
    books: Vec<Option<BookSync>>,
    writers: Writers,
    malformed: MalformedSampler,
    /// Per stream kind, its channel's position in `config.channels`.
    channel_of: [Option<usize>; STREAM_KINDS],
    /// Per stream: the duplicate filter.
    floors: StreamFloors,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    /// The connections (slots) that have delivered a diff depth message: the ones whose loss
    /// breaks a book. A slot serves one shard for good, so this only grows, to at most the
    /// venue's slots. Since the 2026 split, quotes and depth come on `/public` and aggregated
    /// trades and marks on `/market`: a `/market` connection that drops leaves the books alone.
    book_conns: Vec<ConnId>,
}

impl BinanceFeed {
    pub fn new(config: FeedConfig) -> (BinanceFeed, FeedCounters) {
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
                    BookSync::new(
                        config.instrument_base + index as InstrumentId,
                        config.venue_id,
                        config.sync,
                    )
                })
            })
            .collect();
        let symbols = SymbolIndex::new(&config.symbols);
        let feed = BinanceFeed {
            config,
            symbols,
            books,
            writers,
            malformed: MalformedSampler::default(),
            channel_of,
            floors,
            activity: activity.clone(),
            replies: ReplyQueue::new(REPLIES_KEPT),
            book_conns: Vec::with_capacity(8),
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
        event_header(
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
        let partial = depth.stream.is_some_and(is_partial_depth_stream);
        if let (false, Some(Some(book))) = (partial, self.books.get_mut(instrument)) {
            let before = book.stats();
            let header = DiffHeader {
                first_update_id: depth.first_update_id,
                final_update_id: depth.final_update_id,
                prev_final_update_id: depth.prev_final_update_id,
                exch_ts_ns: depth.transaction_time_ms.saturating_mul(NS_PER_MS),
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
        let total = depth.bids.len() + depth.asks.len();
        let mut index = 0;
        let sides = [(Side::Bid, depth.bids), (Side::Ask, depth.asks)];
        for (side, levels) in sides {
            for (price, qty) in levels {
                index += 1;
                let mut header = self.header(
                    instrument,
                    EventKind::BookLevel,
                    depth.transaction_time_ms,
                    recv_ts_ns,
                    depth.final_update_id,
                );
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

    fn count_book(&mut self, before: super::sync::SyncStats, after: super::sync::SyncStats) {
        count_book(&mut self.writers, before, after);
    }

    fn malformed(&mut self, venue_error: decode::DecodeError, payload: &[u8], recv_ts_ns: u64) {
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

/// `btcusdt@depth5`, `btcusdt@depth20@100ms`: a partial book stream (a digit after `@depth`).
fn is_partial_depth_stream(stream: &[u8]) -> bool {
    stream
        .windows(6)
        .position(|window| window == b"@depth")
        .and_then(|at| stream.get(at + 6))
        .is_some_and(u8::is_ascii_digit)
}

impl Feed for BinanceFeed {
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
            Message::MarkPrice(m) => Some(m.symbol),
            Message::DepthSnapshot(_)
            | Message::Ack { .. }
            | Message::Subscriptions { .. }
            | Message::Reply { .. }
            | Message::ErrorReply { .. }
            | Message::Unknown { .. } => None,
        };
        let instrument = match symbol.map(|symbol| self.symbols.find(symbol)) {
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
                Message::Depth(m) => {
                    let kind = if m.stream.is_some_and(is_partial_depth_stream) {
                        StreamKind::PartialDepth
                    } else {
                        if !self.book_conns.contains(&conn) {
                            self.book_conns.push(conn);
                        }
                        StreamKind::DiffDepth
                    };
                    self.admit(instrument, kind, m.final_update_id, conn, recv_ts_ns)
                }
                Message::Trade(m) => {
                    let kind = match m.kind {
                        decode::TradeKind::Trade => StreamKind::Trade,
                        decode::TradeKind::AggTrade => StreamKind::AggTrade,
                    };
                    self.admit(instrument, kind, m.trade_id, conn, recv_ts_ns)
                }
                Message::MarkPrice(m) => self.admit(
                    instrument,
                    StreamKind::MarkPrice,
                    m.event_time_ms,
                    conn,
                    recv_ts_ns,
                ),
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
                    ticker.transaction_time_ms,
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
                    decode::TradeKind::Trade => Kind::Trade as usize,
                    decode::TradeKind::AggTrade => Kind::AggTrade as usize,
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
            (Message::MarkPrice(mark), Some(instrument)) => {
                self.writers.message(Kind::MarkPriceUpdate as usize);
                let mut header = self.header(
                    instrument,
                    EventKind::Reference,
                    mark.event_time_ms,
                    recv_ts_ns,
                    mark.event_time_ms,
                );
                header.flags &= !flags::LAST;
                sink.push(Event::new(
                    header,
                    Body::Reference(Reference::new(ReferenceKind::Mark, mark.mark_price)),
                ));
                header.flags |= flags::LAST;
                sink.push(Event::new(
                    header,
                    Body::Reference(Reference::new(ReferenceKind::Index, mark.index_price)),
                ));
            }
            // Every market message names a symbol, and one the feed does not list returned
            // above: these cannot happen, and would be a symbol the feed cannot route.
            (
                Message::BookTicker(_)
                | Message::Depth(_)
                | Message::Trade(_)
                | Message::MarkPrice(_),
                None,
            ) => self.writers.unknown_symbol.increment(),
            (Message::ErrorReply { id, code, msg }, _) => {
                self.writers.message(Kind::Error as usize);
                if let Some(id) = id {
                    self.reply(VenueReply::new(self.config.venue_id, id, Some(code), msg));
                }
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

    /// A book breaks only with the connection that carries its depth; an instrument without a
    /// book gets a reconnect gap from any of its connections.
    fn on_disconnect(
        &mut self,
        conn: ConnId,
        instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let base = self.config.instrument_base;
        let carries_books = self.book_conns.contains(&conn);
        for instrument in instruments {
            let index = instrument.wrapping_sub(base) as usize;
            if index >= self.books.len() {
                continue;
            }
            if self.books[index].is_some() && !carries_books {
                // Another connection's streams (trades, marks) dropped: the book, on its own
                // connection, is whole; the shard's `Disconnected` status says what stopped.
                continue;
            }
            let before = self.books[index].as_ref().map(BookSync::stats);
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

/// A Binance event's header (USD-M and Spot): times from the venue's milliseconds (0: none,
/// flagged `NO_EXCHANGE_TS`), flagged `LAST`.
pub(crate) fn event_header(
    venue_id: VenueId,
    instrument_id: InstrumentId,
    kind: EventKind,
    exch_ms: u64,
    recv_ts_ns: u64,
    seq: u64,
) -> EventHeader {
    EventHeader {
        exchange_ts_ns: exch_ms.saturating_mul(NS_PER_MS),
        recv_ts_ns,
        venue_seq: seq,
        instrument_id,
        venue_id,
        kind,
        flags: flags::LAST
            | if exch_ms == 0 {
                flags::NO_EXCHANGE_TS
            } else {
                0
            },
    }
}

/// Adds what a book's sync did between `before` and `after` (gaps, resyncs, syncs) to the
/// feed's counters (USD-M and Spot). Rare events: most diffs change none of these, and then
/// nothing is stored.
pub(crate) fn count_book(
    writers: &mut Writers,
    before: super::sync::SyncStats,
    after: super::sync::SyncStats,
) {
    let pairs = [
        (
            &mut writers.book_gaps,
            after.gaps.saturating_sub(before.gaps),
        ),
        (
            &mut writers.book_resyncs,
            after.resyncs.saturating_sub(before.resyncs),
        ),
        (
            &mut writers.book_syncs,
            after.syncs.saturating_sub(before.syncs),
        ),
    ];
    for (writer, added) in pairs {
        if added > 0 {
            writer.add(added);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_by_binance_kind_and_replies_and_samples_go_through_the_shared_queues() {
        let (mut feed, counters) = BinanceFeed::new(FeedConfig {
            venue_id: 2,
            venue_name: "binance".to_owned(),
            symbols: vec!["BTCUSDT".to_owned()],
            channels: vec!["bookTicker".to_owned()],
            instrument_base: 0,
            books: false,
            sync: SyncConfig::default(),
        });
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        let ticker = br#"{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313}}"#;
        let second = 2_000_000_000;
        feed.on_message(0, second, ticker, &mut sink);
        // The same update again (a second connection's copy): a duplicate, not a bookTicker.
        feed.on_message(1, second, ticker, &mut sink);
        feed.on_message(0, second, br#"{"result":null,"id":7}"#, &mut sink);
        feed.on_message(
            0,
            second,
            br#"{"error":{"code":2,"msg":"Invalid request"},"id":8}"#,
            &mut sink,
        );
        feed.on_message(0, second, br#"{"e":"trade""#, &mut sink);
        feed.on_message(0, second + 1, br#"{"e":"trade""#, &mut sink);
        sink.publish();
        assert_eq!(counters.message("bookTicker"), 1);
        assert_eq!(counters.duplicates.get(), 1);
        assert_eq!(counters.message("ack"), 1);
        assert_eq!(counters.message("error"), 1);
        assert_eq!(counters.malformed.get(), 2);
        assert_eq!(counters.market_messages(), 1);
        assert!(matches!(
            consumer.try_pop().map(|e| e.body()),
            Some(Body::Quote(_))
        ));
        let ack = feed.take_reply().expect("the ack is passed on");
        assert_eq!((ack.id, ack.error), (7, None));
        let refusal = feed.take_reply().expect("the refusal is passed on");
        assert_eq!((refusal.id, refusal.error), (8, Some(2)));
        assert!(feed.take_reply().is_none());
        assert!(feed.take_malformed().is_some());
        assert!(
            feed.take_malformed().is_none(),
            "one sample a second, the second malformed message within it"
        );
    }

    /// Since the 2026 split, depth comes on a `/public` connection and aggregated trades on a
    /// `/market` one: losing the `/market` connection must leave the book alone (no gap, no
    /// resync), losing the `/public` one must break it.
    #[test]
    fn only_the_connection_that_carries_the_depth_breaks_the_book() {
        let (mut feed, counters) = BinanceFeed::new(FeedConfig {
            venue_id: 0,
            venue_name: "binance".to_owned(),
            symbols: vec!["BTCUSDT".to_owned()],
            channels: vec!["depth@100ms".to_owned(), "aggTrade".to_owned()],
            instrument_base: 0,
            books: true,
            sync: SyncConfig::default(),
        });
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        let (public, market) = (0, 2);
        let depth = br#"{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1,"T":1,"s":"BTCUSDT","U":10,"u":12,"pu":9,"b":[["61800.20","1.5"]],"a":[]}}"#;
        let agg = br#"{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":2,"s":"BTCUSDT","a":7,"p":"61800.30","q":"0.010","nq":"0.010","f":1,"l":2,"T":2,"m":true}}"#;
        feed.on_message(public, 1, depth, &mut sink);
        feed.on_message(market, 2, agg, &mut sink);
        feed.on_disconnect(market, 0..1, 3, &mut sink);
        sink.publish();
        let mut gaps = 0;
        while let Some(event) = consumer.try_pop() {
            gaps += usize::from(matches!(event.body(), Body::Gap(_)));
        }
        assert_eq!(gaps, 0, "the /market connection carries no book");
        assert_eq!(counters.message("aggTrade"), 1);
        feed.on_disconnect(public, 0..1, 4, &mut sink);
        sink.publish();
        let gap = consumer
            .try_pop()
            .expect("the /public connection's loss is a gap");
        assert!(matches!(gap.body(), Body::Gap(_)), "{gap:?}");
    }
}
