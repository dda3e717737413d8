//! ARCHITECTURE.md stays true to the tree: every module of every crate is named in it, and every
//! path it names exists.
//!
//! How the map names things, which this test reads:
//! - a heading whose first code span is a crate's source folder (`crates/tickwire/src/`, `src/`)
//!   starts that crate's part of the map;
//! - a bullet whose first code span is a folder (`venue/binance/`) names that module folder, and
//!   bare file names in code spans on that bullet and its indented continuation lines
//!   (`decode.rs`) name files in it; a top-level file of the crate is named the same way on a
//!   bullet whose first code span is the file itself (`event.rs`) or a folder-less bullet of the
//!   crate;
//! - any other code span that looks like a path (it has a `/` or a file extension, and no spaces
//!   or Rust paths) must exist as written: in a crate's part of the map, relative to that crate's
//!   source folder (a bare file name in the bullet's folder first) or to the repository root;
//!   elsewhere, relative to the repository root. A path is never looked for in another crate.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const EXTENSIONS: [&str; 9] = [
    ".rs", ".toml", ".md", ".sh", ".py", ".service", ".pem", ".yaml", ".json",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate's source folder, relative to the repository root.
fn crate_sources() -> Vec<String> {
    let mut out = vec!["src/".to_owned()];
    let crates = std::fs::read_dir(repo().join("crates")).expect("crates/ exists");
    for entry in crates {
        let path = entry.unwrap().path();
        if path.join("Cargo.toml").exists() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push(format!("crates/{name}/src/"));
        }
    }
    out.sort();
    out
}

/// Every module file under `source` (relative to the root), as paths relative to `source`:
/// `venue/binance/decode.rs`; a folder module (`mod.rs`) as its folder, `venue/binance/`.
fn modules(source: &str) -> Vec<String> {
    fn walk(root: &Path, folder: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if path.join("mod.rs").exists() {
                    out.push(format!("{relative}/"));
                }
                walk(root, &path, out);
            } else if relative.ends_with(".rs") {
                let name = path.file_name().unwrap().to_string_lossy();
                if !matches!(name.as_ref(), "mod.rs" | "lib.rs" | "main.rs") {
                    out.push(relative);
                }
            }
        }
    }
    let root = repo().join(source);
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// The code spans of a line.
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

fn looks_like_path(span: &str) -> bool {
    let plain = !span.is_empty()
        && !span.contains([' ', '*', '<', '>', '{', '}', '$', '=', '(', '@', '|'])
        && !span.contains("::")
        && !span.contains("..")
        && !span.starts_with('-')
        && !span.starts_with('/')
        && !span.contains("://");
    plain && (span.contains('/') || EXTENSIONS.iter().any(|ext| span.ends_with(ext)))
}

#[test]
fn architecture_md_names_every_module_and_only_paths_that_exist() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let sources = crate_sources();
    // What the map names: (crate source, path relative to it).
    let mut named: BTreeSet<(String, String)> = BTreeSet::new();
    let mut missing_paths = Vec::new();
    let mut crate_source: Option<String> = None;
    let mut folder = String::new();
    for (number, line) in text.lines().enumerate() {
        let spans = spans(line);
        let first = spans.first().copied().unwrap_or_default();
        if line.starts_with('#') {
            folder.clear();
            crate_source = sources.iter().find(|source| *source == first).cloned();
        } else if line.starts_with("- ") || line.starts_with("* ") {
            // A bullet's context is the first folder it names (`thalex.rs` and `thalex/`).
            folder = spans
                .iter()
                .find(|span| span.ends_with('/') && looks_like_path(span))
                .map(|span| span.to_string())
                .unwrap_or_default();
        } else if line.trim().is_empty() {
            folder.clear();
        }
        for span in spans {
            if !looks_like_path(span) {
                continue;
            }
            // As written: within the crate being described (a bare file name within the bullet's
            // folder), or from the repository root.
            let mut found = false;
            if let Some(base) = &crate_source {
                let mut candidates = vec![span.to_owned()];
                if !span.contains('/') && !folder.is_empty() {
                    candidates.insert(0, format!("{folder}{span}"));
                }
                if let Some(relative) = candidates
                    .into_iter()
                    .find(|relative| repo().join(base).join(relative).exists())
                {
                    named.insert((base.clone(), relative));
                    found = true;
                }
            }
            found = found || repo().join(span).exists();
            if !found {
                missing_paths.push(format!("line {}: `{span}`", number + 1));
            }
        }
    }
    let mut unnamed = Vec::new();
    for source in &sources {
        for module in modules(source) {
            if !named.contains(&(source.clone(), module.clone())) {
                unnamed.push(format!("{source}{module}"));
            }
        }
    }
    assert!(
        missing_paths.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n{}",
        missing_paths.join("\n")
    );
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not name these modules:\n{}",
        unnamed.join("\n")
    );
}

/// ARCHITECTURE.md's invariant "`control/` names no venue": no file of the control side names a
/// venue kind (what a venue means to it comes through its `Protocol`).
#[test]
fn the_control_side_names_no_venue_kind() {
    let control = repo().join("crates/tickwire/src/control");
    let mut files = vec![control];
    let mut offenders = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                files.push(entry.unwrap().path());
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("VenueKind") {
                offenders.push(path.display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "control/ names venue kinds: {offenders:?}"
    );
}

/// `tickwire decode` names no venue: each venue's runner is its protocol's capture decoder, in
/// its own folder (`venue/<name>/capture.rs`), found through `VenueKind::ALL`. No venue folder's
/// name, label or `VenueKind` variant appears in `src/cli/decode.rs`.
#[test]
fn the_decode_command_names_no_venue() {
    let text = std::fs::read_to_string(repo().join("src/cli/decode.rs")).unwrap();
    let lower = text.to_ascii_lowercase();
    let mut named = Vec::new();
    for entry in std::fs::read_dir(repo().join("crates/tickwire/src/venue")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // `binance_spot` is also found as `binance`; `bybit` as the labels' prefix.
            for word in [name.clone(), name.replace('_', "-")] {
                if lower.contains(&word) && !named.contains(&word) {
                    named.push(word);
                }
            }
        }
    }
    let variants: Vec<&str> = text
        .match_indices("VenueKind::")
        .map(|(at, _)| {
            let rest = &text[at + "VenueKind::".len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|variant| *variant != "ALL")
        .collect();
    assert!(
        named.is_empty() && variants.is_empty(),
        "src/cli/decode.rs names venues {named:?} and venue kinds {variants:?}"
    );
}

/// REST snapshots are each venue's own (`Protocol::snapshot_target` and its `SnapshotApi`: path,
/// body parser, instrument list), in its folder: the shared fetcher, `venue/snapshot.rs`, names
/// no venue anywhere, comments and tests included, so that a venue with REST snapshots edits no
/// shared code.
#[test]
fn the_snapshot_fetcher_names_no_venue() {
    let text = std::fs::read_to_string(repo().join("crates/tickwire/src/venue/snapshot.rs"))
        .unwrap()
        .to_ascii_lowercase()
        .replace(['_', '-'], "");
    let named: Vec<String> = std::fs::read_dir(repo().join("crates/tickwire/src/venue"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| path.file_name().unwrap().to_string_lossy().replace('_', ""))
        .filter(|venue| text.contains(venue.as_str()))
        .collect();
    assert!(named.is_empty(), "venue/snapshot.rs names venues {named:?}");
}

/// A venue's own table is its folder's business (`FileRules::table`, `Protocol::check_table`):
/// outside `VenueKind` itself (its variants, its spellings and its one match, the lines that name
/// `VenueKind::`), the shared venue-file code in `config/venue.rs` names no venue, so a venue
/// with a table of its own edits no shared config code. Comments and tests are not code.
#[test]
fn the_venue_file_code_names_no_venue_outside_venue_kind() {
    let config = repo().join("crates/tickwire/src/config/venue.rs");
    let text = std::fs::read_to_string(&config).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let venues: Vec<String> = std::fs::read_dir(repo().join("crates/tickwire/src/venue"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| path.file_name().unwrap().to_string_lossy().replace('_', ""))
        .collect();
    let offenders: Vec<String> = code
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim();
            let variant = line.strip_suffix(',').is_some_and(|name| {
                name.starts_with(|c: char| c.is_ascii_uppercase())
                    && name.chars().all(|c| c.is_ascii_alphanumeric())
            });
            !line.starts_with("//") && !line.contains("VenueKind::") && !variant
        })
        .filter(|(_, line)| {
            let squashed = line.to_ascii_lowercase().replace(['_', '-'], "");
            venues.iter().any(|venue| squashed.contains(venue.as_str()))
        })
        .map(|(number, line)| format!("{}: {}", number + 1, line.trim()))
        .collect();
    assert!(
        offenders.is_empty(),
        "config/venue.rs names venues outside VenueKind:\n{}",
        offenders.join("\n")
    );
}
