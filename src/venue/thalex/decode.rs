//! Thalex messages, read straight from the payload into small typed values.
//!
//! **Routing without a parse.** A response starts `{"id":` and a notification
//! `{"channel_name":"`, so the first key tells what a message is and, for a notification, which
//! channel's decoder reads its `notification` value: the kind is the channel name's first
//! segment (`ticker.`, `book.`, ...), and the feed finds the instrument by looking the whole name
//! up in its route table. A server that orders keys differently costs one more pass: a
//! `notification` met before `channel_name` is skipped and read once the channel is known.
//!
//! Nothing here allocates per message: book levels and trades go into the caller's reusable
//! [`Scratch`] buffers, and names are slices of the payload.

use super::reader::{ReadError, Reader};
use crate::fixed::{Fixed, SCALE};

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
    #[error("a trade direction is neither `buy` nor `sell`")]
    BadDirection,
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
    #[inline]
    pub fn of(channel: &[u8]) -> Kind {
        let prefix = channel
            .iter()
            .position(|&byte| byte == b'.')
            .map_or(channel, |dot| &channel[..dot]);
        match prefix {
            b"ticker" => Kind::Ticker,
            b"lwt" => Kind::Lwt,
            b"book" => Kind::Book,
            b"recent_trades" => Kind::RecentTrades,
            b"price_index" => Kind::PriceIndex,
            b"system" => Kind::System,
            _ => Kind::Other,
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

/// A `price_index` notification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Index {
    pub price: Fixed,
    pub time_ns: u64,
}

/// A trade from a book's `trades` or from `recent_trades`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TradePrint {
    /// `recent_trades`' `trade_id` as a number (a hash of it when it is not decimal digits);
    /// 0 for a book's trades, which have none.
    pub id: u64,
    /// `true`: the buyer took liquidity.
    pub buy: bool,
    pub price: Fixed,
    pub amount: Fixed,
    pub time_ns: u64,
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
}

/// The keys of an object in the order a venue last sent them, as small ids. A decoder checks
/// the bytes at the cursor against the key expected at that place, one comparison of a
/// constant literal, and reads the key in full only when the venue changed its order.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyOrder {
    ids: [u8; KeyOrder::MAX],
    len: u8,
}

impl KeyOrder {
    const MAX: usize = 16;

    fn get(&self, index: usize) -> Option<u8> {
        (index < usize::from(self.len)).then(|| self.ids[index])
    }

    fn push(&mut self, id: u8) {
        if usize::from(self.len) < Self::MAX {
            self.ids[usize::from(self.len)] = id;
            self.len += 1;
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
    Ticker(Ticker),
    Lwt(Lwt),
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
        snapshot: bool,
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
    let mut snapshot = false;
    let mut body: Option<Body<'a>> = None;
    let mut deferred_body: Option<usize> = None;
    let mut id: Option<Option<u64>> = None;
    let mut outcome: Option<Outcome<'a>> = None;
    // The two shapes Thalex sends open with their routing key: read it without the key loop.
    if reader.literal(br#"{"channel_name":"#) {
        let name = reader.string()?;
        channel = Some(name);
        if reader.literal(br#","notification":"#) {
            body = Some(notification(&mut reader, Kind::of(name), scratch)?);
        }
    } else if reader.literal(br#"{"id":"#) {
        id = Some(id_value(&mut reader)?);
        // The protocol marker carries nothing: step over it whole when it comes next.
        reader.literal(br#","jsonrpc":"2.0""#);
    } else {
        reader.begin_object()?;
    }
    while let Some(key) = reader.next_key()? {
        match key {
            b"channel_name" => channel = Some(reader.string()?),
            b"notification" => match channel {
                Some(name) => body = Some(notification(&mut reader, Kind::of(name), scratch)?),
                None => {
                    deferred_body = Some(reader.pos());
                    reader.skip_value()?;
                }
            },
            b"snapshot" => snapshot = reader.boolean()?,
            b"id" => id = Some(id_value(&mut reader)?),
            b"result" => outcome = Some(result(&mut reader, scratch)?),
            b"error" => outcome = Some(error(&mut reader)?),
            _ => reader.skip_value()?,
        }
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
        Kind::Ticker => Body::Ticker(ticker(reader, &mut scratch.ticker_order)?),
        Kind::Lwt => Body::Lwt(lwt(reader)?),
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

/// A ticker object, read against the key order of the previous one (`order`, updated).
#[inline]
fn ticker(reader: &mut Reader<'_>, order: &mut KeyOrder) -> Result<Ticker, DecodeError> {
    let mut ticker = Ticker::default();
    let mut seen = KeyOrder::default();
    reader.begin_object()?;
    let mut index = 0;
    loop {
        let before = reader.pos();
        let expected = order
            .get(index)
            .filter(|_| index == 0 || reader.literal(b","));
        let id = match expected {
            Some(id) if ticker_key_at(reader, id) => id,
            _ => {
                *reader = Reader::at(reader.bytes(), before);
                match reader.next_key()? {
                    None => break,
                    Some(key) => TICKER_KEYS
                        .iter()
                        .position(|known| *known == key)
                        .map_or(TICKER_OTHER, |id| id as u8),
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
            6 => ticker.mark_ts_ns = reader.seconds_as_ns()?,
            7 => ticker.index_px = reader.number_or_null()?,
            _ => reader.skip_value()?,
        }
        seen.push(id);
        index += 1;
    }
    *order = seen;
    Ok(ticker)
}

/// `[price, amount, ...]` or `null`: the first two numbers.
fn pair(reader: &mut Reader<'_>) -> Result<Option<(Fixed, Fixed)>, DecodeError> {
    if reader.null() {
        return Ok(None);
    }
    level(reader).map(Some)
}

/// `[price, amount, outright amount]` (extra entries skipped): price and amount.
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
    while reader.next_item(false)? {
        reader.skip_value()?;
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
            b"trades" => trades(reader, &mut scratch.trades)?,
            b"time" => time_ns = reader.seconds_as_ns()?,
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

/// An array of trade objects, in the book's short form (`d`, `p`, `a`, `t`) or the long one
/// (`direction`, `price`, `amount`, `time`, `trade_id`).
fn trades(reader: &mut Reader<'_>, out: &mut Vec<TradePrint>) -> Result<(), DecodeError> {
    if reader.null() {
        return Ok(());
    }
    reader.begin_array()?;
    let mut first = true;
    while reader.next_item(first)? {
        first = false;
        let mut trade = TradePrint::default();
        reader.begin_object()?;
        while let Some(key) = reader.next_key()? {
            match key {
                b"d" | b"direction" => trade.buy = direction(reader.string()?)?,
                b"p" | b"price" => trade.price = reader.number()?,
                b"a" | b"amount" => trade.amount = reader.number()?,
                b"t" | b"time" => trade.time_ns = reader.seconds_as_ns()?,
                b"trade_id" => {
                    trade.id = if reader.peek() == Some(b'"') {
                        trade_id(reader.string()?)
                    } else {
                        reader.unsigned()?
                    }
                }
                _ => reader.skip_value()?,
            }
        }
        out.push(trade);
    }
    Ok(())
}

/// A trade id as a number: its value when it is decimal digits that fit, else a 64-bit FNV-1a
/// hash of its text (stable, so the same trade always gets the same id).
pub fn trade_id(text: &[u8]) -> u64 {
    let digits = !text.is_empty() && text.len() <= 19 && text.iter().all(u8::is_ascii_digit);
    if digits {
        return text
            .iter()
            .fold(0u64, |value, &digit| value * 10 + u64::from(digit - b'0'));
    }
    text.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn recent_trades(reader: &mut Reader<'_>, scratch: &mut Scratch) -> Result<(), DecodeError> {
    trades(reader, &mut scratch.trades)
}

fn index(reader: &mut Reader<'_>) -> Result<Index, DecodeError> {
    let mut index = Index::default();
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"price" => index.price = reader.number()?,
            b"time" => index.time_ns = reader.seconds_as_ns()?,
            _ => reader.skip_value()?,
        }
    }
    Ok(index)
}

fn system<'a>(reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let mut event: &[u8] = b"";
    if reader.peek() != Some(b'{') {
        reader.skip_value()?;
        return Ok(event);
    }
    reader.begin_object()?;
    while let Some(key) = reader.next_key()? {
        match key {
            b"event" if reader.peek() == Some(b'"') => event = reader.string()?,
            _ => reader.skip_value()?,
        }
    }
    Ok(event)
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
            body: Body::Ticker(ticker),
        } = message
        else {
            panic!("{message:?}");
        };
        assert_eq!(channel, b"ticker.BTC-PERPETUAL.100ms");
        assert!(!snapshot);
        assert_eq!(ticker.bid_px, Some(fixed("50000.5")));
        assert_eq!(ticker.ask_px, Some(fixed("50001")));
        assert_eq!(ticker.mark_px, Some(fixed("50000.6")));
        assert_eq!(ticker.bid_amount, None);
        assert_eq!(ticker.mark_ts_ns, 1_234_567_890_123_000_000);
    }

    #[test]
    fn a_ticker_whose_key_order_changes_still_decodes() {
        let orders = [
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4,"extra":[1,{"a":2}]}"#,
            r#"{"mark_timestamp":4,"best_ask_price":2,"extra":null,"best_bid_price":1,"mark_price":3}"#,
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
            r#"{ "best_bid_price" : 1 , "best_ask_price":2, "mark_price":3,"mark_timestamp":4 }"#,
            r#"{"best_bid_price":1,"best_ask_price":2,"mark_price":3,"mark_timestamp":4}"#,
        ];
        let mut scratch = Scratch::default();
        for body in orders.iter().chain(orders.iter()) {
            let text = format!(r#"{{"channel_name":"ticker.X.raw","notification":{body}}}"#);
            let Message::Notification {
                body: Body::Ticker(ticker),
                ..
            } = decode(text.as_bytes(), &mut scratch).unwrap()
            else {
                panic!("{text}")
            };
            assert_eq!(ticker.bid_px, Some(fixed("1")), "{text}");
            assert_eq!(ticker.ask_px, Some(fixed("2")), "{text}");
            assert_eq!(ticker.mark_px, Some(fixed("3")), "{text}");
            assert_eq!(ticker.mark_ts_ns, 4_000_000_000, "{text}");
        }
        let broken = r#"{"channel_name":"ticker.X.raw","notification":{"best_bid_price":1,"best_ask_price":}}"#;
        assert!(decode(broken.as_bytes(), &mut scratch).is_err());
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

    #[test]
    fn books_lwt_trades_index_and_system() {
        let mut scratch = Scratch::default();
        let text = r#"{"channel_name":"book.BTC-PERPETUAL.1.10.100ms","snapshot":true,"notification":{"bid_changes":[[50000,1.5,1.5],[49999.5,2,2]],"ask_changes":[[50000.5,0.001,0]],"trades":[{"d":"sell","p":50000,"a":0.1,"t":1700000000.5}],"time":1700000000.123456}}"#;
        let message = decode(text.as_bytes(), &mut scratch).unwrap();
        assert!(matches!(
            message,
            Message::Notification {
                snapshot: true,
                body: Body::Book {
                    time_ns: 1_700_000_000_123_456_000
                },
                ..
            }
        ));
        assert_eq!(
            scratch.bids,
            [
                (fixed("50000"), fixed("1.5")),
                (fixed("49999.5"), fixed("2"))
            ]
        );
        assert_eq!(scratch.asks, [(fixed("50000.5"), fixed("0.001"))]);
        assert_eq!(scratch.trades.len(), 1);
        assert!(!scratch.trades[0].buy);

        let text = r#"{"channel_name":"lwt.BTC-PERPETUAL.raw","notification":{"b":[50000,1,1],"a":null,"l":50000.5,"m":50000.25}}"#;
        let Message::Notification {
            body: Body::Lwt(lwt),
            ..
        } = decode(text.as_bytes(), &mut scratch).unwrap()
        else {
            panic!()
        };
        assert_eq!(lwt.bid, Some((fixed("50000"), fixed("1"))));
        assert_eq!(lwt.ask, None);
        assert_eq!(lwt.mark_px, Some(fixed("50000.25")));

        let text = r#"{"channel_name":"recent_trades.BTC-PERPETUAL.all","snapshot":true,"notification":[{"trade_id":"123456","instrument_name":"BTC-PERPETUAL","direction":"buy","price":50000.5,"amount":0.25,"time":1700000000.1,"trade_type":"normal"}]}"#;
        decode(text.as_bytes(), &mut scratch).unwrap();
        assert_eq!(scratch.trades[0].id, 123_456);
        assert!(scratch.trades[0].buy);

        let text = r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","price":50000.12,"time":1700000000}}"#;
        let Message::Notification {
            body: Body::Index(index),
            ..
        } = decode(text.as_bytes(), &mut scratch).unwrap()
        else {
            panic!()
        };
        assert_eq!(index.price, fixed("50000.12"));
        assert_eq!(index.time_ns, 1_700_000_000_000_000_000);

        let text = r#"{"channel_name":"system","notification":{"event":"reconnect"}}"#;
        assert!(matches!(
            decode(text.as_bytes(), &mut scratch).unwrap(),
            Message::Notification {
                body: Body::System {
                    event: b"reconnect"
                },
                ..
            }
        ));
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
            r#"{"channel_name":"book.X.1.1.raw","notification":{"bid_changes":[[1]]}}"#,
            r#"{"channel_name":"recent_trades.X.all","notification":[{"direction":"up"}]}"#,
            r#"{"id":-1,"result":1}"#,
        ] {
            assert!(decode(text.as_bytes(), &mut scratch).is_err(), "{text}");
        }
    }

    #[test]
    fn trade_ids_are_numbers_or_stable_hashes() {
        assert_eq!(trade_id(b"42"), 42);
        assert_eq!(trade_id(b"T-42"), trade_id(b"T-42"));
        assert_ne!(trade_id(b"T-42"), trade_id(b"T-43"));
    }
}
