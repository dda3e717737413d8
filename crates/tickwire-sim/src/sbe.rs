//! Binance Spot SBE market data streams on the Binance server ("SBE Market Data Streams",
//! `sbe-market-data-streams.md`, schema `stream_1_0.xml`): the same sources as the Spot JSON
//! server, each message converted to one SBE message made with the official SBE tool's generated
//! encoder (`binance-sbe-official`), never with hand-written bytes.
//!
//! [`SbeSource`] wraps any [`Source`] and converts:
//!
//! - `<symbol>@bookTicker` to `<symbol>@bestBidAsk`, a `BestBidAskStreamEvent` (template 10001)
//!   with `bookUpdateId` = the ticker's `u`; the latency stamp key stays the same;
//! - `<symbol>@trade` to `<symbol>@trade`, a `TradesStreamEvent` (10000) with the one trade;
//! - `<symbol>@depth` and `@depth@100ms` to `<symbol>@depth`, a `DepthDiffStreamEvent` (10003)
//!   with `firstBookUpdateId`/`lastBookUpdateId` = the diff's `U`/`u`, each followed by a
//!   `<symbol>@depth20`, a `DepthSnapshotStreamEvent` (10002) of the top 20 levels a side of the
//!   wrapped source's book after that diff (the book `GET /api/v3/depth` answers from, so the
//!   REST snapshot, the diffs and the partial snapshots agree).
//!
//! Times are microseconds (the JSON's milliseconds × 1000). Prices and quantities are mantissas
//! with per-message exponents: -2 for prices and -8 for quantities (BTCUSDT's), lower where a
//! value of the message has more decimals, so that no value is rounded. Other streams are not
//! served in SBE and are dropped. The REST snapshot is Spot's (`lastUpdateId`, `bids`, `asks`).

use crate::source::{SimMessage, Source};
use binance_sbe_official::encode;
use serde_json::Value;
use std::collections::VecDeque;

/// The price exponent of a message whose values have at most two decimals.
pub const PRICE_EXPONENT: i8 = -2;
/// The quantity exponent of a message whose values have at most eight decimals.
pub const QTY_EXPONENT: i8 = -8;
/// The levels a side of a `<symbol>@depth20` snapshot.
pub const PARTIAL_DEPTH_LEVELS: usize = 20;

/// Whether `name` is an SBE stream name the venue documents: `<symbol>@trade`,
/// `<symbol>@bestBidAsk`, `<symbol>@depth` or `<symbol>@depth20`, the symbol lower case.
pub fn is_sbe_stream(name: &str) -> bool {
    let Some((symbol, channel)) = name.split_once('@') else {
        return false;
    };
    !symbol.is_empty()
        && symbol
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit())
        && matches!(channel, "trade" | "bestBidAsk" | "depth" | "depth20")
}

/// Any source, its messages as SBE frames (see the module docs).
pub struct SbeSource {
    inner: Box<dyn Source>,
    /// The `@depth20` snapshot that follows a diff.
    pending: VecDeque<SimMessage>,
}

impl SbeSource {
    pub fn new(inner: Box<dyn Source>) -> SbeSource {
        SbeSource {
            inner,
            pending: VecDeque::new(),
        }
    }

    fn convert(&mut self, message: &SimMessage) -> Option<SimMessage> {
        let (symbol_lower, channel) = message.stream.split_once('@')?;
        let Ok(Value::Object(data)) = serde_json::from_slice::<Value>(message.data()) else {
            return None;
        };
        let symbol = match data.get("s") {
            Some(Value::String(symbol)) => symbol.clone(),
            _ => symbol_lower.to_ascii_uppercase(),
        };
        let int = |key: &str| data.get(key).and_then(Value::as_i64);
        let text = |key: &str| data.get(key).and_then(Value::as_str);
        let micros = |key: &str| int(key).map(|ms| ms.saturating_mul(1000));
        let frame = |stream: String, bytes: Vec<u8>| SimMessage {
            stream,
            data: 0..bytes.len(),
            combined: bytes,
            offset_ns: message.offset_ns,
            stamp_key: message.stamp_key,
        };
        match channel {
            "bookTicker" => {
                let (bid, bid_qty) = (text("b")?, text("B")?);
                let (ask, ask_qty) = (text("a")?, text("A")?);
                let price_exponent = exponent(PRICE_EXPONENT, [bid, ask]);
                let qty_exponent = exponent(QTY_EXPONENT, [bid_qty, ask_qty]);
                let bytes = encode::best_bid_ask(&encode::BestBidAsk {
                    event_time_us: micros("E").or_else(|| micros("T")).unwrap_or_else(now_us),
                    book_update_id: int("u")?,
                    price_exponent,
                    qty_exponent,
                    bid_price: mantissa(bid, price_exponent)?,
                    bid_qty: mantissa(bid_qty, qty_exponent)?,
                    ask_price: mantissa(ask, price_exponent)?,
                    ask_qty: mantissa(ask_qty, qty_exponent)?,
                    symbol: &symbol,
                });
                Some(frame(format!("{symbol_lower}@bestBidAsk"), bytes))
            }
            "trade" => {
                let (price, qty) = (text("p")?, text("q")?);
                let price_exponent = exponent(PRICE_EXPONENT, [price]);
                let qty_exponent = exponent(QTY_EXPONENT, [qty]);
                let trade = encode::Trade {
                    id: int("t")?,
                    price: mantissa(price, price_exponent)?,
                    qty: mantissa(qty, qty_exponent)?,
                    is_buyer_maker: data.get("m").and_then(Value::as_bool)?,
                };
                let event_time_us = micros("E").or_else(|| micros("T")).unwrap_or_else(now_us);
                let bytes = encode::trades(&encode::Trades {
                    event_time_us,
                    transact_time_us: micros("T").unwrap_or(event_time_us),
                    price_exponent,
                    qty_exponent,
                    trades: &[trade],
                    symbol: &symbol,
                });
                Some(frame(format!("{symbol_lower}@trade"), bytes))
            }
            "depth" | "depth@100ms" => {
                let bids = levels(data.get("b")?)?;
                let asks = levels(data.get("a")?)?;
                let event_time_us = micros("E").unwrap_or_else(now_us);
                let (price_exponent, qty_exponent) = level_exponents(&bids, &asks);
                let bytes = encode::depth_diff(&encode::Depth {
                    event_time_us,
                    first_update_id: int("U")?,
                    last_update_id: int("u")?,
                    price_exponent,
                    qty_exponent,
                    bids: &mantissas(&bids, price_exponent, qty_exponent)?,
                    asks: &mantissas(&asks, price_exponent, qty_exponent)?,
                    symbol: &symbol,
                });
                if let Some(snapshot) = self.partial_snapshot(&symbol, event_time_us) {
                    self.pending.push_back(SimMessage {
                        stamp_key: None,
                        ..frame(format!("{symbol_lower}@depth20"), snapshot)
                    });
                }
                Some(SimMessage {
                    stamp_key: None,
                    ..frame(format!("{symbol_lower}@depth"), bytes)
                })
            }
            _ => None,
        }
    }

    /// A `DepthSnapshotStreamEvent` of the wrapped source's book now: top 20 a side.
    fn partial_snapshot(&self, symbol: &str, event_time_us: i64) -> Option<Vec<u8>> {
        let body = self.inner.depth_snapshot(symbol, PARTIAL_DEPTH_LEVELS)?;
        let Ok(Value::Object(book)) = serde_json::from_slice::<Value>(&body) else {
            return None;
        };
        let bids = levels(book.get("bids")?)?;
        let asks = levels(book.get("asks")?)?;
        let (price_exponent, qty_exponent) = level_exponents(&bids, &asks);
        Some(encode::depth_snapshot(&encode::Depth {
            event_time_us,
            first_update_id: 0,
            last_update_id: book.get("lastUpdateId")?.as_i64()?,
            price_exponent,
            qty_exponent,
            bids: &mantissas(&bids, price_exponent, qty_exponent)?,
            asks: &mantissas(&asks, price_exponent, qty_exponent)?,
            symbol,
        }))
    }
}

impl Source for SbeSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        if let Some(pending) = self.pending.pop_front() {
            return Some(pending);
        }
        loop {
            let message = self.inner.next_message()?;
            if let Some(converted) = self.convert(&message) {
                return Some(converted);
            }
        }
    }

    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>> {
        crate::spot::spot_snapshot(&self.inner.depth_snapshot(symbol, limit)?)
    }
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
        })
}

/// `[["price","qty"],..]` as string pairs.
fn levels(value: &Value) -> Option<Vec<(&str, &str)>> {
    value
        .as_array()?
        .iter()
        .map(|level| {
            let pair = level.as_array()?;
            Some((pair.first()?.as_str()?, pair.get(1)?.as_str()?))
        })
        .collect()
}

fn level_exponents(bids: &[(&str, &str)], asks: &[(&str, &str)]) -> (i8, i8) {
    let all = || bids.iter().chain(asks);
    (
        exponent(PRICE_EXPONENT, all().map(|level| level.0)),
        exponent(QTY_EXPONENT, all().map(|level| level.1)),
    )
}

fn mantissas(
    levels: &[(&str, &str)],
    price_exponent: i8,
    qty_exponent: i8,
) -> Option<Vec<(i64, i64)>> {
    levels
        .iter()
        .map(|(price, qty)| {
            Some((
                mantissa(price, price_exponent)?,
                mantissa(qty, qty_exponent)?,
            ))
        })
        .collect()
}

/// The significant decimals of a decimal string (trailing zeros do not count).
fn decimals(text: &str) -> usize {
    text.split_once('.')
        .map_or(0, |(_, fraction)| fraction.trim_end_matches('0').len())
}

/// `default`, or lower where one of `values` has more decimals than `-default`.
fn exponent<'a>(default: i8, values: impl IntoIterator<Item = &'a str>) -> i8 {
    let most = values.into_iter().map(decimals).max().unwrap_or(0);
    let most = i8::try_from(most).unwrap_or(i8::MAX);
    default.min(most.saturating_neg())
}

/// The mantissa of the decimal `text` at `exponent` (≤ 0): `"58710.2"` at -2 is 5871020.
/// `None` for a value that is not a plain decimal, has more decimals than the exponent takes,
/// or overflows.
pub fn mantissa(text: &str, exponent: i8) -> Option<i64> {
    let scale = usize::from(exponent.unsigned_abs());
    if exponent > 0 {
        return None;
    }
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let fraction = fraction.trim_end_matches('0');
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > scale
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut value: i64 = 0;
    let digits = whole
        .bytes()
        .chain(fraction.bytes())
        .chain(std::iter::repeat_n(b'0', scale - fraction.len()));
    for digit in digits {
        value = value
            .checked_mul(10)?
            .checked_add(i64::from(digit - b'0'))?;
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mantissas_are_exact() {
        assert_eq!(mantissa("58710.2", -2), Some(5_871_020));
        assert_eq!(mantissa("58710.20", -2), Some(5_871_020));
        assert_eq!(mantissa("0.014", -8), Some(1_400_000));
        assert_eq!(mantissa("3", -8), Some(300_000_000));
        assert_eq!(mantissa("0.001", -2), None);
        assert_eq!(mantissa("x", -2), None);
        assert_eq!(exponent(-2, ["1.5", "1.2345"]), -4);
        assert_eq!(exponent(-8, ["1.5"]), -8);
    }

    #[test]
    fn sbe_stream_names() {
        for valid in [
            "btcusdt@trade",
            "btcusdt@bestBidAsk",
            "btcusdt@depth",
            "btcusdt@depth20",
        ] {
            assert!(is_sbe_stream(valid), "{valid}");
        }
        for invalid in [
            "btcusdt@bookTicker",
            "btcusdt@aggTrade",
            "btcusdt@depth@100ms",
            "BTCUSDT@trade",
            "@trade",
        ] {
            assert!(!is_sbe_stream(invalid), "{invalid}");
        }
    }
}
