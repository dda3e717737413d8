//! One OKX v5 WebSocket message, read in place into a typed, borrowed [`Message`].
//!
//! OKX's messages are a push (`{"arg":{..},"action":..,"data":[..]}`), an event answering a
//! request (`{"id":..,"event":"subscribe"|"error"|"login"|..,"code":..,"msg":..}`), or the bare
//! text `pong` (the answer to the text `ping`, which is not JSON). The documentation says
//! nothing of key order, so the members are taken in any order, `data` before `arg` included:
//! `data`'s rows are read with the keys of every channel tickwire reads, and the channel then
//! says which of them the message is. A repeated key is refused.
//!
//! Prices and sizes are decimal strings read exactly into [`Fixed`] (an exponent, more than
//! nine decimals that are not zeros, or a magnitude beyond `Fixed`'s range is an error). A book
//! level's price and size are also kept as where their text lies in the message ([`Level`]),
//! because the checksum is computed over the venue's own strings (`"0.5000"` is not `"0.5"`).
//! Times are strings of digits (ms), also taken as JSON integers; `seqId` and `prevSeqId` are
//! signed JSON integers (`prevSeqId` is -1 on a snapshot); `checksum` a signed 32-bit integer.
//! `fundingRate` and `oi` carry more decimals than `Fixed` holds (the documentation's examples:
//! 16 and 11): they are checked as plain decimals (digits, one point, a sign; no exponent) and
//! not converted (see the module docs of `okx` for why they are not published).
//!
//! A book push written as the documentation's examples are (its keys in their order, no
//! whitespace, the venue's decimal forms) is read straight through first, each key matched as
//! a fixed literal and each decimal eight bytes at a time (`venue::binance::scan`); anything
//! else in it, however small, sends the whole message to the general reader above, so both give
//! the same answer for every input (a test checks it on mutated messages).
//!
//! **Invariant:** no input makes it panic, read out of bounds or allocate beyond the
//! [`Scratch`] buffers' working size (a message with more than [`MAX_ROWS`] levels a side, rows
//! or liquidation details is refused, so the buffers stop growing there).

use crate::fixed::{Fixed, ParseError};
use crate::venue::binance::scan;
use crate::venue::json::{Cursor, JsonError, JsonErrorKind, Members};
use std::fmt;

/// The most levels a side, or rows, one message may carry (`books` sends 400 levels a side).
pub const MAX_ROWS: usize = 4096;

/// The longest price or size string kept for the checksum, in bytes. OKX's longest are well
/// under it (a price such as `0.000012345`, a size such as `2216113.01000000309`).
pub const MAX_TEXT: usize = 32;

/// What went wrong with a message. Small and `Copy`: returned on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON (RFC 8259), or cut short.
    Json(JsonError),
    /// A price or size that is not an exact decimal `Fixed` holds.
    Decimal { offset: usize, error: ParseError },
    /// A decimal that is not plain (`fundingRate`, `oi`: an exponent, a stray byte).
    PlainDecimal { offset: usize },
    /// A price or size string longer than [`MAX_TEXT`] bytes, or written with an escape.
    Text { offset: usize },
    /// A time or id that is not an integer of the expected range.
    Integer { offset: usize },
    /// A value of the wrong JSON type (or an unknown word) for its key.
    WrongType { field: &'static str, offset: usize },
    /// A key that appears twice in one object.
    RepeatedKey { offset: usize },
    /// A field the message's channel needs is missing.
    Missing(&'static str),
    /// More than [`MAX_ROWS`] levels on a side, rows or details.
    TooManyRows { offset: usize },
    /// A book message with more than one row in `data`.
    SeveralBooks,
    /// Neither an `arg` with `data` (a push) nor an `event`.
    NeitherPushNorEvent,
}

impl DecodeError {
    /// Where in the message it was seen (0 when it concerns the whole message).
    pub fn offset(&self) -> usize {
        match *self {
            DecodeError::Json(error) => error.offset,
            DecodeError::Decimal { offset, .. }
            | DecodeError::PlainDecimal { offset }
            | DecodeError::Text { offset }
            | DecodeError::Integer { offset }
            | DecodeError::WrongType { offset, .. }
            | DecodeError::RepeatedKey { offset }
            | DecodeError::TooManyRows { offset } => offset,
            DecodeError::Missing(_)
            | DecodeError::SeveralBooks
            | DecodeError::NeitherPushNorEvent => 0,
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
            DecodeError::PlainDecimal { offset } => {
                write!(f, "not a plain decimal at offset {offset}")
            }
            DecodeError::Text { offset } => write!(
                f,
                "a price or size string longer than {MAX_TEXT} bytes or escaped at offset {offset}"
            ),
            DecodeError::Integer { offset } => {
                write!(f, "not an integer of the expected range at offset {offset}")
            }
            DecodeError::WrongType { field, offset } => {
                write!(
                    f,
                    "`{field}` has the wrong type or value at offset {offset}"
                )
            }
            DecodeError::RepeatedKey { offset } => write!(f, "a repeated key at offset {offset}"),
            DecodeError::Missing(field) => write!(f, "missing field `{field}`"),
            DecodeError::TooManyRows { offset } => {
                write!(f, "more than {MAX_ROWS} levels or rows at offset {offset}")
            }
            DecodeError::SeveralBooks => write!(f, "a book message with several rows in `data`"),
            DecodeError::NeitherPushNorEvent => {
                write!(f, "neither a push (`arg` and `data`) nor an `event`")
            }
        }
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

/// The order book channels ("Order book channel").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BookChannel {
    /// 400 levels: a snapshot, then updates every 100 ms.
    Books,
    /// 5 levels, a snapshot every time.
    Books5,
    /// 1 level, a snapshot every time.
    BboTbt,
    /// 400 levels tick by tick: a snapshot, then updates every 10 ms (login, VIP tiers).
    BooksL2Tbt,
    /// 50 levels tick by tick (login, VIP tiers).
    Books50L2Tbt,
}

impl BookChannel {
    /// Whether the channel sends a snapshot then updates (with `prevSeqId`, `seqId` and the
    /// checksum), rather than a snapshot every time.
    pub fn incremental(self) -> bool {
        matches!(
            self,
            BookChannel::Books | BookChannel::BooksL2Tbt | BookChannel::Books50L2Tbt
        )
    }

    /// The levels a side the channel carries.
    pub fn depth(self) -> usize {
        match self {
            BookChannel::Books | BookChannel::BooksL2Tbt => 400,
            BookChannel::Books50L2Tbt => 50,
            BookChannel::Books5 => 5,
            BookChannel::BboTbt => 1,
        }
    }

    /// Whether OKX serves it only after a login (the tick-by-tick depths).
    pub fn needs_login(self) -> bool {
        matches!(self, BookChannel::BooksL2Tbt | BookChannel::Books50L2Tbt)
    }
}

/// The channels tickwire reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    Book(BookChannel),
    /// `trades`: aggregated per taker order and price.
    Trades,
    /// `trades-all` (on the business entry point): one trade a message.
    TradesAll,
    Tickers,
    MarkPrice,
    IndexTickers,
    FundingRate,
    OpenInterest,
    /// `liquidation-orders`: subscribed by `instType`, rows name their `instId`.
    LiquidationOrders,
}

impl Channel {
    /// Every channel, as the documentation spells it.
    pub const ALL: [Channel; 13] = [
        Channel::Book(BookChannel::Books),
        Channel::Book(BookChannel::Books5),
        Channel::Book(BookChannel::BboTbt),
        Channel::Book(BookChannel::BooksL2Tbt),
        Channel::Book(BookChannel::Books50L2Tbt),
        Channel::Trades,
        Channel::TradesAll,
        Channel::Tickers,
        Channel::MarkPrice,
        Channel::IndexTickers,
        Channel::FundingRate,
        Channel::OpenInterest,
        Channel::LiquidationOrders,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Channel::Book(BookChannel::Books) => "books",
            Channel::Book(BookChannel::Books5) => "books5",
            Channel::Book(BookChannel::BboTbt) => "bbo-tbt",
            Channel::Book(BookChannel::BooksL2Tbt) => "books-l2-tbt",
            Channel::Book(BookChannel::Books50L2Tbt) => "books50-l2-tbt",
            Channel::Trades => "trades",
            Channel::TradesAll => "trades-all",
            Channel::Tickers => "tickers",
            Channel::MarkPrice => "mark-price",
            Channel::IndexTickers => "index-tickers",
            Channel::FundingRate => "funding-rate",
            Channel::OpenInterest => "open-interest",
            Channel::LiquidationOrders => "liquidation-orders",
        }
    }

    /// The channel named `name`, `None` for one tickwire does not read.
    pub fn of(name: &[u8]) -> Option<Channel> {
        Channel::ALL
            .into_iter()
            .find(|channel| channel.name().as_bytes() == name)
    }
}

/// A field as a row carries it: not there, there but empty (`""`: no value, such as a
/// ticker's side with no order), or a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Field {
    #[default]
    Absent,
    Empty,
    Value(Fixed),
}

impl Field {
    /// The value, zero when absent or empty.
    pub fn or_zero(self) -> Fixed {
        match self {
            Field::Value(value) => value,
            Field::Absent | Field::Empty => Fixed::ZERO,
        }
    }
}

/// One book level: its price and size, and where their strings lie in the message (start,
/// length), for the checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub price: Fixed,
    pub size: Fixed,
    pub price_text: (u32, u8),
    pub size_text: (u32, u8),
}

impl Level {
    /// The price's string, as the venue wrote it, in `payload`.
    pub fn price_str<'p>(&self, payload: &'p [u8]) -> &'p [u8] {
        text(payload, self.price_text)
    }

    /// The size's string, as the venue wrote it, in `payload`.
    pub fn size_str<'p>(&self, payload: &'p [u8]) -> &'p [u8] {
        text(payload, self.size_text)
    }
}

fn text(payload: &[u8], (start, len): (u32, u8)) -> &[u8] {
    let start = start as usize;
    payload
        .get(start..start + usize::from(len))
        .unwrap_or_default()
}

/// The position side of a liquidation detail (`posSide`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PosSide {
    Long,
    Short,
    /// Net mode: the order's `side` says which position it closed.
    Net,
}

/// One `details` entry of a `liquidation-orders` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detail {
    pub pos_side: Option<PosSide>,
    /// `side`: `buy` (closing a short) or `sell` (closing a long).
    pub buy: Option<bool>,
    pub bk_px: Field,
    pub sz: Field,
    pub ts_ms: Option<u64>,
}

/// One row of `data`, with the keys of every channel read (a row has only its channel's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// `instId`, as (start, end) in the message; `None` without one.
    pub inst_id: Option<(u32, u32)>,
    pub ts_ms: Option<u64>,
    /// Trades: `tradeId` (a string of digits).
    pub trade_id: Option<u64>,
    pub px: Field,
    pub sz: Field,
    /// Trades: `side` is `buy` (the taker bought).
    pub buy: Option<bool>,
    /// Books and trades: `seqId`.
    pub seq_id: Option<i64>,
    /// Books: `prevSeqId`, `checksum`, and whether `asks` and `bids` were there.
    pub prev_seq_id: Option<i64>,
    pub checksum: Option<i64>,
    pub has_asks: bool,
    pub has_bids: bool,
    /// Tickers.
    pub bid_px: Field,
    pub bid_sz: Field,
    pub ask_px: Field,
    pub ask_sz: Field,
    /// `mark-price`: `markPx`; `index-tickers`: `idxPx`.
    pub mark_px: Field,
    pub idx_px: Field,
    /// `funding-rate`: `fundingRate` was there (a plain decimal); `open-interest`: `oi`.
    pub funding_rate: bool,
    pub open_interest: bool,
    /// `liquidation-orders`: its `details`, as a range of [`Scratch::details`].
    pub details: (u32, u32),
}

impl Row {
    /// The row's `instId` in `payload` (empty without one).
    pub fn inst_id<'p>(&self, payload: &'p [u8]) -> &'p [u8] {
        self.inst_id
            .and_then(|(start, end)| payload.get(start as usize..end as usize))
            .unwrap_or_default()
    }
}

/// The levels and rows of the message last decoded. Kept by the caller and reused, so that
/// decoding allocates nothing once the buffers have grown to the venue's message sizes.
#[derive(Debug)]
pub struct Scratch {
    pub bids: Vec<Level>,
    pub asks: Vec<Level>,
    pub rows: Vec<Row>,
    pub details: Vec<Detail>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            bids: Vec::with_capacity(512),
            asks: Vec::with_capacity(512),
            rows: Vec::with_capacity(64),
            details: Vec::with_capacity(64),
        }
    }
}

/// A decoded message; strings borrow the payload, levels and rows are in the [`Scratch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A book channel: `scratch.bids` and `scratch.asks` hold its levels.
    Book {
        channel: BookChannel,
        /// `arg.instId`.
        inst_id: &'a [u8],
        /// `action` is `snapshot` (always so on `books5` and `bbo-tbt`, which have none).
        snapshot: bool,
        ts_ms: u64,
        checksum: Option<i32>,
        prev_seq_id: Option<i64>,
        seq_id: Option<i64>,
    },
    /// Any other channel read: `scratch.rows` holds its rows (and `scratch.details` the
    /// liquidations' details). `arg` is `arg.instId`, or `arg.instType` for
    /// `liquidation-orders`.
    Rows { channel: Channel, arg: &'a [u8] },
    /// A push of a channel this module does not read.
    OtherChannel { channel: &'a [u8] },
    /// An event: the answer to a request (`subscribe`, `unsubscribe`, `login`, `error`) or a
    /// notice (`notice`, `channel-conn-count`, `channel-conn-count-error`).
    Event {
        event: &'a [u8],
        /// `id`, the request's (empty without one).
        id: &'a [u8],
        /// `code` (empty without one; `"0"` on success).
        code: &'a [u8],
        msg: &'a [u8],
        /// `arg.channel` and `arg.instId` (or `instType`), when the event names them.
        channel: &'a [u8],
        arg: &'a [u8],
    },
    /// The text `pong`, the answer to the text `ping`.
    Pong,
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

/// A decimal string, unescaped: its value and where its text lies.
fn decimal_text(cursor: &mut Cursor<'_>, field: &'static str) -> Result<(Fixed, (u32, u8))> {
    if cursor.peek_value()? != b'"' {
        return Err(DecodeError::WrongType {
            field,
            offset: cursor.pos,
        });
    }
    let start = cursor.pos + 1;
    cursor.pos = start;
    let (body, escaped) = cursor.string_body()?;
    if escaped || body.len() > MAX_TEXT {
        return Err(DecodeError::Text { offset: start });
    }
    let value = Fixed::parse(body).map_err(|error| DecodeError::Decimal {
        offset: start,
        error,
    })?;
    let at = u32::try_from(start).map_err(|_| DecodeError::Text { offset: start })?;
    Ok((value, (at, body.len() as u8)))
}

fn field(cursor: &mut Cursor<'_>, name: &'static str) -> Result<Field> {
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

/// A plain decimal string (`-?digits(.digits)?`, or empty), checked and not converted.
fn plain_decimal(cursor: &mut Cursor<'_>, name: &'static str) -> Result<()> {
    cursor.skip_whitespace();
    let start = cursor.pos;
    let text = string(cursor, name)?;
    if text.is_empty() {
        return Ok(());
    }
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let (whole, fraction) = match digits.iter().position(|&byte| byte == b'.') {
        Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
        None => (digits, None),
    };
    let valid = !whole.is_empty()
        && whole.iter().all(u8::is_ascii_digit)
        && fraction.is_none_or(|part| !part.is_empty() && part.iter().all(u8::is_ascii_digit));
    if valid {
        Ok(())
    } else {
        Err(DecodeError::PlainDecimal { offset: start })
    }
}

/// The text of an integer: a JSON number or a string.
fn integer_text<'a>(cursor: &mut Cursor<'a>, field: &'static str) -> Result<(&'a [u8], usize)> {
    cursor.skip_whitespace();
    let start = cursor.pos;
    let text = match cursor.peek() {
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
    Ok((text, start))
}

fn digits_value(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    Some(value)
}

/// An unsigned integer (a time, a trade id), as a JSON number or a string of digits.
fn unsigned(cursor: &mut Cursor<'_>, field: &'static str) -> Result<u64> {
    let (text, start) = integer_text(cursor, field)?;
    digits_value(text).ok_or(DecodeError::Integer { offset: start })
}

/// A signed 64-bit integer (`seqId`, `prevSeqId`, `checksum`).
fn signed(cursor: &mut Cursor<'_>, field: &'static str) -> Result<i64> {
    let (text, start) = integer_text(cursor, field)?;
    let error = DecodeError::Integer { offset: start };
    let (negative, digits) = match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let magnitude = digits_value(digits).ok_or(error)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude).ok_or(error)
    } else {
        i64::try_from(magnitude).map_err(|_| error)
    }
}

/// `[["price","size","0","orders"],...]` into `out`.
fn levels(cursor: &mut Cursor<'_>, out: &mut Vec<Level>, field: &'static str) -> Result<()> {
    out.clear();
    if cursor.peek_value()? != b'[' {
        return Err(DecodeError::WrongType {
            field,
            offset: cursor.pos,
        });
    }
    cursor.pos += 1;
    if cursor.peek_value()? == b']' {
        cursor.pos += 1;
        return Ok(());
    }
    loop {
        if out.len() >= MAX_ROWS {
            return Err(DecodeError::TooManyRows { offset: cursor.pos });
        }
        if cursor.peek_value()? != b'[' {
            return Err(DecodeError::WrongType {
                field,
                offset: cursor.pos,
            });
        }
        cursor.pos += 1;
        let (price, price_text) = decimal_text(cursor, field)?;
        cursor.expect(b',')?;
        let (size, size_text) = decimal_text(cursor, field)?;
        // The deprecated field and the order count: any values, skipped.
        loop {
            match cursor.peek_value()? {
                b',' => {
                    cursor.pos += 1;
                    cursor.skip_value()?;
                }
                b']' => {
                    cursor.pos += 1;
                    break;
                }
                other => {
                    return Err(DecodeError::Json(
                        cursor.error(JsonErrorKind::UnexpectedByte(other)),
                    ))
                }
            }
        }
        out.push(Level {
            price,
            size,
            price_text,
            size_text,
        });
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

/// A `side` value: `buy` or `sell`.
fn buy_sell(cursor: &mut Cursor<'_>, field: &'static str) -> Result<bool> {
    let at = cursor.pos;
    match string(cursor, field)? {
        b"buy" => Ok(true),
        b"sell" => Ok(false),
        _ => Err(DecodeError::WrongType { field, offset: at }),
    }
}

/// Runs `each` on every element of an array (the cursor at its `[`).
fn array(
    cursor: &mut Cursor<'_>,
    field: &'static str,
    mut each: impl FnMut(&mut Cursor<'_>) -> Result<()>,
) -> Result<()> {
    if cursor.peek_value()? != b'[' {
        return Err(DecodeError::WrongType {
            field,
            offset: cursor.pos,
        });
    }
    cursor.pos += 1;
    if cursor.peek_value()? == b']' {
        cursor.pos += 1;
        return Ok(());
    }
    loop {
        each(cursor)?;
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

fn detail(cursor: &mut Cursor<'_>, out: &mut Vec<Detail>) -> Result<()> {
    if out.len() >= MAX_ROWS {
        return Err(DecodeError::TooManyRows { offset: cursor.pos });
    }
    cursor.expect(b'{')?;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut detail = Detail {
        pos_side: None,
        buy: None,
        bk_px: Field::Absent,
        sz: Field::Absent,
        ts_ms: None,
    };
    while let Some((key, _)) = cursor.next_raw_key(&mut members)? {
        match key {
            b"posSide" => {
                seen.first(0, cursor)?;
                let at = cursor.pos;
                detail.pos_side = Some(match string(cursor, "posSide")? {
                    b"long" => PosSide::Long,
                    b"short" => PosSide::Short,
                    b"net" => PosSide::Net,
                    _ => {
                        return Err(DecodeError::WrongType {
                            field: "posSide",
                            offset: at,
                        })
                    }
                });
            }
            b"side" => {
                seen.first(1, cursor)?;
                detail.buy = Some(buy_sell(cursor, "side")?);
            }
            b"bkPx" => {
                seen.first(2, cursor)?;
                detail.bk_px = field(cursor, "bkPx")?;
            }
            b"sz" => {
                seen.first(3, cursor)?;
                detail.sz = field(cursor, "sz")?;
            }
            b"ts" => {
                seen.first(4, cursor)?;
                detail.ts_ms = Some(unsigned(cursor, "ts")?);
            }
            _ => cursor.skip_value()?,
        }
    }
    out.push(detail);
    Ok(())
}

/// One object of `data`.
fn row(cursor: &mut Cursor<'_>, scratch: &mut Scratch) -> Result<()> {
    if scratch.rows.len() >= MAX_ROWS {
        return Err(DecodeError::TooManyRows { offset: cursor.pos });
    }
    if cursor.peek_value()? != b'{' {
        return Err(DecodeError::WrongType {
            field: "data",
            offset: cursor.pos,
        });
    }
    cursor.pos += 1;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut row = Row::default();
    while let Some((key, _)) = cursor.next_raw_key(&mut members)? {
        let (bit, target): (u32, &mut Field) = match key {
            b"asks" => {
                seen.first(0, cursor)?;
                if row_has_book(&scratch.rows) {
                    return Err(DecodeError::SeveralBooks);
                }
                levels(cursor, &mut scratch.asks, "asks")?;
                row.has_asks = true;
                continue;
            }
            b"bids" => {
                seen.first(1, cursor)?;
                if row_has_book(&scratch.rows) {
                    return Err(DecodeError::SeveralBooks);
                }
                levels(cursor, &mut scratch.bids, "bids")?;
                row.has_bids = true;
                continue;
            }
            b"instId" => {
                seen.first(2, cursor)?;
                cursor.skip_whitespace();
                let start = cursor.pos + 1;
                let text = string(cursor, "instId")?;
                let end = start + text.len();
                row.inst_id = Some((
                    u32::try_from(start).map_err(|_| DecodeError::Text { offset: start })?,
                    u32::try_from(end).map_err(|_| DecodeError::Text { offset: start })?,
                ));
                continue;
            }
            b"ts" => {
                seen.first(3, cursor)?;
                row.ts_ms = Some(unsigned(cursor, "ts")?);
                continue;
            }
            b"checksum" => {
                seen.first(4, cursor)?;
                row.checksum = Some(signed(cursor, "checksum")?);
                continue;
            }
            b"prevSeqId" => {
                seen.first(5, cursor)?;
                row.prev_seq_id = Some(signed(cursor, "prevSeqId")?);
                continue;
            }
            b"seqId" => {
                seen.first(6, cursor)?;
                row.seq_id = Some(signed(cursor, "seqId")?);
                continue;
            }
            b"tradeId" => {
                seen.first(7, cursor)?;
                let at = cursor.pos;
                let text = string(cursor, "tradeId")?;
                row.trade_id = Some(digits_value(text).ok_or(DecodeError::WrongType {
                    field: "tradeId",
                    offset: at,
                })?);
                continue;
            }
            b"side" => {
                seen.first(8, cursor)?;
                row.buy = Some(buy_sell(cursor, "side")?);
                continue;
            }
            b"fundingRate" => {
                seen.first(9, cursor)?;
                plain_decimal(cursor, "fundingRate")?;
                row.funding_rate = true;
                continue;
            }
            b"oi" => {
                seen.first(10, cursor)?;
                plain_decimal(cursor, "oi")?;
                row.open_interest = true;
                continue;
            }
            b"details" => {
                seen.first(11, cursor)?;
                let start = scratch.details.len();
                let details = &mut scratch.details;
                array(cursor, "details", |cursor| detail(cursor, details))?;
                row.details = (start as u32, scratch.details.len() as u32);
                continue;
            }
            b"px" => (12, &mut row.px),
            b"sz" => (13, &mut row.sz),
            b"bidPx" => (14, &mut row.bid_px),
            b"bidSz" => (15, &mut row.bid_sz),
            b"askPx" => (16, &mut row.ask_px),
            b"askSz" => (17, &mut row.ask_sz),
            b"markPx" => (18, &mut row.mark_px),
            b"idxPx" => (19, &mut row.idx_px),
            _ => {
                cursor.skip_value()?;
                continue;
            }
        };
        seen.first(bit, cursor)?;
        *target = field(cursor, "price or size")?;
    }
    scratch.rows.push(row);
    Ok(())
}

/// Whether an earlier row of this message already held a book.
fn row_has_book(rows: &[Row]) -> bool {
    rows.iter().any(|row| row.has_asks || row.has_bids)
}

/// What `arg` held.
#[derive(Default)]
struct Arg<'a> {
    channel: Option<&'a [u8]>,
    inst_id: Option<&'a [u8]>,
    inst_type: Option<&'a [u8]>,
}

fn arg<'a>(cursor: &mut Cursor<'a>) -> Result<Arg<'a>> {
    cursor.expect(b'{').map_err(|_| DecodeError::WrongType {
        field: "arg",
        offset: cursor.pos,
    })?;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut out = Arg::default();
    while let Some((key, _)) = cursor.next_raw_key(&mut members)? {
        match key {
            b"channel" => {
                seen.first(0, cursor)?;
                out.channel = Some(string(cursor, "channel")?);
            }
            b"instId" => {
                seen.first(1, cursor)?;
                out.inst_id = Some(string(cursor, "instId")?);
            }
            b"instType" => {
                seen.first(2, cursor)?;
                out.inst_type = Some(string(cursor, "instType")?);
            }
            _ => cursor.skip_value()?,
        }
    }
    Ok(out)
}

/// Decodes one message (a whole WebSocket text message, its UTF-8 already checked).
pub fn decode<'a>(payload: &'a [u8], scratch: &mut Scratch) -> Result<Message<'a>> {
    scratch.rows.clear();
    scratch.details.clear();
    if let Some(message) = book_push(payload, scratch) {
        return Ok(message);
    }
    decode_general(payload, scratch)
}

/// [`decode`] without the fast path for book pushes: the reader of any key order and spacing.
pub(super) fn decode_general<'a>(payload: &'a [u8], scratch: &mut Scratch) -> Result<Message<'a>> {
    if payload == b"pong" {
        return Ok(Message::Pong);
    }
    scratch.bids.clear();
    scratch.asks.clear();
    scratch.rows.clear();
    scratch.details.clear();
    let mut cursor = Cursor::at(payload, 0);
    cursor.expect(b'{')?;
    let mut members = Members::new();
    let mut seen = Seen::default();
    let mut args = Arg::default();
    let mut has_arg = false;
    let mut has_data = false;
    let mut action = None;
    let (mut event, mut id, mut code, mut msg, mut event_channel) =
        (None, &b""[..], &b""[..], &b""[..], &b""[..]);
    while let Some((key, _)) = cursor.next_raw_key(&mut members)? {
        match key {
            b"arg" => {
                seen.first(0, &cursor)?;
                args = arg(&mut cursor)?;
                has_arg = true;
            }
            b"action" => {
                seen.first(1, &cursor)?;
                let at = cursor.pos;
                action = Some(match string(&mut cursor, "action")? {
                    b"snapshot" => true,
                    b"update" => false,
                    _ => {
                        return Err(DecodeError::WrongType {
                            field: "action",
                            offset: at,
                        })
                    }
                });
            }
            b"data" => {
                seen.first(2, &cursor)?;
                array(&mut cursor, "data", |cursor| row(cursor, scratch))?;
                has_data = true;
            }
            b"event" => {
                seen.first(3, &cursor)?;
                event = Some(string(&mut cursor, "event")?);
            }
            b"id" => {
                seen.first(4, &cursor)?;
                id = string(&mut cursor, "id")?;
            }
            b"code" => {
                seen.first(5, &cursor)?;
                code = string(&mut cursor, "code")?;
            }
            b"msg" => {
                seen.first(6, &cursor)?;
                msg = string(&mut cursor, "msg")?;
            }
            b"channel" => {
                seen.first(7, &cursor)?;
                event_channel = string(&mut cursor, "channel")?;
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
    if let Some(event) = event {
        return Ok(Message::Event {
            event,
            id,
            code,
            msg,
            channel: args.channel.unwrap_or(event_channel),
            arg: args.inst_id.or(args.inst_type).unwrap_or_default(),
        });
    }
    if !has_arg || !has_data {
        return Err(DecodeError::NeitherPushNorEvent);
    }
    let channel_name = args.channel.ok_or(DecodeError::Missing("arg.channel"))?;
    let Some(channel) = Channel::of(channel_name) else {
        return Ok(Message::OtherChannel {
            channel: channel_name,
        });
    };
    if channel == Channel::LiquidationOrders {
        return Ok(Message::Rows {
            channel,
            arg: args.inst_type.ok_or(DecodeError::Missing("arg.instType"))?,
        });
    }
    let inst_id = args.inst_id.ok_or(DecodeError::Missing("arg.instId"))?;
    let Channel::Book(book) = channel else {
        return Ok(Message::Rows {
            channel,
            arg: inst_id,
        });
    };
    let [row] = scratch.rows[..] else {
        return Err(if scratch.rows.is_empty() {
            DecodeError::Missing("data")
        } else {
            DecodeError::SeveralBooks
        });
    };
    if !row.has_asks || !row.has_bids {
        return Err(DecodeError::Missing(if row.has_asks {
            "bids"
        } else {
            "asks"
        }));
    }
    let snapshot = if book.incremental() {
        action.ok_or(DecodeError::Missing("action"))?
    } else {
        true
    };
    if book.incremental() && !snapshot {
        row.prev_seq_id.ok_or(DecodeError::Missing("prevSeqId"))?;
        row.seq_id.ok_or(DecodeError::Missing("seqId"))?;
    }
    let checksum = match row.checksum {
        Some(value) => Some(i32::try_from(value).map_err(|_| DecodeError::Integer { offset: 0 })?),
        None => None,
    };
    Ok(Message::Book {
        channel: book,
        inst_id,
        snapshot,
        ts_ms: row.ts_ms.ok_or(DecodeError::Missing("ts"))?,
        checksum,
        prev_seq_id: row.prev_seq_id,
        seq_id: row.seq_id,
    })
}

/// Passes `literal` at `*at`, or `None`.
#[inline(always)]
fn literal<const N: usize>(payload: &[u8], at: &mut usize, literal: &[u8; N]) -> Option<()> {
    let window: &[u8; N] = payload.get(*at..)?.first_chunk::<N>()?;
    if window != literal {
        return None;
    }
    *at += N;
    Some(())
}

/// A JSON integer at `*at` for `seqId`, `prevSeqId` and `checksum`: an optional minus and
/// 1 to 19 digits without a leading zero (`None` for anything else).
#[inline(always)]
fn fast_signed(payload: &[u8], at: &mut usize) -> Option<i64> {
    let negative = payload.get(*at) == Some(&b'-');
    let (magnitude, end) = scan::integer(payload, *at + usize::from(negative))?;
    *at = end;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// A book side in the venue's form, `[["price","size","0","orders"],...]`, into `out`; `None`
/// for any other form.
#[inline(always)]
fn fast_levels(payload: &[u8], at: &mut usize, out: &mut Vec<Level>) -> Option<()> {
    out.clear();
    literal(payload, at, b"[")?;
    if payload.get(*at) == Some(&b']') {
        *at += 1;
        return Some(());
    }
    loop {
        if out.len() >= MAX_ROWS {
            return None;
        }
        literal(payload, at, b"[\"")?;
        let price_at = *at;
        let (price, end) = scan::quoted_decimal(payload, price_at)?;
        literal(payload, &mut { end }, b",\"")?;
        let size_at = end + 2;
        let (size, end) = scan::quoted_decimal(payload, size_at)?;
        *at = end;
        // The deprecated field and the order count: two plain strings.
        for _ in 0..2 {
            literal(payload, at, b",\"")?;
            *at = scan::plain_string(payload, *at)?.1;
        }
        literal(payload, at, b"]")?;
        // The quoted decimals are at most 17 bytes, well within `MAX_TEXT`.
        out.push(Level {
            price,
            size,
            price_text: (
                u32::try_from(price_at).ok()?,
                (size_at - 3 - price_at) as u8,
            ),
            size_text: (u32::try_from(size_at).ok()?, (end - 1 - size_at) as u8),
        });
        match payload.get(*at) {
            Some(b',') => *at += 1,
            Some(b']') => {
                *at += 1;
                return Some(());
            }
            _ => return None,
        }
    }
}

/// A book push exactly in the documentation's form, `{"arg":{"channel":..,"instId":..},
/// "action":..,"data":[{"asks":[..],"bids":[..],"ts":"..","checksum":..,"prevSeqId":..,
/// "seqId":..}]}` without whitespace, read straight through; `None` for anything else, which
/// [`decode_general`] then reads (and answers the same for what this accepts).
#[inline]
pub(super) fn book_push<'a>(payload: &'a [u8], scratch: &mut Scratch) -> Option<Message<'a>> {
    let at = &mut 0;
    literal(payload, at, br#"{"arg":{"channel":""#)?;
    let (name, end) = scan::plain_string(payload, *at)?;
    *at = end;
    let channel = match name {
        b"books" => BookChannel::Books,
        b"books5" => BookChannel::Books5,
        b"bbo-tbt" => BookChannel::BboTbt,
        b"books-l2-tbt" => BookChannel::BooksL2Tbt,
        b"books50-l2-tbt" => BookChannel::Books50L2Tbt,
        _ => return None,
    };
    literal(payload, at, br#","instId":""#)?;
    let (inst_id, end) = scan::plain_string(payload, *at)?;
    *at = end;
    literal(payload, at, br#"},"action":""#)?;
    let snapshot = if literal(payload, at, b"update\"").is_some() {
        false
    } else {
        literal(payload, at, b"snapshot\"")?;
        true
    };
    literal(payload, at, br#","data":[{"asks":"#)?;
    fast_levels(payload, at, &mut scratch.asks)?;
    literal(payload, at, br#","bids":"#)?;
    fast_levels(payload, at, &mut scratch.bids)?;
    literal(payload, at, br#","ts":""#)?;
    let (ts_ms, end) = scan::integer(payload, *at)?;
    *at = end;
    literal(payload, at, br#"","checksum":"#)?;
    let checksum = i32::try_from(fast_signed(payload, at)?).ok()?;
    literal(payload, at, br#","prevSeqId":"#)?;
    let prev_seq_id = fast_signed(payload, at)?;
    literal(payload, at, br#","seqId":"#)?;
    let seq_id = fast_signed(payload, at)?;
    literal(payload, at, b"}]}")?;
    if *at != payload.len() {
        return None;
    }
    Some(Message::Book {
        channel,
        inst_id,
        snapshot: snapshot || !channel.incremental(),
        ts_ms,
        checksum: Some(checksum),
        prev_seq_id: Some(prev_seq_id),
        seq_id: Some(seq_id),
    })
}

/// At most this many bytes of a message in an error text.
const SAMPLE_BYTES: usize = 200;

/// The start of a message for an error text, lossy and with control characters escaped.
pub fn sample(bytes: &[u8]) -> String {
    let shown = bytes.get(..SAMPLE_BYTES).unwrap_or(bytes);
    String::from_utf8_lossy(shown).escape_debug().to_string()
}
