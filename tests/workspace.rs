//! The product apart from its development tools: the binary `scripts/install.sh` builds (the
//! command without its `dev-tools` feature) depends on no simulator, no benchmark harness and no
//! rcgen, and the appliance crate's sources carry no private key; the default build, which
//! `cargo run -- demo` uses, does link the simulators.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The packages the command's normal (non-dev, non-build) dependency graph holds, one per line.
fn dependency_tree(features: &[&str]) -> String {
    package_tree("tickwire-cli", features)
}

/// The packages `package`'s normal dependency graph holds, one per line.
fn package_tree(package: &str, features: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .current_dir(repo())
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(features)
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn packages(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect()
}

#[test]
fn the_installed_build_holds_no_simulator_harness_or_rcgen() {
    let installed = dependency_tree(&["--no-default-features"]);
    let installed = packages(&installed);
    assert!(installed.contains(&"tickwire"), "{installed:?}");
    for dev_only in ["tickwire-sim", "tickwire-bench", "rcgen"] {
        assert!(
            !installed.contains(&dev_only),
            "the installed build depends on {dev_only}"
        );
    }
    let development = dependency_tree(&[]);
    let development = packages(&development);
    for dev_only in ["tickwire-sim", "tickwire-bench", "rcgen"] {
        assert!(
            development.contains(&dev_only),
            "the default build should link {dev_only} for demo, sim and bench"
        );
    }
}

/// The SBE tool's generated Binance Spot codecs are a test, benchmark and simulator peer only
/// (ARCHITECTURE.md): the appliance crate never links them, nor does the installed command
/// (`--no-default-features`). The simulator (`tickwire-sim`, its Binance Spot SBE server)
/// encodes with them, so the default build, whose `dev-tools` feature links the simulator, does.
#[test]
fn the_generated_sbe_codecs_are_dev_only() {
    let appliance = package_tree("tickwire", &[]);
    assert!(
        !packages(&appliance).contains(&"binance-sbe-official"),
        "crates/tickwire's dependency graph holds binance-sbe-official"
    );
    let installed = dependency_tree(&["--no-default-features"]);
    assert!(
        !packages(&installed).contains(&"binance-sbe-official"),
        "the installed build (--no-default-features) holds binance-sbe-official"
    );
    let simulator = package_tree("tickwire-sim", &[]);
    assert!(
        packages(&simulator).contains(&"binance-sbe-official"),
        "the simulator encodes its SBE frames with the official codecs"
    );
}

/// A PEM private key's first line and the start of its body (every DER key is a SEQUENCE, `MI` in
/// base64); the docs that name the PEM forms are not keys.
const KEY_BODY: &[u8] = b"PRIVATE KEY-----\nMI";

#[test]
fn the_appliance_crate_carries_no_private_key() {
    fn walk(folder: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if std::fs::read(&path)
                .map(|bytes| {
                    bytes
                        .windows(KEY_BODY.len())
                        .any(|window| window == KEY_BODY)
                })
                .unwrap_or(false)
            {
                found.push(path);
            }
        }
    }
    let mut simulator = Vec::new();
    walk(&repo().join("crates/tickwire-sim/src"), &mut simulator);
    assert!(
        !simulator.is_empty(),
        "the simulator's test key should be found: the check itself is broken"
    );
    let mut found = Vec::new();
    walk(&repo().join("crates/tickwire"), &mut found);
    walk(&repo().join("src"), &mut found);
    assert!(found.is_empty(), "private keys in the appliance: {found:?}");
}
