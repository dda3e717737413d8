//! Binance Spot on the Binance server: its messages in Spot's shapes, its snapshots without
//! times, its stream names. Written from Binance Spot's own pages ("WebSocket Streams for
//! Binance", `web-socket-streams.md`; "Order book", `rest-api.md`; binance-spot-api-docs commit
//! a5e0bc3, 2026-07-21), never from tickwire's decoder.
//!
//! [`SpotSource`] wraps any [`Source`] (the synthetic market, a capture) and writes each message
//! with the fields the documentation lists for its stream, in the documented order:
//!
//! - `<symbol>@bookTicker`: `u`, `s`, `b`, `B`, `a`, `A` ("Individual Symbol Book Ticker
//!   Streams": no event type, event time or transaction time);
//! - `<symbol>@trade`: `e`, `E`, `s`, `t`, `p`, `q`, `T`, `m`, `M` ("Trade Streams");
//! - `<symbol>@aggTrade`: `e`, `E`, `s`, `a`, `p`, `q`, `f`, `l`, `T`, `m`, `M` ("Aggregate Trade
//!   Streams");
//! - `<symbol>@depth` and `@depth@100ms`: `e`, `E`, `s`, `U`, `u`, `b`, `a` ("Diff. Depth
//!   Stream": no `T`, no `pu`; a diff's `U` is the previous `u` + 1);
//!
//! and each snapshot as `GET /api/v3/depth` answers: `lastUpdateId`, `bids`, `asks`. The book
//! behind the snapshots is the wrapped source's, so a snapshot is consistent with the diffs sent.
//! Messages of other streams (USD-M's `markPrice`) are not Spot's and are dropped.

use crate::source::{SimMessage, Source};
use serde_json::{Map, Value};

/// `GET /api/v3/depth`'s default `limit` ("Default: 100; Maximum: 5000").
pub const DEPTH_LIMIT_DEFAULT: usize = 100;
/// The most levels per side `GET /api/v3/depth` returns; a larger `limit` gets this many.
pub const DEPTH_LIMIT_MAX: usize = 5000;

/// The channels a Spot stream name may have after `<symbol>@`, from "Detailed Stream
/// information": those the simulator serves, and the documented ones it does not (subscribing
/// to them is accepted; no message comes).
fn is_spot_channel(channel: &str) -> bool {
    const SERVED: [&str; 5] = ["bookTicker", "trade", "aggTrade", "depth", "depth@100ms"];
    const OTHERS: [&str; 8] = [
        "referencePrice",
        "blockTrade",
        "miniTicker",
        "ticker",
        "avgPrice",
        "ticker_1h",
        "ticker_4h",
        "ticker_1d",
    ];
    if SERVED.contains(&channel) || OTHERS.contains(&channel) {
        return true;
    }
    let (levels, speed) = channel.split_once('@').unwrap_or((channel, ""));
    if matches!(levels, "depth5" | "depth10" | "depth20") && matches!(speed, "" | "100ms") {
        return true;
    }
    // `kline_<interval>`, optionally `@+08:00` ("Kline/Candlestick Streams").
    const INTERVALS: [&str; 16] = [
        "1s", "1m", "3m", "5m", "15m", "30m", "1h", "2h", "4h", "6h", "8h", "12h", "1d", "3d",
        "1w", "1M",
    ];
    channel
        .strip_prefix("kline_")
        .map(|rest| rest.strip_suffix("@+08:00").unwrap_or(rest))
        .is_some_and(|interval| INTERVALS.contains(&interval))
}

/// Whether `name` is a Spot stream name: `<symbol>@<channel>`, the symbol lowercase ("All
/// symbols for streams are lowercase").
pub fn is_spot_stream(name: &str) -> bool {
    let Some((symbol, channel)) = name.split_once('@') else {
        return false;
    };
    !symbol.is_empty()
        && symbol
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit())
        && is_spot_channel(channel)
}

/// The documented fields of each stream's payload, in order; `None` for a stream Spot has not.
fn spot_fields(stream: &str) -> Option<&'static [&'static str]> {
    let channel = stream.split_once('@')?.1;
    Some(match channel {
        "bookTicker" => &["u", "s", "b", "B", "a", "A"],
        "trade" => &["e", "E", "s", "t", "p", "q", "T", "m", "M"],
        "aggTrade" => &["e", "E", "s", "a", "p", "q", "f", "l", "T", "m", "M"],
        "depth" | "depth@100ms" => &["e", "E", "s", "U", "u", "b", "a"],
        _ => return None,
    })
}

/// `data` rewritten with `fields`, in that order; `M` ("Ignore") is `true` where the source has
/// none. `None` when `data` is not a JSON object.
fn spot_payload(data: &[u8], fields: &[&str]) -> Option<String> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(data) else {
        return None;
    };
    let mut out = String::from("{");
    for field in fields {
        let value = match object.get(*field) {
            Some(value) => value.clone(),
            None if *field == "M" => Value::Bool(true),
            None => continue,
        };
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String((*field).to_owned()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    Some(out)
}

/// A snapshot body with `lastUpdateId`, `bids` and `asks` only, in that order.
pub(crate) fn spot_snapshot(body: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let get = |key: &str, object: &Map<String, Value>| object.get(key).cloned();
    let text = format!(
        "{{\"lastUpdateId\":{},\"bids\":{},\"asks\":{}}}",
        get("lastUpdateId", &object)?,
        get("bids", &object)?,
        get("asks", &object)?
    );
    Some(text.into_bytes())
}

/// Any source, its messages and snapshots in Binance Spot's shapes (see the module docs).
pub struct SpotSource {
    inner: Box<dyn Source>,
}

impl SpotSource {
    pub fn new(inner: Box<dyn Source>) -> SpotSource {
        SpotSource { inner }
    }
}

impl Source for SpotSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        loop {
            let message = self.inner.next_message()?;
            let Some(fields) = spot_fields(&message.stream) else {
                continue;
            };
            let Some(data) = spot_payload(message.data(), fields) else {
                continue;
            };
            let stream = Value::String(message.stream.clone()).to_string();
            let head = format!("{{\"stream\":{stream},\"data\":");
            let mut combined = head.clone().into_bytes();
            combined.extend_from_slice(data.as_bytes());
            combined.push(b'}');
            return Some(SimMessage {
                data: head.len()..head.len() + data.len(),
                combined,
                ..message
            });
        }
    }

    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>> {
        spot_snapshot(&self.inner.depth_snapshot(symbol, limit)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::VecSource;

    fn message(stream: &str, data: &str) -> SimMessage {
        let combined = format!("{{\"stream\":\"{stream}\",\"data\":{data}}}");
        let start = combined.len() - data.len() - 1;
        SimMessage {
            stream: stream.to_owned(),
            data: start..start + data.len(),
            combined: combined.into_bytes(),
            offset_ns: 0,
            stamp_key: None,
        }
    }

    #[test]
    fn messages_take_the_documented_spot_shapes() {
        let mut source = SpotSource::new(Box::new(VecSource::new(vec![
            message(
                "btcusdt@bookTicker",
                r#"{"e":"bookTicker","u":5,"s":"BTCUSDT","b":"1.0","B":"2","a":"1.1","A":"3","T":7,"E":8}"#,
            ),
            message("btcusdt@markPrice", r#"{"e":"markPriceUpdate","E":1}"#),
            message(
                "btcusdt@depth@100ms",
                r#"{"e":"depthUpdate","E":1,"T":2,"s":"BTCUSDT","U":3,"u":4,"pu":2,"b":[["1","2"]],"a":[]}"#,
            ),
            message(
                "btcusdt@trade",
                r#"{"e":"trade","E":1,"T":2,"s":"BTCUSDT","t":9,"p":"1","q":"2","X":"MARKET","m":false}"#,
            ),
        ])));
        let ticker = source.next_message().expect("the ticker");
        assert_eq!(
            ticker.data(),
            br#"{"u":5,"s":"BTCUSDT","b":"1.0","B":"2","a":"1.1","A":"3"}"#
        );
        assert!(ticker
            .combined
            .starts_with(br#"{"stream":"btcusdt@bookTicker","data":{"u""#));
        let depth = source
            .next_message()
            .expect("the diff (markPrice is not Spot's)");
        assert_eq!(
            depth.data(),
            br#"{"e":"depthUpdate","E":1,"s":"BTCUSDT","U":3,"u":4,"b":[["1","2"]],"a":[]}"#
        );
        let trade = source.next_message().expect("the trade");
        assert_eq!(
            trade.data(),
            br#"{"e":"trade","E":1,"s":"BTCUSDT","t":9,"p":"1","q":"2","T":2,"m":false,"M":true}"#
        );
        assert!(source.next_message().is_none());
    }

    #[test]
    fn spot_stream_names() {
        for valid in [
            "btcusdt@bookTicker",
            "btcusdt@depth@100ms",
            "bnbbtc@depth20@100ms",
            "btcusdt@kline_1m",
            "btcusdt@kline_1d@+08:00",
        ] {
            assert!(is_spot_stream(valid), "{valid}");
        }
        for invalid in [
            "BTCUSDT@bookTicker",
            "btcusdt@depth@0ms",
            "btcusdt@markPrice",
            "btcusdt",
            "@trade",
            "btcusdt@depth5@250ms",
        ] {
            assert!(!is_spot_stream(invalid), "{invalid}");
        }
    }

    #[test]
    fn snapshots_have_no_times() {
        let body = spot_snapshot(br#"{"lastUpdateId":9,"E":1,"T":2,"bids":[["1","2"]],"asks":[]}"#);
        assert_eq!(
            body.as_deref(),
            Some(&br#"{"lastUpdateId":9,"bids":[["1","2"]],"asks":[]}"#[..])
        );
    }
}
