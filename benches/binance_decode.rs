//! Decoding Binance USD-M messages: tickwire's decoder against the JSON parsers a Rust trading
//! stack would use, per message type, on the real capture
//! (`../shared/data/binance-futures/btcusdt_20240808.gz`; the bench prints a note and does
//! nothing without it).
//!
//! Every message of a type (66,089 bookTicker, 6,551 depthUpdate, 21,313 trade), laid end to end
//! in one buffer, is decoded once per iteration; throughput is in messages, so ns/message is
//! one over it. The decoders:
//!
//! - `tickwire`: `venue::binance::decode::decode`, and for depth the iteration of every level.
//!   Prices and quantities come out as `Fixed` integers.
//! - `serde_json`: `serde_json::from_slice` into `#[derive(Deserialize)]` structs with borrowed
//!   `&str` fields, the wrapper's `data` typed: the peer the issue names. Decimals stay strings
//!   and depth levels go into a `Vec<[&str; 2]>`, as such code usually does.
//! - `serde_json+fixed`: the same, then every decimal string through `Fixed::parse`, so the
//!   output equals tickwire's.
//! - `sonic_rs`: `sonic_rs::from_slice` into the same structs. Built without
//!   `-C target-cpu=native` like the rest of the crate, so it runs its portable code, not its
//!   AVX2 paths.
//! - `simd_json`: `simd_json::serde::from_slice_with_buffers` into the same structs, with one
//!   reused `Buffers`. simd-json parses in place and needs a mutable copy of the input: each
//!   iteration's copy of the buffer is made in Criterion's untimed setup (`iter_batched`), so
//!   the copy is not in the number. It picks its SIMD level at run time.
//!
//! Before timing, every decoder's output is compared with tickwire's for every message (update
//! ids, times, symbol, each decimal parsed to `Fixed`, every depth level); the bench panics on
//! the first disagreement. Run with `cargo bench --bench binance_decode`.
//!
//! Wall-clock numbers on a shared VM are noisy; instruction counts are not. With
//! `BINANCE_DECODE_PASS=<decoder>:<corpus>` set (decoder `tickwire`, `serde_json`,
//! `serde_json+fixed`, `sonic_rs`; corpus `book_ticker`, `depth_update`, `trade`) the binary skips
//! Criterion and runs one pass of that decoder over that corpus inside `measured_pass`, for
//! callgrind to count:
//!
//! ```text
//! cargo bench --bench binance_decode --no-run   # prints the binary's path
//! BINANCE_DECODE_PASS=tickwire:book_ticker valgrind --tool=callgrind \
//!     --toggle-collect='*measured_pass*' target/release/deps/binance_decode-<hash>
//! ```
//!
//! and divide the collected instructions (`Ir`) by the message count it prints.

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use serde::Deserialize;
use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;
use tickwire::fixed::Fixed;
use tickwire::venue::binance::decode::{decode, Message};

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

    fn push(&mut self, message: &[u8]) {
        self.bytes.extend_from_slice(message);
        self.ends.push(self.bytes.len());
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
        .join("../shared/data/binance-futures/btcusdt_20240808.gz");
    let Ok(file) = std::fs::File::open(&path) else {
        eprintln!(
            "binance_decode bench SKIPPED: {} is not here; it needs the real capture",
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
        } else if json.contains("@depth@0ms\"") {
            1
        } else if json.contains("@trade\"") {
            2
        } else {
            // The capture's one REST depth snapshot.
            continue;
        };
        corpora[index].push(json.as_bytes());
    }
    Some(corpora)
}

// ---- The peers' typed, borrowed structs (shared by serde_json, sonic-rs and simd-json) ----

#[derive(Deserialize)]
struct Wrapper<'a, T> {
    #[serde(borrow)]
    stream: &'a str,
    data: T,
}

#[derive(Deserialize)]
struct BookTickerJson<'a> {
    #[serde(rename = "e")]
    event_type: &'a str,
    #[serde(rename = "u")]
    update_id: u64,
    #[serde(rename = "E")]
    event_time_ms: u64,
    #[serde(rename = "T")]
    transaction_time_ms: u64,
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

#[derive(Deserialize)]
struct DepthJson<'a> {
    #[serde(rename = "e")]
    event_type: &'a str,
    #[serde(rename = "E")]
    event_time_ms: u64,
    #[serde(rename = "T")]
    transaction_time_ms: u64,
    #[serde(rename = "s")]
    symbol: &'a str,
    #[serde(rename = "U")]
    first_update_id: u64,
    #[serde(rename = "u")]
    final_update_id: u64,
    #[serde(rename = "pu")]
    prev_final_update_id: u64,
    #[serde(rename = "b", borrow)]
    bids: Vec<[&'a str; 2]>,
    #[serde(rename = "a", borrow)]
    asks: Vec<[&'a str; 2]>,
}

#[derive(Deserialize)]
struct TradeJson<'a> {
    #[serde(rename = "e")]
    event_type: &'a str,
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
    #[serde(rename = "X")]
    _execution_type: &'a str,
    #[serde(rename = "m")]
    buyer_is_maker: bool,
}

// ---- One comparable form of every decoder's output ----

/// What every decoder must agree on: integers, symbol and stream, decimals as `Fixed`.
#[derive(Debug, PartialEq)]
struct Canonical {
    stream: String,
    event_type: String,
    symbol: String,
    integers: Vec<u64>,
    decimals: Vec<Fixed>,
    flag: Option<bool>,
}

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

fn canonical_tickwire(message: &[u8]) -> Canonical {
    let decoded = decode(message).unwrap_or_else(|error| panic!("tickwire: {error}"));
    let stream = text(decoded.stream().expect("wrapped"));
    match decoded {
        Message::BookTicker(m) => Canonical {
            stream,
            event_type: "bookTicker".into(),
            symbol: text(m.symbol),
            integers: vec![m.update_id, m.event_time_ms, m.transaction_time_ms],
            decimals: vec![m.bid_px, m.bid_qty, m.ask_px, m.ask_qty],
            flag: None,
        },
        Message::Depth(m) => Canonical {
            stream,
            event_type: "depthUpdate".into(),
            symbol: text(m.symbol),
            integers: vec![
                m.first_update_id,
                m.final_update_id,
                m.prev_final_update_id,
                m.event_time_ms,
                m.transaction_time_ms,
                m.bids.len() as u64,
                m.asks.len() as u64,
            ],
            decimals: m
                .bids
                .iter()
                .chain(m.asks.iter())
                .flat_map(|(price, qty)| [price, qty])
                .collect(),
            flag: None,
        },
        Message::Trade(m) => Canonical {
            stream,
            event_type: "trade".into(),
            symbol: text(m.symbol),
            integers: vec![m.trade_id, m.event_time_ms, m.trade_time_ms],
            decimals: vec![m.price, m.qty],
            flag: Some(m.buyer_is_maker),
        },
        other => panic!("unexpected {other:?}"),
    }
}

fn canonical_book_ticker(message: &Wrapper<'_, BookTickerJson<'_>>) -> Canonical {
    let m = &message.data;
    Canonical {
        stream: message.stream.into(),
        event_type: m.event_type.into(),
        symbol: m.symbol.into(),
        integers: vec![m.update_id, m.event_time_ms, m.transaction_time_ms],
        decimals: [m.bid_px, m.bid_qty, m.ask_px, m.ask_qty]
            .into_iter()
            .map(fixed)
            .collect(),
        flag: None,
    }
}

fn canonical_depth(message: &Wrapper<'_, DepthJson<'_>>) -> Canonical {
    let m = &message.data;
    Canonical {
        stream: message.stream.into(),
        event_type: m.event_type.into(),
        symbol: m.symbol.into(),
        integers: vec![
            m.first_update_id,
            m.final_update_id,
            m.prev_final_update_id,
            m.event_time_ms,
            m.transaction_time_ms,
            m.bids.len() as u64,
            m.asks.len() as u64,
        ],
        decimals: m
            .bids
            .iter()
            .chain(&m.asks)
            .flatten()
            .copied()
            .map(fixed)
            .collect(),
        flag: None,
    }
}

fn canonical_trade(message: &Wrapper<'_, TradeJson<'_>>) -> Canonical {
    let m = &message.data;
    Canonical {
        stream: message.stream.into(),
        event_type: m.event_type.into(),
        symbol: m.symbol.into(),
        integers: vec![m.trade_id, m.event_time_ms, m.trade_time_ms],
        decimals: vec![fixed(m.price), fixed(m.qty)],
        flag: Some(m.buyer_is_maker),
    }
}

/// Decodes `message` with every peer and panics unless each agrees with tickwire.
fn check_agreement(corpus: &Corpus, message: &[u8], index: usize) {
    let expected = canonical_tickwire(message);
    let context = |peer: &str| {
        format!(
            "{peer} disagrees with tickwire on {} message {index}: {}",
            corpus.name,
            String::from_utf8_lossy(&message[..message.len().min(200)])
        )
    };
    macro_rules! compare {
        ($json:ty, $canonical:ident) => {{
            let parsed: $json = serde_json::from_slice(message).expect("serde_json");
            assert_eq!($canonical(&parsed), expected, "{}", context("serde_json"));
            let parsed: $json = sonic_rs::from_slice(message).expect("sonic_rs");
            assert_eq!($canonical(&parsed), expected, "{}", context("sonic_rs"));
            let mut copy = message.to_vec();
            let parsed: $json = simd_json::serde::from_slice(&mut copy).expect("simd_json");
            assert_eq!($canonical(&parsed), expected, "{}", context("simd_json"));
        }};
    }
    match corpus.name {
        "book_ticker" => compare!(Wrapper<BookTickerJson>, canonical_book_ticker),
        "depth_update" => compare!(Wrapper<DepthJson>, canonical_depth),
        _ => compare!(Wrapper<TradeJson>, canonical_trade),
    }
}

// ---- The timed loops: each returns a value derived from every message ----

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

/// Runs `parse` on every message of the corpus and folds what it returns.
fn peer_all<'a>(corpus: &'a Corpus, parse: impl Fn(&'a [u8]) -> usize) -> usize {
    corpus
        .messages()
        .fold(0usize, |acc, message| acc ^ parse(black_box(message)))
}

/// The serde-based peers differ only in the entry point; `$from` is `serde_json::from_slice`
/// or `sonic_rs::from_slice`.
macro_rules! typed_peer {
    ($from:path, $corpus:expr, $with_fixed:expr) => {{
        let corpus: &Corpus = $corpus;
        let with_fixed: bool = $with_fixed;
        match corpus.name {
            "book_ticker" => peer_all(corpus, |message| {
                let m: Wrapper<BookTickerJson> = $from(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    let raw = fixed(m.data.bid_px).raw()
                        ^ fixed(m.data.bid_qty).raw()
                        ^ fixed(m.data.ask_px).raw()
                        ^ fixed(m.data.ask_qty).raw();
                    raw as usize
                } else {
                    m.data.update_id as usize
                }
            }),
            "depth_update" => peer_all(corpus, |message| {
                let m: Wrapper<DepthJson> = $from(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    let mut sum = 0i64;
                    for [price, qty] in m.data.bids.iter().chain(&m.data.asks) {
                        sum = sum.wrapping_add(fixed(price).raw() ^ fixed(qty).raw());
                    }
                    sum as usize
                } else {
                    m.data.bids.len() ^ m.data.asks.len()
                }
            }),
            _ => peer_all(corpus, |message| {
                let m: Wrapper<TradeJson> = $from(message).expect("parse");
                let m = black_box(m);
                if with_fixed {
                    (fixed(m.data.price).raw() ^ fixed(m.data.qty).raw()) as usize
                } else {
                    m.data.trade_id as usize
                }
            }),
        }
    }};
}

/// simd-json parses in place: `bytes` is this iteration's private copy of the corpus.
fn simd_json_all(corpus: &Corpus, bytes: &mut [u8], buffers: &mut simd_json::Buffers) -> usize {
    let mut rest = bytes;
    let mut start = 0;
    let mut acc = 0usize;
    for &end in &corpus.ends {
        let (message, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
        rest = tail;
        start = end;
        acc ^= match corpus.name {
            "book_ticker" => {
                let m: Wrapper<BookTickerJson> =
                    simd_json::serde::from_slice_with_buffers(message, buffers).expect("parse");
                black_box(m).data.update_id as usize
            }
            "depth_update" => {
                let m: Wrapper<DepthJson> =
                    simd_json::serde::from_slice_with_buffers(message, buffers).expect("parse");
                let m = black_box(m);
                m.data.bids.len() ^ m.data.asks.len()
            }
            _ => {
                let m: Wrapper<TradeJson> =
                    simd_json::serde::from_slice_with_buffers(message, buffers).expect("parse");
                black_box(m).data.trade_id as usize
            }
        };
    }
    acc
}

fn binance_decode(c: &mut Criterion) {
    let Some(corpora) = load() else {
        return;
    };
    for corpus in &corpora {
        for (index, message) in corpus.messages().enumerate() {
            check_agreement(corpus, message, index);
        }
        eprintln!(
            "binance_decode: {} {} messages ({} bytes): all decoders agree with tickwire",
            corpus.ends.len(),
            corpus.name,
            corpus.bytes.len()
        );
    }
    for corpus in &corpora {
        let mut group = c.benchmark_group(format!("binance_decode/{}", corpus.name));
        group.throughput(Throughput::Elements(corpus.ends.len() as u64));
        group.sample_size(20);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
        group.bench_function("tickwire", |b| b.iter(|| tickwire_all(corpus)));
        group.bench_function("serde_json", |b| {
            b.iter(|| typed_peer!(serde_json::from_slice, corpus, false))
        });
        group.bench_function("serde_json+fixed", |b| {
            b.iter(|| typed_peer!(serde_json::from_slice, corpus, true))
        });
        group.bench_function("sonic_rs", |b| {
            b.iter(|| typed_peer!(sonic_rs::from_slice, corpus, false))
        });
        let mut buffers = simd_json::Buffers::new(4096);
        group.bench_function("simd_json", |b| {
            b.iter_batched_ref(
                || corpus.bytes.clone(),
                |bytes| simd_json_all(corpus, bytes, &mut buffers),
                BatchSize::PerIteration,
            )
        });
        group.finish();
    }
}

/// One pass of `decoder` over `corpus`, not inlined so callgrind can count just this.
#[inline(never)]
fn measured_pass(decoder: &str, corpus: &Corpus) -> usize {
    match decoder {
        "tickwire" => tickwire_all(corpus) as usize,
        "serde_json" => typed_peer!(serde_json::from_slice, corpus, false),
        "serde_json+fixed" => typed_peer!(serde_json::from_slice, corpus, true),
        "sonic_rs" => typed_peer!(sonic_rs::from_slice, corpus, false),
        other => panic!("unknown decoder {other}"),
    }
}

/// `BINANCE_DECODE_PASS=<decoder>:<corpus>`: see the module documentation.
fn single_pass(spec: &str) {
    let Some(corpora) = load() else {
        return;
    };
    let (decoder, corpus_name) = spec.split_once(':').expect("<decoder>:<corpus>");
    let corpus = corpora
        .iter()
        .find(|corpus| corpus.name == corpus_name)
        .unwrap_or_else(|| panic!("unknown corpus {corpus_name}"));
    let checksum = measured_pass(decoder, black_box(corpus));
    eprintln!(
        "binance_decode: one {decoder} pass over {} {} messages (checksum {checksum})",
        corpus.ends.len(),
        corpus.name
    );
}

criterion_group!(benches, binance_decode);

fn main() {
    if let Ok(spec) = std::env::var("BINANCE_DECODE_PASS") {
        single_pass(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
