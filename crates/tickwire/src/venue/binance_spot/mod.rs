//! Binance Spot. So far its SBE market-data decoder ([`sbe`]); the feed and protocol follow.

pub mod sbe;
