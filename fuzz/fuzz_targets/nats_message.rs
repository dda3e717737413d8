//! `tickwire_nats::wire::decode_message` on arbitrary bytes: what a remote consumer reads from a
//! NATS subject that anyone with publish rights can write to. It must never panic; a refused
//! message appends nothing, and an accepted one encodes back to a message that decodes to the
//! same header and events.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_nats::wire::{decode_message, encode_message};

fuzz_target!(|data: &[u8]| {
    let mut events = Vec::new();
    match decode_message(data, &mut events) {
        Ok(header) => {
            assert!(!events.is_empty());
            let mut again = Vec::new();
            encode_message(header, &events, &mut again);
            let mut reread = Vec::new();
            assert_eq!(decode_message(&again, &mut reread), Ok(header));
            assert_eq!(reread, events);
        }
        Err(_) => assert!(events.is_empty()),
    }
});
