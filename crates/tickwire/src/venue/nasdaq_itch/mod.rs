//! Nasdaq TotalView-ITCH 5.0 over MoldUDP64 (issue 37), venue kind `nasdaq-itch`.
//!
//! Documentation followed, as kept in `../shared/reference/nasdaq/`: "Nasdaq TotalView-ITCH 5.0",
//! the specification dated 03/06/2015, and Nasdaq's "MoldUDP64 Protocol Specification", V1.00,
//! 07/07/2009.
//!
//! - [`itch`]: every ITCH 5.0 message type, read in place from its big-endian bytes, lengths
//!   checked; prices to `Fixed`; timestamps to epoch ns with the session's New York date.
//! - [`mold`]: MoldUDP64 downstream and request packets, and the [`mold::Arbiter`], the A/B line
//!   arbitration and gap recovery as a pure state machine.
//! - [`book`]: the L3 book of every stock, its level changes and trades.
//! - [`generate`]: a generated day-like market (tests, benchmarks, fuzz seeds) and MoldUDP64
//!   framing.
//! - [`pcap`]: UDP payloads out of classic pcap and pcapng captures, and Nasdaq's raw ITCH file
//!   format.
//!
//! - [`decoder`]: the [`decoder::ItchDecoder`], sans-IO: packets of both lines and the
//!   re-request answers through the arbiter, the parser and the book, the bus's events out.
//! - [`capture`]: `tickwire decode --venue nasdaq-itch` on pcap, pcapng and raw ITCH files.
//! - [`config`]: the venue file's `[nasdaq_itch]` table; [`protocol`]: the kind `nasdaq-itch`.
//!
//! - [`feed`]: the live path's `Feed`: the decoder on the decoder thread, fed the datagrams the
//!   network thread reads from both lines and the re-request socket (`net::udp`,
//!   `net::engine`), its re-requests sent by the network thread.
//!
//! The simulator is `tickwire_sim::itch` (`tickwire sim --venue itch`).

pub mod book;
pub mod capture;
pub mod config;
pub mod decoder;
pub mod feed;
pub mod generate;
pub mod itch;
pub mod mold;
pub mod pcap;
pub mod protocol;
