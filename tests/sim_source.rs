//! The simulator's sources: the capture replay against the capture itself (byte for byte, and its
//! depth book against an independent serde_json oracle), and the synthetic market against the
//! rules a Binance USD-M client relies on (shapes and types, update-id chains, trade ids, no
//! crossed book, snapshots consistent with the diffs).
//!
//! `cargo test --test tickwire sim_source::`; the throughput measurement is ignored by default:
//! `cargo test --release --test tickwire sim_source:: -- --ignored --nocapture synthetic_throughput`.

use crate::support::common;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{BufRead, BufReader, Write};

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};
use tickwire::fixed::Fixed;
use tickwire_sim::source::{
    CaptureSource, SimMessage, Source, SourceError, SyntheticConfig, SyntheticSource,
    SYNTHETIC_EPOCH_MS,
};

const CAPTURE: &str = "binance-futures/btcusdt_20240808.gz";

// ---------------------------------------------------------------------------------------------
// Oracles and helpers
// ---------------------------------------------------------------------------------------------

/// A depth book kept the plain way: serde_json values applied to ordered maps.
#[derive(Clone, Debug, Default, PartialEq)]
struct OracleBook {
    bids: BTreeMap<Fixed, (String, String)>,
    asks: BTreeMap<Fixed, (String, String)>,
    last_update_id: u64,
    event_time_ms: u64,
    transaction_time_ms: u64,
}

impl OracleBook {
    /// Starts from a REST snapshot body.
    fn from_snapshot(snapshot: &Value) -> OracleBook {
        let mut book = OracleBook {
            last_update_id: snapshot["lastUpdateId"].as_u64().unwrap(),
            event_time_ms: snapshot["E"].as_u64().unwrap(),
            transaction_time_ms: snapshot["T"].as_u64().unwrap(),
            ..OracleBook::default()
        };
        apply_levels(&mut book.bids, &snapshot["bids"]);
        apply_levels(&mut book.asks, &snapshot["asks"]);
        book
    }

    fn apply(&mut self, diff: &Value) {
        apply_levels(&mut self.bids, &diff["b"]);
        apply_levels(&mut self.asks, &diff["a"]);
        self.last_update_id = diff["u"].as_u64().unwrap();
        self.event_time_ms = diff["E"].as_u64().unwrap();
        self.transaction_time_ms = diff["T"].as_u64().unwrap();
    }

    /// The snapshot this book should produce, as a JSON value.
    fn expected_snapshot(&self, limit: usize) -> Value {
        let side = |levels: Vec<&(String, String)>| -> Value {
            levels
                .into_iter()
                .take(limit)
                .map(|(price, quantity)| json!([price, quantity]))
                .collect()
        };
        json!({
            "lastUpdateId": self.last_update_id,
            "E": self.event_time_ms,
            "T": self.transaction_time_ms,
            "bids": side(self.bids.values().rev().collect()),
            "asks": side(self.asks.values().collect()),
        })
    }

    fn best_bid(&self) -> Option<(&String, &String)> {
        self.bids.values().next_back().map(|(p, q)| (p, q))
    }

    fn best_ask(&self) -> Option<(&String, &String)> {
        self.asks.values().next().map(|(p, q)| (p, q))
    }
}

fn apply_levels(side: &mut BTreeMap<Fixed, (String, String)>, levels: &Value) {
    for level in levels.as_array().expect("levels are an array") {
        let price = level[0].as_str().expect("price is a string");
        let quantity = level[1].as_str().expect("quantity is a string");
        let key = Fixed::parse_str(price).unwrap();
        if Fixed::parse_str(quantity).unwrap() == Fixed::ZERO {
            side.remove(&key);
        } else {
            side.insert(key, (price.to_owned(), quantity.to_owned()));
        }
    }
}

fn snapshot_value(source: &dyn Source, symbol: &str, limit: usize) -> Value {
    let body = source
        .depth_snapshot(symbol, limit)
        .unwrap_or_else(|| panic!("no snapshot for {symbol}"));
    assert!(
        body.starts_with(b"{\"lastUpdateId\":"),
        "REST field order: {}",
        String::from_utf8_lossy(&body[..body.len().min(80)])
    );
    serde_json::from_slice(&body).expect("the snapshot is JSON")
}

/// The keys of a JSON object in the order they are written (serde_json's `Value` sorts them).
struct KeyOrder(Vec<String>);

impl<'de> Deserialize<'de> for KeyOrder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = KeyOrder;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(KeyOrder(keys))
            }
        }
        deserializer.deserialize_map(KeysVisitor)
    }
}

fn key_order(json: &[u8]) -> Vec<String> {
    serde_json::from_slice::<KeyOrder>(json).unwrap().0
}

fn capture_lines(path: &std::path::Path) -> impl Iterator<Item = String> {
    let file = std::fs::File::open(path).unwrap();
    BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(Result::unwrap)
}

fn write_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Capture replay
// ---------------------------------------------------------------------------------------------

#[test]
fn capture_replays_every_message_byte_for_byte_from_gzip_and_plain_with_an_oracle_book() {
    let Some(path) = common::shared_data(CAPTURE) else {
        return;
    };
    let mut source = CaptureSource::open(&path).unwrap();
    // The same capture decompressed, named .gz but plain: the format is told by the content.
    let dir = tempfile::tempdir().unwrap();
    let plain_path = dir.path().join("plain-despite-the-name.gz");
    {
        let mut plain = std::io::BufWriter::new(std::fs::File::create(&plain_path).unwrap());
        std::io::copy(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()),
            &mut plain,
        )
        .unwrap();
    }
    let mut plain = CaptureSource::open(&plain_path).unwrap();
    let mut oracle = OracleBook::default();
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut first_recv_ns = None;
    let mut last_offset_ns = 0;
    let mut diffs = 0u64;
    let mut snapshots_checked = 0;
    let mut rest_snapshot_lines = 0;
    for (number, line) in capture_lines(&path).enumerate() {
        let (recv_ns, json) = line.split_once(' ').expect("<recv ns> <json>");
        let recv_ns: u64 = recv_ns.parse().unwrap();
        if json.starts_with("{\"lastUpdateId\":") {
            // The REST snapshot hftbacktest's collector recorded: not a stream message.
            rest_snapshot_lines += 1;
            continue;
        }
        let message = source
            .next_message()
            .unwrap_or_else(|| panic!("the replay ended before line {}", number + 1));
        assert!(
            message.combined == json.as_bytes(),
            "line {} differs",
            number + 1
        );

        // The capture writes the wrapper without blanks, so the line's stream and data are found
        // by its layout, independently of the replay's scan.
        let wrapper_head = format!("{{\"stream\":\"{}\",\"data\":", message.stream);
        assert!(json.starts_with(&wrapper_head) && json.ends_with('}'));
        assert!(message.data() == &json.as_bytes()[wrapper_head.len()..json.len() - 1]);
        let data: Value = serde_json::from_slice(message.data()).unwrap();
        assert!(data.is_object());
        assert!(
            plain.next_message().as_ref() == Some(&message),
            "plain copy, line {}",
            number + 1
        );

        let first_recv_ns = *first_recv_ns.get_or_insert(recv_ns);
        assert_eq!(
            message.offset_ns,
            recv_ns - first_recv_ns,
            "line {}",
            number + 1
        );
        assert!(message.offset_ns >= last_offset_ns);
        last_offset_ns = message.offset_ns;

        let event = data["e"].as_str().unwrap();
        *counts.entry(event.to_owned()).or_default() += 1;
        let expected_stamp = (event == "bookTicker").then(|| data["u"].as_u64().unwrap());
        assert_eq!(message.stamp_key, expected_stamp, "line {}", number + 1);

        if event == "depthUpdate" {
            oracle.apply(&data);
            diffs += 1;
            if [1, 2, 100, 3_000, 6_551].contains(&diffs) {
                for limit in [5, 1000, usize::MAX] {
                    assert_eq!(
                        snapshot_value(&source, "BTCUSDT", limit),
                        oracle.expected_snapshot(limit),
                        "snapshot after {diffs} diffs, limit {limit}"
                    );
                }
                assert_eq!(
                    snapshot_value(&source, "BTCUSDT", 5)["lastUpdateId"],
                    data["u"]
                );
                snapshots_checked += 1;
            }
        } else if diffs == 0 {
            assert_eq!(source.depth_snapshot("BTCUSDT", 10), None);
        }
    }
    assert_eq!(source.next_message(), None);
    assert_eq!(plain.next_message(), None);
    assert_eq!(
        plain.depth_snapshot("BTCUSDT", 1000),
        source.depth_snapshot("BTCUSDT", 1000)
    );
    assert_eq!(snapshots_checked, 5);
    assert_eq!(counts["bookTicker"], 66_089);
    assert_eq!(counts["depthUpdate"], 6_551);
    assert_eq!(counts["trade"], 21_313);
    // 93,954 lines: 93,953 stream messages and one recorded REST snapshot (line 55).
    assert_eq!(source.messages_read(), 93_953);
    assert_eq!(rest_snapshot_lines, 1);
    assert_eq!(source.rest_snapshot_lines(), 1);
    assert_eq!(source.skipped_lines(), 0);
    assert!(source.read_error().is_none());
    assert!(
        (340_000_000_000..350_000_000_000).contains(&last_offset_ns),
        "the capture spans about 345 s, the replay {last_offset_ns} ns"
    );
    // Symbols are looked up as the REST API takes them; lower case is tolerated.
    assert_eq!(
        source.depth_snapshot("btcusdt", 3),
        source.depth_snapshot("BTCUSDT", 3)
    );
    assert_eq!(source.depth_snapshot("ETHUSDT", 3), None);
}

/// The capture's own lines, for hand-made files: the first depthUpdate, bookTicker and trade.
fn first_capture_lines() -> Option<HashMap<&'static str, String>> {
    let path = common::shared_data(CAPTURE)?;
    let mut found = HashMap::new();
    for line in capture_lines(&path) {
        for (event, marker) in [
            ("depthUpdate", "\"e\":\"depthUpdate\""),
            ("bookTicker", "\"e\":\"bookTicker\""),
            ("trade", "\"e\":\"trade\""),
        ] {
            if line.contains(marker) {
                found.entry(event).or_insert_with(|| line.clone());
            }
        }
        if found.len() == 3 {
            return Some(found);
        }
    }
    None
}

/// The `data` object of a capture line, as its recorded bytes.
fn raw_data(line: &str) -> &str {
    let start = line.find("\"data\":").unwrap() + "\"data\":".len();
    &line[start..line.len() - 1]
}

#[test]
fn untimed_raw_and_bad_lines() {
    let Some(lines) = first_capture_lines() else {
        return;
    };
    let depth_raw = raw_data(&lines["depthUpdate"]);
    let depth_value: Value = serde_json::from_str(depth_raw).unwrap();
    let book_ticker_raw = raw_data(&lines["bookTicker"]);
    let trade_raw = raw_data(&lines["trade"]);
    // Spaces inside the JSON are part of the recorded bytes and must survive.
    let agg_trade_raw = r#"{ "e":"aggTrade", "E":5,"s":"BTCUSDT","a":1,"p":"61800.30","q":"0.006","f":2,"l":3,"T":5,"m":true}"#;
    let mark_price_raw = r#"{"e":"markPriceUpdate","E":5,"s":"BTCUSDT","p":"61800.1","i":"61790.0","P":"61801.0","r":"0.0001","T":6}"#;
    let partial_depth = r#"{"stream":"btcusdt@depth5@100ms","data":{"e":"depthUpdate","E":9,"T":9,"s":"BTCUSDT","U":1,"u":2,"pu":0,"b":[["1.00","5.000"]],"a":[]}}"#;
    let timed_wrapper = lines["bookTicker"].split_once(' ').unwrap().1;
    let file = [
        format!("1000 {timed_wrapper}"),
        trade_raw.to_owned(), // untimed: keeps the previous offset
        format!("1350  {book_ticker_raw}"),
        "not json at all".to_owned(),
        String::new(),
        "   ".to_owned(),
        format!("1300 {agg_trade_raw}"), // time steps back: keeps the previous offset
        format!("1400 {depth_raw}"),
        r#"1500 {"stream":"btcusdt@depth@0ms","data":{"e":"depthUpdate","E":1"#.to_owned(),
        r#"{"e":"kline","s":"BTCUSDT"}"#.to_owned(),
        format!("1600 {mark_price_raw}\r"),
        "12x {\"e\":\"trade\"}".to_owned(),
        format!("1700 {partial_depth}"),
        r#"1800 {"e":"bookTicker","s":"BTCUSDT","b":"1.0"}"#.to_owned(),
        r#"1900 {"stream":"btcusdt@trade","data":[1,2]}"#.to_owned(),
    ]
    .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "mixed.txt", file.as_bytes());
    let mut source = CaptureSource::open(&path).unwrap();
    let messages: Vec<SimMessage> = std::iter::from_fn(|| source.next_message()).collect();

    let expected: [(&str, Option<&str>, u64); 7] = [
        ("btcusdt@bookTicker", None, 0),
        ("btcusdt@trade", Some(trade_raw), 0),
        ("btcusdt@bookTicker", Some(book_ticker_raw), 350),
        ("btcusdt@aggTrade", Some(agg_trade_raw), 350),
        ("btcusdt@depth", Some(depth_raw), 400),
        ("btcusdt@markPrice", Some(mark_price_raw), 600),
        ("btcusdt@depth5@100ms", None, 700),
    ];
    assert_eq!(messages.len(), expected.len(), "{messages:#?}");
    for (message, (stream, raw, offset_ns)) in messages.iter().zip(expected) {
        assert_eq!(message.stream, stream);
        assert_eq!(message.offset_ns, offset_ns, "{stream}");
        if let Some(raw) = raw {
            // A raw line gets the wrapper the venue would have sent, around its exact bytes.
            assert_eq!(
                message.combined,
                format!("{{\"stream\":\"{stream}\",\"data\":{raw}}}").into_bytes()
            );
            assert_eq!(message.data(), raw.as_bytes());
        }
        let combined: Value = serde_json::from_slice(&message.combined).unwrap();
        assert_eq!(combined["stream"], stream);
    }
    assert_eq!(messages[0].combined, timed_wrapper.as_bytes());
    let book_ticker: Value = serde_json::from_str(book_ticker_raw).unwrap();
    assert_eq!(messages[0].stamp_key, book_ticker["u"].as_u64());
    assert_eq!(messages[2].stamp_key, book_ticker["u"].as_u64());
    assert_eq!(messages[1].stamp_key, None);
    // Bad: "not json", the truncated diff, kline, "12x", a bookTicker without u, array data.
    assert_eq!(source.skipped_lines(), 6);
    assert_eq!(source.messages_read(), 7);

    // The book holds the one diff stream message, not the partial depth5 one.
    let mut oracle = OracleBook::default();
    oracle.apply(&depth_value);
    assert_eq!(
        snapshot_value(&source, "BTCUSDT", 1000),
        oracle.expected_snapshot(1000)
    );
}

#[test]
fn an_untimed_gzip_capture_replays_at_offset_zero() {
    let Some(path) = common::shared_data(CAPTURE) else {
        return;
    };
    let untimed: Vec<String> = capture_lines(&path)
        .take(500)
        .map(|line| line.split_once(' ').unwrap().1.to_owned())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    // Gzip named .txt: detected by the magic bytes.
    let path = write_file(&dir, "untimed.txt", &gzip(untimed.join("\n").as_bytes()));
    let mut source = CaptureSource::open(&path).unwrap();
    for line in untimed
        .iter()
        .filter(|line| line.starts_with("{\"stream\""))
    {
        let message = source.next_message().unwrap();
        assert!(message.combined == line.as_bytes());
        assert_eq!(message.offset_ns, 0);
    }
    assert_eq!(source.next_message(), None);
    assert_eq!(source.skipped_lines(), 0);
    assert_eq!(source.rest_snapshot_lines(), 1);
}

#[test]
fn a_truncated_gzip_capture_ends_with_a_read_error_after_its_whole_lines() {
    let Some(path) = common::shared_data(CAPTURE) else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let truncated = write_file(&dir, "truncated.gz", &bytes[..200_000]);
    let mut source = CaptureSource::open(&truncated).unwrap();
    let mut lines = capture_lines(&path).filter(|line| line.contains(" {\"stream\":"));
    let mut replayed = 0;
    while let Some(message) = source.next_message() {
        let line = lines.next().unwrap();
        assert!(message.combined == line.split_once(' ').unwrap().1.as_bytes());
        replayed += 1;
    }
    assert!(replayed > 1000, "{replayed} messages before the cut");
    assert!(source.read_error().is_some());
    assert_eq!(source.next_message(), None);
}

#[test]
fn opening_a_missing_capture_names_the_file() {
    let error = match CaptureSource::open("/nonexistent/capture.gz") {
        Err(error) => error,
        Ok(_) => panic!("opened a missing file"),
    };
    assert!(matches!(error, SourceError::Open { .. }));
    assert!(error.to_string().contains("/nonexistent/capture.gz"));
}

// ---------------------------------------------------------------------------------------------
// Synthetic market
// ---------------------------------------------------------------------------------------------

fn synthetic(config: SyntheticConfig) -> SyntheticSource {
    SyntheticSource::new(config).expect("a valid config")
}

fn generate(source: &mut SyntheticSource, count: usize) -> Vec<SimMessage> {
    (0..count)
        .map(|_| source.next_message().expect("an endless source"))
        .collect()
}

#[test]
fn synthetic_is_deterministic_for_a_seed() {
    let config = SyntheticConfig {
        seed: 7,
        channels: ["bookTicker", "depth@100ms", "aggTrade", "trade"]
            .map(String::from)
            .to_vec(),
        ..SyntheticConfig::default()
    };
    let mut first = synthetic(config.clone());
    let mut second = synthetic(config.clone());
    assert_eq!(generate(&mut first, 20_000), generate(&mut second, 20_000));
    assert_eq!(
        first.depth_snapshot("ETHUSDT", 1000),
        second.depth_snapshot("ETHUSDT", 1000)
    );
    let mut same_seed = synthetic(config.clone());
    let mut other_seed = synthetic(SyntheticConfig { seed: 8, ..config });
    assert_ne!(
        generate(&mut same_seed, 100),
        generate(&mut other_seed, 100)
    );
}

#[test]
fn synthetic_symbols_and_config_errors() {
    let source = synthetic(SyntheticConfig {
        symbols: 10,
        book_levels: 10,
        ..SyntheticConfig::default()
    });
    assert_eq!(
        source.symbols().collect::<Vec<_>>(),
        [
            "BTCUSDT", "ETHUSDT", "SOLUSDT", "BNBUSDT", "XRPUSDT", "DOGEUSDT", "ADAUSDT",
            "AVAXUSDT", "SYM8USDT", "SYM9USDT"
        ]
    );
    let invalid = |config: SyntheticConfig| match SyntheticSource::new(config) {
        Err(SourceError::InvalidConfig { field, .. }) => field,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("accepted an invalid config"),
    };
    let channels = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
    let base = SyntheticConfig::default;
    assert_eq!(
        invalid(SyntheticConfig {
            symbols: 0,
            ..base()
        }),
        "symbols"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            rate_per_sec: 0.0,
            ..base()
        }),
        "rate_per_sec"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            rate_per_sec: f64::NAN,
            ..base()
        }),
        "rate_per_sec"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            book_levels: 0,
            ..base()
        }),
        "book_levels"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            channels: vec![],
            ..base()
        }),
        "channels"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            channels: channels(&["depth@250ms"]),
            ..base()
        }),
        "channels"
    );
    assert_eq!(
        invalid(SyntheticConfig {
            channels: channels(&["trade", "trade"]),
            ..base()
        }),
        "channels"
    );
}

#[test]
fn synthetic_ends_after_its_duration() {
    let mut source = synthetic(SyntheticConfig {
        duration_messages: Some(10),
        ..SyntheticConfig::default()
    });
    assert_eq!(std::iter::from_fn(|| source.next_message()).count(), 10);
    assert_eq!(source.next_message(), None);
}

/// What the checker remembers per symbol.
#[derive(Default)]
struct SymbolState {
    last_book_ticker_u: u64,
    /// Per depth stream: the last diff's `u` (starts at the first snapshot's lastUpdateId).
    last_diff_u: HashMap<String, u64>,
    last_diff: Option<(u64, u64)>,
    last_trade_id: u64,
    last_agg_trade_id: u64,
    /// bookTickers not yet matched to a diff: (u, b, B, a, A).
    unmatched_book_tickers: Vec<(u64, String, String, String, String)>,
    /// Digits after the point, per field kind, as first seen: every later number must agree.
    decimals: HashMap<&'static str, usize>,
}

/// Books started from snapshots at various points and carried forward by the diffs.
struct ConsistencyOracles {
    books: Vec<(String, usize, OracleBook)>,
    compared: usize,
}

fn decimals_of(text: &str) -> usize {
    text.split_once('.')
        .map_or(0, |(_, fraction)| fraction.len())
}

fn check_decimal(state: &mut SymbolState, kind: &'static str, value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{kind} is a string: {value}"));
    let parsed = Fixed::parse_str(text).unwrap_or_else(|error| panic!("{kind} {text}: {error}"));
    assert!(parsed > Fixed::ZERO || kind == "quantity", "{kind} {text}");
    let decimals = *state
        .decimals
        .entry(kind)
        .or_insert_with(|| decimals_of(text));
    assert_eq!(
        decimals_of(text),
        decimals,
        "{kind} {text}: same decimals throughout"
    );
}

fn is_u64(value: &Value) -> bool {
    value.is_u64()
}

/// Runs a synthetic source for `count` messages and checks everything a Binance client relies
/// on. Returns (bookTickers matched against the book at their u, snapshot comparisons, counts
/// of bookTicker / depth / trade messages).
fn check_synthetic(config: SyntheticConfig, count: usize) -> (usize, usize, [usize; 3]) {
    let rate_per_sec = config.rate_per_sec;
    let book_levels = config.book_levels;
    let channels = config.channels.clone();
    let mut source = synthetic(config);
    let symbols: Vec<String> = source.symbols().map(str::to_owned).collect();
    let mut states: HashMap<String, SymbolState> = HashMap::new();
    let mut oracles = ConsistencyOracles {
        books: Vec::new(),
        compared: 0,
    };
    let start_oracles = |source: &SyntheticSource, oracles: &mut ConsistencyOracles| {
        for symbol in &symbols {
            let snapshot = snapshot_value(source, symbol, usize::MAX);
            oracles
                .books
                .push((symbol.clone(), 0, OracleBook::from_snapshot(&snapshot)));
        }
    };
    start_oracles(&source, &mut oracles);
    for symbol in &symbols {
        let state = states.entry(symbol.clone()).or_default();
        let first_id = oracles
            .books
            .iter()
            .find(|(s, ..)| s == symbol)
            .unwrap()
            .2
            .last_update_id;
        for channel in channels.iter().filter(|c| c.starts_with("depth")) {
            state.last_diff_u.insert(channel.clone(), first_id);
        }
        state.last_diff = Some((first_id, SYNTHETIC_EPOCH_MS));
    }
    let checkpoints = [count / 7, count / 3, count / 2, count - 1];
    let mut matched_book_tickers = 0;
    let mut kinds = [0usize; 3];
    let mut last_offset_ns = 0;
    for index in 0..count {
        let message = source.next_message().unwrap();
        let symbol = &symbols[index % symbols.len()];
        let state = states.get_mut(symbol).unwrap();
        let data: Value = serde_json::from_slice(message.data()).unwrap();
        let mut wrapper = format!("{{\"stream\":\"{}\",\"data\":", message.stream).into_bytes();
        wrapper.extend_from_slice(message.data());
        wrapper.push(b'}');
        assert!(message.combined == wrapper, "the combined-stream wrapper");
        let channel = message
            .stream
            .strip_prefix(&format!("{}@", symbol.to_ascii_lowercase()))
            .unwrap_or_else(|| panic!("round robin: message {index} is {symbol}'s"));
        assert!(channels.iter().any(|c| c == channel), "{channel}");
        assert_eq!(data["s"], symbol.as_str());

        // Paced at the rate, on a clock every E and T follows.
        let expected_offset_ns = index as f64 * 1e9 / rate_per_sec;
        assert!((message.offset_ns as f64 - expected_offset_ns).abs() <= 1.0);
        assert!(message.offset_ns >= last_offset_ns);
        last_offset_ns = message.offset_ns;
        let now_ms = SYNTHETIC_EPOCH_MS + message.offset_ns / 1_000_000;
        assert_eq!(data["E"], now_ms);
        assert_eq!(data["T"], now_ms);

        let keys = key_order(message.data());
        match data["e"].as_str().unwrap() {
            "bookTicker" => {
                kinds[0] += 1;
                assert_eq!(keys, ["e", "u", "s", "b", "B", "a", "A", "T", "E"]);
                assert_eq!(channel, "bookTicker");
                let u = data["u"].as_u64().unwrap();
                assert_eq!(message.stamp_key, Some(u));
                assert!(u >= state.last_book_ticker_u, "bookTicker u goes back");
                assert!(
                    u > state.last_diff.unwrap().0,
                    "a bookTicker shows a new top"
                );
                state.last_book_ticker_u = u;
                check_decimal(state, "price", &data["b"]);
                check_decimal(state, "price", &data["a"]);
                check_decimal(state, "quantity", &data["B"]);
                check_decimal(state, "quantity", &data["A"]);
                let bid = Fixed::parse_str(data["b"].as_str().unwrap()).unwrap();
                let ask = Fixed::parse_str(data["a"].as_str().unwrap()).unwrap();
                assert!(bid < ask, "crossed bookTicker {data}");
                let text = |key: &str| data[key].as_str().unwrap().to_owned();
                state
                    .unmatched_book_tickers
                    .push((u, text("b"), text("B"), text("a"), text("A")));
            }
            "depthUpdate" => {
                kinds[1] += 1;
                assert_eq!(keys, ["e", "E", "T", "s", "U", "u", "pu", "b", "a"]);
                assert!(channel.starts_with("depth"));
                assert_eq!(message.stamp_key, None);
                let (first, last, previous) = (
                    data["U"].as_u64().unwrap(),
                    data["u"].as_u64().unwrap(),
                    data["pu"].as_u64().unwrap(),
                );
                let chain = state.last_diff_u.get_mut(channel).unwrap();
                assert_eq!(previous, *chain, "pu == the previous diff's u on {channel}");
                assert_eq!(first, previous + 1, "U == previous u + 1");
                assert!(first <= last);
                *chain = last;
                state.last_diff = Some((last, now_ms));
                for side in ["b", "a"] {
                    let levels = data[side].as_array().unwrap();
                    assert!(levels
                        .iter()
                        .all(|level| level.as_array().unwrap().len() == 2));
                    for level in levels {
                        check_decimal(state, "price", &level[0]);
                        check_decimal(state, "quantity", &level[1]);
                    }
                    let prices: Vec<Fixed> = levels
                        .iter()
                        .map(|level| Fixed::parse_str(level[0].as_str().unwrap()).unwrap())
                        .collect();
                    assert!(prices.windows(2).all(|pair| pair[0] < pair[1]), "ascending");
                }
                for (book_symbol, _, book) in &mut oracles.books {
                    if book_symbol == symbol {
                        book.apply(&data);
                        let (bid, ask) = (book.best_bid().unwrap(), book.best_ask().unwrap());
                        assert!(
                            Fixed::parse_str(bid.0).unwrap() < Fixed::parse_str(ask.0).unwrap(),
                            "crossed book after {data}"
                        );
                        assert!(book.bids.len() <= book_levels && book.asks.len() <= book_levels);
                    }
                }
                // The book is known exactly at each diff's u: bookTickers at that u must show
                // its top.
                let book = &oracles.books.iter().find(|(s, ..)| s == symbol).unwrap().2;
                let top = (
                    book.best_bid().unwrap().0.clone(),
                    book.best_bid().unwrap().1.clone(),
                    book.best_ask().unwrap().0.clone(),
                    book.best_ask().unwrap().1.clone(),
                );
                for (u, b, bq, a, aq) in state.unmatched_book_tickers.drain(..) {
                    if u == last {
                        assert_eq!((b, bq, a, aq), top, "bookTicker at u {u}");
                        matched_book_tickers += 1;
                    }
                }
            }
            event @ ("trade" | "aggTrade") => {
                kinds[2] += 1;
                assert_eq!(channel, event);
                assert_eq!(message.stamp_key, None);
                check_decimal(state, "price", &data["p"]);
                check_decimal(state, "quantity", &data["q"]);
                assert!(Fixed::parse_str(data["q"].as_str().unwrap()).unwrap() > Fixed::ZERO);
                assert!(data["m"].is_boolean());
                if event == "trade" {
                    assert_eq!(keys, ["e", "E", "T", "s", "t", "p", "q", "X", "m"]);
                    assert_eq!(data["X"], "MARKET");
                    let trade_id = data["t"].as_u64().unwrap();
                    assert!(trade_id > state.last_trade_id, "trade ids increase");
                    state.last_trade_id = trade_id;
                } else {
                    // The documented order, with `nq` since 2025-12-31 (the USD-M change log).
                    assert_eq!(
                        keys,
                        ["e", "E", "s", "a", "p", "q", "nq", "f", "l", "T", "m"]
                    );
                    assert_eq!(data["nq"], data["q"], "the simulator has no RPI orders");
                    let (agg_id, first, last) = (
                        data["a"].as_u64().unwrap(),
                        data["f"].as_u64().unwrap(),
                        data["l"].as_u64().unwrap(),
                    );
                    assert!(agg_id > state.last_agg_trade_id, "aggTrade ids increase");
                    assert!(first > state.last_trade_id && first <= last, "{data}");
                    state.last_agg_trade_id = agg_id;
                    state.last_trade_id = last;
                }
            }
            other => panic!("unexpected event {other}"),
        }
        for key in ["E", "T", "u", "U", "pu", "t", "a", "f", "l"] {
            if let Some(value) = data.get(key) {
                if !(key == "a" && data["e"] != "aggTrade") {
                    assert!(is_u64(value), "{key} is an integer in {data}");
                }
            }
        }

        if checkpoints.contains(&index) {
            // Every book started so far, carried by the diffs since, equals a fresh snapshot.
            for (book_symbol, _, book) in &oracles.books {
                let snapshot = snapshot_value(&source, book_symbol, usize::MAX);
                assert_eq!(
                    snapshot,
                    book.expected_snapshot(usize::MAX),
                    "{book_symbol}"
                );
                let (last_u, last_ms) = states[book_symbol].last_diff.unwrap();
                assert_eq!(snapshot["lastUpdateId"], last_u);
                assert_eq!(snapshot["E"], last_ms);
                oracles.compared += 1;
            }
            start_oracles(&source, &mut oracles);
            // A limited snapshot is the best levels of the full one.
            let full = snapshot_value(&source, &symbols[0], usize::MAX);
            let limited = snapshot_value(&source, &symbols[0], 5);
            for side in ["bids", "asks"] {
                let expected: Vec<Value> = full[side]
                    .as_array()
                    .unwrap()
                    .iter()
                    .take(5)
                    .cloned()
                    .collect();
                assert_eq!(limited[side].as_array().unwrap(), &expected);
            }
        }
    }
    (matched_book_tickers, oracles.compared, kinds)
}

#[test]
fn synthetic_default_market_keeps_the_binance_rules() {
    let count = 25_000;
    let (matched, compared, kinds) = check_synthetic(
        SyntheticConfig {
            seed: 1,
            ..SyntheticConfig::default()
        },
        count,
    );
    assert!(
        matched > 600,
        "only {matched} bookTickers matched a diff's u"
    );
    assert!(compared >= 2 * 4, "{compared}");
    // The capture's mix: 70% bookTicker, 10% depth, 20% trades.
    for (kind, expected_share) in kinds.iter().zip([0.7, 0.1, 0.2]) {
        let share = *kind as f64 / count as f64;
        assert!((share - expected_share).abs() < 0.02, "{kinds:?}");
    }
}

#[test]
fn synthetic_many_symbols_every_channel_and_a_shallow_book() {
    // Ten symbols (the small-price ones and the generic SYM ones), two depth channels with their
    // own chains, both trade channels, and a book of 3 levels a side where cancels and trades
    // empty levels all the time.
    let channels = [
        "bookTicker",
        "depth@0ms",
        "depth@500ms",
        "trade",
        "aggTrade",
    ];
    let (matched, compared, kinds) = check_synthetic(
        SyntheticConfig {
            symbols: 10,
            rate_per_sec: 200_000.0,
            channels: channels.map(String::from).to_vec(),
            seed: 99,
            book_levels: 3,
            duration_messages: None,
        },
        25_000,
    );
    assert!(
        matched > 300,
        "only {matched} bookTickers matched a diff's u"
    );
    assert!(compared >= 10 * 4, "{compared}");
    assert!(kinds.iter().all(|&kind| kind > 0));
}

#[test]
fn synthetic_bookticker_only_snapshots_show_the_live_book() {
    let mut source = synthetic(SyntheticConfig {
        channels: vec!["bookTicker".to_owned()],
        book_levels: 20,
        seed: 3,
        ..SyntheticConfig::default()
    });
    for _ in 0..2_000 {
        let message = source.next_message().unwrap();
        let data: Value = serde_json::from_slice(message.data()).unwrap();
        let symbol = data["s"].as_str().unwrap();
        let snapshot = snapshot_value(&source, symbol, 1);
        assert_eq!(snapshot["lastUpdateId"], data["u"]);
        assert_eq!(snapshot["bids"], json!([[data["b"], data["B"]]]));
        assert_eq!(snapshot["asks"], json!([[data["a"], data["A"]]]));
        assert_eq!(snapshot["E"], data["E"]);
    }
    assert_eq!(source.depth_snapshot("NOPEUSDT", 5), None);
}

#[test]
fn synthetic_field_order_matches_the_capture() {
    let Some(lines) = first_capture_lines() else {
        return;
    };
    let mut source = synthetic(SyntheticConfig {
        channels: ["bookTicker", "depth@0ms", "trade"]
            .map(String::from)
            .to_vec(),
        ..SyntheticConfig::default()
    });
    let mut seen = HashMap::new();
    while seen.len() < 3 {
        let message = source.next_message().unwrap();
        let data: Value = serde_json::from_slice(message.data()).unwrap();
        seen.entry(data["e"].as_str().unwrap().to_owned())
            .or_insert_with(|| key_order(message.data()));
    }
    for (event, line) in &lines {
        assert_eq!(
            seen[*event],
            key_order(raw_data(line).as_bytes()),
            "{event} fields in the capture's order"
        );
    }
}

/// The generation rate, single core, no checks. Run it in release:
/// `cargo test --release --test tickwire sim_source:: -- --ignored --nocapture synthetic_throughput`.
#[test]
#[ignore = "a measurement, not a check; run in release"]
fn synthetic_throughput() {
    for (name, channels, symbols) in [
        (
            "default mix, 2 symbols",
            SyntheticConfig::default().channels,
            2,
        ),
        (
            "all channels, 8 symbols",
            ["bookTicker", "depth@100ms", "trade", "aggTrade"]
                .map(String::from)
                .to_vec(),
            8,
        ),
    ] {
        let mut source = synthetic(SyntheticConfig {
            symbols,
            channels,
            rate_per_sec: 1e6,
            ..SyntheticConfig::default()
        });
        let count = 2_000_000u64;
        let started = std::time::Instant::now();
        let mut bytes = 0usize;
        for _ in 0..count {
            bytes += source.next_message().unwrap().combined.len();
        }
        let elapsed = started.elapsed();
        println!(
            "{name}: {count} messages in {elapsed:?}: {:.0} messages/s, {:.0} bytes/message",
            count as f64 / elapsed.as_secs_f64(),
            bytes as f64 / count as f64
        );
    }
}
