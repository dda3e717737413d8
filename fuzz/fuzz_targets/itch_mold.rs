//! Nasdaq ITCH 5.0 over MoldUDP64 (issue 37): arbitrary packets through the `Arbiter`, every
//! message it hands out through the ITCH parser and the L3 book, every output made an event.
//! The input is a run of records: a control byte (its low two bits pick line A, B or a
//! re-request answer; the rest, times 1 µs, is the time that passes first), a 2-byte big-endian
//! length, that many bytes of packet. Nothing may panic; every hand-out must be in order
//! (seeds in `fuzz/seeds/itch_mold/`, written by
//! `TICKWIRE_WRITE_SEEDS=1 cargo test -p tickwire --test itch_fuzz_seeds`, and the `crash-*`
//! inputs this target once crashed on: an order reference of 2^64 - 1, the book table's empty
//! marker, and a sum of gaps past 2^64).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::event::{EventHeader, EventKind};
use tickwire::venue::nasdaq_itch::book::{BookConfig, ItchBook};
use tickwire::venue::nasdaq_itch::itch;
use tickwire::venue::nasdaq_itch::mold::{Arbiter, ArbiterConfig, Line, Output};

fuzz_target!(|data: &[u8]| {
    let mut arbiter = Arbiter::new(ArbiterConfig {
        line_wait_ns: 2_000,
        request_interval_ns: 3_000,
        max_requests: 2,
        give_up_ns: 20_000,
        max_request_count: 16,
        buffer: 64,
        ..ArbiterConfig::default()
    });
    let mut book = ItchBook::new(BookConfig {
        max_orders: 256,
        max_levels: 256,
    });
    let mut now = 0u64;
    let mut rest = data;
    let mut last: Option<u64> = None;
    let header = EventHeader {
        exchange_ts_ns: 0,
        recv_ts_ns: 0,
        venue_seq: 0,
        instrument_id: 0,
        venue_id: 0,
        kind: EventKind::Quote,
        flags: 0,
    };
    while let [control, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (packet, after) = tail.split_at(len);
        rest = after;
        now += u64::from(control >> 2) * 1_000;
        let line = match control & 3 {
            0 => Line::A,
            1 => Line::B,
            _ => Line::Rerequest,
        };
        let mut handle = |output: Output<'_>| match output {
            Output::Message { sequence, bytes, .. } => {
                if let Some(previous) = last {
                    assert!(sequence > previous, "in order");
                }
                last = Some(sequence);
                if let Ok(message) = itch::parse(bytes) {
                    let _ = message.stock();
                    let _ = itch::epoch_ns(
                        itch::Date {
                            year: 2024,
                            month: 3,
                            day: 11,
                        },
                        message.header().timestamp_ns,
                    );
                    let _ = book.apply(&message, &mut |change| {
                        let _ = change.event(header, 0);
                    });
                }
            }
            Output::Gap { first, count } => {
                assert!(count > 0);
                last = Some(first + count - 1);
            }
            Output::SessionChange { .. } => last = None,
            Output::EndOfSession { .. } => {}
        };
        let _ = arbiter.on_packet(line, packet, now, &mut handle);
        if let Some(request) = arbiter.poll(now, &mut handle) {
            assert!(request.count > 0);
            let _ = request.encode();
        }
    }
});
