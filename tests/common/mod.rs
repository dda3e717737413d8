//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// The shared captures folder (`../shared/data` beside the checkout), or `None` with a printed
/// reason when it is absent. Under `TICKWIRE_REQUIRE_SHARED_DATA=1` (set by `.ci/run`, which
/// always has the folder) a missing file is a failure instead of a skip.
pub fn shared_data(relative: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(relative);
    if path.is_file() {
        return Some(path);
    }
    let required = std::env::var("TICKWIRE_REQUIRE_SHARED_DATA").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_SHARED_DATA=1 but {} is missing",
        path.display()
    );
    println!(
        "SKIPPED: {} is not here (a fresh clone has no ../shared); this test needs the real capture",
        path.display()
    );
    None
}
