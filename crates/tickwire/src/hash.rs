//! The one non-cryptographic hasher of the crate: [`FastHasher`], a multiply by 2^64 / phi per
//! word, and the map types built on it.
//!
//! Every table it serves is keyed by something tickwire chose or the venue assigned (DBN
//! instrument ids, tickwire instrument ids, the channel names of the feed's own config), never
//! by whoever sends traffic, so SipHash's flooding resistance buys nothing there, while its cost
//! was about a fifth of the time per Databento MBO record (three lookups a record;
//! `benches/databento.rs`). The same hasher also gives Thalex trades, which carry no id, a key
//! for telling a trade delivered twice from two trades (`venue/thalex/decode.rs`), and the L3
//! book's open-addressing order table (`book/mbo.rs`) its probe start: [`hash_word`], the hash
//! a `FastHasher` gives one integer, whose high bits the table takes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// 2^64 / phi, odd: Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4). Multiplying by an odd
/// constant is a bijection of `u64`, so a step loses nothing of what was hashed before it.
const FIBONACCI: u64 = 0x9e37_79b9_7f4a_7c15;

/// Fibonacci hashing for integers, multiply-rotate over eight-byte words (the Fx hash of rustc,
/// with the constant above) for byte strings.
///
/// An integer is one xor and one multiply: the product's low bits (hashbrown's bucket index)
/// are a bijection of the key's low bits and its top bits (the control byte) mix every bit of
/// it. A byte string costs a handful of cycles per word, which suits short names. Either way a
/// sequence of writes that differs in a single write hashes differently, since every step is a
/// bijection of the state for a fixed input.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline(always)]
    fn word(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(FIBONACCI);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut hash = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            hash = (hash.rotate_left(5) ^ word).wrapping_mul(FIBONACCI);
        }
        // The tail, zero-padded, with its length so that `b"a"` and `b"a\0"` differ.
        let rest = chunks.remainder();
        let tail = match bytes.len().checked_sub(8) {
            // From eight bytes on, the last eight as one word, shifted down to the tail's bytes
            // (the same value as the tail zero-padded, with no copy of a variable length).
            Some(last) if !rest.is_empty() => {
                let word = bytes
                    .get(last..)
                    .and_then(|word| <[u8; 8]>::try_from(word).ok())
                    .map_or(0, u64::from_le_bytes);
                word >> (64 - 8 * rest.len())
            }
            _ => {
                let mut tail = [0u8; 8];
                tail[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(tail)
            }
        };
        hash = (hash.rotate_left(5) ^ tail ^ rest.len() as u64).wrapping_mul(FIBONACCI);
        self.0 = hash;
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.word(u64::from(value));
    }

    #[inline]
    fn write_u16(&mut self, value: u16) {
        self.word(u64::from(value));
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.word(u64::from(value));
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.word(value);
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.word(value as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The hash of one integer written alone into a fresh [`FastHasher`]: `word * 2^64/phi`. Its high
/// bits mix every bit of `word` (Fibonacci hashing takes them: `hash_word(id) >> (64 - log2
/// slots)`), which is what the L3 book's order table does with venue order ids, dense or sparse.
#[inline(always)]
pub fn hash_word(word: u64) -> u64 {
    let mut hasher = FastHasher::default();
    hasher.word(word);
    hasher.0
}

/// Builds [`FastHasher`]s for `HashMap` and `HashSet`.
pub type BuildFastHasher = BuildHasherDefault<FastHasher>;

/// A map keyed by an instrument id (a DBN one or tickwire's), hashed with [`FastHasher`].
pub type IdMap<V> = HashMap<u32, V, BuildFastHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash_of(value: impl Hash) -> u64 {
        let mut hasher = FastHasher::default();
        value.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn consecutive_ids_land_in_distinct_buckets() {
        // The low bits pick hashbrown's bucket: 1024 consecutive ids fill 1024 buckets.
        let mut buckets: Vec<u64> = (0u32..1024).map(|id| hash_of(id) & 1023).collect();
        buckets.sort_unstable();
        buckets.dedup();
        assert_eq!(buckets.len(), 1024);
    }

    #[test]
    fn names_that_differ_anywhere_hash_differently() {
        let names: [&[u8]; 7] = [
            b"",
            b"a",
            b"a\0",
            b"ticker.BTC-PERPETUAL.100ms",
            b"ticker.BTC-PERPETUAL.1000ms",
            b"ticker.ETH-PERPETUAL.100ms",
            b"book.BTC-PERPETUAL.none.10.100ms",
        ];
        let mut hashes: Vec<u64> = names.iter().map(hash_of).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), names.len());
    }

    #[test]
    fn hash_word_is_what_the_hasher_gives_one_integer() {
        for word in [0u64, 1, 7, u64::from(u32::MAX), 1 << 40, u64::MAX] {
            assert_eq!(hash_word(word), hash_of(word));
            assert_eq!(hash_word(word), word.wrapping_mul(FIBONACCI));
        }
    }

    #[test]
    fn the_tail_hashes_as_its_bytes_zero_padded() {
        // What `write` gave before it read the tail as one shifted word: every length 0 to 40.
        fn padded(bytes: &[u8]) -> u64 {
            let mut hash = 0u64;
            let mut chunks = bytes.chunks_exact(8);
            for chunk in &mut chunks {
                let word = u64::from_le_bytes(chunk.try_into().unwrap());
                hash = (hash.rotate_left(5) ^ word).wrapping_mul(FIBONACCI);
            }
            let mut tail = [0u8; 8];
            let rest = chunks.remainder();
            tail[..rest.len()].copy_from_slice(rest);
            (hash.rotate_left(5) ^ u64::from_le_bytes(tail) ^ rest.len() as u64)
                .wrapping_mul(FIBONACCI)
        }
        let text: Vec<u8> = (1..=40u8).map(|byte| byte.wrapping_mul(37)).collect();
        for len in 0..=text.len() {
            let mut hasher = FastHasher::default();
            hasher.write(&text[..len]);
            assert_eq!(hasher.finish(), padded(&text[..len]), "{len}");
        }
    }

    #[test]
    fn maps_find_what_they_hold() {
        let mut map = IdMap::default();
        for id in 0..100u32 {
            map.insert(id * 7, id);
        }
        assert!((0..100u32).all(|id| map.get(&(id * 7)) == Some(&id)));
        assert_eq!(map.get(&1), None);
    }
}
