//! The synthetic market behind the Thalex simulator, one per connection.
//!
//! Per instrument: a book on the simulator's price grid ([`TICK_USD`]) and amount grid
//! ([`LOT`]) around a random walk of the mid, marks, greeks, collars, funding and 24 h
//! statistics. Per underlying ([`UNDERLYINGS`]): an index. Over all instruments: one log of
//! trades in the order they happened, which every trade stream reads from its own position.
//!
//! Book prices and amounts are integers on their grids (ticks and lots) and print as exact
//! decimals. Everything Thalex computes rather than matches (marks, indices, greeks, forwards,
//! funding, traded value) is a binary float here, as it is at the venue, so that messages carry
//! numbers with up to 17 significant digits.
//!
//! **Invariant:** the market is a pure function of the seed and the sequence of calls made on
//! it; the only input from outside is the time a caller passes in, which stamps trades and
//! updates but never decides a price or an amount. Sans-IO: it neither reads a clock nor writes.
//!
//! **Invariant:** a book is never crossed: bids sit below the mid and asks above it.

use crate::source::SplitMix64;
use std::collections::{BTreeMap, VecDeque};

/// The tick size of every instrument the simulator serves, in USD. Thalex's ticks differ by
/// instrument; one tick for all keeps `book` groupings simple while still putting both whole
/// numbers and decimals on the wire.
pub const TICK_USD: f64 = 0.5;

/// [`TICK_USD`] in units of 1e-9 USD, for checking that a `book` grouping is on the grid.
pub(super) const TICK_NANO_USD: u64 = 500_000_000;

/// The amount grid: amounts are kept as whole lots of 0.001.
pub const LOT: f64 = 0.001;

/// The underlyings served: the targets of `price_index` and of underlying `recent_trades`.
/// Instruments whose name starts with `ETH` (after a combination's `[`) belong to `ETHUSD`,
/// every other one to `BTCUSD`.
pub const UNDERLYINGS: [&str; 2] = ["BTCUSD", "ETHUSD"];

/// Price levels (ticks) per side of an instrument's book: what a `book` channel with `none` and
/// `all` shows.
pub(super) const BOOK_LEVELS: i64 = 100;

/// How many trades the log keeps; a stream that falls further behind loses the oldest.
const TRADE_LOG: usize = 4096;

/// Trades made per instrument before the first subscription, stamped in the past (options
/// excepted: they start without trades, so `last_price` is `null` and `lwt` has no `l` until
/// they trade).
const HISTORY_TRADES: usize = 3;

/// What an instrument is, read from its name the way Thalex names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// `BTC-PERPETUAL`.
    Perpetual,
    /// `BTC-27JUN25`, and any name that is none of the others.
    Future,
    /// `BTC-27JUN25-100000-C` (or `-P`).
    Option { strike_usd: f64, call: bool },
    /// `[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]`; a roll has two legs, each a future
    /// or a perpetual, at least one a future (what `recent_trades.<underlying>.future_rolls`
    /// carries).
    Combination { roll: bool },
}

impl Kind {
    pub(super) fn of(name: &str) -> Kind {
        if let Some(legs) = name
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            let legs: Vec<Kind> = legs
                .split(',')
                .map(|leg| Kind::of(leg.rsplit_once(':').map_or(leg, |(leg, _)| leg)))
                .collect();
            let roll = legs.len() == 2
                && legs
                    .iter()
                    .all(|leg| matches!(leg, Kind::Perpetual | Kind::Future))
                && legs.contains(&Kind::Future);
            return Kind::Combination { roll };
        }
        if name.ends_with("-PERPETUAL") {
            return Kind::Perpetual;
        }
        let parts: Vec<&str> = name.split('-').collect();
        if let [_, _, strike, right @ ("C" | "P")] = parts[..] {
            if let Ok(strike_usd) = strike.parse::<f64>() {
                if strike_usd.is_finite() && strike_usd > 0.0 {
                    return Kind::Option {
                        strike_usd,
                        call: right == "C",
                    };
                }
            }
        }
        Kind::Future
    }

    pub(super) fn is_combination(self) -> bool {
        matches!(self, Kind::Combination { .. })
    }

    /// Options and combinations have thin books that lose a whole side now and then.
    fn thin(self) -> bool {
        matches!(self, Kind::Option { .. } | Kind::Combination { .. })
    }
}

/// One price level: the amount, and the part of it from outright orders (the rest is implied
/// from combination books).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Level {
    pub amount_lots: u64,
    pub outright_lots: u64,
}

/// One trade, as the log keeps it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Trade {
    /// The trade's position in the log, from 1.
    pub seq: u64,
    pub instrument: usize,
    pub price_ticks: i64,
    pub amount_lots: u64,
    /// The taker's side.
    pub buy: bool,
    pub time_secs: f64,
    /// The taker traded on another book and this fill came from implied matching.
    pub implied_taker: bool,
}

/// The statistics since the market started (the simulator's "24 h").
#[derive(Clone, Debug, Default)]
pub(super) struct DayStats {
    pub volume_lots: u64,
    pub value_usd: f64,
    pub low_ticks: Option<i64>,
    pub high_ticks: Option<i64>,
    pub first_ticks: Option<i64>,
    pub last_ticks: Option<i64>,
}

impl DayStats {
    fn record(&mut self, price_ticks: i64, amount_lots: u64) {
        self.volume_lots += amount_lots;
        self.value_usd += price_ticks as f64 * TICK_USD * amount_lots as f64 * LOT;
        self.low_ticks = Some(
            self.low_ticks
                .map_or(price_ticks, |low| low.min(price_ticks)),
        );
        self.high_ticks = Some(
            self.high_ticks
                .map_or(price_ticks, |high| high.max(price_ticks)),
        );
        self.first_ticks.get_or_insert(price_ticks);
        self.last_ticks = Some(price_ticks);
    }

    /// Last minus first trade price, `None` without trades.
    pub fn change_ticks(&self) -> Option<i64> {
        Some(self.last_ticks? - self.first_ticks?)
    }
}

/// A fill an instrument's step made, before the log numbers it.
struct Fill {
    price_ticks: i64,
    amount_lots: u64,
    buy: bool,
    implied_taker: bool,
}

/// One instrument's market: a random walk of the mid in ticks with a book of [`BOOK_LEVELS`]
/// levels per side around it (best bid one tick below the mid, best ask one above), random
/// amounts, and trades at the touch.
pub(super) struct Instrument {
    /// The name as a JSON string literal, quoted and escaped, as messages carry it.
    pub name_json: String,
    pub kind: Kind,
    /// Index into [`UNDERLYINGS`].
    pub underlying: usize,
    rng: SplitMix64,
    mid_ticks: i64,
    /// The walk stays above this, so prices stay positive.
    floor_ticks: i64,
    pub bids: BTreeMap<i64, Level>,
    pub asks: BTreeMap<i64, Level>,
    bids_pulled: bool,
    asks_pulled: bool,
    /// The mark's distance from the mid, in USD: less than half a tick either way.
    mark_offset_usd: f64,
    pub iv: f64,
    pub funding_rate: f64,
    /// How far the funding interval has run, from 0 to 1.
    funding_progress: f64,
    pub open_interest_lots: u64,
    pub stats: DayStats,
    /// When the book last changed.
    pub updated_secs: f64,
}

impl Instrument {
    fn new(name: &str, position: usize, seed: u64, now_secs: f64) -> Instrument {
        let kind = Kind::of(name);
        let underlying = usize::from(name.trim_start_matches('[').starts_with("ETH"));
        // BTC around 50000 USD, ETH around 3000; options and combinations far below.
        let base_ticks: i64 = if underlying == 0 { 100_000 } else { 6_000 };
        let base_ticks = match kind {
            Kind::Perpetual | Kind::Future => base_ticks,
            Kind::Option { .. } => base_ticks / 20,
            Kind::Combination { .. } => base_ticks / 100,
        }
        .max(4 * BOOK_LEVELS);
        let mut rng =
            SplitMix64::new(seed ^ (position as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let iv = 0.3 + 0.5 * unit(&mut rng);
        let open_interest_lots = 100_000 + rng.below(900_000);
        let mut instrument = Instrument {
            name_json: serde_json::Value::String(name.to_owned()).to_string(),
            kind,
            underlying,
            rng,
            mid_ticks: base_ticks,
            floor_ticks: BOOK_LEVELS + 2,
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            bids_pulled: false,
            asks_pulled: false,
            mark_offset_usd: 0.0,
            iv,
            funding_rate: 0.0001,
            funding_progress: 0.0,
            open_interest_lots,
            stats: DayStats::default(),
            updated_secs: now_secs,
        };
        instrument.mark_offset_usd = instrument.mark_noise();
        instrument.refill();
        instrument
    }

    fn amount_lots(&mut self) -> u64 {
        // Whole amounts now and then, so clients see integers as well as decimals.
        if self.rng.chance(200) {
            1000 * (1 + self.rng.below(5))
        } else {
            1 + self.rng.below(5000)
        }
    }

    fn level(&mut self) -> Level {
        let amount_lots = self.amount_lots();
        // A tenth of the levels hold implied liquidity beside the outright orders.
        let outright_lots = if self.rng.chance(100) {
            1 + self.rng.below(amount_lots)
        } else {
            amount_lots
        };
        Level {
            amount_lots,
            outright_lots,
        }
    }

    fn mark_noise(&mut self) -> f64 {
        (unit(&mut self.rng) - 0.5) * 0.9 * TICK_USD
    }

    /// Drops levels that crossed the mid or fell out of the window and fills the window (or
    /// empties a pulled side).
    fn refill(&mut self) {
        let best_bid = self.mid_ticks - 1;
        let best_ask = self.mid_ticks + 1;
        self.bids
            .retain(|&price, _| price <= best_bid && price > best_bid - BOOK_LEVELS);
        self.asks
            .retain(|&price, _| price >= best_ask && price < best_ask + BOOK_LEVELS);
        if self.bids_pulled {
            self.bids.clear();
        }
        if self.asks_pulled {
            self.asks.clear();
        }
        for depth in 0..BOOK_LEVELS {
            if !self.bids_pulled && !self.bids.contains_key(&(best_bid - depth)) {
                let level = self.level();
                self.bids.insert(best_bid - depth, level);
            }
            if !self.asks_pulled && !self.asks.contains_key(&(best_ask + depth)) {
                let level = self.level();
                self.asks.insert(best_ask + depth, level);
            }
        }
    }

    /// One step of the instrument's market; returns the fills it made.
    fn step(&mut self) -> Vec<Fill> {
        match self.rng.below(10) {
            0..=2 if self.mid_ticks > self.floor_ticks => self.mid_ticks -= 1,
            3..=5 => self.mid_ticks += 1,
            _ => {}
        }
        if self.kind.thin() {
            if self.rng.chance(20) {
                self.bids_pulled = !self.bids_pulled;
            }
            if self.rng.chance(20) {
                self.asks_pulled = !self.asks_pulled;
            }
        }
        self.mark_offset_usd = self.mark_noise();
        self.iv = (self.iv + (unit(&mut self.rng) - 0.5) * 0.002).clamp(0.05, 3.0);
        if self.kind == Kind::Perpetual {
            self.funding_rate += (unit(&mut self.rng) - 0.5) * 0.00001;
            self.funding_progress = (self.funding_progress + 0.001) % 1.0;
        }
        self.refill();
        for _ in 0..2 {
            let depth = self.rng.below(BOOK_LEVELS as u64) as i64;
            let level = self.level();
            if self.rng.chance(500) {
                if !self.bids_pulled {
                    self.bids.insert(self.mid_ticks - 1 - depth, level);
                }
            } else if !self.asks_pulled {
                self.asks.insert(self.mid_ticks + 1 + depth, level);
            }
        }
        let trade_permille = match self.kind {
            Kind::Perpetual | Kind::Future => 400,
            Kind::Combination { .. } => 150,
            Kind::Option { .. } => 100,
        };
        let mut fills = Vec::new();
        if self.rng.chance(trade_permille) {
            for _ in 0..1 + self.rng.below(2) {
                if let Some(fill) = self.fill() {
                    fills.push(fill);
                }
            }
        }
        fills
    }

    /// A trade at the touch, if that side of the book has a level.
    fn fill(&mut self) -> Option<Fill> {
        let buy = self.rng.chance(500);
        let amount_lots = 1 + self.rng.below(2000);
        let implied_taker = self.rng.chance(50);
        let price_ticks = if buy {
            *self.asks.keys().next()?
        } else {
            *self.bids.keys().next_back()?
        };
        self.stats.record(price_ticks, amount_lots);
        if self.rng.chance(500) {
            self.open_interest_lots += amount_lots;
        } else {
            self.open_interest_lots = self.open_interest_lots.saturating_sub(amount_lots);
        }
        Some(Fill {
            price_ticks,
            amount_lots,
            buy,
            implied_taker,
        })
    }

    pub fn best_bid(&self) -> Option<(i64, Level)> {
        self.bids
            .iter()
            .next_back()
            .map(|(&price, &level)| (price, level))
    }

    pub fn best_ask(&self) -> Option<(i64, Level)> {
        self.asks
            .iter()
            .next()
            .map(|(&price, &level)| (price, level))
    }

    pub fn mark_price(&self) -> f64 {
        self.mid_ticks as f64 * TICK_USD + self.mark_offset_usd
    }

    /// What a long contract has paid since the last funding settlement, in USD: the rate on
    /// the mark for the part of the interval run so far.
    pub fn funding_mark(&self) -> f64 {
        self.funding_rate * self.mark_price() * self.funding_progress
    }

    /// A rough delta: 1 for perpetuals and futures, a logistic curve of the index over the
    /// strike for options.
    pub fn delta(&self, index: f64) -> f64 {
        match self.kind {
            Kind::Option { strike_usd, call } => {
                let call_delta = 1.0 / (1.0 + (-(index - strike_usd) / (0.1 * strike_usd)).exp());
                if call {
                    call_delta
                } else {
                    call_delta - 1.0
                }
            }
            Kind::Perpetual | Kind::Future | Kind::Combination { .. } => 1.0,
        }
    }

    /// The forward at the option's expiry: the index with a small carry.
    pub fn forward(&self, index: f64) -> f64 {
        index * (1.0 + 0.0003 * self.iv)
    }

    /// The price collars, a quarter of the mark either way, rounded to 1e-8 as Thalex prints
    /// them.
    pub fn collars(&self) -> (f64, f64) {
        let mark = self.mark_price();
        let round = |price: f64| (price * 1e8).round() / 1e8;
        (round(mark * 0.75), round(mark * 1.25))
    }

    pub fn total_bid_lots(&self) -> u64 {
        self.bids.values().map(|level| level.amount_lots).sum()
    }

    pub fn total_ask_lots(&self) -> u64 {
        self.asks.values().map(|level| level.amount_lots).sum()
    }

    /// The best `levels` levels per side (all with `None`) grouped to multiples of
    /// `grouping_ticks`: bids down, asks up, so a grouped book is no more crossed than the
    /// book.
    pub fn view(
        &self,
        grouping_ticks: i64,
        levels: Option<usize>,
    ) -> (BTreeMap<i64, Level>, BTreeMap<i64, Level>) {
        let levels = levels.unwrap_or(usize::MAX);
        let group = |side: &mut BTreeMap<i64, Level>, grouped: i64, level: &Level| {
            let sum = side.entry(grouped).or_default();
            sum.amount_lots += level.amount_lots;
            sum.outright_lots += level.outright_lots;
        };
        let mut bids = BTreeMap::new();
        for (&price, level) in self.bids.iter().rev() {
            let grouped = price.div_euclid(grouping_ticks) * grouping_ticks;
            if !bids.contains_key(&grouped) && bids.len() == levels {
                break;
            }
            group(&mut bids, grouped, level);
        }
        let mut asks = BTreeMap::new();
        for (&price, level) in &self.asks {
            let grouped = -((-price).div_euclid(grouping_ticks) * grouping_ticks);
            if !asks.contains_key(&grouped) && asks.len() == levels {
                break;
            }
            group(&mut asks, grouped, level);
        }
        (bids, asks)
    }
}

/// An underlying's index: a random walk of binary floats.
pub(super) struct Index {
    pub price: f64,
    pub previous_settlement_price: f64,
}

/// The synthetic market of one connection: its instruments, the underlyings' indices and the
/// trade log.
pub(super) struct Market {
    pub instruments: Vec<Instrument>,
    pub indices: [Index; 2],
    index_rng: SplitMix64,
    trades: VecDeque<Trade>,
    last_trade_seq: u64,
}

impl Market {
    /// The market for `names` from `seed`, with a few trades per instrument (options excepted)
    /// stamped in the minute before `now_secs`.
    pub fn new(names: &[String], seed: u64, now_secs: f64) -> Market {
        let mut index_rng = SplitMix64::new(!seed);
        let indices = [50_000.0, 3_000.0].map(|base: f64| {
            // A fraction below the cent from the start, as a computed index has.
            let price = base + unit(&mut index_rng) * 0.5;
            Index {
                price,
                previous_settlement_price: price * (0.98 + 0.04 * unit(&mut index_rng)),
            }
        });
        let mut market = Market {
            instruments: names
                .iter()
                .enumerate()
                .map(|(position, name)| Instrument::new(name, position, seed, now_secs))
                .collect(),
            indices,
            index_rng,
            trades: VecDeque::new(),
            last_trade_seq: 0,
        };
        for round in 0..HISTORY_TRADES {
            for instrument in 0..market.instruments.len() {
                if matches!(market.instruments[instrument].kind, Kind::Option { .. }) {
                    continue;
                }
                let time_secs = now_secs - 60.0 + 15.0 * round as f64 + 0.001 * instrument as f64;
                if let Some(fill) = market.instruments[instrument].fill() {
                    market.log(instrument, fill, time_secs);
                }
            }
        }
        market
    }

    fn log(&mut self, instrument: usize, fill: Fill, time_secs: f64) {
        self.last_trade_seq += 1;
        self.trades.push_back(Trade {
            seq: self.last_trade_seq,
            instrument,
            price_ticks: fill.price_ticks,
            amount_lots: fill.amount_lots,
            buy: fill.buy,
            time_secs,
            implied_taker: fill.implied_taker,
        });
        if self.trades.len() > TRADE_LOG {
            self.trades.pop_front();
        }
    }

    /// One step of an instrument's market at `now_secs` (its trades go to the log), and a
    /// small step of its underlying's index.
    pub fn step(&mut self, instrument: usize, now_secs: f64) {
        let fills = self.instruments[instrument].step();
        self.instruments[instrument].updated_secs = now_secs;
        for fill in fills {
            self.log(instrument, fill, now_secs);
        }
        let underlying = self.instruments[instrument].underlying;
        self.walk_index(underlying, 0.2);
    }

    /// One step of an underlying's index; returns its price.
    pub fn step_index(&mut self, underlying: usize) -> f64 {
        self.walk_index(underlying, 1.0)
    }

    fn walk_index(&mut self, underlying: usize, scale: f64) -> f64 {
        let index = &mut self.indices[underlying];
        let step = index.price * 0.0001 * scale;
        index.price = (index.price + (unit(&mut self.index_rng) - 0.5) * 2.0 * step).max(1.0);
        index.price
    }

    /// The sequence number of the last trade made (0 before any).
    pub fn last_trade_seq(&self) -> u64 {
        self.last_trade_seq
    }

    /// The trades the log still holds after `seq`, oldest first.
    pub fn trades_after(&self, seq: u64) -> impl Iterator<Item = &Trade> {
        let start = self.trades.partition_point(|trade| trade.seq <= seq);
        self.trades.range(start..)
    }

    /// The last `count` trades that `include` takes, oldest first.
    pub fn last_trades(&self, count: usize, include: impl Fn(&Trade) -> bool) -> Vec<&Trade> {
        let mut trades: Vec<&Trade> = self
            .trades
            .iter()
            .rev()
            .filter(|trade| include(trade))
            .take(count)
            .collect();
        trades.reverse();
        trades
    }
}

/// A float in `[0, 1)` from the top 53 bits.
fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        super::super::default_instruments()
    }

    #[test]
    fn kinds_are_read_from_the_names() {
        assert_eq!(Kind::of("BTC-PERPETUAL"), Kind::Perpetual);
        assert_eq!(Kind::of("BTC-27JUN25"), Kind::Future);
        assert_eq!(
            Kind::of("BTC-27JUN25-100000-P"),
            Kind::Option {
                strike_usd: 100_000.0,
                call: false
            }
        );
        assert_eq!(
            Kind::of("[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]"),
            Kind::Combination { roll: false }
        );
        assert_eq!(
            Kind::of("[BTC-PERPETUAL:-1,BTC-27JUN25:1]"),
            Kind::Combination { roll: true }
        );
        assert_eq!(
            Kind::of("[BTC-PERPETUAL:-1,ETH-PERPETUAL:1]"),
            Kind::Combination { roll: false }
        );
    }

    #[test]
    fn grouped_views_are_never_crossed_and_hold_at_most_the_levels_asked() {
        let mut market = Market::new(&names(), 7, 1.0);
        for step in 0..500 {
            market.step(0, step as f64);
            let book = &market.instruments[0];
            for (grouping, levels) in [(1, 40), (1, 5), (5, 10), (100, 20), (2, 1)] {
                let (bids, asks) = book.view(grouping, Some(levels));
                let expected = levels.min(BOOK_LEVELS as usize / grouping as usize);
                assert!(
                    (expected..=levels).contains(&bids.len()),
                    "{grouping} {levels}"
                );
                assert!(
                    (expected..=levels).contains(&asks.len()),
                    "{grouping} {levels}"
                );
                assert!(bids.keys().next_back() < asks.keys().next());
            }
            let (bids, asks) = book.view(1, None);
            assert_eq!((bids, asks), (book.bids.clone(), book.asks.clone()));
        }
    }

    #[test]
    fn thin_books_lose_sides_and_outright_amounts_never_exceed_amounts() {
        let mut market = Market::new(&names(), 11, 1.0);
        let option = 3;
        let (mut empty_bids, mut empty_asks) = (0, 0);
        for step in 0..2000 {
            market.step(option, step as f64);
            let book = &market.instruments[option];
            empty_bids += usize::from(book.bids.is_empty());
            empty_asks += usize::from(book.asks.is_empty());
            for level in book.bids.values().chain(book.asks.values()) {
                assert!((1..=level.amount_lots).contains(&level.outright_lots));
            }
        }
        assert!(
            empty_bids > 0 && empty_asks > 0,
            "{empty_bids} {empty_asks}"
        );
    }

    #[test]
    fn the_same_seed_and_steps_give_the_same_market() {
        let run = |seed| {
            let mut market = Market::new(&names(), seed, 100.0);
            for step in 0..300 {
                market.step(step % 5, 100.0 + step as f64);
            }
            let book = &market.instruments[2];
            (
                market.last_trade_seq(),
                market.indices[0].price,
                book.mark_price(),
                book.bids.clone(),
            )
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn the_log_holds_history_then_new_trades_in_order() {
        let mut market = Market::new(&names(), 3, 1000.0);
        let history = market.last_trade_seq();
        // Every instrument but the option has its history, stamped in the past.
        assert!(history >= 3, "{history}");
        assert!(market
            .trades_after(0)
            .all(|trade| trade.time_secs < 1000.0 && trade.instrument != 3));
        for step in 0..200 {
            market.step(0, 1000.0 + step as f64);
        }
        let fresh: Vec<&Trade> = market.trades_after(history).collect();
        assert!(!fresh.is_empty());
        assert!(fresh.windows(2).all(|pair| pair[0].seq + 1 == pair[1].seq));
        let last = market.last_trades(2, |trade| trade.instrument == 0);
        assert_eq!(last.len(), 2);
        assert_eq!(last[1].seq, market.last_trade_seq());
    }
}
