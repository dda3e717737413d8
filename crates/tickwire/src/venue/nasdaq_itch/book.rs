//! An L3 book for every stock of an ITCH 5.0 feed: every resting order by its order reference,
//! aggregated into price levels per stock and side, with the level changes and trades each
//! message causes, as the Databento MBO path publishes them (a `level` event per price level a
//! message changes, carrying the level's aggregated size after it, 0 when it empties; a `trade`
//! per execution that prints).
//!
//! # What a message does (specification sections 4.3 to 4.5)
//!
//! - `A` Add Order and `F` Add Order with MPID: rest the order (side `B` or `S`, shares, price) at
//!   its stock locate; reports its level. A reference already resting is a counted skip
//!   ([`BookCounters::reused_ref`]); a side that is neither `B` nor `S` or zero shares too
//!   ([`BookCounters::bad_add`]). The order table full is [`BookError::OrdersFull`], the level
//!   table full [`BookError::LevelsFull`]: the message is not applied.
//! - `E` Order Executed: takes the executed shares off the order (all of them removes it);
//!   reports the level and a trade at the order's price, its match number as the trade id, the
//!   aggressor the side opposite the resting order.
//! - `C` Order Executed With Price: the same, the trade at the execution price, and only when
//!   `Printable` is `Y` (a `N` execution changes the book and prints nothing).
//! - `X` Order Cancel: takes the cancelled shares off the order (all removes it); reports the
//!   level.
//! - `D` Order Delete: removes the order; reports the level.
//! - `U` Order Replace: removes the original order and rests the new reference with the new
//!   shares and price, on the original's side and stock; reports the old level, then the new
//!   one (once when they are the same level). An unknown original is a counted skip
//!   ([`BookCounters::unknown_replace`]), a new reference already resting too
//!   ([`BookCounters::reused_ref`]), and neither changes the book.
//!   A replace to a new price when the level table is full has removed the original (reported)
//!   and returns [`BookError::LevelsFull`] for the new order.
//! - `P` Trade (non-cross): a trade against a non-displayed order, no book change; aggressor the
//!   side opposite its buy/sell indicator.
//! - `Q` Cross Trade: a trade when its shares are above 0 (aggressor none); no book change.
//! - An execution or cancel of an unknown reference is a counted skip
//!   ([`BookCounters::unknown_ref`]); one of more shares than the order has removes the order
//!   and is counted ([`BookCounters::overfill`]), its trade for the shares sent.
//!
//! Every other message type leaves the book alone. Order messages after `A`/`F` carry the stock
//! locate too; the book keeps each order's own, and a message whose locate differs is applied to
//! the order's stock and counted ([`BookCounters::locate_mismatch`]).
//!
//! # Memory
//!
//! Two open-addressing tables with linear probing and backward-shift deletion, both allocated
//! once at their full size when the book is made, each slot its key beside its value (one cache
//! line a lookup): orders (24-byte slots, keyed by order reference, placed by the reference's
//! low bits: Nasdaq numbers orders in increasing order, so adds fill neighbouring slots and the
//! young orders most messages touch stay together in cache) and levels (24-byte slots, keyed
//! by stock locate, side and price, placed by a Fibonacci hash of stock and side,
//! `crate::hash::hash_word`, plus the price in cents, so that a book side's levels sit
//! together). Hashing the order reference too (spreading neighbouring orders over the whole
//! table) cost 208 ns a message on the skewed bench day and 421 on the uniform one, against 171
//! and 238 placed by low bits (BENCHMARKING.md, "Nasdaq ITCH 5.0"). The tables' memory is
//! advised for transparent huge pages before it is first written (`huge_page_slots`). Each table's slot count is the
//! next power of two at or above twice its cap, so that it is never more than half full.
//! [`BookConfig::default`] holds [`DEFAULT_MAX_ORDERS`] live orders (16,777,216 order slots,
//! 384 MiB) and [`DEFAULT_MAX_LEVELS`] levels (96 MiB); a full day on Nasdaq has a few million
//! live orders at its peak. Past a cap a message is refused with a clear error, never a
//! reallocation: nothing allocates per message.

use super::itch::{price4, Message};
use crate::event::{Body, BookLevel, Event, EventHeader, InstrumentId, Side, Trade};
use crate::fixed::Fixed;

/// Live orders [`BookConfig::default`] holds.
pub const DEFAULT_MAX_ORDERS: usize = 8 << 20;
/// Price levels (over all stocks and sides) [`BookConfig::default`] holds.
pub const DEFAULT_MAX_LEVELS: usize = 2 << 20;

/// The book's caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookConfig {
    pub max_orders: usize,
    pub max_levels: usize,
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig {
            max_orders: DEFAULT_MAX_ORDERS,
            max_levels: DEFAULT_MAX_LEVELS,
        }
    }
}

/// A message the book could not apply for want of room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    #[error("ITCH book: {max} live orders, its cap (a venue file's nasdaq_itch.max_orders), are resting; order {order_ref} refused")]
    OrdersFull { max: usize, order_ref: u64 },
    #[error("ITCH book: {max} price levels, its cap (a venue file's nasdaq_itch.max_levels), are in use; order {order_ref} refused")]
    LevelsFull { max: usize, order_ref: u64 },
}

/// What the book skipped or repaired, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BookCounters {
    pub unknown_ref: u64,
    pub reused_ref: u64,
    pub unknown_replace: u64,
    pub bad_add: u64,
    pub overfill: u64,
    pub locate_mismatch: u64,
}

/// A change the book reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookOutput {
    /// A price level's aggregated shares after the message (0: the level is gone).
    Level {
        locate: u16,
        side: Side,
        price: u32,
        shares: u64,
    },
    /// An execution that prints.
    Trade {
        locate: u16,
        price: u32,
        shares: u64,
        match_number: u64,
        aggressor: Side,
    },
}

impl BookOutput {
    /// The bus event: a `level` (price and size in `Fixed`; shares are whole units) or a `trade`;
    /// `header`'s kind is set from the body. A level total past `Fixed`'s range saturates.
    pub fn event(self, mut header: EventHeader, instrument: InstrumentId) -> Event {
        header.instrument_id = instrument;
        let units = |shares: u64| {
            i64::try_from(shares)
                .ok()
                .and_then(Fixed::from_units)
                .unwrap_or(Fixed::MAX)
        };
        let body = match self {
            BookOutput::Level {
                side,
                price,
                shares,
                ..
            } => Body::BookLevel(BookLevel::new(side, price4(price), units(shares))),
            BookOutput::Trade {
                price,
                shares,
                match_number,
                aggressor,
                ..
            } => Body::Trade(Trade::new(
                price4(price),
                units(shares),
                match_number,
                aggressor,
            )),
        };
        Event::new(header, body)
    }
}

const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct Order {
    price: u32,
    shares: u32,
    locate: u16,
    side: Side,
}

#[derive(Clone, Copy, Default)]
struct Level {
    shares: u64,
    orders: u32,
}

/// A key and its value side by side, so that a lookup touches one cache line.
#[derive(Clone, Copy)]
struct Slot<V: Copy> {
    key: u64,
    value: V,
}

/// Where a key's probe starts.
#[derive(Clone, Copy)]
enum Placement {
    /// The key's low bits: Nasdaq numbers orders in increasing order through the day, so that
    /// an add lands next to the previous one and the young orders (most of a day's executions,
    /// cancels and replaces) sit together in cache; keys that collide probe on.
    Sequential,
    /// The stock and side hashed (Fibonacci), plus the price in cents: one side of a stock's
    /// levels sit together.
    Clustered,
}

/// An open-addressing table of `u64` keys (never [`EMPTY`]) to `V`, allocated once.
struct Table<V: Copy> {
    placement: Placement,
    slots: Box<[Slot<V>]>,
    shift: u32,
    mask: usize,
    len: usize,
    max: usize,
}

impl<V: Copy> Table<V> {
    fn new(max: usize, zero: V, placement: Placement) -> Table<V> {
        let slots = max.max(1).saturating_mul(2).next_power_of_two().max(2);
        Table {
            placement,
            slots: huge_page_slots(
                slots,
                Slot {
                    key: EMPTY,
                    value: zero,
                },
            ),
            shift: 64 - slots.trailing_zeros(),
            mask: slots - 1,
            len: 0,
            max,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        match self.placement {
            Placement::Sequential => key as usize & self.mask,
            Placement::Clustered => {
                ((crate::hash::hash_word(key >> 32) >> self.shift) as usize)
                    .wrapping_add((key as u32 / 100) as usize)
                    & self.mask
            }
        }
    }

    /// The slot holding `key`, if any.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if key == EMPTY {
            // The empty slots' marker is no key (an order reference of 2^64 - 1 is unknown).
            return None;
        }
        let mut at = self.home(key);
        loop {
            let k = self.slots[at].key;
            if k == key {
                return Some(at);
            }
            if k == EMPTY {
                return None;
            }
            at = (at + 1) & self.mask;
        }
    }

    /// The slot of `key`, made (with `zero`) if absent; `None` when absent and full.
    #[inline]
    fn entry(&mut self, key: u64, zero: V) -> Option<usize> {
        if key == EMPTY {
            return None;
        }
        let mut at = self.home(key);
        loop {
            let k = self.slots[at].key;
            if k == key {
                return Some(at);
            }
            if k == EMPTY {
                if self.len >= self.max {
                    return None;
                }
                self.slots[at] = Slot { key, value: zero };
                self.len += 1;
                return Some(at);
            }
            at = (at + 1) & self.mask;
        }
    }

    /// Empties slot `at` (backward-shift deletion: no tombstones).
    #[inline]
    fn remove_at(&mut self, mut at: usize) {
        self.len -= 1;
        let mut next = (at + 1) & self.mask;
        loop {
            let k = self.slots[next].key;
            if k == EMPTY {
                break;
            }
            let home = self.home(k);
            // Move `next` back into `at` when its home is not cyclically in (at, next].
            if (next.wrapping_sub(home) & self.mask) >= (next.wrapping_sub(at) & self.mask) {
                self.slots[at] = self.slots[next];
                at = next;
            }
            next = (next + 1) & self.mask;
        }
        self.slots[at].key = EMPTY;
    }

    fn clear(&mut self) {
        for slot in self.slots.iter_mut() {
            slot.key = EMPTY;
        }
        self.len = 0;
    }

    fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.slots
            .iter()
            .filter(|slot| slot.key != EMPTY)
            .map(|slot| (slot.key, slot.value))
    }
}

/// `len` copies of `slot`, in memory the kernel is asked to back with transparent huge pages
/// before it is first written (where `transparent_hugepage` is `madvise`, as on most hosts, it
/// otherwise uses 4 KiB pages): a lookup anywhere in hundreds of MB then misses the TLB far less.
/// A hint: where it fails (huge pages off) the table is the same, on small pages.
fn huge_page_slots<V: Copy>(len: usize, slot: Slot<V>) -> Box<[Slot<V>]> {
    const HUGE: usize = 2 << 20;
    let mut slots: Vec<Slot<V>> = Vec::with_capacity(len);
    let start = slots.as_mut_ptr() as usize;
    let end = start.saturating_add(
        slots
            .capacity()
            .saturating_mul(std::mem::size_of::<Slot<V>>()),
    );
    let aligned = start.saturating_add(HUGE - 1) & !(HUGE - 1);
    if end > aligned.saturating_add(HUGE) {
        let span = (end - aligned) & !(HUGE - 1);
        // SAFETY: `aligned..aligned + span` lies inside the vector's own allocation (its spare
        // capacity, not yet written); MADV_HUGEPAGE changes only how the kernel backs those
        // pages, never their contents, and nothing else refers to them. The result is ignored:
        // the call is a hint.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, span, libc::MADV_HUGEPAGE);
        }
    }
    slots.resize(len, slot);
    slots.into_boxed_slice()
}

#[inline(always)]
fn level_key(locate: u16, side: Side, price: u32) -> u64 {
    (u64::from(locate) << 40) | ((side as u64) << 32) | u64::from(price)
}

#[inline(always)]
fn opposite(side: Side) -> Side {
    match side {
        Side::Bid => Side::Ask,
        Side::Ask => Side::Bid,
        Side::None => Side::None,
    }
}

#[inline(always)]
fn side_of(indicator: u8) -> Side {
    match indicator {
        b'B' => Side::Bid,
        b'S' => Side::Ask,
        _ => Side::None,
    }
}

/// The L3 book of every stock of one feed.
pub struct ItchBook {
    orders: Table<Order>,
    levels: Table<Level>,
    counters: BookCounters,
}

const NO_ORDER: Order = Order {
    price: 0,
    shares: 0,
    locate: 0,
    side: Side::None,
};

impl ItchBook {
    /// A book with its tables allocated at their full size.
    pub fn new(config: BookConfig) -> ItchBook {
        ItchBook {
            orders: Table::new(config.max_orders, NO_ORDER, Placement::Sequential),
            levels: Table::new(config.max_levels, Level::default(), Placement::Clustered),
            counters: BookCounters::default(),
        }
    }

    pub fn counters(&self) -> BookCounters {
        self.counters
    }

    /// Empties every book (a new session), keeping the tables' memory; reports nothing.
    pub fn clear(&mut self) {
        self.orders.clear();
        self.levels.clear();
        self.counters = BookCounters::default();
    }

    /// Live orders.
    pub fn orders(&self) -> usize {
        self.orders.len
    }

    /// Price levels in use, over all stocks.
    pub fn levels(&self) -> usize {
        self.levels.len
    }

    /// A resting order: (locate, side, price, shares).
    pub fn order(&self, order_ref: u64) -> Option<(u16, Side, u32, u32)> {
        let at = self.orders.find(order_ref)?;
        let o = self.orders.slots[at].value;
        Some((o.locate, o.side, o.price, o.shares))
    }

    /// A level's aggregated shares and order count.
    pub fn level(&self, locate: u16, side: Side, price: u32) -> Option<(u64, u32)> {
        let at = self.levels.find(level_key(locate, side, price))?;
        let l = self.levels.slots[at].value;
        Some((l.shares, l.orders))
    }

    /// Every level, unordered: (locate, side, price, shares, orders). For tests and snapshots.
    pub fn all_levels(&self) -> impl Iterator<Item = (u16, Side, u32, u64, u32)> + '_ {
        self.levels.iter().map(|(key, level)| {
            (
                (key >> 40) as u16,
                Side::from_u8((key >> 32) as u8),
                key as u32,
                level.shares,
                level.orders,
            )
        })
    }

    /// Adds `delta` shares and `orders` orders to a level (made if absent), reporting it.
    #[inline]
    fn level_add(
        &mut self,
        order: Order,
        order_ref: u64,
        out: &mut impl FnMut(BookOutput),
    ) -> Result<(), BookError> {
        let key = level_key(order.locate, order.side, order.price);
        let at = self
            .levels
            .entry(key, Level::default())
            .ok_or(BookError::LevelsFull {
                max: self.levels.max,
                order_ref,
            })?;
        let level = &mut self.levels.slots[at].value;
        level.shares += u64::from(order.shares);
        level.orders += 1;
        out(BookOutput::Level {
            locate: order.locate,
            side: order.side,
            price: order.price,
            shares: level.shares,
        });
        Ok(())
    }

    /// Takes `shares` (and an order when `gone`) off a level, reporting it (removed at 0).
    #[inline]
    fn level_sub(
        &mut self,
        order: Order,
        shares: u32,
        gone: bool,
        out: &mut impl FnMut(BookOutput),
    ) {
        let key = level_key(order.locate, order.side, order.price);
        let Some(at) = self.levels.find(key) else {
            // Every resting order's level exists; unreachable unless the tables disagree.
            return;
        };
        let level = &mut self.levels.slots[at].value;
        level.shares = level.shares.saturating_sub(u64::from(shares));
        if gone {
            level.orders = level.orders.saturating_sub(1);
        }
        let shares = if level.orders == 0 {
            self.levels.remove_at(at);
            0
        } else {
            level.shares
        };
        out(BookOutput::Level {
            locate: order.locate,
            side: order.side,
            price: order.price,
            shares,
        });
    }

    /// Takes shares off a resting order (an execution or a cancel; `None`: all of them, a
    /// delete); `None` when the order is unknown.
    #[inline]
    fn reduce(
        &mut self,
        order_ref: u64,
        locate: u16,
        shares: Option<u32>,
        out: &mut impl FnMut(BookOutput),
    ) -> Option<Order> {
        let Some(at) = self.orders.find(order_ref) else {
            self.counters.unknown_ref += 1;
            return None;
        };
        let order = self.orders.slots[at].value;
        if order.locate != locate {
            self.counters.locate_mismatch += 1;
        }
        let taken = match shares {
            None => order.shares,
            Some(shares) if shares > order.shares => {
                self.counters.overfill += 1;
                order.shares
            }
            Some(shares) => shares,
        };
        let gone = taken == order.shares;
        if gone {
            self.orders.remove_at(at);
        } else {
            self.orders.slots[at].value.shares -= taken;
        }
        self.level_sub(order, taken, gone, out);
        Some(order)
    }

    /// Rests a new order.
    #[inline]
    fn add(
        &mut self,
        order_ref: u64,
        order: Order,
        out: &mut impl FnMut(BookOutput),
    ) -> Result<(), BookError> {
        if order.side == Side::None || order.shares == 0 || order_ref == EMPTY {
            self.counters.bad_add += 1;
            return Ok(());
        }
        if self.orders.find(order_ref).is_some() {
            self.counters.reused_ref += 1;
            return Ok(());
        }
        // The level first: a full level table leaves the order table untouched.
        let level_full = self.levels.len >= self.levels.max
            && self
                .levels
                .find(level_key(order.locate, order.side, order.price))
                .is_none();
        if level_full {
            return Err(BookError::LevelsFull {
                max: self.levels.max,
                order_ref,
            });
        }
        let at = self
            .orders
            .entry(order_ref, order)
            .ok_or(BookError::OrdersFull {
                max: self.orders.max,
                order_ref,
            })?;
        self.orders.slots[at].value = order;
        self.level_add(order, order_ref, out)
    }

    /// Applies one message, reporting each level it changes and each trade it prints.
    #[inline]
    pub fn apply(
        &mut self,
        message: &Message,
        out: &mut impl FnMut(BookOutput),
    ) -> Result<(), BookError> {
        match *message {
            Message::AddOrder {
                header,
                order_ref,
                side,
                shares,
                price,
                ..
            }
            | Message::AddOrderMpid {
                header,
                order_ref,
                side,
                shares,
                price,
                ..
            } => self.add(
                order_ref,
                Order {
                    price,
                    shares,
                    locate: header.locate,
                    side: side_of(side),
                },
                out,
            )?,
            Message::OrderExecuted {
                header,
                order_ref,
                executed_shares,
                match_number,
            } => {
                if let Some(order) =
                    self.reduce(order_ref, header.locate, Some(executed_shares), out)
                {
                    out(BookOutput::Trade {
                        locate: order.locate,
                        price: order.price,
                        shares: u64::from(executed_shares),
                        match_number,
                        aggressor: opposite(order.side),
                    });
                }
            }
            Message::OrderExecutedWithPrice {
                header,
                order_ref,
                executed_shares,
                match_number,
                printable,
                execution_price,
            } => {
                if let Some(order) =
                    self.reduce(order_ref, header.locate, Some(executed_shares), out)
                {
                    if printable == b'Y' {
                        out(BookOutput::Trade {
                            locate: order.locate,
                            price: execution_price,
                            shares: u64::from(executed_shares),
                            match_number,
                            aggressor: opposite(order.side),
                        });
                    }
                }
            }
            Message::OrderCancel {
                header,
                order_ref,
                canceled_shares,
            } => {
                self.reduce(order_ref, header.locate, Some(canceled_shares), out);
            }
            Message::OrderDelete { header, order_ref } => {
                self.reduce(order_ref, header.locate, None, out);
            }
            Message::OrderReplace {
                header,
                original_ref,
                new_ref,
                shares,
                price,
            } => {
                let Some(at) = self.orders.find(original_ref) else {
                    self.counters.unknown_replace += 1;
                    return Ok(());
                };
                if new_ref == EMPTY
                    || (new_ref != original_ref && self.orders.find(new_ref).is_some())
                {
                    self.counters.reused_ref += 1;
                    return Ok(());
                }
                let old = self.orders.slots[at].value;
                if old.locate != header.locate {
                    self.counters.locate_mismatch += 1;
                }
                self.orders.remove_at(at);
                let new = Order {
                    price,
                    shares,
                    locate: old.locate,
                    side: old.side,
                };
                if shares == 0 {
                    self.counters.bad_add += 1;
                    self.level_sub(old, old.shares, true, out);
                    return Ok(());
                }
                if old.price == price {
                    // Same level: one report, with the new total.
                    let key = level_key(old.locate, old.side, price);
                    if let Some(level_at) = self.levels.find(key) {
                        let level = &mut self.levels.slots[level_at].value;
                        level.shares =
                            level.shares.saturating_sub(u64::from(old.shares)) + u64::from(shares);
                        let total = level.shares;
                        // The order table had room for `old`, so it has room for `new`.
                        if let Some(slot) = self.orders.entry(new_ref, new) {
                            self.orders.slots[slot].value = new;
                        }
                        out(BookOutput::Level {
                            locate: old.locate,
                            side: old.side,
                            price,
                            shares: total,
                        });
                    }
                    return Ok(());
                }
                self.level_sub(old, old.shares, true, out);
                self.add(new_ref, new, out)?;
            }
            Message::Trade {
                header,
                side,
                shares,
                price,
                match_number,
                ..
            } => out(BookOutput::Trade {
                locate: header.locate,
                price,
                shares: u64::from(shares),
                match_number,
                aggressor: opposite(side_of(side)),
            }),
            Message::CrossTrade {
                header,
                shares,
                cross_price,
                match_number,
                ..
            } if shares > 0 => out(BookOutput::Trade {
                locate: header.locate,
                price: cross_price,
                shares,
                match_number,
                aggressor: Side::None,
            }),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::itch::{Header, Symbol};
    use super::*;
    use std::collections::BTreeMap;

    /// A plain reference: orders in a `BTreeMap`, levels in a `BTreeMap` per stock and side.
    #[derive(Default)]
    struct Reference {
        orders: BTreeMap<u64, (u16, Side, u32, u32)>,
        levels: BTreeMap<(u16, u8, u32), u64>,
    }

    impl Reference {
        fn level(&mut self, locate: u16, side: Side, price: u32, delta: i64) -> BookOutput {
            let entry = self.levels.entry((locate, side as u8, price)).or_insert(0);
            *entry = (*entry as i64 + delta) as u64;
            let shares = *entry;
            if shares == 0 {
                self.levels.remove(&(locate, side as u8, price));
            }
            BookOutput::Level {
                locate,
                side,
                price,
                shares,
            }
        }

        fn take(
            &mut self,
            order_ref: u64,
            shares: Option<u32>,
            out: &mut Vec<BookOutput>,
        ) -> Option<(u16, Side, u32, u32)> {
            let order = *self.orders.get(&order_ref)?;
            let taken = shares.map_or(order.3, |s| s.min(order.3));
            if taken == order.3 {
                self.orders.remove(&order_ref);
            } else {
                self.orders.get_mut(&order_ref).unwrap().3 -= taken;
            }
            out.push(self.level(order.0, order.1, order.2, -i64::from(taken)));
            Some(order)
        }

        fn apply(&mut self, message: &Message) -> Vec<BookOutput> {
            let mut out = Vec::new();
            match *message {
                Message::AddOrder {
                    header,
                    order_ref,
                    side,
                    shares,
                    price,
                    ..
                } => {
                    let side = if side == b'B' { Side::Bid } else { Side::Ask };
                    if let std::collections::btree_map::Entry::Vacant(entry) =
                        self.orders.entry(order_ref)
                    {
                        entry.insert((header.locate, side, price, shares));
                        out.push(self.level(header.locate, side, price, i64::from(shares)));
                    }
                }
                Message::OrderExecuted {
                    order_ref,
                    executed_shares,
                    match_number,
                    ..
                } => {
                    if let Some(o) = self.take(order_ref, Some(executed_shares), &mut out) {
                        out.push(BookOutput::Trade {
                            locate: o.0,
                            price: o.2,
                            shares: u64::from(executed_shares),
                            match_number,
                            aggressor: if o.1 == Side::Bid {
                                Side::Ask
                            } else {
                                Side::Bid
                            },
                        });
                    }
                }
                Message::OrderExecutedWithPrice {
                    order_ref,
                    executed_shares,
                    match_number,
                    printable,
                    execution_price,
                    ..
                } => {
                    if let Some(o) = self.take(order_ref, Some(executed_shares), &mut out) {
                        if printable == b'Y' {
                            out.push(BookOutput::Trade {
                                locate: o.0,
                                price: execution_price,
                                shares: u64::from(executed_shares),
                                match_number,
                                aggressor: if o.1 == Side::Bid {
                                    Side::Ask
                                } else {
                                    Side::Bid
                                },
                            });
                        }
                    }
                }
                Message::OrderCancel {
                    order_ref,
                    canceled_shares,
                    ..
                } => {
                    self.take(order_ref, Some(canceled_shares), &mut out);
                }
                Message::OrderDelete { order_ref, .. } => {
                    self.take(order_ref, None, &mut out);
                }
                Message::OrderReplace {
                    original_ref,
                    new_ref,
                    shares,
                    price,
                    ..
                } => {
                    if let Some(&o) = self.orders.get(&original_ref) {
                        if new_ref == original_ref || !self.orders.contains_key(&new_ref) {
                            self.orders.remove(&original_ref);
                            if o.2 == price {
                                out.push(self.level(
                                    o.0,
                                    o.1,
                                    price,
                                    i64::from(shares) - i64::from(o.3),
                                ));
                            } else {
                                out.push(self.level(o.0, o.1, o.2, -i64::from(o.3)));
                                out.push(self.level(o.0, o.1, price, i64::from(shares)));
                            }
                            self.orders.insert(new_ref, (o.0, o.1, price, shares));
                        }
                    }
                }
                _ => {}
            }
            out
        }
    }

    fn header(locate: u16) -> Header {
        Header {
            locate,
            tracking: 0,
            timestamp_ns: 0,
        }
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A generated session: adds, executions (with and without price, printable or not),
    /// cancels, deletes and replaces over 50 stocks, with unknown and reused references mixed
    /// in; every message's outputs and the whole book after it checked against the reference.
    #[test]
    fn book_matches_a_plain_reference_over_a_long_session() {
        // Nasdaq's increasing references, then references that all collide in the order
        // table (multiples of its 131,072 slots, a few apart): long probes and backward shifts.
        long_session(200_000, |n| n);
        long_session(20_000, |n| (n << 17) + n % 5);
    }

    fn long_session(steps: u64, reference_of: fn(u64) -> u64) {
        let mut book = ItchBook::new(BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 16,
        });
        let mut reference = Reference::default();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut live: Vec<u64> = Vec::new();
        let mut next_ref = 1u64;
        let mut outputs = Vec::new();
        for step in 0..steps {
            let pick = |rng: &mut Rng, live: &Vec<u64>| -> u64 {
                if live.is_empty() || rng.below(50) == 0 {
                    1_000_000_000 + rng.below(1000) // unknown
                } else {
                    live[rng.below(live.len() as u64) as usize]
                }
            };
            let locate = 1 + rng.below(50) as u16;
            let roll = rng.below(100);
            let message = if roll < 40 || live.len() < 20 {
                let reuse = !live.is_empty() && rng.below(100) == 0;
                let order_ref = if reuse {
                    live[0]
                } else {
                    next_ref += 1;
                    reference_of(next_ref)
                };
                Message::AddOrder {
                    header: header(locate),
                    order_ref,
                    side: if rng.below(2) == 0 { b'B' } else { b'S' },
                    shares: 1 + rng.below(500) as u32,
                    stock: Symbol(*b"STOCK   "),
                    price: 100_000 + rng.below(40) as u32 * 100,
                }
            } else if roll < 55 {
                Message::OrderExecuted {
                    header: header(locate),
                    order_ref: pick(&mut rng, &live),
                    executed_shares: 1 + rng.below(300) as u32,
                    match_number: step,
                }
            } else if roll < 62 {
                Message::OrderExecutedWithPrice {
                    header: header(locate),
                    order_ref: pick(&mut rng, &live),
                    executed_shares: 1 + rng.below(300) as u32,
                    match_number: step,
                    printable: if rng.below(3) == 0 { b'N' } else { b'Y' },
                    execution_price: 99_000 + rng.below(100) as u32,
                }
            } else if roll < 75 {
                Message::OrderCancel {
                    header: header(locate),
                    order_ref: pick(&mut rng, &live),
                    canceled_shares: 1 + rng.below(300) as u32,
                }
            } else if roll < 87 {
                Message::OrderDelete {
                    header: header(locate),
                    order_ref: pick(&mut rng, &live),
                }
            } else {
                let reuse = live.len() > 1 && rng.below(50) == 0;
                let new_ref = if reuse {
                    live[1]
                } else {
                    next_ref += 1;
                    reference_of(next_ref)
                };
                Message::OrderReplace {
                    header: header(locate),
                    original_ref: pick(&mut rng, &live),
                    new_ref,
                    shares: 1 + rng.below(500) as u32,
                    price: 100_000 + rng.below(40) as u32 * 100,
                }
            };
            let expected = reference.apply(&message);
            outputs.clear();
            book.apply(&message, &mut |o| outputs.push(o))
                .expect("room");
            assert_eq!(outputs, expected, "step {step}: {message:?}");
            // Refreshed now and then: a reference picked in between may have gone (an unknown
            // reference, which both books must skip alike).
            if let Message::AddOrder { order_ref, .. }
            | Message::OrderReplace {
                new_ref: order_ref, ..
            } = message
            {
                live.push(order_ref);
            }
            if step % 512 == 0 {
                live.clear();
                live.extend(reference.orders.keys().copied());
            }
            if step % 5_000 == 0 || step == steps - 1 {
                let mut levels: Vec<_> = book
                    .all_levels()
                    .map(|(l, s, p, shares, _)| ((l, s as u8, p), shares))
                    .collect();
                levels.sort_unstable();
                let want: Vec<_> = reference.levels.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(levels, want, "step {step}");
                assert_eq!(book.orders(), reference.orders.len());
                for (order_ref, order) in &reference.orders {
                    assert_eq!(book.order(*order_ref), Some(*order));
                }
            }
        }
        let counters = book.counters();
        assert!(
            counters.unknown_ref > 0 && counters.reused_ref > 0 && counters.unknown_replace > 0
        );
        assert!(book.orders() > 100, "the session keeps a book");
    }

    fn add(order_ref: u64, side: u8, shares: u32, price: u32) -> Message {
        Message::AddOrder {
            header: header(7),
            order_ref,
            side,
            shares,
            stock: Symbol(*b"AAPL    "),
            price,
        }
    }

    #[test]
    fn trades_print_as_the_specification_says() {
        let mut book = ItchBook::new(BookConfig {
            max_orders: 16,
            max_levels: 16,
        });
        let mut out = Vec::new();
        book.apply(&add(1, b'B', 300, 1_500_000), &mut |o| out.push(o))
            .unwrap();
        out.clear();
        let exec_n = Message::OrderExecutedWithPrice {
            header: header(7),
            order_ref: 1,
            executed_shares: 100,
            match_number: 9,
            printable: b'N',
            execution_price: 1_499_900,
        };
        book.apply(&exec_n, &mut |o| out.push(o)).unwrap();
        assert_eq!(
            out,
            [BookOutput::Level {
                locate: 7,
                side: Side::Bid,
                price: 1_500_000,
                shares: 200
            }],
            "a non-printable execution changes the book and prints nothing"
        );
        out.clear();
        let cross = |shares| Message::CrossTrade {
            header: header(7),
            shares,
            stock: Symbol(*b"AAPL    "),
            cross_price: 1_500_100,
            match_number: 10,
            cross_type: b'O',
        };
        book.apply(&cross(0), &mut |o| out.push(o)).unwrap();
        assert!(out.is_empty(), "a cross of 0 shares prints nothing");
        book.apply(&cross(5000), &mut |o| out.push(o)).unwrap();
        assert_eq!(
            out,
            [BookOutput::Trade {
                locate: 7,
                price: 1_500_100,
                shares: 5000,
                match_number: 10,
                aggressor: Side::None
            }]
        );
        out.clear();
        let hidden = Message::Trade {
            header: header(7),
            order_ref: 0,
            side: b'S',
            shares: 42,
            stock: Symbol(*b"AAPL    "),
            price: 1_500_000,
            match_number: 11,
        };
        book.apply(&hidden, &mut |o| out.push(o)).unwrap();
        assert_eq!(
            out,
            [BookOutput::Trade {
                locate: 7,
                price: 1_500_000,
                shares: 42,
                match_number: 11,
                aggressor: Side::Bid
            }]
        );
        assert_eq!(book.level(7, Side::Bid, 1_500_000), Some((200, 1)));
        let event = out[0].event(
            EventHeader {
                exchange_ts_ns: 1,
                recv_ts_ns: 2,
                venue_seq: 3,
                instrument_id: 0,
                venue_id: 4,
                kind: crate::event::EventKind::Quote,
                flags: 0,
            },
            99,
        );
        assert_eq!(event.kind(), crate::event::EventKind::Trade);
        assert_eq!(event.header.instrument_id, 99);
        assert_eq!(event.header.venue_seq, 3);
        match event.body() {
            Body::Trade(trade) => {
                assert_eq!(trade.price.to_string(), "150");
                assert_eq!(trade.size.to_string(), "42");
                assert_eq!(trade.trade_id, 11);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn caps_are_clear_errors_and_bad_references_counted_skips() {
        let mut book = ItchBook::new(BookConfig {
            max_orders: 2,
            max_levels: 3,
        });
        let mut sink = |_| {};
        book.apply(&add(1, b'B', 10, 100), &mut sink).unwrap();
        book.apply(&add(2, b'B', 10, 200), &mut sink).unwrap();
        assert_eq!(
            book.apply(&add(3, b'B', 10, 300), &mut sink),
            Err(BookError::OrdersFull {
                max: 2,
                order_ref: 3
            })
        );
        assert!(book.order(3).is_none() && book.level(7, Side::Bid, 300).is_none());
        book.apply(&add(1, b'S', 10, 100), &mut sink).unwrap();
        assert_eq!(book.counters().reused_ref, 1);
        assert_eq!(book.order(1), Some((7, Side::Bid, 100, 10)));
        let replace = |original_ref, new_ref| Message::OrderReplace {
            header: header(7),
            original_ref,
            new_ref,
            shares: 5,
            price: 400,
        };
        book.apply(&replace(77, 78), &mut sink).unwrap();
        assert_eq!(book.counters().unknown_replace, 1);
        book.apply(&replace(1, 2), &mut sink).unwrap();
        assert_eq!(book.counters().reused_ref, 2);
        assert_eq!(
            book.order(1),
            Some((7, Side::Bid, 100, 10)),
            "refused replace changes nothing"
        );
        book.apply(
            &Message::OrderDelete {
                header: header(7),
                order_ref: 55,
            },
            &mut sink,
        )
        .unwrap();
        assert_eq!(book.counters().unknown_ref, 1);
        // The table's empty marker is no order: a delete of it is unknown, not a removal.
        book.apply(
            &Message::OrderDelete {
                header: header(7),
                order_ref: u64::MAX,
            },
            &mut sink,
        )
        .unwrap();
        assert_eq!(book.counters().unknown_ref, 2);
        assert_eq!(book.orders(), 2);
        // Levels: 100 and 200 in use, room for one more, then full.
        book.apply(&replace(1, 10), &mut sink).unwrap();
        assert_eq!(book.level(7, Side::Bid, 400), Some((5, 1)));
        let mut small = ItchBook::new(BookConfig {
            max_orders: 8,
            max_levels: 1,
        });
        small.apply(&add(1, b'B', 10, 100), &mut sink).unwrap();
        assert_eq!(
            small.apply(&add(2, b'B', 10, 200), &mut sink),
            Err(BookError::LevelsFull {
                max: 1,
                order_ref: 2
            })
        );
        assert!(small.order(2).is_none());
        small.clear();
        assert_eq!((small.orders(), small.levels()), (0, 0));
        assert!(small.level(7, Side::Bid, 100).is_none());
        small.apply(&add(2, b'B', 10, 200), &mut sink).unwrap();
        assert_eq!(small.level(7, Side::Bid, 200), Some((10, 1)));
        let text = BookError::OrdersFull {
            max: 2,
            order_ref: 3,
        }
        .to_string();
        assert!(text.contains("max_orders") && text.contains('2'));
    }
}
