//! The strategy side: what the strategy thread keeps about the market and how it measures the
//! pipeline.
//!
//! - [`board::QuoteBoard`]: the latest top of book per instrument, published for the control
//!   thread to read without a lock.
//! - [`stamps::StampMatcher`]: matches the simulator's send stamps to the quotes the strategy
//!   receives, for latency from the venue's send to the strategy.

pub mod board;
pub mod stamps;
