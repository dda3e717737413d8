//! Config loading on arbitrary text: an appliance file (with a venue file beside it that it may
//! name as `venue.toml`) and a venue file on its own. `check-config` and the appliance's start
//! read files a person wrote, so a broken one must be a list of errors, never a panic (in our
//! validation, or in `toml` and `serde` under it). The first byte chooses which file the rest
//! is; the other one is the shipped example.

#![no_main]

use libfuzzer_sys::fuzz_target;

const APPLIANCE: &str = include_str!("../../config/tickwire.toml");
const VENUE: &str = include_str!("../../config/venues/binance-futures.toml");

fuzz_target!(|data: &[u8]| {
    let [which, rest @ ..] = data else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tickwire-fuzz-config-{}", std::process::id()));
    let _ = std::fs::create_dir_all(dir.join("venues"));
    let (appliance, venue) = if which & 1 == 0 {
        (text, VENUE)
    } else {
        (APPLIANCE, text)
    };
    let appliance_path = dir.join("tickwire.toml");
    let venue_path = dir.join("venues/binance-futures.toml");
    if std::fs::write(&appliance_path, appliance).is_err()
        || std::fs::write(&venue_path, venue).is_err()
    {
        return;
    }
    if let Err(errors) = tickwire::config::load_with_cpu_count(&appliance_path, 4) {
        assert!(!errors.is_empty());
        for error in errors.iter() {
            assert!(!error.to_string().is_empty());
        }
    }
    if let Err(errors) = tickwire::config::load_venue(&venue_path) {
        assert!(!errors.is_empty());
        for error in errors.iter() {
            assert!(!error.to_string().is_empty());
        }
    }
});
