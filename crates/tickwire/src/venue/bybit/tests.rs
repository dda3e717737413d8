//! Bybit's decoder, book and feed: the documented examples verbatim, a serde_json oracle over
//! generated messages with their keys in random order, the book against a plain model over a
//! long random session with restarts and breaks, and the feed's handling of bad input.

use super::book::{Applied, BookSync};
use super::decode::{decode, trade_id, DecodeError, Field, Message, Scratch};
use super::feed::{BybitFeed, FeedConfig, REFUSED};
use crate::event::{flags, Body, Event, EventHeader, EventKind, GapReason, ReferenceKind, Side};
use crate::fixed::Fixed;
use crate::net::ConnId;
use crate::venue::feed::{EventSink, Feed, FeedCounters, ReplyKind};
use std::collections::BTreeMap;

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("a decimal")
}

// The examples of `../shared/reference/bybit/` (bybit-exchange/docs 072c197), verbatim.

/// websocket-public-orderbook.mdx, "Snapshot": the page elides levels with `...`, so the
/// example is not JSON as printed.
const DOC_BOOK_SNAPSHOT: &str = r#"{
    "topic": "orderbook.50.BTCUSDT",
    "type": "snapshot",
    "ts": 1672304484978,
    "data": {
        "s": "BTCUSDT",
        "b": [
            ...,
            [
                "16493.50",
                "0.006"
            ],
            [
                "16493.00",
                "0.100"
            ]
        ],
        "a": [
            [
                "16611.00",
                "0.029"
            ],
            [
                "16612.00",
                "0.213"
            ],
            ...,
        ],
    "u": 18521288,
    "seq": 7961638724
    },
    "cts": 1672304484976
}"#;

/// websocket-public-orderbook.mdx, "Delta".
const DOC_BOOK_DELTA: &str = r#"{
    "topic": "orderbook.50.BTCUSDT",
    "type": "delta",
    "ts": 1687940967466,
    "data": {
        "s": "BTCUSDT",
        "b": [
            [
                "30247.20",
                "30.028"
            ],
            [
                "30245.40",
                "0.224"
            ],
            [
                "30242.10",
                "1.593"
            ],
            [
                "30240.30",
                "1.305"
            ],
            [
                "30240.00",
                "0"
            ]
        ],
        "a": [
            [
                "30248.70",
                "0"
            ],
            [
                "30249.30",
                "0.892"
            ],
            [
                "30249.50",
                "1.778"
            ],
            [
                "30249.60",
                "0"
            ],
            [
                "30251.90",
                "2.947"
            ],
            [
                "30252.20",
                "0.659"
            ],
            [
                "30252.50",
                "4.591"
            ]
        ],
        "u": 177400507,
        "seq": 66544703342
    },
    "cts": 1687940967464
}"#;

/// websocket-public-trade.mdx.
const DOC_TRADE: &str = r#"{
    "topic": "publicTrade.BTCUSDT",
    "type": "snapshot",
    "ts": 1672304486868,
    "data": [
        {
            "T": 1672304486865,
            "s": "BTCUSDT",
            "S": "Buy",
            "v": "0.001",
            "p": "16578.50",
            "L": "PlusTick",
            "i": "20f43950-d8dd-5b31-9112-a178eb6023af",
            "BT": false,
            "seq": 1783284617
        }
    ]
}"#;

/// websocket-public-all-liquidation.mdx.
const DOC_LIQUIDATION: &str = r#"{
    "topic": "allLiquidation.ROSEUSDT",
    "type": "snapshot",
    "ts": 1739502303204,
    "data": [
        {
            "T": 1739502302929,
            "s": "ROSEUSDT",
            "S": "Sell",
            "v": "20000",
            "p": "0.04499"
        }
    ]
}"#;

/// websocket-public-ticker.mdx, "Linear", its LinearPerpetual object.
const DOC_TICKER_PERPETUAL: &str = r#"{
  "topic": "tickers.BTCUSDT",
  "type": "snapshot",
  "data": {
    "symbol": "BTCUSDT",
    "tickDirection": "MinusTick",
    "price24hPcnt": "-0.158315",
    "lastPrice": "66666.60",
    "prevPrice24h": "79206.20",
    "highPrice24h": "79266.30",
    "lowPrice24h": "65076.90",
    "prevPrice1h": "66666.60",
    "markPrice": "66666.60",
    "indexPrice": "115418.19",
    "openInterest": "492373.72",
    "openInterestValue": "32824881841.75",
    "turnover24h": "4936790807.6521",
    "volume24h": "73191.3870",
    "fundingIntervalHour": "8",
    "fundingCap": "0.005",
    "nextFundingTime": "1760342400000",
    "fundingRate": "-0.005",
    "bid1Price": "66666.60",
    "bid1Size": "23789.165",
    "ask1Price": "66666.70",
    "ask1Size": "23775.469",
    "preOpenPrice": "",
    "preQty": "",
    "curPreListingPhase": ""
  },
  "cs": 9532239429,
  "ts": 1760325052630
}"#;

/// websocket-public-ticker.mdx, "Linear", its LinearFutures object.
const DOC_TICKER_FUTURES: &str = r#"{
  "topic": "tickers.BTC-26DEC25",
  "type": "snapshot",
  "data": {
    "symbol": "BTC-26DEC25",
    "tickDirection": "ZeroMinusTick",
    "price24hPcnt": "0",
    "lastPrice": "109401.50",
    "prevPrice24h": "109401.50",
    "highPrice24h": "109401.50",
    "lowPrice24h": "109401.50",
    "prevPrice1h": "109401.50",
    "markPrice": "121144.63",
    "indexPrice": "114132.51",
    "openInterest": "6.622",
    "openInterestValue": "802219.74",
    "turnover24h": "0.0000",
    "volume24h": "0.0000",
    "deliveryTime": "2025-12-26T08:00:00Z",
    "basisRate": "0.06129209",
    "deliveryFeeRate": "0",
    "predictedDeliveryPrice": "0.00",
    "basis": "-4730.84",
    "basisRateYear": "0.30655351",
    "nextFundingTime": "",
    "fundingRate": "",
    "bid1Price": "111254.50",
    "bid1Size": "0.176",
    "ask1Price": "131001.00",
    "ask1Size": "0.580"
  },
  "cs": 31337927919,
  "ts": 1760409119857
}"#;

/// websocket-public-ticker.mdx, "Spot".
const DOC_TICKER_SPOT: &str = r#"{
    "topic": "tickers.BTCUSDT",
    "ts": 1673853746003,
    "type": "snapshot",
    "cs": 2588407389,
    "data": {
        "symbol": "BTCUSDT",
        "lastPrice": "21109.77",
        "highPrice24h": "21426.99",
        "lowPrice24h": "20575",
        "prevPrice24h": "20704.93",
        "volume24h": "6780.866843",
        "turnover24h": "141946527.22907118",
        "price24hPcnt": "0.0196",
        "usdIndexPrice": "21120.2400136"
    }
}"#;

/// websocket-system-system-status.mdx.
const DOC_SYSTEM_STATUS: &str = r#"{
    "topic": "system.status",
    "ts": 1751858399649,
    "data": [
        {
            "id": "4d95b2a0-587f-11f0-bcc9-56f28c94d6ea",
            "title": "t06",
            "state": "completed",
            "begin": "1751596902000",
            "end": "1751597011000",
            "href": "",
            "serviceTypes": [
                2,
                3,
                4,
                5
            ],
            "product": [
                1,
                2
            ],
            "uidSuffix": [],
            "maintainType": 1,
            "env": 1
        }
    ]
}"#;

#[test]
fn the_documented_orderbook_delta_decodes_exactly() {
    let mut scratch = Scratch::default();
    let message = decode(DOC_BOOK_DELTA.as_bytes(), &mut scratch).expect("the documented delta");
    assert_eq!(
        message,
        Message::Book {
            topic: b"orderbook.50.BTCUSDT",
            snapshot: false,
            ts_ms: 1687940967466,
            cts_ms: 1687940967464,
            symbol: b"BTCUSDT",
            update_id: 177400507,
            seq: 66544703342,
        }
    );
    assert_eq!(
        scratch.bids,
        [
            (fixed("30247.20"), fixed("30.028")),
            (fixed("30245.40"), fixed("0.224")),
            (fixed("30242.10"), fixed("1.593")),
            (fixed("30240.30"), fixed("1.305")),
            (fixed("30240.00"), Fixed::ZERO),
        ]
    );
    assert_eq!(scratch.asks.len(), 7);
    assert_eq!(scratch.asks[0], (fixed("30248.70"), Fixed::ZERO));
    assert_eq!(scratch.asks[6], (fixed("30252.50"), fixed("4.591")));
}

#[test]
fn the_documented_orderbook_snapshot_is_refused_as_printed_and_read_without_its_ellipses() {
    let mut scratch = Scratch::default();
    // The page elides levels with `...`: not JSON, a counted malformed message.
    assert!(matches!(
        decode(DOC_BOOK_SNAPSHOT.as_bytes(), &mut scratch),
        Err(DecodeError::Json(_))
    ));
    // Without the `...` lines, and the trailing comma the last one leaves after the asks.
    let completed = DOC_BOOK_SNAPSHOT.replace("            ...,\n", "").replace(
        "\"0.213\"\n            ],\n        ],",
        "\"0.213\"\n            ]\n        ],",
    );
    let message = decode(completed.as_bytes(), &mut scratch).expect("the snapshot without `...`");
    assert_eq!(
        message,
        Message::Book {
            topic: b"orderbook.50.BTCUSDT",
            snapshot: true,
            ts_ms: 1672304484978,
            cts_ms: 1672304484976,
            symbol: b"BTCUSDT",
            update_id: 18521288,
            seq: 7961638724,
        }
    );
    assert_eq!(
        scratch.bids,
        [
            (fixed("16493.50"), fixed("0.006")),
            (fixed("16493.00"), fixed("0.100"))
        ]
    );
    assert_eq!(
        scratch.asks,
        [
            (fixed("16611.00"), fixed("0.029")),
            (fixed("16612.00"), fixed("0.213"))
        ]
    );
}

#[test]
fn the_documented_trade_and_liquidation_decode_exactly() {
    let mut scratch = Scratch::default();
    let message = decode(DOC_TRADE.as_bytes(), &mut scratch).expect("the documented trade");
    assert_eq!(
        message,
        Message::Trades {
            topic: b"publicTrade.BTCUSDT",
            ts_ms: 1672304486868
        }
    );
    assert_eq!(scratch.rows.len(), 1);
    let row = scratch.rows[0];
    assert_eq!(row.time_ms, 1672304486865);
    assert!(row.buy);
    assert_eq!((row.size, row.price), (fixed("0.001"), fixed("16578.50")));
    assert_eq!(row.seq, 1783284617);
    assert_eq!(
        &DOC_TRADE.as_bytes()[row.symbol.0..row.symbol.1],
        b"BTCUSDT"
    );
    // The UUID's halves XORed.
    assert_eq!(row.id, 0x20f4_3950_d8dd_5b31 ^ 0x9112_a178_eb60_23af);

    let message = decode(DOC_LIQUIDATION.as_bytes(), &mut scratch).expect("the liquidation");
    assert_eq!(
        message,
        Message::Liquidations {
            topic: b"allLiquidation.ROSEUSDT",
            ts_ms: 1739502303204
        }
    );
    let row = scratch.rows[0];
    assert!(!row.buy);
    assert_eq!((row.size, row.price), (fixed("20000"), fixed("0.04499")));
    assert_eq!((row.time_ms, row.id, row.seq), (1739502302929, 0, 0));
}

/// `text` without the whitespace between its tokens: Bybit's messages as they come on the wire.
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for ch in text.chars() {
        if in_string {
            out.push(ch);
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if ch == '"' {
            in_string = true;
            out.push(ch);
        } else if !ch.is_whitespace() {
            out.push(ch);
        }
    }
    out
}

/// What a decode gave, with each row's symbol as its text (rows keep offsets).
fn decoded(text: &str) -> String {
    let mut scratch = Scratch::default();
    let message = decode(text.as_bytes(), &mut scratch);
    let rows: Vec<_> = scratch
        .rows
        .iter()
        .map(|row| {
            let symbol = &text.as_bytes()[row.symbol.0..row.symbol.1];
            (
                row.time_ms,
                row.buy,
                row.size,
                row.price,
                row.id,
                row.seq,
                symbol,
            )
        })
        .collect();
    format!("{message:?} {:?} {:?} {rows:?}", scratch.bids, scratch.asks)
}

#[test]
fn the_documented_examples_decode_alike_in_bybit_key_order_and_out_of_it() {
    // On one line, each key is where Bybit's order expects it and is matched as a literal; as
    // printed (whitespace between tokens), and rewritten by serde_json with every object's keys
    // sorted (the top level's in reverse), the keys go through the key loop. All read the
    // same.
    for example in [
        DOC_BOOK_DELTA,
        DOC_TRADE,
        DOC_LIQUIDATION,
        DOC_TICKER_PERPETUAL,
        DOC_TICKER_FUTURES,
        DOC_TICKER_SPOT,
        DOC_SYSTEM_STATUS,
    ] {
        let wire = compact(example);
        let value: serde_json::Value = serde_json::from_str(&wire).unwrap();
        let reversed = {
            let object = value.as_object().unwrap();
            let members: Vec<String> = object
                .iter()
                .rev()
                .map(|(key, value)| format!("{key:?}:{value}"))
                .collect();
            format!("{{{}}}", members.join(","))
        };
        let expected = decoded(example);
        assert!(!expected.starts_with("Err"), "{expected}");
        assert_eq!(decoded(&wire), expected, "{wire}");
        assert_eq!(decoded(&reversed), expected, "{reversed}");
    }
    // A repeated key is refused on the literal path too.
    let repeated =
        compact(DOC_LIQUIDATION).replacen(r#""v":"20000","#, r#""v":"1","v":"20000","#, 1);
    let mut scratch = Scratch::default();
    assert!(matches!(
        decode(repeated.as_bytes(), &mut scratch),
        Err(DecodeError::RepeatedKey { .. })
    ));
}

#[test]
fn the_documented_tickers_decode_exactly() {
    let mut scratch = Scratch::default();
    let Ok(Message::Ticker {
        topic,
        snapshot,
        ts_ms,
        symbol,
        fields,
    }) = decode(DOC_TICKER_PERPETUAL.as_bytes(), &mut scratch)
    else {
        panic!("the documented perpetual ticker");
    };
    assert_eq!(
        (topic, snapshot, ts_ms, symbol),
        (
            &b"tickers.BTCUSDT"[..],
            true,
            1760325052630,
            &b"BTCUSDT"[..]
        )
    );
    assert_eq!(fields.bid1_price, Field::Value(fixed("66666.60")));
    assert_eq!(fields.bid1_size, Field::Value(fixed("23789.165")));
    assert_eq!(fields.ask1_price, Field::Value(fixed("66666.70")));
    assert_eq!(fields.ask1_size, Field::Value(fixed("23775.469")));
    assert_eq!(fields.mark_price, Field::Value(fixed("66666.60")));
    assert_eq!(fields.index_price, Field::Value(fixed("115418.19")));
    assert_eq!(fields.funding_rate, Field::Value(fixed("-0.005")));
    assert_eq!(fields.open_interest, Field::Value(fixed("492373.72")));

    let Ok(Message::Ticker { fields, symbol, .. }) =
        decode(DOC_TICKER_FUTURES.as_bytes(), &mut scratch)
    else {
        panic!("the documented futures ticker");
    };
    assert_eq!(symbol, b"BTC-26DEC25");
    assert_eq!(fields.funding_rate, Field::Empty);
    assert_eq!(fields.mark_price, Field::Value(fixed("121144.63")));

    let Ok(Message::Ticker { fields, ts_ms, .. }) =
        decode(DOC_TICKER_SPOT.as_bytes(), &mut scratch)
    else {
        panic!("the documented spot ticker");
    };
    assert_eq!(ts_ms, 1673853746003);
    assert_eq!(
        fields,
        Default::default(),
        "spot's ticker has none of the fields published"
    );

    assert_eq!(
        decode(DOC_SYSTEM_STATUS.as_bytes(), &mut scratch),
        Ok(Message::OtherTopic {
            topic: b"system.status"
        })
    );
}

#[test]
fn trade_ids_keep_numbers_fold_uuids_and_hash_the_rest() {
    assert_eq!(trade_id(b"2290000000061666327"), 2290000000061666327);
    assert_eq!(trade_id(b"0"), 0);
    let uuid = trade_id(b"20f43950-d8dd-5b31-9112-a178eb6023af");
    assert_eq!(uuid, 0x20f4_3950_d8dd_5b31 ^ 0x9112_a178_eb60_23af);
    assert_ne!(uuid, trade_id(b"20f43950-d8dd-5b31-9112-a178eb6023ae"));
    // Past u64, not a UUID: hashed, the same every time.
    assert_eq!(
        trade_id(b"99999999999999999999"),
        trade_id(b"99999999999999999999")
    );
    assert_ne!(trade_id(b"abc"), trade_id(b"abd"));
}

/// What `trade_id` must give, written plainly: a decimal that fits `u64` is its number; a
/// UUID's 32 hex digits (either case) are read with `u64::from_str_radix` and the halves XORed;
/// anything else is its 64-bit FNV-1a hash.
fn reference_trade_id(id: &[u8]) -> u64 {
    let text = std::str::from_utf8(id).unwrap_or("");
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        if let Ok(value) = text.parse::<u64>() {
            return value;
        }
    }
    let is_uuid = id.len() == 36
        && id.iter().enumerate().all(|(at, byte)| match at {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        });
    if is_uuid {
        let digits: String = text.chars().filter(|c| *c != '-').collect();
        let upper = u64::from_str_radix(&digits[..16], 16).unwrap();
        let lower = u64::from_str_radix(&digits[16..], 16).unwrap();
        return upper ^ lower;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in id {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The UUID reader takes eight digits at a time: random UUIDs in both cases, and each of them
/// with one byte changed to any value (a UUID still, or not: then hashed), give what the plain
/// reference gives, read alone and as a trade row's `i` (where a quoted UUID skips the string
/// reader).
#[test]
fn uuids_fold_as_the_plain_reference_reads_them() {
    let mut rng = Rng(0x5eed_0bad_cafe_f00d);
    let hex = b"0123456789abcdefABCDEF";
    let mut scratch = Scratch::default();
    for round in 0..20_000 {
        let mut id: Vec<u8> = (0..36)
            .map(|at| match at {
                8 | 13 | 18 | 23 => b'-',
                _ => hex[rng.below(hex.len() as u64) as usize],
            })
            .collect();
        if round % 2 == 1 {
            let at = rng.below(36) as usize;
            id[at] = match rng.below(4) {
                0 => b'-',
                1 => b"gG/:@`"[rng.below(6) as usize],
                2 => 0x80 | rng.below(128) as u8,
                _ => rng.below(128) as u8,
            };
        }
        assert_eq!(
            trade_id(&id),
            reference_trade_id(&id),
            "{}",
            String::from_utf8_lossy(&id)
        );
        // Inside a message only what JSON allows in a string unescaped.
        if id
            .iter()
            .all(|&byte| (0x20..0x80).contains(&byte) && byte != b'"' && byte != b'\\')
        {
            let id = String::from_utf8(id).unwrap();
            let message = format!(
                r#"{{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1,"data":[{{"T":1,"s":"BTCUSDT","S":"Buy","v":"1","p":"2","L":"PlusTick","i":"{id}","BT":false,"seq":3}}]}}"#
            );
            decode(message.as_bytes(), &mut scratch).unwrap();
            assert_eq!(
                scratch.rows[0].id,
                reference_trade_id(id.as_bytes()),
                "{id}"
            );
        }
    }
}

/// A trade row in linear's own layout takes `row_in_order`, any other the key loop: rows in the
/// trade page's key order, each value either in the form the fast path takes or in another the
/// key loop reads (a string of digits for `T`, an escape in `s`, an exponent, a spot id, an
/// unknown tick direction, an upper-case UUID, a space), some of them then damaged by one byte,
/// decode as the same message does with a space after each row's `{` (which sends every row to
/// the key loop): the same rows, or an error for both.
#[test]
fn trade_rows_in_linear_order_read_as_the_key_loop_reads_them() {
    let mut rng = Rng(0x0dd_ba11_f00d_5eed);
    let mut scratch = Scratch::default();
    let mut rows_read = 0;
    for round in 0..4000 {
        let rows: Vec<String> = (0..1 + rng.below(4))
            .map(|_| {
                // The usual form, or one in eight times the other.
                let pick = |rng: &mut Rng, usual: String, other: &str| {
                    if rng.below(8) == 0 {
                        other.to_owned()
                    } else {
                        usual
                    }
                };
                let side = if rng.below(2) == 0 { r#""Buy""# } else { r#""Sell""# }.to_owned();
                let size = format!(r#""{}""#, rng.decimal());
                let price = format!(r#""{}""#, rng.decimal());
                let tick = ["\"PlusTick\"", "\"MinusTick\"", "\"ZeroPlusTick\"", "\"ZeroMinusTick\""]
                    [rng.below(4) as usize]
                    .to_owned();
                let seq = rng.below(1 << 40).to_string();
                let time = pick(&mut rng, "1672304486868".to_owned(), r#""1672304486868""#);
                let symbol = pick(&mut rng, r#""BTCUSDT""#.to_owned(), r#""BTC\u0055SDT""#);
                let side = pick(&mut rng, side, r#""Sel""#);
                let size = pick(&mut rng, size, r#""1e3""#);
                let price = pick(&mut rng, price, r#"" 1.5""#);
                let tick = pick(&mut rng, tick, r#""Flat""#);
                let uuid = format!(
                    "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    rng.next() as u32,
                    rng.next() as u16,
                    rng.next() as u16,
                    rng.next() as u16,
                    rng.next() & 0xffff_ffff_ffff
                );
                let id = pick(&mut rng, format!(r#""{uuid}""#), &format!(r#""{}""#, uuid.to_uppercase()));
                let id = pick(&mut rng, id, r#""2290000000061666327""#);
                let block = pick(&mut rng, "false".to_owned(), "true");
                let seq = pick(&mut rng, seq, "01");
                let space = pick(&mut rng, String::new(), " ");
                format!(
                    r#"{{"T":{time},"s":{symbol},"S":{side},"v":{size},"p":{price},"L":{tick},"i":{id},"BT":{block},"seq":{seq}{space}}}"#
                )
            })
            .collect();
        let mut message = format!(
            r#"{{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1672304486868,"data":[{}]}}"#,
            rows.join(",")
        )
        .into_bytes();
        if round % 3 == 2 {
            let at = rng.below(message.len() as u64) as usize;
            message[at] = b"{}[],:\"0a- \\"[rng.below(12) as usize];
        }
        let Ok(text) = String::from_utf8(message) else {
            continue;
        };
        let spaced = text.replace(r#"{"T":"#, r#"{ "T":"#);
        let fast = decode(text.as_bytes(), &mut scratch).map(|_| scratch.rows.clone());
        let general = decode(spaced.as_bytes(), &mut scratch).map(|_| scratch.rows.clone());
        match (fast, general) {
            (Ok(fast), Ok(general)) => {
                assert_eq!(fast.len(), general.len(), "{text}");
                for (a, b) in fast.iter().zip(&general) {
                    // The symbol's range moves with the spaces: compare its bytes.
                    let symbol = |row: &super::decode::Row, text: &str| {
                        text[row.symbol.0..row.symbol.1].to_owned()
                    };
                    assert_eq!(symbol(a, &text), symbol(b, &spaced), "{text}");
                    let same = super::decode::Row {
                        symbol: (0, 0),
                        ..*a
                    } == super::decode::Row {
                        symbol: (0, 0),
                        ..*b
                    };
                    assert!(same, "{text}: {a:?} against {b:?}");
                }
                rows_read += fast.len();
            }
            (Err(_), Err(_)) => {}
            (fast, general) => panic!("{text}: {fast:?} against {general:?}"),
        }
    }
    assert!(rows_read > 1000, "{rows_read}");
}

#[test]
fn tickers_in_linear_order_read_as_the_key_loop_reads_them() {
    // Generated tickers in linear's layout, some parts in another form (one in eight) and one
    // message in three with a byte damaged: read as they are (the fast path where it takes
    // them) and with a space after the `{` (the key loop for all of it), they must agree.
    let mut rng = Rng(0x71c4_e75e_ed00_0034);
    let mut scratch = Scratch::default();
    let (mut fast_read, mut fell_back, mut refused) = (0, 0, 0);
    let kept = [
        "markPrice",
        "indexPrice",
        "openInterest",
        "fundingRate",
        "bid1Price",
        "bid1Size",
        "ask1Price",
        "ask1Size",
    ];
    let skipped = [
        ("tickDirection", r#""MinusTick""#),
        ("lastPrice", r#""66666.60""#),
        ("openInterestValue", r#""32824881841.75""#),
        ("turnover24h", r#""4936790807.6521""#),
        ("nextFundingTime", r#""1760342400000""#),
        ("preOpenPrice", r#""""#),
        ("fundingIntervalHour", r#""8""#),
    ];
    for round in 0..6000 {
        let pick = |rng: &mut Rng, usual: String, others: &[&str]| {
            if rng.below(8) == 0 {
                others[rng.below(others.len() as u64) as usize].to_owned()
            } else {
                usual
            }
        };
        let topic = pick(
            &mut rng,
            "tickers.BTCUSDT".to_owned(),
            &[
                "tickers.",
                r"tickers.BTC\u0055SDT",
                "orderbook.1.BTCUSDT",
                "ticker.X",
            ],
        );
        let kind = if rng.below(2) == 0 {
            "delta"
        } else {
            "snapshot"
        }
        .to_owned();
        let kind = pick(&mut rng, kind, &["full", "delta ", "Delta"]);
        let symbol = pick(
            &mut rng,
            r#""BTCUSDT""#.to_owned(),
            &[r#""BTC\u0055SDT""#, "1", r#""""#],
        );
        let mut members: Vec<String> = Vec::new();
        for name in kept {
            if rng.below(3) != 0 {
                continue;
            }
            let value = match rng.below(3) {
                0 => format!(r#""{}""#, rng.decimal()),
                1 => format!(r#""-0.{:05}""#, rng.below(100_000)),
                _ => format!(r#""{}.{:03}""#, rng.below(100_000_000), rng.below(1000)),
            };
            let value = pick(
                &mut rng,
                value,
                &[
                    r#""""#,
                    r#""1e3""#,
                    r#"" 1.5""#,
                    r#""0.0000000001""#,
                    r#""99999999999""#,
                    r#""1.\u0035""#,
                    "1.5",
                    "null",
                ],
            );
            members.push(format!(r#""{name}":{value}"#));
        }
        for (name, value) in skipped {
            if rng.below(4) == 0 {
                let value = pick(
                    &mut rng,
                    value.to_owned(),
                    &["12", r#""a\"b""#, "null", "{}"],
                );
                members.push(format!(r#""{name}":{value}"#));
            }
        }
        if rng.below(8) == 0 {
            // A book's key, which the key loop reads and checks in a ticker's data too.
            members.push(
                [
                    r#""s":"X""#,
                    r#""u":"abc""#,
                    r#""u":7"#,
                    r#""b":[["1","2"]]"#,
                    r#""seq":1.5"#,
                    r#""symbol":"X""#,
                ][rng.below(6) as usize]
                    .to_owned(),
            );
        }
        if rng.below(3) == 0 {
            rng.shuffle(&mut members);
        }
        if !members.is_empty() && rng.below(10) == 0 {
            // A repeated member.
            let again = members[rng.below(members.len() as u64) as usize].clone();
            members.push(again);
        }
        let data = std::iter::once(format!(r#""symbol":{symbol}"#))
            .chain(members)
            .collect::<Vec<_>>()
            .join(",");
        let cs = format!(r#","cs":{}"#, rng.below(1 << 40));
        let cs = pick(&mut rng, cs, &["", r#","cs":"9532239430""#, r#","cs":-1"#]);
        let ts = format!(r#","ts":{}"#, 1_760_000_000_000 + rng.below(1 << 30));
        let ts = pick(
            &mut rng,
            ts,
            &[
                "",
                r#","ts":"1760325052730""#,
                r#","ts":1.5"#,
                r#","ts":01"#,
            ],
        );
        let tail = pick(&mut rng, String::new(), &[" ", r#","x":1"#, "}"]);
        let mut message =
            format!(r#"{{"topic":"{topic}","type":"{kind}","data":{{{data}}}{cs}{ts}{tail}}}"#)
                .into_bytes();
        if round % 3 == 2 {
            let at = rng.below(message.len() as u64) as usize;
            message[at] = b"{}[],:\"0a- \\"[rng.below(12) as usize];
        }
        let Ok(text) = String::from_utf8(message) else {
            continue;
        };
        let spaced = text.replacen('{', "{ ", 1);
        let general = decode(spaced.as_bytes(), &mut scratch);
        let fast = super::decode::ticker_in_order(text.as_bytes(), &mut scratch);
        if let Some(fast) = fast {
            assert_eq!(Ok(fast), general, "{text}");
            fast_read += 1;
        } else if general.is_ok() {
            fell_back += 1;
        }
        let decoded = decode(text.as_bytes(), &mut scratch);
        match (decoded, general) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
            (Err(a), Err(b)) => {
                refused += 1;
                assert_eq!(
                    std::mem::discriminant(&a),
                    std::mem::discriminant(&b),
                    "{text}: {a} against {b}"
                );
            }
            (a, b) => panic!("{text}: {a:?} against {b:?}"),
        }
    }
    // Each way taken often: the fast path (about one message in five has every part in the
    // usual form and no byte damaged), the key loop reading what it left, and refusals.
    assert!(fast_read > 500, "{fast_read}");
    assert!(fell_back > 300, "{fell_back}");
    assert!(refused > 1000, "{refused}");
}

/// Generated orderbook messages in Bybit's layout (both of the orderbook page's top-level
/// orders), some parts in another form (one in eight: a topic `TopicKind::of` refuses, an
/// integer as a string or a fraction, a decimal the word readers leave to `Fixed::parse` or
/// that it refuses, a level with a space or a third member, keys out of order, a missing
/// `seq` or `cts`, something after the end) and one message in three with a byte damaged:
/// read as they are (the fast path where it takes them) and with a space after the `{` (the
/// key loop for all of it), they must give the same message and levels, or both an error of
/// the same kind.
#[test]
fn books_in_bybit_order_read_as_the_key_loop_reads_them() {
    let mut rng = Rng(0xb00c_0de1_7a5e_0034);
    let (mut fast, mut general) = (Scratch::default(), Scratch::default());
    let (mut fast_read, mut fell_back, mut refused, mut levels_read) = (0, 0, 0, 0);
    let pick_one_in = |odds: u64, rng: &mut Rng, usual: String, others: &[&str]| {
        if rng.below(odds) == 0 {
            others[rng.below(others.len() as u64) as usize].to_owned()
        } else {
            usual
        }
    };
    // The message's parts one in eight times in another form, a level's one in a hundred.
    let pick = |rng: &mut Rng, usual: String, others: &[&str]| pick_one_in(8, rng, usual, others);
    let rare = |rng: &mut Rng, usual: String, others: &[&str]| pick_one_in(100, rng, usual, others);
    for round in 0..8000 {
        let usual = rng.below(3) as usize;
        let topic = pick(
            &mut rng,
            [
                "orderbook.50.BTCUSDT",
                "orderbook.1.ETHUSDT",
                "orderbook.1000.BTC-26DEC25",
            ][usual]
                .to_owned(),
            &[
                "orderbook..BTCUSDT",
                "orderbook.50.",
                "orderbook.5x.BTCUSDT",
                "orderbook.50",
                r"orderbook.50.BTC\u0055SDT",
                "orderbook.50.A.B",
                "orderbook.",
                "tickers.BTCUSDT",
            ],
        );
        let kind = if rng.below(2) == 0 {
            "delta"
        } else {
            "snapshot"
        }
        .to_owned();
        let kind = pick(&mut rng, kind, &["Delta", "full", "delta "]);
        let ts = (1_600_000_000_000 + rng.below(1 << 40)).to_string();
        let ts = pick(
            &mut rng,
            ts,
            &[r#""1772694601512""#, "1.5", "01", "-1", "1e3"],
        );
        let symbol = pick(
            &mut rng,
            r#""BTCUSDT""#.to_owned(),
            &[r#""BTC\u0055SDT""#, "1", r#""""#],
        );
        let side = |rng: &mut Rng| {
            let count = match rng.below(6) {
                0 => 0,
                1 => 20 + rng.below(60),
                _ => 1 + rng.below(8),
            };
            let levels: Vec<String> = (0..count)
                .map(|_| {
                    let decimal = |rng: &mut Rng| {
                        let usual = match rng.below(5) {
                            0 => format!("{}.{:02}", rng.below(10_000_000), rng.below(100)),
                            1 => format!("0.{:03}", rng.below(1000)),
                            2 => "0".to_owned(),
                            3 => format!("{}.{:07}", rng.below(10), rng.below(10_000_000)),
                            _ => rng.decimal(),
                        };
                        rare(
                            rng,
                            usual,
                            &[
                                "104523.50",
                                "12345678.25",
                                "123456789.5",
                                "0.00000001",
                                "0.0000000001",
                                "1.123456789",
                                "007.5",
                                "-0.5",
                                "1e3",
                                " 1.5",
                                "",
                                ".5",
                                "5.",
                                r"1.\u0035",
                            ],
                        )
                    };
                    let (price, size) = (decimal(rng), decimal(rng));
                    rare(
                        rng,
                        format!(r#"["{price}","{size}"]"#),
                        &[
                            r#"[ "1.5","2"]"#,
                            r#"["1.5", "2"]"#,
                            r#"["1.5","2","3"]"#,
                            r#"["1.5"]"#,
                            r#"[1.5,"2"]"#,
                            r#"["1.5","2"] "#,
                        ],
                    )
                })
                .collect();
            format!("[{}]", levels.join(","))
        };
        let (bids, asks) = (side(&mut rng), side(&mut rng));
        let u = rng.below(1 << 40).to_string();
        let u = pick(
            &mut rng,
            u,
            &[r#""177400507""#, "-1", "1.0", "99999999999999999999"],
        );
        let seq = format!(r#","seq":{}"#, rng.below(1 << 40));
        let seq = pick(&mut rng, seq, &["", r#","seq":1e2"#, r#","seq":"7""#]);
        let mut data = vec![
            format!(r#""s":{symbol}"#),
            format!(r#""b":{bids}"#),
            format!(r#""a":{asks}"#),
            format!(r#""u":{u}{seq}"#),
        ];
        if rng.below(10) == 0 {
            rng.shuffle(&mut data);
        }
        if rng.below(20) == 0 {
            // A repeated member.
            let again = data[rng.below(data.len() as u64) as usize].clone();
            data.push(again);
        }
        let data = data.join(",");
        let cts = format!(r#","cts":{}"#, 1_600_000_000_000 + rng.below(1 << 40));
        let cts = pick(&mut rng, cts, &["", r#","cts":"1""#, r#","cts":0.5"#]);
        let head = if rng.below(2) == 0 {
            format!(r#""type":"{kind}","ts":{ts}"#)
        } else {
            format!(r#""ts":{ts},"type":"{kind}""#)
        };
        let tail = pick(&mut rng, String::new(), &[" ", r#","x":1"#, "}", "\n"]);
        let mut message =
            format!(r#"{{"topic":"{topic}",{head},"data":{{{data}}}{cts}{tail}}}"#).into_bytes();
        if round % 3 == 2 {
            let at = rng.below(message.len() as u64) as usize;
            message[at] = b"{}[],:\"0a.- \\"[rng.below(13) as usize];
        }
        let Ok(text) = String::from_utf8(message) else {
            continue;
        };
        let spaced = text.replacen('{', "{ ", 1);
        let by_key_loop = decode(spaced.as_bytes(), &mut general);
        let read = super::decode::book_in_order(text.as_bytes(), &mut fast);
        if let Some(read) = read {
            assert_eq!(Ok(read), by_key_loop, "{text}");
            assert_eq!(fast.bids, general.bids, "{text}");
            assert_eq!(fast.asks, general.asks, "{text}");
            fast_read += 1;
            levels_read += fast.bids.len() + fast.asks.len();
        } else if by_key_loop.is_ok() {
            fell_back += 1;
        }
        match (decode(text.as_bytes(), &mut fast), by_key_loop) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                assert_eq!(fast.bids, general.bids, "{text}");
                assert_eq!(fast.asks, general.asks, "{text}");
            }
            (Err(a), Err(b)) => {
                refused += 1;
                assert_eq!(
                    std::mem::discriminant(&a),
                    std::mem::discriminant(&b),
                    "{text}: {a} against {b}"
                );
            }
            (a, b) => panic!("{text}: {a:?} against {b:?}"),
        }
    }
    // Each way taken often: the fast path, the key loop reading what it left, and refusals.
    assert!(fast_read > 800, "{fast_read}");
    assert!(levels_read > 10_000, "{levels_read}");
    assert!(fell_back > 800, "{fell_back}");
    assert!(refused > 3000, "{refused}");
}

/// Up to `MAX_ROWS` levels a side in Bybit's layout are read, one more is refused (the fast
/// path leaves it to the key loop, which says why).
#[test]
fn a_book_side_beyond_max_rows_is_refused_in_bybit_order_too() {
    use super::decode::MAX_ROWS;
    let side = |count: usize| {
        let levels: Vec<String> = (0..count)
            .map(|index| format!(r#"["{}.5","0.{:03}"]"#, 10_000 + index, index % 1000))
            .collect();
        format!("[{}]", levels.join(","))
    };
    let message = |bids: usize| {
        format!(
            r#"{{"topic":"orderbook.1000.BTCUSDT","type":"snapshot","ts":1,"data":{{"s":"BTCUSDT","b":{},"a":[],"u":1,"seq":2}},"cts":3}}"#,
            side(bids)
        )
    };
    let mut scratch = Scratch::default();
    let full = message(MAX_ROWS);
    assert!(super::decode::book_in_order(full.as_bytes(), &mut scratch).is_some());
    assert_eq!(scratch.bids.len(), MAX_ROWS);
    assert_eq!(
        scratch.bids[MAX_ROWS - 1],
        (fixed("14095.5"), fixed("0.095"))
    );
    let over = message(MAX_ROWS + 1);
    assert!(super::decode::book_in_order(over.as_bytes(), &mut scratch).is_none());
    assert!(matches!(
        decode(over.as_bytes(), &mut scratch),
        Err(DecodeError::TooManyRows { .. })
    ));
}

#[test]
fn bad_numbers_and_shapes_are_clear_errors() {
    let mut scratch = Scratch::default();
    let book = |b: &str, u: &str| {
        format!(
            r#"{{"topic":"orderbook.1.BTCUSDT","type":"delta","ts":1,"data":{{"s":"BTCUSDT","b":[{b}],"a":[],"u":{u}}}}}"#
        )
    };
    let exponent = decode(book(r#"["1e3","1"]"#, "2").as_bytes(), &mut scratch).unwrap_err();
    assert!(
        matches!(exponent, DecodeError::Decimal { .. }),
        "{exponent}"
    );
    assert!(exponent.to_string().contains("bad decimal"), "{exponent}");
    let too_big = decode(book(r#"["99999999999","1"]"#, "2").as_bytes(), &mut scratch).unwrap_err();
    assert!(too_big.to_string().contains("i64 range"), "{too_big}");
    for u in ["-1", "1.5", "1e3", "18446744073709551616"] {
        let error = decode(book("", u).as_bytes(), &mut scratch).unwrap_err();
        assert!(
            error.to_string().contains("integer") || matches!(error, DecodeError::Json(_)),
            "{u}: {error}"
        );
    }
    let repeated = r#"{"topic":"publicTrade.X","topic":"publicTrade.X","ts":1,"data":[]}"#;
    assert!(matches!(
        decode(repeated.as_bytes(), &mut scratch),
        Err(DecodeError::RepeatedKey { .. })
    ));
    let unknown_type =
        r#"{"topic":"orderbook.1.X","type":"full","ts":1,"data":{"s":"X","b":[],"a":[],"u":1}}"#;
    assert!(matches!(
        decode(unknown_type.as_bytes(), &mut scratch),
        Err(DecodeError::UnknownType { .. })
    ));
    assert_eq!(
        decode(br#"{"ts":1}"#, &mut scratch),
        Err(DecodeError::NeitherTopicNorOp)
    );
    let missing_u =
        r#"{"topic":"orderbook.1.X","type":"delta","ts":1,"data":{"s":"X","b":[],"a":[]}}"#;
    assert_eq!(
        decode(missing_u.as_bytes(), &mut scratch),
        Err(DecodeError::Missing("u"))
    );
    assert!(decode(b"{\"topic\":\"publicTrade.X\"", &mut scratch).is_err());
    assert!(decode(b"[]", &mut scratch).is_err());
}

// ---- The oracle: generated messages, keys shuffled, against serde_json. ----

/// xorshift64*: a deterministic stream for generated messages.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for index in (1..items.len()).rev() {
            let other = self.below(index as u64 + 1) as usize;
            items.swap(index, other);
        }
    }

    fn decimal(&mut self) -> String {
        let whole = self.below(100_000);
        match self.below(3) {
            0 => whole.to_string(),
            1 => format!("{whole}.{:02}", self.below(100)),
            _ => format!("{whole}.{:06}", self.below(1_000_000)),
        }
    }
}

fn object(mut members: Vec<(String, String)>, rng: &mut Rng) -> String {
    rng.shuffle(&mut members);
    let inner: Vec<String> = members
        .into_iter()
        .map(|(key, value)| format!("\"{key}\":{value}"))
        .collect();
    let space = if rng.below(2) == 0 { "" } else { " " };
    format!("{{{space}{}{space}}}", inner.join(&format!(",{space}")))
}

fn levels(rng: &mut Rng) -> String {
    let count = rng.below(6);
    let items: Vec<String> = (0..count)
        .map(|_| format!("[\"{}\",\"{}\"]", rng.decimal(), rng.decimal()))
        .collect();
    format!("[{}]", items.join(","))
}

fn generated(rng: &mut Rng) -> String {
    let symbol = ["BTCUSDT", "ETHUSDT", "BTC-26DEC25"][rng.below(3) as usize];
    let ts = (1_600_000_000_000 + rng.below(1 << 40)).to_string();
    let kind = if rng.below(2) == 0 {
        "\"snapshot\""
    } else {
        "\"delta\""
    };
    match rng.below(4) {
        0 => {
            let data = object(
                vec![
                    ("s".into(), format!("\"{symbol}\"")),
                    ("b".into(), levels(rng)),
                    ("a".into(), levels(rng)),
                    ("u".into(), rng.next().to_string()),
                    ("seq".into(), rng.below(1 << 50).to_string()),
                ],
                rng,
            );
            object(
                vec![
                    ("topic".into(), format!("\"orderbook.50.{symbol}\"")),
                    ("type".into(), kind.into()),
                    ("ts".into(), ts),
                    ("data".into(), data),
                    ("cts".into(), (rng.below(1 << 40) + 1).to_string()),
                ],
                rng,
            )
        }
        1 => {
            let rows: Vec<String> = (0..rng.below(4))
                .map(|_| {
                    let id = if rng.below(2) == 0 {
                        rng.below(u64::MAX).to_string()
                    } else {
                        format!(
                            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                            rng.below(1 << 32),
                            rng.below(1 << 16),
                            rng.below(1 << 16),
                            rng.below(1 << 16),
                            rng.below(1 << 48)
                        )
                    };
                    let side = if rng.below(2) == 0 {
                        "\"Buy\""
                    } else {
                        "\"Sell\""
                    };
                    object(
                        vec![
                            ("T".into(), rng.below(1 << 42).to_string()),
                            ("s".into(), format!("\"{symbol}\"")),
                            ("S".into(), side.into()),
                            ("v".into(), format!("\"{}\"", rng.decimal())),
                            ("p".into(), format!("\"{}\"", rng.decimal())),
                            // The four tick directions, one Bybit may add, and one escaped.
                            (
                                "L".into(),
                                [
                                    "\"PlusTick\"",
                                    "\"MinusTick\"",
                                    "\"ZeroPlusTick\"",
                                    "\"ZeroMinusTick\"",
                                    "\"PlusTickRPI\"",
                                    "\"Plus\\\"Tick\"",
                                ][rng.below(6) as usize]
                                    .into(),
                            ),
                            ("i".into(), format!("\"{id}\"")),
                            ("BT".into(), "false".into()),
                            ("seq".into(), rng.below(1 << 40).to_string()),
                        ],
                        rng,
                    )
                })
                .collect();
            object(
                vec![
                    ("topic".into(), format!("\"publicTrade.{symbol}\"")),
                    ("type".into(), "\"snapshot\"".into()),
                    ("ts".into(), ts),
                    ("data".into(), format!("[{}]", rows.join(","))),
                ],
                rng,
            )
        }
        2 => {
            let mut fields = vec![("symbol".to_owned(), format!("\"{symbol}\""))];
            for name in [
                "bid1Price",
                "bid1Size",
                "ask1Price",
                "ask1Size",
                "markPrice",
                "indexPrice",
                "fundingRate",
                "openInterest",
                "lastPrice",
                "turnover24h",
            ] {
                match rng.below(3) {
                    0 => {}
                    1 => fields.push((name.into(), "\"\"".into())),
                    _ => fields.push((name.into(), format!("\"{}\"", rng.decimal()))),
                }
            }
            let data = object(fields, rng);
            object(
                vec![
                    ("topic".into(), format!("\"tickers.{symbol}\"")),
                    ("type".into(), kind.into()),
                    ("ts".into(), ts),
                    ("cs".into(), rng.below(1 << 40).to_string()),
                    ("data".into(), data),
                ],
                rng,
            )
        }
        _ => {
            let success = rng.below(2) == 0;
            object(
                vec![
                    ("success".into(), success.to_string()),
                    ("ret_msg".into(), "\"subscribe\"".into()),
                    ("conn_id".into(), "\"2324d924\"".into()),
                    ("req_id".into(), format!("\"{}\"", rng.below(1 << 40))),
                    ("op".into(), "\"subscribe\"".into()),
                ],
                rng,
            )
        }
    }
}

fn oracle_decimal(value: &serde_json::Value) -> Fixed {
    fixed(value.as_str().expect("a decimal string"))
}

fn oracle_field(data: &serde_json::Value, name: &str) -> Field {
    match data.get(name).and_then(serde_json::Value::as_str) {
        None => Field::Absent,
        Some("") => Field::Empty,
        Some(text) => Field::Value(fixed(text)),
    }
}

fn oracle_levels(value: &serde_json::Value) -> Vec<(Fixed, Fixed)> {
    value
        .as_array()
        .expect("levels")
        .iter()
        .map(|level| (oracle_decimal(&level[0]), oracle_decimal(&level[1])))
        .collect()
}

#[test]
fn generated_messages_with_their_keys_in_any_order_decode_as_serde_json_reads_them() {
    let mut rng = Rng(0x5eed_b1b1_7e57_0001);
    let mut scratch = Scratch::default();
    for _ in 0..3000 {
        let text = generated(&mut rng);
        let value: serde_json::Value = serde_json::from_str(&text).expect("generated JSON");
        let message =
            decode(text.as_bytes(), &mut scratch).unwrap_or_else(|error| panic!("{error}: {text}"));
        let data = &value["data"];
        match message {
            Message::Book {
                topic,
                snapshot,
                ts_ms,
                cts_ms,
                symbol,
                update_id,
                seq,
            } => {
                assert_eq!(topic, value["topic"].as_str().unwrap().as_bytes());
                assert_eq!(snapshot, value["type"] == "snapshot");
                assert_eq!(ts_ms, value["ts"].as_u64().unwrap());
                assert_eq!(cts_ms, value["cts"].as_u64().unwrap());
                assert_eq!(symbol, data["s"].as_str().unwrap().as_bytes());
                assert_eq!(update_id, data["u"].as_u64().unwrap());
                assert_eq!(seq, data["seq"].as_u64().unwrap());
                assert_eq!(scratch.bids, oracle_levels(&data["b"]), "{text}");
                assert_eq!(scratch.asks, oracle_levels(&data["a"]), "{text}");
            }
            Message::Trades { topic, ts_ms } => {
                assert_eq!(topic, value["topic"].as_str().unwrap().as_bytes());
                assert_eq!(ts_ms, value["ts"].as_u64().unwrap());
                let rows = data.as_array().unwrap();
                assert_eq!(scratch.rows.len(), rows.len());
                for (row, expected) in scratch.rows.iter().zip(rows) {
                    assert_eq!(row.time_ms, expected["T"].as_u64().unwrap());
                    assert_eq!(row.buy, expected["S"] == "Buy");
                    assert_eq!(row.size, oracle_decimal(&expected["v"]));
                    assert_eq!(row.price, oracle_decimal(&expected["p"]));
                    assert_eq!(row.id, trade_id(expected["i"].as_str().unwrap().as_bytes()));
                    assert_eq!(row.seq, expected["seq"].as_u64().unwrap());
                    assert_eq!(
                        &text.as_bytes()[row.symbol.0..row.symbol.1],
                        expected["s"].as_str().unwrap().as_bytes()
                    );
                }
            }
            Message::Ticker {
                topic,
                snapshot,
                ts_ms,
                symbol,
                fields,
            } => {
                assert_eq!(topic, value["topic"].as_str().unwrap().as_bytes());
                assert_eq!(snapshot, value["type"] == "snapshot");
                assert_eq!(ts_ms, value["ts"].as_u64().unwrap());
                assert_eq!(symbol, data["symbol"].as_str().unwrap().as_bytes());
                assert_eq!(fields.bid1_price, oracle_field(data, "bid1Price"));
                assert_eq!(fields.bid1_size, oracle_field(data, "bid1Size"));
                assert_eq!(fields.ask1_price, oracle_field(data, "ask1Price"));
                assert_eq!(fields.ask1_size, oracle_field(data, "ask1Size"));
                assert_eq!(fields.mark_price, oracle_field(data, "markPrice"));
                assert_eq!(fields.index_price, oracle_field(data, "indexPrice"));
                assert_eq!(fields.funding_rate, oracle_field(data, "fundingRate"));
                assert_eq!(fields.open_interest, oracle_field(data, "openInterest"));
            }
            Message::Answer {
                op,
                success,
                ret_msg,
                req_id,
            } => {
                assert_eq!(op, value["op"].as_str().unwrap().as_bytes());
                assert_eq!(success, value["success"].as_bool());
                assert_eq!(ret_msg, value["ret_msg"].as_str().unwrap().as_bytes());
                assert_eq!(req_id, value["req_id"].as_str().unwrap().as_bytes());
            }
            other => panic!("unexpected {other:?}: {text}"),
        }
    }
}

// ---- The book against a plain model over a long random session. ----

/// The orderbook page's rules, written plainly: two maps and the last `u`.
#[derive(Default)]
struct Model {
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    last_u: Option<u64>,
}

impl Model {
    /// Whether the message broke the book (a `u` break or a crossed book).
    fn apply(
        &mut self,
        snapshot: bool,
        u: u64,
        bids: &[(Fixed, Fixed)],
        asks: &[(Fixed, Fixed)],
    ) -> bool {
        if snapshot {
            self.bids.clear();
            self.asks.clear();
        } else {
            match self.last_u {
                None => return false,
                Some(last) if u != last + 1 => {
                    *self = Model::default();
                    return true;
                }
                Some(_) => {}
            }
        }
        for (side, levels) in [(&mut self.bids, bids), (&mut self.asks, asks)] {
            for (price, size) in levels {
                if size.raw() == 0 {
                    side.remove(&price.raw());
                } else {
                    side.insert(price.raw(), size.raw());
                }
            }
        }
        self.last_u = Some(u);
        let crossed = match (self.bids.keys().next_back(), self.asks.keys().next()) {
            (Some(bid), Some(ask)) => bid >= ask,
            _ => false,
        };
        if crossed {
            *self = Model::default();
        }
        crossed
    }
}

/// A book rebuilt from the events alone, as a strategy would.
#[derive(Default)]
struct FromEvents {
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
}

impl FromEvents {
    fn apply(&mut self, event: &Event) {
        match event.body() {
            Body::SnapshotBegin(_) | Body::Gap(_) => {
                self.bids.clear();
                self.asks.clear();
            }
            Body::BookLevel(level) => {
                let side = if level.side() == Side::Bid {
                    &mut self.bids
                } else {
                    &mut self.asks
                };
                if level.size.raw() == 0 {
                    side.remove(&level.price.raw());
                } else {
                    side.insert(level.price.raw(), level.size.raw());
                }
            }
            _ => {}
        }
    }
}

fn header() -> EventHeader {
    EventHeader {
        exchange_ts_ns: 1,
        recv_ts_ns: 2,
        venue_seq: 0,
        instrument_id: 0,
        venue_id: 0,
        kind: EventKind::Quote,
        flags: 0,
    }
}

#[test]
fn the_book_follows_a_plain_model_over_a_long_session_with_restarts_and_breaks() {
    let mut rng = Rng(0xb00c_5e55_1011_2233);
    let mut sync = BookSync::new(64);
    let mut model = Model::default();
    let mut rebuilt = FromEvents::default();
    let mut u: u64 = 100;
    let (mut snapshots, mut breaks, mut crossed, mut restarts, mut early) = (0, 0, 0, 0, 0);
    let mid = 10_000i64;
    let price = |rng: &mut Rng, bid: bool| {
        let offset = rng.below(20) as i64 + 1;
        let units = if bid { mid - offset } else { mid + offset };
        // Now and then a price across the middle, which may cross the book.
        let units = if rng.below(3000) == 0 {
            units + if bid { 25 } else { -25 }
        } else {
            units
        };
        Fixed::from_units(units).unwrap()
    };
    for step in 0..20_000 {
        let roll = rng.below(1000);
        let snapshot = step == 1 || roll < 30;
        let (update_id, what) = if snapshot && roll < 8 {
            (1, "restart")
        } else if !snapshot && roll < 45 {
            (u + 2 + rng.below(3), "skip")
        } else if snapshot {
            (u + 1, "snapshot")
        } else {
            (u + 1, "delta")
        };
        let mut bids = Vec::new();
        let mut asks = Vec::new();
        let count = if snapshot {
            1 + rng.below(15)
        } else {
            rng.below(5)
        };
        for _ in 0..count {
            let size = if !snapshot && rng.below(4) == 0 {
                Fixed::ZERO
            } else {
                Fixed::from_units(rng.below(1000) as i64 + 1).unwrap()
            };
            bids.push((price(&mut rng, true), size));
            let size = if !snapshot && rng.below(4) == 0 {
                Fixed::ZERO
            } else {
                Fixed::from_units(rng.below(1000) as i64 + 1).unwrap()
            };
            asks.push((price(&mut rng, false), size));
        }
        let was_synced = model.last_u.is_some();
        let broke = model.apply(snapshot, update_id, &bids, &asks);
        let mut events = Vec::new();
        let outcome = sync.apply(snapshot, update_id, &bids, &asks, header(), &mut |event| {
            events.push(event)
        });
        for event in &events {
            rebuilt.apply(event);
        }
        match outcome.applied {
            Applied::Snapshot => snapshots += 1,
            Applied::Gap { expected, received } => {
                breaks += 1;
                assert_eq!((expected, received), (u + 1, update_id));
            }
            Applied::Crossed => crossed += 1,
            Applied::BeforeSnapshot => early += 1,
            Applied::Delta => {}
        }
        if what == "restart" {
            restarts += 1;
        }
        assert_eq!(outcome.applied.broke(), broke, "step {step} ({what})");
        assert_eq!(
            outcome.applied == Applied::BeforeSnapshot,
            !snapshot && !was_synced,
            "step {step}"
        );
        let book_bids: BTreeMap<i64, i64> = sync
            .book()
            .levels(crate::book::BookSide::Bid)
            .map(|(p, s)| (p.raw(), s.raw()))
            .collect();
        let book_asks: BTreeMap<i64, i64> = sync
            .book()
            .levels(crate::book::BookSide::Ask)
            .map(|(p, s)| (p.raw(), s.raw()))
            .collect();
        assert_eq!(book_bids, model.bids, "step {step} ({what})");
        assert_eq!(book_asks, model.asks, "step {step} ({what})");
        assert_eq!(rebuilt.bids, model.bids, "events, step {step} ({what})");
        assert_eq!(rebuilt.asks, model.asks, "events, step {step} ({what})");
        assert_eq!(sync.last_update_id(), model.last_u, "step {step}");
        if let Some(last) = events.last() {
            assert!(last.header.flags & crate::event::flags::LAST != 0);
            assert!(events[..events.len() - 1]
                .iter()
                .all(|event| event.header.flags & crate::event::flags::LAST == 0));
        }
        if broke {
            assert!(matches!(
                events.last().map(Event::body),
                Some(Body::Gap(gap)) if gap.reason() == GapReason::SequenceBreak
            ));
        }
        if !matches!(outcome.applied, Applied::BeforeSnapshot) {
            u = update_id;
        }
        // After a break the next message waits for a snapshot; the session goes on from it.
        if broke {
            u = update_id;
        }
    }
    // The session exercised every rule.
    assert!(snapshots > 50 && breaks > 50 && crossed > 5 && restarts > 10 && early > 50,
        "{snapshots} snapshots, {breaks} breaks, {crossed} crossed, {restarts} restarts, {early} early deltas");
}

// ---- The feed. ----

fn feed(channels: &[&str], symbols: &[&str]) -> (BybitFeed, FeedCounters) {
    BybitFeed::new(FeedConfig {
        venue_id: 3,
        venue_name: "bybit".into(),
        symbols: symbols.iter().map(|s| s.to_string()).collect(),
        channels: channels.iter().map(|c| c.to_string()).collect(),
        instrument_base: 10,
    })
}

fn run(feed: &mut BybitFeed, conn: ConnId, messages: &[&str]) -> Vec<Event> {
    let (mut producer, mut consumer) = crate::ring::ring::<Event>(4096);
    let mut lost = false;
    let mut sink = EventSink::new(&mut producer, &mut lost);
    for message in messages {
        feed.on_message(conn, 7, message.as_bytes(), &mut sink);
    }
    sink.publish();
    std::iter::from_fn(|| consumer.try_pop()).collect()
}

fn book_message(kind: &str, u: u64, bids: &str, asks: &str) -> String {
    format!(
        r#"{{"topic":"orderbook.50.BTCUSDT","type":"{kind}","ts":1000,"data":{{"s":"BTCUSDT","b":[{bids}],"a":[{asks}],"u":{u},"seq":5}},"cts":999}}"#
    )
}

#[test]
fn the_feed_builds_the_documented_delta_on_a_snapshot_and_publishes_quotes() {
    let (mut feed, counters) = feed(&["orderbook.50"], &["BTCUSDT"]);
    let snapshot = book_message(
        "snapshot",
        177400506,
        r#"["30247.20","1"],["30240.00","2"]"#,
        r#"["30248.70","3"],["30249.60","4"]"#,
    );
    let events = run(&mut feed, 1, &[&snapshot, DOC_BOOK_DELTA]);
    let book = feed.book(0).expect("in sync");
    let bids: Vec<_> = book.levels(crate::book::BookSide::Bid).collect();
    assert_eq!(bids[0], (fixed("30247.20"), fixed("30.028")));
    assert!(book
        .get(crate::book::BookSide::Bid, fixed("30240.00"))
        .is_none());
    assert!(book
        .get(crate::book::BookSide::Ask, fixed("30248.70"))
        .is_none());
    assert_eq!(book.best_ask(), Some((fixed("30249.30"), fixed("0.892"))));
    // Snapshot: begin, 4 levels, end, quote; the delta: its changed levels and a quote.
    assert_eq!(events[0].kind(), EventKind::SnapshotBegin);
    assert!(events
        .iter()
        .all(|e| e.header.instrument_id == 10 && e.header.venue_id == 3));
    assert!(events.iter().all(|e| e.header.recv_ts_ns == 7));
    let quote = events.iter().rev().find_map(|e| match e.body() {
        Body::Quote(quote) => Some(quote),
        _ => None,
    });
    let quote = quote.expect("a derived quote");
    assert_eq!(
        (quote.bid_px, quote.ask_px),
        (fixed("30247.20"), fixed("30249.30"))
    );
    assert_eq!(counters.book_syncs.get(), 1);
    assert_eq!(counters.message("orderbook"), 2);
    // The delta's deletes named levels the snapshot had: nothing refused.
    assert_eq!(counters.book_refused.get(), 0);
    // `cts` is the exchange time.
    assert_eq!(events[0].header.exchange_ts_ns, 999_000_000);
}

#[test]
fn a_break_in_u_is_a_gap_and_a_resubscription_and_a_restart_snapshot_rebuilds() {
    let (mut feed, counters) = feed(&["publicTrade", "orderbook.50"], &["BTCUSDT"]);
    let early = book_message("delta", 5, r#"["1","1"]"#, "");
    let snapshot = book_message("snapshot", 10, r#"["100","1"]"#, r#"["101","1"]"#);
    let skipped = book_message("delta", 12, r#"["100","2"]"#, "");
    let events = run(&mut feed, 4, &[&early, &snapshot, &skipped]);
    assert!(feed.book(0).is_none(), "the book waits for a snapshot");
    let Some(Body::Gap(gap)) = events.last().map(Event::body) else {
        panic!("a gap: {events:?}");
    };
    assert_eq!(
        (gap.reason(), gap.expected_seq, gap.received_seq),
        (GapReason::SequenceBreak, 11, 12)
    );
    assert_eq!(counters.book_gaps.get(), 1);
    let reply = feed.take_reply().expect("a resubscription");
    assert_eq!(reply.kind, ReplyKind::Resubscribe);
    assert_eq!(reply.id, (4 << 32) | 1, "connection 4, stream 1 (the book)");
    // Deltas after the break change nothing; `u` = 1, the restart snapshot, rebuilds.
    let after = book_message("delta", 13, r#"["100","3"]"#, "");
    let restart = book_message("snapshot", 1, r#"["200","1"]"#, r#"["201","1"]"#);
    let next = book_message("delta", 2, r#"["199","1"]"#, "");
    run(&mut feed, 4, &[&after, &restart, &next]);
    let book = feed.book(0).expect("rebuilt");
    assert_eq!(book.best_bid(), Some((fixed("200"), fixed("1"))));
    assert_eq!(book.len(crate::book::BookSide::Bid), 2);
}

#[test]
fn bad_input_is_counted_and_skipped() {
    let (mut feed, counters) = feed(&["orderbook.50"], &["BTCUSDT"]);
    let snapshot = book_message("snapshot", 10, r#"["100","1"]"#, r#"["101","1"]"#);
    let absent = book_message("delta", 11, r#"["99","0"]"#, "");
    let crossing = book_message("delta", 12, r#"["102","1"]"#, "");
    let other_symbol = snapshot.replace("orderbook.50.BTCUSDT", "orderbook.50.ETHUSDT");
    // `data.s` a suffix of the topic's symbol but not it.
    let suffix = snapshot.replace(r#""s":"BTCUSDT""#, r#""s":"USDT""#);
    let exponent = book_message("delta", 13, r#"["1e2","1"]"#, "");
    let events = run(
        &mut feed,
        1,
        &[
            &snapshot,
            &absent,
            &other_symbol,
            &suffix,
            &exponent,
            "not json",
            &crossing,
        ],
    );
    assert_eq!(
        counters.book_refused.get(),
        1,
        "a delete of a level not held"
    );
    assert_eq!(counters.unknown_symbol.get(), 1, "a topic not subscribed");
    assert_eq!(counters.malformed.get(), 3);
    assert!(feed.take_malformed().is_some());
    assert_eq!(counters.book_gaps.get(), 1, "the crossed book");
    assert!(matches!(events.last().map(Event::body), Some(Body::Gap(_))));
    assert_eq!(
        feed.take_reply().map(|reply| reply.kind),
        Some(ReplyKind::Resubscribe)
    );
}

#[test]
fn answers_are_relayed_pongs_counted_and_refusals_carry_ret_msg() {
    let (mut feed, counters) = feed(&["publicTrade"], &["BTCUSDT"]);
    run(
        &mut feed,
        2,
        &[
            r#"{"success":true,"ret_msg":"","conn_id":"c1","req_id":"8589934593","op":"subscribe"}"#,
            r#"{"success":false,"ret_msg":"error:handler not found,topic:publicTrade.NOPE","conn_id":"c1","req_id":"8589934594","op":"subscribe"}"#,
            r#"{"success":true,"ret_msg":"pong","conn_id":"c1","op":"ping"}"#,
            r#"{"req_id":"","op":"pong","args":["1675418560633"],"conn_id":"c1"}"#,
            r#"{"success":true,"ret_msg":"","conn_id":"c1","req_id":"resubscribe","op":"subscribe"}"#,
        ],
    );
    let accepted = feed.take_reply().expect("the first answer");
    assert_eq!((accepted.id, accepted.error), (8589934593, None));
    let refused = feed.take_reply().expect("the refusal");
    assert_eq!((refused.id, refused.error), (8589934594, Some(REFUSED)));
    assert!(
        refused.message().contains("handler not found"),
        "{}",
        refused.message()
    );
    assert!(
        feed.take_reply().is_none(),
        "pongs and a resubscription's answer relay nothing"
    );
    assert_eq!(counters.message("pong"), 2);
    assert_eq!(counters.message("refused"), 1);
    assert_eq!(counters.message("answer"), 2);
}

#[test]
fn trades_and_merged_tickers_make_their_events() {
    let (mut feed, counters) = feed(&["publicTrade", "tickers"], &["BTCUSDT"]);
    let delta_first = r#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","bid1Price":"1"},"cs":1,"ts":1}"#;
    let delta = r#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","bid1Price":"66666.50","markPrice":"66660.00"},"cs":2,"ts":1760325052730}"#;
    let events = run(
        &mut feed,
        1,
        &[DOC_TRADE, delta_first, DOC_TICKER_PERPETUAL, delta],
    );
    let Body::Trade(trade) = events[0].body() else {
        panic!("a trade first: {events:?}");
    };
    assert_eq!(
        (trade.price, trade.size, trade.aggressor()),
        (fixed("16578.50"), fixed("0.001"), Side::Bid)
    );
    assert_eq!(
        trade.trade_id,
        0x20f4_3950_d8dd_5b31 ^ 0x9112_a178_eb60_23af
    );
    assert_eq!(
        (events[0].header.venue_seq, events[0].header.exchange_ts_ns),
        (1783284617, 1_672_304_486_865_000_000)
    );
    assert_eq!(
        counters.duplicates.get(),
        1,
        "the delta before the ticker's snapshot"
    );
    let kinds: Vec<_> = events[1..].iter().map(|e| e.body()).collect();
    // The snapshot: quote, mark, index; the delta: the merged quote and the mark.
    let Body::Quote(quote) = kinds[0] else {
        panic!("{kinds:?}")
    };
    assert_eq!(
        (quote.bid_px, quote.ask_sz),
        (fixed("66666.60"), fixed("23775.469"))
    );
    assert!(
        matches!(kinds[1], Body::Reference(r) if r.kind() == ReferenceKind::Mark && r.price == fixed("66666.60"))
    );
    assert!(
        matches!(kinds[2], Body::Reference(r) if r.kind() == ReferenceKind::Index && r.price == fixed("115418.19"))
    );
    let Body::Quote(merged) = kinds[3] else {
        panic!("{kinds:?}")
    };
    assert_eq!(
        (merged.bid_px, merged.bid_sz, merged.ask_px),
        (fixed("66666.50"), fixed("23789.165"), fixed("66666.70"))
    );
    assert!(
        matches!(kinds[4], Body::Reference(r) if r.kind() == ReferenceKind::Mark && r.price == fixed("66660.00"))
    );
    assert_eq!(kinds.len(), 5);
    let ticker = feed.ticker(0).expect("merged");
    assert_eq!(ticker.funding_rate, Some(fixed("-0.005")));
    assert_eq!(ticker.open_interest, Some(fixed("492373.72")));
}

#[test]
fn the_documented_liquidation_is_a_liquidation_event() {
    let (mut feed, counters) = feed(&["allLiquidation"], &["ROSEUSDT"]);
    // A row for another symbol than the topic's is counted and skipped.
    let other = DOC_LIQUIDATION.replace("\"s\": \"ROSEUSDT\"", "\"s\": \"BTCUSDT\"");
    let events = run(&mut feed, 1, &[DOC_LIQUIDATION, &other]);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = events[0];
    let Body::Liquidation(liquidation) = event.body() else {
        panic!("a liquidation: {event:?}");
    };
    // "S": "Sell": a short position was liquidated.
    assert_eq!(
        (
            liquidation.position_side(),
            liquidation.price,
            liquidation.size
        ),
        (Side::Ask, fixed("0.04499"), fixed("20000"))
    );
    assert_eq!(event.kind(), EventKind::Liquidation);
    assert_eq!(
        (
            event.header.exchange_ts_ns,
            event.header.recv_ts_ns,
            event.header.venue_seq
        ),
        (1_739_502_302_929_000_000, 7, 0)
    );
    assert_eq!((event.header.venue_id, event.header.instrument_id), (3, 10));
    assert_eq!(event.header.flags & flags::LAST, flags::LAST);
    assert_eq!(counters.unknown_symbol.get(), 1);
}

#[test]
fn a_second_connection_is_a_duplicate_until_its_snapshot_takes_the_book_over() {
    let (mut feed, counters) = feed(&["orderbook.50"], &["BTCUSDT"]);
    let first = book_message("snapshot", 10, r#"["100","1"]"#, r#"["101","1"]"#);
    let second = book_message("snapshot", 20, r#"["100","5"]"#, r#"["101","1"]"#);
    run(&mut feed, 1, &[&first]);
    run(
        &mut feed,
        2,
        &[&book_message("delta", 11, r#"["100","2"]"#, "")],
    );
    assert_eq!(counters.duplicates.get(), 1);
    run(&mut feed, 2, &[&second]);
    assert_eq!(
        feed.book(0).unwrap().best_bid(),
        Some((fixed("100"), fixed("5")))
    );
    run(
        &mut feed,
        1,
        &[&book_message("delta", 11, r#"["100","2"]"#, "")],
    );
    assert_eq!(
        counters.duplicates.get(),
        2,
        "the old connection no longer passes"
    );
    // The owner drops: a gap, and the book waits for the next connection's snapshot.
    let (mut producer, mut consumer) = crate::ring::ring::<Event>(64);
    let mut lost = false;
    let mut sink = EventSink::new(&mut producer, &mut lost);
    feed.on_disconnect(2, 10..11, 9, &mut sink);
    sink.publish();
    let gap = consumer.try_pop().expect("a gap");
    assert!(matches!(gap.body(), Body::Gap(g) if g.reason() == GapReason::Reconnect));
    assert!(feed.book(0).is_none());
}
