//! The REST path of a depth snapshot on arbitrary bytes: `venue::rest::parse_response` (our own
//! HTTP/1.1 response reader: status line, headers, chunked bodies) must refuse or accept any
//! response without a panic, and a venue's snapshot parser (USD-M's
//! `venue::binance::protocol::parse_depth`) must do the same with any body, the response's and
//! the raw input alike; an accepted snapshot's levels are the body's.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::binance::protocol::parse_depth;
use tickwire::venue::rest::parse_response;

fuzz_target!(|data: &[u8]| {
    if let Ok(response) = parse_response(data) {
        assert!(response.body.len() <= data.len());
        let _ = parse_depth(&response.body);
    }
    if let Ok(snapshot) = parse_depth(data) {
        // Every level is a price and a quantity pair from the body: at least 7 bytes each
        // (`["1","1"]`).
        assert!((snapshot.bids.len() + snapshot.asks.len()) * 7 <= data.len());
    }
});
