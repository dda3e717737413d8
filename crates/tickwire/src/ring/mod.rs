//! Lock-free single-producer/single-consumer rings between the pinned threads.
//!
//! - [`spsc`]: fixed slots for typed items (the 64-byte [`crate::event::Event`] between decoder and
//!   strategy, and histograms handed to the control thread).
//! - [`bytes`]: variable-length frames written in place (WebSocket payloads between the network
//!   thread and a decoder): reserve, write, commit; read a borrowed slice, release.
//!
//! **Invariant:** a ring's producer never blocks and never waits for its consumer: when a ring is
//! full the item comes back to the caller (or the reservation fails) and the ring's overflow
//! counter goes up, so a slow consumer can never stall the network thread.
//!
//! **Invariant:** every cursor sits on its own cache line and is written by one side only; each
//! side keeps a private copy of the other side's cursor and re-reads the shared one only when the
//! copy says the ring is full (producer) or empty (consumer). In steady state that means one
//! cache-line transfer per batch instead of one per item (the technique of rtrb and Erik
//! Rigtorp's SPSCQueue).
//!
//! Both rings count positions with free-running `usize` cursors and mask them into the buffer,
//! so full and empty are told apart without wasting a slot.

pub mod bytes;
pub mod spsc;

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A ring's refusal counters, written by its producer only (rarely: only when it refuses).
/// Kept apart from the ring so a control thread can watch them without holding the ring.
#[derive(Default)]
struct Counters {
    overflows: CachePadded<AtomicU64>,
    oversize: AtomicU64,
    /// The most the consumer found waiting in one drain (slots, or bytes for a frame ring);
    /// written by the consumer only, on its own cache line.
    high_water: CachePadded<AtomicU64>,
}

/// A read-only view of a ring's refusal counters, for the control thread.
#[derive(Clone)]
pub struct RingStats {
    counters: Arc<Counters>,
}

impl RingStats {
    /// Items or reservations refused because the ring was full.
    pub fn overflows(&self) -> u64 {
        self.counters.overflows.load(Ordering::Relaxed)
    }

    /// Reservations refused because the frame could never fit (frame rings only).
    pub fn oversize(&self) -> u64 {
        self.counters.oversize.load(Ordering::Relaxed)
    }

    /// The most the consumer found waiting when it drained: items for a slot ring, bytes
    /// (headers and padding included) for a frame ring.
    pub fn high_water(&self) -> u64 {
        self.counters.high_water.load(Ordering::Relaxed)
    }
}

impl Counters {
    /// The consumer saw `waiting` units; stored only when it is a new high (rare after start).
    #[inline]
    fn saw_waiting(&self, local_high: &mut u64, waiting: u64) {
        if waiting > *local_high {
            *local_high = waiting;
            self.high_water.store(waiting, Ordering::Relaxed);
        }
    }
}

/// The smallest page size of the targets we run on: touching one byte in every such stretch touches
/// every page whatever the real page size is (4 KiB on x86-64 and most ARM64 kernels).
const MIN_PAGE_BYTES: usize = 4096;

/// Writes a zero byte into every page of the `len_bytes` at `base`, so that the kernel backs the
/// whole buffer with memory now, when the ring is made, rather than on the hot path the first
/// time each page is written (a minor fault each, and the resident set creeping up for as long
/// as the ring has unused pages: issue 24). Memory from `calloc` or a fresh anonymous mapping
/// reads as zero without being backed, so only a write makes it resident; the write is volatile
/// because the compiler may drop a plain store of zero into memory it knows is zeroed.
///
/// # Safety
/// - `base` must point to one allocation of at least `len_bytes` bytes that the caller may write.
/// - No other thread may access the allocation yet.
/// - Overwriting a byte of each page with zero must not break an invariant of its contents (the
///   memory is zeroed or uninitialised).
unsafe fn prefault(base: *mut u8, len_bytes: usize) {
    for offset in (0..len_bytes).step_by(MIN_PAGE_BYTES) {
        // SAFETY: `offset < len_bytes`, so the byte is inside the allocation, which the caller
        // may write and no one else touches yet.
        unsafe { base.add(offset).write_volatile(0) };
    }
}

pub use bytes::{frame_ring, FrameConsumer, FrameProducer, ReserveError};
pub use spsc::{ring, Consumer, Producer, ReadChunk};
