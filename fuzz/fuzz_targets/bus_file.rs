//! The bus reader on arbitrary file contents: a reader opens whatever a file at the bus path holds
//! (a damaged bus, another program's file), so `BusReader::open` must refuse anything that is not
//! a whole bus of this layout with an error, and a file it accepts must read (events, the
//! directory) without a panic, a SIGBUS or an out-of-bounds access; and a snapshot request
//! datagram of arbitrary bytes must parse or be refused, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_bus::event::Event;
use tickwire_bus::{BusReader, SnapshotRequest, Start};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = SnapshotRequest::from_bytes(data) {
        assert_eq!(SnapshotRequest::from_bytes(&request.to_bytes()), Ok(request));
    }
    let dir = std::env::temp_dir().join(format!("tickwire-fuzz-bus-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("fuzz.bus");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for start in [Start::Latest, Start::Oldest] {
        if let Ok(mut reader) = BusReader::open(&path, start, 64) {
            let mut out = vec![Event::from_words([0, 0, 0, 6 << 48, 0, 0, 0, 0]).unwrap(); 64];
            for _ in 0..4 {
                match reader.read(&mut out) {
                    Ok(batch) => assert!(batch.count <= out.len()),
                    Err(_) => break,
                }
            }
            for entry in reader.directory() {
                let _ = entry.symbol.len();
            }
            let _ = (reader.is_closed(), reader.lag(), reader.epoch());
        }
    }
});
