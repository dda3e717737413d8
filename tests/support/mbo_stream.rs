//! A deterministic generator of realistic MBO streams, for `tests/mbo_book.rs` and
//! `benches/mbo_book.rs` (included with `#[path = "support/mbo_stream.rs"] mod mbo_stream;`).
//!
//! The stream follows one instrument around a random-walk mid: adds cluster within a few ticks
//! of the touch with a tail tens of ticks deep; cancels (mostly whole, some partial) and
//! modifies (new price or new size, up and down) pick resting orders; executions come as CME's
//! MBO does, a `T`rade, then `F`ill and `C`ancel of the resting order; a clea`R` arrives now and
//! then, and so do records the book must reject (cancel of an unknown id, cancel of more than
//! rests, duplicate add, size 0, no side, unknown action). The generator keeps its own list of
//! the orders it believes rest, so almost every cancel and modify names a real order.

/// One MBO record, the fields `MboBook::apply` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub action: u8,
    pub side: u8,
    pub order_id: u64,
    pub price: i64,
    pub size: u32,
}

/// How order ids are assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code, reason = "each including binary uses some of the patterns")]
pub enum IdPattern {
    /// 1, 2, 3, ...: the friendliest case for any hash.
    Sequential,
    /// As CME's order ids look in Databento's MBO (e.g. 6410543150678): 13-digit numbers that
    /// rise with gaps of 1 to 4,096, since one id space is shared by many instruments.
    CmeLike,
    /// Uniformly random 64-bit ids.
    Random,
}

/// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators", 2016).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Any non-zero state works; mix the seed so that small seeds differ from the first draw.
        Rng((seed ^ 0x2545_f491_4f6c_dd1d).max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..bound` (`bound` > 0), by the high bits of a 64x64 multiply.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(bound)) >> 64) as u64
    }

    /// True with probability `per_million` / 1,000,000.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.below(1_000_000) < per_million
    }
}

/// What the generator believes rests.
#[derive(Clone, Copy, Debug)]
struct Resting {
    order_id: u64,
    side: u8,
    price: i64,
    size: u32,
}

/// A quarter point (ES's tick) in DBN's 1e-9 units.
pub const TICK: i64 = 250_000_000;

pub struct Stream {
    rng: Rng,
    ids: IdPattern,
    next_id: u64,
    /// The mid in ticks.
    mid_ticks: i64,
    /// Orders the stream tends towards; the add rate rises below it and falls above.
    target_orders: usize,
    resting: Vec<Resting>,
    /// Records queued to follow (the fill and cancel after a trade).
    pending: Vec<Record>,
    /// Probability of an invalid record, per million records.
    invalid_per_million: u64,
    /// Probability of a clear, per million records.
    clear_per_million: u64,
}

#[allow(dead_code, reason = "each including binary uses some of the generator")]
impl Stream {
    pub fn new(seed: u64, ids: IdPattern, target_orders: usize) -> Stream {
        let mut rng = Rng::new(seed);
        let next_id = match ids {
            IdPattern::Sequential => 1,
            IdPattern::CmeLike => 6_410_000_000_000 + rng.below(100_000_000),
            IdPattern::Random => 0,
        };
        Stream {
            rng,
            ids,
            next_id,
            mid_ticks: 20_000 + seed as i64 % 1_000,
            target_orders,
            resting: Vec::with_capacity(target_orders * 2),
            pending: Vec::new(),
            invalid_per_million: 10_000,
            clear_per_million: 20,
        }
    }

    /// No invalid records and no clears: the stream of a healthy feed, for the benchmark.
    pub fn clean(mut self) -> Stream {
        self.invalid_per_million = 0;
        self.clear_per_million = 0;
        self
    }

    /// Sets the rate of invalid records and of clears, per million records.
    pub fn rates(mut self, invalid_per_million: u64, clear_per_million: u64) -> Stream {
        self.invalid_per_million = invalid_per_million;
        self.clear_per_million = clear_per_million;
        self
    }

    fn fresh_id(&mut self) -> u64 {
        match self.ids {
            IdPattern::Sequential => {
                self.next_id += 1;
                self.next_id - 1
            }
            IdPattern::CmeLike => {
                self.next_id += 1 + self.rng.below(4_096);
                self.next_id
            }
            IdPattern::Random => self.rng.next(),
        }
    }

    fn size(&mut self) -> u32 {
        if self.rng.chance(20_000) {
            1 + self.rng.below(500) as u32
        } else {
            1 + self.rng.below(20) as u32
        }
    }

    /// Ticks away from the touch: mostly within 8, a tail to 60.
    fn depth_ticks(&mut self) -> i64 {
        if self.rng.chance(150_000) {
            self.rng.below(60) as i64
        } else {
            self.rng.below(8) as i64
        }
    }

    fn price(&mut self, side: u8) -> i64 {
        let depth = self.depth_ticks();
        let ticks = if side == b'B' {
            self.mid_ticks - 1 - depth
        } else {
            self.mid_ticks + 1 + depth
        };
        ticks * TICK
    }

    fn side(&mut self) -> u8 {
        if self.rng.next() & 1 == 0 {
            b'B'
        } else {
            b'A'
        }
    }

    fn add(&mut self) -> Record {
        let side = self.side();
        let order = Resting {
            order_id: self.fresh_id(),
            side,
            price: self.price(side),
            size: self.size(),
        };
        self.resting.push(order);
        Record {
            action: b'A',
            side,
            order_id: order.order_id,
            price: order.price,
            size: order.size,
        }
    }

    fn invalid(&mut self) -> Record {
        let any = self.pick();
        let (side, price) = (self.side(), self.price(b'B'));
        match (self.rng.below(6), any) {
            (0, Some(order)) => Record {
                action: b'A',
                side: order.side,
                order_id: order.order_id,
                price: order.price,
                size: order.size,
            },
            (1, Some(order)) => Record {
                action: b'C',
                side: order.side,
                order_id: order.order_id,
                price: order.price,
                size: order.size + 1 + self.rng.below(10) as u32,
            },
            (2, _) => Record {
                action: b'A',
                side,
                order_id: self.fresh_id(),
                price,
                size: 0,
            },
            (3, _) => Record {
                action: if self.rng.next() & 1 == 0 { b'A' } else { b'M' },
                side: if self.rng.next() & 1 == 0 { b'N' } else { b'X' },
                order_id: self.fresh_id(),
                price,
                size: self.size(),
            },
            (4, _) => Record {
                action: b"XZa\0"[self.rng.below(4) as usize],
                side,
                order_id: self.fresh_id(),
                price,
                size: self.size(),
            },
            _ => Record {
                action: b'C',
                side,
                order_id: self.fresh_id(),
                price,
                size: self.size(),
            },
        }
    }

    fn pick(&mut self) -> Option<Resting> {
        if self.resting.is_empty() {
            return None;
        }
        let index = self.rng.below(self.resting.len() as u64) as usize;
        Some(self.resting[index])
    }

    /// The next record.
    pub fn next_record(&mut self) -> Record {
        if let Some(record) = self.pending.pop() {
            return record;
        }
        if self.rng.chance(50_000) {
            // The mid walks a tick.
            self.mid_ticks += if self.rng.next() & 1 == 0 { 1 } else { -1 };
        }
        if self.rng.chance(self.clear_per_million) {
            self.resting.clear();
            return Record {
                action: b'R',
                side: b'N',
                order_id: 0,
                price: i64::MAX,
                size: 0,
            };
        }
        if self.rng.chance(self.invalid_per_million) {
            return self.invalid();
        }
        if self.resting.is_empty() {
            return self.add();
        }
        let fill = self.resting.len() as f64 / self.target_orders.max(1) as f64;
        let add_per_million = (450_000.0 / fill.max(0.25)).min(900_000.0) as u64;
        let roll = self.rng.below(1_000_000);
        if roll < add_per_million {
            return self.add();
        }
        let index = self.rng.below(self.resting.len() as u64) as usize;
        let order = self.resting[index];
        let kind = self.rng.below(100);
        if kind < 55 {
            // Cancel: three in four whole.
            let size = if order.size > 1 && self.rng.below(4) == 0 {
                1 + self.rng.below(u64::from(order.size - 1)) as u32
            } else {
                order.size
            };
            self.take(index, size);
            Record {
                action: b'C',
                side: order.side,
                order_id: order.order_id,
                price: order.price,
                size,
            }
        } else if kind < 80 {
            // Modify: half to a new price (sometimes a new id, which is an add), half a new size.
            let mut moved = order;
            if self.rng.below(2) == 0 {
                moved.price = self.price(order.side);
                moved.size = self.size();
                if self.rng.chance(20_000) {
                    moved.order_id = self.fresh_id();
                    self.resting.push(moved);
                } else {
                    self.resting[index] = moved;
                }
            } else {
                moved.size = if self.rng.below(2) == 0 && order.size > 1 {
                    1 + self.rng.below(u64::from(order.size - 1)) as u32
                } else {
                    order.size + 1 + self.rng.below(10) as u32
                };
                self.resting[index] = moved;
            }
            Record {
                action: b'M',
                side: moved.side,
                order_id: moved.order_id,
                price: moved.price,
                size: moved.size,
            }
        } else {
            // An execution against the resting order: trade (aggressor side, no order), then
            // the fill of the resting order and the cancel that takes it off the book.
            let size = 1 + self.rng.below(u64::from(order.size)) as u32;
            self.take(index, size);
            let aggressor = if order.side == b'B' { b'A' } else { b'B' };
            let cancel = Record {
                action: b'C',
                side: order.side,
                order_id: order.order_id,
                price: order.price,
                size,
            };
            let fill = Record {
                action: b'F',
                ..cancel
            };
            self.pending.push(cancel);
            self.pending.push(fill);
            Record {
                action: b'T',
                side: aggressor,
                order_id: 0,
                price: order.price,
                size,
            }
        }
    }

    /// Takes `size` off resting order `index`, removing it when nothing is left.
    fn take(&mut self, index: usize, size: u32) {
        let order = &mut self.resting[index];
        order.size -= size;
        if order.size == 0 {
            self.resting.swap_remove(index);
        }
    }

    /// The next `count` records.
    pub fn records(&mut self, count: usize) -> Vec<Record> {
        (0..count).map(|_| self.next_record()).collect()
    }

    /// Ids the generator believes rest (for checking every order at the end of a run).
    pub fn resting_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.resting.iter().map(|order| order.order_id)
    }
}
