//! The strategy side: what the strategy thread keeps about the market and how it measures the
//! pipeline.
//!
//! - [`board::QuoteBoard`]: the latest top of book per instrument, published for the control
//!   thread to read without a lock.
//! - [`stamps::StampMatcher`]: matches the simulator's send stamps to the quotes the strategy
//!   receives, for latency from the venue's send to the strategy.

pub mod board;
pub mod stamps;

use crate::event::Event;

/// User code on the strategy thread. The stage calls it for every event, in order, after its own
/// bookkeeping (latency, quote board); it must not block.
pub trait Strategy: Send {
    /// One event, `now_ns` being when the stage took it off the ring.
    fn on_event(&mut self, event: &Event, now_ns: u64);

    /// The stage is stopping: the last call.
    fn finish(&mut self) {}
}
