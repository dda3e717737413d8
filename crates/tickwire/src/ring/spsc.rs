//! A bounded SPSC ring of typed slots with batched publication.
//!
//! [`ring`] returns a [`Producer`] and a [`Consumer`]; each moves to its own thread. Items are
//! written into slots and made visible by one `Release` store of the producer's cursor, either
//! per item ([`Producer::try_push`]) or once for many ([`Producer::try_write`] then
//! [`Producer::publish`], or [`Producer::push_slice`]). The consumer likewise returns slots with
//! one store per batch ([`Consumer::drain`], [`Consumer::pop_slice`]), or lends them in place
//! ([`Consumer::read_chunk`]: borrowed slices, returned by [`ReadChunk::commit_all`]), so that a
//! reader of large items looks at them where the producer wrote them instead of copying them out.

use super::{Counters, RingStats};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{needs_drop, MaybeUninit};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Shared<T> {
    /// Count of items ever consumed; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// Count of items ever published; written by the producer only.
    tail: CachePadded<AtomicUsize>,
    /// `capacity` slots, from a leaked `Box<[MaybeUninit<T>]>` (freed in `Drop`). A raw pointer,
    /// not a reference, so that the producer's writes and the consumer's reads of different slots
    /// never alias a reference to the whole buffer.
    slots: *mut MaybeUninit<T>,
    mask: usize,
}

// SAFETY: the slots are handed from one thread to the other through the cursors' Release/Acquire
// pairs, so a `T` crosses threads exactly as if it were sent: `T: Send` suffices. The shared
// structure itself is only read through atomics and the slot protocol.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; `&Shared` gives access to atomics only, slots are touched by the one producer
// and the one consumer under the protocol documented on `Producer` and `Consumer`.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// # Safety
    /// - `position` must be a cursor value; the slot is `position & mask`, always in bounds.
    /// - The caller must own the slot under the ring protocol (the producer for a free slot, the
    ///   consumer for a published one).
    #[inline]
    unsafe fn slot(&self, position: usize) -> *mut MaybeUninit<T> {
        // SAFETY: masking keeps the index below `capacity`, the length of the allocation.
        unsafe { self.slots.add(position & self.mask) }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        if needs_drop::<T>() {
            for position in head..tail {
                // SAFETY: both handles are gone (we hold the last reference), and the items in
                // `head..tail` were published and never consumed, so each is initialised and
                // dropped exactly once here.
                unsafe { (*self.slot(position)).assume_init_drop() };
            }
        }
        // SAFETY: `slots` came from `Box::into_raw` of a boxed slice of `capacity` elements in
        // `ring`, and is freed only here.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.slots,
                self.capacity(),
            ))
        });
    }
}

/// Creates a ring with `capacity` slots, rounded up to a power of two (at least 1). Every page of
/// the slots is touched now ([`super::prefault`]), so that the resident set is reached here and
/// the producer never takes a page fault on a slot it reaches for the first time.
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let capacity = capacity.max(1).next_power_of_two();
    let slots: Box<[MaybeUninit<T>]> = (0..capacity).map(|_| MaybeUninit::uninit()).collect();
    let slots = Box::into_raw(slots).cast::<MaybeUninit<T>>();
    // SAFETY: `slots` is the allocation of `capacity` slots just leaked, seen by no other thread
    // yet; the slots are uninitialised, so a zero byte in them breaks nothing.
    unsafe { super::prefault(slots.cast::<u8>(), capacity * std::mem::size_of::<T>()) };
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        slots,
        mask: capacity - 1,
    });
    let counters = Arc::new(Counters::default());
    (
        Producer {
            shared: shared.clone(),
            counters: counters.clone(),
            tail: 0,
            published_tail: 0,
            cached_head: 0,
            overflows: 0,
            _not_sync: PhantomData,
        },
        Consumer {
            shared,
            counters,
            head: 0,
            cached_tail: 0,
            high_water: 0,
            _not_sync: PhantomData,
        },
    )
}

/// The writing end. `Send` (when `T` is), not `Sync`, not `Clone`: there is exactly one.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    counters: Arc<Counters>,
    /// Items written, including those not yet published.
    tail: usize,
    /// The value last stored to the shared tail.
    published_tail: usize,
    /// The consumer's head as last read. It only grows, so a stale copy can only make the ring
    /// look fuller than it is: safe, and refreshed when it matters.
    cached_head: usize,
    overflows: u64,
    _not_sync: PhantomData<Cell<()>>,
}

impl<T> Producer<T> {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.shared.capacity()
    }

    /// Free slots, re-reading the consumer's cursor.
    pub fn free_slots(&mut self) -> usize {
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        self.capacity() - (self.tail - self.cached_head)
    }

    /// Pushes refused so far because the ring was full.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Items written but not yet published.
    pub fn unpublished(&self) -> usize {
        self.tail - self.published_tail
    }

    #[inline]
    fn has_room(&mut self, wanted: usize) -> bool {
        let capacity = self.capacity();
        if self.tail - self.cached_head + wanted <= capacity {
            return true;
        }
        self.cached_head = self.shared.head.load(Ordering::Acquire);
        self.tail - self.cached_head + wanted <= capacity
    }

    #[inline]
    fn count_overflow(&mut self) {
        self.overflows += 1;
        // Single writer: a plain store, no read-modify-write.
        self.counters
            .overflows
            .store(self.overflows, Ordering::Relaxed);
    }

    /// Writes `item` without publishing it: the consumer sees it after [`Producer::publish`].
    /// A full ring hands the item back and counts an overflow.
    #[inline]
    pub fn try_write(&mut self, item: T) -> Result<(), T> {
        if !self.has_room(1) {
            self.count_overflow();
            return Err(item);
        }
        // SAFETY: `has_room` saw `tail - head < capacity`, so slot `tail` is not among the
        // published, unconsumed items: the consumer has released it (its Release store of head,
        // read with Acquire, ordered its read before this write) and the producer owns it.
        unsafe { (*self.shared.slot(self.tail)).write(item) };
        self.tail += 1;
        Ok(())
    }

    /// Makes every written item visible to the consumer with one store.
    #[inline]
    pub fn publish(&mut self) {
        if self.tail != self.published_tail {
            self.shared.tail.store(self.tail, Ordering::Release);
            self.published_tail = self.tail;
        }
    }

    /// Writes and publishes one item; a full ring hands it back and counts an overflow.
    #[inline]
    pub fn try_push(&mut self, item: T) -> Result<(), T> {
        self.try_write(item)?;
        self.publish();
        Ok(())
    }

    /// Copies as many of `items` as fit and publishes them, with anything written before, in
    /// one store. Returns how many were pushed; if not all, one overflow is counted.
    pub fn push_slice(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        // Refreshes the cached head only if it shows too little room.
        self.has_room(items.len());
        let count = items.len().min(self.free_now());
        let start = self.tail & self.shared.mask;
        let first = count.min(self.capacity() - start);
        // SAFETY: the `count` slots from `tail` are free (see `try_write`); they are the
        // `first` slots from `start` and the `count - first` slots from 0, both in bounds and
        // not overlapping `items`, which the caller borrows from elsewhere.
        unsafe {
            std::ptr::copy_nonoverlapping(
                items.as_ptr(),
                self.shared.slot(self.tail).cast::<T>(),
                first,
            );
            std::ptr::copy_nonoverlapping(
                items.as_ptr().add(first),
                self.shared.slots.cast::<T>(),
                count - first,
            );
        }
        self.tail += count;
        self.publish();
        if count < items.len() {
            self.count_overflow();
        }
        count
    }

    /// Free slots according to the cached head (no shared read).
    #[inline]
    fn free_now(&self) -> usize {
        self.capacity() - (self.tail - self.cached_head)
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // Written items are never lost by dropping the producer: publish them.
        self.publish();
    }
}

/// The reading end. `Send` (when `T` is), not `Sync`, not `Clone`: there is exactly one.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    counters: Arc<Counters>,
    /// Items consumed.
    head: usize,
    /// The producer's tail as last read. It only grows, so a stale copy can only make the ring
    /// look emptier than it is.
    cached_tail: usize,
    /// The most items found waiting in one drain (mirrored in `Counters::high_water`).
    high_water: u64,
    _not_sync: PhantomData<Cell<()>>,
}

impl<T> Consumer<T> {
    pub fn capacity(&self) -> usize {
        self.shared.capacity()
    }

    /// Published items waiting, re-reading the producer's cursor.
    pub fn len(&mut self) -> usize {
        self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        self.cached_tail - self.head
    }

    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// Pushes the producer has had refused so far.
    pub fn producer_overflows(&self) -> u64 {
        self.counters.overflows.load(Ordering::Relaxed)
    }

    /// A handle on the ring's refusal counters for another thread.
    pub fn stats(&self) -> RingStats {
        RingStats {
            counters: self.counters.clone(),
        }
    }

    /// Whether the producer has been dropped (no more items will come after those published).
    pub fn is_abandoned(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    /// Items known to be published, re-reading the producer's cursor only when the cached copy
    /// shows fewer than `wanted`.
    #[inline]
    fn available(&mut self, wanted: usize) -> usize {
        if self.cached_tail - self.head < wanted {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
        }
        self.cached_tail - self.head
    }

    /// Takes the oldest item, if any, and returns its slot at once.
    #[inline]
    pub fn try_pop(&mut self) -> Option<T> {
        if self.available(1) == 0 {
            return None;
        }
        // SAFETY: `head < tail` as published with Release and read with Acquire, so the slot
        // holds an initialised item that the producer will not touch until head moves past it;
        // it is read (moved out) exactly once, then head moves.
        let item = unsafe { (*self.shared.slot(self.head)).assume_init_read() };
        self.head += 1;
        self.shared.head.store(self.head, Ordering::Release);
        Some(item)
    }

    /// Hands up to `max` items to `on_item` in order and returns their slots with one store.
    /// Returns how many were handed over.
    #[inline]
    pub fn drain(&mut self, max: usize, mut on_item: impl FnMut(T)) -> usize {
        let waiting = self.available(max);
        let count = waiting.min(max);
        if count == 0 {
            return 0;
        }
        self.counters
            .saw_waiting(&mut self.high_water, waiting as u64);
        // Publishes the head on the way out, also if `on_item` panics, so that no item is read
        // twice (or dropped again by `Shared::drop`).
        struct Release<'a, T> {
            consumer: &'a mut Consumer<T>,
        }
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                let consumer = &mut *self.consumer;
                consumer.shared.head.store(consumer.head, Ordering::Release);
            }
        }
        let guard = Release { consumer: self };
        for _ in 0..count {
            let consumer = &mut *guard.consumer;
            // SAFETY: as in `try_pop`: the `count` slots from head are published and unread.
            let item = unsafe { (*consumer.shared.slot(consumer.head)).assume_init_read() };
            consumer.head += 1;
            on_item(item);
        }
        drop(guard);
        count
    }

    /// Lends up to `max` published items in place, oldest first, as a [`ReadChunk`]: their
    /// slots stay the consumer's, so the producer cannot reuse them, until the chunk is
    /// committed. Unlike rtrb's `read_chunk`, which fails when fewer than `max` items wait, this
    /// takes what there is (possibly nothing), as [`Consumer::drain`] does.
    #[inline]
    pub fn read_chunk(&mut self, max: usize) -> ReadChunk<'_, T> {
        let waiting = self.available(max);
        let len = waiting.min(max);
        if len > 0 {
            self.counters
                .saw_waiting(&mut self.high_water, waiting as u64);
        }
        ReadChunk {
            consumer: self,
            len,
        }
    }

    /// Copies up to `out.len()` items into `out` and returns their slots with one store.
    pub fn pop_slice(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let count = self.available(out.len()).min(out.len());
        if count == 0 {
            return 0;
        }
        let start = self.head & self.shared.mask;
        let first = count.min(self.capacity() - start);
        // SAFETY: the `count` slots from head are published and initialised (see `try_pop`);
        // they are the `first` from `start` and the rest from 0, in bounds; `T: Copy`, so
        // copying leaves nothing to drop.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.shared.slot(self.head).cast::<T>(),
                out.as_mut_ptr(),
                first,
            );
            std::ptr::copy_nonoverlapping(
                self.shared.slots.cast::<T>(),
                out.as_mut_ptr().add(first),
                count - first,
            );
        }
        self.head += count;
        self.shared.head.store(self.head, Ordering::Release);
        count
    }
}

/// Published items lent in place by [`Consumer::read_chunk`], in rtrb's shape: read them through
/// [`ReadChunk::as_slices`] (two slices when the chunk wraps around the ring's end), then return
/// their slots with [`ReadChunk::commit`] or [`ReadChunk::commit_all`], one store. Dropped without
/// a commit, the chunk consumes nothing: the items are lent again by the next read.
///
/// **Invariant:** while the chunk lives, it holds the consumer's `&mut`, so the consumer's head
/// stays where it was and the producer, which writes only below `head + capacity`, never touches
/// the lent slots.
pub struct ReadChunk<'a, T> {
    consumer: &'a mut Consumer<T>,
    /// Items lent, from the consumer's head; at most what was published when the chunk was made.
    len: usize,
}

impl<T> ReadChunk<'_, T> {
    /// Items in the chunk.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The lent items in order: the run up to the ring's end, then the rest from its start
    /// (empty unless the chunk wraps).
    #[inline]
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let shared = &self.consumer.shared;
        let start = self.consumer.head & shared.mask;
        let first = self.len.min(shared.capacity() - start);
        // SAFETY: the `len` slots from head are published (read with Acquire in `available`)
        // and initialised, and stay unwritten while `self` holds the consumer (see the type's
        // invariant); they are the `first` slots from `start` and the `len - first` from 0, both
        // in bounds. `MaybeUninit<T>` has `T`'s layout, so the initialised slots read as `T`s, and
        // the returned slices borrow `self`, so they end before a commit frees the slots.
        unsafe {
            (
                std::slice::from_raw_parts(shared.slot(self.consumer.head).cast::<T>(), first),
                std::slice::from_raw_parts(shared.slots.cast::<T>(), self.len - first),
            )
        }
    }

    /// Consumes the oldest `count` items of the chunk (all of them if `count` is larger),
    /// dropping them in place, and returns their slots to the producer with one store.
    #[inline]
    pub fn commit(self, count: usize) {
        let count = count.min(self.len);
        if count == 0 {
            return;
        }
        // Publishes the new head on the way out, also if an item's `drop` panics: the items not
        // yet dropped then leak, which is sound, where publishing nothing would have
        // `Shared::drop` drop the dropped ones again.
        struct Release<'a, T> {
            consumer: &'a mut Consumer<T>,
        }
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                let consumer = &mut *self.consumer;
                consumer.shared.head.store(consumer.head, Ordering::Release);
            }
        }
        let first = self.consumer.head;
        self.consumer.head += count;
        let guard = Release {
            consumer: self.consumer,
        };
        if needs_drop::<T>() {
            for position in first..first + count {
                // SAFETY: the slot is among the chunk's published, initialised items; no slice
                // of it is alive (`as_slices` borrows the chunk, which this call consumed); the
                // producer cannot write it before the guard publishes the head, after this loop;
                // and the head has already moved past it, so it is dropped exactly once.
                unsafe { (*guard.consumer.shared.slot(position)).assume_init_drop() };
            }
        }
        drop(guard);
    }

    /// Consumes every item of the chunk: [`ReadChunk::commit`] of its length.
    #[inline]
    pub fn commit_all(self) {
        let len = self.len;
        self.commit(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A tiny deterministic generator, so interleavings are reproducible (and Miri-friendly).
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

    #[test]
    fn full_ring_returns_the_item_and_counts() {
        let (mut tx, mut rx) = ring::<u32>(4);
        assert_eq!(tx.capacity(), 4);
        for i in 0..4 {
            assert_eq!(tx.try_push(i), Ok(()));
        }
        assert_eq!(tx.try_push(99), Err(99));
        assert_eq!(tx.overflows(), 1);
        assert_eq!(rx.producer_overflows(), 1);
        assert_eq!(rx.try_pop(), Some(0));
        assert_eq!(tx.try_push(4), Ok(()));
        let mut seen = Vec::new();
        rx.drain(usize::MAX, |item| seen.push(item));
        assert_eq!(seen, [1, 2, 3, 4]);
        assert_eq!(rx.try_pop(), None);
    }

    #[test]
    fn capacity_rounds_up_to_a_power_of_two() {
        assert_eq!(ring::<u8>(0).0.capacity(), 1);
        assert_eq!(ring::<u8>(5).0.capacity(), 8);
        assert_eq!(ring::<u8>(1024).0.capacity(), 1024);
    }

    #[test]
    fn unpublished_items_stay_invisible_until_publish() {
        let (mut tx, mut rx) = ring::<u64>(8);
        tx.try_write(1).unwrap();
        tx.try_write(2).unwrap();
        assert_eq!(tx.unpublished(), 2);
        assert_eq!(rx.try_pop(), None);
        tx.publish();
        assert_eq!(rx.try_pop(), Some(1));
        assert_eq!(rx.try_pop(), Some(2));
    }

    #[test]
    fn dropping_the_producer_publishes_what_it_wrote() {
        let (mut tx, mut rx) = ring::<u64>(8);
        tx.try_write(7).unwrap();
        drop(tx);
        assert!(rx.is_abandoned());
        assert_eq!(rx.try_pop(), Some(7));
    }

    #[test]
    fn slices_wrap_around_the_end() {
        let (mut tx, mut rx) = ring::<u32>(8);
        let mut out = [0u32; 8];
        assert_eq!(tx.push_slice(&[0, 1, 2, 3, 4, 5]), 6);
        assert_eq!(rx.pop_slice(&mut out[..5]), 5);
        assert_eq!(&out[..5], &[0, 1, 2, 3, 4]);
        // Positions 6..14: wraps after slot 7.
        assert_eq!(tx.push_slice(&[6, 7, 8, 9, 10, 11, 12, 13, 14]), 7);
        assert_eq!(tx.overflows(), 1);
        assert_eq!(rx.pop_slice(&mut out), 8);
        assert_eq!(out, [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(tx.push_slice(&[]), 0);
        assert_eq!(tx.overflows(), 1);
    }

    #[test]
    fn items_left_in_the_ring_are_dropped_once() {
        let marker = Arc::new(());
        {
            let (mut tx, mut rx) = ring::<Arc<()>>(4);
            for _ in 0..3 {
                tx.try_push(marker.clone()).unwrap();
            }
            drop(rx.try_pop());
            assert_eq!(Arc::strong_count(&marker), 3);
        }
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn high_water_is_the_most_found_waiting() {
        let (mut tx, mut rx) = ring::<u32>(16);
        let stats = rx.stats();
        for i in 0..10 {
            tx.try_push(i).unwrap();
        }
        assert_eq!(rx.drain(4, |_| {}), 4);
        assert_eq!(stats.high_water(), 10);
        rx.drain(usize::MAX, |_| {});
        tx.try_push(1).unwrap();
        rx.drain(usize::MAX, |_| {});
        assert_eq!(stats.high_water(), 10, "a lower level does not lower it");
    }

    #[test]
    fn drain_releases_read_items_when_the_callback_panics() {
        let marker = Arc::new(());
        let (mut tx, mut rx) = ring::<Arc<()>>(8);
        for _ in 0..4 {
            tx.try_push(marker.clone()).unwrap();
        }
        let mut calls = 0;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rx.drain(4, |_item| {
                calls += 1;
                if calls == 2 {
                    panic!("strategy bug");
                }
            })
        }));
        assert!(result.is_err());
        // Two items were moved out and dropped by the callback; two remain, readable once.
        assert_eq!(rx.len(), 2);
        drop(rx);
        drop(tx);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn read_chunk_lends_in_place_and_wraps_into_two_slices() {
        let (mut tx, mut rx) = ring::<u32>(8);
        let stats = rx.stats();
        assert!(rx.read_chunk(4).is_empty(), "nothing published yet");
        assert_eq!(tx.push_slice(&[0, 1, 2, 3, 4, 5]), 6);
        let chunk = rx.read_chunk(4);
        assert_eq!(chunk.len(), 4);
        assert_eq!(chunk.as_slices(), (&[0, 1, 2, 3][..], &[][..]));
        assert_eq!(stats.high_water(), 6);
        chunk.commit(3);
        assert_eq!(tx.free_slots(), 5, "three slots came back with the commit");
        // Positions 6..11 wrap after slot 7.
        assert_eq!(tx.push_slice(&[6, 7, 8, 9, 10]), 5);
        let chunk = rx.read_chunk(usize::MAX);
        assert_eq!(chunk.len(), 8);
        assert_eq!(
            chunk.as_slices(),
            (&[3, 4, 5, 6, 7][..], &[8, 9, 10][..]),
            "the run to the ring's end, then the rest from its start"
        );
        chunk.commit_all();
        assert!(rx.is_empty());
        assert_eq!(tx.free_slots(), 8);
    }

    #[test]
    fn a_chunk_dropped_without_commit_consumes_nothing() {
        let (mut tx, mut rx) = ring::<u64>(4);
        for i in 0..4 {
            tx.try_push(i).unwrap();
        }
        let first_address = {
            let chunk = rx.read_chunk(2);
            assert_eq!(chunk.as_slices().0, &[0, 1]);
            chunk.as_slices().0.as_ptr()
        };
        assert_eq!(tx.try_push(4), Err(4), "the lent slots were not returned");
        let chunk = rx.read_chunk(4);
        assert_eq!(
            chunk.as_slices().0.as_ptr(),
            first_address,
            "lent again from the same slots: read in place, not copied"
        );
        assert_eq!(chunk.as_slices(), (&[0, 1, 2, 3][..], &[][..]));
        chunk.commit(usize::MAX);
        assert_eq!(rx.try_pop(), None);
    }

    #[test]
    fn committed_items_are_dropped_once_and_uncommitted_ones_at_the_end() {
        let marker = Arc::new(());
        {
            let (mut tx, mut rx) = ring::<Arc<()>>(4);
            for _ in 0..4 {
                tx.try_push(marker.clone()).unwrap();
            }
            let chunk = rx.read_chunk(3);
            assert!(chunk
                .as_slices()
                .0
                .iter()
                .all(|item| Arc::ptr_eq(item, &marker)));
            chunk.commit(2);
            assert_eq!(Arc::strong_count(&marker), 3, "two dropped by the commit");
            rx.read_chunk(4).commit(0);
            assert_eq!(Arc::strong_count(&marker), 3, "a commit of none drops none");
            assert_eq!(rx.len(), 2);
        }
        assert_eq!(
            Arc::strong_count(&marker),
            1,
            "the ring dropped the other two"
        );
    }

    /// A panicking `drop` in a commit leaks the items after it and never drops one twice.
    #[test]
    fn a_commit_whose_drop_panics_publishes_the_head() {
        // A static count, so that the leaked item owns no heap memory for Miri to report.
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        /// Counts its drops; panics in `drop` when told to.
        struct Bomb {
            explode: bool,
        }
        impl Drop for Bomb {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::Relaxed);
                if self.explode {
                    panic!("drop bug");
                }
            }
        }
        let (mut tx, mut rx) = ring::<Bomb>(4);
        for explode in [false, true, false, false] {
            assert!(tx.try_push(Bomb { explode }).is_ok());
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rx.read_chunk(3).commit_all();
        }));
        assert!(result.is_err());
        assert_eq!(
            DROPS.load(Ordering::Relaxed),
            2,
            "the first, then the panicking one"
        );
        assert_eq!(rx.len(), 1, "the head moved past the whole commit");
        drop(rx);
        drop(tx);
        assert_eq!(
            DROPS.load(Ordering::Relaxed),
            3,
            "the ring dropped the fourth only: the third leaked, none was dropped twice"
        );
    }

    /// Random pushes and chunked reads against a `VecDeque` oracle (deterministic for Miri).
    #[test]
    fn read_chunk_matches_vecdeque_oracle_deterministic() {
        let rounds = if cfg!(miri) { 300 } else { 20_000 };
        let mut rng = Lcg(7);
        let (mut tx, mut rx) = ring::<u64>(8);
        let mut oracle = VecDeque::new();
        let mut next = 0u64;
        for _ in 0..rounds {
            if rng.next() % 2 == 0 {
                let batch: Vec<u64> = (next..next + rng.next() % 6).collect();
                let pushed = tx.push_slice(&batch);
                assert_eq!(pushed, batch.len().min(8 - oracle.len()));
                oracle.extend(&batch[..pushed]);
                next += batch.len() as u64;
            } else {
                let max = (rng.next() % 10) as usize;
                let chunk = rx.read_chunk(max);
                assert_eq!(chunk.len(), max.min(oracle.len()));
                let (first, second) = chunk.as_slices();
                let lent: Vec<u64> = first.iter().chain(second).copied().collect();
                let expected: Vec<u64> = oracle.iter().take(chunk.len()).copied().collect();
                assert_eq!(lent, expected);
                let count = (rng.next() % 10) as usize;
                let consumed = count.min(chunk.len());
                chunk.commit(count);
                oracle.drain(..consumed);
            }
            assert_eq!(rx.len(), oracle.len());
        }
    }

    /// Two threads, the consumer reading in place: every item once and in order.
    #[test]
    fn two_threads_deliver_every_item_in_order_through_chunks() {
        let total: u64 = if cfg!(miri) { 2_000 } else { 2_000_000 };
        let (mut tx, mut rx) = ring::<u64>(64);
        let producer = std::thread::spawn(move || {
            let mut next = 0;
            while next < total {
                match tx.try_push(next) {
                    Ok(()) => next += 1,
                    Err(_) => std::thread::yield_now(),
                }
            }
        });
        let mut expected = 0;
        while expected < total {
            let chunk = rx.read_chunk(32);
            if chunk.is_empty() {
                std::thread::yield_now();
                continue;
            }
            let (first, second) = chunk.as_slices();
            for &item in first.iter().chain(second) {
                assert_eq!(item, expected);
                expected += 1;
            }
            chunk.commit_all();
        }
        producer.join().unwrap();
        assert_eq!(rx.try_pop(), None);
    }

    /// Random push/pop interleavings against a `VecDeque` oracle, deterministic so Miri can run
    /// it (the proptest version in `tests/rings.rs` covers far more cases natively).
    #[test]
    fn matches_vecdeque_oracle_deterministic() {
        let rounds = if cfg!(miri) { 300 } else { 20_000 };
        let mut rng = Lcg(42);
        let (mut tx, mut rx) = ring::<u64>(8);
        let mut oracle = VecDeque::new();
        let mut next = 0u64;
        for _ in 0..rounds {
            match rng.next() % 6 {
                0 | 1 => {
                    let pushed = tx.try_push(next);
                    if oracle.len() < 8 {
                        assert_eq!(pushed, Ok(()));
                        oracle.push_back(next);
                    } else {
                        assert_eq!(pushed, Err(next));
                    }
                    next += 1;
                }
                2 => {
                    let batch: Vec<u64> = (next..next + rng.next() % 5).collect();
                    let pushed = tx.push_slice(&batch);
                    assert_eq!(pushed, batch.len().min(8 - oracle.len()));
                    oracle.extend(&batch[..pushed]);
                    next += batch.len() as u64;
                }
                3 => assert_eq!(rx.try_pop(), oracle.pop_front()),
                4 => {
                    let mut out = [0u64; 3];
                    let popped = rx.pop_slice(&mut out);
                    let expected: Vec<u64> =
                        (0..popped).filter_map(|_| oracle.pop_front()).collect();
                    assert_eq!(&out[..popped], &expected[..]);
                    assert!(popped == 3 || oracle.is_empty());
                }
                _ => {
                    let max = (rng.next() % 4) as usize;
                    let mut got = Vec::new();
                    rx.drain(max, |item| got.push(item));
                    let expected: Vec<u64> =
                        (0..got.len()).filter_map(|_| oracle.pop_front()).collect();
                    assert_eq!(got, expected);
                    assert!(got.len() == max || oracle.is_empty());
                }
            }
            assert_eq!(rx.len(), oracle.len());
        }
    }

    /// Two threads: every sequence number arrives once and in order. Small enough for Miri.
    #[test]
    fn two_threads_deliver_every_item_in_order() {
        let total: u64 = if cfg!(miri) { 2_000 } else { 2_000_000 };
        let (mut tx, mut rx) = ring::<u64>(64);
        let producer = std::thread::spawn(move || {
            let mut next = 0;
            while next < total {
                match tx.try_push(next) {
                    Ok(()) => next += 1,
                    Err(_) => std::thread::yield_now(),
                }
            }
            tx.overflows()
        });
        let mut expected = 0;
        while expected < total {
            let got = rx.drain(32, |item| {
                assert_eq!(item, expected);
                expected += 1;
            });
            if got == 0 {
                std::thread::yield_now();
            }
        }
        let overflows = producer.join().unwrap();
        assert_eq!(rx.try_pop(), None);
        assert_eq!(rx.producer_overflows(), overflows);
    }
}
