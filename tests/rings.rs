//! Property tests of both rings against a `VecDeque` oracle, across random interleavings of
//! pushes, batch pushes, pops and batch pops on random capacities; and two-thread stress tests
//! with random batch sizes that check every sequence number arrives once and in order.

use proptest::prelude::*;
use std::collections::VecDeque;
use tickwire::event::{Body, Event, EventHeader, EventKind, Quote};
use tickwire::fixed::Fixed;
use tickwire::ring::{frame_ring, ring, ReserveError};

#[derive(Clone, Debug)]
enum SlotOp {
    Push,
    Write,
    Publish,
    PushSlice(usize),
    Pop,
    PopSlice(usize),
    Drain(usize),
}

fn slot_op() -> impl Strategy<Value = SlotOp> {
    prop_oneof![
        Just(SlotOp::Push),
        Just(SlotOp::Write),
        Just(SlotOp::Publish),
        (0usize..20).prop_map(SlotOp::PushSlice),
        Just(SlotOp::Pop),
        (0usize..20).prop_map(SlotOp::PopSlice),
        (0usize..20).prop_map(SlotOp::Drain),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn slot_ring_matches_vecdeque(capacity_log2 in 0u32..6, ops in prop::collection::vec(slot_op(), 1..400)) {
        let capacity = 1usize << capacity_log2;
        let (mut tx, mut rx) = ring::<u64>(capacity);
        // The oracle holds published items; `written` holds items written but not published.
        let mut published: VecDeque<u64> = VecDeque::new();
        let mut written: Vec<u64> = Vec::new();
        let mut next = 0u64;
        let mut overflows = 0u64;
        for op in ops {
            let in_ring = published.len() + written.len();
            match op {
                SlotOp::Push | SlotOp::Write => {
                    let result = if matches!(op, SlotOp::Push) { tx.try_push(next) } else { tx.try_write(next) };
                    if in_ring < capacity {
                        prop_assert_eq!(result, Ok(()));
                        written.push(next);
                        if matches!(op, SlotOp::Push) {
                            published.extend(written.drain(..));
                        }
                    } else {
                        prop_assert_eq!(result, Err(next));
                        overflows += 1;
                    }
                    next += 1;
                }
                SlotOp::Publish => {
                    tx.publish();
                    published.extend(written.drain(..));
                }
                SlotOp::PushSlice(len) => {
                    let items: Vec<u64> = (next..next + len as u64).collect();
                    let pushed = tx.push_slice(&items);
                    prop_assert_eq!(pushed, len.min(capacity - in_ring));
                    if pushed < len {
                        overflows += 1;
                    }
                    // push_slice publishes everything written so far.
                    published.extend(written.drain(..));
                    published.extend(&items[..pushed]);
                    next += len as u64;
                }
                SlotOp::Pop => prop_assert_eq!(rx.try_pop(), published.pop_front()),
                SlotOp::PopSlice(len) => {
                    let mut out = vec![0u64; len];
                    let popped = rx.pop_slice(&mut out);
                    prop_assert_eq!(popped, len.min(published.len()));
                    let expected: Vec<u64> = published.drain(..popped).collect();
                    prop_assert_eq!(&out[..popped], &expected[..]);
                }
                SlotOp::Drain(max) => {
                    let mut got = Vec::new();
                    rx.drain(max, |item| got.push(item));
                    let expected: Vec<u64> = published.drain(..max.min(published.len())).collect();
                    prop_assert_eq!(got, expected);
                }
            }
            prop_assert_eq!(rx.len(), published.len());
            prop_assert_eq!(tx.unpublished(), written.len());
            prop_assert_eq!(tx.overflows(), overflows);
            prop_assert_eq!(rx.stats().overflows(), overflows);
        }
    }
}

#[derive(Clone, Debug)]
enum FrameOp {
    Push(usize),
    /// Reserve `max`, commit `used` (clamped to `max`), deferred or not.
    Commit {
        max: usize,
        used: usize,
        deferred: bool,
    },
    Abandon(usize),
    Publish,
    Read,
    Drain(usize),
}

fn frame_op() -> impl Strategy<Value = FrameOp> {
    prop_oneof![
        (0usize..300).prop_map(FrameOp::Push),
        (0usize..300, 0usize..300, any::<bool>()).prop_map(|(max, used, deferred)| {
            FrameOp::Commit {
                max,
                used,
                deferred,
            }
        }),
        (0usize..300).prop_map(FrameOp::Abandon),
        Just(FrameOp::Publish),
        Just(FrameOp::Read),
        (0usize..8).prop_map(FrameOp::Drain),
    ]
}

fn pattern(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq.wrapping_mul(131) as usize + i) as u8)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The oracle does not model free space (that depends on padding); it checks that whatever
    /// the ring accepts comes out intact, in order, exactly once, and that a refusal is only
    /// `Full` for frames within the limit and `TooLarge` beyond it, and that an empty ring
    /// always accepts a frame within the limit.
    #[test]
    fn frame_ring_matches_vecdeque(capacity_log2 in 6u32..11, ops in prop::collection::vec(frame_op(), 1..300)) {
        let (mut tx, mut rx) = frame_ring(1 << capacity_log2);
        let limit = tx.max_frame_len();
        let mut published: VecDeque<(u32, Vec<u8>)> = VecDeque::new();
        let mut committed: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut seq = 0u64;
        let (mut full, mut too_large) = (0u64, 0u64);
        for op in ops {
            let ring_empty = published.is_empty() && committed.is_empty();
            match op {
                FrameOp::Push(len) | FrameOp::Commit { max: len, .. } | FrameOp::Abandon(len) => {
                    let (used, deferred, abandon) = match op {
                        FrameOp::Commit { used, deferred, .. } => (used.min(len), deferred, false),
                        FrameOp::Abandon(_) => (0, false, true),
                        _ => (len, false, false),
                    };
                    let bytes = pattern(seq, used);
                    match tx.reserve(len) {
                        Ok(mut grant) => {
                            prop_assert!(len <= limit);
                            grant.buf()[..used].copy_from_slice(&bytes);
                            if abandon {
                                grant.abandon();
                            } else if deferred {
                                grant.commit_deferred(used, seq as u32);
                                committed.push((seq as u32, bytes));
                            } else {
                                grant.commit(used, seq as u32);
                                committed.push((seq as u32, bytes));
                                published.extend(committed.drain(..));
                            }
                        }
                        Err(ReserveError::Full) => {
                            prop_assert!(len <= limit);
                            prop_assert!(!ring_empty, "an empty ring refused {} bytes", len);
                            full += 1;
                        }
                        Err(ReserveError::TooLarge { requested, max }) => {
                            prop_assert!(len > limit);
                            prop_assert_eq!((requested, max), (len, limit));
                            too_large += 1;
                        }
                    }
                    seq += 1;
                }
                FrameOp::Publish => {
                    tx.publish();
                    published.extend(committed.drain(..));
                }
                FrameOp::Read => match rx.read() {
                    Some(frame) => {
                        let (tag, bytes) = published.pop_front().expect("the ring returned a frame the oracle lacks");
                        prop_assert_eq!(frame.tag(), tag);
                        prop_assert_eq!(&*frame, &bytes[..]);
                    }
                    None => prop_assert!(published.is_empty()),
                },
                FrameOp::Drain(max) => {
                    let mut got = Vec::new();
                    rx.drain(max, |tag, bytes| got.push((tag, bytes.to_vec())));
                    let expected: Vec<_> = published.drain(..max.min(published.len())).collect();
                    prop_assert_eq!(got, expected);
                }
            }
            prop_assert_eq!(tx.overflows(), full);
            prop_assert_eq!(tx.oversize(), too_large);
            prop_assert_eq!(rx.stats().overflows(), full);
            prop_assert_eq!(rx.stats().oversize(), too_large);
        }
    }
}

/// A cheap deterministic generator for batch sizes in the stress tests.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn event(seq: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: seq,
            recv_ts_ns: seq,
            venue_seq: seq,
            instrument_id: seq as u32,
            venue_id: 0,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote {
            bid_px: Fixed(seq as i64),
            bid_sz: Fixed(1),
            ask_px: Fixed(seq as i64 + 1),
            ask_sz: Fixed(1),
        }),
    )
}

/// Events through the slot ring between two threads, with random batch sizes on both sides:
/// every sequence number arrives once, in order, with its payload intact.
#[test]
fn events_cross_threads_once_and_in_order() {
    const TOTAL: u64 = 3_000_000;
    let (mut tx, mut rx) = ring::<Event>(1024);
    let producer = std::thread::spawn(move || {
        let mut random = 0x9E37_79B9_7F4A_7C15u64;
        let mut seq = 0u64;
        let mut batch = Vec::with_capacity(64);
        while seq < TOTAL {
            let size = (next_random(&mut random) % 64 + 1).min(TOTAL - seq);
            if size % 2 == 0 {
                batch.clear();
                batch.extend((seq..seq + size).map(event));
                let mut sent = 0;
                while sent < batch.len() {
                    let pushed = tx.push_slice(&batch[sent..]);
                    sent += pushed;
                    if pushed == 0 {
                        std::thread::yield_now();
                    }
                }
            } else {
                for one in seq..seq + size {
                    let mut item = event(one);
                    while let Err(back) = tx.try_write(item) {
                        tx.publish();
                        item = back;
                        std::thread::yield_now();
                    }
                }
                tx.publish();
            }
            seq += size;
        }
    });
    let mut random = 0x1234_5678u64;
    let mut expected = 0u64;
    let mut out = vec![event(0); 64];
    while expected < TOTAL {
        let got = if next_random(&mut random) % 2 == 0 {
            let got = rx.pop_slice(&mut out[..(next_random(&mut random) % 64 + 1) as usize]);
            for item in &out[..got] {
                assert_eq!(*item, event(expected));
                expected += 1;
            }
            got
        } else {
            rx.drain((next_random(&mut random) % 64 + 1) as usize, |item| {
                assert_eq!(item, event(expected));
                expected += 1;
            })
        };
        if got == 0 {
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    assert_eq!(rx.try_pop(), None);
}

/// Frames through the byte ring between two threads, with random lengths, partial commits and
/// deferred publication: every frame arrives once, in order, with its bytes intact.
#[test]
fn frames_cross_threads_once_and_in_order() {
    const TOTAL: u64 = 1_000_000;
    let (mut tx, mut rx) = frame_ring(64 * 1024);
    let producer = std::thread::spawn(move || {
        let mut random = 0xDEAD_BEEF_u64;
        let mut seq = 0u64;
        while seq < TOTAL {
            let max = (next_random(&mut random) % 600) as usize;
            let used = max - (next_random(&mut random) % (max as u64 + 1)) as usize / 4;
            let deferred = next_random(&mut random) % 4 == 0;
            loop {
                match tx.reserve(max) {
                    Ok(mut grant) => {
                        grant.buf()[..used].copy_from_slice(&pattern(seq, used));
                        if deferred {
                            grant.commit_deferred(used, seq as u32);
                        } else {
                            grant.commit(used, seq as u32);
                        }
                        break;
                    }
                    Err(ReserveError::Full) => {
                        tx.publish();
                        std::thread::yield_now();
                    }
                    Err(other) => panic!("unexpected {other:?}"),
                }
            }
            seq += 1;
        }
        tx.publish();
    });
    let mut expected = 0u64;
    let mut lengths = 0xDEAD_BEEF_u64;
    while expected < TOTAL {
        let got = rx.drain(32, |tag, bytes| {
            // Replay the producer's length choices to know what this frame must be.
            let max = (next_random(&mut lengths) % 600) as usize;
            let used = max - (next_random(&mut lengths) % (max as u64 + 1)) as usize / 4;
            let _deferred = next_random(&mut lengths);
            assert_eq!(tag, expected as u32);
            assert_eq!(bytes, &pattern(expected, used)[..]);
            expected += 1;
        });
        if got == 0 {
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    assert!(rx.read().is_none());
}
