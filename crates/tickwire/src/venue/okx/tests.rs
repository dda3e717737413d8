//! The decoder and the book against the documentation's examples (verbatim), an oracle
//! (`serde_json`) over generated messages, and a long random session against a plain
//! reference book whose checksums are computed independently (a bitwise CRC32 over strings
//! formatted here).

use super::book::{Applied, BookSync, Update, Verified};
use super::decode::{decode, BookChannel, Channel, DecodeError, Field, Message, PosSide, Scratch};
use crate::event::{Body, Event, EventHeader, EventKind};
use crate::fixed::Fixed;
use std::collections::BTreeMap;

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("a decimal")
}

/// The page's "Push Data Example: Full Snapshot", verbatim.
const BOOKS_SNAPSHOT: &str = r#"{
  "arg": {
    "channel": "books",
    "instId": "BTC-USDT"
  },
  "action": "snapshot",
  "data": [
    {
      "asks": [
        ["8476.98", "415", "0", "13"],
        ["8477", "7", "0", "2"],
        ["8477.34", "85", "0", "1"],
        ["8477.56", "1", "0", "1"],
        ["8505.84", "8", "0", "1"],
        ["8506.37", "85", "0", "1"],
        ["8506.49", "2", "0", "1"],
        ["8506.96", "100", "0", "2"]
      ],
      "bids": [
        ["8476.97", "256", "0", "12"],
        ["8475.55", "101", "0", "1"],
        ["8475.54", "100", "0", "1"],
        ["8475.3", "1", "0", "1"],
        ["8447.32", "6", "0", "1"],
        ["8447.02", "246", "0", "1"],
        ["8446.83", "24", "0", "1"],
        ["8446", "95", "0", "3"]
      ],
      "ts": "1597026383085",
      "checksum": -855196043,
      "prevSeqId": -1,
      "seqId": 123456
    }
  ]
}"#;

/// The page's "Push Data Example: Incremental Data", verbatim.
const BOOKS_UPDATE: &str = r#"{
  "arg": {
    "channel": "books",
    "instId": "BTC-USDT"
  },
  "action": "update",
  "data": [
    {
      "asks": [
        ["8476.98", "415", "0", "13"],
        ["8477", "7", "0", "2"],
        ["8477.34", "85", "0", "1"],
        ["8477.56", "1", "0", "1"],
        ["8505.84", "8", "0", "1"],
        ["8506.37", "85", "0", "1"],
        ["8506.49", "2", "0", "1"],
        ["8506.96", "100", "0", "2"]
      ],
      "bids": [
        ["8476.97", "256", "0", "12"],
        ["8475.55", "101", "0", "1"],
        ["8475.54", "100", "0", "1"],
        ["8475.3", "1", "0", "1"],
        ["8447.32", "6", "0", "1"],
        ["8447.02", "246", "0", "1"],
        ["8446.83", "24", "0", "1"],
        ["8446", "95", "0", "3"]
      ],
      "ts": "1597026383085",
      "checksum": -855196043,
      "prevSeqId": 123456,
      "seqId": 123457
    }
  ]
}"#;

/// "Push Data Example of bbo-tbt channel", verbatim.
const BBO_TBT: &str = r#"{
  "arg": {
    "channel": "bbo-tbt",
    "instId": "BCH-USDT-SWAP"
  },
  "data": [
    {
      "asks": [
        [
          "111.06","55154","0","2"
        ]
      ],
      "bids": [
        [
          "111.05","57745","0","2"
        ]
      ],
      "ts": "1670324386802",
      "seqId": 363996337
    }
  ]
}"#;

/// "Push Data Example of books5 channel", verbatim.
const BOOKS5: &str = r#"{
  "arg": {
    "channel": "books5",
    "instId": "BCH-USDT-SWAP"
  },
  "data": [
    {
      "asks": [
        ["111.06","55154","0","2"],
        ["111.07","53276","0","2"],
        ["111.08","72435","0","2"],
        ["111.09","70312","0","2"],
        ["111.1","67272","0","2"]],
      "bids": [
        ["111.05","57745","0","2"],
        ["111.04","57109","0","2"],
        ["111.03","69563","0","2"],
        ["111.02","71248","0","2"],
        ["111.01","65090","0","2"]],
      "instId": "BCH-USDT-SWAP",
      "ts": "1670324386802",
      "seqId": 363996337
    }
  ]
}"#;

/// "Trades channel", push data example, verbatim.
const TRADES: &str = r#"{
  "arg": {
    "channel": "trades",
    "instId": "BTC-USDT"
  },
  "data": [
    {
      "instId": "BTC-USDT",
      "tradeId": "130639474",
      "px": "42219.9",
      "sz": "0.12060306",
      "side": "buy",
      "ts": "1630048897897",
      "count": "3",
      "source": "0",
      "seqId": 1234
    }
  ]
}"#;

/// "All trades channel", push data example, verbatim.
const TRADES_ALL: &str = r#"{
  "arg": {
    "channel": "trades-all",
    "instId": "BTC-USDT"
  },
  "data": [
    {
      "instId": "BTC-USDT",
      "tradeId": "130639474",
      "px": "42219.9",
      "sz": "0.12060306",
      "side": "buy",
      "source": "0",
      "ts": "1630048897897"
    }
  ]
}"#;

/// "Tickers channel", push data example, verbatim.
const TICKERS: &str = r#"{
  "arg": {
    "channel": "tickers",
    "instId": "BTC-USDT"
  },
  "data": [
    {
      "instType": "SPOT",
      "instId": "BTC-USDT",
      "last": "9999.99",
      "lastSz": "0.1",
      "askPx": "9999.99",
      "askSz": "11",
      "bidPx": "8888.88",
      "bidSz": "5",
      "open24h": "9000",
      "high24h": "10000",
      "low24h": "8888.88",
      "volCcy24h": "2222",
      "vol24h": "2222",
      "sodUtc0": "2222",
      "sodUtc8": "2222",
      "ts": "1597026383085"
    }
  ]
}"#;

/// "Mark price channel", push data example, verbatim.
const MARK_PRICE: &str = r#"{
  "arg": {
    "channel": "mark-price",
    "instId": "LTC-USD-190628"
  },
  "data": [
    {
      "instType": "FUTURES",
      "instId": "LTC-USD-190628",
      "markPx": "0.1",
      "ts": "1597026383085"
    }
  ]
}"#;

/// "Index tickers channel", push data example, verbatim.
const INDEX_TICKERS: &str = r#"{
  "arg": {
    "channel": "index-tickers",
    "instId": "BTC-USDT"
  },
  "data": [
    {
      "instId": "BTC-USDT",
      "idxPx": "0.1",
      "high24h": "0.5",
      "low24h": "0.1",
      "open24h": "0.1",
      "sodUtc0": "0.1",
      "sodUtc8": "0.1",
      "ts": "1597026383085"
    }
  ]
}"#;

/// "Funding rate channel", push data example, verbatim.
const FUNDING_RATE: &str = r#"{
   "arg":{
      "channel":"funding-rate",
      "instId":"BTC-USD-SWAP"
   },
   "data":[
      {
         "formulaType": "noRate",
         "fundingRate":"0.0001875391284828",
         "fundingTime":"1700726400000",
         "impactValue": "",
         "instId":"BTC-USD-SWAP",
         "instType":"SWAP",
         "interestRate": "",
         "method": "current_period",
         "maxFundingRate":"0.00375",
         "minFundingRate":"-0.00375",
         "nextFundingRate":"",
         "nextFundingTime":"1700755200000",
         "premium": "0.0001233824646391",
         "settFundingRate":"0.0001699799259033",
         "settState":"settled",
         "ts":"1700724675402"
      }
   ]
}"#;

/// "Open interest channel", push data example, verbatim.
const OPEN_INTEREST: &str = r#"{
    "arg": {
        "channel": "open-interest",
        "instId": "BTC-USDT-SWAP"
    },
    "data": [
        {
            "instId": "BTC-USDT-SWAP",
            "instType": "SWAP",
            "oi": "2216113.01000000309",
            "oiCcy": "22161.1301000000309",
            "oiUsd": "1939251795.54769270396321",
            "ts": "1743041250440"
        }
    ]
}"#;

/// "Liquidation orders channel", response example, verbatim.
const LIQUIDATION_ORDERS: &str = r#"{
    "id": "1512",
    "arg": {
        "channel": "liquidation-orders",
        "instType": "SWAP"
    },
    "data": [
        {
            "details": [
                {
                    "bkLoss": "0",
                    "bkPx": "0.007831",
                    "ccy": "",
                    "posSide": "short",
                    "side": "buy",
                    "sz": "13",
                    "ts": "1692266434010"
                }
            ],
            "instFamily": "IOST-USDT",
            "instId": "IOST-USDT-SWAP",
            "instType": "SWAP",
            "uly": "IOST-USDT"
        }
    ]
}"#;

/// "Order book channel": the response and the failure examples, verbatim.
const SUBSCRIBED: &str = r#"{
  "id": "1512",
  "event": "subscribe",
  "arg": {
    "channel": "books",
    "instId": "BTC-USDT"
  },
  "connId": "a4d3ae55"
}"#;

const FAILURE: &str = r#"{
  "id": "1512",
  "event": "error",
  "code": "60012",
  "msg": "Invalid request: {\"op\": \"subscribe\", \"argss\":[{ \"channel\" : \"books\", \"instId\" : \"BTC-USD-191227\"}]}",
  "connId": "a4d3ae55"
}"#;

/// "Login": the success and the failure examples, verbatim.
const LOGIN_OK: &str = r#"{
  "event": "login",
  "code": "0",
  "msg": "",
  "connId": "a4d3ae55"
}"#;

const LOGIN_FAILED: &str = r#"{
  "event": "error",
  "code": "60009",
  "msg": "Login failed.",
  "connId": "a4d3ae55"
}"#;

fn header() -> EventHeader {
    EventHeader {
        exchange_ts_ns: 1,
        recv_ts_ns: 2,
        venue_seq: 0,
        instrument_id: 7,
        venue_id: 1,
        kind: EventKind::Quote,
        flags: 0,
    }
}

/// Decodes a book message and applies it to `sync`; returns the outcome and the events.
fn apply(sync: &mut BookSync, text: &str) -> (super::book::Outcome, Vec<Event>) {
    let mut scratch = Scratch::default();
    let message = decode(text.as_bytes(), &mut scratch).expect("decodes");
    let Message::Book {
        snapshot,
        checksum,
        prev_seq_id,
        seq_id,
        ..
    } = message
    else {
        panic!("not a book: {message:?}");
    };
    let mut events = Vec::new();
    let outcome = sync.apply(
        Update {
            snapshot,
            checksum,
            prev_seq_id,
            seq_id,
        },
        &scratch.bids,
        &scratch.asks,
        text.as_bytes(),
        header(),
        &mut |event| events.push(event),
    );
    (outcome, events)
}

fn gaps(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|event| match event.body() {
            Body::Gap(gap) => Some((gap.expected_seq, gap.received_seq)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_book_examples_decode_as_the_page_describes_them() {
    let mut scratch = Scratch::default();
    let message = decode(BOOKS_SNAPSHOT.as_bytes(), &mut scratch).expect("decodes");
    assert_eq!(
        message,
        Message::Book {
            channel: BookChannel::Books,
            inst_id: b"BTC-USDT",
            snapshot: true,
            ts_ms: 1_597_026_383_085,
            checksum: Some(-855_196_043),
            prev_seq_id: Some(-1),
            seq_id: Some(123_456),
        }
    );
    assert_eq!(scratch.asks.len(), 8);
    assert_eq!(scratch.bids.len(), 8);
    assert_eq!(scratch.asks[1].price, fixed("8477"));
    assert_eq!(
        scratch.asks[1].price_str(BOOKS_SNAPSHOT.as_bytes()),
        b"8477"
    );
    assert_eq!(scratch.bids[7].size_str(BOOKS_SNAPSHOT.as_bytes()), b"95");
    for (text, channel) in [
        (BBO_TBT, BookChannel::BboTbt),
        (BOOKS5, BookChannel::Books5),
    ] {
        let message = decode(text.as_bytes(), &mut scratch).expect("decodes");
        assert_eq!(
            message,
            Message::Book {
                channel,
                inst_id: b"BCH-USDT-SWAP",
                snapshot: true,
                ts_ms: 1_670_324_386_802,
                checksum: None,
                prev_seq_id: None,
                seq_id: Some(363_996_337),
            }
        );
        assert_eq!(scratch.bids[0].price, fixed("111.05"));
        assert_eq!(scratch.asks[0].size, fixed("55154"));
    }
}

/// The page's own snapshot example carries a checksum (-855196043) that is not its levels'
/// (zlib's `crc32` of its check string, `8476.97:256:8476.98:415:8475.55:101:...`, is
/// -2102840145): fed verbatim, the book is refused as a real feed's would be.
#[test]
fn the_page_example_checksum_is_not_that_of_its_levels_and_is_caught() {
    let mut sync = BookSync::new(BookChannel::Books);
    let (outcome, events) = apply(&mut sync, BOOKS_SNAPSHOT);
    assert_eq!(
        outcome.applied,
        Applied::Mismatch {
            computed: -2_102_840_145,
            venue: -855_196_043
        }
    );
    assert!(!sync.in_sync());
    assert_eq!(
        gaps(&events),
        [(
            u64::from(-2_102_840_145i32 as u32),
            u64::from(-855_196_043i32 as u32)
        )]
    );
    assert_eq!(events.len(), 1, "nothing but the gap is published");
    // The update that follows it changes nothing: the book waits for a snapshot.
    let (outcome, events) = apply(&mut sync, BOOKS_UPDATE);
    assert_eq!(outcome.applied, Applied::BeforeSnapshot);
    assert!(events.is_empty());
}

/// The same examples with the checksum the deprecation notice says production sends (0):
/// the snapshot builds the book, the update (its levels unchanged) follows on the `seqId`
/// chain and publishes no level.
#[test]
fn the_page_examples_with_the_deprecated_checksum_of_zero() {
    let mut sync = BookSync::new(BookChannel::Books);
    let snapshot = BOOKS_SNAPSHOT.replace("-855196043", "0");
    let (outcome, events) = apply(&mut sync, &snapshot);
    assert_eq!(outcome.applied, Applied::Snapshot);
    assert_eq!(outcome.verified, Verified::NotChecked);
    assert_eq!(sync.checksum(), -2_102_840_145);
    assert_eq!(events.len(), 1 + 16 + 1 + 1);
    assert_eq!(events[0].header.venue_seq, 123_456);
    let (outcome, events) = apply(&mut sync, &BOOKS_UPDATE.replace("-855196043", "0"));
    assert_eq!(outcome.applied, Applied::Update);
    assert!(events.is_empty(), "{}", events.len());
    // With the true checksum, the update is verified.
    let (outcome, _) = apply(
        &mut sync,
        &BOOKS_UPDATE
            .replace("-855196043", "-2102840145")
            .replace("\"prevSeqId\": 123456", "\"prevSeqId\": 123457")
            .replace("\"seqId\": 123457", "\"seqId\": 123458"),
    );
    assert_eq!(outcome.applied, Applied::Update);
    assert_eq!(outcome.verified, Verified::Yes);
}

/// A book message of an incremental channel, levels as `(price, size)` strings.
fn book_message(
    action: &str,
    prev: i64,
    seq: i64,
    bids: &[(&str, &str)],
    asks: &[(&str, &str)],
    checksum: Option<i32>,
) -> String {
    let side = |levels: &[(&str, &str)]| {
        levels
            .iter()
            .map(|(price, size)| format!(r#"["{price}","{size}","0","1"]"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let checksum = checksum.map_or(String::new(), |value| format!(r#","checksum":{value}"#));
    format!(
        r#"{{"arg":{{"channel":"books","instId":"BTC-USDT"}},"action":"{action}","data":[{{"asks":[{}],"bids":[{}],"ts":"1597026383085"{checksum},"prevSeqId":{prev},"seqId":{seq}}}]}}"#,
        side(asks),
        side(bids)
    )
}

/// "Sequence ID", its example verbatim: a snapshot (-1, 10), a normal update (10, 15), an
/// update with no change (15, 15), the reset (15, 3) and a normal update after it (3, 5). None
/// is a break. Then a `prevSeqId` from the past is.
#[test]
fn the_sequence_id_example() {
    let mut sync = BookSync::new(BookChannel::Books);
    let steps = [
        ("snapshot", -1, 10, vec![("100", "1")], vec![("101", "1")]),
        ("update", 10, 15, vec![("100", "2")], vec![]),
        ("update", 15, 15, vec![], vec![]),
        ("update", 15, 3, vec![], vec![("101.5", "3")]),
        ("update", 3, 5, vec![("100", "0")], vec![]),
    ];
    for (action, prev, seq, bids, asks) in steps {
        let (outcome, events) = apply(
            &mut sync,
            &book_message(action, prev, seq, &bids, &asks, None),
        );
        assert!(
            !outcome.applied.broke(),
            "{action} {prev} {seq}: {outcome:?}"
        );
        assert!(gaps(&events).is_empty());
    }
    assert_eq!(sync.last_seq(), 5);
    assert_eq!(sync.book().best_bid(), None);
    assert_eq!(sync.book().best_ask(), Some((fixed("101"), fixed("1"))));
    // A `prevSeqId` from the past (3, as the reset's) is a break.
    let (outcome, events) = apply(&mut sync, &book_message("update", 3, 6, &[], &[], None));
    assert_eq!(
        outcome.applied,
        Applied::Gap {
            expected: 5,
            received: 3
        }
    );
    assert_eq!(gaps(&events), [(5, 3)]);
    assert!(!sync.in_sync());
}

/// A corrupted message: a level's size changed in transit, its checksum the one the venue
/// computed for the true book. The mismatch is caught on that very message.
#[test]
fn a_corrupted_level_is_caught_by_the_checksum() {
    let mut sync = BookSync::new(BookChannel::Books);
    let bids = [("100.5", "1.50"), ("100", "2")];
    let asks = [("101", "0.5000")];
    let mut reference = BookSync::new(BookChannel::Books);
    apply(
        &mut reference,
        &book_message("snapshot", -1, 1, &bids, &asks, None),
    );
    let good = reference.checksum();
    let (outcome, _) = apply(
        &mut sync,
        &book_message("snapshot", -1, 1, &bids, &asks, Some(good)),
    );
    assert_eq!(outcome.verified, Verified::Yes);
    // `0.5000` written `0.5` is the same `Fixed` but not the venue's string.
    let (outcome, _) = apply(
        &mut sync,
        &book_message("update", 1, 2, &[], &[("101", "0.5")], Some(good)),
    );
    assert_eq!(outcome.verified, Verified::No, "{outcome:?}");
    assert!(!sync.in_sync());
}

#[test]
fn trades_tickers_references_and_liquidations_decode() {
    let mut scratch = Scratch::default();
    for (text, channel) in [(TRADES, Channel::Trades), (TRADES_ALL, Channel::TradesAll)] {
        let message = decode(text.as_bytes(), &mut scratch).expect("decodes");
        assert_eq!(
            message,
            Message::Rows {
                channel,
                arg: b"BTC-USDT"
            }
        );
        let row = scratch.rows[0];
        assert_eq!(row.inst_id(text.as_bytes()), b"BTC-USDT");
        assert_eq!(row.trade_id, Some(130_639_474));
        assert_eq!(row.px, Field::Value(fixed("42219.9")));
        assert_eq!(row.sz, Field::Value(fixed("0.12060306")));
        assert_eq!(row.buy, Some(true));
        assert_eq!(row.ts_ms, Some(1_630_048_897_897));
        assert_eq!(row.seq_id, (channel == Channel::Trades).then_some(1234));
    }
    decode(TICKERS.as_bytes(), &mut scratch).expect("decodes");
    let row = scratch.rows[0];
    assert_eq!(row.bid_px, Field::Value(fixed("8888.88")));
    assert_eq!(row.bid_sz, Field::Value(fixed("5")));
    assert_eq!(row.ask_px, Field::Value(fixed("9999.99")));
    assert_eq!(row.ask_sz, Field::Value(fixed("11")));
    decode(MARK_PRICE.as_bytes(), &mut scratch).expect("decodes");
    assert_eq!(scratch.rows[0].mark_px, Field::Value(fixed("0.1")));
    decode(INDEX_TICKERS.as_bytes(), &mut scratch).expect("decodes");
    assert_eq!(scratch.rows[0].idx_px, Field::Value(fixed("0.1")));
    decode(FUNDING_RATE.as_bytes(), &mut scratch).expect("decodes");
    assert!(scratch.rows[0].funding_rate);
    decode(OPEN_INTEREST.as_bytes(), &mut scratch).expect("decodes");
    assert!(scratch.rows[0].open_interest);
    let message = decode(LIQUIDATION_ORDERS.as_bytes(), &mut scratch).expect("decodes");
    assert_eq!(
        message,
        Message::Rows {
            channel: Channel::LiquidationOrders,
            arg: b"SWAP"
        }
    );
    let row = scratch.rows[0];
    assert_eq!(
        row.inst_id(LIQUIDATION_ORDERS.as_bytes()),
        b"IOST-USDT-SWAP"
    );
    assert_eq!(row.details, (0, 1));
    let detail = scratch.details[0];
    assert_eq!(detail.pos_side, Some(PosSide::Short));
    assert_eq!(detail.buy, Some(true));
    assert_eq!(detail.bk_px, Field::Value(fixed("0.007831")));
    assert_eq!(detail.sz, Field::Value(fixed("13")));
    assert_eq!(detail.ts_ms, Some(1_692_266_434_010));
}

#[test]
fn events_and_pong() {
    let mut scratch = Scratch::default();
    assert_eq!(
        decode(SUBSCRIBED.as_bytes(), &mut scratch),
        Ok(Message::Event {
            event: b"subscribe",
            id: b"1512",
            code: b"",
            msg: b"",
            channel: b"books",
            arg: b"BTC-USDT"
        })
    );
    let Ok(Message::Event {
        event, code, msg, ..
    }) = decode(FAILURE.as_bytes(), &mut scratch)
    else {
        panic!("an event");
    };
    assert_eq!((event, code), (&b"error"[..], &b"60012"[..]));
    assert!(msg.starts_with(b"Invalid request"));
    let Ok(Message::Event { event, code, .. }) = decode(LOGIN_OK.as_bytes(), &mut scratch) else {
        panic!("an event");
    };
    assert_eq!((event, code), (&b"login"[..], &b"0"[..]));
    let Ok(Message::Event { event, code, .. }) = decode(LOGIN_FAILED.as_bytes(), &mut scratch)
    else {
        panic!("an event");
    };
    assert_eq!((event, code), (&b"error"[..], &b"60009"[..]));
    assert_eq!(decode(b"pong", &mut scratch), Ok(Message::Pong));
}

#[test]
fn bad_input_is_refused() {
    let mut scratch = Scratch::default();
    let exponent = book_message("update", 1, 2, &[("1e5", "1")], &[], None);
    assert!(matches!(
        decode(exponent.as_bytes(), &mut scratch),
        Err(DecodeError::Decimal { .. })
    ));
    let size_exponent = TRADES.replace("0.12060306", "1.2E-1");
    assert!(matches!(
        decode(size_exponent.as_bytes(), &mut scratch),
        Err(DecodeError::Decimal { .. })
    ));
    let rate_exponent = FUNDING_RATE.replace("0.0001875391284828", "1.875e-4");
    assert!(matches!(
        decode(rate_exponent.as_bytes(), &mut scratch),
        Err(DecodeError::PlainDecimal { .. })
    ));
    let wide = BOOKS_SNAPSHOT.replace("-855196043", "4294967295");
    assert!(matches!(
        decode(wide.as_bytes(), &mut scratch),
        Err(DecodeError::Integer { .. })
    ));
    let action = BOOKS_SNAPSHOT.replace("\"snapshot\"", "\"partial\"");
    assert!(matches!(
        decode(action.as_bytes(), &mut scratch),
        Err(DecodeError::WrongType {
            field: "action",
            ..
        })
    ));
    let repeated = TRADES.replace("\"count\": \"3\"", "\"px\": \"1\"");
    assert!(matches!(
        decode(repeated.as_bytes(), &mut scratch),
        Err(DecodeError::RepeatedKey { .. })
    ));
    let no_seq = book_message("update", 1, 2, &[], &[], None).replace(",\"prevSeqId\":1", "");
    assert_eq!(
        decode(no_seq.as_bytes(), &mut scratch),
        Err(DecodeError::Missing("prevSeqId"))
    );
    let long = book_message(
        "snapshot",
        -1,
        1,
        &[("1.0000000000000000000000000000000000", "1")],
        &[],
        None,
    );
    assert!(matches!(
        decode(long.as_bytes(), &mut scratch),
        Err(DecodeError::Text { .. })
    ));
    for text in ["", "{", "[]", "{}", "ping", "{\"arg\":{}}"] {
        assert!(decode(text.as_bytes(), &mut scratch).is_err(), "{text:?}");
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A bitwise CRC32 (IEEE, reflected, as zlib's), written independently of the module's.
fn crc32_bitwise(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The reference book: price (as `Fixed`) to (price string, size string), per side.
#[derive(Default)]
struct Reference {
    bids: BTreeMap<Fixed, (String, String)>,
    asks: BTreeMap<Fixed, (String, String)>,
}

impl Reference {
    fn checksum(&self) -> i32 {
        let bids: Vec<_> = self.bids.values().rev().take(25).collect();
        let asks: Vec<_> = self.asks.values().take(25).collect();
        let mut parts: Vec<&str> = Vec::new();
        for index in 0..25 {
            for side in [&bids, &asks] {
                if let Some((price, size)) = side.get(index) {
                    parts.push(price);
                    parts.push(size);
                }
            }
        }
        crc32_bitwise(parts.join(":").as_bytes()) as i32
    }
}

/// A price string for tick `tick` in the venue's forms: trailing zeros kept or not.
fn price_text(rng: &mut Rng, tick: u64) -> String {
    let whole = tick / 100;
    let cents = tick % 100;
    match rng.below(3) {
        0 if cents == 0 => format!("{whole}"),
        1 => format!("{whole}.{cents:02}00"),
        _ => format!("{whole}.{cents:02}"),
    }
}

fn size_text(rng: &mut Rng) -> String {
    let units = 1 + rng.below(5000);
    match rng.below(3) {
        0 => format!("{units}"),
        1 => format!("{}.{:03}", units / 1000, units % 1000),
        _ => format!("{}.{:04}0", units / 1000, units % 1000),
    }
}

/// A long random session: snapshots, updates that insert, change and delete levels (the same
/// price written in several forms across messages), the documented keep-alive and reset, and
/// corrupted messages. Every message carries the checksum of the reference book computed
/// independently; the book must match the reference after each message, verify every
/// checksum, and catch every corruption on the message that carries it.
#[test]
fn a_long_random_session_against_a_reference_book() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut sync = BookSync::new(BookChannel::Books);
    let mut reference = Reference::default();
    let mut seq: i64 = 100;
    let mut synced = false;
    let (mut verified, mut caught) = (0, 0);
    for step in 0..20_000 {
        let snapshot = !synced || rng.below(500) == 0;
        if snapshot {
            reference = Reference::default();
        }
        let mut changes: Vec<(bool, String, String)> = Vec::new();
        let count = if snapshot { 60 } else { rng.below(8) };
        for _ in 0..count {
            let bid = rng.below(2) == 0;
            // Bids below 10000.00, asks from 10000.01 (the book never crosses), 20 prices a side: every
            // level counts in the checksum, so every corruption that changes the book is seen.
            let tick = if bid {
                1_000_000 - 1 - rng.below(20)
            } else {
                1_000_000 + 1 + rng.below(20)
            };
            let price = price_text(&mut rng, tick);
            let delete = !snapshot && rng.below(3) == 0;
            let size = if delete {
                "0".to_owned()
            } else {
                size_text(&mut rng)
            };
            let key = fixed(&price);
            let side = if bid {
                &mut reference.bids
            } else {
                &mut reference.asks
            };
            if delete {
                side.remove(&key);
            } else {
                side.insert(key, (price.clone(), size.clone()));
            }
            changes.push((bid, price, size));
        }
        let (prev, next) = if snapshot {
            (-1, seq + 1)
        } else if rng.below(200) == 0 {
            (seq, 1 + rng.below(10) as i64)
        } else if changes.is_empty() {
            (seq, seq)
        } else {
            (seq, seq + 1 + rng.below(5) as i64)
        };
        let expected = reference.checksum();
        let corrupt = !snapshot && !changes.is_empty() && rng.below(50) == 0;
        if corrupt {
            // One level's size written otherwise than the venue computed the checksum with.
            let change = &mut changes[0];
            change.2 = if change.2 == "0" {
                "1".to_owned()
            } else {
                format!("{}1", change.2.trim_end_matches('0').trim_end_matches('.'))
            };
        }
        let bids: Vec<(&str, &str)> = changes
            .iter()
            .filter(|change| change.0)
            .map(|change| (change.1.as_str(), change.2.as_str()))
            .collect();
        let asks: Vec<(&str, &str)> = changes
            .iter()
            .filter(|change| !change.0)
            .map(|change| (change.1.as_str(), change.2.as_str()))
            .collect();
        let action = if snapshot { "snapshot" } else { "update" };
        let text = book_message(action, prev, next, &bids, &asks, Some(expected));
        let (outcome, _) = apply(&mut sync, &text);
        seq = next;
        if corrupt {
            // A corrupted delete of an absent level may leave the book right: then nothing
            // is wrong to catch.
            if sync.in_sync() {
                assert_eq!(sync.checksum(), expected, "step {step}");
                continue;
            }
            assert_eq!(outcome.verified, Verified::No, "step {step}");
            caught += 1;
            synced = false;
            continue;
        }
        assert_eq!(outcome.verified, Verified::Yes, "step {step}: {outcome:?}");
        verified += 1;
        synced = true;
        let book_bids: Vec<(Fixed, Fixed)> =
            sync.book().levels(crate::book::BookSide::Bid).collect();
        let reference_bids: Vec<(Fixed, Fixed)> = reference
            .bids
            .iter()
            .rev()
            .map(|(price, (_, size))| (*price, fixed(size)))
            .collect();
        assert_eq!(book_bids, reference_bids, "step {step}");
        assert_eq!(
            sync.book().levels(crate::book::BookSide::Ask).count(),
            reference.asks.len()
        );
    }
    assert!(verified > 15_000, "{verified}");
    assert!(caught > 100, "{caught}");
}

/// The checksum's kept string over long random sessions of deep books (up to 60 levels a
/// side): levels inserted, resized and deleted above, at and below the 25th, sides that run
/// empty and fill again, snapshots (empty and one-sided ones too), and prices and sizes in
/// the venue's several forms (trailing zeros kept as sent, the same price written otherwise
/// by a later message). After every message the book's checksum, the one written afresh and
/// the plain definition's must all equal the reference's, computed independently.
#[test]
fn the_kept_checksum_string_over_deep_random_sessions() {
    for seed in [1u64, 0x5eed, 0xdead_beef, 77] {
        let mut rng = Rng(seed);
        let mut sync = BookSync::new(BookChannel::Books);
        let mut reference = Reference::default();
        let mut seq: i64 = 1;
        let mut synced = false;
        // Inserts outnumber deletes in a filling phase, the other way in a draining one.
        let mut filling = true;
        let mut empty_sides = 0;
        for step in 0..5_000 {
            if rng.below(300) == 0 {
                filling = !filling;
            }
            let snapshot = !synced || rng.below(400) == 0;
            if snapshot {
                reference = Reference::default();
            }
            let mut changes: Vec<(bool, String, String)> = Vec::new();
            let count = if snapshot {
                // Empty, one-sided and full snapshots.
                [0, 5, 30, 80][rng.below(4) as usize]
            } else {
                rng.below(6)
            };
            let one_side = snapshot && rng.below(4) == 0;
            for _ in 0..count {
                let bid = if one_side { true } else { rng.below(2) == 0 };
                // 60 prices a side, one cent apart: bids below 10000.00, asks from 10000.01.
                let tick = if bid {
                    1_000_000 - 1 - rng.below(60)
                } else {
                    1_000_000 + 1 + rng.below(60)
                };
                let mut price = price_text(&mut rng, tick);
                let delete = !snapshot && rng.below(10) < if filling { 3 } else { 7 };
                let held = if bid {
                    &reference.bids
                } else {
                    &reference.asks
                };
                if delete && !filling && !held.is_empty() {
                    // Draining: a level the book holds, so that sides run empty.
                    let index = rng.below(held.len() as u64) as usize;
                    if let Some((held_price, _)) = held.values().nth(index) {
                        price = held_price.clone();
                    }
                }
                let size = if delete {
                    "0".to_owned()
                } else {
                    size_text(&mut rng)
                };
                let key = fixed(&price);
                let side = if bid {
                    &mut reference.bids
                } else {
                    &mut reference.asks
                };
                if delete {
                    side.remove(&key);
                } else {
                    side.insert(key, (price.clone(), size.clone()));
                }
                changes.push((bid, price, size));
            }
            let (prev, next) = if snapshot {
                (-1, seq + 1)
            } else {
                (seq, seq + 1)
            };
            seq = next;
            let expected = reference.checksum();
            let bids: Vec<(&str, &str)> = changes
                .iter()
                .filter(|change| change.0)
                .map(|change| (change.1.as_str(), change.2.as_str()))
                .collect();
            let asks: Vec<(&str, &str)> = changes
                .iter()
                .filter(|change| !change.0)
                .map(|change| (change.1.as_str(), change.2.as_str()))
                .collect();
            let action = if snapshot { "snapshot" } else { "update" };
            let text = book_message(action, prev, next, &bids, &asks, Some(expected));
            let (outcome, _) = apply(&mut sync, &text);
            // A checksum of 0 is not compared: the session starts again from a snapshot.
            if expected == 0 {
                synced = false;
                continue;
            }
            assert_eq!(
                outcome.verified,
                Verified::Yes,
                "seed {seed} step {step}: {outcome:?}"
            );
            synced = true;
            assert_eq!(sync.checksum(), expected, "seed {seed} step {step}");
            assert_eq!(
                super::checksum::checksum(sync.checksum_bids(), sync.checksum_asks()),
                expected,
                "seed {seed} step {step}: the plain definition"
            );
            assert_eq!(sync.checksum_afresh(), expected, "seed {seed} step {step}");
            if reference.bids.is_empty() || reference.asks.is_empty() {
                empty_sides += 1;
            }
        }
        assert!(
            empty_sides > 50,
            "seed {seed}: {empty_sides} books with an empty side"
        );
    }
}

fn pairs(levels: &[(String, String)]) -> Vec<(&str, &str)> {
    levels
        .iter()
        .map(|(price, size)| (price.as_str(), size.as_str()))
        .collect()
}

/// The fast path for book pushes answers exactly as the general reader: book messages in the
/// documented form (venue decimal forms, every book channel, empty sides) and the same
/// messages with one to three bytes replaced, inserted or removed, through `book_push` and
/// `decode_general`. Whatever the fast path accepts, the general reader must give the same
/// message and levels; the rest `decode` hands to the general reader.
#[test]
fn the_fast_book_path_answers_as_the_general_reader() {
    use super::decode::{book_push, decode_general};
    let mut rng = Rng(0x000b_00c5);
    let (mut fast, mut general, mut both) =
        (Scratch::default(), Scratch::default(), Scratch::default());
    let alphabet = b"0123456789.-\",:[]{}e \\xs";
    let channels = [
        "books",
        "books5",
        "bbo-tbt",
        "books-l2-tbt",
        "books50-l2-tbt",
    ];
    let (mut taken, mut refused_by_both) = (0, 0);
    for step in 0..30_000 {
        let side = |rng: &mut Rng| -> Vec<(String, String)> {
            (0..rng.below(5))
                .map(|_| {
                    let tick = 1 + rng.below(1 << 30);
                    (price_text(rng, tick), size_text(rng))
                })
                .collect()
        };
        let (bids, asks) = (side(&mut rng), side(&mut rng));

        let action = if rng.below(2) == 0 {
            "update"
        } else {
            "snapshot"
        };
        let checksum = (rng.next() as i32) >> rng.below(31);
        let prev = rng.below(1 << 40) as i64 - 1;
        let text = book_message(
            action,
            prev,
            prev + 1 + rng.below(3) as i64,
            &pairs(&bids),
            &pairs(&asks),
            Some(checksum),
        )
        .replacen(
            r#""channel":"books""#,
            &format!(r#""channel":"{}""#, channels[rng.below(5) as usize]),
            1,
        );
        let mut bytes = text.into_bytes();
        for _ in 0..rng.below(4) {
            let at = rng.below(bytes.len() as u64) as usize;
            let byte = alphabet[rng.below(alphabet.len() as u64) as usize];
            match rng.below(3) {
                0 => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ => {
                    bytes.remove(at);
                }
            }
        }
        let reference = decode_general(&bytes, &mut general);
        if let Some(message) = book_push(&bytes, &mut fast) {
            taken += 1;
            assert_eq!(
                Ok(message),
                reference,
                "step {step}: {:?}",
                String::from_utf8_lossy(&bytes)
            );
            assert_eq!(fast.bids, general.bids, "step {step}");
            assert_eq!(fast.asks, general.asks, "step {step}");
        } else if reference.is_err() {
            refused_by_both += 1;
        }
        assert_eq!(decode(&bytes, &mut both), reference, "step {step}");
    }
    assert!(taken > 5_000, "{taken} taken by the fast path");
    assert!(refused_by_both > 5_000, "{refused_by_both} refused");
}

/// The oracle: generated trade and book messages, keys in random order and with random
/// whitespace, decoded here and by `serde_json`; the fields read must agree.
#[test]
fn an_oracle_over_generated_messages() {
    let mut rng = Rng(42);
    let mut scratch = Scratch::default();
    for _ in 0..3000 {
        let tick = 100 + rng.below(1_000_000);
        let price = price_text(&mut rng, tick);
        let size = size_text(&mut rng);
        let seq = rng.below(1 << 40);
        let mut members = [
            r#""instId":"BTC-USDT""#.to_owned(),
            format!(r#""tradeId":"{}""#, rng.below(1 << 50)),
            format!(r#""px":"{price}""#),
            format!(r#""sz":"{size}""#),
            format!(
                r#""side":"{}""#,
                if rng.below(2) == 0 { "buy" } else { "sell" }
            ),
            format!(r#""ts":"{}""#, rng.below(1 << 42)),
            format!(r#""count":"{}""#, rng.below(9)),
            format!(r#""seqId":{seq}"#),
        ];
        for at in (1..members.len()).rev() {
            members.swap(at, rng.below(at as u64 + 1) as usize);
        }
        let space = if rng.below(2) == 0 { " " } else { "" };
        let row = format!("{{{}}}", members.join(&format!(",{space}")));
        let mut top = [
            r#""arg":{"channel":"trades","instId":"BTC-USDT"}"#.to_owned(),
            format!(r#""data":[{row}]"#),
        ];
        if rng.below(2) == 0 {
            top.swap(0, 1);
        }
        let text = format!("{{{space}{}{space}}}", top.join(","));
        let oracle: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let decoded = decode(text.as_bytes(), &mut scratch).expect("decodes");
        assert_eq!(
            decoded,
            Message::Rows {
                channel: Channel::Trades,
                arg: b"BTC-USDT"
            }
        );
        let row = scratch.rows[0];
        let data = &oracle["data"][0];
        let text_of = |key: &str| data[key].as_str().expect("a string").to_owned();
        assert_eq!(row.px, Field::Value(fixed(&text_of("px"))));
        assert_eq!(row.sz, Field::Value(fixed(&text_of("sz"))));
        assert_eq!(row.trade_id, text_of("tradeId").parse().ok());
        assert_eq!(row.ts_ms, text_of("ts").parse().ok());
        assert_eq!(row.buy, Some(text_of("side") == "buy"));
        assert_eq!(row.seq_id, data["seqId"].as_i64());
    }
}

mod through_the_feed {
    use super::*;
    use crate::event::{GapReason, ReferenceKind, Side};
    use crate::net::ConnId;
    use crate::venue::feed::{EventSink, Feed, FeedCounters, ReplyKind};
    use crate::venue::okx::feed::{FeedConfig, OkxFeed};

    fn feed(channels: &[&str], symbols: &[&str]) -> (OkxFeed, FeedCounters) {
        OkxFeed::new(FeedConfig {
            venue_id: 3,
            venue_name: "okx".into(),
            symbols: symbols.iter().map(|s| s.to_string()).collect(),
            channels: channels.iter().map(|c| c.to_string()).collect(),
            instrument_base: 10,
        })
    }

    fn run(feed: &mut OkxFeed, conn: ConnId, messages: &[&str]) -> Vec<Event> {
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(4096);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        for message in messages {
            feed.on_message(conn, 7, message.as_bytes(), &mut sink);
        }
        sink.publish();
        std::iter::from_fn(|| consumer.try_pop()).collect()
    }

    /// A checksum mismatch is a gap and asks for the stream afresh; the book publishes nothing
    /// until the next snapshot.
    #[test]
    fn a_mismatch_is_a_gap_and_a_resubscription() {
        let (mut feed, counters) = feed(&["trades", "books"], &["BTC-USDT"]);
        let mut reference = BookSync::new(BookChannel::Books);
        let bids = [("100.5", "1.50")];
        let asks = [("101", "2")];
        apply(
            &mut reference,
            &book_message("snapshot", -1, 1, &bids, &asks, None),
        );
        let good = reference.checksum();
        let events = run(
            &mut feed,
            4,
            &[&book_message("snapshot", -1, 1, &bids, &asks, Some(good))],
        );
        assert_eq!(events[0].header.instrument_id, 10);
        assert!(feed.book(0).is_some());
        assert_eq!(counters.message("books_verified"), 1);
        let events = run(
            &mut feed,
            4,
            &[
                &book_message("update", 1, 2, &[("100.5", "1.5")], &[], Some(good)),
                &book_message("update", 2, 3, &[("100", "1")], &[], None),
            ],
        );
        assert_eq!(events.len(), 1, "only the gap");
        assert!(
            matches!(events[0].body(), Body::Gap(gap) if gap.reason() == GapReason::SequenceBreak)
        );
        assert!(feed.book(0).is_none());
        let reply = feed.take_reply().expect("a resubscription");
        assert!(matches!(reply.kind, ReplyKind::Resubscribe));
        // Stream 1 (`books` is the file's second channel) on connection 4.
        assert_eq!(reply.id, (4 << 32) | 1);
        assert_eq!(counters.book_gaps.get(), 1);
    }

    /// Bad input: an unknown `instId`, a channel never subscribed, an `error` event, an
    /// unparsable message: each counted, none publishes anything.
    #[test]
    fn bad_input_is_counted() {
        let (mut feed, counters) = feed(&["books"], &["BTC-USDT"]);
        let events = run(
            &mut feed,
            1,
            &[
                &book_message("snapshot", -1, 1, &[("1", "1")], &[], None)
                    .replace("BTC-USDT", "ETH-USDT"),
                TRADES,
                FAILURE,
                "{\"arg\":",
            ],
        );
        assert!(events.is_empty());
        assert_eq!(counters.unknown_symbol.get(), 1);
        assert_eq!(counters.message("unsubscribed"), 1);
        assert_eq!(counters.message("error"), 1);
        assert_eq!(counters.malformed.get(), 1);
        let reply = feed.take_reply().expect("the refusal");
        assert_eq!((reply.id, reply.error), (1512, Some(60012)));
    }

    #[test]
    fn trades_quotes_references_and_liquidations() {
        let (mut feed, _) = feed(
            &[
                "trades",
                "tickers",
                "mark-price",
                "index-tickers",
                "liquidation-orders",
                "funding-rate",
            ],
            &[
                "BTC-USDT",
                "IOST-USDT-SWAP",
                "LTC-USD-190628",
                "BTC-USDT-SWAP",
            ],
        );
        let events = run(
            &mut feed,
            1,
            &[
                TRADES,
                TICKERS,
                MARK_PRICE,
                INDEX_TICKERS,
                LIQUIDATION_ORDERS,
                FUNDING_RATE,
            ],
        );
        let bodies: Vec<Body> = events.iter().map(Event::body).collect();
        let Body::Trade(trade) = bodies[0] else {
            panic!("{:?}", bodies[0]);
        };
        assert_eq!(trade.trade_id, 130_639_474);
        assert_eq!(trade.aggressor(), Side::Bid);
        assert_eq!(events[0].header.venue_seq, 1234);
        assert_eq!(events[0].header.exchange_ts_ns, 1_630_048_897_897_000_000);
        let Body::Quote(quote) = bodies[1] else {
            panic!("{:?}", bodies[1]);
        };
        assert_eq!(
            (quote.bid_px, quote.ask_sz),
            (fixed("8888.88"), fixed("11"))
        );
        assert!(matches!(bodies[2], Body::Reference(r) if r.kind() == ReferenceKind::Mark));
        assert_eq!(events[2].header.instrument_id, 12);
        // The index BTC-USDT is the underlying of BTC-USDT and BTC-USDT-SWAP.
        let index: Vec<u32> = events
            .iter()
            .filter(|event| matches!(event.body(), Body::Reference(r) if r.kind() == ReferenceKind::Index))
            .map(|event| event.header.instrument_id)
            .collect();
        assert_eq!(index, [10, 13]);
        let Some(liquidation) = events.iter().find_map(|event| match event.body() {
            Body::Liquidation(liquidation) => Some((event.header.instrument_id, liquidation)),
            _ => None,
        }) else {
            panic!("no liquidation");
        };
        assert_eq!(liquidation.0, 11);
        assert_eq!(liquidation.1.position_side(), Side::Ask, "a short position");
        assert_eq!(liquidation.1.price, fixed("0.007831"));
        assert_eq!(events.len(), 6, "funding-rate publishes nothing");
    }
}
