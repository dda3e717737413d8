//! The quote board: the latest top of book per instrument, written by the strategy thread and
//! read by the control thread (the demo's screen, the metrics endpoint) without a lock.
//!
//! Each slot is a seqlock made of atomics only: the writer makes the sequence odd, stores the
//! fields, and makes it even again; a reader copies the fields between two reads of an even,
//! unchanged sequence and retries otherwise. The writer never waits, so the strategy thread pays
//! five relaxed stores and two release increments per quote, and a reader can never see a bid
//! from one quote beside an ask from another.

use crate::event::{InstrumentId, Quote};
use crate::fixed::Fixed;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};

/// One instrument's slot, on its own cache line so that writing one symbol never invalidates a
/// reader's copy of another.
#[derive(Default)]
struct Slot {
    sequence: AtomicU64,
    bid_px: AtomicI64,
    bid_sz: AtomicI64,
    ask_px: AtomicI64,
    ask_sz: AtomicI64,
    /// How many quotes the slot has taken.
    updates: AtomicU64,
}

/// What a reader gets from a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BoardEntry {
    pub quote: Quote,
    pub updates: u64,
}

/// The latest quote per instrument id, for ids below the capacity given at construction.
pub struct QuoteBoard {
    slots: Box<[CachePadded<Slot>]>,
}

impl QuoteBoard {
    pub fn new(instruments: usize) -> QuoteBoard {
        QuoteBoard {
            slots: (0..instruments)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Stores `quote` as the latest for `instrument` (ignored when out of range). One writer per
    /// board: the strategy thread.
    #[inline]
    pub fn publish(&self, instrument: InstrumentId, quote: &Quote) {
        let Some(slot) = self.slots.get(instrument as usize) else {
            return;
        };
        let sequence = slot.sequence.load(Ordering::Relaxed);
        slot.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd sequence before the field stores, for a reader that sees any of them.
        fence(Ordering::Release);
        slot.bid_px.store(quote.bid_px.raw(), Ordering::Relaxed);
        slot.bid_sz.store(quote.bid_sz.raw(), Ordering::Relaxed);
        slot.ask_px.store(quote.ask_px.raw(), Ordering::Relaxed);
        slot.ask_sz.store(quote.ask_sz.raw(), Ordering::Relaxed);
        slot.updates.fetch_add(1, Ordering::Relaxed);
        slot.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// The latest quote for `instrument`, or `None` when out of range or never written.
    pub fn read(&self, instrument: InstrumentId) -> Option<BoardEntry> {
        let slot = self.slots.get(instrument as usize)?;
        loop {
            let before = slot.sequence.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let raw = [
                slot.bid_px.load(Ordering::Relaxed),
                slot.bid_sz.load(Ordering::Relaxed),
                slot.ask_px.load(Ordering::Relaxed),
                slot.ask_sz.load(Ordering::Relaxed),
            ];
            let updates = slot.updates.load(Ordering::Relaxed);
            // Orders the field loads before the second sequence load.
            fence(Ordering::Acquire);
            if slot.sequence.load(Ordering::Relaxed) != before {
                continue;
            }
            if updates == 0 {
                return None;
            }
            let fixed = Fixed;
            return Some(BoardEntry {
                quote: Quote {
                    bid_px: fixed(raw[0]),
                    bid_sz: fixed(raw[1]),
                    ask_px: fixed(raw[2]),
                    ask_sz: fixed(raw[3]),
                },
                updates,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn quote(units: i64) -> Quote {
        let fixed = Fixed;
        Quote {
            bid_px: fixed(units),
            bid_sz: fixed(units + 1),
            ask_px: fixed(units + 2),
            ask_sz: fixed(units + 3),
        }
    }

    #[test]
    fn reads_what_was_published() {
        let board = QuoteBoard::new(2);
        assert_eq!(board.read(0), None);
        board.publish(1, &quote(10));
        board.publish(1, &quote(20));
        board.publish(7, &quote(30));
        let entry = board.read(1).unwrap();
        assert_eq!((entry.quote, entry.updates), (quote(20), 2));
        assert_eq!(board.read(0), None);
        assert_eq!(board.read(7), None);
    }

    #[test]
    fn a_reader_never_sees_a_torn_quote() {
        let board = Arc::new(QuoteBoard::new(1));
        let writer = {
            let board = board.clone();
            std::thread::spawn(move || {
                for units in 1..200_000 {
                    board.publish(0, &quote(units * 10));
                }
            })
        };
        let mut reads = 0;
        while !writer.is_finished() || reads == 0 {
            if let Some(entry) = board.read(0) {
                let base = entry.quote.bid_px.raw();
                assert_eq!(entry.quote, quote(base), "torn read");
                reads += 1;
            }
            std::thread::yield_now();
        }
        writer.join().unwrap();
    }
}
