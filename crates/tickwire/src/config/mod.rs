//! Loading and validating the appliance file and the venue files it lists.
//!
//! Two kinds of TOML file configure tickwire. The appliance file (`config/tickwire.toml`) sets
//! logging, metrics, ring sizes, process privileges and thread placement, and lists venue files by
//! path. Each venue file (`config/venues/*.toml`) describes one feed. The shipped examples under
//! `config/` are commented so that the format can be learnt from them.
//!
//! Loading happens once, before any hot thread starts, so this module optimises for the person
//! fixing a file rather than for speed: every error names the file, line, column and dotted key
//! and says what would be valid, and semantic problems are all collected rather than stopping at
//! the first. Every table denies unknown keys, so a typo is an error rather than a silently
//! ignored setting.
//!
//! The pipeline per file is: read, parse with `toml_edit` (syntax errors, and spans for later),
//! reject secret-looking keys, deserialize with serde (first type or shape error), then validate
//! (all semantic errors), locating each problem's key in the parsed document.

mod appliance;
mod endpoint;
mod error;
mod source;
mod venue;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use appliance::{
    host_cpu_count, ApplianceConfig, BridgeConfig, BusConfig, HttpConfig, LogConfig, LogFormat,
    LogLevel, MetricsConfig, NetBackend, NetConfig, NetWait, PrivilegeErrorPolicy, ProcessConfig,
    QuoterConfig, RecordConfig, RecordFsync, RingsConfig, Stage, StrategyConfig, StrategyName,
    ThreadConfig, ThreadsConfig, WaitKind, BUS_FILE_NAME, BUS_SNAPSHOT_LEVELS_PER_S_RANGE,
    BUS_SNAPSHOT_QUEUE_BOOKS_RANGE, MAX_DECODERS,
};
pub use endpoint::{Endpoint, EndpointError, Scheme};
pub use error::{ConfigError, ConfigErrors, CredentialError};
pub use venue::{
    read_venue_table, CredentialsConfig, LifecycleConfig, ReconnectConfig, StalenessConfig,
    TlsConfig, VenueConfig, VenueKind, RECONNECT_DELAY_MS_MAX, RESET_AFTER_LIVE_MS_MAX,
    STALENESS_MS_MAX,
};
// Where these were before a venue's own table moved to its folder (`FileRules::table`): kept
// so that code written against `config::` still builds.
pub use crate::venue::databento::config::{
    DatabentoConfig, Recovery, DATABENTO_SCHEMAS, MAX_INSTRUMENT_MAPPINGS_DEFAULT,
    MAX_INSTRUMENT_MAPPINGS_RANGE, MAX_ORDERS_PER_BOOK_DEFAULT, MAX_ORDERS_PER_BOOK_RANGE,
};

use source::{KeyPath, Problem, SourceFile};

/// An appliance file together with every venue file it lists, all validated.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The appliance file, as passed to `load`.
    pub path: PathBuf,
    pub appliance: ApplianceConfig,
    /// In the order of the appliance file's `venues` list.
    pub venues: Vec<LoadedVenue>,
}

impl LoadedConfig {
    /// The decoder of each venue, by venue index: the venue file's `decoder = N` where it has
    /// one, and otherwise, in the order of the `venues` list, the decoder with the fewest venues
    /// so far (the lowest index among equals), counting the venues that name theirs. The same
    /// files always give the same assignment; `tickwire run` prints it at start.
    pub fn venue_decoders(&self) -> Vec<usize> {
        assign_decoders(
            self.appliance.threads.decoder_count(),
            self.venues.iter().map(|loaded| loaded.venue.decoder),
        )
    }
}

/// [`LoadedConfig::venue_decoders`] for `decoders` decoders and each venue's written choice
/// (one out of range, which `load` refuses, counts as decoder 0).
pub fn assign_decoders(
    decoders: usize,
    written: impl Iterator<Item = Option<usize>> + Clone,
) -> Vec<usize> {
    let decoders = decoders.max(1);
    let mut load = vec![0usize; decoders];
    for decoder in written.clone().flatten() {
        load[if decoder < decoders { decoder } else { 0 }] += 1;
    }
    written
        .map(|choice| match choice {
            Some(decoder) if decoder < decoders => decoder,
            Some(_) => 0,
            None => {
                let (least, _) = load
                    .iter()
                    .enumerate()
                    .min_by_key(|&(index, count)| (*count, index))
                    .unwrap_or((0, &0));
                load[least] += 1;
                least
            }
        })
        .collect()
}

/// One venue file, validated.
#[derive(Debug, Clone)]
pub struct LoadedVenue {
    /// The venue file's path, joined onto the appliance file's directory when it was relative.
    pub path: PathBuf,
    pub venue: VenueConfig,
}

/// The two kinds of config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Appliance,
    Venue,
}

/// Loads the appliance file at `path` and every venue file it lists, checking thread cores
/// against this host's CPU count.
pub fn load(path: &Path) -> Result<LoadedConfig, ConfigErrors> {
    load_with_cpu_count(path, host_cpu_count())
}

/// `load`, checking thread cores against `cpu_count` instead of this host's CPUs: for tests, and
/// for checking a config meant for another machine.
pub fn load_with_cpu_count(path: &Path, cpu_count: usize) -> Result<LoadedConfig, ConfigErrors> {
    let source = SourceFile::read(path)?;
    let secrets = venue::find_secret_keys(&source);
    if !secrets.is_empty() {
        return Err(ConfigErrors(sorted(
            secrets.into_iter().map(|p| source.error(p)).collect(),
        )));
    }
    let raw: appliance::RawAppliance = source.deserialize(appliance::TOP_LEVEL_KEYS)?;
    let venue_paths = raw.venues.clone();

    let mut appliance_errors = Vec::new();
    let appliance = match appliance::validate(raw, cpu_count) {
        Ok(appliance) => Some(appliance),
        Err(problems) => {
            appliance_errors.extend(problems.into_iter().map(|p| source.error(p)));
            None
        }
    };

    // Venue files are loaded even when the appliance file has problems, so that one run reports
    // everything. Empty and repeated entries were already reported by `appliance::validate`.
    let base_dir = path.parent().unwrap_or(Path::new(""));
    let mut venue_errors = Vec::new();
    let mut venues: Vec<(SourceFile, VenueConfig)> = Vec::new();
    for (index, venue_path) in venue_paths.iter().enumerate() {
        let is_repeat = venue_paths[..index].contains(venue_path);
        if venue_path.as_os_str().is_empty() || is_repeat {
            continue;
        }
        let resolved = base_dir.join(venue_path);
        let text = match std::fs::read_to_string(&resolved) {
            Ok(text) => text,
            Err(error) => {
                // The venue file cannot say anything about itself, so the error points at the
                // entry in the appliance file that named it.
                appliance_errors.push(source.error(Problem::new(
                    KeyPath::dotted("venues").index(index),
                    format!("cannot read venue file `{}`: {error}", resolved.display()),
                )));
                continue;
            }
        };
        let venue_source = match SourceFile::parse(resolved, text) {
            Ok(venue_source) => venue_source,
            Err(error) => {
                venue_errors.push(vec![error]);
                continue;
            }
        };
        match load_venue_source(&venue_source) {
            Ok(venue) => venues.push((venue_source, venue)),
            Err(errors) => venue_errors.push(errors),
        }
    }

    // Names label logs and metrics, so two venues with one name would be indistinguishable there.
    let mut first_with_name: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut duplicate_names = Vec::new();
    for (venue_source, venue) in &venues {
        if let Some(first) = first_with_name.get(venue.name.as_str()) {
            duplicate_names.push(venue_source.error(Problem::new(
                KeyPath::dotted("name"),
                format!(
                    "venue name \"{}\" is already used by `{}`; names must be unique across \
                     venue files",
                    venue.name,
                    first.display()
                ),
            )));
        } else {
            first_with_name.insert(&venue.name, venue_source.path());
        }
    }

    if let Some(appliance) = &appliance {
        let count = appliance.threads.decoder_count();
        for (venue_source, venue) in &venues {
            if let Some(decoder) = venue.decoder {
                if decoder >= count {
                    venue_errors.push(vec![venue_source.error(Problem::new(
                        KeyPath::dotted("decoder"),
                        format!(
                            "decoder {decoder} does not exist: `{}` has {count} decoder{} \
                             ([[threads.decoders]]), so valid values are 0 to {}",
                            path.display(),
                            if count == 1 { "" } else { "s" },
                            count - 1
                        ),
                    ))]);
                }
            }
        }
    }

    if let Some(bus) = appliance
        .as_ref()
        .and_then(|appliance| appliance.bus.as_ref())
    {
        if let Some(problem) = bus_capacity_problem(bus, &venues) {
            appliance_errors.push(source.error(problem));
        }
    }

    let mut errors = sorted(appliance_errors);
    for file_errors in venue_errors {
        errors.extend(sorted(file_errors));
    }
    errors.extend(duplicate_names);
    match appliance {
        Some(appliance) if errors.is_empty() => Ok(LoadedConfig {
            path: path.to_path_buf(),
            appliance,
            venues: venues
                .into_iter()
                .map(|(venue_source, venue)| LoadedVenue {
                    path: venue_source.path().to_path_buf(),
                    venue,
                })
                .collect(),
        }),
        _ => Err(ConfigErrors(errors)),
    }
}

/// How many of the largest snapshot a venue can write the bus's ring must hold (issue 33): a
/// snapshot a reader asks for is written for every reader, and on a ring that holds less than a
/// few of them it laps the readers that did not ask (each of which then asks for books in turn:
/// an overrun storm). At 4,096 slots one late joiner's 2,002-event snapshots made the other
/// readers miss events; at four snapshots' worth they did not.
pub const BUS_CAPACITY_SNAPSHOTS: u64 = 4;

/// The events of one book snapshot of a venue: `book_depth` levels a side, its begin and end.
pub fn snapshot_events(venue: &VenueConfig) -> u64 {
    2 * u64::from(venue.book_depth) + 2
}

/// The most requested books the decoder may write at once: the budget's bucket (a tenth of a
/// second of `[bus] snapshot_levels_per_s`, `pipeline::book_requests`), plus one book larger
/// than what is left in it.
pub fn snapshot_burst_events(bus: &BusConfig, largest_snapshot: u64) -> u64 {
    (bus.snapshot_levels_per_s / crate::pipeline::book_requests::BURST_DIVISOR)
        .saturating_add(largest_snapshot)
}

/// `[bus] capacity` checked against the largest snapshot the venues can write: a problem (what
/// to set) when the ring holds fewer than [`BUS_CAPACITY_SNAPSHOTS`] of them, or less than
/// twice the most the readers' budget lets the decoder write at once
/// ([`snapshot_burst_events`]): either would let the books one reader asks for lap the others.
fn bus_capacity_problem(bus: &BusConfig, venues: &[(SourceFile, VenueConfig)]) -> Option<Problem> {
    let capacity = bus.capacity;
    let (_, largest) = venues
        .iter()
        .max_by_key(|(_, venue)| snapshot_events(venue))?;
    let events = snapshot_events(largest);
    let needed = events.saturating_mul(BUS_CAPACITY_SNAPSHOTS);
    let burst = snapshot_burst_events(bus, events);
    if capacity >= needed && capacity >= burst.saturating_mul(2) {
        return None;
    }
    if capacity >= needed {
        let suggest = burst
            .saturating_mul(2)
            .checked_next_power_of_two()
            .unwrap_or(tickwire_bus::layout::MAX_CAPACITY);
        let levels_per_s = (capacity / 2)
            .saturating_sub(events)
            .saturating_mul(crate::pipeline::book_requests::BURST_DIVISOR);
        return Some(Problem::new(
            KeyPath::dotted("bus.capacity"),
            format!(
                "{capacity} is too small for the readers' book budget: snapshot_levels_per_s = \
                 {} lets the decoder write {burst} events of requested books at once (a tenth of \
                 a second's budget plus one book of venue \"{}\"), and the ring must hold twice \
                 that, or the books one reader asks for lap the others; set capacity = \
                 {suggest} or more, or snapshot_levels_per_s = {levels_per_s} or less",
                bus.snapshot_levels_per_s, largest.name
            ),
        ));
    }
    let suggest = needed
        .checked_next_power_of_two()
        .unwrap_or(tickwire_bus::layout::MAX_CAPACITY);
    Some(Problem::new(
        KeyPath::dotted("bus.capacity"),
        format!(
            "{capacity} is too small for venue \"{}\": its book snapshots are {events} events \
             (book_depth = {} levels a side), and the ring must hold {BUS_CAPACITY_SNAPSHOTS} of \
             them, or a snapshot one reader asks for laps the others; set capacity = {suggest} \
             or more (or a smaller book_depth in that venue file)",
            largest.name, largest.book_depth
        ),
    ))
}

/// Loads and validates a single venue file.
pub fn load_venue(path: &Path) -> Result<VenueConfig, ConfigErrors> {
    let source = SourceFile::read(path)?;
    load_venue_source(&source).map_err(ConfigErrors)
}

/// Loads a venue file from its text, as if it were `venue.toml` in the working directory: unit
/// tests elsewhere in the crate build their venues this way.
#[cfg(test)]
pub(crate) fn venue_from_text(text: &str) -> Result<VenueConfig, ConfigErrors> {
    let source = SourceFile::parse(std::path::PathBuf::from("venue.toml"), text.to_owned())
        .map_err(|error| ConfigErrors(vec![error]))?;
    load_venue_source(&source).map_err(ConfigErrors)
}

fn load_venue_source(source: &SourceFile) -> Result<VenueConfig, Vec<ConfigError>> {
    let secrets = venue::find_secret_keys(source);
    if !secrets.is_empty() {
        return Err(sorted(
            secrets.into_iter().map(|p| source.error(p)).collect(),
        ));
    }
    if let Some(problem) = venue::check_top_level_keys(source) {
        return Err(vec![source.error(problem)]);
    }
    let mut raw: venue::RawVenue = source.deserialize(venue::TOP_LEVEL_KEYS).map_err(|error| {
        vec![venue::misplaced_key(source, &error).map_or(error, |problem| source.error(problem))]
    })?;
    raw.table = venue::own_table(source, raw.kind());
    let venue_dir = source.path().parent().unwrap_or(Path::new(""));
    venue::validate(raw, venue_dir)
        .map_err(|problems| sorted(problems.into_iter().map(|p| source.error(p)).collect()))
}

/// Tells an appliance file from a venue file by its top-level keys, without validating it: a
/// venue file has a top-level `kind` key, an appliance file any of its own top-level keys
/// (`[threads]`, `[http]`, `[bus]`, `venues`, ...; `[threads]` may be left out).
pub fn detect_kind(path: &Path) -> Result<FileKind, ConfigErrors> {
    let source = SourceFile::read(path)?;
    let root = source.root();
    let appliance_key = appliance::TOP_LEVEL_KEYS
        .iter()
        .any(|key| root.contains_key(key));
    let kind = match (
        root.contains_key("threads"),
        appliance_key,
        root.contains_key("kind"),
    ) {
        (true, _, true) => {
            return Err(source
                .error(Problem::new(
                    KeyPath::dotted("kind"),
                    "this file has both a top-level [threads] table, which marks an appliance \
                     file, and a top-level `kind` key, which marks a venue file; a file is one or \
                     the other",
                ))
                .into())
        }
        (_, _, true) => FileKind::Venue,
        (_, true, false) => FileKind::Appliance,
        (_, false, false) => {
            return Err(source
                .error(Problem::new(
                    KeyPath::default(),
                    "cannot tell what kind of config file this is: an appliance file has \
                     top-level tables such as [threads], [http] or [bus], or a `venues` list; a \
                     venue file has a top-level `kind` key",
                ))
                .into())
        }
    };
    Ok(kind)
}

/// Detects what kind of file `path` is, then loads and validates it fully (for an appliance file,
/// including the venue files it lists).
pub fn check_file(path: &Path) -> Result<FileKind, ConfigErrors> {
    let kind = detect_kind(path)?;
    match kind {
        FileKind::Appliance => load(path).map(|_| kind),
        FileKind::Venue => load_venue(path).map(|_| kind),
    }
}

/// Orders one file's errors by position, which is how a reader works through them.
fn sorted(mut errors: Vec<ConfigError>) -> Vec<ConfigError> {
    errors.sort_by_key(|error| (error.line, error.column));
    errors
}
