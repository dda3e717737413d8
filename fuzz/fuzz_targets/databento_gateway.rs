//! The Databento gateway's authentication preamble (`venue::databento::gateway::GatewayAuth`,
//! run by the network thread before the DBN stream) on arbitrary bytes from the server, split
//! at an arbitrary point as TCP may split them: it must never panic, never consume more than it
//! was given, and once it says done it stays done.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::net::engine::Preamble;
use tickwire::venue::databento::gateway::{GatewayAuth, SessionOptions};

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(data.len());
    let options = SessionOptions {
        dataset: "GLBX.MDP3".to_owned(),
        ts_out: false,
        heartbeat_interval_s: None,
        slow_reader_behavior: None,
    };
    let mut auth = GatewayAuth::new("db-tickwire-test-key-00000000001".to_owned(), options);
    let mut reply = Vec::new();
    // What a stream holds: the input arrives in two reads, each re-offered from the first byte
    // the preamble has not consumed.
    let mut pending: Vec<u8> = Vec::new();
    let mut done = false;
    for chunk in [&data[..split], &data[split..]] {
        pending.extend_from_slice(chunk);
        match auth.read(&pending, &mut reply) {
            Ok(step) => {
                assert!(step.consumed <= pending.len());
                assert!(!done || step.done, "a finished preamble stays finished");
                done = step.done;
                pending.drain(..step.consumed);
            }
            Err(_) => return,
        }
    }
});
