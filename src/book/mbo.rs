//! A market-by-order (L3) book: every resting order by id, aggregated into price levels, built
//! from DBN MBO records (Databento's `A`dd, `C`ancel, `M`odify, `T`rade, `F`ill, clea`R`).
//!
//! Databento's book-building rules: an add rests an order; a cancel takes `size` off an order
//! (all of it removes the order); a modify moves an order to a new price and size (an unknown
//! order id is taken as an add); trades and fills leave the book alone (the venue sends the
//! cancel or modify that follows); a clear empties the book.
//!
//! The book reports every level it changes through a callback as a [`LevelUpdate`]: the
//! level's new total size and order count, size 0 when the level is gone.

use super::BookSide;
use std::collections::{BTreeMap, HashMap};

/// A price level's new state. `size` 0 means the level is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelUpdate {
    pub side: BookSide,
    /// DBN price: 1e-9 units, as tickwire's `Fixed`.
    pub price: i64,
    /// Total size resting at the level (whole units, as DBN sizes).
    pub size: u64,
    /// Orders resting at the level.
    pub count: u32,
}

/// Why a record could not be applied. The book is unchanged when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MboError {
    #[error("unknown MBO action {0:#04x}")]
    UnknownAction(u8),
    #[error("order {0}: side is neither bid nor ask")]
    NoSide(u64),
    #[error("add of order {0}, which is already resting")]
    DuplicateOrder(u64),
    #[error("cancel of order {0}, which is not resting")]
    UnknownOrder(u64),
    #[error("cancel of {cancel} from order {order_id}, which has only {resting} resting")]
    CancelTooLarge {
        order_id: u64,
        cancel: u32,
        resting: u32,
    },
    #[error("order {0} with size 0")]
    ZeroSize(u64),
}

/// What an MBO record does to the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MboAction {
    Add,
    Cancel,
    Modify,
    Clear,
    Trade,
    Fill,
    None,
}

impl MboAction {
    /// The action of a DBN `action` byte.
    pub fn from_byte(byte: u8) -> Option<MboAction> {
        Some(match byte {
            b'A' => MboAction::Add,
            b'C' => MboAction::Cancel,
            b'M' => MboAction::Modify,
            b'R' => MboAction::Clear,
            b'T' => MboAction::Trade,
            b'F' => MboAction::Fill,
            b'N' => MboAction::None,
            _ => return None,
        })
    }
}

/// The side of a DBN `side` byte (`B` bid, `A` ask), `None` for `N`.
pub fn book_side(byte: u8) -> Option<BookSide> {
    match byte {
        b'B' => Some(BookSide::Bid),
        b'A' => Some(BookSide::Ask),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    side: BookSide,
    price: i64,
    size: u32,
}

/// One instrument's L3 book.
#[derive(Default)]
pub struct MboBook {
    orders: HashMap<u64, Order>,
    /// Per side: price to (total size, order count).
    bids: BTreeMap<i64, (u64, u32)>,
    asks: BTreeMap<i64, (u64, u32)>,
}

impl MboBook {
    pub fn new() -> MboBook {
        MboBook::default()
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

    /// A side's levels, best first: price, total size, order count (not for the hot path).
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

    /// Resting orders.
    pub fn orders(&self) -> usize {
        self.orders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }
}
