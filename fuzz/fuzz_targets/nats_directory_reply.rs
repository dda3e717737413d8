//! `tickwire_nats::wire::decode_directory_reply` on arbitrary bytes: the instrument directory a
//! remote consumer asks the bridge for. It must never panic, and an accepted reply holds no more
//! entries than a reply may.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_nats::wire::{decode_directory_reply, DIRECTORY_ENTRIES_PER_REPLY};

fuzz_target!(|data: &[u8]| {
    if let Ok(reply) = decode_directory_reply(data) {
        assert!(reply.entries.len() <= DIRECTORY_ENTRIES_PER_REPLY);
    }
});
