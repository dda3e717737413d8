//! `venue::binance_spot::sbe::decode` on arbitrary bytes: it must never panic, a truncation
//! must point inside the input, a decoded message's groups must iterate to their counts, and
//! turning it into events must not panic either.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::binance_spot::sbe::{decode, events, EventTarget, Message, SbeError};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(message) => {
            match message {
                Message::Trades(t) => assert_eq!(t.trades.iter().count(), t.trades.len()),
                Message::DepthDiff(d) => {
                    assert_eq!(d.bids.iter().count(), d.bids.len());
                    assert_eq!(d.asks.iter().count(), d.asks.len());
                }
                Message::DepthSnapshot(d) => {
                    assert_eq!(d.bids.iter().count(), d.bids.len());
                    assert_eq!(d.asks.iter().count(), d.asks.len());
                }
                Message::BestBidAsk(_) => {}
            }
            let target = EventTarget {
                venue_id: 0,
                instrument_id: 0,
                recv_ts_ns: 0,
            };
            events(&message, target, &mut |_| {});
        }
        Err(SbeError::Truncated { offset }) => assert!(offset as usize <= data.len()),
        Err(_) => {}
    }
});
