//! The plain L3 book that `tickwire::book::mbo::MboBook` is checked against: a `HashMap` of
//! orders and a `BTreeMap` of levels per side, written to be obviously right rather than fast.
//! It is the book's first implementation, kept verbatim in behaviour and independent of the
//! fast one (it shares only the public types). `tests/mbo_book.rs` and `benches/mbo_book.rs`
//! include it with `#[path = "support/mbo_oracle.rs"] mod mbo_oracle;`.

use std::collections::{BTreeMap, HashMap};
use tickwire::book::mbo::{book_side, LevelUpdate, MboAction, MboError};
use tickwire::book::BookSide;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    side: BookSide,
    price: i64,
    size: u32,
}

/// One instrument's L3 book, the plain way.
#[derive(Default)]
pub struct PlainMboBook {
    orders: HashMap<u64, Order>,
    /// Per side: price to (total size, order count).
    bids: BTreeMap<i64, (u64, u32)>,
    asks: BTreeMap<i64, (u64, u32)>,
}

#[allow(
    dead_code,
    reason = "each including binary uses a different part of the API"
)]
impl PlainMboBook {
    pub fn new() -> PlainMboBook {
        PlainMboBook::default()
    }

    /// Applies one MBO record; every level it changes is reported through `out`.
    pub fn apply(
        &mut self,
        action: u8,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
        out: &mut impl FnMut(LevelUpdate),
    ) -> Result<(), MboError> {
        match MboAction::from_byte(action).ok_or(MboError::UnknownAction(action))? {
            MboAction::Add => {
                let side = book_side(side).ok_or(MboError::NoSide(order_id))?;
                if size == 0 {
                    return Err(MboError::ZeroSize(order_id));
                }
                if self.orders.contains_key(&order_id) {
                    return Err(MboError::DuplicateOrder(order_id));
                }
                self.orders.insert(order_id, Order { side, price, size });
                out(self.change(side, price, i64::from(size), 1));
            }
            MboAction::Cancel => {
                let order = *self
                    .orders
                    .get(&order_id)
                    .ok_or(MboError::UnknownOrder(order_id))?;
                if size > order.size {
                    return Err(MboError::CancelTooLarge {
                        order_id,
                        cancel: size,
                        resting: order.size,
                    });
                }
                let left = order.size - size;
                let gone = i32::from(left == 0);
                if left == 0 {
                    self.orders.remove(&order_id);
                } else if let Some(resting) = self.orders.get_mut(&order_id) {
                    resting.size = left;
                }
                out(self.change(order.side, order.price, -i64::from(size), -gone));
            }
            MboAction::Modify => {
                let Some(order) = self.orders.get(&order_id).copied() else {
                    return self.apply(b'A', side, order_id, price, size, out);
                };
                if size == 0 {
                    return Err(MboError::ZeroSize(order_id));
                }
                if order.price == price {
                    if let Some(resting) = self.orders.get_mut(&order_id) {
                        resting.size = size;
                    }
                    out(self.change(
                        order.side,
                        price,
                        i64::from(size) - i64::from(order.size),
                        0,
                    ));
                } else {
                    if let Some(resting) = self.orders.get_mut(&order_id) {
                        resting.price = price;
                        resting.size = size;
                    }
                    out(self.change(order.side, order.price, -i64::from(order.size), -1));
                    out(self.change(order.side, price, i64::from(size), 1));
                }
            }
            MboAction::Clear => self.clear(out),
            MboAction::Trade | MboAction::Fill | MboAction::None => {}
        }
        Ok(())
    }

    /// A top-of-book add (DBN `F_TOB`): the side's orders and levels are replaced by one level
    /// of `size` at `price` with no orders, or by nothing at `UNDEF_PRICE` (`i64::MAX`) or size
    /// 0. The removed levels are reported best first (not one at the new price), then the new.
    pub fn apply_top_of_book(
        &mut self,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
        out: &mut impl FnMut(LevelUpdate),
    ) -> Result<(), MboError> {
        let side = book_side(side).ok_or(MboError::NoSide(order_id))?;
        self.orders.retain(|_, order| order.side != side);
        let levels = match side {
            BookSide::Bid => &mut self.bids,
            BookSide::Ask => &mut self.asks,
        };
        let old = std::mem::take(levels);
        let best_first: Vec<i64> = match side {
            BookSide::Bid => old.keys().rev().copied().collect(),
            BookSide::Ask => old.keys().copied().collect(),
        };
        let new_price = (price != i64::MAX && size > 0).then_some(price);
        for old_price in best_first {
            if Some(old_price) != new_price {
                out(LevelUpdate {
                    side,
                    price: old_price,
                    size: 0,
                    count: 0,
                });
            }
        }
        if let Some(price) = new_price {
            levels.insert(price, (u64::from(size), 0));
            out(LevelUpdate {
                side,
                price,
                size: u64::from(size),
                count: 0,
            });
        }
        Ok(())
    }

    /// Empties the book, reporting every level's removal (best first, bids then asks).
    pub fn clear(&mut self, out: &mut impl FnMut(LevelUpdate)) {
        for (side, levels) in [
            (BookSide::Bid, std::mem::take(&mut self.bids)),
            (BookSide::Ask, std::mem::take(&mut self.asks)),
        ] {
            let prices: Vec<i64> = match side {
                BookSide::Bid => levels.keys().rev().copied().collect(),
                BookSide::Ask => levels.keys().copied().collect(),
            };
            for price in prices {
                out(LevelUpdate {
                    side,
                    price,
                    size: 0,
                    count: 0,
                });
            }
        }
        self.orders.clear();
    }

    fn change(&mut self, side: BookSide, price: i64, size: i64, count: i32) -> LevelUpdate {
        let levels = match side {
            BookSide::Bid => &mut self.bids,
            BookSide::Ask => &mut self.asks,
        };
        let level = levels.entry(price).or_insert((0, 0));
        level.0 = level.0.wrapping_add_signed(size);
        level.1 = level.1.wrapping_add_signed(count);
        let (size, count) = *level;
        if size == 0 || count == 0 {
            levels.remove(&price);
            return LevelUpdate {
                side,
                price,
                size: 0,
                count: 0,
            };
        }
        LevelUpdate {
            side,
            price,
            size,
            count,
        }
    }

    /// The best level of a side: price, total size, order count.
    pub fn best(&self, side: BookSide) -> Option<(i64, u64, u32)> {
        match side {
            BookSide::Bid => self.bids.iter().next_back(),
            BookSide::Ask => self.asks.iter().next(),
        }
        .map(|(price, (size, count))| (*price, *size, *count))
    }

    /// A level's total size and order count.
    pub fn level(&self, side: BookSide, price: i64) -> Option<(u64, u32)> {
        match side {
            BookSide::Bid => self.bids.get(&price),
            BookSide::Ask => self.asks.get(&price),
        }
        .copied()
    }

    /// A side's levels, best first: price, total size, order count.
    pub fn levels(&self, side: BookSide) -> Vec<(i64, u64, u32)> {
        let flat = |(price, (size, count)): (&i64, &(u64, u32))| (*price, *size, *count);
        match side {
            BookSide::Bid => self.bids.iter().rev().map(flat).collect(),
            BookSide::Ask => self.asks.iter().map(flat).collect(),
        }
    }

    /// A resting order: side, price, size.
    pub fn order(&self, order_id: u64) -> Option<(BookSide, i64, u32)> {
        self.orders
            .get(&order_id)
            .map(|order| (order.side, order.price, order.size))
    }

    /// Every resting order id (in no particular order).
    pub fn order_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.orders.keys().copied()
    }

    /// Resting orders.
    pub fn orders(&self) -> usize {
        self.orders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }
}
