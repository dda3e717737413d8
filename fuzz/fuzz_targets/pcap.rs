//! The capture readers of `venue::nasdaq_itch::pcap` (issue 37) on arbitrary bytes: as a
//! classic pcap or pcapng file (every datagram's payload then read as a MoldUDP64 packet and
//! its messages as ITCH), and as a raw ITCH file. Nothing may panic or read outside the input;
//! a truncated record must end the reading with an error (seeds in `fuzz/seeds/pcap/`, written
//! by `TICKWIRE_WRITE_SEEDS=1 cargo test -p tickwire --test itch_fuzz_seeds`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::nasdaq_itch::itch;
use tickwire::venue::nasdaq_itch::mold::Packet;
use tickwire::venue::nasdaq_itch::pcap::{Capture, RawItch};

fuzz_target!(|data: &[u8]| {
    if let Ok(capture) = Capture::new(data) {
        let mut failed = false;
        for datagram in capture {
            assert!(!failed, "nothing after an error");
            match datagram {
                Ok(datagram) => {
                    if let Ok(packet) = Packet::parse(datagram.payload) {
                        for (_, message) in packet.messages() {
                            let _ = itch::parse(message);
                        }
                    }
                }
                Err(_) => failed = true,
            }
        }
    }
    for message in RawItch::new(data) {
        match message {
            Ok(message) => {
                let _ = itch::parse(message);
            }
            Err(_) => break,
        }
    }
});
