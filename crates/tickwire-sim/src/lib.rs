//! The venue simulator behind `tickwire sim`, the demo, the tests and the benchmarks: a Binance
//! USDⓈ-M Futures compatible server on loopback (WebSocket over TLS with a certificate it makes on
//! start, REST depth snapshots), fed by a [`source::Source`] (a capture replay or a synthetic
//! market), with fault injection; in `thalex` a Thalex compatible server (WebSocket JSON-RPC
//! with login tokens, subscriptions and a synthetic market) on the same TLS plumbing; and in
//! `databento` a mock Databento Live Subscription Gateway (plain TCP, CRAM authentication, DBN
//! records from a shared synthetic MBO market, a file or a benchmark batch). With
//! [`SimVenue::BinanceSpot`] the Binance server is Binance Spot instead, its messages in Spot's
//! shapes through [`spot::SpotSource`]; with [`SimVenue::BinanceSpotSbe`] it is Binance Spot's SBE
//! market data streams, binary frames made by [`sbe::SbeSource`] with the official generated encoder.
//! In `bybit`, a Bybit v5 public WebSocket compatible server (spot and linear entry points,
//! `subscribe`/`unsubscribe`/`ping` ops, books, trades, tickers and liquidations) on the same
//! TLS plumbing.
//!
//! Nothing here is on tickwire's hot path: the simulator is the other side of the wire, written
//! for clarity and for faithful venue behaviour, and it may allocate and block.

mod accept;
pub mod bybit;
mod cert;
mod control;
pub mod databento;
mod frame;
mod http;
pub mod itch;
pub mod okx;
mod options;
pub mod sbe;
mod server;
pub mod source;
pub mod spot;
pub mod thalex;
mod wire;

pub use options::{Faults, Pace, SimOptions, SimVenue, Stamp, Start};
pub use server::{ConnectionStats, SendPath, Sim, SimError, SimHandle, SimStats, CLOSE_GRACE};
