//! The Bybit feed: each message decoded in place ([`super::decode`]), routed by its topic to
//! the stream it belongs to, and written as normalized events.
//!
//! **Routes.** Every stream (symbol × channel) is one topic, `{channel}.{symbol}`; a table
//! built once maps the topic's bytes to its instrument and stream (a hash of the name, no
//! lock, allocation or copy). A topic the table does not hold (a symbol not subscribed) is
//! counted as `unknown_symbol`; a topic of a kind the decoder does not read as `other_topic`.
//!
//! **Two connections at once** (a rotation): each stream has an owner connection, the first to
//! deliver it; another connection's messages are dropped as duplicates, except a book
//! snapshot, which takes the book over whole (and marks the stream agreed, which the rotation
//! waits for). When the owner drops, the stream is free again.
//!
//! **Books** follow [`super::book`]; a break asks the control side for the topic afresh
//! ([`VenueReply::resubscribe`]: Bybit's `unsubscribe` then `subscribe`, whose new snapshot
//! rebuilds the book).
//!
//! **Tickers** (linear: a snapshot, then deltas that carry only the changed fields) are merged
//! per instrument; a delta before the first snapshot is dropped (counted as a duplicate: its
//! fields mean nothing without the rest). After each message: the best bid and offer as a
//! `Quote` (from the merged fields) when the message carried any of them, `markPrice` and
//! `indexPrice` as `Reference` events when it carried them. `fundingRate` and `openInterest`
//! are merged but not published: the event model has no kind for a funding rate, and
//! `Statistic`'s quantity is whole units while Bybit's open interest is fractional.
//!
//! **Trades** carry `i` as [`super::decode::trade_id`] reads it, `seq` as `venue_seq`, `T` as
//! the exchange time, and `S` as the aggressor (the taker's side).
//!
//! **Liquidations** (`allLiquidation`, linear only) are `Liquidation` events: `S` is the side of
//! the liquidated position (`Buy`: a long was liquidated, [`Side::Bid`]), `p` the bankruptcy
//! price, `v` the size, `T` the exchange time; `venue_seq` is 0 (Bybit numbers none).

use super::book::{Applied, BookSync};
use super::decode::{self, Message, Scratch, TickerFields, TopicKind};
use crate::event::{
    flags, Body, Event, EventHeader, EventKind, InstrumentId, Liquidation, Quote, Reference,
    ReferenceKind, Side, Trade, VenueId,
};
use crate::fixed::Fixed;
use crate::hash::BuildFastHasher;
use crate::net::ConnId;
use crate::venue::emit::Emitter;
use crate::venue::feed::{
    EventSink, Feed, FeedCounters, FeedWriters, MalformedSample, MalformedSampler, MessageKind,
    ReplyQueue, StreamActivity, VenueReply,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Replies kept for the control thread; more than this many waiting means it is wedged.
const REPLIES_KEPT: usize = 64;
/// Levels a book holds per side before it grows (orderbook.1000 sends 1000).
const BOOK_LEVELS: usize = 1024;
const NO_CONN: ConnId = ConnId::MAX;

/// Bybit's answers carry no error code: a refusal (`"success":false`) is relayed with this one,
/// its `ret_msg` as the text.
pub const REFUSED: i64 = -1;

/// The messages a Bybit connection carries, as [`FeedCounters`] counts them (positions are
/// [`Kind`]'s).
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("orderbook"),
    MessageKind::market("publicTrade"),
    MessageKind::market("tickers"),
    MessageKind::market("allLiquidation"),
    // A `subscribe` or `unsubscribe` answer with `"success":true`.
    MessageKind::other("answer"),
    // An answer with `"success":false`: the venue refused a request.
    MessageKind::other("refused"),
    // The answer to the `ping` op.
    MessageKind::other("pong"),
    // A topic this build does not read (`system.status`, another category's).
    MessageKind::other("other_topic"),
];

const _: () = assert!(MESSAGE_KINDS.len() == Kind::OtherTopic as usize + 1);

#[derive(Clone, Copy)]
enum Kind {
    Orderbook = 0,
    PublicTrade = 1,
    Tickers = 2,
    AllLiquidation = 3,
    Answer = 4,
    Refused = 5,
    Pong = 6,
    OtherTopic = 7,
}

/// How a Bybit feed is set up.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    pub venue_id: VenueId,
    pub venue_name: String,
    /// Symbols; an instrument's id is `instrument_base` plus its index here.
    pub symbols: Vec<String>,
    /// Channels (`orderbook.50`, `publicTrade`, `tickers`, `allLiquidation`), as the config
    /// checked them.
    pub channels: Vec<String>,
    pub instrument_base: InstrumentId,
}

#[derive(Clone, Copy, Debug)]
struct Target {
    instrument: usize,
    stream: usize,
}

/// A ticker's fields merged over its deltas.
#[derive(Clone, Copy, Debug, Default)]
struct TickerState {
    /// A snapshot was merged since the stream (re)started.
    synced: bool,
    bid_px: Option<Fixed>,
    bid_sz: Option<Fixed>,
    ask_px: Option<Fixed>,
    ask_sz: Option<Fixed>,
    mark: Option<Fixed>,
    index: Option<Fixed>,
    funding_rate: Option<Fixed>,
    open_interest: Option<Fixed>,
}

impl TickerState {
    fn merge(&mut self, fields: &TickerFields) {
        self.bid_px = fields.bid1_price.over(self.bid_px);
        self.bid_sz = fields.bid1_size.over(self.bid_sz);
        self.ask_px = fields.ask1_price.over(self.ask_px);
        self.ask_sz = fields.ask1_size.over(self.ask_sz);
        self.mark = fields.mark_price.over(self.mark);
        self.index = fields.index_price.over(self.index);
        self.funding_rate = fields.funding_rate.over(self.funding_rate);
        self.open_interest = fields.open_interest.over(self.open_interest);
    }
}

/// The merged ticker of an instrument, as `tickwire decode` and tests read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergedTicker {
    pub bid_px: Option<Fixed>,
    pub bid_sz: Option<Fixed>,
    pub ask_px: Option<Fixed>,
    pub ask_sz: Option<Fixed>,
    pub mark: Option<Fixed>,
    pub index: Option<Fixed>,
    pub funding_rate: Option<Fixed>,
    pub open_interest: Option<Fixed>,
}

pub struct BybitFeed {
    config: FeedConfig,
    routes: HashMap<Box<[u8]>, Target, BuildFastHasher>,
    /// Per stream: the connection whose messages pass.
    owners: Vec<ConnId>,
    /// Per instrument, when a book channel is subscribed.
    books: Vec<Option<BookSync>>,
    /// The book channel's position among the channels, if one is subscribed.
    book_channel: Option<usize>,
    tickers: Vec<TickerState>,
    scratch: Scratch,
    writers: FeedWriters,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    malformed: MalformedSampler,
}

/// The topic of a market data message (`tickwire decode`'s first pass), `None` for an answer
/// or a message that does not decode.
pub fn topic_of(message: &[u8]) -> Option<String> {
    let mut scratch = Scratch::default();
    match decode::decode(message, &mut scratch).ok()? {
        Message::Book { topic, .. }
        | Message::Trades { topic, .. }
        | Message::Ticker { topic, .. }
        | Message::Liquidations { topic, .. } => Some(String::from_utf8_lossy(topic).into_owned()),
        Message::OtherTopic { .. } | Message::Answer { .. } => None,
    }
}

/// Whether `topic` names `symbol` (its part after the last `.`).
fn names_symbol(topic: &[u8], symbol: &[u8]) -> bool {
    !symbol.is_empty()
        && topic.len() > symbol.len()
        && topic.ends_with(symbol)
        && topic[topic.len() - symbol.len() - 1] == b'.'
}

/// ms to ns, 0 when it does not fit.
fn ms_to_ns(ms: u64) -> u64 {
    ms.checked_mul(1_000_000).unwrap_or(0)
}

impl BybitFeed {
    /// Builds the feed and its counters.
    pub fn new(config: FeedConfig) -> (BybitFeed, FeedCounters) {
        let channels = config.channels.len().max(1);
        let mut routes: HashMap<Box<[u8]>, Target, BuildFastHasher> = HashMap::default();
        for (instrument, symbol) in config.symbols.iter().enumerate() {
            for (position, channel) in config.channels.iter().enumerate() {
                routes.insert(
                    format!("{channel}.{symbol}")
                        .into_bytes()
                        .into_boxed_slice(),
                    Target {
                        instrument,
                        stream: instrument * channels + position,
                    },
                );
            }
        }
        let book_channel = config
            .channels
            .iter()
            .position(|channel| channel.starts_with("orderbook."));
        let books = (0..config.symbols.len())
            .map(|_| book_channel.map(|_| BookSync::new(BOOK_LEVELS)))
            .collect();
        let activity = Arc::new(StreamActivity::new(config.symbols.len(), channels));
        let (writers, counters) = FeedCounters::new(MESSAGE_KINDS, activity.clone());
        let feed = BybitFeed {
            owners: vec![NO_CONN; config.symbols.len() * channels],
            tickers: vec![TickerState::default(); config.symbols.len()],
            routes,
            books,
            book_channel,
            scratch: Scratch::default(),
            writers,
            activity,
            replies: ReplyQueue::new(REPLIES_KEPT),
            malformed: MalformedSampler::default(),
            config,
        };
        (feed, counters)
    }

    /// A feed for the topics named (`tickwire decode`, where no venue file says what was
    /// subscribed): each topic's symbol becomes an instrument and its channel a channel, in
    /// order of first appearance; names that are no topic of the four read are left out.
    pub fn for_topics(
        venue_id: VenueId,
        venue_name: &str,
        topics: &[String],
    ) -> (BybitFeed, FeedCounters) {
        let mut symbols: Vec<String> = Vec::new();
        let mut channels: Vec<String> = Vec::new();
        for topic in topics {
            let Some((_, symbol)) = TopicKind::of(topic.as_bytes()) else {
                continue;
            };
            let Ok(symbol) = std::str::from_utf8(symbol) else {
                continue;
            };
            let channel = &topic[..topic.len() - symbol.len() - 1];
            if !symbols.iter().any(|known| known == symbol) {
                symbols.push(symbol.to_owned());
            }
            if !channels.iter().any(|known| known == channel) {
                // One book per instrument: a second depth's topics are left out.
                if channel.starts_with("orderbook.")
                    && channels.iter().any(|known| known.starts_with("orderbook."))
                {
                    continue;
                }
                channels.push(channel.to_owned());
            }
        }
        BybitFeed::new(FeedConfig {
            venue_id,
            venue_name: venue_name.to_owned(),
            symbols,
            channels,
            instrument_base: 0,
        })
    }

    /// The symbols, by instrument index.
    pub fn symbols(&self) -> &[String] {
        &self.config.symbols
    }

    /// The book of instrument `index` when it is in sync.
    pub fn book(&self, index: usize) -> Option<&crate::book::OrderBook> {
        self.books
            .get(index)
            .and_then(Option::as_ref)
            .filter(|sync| sync.in_sync())
            .map(BookSync::book)
    }

    /// The merged ticker of instrument `index`, once a snapshot was merged.
    pub fn ticker(&self, index: usize) -> Option<MergedTicker> {
        let state = self.tickers.get(index).filter(|state| state.synced)?;
        Some(MergedTicker {
            bid_px: state.bid_px,
            bid_sz: state.bid_sz,
            ask_px: state.ask_px,
            ask_sz: state.ask_sz,
            mark: state.mark,
            index: state.index,
            funding_rate: state.funding_rate,
            open_interest: state.open_interest,
        })
    }

    fn header(&self, instrument: usize, exchange_ts_ns: u64, recv_ts_ns: u64) -> EventHeader {
        EventHeader {
            exchange_ts_ns,
            recv_ts_ns,
            venue_seq: 0,
            instrument_id: self
                .config
                .instrument_base
                .wrapping_add(instrument as InstrumentId),
            venue_id: self.config.venue_id,
            kind: EventKind::Quote,
            flags: if exchange_ts_ns == 0 {
                flags::NO_EXCHANGE_TS
            } else {
                0
            },
        }
    }

    fn reply(&mut self, reply: VenueReply) {
        if !self.replies.push(reply) {
            self.writers.replies_dropped.increment();
        }
    }

    fn malformed(
        &mut self,
        error: &dyn std::fmt::Display,
        offset: usize,
        payload: &[u8],
        recv_ts_ns: u64,
    ) {
        self.writers.malformed.increment();
        self.malformed
            .offer(self.config.venue_id, error, offset, payload, recv_ts_ns);
    }

    /// Whether a message of `target` from `conn` passes (see the module docs).
    fn admit(&mut self, target: Target, conn: ConnId, takes_over: bool, recv_ts_ns: u64) -> bool {
        let Some(owner) = self.owners.get_mut(target.stream) else {
            return false;
        };
        if *owner == conn || *owner == NO_CONN {
            *owner = conn;
            self.activity.saw(target.stream, recv_ts_ns);
            return true;
        }
        if takes_over {
            *owner = conn;
            self.activity.agreed(target.stream, recv_ts_ns);
            self.activity.saw(target.stream, recv_ts_ns);
            return true;
        }
        self.writers.duplicates.increment();
        false
    }

    fn route(&mut self, topic: &[u8]) -> Option<Target> {
        let target = self.routes.get(topic).copied();
        if target.is_none() {
            self.writers.unknown_symbol.increment();
        }
        target
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the decoded message's parts, passed as they come"
    )]
    fn on_book(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        topic: &[u8],
        snapshot: bool,
        exchange_ms: u64,
        symbol: &[u8],
        update_id: u64,
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let Some(target) = self.route(topic) else {
            return;
        };
        if !names_symbol(topic, symbol) {
            self.malformed(
                &"`data.s` names another symbol than the topic",
                0,
                payload,
                recv_ts_ns,
            );
            return;
        }
        if !self.admit(target, conn, snapshot, recv_ts_ns) {
            return;
        }
        self.writers.message(Kind::Orderbook as usize);
        let header = self.header(target.instrument, ms_to_ns(exchange_ms), recv_ts_ns);
        let Some(sync) = self
            .books
            .get_mut(target.instrument)
            .and_then(Option::as_mut)
        else {
            return;
        };
        let outcome = sync.apply(
            snapshot,
            update_id,
            &self.scratch.bids,
            &self.scratch.asks,
            header,
            &mut |event| out.push(event),
        );
        if outcome.absent_deletes > 0 {
            self.writers
                .book_refused
                .add(u64::from(outcome.absent_deletes));
        }
        match outcome.applied {
            Applied::Snapshot => self.writers.book_syncs.increment(),
            Applied::Gap { .. } | Applied::Crossed => {
                self.writers.book_gaps.increment();
                self.writers.book_resyncs.increment();
                let stream = u32::try_from(target.stream).unwrap_or(u32::MAX);
                self.reply(VenueReply::resubscribe(self.config.venue_id, conn, stream));
            }
            Applied::Delta | Applied::BeforeSnapshot => {}
        }
    }

    fn trades(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        topic: &[u8],
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let Some(target) = self.route(topic) else {
            return;
        };
        if !self.admit(target, conn, false, recv_ts_ns) {
            return;
        }
        self.writers.message(Kind::PublicTrade as usize);
        let mut push = |event: Event| out.push(event);
        let mut emitter = Emitter::new(&mut push);
        for index in 0..self.scratch.rows.len() {
            let row = self.scratch.rows[index];
            let symbol = payload.get(row.symbol.0..row.symbol.1).unwrap_or_default();
            if !names_symbol(topic, symbol) {
                self.writers.unknown_symbol.increment();
                continue;
            }
            let mut header = self.header(target.instrument, ms_to_ns(row.time_ms), recv_ts_ns);
            header.venue_seq = row.seq;
            let aggressor = if row.buy { Side::Bid } else { Side::Ask };
            emitter.push(Event::new(
                header,
                Body::Trade(Trade::new(row.price, row.size, row.id, aggressor)),
            ));
        }
        emitter.finish(true);
    }

    /// An `allLiquidation` message: one `Liquidation` event per row.
    fn liquidations(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        topic: &[u8],
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let Some(target) = self.route(topic) else {
            return;
        };
        if !self.admit(target, conn, false, recv_ts_ns) {
            return;
        }
        self.writers.message(Kind::AllLiquidation as usize);
        let mut push = |event: Event| out.push(event);
        let mut emitter = Emitter::new(&mut push);
        for index in 0..self.scratch.rows.len() {
            let row = self.scratch.rows[index];
            let symbol = payload.get(row.symbol.0..row.symbol.1).unwrap_or_default();
            if !names_symbol(topic, symbol) {
                self.writers.unknown_symbol.increment();
                continue;
            }
            let header = self.header(target.instrument, ms_to_ns(row.time_ms), recv_ts_ns);
            // `S` is the position's side: `Buy` means a long position was liquidated.
            let position = if row.buy { Side::Bid } else { Side::Ask };
            emitter.push(Event::new(
                header,
                Body::Liquidation(Liquidation::new(position, row.price, row.size)),
            ));
        }
        emitter.finish(true);
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the decoded message's parts, passed as they come"
    )]
    fn on_ticker(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        topic: &[u8],
        snapshot: bool,
        ts_ms: u64,
        symbol: &[u8],
        fields: TickerFields,
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let Some(target) = self.route(topic) else {
            return;
        };
        if !names_symbol(topic, symbol) {
            self.malformed(
                &"`data.symbol` names another symbol than the topic",
                0,
                payload,
                recv_ts_ns,
            );
            return;
        }
        if !self.admit(target, conn, false, recv_ts_ns) {
            return;
        }
        self.writers.message(Kind::Tickers as usize);
        let header = self.header(target.instrument, ms_to_ns(ts_ms), recv_ts_ns);
        let Some(state) = self.tickers.get_mut(target.instrument) else {
            return;
        };
        if snapshot {
            *state = TickerState {
                synced: true,
                ..TickerState::default()
            };
        } else if !state.synced {
            self.writers.duplicates.increment();
            return;
        }
        state.merge(&fields);
        let state = *state;
        let mut push = |event: Event| out.push(event);
        let mut emitter = Emitter::new(&mut push);
        let quoted = [
            fields.bid1_price,
            fields.bid1_size,
            fields.ask1_price,
            fields.ask1_size,
        ]
        .iter()
        .any(|field| field.is_present());
        if quoted {
            let quote = Quote {
                bid_px: state.bid_px.unwrap_or_default(),
                bid_sz: state.bid_sz.unwrap_or_default(),
                ask_px: state.ask_px.unwrap_or_default(),
                ask_sz: state.ask_sz.unwrap_or_default(),
            };
            emitter.push(Event::new(header, Body::Quote(quote)));
        }
        for (field, kind) in [
            (fields.mark_price, ReferenceKind::Mark),
            (fields.index_price, ReferenceKind::Index),
        ] {
            if let decode::Field::Value(price) = field {
                emitter.push(Event::new(
                    header,
                    Body::Reference(Reference::new(kind, price)),
                ));
            }
        }
        emitter.finish(true);
    }

    fn answer(
        &mut self,
        conn: ConnId,
        op: &[u8],
        success: Option<bool>,
        ret_msg: &[u8],
        req_id: &[u8],
    ) {
        match op {
            b"ping" | b"pong" if success != Some(false) => {
                self.writers.message(Kind::Pong as usize);
                return;
            }
            _ => {}
        }
        let refused = success == Some(false);
        self.writers.message(if refused {
            Kind::Refused as usize
        } else {
            Kind::Answer as usize
        });
        // The control thread's requests carry their id as `req_id`; an answer without one (a
        // resubscription's) is counted only.
        let id = std::str::from_utf8(req_id)
            .ok()
            .and_then(|text| text.parse::<u64>().ok());
        let venue = self.config.venue_id;
        match id {
            Some(id) => self.reply(VenueReply::new(
                venue,
                id,
                refused.then_some(REFUSED),
                ret_msg,
            )),
            None if refused => {
                self.reply(VenueReply::notice(venue, conn, 0, Some(REFUSED), ret_msg))
            }
            None => {}
        }
    }
}

impl Feed for BybitFeed {
    fn on_message(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        let message = match decode::decode(payload, &mut self.scratch) {
            Ok(message) => message,
            Err(error) => {
                let offset = error.offset();
                self.malformed(
                    &error as &dyn std::fmt::Display,
                    offset,
                    payload,
                    recv_ts_ns,
                );
                return;
            }
        };
        match message {
            Message::Book {
                topic,
                snapshot,
                ts_ms,
                cts_ms,
                symbol,
                update_id,
                ..
            } => {
                let exchange_ms = if cts_ms != 0 { cts_ms } else { ts_ms };
                self.on_book(
                    conn,
                    recv_ts_ns,
                    topic,
                    snapshot,
                    exchange_ms,
                    symbol,
                    update_id,
                    payload,
                    sink,
                );
            }
            Message::Trades { topic, .. } => self.trades(conn, recv_ts_ns, topic, payload, sink),
            Message::Ticker {
                topic,
                snapshot,
                ts_ms,
                symbol,
                fields,
            } => self.on_ticker(
                conn, recv_ts_ns, topic, snapshot, ts_ms, symbol, fields, payload, sink,
            ),
            Message::Liquidations { topic, .. } => {
                self.liquidations(conn, recv_ts_ns, topic, payload, sink)
            }
            Message::OtherTopic { .. } => self.writers.message(Kind::OtherTopic as usize),
            Message::Answer {
                op,
                success,
                ret_msg,
                req_id,
            } => self.answer(conn, op, success, ret_msg, req_id),
        }
    }

    /// Bybit books start from the stream's own snapshots: no REST snapshot is ever asked for.
    fn on_disconnect(
        &mut self,
        conn: ConnId,
        instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let base = self.config.instrument_base;
        let channels = self.activity.channels();
        for instrument in instruments {
            let index = instrument.wrapping_sub(base) as usize;
            if index >= self.config.symbols.len() {
                continue;
            }
            // Streams another connection already took over lost nothing.
            let mut lost = false;
            for position in 0..channels {
                let Some(owner) = self.owners.get_mut(index * channels + position) else {
                    continue;
                };
                if *owner == conn || *owner == NO_CONN {
                    *owner = NO_CONN;
                    lost = true;
                    if self.book_channel == Some(position) {
                        if let Some(sync) = self.books.get_mut(index).and_then(Option::as_mut) {
                            sync.invalidate();
                        }
                    }
                    if let Some(state) = self.tickers.get_mut(index) {
                        state.synced = false;
                    }
                }
            }
            if lost {
                sink.push(crate::venue::feed::reconnect_gap(
                    self.config.venue_id,
                    instrument,
                    now_ns,
                ));
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
            .filter(|sync| sync.in_sync())
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
                .filter(|sync| sync.in_sync())
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
