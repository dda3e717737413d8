//! Decoding Binance Spot JSON messages: tickwire's Spot decoder against `serde_json`, per message
//! type, on the real Spot capture (`../shared/data/binance-spot/btcusdt_20240808.gz`; the bench
//! prints a note and does nothing without it).
//!
//! Every message of a type (28,040 bookTicker, 3,451 depthUpdate, 9,757 trade), laid end to end
//! in one buffer, is decoded once per iteration; throughput is in messages. The decoders:
//!
//! - `tickwire`: `venue::binance_spot::decode::decode`, and for depth the iteration of every
//!   level; prices and quantities come out as `Fixed` integers.
//! - `serde_json`: `serde_json::from_slice` into `#[derive(Deserialize)]` structs with borrowed
//!   `&str` fields, the wrapper's `data` typed; decimals stay strings, levels go into a
//!   `Vec<[&str; 2]>`.
//! - `serde_json+fixed`: the same, then every decimal through `Fixed::parse`, so that its output
//!   equals tickwire's.
//!
//! Before timing, both peers' output is compared with tickwire's for every message (ids, times,
//! symbol, every decimal as `Fixed`, every level); the bench panics on the first disagreement.
//! Run with `cargo bench --bench binance_spot_decode`.

use criterion::{criterion_group, Criterion, Throughput};
use serde::Deserialize;
use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;
use tickwire::fixed::Fixed;
use tickwire::venue::binance_spot::decode::{decode, Message};

/// The messages of one type, end to end, with where each one ends.
struct Corpus {
    name: &'static str,
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Corpus {
    fn new(name: &'static str) -> Corpus {
        Corpus {
            name,
            bytes: Vec::new(),
            ends: Vec::new(),
        }
    }

    fn messages(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }
}

fn load() -> Option<[Corpus; 3]> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/binance-spot/btcusdt_20240808.gz");
    let Ok(file) = std::fs::File::open(&path) else {
        eprintln!(
            "binance_spot_decode bench SKIPPED: {} is not here; it needs the real capture",
            path.display()
        );
        return None;
    };
    let mut corpora = [
        Corpus::new("book_ticker"),
        Corpus::new("depth_update"),
        Corpus::new("trade"),
    ];
    for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let line = line.expect("capture line");
        let (_recv_ns, json) = line.split_once(' ').expect("<recv ns> <json>");
        let index = if json.contains("@bookTicker\"") {
            0
        } else if json.contains("@depth@100ms\"") {
            1
        } else if json.contains("@trade\"") {
            2
        } else {
            // The capture's one REST depth snapshot.
            continue;
        };
        let corpus = &mut corpora[index];
        corpus.bytes.extend_from_slice(json.as_bytes());
        corpus.ends.push(corpus.bytes.len());
    }
    Some(corpora)
}

#[derive(Deserialize)]
struct Wrapper<'a, T> {
    #[serde(borrow)]
    stream: &'a str,
    data: T,
}

/// Spot's bookTicker: no event type, no times.
#[derive(Deserialize)]
struct BookTickerJson<'a> {
    #[serde(rename = "u")]
    update_id: u64,
    #[serde(rename = "s")]
    symbol: &'a str,
    #[serde(rename = "b")]
    bid_px: &'a str,
    #[serde(rename = "B")]
    bid_qty: &'a str,
    #[serde(rename = "a")]
    ask_px: &'a str,
    #[serde(rename = "A")]
    ask_qty: &'a str,
}

/// Spot's depthUpdate: no `T`, no `pu`.
#[derive(Deserialize)]
struct DepthJson<'a> {
    #[serde(rename = "E")]
    event_time_ms: u64,
    #[serde(rename = "s")]
    symbol: &'a str,
    #[serde(rename = "U")]
    first_update_id: u64,
    #[serde(rename = "u")]
    final_update_id: u64,
    #[serde(rename = "b", borrow)]
    bids: Vec<[&'a str; 2]>,
    #[serde(rename = "a", borrow)]
    asks: Vec<[&'a str; 2]>,
}

#[derive(Deserialize)]
struct TradeJson<'a> {
    #[serde(rename = "E")]
    event_time_ms: u64,
    #[serde(rename = "T")]
    trade_time_ms: u64,
    #[serde(rename = "s")]
    symbol: &'a str,
    #[serde(rename = "t")]
    trade_id: u64,
    #[serde(rename = "p")]
    price: &'a str,
    #[serde(rename = "q")]
    qty: &'a str,
    #[serde(rename = "m")]
    buyer_is_maker: bool,
}

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).expect("a venue decimal")
}

/// What both decoders must agree on: stream, symbol, integers, decimals as `Fixed`, the flag.
#[derive(Debug, PartialEq)]
struct Canonical<'a> {
    stream: &'a [u8],
    symbol: &'a [u8],
    integers: Vec<u64>,
    decimals: Vec<Fixed>,
    flag: Option<bool>,
}

fn canonical_tickwire(message: &[u8]) -> Canonical<'_> {
    match decode(message).expect("every capture message decodes") {
        Message::BookTicker(m) => Canonical {
            stream: m.stream.unwrap_or_default(),
            symbol: m.symbol,
            integers: vec![m.update_id],
            decimals: vec![m.bid_px, m.bid_qty, m.ask_px, m.ask_qty],
            flag: None,
        },
        Message::Depth(m) => Canonical {
            stream: m.stream.unwrap_or_default(),
            symbol: m.symbol,
            integers: vec![m.event_time_ms, m.first_update_id, m.final_update_id],
            decimals: m
                .bids
                .iter()
                .chain(m.asks.iter())
                .flat_map(|(price, qty)| [price, qty])
                .collect(),
            flag: None,
        },
        Message::Trade(m) => Canonical {
            stream: m.stream.unwrap_or_default(),
            symbol: m.symbol,
            integers: vec![m.event_time_ms, m.trade_time_ms, m.trade_id],
            decimals: vec![m.price, m.qty],
            flag: Some(m.buyer_is_maker),
        },
        other => panic!("not in the corpora: {other:?}"),
    }
}

fn canonical_serde<'a>(corpus: &str, message: &'a [u8]) -> Canonical<'a> {
    match corpus {
        "book_ticker" => {
            let m: Wrapper<BookTickerJson> = serde_json::from_slice(message).expect("parse");
            Canonical {
                stream: m.stream.as_bytes(),
                symbol: m.data.symbol.as_bytes(),
                integers: vec![m.data.update_id],
                decimals: [m.data.bid_px, m.data.bid_qty, m.data.ask_px, m.data.ask_qty]
                    .map(fixed)
                    .to_vec(),
                flag: None,
            }
        }
        "depth_update" => {
            let m: Wrapper<DepthJson> = serde_json::from_slice(message).expect("parse");
            Canonical {
                stream: m.stream.as_bytes(),
                symbol: m.data.symbol.as_bytes(),
                integers: vec![
                    m.data.event_time_ms,
                    m.data.first_update_id,
                    m.data.final_update_id,
                ],
                decimals: m
                    .data
                    .bids
                    .iter()
                    .chain(&m.data.asks)
                    .flat_map(|pair| pair.map(fixed))
                    .collect(),
                flag: None,
            }
        }
        _ => {
            let m: Wrapper<TradeJson> = serde_json::from_slice(message).expect("parse");
            Canonical {
                stream: m.stream.as_bytes(),
                symbol: m.data.symbol.as_bytes(),
                integers: vec![m.data.event_time_ms, m.data.trade_time_ms, m.data.trade_id],
                decimals: vec![fixed(m.data.price), fixed(m.data.qty)],
                flag: Some(m.data.buyer_is_maker),
            }
        }
    }
}

fn tickwire_all(corpus: &Corpus) -> i64 {
    let mut checksum = 0i64;
    for message in corpus.messages() {
        match decode(black_box(message)) {
            Ok(Message::BookTicker(m)) => checksum ^= m.bid_px.raw() ^ m.ask_px.raw(),
            Ok(Message::Trade(m)) => checksum ^= m.price.raw() ^ m.qty.raw(),
            Ok(Message::Depth(m)) => {
                for (price, qty) in m.bids.iter().chain(m.asks.iter()) {
                    checksum = checksum.wrapping_add(price.raw() ^ qty.raw());
                }
            }
            _ => checksum = checksum.wrapping_add(1),
        }
    }
    checksum
}

fn serde_all(corpus: &Corpus, with_fixed: bool) -> i64 {
    let mut checksum = 0i64;
    for message in corpus.messages() {
        let message = black_box(message);
        checksum ^= match corpus.name {
            "book_ticker" => {
                let m: Wrapper<BookTickerJson> = serde_json::from_slice(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    fixed(m.data.bid_px).raw()
                        ^ fixed(m.data.bid_qty).raw()
                        ^ fixed(m.data.ask_px).raw()
                        ^ fixed(m.data.ask_qty).raw()
                } else {
                    m.data.update_id as i64
                }
            }
            "depth_update" => {
                let m: Wrapper<DepthJson> = serde_json::from_slice(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    let mut sum = 0i64;
                    for [price, qty] in m.data.bids.iter().chain(&m.data.asks) {
                        sum = sum.wrapping_add(fixed(price).raw() ^ fixed(qty).raw());
                    }
                    sum
                } else {
                    (m.data.bids.len() ^ m.data.asks.len()) as i64
                }
            }
            _ => {
                let m: Wrapper<TradeJson> = serde_json::from_slice(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    fixed(m.data.price).raw() ^ fixed(m.data.qty).raw()
                } else {
                    m.data.trade_id as i64
                }
            }
        };
    }
    checksum
}

fn binance_spot_decode(c: &mut Criterion) {
    let Some(corpora) = load() else {
        return;
    };
    for corpus in &corpora {
        for (index, message) in corpus.messages().enumerate() {
            assert_eq!(
                canonical_tickwire(message),
                canonical_serde(corpus.name, message),
                "{} message {index} disagrees",
                corpus.name
            );
        }
        eprintln!(
            "binance_spot_decode: {} {} messages ({} bytes): serde_json agrees with tickwire",
            corpus.ends.len(),
            corpus.name,
            corpus.bytes.len()
        );
    }
    for corpus in &corpora {
        let mut group = c.benchmark_group(format!("binance_spot_decode/{}", corpus.name));
        group.throughput(Throughput::Elements(corpus.ends.len() as u64));
        group.sample_size(20);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
        group.bench_function("tickwire", |b| b.iter(|| tickwire_all(corpus)));
        group.bench_function("serde_json", |b| b.iter(|| serde_all(corpus, false)));
        group.bench_function("serde_json+fixed", |b| b.iter(|| serde_all(corpus, true)));
        group.finish();
    }
}

criterion_group!(benches, binance_spot_decode);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
