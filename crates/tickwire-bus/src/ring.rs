//! The broadcast ring's protocol: one writer that never waits, any number of readers that each
//! keep their own position and learn exactly how many events they missed when lapped.
//!
//! The writer does not know readers exist. It writes the event at position `p` into slot `p &
//! (capacity - 1)` and publishes a batch by storing the **cursor** (every position below it is
//! complete). Before it overwrites slots, it raises the **claim** (every position below it may be
//! being written), up to 1024 positions at a time (a sixteenth of the ring at most). A reader copies events out, then reads the
//! claim: a copied position `j` whose slot the writer may have started to reuse (`j + capacity <
//! claim`) is thrown away and counted as missed. This is the validate-after-read of LMAX's and
//! Aeron's broadcast buffers, with the claim in the role of their per-record sequence, so a slot
//! is exactly one 64-byte event and needs no sequence word of its own.
//!
//! # Memory ordering
//!
//! Every access to the shared words is atomic (slots are eight `AtomicU64`s), so there is no data
//! race in the language's sense; the argument is about which values a reader may see.
//!
//! - Writer, per claim: `claim.store(c, Relaxed)`, then `fence(Release)`, then the slot stores
//!   (`Relaxed`) of positions below `c`. Per publication: `cursor.store(n, Release)` after the
//!   slot stores of positions below `n`.
//! - Reader: `cursor.load(Acquire)` gives `n`; the slot loads (`Relaxed`) of positions below `n`;
//!   `fence(Acquire)`; `claim.load(Relaxed)` gives `c`.
//!
//! 1. *A reader sees every published event whole, unless it is overwritten.* The cursor's
//!    Release/Acquire pair makes every slot store of a position below `n` happen before the
//!    reader's slot loads, so each load returns that store or a later one.
//! 2. *A later store is always detected.* A later store to the slot of position `j` is made for
//!    position `j + k * capacity` (`k >= 1`), after a claim store of at least `j + capacity + 1`
//!    and a release fence. If any of the reader's loads returns such a store, the writer's
//!    release fence synchronizes with the reader's acquire fence (fence-to-fence synchronization
//!    through the slot word), so the claim store happens before the reader's claim load, which
//!    then returns at least `j + capacity + 1`, and `j` is thrown away. A copy that is kept was
//!    therefore read entirely from the stores of position `j`: never torn, never stale.
//! 3. *The count of missed events is exact.* A reader's position only moves forward, and every
//!    position it moves past was either returned or added to the batch's `missed`.
//!
//! On x86-64 both fences are compiler barriers only: a claim costs one store, a publication one
//! store, an event eight. `ring::tests` runs the protocol under Miri, whose weak-memory emulation
//! returns stale values that a wrong ordering would let through as torn events.

use crate::event::Event;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Words per slot.
const WORDS: usize = 8;

/// The shared words of one ring: its two header words and its slots.
#[derive(Clone, Copy)]
pub(crate) struct RingWords {
    claim: *const AtomicU64,
    cursor: *const AtomicU64,
    /// `capacity * WORDS` words.
    slots: *const AtomicU64,
    capacity: u64,
}

// SAFETY: the pointers name memory that every thread may access through atomics only (see
// `RingWords::new`'s preconditions); nothing in a `RingWords` is thread-bound.
unsafe impl Send for RingWords {}

impl RingWords {
    /// # Safety
    ///
    /// - `claim` and `cursor` point to `AtomicU64`s, and `slots` to `capacity * 8` contiguous
    ///   `AtomicU64`s (64-byte aligned), all valid for as long as any copy of the result is used.
    /// - The memory is only ever accessed atomically (by this protocol, in this process or in
    ///   another one that maps the same file).
    /// - `capacity` is a power of two.
    pub(crate) unsafe fn new(
        claim: *const AtomicU64,
        cursor: *const AtomicU64,
        slots: *const AtomicU64,
        capacity: u64,
    ) -> RingWords {
        debug_assert!(capacity.is_power_of_two());
        RingWords {
            claim,
            cursor,
            slots,
            capacity,
        }
    }

    #[inline]
    fn claim(&self) -> &AtomicU64 {
        // SAFETY: valid for the life of `self` (`RingWords::new`).
        unsafe { &*self.claim }
    }

    #[inline]
    fn cursor(&self) -> &AtomicU64 {
        // SAFETY: valid for the life of `self` (`RingWords::new`).
        unsafe { &*self.cursor }
    }

    /// The words of the slot that holds position `position`.
    #[inline]
    fn slot(&self, position: u64) -> &[AtomicU64; WORDS] {
        let index = (position & (self.capacity - 1)) as usize;
        // SAFETY: `index < capacity`, so the slot's eight words are inside the `capacity * 8`
        // words `RingWords::new` was given, and `[AtomicU64; 8]` has the layout of eight
        // contiguous `AtomicU64`s.
        unsafe { &*(self.slots.add(index * WORDS) as *const [AtomicU64; WORDS]) }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The oldest position whose slot the writer has not claimed for reuse.
    pub(crate) fn oldest_intact(&self) -> u64 {
        self.claim()
            .load(Ordering::Acquire)
            .saturating_sub(self.capacity)
    }

    /// The writer's cursor: events published so far.
    #[inline]
    pub(crate) fn load_cursor(&self) -> u64 {
        self.cursor().load(Ordering::Acquire)
    }
}

/// The writing end. There must be exactly one per ring (the file's lock sees to it for a bus).
pub(crate) struct RingWriter {
    words: RingWords,
    /// The next position to write.
    next: u64,
    /// The claim as last stored: positions below it may be written without another claim.
    claimed: u64,
    /// The cursor as last stored.
    published: u64,
    /// Positions claimed at once: a sixteenth of the ring, at most 1024 (one claim store per
    /// 1024 events at full rate; a reader is judged lapped at most that many events early).
    /// Readers poll the line that holds the claim and the cursor, so every store to it takes the
    /// line back from them: claiming per 1024 events rather than per 64 raised the writer's
    /// full-speed rate with readers from 0.55x to 0.75x of its rate alone
    /// (`bus-latency throughput`, BENCHMARKING.md); a claim on a line of its own did not help.
    claim_ahead: u64,
}

impl RingWriter {
    /// The writer of a ring whose cursor and claim are `start` (0 for a new bus).
    pub(crate) fn new(words: RingWords, start: u64) -> RingWriter {
        RingWriter {
            words,
            next: start,
            claimed: start,
            published: start,
            claim_ahead: (words.capacity() / 16).clamp(1, 1024),
        }
    }

    /// Writes `event` at the next position; readers see it after [`RingWriter::publish`].
    #[inline]
    pub(crate) fn write(&mut self, event: &Event) {
        if self.next == self.claimed {
            self.claim_more();
        }
        let words = event.to_words();
        let slot = self.words.slot(self.next);
        for (word, value) in slot.iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
        self.next += 1;
    }

    #[cold]
    fn claim_more(&mut self) {
        self.claimed = self.next + self.claim_ahead;
        self.words.claim().store(self.claimed, Ordering::Relaxed);
        // Orders the claim before the slot stores that follow (argument 2 in the module doc).
        fence(Ordering::Release);
    }

    /// Makes every event written so far visible to readers: one store.
    #[inline]
    pub(crate) fn publish(&mut self) {
        if self.published != self.next {
            self.published = self.next;
            self.words.cursor().store(self.next, Ordering::Release);
        }
    }

    /// Events written so far, published or not.
    pub(crate) fn written(&self) -> u64 {
        self.next
    }
}

/// What one read returned: `missed` events were lost to the writer before the `count` events
/// copied out, which follow them without a hole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Events the reader was lapped by and will never see.
    pub missed: u64,
    /// Events copied into the caller's buffer.
    pub count: usize,
    /// The partition both counts are of (0 on a bus of one partition).
    pub partition: u32,
}

/// Why a read failed: the memory does not behave as one writer's ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// The cursor is below the reader's position: the file was replaced or damaged.
    CursorWentBack { cursor: u64, position: u64 },
    /// A slot that passed validation holds an event kind no writer writes.
    BadKind { position: u64, kind: u8 },
}

/// One 64-byte slot as copied, before its kind byte is checked.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct RawSlot(pub(crate) [u64; WORDS]);

/// A reading end: its own position, nothing shared with other readers.
pub(crate) struct RingReader {
    words: RingWords,
    /// The next position to read.
    next: u64,
    /// Slots copied by the last read, checked before they become events.
    scratch: Vec<RawSlot>,
}

impl RingReader {
    /// A reader that starts at `position` (the cursor, to read only what comes next; a lower
    /// value to read what the ring still holds).
    pub(crate) fn new(words: RingWords, position: u64, batch: usize) -> RingReader {
        RingReader {
            words,
            next: position,
            scratch: vec![RawSlot([0; WORDS]); batch.max(1)],
        }
    }

    pub(crate) fn position(&self) -> u64 {
        self.next
    }

    /// Moves to `position`, at most the cursor.
    pub(crate) fn seek(&mut self, position: u64) {
        self.next = position.min(self.words.load_cursor());
    }

    /// Events published and not read yet (more than the capacity when lapped).
    #[inline]
    pub(crate) fn lag(&self) -> u64 {
        self.words.load_cursor().saturating_sub(self.next)
    }

    /// Copies up to `out.len()` (and the scratch size) events, oldest first.
    #[inline]
    pub(crate) fn read(&mut self, out: &mut [Event]) -> Result<Batch, RingError> {
        let cursor = self.words.load_cursor();
        if cursor == self.next {
            return Ok(Batch::default());
        }
        if cursor < self.next {
            return Err(RingError::CursorWentBack {
                cursor,
                position: self.next,
            });
        }
        let capacity = self.words.capacity();
        // Positions more than a ring behind the cursor are gone already.
        let start = self.next.max(cursor - capacity.min(cursor));
        let copied = ((cursor - start) as usize)
            .min(out.len())
            .min(self.scratch.len());
        for (offset, raw) in self.scratch[..copied].iter_mut().enumerate() {
            let slot = self.words.slot(start + offset as u64);
            for (value, word) in raw.0.iter_mut().zip(slot.iter()) {
                *value = word.load(Ordering::Relaxed);
            }
        }
        // Orders the slot loads before the claim load (argument 2 in the module doc).
        fence(Ordering::Acquire);
        let claim = self.words.claim().load(Ordering::Relaxed);
        // The oldest position whose slot the writer has not started to reuse.
        let oldest_intact = claim.saturating_sub(capacity);
        let end = start + copied as u64;
        if oldest_intact >= end {
            // Everything copied may be torn: skip to what is intact and report the loss.
            let missed = oldest_intact - self.next;
            self.next = oldest_intact;
            return Ok(Batch {
                missed,
                count: 0,
                partition: 0,
            });
        }
        let first = oldest_intact.max(start);
        let missed = first - self.next;
        let kept = &self.scratch[(first - start) as usize..copied];
        for (index, (raw, event)) in kept.iter().zip(out.iter_mut()).enumerate() {
            *event = Event::from_words(raw.0).ok_or(RingError::BadKind {
                position: first + index as u64,
                kind: Event::kind_byte(&raw.0),
            })?;
        }
        self.next = end;
        Ok(Batch {
            missed,
            count: kept.len(),
            partition: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    //! The protocol under threads, run by `cargo test` and by Miri (`.ci/run`): a writer that
    //! never waits, readers that check every event they keep against its position, and exact
    //! accounting of what they miss.
    use super::*;
    use crate::event::{Body, EventHeader, EventKind, Trade};
    use crate::fixed::Fixed;
    use std::sync::Arc;

    /// Heap memory laid out as a ring's words: claim, cursor, then the slots.
    struct Memory {
        words: Box<[AtomicU64]>,
        capacity: u64,
    }

    impl Memory {
        fn new(capacity: u64) -> Arc<Memory> {
            // Two lines of header words keep the slots 64-byte aligned only if the allocation
            // is; a Vec of `RawSlot`-sized chunks is used instead.
            let words: Vec<AtomicU64> = (0..16 + capacity as usize * WORDS)
                .map(|_| AtomicU64::new(0))
                .collect();
            Arc::new(Memory {
                words: words.into_boxed_slice(),
                capacity,
            })
        }

        fn ring(&self) -> RingWords {
            let base = self.words.as_ptr();
            // SAFETY: the box holds 16 header words plus `capacity * 8` slot words, lives as
            // long as the `Arc` each test thread holds, and is only accessed atomically.
            unsafe { RingWords::new(base, base.add(8), base.add(16), self.capacity) }
        }
    }

    /// An event whose every field derives from `position`, so that a torn copy shows.
    fn event_at(position: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: position,
                recv_ts_ns: !position,
                venue_seq: position.wrapping_mul(3),
                instrument_id: position as u32,
                venue_id: (position >> 32) as u16,
                kind: EventKind::Trade,
                flags: 0,
            },
            Body::Trade(Trade::new(
                Fixed(position as i64),
                Fixed(!position as i64),
                position ^ 0x5555,
                crate::event::Side::Bid,
            )),
        )
    }

    fn check(event: &Event, position: u64) {
        assert_eq!(*event, event_at(position), "event at {position} torn");
    }

    /// Reads until the writer's `total` is accounted for; returns (read, missed).
    fn read_all(words: RingWords, total: u64, batch: usize) -> (u64, u64) {
        let mut reader = RingReader::new(words, 0, batch);
        let mut out = vec![event_at(0); batch];
        let (mut read, mut missed) = (0u64, 0u64);
        while reader.position() < total {
            let before = reader.position();
            let got = reader.read(&mut out).unwrap();
            missed += got.missed;
            let first = before + got.missed;
            for (index, event) in out[..got.count].iter().enumerate() {
                check(event, first + index as u64);
            }
            read += got.count as u64;
            assert_eq!(reader.position(), first + got.count as u64);
            if got.count == 0 && got.missed == 0 {
                std::thread::yield_now();
            }
        }
        (read, missed)
    }

    #[test]
    fn a_reader_that_keeps_up_misses_nothing() {
        let memory = Memory::new(16);
        let mut writer = RingWriter::new(memory.ring(), 0);
        let mut reader = RingReader::new(memory.ring(), 0, 8);
        let mut out = vec![event_at(0); 8];
        for position in 0..40 {
            writer.write(&event_at(position));
            writer.publish();
            let got = reader.read(&mut out).unwrap();
            assert_eq!(
                got,
                Batch {
                    missed: 0,
                    count: 1,
                    partition: 0
                }
            );
            check(&out[0], position);
        }
        assert_eq!(reader.read(&mut out).unwrap(), Batch::default());
    }

    #[test]
    fn a_lapped_reader_is_told_exactly_how_many_it_missed() {
        let memory = Memory::new(16);
        let mut writer = RingWriter::new(memory.ring(), 0);
        let mut reader = RingReader::new(memory.ring(), 0, 64);
        let mut out = vec![event_at(0); 64];
        for position in 0..100 {
            writer.write(&event_at(position));
        }
        writer.publish();
        let got = reader.read(&mut out).unwrap();
        // Claimed ahead by one (16 / 16), so positions 100 - 16 + 1 = 85.. are intact.
        assert_eq!(got.missed + got.count as u64, 100);
        assert!(got.missed >= 84, "{got:?}");
        for (index, event) in out[..got.count].iter().enumerate() {
            check(event, got.missed + index as u64);
        }
        assert_eq!(reader.lag(), 0);
    }

    #[test]
    fn a_cursor_below_the_reader_is_an_error_not_a_read() {
        let memory = Memory::new(16);
        let mut reader = RingReader::new(memory.ring(), 5, 4);
        let mut out = vec![event_at(0); 4];
        assert_eq!(
            reader.read(&mut out),
            Err(RingError::CursorWentBack {
                cursor: 0,
                position: 5
            })
        );
    }

    #[test]
    fn concurrent_readers_never_keep_a_torn_event() {
        // Small under Miri (it is slow), larger natively.
        let (capacity, total) = if cfg!(miri) { (8, 300) } else { (64, 200_000) };
        let memory = Memory::new(capacity);
        let readers: Vec<_> = [1usize, 3, 64]
            .into_iter()
            .map(|batch| {
                let memory = Arc::clone(&memory);
                std::thread::spawn(move || read_all(memory.ring(), total, batch))
            })
            .collect();
        let mut writer = RingWriter::new(memory.ring(), 0);
        for position in 0..total {
            writer.write(&event_at(position));
            if position % 3 == 0 {
                writer.publish();
            }
        }
        writer.publish();
        assert_eq!(writer.written(), total);
        for reader in readers {
            let (read, missed) = reader.join().unwrap();
            assert_eq!(
                read + missed,
                total,
                "every position read or counted missed"
            );
        }
    }
}
