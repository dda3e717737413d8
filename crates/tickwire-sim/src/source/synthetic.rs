//! A synthetic Binance USD-M market: a random-walk order book per symbol, and the bookTicker,
//! depthUpdate, trade and aggTrade messages that describe it, in the venue's exact JSON shapes
//! (field order and types as in the recorded capture and the USD-M WebSocket docs).
//!
//! The model, per symbol: a full book of `book_levels` contiguous tick levels per side around a
//! mid that random walks with a pull back to its start price (so a run of any length keeps
//! plausible prices). Every book change (a quantity change, a new best level inside the spread,
//! a cancelled best level, a trade eating into the top, a change deeper in the book) takes the
//! next order-book update id. Changes cluster near the top. Prices stay on the tick grid, never
//! cross (a new best level only goes inside the spread) and never reach zero.
//!
//! Messages are due every `1e9 / rate_per_sec` ns, symbols take turns (round robin), and each
//! message's type is drawn with the capture's mix: 70% bookTicker, 10% depth, 20% trades, split
//! evenly among the configured channels of each kind. A depth channel's update speed suffix
//! (`@100ms`) only names its stream: the pace of its diffs follows the rate and the mix.
//!
//! What each message does to the book: a bookTicker message first makes 0 to 2 changes below the
//! top and then one change of the top, and reports the new top at the new update id; a trade
//! takes quantity off the best level on one side (which may remove it, moving the top without a
//! bookTicker of its own: the next one shows the result); a depth message sends every level
//! changed since its channel's previous diff (making one change first if there is none, since
//! the venue sends no empty diffs). So bookTickers never outnumber the mix, and every diff's `U`
//! is the previous diff's `u` + 1, a tighter chain than the venue promises (only `pu` == the
//! previous `u`).
//!
//! Everything is deterministic for a seed (one SplitMix64 generator, no clock, no hashing of
//! addresses), and cheap: numbers are written with a digit loop, not `fmt`.

use std::collections::{BTreeMap, HashMap};

use super::depth::{write_snapshot, SnapshotSide};
use super::text::{push_decimal, push_u64};
use super::{SimMessage, Source, SourceError};

/// Where the synthetic clock starts (2023-11-14 22:13:20 UTC): E and T of every message are this
/// plus the message's offset, in ms.
pub const SYNTHETIC_EPOCH_MS: u64 = 1_700_000_000_000;

/// What the synthetic market looks like.
#[derive(Clone, Debug)]
pub struct SyntheticConfig {
    /// How many symbols: BTCUSDT, ETHUSDT, SOLUSDT, BNBUSDT, XRPUSDT, DOGEUSDT, ADAUSDT,
    /// AVAXUSDT, then `SYM<k>USDT` where k is the symbol's index (SYM8USDT, SYM9USDT, ..).
    pub symbols: usize,
    /// Messages per second over all symbols and channels.
    pub rate_per_sec: f64,
    /// Channels every symbol publishes, as in a stream name after the `@`: `bookTicker`,
    /// `trade`, `aggTrade`, `depth`, `depth@0ms`, `depth@100ms`, `depth@500ms`.
    pub channels: Vec<String>,
    pub seed: u64,
    /// Price levels per side of every book.
    pub book_levels: usize,
    /// Messages before the source ends; `None` never ends.
    pub duration_messages: Option<u64>,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig {
            symbols: 2,
            rate_per_sec: 1000.0,
            channels: vec![
                "bookTicker".to_owned(),
                "depth@100ms".to_owned(),
                "aggTrade".to_owned(),
            ],
            seed: 0,
            book_levels: 1000,
            duration_messages: None,
        }
    }
}

/// The channels a synthetic symbol can publish.
const CHANNEL_NAMES: &str =
    "bookTicker, trade, aggTrade, depth, depth@0ms, depth@100ms, depth@500ms";

/// Draw weights per channel kind, out of their sum: the capture's mix of about 70% bookTicker,
/// 10% depth and 20% trades (66,089 / 6,551 / 21,313 messages).
const BOOK_TICKER_WEIGHT: u32 = 7000;
const DEPTH_WEIGHT: u32 = 1000;
const TRADE_WEIGHT: u32 = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChannelKind {
    BookTicker,
    /// A diff stream; the index is its slot among the depth channels, for its pending changes.
    Depth(usize),
    Trade,
    AggTrade,
}

/// Static facts about a symbol: the exchange filters that shape its numbers.
struct SymbolSpec {
    name: &'static str,
    /// The start price in units of `10^-price_decimals`.
    start_price_units: i64,
    price_decimals: u32,
    /// The tick size (PRICE_FILTER tickSize) in the same units.
    tick_units: i64,
    /// Quantities are whole lots of `10^-quantity_decimals` (LOT_SIZE stepSize).
    quantity_decimals: u32,
    /// The largest quantity of a level or a trade, in lots.
    max_quantity_lots: u64,
}

/// Roughly the USD-M filters of these symbols in 2024 (`GET /fapi/v1/exchangeInfo`).
const LISTED_SYMBOLS: [SymbolSpec; 8] = [
    SymbolSpec {
        name: "BTCUSDT",
        start_price_units: 6_000_000,
        price_decimals: 2,
        tick_units: 10,
        quantity_decimals: 3,
        max_quantity_lots: 2_000,
    },
    SymbolSpec {
        name: "ETHUSDT",
        start_price_units: 300_000,
        price_decimals: 2,
        tick_units: 1,
        quantity_decimals: 3,
        max_quantity_lots: 20_000,
    },
    SymbolSpec {
        name: "SOLUSDT",
        start_price_units: 1_500_000,
        price_decimals: 4,
        tick_units: 100,
        quantity_decimals: 0,
        max_quantity_lots: 500,
    },
    SymbolSpec {
        name: "BNBUSDT",
        start_price_units: 550_000,
        price_decimals: 3,
        tick_units: 10,
        quantity_decimals: 2,
        max_quantity_lots: 5_000,
    },
    SymbolSpec {
        name: "XRPUSDT",
        start_price_units: 5_000,
        price_decimals: 4,
        tick_units: 1,
        quantity_decimals: 1,
        max_quantity_lots: 100_000,
    },
    SymbolSpec {
        name: "DOGEUSDT",
        start_price_units: 100_000,
        price_decimals: 6,
        tick_units: 10,
        quantity_decimals: 0,
        max_quantity_lots: 100_000,
    },
    SymbolSpec {
        name: "ADAUSDT",
        start_price_units: 35_000,
        price_decimals: 5,
        tick_units: 10,
        quantity_decimals: 0,
        max_quantity_lots: 20_000,
    },
    SymbolSpec {
        name: "AVAXUSDT",
        start_price_units: 250_000,
        price_decimals: 4,
        tick_units: 10,
        quantity_decimals: 0,
        max_quantity_lots: 1_000,
    },
];

/// The filters of the generic `SYM<k>USDT` symbols.
const GENERIC_SYMBOL: SymbolSpec = SymbolSpec {
    name: "",
    start_price_units: 100_000,
    price_decimals: 4,
    tick_units: 10,
    quantity_decimals: 2,
    max_quantity_lots: 10_000,
};

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
/// one add and three multiply-xorshift steps per number, good enough statistics for a market
/// model, and no dependency. The Thalex simulator's market uses it too.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A number in `0..bound` (`bound` > 0) by Lemire's multiply-shift; the bias is below
    /// bound / 2^64, far below anything this model could show.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound.max(1))) >> 64) as u64
    }

    /// True with probability `permille` / 1000.
    pub(crate) fn chance(&mut self, permille: u64) -> bool {
        self.below(1000) < permille
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Bid,
    Ask,
}

/// The book a REST snapshot shows when depth channels exist: it moves only when a diff goes out,
/// so a snapshot never holds a change that no diff has carried yet.
struct PublishedBook {
    bids: BTreeMap<i64, u64>,
    asks: BTreeMap<i64, u64>,
    /// Levels changed in the live book since the last diff of any depth channel.
    pending: Vec<(Side, i64)>,
    last_update_id: u64,
    event_time_ms: u64,
}

/// One symbol's market: its live book, its ids and what its depth channels still owe.
struct Market {
    spec: &'static SymbolSpec,
    name: String,
    /// One stream name per configured channel, in the configuration's order.
    streams: Vec<String>,
    /// Live book: price units to quantity lots.
    bids: BTreeMap<i64, u64>,
    asks: BTreeMap<i64, u64>,
    book_levels: usize,
    /// How far the mid may wander before the pull back to the start price is strongest, ticks.
    reversion_ticks: i64,
    update_id: u64,
    /// Per depth channel: levels changed since its last diff, and that diff's final update id.
    depth_pending: Vec<Vec<(Side, i64)>>,
    depth_last_update_id: Vec<u64>,
    published: Option<PublishedBook>,
    next_trade_id: u64,
    next_agg_trade_id: u64,
    last_event_time_ms: u64,
}

impl Market {
    fn new(
        index: usize,
        channels: &[String],
        depth_channels: usize,
        book_levels: usize,
        rng: &mut SplitMix64,
    ) -> Market {
        let (spec, name) = match LISTED_SYMBOLS.get(index) {
            Some(spec) => (spec, spec.name.to_owned()),
            None => (&GENERIC_SYMBOL, format!("SYM{index}USDT")),
        };
        let lower = name.to_ascii_lowercase();
        let streams = channels
            .iter()
            .map(|channel| format!("{lower}@{channel}"))
            .collect();
        let tick = spec.tick_units;
        let best_bid = spec.start_price_units / tick * tick;
        let mut bids = BTreeMap::new();
        let mut asks = BTreeMap::new();
        for level in 0..book_levels as i64 {
            let bid = best_bid - level * tick;
            if bid > 0 {
                bids.insert(bid, 1 + rng.below(spec.max_quantity_lots));
            }
            asks.insert(
                best_bid + (level + 1) * tick,
                1 + rng.below(spec.max_quantity_lots),
            );
        }
        // Ids far apart per symbol make a mixed-up symbol obvious in a failing test's output.
        let id_base = index as u64 + 1;
        let update_id = id_base * 1_000_000_000;
        let published = (depth_channels > 0).then(|| PublishedBook {
            bids: bids.clone(),
            asks: asks.clone(),
            pending: Vec::new(),
            last_update_id: update_id,
            event_time_ms: SYNTHETIC_EPOCH_MS,
        });
        let start_ticks = spec.start_price_units / tick;
        Market {
            spec,
            name,
            streams,
            bids,
            asks,
            book_levels,
            // At least 100 ticks of room, at most a quarter of the start price.
            reversion_ticks: (book_levels as i64 / 2)
                .max(100)
                .min((start_ticks / 4).max(1)),
            update_id,
            depth_pending: vec![Vec::new(); depth_channels],
            depth_last_update_id: vec![update_id; depth_channels],
            published,
            next_trade_id: id_base * 100_000_000,
            next_agg_trade_id: id_base * 10_000_000,
            last_event_time_ms: SYNTHETIC_EPOCH_MS,
        }
    }

    fn side(&self, side: Side) -> &BTreeMap<i64, u64> {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<i64, u64> {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }

    /// The best level of a side. Neither side is ever empty: every removal of a last level is
    /// preceded by a refill or replaced by a quantity change.
    fn best(&self, side: Side) -> (i64, u64) {
        let best = match side {
            Side::Bid => self.bids.last_key_value(),
            Side::Ask => self.asks.first_key_value(),
        };
        best.map_or((0, 0), |(&price, &lots)| (price, lots))
    }

    fn deepest(&self, side: Side) -> Option<i64> {
        match side {
            Side::Bid => self.bids.first_key_value(),
            Side::Ask => self.asks.last_key_value(),
        }
        .map(|(&price, _)| price)
    }

    /// `ticks` ticks away from `price`, away from the spread on `side`; `None` at or below zero.
    fn away(&self, side: Side, price: i64, ticks: i64) -> Option<i64> {
        let moved = match side {
            Side::Bid => price - ticks * self.spec.tick_units,
            Side::Ask => price + ticks * self.spec.tick_units,
        };
        (moved > 0).then_some(moved)
    }

    fn random_lots(&self, rng: &mut SplitMix64) -> u64 {
        1 + rng.below(self.spec.max_quantity_lots)
    }

    /// A random quantity other than `lots`, so a change at the top really shows in the
    /// bookTicker.
    fn other_lots(&self, lots: u64, rng: &mut SplitMix64) -> u64 {
        let drawn = self.random_lots(rng);
        if drawn == lots {
            lots % self.spec.max_quantity_lots + 1
        } else {
            drawn
        }
    }

    /// Sets a level (0 lots removes it) and notes it for every depth channel's next diff and for
    /// the published book. The caller ends the change with [`Market::commit`].
    fn set_level(&mut self, side: Side, price: i64, lots: u64) {
        let levels = self.side_mut(side);
        if lots == 0 {
            levels.remove(&price);
        } else {
            levels.insert(price, lots);
        }
        for pending in &mut self.depth_pending {
            pending.push((side, price));
        }
        if let Some(published) = &mut self.published {
            published.pending.push((side, price));
        }
    }

    /// Ends one book change: it takes the next update id.
    fn commit(&mut self) {
        self.update_id += 1;
    }

    /// Keeps a side at `book_levels`: drops the deepest level of a side that grew, or adds one
    /// behind the deepest of a side that shrank (not possible for bids at the lowest tick).
    fn keep_depth(&mut self, side: Side) {
        while self.side(side).len() > self.book_levels {
            let Some(deepest) = self.deepest(side) else {
                break;
            };
            self.set_level(side, deepest, 0);
        }
        if self.side(side).len() < self.book_levels {
            if let Some(behind) = self.refill_price(side) {
                let lots = 1 + (self.spec.max_quantity_lots / 2);
                self.set_level(side, behind, lots);
            }
        }
    }

    fn refill_price(&self, side: Side) -> Option<i64> {
        let deepest = self.deepest(side)?;
        self.away(side, deepest, 1)
    }

    /// Whether the best level of `side` may go: something stays behind it.
    fn can_remove_best(&self, side: Side) -> bool {
        self.side(side).len() > 1 || self.refill_price(side).is_some()
    }

    fn random_side(rng: &mut SplitMix64) -> Side {
        if rng.below(2) == 0 {
            Side::Bid
        } else {
            Side::Ask
        }
    }

    /// A change below the top: mostly within 20 ticks of it, sometimes anywhere in the book.
    /// Always changes something (a level that cannot exist turns into a change at the top).
    fn change_deep(&mut self, rng: &mut SplitMix64) {
        let side = Self::random_side(rng);
        let (best, best_lots) = self.best(side);
        let ticks = 1 + if rng.chance(900) {
            rng.below(20)
        } else {
            rng.below(self.book_levels as u64)
        } as i64;
        match self.away(side, best, ticks) {
            Some(price) => {
                let lots = if self.side(side).contains_key(&price) && rng.chance(100) {
                    0
                } else {
                    self.random_lots(rng)
                };
                self.set_level(side, price, lots);
                self.keep_depth(side);
            }
            None => {
                let lots = self.other_lots(best_lots, rng);
                self.set_level(side, best, lots);
            }
        }
        self.commit();
    }

    /// A change that moves the top of the book: a new quantity at a best level, a new best level
    /// inside the spread, or a cancelled best level. Moves lean back toward the start price,
    /// harder the further the mid has wandered.
    fn change_top(&mut self, rng: &mut SplitMix64) {
        let tick = self.spec.tick_units;
        let (best_bid, best_bid_lots) = self.best(Side::Bid);
        let (best_ask, _) = self.best(Side::Ask);
        if rng.chance(400) {
            let side = Self::random_side(rng);
            let (price, lots) = self.best(side);
            let new_lots = self.other_lots(lots, rng);
            self.set_level(side, price, new_lots);
            self.commit();
            return;
        }
        let mid_doubled = best_bid + best_ask;
        let deviation_ticks = (mid_doubled - 2 * self.spec.start_price_units) / (2 * tick);
        let up_permille = (500 - deviation_ticks * 300 / self.reversion_ticks).clamp(200, 800);
        let up = rng.chance(up_permille as u64);
        let spread_ticks = (best_ask - best_bid) / tick;
        let improve = spread_ticks >= 2 && rng.chance(750);
        match (up, improve) {
            // Up: a higher bid inside the spread, or the best ask cancelled.
            (true, true) => {
                self.set_level(Side::Bid, best_bid + tick, self.random_lots(rng));
                self.keep_depth(Side::Bid);
            }
            (true, false) => self.cancel_best(Side::Ask, rng),
            (false, true) => {
                self.set_level(Side::Ask, best_ask - tick, self.random_lots(rng));
                self.keep_depth(Side::Ask);
            }
            (false, false) => {
                if self.can_remove_best(Side::Bid) {
                    self.cancel_best(Side::Bid, rng);
                } else {
                    let lots = self.other_lots(best_bid_lots, rng);
                    self.set_level(Side::Bid, best_bid, lots);
                }
            }
        }
        self.commit();
    }

    fn cancel_best(&mut self, side: Side, rng: &mut SplitMix64) {
        let (price, lots) = self.best(side);
        if !self.can_remove_best(side) {
            let lots = self.other_lots(lots, rng);
            self.set_level(side, price, lots);
            return;
        }
        // Refill first, so the side is never empty, not even in between.
        if let Some(behind) = self.refill_price(side) {
            let refill_lots = self.random_lots(rng);
            self.set_level(side, behind, refill_lots);
        }
        self.set_level(side, price, 0);
        self.keep_depth(side);
    }

    /// A taker order against the top of the book: returns (price, lots, buyer is maker). The
    /// level it trades against shrinks or goes.
    fn trade(&mut self, rng: &mut SplitMix64) -> (i64, u64, bool) {
        // A taker buy lifts the best ask (the buyer is not the maker); a taker sell hits the bid.
        let buyer_is_maker = rng.below(2) == 0;
        let side = if buyer_is_maker { Side::Bid } else { Side::Ask };
        let (price, lots) = self.best(side);
        let traded = 1 + rng.below(lots);
        let left = lots.saturating_sub(traded);
        if left == 0 && self.can_remove_best(side) {
            if let Some(behind) = self.refill_price(side) {
                let refill_lots = self.random_lots(rng);
                self.set_level(side, behind, refill_lots);
            }
            self.set_level(side, price, 0);
            self.keep_depth(side);
        } else {
            // The last level of a side that cannot go is replenished, like an iceberg order.
            let left = if left == 0 {
                self.random_lots(rng)
            } else {
                left
            };
            self.set_level(side, price, left);
        }
        self.commit();
        (price, traded, buyer_is_maker)
    }
}

/// A generated market. See the module docs for the model.
pub struct SyntheticSource {
    channels: Vec<ChannelKind>,
    /// Cumulative draw weights, one per channel.
    cumulative_weights: Vec<u32>,
    markets: Vec<Market>,
    by_name: HashMap<String, usize>,
    rng: SplitMix64,
    rate_per_sec: f64,
    next_index: u64,
    duration_messages: Option<u64>,
}

impl SyntheticSource {
    pub fn new(config: SyntheticConfig) -> Result<SyntheticSource, SourceError> {
        let invalid =
            |field: &'static str, reason: String| SourceError::InvalidConfig { field, reason };
        if config.symbols == 0 {
            return Err(invalid("symbols", "must be at least 1".to_owned()));
        }
        if !(config.rate_per_sec.is_finite() && config.rate_per_sec > 0.0) {
            return Err(invalid(
                "rate_per_sec",
                format!("must be a positive number, not {}", config.rate_per_sec),
            ));
        }
        if config.book_levels == 0 {
            return Err(invalid("book_levels", "must be at least 1".to_owned()));
        }
        if config.channels.is_empty() {
            return Err(invalid(
                "channels",
                format!("is empty; valid: {CHANNEL_NAMES}"),
            ));
        }
        let mut channels = Vec::with_capacity(config.channels.len());
        let mut depth_channels = 0;
        for (position, name) in config.channels.iter().enumerate() {
            if config.channels[..position].contains(name) {
                return Err(invalid("channels", format!("lists `{name}` twice")));
            }
            channels.push(match name.as_str() {
                "bookTicker" => ChannelKind::BookTicker,
                "trade" => ChannelKind::Trade,
                "aggTrade" => ChannelKind::AggTrade,
                "depth" | "depth@0ms" | "depth@100ms" | "depth@500ms" => {
                    depth_channels += 1;
                    ChannelKind::Depth(depth_channels - 1)
                }
                other => {
                    return Err(invalid(
                        "channels",
                        format!("has unknown channel `{other}`; valid: {CHANNEL_NAMES}"),
                    ))
                }
            });
        }
        let trade_channels = channels
            .iter()
            .filter(|kind| matches!(kind, ChannelKind::Trade | ChannelKind::AggTrade))
            .count() as u32;
        let mut total = 0;
        let cumulative_weights = channels
            .iter()
            .map(|kind| {
                total += match kind {
                    ChannelKind::BookTicker => BOOK_TICKER_WEIGHT,
                    ChannelKind::Depth(_) => DEPTH_WEIGHT / depth_channels as u32,
                    ChannelKind::Trade | ChannelKind::AggTrade => TRADE_WEIGHT / trade_channels,
                };
                total
            })
            .collect();
        let mut rng = SplitMix64 { state: config.seed };
        let markets: Vec<Market> = (0..config.symbols)
            .map(|index| {
                Market::new(
                    index,
                    &config.channels,
                    depth_channels,
                    config.book_levels,
                    &mut rng,
                )
            })
            .collect();
        let by_name = markets
            .iter()
            .enumerate()
            .map(|(index, market)| (market.name.clone(), index))
            .collect();
        Ok(SyntheticSource {
            channels,
            cumulative_weights,
            markets,
            by_name,
            rng,
            rate_per_sec: config.rate_per_sec,
            next_index: 0,
            duration_messages: config.duration_messages,
        })
    }

    /// The symbols, upper case, in round-robin order.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.markets.iter().map(|market| market.name.as_str())
    }

    /// Messages generated so far.
    pub fn messages_generated(&self) -> u64 {
        self.next_index
    }

    fn draw_channel(&mut self) -> usize {
        let total = self.cumulative_weights.last().copied().unwrap_or(1);
        let draw = self.rng.below(u64::from(total)) as u32;
        self.cumulative_weights
            .iter()
            .position(|&bound| draw < bound)
            .unwrap_or(0)
    }
}

impl Source for SyntheticSource {
    fn listed_symbols(&self) -> Option<Vec<String>> {
        Some(self.symbols().map(str::to_owned).collect())
    }

    fn next_message(&mut self) -> Option<SimMessage> {
        let index = self.next_index;
        if self.duration_messages.is_some_and(|limit| index >= limit) {
            return None;
        }
        self.next_index += 1;
        let offset_ns = (index as f64 * 1e9 / self.rate_per_sec) as u64;
        let now_ms = SYNTHETIC_EPOCH_MS + offset_ns / 1_000_000;
        let channel = self.draw_channel();
        let kind = self.channels.get(channel).copied()?;
        let symbol = (index % self.markets.len() as u64) as usize;
        let rng = &mut self.rng;
        let market = self.markets.get_mut(symbol)?;
        market.last_event_time_ms = now_ms;
        let stream = market.streams.get(channel)?.clone();
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"stream\":\"");
        out.extend_from_slice(stream.as_bytes());
        out.extend_from_slice(b"\",\"data\":");
        let data_start = out.len();
        let mut stamp_key = None;
        match kind {
            ChannelKind::BookTicker => {
                for _ in 0..rng.below(3) {
                    market.change_deep(rng);
                }
                market.change_top(rng);
                stamp_key = Some(market.update_id);
                write_book_ticker(&mut out, market, now_ms);
            }
            ChannelKind::Depth(slot) => {
                if market.depth_pending.get(slot).is_some_and(Vec::is_empty) {
                    market.change_deep(rng);
                }
                write_depth_update(&mut out, market, slot, now_ms);
            }
            ChannelKind::Trade => {
                let (price, lots, buyer_is_maker) = market.trade(rng);
                let trade_id = market.next_trade_id;
                market.next_trade_id += 1;
                write_trade(
                    &mut out,
                    market,
                    now_ms,
                    trade_id,
                    price,
                    lots,
                    buyer_is_maker,
                );
            }
            ChannelKind::AggTrade => {
                let (price, lots, buyer_is_maker) = market.trade(rng);
                // An aggregate of 1 to 3 fills of the same taker order at one price.
                let fills = 1 + rng.below(3.min(lots));
                let first_trade_id = market.next_trade_id;
                market.next_trade_id += fills;
                let agg_trade_id = market.next_agg_trade_id;
                market.next_agg_trade_id += 1;
                write_agg_trade(
                    &mut out,
                    market,
                    now_ms,
                    agg_trade_id,
                    (first_trade_id, first_trade_id + fills - 1),
                    price,
                    lots,
                    buyer_is_maker,
                );
            }
        }
        let data_end = out.len();
        out.push(b'}');
        Some(SimMessage {
            stream,
            combined: out,
            data: data_start..data_end,
            offset_ns,
            stamp_key,
        })
    }

    /// The book as the depth diffs returned so far describe it: `lastUpdateId` is the final
    /// update id `u` of the symbol's last diff (of any depth channel), and changes made after it
    /// are not in it yet. Without a depth channel there are no diffs to agree with, and the
    /// snapshot is the live book at the current update id. `None` for an unknown symbol.
    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>> {
        let index = match self.by_name.get(symbol) {
            Some(&index) => index,
            None => *self.by_name.get(&symbol.to_ascii_uppercase())?,
        };
        let market = self.markets.get(index)?;
        let (bids, asks, update_id, time_ms) = match &market.published {
            Some(published) => (
                &published.bids,
                &published.asks,
                published.last_update_id,
                published.event_time_ms,
            ),
            None => (
                &market.bids,
                &market.asks,
                market.update_id,
                market.last_event_time_ms,
            ),
        };
        let spec = market.spec;
        let write_level = |side: &mut SnapshotSide<'_>, price: i64, lots: u64| {
            side.level(
                |out| push_decimal(out, price, spec.price_decimals),
                |out| push_decimal(out, lots as i64, spec.quantity_decimals),
            );
        };
        Some(write_snapshot(
            update_id,
            time_ms,
            time_ms,
            |side| {
                for (&price, &lots) in bids.iter().rev().take(limit) {
                    write_level(side, price, lots);
                }
            },
            |side| {
                for (&price, &lots) in asks.iter().take(limit) {
                    write_level(side, price, lots);
                }
            },
        ))
    }
}

fn push_symbol_field(out: &mut Vec<u8>, market: &Market) {
    out.extend_from_slice(b",\"s\":\"");
    out.extend_from_slice(market.name.as_bytes());
    out.push(b'"');
}

fn push_price(out: &mut Vec<u8>, market: &Market, price: i64) {
    push_decimal(out, price, market.spec.price_decimals);
}

fn push_lots(out: &mut Vec<u8>, market: &Market, lots: u64) {
    push_decimal(out, lots as i64, market.spec.quantity_decimals);
}

/// `{"e":"bookTicker","u":..,"s":..,"b":..,"B":..,"a":..,"A":..,"T":..,"E":..}`, the capture's
/// field order.
fn write_book_ticker(out: &mut Vec<u8>, market: &Market, now_ms: u64) {
    let (bid, bid_lots) = market.best(Side::Bid);
    let (ask, ask_lots) = market.best(Side::Ask);
    out.extend_from_slice(b"{\"e\":\"bookTicker\",\"u\":");
    push_u64(out, market.update_id);
    push_symbol_field(out, market);
    out.extend_from_slice(b",\"b\":\"");
    push_price(out, market, bid);
    out.extend_from_slice(b"\",\"B\":\"");
    push_lots(out, market, bid_lots);
    out.extend_from_slice(b"\",\"a\":\"");
    push_price(out, market, ask);
    out.extend_from_slice(b"\",\"A\":\"");
    push_lots(out, market, ask_lots);
    out.extend_from_slice(b"\",\"T\":");
    push_u64(out, now_ms);
    out.extend_from_slice(b",\"E\":");
    push_u64(out, now_ms);
    out.push(b'}');
}

/// `{"e":"depthUpdate","E":..,"T":..,"s":..,"U":..,"u":..,"pu":..,"b":[..],"a":[..]}` with every
/// level changed since this channel's last diff, at its absolute quantity (0 removes), prices
/// ascending on both sides as in the capture. The published book catches up with the live one.
fn write_depth_update(out: &mut Vec<u8>, market: &mut Market, slot: usize, now_ms: u64) {
    let Some(pending) = market.depth_pending.get_mut(slot) else {
        return;
    };
    let mut changed = std::mem::take(pending);
    changed.sort_unstable();
    changed.dedup();
    let previous_update_id = market
        .depth_last_update_id
        .get(slot)
        .copied()
        .unwrap_or(market.update_id);
    out.extend_from_slice(b"{\"e\":\"depthUpdate\",\"E\":");
    push_u64(out, now_ms);
    out.extend_from_slice(b",\"T\":");
    push_u64(out, now_ms);
    push_symbol_field(out, market);
    out.extend_from_slice(b",\"U\":");
    push_u64(out, previous_update_id + 1);
    out.extend_from_slice(b",\"u\":");
    push_u64(out, market.update_id);
    out.extend_from_slice(b",\"pu\":");
    push_u64(out, previous_update_id);
    out.extend_from_slice(b",\"b\":[");
    // `changed` is sorted bids first, then asks: the side switches once.
    let mut writing = Side::Bid;
    let mut first = true;
    for &(side, price) in &changed {
        if side != writing {
            out.extend_from_slice(b"],\"a\":[");
            writing = side;
            first = true;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        let lots = market.side(side).get(&price).copied().unwrap_or(0);
        out.extend_from_slice(b"[\"");
        push_price(out, market, price);
        out.extend_from_slice(b"\",\"");
        push_lots(out, market, lots);
        out.extend_from_slice(b"\"]");
    }
    if writing == Side::Bid {
        out.extend_from_slice(b"],\"a\":[");
    }
    out.extend_from_slice(b"]}");
    changed.clear();
    if let Some(pending) = market.depth_pending.get_mut(slot) {
        *pending = changed;
    }
    if let Some(last) = market.depth_last_update_id.get_mut(slot) {
        *last = market.update_id;
    }
    publish(market, now_ms);
}

/// Brings the published book to the live one: called at every diff, of any depth channel.
fn publish(market: &mut Market, now_ms: u64) {
    let Some(published) = &mut market.published else {
        return;
    };
    for &(side, price) in &published.pending {
        let (live, shown) = match side {
            Side::Bid => (&market.bids, &mut published.bids),
            Side::Ask => (&market.asks, &mut published.asks),
        };
        match live.get(&price) {
            Some(&lots) => shown.insert(price, lots),
            None => shown.remove(&price),
        };
    }
    published.pending.clear();
    published.last_update_id = market.update_id;
    published.event_time_ms = now_ms;
}

/// `{"e":"trade","E":..,"T":..,"s":..,"t":..,"p":..,"q":..,"X":"MARKET","m":..}`, as captured.
fn write_trade(
    out: &mut Vec<u8>,
    market: &Market,
    now_ms: u64,
    trade_id: u64,
    price: i64,
    lots: u64,
    buyer_is_maker: bool,
) {
    out.extend_from_slice(b"{\"e\":\"trade\",\"E\":");
    push_u64(out, now_ms);
    out.extend_from_slice(b",\"T\":");
    push_u64(out, now_ms);
    push_symbol_field(out, market);
    out.extend_from_slice(b",\"t\":");
    push_u64(out, trade_id);
    out.extend_from_slice(b",\"p\":\"");
    push_price(out, market, price);
    out.extend_from_slice(b"\",\"q\":\"");
    push_lots(out, market, lots);
    out.extend_from_slice(b"\",\"X\":\"MARKET\",\"m\":");
    out.extend_from_slice(if buyer_is_maker { b"true}" } else { b"false}" });
}

/// `{"e":"aggTrade","E":..,"s":..,"a":..,"p":..,"q":..,"nq":..,"f":..,"l":..,"T":..,"m":..}`, the
/// order of the USD-M "Aggregate Trade Streams" docs.
#[allow(
    clippy::too_many_arguments,
    reason = "one argument per field of the message"
)]
fn write_agg_trade(
    out: &mut Vec<u8>,
    market: &Market,
    now_ms: u64,
    agg_trade_id: u64,
    (first_trade_id, last_trade_id): (u64, u64),
    price: i64,
    lots: u64,
    buyer_is_maker: bool,
) {
    out.extend_from_slice(b"{\"e\":\"aggTrade\",\"E\":");
    push_u64(out, now_ms);
    push_symbol_field(out, market);
    out.extend_from_slice(b",\"a\":");
    push_u64(out, agg_trade_id);
    out.extend_from_slice(b",\"p\":\"");
    push_price(out, market, price);
    out.extend_from_slice(b"\",\"q\":\"");
    push_lots(out, market, lots);
    // `nq`, the quantity without RPI orders (the change log, 2025-12-29: from 2025-12-31 trades
    // with RPI orders are not aggregated); the simulator has no RPI orders.
    out.extend_from_slice(b"\",\"nq\":\"");
    push_lots(out, market, lots);
    out.extend_from_slice(b"\",\"f\":");
    push_u64(out, first_trade_id);
    out.extend_from_slice(b",\"l\":");
    push_u64(out, last_trade_id);
    out.extend_from_slice(b",\"T\":");
    push_u64(out, now_ms);
    out.extend_from_slice(b",\"m\":");
    out.extend_from_slice(if buyer_is_maker { b"true}" } else { b"false}" });
}
