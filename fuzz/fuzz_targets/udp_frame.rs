//! The AF_XDP path's frame parser (`net::xdp::packet::parse`, issue 38) on arbitrary bytes, as
//! the XDP program hands frames over with nothing checked by the kernel: nothing may panic or
//! read outside the frame, and a datagram it accepts must lie inside the frame and agree with
//! its own headers (seeds in `fuzz/seeds/udp_frame/`: frames made by `packet::build`, with and
//! without a VLAN tag, and with IP options).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::net::xdp::packet::parse;

fuzz_target!(|data: &[u8]| {
    for verify in [false, true] {
        if let Ok(datagram) = parse(data, verify) {
            let start = datagram.payload.as_ptr() as usize - data.as_ptr() as usize;
            assert!(start + datagram.payload.len() <= data.len());
            assert!(start >= 14 + 20 + 8);
        }
    }
});
