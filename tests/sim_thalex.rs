//! The Thalex simulator (`tickwire_sim::thalex`) against a real client over loopback: TLS from
//! rustls trusting the run's CA, tickwire's own sans-IO WebSocket client, JSON-RPC requests as a
//! Thalex client sends them, and login tokens made with `venue::thalex::auth::login_token`.
//!
//! The messages are checked against Thalex's API description
//! (`../shared/reference/thalex/api.yaml`): the envelope, each channel's payload keys in the
//! documented order, tuple arities and types, the channel grammar and the JSON-RPC error codes.
//!
//! Every test starts its own server on port 0 with a temporary certificate folder.
//!
//! Run: `cargo test --test tickwire sim_thalex::`.

use crate::support::ws_client::{self, WsEvent, WsTestClient};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire::venue::thalex::auth;
use tickwire_sim::thalex::{self, ThalexFaults, ThalexHandle, ThalexOptions};

const DEADLINE: Duration = Duration::from_secs(10);
const COMBO: &str = "[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]";

struct Running {
    sim: ThalexHandle,
    _cert_dir: tempfile::TempDir,
}

fn start(configure: impl FnOnce(&mut ThalexOptions)) -> Running {
    let cert_dir = tempfile::tempdir().unwrap();
    let mut options = ThalexOptions::new(cert_dir.path());
    options.rate = 200.0;
    configure(&mut options);
    Running {
        sim: thalex::start(options).unwrap(),
        _cert_dir: cert_dir,
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn now_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn good_token() -> String {
    auth::login_token(
        thalex::TEST_KEY_ID,
        thalex::TEST_PRIVATE_KEY_PEM,
        now_secs(),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// A blocking client: tickwire's sans-IO WebSocket client over a rustls stream

#[derive(Debug, PartialEq)]
enum Ev {
    Text(Value),
    Ping,
    Pong(Vec<u8>),
    Close(Option<u16>),
    Eof,
    Timeout,
}

/// A Thalex client: the shared blocking WebSocket client, JSON-RPC ids, and JSON messages.
struct Client {
    ws: WsTestClient,
    next_id: u64,
    /// The text of the last message read, for what `Value` loses: key order and number text.
    last_text: String,
}

/// Sends an upgrade request for `path`: `Ok` when the server accepts, `Err` with its answer.
fn upgrade(sim: &ThalexHandle, path: &str) -> Result<(), String> {
    let mut tls = ws_client::tls_stream(sim.addr(), "127.0.0.1", sim.ca_pem_path());
    ws_client::upgrade(&mut tls, "127.0.0.1", path, DEADLINE).map(|_| ())
}

impl Client {
    fn connect(sim: &ThalexHandle) -> Client {
        Client {
            ws: WsTestClient::connect(
                sim.addr(),
                "127.0.0.1",
                sim.ca_pem_path(),
                thalex::PATH,
                DEADLINE,
            ),
            next_id: 1,
            last_text: String::new(),
        }
    }

    fn send_text(&mut self, text: &str) {
        self.ws.send_text(text);
    }

    /// Sends a request and returns its id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_text(&json!({"method": method, "params": params, "id": id}).to_string());
        id
    }

    /// The next message or control frame (pings are answered by the client).
    fn next(&mut self, timeout: Duration) -> Ev {
        match self.ws.next(timeout) {
            WsEvent::Text(text) => {
                let value = serde_json::from_str(&text)
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {text}"));
                self.last_text = text;
                Ev::Text(value)
            }
            WsEvent::Ping(_) => Ev::Ping,
            WsEvent::Pong(payload) => Ev::Pong(payload),
            WsEvent::Close(code, _) => Ev::Close(code),
            WsEvent::Eof => Ev::Eof,
            WsEvent::Timeout => Ev::Timeout,
        }
    }

    /// The next JSON message, skipping pings.
    fn next_json(&mut self) -> Value {
        loop {
            match self.next(DEADLINE) {
                Ev::Ping => {}
                Ev::Text(value) => return value,
                other => panic!("expected a message, got {other:?}"),
            }
        }
    }

    /// The reply to request `id`, skipping notifications.
    fn reply(&mut self, id: u64) -> Value {
        loop {
            let message = self.next_json();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            assert!(
                message.get("channel_name").is_some(),
                "neither a notification nor reply {id}: {message}"
            );
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.reply(id)
    }

    /// The next notification of `channel`, skipping others.
    fn notification(&mut self, channel: &str) -> Value {
        loop {
            let message = self.next_json();
            if message.get("channel_name") == Some(&json!(channel)) {
                return message;
            }
        }
    }
}

fn error_code(reply: &Value) -> Option<i64> {
    reply.pointer("/error/code").and_then(Value::as_i64)
}

fn subscribe(client: &mut Client, channels: &[&str]) -> Value {
    client.call("public/subscribe", json!({ "channels": channels }))["result"].clone()
}

// ---------------------------------------------------------------------------------------------
// The documented shapes

/// The keys of `object` in the order `text` writes them. serde_json's maps are sorted, so the
/// order is read from the text; no key of these payloads occurs elsewhere as `"key":`.
fn keys_in_order(text: &str, object: &Value) -> Vec<String> {
    let mut keys: Vec<(usize, String)> = object
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {text}"))
        .keys()
        .map(|key| {
            let at = text.find(&format!("\"{key}\":")).unwrap();
            (at, key.clone())
        })
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, key)| key).collect()
}

/// The number literal after `"key":` in `text`, as written.
fn number_text<'a>(text: &'a str, key: &str) -> &'a str {
    let start = text.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    let rest = &text[start..];
    &rest[..rest.find([',', '}', ']']).unwrap()]
}

fn decimals(number: &str) -> usize {
    number
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len())
}

fn is_tick(value: &Value) -> bool {
    value
        .as_f64()
        .is_some_and(|price| (price * 2.0).round() / 2.0 == price)
}

fn is_lot(value: &Value) -> bool {
    value
        .as_f64()
        .is_some_and(|amount| amount >= 0.0 && (amount * 1000.0).round() / 1000.0 == amount)
}

fn is_side(value: &Value) -> bool {
    value == "buy" || value == "sell"
}

/// Checks the envelope: `channel_name` then `notification`, and nothing else but a book
/// snapshot's `"snapshot":true` after them.
fn notification<'a>(text: &str, message: &'a Value, channel: &str) -> &'a Value {
    let keys = keys_in_order(text, message);
    if message.get("snapshot").is_some() {
        assert!(channel.starts_with("book."), "{text}");
        assert_eq!(message["snapshot"], json!(true), "{text}");
        assert_eq!(keys, ["channel_name", "notification", "snapshot"], "{text}");
    } else {
        assert_eq!(keys, ["channel_name", "notification"], "{text}");
    }
    assert!(
        text.starts_with(&format!("{{\"channel_name\":{}", json!(channel))),
        "{text}"
    );
    &message["notification"]
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Perpetual,
    Future,
    Option,
    Combination,
}

/// The `Ticker` schema's properties in order, those an instrument of `kind` carries.
fn ticker_keys(kind: Kind) -> Vec<&'static str> {
    let mut keys = vec![
        "best_bid_price",
        "best_bid_amount",
        "best_ask_price",
        "best_ask_amount",
    ];
    let outright = kind != Kind::Combination;
    let option = kind == Kind::Option;
    for (key, present) in [
        ("last_price", outright),
        ("mark_price", true),
        ("mark_timestamp", true),
        ("iv", option),
        ("delta", outright),
        ("index", true),
        ("forward", option),
        ("volume_24h", outright),
        ("value_24h", outright),
        ("low_price_24h", outright),
        ("high_price_24h", outright),
        ("change_24h", outright),
        ("collar_low", true),
        ("collar_high", true),
        ("open_interest", outright),
        ("funding_rate", kind == Kind::Perpetual),
        ("funding_mark", kind == Kind::Perpetual),
    ] {
        if present {
            keys.push(key);
        }
    }
    keys
}

fn check_ticker(text: &str, ticker: &Value, kind: Kind) {
    assert_eq!(keys_in_order(text, ticker), ticker_keys(kind), "{text}");
    for (key, value) in ticker.as_object().unwrap() {
        let nullable = matches!(
            key.as_str(),
            "best_bid_price"
                | "best_bid_amount"
                | "best_ask_price"
                | "best_ask_amount"
                | "last_price"
                | "low_price_24h"
                | "high_price_24h"
                | "change_24h"
        );
        assert!(
            value.is_number() || (nullable && value.is_null()),
            "{key}: {text}"
        );
    }
    for side in ["bid", "ask"] {
        let price = &ticker[format!("best_{side}_price")];
        let amount = &ticker[format!("best_{side}_amount")];
        assert_eq!(price.is_null(), amount.is_null(), "{text}");
        assert!(
            price.is_null() || (is_tick(price) && is_lot(amount)),
            "{text}"
        );
    }
    let mark_time = ticker["mark_timestamp"].as_f64().unwrap();
    assert!(
        mark_time > 1.6e9 && mark_time.fract() != 0.0,
        "float seconds: {text}"
    );
}

fn check_level(text: &str, level: &Value) {
    let level = level.as_array().unwrap_or_else(|| panic!("{text}"));
    assert_eq!(level.len(), 3, "[price, amount, outright amount]: {text}");
    assert!(
        is_tick(&level[0]) && is_lot(&level[1]) && is_lot(&level[2]),
        "{text}"
    );
    assert!(
        level[2].as_f64() <= level[1].as_f64(),
        "outright <= amount: {text}"
    );
}

fn check_lwt(text: &str, lwt: &Value, kind: Kind) {
    let keys = keys_in_order(text, lwt);
    let documented = ["b", "a", "l", "m", "v"];
    let mut position = 0;
    for key in &keys {
        let found = documented[position..]
            .iter()
            .position(|known| known == key)
            .unwrap_or_else(|| panic!("{key} unknown or out of order: {text}"));
        position += found + 1;
    }
    assert!(lwt["m"].is_number(), "{text}");
    assert_eq!(lwt.get("v").is_some(), kind == Kind::Option, "{text}");
    if kind == Kind::Combination {
        assert!(lwt.get("l").is_none(), "{text}");
    }
    if let Some(last) = lwt.get("l") {
        assert!(is_tick(last), "{text}");
    }
    for side in ["b", "a"] {
        if let Some(level) = lwt.get(side) {
            check_level(text, level);
        }
    }
}

fn check_book(text: &str, book: &Value, combination: bool) {
    let mut keys = vec![
        "trades",
        "bid_changes",
        "ask_changes",
        "total_bid_amount",
        "total_ask_amount",
        "time",
    ];
    if combination {
        keys.remove(0);
    }
    assert_eq!(keys_in_order(text, book), keys, "{text}");
    for trade in book
        .get("trades")
        .map_or(&[][..], |trades| trades.as_array().unwrap())
    {
        let trade = trade.as_array().unwrap();
        assert_eq!(
            trade.len(),
            5,
            "[price, amount, direction, timestamp, implied]: {text}"
        );
        assert!(
            is_tick(&trade[0]) && is_lot(&trade[1]) && is_side(&trade[2]),
            "{text}"
        );
        assert!(trade[3].is_f64() && trade[4].is_boolean(), "{text}");
    }
    for side in ["bid_changes", "ask_changes"] {
        for level in book[side].as_array().unwrap() {
            check_level(text, level);
        }
    }
    assert!(is_lot(&book["total_bid_amount"]) && is_lot(&book["total_ask_amount"]));
    assert!(book["time"].is_f64(), "{text}");
}

fn check_recent_trades(text: &str, trades: &Value) -> Vec<String> {
    let mut instruments = Vec::new();
    for trade in trades.as_array().unwrap_or_else(|| panic!("{text}")) {
        let trade = trade.as_array().unwrap();
        assert_eq!(
            trade.len(),
            6,
            "[price, size, side, time, instrument, implied]: {text}"
        );
        assert!(
            is_tick(&trade[0]) && is_lot(&trade[1]) && is_side(&trade[2]),
            "{text}"
        );
        assert!(trade[3].is_f64() && trade[5].is_boolean(), "{text}");
        instruments.push(trade[4].as_str().unwrap().to_owned());
    }
    instruments
}

fn check_price_index(text: &str, index: &Value, underlying: &str) {
    let keys = keys_in_order(text, index);
    assert_eq!(keys[..3], ["index_name", "price", "timestamp"], "{text}");
    assert!(
        keys.len() == 3 || keys[3..] == ["previous_settlement_price"],
        "{text}"
    );
    assert_eq!(index["index_name"], json!(underlying));
    assert!(
        index["price"].is_f64() && index["timestamp"].is_f64(),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn every_channel_kind_has_the_documented_shape() {
    let running = start(|options| options.rate = 1000.0);
    let mut client = Client::connect(&running.sim);
    let tickers = [
        ("ticker.BTC-PERPETUAL.100ms", Kind::Perpetual),
        ("ticker.BTC-27JUN25.raw", Kind::Future),
        ("ticker.BTC-27JUN25-100000-C.1000ms", Kind::Option),
        (
            "ticker.[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1].raw",
            Kind::Combination,
        ),
    ];
    let lwts = [
        ("lwt.ETH-PERPETUAL.200ms", Kind::Perpetual),
        ("lwt.BTC-27JUN25-100000-C.raw", Kind::Option),
        (
            "lwt.[BTC-PERPETUAL:-1,BTC-27JUN25:1].60000ms",
            Kind::Combination,
        ),
    ];
    let books = [
        ("book.BTC-PERPETUAL.none.all.raw", false),
        ("book.BTC-27JUN25-100000-C.0.5.5.500ms", false),
        (
            "book.[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1].1.3.5000ms",
            true,
        ),
    ];
    let trades = [
        "recent_trades.BTC-PERPETUAL.single",
        "recent_trades.BTCUSD.all",
        "recent_trades.BTCUSD.options",
        "recent_trades.BTCUSD.future_rolls",
    ];
    let indices = [
        ("price_index.BTCUSD", "BTCUSD"),
        ("price_index.ETHUSD", "ETHUSD"),
    ];
    let mut channels: Vec<&str> = tickers.iter().map(|(name, _)| *name).collect();
    channels.extend(lwts.iter().map(|(name, _)| *name));
    channels.extend(books.iter().map(|(name, _)| *name));
    channels.extend(trades);
    channels.extend(indices.iter().map(|(name, _)| *name));
    channels.push("system");
    assert_eq!(subscribe(&mut client, &channels), json!(channels));

    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut trade_instruments: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + DEADLINE;
    while seen.len() < channels.len() - 1 || seen.values().any(|&count| count < 3) {
        assert!(Instant::now() < deadline, "messages so far: {seen:?}");
        let message = client.next_json();
        let text = client.last_text.clone();
        let name = message["channel_name"].as_str().unwrap().to_owned();
        let body = notification(&text, &message, &name);
        *seen.entry(name.clone()).or_default() += 1;
        if let Some((_, kind)) = tickers.iter().find(|(known, _)| *known == name) {
            check_ticker(&text, body, *kind);
        } else if let Some((_, kind)) = lwts.iter().find(|(known, _)| *known == name) {
            check_lwt(&text, body, *kind);
        } else if let Some((_, combination)) = books.iter().find(|(known, _)| *known == name) {
            check_book(&text, body, *combination);
        } else if let Some(channel) = trades.iter().find(|known| **known == name) {
            trade_instruments
                .entry(channel)
                .or_default()
                .extend(check_recent_trades(&text, body));
        } else if let Some((_, underlying)) = indices.iter().find(|(known, _)| *known == name) {
            check_price_index(&text, body, underlying);
        } else {
            panic!("a notification on a channel not subscribed (or system): {text}");
        }
    }
    // Each trades channel carries the instruments its category names, and only those.
    let only = |channel: &str, allowed: &[&str]| {
        let instruments = &trade_instruments[channel];
        assert!(!instruments.is_empty(), "{channel}");
        for instrument in instruments {
            assert!(
                allowed.contains(&instrument.as_str()),
                "{channel}: {instrument}"
            );
        }
    };
    only("recent_trades.BTC-PERPETUAL.single", &["BTC-PERPETUAL"]);
    only("recent_trades.BTCUSD.options", &["BTC-27JUN25-100000-C"]);
    only(
        "recent_trades.BTCUSD.future_rolls",
        &["[BTC-PERPETUAL:-1,BTC-27JUN25:1]"],
    );
    let all = &trade_instruments["recent_trades.BTCUSD.all"];
    assert!(all.iter().all(|name| !name.starts_with("ETH")), "{all:?}");
    assert!(
        all.iter().collect::<std::collections::BTreeSet<_>>().len() >= 2,
        "{all:?}"
    );
}

#[test]
fn marks_and_indices_are_binary_floats_with_more_than_nine_decimals() {
    let running = start(|options| options.rate = 500.0);
    let mut client = Client::connect(&running.sim);
    let channels = [
        "ticker.BTC-PERPETUAL.raw",
        "ticker.BTC-27JUN25-100000-C.raw",
        "price_index.BTCUSD",
    ];
    subscribe(&mut client, &channels);
    let mut longest: BTreeMap<&str, usize> = BTreeMap::new();
    let mut whole_prices = 0;
    for _ in 0..90 {
        let message = client.next_json();
        let text = client.last_text.clone();
        let keys: &[&str] = if message["channel_name"] == "price_index.BTCUSD" {
            &["price"]
        } else {
            let bid = number_text(&text, "best_bid_price");
            whole_prices += usize::from(!bid.contains('.') && bid != "null");
            &[
                "mark_price",
                "index",
                "delta",
                "collar_low",
                "mark_timestamp",
            ]
        };
        for key in keys {
            let longest = longest.entry(key).or_default();
            *longest = (*longest).max(decimals(number_text(&text, key)));
        }
    }
    for key in ["mark_price", "index", "delta", "price"] {
        assert!(longest[key] > 9, "{key}: {longest:?}");
    }
    // Collars are rounded to 1e-8, timestamps are float seconds (about 1e-7 apart at 2^31).
    assert!((1..=8).contains(&longest["collar_low"]), "{longest:?}");
    assert!(longest["mark_timestamp"] >= 4, "{longest:?}");
    assert!(whole_prices > 0, "whole prices print without a fraction");
}

#[test]
fn subscribe_answers_with_the_valid_channels_only() {
    let running = start(|options| options.rate = 20.0);
    let mut client = Client::connect(&running.sim);
    let book = format!("book.{COMBO}.1.5.raw");
    let reply = client.call(
        "public/subscribe",
        json!({ "channels": [
            "ticker.BTC-PERPETUAL.100ms",
            "ticker.NOT-AN-INSTRUMENT.100ms",
            "ticker.BTC-PERPETUAL.3600000ms",
            "lwt.ETH-PERPETUAL.7ms",
            book,
            "book.BTC-PERPETUAL.0.25.10.raw",
            "book.BTC-PERPETUAL.1.0.raw",
            "price_index.BTCUSD",
            "recent_trades.BTCUSD.all",
            "candles.BTC-PERPETUAL",
            "system",
        ]}),
    );
    assert_eq!(
        reply,
        json!({
            "id": 1,
            "result": [
                "ticker.BTC-PERPETUAL.100ms",
                book,
                "price_index.BTCUSD",
                "recent_trades.BTCUSD.all",
                "system"
            ]
        }),
        "no jsonrpc key, only id and result"
    );
    let stats = running.sim.stats();
    assert_eq!((stats.channels_accepted, stats.channels_rejected), (5, 6));

    // Nothing valid is still a success, with an empty list.
    let reply = client.call("public/subscribe", json!({ "channels": ["nope"] }));
    assert_eq!(reply["result"], json!([]), "{reply}");
    // The envelope is channel_name and notification, and a book's first notification (its
    // snapshot) adds `"snapshot":true`, as Thalex's official client reads it.
    let mut book_seen = false;
    for _ in 0..10 {
        let message = client.next_json();
        let object = message.as_object().unwrap();
        let is_book = message["channel_name"] == json!(book);
        if is_book && !book_seen {
            book_seen = true;
            assert_eq!(object.len(), 3, "{message}");
            assert_eq!(message["snapshot"], json!(true), "{message}");
        } else {
            assert_eq!(object.len(), 2, "{message}");
        }
    }
}

#[test]
fn recent_trades_targets_and_categories_are_validated_as_documented() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    let valid = [
        "recent_trades.BTC-PERPETUAL.single",
        "recent_trades.BTC-27JUN25-100000-C.single",
        "recent_trades.BTCUSD.all",
        "recent_trades.BTCUSD.options",
        "recent_trades.BTCUSD.future_rolls",
        "recent_trades.ETHUSD.all",
        "recent_trades.ETHUSD.options",
    ];
    let invalid = [
        "recent_trades.BTCUSD.single",
        "recent_trades.BTC-PERPETUAL.all",
        "recent_trades.BTC-27JUN25-100000-C.options",
        "recent_trades.BTC-PERPETUAL.future_rolls",
        "recent_trades.BTCUSD.normal",
        "recent_trades.BTCUSD.block",
        "recent_trades.BTCUSD.combo",
        "recent_trades.XRPUSD.all",
        "recent_trades.NOPE-PERPETUAL.single",
        "recent_trades.BTCUSD",
    ];
    let all: Vec<&str> = valid.iter().chain(&invalid).copied().collect();
    assert_eq!(subscribe(&mut client, &all), json!(valid));
}

/// One side of a rebuilt book: price in ticks of 0.5 to amount in lots of 0.001.
type Side = BTreeMap<i64, u64>;

/// Applies `[price, amount, outright]` changes to one side, keyed by price in ticks of 0.5,
/// amounts in lots of 0.001.
fn apply(side: &mut Side, changes: &Value) {
    for change in changes.as_array().unwrap() {
        let price = change[0].as_f64().unwrap();
        let amount = change[1].as_f64().unwrap();
        let ticks = (price * 2.0).round() as i64;
        assert_eq!(ticks as f64 / 2.0, price, "price on the 0.5 tick");
        if amount == 0.0 {
            assert_eq!(change[2].as_f64(), Some(0.0), "{change}");
            side.remove(&ticks);
        } else {
            side.insert(ticks, (amount * 1000.0).round() as u64);
        }
    }
}

fn lots(value: &Value) -> u64 {
    (value.as_f64().unwrap() * 1000.0).round() as u64
}

#[test]
fn a_book_is_a_snapshot_then_changes_that_keep_it_sane() {
    let running = start(|options| options.rate = 500.0);
    let mut client = Client::connect(&running.sim);
    let channel = "book.BTC-PERPETUAL.1.10.100ms";
    let whole = "book.BTC-PERPETUAL.none.all.raw";
    let subscribed_at = now_secs_f64();
    assert_eq!(
        subscribe(&mut client, &[channel, whole]),
        json!([channel, whole])
    );
    let mut books: BTreeMap<String, (Side, Side)> = BTreeMap::new();
    let (mut integers, mut fractions, mut trades, mut old_trades) = (0, 0, 0, 0);
    for _ in 0..400 {
        let message = client.next_json();
        let text = client.last_text.clone();
        let name = message["channel_name"].as_str().unwrap().to_owned();
        let book = notification(&text, &message, &name);
        check_book(&text, book, false);
        let first = !books.contains_key(&name);
        // The snapshot, and only it, says so.
        assert_eq!(
            message.get("snapshot"),
            first.then_some(&json!(true)),
            "{text}"
        );
        let (bids, asks) = books.entry(name.clone()).or_default();
        for change in book["bid_changes"]
            .as_array()
            .unwrap()
            .iter()
            .chain(book["ask_changes"].as_array().unwrap())
        {
            if change[1].is_u64() {
                integers += 1;
            } else {
                fractions += 1;
            }
        }
        for trade in book["trades"].as_array().unwrap() {
            trades += 1;
            if trade[3].as_f64().unwrap() < subscribed_at {
                assert!(first, "older trades only in the snapshot: {text}");
                old_trades += 1;
            }
        }
        apply(bids, &book["bid_changes"]);
        apply(asks, &book["ask_changes"]);
        let best_bid = bids.keys().next_back().unwrap();
        let best_ask = asks.keys().next().unwrap();
        assert!(best_bid < best_ask, "crossed: {best_bid} >= {best_ask}");
        if name == channel {
            // Grouping 1 puts every price on a whole number; a perpetual's book is deep.
            assert_eq!((bids.len(), asks.len()), (10, 10), "{text}");
            assert!(bids.keys().chain(asks.keys()).all(|ticks| ticks % 2 == 0));
        } else {
            // No grouping and all levels: the rebuilt book is the whole book, so its sums are
            // the totals the notification states.
            assert_eq!(bids.values().sum::<u64>(), lots(&book["total_bid_amount"]));
            assert_eq!(asks.values().sum::<u64>(), lots(&book["total_ask_amount"]));
            assert!(bids.len() > 40 && asks.len() > 40, "{text}");
        }
    }
    assert!(integers > 0 && fractions > 0, "{integers} {fractions}");
    assert!(trades > 0 && old_trades > 0, "{trades} {old_trades}");
}

#[test]
fn a_combination_book_has_no_trades_and_decimal_groupings_work() {
    let running = start(|options| options.rate = 300.0);
    let mut client = Client::connect(&running.sim);
    let combo = format!("book.{COMBO}.none.4.raw");
    let option = "book.BTC-27JUN25-100000-C.2.5.all.raw";
    assert_eq!(
        subscribe(&mut client, &[&combo, option]),
        json!([combo, option])
    );
    let mut books: BTreeMap<String, (Side, Side)> = BTreeMap::new();
    for _ in 0..200 {
        let message = client.next_json();
        let text = client.last_text.clone();
        let name = message["channel_name"].as_str().unwrap().to_owned();
        let book = notification(&text, &message, &name);
        check_book(&text, book, name == combo);
        let (bids, asks) = books.entry(name.clone()).or_default();
        apply(bids, &book["bid_changes"]);
        apply(asks, &book["ask_changes"]);
        if let (Some(bid), Some(ask)) = (bids.keys().next_back(), asks.keys().next()) {
            assert!(bid < ask, "{text}");
        }
        if name == combo {
            assert!(bids.len() <= 4 && asks.len() <= 4, "{text}");
        } else {
            // Grouping 2.5 USD: every level on a multiple of 5 ticks.
            assert!(bids.keys().chain(asks.keys()).all(|ticks| ticks % 5 == 0));
        }
    }
}

#[test]
fn recent_trades_start_with_a_snapshot_then_only_new_trades() {
    let running = start(|options| options.rate = 200.0);
    let mut client = Client::connect(&running.sim);
    let channel = "recent_trades.BTCUSD.all";
    let subscribed_at = now_secs_f64();
    subscribe(&mut client, &[channel]);
    let snapshot = client.notification(channel);
    let text = client.last_text.clone();
    let snapshot = notification(&text, &snapshot, channel);
    check_recent_trades(&text, snapshot);
    let snapshot = snapshot.as_array().unwrap();
    assert!(
        (1..=thalex::SNAPSHOT_TRADES).contains(&snapshot.len()),
        "{text}"
    );
    assert!(snapshot
        .iter()
        .all(|trade| trade[3].as_f64().unwrap() < subscribed_at));
    let mut last_time = snapshot.last().unwrap()[3].as_f64().unwrap();
    for _ in 0..20 {
        let message = client.notification(channel);
        let text = client.last_text.clone();
        let trades = notification(&text, &message, channel);
        check_recent_trades(&text, trades);
        for trade in trades.as_array().unwrap() {
            let time = trade[3].as_f64().unwrap();
            assert!(time >= last_time && time >= subscribed_at, "{text}");
            last_time = time;
        }
    }
}

#[test]
fn login_accepts_the_test_key_and_refuses_other_tokens_with_code_19() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);

    let other_kid = auth::login_token("someone-else", thalex::TEST_PRIVATE_KEY_PEM, now_secs());
    let id = client.next_id;
    client.send_text(&auth::login_request(id, &other_kid.unwrap()));
    client.next_id += 1;
    let reply = client.reply(id);
    assert_eq!(error_code(&reply), Some(19), "{reply}");
    assert!(reply.to_string().contains("unknown key id"), "{reply}");

    let stale = auth::login_token(
        thalex::TEST_KEY_ID,
        thalex::TEST_PRIVATE_KEY_PEM,
        now_secs() - 3600,
    )
    .unwrap();
    let reply = client.call("public/login", json!({ "token": stale }));
    assert_eq!(error_code(&reply), Some(19), "{reply}");
    assert!(reply.to_string().contains("stale iat"), "{reply}");

    let mut forged = good_token();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let reply = client.call("public/login", json!({ "token": forged }));
    assert_eq!(error_code(&reply), Some(19), "{reply}");
    assert!(reply.to_string().contains("signature"), "{reply}");

    let reply = client.call("public/login", json!({ "token": 5 }));
    assert_eq!(error_code(&reply), Some(6), "{reply}");

    let id = client.next_id;
    client.send_text(&auth::login_request(id, &good_token()));
    let reply = client.reply(id);
    assert!(reply["result"]["account_number"].is_string(), "{reply}");
    assert!(
        client.last_text.starts_with(&format!("{{\"id\":{id},")),
        "id first: {}",
        client.last_text
    );
    let stats = running.sim.stats();
    assert_eq!((stats.logins_ok, stats.logins_failed), (1, 4));
}

#[test]
fn private_subscribe_needs_a_login() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    let channels = json!({ "channels": ["account.orders", "account.portfolio"] });
    let reply = client.call("private/subscribe", channels.clone());
    assert_eq!(error_code(&reply), Some(7), "{reply}");
    assert!(reply.to_string().contains("not logged in"), "{reply}");
    let reply = client.call("public/login", json!({ "token": good_token() }));
    assert!(reply.get("result").is_some(), "{reply}");
    let reply = client.call("private/subscribe", channels);
    assert_eq!(
        reply["result"],
        json!(["account.orders", "account.portfolio"])
    );
}

#[test]
fn more_requests_than_the_limit_are_throttled_with_code_4() {
    let running = start(|options| options.request_limit_per_sec = 5);
    let mut client = Client::connect(&running.sim);
    let ids: Vec<u64> = (0..8)
        .map(|_| client.request("public/subscribe", json!({ "channels": ["system"] })))
        .collect();
    let codes: Vec<Option<i64>> = ids
        .iter()
        .map(|&id| error_code(&client.reply(id)))
        .collect();
    assert_eq!(codes.iter().filter(|code| code.is_none()).count(), 5);
    assert_eq!(codes[5..], [Some(4), Some(4), Some(4)]);
    assert_eq!(running.sim.stats().throttled_requests, 3);
}

#[test]
fn unknown_methods_get_31_and_invalid_requests_6() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    let reply = client.call("public/nonsense", json!({}));
    assert_eq!(error_code(&reply), Some(31), "{reply}");
    // The description names `unsubscribe` only.
    let reply = client.call("public/unsubscribe", json!({ "channels": [] }));
    assert_eq!(error_code(&reply), Some(31), "{reply}");
    let reply = client.call("public/subscribe", json!({ "channels": "system" }));
    assert_eq!(error_code(&reply), Some(6), "{reply}");
    client.send_text("{not json");
    let reply = client.next_json();
    assert_eq!(
        reply,
        json!({"id": null, "error": {"code": 6, "message": reply["error"]["message"]}})
    );
    client.send_text(r#"{"params":{},"id":"abc"}"#);
    let reply = client.next_json();
    assert_eq!(reply["id"], json!("abc"));
    assert_eq!(error_code(&reply), Some(6), "{reply}");
}

#[test]
fn unsubscribe_stops_the_data() {
    let running = start(|options| options.rate = 200.0);
    let mut client = Client::connect(&running.sim);
    let channel = "ticker.ETH-PERPETUAL.raw";
    subscribe(&mut client, &[channel]);
    for _ in 0..5 {
        client.notification(channel);
    }
    let reply = client.call(
        "unsubscribe",
        json!({ "channels": [channel, "ticker.BTC-PERPETUAL.raw", "account.orders"] }),
    );
    assert_eq!(reply["result"], json!([channel]));
    let sent = running.sim.stats().data_messages_sent;
    match client.next(Duration::from_millis(300)) {
        Ev::Timeout => {}
        other => panic!("data after the unsubscribe reply: {other:?}"),
    }
    assert_eq!(running.sim.stats().data_messages_sent, sent);
}

#[test]
fn the_reconnect_event_comes_then_a_1001_close() {
    let grace = Duration::from_millis(300);
    let running = start(|options| {
        options.rate = 100.0;
        options.faults = ThalexFaults {
            reconnect_event_after: Some((3, grace)),
            ..ThalexFaults::default()
        };
    });
    let mut client = Client::connect(&running.sim);
    subscribe(&mut client, &["system", "lwt.BTC-PERPETUAL.raw"]);
    let event = client.notification("system");
    let at = Instant::now();
    assert_eq!(
        event,
        json!({"channel_name": "system", "notification": {"event": "reconnect"}})
    );
    assert_eq!(client.last_text, thalex::RECONNECT_EVENT);
    loop {
        match client.next(DEADLINE) {
            Ev::Text(message) => {
                assert_eq!(message["channel_name"], json!("lwt.BTC-PERPETUAL.raw"))
            }
            Ev::Ping => {}
            Ev::Close(code) => {
                assert_eq!(code, Some(1001));
                break;
            }
            other => panic!("expected data then a close, got {other:?}"),
        }
    }
    assert!(at.elapsed() >= grace - Duration::from_millis(50));
    let stats = running.sim.stats();
    assert_eq!(stats.reconnect_events_sent, 1);

    // The fault applies to the first connection only: the next one stays up.
    let mut second = Client::connect(&running.sim);
    subscribe(&mut second, &["system", "lwt.BTC-PERPETUAL.raw"]);
    for _ in 0..10 {
        second.notification("lwt.BTC-PERPETUAL.raw");
    }
    assert_eq!(running.sim.stats().reconnect_events_sent, 1);
}

#[test]
fn close_after_sends_a_1000_close() {
    let running = start(|options| {
        options.faults = ThalexFaults {
            close_after: Some(4),
            ..ThalexFaults::default()
        };
    });
    let mut client = Client::connect(&running.sim);
    subscribe(&mut client, &["ticker.BTC-27JUN25.raw"]);
    let mut data = 0;
    loop {
        match client.next(DEADLINE) {
            Ev::Text(_) => data += 1,
            Ev::Ping => {}
            Ev::Close(code) => {
                assert_eq!(code, Some(1000));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(data, 4);
    assert_eq!(running.sim.stats().closes_injected, 1);
}

#[test]
fn reset_after_drops_the_connection_without_a_close_frame() {
    let running = start(|options| {
        options.faults = ThalexFaults {
            reset_after: Some(3),
            ..ThalexFaults::default()
        };
    });
    let mut client = Client::connect(&running.sim);
    client.request(
        "public/subscribe",
        json!({ "channels": ["ticker.BTC-PERPETUAL.raw"] }),
    );
    let mut data = 0;
    loop {
        match client.next(DEADLINE) {
            Ev::Text(message) if message.get("channel_name").is_some() => data += 1,
            Ev::Text(_) | Ev::Ping => {}
            Ev::Eof => break,
            other => panic!("expected data then a reset, got {other:?}"),
        }
    }
    assert_eq!(data, 3);
    assert_eq!(running.sim.stats().resets_injected, 1);
}

#[test]
fn a_ping_is_answered_with_its_payload() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    client.ws.ws.send_ping(b"are you there").unwrap();
    client.ws.flush();
    loop {
        match client.next(DEADLINE) {
            Ev::Pong(payload) => {
                assert_eq!(payload, b"are you there");
                break;
            }
            Ev::Ping => {}
            other => panic!("expected a pong, got {other:?}"),
        }
    }
    assert_eq!(running.sim.stats().pings_received, 1);
}

#[test]
fn other_paths_are_404() {
    let running = start(|_| {});
    let head = upgrade(&running.sim, "/ws/api/v1").expect_err("the server refuses the path");
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
    assert!(running.sim.url().ends_with("/ws/api/v2"));
}
