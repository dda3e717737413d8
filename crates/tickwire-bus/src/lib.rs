//! tickwire's event types and its shared-memory event bus.
//!
//! The appliance and every consumer process share this crate: [`event`] is the 64-byte event
//! and [`fixed`] its fixed-point decimals; the bus is a file in shared memory (`/run/tickwire`
//! or `/dev/shm`) with one writer, the appliance ([`BusWriter`]), and any number of readers
//! ([`BusReader`]), each at its own pace, none able to slow the writer: a reader that falls a
//! whole ring behind is told exactly how many events it missed. [`layout`] gives the file byte by
//! byte (the C and Python readers follow it), `ring.rs` the protocol and its memory-ordering
//! argument. Users read through the `tickwire-client` crate, which adds waiting, epochs and
//! books on top of [`BusReader`]. The writer makes its files so that no other user can steer or
//! block it, and readers read only a file of an owner they trust ([`Owner`]; `shm.rs`); a file
//! truncated under a reader or the writer is an error, never a SIGBUS (`sigbus.rs`, with the
//! argument that makes its handler sound).

pub mod directory;
pub mod event;
pub mod fixed;
pub mod layout;
mod reader;
mod ring;
mod shm;
mod sigbus;
mod writer;

pub use directory::{DirectoryEntry, Naming};
pub use layout::{Geometry, SnapshotRequest};
pub use reader::{BusReader, ReadError, Start};
pub use ring::{Batch, RingError};
pub use shm::{
    bind_request_socket, describe_user, group_id, identity_at, lock_path, remove_request_socket,
    request_socket_path, user_id, user_name, BusError, Owner,
};
pub use writer::{BusOptions, BusStats, BusWriter, DirectoryFull};
