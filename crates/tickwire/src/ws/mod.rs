//! WebSocket client (RFC 6455), sans-IO: byte slices in, events and bytes to send out.
//!
//! The network thread owns sockets and TLS; this module only sees plaintext. A connection goes
//! through two phases:
//!
//! 1. [`Handshake`] writes the HTTP/1.1 upgrade request and checks the server's response as it
//!    arrives ([`HandshakeStatus::Done`] says how many bytes it was; the rest are frames).
//! 2. [`Client`] unframes what the server sends, one frame per [`Client::read`] call, handing
//!    each complete message out as a slice borrowed from the input when it came unfragmented
//!    (server frames are unmasked, so no copy is needed), and queues masked frames (our
//!    messages, automatic pongs, close frames) in an output buffer the caller drains.
//!
//! A driving loop, per batch of received bytes:
//!
//! ```
//! use tickwire::ws::{Client, Config, Event};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut client = Client::new(Config::default())?;
//! let received: &[u8] = &[0x81, 0x02, b'h', b'i', 0x89, 0x00];
//! let mut start = 0;
//! loop {
//!     let read = client.read(&received[start..])?;
//!     start += read.consumed;
//!     match read.event {
//!         Event::Message { payload, .. } => assert_eq!(payload, b"hi"), // into the frame ring
//!         Event::NeedMore | Event::Closed => break,
//!         _ => {}
//!     }
//! }
//! // Keep received[start..] for the next batch; send client.output(), then consume_output.
//! assert!(!client.output().is_empty(), "the ping's pong is queued");
//! # Ok(())
//! # }
//! ```
//!
//! `frame` holds the stateless codec (header parsing and writing, masking); `client` the
//! connection state (fragmentation, limits, the closing handshake of section 7).

pub mod client;
mod error;
pub mod frame;
pub mod handshake;

pub use client::{Client, Config, Event, MessageKind, Read, State};
pub use error::{close_code, EntropyError, Error, SendError};
pub use handshake::{accept_key, Excerpt, Handshake, HandshakeError, HandshakeStatus, Request};
