//! Binance USD-M Futures: what the venue's WebSocket market streams send, turned into
//! normalized events.
//!
//! - `decode` takes one complete WebSocket text message (the `ws` layer has already unframed it
//!   and checked its UTF-8) and returns a [`decode::Message`] whose strings and level arrays
//!   point into the caller's buffer. Message formats follow the Binance USD-M "Websocket Market
//!   Streams" documentation; the real capture in `../shared/data/binance-futures/` is the ground
//!   truth the tests check against.
//! - `sync` is the venue's order book synchronisation ("How to manage a local order book
//!   correctly"): diffs, the REST snapshot, the `pu` chain, gaps and resyncs.
//! - `feed` puts both together on the decoder thread as a [`crate::venue::feed::Feed`].
//! - `json` writes normalized events as the JSON lines `tickwire decode` prints.
//! - `protocol` is the venue's [`crate::venue::protocol::Protocol`]: what the config and the
//!   control plane need (symbol and channel rules, stream names, `SUBSCRIBE` requests, the
//!   combined-stream URL `record` uses), built on `subscribe`.
//!
//! **Invariant:** `decode`, `sync` and `feed` never do I/O and never allocate per message;
//! nothing the venue sends can make them panic. A message that cannot be read is a
//! [`decode::DecodeError`], which the feed counts and skips.

pub mod decode;
pub mod feed;
pub mod json;
pub mod protocol;
// `pub(crate)`: the Spot decoder (`venue::binance_spot`) reads the same shapes with it.
pub(crate) mod scan;
pub mod subscribe;
pub mod sync;
