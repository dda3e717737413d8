//! Integration tests of `tickwire::config`: the shipped examples load, and every kind of mistake
//! is reported against the right file, line, column and key with a message that says what is
//! valid.

use crate::support::sim_ca::{with_ca_file, PLACEHOLDER_CA_PEM, SIM_CA_LINE};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::TempDir;
use tickwire::config::{
    self, ConfigError, ConfigErrors, CredentialError, FileKind, Scheme, Stage, VenueKind, WaitKind,
};

const MINIMAL_VENUE: &str = r#"name = "test-venue"
kind = "binance-usdm-futures"
url = "wss://127.0.0.1:9443"
symbols = ["BTCUSDT"]
channels = ["bookTicker"]
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create test directory");
    }
    std::fs::write(&path, text).expect("write test file");
    path
}

fn errors<T: std::fmt::Debug>(result: Result<T, ConfigErrors>) -> Vec<ConfigError> {
    match result {
        Ok(value) => panic!("expected config errors, got {value:#?}"),
        Err(errors) => {
            assert!(!errors.is_empty(), "an Err never holds an empty list");
            errors.0
        }
    }
}

fn only_error<T: std::fmt::Debug>(result: Result<T, ConfigErrors>) -> ConfigError {
    let mut all = errors(result);
    assert_eq!(all.len(), 1, "expected exactly one error, got {all:#?}");
    all.remove(0)
}

fn keys(errors: &[ConfigError]) -> Vec<&str> {
    errors.iter().map(|error| error.key.as_str()).collect()
}

/// The shipped `config/` tree copied into a temporary directory, with the simulator's CA path
/// pointed at a file that exists, so that the examples can be loaded whether or not a simulator
/// has run on this machine.
struct ShippedCopy {
    dir: TempDir,
    ca_file: PathBuf,
}

fn shipped_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

fn shipped_toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read config directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "toml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn copy_shipped() -> ShippedCopy {
    let source = shipped_dir();
    let dir = TempDir::new().expect("temp dir");
    let ca_file = write(dir.path(), "ca.pem", PLACEHOLDER_CA_PEM);
    let mut rewrote_ca = false;
    for file in shipped_toml_files(&source) {
        let relative = file.strip_prefix(&source).expect("file under config/");
        let mut text = std::fs::read_to_string(&file).expect("read shipped file");
        if text.contains(SIM_CA_LINE) {
            text = with_ca_file(&text, &ca_file);
            rewrote_ca = true;
        }
        write(dir.path(), &relative.to_string_lossy(), &text);
    }
    assert!(rewrote_ca, "the simulator venue file sets {SIM_CA_LINE}");
    ShippedCopy { dir, ca_file }
}

#[test]
fn every_shipped_example_file_loads() {
    let copy = copy_shipped();
    let files = shipped_toml_files(copy.dir.path());
    assert!(
        files.len() >= 4,
        "expected the appliance file and three venues, found {files:?}"
    );
    for file in &files {
        let kind = config::check_file(file).unwrap_or_else(|errors| panic!("{errors}"));
        // Appliance files sit in config/ itself (tickwire.toml, tickwire-lean.toml), venue
        // files under config/venues/.
        let expected = if file.parent() == Some(copy.dir.path()) {
            FileKind::Appliance
        } else {
            FileKind::Venue
        };
        assert_eq!(kind, expected, "{}", file.display());
    }
}

#[test]
fn shipped_appliance_file_loads_with_its_venue() {
    let copy = copy_shipped();
    let path = copy.dir.path().join("tickwire.toml");
    let loaded = config::load_with_cpu_count(&path, 1).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.path, path);
    assert_eq!(
        loaded.appliance.venues,
        [PathBuf::from("venues/binance-futures.toml")]
    );
    assert_eq!(
        loaded.appliance.threads.decoders[0].fuse_into,
        Some(Stage::Net)
    );
    assert_eq!(loaded.appliance.threads.runs_on(Stage::Decoder), Stage::Net);
    assert_eq!(loaded.venues.len(), 1);
    assert_eq!(
        loaded.venues[0].path,
        copy.dir.path().join("venues/binance-futures.toml")
    );
    assert_eq!(loaded.venues[0].venue.kind, VenueKind::BinanceUsdmFutures);
}

#[test]
fn shipped_simulator_venue_loads() {
    let copy = copy_shipped();
    let sim_path = copy.dir.path().join("venues/binance-futures-sim.toml");
    let venue = config::load_venue(&sim_path).unwrap_or_else(|errors| panic!("{errors}"));
    let sim = config::LoadedVenue {
        path: sim_path.clone(),
        venue,
    };
    assert_eq!(sim.path, sim_path);
    assert_eq!(sim.venue.name, "binance-sim");
    assert_eq!(sim.venue.kind, VenueKind::BinanceUsdmFutures);
    assert_eq!(sim.venue.url.scheme, Scheme::Wss);
    assert_eq!(
        (sim.venue.url.host.as_str(), sim.venue.url.port),
        ("127.0.0.1", 9443)
    );
    assert_eq!(sim.venue.url.path, "/");
    let rest = sim.venue.rest_url.as_ref().expect("sim has a rest_url");
    assert_eq!((rest.scheme, rest.port), (Scheme::Https, 9443));
    assert_eq!(
        sim.venue.tls.extra_ca_file.as_deref(),
        Some(copy.ca_file.as_path())
    );
    assert_eq!(sim.venue.max_streams_per_connection, 1024);
    assert_eq!(sim.venue.staleness.threshold_ms("bookTicker"), Some(500));
    assert_eq!(sim.venue.staleness.threshold_ms("aggTrade"), Some(2000));
}

#[test]
fn shipped_files_load_in_place() {
    let dir = shipped_dir();
    for venue in [
        "binance-futures.toml",
        "binance-futures-testnet.toml",
        "binance-spot.toml",
        "binance-spot-sbe.toml",
        "bybit-spot.toml",
        "bybit-linear.toml",
        "okx.toml",
    ] {
        let path = dir.join("venues").join(venue);
        config::load_venue(&path).unwrap_or_else(|errors| panic!("{errors}"));
    }
    // The shipped appliance file (mainnet venue) loads as it is: the check-config of the README.
    config::load(&dir.join("tickwire.toml")).unwrap_or_else(|errors| panic!("{errors}"));
    // The simulator venue needs the CA file the simulator writes. Without it the only complaint
    // may be that file, reported against the venue file's `tls.extra_ca_file` line.
    let sim = dir.join("venues/binance-futures-sim.toml");
    if Path::new("/tmp/tickwire-sim/ca.pem").is_file() {
        config::load_venue(&sim).unwrap_or_else(|errors| panic!("{errors}"));
    } else {
        let error = only_error(config::load_venue(&sim));
        assert_eq!(error.file, sim);
        assert_eq!(error.key, "tls.extra_ca_file");
        assert!(
            error.message.contains("/tmp/tickwire-sim/ca.pem"),
            "{error}"
        );
    }
}

#[test]
fn a_typo_in_a_key_names_file_line_column_key_and_the_valid_keys() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "tickwire.toml",
        "[threads.net]\ncore = 0\n  wiat = \"spin\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.file, path);
    assert_eq!((error.line, error.column), (3, 3));
    assert_eq!(error.key, "threads.net.wiat");
    assert_eq!(
        error.message,
        "unknown key `wiat`; valid keys here: core, wait, spin_iterations, park_timeout_us, \
         sched_fifo_priority"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "{}:3:3: key `threads.net.wiat`: unknown key `wiat`; valid keys here: core, wait, \
             spin_iterations, park_timeout_us, sched_fifo_priority",
            path.display()
        )
    );
}

#[test]
fn a_top_level_key_below_a_table_header_gets_a_hint() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(dir.path(), "a.toml", "[threads]\nvenues = []\n");
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "threads.venues");
    assert!(
        error
            .message
            .contains("must come before the first [table] header"),
        "{error}"
    );
}

#[test]
fn a_password_in_a_url_is_rejected_without_echoing_it() {
    let dir = TempDir::new().expect("temp dir");
    let text = MINIMAL_VENUE.replace("wss://127.0.0.1", "wss://me:hunter2@127.0.0.1");
    let error = only_error(config::load_venue(&write(dir.path(), "v.toml", &text)));
    assert_eq!(error.key, "url");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[test]
fn net_has_no_fuse_into() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.net]\nfuse_into = \"decoder\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "threads.net.fuse_into");
    assert!(
        error.message.starts_with("unknown key `fuse_into`"),
        "{error}"
    );
}

#[test]
fn a_bad_enum_value_lists_the_valid_values() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.strategy]\nwait = \"spinn\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "threads.strategy.wait");
    assert_eq!((error.line, error.column), (2, 8));
    assert_eq!(
        error.message,
        "invalid value \"spinn\"; valid values: \"spin\", \"spin-then-yield\", \"park\""
    );

    let path = write(
        dir.path(),
        "b.toml",
        "[threads.decoder]\nfuse_into = \"strategy\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "threads.decoder.fuse_into");
    assert_eq!(
        error.message,
        "invalid value \"strategy\"; valid values: \"net\""
    );

    let venue = MINIMAL_VENUE.replace("binance-usdm-futures", "binance-coinm-futures");
    let path = write(dir.path(), "venue.toml", &venue);
    let error = only_error(config::load_venue(&path));
    assert_eq!(
        (error.key.as_str(), error.line, error.column),
        ("kind", 2, 8)
    );
    assert!(
        error.message.contains(
            "\"binance-usdm-futures\", \"binance-spot\", \"binance-spot-sbe\", \
                 \"bybit-spot\", \"bybit-linear\", \"databento\", \"thalex\", \"nasdaq-itch\", \"okx\"",
        ),
        "{error}"
    );
}

/// The shipped Binance Spot simulator file loads, but for the CA file the simulator writes when
/// it is not there.
#[test]
fn the_binance_spot_simulator_file_loads() {
    let sim = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/venues/binance-spot-sim.toml");
    if Path::new("/tmp/tickwire-sim/ca.pem").is_file() {
        let venue = config::load_venue(&sim).unwrap_or_else(|errors| panic!("{errors}"));
        assert_eq!(venue.kind, VenueKind::BinanceSpot);
    } else {
        let error = only_error(config::load_venue(&sim));
        assert_eq!(error.key, "tls.extra_ca_file");
    }
}

/// The shipped Binance Spot SBE simulator file loads, but for the CA file the simulator writes
/// when it is not there.
#[test]
fn the_binance_spot_sbe_simulator_file_loads() {
    let sim = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/venues/binance-spot-sbe-sim.toml");
    if Path::new("/tmp/tickwire-sim/ca.pem").is_file() {
        let venue = config::load_venue(&sim).unwrap_or_else(|errors| panic!("{errors}"));
        assert_eq!(venue.kind, VenueKind::BinanceSpotSbe);
        assert_eq!(venue.url.path, "/stream");
    } else {
        let error = only_error(config::load_venue(&sim));
        assert_eq!(error.key, "tls.extra_ca_file");
    }
}

#[test]
fn a_wrong_type_is_reported_at_the_value() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(dir.path(), "a.toml", "[threads.net]\ncore = -1\n");
    let error = only_error(config::load(&path));
    assert_eq!(
        (error.key.as_str(), error.line, error.column),
        ("threads.net.core", 2, 8)
    );
    assert!(
        error.message.contains("expected a non-negative integer"),
        "{error}"
    );
}

#[test]
fn a_ring_size_must_be_a_power_of_two() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads]\n\n[rings]\nframe_ring_bytes = 100000\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "rings.frame_ring_bytes");
    assert_eq!((error.line, error.column), (4, 1));
    assert!(error.message.contains("not a power of two"), "{error}");
    assert!(error.message.contains("65536 and 131072"), "{error}");
}

#[test]
fn reconnect_max_delay_below_initial_is_rejected() {
    let dir = TempDir::new().expect("temp dir");
    let text =
        format!("{MINIMAL_VENUE}\n[reconnect]\ninitial_delay_ms = 500\nmax_delay_ms = 100\n");
    let path = write(dir.path(), "venue.toml", &text);
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.file, path);
    assert_eq!(error.key, "reconnect.max_delay_ms");
    assert_eq!((error.line, error.column), (9, 1));
    assert!(
        error
            .message
            .contains("less than reconnect.initial_delay_ms (500)"),
        "{error}"
    );
}

/// Issue 32: every key a duration or a budget comes from is bounded, and a value out of range is
/// refused naming the key and the range (a release build would have wrapped the nanoseconds).
#[test]
fn out_of_range_keys_are_refused_naming_the_key_and_the_range() {
    let dir = TempDir::new().expect("temp dir");
    let venue_cases = [
        (
            "[reconnect]\ninitial_delay_ms = 100\nmax_delay_ms = 18446744073709\n",
            "reconnect.max_delay_ms",
            "1 to 3600000",
        ),
        (
            "[reconnect]\ninitial_delay_ms = 3600001\nmax_delay_ms = 3600001\n",
            "reconnect.initial_delay_ms",
            "1 to 3600000",
        ),
        (
            "[reconnect]\nreset_after_live_ms = 9223372036854775807\n",
            "reconnect.reset_after_live_ms",
            "0 to 86400000",
        ),
        (
            "[staleness]\ndefault_ms = 86400001\n",
            "staleness.default_ms",
            "1 to 86400000",
        ),
        (
            "[staleness.channels]\nbookTicker = 9223372036854775807\n",
            "staleness.channels.bookTicker",
            "1 to 86400000",
        ),
    ];
    for (extra, key, range) in venue_cases {
        let path = write(dir.path(), "venue.toml", &format!("{MINIMAL_VENUE}{extra}"));
        // An initial delay past the bound is also above the maximum: both are named.
        let all = errors(config::load_venue(&path));
        let error = all
            .iter()
            .find(|error| error.key == key)
            .unwrap_or_else(|| panic!("no error for {key}: {all:?}"));
        assert!(
            error.message.contains("out of range") && error.message.contains(range),
            "{error}"
        );
    }
    let appliance_cases = [
        (
            "[strategy]\nsummary_interval_ms = 9223372036854775807\n",
            "strategy.summary_interval_ms",
            "0 (never) to 86400000",
        ),
        (
            "[metrics]\nreport_interval_ms = 86400001\n",
            "metrics.report_interval_ms",
            "100 to 86400000",
        ),
        (
            "[bus]\nsnapshot_levels_per_s = 0\n",
            "bus.snapshot_levels_per_s",
            "1000 to 100000000",
        ),
        (
            "[bus]\nsnapshot_levels_per_s = 9223372036854775807\n",
            "bus.snapshot_levels_per_s",
            "1000 to 100000000",
        ),
        (
            "[bus]\nsnapshot_queue_books = 0\n",
            "bus.snapshot_queue_books",
            "1 to 1048576",
        ),
        (
            "[bus]\n[bridge]\njetstream_max_age_s = 9223372036854775807\n",
            "bridge.jetstream_max_age_s",
            "0 (no age limit) to 315360000",
        ),
    ];
    for (extra, key, range) in appliance_cases {
        let path = write(dir.path(), "a.toml", &format!("[threads]\n{extra}"));
        let error = only_error(config::load(&path));
        assert_eq!(error.key, key, "{error}");
        assert!(
            error.message.contains("out of range") && error.message.contains(range),
            "{error}"
        );
    }
    // `arrivals` without a file would record nothing: refused, named; with one it loads.
    let path = write(
        dir.path(),
        "a.toml",
        "[threads]\n[strategy]\nname = \"arrivals\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.key, "strategy.record_file", "{error}");
    assert!(error.message.contains("arrivals"), "{error}");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads]\n[strategy]\nname = \"arrivals\"\nrecord_file = \"/tmp/x\"\n",
    );
    config::load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    // The defaults and the documented ends of each range load.
    let path = write(
        dir.path(),
        "a.toml",
        "[threads]\n[strategy]\nsummary_interval_ms = 86400000\n\
         [bus]\nsnapshot_levels_per_s = 1000\nsnapshot_queue_books = 1048576\n",
    );
    let loaded = config::load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    let bus = loaded.appliance.bus.expect("[bus]");
    assert_eq!(
        (bus.snapshot_levels_per_s, bus.snapshot_queue_books),
        (1_000, 1 << 20)
    );
    let defaults = config::BusConfig::default();
    assert!(config::BUS_SNAPSHOT_LEVELS_PER_S_RANGE.contains(&defaults.snapshot_levels_per_s));
    assert!(config::BUS_SNAPSHOT_QUEUE_BOOKS_RANGE.contains(&defaults.snapshot_queue_books));
}

#[test]
fn lifecycle_timers_are_checked_and_default_when_absent() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(dir.path(), "venue.toml", MINIMAL_VENUE);
    let loaded = config::load_venue(&path).expect("valid");
    assert_eq!(loaded.lifecycle, config::LifecycleConfig::default());
    assert_eq!(loaded.lifecycle.rotate_after_ms, 23 * 3_600_000);
    let text = format!("{MINIMAL_VENUE}\n[lifecycle]\nrotate_after_ms = 500\n");
    let path = write(dir.path(), "venue.toml", &text);
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "lifecycle.rotate_after_ms");
    assert!(error.message.contains("or 0 to never rotate"), "{error}");
    let text = format!("{MINIMAL_VENUE}\n[lifecycle]\nrotate_after_ms = 0\nack_timeout_ms = 5\n");
    let path = write(dir.path(), "venue.toml", &text);
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "lifecycle.ack_timeout_ms");
    assert!(error.message.contains("100 to 600000"), "{error}");
}

#[test]
fn secrets_in_a_venue_file_are_rejected_wherever_they_are() {
    let dir = TempDir::new().expect("temp dir");
    let text = format!(
        "{MINIMAL_VENUE}Token = \"hunter2\"\n[credentials]\napi_key_env = \"X\"\nAPI_SECRET = \"hunter3\"\n"
    );
    let path = write(dir.path(), "venue.toml", &text);
    let all = errors(config::load_venue(&path));
    assert_eq!(keys(&all), ["Token", "credentials.API_SECRET"]);
    assert_eq!((all[0].line, all[0].column), (6, 1));
    for error in &all {
        assert!(error.message.contains("credentials.api_key_env"), "{error}");
        assert!(
            error.message.contains("credentials.api_key_credential"),
            "{error}"
        );
        assert!(
            !error.to_string().contains("hunter"),
            "the secret is echoed: {error}"
        );
    }
}

/// Issue 33: a bus ring that cannot hold a few of the largest snapshot the venues write is
/// refused (a snapshot one reader asks for would lap the others: an overrun storm), saying what
/// to set; the smallest capacity that holds them loads.
#[test]
fn a_bus_ring_smaller_than_a_few_snapshots_is_refused_saying_what_to_set() {
    let dir = TempDir::new().expect("temp dir");
    let venue = format!("{MINIMAL_VENUE}book_depth = 1000\n");
    write(dir.path(), "venues/a.toml", &venue);
    let snapshot = 2 * 1000 + 2;
    let needed = (config::BUS_CAPACITY_SNAPSHOTS * snapshot).next_power_of_two();
    // A budget whose burst (a tenth of a second's levels plus one book) fits twice in the ring.
    let appliance = |capacity: u64| {
        write(
            dir.path(),
            "tickwire.toml",
            &format!(
                "venues = [\"venues/a.toml\"]\n[threads]\n[bus]\npath = \"/tmp/x.bus\"\n\
                 capacity = {capacity}\nsnapshot_levels_per_s = 20000\n"
            ),
        )
    };
    for capacity in [1024, needed / 2] {
        let error = only_error(config::load(&appliance(capacity)));
        assert_eq!(error.key, "bus.capacity", "{error}");
        assert!(
            error
                .message
                .contains(&format!("set capacity = {needed} or more"))
                && error.message.contains("test-venue")
                && error.message.contains(&format!("{snapshot} events")),
            "{error}"
        );
    }
    config::load(&appliance(needed)).expect("a ring of four snapshots loads");
    // The readers' budget may write more than one book at once: the ring must hold twice that
    // burst too, and the message says both ways out.
    let budget = |capacity: u64, levels_per_s: u64| {
        write(
            dir.path(),
            "tickwire.toml",
            &format!(
                "venues = [\"venues/a.toml\"]\n[threads]\n[bus]\npath = \"/tmp/x.bus\"\n\
                 capacity = {capacity}\nsnapshot_levels_per_s = {levels_per_s}\n"
            ),
        )
    };
    let burst = 200_000 / 10 + snapshot;
    let error = only_error(config::load(&budget(4 * needed, 200_000)));
    assert_eq!(error.key, "bus.capacity", "{error}");
    let fits = (4 * needed / 2 - snapshot) * 10;
    assert!(
        error.message.contains(&format!(
            "set capacity = {} or more, or snapshot_levels_per_s = {fits} or less",
            (2 * burst).next_power_of_two()
        )),
        "{error}"
    );
    config::load(&budget(4 * needed, fits)).expect("the budget the message names loads");
    config::load(&budget((2 * burst).next_power_of_two(), 200_000))
        .expect("the capacity the message names loads");
    // A venue with smaller books needs a smaller ring.
    write(
        dir.path(),
        "venues/a.toml",
        &format!("{MINIMAL_VENUE}book_depth = 100\n"),
    );
    config::load(&budget(1024, 3000)).expect("four 202-event snapshots fit in 1024");
}

#[test]
fn venue_names_must_be_unique_across_files() {
    let dir = TempDir::new().expect("temp dir");
    write(dir.path(), "venues/a.toml", MINIMAL_VENUE);
    let second = write(dir.path(), "venues/b.toml", MINIMAL_VENUE);
    let path = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"venues/a.toml\", \"venues/b.toml\"]\n[threads]\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.file, second);
    assert_eq!(
        (error.key.as_str(), error.line, error.column),
        ("name", 1, 1)
    );
    assert!(error.message.contains("already used by"), "{error}");
    assert!(error.message.contains("a.toml"), "{error}");
}

#[test]
fn a_fused_stage_must_not_set_thread_keys() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.decoder]\nfuse_into = \"net\"\ncore = 0\nwait = \"spin\"\n",
    );
    let all = errors(config::load(&path));
    assert_eq!(keys(&all), ["threads.decoder.core", "threads.decoder.wait"]);
    assert_eq!((all[0].line, all[0].column), (3, 1));
    assert!(
        all[0]
            .message
            .starts_with("has no effect when fuse_into is set"),
        "{}",
        all[0]
    );
}

#[test]
fn strategy_fused_into_net_needs_the_decoder_fused_too() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.strategy]\nfuse_into = \"net\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(
        (error.key.as_str(), error.line),
        ("threads.strategy.fuse_into", 2)
    );
    assert!(
        error
            .message
            .contains("threads.decoder.fuse_into = \"net\""),
        "{error}"
    );

    let path = write(
        dir.path(),
        "b.toml",
        "[threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nfuse_into = \"net\"\n",
    );
    let loaded = config::load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(
        loaded.appliance.threads.runs_on(Stage::Strategy),
        Stage::Net
    );
}

#[test]
fn two_spinning_threads_on_one_core_are_rejected() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.net]\ncore = 0\nwait = \"spin\"\n\n[threads.decoder]\ncore = 0\nwait = \"spin\"\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(
        (error.key.as_str(), error.line),
        ("threads.decoder.core", 6)
    );
    assert!(error.message.contains("starve each other"), "{error}");
}

#[test]
fn cores_are_checked_against_the_cpu_count() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads.net]\ncore = 3\nwait = \"spin\"\n",
    );
    let error = only_error(config::load_with_cpu_count(&path, 2));
    assert_eq!(error.key, "threads.net.core");
    assert!(error.message.contains("this host has 2 CPUs"), "{error}");
    let loaded = config::load_with_cpu_count(&path, 4).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.threads.net.wait, WaitKind::Spin);
    assert_eq!(loaded.appliance.pinned_cores(), [3]);
}

#[test]
fn a_missing_venue_file_is_reported_at_the_appliance_entry() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "tickwire.toml",
        "# Venue files.\nvenues = [\n  \"venues/missing.toml\",\n]\n\n[threads]\n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.file, path);
    assert_eq!(error.key, "venues[0]");
    assert_eq!((error.line, error.column), (3, 3));
    assert!(error.message.contains("cannot read venue file"), "{error}");
    assert!(error.message.contains("missing.toml"), "{error}");
}

#[test]
fn a_missing_file_is_an_error_against_that_file() {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("absent.toml");
    let error = only_error(config::load(&path));
    assert_eq!(
        (error.file.as_path(), error.line, error.column),
        (path.as_path(), 1, 1)
    );
    assert_eq!(error.key, "");
    assert!(
        error.to_string().contains(": cannot read this file: "),
        "{error}"
    );
}

#[test]
fn a_toml_syntax_error_gives_line_and_column() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "a.toml",
        "[threads]\n\n[rings]\nframe_ring_bytes = \n",
    );
    let error = only_error(config::load(&path));
    assert_eq!(error.file, path);
    assert_eq!((error.line, error.column), (4, 20));
    assert_eq!(error.key, "");
    assert!(error.message.starts_with("TOML syntax error"), "{error}");
    assert!(
        !error.message.contains('\n'),
        "one error, one line: {error:?}"
    );

    // The same inside a venue file listed by an appliance file is reported against the venue file.
    let venue = write(dir.path(), "venue.toml", "name = \"x\"\nkind = = 1\n");
    let appliance = write(
        dir.path(),
        "b.toml",
        "venues = [\"venue.toml\"]\n[threads]\n",
    );
    let error = only_error(config::load(&appliance));
    assert_eq!((error.file, error.line, error.column), (venue, 2, 8));
}

#[test]
fn several_semantic_errors_are_all_reported_in_line_order() {
    let dir = TempDir::new().expect("temp dir");
    let appliance = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"venue.toml\", \"venue.toml\"]\n\
         [metrics]\nreport_interval_ms = 5\nlatency_digits = 4\n\
         [rings]\nframe_ring_bytes = 1000\nevent_ring_slots = 3000000000\n\
         [threads.net]\ncore = 9\nsched_fifo_priority = 0\npark_timeout_us = 0\n",
    );
    let venue = write(
        dir.path(),
        "venue.toml",
        r#"name = "Bad Name"
kind = "binance-usdm-futures"
url = "tcp://127.0.0.1:9443"
rest_url = "wss://127.0.0.1:9443"
symbols = ["btcusdt", "ETHUSDT", "ETHUSDT"]
channels = ["bookTicker", "depth@1s"]
max_streams_per_connection = 2000

[reconnect]
factor = 1.0
max_attempts_per_minute = 0

[staleness.channels]
"aggTrade" = 100

[credentials]
api_key_env = "1BAD"
"#,
    );
    let all = errors(config::load_with_cpu_count(&appliance, 4));
    let appliance_errors: Vec<&ConfigError> = all.iter().filter(|e| e.file == appliance).collect();
    let venue_errors: Vec<&ConfigError> = all.iter().filter(|e| e.file == venue).collect();
    assert_eq!(appliance_errors.len() + venue_errors.len(), all.len());
    assert_eq!(
        appliance_errors
            .iter()
            .map(|e| e.key.as_str())
            .collect::<Vec<_>>(),
        [
            "venues[1]",
            "metrics.report_interval_ms",
            "metrics.latency_digits",
            "rings.frame_ring_bytes",
            "rings.event_ring_slots",
            "threads.net.core",
            "threads.net.sched_fifo_priority",
            "threads.net.park_timeout_us",
        ]
    );
    assert_eq!(
        venue_errors
            .iter()
            .map(|e| e.key.as_str())
            .collect::<Vec<_>>(),
        [
            "name",
            "url",
            "rest_url",
            "symbols[0]",
            "symbols[2]",
            "channels[1]",
            "max_streams_per_connection",
            "reconnect.factor",
            "reconnect.max_attempts_per_minute",
            "staleness.channels.aggTrade",
            "credentials.api_key_env",
        ]
    );
    let lines: Vec<usize> = venue_errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [1, 3, 4, 5, 5, 6, 7, 10, 11, 14, 17]);
    let url = venue_errors[1];
    assert!(url.message.contains("use wss:// or ws://"), "{url}");
    let channel = venue_errors[5];
    assert!(
        channel.message.contains("valid channels: bookTicker"),
        "{channel}"
    );
    // The whole list displays one error per line.
    let display = ConfigErrors(all.clone()).to_string();
    assert_eq!(display.lines().count(), all.len());
}

#[test]
fn a_missing_required_key_is_named() {
    let dir = TempDir::new().expect("temp dir");
    let text = MINIMAL_VENUE.replace("url = \"wss://127.0.0.1:9443\"\n", "");
    let path = write(dir.path(), "venue.toml", &text);
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "url");
    assert_eq!(error.message, "missing required key `url`");
}

#[test]
fn tls_ca_file_must_exist_and_is_resolved_against_the_venue_file() {
    let dir = TempDir::new().expect("temp dir");
    let text = format!("{MINIMAL_VENUE}[tls]\nextra_ca_file = \"certs/ca.pem\"\n");
    let path = write(dir.path(), "venue.toml", &text);
    let error = only_error(config::load_venue(&path));
    assert_eq!((error.key.as_str(), error.line), ("tls.extra_ca_file", 7));

    let ca = write(dir.path(), "certs/ca.pem", "not checked here\n");
    let venue = config::load_venue(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(venue.tls.extra_ca_file, Some(ca));
}

#[test]
fn detect_kind_tells_the_files_apart() {
    let dir = TempDir::new().expect("temp dir");
    let appliance = write(dir.path(), "a.toml", "[threads.net]\n");
    let venue = write(dir.path(), "v.toml", MINIMAL_VENUE);
    // Neither: no `kind`, and no key an appliance file has.
    let neither = write(dir.path(), "n.toml", "name = \"x\"\n");
    assert_eq!(
        config::detect_kind(&appliance).ok(),
        Some(FileKind::Appliance)
    );
    // [threads] may be left out: any table of the appliance file's marks it.
    for (name, text) in [
        ("log.toml", "[log]\nlevel = \"info\"\n"),
        ("http.toml", "[http]\nlisten = \"127.0.0.1:9464\"\n"),
        ("venues.toml", "venues = []\n"),
    ] {
        let path = write(dir.path(), name, text);
        assert_eq!(
            config::detect_kind(&path).ok(),
            Some(FileKind::Appliance),
            "{text}"
        );
    }
    assert_eq!(config::detect_kind(&venue).ok(), Some(FileKind::Venue));
    let error = only_error(config::detect_kind(&neither));
    assert!(error.message.contains("[threads]"), "{error}");
    assert!(error.message.contains("`kind`"), "{error}");
    assert_eq!(config::check_file(&venue).ok(), Some(FileKind::Venue));
}

#[test]
fn api_key_comes_from_an_environment_variable() {
    let dir = TempDir::new().expect("temp dir");
    // A name of this test's own keeps it independent of every other test running in parallel.
    let variable = "TICKWIRE_TEST_API_KEY_FROM_ENV";
    let text = format!("{MINIMAL_VENUE}[credentials]\napi_key_env = \"{variable}\"\n");
    let venue = config::load_venue(&write(dir.path(), "v.toml", &text))
        .unwrap_or_else(|errors| panic!("{errors}"));

    std::env::remove_var(variable);
    let error = venue.api_key().expect_err("variable is unset");
    assert!(matches!(error, CredentialError::EnvUnset { .. }), "{error}");
    assert!(error.to_string().contains(variable), "{error}");

    std::env::set_var(variable, "abc123\n");
    assert_eq!(
        venue.api_key().expect("variable is set"),
        Some("abc123".to_owned())
    );
    std::env::remove_var(variable);

    let public = config::load_venue(&write(dir.path(), "p.toml", MINIMAL_VENUE))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(public.api_key().expect("no key configured"), None);
}

/// `CREDENTIALS_DIRECTORY` has a fixed name, so the tests that set it take turns.
static CREDENTIALS_DIRECTORY: Mutex<()> = Mutex::new(());

#[test]
fn api_key_comes_from_a_systemd_credential() {
    let dir = TempDir::new().expect("temp dir");
    let text = format!("{MINIMAL_VENUE}[credentials]\napi_key_credential = \"venue-key\"\n");
    let venue = config::load_venue(&write(dir.path(), "v.toml", &text))
        .unwrap_or_else(|errors| panic!("{errors}"));
    let credentials = TempDir::new().expect("credentials dir");

    let _turn = CREDENTIALS_DIRECTORY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    std::env::remove_var("CREDENTIALS_DIRECTORY");
    let error = venue.api_key().expect_err("no credentials directory");
    assert!(
        matches!(error, CredentialError::CredentialsDirectoryUnset { .. }),
        "{error}"
    );

    std::env::set_var("CREDENTIALS_DIRECTORY", credentials.path());
    let error = venue.api_key().expect_err("credential file missing");
    assert!(
        matches!(error, CredentialError::CredentialUnreadable { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("venue-key"), "{error}");

    write(credentials.path(), "venue-key", "s3cr3t-key\n");
    let key = venue.api_key();
    std::env::remove_var("CREDENTIALS_DIRECTORY");
    assert_eq!(
        key.expect("credential is readable"),
        Some("s3cr3t-key".to_owned())
    );
}

#[test]
fn only_one_credential_source_may_be_set() {
    let dir = TempDir::new().expect("temp dir");
    let text =
        format!("{MINIMAL_VENUE}[credentials]\napi_key_env = \"K\"\napi_key_credential = \"k\"\n");
    let error = only_error(config::load_venue(&write(dir.path(), "v.toml", &text)));
    assert_eq!(error.key, "credentials.api_key_credential");
}

#[test]
fn net_settings_load_and_are_checked_against_the_frame_ring() {
    let dir = TempDir::new().expect("temp dir");
    let path = write(
        dir.path(),
        "tickwire.toml",
        "[rings]\nframe_ring_bytes = 1048576\n[net]\nbackend = \"epoll\"\nwait = \"busy-poll\"\n\
         max_message_bytes = 600000\nrecv_buffers = 100\n[threads]\n",
    );
    let all = errors(config::load(&path));
    // Reported in line order.
    assert_eq!(keys(&all), ["net.max_message_bytes", "net.recv_buffers"]);
    assert!(
        all[0].message.contains("valid values are 1024 to 524272"),
        "{}",
        all[0]
    );
    assert_eq!((all[0].line, all[0].column), (6, 1));
    let path = write(
        dir.path(),
        "tickwire.toml",
        "[rings]\nframe_ring_bytes = 1048576\n[net]\nbackend = \"epoll\"\nwait = \"busy-poll\"\n\
         max_message_bytes = 500000\n[threads]\n",
    );
    let loaded = config::load(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.net.backend, config::NetBackend::Epoll);
    assert_eq!(loaded.appliance.net.wait, config::NetWait::BusyPoll);
    let error = only_error(config::load(&write(
        dir.path(),
        "tickwire.toml",
        "[net]\nbackend = \"uring\"\n[threads]\n",
    )));
    assert_eq!(error.key, "net.backend");
    assert!(error.message.contains("io-uring"), "{error}");
}

#[test]
fn book_depth_and_the_rest_url_a_depth_stream_needs_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("venue.toml");
    std::fs::write(
        &path,
        "name = \"b\"\nkind = \"binance-usdm-futures\"\nurl = \"wss://127.0.0.1:9443\"\n\
         symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\", \"depth@100ms\"]\nbook_depth = 7\n",
    )
    .unwrap();
    let errors = tickwire::config::load_venue(&path).unwrap_err().to_string();
    assert!(errors.contains("book_depth"), "{errors}");
    assert!(errors.contains("5, 10, 20, 50, 100, 500, 1000"), "{errors}");
    assert!(errors.contains("rest_url"), "{errors}");
    assert!(errors.contains("needs rest_url"), "{errors}");
    // A partial book stream carries its levels whole and needs no snapshot.
    std::fs::write(
        &path,
        "name = \"b\"\nkind = \"binance-usdm-futures\"\nurl = \"wss://127.0.0.1:9443\"\n\
         symbols = [\"BTCUSDT\"]\nchannels = [\"depth5@100ms\"]\n",
    )
    .unwrap();
    let venue = tickwire::config::load_venue(&path).unwrap();
    assert_eq!(venue.book_depth, 1000);
}

#[test]
fn thalex_venues_resolve_their_heartbeat_and_check_templates_and_keys() {
    let copy = copy_shipped();
    let venue = config::load_venue(&copy.dir.path().join("venues/thalex.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(venue.kind, VenueKind::Thalex);
    assert_eq!(venue.url.path, "/ws/api/v2");
    assert_eq!(venue.lifecycle.ping_interval(), Some(5_000));
    assert_eq!(venue.lifecycle.read_timeout(), Some(7_000));
    let sim = config::load_venue(&copy.dir.path().join("venues/thalex-sim.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    // Not written in the simulator's file: the kind's defaults.
    assert_eq!(sim.lifecycle.ping_interval(), Some(5_000));
    assert_eq!(sim.lifecycle.read_timeout(), Some(7_000));
    assert!(sim.symbols.iter().any(|s| s == "BTC-27JUN25-100000-C"));

    let dir = TempDir::new().expect("temp dir");
    let base = "name = \"t\"\nkind = \"thalex\"\nurl = \"wss://127.0.0.1:9/ws/api/v2\"\n";
    let cases = [
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.1ms\"]\n",
            "channels[0]",
            "malformed",
        ),
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"book.1.10.raw\", \"book.none.all.raw\"]\n",
            "channels[1]",
            "second book channel",
        ),
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"recent_trades.combo\"]\n",
            "channels[0]",
            "single",
        ),
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.3600000ms\"]\n",
            "channels[0]",
            "malformed",
        ),
        (
            "symbols = [\"BTC PERPETUAL\"]\nchannels = [\"ticker.raw\"]\n",
            "symbols[0]",
            "printable ASCII",
        ),
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.raw\"]\n\
             [credentials]\napi_key_env = \"KEY\"\n",
            "credentials.key_id",
            "kid",
        ),
        (
            "symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.raw\"]\n\
             [lifecycle]\nping_interval_ms = 5000\nread_timeout_ms = 4000\n",
            "lifecycle.read_timeout_ms",
            "longer than ping_interval_ms",
        ),
        (
            "rest_url = \"https://127.0.0.1:9\"\nsymbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.raw\"]\n",
            "rest_url",
            "no use",
        ),
    ];
    for (rest, key, words) in cases {
        let path = write(dir.path(), "thalex.toml", &format!("{base}{rest}"));
        let error = only_error(config::load_venue(&path));
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(words), "{error}");
    }
    // A combination, a lowercase-free option name, `[`, `:` and `,` are valid instrument names.
    let path = write(
        dir.path(),
        "thalex.toml",
        &format!(
            "{base}symbols = [\"[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]\"]\n\
             channels = [\"lwt.raw\", \"price_index\", \"book.none.all.raw\", \"recent_trades.future_rolls\"]\n[lifecycle]\nping_interval_ms = 0\n"
        ),
    );
    let venue = config::load_venue(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(venue.lifecycle.ping_interval(), None, "0 turns pings off");
}

#[test]
fn databento_venues_take_a_dataset_schemas_and_a_key_and_never_rotate() {
    let copy = copy_shipped();
    let venue = config::load_venue(&copy.dir.path().join("venues/databento.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(venue.kind, VenueKind::Databento);
    let databento = config::DatabentoConfig::of(&venue).expect("[databento]");
    assert_eq!(databento.dataset, "GLBX.MDP3");
    assert_eq!(databento.recovery, config::Recovery::Replay);
    // The limits the shipped file leaves at their defaults (issue 32).
    assert_eq!(
        databento.max_orders_per_book(),
        config::MAX_ORDERS_PER_BOOK_DEFAULT
    );
    assert_eq!(
        databento.max_instrument_mappings(),
        config::MAX_INSTRUMENT_MAPPINGS_DEFAULT
    );
    assert!(config::MAX_ORDERS_PER_BOOK_RANGE.contains(&config::MAX_ORDERS_PER_BOOK_DEFAULT));
    assert!(
        config::MAX_INSTRUMENT_MAPPINGS_RANGE.contains(&config::MAX_INSTRUMENT_MAPPINGS_DEFAULT)
    );
    // The read timeout follows the heartbeat interval; no pings; no rotation.
    assert_eq!(venue.lifecycle.read_timeout(), Some(15_000));
    assert_eq!(venue.lifecycle.ping_interval(), None);
    assert_eq!(venue.lifecycle.rotate_after_ms, 0);
    let sim = config::load_venue(&copy.dir.path().join("venues/databento-sim.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(sim.lifecycle.read_timeout(), Some(10_000));

    let dir = TempDir::new().expect("temp dir");
    let base = "name = \"d\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:9\"\n\
                symbols = [\"ESZ6\", \"ES.c.0\"]\n";
    let key = "[credentials]\napi_key_env = \"KEY\"\n";
    let cases = [
        (
            format!("channels = [\"mbo\"]\n{key}"),
            "databento",
            "dataset",
        ),
        (
            format!("channels = [\"mbo\"]\n[databento]\ndataset = \"glbx\"\n{key}"),
            "databento.dataset",
            "VENUE.FEED",
        ),
        (
            format!("channels = [\"mbo-1\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n{key}"),
            "channels[0]",
            "not a DBN schema",
        ),
        (
            format!(
                "channels = [\"trades\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 recovery = \"snapshot\"\n{key}"
            ),
            "databento.recovery",
            "only the mbo schema",
        ),
        (
            "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n".to_owned(),
            "credentials",
            "API key",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n{key}\
                 [lifecycle]\nrotate_after_ms = 3600000\n"
            ),
            "lifecycle.rotate_after_ms",
            "must be 0",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 heartbeat_interval_s = 2\n{key}"
            ),
            "databento.heartbeat_interval_s",
            "5 to 1800",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 heartbeat_interval_s = 10\n{key}[lifecycle]\nread_timeout_ms = 9000\n"
            ),
            "lifecycle.read_timeout_ms",
            "heartbeat interval",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 stype_in = \"smart\"\n{key}"
            ),
            "databento.stype_in",
            "input symbology",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 max_orders_per_book = 0\n{key}"
            ),
            "databento.max_orders_per_book",
            "valid values are 1 to 4194304",
        ),
        (
            format!(
                "channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n\
                 max_instrument_mappings = 4294967295\n{key}"
            ),
            "databento.max_instrument_mappings",
            "valid values are 1 to 1048576",
        ),
    ];
    for (rest, key, words) in cases {
        let path = write(dir.path(), "databento.toml", &format!("{base}{rest}"));
        let error = only_error(config::load_venue(&path));
        assert_eq!(error.key, key, "{error}");
        assert!(error.message.contains(words), "{error}");
    }
    // `[databento]` on another kind is a mistake worth naming.
    let path = write(
        dir.path(),
        "binance.toml",
        "name = \"b\"\nkind = \"binance-usdm-futures\"\nurl = \"wss://127.0.0.1:9\"\n\
         symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n",
    );
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "databento");
}

/// A venue's own table is named by its kind (`FileRules::table`) and read in its folder: the
/// table is a valid key for that kind only (listed among the keys valid there, and named as
/// another kind's table elsewhere), an unknown key stays refused with the keys valid for the
/// kind, and the table's own keys keep the config's words (an unknown key with the keys valid
/// there, a missing key, a wrong type), each at its key.
#[test]
fn a_venues_own_table_is_valid_for_its_kind_only_and_keeps_the_configs_words() {
    let dir = TempDir::new().expect("temp dir");
    let binance = "name = \"b\"\nkind = \"binance-usdm-futures\"\nurl = \"wss://127.0.0.1:9\"\n\
                   symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n";
    let databento = "name = \"d\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:9\"\n\
                     symbols = [\"ESZ6\"]\nchannels = [\"mbo\"]\n";
    let key = "[credentials]\napi_key_env = \"KEY\"\n";
    let valid_keys = |error: &config::ConfigError| -> Vec<String> {
        error
            .message
            .split_once("valid keys here: ")
            .map(|(_, valid)| valid.split(", ").map(str::to_owned).collect())
            .unwrap_or_else(|| panic!("no valid keys listed: {}", error.message))
    };
    // An unknown top-level key: the keys valid for the kind, its own table only where it has one.
    let path = write(dir.path(), "b.toml", &format!("{binance}colour = 1\n"));
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "colour", "{error}");
    assert_eq!((error.line, error.column), (6, 1), "{error}");
    assert!(error.message.starts_with("unknown key `colour`"), "{error}");
    let valid = valid_keys(&error);
    assert!(valid.contains(&"channels".to_owned()), "{error}");
    assert!(!valid.contains(&"databento".to_owned()), "{error}");
    let path = write(
        dir.path(),
        "d.toml",
        &format!("{databento}colour = 1\n{key}[databento]\ndataset = \"GLBX.MDP3\"\n"),
    );
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "colour", "{error}");
    assert!(
        valid_keys(&error).contains(&"databento".to_owned()),
        "{error}"
    );
    // Another kind's table, named as such.
    let path = write(
        dir.path(),
        "b.toml",
        &format!("{binance}[databento]\ndataset = \"GLBX.MDP3\"\n"),
    );
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "databento", "{error}");
    assert_eq!(
        error.message,
        "is only for kind = \"databento\"; this venue is binance-usdm-futures"
    );
    // The table's own keys, read in the venue's folder.
    let cases = [
        (
            "dataset = \"GLBX.MDP3\"\ndatset = 1\n",
            "databento.datset",
            "unknown key `datset`; valid keys here: dataset, stype_in, recovery",
        ),
        (
            "dataset = \"GLBX.MDP3\"\nsymbols = [\"ESZ6\"]\n",
            "databento.symbols",
            "`symbols` is a top-level key, so it must come before the first [table] header",
        ),
        (
            "stype_in = \"parent\"\n",
            "databento.dataset",
            "missing required key `dataset`",
        ),
        (
            "dataset = \"GLBX.MDP3\"\nrecovery = \"later\"\n",
            "databento.recovery",
            "invalid value \"later\"; valid values: \"gap\", \"replay\", \"snapshot\"",
        ),
        (
            "dataset = \"GLBX.MDP3\"\nheartbeat_interval_s = \"ten\"\n",
            "databento.heartbeat_interval_s",
            "invalid type",
        ),
    ];
    // A top-level key written below the table's header is named there, not missing.
    let path = write(
        dir.path(),
        "d.toml",
        "name = \"d\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:9\"\n\
         channels = [\"mbo\"]\n[databento]\ndataset = \"GLBX.MDP3\"\nsymbols = [\"ESZ6\"]\n",
    );
    let error = only_error(config::load_venue(&path));
    assert_eq!(error.key, "databento.symbols", "{error}");
    assert!(
        error
            .message
            .contains("top-level key, so it must come before"),
        "{error}"
    );
    for (table, at, words) in cases {
        let path = write(
            dir.path(),
            "d.toml",
            &format!("{databento}{key}[databento]\n{table}"),
        );
        let error = only_error(config::load_venue(&path));
        assert_eq!(error.key, at, "{error}");
        assert!(error.message.contains(words), "{error}");
    }
    // Positions as serde's own: a wrong value at the value, a missing key at its table.
    let at = |table: &str| {
        let path = write(
            dir.path(),
            "d.toml",
            &format!("{databento}{key}[databento]\n{table}"),
        );
        let error = only_error(config::load_venue(&path));
        (error.line, error.column)
    };
    assert_eq!(
        at("dataset = \"GLBX.MDP3\"\nheartbeat_interval_s = \"ten\"\n"),
        (10, 24)
    );
    assert_eq!(
        at("recovery = \"later\"\ndataset = \"GLBX.MDP3\"\n"),
        (9, 12)
    );
    assert_eq!(at("stype_in = \"parent\"\n"), (8, 1));
}

#[test]
fn the_old_metrics_listen_key_names_its_new_place() {
    let dir = TempDir::new().expect("temp dir");
    let appliance = write(
        dir.path(),
        "tickwire.toml",
        "[threads]\n[metrics]\nlisten = \"127.0.0.1:9464\"\n",
    );
    let error = only_error(config::load(&appliance));
    assert_eq!(
        (error.file.as_path(), error.line, error.column),
        (appliance.as_path(), 3, 1)
    );
    assert_eq!(error.key, "metrics.listen");
    assert!(error.message.contains("[http]"), "{}", error.message);
}

/// Issue 33: a typo under `[metrics]` lists the keys valid there, and `listen` (refused there
/// as moved) is not one of them; under `[http]`, where it belongs, it is.
#[test]
fn a_typo_under_metrics_does_not_list_the_moved_listen_key() {
    let dir = TempDir::new().expect("temp dir");
    let appliance = write(
        dir.path(),
        "tickwire.toml",
        "[threads]\n[metrics]\nreport_intervall_ms = 1000\n",
    );
    let error = only_error(config::load(&appliance));
    assert_eq!(error.key, "metrics.report_intervall_ms");
    let valid = error
        .message
        .split_once("valid keys here: ")
        .map(|(_, valid)| valid.split(", ").collect::<Vec<_>>())
        .unwrap_or_else(|| panic!("no valid keys listed: {}", error.message));
    assert!(valid.contains(&"report_interval_ms"), "{}", error.message);
    assert!(!valid.contains(&"listen"), "{}", error.message);
    let appliance = write(
        dir.path(),
        "tickwire.toml",
        "[threads]\n[http]\nlisen = \"127.0.0.1:9464\"\n",
    );
    let error = only_error(config::load(&appliance));
    assert!(error.message.contains("listen"), "{}", error.message);
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = TempDir::new().expect("temp dir");
    // A variable and a credential no one sets, so that no token is found.
    let appliance = write(
        dir.path(),
        "tickwire.toml",
        "[threads]\n[http]\nlisten = \"0.0.0.0:9464\"\n\
         token_env = \"TICKWIRE_TEST_UNSET_TOKEN_1B7C\"\ntoken_credential = \"unset-1b7c\"\n",
    );
    let error = only_error(config::load(&appliance));
    assert_eq!((error.key.as_str(), error.line), ("http.listen", 3));
    assert!(
        error.message.contains("TICKWIRE_TEST_UNSET_TOKEN_1B7C")
            && error.message.contains("loopback"),
        "{}",
        error.message
    );
    let loopback = write(
        dir.path(),
        "loopback.toml",
        "[threads]\n[http]\nlisten = \"127.0.0.1:9464\"\n",
    );
    assert!(config::load(&loopback).is_ok());
}

/// Binance retired `/stream` and `/ws` on 2026-04-23: a venue file that still names one does not
/// load, and the error names the line to write and the two entry points tickwire routes to.
#[test]
fn a_retired_binance_url_is_refused_with_the_line_to_write() {
    let dir = TempDir::new().expect("temp dir");
    for url in [
        "wss://fstream.binance.com/stream",
        "wss://fstream.binance.com/ws/btcusdt@bookTicker",
    ] {
        let text = MINIMAL_VENUE.replace("wss://127.0.0.1:9443", url);
        let path = write(dir.path(), "retired.toml", &text);
        let error = only_error(config::load_venue(&path));
        assert_eq!(error.key, "url", "{error}");
        assert_eq!(error.line, 3, "{error}");
        for words in [
            "retired",
            "url = \"wss://fstream.binance.com\"",
            "/public",
            "/market",
        ] {
            assert!(error.message.contains(words), "{words}: {error}");
        }
    }
}

/// Every shipped Binance USD-M file names a host root, and loads.
#[test]
fn the_shipped_binance_files_name_host_roots() {
    let venues = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/venues");
    let mut checked = 0;
    for (file, host) in [
        ("binance-futures.toml", "fstream.binance.com"),
        ("binance-futures-testnet.toml", "fstream.binancefuture.com"),
    ] {
        let venue = config::load_venue(&venues.join(file)).expect(file);
        assert_eq!(venue.kind, VenueKind::BinanceUsdmFutures, "{file}");
        assert_eq!(venue.url.host, host, "{file}");
        assert_eq!(venue.url.path, "/", "{file}");
        checked += 1;
    }
    // The simulator's file trusts a CA the simulator writes when it starts: read its url only.
    let sim = std::fs::read_to_string(venues.join("binance-futures-sim.toml")).expect("sim file");
    assert!(sim.contains("\nurl = \"wss://127.0.0.1:9443\"\n"), "{sim}");
    assert_eq!(checked, 2);
}

/// The shipped `config/tickwire.toml`'s `[threads]` tables, alone in an appliance file of their
/// own, loaded: what an appliance file without `[threads]` must get.
fn shipped_threads() -> config::ThreadsConfig {
    let shipped = std::fs::read_to_string(shipped_dir().join("tickwire.toml")).unwrap();
    let document: toml_edit::DocumentMut = shipped.parse().unwrap();
    let mut threads_only = toml_edit::DocumentMut::new();
    threads_only.insert(
        "threads",
        document
            .get("threads")
            .expect("the shipped file has [threads]")
            .clone(),
    );
    let dir = TempDir::new().expect("temp dir");
    let path = write(dir.path(), "threads.toml", &threads_only.to_string());
    config::load_with_cpu_count(&path, 1)
        .unwrap_or_else(|errors| panic!("{errors}"))
        .appliance
        .threads
}

#[test]
fn an_appliance_file_without_threads_gets_the_shipped_threads() {
    let shipped = shipped_threads();
    // The shipped threads are not just every key's default: the decoder is fused into net and
    // the strategy parks, so this compares something.
    assert_ne!(shipped, config::ThreadsConfig::default());
    assert_eq!(shipped.decoders[0].fuse_into, Some(Stage::Net));
    let dir = TempDir::new().expect("temp dir");
    write(dir.path(), "venue.toml", MINIMAL_VENUE);
    let path = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"venue.toml\"]\n[http]\nlisten = \"127.0.0.1:9464\"\n",
    );
    let loaded = config::load_with_cpu_count(&path, 1).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.threads, shipped);
    // An empty [threads] table still means every key's own default.
    let empty = write(dir.path(), "empty.toml", "[threads]\n");
    let loaded = config::load_with_cpu_count(&empty, 1).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.threads, config::ThreadsConfig::default());

    assert_eq!(config::check_file(&path).ok(), Some(FileKind::Appliance));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("ok (appliance config)"),
        "{output:?}"
    );
}

#[test]
fn allowed_hosts_and_origins_must_be_what_the_headers_carry() {
    let dir = TempDir::new().expect("temp dir");
    let good = write(
        dir.path(),
        "good.toml",
        "[http]\nlisten = \"127.0.0.1:9464\"\n\
         allowed_hosts = [\"tickwire.example.com\", \"proxy.example.com:8443\", \"10.0.0.5\", \"[fd00::5]:9464\"]\n\
         allowed_origins = [\"https://dash.example.com\", \"http://10.0.0.5:8080\"]\n",
    );
    let loaded = config::load(&good).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.http.allowed_hosts.len(), 4);
    assert_eq!(loaded.appliance.http.allowed_origins.len(), 2);
    let bad = write(
        dir.path(),
        "bad.toml",
        "[http]\nlisten = \"127.0.0.1:9464\"\n\
         allowed_hosts = [\"ok.example.com\", \"http://tickwire.example.com\", \"*.example.com\"]\n\
         allowed_origins = [\"dash.example.com\", \"https://dash.example.com/\", \"null\"]\n",
    );
    let all = errors(config::load(&bad));
    assert_eq!(
        keys(&all),
        [
            "http.allowed_hosts[1]",
            "http.allowed_hosts[2]",
            "http.allowed_origins[0]",
            "http.allowed_origins[1]",
            "http.allowed_origins[2]"
        ],
        "{all:#?}"
    );
    assert!(all[0].message.contains("without a scheme"), "{}", all[0]);
    assert!(
        all[2].message.contains("https://dash.example.com"),
        "{}",
        all[2]
    );
}

/// `[[threads.decoders]]`: one table per decoder, each with `[threads.decoder]`'s keys; a venue
/// names its decoder with `decoder = N`, the others are spread deterministically.
#[test]
fn several_decoders_are_configured_and_venues_assigned() {
    let dir = TempDir::new().unwrap();
    for (name, decoder) in [("a", None), ("b", Some(0)), ("c", None), ("d", None)] {
        let mut text = MINIMAL_VENUE.replace("test-venue", name);
        if let Some(decoder) = decoder {
            text = format!("decoder = {decoder}\n{text}");
        }
        write(dir.path(), &format!("{name}.toml"), &text);
    }
    let path = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"a.toml\", \"b.toml\", \"c.toml\", \"d.toml\"]\n\
         [threads.net]\ncore = 0\n\
         [[threads.decoders]]\ncore = 1\nwait = \"spin\"\n\
         [[threads.decoders]]\ncore = 2\nwait = \"park\"\npark_timeout_us = 50\n\
         [[threads.decoders]]\nfuse_into = \"net\"\n\
         [threads.strategy]\ncore = 3\n",
    );
    let loaded = config::load_with_cpu_count(&path, 4).unwrap_or_else(|errors| panic!("{errors}"));
    let threads = &loaded.appliance.threads;
    assert_eq!(threads.decoder_count(), 3);
    assert_eq!(threads.decoders[0].core, Some(1));
    assert_eq!(threads.decoders[0].wait, WaitKind::Spin);
    assert_eq!(threads.decoders[1].park_timeout_us, 50);
    assert_eq!(threads.decoders[2].fuse_into, Some(Stage::Net));
    // b names decoder 0; a, c and d go, in list order, to the decoder with the fewest venues so
    // far (the lowest index among equals): a to 1 (0 has b), c to 2, d to 0.
    assert_eq!(loaded.venue_decoders(), [1, 0, 2, 0]);
    assert_eq!(loaded.appliance.pinned_cores(), [0, 1, 2, 3]);
    // The same files give the same assignment.
    let again = config::load_with_cpu_count(&path, 4).unwrap();
    assert_eq!(again.venue_decoders(), loaded.venue_decoders());
}

#[test]
fn a_single_decoder_table_is_one_decoder_and_venues_all_go_to_it() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.toml", MINIMAL_VENUE);
    write(
        dir.path(),
        "b.toml",
        &format!("decoder = 0\n{}", MINIMAL_VENUE.replace("test-venue", "b")),
    );
    let path = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"a.toml\", \"b.toml\"]\n[threads.decoder]\ncore = 1\n",
    );
    let loaded = config::load_with_cpu_count(&path, 4).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(loaded.appliance.threads.decoder_count(), 1);
    assert_eq!(loaded.appliance.threads.decoders[0].core, Some(1));
    assert_eq!(loaded.venue_decoders(), [0, 0]);
}

/// `check-config` refuses a decoder that does not exist, both decoder tables at once, and a
/// core that two hot threads share when there are several decoders.
#[test]
fn decoder_mistakes_are_refused_with_their_place() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "a.toml",
        &format!("decoder = 2\n{MINIMAL_VENUE}"),
    );
    let path = write(
        dir.path(),
        "tickwire.toml",
        "venues = [\"a.toml\"]\n[[threads.decoders]]\n[[threads.decoders]]\n",
    );
    let error = only_error(config::load_with_cpu_count(&path, 4));
    assert_eq!(error.key, "decoder");
    assert!(error.file.ends_with("a.toml"), "{error:?}");
    assert!(
        error.message.contains("decoder 2 does not exist") && error.message.contains("0 to 1"),
        "{}",
        error.message
    );

    let path = write(
        dir.path(),
        "both.toml",
        "[threads.decoder]\ncore = 1\n[[threads.decoders]]\ncore = 2\n",
    );
    let error = only_error(config::load_with_cpu_count(&path, 4));
    assert_eq!(error.key, "threads.decoder");

    let path = write(
        dir.path(),
        "shared.toml",
        "[threads.net]\ncore = 1\n[[threads.decoders]]\ncore = 2\nwait = \"park\"\n\
         [[threads.decoders]]\ncore = 2\nwait = \"park\"\n[threads.strategy]\ncore = 3\n",
    );
    let error = only_error(config::load_with_cpu_count(&path, 4));
    assert_eq!(error.key, "threads.decoders[1].core");
    assert!(
        error
            .message
            .contains("core 2 is also the core of the decoder 0 thread"),
        "{}",
        error.message
    );

    // Several decoders write one bus partition each: a bus, the serving plane and the recorder
    // are accepted with them (issue 36 refused them before bus partitions)...
    let path = write(
        dir.path(),
        "bus.toml",
        "[[threads.decoders]]\n[[threads.decoders]]\n[bus]\n[http]\nlisten = \"127.0.0.1:0\"\n\
         [record]\ndir = \"/var/lib/tickwire/rec\"\n",
    );
    config::load_with_cpu_count(&path, 4).expect("two decoders with a bus, [http] and [record]");
    // ...up to the partitions a bus holds.
    let many = "[[threads.decoders]]\n".repeat(32);
    let path = write(
        dir.path(),
        "many.toml",
        &format!("{many}[bus]\n[http]\nlisten = \"127.0.0.1:0\"\n"),
    );
    let all = errors(config::load_with_cpu_count(&path, 4));
    assert_eq!(keys(&all), ["bus", "http"]);
    assert!(all[0].message.contains("at most 31"), "{}", all[0].message);
}
