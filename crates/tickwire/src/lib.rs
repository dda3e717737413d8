//! tickwire: a low-latency market-data feed appliance for Linux.
//!
//! The crate is split by the path a message takes; `ARCHITECTURE.md` at the repository root is the
//! map. In short: `ring` carries frames and events between pinned threads, `event` is what the
//! strategy receives, `fixed` turns decimal strings into fixed-point integers, `clock` stamps
//! receive times, `thread` pins and paces the hot threads, `metrics` counts and times them, and
//! `config` loads the appliance and venue files.

pub mod book;
pub mod clock;
pub mod config;
pub mod control;
pub mod hash;
pub mod lifecycle;
pub mod metrics;
pub mod net;
pub mod pages;
pub mod pipeline;
pub mod ring;
pub mod serve;
pub mod strategy;
pub mod systemd;
pub mod thread;
pub mod tls;
pub mod venue;
pub mod ws;

// The event types and fixed-point decimals are the shared-memory bus's format as well, so they
// live in `tickwire-bus`, which consumer processes link without the appliance; they keep their
// paths here.
pub use tickwire_bus::{event, fixed};
