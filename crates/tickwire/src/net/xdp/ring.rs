//! The single-producer single-consumer rings AF_XDP shares with the kernel: a producer and a
//! consumer index (free-running `u32`s, masked into the ring), a flags word, and the entries.
//! The fill ring and the RX ring are what a receiver uses: it produces frame addresses into the
//! fill ring for the kernel to write into, and consumes descriptors of received frames from the
//! RX ring. (The completion ring is needed to bind but stays empty without a TX ring.)
//!
//! Memory order, as the kernel's side (`net/xdp/xsk_queue.h`) expects: read the other side's
//! index with Acquire before touching the entries it published, write entries before publishing
//! one's own index with Release. Each side caches the other's index and rereads it only when the
//! cache says the ring is empty (consumer) or full (producer).
//!
//! The ring logic takes raw pointers into memory it does not own (the kernel's mapping), so it is
//! written against [`RingMemory`], which the tests back with ordinary memory and run under Miri.

use std::sync::atomic::{AtomicU32, Ordering};

/// Where a ring's parts are.
#[derive(Clone, Copy, Debug)]
pub struct RingMemory {
    pub producer: *const AtomicU32,
    pub consumer: *const AtomicU32,
    pub flags: *const AtomicU32,
    /// The first entry.
    pub entries: *mut u8,
    /// Entries in the ring, a power of two.
    pub size: u32,
}

/// The receive descriptor (`struct xdp_desc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// The kernel asks to be woken (`XDP_RING_NEED_WAKEUP`).
pub const NEED_WAKEUP: u32 = 1;

/// The consumer side of a ring of `T` (the RX ring: `Desc`).
pub struct Consumer<T: Copy> {
    memory: RingMemory,
    cached_producer: u32,
    consumer: u32,
    _entries: std::marker::PhantomData<T>,
}

// SAFETY: the ring's memory stays mapped while the socket that owns the ring lives, and only the
// one thread that owns this handle consumes from it.
unsafe impl<T: Copy> Send for Consumer<T> {}

impl<T: Copy> Consumer<T> {
    /// # Safety
    /// `memory` must point at a live ring of `T` entries whose producer is the other side, and
    /// stay valid for the life of the handle.
    pub unsafe fn new(memory: RingMemory) -> Consumer<T> {
        // SAFETY: the caller promised the indices are valid.
        let consumer = unsafe { (*memory.consumer).load(Ordering::Relaxed) };
        // SAFETY: as above.
        let producer = unsafe { (*memory.producer).load(Ordering::Acquire) };
        Consumer {
            memory,
            cached_producer: producer,
            consumer,
            _entries: std::marker::PhantomData,
        }
    }

    /// How many entries are ready, up to `max`; rereads the producer only when the cache has none.
    #[inline]
    pub fn peek(&mut self, max: u32) -> u32 {
        let mut ready = self.cached_producer.wrapping_sub(self.consumer);
        if ready == 0 {
            // SAFETY: the producer index is valid memory for the handle's life.
            self.cached_producer = unsafe { (*self.memory.producer).load(Ordering::Acquire) };
            ready = self.cached_producer.wrapping_sub(self.consumer);
        }
        ready.min(max)
    }

    /// The `i`-th ready entry (`i < peek()`'s answer).
    #[inline]
    pub fn get(&self, i: u32) -> T {
        let index = self.consumer.wrapping_add(i) & (self.memory.size - 1);
        // SAFETY: `index` is within the ring, and the producer published the entry (Acquire in
        // `peek`) before its index, so it is initialised and not being written.
        unsafe {
            std::ptr::read_volatile(
                self.memory
                    .entries
                    .add(index as usize * std::mem::size_of::<T>())
                    .cast::<T>(),
            )
        }
    }

    /// Gives `n` entries back to the producer.
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.consumer = self.consumer.wrapping_add(n);
        // SAFETY: the consumer index is ours to write; Release orders our reads of the entries
        // before the producer may reuse them.
        unsafe { (*self.memory.consumer).store(self.consumer, Ordering::Release) };
    }
}

/// The producer side of a ring of `T` (the fill ring: `u64` frame addresses).
pub struct Producer<T: Copy> {
    memory: RingMemory,
    cached_consumer: u32,
    producer: u32,
    _entries: std::marker::PhantomData<T>,
}

// SAFETY: as for `Consumer`.
unsafe impl<T: Copy> Send for Producer<T> {}

impl<T: Copy> Producer<T> {
    /// # Safety
    /// As for [`Consumer::new`], with this side the producer.
    pub unsafe fn new(memory: RingMemory) -> Producer<T> {
        // SAFETY: the caller promised the indices are valid.
        let producer = unsafe { (*memory.producer).load(Ordering::Relaxed) };
        // SAFETY: as above.
        let consumer = unsafe { (*memory.consumer).load(Ordering::Acquire) };
        Producer {
            memory,
            cached_consumer: consumer.wrapping_add(memory.size),
            producer,
            _entries: std::marker::PhantomData,
        }
    }

    /// Free entries, up to `max`; rereads the consumer only when the cache says too few.
    #[inline]
    pub fn free(&mut self, max: u32) -> u32 {
        let mut free = self.cached_consumer.wrapping_sub(self.producer);
        if free < max {
            // SAFETY: the consumer index is valid memory for the handle's life.
            let consumer = unsafe { (*self.memory.consumer).load(Ordering::Acquire) };
            self.cached_consumer = consumer.wrapping_add(self.memory.size);
            free = self.cached_consumer.wrapping_sub(self.producer);
        }
        free.min(max)
    }

    /// Writes the `i`-th entry of the next batch (`i < free()`'s answer).
    #[inline]
    pub fn put(&mut self, i: u32, value: T) {
        let index = self.producer.wrapping_add(i) & (self.memory.size - 1);
        // SAFETY: `index` is within the ring and the slot is free (the consumer released it).
        unsafe {
            std::ptr::write_volatile(
                self.memory
                    .entries
                    .add(index as usize * std::mem::size_of::<T>())
                    .cast::<T>(),
                value,
            )
        }
    }

    /// Publishes `n` written entries.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        self.producer = self.producer.wrapping_add(n);
        // SAFETY: the producer index is ours; Release publishes the entries written before it.
        unsafe { (*self.memory.producer).store(self.producer, Ordering::Release) };
    }

    /// The kernel asked to be woken up to take entries.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: the flags word is valid memory for the handle's life.
        unsafe { (*self.memory.flags).load(Ordering::Relaxed) & NEED_WAKEUP != 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring in ordinary memory, with the other side played by the test.
    struct Fake {
        indices: Box<[AtomicU32; 3]>,
        entries: Vec<u64>,
    }

    impl Fake {
        fn new(size: u32) -> Fake {
            Fake {
                indices: Box::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]),
                entries: vec![0; size as usize * 2],
            }
        }
        fn memory(&mut self, size: u32) -> RingMemory {
            RingMemory {
                producer: &self.indices[0],
                consumer: &self.indices[1],
                flags: &self.indices[2],
                entries: self.entries.as_mut_ptr().cast(),
                size,
            }
        }
    }

    #[test]
    fn a_producer_fills_until_the_consumer_releases_and_indices_wrap() {
        let mut fake = Fake::new(8);
        // Start near the wrap of u32.
        fake.indices[0].store(u32::MAX - 3, Ordering::Relaxed);
        fake.indices[1].store(u32::MAX - 3, Ordering::Relaxed);
        let memory = fake.memory(8);
        // SAFETY: the fake ring outlives both handles.
        let mut producer = unsafe { Producer::<u64>::new(memory) };
        // SAFETY: as above.
        let mut consumer = unsafe { Consumer::<u64>::new(memory) };
        let mut next = 0u64;
        let mut expected = 0u64;
        for round in 0..50u32 {
            let free = producer.free(5);
            for i in 0..free {
                producer.put(i, next);
                next += 1;
            }
            producer.submit(free);
            let ready = consumer.peek(1 + round % 7);
            for i in 0..ready {
                assert_eq!(consumer.get(i), expected);
                expected += 1;
            }
            consumer.release(ready);
        }
        assert!(expected > 100, "the ring moved {expected} entries");
        // Never more than the ring holds in flight.
        assert!(next - expected <= 8);
    }

    #[test]
    fn descriptors_are_read_whole() {
        let mut fake = Fake::new(4);
        let memory = fake.memory(4);
        // SAFETY: as above; Desc is 16 bytes and the fake's entries hold 4 of them.
        let mut producer = unsafe { Producer::<Desc>::new(memory) };
        // SAFETY: as above.
        let mut consumer = unsafe { Consumer::<Desc>::new(memory) };
        let desc = Desc {
            addr: 0x1234_5678_9abc,
            len: 1514,
            options: 0,
        };
        assert_eq!(producer.free(4), 4);
        producer.put(0, desc);
        producer.submit(1);
        assert_eq!(consumer.peek(16), 1);
        assert_eq!(consumer.get(0), desc);
        assert!(!producer.needs_wakeup());
        fake.indices[2].store(NEED_WAKEUP, Ordering::Relaxed);
        assert!(producer.needs_wakeup());
    }
}
