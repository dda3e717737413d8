//! Nasdaq TotalView-ITCH 5.0: tickwire's parser plus the L3 book of every stock, per message,
//! beside the `itchy` crate parsing the same bytes with no book (issue 37).
//!
//! The stream is generated (`tickwire::venue::nasdaq_itch::generate::Generator`; Nasdaq's
//! volume may not be shipped): 8,000 stocks, about 1,000,000 resting orders once warm, a
//! day-like mix of adds (5% with MPID), deletes, partial cancels, executions (a fifth with price,
//! a quarter of those non-printable), replaces and hidden trades. The day runs twice: with the
//! executions, cancels, deletes and replaces on orders picked uniformly among all live ones
//! (every access anywhere in a book of hundreds of MB: the cache's worst case), and with 90%
//! of them on the 4,096 newest orders (a real day's skew: most orders die young). It is written in Nasdaq's raw
//! ITCH file format (each message after a 2-byte big-endian length: the bytes `itchy`'s
//! `MessageStream` reads), in chunks of `CHUNK` messages, so that the 50,000,000 or more
//! messages the issue asks for (`ITCH_BENCH_MESSAGES`, default 52,000,000) never sit in memory
//! at once; a chunk is made before it is timed, and generating is never timed.
//!
//! - `tickwire`: every message of the chunk read by `RawItch`, parsed by `itch::parse_into`, 256 at
//!   a time, and applied to one `ItchBook` with `ItchBook::apply_batch` (which asks the cache
//!   for the orders and levels of the messages ahead while it applies each; every order of the
//!   day in the book, as on the live path: the book carries over from chunk to chunk), every
//!   level change and trade folded into a checksum. `ITCH_PREFETCH` picks other prefetch
//!   distances (see `tickwire_pass`) to compare them.
//! - `tickwire parse only`: the same reading and parsing with no book, each message's
//!   timestamp and locate folded into a checksum (the like-for-like comparison with `itchy`).
//! - `itchy`: `itchy::MessageStream::from_reader` over the same chunk, every message's
//!   timestamp and stock locate folded into a checksum: the parse alone, no book.
//!
//! Before timing, the first chunk is read by both: the same message count, the same sum of
//! timestamps and of locates. After the run, the book must have skipped nothing (every message
//! of the generator is one a correct book accepts). The two alternate chunk by chunk, so that a
//! busy neighbour slows both alike; the table gives each one's total and its fastest chunk.
//! `ITCH_CHUNK_LOG=1` prints tickwire's time for every chunk (on stderr), to see where in the
//! day a change helps: the order table's references go round it about 15,000,000 messages in.
//! Criterion then times one chunk of a fresh generator (skewed, 250,000 live orders) through
//! each, the book cleared before each pass (`ItchBook::clear`, included in the time).
//!
//! Run with `cargo bench --bench itch`; the figures and the machine are in BENCHMARKING.md
//! ("Nasdaq ITCH 5.0").

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tickwire::venue::nasdaq_itch::book::{BookConfig, BookOutput, ItchBook};
use tickwire::venue::nasdaq_itch::generate::{Generator, MAX_GENERATED_LEN};
use tickwire::venue::nasdaq_itch::itch;
use tickwire::venue::nasdaq_itch::pcap::RawItch;

const STOCKS: u16 = 8_000;
const LIVE: usize = 1_000_000;
const CHUNK: usize = 1_000_000;
/// The skewed day's share of order events on the newest orders.
const HOT_PERCENT: u64 = 90;

/// The next `CHUNK` messages in raw ITCH file form, into `out` (cleared first).
fn fill_chunk(generator: &mut Generator, out: &mut Vec<u8>) {
    out.clear();
    let mut message = [0u8; MAX_GENERATED_LEN];
    for _ in 0..CHUNK {
        let len = generator.next_message(&mut message);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&message[..len]);
    }
}

#[inline]
fn fold(checksum: u64, value: u64) -> u64 {
    (checksum.rotate_left(5) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Messages parsed ahead and applied together (`ItchBook::apply_batch`, which prefetches
/// within the batch).
const BATCH: usize = 256;

/// tickwire: parse and book every message, `BATCH` at a time; (messages, checksum).
fn tickwire_pass(book: &mut ItchBook, chunk: &[u8]) -> (u64, u64) {
    // Which prefetch distances (order, level, level index; BENCHMARKING.md compares them):
    // 0 (the default) `apply_batch`'s 16, 8, 4; 1 none; 2 16, 8 and no third stage; 3 32,
    // 16, 8; 4 8, 4, 2.
    let prefetch: u32 = std::env::var("ITCH_PREFETCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut checksum = 0u64;
    let mut messages = 0u64;
    let filler = itch::Message::SystemEvent {
        header: itch::Header {
            locate: 0,
            tracking: 0,
            timestamp_ns: 0,
        },
        event_code: 0,
    };
    let mut batch = [filler; BATCH];
    let mut raw = RawItch::new(chunk);
    loop {
        let mut len = 0;
        for bytes in raw.by_ref() {
            let Ok(bytes) = bytes else { break };
            if itch::parse_into(bytes, &mut batch[len]).is_err() {
                continue;
            }
            len += 1;
            if len == BATCH {
                break;
            }
        }
        if len == 0 {
            break;
        }
        messages += len as u64;
        let mut fold_output = |_, output| {
            checksum = fold(
                checksum,
                match output {
                    BookOutput::Level { price, shares, .. } => u64::from(price) ^ shares,
                    BookOutput::Trade {
                        shares,
                        match_number,
                        ..
                    } => shares ^ match_number,
                },
            )
        };
        let batch = &batch[..len];
        let refused = &mut |_, _| {};
        match prefetch {
            0 => book.apply_batch(batch, &mut fold_output, refused),
            1 => book.apply_batch_ahead::<0, 0, 0>(batch, &mut fold_output, refused),
            2 => book.apply_batch_ahead::<16, 8, 0>(batch, &mut fold_output, refused),
            3 => book.apply_batch_ahead::<32, 16, 8>(batch, &mut fold_output, refused),
            _ => book.apply_batch_ahead::<8, 4, 2>(batch, &mut fold_output, refused),
        }
    }
    (messages, checksum)
}

/// tickwire's parse alone, no book: (messages, checksum of timestamps and locates).
fn tickwire_parse_pass(chunk: &[u8]) -> (u64, u64) {
    let (mut n, mut checksum) = (0u64, 0u64);
    for bytes in RawItch::new(chunk) {
        let Ok(bytes) = bytes else { break };
        if let Ok(message) = itch::parse(bytes) {
            n += 1;
            let header = message.header();
            checksum = checksum.wrapping_add(header.timestamp_ns ^ u64::from(header.locate));
        }
    }
    (n, checksum)
}

/// tickwire's parse alone (for the agreement check): (messages, sum of timestamps, of locates).
fn tickwire_sums(chunk: &[u8]) -> (u64, u64, u64) {
    let (mut n, mut ts, mut locates) = (0u64, 0u64, 0u64);
    for bytes in RawItch::new(chunk) {
        let message = itch::parse(bytes.expect("whole")).expect("valid");
        n += 1;
        ts = ts.wrapping_add(message.header().timestamp_ns);
        locates += u64::from(message.header().locate);
    }
    (n, ts, locates)
}

/// itchy: (messages, sum of timestamps, of locates).
fn itchy_pass(chunk: &[u8]) -> (u64, u64, u64) {
    let (mut n, mut ts, mut locates) = (0u64, 0u64, 0u64);
    for message in itchy::MessageStream::from_reader(chunk) {
        let Ok(message) = message else { break };
        n += 1;
        ts = ts.wrapping_add(message.timestamp);
        locates += u64::from(message.stock_locate);
    }
    (n, ts, locates)
}

fn book() -> ItchBook {
    ItchBook::new(BookConfig {
        max_orders: 4 * LIVE,
        max_levels: 1 << 21,
    })
}

fn paired_day(hot_percent: u64) {
    let total: usize = std::env::var("ITCH_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(52_000_000);
    let chunks = total.div_ceil(CHUNK);
    let mut generator = Generator::new(37, STOCKS, LIVE).with_hot_percent(hot_percent);
    let mut chunk = Vec::with_capacity(CHUNK * (MAX_GENERATED_LEN + 2));
    let mut book = book();
    let (mut ours_total, mut theirs_total) = (Duration::ZERO, Duration::ZERO);
    let (mut parse_total, mut parse_best) = (Duration::ZERO, Duration::MAX);
    let (mut ours_best, mut theirs_best) = (Duration::MAX, Duration::MAX);
    let mut messages = 0u64;
    let mut checksum = 0u64;
    for index in 0..chunks {
        fill_chunk(&mut generator, &mut chunk);
        if index == 0 {
            let ours = tickwire_sums(&chunk);
            let theirs = itchy_pass(&chunk);
            assert_eq!(ours, theirs, "tickwire and itchy read the same messages");
            assert_eq!(ours.0, CHUNK as u64);
        }
        let mut time_ours = || {
            let start = Instant::now();
            let (n, sum) = tickwire_pass(&mut book, black_box(&chunk));
            let took = start.elapsed();
            assert_eq!(n, CHUNK as u64);
            checksum ^= sum;
            took
        };
        let time_theirs = || {
            let start = Instant::now();
            let (n, _, _) = black_box(itchy_pass(black_box(&chunk)));
            let took = start.elapsed();
            assert_eq!(n, CHUNK as u64);
            took
        };
        let (ours, theirs) = if index % 2 == 0 {
            let ours = time_ours();
            (ours, time_theirs())
        } else {
            let theirs = time_theirs();
            (time_ours(), theirs)
        };
        if std::env::var_os("ITCH_CHUNK_LOG").is_some() {
            eprintln!(
                "chunk {index}: {:.1} ns/message, {} live orders",
                ours.as_nanos() as f64 / CHUNK as f64,
                book.orders()
            );
        }
        let start = Instant::now();
        let (n, _) = black_box(tickwire_parse_pass(black_box(&chunk)));
        let parse = start.elapsed();
        assert_eq!(n, CHUNK as u64);
        parse_total += parse;
        parse_best = parse_best.min(parse);
        ours_total += ours;
        theirs_total += theirs;
        ours_best = ours_best.min(ours);
        theirs_best = theirs_best.min(theirs);
        messages += CHUNK as u64;
    }
    assert_eq!(
        book.counters(),
        Default::default(),
        "the book skipped nothing"
    );
    black_box(checksum);
    let ns = |d: Duration, n: u64| d.as_nanos() as f64 / n as f64;
    println!(
        "itch day, {hot_percent}% of order events on the 4,096 newest orders: {messages} messages \
         in {chunks} chunks over {STOCKS} stocks; at the end {} live orders on {} levels",
        book.orders(),
        book.levels()
    );
    println!("| run | ns/message (all) | M messages/s (all) | ns/message (fastest chunk) |");
    println!("|---|--:|--:|--:|");
    for (name, total, best) in [
        ("tickwire parse + L3 book", ours_total, ours_best),
        ("tickwire parse only", parse_total, parse_best),
        ("itchy parse only", theirs_total, theirs_best),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            ns(total, messages),
            1e3 / ns(total, messages),
            ns(best, CHUNK as u64)
        );
    }
    println!(
        "itchy / tickwire (all): {:.2}x",
        theirs_total.as_secs_f64() / ours_total.as_secs_f64()
    );
}

fn bench_itch(c: &mut Criterion) {
    paired_day(0);
    paired_day(HOT_PERCENT);
    let mut generator = Generator::new(38, STOCKS, LIVE / 4).with_hot_percent(HOT_PERCENT);
    let mut chunk = Vec::with_capacity(CHUNK * (MAX_GENERATED_LEN + 2));
    fill_chunk(&mut generator, &mut chunk);
    let mut group = c.benchmark_group("itch");
    group.throughput(Throughput::Elements(CHUNK as u64));
    let mut book = ItchBook::new(BookConfig {
        max_orders: LIVE,
        max_levels: 1 << 20,
    });
    group.bench_function("tickwire parse + book", |b| {
        b.iter(|| {
            book.clear();
            tickwire_pass(black_box(&mut book), black_box(&chunk))
        })
    });
    group.bench_function("tickwire parse", |b| {
        b.iter(|| tickwire_parse_pass(black_box(&chunk)))
    });
    group.bench_function("itchy parse", |b| b.iter(|| itchy_pass(black_box(&chunk))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(8));
    targets = bench_itch
}
criterion_main!(benches);
