//! The OKX decoder, book and feed on arbitrary bytes: `venue::okx::decode::decode` must never
//! panic, an error must point inside the input, every level's strings and every row's `instId`
//! must lie inside it; then the same bytes go through `OkxFeed::on_message` (books verified by
//! checksum, trades, tickers, references, liquidations into events, answers into the reply
//! queue) on two connections, which must never panic either.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::event::Event;
use tickwire::venue::feed::{EventSink, Feed};
use tickwire::venue::okx::decode::{decode, Scratch};
use tickwire::venue::okx::feed::{FeedConfig, OkxFeed};

fuzz_target!(|data: &[u8]| {
    let mut scratch = Scratch::default();
    match decode(data, &mut scratch) {
        Ok(_) => {
            for level in scratch.bids.iter().chain(&scratch.asks) {
                for (start, len) in [level.price_text, level.size_text] {
                    assert!(start as usize + usize::from(len) <= data.len());
                }
            }
            for row in &scratch.rows {
                if let Some((start, end)) = row.inst_id {
                    assert!(start <= end && end as usize <= data.len());
                }
                assert!(row.details.0 <= row.details.1);
                assert!(row.details.1 as usize <= scratch.details.len());
            }
        }
        Err(error) => assert!(error.offset() <= data.len()),
    }
    let (mut feed, _counters) = OkxFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "okx".into(),
        symbols: vec!["BTC-USDT".into(), "BTC-USDT-SWAP".into()],
        channels: vec![
            "books".into(),
            "trades".into(),
            "tickers".into(),
            "mark-price".into(),
            "index-tickers".into(),
            "funding-rate".into(),
            "liquidation-orders".into(),
        ],
        instrument_base: 0,
    });
    let (mut producer, mut consumer) = tickwire::ring::ring::<Event>(1 << 14);
    let mut lost = false;
    for conn in [0, 1, 0] {
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(conn, 1, data, &mut sink);
        sink.publish();
        while consumer.try_pop().is_some() {}
        while feed.take_reply().is_some() {}
        let _ = feed.take_malformed();
    }
});
