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
//!
//! # What a record does, exactly
//!
//! - `A`dd: the side must be `B` or `A` ([`MboError::NoSide`]), the size non-zero
//!   ([`MboError::ZeroSize`]), the id not resting ([`MboError::DuplicateOrder`]) and the book
//!   below its order limit ([`MboError::TooManyOrders`]), checked in that order. Reports the
//!   order's level.
//! - `C`ancel: finds the order by id alone (the record's side and price are not consulted;
//!   [`MboError::UnknownOrder`]) and takes `size` off it ([`MboError::CancelTooLarge`] if it has
//!   less); a cancel of the whole size removes the order. Reports the order's level, even when
//!   `size` is 0 and nothing changed.
//! - `M`odify: an unknown id is an add (with an add's errors). A resting order keeps its side
//!   (the record's side is not consulted) and takes the new size, which must be non-zero
//!   ([`MboError::ZeroSize`]). At the same price it reports that level; at a new price it reports
//!   the old level, then the new one.
//! - clea`R`: empties the book, reporting every level's removal, best first, bids then asks.
//! - `T`rade, `F`ill, `N`one: nothing, and `Ok`.
//!
//! # Queue priority
//!
//! The book keeps no per-level queues: the API exposes levels and orders, not queue positions,
//! and a level's aggregate is the same whatever order its orders are in. Databento's own book
//! example keeps priority on a same-price modify that does not increase the size and sends the
//! order to the back of its level on a size increase or a price change; a queue added here later
//! should do the same.
//!
//! # Where this differs from Databento's example book
//!
//! Databento's limit-order-book example (docs, "Limit order book construction") differs in
//! corner cases that a healthy feed does not produce; this book keeps its own rules, listed
//! above: that example finds a cancel's order at the record's side and price and ignores it if
//! absent (here: by id, and an error), asserts where this book returns an error (duplicate add,
//! cancel larger than the order), lets a modify to size 0 rest an empty order (here:
//! `ZeroSize`) and moves a modified order to the record's side (here: the order keeps its side).
//! Databento asks that the book be read only after a record flagged `F_LAST`; that is the
//! caller's concern.
//!
//! # Top-of-book publishers (`F_TOB`)
//!
//! Some venues publish only their top of book, and Databento normalizes it into MBO records of
//! its own kind. Its limit-order-book example (docs, "Limit order book construction",
//! `databento.com/docs/examples/order-book/limit-order-book`) says: "Investors Exchange and NYSE
//! National only provide top-of-book information meaning their MBO data is normalized
//! differently. Each Add message indicates the new top-of-book and replaces all levels on that
//! side. Add messages with an UNDEF_PRICE price indicate there's no depth for that side of the
//! book", and such updates "don't correspond with individual orders" when a level's orders are
//! counted. Such an add carries DBN's `F_TOB` flag (`dbn::flags::TOB`: "a top-of-book record,
//! not an individual order"). [`MboBook::apply`] takes no flags: its caller hands a record
//! flagged `F_TOB` with action `A` to [`MboBook::apply_top_of_book`] instead, which
//!
//! - removes every level of the record's side, and every order resting on that side (an order
//!   book example keeps them in its order map; here they go, so that the side is exactly what
//!   the venue now says), reporting each removed level best first, with size 0, except one at
//!   the new price;
//! - then, unless the price is `UNDEF_PRICE` or the size 0 (no depth on that side), rests one
//!   level of the record's size at its price with an order count of 0 (it stands for the
//!   venue's quote, not an order, as Databento's example counts it) and reports it.
//!
//! Applying `apply` to such a stream instead froze the book at its first add: every later add
//! repeats the order id and was refused as a duplicate (issue 24). An order later added at a
//! top-of-book level's price (a venue that mixed both) joins the level, and the level goes with
//! the last such order, as any level does when its count reaches 0.
//!
//! # Layout
//!
//! Orders live in an open-addressing table keyed by order id: linear probing over a
//! power-of-two array of 24-byte slots, multiplicative (Fibonacci) hashing with the crate's one
//! hasher (`crate::hash::hash_word`), whose high bits of `id * 2^64/φ` the table takes (Knuth,
//! TAOCP vol. 3, section 6.4), so that both dense sequential ids and the large sparse ones CME
//! assigns spread, and backward-shift deletion, so that
//! the churn of an order book (every order is added and removed) leaves no tombstones behind.
//! The table grows (doubling) when it would be more than three quarters full, and never holds
//! more than the book's order limit ([`MboBook::with_max_orders`], [`DEFAULT_MAX_ORDERS`] unless
//! set): an add beyond it is refused ([`MboError::TooManyOrders`]), so that a venue's order flow
//! cannot grow the table without bound (issue 32). At the default the table is at most 2^20 slots
//! (24 MiB). The book is then missing an order, and its owner drops it (the Databento
//! normalizer sends the strategy a gap and rebuilds the book from what follows).
//!
//! Levels are the layout of [`OrderBook`](super::OrderBook): per side one `Vec` of (key, total
//! size, order count) sorted ascending by key with the best level last, where a bid's key is its
//! price and an ask's key is the complement of its price; see `src/book/mod.rs` for why that
//! beat a `BTreeMap` on real data. A record costs one probe of the table and one binary search
//! per level it touches.
//!
//! **Invariant:** a resting order's size is never 0; a table slot of size 0 is empty.
//! **Invariant:** a level's size is the sum of its orders' sizes and its count their number; a
//! level is held exactly while its count is non-zero. The one exception is a top-of-book level
//! (see above): the venue's size, no orders, held until the side's next top-of-book add (or a
//! clear).
//! **Invariant:** every check comes before the first change: an `Err` leaves the book unchanged
//! and has reported nothing through `out`.
//! **Invariant:** no input panics: table indexes are masked, level arithmetic wraps as the plain
//! implementation's does, and no `unwrap` or indexing can fail.
//! **Invariant:** nothing allocates once the capacity given to [`MboBook::with_capacity`] is
//! reserved, unless the book outgrows it (the table or a side then grows once, by doubling);
//! [`MboBook::clear`] allocates nothing. [`MboBook::levels`] allocates, and is not for the hot
//! path.
//!
//! `tests/mbo_book.rs` checks every record of long generated streams against a plain
//! `HashMap` + `BTreeMap` book (`tests/support/mbo_oracle.rs`); `benches/mbo_book.rs` times both.

use super::BookSide;

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
    #[error("add of order {order_id}: the book already rests its limit of {limit} orders")]
    TooManyOrders { order_id: u64, limit: usize },
}

/// The most orders a book rests unless [`MboBook::with_max_orders`] says otherwise: far above
/// what a real book rests (a CME E-mini book thousands to tens of thousands of orders), and
/// small enough that the table stays at most 2^20 slots of 24 bytes.
pub const DEFAULT_MAX_ORDERS: usize = 1 << 19;

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

/// One slot of the order table. A slot with `size` 0 is empty (see the module invariants), so
/// no id, not even 0, is reserved as a marker.
#[derive(Clone, Copy, Debug)]
struct Slot {
    order_id: u64,
    price: i64,
    size: u32,
    side: BookSide,
}

const EMPTY: Slot = Slot {
    order_id: 0,
    price: 0,
    size: 0,
    side: BookSide::Bid,
};

/// The fewest slots a non-empty table holds.
const MIN_SLOTS: usize = 16;

/// Resting orders by id: open addressing, linear probing, backward-shift deletion.
#[derive(Clone, Debug, Default)]
struct OrderTable {
    /// Empty, or a power-of-two number of slots.
    slots: Vec<Slot>,
    /// Occupied slots.
    len: usize,
    /// `64 - log2(slots.len())`: a hash shifted right by it is a slot index.
    shift: u32,
}

impl OrderTable {
    /// A table that holds `orders` orders without growing, at most half full.
    fn with_capacity(orders: usize) -> OrderTable {
        let mut table = OrderTable::default();
        if orders > 0 {
            table.resize(orders.saturating_mul(2).max(MIN_SLOTS).next_power_of_two());
        }
        table
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The slot where a probe for `order_id` starts. Only called on a non-empty table, whose
    /// `shift` is below 64.
    #[inline]
    fn home(&self, order_id: u64) -> usize {
        (crate::hash::hash_word(order_id) >> (self.shift & 63)) as usize & self.mask()
    }

    /// `Ok(slot)` holding `order_id`, or `Err(slot)`: the empty slot where it would go (`None`
    /// when the table has no slots at all).
    #[inline]
    fn find(&self, order_id: u64) -> Result<usize, Option<usize>> {
        if self.slots.is_empty() {
            return Err(None);
        }
        let mask = self.mask();
        let mut index = self.home(order_id);
        // Ends: the table is never full (`needs_room` keeps a quarter of it empty).
        loop {
            let Some(slot) = self.slots.get(index) else {
                return Err(None);
            };
            if slot.size == 0 {
                return Err(Some(index));
            }
            if slot.order_id == order_id {
                return Ok(index);
            }
            index = (index + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }

    #[inline]
    fn get_mut(&mut self, index: usize) -> Option<&mut Slot> {
        self.slots.get_mut(index)
    }

    /// Whether one more order would take the table past three quarters full (or it has no slots).
    #[inline]
    fn needs_room(&self) -> bool {
        (self.len + 1) * 4 > self.slots.len() * 3
    }

    /// Puts `order_id` in the empty slot `find` returned for it, first growing the table if it
    /// needs room (the slot is then looked up again).
    #[inline]
    fn insert(&mut self, vacant: Option<usize>, slot: Slot) {
        let mut vacant = vacant;
        if self.needs_room() {
            self.resize((self.slots.len() * 2).max(MIN_SLOTS));
            vacant = self.find(slot.order_id).err().flatten();
        }
        if let Some(place) = vacant.and_then(|index| self.slots.get_mut(index)) {
            *place = slot;
            self.len += 1;
        }
    }

    /// Empties slot `index`, moving later slots of its probe run back so that every order
    /// stays reachable from its home slot without tombstones (Knuth, TAOCP vol. 3, 6.4,
    /// Algorithm R).
    #[inline]
    fn remove(&mut self, index: usize) {
        let mask = self.mask();
        let mut hole = index;
        let mut next = (hole + 1) & mask;
        // The run ends at the first empty slot.
        while let Some(&slot) = self.slots.get(next).filter(|slot| slot.size != 0) {
            // The slot can fill the hole unless its home lies cyclically in (hole, next]:
            // its probe distance must be at least the hole's distance back from `next`.
            let probe_distance = next.wrapping_sub(self.home(slot.order_id)) & mask;
            if probe_distance >= (next.wrapping_sub(hole) & mask) {
                if let Some(place) = self.slots.get_mut(hole) {
                    *place = slot;
                }
                hole = next;
            }
            next = (next + 1) & mask;
        }
        if let Some(place) = self.slots.get_mut(hole) {
            *place = EMPTY;
            self.len -= 1;
        }
    }

    /// Moves every order into a table of `slots` slots (a power of two, at least `MIN_SLOTS`).
    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; slots]);
        self.shift = 64 - slots.trailing_zeros();
        self.len = 0;
        for slot in old.into_iter().filter(|slot| slot.size != 0) {
            if let Err(vacant) = self.find(slot.order_id) {
                if let Some(place) = vacant.and_then(|index| self.slots.get_mut(index)) {
                    *place = slot;
                    self.len += 1;
                }
            }
        }
    }

    /// Removes every order resting on `side`, keeping the others reachable: a walk over the
    /// slots that removes with `remove` and looks at the same slot again, since the backward
    /// shift may have moved a later order into it. An order the shift moves comes from a later
    /// slot, or, where a probe run wraps round the end, from a slot already walked, which holds
    /// no order of `side` any more; so none is missed.
    fn remove_side(&mut self, side: BookSide) {
        let mut index = 0;
        while let Some(slot) = self.slots.get(index) {
            if slot.size != 0 && slot.side == side {
                self.remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// Empties the table and keeps its slots.
    fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(EMPTY);
            self.len = 0;
        }
    }
}

/// One price level: the side's sort key (see the module docs), total size, order count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Level {
    key: i64,
    size: u64,
    count: u32,
}

#[inline]
fn key_of(side: BookSide, price: i64) -> i64 {
    match side {
        BookSide::Bid => price,
        BookSide::Ask => !price,
    }
}

/// The complement is its own inverse, so the same mapping turns a key back into a price.
#[inline]
fn price_of(side: BookSide, key: i64) -> i64 {
    key_of(side, key)
}

/// One instrument's L3 book.
#[derive(Clone, Debug)]
pub struct MboBook {
    orders: OrderTable,
    /// Ascending by key, best last.
    bids: Vec<Level>,
    /// Ascending by key (descending by price), best last.
    asks: Vec<Level>,
    /// The most orders the book rests; an add beyond is refused.
    max_orders: usize,
}

impl Default for MboBook {
    fn default() -> MboBook {
        MboBook {
            orders: OrderTable::default(),
            bids: Vec::new(),
            asks: Vec::new(),
            max_orders: DEFAULT_MAX_ORDERS,
        }
    }
}

impl MboBook {
    /// An empty book that allocates on first use; [`MboBook::with_capacity`] is for the hot path.
    pub fn new() -> MboBook {
        MboBook::default()
    }

    /// An empty book with room for `orders` resting orders and `levels_per_side` levels on each
    /// side, so that keeping it up to date does not allocate until it holds more. A CME E-mini
    /// book rests thousands to tens of thousands of orders over a few hundred levels a side.
    pub fn with_capacity(orders: usize, levels_per_side: usize) -> MboBook {
        MboBook {
            orders: OrderTable::with_capacity(orders.min(DEFAULT_MAX_ORDERS)),
            bids: Vec::with_capacity(levels_per_side),
            asks: Vec::with_capacity(levels_per_side),
            max_orders: DEFAULT_MAX_ORDERS,
        }
    }

    /// The book with its order limit set to `max_orders` (at least 1): an add that would rest
    /// more is refused with [`MboError::TooManyOrders`]. Orders already resting stay.
    pub fn with_max_orders(mut self, max_orders: usize) -> MboBook {
        self.max_orders = max_orders.max(1);
        self
    }

    /// The most orders the book rests.
    pub fn max_orders(&self) -> usize {
        self.max_orders
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

    /// Applies one MBO record; every level it changes is reported through `out`.
    #[inline]
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
            MboAction::Add => match self.orders.find(order_id) {
                Ok(_) => {
                    // The side and size checks come first, as they do for a new id.
                    book_side(side).ok_or(MboError::NoSide(order_id))?;
                    if size == 0 {
                        return Err(MboError::ZeroSize(order_id));
                    }
                    Err(MboError::DuplicateOrder(order_id))
                }
                Err(vacant) => self.add(vacant, side, order_id, price, size, out),
            },
            MboAction::Cancel => {
                let Ok(index) = self.orders.find(order_id) else {
                    return Err(MboError::UnknownOrder(order_id));
                };
                let Some(order) = self.orders.get_mut(index) else {
                    return Err(MboError::UnknownOrder(order_id));
                };
                let Some(left) = order.size.checked_sub(size) else {
                    return Err(MboError::CancelTooLarge {
                        order_id,
                        cancel: size,
                        resting: order.size,
                    });
                };
                let (order_side, order_price) = (order.side, order.price);
                order.size = left;
                if left == 0 {
                    self.orders.remove(index);
                }
                out(self.change(
                    order_side,
                    order_price,
                    -i64::from(size),
                    -i32::from(left == 0),
                ));
                Ok(())
            }
            MboAction::Modify => {
                let index = match self.orders.find(order_id) {
                    Ok(index) => index,
                    Err(vacant) => return self.add(vacant, side, order_id, price, size, out),
                };
                if size == 0 {
                    return Err(MboError::ZeroSize(order_id));
                }
                let Some(order) = self.orders.get_mut(index) else {
                    return Err(MboError::UnknownOrder(order_id));
                };
                let previous = *order;
                order.price = price;
                order.size = size;
                if previous.price == price {
                    out(self.change(
                        previous.side,
                        price,
                        i64::from(size) - i64::from(previous.size),
                        0,
                    ));
                } else {
                    out(self.change(previous.side, previous.price, -i64::from(previous.size), -1));
                    out(self.change(previous.side, price, i64::from(size), 1));
                }
                Ok(())
            }
            MboAction::Clear => {
                self.clear(out);
                Ok(())
            }
            MboAction::Trade | MboAction::Fill | MboAction::None => Ok(()),
        }
    }

    /// A top-of-book add (a record flagged `F_TOB` with action `A`; see the module docs): the
    /// side's levels and resting orders are replaced by one level of `size` at `price`, or by
    /// nothing when `price` is `UNDEF_PRICE` or `size` is 0. The side must be `B` or `A`
    /// ([`MboError::NoSide`], with the record's `order_id`). Allocates nothing unless the side
    /// had no room reserved for a level.
    pub fn apply_top_of_book(
        &mut self,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
        out: &mut impl FnMut(LevelUpdate),
    ) -> Result<(), MboError> {
        let side = book_side(side).ok_or(MboError::NoSide(order_id))?;
        let new_price = (price != dbn::UNDEF_PRICE && size > 0).then_some(price);
        if self.side(side).iter().any(|level| level.count > 0) {
            self.orders.remove_side(side);
        }
        let levels = self.side_mut(side);
        for level in levels.iter().rev() {
            let level_price = price_of(side, level.key);
            if Some(level_price) != new_price {
                out(LevelUpdate {
                    side,
                    price: level_price,
                    size: 0,
                    count: 0,
                });
            }
        }
        levels.clear();
        if let Some(price) = new_price {
            levels.push(Level {
                key: key_of(side, price),
                size: u64::from(size),
                count: 0,
            });
            out(LevelUpdate {
                side,
                price,
                size: u64::from(size),
                count: 0,
            });
        }
        Ok(())
    }

    /// An add of an id that is not resting; `vacant` is the empty slot the table found for it.
    #[inline]
    fn add(
        &mut self,
        vacant: Option<usize>,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
        out: &mut impl FnMut(LevelUpdate),
    ) -> Result<(), MboError> {
        let side = book_side(side).ok_or(MboError::NoSide(order_id))?;
        if size == 0 {
            return Err(MboError::ZeroSize(order_id));
        }
        if self.orders.len >= self.max_orders {
            return Err(MboError::TooManyOrders {
                order_id,
                limit: self.max_orders,
            });
        }
        self.orders.insert(
            vacant,
            Slot {
                order_id,
                price,
                size,
                side,
            },
        );
        out(self.change(side, price, i64::from(size), 1));
        Ok(())
    }

    /// Empties the book, reporting every level's removal (best first, bids then asks). Keeps the
    /// capacity and allocates nothing.
    pub fn clear(&mut self, out: &mut impl FnMut(LevelUpdate)) {
        for side in [BookSide::Bid, BookSide::Ask] {
            let levels = self.side_mut(side);
            for level in levels.iter().rev() {
                out(LevelUpdate {
                    side,
                    price: price_of(side, level.key),
                    size: 0,
                    count: 0,
                });
            }
            levels.clear();
        }
        self.orders.clear();
    }

    /// Adds `size` and `count` (either may be negative) to a level and returns its new state;
    /// a level left with no size or no orders is removed.
    #[inline]
    fn change(&mut self, side: BookSide, price: i64, size: i64, count: i32) -> LevelUpdate {
        let key = key_of(side, price);
        let levels = self.side_mut(side);
        let gone = LevelUpdate {
            side,
            price,
            size: 0,
            count: 0,
        };
        match levels.binary_search_by_key(&key, |level| level.key) {
            Ok(index) => {
                let Some(level) = levels.get_mut(index) else {
                    return gone;
                };
                level.size = level.size.wrapping_add_signed(size);
                level.count = level.count.wrapping_add_signed(count);
                if level.size == 0 || level.count == 0 {
                    levels.remove(index);
                    return gone;
                }
                LevelUpdate {
                    side,
                    price,
                    size: level.size,
                    count: level.count,
                }
            }
            Err(index) => {
                let level = Level {
                    key,
                    size: 0u64.wrapping_add_signed(size),
                    count: 0u32.wrapping_add_signed(count),
                };
                if level.size == 0 || level.count == 0 {
                    return gone;
                }
                levels.insert(index, level);
                LevelUpdate {
                    side,
                    price,
                    size: level.size,
                    count: level.count,
                }
            }
        }
    }

    /// The best level of a side: price, total size, order count.
    #[inline]
    pub fn best(&self, side: BookSide) -> Option<(i64, u64, u32)> {
        self.side(side)
            .last()
            .map(|level| (price_of(side, level.key), level.size, level.count))
    }

    /// A level's total size and order count.
    pub fn level(&self, side: BookSide, price: i64) -> Option<(u64, u32)> {
        let levels = self.side(side);
        let index = levels
            .binary_search_by_key(&key_of(side, price), |level| level.key)
            .ok()?;
        levels.get(index).map(|level| (level.size, level.count))
    }

    /// A side's levels, best first: price, total size, order count (not for the hot path).
    pub fn levels(&self, side: BookSide) -> Vec<(i64, u64, u32)> {
        self.side(side)
            .iter()
            .rev()
            .map(|level| (price_of(side, level.key), level.size, level.count))
            .collect()
    }

    /// How many levels a side holds.
    pub fn level_count(&self, side: BookSide) -> usize {
        self.side(side).len()
    }

    /// A resting order: side, price, size.
    pub fn order(&self, order_id: u64) -> Option<(BookSide, i64, u32)> {
        let index = self.orders.find(order_id).ok()?;
        self.orders
            .get(index)
            .map(|order| (order.side, order.price, order.size))
    }

    /// Resting orders.
    pub fn orders(&self) -> usize {
        self.orders.len
    }

    pub fn is_empty(&self) -> bool {
        self.orders.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids whose probes all start at the same slot of a 16-slot table, to exercise probe runs
    /// and backward-shift deletion across the end of the array.
    fn colliding_ids(table: &OrderTable, home: usize, count: usize) -> Vec<u64> {
        (0u64..)
            .filter(|&id| table.home(id) == home)
            .take(count)
            .collect()
    }

    fn slot(order_id: u64, size: u32) -> Slot {
        Slot {
            order_id,
            price: order_id as i64,
            size,
            side: BookSide::Bid,
        }
    }

    #[test]
    fn colliding_ids_stay_reachable_through_removals() {
        let mut table = OrderTable::with_capacity(8);
        assert_eq!(table.slots.len(), MIN_SLOTS);
        // Home 14 of 16: the run wraps round the end of the array.
        let mut ids = colliding_ids(&table, 14, 6);
        ids.extend(colliding_ids(&table, 0, 3));
        for &id in &ids {
            let vacant = table.find(id).expect_err("not yet inserted");
            table.insert(vacant, slot(id, 1));
        }
        assert_eq!(table.len, ids.len());
        // Remove in an order that opens holes at the start, middle and end of the run.
        for (removed, &position) in [0usize, 4, 8, 2, 6, 1, 7, 3, 5].iter().enumerate() {
            let id = ids[position];
            let index = table.find(id).expect("resting");
            table.remove(index);
            assert!(table.find(id).is_err());
            assert_eq!(table.len, ids.len() - removed - 1);
            for &other in &ids {
                let expected = table
                    .slots
                    .iter()
                    .any(|s| s.size != 0 && s.order_id == other);
                assert_eq!(table.find(other).is_ok(), expected, "id {other}");
            }
        }
        assert!(table.slots.iter().all(|s| s.size == 0));
    }

    #[test]
    fn removing_a_side_keeps_the_other_reachable_across_the_wrap() {
        for first_side in [BookSide::Bid, BookSide::Ask] {
            let mut table = OrderTable::with_capacity(8);
            // Probe runs from homes 14 and 0 of 16 slots: one run wrapping round the end.
            let mut ids = colliding_ids(&table, 14, 6);
            ids.extend(colliding_ids(&table, 0, 3));
            for (n, &id) in ids.iter().enumerate() {
                let side = match (n % 2 == 0, first_side) {
                    (true, side) => side,
                    (false, BookSide::Bid) => BookSide::Ask,
                    (false, BookSide::Ask) => BookSide::Bid,
                };
                let vacant = table.find(id).expect_err("not yet inserted");
                table.insert(
                    vacant,
                    Slot {
                        side,
                        ..slot(id, 1)
                    },
                );
            }
            table.remove_side(first_side);
            for (n, &id) in ids.iter().enumerate() {
                assert_eq!(table.find(id).is_ok(), n % 2 == 1, "id {id}");
            }
            assert_eq!(table.len, ids.len() / 2);
            assert_eq!(
                table.slots.iter().filter(|s| s.size != 0).count(),
                table.len
            );
        }
    }

    #[test]
    fn the_table_grows_before_it_is_three_quarters_full() {
        let mut table = OrderTable::with_capacity(1);
        for id in 0..1_000u64 {
            let vacant = table.find(id << 32).expect_err("new id");
            table.insert(vacant, slot(id << 32, 1));
            assert!(table.len * 4 <= table.slots.len() * 3);
        }
        assert!((0..1_000u64).all(|id| table.find(id << 32).is_ok()));
        table.clear();
        assert_eq!(table.len, 0);
        assert!(table.find(0).is_err());
    }

    /// An add past the order limit is refused and changes nothing; a cancel makes room again,
    /// and the table never grows past what the limit needs.
    #[test]
    fn adds_past_the_order_limit_are_refused_and_the_table_stays_bounded() {
        const LIMIT: usize = 100;
        let mut book = MboBook::new().with_max_orders(LIMIT);
        for id in 0..LIMIT as u64 {
            assert_eq!(
                book.apply(b'A', b'B', id, 100 + id as i64, 1, &mut |_| {}),
                Ok(())
            );
        }
        let slots = book.orders.slots.len();
        let mut reported = 0;
        for id in LIMIT as u64..10 * LIMIT as u64 {
            let refused = book.apply(b'A', b'A', id, 5_000, 1, &mut |_| reported += 1);
            assert_eq!(
                refused,
                Err(MboError::TooManyOrders {
                    order_id: id,
                    limit: LIMIT
                })
            );
            // A modify of an unknown id is an add, and is refused the same way.
            assert!(book.apply(b'M', b'A', id, 5_000, 1, &mut |_| {}).is_err());
        }
        assert_eq!(reported, 0, "a refused add reports nothing");
        assert_eq!(book.orders(), LIMIT);
        assert_eq!(book.orders.slots.len(), slots, "the table did not grow");
        assert_eq!(book.level_count(BookSide::Ask), 0);
        assert!(slots * 3 >= LIMIT * 4 && slots <= 4 * LIMIT);
        assert_eq!(book.apply(b'C', b'B', 0, 100, 1, &mut |_| {}), Ok(()));
        assert_eq!(
            book.apply(b'A', b'A', 10_000, 5_000, 1, &mut |_| {}),
            Ok(())
        );
        assert_eq!(book.orders(), LIMIT);
    }

    #[test]
    fn id_zero_is_an_ordinary_id() {
        let mut book = MboBook::with_capacity(4, 4);
        assert_eq!(book.apply(b'A', b'A', 0, 5, 3, &mut |_| {}), Ok(()));
        assert_eq!(book.order(0), Some((BookSide::Ask, 5, 3)));
        assert_eq!(book.apply(b'C', b'A', 0, 5, 3, &mut |_| {}), Ok(()));
        assert_eq!(book.order(0), None);
    }

    #[test]
    fn ask_keys_reverse_the_order_without_overflow() {
        for (lower, higher) in [(i64::MIN, i64::MIN + 1), (-1, 0), (i64::MAX - 1, i64::MAX)] {
            assert!(key_of(BookSide::Ask, lower) > key_of(BookSide::Ask, higher));
            assert_eq!(price_of(BookSide::Ask, key_of(BookSide::Ask, lower)), lower);
        }
    }
}
