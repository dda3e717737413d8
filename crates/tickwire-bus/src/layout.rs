//! The bus file's layout, byte by byte: the one description the writer, the Rust reader, the C
//! header (`clients/c/tickwire_bus.h`) and the Python package (`clients/python/tickwire_bus`)
//! all follow. Every integer is little-endian (the byte order of every target tickwire builds
//! for); offsets are from the start of the file.
//!
//! ```text
//! 0      header          4096 bytes (one page)
//! 4096   ring 0          capacity x 64-byte event slots (capacity a power of two)
//! ...    ring 1..P-1     the same, one ring per partition (P = partitions, 1 to 31)
//! ...    directory       directory_capacity x 256-byte instrument entries
//! ```
//!
//! # Partitions (layout version 3)
//!
//! A bus has `P` partitions, one per decoder thread of the appliance: each is a ring of its own
//! with its own claim and cursor and exactly one writer (the decoder that owns it), so no ring
//! ever has two writers. Every instrument belongs to one decoder, so all of an instrument's
//! events are in one partition, in order; a reader reads every partition and merges them (in
//! batches, taking the partitions in turn), which keeps each instrument's order and promises no
//! order between instruments of different partitions. A reader lapped on one partition is told
//! how many events it lost there and reads the others on. With one decoder there is one
//! partition, and the file is version 2's but for the version and the partition count. The
//! directory stays one, written by the appliance's control thread when it makes the bus, before
//! any decoder runs (one writer).
//!
//! # Header
//!
//! | offset | type | field | written |
//! |---:|---|---|---|
//! | 0 | `[u8; 8]` | magic `TICKWBUS` | once, before the file is visible |
//! | 8 | u32 | layout version ([`LAYOUT_VERSION`]) | once |
//! | 12 | u32 | event size (64) | once |
//! | 16 | u64 | capacity: slots in the ring, a power of two | once |
//! | 24 | u64 | epoch: a new nonzero value every time an appliance creates the bus | once |
//! | 32 | u64 | ring offset (4096) | once |
//! | 40 | u64 | directory offset | once |
//! | 48 | u64 | directory capacity (entries) | once |
//! | 56 | u64 | directory entry size (256) | once |
//! | 64 | u64 | created, ns since the Unix epoch | once |
//! | 72 | u64 | the writer's process id | once |
//! | 80 | u64 | partitions `P`, 1 to 31 | once |
//! | 128 + 128k | atomic u64 | partition k's **claim**: every position below it may be being overwritten | by partition k's writer, per batch |
//! | 136 + 128k | atomic u64 | partition k's **cursor**: every position below it is written and complete | by partition k's writer, per batch |
//! | 192 | atomic u64 | directory count: entries below it are complete and never change | by the directory's writer |
//! | 200 | atomic u64 | state: 1 live, 2 closed (the appliance stopped cleanly) | by the writer |
//!
//! Everything else in the header is zero and reserved. A partition's claim and cursor share a
//! cache line (its writer's, written once per batch), and each partition's line is 128 bytes
//! from the next (no two writers' words on a line or an adjacent-line prefetch pair); the
//! directory count and the state are on the line after partition 0's.
//!
//! # Ring
//!
//! Each partition counts its own positions. The event at position `p` (0, 1, 2... since the bus
//! was created) of partition `k` is in slot `p & (capacity - 1)` of ring `k`, at `ring offset +
//! 64 * capacity * k + 64 * slot`: the 64 bytes of an [`Event`](crate::event::Event), whose
//! layout `event.rs` pins (header 32 bytes: `exchange_ts_ns` u64, `recv_ts_ns` u64, `venue_seq`
//! u64, `instrument_id` u32, `venue_id` u16, `kind` u8, `flags` u8; then the 32-byte payload the
//! kind names). Readers copy a slot out and check afterwards that it was not overwritten while
//! they copied (`ring.rs` gives the protocol and its memory-ordering argument).
//!
//! # Directory
//!
//! Entry `i` is at `directory offset + 256 * i`, complete once the directory count exceeds `i`
//! and never written again. Entries are appended when instruments are added; when two entries
//! name the same `(venue_id, instrument_id)`, the later one holds.
//!
//! | offset | type | field |
//! |---:|---|---|
//! | 0 | u32 | instrument id (the events' `instrument_id`) |
//! | 4 | u16 | venue id (the events' `venue_id`) |
//! | 6 | u16 | reserved (0) |
//! | 8 | u64 | reserved (0) |
//! | 16 | `[u8; 32]` | venue: the appliance's name for the venue (`binance-futures`), UTF-8, NUL-padded |
//! | 48 | `[u8; 104]` | symbol: the instrument as the venue file lists it (`BTCUSDT`), UTF-8, NUL-padded |
//! | 152 | `[u8; 104]` | venue symbol: what the venue calls it on the wire (`btcusdt`), UTF-8, NUL-padded |
//!
//! A name longer than its field is cut at a character boundary (the writer counts it); a field
//! filled to its end has no NUL.
//!
//! # Requests
//!
//! Readers map the file read-only; the one thing they ask of the appliance, a book snapshot, goes
//! as a 16-byte datagram to the Unix socket at the bus path plus [`REQUEST_SOCKET_SUFFIX`]
//! ([`SnapshotRequest`] gives the bytes). The snapshot comes back in the stream, for every reader.

/// The file's first eight bytes.
pub const MAGIC: [u8; 8] = *b"TICKWBUS";
/// The version of this layout. A reader refuses a file of another version by name. Version 2
/// added the `Liquidation` event kind (13): a version-1 reader would refuse its events.
/// Version 3 added partitions (one ring per decoder thread): a version-2 reader would read
/// partition 0 only.
pub const LAYOUT_VERSION: u32 = 3;
/// The most partitions a bus may have: as many claim-and-cursor pairs as fit, 128 bytes apart,
/// in the header page from byte 128.
pub const MAX_PARTITIONS: u32 = 31;
/// Bytes per event slot.
pub const EVENT_SIZE: u32 = 64;
/// Bytes of the header (the ring starts here).
pub const HEADER_BYTES: u64 = 4096;
/// Bytes per directory entry.
pub const DIRECTORY_ENTRY_BYTES: u64 = 256;
/// The smallest ring a bus may have.
pub const MIN_CAPACITY: u64 = 1024;
/// The largest ring a bus may have (2^28 slots: 16 GiB).
pub const MAX_CAPACITY: u64 = 1 << 28;
/// The largest directory a bus may have.
pub const MAX_DIRECTORY: u64 = 1 << 20;

/// Byte offsets of the header's fields.
pub mod offsets {
    pub const MAGIC: usize = 0;
    pub const LAYOUT_VERSION: usize = 8;
    pub const EVENT_SIZE: usize = 12;
    pub const CAPACITY: usize = 16;
    pub const EPOCH: usize = 24;
    pub const RING_OFFSET: usize = 32;
    pub const DIRECTORY_OFFSET: usize = 40;
    pub const DIRECTORY_CAPACITY: usize = 48;
    pub const DIRECTORY_ENTRY_SIZE: usize = 56;
    pub const CREATED_NS: usize = 64;
    pub const WRITER_PID: usize = 72;
    pub const PARTITIONS: usize = 80;
    /// Partition 0's claim; partition k's is `CLAIM + PARTITION_STRIDE * k` ([`claim`]).
    pub const CLAIM: usize = 128;
    /// Partition 0's cursor; partition k's is `CURSOR + PARTITION_STRIDE * k` ([`cursor`]).
    pub const CURSOR: usize = 136;
    /// Bytes from one partition's claim and cursor to the next's.
    pub const PARTITION_STRIDE: usize = 128;

    /// Partition `k`'s claim.
    pub const fn claim(k: usize) -> usize {
        CLAIM + PARTITION_STRIDE * k
    }

    /// Partition `k`'s cursor.
    pub const fn cursor(k: usize) -> usize {
        CURSOR + PARTITION_STRIDE * k
    }
    pub const DIRECTORY_COUNT: usize = 192;
    pub const STATE: usize = 200;
}

/// Byte offsets of a directory entry's fields, and their lengths.
pub mod entry {
    pub const INSTRUMENT_ID: usize = 0;
    pub const VENUE_ID: usize = 4;
    pub const VENUE: usize = 16;
    pub const VENUE_LEN: usize = 32;
    pub const SYMBOL: usize = 48;
    pub const SYMBOL_LEN: usize = 104;
    pub const VENUE_SYMBOL: usize = 152;
    pub const VENUE_SYMBOL_LEN: usize = 104;
}

/// The header's state word: the writer is running.
pub const STATE_LIVE: u64 = 1;
/// The header's state word: the writer stopped cleanly; nothing more will be written.
pub const STATE_CLOSED: u64 = 2;

/// Appended to the bus path to name the Unix datagram socket that takes [`SnapshotRequest`]s.
pub const REQUEST_SOCKET_SUFFIX: &str = ".requests";

/// The sizes a bus file is made with, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Event slots: a power of two in `MIN_CAPACITY..=MAX_CAPACITY`.
    pub capacity: u64,
    /// Directory entries, `1..=MAX_DIRECTORY`.
    pub directory_capacity: u64,
    /// Partitions, `1..=MAX_PARTITIONS`, each a ring of `capacity` slots.
    pub partitions: u32,
}

impl Geometry {
    /// Checks the sizes; the error says what would be valid.
    pub fn new(capacity: u64, directory_capacity: u64) -> Result<Geometry, String> {
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(format!(
                "capacity {capacity}: the ring holds a power of two of events, from {MIN_CAPACITY} \
                 to {MAX_CAPACITY}"
            ));
        }
        if !(1..=MAX_DIRECTORY).contains(&directory_capacity) {
            return Err(format!(
                "directory capacity {directory_capacity}: from 1 to {MAX_DIRECTORY} entries"
            ));
        }
        Ok(Geometry {
            capacity,
            directory_capacity,
            partitions: 1,
        })
    }

    /// The same sizes with `partitions` rings (one per decoder), checked.
    pub fn with_partitions(self, partitions: u32) -> Result<Geometry, String> {
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(format!(
                "{partitions} partitions: a bus has from 1 to {MAX_PARTITIONS} (one per decoder)"
            ));
        }
        let geometry = Geometry { partitions, ..self };
        // 31 rings of the largest capacity and the largest directory still fit a u64.
        debug_assert!(geometry.file_bytes() > geometry.directory_offset());
        Ok(geometry)
    }

    /// Partition 0's ring.
    pub const fn ring_offset(&self) -> u64 {
        HEADER_BYTES
    }

    /// Partition `k`'s ring.
    pub const fn partition_offset(&self, k: u32) -> u64 {
        HEADER_BYTES + k as u64 * self.capacity * EVENT_SIZE as u64
    }

    pub const fn directory_offset(&self) -> u64 {
        self.partition_offset(self.partitions)
    }

    /// The file's size in bytes.
    pub const fn file_bytes(&self) -> u64 {
        self.directory_offset() + self.directory_capacity * DIRECTORY_ENTRY_BYTES
    }
}

/// A reader's request for book snapshots, sent as a datagram to the request socket.
///
/// | offset | type | field |
/// |---:|---|---|
/// | 0 | `[u8; 4]` | magic `TWRQ` |
/// | 4 | u16 | layout version ([`LAYOUT_VERSION`]) |
/// | 6 | u16 | request kind: 1 = book snapshot |
/// | 8 | u16 | venue id, or 65535 for every venue |
/// | 10 | u16 | reserved (0) |
/// | 12 | u32 | instrument id, or 4294967295 for every instrument of the venue |
///
/// The appliance answers into the stream: `SnapshotBegin`, one `BookLevel` per level (flag
/// `SNAPSHOT`), `SnapshotEnd`, in order with the book's updates, so that a reader that resets
/// the book at `SnapshotBegin` and applies every level after it holds the appliance's book.
/// An instrument gets at most one snapshot per `min_interval` (the appliance's `[bus]`
/// `snapshot_interval_ms`); requests inside it are counted and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub venue_id: u16,
    pub instrument_id: u32,
}

impl SnapshotRequest {
    pub const BYTES: usize = 16;
    pub const MAGIC: [u8; 4] = *b"TWRQ";
    pub const KIND_BOOK_SNAPSHOT: u16 = 1;
    /// Every venue.
    pub const ALL_VENUES: u16 = u16::MAX;
    /// Every instrument of the venue.
    pub const ALL_INSTRUMENTS: u32 = u32::MAX;

    pub fn to_bytes(&self) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        bytes[0..4].copy_from_slice(&Self::MAGIC);
        bytes[4..6].copy_from_slice(&(LAYOUT_VERSION as u16).to_le_bytes());
        bytes[6..8].copy_from_slice(&Self::KIND_BOOK_SNAPSHOT.to_le_bytes());
        bytes[8..10].copy_from_slice(&self.venue_id.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.instrument_id.to_le_bytes());
        bytes
    }

    /// Reads a datagram; the error says what was wrong with it.
    pub fn from_bytes(bytes: &[u8]) -> Result<SnapshotRequest, &'static str> {
        let bytes: &[u8; 16] = bytes
            .try_into()
            .map_err(|_| "a request is exactly 16 bytes")?;
        if bytes[0..4] != Self::MAGIC {
            return Err("no TWRQ magic");
        }
        if u16::from_le_bytes([bytes[4], bytes[5]]) != LAYOUT_VERSION as u16 {
            return Err("another layout version");
        }
        if u16::from_le_bytes([bytes[6], bytes[7]]) != Self::KIND_BOOK_SNAPSHOT {
            return Err("an unknown request kind");
        }
        Ok(SnapshotRequest {
            venue_id: u16::from_le_bytes([bytes[8], bytes[9]]),
            instrument_id: u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_checks_and_places_regions() {
        let geometry = Geometry::new(1024, 16).unwrap();
        assert_eq!(geometry.directory_offset(), 4096 + 65536);
        assert_eq!(geometry.file_bytes(), 4096 + 65536 + 16 * 256);
        assert!(Geometry::new(1000, 16)
            .unwrap_err()
            .contains("power of two"));
        assert!(Geometry::new(512, 16).is_err());
        assert!(Geometry::new(1024, 0).is_err());
        assert_eq!(offsets::STATE + 8, 208);
        assert_eq!(entry::VENUE_SYMBOL + entry::VENUE_SYMBOL_LEN, 256);
        let three = geometry.with_partitions(3).unwrap();
        assert_eq!(three.partition_offset(2), 4096 + 2 * 65536);
        assert_eq!(three.directory_offset(), 4096 + 3 * 65536);
        assert!(geometry.with_partitions(0).is_err());
        assert!(geometry.with_partitions(MAX_PARTITIONS + 1).is_err());
        // The last partition's words are inside the header page, clear of the directory count
        // and the state.
        assert!(offsets::cursor(MAX_PARTITIONS as usize - 1) + 8 <= HEADER_BYTES as usize);
        for k in 0..MAX_PARTITIONS as usize {
            for word in [offsets::claim(k), offsets::cursor(k)] {
                assert!(![
                    offsets::DIRECTORY_COUNT,
                    offsets::STATE,
                    offsets::PARTITIONS
                ]
                .contains(&word));
            }
        }
    }

    #[test]
    fn requests_round_trip_and_bad_ones_say_why() {
        let request = SnapshotRequest {
            venue_id: 2,
            instrument_id: 7,
        };
        let bytes = request.to_bytes();
        assert_eq!(&bytes[..4], b"TWRQ");
        assert_eq!(SnapshotRequest::from_bytes(&bytes), Ok(request));
        assert!(SnapshotRequest::from_bytes(&bytes[..15]).is_err());
        let mut other = bytes;
        other[6] = 9;
        assert_eq!(
            SnapshotRequest::from_bytes(&other),
            Err("an unknown request kind")
        );
    }
}
