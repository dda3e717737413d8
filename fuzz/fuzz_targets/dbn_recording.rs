//! The DBN recording reader (`tickwire_record::RecordingReader`, what `tickwire replay` and
//! `sim --source` open) on arbitrary files: a damaged or foreign recording must be an error
//! naming an offset inside the file, never a panic, in our reader or in the `dbn` and `zstd`
//! crates under it. The first byte chooses whether the rest is written as it is (a file as found
//! on disk) or zstd-compressed first (so the fuzzer reaches the DBN decoder behind the frame).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_record::RecordingReader;

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else {
        return;
    };
    let bytes = if mode & 1 == 1 {
        match zstd::bulk::compress(rest, 1) {
            Ok(bytes) => bytes,
            Err(_) => return,
        }
    } else {
        rest.to_vec()
    };
    let dir = std::env::temp_dir().join(format!("tickwire-fuzz-dbn-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("fuzz.dbn.zst");
    if std::fs::write(&path, &bytes).is_err() {
        return;
    }
    let Ok(mut reader) = RecordingReader::open(&path) else {
        return;
    };
    // A recording of n bytes holds fewer than n events: a bound that stops a reader that would
    // loop without consuming input.
    for _ in 0..=bytes.len() {
        match reader.next_event() {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(error) => {
                assert!(error.offset <= bytes.len() as u64, "{error}");
                return;
            }
        }
    }
    panic!("more events than the file has bytes");
});
