//! Read tickwire's shared-memory event bus from your own process.
//!
//! The appliance (`tickwire run` with `[bus]` in its config) writes every normalized event into
//! a ring in a file under `/run/tickwire` or `/dev/shm`. Any number of consumer processes read
//! it, each at its own pace; none can slow the appliance or another consumer. A consumer that
//! falls a whole ring behind is told exactly how many events it lost ([`Next::Overrun`]); one
//! that outlives an appliance restart is told so ([`Next::NewEpoch`]) and goes on with the new
//! stream. Nothing here needs `unsafe` in your code.
//!
//! ```no_run
//! use std::time::Duration;
//! use tickwire_client::event::Body;
//! use tickwire_client::{Client, Next};
//!
//! # fn main() -> Result<(), tickwire_client::ClientError> {
//! // Wait up to 10 s for the appliance to make its bus.
//! let mut client = Client::attach_wait("/run/tickwire/tickwire.bus", Duration::from_secs(10))?;
//! loop {
//!     match client.wait(Duration::from_secs(1))? {
//!         Next::Events(events) => {
//!             for event in events {
//!                 let (venue, symbol) = events.name(event);
//!                 if let Body::Trade(trade) = event.body() {
//!                     println!("{venue} {symbol} trade {} x {}", trade.price, trade.size);
//!                 }
//!             }
//!         }
//!         Next::Overrun { missed, .. } => eprintln!("lapped: {missed} events lost"),
//!         Next::NewEpoch { epoch } => eprintln!("the appliance restarted (epoch {epoch})"),
//!         Next::Closed => eprintln!("the appliance stopped; waiting for it to come back"),
//!         Next::Removed => eprintln!("the bus file was removed; waiting for a new one"),
//!         Next::Idle => {}
//!     }
//! }
//! # }
//! ```
//!
//! Books: turn on [`Client::follow_books`] (or [`ClientOptions::follow_books`]) and the client
//! applies every event to [`Books`] by the rules in [`books`], asking the appliance for
//! snapshots when it attaches, after an overrun and after a new epoch:
//!
//! ```no_run
//! use std::time::Duration;
//! use tickwire_client::{Client, Next, Start};
//!
//! # fn main() -> Result<(), tickwire_client::ClientError> {
//! let mut client = Client::options()
//!     .start(Start::Latest)
//!     .follow_books(true)
//!     .attach("/run/tickwire/tickwire.bus")?;
//! loop {
//!     if let Next::Events(events) = client.wait(Duration::from_millis(100))? {
//!         let Some(books) = events.books() else { continue };
//!         for event in events {
//!             let (venue_id, instrument_id) = (event.header.venue_id, event.header.instrument_id);
//!             if let Some(book) = books.book(venue_id, instrument_id).filter(|b| b.is_valid()) {
//!                 let (venue, symbol) = events.name(event);
//!                 println!("{venue} {symbol} {:?} / {:?}", book.best_bid(), book.best_ask());
//!             }
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! The crate depends on `tickwire-bus` alone (the event types and the bus's reader), never on
//! the appliance.

pub mod books;
mod client;
mod directory;
mod error;

pub use books::{Book, BookState, Books};
pub use client::{
    Client, ClientOptions, Counters, Events, Next, ATTACH_POLL, CHECK_INTERVAL, DEFAULT_BATCH,
};
pub use directory::Directory;
pub use error::ClientError;
pub use tickwire_bus::event;
pub use tickwire_bus::fixed::{self, Fixed};
pub use tickwire_bus::{user_id, Owner};
pub use tickwire_bus::{BusError, DirectoryEntry, ReadError, SnapshotRequest, Start};
