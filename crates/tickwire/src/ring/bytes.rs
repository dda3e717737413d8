//! A bounded SPSC ring of variable-length frames, written and read in place.
//!
//! The producer [`reserve`](FrameProducer::reserve)s up to N bytes, writes into the granted slice
//! (a socket read, a TLS decrypt, a WebSocket unmask) and commits how many it used; the consumer
//! [`read`](FrameConsumer::read)s a borrowed slice and releases it when done. The one copy is the
//! one into the ring.
//!
//! Layout: each frame is an 8-byte header (`len: u32`, `tag: u32`) followed by its bytes, padded
//! to a multiple of 8 so every header is aligned. **Invariant:** a frame never straddles the end of
//! the buffer: when it does not fit before the end, a padding header (`len == PAD`) fills the rest
//! and the frame starts at offset 0. So that such a wrap can always succeed on an empty ring, a
//! frame may take at most half the ring ([`FrameProducer::max_frame_len`]).
//!
//! The `tag` is the producer's to use: the network thread puts the connection index there.

use super::{Counters, RingStats};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const HEADER_BYTES: usize = 8;
/// A header `len` that marks the rest of the buffer up to its end as padding.
const PAD: u32 = u32::MAX;
/// The smallest ring: room for a header and a few bytes of frame.
pub const MIN_CAPACITY_BYTES: usize = 64;

#[inline]
const fn align8(len: usize) -> usize {
    (len + 7) & !7
}

/// Why a reservation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// The consumer has not released enough space; counted as an overflow.
    #[error("frame ring full")]
    Full,
    /// The frame can never fit: it is larger than [`FrameProducer::max_frame_len`]; counted.
    #[error("frame of {requested} bytes exceeds the ring's limit of {max} bytes")]
    TooLarge { requested: usize, max: usize },
}

struct Shared {
    /// Bytes ever released by the consumer; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// Bytes ever published (headers and padding included); written by the producer only.
    tail: CachePadded<AtomicUsize>,
    /// The buffer, from a leaked, zeroed `Box<[u64]>` (8-byte aligned, always initialised),
    /// freed in `Drop`.
    base: *mut u8,
    capacity: usize,
}

// SAFETY: the bytes are handed between the two threads through the cursors' Release/Acquire
// pairs; the struct holds no thread-bound state.
unsafe impl Send for Shared {}
// SAFETY: `&Shared` exposes atomics; the buffer is accessed only by the one producer and the one
// consumer, in disjoint regions, under the protocol described on the handles.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        let words = self.capacity / 8;
        // SAFETY: `base` came from `Box::into_raw` of a `[u64]` of `words` elements in
        // `frame_ring` and is freed only here.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.base.cast::<u64>(),
                words,
            ))
        });
    }
}

impl Shared {
    /// # Safety
    /// - `offset` must be a multiple of 8 below `capacity`.
    /// - The caller must own the 8 bytes at `offset` under the ring protocol.
    #[inline]
    unsafe fn header(&self, offset: usize) -> (u32, u32) {
        // SAFETY: in bounds and 8-aligned (the buffer is u64-aligned), per the preconditions.
        let word = unsafe { self.base.add(offset).cast::<u64>().read() };
        (word as u32, (word >> 32) as u32)
    }

    /// # Safety
    /// Same as [`Shared::header`].
    #[inline]
    unsafe fn write_header(&self, offset: usize, len: u32, tag: u32) {
        // SAFETY: in bounds, aligned and owned by the producer, per the preconditions.
        unsafe {
            self.base
                .add(offset)
                .cast::<u64>()
                .write(u64::from(len) | (u64::from(tag) << 32))
        };
    }
}

/// Creates a frame ring of `capacity_bytes`, rounded up to a power of two of at least
/// [`MIN_CAPACITY_BYTES`]. The buffer is zeroed and every page of it touched now
/// ([`super::prefault`]): a zeroed allocation is not yet memory, and the ring would otherwise
/// fault its pages in on the hot path, one at a time, the first time the producer reaches each.
pub fn frame_ring(capacity_bytes: usize) -> (FrameProducer, FrameConsumer) {
    let capacity = capacity_bytes.max(MIN_CAPACITY_BYTES).next_power_of_two();
    let buffer: Box<[u64]> = vec![0u64; capacity / 8].into_boxed_slice();
    let base = Box::into_raw(buffer).cast::<u8>();
    // SAFETY: `base` is the `capacity`-byte buffer just leaked, zeroed, and seen by no other
    // thread yet; writing zeros keeps it zeroed.
    unsafe { super::prefault(base, capacity) };
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        base,
        capacity,
    });
    let counters = Arc::new(Counters::default());
    (
        FrameProducer {
            shared: shared.clone(),
            counters: counters.clone(),
            tail: 0,
            published_tail: 0,
            cached_head: 0,
            overflows: 0,
            oversize: 0,
            _not_sync: PhantomData,
        },
        FrameConsumer {
            shared,
            counters,
            head: 0,
            released_head: 0,
            cached_tail: 0,
            high_water: 0,
            _not_sync: PhantomData,
        },
    )
}

/// The writing end; exactly one exists.
pub struct FrameProducer {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    /// Bytes committed, including those not yet published.
    tail: usize,
    published_tail: usize,
    /// The consumer's head as last read (only ever behind the real one: safe).
    cached_head: usize,
    overflows: u64,
    oversize: u64,
    _not_sync: PhantomData<Cell<()>>,
}

/// Space granted by [`FrameProducer::reserve`]: write into [`Grant::buf`], then commit.
/// Dropping a grant without committing publishes nothing.
pub struct Grant<'a> {
    producer: &'a mut FrameProducer,
    /// Padding to skip before the frame (the rest of the buffer), 0 when it fits in place.
    pad: usize,
    /// Offset of the frame's header in the buffer.
    offset: usize,
    max_len: usize,
}

impl FrameProducer {
    pub fn capacity_bytes(&self) -> usize {
        self.shared.capacity
    }

    /// The largest frame a reservation can ask for: half the ring less a header (and below the
    /// padding marker, for rings of 8 GiB and more).
    pub fn max_frame_len(&self) -> usize {
        (self.shared.capacity / 2 - HEADER_BYTES).min(PAD as usize - 1)
    }

    /// Reservations refused because the ring was full.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Reservations refused because the frame was larger than [`Self::max_frame_len`].
    pub fn oversize(&self) -> u64 {
        self.oversize
    }

    /// Grants `max_len` writable bytes, or says why not (and counts it). Nothing is visible to
    /// the consumer until the grant is committed.
    #[inline]
    pub fn reserve(&mut self, max_len: usize) -> Result<Grant<'_>, ReserveError> {
        let max = self.max_frame_len();
        if max_len > max {
            self.oversize += 1;
            self.counters
                .oversize
                .store(self.oversize, Ordering::Relaxed);
            return Err(ReserveError::TooLarge {
                requested: max_len,
                max,
            });
        }
        let capacity = self.shared.capacity;
        let needed = HEADER_BYTES + align8(max_len);
        let offset = self.tail & (capacity - 1);
        let to_end = capacity - offset;
        let pad = if needed > to_end { to_end } else { 0 };
        let total = pad + needed;
        if self.tail + total - self.cached_head > capacity {
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            if self.tail + total - self.cached_head > capacity {
                self.overflows += 1;
                self.counters
                    .overflows
                    .store(self.overflows, Ordering::Relaxed);
                return Err(ReserveError::Full);
            }
        }
        Ok(Grant {
            offset: (offset + pad) & (capacity - 1),
            pad,
            max_len,
            producer: self,
        })
    }

    /// Copies `bytes` in as one frame and publishes it. On failure nothing is written.
    pub fn try_push(&mut self, tag: u32, bytes: &[u8]) -> Result<(), ReserveError> {
        let mut grant = self.reserve(bytes.len())?;
        grant.buf().copy_from_slice(bytes);
        grant.commit(bytes.len(), tag);
        Ok(())
    }

    /// Makes every committed frame visible to the consumer with one store.
    #[inline]
    pub fn publish(&mut self) {
        if self.tail != self.published_tail {
            self.shared.tail.store(self.tail, Ordering::Release);
            self.published_tail = self.tail;
        }
    }
}

impl Drop for FrameProducer {
    fn drop(&mut self) {
        self.publish();
    }
}

impl<'a> Grant<'a> {
    /// The granted bytes (as many as were reserved). They hold whatever an earlier frame left.
    #[inline]
    pub fn buf(&mut self) -> &mut [u8] {
        // SAFETY: `reserve` checked that `pad + 8 + align8(max_len)` bytes from the producer's
        // tail are free (released by the consumer, read with Acquire), and that the frame does
        // not cross the end of the buffer, so these `max_len` bytes are in bounds, initialised
        // (the buffer was zeroed) and owned by the producer alone until published.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.producer.shared.base.add(self.offset + HEADER_BYTES),
                self.max_len,
            )
        }
    }

    /// Gives the space back unused; the same as dropping the grant, said explicitly.
    #[inline]
    pub fn abandon(self) {}

    /// Commits the first `len` bytes as a frame with `tag`, without publishing: call
    /// [`FrameProducer::publish`] once after a batch. `len` above the reservation is clamped.
    #[inline]
    pub fn commit_deferred(self, len: usize, tag: u32) {
        self.finish(len, tag);
    }

    /// Commits the first `len` bytes as a frame with `tag` and publishes it.
    #[inline]
    pub fn commit(self, len: usize, tag: u32) {
        self.finish(len, tag).publish();
    }

    #[inline]
    fn finish(self, len: usize, tag: u32) -> &'a mut FrameProducer {
        let len = len.min(self.max_len);
        let producer = self.producer;
        let capacity = producer.shared.capacity;
        if self.pad > 0 {
            // SAFETY: the padding header sits at the old tail, 8-aligned, inside the free space
            // that `reserve` checked.
            unsafe {
                producer
                    .shared
                    .write_header(producer.tail & (capacity - 1), PAD, 0)
            };
        }
        // SAFETY: the frame header sits at `offset`, 8-aligned and free, as checked by `reserve`.
        // `len <= max_frame_len() < PAD`, so the length fits in u32 and is never read as padding.
        unsafe { producer.shared.write_header(self.offset, len as u32, tag) };
        producer.tail += self.pad + HEADER_BYTES + align8(len);
        producer
    }
}

/// The reading end; exactly one exists.
pub struct FrameConsumer {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    /// Bytes consumed locally (may run ahead of what was released).
    head: usize,
    released_head: usize,
    /// The producer's tail as last read.
    cached_tail: usize,
    /// The most bytes found waiting in one drain (mirrored in `Counters::high_water`).
    high_water: u64,
    _not_sync: PhantomData<Cell<()>>,
}

/// A frame borrowed from the ring; released (its space returned) when dropped.
pub struct Frame<'a> {
    consumer: &'a mut FrameConsumer,
    tag: u32,
    /// Offset of the frame's bytes and their length.
    start: usize,
    len: usize,
}

impl FrameConsumer {
    pub fn capacity_bytes(&self) -> usize {
        self.shared.capacity
    }

    /// Reservations the producer has had refused because the ring was full.
    pub fn producer_overflows(&self) -> u64 {
        self.counters.overflows.load(Ordering::Relaxed)
    }

    /// Reservations the producer has had refused as too large.
    pub fn producer_oversize(&self) -> u64 {
        self.counters.oversize.load(Ordering::Relaxed)
    }

    /// A handle on the ring's refusal counters for another thread.
    pub fn stats(&self) -> RingStats {
        RingStats {
            counters: self.counters.clone(),
        }
    }

    /// Whether the producer has been dropped.
    pub fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    /// Published bytes not yet read (headers and padding included).
    pub fn pending_bytes(&mut self) -> usize {
        self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        self.cached_tail - self.head
    }

    /// Finds the next frame after skipping padding: `(tag, start, len)`.
    #[inline]
    fn next_frame(&mut self) -> Option<(u32, usize, usize)> {
        let capacity = self.shared.capacity;
        loop {
            if self.head == self.cached_tail {
                self.cached_tail = self.shared.tail.load(Ordering::Acquire);
                if self.head == self.cached_tail {
                    return None;
                }
            }
            let offset = self.head & (capacity - 1);
            // SAFETY: `head < tail` (published with Release, read with Acquire), so a header the
            // producer wrote sits at this 8-aligned offset and stays untouched until released.
            let (len, tag) = unsafe { self.shared.header(offset) };
            if len == PAD {
                self.head += capacity - offset;
                continue;
            }
            let len = len as usize;
            self.head += HEADER_BYTES + align8(len);
            return Some((tag, offset + HEADER_BYTES, len));
        }
    }

    #[inline]
    fn release(&mut self) {
        if self.head != self.released_head {
            self.shared.head.store(self.head, Ordering::Release);
            self.released_head = self.head;
        }
    }

    /// The oldest frame, if any. Its space returns to the producer when the `Frame` drops.
    #[inline]
    pub fn read(&mut self) -> Option<Frame<'_>> {
        let (tag, start, len) = self.next_frame()?;
        Some(Frame {
            consumer: self,
            tag,
            start,
            len,
        })
    }

    /// Hands up to `max` frames to `on_frame(tag, bytes)` in order and releases their space with
    /// one store. Returns how many were handed over.
    #[inline]
    pub fn drain(&mut self, max: usize, mut on_frame: impl FnMut(u32, &[u8])) -> usize {
        let start = self.head;
        let mut count = 0;
        while count < max {
            let Some((tag, start, len)) = self.next_frame() else {
                break;
            };
            // SAFETY: `next_frame` returned a published frame inside the buffer that the
            // producer cannot reuse until `release` below stores the new head.
            let bytes = unsafe { std::slice::from_raw_parts(self.shared.base.add(start), len) };
            on_frame(tag, bytes);
            count += 1;
        }
        if count > 0 {
            self.counters
                .saw_waiting(&mut self.high_water, (self.cached_tail - start) as u64);
        }
        self.release();
        count
    }
}

impl Frame<'_> {
    /// The producer's tag for this frame.
    pub fn tag(&self) -> u32 {
        self.tag
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the frame is published and lies inside the buffer (see `next_frame`); the
        // producer cannot reuse it while this `Frame` holds the consumer borrowed.
        unsafe { std::slice::from_raw_parts(self.consumer.shared.base.add(self.start), self.len) }
    }
}

impl std::ops::Deref for Frame<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        self.consumer.release();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn high_water_counts_the_bytes_found_waiting() {
        let (mut tx, mut rx) = super::frame_ring(4096);
        let stats = rx.stats();
        for _ in 0..3 {
            tx.try_push(7, &[1u8; 20]).unwrap();
        }
        tx.publish();
        assert_eq!(rx.drain(usize::MAX, |_, _| {}), 3);
        // Each frame: an 8-byte header and 20 bytes padded to 24.
        assert_eq!(stats.high_water(), 3 * 32);
    }

    use super::*;
    use std::collections::VecDeque;

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
    }

    fn frame_bytes(seq: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (seq as usize * 31 + i) as u8).collect()
    }

    #[test]
    fn frames_round_trip_with_tags_and_partial_commits() {
        let (mut tx, mut rx) = frame_ring(256);
        assert_eq!(tx.capacity_bytes(), 256);
        let mut grant = tx.reserve(100).unwrap();
        grant.buf()[..5].copy_from_slice(b"hello");
        grant.commit(5, 7);
        tx.try_push(9, b"").unwrap();
        {
            let frame = rx.read().unwrap();
            assert_eq!(frame.tag(), 7);
            assert_eq!(&*frame, b"hello");
        }
        let frame = rx.read().unwrap();
        assert_eq!((frame.tag(), frame.len()), (9, 0));
        drop(frame);
        assert!(rx.read().is_none());
    }

    #[test]
    fn uncommitted_grant_publishes_nothing() {
        let (mut tx, mut rx) = frame_ring(256);
        let mut grant = tx.reserve(10).unwrap();
        grant.buf().fill(1);
        grant.abandon();
        assert!(rx.read().is_none());
        tx.try_push(1, b"x").unwrap();
        assert_eq!(&*rx.read().unwrap(), b"x");
    }

    #[test]
    fn deferred_commits_wait_for_publish() {
        let (mut tx, mut rx) = frame_ring(256);
        tx.reserve(3).unwrap().commit_deferred(3, 1);
        tx.reserve(3).unwrap().commit_deferred(3, 2);
        assert!(rx.read().is_none());
        tx.publish();
        let mut tags = Vec::new();
        assert_eq!(rx.drain(10, |tag, _| tags.push(tag)), 2);
        assert_eq!(tags, [1, 2]);
    }

    #[test]
    fn full_and_oversize_are_refused_and_counted() {
        let (mut tx, mut rx) = frame_ring(128);
        assert_eq!(tx.max_frame_len(), 56);
        assert_eq!(
            tx.reserve(57).err(),
            Some(ReserveError::TooLarge {
                requested: 57,
                max: 56
            })
        );
        assert_eq!(tx.oversize(), 1);
        assert_eq!(rx.producer_oversize(), 1);
        // 2 x (8 + 56) = 128: full.
        tx.try_push(1, &[1; 56]).unwrap();
        tx.try_push(2, &[2; 56]).unwrap();
        assert_eq!(tx.try_push(3, &[3]), Err(ReserveError::Full));
        assert_eq!(tx.overflows(), 1);
        assert_eq!(rx.producer_overflows(), 1);
        assert_eq!(rx.read().unwrap().tag(), 1);
        tx.try_push(3, &[3]).unwrap();
    }

    #[test]
    fn a_frame_that_does_not_fit_before_the_end_wraps_behind_padding() {
        let (mut tx, mut rx) = frame_ring(128);
        tx.try_push(1, &[1; 40]).unwrap(); // 48 bytes: 0..48
        tx.try_push(2, &[2; 40]).unwrap(); // 48..96
        assert_eq!(&*rx.read().unwrap(), &[1; 40]);
        // 32 bytes remain before the end; a 40-byte frame needs 48: pad 96..128, frame at 0.
        tx.try_push(3, &[3; 40]).unwrap();
        assert_eq!(&*rx.read().unwrap(), &[2; 40]);
        let frame = rx.read().unwrap();
        assert_eq!((frame.tag(), &*frame), (3, &[3u8; 40][..]));
        drop(frame);
        assert!(rx.read().is_none());
        assert_eq!(rx.pending_bytes(), 0);
    }

    #[test]
    fn the_largest_frame_always_fits_in_an_empty_ring() {
        let (mut tx, mut rx) = frame_ring(128);
        for offset_frame in 0..=6usize {
            // Move the cursors to every 8-byte offset, then send a maximal frame.
            if offset_frame > 0 {
                tx.try_push(0, &vec![0; offset_frame * 8 - 8]).unwrap();
                drop(rx.read().unwrap());
            }
            let max = tx.max_frame_len();
            tx.try_push(1, &vec![9; max]).unwrap();
            assert_eq!(rx.read().unwrap().len(), max);
        }
    }

    /// Random reserve/commit/read interleavings against a `VecDeque` oracle, deterministic so
    /// Miri can run it (the proptest version in `tests/rings.rs` explores far more natively).
    #[test]
    fn matches_vecdeque_oracle_deterministic() {
        let rounds = if cfg!(miri) { 300 } else { 20_000 };
        let mut rng = Lcg(7);
        let (mut tx, mut rx) = frame_ring(256);
        let mut oracle: VecDeque<(u32, Vec<u8>)> = VecDeque::new();
        let mut seq = 0u64;
        for _ in 0..rounds {
            match rng.next() % 4 {
                0 | 1 => {
                    let len = (rng.next() % 80) as usize;
                    let bytes = frame_bytes(seq, len);
                    let tag = seq as u32;
                    match tx.try_push(tag, &bytes) {
                        Ok(()) => oracle.push_back((tag, bytes)),
                        Err(ReserveError::Full) => {}
                        Err(other) => panic!("unexpected {other:?}"),
                    }
                    seq += 1;
                }
                2 => match rx.read() {
                    Some(frame) => {
                        let (tag, bytes) = oracle.pop_front().expect("ring had more than oracle");
                        assert_eq!(frame.tag(), tag);
                        assert_eq!(&*frame, &bytes[..]);
                    }
                    None => assert!(oracle.is_empty()),
                },
                _ => {
                    let max = (rng.next() % 4) as usize;
                    let mut got = Vec::new();
                    rx.drain(max, |tag, bytes| got.push((tag, bytes.to_vec())));
                    let expected: Vec<_> =
                        (0..got.len()).filter_map(|_| oracle.pop_front()).collect();
                    assert_eq!(got, expected);
                    assert!(got.len() == max || oracle.is_empty());
                }
            }
        }
    }

    /// Two threads: every frame arrives once, in order, with its bytes intact.
    #[test]
    fn two_threads_deliver_every_frame_intact() {
        let total: u64 = if cfg!(miri) { 500 } else { 300_000 };
        let (mut tx, mut rx) = frame_ring(4096);
        let producer = std::thread::spawn(move || {
            let mut seq = 0u64;
            while seq < total {
                let len = (seq % 200) as usize;
                match tx.reserve(len) {
                    Ok(mut grant) => {
                        let buf = grant.buf();
                        for (i, byte) in buf.iter_mut().enumerate() {
                            *byte = (seq as usize * 31 + i) as u8;
                        }
                        grant.commit(len, seq as u32);
                        seq += 1;
                    }
                    Err(ReserveError::Full) => std::thread::yield_now(),
                    Err(other) => panic!("unexpected {other:?}"),
                }
            }
        });
        let mut expected = 0u64;
        while expected < total {
            let got = rx.drain(16, |tag, bytes| {
                assert_eq!(tag, expected as u32);
                assert_eq!(bytes, &frame_bytes(expected, (expected % 200) as usize)[..]);
                expected += 1;
            });
            if got == 0 {
                std::thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert!(rx.read().is_none());
    }
}
