//! The topics of the Bybit simulator and the messages each sends, in the shapes of Bybit's own
//! pages (bybit-exchange/docs 072c197): "Orderbook", "Trade", "Ticker", "All Liquidation".
//!
//! Every subscription has its own little market, seeded from the run's seed and the topic's
//! name, so the same topic tells the same story on every connection: a book of prices on a
//! 0.10 grid around a fixed mid (bids below it, asks above it: never crossed), sizes on a 0.001
//! grid, trades near the mid, and a linear ticker whose fields drift.
//!
//! - `orderbook.{depth}.{symbol}`: a `snapshot` first, then `delta`s of the levels that
//!   changed (size `"0"` deletes a level; a level pushed out of the depth is deleted), `u` one
//!   more each message; level 1 sends snapshots only ("Linear, inverse, spot level 1 data has
//!   snapshot message only"). Key order as the page's note says: `ts` before `type` on spot and
//!   on level 1, after it on the other futures levels. Faults: a restart (the next message a
//!   snapshot with `u` = 1, the service's restart) and a skipped `u` (the next delta's `u` two
//!   more).
//! - `publicTrade.{symbol}`: one to three trades a message, `i` a number on spot and a UUID on
//!   linear, `L` (tick direction) on linear only.
//! - `tickers.{symbol}`: linear: a snapshot with every field, then deltas with only the fields
//!   that changed; spot: snapshots of spot's fields only.
//! - `allLiquidation.{symbol}` (linear only): one liquidation a message.

use crate::source::SplitMix64;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A category of the public WebSocket: its entry point and what it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Spot,
    Linear,
}

impl Category {
    pub fn path(self) -> &'static str {
        match self {
            Category::Spot => "/v5/public/spot",
            Category::Linear => "/v5/public/linear",
        }
    }
}

/// The orderbook depths spot and linear offer.
pub const DEPTHS: [usize; 4] = [1, 50, 200, 1000];

/// The mid of every book, in cents.
const MID_CENTS: i64 = 3_000_000;
/// The price grid, in cents.
const TICK_CENTS: i64 = 10;
/// Levels a book holds at most (a deeper topic's book fills up to this).
const MAX_LEVELS: usize = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Book { depth: usize },
    Trade,
    Ticker,
    Liquidation,
}

/// Why a topic is refused: Bybit's `ret_msg` for it.
pub(super) fn check_topic(
    topic: &str,
    category: Category,
    symbols: &[String],
) -> Result<(Kind, String), String> {
    let not_found = || format!("error:handler not found,topic:{topic}");
    let (kind, symbol) = if let Some(rest) = topic.strip_prefix("orderbook.") {
        let (depth, symbol) = rest.split_once('.').ok_or_else(not_found)?;
        let depth: usize = depth.parse().map_err(|_| not_found())?;
        if !DEPTHS.contains(&depth) {
            return Err(not_found());
        }
        (Kind::Book { depth }, symbol)
    } else if let Some(symbol) = topic.strip_prefix("publicTrade.") {
        (Kind::Trade, symbol)
    } else if let Some(symbol) = topic.strip_prefix("tickers.") {
        (Kind::Ticker, symbol)
    } else if let Some(symbol) = topic.strip_prefix("allLiquidation.") {
        if category == Category::Spot {
            return Err(not_found());
        }
        (Kind::Liquidation, symbol)
    } else {
        return Err(not_found());
    };
    if !symbols.iter().any(|known| known == symbol) {
        return Err(not_found());
    }
    Ok((kind, symbol.to_owned()))
}

fn price(out: &mut String, cents: i64) {
    let _ = write!(out, "\"{}.{:02}\"", cents / 100, cents % 100);
}

fn size(out: &mut String, milli: i64) {
    let _ = write!(out, "\"{}.{:03}\"", milli / 1000, milli % 1000);
}

/// A linear ticker's fields, as numbers on their grids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ticker {
    last: i64,
    mark: i64,
    index: i64,
    bid: i64,
    bid_size: i64,
    ask: i64,
    ask_size: i64,
    /// Open interest, 0.001.
    open_interest: i64,
    /// Funding rate, 1e-6.
    funding: i64,
}

/// A ticker field: its key, its value, how it is written.
type TickerField = (&'static str, fn(&Ticker) -> i64, fn(&mut String, i64));

/// One subscription of one connection and its market.
pub(super) struct Subscription {
    pub name: String,
    kind: Kind,
    symbol: String,
    category: Category,
    rng: SplitMix64,
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    /// The `u` of the last book message.
    u: u64,
    seq: u64,
    started: bool,
    restart_next: bool,
    skip_next: bool,
    trade_id: u64,
    ticker: Option<Ticker>,
}

/// FNV-1a of a topic name, to seed its market.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Subscription {
    pub(super) fn new(
        name: &str,
        kind: Kind,
        symbol: String,
        category: Category,
        seed: u64,
    ) -> Subscription {
        Subscription {
            name: name.to_owned(),
            kind,
            symbol,
            category,
            rng: SplitMix64::new(seed ^ name_hash(name)),
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            // The first snapshot's `u` is the orderbook page's example's.
            u: 18_521_287,
            seq: 7_961_638_724,
            started: false,
            restart_next: false,
            skip_next: false,
            trade_id: 2_290_000_000_061_666_327,
            ticker: None,
        }
    }

    pub(super) fn is_book(&self) -> bool {
        matches!(self.kind, Kind::Book { .. })
    }

    /// The restart fault: the next book message is a snapshot with `u` = 1.
    pub(super) fn restart(&mut self) {
        self.restart_next = true;
    }

    /// The skipped-`u` fault: the next delta's `u` is two more than the last.
    pub(super) fn skip_u(&mut self) {
        self.skip_next = true;
    }

    /// The next message, stamped `now_ms`.
    pub(super) fn render(&mut self, now_ms: u64) -> String {
        match self.kind {
            Kind::Book { depth } => self.book(depth, now_ms),
            Kind::Trade => self.trades(now_ms),
            Kind::Ticker => self.ticker(now_ms),
            Kind::Liquidation => self.liquidation(now_ms),
        }
    }

    fn depth_levels(depth: usize) -> usize {
        depth.min(MAX_LEVELS)
    }

    fn fill(&mut self, depth: usize) {
        let levels = Self::depth_levels(depth) as i64;
        self.bids.clear();
        self.asks.clear();
        for step in 1..=levels {
            let bid_size = 1 + self.rng.below(5_000) as i64;
            let ask_size = 1 + self.rng.below(5_000) as i64;
            self.bids.insert(MID_CENTS - step * TICK_CENTS, bid_size);
            self.asks.insert(MID_CENTS + step * TICK_CENTS, ask_size);
        }
    }

    /// One change to the book: a size, a new level (the worst one leaves when the side is
    /// full) or a level gone. Returns the levels changed: (bid side, price, new size).
    fn change(&mut self, depth: usize, out: &mut Vec<(bool, i64, i64)>) {
        let bid = self.rng.below(2) == 0;
        let cap = Self::depth_levels(depth);
        let side = if bid { &mut self.bids } else { &mut self.asks };
        let span = (cap as i64 + 5).max(2);
        let offset = 1 + self.rng.below(span as u64) as i64;
        let at = if bid {
            MID_CENTS - offset * TICK_CENTS
        } else {
            MID_CENTS + offset * TICK_CENTS
        };
        if side.contains_key(&at) && side.len() > 1 && self.rng.below(3) == 0 {
            side.remove(&at);
            out.push((bid, at, 0));
            return;
        }
        let new_size = 1 + self.rng.below(5_000) as i64;
        side.insert(at, new_size);
        out.push((bid, at, new_size));
        if side.len() > cap {
            // The worst level leaves the depth: the lowest bid, the highest ask.
            let worst = if bid {
                side.keys().next().copied()
            } else {
                side.keys().next_back().copied()
            };
            if let Some(worst) = worst {
                side.remove(&worst);
                out.push((bid, worst, 0));
            }
        }
    }

    fn book(&mut self, depth: usize, now_ms: u64) -> String {
        let snapshot = !self.started || self.restart_next || depth == 1;
        let mut changed = Vec::new();
        if !self.started {
            self.fill(depth);
            self.u = self.u.wrapping_add(1);
        } else if self.restart_next {
            // The service restarted: a new snapshot, `u` from 1.
            self.fill(depth);
            self.u = 1;
        } else {
            for _ in 0..1 + self.rng.below(3) {
                self.change(depth, &mut changed);
            }
            self.u = self.u.wrapping_add(if self.skip_next { 2 } else { 1 });
            self.skip_next = false;
        }
        self.started = true;
        self.restart_next = false;
        self.seq += 1 + self.rng.below(50);
        let mut text = String::with_capacity(256);
        let _ = write!(text, r#"{{"topic":"{}","#, self.name);
        let kind = if snapshot { "snapshot" } else { "delta" };
        // Spot (all levels) and level 1: `ts` before `type`; the other futures levels after.
        if self.category == Category::Spot || depth == 1 {
            let _ = write!(text, r#""ts":{now_ms},"type":"{kind}","#);
        } else {
            let _ = write!(text, r#""type":"{kind}","ts":{now_ms},"#);
        }
        let _ = write!(text, r#""data":{{"s":"{}","b":["#, self.symbol);
        let write_levels = |text: &mut String, levels: &mut dyn Iterator<Item = (i64, i64)>| {
            for (index, (at, amount)) in levels.enumerate() {
                if index > 0 {
                    text.push(',');
                }
                text.push('[');
                price(text, at);
                text.push(',');
                size(text, amount);
                text.push(']');
            }
        };
        if snapshot {
            write_levels(
                &mut text,
                &mut self.bids.iter().rev().map(|(&p, &s)| (p, s)),
            );
            text.push_str(r#"],"a":["#);
            write_levels(&mut text, &mut self.asks.iter().map(|(&p, &s)| (p, s)));
        } else {
            write_levels(
                &mut text,
                &mut changed.iter().filter(|change| change.0).map(|c| (c.1, c.2)),
            );
            text.push_str(r#"],"a":["#);
            write_levels(
                &mut text,
                &mut changed
                    .iter()
                    .filter(|change| !change.0)
                    .map(|c| (c.1, c.2)),
            );
        }
        let _ = write!(
            text,
            r#"],"u":{},"seq":{}}},"cts":{}}}"#,
            self.u,
            self.seq,
            now_ms.saturating_sub(2)
        );
        text
    }

    fn trades(&mut self, now_ms: u64) -> String {
        let mut text = String::with_capacity(256);
        let _ = write!(
            text,
            r#"{{"topic":"{}","type":"snapshot","ts":{now_ms},"data":["#,
            self.name
        );
        for index in 0..1 + self.rng.below(3) {
            if index > 0 {
                text.push(',');
            }
            let buy = self.rng.below(2) == 0;
            let at = MID_CENTS + (self.rng.below(21) as i64 - 10) * TICK_CENTS;
            self.seq += 1;
            self.trade_id += 1;
            let id = match self.category {
                Category::Spot => self.trade_id.to_string(),
                Category::Linear => {
                    let high = self.rng.next_u64();
                    let low = self.rng.next_u64();
                    format!(
                        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                        high >> 32,
                        (high >> 16) & 0xffff,
                        high & 0xffff,
                        low >> 48,
                        low & 0xffff_ffff_ffff
                    )
                }
            };
            let _ = write!(
                text,
                r#"{{"T":{},"s":"{}","S":"{}","v":"#,
                now_ms.saturating_sub(3),
                self.symbol,
                if buy { "Buy" } else { "Sell" }
            );
            size(&mut text, 1 + self.rng.below(2_000) as i64);
            text.push_str(r#","p":"#);
            price(&mut text, at);
            if self.category == Category::Linear {
                text.push_str(if buy {
                    r#","L":"PlusTick""#
                } else {
                    r#","L":"MinusTick""#
                });
            }
            let _ = write!(text, r#","i":"{id}","BT":false,"seq":{}}}"#, self.seq);
        }
        text.push_str("]}");
        text
    }

    fn ticker(&mut self, now_ms: u64) -> String {
        self.seq += 1;
        let mut text = String::with_capacity(512);
        if self.category == Category::Spot {
            let last = MID_CENTS + (self.rng.below(21) as i64 - 10) * TICK_CENTS;
            let _ = write!(
                text,
                r#"{{"topic":"{}","ts":{now_ms},"type":"snapshot","cs":{},"data":{{"symbol":"{}","lastPrice":"#,
                self.name, self.seq, self.symbol
            );
            price(&mut text, last);
            text.push_str(r#","highPrice24h":"#);
            price(&mut text, MID_CENTS + 50_000);
            text.push_str(r#","lowPrice24h":"#);
            price(&mut text, MID_CENTS - 50_000);
            text.push_str(r#","prevPrice24h":"#);
            price(&mut text, MID_CENTS);
            text.push_str(r#","volume24h":"6780.866843","turnover24h":"141946527.22907118","price24hPcnt":"0.0196","usdIndexPrice":"#);
            price(&mut text, last);
            text.push_str("}}");
            return text;
        }
        let previous = self.ticker;
        let mut next = previous.unwrap_or(Ticker {
            last: MID_CENTS,
            mark: MID_CENTS,
            index: MID_CENTS + 30,
            bid: MID_CENTS - TICK_CENTS,
            bid_size: 23_789_165,
            ask: MID_CENTS + TICK_CENTS,
            ask_size: 23_775_469,
            open_interest: 492_373_720,
            funding: 100,
        });
        if previous.is_some() {
            for _ in 0..1 + self.rng.below(3) {
                let step = self.rng.below(5) as i64 - 2;
                match self.rng.below(6) {
                    0 => next.bid_size = 1 + self.rng.below(50_000) as i64,
                    1 => next.ask_size = 1 + self.rng.below(50_000) as i64,
                    2 => next.mark += step * TICK_CENTS,
                    3 => next.index += step * TICK_CENTS,
                    4 => next.open_interest += 1 + self.rng.below(1_000) as i64,
                    _ => {
                        let shift = step * TICK_CENTS;
                        next.bid += shift;
                        next.ask += shift;
                        next.last = next.bid;
                    }
                }
            }
        }
        self.ticker = Some(next);
        let snapshot = previous.is_none();
        let _ = write!(
            text,
            r#"{{"topic":"{}","type":"{}","data":{{"symbol":"{}""#,
            self.name,
            if snapshot { "snapshot" } else { "delta" },
            self.symbol
        );
        let changed = |old: Option<i64>, new: i64| old != Some(new);
        let prev = |field: fn(&Ticker) -> i64| previous.as_ref().map(field);
        if snapshot {
            text.push_str(r#","tickDirection":"PlusTick","price24hPcnt":"-0.158315""#);
        }
        let fields: [TickerField; 9] = [
            ("lastPrice", |t| t.last, price),
            ("markPrice", |t| t.mark, price),
            ("indexPrice", |t| t.index, price),
            ("openInterest", |t| t.open_interest, size),
            (
                "fundingRate",
                |t| t.funding,
                |out, v| {
                    let _ = write!(out, "\"0.{v:06}\"");
                },
            ),
            ("bid1Price", |t| t.bid, price),
            ("bid1Size", |t| t.bid_size, size),
            ("ask1Price", |t| t.ask, price),
            ("ask1Size", |t| t.ask_size, size),
        ];
        for (name, get, write_value) in fields {
            if snapshot || changed(prev(get), get(&next)) {
                let _ = write!(text, r#","{name}":"#);
                write_value(&mut text, get(&next));
            }
        }
        if snapshot {
            text.push_str(
                r#","turnover24h":"4936790807.6521","volume24h":"73191.3870","fundingIntervalHour":"8","fundingCap":"0.005","nextFundingTime":"1760342400000","preOpenPrice":"","preQty":"","curPreListingPhase":"""#,
            );
        }
        let _ = write!(text, r#"}},"cs":{},"ts":{now_ms}}}"#, self.seq);
        text
    }

    fn liquidation(&mut self, now_ms: u64) -> String {
        let mut text = String::with_capacity(160);
        let _ = write!(
            text,
            r#"{{"topic":"{}","type":"snapshot","ts":{now_ms},"data":[{{"T":{},"s":"{}","S":"{}","v":"#,
            self.name,
            now_ms.saturating_sub(300),
            self.symbol,
            if self.rng.below(2) == 0 {
                "Buy"
            } else {
                "Sell"
            }
        );
        size(&mut text, 1 + self.rng.below(20_000_000) as i64);
        text.push_str(r#","p":"#);
        price(
            &mut text,
            MID_CENTS + (self.rng.below(101) as i64 - 50) * TICK_CENTS,
        );
        text.push_str("}]}");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_checked_as_bybit_answers_them() {
        let symbols = vec!["BTCUSDT".to_owned()];
        assert!(check_topic("orderbook.50.BTCUSDT", Category::Spot, &symbols).is_ok());
        assert!(check_topic("allLiquidation.BTCUSDT", Category::Linear, &symbols).is_ok());
        for refused in [
            "orderbook.40.BTCUSDT",
            "orderbook.50.ETHUSDT",
            "kline.1.BTCUSDT",
            "allLiquidation.BTCUSDT",
        ] {
            let error = check_topic(refused, Category::Spot, &symbols).unwrap_err();
            assert_eq!(error, format!("error:handler not found,topic:{refused}"));
        }
    }

    #[test]
    fn books_are_snapshot_then_deltas_with_u_one_more_each_and_the_faults_break_it() {
        let mut book = Subscription::new(
            "orderbook.50.BTCUSDT",
            Kind::Book { depth: 50 },
            "BTCUSDT".into(),
            Category::Linear,
            1,
        );
        let read = |text: &str| -> serde_json::Value { serde_json::from_str(text).expect("JSON") };
        let first = read(&book.render(1));
        assert_eq!(first["type"], "snapshot");
        let mut u = first["data"]["u"].as_u64().unwrap();
        for _ in 0..20 {
            let next = read(&book.render(2));
            assert_eq!(next["type"], "delta");
            assert_eq!(next["data"]["u"].as_u64().unwrap(), u + 1);
            u += 1;
        }
        book.skip_u();
        assert_eq!(read(&book.render(3))["data"]["u"].as_u64().unwrap(), u + 2);
        book.restart();
        let restart = read(&book.render(4));
        assert_eq!(
            (restart["type"].as_str(), restart["data"]["u"].as_u64()),
            (Some("snapshot"), Some(1))
        );
        let after = read(&book.render(5));
        assert_eq!(after["data"]["u"].as_u64(), Some(2));
    }
}
