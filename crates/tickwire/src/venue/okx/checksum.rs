//! OKX's order book checksum ("Order book channel", "Checksum"): the CRC32 (IEEE 802.3, as
//! zlib's `crc32`) of the string made of the first 25 bids and asks of the book, each level
//! written `price:size` with the venue's own strings, bids and asks alternating (`bid1:ask1:
//! bid2:ask2:...`), the side that runs out first simply left out from there on; the value is
//! compared as a signed 32-bit integer.
//!
//! The string is written into a buffer on the stack ([`MAX_INPUT`] bytes) and hashed at once,
//! which lets `crc32fast` use its folding (PCLMULQDQ) path: writing 50 levels and hashing them
//! costs about as much as hashing alone.

use super::decode::MAX_TEXT;

/// The levels a side the checksum covers.
pub const LEVELS: usize = 25;

/// The longest checksum input: 50 levels of two strings of at most [`MAX_TEXT`] bytes and two
/// colons.
pub const MAX_INPUT: usize = 2 * LEVELS * (2 * MAX_TEXT + 2);

/// The checksum over `bids` and `asks`, each best first as `(price, size)` strings; only the
/// first [`LEVELS`] of each count. A string longer than [`MAX_TEXT`] bytes is cut there (the
/// decoder refuses such strings, so this never happens to the venue's levels).
pub fn checksum<'t>(
    bids: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
    asks: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
) -> i32 {
    let mut buffer = [0u8; MAX_INPUT];
    let mut len = 0;
    let mut put = |bytes: &[u8], buffer: &mut [u8; MAX_INPUT]| {
        let bytes = &bytes[..bytes.len().min(MAX_TEXT)];
        if len > 0 {
            buffer[len] = b':';
            len += 1;
        }
        buffer[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    let mut bids = bids.into_iter().take(LEVELS);
    let mut asks = asks.into_iter().take(LEVELS);
    loop {
        let bid = bids.next();
        let ask = asks.next();
        if bid.is_none() && ask.is_none() {
            break;
        }
        for (price, size) in bid.into_iter().chain(ask) {
            put(price, &mut buffer);
            put(size, &mut buffer);
        }
    }
    crc32fast::hash(&buffer[..len]) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels<'t>(pairs: &'t [(&'t str, &'t str)]) -> Vec<(&'t [u8], &'t [u8])> {
        pairs
            .iter()
            .map(|(price, size)| (price.as_bytes(), size.as_bytes()))
            .collect()
    }

    /// The documentation's two examples ("Calculate Checksum"), their levels verbatim; the
    /// check strings the page gives, hashed by zlib's `crc32` (Python:
    /// `zlib.crc32(b"3366.1:7:3366.8:9:3366:6:3368:8")` is 2413953002, -1881014294 as a signed
    /// 32-bit integer; the second string's 831078360).
    #[test]
    fn the_documentation_examples() {
        let bids = levels(&[("3366.1", "7"), ("3366", "6")]);
        let asks = levels(&[("3366.8", "9"), ("3368", "8")]);
        assert_eq!(checksum(bids, asks), -1_881_014_294);
        let bids = levels(&[("3366.1", "7")]);
        let asks = levels(&[("3366.8", "9"), ("3368", "8"), ("3372", "8")]);
        assert_eq!(checksum(bids, asks), 831_078_360);
    }

    /// Only 25 levels a side count, and the strings are the venue's: `0.5000` is not `0.5`.
    #[test]
    fn twenty_five_levels_of_the_venue_strings() {
        let prices: Vec<String> = (0..30).map(|i| format!("{}.50", 100 - i)).collect();
        let bids: Vec<(&[u8], &[u8])> = prices
            .iter()
            .map(|price| (price.as_bytes(), &b"1.0"[..]))
            .collect();
        let asks: Vec<(&[u8], &[u8])> = Vec::new();
        let all = checksum(bids.iter().copied(), asks.iter().copied());
        let first = checksum(bids[..25].iter().copied(), asks.iter().copied());
        assert_eq!(all, first);
        let fewer = checksum(bids[..24].iter().copied(), asks.iter().copied());
        assert_ne!(all, fewer);
        let short: Vec<(&[u8], &[u8])> = prices
            .iter()
            .map(|price| (price.trim_end_matches('0').as_bytes(), &b"1"[..]))
            .collect();
        assert_ne!(all, checksum(short.iter().copied(), asks.iter().copied()));
    }

    /// The empty book hashes the empty string.
    #[test]
    fn an_empty_book() {
        assert_eq!(checksum(Vec::new(), Vec::new()), 0);
    }
}
