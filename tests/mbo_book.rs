//! `tickwire::book::mbo::MboBook` against the plain book in `support/mbo_oracle.rs`: each action
//! and each error by hand, then long generated streams (`support/mbo_stream.rs`) compared record
//! by record, then arbitrary op sequences from proptest.
//!
//! After every record the two books must return the same `Result`, report the same
//! `LevelUpdate`s in the same order, and agree on the best bid and ask, the number of resting
//! orders and the record's order; every few thousand records, and at the end of a stream, they
//! must hold the same levels and the same orders.

use crate::support::mbo_oracle;
use crate::support::mbo_stream;

use mbo_oracle::PlainMboBook;
use mbo_stream::{IdPattern, Record, Stream};
use proptest::prelude::*;
use tickwire::book::mbo::{LevelUpdate, MboBook, MboError};
use tickwire::book::BookSide;

const BID: BookSide = BookSide::Bid;
const ASK: BookSide = BookSide::Ask;

/// Applies one record, returning the result and the updates it reported.
fn apply(book: &mut MboBook, record: Record) -> (Result<(), MboError>, Vec<LevelUpdate>) {
    let mut updates = Vec::new();
    let result = book.apply(
        record.action,
        record.side,
        record.order_id,
        record.price,
        record.size,
        &mut |update| updates.push(update),
    );
    (result, updates)
}

fn rec(action: u8, side: u8, order_id: u64, price: i64, size: u32) -> Record {
    Record {
        action,
        side,
        order_id,
        price,
        size,
    }
}

fn update(side: BookSide, price: i64, size: u64, count: u32) -> LevelUpdate {
    LevelUpdate {
        side,
        price,
        size,
        count,
    }
}

/// Everything the API can say about a book, to compare a book before and after an error.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    bids: Vec<(i64, u64, u32)>,
    asks: Vec<(i64, u64, u32)>,
    orders: usize,
    order_states: Vec<Option<(BookSide, i64, u32)>>,
}

fn snapshot(book: &MboBook, ids: &[u64]) -> Snapshot {
    Snapshot {
        bids: book.levels(BID),
        asks: book.levels(ASK),
        orders: book.orders(),
        order_states: ids.iter().map(|&id| book.order(id)).collect(),
    }
}

/// Two bids at 100 (ids 1, 2), one at 99 (id 3), two asks at 101 (ids 4, 5).
fn seeded_book() -> MboBook {
    let mut book = MboBook::with_capacity(16, 8);
    for record in [
        rec(b'A', b'B', 1, 100, 5),
        rec(b'A', b'B', 2, 100, 3),
        rec(b'A', b'B', 3, 99, 7),
        rec(b'A', b'A', 4, 101, 2),
        rec(b'A', b'A', 5, 101, 4),
    ] {
        assert_eq!(apply(&mut book, record).0, Ok(()));
    }
    book
}

const SEEDED_IDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

#[test]
fn add_rests_an_order_and_reports_its_level() {
    let mut book = MboBook::new();
    assert!(book.is_empty());
    assert_eq!(
        apply(&mut book, rec(b'A', b'B', 7, 100, 5)),
        (Ok(()), vec![update(BID, 100, 5, 1)])
    );
    assert_eq!(
        apply(&mut book, rec(b'A', b'B', 8, 100, 2)),
        (Ok(()), vec![update(BID, 100, 7, 2)])
    );
    assert_eq!(
        apply(&mut book, rec(b'A', b'A', 9, 102, 1)),
        (Ok(()), vec![update(ASK, 102, 1, 1)])
    );
    assert_eq!(book.best(BID), Some((100, 7, 2)));
    assert_eq!(book.best(ASK), Some((102, 1, 1)));
    assert_eq!(book.order(8), Some((BID, 100, 2)));
    assert_eq!(book.level(BID, 100), Some((7, 2)));
    assert_eq!(book.level(ASK, 100), None);
    assert_eq!(book.orders(), 3);
    assert!(!book.is_empty());
}

#[test]
fn levels_are_best_first_on_both_sides() {
    let mut book = seeded_book();
    assert_eq!(apply(&mut book, rec(b'A', b'A', 6, 103, 1)).0, Ok(()));
    assert_eq!(book.levels(BID), vec![(100, 8, 2), (99, 7, 1)]);
    assert_eq!(book.levels(ASK), vec![(101, 6, 2), (103, 1, 1)]);
    assert_eq!(book.level_count(ASK), 2);
}

#[test]
fn partial_cancel_keeps_the_order() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'C', b'B', 1, 100, 2)),
        (Ok(()), vec![update(BID, 100, 6, 2)])
    );
    assert_eq!(book.order(1), Some((BID, 100, 3)));
    assert_eq!(book.orders(), 5);
}

#[test]
fn full_cancel_removes_the_order_and_an_emptied_level() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'C', b'B', 2, 100, 3)),
        (Ok(()), vec![update(BID, 100, 5, 1)])
    );
    assert_eq!(book.order(2), None);
    assert_eq!(
        apply(&mut book, rec(b'C', b'B', 1, 100, 5)),
        (Ok(()), vec![update(BID, 100, 0, 0)])
    );
    assert_eq!(book.best(BID), Some((99, 7, 1)));
    assert_eq!(book.orders(), 3);
}

#[test]
fn cancel_finds_the_order_by_id_alone() {
    // The record's side and price are not consulted: the order's own are.
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'C', b'N', 3, 12_345, 7)),
        (Ok(()), vec![update(BID, 99, 0, 0)])
    );
}

#[test]
fn cancel_of_nothing_reports_the_unchanged_level() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'C', b'A', 4, 101, 0)),
        (Ok(()), vec![update(ASK, 101, 6, 2)])
    );
    assert_eq!(book.order(4), Some((ASK, 101, 2)));
}

#[test]
fn modify_to_a_new_price_reports_the_old_level_then_the_new() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'M', b'B', 3, 98, 4)),
        (Ok(()), vec![update(BID, 99, 0, 0), update(BID, 98, 4, 1)])
    );
    assert_eq!(
        apply(&mut book, rec(b'M', b'B', 2, 98, 1)),
        (Ok(()), vec![update(BID, 100, 5, 1), update(BID, 98, 5, 2)])
    );
    assert_eq!(book.order(2), Some((BID, 98, 1)));
}

#[test]
fn modify_at_the_same_price_changes_the_size_only() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'M', b'A', 5, 101, 10)),
        (Ok(()), vec![update(ASK, 101, 12, 2)])
    );
    assert_eq!(
        apply(&mut book, rec(b'M', b'A', 5, 101, 1)),
        (Ok(()), vec![update(ASK, 101, 3, 2)])
    );
    assert_eq!(book.order(5), Some((ASK, 101, 1)));
}

#[test]
fn modify_keeps_the_resting_side() {
    // The record's side is not consulted for a resting order.
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'M', b'A', 1, 100, 5)),
        (Ok(()), vec![update(BID, 100, 8, 2)])
    );
    assert_eq!(book.order(1), Some((BID, 100, 5)));
}

#[test]
fn modify_of_an_unknown_order_is_an_add() {
    let mut book = seeded_book();
    assert_eq!(
        apply(&mut book, rec(b'M', b'A', 6, 101, 1)),
        (Ok(()), vec![update(ASK, 101, 7, 3)])
    );
    assert_eq!(book.order(6), Some((ASK, 101, 1)));
}

#[test]
fn trade_fill_and_none_leave_the_book_alone() {
    let mut book = seeded_book();
    let before = snapshot(&book, &SEEDED_IDS);
    for record in [
        rec(b'T', b'A', 0, 100, 2),
        rec(b'F', b'B', 1, 100, 2),
        rec(b'N', b'N', 0, 0, 0),
        rec(b'F', b'B', 99, 100, 2),
    ] {
        assert_eq!(apply(&mut book, record), (Ok(()), vec![]));
    }
    assert_eq!(snapshot(&book, &SEEDED_IDS), before);
}

#[test]
fn clear_reports_every_level_best_first_bids_then_asks() {
    let mut book = seeded_book();
    assert_eq!(apply(&mut book, rec(b'A', b'A', 6, 103, 1)).0, Ok(()));
    let removed = vec![
        update(BID, 100, 0, 0),
        update(BID, 99, 0, 0),
        update(ASK, 101, 0, 0),
        update(ASK, 103, 0, 0),
    ];
    assert_eq!(
        apply(&mut book, rec(b'R', b'N', 0, i64::MAX, 0)),
        (Ok(()), removed.clone())
    );
    assert!(book.is_empty());
    assert_eq!(book.orders(), 0);
    assert_eq!(book.best(BID), None);
    assert_eq!(book.best(ASK), None);
    assert_eq!(book.order(1), None);
    assert_eq!(apply(&mut book, rec(b'R', b'N', 0, 0, 0)), (Ok(()), vec![]));

    let mut book = seeded_book();
    assert_eq!(apply(&mut book, rec(b'A', b'A', 6, 103, 1)).0, Ok(()));
    let mut updates = Vec::new();
    book.clear(&mut |update| updates.push(update));
    assert_eq!(updates, removed);
    // The cleared book takes the same ids again.
    assert_eq!(apply(&mut book, rec(b'A', b'B', 1, 50, 1)).0, Ok(()));
}

#[test]
fn errors_leave_the_book_unchanged_and_report_nothing() {
    let cases = [
        (rec(b'X', b'B', 6, 100, 1), MboError::UnknownAction(b'X')),
        (rec(0, b'B', 6, 100, 1), MboError::UnknownAction(0)),
        (rec(b'A', b'N', 6, 100, 1), MboError::NoSide(6)),
        (rec(b'A', b'B', 6, 100, 0), MboError::ZeroSize(6)),
        (rec(b'A', b'B', 1, 100, 1), MboError::DuplicateOrder(1)),
        // Side and size are checked before the duplicate, as for a new id.
        (rec(b'A', b'X', 1, 100, 1), MboError::NoSide(1)),
        (rec(b'A', b'B', 1, 100, 0), MboError::ZeroSize(1)),
        (rec(b'C', b'B', 6, 100, 1), MboError::UnknownOrder(6)),
        (
            rec(b'C', b'B', 1, 100, 6),
            MboError::CancelTooLarge {
                order_id: 1,
                cancel: 6,
                resting: 5,
            },
        ),
        (rec(b'M', b'B', 1, 100, 0), MboError::ZeroSize(1)),
        (rec(b'M', b'B', 1, 98, 0), MboError::ZeroSize(1)),
        (rec(b'M', b'N', 6, 100, 1), MboError::NoSide(6)),
        (rec(b'M', b'B', 6, 100, 0), MboError::ZeroSize(6)),
    ];
    for (record, error) in cases {
        let mut book = seeded_book();
        let before = snapshot(&book, &SEEDED_IDS);
        assert_eq!(apply(&mut book, record), (Err(error), vec![]), "{record:?}");
        assert_eq!(snapshot(&book, &SEEDED_IDS), before, "{record:?}");
        // The book still works after the error.
        assert_eq!(apply(&mut book, rec(b'C', b'B', 1, 100, 5)).0, Ok(()));
    }
}

#[test]
fn a_book_with_no_capacity_grows() {
    let mut book = MboBook::with_capacity(0, 0);
    assert_eq!(book.order(0), None);
    assert_eq!(
        apply(&mut book, rec(b'C', b'B', 0, 1, 1)).0,
        Err(MboError::UnknownOrder(0))
    );
    for id in 0..10_000u64 {
        let side = if id % 2 == 0 { b'B' } else { b'A' };
        assert_eq!(
            apply(&mut book, rec(b'A', side, id << 20, id as i64, 1)).0,
            Ok(())
        );
    }
    assert_eq!(book.orders(), 10_000);
    for id in 0..10_000u64 {
        assert!(book.order(id << 20).is_some());
    }
}

/// Applies `records` to a fast and a plain book, checking them against each other after every
/// record (see the file's docs). Returns how many records were applied.
fn differential(
    records: impl Iterator<Item = Record>,
    mut fast: MboBook,
    full_check_every: usize,
) -> usize {
    let mut plain = PlainMboBook::new();
    let (mut fast_updates, mut plain_updates) = (Vec::new(), Vec::new());
    let mut applied = 0;
    let mut rejected = 0;
    for (index, record) in records.enumerate() {
        fast_updates.clear();
        plain_updates.clear();
        let fast_result = fast.apply(
            record.action,
            record.side,
            record.order_id,
            record.price,
            record.size,
            &mut |update| fast_updates.push(update),
        );
        let plain_result = plain.apply(
            record.action,
            record.side,
            record.order_id,
            record.price,
            record.size,
            &mut |update| plain_updates.push(update),
        );
        let at = || format!("record {index}: {record:?}");
        assert_eq!(fast_result, plain_result, "{}", at());
        assert_eq!(fast_updates, plain_updates, "{}", at());
        assert_eq!(fast.best(BID), plain.best(BID), "{}", at());
        assert_eq!(fast.best(ASK), plain.best(ASK), "{}", at());
        assert_eq!(fast.orders(), plain.orders(), "{}", at());
        assert_eq!(fast.is_empty(), plain.is_empty(), "{}", at());
        assert_eq!(
            fast.order(record.order_id),
            plain.order(record.order_id),
            "{}",
            at()
        );
        for side in [BID, ASK] {
            assert_eq!(
                fast.level(side, record.price),
                plain.level(side, record.price),
                "{}",
                at()
            );
        }
        if index % full_check_every == 0 {
            assert_eq!(fast.levels(BID), plain.levels(BID), "{}", at());
            assert_eq!(fast.levels(ASK), plain.levels(ASK), "{}", at());
        }
        rejected += usize::from(plain_result.is_err());
        applied += 1;
    }
    assert_eq!(fast.levels(BID), plain.levels(BID));
    assert_eq!(fast.levels(ASK), plain.levels(ASK));
    for order_id in plain.order_ids() {
        assert_eq!(fast.order(order_id), plain.order(order_id));
    }
    // A stream the books mostly reject would prove little.
    assert!(
        rejected * 20 < applied.max(1),
        "{rejected} of {applied} rejected"
    );
    applied
}

fn stream_records(mut stream: Stream, count: usize) -> impl Iterator<Item = Record> {
    (0..count).map(move |_| stream.next_record())
}

/// 12 streams of 25,000 records: 300,000 records across the three id patterns, two book sizes
/// (near-empty and deep), and both a presized and a growing fast book.
#[test]
fn generated_streams_match_the_plain_book() {
    let mut total = 0;
    for seed in 0..4u64 {
        for (ids, target_orders) in [
            (IdPattern::Sequential, 40),
            (IdPattern::CmeLike, 2_000),
            (IdPattern::Random, 500),
        ] {
            let fast = if seed % 2 == 0 {
                MboBook::new()
            } else {
                MboBook::with_capacity(target_orders * 4, 256)
            };
            let stream = Stream::new(seed, ids, target_orders).rates(10_000, 200);
            total += differential(stream_records(stream, 25_000), fast, 997);
        }
    }
    assert_eq!(total, 300_000);
}

/// The long run: 40 streams of 100,000 records, 4,000,000 in all, deeper books and fewer clears.
/// Under a second in release, about ten seconds in debug; run with
/// `cargo test --release --test tickwire mbo_book:: -- --ignored`.
#[test]
#[ignore = "long: 4,000,000 records; run in release with --ignored"]
fn long_generated_streams_match_the_plain_book() {
    let mut total = 0;
    for seed in 100..110u64 {
        for (ids, target_orders) in [
            (IdPattern::Sequential, 100),
            (IdPattern::CmeLike, 5_000),
            (IdPattern::CmeLike, 20_000),
            (IdPattern::Random, 1_000),
        ] {
            let stream = Stream::new(seed, ids, target_orders).rates(5_000, 20);
            total += differential(stream_records(stream, 100_000), MboBook::new(), 4_999);
        }
    }
    assert_eq!(total, 4_000_000);
}

fn arbitrary_record() -> impl Strategy<Value = Record> {
    (
        prop::sample::select(b"AAAACCCMMMRTFNX".to_vec()),
        prop::sample::select(b"BBAAN".to_vec()),
        // Few ids, so that adds collide with resting orders and cancels find them; high bits so
        // that they also collide in the table.
        (0u64..24).prop_map(|id| id.rotate_right(7)),
        -4i64..4,
        prop_oneof![4 => 1u32..6, 1 => Just(0u32), 1 => Just(u32::MAX)],
    )
        .prop_map(|(action, side, order_id, price, size)| rec(action, side, order_id, price, size))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_records_match_the_plain_book(
        records in prop::collection::vec(arbitrary_record(), 0..300),
        presized in any::<bool>(),
    ) {
        let fast = if presized { MboBook::with_capacity(32, 8) } else { MboBook::new() };
        differential_quiet(records, fast);
    }
}

/// `differential` without the "mostly accepted" check, which arbitrary records need not meet.
fn differential_quiet(records: Vec<Record>, mut fast: MboBook) {
    let mut plain = PlainMboBook::new();
    for record in records {
        let (fast_result, fast_updates) = apply(&mut fast, record);
        let mut plain_updates = Vec::new();
        let plain_result = plain.apply(
            record.action,
            record.side,
            record.order_id,
            record.price,
            record.size,
            &mut |update| plain_updates.push(update),
        );
        assert_eq!(fast_result, plain_result, "{record:?}");
        assert_eq!(fast_updates, plain_updates, "{record:?}");
        assert_eq!(fast.levels(BID), plain.levels(BID), "{record:?}");
        assert_eq!(fast.levels(ASK), plain.levels(ASK), "{record:?}");
        assert_eq!(fast.orders(), plain.orders(), "{record:?}");
        for order_id in (0u64..24).map(|id| id.rotate_right(7)) {
            assert_eq!(fast.order(order_id), plain.order(order_id), "{record:?}");
        }
    }
}

/// Issue 24: a top-of-book publisher's adds (DBN `F_TOB`; IEX, NYSE National) each replace their
/// side, as Databento documents; `apply` froze such a book at its first add (the next add
/// repeats the order id).
#[test]
fn a_top_of_book_add_replaces_its_side() {
    let mut book = MboBook::with_capacity(8, 8);
    let mut updates = Vec::new();
    let mut tob = |book: &mut MboBook, side: u8, price: i64, size: u32| {
        updates.clear();
        let result = book.apply_top_of_book(side, 0, price, size, &mut |u| updates.push(u));
        (result, updates.clone())
    };
    assert_eq!(
        tob(&mut book, b'B', 100, 5),
        (Ok(()), vec![update(BID, 100, 5, 0)])
    );
    assert_eq!(
        tob(&mut book, b'A', 102, 7),
        (Ok(()), vec![update(ASK, 102, 7, 0)])
    );
    // The next bid replaces the first: the old level goes, the new one is the only one.
    assert_eq!(
        tob(&mut book, b'B', 101, 3),
        (Ok(()), vec![update(BID, 100, 0, 0), update(BID, 101, 3, 0)])
    );
    assert_eq!(book.levels(BID), vec![(101, 3, 0)]);
    assert_eq!(
        book.levels(ASK),
        vec![(102, 7, 0)],
        "the other side is untouched"
    );
    // The same price with a new size: one update.
    assert_eq!(
        tob(&mut book, b'B', 101, 4),
        (Ok(()), vec![update(BID, 101, 4, 0)])
    );
    // UNDEF_PRICE: no depth on that side.
    assert_eq!(
        tob(&mut book, b'B', i64::MAX, 0),
        (Ok(()), vec![update(BID, 101, 0, 0)])
    );
    assert_eq!(book.best(BID), None);
    assert_eq!(book.best(ASK), Some((102, 7, 0)));
    assert!(
        book.is_empty(),
        "no orders rest: the levels are the venue's quotes"
    );
    // Resting orders on the side are replaced too; the other side's stay.
    book.apply(b'A', b'B', 9, 99, 2, &mut |_| {}).unwrap();
    book.apply(b'A', b'B', 10, 98, 2, &mut |_| {}).unwrap();
    book.apply(b'A', b'A', 11, 103, 1, &mut |_| {}).unwrap();
    assert_eq!(
        tob(&mut book, b'B', 98, 6),
        (Ok(()), vec![update(BID, 99, 0, 0), update(BID, 98, 6, 0)])
    );
    assert_eq!(book.order(9), None);
    assert_eq!(book.order(10), None);
    assert_eq!(book.order(11), Some((ASK, 103, 1)));
    assert_eq!(book.orders(), 1);
    assert_eq!(
        tob(&mut book, b'N', 98, 6),
        (Err(MboError::NoSide(0)), vec![])
    );
    assert_eq!(
        book.levels(BID),
        vec![(98, 6, 0)],
        "an error changes nothing"
    );
}

fn arbitrary_record_or_top_of_book() -> impl Strategy<Value = (Record, bool)> {
    (
        arbitrary_record(),
        prop_oneof![3 => Just(false), 1 => Just(true)],
        prop_oneof![6 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(mut record, tob, undefined)| {
            if undefined {
                record.price = i64::MAX;
            }
            (record, tob)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Order records mixed with top-of-book adds (on either side, some at `UNDEF_PRICE`): the
    /// fast book and the plain one agree after every record.
    #[test]
    fn top_of_book_adds_among_orders_match_the_plain_book(
        records in prop::collection::vec(arbitrary_record_or_top_of_book(), 0..300),
        presized in any::<bool>(),
    ) {
        let mut fast = if presized { MboBook::with_capacity(32, 8) } else { MboBook::new() };
        let mut plain = PlainMboBook::new();
        for (record, tob) in records {
            let (mut fast_updates, mut plain_updates) = (Vec::new(), Vec::new());
            let (fast_result, plain_result) = if tob {
                (
                    fast.apply_top_of_book(record.side, record.order_id, record.price, record.size, &mut |u| fast_updates.push(u)),
                    plain.apply_top_of_book(record.side, record.order_id, record.price, record.size, &mut |u| plain_updates.push(u)),
                )
            } else {
                (
                    fast.apply(record.action, record.side, record.order_id, record.price, record.size, &mut |u| fast_updates.push(u)),
                    plain.apply(record.action, record.side, record.order_id, record.price, record.size, &mut |u| plain_updates.push(u)),
                )
            };
            prop_assert_eq!(fast_result, plain_result, "{:?} tob={}", record, tob);
            prop_assert_eq!(&fast_updates, &plain_updates, "{:?} tob={}", record, tob);
            prop_assert_eq!(fast.levels(BID), plain.levels(BID));
            prop_assert_eq!(fast.levels(ASK), plain.levels(ASK));
            prop_assert_eq!(fast.orders(), plain.orders());
            for order_id in (0u64..24).map(|id| id.rotate_right(7)) {
                prop_assert_eq!(fast.order(order_id), plain.order(order_id));
            }
        }
    }
}

/// Many orders on both sides with colliding ids (probe runs wrapping round the table's end),
/// then a top-of-book add: every order of that side goes and every other stays reachable.
#[test]
fn a_top_of_book_add_removes_a_side_from_a_crowded_table() {
    for seed in 0..16u64 {
        let mut fast = MboBook::with_capacity(64, 64);
        let mut plain = PlainMboBook::new();
        for n in 0..48u64 {
            // High bits differ, low bits collide: long runs in a small table.
            let order_id = (n << 58) ^ seed;
            let side = if (n ^ seed) % 3 == 0 { b'A' } else { b'B' };
            let price = 100 + (n % 5) as i64 * if side == b'B' { -1 } else { 1 };
            fast.apply(b'A', side, order_id, price, 1, &mut |_| {})
                .unwrap();
            plain
                .apply(b'A', side, order_id, price, 1, &mut |_| {})
                .unwrap();
        }
        for side in [b'B', b'A'] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            fast.apply_top_of_book(side, 0, 100, 9, &mut |u| a.push(u))
                .unwrap();
            plain
                .apply_top_of_book(side, 0, 100, 9, &mut |u| b.push(u))
                .unwrap();
            assert_eq!(a, b, "seed {seed}");
            assert_eq!(fast.orders(), plain.orders(), "seed {seed}");
            for order_id in plain.order_ids() {
                assert_eq!(fast.order(order_id), plain.order(order_id), "seed {seed}");
            }
            for n in 0..48u64 {
                let order_id = (n << 58) ^ seed;
                assert_eq!(fast.order(order_id), plain.order(order_id), "seed {seed}");
            }
        }
        assert!(fast.is_empty());
    }
}
