//! `venue::binance::decode::decode` on arbitrary bytes: it must never panic, an error must
//! point inside the input, and the levels of a decoded message must iterate to their count.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::binance::decode::{decode, Message};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(Message::Depth(depth)) => {
            assert_eq!(depth.bids.iter().count(), depth.bids.len());
            assert_eq!(depth.asks.iter().count(), depth.asks.len());
        }
        Ok(Message::DepthSnapshot(snapshot)) => {
            assert_eq!(snapshot.bids.iter().count(), snapshot.bids.len());
            assert_eq!(snapshot.asks.iter().count(), snapshot.asks.len());
        }
        Ok(_) => {}
        Err(error) => assert!(error.offset <= data.len()),
    }
});
