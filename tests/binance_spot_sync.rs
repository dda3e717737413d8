//! `SpotBookSync`, Binance Spot's book procedure ("How to manage a local order book correctly",
//! `web-socket-streams.md`, binance-spot-api-docs commit a5e0bc3): each rule with hand-made
//! events (the `U`/`u` chain; Spot has no `pu`), and the real capture's depth stream synced from
//! the REST snapshot it holds, against an independent book.

use crate::support::common;

use std::collections::BTreeMap;
use std::io::BufRead;
use tickwire::book::BookSide;
use tickwire::event::{Body, Event, GapReason};
use tickwire::fixed::Fixed;
use tickwire::venue::binance::sync::{SyncConfig, SyncState};
use tickwire::venue::binance_spot::decode::{decode, Message};
use tickwire::venue::binance_spot::sync::{DiffHeader, SnapshotRequest, SpotBookSync};

const MS: u64 = 1_000_000;

fn px(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("test decimal")
}

fn diff(first: u64, last: u64) -> DiffHeader {
    DiffHeader {
        first_update_id: first,
        final_update_id: last,
        exch_ts_ns: last * MS,
        recv_ts_ns: last * MS + MS,
    }
}

fn on_diff(sync: &mut SpotBookSync, header: DiffHeader, bid: (&str, &str)) -> Vec<Event> {
    let mut events = Vec::new();
    let bids = [(px(bid.0), px(bid.1))];
    sync.on_diff(header, bids.iter().copied(), [].into_iter(), &mut |event| {
        events.push(event)
    });
    events
}

fn on_snapshot(sync: &mut SpotBookSync, last_update_id: u64) -> Vec<Event> {
    let mut events = Vec::new();
    let bids = [(px("100"), px("1"))];
    let asks = [(px("101"), px("1"))];
    sync.on_snapshot(
        last_update_id,
        bids.iter().copied(),
        asks.iter().copied(),
        7,
        &mut |event| events.push(event),
    );
    events
}

fn gaps(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|event| match event.body() {
            Body::Gap(gap) if gap.reason() == GapReason::SequenceBreak => {
                Some((gap.expected_seq, gap.received_seq))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_snapshot_is_requested_from_api_v3_depth_once_an_event_is_buffered() {
    let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
    assert_eq!(sync.snapshot_request(0), None);
    on_diff(&mut sync, diff(10, 12), ("100", "2"));
    let request = sync.snapshot_request(0).expect("due at once");
    assert_eq!(
        request,
        SnapshotRequest {
            instrument_id: 1,
            limit: 1000
        }
    );
    assert_eq!(
        request.path("BNBBTC"),
        "/api/v3/depth?symbol=BNBBTC&limit=1000"
    );
    assert_eq!(sync.snapshot_request(0), None, "one outstanding at a time");
}

#[test]
fn events_up_to_last_update_id_are_dropped_and_the_next_one_continues_the_snapshot() {
    let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
    on_diff(&mut sync, diff(10, 12), ("99", "1"));
    on_diff(&mut sync, diff(13, 15), ("98", "1"));
    on_diff(&mut sync, diff(16, 20), ("97", "1"));
    sync.snapshot_request(0);
    // lastUpdateId 15: the first two are dropped (u <= 15), the third has U = 16 = 15 + 1.
    let events = on_snapshot(&mut sync, 15);
    assert_eq!(sync.state(), SyncState::Live);
    assert_eq!(sync.stats().diffs_dropped_stale, 2);
    assert_eq!(sync.stats().diffs_applied, 1);
    assert!(matches!(events[0].body(), Body::SnapshotBegin(_)));
    let bids: Vec<_> = sync.book().levels(BookSide::Bid).collect();
    assert_eq!(bids, [(px("100"), px("1")), (px("97"), px("1"))]);
    // Then the chain: U == previous u + 1 applies.
    let applied = on_diff(&mut sync, diff(21, 22), ("96", "1"));
    assert_eq!(applied.last().map(|event| event.header.venue_seq), Some(22));
    assert_eq!(sync.stats().gaps, 0);
}

#[test]
fn a_snapshot_inside_the_first_event_is_used_and_one_before_it_is_stale() {
    let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
    on_diff(&mut sync, diff(10, 12), ("99", "1"));
    sync.snapshot_request(0);
    // lastUpdateId 8 < U - 1: updates 9 are lost between them (step 4: fetch again).
    on_snapshot(&mut sync, 8);
    assert_eq!(sync.state(), SyncState::Buffering);
    assert_eq!(sync.stats().snapshots_stale, 1);
    assert!(sync.snapshot_request(0).is_none(), "after the backoff");
    assert!(sync.snapshot_request(1_000_000_000).is_some());
    // lastUpdateId 11, inside [10; 12]: live.
    on_snapshot(&mut sync, 11);
    assert_eq!(sync.state(), SyncState::Live);
}

#[test]
fn a_break_in_the_chain_is_one_gap_and_a_resync() {
    let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
    on_diff(&mut sync, diff(10, 12), ("99", "1"));
    sync.snapshot_request(0);
    on_snapshot(&mut sync, 11);
    assert!(sync.is_live());
    // A repeat (u <= the previous u) is ignored: no gap.
    assert!(on_diff(&mut sync, diff(11, 12), ("99", "5")).is_empty());
    assert!(sync.is_live());
    // U = 14 where 13 was due: events were missed.
    let events = on_diff(&mut sync, diff(14, 15), ("98", "1"));
    assert_eq!(gaps(&events), [(13, 14)]);
    assert_eq!(sync.state(), SyncState::Buffering);
    assert_eq!((sync.stats().gaps, sync.stats().resyncs), (1, 1));
    assert_eq!(sync.buffered_diffs(), 1);
    // The overlap after the break: U = 16 follows 15.
    assert!(gaps(&on_diff(&mut sync, diff(16, 16), ("97", "1"))).is_empty());
}

#[test]
fn a_disconnect_is_a_reconnect_gap() {
    let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
    on_diff(&mut sync, diff(10, 12), ("99", "1"));
    let mut events = Vec::new();
    sync.on_disconnect(5, &mut |event| events.push(event));
    assert!(matches!(events[0].body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect));
    assert_eq!(sync.buffered_diffs(), 0);
}

/// A diff's `U`, `u` and levels (bids, asks), waiting for the oracle.
type Pending = (u64, u64, [Vec<(Fixed, Fixed)>; 2]);

/// The update procedure, plainly, over an ordered map per side: every pending diff after `id`
/// applied (none may skip an update: the capture has no gap); returns how many.
fn apply_oracle(
    oracle: &mut [BTreeMap<Fixed, Fixed>; 2],
    id: &mut u64,
    pending: &mut Vec<Pending>,
) -> u64 {
    let mut applied = 0;
    for (first, last, levels) in pending.drain(..) {
        if last <= *id {
            continue;
        }
        assert!(
            first <= *id + 1,
            "the capture has no gap: {first} after {id}"
        );
        for (side, levels) in levels.iter().enumerate() {
            for &(price, qty) in levels {
                if qty == Fixed::ZERO {
                    oracle[side].remove(&price);
                } else {
                    oracle[side].insert(price, qty);
                }
            }
        }
        *id = last;
        applied += 1;
    }
    applied
}

/// The capture's depth stream, synced from the REST snapshot recorded in it: live from that
/// snapshot to the end, no gap (the capture has none), every level equal to an independent book
/// kept by the documented procedure.
#[test]
fn the_capture_syncs_from_its_snapshot_without_a_gap() {
    let Some(path) = common::shared_data("binance-spot/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(path).expect("capture");
    let lines = std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines();
    let mut sync = SpotBookSync::new(0, 0, SyncConfig::default());
    let mut oracle: [BTreeMap<Fixed, Fixed>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut oracle_id: Option<u64> = None;
    let mut events = Vec::new();
    let (mut diffs, mut live_diffs) = (0u64, 0u64);
    let mut pending: Vec<Pending> = Vec::new();
    for line in lines {
        let line = line.expect("readable");
        let (recv, json) = line.split_once(' ').expect("<recv_ns> <json>");
        let recv_ts_ns: u64 = recv.parse().expect("a receive time");
        match decode(json.as_bytes()).expect("decodes") {
            Message::Depth(depth) => {
                diffs += 1;
                let header = DiffHeader {
                    first_update_id: depth.first_update_id,
                    final_update_id: depth.final_update_id,
                    exch_ts_ns: depth.event_time_ms * MS,
                    recv_ts_ns,
                };
                sync.on_diff(header, depth.bids.iter(), depth.asks.iter(), &mut |event| {
                    events.push(event)
                });
                let levels = [depth.bids.iter().collect(), depth.asks.iter().collect()];
                pending.push((depth.first_update_id, depth.final_update_id, levels));
                if let Some(id) = oracle_id.as_mut() {
                    live_diffs += apply_oracle(&mut oracle, id, &mut pending);
                }
            }
            Message::DepthSnapshot(snapshot) => {
                let _ = sync
                    .snapshot_request(recv_ts_ns)
                    .expect("a diff is buffered");
                sync.on_snapshot(
                    snapshot.last_update_id,
                    snapshot.bids.iter(),
                    snapshot.asks.iter(),
                    recv_ts_ns,
                    &mut |event| events.push(event),
                );
                for (side, levels) in [(0, snapshot.bids), (1, snapshot.asks)] {
                    for (price, qty) in levels {
                        oracle[side].insert(price, qty);
                    }
                }
                let mut id = snapshot.last_update_id;
                // The buffered diffs the snapshot does not cover, into the oracle too.
                live_diffs += apply_oracle(&mut oracle, &mut id, &mut pending);
                oracle_id = Some(id);
                assert!(
                    sync.is_live(),
                    "the recorded snapshot overlaps the buffered diffs"
                );
            }
            _ => {}
        }
    }
    let stats = sync.stats();
    assert!(sync.is_live());
    assert_eq!(stats.gaps, 0);
    assert_eq!(stats.resyncs, 0);
    assert_eq!(stats.syncs, 1);
    assert_eq!(diffs, 3451);
    // Every diff after the snapshot applied; the ones before it buffered and replayed or dropped.
    assert_eq!(stats.diffs_applied + stats.diffs_dropped_stale, diffs);
    assert!(live_diffs > 3400, "{live_diffs}");
    assert!(gaps(&events).is_empty());
    assert_eq!(sync.last_update_id(), oracle_id);
    let book_bids: Vec<_> = sync.book().levels(BookSide::Bid).collect();
    let book_asks: Vec<_> = sync.book().levels(BookSide::Ask).collect();
    let oracle_bids: Vec<_> = oracle[0].iter().rev().map(|(p, q)| (*p, *q)).collect();
    let oracle_asks: Vec<_> = oracle[1].iter().map(|(p, q)| (*p, *q)).collect();
    assert_eq!(book_bids, oracle_bids);
    assert_eq!(book_asks, oracle_asks);
    let top = sync.book().top();
    assert!(top.bid_px < top.ask_px, "an uncrossed book");
}

/// One step of a random session: a diff `skip` past the previous `u` (0: a repeat or overlap,
/// 1: the chain, 2 or more: a break) spanning `len` more ids, with one bid level; or a snapshot
/// at `back` ids behind the last `u` received.
#[derive(Clone, Debug)]
enum Step {
    Diff {
        skip: u64,
        len: u64,
        price: u8,
        qty: u8,
    },
    Snapshot {
        back: u64,
    },
    Disconnect,
}

fn units(count: i64) -> Fixed {
    Fixed::from_units(count).expect("a small number")
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        8 => (0u64..4, 0u64..3, 1u8..20, 0u8..3)
            .prop_map(|(skip, len, price, qty)| Step::Diff { skip, len, price, qty }),
        2 => (0u64..6).prop_map(|back| Step::Snapshot { back }),
        1 => Just(Step::Disconnect),
    ]
}

proptest::proptest! {
    /// Any session: no panic; exactly one sequence gap per break of the chain (`U` above the
    /// previous `u` + 1, repeats ignored), counted independently here; a live book's update id
    /// is the last `u` received.
    #[test]
    fn any_session_counts_each_break_once(steps in proptest::collection::vec(step(), 1..60)) {
        let mut sync = SpotBookSync::new(1, 0, SyncConfig::default());
        let mut previous: Option<u64> = None;
        let mut last_u = 100u64;
        let mut expected_gaps = 0u64;
        let mut now = 0u64;
        for step in steps {
            now += 1_000_000_000;
            match step {
                Step::Diff { skip, len, price, qty } => {
                    let first = last_u + skip;
                    let last = first + len;
                    match previous {
                        Some(previous) if last <= previous => {}
                        Some(previous) => {
                            if first > previous + 1 {
                                expected_gaps += 1;
                            }
                            last_u = last;
                        }
                        None => last_u = last,
                    }
                    if previous.is_none_or(|previous| last > previous) {
                        previous = Some(last);
                    }
                    let header = DiffHeader {
                        first_update_id: first,
                        final_update_id: last,
                        exch_ts_ns: now,
                        recv_ts_ns: now,
                    };
                    let bids = [(units(i64::from(price)), units(i64::from(qty)))];
                    sync.on_diff(header, bids.iter().copied(), [].into_iter(), &mut |_| {});
                }
                Step::Snapshot { back } => {
                    let _ = sync.snapshot_request(now);
                    let bids = [(units(5), units(1))];
                    sync.on_snapshot(
                        last_u.saturating_sub(back),
                        bids.iter().copied(),
                        [].into_iter(),
                        now,
                        &mut |_| {},
                    );
                }
                Step::Disconnect => {
                    if previous.take().is_some() {
                        expected_gaps += 1;
                    }
                    sync.on_disconnect(now, &mut |_| {});
                }
            }
            if sync.is_live() {
                proptest::prop_assert_eq!(sync.last_update_id(), previous);
            }
        }
        proptest::prop_assert_eq!(sync.stats().gaps, expected_gaps);
    }
}
