//! The strategy side: what the strategy thread keeps about the market and how it measures the
//! pipeline.
//!
//! - [`board::QuoteBoard`]: the latest top of book per instrument, published for the control
//!   thread to read without a lock.
//! - [`stamps::StampMatcher`]: matches the simulator's send stamps to the quotes the strategy
//!   receives, for latency from the venue's send to the strategy.
//! - [`print`]: every event the strategy sees as a named JSON line (the `print` strategy and
//!   `run --print-events`' [`print::EventTap`]).
//! - [`output`]: the ring a strategy's text goes through to the thread that writes it out, so
//!   that the strategy thread never writes, locks stdout or logs.

pub mod board;
pub mod builtin;
pub mod market;
pub mod output;
pub mod print;
pub mod stamps;

use crate::event::Event;
pub use market::{InstrumentState, Market};

/// User code on the strategy thread. The stage calls it once per batch of events (at most 64, in
/// order), after its own bookkeeping (latency, quote board) and after `market` has applied the
/// batch; and on a timer when it asks for one. It must not block, and should not allocate, write
/// or log (the thread is pinned and hot): text goes through a [`output::StrategyOutput`].
///
/// A batch is borrowed from the event ring in place (the decoder cannot reuse its slots until
/// `on_events` returns), so it is a contiguous run of the ring: one that would wrap around the
/// ring's end comes as two calls, each after `market` has applied its own events.
pub trait Strategy: Send {
    /// A batch of events; `now_ns` is when the stage took the batch's last event off the ring.
    fn on_events(&mut self, events: &[Event], market: &Market, now_ns: u64);

    /// How often `on_timer` is called, if at all (checked between batches, so at the strategy
    /// thread's wake-up granularity).
    fn timer_interval_ns(&self) -> Option<u64> {
        None
    }

    fn on_timer(&mut self, _market: &Market, _now_ns: u64) {}

    /// The stage is stopping: the last call.
    fn finish(&mut self, _market: &Market) {}
}
