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
//! Everything is allocated once at its full size when the book is made; past a cap a message
//! is refused with a clear error, never a reallocation: nothing allocates per message.
//!
//! - **Orders**: a direct array of 16-byte slots (the order reference, the order's shares and
//!   the place of its level in the level store; the stock, side and price are the level's),
//!   indexed by the reference's low bits: Nasdaq numbers orders in increasing order, so the
//!   array is a window over the day's references, adds fill neighbouring slots and the young
//!   orders most messages touch sit together, each found with one access; a removal empties
//!   its slot and moves nothing. When an add's slot still holds an older live order (one a
//!   window length older), the older one moves to an overflow table (Robin Hood linear probing
//!   placed by a Fibonacci hash of the reference, backward-shift deletion) and the new one
//!   takes the slot; a lookup that misses its slot looks there. The overflow is sized for the
//!   whole cap, so the cap holds whatever the references. (One open-addressing table placed by
//!   the low bits, with the probing and backward shifts of linear probing, cost 2.5 times as
//!   much on the bench's skewed day once its references had gone round the table: the young
//!   orders after an old survivor were all pushed one slot on, and each removal shifted them
//!   all back.)
//! - **Levels**: each stock side's levels near where it trades sit in a **ladder**, a direct
//!   array of 128 cells of 16 bytes (shares, order count, price) at one price step apart: a
//!   cent from $1 up (Regulation NMS's minimum increment for quotes there), the
//!   specification's 0.0001 below. A side's ladder is given out from a pool the first time it
//!   rests an order, centred on that order's price; an add finds its cell by arithmetic, with
//!   no search, and a level that empties frees its cell with one store. A price off the ladder
//!   (past its ends, or between its cents: a sub-penny price above $1, or Rule 612's half
//!   penny) is a **far level**: a store of 32-byte levels at fixed places (a freed place is
//!   reused first) and an index from (stock, side, price) to a place, the same kind of table
//!   placed by a Fibonacci hash of stock and side (`crate::hash::hash_word`) plus the price in
//!   cents, so that a stock side's far levels sit together in price order (Robin Hood ordered,
//!   so that a search or a deletion's backward shift stops at the first level at its home). A
//!   ladder moves (recentred on the next add) only when its side has no level at all, ladder
//!   or far, so that a price is always in one or the other, never both. An order keeps its
//!   level's place (a cell, or a far place), so that an execution, cancel or delete goes from
//!   the order straight to its level. Each stock side keeps the lowest and highest price it
//!   has had a far level at (since the book was cleared), so that [`ItchBook::side_levels`]
//!   lists a side from its ladder and that part of the index, not the whole book (bus
//!   readers' snapshots). When the pool of ladders is used up (one for every 32 levels of
//!   the cap: 16,384 stocks' two sides at the default), further sides keep all their levels
//!   far: slower, never wrong. (The far store alone, before ladders, took 1.4 to 1.9 times as
//!   long over the bench's day, BENCHMARKING.md.)
//! - **Prefetch**: the messages sit in a buffer, so [`ItchBook::apply_batch`] asks the cache
//!   for what the messages ahead will touch while it applies each one, in three stages: the
//!   order's direct slot (and an add's stock side head) [`PREFETCH_AHEAD`] messages ahead; half
//!   as far ahead, its level's cell, read from the order now in cache (an add's ladder cell from
//!   its head, or its far index slot; an old order's overflow slot; the overflow slot an add
//!   will push an old order to); a quarter as far ahead, what else the message will change (a
//!   replace's new level, a far level's index slot when its order may be its last, the level of
//!   an order found in the overflow, an add's far place). The live decoder calls
//!   [`ItchBook::prefetch_raw`] on every message of a datagram before the first is applied. What each stage gives on the bench's day is in BENCHMARKING.md
//!   ("Nasdaq ITCH 5.0"; the bench's `ITCH_PREFETCH` picks the distances).
//!
//! The tables' memory is advised for transparent huge pages before it is first written
//! (`huge_page_array`). Each table's slot count is the next power of two at or above twice its
//! cap, so that it is never more than half full; the direct array has as many slots as the
//! overflow. An order costs 64 bytes of the cap (two direct and two overflow slots), a level
//! 128 (two index slots, its far place, and 64 bytes of ladders):
//! [`BookConfig::default`] holds [`DEFAULT_MAX_ORDERS`] live orders (512 MiB) and
//! [`DEFAULT_MAX_LEVELS`] levels (256 MiB); a full day on Nasdaq has a few million live orders
//! at its peak. A lookup of a reference that is not resting (every add's check that its new
//! reference is not in use) probes the overflow only when the reference is no higher than
//! the highest one ever moved there: with Nasdaq's increasing references, never.

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
/// No level: a level index slot not yet given its store entry.
const NO_LEVEL: u32 = u32::MAX;

/// A resting order: its shares and its level's place in the level store (16 bytes with its key;
/// the stock, side and price are the level's).
#[derive(Clone, Copy)]
struct Order {
    shares: u32,
    level: u32,
}

/// What rests at a price level: its aggregated shares, its order count (`orders == 0`: free)
/// and its price. 16 bytes: a ladder cell, and the first half of a far level.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Cell {
    shares: u64,
    orders: u32,
    price: u32,
}

const FREE_CELL: Cell = Cell {
    shares: 0,
    orders: 0,
    price: 0,
};

/// A level in the far store (one no ladder holds): its cell and where it is (stock, side).
/// 32 bytes, aligned so that one never straddles two cache lines.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Level {
    cell: Cell,
    locate: u16,
    side: Side,
}

const FREE_LEVEL: Level = Level {
    cell: FREE_CELL,
    locate: 0,
    side: Side::None,
};

/// A key and its value side by side, so that a lookup touches one cache line.
#[derive(Clone, Copy)]
struct Slot<V: Copy> {
    key: u64,
    value: V,
}

/// Where a key's probe starts.
#[derive(Clone, Copy)]
enum Placement {
    /// The stock and side hashed (Fibonacci), plus the price in cents: one side of a stock's
    /// levels sit together, in price order but for collisions.
    Clustered,
    /// The key hashed (Fibonacci): the orders moved out of their direct slot.
    Hashed,
}

/// An open-addressing table of `u64` keys (never [`EMPTY`]) to `V`, allocated once.
struct Table<V: Copy> {
    placement: Placement,
    slots: Box<[Slot<V>]>,
    shift: u32,
    mask: usize,
    len: usize,
}

impl<V: Copy> Table<V> {
    fn new(max: usize, zero: V, placement: Placement) -> Table<V> {
        let slots = max.max(1).saturating_mul(2).next_power_of_two().max(2);
        Table {
            placement,
            slots: huge_page_array(
                slots,
                Slot {
                    key: EMPTY,
                    value: zero,
                },
            ),
            shift: 64 - slots.trailing_zeros(),
            mask: slots - 1,
            len: 0,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        match self.placement {
            Placement::Clustered => {
                ((crate::hash::hash_word(key >> 32) >> self.shift) as usize)
                    .wrapping_add((key as u32 / 100) as usize)
                    & self.mask
            }
            Placement::Hashed => (crate::hash::hash_word(key) >> self.shift) as usize,
        }
    }

    /// Asks the cache for the line where `key`'s probe starts.
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(self.slots.as_ptr().wrapping_add(self.home(key)));
    }

    /// How far the key in slot `at` sits past its home.
    #[inline(always)]
    fn distance(&self, at: usize, key: u64) -> usize {
        at.wrapping_sub(self.home(key)) & self.mask
    }

    /// The slot holding `key`, if any. Robin Hood order (every run of slots is in the order of
    /// its keys' homes) ends the search at the first key that sits nearer its home than `key`
    /// would.
    #[inline(always)]
    fn find(&self, key: u64) -> Option<usize> {
        if key == EMPTY {
            // The empty slots' marker is no key (an order reference of 2^64 - 1 is unknown).
            return None;
        }
        let mut at = self.home(key);
        let mut distance = 0;
        loop {
            let k = self.slots[at].key;
            if k == key {
                return Some(at);
            }
            if k == EMPTY || self.distance(at, k) < distance {
                return None;
            }
            at = (at + 1) & self.mask;
            distance += 1;
        }
    }

    /// Puts `key` (absent: the caller has looked) with `value` in, Robin Hood style: a key
    /// further from its home takes the slot of one nearer to its own, which moves on. The
    /// caller has checked that `len < max`.
    #[inline(always)]
    fn insert(&mut self, key: u64, value: V) {
        let mut slot = Slot { key, value };
        let mut at = self.home(key);
        let mut distance = 0;
        loop {
            let k = self.slots[at].key;
            if k == EMPTY {
                self.slots[at] = slot;
                self.len += 1;
                return;
            }
            let theirs = self.distance(at, k);
            if theirs < distance {
                std::mem::swap(&mut self.slots[at], &mut slot);
                distance = theirs;
            }
            at = (at + 1) & self.mask;
            distance += 1;
        }
    }

    /// Empties slot `at` (backward-shift deletion: no tombstones; the keys after it move back
    /// one until an empty slot or one at its home, which in Robin Hood order ends the run).
    #[inline]
    fn remove_at(&mut self, mut at: usize) {
        self.len -= 1;
        loop {
            let next = (at + 1) & self.mask;
            let k = self.slots[next].key;
            if k == EMPTY || self.distance(next, k) == 0 {
                break;
            }
            self.slots[at] = self.slots[next];
            at = next;
        }
        self.slots[at].key = EMPTY;
    }

    /// Empties the table (nothing to write when it is empty already: a removal leaves its slot
    /// empty).
    fn clear(&mut self) {
        if self.len == 0 {
            return;
        }
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

/// Marks a place in [`Orders`] as the overflow table's.
const OVERFLOW: usize = 1 << 63;

/// The live orders: a direct array indexed by the order reference's low bits (Nasdaq numbers
/// orders in increasing order, so that the array is a window over the day's references, each
/// add next to the previous one), and an overflow table for the orders a newer one has pushed
/// out of their slot: when an add's slot holds an older live order (one a window length older,
/// left resting), the older moves to the overflow and the new one takes the slot. The young
/// orders most messages touch stay in the array, found with one access; a removal empties its
/// slot, moving nothing.
struct Orders {
    direct: Box<[Slot<Order>]>,
    mask: usize,
    overflow: Table<Order>,
    /// The highest reference ever moved to the overflow (since the book was cleared): a higher
    /// one is not there, so that looking up a new reference (every add checks that it is not
    /// resting already) costs no probe of the overflow when references increase, as Nasdaq's
    /// do.
    overflow_high: u64,
    len: usize,
    max: usize,
}

impl Orders {
    fn new(max: usize) -> Orders {
        let slots = max.max(1).saturating_mul(2).next_power_of_two().max(2);
        Orders {
            direct: huge_page_array(
                slots,
                Slot {
                    key: EMPTY,
                    value: NO_ORDER,
                },
            ),
            mask: slots - 1,
            overflow: Table::new(max, NO_ORDER, Placement::Hashed),
            overflow_high: 0,
            len: 0,
            max,
        }
    }

    fn clear(&mut self) {
        // No order resting: every direct slot is empty already (a removal empties its slot).
        if self.len > 0 {
            for slot in self.direct.iter_mut() {
                slot.key = EMPTY;
            }
        }
        self.overflow.clear();
        self.overflow_high = 0;
        self.len = 0;
    }

    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(self.direct.as_ptr().wrapping_add(key as usize & self.mask));
    }

    /// The direct slot where `key` rests, if it is there (its line in cache: a prefetch's second
    /// stage); when not, and the overflow may hold it, asks for the overflow slot where its
    /// probe starts.
    #[inline(always)]
    fn find_direct_or_prefetch(&self, key: u64) -> Option<usize> {
        let at = key as usize & self.mask;
        if self.direct[at].key == key && key != EMPTY {
            return Some(at);
        }
        if self.overflow.len > 0 && key <= self.overflow_high {
            self.overflow.prefetch(key);
        }
        None
    }

    /// Asks for the overflow slot where the order now in `key`'s direct slot (its line in
    /// cache) would move to, when there is one: an add of `key` moves it there.
    #[inline(always)]
    fn prefetch_displaced(&self, key: u64) {
        let resting = self.direct[key as usize & self.mask].key;
        if resting != EMPTY && resting != key {
            self.overflow.prefetch(resting);
        }
    }

    /// Where `key` rests (a direct slot, or [`OVERFLOW`] plus an overflow slot), if it does.
    #[inline(always)]
    fn find(&self, key: u64) -> Option<usize> {
        let at = key as usize & self.mask;
        let k = self.direct[at].key;
        if k == key && key != EMPTY {
            return Some(at);
        }
        if self.overflow.len == 0 || key > self.overflow_high {
            return None;
        }
        self.overflow.find(key).map(|at| at | OVERFLOW)
    }

    #[inline(always)]
    fn value(&self, at: usize) -> Order {
        if at & OVERFLOW == 0 {
            self.direct[at].value
        } else {
            self.overflow.slots[at & !OVERFLOW].value
        }
    }

    #[inline(always)]
    fn value_mut(&mut self, at: usize) -> &mut Order {
        if at & OVERFLOW == 0 {
            &mut self.direct[at].value
        } else {
            &mut self.overflow.slots[at & !OVERFLOW].value
        }
    }

    #[inline(always)]
    fn remove_at(&mut self, at: usize) {
        self.len -= 1;
        if at & OVERFLOW == 0 {
            self.direct[at].key = EMPTY;
        } else {
            self.overflow.remove_at(at & !OVERFLOW);
        }
    }

    /// Rests `key` (absent: the caller has looked; `len < max`: the caller has checked), in its
    /// direct slot, moving an older order there to the overflow (which has room: it holds
    /// fewer than `len` orders).
    #[inline(always)]
    fn insert(&mut self, key: u64, value: Order) {
        let at = key as usize & self.mask;
        let slot = self.direct[at];
        if slot.key != EMPTY {
            self.overflow.insert(slot.key, slot.value);
            self.overflow_high = self.overflow_high.max(slot.key);
        }
        self.direct[at] = Slot { key, value };
        self.len += 1;
    }
}

/// Asks the cache for the line holding `at` (a hint: no effect on what the program computes;
/// nothing where the target has no prefetch instruction wired here).
#[inline(always)]
fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; `at` is not read.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// `len` copies of `value`, in memory the kernel is asked to back with transparent huge pages
/// before it is first written (where `transparent_hugepage` is `madvise`, as on most hosts, it
/// otherwise uses 4 KiB pages): a lookup anywhere in hundreds of MB then misses the TLB far less.
/// A hint: where it fails (huge pages off) the array is the same, on small pages.
fn huge_page_array<T: Copy>(len: usize, value: T) -> Box<[T]> {
    const HUGE: usize = 2 << 20;
    let mut items: Vec<T> = Vec::with_capacity(len);
    let start = items.as_mut_ptr() as usize;
    let end = start.saturating_add(items.capacity().saturating_mul(std::mem::size_of::<T>()));
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
    items.resize(len, value);
    items.into_boxed_slice()
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

/// The lowest and highest price a stock side has had a level at since the book was cleared
/// (`low > high`: none), to list its levels from the index without scanning all of it. Kept in
/// one word, `!low` above `high`, so that none is 0 and the array starts as zeroed memory
/// (which the allocator hands out without writing it: a book made for a few orders costs no
/// megabyte of stores).
#[derive(Clone, Copy)]
struct Span {
    low: u32,
    high: u32,
}

impl Span {
    #[inline(always)]
    fn from_word(word: u64) -> Span {
        Span {
            low: !((word >> 32) as u32),
            high: word as u32,
        }
    }

    #[inline(always)]
    fn word(self) -> u64 {
        (u64::from(!self.low) << 32) | u64::from(self.high)
    }
}

/// A stock side's place in [`Levels::spans`].
#[inline(always)]
fn span_of(locate: u16, side: Side) -> usize {
    (usize::from(locate) << 1) | usize::from(side == Side::Ask)
}

/// The price levels one stock side's ladder holds: prices `base`, `base + tick`, ... (`tick` a
/// cent from $1 up, the specification's smallest step below), 2 KiB of cells.
const LADDER: usize = 128;
const LADDER_SHIFT: u32 = LADDER.trailing_zeros();
/// Marks a level's place as the far store's (the store's index below it); places below it are
/// ladder cells (`ladder << LADDER_SHIFT | step`).
const FAR: u32 = 1 << 31;
/// The far store's largest size (its places below [`FAR`]).
const MAX_FAR: usize = (FAR - 2) as usize;
/// Stock sides that may have a ladder: every locate, both sides.
const SIDES: usize = 2 << 16;
/// Levels of cap a ladder comes with (a ladder's 2 KiB for every 32: 64 bytes a level).
const LEVELS_PER_LADDER: usize = 32;
/// A price's step in a ladder anchored at `price`: a cent from $1 up (Regulation NMS's minimum
/// increment for quotes there), else the specification's 0.0001.
#[inline(always)]
fn tick_at(price: u32) -> u32 {
    if price >= 10_000 {
        100
    } else {
        1
    }
}

/// A stock side's ladder and far levels. Kept in one word (all zero: no ladder, no far level),
/// so that the array of every side starts as zeroed memory, which the allocator hands out
/// without writing it (as [`Span`]s are).
#[derive(Clone, Copy, Default)]
struct Head {
    /// The ladder's lowest price.
    base: u32,
    /// The ladder's place in the pool, plus 1 (0: none yet).
    ladder: u32,
    /// The price step from one cell to the next.
    tick: u32,
    /// This side's levels in the far store: while there are any, the ladder never moves (a
    /// price is a ladder's or the far store's, never both).
    far: u32,
}

impl Head {
    #[inline(always)]
    fn from_word(word: u128) -> Head {
        Head {
            base: word as u32,
            ladder: (word >> 32) as u32,
            tick: (word >> 64) as u32,
            far: (word >> 96) as u32,
        }
    }

    #[inline(always)]
    fn word(self) -> u128 {
        u128::from(self.base)
            | (u128::from(self.ladder) << 32)
            | (u128::from(self.tick) << 64)
            | (u128::from(self.far) << 96)
    }
}

/// A ladder in the pool: whose it is (its stock side, as [`span_of`]) and how many of its
/// cells are levels.
#[derive(Clone, Copy, Default)]
struct Ladder {
    side: u32,
    live: u32,
}

/// The price levels: ladders (each stock side's levels near where it trades, in a direct array
/// by price: found with no search, emptied by a store) and a far store for the rest (fixed
/// places, and an index from (stock, side, price) to a place). An order keeps its level's
/// place, so that an execution, cancel or delete goes from the order straight to its level.
struct Levels {
    /// By stock side ([`span_of`]): [`Head`]s as words.
    heads: Box<[u128]>,
    /// The pool of ladders, given out in order as stock sides first rest an order.
    ladders: Box<[Ladder]>,
    cells: Box<[Cell]>,
    used_ladders: usize,
    /// Levels in ladders.
    in_ladders: usize,
    /// The cap on levels, ladders and far store together.
    max: usize,
    index: Table<u32>,
    store: Box<[Level]>,
    /// Far places freed, to reuse first (capacity: every place; never grows).
    free: Vec<u32>,
    /// Far places never used yet: `fresh..store.len()`.
    fresh: u32,
    /// Each stock side's far levels' lowest and highest prices.
    spans: Box<[u64]>,
}

impl Levels {
    /// Room for `max` levels, with `ladders` ladders (at most one a stock side).
    fn new(max: usize, ladders: usize) -> Levels {
        let max = max.clamp(1, MAX_FAR);
        let ladders = ladders.min(SIDES);
        Levels {
            heads: vec![0; SIDES].into_boxed_slice(),
            ladders: huge_page_array(ladders, Ladder::default()),
            cells: huge_page_array(ladders * LADDER, FREE_CELL),
            used_ladders: 0,
            in_ladders: 0,
            max,
            index: Table::new(max, NO_LEVEL, Placement::Clustered),
            store: huge_page_array(max, FREE_LEVEL),
            free: Vec::with_capacity(max),
            fresh: 0,
            spans: vec![0; SIDES].into_boxed_slice(),
        }
    }

    fn clear(&mut self) {
        for head in self.heads.iter_mut() {
            *head = 0;
        }
        // A ladder's cells are cleared when it is given out again.
        self.used_ladders = 0;
        self.in_ladders = 0;
        // The far store's places are reached only through the index and the free list: a
        // place is written in full when it is given out again.
        self.index.clear();
        self.free.clear();
        self.fresh = 0;
        for span in self.spans.iter_mut() {
            *span = 0;
        }
    }

    /// Levels in use.
    #[inline(always)]
    fn len(&self) -> usize {
        self.in_ladders + self.index.len
    }

    /// The ladder cell `price` has on a side whose head is `head`, if its ladder covers it.
    #[inline(always)]
    fn ladder_place(head: Head, price: u32) -> Option<u32> {
        if head.ladder == 0 {
            return None;
        }
        // Below the base: wraps to a step far past the ladder.
        let from = price.wrapping_sub(head.base);
        let step = if head.tick == 100 {
            if from % 100 != 0 {
                return None;
            }
            from / 100
        } else {
            from
        };
        if step as usize >= LADDER {
            return None;
        }
        Some(((head.ladder - 1) << LADDER_SHIFT) | step)
    }

    /// The place of an existing level.
    #[inline(always)]
    fn find(&self, locate: u16, side: Side, price: u32) -> Option<u32> {
        match Self::ladder_place(self.head(span_of(locate, side)), price) {
            Some(place) => (self.cells[place as usize].orders > 0).then_some(place),
            None => self.far_place(level_key(locate, side, price)),
        }
    }

    /// The place of the far level `key`, if there is one.
    #[inline(always)]
    fn far_place(&self, key: u64) -> Option<u32> {
        self.index
            .find(key)
            .map(|at| self.index.slots[at].value | FAR)
    }

    /// Asks the cache for where the level at `locate`, `side`, `price` is or will be: its
    /// ladder cell, else (when the side has far levels) its far index slot.
    #[inline(always)]
    fn prefetch(&self, locate: u16, side: Side, price: u32) {
        let head = self.head(span_of(locate, side));
        match Self::ladder_place(head, price) {
            Some(place) => prefetch(self.cells.as_ptr().wrapping_add(place as usize)),
            None if head.far > 0 => self.index.prefetch(level_key(locate, side, price)),
            None => {}
        }
    }

    /// The place of an existing far level (none when a ladder covers the price).
    #[inline(always)]
    fn find_far(&self, locate: u16, side: Side, price: u32) -> Option<u32> {
        let head = self.head(span_of(locate, side));
        if head.far == 0 || Self::ladder_place(head, price).is_some() {
            return None;
        }
        self.far_place(level_key(locate, side, price))
    }

    /// Where a level's cell is, for a prefetch.
    #[inline(always)]
    fn cell_ptr(&self, place: u32) -> *const Cell {
        if place & FAR == 0 {
            self.cells.as_ptr().wrapping_add(place as usize)
        } else {
            self.store
                .as_ptr()
                .wrapping_add((place & !FAR) as usize)
                .cast::<Cell>()
        }
    }

    #[inline(always)]
    fn cell(&self, place: u32) -> &Cell {
        if place & FAR == 0 {
            &self.cells[place as usize]
        } else {
            &self.store[(place & !FAR) as usize].cell
        }
    }

    #[inline(always)]
    fn cell_mut(&mut self, place: u32) -> &mut Cell {
        if place & FAR == 0 {
            &mut self.cells[place as usize]
        } else {
            &mut self.store[(place & !FAR) as usize].cell
        }
    }

    /// A level's stock, side and price.
    #[inline(always)]
    fn whose(&self, place: u32) -> (u16, Side, u32) {
        if place & FAR == 0 {
            let side = self.ladders[(place >> LADDER_SHIFT) as usize].side;
            let price = self.cells[place as usize].price;
            let side_of_span = if side & 1 == 0 { Side::Bid } else { Side::Ask };
            ((side >> 1) as u16, side_of_span, price)
        } else {
            let level = &self.store[(place & !FAR) as usize];
            (level.locate, level.side, level.cell.price)
        }
    }

    /// Gives stock side `span` a ladder anchored around `price` (its ladder, if it has one,
    /// holds no level); `false` when the pool is used up.
    #[inline(never)]
    fn anchor(&mut self, span: usize, price: u32) -> bool {
        let mut head = self.head(span);
        if head.ladder == 0 {
            if self.used_ladders == self.ladders.len() {
                return false;
            }
            let ladder = self.used_ladders;
            self.used_ladders += 1;
            self.ladders[ladder] = Ladder {
                side: span as u32,
                live: 0,
            };
            for cell in &mut self.cells[ladder * LADDER..(ladder + 1) * LADDER] {
                *cell = FREE_CELL;
            }
            head.ladder = ladder as u32 + 1;
        }
        let tick = tick_at(price);
        head.tick = tick;
        // `price` mid-ladder (or as far up as it can be).
        head.base = price - (price / tick).min(LADDER as u32 / 2) * tick;
        self.heads[span] = head.word();
        true
    }

    #[inline(always)]
    fn head(&self, span: usize) -> Head {
        Head::from_word(self.heads[span])
    }

    /// The place of the level at `locate`, `side`, `price`, made (empty) if absent; `None` when
    /// absent and the cap is reached.
    #[inline(always)]
    fn get_or_make(&mut self, locate: u16, side: Side, price: u32) -> Option<u32> {
        let span = span_of(locate, side);
        let head = self.head(span);
        let place = match Self::ladder_place(head, price) {
            Some(place) => place,
            None => {
                let movable = head.far == 0
                    && (head.ladder == 0 || self.ladders[head.ladder as usize - 1].live == 0);
                match (movable && self.anchor(span, price))
                    .then(|| Self::ladder_place(self.head(span), price))
                    .flatten()
                {
                    Some(place) => place,
                    None => return self.far_get_or_make(locate, side, price),
                }
            }
        };
        if self.cells[place as usize].orders == 0 {
            if self.len() >= self.max {
                return None;
            }
            self.cells[place as usize] = Cell {
                shares: 0,
                orders: 0,
                price,
            };
            self.ladders[(place >> LADDER_SHIFT) as usize].live += 1;
            self.in_ladders += 1;
        }
        Some(place)
    }

    /// [`Levels::get_or_make`] in the far store.
    #[inline(never)]
    fn far_get_or_make(&mut self, locate: u16, side: Side, price: u32) -> Option<u32> {
        let key = level_key(locate, side, price);
        if let Some(place) = self.far_place(key) {
            return Some(place);
        }
        if self.len() >= self.max {
            return None;
        }
        let place = match self.free.pop() {
            Some(place) => {
                // The next new level's place, asked for now (a place freed long ago is cold).
                if let Some(&next) = self.free.last() {
                    prefetch(self.store.as_ptr().wrapping_add(next as usize));
                }
                place
            }
            None => {
                // The far store holds fewer than `max` levels, each at its own place.
                let place = self.fresh;
                self.fresh += 1;
                place
            }
        };
        self.index.insert(key, place);
        self.store[place as usize] = Level {
            cell: Cell {
                shares: 0,
                orders: 0,
                price,
            },
            locate,
            side,
        };
        let span = span_of(locate, side);
        let mut head = self.head(span);
        head.far += 1;
        self.heads[span] = head.word();
        let word = &mut self.spans[span];
        let mut range = Span::from_word(*word);
        range.low = range.low.min(price);
        range.high = range.high.max(price);
        *word = range.word();
        Some(place | FAR)
    }

    /// Frees the (emptied) level at `place`: a ladder cell is free once its order count is 0;
    /// a far level leaves the index and its place is reused.
    #[inline]
    fn release(&mut self, place: u32) {
        if place & FAR == 0 {
            self.cells[place as usize].orders = 0;
            self.ladders[(place >> LADDER_SHIFT) as usize].live -= 1;
            self.in_ladders -= 1;
            return;
        }
        let place = place & !FAR;
        let level = self.store[place as usize];
        if let Some(at) = self
            .index
            .find(level_key(level.locate, level.side, level.cell.price))
        {
            self.index.remove_at(at);
        }
        let span = span_of(level.locate, level.side);
        let mut head = self.head(span);
        head.far = head.far.saturating_sub(1);
        self.heads[span] = head.word();
        self.store[place as usize].cell.orders = 0;
        // Capacity for every place: never reallocates.
        self.free.push(place);
    }

    /// A stock side's levels, unordered: (price, shares, orders). Its ladder's cells, then its
    /// far levels, by walking the index from where its lowest price's probe starts to the end
    /// of the run past its highest (never the whole index unless the side spans more prices, in
    /// cents, than the index has slots).
    fn side(&self, locate: u16, side: Side) -> impl Iterator<Item = (u32, u64, u32)> + '_ {
        let head = self.head(span_of(locate, side));
        let cells: &[Cell] = if head.ladder == 0 {
            &[]
        } else {
            let ladder = head.ladder as usize - 1;
            &self.cells[ladder * LADDER..(ladder + 1) * LADDER]
        };
        let span = Span::from_word(self.spans[span_of(locate, side)]);
        let slots = self.index.slots.len();
        let (start, count) = if head.far == 0 || span.low > span.high {
            (0, 0)
        } else {
            let width = (span.high / 100 - span.low / 100) as usize + 1;
            let start = self.index.home(level_key(locate, side, span.low));
            if width >= slots {
                (0, slots)
            } else {
                // Past the highest price's home, the run goes on until an empty slot.
                let mut count = width;
                while count < slots
                    && self.index.slots[(start + count) & self.index.mask].key != EMPTY
                {
                    count += 1;
                }
                (start, count)
            }
        };
        let wanted = level_key(locate, side, 0) >> 32;
        let ladder = cells
            .iter()
            .filter(|cell| cell.orders > 0)
            .map(|cell| (cell.price, cell.shares, cell.orders));
        let far = (0..count).filter_map(move |i| {
            let slot = self.index.slots[(start + i) & self.index.mask];
            if slot.key == EMPTY || slot.key >> 32 != wanted {
                return None;
            }
            let level = self.store[slot.value as usize];
            Some((level.cell.price, level.cell.shares, level.cell.orders))
        });
        ladder.chain(far)
    }

    /// Every level, unordered: (locate, side, price, shares, orders).
    fn all(&self) -> impl Iterator<Item = (u16, Side, u32, u64, u32)> + '_ {
        let ladders = (0..self.used_ladders).flat_map(move |ladder| {
            (0..LADDER as u32)
                .map(move |step| ((ladder as u32) << LADDER_SHIFT) | step)
                .filter(|&place| self.cells[place as usize].orders > 0)
                .map(|place| {
                    let (locate, side, price) = self.whose(place);
                    let cell = self.cells[place as usize];
                    (locate, side, price, cell.shares, cell.orders)
                })
        });
        let far = self.index.iter().map(|(_, place)| {
            let l = self.store[place as usize];
            (l.locate, l.side, l.cell.price, l.cell.shares, l.cell.orders)
        });
        ladders.chain(far)
    }
}

/// The L3 book of every stock of one feed.
pub struct ItchBook {
    orders: Orders,
    levels: Levels,
    counters: BookCounters,
}

const NO_ORDER: Order = Order {
    shares: 0,
    level: NO_LEVEL,
};

/// How many messages ahead [`ItchBook::apply_batch`] asks for an order's cache line (and an
/// add's stock side head), and half of it ahead for the level the order rests at (measured on
/// the bench's day, BENCHMARKING.md).
pub const PREFETCH_AHEAD: usize = 16;

/// The order reference an order message names (`U`: the original), for prefetching.
#[inline(always)]
fn order_ref_of(message: &Message) -> Option<u64> {
    match *message {
        Message::OrderExecuted { order_ref, .. }
        | Message::OrderExecutedWithPrice { order_ref, .. }
        | Message::OrderCancel { order_ref, .. }
        | Message::OrderDelete { order_ref, .. }
        | Message::OrderReplace {
            original_ref: order_ref,
            ..
        } => Some(order_ref),
        _ => None,
    }
}

impl ItchBook {
    /// A book with its tables allocated at their full size.
    pub fn new(config: BookConfig) -> ItchBook {
        ItchBook::with_ladders(config, config.max_levels / LEVELS_PER_LADDER)
    }

    /// A book with `ladders` ladders instead of its config's share (tests: none, or a pool
    /// that runs out).
    fn with_ladders(config: BookConfig, ladders: usize) -> ItchBook {
        ItchBook {
            orders: Orders::new(config.max_orders),
            levels: Levels::new(config.max_levels, ladders),
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
        self.levels.len()
    }

    /// A resting order: (locate, side, price, shares).
    pub fn order(&self, order_ref: u64) -> Option<(u16, Side, u32, u32)> {
        let at = self.orders.find(order_ref)?;
        let o = self.orders.value(at);
        let (locate, side, price) = self.levels.whose(o.level);
        Some((locate, side, price, o.shares))
    }

    /// A level's aggregated shares and order count.
    pub fn level(&self, locate: u16, side: Side, price: u32) -> Option<(u64, u32)> {
        let cell = self.levels.cell(self.levels.find(locate, side, price)?);
        Some((cell.shares, cell.orders))
    }

    /// Every level, unordered: (locate, side, price, shares, orders). For tests.
    pub fn all_levels(&self) -> impl Iterator<Item = (u16, Side, u32, u64, u32)> + '_ {
        self.levels.all()
    }

    /// One stock side's levels, unordered: (price, shares, orders). It walks the part of the
    /// level index where that side's levels sit (from its lowest price to its highest since
    /// the book was cleared), not the whole book.
    pub fn side_levels(
        &self,
        locate: u16,
        side: Side,
    ) -> impl Iterator<Item = (u32, u64, u32)> + '_ {
        self.levels.side(locate, side)
    }

    /// Asks the cache for what `message` will touch first: the order it names (for an add,
    /// where it goes, and its level's ladder cell, or its far index slot). A hint: call it some
    /// messages before [`ItchBook::apply`]s the message (the live decoder does, for every
    /// message of a datagram), so that the memory is on its way while earlier messages are
    /// applied.
    #[inline(always)]
    pub fn prefetch(&self, message: &Message) {
        match *message {
            Message::AddOrder {
                header,
                order_ref,
                side,
                price,
                ..
            }
            | Message::AddOrderMpid {
                header,
                order_ref,
                side,
                price,
                ..
            } => {
                self.orders.prefetch(order_ref);
                self.levels.prefetch(header.locate, side_of(side), price);
            }
            Message::OrderReplace {
                original_ref,
                new_ref,
                ..
            } => {
                self.orders.prefetch(original_ref);
                self.orders.prefetch(new_ref);
            }
            _ => {
                if let Some(order_ref) = order_ref_of(message) {
                    self.orders.prefetch(order_ref);
                }
            }
        }
    }

    /// [`ItchBook::apply_batch`]'s first stage: as [`ItchBook::prefetch`], but an add's stock
    /// side head is asked for, not read (its level's cell is asked for by the second stage).
    #[inline(always)]
    fn prefetch_first(&self, message: &Message) {
        match *message {
            Message::AddOrder {
                header,
                order_ref,
                side,
                ..
            }
            | Message::AddOrderMpid {
                header,
                order_ref,
                side,
                ..
            } => {
                self.orders.prefetch(order_ref);
                prefetch(
                    self.levels
                        .heads
                        .as_ptr()
                        .wrapping_add(span_of(header.locate, side_of(side))),
                );
            }
            _ => self.prefetch(message),
        }
    }

    /// The same from a message's raw bytes (its type byte, stock locate and order reference at
    /// the specification's offsets), for a caller that has not parsed it yet: the live decoder
    /// calls it for every message of a datagram before applying the first. Anything short or
    /// of another type is ignored.
    #[inline]
    pub fn prefetch_raw(&self, bytes: &[u8]) {
        let word = |at: usize| {
            bytes
                .get(at..at + 8)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
        };
        match bytes.first() {
            Some(b'A' | b'F') if bytes.len() >= 36 => {
                if let Some(order_ref) = word(11) {
                    self.orders.prefetch(order_ref);
                }
                let locate = u16::from_be_bytes([bytes[1], bytes[2]]);
                let price = u32::from_be_bytes([bytes[32], bytes[33], bytes[34], bytes[35]]);
                self.levels.prefetch(locate, side_of(bytes[19]), price);
            }
            Some(b'E' | b'C' | b'X' | b'D' | b'U') => {
                if let Some(order_ref) = word(11) {
                    self.orders.prefetch(order_ref);
                }
            }
            _ => {}
        }
    }

    /// The second stage: with the order's line in cache (from [`ItchBook::prefetch`]), asks
    /// for its level's; for an add whose level is in the far store, the level's (when it
    /// exists) from the index (a ladder's cell was asked for by the first stage).
    #[inline(always)]
    fn prefetch_level(&self, message: &Message) {
        let place = match *message {
            Message::AddOrder {
                header,
                order_ref,
                side,
                price,
                ..
            }
            | Message::AddOrderMpid {
                header,
                order_ref,
                side,
                price,
                ..
            } => {
                // An older live order in the add's direct slot will move to the overflow.
                self.orders.prefetch_displaced(order_ref);
                // The ladder cell, or the far index slot (the far place: the third stage).
                self.levels.prefetch(header.locate, side_of(side), price);
                return;
            }
            // An order out of its direct slot (an old one, in the overflow) has its overflow
            // slot asked for now, and its level by the third stage.
            _ => match order_ref_of(message).and_then(|r| self.orders.find_direct_or_prefetch(r)) {
                Some(at) => self.orders.direct[at].value.level,
                None => return,
            },
        };
        prefetch(self.levels.cell_ptr(place));
    }

    /// The third stage: with the order's and its level's lines in cache, asks for what else a
    /// message will change: a replace's new level (its ladder cell, or its far index slot),
    /// and a far level's index slot when this order may be its last (an emptied far level
    /// leaves the index; an emptied ladder cell changes nothing else). An order in the
    /// overflow has its level asked for here.
    #[inline(always)]
    fn prefetch_index(&self, message: &Message) {
        if let Message::AddOrder {
            header,
            side,
            price,
            ..
        }
        | Message::AddOrderMpid {
            header,
            side,
            price,
            ..
        } = *message
        {
            if let Some(place) = self.levels.find_far(header.locate, side_of(side), price) {
                prefetch(self.levels.cell_ptr(place));
            }
            return;
        }
        let Some(at) = order_ref_of(message).and_then(|r| self.orders.find(r)) else {
            return;
        };
        let place = self.orders.value(at).level;
        if at & OVERFLOW != 0 {
            prefetch(self.levels.cell_ptr(place));
        }
        match *message {
            Message::OrderReplace { price, .. } => {
                let (locate, side, _) = self.levels.whose(place);
                self.levels.prefetch(locate, side, price);
            }
            _ if place & FAR != 0 && self.levels.cell(place).orders <= 1 => {
                let (locate, side, price) = self.levels.whose(place);
                self.levels.index.prefetch(level_key(locate, side, price));
            }
            _ => {}
        }
    }

    /// Applies `messages` in order as [`ItchBook::apply`] does, each change reported with its
    /// message's index in `messages`, each refusal through `refused`; meanwhile it asks the
    /// cache for the order of the message [`PREFETCH_AHEAD`] ahead, for the level of the one
    /// half as far ahead, and for what else the one a quarter as far ahead changes, so
    /// that up to that many misses overlap instead of one after another (the book is hundreds
    /// of MB: most of a message's time is waiting for memory).
    pub fn apply_batch(
        &mut self,
        messages: &[Message],
        out: &mut impl FnMut(usize, BookOutput),
        refused: &mut impl FnMut(usize, BookError),
    ) {
        self.apply_batch_ahead::<PREFETCH_AHEAD, { PREFETCH_AHEAD / 2 }, { PREFETCH_AHEAD / 4 }>(
            messages, out, refused,
        )
    }

    /// [`ItchBook::apply_batch`] with its three prefetch distances chosen (0: that stage off),
    /// for the bench to compare them.
    #[doc(hidden)]
    #[inline]
    pub fn apply_batch_ahead<const ORDER: usize, const LEVEL: usize, const INDEX: usize>(
        &mut self,
        messages: &[Message],
        out: &mut impl FnMut(usize, BookOutput),
        refused: &mut impl FnMut(usize, BookError),
    ) {
        if ORDER > 0 {
            for message in messages.iter().take(ORDER) {
                self.prefetch_first(message);
            }
        }
        if LEVEL > 0 {
            for message in messages.iter().take(LEVEL) {
                self.prefetch_level(message);
            }
        }
        for (index, message) in messages.iter().enumerate() {
            if ORDER > 0 {
                if let Some(ahead) = messages.get(index + ORDER) {
                    self.prefetch_first(ahead);
                }
            }
            if LEVEL > 0 {
                if let Some(ahead) = messages.get(index + LEVEL) {
                    self.prefetch_level(ahead);
                }
            }
            if INDEX > 0 {
                if let Some(ahead) = messages.get(index + INDEX) {
                    self.prefetch_index(ahead);
                }
            }
            if let Err(error) = self.apply(message, &mut |change| out(index, change)) {
                refused(index, error);
            }
        }
    }

    /// Takes `shares` (and an order when `gone`) off the level at `place` (`whose`: its stock,
    /// side and price), reporting it (removed at 0).
    #[inline(always)]
    fn level_sub(
        &mut self,
        place: u32,
        (locate, side, price): (u16, Side, u32),
        shares: u32,
        gone: bool,
        out: &mut impl FnMut(BookOutput),
    ) {
        let level = self.levels.cell_mut(place);
        level.shares = level.shares.saturating_sub(u64::from(shares));
        if gone {
            level.orders = level.orders.saturating_sub(1);
        }
        let shares = if level.orders == 0 {
            self.levels.release(place);
            0
        } else {
            level.shares
        };
        out(BookOutput::Level {
            locate,
            side,
            price,
            shares,
        });
    }

    /// Takes shares off a resting order (an execution or a cancel; `None`: all of them, a
    /// delete); `None` when the order is unknown, else its side and price.
    #[inline(always)]
    fn reduce(
        &mut self,
        order_ref: u64,
        locate: u16,
        shares: Option<u32>,
        out: &mut impl FnMut(BookOutput),
    ) -> Option<(u16, Side, u32)> {
        let Some(at) = self.orders.find(order_ref) else {
            self.counters.unknown_ref += 1;
            return None;
        };
        let order = self.orders.value(at);
        let whose = self.levels.whose(order.level);
        if whose.0 != locate {
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
            self.orders.value_mut(at).shares -= taken;
        }
        self.level_sub(order.level, whose, taken, gone, out);
        Some(whose)
    }

    /// Rests a new order.
    #[inline(always)]
    fn add(
        &mut self,
        order_ref: u64,
        locate: u16,
        side: Side,
        shares: u32,
        price: u32,
        out: &mut impl FnMut(BookOutput),
    ) -> Result<(), BookError> {
        if side == Side::None || shares == 0 || order_ref == EMPTY {
            self.counters.bad_add += 1;
            return Ok(());
        }
        if self.orders.find(order_ref).is_some() {
            self.counters.reused_ref += 1;
            return Ok(());
        }
        if self.orders.len >= self.orders.max {
            return Err(BookError::OrdersFull {
                max: self.orders.max,
                order_ref,
            });
        }
        let place = self
            .levels
            .get_or_make(locate, side, price)
            .ok_or(BookError::LevelsFull {
                max: self.levels.max,
                order_ref,
            })?;
        self.orders.insert(
            order_ref,
            Order {
                shares,
                level: place,
            },
        );
        let level = self.levels.cell_mut(place);
        level.shares += u64::from(shares);
        level.orders += 1;
        out(BookOutput::Level {
            locate,
            side,
            price,
            shares: level.shares,
        });
        Ok(())
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
            } => self.add(order_ref, header.locate, side_of(side), shares, price, out)?,
            Message::OrderExecuted {
                header,
                order_ref,
                executed_shares,
                match_number,
            } => {
                if let Some((locate, side, price)) =
                    self.reduce(order_ref, header.locate, Some(executed_shares), out)
                {
                    out(BookOutput::Trade {
                        locate,
                        price,
                        shares: u64::from(executed_shares),
                        match_number,
                        aggressor: opposite(side),
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
                if let Some((locate, side, _)) =
                    self.reduce(order_ref, header.locate, Some(executed_shares), out)
                {
                    if printable == b'Y' {
                        out(BookOutput::Trade {
                            locate,
                            price: execution_price,
                            shares: u64::from(executed_shares),
                            match_number,
                            aggressor: opposite(side),
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
                let old = self.orders.value(at);
                let whose = self.levels.whose(old.level);
                let (locate, side, old_price) = whose;
                if locate != header.locate {
                    self.counters.locate_mismatch += 1;
                }
                self.orders.remove_at(at);
                if shares == 0 {
                    self.counters.bad_add += 1;
                    self.level_sub(old.level, whose, old.shares, true, out);
                    return Ok(());
                }
                if old_price == price {
                    // Same level: one report, with the new total. The order table had room
                    // for the original, so it has room for the new order.
                    self.orders.insert(
                        new_ref,
                        Order {
                            shares,
                            level: old.level,
                        },
                    );
                    let stored = self.levels.cell_mut(old.level);
                    stored.shares =
                        stored.shares.saturating_sub(u64::from(old.shares)) + u64::from(shares);
                    out(BookOutput::Level {
                        locate,
                        side,
                        price,
                        shares: stored.shares,
                    });
                    return Ok(());
                }
                self.level_sub(old.level, whose, old.shares, true, out);
                self.add(new_ref, locate, side, shares, price, out)?;
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
        let config = BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 16,
        };
        long_session(ItchBook::new(config), 200_000, |n| n);
        long_session(ItchBook::new(config), 20_000, |n| (n << 17) + n % 5);
        // Every level in the far store; and a pool of ladders that runs out (50 stocks, 100
        // sides, 60 ladders).
        long_session(ItchBook::with_ladders(config, 0), 50_000, |n| n);
        long_session(ItchBook::with_ladders(config, 60), 100_000, |n| n);
    }

    fn long_session(mut book: ItchBook, steps: u64, reference_of: fn(u64) -> u64) {
        let mut reference = Reference::default();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut live: Vec<u64> = Vec::new();
        let mut next_ref = 1u64;
        let mut outputs = Vec::new();
        let mut pending: Vec<(Message, Vec<BookOutput>)> = Vec::new();
        for step in 0..steps {
            let pick = |rng: &mut Rng, live: &Vec<u64>| -> u64 {
                if live.is_empty() || rng.below(50) == 0 {
                    1_000_000_000 + rng.below(1000) // unknown
                } else {
                    live[rng.below(live.len() as u64) as usize]
                }
            };
            // Most prices on 40 cent levels; now and then a sub-penny one, a far one, and one
            // so far that the side spans more cents than the level index has slots.
            // And a fifth around a price that drifts $1.50 every 2,000 steps, past any ladder's
            // reach (ladders move only when their side has no level left, so this makes far
            // levels beside ladder ones, and moves sides' ladders).
            let drift = 100_000 + (step / 2_000) as u32 * 15_000;
            let price = |rng: &mut Rng| match rng.below(400) {
                0 => rng.below(u64::from(u32::MAX)) as u32,
                1..=4 => 1 + rng.below(300_000) as u32,
                5..=9 => 100_000 + rng.below(4_000) as u32,
                10..=89 => drift + rng.below(40) as u32 * 100,
                _ => 100_000 + rng.below(40) as u32 * 100,
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
                    price: price(&mut rng),
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
                    price: price(&mut rng),
                }
            };
            let expected = reference.apply(&message);
            if step < steps / 2 {
                outputs.clear();
                book.apply(&message, &mut |o| outputs.push(o))
                    .expect("room");
                assert_eq!(outputs, expected, "step {step}: {message:?}");
            } else {
                // The second half through `apply_batch`, in batches of 1 to 40 messages.
                pending.push((message, expected));
            }
            let check = step % 5_000 == 0 || step == steps - 1;
            if !pending.is_empty() && (pending.len() > (step % 40) as usize || check) {
                let messages: Vec<Message> = pending.iter().map(|(m, _)| *m).collect();
                let mut got = vec![Vec::new(); messages.len()];
                book.apply_batch(
                    &messages,
                    &mut |index, o| got[index].push(o),
                    &mut |index, error| panic!("message {index}: {error}"),
                );
                for ((message, expected), got) in pending.iter().zip(&got) {
                    assert_eq!(got, expected, "step {step} (batch): {message:?}");
                }
                pending.clear();
            }
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
            if check {
                for locate in 0..=51 {
                    for side in [Side::Bid, Side::Ask] {
                        let mut levels: Vec<_> = book
                            .side_levels(locate, side)
                            .map(|(price, shares, _)| (price, shares))
                            .collect();
                        levels.sort_unstable();
                        let want: Vec<_> = reference
                            .levels
                            .range((locate, side as u8, 0)..=(locate, side as u8, u32::MAX))
                            .map(|(k, v)| (k.2, *v))
                            .collect();
                        assert_eq!(levels, want, "step {step}: stock {locate} {side:?}");
                    }
                }
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

    fn add_at(locate: u16, order_ref: u64, side: u8, shares: u32, price: u32) -> Message {
        Message::AddOrder {
            header: header(locate),
            order_ref,
            side,
            shares,
            stock: Symbol(*b"STOCK   "),
            price,
        }
    }

    fn delete(locate: u16, order_ref: u64) -> Message {
        Message::OrderDelete {
            header: header(locate),
            order_ref,
        }
    }

    fn run(book: &mut ItchBook, message: Message) -> Vec<BookOutput> {
        let mut out = Vec::new();
        book.apply(&message, &mut |o| out.push(o)).expect("room");
        out
    }

    fn level(locate: u16, side: Side, price: u32, shares: u64) -> Vec<BookOutput> {
        vec![BookOutput::Level {
            locate,
            side,
            price,
            shares,
        }]
    }

    /// (ladder levels, far levels).
    fn split(book: &ItchBook) -> (usize, usize) {
        (book.levels.in_ladders, book.levels.index.len)
    }

    fn sorted_side(book: &ItchBook, locate: u16, side: Side) -> Vec<(u32, u64, u32)> {
        let mut levels: Vec<_> = book.side_levels(locate, side).collect();
        levels.sort_unstable();
        levels
    }

    /// A side's ladder covers 128 cents around its first price; a price off the ladder (or off
    /// its cent grid) is a far level; the ladder moves to a new price only when the side has no
    /// level left, ladder or far; a price is never in both.
    #[test]
    fn ladders_hold_a_side_near_its_first_price_and_move_only_when_it_has_no_level() {
        let mut book = ItchBook::new(BookConfig {
            max_orders: 64,
            max_levels: 64,
        });
        let bid = Side::Bid;
        // $100.00 anchors the ladder: $99.36 to $100.63 a cent apart.
        assert_eq!(
            run(&mut book, add_at(7, 1, b'B', 100, 1_000_000)),
            level(7, bid, 1_000_000, 100)
        );
        assert_eq!(split(&book), (1, 0));
        // $102.00 is past it, $100.005 between its cents: far levels.
        run(&mut book, add_at(7, 2, b'B', 50, 1_020_000));
        run(&mut book, add_at(7, 3, b'B', 10, 1_000_050));
        assert_eq!(split(&book), (1, 2));
        // The ladder empties, but the far levels keep it where it is.
        assert_eq!(run(&mut book, delete(7, 1)), level(7, bid, 1_000_000, 0));
        assert_eq!(
            run(&mut book, add_at(7, 4, b'B', 20, 1_020_000)),
            level(7, bid, 1_020_000, 70)
        );
        assert_eq!(book.level(7, bid, 1_020_000), Some((70, 2)));
        assert_eq!(split(&book), (0, 2));
        for order_ref in [2, 4, 3] {
            run(&mut book, delete(7, order_ref));
        }
        assert_eq!(split(&book), (0, 0));
        // Nothing left on the side: the ladder moves to $102.00 ($101.36 to $102.63).
        run(&mut book, add_at(7, 5, b'B', 30, 1_020_000));
        run(&mut book, add_at(7, 6, b'B', 40, 1_013_600));
        run(&mut book, add_at(7, 7, b'B', 1, 1_026_300));
        assert_eq!(split(&book), (3, 0));
        run(&mut book, add_at(7, 8, b'B', 2, 1_026_400));
        assert_eq!(split(&book), (3, 1));
        assert_eq!(
            sorted_side(&book, 7, bid),
            vec![
                (1_013_600, 40, 1),
                (1_020_000, 30, 1),
                (1_026_300, 1, 1),
                (1_026_400, 2, 1)
            ]
        );
        assert_eq!(book.order(8), Some((7, bid, 1_026_400, 2)));
        assert_eq!(book.order(7), Some((7, bid, 1_026_300, 1)));
        // Below $1 the ladder's step is the specification's 0.0001.
        run(&mut book, add_at(7, 9, b'S', 5, 5_000));
        run(&mut book, add_at(7, 10, b'S', 6, 5_001));
        run(&mut book, add_at(7, 11, b'S', 7, 5_063));
        assert_eq!(split(&book), (6, 1));
        assert_eq!(
            sorted_side(&book, 7, Side::Ask),
            vec![(5_000, 5, 1), (5_001, 6, 1), (5_063, 7, 1)]
        );
        // Two ladders (64 levels of cap): the third side rests far.
        run(&mut book, add_at(8, 12, b'B', 9, 1_000_000));
        assert_eq!(split(&book), (6, 2));
        assert_eq!(book.order(12), Some((8, bid, 1_000_000, 9)));
        let mut all: Vec<_> = book.all_levels().collect();
        all.sort_unstable_by_key(|l| (l.0, l.1 as u8, l.2));
        assert_eq!(all.len(), 8);
        assert_eq!(all[0], (7, bid, 1_013_600, 40, 1));
        assert_eq!(all[7], (8, bid, 1_000_000, 9, 1));
        // Clearing gives the ladders out again.
        book.clear();
        assert_eq!(split(&book), (0, 0));
        run(&mut book, add_at(9, 13, b'S', 3, u32::MAX));
        run(&mut book, add_at(9, 14, b'S', 4, u32::MAX - 100));
        run(&mut book, add_at(9, 15, b'B', 5, 0));
        assert_eq!(split(&book), (3, 0));
        assert_eq!(
            sorted_side(&book, 9, Side::Ask),
            vec![(u32::MAX - 100, 4, 1), (u32::MAX, 3, 1)]
        );
        assert_eq!(sorted_side(&book, 9, bid), vec![(0, 5, 1)]);
        assert_eq!(book.counters(), BookCounters::default());
    }
}
