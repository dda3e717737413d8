//! OKX's order book checksum ("Order book channel", "Checksum"): the CRC32 (IEEE 802.3, as
//! zlib's `crc32`) of the string made of the first 25 bids and asks of the book, each level
//! written `price:size` with the venue's own strings, bids and asks alternating (`bid1:ask1:
//! bid2:ask2:...`), the side that runs out first simply left out from there on; the value is
//! compared as a signed 32-bit integer.
//!
//! A book keeps that string ([`Input`]) from one message to the next rather than writing it
//! afresh each time: each level's text is stored once as `:price:size` ([`Text`]), and when a
//! message changes the book at rank `r` of a side (a new size, an insert or a delete; 0 is the
//! best), only the pairs from rank `r` down are written again, level by level with one or two
//! fixed-size copies each, where they were (nothing is zeroed). A change below the 25th level
//! writes nothing. The string is then hashed in one `crc32fast` pass (its PCLMULQDQ folding
//! path on x86-64: about 700 bytes for 25 levels a side). The stored string starts with the
//! first level's colon, which the hash skips, so that every level is written the same way.
//! [`checksum`] is the definition written out plainly, for the tests.

use super::decode::MAX_TEXT;

/// The levels a side the checksum covers.
pub const LEVELS: usize = 25;

/// The longest checksum input: 50 levels of two strings of at most [`MAX_TEXT`] bytes and two
/// colons.
pub const MAX_INPUT: usize = 2 * LEVELS * (2 * MAX_TEXT + 2);

/// The bytes a level's text takes in a [`Text`]: `:price:size` at most, rounded up so that a
/// ladder level (its key, two lengths and this) is 80 bytes.
pub const SLOT: usize = 70;

/// The bytes copied for a level whose text is short (most are: `:3366.1:7`).
const SHORT: usize = 32;

const _: () = assert!(SLOT >= 2 * MAX_TEXT + 2 && SHORT <= SLOT);

/// One level's text as the checksum writes it: `:price:size`, the venue's strings.
#[derive(Clone, Copy, Debug)]
pub struct Text {
    /// The length of `:price:size`.
    len: u8,
    price_len: u8,
    bytes: [u8; SLOT],
}

impl Text {
    /// The text of a level; strings longer than [`MAX_TEXT`] bytes are cut there (the decoder
    /// refuses such strings, so this never happens to the venue's levels).
    #[inline]
    pub fn new(price: &[u8], size: &[u8]) -> Text {
        let price = &price[..price.len().min(MAX_TEXT)];
        let size = &size[..size.len().min(MAX_TEXT)];
        let mut bytes = [b':'; SLOT];
        bytes[1..1 + price.len()].copy_from_slice(price);
        let size_at = 2 + price.len();
        bytes[size_at..size_at + size.len()].copy_from_slice(size);
        Text {
            len: (size_at + size.len()) as u8,
            price_len: price.len() as u8,
            bytes,
        }
    }

    pub fn price(&self) -> &[u8] {
        &self.bytes[1..1 + usize::from(self.price_len)]
    }

    pub fn size(&self) -> &[u8] {
        &self.bytes[2 + usize::from(self.price_len)..usize::from(self.len)]
    }
}

/// The checksum input of one book, kept up to date by its changes (see the module docs).
///
/// **Invariant:** after [`Input::refresh`], `bytes[..len]` is `:` followed by the documented
/// string of the levels refreshed from, and `pairs[r]` is where the pair of rank `r` (its
/// bid, then its ask, each with its leading colon) starts, `pairs[LEVELS]` the end.
#[derive(Clone, Debug)]
pub struct Input {
    bytes: [u8; MAX_INPUT + SLOT],
    pairs: [u16; LEVELS + 1],
    /// The first rank to write again; [`LEVELS`] when the string is up to date.
    dirty: usize,
}

impl Default for Input {
    fn default() -> Self {
        Input {
            bytes: [0; MAX_INPUT + SLOT],
            pairs: [0; LEVELS + 1],
            dirty: LEVELS,
        }
    }
}

impl Input {
    /// The book was emptied: the string is empty.
    pub fn clear(&mut self) {
        self.pairs = [0; LEVELS + 1];
        self.dirty = LEVELS;
    }

    /// The level at `rank` of a side (0 is the best) changed, or one was inserted or removed
    /// there: that pair and those below it are to be written again.
    #[inline]
    pub fn changed(&mut self, rank: usize) {
        self.dirty = self.dirty.min(rank);
    }

    /// Writes again the pairs from the first changed rank: `bid(r)` and `ask(r)` are the levels
    /// of rank `r` of each side (best first), `None` past a side's last.
    #[inline]
    pub fn refresh<'t>(
        &mut self,
        bid: impl Fn(usize) -> Option<&'t Text>,
        ask: impl Fn(usize) -> Option<&'t Text>,
    ) {
        let from = self.dirty;
        if from >= LEVELS {
            return;
        }
        self.dirty = LEVELS;
        let mut at = usize::from(self.pairs[from]);
        let mut rank = from;
        while rank < LEVELS {
            self.pairs[rank] = at as u16;
            let (bid, ask) = (bid(rank), ask(rank));
            if bid.is_none() && ask.is_none() {
                break;
            }
            for text in [bid, ask].into_iter().flatten() {
                at = self.put(at, text);
            }
            rank += 1;
        }
        for start in &mut self.pairs[rank..] {
            *start = at as u16;
        }
    }

    /// Writes `text` at `at`, returns where it ends. Copies a fixed 32 bytes (or the whole
    /// slot) rather than the text's length: what lies beyond it is written over next or is
    /// past the end of the string.
    #[inline(always)]
    fn put(&mut self, at: usize, text: &Text) -> usize {
        let len = usize::from(text.len);
        if len <= SHORT {
            self.bytes[at..at + SHORT].copy_from_slice(&text.bytes[..SHORT]);
        } else {
            self.bytes[at..at + SLOT].copy_from_slice(&text.bytes);
        }
        at + len
    }

    /// The string, as the documentation defines it (without the stored leading colon).
    pub fn text(&self) -> &[u8] {
        debug_assert_eq!(self.dirty, LEVELS, "the input is up to date");
        let end = usize::from(self.pairs[LEVELS]);
        &self.bytes[end.min(1)..end]
    }

    /// The checksum of the string.
    #[inline]
    pub fn checksum(&self) -> i32 {
        crc32fast::hash(self.text()) as i32
    }
}

/// The checksum over `bids` and `asks`, each best first as `(price, size)` strings; only the
/// first [`LEVELS`] of each count. The definition written out plainly, the string built afresh:
/// books keep an [`Input`] instead.
pub fn checksum<'t>(
    bids: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
    asks: impl IntoIterator<Item = (&'t [u8], &'t [u8])>,
) -> i32 {
    let mut text = Vec::with_capacity(MAX_INPUT);
    let mut bids = bids.into_iter().take(LEVELS);
    let mut asks = asks.into_iter().take(LEVELS);
    loop {
        let bid = bids.next();
        let ask = asks.next();
        if bid.is_none() && ask.is_none() {
            break;
        }
        for (price, size) in bid.into_iter().chain(ask) {
            for part in [price, size] {
                if !text.is_empty() {
                    text.push(b':');
                }
                text.extend_from_slice(&part[..part.len().min(MAX_TEXT)]);
            }
        }
    }
    crc32fast::hash(&text) as i32
}
