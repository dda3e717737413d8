//! The Thalex decoder and feed on arbitrary bytes: `venue::thalex::decode::decode` must never
//! panic, an error must point inside the input, a trade's instrument range must lie inside it;
//! then the same bytes go through `ThalexFeed::on_message` (notifications into events, JSON-RPC
//! responses into the reply queue) on two connections, which must never panic either, and every
//! reply it queues must be taken.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::event::Event;
use tickwire::venue::feed::{EventSink, Feed};
use tickwire::venue::thalex::decode::{decode, Message, Scratch};
use tickwire::venue::thalex::feed::{FeedConfig, ThalexFeed};

fuzz_target!(|data: &[u8]| {
    let mut scratch = Scratch::default();
    match decode(data, &mut scratch) {
        Ok(Message::Notification { .. }) => {
            for trade in &scratch.trades {
                assert!(trade.instrument.0 <= trade.instrument.1);
                assert!(trade.instrument.1 <= data.len());
            }
        }
        Ok(Message::Response { .. }) => {
            for &(start, end) in &scratch.channels {
                assert!(start <= end && end <= data.len());
            }
        }
        Err(error) => assert!(error.offset() <= data.len()),
    }
    let (mut feed, _counters) = ThalexFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "thalex".into(),
        symbols: vec!["BTC-PERPETUAL".into(), "BTC-27JUN25-100000-C".into()],
        channels: vec![
            "ticker.raw".into(),
            "lwt.raw".into(),
            "book.none.all.raw".into(),
            "recent_trades.all".into(),
            "price_index".into(),
        ],
        instrument_base: 0,
    });
    let (mut producer, mut consumer) = tickwire::ring::ring::<Event>(1 << 12);
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
