//! Decoding Binance Spot SBE market data: tickwire's hand-written decoder
//! (`venue::binance_spot::sbe::decode`) per template, beside the SBE tool's generated decoder
//! (`binance-sbe-official`) and, for `bestBidAsk`, the JSON path the same event takes today
//! (`venue::binance::decode::decode` on the equivalent `bookTicker` JSON text).
//!
//! There is no Spot SBE capture, so each corpus is synthetic: 4,096 frames per template from a
//! seeded random walk (BTCUSDT-like prices with exponent -2, quantities with -8), encoded by the
//! official generated encoder, laid end to end; trades carry 1 to 3 trades per frame, diffs 1 to
//! 12 levels a side, depth20 20 a side. One Criterion iteration decodes every frame of a corpus
//! once, throughput is in frames, so ns/frame is one over it. Each decoder reads every field:
//!
//! - `tickwire`: `sbe::decode`, then every level or trade iterated; prices and quantities come
//!   out as `Fixed` (1e-9), times in ns, every decimal and length checked.
//! - `official`: the generated flyweight decoder: header, fields, groups (`advance`), symbol.
//!   It returns raw mantissas and exponents (no conversion to a fixed scale, no range checks),
//!   and it panics on a short frame instead of returning an error.
//! - `usdm_json` (bestBidAsk only): the same values as a USD-M `bookTicker` JSON message,
//!   decoded by tickwire's JSON decoder into the same `Fixed` values.
//!
//! Before timing, every frame is decoded by every decoder and compared with the values it was
//! encoded from (and the JSON decode with the SBE decode); the bench panics on the first
//! disagreement. Run with `cargo bench --bench binance_sbe`.

use binance_sbe_official::encode::{self, BestBidAsk, Depth, Trade, Trades};
use binance_sbe_official::{message_header_codec, MessageHeaderDecoder, ReadBuf};
use criterion::{criterion_group, Criterion, Throughput};
use std::hint::black_box;
use std::time::Duration;
use tickwire::fixed::Fixed;
use tickwire::venue::binance::decode as json;
use tickwire::venue::binance_spot::sbe::{self, decimal_to_fixed, Message};

const FRAMES: usize = 4_096;
const PRICE_EXPONENT: i8 = -2;
const QTY_EXPONENT: i8 = -8;

/// Frames end to end, with where each ends.
struct Corpus {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Corpus {
    fn new() -> Corpus {
        Corpus {
            bytes: Vec::new(),
            ends: Vec::new(),
        }
    }

    fn push(&mut self, frame: &[u8]) {
        self.bytes.extend_from_slice(frame);
        self.ends.push(self.bytes.len());
    }

    fn frames(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(0)
            .chain(self.ends.iter().copied())
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }
}

/// xorshift64: deterministic, no dependency.
struct Walk(u64);

impl Walk {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// A mantissa with exponent <= 0 as decimal text, as Binance's JSON writes it (`"61234.50"`).
fn decimal_text(mantissa: i64, exponent: i8) -> String {
    let digits = (-i32::from(exponent)) as usize;
    let text = format!("{:0width$}", mantissa.unsigned_abs(), width = digits + 1);
    let (whole, fraction) = text.split_at(text.len() - digits);
    let sign = if mantissa < 0 { "-" } else { "" };
    if digits == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
}

fn fixed(mantissa: i64, exponent: i8) -> Fixed {
    decimal_to_fixed(mantissa, exponent).expect("bench values fit")
}

/// A frame's bid and ask `(price, qty)` mantissas.
type BidsAsks = (Vec<(i64, i64)>, Vec<(i64, i64)>);

struct Corpora {
    best_bid_ask: Corpus,
    best_bid_ask_values: Vec<BestBidAsk<'static>>,
    book_ticker_json: Corpus,
    trades: Corpus,
    trade_values: Vec<Vec<Trade>>,
    depth_diff: Corpus,
    depth_diff_values: Vec<BidsAsks>,
    depth20: Corpus,
    depth20_values: Vec<BidsAsks>,
}

fn make() -> Corpora {
    let mut walk = Walk(0x5EED_0FB1_A5CE_5EED);
    let mut mid = 11_786_150i64; // 117,861.50 at exponent -2
    let mut corpora = Corpora {
        best_bid_ask: Corpus::new(),
        best_bid_ask_values: Vec::new(),
        book_ticker_json: Corpus::new(),
        trades: Corpus::new(),
        trade_values: Vec::new(),
        depth_diff: Corpus::new(),
        depth_diff_values: Vec::new(),
        depth20: Corpus::new(),
        depth20_values: Vec::new(),
    };
    let levels = |walk: &mut Walk, mid: i64, count: usize, step: i64| -> Vec<(i64, i64)> {
        (0..count as i64)
            .map(|i| (mid + step * (1 + i), walk.below(500_000_000)))
            .collect()
    };
    for index in 0..FRAMES as i64 {
        mid += walk.below(21) - 10;
        let time_us = 1_753_000_000_000_000 + index * 1_000;
        let update_id = 70_000_000_000 + index * 3;
        let values = BestBidAsk {
            event_time_us: time_us,
            book_update_id: update_id,
            price_exponent: PRICE_EXPONENT,
            qty_exponent: QTY_EXPONENT,
            bid_price: mid - 1,
            bid_qty: walk.below(2_000_000_000),
            ask_price: mid + 1,
            ask_qty: walk.below(2_000_000_000),
            symbol: "BTCUSDT",
        };
        corpora.best_bid_ask.push(&encode::best_bid_ask(&values));
        let json_text = format!(
            r#"{{"e":"bookTicker","u":{},"E":{},"T":{},"s":"BTCUSDT","b":"{}","B":"{}","a":"{}","A":"{}"}}"#,
            update_id,
            time_us / 1000,
            time_us / 1000,
            decimal_text(values.bid_price, PRICE_EXPONENT),
            decimal_text(values.bid_qty, QTY_EXPONENT),
            decimal_text(values.ask_price, PRICE_EXPONENT),
            decimal_text(values.ask_qty, QTY_EXPONENT),
        );
        corpora.book_ticker_json.push(json_text.as_bytes());
        corpora.best_bid_ask_values.push(values);

        let trades: Vec<Trade> = (0..1 + walk.below(3))
            .map(|i| Trade {
                id: 5_000_000_000 + index * 4 + i,
                price: mid + walk.below(3) - 1,
                qty: walk.below(100_000_000),
                is_buyer_maker: walk.below(2) == 0,
            })
            .collect();
        corpora.trades.push(&encode::trades(&Trades {
            event_time_us: time_us,
            transact_time_us: time_us - 3,
            price_exponent: PRICE_EXPONENT,
            qty_exponent: QTY_EXPONENT,
            trades: &trades,
            symbol: "BTCUSDT",
        }));
        corpora.trade_values.push(trades);

        let (bid_count, ask_count) = (1 + walk.below(12) as usize, 1 + walk.below(12) as usize);
        let bids = levels(&mut walk, mid, bid_count, -1);
        let asks = levels(&mut walk, mid, ask_count, 1);
        let depth = Depth {
            event_time_us: time_us,
            first_update_id: update_id,
            last_update_id: update_id + 2,
            price_exponent: PRICE_EXPONENT,
            qty_exponent: QTY_EXPONENT,
            bids: &bids,
            asks: &asks,
            symbol: "BTCUSDT",
        };
        corpora.depth_diff.push(&encode::depth_diff(&depth));
        corpora.depth_diff_values.push((bids.clone(), asks.clone()));

        let bids = levels(&mut walk, mid, 20, -1);
        let asks = levels(&mut walk, mid, 20, 1);
        corpora.depth20.push(&encode::depth_snapshot(&Depth {
            bids: &bids,
            asks: &asks,
            ..depth
        }));
        corpora.depth20_values.push((bids, asks));
    }
    corpora
}

// ---- tickwire's decoder: every field, every level ----

#[inline]
fn tickwire_frame(frame: &[u8]) -> i64 {
    match sbe::decode(frame) {
        Ok(Message::BestBidAsk(t)) => {
            t.bid_px.raw() ^ t.ask_qty.raw() ^ t.book_update_id as i64 ^ t.symbol.len() as i64
        }
        Ok(Message::Trades(t)) => t
            .trades
            .iter()
            .fold(t.transact_time_ns as i64, |acc, trade| {
                acc ^ trade.price.raw() ^ trade.qty.raw() ^ trade.trade_id as i64
            }),
        Ok(Message::DepthDiff(d)) => d
            .bids
            .iter()
            .chain(d.asks.iter())
            .fold(d.final_update_id as i64, |acc, (p, q)| {
                acc ^ p.raw() ^ q.raw()
            }),
        Ok(Message::DepthSnapshot(d)) => d
            .bids
            .iter()
            .chain(d.asks.iter())
            .fold(d.book_update_id as i64, |acc, (p, q)| {
                acc ^ p.raw() ^ q.raw()
            }),
        Err(error) => error.kind() as i64,
    }
}

fn tickwire_all(corpus: &Corpus) -> i64 {
    corpus
        .frames()
        .fold(0, |acc, frame| acc ^ tickwire_frame(black_box(frame)))
}

// ---- the official generated decoder: every field, every entry, the symbol ----

/// Decodes one frame with the generated decoder, calling `each(price, qty)` per value pair and
/// returning an id xor and the symbol's length.
#[inline]
fn official_frame(frame: &[u8], mut each: impl FnMut(i64, i64)) -> (i64, (i8, i8), usize) {
    use binance_sbe_official::best_bid_ask_stream_event_codec::decoder::BestBidAskStreamEventDecoder;
    use binance_sbe_official::depth_diff_stream_event_codec::decoder::DepthDiffStreamEventDecoder;
    use binance_sbe_official::depth_snapshot_stream_event_codec::decoder::DepthSnapshotStreamEventDecoder;
    use binance_sbe_official::trades_stream_event_codec::decoder::TradesStreamEventDecoder;
    let buf = ReadBuf::new(frame);
    let header = MessageHeaderDecoder::default().wrap(buf, 0);
    let symbol = |(offset, len): (usize, usize)| frame[offset..offset + len].len();
    match header.template_id() {
        10001 => {
            let mut message = BestBidAskStreamEventDecoder::default().header(header);
            each(message.bid_price(), message.bid_qty());
            each(message.ask_price(), message.ask_qty());
            let id = message.book_update_id() ^ message.event_time();
            let exponents = (message.price_exponent(), message.qty_exponent());
            (id, exponents, symbol(message.symbol_decoder()))
        }
        10000 => {
            let message = TradesStreamEventDecoder::default().header(header);
            let mut id = message.transact_time() ^ message.event_time();
            let exponents = (message.price_exponent(), message.qty_exponent());
            let mut trades = message.trades_decoder();
            while let Ok(Some(_)) = trades.advance() {
                id ^= trades.id() ^ trades.is_buyer_maker() as i64;
                each(trades.price(), trades.qty());
            }
            let mut message = trades.parent().expect("the group's parent");
            (id, exponents, symbol(message.symbol_decoder()))
        }
        10003 => {
            let message = DepthDiffStreamEventDecoder::default().header(header);
            let id = message.first_book_update_id() ^ message.last_book_update_id();
            let exponents = (message.price_exponent(), message.qty_exponent());
            let mut bids = message.bids_decoder();
            while let Ok(Some(_)) = bids.advance() {
                each(bids.price(), bids.qty());
            }
            let message = bids.parent().expect("the group's parent");
            let mut asks = message.asks_decoder();
            while let Ok(Some(_)) = asks.advance() {
                each(asks.price(), asks.qty());
            }
            let mut message = asks.parent().expect("the group's parent");
            (id, exponents, symbol(message.symbol_decoder()))
        }
        10002 => {
            let message = DepthSnapshotStreamEventDecoder::default().header(header);
            let id = message.book_update_id() ^ message.event_time();
            let exponents = (message.price_exponent(), message.qty_exponent());
            let mut bids = message.bids_decoder();
            while let Ok(Some(_)) = bids.advance() {
                each(bids.price(), bids.qty());
            }
            let message = bids.parent().expect("the group's parent");
            let mut asks = message.asks_decoder();
            while let Ok(Some(_)) = asks.advance() {
                each(asks.price(), asks.qty());
            }
            let mut message = asks.parent().expect("the group's parent");
            (id, exponents, symbol(message.symbol_decoder()))
        }
        other => panic!("template {other}"),
    }
}

fn official_all(corpus: &Corpus) -> i64 {
    corpus.frames().fold(0, |acc, frame| {
        let mut sum = 0i64;
        let (id, _, len) = official_frame(black_box(frame), |p, q| sum ^= p ^ q);
        acc ^ sum ^ id ^ len as i64
    })
}

// ---- the JSON path, bookTicker ----

fn json_all(corpus: &Corpus) -> i64 {
    corpus
        .frames()
        .fold(0, |acc, text| match json::decode(black_box(text)) {
            Ok(json::Message::BookTicker(t)) => {
                acc ^ t.bid_px.raw() ^ t.ask_qty.raw() ^ t.update_id as i64 ^ t.symbol.len() as i64
            }
            _ => acc ^ 1,
        })
}

// ---- checks before timing ----

fn check(corpora: &Corpora) {
    let want_levels = |levels: &[(i64, i64)]| -> Vec<(Fixed, Fixed)> {
        levels
            .iter()
            .map(|&(p, q)| (fixed(p, PRICE_EXPONENT), fixed(q, QTY_EXPONENT)))
            .collect()
    };
    for ((frame, values), text) in corpora
        .best_bid_ask
        .frames()
        .zip(&corpora.best_bid_ask_values)
        .zip(corpora.book_ticker_json.frames())
    {
        let Ok(Message::BestBidAsk(t)) = sbe::decode(frame) else {
            panic!("bestBidAsk does not decode");
        };
        let want = [
            fixed(values.bid_price, PRICE_EXPONENT),
            fixed(values.bid_qty, QTY_EXPONENT),
            fixed(values.ask_price, PRICE_EXPONENT),
            fixed(values.ask_qty, QTY_EXPONENT),
        ];
        assert_eq!([t.bid_px, t.bid_qty, t.ask_px, t.ask_qty], want);
        assert_eq!(t.book_update_id, values.book_update_id as u64);
        assert_eq!(t.event_time_ns, values.event_time_us as u64 * 1000);
        assert_eq!(t.symbol, b"BTCUSDT");
        let Ok(json::Message::BookTicker(j)) = json::decode(text) else {
            panic!("bookTicker JSON does not decode");
        };
        assert_eq!([j.bid_px, j.bid_qty, j.ask_px, j.ask_qty], want);
        assert_eq!(j.update_id, t.book_update_id);
        let mut seen = Vec::new();
        let (_, exponents, len) = official_frame(frame, |p, q| seen.push((p, q)));
        assert_eq!(
            seen,
            [
                (values.bid_price, values.bid_qty),
                (values.ask_price, values.ask_qty)
            ]
        );
        assert_eq!((exponents, len), ((PRICE_EXPONENT, QTY_EXPONENT), 7));
    }
    for (frame, trades) in corpora.trades.frames().zip(&corpora.trade_values) {
        let Ok(Message::Trades(t)) = sbe::decode(frame) else {
            panic!("trades do not decode");
        };
        let got: Vec<_> = t
            .trades
            .iter()
            .map(|e| (e.trade_id, e.price, e.qty, e.buyer_is_maker))
            .collect();
        let want: Vec<_> = trades
            .iter()
            .map(|e| {
                (
                    e.id as u64,
                    fixed(e.price, PRICE_EXPONENT),
                    fixed(e.qty, QTY_EXPONENT),
                    e.is_buyer_maker,
                )
            })
            .collect();
        assert_eq!(got, want);
        let mut seen = Vec::new();
        official_frame(frame, |p, q| seen.push((p, q)));
        let want: Vec<_> = trades.iter().map(|e| (e.price, e.qty)).collect();
        assert_eq!(seen, want);
    }
    for (corpus, values, snapshot) in [
        (&corpora.depth_diff, &corpora.depth_diff_values, false),
        (&corpora.depth20, &corpora.depth20_values, true),
    ] {
        for (frame, (bids, asks)) in corpus.frames().zip(values) {
            let (got_bids, got_asks) = match sbe::decode(frame) {
                Ok(Message::DepthDiff(d)) if !snapshot => (d.bids, d.asks),
                Ok(Message::DepthSnapshot(d)) if snapshot => (d.bids, d.asks),
                other => panic!("depth does not decode: {other:?}"),
            };
            assert_eq!(got_bids.iter().collect::<Vec<_>>(), want_levels(bids));
            assert_eq!(got_asks.iter().collect::<Vec<_>>(), want_levels(asks));
            let mut seen = Vec::new();
            official_frame(frame, |p, q| seen.push((p, q)));
            let want: Vec<_> = bids.iter().chain(asks).copied().collect();
            assert_eq!(seen, want);
        }
    }
    eprintln!(
        "binance_sbe: {FRAMES} frames per template: tickwire, the official decoder and the JSON \
         path agree with the encoded values"
    );
}

fn binance_sbe(c: &mut Criterion) {
    let corpora = make();
    check(&corpora);
    let header_len = message_header_codec::ENCODED_LENGTH;
    assert_eq!(header_len, sbe::HEADER_LEN);
    let groups: [(&str, &Corpus, Option<&Corpus>); 4] = [
        (
            "best_bid_ask",
            &corpora.best_bid_ask,
            Some(&corpora.book_ticker_json),
        ),
        ("trade", &corpora.trades, None),
        ("depth_diff", &corpora.depth_diff, None),
        ("depth20", &corpora.depth20, None),
    ];
    for (name, corpus, json_corpus) in groups {
        let mut group = c.benchmark_group(format!("binance_sbe/{name}"));
        group.throughput(Throughput::Elements(corpus.ends.len() as u64));
        group.sample_size(30);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        group.bench_function("tickwire", |b| b.iter(|| tickwire_all(corpus)));
        group.bench_function("official", |b| b.iter(|| official_all(corpus)));
        if let Some(json_corpus) = json_corpus {
            group.bench_function("usdm_json", |b| b.iter(|| json_all(json_corpus)));
        }
        group.finish();
    }
}

criterion_group!(benches, binance_sbe);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
