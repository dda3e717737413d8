//! The Bybit decoder and feed on arbitrary bytes: `venue::bybit::decode::decode` must never
//! panic, an error must point inside the input, a row's symbol range must lie inside it; then
//! the same bytes go through `BybitFeed::on_message` (books, trades, tickers into events,
//! answers into the reply queue) on two connections, which must never panic either, and every
//! reply it queues must be taken.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::event::Event;
use tickwire::venue::bybit::decode::{decode, Message, Scratch};
use tickwire::venue::bybit::feed::{BybitFeed, FeedConfig};
use tickwire::venue::feed::{EventSink, Feed};

fuzz_target!(|data: &[u8]| {
    let mut scratch = Scratch::default();
    match decode(data, &mut scratch) {
        Ok(Message::Trades { .. } | Message::Liquidations { .. }) => {
            for row in &scratch.rows {
                assert!(row.symbol.0 <= row.symbol.1);
                assert!(row.symbol.1 <= data.len());
            }
        }
        Ok(_) => {}
        Err(error) => assert!(error.offset() <= data.len()),
    }
    let (mut feed, _counters) = BybitFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "bybit".into(),
        symbols: vec!["BTCUSDT".into(), "BTC-26DEC25".into()],
        channels: vec![
            "orderbook.50".into(),
            "publicTrade".into(),
            "tickers".into(),
            "allLiquidation".into(),
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
