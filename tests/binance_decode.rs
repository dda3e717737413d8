//! The Binance USD-M decoder against a plain oracle: every message of the real capture is
//! decoded and each field compared with a `serde_json::Value` parse of the same line; then the
//! forms the capture does not hold (raw events, other key orders, whitespace, replies, errors)
//! and every malformed case; then proptests that no input makes it panic.

use crate::support::common;

use proptest::prelude::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use tickwire::fixed::{Fixed, ParseError};
use tickwire::venue::binance::decode::{
    decode, sample, BookTicker, DecodeErrorKind, Levels, Message, TradeKind, MAX_DEPTH,
};

/// Real messages from the capture, so the unit tests run without it.
const BOOK_TICKER: &str = r#"{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313}}"#;
const TRADE: &str = r#"{"stream":"btcusdt@trade","data":{"e":"trade","E":1723161256322,"T":1723161256322,"s":"BTCUSDT","t":5266583935,"p":"61800.30","q":"0.006","X":"MARKET","m":false}}"#;
const DEPTH: &str = r#"{"stream":"btcusdt@depth@0ms","data":{"e":"depthUpdate","E":1723161292602,"T":1723161292597,"s":"BTCUSDT","U":5123110716482,"u":5123110718158,"pu":5123110716158,"b":[["1000.00","606.675"],["61812.60","4.802"]],"a":[["61812.70","3.053"],["61821.00","0.757"],["61998.10","0.000"]]}}"#;
/// The raw `bookTicker` of Binance's "Individual Symbol Book Ticker Streams" page.
const RAW_BOOK_TICKER: &str = r#"{"e":"bookTicker","u":400900217,"E":1568014460893,"T":1568014460891,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000"}"#;
const AGG_TRADE: &str = r#"{"e":"aggTrade","E":123456789,"s":"BTCUSDT","a":5933014,"p":"0.001","q":"100","f":100,"l":105,"T":123456785,"m":true}"#;
const MARK_PRICE: &str = r#"{"stream":"btcusdt@markPrice@1s","data":{"e":"markPriceUpdate","E":1562305380000,"s":"BTCUSDT","p":"11794.15000000","i":"11784.62659091","P":"11784.25641265","r":"-0.00038167","T":1562306400000}}"#;

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).unwrap()
}

fn pairs(levels: Levels<'_>) -> Vec<(String, String)> {
    levels
        .iter()
        .map(|(price, qty)| (price.to_string(), qty.to_string()))
        .collect()
}

fn kind_of(input: &str) -> DecodeErrorKind {
    match decode(input.as_bytes()) {
        Ok(message) => panic!("{input:?} decoded as {message:?}"),
        Err(error) => error.kind,
    }
}

// ---- The real capture against serde_json ----

/// The oracle for decimals: the venue's string with trailing fractional zeros removed.
fn normalise(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

fn check_decimal(oracle: &Value, decoded: Fixed, what: &str) {
    let text = oracle
        .as_str()
        .unwrap_or_else(|| panic!("{what}: oracle {oracle}"));
    assert_eq!(Fixed::parse_str(text), Ok(decoded), "{what}: {text}");
    assert_eq!(decoded.to_string(), normalise(text), "{what}: {text}");
}

fn check_u64(oracle: &Value, decoded: u64, what: &str) {
    assert_eq!(oracle.as_u64(), Some(decoded), "{what}");
}

fn check_str(oracle: &Value, decoded: &[u8], what: &str) {
    assert_eq!(oracle.as_str().map(str::as_bytes), Some(decoded), "{what}");
}

fn check_levels(oracle: &Value, levels: Levels<'_>, what: &str) {
    let oracle = oracle
        .as_array()
        .unwrap_or_else(|| panic!("{what}: oracle"));
    assert_eq!(levels.len(), oracle.len(), "{what}: count");
    assert_eq!(levels.iter().len(), oracle.len(), "{what}: iterator length");
    let mut seen = 0;
    for ((price, qty), pair) in levels.iter().zip(oracle) {
        check_decimal(&pair[0], price, what);
        check_decimal(&pair[1], qty, what);
        assert_eq!(pair.as_array().map(Vec::len), Some(2), "{what}: pair");
        seen += 1;
    }
    assert_eq!(seen, oracle.len(), "{what}: iterated");
}

/// Checks every field of a market message against the oracle's `data` object; returns the
/// message type's name for counting.
fn check_market(data: &Value, stream: Option<&str>, message: &Message<'_>) -> &'static str {
    assert_eq!(message.stream(), stream.map(str::as_bytes), "stream");
    match message {
        Message::BookTicker(m) => {
            assert_eq!(data["e"], "bookTicker");
            check_str(&data["s"], m.symbol, "s");
            check_u64(&data["u"], m.update_id, "u");
            check_u64(&data["E"], m.event_time_ms, "E");
            check_u64(&data["T"], m.transaction_time_ms, "T");
            check_decimal(&data["b"], m.bid_px, "b");
            check_decimal(&data["B"], m.bid_qty, "B");
            check_decimal(&data["a"], m.ask_px, "a");
            check_decimal(&data["A"], m.ask_qty, "A");
            "bookTicker"
        }
        Message::Depth(m) => {
            assert_eq!(data["e"], "depthUpdate");
            check_str(&data["s"], m.symbol, "s");
            check_u64(&data["U"], m.first_update_id, "U");
            check_u64(&data["u"], m.final_update_id, "u");
            check_u64(&data["pu"], m.prev_final_update_id, "pu");
            check_u64(&data["E"], m.event_time_ms, "E");
            check_u64(&data["T"], m.transaction_time_ms, "T");
            check_levels(&data["b"], m.bids, "b");
            check_levels(&data["a"], m.asks, "a");
            "depthUpdate"
        }
        Message::Trade(m) => {
            assert_eq!(data["e"], "trade");
            assert_eq!(m.kind, TradeKind::Trade);
            check_str(&data["s"], m.symbol, "s");
            check_u64(&data["t"], m.trade_id, "t");
            assert_eq!((m.first_trade_id, m.last_trade_id), (0, 0));
            check_decimal(&data["p"], m.price, "p");
            check_decimal(&data["q"], m.qty, "q");
            assert_eq!(data["m"].as_bool(), Some(m.buyer_is_maker), "m");
            check_u64(&data["E"], m.event_time_ms, "E");
            check_u64(&data["T"], m.trade_time_ms, "T");
            "trade"
        }
        other => panic!("the capture holds no {other:?}"),
    }
}

#[test]
fn every_capture_message_matches_serde_json_field_by_field() {
    let Some(path) = common::shared_data("binance-futures/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(&path).unwrap();
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let (mut book_tickers, mut depth_updates, mut trades, mut snapshots, mut lines) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for (index, line) in reader.lines().enumerate() {
        let line = line.unwrap();
        let (_recv_ns, json) = line.split_once(' ').expect("<recv ns> <json>");
        let context = || format!("line {}: {}", index + 1, sample(json.as_bytes()));
        let message = decode(json.as_bytes()).unwrap_or_else(|e| panic!("{e}: {}", context()));
        let oracle: Value = serde_json::from_str(json).unwrap();
        lines += 1;
        if let Message::DepthSnapshot(snapshot) = message {
            // The capture's one REST snapshot, recorded between the stream messages.
            check_u64(
                &oracle["lastUpdateId"],
                snapshot.last_update_id,
                "lastUpdateId",
            );
            check_u64(&oracle["E"], snapshot.event_time_ms, "E");
            check_u64(&oracle["T"], snapshot.transaction_time_ms, "T");
            check_levels(&oracle["bids"], snapshot.bids, "bids");
            check_levels(&oracle["asks"], snapshot.asks, "asks");
            snapshots += 1;
            continue;
        }
        let stream = oracle["stream"].as_str();
        let counter = match check_market(&oracle["data"], stream, &message) {
            "bookTicker" => &mut book_tickers,
            "depthUpdate" => &mut depth_updates,
            _ => &mut trades,
        };
        *counter += 1;
    }
    assert_eq!(lines, 93_954);
    assert_eq!(
        (book_tickers, depth_updates, trades, snapshots),
        (66_089, 6_551, 21_313, 1)
    );
}

/// serde_json's `Value` keeps keys sorted, so writing a message back out puts `data` before
/// `stream` and `"e"` in the middle of `data`: every capture message through the general path.
#[test]
fn capture_messages_decode_the_same_in_sorted_key_order() {
    let Some(path) = common::shared_data("binance-futures/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(&path).unwrap();
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut checked = 0;
    // Every 7th message keeps the test fast in debug builds; each type still appears thousands
    // of times.
    for line in reader.lines().step_by(7) {
        let line = line.unwrap();
        let (_recv_ns, json) = line.split_once(' ').unwrap();
        let sorted = serde_json::to_string(&serde_json::from_str::<Value>(json).unwrap()).unwrap();
        assert_ne!(sorted, json);
        assert_eq!(
            decode(sorted.as_bytes()),
            decode(json.as_bytes()),
            "{}",
            sample(json.as_bytes())
        );
        checked += 1;
    }
    assert!(checked > 13_000);
}

// ---- Forms the capture does not hold ----

#[test]
fn raw_book_ticker_from_the_docs() {
    let Ok(Message::BookTicker(m)) = decode(RAW_BOOK_TICKER.as_bytes()) else {
        panic!("not a bookTicker");
    };
    assert_eq!(
        m,
        BookTicker {
            stream: None,
            symbol: b"BNBUSDT",
            update_id: 400_900_217,
            event_time_ms: 1_568_014_460_893,
            transaction_time_ms: 1_568_014_460_891,
            bid_px: fixed("25.3519"),
            bid_qty: fixed("31.21"),
            ask_px: fixed("25.3652"),
            ask_qty: fixed("40.66"),
        }
    );
}

#[test]
fn wrapped_messages_decode_with_their_stream() {
    let Ok(Message::BookTicker(m)) = decode(BOOK_TICKER.as_bytes()) else {
        panic!("not a bookTicker");
    };
    assert_eq!(m.stream, Some(&b"btcusdt@bookTicker"[..]));
    assert_eq!(m.symbol, b"BTCUSDT");
    assert_eq!((m.bid_px, m.ask_qty), (fixed("61800.2"), fixed("2.51")));

    let Ok(Message::Trade(t)) = decode(TRADE.as_bytes()) else {
        panic!("not a trade");
    };
    assert_eq!(t.stream, Some(&b"btcusdt@trade"[..]));
    assert_eq!((t.kind, t.trade_id), (TradeKind::Trade, 5_266_583_935));
    assert_eq!((t.price, t.qty), (fixed("61800.3"), fixed("0.006")));
    assert!(!t.buyer_is_maker);
    assert_eq!(
        (t.event_time_ms, t.trade_time_ms),
        (1723161256322, 1723161256322)
    );

    let Ok(Message::Depth(d)) = decode(DEPTH.as_bytes()) else {
        panic!("not a depthUpdate");
    };
    assert_eq!(d.stream, Some(&b"btcusdt@depth@0ms"[..]));
    assert_eq!(
        (d.first_update_id, d.final_update_id, d.prev_final_update_id),
        (5123110716482, 5123110718158, 5123110716158)
    );
    assert_eq!(
        pairs(d.bids),
        [("1000", "606.675"), ("61812.6", "4.802")].map(|(p, q)| (p.into(), q.into()))
    );
    assert_eq!(d.asks.len(), 3);
    assert_eq!(
        d.asks.iter().last(),
        Some((fixed("61998.1"), Fixed::ZERO)),
        "a zero quantity removes the level"
    );
    assert_eq!(d.asks.as_bytes().first(), Some(&b'['));
    assert_eq!(d.asks.as_bytes().last(), Some(&b']'));
}

#[test]
fn data_before_stream_and_raw_form_decode_the_same() {
    let data_first = r#"{"data":{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313},"stream":"btcusdt@bookTicker"}"#;
    assert_eq!(
        decode(data_first.as_bytes()),
        decode(BOOK_TICKER.as_bytes())
    );
    let raw = r#"{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313}"#;
    let (Ok(Message::BookTicker(raw)), Ok(Message::BookTicker(wrapped))) =
        (decode(raw.as_bytes()), decode(BOOK_TICKER.as_bytes()))
    else {
        panic!("not bookTickers");
    };
    assert_eq!(
        raw,
        BookTicker {
            stream: None,
            ..wrapped
        }
    );
}

#[test]
fn key_order_does_not_matter() {
    // `"e"` last, in the raw form and in the wrapper with `stream` first and last.
    let reordered = r#"{"E":1723161292602,"a":[["61812.70","3.053"],["61821.00","0.757"],["61998.10","0.000"]],"pu":5123110716158,"u":5123110718158,"b":[["1000.00","606.675"],["61812.60","4.802"]],"U":5123110716482,"s":"BTCUSDT","T":1723161292597,"e":"depthUpdate"}"#;
    let expected = decode(DEPTH.as_bytes()).unwrap();
    let Message::Depth(expected_raw) = expected else {
        panic!("not depth");
    };
    assert_eq!(
        decode(reordered.as_bytes()),
        Ok(Message::Depth(
            tickwire::venue::binance::decode::DepthUpdate {
                stream: None,
                ..expected_raw
            }
        ))
    );
    for wrapped in [
        format!(r#"{{"stream":"btcusdt@depth@0ms","data":{reordered}}}"#),
        format!(r#"{{"data":{reordered},"stream":"btcusdt@depth@0ms"}}"#),
    ] {
        assert_eq!(decode(wrapped.as_bytes()), Ok(expected), "{wrapped}");
    }
    // A raw message whose `"e"` is not its first key.
    let raw_trade = r#"{"s":"BTCUSDT","E":1,"T":2,"t":3,"p":"4","q":"5","m":true,"e":"trade"}"#;
    let Ok(Message::Trade(t)) = decode(raw_trade.as_bytes()) else {
        panic!("not a trade");
    };
    assert_eq!((t.event_time_ms, t.trade_time_ms, t.trade_id), (1, 2, 3));
    assert!(t.buyer_is_maker);
}

#[test]
fn whitespace_anywhere_between_tokens_is_accepted() {
    for message in [BOOK_TICKER, TRADE, DEPTH, MARK_PRICE, AGG_TRADE] {
        let value: Value = serde_json::from_str(message).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let spaced = format!(" \r\n\t{pretty}\n\t ");
        assert_eq!(
            decode(spaced.as_bytes()),
            decode(message.as_bytes()),
            "{spaced}"
        );
    }
    let tight_and_loose = " {  \"e\" :\t\"aggTrade\" , \"E\":123456789,\"s\" : \"BTCUSDT\",\"a\":5933014,\"p\":\"0.001\",\"q\":\"100\",\"f\":100,\"l\":105,\"T\":123456785,\"m\" : true\n}\r\n";
    assert_eq!(
        decode(tight_and_loose.as_bytes()),
        decode(AGG_TRADE.as_bytes())
    );
}

#[test]
fn unknown_fields_are_skipped_whatever_they_hold() {
    let extra = r#"{"e":"bookTicker","st":0,"ps":"BOTH","u":400900217,"x":{"a":[1,-2.5e+3,{"b":null,"c\"\u00e9":[[],{}]}],"d":"\u00e9\"\\\/\b\f\n\r\t"},"E":1568014460893,"T":1568014460891,"s":"BNBUSDT","y":[true,false,null,0,-0,1.0E-9],"b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000","z":{}}"#;
    assert_eq!(decode(extra.as_bytes()), decode(RAW_BOOK_TICKER.as_bytes()));
    // And at the wrapper's level.
    let data = &TRADE[TRADE.find(r#""data":"#).unwrap() + 7..TRADE.len() - 1];
    let wrapper = format!(r#"{{"stream":"btcusdt@trade","v":[{{"w":1}}],"data":{data},"x":null}}"#);
    assert_eq!(decode(wrapper.as_bytes()), decode(TRADE.as_bytes()));
}

#[test]
fn agg_trade_mark_price_and_partial_depth() {
    let Ok(Message::Trade(t)) = decode(AGG_TRADE.as_bytes()) else {
        panic!("not an aggTrade");
    };
    assert_eq!(t.kind, TradeKind::AggTrade);
    assert_eq!(
        (t.trade_id, t.first_trade_id, t.last_trade_id),
        (5_933_014, 100, 105)
    );
    assert_eq!((t.price, t.qty), (fixed("0.001"), fixed("100")));
    assert_eq!(
        (t.event_time_ms, t.trade_time_ms),
        (123_456_789, 123_456_785)
    );
    assert!(t.buyer_is_maker);

    let Ok(Message::MarkPrice(m)) = decode(MARK_PRICE.as_bytes()) else {
        panic!("not a markPriceUpdate");
    };
    assert_eq!(m.stream, Some(&b"btcusdt@markPrice@1s"[..]));
    assert_eq!(m.mark_price, fixed("11794.15"));
    assert_eq!(m.index_price, fixed("11784.62659091"));
    assert_eq!(m.estimated_settle_price, fixed("11784.25641265"));
    assert_eq!(m.funding_rate, Some(fixed("-0.00038167")));
    assert_eq!(
        (m.event_time_ms, m.next_funding_time_ms),
        (1562305380000, 1562306400000)
    );
    // A delivery contract has no funding rate.
    let delivery = r#"{"e":"markPriceUpdate","E":1,"s":"BTCUSDT_240927","p":"1","i":"2","P":"3","r":"","T":0}"#;
    let Ok(Message::MarkPrice(m)) = decode(delivery.as_bytes()) else {
        panic!("not a markPriceUpdate");
    };
    assert_eq!((m.funding_rate, m.next_funding_time_ms), (None, 0));

    let partial = r#"{"stream":"btcusdt@depth5@100ms","data":{"e":"depthUpdate","E":1,"T":2,"s":"BTCUSDT","U":3,"u":4,"pu":2,"b":[],"a":[[ "1.5" , "2" ]]}}"#;
    let Ok(Message::Depth(d)) = decode(partial.as_bytes()) else {
        panic!("not a depthUpdate");
    };
    assert!(d.bids.is_empty());
    assert_eq!(d.bids.iter().next(), None);
    assert_eq!(pairs(d.asks), [("1.5".to_owned(), "2".to_owned())]);
}

/// The fields the USD-M change log added to the streams tickwire reads since 2024, in the places
/// the venue writes them and elsewhere: each message decodes as before, the new fields skipped.
/// - `nq` in `@aggTrade` (2025-12-29, effective 2025-12-31: the quantity without RPI orders);
/// - `ap` in `@markPrice` (2026-03-16: the mark price moving average);
/// - `st` and `ps` in `@bookTicker`, `@depth` and `@aggTrade` (the COIN-M/USD-M integration,
///   2026-06-10, effective 2026-06-30).
#[test]
fn fields_added_since_2024_are_read_past() {
    let book_ticker = r#"{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":5123107839020,"s":"BTCUSDT","ps":"BTCUSDT","st":1,"b":"61800.20","B":"2.507","a":"61800.30","A":"2.510","T":1723161256313,"E":1723161256313}}"#;
    let depth = r#"{"stream":"btcusdt@depth@0ms","data":{"e":"depthUpdate","E":1723161292602,"T":1723161292597,"s":"BTCUSDT","ps":"BTCUSDT","U":5123110716482,"u":5123110718158,"pu":5123110716158,"b":[["61812.60","4.802"]],"a":[["61812.70","3.053"]],"st":1}}"#;
    for text in [book_ticker, depth] {
        let wrapper: Value = serde_json::from_str(text).unwrap();
        let message = decode(text.as_bytes()).unwrap_or_else(|error| panic!("{text}: {error}"));
        check_market(&wrapper["data"], wrapper["stream"].as_str(), &message);
    }
    let agg = r#"{"e":"aggTrade","E":123456789,"s":"BTCUSDT","a":5933014,"p":"0.001","q":"100","nq":"95","f":100,"l":105,"T":123456785,"m":true,"st":1,"ps":"BTCUSDT"}"#;
    let Ok(Message::Trade(t)) = decode(agg.as_bytes()) else {
        panic!("not an aggTrade");
    };
    assert_eq!(t.kind, TradeKind::AggTrade);
    assert_eq!(
        (t.trade_id, t.price, t.qty),
        (5_933_014, fixed("0.001"), fixed("100"))
    );
    assert_eq!((t.first_trade_id, t.last_trade_id), (100, 105));
    let mark = r#"{"e":"markPriceUpdate","E":1562305380000,"s":"BTCUSDT","p":"11794.15000000","ap":"11794.10000000","i":"11784.62659091","P":"11784.25641265","r":"-0.00038167","T":1562306400000}"#;
    let Ok(Message::MarkPrice(m)) = decode(mark.as_bytes()) else {
        panic!("not a markPriceUpdate");
    };
    assert_eq!(m.mark_price, fixed("11794.15"));
    assert_eq!(m.index_price, fixed("11784.62659091"));
}

#[test]
fn replies_to_requests() {
    for (input, id) in [
        (r#"{"result":null,"id":1}"#, Some(1)),
        (r#"{"id":7,"result":null}"#, Some(7)),
        (r#"{"result":null,"id":null}"#, None),
        (r#"{"result":null}"#, None),
    ] {
        assert_eq!(decode(input.as_bytes()), Ok(Message::Ack { id }), "{input}");
    }
    assert_eq!(
        decode(br#"{"result":["btcusdt@aggTrade","btcusdt@depth@100ms"],"id":3}"#),
        Ok(Message::Subscriptions {
            id: Some(3),
            streams: br#"["btcusdt@aggTrade","btcusdt@depth@100ms"]"#,
            count: 2,
        })
    );
    assert_eq!(
        decode(br#"{"result":[ ],"id":3}"#),
        Ok(Message::Subscriptions {
            id: Some(3),
            streams: b"[ ]",
            count: 0,
        })
    );
    assert_eq!(
        decode(br#"{"result":true,"id":5}"#),
        Ok(Message::Reply {
            id: Some(5),
            result: b"true",
        })
    );
    assert_eq!(
        decode(br#"{"result":[1,"a"],"id":5}"#),
        Ok(Message::Reply {
            id: Some(5),
            result: br#"[1,"a"]"#,
        })
    );
}

#[test]
fn error_replies_in_both_forms() {
    assert_eq!(
        decode(br#"{"error":{"code":2,"msg":"Invalid request"},"id":1}"#),
        Ok(Message::ErrorReply {
            id: Some(1),
            code: 2,
            msg: b"Invalid request",
        })
    );
    assert_eq!(
        decode(br#"{"code":-1121,"msg":"Invalid symbol."}"#),
        Ok(Message::ErrorReply {
            id: None,
            code: -1121,
            msg: b"Invalid symbol.",
        })
    );
    // `msg` comes back raw, escapes and all.
    assert_eq!(
        decode(br#"{"id":null,"error":{"msg":"bad \"x\"","code":3}}"#),
        Ok(Message::ErrorReply {
            id: None,
            code: 3,
            msg: br#"bad \"x\""#,
        })
    );
}

#[test]
fn unknown_event_types_are_reported_not_refused() {
    assert_eq!(
        decode(br#"{"e":"kline","E":1,"k":{"t":1,"x":false}}"#),
        Ok(Message::Unknown {
            stream: None,
            event_type: b"kline",
        })
    );
    assert_eq!(
        decode(br#"{"stream":"btcusdt@kline_1m","data":{"E":1,"e":"kline","k":{}}}"#),
        Ok(Message::Unknown {
            stream: Some(b"btcusdt@kline_1m"),
            event_type: b"kline",
        })
    );
    // An unknown event is still checked as JSON to its end.
    assert_eq!(
        kind_of(r#"{"e":"kline","k":{"t":1,}}"#),
        DecodeErrorKind::UnexpectedByte(b'}')
    );
}

#[test]
fn depth_snapshot_body() {
    let Ok(Message::DepthSnapshot(s)) = decode(
        br#"{"lastUpdateId":1027024,"E":1589436922972,"T":1589436922959,"bids":[["4.00000000","431.00000000"]],"asks":[["4.00000200","12.00000000"],["5","1"]]}"#,
    ) else {
        panic!("not a snapshot");
    };
    assert_eq!(
        (s.last_update_id, s.event_time_ms, s.transaction_time_ms),
        (1027024, 1589436922972, 1589436922959)
    );
    assert_eq!(pairs(s.bids), [("4".to_owned(), "431".to_owned())]);
    assert_eq!(s.asks.len(), 2);
}

#[test]
fn each_malformed_case_has_its_own_error_kind() {
    use DecodeErrorKind::*;
    let deep = format!(
        r#"{{"e":"trade","x":{}{}}}"#,
        "[".repeat(MAX_DEPTH as usize + 1),
        "]".repeat(MAX_DEPTH as usize + 1)
    );
    let wrong_stream = TRADE.replace("btcusdt@trade", "btcusdt@bookTicker");
    let cases: Vec<(&str, DecodeErrorKind)> = vec![
        ("", Truncated),
        ("   ", Truncated),
        (&BOOK_TICKER[..BOOK_TICKER.len() - 1], Truncated),
        (&TRADE[..100], Truncated),
        ("[1]", UnexpectedByte(b'[')),
        (r#"{"e":"trade",}"#, UnexpectedByte(b'}')),
        (r#"{"e":"trade" "E":1}"#, UnexpectedByte(b'"')),
        (r#"{"e" "trade"}"#, UnexpectedByte(b'"')),
        (r#"{"result":nul,"id":1}"#, UnexpectedByte(b',')),
        (r#"{"result":null,"id":1}x"#, TrailingBytes),
        (r#"{"result":null,"id":1}{}"#, TrailingBytes),
        ("{\"e\":\"kline\",\"x\":\"a\u{1}b\"}", InvalidString),
        (r#"{"e":"kline","x":"\q"}"#, InvalidString),
        (r#"{"e":"kline","x":"\u12g4"}"#, InvalidString),
        (
            r#"{"e":"bookTicker","s":"BTC\u0055SDT"}"#,
            EscapedString("s"),
        ),
        (r#"{"\u0065":"trade"}"#, EscapedString("key")),
        (r#"{"e":"kline","x":1e}"#, InvalidNumber),
        (r#"{"e":"kline","x":1.}"#, InvalidNumber),
        (r#"{"e":"kline","x":-}"#, InvalidNumber),
        (r#"{"e":"trade","E":1.5}"#, InvalidInteger("E")),
        (r#"{"e":"trade","E":-1}"#, InvalidInteger("E")),
        (r#"{"e":"trade","E":012}"#, InvalidInteger("E")),
        (r#"{"e":"trade","E":1e3}"#, InvalidInteger("E")),
        (
            r#"{"e":"trade","t":18446744073709551616}"#,
            NumberOverflow("t"),
        ),
        (r#"{"e":"trade","E":"1"}"#, WrongType("E")),
        (r#"{"e":"trade","p":61800.3}"#, WrongType("p")),
        (r#"{"e":"trade","m":"false"}"#, WrongType("m")),
        (r#"{"e":5}"#, WrongType("e")),
        (r#"{"stream":"btcusdt@trade","data":[]}"#, WrongType("data")),
        (r#"{"e":"depthUpdate","b":{}}"#, WrongType("b")),
        (
            r#"{"e":"depthUpdate","b":[["1","2","3"]]}"#,
            UnexpectedByte(b','),
        ),
        (
            r#"{"e":"trade","p":"6e4"}"#,
            BadDecimal(ParseError::InvalidByte {
                byte: b'e',
                offset: 1,
            }),
        ),
        (r#"{"e":"trade","q":""}"#, BadDecimal(ParseError::Empty)),
        (
            r#"{"e":"trade","q":"0.0000000001"}"#,
            BadDecimal(ParseError::TooPrecise),
        ),
        (
            r#"{"e":"trade","E":1,"T":1,"t":1,"p":"1","q":"1","m":true}"#,
            MissingField("s"),
        ),
        (r#"{"stream":"btcusdt@trade"}"#, MissingField("data")),
        (r#"{"u":1}"#, Unrecognised),
        (r#"{"s":"BTCUSDT","data":{"E":1}}"#, MissingField("e")),
        (r#"{"code":1}"#, MissingField("msg")),
        (r#"{"e":"trade","E":1,"E":1}"#, DuplicateField("E")),
        (r#"{"E":1,"e":"trade","e":"trade"}"#, DuplicateField("e")),
        (r#"{"result":null,"result":null}"#, DuplicateField("result")),
        (
            r#"{"stream":"btcusdt@trade","data":{"e":"bookTicker"}}"#,
            EventTypeMismatch,
        ),
        (
            r#"{"stream":"btcusdt@trade","data":{"E":1,"e":"aggTrade"}}"#,
            EventTypeMismatch,
        ),
        (&wrong_stream, EventTypeMismatch),
        (&deep, TooDeep),
        ("{}", Unrecognised),
        (r#"{"id":1}"#, Unrecognised),
    ];
    for (input, expected) in &cases {
        assert_eq!(kind_of(input), *expected, "{input:?}");
    }
    // The data-first form checks the stream after reading `data`.
    let data_first = r#"{"data":{"e":"trade","E":1,"T":1,"s":"X","t":1,"p":"1","q":"1","m":true},"stream":"x@aggTrade"}"#;
    assert_eq!(kind_of(data_first), EventTypeMismatch);
    // Nesting up to the limit is fine.
    let at_limit = format!(
        r#"{{"e":"kline","x":{}{}}}"#,
        "[".repeat(MAX_DEPTH as usize),
        "]".repeat(MAX_DEPTH as usize)
    );
    assert!(decode(at_limit.as_bytes()).is_ok());
}

#[test]
fn errors_say_where() {
    let error = decode(br#"{"e":"trade","E":1.5}"#).unwrap_err();
    assert_eq!(error.offset, 17, "the number's first byte");
    assert_eq!(
        error.to_string(),
        "`E` is not a plain integer (fraction, exponent, misplaced sign or leading zero) at byte 17"
    );
    let error = decode(br#"{"e":"trade","p":"1.x"}"#).unwrap_err();
    assert_eq!(error.offset, 18, "the decimal's first byte");
    assert_eq!(
        error.kind,
        DecodeErrorKind::BadDecimal(ParseError::InvalidByte {
            byte: b'x',
            offset: 2
        })
    );
    assert_eq!(decode(b"{} ").unwrap_err().offset, 2);
}

#[test]
fn huge_numbers_overflow_into_errors() {
    let with_update_id = |id: &str| RAW_BOOK_TICKER.replace("400900217", id);
    let max = with_update_id("18446744073709551615");
    let Ok(Message::BookTicker(m)) = decode(max.as_bytes()) else {
        panic!("u64::MAX is a valid update id");
    };
    assert_eq!(m.update_id, u64::MAX);
    for too_big in [
        "18446744073709551616",
        "99999999999999999999",
        &"9".repeat(400),
    ] {
        let error = decode(with_update_id(too_big).as_bytes()).unwrap_err();
        assert_eq!(
            error.kind,
            DecodeErrorKind::NumberOverflow("u"),
            "{too_big}"
        );
        assert_eq!(error.offset, RAW_BOOK_TICKER.find("400900217").unwrap());
    }
    assert_eq!(
        decode(br#"{"code":-9223372036854775808,"msg":""}"#),
        Ok(Message::ErrorReply {
            id: None,
            code: i64::MIN,
            msg: b"",
        })
    );
    for code in ["-9223372036854775809", "9223372036854775808"] {
        let input = format!(r#"{{"code":{code},"msg":""}}"#);
        assert_eq!(kind_of(&input), DecodeErrorKind::NumberOverflow("code"));
    }
    let price = RAW_BOOK_TICKER.replace("25.35190000", "99999999999.5");
    assert_eq!(
        kind_of(&price),
        DecodeErrorKind::BadDecimal(ParseError::Overflow)
    );
    // A skipped number may be any size: JSON does not bound it.
    let skipped =
        RAW_BOOK_TICKER.replace("\"s\"", &format!("\"x\":{}e999999,\"s\"", "9".repeat(400)));
    assert!(decode(skipped.as_bytes()).is_ok());
}

// ---- Nothing panics ----

/// Decodes and walks everything a message exposes, as a caller would.
fn exercise(bytes: &[u8]) {
    match decode(bytes) {
        Ok(Message::Depth(d)) => {
            assert_eq!(d.bids.iter().count(), d.bids.len());
            assert_eq!(d.asks.iter().count(), d.asks.len());
        }
        Ok(Message::DepthSnapshot(s)) => {
            assert_eq!(s.bids.iter().count(), s.bids.len());
            assert_eq!(s.asks.iter().count(), s.asks.len());
        }
        Ok(_) => {}
        Err(error) => {
            assert!(error.offset <= bytes.len(), "{error:?} past the end");
            let _ = (error.to_string(), sample(bytes).to_string());
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Bytes that matter to a JSON scanner, and any byte.
    let byte = prop_oneof![
        prop::sample::select(b"{}[]\",:\\ -.0123456789eEtfnu\x00\x1f\xff".to_vec()),
        any::<u8>(),
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1u8..).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        (any::<usize>(), byte).prop_map(|(at, byte)| Mutation::Insert(at, byte)),
        any::<usize>().prop_map(Mutation::Remove),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len().max(1);
    match *mutation {
        Mutation::Truncate(at) => bytes.truncate(at % len),
        Mutation::Flip(at, mask) => {
            if let Some(byte) = bytes.get_mut(at % len) {
                *byte ^= mask;
            }
        }
        Mutation::Insert(at, byte) => bytes.insert(at % (bytes.len() + 1), byte),
        Mutation::Remove(at) => {
            if !bytes.is_empty() {
                bytes.remove(at % len);
            }
        }
    }
}

const SEEDS: [&str; 9] = [
    BOOK_TICKER,
    TRADE,
    DEPTH,
    RAW_BOOK_TICKER,
    AGG_TRADE,
    MARK_PRICE,
    r#"{"result":["btcusdt@aggTrade"],"id":3}"#,
    r#"{"error":{"code":2,"msg":"Invalid request"},"id":1}"#,
    r#"{"lastUpdateId":1,"E":2,"T":3,"bids":[["1","2"]],"asks":[]}"#,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        exercise(&bytes);
    }

    #[test]
    fn mutated_real_messages_never_panic(
        seed in 0..SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        let mut bytes = SEEDS[seed].as_bytes().to_vec();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        exercise(&bytes);
    }

    /// Every strict prefix of a message is incomplete JSON: it must be refused, never read
    /// as a shorter message.
    #[test]
    fn truncated_messages_are_refused(seed in 0..SEEDS.len(), cut in any::<usize>()) {
        let message = SEEDS[seed].as_bytes();
        let prefix = &message[..cut % message.len()];
        prop_assert!(decode(prefix).is_err());
    }
}

/// A `depthUpdate` in the venue's layout whose levels hold `bids` and `asks` as written.
fn depth_message(bids: &[(String, String)], asks: &[(String, String)]) -> String {
    let side = |levels: &[(String, String)]| {
        let pairs: Vec<String> = levels
            .iter()
            .map(|(price, qty)| format!(r#"["{price}","{qty}"]"#))
            .collect();
        format!("[{}]", pairs.join(","))
    };
    format!(
        r#"{{"stream":"btcusdt@depth@0ms","data":{{"e":"depthUpdate","E":1,"T":2,"s":"BTCUSDT","U":3,"u":4,"pu":5,"b":{},"a":{}}}}}"#,
        side(bids),
        side(asks)
    )
}

/// Decimals near the venue's form, and some that are not (signs, long runs, stray bytes).
fn level_decimal() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[0-9]{1,7}\\.[0-9]{1,3}",
        1 => "[0-9]{1,3}",
        1 => "[-+]?[0-9]{0,9}\\.?[0-9]{0,10}",
        1 => "[0-9.e ]{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The venue's layout (read by the fast path, levels iterated without checks) and the
    /// same message with spaces (read by the general path) give the same levels, and each is
    /// what `Fixed::parse` makes of its string; a message with a bad decimal is refused.
    #[test]
    fn depth_levels_agree_with_fixed_parse_in_both_layouts(
        bids in prop::collection::vec((level_decimal(), level_decimal()), 0..6),
        asks in prop::collection::vec((level_decimal(), level_decimal()), 0..6),
    ) {
        let compact = depth_message(&bids, &asks);
        let spaced = compact.replace(',', " , ");
        let expected: Option<Vec<(Fixed, Fixed)>> = bids
            .iter()
            .chain(&asks)
            .map(|(price, qty)| Some((Fixed::parse_str(price).ok()?, Fixed::parse_str(qty).ok()?)))
            .collect();
        for layout in [&compact, &spaced] {
            match (decode(layout.as_bytes()), &expected) {
                (Ok(Message::Depth(depth)), Some(expected)) => {
                    let levels: Vec<_> = depth.bids.iter().chain(depth.asks.iter()).collect();
                    prop_assert_eq!(&levels, expected, "{}", layout);
                    prop_assert_eq!(depth.bids.len(), bids.len());
                    prop_assert_eq!(depth.asks.len(), asks.len());
                }
                (Err(error), None) => {
                    prop_assert!(matches!(error.kind, DecodeErrorKind::BadDecimal(_)), "{}", layout);
                }
                (decoded, expected) => {
                    prop_assert!(false, "{layout}: {decoded:?}, expected {expected:?}");
                }
            }
        }
    }
}

#[test]
fn the_seeds_themselves_decode() {
    for seed in SEEDS {
        assert!(decode(seed.as_bytes()).is_ok(), "{seed}");
    }
}
