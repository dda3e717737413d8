//! The channels of the OKX simulator and the messages each sends, in the shapes of OKX's API v5
//! page (the sections as of 2026-06-15): "Order book channel", "Trades channel", "All trades
//! channel", "Tickers channel", "Mark price channel", "Index tickers channel", "Funding rate
//! channel", "Open interest channel", "Liquidation orders channel".
//!
//! Every subscription has its own little market, seeded from the run's seed and the stream's
//! name, so the same stream tells the same story on every connection: a book of prices on a
//! 0.1 grid around a fixed mid (never crossed), sizes written in the venue's varied forms (with
//! and without trailing zeros, the strings the checksum is computed over), trades near the mid.
//!
//! - `books`, `books-l2-tbt`, `books50-l2-tbt`: a `snapshot` (`prevSeqId` -1), then `update`s of
//!   the levels that changed (size `"0"` deletes), `seqId` up by 1 to 3 each message,
//!   `prevSeqId` the last one, and the checksum of the page ("Checksum": CRC32 of the first 25
//!   levels a side, `bid:size:ask:size...`, signed), computed here with `flate2`'s CRC32 over
//!   strings formatted here. Faults: a corrupted checksum (its lowest bit flipped) and the
//!   documented sequence reset (the next update's `seqId` smaller than its `prevSeqId`).
//! - `books5`, `bbo-tbt`: snapshots of the first 5 (1) levels every time, no `action`.
//! - `trades`, `trades-all`: one trade a message.
//! - `tickers`: the page's fields, the best bid and offer from the book model.
//! - `mark-price`, `index-tickers`, `funding-rate`, `open-interest`: one row each.
//! - `liquidation-orders` (by `instType`): one detail for one instrument of that type.

use crate::source::SplitMix64;
use std::collections::BTreeMap;

/// The mid of every book, in tenths.
const MID_TENTHS: i64 = 300_000;
/// Levels a book holds at most a side.
const MAX_LEVELS: usize = 40;

/// The channels served and the instruments they take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A book channel: its depth, and whether it sends updates.
    Book {
        depth: usize,
        incremental: bool,
    },
    Trades,
    Tickers,
    Mark,
    Index,
    Funding,
    OpenInterest,
    Liquidations,
}

/// Whether `channel` needs the login.
pub(super) fn needs_login(channel: &str) -> bool {
    matches!(channel, "books-l2-tbt" | "books50-l2-tbt")
}

/// The kind of `channel` on `path` (`business`: `/ws/v5/business`), or `None` where it is not
/// served.
pub(super) fn kind_of(channel: &str, business: bool) -> Option<Kind> {
    let kind = match channel {
        "books" | "books-l2-tbt" => Kind::Book {
            depth: 400,
            incremental: true,
        },
        "books50-l2-tbt" => Kind::Book {
            depth: 50,
            incremental: true,
        },
        "books5" => Kind::Book {
            depth: 5,
            incremental: false,
        },
        "bbo-tbt" => Kind::Book {
            depth: 1,
            incremental: false,
        },
        "trades" | "trades-all" => Kind::Trades,
        "tickers" => Kind::Tickers,
        "mark-price" => Kind::Mark,
        "index-tickers" => Kind::Index,
        "funding-rate" => Kind::Funding,
        "open-interest" => Kind::OpenInterest,
        "liquidation-orders" => Kind::Liquidations,
        _ => return None,
    };
    // `trades-all` lives on the business entry point, the rest on the public one.
    ((channel == "trades-all") == business).then_some(kind)
}

/// An instrument's type, as `liquidation-orders` takes it.
pub(super) fn inst_type(inst_id: &str) -> &'static str {
    let parts: Vec<&str> = inst_id.split('-').collect();
    match parts.as_slice() {
        [.., "SWAP"] => "SWAP",
        [_, _, _, _, "C" | "P"] => "OPTION",
        [_, _, date] if date.bytes().all(|byte| byte.is_ascii_digit()) => "FUTURES",
        _ => "MARGIN",
    }
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A price of `tenths` as OKX writes it: no trailing zeros (`8477`, `8476.9`).
fn price_text(tenths: i64) -> String {
    if tenths % 10 == 0 {
        format!("{}", tenths / 10)
    } else {
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}

/// The checksum of the page over `bids` and `asks` (best first, strings).
pub fn checksum(bids: &[(String, String)], asks: &[(String, String)]) -> i32 {
    let mut parts: Vec<&str> = Vec::new();
    for index in 0..25 {
        for side in [bids, asks] {
            if let Some((price, size)) = side.get(index) {
                parts.push(price);
                parts.push(size);
            }
        }
    }
    let mut crc = flate2::Crc::new();
    crc.update(parts.join(":").as_bytes());
    crc.sum() as i32
}

/// Levels as `(price, size)` strings, best first.
type Levels = Vec<(String, String)>;

/// One subscription: its stream and its market.
pub(super) struct Subscription {
    /// The `arg` object as sent back (`{"channel":..,"instId":..}`).
    pub arg: String,
    pub channel: String,
    /// `instId`, or `instType` for `liquidation-orders`.
    pub target: String,
    /// The instruments of that type (`liquidation-orders`).
    instruments: Vec<String>,
    kind: Kind,
    rng: SplitMix64,
    /// The book: price in tenths to size string.
    bids: BTreeMap<i64, String>,
    asks: BTreeMap<i64, String>,
    started: bool,
    seq: i64,
    trade_id: u64,
    /// Faults due on the next update.
    corrupt_next: bool,
    reset_next: bool,
}

impl Subscription {
    pub(super) fn new(
        channel: &str,
        target: &str,
        kind: Kind,
        instruments: Vec<String>,
        seed: u64,
    ) -> Subscription {
        let key = if kind == Kind::Liquidations {
            "instType"
        } else {
            "instId"
        };
        Subscription {
            arg: format!(r#"{{"channel":"{channel}","{key}":"{target}"}}"#),
            channel: channel.to_owned(),
            target: target.to_owned(),
            instruments,
            kind,
            rng: SplitMix64::new(seed ^ name_hash(channel) ^ name_hash(target).rotate_left(17)),
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            started: false,
            seq: 1000,
            trade_id: 100_000,
            corrupt_next: false,
            reset_next: false,
        }
    }

    pub(super) fn is_incremental_book(&self) -> bool {
        matches!(
            self.kind,
            Kind::Book {
                incremental: true,
                ..
            }
        )
    }

    /// The next update's checksum is wrong.
    pub(super) fn corrupt(&mut self) {
        self.corrupt_next = true;
    }

    /// The next update resets the sequence (after maintenance: a `seqId` below `prevSeqId`).
    pub(super) fn reset_sequence(&mut self) {
        self.reset_next = true;
    }

    fn size_text(&mut self) -> String {
        let units = 1 + self.rng.below(9_999);
        match self.rng.below(3) {
            0 => format!("{units}"),
            1 => format!("{}.{:03}0", units / 1000, units % 1000),
            _ => format!("{}.{:04}", units / 10_000, units % 10_000),
        }
    }

    fn fill(&mut self) {
        self.bids.clear();
        self.asks.clear();
        for step in 1..=(MAX_LEVELS as i64) {
            if self.rng.below(4) != 0 {
                let size = self.size_text();
                self.bids.insert(MID_TENTHS - step, size);
            }
            if self.rng.below(4) != 0 {
                let size = self.size_text();
                self.asks.insert(MID_TENTHS + step, size);
            }
        }
    }

    fn side(levels: &BTreeMap<i64, String>, bids: bool, depth: usize) -> Vec<(String, String)> {
        let texts = |(price, size): (&i64, &String)| (price_text(*price), size.clone());
        if bids {
            levels.iter().rev().take(depth).map(texts).collect()
        } else {
            levels.iter().take(depth).map(texts).collect()
        }
    }

    fn levels_json(levels: &[(String, String)]) -> String {
        let rows: Vec<String> = levels
            .iter()
            .map(|(price, size)| format!(r#"["{price}","{size}","0","{}"]"#, 1 + size.len() % 4))
            .collect();
        format!("[{}]", rows.join(","))
    }

    /// The next message, stamped `now_ms`.
    pub(super) fn render(&mut self, now_ms: u64) -> String {
        match self.kind {
            Kind::Book { depth, incremental } => self.book(now_ms, depth, incremental),
            Kind::Trades => {
                self.trade_id += 1 + self.rng.below(3);
                let price = price_text(MID_TENTHS - 5 + self.rng.below(10) as i64);
                let size = self.size_text();
                let side = if self.rng.below(2) == 0 {
                    "buy"
                } else {
                    "sell"
                };
                let seq = if self.channel == "trades" {
                    self.seq += 1;
                    format!(r#","seqId":{}"#, self.seq)
                } else {
                    String::new()
                };
                format!(
                    r#"{{"arg":{},"data":[{{"instId":"{}","tradeId":"{}","px":"{price}","sz":"{size}","side":"{side}","ts":"{now_ms}","count":"1","source":"0"{seq}}}]}}"#,
                    self.arg, self.target, self.trade_id
                )
            }
            Kind::Tickers => {
                let bid = MID_TENTHS - 1 - self.rng.below(3) as i64;
                let ask = MID_TENTHS + 1 + self.rng.below(3) as i64;
                let (bid_size, ask_size) = (self.size_text(), self.size_text());
                format!(
                    r#"{{"arg":{},"data":[{{"instType":"{}","instId":"{}","last":"{}","lastSz":"0.1","askPx":"{}","askSz":"{ask_size}","bidPx":"{}","bidSz":"{bid_size}","open24h":"9000","high24h":"10000","low24h":"8888.88","volCcy24h":"2222","vol24h":"2222","sodUtc0":"2222","sodUtc8":"2222","ts":"{now_ms}"}}]}}"#,
                    self.arg,
                    inst_type(&self.target),
                    self.target,
                    price_text(MID_TENTHS),
                    price_text(ask),
                    price_text(bid)
                )
            }
            Kind::Mark => format!(
                r#"{{"arg":{},"data":[{{"instType":"{}","instId":"{}","markPx":"{}","ts":"{now_ms}"}}]}}"#,
                self.arg,
                inst_type(&self.target),
                self.target,
                price_text(MID_TENTHS - 2 + self.rng.below(5) as i64)
            ),
            Kind::Index => format!(
                r#"{{"arg":{},"data":[{{"instId":"{}","idxPx":"{}","high24h":"0.5","low24h":"0.1","open24h":"0.1","sodUtc0":"0.1","sodUtc8":"0.1","ts":"{now_ms}"}}]}}"#,
                self.arg,
                self.target,
                price_text(MID_TENTHS - 2 + self.rng.below(5) as i64)
            ),
            Kind::Funding => format!(
                r#"{{"arg":{},"data":[{{"formulaType":"noRate","fundingRate":"0.000{}","fundingTime":"1700726400000","impactValue":"","instId":"{}","instType":"SWAP","interestRate":"","method":"current_period","maxFundingRate":"0.00375","minFundingRate":"-0.00375","nextFundingRate":"","nextFundingTime":"1700755200000","premium":"0.0001233824646391","settFundingRate":"0.0001699799259033","settState":"settled","ts":"{now_ms}"}}]}}"#,
                self.arg,
                1_875_391_284_828u64 + self.rng.below(1000),
                self.target
            ),
            Kind::OpenInterest => format!(
                r#"{{"arg":{},"data":[{{"instId":"{}","instType":"{}","oi":"2216113.0100000030{}","oiCcy":"22161.1301000000309","oiUsd":"1939251795.54769270396321","ts":"{now_ms}"}}]}}"#,
                self.arg,
                self.target,
                inst_type(&self.target),
                self.rng.below(10)
            ),
            Kind::Liquidations => {
                let inst_id = if self.instruments.is_empty() {
                    String::new()
                } else {
                    let at = self.rng.below(self.instruments.len() as u64) as usize;
                    self.instruments[at].clone()
                };
                let long = self.rng.below(2) == 0;
                let (pos_side, side) = if long {
                    ("long", "sell")
                } else {
                    ("short", "buy")
                };
                let size = self.size_text();
                format!(
                    r#"{{"arg":{},"data":[{{"details":[{{"bkLoss":"0","bkPx":"{}","ccy":"","posSide":"{pos_side}","side":"{side}","sz":"{size}","ts":"{now_ms}"}}],"instFamily":"","instId":"{inst_id}","instType":"{}","uly":""}}]}}"#,
                    self.arg,
                    price_text(MID_TENTHS - 30 + self.rng.below(60) as i64),
                    self.target
                )
            }
        }
    }

    fn book(&mut self, now_ms: u64, depth: usize, incremental: bool) -> String {
        if !incremental {
            // A snapshot of the first levels every time, the book moving under it.
            if !self.started {
                self.fill();
                self.started = true;
            } else {
                self.change(3);
            }
            self.seq += 1;
            let bids = Self::side(&self.bids, true, depth);
            let asks = Self::side(&self.asks, false, depth);
            return format!(
                r#"{{"arg":{},"data":[{{"asks":{},"bids":{},"instId":"{}","ts":"{now_ms}","seqId":{}}}]}}"#,
                self.arg,
                Self::levels_json(&asks),
                Self::levels_json(&bids),
                self.target,
                self.seq
            );
        }
        let (action, prev, bids, asks) = if self.started {
            let count = 1 + self.rng.below(4) as usize;
            let changes = self.change(count);
            let prev = self.seq;
            if self.reset_next {
                self.reset_next = false;
                self.seq = 1 + self.rng.below(5) as i64;
            } else {
                self.seq += 1 + self.rng.below(3) as i64;
            }
            ("update", prev, changes.0, changes.1)
        } else {
            self.fill();
            self.started = true;
            self.seq += 1;
            let bids = Self::side(&self.bids, true, depth);
            let asks = Self::side(&self.asks, false, depth);
            ("snapshot", -1, bids, asks)
        };
        let mut checksum = checksum(
            &Self::side(&self.bids, true, 25),
            &Self::side(&self.asks, false, 25),
        );
        if self.corrupt_next && action == "update" {
            self.corrupt_next = false;
            checksum ^= 1;
        }
        format!(
            r#"{{"arg":{},"action":"{action}","data":[{{"asks":{},"bids":{},"ts":"{now_ms}","checksum":{checksum},"prevSeqId":{prev},"seqId":{}}}]}}"#,
            self.arg,
            Self::levels_json(&asks),
            Self::levels_json(&bids),
            self.seq
        )
    }

    /// `count` random level changes (an insert, a new size or a delete); the changed levels as
    /// the update lists them (bids, asks).
    fn change(&mut self, count: usize) -> (Levels, Levels) {
        let mut bids = Vec::new();
        let mut asks = Vec::new();
        for _ in 0..count {
            let bid = self.rng.below(2) == 0;
            let step = 1 + self.rng.below(MAX_LEVELS as u64) as i64;
            let price = if bid {
                MID_TENTHS - step
            } else {
                MID_TENTHS + step
            };
            let delete = self.rng.below(3) == 0;
            let size = if delete {
                "0".to_owned()
            } else {
                self.size_text()
            };
            let side = if bid { &mut self.bids } else { &mut self.asks };
            if delete {
                if side.remove(&price).is_none() {
                    continue;
                }
            } else {
                side.insert(price, size.clone());
            }
            let out = if bid { &mut bids } else { &mut asks };
            out.push((price_text(price), size));
        }
        (bids, asks)
    }
}
