//! The Binance Spot JSON decoder (`venue::binance_spot::decode`): every documented example of the
//! streams it reads, verbatim from `web-socket-streams.md` and `rest-api.md` (binance-spot-api-docs
//! commit a5e0bc3, 2026-07-21), checked field by field; the whole real capture against a
//! `serde_json` oracle; and bad input counted and skipped, never a panic.

use crate::support::common;

use proptest::prelude::*;
use serde_json::Value;
use std::io::BufRead;
use tickwire::fixed::Fixed;
use tickwire::venue::binance::decode::{DecodeErrorKind, TradeKind};
use tickwire::venue::binance_spot::decode::{decode, decode_general, Message};

fn px(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("test decimal")
}

/// The documentation's examples carry `// comments`, which JSON has not: each line's comment
/// (a `//` outside a string) is cut before decoding.
fn without_comments(example: &str) -> String {
    let mut out = String::new();
    for line in example.lines() {
        let mut in_string = false;
        let mut cut = line.len();
        let bytes = line.as_bytes();
        for (index, &byte) in bytes.iter().enumerate() {
            match byte {
                b'"' => in_string = !in_string,
                b'/' if !in_string && bytes.get(index + 1) == Some(&b'/') => {
                    cut = index;
                    break;
                }
                _ => {}
            }
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

const AGG_TRADE: &str = r#"{
    "e": "aggTrade",        // Event type
    "E": 1672515782136,     // Event time
    "s": "BNBBTC",          // Symbol
    "a": 12345,             // Aggregate trade ID
    "p": "0.001",           // Price
    "q": "100",             // Quantity
    "f": 100,               // First trade ID
    "l": 105,               // Last trade ID
    "T": 1672515782136,     // Trade time
    "m": true,              // Is the buyer the market maker?
    "M": true               // Ignore
}"#;

const TRADE: &str = r#"{
    "e": "trade",           // Event type
    "E": 1672515782136,     // Event time
    "s": "BNBBTC",          // Symbol
    "t": 12345,             // Trade ID
    "p": "0.001",           // Price
    "q": "100",             // Quantity
    "T": 1672515782136,     // Trade time
    "m": true,              // Is the buyer the market maker?
    "M": true               // Ignore
}"#;

const BOOK_TICKER: &str = r#"{
    "u": 400900217,         // order book updateId
    "s": "BNBUSDT",         // symbol
    "b": "25.35190000",     // best bid price
    "B": "31.21000000",     // best bid qty
    "a": "25.36520000",     // best ask price
    "A": "40.66000000"      // best ask qty
}"#;

const PARTIAL_DEPTH: &str = r#"{
    "lastUpdateId": 160,     // Last update ID
    "bids": [                // Bids to be updated
        [
            "0.0024",        // Price level to be updated
            "10"             // Quantity
        ]
    ],
    "asks": [                // Asks to be updated
        [
            "0.0026",        // Price level to be updated
            "100"            // Quantity
        ]
    ]
}"#;

const DIFF_DEPTH: &str = r#"{
    "e": "depthUpdate",     // Event type
    "E": 1672515782136,     // Event time
    "s": "BNBBTC",          // Symbol
    "U": 157,               // First update ID in event
    "u": 160,               // Final update ID in event
    "b": [                  // Bids to be updated
        [
            "0.0024",       // Price level to be updated
            "10"            // Quantity
        ]
    ],
    "a": [                  // Asks to be updated
        [
            "0.0026",       // Price level to be updated
            "100"           // Quantity
        ]
    ]
}"#;

const SERVER_SHUTDOWN: &str = r#"{
  "e": "serverShutdown", // Event type
  "E": 1770123456789     // Event time
}"#;

const SUBSCRIBE_RESPONSE: &str = r#"{
      "result": null,
      "id": 1
  }"#;

const LIST_SUBSCRIPTIONS_RESPONSE: &str = r#"{
      "result": ["btcusdt@aggTrade"],
      "id": 3
  }"#;

const GET_PROPERTY_RESPONSE: &str = r#"{
      "result": true, // Indicates that combined is set to true.
      "id": 2
  }"#;

/// `GET /api/v3/depth`'s documented response (`rest-api.md`, "Order book").
const REST_DEPTH: &str = r#"{
    "lastUpdateId": 1027024,
    "bids": [
        [
            "4.00000000",      // PRICE
            "431.00000000"     // QTY
        ]
    ],
    "asks": [["4.00000200", "12.00000000"]]
}"#;

/// The examples are the documentation's own text: checked against the pages when they are here.
#[test]
fn the_examples_are_verbatim_from_the_documentation() {
    let Some(streams) = common::shared_reference("binance-spot/web-socket-streams.md") else {
        return;
    };
    let Some(rest) = common::shared_reference("binance-spot/rest-api.md") else {
        return;
    };
    let streams = std::fs::read_to_string(streams).expect("readable");
    let rest = std::fs::read_to_string(rest).expect("readable");
    for example in [
        AGG_TRADE,
        TRADE,
        BOOK_TICKER,
        PARTIAL_DEPTH,
        DIFF_DEPTH,
        SERVER_SHUTDOWN,
        SUBSCRIBE_RESPONSE,
        LIST_SUBSCRIPTIONS_RESPONSE,
        GET_PROPERTY_RESPONSE,
    ] {
        assert!(streams.contains(example), "not in the page: {example}");
    }
    assert!(rest.contains(REST_DEPTH));
}

#[test]
fn documented_trades_decode_field_by_field() {
    let text = without_comments(AGG_TRADE);
    let Ok(Message::Trade(agg)) = decode(text.as_bytes()) else {
        panic!("an aggTrade");
    };
    assert_eq!(agg.kind, TradeKind::AggTrade);
    assert_eq!(agg.symbol, b"BNBBTC");
    assert_eq!(agg.event_time_ms, 1672515782136);
    assert_eq!(agg.trade_id, 12345);
    assert_eq!(agg.price, px("0.001"));
    assert_eq!(agg.qty, px("100"));
    assert_eq!((agg.first_trade_id, agg.last_trade_id), (100, 105));
    assert_eq!(agg.trade_time_ms, 1672515782136);
    assert!(agg.buyer_is_maker);
    assert_eq!(agg.stream, None);

    let text = without_comments(TRADE);
    let Ok(Message::Trade(trade)) = decode(text.as_bytes()) else {
        panic!("a trade");
    };
    assert_eq!(trade.kind, TradeKind::Trade);
    assert_eq!(trade.symbol, b"BNBBTC");
    assert_eq!(trade.trade_id, 12345);
    assert_eq!(trade.price, px("0.001"));
    assert_eq!(trade.qty, px("100"));
    assert_eq!(trade.event_time_ms, 1672515782136);
    assert_eq!(trade.trade_time_ms, 1672515782136);
    assert!(trade.buyer_is_maker);
}

#[test]
fn the_documented_book_ticker_has_no_times_and_decodes_raw_and_wrapped() {
    let text = without_comments(BOOK_TICKER);
    let Ok(Message::BookTicker(ticker)) = decode(text.as_bytes()) else {
        panic!("a bookTicker");
    };
    assert_eq!(ticker.update_id, 400900217);
    assert_eq!(ticker.symbol, b"BNBUSDT");
    assert_eq!(ticker.bid_px, px("25.3519"));
    assert_eq!(ticker.bid_qty, px("31.21"));
    assert_eq!(ticker.ask_px, px("25.3652"));
    assert_eq!(ticker.ask_qty, px("40.66"));
    // The combined stream's wrapper, `{"stream":"<streamName>","data":<rawPayload>}`.
    let wrapped = format!(r#"{{"stream":"bnbusdt@bookTicker","data":{text}}}"#);
    let Ok(Message::BookTicker(inner)) = decode(wrapped.as_bytes()) else {
        panic!("a wrapped bookTicker");
    };
    assert_eq!(inner.stream, Some(&b"bnbusdt@bookTicker"[..]));
    assert_eq!(
        tickwire::venue::binance_spot::decode::BookTicker {
            stream: None,
            ..inner
        },
        ticker
    );
}

#[test]
fn documented_depth_messages_decode_field_by_field() {
    let text = without_comments(DIFF_DEPTH);
    let Ok(Message::Depth(diff)) = decode(text.as_bytes()) else {
        panic!("a depthUpdate");
    };
    assert_eq!(diff.symbol, b"BNBBTC");
    assert_eq!(diff.event_time_ms, 1672515782136);
    assert_eq!((diff.first_update_id, diff.final_update_id), (157, 160));
    assert_eq!(
        diff.bids.iter().collect::<Vec<_>>(),
        [(px("0.0024"), px("10"))]
    );
    assert_eq!(
        diff.asks.iter().collect::<Vec<_>>(),
        [(px("0.0026"), px("100"))]
    );
    for stream in ["bnbbtc@depth", "bnbbtc@depth@100ms"] {
        let wrapped = format!(r#"{{"stream":"{stream}","data":{text}}}"#);
        let Ok(Message::Depth(inner)) = decode(wrapped.as_bytes()) else {
            panic!("a wrapped depthUpdate on {stream}");
        };
        assert_eq!(inner.stream, Some(stream.as_bytes()));
        assert_eq!(inner.final_update_id, 160);
    }

    let text = without_comments(PARTIAL_DEPTH);
    // Raw, a partial depth message is a snapshot's shape and names no symbol.
    let Ok(Message::DepthSnapshot(raw)) = decode(text.as_bytes()) else {
        panic!("a book");
    };
    assert_eq!(raw.last_update_id, 160);
    for stream in ["bnbbtc@depth5", "bnbbtc@depth10@100ms", "bnbbtc@depth20"] {
        let wrapped = format!(r#"{{"stream":"{stream}","data":{text}}}"#);
        let Ok(Message::PartialDepth(partial)) = decode(wrapped.as_bytes()) else {
            panic!("a partial depth on {stream}");
        };
        assert_eq!(partial.stream, stream.as_bytes());
        assert_eq!(partial.stream_symbol(), b"bnbbtc");
        assert_eq!(partial.last_update_id, 160);
        assert_eq!(
            partial.bids.iter().collect::<Vec<_>>(),
            [(px("0.0024"), px("10"))]
        );
        assert_eq!(
            partial.asks.iter().collect::<Vec<_>>(),
            [(px("0.0026"), px("100"))]
        );
    }

    let text = without_comments(REST_DEPTH);
    let Ok(Message::DepthSnapshot(snapshot)) = decode(text.as_bytes()) else {
        panic!("the REST body");
    };
    assert_eq!(snapshot.last_update_id, 1027024);
    assert_eq!(
        snapshot.bids.iter().collect::<Vec<_>>(),
        [(px("4"), px("431"))]
    );
    assert_eq!(
        snapshot.asks.iter().collect::<Vec<_>>(),
        [(px("4.000002"), px("12"))]
    );
}

#[test]
fn documented_replies_and_other_events() {
    let decoded = |text: &str| decode(without_comments(text).as_bytes()).map(|m| format!("{m:?}"));
    assert_eq!(
        decoded(SUBSCRIBE_RESPONSE),
        Ok(format!("{:?}", Message::Ack { id: Some(1) }))
    );
    let list = without_comments(LIST_SUBSCRIPTIONS_RESPONSE);
    let Ok(Message::Subscriptions { id, count, streams }) = decode(list.as_bytes()) else {
        panic!("the list");
    };
    assert_eq!((id, count), (Some(3), 1));
    assert_eq!(streams, br#"["btcusdt@aggTrade"]"#);
    let property = without_comments(GET_PROPERTY_RESPONSE);
    let Ok(Message::Reply { id, result }) = decode(property.as_bytes()) else {
        panic!("the property");
    };
    assert_eq!((id, result), (Some(2), &b"true"[..]));
    let shutdown = without_comments(SERVER_SHUTDOWN);
    let Ok(Message::Unknown { event_type, stream }) = decode(shutdown.as_bytes()) else {
        panic!("an event not read");
    };
    assert_eq!((event_type, stream), (&b"serverShutdown"[..], None));
    let wrapped = format!(r#"{{"stream":"!serverShutdown","data":{shutdown}}}"#);
    let Ok(Message::Unknown { event_type, stream }) = decode(wrapped.as_bytes()) else {
        panic!("a wrapped event not read");
    };
    assert_eq!(event_type, b"serverShutdown");
    assert_eq!(stream, Some(&b"!serverShutdown"[..]));
    // The documented error answers: top-level `code` and `msg`, `id` when it has one.
    let Ok(Message::ErrorReply { id, code, msg }) =
        decode(br#"{"code": 0, "msg": "Unknown property","id": 5}"#)
    else {
        panic!("an error answer");
    };
    assert_eq!((id, code, msg), (Some(5), 0, &b"Unknown property"[..]));
    let Ok(Message::ErrorReply { id, code, .. }) =
        decode(br#"{"code":3,"msg":"Invalid JSON: expected value at line 1 column 2"}"#)
    else {
        panic!("an error answer");
    };
    assert_eq!((id, code), (None, 3));
}

/// Every line of the real capture, against `serde_json`: every quote, trade and level equal,
/// and the general reader equal to the fast one.
#[test]
fn the_whole_capture_decodes_as_serde_json_reads_it() {
    let Some(path) = common::shared_data("binance-spot/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(path).expect("capture");
    let lines = std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines();
    let fixed = |value: &Value| px(value.as_str().expect("a decimal string"));
    let levels = |value: &Value| -> Vec<(Fixed, Fixed)> {
        value
            .as_array()
            .expect("levels")
            .iter()
            .map(|pair| (fixed(&pair[0]), fixed(&pair[1])))
            .collect()
    };
    let (mut tickers, mut trades, mut diffs, mut snapshots, mut level_count) = (0, 0, 0, 0, 0);
    for line in lines {
        let line = line.expect("readable");
        let (_, json) = line.split_once(' ').expect("<recv_ns> <json>");
        let message = decode(json.as_bytes()).expect("every capture line decodes");
        assert_eq!(Ok(message), decode_general(json.as_bytes()), "{json}");
        let oracle: Value = serde_json::from_str(json).expect("oracle");
        let data = oracle.get("data").unwrap_or(&oracle);
        match message {
            Message::BookTicker(ticker) => {
                tickers += 1;
                assert_eq!(ticker.stream, oracle["stream"].as_str().map(str::as_bytes));
                assert_eq!(Some(ticker.update_id), data["u"].as_u64());
                assert_eq!(Some(ticker.symbol), data["s"].as_str().map(str::as_bytes));
                assert_eq!(ticker.bid_px, fixed(&data["b"]));
                assert_eq!(ticker.bid_qty, fixed(&data["B"]));
                assert_eq!(ticker.ask_px, fixed(&data["a"]));
                assert_eq!(ticker.ask_qty, fixed(&data["A"]));
            }
            Message::Trade(trade) => {
                trades += 1;
                assert_eq!(trade.kind, TradeKind::Trade);
                assert_eq!(Some(trade.trade_id), data["t"].as_u64());
                assert_eq!(trade.price, fixed(&data["p"]));
                assert_eq!(trade.qty, fixed(&data["q"]));
                assert_eq!(Some(trade.buyer_is_maker), data["m"].as_bool());
                assert_eq!(Some(trade.event_time_ms), data["E"].as_u64());
                assert_eq!(Some(trade.trade_time_ms), data["T"].as_u64());
                assert_eq!(Some(trade.symbol), data["s"].as_str().map(str::as_bytes));
            }
            Message::Depth(diff) => {
                diffs += 1;
                assert_eq!(Some(diff.first_update_id), data["U"].as_u64());
                assert_eq!(Some(diff.final_update_id), data["u"].as_u64());
                assert_eq!(Some(diff.event_time_ms), data["E"].as_u64());
                assert_eq!(diff.bids.iter().collect::<Vec<_>>(), levels(&data["b"]));
                assert_eq!(diff.asks.iter().collect::<Vec<_>>(), levels(&data["a"]));
                level_count += diff.bids.len() + diff.asks.len();
            }
            Message::DepthSnapshot(snapshot) => {
                snapshots += 1;
                assert_eq!(Some(snapshot.last_update_id), data["lastUpdateId"].as_u64());
                assert_eq!(
                    snapshot.bids.iter().collect::<Vec<_>>(),
                    levels(&data["bids"])
                );
                assert_eq!(
                    snapshot.asks.iter().collect::<Vec<_>>(),
                    levels(&data["asks"])
                );
            }
            other => panic!("the capture holds no {other:?}"),
        }
    }
    // The capture's make-up (README: bookTicker, trade, depth@100ms and one REST snapshot).
    assert_eq!((tickers, trades, diffs, snapshots), (28040, 9757, 3451, 1));
    assert!(level_count > 3451);
}

/// Bad input: an error with its kind, never a panic.
#[test]
fn bad_input_is_an_error_never_a_panic() {
    let kind = |bytes: &[u8]| decode(bytes).map(|_| ()).map_err(|error| error.kind);
    assert_eq!(kind(b""), Err(DecodeErrorKind::Truncated));
    assert_eq!(kind(b"[]"), Err(DecodeErrorKind::UnexpectedByte(b'[')));
    assert_eq!(
        kind(br#"{"u":1,"s":"BTCUSDT","b":"1","B":"1","a":"1"}"#),
        Err(DecodeErrorKind::MissingField("A"))
    );
    assert_eq!(
        kind(br#"{"u":18446744073709551616,"s":"BTCUSDT","b":"1","B":"1","a":"1","A":"1"}"#),
        Err(DecodeErrorKind::NumberOverflow("u"))
    );
    assert!(matches!(
        kind(br#"{"u":1,"s":"BTCUSDT","b":"99999999999999999999999","B":"1","a":"1","A":"1"}"#),
        Err(DecodeErrorKind::BadDecimal(_))
    ));
    assert_eq!(
        kind(br#"{"e":"trade","E":1,"s":"X","t":1,"p":"1","q":"1","T":1,"m":true,"m":false}"#),
        Err(DecodeErrorKind::DuplicateField("m"))
    );
    assert_eq!(
        kind(br#"{"e":"depthUpdate","E":1,"s":"X","U":1,"u":2,"b":[["1","1"]]}"#),
        Err(DecodeErrorKind::MissingField("a"))
    );
    assert_eq!(
        kind(br#"{"stream":"btcusdt@bookTicker"}"#),
        Err(DecodeErrorKind::MissingField("data"))
    );
    assert_eq!(
        kind(br#"{"u":1,"s":"BTCUSDT","b":"1","B":"1","a":"1","A":"1"}x"#),
        Err(DecodeErrorKind::TrailingBytes)
    );
    assert_eq!(kind(b"{}"), Err(DecodeErrorKind::Unrecognised));
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(kind(deep.as_bytes()), Err(DecodeErrorKind::TooDeep));
}

/// The appliance's feed counts what does not decode and goes on: the next good message still
/// makes its event.
#[test]
fn the_feed_counts_bad_messages_and_carries_on() {
    use tickwire::event::{Body, Event};
    use tickwire::venue::binance::sync::SyncConfig;
    use tickwire::venue::binance_spot::feed::{FeedConfig, SpotFeed};
    use tickwire::venue::feed::{EventSink, Feed};
    let (mut feed, counters) = SpotFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "spot".to_owned(),
        symbols: vec!["BTCUSDT".to_owned()],
        channels: vec!["bookTicker".to_owned()],
        instrument_base: 0,
        books: false,
        sync: SyncConfig::default(),
    });
    let (mut producer, mut consumer) = tickwire::ring::spsc::ring::<Event>(64);
    let mut lost = false;
    let bad: [&[u8]; 5] = [
        b"{",
        b"not json",
        br#"{"u":1,"s":"BTCUSDT"}"#,
        br#"{"u":99999999999999999999,"s":"BTCUSDT","b":"1","B":"1","a":"1","A":"1"}"#,
        br#"{"stream":"btcusdt@bookTicker","data":[1,2]}"#,
    ];
    let mut sink = EventSink::new(&mut producer, &mut lost);
    for (index, message) in bad.iter().enumerate() {
        feed.on_message(0, index as u64 * 2_000_000_000, message, &mut sink);
    }
    feed.on_message(
        0,
        20_000_000_000,
        br#"{"u":7,"s":"BTCUSDT","b":"1.5","B":"2","a":"1.6","A":"3"}"#,
        &mut sink,
    );
    sink.publish();
    assert_eq!(counters.malformed.get(), 5);
    assert_eq!(counters.message("bookTicker"), 1);
    let event = consumer.try_pop().expect("the good message's quote");
    assert!(matches!(event.body(), Body::Quote(quote) if quote.bid_px == px("1.5")));
    assert!(consumer.try_pop().is_none());
}

proptest! {
    /// Any bytes: an answer, never a panic; and whatever decodes, the general reader decodes
    /// the same.
    #[test]
    fn any_bytes_decode_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let fast = decode(&bytes);
        prop_assert_eq!(fast, decode_general(&bytes));
    }

    /// A book ticker cut anywhere is an error, never a panic.
    #[test]
    fn a_cut_ticker_is_an_error(cut in 0usize..120) {
        let whole = br#"{"stream":"btcusdt@bookTicker","data":{"u":400900217,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000"}}"#;
        let cut = cut.min(whole.len() - 1);
        prop_assert!(decode(&whole[..cut]).is_err());
    }
}

/// Decoding every capture message and walking its levels allocates nothing; nor does the feed,
/// books kept, once the book has synced (counted by the test binary's global allocator).
#[test]
fn decoding_and_feeding_the_capture_never_allocates() {
    use crate::support::counting_alloc::allocations;
    use std::hint::black_box;
    use tickwire::event::Event;
    use tickwire::venue::binance_spot::feed::{FeedConfig, SpotFeed};
    use tickwire::venue::feed::{EventSink, Feed, SnapshotReply};
    let Some(path) = common::shared_data("binance-spot/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(path).expect("capture");
    let lines: Vec<(u64, String)> = std::io::BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|line| {
            let line = line.expect("readable");
            let (recv, json) = line.split_once(' ').expect("<recv_ns> <json>");
            (recv.parse().expect("a time"), json.to_owned())
        })
        .collect();
    let walk = |bytes: &[u8]| -> i64 {
        let mut checksum = 0i64;
        let mut levels = |levels: tickwire::venue::binance::decode::Levels<'_>| {
            for (price, qty) in levels {
                checksum = checksum.wrapping_add(price.raw() ^ qty.raw());
            }
        };
        match decode(bytes) {
            Ok(Message::Depth(d)) => {
                levels(d.bids);
                levels(d.asks);
            }
            Ok(Message::DepthSnapshot(s)) => {
                levels(s.bids);
                levels(s.asks);
            }
            Ok(Message::BookTicker(b)) => checksum = b.bid_px.raw() ^ b.ask_qty.raw(),
            Ok(Message::Trade(t)) => checksum = t.price.raw() ^ t.qty.raw(),
            Ok(_) => checksum = 1,
            Err(error) => checksum = error.offset as i64,
        }
        checksum
    };
    let before = allocations();
    let mut checksum = 0i64;
    for (_, json) in &lines {
        checksum = checksum.wrapping_add(walk(black_box(json.as_bytes())));
    }
    assert_eq!(allocations(), before, "decoding the capture allocated");
    black_box(checksum);

    // The feed, with a book: up to the recorded snapshot (handed over as the snapshot worker
    // would), then every message after it counted.
    let (mut feed, counters) = SpotFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "spot".to_owned(),
        symbols: vec!["BTCUSDT".to_owned()],
        channels: vec![
            "bookTicker".to_owned(),
            "depth@100ms".to_owned(),
            "trade".to_owned(),
        ],
        instrument_base: 0,
        books: true,
        // As `binance-spot` venues are set up (`BinanceSpot::feed`).
        sync: tickwire::venue::binance_spot::protocol::sync_config(1000),
    });
    let (mut producer, mut consumer) = tickwire::ring::spsc::ring::<Event>(1 << 16);
    let mut lost = false;
    let snapshot_at = lines
        .iter()
        .position(|(_, json)| json.starts_with("{\"lastUpdateId\""))
        .expect("the recorded snapshot");
    let mut synced_at = None;
    for (index, (recv_ts_ns, json)) in lines.iter().enumerate() {
        if index == snapshot_at {
            feed.snapshot_requests(*recv_ts_ns, &mut |_| {});
            let parsed = tickwire::venue::binance_spot::protocol::parse_depth(json.as_bytes())
                .expect("the recorded snapshot parses");
            let mut sink = EventSink::new(&mut producer, &mut lost);
            feed.on_snapshot(
                SnapshotReply {
                    venue: 0,
                    instrument: 0,
                    result: Ok(parsed),
                    recv_ts_ns: *recv_ts_ns,
                },
                *recv_ts_ns,
                &mut sink,
            );
            sink.publish();
            while consumer.try_pop().is_some() {}
            synced_at = Some(allocations());
            continue;
        }
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, *recv_ts_ns, json.as_bytes(), &mut sink);
        sink.publish();
        while consumer.try_pop().is_some() {}
    }
    let synced_at = synced_at.expect("the snapshot was fed");
    assert_eq!(counters.book_syncs.get(), 1);
    assert_eq!(counters.book_gaps.get(), 0);
    assert_eq!(counters.malformed.get(), 0);
    assert_eq!(
        allocations(),
        synced_at,
        "the feed allocated after its book synced"
    );
}
