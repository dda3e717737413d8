//! `venue::binance_spot::sbe` against an independent encoder: frames of every template made by
//! the official SBE tool's generated Rust (`crates/binance-sbe-official`, from Binance's
//! `stream_1_0.xml`), decoded by ours and compared field by field; then bad frames (cut at every
//! byte, group counts past the end, unknown templates and schemas, longer blocks from a newer
//! version, exponent and mantissa extremes) and random bytes.
//!
//! `sbe-market-data-streams.md` has no byte examples to check against (it names the messages
//! only), so the generated encoder is the reference.

use binance_sbe_official::encode::{self, BestBidAsk, Depth, Trade, Trades};
use proptest::prelude::*;
use tickwire::event::{flags, Body, Event, Side};
use tickwire::fixed::Fixed;
use tickwire::venue::binance_spot::sbe::{
    decimal_to_fixed, decode, events, EventTarget, Message, SbeError, HEADER_LEN,
};

/// `mantissa * 10^exponent` in 1e-9 units, computed apart from the decoder (exact decimal
/// arithmetic in i128, ties to even), `None` where it does not fit an i64.
fn expected_fixed(mantissa: i64, exponent: i8) -> Option<Fixed> {
    let shift = i32::from(exponent) + 9;
    let value = i128::from(mantissa);
    let raw = if shift >= 0 {
        if mantissa == 0 {
            0
        } else {
            10i128
                .checked_pow(shift as u32)
                .and_then(|p| value.checked_mul(p))?
        }
    } else if -shift >= 38 {
        0
    } else {
        let divisor = 10i128.pow((-shift) as u32);
        let (quotient, remainder) = (value.div_euclid(divisor), value.rem_euclid(divisor));
        // Floor division; round the fraction remainder/divisor to nearest, ties to even.
        match (2 * remainder).cmp(&divisor) {
            std::cmp::Ordering::Less => quotient,
            std::cmp::Ordering::Greater => quotient + 1,
            std::cmp::Ordering::Equal => quotient + (quotient & 1),
        }
    };
    i64::try_from(raw).ok().map(Fixed)
}

fn fixed(mantissa: i64, exponent: i8) -> Fixed {
    expected_fixed(mantissa, exponent).expect("test values fit")
}

fn long_symbol() -> String {
    "X".repeat(255)
}

#[test]
fn best_bid_ask_from_the_official_encoder_decodes_field_by_field() {
    let long = long_symbol();
    for (index, exponent) in (-8i8..=0).chain([1, 2, 5]).enumerate() {
        let symbol = ["BTCUSDT", "", "ÄBCUSDT", long.as_str()][index % 4];
        let values = BestBidAsk {
            event_time_us: 1_753_000_000_000_000 + index as i64,
            book_update_id: 70_000_000_000 + index as i64,
            price_exponent: exponent,
            qty_exponent: -8 - (index as i8 % 2),
            // Positive exponents with small mantissas, so that every value fits.
            bid_price: if exponent > 0 {
                7
            } else {
                1_178_612 + index as i64
            },
            bid_qty: -(index as i64) * 3,
            ask_price: if exponent > 0 { 8 } else { 1_178_613 },
            ask_qty: 123_456_789,
            symbol,
        };
        let frame = encode::best_bid_ask(&values);
        let Ok(Message::BestBidAsk(ticker)) = decode(&frame) else {
            panic!("{exponent}: {:?}", decode(&frame));
        };
        assert_eq!(ticker.symbol, symbol.as_bytes());
        assert_eq!(ticker.schema_version, 0);
        assert_eq!(ticker.event_time_ns, values.event_time_us as u64 * 1000);
        assert_eq!(ticker.book_update_id, values.book_update_id as u64);
        assert_eq!(ticker.bid_px, fixed(values.bid_price, exponent));
        assert_eq!(ticker.bid_qty, fixed(values.bid_qty, values.qty_exponent));
        assert_eq!(ticker.ask_px, fixed(values.ask_price, exponent));
        assert_eq!(ticker.ask_qty, fixed(values.ask_qty, values.qty_exponent));
    }
}

#[test]
fn trades_from_the_official_encoder_decode_field_by_field() {
    let long = long_symbol();
    let many: Vec<Trade> = (0..300)
        .map(|i| Trade {
            id: 4_000_000_000 + i,
            price: 6_000_000_000 + i * 7,
            qty: i * 13,
            is_buyer_maker: i % 3 == 0,
        })
        .collect();
    // Positive exponents: small mantissas, so that every value fits.
    let small: Vec<Trade> = many[..4]
        .iter()
        .map(|t| Trade {
            price: t.qty + 1,
            qty: -(t.qty),
            ..*t
        })
        .collect();
    let cases: [(&[Trade], &str, i8, i8); 5] = [
        (&small, "SMALL", 3, 2),
        (&many[..1], "BTCUSDT", -2, -8),
        (&many, long.as_str(), -8, 0),
        (&[], "ETHBTC", 0, -3),
        (&many[..5], "BNBUSDT", -9, -9),
    ];
    for (list, symbol, price_exponent, qty_exponent) in cases {
        let values = Trades {
            event_time_us: 1_753_000_000_000_001,
            transact_time_us: 1_753_000_000_000_000,
            price_exponent,
            qty_exponent,
            trades: list,
            symbol,
        };
        let frame = encode::trades(&values);
        let Ok(Message::Trades(decoded)) = decode(&frame) else {
            panic!("{symbol}: {:?}", decode(&frame));
        };
        assert_eq!(decoded.symbol, symbol.as_bytes());
        assert_eq!(decoded.event_time_ns, 1_753_000_000_000_001_000);
        assert_eq!(decoded.transact_time_ns, 1_753_000_000_000_000_000);
        assert_eq!(decoded.trades.len(), list.len());
        assert_eq!(decoded.trades.iter().count(), list.len());
        for (got, want) in decoded.trades.iter().zip(list) {
            assert_eq!(got.trade_id, want.id as u64);
            assert_eq!(got.price, fixed(want.price, price_exponent));
            assert_eq!(got.qty, fixed(want.qty, qty_exponent));
            assert_eq!(got.buyer_is_maker, want.is_buyer_maker);
        }
    }
}

fn levels(count: usize, base: i64) -> Vec<(i64, i64)> {
    (0..count as i64)
        .map(|i| (base - i * 100, (i * 37) % 11))
        .collect()
}

#[test]
fn depth_diffs_and_snapshots_from_the_official_encoder_decode_level_by_level() {
    let long = long_symbol();
    let bids20 = levels(20, 11_786_100);
    let asks20 = levels(20, 11_786_200);
    let bids1000 = levels(1000, 99_999_999);
    // (bids, asks, symbol, price exponent, qty exponent)
    type Case<'c> = (&'c [(i64, i64)], &'c [(i64, i64)], &'c str, i8, i8);
    let cases: [Case<'_>; 5] = [
        (&bids20, &asks20, "BTCUSDT", -2, -8),
        (&[], &asks20, "ETHUSDT", -8, -8),
        (&bids20[..3], &[], long.as_str(), 0, -5),
        (&[], &[], "X", -1, 1),
        (&bids1000, &bids1000[..7], "PEPEUSDT", -8, 0),
    ];
    for (bids, asks, symbol, price_exponent, qty_exponent) in cases {
        let values = Depth {
            event_time_us: 1_753_000_000_123_456,
            first_update_id: 70_000_000_001,
            last_update_id: 70_000_000_009,
            price_exponent,
            qty_exponent,
            bids,
            asks,
            symbol,
        };
        let want = |levels: &[(i64, i64)]| -> Vec<(Fixed, Fixed)> {
            levels
                .iter()
                .map(|&(p, q)| (fixed(p, price_exponent), fixed(q, qty_exponent)))
                .collect()
        };
        let frame = encode::depth_diff(&values);
        let Ok(Message::DepthDiff(diff)) = decode(&frame) else {
            panic!("{symbol}: {:?}", decode(&frame));
        };
        assert_eq!(diff.symbol, symbol.as_bytes());
        assert_eq!(diff.event_time_ns, 1_753_000_000_123_456_000);
        assert_eq!(diff.first_update_id, 70_000_000_001);
        assert_eq!(diff.final_update_id, 70_000_000_009);
        assert_eq!(diff.bids.len(), bids.len());
        assert_eq!(diff.bids.iter().collect::<Vec<_>>(), want(bids));
        assert_eq!(diff.asks.iter().collect::<Vec<_>>(), want(asks));

        let frame = encode::depth_snapshot(&values);
        let Ok(Message::DepthSnapshot(snapshot)) = decode(&frame) else {
            panic!("{symbol}: {:?}", decode(&frame));
        };
        assert_eq!(snapshot.symbol, symbol.as_bytes());
        assert_eq!(snapshot.book_update_id, 70_000_000_009);
        assert_eq!(snapshot.event_time_ns, 1_753_000_000_123_456_000);
        assert_eq!(snapshot.bids.iter().collect::<Vec<_>>(), want(bids));
        assert_eq!(snapshot.asks.iter().collect::<Vec<_>>(), want(asks));
    }
}

/// One frame of each template, with two levels or trades each, for the error tests.
fn sample_frames() -> Vec<Vec<u8>> {
    let bids = [(100, 1), (99, 2)];
    let depth = Depth {
        event_time_us: 1,
        first_update_id: 2,
        last_update_id: 3,
        price_exponent: -2,
        qty_exponent: -8,
        bids: &bids,
        asks: &bids,
        symbol: "BTCUSDT",
    };
    let trades = [
        Trade {
            id: 1,
            price: 2,
            qty: 3,
            is_buyer_maker: true,
        },
        Trade {
            id: 4,
            price: 5,
            qty: 6,
            is_buyer_maker: false,
        },
    ];
    vec![
        encode::best_bid_ask(&BestBidAsk {
            event_time_us: 1,
            book_update_id: 2,
            price_exponent: -2,
            qty_exponent: -8,
            bid_price: 3,
            bid_qty: 4,
            ask_price: 5,
            ask_qty: 6,
            symbol: "BTCUSDT",
        }),
        encode::trades(&Trades {
            event_time_us: 1,
            transact_time_us: 2,
            price_exponent: -2,
            qty_exponent: -8,
            trades: &trades,
            symbol: "BTCUSDT",
        }),
        encode::depth_diff(&depth),
        encode::depth_snapshot(&depth),
    ]
}

#[test]
fn every_truncation_of_every_template_is_an_error() {
    for frame in sample_frames() {
        assert!(decode(&frame).is_ok());
        for len in 0..frame.len() {
            match decode(&frame[..len]) {
                Err(SbeError::Truncated { offset }) => assert!(offset as usize <= len),
                Err(SbeError::GroupOverrun { .. }) => {}
                other => panic!("cut at {len} of {}: {other:?}", frame.len()),
            }
        }
    }
}

/// Where the first group's dimension starts: after the header and the root block.
fn first_group(frame: &[u8]) -> usize {
    HEADER_LEN + usize::from(u16::from_le_bytes([frame[0], frame[1]]))
}

#[test]
fn group_counts_past_the_end_are_refused() {
    let frames = sample_frames();
    // Trades: a u32 count at +2.
    let mut trades = frames[1].clone();
    let at = first_group(&trades) + 2;
    for count in [3u32, 1 << 20, i32::MAX as u32, u32::MAX] {
        trades[at..at + 4].copy_from_slice(&count.to_le_bytes());
        assert_eq!(decode(&trades), Err(SbeError::GroupOverrun { count }));
    }
    // Depth: u16 counts at +2, bids then asks.
    for mut frame in [frames[2].clone(), frames[3].clone()] {
        let at = first_group(&frame) + 2;
        // 3 would still fit (it reads into the asks): a count is past the end only when its
        // entries are.
        for count in [10u16, u16::MAX] {
            frame[at..at + 2].copy_from_slice(&count.to_le_bytes());
            assert_eq!(
                decode(&frame),
                Err(SbeError::GroupOverrun {
                    count: u32::from(count)
                })
            );
        }
    }
}

#[test]
fn unknown_templates_and_schemas_are_distinct_errors() {
    let frame = &sample_frames()[0];
    for template_id in [0u16, 1, 9_999, 10_004, u16::MAX] {
        let mut bad = frame.clone();
        bad[2..4].copy_from_slice(&template_id.to_le_bytes());
        assert_eq!(decode(&bad), Err(SbeError::UnknownTemplate { template_id }));
    }
    for schema_id in [0u16, 2, 3] {
        let mut bad = frame.clone();
        bad[4..6].copy_from_slice(&schema_id.to_le_bytes());
        bad[6..8].copy_from_slice(&7u16.to_le_bytes());
        assert_eq!(
            decode(&bad),
            Err(SbeError::SchemaMismatch {
                schema_id,
                version: 7
            })
        );
    }
}

/// A newer version of schema 1 appends fields to a block: the frame is rebuilt with `extra`
/// bytes after each block's known fields and the block lengths raised, as an SBE encoder of
/// that version would write it, and must decode to the same values.
#[test]
fn longer_blocks_from_a_newer_version_are_skipped() {
    let frames = sample_frames();
    // BestBidAsk: root only.
    let original = &frames[0];
    let mut newer = original[..HEADER_LEN + 50].to_vec();
    newer.extend([0xAB; 9]);
    newer.extend(&original[HEADER_LEN + 50..]);
    newer[0..2].copy_from_slice(&59u16.to_le_bytes());
    newer[6..8].copy_from_slice(&1u16.to_le_bytes());
    newer.extend(b"\x05extra");
    let (Ok(Message::BestBidAsk(old)), Ok(Message::BestBidAsk(new))) =
        (decode(original), decode(&newer))
    else {
        panic!("{:?}", decode(&newer));
    };
    assert_eq!(new.schema_version, 1);
    assert_eq!(BestBidAskFields::of(&old), BestBidAskFields::of(&new));

    // DepthDiff: root 26 + 4 extra, each level 16 + 3 extra.
    let original = &frames[2];
    let mut newer = Vec::new();
    let mut at = 0;
    let copy = |newer: &mut Vec<u8>, at: &mut usize, len: usize| {
        newer.extend(&original[*at..*at + len]);
        *at += len;
    };
    copy(&mut newer, &mut at, HEADER_LEN + 26);
    newer.extend([1, 2, 3, 4]);
    for _side in 0..2 {
        let count = u16::from_le_bytes([original[at + 2], original[at + 3]]);
        newer.extend(19u16.to_le_bytes());
        newer.extend(count.to_le_bytes());
        at += 4;
        for _ in 0..count {
            copy(&mut newer, &mut at, 16);
            newer.extend([9, 9, 9]);
        }
    }
    let rest = original.len() - at;
    copy(&mut newer, &mut at, rest);
    newer[0..2].copy_from_slice(&30u16.to_le_bytes());
    newer[6..8].copy_from_slice(&2u16.to_le_bytes());
    let (Ok(Message::DepthDiff(old)), Ok(Message::DepthDiff(new))) =
        (decode(original), decode(&newer))
    else {
        panic!("{:?}", decode(&newer));
    };
    assert_eq!(new.schema_version, 2);
    assert_eq!(
        (old.bids, old.asks, old.symbol),
        (new.bids, new.asks, new.symbol)
    );
    assert_eq!(old.final_update_id, new.final_update_id);
}

#[derive(Debug, PartialEq)]
struct BestBidAskFields<'a>(&'a [u8], u64, u64, [Fixed; 4]);

impl<'a> BestBidAskFields<'a> {
    fn of(m: &tickwire::venue::binance_spot::sbe::BestBidAsk<'a>) -> Self {
        BestBidAskFields(
            m.symbol,
            m.event_time_ns,
            m.book_update_id,
            [m.bid_px, m.bid_qty, m.ask_px, m.ask_qty],
        )
    }
}

#[test]
fn exponent_and_mantissa_extremes_are_exact_rounded_or_refused() {
    for exponent in [i8::MIN + 1, -20, -10, -9, -8, -1, 0, 1, 9, 10, i8::MAX] {
        for mantissa in [i64::MIN, i64::MIN + 1, -1, 0, 1, 5, 15, 25, i64::MAX] {
            let frame = encode::best_bid_ask(&BestBidAsk {
                event_time_us: 1,
                book_update_id: 1,
                price_exponent: exponent,
                qty_exponent: -8,
                bid_price: mantissa,
                bid_qty: 1,
                ask_price: 0,
                ask_qty: 1,
                symbol: "BTCUSDT",
            });
            let want = expected_fixed(mantissa, exponent);
            let got = decode(&frame).map(|m| match m {
                Message::BestBidAsk(t) => t.bid_px,
                other => panic!("{other:?}"),
            });
            match (want, got) {
                (Some(want), Ok(got)) => assert_eq!(want, got, "{mantissa}e{exponent}"),
                (None, Err(SbeError::DecimalOverflow)) => {}
                other => panic!("{mantissa}e{exponent}: {other:?}"),
            }
            assert_eq!(decimal_to_fixed(mantissa, exponent).ok(), want);
        }
    }
    // The exponent's null value.
    let frame = encode::best_bid_ask(&BestBidAsk {
        event_time_us: 1,
        book_update_id: 1,
        price_exponent: -8,
        qty_exponent: i8::MIN,
        bid_price: 1,
        bid_qty: 1,
        ask_price: 1,
        ask_qty: 1,
        symbol: "BTCUSDT",
    });
    assert_eq!(
        decode(&frame),
        Err(SbeError::BadExponent { exponent: i8::MIN })
    );
}

#[test]
fn decoded_messages_become_the_usdm_events() {
    let frames = sample_frames();
    let target = EventTarget {
        venue_id: 3,
        instrument_id: 11,
        recv_ts_ns: 99,
    };
    let collect = |frame: &[u8]| {
        let message = decode(frame).expect("a sample frame decodes");
        let mut out: Vec<Event> = Vec::new();
        events(&message, target, &mut |event| out.push(event));
        out
    };
    let quote = collect(&frames[0]);
    assert_eq!(quote.len(), 1);
    assert_eq!(quote[0].header.venue_seq, 2);
    assert_eq!(quote[0].header.recv_ts_ns, 99);
    assert_eq!(quote[0].header.flags, flags::LAST);
    assert!(matches!(quote[0].body(), Body::Quote(q) if q.bid_px == fixed(3, -2)));

    let trades = collect(&frames[1]);
    assert_eq!(trades.len(), 2);
    assert_eq!(trades[0].header.flags, 0);
    assert_eq!(trades[1].header.flags, flags::LAST);
    assert_eq!(trades[0].header.exchange_ts_ns, 2_000);
    let Body::Trade(first) = trades[0].body() else {
        panic!("{:?}", trades[0]);
    };
    assert_eq!((first.trade_id, trades[0].header.venue_seq), (1, 1));
    assert_eq!(first.aggressor(), Side::Ask);
    let Body::Trade(second) = trades[1].body() else {
        panic!("{:?}", trades[1]);
    };
    assert_eq!(second.aggressor(), Side::Bid);

    for frame in &frames[2..] {
        let levels = collect(frame);
        assert_eq!(levels.len(), 4);
        assert!(levels.iter().all(|e| e.header.venue_seq == 3));
        assert_eq!(levels[3].header.flags, flags::LAST);
        let sides: Vec<Side> = levels
            .iter()
            .map(|e| match e.body() {
                Body::BookLevel(level) => level.side(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sides, [Side::Bid, Side::Bid, Side::Ask, Side::Ask]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Arbitrary bytes, and arbitrary bytes behind a valid header of each template: decoding
    /// never panics, an error's offset is inside the frame, and a decoded message's groups
    /// iterate to their counts.
    #[test]
    fn arbitrary_frames_never_panic(
        template in 9_999u16..=10_004,
        block_length in 0u16..80,
        with_header in any::<bool>(),
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut frame = Vec::new();
        if with_header {
            for word in [block_length, template, 1, 0] {
                frame.extend(word.to_le_bytes());
            }
        }
        frame.extend(&body);
        match decode(&frame) {
            Ok(message) => {
                match message {
                    Message::Trades(t) => prop_assert_eq!(t.trades.iter().count(), t.trades.len()),
                    Message::DepthDiff(d) => {
                        prop_assert_eq!(d.bids.iter().count(), d.bids.len());
                        prop_assert_eq!(d.asks.iter().count(), d.asks.len());
                    }
                    Message::DepthSnapshot(d) => {
                        prop_assert_eq!(d.bids.iter().count(), d.bids.len());
                        prop_assert_eq!(d.asks.iter().count(), d.asks.len());
                    }
                    Message::BestBidAsk(_) => {}
                }
                let mut count = 0usize;
                events(&message, EventTarget { venue_id: 0, instrument_id: 0, recv_ts_ns: 0 }, &mut |_| count += 1);
                prop_assert!(count <= frame.len() / 16 + 1);
            }
            Err(SbeError::Truncated { offset }) => prop_assert!(offset as usize <= frame.len()),
            Err(_) => {}
        }
    }

    /// Any values the official encoder writes come back, or are refused for the documented
    /// reasons only.
    #[test]
    fn any_best_bid_ask_round_trips(
        event_time_us in any::<i64>(),
        book_update_id in any::<i64>(),
        price_exponent in any::<i8>(),
        qty_exponent in any::<i8>(),
        mantissas in any::<[i64; 4]>(),
        symbol in "[A-Z0-9]{0,40}",
    ) {
        let frame = encode::best_bid_ask(&BestBidAsk {
            event_time_us, book_update_id, price_exponent, qty_exponent,
            bid_price: mantissas[0], bid_qty: mantissas[1], ask_price: mantissas[2], ask_qty: mantissas[3],
            symbol: &symbol,
        });
        let exponents = [price_exponent, qty_exponent, price_exponent, qty_exponent];
        let expected: Option<Vec<Fixed>> = (0..4).map(|i| expected_fixed(mantissas[i], exponents[i])).collect();
        match decode(&frame) {
            Ok(Message::BestBidAsk(t)) => {
                prop_assert_eq!(t.symbol, symbol.as_bytes());
                prop_assert_eq!(t.event_time_ns, event_time_us as u64 * 1000);
                prop_assert_eq!(t.book_update_id, book_update_id as u64);
                prop_assert_eq!(Some(vec![t.bid_px, t.bid_qty, t.ask_px, t.ask_qty]), expected);
            }
            Err(SbeError::BadTimestamp) => prop_assert!(
                event_time_us < 0 || (event_time_us as u64).checked_mul(1000).is_none()
            ),
            Err(SbeError::NegativeId) => prop_assert!(book_update_id < 0),
            Err(SbeError::BadExponent { exponent }) => prop_assert_eq!(exponent, i8::MIN),
            Err(SbeError::DecimalOverflow) => prop_assert!(expected.is_none()),
            other => prop_assert!(false, "{:?}", other),
        }
    }
}

/// The fuzz target's seeds (`fuzz/seeds/binance_spot_sbe/`): one frame of each template from
/// the official encoder, plus a frame with an empty group and one from a newer schema version.
/// With `TICKWIRE_WRITE_SEEDS=1` the test writes them; otherwise it checks the committed ones
/// are exactly these frames and that each decodes.
#[test]
fn fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/binance_spot_sbe");
    let frames = sample_frames();
    let empty = encode::depth_diff(&Depth {
        event_time_us: 1_753_000_000_000_000,
        first_update_id: 5,
        last_update_id: 5,
        price_exponent: -8,
        qty_exponent: -8,
        bids: &[],
        asks: &[(1, 0)],
        symbol: "ETHBTC",
    });
    let mut newer = frames[0].clone();
    newer[6..8].copy_from_slice(&1u16.to_le_bytes());
    let seeds = [
        ("best_bid_ask", &frames[0]),
        ("trades", &frames[1]),
        ("depth_diff", &frames[2]),
        ("depth_snapshot", &frames[3]),
        ("depth_diff_empty_bids", &empty),
        ("best_bid_ask_version_1", &newer),
    ];
    let write = std::env::var_os("TICKWIRE_WRITE_SEEDS").is_some();
    if write {
        std::fs::create_dir_all(&dir).expect("make the seeds folder");
    }
    for (name, frame) in seeds {
        assert!(decode(frame).is_ok(), "{name}");
        let path = dir.join(name);
        if write {
            std::fs::write(&path, frame).expect("write a seed");
        } else {
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (TICKWIRE_WRITE_SEEDS=1 writes it)", path.display())
            });
            assert_eq!(
                &committed, frame,
                "{name} is stale: TICKWIRE_WRITE_SEEDS=1 rewrites it"
            );
        }
    }
}

/// Decoding a frame of each template, walking its groups and making its events allocates
/// nothing (the thread's allocations, counted by the test binary's global allocator).
#[test]
fn decoding_walking_and_events_never_allocate() {
    use crate::support::counting_alloc::allocations;
    use std::hint::black_box;
    let frames = sample_frames();
    let before = allocations();
    black_box(vec![0u8; 64]);
    assert_eq!(
        allocations(),
        before + 1,
        "the counting allocator is not active"
    );
    let target = EventTarget {
        venue_id: 1,
        instrument_id: 1,
        recv_ts_ns: 1,
    };
    let before = allocations();
    let mut checksum = 0i64;
    for frame in &frames {
        let message = decode(black_box(frame)).expect("a sample frame decodes");
        match message {
            Message::Trades(t) => t.trades.iter().for_each(|e| checksum ^= e.price.raw()),
            Message::DepthDiff(d) => d.bids.iter().for_each(|(p, _)| checksum ^= p.raw()),
            Message::DepthSnapshot(d) => d.asks.iter().for_each(|(_, q)| checksum ^= q.raw()),
            Message::BestBidAsk(t) => checksum ^= t.bid_px.raw(),
        }
        events(&message, target, &mut |event| {
            checksum ^= event.header.venue_seq as i64;
        });
        checksum ^= decode(black_box(&frame[..frame.len() - 1])).map_or(1, |_| 0);
    }
    assert_eq!(allocations(), before, "decoding allocated");
    black_box(checksum);
}
