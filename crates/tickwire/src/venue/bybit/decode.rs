//! One Bybit v5 public WebSocket message, read in place into a typed, borrowed [`Message`].
//!
//! Bybit's pages say nothing of key order, and its own note on `ts` ("the `ts` field appears
//! before the `type` field" on some topics, after it on others) shows that it varies: the reader
//! takes the members in any order, `data` before `topic` included. `data`'s shape is read as it
//! comes (an object: a book or a ticker; an array: trades or liquidations), with the keys of
//! every topic's rows, and the topic then says which of them the message is. A repeated key is
//! refused, as are unknown `type`s. Each object's keys are first compared as the literal bytes
//! of the key Bybit sends next in the order its pages print (`TOP_ORDER`, `DATA_ORDER`,
//! `ROW_ORDER`; a ticker's own top-level order `TICKER_TOP_ORDER`: `,"p":` against the bytes at
//! the cursor, one 16-byte compare under the key's mask, `json::KeyLiteral`), and only a key out
//! of that order goes through the general key loop, which reads the same key from the same
//! bytes. A row's `S` and `L` values are compared as their literals (`"Buy"`, `"Sell"`; the four
//! tick directions) before the general reader. A trade row exactly in linear's layout (the
//! trade page's key order, no whitespace, every value in the form the word readers take) is read
//! with no key loop at all (`row_in_order`), by the same readers; any other row by the key loop
//! (`row_general`). A quoted UUID (`i`) is folded eight hex digits at a time, without the string
//! reader. Likewise a whole ticker exactly in linear's layout (the ticker page's top-level
//! order, `data` from `symbol` on, no whitespace, strings without escapes) is read with no key
//! loop (`ticker_in_order`): its prefix `{"topic":"tickers.` compared as a literal (so the
//! topic's kind is known from it), each kept field's key found by its first letter and one
//! literal compare, each value by the reader the key loop uses; anything else, the key loop
//! reads (and refuses where it must). So is a whole orderbook message in the orderbook page's
//! layout (`book_in_order`: either of its two top-level orders, `data` as `s`, `b`, `a`, `u`,
//! `seq`, no whitespace), its levels by `scan::level_pair_unchained`, which finds each level's
//! end from its quotes so that the next level need not wait for this one's decimals. The key
//! loop reads the topic's kind once, with the topic.
//!
//! Numbers: prices and sizes are decimal strings read exactly into [`Fixed`] (an exponent, more
//! than nine decimals that are not zeros, or a magnitude beyond `Fixed`'s range is an error);
//! times and update ids are JSON integers, taken also as strings of digits (the orderbook page's
//! own example writes `"ts": "1772694601512"`), and anything else there (a sign, a fraction, an
//! exponent, more than `u64`) is an error.
//!
//! **Invariant:** no input makes it panic, read out of bounds or allocate beyond the
//! [`Scratch`] buffers' working size (a message with more than [`MAX_ROWS`] levels a side or
//! rows is refused, so the buffers stop growing there).

use crate::fixed::{Fixed, ParseError};
use crate::venue::binance::scan;
use crate::venue::json::{Cursor, JsonError, JsonErrorKind, KeyLiteral, Members};
use std::fmt;

/// The most levels a side, or rows, one message may carry: orderbook.1000 sends 1000 levels a
/// side, a trade message "up to 1024 trades".
pub const MAX_ROWS: usize = 4096;

/// What went wrong with a message. Small and `Copy`: returned on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON (RFC 8259), or cut short.
    Json(JsonError),
    /// A price or size that is not an exact decimal `Fixed` holds.
    Decimal { offset: usize, error: ParseError },
    /// A time or id that is not an unsigned integer of at most 64 bits.
    Integer { offset: usize },
    /// A value of the wrong JSON type for its key.
    WrongType { field: &'static str, offset: usize },
    /// A key that appears twice in one object.
    RepeatedKey { offset: usize },
    /// `type` is neither `snapshot` nor `delta`.
    UnknownType { offset: usize },
    /// A field the message's topic needs is missing.
    Missing(&'static str),
    /// More than [`MAX_ROWS`] levels on a side, or rows.
    TooManyRows { offset: usize },
    /// Neither a `topic` (market data) nor an `op` (an answer).
    NeitherTopicNorOp,
}

impl DecodeError {
    /// Where in the message it was seen (0 when it concerns the whole message).
    pub fn offset(&self) -> usize {
        match *self {
            DecodeError::Json(error) => error.offset,
            DecodeError::Decimal { offset, .. }
            | DecodeError::Integer { offset }
            | DecodeError::WrongType { offset, .. }
            | DecodeError::RepeatedKey { offset }
            | DecodeError::UnknownType { offset }
            | DecodeError::TooManyRows { offset } => offset,
            DecodeError::Missing(_) | DecodeError::NeitherTopicNorOp => 0,
        }
    }
}

impl From<JsonError> for DecodeError {
    fn from(error: JsonError) -> Self {
        DecodeError::Json(error)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(error) => error.fmt(f),
            DecodeError::Decimal { offset, error } => {
                write!(f, "bad decimal at offset {offset}: {error}")
            }
            DecodeError::Integer { offset } => {
                write!(f, "not an unsigned 64-bit integer at offset {offset}")
            }
            DecodeError::WrongType { field, offset } => {
                write!(f, "`{field}` has the wrong type at offset {offset}")
            }
            DecodeError::RepeatedKey { offset } => write!(f, "a repeated key at offset {offset}"),
            DecodeError::UnknownType { offset } => write!(
                f,
                "`type` is neither \"snapshot\" nor \"delta\" at offset {offset}"
            ),
            DecodeError::Missing(field) => write!(f, "missing field `{field}`"),
            DecodeError::TooManyRows { offset } => {
                write!(f, "more than {MAX_ROWS} levels or rows at offset {offset}")
            }
            DecodeError::NeitherTopicNorOp => write!(f, "neither a `topic` nor an `op`"),
        }
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

/// A ticker field as a message carries it: not there (unchanged, in a delta), there but empty
/// (`""`: no value, such as a dated future's `fundingRate`), or a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Field {
    #[default]
    Absent,
    Empty,
    Value(Fixed),
}

impl Field {
    pub fn is_present(self) -> bool {
        self != Field::Absent
    }

    /// The field merged over what was known: an absent field keeps `known`.
    pub fn over(self, known: Option<Fixed>) -> Option<Fixed> {
        match self {
            Field::Absent => known,
            Field::Empty => None,
            Field::Value(value) => Some(value),
        }
    }
}

/// The ticker fields tickwire publishes or keeps (the rest are checked as JSON and skipped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickerFields {
    pub bid1_price: Field,
    pub bid1_size: Field,
    pub ask1_price: Field,
    pub ask1_size: Field,
    pub mark_price: Field,
    pub index_price: Field,
    pub funding_rate: Field,
    pub open_interest: Field,
}

/// One row of a `publicTrade` or `allLiquidation` message's `data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `T`, ms.
    pub time_ms: u64,
    /// `S`: `Buy` (the taker bought; for a liquidation, a long position was liquidated).
    pub buy: bool,
    /// `v`.
    pub size: Fixed,
    /// `p`.
    pub price: Fixed,
    /// `i` as [`trade_id`] reads it (0 without one: liquidations).
    pub id: u64,
    /// `seq`, the cross sequence (0 without one).
    pub seq: u64,
    /// `s`, as a range of the message.
    pub symbol: (usize, usize),
}

/// The levels and rows of the message last decoded. Kept by the caller and reused, so that
/// decoding allocates nothing once the buffers have grown to the venue's message sizes.
#[derive(Debug)]
pub struct Scratch {
    pub bids: Vec<(Fixed, Fixed)>,
    pub asks: Vec<(Fixed, Fixed)>,
    pub rows: Vec<Row>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            bids: Vec::with_capacity(1024),
            asks: Vec::with_capacity(1024),
            rows: Vec::with_capacity(1024),
        }
    }
}

/// What a topic's first word says the message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicKind {
    /// `orderbook.{depth}.{symbol}`.
    Orderbook,
    /// `publicTrade.{symbol}`.
    PublicTrade,
    /// `tickers.{symbol}`.
    Tickers,
    /// `allLiquidation.{symbol}`.
    AllLiquidation,
}

impl TopicKind {
    /// The topic's kind and its symbol (the part after the last `.`), or `None` for a topic
    /// this module does not read.
    pub fn of(topic: &[u8]) -> Option<(TopicKind, &[u8])> {
        let (kind, rest) = if let Some(rest) = topic.strip_prefix(b"orderbook.") {
            let dot = rest.iter().position(|&byte| byte == b'.')?;
            let depth = &rest[..dot];
            if depth.is_empty() || !depth.iter().all(u8::is_ascii_digit) {
                return None;
            }
            (TopicKind::Orderbook, &rest[dot + 1..])
        } else if let Some(rest) = topic.strip_prefix(b"publicTrade.") {
            (TopicKind::PublicTrade, rest)
        } else if let Some(rest) = topic.strip_prefix(b"tickers.") {
            (TopicKind::Tickers, rest)
        } else if let Some(rest) = topic.strip_prefix(b"allLiquidation.") {
            (TopicKind::AllLiquidation, rest)
        } else {
            return None;
        };
        (!rest.is_empty()).then_some((kind, rest))
    }
}

/// A decoded message; strings borrow the payload, levels and rows are in the [`Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `orderbook.*`: `scratch.bids` and `scratch.asks` hold its levels.
    Book {
        topic: &'a [u8],
        snapshot: bool,
        /// `ts`, ms.
        ts_ms: u64,
        /// `cts`, ms (0 without one).
        cts_ms: u64,
        /// `data.s`.
        symbol: &'a [u8],
        /// `data.u`.
        update_id: u64,
        /// `data.seq` (0 without one).
        seq: u64,
    },
    /// `publicTrade.*`: `scratch.rows` holds its trades.
    Trades { topic: &'a [u8], ts_ms: u64 },
    /// `tickers.*`.
    Ticker {
        topic: &'a [u8],
        snapshot: bool,
        ts_ms: u64,
        /// `data.symbol`.
        symbol: &'a [u8],
        fields: TickerFields,
    },
    /// `allLiquidation.*`: `scratch.rows` holds its liquidations.
    Liquidations { topic: &'a [u8], ts_ms: u64 },
    /// A topic this module does not read (`system.status`, a topic of another category).
    OtherTopic { topic: &'a [u8] },
    /// An answer to an `op` (`subscribe`, `unsubscribe`, `ping`), or the option and private
    /// channels' `pong`.
    Answer {
        op: &'a [u8],
        /// `success`, when the answer has one.
        success: Option<bool>,
        ret_msg: &'a [u8],
        req_id: &'a [u8],
    },
}

/// A Bybit trade id (`i`, a string) as a 64-bit `trade_id`: a decimal id (spot's) that fits is
/// kept as its number; a UUID (linear's, `8-4-4-4-12` hex digits) is folded to 64 bits, its
/// upper and lower halves XORed (two UUIDs collide with probability 2^-64); anything else is
/// its 64-bit FNV-1a hash. The same string always gives the same id, on every run and host.
pub fn trade_id(id: &[u8]) -> u64 {
    if !id.is_empty() && id.len() <= 20 && id.iter().all(u8::is_ascii_digit) {
        let mut value: u64 = 0;
        let fits = id.iter().all(|&digit| {
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            {
                Some(next) => {
                    value = next;
                    true
                }
                None => false,
            }
        });
        if fits {
            return value;
        }
    }
    if let Some(folded) = uuid_folded(id) {
        return folded;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in id {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A UUID (`8-4-4-4-12` hex digits) folded to 64 bits, its upper and lower halves XORed;
/// `None` for anything else.
///
/// The 32 digits are read eight at a time (SWAR, as `binance/scan.rs` reads decimal digits):
/// the first eight, the next two groups of four, the group of four and the first four of the
/// twelve, their last eight. Each word's lanes are checked to be hex digits (either case) and
/// turned into their 32-bit value in three shift-and-merge steps.
#[inline]
fn uuid_folded(id: &[u8]) -> Option<u64> {
    let id: &[u8; 36] = id.try_into().ok()?;
    if id[8] != b'-' || id[13] != b'-' || id[18] != b'-' || id[23] != b'-' {
        return None;
    }
    let word = |at: usize| -> u64 {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&id[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    let half = |at: usize| -> u64 {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(&id[at..at + 4]);
        u64::from(u32::from_le_bytes(bytes))
    };
    let first = hex8(word(0))?;
    let second = hex8(half(9) | (half(14) << 32))?;
    let third = hex8(half(19) | (half(24) << 32))?;
    let fourth = hex8(word(28))?;
    Some(((first << 32) | second) ^ ((third << 32) | fourth))
}

/// Eight ASCII hex digits (either case; the first in the low lane, the most significant) as
/// their 32-bit value; `None` when a lane is not a hex digit.
#[inline(always)]
fn hex8(word: u64) -> Option<u64> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    // Lanes of at least `limit` (for lanes below 0x80: no carry crosses a lane).
    let at_least = |lanes: u64, limit: u8| lanes.wrapping_add(ONES * u64::from(0x80 - limit));
    let digit = at_least(word, b'0') & !at_least(word, b'9' + 1);
    let lower = word | (ONES * 0x20);
    let letter = at_least(lower, b'a') & !at_least(lower, b'f' + 1);
    if word & TOPS != 0 || (digit | letter) & TOPS != TOPS {
        return None;
    }
    // A digit's value is its low nibble; a letter's is its low nibble plus 9 (bit 6 set).
    let values = (word & (ONES * 0x0f)) + ((word >> 6) & ONES) * 9;
    let pairs = ((values << 4) | (values >> 8)) & 0x00ff_00ff_00ff_00ff;
    let quads = ((pairs << 8) | (pairs >> 16)) & 0x0000_ffff_0000_ffff;
    Some(((quads << 16) | (quads >> 32)) & 0xffff_ffff)
}

/// `"` then a UUID then `"` at `pos`: its [`trade_id`] and the position after the closing quote,
/// without the string reader (a UUID holds no escape, no control character and no quote, and
/// is never all digits, so this is what `trade_id(string(..))` gives for the same bytes).
#[inline(always)]
fn quoted_uuid(bytes: &[u8], pos: usize) -> Option<(u64, usize)> {
    let quoted = bytes.get(pos..pos + 38)?;
    if quoted[0] != b'"' || quoted[37] != b'"' {
        return None;
    }
    Some((uuid_folded(&quoted[1..37])?, pos + 38))
}

/// A key order Bybit sends, each key as its bytes on the wire (`"key":`) and as the key loop
/// reads it.
type KeyOrder = [(KeyLiteral, &'static [u8])];

/// The top level: books and trades `topic`, `type`, `ts`, `data` (books then `cts`); tickers
/// `topic`, `type`, `data`, `cs`, `ts`.
const TOP_ORDER: &KeyOrder = &[
    (KeyLiteral::new(br#""topic":"#), b"topic"),
    (KeyLiteral::new(br#""type":"#), b"type"),
    (KeyLiteral::new(br#""ts":"#), b"ts"),
    (KeyLiteral::new(br#""data":"#), b"data"),
    (KeyLiteral::new(br#""cts":"#), b"cts"),
];

/// A ticker's top level: `topic`, `type`, `data`, `cs`, `ts`.
const TICKER_TOP_ORDER: &KeyOrder = &[
    (KeyLiteral::new(br#""topic":"#), b"topic"),
    (KeyLiteral::new(br#""type":"#), b"type"),
    (KeyLiteral::new(br#""data":"#), b"data"),
    (KeyLiteral::new(br#""cs":"#), b"cs"),
    (KeyLiteral::new(br#""ts":"#), b"ts"),
];

/// Where a ticker's `data` starts in [`DATA_ORDER`] (its `symbol`).
const TICKER_DATA_START: usize = 5;

/// `bytes` from `pos` start with `literal`.
#[inline(always)]
fn at_literal(bytes: &[u8], pos: usize, literal: &[u8]) -> bool {
    bytes
        .get(pos..pos + literal.len())
        .is_some_and(|window| window == literal)
}

/// `data` of a book (`s`, `b`, `a`, `u`, `seq`) or a ticker (`symbol`, then the fields in the
/// ticker page's order, a delta's changed ones only).
const DATA_ORDER: &KeyOrder = &[
    (KeyLiteral::new(br#""s":"#), b"s"),
    (KeyLiteral::new(br#""b":"#), b"b"),
    (KeyLiteral::new(br#""a":"#), b"a"),
    (KeyLiteral::new(br#""u":"#), b"u"),
    (KeyLiteral::new(br#""seq":"#), b"seq"),
    (KeyLiteral::new(br#""symbol":"#), b"symbol"),
    (KeyLiteral::new(br#""markPrice":"#), b"markPrice"),
    (KeyLiteral::new(br#""indexPrice":"#), b"indexPrice"),
    (KeyLiteral::new(br#""openInterest":"#), b"openInterest"),
    (KeyLiteral::new(br#""fundingRate":"#), b"fundingRate"),
    (KeyLiteral::new(br#""bid1Price":"#), b"bid1Price"),
    (KeyLiteral::new(br#""bid1Size":"#), b"bid1Size"),
    (KeyLiteral::new(br#""ask1Price":"#), b"ask1Price"),
    (KeyLiteral::new(br#""ask1Size":"#), b"ask1Size"),
];

/// A trade row (`T`, `s`, `S`, `v`, `p`, `L`, `i`, `BT`, `seq`) or a liquidation's (`T`, `s`,
/// `S`, `v`, `p`).
const ROW_ORDER: &KeyOrder = &[
    (KeyLiteral::new(br#""T":"#), b"T"),
    (KeyLiteral::new(br#""s":"#), b"s"),
    (KeyLiteral::new(br#""S":"#), b"S"),
    (KeyLiteral::new(br#""v":"#), b"v"),
    (KeyLiteral::new(br#""p":"#), b"p"),
    (KeyLiteral::new(br#""L":"#), b"L"),
    (KeyLiteral::new(br#""i":"#), b"i"),
    (KeyLiteral::new(br#""BT":"#), b"BT"),
    (KeyLiteral::new(br#""seq":"#), b"seq"),
];

/// The next key of an object: compared first as the literal `order` expects next (`*next`), and
/// read by the key loop when it is another; `None` at the object's end. `*next` then points past
/// the key read in `order` (unchanged for a key `order` does not hold), so that one key out of
/// place costs one miss, not the rest of the object.
#[inline(always)]
fn next_key<'a>(
    cursor: &mut Cursor<'a>,
    members: &mut Members,
    order: &KeyOrder,
    next: &mut usize,
) -> Result<Option<&'a [u8]>> {
    if let Some(&(literal, key)) = order.get(*next) {
        if cursor.key_word(members, &literal) {
            *next += 1;
            return Ok(Some(key));
        }
    }
    let Some((key, _)) = cursor.next_raw_key(members)? else {
        return Ok(None);
    };
    if let Some(at) = order.iter().position(|&(_, known)| known == key) {
        *next = at + 1;
    }
    Ok(Some(key))
}

/// The keys read, one bit each, to refuse a repeated one.
#[derive(Default)]
struct Seen(u64);

impl Seen {
    fn first(&mut self, bit: u32, cursor: &Cursor<'_>) -> Result<()> {
        let mask = 1u64 << bit;
        if self.0 & mask != 0 {
            return Err(DecodeError::RepeatedKey { offset: cursor.pos });
        }
        self.0 |= mask;
        Ok(())
    }
}

#[inline(always)]
fn string<'a>(cursor: &mut Cursor<'a>, field: &'static str) -> Result<&'a [u8]> {
    if cursor.peek_value()? != b'"' {
        return Err(DecodeError::WrongType {
            field,
            offset: cursor.pos,
        });
    }
    cursor.pos += 1;
    Ok(cursor.string_body()?.0)
}

/// A price or size: the venue's form inline, the rest through [`decimal_general`].
#[inline(always)]
fn decimal(cursor: &mut Cursor<'_>, field: &'static str) -> Result<Fixed> {
    // The venue's form (`-?[0-9]{1,7}(\.[0-9]{0,8})?`), read in words by Binance's scanner,
    // which returns what `Fixed::parse` would for it; anything else takes the general path.
    if cursor.peek() == Some(b'"') {
        if let Some((value, end)) = scan::quoted_decimal(cursor.bytes, cursor.pos + 1) {
            cursor.pos = end;
            return Ok(value);
        }
    }
    decimal_general(cursor, field)
}

#[inline(never)]
fn decimal_general(cursor: &mut Cursor<'_>, field: &'static str) -> Result<Fixed> {
    let start = cursor.pos;
    let text = string(cursor, field)?;
    Fixed::parse(text).map_err(|error| DecodeError::Decimal {
        offset: start,
        error,
    })
}

/// A ticker field: the venue's form inline, the rest through [`field_general`].
#[inline(always)]
fn field(cursor: &mut Cursor<'_>, name: &'static str) -> Result<Field> {
    if cursor.peek() == Some(b'"') {
        if let Some((value, end)) = scan::quoted_decimal(cursor.bytes, cursor.pos + 1) {
            cursor.pos = end;
            return Ok(Field::Value(value));
        }
    }
    field_general(cursor, name)
}

#[inline(never)]
fn field_general(cursor: &mut Cursor<'_>, name: &'static str) -> Result<Field> {
    let start = cursor.pos;
    let text = string(cursor, name)?;
    if text.is_empty() {
        return Ok(Field::Empty);
    }
    Fixed::parse(text)
        .map(Field::Value)
        .map_err(|error| DecodeError::Decimal {
            offset: start,
            error,
        })
}

/// An unsigned integer, as a JSON number or a string of digits: 1 to 19 digits, not followed by
/// a fraction or an exponent, read in words inline; the rest through [`integer_general`].
#[inline(always)]
fn integer(cursor: &mut Cursor<'_>, field: &'static str) -> Result<u64> {
    let start = cursor.skip_whitespace_pos();
    if let Some((value, end)) = scan::integer(cursor.bytes, start) {
        cursor.pos = end;
        return Ok(value);
    }
    integer_general(cursor, field)
}

#[inline(never)]
fn integer_general(cursor: &mut Cursor<'_>, field: &'static str) -> Result<u64> {
    let start = cursor.pos;
    let digits: &[u8] = match cursor.peek() {
        Some(b'"') => string(cursor, field)?,
        Some(b'0'..=b'9' | b'-') => {
            cursor.skip_number()?;
            cursor.slice(start, cursor.pos)
        }
        _ => {
            return Err(DecodeError::WrongType {
                field,
                offset: start,
            })
        }
    };
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::Integer { offset: start });
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .ok_or(DecodeError::Integer { offset: start })?;
    }
    Ok(value)
}

fn boolean(cursor: &mut Cursor<'_>, field: &'static str) -> Result<bool> {
    match cursor.peek_value()? {
        b't' => cursor.literal(b"true").map(|()| true).map_err(Into::into),
        b'f' => cursor.literal(b"false").map(|()| false).map_err(Into::into),
        _ => Err(DecodeError::WrongType {
            field,
            offset: cursor.pos,
        }),
    }
}

trait SkipWhitespacePos {
    fn skip_whitespace_pos(&mut self) -> usize;
}

impl SkipWhitespacePos for Cursor<'_> {
    fn skip_whitespace_pos(&mut self) -> usize {
        self.skip_whitespace();
        self.pos
    }
}

/// `[["price","size"],...]` into `out`.
fn levels(
    cursor: &mut Cursor<'_>,
    out: &mut Vec<(Fixed, Fixed)>,
    field: &'static str,
) -> Result<()> {
    out.clear();
    cursor.expect(b'[').map_err(|_| DecodeError::WrongType {
        field,
        offset: cursor.pos,
    })?;
    if cursor.peek_value()? == b']' {
        cursor.pos += 1;
        return Ok(());
    }
    loop {
        if out.len() >= MAX_ROWS {
            return Err(DecodeError::TooManyRows { offset: cursor.pos });
        }
        cursor.skip_whitespace();
        // `["price","size"]` in the venue's form, read in words; the rest takes the general path.
        if let Some((price, size, end)) = scan::level_pair(cursor.bytes, cursor.pos) {
            cursor.pos = end;
            out.push((price, size));
            match cursor.peek() {
                Some(b',') => {
                    cursor.pos += 1;
                    continue;
                }
                Some(b']') => {
                    cursor.pos += 1;
                    return Ok(());
                }
                _ => {}
            }
            match cursor.peek_value()? {
                b',' => {
                    cursor.pos += 1;
                    continue;
                }
                b']' => {
                    cursor.pos += 1;
                    return Ok(());
                }
                other => {
                    return Err(DecodeError::Json(
                        cursor.error(JsonErrorKind::UnexpectedByte(other)),
                    ))
                }
            }
        }
        cursor.expect(b'[')?;
        let price = decimal(cursor, field)?;
        cursor.expect(b',')?;
        let size = decimal(cursor, field)?;
        cursor.expect(b']')?;
        out.push((price, size));
        match cursor.peek_value()? {
            b',' => cursor.pos += 1,
            b']' => {
                cursor.pos += 1;
                return Ok(());
            }
            other => {
                return Err(DecodeError::Json(
                    cursor.error(JsonErrorKind::UnexpectedByte(other)),
                ))
            }
        }
    }
}

/// What `data` held, before the topic says which it is.
#[derive(Default)]
struct Data<'a> {
    /// `data` was an object (a book or a ticker) or an array (rows).
    object: bool,
    array: bool,
    /// Book keys.
    s: Option<&'a [u8]>,
    u: Option<u64>,
    seq: Option<u64>,
    has_b: bool,
    has_a: bool,
    /// Ticker keys.
    symbol: Option<&'a [u8]>,
    fields: TickerFields,
    /// The first field a row lacks.
    rows_missing: Option<&'static str>,
}

fn data_object<'a>(
    cursor: &mut Cursor<'a>,
    scratch: &mut Scratch,
    data: &mut Data<'a>,
    start: usize,
) -> Result<()> {
    data.object = true;
    scratch.bids.clear();
    scratch.asks.clear();
    cursor.pos += 1;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut next = start;
    while let Some(key) = next_key(cursor, &mut members, DATA_ORDER, &mut next)? {
        let (bit, target): (u32, &mut Field) = match key {
            b"s" => {
                seen.first(0, cursor)?;
                data.s = Some(string(cursor, "s")?);
                continue;
            }
            b"b" => {
                seen.first(1, cursor)?;
                levels(cursor, &mut scratch.bids, "b")?;
                data.has_b = true;
                continue;
            }
            b"a" => {
                seen.first(2, cursor)?;
                levels(cursor, &mut scratch.asks, "a")?;
                data.has_a = true;
                continue;
            }
            b"u" => {
                seen.first(3, cursor)?;
                data.u = Some(integer(cursor, "u")?);
                continue;
            }
            b"seq" => {
                seen.first(4, cursor)?;
                data.seq = Some(integer(cursor, "seq")?);
                continue;
            }
            b"symbol" => {
                seen.first(5, cursor)?;
                data.symbol = Some(string(cursor, "symbol")?);
                continue;
            }
            b"bid1Price" => (6, &mut data.fields.bid1_price),
            b"bid1Size" => (7, &mut data.fields.bid1_size),
            b"ask1Price" => (8, &mut data.fields.ask1_price),
            b"ask1Size" => (9, &mut data.fields.ask1_size),
            b"markPrice" => (10, &mut data.fields.mark_price),
            b"indexPrice" => (11, &mut data.fields.index_price),
            b"fundingRate" => (12, &mut data.fields.funding_rate),
            b"openInterest" => (13, &mut data.fields.open_interest),
            _ => {
                cursor.skip_value()?;
                continue;
            }
        };
        seen.first(bit, cursor)?;
        *target = field(cursor, "ticker field")?;
    }
    Ok(())
}

/// One row of `data` by the key loop, its keys in any order: the row, and in `missing` the first
/// field it lacks (if none was missing before).
#[inline(never)]
fn row_general(cursor: &mut Cursor<'_>, missing: &mut Option<&'static str>) -> Result<Row> {
    if cursor.peek_value()? != b'{' {
        return Err(DecodeError::WrongType {
            field: "data",
            offset: cursor.pos,
        });
    }
    cursor.pos += 1;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let (mut time, mut side, mut size, mut price) = (None, None, None, None);
    let (mut id, mut seq, mut symbol) = (0, 0, None);
    let mut next = 0;
    while let Some(key) = next_key(cursor, &mut members, ROW_ORDER, &mut next)? {
        match key {
            b"T" => {
                seen.first(0, cursor)?;
                time = Some(integer(cursor, "T")?);
            }
            b"s" => {
                seen.first(1, cursor)?;
                let start = cursor.skip_whitespace_pos() + 1;
                let text = string(cursor, "s")?;
                symbol = Some((start, start + text.len()));
            }
            b"S" => {
                seen.first(2, cursor)?;
                let at = cursor.pos;
                // The two values as literals first.
                if at_literal(cursor.bytes, at, br#""Buy""#) {
                    cursor.pos += 5;
                    side = Some(true);
                    continue;
                }
                if at_literal(cursor.bytes, at, br#""Sell""#) {
                    cursor.pos += 6;
                    side = Some(false);
                    continue;
                }
                side = Some(match string(cursor, "S")? {
                    b"Buy" => true,
                    b"Sell" => false,
                    _ => {
                        return Err(DecodeError::WrongType {
                            field: "S",
                            offset: at,
                        })
                    }
                });
            }
            b"v" => {
                seen.first(3, cursor)?;
                size = Some(decimal(cursor, "v")?);
            }
            b"p" => {
                seen.first(4, cursor)?;
                price = Some(decimal(cursor, "p")?);
            }
            b"i" => {
                seen.first(5, cursor)?;
                // Linear's UUIDs as they come; anything else through the string reader.
                if let Some((folded, end)) = quoted_uuid(cursor.bytes, cursor.pos) {
                    cursor.pos = end;
                    id = folded;
                    continue;
                }
                id = trade_id(string(cursor, "i")?);
            }
            b"seq" => {
                seen.first(6, cursor)?;
                seq = integer(cursor, "seq")?;
            }
            b"L" => {
                // The tick direction, unused: its four values passed as literals.
                let at = cursor.pos;
                match [
                    &br#""PlusTick""#[..],
                    br#""MinusTick""#,
                    br#""ZeroPlusTick""#,
                    br#""ZeroMinusTick""#,
                ]
                .into_iter()
                .find(|literal| at_literal(cursor.bytes, at, literal))
                {
                    Some(literal) => cursor.pos += literal.len(),
                    None => cursor.skip_value()?,
                }
            }
            b"BT" | b"RPI" => {
                seen.first(if key == b"BT" { 7 } else { 8 }, cursor)?;
                boolean(cursor, "BT")?;
            }
            _ => cursor.skip_value()?,
        }
    }
    // A row without one of the fields is an error only for the topics whose rows these
    // are (a `system.status` row has none of them): the first missing one is kept.
    let mut need = |value: Option<_>, name: &'static str| {
        if value.is_none() && missing.is_none() {
            *missing = Some(name);
        }
    };
    need(time.map(drop), "T");
    need(side.map(drop), "S");
    need(size.map(drop), "v");
    need(price.map(drop), "p");
    need(symbol.map(drop), "s");
    Ok(Row {
        time_ms: time.unwrap_or(0),
        buy: side.unwrap_or(false),
        size: size.unwrap_or(Fixed::ZERO),
        price: price.unwrap_or(Fixed::ZERO),
        id,
        seq,
        symbol: symbol.unwrap_or((0, 0)),
    })
}

/// A trade row exactly as linear sends it, from its `{` to past its `}`: the keys in the trade
/// page's order (`T`, `s`, `S`, `v`, `p`, `L`, `i`, `BT`, `seq`) with no whitespace, each value
/// in the form the word readers take (an integer of at most 19 digits, a string without
/// escapes, `Buy` or `Sell`, decimals in the venue's form, one of the four tick directions, a
/// UUID, `true` or `false`). Each value is read by the reader [`row_general`] uses for it, so
/// a row read here is the row it reads; `None` for anything else, which it then reads.
#[inline(always)]
fn row_in_order(bytes: &[u8], pos: usize) -> Option<(Row, usize)> {
    #[inline(always)]
    fn literal<const N: usize>(bytes: &[u8], at: &mut usize, literal: &[u8; N]) -> bool {
        let same = bytes.get(*at..*at + N) == Some(&literal[..]);
        if same {
            *at += N;
        }
        same
    }
    let mut at = pos;
    if !literal(bytes, &mut at, br#"{"T":"#) {
        return None;
    }
    let (time_ms, end) = scan::integer(bytes, at)?;
    at = end;
    if !literal(bytes, &mut at, br#","s":""#) {
        return None;
    }
    let (text, end) = scan::plain_string(bytes, at)?;
    let symbol = (at, at + text.len());
    at = end;
    if !literal(bytes, &mut at, br#","S":""#) {
        return None;
    }
    let buy = if literal(bytes, &mut at, br#"Buy""#) {
        true
    } else if literal(bytes, &mut at, br#"Sell""#) {
        false
    } else {
        return None;
    };
    if !literal(bytes, &mut at, br#","v":""#) {
        return None;
    }
    let (size, end) = scan::quoted_decimal(bytes, at)?;
    at = end;
    if !literal(bytes, &mut at, br#","p":""#) {
        return None;
    }
    let (price, end) = scan::quoted_decimal(bytes, at)?;
    at = end;
    if !literal(bytes, &mut at, br#","L":""#) {
        return None;
    }
    if !(literal(bytes, &mut at, br#"PlusTick""#)
        || literal(bytes, &mut at, br#"MinusTick""#)
        || literal(bytes, &mut at, br#"ZeroPlusTick""#)
        || literal(bytes, &mut at, br#"ZeroMinusTick""#))
    {
        return None;
    }
    if !literal(bytes, &mut at, br#","i":"#) {
        return None;
    }
    let (id, end) = quoted_uuid(bytes, at)?;
    at = end;
    if !literal(bytes, &mut at, br#","BT":"#) {
        return None;
    }
    if !(literal(bytes, &mut at, b"false") || literal(bytes, &mut at, b"true")) {
        return None;
    }
    if !literal(bytes, &mut at, br#","seq":"#) {
        return None;
    }
    let (seq, end) = scan::integer(bytes, at)?;
    at = end;
    if !literal(bytes, &mut at, b"}") {
        return None;
    }
    Some((
        Row {
            time_ms,
            buy,
            size,
            price,
            id,
            seq,
            symbol,
        },
        at,
    ))
}

/// How a linear ticker starts: `{"topic":"tickers.`, for [`ticker_in_order`].
const TICKER_START: &[u8] = br#"{"topic":"tickers."#;

/// The ticker fields [`ticker_in_order`] reads, as `,"key":` after the member before (keyed
/// by the key's first letter; the key loop reads the same keys, [`DATA_ORDER`]).
const MARK_PRICE: KeyLiteral = KeyLiteral::new(br#""markPrice":"#);
const INDEX_PRICE: KeyLiteral = KeyLiteral::new(br#""indexPrice":"#);
const OPEN_INTEREST: KeyLiteral = KeyLiteral::new(br#""openInterest":"#);
const FUNDING_RATE: KeyLiteral = KeyLiteral::new(br#""fundingRate":"#);
const BID1_PRICE: KeyLiteral = KeyLiteral::new(br#""bid1Price":"#);
const BID1_SIZE: KeyLiteral = KeyLiteral::new(br#""bid1Size":"#);
const ASK1_PRICE: KeyLiteral = KeyLiteral::new(br#""ask1Price":"#);
const ASK1_SIZE: KeyLiteral = KeyLiteral::new(br#""ask1Size":"#);

/// `literal` at `*at`: moves past it and `true`; otherwise nothing moves.
#[inline(always)]
fn literal_at<const N: usize>(bytes: &[u8], at: &mut usize, literal: &[u8; N]) -> bool {
    let same = bytes.get(*at..*at + N) == Some(&literal[..]);
    if same {
        *at += N;
    }
    same
}

/// A whole ticker message exactly as linear sends it: the ticker page's top-level order
/// (`topic`, `type`, `data`, `cs`, `ts`) with no whitespace, a `tickers.` topic, `type`
/// `snapshot` or `delta`, `data` starting with `symbol` and then any of the ticker's fields
/// in any order, each string without escapes; the fields tickwire keeps (`TickerFields`) as
/// decimals (or `""`), the others skipped as strings; `cs` and `ts` integers; nothing after the
/// closing `}`. Each value is read by the reader the key loop uses for it and the topic's kind
/// is known from its first bytes, so a message read here is the `Message` [`decode`]'s key loop
/// reads from it (the key loop's other checks cannot fail on such a message); `None` for
/// anything else (a repeated field, a book's key in `data`, a value the readers here do not
/// take), which the key loop then reads, and refuses where it must.
#[inline(never)]
pub(super) fn ticker_in_order<'a>(bytes: &'a [u8], scratch: &mut Scratch) -> Option<Message<'a>> {
    if !bytes.starts_with(TICKER_START) {
        return None;
    }
    let mut at = TICKER_START.len();
    let (rest, end) = scan::plain_string(bytes, at)?;
    if rest.is_empty() {
        return None;
    }
    // `"topic":"` is ten bytes from the `{`.
    let topic = bytes.get(10..end - 1)?;
    at = end;
    if !literal_at(bytes, &mut at, br#","type":""#) {
        return None;
    }
    let snapshot = if literal_at(bytes, &mut at, br#"delta""#) {
        false
    } else if literal_at(bytes, &mut at, br#"snapshot""#) {
        true
    } else {
        return None;
    };
    if !literal_at(bytes, &mut at, br#","data":{"symbol":""#) {
        return None;
    }
    let (symbol, end) = scan::plain_string(bytes, at)?;
    let mut cursor = Cursor::at(bytes, end);
    let mut fields = TickerFields::default();
    let mut seen = 0u8;
    loop {
        let mut members = Members::after_first();
        let key = |cursor: &mut Cursor<'_>, members: &mut Members, literal: &KeyLiteral| {
            cursor.key_word(members, literal)
        };
        // The letter after `,"`: which of the kept fields it can be.
        let (bit, target) = match bytes.get(cursor.pos + 2) {
            Some(b'm') if key(&mut cursor, &mut members, &MARK_PRICE) => {
                (0, &mut fields.mark_price)
            }
            Some(b'i') if key(&mut cursor, &mut members, &INDEX_PRICE) => {
                (1, &mut fields.index_price)
            }
            Some(b'o') if key(&mut cursor, &mut members, &OPEN_INTEREST) => {
                (2, &mut fields.open_interest)
            }
            Some(b'f') if key(&mut cursor, &mut members, &FUNDING_RATE) => {
                (3, &mut fields.funding_rate)
            }
            Some(b'b') if key(&mut cursor, &mut members, &BID1_PRICE) => {
                (4, &mut fields.bid1_price)
            }
            Some(b'b') if key(&mut cursor, &mut members, &BID1_SIZE) => (5, &mut fields.bid1_size),
            Some(b'a') if key(&mut cursor, &mut members, &ASK1_PRICE) => {
                (6, &mut fields.ask1_price)
            }
            Some(b'a') if key(&mut cursor, &mut members, &ASK1_SIZE) => (7, &mut fields.ask1_size),
            _ => {
                match bytes.get(cursor.pos)? {
                    b'}' => break,
                    b',' => {}
                    _ => return None,
                }
                cursor.pos = ticker_other_member(bytes, cursor.pos + 1)?;
                continue;
            }
        };
        if seen & (1 << bit) != 0 {
            return None;
        }
        seen |= 1 << bit;
        let (value, end) = ticker_value(bytes, cursor.pos)?;
        *target = value;
        cursor.pos = end;
    }
    let mut at = cursor.pos + 1;
    if !literal_at(bytes, &mut at, br#","cs":"#) {
        return None;
    }
    let (_, end) = scan::integer(bytes, at)?;
    at = end;
    if !literal_at(bytes, &mut at, br#","ts":"#) {
        return None;
    }
    let (ts_ms, end) = scan::integer(bytes, at)?;
    if bytes.get(end..) != Some(&b"}"[..]) {
        return None;
    }
    scratch.bids.clear();
    scratch.asks.clear();
    Some(Message::Ticker {
        topic,
        snapshot,
        ts_ms,
        symbol,
        fields,
    })
}

/// How an orderbook message starts: `{"topic":"orderbook.`, for [`book_in_order`].
const BOOK_START: &[u8] = br#"{"topic":"orderbook."#;

/// A whole orderbook message exactly as Bybit sends it: the orderbook page's top-level order
/// (`topic`, `type`, `ts`, `data`, `cts`, or `ts` before `type` as its note says spot and
/// level 1 send) with no whitespace, an `orderbook.{depth}.{symbol}` topic, `type` `snapshot`
/// or `delta`, `ts` and `cts` integers, `data` as `s`, `b`, `a`, `u`, `seq`, each level
/// `["price","size"]` with both decimals in the venue's form; nothing after the closing `}`.
/// Each value is read by the reader the key loop uses for it (`scan::integer`,
/// `scan::plain_string`), the levels by `scan::level_pair_unchained` (the values `Fixed::parse`
/// gives, as the key loop's `scan::level_pair` and `Fixed::parse` do) or by `scan::level_pair`
/// itself where that one declines, and the topic's kind is
/// checked as `TopicKind::of` checks it, so a message read here is the `Message` [`decode`]'s
/// key loop reads from it (the key loop's other checks cannot fail on such a message); `None`
/// for anything else (another order, whitespace, an integer as a string, a level in another
/// spelling, more than [`MAX_ROWS`] levels a side), which the key loop then reads, and refuses
/// where it must.
#[inline(never)]
pub(super) fn book_in_order<'a>(bytes: &'a [u8], scratch: &mut Scratch) -> Option<Message<'a>> {
    if !bytes.starts_with(BOOK_START) {
        return None;
    }
    let (rest, end) = scan::plain_string(bytes, BOOK_START.len())?;
    // `{depth}.{symbol}`: digits, a point, at least one byte (`TopicKind::of`'s rule).
    let dot = rest.iter().position(|&byte| byte == b'.')?;
    if dot == 0 || dot + 1 == rest.len() || !rest[..dot].iter().all(u8::is_ascii_digit) {
        return None;
    }
    // `"topic":"` is ten bytes from the `{`.
    let topic = bytes.get(10..end - 1)?;
    let mut at = end;
    let book_type = |at: &mut usize| -> Option<bool> {
        if literal_at(bytes, at, br#"delta""#) {
            Some(false)
        } else if literal_at(bytes, at, br#"snapshot""#) {
            Some(true)
        } else {
            None
        }
    };
    let (snapshot, ts_ms);
    if literal_at(bytes, &mut at, br#","type":""#) {
        snapshot = book_type(&mut at)?;
        if !literal_at(bytes, &mut at, br#","ts":"#) {
            return None;
        }
        (ts_ms, at) = scan::integer(bytes, at)?;
    } else if literal_at(bytes, &mut at, br#","ts":"#) {
        (ts_ms, at) = scan::integer(bytes, at)?;
        if !literal_at(bytes, &mut at, br#","type":""#) {
            return None;
        }
        snapshot = book_type(&mut at)?;
    } else {
        return None;
    }
    if !literal_at(bytes, &mut at, br#","data":{"s":""#) {
        return None;
    }
    let (symbol, end) = scan::plain_string(bytes, at)?;
    at = end;
    if !literal_at(bytes, &mut at, br#","b":["#) {
        return None;
    }
    at = side_in_order(bytes, at, &mut scratch.bids)?;
    if !literal_at(bytes, &mut at, br#","a":["#) {
        return None;
    }
    at = side_in_order(bytes, at, &mut scratch.asks)?;
    if !literal_at(bytes, &mut at, br#","u":"#) {
        return None;
    }
    let (update_id, end) = scan::integer(bytes, at)?;
    at = end;
    if !literal_at(bytes, &mut at, br#","seq":"#) {
        return None;
    }
    let (seq, end) = scan::integer(bytes, at)?;
    at = end;
    if !literal_at(bytes, &mut at, br#"},"cts":"#) {
        return None;
    }
    let (cts_ms, end) = scan::integer(bytes, at)?;
    if bytes.get(end..) != Some(&b"}"[..]) {
        return None;
    }
    Some(Message::Book {
        topic,
        snapshot,
        ts_ms,
        cts_ms,
        symbol,
        update_id,
        seq,
    })
}

/// One side's levels for [`book_in_order`], from just after its `[` to past its `]`: each
/// level `["price","size"]` with no whitespace, read by `scan::level_pair_unchained` (or
/// `scan::level_pair` beyond its window), into `out`; `None` for anything else, and for more
/// than [`MAX_ROWS`] levels (which the key loop refuses).
#[inline(always)]
fn side_in_order(bytes: &[u8], mut at: usize, out: &mut Vec<(Fixed, Fixed)>) -> Option<usize> {
    out.clear();
    if bytes.get(at) == Some(&b']') {
        return Some(at + 1);
    }
    loop {
        if out.len() >= MAX_ROWS {
            return None;
        }
        let (price, size, end) = match scan::level_pair_unchained(bytes, at) {
            Some(level) => level,
            None => scan::level_pair(bytes, at)?,
        };
        out.push((price, size));
        match bytes.get(end) {
            Some(b',') => at = end + 1,
            Some(b']') => return Some(end + 1),
            _ => return None,
        }
    }
}

/// A kept ticker field's value from its opening quote: [`field`]'s word reader inline, the rest
/// through [`ticker_value_general`].
#[inline(always)]
fn ticker_value(bytes: &[u8], at: usize) -> Option<(Field, usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    if let Some((value, end)) = scan::quoted_decimal(bytes, at + 1) {
        return Some((Field::Value(value), end));
    }
    ticker_value_general(bytes, at + 1)
}

/// What [`field_general`] reads from a string without escapes: `""` is [`Field::Empty`], else
/// `Fixed::parse` (its error: `None`, for the key loop to report).
#[inline(never)]
fn ticker_value_general(bytes: &[u8], at: usize) -> Option<(Field, usize)> {
    let (text, end) = scan::plain_string(bytes, at)?;
    if text.is_empty() {
        return Some((Field::Empty, end));
    }
    Some((Field::Value(Fixed::parse(text).ok()?), end))
}

/// A ticker member tickwire does not keep, from its key's opening quote: a key the key loop
/// skips (none of [`DATA_ORDER`]'s, which it reads and checks) and a string value, neither with
/// escapes; the position after the value.
#[inline(never)]
fn ticker_other_member(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let (key, end) = scan::plain_string(bytes, at + 1)?;
    if DATA_ORDER.iter().any(|&(_, known)| known == key) {
        return None;
    }
    if bytes.get(end..end + 2) != Some(&br#":""#[..]) {
        return None;
    }
    let (_, end) = scan::plain_string(bytes, end + 2)?;
    Some(end)
}

fn data_rows(
    cursor: &mut Cursor<'_>,
    scratch: &mut Scratch,
    missing: &mut Option<&'static str>,
) -> Result<()> {
    scratch.rows.clear();
    cursor.pos += 1;
    if cursor.peek_value()? == b']' {
        cursor.pos += 1;
        return Ok(());
    }
    loop {
        if scratch.rows.len() >= MAX_ROWS {
            return Err(DecodeError::TooManyRows { offset: cursor.pos });
        }
        // Linear's trade rows as they come; anything else by the key loop.
        let row = match row_in_order(cursor.bytes, cursor.pos) {
            Some((row, end)) => {
                cursor.pos = end;
                row
            }
            None => row_general(cursor, missing)?,
        };
        scratch.rows.push(row);
        match cursor.peek_value()? {
            b',' => cursor.pos += 1,
            b']' => {
                cursor.pos += 1;
                return Ok(());
            }
            other => {
                return Err(DecodeError::Json(
                    cursor.error(JsonErrorKind::UnexpectedByte(other)),
                ))
            }
        }
    }
}

/// Decodes one message (a whole WebSocket text message, its UTF-8 already checked).
pub fn decode<'a>(payload: &'a [u8], scratch: &mut Scratch) -> Result<Message<'a>> {
    // A book or a linear ticker as it comes, without the key loop; any other message by the
    // key loop (its topic's first letter, at 10, picks the fast path in one compare).
    match payload.get(10) {
        Some(b'o') => {
            if let Some(message) = book_in_order(payload, scratch) {
                return Ok(message);
            }
        }
        Some(b't') => {
            if let Some(message) = ticker_in_order(payload, scratch) {
                return Ok(message);
            }
        }
        _ => {}
    }
    let mut cursor = Cursor::at(payload, 0);
    cursor.expect(b'{')?;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut topic = None;
    // The topic's kind, read once with the topic.
    let mut kind = None;
    let mut snapshot = None;
    let (mut ts, mut cts) = (None, 0);
    let mut data = Data::default();
    let (mut op, mut success, mut ret_msg, mut req_id) = (None, None, &b""[..], &b""[..]);
    let mut next = 0;
    let mut order = TOP_ORDER;
    while let Some(key) = next_key(&mut cursor, &mut members, order, &mut next)? {
        match key {
            b"topic" => {
                seen.first(0, &cursor)?;
                let text = string(&mut cursor, "topic")?;
                kind = TopicKind::of(text).map(|(kind, _)| kind);
                if kind == Some(TopicKind::Tickers) {
                    // Both orders start `topic`, `type`: `next` holds.
                    order = TICKER_TOP_ORDER;
                }
                topic = Some(text);
            }
            b"type" => {
                seen.first(1, &cursor)?;
                let at = cursor.pos;
                snapshot = Some(match string(&mut cursor, "type")? {
                    b"snapshot" => true,
                    b"delta" => false,
                    _ => return Err(DecodeError::UnknownType { offset: at }),
                });
            }
            b"ts" => {
                seen.first(2, &cursor)?;
                ts = Some(integer(&mut cursor, "ts")?);
            }
            b"cts" => {
                seen.first(3, &cursor)?;
                cts = integer(&mut cursor, "cts")?;
            }
            b"data" => {
                seen.first(4, &cursor)?;
                match cursor.peek_value()? {
                    b'{' => {
                        let start = if kind == Some(TopicKind::Tickers) {
                            TICKER_DATA_START
                        } else {
                            0
                        };
                        data_object(&mut cursor, scratch, &mut data, start)?
                    }
                    b'[' => {
                        data.array = true;
                        data_rows(&mut cursor, scratch, &mut data.rows_missing)?;
                    }
                    _ => {
                        return Err(DecodeError::WrongType {
                            field: "data",
                            offset: cursor.pos,
                        })
                    }
                }
            }
            b"op" => {
                seen.first(5, &cursor)?;
                op = Some(string(&mut cursor, "op")?);
            }
            b"success" => {
                seen.first(6, &cursor)?;
                success = Some(boolean(&mut cursor, "success")?);
            }
            b"ret_msg" => {
                seen.first(7, &cursor)?;
                ret_msg = string(&mut cursor, "ret_msg")?;
            }
            b"req_id" => {
                seen.first(8, &cursor)?;
                req_id = string(&mut cursor, "req_id")?;
            }
            _ => cursor.skip_value()?,
        }
    }
    cursor.skip_whitespace();
    if let Some(byte) = cursor.peek() {
        return Err(DecodeError::Json(
            cursor.error(JsonErrorKind::UnexpectedByte(byte)),
        ));
    }
    let Some(topic) = topic else {
        return match op {
            Some(op) => Ok(Message::Answer {
                op,
                success,
                ret_msg,
                req_id,
            }),
            None => Err(DecodeError::NeitherTopicNorOp),
        };
    };
    let Some(kind) = kind else {
        return Ok(Message::OtherTopic { topic });
    };
    let wrong_data = DecodeError::WrongType {
        field: "data",
        offset: 0,
    };
    let ts_ms = ts.ok_or(DecodeError::Missing("ts"))?;
    match kind {
        TopicKind::Orderbook => {
            if !data.object {
                return Err(if data.array {
                    wrong_data
                } else {
                    DecodeError::Missing("data")
                });
            }
            if !data.has_b || !data.has_a {
                return Err(DecodeError::Missing(if data.has_b { "a" } else { "b" }));
            }
            Ok(Message::Book {
                topic,
                snapshot: snapshot.ok_or(DecodeError::Missing("type"))?,
                ts_ms,
                cts_ms: cts,
                symbol: data.s.ok_or(DecodeError::Missing("s"))?,
                update_id: data.u.ok_or(DecodeError::Missing("u"))?,
                seq: data.seq.unwrap_or(0),
            })
        }
        TopicKind::Tickers => {
            if !data.object {
                return Err(if data.array {
                    wrong_data
                } else {
                    DecodeError::Missing("data")
                });
            }
            Ok(Message::Ticker {
                topic,
                snapshot: snapshot.ok_or(DecodeError::Missing("type"))?,
                ts_ms,
                symbol: data.symbol.ok_or(DecodeError::Missing("symbol"))?,
                fields: data.fields,
            })
        }
        TopicKind::PublicTrade | TopicKind::AllLiquidation => {
            if !data.array {
                return Err(if data.object {
                    wrong_data
                } else {
                    DecodeError::Missing("data")
                });
            }
            if let Some(field) = data.rows_missing {
                return Err(DecodeError::Missing(field));
            }
            Ok(if kind == TopicKind::PublicTrade {
                Message::Trades { topic, ts_ms }
            } else {
                Message::Liquidations { topic, ts_ms }
            })
        }
    }
}

/// At most this many bytes of a message in an error text.
const SAMPLE_BYTES: usize = 200;

/// The start of a message for an error text, lossy and with control characters escaped.
pub fn sample(bytes: &[u8]) -> String {
    let shown = bytes.get(..SAMPLE_BYTES).unwrap_or(bytes);
    String::from_utf8_lossy(shown).escape_debug().to_string()
}
