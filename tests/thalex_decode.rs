//! The Thalex decoder against the venue's own documentation and a plain oracle.
//!
//! - `the_documented_examples_decode`: every notification example api.yaml gives for the
//!   channels tickwire supports (ticker, lwt, book, recent_trades, price_index, system) and the
//!   subscribe answer's example, read from `../shared/reference/thalex/api.yaml` itself (skipped
//!   with a printed reason where the file is absent; an error under CI), wrapped in the
//!   documented envelope and decoded through the feed into the events they describe.
//! - `the_decoder_agrees_with_a_serde_json_oracle`: generated real-shaped messages (the
//!   documented keys in random order, unknown keys, floats with up to 17 significant digits as
//!   Thalex prints them, nulls where the schema allows) decoded by tickwire and read by
//!   `serde_json` plus a plain decimal-rounding oracle; the two must agree field by field.
//!
//! Run: `cargo test --test tickwire thalex_decode::`.

use crate::support::common;

use proptest::prelude::*;
use serde_json::{json, Value};
use tickwire::event::{Body, Event, ReferenceKind, Side};
use tickwire::fixed::Fixed;
use tickwire::venue::feed::{EventSink, Feed};
use tickwire::venue::thalex::decode::{decode, Body as Notification, Message, Outcome, Scratch};
use tickwire::venue::thalex::feed::{FeedConfig, ThalexFeed};

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// The schema `name`'s notification example from api.yaml, as JSON: its `notification`
/// property's own example, or (for a `$ref`) the referenced schema's.
fn example(spec: &Value, name: &str) -> Value {
    let schemas = &spec["components"]["schemas"];
    let notification = &schemas[name]["properties"]["notification"];
    if let Some(example) = notification.get("example") {
        return example.clone();
    }
    if let Some(reference) = notification.get("$ref").and_then(Value::as_str) {
        let target = reference.trim_start_matches("#/components/schemas/");
        return schemas[target]["example"].clone();
    }
    // recent_trades documents one item: the notification is an array of them.
    if let Some(item) = notification["items"].get("example") {
        return Value::Array(vec![item.clone()]);
    }
    panic!("api.yaml gives no notification example for {name}")
}

/// Every event the feed makes of `messages`, in order.
fn events(feed: &mut ThalexFeed, messages: &[String]) -> Vec<Event> {
    let (mut producer, mut consumer) = tickwire::ring::ring::<Event>(4096);
    let mut lost = false;
    let mut out = Vec::new();
    for message in messages {
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, 1, message.as_bytes(), &mut sink);
        sink.publish();
        out.extend(std::iter::from_fn(|| consumer.try_pop()));
    }
    assert!(!lost);
    out
}

fn feed(symbols: &[&str], channels: &[&str]) -> ThalexFeed {
    ThalexFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "thalex".into(),
        symbols: symbols.iter().map(|s| s.to_string()).collect(),
        channels: channels.iter().map(|s| s.to_string()).collect(),
        instrument_base: 0,
    })
    .0
}

fn envelope(channel: &str, notification: &Value) -> String {
    format!(r#"{{"channel_name":"{channel}","notification":{notification}}}"#)
}

#[test]
fn the_documented_examples_decode() {
    let Some(path) = common::shared_reference("thalex/api.yaml") else {
        return;
    };
    let text = std::fs::read_to_string(&path).expect("api.yaml");
    let spec: Value = serde_yaml::from_str(&text).expect("api.yaml is YAML");
    let schemas = "book.<instrument>.<grouping>.<nlevels>.<delay>_payload";

    // Ticker: a quote, the mark at mark_timestamp; its mark has 17 significant digits.
    let ticker = example(&spec, "ticker.<instrument>.<delay>_payload");
    let mut thalex = feed(&["BTC-PERPETUAL"], &["ticker.100ms"]);
    let got = events(
        &mut thalex,
        &[envelope("ticker.BTC-PERPETUAL.100ms", &ticker)],
    );
    assert_eq!(got.len(), 2, "{ticker}");
    let Body::Quote(quote) = got[0].body() else {
        panic!("{:?}", got[0])
    };
    assert_eq!(
        (quote.bid_px, quote.bid_sz, quote.ask_px, quote.ask_sz),
        (fixed("47240"), fixed("0.4"), fixed("47260"), fixed("1"))
    );
    let Body::Reference(mark) = got[1].body() else {
        panic!()
    };
    assert_eq!(mark.kind(), ReferenceKind::Mark);
    assert_eq!(mark.price, fixed("47238.641439061"), "47238.64143906124");
    assert_eq!(got[1].header.exchange_ts_ns, 946_684_800_000_000_000);

    // lwt: best bid and ask, the mark.
    let lwt = example(&spec, "lwt.<instrument>.<delay>_payload");
    let mut thalex = feed(&["BTC-PERPETUAL"], &["lwt.raw"]);
    let got = events(&mut thalex, &[envelope("lwt.BTC-PERPETUAL.raw", &lwt)]);
    let Body::Quote(quote) = got[0].body() else {
        panic!()
    };
    assert_eq!(
        (quote.bid_px, quote.bid_sz, quote.ask_px, quote.ask_sz),
        (fixed("47240"), fixed("0.4"), fixed("47260"), fixed("1"))
    );
    let Body::Reference(mark) = got[1].body() else {
        panic!()
    };
    assert_eq!(mark.price, fixed("65536.16"));

    // Book: as a snapshot (the envelope's `"snapshot":true`, as Thalex's official client reads
    // it), the example builds the book; its two tuple trades are trades.
    let book = example(&spec, schemas);
    let mut thalex = feed(&["BTC-PERPETUAL"], &["book.none.all.raw"]);
    let snapshot = envelope("book.BTC-PERPETUAL.none.all.raw", &book).replacen(
        r#"{"channel_name""#,
        r#"{"snapshot":true,"channel_name""#,
        1,
    );
    let got = events(&mut thalex, &[snapshot]);
    let kinds: Vec<&str> = got
        .iter()
        .map(|event| match event.body() {
            Body::SnapshotBegin(_) => "begin",
            Body::BookLevel(_) => "level",
            Body::SnapshotEnd(_) => "end",
            Body::Quote(_) => "quote",
            Body::Trade(_) => "trade",
            _ => "other",
        })
        .collect();
    // bid_changes [[9120.5,0,0],[9121,54,53]]: the first is an empty level, so one bid.
    assert_eq!(
        kinds,
        ["begin", "level", "end", "quote", "trade", "trade"],
        "{book}"
    );
    let Body::BookLevel(level) = got[1].body() else {
        panic!()
    };
    assert_eq!((level.price, level.size), (fixed("9121"), fixed("54")));
    let Body::Trade(trade) = got[4].body() else {
        panic!()
    };
    assert_eq!(
        (trade.price, trade.size, trade.aggressor()),
        (fixed("9120.5"), fixed("15"), Side::Bid)
    );
    assert_eq!(got[4].header.exchange_ts_ns, 156_789_103_000_000);
    assert_eq!(got[0].header.exchange_ts_ns, 1_683_901_254_785_744_000);

    // recent_trades: the documented tuple names an option of the BTCUSD underlying.
    let trades = example(&spec, "recent_trades.<target>.<category>_payload");
    let mut thalex = feed(&["BTC-11MAY22-32400-C"], &["recent_trades.options"]);
    let got = events(
        &mut thalex,
        &[envelope("recent_trades.BTCUSD.options", &trades)],
    );
    assert_eq!(got.len(), 1, "{trades}");
    let Body::Trade(trade) = got[0].body() else {
        panic!()
    };
    assert_eq!(
        (trade.price, trade.size, trade.aggressor()),
        (fixed("400"), fixed("1"), Side::Bid)
    );
    assert_eq!(got[0].header.exchange_ts_ns, 1_652_187_265_515_000_000);

    // price_index: the index at its `timestamp`.
    let index = example(&spec, "price_index.<underlying>_payload");
    let mut thalex = feed(&["BTC-PERPETUAL"], &["price_index"]);
    let got = events(&mut thalex, &[envelope("price_index.BTCUSD", &index)]);
    let Body::Reference(reference) = got[0].body() else {
        panic!()
    };
    assert_eq!(reference.kind(), ReferenceKind::Index);
    assert_eq!(
        reference.price,
        fixed("47389.108333333"),
        "47389.10833333334"
    );
    assert_eq!(got[0].header.exchange_ts_ns, 946_684_800_000_000_000);

    // system: the reconnect notice.
    let system = example(&spec, "system_payload");
    let mut scratch = Scratch::default();
    let text = envelope("system", &system);
    assert_eq!(
        decode(text.as_bytes(), &mut scratch),
        Ok(Message::Notification {
            channel: b"system",
            snapshot: None,
            body: Notification::System {
                event: b"reconnect"
            },
        })
    );

    // public/subscribe's success example: the list of channels subscribed.
    let result = spec["paths"]["public/subscribe"]["rpc"]["responses"]["default"]["content"]
        ["application/json"]["schema"]["oneOf"][0]["allOf"][1]["properties"]["result"]["example"]
        .clone();
    assert!(result.is_array(), "api.yaml's subscribe example: {result}");
    let text = format!(r#"{{"id":2,"result":{result}}}"#);
    assert_eq!(
        decode(text.as_bytes(), &mut scratch),
        Ok(Message::Response {
            id: Some(2),
            outcome: Outcome::Channels
        })
    );
    let names: Vec<&[u8]> = scratch
        .channels
        .iter()
        .map(|&(start, end)| &text.as_bytes()[start..end])
        .collect();
    let expected: Vec<&[u8]> = result
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap().as_bytes())
        .collect();
    assert_eq!(names, expected);
}

// ---- The oracle ----

/// A JSON number's text as 1e-9 units, rounded to nearest with ties to even, by plain decimal
/// arithmetic on its digits: `None` when it does not fit an i64 below `i64::MAX`.
fn oracle_units(text: &str) -> Option<i64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{whole}{fraction}");
    // value = digits * 10^(exponent - fraction.len()); units = value * 10^9.
    let shift = exponent - fraction.len() as i64 + 9;
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let magnitude: u128 = if shift >= 0 {
        if digits.len() as i64 + shift > 20 {
            return None;
        }
        digits.parse::<u128>().ok()? * 10u128.pow(shift as u32)
    } else {
        let cut = digits.len() as i64 + shift;
        if cut < 0 {
            return Some(0);
        }
        let (kept, dropped) = digits.split_at(cut as usize);
        if kept.len() > 20 {
            return None;
        }
        let kept: u128 = if kept.is_empty() {
            0
        } else {
            kept.parse().ok()?
        };
        let first = dropped.as_bytes()[0];
        let rest_nonzero = dropped.bytes().skip(1).any(|byte| byte != b'0');
        let up = first > b'5' || (first == b'5' && (rest_nonzero || kept % 2 == 1));
        kept + u128::from(up)
    };
    if magnitude >= i64::MAX as u128 {
        return None;
    }
    let units = magnitude as i64;
    Some(if negative { -units } else { units })
}

fn oracle_fixed(value: &Value) -> Fixed {
    Fixed(oracle_units(&value.to_string()).expect("the generator stays in range"))
}

#[test]
fn the_oracle_rounds_as_the_issue_says() {
    assert_eq!(oracle_units("76283.25916666667"), Some(76_283_259_166_667));
    assert_eq!(oracle_units("2.5e-9"), Some(2));
    assert_eq!(oracle_units("3.5e-9"), Some(4));
    assert_eq!(oracle_units("1e-05"), Some(10_000));
    assert_eq!(oracle_units("-0.0000000015"), Some(-2));
    assert_eq!(oracle_units("1e10"), None);
}

/// A float as Thalex prints it: Rust's `Display` of an `f64` is the shortest text that reads
/// back as the same float, digit for digit what Thalex sends (`53.21791443839902`).
fn venue_float(value: f64) -> Value {
    serde_json::from_str(&format!("{value}")).expect("a float's text is JSON")
}

fn float_in(low: f64, high: f64) -> impl Strategy<Value = Value> {
    (low..high, 0u32..4).prop_map(|(value, rounding)| match rounding {
        // Whole, a few decimals, or full binary noise: all three appear in real tickers.
        0 => venue_float(value.round()),
        1 => venue_float((value * 100.0).round() / 100.0),
        _ => venue_float(value),
    })
}

fn nullable(strategy: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![1 => Just(Value::Null), 6 => strategy]
}

/// A message's keys in a shuffled order, with optional whitespace, as JSON text.
fn object_text(pairs: &[(String, Value)], order: &[usize], spaced: bool) -> String {
    let gap = if spaced { " " } else { "" };
    let fields: Vec<String> = order
        .iter()
        .map(|&index| {
            let (key, value) = &pairs[index % pairs.len()];
            format!("{gap}\"{key}\"{gap}:{gap}{value}")
        })
        .collect();
    format!("{{{}{gap}}}", fields.join(","))
}

/// A permutation of `0..len` drawn from `seed`.
fn permutation(len: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut state = seed | 1;
    for index in (1..len).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(index, (state % (index as u64 + 1)) as usize);
    }
    order
}

fn ticker_fields() -> impl Strategy<Value = Vec<(String, Value)>> {
    (
        nullable(float_in(1.0, 120_000.0)),
        nullable(float_in(0.001, 50.0)),
        nullable(float_in(1.0, 120_000.0)),
        nullable(float_in(0.001, 50.0)),
        float_in(1.0, 120_000.0),
        float_in(1.0e9, 2.0e9),
        float_in(1.0, 120_000.0),
        float_in(-1.0, 1.0),
        float_in(0.0, 1.0e9),
        // A key tickwire skips: any JSON value (the in-order fast path steps over numbers and
        // literals itself and leaves the rest to the key loop).
        prop_oneof![
            Just(json!({"nested": [1, "x", null]})),
            Just(json!(null)),
            Just(json!(true)),
            Just(json!(false)),
            Just(json!("text")),
            Just(json!(-0.0)),
            Just(json!(1e-5)),
            Just(json!(-12345678901234567i64)),
            float_in(-1.0e12, 1.0e12),
        ],
    )
        .prop_map(
            |(bid, bid_amount, ask, ask_amount, mark, mark_ts, index, delta, value_24h, other)| {
                vec![
                    ("best_bid_price".into(), bid),
                    ("best_bid_amount".into(), bid_amount),
                    ("best_ask_price".into(), ask),
                    ("best_ask_amount".into(), ask_amount),
                    ("mark_price".into(), mark),
                    ("mark_timestamp".into(), mark_ts),
                    ("index".into(), index),
                    ("delta".into(), delta),
                    ("value_24h".into(), value_24h),
                    ("unknown_key".into(), other),
                ]
            },
        )
}

fn tuple_trade(named: bool) -> impl Strategy<Value = Value> {
    (
        float_in(1.0, 120_000.0),
        float_in(0.001, 50.0),
        any::<bool>(),
        float_in(1.0e9, 2.0e9),
        any::<bool>(),
        prop::sample::select(vec!["BTC-PERPETUAL", "BTC-27JUN25-100000-C"]),
    )
        .prop_map(move |(price, amount, buy, time, implied, instrument)| {
            let side = if buy { "buy" } else { "sell" };
            if named {
                json!([price, amount, side, time, instrument, implied])
            } else {
                json!([price, amount, side, time, implied])
            }
        })
}

fn levels() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (float_in(1.0, 120_000.0), float_in(0.0, 50.0)).prop_map(|(price, amount)| {
            let outright = amount.clone();
            json!([price, amount, outright])
        }),
        0..6,
    )
    .prop_map(Value::Array)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_decoder_agrees_with_a_serde_json_oracle(
        ticker in ticker_fields(),
        lwt_bid in nullable(float_in(1.0, 120_000.0)),
        lwt_mark in float_in(1.0, 120_000.0),
        bids in levels(),
        asks in levels(),
        book_trades in prop::collection::vec(tuple_trade(false), 0..4),
        recent in prop::collection::vec(tuple_trade(true), 1..5),
        book_time in float_in(1.0e9, 2.0e9),
        index_price in float_in(1.0, 120_000.0),
        index_time in float_in(1.0e9, 2.0e9),
        seed in any::<u64>(),
        spaced in any::<bool>(),
    ) {
        let mut scratch = Scratch::default();
        let as_fixed = |value: &Value| (!value.is_null()).then(|| oracle_fixed(value));

        // ticker, keys in any order.
        let order = permutation(ticker.len(), seed);
        let body = object_text(&ticker, &order, spaced);
        let text = if seed % 2 == 0 {
            format!(r#"{{"channel_name":"ticker.BTC-PERPETUAL.raw","notification":{body}}}"#)
        } else {
            format!(r#"{{"notification":{body},"channel_name":"ticker.BTC-PERPETUAL.raw"}}"#)
        };
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let fields = &parsed["notification"];
        let Ok(Message::Notification { body: Notification::Ticker, .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        let got = scratch.ticker;
        prop_assert_eq!(got.bid_px, as_fixed(&fields["best_bid_price"]));
        prop_assert_eq!(got.bid_amount, as_fixed(&fields["best_bid_amount"]));
        prop_assert_eq!(got.ask_px, as_fixed(&fields["best_ask_price"]));
        prop_assert_eq!(got.ask_amount, as_fixed(&fields["best_ask_amount"]));
        prop_assert_eq!(got.mark_px, as_fixed(&fields["mark_price"]));
        prop_assert_eq!(got.index_px, as_fixed(&fields["index"]));
        prop_assert_eq!(got.mark_ts_ns as i64, oracle_fixed(&fields["mark_timestamp"]).raw());
        // The same ticker again: read against the key order just learned (the in-order fast
        // path where it applies), it decodes the same.
        let Ok(Message::Notification { body: Notification::Ticker, .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        let again = scratch.ticker;
        prop_assert_eq!(again, got);

        // lwt.
        let mut pairs = vec![("m".to_owned(), lwt_mark.clone())];
        if !lwt_bid.is_null() {
            pairs.push(("b".to_owned(), json!([lwt_bid, 1, 1])));
        }
        let body = object_text(&pairs, &permutation(pairs.len(), seed >> 8), spaced);
        let text = format!(r#"{{"channel_name":"lwt.BTC-PERPETUAL.raw","notification":{body}}}"#);
        let Ok(Message::Notification { body: Notification::Lwt, .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        let got = scratch.lwt;
        prop_assert_eq!(got.mark_px, Some(oracle_fixed(&lwt_mark)));
        prop_assert_eq!(got.bid.map(|(price, _)| price), as_fixed(&lwt_bid));

        // book, keys in any order, tuple trades.
        let pairs = vec![
            ("trades".to_owned(), Value::Array(book_trades.clone())),
            ("bid_changes".to_owned(), bids.clone()),
            ("ask_changes".to_owned(), asks.clone()),
            ("total_bid_amount".to_owned(), json!(1.5)),
            ("time".to_owned(), book_time.clone()),
        ];
        let body = object_text(&pairs, &permutation(pairs.len(), seed >> 16), spaced);
        let text = format!(r#"{{"channel_name":"book.BTC-PERPETUAL.none.all.raw","notification":{body}}}"#);
        let Ok(Message::Notification { body: Notification::Book { time_ns }, .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        prop_assert_eq!(time_ns as i64, oracle_fixed(&book_time).raw());
        let level_pairs = |levels: &Value| -> Vec<(Fixed, Fixed)> {
            levels.as_array().unwrap().iter()
                .map(|level| (oracle_fixed(&level[0]), oracle_fixed(&level[1])))
                .collect()
        };
        prop_assert_eq!(&scratch.bids, &level_pairs(&bids));
        prop_assert_eq!(&scratch.asks, &level_pairs(&asks));
        prop_assert_eq!(scratch.trades.len(), book_trades.len());
        for (got, want) in scratch.trades.iter().zip(&book_trades) {
            prop_assert_eq!(got.price, oracle_fixed(&want[0]));
            prop_assert_eq!(got.amount, oracle_fixed(&want[1]));
            prop_assert_eq!(got.buy, want[2] == "buy");
            prop_assert_eq!(got.time_ns as i64, oracle_fixed(&want[3]).raw());
            prop_assert_eq!(got.implied_taker, want[4] == true);
        }

        // recent_trades on an underlying: each tuple's instrument.
        let text = format!(
            r#"{{"channel_name":"recent_trades.BTCUSD.all","notification":{}}}"#,
            Value::Array(recent.clone())
        );
        let Ok(Message::Notification { body: Notification::Trades, .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        prop_assert_eq!(scratch.trades.len(), recent.len());
        for (got, want) in scratch.trades.iter().zip(&recent) {
            prop_assert_eq!(got.price, oracle_fixed(&want[0]));
            prop_assert_eq!(got.amount, oracle_fixed(&want[1]));
            let name = &text.as_bytes()[got.instrument.0..got.instrument.1];
            prop_assert_eq!(name, want[4].as_str().unwrap().as_bytes());
            prop_assert_eq!(got.implied_taker, want[5] == true);
        }

        // price_index.
        let pairs = vec![
            ("index_name".to_owned(), json!("BTCUSD")),
            ("price".to_owned(), index_price.clone()),
            ("timestamp".to_owned(), index_time.clone()),
            ("previous_settlement_price".to_owned(), json!(74945.7785774655)),
        ];
        let body = object_text(&pairs, &permutation(pairs.len(), seed >> 24), spaced);
        let text = format!(r#"{{"channel_name":"price_index.BTCUSD","notification":{body}}}"#);
        let Ok(Message::Notification { body: Notification::Index(got), .. }) =
            decode(text.as_bytes(), &mut scratch)
        else {
            panic!("{text}")
        };
        prop_assert_eq!(got.price, oracle_fixed(&index_price));
        prop_assert_eq!(got.time_ns as i64, oracle_fixed(&index_time).raw());
    }
}

/// The decoder and feed allocate nothing per message once warm: a real-shaped ticker (its
/// fast path and, reordered, its key loop), a book's snapshot, its updates with trades and an
/// update before any snapshot, recent trades, an index, a subscription answer, an error and a
/// channel name with an escape (malformed; its sample is made once and kept until taken, as on
/// the decoder thread). Counted on this thread by the test binary's global allocator.
#[test]
fn decoding_thalex_messages_through_the_feed_never_allocates() {
    use crate::support::counting_alloc::allocations;
    let messages: Vec<String> = vec![
        r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[[76000,0.1,"buy",1776715497.1,false]],"bid_changes":[[76000,1,1]],"ask_changes":[],"time":1776715497.1}}"#.into(),
        r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[],"bid_changes":[[76000,1,1],[75999.5,2,2]],"ask_changes":[[76001,1,1]],"total_bid_amount":3,"total_ask_amount":1,"time":1776715497.2},"snapshot":true}"#.into(),
        r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[[76001,0.5,"sell",1776715497.3,true]],"bid_changes":[[76000,0,0]],"ask_changes":[[76001.5,3,3]],"time":1776715497.3}}"#.into(),
        r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":76000,"best_bid_amount":0.26,"best_ask_price":76001,"best_ask_amount":0.25,"last_price":76000.5,"mark_price":76000.71791443839,"mark_timestamp":1776715497.7188172,"delta":1,"index":76283.25916666667,"volume_24h":1234.56,"value_24h":93950717.1234567,"low_price_24h":75120,"high_price_24h":77001,"change_24h":-320,"collar_low":75240.39913435821,"collar_high":76760.66522393041,"open_interest":1534.18,"funding_rate":0.00001237751098016,"funding_mark":0.2012345678901234}}"#.into(),
        r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"mark_price":76000.5,"best_bid_price":null,"best_ask_price":76001,"delta":1,"mark_timestamp":1776715497.8}}"#.into(),
        r#"{"channel_name":"recent_trades.BTC-PERPETUAL.single","notification":[[76000,1,"buy",1776715497.5,"BTC-PERPETUAL",false]]}"#.into(),
        r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","price":76283.25916666667,"timestamp":1776715497.7}}"#.into(),
        r#"{"id":3,"result":["ticker.BTC-PERPETUAL.100ms","system"]}"#.into(),
        r#"{"id":4,"error":{"code":4,"message":"throttle exceeded"}}"#.into(),
        r#"{"channel_name":"ticker.BTC\u002dPERPETUAL.100ms","notification":{"mark_price":1}}"#.into(),
    ];
    let mut thalex = feed(
        &["BTC-PERPETUAL"],
        &[
            "ticker.100ms",
            "book.none.10.100ms",
            "recent_trades.single",
            "price_index",
        ],
    );
    let (mut producer, mut consumer) = tickwire::ring::ring::<Event>(4096);
    let mut lost = false;
    let mut pass = |thalex: &mut ThalexFeed| {
        let mut events = 0;
        for message in &messages {
            let mut sink = EventSink::new(&mut producer, &mut lost);
            thalex.on_message(0, 1, message.as_bytes(), &mut sink);
            sink.publish();
            while consumer.try_pop().is_some() {
                events += 1;
            }
            while thalex.take_reply().is_some() {}
        }
        events
    };
    // Warm up: the scratch buffers, the book, the malformed sample.
    assert!(pass(&mut thalex) > 0);
    let before = allocations();
    let mut events = 0;
    for _ in 0..100 {
        events += pass(&mut thalex);
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations over {events} events"
    );
    assert!(events > 1000);
}
