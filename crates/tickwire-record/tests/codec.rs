//! `event -> DBN record -> event`: every kind, every field, every bit.

use dbn::enums::rtype;
use dbn::RecordRef;
use proptest::prelude::*;
use tickwire_bus::event::{
    flags, Bar, BarInterval, Body, BookLevel, Event, EventHeader, EventKind, Gap, GapReason,
    Imbalance, Liquidation, Quote, Reference, ReferenceKind, Side, Snapshot, Statistic, Trade,
    TradingStatus, VenueState, VenueStatus, NO_PRICE,
};
use tickwire_bus::fixed::Fixed;
use tickwire_record::codec::{self, Record, PRIVATE_STAT_TYPE};

fn header(seq: u64, flags: u8) -> EventHeader {
    EventHeader {
        exchange_ts_ns: 1_723_075_200_123_456_789,
        recv_ts_ns: 1_723_075_200_223_456_789,
        venue_seq: seq,
        instrument_id: 7,
        venue_id: 2,
        kind: EventKind::Quote,
        flags,
    }
}

/// What the venues publish: one event of every kind, with the values they really carry
/// (fractional sizes, Binance update ids past 32 bits, the bar interval in the flags).
fn typical_events() -> Vec<Event> {
    let big_seq = 8_123_456_789_012;
    vec![
        Event::new(
            header(big_seq, flags::LAST),
            Body::Quote(Quote {
                bid_px: Fixed(61_234_500_000_000),
                bid_sz: Fixed(1_234_000_000),
                ask_px: Fixed(61_234_600_000_000),
                ask_sz: Fixed(7_000_001),
            }),
        ),
        Event::new(
            header(big_seq, flags::LAST | flags::DERIVED),
            Body::Quote(Quote::default()),
        ),
        Event::new(
            header(6_000_000_001, flags::LAST),
            Body::Trade(Trade::new(
                Fixed(61_234_500_000_000),
                Fixed(3_000_000),
                6_000_000_001,
                Side::Ask,
            )),
        ),
        Event::new(
            header(12, flags::LAST),
            Body::Trade(Trade::new(
                Fixed(100_250_000_000),
                Fixed(5_000_000_000),
                0,
                Side::Bid,
            )),
        ),
        Event::new(
            header(big_seq, flags::SNAPSHOT),
            Body::BookLevel(BookLevel::new(
                Side::Bid,
                Fixed(61_000_000_000_000),
                Fixed(12_500_000_000),
            )),
        ),
        Event::new(
            header(big_seq, flags::LAST | flags::SATURATED),
            Body::BookLevel(BookLevel::new(
                Side::Ask,
                Fixed(61_000_000_000_000),
                Fixed::ZERO,
            )),
        ),
        Event::new(
            header(big_seq, flags::SNAPSHOT),
            Body::SnapshotBegin(Snapshot {
                bid_levels: 1000,
                ask_levels: 999,
                snapshot_id: big_seq,
                _reserved: [0; 2],
            }),
        ),
        Event::new(
            header(big_seq, flags::SNAPSHOT | flags::LAST),
            Body::SnapshotEnd(Snapshot {
                bid_levels: 1000,
                ask_levels: 999,
                snapshot_id: big_seq,
                _reserved: [0; 2],
            }),
        ),
        Event::new(
            header(0, flags::LAST),
            Body::Gap(Gap::new(GapReason::SequenceBreak, 100, 103)),
        ),
        Event::new(
            header(0, flags::LAST | flags::NO_EXCHANGE_TS),
            Body::VenueStatus(VenueStatus::new(VenueState::Stale, 3, 500)),
        ),
        Event::new(
            header(0, flags::LAST),
            Body::Reference(Reference::new(
                ReferenceKind::Mark,
                Fixed(61_240_120_000_000),
            )),
        ),
        Event::new(
            header(4_200, flags::LAST | BarInterval::Minute.to_flags()),
            Body::Bar(Bar {
                open: Fixed(1),
                high: Fixed(4),
                low: Fixed(0),
                close: Fixed(2),
            }),
        ),
        Event::new(
            header(55, flags::LAST),
            Body::TradingStatus(TradingStatus {
                action: 7,
                reason: 1,
                trading_event: 0,
                is_trading: b'Y',
                is_quoting: b'Y',
                is_short_sell_restricted: b'~',
                _reserved: [0; 23],
            }),
        ),
        Event::new(
            header(0, flags::LAST),
            Body::Imbalance(Imbalance {
                ref_price: Fixed(3_000_000_000),
                cont_book_clr_price: NO_PRICE,
                paired_qty: 5,
                total_imbalance_qty: 6,
                side: Side::Bid as u8,
                auction_type: b'O',
                significant_imbalance: b'~',
                unpaired_side: Side::Ask as u8,
                auction_status: 1,
                freeze_status: 2,
                num_extensions: 3,
                _reserved: 0,
            }),
        ),
        Event::new(
            header(77, flags::LAST),
            Body::Statistic(Statistic {
                price: Fixed(9_000_000_000),
                quantity: Statistic::NO_QUANTITY,
                ts_ref: u64::MAX,
                stat_type: 3,
                channel_id: 4,
                update_action: 1,
                stat_flags: 2,
                _reserved: [0; 2],
            }),
        ),
        // Bybit's documented allLiquidation example: a short of 20000 ROSE closed at 0.04499.
        Event::new(
            header(0, flags::LAST),
            Body::Liquidation(Liquidation::new(
                Side::Ask,
                Fixed(44_990_000),
                Fixed(20_000_000_000_000),
            )),
        ),
    ]
}

/// Encodes through the record's bytes, as a file holds them, and decodes.
fn round_trip(event: &Event) -> (Event, u8, bool) {
    let encoded = codec::encode(event);
    let bytes = encoded.record.as_record_ref().as_ref().to_vec();
    // SAFETY: `bytes` are one whole record that `dbn`'s own struct just produced, and they
    // outlive the reference.
    let record: RecordRef = unsafe { RecordRef::new(&bytes) };
    let rtype = record.header().rtype;
    (
        codec::decode(record).expect("a record encode made decodes"),
        rtype,
        encoded.fell_back,
    )
}

#[test]
fn every_kind_round_trips_through_its_own_record() {
    let events = typical_events();
    let mut kinds_seen = [false; EventKind::COUNT];
    for event in &events {
        let (decoded, rtype, fell_back) = round_trip(event);
        assert_eq!(&decoded, event);
        assert_eq!(decoded.to_words(), event.to_words(), "byte-identical");
        assert!(!fell_back, "{event:?} fell back to the private encoding");
        let expected_rtype = match event.kind() {
            EventKind::Quote | EventKind::Trade | EventKind::BookLevel => rtype::MBP_1,
            EventKind::TradingStatus => rtype::STATUS,
            EventKind::Imbalance => rtype::IMBALANCE,
            EventKind::Statistic
            | EventKind::SnapshotBegin
            | EventKind::SnapshotEnd
            | EventKind::Gap
            | EventKind::VenueStatus
            | EventKind::Reference
            | EventKind::Bar
            | EventKind::Liquidation => rtype::STATISTICS,
        };
        assert_eq!(rtype, expected_rtype, "{:?}", event.kind());
        kinds_seen[event.kind().index()] = true;
    }
    assert!(kinds_seen.iter().all(|&seen| seen), "every kind is covered");
}

#[test]
fn tools_read_quotes_and_trades_where_dbn_puts_them() {
    let events = typical_events();
    let Record::Mbp1(quote) = codec::encode(&events[0]).record else {
        panic!("a quote is an MBP-1 record");
    };
    assert_eq!(quote.levels[0].bid_px, 61_234_500_000_000);
    assert_eq!(quote.levels[0].bid_sz, 1, "whole units where DBN's size is");
    assert_eq!(quote.levels[0].bid_ct, 234_000_000, "the fraction in 1e-9");
    assert_eq!(quote.action as u8, b'N');
    assert_eq!(quote.hd.ts_event, events[0].header.exchange_ts_ns);
    assert_eq!(quote.ts_recv, events[0].header.recv_ts_ns);
    assert!(quote.flags.is_last());
    let Record::Mbp1(trade) = codec::encode(&events[3]).record else {
        panic!("a trade is an MBP-1 record");
    };
    assert_eq!(trade.action as u8, b'T');
    assert_eq!(trade.side as u8, b'B');
    assert_eq!(trade.price, 100_250_000_000);
    assert_eq!(trade.size, 5);
    assert_eq!(trade.sequence, 12);
    let Record::Stat(status) = codec::encode(&events[9]).record else {
        panic!("a venue status is a private StatMsg");
    };
    assert_eq!(
        status.stat_type,
        PRIVATE_STAT_TYPE | EventKind::VenueStatus as u16
    );
}

#[test]
fn events_that_do_not_fit_their_record_take_the_private_encoding() {
    let mut too_big = typical_events()[0];
    // 5e9 units: more than a DBN size holds.
    too_big = Event::new(
        too_big.header,
        Body::Quote(Quote {
            bid_px: Fixed(1),
            bid_sz: Fixed(5_000_000_000 * 1_000_000_000),
            ask_px: Fixed(2),
            ask_sz: Fixed(3),
        }),
    );
    let negative = Event::new(
        header(1, 0),
        Body::BookLevel(BookLevel::new(Side::Bid, Fixed(1), Fixed(-1))),
    );
    let mut odd_side = Trade::new(Fixed(1), Fixed(1), 1, Side::Bid);
    odd_side.aggressor_side = 9;
    let odd_side = Event::new(header(1, 0), Body::Trade(odd_side));
    let status_seq = Event::new(
        header(u64::from(u32::MAX) + 1, 0),
        Body::TradingStatus(TradingStatus::default()),
    );
    for event in [too_big, negative, odd_side, status_seq] {
        let (decoded, rtype, fell_back) = round_trip(&event);
        assert!(fell_back, "{event:?}");
        assert_eq!(rtype, rtype::STATISTICS);
        assert_eq!(decoded.to_words(), event.to_words());
    }
}

fn any_event() -> impl Strategy<Value = Event> {
    (any::<[u64; 8]>(), 0..EventKind::COUNT).prop_map(|(mut words, kind)| {
        let kind = EventKind::ALL[kind] as u64;
        words[3] = (words[3] & !(0xff << 48)) | (kind << 48);
        Event::from_words(words).expect("a valid kind byte")
    })
}

/// Arbitrary events near the typical ones: small sizes, zero reserved bytes, so that the
/// natural records are exercised, not only the fallback.
fn plausible_event() -> impl Strategy<Value = Event> {
    (
        any::<(u64, u64, u64, u32, u16, u8)>(),
        0..EventKind::COUNT,
        any::<(i64, u32, i64, u32, u64, u8)>(),
    )
        .prop_map(
            |(
                (exch, recv, seq, instrument, venue, flag_bits),
                kind,
                (px, sz, px2, sz2, id, side),
            )| {
                let header = EventHeader {
                    exchange_ts_ns: exch,
                    recv_ts_ns: recv,
                    venue_seq: seq,
                    instrument_id: instrument,
                    venue_id: venue,
                    kind: EventKind::Quote,
                    flags: flag_bits,
                };
                let side = Side::from_u8(side % 3);
                let size = Fixed(i64::from(sz) * 3);
                let body = match EventKind::ALL[kind] {
                    EventKind::Quote => Body::Quote(Quote {
                        bid_px: Fixed(px),
                        bid_sz: size,
                        ask_px: Fixed(px2),
                        ask_sz: Fixed(i64::from(sz2)),
                    }),
                    EventKind::Trade => Body::Trade(Trade::new(Fixed(px), size, id, side)),
                    EventKind::BookLevel => Body::BookLevel(BookLevel::new(side, Fixed(px), size)),
                    EventKind::SnapshotBegin => Body::SnapshotBegin(Snapshot {
                        bid_levels: sz,
                        ask_levels: sz2,
                        snapshot_id: id,
                        _reserved: [0; 2],
                    }),
                    EventKind::SnapshotEnd => Body::SnapshotEnd(Snapshot {
                        bid_levels: sz,
                        ask_levels: sz2,
                        snapshot_id: id,
                        _reserved: [0; 2],
                    }),
                    EventKind::Gap => Body::Gap(Gap::new(GapReason::from_u8(side as u8), id, seq)),
                    EventKind::VenueStatus => Body::VenueStatus(VenueStatus::new(
                        VenueState::from_u8(sz2 as u8 % 6),
                        sz,
                        id,
                    )),
                    EventKind::Reference => Body::Reference(Reference::new(
                        ReferenceKind::from_u8(side as u8),
                        Fixed(px),
                    )),
                    EventKind::Bar => Body::Bar(Bar {
                        open: Fixed(px),
                        high: Fixed(px2),
                        low: size,
                        close: Fixed(id as i64),
                    }),
                    EventKind::TradingStatus => Body::TradingStatus(TradingStatus {
                        action: sz as u16,
                        reason: sz2 as u16,
                        trading_event: 3,
                        is_trading: b'Y',
                        is_quoting: b'N',
                        is_short_sell_restricted: b'~',
                        _reserved: [0; 23],
                    }),
                    EventKind::Imbalance => Body::Imbalance(Imbalance {
                        ref_price: Fixed(px),
                        cont_book_clr_price: Fixed(px2),
                        paired_qty: sz,
                        total_imbalance_qty: sz2,
                        side: side as u8,
                        auction_type: b'C',
                        ..Imbalance::default()
                    }),
                    EventKind::Statistic => Body::Statistic(Statistic {
                        price: Fixed(px),
                        quantity: px2,
                        ts_ref: id,
                        stat_type: (sz as u16) % 100,
                        channel_id: sz2 as u16,
                        update_action: 1,
                        stat_flags: side as u8,
                        _reserved: [0; 2],
                    }),
                    EventKind::Liquidation => {
                        Body::Liquidation(Liquidation::new(side, Fixed(px), size))
                    }
                };
                Event::new(header, body)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Any 64 bytes with a valid kind come back byte for byte.
    #[test]
    fn any_event_round_trips(event in any_event()) {
        let (decoded, _, _) = round_trip(&event);
        prop_assert_eq!(decoded.to_words(), event.to_words());
    }

    /// Plausible events come back byte for byte, and those whose kind has a record of its own
    /// and whose values fit it use it.
    #[test]
    fn plausible_events_round_trip(event in plausible_event()) {
        let (decoded, _, fell_back) = round_trip(&event);
        prop_assert_eq!(decoded.to_words(), event.to_words());
        let fits_status = event.header.venue_seq <= u64::from(u32::MAX);
        let fits_imbalance = event.header.venue_seq == 0;
        let expect_natural = match event.kind() {
            EventKind::Quote | EventKind::Trade | EventKind::BookLevel | EventKind::Statistic => true,
            EventKind::TradingStatus => fits_status,
            EventKind::Imbalance => fits_imbalance,
            EventKind::SnapshotBegin | EventKind::SnapshotEnd | EventKind::Gap
            | EventKind::VenueStatus | EventKind::Reference | EventKind::Bar
            | EventKind::Liquidation => true,
        };
        prop_assert_eq!(!fell_back, expect_natural, "{:?}", event);
    }
}

#[test]
fn a_liquidation_is_a_private_stat_record_whose_price_tools_can_read() {
    let liquidation = *typical_events()
        .iter()
        .find(|event| event.kind() == EventKind::Liquidation)
        .expect("a liquidation among the typical events");
    let Record::Stat(stat) = codec::encode(&liquidation).record else {
        panic!("a liquidation is a StatMsg");
    };
    assert_eq!(stat.stat_type, PRIVATE_STAT_TYPE | 13);
    assert_eq!(stat.price, 44_990_000, "the price where a StatMsg keeps it");
    assert_eq!(stat.quantity, 20_000_000_000_000, "the size, in 1e-9 units");
    assert_eq!(stat.hd.ts_event, liquidation.header.exchange_ts_ns);
    assert_eq!(stat.ts_recv, liquidation.header.recv_ts_ns);
}
