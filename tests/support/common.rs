//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// The shared captures folder (`../shared/data` beside the checkout), or `None` with a printed
/// reason when it is absent. Under `TICKWIRE_REQUIRE_SHARED_DATA=1` (set by `.ci/run`, which
/// always has the folder) a missing file is a failure instead of a skip.
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn shared_data(relative: &str) -> Option<PathBuf> {
    shared(
        "data",
        relative,
        |path| path.is_file(),
        "this test needs the real capture",
    )
}

/// `../shared/<folder>/<relative>` when `present` says it is there; else `None` with a printed
/// reason, or a failure under `TICKWIRE_REQUIRE_SHARED_DATA=1`.
fn shared(
    folder: &str,
    relative: &str,
    present: impl Fn(&std::path::Path) -> bool,
    why: &str,
) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(folder)
        .join(relative);
    if present(&path) {
        return Some(path);
    }
    let required = std::env::var("TICKWIRE_REQUIRE_SHARED_DATA").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_SHARED_DATA=1 but {} is missing",
        path.display()
    );
    super::skip::skipped(format_args!(
        "{} is not here (a fresh clone has no ../shared); {why}",
        path.display()
    ));
    None
}

/// Whether python3 with the `websockets` package (client and server) is here, the independent
/// WebSocket implementation some tests talk to; prints why a test skips when it is not. Under
/// `TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS=1` (set by `.ci/run`, which installs it) its absence fails.
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn python_websockets_available() -> bool {
    let ok = std::process::Command::new("python3")
        .args([
            "-c",
            "import websockets.asyncio.server, websockets.asyncio.client",
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required =
            std::env::var("TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS=1 but python3 -c 'import websockets' fails"
        );
        super::skip::skipped(
            "python3 with the websockets package is not installed (pip install websockets)",
        );
    }
    ok
}

/// Prints why an io_uring variant of a test is skipped (io_uring cannot be set up here: a
/// seccomp filter, `kernel.io_uring_disabled`, an old kernel). Under
/// `TICKWIRE_REQUIRE_IO_URING=1` (set by `.ci/run`) the skip is a failure instead, so CI cannot
/// pass on the epoll variants alone.
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn skip_io_uring(error: &dyn std::fmt::Display) {
    let required = std::env::var("TICKWIRE_REQUIRE_IO_URING").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_IO_URING=1 but io_uring cannot be set up here: {error}"
    );
    super::skip::skipped(format_args!(
        "its io_uring variant: io_uring cannot be set up here: {error}"
    ));
}

/// A shared folder (`../shared/data/<relative>`), or `None` with a printed reason when it is
/// absent; a failure instead under `TICKWIRE_REQUIRE_SHARED_DATA=1`, as [`shared_data`].
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn shared_dir(relative: &str) -> Option<PathBuf> {
    shared(
        "data",
        relative,
        |path| path.is_dir(),
        "this test needs the real files",
    )
}

/// A venue specification under `../shared/reference/<relative>`, or `None` with a printed reason
/// when it is absent; a failure instead under `TICKWIRE_REQUIRE_SHARED_DATA=1`, as
/// [`shared_data`].
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn shared_reference(relative: &str) -> Option<PathBuf> {
    shared(
        "reference",
        relative,
        |path| path.is_file(),
        "this test reads the venue's own specification",
    )
}
