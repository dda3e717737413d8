//! The OKX feed: each message decoded in place ([`super::decode`]), routed by its channel and
//! instrument to the stream it belongs to, and written as normalized events.
//!
//! **Routes.** A stream is one channel of one instrument (`{channel}:{instId}`). A push of a
//! channel the venue file does not list is counted (`unsubscribed`) and skipped; a push for an
//! `instId` not in the file is counted as `unknown_symbol`. `index-tickers` pushes name the
//! underlying index: each instrument of that underlying takes the price. `liquidation-orders`
//! rows are routed by their own `instId`.
//!
//! **Two connections at once** (a rotation): each stream has an owner connection, the first to
//! deliver it; another connection's messages are dropped as duplicates, except a book
//! snapshot, which takes the book over whole. When the owner drops, the stream is free again.
//!
//! **Books** follow [`super::book`]; a break, a checksum mismatch or a full side asks the
//! control side for the stream afresh ([`VenueReply::resubscribe`]).
//!
//! **Events.** `trades` and `trades-all` rows are `Trade`s (`tradeId`, `px`, `sz`, `side` the
//! taker's, `ts`; `trades`' `seqId` as `venue_seq`); `tickers` rows the best bid and offer as a
//! `Quote`; `mark-price` and `index-tickers` `Reference`s (mark, index); `liquidation-orders`
//! details `Liquidation`s (see the module docs for the side); `funding-rate` and
//! `open-interest` are counted only.

use super::book::{Applied, BookSync, Update, Verified};
use super::decode::{self, BookChannel, Channel, Message, PosSide, Scratch};
use crate::event::{
    flags, Body, Event, EventHeader, EventKind, InstrumentId, Liquidation, Quote, Reference,
    ReferenceKind, Side, Trade, VenueId,
};
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
const NO_CONN: ConnId = ConnId::MAX;

/// The messages an OKX connection carries, as [`FeedCounters`] counts them (positions are
/// [`Kind`]'s).
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("books"),
    MessageKind::market("trades"),
    MessageKind::market("tickers"),
    MessageKind::market("mark-price"),
    MessageKind::market("index-tickers"),
    MessageKind::market("funding-rate"),
    MessageKind::market("open-interest"),
    MessageKind::market("liquidation-orders"),
    // A `subscribe`, `unsubscribe` or `login` answer.
    MessageKind::other("answer"),
    // An `error` event: the venue refused a request.
    MessageKind::other("error"),
    // The text `pong`.
    MessageKind::other("pong"),
    // Another event (`notice`, `channel-conn-count`...).
    MessageKind::other("notice"),
    // A push of a channel the venue file does not list, or one this build does not read.
    MessageKind::other("unsubscribed"),
    // A book message whose checksum was compared and matched.
    MessageKind::other("books_verified"),
];

const _: () = assert!(MESSAGE_KINDS.len() == Kind::Verified as usize + 1);

#[derive(Clone, Copy)]
enum Kind {
    Books = 0,
    Trades = 1,
    Tickers = 2,
    MarkPrice = 3,
    IndexTickers = 4,
    FundingRate = 5,
    OpenInterest = 6,
    Liquidations = 7,
    Answer = 8,
    Error = 9,
    Pong = 10,
    Notice = 11,
    Unsubscribed = 12,
    Verified = 13,
}

/// How an OKX feed is set up.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    pub venue_id: VenueId,
    pub venue_name: String,
    /// Instrument ids; an instrument's id is `instrument_base` plus its index here.
    pub symbols: Vec<String>,
    /// Channels, as the config checked them.
    pub channels: Vec<String>,
    pub instrument_base: InstrumentId,
}

pub struct OkxFeed {
    config: FeedConfig,
    /// `instId` to instrument index.
    instruments: HashMap<Box<[u8]>, usize, BuildFastHasher>,
    /// An underlying index to the instruments of it (`index-tickers`).
    underlyings: HashMap<Box<[u8]>, Vec<usize>, BuildFastHasher>,
    /// Each channel's position among the file's channels.
    positions: HashMap<Channel, usize, BuildFastHasher>,
    /// Per stream: the connection whose messages pass.
    owners: Vec<ConnId>,
    /// Per instrument, when a book channel is subscribed.
    books: Vec<Option<BookSync>>,
    book_position: Option<usize>,
    scratch: Scratch,
    writers: FeedWriters,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    malformed: MalformedSampler,
}

/// The stream of a push (`tickwire decode`'s first pass): `{channel}:{instId}`, with each
/// row's `instId` for `liquidation-orders` and the arg's for the rest; `None` for an event or
/// a message that does not decode.
pub fn stream_of(message: &[u8]) -> Option<String> {
    let mut scratch = Scratch::default();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match decode::decode(message, &mut scratch).ok()? {
        Message::Book {
            channel, inst_id, ..
        } => Some(format!(
            "{}:{}",
            Channel::Book(channel).name(),
            text(inst_id)
        )),
        Message::Rows {
            channel: Channel::LiquidationOrders,
            ..
        } => scratch.rows.first().map(|row| {
            format!(
                "{}:{}",
                Channel::LiquidationOrders.name(),
                text(row.inst_id(message))
            )
        }),
        Message::Rows { channel, arg } => Some(format!("{}:{}", channel.name(), text(arg))),
        Message::OtherChannel { .. } | Message::Event { .. } | Message::Pong => None,
    }
}

/// ms to ns, 0 when it does not fit.
fn ms_to_ns(ms: u64) -> u64 {
    ms.checked_mul(1_000_000).unwrap_or(0)
}

impl OkxFeed {
    /// Builds the feed and its counters.
    pub fn new(config: FeedConfig) -> (OkxFeed, FeedCounters) {
        let channels = config.channels.len().max(1);
        let mut instruments: HashMap<Box<[u8]>, usize, BuildFastHasher> = HashMap::default();
        let mut underlyings: HashMap<Box<[u8]>, Vec<usize>, BuildFastHasher> = HashMap::default();
        for (index, symbol) in config.symbols.iter().enumerate() {
            instruments.insert(symbol.as_bytes().into(), index);
            underlyings
                .entry(super::protocol::underlying(symbol).as_bytes().into())
                .or_default()
                .push(index);
        }
        let mut positions: HashMap<Channel, usize, BuildFastHasher> = HashMap::default();
        for (position, channel) in config.channels.iter().enumerate() {
            if let Some(read) = Channel::of(channel.as_bytes()) {
                positions.entry(read).or_insert(position);
            }
        }
        let book = positions
            .iter()
            .find_map(|(channel, &position)| match channel {
                Channel::Book(book) => Some((*book, position)),
                _ => None,
            });
        let books = (0..config.symbols.len())
            .map(|_| book.map(|(channel, _)| BookSync::new(channel)))
            .collect();
        let activity = Arc::new(StreamActivity::new(config.symbols.len(), channels));
        let (writers, counters) = FeedCounters::new(MESSAGE_KINDS, activity.clone());
        let feed = OkxFeed {
            owners: vec![NO_CONN; config.symbols.len() * channels],
            instruments,
            underlyings,
            positions,
            books,
            book_position: book.map(|(_, position)| position),
            scratch: Scratch::default(),
            writers,
            activity,
            replies: ReplyQueue::new(REPLIES_KEPT),
            malformed: MalformedSampler::default(),
            config,
        };
        (feed, counters)
    }

    /// A feed for the streams named (`tickwire decode`, where no venue file says what was
    /// subscribed): each stream's instrument becomes an instrument and its channel a channel,
    /// in order of first appearance; one book channel (the first seen).
    pub fn for_streams(
        venue_id: VenueId,
        venue_name: &str,
        streams: &[String],
    ) -> (OkxFeed, FeedCounters) {
        let mut symbols: Vec<String> = Vec::new();
        let mut channels: Vec<String> = Vec::new();
        for stream in streams {
            let Some((channel, symbol)) = stream.split_once(':') else {
                continue;
            };
            let Some(read) = Channel::of(channel.as_bytes()) else {
                continue;
            };
            // An index names no instrument of its own: its instruments come from the others.
            if read != Channel::IndexTickers && !symbols.iter().any(|known| known == symbol) {
                symbols.push(symbol.to_owned());
            }
            if !channels.iter().any(|known| known == channel)
                && super::protocol::check_channel(channel, &channels).is_ok()
            {
                channels.push(channel.to_owned());
            }
        }
        OkxFeed::new(FeedConfig {
            venue_id,
            venue_name: venue_name.to_owned(),
            symbols,
            channels,
            instrument_base: 0,
        })
    }

    /// The instrument ids, by instrument index.
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

    /// The stream of `channel` for instrument `instrument`, when the file lists the channel.
    fn stream(&mut self, channel: Channel, instrument: usize) -> Option<usize> {
        match self.positions.get(&channel) {
            Some(&position) => Some(instrument * self.activity.channels() + position),
            None => {
                self.writers.message(Kind::Unsubscribed as usize);
                None
            }
        }
    }

    /// The instrument of `inst_id`, counted as `unknown_symbol` when the file has none.
    fn instrument(&mut self, inst_id: &[u8]) -> Option<usize> {
        let found = self.instruments.get(inst_id).copied();
        if found.is_none() {
            self.writers.unknown_symbol.increment();
        }
        found
    }

    /// Whether a message of `stream` from `conn` passes (see the module docs).
    fn admit(&mut self, stream: usize, conn: ConnId, takes_over: bool, recv_ts_ns: u64) -> bool {
        let Some(owner) = self.owners.get_mut(stream) else {
            return false;
        };
        if *owner == conn || *owner == NO_CONN {
            *owner = conn;
            self.activity.saw(stream, recv_ts_ns);
            return true;
        }
        if takes_over {
            *owner = conn;
            self.activity.agreed(stream, recv_ts_ns);
            self.activity.saw(stream, recv_ts_ns);
            return true;
        }
        self.writers.duplicates.increment();
        false
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the decoded message's parts, passed as they come"
    )]
    fn on_book(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        channel: BookChannel,
        inst_id: &[u8],
        update: Update,
        ts_ms: u64,
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let Some(stream) = self.stream(Channel::Book(channel), 0) else {
            return;
        };
        let Some(instrument) = self.instrument(inst_id) else {
            return;
        };
        let stream = stream + instrument * self.activity.channels();
        if !self.admit(stream, conn, update.snapshot, recv_ts_ns) {
            return;
        }
        self.writers.message(Kind::Books as usize);
        let header = self.header(instrument, ms_to_ns(ts_ms), recv_ts_ns);
        let Some(sync) = self.books.get_mut(instrument).and_then(Option::as_mut) else {
            return;
        };
        let outcome = sync.apply(
            update,
            &self.scratch.bids,
            &self.scratch.asks,
            payload,
            header,
            &mut |event| out.push(event),
        );
        if outcome.absent_deletes > 0 {
            self.writers
                .book_refused
                .add(u64::from(outcome.absent_deletes));
        }
        if outcome.verified == Verified::Yes {
            self.writers.message(Kind::Verified as usize);
        }
        match outcome.applied {
            Applied::Snapshot => self.writers.book_syncs.increment(),
            Applied::Gap { .. } | Applied::Mismatch { .. } | Applied::Full => {
                self.writers.book_gaps.increment();
                if outcome.applied == Applied::Full {
                    self.writers.book_limits.increment();
                }
                self.writers.book_resyncs.increment();
                let stream = u32::try_from(stream).unwrap_or(u32::MAX);
                self.reply(VenueReply::resubscribe(self.config.venue_id, conn, stream));
            }
            Applied::Update | Applied::BeforeSnapshot => {}
        }
    }

    fn on_rows(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        channel: Channel,
        arg: &[u8],
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let kind = match channel {
            Channel::Book(_) => return,
            Channel::Trades | Channel::TradesAll => Kind::Trades,
            Channel::Tickers => Kind::Tickers,
            Channel::MarkPrice => Kind::MarkPrice,
            Channel::IndexTickers => Kind::IndexTickers,
            Channel::FundingRate => Kind::FundingRate,
            Channel::OpenInterest => Kind::OpenInterest,
            Channel::LiquidationOrders => Kind::Liquidations,
        };
        let Some(&position) = self.positions.get(&channel) else {
            self.writers.message(Kind::Unsubscribed as usize);
            return;
        };
        self.writers.message(kind as usize);
        let channels = self.activity.channels();
        let mut push = |event: Event| out.push(event);
        let mut emitter = Emitter::new(&mut push);
        for index in 0..self.scratch.rows.len() {
            let row = self.scratch.rows[index];
            let inst_id = row.inst_id(payload);
            // The instruments the row is for: an index's, its instruments; else its own
            // (`liquidation-orders` rows name it; the rest name the arg's).
            let targets: &[usize] = if channel == Channel::IndexTickers {
                let index_id = if inst_id.is_empty() { arg } else { inst_id };
                match self.underlyings.get(index_id) {
                    Some(list) => list,
                    None => {
                        self.writers.unknown_symbol.increment();
                        continue;
                    }
                }
            } else {
                let id = if channel == Channel::LiquidationOrders || !inst_id.is_empty() {
                    inst_id
                } else {
                    arg
                };
                match self.instruments.get(id) {
                    Some(instrument) => std::slice::from_ref(instrument),
                    None => {
                        self.writers.unknown_symbol.increment();
                        continue;
                    }
                }
            };
            for &instrument in targets {
                let stream = instrument * channels + position;
                let Some(owner) = self.owners.get_mut(stream) else {
                    continue;
                };
                if *owner != conn && *owner != NO_CONN {
                    self.writers.duplicates.increment();
                    continue;
                }
                *owner = conn;
                self.activity.saw(stream, recv_ts_ns);
                let time = row.ts_ms.unwrap_or(0);
                let header = |time: u64| {
                    let exchange = ms_to_ns(time);
                    EventHeader {
                        exchange_ts_ns: exchange,
                        recv_ts_ns,
                        venue_seq: 0,
                        instrument_id: self
                            .config
                            .instrument_base
                            .wrapping_add(instrument as InstrumentId),
                        venue_id: self.config.venue_id,
                        kind: EventKind::Quote,
                        flags: if exchange == 0 {
                            flags::NO_EXCHANGE_TS
                        } else {
                            0
                        },
                    }
                };
                match channel {
                    Channel::Trades | Channel::TradesAll => {
                        let (
                            Some(trade_id),
                            Some(buy),
                            decode::Field::Value(price),
                            decode::Field::Value(size),
                        ) = (row.trade_id, row.buy, row.px, row.sz)
                        else {
                            self.writers.malformed.increment();
                            continue;
                        };
                        let mut header = header(time);
                        header.venue_seq = row
                            .seq_id
                            .and_then(|seq| u64::try_from(seq).ok())
                            .unwrap_or(0);
                        let aggressor = if buy { Side::Bid } else { Side::Ask };
                        emitter.push(Event::new(
                            header,
                            Body::Trade(Trade::new(price, size, trade_id, aggressor)),
                        ));
                    }
                    Channel::Tickers => {
                        let quote = Quote {
                            bid_px: row.bid_px.or_zero(),
                            bid_sz: row.bid_sz.or_zero(),
                            ask_px: row.ask_px.or_zero(),
                            ask_sz: row.ask_sz.or_zero(),
                        };
                        emitter.push(Event::new(header(time), Body::Quote(quote)));
                    }
                    Channel::MarkPrice | Channel::IndexTickers => {
                        let (field, kind) = if channel == Channel::MarkPrice {
                            (row.mark_px, ReferenceKind::Mark)
                        } else {
                            (row.idx_px, ReferenceKind::Index)
                        };
                        if let decode::Field::Value(price) = field {
                            emitter.push(Event::new(
                                header(time),
                                Body::Reference(Reference::new(kind, price)),
                            ));
                        }
                    }
                    Channel::LiquidationOrders => {
                        let (start, end) = (row.details.0 as usize, row.details.1 as usize);
                        for at in start..end {
                            let Some(detail) = self.scratch.details.get(at).copied() else {
                                continue;
                            };
                            // The liquidated position: `posSide`, or in net mode the side the
                            // closing order took (`sell` closes a long).
                            let long = match (detail.pos_side, detail.buy) {
                                (Some(PosSide::Long), _) => true,
                                (Some(PosSide::Short), _) => false,
                                (_, Some(buy)) => !buy,
                                (_, None) => {
                                    self.writers.malformed.increment();
                                    continue;
                                }
                            };
                            let position = if long { Side::Bid } else { Side::Ask };
                            emitter.push(Event::new(
                                header(detail.ts_ms.unwrap_or(time)),
                                Body::Liquidation(Liquidation::new(
                                    position,
                                    detail.bk_px.or_zero(),
                                    detail.sz.or_zero(),
                                )),
                            ));
                        }
                    }
                    Channel::FundingRate | Channel::OpenInterest | Channel::Book(_) => {}
                }
            }
        }
        emitter.finish(true);
    }

    fn on_event(&mut self, conn: ConnId, event: &[u8], id: &[u8], code: &[u8], msg: &[u8]) {
        let venue = self.config.venue_id;
        let code_value = std::str::from_utf8(code)
            .ok()
            .and_then(|text| text.parse::<i64>().ok());
        let error = code_value.filter(|&value| value != 0);
        let request = std::str::from_utf8(id)
            .ok()
            .and_then(|text| text.parse::<u64>().ok());
        let login = (u64::from(conn) << 32) | super::protocol::LOGIN_ANSWER;
        match event {
            b"subscribe" | b"unsubscribe" => {
                self.writers.message(Kind::Answer as usize);
                if let Some(request) = request {
                    self.reply(VenueReply::new(venue, request, None, msg));
                }
            }
            b"login" => {
                self.writers.message(Kind::Answer as usize);
                self.reply(VenueReply::new(venue, login, error, msg));
            }
            b"error" => {
                self.writers.message(Kind::Error as usize);
                let error = Some(code_value.unwrap_or(-1));
                match request {
                    Some(request) => self.reply(VenueReply::new(venue, request, error, msg)),
                    // The login's refusals (60004 to 60009, 60022 to 60026: the page's "Login"
                    // and error codes) answer the login, which carries no id.
                    None if matches!(code_value, Some(60004..=60009 | 60022..=60026)) => {
                        self.reply(VenueReply::new(venue, login, error, msg))
                    }
                    None => self.reply(VenueReply::notice(venue, conn, 0, error, msg)),
                }
            }
            b"notice" => {
                // "The connection will soon be closed for a service upgrade" (64008).
                self.writers.message(Kind::Notice as usize);
                self.reply(VenueReply::reconnect_notice(venue, conn));
            }
            b"channel-conn-count-error" => {
                self.writers.message(Kind::Notice as usize);
                self.reply(VenueReply::notice(
                    venue,
                    conn,
                    0,
                    Some(code_value.unwrap_or(-1)),
                    msg,
                ));
            }
            _ => self.writers.message(Kind::Notice as usize),
        }
    }
}

impl Feed for OkxFeed {
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
                channel,
                inst_id,
                snapshot,
                ts_ms,
                checksum,
                prev_seq_id,
                seq_id,
            } => self.on_book(
                conn,
                recv_ts_ns,
                channel,
                inst_id,
                Update {
                    snapshot,
                    checksum,
                    prev_seq_id,
                    seq_id,
                },
                ts_ms,
                payload,
                sink,
            ),
            Message::Rows { channel, arg } => {
                self.on_rows(conn, recv_ts_ns, channel, arg, payload, sink)
            }
            Message::OtherChannel { .. } => self.writers.message(Kind::Unsubscribed as usize),
            Message::Event {
                event,
                id,
                code,
                msg,
                ..
            } => self.on_event(conn, event, id, code, msg),
            Message::Pong => self.writers.message(Kind::Pong as usize),
        }
    }

    /// OKX books start from the stream's own snapshots: no REST snapshot is ever asked for.
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
            let mut lost = false;
            for position in 0..channels {
                let Some(owner) = self.owners.get_mut(index * channels + position) else {
                    continue;
                };
                if *owner == conn || *owner == NO_CONN {
                    *owner = NO_CONN;
                    lost = true;
                    if self.book_position == Some(position) {
                        if let Some(sync) = self.books.get_mut(index).and_then(Option::as_mut) {
                            sync.invalidate();
                        }
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
                .map(|sync| (sync.book(), sync.last_seq()));
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
