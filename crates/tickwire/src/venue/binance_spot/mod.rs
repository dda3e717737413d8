//! Binance Spot's JSON market streams, turned into the same normalized events as the USD-M
//! venue's, written from Binance's own documentation: `web-socket-streams.md` (the streams,
//! their limits and "How to manage a local order book correctly"), `rest-api.md`
//! (`GET /api/v3/depth`) and `CHANGELOG.md`, binance-spot-api-docs commit a5e0bc3 (2026-07-21),
//! in `../shared/reference/binance-spot/`; the real capture in `../shared/data/binance-spot/` is
//! the ground truth the tests check against.
//!
//! - `decode`: one message in, a typed, borrowed [`decode::Message`] out, on the USD-M decoder's
//!   readers (`venue::binance::decode`'s cursor, `binance::scan`).
//! - `sync`: Spot's own book procedure (the `U`/`u` chain; Spot has no `pu`), on the USD-M
//!   book's buffer and event code. The snapshot's `lastUpdateId` (`/api/v3/depth`) is the
//!   shared `feed::DepthSnapshot::sequence`.
//! - `feed`: both on the decoder thread as a [`crate::venue::feed::Feed`].
//! - `json`: the raw-message lines of `tickwire decode --venue binance-spot`; `capture` the
//!   runner itself (JSON lines and base64-kept SBE frames).
//! - `protocol`: the venue's [`crate::venue::protocol::Protocol`]: channels, stream names,
//!   `SUBSCRIBE` requests, the documented limits, the `/api/v3/depth` snapshots.
//! - `sbe_protocol`: the SBE streams' [`crate::venue::protocol::Protocol`] (venue kind
//!   `binance-spot-sbe`): the API key in `X-MBX-APIKEY`, the four SBE streams; the same feed.
//! - `sbe`: one binary frame of the SBE market-data streams (`sbe-market-data-streams.md`,
//!   schema `stream_1_0.xml`, id 1 version 0) read in place, and its events.
//!
//! **Invariant:** `decode`, `sync` and `feed` never do I/O and never allocate per message;
//! nothing the venue sends can make them panic.

pub mod capture;
pub mod decode;
pub mod feed;
pub mod json;
pub mod protocol;
pub mod sbe;
pub mod sbe_protocol;
pub mod sync;
