//! Thalex: WebSocket JSON-RPC (`wss://thalex.com/ws/api/v2`).
//!
//! - [`channel`]: channel names from the venue file's templates.
//! - [`reader`]: the borrowing JSON reader the decoders are built on.
//! - [`decode`]: messages routed by their first bytes and read into typed values.
//! - [`feed`]: the decoder stage's feed (routes, owners, books from snapshots).
//! - [`subscribe`]: the request texts the control thread sends.
//! - [`auth`]: the RS512 JWT `public/login` takes.
//! - [`capture`]: `tickwire decode --venue thalex`, through the feed.
//! - [`protocol`]: the venue's [`crate::venue::protocol::Protocol`] (channel rules, the login,
//!   the `system` channel, the throttle error) for the config and the control plane.

pub mod auth;
pub mod capture;
pub mod channel;
pub mod decode;
pub mod feed;
pub mod protocol;
pub mod reader;
pub mod subscribe;
