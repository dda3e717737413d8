//! Bybit v5 messages decoded by barter-data 0.13's own Bybit types, beside serde_json into typed
//! structs with borrowed `&str` fields (the yardstick `cargo bench --bench bybit_decode` also
//! times tickwire against), in the same run: the orderbook page's delta example (12 levels) and a
//! batch of 10 trades, the same bytes as `benches/bybit_decode.rs`.
//!
//! - `barter`: `serde_json::from_slice` into `BybitOrderBookMessage` (levels as
//!   `rust_decimal::Decimal` read from their strings, the topic turned into an allocated
//!   `SubscriptionId`) and `BybitTrade` (prices and sizes as `f64`, symbol and id as `String`).
//! - `serde_json`: `serde_json::from_slice` into `#[derive(Deserialize)]` structs with `&str`
//!   fields, decimals left as strings.
//!
//! Before timing, barter's values are checked against serde_json's strings (every level as a
//! `Decimal`, `u`, `seq`, every trade's price, size and id); the binary stops on a disagreement.
//! Then each decoder decodes each message in 31 samples of 20,000 iterations, and the median
//! sample's time per message is printed with barter's time over serde_json's, to set beside
//! tickwire's over serde_json's from `bybit_decode`. Run with
//! `cargo run --release --manifest-path benches/peers/bybit-barter/Cargo.toml`.

use barter_data::exchange::bybit::book::BybitOrderBookMessage;
use barter_data::exchange::bybit::trade::BybitTrade;
use rust_decimal::Decimal;
use serde::Deserialize;
use std::hint::black_box;
use std::str::FromStr;
use std::time::Instant;

/// The orderbook page's delta example, its whitespace taken out (as `benches/bybit_decode.rs`).
const BOOK_DELTA: &[u8] = br#"{"topic":"orderbook.50.BTCUSDT","type":"delta","ts":1687940967466,"data":{"s":"BTCUSDT","b":[["30247.20","30.028"],["30245.40","0.224"],["30242.10","1.593"],["30240.30","1.305"],["30240.00","0"]],"a":[["30248.70","0"],["30249.30","0.892"],["30249.50","1.778"],["30249.60","0"],["30251.90","2.947"],["30252.20","0.659"],["30252.50","4.591"]],"u":177400507,"seq":66544703342},"cts":1687940967464}"#;

/// Ten trades in the trade page's shape (linear's UUID ids), as `benches/bybit_decode.rs`.
fn trade_batch() -> Vec<u8> {
    let rows: Vec<String> = (0..10)
        .map(|i| {
            format!(
                r#"{{"T":16723044868{i:02},"s":"BTCUSDT","S":"{}","v":"0.{:03}","p":"16578.{:02}","L":"PlusTick","i":"20f43950-d8dd-5b31-9112-a178eb6023{i:02}","BT":false,"seq":17832846{i:02}}}"#,
                if i % 2 == 0 { "Buy" } else { "Sell" },
                i + 1,
                50 + i
            )
        })
        .collect();
    format!(
        r#"{{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1672304486868,"data":[{}]}}"#,
        rows.join(",")
    )
    .into_bytes()
}

#[derive(Deserialize)]
struct BookJson<'a> {
    #[serde(borrow)]
    topic: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    ts: u64,
    #[serde(borrow)]
    data: BookData<'a>,
    cts: u64,
}

#[derive(Deserialize)]
struct BookData<'a> {
    #[serde(borrow)]
    s: &'a str,
    #[serde(borrow)]
    b: Vec<[&'a str; 2]>,
    #[serde(borrow)]
    a: Vec<[&'a str; 2]>,
    u: u64,
    seq: u64,
}

#[derive(Deserialize)]
struct TradesJson<'a> {
    #[serde(borrow)]
    topic: &'a str,
    ts: u64,
    #[serde(borrow)]
    data: Vec<TradeJson<'a>>,
}

#[derive(Deserialize)]
#[allow(non_snake_case, reason = "Bybit's keys")]
struct TradeJson<'a> {
    T: u64,
    #[serde(borrow)]
    s: &'a str,
    #[serde(borrow)]
    S: &'a str,
    #[serde(borrow)]
    v: &'a str,
    #[serde(borrow)]
    p: &'a str,
    #[serde(borrow)]
    i: &'a str,
    seq: u64,
}

fn decimal(text: &str) -> Decimal {
    Decimal::from_str(text).expect("a decimal")
}

/// barter's read of both messages must be serde_json's, value for value.
fn check(trades: &[u8]) {
    let barter: BybitOrderBookMessage = serde_json::from_slice(BOOK_DELTA).expect("barter: book");
    let plain: BookJson<'_> = serde_json::from_slice(BOOK_DELTA).expect("serde_json: book");
    assert_eq!(barter.data.update_id, plain.data.u);
    assert_eq!(barter.data.sequence, plain.data.seq);
    assert_eq!(barter.time.timestamp_millis() as u64, plain.ts);
    for (theirs, ours) in [
        (&barter.data.bids, &plain.data.b),
        (&barter.data.asks, &plain.data.a),
    ] {
        assert_eq!(theirs.len(), ours.len());
        for (level, [price, size]) in theirs.iter().zip(ours) {
            assert_eq!((level.price, level.amount), (decimal(price), decimal(size)));
        }
    }
    let barter: BybitTrade = serde_json::from_slice(trades).expect("barter: trades");
    let plain: TradesJson<'_> = serde_json::from_slice(trades).expect("serde_json: trades");
    assert_eq!(barter.time.timestamp_millis() as u64, plain.ts);
    assert_eq!(barter.data.len(), plain.data.len());
    for (theirs, ours) in barter.data.iter().zip(&plain.data) {
        assert_eq!(theirs.time.timestamp_millis() as u64, ours.T);
        assert_eq!(theirs.price, ours.p.parse::<f64>().expect("a price"));
        assert_eq!(theirs.amount, ours.v.parse::<f64>().expect("a size"));
        assert_eq!(
            (theirs.id.as_str(), theirs.market.as_str()),
            (ours.i, ours.s)
        );
    }
}

/// The median over 31 samples of 20,000 decodes: ns per message.
fn median_ns(mut decode: impl FnMut()) -> f64 {
    const ITERATIONS: u32 = 20_000;
    for _ in 0..ITERATIONS {
        decode();
    }
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ITERATIONS {
                decode();
            }
            start.elapsed().as_nanos() as f64 / f64::from(ITERATIONS)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let trades = trade_batch();
    check(&trades);
    println!("message | barter | serde_json | barter / serde_json (ns per message, medians)");
    let book_barter = median_ns(|| {
        let message: BybitOrderBookMessage =
            serde_json::from_slice(black_box(BOOK_DELTA)).expect("book");
        black_box(message);
    });
    let book_plain = median_ns(|| {
        let message: BookJson<'_> = serde_json::from_slice(black_box(BOOK_DELTA)).expect("book");
        black_box((message.topic, message.kind, message.cts, message.data.s));
        black_box(message);
    });
    println!(
        "orderbook delta (12 levels) | {book_barter:.1} | {book_plain:.1} | {:.2}",
        book_barter / book_plain
    );
    let trades_barter = median_ns(|| {
        let message: BybitTrade = serde_json::from_slice(black_box(&trades)).expect("trades");
        black_box(message);
    });
    let trades_plain = median_ns(|| {
        let message: TradesJson<'_> = serde_json::from_slice(black_box(&trades)).expect("trades");
        black_box(message.topic);
        for row in &message.data {
            black_box((row.s, row.S, row.i, row.p, row.v, row.seq));
        }
        black_box(message);
    });
    println!(
        "trade batch (10 trades) | {trades_barter:.1} | {trades_plain:.1} | {:.2}",
        trades_barter / trades_plain
    );
}
