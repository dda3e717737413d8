//! `BookSync`, the Binance USD-M book synchronisation state machine: each rule of "How to manage
//! a local order book correctly" with hand-made diffs, the events and flags it emits, a property
//! test that no input sequence panics, and a replay of the real capture's depth stream.

use crate::support::common;

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use tickwire::book::BookSide;
use tickwire::event::{flags, Body, BookLevel, Event, GapReason, Quote, Side, Snapshot};
use tickwire::fixed::Fixed;
use tickwire::venue::binance::sync::{
    BookSync, DiffHeader, SnapshotRequest, SyncConfig, SyncState,
};

const INSTRUMENT: u32 = 7;
const VENUE: u16 = 3;
const MS: u64 = 1_000_000;

fn px(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("test decimal")
}

fn levels(pairs: &[(&str, &str)]) -> Vec<(Fixed, Fixed)> {
    pairs.iter().map(|&(p, q)| (px(p), px(q))).collect()
}

/// A diff header; the exchange time is `u` ms and the receive time one ms later, so every event
/// can be traced back to its diff.
fn diff(first: u64, last: u64, prev: u64) -> DiffHeader {
    DiffHeader {
        first_update_id: first,
        final_update_id: last,
        prev_final_update_id: prev,
        exch_ts_ns: last * MS,
        recv_ts_ns: last * MS + MS,
    }
}

fn sync_with(config: SyncConfig) -> BookSync {
    BookSync::new(INSTRUMENT, VENUE, config)
}

fn sync() -> BookSync {
    sync_with(SyncConfig::default())
}

fn feed(
    sync: &mut BookSync,
    header: DiffHeader,
    bids: &[(Fixed, Fixed)],
    asks: &[(Fixed, Fixed)],
) -> Vec<Event> {
    let mut events = Vec::new();
    sync.on_diff(
        header,
        bids.iter().copied(),
        asks.iter().copied(),
        &mut |event| events.push(event),
    );
    events
}

fn snapshot(
    sync: &mut BookSync,
    last_update_id: u64,
    bids: &[(Fixed, Fixed)],
    asks: &[(Fixed, Fixed)],
    recv_ts_ns: u64,
) -> Vec<Event> {
    let mut events = Vec::new();
    sync.on_snapshot(
        last_update_id,
        bids.iter().copied(),
        asks.iter().copied(),
        recv_ts_ns,
        &mut |event| events.push(event),
    );
    events
}

/// Levels as `(price, qty)`, in the order given.
type LevelList = Vec<(Fixed, Fixed)>;

/// The standard snapshot of these tests: two bids, two asks.
fn snapshot_book() -> (LevelList, LevelList) {
    (
        levels(&[("100.0", "2"), ("99.5", "3")]),
        levels(&[("100.5", "1"), ("101.0", "4")]),
    )
}

/// Brings a machine live at `lastUpdateId` 100 with one overlapping diff (U=95, u=105).
fn live_sync() -> BookSync {
    let mut sync = sync();
    feed(&mut sync, diff(95, 105, 90), &[], &[]);
    assert!(sync.snapshot_request(0).is_some());
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 100, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::Live);
    sync
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|event| match event.body() {
            Body::Quote(_) => "Quote",
            Body::Trade(_) => "Trade",
            Body::BookLevel(_) => "BookLevel",
            Body::SnapshotBegin(_) => "SnapshotBegin",
            Body::SnapshotEnd(_) => "SnapshotEnd",
            Body::Gap(_) => "Gap",
            Body::VenueStatus(_) => "VenueStatus",
            Body::Reference(_) => "Reference",
            Body::Bar(_) => "Bar",
            Body::TradingStatus(_) => "TradingStatus",
            Body::Imbalance(_) => "Imbalance",
            Body::Statistic(_) => "Statistic",
            Body::Liquidation(_) => "Liquidation",
        })
        .collect()
}

#[test]
fn stale_diffs_are_dropped_and_not_applied() {
    let mut sync = sync();
    // u = 95 < lastUpdateId = 100: this diff is already in the snapshot and must not be applied
    // over it (it would set 100.0 to 5).
    feed(&mut sync, diff(90, 95, 85), &levels(&[("100.0", "5")]), &[]);
    feed(&mut sync, diff(96, 105, 95), &levels(&[("99.0", "1")]), &[]);
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 100, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::Live);
    let stats = sync.stats();
    assert_eq!(stats.diffs_dropped_stale, 1);
    assert_eq!(stats.diffs_applied, 1);
    assert_eq!(sync.book().get(BookSide::Bid, px("100.0")), Some(px("2")));
    assert_eq!(sync.book().get(BookSide::Bid, px("99.0")), Some(px("1")));
}

#[test]
fn first_event_overlapping_the_snapshot_is_accepted_at_both_edges() {
    // U == lastUpdateId.
    let mut sync = self::sync();
    feed(
        &mut sync,
        diff(100, 110, 99),
        &levels(&[("99.0", "1")]),
        &[],
    );
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 100, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(sync.book().get(BookSide::Bid, px("99.0")), Some(px("1")));

    // u == lastUpdateId: re-applying what the snapshot already holds is harmless.
    let mut sync = self::sync();
    feed(
        &mut sync,
        diff(95, 100, 90),
        &levels(&[("100.0", "2")]),
        &[],
    );
    snapshot(&mut sync, 100, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(sync.stats().diffs_dropped_stale, 0);
    assert_eq!(sync.stats().diffs_applied, 1);
    assert_eq!(sync.stats().syncs, 1);
}

#[test]
fn snapshot_older_than_every_buffered_diff_is_requested_again() {
    let config = SyncConfig {
        backoff_initial_ns: 100 * MS,
        ..SyncConfig::default()
    };
    let mut sync = sync_with(config);
    feed(&mut sync, diff(101, 110, 95), &[], &[]);
    assert!(sync.snapshot_request(0).is_some());
    assert!(
        sync.snapshot_request(0).is_none(),
        "one request outstanding"
    );
    // lastUpdateId 100 < U 101: the updates between them are missing.
    let (bids, asks) = snapshot_book();
    let events = snapshot(&mut sync, 100, &bids, &asks, 5 * MS);
    assert!(events.is_empty());
    assert_eq!(sync.state(), SyncState::Buffering);
    assert_eq!(sync.stats().snapshots_stale, 1);
    assert_eq!(sync.buffered_diffs(), 1, "the buffered diff is kept");
    // Re-requested after the backoff, counted from the stale snapshot's arrival.
    assert_eq!(sync.next_snapshot_request_at_ns(), Some(105 * MS));
    assert!(sync.snapshot_request(104 * MS).is_none());
    assert!(sync.snapshot_request(105 * MS).is_some());
    assert_eq!(sync.stats().snapshots_requested, 2);
    // A fresh snapshot that overlaps the buffer syncs.
    snapshot(&mut sync, 105, &bids, &asks, 200 * MS);
    assert_eq!(sync.state(), SyncState::Live);
}

#[test]
fn snapshot_newer_than_every_buffered_diff_waits_for_an_overlapping_diff() {
    let mut sync = sync();
    feed(&mut sync, diff(80, 90, 70), &levels(&[("100.0", "9")]), &[]);
    assert!(sync.snapshot_request(0).is_some());
    let (bids, asks) = snapshot_book();
    let events = snapshot(&mut sync, 100, &bids, &asks, 0);
    assert!(events.is_empty(), "nothing is published before the overlap");
    assert_eq!(sync.state(), SyncState::AwaitingOverlap);
    assert_eq!(sync.stats().diffs_dropped_stale, 1);
    assert!(
        sync.snapshot_request(u64::MAX).is_none(),
        "the held snapshot is not thrown away"
    );

    // Still older: dropped.
    assert!(feed(&mut sync, diff(91, 98, 90), &levels(&[("100.0", "8")]), &[]).is_empty());
    assert_eq!(sync.stats().diffs_dropped_stale, 2);
    // Overlaps: the snapshot is published, then this diff.
    let events = feed(&mut sync, diff(99, 104, 98), &levels(&[("99.0", "1")]), &[]);
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(
        kinds(&events),
        [
            "SnapshotBegin",
            "BookLevel",
            "BookLevel",
            "BookLevel",
            "BookLevel",
            "SnapshotEnd",
            "Quote",
            "BookLevel"
        ]
    );
    assert_eq!(sync.book().get(BookSide::Bid, px("100.0")), Some(px("2")));
    assert_eq!(sync.book().get(BookSide::Bid, px("99.0")), Some(px("1")));
}

#[test]
fn held_snapshot_that_the_stream_skips_past_is_requested_again() {
    let mut sync = sync();
    feed(&mut sync, diff(80, 90, 70), &[], &[]);
    assert!(sync.snapshot_request(0).is_some());
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 100, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::AwaitingOverlap);
    // The next diff starts after lastUpdateId: the snapshot can never be joined to the stream.
    assert!(feed(&mut sync, diff(101, 110, 90), &[], &[]).is_empty());
    assert_eq!(sync.state(), SyncState::Buffering);
    assert_eq!(sync.stats().snapshots_stale, 1);
    assert_eq!(sync.buffered_diffs(), 1);
    assert!(sync.book().is_empty(), "the unusable snapshot is discarded");
    assert!(sync.snapshot_request(u64::MAX).is_some());
}

#[test]
fn sequence_break_while_live_emits_gap_resyncs_and_recovers() {
    let mut sync = live_sync();
    feed(
        &mut sync,
        diff(106, 110, 105),
        &levels(&[("99.0", "1")]),
        &[],
    );
    assert_eq!(sync.stats().gaps, 0);

    // pu 115 != previous u 110: updates 111..115 are lost.
    let events = feed(
        &mut sync,
        diff(116, 120, 115),
        &levels(&[("98.0", "1")]),
        &[],
    );
    assert_eq!(events.len(), 1);
    let gap = events[0];
    match gap.body() {
        Body::Gap(gap) => {
            assert_eq!(gap.reason(), GapReason::SequenceBreak);
            assert_eq!(gap.expected_seq, 110);
            assert_eq!(gap.received_seq, 115);
        }
        other => panic!("expected a gap, got {other:?}"),
    }
    assert_eq!(gap.header.venue_seq, 120);
    assert_eq!(gap.header.flags, flags::LAST);
    assert_eq!(gap.header.instrument_id, INSTRUMENT);
    assert_eq!(sync.state(), SyncState::Buffering);
    assert!(sync.book().is_empty(), "the book is invalidated");
    let stats = sync.stats();
    assert_eq!((stats.gaps, stats.resyncs), (1, 1));
    assert_eq!(
        sync.buffered_diffs(),
        1,
        "the diff after the break is buffered"
    );
    assert!(sync.snapshot_request(u64::MAX / 2).is_some());

    // The next diff continues the new chain; a snapshot at 118 then syncs over both.
    assert!(feed(
        &mut sync,
        diff(121, 125, 120),
        &[],
        &levels(&[("100.5", "0")])
    )
    .is_empty());
    let events = snapshot(
        &mut sync,
        118,
        &levels(&[("100.0", "2")]),
        &levels(&[("100.5", "1")]),
        0,
    );
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(
        kinds(&events),
        [
            "SnapshotBegin",
            "BookLevel",
            "BookLevel",
            "SnapshotEnd",
            "Quote",
            "BookLevel",
            "BookLevel",
            "Quote"
        ]
    );
    assert_eq!(sync.book().best_bid(), Some((px("100.0"), px("2"))));
    assert_eq!(sync.book().best_ask(), None);
    assert_eq!(sync.book().get(BookSide::Bid, px("98.0")), Some(px("1")));
    assert_eq!(sync.stats().syncs, 2);
}

#[test]
fn sequence_break_while_buffering_drops_the_diffs_before_it() {
    let mut sync = sync();
    feed(&mut sync, diff(10, 20, 5), &[], &[]);
    feed(&mut sync, diff(21, 30, 20), &[], &[]);
    let events = feed(&mut sync, diff(41, 50, 40), &[], &[]);
    assert_eq!(kinds(&events), ["Gap"]);
    assert_eq!(sync.buffered_diffs(), 1);
    assert_eq!(sync.stats().gaps, 1);
    assert_eq!(sync.stats().resyncs, 0, "nothing was live to restart");
}

#[test]
fn buffer_overflow_empties_the_buffer_and_restarts() {
    let config = SyncConfig {
        max_buffered_diffs: 3,
        max_buffered_levels: 4,
        ..SyncConfig::default()
    };
    let mut sync = sync_with(config);
    let one = levels(&[("99.0", "1")]);
    feed(&mut sync, diff(1, 10, 0), &one, &[]);
    feed(&mut sync, diff(11, 20, 10), &one, &[]);
    feed(&mut sync, diff(21, 30, 20), &one, &[]);
    assert!(sync.snapshot_request(0).is_some());
    assert_eq!(sync.stats().buffer_overflows, 0);
    // A fourth diff does not fit: the buffer starts again from it.
    feed(&mut sync, diff(31, 40, 30), &one, &[]);
    let stats = sync.stats();
    assert_eq!((stats.buffer_overflows, stats.resyncs), (1, 1));
    assert_eq!(sync.buffered_diffs(), 1);
    // The outstanding snapshot, taken at 25, now falls before the buffer: stale, re-requested.
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 25, &bids, &asks, 0);
    assert_eq!(sync.stats().snapshots_stale, 1);
    assert_eq!(sync.state(), SyncState::Buffering);
    // Too many levels for the level buffer also overflows.
    let many = levels(&[("1", "1"), ("2", "1"), ("3", "1"), ("4", "1")]);
    feed(&mut sync, diff(41, 50, 40), &many, &[]);
    assert_eq!(sync.stats().buffer_overflows, 2);
    assert_eq!(sync.buffered_diffs(), 1);
    // ... and one diff larger than the whole buffer leaves it empty.
    let too_many = levels(&[("1", "1"), ("2", "1"), ("3", "1"), ("4", "1"), ("5", "1")]);
    feed(&mut sync, diff(51, 60, 50), &too_many, &[]);
    assert_eq!(sync.stats().buffer_overflows, 3);
    assert_eq!(sync.buffered_diffs(), 0);
    assert_eq!(
        sync.next_snapshot_request_at_ns(),
        None,
        "nothing buffered yet"
    );
    // Recovery from the next diff on.
    feed(&mut sync, diff(61, 70, 60), &one, &[]);
    assert!(sync.snapshot_request(u64::MAX / 2).is_some());
    snapshot(&mut sync, 65, &bids, &asks, 0);
    assert_eq!(sync.state(), SyncState::Live);
}

#[test]
fn snapshot_backoff_grows_caps_and_resets_after_a_sync() {
    let config = SyncConfig {
        backoff_initial_ns: 100 * MS,
        backoff_max_ns: 400 * MS,
        ..SyncConfig::default()
    };
    let mut sync = sync_with(config);
    assert_eq!(
        sync.next_snapshot_request_at_ns(),
        None,
        "no diff buffered yet"
    );
    feed(&mut sync, diff(95, 105, 90), &[], &[]);
    assert_eq!(sync.next_snapshot_request_at_ns(), Some(0));
    let request = sync
        .snapshot_request(0)
        .expect("the first request is immediate");
    assert_eq!(
        request,
        SnapshotRequest {
            instrument_id: INSTRUMENT,
            limit: 1000
        }
    );
    assert_eq!(
        request.path("BTCUSDT"),
        "/fapi/v1/depth?symbol=BTCUSDT&limit=1000"
    );
    // Each failure waits longer before the next request: 100, 200, 400, then capped at 400 ms.
    let mut failed_at_ms = 0;
    for wait_ms in [100, 200, 400, 400] {
        sync.on_snapshot_failed(failed_at_ms * MS);
        let due_ms = failed_at_ms + wait_ms;
        assert_eq!(sync.next_snapshot_request_at_ns(), Some(due_ms * MS));
        assert!(sync.snapshot_request((due_ms - 1) * MS).is_none());
        assert!(sync.snapshot_request(due_ms * MS).is_some());
        failed_at_ms = due_ms;
    }
    let stats = sync.stats();
    assert_eq!((stats.snapshots_requested, stats.snapshots_failed), (5, 4));

    // The last request (at 1,100 ms) succeeds: the backoff resets.
    let (bids, asks) = snapshot_book();
    snapshot(&mut sync, 100, &bids, &asks, 1_150 * MS);
    assert_eq!(sync.state(), SyncState::Live);
    // A break later: the next request waits only the initial 100 ms after the last request.
    feed(&mut sync, diff(200, 210, 199), &[], &[]);
    assert_eq!(sync.state(), SyncState::Buffering);
    assert_eq!(sync.next_snapshot_request_at_ns(), Some(1_200 * MS));
    assert!(sync.snapshot_request(5_000 * MS).is_some());
    sync.on_snapshot_failed(5_000 * MS);
    assert_eq!(sync.next_snapshot_request_at_ns(), Some(5_200 * MS));
}

#[test]
fn removing_an_unknown_level_is_normal() {
    let mut sync = live_sync();
    let events = feed(
        &mut sync,
        diff(106, 110, 105),
        &levels(&[("42.0", "0")]),
        &[],
    );
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(sync.stats().gaps, 0);
    assert_eq!(
        events.len(),
        1,
        "the level is reported, the top did not change"
    );
    assert_eq!(
        events[0].body(),
        Body::BookLevel(BookLevel::new(Side::Bid, px("42.0"), Fixed::ZERO))
    );
    assert_eq!(events[0].header.flags, flags::LAST);
    assert_eq!(sync.book().len(BookSide::Bid), 2);
}

#[test]
fn sync_emits_snapshot_then_quote_with_exact_headers_and_flags() {
    let mut sync = sync();
    feed(&mut sync, diff(95, 105, 90), &[], &[]);
    let (bids, asks) = snapshot_book();
    // Listed in any order, with a zero level to skip.
    let mut shuffled_bids = bids.clone();
    shuffled_bids.reverse();
    shuffled_bids.push((px("98.0"), Fixed::ZERO));
    let events = snapshot(&mut sync, 100, &shuffled_bids, &asks, 77);

    let snapshot_flags = flags::SNAPSHOT | flags::NO_EXCHANGE_TS;
    let counts = Snapshot {
        bid_levels: 2,
        ask_levels: 2,
        snapshot_id: 100,
        _reserved: [0; 2],
    };
    let expected: Vec<(Body, u8, u64)> = vec![
        (Body::SnapshotBegin(counts), snapshot_flags, 100),
        (
            Body::BookLevel(BookLevel::new(Side::Bid, px("100.0"), px("2"))),
            snapshot_flags,
            100,
        ),
        (
            Body::BookLevel(BookLevel::new(Side::Bid, px("99.5"), px("3"))),
            snapshot_flags,
            100,
        ),
        (
            Body::BookLevel(BookLevel::new(Side::Ask, px("100.5"), px("1"))),
            snapshot_flags,
            100,
        ),
        (
            Body::BookLevel(BookLevel::new(Side::Ask, px("101.0"), px("4"))),
            snapshot_flags,
            100,
        ),
        (Body::SnapshotEnd(counts), snapshot_flags, 100),
        (
            Body::Quote(Quote {
                bid_px: px("100.0"),
                bid_sz: px("2"),
                ask_px: px("100.5"),
                ask_sz: px("1"),
            }),
            // Computed from the book, not sent by the venue as a bookTicker.
            flags::NO_EXCHANGE_TS | flags::LAST | flags::DERIVED,
            100,
        ),
        // The buffered diff had no levels and cannot change the top: no events of its own.
    ];
    let actual: Vec<(Body, u8, u64)> = events
        .iter()
        .map(|event| (event.body(), event.header.flags, event.header.venue_seq))
        .collect();
    assert_eq!(actual, expected);
    for event in &events {
        assert_eq!(event.header.instrument_id, INSTRUMENT);
        assert_eq!(event.header.venue_id, VENUE);
        assert_eq!(event.header.recv_ts_ns, 77);
        assert_eq!(event.header.exchange_ts_ns, 0);
    }
}

#[test]
fn diff_events_carry_levels_in_order_and_a_quote_only_when_the_top_changes() {
    let mut sync = live_sync();
    // Below the top on both sides: levels only, LAST on the last one.
    let header = diff(106, 110, 105);
    let events = feed(
        &mut sync,
        header,
        &levels(&[("99.0", "1"), ("99.5", "0")]),
        &levels(&[("102.0", "1")]),
    );
    let actual: Vec<(Body, u8)> = events
        .iter()
        .map(|event| (event.body(), event.header.flags))
        .collect();
    assert_eq!(
        actual,
        [
            (
                Body::BookLevel(BookLevel::new(Side::Bid, px("99.0"), px("1"))),
                0
            ),
            (
                Body::BookLevel(BookLevel::new(Side::Bid, px("99.5"), Fixed::ZERO)),
                0
            ),
            (
                Body::BookLevel(BookLevel::new(Side::Ask, px("102.0"), px("1"))),
                flags::LAST
            ),
        ]
    );
    for event in &events {
        assert_eq!(event.header.venue_seq, 110);
        assert_eq!(event.header.exchange_ts_ns, header.exch_ts_ns);
        assert_eq!(event.header.recv_ts_ns, header.recv_ts_ns);
        assert_eq!(
            (event.header.instrument_id, event.header.venue_id),
            (INSTRUMENT, VENUE)
        );
    }

    // A size change at the best ask: the level, then the new top with LAST.
    let events = feed(
        &mut sync,
        diff(111, 115, 110),
        &[],
        &levels(&[("100.5", "7")]),
    );
    assert_eq!(kinds(&events), ["BookLevel", "Quote"]);
    assert_eq!(events[0].header.flags, 0);
    assert_eq!(events[1].header.flags, flags::LAST | flags::DERIVED);
    assert_eq!(
        events[1].body(),
        Body::Quote(Quote {
            bid_px: px("100.0"),
            bid_sz: px("2"),
            ask_px: px("100.5"),
            ask_sz: px("7"),
        })
    );

    // Setting the best bid to the size it already has changes nothing at the top.
    let events = feed(
        &mut sync,
        diff(116, 120, 115),
        &levels(&[("100.0", "2")]),
        &[],
    );
    assert_eq!(kinds(&events), ["BookLevel"]);
    assert_eq!(events[0].header.flags, flags::LAST);

    // A diff with no exchange time says so.
    let mut header = diff(121, 125, 120);
    header.exch_ts_ns = 0;
    let events = feed(&mut sync, header, &levels(&[("100.2", "1")]), &[]);
    assert_eq!(kinds(&events), ["BookLevel", "Quote"]);
    assert!(events
        .iter()
        .all(|event| event.header.flags & flags::NO_EXCHANGE_TS != 0));
    assert_eq!(sync.stats().diffs_applied, 5);
}

#[test]
fn a_snapshot_while_live_is_ignored() {
    let mut sync = live_sync();
    let events = snapshot(&mut sync, 500, &levels(&[("1", "1")]), &[], 0);
    assert!(events.is_empty());
    assert_eq!(sync.stats().snapshots_ignored, 1);
    assert_eq!(sync.book().best_bid(), Some((px("100.0"), px("2"))));
}

/// One input to the machine, for the no-panic property.
#[derive(Clone, Debug)]
enum Input {
    Diff {
        first: u64,
        last: u64,
        prev: u64,
        bids: Vec<(i64, i64)>,
        asks: Vec<(i64, i64)>,
    },
    Snapshot {
        last_update_id: u64,
        bids: Vec<(i64, i64)>,
        asks: Vec<(i64, i64)>,
    },
    Failed,
    Request,
}

fn input() -> impl Strategy<Value = Input> {
    let id = prop_oneof![0u64..40, Just(u64::MAX), Just(0)];
    let side = || prop::collection::vec((-3i64..30, -2i64..4), 0..6);
    prop_oneof![
        6 => (id.clone(), id.clone(), id.clone(), side(), side()).prop_map(
            |(first, last, prev, bids, asks)| Input::Diff { first, last, prev, bids, asks }
        ),
        2 => (id, side(), side()).prop_map(|(last_update_id, bids, asks)| Input::Snapshot {
            last_update_id,
            bids,
            asks
        }),
        1 => Just(Input::Failed),
        2 => Just(Input::Request),
    ]
}

fn fixed_levels(raw: &[(i64, i64)]) -> Vec<(Fixed, Fixed)> {
    raw.iter().map(|&(p, q)| (Fixed(p), Fixed(q))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No input sequence panics; every call that emits ends on an event flagged LAST; the book
    /// is empty whenever it is not live or holding a snapshot.
    #[test]
    fn no_input_sequence_panics(inputs in prop::collection::vec(input(), 0..60)) {
        let config = SyncConfig {
            max_buffered_diffs: 4,
            max_buffered_levels: 12,
            ..SyncConfig::default()
        };
        let mut sync = sync_with(config);
        for (step, input) in inputs.into_iter().enumerate() {
            let now_ns = step as u64 * 50 * MS;
            let mut events = Vec::new();
            match input {
                Input::Diff { first, last, prev, bids, asks } => {
                    let header = DiffHeader {
                        first_update_id: first,
                        final_update_id: last,
                        prev_final_update_id: prev,
                        exch_ts_ns: now_ns,
                        recv_ts_ns: now_ns,
                    };
                    let (bids, asks) = (fixed_levels(&bids), fixed_levels(&asks));
                    sync.on_diff(header, bids.into_iter(), asks.into_iter(), &mut |event| {
                        events.push(event)
                    });
                }
                Input::Snapshot { last_update_id, bids, asks } => {
                    let (bids, asks) = (fixed_levels(&bids), fixed_levels(&asks));
                    sync.on_snapshot(last_update_id, bids.into_iter(), asks.into_iter(), now_ns,
                        &mut |event| events.push(event));
                }
                Input::Failed => sync.on_snapshot_failed(now_ns),
                Input::Request => {
                    let _ = sync.snapshot_request(now_ns);
                }
            }
            if let Some(last) = events.last() {
                prop_assert!(last.header.flags & flags::LAST != 0);
            }
            if sync.state() == SyncState::Buffering {
                prop_assert!(sync.book().is_empty());
            }
            let stats = sync.stats();
            prop_assert!(stats.resyncs <= stats.gaps + stats.buffer_overflows);
        }
    }
}

/// One `depthUpdate` of the capture.
struct CapturedDiff {
    header: DiffHeader,
    bids: Vec<(Fixed, Fixed)>,
    asks: Vec<(Fixed, Fixed)>,
}

fn load_capture_diffs() -> Option<Vec<CapturedDiff>> {
    let path = common::shared_data("binance-futures/btcusdt_20240808.gz")?;
    let file = std::fs::File::open(&path).expect("open the capture");
    let mut diffs = Vec::new();
    for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let line = line.expect("read the capture");
        let (recv_ns, json) = line.split_once(' ').expect("<recv ns> <json>");
        if !json.contains("\"depthUpdate\"") {
            continue;
        }
        let message: serde_json::Value = serde_json::from_str(json).expect("capture JSON");
        let data = &message["data"];
        let id = |key: &str| data[key].as_u64().expect("update id");
        let side = |key: &str| -> Vec<(Fixed, Fixed)> {
            data[key]
                .as_array()
                .expect("level array")
                .iter()
                .map(|level| {
                    let decimal = |index: usize| {
                        Fixed::parse_str(level[index].as_str().expect("decimal")).expect("fixed")
                    };
                    (decimal(0), decimal(1))
                })
                .collect()
        };
        diffs.push(CapturedDiff {
            header: DiffHeader {
                first_update_id: id("U"),
                final_update_id: id("u"),
                prev_final_update_id: id("pu"),
                exch_ts_ns: id("T") * MS,
                recv_ts_ns: recv_ns.parse().expect("receive time"),
            },
            bids: side("b"),
            asks: side("a"),
        });
    }
    Some(diffs)
}

/// The plain oracle book: `BTreeMap<price, qty>` per side.
#[derive(Default, Clone)]
struct OracleBook {
    bids: BTreeMap<Fixed, Fixed>,
    asks: BTreeMap<Fixed, Fixed>,
}

impl OracleBook {
    fn set(&mut self, side: Side, price: Fixed, qty: Fixed) {
        let levels = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
            Side::None => panic!("a level without a side"),
        };
        if qty == Fixed::ZERO {
            levels.remove(&price);
        } else {
            levels.insert(price, qty);
        }
    }

    fn apply(&mut self, diff: &CapturedDiff) {
        for &(price, qty) in &diff.bids {
            self.set(Side::Bid, price, qty);
        }
        for &(price, qty) in &diff.asks {
            self.set(Side::Ask, price, qty);
        }
    }

    /// Applies what a strategy would: snapshots replace the book, levels update it.
    fn consume(&mut self, event: &Event) {
        match event.body() {
            Body::SnapshotBegin(_) => *self = OracleBook::default(),
            Body::BookLevel(level) => self.set(level.side(), level.price, level.size),
            _ => {}
        }
    }

    fn bids_best_first(&self) -> Vec<(Fixed, Fixed)> {
        self.bids.iter().rev().map(|(&p, &q)| (p, q)).collect()
    }

    fn asks_best_first(&self) -> Vec<(Fixed, Fixed)> {
        self.asks.iter().map(|(&p, &q)| (p, q)).collect()
    }
}

fn feed_captured(sync: &mut BookSync, diff: &CapturedDiff, events: &mut Vec<Event>) {
    sync.on_diff(
        diff.header,
        diff.bids.iter().copied(),
        diff.asks.iter().copied(),
        &mut |event| events.push(event),
    );
}

fn assert_book_equals(sync: &BookSync, oracle: &OracleBook, when: &str) {
    let bids: Vec<_> = sync.book().levels(BookSide::Bid).collect();
    let asks: Vec<_> = sync.book().levels(BookSide::Ask).collect();
    assert!(bids == oracle.bids_best_first(), "bids differ {when}");
    assert!(asks == oracle.asks_best_first(), "asks differ {when}");
}

#[test]
fn capture_syncs_from_a_built_snapshot_stays_uncrossed_and_matches_the_oracle() {
    let Some(diffs) = load_capture_diffs() else {
        return;
    };
    assert_eq!(diffs.len(), 6_551, "depthUpdate messages in the capture");

    // The capture's chain is continuous: every pu is the previous u.
    let breaks: Vec<usize> = (1..diffs.len())
        .filter(|&i| diffs[i].header.prev_final_update_id != diffs[i - 1].header.final_update_id)
        .collect();
    assert!(
        breaks.is_empty(),
        "pu breaks in the capture at diffs {breaks:?}"
    );

    // The stream starts at `start`; the snapshot is the oracle's book after diff `snapshot_at`,
    // and it arrives once `arrives_after` diffs have been buffered, as a REST answer would.
    let (start, snapshot_at, arrives_after) = (990, 1_000, 1_010);
    let last = diffs.len() - 1;
    let mut oracle = OracleBook::default();
    let mut consumer = OracleBook::default();
    let mut sync = BookSync::new(INSTRUMENT, VENUE, SyncConfig::default());
    let mut events = Vec::new();
    let mut snapshot_book = None;
    for (index, diff) in diffs.iter().enumerate().take(last - 1) {
        oracle.apply(diff);
        if index == snapshot_at {
            snapshot_book = Some(oracle.clone());
        }
        if index < start {
            continue;
        }
        feed_captured(&mut sync, diff, &mut events);
        if index == start {
            assert!(sync.snapshot_request(diff.header.recv_ts_ns).is_some());
        }
        if index == arrives_after {
            let book = snapshot_book.take().expect("the snapshot was built");
            sync.on_snapshot(
                diffs[snapshot_at].header.final_update_id,
                book.bids.iter().rev().map(|(&p, &q)| (p, q)),
                book.asks.iter().map(|(&p, &q)| (p, q)),
                diff.header.recv_ts_ns,
                &mut |event| events.push(event),
            );
            assert_eq!(sync.state(), SyncState::Live, "synced at diff {index}");
        }
        if index >= arrives_after {
            assert!(sync.is_live(), "still live at diff {index}");
            assert!(!sync.book().is_crossed(), "crossed after diff {index}");
        }
        for event in events.drain(..) {
            consumer.consume(&event);
        }
    }
    let stats = sync.stats();
    assert_eq!(stats.gaps, 0);
    assert_eq!(stats.syncs, 1);
    assert_eq!(stats.diffs_dropped_stale, (snapshot_at - start) as u64);
    assert_eq!(stats.diffs_applied, (last - 1 - snapshot_at) as u64);
    assert_book_equals(&sync, &oracle, "before the injected gap");
    assert!(
        consumer.bids == oracle.bids && consumer.asks == oracle.asks,
        "a consumer of the events holds the same book"
    );

    // Skip diff `last - 1`: diff `last` breaks the chain.
    oracle.apply(&diffs[last - 1]);
    oracle.apply(&diffs[last]);
    let break_at_ns = diffs[last].header.recv_ts_ns;
    feed_captured(&mut sync, &diffs[last], &mut events);
    assert_eq!(kinds(&events), ["Gap"]);
    assert_eq!(sync.stats().gaps, 1);
    assert_eq!(sync.state(), SyncState::Buffering);
    assert!(sync.snapshot_request(break_at_ns).is_some());
    // A snapshot taken after the last diff brings the book back, equal to the oracle that
    // applied every diff.
    events.clear();
    sync.on_snapshot(
        diffs[last].header.final_update_id,
        oracle.bids.iter().map(|(&p, &q)| (p, q)),
        oracle.asks.iter().map(|(&p, &q)| (p, q)),
        break_at_ns + 50 * MS,
        &mut |event| events.push(event),
    );
    assert!(sync.is_live());
    assert!(!sync.book().is_crossed());
    assert_book_equals(&sync, &oracle, "at the end");
}

#[test]
fn a_disconnect_is_a_reconnect_gap_and_the_next_stream_syncs_afresh() {
    let mut sync = live_sync();
    assert!(sync.is_live());
    let last = sync.book().best_bid().is_some();
    assert!(last, "the live book has levels");
    let mut events = Vec::new();
    sync.on_disconnect(5 * MS, &mut |event| events.push(event));
    assert_eq!(kinds(&events), ["Gap"]);
    match events[0].body() {
        Body::Gap(gap) => assert_eq!(gap.reason(), GapReason::Reconnect),
        other => panic!("{other:?}"),
    }
    assert_eq!(events[0].header.flags & flags::LAST, flags::LAST);
    assert!(!sync.is_live());
    assert!(
        sync.book().best_bid().is_none(),
        "the book is invalid until resynced"
    );
    assert_eq!(sync.stats().resyncs, 1);
    // A second disconnect with nothing received in between says nothing new.
    let mut again = Vec::new();
    sync.on_disconnect(6 * MS, &mut |event| again.push(event));
    assert!(again.is_empty());
    // The new connection's first diff (any pu) is buffered and asks for a snapshot.
    let events = feed(&mut sync, diff(500, 510, 400), &levels(&[("99", "1")]), &[]);
    assert!(events.is_empty(), "no sequence break across a reconnect");
    assert!(
        sync.next_snapshot_request_at_ns().is_some(),
        "a snapshot is wanted"
    );
}
