//! `Client::read` on arbitrary server bytes, fed in two pieces as a socket would deliver them,
//! with a small borrow limit so that both the borrowed and the streamed paths run. It must
//! never panic, and a failure must leave the client closed with its close frame queued.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::ws::frame::MaskRng;
use tickwire::ws::{Client, Config, Event, State};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, wire)) = data.split_first() else {
        return;
    };
    let config = Config {
        max_frame_bytes: 4096,
        max_message_bytes: 8192,
        max_borrowed_payload_bytes: 64,
    };
    let mut client = Client::with_mask_rng(config, MaskRng::from_seed(1));
    let cut = usize::from(cut).min(wire.len());
    let mut pending = wire[..cut].to_vec();
    for rest in [&wire[cut..], &[][..]] {
        loop {
            match client.read(&pending) {
                Ok(read) => {
                    let stop = matches!(read.event, Event::NeedMore | Event::Closed);
                    assert_eq!(read.consumed == 0, stop);
                    pending.drain(..read.consumed);
                    if stop {
                        break;
                    }
                }
                Err(_) => {
                    assert_eq!(client.state(), State::Closed);
                    assert!(!client.output().is_empty());
                    return;
                }
            }
        }
        pending.extend_from_slice(rest);
    }
});
