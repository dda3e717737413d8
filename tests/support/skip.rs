//! Skipped tests, made visible under a plain `cargo test`.
//!
//! libtest has no "skipped" result: a test that returns early for want of `../shared`, a tool or
//! root passes as `ok`, and what it prints goes to the captured output nobody sees. [`skipped`]
//! writes the reason straight to the process's standard error, which libtest does not capture
//! (it captures only the `print!` family), so the line shows among the `test ... ok` lines; and it
//! keeps the reason, so that when the test binary exits (its `test result:` line printed) it
//! writes how many tests skipped, each with its reason, as the run's last lines.
//!
//! Std-only, so that any test binary can include it (`#[path = ".../tests/support/skip.rs"] mod
//! skip;`). The `TICKWIRE_REQUIRE_*` variables that turn a skip into a failure are checked by the
//! callers, before they skip.

use std::io::Write;
use std::sync::{Mutex, Once};

static SKIPS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static SUMMARY_AT_EXIT: Once = Once::new();

extern "C" {
    /// C's `atexit`: libtest's `main` returns (or calls `exit`) once every test has run, and the
    /// C runtime then calls the functions registered here.
    fn atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
}

/// Says that the running test skips, and why: one `SKIPPED <test>: <reason>` line on standard
/// error now, and the same line again in the summary when the binary exits. The caller returns
/// right after (the test then passes, as libtest has no other way to end it).
#[allow(dead_code, reason = "each test binary uses some of these helpers")]
pub fn skipped(reason: impl std::fmt::Display) {
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map_or_else(|| "a test".to_owned(), str::to_owned);
    let line = format!("SKIPPED {test}: {reason}");
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    if let Ok(mut skips) = SKIPS.lock() {
        if !skips.contains(&line) {
            skips.push(line);
        }
    }
    SUMMARY_AT_EXIT.call_once(|| {
        // SAFETY: `atexit` only stores the pointer to a function that lives as long as the
        // program; `summary` takes no arguments, returns nothing and does not unwind.
        unsafe {
            atexit(summary);
        }
    });
}

/// The skips of this binary, written when it exits.
extern "C" fn summary() {
    // `try_lock`: a test thread still running at exit (a failed run) must not block the exit.
    let Ok(skips) = SKIPS.try_lock() else {
        return;
    };
    if skips.is_empty() {
        return;
    }
    let tests: std::collections::BTreeSet<&str> = skips
        .iter()
        .map(|line| {
            line.split_once(": ")
                .map_or(line.as_str(), |(test, _)| test)
        })
        .collect();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut text = format!(
        "\n{}: {} in {}, each passed as ok without testing what it lacks (see the README, \
         \"Tests that skip\"):\n",
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe
                .file_name()
                .map(|name| name.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "this test binary".to_owned()),
        plural(skips.len(), "skip", "skips"),
        plural(tests.len(), "test", "tests"),
    );
    for line in skips.iter() {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
