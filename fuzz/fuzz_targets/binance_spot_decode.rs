//! `venue::binance_spot::decode::decode` on arbitrary bytes: it must never panic, an error must
//! point inside the input, the general reader must agree with the bookTicker fast path, the
//! levels of a decoded message must iterate to their count, and the Spot feed must take the
//! same bytes without a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::binance::sync::SyncConfig;
use tickwire::venue::binance_spot::decode::{decode, decode_general, Message};
use tickwire::venue::binance_spot::feed::{FeedConfig, SpotFeed};
use tickwire::venue::feed::{EventSink, Feed};

fuzz_target!(|data: &[u8]| {
    let decoded = decode(data);
    assert_eq!(decoded, decode_general(data));
    match decoded {
        Ok(Message::Depth(depth)) => {
            assert_eq!(depth.bids.iter().count(), depth.bids.len());
            assert_eq!(depth.asks.iter().count(), depth.asks.len());
        }
        Ok(Message::PartialDepth(partial)) => {
            assert_eq!(partial.bids.iter().count(), partial.bids.len());
            assert_eq!(partial.asks.iter().count(), partial.asks.len());
        }
        Ok(Message::DepthSnapshot(snapshot)) => {
            assert_eq!(snapshot.bids.iter().count(), snapshot.bids.len());
            assert_eq!(snapshot.asks.iter().count(), snapshot.asks.len());
        }
        Ok(_) => {}
        Err(error) => assert!(error.offset <= data.len()),
    }
    let (mut feed, _counters) = SpotFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "spot".to_owned(),
        symbols: vec!["BTCUSDT".to_owned()],
        channels: vec![
            "bookTicker".to_owned(),
            "depth@100ms".to_owned(),
            "depth5".to_owned(),
        ],
        instrument_base: 0,
        books: true,
        sync: SyncConfig {
            max_buffered_diffs: 4,
            max_buffered_levels: 64,
            expected_levels_per_side: 16,
            ..SyncConfig::default()
        },
    });
    let (mut producer, mut consumer) = tickwire::ring::ring(1024);
    let mut lost = false;
    let mut sink = EventSink::new(&mut producer, &mut lost);
    feed.on_message(0, 1, data, &mut sink);
    feed.on_message(0, 2, data, &mut sink);
    sink.publish();
    while consumer.try_pop().is_some() {}
});
