//! Thalex messages, read straight from the payload into small typed values.
//!
//! The shapes are Thalex's own API description (`api.yaml`, the OpenAPI file the venue
//! publishes; `subs_market_data` and the `*_payload` schemas):
//!
//! | channel | notification |
//! | --- | --- |
//! | `ticker.<instrument>.<delay>` | `Ticker`: `best_bid_price`, `best_bid_amount`, `best_ask_price`, `best_ask_amount` (each `null` when that side is empty), `last_price`, `mark_price`, `mark_timestamp` (float seconds), `index`, and many we skip |
//! | `lwt.<instrument>.<delay>` | `{"b":[price,amount,outright],"a":[..],"l":last,"m":mark}`, `b`/`a`/`l` only "if any" |
//! | `book.<instrument>.<grouping>.<nlevels>.<delay>` | `trades` as `[price, amount, direction, timestamp, implied_taker]`, `bid_changes`/`ask_changes` as `[price, amount, outright amount]` (amount 0 empties the level), `total_bid_amount`, `total_ask_amount`, `time` |
//! | `recent_trades.<target>.<category>` | an array of `[price, size, side, timestamp, instrument_name, implied_taker]` |
//! | `price_index.<underlying>` | `Index`: `index_name`, `price`, `timestamp` (all three required) |
//! | `system` | `SystemEvent`: `event` (required; `reconnect` is the one documented) |
//!
//! Responses are `{"id":..,"result":..}` or `{"id":..,"error":{"code":..,"message":..}}`; the
//! subscribe answer's `result` is the list of channels subscribed.
//!
//! **Numbers.** Thalex prints marks, indices and rates as binary floats with up to 17
//! significant digits (`"index":76283.25916666667`). A number becomes a [`Fixed`] exactly when
//! it has at most nine decimals and is otherwise rounded to the nearest 1e-9, ties to even; a
//! float-second time becomes ns the same way. A value outside `Fixed`'s range, a time before
//! 1970 or a literal that is not a JSON number (`.4`, `2450.`, `01`) makes the message
//! malformed (see [`super::reader`]).
//!
//! **Malformed.** A required field that is missing (price_index's three, system's `event`, a
//! trade tuple's price, amount, direction and timestamp, a recent trade's instrument name), a
//! field of the wrong type, a tuple with more entries than documented, or bytes after the
//! closing brace: the whole message is an error, counted and sampled by the feed, never an event
//! with zeros.
//!
//! **Decisions the documentation leaves open.**
//! - A level's third entry (the outright amount) may be left out; a trade's `implied_taker`
//!   too. Neither is used, and a shorter tuple from the venue should not lose the level.
//! - api.yaml documents no snapshot marker. Thalex's official Python client
//!   (`thalextech/thalex_py`, `process_msg.py`) takes a book notification as a snapshot only
//!   when the envelope carries `"snapshot": true` beside `channel_name` and `notification`, and
//!   as an update otherwise; the key is read here (anywhere in the envelope) and the feed
//!   follows the client (see `feed`).
//! - A channel name holding a JSON escape (`ticker.BTC\u002dPERPETUAL.100ms`) is malformed
//!   ([`ErrorKind::EscapedChannel`]): every channel name Thalex makes is plain ASCII, names are
//!   routed as the payload's bytes, and a name must never reach a route or a symbol in its
//!   escaped spelling.
//! - Keys we do not read are skipped, and a skipped value is still checked to its end as JSON
//!   (the shared cursor's one skip, `venue::json`).
//!
//! **Routing without a parse.** A response starts `{"id":` and a notification
//! `{"channel_name":"`, so the first key tells what a message is and, for a notification, which
//! channel's decoder reads its `notification` value: the kind is the channel name's first
//! segment (`ticker.`, `book.`, ...), and the feed finds the instrument by looking the whole name
//! up in its route table. A server that orders keys differently costs one more pass: a
//! `notification` met before `channel_name` is skipped and read once the channel is known.
//! A notification that opens with the same bytes as the last one,
//! `{"channel_name":"<name>","notification":` (a channel's tickers, every 100 ms), is not scanned
//! again: its first 64 bytes are compared with the kept ones, and the name and kind are those
//! read before (see `Prefix`).
//!
//! Nothing here allocates per message: book levels and trades go into the caller's reusable
//! [`Scratch`] buffers, and names are slices (or byte ranges) of the payload.

use super::reader::{self, ReadError, Reader};
use crate::fixed::{Fixed, SCALE};
use crate::hash::FastHasher;
use std::hash::Hasher;

/// A decode failure: what went wrong and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct DecodeError {
    pub kind: ErrorKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("neither a response (`id`) nor a notification (`channel_name`)")]
    NotAMessage,
    #[error("a notification without `notification`")]
    NoBody,
    #[error("a level is not [price, amount, outright amount]")]
    BadLevel,
    #[error("a trade is not [price, amount, direction, timestamp, ...] as documented")]
    BadTrade,
    #[error("a trade direction is neither `buy` nor `sell`")]
    BadDirection,
    #[error("the required field `{0}` is missing")]
    Missing(&'static str),
    #[error("bytes after the message's closing brace")]
    Trailing,
    #[error("a channel name with a JSON escape (Thalex's names are plain ASCII)")]
    EscapedChannel,
}

impl From<ReadError> for DecodeError {
    fn from(error: ReadError) -> Self {
        DecodeError {
            kind: ErrorKind::Read(error),
        }
    }
}

impl From<ErrorKind> for DecodeError {
    fn from(kind: ErrorKind) -> Self {
        DecodeError { kind }
    }
}

impl DecodeError {
    /// Where in the payload it went wrong (0 when unknown).
    pub fn offset(&self) -> usize {
        match self.kind {
            ErrorKind::Read(error) if error.offset() != usize::MAX => error.offset(),
            _ => 0,
        }
    }
}

/// What a channel carries, from its name's first segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ticker,
    Lwt,
    Book,
    RecentTrades,
    PriceIndex,
    System,
    /// A channel this build does not decode (private channels, `instruments`, ...).
    Other,
}

impl Kind {
    /// The kind a channel name's first segment (before its first `.`, or the whole name) names;
    /// dispatched on its first byte, so a notification's routing compares one name at most.
    #[inline]
    pub fn of(channel: &[u8]) -> Kind {
        // Each arm compares a literal of its own length: inline compares, where one
        // `starts_with` over the arms' names would be a `memcmp` call of a variable length.
        let (kind, len) = match channel.first() {
            Some(b't') if channel.starts_with(b"ticker") => (Kind::Ticker, 6),
            Some(b'l') if channel.starts_with(b"lwt") => (Kind::Lwt, 3),
            Some(b'b') if channel.starts_with(b"book") => (Kind::Book, 4),
            Some(b'r') if channel.starts_with(b"recent_trades") => (Kind::RecentTrades, 13),
            Some(b'p') if channel.starts_with(b"price_index") => (Kind::PriceIndex, 11),
            Some(b's') if channel.starts_with(b"system") => (Kind::System, 6),
            _ => return Kind::Other,
        };
        if matches!(channel.get(len), None | Some(b'.')) {
            kind
        } else {
            Kind::Other
        }
    }
}

/// A `ticker` notification (fields Thalex left out or sent as `null` are `None`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticker {
    pub bid_px: Option<Fixed>,
    pub bid_amount: Option<Fixed>,
    pub ask_px: Option<Fixed>,
    pub ask_amount: Option<Fixed>,
    pub last_px: Option<Fixed>,
    pub mark_px: Option<Fixed>,
    /// `mark_timestamp`, ns since the epoch (0 when absent).
    pub mark_ts_ns: u64,
    pub index_px: Option<Fixed>,
}

/// An `lwt` notification: best bid and ask as (price, amount), last and mark price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lwt {
    pub bid: Option<(Fixed, Fixed)>,
    pub ask: Option<(Fixed, Fixed)>,
    pub last_px: Option<Fixed>,
    pub mark_px: Option<Fixed>,
}

/// A `price_index` notification (api.yaml `Index`: `index_name`, `price` and `timestamp` are
/// required).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Index {
    pub price: Fixed,
    /// `timestamp`, ns since the epoch.
    pub time_ns: u64,
}

/// A trade from a book's `trades` (`[price, amount, direction, timestamp, implied_taker]`) or
/// from `recent_trades` (`[price, size, side, timestamp, instrument_name, implied_taker]`).
/// Thalex gives a trade no id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TradePrint {
    /// A hash of the whole tuple (price, amount, direction, time, instrument): what tells a
    /// trade a re-snapshot repeats from a new one (see `feed`).
    pub key: u64,
    /// `true`: the buyer took liquidity.
    pub buy: bool,
    pub price: Fixed,
    pub amount: Fixed,
    pub time_ns: u64,
    /// `implied_taker`: the taker trade happened on another book (implied matching).
    pub implied_taker: bool,
    /// A `recent_trades` tuple's `instrument_name`, as a byte range of the payload (empty for
    /// a book's trades, which are the channel's instrument's).
    pub instrument: (usize, usize),
}

/// Reusable buffers a decoder fills instead of allocating.
#[derive(Default)]
pub struct Scratch {
    /// (price, amount) per changed level; amount 0 deletes.
    pub bids: Vec<(Fixed, Fixed)>,
    pub asks: Vec<(Fixed, Fixed)>,
    pub trades: Vec<TradePrint>,
    /// A subscribe result's channel names, as byte ranges of the payload.
    pub channels: Vec<(usize, usize)>,
    /// The order of the keys in the last ticker, which the next one is read against first.
    pub ticker_order: KeyOrder,
    /// The last `ticker` notification read ([`Body::Ticker`]): kept here rather than in the
    /// returned message, so that a decoded message is a few words and its ticker is written
    /// once, not copied out through each return.
    pub ticker: Ticker,
    /// The last `lwt` notification read ([`Body::Lwt`]), for the same reason.
    pub lwt: Lwt,
    /// The first 64 bytes of the last notification read (see [`Prefix`]).
    pub(super) prefix: Prefix,
}

/// The first 64 bytes of the last notification read, which open
/// `{"channel_name":"<name>","notification":`, with where its value starts (`len`, at most 64)
/// and its name's length and kind: a channel's next notification whose first 64 bytes are the
/// same has the same name (one without an escape, which the scan that kept them checked), so it
/// is routed without scanning the name again. Whole bytes rather than the opening alone, so that
/// keeping them is a plain copy: the bytes after the opening are a ticker's first key, the same
/// in every ticker, and where they are not, the next message is scanned. `len` 0: none kept.
#[derive(Clone, Copy, Debug)]
pub(super) struct Prefix {
    bytes: [u8; 64],
    len: u8,
    name_len: u8,
    kind: Kind,
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix {
            bytes: [0; 64],
            len: 0,
            name_len: 0,
            kind: Kind::Other,
        }
    }
}

impl Prefix {
    /// Where a name starts: after `{"channel_name":"`.
    const NAME_AT: usize = 17;

    /// Keeps the first 64 bytes of `payload`, whose opening ends at `len` and holds a name of
    /// `name_len` bytes (no escape); nothing is kept from a payload shorter than 64 bytes or an
    /// opening longer.
    #[inline(always)]
    fn keep(&mut self, payload: &[u8], len: usize, name_len: usize, kind: Kind) {
        match payload.first_chunk::<64>() {
            Some(head) if len <= 64 => {
                self.bytes = *head;
                self.len = len as u8;
                self.name_len = name_len as u8;
                self.kind = kind;
            }
            _ => self.len = 0,
        }
    }

    /// The name and kind when `payload`'s first 64 bytes are the kept ones, and where its
    /// notification's value starts.
    #[inline(always)]
    fn matches<'a>(&self, payload: &'a [u8]) -> Option<(&'a [u8], Kind, usize)> {
        let head = payload.first_chunk::<64>()?;
        let mut differs = 0u8;
        for (byte, kept) in head.iter().zip(&self.bytes) {
            differs |= byte ^ kept;
        }
        if differs != 0 || self.len == 0 {
            return None;
        }
        let name = payload.get(Self::NAME_AT..Self::NAME_AT + usize::from(self.name_len))?;
        Some((name, self.kind, usize::from(self.len)))
    }
}

/// The keys of an object in the order a venue last sent them, as small ids and as their bytes.
/// A decoder checks the bytes at the cursor against the key expected at that place, one
/// comparison of the key's bytes as last sent, and reads the key in full only when the venue
/// changed its order. A real ticker has about 20 keys, most of them skipped: without the
/// skipped keys' bytes each of those would be read and looked up in full.
#[derive(Clone, Copy, Debug)]
pub struct KeyOrder {
    ids: [u8; KeyOrder::MAX],
    /// Each key: `"<key>":` as it was sent (`pattern_lens` 0 when longer than fits).
    patterns: [[u8; KeyOrder::PATTERN]; KeyOrder::MAX],
    pattern_lens: [u8; KeyOrder::MAX],
    /// Each member as [`ticker_in_order`] checks it: its separator and key (see [`Member`]).
    members: [Member; KeyOrder::MAX],
    len: u8,
}

impl Default for KeyOrder {
    fn default() -> Self {
        KeyOrder {
            ids: [0; KeyOrder::MAX],
            patterns: [[0; KeyOrder::PATTERN]; KeyOrder::MAX],
            pattern_lens: [0; KeyOrder::MAX],
            members: [Member::default(); KeyOrder::MAX],
            len: 0,
        }
    }
}

/// One member of a learned order, ready for [`ticker_in_order`]: the bytes `<sep>"<key>":`
/// (`sep` is `{` for the first member and `,` after it) as little-endian words: `first` holds
/// bytes 0..8, `second` 8..16, `third` 16..24 and `last` the final eight (`len - 8..len`).
/// `rest`: the fewest bytes the message holds from this member's separator on, when the
/// members from here to the end are as learned (each value at least one byte, then `}`).
/// A pattern shorter than 8 bytes or longer than 32 is not checked: its `len` is 0 and its `rest`
/// `u32::MAX`, more than any message the path reads holds, so the path declines there.
#[derive(Clone, Copy, Debug, Default)]
struct Member {
    first: u64,
    second: u64,
    third: u64,
    last: u64,
    len: u8,
    id: u8,
    rest: u32,
}

impl KeyOrder {
    const MAX: usize = 32;
    const PATTERN: usize = 32;

    #[inline(always)]
    fn get(&self, index: usize) -> Option<u8> {
        (index < usize::from(self.len)).then(|| self.ids[index])
    }

    /// The key expected at `index`, as `"<key>":`.
    #[inline(always)]
    fn pattern(&self, index: usize) -> &[u8] {
        match (self.patterns.get(index), self.pattern_lens.get(index)) {
            (Some(pattern), Some(&len)) => &pattern[..usize::from(len)],
            _ => &[],
        }
    }

    /// Records the key read at `index` (the positions after it are forgotten).
    fn set(&mut self, index: usize, id: u8, key: &[u8]) {
        if index >= Self::MAX {
            return;
        }
        self.ids[index] = id;
        let pattern_len = key.len() + 3;
        if pattern_len <= Self::PATTERN {
            let pattern = &mut self.patterns[index];
            pattern[0] = b'"';
            pattern[1..=key.len()].copy_from_slice(key);
            pattern[key.len() + 1] = b'"';
            pattern[key.len() + 2] = b':';
            self.pattern_lens[index] = pattern_len as u8;
        } else {
            self.pattern_lens[index] = 0;
        }
        self.truncate(index + 1);
    }

    /// Keeps the first `len` keys, and makes the members [`ticker_in_order`] checks from them.
    fn truncate(&mut self, len: usize) {
        let len = len.min(Self::MAX);
        self.len = len as u8;
        let mut rest: usize = 1;
        for index in (0..len).rev() {
            let pattern = self.pattern(index);
            let mut bytes = [0u8; 40];
            bytes[0] = if index == 0 { b'{' } else { b',' };
            let member_len = pattern.len() + 1;
            let usable = !pattern.is_empty() && (8..=32).contains(&member_len);
            if usable {
                bytes[1..member_len].copy_from_slice(pattern);
            }
            let word = |at: usize| {
                let mut word = [0u8; 8];
                word.copy_from_slice(&bytes[at..at + 8]);
                u64::from_le_bytes(word)
            };
            rest += member_len + 1;
            self.members[index] = Member {
                first: word(0),
                second: word(8),
                third: word(16),
                last: word(member_len.saturating_sub(8)),
                len: if usable { member_len as u8 } else { 0 },
                id: self.ids[index],
                rest: if usable { rest as u32 } else { u32::MAX },
            };
        }
    }
}

impl Scratch {
    fn clear(&mut self) {
        self.bids.clear();
        self.asks.clear();
        self.trades.clear();
        self.channels.clear();
    }
}

/// A notification's decoded value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// In `Scratch::ticker`.
    Ticker,
    /// In `Scratch::lwt`.
    Lwt,
    /// Changes (or the snapshot) in `Scratch::bids`/`asks`, trades in `Scratch::trades`.
    Book {
        time_ns: u64,
    },
    /// In `Scratch::trades`.
    Trades,
    Index(Index),
    /// A `system` event: its `event` value (`reconnect`, ...), empty when it has none.
    System {
        event: &'a [u8],
    },
    /// A channel this build does not decode.
    Other,
}

/// What a response answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// A `result` that is a list of strings (a subscription's accepted channels), in
    /// `Scratch::channels`.
    Channels,
    /// Any other `result`.
    Done,
    Error {
        code: i64,
        message: &'a [u8],
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Notification {
        channel: &'a [u8],
        /// The envelope's `"snapshot"` key, when the message has one: what marks a book
        /// notification as the whole book for Thalex's official client (api.yaml documents no
        /// marker).
        snapshot: Option<bool>,
        body: Body<'a>,
    },
    Response {
        /// `None` for `"id":null` or no id.
        id: Option<u64>,
        outcome: Outcome<'a>,
    },
}

/// Decodes one message.
pub fn decode<'a>(payload: &'a [u8], scratch: &mut Scratch) -> Result<Message<'a>, DecodeError> {
    scratch.clear();
    let mut reader = Reader::new(payload);
    let mut channel: Option<&'a [u8]> = None;
    let mut snapshot = None;
    let mut body: Option<Body<'a>> = None;
    let mut deferred_body: Option<usize> = None;
    let mut id: Option<Option<u64>> = None;
    let mut outcome: Option<Outcome<'a>> = None;
    // The two shapes Thalex sends open with their routing key: read it without the key loop.
    if let Some((name, kind, at)) = scratch.prefix.matches(payload) {
        channel = Some(name);
        reader = Reader::at(payload, at);
        body = Some(notification(&mut reader, kind, scratch)?);
    } else if reader.literal(br#"{"channel_name":"#) {
        let name = channel_name(&mut reader)?;
        channel = Some(name);
        if reader.literal(br#","notification":"#) {
            let kind = Kind::of(name);
            scratch.prefix.keep(payload, reader.pos(), name.len(), kind);
            body = Some(notification(&mut reader, kind, scratch)?);
        }
    } else if reader.literal(br#"{"id":"#) {
        id = Some(id_value(&mut reader)?);
        // The protocol marker carries nothing: step over it whole when it comes next. Thalex
        // sends `result` after it; reading that key as a literal too spares the key loop a
        // string scan and a match on the one key a response always has.
        reader.literal(br#","jsonrpc":"2.0""#);
        if reader.literal(br#","result":"#) {
            outcome = Some(result(&mut reader, scratch)?);
        }
    } else {
        reader.begin_object()?;
    }
    while let Some(key) = reader.next_key()? {
        match key {
            b"channel_name" => channel = Some(channel_name(&mut reader)?),
            b"notification" => match channel {
                Some(name) => body = Some(notification(&mut reader, Kind::of(name), scratch)?),
                None => {
                    deferred_body = Some(reader.pos());
                    reader.skip_value()?;
                }
            },
            b"snapshot" => snapshot = Some(reader.boolean()?),
            b"id" => id = Some(id_value(&mut reader)?),
            b"result" => outcome = Some(result(&mut reader, scratch)?),
            b"error" => outcome = Some(error(&mut reader)?),
            _ => reader.skip_value()?,
        }
    }
    if !reader.at_end() {
        return Err(ErrorKind::Trailing.into());
    }
    if let Some(channel) = channel {
        let body = match (body, deferred_body) {
            (Some(body), _) => body,
            (None, Some(at)) => {
                notification(&mut Reader::at(payload, at), Kind::of(channel), scratch)?
            }
            (None, None) => return Err(ErrorKind::NoBody.into()),
        };
        return Ok(Message::Notification {
            channel,
            snapshot,
            body,
        });
    }
    match (id, outcome) {
        (Some(id), Some(outcome)) => Ok(Message::Response { id, outcome }),
        (None, Some(outcome)) => Ok(Message::Response { id: None, outcome }),
        _ => Err(ErrorKind::NotAMessage.into()),
    }
}

/// A channel name, refused when it holds an escape (see the module docs).
#[inline(always)]
fn channel_name<'a>(reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    match reader.string_escaped()? {
        (name, false) => Ok(name),
        (_, true) => Err(ErrorKind::EscapedChannel.into()),
    }
}

fn id_value(reader: &mut Reader<'_>) -> Result<Option<u64>, DecodeError> {
    if reader.null() {
        Ok(None)
    } else {
        Ok(Some(reader.unsigned()?))
    }
}

fn result<'a>(reader: &mut Reader<'a>, scratch: &mut Scratch) -> Result<Outcome<'a>, DecodeError> {
    if reader.peek() != Some(b'[') {
        reader.skip_value()?;
        return Ok(Outcome::Done);
    }
    reader.begin_array()?;
    let mut first = true;
    let mut names = true;
    while reader.next_item(first)? {
        first = false;
        if names && reader.peek() == Some(b'"') {
            let name = reader.string()?;
            let start = reader.pos() - 1 - name.len();
            scratch.channels.push((start, start + name.len()));
        } else {
            names = false;
            reader.skip_value()?;
        }
    }
    Ok(if names {
        Outcome::Channels
    } else {
        Outcome::Done
    })
}

fn error<'a>(reader: &mut Reader<'a>) -> Result<Outcome<'a>, DecodeError> {
    let mut code = 0;
    let mut message: &[u8] = b"";
    if reader.peek() != Some(b'{') {
        reader.skip_value()?;
        return Ok(Outcome::Error { code, message });
    }
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"code" => code = whole(reader.number()?),
            b"message" if reader.peek() == Some(b'"') => message = reader.string()?,
            _ => reader.skip_value()?,
        }
    }
    Ok(Outcome::Error { code, message })
}

/// The integer part of a number.
fn whole(value: Fixed) -> i64 {
    value.raw() / SCALE
}

#[inline]
fn notification<'a>(
    reader: &mut Reader<'a>,
    kind: Kind,
    scratch: &mut Scratch,
) -> Result<Body<'a>, DecodeError> {
    Ok(match kind {
        Kind::Ticker => {
            scratch.ticker = ticker(reader, &mut scratch.ticker_order)?;
            Body::Ticker
        }
        Kind::Lwt => {
            scratch.lwt = lwt(reader)?;
            Body::Lwt
        }
        Kind::Book => Body::Book {
            time_ns: book(reader, scratch)?,
        },
        Kind::RecentTrades => {
            recent_trades(reader, scratch)?;
            Body::Trades
        }
        Kind::PriceIndex => Body::Index(index(reader)?),
        Kind::System => Body::System {
            event: system(reader)?,
        },
        Kind::Other => {
            reader.skip_value()?;
            Body::Other
        }
    })
}

/// The ticker keys tickwire reads, by id; anything else is `TICKER_OTHER` and skipped.
const TICKER_KEYS: [&[u8]; 8] = [
    b"best_bid_price",
    b"best_bid_amount",
    b"best_ask_price",
    b"best_ask_amount",
    b"last_price",
    b"mark_price",
    b"mark_timestamp",
    b"index",
];
const TICKER_OTHER: u8 = TICKER_KEYS.len() as u8;

/// Whether `"<key id>":` is at the cursor (consumed if so). One arm per key, so that each
/// comparison is against a constant literal.
#[inline(always)]
fn ticker_key_at(reader: &mut Reader<'_>, id: u8) -> bool {
    match id {
        0 => reader.literal(br#""best_bid_price":"#),
        1 => reader.literal(br#""best_bid_amount":"#),
        2 => reader.literal(br#""best_ask_price":"#),
        3 => reader.literal(br#""best_ask_amount":"#),
        4 => reader.literal(br#""last_price":"#),
        5 => reader.literal(br#""mark_price":"#),
        6 => reader.literal(br#""mark_timestamp":"#),
        7 => reader.literal(br#""index":"#),
        _ => false,
    }
}

/// A ticker object, read against the key order of the previous one (`order`, updated): first
/// by [`ticker_in_order`], then, when that one declines, by the key loop below.
#[inline]
fn ticker(reader: &mut Reader<'_>, order: &mut KeyOrder) -> Result<Ticker, DecodeError> {
    if let Some((ticker, end)) = ticker_in_order(reader.bytes(), reader.pos(), order) {
        reader.rewind_in_object(end, false);
        return Ok(ticker);
    }
    ticker_by_keys(reader, order)
}

/// The ticker as Thalex sends it, on a local position and slice: `{`, then exactly the keys of
/// `order` in its order, each member's separator and `"<key>":` compared with its bytes as last
/// sent in two to four eight-byte words ([`Member`]; one check of the message's length per
/// member covers them and the value's first byte), no whitespace, every value read a number or
/// `null` in the plain shape ([`reader::Closed::plain_number_at`]; a time not negative), every
/// skipped value a number (grammar-checked, [`reader::Closed::number_end`]) or a literal, then
/// `}`; the message itself ends with `}` ([`reader::Closed`]). The ticker and where it ends;
/// `None` for anything else, before anything is decided: the key loop then reads the ticker from
/// its `{`, so what this path accepts, the key loop reads the same way, and what it declines,
/// the key loop reads or refuses.
#[inline(always)]
fn ticker_in_order(bytes: &[u8], start: usize, order: &KeyOrder) -> Option<(Ticker, usize)> {
    let len = usize::from(order.len);
    if len == 0 || bytes.get(start) != Some(&b'{') {
        return None;
    }
    // A message that ends with `}` (every message Thalex sends: one object) is read without a
    // bounds check per digit; another declines, and the key loop reads it.
    let closed = reader::Closed::new(bytes)?;
    // Below `u32::MAX` bytes, no `rest` of `u32::MAX` can pass (see [`Member`]).
    if bytes.len() >= u32::MAX as usize {
        return None;
    }
    let mut pos = start;
    let mut read = [None; TICKER_KEYS.len()];
    for member in order.members.get(..len)? {
        // The member, its first value byte and what must follow are inside the message (never,
        // for a member the path does not check: its `rest` is more than any message here).
        if pos + member.rest as usize > bytes.len() {
            return None;
        }
        let member_len = usize::from(member.len);
        // SAFETY: `rest` passed, so it is not `u32::MAX` (the message is shorter): the member is
        // one the path checks, whose `rest` is more than its `member_len` (`KeyOrder::truncate`),
        // which is at least 8, so `pos..pos + member_len + 1` is inside `bytes`, and so is every
        // word read.
        let word = |at: usize| unsafe {
            debug_assert!(at + 8 <= bytes.len());
            bytes
                .as_ptr()
                .add(at)
                .cast::<u64>()
                .read_unaligned()
                .to_le()
        };
        if word(pos) != member.first || word(pos + member_len - 8) != member.last {
            return None;
        }
        if member_len > 16
            && (word(pos + 8) != member.second
                || (member_len > 24 && word(pos + 16) != member.third))
        {
            return None;
        }
        pos += member_len;
        // SAFETY: as above, `pos` is still inside `bytes`.
        let first = unsafe { *bytes.get_unchecked(pos) };
        let id = member.id;
        if id == TICKER_OTHER {
            pos = if first.wrapping_sub(b'0') <= 9 || first == b'-' {
                closed.number_end(pos)?
            } else {
                let literal: &[u8] = match first {
                    b'n' => b"null",
                    b't' => b"true",
                    b'f' => b"false",
                    _ => return None,
                };
                if !bytes.get(pos..)?.starts_with(literal) {
                    return None;
                }
                pos + literal.len()
            };
            continue;
        }
        let value = if first == b'n' {
            if !bytes.get(pos..)?.starts_with(b"null") {
                return None;
            }
            pos += 4;
            None
        } else {
            let (value, end) = closed.plain_number_at(pos)?;
            pos = end;
            Some(value)
        };
        *read.get_mut(usize::from(id))? = value;
    }
    if bytes.get(pos) != Some(&b'}') {
        return None;
    }
    let [bid_px, bid_amount, ask_px, ask_amount, last_px, mark_px, mark_ts, index_px] = read;
    let mark_ts_ns = match mark_ts {
        Some(seconds) => u64::try_from(seconds.raw()).ok()?,
        None => 0,
    };
    Some((
        Ticker {
            bid_px,
            bid_amount,
            ask_px,
            ask_amount,
            last_px,
            mark_px,
            mark_ts_ns,
            index_px,
        },
        pos + 1,
    ))
}

/// A ticker object by its key loop, checked first against the key order of the previous one
/// (`order`, updated).
#[inline(never)]
fn ticker_by_keys(reader: &mut Reader<'_>, order: &mut KeyOrder) -> Result<Ticker, DecodeError> {
    let mut ticker = Ticker::default();
    reader.begin_object()?;
    let mut index = 0;
    loop {
        let before = reader.pos();
        let expected = order
            .get(index)
            .filter(|_| index == 0 || reader.literal(b","));
        let id = match expected {
            Some(TICKER_OTHER)
                if !order.pattern(index).is_empty() && reader.literal(order.pattern(index)) =>
            {
                TICKER_OTHER
            }
            Some(id) if id != TICKER_OTHER && ticker_key_at(reader, id) => id,
            _ => {
                reader.rewind_in_object(before, index == 0);
                match reader.next_key()? {
                    None => break,
                    Some(key) => {
                        let id = TICKER_KEYS
                            .iter()
                            .position(|known| *known == key)
                            .map_or(TICKER_OTHER, |id| id as u8);
                        order.set(index, id, key);
                        id
                    }
                }
            }
        };
        match id {
            0 => ticker.bid_px = reader.number_or_null()?,
            1 => ticker.bid_amount = reader.number_or_null()?,
            2 => ticker.ask_px = reader.number_or_null()?,
            3 => ticker.ask_amount = reader.number_or_null()?,
            4 => ticker.last_px = reader.number_or_null()?,
            5 => ticker.mark_px = reader.number_or_null()?,
            6 => ticker.mark_ts_ns = reader.seconds_as_ns()?.unwrap_or(0),
            7 => ticker.index_px = reader.number_or_null()?,
            _ => reader.skip_value()?,
        }
        index += 1;
    }
    order.truncate(usize::from(order.len).min(index));
    Ok(ticker)
}

/// `[price, amount, ...]` or `null`: the first two numbers.
fn pair(reader: &mut Reader<'_>) -> Result<Option<(Fixed, Fixed)>, DecodeError> {
    if reader.null() {
        return Ok(None);
    }
    level(reader).map(Some)
}

/// `[price, amount, outright amount]`: price and amount. The outright amount may be left out
/// (the documentation lists it, the decoder has no use for it); a fourth entry, or an entry
/// that is not a number, makes the message malformed.
#[inline]
fn level(reader: &mut Reader<'_>) -> Result<(Fixed, Fixed), DecodeError> {
    reader.begin_array()?;
    if !reader.next_item(true)? {
        return Err(ErrorKind::BadLevel.into());
    }
    let price = reader.number()?;
    if !reader.next_item(false)? {
        return Err(ErrorKind::BadLevel.into());
    }
    let amount = reader.number()?;
    if reader.next_item(false)? {
        reader.number()?;
        if reader.next_item(false)? {
            return Err(ErrorKind::BadLevel.into());
        }
    }
    Ok((price, amount))
}

fn lwt(reader: &mut Reader<'_>) -> Result<Lwt, DecodeError> {
    let mut lwt = Lwt::default();
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"b" => lwt.bid = pair(reader)?,
            b"a" => lwt.ask = pair(reader)?,
            b"l" => lwt.last_px = reader.number_or_null()?,
            b"m" => lwt.mark_px = reader.number_or_null()?,
            _ => reader.skip_value()?,
        }
    }
    Ok(lwt)
}

fn levels(reader: &mut Reader<'_>, out: &mut Vec<(Fixed, Fixed)>) -> Result<(), DecodeError> {
    if reader.null() {
        return Ok(());
    }
    reader.begin_array()?;
    let mut first = true;
    while reader.next_item(first)? {
        first = false;
        out.push(level(reader)?);
    }
    Ok(())
}

/// Fills the scratch levels and trades; returns `time` in ns.
fn book(reader: &mut Reader<'_>, scratch: &mut Scratch) -> Result<u64, DecodeError> {
    let mut time_ns = 0;
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"bid_changes" | b"bids" => levels(reader, &mut scratch.bids)?,
            b"ask_changes" | b"asks" => levels(reader, &mut scratch.asks)?,
            b"trades" => trades(reader, &mut scratch.trades, false)?,
            b"time" => time_ns = reader.seconds_as_ns()?.unwrap_or(0),
            _ => reader.skip_value()?,
        }
    }
    Ok(time_ns)
}

fn direction(text: &[u8]) -> Result<bool, DecodeError> {
    match text {
        b"buy" => Ok(true),
        b"sell" => Ok(false),
        _ => Err(ErrorKind::BadDirection.into()),
    }
}

/// An array of trade tuples: a book's `[price, amount, direction, timestamp, implied_taker]`
/// or, with `named`, recent_trades' `[price, size, side, timestamp, instrument_name,
/// implied_taker]` (api.yaml). Price, amount, direction and timestamp are required (and the
/// instrument name with `named`); `implied_taker` may be left out; anything after it makes
/// the trade malformed.
fn trades(
    reader: &mut Reader<'_>,
    out: &mut Vec<TradePrint>,
    named: bool,
) -> Result<(), DecodeError> {
    if reader.null() {
        return Ok(());
    }
    reader.begin_array()?;
    let mut first = true;
    while reader.next_item(first)? {
        first = false;
        out.push(trade(reader, named)?);
    }
    Ok(())
}

#[inline]
fn trade(reader: &mut Reader<'_>, named: bool) -> Result<TradePrint, DecodeError> {
    let bad = || DecodeError::from(ErrorKind::BadTrade);
    let mut trade = TradePrint::default();
    reader.begin_array()?;
    if !reader.next_item(true)? {
        return Err(bad());
    }
    trade.price = reader.number()?;
    if !reader.next_item(false)? {
        return Err(bad());
    }
    trade.amount = reader.number()?;
    if !reader.next_item(false)? {
        return Err(bad());
    }
    trade.buy = direction(reader.string()?)?;
    if !reader.next_item(false)? {
        return Err(bad());
    }
    trade.time_ns = reader.seconds_as_ns()?.ok_or_else(bad)?;
    if named {
        if !reader.next_item(false)? {
            return Err(bad());
        }
        let name = reader.string()?;
        let end = reader.pos() - 1;
        trade.instrument = (end - name.len(), end);
    }
    if reader.next_item(false)? {
        trade.implied_taker = reader.boolean()?;
        if reader.next_item(false)? {
            return Err(bad());
        }
    }
    let name = &reader.bytes()[trade.instrument.0..trade.instrument.1];
    trade.key = trade_key(&trade, name);
    Ok(trade)
}

/// A hash of a trade's tuple ([`FastHasher`]): equal for the same trade sent twice, different
/// for any two trades that differ in one field (each step of the hasher is a bijection) and, but
/// for a 2^-64 chance, for any two that differ in several.
fn trade_key(trade: &TradePrint, instrument: &[u8]) -> u64 {
    let mut hasher = FastHasher::default();
    hasher.write_i64(trade.price.raw());
    hasher.write_i64(trade.amount.raw());
    hasher.write_u8(u8::from(trade.buy) | u8::from(trade.implied_taker) << 1);
    hasher.write_u64(trade.time_ns);
    hasher.write(instrument);
    hasher.finish()
}

fn recent_trades(reader: &mut Reader<'_>, scratch: &mut Scratch) -> Result<(), DecodeError> {
    trades(reader, &mut scratch.trades, true)
}

fn index(reader: &mut Reader<'_>) -> Result<Index, DecodeError> {
    let mut name = false;
    let mut price = None;
    let mut time_ns = None;
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"index_name" => name = reader.string().map(|_| true)?,
            b"price" => price = Some(reader.number()?),
            b"timestamp" => time_ns = reader.seconds_as_ns()?,
            _ => reader.skip_value()?,
        }
    }
    if !name {
        return Err(ErrorKind::Missing("index_name").into());
    }
    Ok(Index {
        price: price.ok_or(ErrorKind::Missing("price"))?,
        time_ns: time_ns.ok_or(ErrorKind::Missing("timestamp"))?,
    })
}

/// A `system` notification: api.yaml's `SystemEvent`, whose `event` is required.
fn system<'a>(reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let mut event: Option<&[u8]> = None;
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"event" => event = Some(reader.string()?),
            _ => reader.skip_value()?,
        }
    }
    event.ok_or_else(|| ErrorKind::Missing("event").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(text: &str) -> Fixed {
        Fixed::parse_str(text).unwrap()
    }

    /// The audit's ticker, byte for byte.
    pub const AUDIT_TICKER: &str = r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_ask_price":50001.0,"best_bid_price":50000.5,"mark_price":50000.6,"mark_timestamp":1234567890.123}}"#;

    #[test]
    fn the_audit_ticker_decodes() {
        let mut scratch = Scratch::default();
        let message = decode(AUDIT_TICKER.as_bytes(), &mut scratch).unwrap();
        let Message::Notification {
            channel,
            snapshot,
            body: Body::Ticker,
        } = message
        else {
            panic!("{message:?}");
        };
        let ticker = scratch.ticker;
        assert_eq!(channel, b"ticker.BTC-PERPETUAL.100ms");
        assert_eq!(snapshot, None);
        assert_eq!(ticker.bid_px, Some(fixed("50000.5")));
        assert_eq!(ticker.ask_px, Some(fixed("50001")));
        assert_eq!(ticker.mark_px, Some(fixed("50000.6")));
        assert_eq!(ticker.bid_amount, None);
        assert_eq!(ticker.mark_ts_ns, 1_234_567_890_123_000_000);
    }

    #[test]
    fn a_channel_kind_is_its_names_first_segment() {
        for (name, kind) in [
            (&b"ticker.BTC-PERPETUAL.100ms"[..], Kind::Ticker),
            (b"ticker", Kind::Ticker),
            (b"tickers.BTC-PERPETUAL.100ms", Kind::Other),
            (b"ticke", Kind::Other),
            (b"lwt.X.raw", Kind::Lwt),
            (b"book.X.none.all.raw", Kind::Book),
            (b"bookx.X", Kind::Other),
            (b"recent_trades.BTCUSD.all", Kind::RecentTrades),
            (b"price_index.BTCUSD", Kind::PriceIndex),
            (b"system", Kind::System),
            (b"systems", Kind::Other),
            (b"instruments", Kind::Other),
            (b"", Kind::Other),
            (b".ticker", Kind::Other),
        ] {
            assert_eq!(Kind::of(name), kind, "{}", String::from_utf8_lossy(name));
        }
    }

    /// A decode's result and the ticker it read, if any, as text, for comparing two scratches.
    fn decoded(payload: &[u8], scratch: &mut Scratch) -> String {
        match decode(payload, scratch) {
            Ok(
                message @ Message::Notification {
                    body: Body::Ticker, ..
                },
            ) => {
                format!("{message:?} {:?}", scratch.ticker)
            }
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_notification_opening_as_the_last_did_reads_as_a_fresh_decoder_reads_it() {
        let ticker = br#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":1,"mark_price":2.5}}"#;
        let mut kept = Scratch::default();
        decoded(ticker, &mut kept);
        let opening = br#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":"#;
        assert_eq!(
            usize::from(kept.prefix.len),
            opening.len(),
            "the opening is kept"
        );
        // Every byte of the kept opening (and the next ones) changed, each of several ways:
        // the scratch that kept the opening reads the message as a fresh one does.
        for at in 0..72 {
            for byte in [b'X', b'\\', b'"', b'.', b' ', b'}', ticker[at] ^ 0x20] {
                let mut changed = ticker.to_vec();
                changed[at] = byte;
                decoded(ticker, &mut kept);
                assert_eq!(
                    decoded(&changed, &mut kept),
                    decoded(&changed, &mut Scratch::default()),
                    "{}",
                    String::from_utf8_lossy(&changed)
                );
            }
        }
        // Another name of the same length is its own, and an escaped spelling of the kept name
        // is still refused.
        let other =
            br#"{"channel_name":"ticker.ETH-PERPETUAL.100ms","notification":{"best_bid_price":3}}"#;
        decoded(ticker, &mut kept);
        match decode(other, &mut kept) {
            Ok(Message::Notification { channel, .. }) => {
                assert_eq!(channel, b"ticker.ETH-PERPETUAL.100ms")
            }
            other => panic!("{other:?}"),
        }
        let escaped = br#"{"channel_name":"ticker.BTC\u002dPERPETUAL.100ms","notification":{"best_bid_price":1}}"#;
        decoded(ticker, &mut kept);
        assert_eq!(
            decode(escaped, &mut kept).map_err(|error| error.kind),
            Err(ErrorKind::EscapedChannel)
        );
        // A message shorter than 64 bytes, and names whose opening is 64 bytes (kept) and 65
        // (not kept), read the same through a scratch that has seen them.
        let short = br#"{"channel_name":"system","notification":{"event":"reconnect"}}"#;
        let name_30 = format!(
            r#"{{"channel_name":"ticker.{}.100ms","notification":{{"mark_price":1}}}}"#,
            "A".repeat(17)
        );
        let name_31 = name_30.replacen("AA", "AAA", 1);
        for message in [&short[..], name_30.as_bytes(), name_31.as_bytes()] {
            let fresh = decoded(message, &mut Scratch::default());
            decoded(message, &mut kept);
            assert_eq!(decoded(message, &mut kept), fresh);
            assert_eq!(
                decoded(ticker, &mut kept),
                decoded(ticker, &mut Scratch::default())
            );
        }
        decoded(name_30.as_bytes(), &mut kept);
        assert_eq!(usize::from(kept.prefix.len), 64);
        decoded(name_31.as_bytes(), &mut kept);
        assert_eq!(kept.prefix.len, 0, "65 bytes are not kept");
    }

    #[test]
    fn every_byte_of_a_learned_member_is_checked() {
        // Keys of 4 to 28 bytes: members (`{"<key>":` or `,"<key>":`) of 8 to 32 bytes, one to
        // four words. Changing any byte of either member makes the in-order path decline.
        for key_len in 4..=28 {
            let key: String = (0..key_len)
                .map(|at| (b'a' + at as u8 % 26) as char)
                .collect();
            let other = format!("{}X", &key[..key_len - 1]);
            let text = format!(r#"{{"{key}":1,"{other}":2}}}}"#);
            let mut learned = KeyOrder::default();
            let mut reader = Reader::new(text.as_bytes());
            ticker_by_keys(&mut reader, &mut learned).expect("the object reads");
            let object_end = text.len() - 1;
            assert_eq!(
                ticker_in_order(text.as_bytes(), 0, &learned).map(|(_, end)| end),
                Some(object_end),
                "{text}"
            );
            let second = key_len + 5;
            for at in (0..key_len + 4).chain(second..second + key_len + 4) {
                let mut changed = text.clone().into_bytes();
                changed[at] ^= 0x20;
                assert_eq!(
                    ticker_in_order(&changed, 0, &learned),
                    None,
                    "{}",
                    String::from_utf8_lossy(&changed)
                );
            }
        }
    }

    #[test]
    fn a_member_shorter_than_a_word_or_near_the_end_declines_without_reading_past_it() {
        let mut learned = KeyOrder::default();
        let text = br#"{"abc":1,"index":2}}"#;
        let mut reader = Reader::new(text);
        let ticker = ticker_by_keys(&mut reader, &mut learned).expect("the object reads");
        assert_eq!(ticker.index_px, Some(Fixed(2 * SCALE)));
        // `{"abc":` is 7 bytes: the in-order path does not check such a member, it declines.
        assert_eq!(ticker_in_order(text, 0, &learned), None);
        // A message cut anywhere after a learned order never reads past its end.
        let mut learned = KeyOrder::default();
        let text = br#"{"last_price":1,"index":2}}"#;
        ticker_by_keys(&mut Reader::new(text), &mut learned).expect("the object reads");
        assert!(ticker_in_order(text, 0, &learned).is_some());
        // (Cut two bytes short or more: the object's own `}` then is the one pushed.)
        for cut in 0..text.len() - 2 {
            let mut short = text[..cut].to_vec();
            short.push(b'}');
            assert_eq!(ticker_in_order(&short, 0, &learned), None, "{cut}");
        }
    }

    #[test]
    fn a_ticker_whose_key_order_changes_still_decodes() {
        let orders = [
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4,"extra":[1,{"a":2}]}"#,
            r#"{"mark_timestamp":4,"best_ask_price":2,"extra":null,"best_bid_price":1,"mark_price":3}"#,
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{"a_key_longer_than_a_pattern_holds_at_all":1,"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{"a_key_longer_than_a_pattern_holds_at_all":1,"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{"delta":1,"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{"index":9,"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{"delta":1,"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{ "best_bid_price" : 1 , "best_ask_price":2, "mark_price":3,"mark_timestamp":4 }"#,
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
        ];
        let mut scratch = Scratch::default();
        for body in orders.iter().chain(orders.iter()) {
            let text = format!(r#"{{"channel_name":"ticker.X.raw","notification":{body}}}"#);
            let Message::Notification {
                body: Body::Ticker, ..
            } = decode(text.as_bytes(), &mut scratch).unwrap()
            else {
                panic!("{text}")
            };
            let ticker = scratch.ticker;
            assert_eq!(ticker.bid_px, Some(fixed("1")), "{text}");
            assert_eq!(ticker.ask_px, Some(fixed("2")), "{text}");
            assert_eq!(ticker.mark_px, Some(fixed("3")), "{text}");
            assert_eq!(ticker.mark_ts_ns, 4_000_000_000, "{text}");
        }
        let broken = r#"{"channel_name":"ticker.X.raw","notification":{"best_bid_price":1,"best_ask_price":}}"#;
        assert!(decode(broken.as_bytes(), &mut scratch).is_err());
    }

    /// The in-order path against the key loop on a real-shaped ticker with bytes changed at
    /// random (to digits, signs, dots, exponents, separators, quotes, braces, spaces, letters):
    /// wherever the in-order path gives a ticker, the key loop, given the same learned order,
    /// gives the same ticker and ends at the same byte; where the key loop refuses the object,
    /// the in-order path declines.
    #[test]
    fn the_in_order_path_accepts_only_what_the_key_loop_reads_the_same() {
        const REAL: &str = r#"{"best_bid_price":76000,"best_bid_amount":0.26,"best_ask_price":76001,"best_ask_amount":0.25,"last_price":76000.5,"mark_price":76000.71791443839,"mark_timestamp":1776715497.7188172,"delta":1,"index":76283.25916666667,"volume_24h":1234.56,"value_24h":93950717.1234567,"low_price_24h":75120,"high_price_24h":77001,"change_24h":-320,"collar_low":75240.39913435821,"collar_high":76760.66522393041,"open_interest":1534.18,"funding_rate":0.00001237751098016,"funding_mark":null,"flag":true}"#;
        const REPLACEMENTS: &[u8] = b"0123456789000-.eE+,:}{]\" n\\tfu";
        let mut learned = KeyOrder::default();
        let mut reader = Reader::new(REAL.as_bytes());
        let original = ticker_by_keys(&mut reader, &mut learned).expect("the real ticker reads");
        assert_eq!(
            ticker_in_order(REAL.as_bytes(), 0, &learned),
            Some((original, REAL.len())),
            "the unchanged ticker takes the in-order path"
        );
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let (mut accepted, mut declined) = (0, 0);
        for _ in 0..200_000 {
            let mut bytes = REAL.as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                let at = next(bytes.len());
                match next(10) {
                    0 => {
                        bytes.remove(at);
                    }
                    1 => bytes.insert(at, REPLACEMENTS[next(REPLACEMENTS.len())]),
                    _ => bytes[at] = REPLACEMENTS[next(REPLACEMENTS.len())],
                }
            }
            // The envelope's closing brace follows the object, as in a message.
            bytes.push(b'}');
            let fast = ticker_in_order(&bytes, 0, &learned);
            let mut order = learned;
            let mut reader = Reader::new(&bytes);
            let slow = ticker_by_keys(&mut reader, &mut order).map(|ticker| (ticker, reader.pos()));
            match fast {
                Some(fast) => {
                    accepted += 1;
                    assert_eq!(Ok(fast), slow, "{}", String::from_utf8_lossy(&bytes));
                }
                None => declined += 1,
            }
        }
        // Both paths are exercised: about one changed ticker in fourteen is still one the in-order
        // path takes.
        assert!(
            accepted > 5_000 && declined > 5_000,
            "{accepted} {declined}"
        );
    }

    #[test]
    fn keys_in_any_order_decode_the_same() {
        let reordered = r#"{"notification":{"mark_timestamp":1234567890.123,"mark_price":50000.6,"best_bid_price":50000.5,"best_ask_price":50001},"channel_name":"ticker.BTC-PERPETUAL.100ms"}"#;
        let mut scratch = Scratch::default();
        let a = decode(AUDIT_TICKER.as_bytes(), &mut scratch).unwrap();
        let b = decode(reordered.as_bytes(), &mut scratch).unwrap();
        assert_eq!(a, b);
        let response = r#"{"jsonrpc":"2.0","result":{"status":"ok"},"id":12345}"#;
        assert_eq!(
            decode(response.as_bytes(), &mut scratch).unwrap(),
            Message::Response {
                id: Some(12345),
                outcome: Outcome::Done
            }
        );
    }

    #[test]
    fn responses_carry_accepted_channels_and_errors() {
        let mut scratch = Scratch::default();
        let text = r#"{"id":7,"result":["ticker.BTC-PERPETUAL.100ms","system"]}"#;
        let message = decode(text.as_bytes(), &mut scratch).unwrap();
        assert_eq!(
            message,
            Message::Response {
                id: Some(7),
                outcome: Outcome::Channels
            }
        );
        let names: Vec<&[u8]> = scratch
            .channels
            .iter()
            .map(|&(start, end)| &text.as_bytes()[start..end])
            .collect();
        assert_eq!(names, [&b"ticker.BTC-PERPETUAL.100ms"[..], b"system"]);
        let text = r#"{"id":null,"error":{"code":4,"message":"throttled"}}"#;
        assert_eq!(
            decode(text.as_bytes(), &mut scratch).unwrap(),
            Message::Response {
                id: None,
                outcome: Outcome::Error {
                    code: 4,
                    message: b"throttled"
                }
            }
        );
        let audit = r#"{"id":12345,"jsonrpc":"2.0","result":{"status":"ok"}}"#;
        assert_eq!(
            decode(audit.as_bytes(), &mut scratch).unwrap(),
            Message::Response {
                id: Some(12345),
                outcome: Outcome::Done
            }
        );
    }

    fn notification_of<'a>(text: &'a str, scratch: &mut Scratch) -> Body<'a> {
        match decode(text.as_bytes(), scratch) {
            Ok(Message::Notification { body, .. }) => body,
            other => panic!("{text}: {other:?}"),
        }
    }

    // The notification examples of api.yaml's payload schemas, verbatim as JSON inside the
    // envelope the schemas define (`channel_name`, `notification`). The integration test
    // `thalex_api_examples` reads the same examples from the file itself.

    #[test]
    fn the_documented_ticker_example_decodes() {
        let text = r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"mark_price":47238.64143906124,"mark_timestamp":946684800,"best_bid_price":47240,"best_bid_amount":0.4,"best_ask_price":47260,"best_ask_amount":1,"delta":1,"volume_24h":0,"value_24h":0,"open_interest":123.456}}"#;
        let mut scratch = Scratch::default();
        let Body::Ticker = notification_of(text, &mut scratch) else {
            panic!()
        };
        let ticker = scratch.ticker;
        assert_eq!(ticker.mark_px, Some(fixed("47238.641439061")));
        assert_eq!(ticker.mark_ts_ns, 946_684_800_000_000_000);
        assert_eq!(ticker.bid_px, Some(fixed("47240")));
        assert_eq!(ticker.bid_amount, Some(fixed("0.4")));
        assert_eq!(ticker.ask_px, Some(fixed("47260")));
        assert_eq!(ticker.ask_amount, Some(fixed("1")));
        assert_eq!(ticker.index_px, None);
        // The issue's live-shaped ticker: its index has 11 decimals.
        let text = r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":76000,"best_bid_amount":1,"best_ask_price":76001,"best_ask_amount":2,"mark_price":76000.5,"mark_timestamp":1776715497.5,"index":76283.25916666667}}"#;
        let Body::Ticker = notification_of(text, &mut scratch) else {
            panic!()
        };
        let ticker = scratch.ticker;
        assert_eq!(ticker.index_px, Some(fixed("76283.259166667")));
        assert_eq!(ticker.mark_ts_ns, 1_776_715_497_500_000_000);
    }

    #[test]
    fn the_documented_lwt_example_decodes() {
        let text = r#"{"channel_name":"lwt.BTC-PERPETUAL.raw","notification":{"b":[47240,0.4,0.4],"a":[47260,1,0.9],"l":47252.64143906124,"m":65536.16}}"#;
        let mut scratch = Scratch::default();
        let Body::Lwt = notification_of(text, &mut scratch) else {
            panic!()
        };
        let lwt = scratch.lwt;
        assert_eq!(lwt.bid, Some((fixed("47240"), fixed("0.4"))));
        assert_eq!(lwt.ask, Some((fixed("47260"), fixed("1"))));
        assert_eq!(lwt.last_px, Some(fixed("47252.641439061")));
        assert_eq!(lwt.mark_px, Some(fixed("65536.16")));
        // "Best bid (if any)": a side left out is no side.
        let text = r#"{"channel_name":"lwt.BTC-PERPETUAL.raw","notification":{"a":[47260,1,0.9],"m":65536.16}}"#;
        let Body::Lwt = notification_of(text, &mut scratch) else {
            panic!()
        };
        let lwt = scratch.lwt;
        assert_eq!((lwt.bid, lwt.last_px), (None, None));
    }

    #[test]
    fn the_documented_book_example_decodes_with_tuple_trades() {
        let text = r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[[9120.5,15,"buy",156789.103,false],[9121,30,"buy",156789.123,false]],"bid_changes":[[9120.5,0,0],[9121,54,53]],"total_bid_amount":45,"total_ask_amount":30,"time":1683901254.785744}}"#;
        let mut scratch = Scratch::default();
        let body = notification_of(text, &mut scratch);
        assert_eq!(
            body,
            Body::Book {
                time_ns: 1_683_901_254_785_744_000
            }
        );
        assert_eq!(
            scratch.bids,
            [(fixed("9120.5"), fixed("0")), (fixed("9121"), fixed("54"))]
        );
        assert!(scratch.asks.is_empty());
        let trades: Vec<(Fixed, Fixed, bool, u64, bool)> = scratch
            .trades
            .iter()
            .map(|t| (t.price, t.amount, t.buy, t.time_ns, t.implied_taker))
            .collect();
        assert_eq!(
            trades,
            [
                (
                    fixed("9120.5"),
                    fixed("15"),
                    true,
                    156_789_103_000_000,
                    false
                ),
                (fixed("9121"), fixed("30"), true, 156_789_123_000_000, false),
            ]
        );
        assert_ne!(scratch.trades[0].key, scratch.trades[1].key);
    }

    #[test]
    fn the_documented_recent_trades_example_decodes_with_its_instrument() {
        let text = r#"{"channel_name":"recent_trades.BTCUSD.options","notification":[[400,1,"buy",1652187265.515,"BTC-11MAY22-32400-C",false]]}"#;
        let mut scratch = Scratch::default();
        assert_eq!(notification_of(text, &mut scratch), Body::Trades);
        let trade = scratch.trades[0];
        assert_eq!(
            (trade.price, trade.amount, trade.buy, trade.time_ns),
            (fixed("400"), fixed("1"), true, 1_652_187_265_515_000_000)
        );
        assert_eq!(
            &text.as_bytes()[trade.instrument.0..trade.instrument.1],
            b"BTC-11MAY22-32400-C"
        );
        // The same tuple hashes the same; another instrument does not.
        let again = text.replace("32400-C", "32400-P");
        let key = trade.key;
        notification_of(text, &mut scratch);
        assert_eq!(scratch.trades[0].key, key);
        notification_of(&again, &mut scratch);
        assert_ne!(scratch.trades[0].key, key);
    }

    #[test]
    fn the_documented_index_and_system_examples_decode() {
        let mut scratch = Scratch::default();
        let text = r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","price":47389.10833333334,"timestamp":946684800}}"#;
        assert_eq!(
            notification_of(text, &mut scratch),
            Body::Index(Index {
                price: fixed("47389.108333333"),
                time_ns: 946_684_800_000_000_000
            })
        );
        let text = r#"{"channel_name":"system","notification":{"event":"reconnect"}}"#;
        assert_eq!(
            notification_of(text, &mut scratch),
            Body::System {
                event: b"reconnect"
            }
        );
    }

    #[test]
    fn a_snapshot_key_is_read_when_present() {
        let mut scratch = Scratch::default();
        let text = r#"{"channel_name":"book.X.none.all.raw","snapshot":true,"notification":{"bid_changes":[[1,1,1]],"ask_changes":[],"trades":[],"time":1}}"#;
        assert!(matches!(
            decode(text.as_bytes(), &mut scratch),
            Ok(Message::Notification {
                snapshot: Some(true),
                ..
            })
        ));
        // After the notification too, and `false` is an update; no key says nothing.
        for (text, expected) in [
            (
                r#"{"channel_name":"book.X.none.all.raw","notification":{"bid_changes":[[1,1,1]],"time":1},"snapshot":true}"#,
                Some(true),
            ),
            (
                r#"{"channel_name":"book.X.none.all.raw","notification":{"time":1},"snapshot":false}"#,
                Some(false),
            ),
            (
                r#"{"channel_name":"book.X.none.all.raw","notification":{"time":1}}"#,
                None,
            ),
        ] {
            match decode(text.as_bytes(), &mut scratch) {
                Ok(Message::Notification {
                    snapshot,
                    body: Body::Book { .. },
                    ..
                }) => assert_eq!(snapshot, expected, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let text =
            r#"{"channel_name":"book.X.none.all.raw","notification":{"time":1},"snapshot":1}"#;
        assert!(decode(text.as_bytes(), &mut scratch).is_err());
    }

    #[test]
    fn a_channel_name_with_an_escape_is_refused_never_routed_raw() {
        let mut scratch = Scratch::default();
        for text in [
            r#"{"channel_name":"ticker.BTC\u002dPERPETUAL.100ms","notification":{"mark_price":1}}"#,
            r#"{"notification":{"mark_price":1},"channel_name":"ticker.BTC\u002dPERPETUAL.100ms"}"#,
            r#"{"channel_name":"ticker\u002eBTC-PERPETUAL.100ms","notification":{"mark_price":1}}"#,
            r#"{"channel_name":"book.X.none.all.raw","snapshot":true,"channel_name":"a\/b","notification":{}}"#,
        ] {
            assert_eq!(
                decode(text.as_bytes(), &mut scratch).map_err(|error| error.kind),
                Err(ErrorKind::EscapedChannel),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let mut scratch = Scratch::default();
        for text in [
            "",
            "{}",
            "[1]",
            r#"{"channel_name":"ticker.X.100ms"}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"best_bid_price":"1"}}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"best_bid_price":.4}}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"best_bid_price":2450.}}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"mark_price":1e10}}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"open_interest":01}}"#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"mark_price":1}} "x""#,
            r#"{"channel_name":"ticker.X.100ms","notification":{"mark_price":1}}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"bid_changes":[[1]]}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"bid_changes":[[1,1,1,1]]}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"trades":[[null,1,"buy",1,false]]}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"trades":[[1,1,"buy"]]}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"trades":[{"p":1,"a":1,"d":"buy","t":1}]}}"#,
            r#"{"channel_name":"book.X.1.1.raw","notification":{"trades":[[1,1,"buy",1,"no"]]}}"#,
            r#"{"channel_name":"recent_trades.X.single","notification":[[1,1,"up",1,"X",false]]}"#,
            r#"{"channel_name":"recent_trades.X.single","notification":[[1,1,"buy",1,false]]}"#,
            r#"{"channel_name":"recent_trades.X.single","notification":[[1,1,"buy",-1,"X",false]]}"#,
            r#"{"channel_name":"recent_trades.X.single","notification":[[1,1,"buy",1,"X",false,0]]}"#,
            r#"{"channel_name":"price_index.BTCUSD","notification":{}}"#,
            r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","price":1}}"#,
            r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","timestamp":1}}"#,
            r#"{"channel_name":"price_index.BTCUSD","notification":{"price":1,"timestamp":1}}"#,
            r#"{"channel_name":"system","notification":{}}"#,
            r#"{"id":-1,"result":1}"#,
            r#"{"id":01,"result":1}"#,
            r#"{"id":1,"result":[]}x"#,
        ] {
            assert!(decode(text.as_bytes(), &mut scratch).is_err(), "{text}");
        }
    }
}
