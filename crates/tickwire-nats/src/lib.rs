//! tickwire's event stream through NATS, for consumers on other hosts.
//!
//! [`wire`] is the format (subjects, messages, the directory service), byte by byte; [`bridge`]
//! is `tickwire bridge nats`, the bus consumer that publishes every event; [`NatsClient`] reads
//! them back on any host with the bus client's own `poll`/`wait` -> [`Next`] surface.
//!
//! This crate holds the tokio runtime and `async-nats`, so that `tickwire-client` stays free of
//! them for bus-only users.

pub mod bridge;
mod consumer;
pub mod wire;

pub use bridge::{BridgeCounters, BridgeError, BridgeOptions, JetStreamOptions};
pub use consumer::{NatsClient, NatsCounters, NatsError, NatsOptions, Replay, ReplayStart};
pub use tickwire_client::Next;
