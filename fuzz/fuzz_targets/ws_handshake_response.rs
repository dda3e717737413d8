//! `Handshake::parse_response` on arbitrary bytes, fed in growing prefixes as they would
//! arrive: it must never panic, and `Done` must never claim more bytes than it was given.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::ws::{Handshake, HandshakeStatus};

fuzz_target!(|data: &[u8]| {
    let mut handshake = Handshake::with_nonce(*b"the sample nonce");
    for end in (0..=data.len())
        .step_by(7)
        .chain(std::iter::once(data.len()))
    {
        match handshake.parse_response(&data[..end]) {
            Ok(HandshakeStatus::NeedMore) => {}
            Ok(HandshakeStatus::Done { consumed }) => {
                assert!(consumed <= end);
                return;
            }
            Err(_) => return,
        }
    }
});
