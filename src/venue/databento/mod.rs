//! Databento: DBN records from the Live Subscription Gateway (plain TCP), decoded with the
//! official `dbn` crate's sans-IO `DbnFsm` and normalized into tickwire events.

pub mod feed;
pub mod gateway;
pub mod normalize;
pub mod protocol;
pub mod stream;
pub mod subscribe;
