//! Price-level order books: one [`OrderBook`] per instrument, two sides of `(price, qty)` levels.
//!
//! # Why a sorted `Vec` with the best price at the end
//!
//! Each side is one `Vec` sorted from the worst price to the best, so the best level is the last
//! element: reading it is one load, and inserting or removing a level shifts only the levels
//! better than it, which for a book's usual traffic are few. A lookup is a binary search.
//!
//! `benches/book.rs` chose this by replaying every level change of the real capture
//! (`../shared/data/binance-futures/btcusdt_20240808.gz`, 443,521 changes) into this book, a
//! `BTreeMap` book and this layout with a linear scan of the top 32 levels before the binary
//! search. The capture did not bear out the expectation that changes cluster at the top: in the
//! book its diffs build (about 5,000 levels a side by the end), half the changes land 226 or more
//! levels below the best and only 30% within the top 100, so the scan lost (it mostly scans in
//! vain), and the `Vec` still edged out the `BTreeMap`, which also allocates on node splits. The
//! numbers and the machine are in the bench's header.
//!
//! Prices are stored as a sort key instead of as prices: a bid's key is its raw price and an
//! ask's key is the bitwise complement of its raw price (`!x == -x - 1`, an order-reversing
//! bijection on `i64` that cannot overflow), so both sides are sorted ascending by key with the
//! best level last and share one search.
//!
//! **Invariant:** each side holds strictly increasing keys and only positive quantities.
//! **Invariant:** nothing here allocates once the capacity given to
//! [`OrderBook::with_capacity`] is reserved, unless a side outgrows it (the `Vec` then grows once,
//! as any `Vec` does).

pub mod mbo;

use crate::event::{Quote, Side};
use crate::fixed::Fixed;
use std::iter::{FusedIterator, Rev, Take};
use std::slice;

/// One side of a book. Unlike [`event::Side`](crate::event::Side) it has no `None`: a level is
/// always on one side or the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BookSide {
    Bid,
    Ask,
}

impl From<BookSide> for Side {
    fn from(side: BookSide) -> Side {
        match side {
            BookSide::Bid => Side::Bid,
            BookSide::Ask => Side::Ask,
        }
    }
}

/// What [`OrderBook::set`] did to the level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelChange {
    /// A new level was inserted.
    Added,
    /// An existing level took a new quantity.
    Updated { previous_qty: Fixed },
    /// The level already held this quantity.
    Unchanged,
    /// The level was removed.
    Removed { previous_qty: Fixed },
    /// A removal named a level the book does not hold. Normal on Binance: a diff may remove a
    /// level that was never in our (1,000-level) snapshot.
    Absent,
}

/// One stored level: the side's sort key (see the module docs) and the quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Level {
    key: i64,
    qty: Fixed,
}

#[inline]
fn key_of(side: BookSide, price: Fixed) -> i64 {
    match side {
        BookSide::Bid => price.0,
        BookSide::Ask => !price.0,
    }
}

#[inline]
fn price_of(side: BookSide, key: i64) -> Fixed {
    // The complement is its own inverse, so the same mapping turns a key back into a price.
    Fixed(key_of(side, Fixed(key)))
}

/// Finds `key` in `levels` (sorted ascending): `Ok(index)` if present, `Err(index)` where it
/// would be inserted.
#[inline]
fn search(levels: &[Level], key: i64) -> Result<usize, usize> {
    levels.binary_search_by_key(&key, |level| level.key)
}

/// A price-level order book for one instrument.
#[derive(Clone, Debug, Default)]
pub struct OrderBook {
    /// Ascending by key, best last.
    bids: Vec<Level>,
    /// Ascending by key (descending by price), best last.
    asks: Vec<Level>,
}

impl OrderBook {
    /// An empty book with room for `levels_per_side` levels on each side, so that keeping it up
    /// to date does not allocate. Binance snapshots hold up to 1,000 levels and diffs add levels
    /// beyond them: twice that is a reasonable reservation.
    pub fn with_capacity(levels_per_side: usize) -> OrderBook {
        OrderBook {
            bids: Vec::with_capacity(levels_per_side),
            asks: Vec::with_capacity(levels_per_side),
        }
    }

    #[inline]
    fn side(&self, side: BookSide) -> &Vec<Level> {
        match side {
            BookSide::Bid => &self.bids,
            BookSide::Ask => &self.asks,
        }
    }

    #[inline]
    fn side_mut(&mut self, side: BookSide) -> &mut Vec<Level> {
        match side {
            BookSide::Bid => &mut self.bids,
            BookSide::Ask => &mut self.asks,
        }
    }

    /// Sets the level at `price` to `qty`. A quantity of zero removes the level; so does a
    /// negative one, which only a malformed message can carry and which a book cannot hold.
    #[inline]
    pub fn set(&mut self, side: BookSide, price: Fixed, qty: Fixed) -> LevelChange {
        let key = key_of(side, price);
        let levels = self.side_mut(side);
        match search(levels, key) {
            Ok(index) => {
                let Some(level) = levels.get_mut(index) else {
                    return LevelChange::Absent;
                };
                let previous_qty = level.qty;
                if qty.0 <= 0 {
                    levels.remove(index);
                    LevelChange::Removed { previous_qty }
                } else if previous_qty == qty {
                    LevelChange::Unchanged
                } else {
                    level.qty = qty;
                    LevelChange::Updated { previous_qty }
                }
            }
            Err(index) => {
                if qty.0 <= 0 {
                    LevelChange::Absent
                } else {
                    levels.insert(index, Level { key, qty });
                    LevelChange::Added
                }
            }
        }
    }

    /// Replaces every level of `side` with `levels`, in any order; levels with a quantity of zero
    /// or less are skipped. For snapshots: sorting once is cheaper than inserting a 1,000-level
    /// snapshot best first, which would put every level at the bottom and shift all the others.
    /// A price listed twice (a malformed snapshot) keeps one of its quantities.
    pub fn load_side(&mut self, side: BookSide, levels: impl IntoIterator<Item = (Fixed, Fixed)>) {
        let stored = self.side_mut(side);
        stored.clear();
        stored.extend(
            levels
                .into_iter()
                .filter(|&(_, qty)| qty.0 > 0)
                .map(|(price, qty)| Level {
                    key: key_of(side, price),
                    qty,
                }),
        );
        stored.sort_unstable_by_key(|level| level.key);
        stored.dedup_by_key(|level| level.key);
    }

    /// The quantity at `price`, if the book holds that level.
    pub fn get(&self, side: BookSide, price: Fixed) -> Option<Fixed> {
        let levels = self.side(side);
        let index = search(levels, key_of(side, price)).ok()?;
        levels.get(index).map(|level| level.qty)
    }

    /// The best level of `side`: the highest bid or the lowest ask.
    #[inline]
    pub fn best(&self, side: BookSide) -> Option<(Fixed, Fixed)> {
        self.side(side)
            .last()
            .map(|level| (price_of(side, level.key), level.qty))
    }

    /// The highest bid, as `(price, qty)`.
    #[inline]
    pub fn best_bid(&self) -> Option<(Fixed, Fixed)> {
        self.best(BookSide::Bid)
    }

    /// The lowest ask, as `(price, qty)`.
    #[inline]
    pub fn best_ask(&self) -> Option<(Fixed, Fixed)> {
        self.best(BookSide::Ask)
    }

    /// Every level of `side`, best first.
    pub fn levels(&self, side: BookSide) -> Levels<'_> {
        Levels {
            inner: self.side(side).iter().rev(),
            side,
        }
    }

    /// The best `depth` levels of `side`, best first.
    pub fn top_levels(&self, side: BookSide, depth: usize) -> Take<Levels<'_>> {
        self.levels(side).take(depth)
    }

    /// How many levels `side` holds.
    #[inline]
    pub fn len(&self, side: BookSide) -> usize {
        self.side(side).len()
    }

    /// Whether both sides are empty.
    pub fn is_empty(&self) -> bool {
        self.bids.is_empty() && self.asks.is_empty()
    }

    /// Removes every level and keeps the capacity.
    pub fn clear(&mut self) {
        self.bids.clear();
        self.asks.clear();
    }

    /// Whether the best bid is at or above the best ask. One venue's book can be neither crossed
    /// nor locked (its matching engine would have traded), so a locked book counts as crossed:
    /// either means the book is wrong.
    #[inline]
    pub fn is_crossed(&self) -> bool {
        match (self.best_bid(), self.best_ask()) {
            (Some((bid_px, _)), Some((ask_px, _))) => bid_px >= ask_px,
            _ => false,
        }
    }

    /// The top of the book; an empty side has price and size 0, as [`Quote`] says.
    #[inline]
    pub fn top(&self) -> Quote {
        let (bid_px, bid_sz) = self.best_bid().unwrap_or_default();
        let (ask_px, ask_sz) = self.best_ask().unwrap_or_default();
        Quote {
            bid_px,
            bid_sz,
            ask_px,
            ask_sz,
        }
    }
}

/// The levels of one side, best first, as `(price, qty)`. Made by [`OrderBook::levels`].
#[derive(Clone, Debug)]
pub struct Levels<'a> {
    inner: Rev<slice::Iter<'a, Level>>,
    side: BookSide,
}

impl Iterator for Levels<'_> {
    type Item = (Fixed, Fixed);

    #[inline]
    fn next(&mut self) -> Option<(Fixed, Fixed)> {
        self.inner
            .next()
            .map(|level| (price_of(self.side, level.key), level.qty))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for Levels<'_> {}
impl FusedIterator for Levels<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn px(text: &str) -> Fixed {
        Fixed::parse_str(text).expect("test decimal")
    }

    #[test]
    fn ask_keys_reverse_the_order_without_overflow() {
        for (lower, higher) in [
            (i64::MIN, i64::MIN + 1),
            (-1, 0),
            (0, 1),
            (i64::MAX - 1, i64::MAX),
        ] {
            assert!(key_of(BookSide::Ask, Fixed(lower)) > key_of(BookSide::Ask, Fixed(higher)));
            assert_eq!(
                price_of(BookSide::Ask, key_of(BookSide::Ask, Fixed(lower))),
                Fixed(lower)
            );
        }
    }

    #[test]
    fn set_reports_what_changed() {
        let mut book = OrderBook::with_capacity(4);
        assert_eq!(
            book.set(BookSide::Bid, px("10"), px("1")),
            LevelChange::Added
        );
        assert_eq!(
            book.set(BookSide::Bid, px("10"), px("2")),
            LevelChange::Updated {
                previous_qty: px("1")
            }
        );
        assert_eq!(
            book.set(BookSide::Bid, px("10"), px("2")),
            LevelChange::Unchanged
        );
        assert_eq!(
            book.set(BookSide::Bid, px("11"), px("0")),
            LevelChange::Absent
        );
        assert_eq!(
            book.set(BookSide::Bid, px("10"), px("0")),
            LevelChange::Removed {
                previous_qty: px("2")
            }
        );
        assert!(book.is_empty());
    }

    #[test]
    fn deep_levels_are_found() {
        let mut book = OrderBook::with_capacity(256);
        for tick in 0..200i64 {
            book.set(BookSide::Ask, Fixed(1_000 + tick), Fixed(tick + 1));
            book.set(BookSide::Bid, Fixed(999 - tick), Fixed(tick + 1));
        }
        assert_eq!(book.get(BookSide::Ask, Fixed(1_150)), Some(Fixed(151)));
        assert_eq!(book.get(BookSide::Bid, Fixed(849)), Some(Fixed(151)));
        assert_eq!(book.get(BookSide::Bid, Fixed(1_000)), None);
        assert_eq!(book.best_ask(), Some((Fixed(1_000), Fixed(1))));
        assert_eq!(book.best_bid(), Some((Fixed(999), Fixed(1))));
        let top: Vec<_> = book.top_levels(BookSide::Ask, 3).collect();
        assert_eq!(
            top,
            [
                (Fixed(1_000), Fixed(1)),
                (Fixed(1_001), Fixed(2)),
                (Fixed(1_002), Fixed(3))
            ]
        );
    }

    #[test]
    fn crossed_and_locked_books_are_flagged() {
        let mut book = OrderBook::with_capacity(4);
        book.set(BookSide::Bid, px("10"), px("1"));
        assert!(!book.is_crossed());
        book.set(BookSide::Ask, px("11"), px("1"));
        assert!(!book.is_crossed());
        book.set(BookSide::Bid, px("11"), px("1"));
        assert!(book.is_crossed());
        assert_eq!(
            book.top(),
            Quote {
                bid_px: px("11"),
                bid_sz: px("1"),
                ask_px: px("11"),
                ask_sz: px("1")
            }
        );
    }
}
