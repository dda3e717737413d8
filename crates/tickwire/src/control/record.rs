//! `[record]`: the DBN recorder as a thread of the appliance.
//!
//! **Invariant: the recorder never touches the hot path.** It is a bus consumer like any other
//! process (`tickwire_record::record_bus` over a `tickwire_client::Client`), on an unpinned
//! thread of its own: the decoder stage publishes to the bus without knowing it exists, a slow
//! disk laps the recorder (which writes a gap and counts it) instead of slowing the writer, and
//! a full disk or an unwritable directory is logged and retried while the appliance runs on.

use crate::config::{LoadedConfig, RecordConfig, RecordFsync};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tickwire_client::{Client, Start};
use tickwire_record::{
    FsyncPolicy, Recorder, RecorderConfig, RunOutcome, SharedStats, SystemClock,
};

/// The DBN dataset of each venue by name: `[record] datasets` where given, else its protocol's
/// (`Protocol::dbn_dataset`: `BINANCE.USDM`, `BINANCE.SPOT`, `THALEX`, or a Databento venue's
/// own `databento.dataset`).
pub fn datasets(loaded: &LoadedConfig) -> HashMap<String, String> {
    let overrides = loaded
        .appliance
        .record
        .as_ref()
        .map(|record| &record.datasets);
    loaded
        .venues
        .iter()
        .map(|loaded_venue| {
            let venue = &loaded_venue.venue;
            let dataset = overrides
                .and_then(|overrides| overrides.get(&venue.name))
                .cloned()
                .unwrap_or_else(|| venue.kind.protocol().dbn_dataset(venue));
            (venue.name.clone(), dataset)
        })
        .collect()
}

/// The recorder's settings from `[record]`, writing to `dir`.
pub fn recorder_config(
    record: &RecordConfig,
    dir: &Path,
    datasets: HashMap<String, String>,
) -> RecorderConfig {
    let mut config = RecorderConfig::new(dir);
    config.flush_interval = Duration::from_millis(record.flush_interval_ms);
    config.fsync = match record.fsync {
        RecordFsync::Never => FsyncPolicy::Never,
        RecordFsync::EveryFlush => FsyncPolicy::EveryFlush,
        RecordFsync::OnClose => FsyncPolicy::OnClose,
    };
    config.rotate_daily = record.rotate_daily;
    config.max_file_bytes = record.max_file_mib.map(|mib| mib << 20);
    config.zstd_level = record.zstd_level;
    config.datasets = datasets;
    config
}

/// The running recorder thread.
pub struct RecorderThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<RunOutcome>,
    stats: SharedStats,
}

impl RecorderThread {
    /// Attaches to the bus at `bus_path` (already created) from its oldest event and starts
    /// recording on a new thread. A directory that cannot be made is not an error here: the
    /// recorder reports it and retries.
    pub fn start(
        loaded: &LoadedConfig,
        bus_path: &Path,
    ) -> std::io::Result<Option<RecorderThread>> {
        let Some(record) = &loaded.appliance.record else {
            return Ok(None);
        };
        if let Err(error) = std::fs::create_dir_all(&record.dir) {
            tracing::error!(
                dir = %record.dir.display(),
                %error,
                "[record] dir cannot be made; the recorder retries and counts the events it loses"
            );
        }
        let config = recorder_config(record, &record.dir, datasets(loaded));
        let mut client = Client::options()
            .start(Start::Oldest)
            .batch(4096)
            .attach(bus_path)
            .map_err(|error| {
                std::io::Error::other(format!("the recorder cannot read the bus: {error}"))
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let core = record.core;
        let stats = SharedStats::default();
        let thread_stats = stats.clone();
        let handle = std::thread::Builder::new()
            .name("tw-record".to_owned())
            .spawn(move || {
                crate::thread::pin_side_thread(core, "recorder");
                let recorder = Recorder::new(config, SystemClock::default());
                tickwire_record::record_bus(
                    &mut client,
                    recorder,
                    &thread_stop,
                    None,
                    Some(&thread_stats),
                )
            })?;
        tracing::info!(dir = %record.dir.display(), "recording the bus to DBN files");
        Ok(Some(RecorderThread {
            stop,
            handle,
            stats,
        }))
    }

    /// The recorder's counters for `/metrics` (as of its last loop, at most a few ms old).
    pub fn render_metrics(&self, out: &mut String) {
        let stats = self.stats.get();
        let _ = writeln!(
            out,
            "# HELP tickwire_record_events_total Events the recorder wrote into DBN files.\n\
             # TYPE tickwire_record_events_total counter\n\
             tickwire_record_events_total {}\n\
             # HELP tickwire_record_bytes_total Compressed bytes the recorder wrote.\n\
             # TYPE tickwire_record_bytes_total counter\n\
             tickwire_record_bytes_total {}\n\
             # HELP tickwire_record_files_total Recording files opened.\n\
             # TYPE tickwire_record_files_total counter\n\
             tickwire_record_files_total {}\n\
             # HELP tickwire_record_overruns_total Times the bus lapped the recorder (each a gap in the files).\n\
             # TYPE tickwire_record_overruns_total counter\n\
             tickwire_record_overruns_total {}\n\
             # HELP tickwire_record_missed_events_total Events lost to overruns.\n\
             # TYPE tickwire_record_missed_events_total counter\n\
             tickwire_record_missed_events_total {}\n\
             # HELP tickwire_record_lost_events_total Events lost to write errors (full disk, unwritable directory).\n\
             # TYPE tickwire_record_lost_events_total counter\n\
             tickwire_record_lost_events_total {}\n\
             # HELP tickwire_record_write_errors_total Failed file creations and writes.\n\
             # TYPE tickwire_record_write_errors_total counter\n\
             tickwire_record_write_errors_total {}\n\
             # HELP tickwire_record_gaps_total Recorder gaps written into files.\n\
             # TYPE tickwire_record_gaps_total counter\n\
             tickwire_record_gaps_total {}\n\
             # HELP tickwire_record_private_encoding_total Events whose kind has a DBN record that went to the private encoding.\n\
             # TYPE tickwire_record_private_encoding_total counter\n\
             tickwire_record_private_encoding_total {}\n\
             # HELP tickwire_record_bus_damaged_total Times the bus was found damaged under the recorder.\n\
             # TYPE tickwire_record_bus_damaged_total counter\n\
             tickwire_record_bus_damaged_total {}",
            stats.events,
            stats.bytes,
            stats.files_opened,
            stats.overruns,
            stats.missed,
            stats.lost,
            stats.write_errors,
            stats.gaps_written,
            stats.fell_back,
            stats.bus_damaged,
        );
    }

    /// Stops the recorder once it has recorded what the bus holds, closes its files and logs
    /// what it did; `Err` with the thread's name when the thread panicked.
    pub fn stop(self) -> Result<RunOutcome, String> {
        self.stop.store(true, Ordering::Relaxed);
        let outcome = self.handle.join().map_err(|_| "tw-record".to_owned())?;
        let stats = outcome.stats;
        tracing::info!(
            events = stats.events,
            files = stats.files_opened,
            bytes = stats.bytes,
            overruns = stats.overruns,
            missed = stats.missed,
            lost = stats.lost,
            write_errors = stats.write_errors,
            private_encoding = stats.fell_back,
            bus_errors = outcome.read_errors,
            "recorder stopped"
        );
        Ok(outcome)
    }
}
