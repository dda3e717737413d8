//! The instrument directory beside the ring: what each `(venue_id, instrument_id)` is called.
//!
//! Append-only: the writer fills entry `i`, then publishes `count = i + 1` (Release); a reader
//! loads the count (Acquire) and reads entries below it, which never change again. Entry bytes are
//! read and written as atomic words so that the two processes' accesses are never a data race
//! even in principle. `layout.rs` gives the entry's bytes.

use crate::layout::entry;
use std::sync::atomic::{AtomicU64, Ordering};

/// One instrument as the directory names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DirectoryEntry {
    /// The events' `instrument_id`.
    pub instrument_id: u32,
    /// The events' `venue_id`.
    pub venue_id: u16,
    /// The appliance's name for the venue (its venue file's `name`).
    pub venue: String,
    /// The instrument as the venue file lists it.
    pub symbol: String,
    /// What the venue calls it on the wire.
    pub venue_symbol: String,
}

/// Cuts `text` to at most `len` bytes at a character boundary; says whether it cut.
fn fit(text: &str, len: usize) -> (&[u8], bool) {
    if text.len() <= len {
        return (text.as_bytes(), false);
    }
    let mut end = len;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text.as_bytes()[..end], true)
}

/// A field's text: up to its first NUL, invalid UTF-8 replaced.
fn text(bytes: &[u8]) -> String {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A directory entry by reference, for a writer that names instruments as they come (an
/// exchange feed's stock directory, on its decoder thread) and must not allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Naming<'a> {
    pub instrument_id: u32,
    pub venue_id: u16,
    pub venue: &'a str,
    pub symbol: &'a str,
    pub venue_symbol: &'a str,
}

impl Naming<'_> {
    /// The entry's 256 bytes; also whether a name had to be cut to fit.
    pub fn to_bytes(&self) -> ([u8; 256], bool) {
        let mut bytes = [0u8; 256];
        bytes[entry::INSTRUMENT_ID..entry::INSTRUMENT_ID + 4]
            .copy_from_slice(&self.instrument_id.to_le_bytes());
        bytes[entry::VENUE_ID..entry::VENUE_ID + 2].copy_from_slice(&self.venue_id.to_le_bytes());
        let mut cut = false;
        for (value, at, len) in [
            (self.venue, entry::VENUE, entry::VENUE_LEN),
            (self.symbol, entry::SYMBOL, entry::SYMBOL_LEN),
            (
                self.venue_symbol,
                entry::VENUE_SYMBOL,
                entry::VENUE_SYMBOL_LEN,
            ),
        ] {
            let (fitted, was_cut) = fit(value, len);
            bytes[at..at + fitted.len()].copy_from_slice(fitted);
            cut |= was_cut;
        }
        (bytes, cut)
    }
}

impl DirectoryEntry {
    /// The entry by reference.
    pub fn naming(&self) -> Naming<'_> {
        Naming {
            instrument_id: self.instrument_id,
            venue_id: self.venue_id,
            venue: &self.venue,
            symbol: &self.symbol,
            venue_symbol: &self.venue_symbol,
        }
    }

    /// The entry's 256 bytes; also whether a name had to be cut to fit.
    pub fn to_bytes(&self) -> ([u8; 256], bool) {
        self.naming().to_bytes()
    }

    pub fn from_bytes(bytes: &[u8; 256]) -> DirectoryEntry {
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        DirectoryEntry {
            instrument_id: u32_at(entry::INSTRUMENT_ID),
            venue_id: u16::from_le_bytes([bytes[entry::VENUE_ID], bytes[entry::VENUE_ID + 1]]),
            venue: text(&bytes[entry::VENUE..entry::VENUE + entry::VENUE_LEN]),
            symbol: text(&bytes[entry::SYMBOL..entry::SYMBOL + entry::SYMBOL_LEN]),
            venue_symbol: text(
                &bytes[entry::VENUE_SYMBOL..entry::VENUE_SYMBOL + entry::VENUE_SYMBOL_LEN],
            ),
        }
    }
}

/// The directory's words in a mapping.
#[derive(Clone, Copy)]
pub(crate) struct DirectoryWords {
    count: *const AtomicU64,
    /// `capacity * 32` words.
    entries: *const AtomicU64,
    capacity: u64,
}

// SAFETY: the pointers name shared memory accessed through atomics only (`DirectoryWords::new`).
unsafe impl Send for DirectoryWords {}

impl DirectoryWords {
    /// # Safety
    ///
    /// - `count` points to an `AtomicU64` and `entries` to `capacity * 32` contiguous
    ///   `AtomicU64`s, valid while any copy of the result is used, only accessed atomically.
    pub(crate) unsafe fn new(
        count: *const AtomicU64,
        entries: *const AtomicU64,
        capacity: u64,
    ) -> DirectoryWords {
        DirectoryWords {
            count,
            entries,
            capacity,
        }
    }

    fn entry_words(&self, index: u64) -> &[AtomicU64; 32] {
        assert!(index < self.capacity);
        // SAFETY: `index < capacity` (checked), so the 32 words are inside the region
        // `DirectoryWords::new` was given.
        unsafe { &*(self.entries.add(index as usize * 32) as *const [AtomicU64; 32]) }
    }

    /// Entries published so far (at most the capacity, whatever the word says).
    pub(crate) fn count(&self) -> u64 {
        // SAFETY: valid for the life of `self` (`DirectoryWords::new`).
        let count = unsafe { &*self.count }.load(Ordering::Acquire);
        count.min(self.capacity)
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Writes entry `index` (the writer's next) and publishes it.
    pub(crate) fn append(&self, index: u64, bytes: &[u8; 256]) {
        for (word, chunk) in self.entry_words(index).iter().zip(bytes.chunks_exact(8)) {
            let mut value = [0u8; 8];
            value.copy_from_slice(chunk);
            word.store(u64::from_le_bytes(value), Ordering::Relaxed);
        }
        // SAFETY: valid for the life of `self` (`DirectoryWords::new`).
        unsafe { &*self.count }.store(index + 1, Ordering::Release);
    }

    pub(crate) fn read(&self, index: u64) -> DirectoryEntry {
        let mut bytes = [0u8; 256];
        for (word, chunk) in self
            .entry_words(index)
            .iter()
            .zip(bytes.chunks_exact_mut(8))
        {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        DirectoryEntry::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_long_names_are_cut_at_a_character() {
        let entry = DirectoryEntry {
            instrument_id: 7,
            venue_id: 2,
            venue: "thalex".into(),
            symbol: "BTC-PERPETUAL".into(),
            venue_symbol: "BTC-PERPETUAL".into(),
        };
        let (bytes, cut) = entry.to_bytes();
        assert!(!cut);
        assert_eq!(DirectoryEntry::from_bytes(&bytes), entry);
        let long = DirectoryEntry {
            venue: "é".repeat(20),
            ..entry
        };
        let (bytes, cut) = long.to_bytes();
        assert!(cut);
        assert_eq!(DirectoryEntry::from_bytes(&bytes).venue, "é".repeat(16));
    }
}
