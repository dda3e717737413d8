//! The Databento path past the network thread on arbitrary bytes: the gateway's authentication
//! (`GatewayAuth`, the preamble) on the first half, the feed (`DatabentoFeed::on_message`:
//! record stream, symbol mappings, gateway messages, normalization) on the second, both in
//! chunks whose size the first byte picks. Nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::config::Recovery;
use tickwire::event::Event;
use tickwire::net::engine::Preamble;
use tickwire::venue::databento::feed::{DatabentoFeed, FeedConfig};
use tickwire::venue::databento::gateway::{GatewayAuth, SessionOptions};
use tickwire::venue::feed::{EventSink, Feed};

fuzz_target!(|data: &[u8]| {
    let [chunk, rest @ ..] = data else {
        return;
    };
    let chunk = usize::from(*chunk).max(1);
    let (auth_bytes, feed_bytes) = rest.split_at(rest.len() / 2);
    let mut auth = GatewayAuth::new(
        "db-0123456789abcdefghijklmnopqrs".to_owned(),
        SessionOptions {
            dataset: "GLBX.MDP3".to_owned(),
            ts_out: false,
            heartbeat_interval_s: Some(10),
            slow_reader_behavior: None,
        },
    );
    let mut pending = Vec::new();
    let mut reply = Vec::new();
    for piece in auth_bytes.chunks(chunk) {
        pending.extend_from_slice(piece);
        match auth.read(&pending, &mut reply) {
            Ok(step) => {
                pending.drain(..step.consumed.min(pending.len()));
                if step.done {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let (mut feed, _counters) = DatabentoFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "fuzz".to_owned(),
        symbols: vec!["ESZ6".to_owned(), "NQZ6".to_owned()],
        channels: vec!["mbo".to_owned(), "mbp-10".to_owned(), "trades".to_owned()],
        instrument_base: 0,
        recovery: Recovery::Replay,
        // Small, so that the fuzzer reaches both limits (issue 32).
        max_orders_per_book: 64,
        max_instrument_mappings: 8,
    });
    let (mut producer, mut consumer) = tickwire::ring::ring::<Event>(4096);
    let mut lost = false;
    for piece in feed_bytes.chunks(chunk) {
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, 1, piece, &mut sink);
        sink.publish();
        while consumer.try_pop().is_some() {}
        while feed.take_reply().is_some() {}
    }
});
