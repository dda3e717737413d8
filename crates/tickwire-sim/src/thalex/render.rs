//! The notifications the simulator sends, in the shapes of Thalex's API description
//! (`api.yaml`): the envelope `{"channel_name":C,"notification":N}`, and per channel the payload
//! schema, with keys in the schema's (or its example's) order. A book's first notification (its
//! snapshot) also carries `"snapshot":true` after the notification,
//! `{"channel_name":C,"notification":N,"snapshot":true}`: api.yaml documents no snapshot
//! marker, and Thalex's official client (`thalex_py`, `process_msg.py`) rebuilds a book only
//! from a notification whose envelope has `snapshot` true, treating every other one as changes.
//!
//! - `ticker`: the `Ticker` schema's keys in its property order. Best bid and ask fields are
//!   `null` when that side is empty; `last_price` and the 24 h low, high and change are `null`
//!   before the first trade. Options add `iv` and `forward`, perpetuals `funding_rate` and
//!   `funding_mark`; combinations carry only the keys the schema does not exclude for them (best
//!   bid and ask, mark, mark time, index, collars).
//! - `lwt`: `b` and `a` as `[price, amount, outright amount]`, each left out when its side is
//!   empty; `l` left out before the first trade and for combinations; `m`; `v` for options.
//! - `book`: `trades` (`[price, amount, direction, timestamp, implied_taker]`), `bid_changes`,
//!   `ask_changes` (`[price, amount, outright amount]`, amount 0 for a level gone, best price
//!   first), `total_bid_amount`, `total_ask_amount`, `time`. The first notification is the whole
//!   view as changes, and its trades are the instrument's last ones, older than the
//!   subscription (the documentation's "older trades that happened since the last restart of
//!   the gateway"); later ones carry the changes since the last and the trades made since.
//! - `recent_trades`: an array of `[price, size, side, timestamp, instrument_name,
//!   implied_taker]`; the first is the last [`SNAPSHOT_TRADES`] trades the channel covers, later
//!   ones the new trades only.
//! - `price_index`: `index_name`, `price`, `timestamp`, and now and then
//!   `previous_settlement_price`.
//! - `system`: only `{"event":"reconnect"}` ([`RECONNECT_EVENT`]).
//!
//! Prices and amounts of books and trades print as exact decimals on their grids, whole numbers
//! without a fraction (`40`, not `40.0`); marks, indices, greeks, collars, funding and traded
//! value print as Rust's `Display` prints an `f64`, the shortest text that reads back to the
//! same float, which is what Thalex's prints look like (`53.21791443839902`). Timestamps are
//! float seconds since the epoch.
//!
//! Decisions the documentation leaves open:
//!
//! - `total_bid_amount`/`total_ask_amount` ("the total amount ... across all levels") sum the
//!   instrument's whole book, not only the levels the subscription shows.
//! - A combination's book leaves the `trades` key out ("trades are not sent for combination
//!   order books"); other books always carry it, empty when nothing traded.
//! - A trades channel sends nothing when its instruments made no trade since its last
//!   notification (after stepping them a bounded number of times); its first notification is
//!   sent even when empty (`[]`).
//!
//! **Invariant:** the book a client builds from a `book` subscription's first notification and
//! its changes is exactly the view the server keeps for that subscription (each notification is
//! the difference between the view sent last and the instrument's book now), and that view is
//! never crossed.

use super::channel::{Category, Channel, TradeTarget};
use super::market::{Instrument, Kind, Level, Market, Trade, UNDERLYINGS};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The one system event Thalex documents.
pub const RECONNECT_EVENT: &str =
    r#"{"channel_name":"system","notification":{"event":"reconnect"}}"#;

/// Trades the first notification of a trades stream (and a book's first trades) carries, at
/// most.
pub const SNAPSHOT_TRADES: usize = 10;

/// How many times a trades channel steps its instruments looking for a trade before it gives
/// up on this notification.
const TRADE_STEPS: usize = 64;

/// One public subscription of a connection, with what its client has been sent.
pub(super) struct Subscription {
    /// The channel name exactly as subscribed.
    pub name: String,
    name_json: String,
    pub channel: Channel,
    /// Whether its first notification went out.
    started: bool,
    /// A book subscription's view as last sent, by price in ticks.
    sent_bids: BTreeMap<i64, Level>,
    sent_asks: BTreeMap<i64, Level>,
    /// The log position of the last trade sent (or passed over as not this channel's).
    trades_seen: u64,
    /// Which of a trades channel's instruments it steps next.
    step_cursor: usize,
    /// Notifications rendered.
    sent: u64,
}

impl Subscription {
    pub fn new(name: &str, channel: Channel) -> Subscription {
        Subscription {
            name: name.to_owned(),
            name_json: serde_json::Value::String(name.to_owned()).to_string(),
            channel,
            started: false,
            sent_bids: BTreeMap::new(),
            sent_asks: BTreeMap::new(),
            trades_seen: 0,
            step_cursor: 0,
            sent: 0,
        }
    }

    /// Moves the market on as this channel's next notification needs, and renders it; `None`
    /// when there is nothing to send (a trades channel without new trades, or `system`, whose
    /// only event the server sends itself).
    pub fn render(&mut self, market: &mut Market, now_secs: f64) -> Option<String> {
        let first = !self.started;
        let mut out = String::with_capacity(512);
        let _ = write!(
            out,
            "{{\"channel_name\":{},\"notification\":",
            self.name_json
        );
        match self.channel {
            Channel::Ticker { instrument } => {
                market.step(instrument, now_secs);
                write_ticker(&mut out, market, instrument, now_secs);
            }
            Channel::Lwt { instrument } => {
                market.step(instrument, now_secs);
                write_lwt(&mut out, &market.instruments[instrument]);
            }
            Channel::Book {
                instrument,
                grouping_ticks,
                levels,
            } => {
                if !first {
                    market.step(instrument, now_secs);
                }
                self.write_book(&mut out, market, instrument, grouping_ticks, levels);
            }
            Channel::RecentTrades(target) => {
                if !self.write_trades(&mut out, market, target, first, now_secs) {
                    return None;
                }
            }
            Channel::PriceIndex { underlying } => {
                let price = market.step_index(underlying);
                let mut object = Object::new(&mut out);
                object.raw("index_name", &format!("\"{}\"", UNDERLYINGS[underlying]));
                object.float("price", price);
                object.float("timestamp", now_secs);
                // The key is optional; it comes with every other notification.
                if self.sent % 2 == 0 {
                    let settlement = market.indices[underlying].previous_settlement_price;
                    object.float("previous_settlement_price", settlement);
                }
                object.end();
            }
            Channel::System => return None,
        }
        if first && matches!(self.channel, Channel::Book { .. }) {
            out.push_str(",\"snapshot\":true");
        }
        out.push('}');
        self.started = true;
        self.sent += 1;
        Some(out)
    }

    fn write_book(
        &mut self,
        out: &mut String,
        market: &Market,
        instrument: usize,
        grouping_ticks: i64,
        levels: Option<usize>,
    ) {
        let book = &market.instruments[instrument];
        let mut object = Object::new(out);
        if !book.kind.is_combination() {
            let trades: Vec<&Trade> = if self.started {
                market
                    .trades_after(self.trades_seen)
                    .filter(|trade| trade.instrument == instrument)
                    .collect()
            } else {
                market.last_trades(SNAPSHOT_TRADES, |trade| trade.instrument == instrument)
            };
            let text = object.key("trades");
            text.push('[');
            for (position, trade) in trades.iter().enumerate() {
                if position > 0 {
                    text.push(',');
                }
                text.push('[');
                write_price(text, trade.price_ticks);
                text.push(',');
                write_amount(text, trade.amount_lots);
                let _ = write!(text, ",\"{}\",", direction(trade));
                write_float(text, trade.time_secs);
                let _ = write!(text, ",{}]", trade.implied_taker);
            }
            text.push(']');
        }
        self.trades_seen = market.last_trade_seq();
        let (bids, asks) = book.view(grouping_ticks, levels);
        write_changes(object.key("bid_changes"), &self.sent_bids, &bids, true);
        write_changes(object.key("ask_changes"), &self.sent_asks, &asks, false);
        object.amount("total_bid_amount", book.total_bid_lots());
        object.amount("total_ask_amount", book.total_ask_lots());
        object.float("time", book.updated_secs);
        object.end();
        self.sent_bids = bids;
        self.sent_asks = asks;
    }

    /// Writes a trades notification; false when there is nothing to send.
    fn write_trades(
        &mut self,
        out: &mut String,
        market: &mut Market,
        target: TradeTarget,
        first: bool,
        now_secs: f64,
    ) -> bool {
        let trades: Vec<Trade> = if first {
            let instruments = &market.instruments;
            market
                .last_trades(SNAPSHOT_TRADES, |trade| {
                    covers(target, instruments, trade.instrument)
                })
                .into_iter()
                .cloned()
                .collect()
        } else {
            let members: Vec<usize> = (0..market.instruments.len())
                .filter(|&instrument| covers(target, &market.instruments, instrument))
                .collect();
            let mut attempt = 0;
            loop {
                let fresh: Vec<Trade> = market
                    .trades_after(self.trades_seen)
                    .filter(|trade| members.contains(&trade.instrument))
                    .cloned()
                    .collect();
                if !fresh.is_empty() || members.is_empty() || attempt == TRADE_STEPS {
                    break fresh;
                }
                attempt += 1;
                let member = members[self.step_cursor % members.len()];
                self.step_cursor = self.step_cursor.wrapping_add(1);
                market.step(member, now_secs);
            }
        };
        self.trades_seen = market.last_trade_seq();
        if trades.is_empty() && !first {
            return false;
        }
        out.push('[');
        for (position, trade) in trades.iter().enumerate() {
            if position > 0 {
                out.push(',');
            }
            out.push('[');
            write_price(out, trade.price_ticks);
            out.push(',');
            write_amount(out, trade.amount_lots);
            let _ = write!(out, ",\"{}\",", direction(trade));
            write_float(out, trade.time_secs);
            let _ = write!(
                out,
                ",{},{}]",
                market.instruments[trade.instrument].name_json, trade.implied_taker
            );
        }
        out.push(']');
        true
    }
}

/// Whether a trades channel on `target` carries the trades of `instrument`.
fn covers(target: TradeTarget, instruments: &[Instrument], instrument: usize) -> bool {
    match target {
        TradeTarget::Instrument(only) => instrument == only,
        TradeTarget::Underlying {
            underlying,
            category,
        } => {
            let traded = &instruments[instrument];
            traded.underlying == underlying
                && match category {
                    Category::All => true,
                    Category::Options => matches!(traded.kind, Kind::Option { .. }),
                    Category::FutureRolls => traded.kind == Kind::Combination { roll: true },
                }
        }
    }
}

fn direction(trade: &Trade) -> &'static str {
    if trade.buy {
        "buy"
    } else {
        "sell"
    }
}

/// The `Ticker` schema's keys in its property order, those the instrument's kind carries.
fn write_ticker(out: &mut String, market: &Market, instrument: usize, now_secs: f64) {
    let book = &market.instruments[instrument];
    let index = market.indices[book.underlying].price;
    let combination = book.kind.is_combination();
    let option = matches!(book.kind, Kind::Option { .. });
    let mut object = Object::new(out);
    let best_bid = book.best_bid();
    let best_ask = book.best_ask();
    object.price("best_bid_price", best_bid.map(|(price, _)| price));
    object.optional_amount(
        "best_bid_amount",
        best_bid.map(|(_, level)| level.amount_lots),
    );
    object.price("best_ask_price", best_ask.map(|(price, _)| price));
    object.optional_amount(
        "best_ask_amount",
        best_ask.map(|(_, level)| level.amount_lots),
    );
    if !combination {
        object.price("last_price", book.stats.last_ticks);
    }
    object.float("mark_price", book.mark_price());
    object.float("mark_timestamp", now_secs);
    if option {
        object.float("iv", book.iv);
    }
    if !combination {
        object.float("delta", book.delta(index));
    }
    object.float("index", index);
    if option {
        object.float("forward", book.forward(index));
    }
    if !combination {
        object.amount("volume_24h", book.stats.volume_lots);
        object.float("value_24h", book.stats.value_usd);
        object.price("low_price_24h", book.stats.low_ticks);
        object.price("high_price_24h", book.stats.high_ticks);
        object.price("change_24h", book.stats.change_ticks());
    }
    let (collar_low, collar_high) = book.collars();
    object.float("collar_low", collar_low);
    object.float("collar_high", collar_high);
    if !combination {
        object.amount("open_interest", book.open_interest_lots);
    }
    if book.kind == Kind::Perpetual {
        object.float("funding_rate", book.funding_rate);
        object.float("funding_mark", book.funding_mark());
    }
    object.end();
}

/// `{"b":[..],"a":[..],"l":last,"m":mark,"v":vol}` with the keys that apply.
fn write_lwt(out: &mut String, book: &Instrument) {
    let mut object = Object::new(out);
    for (key, level) in [("b", book.best_bid()), ("a", book.best_ask())] {
        if let Some((price, level)) = level {
            write_level(object.key(key), price, level);
        }
    }
    if !book.kind.is_combination() {
        if let Some(last) = book.stats.last_ticks {
            object.price("l", Some(last));
        }
    }
    object.float("m", book.mark_price());
    if matches!(book.kind, Kind::Option { .. }) {
        object.float("v", book.iv);
    }
    object.end();
}

fn write_level(out: &mut String, price_ticks: i64, level: Level) {
    out.push('[');
    write_price(out, price_ticks);
    out.push(',');
    write_amount(out, level.amount_lots);
    out.push(',');
    write_amount(out, level.outright_lots);
    out.push(']');
}

/// Writes the changes from `sent` to `now` as `[[price, amount, outright amount], ..]`, amount
/// 0 for a level gone, best price first.
fn write_changes(
    out: &mut String,
    sent: &BTreeMap<i64, Level>,
    now: &BTreeMap<i64, Level>,
    bids: bool,
) {
    let mut changes: Vec<(i64, Level)> = sent
        .keys()
        .filter(|price| !now.contains_key(price))
        .map(|&price| (price, Level::default()))
        .chain(
            now.iter()
                .filter(|(price, level)| sent.get(price) != Some(level))
                .map(|(&price, &level)| (price, level)),
        )
        .collect();
    changes.sort_unstable_by_key(|&(price, _)| if bids { -price } else { price });
    out.push('[');
    for (position, (price, level)) in changes.into_iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        write_level(out, price, level);
    }
    out.push(']');
}

/// A JSON object written key by key.
struct Object<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> Object<'a> {
    fn new(out: &'a mut String) -> Object<'a> {
        out.push('{');
        Object { out, empty: true }
    }

    /// Writes `"key":` (after a comma when needed) and returns the text for the value.
    fn key(&mut self, key: &str) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        let _ = write!(self.out, "\"{key}\":");
        self.out
    }

    fn raw(&mut self, key: &str, value: &str) {
        self.key(key).push_str(value);
    }

    fn float(&mut self, key: &str, value: f64) {
        write_float(self.key(key), value);
    }

    /// A price on the tick grid, or `null`.
    fn price(&mut self, key: &str, ticks: Option<i64>) {
        match ticks {
            Some(ticks) => write_price(self.key(key), ticks),
            None => self.raw(key, "null"),
        }
    }

    fn amount(&mut self, key: &str, lots: u64) {
        write_amount(self.key(key), lots);
    }

    /// An amount on the lot grid, or `null`.
    fn optional_amount(&mut self, key: &str, lots: Option<u64>) {
        match lots {
            Some(lots) => self.amount(key, lots),
            None => self.raw(key, "null"),
        }
    }

    fn end(self) {
        self.out.push('}');
    }
}

/// A float as Rust's `Display` writes it: the shortest text that reads back to the same `f64`,
/// never an exponent, `40` for a whole number. The market makes no non-finite number; one would
/// be a bug, and JSON has no text for it, so it is written as `null`.
fn write_float(out: &mut String, value: f64) {
    debug_assert!(value.is_finite(), "{value}");
    if value.is_finite() {
        let _ = write!(out, "{value}");
    } else {
        out.push_str("null");
    }
}

/// A price in ticks of 0.5 as the venue writes it: `50000` when whole, `50000.5`, `-0.5`.
fn write_price(out: &mut String, ticks: i64) {
    let sign = if ticks < 0 { "-" } else { "" };
    let halves = ticks.unsigned_abs();
    if halves % 2 == 0 {
        let _ = write!(out, "{sign}{}", halves / 2);
    } else {
        let _ = write!(out, "{sign}{}.5", halves / 2);
    }
}

/// An amount in lots of 0.001: `2` when whole, `0.25` otherwise (no trailing zeros).
fn write_amount(out: &mut String, lots: u64) {
    if lots % 1000 == 0 {
        let _ = write!(out, "{}", lots / 1000);
        return;
    }
    let text = format!("{}.{:03}", lots / 1000, lots % 1000);
    out.push_str(text.trim_end_matches('0'));
}

#[cfg(test)]
mod tests {
    use super::super::channel;
    use super::*;
    use serde_json::Value;

    fn names() -> Vec<String> {
        super::super::default_instruments()
    }

    fn price_text(ticks: i64) -> String {
        let mut out = String::new();
        write_price(&mut out, ticks);
        out
    }

    fn amount_text(lots: u64) -> String {
        let mut out = String::new();
        write_amount(&mut out, lots);
        out
    }

    fn float_text(value: f64) -> String {
        let mut out = String::new();
        write_float(&mut out, value);
        out
    }

    /// The keys of the notification object in `text`, in the order written (serde_json's map
    /// is sorted, so the order is read from the text: no key name occurs as a value here).
    fn keys_in_order(text: &str, keys: &Value) -> Vec<String> {
        let mut keys: Vec<(usize, String)> = keys
            .as_object()
            .unwrap()
            .keys()
            .map(|key| (text.find(&format!("\"{key}\":")).unwrap(), key.clone()))
            .collect();
        keys.sort();
        keys.into_iter().map(|(_, key)| key).collect()
    }

    fn subscribe(name: &str) -> Subscription {
        Subscription::new(name, channel::parse(name, &names()).unwrap())
    }

    #[test]
    fn numbers_print_as_the_venue_prints_them() {
        assert_eq!(price_text(100_000), "50000");
        assert_eq!(price_text(100_001), "50000.5");
        assert_eq!(price_text(-1), "-0.5");
        assert_eq!(price_text(-4), "-2");
        assert_eq!(amount_text(2000), "2");
        assert_eq!(amount_text(250), "0.25");
        assert_eq!(amount_text(1001), "1.001");
        assert_eq!(float_text(40.0), "40");
        assert_eq!(float_text(53.21791443839902), "53.21791443839902");
        assert_eq!(float_text(76283.25916666667), "76283.25916666667");
        assert_eq!(float_text(0.00001), "0.00001");
        assert_eq!(float_text(1776715497.7188172), "1776715497.7188172");
    }

    #[test]
    fn tickers_carry_the_schema_keys_of_each_kind_in_order() {
        let mut market = Market::new(&names(), 1, 1_776_715_497.5);
        let common_head = [
            "best_bid_price",
            "best_bid_amount",
            "best_ask_price",
            "best_ask_amount",
        ];
        let outright = [
            "last_price",
            "mark_price",
            "mark_timestamp",
            "delta",
            "index",
            "volume_24h",
            "value_24h",
            "low_price_24h",
            "high_price_24h",
            "change_24h",
            "collar_low",
            "collar_high",
            "open_interest",
        ];
        let cases: [(&str, Vec<&str>); 4] = [
            (
                "ticker.BTC-PERPETUAL.raw",
                [
                    &common_head[..],
                    &outright[..],
                    &["funding_rate", "funding_mark"],
                ]
                .concat(),
            ),
            (
                "ticker.BTC-27JUN25.100ms",
                [&common_head[..], &outright[..]].concat(),
            ),
            (
                "ticker.BTC-27JUN25-100000-C.1000ms",
                [
                    &common_head[..],
                    &[
                        "last_price",
                        "mark_price",
                        "mark_timestamp",
                        "iv",
                        "delta",
                        "index",
                        "forward",
                    ],
                    &outright[5..],
                ]
                .concat(),
            ),
            (
                "ticker.[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1].raw",
                [
                    &common_head[..],
                    &[
                        "mark_price",
                        "mark_timestamp",
                        "index",
                        "collar_low",
                        "collar_high",
                    ],
                ]
                .concat(),
            ),
        ];
        for (name, expected) in cases {
            let mut subscription = subscribe(name);
            for step in 0..50 {
                let text = subscription
                    .render(&mut market, 1_776_715_498.0 + step as f64)
                    .unwrap();
                let message: Value = serde_json::from_str(&text).unwrap();
                assert!(text.starts_with(&format!("{{\"channel_name\":\"{name}\"")));
                assert_eq!(message.as_object().unwrap().len(), 2, "{text}");
                let notification = &message["notification"];
                assert_eq!(keys_in_order(&text, notification), expected, "{text}");
            }
        }
    }

    #[test]
    fn lwt_leaves_out_what_does_not_exist() {
        let (mut without_last, mut with_last, mut one_sided) = (0, 0, 0);
        // Options start without trades; over a few seeds some go a while before the first.
        for seed in 0..10 {
            let mut market = Market::new(&names(), seed, 1000.0);
            let mut option = subscribe("lwt.BTC-27JUN25-100000-C.raw");
            let mut traded = false;
            for step in 0..300 {
                let text = option.render(&mut market, 1000.0 + step as f64).unwrap();
                let message: Value = serde_json::from_str(&text).unwrap();
                let lwt = message["notification"].as_object().unwrap();
                assert!(lwt.contains_key("m") && lwt.contains_key("v"), "{text}");
                for side in ["b", "a"] {
                    if let Some(level) = lwt.get(side) {
                        assert_eq!(level.as_array().unwrap().len(), 3, "{text}");
                    } else {
                        one_sided += 1;
                    }
                }
                if lwt.contains_key("l") {
                    traded = true;
                    with_last += 1;
                } else {
                    assert!(!traded, "l comes with the first trade and stays: {text}");
                    without_last += 1;
                }
            }
        }
        assert!(
            without_last > 0 && with_last > 0 && one_sided > 0,
            "{without_last} {with_last} {one_sided}"
        );
        let mut market = Market::new(&names(), 2, 1000.0);
        let mut combo = subscribe("lwt.[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1].raw");
        let text = combo.render(&mut market, 5000.0).unwrap();
        let message: Value = serde_json::from_str(&text).unwrap();
        let lwt = message["notification"].as_object().unwrap();
        assert!(!lwt.contains_key("l") && !lwt.contains_key("v"), "{text}");
    }

    #[test]
    fn changes_applied_to_the_last_view_give_the_new_one() {
        let mut market = Market::new(&names(), 3, 1.0);
        for name in [
            "book.BTC-PERPETUAL.1.10.100ms",
            "book.BTC-PERPETUAL.none.all.raw",
            "book.BTC-27JUN25-100000-C.2.5.3.raw",
        ] {
            let mut subscription = subscribe(name);
            let Channel::Book {
                instrument,
                grouping_ticks,
                levels,
            } = subscription.channel
            else {
                unreachable!()
            };
            let (mut bids, mut asks) = (BTreeMap::new(), BTreeMap::new());
            for step in 0..300 {
                let text = subscription.render(&mut market, 2.0 + step as f64).unwrap();
                let message: Value = serde_json::from_str(&text).unwrap();
                // The first is the snapshot, and says so as the venue's client reads it; the
                // others carry no key at all.
                if step == 0 {
                    assert!(text.ends_with(r#","snapshot":true}"#), "{text}");
                    assert_eq!(message["snapshot"], Value::Bool(true));
                } else {
                    assert_eq!(message.as_object().unwrap().len(), 2, "{text}");
                }
                for (side, key) in [(&mut bids, "bid_changes"), (&mut asks, "ask_changes")] {
                    for change in message["notification"][key].as_array().unwrap() {
                        let ticks = (change[0].as_f64().unwrap() * 2.0).round() as i64;
                        let lots =
                            |value: &Value| (value.as_f64().unwrap() * 1000.0).round() as u64;
                        if lots(&change[1]) == 0 {
                            side.remove(&ticks);
                        } else {
                            side.insert(
                                ticks,
                                Level {
                                    amount_lots: lots(&change[1]),
                                    outright_lots: lots(&change[2]),
                                },
                            );
                        }
                    }
                }
                let view = market.instruments[instrument].view(grouping_ticks, levels);
                assert_eq!((&bids, &asks), (&view.0, &view.1), "{name} step {step}");
            }
        }
    }

    #[test]
    fn trades_streams_send_a_snapshot_then_only_new_trades() {
        let mut market = Market::new(&names(), 4, 1000.0);
        let mut all = subscribe("recent_trades.BTCUSD.all");
        let mut rolls = subscribe("recent_trades.BTCUSD.future_rolls");
        let mut eth_options = subscribe("recent_trades.ETHUSD.options");
        let snapshot: Value =
            serde_json::from_str(&all.render(&mut market, 1000.0).unwrap()).unwrap();
        let snapshot = snapshot["notification"].as_array().unwrap();
        assert!(!snapshot.is_empty() && snapshot.len() <= SNAPSHOT_TRADES);
        assert!(snapshot
            .iter()
            .all(|trade| trade[3].as_f64().unwrap() < 1000.0));
        let rolls_snapshot = rolls.render(&mut market, 1000.0).unwrap();
        assert!(rolls_snapshot.contains("\"[BTC-PERPETUAL:-1,BTC-27JUN25:1]\""));
        // No ETH options are served: an empty snapshot, then nothing.
        assert_eq!(
            eth_options.render(&mut market, 1000.0).as_deref(),
            Some(r#"{"channel_name":"recent_trades.ETHUSD.options","notification":[]}"#)
        );
        assert_eq!(eth_options.render(&mut market, 1001.0), None);
        let mut seen = BTreeMap::new();
        for step in 0..100 {
            let now = 1001.0 + step as f64;
            let Some(text) = all.render(&mut market, now) else {
                continue;
            };
            let message: Value = serde_json::from_str(&text).unwrap();
            for trade in message["notification"].as_array().unwrap() {
                let trade = trade.as_array().unwrap();
                assert_eq!(trade.len(), 6);
                assert_eq!(trade[3].as_f64(), Some(now), "only new trades");
                assert!(!trade[4].as_str().unwrap().starts_with("ETH"));
                *seen
                    .entry(trade[4].as_str().unwrap().to_owned())
                    .or_insert(0) += 1;
            }
        }
        assert!(seen.len() >= 2, "{seen:?}");
    }
}
