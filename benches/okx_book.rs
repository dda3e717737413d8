//! OKX `books` updates: decode, book and checksum per message, tickwire against a `serde_json`
//! decoder with a `BTreeMap` book and the same CRC32; and the checksum's own cost.
//!
//! - `tickwire`: `venue::okx::decode::decode` into its reused `Scratch`, then `BookSync::apply`
//!   (the levels into the book and its string ladders, the checksum of the first 25 levels a
//!   side compared with the message's, the events written to a closure that sums them).
//! - `serde_json+btreemap`: `serde_json::from_slice` into `#[derive(Deserialize)]` structs with
//!   borrowed `&str` levels, then each level into a `BTreeMap<Fixed, (String, String)>` a side
//!   (the price through `Fixed::parse` as the key, the strings kept for the checksum), then the
//!   checksum as OKX's documentation shows it: the string of the first 25 levels a side built
//!   afresh (`bid:bidSz:ask:askSz:...`, joined by colons) and hashed with the same `crc32fast`,
//!   compared with the message's. It shares no code with tickwire's checksum.
//! - `checksum_25_levels`, on a book of 30 levels a side (its first 25 count):
//!   `tickwire_rewrite_all` is `BookSync::checksum_afresh`, the kept string of 50 levels written
//!   again whole and hashed, which is the most any message costs (one that changes both best
//!   levels); `tickwire_hash` is `BookSync::checksum`, the hash of the kept string alone, which
//!   is what a message that changes nothing in the top 25 costs.
//!
//! The messages are the OKX simulator's (`tickwire_sim::okx::messages`, `books:BTC-USDT`): a
//! snapshot, then 4095 updates of one to four level changes, every one carrying the true
//! checksum; each iteration takes the next message, so one in 4096 is the snapshot. Before
//! timing, both decoders run the whole sequence and must verify every checksum and end with the
//! same book. The goals (issue 35): tickwire at most a quarter of the peer's time; the checksum
//! under 150 ns. Run with `cargo bench --bench okx_book`.
//!
//! For instruction counts, `OKX_PASS=<side>:<iterations>` skips Criterion, checks the messages
//! as above and runs one side (`tickwire`, `peer`: the whole sequence that many times, a
//! snapshot and 4095 updates each; `checksum`: `BookSync::checksum_afresh`, `hash`:
//! `BookSync::checksum`, on the 30-level book that many times) inside `measured_pass`, after a
//! warm-up pass:
//!
//! ```text
//! cargo bench --bench okx_book --no-run   # prints the binary's path
//! OKX_PASS=tickwire:20 valgrind --tool=callgrind \
//!     --toggle-collect='*measured_pass*' target/release/deps/okx_book-<hash>
//! ```

use criterion::{criterion_group, Criterion, Throughput};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;
use tickwire::event::{EventHeader, EventKind};
use tickwire::fixed::Fixed;
use tickwire::venue::okx::book::{BookSync, Update, Verified};
use tickwire::venue::okx::decode::{decode, BookChannel, Message, Scratch};

const MESSAGES: usize = 4096;

fn header() -> EventHeader {
    EventHeader {
        exchange_ts_ns: 1,
        recv_ts_ns: 2,
        venue_seq: 0,
        instrument_id: 0,
        venue_id: 0,
        kind: EventKind::Quote,
        flags: 0,
    }
}

/// One message through tickwire: whether its checksum was verified, and a sum of its events.
fn tickwire_apply(message: &[u8], scratch: &mut Scratch, sync: &mut BookSync) -> (Verified, u64) {
    let Ok(Message::Book {
        snapshot,
        checksum,
        prev_seq_id,
        seq_id,
        ..
    }) = decode(message, scratch)
    else {
        panic!("not a book message");
    };
    let mut sum = 0u64;
    let outcome = sync.apply(
        Update {
            snapshot,
            checksum,
            prev_seq_id,
            seq_id,
        },
        &scratch.bids,
        &scratch.asks,
        message,
        header(),
        &mut |event| sum = sum.wrapping_add(event.header.venue_seq ^ event.kind() as u64),
    );
    (outcome.verified, sum)
}

#[derive(Deserialize)]
struct BookJson<'a> {
    #[serde(borrow)]
    action: &'a str,
    #[serde(borrow)]
    data: Vec<BookData<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookData<'a> {
    #[serde(borrow)]
    asks: Vec<[&'a str; 4]>,
    #[serde(borrow)]
    bids: Vec<[&'a str; 4]>,
    #[serde(borrow)]
    ts: &'a str,
    checksum: i32,
    prev_seq_id: i64,
    seq_id: i64,
}

/// The peer's book: per side, price to its (price, size) strings.
#[derive(Default)]
struct PeerBook {
    bids: BTreeMap<Fixed, (String, String)>,
    asks: BTreeMap<Fixed, (String, String)>,
    last_seq: i64,
}

impl PeerBook {
    /// One message: whether its checksum matched (and its sequence followed).
    fn apply(&mut self, message: &[u8]) -> bool {
        let m: BookJson<'_> = serde_json::from_slice(message).expect("parse");
        let data = &m.data[0];
        black_box(data.ts);
        if m.action == "snapshot" {
            self.bids.clear();
            self.asks.clear();
        } else if data.prev_seq_id != self.last_seq {
            return false;
        }
        self.last_seq = data.seq_id;
        for (side, levels) in [(&mut self.bids, &data.bids), (&mut self.asks, &data.asks)] {
            for [price, size, _, _] in levels {
                let key = Fixed::parse(price.as_bytes()).expect("a price");
                let value = Fixed::parse(size.as_bytes()).expect("a size");
                if value == Fixed::ZERO {
                    side.remove(&key);
                } else {
                    side.insert(key, ((*price).to_owned(), (*size).to_owned()));
                }
            }
        }
        let computed = plain_checksum(
            self.bids.values().rev().take(25),
            self.asks.values().take(25),
        );
        computed == data.checksum
    }
}

/// OKX's checksum as its documentation shows it: the first 25 bids and asks alternating, each
/// `price:size` with the venue's strings, all joined by colons, then the CRC32 of that string
/// as a signed 32-bit integer.
fn plain_checksum<'s>(
    mut bids: impl Iterator<Item = &'s (String, String)>,
    mut asks: impl Iterator<Item = &'s (String, String)>,
) -> i32 {
    let mut text = String::with_capacity(1024);
    loop {
        let (bid, ask) = (bids.next(), asks.next());
        if bid.is_none() && ask.is_none() {
            break;
        }
        for (price, size) in bid.into_iter().chain(ask) {
            if !text.is_empty() {
                text.push(':');
            }
            text.push_str(price);
            text.push(':');
            text.push_str(size);
        }
    }
    crc32fast::hash(text.as_bytes()) as i32
}

/// A snapshot of 30 levels a side in the venue's forms, for the checksum alone.
fn deep_snapshot() -> String {
    let side = |sign: i64| {
        (1..=30)
            .map(|i| {
                let tenths = 300_000 + sign * i;
                format!(
                    r#"["{}.{}","{}.{:04}","0","{}"]"#,
                    tenths / 10,
                    tenths % 10,
                    i % 7,
                    1000 + i * 37,
                    1 + i % 5
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        r#"{{"arg":{{"channel":"books","instId":"BTC-USDT"}},"action":"snapshot","data":[{{"asks":[{}],"bids":[{}],"ts":"1","checksum":0,"prevSeqId":-1,"seqId":1}}]}}"#,
        side(1),
        side(-1)
    )
}

/// The simulator's messages, checked: both sides verify every checksum and end with the same
/// book.
fn checked_messages() -> Vec<Vec<u8>> {
    let instruments = ["BTC-USDT".to_owned()];
    let messages: Vec<Vec<u8>> = tickwire_sim::okx::messages(
        &instruments,
        &["books:BTC-USDT"],
        7,
        1_700_000_000_000,
        MESSAGES,
    )
    .into_iter()
    .map(String::into_bytes)
    .collect();
    assert!(messages[0].windows(8).any(|w| w == b"snapshot"));
    // Both must verify every message and end with the same book.
    let mut scratch = Scratch::default();
    let mut sync = BookSync::new(BookChannel::Books);
    let mut peer = PeerBook::default();
    for (index, message) in messages.iter().enumerate() {
        let (verified, _) = tickwire_apply(message, &mut scratch, &mut sync);
        assert_eq!(verified, Verified::Yes, "tickwire, message {index}");
        assert!(peer.apply(message), "the peer, message {index}");
    }
    let book_bids: Vec<(Fixed, Fixed)> =
        sync.book().levels(tickwire::book::BookSide::Bid).collect();
    let peer_bids: Vec<(Fixed, Fixed)> = peer
        .bids
        .iter()
        .rev()
        .map(|(price, (_, size))| (*price, Fixed::parse(size.as_bytes()).expect("size")))
        .collect();
    assert_eq!(book_bids, peer_bids, "the two bid sides agree");
    let book_asks: Vec<(Fixed, Fixed)> =
        sync.book().levels(tickwire::book::BookSide::Ask).collect();
    let peer_asks: Vec<(Fixed, Fixed)> = peer
        .asks
        .iter()
        .map(|(price, (_, size))| (*price, Fixed::parse(size.as_bytes()).expect("size")))
        .collect();
    assert_eq!(book_asks, peer_asks, "the two ask sides agree");
    assert_eq!(
        sync.checksum(),
        plain_checksum(
            peer.bids.values().rev().take(25),
            peer.asks.values().take(25)
        ),
        "the two checksums agree"
    );
    messages
}

/// The book of [`deep_snapshot`], checked.
fn deep_book(scratch: &mut Scratch) -> BookSync {
    let deep = deep_snapshot();
    let mut sync = BookSync::new(BookChannel::Books);
    tickwire_apply(deep.as_bytes(), scratch, &mut sync);
    assert_eq!(sync.book().len(tickwire::book::BookSide::Bid), 30);
    let mut peer = PeerBook::default();
    peer.apply(deep.as_bytes());
    assert_eq!(
        sync.checksum(),
        plain_checksum(
            peer.bids.values().rev().take(25),
            peer.asks.values().take(25)
        ),
        "the deep book's checksums agree"
    );
    sync
}

fn okx_book(c: &mut Criterion) {
    let messages = checked_messages();
    let mut scratch = Scratch::default();
    let mut sync = BookSync::new(BookChannel::Books);
    let mut peer = PeerBook::default();
    let mut group = c.benchmark_group("okx_book/books_update");
    group.throughput(Throughput::Elements(1));
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let mut at = 0usize;
    group.bench_function("tickwire", |b| {
        b.iter(|| {
            let message = &messages[at];
            at = (at + 1) % messages.len();
            black_box(tickwire_apply(black_box(message), &mut scratch, &mut sync))
        })
    });
    let mut at = 0usize;
    group.bench_function("serde_json+btreemap", |b| {
        b.iter(|| {
            let message = &messages[at];
            at = (at + 1) % messages.len();
            black_box(peer.apply(black_box(message)))
        })
    });
    group.finish();

    let mut sync = deep_book(&mut scratch);
    let mut group = c.benchmark_group("okx_book/checksum_25_levels");
    group.throughput(Throughput::Elements(1));
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("tickwire_rewrite_all", |b| {
        b.iter(|| black_box(black_box(&mut sync).checksum_afresh()))
    });
    group.bench_function("tickwire_hash", |b| {
        b.iter(|| black_box(black_box(&sync).checksum()))
    });
    group.finish();
}

/// `iterations` passes of one side, for callgrind's `--toggle-collect`.
#[inline(never)]
fn measured_pass(side: &str, messages: &[Vec<u8>], iterations: u64) {
    let mut scratch = Scratch::default();
    match side {
        "tickwire" => {
            let mut sync = BookSync::new(BookChannel::Books);
            for _ in 0..iterations {
                for message in messages {
                    black_box(tickwire_apply(black_box(message), &mut scratch, &mut sync));
                }
            }
        }
        "peer" => {
            let mut peer = PeerBook::default();
            for _ in 0..iterations {
                for message in messages {
                    black_box(peer.apply(black_box(message)));
                }
            }
        }
        "checksum" => {
            let mut sync = deep_book(&mut scratch);
            for _ in 0..iterations {
                black_box(black_box(&mut sync).checksum_afresh());
            }
        }
        "hash" => {
            let sync = deep_book(&mut scratch);
            for _ in 0..iterations {
                black_box(black_box(&sync).checksum());
            }
        }
        other => panic!("unknown side {other}"),
    }
}

/// `OKX_PASS=<side>:<iterations>`: see the module documentation.
fn single_pass(spec: &str) {
    let (side, iterations) = spec.split_once(':').expect("<side>:<iterations>");
    let iterations: u64 = iterations.parse().expect("iterations");
    let messages = checked_messages();
    measured_pass(side, &messages, 1);
    measured_pass(side, &messages, iterations);
    eprintln!("okx_book: {iterations} iterations of {side}");
}

criterion_group!(benches, okx_book);

fn main() {
    if let Ok(spec) = std::env::var("OKX_PASS") {
        single_pass(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
