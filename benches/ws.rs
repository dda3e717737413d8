//! WebSocket benchmarks: the unframing the network thread does for every received message, and
//! the masking and framing of what we send.
//!
//! - `ws_unframe/book_ticker/*`: a buffer of 1,000 text frames holding real Binance USD-M
//!   `bookTicker` messages (the first 1,000 of `../shared/data/binance-futures/btcusdt_20240808.gz`,
//!   about 180 bytes each; synthetic ones of the same shape when the capture is absent), read
//!   frame by frame as the network loop does: bytes/s and frames/s. UTF-8 validation included.
//! - `ws_unframe/book_ticker_as_binary/frames`: the same payloads in binary frames, so the
//!   difference from `book_ticker` is the UTF-8 validation text frames require.
//! - `ws_unframe/binary_64k`: one 64 KiB binary frame, borrowed; `fragmented_64k`: the same bytes
//!   as 16 fragments of 4 KiB, which are copied into the message buffer.
//! - `ws_unframe/memcpy_floor`: copying the `book_ticker` buffer once, the floor any reader that
//!   touches every byte pays: unframing is compared against it in the same run.
//! - `ws_send/*`: masking and framing a 100-byte message into the output buffer.
//!
//! Every input is decoded once before timing and checked (frame count and payloads), so a
//! broken decoder cannot produce a fast number. Run with `cargo bench --bench ws`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;
use tickwire::ws::frame::{write_header, MaskRng, OpCode};
use tickwire::ws::{Client, Config, Event, MessageKind};

const BOOK_TICKER_FRAMES: usize = 1000;

/// The first `BOOK_TICKER_FRAMES` bookTicker messages of the capture, or synthetic ones.
fn book_ticker_messages() -> Vec<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/binance-futures/btcusdt_20240808.gz");
    if let Ok(file) = std::fs::File::open(&path) {
        let lines = BufReader::new(flate2::read::GzDecoder::new(file)).lines();
        let messages: Vec<Vec<u8>> = lines
            .map_while(Result::ok)
            .filter_map(|line| {
                let (_, json) = line.split_once(' ')?;
                json.contains("@bookTicker")
                    .then(|| json.as_bytes().to_vec())
            })
            .take(BOOK_TICKER_FRAMES)
            .collect();
        if messages.len() == BOOK_TICKER_FRAMES {
            eprintln!(
                "ws bench: {BOOK_TICKER_FRAMES} bookTicker messages from {}",
                path.display()
            );
            return messages;
        }
    }
    eprintln!(
        "ws bench: {} not found; synthetic bookTicker messages",
        path.display()
    );
    (0..BOOK_TICKER_FRAMES as u64)
        .map(|seq| {
            format!(
                r#"{{"stream":"btcusdt@bookTicker","data":{{"e":"bookTicker","u":{},"s":"BTCUSDT","b":"61653.{:02}","B":"{}.462","a":"61653.{:02}","A":"0.{:03}","T":{},"E":{}}}}}"#,
                5_123_107_843_163 + seq,
                seq % 100,
                seq % 17,
                (seq + 1) % 100,
                seq % 1000,
                1_723_161_256_302 + seq,
                1_723_161_256_303 + seq
            )
            .into_bytes()
        })
        .collect()
}

/// Server frames (unmasked), one per message, as `fin` + `opcode` frames of the given sizes.
fn server_frames(messages: &[Vec<u8>], opcode: OpCode) -> Vec<u8> {
    let mut wire = Vec::new();
    for message in messages {
        write_header(&mut wire, true, opcode, message.len(), None);
        wire.extend_from_slice(message);
    }
    wire
}

fn client() -> Client {
    Client::with_mask_rng(Config::default(), MaskRng::from_seed(0x5eed))
}

/// Reads every frame of `wire`, returning the messages: the checked, untimed pass.
fn decode_all(client: &mut Client, wire: &[u8]) -> Vec<(MessageKind, Vec<u8>)> {
    let mut messages = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        let read = client.read(rest).expect("benchmark input is valid");
        if let Event::Message { kind, payload } = read.event {
            messages.push((kind, payload.to_vec()));
        }
        assert!(read.consumed > 0, "the input holds whole frames only");
        rest = &rest[read.consumed..];
    }
    messages
}

/// The timed pass: the same loop, handing each payload to `black_box` as the network loop
/// hands it to the frame ring. Returns the message count so that the loop cannot be elided.
#[inline]
fn unframe(client: &mut Client, wire: &[u8]) -> usize {
    let mut count = 0;
    let mut rest = wire;
    while !rest.is_empty() {
        let Ok(read) = client.read(rest) else {
            return usize::MAX;
        };
        if let Event::Message { payload, .. } = read.event {
            black_box(payload);
            count += 1;
        }
        rest = &rest[read.consumed..];
    }
    count
}

fn bench_unframe(criterion: &mut Criterion) {
    let messages = book_ticker_messages();
    let book_wire = server_frames(&messages, OpCode::Text);
    let decoded = decode_all(&mut client(), &book_wire);
    assert_eq!(decoded.len(), messages.len());
    for ((kind, payload), message) in decoded.iter().zip(&messages) {
        assert_eq!((*kind, payload), (MessageKind::Text, message));
    }
    let mean_len = messages.iter().map(Vec::len).sum::<usize>() / messages.len();
    eprintln!(
        "ws bench: {} frames, {} wire bytes, mean payload {mean_len} bytes",
        messages.len(),
        book_wire.len()
    );

    let binary: Vec<u8> = (0..64 << 10)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let binary_wire = server_frames(std::slice::from_ref(&binary), OpCode::Binary);
    assert_eq!(
        decode_all(&mut client(), &binary_wire),
        vec![(MessageKind::Binary, binary.clone())]
    );
    let mut fragmented_wire = Vec::new();
    for (index, fragment) in binary.chunks(4096).enumerate() {
        let opcode = if index == 0 {
            OpCode::Binary
        } else {
            OpCode::Continuation
        };
        let fin = (index + 1) * 4096 >= binary.len();
        write_header(&mut fragmented_wire, fin, opcode, fragment.len(), None);
        fragmented_wire.extend_from_slice(fragment);
    }
    assert_eq!(
        decode_all(&mut client(), &fragmented_wire),
        vec![(MessageKind::Binary, binary.clone())]
    );

    let mut group = criterion.benchmark_group("ws_unframe");
    let mut reader = client();
    group.throughput(Throughput::Bytes(book_wire.len() as u64));
    group.bench_function(BenchmarkId::new("book_ticker", "bytes"), |bencher| {
        bencher.iter(|| unframe(&mut reader, black_box(&book_wire)))
    });
    group.throughput(Throughput::Elements(messages.len() as u64));
    group.bench_function(BenchmarkId::new("book_ticker", "frames"), |bencher| {
        bencher.iter(|| unframe(&mut reader, black_box(&book_wire)))
    });
    // The same payloads as binary frames: the framing alone, without UTF-8 validation.
    let book_binary_wire = server_frames(&messages, OpCode::Binary);
    assert_eq!(
        decode_all(&mut client(), &book_binary_wire).len(),
        messages.len()
    );
    group.bench_function(
        BenchmarkId::new("book_ticker_as_binary", "frames"),
        |bencher| bencher.iter(|| unframe(&mut reader, black_box(&book_binary_wire))),
    );
    group.throughput(Throughput::Bytes(book_wire.len() as u64));
    let mut copy = vec![0_u8; book_wire.len()];
    group.bench_function("memcpy_floor", |bencher| {
        bencher.iter(|| {
            copy.copy_from_slice(black_box(&book_wire));
            black_box(&copy);
        })
    });
    group.throughput(Throughput::Bytes(binary_wire.len() as u64));
    group.bench_function("binary_64k", |bencher| {
        bencher.iter(|| unframe(&mut reader, black_box(&binary_wire)))
    });
    group.throughput(Throughput::Bytes(fragmented_wire.len() as u64));
    group.bench_function("fragmented_64k", |bencher| {
        bencher.iter(|| unframe(&mut reader, black_box(&fragmented_wire)))
    });
    group.finish();
}

fn bench_send(criterion: &mut Criterion) {
    let payload: Vec<u8> = messages_of_100_bytes();
    let mut writer = client();
    writer
        .send(MessageKind::Text, &payload)
        .expect("open client");
    let output = writer.output().to_vec();
    assert_eq!(output.len(), 2 + 4 + payload.len());
    let mask = &output[2..6];
    let unmasked: Vec<u8> = output[6..]
        .iter()
        .enumerate()
        .map(|(index, byte)| byte ^ mask[index % 4])
        .collect();
    assert_eq!(unmasked, payload);
    writer.consume_output(output.len());

    let mut group = criterion.benchmark_group("ws_send");
    group.throughput(Throughput::Elements(1));
    for (name, kind) in [
        ("binary_100b", MessageKind::Binary),
        ("text_100b", MessageKind::Text),
    ] {
        group.bench_function(name, |bencher| {
            bencher.iter(|| {
                let sent = writer.send(kind, black_box(&payload));
                black_box(writer.output());
                let pending = writer.output().len();
                writer.consume_output(pending);
                sent
            })
        });
    }
    group.finish();
}

/// A 100-byte subscription-like text message.
fn messages_of_100_bytes() -> Vec<u8> {
    let mut text =
        br#"{"method":"SUBSCRIBE","params":["btcusdt@bookTicker","btcusdt@depth@0ms"],"id":17"#
            .to_vec();
    text.resize(99, b' ');
    text.push(b'}');
    text
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_unframe, bench_send
}
criterion_main!(benches);
