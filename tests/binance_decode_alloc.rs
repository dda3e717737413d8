//! Decoding a Binance message and walking its levels allocates nothing, counted by a global
//! allocator that wraps the system one. A test binary of its own, because the allocator is
//! process-wide.

use crate::support::common;

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use tickwire::fixed::Fixed;
use tickwire::venue::binance::decode::{decode, Message};

use crate::support::counting_alloc;

use counting_alloc::allocations;

/// Decodes a message and touches every value in it, as the decoder thread would; returns
/// something derived from all of it so the work cannot be optimised away.
fn decode_and_walk(bytes: &[u8]) -> i64 {
    let mut checksum = 0i64;
    let mut walk = |levels: tickwire::venue::binance::decode::Levels<'_>| {
        for (price, qty) in levels {
            checksum = checksum.wrapping_add(price.raw() ^ qty.raw());
        }
    };
    match decode(bytes) {
        Ok(Message::Depth(d)) => {
            walk(d.bids);
            walk(d.asks);
        }
        Ok(Message::DepthSnapshot(s)) => {
            walk(s.bids);
            walk(s.asks);
        }
        Ok(Message::BookTicker(b)) => checksum = b.bid_px.raw() ^ b.ask_qty.raw(),
        Ok(Message::Trade(t)) => checksum = t.price.raw() ^ t.qty.raw(),
        Ok(other) => checksum = i64::from(other.stream().is_some()),
        Err(error) => checksum = error.offset as i64,
    }
    checksum
}

/// Messages of every kind the decoder returns, including replies and errors, so the test
/// means something without the capture.
const EXAMPLES: [&str; 10] = [
    r#"{"e":"bookTicker","u":400900217,"E":1568014460893,"T":1568014460891,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000"}"#,
    r#"{"data":{"T":2,"E":1,"s":"BTCUSDT","t":3,"p":"4","q":"5","m":true,"x":[{"y":null}],"e":"trade"},"stream":"btcusdt@trade"}"#,
    r#"{"e":"aggTrade","E":123456789,"s":"BTCUSDT","a":5933014,"p":"0.001","q":"100","f":100,"l":105,"T":123456785,"m":true}"#,
    r#"{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":1,"T":2,"s":"BTCUSDT","U":3,"u":4,"pu":2,"b":[["1.5","2"],["1.4","0"]],"a":[ [ "1.6" , "3" ] ]}}"#,
    r#"{"e":"markPriceUpdate","E":1,"s":"BTCUSDT","p":"1","i":"2","P":"3","r":"","T":0}"#,
    r#"{"lastUpdateId":1,"E":2,"T":3,"bids":[["1","2"]],"asks":[]}"#,
    r#"{"result":["btcusdt@aggTrade"],"id":3}"#,
    r#"{"error":{"code":2,"msg":"Invalid request"},"id":1}"#,
    r#"{"e":"kline","k":{}}"#,
    r#"{"e":"trade","E":1.5}"#,
];

#[test]
fn decoding_and_walking_levels_never_allocates() {
    // The counter works: a `Vec` on this thread is seen.
    let before = allocations();
    black_box(vec![0u8; 64]);
    assert_eq!(
        allocations(),
        before + 1,
        "the counting allocator is not active"
    );

    let before = allocations();
    let mut checksum = 0i64;
    for example in EXAMPLES {
        checksum ^= decode_and_walk(black_box(example.as_bytes()));
    }
    assert_eq!(allocations(), before, "decoding the examples allocated");
    black_box(checksum);
    assert_eq!(
        decode_and_walk(EXAMPLES[3].as_bytes()),
        (Fixed::parse(b"1.5").unwrap().raw() ^ Fixed::parse(b"2").unwrap().raw())
            .wrapping_add(Fixed::parse(b"1.4").unwrap().raw())
            .wrapping_add(Fixed::parse(b"1.6").unwrap().raw() ^ Fixed::parse(b"3").unwrap().raw())
    );
}

#[test]
fn decoding_the_whole_capture_never_allocates() {
    let Some(path) = common::shared_data("binance-futures/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(&path).unwrap();
    let lines: Vec<String> = BufReader::new(flate2::read::GzDecoder::new(file))
        .lines()
        .map(|line| {
            let line = line.unwrap();
            line.split_once(' ').unwrap().1.to_owned()
        })
        .collect();
    assert_eq!(lines.len(), 93_954);

    let before = allocations();
    let mut checksum = 0i64;
    let mut decoded = 0usize;
    for line in &lines {
        assert!(decode(line.as_bytes()).is_ok());
        checksum = checksum.wrapping_add(decode_and_walk(black_box(line.as_bytes())));
        decoded += 1;
    }
    assert_eq!(allocations(), before, "decoding the capture allocated");
    assert_eq!(decoded, 93_954);
    black_box(checksum);
}
