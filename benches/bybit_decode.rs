//! Decoding Bybit v5 public messages: tickwire's decoder against `serde_json`, per message, for
//! the three messages a linear feed sends most: an orderbook delta (the orderbook page's own
//! example, 12 levels), a trade batch (10 trades, linear's UUID ids) and a ticker delta (three
//! changed fields).
//!
//! - `tickwire`: `venue::bybit::decode::decode` into its reused `Scratch`, then every level, row
//!   or field read; decimals come out as `Fixed`.
//! - `serde_json`: `serde_json::from_slice` into `#[derive(Deserialize)]` structs with borrowed
//!   `&str` fields (levels into a `Vec<[&str; 2]>`, trades into a `Vec` of structs, the ticker's
//!   fields `Option<&str>`), decimals left as strings.
//! - `serde_json+fixed`: the same, then every decimal through `Fixed::parse`, so that its output
//!   equals tickwire's.
//!
//! Before timing, every peer's output is compared with tickwire's (times, ids, every decimal as
//! `Fixed`); the bench panics on a disagreement. The goal (issue 34): tickwire at most a third of
//! `serde_json`'s time. Run with `cargo bench --bench bybit_decode`.
//!
//! For instruction counts, `BYBIT_PASS=<decoder>/<message>:<iterations>` skips Criterion, checks
//! the messages as above and runs one decoder (`tickwire`, `serde_json`, `serde_json+fixed`) on
//! one message (`orderbook_delta`, `trade_batch`, `ticker_delta`) that many times inside
//! `measured_pass`, after a warm-up iteration:
//!
//! ```text
//! cargo bench --bench bybit_decode --no-run   # prints the binary's path
//! BYBIT_PASS=tickwire/trade_batch:100000 valgrind --tool=callgrind \
//!     --toggle-collect='*measured_pass*' target/release/deps/bybit_decode-<hash>
//! ```

use criterion::{criterion_group, Criterion, Throughput};
use serde::Deserialize;
use std::hint::black_box;
use std::time::Duration;
use tickwire::fixed::Fixed;
use tickwire::venue::bybit::decode::{decode, Field, Message, Scratch};

/// The orderbook page's delta example, its whitespace taken out.
const BOOK_DELTA: &[u8] = br#"{"topic":"orderbook.50.BTCUSDT","type":"delta","ts":1687940967466,"data":{"s":"BTCUSDT","b":[["30247.20","30.028"],["30245.40","0.224"],["30242.10","1.593"],["30240.30","1.305"],["30240.00","0"]],"a":[["30248.70","0"],["30249.30","0.892"],["30249.50","1.778"],["30249.60","0"],["30251.90","2.947"],["30252.20","0.659"],["30252.50","4.591"]],"u":177400507,"seq":66544703342},"cts":1687940967464}"#;

/// A ticker delta of three changed fields, in the linear ticker's key order.
const TICKER_DELTA: &[u8] = br#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","markPrice":"66660.10","bid1Price":"66666.50","bid1Size":"23789.165"},"cs":9532239430,"ts":1760325052730}"#;

/// Ten trades in the trade page's shape (its example's fields, linear's UUID ids).
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

fn fixed(text: &str) -> Fixed {
    Fixed::parse(text.as_bytes()).expect("a decimal")
}

/// What a decoder read, reduced to the values both must agree on.
fn tickwire_read(message: &[u8], scratch: &mut Scratch) -> Vec<i64> {
    let mut out = Vec::new();
    match decode(message, scratch).expect("decodes") {
        Message::Book {
            ts_ms, update_id, ..
        } => {
            out.push(ts_ms as i64);
            out.push(update_id as i64);
            for (price, size) in scratch.bids.iter().chain(&scratch.asks) {
                out.push(price.raw());
                out.push(size.raw());
            }
        }
        Message::Trades { ts_ms, .. } => {
            out.push(ts_ms as i64);
            for row in &scratch.rows {
                out.extend([
                    row.time_ms as i64,
                    row.price.raw(),
                    row.size.raw(),
                    row.seq as i64,
                ]);
            }
        }
        Message::Ticker { ts_ms, fields, .. } => {
            out.push(ts_ms as i64);
            for field in [fields.mark_price, fields.bid1_price, fields.bid1_size] {
                if let Field::Value(value) = field {
                    out.push(value.raw());
                }
            }
        }
        other => panic!("unexpected {other:?}"),
    }
    out
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

#[derive(Deserialize)]
struct TickerJson<'a> {
    #[serde(borrow)]
    topic: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    ts: u64,
    #[serde(borrow)]
    data: TickerData<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TickerData<'a> {
    #[serde(borrow)]
    symbol: &'a str,
    #[serde(borrow, default)]
    mark_price: Option<&'a str>,
    #[serde(borrow, default)]
    bid1_price: Option<&'a str>,
    #[serde(borrow, default)]
    bid1_size: Option<&'a str>,
}

#[derive(Clone, Copy)]
enum Kind {
    Book,
    Trades,
    Ticker,
}

/// `serde_json`'s read; with `with_fixed`, every decimal through `Fixed` (what is compared).
fn serde_read(kind: Kind, message: &[u8], with_fixed: bool, out: &mut Vec<i64>) {
    out.clear();
    match kind {
        Kind::Book => {
            let m: BookJson<'_> = serde_json::from_slice(message).expect("parse");
            let m = black_box(m);
            black_box((m.topic, m.kind, m.cts, m.data.s, m.data.seq));
            out.push(m.ts as i64);
            out.push(m.data.u as i64);
            for [price, size] in m.data.b.iter().chain(&m.data.a) {
                if with_fixed {
                    out.push(fixed(price).raw());
                    out.push(fixed(size).raw());
                } else {
                    black_box((price, size));
                }
            }
        }
        Kind::Trades => {
            let m: TradesJson<'_> = serde_json::from_slice(message).expect("parse");
            let m = black_box(m);
            black_box(m.topic);
            out.push(m.ts as i64);
            for row in &m.data {
                black_box((row.s, row.S, row.i));
                if with_fixed {
                    out.extend([
                        row.T as i64,
                        fixed(row.p).raw(),
                        fixed(row.v).raw(),
                        row.seq as i64,
                    ]);
                } else {
                    black_box((row.p, row.v));
                }
            }
        }
        Kind::Ticker => {
            let m: TickerJson<'_> = serde_json::from_slice(message).expect("parse");
            let m = black_box(m);
            black_box((m.topic, m.kind, m.data.symbol));
            out.push(m.ts as i64);
            for field in [m.data.mark_price, m.data.bid1_price, m.data.bid1_size]
                .into_iter()
                .flatten()
            {
                if with_fixed {
                    out.push(fixed(field).raw());
                } else {
                    black_box(field);
                }
            }
        }
    }
}

/// tickwire's timed read: decode, then every level or row folded into one number.
#[inline(always)]
fn tickwire_pass(message: &[u8], scratch: &mut Scratch) -> i64 {
    let mut sum = 0i64;
    match decode(black_box(message), scratch).expect("decodes") {
        Message::Book { update_id, .. } => {
            sum = update_id as i64;
            for (price, size) in scratch.bids.iter().chain(&scratch.asks) {
                sum = sum.wrapping_add(price.raw() ^ size.raw());
            }
        }
        Message::Trades { ts_ms, .. } => {
            sum = ts_ms as i64;
            for row in &scratch.rows {
                sum = sum.wrapping_add(row.price.raw() ^ row.size.raw() ^ row.id as i64);
            }
        }
        other => {
            black_box(other);
        }
    }
    black_box(sum)
}

/// The three messages, each checked: serde_json + `Fixed` must read what tickwire reads.
fn checked_messages(trades: &[u8]) -> [(&'static str, Kind, &[u8]); 3] {
    let messages: [(&str, Kind, &[u8]); 3] = [
        ("orderbook_delta", Kind::Book, BOOK_DELTA),
        ("trade_batch", Kind::Trades, trades),
        ("ticker_delta", Kind::Ticker, TICKER_DELTA),
    ];
    let mut scratch = Scratch::default();
    for (name, kind, message) in messages {
        let mut peer = Vec::new();
        serde_read(kind, message, true, &mut peer);
        assert_eq!(
            tickwire_read(message, &mut scratch),
            peer,
            "{name}: serde_json and tickwire disagree"
        );
    }
    messages
}

/// `iterations` decodes of one message by one decoder, for callgrind's `--toggle-collect`.
#[inline(never)]
fn measured_pass(decoder: &str, kind: Kind, message: &[u8], iterations: u64) {
    let mut scratch = Scratch::default();
    let mut out = Vec::with_capacity(64);
    match decoder {
        "tickwire" => {
            for _ in 0..iterations {
                tickwire_pass(message, &mut scratch);
            }
        }
        "serde_json" | "serde_json+fixed" => {
            let with_fixed = decoder == "serde_json+fixed";
            for _ in 0..iterations {
                serde_read(kind, black_box(message), with_fixed, &mut out);
            }
        }
        other => panic!("unknown decoder {other}"),
    }
}

/// `BYBIT_PASS=<decoder>/<message>:<iterations>`: see the module documentation.
fn single_pass(spec: &str) {
    let (name, iterations) = spec
        .split_once(':')
        .expect("<decoder>/<message>:<iterations>");
    let (decoder, wanted) = name.split_once('/').expect("<decoder>/<message>");
    let iterations: u64 = iterations.parse().expect("iterations");
    let trades = trade_batch();
    let messages = checked_messages(&trades);
    let (_, kind, message) = messages
        .into_iter()
        .find(|(message, _, _)| *message == wanted)
        .expect("orderbook_delta, trade_batch or ticker_delta");
    measured_pass(decoder, kind, message, 1);
    measured_pass(decoder, kind, message, iterations);
    eprintln!("bybit_decode: {iterations} iterations of {decoder} on {wanted}");
}

fn bybit_decode(c: &mut Criterion) {
    let trades = trade_batch();
    let messages = checked_messages(&trades);
    for (name, kind, message) in messages {
        let mut group = c.benchmark_group(format!("bybit_decode/{name}"));
        group.throughput(Throughput::Elements(1));
        group.sample_size(30);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        let mut scratch = Scratch::default();
        group.bench_function("tickwire", |b| {
            b.iter(|| tickwire_pass(message, &mut scratch))
        });
        let mut out = Vec::with_capacity(64);
        group.bench_function("serde_json", |b| {
            b.iter(|| serde_read(kind, black_box(message), false, &mut out))
        });
        group.bench_function("serde_json+fixed", |b| {
            b.iter(|| serde_read(kind, black_box(message), true, &mut out))
        });
        group.finish();
    }
}

criterion_group!(benches, bybit_decode);

fn main() {
    if let Ok(spec) = std::env::var("BYBIT_PASS") {
        single_pass(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
