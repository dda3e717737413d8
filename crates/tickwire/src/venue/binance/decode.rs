//! One Binance USD-M Futures WebSocket message in, one typed, borrowed [`Message`] out: no DOM,
//! no allocation, one pass over the bytes.
//!
//! The venue sends each market event either raw (`{"e":"bookTicker",...}`) or, on the
//! combined-stream endpoint, wrapped as `{"stream":"btcusdt@bookTicker","data":{...}}`. Replies
//! to our requests (`{"result":null,"id":1}`), error replies and the REST depth snapshot body
//! (`{"lastUpdateId":..,"bids":..,"asks":..}`, which the simulator also serves) go through the
//! same entry point, [`decode`].
//!
//! How the type is found without building a tree: the stream name's channel (`@bookTicker`,
//! `@depth@0ms`, ...) decides when the wrapper gives `stream` before `data`; otherwise the `"e"`
//! field does. Binance puts `"e"` first in every message (and `stream` before `data`), so the fast
//! path reads `"e"`, then reads every other field straight into its typed slot. When `"e"` is
//! not first, a second, skipping pass finds it before the typed pass; key order is never
//! assumed for correctness. Fields we do not know (Binance adds undocumented ones such as `st`
//! or `ps`) are skipped with full JSON validation, nested objects and arrays included.
//!
//! Prices and quantities go from their decimal strings straight to [`Fixed`] (no float); event
//! times, update ids and trade ids are JSON integers read into `u64`. Strings are returned as
//! byte slices of the input: the `ws` layer has already checked that a text message is UTF-8.
//! Strings we return borrowed and must compare (`s`, `stream`, `e`, and object keys we
//! interpret) are refused when they contain escapes, which Binance never sends in them; strings
//! we skip may hold any valid escape. The error reply's `msg` is returned raw, escapes included.
//!
//! Everything that can go wrong is a [`DecodeError`]: a small `Copy` value with a kind and the
//! byte offset where the problem was seen. The caller counts it and logs a [`sample`] of the
//! message (rate-limited, off the hot path).

use super::scan;
use crate::fixed::{Fixed, ParseError};
use crate::venue::json::{self, JsonError, JsonErrorKind, Members};
use std::fmt::{self, Write as _};
use std::ops::{Deref, DerefMut};

/// The deepest nesting of arrays and objects accepted in a skipped value: the shared cursor's
/// one limit (see `venue::json`).
pub use crate::venue::json::MAX_DEPTH;

/// How many bytes of a bad message [`sample`] shows.
pub const SAMPLE_BYTES: usize = 160;

/// Why a message could not be decoded, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}")]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    /// Byte offset into the message where the problem was seen.
    pub offset: usize,
}

/// What was wrong with a message. Field names are the venue's JSON keys (`"E"`, `"b"`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("message ends inside a value")]
    Truncated,
    #[error("unexpected byte {0:#04x}")]
    UnexpectedByte(u8),
    #[error("bytes after the end of the message")]
    TrailingBytes,
    #[error("control character or invalid escape in a string")]
    InvalidString,
    #[error("escape sequence in `{0}`, which is read in place")]
    EscapedString(&'static str),
    #[error("invalid JSON number")]
    InvalidNumber,
    #[error("`{0}` is not a plain integer (fraction, exponent, misplaced sign or leading zero)")]
    InvalidInteger(&'static str),
    #[error("integer `{0}` overflows 64 bits")]
    NumberOverflow(&'static str),
    #[error("`{0}` has the wrong JSON type")]
    WrongType(&'static str),
    #[error("bad decimal: {0}")]
    BadDecimal(ParseError),
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    #[error("field `{0}` appears twice")]
    DuplicateField(&'static str),
    #[error("the event type disagrees with the stream name")]
    EventTypeMismatch,
    #[error("arrays and objects nested deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("neither a market event, a reply nor a depth snapshot")]
    Unrecognised,
}

/// One decoded message. Everything borrowed points into the bytes given to [`decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `<symbol>@bookTicker`: the best bid and ask.
    BookTicker(BookTicker<'a>),
    /// `<symbol>@depth`, `@depth@100ms`, `@depth@500ms`, `@depth@0ms` and the partial-depth
    /// streams `@depth5/10/20[@..]`: all send `depthUpdate`.
    Depth(DepthUpdate<'a>),
    /// `<symbol>@trade` and `<symbol>@aggTrade`.
    Trade(TradePrint<'a>),
    /// `<symbol>@markPrice` and `<symbol>@markPrice@1s`.
    MarkPrice(MarkPrice<'a>),
    /// The body of `GET /fapi/v1/depth`, which book synchronisation reads with the same decoder.
    DepthSnapshot(DepthSnapshot<'a>),
    /// `{"result":null,"id":1}`: a SUBSCRIBE or UNSUBSCRIBE succeeded.
    Ack { id: Option<u64> },
    /// `{"result":["btcusdt@aggTrade"],"id":3}`: the LIST_SUBSCRIPTIONS reply. `streams` is the
    /// raw JSON array (`[` to `]`), already checked to hold `count` strings.
    Subscriptions {
        id: Option<u64>,
        streams: &'a [u8],
        count: usize,
    },
    /// Any other `result` (GET_PROPERTY answers `true` or `false`): the raw JSON value.
    Reply { id: Option<u64>, result: &'a [u8] },
    /// `{"error":{"code":2,"msg":".."},"id":1}` or `{"code":-1121,"msg":".."}`. `msg` is the raw
    /// string content, JSON escapes included.
    ErrorReply {
        id: Option<u64>,
        code: i64,
        msg: &'a [u8],
    },
    /// A market event whose `"e"` we do not know (the caller counts them).
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
            Message::Trade(m) => m.stream,
            Message::MarkPrice(m) => m.stream,
            Message::Unknown { stream, .. } => *stream,
            _ => None,
        }
    }

    fn set_stream(&mut self, name: &'a [u8]) {
        let slot = match self {
            Message::BookTicker(m) => &mut m.stream,
            Message::Depth(m) => &mut m.stream,
            Message::Trade(m) => &mut m.stream,
            Message::MarkPrice(m) => &mut m.stream,
            Message::Unknown { stream, .. } => stream,
            _ => return,
        };
        *slot = Some(name);
    }

    fn market_kind(&self) -> Option<Kind> {
        match self {
            Message::BookTicker(_) => Some(Kind::BookTicker),
            Message::Depth(_) => Some(Kind::Depth),
            Message::Trade(m) => Some(match m.kind {
                TradeKind::Trade => Kind::Trade,
                TradeKind::AggTrade => Kind::AggTrade,
            }),
            Message::MarkPrice(_) => Some(Kind::MarkPrice),
            _ => None,
        }
    }
}

/// `bookTicker`: `u`, `E`, `T`, `s`, `b`, `B`, `a`, `A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookTicker<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    pub update_id: u64,
    pub event_time_ms: u64,
    pub transaction_time_ms: u64,
    pub bid_px: Fixed,
    pub bid_qty: Fixed,
    pub ask_px: Fixed,
    pub ask_qty: Fixed,
}

/// `depthUpdate`: `E`, `T`, `s`, `U`, `u`, `pu`, `b`, `a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthUpdate<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    /// `U`: the first update id in this event.
    pub first_update_id: u64,
    /// `u`: the last update id in this event.
    pub final_update_id: u64,
    /// `pu`: the `u` of the previous event on this stream; a gap when it differs.
    pub prev_final_update_id: u64,
    pub event_time_ms: u64,
    pub transaction_time_ms: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// Whether a [`TradePrint`] came from `trade` or `aggTrade`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TradeKind {
    Trade,
    AggTrade,
}

/// `trade` (`E`, `T`, `s`, `t`, `p`, `q`, `m`) or `aggTrade` (`E`, `s`, `a`, `p`, `q`, `f`, `l`,
/// `T`, `m`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TradePrint<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    pub kind: TradeKind,
    /// `t` for a trade, `a` (the aggregate trade id) for an aggTrade.
    pub trade_id: u64,
    /// `f` of an aggTrade; 0 for a trade.
    pub first_trade_id: u64,
    /// `l` of an aggTrade; 0 for a trade.
    pub last_trade_id: u64,
    pub price: Fixed,
    pub qty: Fixed,
    /// `m`: the buyer was the maker, so the aggressor sold.
    pub buyer_is_maker: bool,
    pub event_time_ms: u64,
    pub trade_time_ms: u64,
}

/// `markPriceUpdate`: `E`, `s`, `p`, `i`, `P`, `r`, `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkPrice<'a> {
    pub stream: Option<&'a [u8]>,
    pub symbol: &'a [u8],
    pub event_time_ms: u64,
    pub mark_price: Fixed,
    pub index_price: Fixed,
    pub estimated_settle_price: Fixed,
    /// `None` for a delivery contract, which has no funding: Binance's "Mark Price Stream"
    /// documentation shows `"r":""` and `"T":0` for them.
    pub funding_rate: Option<Fixed>,
    pub next_funding_time_ms: u64,
}

/// The REST depth snapshot (`GET /fapi/v1/depth`): `lastUpdateId`, `E`, `T`, `bids`, `asks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthSnapshot<'a> {
    pub last_update_id: u64,
    pub event_time_ms: u64,
    pub transaction_time_ms: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// A JSON array of `[price, quantity]` string pairs, kept as its raw bytes. [`decode`] has
/// already checked its syntax and every decimal, so iterating cannot fail and does not
/// allocate; it parses the decimals a second time, which is cheaper than storing them.
///
/// Two `Levels` are equal when they hold the same pairs, however the JSON was spaced.
#[derive(Clone, Copy)]
pub struct Levels<'a> {
    bytes: &'a [u8],
    count: usize,
    /// Every level is spelled as the venue does and was checked by `scan::short_level_pair`,
    /// so iterating may read them with `scan::trusted_level_pair`.
    compact: bool,
    /// `bytes` and what follows it in the message: the checked decimals' nine-byte windows
    /// (see `scan::short_level_pair`), which may reach past the array's `]`.
    scan_bytes: &'a [u8],
}

impl<'a> Levels<'a> {
    /// The number of `[price, quantity]` pairs.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The raw JSON array, `[` to `]`.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The pairs in wire order, as `(price, quantity)`.
    pub fn iter(&self) -> LevelIter<'a> {
        LevelIter {
            // Skip the opening `[`.
            cursor: Cursor::at(
                if self.compact {
                    self.scan_bytes
                } else {
                    self.bytes
                },
                1,
            ),
            remaining: self.count,
            compact: self.compact,
        }
    }
}

impl PartialEq for Levels<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for Levels<'_> {}

impl fmt::Debug for Levels<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Levels({} pairs: {})", self.count, sample(self.bytes))
    }
}

impl<'a> IntoIterator for Levels<'a> {
    type Item = (Fixed, Fixed);
    type IntoIter = LevelIter<'a>;

    fn into_iter(self) -> LevelIter<'a> {
        self.iter()
    }
}

/// Iterates a [`Levels`] array: `(price, quantity)` pairs in wire order.
#[derive(Clone)]
pub struct LevelIter<'a> {
    cursor: Cursor<'a>,
    remaining: usize,
    /// See [`Levels`]: each level is read without checks, the next one starts one byte
    /// (its `,`) after the previous `]`.
    compact: bool,
}

impl Iterator for LevelIter<'_> {
    type Item = (Fixed, Fixed);

    #[inline]
    fn next(&mut self) -> Option<(Fixed, Fixed)> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.compact {
            let Some((price, qty, end)) =
                scan::trusted_level_pair(self.cursor.bytes, self.cursor.pos)
            else {
                // Unreachable: `decode` checked these bytes. Ending is the safe answer anyway.
                self.remaining = 0;
                return None;
            };
            self.cursor.pos = end + 1;
            return Some((price, qty));
        }
        // The venue's spelling first, without whitespace; anything else goes the general way.
        let bytes = self.cursor.bytes;
        let mut pos = self.cursor.pos;
        if bytes.get(pos) == Some(&b',') {
            pos += 1;
        }
        if let Some((price, qty, end)) = scan::level_pair(bytes, pos) {
            self.cursor.pos = end;
            return Some((price, qty));
        }
        if self.cursor.peek_value().ok()? == b',' {
            self.cursor.pos += 1;
        }
        match self.cursor.level("b") {
            Ok(pair) => Some(pair),
            // Unreachable: `decode` validated these bytes. Ending is the safe answer anyway.
            Err(_) => {
                self.remaining = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for LevelIter<'_> {}

/// A bad message for a log line: at most [`SAMPLE_BYTES`] bytes, invalid UTF-8 replaced and
/// control characters escaped (a venue must not be able to forge log lines), followed by the
/// full length when cut. Formatting it does not allocate; call it off the hot path only.
pub fn sample(bytes: &[u8]) -> Sample<'_> {
    Sample { bytes }
}

/// See [`sample`].
#[derive(Clone, Copy)]
pub struct Sample<'a> {
    bytes: &'a [u8],
}

impl fmt::Display for Sample<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.bytes.get(..SAMPLE_BYTES).unwrap_or(self.bytes);
        for chunk in shown.utf8_chunks() {
            for character in chunk.valid().chars() {
                if character.is_control() {
                    write!(f, "{}", character.escape_default())?;
                } else {
                    f.write_char(character)?;
                }
            }
            if !chunk.invalid().is_empty() {
                f.write_char(char::REPLACEMENT_CHARACTER)?;
            }
        }
        if shown.len() < self.bytes.len() {
            write!(f, "... ({} bytes)", self.bytes.len())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

/// Reads a member's value into its `Option` slot with the named `Cursor` reader, refusing a
/// second occurrence of the key (a message that says two things is not guessed at).
macro_rules! read_once {
    ($cursor:ident, $slot:ident, $field:literal, $reader:ident) => {{
        if $slot.is_some() {
            return Err($cursor.error(DecodeErrorKind::DuplicateField($field)));
        }
        $slot = Some($cursor.$reader($field)?);
    }};
}

// The Spot decoder (`venue::binance_spot::decode`) reads its fields the same way.
pub(crate) use read_once;

/// Decodes one complete WebSocket text message from Binance USD-M Futures.
///
/// The whole input must be one JSON object (surrounding whitespace allowed). See the module
/// documentation for what is accepted.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>> {
    if let Some(message) = fast::message(bytes) {
        return Ok(message);
    }
    decode_general(bytes)
}

/// [`decode`] for any key order and spacing, and for every error.
#[cold]
fn decode_general(bytes: &[u8]) -> Result<Message<'_>> {
    let mut cursor = Cursor::at(bytes, 0);
    let first = cursor.peek_value()?;
    if first != b'{' {
        return Err(cursor.error(DecodeErrorKind::UnexpectedByte(first)));
    }
    let object_start = cursor.pos;
    cursor.pos += 1;
    let message = top_level(&mut cursor, object_start)?;
    cursor.skip_whitespace();
    if cursor.pos != bytes.len() {
        return Err(cursor.error(DecodeErrorKind::TrailingBytes));
    }
    Ok(message)
}

/// The venue's own layout, read with literal compares: the keys in the order Binance sends
/// them, no whitespace. It answers `None` at the first byte that differs, and [`decode`] then
/// reads the message again from its start with the general reader, so nothing here decides
/// what is accepted: whatever it returns, the general reader returns for the same bytes (the
/// tests decode every capture message both ways).
mod fast {
    use super::{scan, BookTicker, DepthUpdate, Kind, Levels, Message, TradeKind, TradePrint};
    use crate::fixed::Fixed;

    /// The message's bytes and how far they have been read.
    struct Reader<'a> {
        bytes: &'a [u8],
        pos: usize,
    }

    /// A level array in the venue's compact spelling at `pos`, and the position after it.
    pub(super) fn levels_at(bytes: &[u8], pos: usize) -> Option<(Levels<'_>, usize)> {
        let mut reader = Reader { bytes, pos };
        let levels = reader.levels()?;
        Some((levels, reader.pos))
    }

    pub(super) fn message(bytes: &[u8]) -> Option<Message<'_>> {
        let mut reader = Reader { bytes, pos: 0 };
        let stream = if reader.literal(b"{\"stream\":\"") {
            let stream = reader.plain_string()?;
            reader.expect(b",\"data\":{\"e\":\"")?;
            Some(stream)
        } else {
            reader.expect(b"{\"e\":\"")?;
            None
        };
        let (message, kind) = if reader.literal(b"bookTicker\"") {
            (Message::BookTicker(reader.book_ticker()?), Kind::BookTicker)
        } else if reader.literal(b"depthUpdate\"") {
            (Message::Depth(reader.depth_update()?), Kind::Depth)
        } else if reader.literal(b"trade\"") {
            (Message::Trade(reader.trade()?), Kind::Trade)
        } else {
            return None;
        };
        let mut message = message;
        if let Some(name) = stream {
            // The general reader refuses a stream name promising another kind, and takes one
            // promising none (a channel it does not know); both are left to it.
            if Kind::from_stream(name) != Some(kind) {
                return None;
            }
            reader.expect(b"}")?;
            message.set_stream(name);
        }
        // The object's `}`, and nothing after it.
        (reader.bytes.get(reader.pos..)? == b"}").then_some(message)
    }

    impl<'a> Reader<'a> {
        /// Consumes `expected` if the input continues with it.
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

        /// A string's content after its opening quote, through its closing quote.
        #[inline(always)]
        fn plain_string(&mut self) -> Option<&'a [u8]> {
            let (content, end) = scan::plain_string(self.bytes, self.pos)?;
            self.pos = end;
            Some(content)
        }

        /// A decimal string's content after its opening quote, through its closing quote.
        #[inline(always)]
        fn decimal(&mut self) -> Option<Fixed> {
            let (value, end) = scan::quoted_decimal(self.bytes, self.pos)?;
            self.pos = end;
            Some(value)
        }

        #[inline(always)]
        fn integer(&mut self) -> Option<u64> {
            let (value, end) = scan::integer(self.bytes, self.pos)?;
            self.pos = end;
            Some(value)
        }

        /// `,"u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30",
        /// "A":"2.510","T":1723161256313,"E":1723161256313`
        fn book_ticker(&mut self) -> Option<BookTicker<'a>> {
            self.expect(b",\"u\":")?;
            let update_id = self.integer()?;
            self.expect(b",\"s\":\"")?;
            let symbol = self.plain_string()?;
            self.expect(b",\"b\":\"")?;
            let bid_px = self.decimal()?;
            self.expect(b",\"B\":\"")?;
            let bid_qty = self.decimal()?;
            self.expect(b",\"a\":\"")?;
            let ask_px = self.decimal()?;
            self.expect(b",\"A\":\"")?;
            let ask_qty = self.decimal()?;
            self.expect(b",\"T\":")?;
            let transaction_time_ms = self.integer()?;
            self.expect(b",\"E\":")?;
            let event_time_ms = self.integer()?;
            Some(BookTicker {
                stream: None,
                symbol,
                update_id,
                event_time_ms,
                transaction_time_ms,
                bid_px,
                bid_qty,
                ask_px,
                ask_qty,
            })
        }

        /// `,"E":..,"T":..,"s":"BTCUSDT","U":..,"u":..,"pu":..,"b":[..],"a":[..]`
        fn depth_update(&mut self) -> Option<DepthUpdate<'a>> {
            self.expect(b",\"E\":")?;
            let event_time_ms = self.integer()?;
            self.expect(b",\"T\":")?;
            let transaction_time_ms = self.integer()?;
            self.expect(b",\"s\":\"")?;
            let symbol = self.plain_string()?;
            self.expect(b",\"U\":")?;
            let first_update_id = self.integer()?;
            self.expect(b",\"u\":")?;
            let final_update_id = self.integer()?;
            self.expect(b",\"pu\":")?;
            let prev_final_update_id = self.integer()?;
            self.expect(b",\"b\":")?;
            let bids = self.levels()?;
            self.expect(b",\"a\":")?;
            let asks = self.levels()?;
            Some(DepthUpdate {
                stream: None,
                symbol,
                first_update_id,
                final_update_id,
                prev_final_update_id,
                event_time_ms,
                transaction_time_ms,
                bids,
                asks,
            })
        }

        /// `[["61800.20","2.909"],["61800.10","0.696"]]`, every decimal checked.
        fn levels(&mut self) -> Option<Levels<'a>> {
            let start = self.pos;
            self.expect(b"[")?;
            let mut count = 0usize;
            if !self.literal(b"]") {
                loop {
                    // Checked here, computed when iterated (`LevelIter::next`). A level in
                    // any other form sends the whole message to the general reader.
                    let end = scan::short_level_pair(self.bytes, self.pos)?;
                    self.pos = end;
                    count += 1;
                    if !self.literal(b",") {
                        self.expect(b"]")?;
                        break;
                    }
                }
            }
            Some(Levels {
                bytes: self.bytes.get(start..self.pos)?,
                count,
                compact: true,
                scan_bytes: self.bytes.get(start..)?,
            })
        }

        /// `,"E":..,"T":..,"s":"BTCUSDT","t":..,"p":"61800.30","q":"0.006","X":"MARKET",
        /// "m":false`
        fn trade(&mut self) -> Option<TradePrint<'a>> {
            self.expect(b",\"E\":")?;
            let event_time_ms = self.integer()?;
            self.expect(b",\"T\":")?;
            let trade_time_ms = self.integer()?;
            self.expect(b",\"s\":\"")?;
            let symbol = self.plain_string()?;
            self.expect(b",\"t\":")?;
            let trade_id = self.integer()?;
            self.expect(b",\"p\":\"")?;
            let price = self.decimal()?;
            self.expect(b",\"q\":\"")?;
            let qty = self.decimal()?;
            // `X`, the execution type, is not read; the general reader skips it too.
            self.expect(b",\"X\":\"")?;
            self.plain_string()?;
            let buyer_is_maker = if self.literal(b",\"m\":false") {
                false
            } else {
                self.expect(b",\"m\":true")?;
                true
            };
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

/// A `[["price","qty"],..]` array at `pos` in the venue's own spelling (no whitespace, every
/// decimal short), checked as the fast path checks it, and the position after its `]`; `None`
/// for any other spelling, which the caller then reads with [`Cursor::levels`]. The Spot
/// decoder's fast path (`venue::binance_spot::decode`) reads its diffs with it.
pub(crate) fn compact_levels(bytes: &[u8], pos: usize) -> Option<(Levels<'_>, usize)> {
    fast::levels_at(bytes, pos)
}

/// A `[["price","qty"],..]` array at `pos` in the venue's spelling whatever the decimals' length
/// (Spot's eight-decimal prices), every level checked by `scan::level_pair`, which iterating
/// reads again; `None` for any other spelling, which the caller reads with
/// [`Cursor::levels`].
pub(crate) fn venue_levels(bytes: &[u8], pos: usize) -> Option<(Levels<'_>, usize)> {
    if bytes.get(pos) != Some(&b'[') {
        return None;
    }
    let mut end = pos + 1;
    let mut count = 0usize;
    if bytes.get(end) == Some(&b']') {
        end += 1;
    } else {
        loop {
            let (_price, _qty, after) = scan::level_pair(bytes, end)?;
            count += 1;
            match bytes.get(after)? {
                b',' => end = after + 1,
                b']' => {
                    end = after + 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    let array = bytes.get(pos..end)?;
    Some((
        Levels {
            bytes: array,
            count,
            compact: false,
            scan_bytes: array,
        },
        end,
    ))
}

/// The market event types we decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    BookTicker,
    Depth,
    Trade,
    AggTrade,
    MarkPrice,
}

impl Kind {
    fn from_event_type(event_type: &[u8]) -> Option<Kind> {
        match event_type {
            b"bookTicker" => Some(Kind::BookTicker),
            b"depthUpdate" => Some(Kind::Depth),
            b"trade" => Some(Kind::Trade),
            b"aggTrade" => Some(Kind::AggTrade),
            b"markPriceUpdate" => Some(Kind::MarkPrice),
            _ => None,
        }
    }

    fn event_type(self) -> &'static [u8] {
        match self {
            Kind::BookTicker => b"bookTicker",
            Kind::Depth => b"depthUpdate",
            Kind::Trade => b"trade",
            Kind::AggTrade => b"aggTrade",
            Kind::MarkPrice => b"markPriceUpdate",
        }
    }

    /// The kind a stream name promises: the channel after the first `@`, without its update
    /// speed (`btcusdt@depth20@100ms` is `depth20`). `None` for channels we do not decode.
    fn from_stream(stream: &[u8]) -> Option<Kind> {
        let mut parts = stream.split(|&byte| byte == b'@');
        let _symbol = parts.next();
        match parts.next()? {
            b"bookTicker" => Some(Kind::BookTicker),
            b"trade" => Some(Kind::Trade),
            b"aggTrade" => Some(Kind::AggTrade),
            b"markPrice" => Some(Kind::MarkPrice),
            channel => {
                let levels = channel.strip_prefix(b"depth")?;
                levels.iter().all(u8::is_ascii_digit).then_some(Kind::Depth)
            }
        }
    }
}

/// The outermost object, after its `{`: a wrapper, a raw market event, a reply or a snapshot.
fn top_level<'a>(cursor: &mut Cursor<'a>, object_start: usize) -> Result<Message<'a>> {
    let mut members = Members::new();
    let mut stream: Option<&'a [u8]> = None;
    let mut market: Option<Message<'a>> = None;
    let mut data_before_stream = false;
    let mut id: Option<Option<u64>> = None;
    let mut result: Option<ReplyResult<'a>> = None;
    let mut error: Option<(i64, &'a [u8])> = None;
    let mut code: Option<i64> = None;
    let mut msg: Option<&'a [u8]> = None;
    let mut last_update_id: Option<u64> = None;
    let mut event_time_ms: Option<u64> = None;
    let mut transaction_time_ms: Option<u64> = None;
    let mut bids: Option<Levels<'a>> = None;
    let mut asks: Option<Levels<'a>> = None;
    let mut first_key = true;
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"stream" => read_once!(cursor, stream, "stream", plain_string),
            b"data" => {
                if market.is_some() {
                    return Err(cursor.error(DecodeErrorKind::DuplicateField("data")));
                }
                let hint = stream.and_then(Kind::from_stream);
                market = Some(market_object(cursor, hint)?);
                data_before_stream = stream.is_none();
            }
            // A raw (unwrapped) market event. `"e"` first is the fast path; otherwise start
            // over with the whole object as the event.
            b"e" if first_key => {
                let event_type = cursor.plain_string("e")?;
                return market_after_event_type(cursor, members, None, event_type);
            }
            b"e" => {
                cursor.pos = object_start;
                return market_object(cursor, None);
            }
            b"result" => read_once!(cursor, result, "result", reply_result),
            b"id" => read_once!(cursor, id, "id", optional_integer),
            b"error" => read_once!(cursor, error, "error", error_object),
            b"code" => read_once!(cursor, code, "code", signed_integer),
            b"msg" => read_once!(cursor, msg, "msg", raw_string),
            b"lastUpdateId" => read_once!(cursor, last_update_id, "lastUpdateId", integer),
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            b"T" => read_once!(cursor, transaction_time_ms, "T", integer),
            b"bids" => read_once!(cursor, bids, "bids", levels),
            b"asks" => read_once!(cursor, asks, "asks", levels),
            _ => cursor.skip_value()?,
        }
        first_key = false;
    }
    if let Some(mut message) = market {
        if let Some(name) = stream {
            // With `data` first, the type came from `"e"`: the stream name must agree.
            if data_before_stream {
                if let Some(promised) = Kind::from_stream(name) {
                    if message.market_kind() != Some(promised) {
                        return Err(cursor.error(DecodeErrorKind::EventTypeMismatch));
                    }
                }
            }
            message.set_stream(name);
        }
        return Ok(message);
    }
    if stream.is_some() {
        return Err(cursor.error(DecodeErrorKind::MissingField("data")));
    }
    let id = id.flatten();
    if let Some(last_update_id) = last_update_id {
        return Ok(Message::DepthSnapshot(DepthSnapshot {
            last_update_id,
            event_time_ms: cursor.required(event_time_ms, "E")?,
            transaction_time_ms: cursor.required(transaction_time_ms, "T")?,
            bids: cursor.required(bids, "bids")?,
            asks: cursor.required(asks, "asks")?,
        }));
    }
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

/// A market event object, from its `{`. `hint` is the kind its stream name promised.
fn market_object<'a>(cursor: &mut Cursor<'a>, hint: Option<Kind>) -> Result<Message<'a>> {
    let first = cursor.peek_value()?;
    if first != b'{' {
        return Err(cursor.type_error(first, "data"));
    }
    cursor.pos += 1;
    let body_start = cursor.pos;
    let mut members = Members::new();
    if cursor.next_key(&mut members)? == Some(b"e") {
        let event_type = cursor.plain_string("e")?;
        return market_after_event_type(cursor, members, hint, event_type);
    }
    // `"e"` is not first: find the kind, then read the object again from its start.
    cursor.pos = body_start;
    let members = Members::new();
    let kind = match hint {
        Some(kind) => kind,
        None => {
            let Some(event_type) = find_event_type(cursor.bytes, body_start)? else {
                return Err(
                    Cursor::at(cursor.bytes, body_start).error(DecodeErrorKind::MissingField("e"))
                );
            };
            match Kind::from_event_type(event_type) {
                Some(kind) => kind,
                None => {
                    cursor.skip_members(members)?;
                    return Ok(Message::Unknown {
                        stream: None,
                        event_type,
                    });
                }
            }
        }
    };
    typed_body(cursor, members, kind, false)
}

/// The rest of a market event object whose `"e"` has just been read.
fn market_after_event_type<'a>(
    cursor: &mut Cursor<'a>,
    members: Members,
    hint: Option<Kind>,
    event_type: &'a [u8],
) -> Result<Message<'a>> {
    let kind = Kind::from_event_type(event_type);
    if hint.is_some() && kind != hint {
        return Err(cursor.error(DecodeErrorKind::EventTypeMismatch));
    }
    match kind {
        Some(kind) => typed_body(cursor, members, kind, true),
        None => {
            cursor.skip_members(members)?;
            Ok(Message::Unknown {
                stream: None,
                event_type,
            })
        }
    }
}

/// The value of the first `"e"` member of the object whose body starts at `body_start`, found
/// by skipping the other members: the slow path for messages whose `"e"` is not first.
fn find_event_type(bytes: &[u8], body_start: usize) -> Result<Option<&[u8]>> {
    let mut probe = Cursor::at(bytes, body_start);
    let mut members = Members::new();
    while let Some(key) = probe.next_key(&mut members)? {
        if key == b"e" {
            return probe.plain_string("e").map(Some);
        }
        probe.skip_value()?;
    }
    Ok(None)
}

fn typed_body<'a>(
    cursor: &mut Cursor<'a>,
    members: Members,
    kind: Kind,
    event_type_seen: bool,
) -> Result<Message<'a>> {
    Ok(match kind {
        Kind::BookTicker => Message::BookTicker(book_ticker(cursor, members, event_type_seen)?),
        Kind::Depth => Message::Depth(depth_update(cursor, members, event_type_seen)?),
        Kind::Trade => Message::Trade(trade(cursor, members, event_type_seen, TradeKind::Trade)?),
        Kind::AggTrade => Message::Trade(trade(
            cursor,
            members,
            event_type_seen,
            TradeKind::AggTrade,
        )?),
        Kind::MarkPrice => Message::MarkPrice(mark_price(cursor, members, event_type_seen)?),
    })
}

fn book_ticker<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
) -> Result<BookTicker<'a>> {
    let (mut symbol, mut update_id, mut event_time_ms, mut transaction_time_ms) =
        (None, None, None, None);
    let (mut bid_px, mut bid_qty, mut ask_px, mut ask_qty) = (None, None, None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => cursor.event_type_again(&mut event_type_seen, Kind::BookTicker)?,
            b"u" => read_once!(cursor, update_id, "u", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"b" => read_once!(cursor, bid_px, "b", decimal),
            b"B" => read_once!(cursor, bid_qty, "B", decimal),
            b"a" => read_once!(cursor, ask_px, "a", decimal),
            b"A" => read_once!(cursor, ask_qty, "A", decimal),
            b"T" => read_once!(cursor, transaction_time_ms, "T", integer),
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            _ => cursor.skip_value()?,
        }
    }
    Ok(BookTicker {
        stream: None,
        symbol: cursor.required(symbol, "s")?,
        update_id: cursor.required(update_id, "u")?,
        event_time_ms: cursor.required(event_time_ms, "E")?,
        transaction_time_ms: cursor.required(transaction_time_ms, "T")?,
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
) -> Result<DepthUpdate<'a>> {
    let (mut symbol, mut event_time_ms, mut transaction_time_ms) = (None, None, None);
    let (mut first_update_id, mut final_update_id, mut prev_final_update_id) = (None, None, None);
    let (mut bids, mut asks) = (None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => cursor.event_type_again(&mut event_type_seen, Kind::Depth)?,
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            b"T" => read_once!(cursor, transaction_time_ms, "T", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"U" => read_once!(cursor, first_update_id, "U", integer),
            b"u" => read_once!(cursor, final_update_id, "u", integer),
            b"pu" => read_once!(cursor, prev_final_update_id, "pu", integer),
            b"b" => read_once!(cursor, bids, "b", levels),
            b"a" => read_once!(cursor, asks, "a", levels),
            _ => cursor.skip_value()?,
        }
    }
    Ok(DepthUpdate {
        stream: None,
        symbol: cursor.required(symbol, "s")?,
        first_update_id: cursor.required(first_update_id, "U")?,
        final_update_id: cursor.required(final_update_id, "u")?,
        prev_final_update_id: cursor.required(prev_final_update_id, "pu")?,
        event_time_ms: cursor.required(event_time_ms, "E")?,
        transaction_time_ms: cursor.required(transaction_time_ms, "T")?,
        bids: cursor.required(bids, "b")?,
        asks: cursor.required(asks, "a")?,
    })
}

fn trade<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
    kind: TradeKind,
) -> Result<TradePrint<'a>> {
    let (mut symbol, mut event_time_ms, mut trade_time_ms) = (None, None, None);
    let (mut trade_id, mut first_trade_id, mut last_trade_id) = (None, None, None);
    let (mut price, mut qty, mut buyer_is_maker) = (None, None, None);
    let is_trade = kind == TradeKind::Trade;
    let event_kind = if is_trade {
        Kind::Trade
    } else {
        Kind::AggTrade
    };
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => cursor.event_type_again(&mut event_type_seen, event_kind)?,
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
    let (first_trade_id, last_trade_id) = if is_trade {
        (0, 0)
    } else {
        (
            cursor.required(first_trade_id, "f")?,
            cursor.required(last_trade_id, "l")?,
        )
    };
    Ok(TradePrint {
        stream: None,
        symbol: cursor.required(symbol, "s")?,
        kind,
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

fn mark_price<'a>(
    cursor: &mut Cursor<'a>,
    mut members: Members,
    mut event_type_seen: bool,
) -> Result<MarkPrice<'a>> {
    let (mut symbol, mut event_time_ms, mut next_funding_time_ms) = (None, None, None);
    let (mut mark, mut index, mut settle, mut funding_rate) = (None, None, None, None);
    while let Some(key) = cursor.next_key(&mut members)? {
        match key {
            b"e" => cursor.event_type_again(&mut event_type_seen, Kind::MarkPrice)?,
            b"E" => read_once!(cursor, event_time_ms, "E", integer),
            b"s" => read_once!(cursor, symbol, "s", plain_string),
            b"p" => read_once!(cursor, mark, "p", decimal),
            b"i" => read_once!(cursor, index, "i", decimal),
            b"P" => read_once!(cursor, settle, "P", decimal),
            b"r" => read_once!(cursor, funding_rate, "r", optional_decimal),
            b"T" => read_once!(cursor, next_funding_time_ms, "T", integer),
            _ => cursor.skip_value()?,
        }
    }
    Ok(MarkPrice {
        stream: None,
        symbol: cursor.required(symbol, "s")?,
        event_time_ms: cursor.required(event_time_ms, "E")?,
        mark_price: cursor.required(mark, "p")?,
        index_price: cursor.required(index, "i")?,
        estimated_settle_price: cursor.required(settle, "P")?,
        funding_rate: cursor.required(funding_rate, "r")?,
        next_funding_time_ms: cursor.required(next_funding_time_ms, "T")?,
    })
}

/// What a reply's `result` held.
#[derive(Clone, Copy)]
pub(crate) enum ReplyResult<'a> {
    Null,
    Streams { streams: &'a [u8], count: usize },
    Other(&'a [u8]),
}

/// The shared JSON cursor (`venue::json`), with Binance's reads on top: decimal strings,
/// integers into `u64`, level arrays, replies, and errors as [`DecodeError`]. The Spot decoder
/// (`venue::binance_spot::decode`) reads the same shapes with it.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a>(json::Cursor<'a>);

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor(json::Cursor::at(bytes, pos))
    }
}

impl<'a> Deref for Cursor<'a> {
    type Target = json::Cursor<'a>;

    #[inline(always)]
    fn deref(&self) -> &json::Cursor<'a> {
        &self.0
    }
}

impl DerefMut for Cursor<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<JsonError> for DecodeError {
    #[inline]
    fn from(error: JsonError) -> Self {
        DecodeError {
            kind: match error.kind {
                JsonErrorKind::Truncated => DecodeErrorKind::Truncated,
                JsonErrorKind::UnexpectedByte(byte) => DecodeErrorKind::UnexpectedByte(byte),
                JsonErrorKind::InvalidString => DecodeErrorKind::InvalidString,
                JsonErrorKind::InvalidNumber => DecodeErrorKind::InvalidNumber,
                JsonErrorKind::TooDeep => DecodeErrorKind::TooDeep,
            },
            offset: error.offset,
        }
    }
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            kind,
            offset: self.pos,
        }
    }

    /// The error for a value of the wrong type where `field` was expected: `WrongType` when
    /// `first` starts some JSON value, a syntax error otherwise.
    pub(crate) fn type_error(&self, first: u8, field: &'static str) -> DecodeError {
        self.error(match first {
            b'"' | b'{' | b'[' | b't' | b'f' | b'n' | b'-' | b'0'..=b'9' => {
                DecodeErrorKind::WrongType(field)
            }
            _ => DecodeErrorKind::UnexpectedByte(first),
        })
    }

    #[inline]
    pub(crate) fn required<T>(&self, slot: Option<T>, field: &'static str) -> Result<T> {
        slot.ok_or_else(|| self.error(DecodeErrorKind::MissingField(field)))
    }

    /// The next member's key, with its `:` consumed, or `None` after the object's `}`. Call it
    /// first right after the `{`.
    #[inline]
    pub(crate) fn next_key(&mut self, members: &mut Members) -> Result<Option<&'a [u8]>> {
        let (key, escaped) = match self.next_raw_key(members)? {
            Some(key) => key,
            None => return Ok(None),
        };
        if escaped {
            return Err(self.error(DecodeErrorKind::EscapedString("key")));
        }
        Ok(Some(key))
    }

    /// A string returned in place: escapes refused (see the module documentation).
    #[inline]
    pub(crate) fn plain_string(&mut self, field: &'static str) -> Result<&'a [u8]> {
        let first = self.peek_value()?;
        if first != b'"' {
            return Err(self.type_error(first, field));
        }
        self.pos += 1;
        if let Some((content, end)) = scan::plain_string(self.bytes, self.pos) {
            self.pos = end;
            return Ok(content);
        }
        let start = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error(DecodeErrorKind::Truncated)),
                Some(b'"') => {
                    let content = self.slice(start, self.pos);
                    self.pos += 1;
                    return Ok(content);
                }
                Some(b'\\') => return Err(self.error(DecodeErrorKind::EscapedString(field))),
                Some(0x00..=0x1f) => return Err(self.error(DecodeErrorKind::InvalidString)),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// A string's raw content, escapes checked but left as they are.
    pub(crate) fn raw_string(&mut self, field: &'static str) -> Result<&'a [u8]> {
        let first = self.peek_value()?;
        if first != b'"' {
            return Err(self.type_error(first, field));
        }
        self.pos += 1;
        let (content, _escaped) = self.string_body()?;
        Ok(content)
    }

    /// A `"e"` met again inside a body whose kind is already known (from the stream name, or
    /// from the first pass): it must name that kind, and only once.
    fn event_type_again(&mut self, seen: &mut bool, kind: Kind) -> Result<()> {
        if *seen {
            return Err(self.error(DecodeErrorKind::DuplicateField("e")));
        }
        *seen = true;
        if self.plain_string("e")? != kind.event_type() {
            return Err(self.error(DecodeErrorKind::EventTypeMismatch));
        }
        Ok(())
    }

    /// The magnitude of a JSON integer (digits only, no leading zero); `overflow` for more
    /// than 64 bits.
    #[inline]
    fn digits(&mut self, field: &'static str) -> Result<u64> {
        if let Some((value, end)) = scan::integer(self.bytes, self.pos) {
            self.pos = end;
            return Ok(value);
        }
        self.digits_exact(field)
    }

    /// [`Cursor::digits`] byte by byte, for what the fast reader leaves: errors and 20 digits.
    #[cold]
    fn digits_exact(&mut self, field: &'static str) -> Result<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(byte @ b'0'..=b'9') = self.peek() {
            let digit = u64::from(byte - b'0');
            value = match value.checked_mul(10).and_then(|v| v.checked_add(digit)) {
                Some(value) => value,
                None => {
                    return Err(DecodeError {
                        kind: DecodeErrorKind::NumberOverflow(field),
                        offset: start,
                    })
                }
            };
            self.pos += 1;
        }
        let count = self.pos - start;
        let leading_zero = count > 1 && self.bytes.get(start) == Some(&b'0');
        let not_integer = matches!(self.peek(), Some(b'.' | b'e' | b'E'));
        if count == 0 || leading_zero || not_integer {
            return Err(DecodeError {
                kind: DecodeErrorKind::InvalidInteger(field),
                offset: start,
            });
        }
        Ok(value)
    }

    /// A non-negative JSON integer that fits `u64`.
    #[inline]
    pub(crate) fn integer(&mut self, field: &'static str) -> Result<u64> {
        let first = self.peek_value()?;
        match first {
            b'0'..=b'9' => self.digits(field),
            b'-' => Err(self.error(DecodeErrorKind::InvalidInteger(field))),
            _ => Err(self.type_error(first, field)),
        }
    }

    /// A JSON integer that fits `i64`.
    pub(crate) fn signed_integer(&mut self, field: &'static str) -> Result<i64> {
        let first = self.peek_value()?;
        let start = self.pos;
        let negative = first == b'-';
        if negative {
            self.pos += 1;
        } else if !first.is_ascii_digit() {
            return Err(self.type_error(first, field));
        }
        let magnitude = self.digits(field)?;
        let value = if negative {
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        };
        value.ok_or(DecodeError {
            kind: DecodeErrorKind::NumberOverflow(field),
            offset: start,
        })
    }

    /// `null` or a `u64`, as the reply `id` is.
    pub(crate) fn optional_integer(&mut self, field: &'static str) -> Result<Option<u64>> {
        if self.peek_value()? == b'n' {
            self.literal(b"null")?;
            return Ok(None);
        }
        self.integer(field).map(Some)
    }

    pub(crate) fn boolean(&mut self, field: &'static str) -> Result<bool> {
        match self.peek_value()? {
            b't' => {
                self.literal(b"true")?;
                Ok(true)
            }
            b'f' => {
                self.literal(b"false")?;
                Ok(false)
            }
            other => Err(self.type_error(other, field)),
        }
    }

    /// A decimal string (`"61800.20"`) read straight into a [`Fixed`].
    #[inline]
    pub(crate) fn decimal(&mut self, field: &'static str) -> Result<Fixed> {
        let first = self.peek_value()?;
        if first == b'"' {
            if let Some((value, end)) = scan::quoted_decimal(self.bytes, self.pos + 1) {
                self.pos = end;
                return Ok(value);
            }
        }
        self.decimal_exact(field)
    }

    /// [`Cursor::decimal`] through [`Fixed::parse`], for what the fast reader leaves.
    #[cold]
    fn decimal_exact(&mut self, field: &'static str) -> Result<Fixed> {
        let text = self.decimal_text(field)?;
        self.parse_decimal(text)
    }

    /// A decimal string that may be empty (`"r":""` for a delivery contract).
    fn optional_decimal(&mut self, field: &'static str) -> Result<Option<Fixed>> {
        if self.peek_value()? == b'"' {
            if let Some((value, end)) = scan::quoted_decimal(self.bytes, self.pos + 1) {
                self.pos = end;
                return Ok(Some(value));
            }
        }
        let text = self.decimal_text(field)?;
        if text.is_empty() {
            return Ok(None);
        }
        self.parse_decimal(text).map(Some)
    }

    /// The content of a decimal string, up to its closing quote. An escape or any other
    /// non-digit byte inside is left for [`Fixed::parse`] to refuse.
    #[inline]
    fn decimal_text(&mut self, field: &'static str) -> Result<&'a [u8]> {
        let first = self.peek_value()?;
        if first != b'"' {
            return Err(self.type_error(first, field));
        }
        self.pos += 1;
        let start = self.pos;
        while let Some(byte) = self.peek() {
            if byte == b'"' {
                let text = self.slice(start, self.pos);
                self.pos += 1;
                return Ok(text);
            }
            self.pos += 1;
        }
        Err(self.error(DecodeErrorKind::Truncated))
    }

    #[inline]
    fn parse_decimal(&self, text: &'a [u8]) -> Result<Fixed> {
        Fixed::parse(text).map_err(|error| DecodeError {
            kind: DecodeErrorKind::BadDecimal(error),
            // The string's first byte; `ParseError` says where inside it.
            offset: self.pos - text.len() - 1,
        })
    }

    /// A `[[price, qty], ...]` array, checked through and kept as bytes.
    pub(crate) fn levels(&mut self, field: &'static str) -> Result<Levels<'a>> {
        let first = self.peek_value()?;
        if first != b'[' {
            return Err(self.type_error(first, field));
        }
        let start = self.pos;
        self.pos += 1;
        let mut count = 0usize;
        if self.peek_value()? == b']' {
            self.pos += 1;
        } else {
            loop {
                self.level(field)?;
                count += 1;
                match self.peek_value()? {
                    b',' => self.pos += 1,
                    b']' => {
                        self.pos += 1;
                        break;
                    }
                    other => return Err(self.error(DecodeErrorKind::UnexpectedByte(other))),
                }
            }
        }
        Ok(Levels {
            bytes: self.slice(start, self.pos),
            count,
            compact: false,
            scan_bytes: self.slice(start, self.pos),
        })
    }

    /// One `["price","qty"]` pair.
    #[inline]
    fn level(&mut self, field: &'static str) -> Result<(Fixed, Fixed)> {
        let first = self.peek_value()?;
        if first != b'[' {
            return Err(self.type_error(first, field));
        }
        self.pos += 1;
        let price = self.decimal(field)?;
        self.expect(b',')?;
        let qty = self.decimal(field)?;
        self.expect(b']')?;
        Ok((price, qty))
    }

    /// A reply's `result`: `null`, an array of strings, or any other value kept raw.
    pub(crate) fn reply_result(&mut self, _field: &'static str) -> Result<ReplyResult<'a>> {
        let start = match self.peek_value()? {
            b'n' => {
                self.literal(b"null")?;
                return Ok(ReplyResult::Null);
            }
            _ => self.pos,
        };
        let mut probe = *self;
        if let Ok(count) = probe.string_array() {
            *self = probe;
            return Ok(ReplyResult::Streams {
                streams: self.slice(start, self.pos),
                count,
            });
        }
        self.skip_value()?;
        Ok(ReplyResult::Other(self.slice(start, self.pos)))
    }

    /// An array whose elements are all strings; their count.
    fn string_array(&mut self) -> Result<usize> {
        self.expect(b'[')?;
        let mut count = 0usize;
        if self.peek_value()? == b']' {
            self.pos += 1;
            return Ok(0);
        }
        loop {
            self.expect(b'"')?;
            self.string_body()?;
            count += 1;
            match self.peek_value()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Ok(count);
                }
                other => return Err(self.error(DecodeErrorKind::UnexpectedByte(other))),
            }
        }
    }

    /// `{"code":2,"msg":".."}` inside an error reply; other members are skipped.
    pub(crate) fn error_object(&mut self, field: &'static str) -> Result<(i64, &'a [u8])> {
        let first = self.peek_value()?;
        if first != b'{' {
            return Err(self.type_error(first, field));
        }
        self.pos += 1;
        let mut members = Members::new();
        let (mut code, mut msg) = (None, None);
        while let Some(key) = self.next_key(&mut members)? {
            let cursor = &mut *self;
            match key {
                b"code" => read_once!(cursor, code, "code", signed_integer),
                b"msg" => read_once!(cursor, msg, "msg", raw_string),
                _ => self.skip_value()?,
            }
        }
        Ok((self.required(code, "code")?, self.required(msg, "msg")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_map_to_kinds() {
        for (stream, kind) in [
            (&b"btcusdt@bookTicker"[..], Some(Kind::BookTicker)),
            (b"btcusdt@depth", Some(Kind::Depth)),
            (b"btcusdt@depth@0ms", Some(Kind::Depth)),
            (b"btcusdt@depth@100ms", Some(Kind::Depth)),
            (b"btcusdt@depth20@100ms", Some(Kind::Depth)),
            (b"btcusdt@depth5", Some(Kind::Depth)),
            (b"btcusdt@trade", Some(Kind::Trade)),
            (b"btcusdt@aggTrade", Some(Kind::AggTrade)),
            (b"btcusdt@markPrice@1s", Some(Kind::MarkPrice)),
            (b"btcusdt@kline_1m", None),
            (b"btcusdt@depthx", None),
            (b"!bookTicker", None),
            (b"", None),
        ] {
            assert_eq!(Kind::from_stream(stream), kind, "{}", sample(stream));
        }
    }

    #[test]
    fn sample_cuts_replaces_and_escapes() {
        assert_eq!(sample(b"ab\n\xffc").to_string(), "ab\\n\u{fffd}c");
        let long = [b'x'; SAMPLE_BYTES + 5];
        let text = sample(&long).to_string();
        assert!(text.starts_with(&"x".repeat(SAMPLE_BYTES)));
        assert!(text.ends_with(&format!("... ({} bytes)", SAMPLE_BYTES + 5)));
    }

    /// Real messages from the capture (see `tests/binance_decode.rs`), in the venue's layout.
    const VENUE_LAYOUT: [&str; 4] = [
        r#"{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313}}"#,
        r#"{"stream":"btcusdt@trade","data":{"e":"trade","E":1723161256322,"T":1723161256322,"s":"BTCUSDT","t":5266583935,"p":"61800.30","q":"0.006","X":"MARKET","m":false}}"#,
        r#"{"stream":"btcusdt@depth@0ms","data":{"e":"depthUpdate","E":1723161292602,"T":1723161292597,"s":"BTCUSDT","U":5123110716482,"u":5123110718158,"pu":5123110716158,"b":[["1000.00","606.675"],["61812.60","4.802"]],"a":[["61812.70","3.053"],["61821.00","0.757"],["61998.10","0.000"]]}}"#,
        r#"{"e":"trade","E":1723161256322,"T":1723161256322,"s":"BTCUSDT","t":5266583935,"p":"61800.30","q":"0.006","X":"MARKET","m":true}"#,
    ];

    #[test]
    fn venue_layout_takes_the_fast_path_and_agrees_with_the_general_one() {
        for text in VENUE_LAYOUT {
            let fast = fast::message(text.as_bytes());
            assert!(fast.is_some(), "{text}");
            assert_eq!(
                fast,
                Some(decode_general(text.as_bytes()).unwrap()),
                "{text}"
            );
        }
    }

    #[test]
    fn any_other_layout_leaves_the_fast_path() {
        for text in VENUE_LAYOUT {
            // A space, another key order, a stream that promises another kind, trailing
            // bytes, a truncation: each is for the general reader to accept or refuse.
            for other in [
                text.replacen(':', ": ", 3),
                text.replacen(r#","s":"BTCUSDT""#, "", 1).replacen(
                    r#"","#,
                    r#"","s":"BTCUSDT","#,
                    1,
                ),
                text.replacen("@trade", "@aggTrade", 1)
                    .replacen("@bookTicker", "@trade", 1)
                    .replacen("@depth@0ms", "@kline_1m", 1),
                format!("{text} "),
                text[..text.len() - 1].to_string(),
            ] {
                if other == text {
                    // A raw event has no stream name to change.
                    continue;
                }
                assert_eq!(fast::message(other.as_bytes()), None, "{other}");
            }
        }
    }

    #[test]
    fn error_is_small_and_displays_kind_and_offset() {
        assert!(std::mem::size_of::<DecodeError>() <= 32);
        let error = decode(br#"{"e":"trade""#).unwrap_err();
        assert_eq!(error.kind, DecodeErrorKind::Truncated);
        assert_eq!(error.to_string(), "message ends inside a value at byte 12");
    }
}
