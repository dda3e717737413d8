//! One Binance Spot WebSocket message in, one typed, borrowed [`Message`] out: no DOM, no
//! allocation, one pass over the bytes for every message the venue sends in its own layout.
//!
//! The shapes are those of Binance Spot's "WebSocket Streams for Binance"
//! (`web-socket-streams.md`, binance-spot-api-docs commit a5e0bc3, 2026-07-21):
//!
//! - `<symbol>@bookTicker`: `{"u":..,"s":..,"b":..,"B":..,"a":..,"A":..}`. Unlike USD-M's, it
//!   has **no** event type, event time or transaction time.
//! - `<symbol>@trade`: `e`, `E`, `s`, `t`, `p`, `q`, `T`, `m`, `M` (the buyer and seller order
//!   ids `b` and `a` were removed on 2024-06-18, CHANGELOG).
//! - `<symbol>@aggTrade`: `e`, `E`, `s`, `a`, `p`, `q`, `f`, `l`, `T`, `m`, `M`.
//! - `<symbol>@depth` and `<symbol>@depth@100ms`: `depthUpdate` with `E`, `s`, `U`, `u`, `b`,
//!   `a`; no `T` and no `pu` (the chain is `U` = previous `u` + 1).
//! - `<symbol>@depth<5|10|20>[@100ms]`: `{"lastUpdateId":..,"bids":..,"asks":..}`, the same
//!   shape as the REST snapshot `GET /api/v3/depth` (`rest-api.md`), no symbol: only the
//!   combined stream's `stream` name says whose book it is.
//! - Replies to `SUBSCRIBE` and friends (`{"result":null,"id":1}`), the error answers
//!   (`{"code":2,"msg":".."}`, with or without `id`), and any other event (`serverShutdown`,
//!   `avgPrice`, ...) as [`Message::Unknown`].
//!
//! Each comes raw (`/ws/<stream>`) or wrapped (`/stream?streams=..`:
//! `{"stream":"btcusdt@bookTicker","data":{..}}`).
//!
//! How the type is found: the wrapper's stream name (its channel) when `stream` comes before
//! `data`, as Binance sends it; otherwise `"e"` when it is the first key; otherwise one skipping
//! pass over the object finds which keys it has (`e` names an event; `lastUpdateId` a book;
//! `u` with `s` a bookTicker; `result`, `error` or `code` a reply), then the typed pass reads it.
//! Key order is never assumed for correctness. A bookTicker, depthUpdate or trade in the venue's
//! own layout is read with literal compares first (`fast`), its levels checked once and read
//! without re-checking as USD-M's are.
//!
//! The readers underneath are the USD-M decoder's (`venue::binance::decode`'s cursor over the
//! shared `venue::json` cursor, and `binance::scan`): the same strictness (RFC 8259, duplicate
//! keys refused, exact decimals into [`Fixed`], integers into `u64` with overflow refused) and
//! the same [`DecodeError`].

use crate::fixed::Fixed;
use crate::venue::binance::decode::{
    read_once, Cursor, DecodeError, DecodeErrorKind, Levels, ReplyResult, TradeKind, TradePrint,
};
use crate::venue::json::Members;

pub use crate::venue::binance::decode::sample;

type Result<T> = std::result::Result<T, DecodeError>;

/// One decoded message. Everything borrowed points into the bytes given to [`decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `<symbol>@bookTicker`.
    BookTicker(BookTicker<'a>),
    /// `<symbol>@depth`, `<symbol>@depth@100ms`: a diff.
    Depth(DepthUpdate<'a>),
    /// `<symbol>@depth5/10/20[@100ms]` on the combined stream: the top levels whole.
    PartialDepth(PartialDepth<'a>),
    /// `<symbol>@trade` and `<symbol>@aggTrade`. For both, `trade_time_ms` is `T` and
    /// `event_time_ms` is `E`.
    Trade(TradePrint<'a>),
    /// `{"lastUpdateId":..,"bids":..,"asks":..}` without a stream name: the body of
    /// `GET /api/v3/depth`, or a raw (`/ws/`) partial depth message, which looks the same.
    DepthSnapshot(DepthSnapshot<'a>),
    /// `{"result":null,"id":1}`: a SUBSCRIBE, UNSUBSCRIBE or SET_PROPERTY succeeded.
    Ack { id: Option<u64> },
    /// `{"result":["btcusdt@aggTrade"],"id":3}`: the LIST_SUBSCRIPTIONS answer, `streams` the
    /// raw JSON array, checked to hold `count` strings.
    Subscriptions {
        id: Option<u64>,
        streams: &'a [u8],
        count: usize,
    },
    /// Any other `result` (GET_PROPERTY's `true`): the raw JSON value.
    Reply { id: Option<u64>, result: &'a [u8] },
    /// `{"code":2,"msg":"..","id":1}` (the documented "Error Messages"), or
    /// `{"error":{"code":..,"msg":..},"id":..}`. `msg` is raw, escapes included.
    ErrorReply {
        id: Option<u64>,
        code: i64,
        msg: &'a [u8],
    },
    /// An event this decoder does not read (`serverShutdown`, `avgPrice`, a kline...): its
    /// `"e"`, or the wrapper's stream name when it has no `"e"`.
    Unknown {
        stream: Option<&'a [u8]>,
        event_type: &'a [u8],
    },
}

impl<'a> Message<'a> {
    /// The combined-stream name the wrapper gave, for market events that came wrapped.
    pub fn stream(&self) -> Option<&'a [u8]> {
        match self {
            Message::BookTicker(m) => m.stream,
            Message::Depth(m) => m.stream,
            Message::PartialDepth(m) => Some(m.stream),
            Message::Trade(m) => m.stream,
            Message::Unknown { stream, .. } => *stream,
            Message::DepthSnapshot(_)
            | Message::Ack { .. }
            | Message::Subscriptions { .. }
            | Message::Reply { .. }
            | Message::ErrorReply { .. } => None,
        }
    }
}

/// `bookTicker`: `u`, `s`, `b`, `B`, `a`, `A`. Spot sends no time: events made from it carry
/// `NO_EXCHANGE_TS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookTicker<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    /// `u`: the order book update id.
    pub update_id: u64,
    pub bid_px: Fixed,
    pub bid_qty: Fixed,
    pub ask_px: Fixed,
    pub ask_qty: Fixed,
}

/// `depthUpdate`: `E`, `s`, `U`, `u`, `b`, `a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthUpdate<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    /// `U`: the first update id in this event.
    pub first_update_id: u64,
    /// `u`: the final update id in this event.
    pub final_update_id: u64,
    /// `E`: Spot's diffs carry no transaction time.
    pub event_time_ms: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// A partial book depth message: `lastUpdateId`, `bids`, `asks`, and the stream it came on
/// (which alone names the symbol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialDepth<'a> {
    pub stream: &'a [u8],
    pub last_update_id: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

impl<'a> PartialDepth<'a> {
    /// The symbol as the stream name spells it (lowercase): the part before the first `@`.
    pub fn stream_symbol(&self) -> &'a [u8] {
        stream_symbol(self.stream)
    }
}

/// The symbol part of a stream name, before its first `@`.
pub fn stream_symbol(stream: &[u8]) -> &[u8] {
    let end = stream
        .iter()
        .position(|&byte| byte == b'@')
        .unwrap_or(stream.len());
    stream.get(..end).unwrap_or_default()
}

/// `GET /api/v3/depth`'s body: `lastUpdateId`, `bids`, `asks` (no event or transaction time,
/// unlike USD-M's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthSnapshot<'a> {
    pub last_update_id: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// The market event kinds this decoder reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    BookTicker,
    Depth,
    PartialDepth,
    Trade,
    AggTrade,
}

impl Kind {
    fn from_event_type(event_type: &[u8]) -> Option<Kind> {
        match event_type {
            b"depthUpdate" => Some(Kind::Depth),
            b"trade" => Some(Kind::Trade),
            b"aggTrade" => Some(Kind::AggTrade),
            _ => None,
        }
    }

    /// The `"e"` a body of this kind may carry (Spot's bookTicker and partial depth carry none;
    /// a `"bookTicker"` is taken as agreeing, as USD-M sends it).
    fn event_type(self) -> &'static [u8] {
        match self {
            Kind::BookTicker => b"bookTicker",
            Kind::Depth => b"depthUpdate",
            Kind::PartialDepth => b"",
            Kind::Trade => b"trade",
            Kind::AggTrade => b"aggTrade",
        }
    }

    /// The kind a stream name promises: its channel after the first `@`, without the update
    /// speed (`btcusdt@depth20@100ms` is partial depth). `None` for channels not read here.
    fn from_stream(stream: &[u8]) -> Option<Kind> {
        let mut parts = stream.split(|&byte| byte == b'@');
        let _symbol = parts.next();
        match parts.next()? {
            b"bookTicker" => Some(Kind::BookTicker),
            b"trade" => Some(Kind::Trade),
            b"aggTrade" => Some(Kind::AggTrade),
            b"depth" => Some(Kind::Depth),
            b"depth5" | b"depth10" | b"depth20" => Some(Kind::PartialDepth),
            _ => None,
        }
    }
}

/// Decodes one complete WebSocket text message from Binance Spot (or a `GET /api/v3/depth`
/// body). The whole input must be one JSON object, surrounding whitespace allowed.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>> {
    if let Some(message) = fast::message(bytes) {
        return Ok(message);
    }
    let mut cursor = Cursor::at(bytes, 0);
    let first = cursor.peek_value()?;
    if first != b'{' {
        return Err(cursor.error(DecodeErrorKind::UnexpectedByte(first)));
    }
    cursor.pos += 1;
    let message = top_level(&mut cursor)?;
    cursor.skip_whitespace();
    if cursor.pos != bytes.len() {
        return Err(cursor.error(DecodeErrorKind::TrailingBytes));
    }
    Ok(message)
}

/// The venue's own layouts, read with literal compares: a bookTicker, a depthUpdate or a trade,
/// raw or wrapped, keys in the order Binance sends them, no whitespace. It answers `None` at the
/// first byte that differs, and [`decode`] reads the message again with the general reader,
/// which gives the same answer for the same bytes (the tests decode the capture both ways).
mod fast {
    use super::{BookTicker, DepthUpdate, Kind, Message};
    use crate::fixed::Fixed;
    use crate::venue::binance::decode::{
        compact_levels, venue_levels, Cursor, Levels, TradeKind, TradePrint,
    };
    use crate::venue::binance::scan;

    struct Reader<'a> {
        bytes: &'a [u8],
        pos: usize,
    }

    pub(super) fn message(bytes: &[u8]) -> Option<Message<'_>> {
        let mut reader = Reader { bytes, pos: 0 };
        let stream = if reader.literal(b"{\"stream\":\"") {
            let name = reader.plain_string()?;
            reader.expect(b",\"data\":")?;
            Some(name)
        } else {
            None
        };
        let (mut message, kind) = if reader.literal(b"{\"u\":") {
            (Message::BookTicker(reader.book_ticker()?), Kind::BookTicker)
        } else if reader.literal(b"{\"e\":\"depthUpdate\"") {
            (Message::Depth(reader.depth_update()?), Kind::Depth)
        } else if reader.literal(b"{\"e\":\"trade\"") {
            (Message::Trade(reader.trade()?), Kind::Trade)
        } else {
            return None;
        };
        if let Some(name) = stream {
            // A name promising another kind (an error) or none is left to the general reader.
            if Kind::from_stream(name) != Some(kind) {
                return None;
            }
            reader.expect(b"}")?;
            match &mut message {
                Message::BookTicker(m) => m.stream = Some(name),
                Message::Depth(m) => m.stream = Some(name),
                Message::Trade(m) => m.stream = Some(name),
                _ => return None,
            }
        }
        (reader.bytes.get(reader.pos..)? == b"}").then_some(message)
    }

    impl<'a> Reader<'a> {
        #[inline(always)]
        fn literal(&mut self, expected: &[u8]) -> bool {
            let end = self.pos + expected.len();
            if self.bytes.get(self.pos..end) == Some(expected) {
                self.pos = end;
                true
            } else {
                false
            }
        }

        #[inline(always)]
        fn expect(&mut self, expected: &[u8]) -> Option<()> {
            self.literal(expected).then_some(())
        }

        #[inline(always)]
        fn plain_string(&mut self) -> Option<&'a [u8]> {
            let (content, end) = scan::plain_string(self.bytes, self.pos)?;
            self.pos = end;
            Some(content)
        }

        #[inline(always)]
        fn decimal(&mut self, key: &[u8]) -> Option<Fixed> {
            self.expect(key)?;
            let (value, end) = scan::quoted_decimal(self.bytes, self.pos)?;
            self.pos = end;
            Some(value)
        }

        #[inline(always)]
        fn integer(&mut self, key: &[u8]) -> Option<u64> {
            self.expect(key)?;
            let (value, end) = scan::integer(self.bytes, self.pos)?;
            self.pos = end;
            Some(value)
        }

        #[inline(always)]
        fn boolean(&mut self, key: &[u8]) -> Option<bool> {
            self.expect(key)?;
            if self.literal(b"true") {
                Some(true)
            } else {
                self.expect(b"false")?;
                Some(false)
            }
        }

        /// The USD-M reader of compact levels (short decimals, read once unchecked when
        /// iterated); Spot's eight-decimal prices are longer than it takes, so those are checked
        /// by `venue_levels` (the venue's spelling, any decimal length), and anything else by the
        /// general level reader, in the same pass.
        fn levels(&mut self, key: &'static str, field: &[u8]) -> Option<Levels<'a>> {
            self.expect(field)?;
            if let Some((levels, end)) =
                compact_levels(self.bytes, self.pos).or_else(|| venue_levels(self.bytes, self.pos))
            {
                self.pos = end;
                return Some(levels);
            }
            let mut cursor = Cursor::at(self.bytes, self.pos);
            let levels = cursor.levels(key).ok()?;
            self.pos = cursor.pos;
            Some(levels)
        }

        fn symbol(&mut self) -> Option<&'a [u8]> {
            self.expect(b",\"s\":\"")?;
            self.plain_string()
        }

        /// `400900217,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000",
        /// "A":"40.66000000"` after `{"u":`.
        fn book_ticker(&mut self) -> Option<BookTicker<'a>> {
            let (update_id, end) = scan::integer(self.bytes, self.pos)?;
            self.pos = end;
            Some(BookTicker {
                stream: None,
                update_id,
                symbol: self.symbol()?,
                bid_px: self.decimal(b",\"b\":\"")?,
                bid_qty: self.decimal(b",\"B\":\"")?,
                ask_px: self.decimal(b",\"a\":\"")?,
                ask_qty: self.decimal(b",\"A\":\"")?,
            })
        }

        /// `,"E":..,"s":"BNBBTC","U":..,"u":..,"b":[..],"a":[..]`
        fn depth_update(&mut self) -> Option<DepthUpdate<'a>> {
            Some(DepthUpdate {
                stream: None,
                event_time_ms: self.integer(b",\"E\":")?,
                symbol: self.symbol()?,
                first_update_id: self.integer(b",\"U\":")?,
                final_update_id: self.integer(b",\"u\":")?,
                bids: self.levels("b", b",\"b\":")?,
                asks: self.levels("a", b",\"a\":")?,
            })
        }

        /// `,"E":..,"s":"BNBBTC","t":..,"p":"0.001","q":"100","T":..,"m":true,"M":true`
        fn trade(&mut self) -> Option<TradePrint<'a>> {
            let event_time_ms = self.integer(b",\"E\":")?;
            let symbol = self.symbol()?;
            let trade_id = self.integer(b",\"t\":")?;
            let price = self.decimal(b",\"p\":\"")?;
            let qty = self.decimal(b",\"q\":\"")?;
            let trade_time_ms = self.integer(b",\"T\":")?;
            let buyer_is_maker = self.boolean(b",\"m\":")?;
            // `M` ("Ignore"): read past, as the general reader skips it.
            self.boolean(b",\"M\":")?;
            Some(TradePrint {
                stream: None,
                symbol,
                kind: TradeKind::Trade,
                trade_id,
                first_trade_id: 0,
                last_trade_id: 0,
                price,
                qty,
                buyer_is_maker,
                event_time_ms,
                trade_time_ms,
            })
        }
    }
}

/// What the outermost object is, found from its first key or, failing that, from every key.
#[derive(Clone, Copy)]
enum Shape<'a> {
    Wrapper,
    Market(Kind),
    /// A market event with an `"e"` this decoder does not read.
    UnknownEvent(&'a [u8]),
    Book,
    Reply,
}

/// Which keys the object whose body starts at `body_start` has: one skipping pass.
fn shape_of(bytes: &[u8], body_start: usize) -> Result<Shape<'_>> {
    let mut probe = Cursor::at(bytes, body_start);
    let mut members = Members::new();
    let (mut wrapper, mut book, mut ticker_id, mut symbol) = (false, false, false, false);
    while let Some(key) = probe.next_key(&mut members)? {
        match key {
            b"e" => {
                let event_type = probe.plain_string("e")?;
                return Ok(match Kind::from_event_type(event_type) {
                    Some(kind) => Shape::Market(kind),
                    None => Shape::UnknownEvent(event_type),
                });
            }
            b"stream" | b"data" => wrapper = true,
            b"lastUpdateId" => book = true,
            b"u" => ticker_id = true,
            b"s" => symbol = true,
            _ => {}
        }
        probe.skip_value()?;
    }
    Ok(if wrapper {
        Shape::Wrapper
    } else if book {
        Shape::Book
    } else if ticker_id && symbol {
        Shape::Market(Kind::BookTicker)
    } else {
        Shape::Reply
    })
}

/// The outermost object, after its `{`.
fn top_level<'a>(cursor: &mut Cursor<'a>) -> Result<Message<'a>> {
    let body_start = cursor.pos;
    let mut members = Members::new();
    let shape = match cursor.next_key(&mut members)? {
        Some(b"stream") => Shape::Wrapper,
        Some(b"e") => {
            let event_type = cursor.plain_string("e")?;
            return match Kind::from_event_type(event_type) {
                Some(kind) => typed_body(cursor, members, kind, true, None),
                None => {
                    cursor.skip_members(members)?;
                    Ok(Message::Unknown {
                        stream: None,
                        event_type,
                    })
                }
            };
        }
        None => return Err(cursor.error(DecodeErrorKind::Unrecognised)),
        Some(_) => shape_of(cursor.bytes, body_start)?,
    };
    cursor.pos = body_start;
    let members = Members::new();
    match shape {
        Shape::Wrapper => wrapper(cursor, members),
        Shape::Market(kind) => typed_body(cursor, members, kind, false, None),
        Shape::UnknownEvent(event_type) => {
            cursor.skip_members(members)?;
            Ok(Message::Unknown {
                stream: None,
                event_type,
            })
        }
        Shape::Book => {
            let (last_update_id, bids, asks) = book_body(cursor, members, false)?;
            Ok(Message::DepthSnapshot(DepthSnapshot {
                last_update_id,
                bids,
                asks,
            }))
        }
        Shape::Reply => reply(cursor, members),
    }
}

/// `{"stream":..,"data":{..}}`, from the start of its body. Other members are skipped.
fn wrapper<'a>(cursor: &mut Cursor<'a>, mut members: Members) -> Result<Message<'a>> {
    let mut stream: Option<&'a [u8]> = None;
    let mut data: Option<Message<'a>> = None;
    // Where `data` starts when it came before `stream` (read once the name is known).
    let mut data_at: Option<usize> = None;
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"stream" => read_once!(cursor, stream, "stream", plain_string),
            b"data" => {
                if data.is_some() || data_at.is_some() {
                    return Err(cursor.error(DecodeErrorKind::DuplicateField("data")));
                }
                match stream {
                    Some(name) => data = Some(market_object(cursor, name)?),
                    None => {
                        cursor.skip_whitespace();
                        data_at = Some(cursor.pos);
                        cursor.skip_value()?;
                    }
                }
            }
            _ => cursor.skip_value()?,
        }
    }
    let name = cursor.required(stream, "stream")?;
    if let Some(at) = data_at {
        let end = cursor.pos;
        cursor.pos = at;
        data = Some(market_object(cursor, name)?);
        cursor.pos = end;
    }
    cursor.required(data, "data")
}

/// The `data` object of a wrapper on stream `name`, from its `{`.
fn market_object<'a>(cursor: &mut Cursor<'a>, name: &'a [u8]) -> Result<Message<'a>> {
    let first = cursor.peek_value()?;
    if first != b'{' {
        return Err(cursor.type_error(first, "data"));
    }
    cursor.pos += 1;
    let members = Members::new();
    if let Some(kind) = Kind::from_stream(name) {
        return typed_body(cursor, members, kind, false, Some(name));
    }
    // A channel this decoder does not read: an event it may still recognise by its `"e"`.
    let body_start = cursor.pos;
    let shape = shape_of(cursor.bytes, body_start)?;
    cursor.pos = body_start;
    match shape {
        Shape::Market(kind) => typed_body(cursor, members, kind, false, Some(name)),
        Shape::UnknownEvent(event_type) => {
            cursor.skip_members(members)?;
            Ok(Message::Unknown {
                stream: Some(name),
                event_type,
            })
        }
        Shape::Wrapper | Shape::Book | Shape::Reply => {
            cursor.skip_members(members)?;
            Ok(Message::Unknown {
                stream: Some(name),
                event_type: b"",
            })
        }
    }
}

/// A market event of `kind`, from the start of its body (or after its `"e"` when
/// `event_type_seen`); `stream` is the wrapper's name.
fn typed_body<'a>(
    cursor: &mut Cursor<'a>,
    members: Members,
    kind: Kind,
    event_type_seen: bool,
    stream: Option<&'a [u8]>,
) -> Result<Message<'a>> {
    Ok(match kind {
        Kind::BookTicker => {
            Message::BookTicker(book_ticker(cursor, members, event_type_seen, stream)?)
        }
        Kind::Depth => Message::Depth(depth_update(cursor, members, event_type_seen, stream)?),
        Kind::PartialDepth => {
            let (last_update_id, bids, asks) = book_body(cursor, members, true)?;
            Message::PartialDepth(PartialDepth {
                // `from_stream` gave this kind, so there is a name.
                stream: stream.unwrap_or_default(),
                last_update_id,
                bids,
                asks,
            })
        }
        Kind::Trade | Kind::AggTrade => {
            Message::Trade(trade(cursor, members, event_type_seen, kind, stream)?)
        }
    })
}

/// A `"e"` met inside a body whose kind is already known: it must agree, and come once.
fn event_type_again(cursor: &mut Cursor<'_>, seen: &mut bool, kind: Kind) -> Result<()> {
    if *seen {
        return Err(cursor.error(DecodeErrorKind::DuplicateField("e")));
    }
    *seen = true;
    if cursor.plain_string("e")? != kind.event_type() {
        return Err(cursor.error(DecodeErrorKind::EventTypeMismatch));
    }
    Ok(())
}

fn book_ticker<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
    stream: Option<&'a [u8]>,
) -> Result<BookTicker<'a>> {
    let (mut symbol, mut update_id) = (None, None);
    let (mut bid_px, mut bid_qty, mut ask_px, mut ask_qty) = (None, None, None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => event_type_again(cursor, &mut event_type_seen, Kind::BookTicker)?,
            b"u" => read_once!(cursor, update_id, "u", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"b" => read_once!(cursor, bid_px, "b", decimal),
            b"B" => read_once!(cursor, bid_qty, "B", decimal),
            b"a" => read_once!(cursor, ask_px, "a", decimal),
            b"A" => read_once!(cursor, ask_qty, "A", decimal),
            _ => cursor.skip_value()?,
        }
    }
    Ok(BookTicker {
        stream,
        symbol: cursor.required(symbol, "s")?,
        update_id: cursor.required(update_id, "u")?,
        bid_px: cursor.required(bid_px, "b")?,
        bid_qty: cursor.required(bid_qty, "B")?,
        ask_px: cursor.required(ask_px, "a")?,
        ask_qty: cursor.required(ask_qty, "A")?,
    })
}

fn depth_update<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
    stream: Option<&'a [u8]>,
) -> Result<DepthUpdate<'a>> {
    let (mut symbol, mut event_time_ms) = (None, None);
    let (mut first_update_id, mut final_update_id) = (None, None);
    let (mut bids, mut asks) = (None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => event_type_again(cursor, &mut event_type_seen, Kind::Depth)?,
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"U" => read_once!(cursor, first_update_id, "U", integer),
            b"u" => read_once!(cursor, final_update_id, "u", integer),
            b"b" => read_once!(cursor, bids, "b", levels),
            b"a" => read_once!(cursor, asks, "a", levels),
            _ => cursor.skip_value()?,
        }
    }
    if !event_type_seen {
        return Err(cursor.error(DecodeErrorKind::MissingField("e")));
    }
    Ok(DepthUpdate {
        stream,
        symbol: cursor.required(symbol, "s")?,
        first_update_id: cursor.required(first_update_id, "U")?,
        final_update_id: cursor.required(final_update_id, "u")?,
        event_time_ms: cursor.required(event_time_ms, "E")?,
        bids: cursor.required(bids, "b")?,
        asks: cursor.required(asks, "a")?,
    })
}

fn trade<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
    kind: Kind,
    stream: Option<&'a [u8]>,
) -> Result<TradePrint<'a>> {
    let (mut symbol, mut event_time_ms, mut trade_time_ms) = (None, None, None);
    let (mut trade_id, mut first_trade_id, mut last_trade_id) = (None, None, None);
    let (mut price, mut qty, mut buyer_is_maker) = (None, None, None);
    let is_trade = kind == Kind::Trade;
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => event_type_again(cursor, &mut event_type_seen, kind)?,
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            b"T" => read_once!(cursor, trade_time_ms, "T", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"t" if is_trade => read_once!(cursor, trade_id, "t", integer),
            b"a" if !is_trade => read_once!(cursor, trade_id, "a", integer),
            b"f" if !is_trade => read_once!(cursor, first_trade_id, "f", integer),
            b"l" if !is_trade => read_once!(cursor, last_trade_id, "l", integer),
            b"p" => read_once!(cursor, price, "p", decimal),
            b"q" => read_once!(cursor, qty, "q", decimal),
            b"m" => read_once!(cursor, buyer_is_maker, "m", boolean),
            _ => cursor.skip_value()?,
        }
    }
    if !event_type_seen {
        return Err(cursor.error(DecodeErrorKind::MissingField("e")));
    }
    let (first_trade_id, last_trade_id) = if is_trade {
        (0, 0)
    } else {
        (
            cursor.required(first_trade_id, "f")?,
            cursor.required(last_trade_id, "l")?,
        )
    };
    Ok(TradePrint {
        stream,
        symbol: cursor.required(symbol, "s")?,
        kind: if is_trade {
            TradeKind::Trade
        } else {
            TradeKind::AggTrade
        },
        trade_id: cursor.required(trade_id, if is_trade { "t" } else { "a" })?,
        first_trade_id,
        last_trade_id,
        price: cursor.required(price, "p")?,
        qty: cursor.required(qty, "q")?,
        buyer_is_maker: cursor.required(buyer_is_maker, "m")?,
        event_time_ms: cursor.required(event_time_ms, "E")?,
        trade_time_ms: cursor.required(trade_time_ms, "T")?,
    })
}

/// `lastUpdateId`, `bids`, `asks`: a REST snapshot or a partial depth message. `partial`: an
/// `"e"` inside is refused (partial depth has none).
fn book_body<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    partial: bool,
) -> Result<(u64, Levels<'a>, Levels<'a>)> {
    let (mut last_update_id, mut bids, mut asks) = (None, None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"lastUpdateId" => read_once!(cursor, last_update_id, "lastUpdateId", integer),
            b"bids" => read_once!(cursor, bids, "bids", levels),
            b"asks" => read_once!(cursor, asks, "asks", levels),
            b"e" if partial => return Err(cursor.error(DecodeErrorKind::EventTypeMismatch)),
            _ => cursor.skip_value()?,
        }
    }
    Ok((
        cursor.required(last_update_id, "lastUpdateId")?,
        cursor.required(bids, "bids")?,
        cursor.required(asks, "asks")?,
    ))
}

/// A reply to a request, or an error answer, from the start of its body.
fn reply<'a>(cursor: &mut Cursor<'a>, mut members: Members) -> Result<Message<'a>> {
    let mut id: Option<Option<u64>> = None;
    let mut result: Option<ReplyResult<'a>> = None;
    let mut error: Option<(i64, &'a [u8])> = None;
    let mut code: Option<i64> = None;
    let mut msg: Option<&'a [u8]> = None;
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"result" => read_once!(cursor, result, "result", reply_result),
            b"id" => read_once!(cursor, id, "id", optional_integer),
            b"error" => read_once!(cursor, error, "error", error_object),
            b"code" => read_once!(cursor, code, "code", signed_integer),
            b"msg" => read_once!(cursor, msg, "msg", raw_string),
            _ => cursor.skip_value()?,
        }
    }
    let id = id.flatten();
    if let Some((code, msg)) = error {
        return Ok(Message::ErrorReply { id, code, msg });
    }
    if let Some(code) = code {
        let msg = cursor.required(msg, "msg")?;
        return Ok(Message::ErrorReply { id, code, msg });
    }
    match result {
        Some(ReplyResult::Null) => Ok(Message::Ack { id }),
        Some(ReplyResult::Streams { streams, count }) => {
            Ok(Message::Subscriptions { id, streams, count })
        }
        Some(ReplyResult::Other(result)) => Ok(Message::Reply { id, result }),
        None => Err(cursor.error(DecodeErrorKind::Unrecognised)),
    }
}

/// The general reader alone, without the fast path: for the tests that check both agree.
#[doc(hidden)]
pub fn decode_general(bytes: &[u8]) -> Result<Message<'_>> {
    let mut cursor = Cursor::at(bytes, 0);
    let first = cursor.peek_value()?;
    if first != b'{' {
        return Err(cursor.error(DecodeErrorKind::UnexpectedByte(first)));
    }
    cursor.pos += 1;
    let message = top_level(&mut cursor)?;
    cursor.skip_whitespace();
    if cursor.pos != bytes.len() {
        return Err(cursor.error(DecodeErrorKind::TrailingBytes));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn px(text: &str) -> Fixed {
        Fixed::parse_str(text).expect("test decimal")
    }

    #[test]
    fn stream_names_map_to_kinds() {
        assert_eq!(
            Kind::from_stream(b"btcusdt@bookTicker"),
            Some(Kind::BookTicker)
        );
        assert_eq!(Kind::from_stream(b"btcusdt@depth@100ms"), Some(Kind::Depth));
        assert_eq!(Kind::from_stream(b"btcusdt@depth"), Some(Kind::Depth));
        assert_eq!(
            Kind::from_stream(b"btcusdt@depth20@100ms"),
            Some(Kind::PartialDepth)
        );
        assert_eq!(Kind::from_stream(b"btcusdt@depth15"), None);
        assert_eq!(Kind::from_stream(b"btcusdt@avgPrice"), None);
        assert_eq!(Kind::from_stream(b"btcusdt"), None);
        assert_eq!(stream_symbol(b"btcusdt@depth5"), b"btcusdt");
        assert_eq!(stream_symbol(b"btcusdt"), b"btcusdt");
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one_and_leaves_any_other_layout() {
        fn fast_and_general(bytes: &[u8]) -> Message<'_> {
            let fast = fast::message(bytes).expect("the venue's layout");
            assert_eq!(Ok(fast), decode_general(bytes));
            fast
        }
        let raw = br#"{"u":400900217,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000"}"#;
        let Message::BookTicker(ticker) = fast_and_general(raw) else {
            panic!("a bookTicker");
        };
        assert_eq!(ticker.bid_px, px("25.3519"));
        let wrapped = br#"{"stream":"bnbusdt@bookTicker","data":{"u":1,"s":"BNBUSDT","b":"1","B":"2","a":"3","A":"4"}}"#;
        assert_eq!(
            fast_and_general(wrapped).stream(),
            Some(&b"bnbusdt@bookTicker"[..])
        );
        let depth = br#"{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1723161255308,"s":"BTCUSDT","U":50093239203,"u":50093239207,"b":[["55653.87000000","0.00000000"]],"a":[["61838.04000000","0.32332000"],["61844.30000000","0.40163000"]]}}"#;
        let Message::Depth(diff) = fast_and_general(depth) else {
            panic!("a diff");
        };
        assert_eq!(
            diff.asks.iter().nth(1),
            Some((px("61844.3"), px("0.40163")))
        );
        let trade = br#"{"stream":"btcusdt@trade","data":{"e":"trade","E":1723161255343,"s":"BTCUSDT","t":3735683259,"p":"61837.63000000","q":"0.02000000","T":1723161255342,"m":true,"M":true}}"#;
        let Message::Trade(print) = fast_and_general(trade) else {
            panic!("a trade");
        };
        assert!(print.buyer_is_maker);
        for other in [
            &br#"{"s":"BNBUSDT","u":1,"b":"1","B":"2","a":"3","A":"4"}"#[..],
            br#"{"u":1,"s":"BNBUSDT","b":"1","B":"2","a":"3","A":"4"} "#,
            br#"{"u":1,"s":"BNBUSDT","b":"1","B":"2","a":"3","A":"4","x":1}"#,
            br#"{"stream":"bnbusdt@trade","data":{"u":1,"s":"BNBUSDT","b":"1","B":"2","a":"3","A":"4"}}"#,
            br#"{"e":"trade","E":1,"s":"X","t":1,"p":"1","q":"1","T":1,"m":true,"M":1}"#,
            br#"{"e":"depthUpdate","E":1,"s":"X","U":1,"u":2,"b":[] ,"a":[]}"#,
        ] {
            assert_eq!(fast::message(other), None);
        }
    }

    #[test]
    fn a_stream_name_that_disagrees_with_the_body_is_refused() {
        let bad = br#"{"stream":"btcusdt@trade","data":{"e":"aggTrade","E":1,"s":"BTCUSDT","a":1,"p":"1","q":"1","f":1,"l":1,"T":1,"m":true}}"#;
        assert_eq!(
            decode(bad).map_err(|error| error.kind),
            Err(DecodeErrorKind::EventTypeMismatch)
        );
        // `data` before `stream`: read once the name is known, with the same check.
        let late = br#"{"data":{"e":"trade","E":1,"s":"BTCUSDT","t":9,"p":"1","q":"1","T":1,"m":false},"stream":"btcusdt@trade"}"#;
        let Ok(Message::Trade(trade)) = decode(late) else {
            panic!("a trade");
        };
        assert_eq!(trade.trade_id, 9);
        assert_eq!(trade.stream, Some(&b"btcusdt@trade"[..]));
    }
}
