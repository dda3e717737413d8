//! Binance USD-M Futures: what the venue's WebSocket market streams send, turned into
//! normalized events.
//!
//! **Documentation followed:** Binance's USDⓈ-M Futures pages on developers.binance.com
//! ("WebSocket Market Streams" with its per-stream URL PATH sections, "How to manage a local
//! order book correctly", `GET /fapi/v1/depth`) and the derivatives change log as read on
//! 2026-11-27 (its latest entry touching these streams dated 2026-06-10), including the
//! "Important WebSocket Change Notice: Base URL Split & Migration" of 2026-03-06. The changes
//! since 2024 to what this module reads, and what tickwire does with each:
//! - 2024-01-24: testnet WebSocket host `wss://fstream.binancefuture.com` (the shipped testnet
//!   file).
//! - 2024-02-09: a pong must echo the ping's payload (the `ws` layer does).
//! - 2025-07-02: at most 1024 streams a connection, 200 before (`max_streams_per_connection`'s
//!   default and limit).
//! - 2025-11-18/25: RPI orders are left out of `@bookTicker`, `@depth` and `/fapi/v1/depth`;
//!   `@rpiDepth@500ms` (on `/public`) is a stream tickwire does not subscribe.
//! - 2025-12-29 (effective 2025-12-31): `nq` in `@aggTrade`: read past, like any new field.
//! - 2026-03-05/06: the `/public` and `/market` entry points (`protocol`); 2026-04-02/23: the
//!   single entry points `/ws` and `/stream` retired (a url naming them is refused).
//! - 2026-03-16: `ap` in `@markPrice`: read past.
//! - 2026-06-10 (effective 2026-06-30): `st` and `ps` in `@bookTicker`, `@depth` and
//!   `@aggTrade` (the COIN-M/USD-M integration): read past.
//!
//! `tests/binance_decode.rs` (`fields_added_since_2024_are_read_past`) holds a message of each.
//!
//! - `decode` takes one complete WebSocket text message (the `ws` layer has already unframed it
//!   and checked its UTF-8) and returns a [`decode::Message`] whose strings and level arrays
//!   point into the caller's buffer. Message formats follow the Binance USD-M "Websocket Market
//!   Streams" documentation; the real capture in `../shared/data/binance-futures/` is the ground
//!   truth the tests check against.
//! - `sync` is the venue's order book synchronisation ("How to manage a local order book
//!   correctly"): diffs, the REST snapshot, the `pu` chain, gaps and resyncs. The snapshot's
//!   `lastUpdateId` (`/fapi/v1/depth`) is the shared `feed::DepthSnapshot::sequence`.
//! - `feed` puts both together on the decoder thread as a [`crate::venue::feed::Feed`].
//! - `json` writes normalized events as the JSON lines `tickwire decode` prints; `capture`
//!   is the venue's `tickwire decode --venue binance-futures` runner.
//! - `protocol` is the venue's [`crate::venue::protocol::Protocol`]: what the config and the
//!   control plane need (symbol and channel rules, the host-root url, each channel's entry
//!   point, stream names, `SUBSCRIBE` requests, the combined-stream URLs `record` uses), built on
//!   `subscribe`.
//!
//! **Invariant:** `decode`, `sync` and `feed` never do I/O and never allocate per message;
//! nothing the venue sends can make them panic. A message that cannot be read is a
//! [`decode::DecodeError`], which the feed counts and skips.

pub mod capture;
pub mod decode;
pub mod feed;
pub mod json;
pub mod protocol;
// `pub(crate)`: the Spot decoder (`venue::binance_spot`) reads the same shapes with it, and
// Bybit's (`venue::bybit`) its decimals, levels and integers.
pub(crate) mod scan;
pub mod subscribe;
pub mod sync;

/// How the config names the channels whose books start from a REST snapshot, in its message
/// for a file without `rest_url` (`RestUrl::NeededFor`); Binance Spot's too.
pub const DIFF_DEPTH_CHANNELS: &str = "a diff depth channel (depth, depth@...)";

/// A Binance diff depth stream (`depth`, `depth@100ms`, ...), as opposed to the partial book
/// streams (`depth5`, `depth10@100ms`, ...) that carry the top levels whole: its book starts
/// from a REST snapshot. USD-M's and Spot's rule.
pub fn is_diff_depth_channel(channel: &str) -> bool {
    channel == "depth" || channel.starts_with("depth@")
}
