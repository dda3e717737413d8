//! The synthetic MBO market of the mock gateway: one limit order book per instrument, changed by
//! events that follow Databento's MBO rules, and the bounded history of the records it made.
//!
//! The rules (Databento's "MBO" schema documentation, "Order book actions"): `A` adds an order;
//! `C` cancels `size` of a resting order (all of it, or part: a partial cancel); `M` gives a
//! resting order a new price and size (a new price or a larger size loses queue priority); `T`
//! is a trade (the aggressor's side, no book change); `F` is a fill of a resting order (no book
//! change either: the `C` or `M` that follows it takes the filled size off the book); `R` clears
//! the book. Each event's last record carries `flags::LAST`.
//!
//! **Invariant:** every `C`, `M` and `F` names an order that rests on the book with at least the
//! size it takes off, and the book is never crossed (best bid below best ask). A client that
//! applies the records in order from the market's start, from a snapshot, or from a replay
//! position, holds the generator's book.

use crate::source::SplitMix64;
use dbn::{flags, rtype, FlagSet, MboMsg, RecordHeader, UNDEF_PRICE};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::c_char;

/// The publisher of every synthetic record: 1 is GLBX.MDP3 (CME Globex) in Databento's
/// publisher table (`dbn::Publisher::GlbxMdp3Glbx`).
pub const PUBLISHER_ID: u16 = 1;

/// The first synthetic instrument's id; the n-th (from 0) is this plus n.
pub const FIRST_INSTRUMENT_ID: u32 = 1001;

/// The price tick, in DBN's 1e-9 units: 0.25, as for CME equity index futures.
pub const TICK: i64 = 250_000_000;

/// `ts_recv - ts_event` of every synthetic record.
const RECV_DELAY_NS: u64 = 2_000;

/// `ts_in_delta` of every synthetic record: the venue's send to the gateway's receive.
const IN_DELTA_NS: i32 = 1_500;

/// Below this many resting orders an instrument only adds; above [`MAX_ORDERS`] it only cancels.
const MIN_ORDERS: usize = 16;
const MAX_ORDERS: usize = 400;

/// Adds land up to this many ticks behind the mid.
const ADD_DEPTH_TICKS: u64 = 10;

/// One in this many events clears an instrument's book.
const CLEAR_ONE_IN: u64 = 50_000;

const BID: u8 = b'B';
const ASK: u8 = b'A';
const NO_SIDE: u8 = b'N';

#[derive(Clone, Copy, Debug)]
struct Order {
    side: u8,
    price_ticks: i64,
    size: u32,
    /// Its position in `Book::live`.
    slot: usize,
}

/// One instrument's book: orders by id, FIFO queues per price level, and the live ids in a
/// vector for picking one at random.
struct Book {
    instrument_id: u32,
    mid_ticks: i64,
    orders: HashMap<u64, Order>,
    live: Vec<u64>,
    bids: BTreeMap<i64, VecDeque<u64>>,
    asks: BTreeMap<i64, VecDeque<u64>>,
}

impl Book {
    fn levels(&mut self, side: u8) -> &mut BTreeMap<i64, VecDeque<u64>> {
        if side == BID {
            &mut self.bids
        } else {
            &mut self.asks
        }
    }

    fn best_bid(&self) -> Option<i64> {
        self.bids.keys().next_back().copied()
    }

    fn best_ask(&self) -> Option<i64> {
        self.asks.keys().next().copied()
    }

    fn insert(&mut self, order_id: u64, side: u8, price_ticks: i64, size: u32) {
        let slot = self.live.len();
        self.live.push(order_id);
        self.orders.insert(
            order_id,
            Order {
                side,
                price_ticks,
                size,
                slot,
            },
        );
        self.levels(side)
            .entry(price_ticks)
            .or_default()
            .push_back(order_id);
    }

    fn unqueue(&mut self, order_id: u64, side: u8, price_ticks: i64) {
        let levels = self.levels(side);
        if let Some(queue) = levels.get_mut(&price_ticks) {
            queue.retain(|&id| id != order_id);
            if queue.is_empty() {
                levels.remove(&price_ticks);
            }
        }
    }

    fn remove(&mut self, order_id: u64) -> Option<Order> {
        let order = self.orders.remove(&order_id)?;
        self.unqueue(order_id, order.side, order.price_ticks);
        self.live.swap_remove(order.slot);
        if let Some(&moved) = self.live.get(order.slot) {
            if let Some(moved) = self.orders.get_mut(&moved) {
                moved.slot = order.slot;
            }
        }
        Some(order)
    }

    /// A new price or a larger size sends the order to the back of its (new) level's queue.
    fn modify(&mut self, order_id: u64, price_ticks: i64, size: u32) {
        let Some(&order) = self.orders.get(&order_id) else {
            return;
        };
        if price_ticks != order.price_ticks || size > order.size {
            self.unqueue(order_id, order.side, order.price_ticks);
            self.levels(order.side)
                .entry(price_ticks)
                .or_default()
                .push_back(order_id);
        }
        if let Some(order) = self.orders.get_mut(&order_id) {
            order.price_ticks = price_ticks;
            order.size = size;
        }
    }

    fn clear(&mut self) {
        self.orders.clear();
        self.live.clear();
        self.bids.clear();
        self.asks.clear();
    }

    /// A price for a new or moved order on `side` about `depth` ticks behind the mid, never at or
    /// through the other side's best price, and never below one tick.
    fn passive_price(&self, side: u8, depth: i64) -> i64 {
        if side == BID {
            let price = self.mid_ticks - depth;
            self.best_ask()
                .map_or(price, |ask| price.min(ask - 1))
                .max(1)
        } else {
            let price = self.mid_ticks + depth;
            let floor = self.best_bid().map_or(1, |bid| bid + 1);
            price.max(floor)
        }
    }
}

/// The generator: the books, the ids and sequence numbers, and the clock of its records.
pub struct Generator {
    rng: SplitMix64,
    books: Vec<Book>,
    next_order_id: u64,
    sequence: u32,
    last_ts_ns: u64,
}

impl Generator {
    /// Empty books for `instruments` instruments (ids from [`FIRST_INSTRUMENT_ID`]).
    pub fn new(instruments: usize, seed: u64) -> Generator {
        Generator {
            rng: SplitMix64::new(seed ^ 0x6462_6e5f_7369_6d00),
            books: (0..instruments)
                .map(|position| Book {
                    instrument_id: FIRST_INSTRUMENT_ID + position as u32,
                    // 5000.00 and up, 1000.00 apart, in 0.25 ticks.
                    mid_ticks: 20_000 + 4_000 * position as i64,
                    orders: HashMap::new(),
                    live: Vec::new(),
                    bids: BTreeMap::new(),
                    asks: BTreeMap::new(),
                })
                .collect(),
            next_order_id: 10_000_000,
            sequence: 0,
            last_ts_ns: 0,
        }
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one argument per field of the record it makes, as MboMsg's own layout lists them"
    )]
    fn record(
        &mut self,
        book: usize,
        ts_event: u64,
        action: u8,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
    ) -> MboMsg {
        self.sequence = self.sequence.wrapping_add(1);
        MboMsg {
            hd: RecordHeader::new::<MboMsg>(
                rtype::MBO,
                PUBLISHER_ID,
                self.books[book].instrument_id,
                ts_event,
            ),
            order_id,
            price,
            size,
            flags: FlagSet::empty(),
            channel_id: 0,
            action: action as c_char,
            side: side as c_char,
            ts_recv: ts_event + RECV_DELAY_NS,
            ts_in_delta: IN_DELTA_NS,
            sequence: self.sequence,
        }
    }

    /// Makes one event of a random instrument at `now_ns` (or just after the last event, so
    /// that `ts_event` strictly increases from event to event; the records of one event share
    /// it) and appends its records to `out`, the last flagged `LAST`. Returns how many.
    pub fn step(&mut self, now_ns: u64, out: &mut Vec<MboMsg>) -> usize {
        if self.books.is_empty() {
            return 0;
        }
        let ts = now_ns.max(self.last_ts_ns + 1);
        self.last_ts_ns = ts;
        let book = self.rng.below(self.books.len() as u64) as usize;
        let before = out.len();
        if self.rng.chance(100) {
            let mid = &mut self.books[book].mid_ticks;
            if self.rng.chance(500) {
                *mid += 1;
            } else if *mid > 100 {
                *mid -= 1;
            }
        }
        let resting = self.books[book].live.len();
        let roll = self.rng.below(100);
        if self.rng.below(CLEAR_ONE_IN) == 0 {
            self.books[book].clear();
            let record = self.record(book, ts, b'R', NO_SIDE, 0, UNDEF_PRICE, 0);
            out.push(record);
        } else if resting < MIN_ORDERS || (roll < 45 && resting < MAX_ORDERS) {
            self.add(book, ts, out);
        } else if roll < 65 || resting >= MAX_ORDERS {
            self.cancel(book, ts, false, out);
        } else if roll < 75 {
            self.cancel(book, ts, true, out);
        } else if roll < 85 {
            self.modify(book, ts, out);
        } else if !self.trade(book, ts, out) {
            self.add(book, ts, out);
        }
        if let Some(last) = out.last_mut() {
            last.flags = FlagSet::new(last.flags.raw() | flags::LAST);
        }
        out.len() - before
    }

    fn add(&mut self, book: usize, ts: u64, out: &mut Vec<MboMsg>) {
        let side = if self.rng.chance(500) { BID } else { ASK };
        let depth = 1 + self.rng.below(ADD_DEPTH_TICKS) as i64;
        let size = 1 + self.rng.below(20) as u32;
        let price_ticks = self.books[book].passive_price(side, depth);
        let order_id = self.next_order_id;
        self.next_order_id += 1;
        self.books[book].insert(order_id, side, price_ticks, size);
        let record = self.record(book, ts, b'A', side, order_id, price_ticks * TICK, size);
        out.push(record);
    }

    fn pick(&mut self, book: usize) -> Option<(u64, Order)> {
        let live = &self.books[book].live;
        if live.is_empty() {
            return None;
        }
        let order_id = live[self.rng.below(live.len() as u64) as usize];
        let order = self.books[book].orders.get(&order_id).copied()?;
        Some((order_id, order))
    }

    fn cancel(&mut self, book: usize, ts: u64, partial: bool, out: &mut Vec<MboMsg>) {
        let Some((order_id, order)) = self.pick(book) else {
            return self.add(book, ts, out);
        };
        let size = if partial && order.size > 1 {
            let cancelled = 1 + self.rng.below(u64::from(order.size - 1)) as u32;
            self.books[book].modify(order_id, order.price_ticks, order.size - cancelled);
            cancelled
        } else {
            self.books[book].remove(order_id);
            order.size
        };
        let record = self.record(
            book,
            ts,
            b'C',
            order.side,
            order_id,
            order.price_ticks * TICK,
            size,
        );
        out.push(record);
    }

    fn modify(&mut self, book: usize, ts: u64, out: &mut Vec<MboMsg>) {
        let Some((order_id, order)) = self.pick(book) else {
            return self.add(book, ts, out);
        };
        let (price_ticks, size) = if self.rng.chance(500) {
            // Take the order off the book first, so that its own price does not bound the move.
            self.books[book].unqueue(order_id, order.side, order.price_ticks);
            let depth = 1 + self.rng.below(ADD_DEPTH_TICKS) as i64;
            let price_ticks = self.books[book].passive_price(order.side, depth);
            self.books[book]
                .levels(order.side)
                .entry(order.price_ticks)
                .or_default()
                .push_back(order_id);
            (price_ticks, order.size)
        } else {
            (order.price_ticks, 1 + self.rng.below(20) as u32)
        };
        self.books[book].modify(order_id, price_ticks, size);
        let record = self.record(
            book,
            ts,
            b'M',
            order.side,
            order_id,
            price_ticks * TICK,
            size,
        );
        out.push(record);
    }

    /// An aggressor takes part of the other side's best level, in queue order: `T`, then per
    /// resting order filled an `F` and the `C` (filled entirely) or `M` (partly) that takes the
    /// fill off the book. False when the other side is empty.
    fn trade(&mut self, book: usize, ts: u64, out: &mut Vec<MboMsg>) -> bool {
        let aggressor = if self.rng.chance(500) { BID } else { ASK };
        let resting_side = if aggressor == BID { ASK } else { BID };
        let level = {
            let state = &self.books[book];
            let best = if aggressor == BID {
                state.best_ask()
            } else {
                state.best_bid()
            };
            let Some(price_ticks) = best else {
                return false;
            };
            let queue = if aggressor == BID {
                &state.asks[&price_ticks]
            } else {
                &state.bids[&price_ticks]
            };
            let orders: Vec<(u64, u32)> = queue
                .iter()
                .filter_map(|id| state.orders.get(id).map(|order| (*id, order.size)))
                .collect();
            (price_ticks, orders)
        };
        let (price_ticks, queue) = level;
        let available: u64 = queue.iter().map(|&(_, size)| u64::from(size)).sum();
        if available == 0 {
            return false;
        }
        let mut remaining = 1 + self.rng.below(available.min(60));
        let price = price_ticks * TICK;
        let record = self.record(book, ts, b'T', aggressor, 0, price, remaining as u32);
        out.push(record);
        for (order_id, size) in queue {
            if remaining == 0 {
                break;
            }
            let fill = remaining.min(u64::from(size)) as u32;
            remaining -= u64::from(fill);
            let record = self.record(book, ts, b'F', resting_side, order_id, price, fill);
            out.push(record);
            let record = if fill == size {
                self.books[book].remove(order_id);
                self.record(book, ts, b'C', resting_side, order_id, price, size)
            } else {
                self.books[book].modify(order_id, price_ticks, size - fill);
                self.record(book, ts, b'M', resting_side, order_id, price, size - fill)
            };
            out.push(record);
        }
        true
    }

    /// The book of the instrument at `position` as an MBO snapshot: a clear (`R`) and then one
    /// add per resting order (bids best first, then asks best first, each level in queue
    /// order), all flagged `SNAPSHOT`, the last also `LAST`; `ts_event` and `sequence` are those
    /// of the last record the book reflects, `ts_recv` is `now_ns`.
    pub fn snapshot(&self, position: usize, now_ns: u64, out: &mut Vec<MboMsg>) {
        let Some(book) = self.books.get(position) else {
            return;
        };
        let header = |ts_event| {
            RecordHeader::new::<MboMsg>(rtype::MBO, PUBLISHER_ID, book.instrument_id, ts_event)
        };
        let template = MboMsg {
            hd: header(self.last_ts_ns),
            order_id: 0,
            price: UNDEF_PRICE,
            size: 0,
            flags: FlagSet::new(flags::SNAPSHOT),
            channel_id: 0,
            action: b'R' as c_char,
            side: NO_SIDE as c_char,
            ts_recv: now_ns,
            ts_in_delta: 0,
            sequence: self.sequence,
        };
        out.push(template.clone());
        let levels = book
            .bids
            .iter()
            .rev()
            .chain(book.asks.iter())
            .flat_map(|(_, queue)| queue.iter());
        for order_id in levels {
            if let Some(order) = book.orders.get(order_id) {
                out.push(MboMsg {
                    order_id: *order_id,
                    price: order.price_ticks * TICK,
                    size: order.size,
                    action: b'A' as c_char,
                    side: order.side as c_char,
                    ..template.clone()
                });
            }
        }
        if let Some(last) = out.last_mut() {
            last.flags = FlagSet::new(flags::SNAPSHOT | flags::LAST);
        }
    }
}

/// The market every connection of a gateway shares: the generator and the last records it made,
/// numbered from 0 in the order made.
pub struct History {
    generator: Generator,
    records: VecDeque<MboMsg>,
    /// The number of `records[0]`.
    first_index: u64,
    capacity: usize,
    scratch: Vec<MboMsg>,
}

impl History {
    pub fn new(generator: Generator, capacity: usize) -> History {
        History {
            generator,
            records: VecDeque::with_capacity(capacity.min(1 << 20)),
            first_index: 0,
            capacity: capacity.max(1),
            scratch: Vec::new(),
        }
    }

    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// The number the next record will get: how many were made so far.
    pub fn head(&self) -> u64 {
        self.first_index + self.records.len() as u64
    }

    /// The number of the oldest record still retained.
    pub fn first_index(&self) -> u64 {
        self.first_index
    }

    /// Whether records were made and then dropped from the history.
    pub fn has_dropped(&self) -> bool {
        self.first_index > 0
    }

    pub fn get(&self, index: u64) -> Option<&MboMsg> {
        let offset = index.checked_sub(self.first_index)?;
        self.records.get(usize::try_from(offset).ok()?)
    }

    /// The `ts_event` of the oldest retained record.
    pub fn oldest_ts_ns(&self) -> Option<u64> {
        self.records.front().map(|record| record.hd.ts_event)
    }

    /// The number of the first retained record with `ts_event >= ts_ns` (the head when none).
    pub fn index_at_or_after(&self, ts_ns: u64) -> u64 {
        self.first_index
            + self
                .records
                .partition_point(|record| record.hd.ts_event < ts_ns) as u64
    }

    /// Makes whole events until at least `records` records were added; returns how many were.
    pub fn generate(&mut self, records: u64, now_ns: u64) -> u64 {
        let mut made = 0u64;
        let mut scratch = std::mem::take(&mut self.scratch);
        while made < records {
            scratch.clear();
            let count = self.generator.step(now_ns, &mut scratch);
            if count == 0 {
                break;
            }
            made += count as u64;
            for record in scratch.drain(..) {
                if self.records.len() == self.capacity {
                    self.records.pop_front();
                    self.first_index += 1;
                }
                self.records.push_back(record);
            }
        }
        self.scratch = scratch;
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies MBO records to a plain book of `order id -> (side, price, size)` and checks the
    /// L3 rules on the way.
    fn apply(book: &mut HashMap<u64, (c_char, i64, u32)>, record: &MboMsg) {
        match record.action as u8 {
            b'A' => {
                assert!(book
                    .insert(record.order_id, (record.side, record.price, record.size))
                    .is_none());
            }
            b'C' => {
                let order = book
                    .get_mut(&record.order_id)
                    .expect("cancel of a resting order");
                assert!(order.2 >= record.size);
                order.2 -= record.size;
                if order.2 == 0 {
                    book.remove(&record.order_id);
                }
            }
            b'M' => {
                let order = book
                    .get_mut(&record.order_id)
                    .expect("modify of a resting order");
                assert_eq!(order.0, record.side);
                order.1 = record.price;
                order.2 = record.size;
            }
            b'F' => {
                let order = book.get(&record.order_id).expect("fill of a resting order");
                assert!(order.2 >= record.size);
                assert_eq!(order.1, record.price);
            }
            b'T' => {}
            b'R' => book.clear(),
            other => panic!("unexpected action {other}"),
        }
    }

    #[test]
    fn events_keep_the_book_consistent_and_uncrossed() {
        let mut generator = Generator::new(3, 9);
        let mut books = vec![HashMap::new(); 3];
        let mut out = Vec::new();
        let mut last_ts = 0;
        for step in 0..50_000u64 {
            out.clear();
            let count = generator.step(1_000 + step / 3, &mut out);
            assert!(count > 0);
            assert!(out[0].hd.ts_event > last_ts);
            last_ts = out[0].hd.ts_event;
            for (position, record) in out.iter().enumerate() {
                assert_eq!(record.flags.is_last(), position + 1 == count);
                let book = &mut books[(record.hd.instrument_id - FIRST_INSTRUMENT_ID) as usize];
                apply(book, record);
            }
            for (position, book) in books.iter().enumerate() {
                let best_bid = book
                    .values()
                    .filter(|order| order.0 == BID as c_char)
                    .map(|order| order.1)
                    .max();
                let best_ask = book
                    .values()
                    .filter(|order| order.0 == ASK as c_char)
                    .map(|order| order.1)
                    .min();
                if let (Some(bid), Some(ask)) = (best_bid, best_ask) {
                    assert!(bid < ask, "instrument {position} crossed at step {step}");
                }
            }
        }
        for (position, book) in books.iter().enumerate() {
            let mut snapshot = Vec::new();
            generator.snapshot(position, 7, &mut snapshot);
            let mut rebuilt = HashMap::new();
            for record in &snapshot {
                assert!(record.flags.is_snapshot());
                apply(&mut rebuilt, record);
            }
            assert!(snapshot.last().unwrap().flags.is_last());
            assert_eq!(&rebuilt, book);
        }
    }

    #[test]
    fn history_keeps_the_last_records_numbered() {
        let mut history = History::new(Generator::new(2, 1), 100);
        history.generate(250, 5);
        assert!(history.head() >= 250);
        assert_eq!(history.first_index(), history.head() - 100);
        let first = history.get(history.first_index()).unwrap().sequence;
        assert_eq!(u64::from(first), history.first_index() + 1);
        assert!(history.get(history.first_index() - 1).is_none());
        let ts = history.get(history.head() - 10).unwrap().hd.ts_event;
        let at = history.index_at_or_after(ts);
        assert!(at <= history.head() - 10);
        assert_eq!(history.get(at).unwrap().hd.ts_event, ts);
    }
}
