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

pub use bytes::{frame_ring, FrameConsumer, FrameProducer, ReserveError};
pub use spsc::{ring, Consumer, Producer, ReadChunk};
