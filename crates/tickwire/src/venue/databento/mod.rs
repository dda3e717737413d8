//! Databento: DBN records from the Live Subscription Gateway (plain TCP), decoded with the
//! official `dbn` crate's sans-IO `DbnFsm` and normalized into tickwire events.
//!
//! - `gateway`: the CRAM authentication and the subscription lines.
//! - `stream`, `normalize`, `feed`: DBN records to events on the decoder thread.
//! - `subscribe`: stream names, shards and the session request.
//! - `capture`: `tickwire decode --venue databento`, DBN files through the live path.
//! - `protocol`: the venue's [`crate::venue::protocol::Protocol`] (symbol and schema rules, the
//!   preamble, session start as the answer to the request, gateway notices) for the config and
//!   the control plane.

pub mod capture;
pub mod config;
pub mod feed;
pub mod gateway;
pub mod normalize;
pub mod protocol;
pub mod stream;
pub mod subscribe;
