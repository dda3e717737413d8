//! The Thalex feed: routes each message by its first bytes, decodes it in place and writes
//! normalized events.
//!
//! **Routes.** Every stream (instrument × channel template) has a channel name; the route table
//! maps the name's bytes to the instruments and streams it feeds (a `price_index` channel can
//! feed several instruments of one underlying). The table is built once and owned by the
//! decoder thread: a lookup hashes the name in place, with no lock, allocation or copy.
//!
//! **Snapshots.** A book follows Thalex's official client (`thalextech/thalex_py`,
//! `process_msg.py`): a book notification is the whole book only when its envelope carries
//! `"snapshot": true`; one without the key (or with `false`) is an update. An update before the
//! book's first snapshot (a capture that starts mid-stream, a connection whose snapshot has not
//! come yet) changes no book and publishes no level, since a partial update is no book; its
//! trades are still published. Other channels have no book to build: for them api.yaml's "the
//! first notification after subscription contains a snapshot" (recent_trades) holds, so their
//! first notification on a connection counts as a snapshot (it may take the stream over from
//! another connection, and its trades are checked against those delivered before), unless a
//! `"snapshot"` key says otherwise.
//!
//! **No sequence numbers.** Thalex books carry none, so a book is only ever rebuilt from a
//! snapshot: a dropped connection gives each of its instruments a `Gap(Reconnect)`, the book is
//! invalid until the resubscription's snapshot arrives, and changes before it are dropped.
//!
//! **Trades without ids.** Book trades and recent_trades tuples carry no trade id, so the feed
//! remembers the last 64 trades each stream delivered by a hash of the whole tuple (price,
//! amount, side, time, instrument, implied_taker) and their time. A re-snapshot's trade is a
//! duplicate (dropped, counted) when it is older than everything remembered, or when it equals
//! a remembered trade not already matched by another trade of the same snapshot, so two real
//! fills with identical tuples are both kept. A first snapshot delivers all its trades: they
//! carry their own exchange times. Events have `trade_id` and `venue_seq` 0.
//!
//! **Underlying trades.** `recent_trades.<underlying>.<all|options|future_rolls>` feeds every
//! configured instrument of that underlying; each tuple goes to the instrument its
//! `instrument_name` names, and a trade of an instrument the venue file does not list is
//! counted as unrouted (`unknown_symbol`).
//!
//! **Two connections at once** (a rotation, or the venue's `reconnect` notice): with no update
//! ids to compare, each stream has an owner connection and only its messages pass. The venue
//! naming a stream in a subscription answer makes that connection the stream's newest; the
//! newest takes ownership with its next message (for a book: with its next snapshot, so the
//! book switches whole). A message from any other connection is dropped as a duplicate. The
//! switch marks the stream as agreed, which is what the control thread's rotation waits for.

use super::channel::Template;
use super::decode::{self, Body as Notification, DecodeError, Message, Outcome, Scratch};
use crate::book::{BookSide, OrderBook};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, EventKind, InstrumentId, Quote, Reference,
    ReferenceKind, Side, Snapshot, Trade, VenueId,
};
use crate::fixed::Fixed;
use crate::hash::BuildFastHasher;
use crate::net::ConnId;
use crate::venue::feed::{
    EventSink, Feed, FeedCounters, FeedWriters, MalformedSample, MalformedSampler, MessageKind,
    ReplyQueue, StreamActivity, VenueReply,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Replies kept for the control thread; more than this many waiting means it is wedged.
const REPLIES_KEPT: usize = 64;
/// Levels a book holds per side before it grows (a `book.<..>.all.<..>` channel may send more).
const BOOK_LEVELS: usize = 64;
const NO_CONN: ConnId = ConnId::MAX;

/// The messages a Thalex connection carries, named by their channel (api.yaml's channel
/// grammar) or, for JSON-RPC answers, by their outcome, as [`FeedCounters`] counts them
/// (positions are [`Kind`]'s). A notification that feeds several instruments (a `price_index`)
/// counts once.
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("ticker"),
    MessageKind::market("lwt"),
    MessageKind::market("book"),
    MessageKind::market("recent_trades"),
    MessageKind::market("price_index"),
    // The `system` channel's events (`reconnect`...).
    MessageKind::other("system"),
    // A JSON-RPC `result`: a subscription's accepted channels, a login's answer.
    MessageKind::other("result"),
    // A JSON-RPC `error`.
    MessageKind::other("error"),
    // A notification of a channel this build does not decode.
    MessageKind::other("other_channel"),
];

// Every `Kind` has its entry in the table (a position past it would count nothing).
const _: () = assert!(MESSAGE_KINDS.len() == Kind::OtherChannel as usize + 1);

/// A message's position in [`MESSAGE_KINDS`].
#[derive(Clone, Copy)]
enum Kind {
    Ticker = 0,
    Lwt = 1,
    Book = 2,
    RecentTrades = 3,
    PriceIndex = 4,
    System = 5,
    Result = 6,
    Error = 7,
    OtherChannel = 8,
}

impl Kind {
    fn of(body: &Notification<'_>) -> Kind {
        match body {
            Notification::Ticker => Kind::Ticker,
            Notification::Lwt => Kind::Lwt,
            Notification::Book { .. } => Kind::Book,
            Notification::Trades => Kind::RecentTrades,
            Notification::Index(_) => Kind::PriceIndex,
            Notification::System { .. } => Kind::System,
            Notification::Other => Kind::OtherChannel,
        }
    }
}

/// How a Thalex feed is set up.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    pub venue_id: VenueId,
    pub venue_name: String,
    /// Instrument names; an instrument's id is `instrument_base` plus its index here.
    pub symbols: Vec<String>,
    /// Channel templates (`ticker.100ms`, ...), already validated by the config.
    pub channels: Vec<String>,
    pub instrument_base: InstrumentId,
}

/// The last trades a stream delivered, by the hash of their tuple and their time: enough to
/// tell which trades of a re-snapshot were delivered already, since Thalex trades carry no id.
/// Fixed size, overwritten in a circle.
#[derive(Clone, Copy)]
struct RecentTrades {
    keys: [u64; RecentTrades::KEPT],
    times_ns: [u64; RecentTrades::KEPT],
    next: usize,
    len: usize,
    /// The snapshot message being checked (the feed's message count), and for it: the entries
    /// its trades matched or wrote (one bit each), and the oldest time remembered before it.
    snapshot_message: u64,
    matched: u64,
    oldest_before_ns: Option<u64>,
}

impl Default for RecentTrades {
    fn default() -> Self {
        RecentTrades {
            keys: [0; RecentTrades::KEPT],
            times_ns: [0; RecentTrades::KEPT],
            next: 0,
            len: 0,
            snapshot_message: u64::MAX,
            matched: 0,
            oldest_before_ns: None,
        }
    }
}

impl RecentTrades {
    const KEPT: usize = 64;

    /// The oldest time remembered, if any trade is.
    fn oldest_ns(&self) -> Option<u64> {
        self.times_ns[..self.len].iter().copied().min()
    }

    /// Whether a trade of the re-snapshot `message` was delivered already: it is older than
    /// anything remembered before the snapshot (delivered, or older than what was), or it
    /// equals a remembered trade no earlier trade of the same snapshot matched.
    fn delivered_before(&mut self, message: u64, key: u64, time_ns: u64) -> bool {
        if self.snapshot_message != message {
            self.snapshot_message = message;
            self.matched = 0;
            self.oldest_before_ns = self.oldest_ns();
        }
        if self.oldest_before_ns.is_some_and(|oldest| time_ns < oldest) {
            return true;
        }
        for index in 0..self.len {
            if self.keys[index] == key && self.matched & (1 << index) == 0 {
                self.matched |= 1 << index;
                return true;
            }
        }
        false
    }

    fn push(&mut self, key: u64, time_ns: u64) {
        self.keys[self.next] = key;
        self.times_ns[self.next] = time_ns;
        // A trade written during a snapshot is never matched by a later one of it.
        self.matched |= 1 << self.next;
        self.next = (self.next + 1) % Self::KEPT;
        self.len = (self.len + 1).min(Self::KEPT);
    }
}

/// One stream a channel feeds.
#[derive(Clone, Copy, Debug, Default)]
struct Target {
    /// Index into the config's symbols.
    instrument: usize,
    stream: usize,
}

/// Channel name to the streams it feeds.
struct Routes {
    by_name: HashMap<Box<[u8]>, Box<[Target]>, BuildFastHasher>,
    /// The name last found, which a channel's next notification (a ticker's every 100 ms)
    /// matches with four word compares instead of a hash, a probe and a `memcmp` call.
    last: LastRoute,
}

impl Routes {
    #[inline]
    fn get(&self, name: &[u8]) -> Option<&[Target]> {
        self.by_name.get(name).map(|targets| &**targets)
    }

    /// The first stream `name` feeds, and how many it feeds.
    #[inline(always)]
    fn first(&mut self, name: &[u8]) -> Option<(Target, usize)> {
        let words = LastRoute::words(name);
        if name.len() == self.last.len && words == Some(self.last.words) {
            return Some((self.last.first, self.last.count));
        }
        let targets = self.by_name.get(name)?;
        let found = (*targets.first()?, targets.len());
        self.last = match words {
            Some(words) => LastRoute {
                words,
                len: name.len(),
                first: found.0,
                count: found.1,
            },
            None => LastRoute::default(),
        };
        Some(found)
    }
}

/// A name of 8 to 32 bytes and where it routes (`len` 0: none kept).
#[derive(Clone, Copy, Debug, Default)]
struct LastRoute {
    words: [u64; 4],
    len: usize,
    first: Target,
    count: usize,
}

impl LastRoute {
    /// A name of 8 to 32 bytes as four words that hold every byte of it: those at 0, 8 and 16
    /// (each at most at `len - 8`) and the last eight. Two names of one length with the same
    /// words are the same name.
    #[inline(always)]
    fn words(name: &[u8]) -> Option<[u64; 4]> {
        if !(8..=32).contains(&name.len()) {
            return None;
        }
        let last = name.len() - 8;
        let word = |at: usize| {
            name.get(at.min(last)..)
                .and_then(|rest| rest.first_chunk::<8>())
                .map_or(0, |bytes| u64::from_le_bytes(*bytes))
        };
        Some([word(0), word(8), word(16), word(last)])
    }
}

/// Per stream: who may deliver it.
#[derive(Clone, Copy)]
struct Owner {
    /// The connection whose messages pass.
    current: ConnId,
    /// The connection the venue most recently confirmed the stream on.
    newest: ConnId,
    /// Connections that delivered the stream's channel at least once: for a channel other than
    /// a book, the next message on any other is its snapshot (api.yaml: "the first
    /// notification after subscription contains a snapshot"). Kept on the channel's first
    /// stream for the whole channel. Four covers two shards sharing an underlying's channel,
    /// each mid-rotation.
    seen: [ConnId; 4],
}

impl Owner {
    const NEW: Owner = Owner {
        current: NO_CONN,
        newest: NO_CONN,
        seen: [NO_CONN; 4],
    };

    /// Whether this is `conn`'s first message on the channel (remembered from now on).
    fn first_on(&mut self, conn: ConnId) -> bool {
        if self.seen.contains(&conn) {
            return false;
        }
        let slot = self
            .seen
            .iter()
            .position(|&seen| seen == NO_CONN || (seen != self.current && seen != self.newest))
            .unwrap_or(0);
        self.seen[slot] = conn;
        true
    }

    fn forget(&mut self, conn: ConnId) {
        for seen in &mut self.seen {
            if *seen == conn {
                *seen = NO_CONN;
            }
        }
    }
}

struct BookState {
    book: OrderBook,
    /// Built from a snapshot and not broken since.
    valid: bool,
    /// The top of book last published, to publish a derived quote only when it changes.
    top: Quote,
}

pub struct ThalexFeed {
    config: FeedConfig,
    routes: Routes,
    owners: Vec<Owner>,
    /// Per instrument, when a book channel is subscribed.
    books: Vec<Option<BookState>>,
    /// The book channel's position among the channels, if one is subscribed.
    book_channel: Option<usize>,
    /// Per stream: the trades it delivered last (book and `recent_trades` streams).
    delivered: Vec<RecentTrades>,
    /// Trade messages seen, which names the snapshot a [`RecentTrades`] check belongs to.
    messages: u64,
    scratch: Scratch,
    writers: FeedWriters,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    malformed: MalformedSampler,
}

impl ThalexFeed {
    /// Builds the feed and its counters. Channel templates must have passed the config's check;
    /// one that does not parse is left out (and would be reported by the config first).
    pub fn new(config: FeedConfig) -> (ThalexFeed, FeedCounters) {
        let templates: Vec<Option<Template>> = config
            .channels
            .iter()
            .map(|template| Template::parse(template).ok())
            .collect();
        let mut routes = Vec::new();
        for (instrument, symbol) in config.symbols.iter().enumerate() {
            for (position, template) in templates.iter().enumerate() {
                if let Some(template) = template {
                    routes.push((template.channel(symbol), instrument, position));
                }
            }
        }
        let book_channel = templates.iter().position(|template| {
            template.as_ref().map(|t| t.kind) == Some(super::channel::ChannelKind::Book)
        });
        ThalexFeed::with_routes(config, routes, book_channel)
    }

    /// A feed for the channels named (`tickwire decode`, where no venue file says what was
    /// subscribed): each name's target becomes an instrument (an underlying too, for a
    /// `price_index`), in order of first appearance; names no template makes are left out. An
    /// underlying's `recent_trades` channel feeds the instruments its trades name instead:
    /// `trade_instruments` pairs such a channel with each instrument seen in its tuples.
    pub fn for_channels(
        venue_id: VenueId,
        venue_name: &str,
        names: &[String],
        trade_instruments: &[(String, String)],
    ) -> (ThalexFeed, FeedCounters) {
        let mut symbols: Vec<String> = Vec::new();
        let mut channels: Vec<String> = Vec::new();
        let mut routes = Vec::new();
        let mut book_channel = None;
        let position = |list: &mut Vec<String>, item: &str| match list
            .iter()
            .position(|known| known == item)
        {
            Some(index) => index,
            None => {
                list.push(item.to_owned());
                list.len() - 1
            }
        };
        for name in names {
            let Some((template, target)) = Template::split(name) else {
                continue;
            };
            let is_book = template.kind == super::channel::ChannelKind::Book;
            let channel = position(&mut channels, &template.to_string());
            if is_book {
                book_channel.get_or_insert(channel);
            }
            if template.kind == super::channel::ChannelKind::RecentTrades
                && template.targets_underlying()
            {
                for (_, instrument) in trade_instruments.iter().filter(|(of, _)| of == name) {
                    let instrument = position(&mut symbols, instrument);
                    routes.push((name.clone(), instrument, channel));
                }
                continue;
            }
            let instrument = position(&mut symbols, target);
            routes.push((name.clone(), instrument, channel));
        }
        let config = FeedConfig {
            venue_id,
            venue_name: venue_name.to_owned(),
            symbols,
            channels,
            instrument_base: 0,
        };
        ThalexFeed::with_routes(config, routes, book_channel)
    }

    /// The instrument names, by instrument index.
    pub fn symbols(&self) -> &[String] {
        &self.config.symbols
    }

    /// Builds the feed from (channel name, instrument index, channel position) routes.
    fn with_routes(
        config: FeedConfig,
        list: Vec<(String, usize, usize)>,
        book_channel: Option<usize>,
    ) -> (ThalexFeed, FeedCounters) {
        let channels = config.channels.len().max(1);
        let mut by_name: HashMap<Box<[u8]>, Vec<Target>, BuildFastHasher> = HashMap::default();
        for (name, instrument, position) in list {
            by_name
                .entry(name.into_bytes().into_boxed_slice())
                .or_default()
                .push(Target {
                    instrument,
                    stream: instrument * channels + position,
                });
        }
        let routes = Routes {
            by_name: by_name
                .into_iter()
                .map(|(name, targets)| (name, targets.into_boxed_slice()))
                .collect::<HashMap<_, _, BuildFastHasher>>(),
            last: LastRoute::default(),
        };
        let books = (0..config.symbols.len())
            .map(|_| {
                book_channel.map(|_| BookState {
                    book: OrderBook::with_capacity(BOOK_LEVELS),
                    valid: false,
                    top: Quote::default(),
                })
            })
            .collect();
        let activity = Arc::new(StreamActivity::new(config.symbols.len(), channels));
        let (writers, counters) = FeedCounters::new(MESSAGE_KINDS, activity.clone());
        let owners = vec![Owner::NEW; config.symbols.len() * channels];
        let scratch = Scratch {
            bids: Vec::with_capacity(BOOK_LEVELS),
            asks: Vec::with_capacity(BOOK_LEVELS),
            trades: Vec::with_capacity(64),
            channels: Vec::with_capacity(64),
            ..Scratch::default()
        };
        let delivered = vec![RecentTrades::default(); owners.len()];
        let feed = ThalexFeed {
            delivered,
            messages: 0,
            config,
            routes,
            owners,
            books,
            book_channel,
            scratch,
            writers,
            activity,
            replies: ReplyQueue::new(REPLIES_KEPT),
            malformed: MalformedSampler::default(),
        };
        (feed, counters)
    }

    /// Every channel name a shard of `symbols` subscribes, stream by stream (symbol-major, as
    /// the activity table counts streams).
    pub fn channel_names(symbols: &[String], channels: &[String]) -> Vec<String> {
        let templates: Vec<Template> = channels
            .iter()
            .filter_map(|template| Template::parse(template).ok())
            .collect();
        symbols
            .iter()
            .flat_map(|symbol| {
                templates
                    .iter()
                    .map(move |template| template.channel(symbol))
            })
            .collect()
    }

    /// Whether a message for `target` from `conn` passes (see the module docs), and the
    /// bookkeeping that goes with it. `snapshot`: the message carries the stream's whole state
    /// (a book or trades snapshot), which may replace whatever another connection delivered.
    /// `book`: the stream is a book, which only a snapshot may move to another connection.
    #[inline]
    fn admit(
        &mut self,
        target: Target,
        conn: ConnId,
        snapshot: bool,
        book: bool,
        recv_ts_ns: u64,
    ) -> bool {
        let Some(owner) = self.owners.get_mut(target.stream) else {
            return false;
        };
        if owner.current == conn {
            self.activity.saw(target.stream, recv_ts_ns);
            return true;
        }
        let unclaimed = owner.current == NO_CONN;
        if unclaimed || snapshot || (owner.newest == conn && !book) {
            owner.current = conn;
            if !unclaimed {
                self.activity.agreed(target.stream, recv_ts_ns);
            }
            self.activity.saw(target.stream, recv_ts_ns);
            return true;
        }
        self.writers.duplicates.increment();
        false
    }

    fn header(&self, instrument: usize, exchange_ts_ns: u64, recv_ts_ns: u64) -> EventHeader {
        EventHeader {
            exchange_ts_ns,
            recv_ts_ns,
            venue_seq: 0,
            instrument_id: self.config.instrument_base + instrument as InstrumentId,
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

    fn malformed(&mut self, error: DecodeError, payload: &[u8], recv_ts_ns: u64) {
        self.writers.malformed.increment();
        self.malformed.offer(
            self.config.venue_id,
            &error,
            error.offset(),
            payload,
            recv_ts_ns,
        );
    }

    /// A subscription answer named these channels: they are now `conn`'s newest.
    fn accepted(&mut self, payload: &[u8], conn: ConnId) {
        for index in 0..self.scratch.channels.len() {
            let (start, end) = self.scratch.channels[index];
            let Some(targets) = payload
                .get(start..end)
                .and_then(|name| self.routes.get(name))
            else {
                continue;
            };
            for target in targets {
                if let Some(owner) = self.owners.get_mut(target.stream) {
                    owner.newest = conn;
                }
                self.activity.accept(target.stream, conn);
            }
        }
    }

    #[inline]
    fn quote(
        &self,
        instrument: usize,
        exchange_ts_ns: u64,
        recv_ts_ns: u64,
        quote: Quote,
        last: bool,
        out: &mut EventSink<'_>,
    ) {
        let mut header = self.header(instrument, exchange_ts_ns, recv_ts_ns);
        if last {
            header.flags |= flags::LAST;
        }
        out.push(Event::new(header, Body::Quote(quote)));
    }

    #[inline]
    fn reference(
        &self,
        instrument: usize,
        kind: ReferenceKind,
        price: Fixed,
        exchange_ts_ns: u64,
        recv_ts_ns: u64,
        out: &mut EventSink<'_>,
    ) {
        let mut header = self.header(instrument, exchange_ts_ns, recv_ts_ns);
        header.flags |= flags::LAST;
        out.push(Event::new(
            header,
            Body::Reference(Reference::new(kind, price)),
        ));
    }

    /// The message's trades (`scratch.trades`), each to its stream: a book's trades to the
    /// book's `target`; with `named` (a `recent_trades` channel) to the target whose symbol is
    /// the trade's `instrument_name`, or counted as unrouted when the venue file does not list
    /// it. Every delivered trade is remembered per stream; in a snapshot, trades delivered
    /// already (a re-subscription's snapshot repeats the last ones; a book's may reach back to
    /// the gateway's restart) are dropped as duplicates: see [`RecentTrades::delivered_before`].
    /// Thalex trades have no id: `trade_id` and `venue_seq` are 0.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site per channel kind, each argument a plain value"
    )]
    fn trades(
        &mut self,
        conn: ConnId,
        channel: &[u8],
        book_target: Option<Target>,
        snapshot: bool,
        payload: &[u8],
        recv_ts_ns: u64,
        out: &mut EventSink<'_>,
    ) {
        self.messages += 1;
        let message = self.messages;
        let mut pending: Option<Event> = None;
        for index in 0..self.scratch.trades.len() {
            let trade = self.scratch.trades[index];
            let target = match book_target {
                Some(target) => target,
                None => {
                    let name = payload
                        .get(trade.instrument.0..trade.instrument.1)
                        .unwrap_or_default();
                    let symbols = &self.config.symbols;
                    let found = self.routes.get(channel).and_then(|targets| {
                        targets
                            .iter()
                            .find(|target| symbols[target.instrument].as_bytes() == name)
                            .copied()
                    });
                    match found {
                        Some(target) => target,
                        None => {
                            self.writers.unknown_symbol.increment();
                            continue;
                        }
                    }
                }
            };
            if book_target.is_none() && !self.admit(target, conn, snapshot, false, recv_ts_ns) {
                continue;
            }
            let Some(memory) = self.delivered.get_mut(target.stream) else {
                continue;
            };
            if snapshot && memory.delivered_before(message, trade.key, trade.time_ns) {
                self.writers.duplicates.increment();
                continue;
            }
            memory.push(trade.key, trade.time_ns);
            if let Some(event) = pending.take() {
                out.push(event);
            }
            let header = self.header(target.instrument, trade.time_ns, recv_ts_ns);
            let aggressor = if trade.buy { Side::Bid } else { Side::Ask };
            pending = Some(Event::new(
                header,
                Body::Trade(Trade::new(trade.price, trade.amount, 0, aggressor)),
            ));
        }
        if let Some(mut event) = pending {
            event.header.flags |= flags::LAST;
            out.push(event);
        }
    }

    /// A book message for `instrument`: a snapshot replaces the book, changes update it.
    fn book(
        &mut self,
        instrument: usize,
        snapshot: bool,
        time_ns: u64,
        recv_ts_ns: u64,
        out: &mut EventSink<'_>,
    ) {
        let mut header = self.header(instrument, time_ns, recv_ts_ns);
        let Some(state) = self.books.get_mut(instrument).and_then(Option::as_mut) else {
            return;
        };
        let scratch = &self.scratch;
        if snapshot {
            state.book.clear();
            for &(price, amount) in &scratch.bids {
                state.book.set(BookSide::Bid, price, amount);
            }
            for &(price, amount) in &scratch.asks {
                state.book.set(BookSide::Ask, price, amount);
            }
            state.valid = true;
            self.writers.book_syncs.increment();
            let levels = Snapshot {
                bid_levels: state.book.len(BookSide::Bid) as u32,
                ask_levels: state.book.len(BookSide::Ask) as u32,
                snapshot_id: 0,
                _reserved: [0; 2],
            };
            header.flags |= flags::SNAPSHOT;
            out.push(Event::new(header, Body::SnapshotBegin(levels)));
            for side in [BookSide::Bid, BookSide::Ask] {
                let event_side = match side {
                    BookSide::Bid => Side::Bid,
                    BookSide::Ask => Side::Ask,
                };
                for (price, size) in state.book.levels(side) {
                    out.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(event_side, price, size)),
                    ));
                }
            }
            header.flags &= !flags::SNAPSHOT;
            out.push(Event::new(header, Body::SnapshotEnd(levels)));
        } else if state.valid {
            let sides = [
                (BookSide::Bid, Side::Bid, &scratch.bids),
                (BookSide::Ask, Side::Ask, &scratch.asks),
            ];
            for (side, event_side, levels) in sides {
                for &(price, amount) in levels.iter() {
                    state.book.set(side, price, amount);
                    out.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(event_side, price, amount)),
                    ));
                }
            }
        } else {
            // Changes before the snapshot that rebuilds the book: nothing to apply them to.
            return;
        }
        let top = state.book.top();
        if top != state.top {
            state.top = top;
            header.flags |= flags::DERIVED;
            out.push(Event::new(header, Body::Quote(top)));
        }
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the decoded message's parts, passed as they come"
    )]
    fn notification(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        channel: &[u8],
        explicit_snapshot: Option<bool>,
        body: Notification<'_>,
        payload: &[u8],
        out: &mut EventSink<'_>,
    ) {
        let kind = Kind::of(&body);
        if let Notification::System { event } = body {
            self.writers.message(kind as usize);
            if event == b"reconnect" {
                self.reply(VenueReply::reconnect_notice(self.config.venue_id, conn));
            }
            return;
        }
        let Some((first, count)) = self.routes.first(channel) else {
            self.writers.unknown_symbol.increment();
            return;
        };
        let is_book = matches!(body, Notification::Book { .. });
        // A book notification is a snapshot only when it says so (Thalex's official client);
        // other channels' first notification on a connection is theirs (api.yaml), unless a
        // `snapshot` key says otherwise.
        let first_on_conn = self
            .owners
            .get_mut(first.stream)
            .is_some_and(|owner| owner.first_on(conn));
        let snapshot = explicit_snapshot.unwrap_or(first_on_conn && !is_book);
        if let Notification::Trades = body {
            self.writers.message(kind as usize);
            self.trades(conn, channel, None, snapshot, payload, recv_ts_ns, out);
            return;
        }
        let mut delivered = false;
        // A price index can feed several instruments (looked up again for the second on, so
        // that the handlers may borrow the feed); every other channel here feeds one.
        for index in 0..count {
            let target = if index == 0 {
                first
            } else {
                match self
                    .routes
                    .get(channel)
                    .and_then(|targets| targets.get(index))
                {
                    Some(&target) => target,
                    None => break,
                }
            };
            if !self.admit(target, conn, snapshot, is_book, recv_ts_ns) {
                continue;
            }
            delivered = true;
            let instrument = target.instrument;
            match body {
                Notification::Ticker => {
                    let ticker = &self.scratch.ticker;
                    let has_quote = ticker.bid_px.is_some() || ticker.ask_px.is_some();
                    if has_quote {
                        let quote = Quote {
                            bid_px: ticker.bid_px.unwrap_or_default(),
                            bid_sz: ticker.bid_amount.unwrap_or_default(),
                            ask_px: ticker.ask_px.unwrap_or_default(),
                            ask_sz: ticker.ask_amount.unwrap_or_default(),
                        };
                        let last = ticker.mark_px.is_none() && ticker.index_px.is_none();
                        self.quote(instrument, ticker.mark_ts_ns, recv_ts_ns, quote, last, out);
                    }
                    if let Some(mark) = ticker.mark_px {
                        let mut header = self.header(instrument, ticker.mark_ts_ns, recv_ts_ns);
                        if ticker.index_px.is_none() {
                            header.flags |= flags::LAST;
                        }
                        out.push(Event::new(
                            header,
                            Body::Reference(Reference::new(ReferenceKind::Mark, mark)),
                        ));
                    }
                    if let Some(index) = ticker.index_px {
                        self.reference(
                            instrument,
                            ReferenceKind::Index,
                            index,
                            ticker.mark_ts_ns,
                            recv_ts_ns,
                            out,
                        );
                    }
                }
                Notification::Lwt => {
                    let lwt = &self.scratch.lwt;
                    let (bid_px, bid_sz) = lwt.bid.unwrap_or_default();
                    let (ask_px, ask_sz) = lwt.ask.unwrap_or_default();
                    let quote = Quote {
                        bid_px,
                        bid_sz,
                        ask_px,
                        ask_sz,
                    };
                    self.quote(instrument, 0, recv_ts_ns, quote, lwt.mark_px.is_none(), out);
                    if let Some(mark) = lwt.mark_px {
                        self.reference(instrument, ReferenceKind::Mark, mark, 0, recv_ts_ns, out);
                    }
                }
                Notification::Book { time_ns } => {
                    self.book(instrument, snapshot, time_ns, recv_ts_ns, out);
                    if !self.scratch.trades.is_empty() {
                        self.trades(
                            conn,
                            channel,
                            Some(target),
                            snapshot,
                            payload,
                            recv_ts_ns,
                            out,
                        );
                    }
                }
                Notification::Index(index) => {
                    self.reference(
                        instrument,
                        ReferenceKind::Index,
                        index.price,
                        index.time_ns,
                        recv_ts_ns,
                        out,
                    );
                }
                // Trades and system events were handled above; a channel this build does not
                // decode makes no event.
                Notification::Trades | Notification::System { .. } | Notification::Other => {}
            }
        }
        if delivered {
            self.writers.message(kind as usize);
        }
    }
}

impl Feed for ThalexFeed {
    #[inline]
    fn on_message(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        let out = sink;
        match decode::decode(payload, &mut self.scratch) {
            Ok(Message::Notification {
                channel,
                snapshot,
                body,
            }) => self.notification(conn, recv_ts_ns, channel, snapshot, body, payload, out),
            Ok(Message::Response { id, outcome }) => {
                let venue = self.config.venue_id;
                match outcome {
                    Outcome::Error { code, message } => {
                        self.writers.message(Kind::Error as usize);
                        // `id: null` (a request the venue could not read) is still worth a
                        // log line: it goes to the connection's slot, request 0.
                        let id = id.unwrap_or(u64::from(conn) << 32);
                        self.reply(VenueReply::new(venue, id, Some(code), message));
                    }
                    Outcome::Channels | Outcome::Done => {
                        self.writers.message(Kind::Result as usize);
                        if outcome == Outcome::Channels {
                            self.accepted(payload, conn);
                        }
                        if let Some(id) = id {
                            self.reply(VenueReply::new(venue, id, None, b""));
                        }
                    }
                }
            }
            Err(error) => self.malformed(error, payload, recv_ts_ns),
        }
    }

    fn on_disconnect(
        &mut self,
        conn: ConnId,
        instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let base = self.config.instrument_base;
        let channels = self.activity.channels();
        // Its next connection's first message on every channel is a snapshot again (the seen
        // list sits on a channel's first stream, which another shard's instrument may own).
        for owner in &mut self.owners {
            owner.forget(conn);
        }
        for instrument in instruments {
            let index = instrument.wrapping_sub(base) as usize;
            if index >= self.config.symbols.len() {
                continue;
            }
            // Streams another connection already took over (a replacement that went live
            // before this one dropped) lost nothing.
            let mut lost = false;
            let mut book_lost = false;
            for position in 0..channels {
                let Some(owner) = self.owners.get_mut(index * channels + position) else {
                    continue;
                };
                if owner.current == conn || owner.current == NO_CONN {
                    owner.current = NO_CONN;
                    lost = true;
                    book_lost |= self.book_channel == Some(position);
                }
            }
            if !lost {
                continue;
            }
            if let (true, Some(Some(state))) = (book_lost, self.books.get_mut(index)) {
                state.valid = false;
                state.book.clear();
                state.top = Quote::default();
                self.writers.book_gaps.increment();
            }
            sink.push(crate::venue::feed::reconnect_gap(
                self.config.venue_id,
                instrument,
                now_ns,
            ));
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
            .filter(|state| state.valid)
            .map_or(0, |state| {
                crate::venue::emit::order_book_events(&state.book)
            })
    }

    fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) -> usize {
        let base = self.config.instrument_base;
        // Thalex books carry no sequence (see the module doc): `venue_seq` stays 0.
        let selected = crate::venue::emit::selected_books(instrument, base, self.books.len());
        let books = self.books.get(selected.clone()).unwrap_or_default();
        let books = books.iter().zip(selected).map(|(state, index)| {
            let book = state
                .as_ref()
                .filter(|state| state.valid)
                .map(|state| (&state.book, 0));
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

    fn feed(channels: &[&str]) -> ThalexFeed {
        ThalexFeed::new(FeedConfig {
            venue_id: 0,
            venue_name: "thalex".into(),
            symbols: vec!["BTC-PERPETUAL".into()],
            channels: channels.iter().map(|c| c.to_string()).collect(),
            instrument_base: 0,
        })
        .0
    }

    #[test]
    fn the_last_route_kept_answers_only_for_its_own_name() {
        // Names of 7 to 33 bytes, each routed to a stream of its own; after each is found,
        // every one-byte change of it (and every other name) gets what the table says.
        let names: Vec<Vec<u8>> = (7..=33)
            .map(|len| (0..len).map(|at| b'a' + (at % 26) as u8).collect())
            .collect();
        let mut by_name = HashMap::default();
        for (index, name) in names.iter().enumerate() {
            let target = Target {
                instrument: index,
                stream: index,
            };
            by_name.insert(
                name.clone().into_boxed_slice(),
                vec![target].into_boxed_slice(),
            );
        }
        let mut routes = Routes {
            by_name,
            last: LastRoute::default(),
        };
        let expected = |routes: &Routes, name: &[u8]| {
            routes
                .get(name)
                .map(|targets| (targets[0].instrument, targets.len()))
        };
        for name in &names {
            let found = routes
                .first(name)
                .map(|(target, count)| (target.instrument, count));
            assert_eq!(found, expected(&routes, name));
            assert_eq!(routes.last.len != 0, (8..=32).contains(&name.len()));
            for at in 0..name.len() {
                let mut changed = name.clone();
                changed[at] ^= 0x20;
                routes.first(name);
                let found = routes
                    .first(&changed)
                    .map(|(target, count)| (target.instrument, count));
                assert_eq!(found, expected(&routes, &changed), "{changed:?}");
            }
            for other in &names {
                routes.first(name);
                let found = routes
                    .first(other)
                    .map(|(target, count)| (target.instrument, count));
                assert_eq!(found, expected(&routes, other));
            }
        }
        assert!(routes.first(b"").is_none());
    }

    /// Feeds `messages` on `conn`, returns the events.
    fn run(feed: &mut ThalexFeed, conn: ConnId, messages: &[&str]) -> Vec<Event> {
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(1024);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        for message in messages {
            feed.on_message(conn, 1, message.as_bytes(), &mut sink);
        }
        sink.publish();
        std::iter::from_fn(|| consumer.try_pop()).collect()
    }

    /// (price, exchange time) of every trade event.
    fn trades_of(events: &[Event]) -> Vec<(i64, u64)> {
        events
            .iter()
            .filter_map(|e| match e.body() {
                Body::Trade(trade) => {
                    assert_eq!(trade.trade_id, 0, "Thalex trades have no id");
                    Some((trade.price.raw() / 1_000_000_000, e.header.exchange_ts_ns))
                }
                _ => None,
            })
            .collect()
    }

    /// A `recent_trades` notification of api.yaml's tuples, one per (price, time in s).
    fn trades_message(channel: &str, instrument: &str, trades: &[(i64, u64)]) -> String {
        let tuples: Vec<String> = trades
            .iter()
            .map(|(price, time)| format!(r#"[{price},1,"buy",{time}.25,"{instrument}",false]"#))
            .collect();
        format!(
            r#"{{"channel_name":"{channel}","notification":[{}]}}"#,
            tuples.join(",")
        )
    }

    const SINGLE: &str = "recent_trades.BTC-PERPETUAL.single";

    fn ns(seconds: u64) -> u64 {
        seconds * 1_000_000_000 + 250_000_000
    }

    fn disconnect(feed: &mut ThalexFeed, conn: ConnId) {
        let (mut producer, mut _consumer) = crate::ring::ring::<Event>(16);
        let mut lost = false;
        feed.on_disconnect(conn, 0..1, 2, &mut EventSink::new(&mut producer, &mut lost));
    }

    #[test]
    fn a_resubscription_snapshot_does_not_repeat_delivered_trades() {
        let mut feed = feed(&["recent_trades.single"]);
        // The first notification is the snapshot: all of it is new.
        let first = run(
            &mut feed,
            0,
            &[
                &trades_message(SINGLE, "BTC-PERPETUAL", &[(1, 1), (2, 2), (3, 3)]),
                &trades_message(SINGLE, "BTC-PERPETUAL", &[(4, 4)]),
            ],
        );
        assert_eq!(
            trades_of(&first),
            [(1, ns(1)), (2, ns(2)), (3, ns(3)), (4, ns(4))]
        );
        // The connection drops; the new one's snapshot repeats the last trades, one older than
        // anything remembered, and one new.
        disconnect(&mut feed, 0);
        let second = run(
            &mut feed,
            0,
            &[
                &trades_message(SINGLE, "BTC-PERPETUAL", &[(0, 0), (3, 3), (4, 4), (5, 5)]),
                &trades_message(SINGLE, "BTC-PERPETUAL", &[(6, 6)]),
            ],
        );
        assert_eq!(trades_of(&second), [(5, ns(5)), (6, ns(6))]);
        assert_eq!(feed.writers.duplicates.get(), 3);
    }

    #[test]
    fn identical_tuples_are_told_apart_by_count() {
        let mut feed = feed(&["recent_trades.single"]);
        // Two fills with the same price, size, side and time: both are trades.
        let both = run(
            &mut feed,
            0,
            &[&trades_message(SINGLE, "BTC-PERPETUAL", &[(7, 7), (7, 7)])],
        );
        assert_eq!(trades_of(&both), [(7, ns(7)), (7, ns(7))]);
        disconnect(&mut feed, 0);
        // A re-snapshot with three: two were delivered, the third is new.
        let again = run(
            &mut feed,
            1,
            &[&trades_message(
                SINGLE,
                "BTC-PERPETUAL",
                &[(7, 7), (7, 7), (7, 7)],
            )],
        );
        assert_eq!(trades_of(&again), [(7, ns(7))]);
    }

    #[test]
    fn an_underlying_channel_routes_each_trade_to_its_instrument() {
        let (mut feed, counters) = ThalexFeed::new(FeedConfig {
            venue_id: 0,
            venue_name: "thalex".into(),
            symbols: vec!["BTC-PERPETUAL".into(), "BTC-27JUN25".into()],
            channels: vec!["recent_trades.all".into()],
            instrument_base: 10,
        });
        let channel = "recent_trades.BTCUSD.all";
        let text = format!(
            r#"{{"channel_name":"{channel}","notification":[[1,1,"buy",1,"BTC-27JUN25",false],[2,1,"sell",2,"BTC-PERPETUAL",true],[3,1,"buy",3,"BTC-29AUG25",false]]}}"#
        );
        let events = run(&mut feed, 0, &[&text]);
        let routed: Vec<(u32, i64)> = events
            .iter()
            .map(|e| {
                (
                    e.header.instrument_id,
                    e.header.exchange_ts_ns as i64 / 1_000_000_000,
                )
            })
            .collect();
        assert_eq!(routed, [(11, 1), (10, 2)]);
        assert_ne!(events[1].header.flags & flags::LAST, 0);
        assert_eq!(
            counters.unknown_symbol.get(),
            1,
            "BTC-29AUG25 is not configured"
        );
    }

    #[test]
    fn a_book_message_marked_snapshot_builds_the_book() {
        let mut feed = feed(&["book.none.all.raw"]);
        let book = "book.BTC-PERPETUAL.none.all.raw";
        let snapshot = format!(
            r#"{{"channel_name":"{book}","notification":{{"trades":[[10,1,"sell",1,false]],"bid_changes":[[10,1,1],[9,2,2]],"ask_changes":[[11,1,1]],"total_bid_amount":3,"total_ask_amount":1,"time":1.5}},"snapshot":true}}"#
        );
        let change = format!(
            r#"{{"channel_name":"{book}","notification":{{"trades":[[11,1,"buy",2,false]],"bid_changes":[[10,0,0]],"ask_changes":[],"total_bid_amount":2,"total_ask_amount":1,"time":2.5}}}}"#
        );
        let events = run(&mut feed, 0, &[&snapshot, &change]);
        assert!(matches!(events[0].body(), Body::SnapshotBegin(_)));
        let quotes: Vec<Quote> = events
            .iter()
            .filter_map(|e| match e.body() {
                Body::Quote(quote) => Some(quote),
                _ => None,
            })
            .collect();
        assert_eq!(quotes.last().map(|q| q.bid_px.raw()), Some(9_000_000_000));
        assert_eq!(
            trades_of(&events),
            [(10, 1_000_000_000), (11, 2_000_000_000)]
        );
        // A new connection's snapshot repeats the book's old trade: not delivered again.
        disconnect(&mut feed, 0);
        let events = run(&mut feed, 1, &[&snapshot]);
        assert!(matches!(events[0].body(), Body::SnapshotBegin(_)));
        assert!(trades_of(&events).is_empty());
    }

    #[test]
    fn only_the_owning_connection_passes_and_a_snapshot_moves_a_book() {
        let mut feed = feed(&["book.1.10.raw"]);
        let snapshot = r#"{"channel_name":"book.BTC-PERPETUAL.1.10.raw","snapshot":true,"notification":{"bid_changes":[[10,1,1]],"ask_changes":[[11,1,1]],"trades":[],"time":1}}"#;
        let change = r#"{"channel_name":"book.BTC-PERPETUAL.1.10.raw","notification":{"bid_changes":[[10,2,2]],"ask_changes":[],"trades":[],"time":2}}"#;
        let answer = r#"{"id":1,"result":["book.BTC-PERPETUAL.1.10.raw","system"]}"#;
        assert!(!run(&mut feed, 0, &[snapshot, change]).is_empty());
        // A second connection subscribes; until its snapshot, the first one's changes pass.
        assert!(run(&mut feed, 1, &[answer]).is_empty());
        assert!(!run(&mut feed, 0, &[change]).is_empty());
        // Its first notification is no snapshot: it moves nothing.
        assert!(run(&mut feed, 1, &[change]).is_empty());
        assert!(!run(&mut feed, 0, &[change]).is_empty());
        // Its snapshot moves the book; from then on the old connection is the duplicate.
        let moved = run(&mut feed, 1, &[snapshot]);
        assert!(matches!(moved[0].body(), Body::SnapshotBegin(_)));
        assert!(run(&mut feed, 0, &[change]).is_empty());
        assert!(!run(&mut feed, 1, &[change]).is_empty());
        assert_eq!(feed.activity.accepted_on(0), Some(1));
        assert!(
            feed.activity.agree_ns(0) > 0,
            "the switch is the rotation's agreement"
        );
        // A later snapshot on the owning connection rebuilds the book whole.
        let keyed = r#"{"channel_name":"book.BTC-PERPETUAL.1.10.raw","notification":{"bid_changes":[[10,5,5]],"ask_changes":[[12,1,1]],"trades":[],"time":3},"snapshot":true}"#;
        let events = run(&mut feed, 1, &[keyed]);
        assert!(matches!(events[0].body(), Body::SnapshotBegin(_)));
    }

    /// The kinds of `events`, in order, for short assertions.
    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events
            .iter()
            .map(|event| match event.body() {
                Body::SnapshotBegin(_) => "begin",
                Body::BookLevel(_) => "level",
                Body::SnapshotEnd(_) => "end",
                Body::Quote(_) => "quote",
                Body::Trade(_) => "trade",
                _ => "other",
            })
            .collect()
    }

    #[test]
    fn a_capture_that_starts_mid_stream_has_no_book_until_a_snapshot() {
        let (mut feed, counters) = ThalexFeed::new(FeedConfig {
            venue_id: 0,
            venue_name: "thalex".into(),
            symbols: vec!["BTC-PERPETUAL".into()],
            channels: vec!["book.none.all.raw".into()],
            instrument_base: 0,
        });
        let book = "book.BTC-PERPETUAL.none.all.raw";
        // Updates without the key: the first one of the connection included.
        let update = |bid: u32, trade: u32| {
            format!(
                r#"{{"channel_name":"{book}","notification":{{"trades":[[{trade},1,"buy",{trade},false]],"bid_changes":[[{bid},1,1]],"ask_changes":[[50,1,1]],"time":2}}}}"#
            )
        };
        let events = run(&mut feed, 0, &[&update(10, 1), &update(11, 2)]);
        assert_eq!(
            kinds(&events),
            ["trade", "trade"],
            "no level, no quote, no snapshot from partial updates; their trades pass"
        );
        assert_eq!(trades_of(&events), [(1, 1_000_000_000), (2, 2_000_000_000)]);
        let instrument = 0;
        let mut emitted = Vec::new();
        {
            let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
            let mut lost = false;
            let mut sink = EventSink::new(&mut producer, &mut lost);
            feed.emit_books(instrument, 5, &mut sink);
            sink.publish();
            emitted.extend(std::iter::from_fn(|| consumer.try_pop()));
        }
        assert!(
            !emitted
                .iter()
                .any(|event| matches!(event.body(), Body::BookLevel(_))),
            "no book to emit: {emitted:?}"
        );
        assert_eq!(counters.book_syncs.get(), 0);
        // The snapshot builds the book from its own levels only.
        let snapshot = format!(
            r#"{{"channel_name":"{book}","snapshot":true,"notification":{{"trades":[],"bid_changes":[[9,2,2]],"ask_changes":[[12,1,1]],"time":3}}}}"#
        );
        let events = run(&mut feed, 0, &[&snapshot, &update(10, 4)]);
        assert_eq!(
            kinds(&events),
            ["begin", "level", "level", "end", "quote", "level", "level", "quote", "trade"]
        );
        let Some(Body::Quote(top)) = events.iter().rev().find_map(|event| match event.body() {
            quote @ Body::Quote(_) => Some(quote),
            _ => None,
        }) else {
            panic!()
        };
        assert_eq!(
            (top.bid_px.raw(), top.ask_px.raw()),
            (10_000_000_000, 12_000_000_000),
            "the update after the snapshot applies; the two before it left nothing"
        );
        assert_eq!(counters.book_syncs.get(), 1);
    }

    #[test]
    fn an_escaped_channel_name_is_malformed_and_publishes_nothing() {
        let (mut feed, counters) = ThalexFeed::new(FeedConfig {
            venue_id: 0,
            venue_name: "thalex".into(),
            symbols: vec!["BTC-PERPETUAL".into()],
            channels: vec!["ticker.100ms".into()],
            instrument_base: 0,
        });
        let escaped = r#"{"channel_name":"ticker.BTC\u002dPERPETUAL.100ms","notification":{"best_bid_price":1,"best_ask_price":2}}"#;
        assert!(run(&mut feed, 0, &[escaped]).is_empty());
        assert_eq!(counters.malformed.get(), 1);
        assert_eq!(counters.unknown_symbol.get(), 0);
        let plain = escaped.replace("\\u002d", "-");
        assert_eq!(run(&mut feed, 0, &[&plain]).len(), 1);
    }

    #[test]
    fn a_ticker_gives_quote_mark_and_index() {
        let mut feed = feed(&["ticker.100ms"]);
        let text = r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":76000,"best_bid_amount":1,"best_ask_price":76001,"best_ask_amount":2,"mark_price":76000.5,"mark_timestamp":1776715497.5,"index":76283.25916666667}}"#;
        let events = run(&mut feed, 0, &[text]);
        assert_eq!(events.len(), 3);
        assert!(matches!(events[0].body(), Body::Quote(_)));
        let references: Vec<(ReferenceKind, i64)> = events[1..]
            .iter()
            .filter_map(|e| match e.body() {
                Body::Reference(reference) => Some((reference.kind(), reference.price.raw())),
                _ => None,
            })
            .collect();
        assert_eq!(
            references,
            [
                (ReferenceKind::Mark, 76_000_500_000_000),
                (ReferenceKind::Index, 76_283_259_166_667)
            ]
        );
        assert_eq!(events[2].header.flags & flags::LAST, flags::LAST);
        assert_eq!(events[1].header.flags & flags::LAST, 0);
        assert!(events
            .iter()
            .all(|e| e.header.exchange_ts_ns == 1_776_715_497_500_000_000));
        // Counted once, as what it is: a ticker.
        assert_eq!(feed.writers.messages(Kind::Ticker as usize), 1);
        assert_eq!(MESSAGE_KINDS[Kind::Ticker as usize].name, "ticker");
    }
}
