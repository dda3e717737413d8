//! [`Recorder`]: events in, one set of DBN files per venue out; rotation, flushing, gaps and
//! write errors decided here, on an injectable [`Clock`].
//!
//! - Files: `DIR/<venue>-<YYYYMMDD>T<HHMMSS>Z.dbn.zst` (the wall time the file was opened; `-1`,
//!   `-2`, ... when that name exists), opened when the venue's first event arrives. Never reopened.
//! - Metadata: the dataset [`RecorderConfig::datasets`] gives for the venue (default: the venue
//!   name in capitals), schema unset (the file mixes record types), `stype_in` raw symbol,
//!   `stype_out` instrument id, and one symbol mapping per instrument the bus's directory names
//!   for the venue when the file is opened. An instrument that appears later is written at once
//!   and the venue's file is rotated after [`NEW_INSTRUMENT_ROTATE_AFTER`] so that the next file
//!   maps it.
//! - Daily rotation: by the wall clock's UTC day, kept as a high-water mark. A clock that jumps
//!   forward across midnight rotates once (however many days it skips); one that jumps back
//!   across midnight does not rotate, and rotates again only when the clock passes the next
//!   midnight after the latest day seen. So a jump never loses a rotation nor makes two.
//!   The flush interval runs on the monotonic clock, which does not jump.
//! - Size rotation: a file past [`RecorderConfig::max_file_bytes`] (compressed) is closed and
//!   the venue's next event opens a new one.
//! - Lapped by the writer ([`Recorder::overrun`]): a recorder gap is written to every venue's
//!   file and counted. A recorder gap is a `Gap` event with `instrument_id` `u32::MAX` (every
//!   instrument of the venue, as connection-wide events have it), reason `RingOverflow`, flag `DERIVED`, whose `received_seq - expected_seq` is the
//!   number of events lost (bus positions when the bus lapped the recorder).
//! - A damaged bus ([`Recorder::bus_damaged`]): a gap with reason `Unknown` in every venue's
//!   file (how many events were lost is not known), counted.
//! - A write error (full disk, unwritable directory): logged, counted, the file abandoned; the
//!   venue's events are counted as lost until a new file opens (tried every
//!   [`RecorderConfig::retry_interval`]), whose first record is a recorder gap with the count.
//! - Books (issue 33): every file stands on its own. A file counts the instruments whose
//!   snapshot it holds whole (`SnapshotBegin` to `SnapshotEnd`, no gap since);
//!   [`Recorder::books_to_request`] names the books a file still lacks, for the driver to ask
//!   the appliance for: every book of the venue as soon as a file opens (at start, at each
//!   rotation, after a new epoch), and after an overrun or a gap; then the missing ones again
//!   after [`BOOK_FOLLOW_UP`], doubling up to [`BOOK_FOLLOW_UP_MAX`] while any is missing (a
//!   reader that was lapped backs off rather than asking again at once: the snapshots it asks
//!   for are what laps it on a small ring).

use crate::codec::{self};
use crate::file::{FsyncPolicy, RecordingFile};
use dbn::{MappingInterval, Metadata, SType, SymbolMapping};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tickwire_bus::event::{flags, Body, Event, EventHeader, EventKind, Gap, GapReason, VenueId};
use tickwire_bus::DirectoryEntry;

const NS_PER_DAY: u64 = 86_400 * 1_000_000_000;

/// The instrument id of an event about every instrument of its venue.
pub const ALL_INSTRUMENTS: u32 = tickwire_bus::SnapshotRequest::ALL_INSTRUMENTS;

/// How long a file must have been open before a new instrument rotates it: an appliance that
/// adds many instruments at once makes one new file, not one per instrument.
pub const NEW_INSTRUMENT_ROTATE_AFTER: Duration = Duration::from_secs(1);

/// How long after asking for books a file still lacks they are asked for again (past the
/// appliance's default 100 ms per-instrument interval, inside which a second request is
/// dropped); the wait doubles while books are missing, up to [`BOOK_FOLLOW_UP_MAX`].
pub const BOOK_FOLLOW_UP: Duration = Duration::from_millis(250);
/// The longest wait between two requests for the books a file lacks.
pub const BOOK_FOLLOW_UP_MAX: Duration = Duration::from_secs(8);
/// How often [`Recorder::books_to_request`] looks at the files at most.
const BOOK_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// The recorder's clocks.
pub trait Clock {
    /// `CLOCK_REALTIME`, ns since the Unix epoch: names files and decides daily rotation.
    fn wall_ns(&self) -> u64;
    /// A clock that never jumps, ns from any origin: decides flushes and retries.
    fn monotonic_ns(&self) -> u64;
}

/// The system's clocks.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn wall_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    }

    fn monotonic_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// What the recorder does, and where.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    pub out_dir: PathBuf,
    /// How long a record may wait before its frame is written (default 1 s).
    pub flush_interval: Duration,
    pub fsync: FsyncPolicy,
    /// Start a new file at each UTC midnight (default true).
    pub rotate_daily: bool,
    /// Start a new file once one has this many compressed bytes (default none).
    pub max_file_bytes: Option<u64>,
    /// A frame is written early once this many uncompressed bytes wait (default 256 KiB: about
    /// 3,300 events, half a millisecond of zstd on this project's VM). It bounds the recorder's
    /// memory, the time from an event to its frame on disk at high rates, and how long one
    /// flush keeps a shared core (a 1 MiB frame took ~2 ms and showed in the appliance's p99 on
    /// a 2-core host; 256 KiB costs 5% more bytes per event: BENCHMARKING.md).
    pub max_frame_bytes: usize,
    /// How often a venue whose file failed tries a new one (default 1 s).
    pub retry_interval: Duration,
    /// zstd's level (default 1: the fastest, which keeps up with the feed on one core).
    pub zstd_level: i32,
    /// The DBN dataset of each venue, by its name in the directory.
    pub datasets: HashMap<String, String>,
}

impl RecorderConfig {
    pub fn new(out_dir: impl Into<PathBuf>) -> RecorderConfig {
        RecorderConfig {
            out_dir: out_dir.into(),
            flush_interval: Duration::from_secs(1),
            fsync: FsyncPolicy::OnClose,
            rotate_daily: true,
            max_file_bytes: None,
            max_frame_bytes: 256 << 10,
            retry_interval: Duration::from_secs(1),
            zstd_level: 1,
            datasets: HashMap::new(),
        }
    }
}

/// What the recorder has done, for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Events encoded into a file.
    pub events: u64,
    /// Events of a kind with a DBN record of its own that went to the private encoding.
    pub fell_back: u64,
    /// Times the bus lapped the recorder, and the events it missed.
    pub overruns: u64,
    pub missed: u64,
    /// Events lost to write errors (in a failed frame, or while no file could be opened).
    pub lost: u64,
    pub write_errors: u64,
    /// Recorder gaps written into files.
    pub gaps_written: u64,
    /// Book requests [`Recorder::books_to_request`] handed out (one per venue or instrument).
    pub book_requests: u64,
    /// Times the bus was found damaged under the recorder (an unknown number of events lost).
    pub bus_damaged: u64,
    pub files_opened: u64,
    pub frames: u64,
    /// Compressed bytes written, over all files.
    pub bytes: u64,
}

struct VenueFiles {
    venue_id: VenueId,
    file: Option<RecordingFile>,
    /// Instruments the open file's metadata maps.
    mapped: HashSet<u32>,
    opened_mono_ns: u64,
    last_flush_mono_ns: u64,
    /// A file of this venue failed; no new one before this time.
    retry_at_mono_ns: Option<u64>,
    /// Events lost since the last file failed, to report in the next file's first record.
    unreported_lost: u64,
    /// An event named an instrument the directory knows but the file does not map.
    remap: bool,
    /// Instruments whose whole snapshot this file holds with no gap since.
    booked: HashSet<u32>,
    /// Instruments whose snapshot began in this file and has not ended.
    building: HashSet<u32>,
    /// When books were last asked for this file (`None`: not since it opened).
    books_asked_mono_ns: Option<u64>,
    /// How long after `books_asked_mono_ns` the missing books are asked for again.
    books_follow_up_ns: u64,
}

impl VenueFiles {
    /// The file's books can no longer be trusted (an overrun, a gap for every instrument).
    fn unbook_all(&mut self) {
        self.booked.clear();
        self.building.clear();
    }
}

/// The recorder. Not thread-safe; one thread drives it ([`crate::run`] or a host's own loop).
pub struct Recorder<C: Clock> {
    config: RecorderConfig,
    clock: C,
    venues: HashMap<VenueId, VenueFiles>,
    directory: HashMap<(VenueId, u32), DirectoryEntry>,
    venue_names: HashMap<VenueId, String>,
    /// The latest UTC day the wall clock has shown (days since the epoch).
    day: u64,
    /// Bus events seen (recorded or missed): the positions a recorder gap names.
    bus_position: u64,
    /// When [`Recorder::books_to_request`] may next look at the files.
    next_book_check_mono_ns: u64,
    stats: RecorderStats,
}

/// A `Gap` event that says the recorder lost `lost` events of `venue_id`.
pub fn recorder_gap(venue_id: VenueId, now_ns: u64, from_position: u64, lost: u64) -> Event {
    gap_event(
        venue_id,
        now_ns,
        Gap::new(
            GapReason::RingOverflow,
            from_position,
            from_position.saturating_add(lost),
        ),
    )
}

/// A recorder gap about every instrument of `venue_id`, flagged `DERIVED` (tickwire's own).
fn gap_event(venue_id: VenueId, now_ns: u64, gap: Gap) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: now_ns,
            venue_seq: 0,
            instrument_id: ALL_INSTRUMENTS,
            venue_id,
            kind: EventKind::Gap,
            flags: flags::DERIVED | flags::NO_EXCHANGE_TS | flags::LAST,
        },
        Body::Gap(gap),
    )
}

/// `YYYYMMDDTHHMMSSZ` of a wall time.
fn stamp(wall_ns: u64) -> String {
    let seconds = (wall_ns / 1_000_000_000) as i64;
    match time::OffsetDateTime::from_unix_timestamp(seconds) {
        Ok(at) => format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            at.year(),
            at.month() as u8,
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        ),
        Err(_) => format!("{seconds}s"),
    }
}

/// The venue name in a recording's file name (`<venue>-<YYYYMMDD>T<HHMMSS>Z[-n].dbn.zst`),
/// `None` for a name the recorder does not make.
pub fn venue_of_file_name(file_name: &str) -> Option<&str> {
    let stem = file_name.strip_suffix(".dbn.zst")?;
    // A `-n` suffix that made the name unique.
    let stem = match stem.rsplit_once('-') {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => stem,
    };
    let (venue, stamp) = stem.rsplit_once('-')?;
    let bytes = stamp.as_bytes();
    let is_stamp = bytes.len() == 16
        && bytes[8] == b'T'
        && bytes[15] == b'Z'
        && bytes[..8]
            .iter()
            .chain(&bytes[9..15])
            .all(u8::is_ascii_digit);
    (is_stamp && !venue.is_empty()).then_some(venue)
}

/// `text` as DBN metadata can hold it: ASCII (anything else becomes `?`), at most `max` bytes.
/// DBN refuses a longer or non-ASCII string, and the directory's names are the venue files'
/// (up to 104 bytes of UTF-8), so a name is fitted rather than allowed to fail the file.
fn dbn_text(text: &str, max: usize) -> String {
    text.chars()
        .map(|ch| if ch.is_ascii() && ch != '\0' { ch } else { '?' })
        .take(max)
        .collect()
}

/// The longest dataset DBN metadata holds (a 16-byte C string).
const DATASET_MAX: usize = 15;
/// The longest symbol DBN v3 metadata holds (`SYMBOL_CSTR_LEN` less the NUL).
const SYMBOL_MAX: usize = dbn::SYMBOL_CSTR_LEN - 1;

fn date_of(wall_ns: u64) -> time::Date {
    time::OffsetDateTime::from_unix_timestamp((wall_ns / 1_000_000_000) as i64)
        .map_or(time::Date::MIN, |at| at.date())
}

/// A venue name as a file name part: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_part(name: &str) -> String {
    let part: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' || ch == '.' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    if part.is_empty() || part.starts_with('.') {
        format!("venue{part}")
    } else {
        part
    }
}

impl<C: Clock> Recorder<C> {
    pub fn new(config: RecorderConfig, clock: C) -> Recorder<C> {
        let day = clock.wall_ns() / NS_PER_DAY;
        Recorder {
            config,
            clock,
            venues: HashMap::new(),
            directory: HashMap::new(),
            venue_names: HashMap::new(),
            day,
            bus_position: 0,
            next_book_check_mono_ns: 0,
            stats: RecorderStats::default(),
        }
    }

    pub fn stats(&self) -> RecorderStats {
        self.stats
    }

    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Records encoded and not yet in a frame on disk, over every venue: what a benchmark
    /// subtracts from the records it handed over to know which are flushed.
    pub fn pending_records(&self) -> u64 {
        self.venues
            .values()
            .filter_map(|venue| venue.file.as_ref())
            .map(RecordingFile::pending_records)
            .sum()
    }

    /// The open files, for tests and logs.
    pub fn open_files(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self
            .venues
            .values()
            .filter_map(|venue| venue.file.as_ref().map(|file| file.path().to_path_buf()))
            .collect();
        paths.sort();
        paths
    }

    /// Takes in the bus's instrument directory (all of it, or the entries new since the last
    /// call): file names and symbol mappings come from it.
    pub fn learn<'a>(&mut self, entries: impl IntoIterator<Item = &'a DirectoryEntry>) {
        for entry in entries {
            self.venue_names.insert(entry.venue_id, entry.venue.clone());
            self.directory
                .insert((entry.venue_id, entry.instrument_id), entry.clone());
        }
    }

    /// Forgets the directory and closes every file: a new appliance (epoch) may number venues
    /// and instruments differently.
    pub fn new_epoch(&mut self) {
        self.close_all();
        self.venues.clear();
        self.directory.clear();
        self.venue_names.clear();
    }

    fn venue_name(&self, venue_id: VenueId) -> String {
        self.venue_names
            .get(&venue_id)
            .cloned()
            .unwrap_or_else(|| format!("venue{venue_id}"))
    }

    fn metadata(&self, venue_id: VenueId, wall_ns: u64) -> (Metadata, HashSet<u32>) {
        let venue = self.venue_name(venue_id);
        let dataset = dbn_text(
            &self
                .config
                .datasets
                .get(&venue)
                .cloned()
                .unwrap_or_else(|| venue.to_ascii_uppercase()),
            DATASET_MAX,
        );
        let start_date = date_of(wall_ns);
        let end_date = if self.config.rotate_daily {
            start_date.next_day().unwrap_or(start_date)
        } else {
            start_date.saturating_add(time::Duration::days(3660))
        };
        let mut entries: Vec<&DirectoryEntry> = self
            .directory
            .values()
            .filter(|entry| entry.venue_id == venue_id)
            .collect();
        entries.sort_by_key(|entry| entry.instrument_id);
        let mapped = entries.iter().map(|entry| entry.instrument_id).collect();
        let metadata = Metadata::builder()
            .dataset(dataset)
            .schema(None)
            .start(wall_ns)
            .stype_in(Some(SType::RawSymbol))
            .stype_out(SType::InstrumentId)
            .symbols(
                entries
                    .iter()
                    .map(|entry| dbn_text(&entry.symbol, SYMBOL_MAX))
                    .collect(),
            )
            .mappings(
                entries
                    .iter()
                    .map(|entry| SymbolMapping {
                        raw_symbol: dbn_text(&entry.symbol, SYMBOL_MAX),
                        intervals: vec![MappingInterval {
                            start_date,
                            end_date,
                            symbol: entry.instrument_id.to_string(),
                        }],
                    })
                    .collect(),
            )
            .build();
        (metadata, mapped)
    }

    /// Opens a new file for the venue if it has none and is not waiting to retry; writes the
    /// gap owed for events lost since the last file failed.
    fn ensure_file(&mut self, venue_id: VenueId) -> bool {
        // The path of every event: no clock read when the file is open.
        if self
            .venues
            .get(&venue_id)
            .is_some_and(|venue| venue.file.is_some())
        {
            return true;
        }
        let now_mono = self.clock.monotonic_ns();
        let wall_ns = self.clock.wall_ns();
        let venue = self.venues.entry(venue_id).or_insert_with(|| VenueFiles {
            venue_id,
            file: None,
            mapped: HashSet::new(),
            opened_mono_ns: now_mono,
            last_flush_mono_ns: now_mono,
            retry_at_mono_ns: None,
            unreported_lost: 0,
            remap: false,
            booked: HashSet::new(),
            building: HashSet::new(),
            books_asked_mono_ns: None,
            books_follow_up_ns: BOOK_FOLLOW_UP.as_nanos() as u64,
        });
        if venue.file.is_some() {
            return true;
        }
        if venue.retry_at_mono_ns.is_some_and(|at| now_mono < at) {
            return false;
        }
        let (metadata, mapped) = self.metadata(venue_id, wall_ns);
        let base = format!(
            "{}-{}",
            file_part(&self.venue_name(venue_id)),
            stamp(wall_ns)
        );
        let mut result = Err(std::io::Error::other("no file name tried"));
        for attempt in 0..1000u32 {
            let name = if attempt == 0 {
                format!("{base}.dbn.zst")
            } else {
                format!("{base}-{attempt}.dbn.zst")
            };
            result = RecordingFile::create(
                &self.config.out_dir,
                &name,
                &metadata,
                self.config.fsync,
                self.config.zstd_level,
            );
            match &result {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                _ => break,
            }
        }
        let venue = self.venues.get_mut(&venue_id).expect("inserted above");
        match result {
            Ok(mut file) => {
                tracing::info!(path = %file.path().display(), "recording to a new file");
                self.stats.files_opened += 1;
                self.stats.bytes += file.bytes_written();
                if venue.unreported_lost > 0 {
                    let gap = recorder_gap(venue_id, wall_ns, 0, venue.unreported_lost);
                    file.push(codec::encode(&gap).record.as_record_ref());
                    self.stats.gaps_written += 1;
                    venue.unreported_lost = 0;
                }
                venue.file = Some(file);
                venue.mapped = mapped;
                venue.opened_mono_ns = now_mono;
                venue.last_flush_mono_ns = now_mono;
                venue.retry_at_mono_ns = None;
                venue.remap = false;
                // A new file holds no book: ask for every one of the venue's at once.
                venue.unbook_all();
                venue.books_asked_mono_ns = None;
                venue.books_follow_up_ns = BOOK_FOLLOW_UP.as_nanos() as u64;
                // Looked at on the next call, whatever the check interval says.
                self.next_book_check_mono_ns = 0;
                true
            }
            Err(error) => {
                self.stats.write_errors += 1;
                tracing::error!(
                    dir = %self.config.out_dir.display(),
                    %error,
                    retry_in_ms = self.config.retry_interval.as_millis() as u64,
                    "cannot create a recording file; events are counted as lost until one opens"
                );
                venue.retry_at_mono_ns =
                    Some(now_mono + self.config.retry_interval.as_nanos() as u64);
                false
            }
        }
    }

    /// Abandons a venue's file after a write error: its pending records are lost.
    fn fail(&mut self, venue_id: VenueId, error: std::io::Error) {
        let now_mono = self.clock.monotonic_ns();
        let retry = self.config.retry_interval.as_nanos() as u64;
        if let Some(venue) = self.venues.get_mut(&venue_id) {
            if let Some(file) = venue.file.take() {
                let lost = file.pending_records();
                self.stats.lost += lost;
                venue.unreported_lost += lost;
                tracing::error!(
                    path = %file.path().display(),
                    %error,
                    lost,
                    "a recording file failed; it is abandoned and a new one will be tried"
                );
            }
            venue.retry_at_mono_ns = Some(now_mono + retry);
        }
        self.stats.write_errors += 1;
    }

    /// Rotates every file when the wall clock has reached a UTC day later than any it showed.
    fn rotate_if_new_day(&mut self) {
        let today = self.clock.wall_ns() / NS_PER_DAY;
        if today > self.day {
            self.day = today;
            if self.config.rotate_daily {
                self.close_all();
            }
        }
    }

    /// Records a batch of bus events, in order.
    pub fn record(&mut self, events: &[Event]) {
        // Looked at per batch, not only in `tick`, so that a batch read after midnight goes
        // to the new day's files.
        self.rotate_if_new_day();
        self.bus_position += events.len() as u64;
        for event in events {
            let venue_id = event.header.venue_id;
            if !self.ensure_file(venue_id) {
                self.stats.lost += 1;
                if let Some(venue) = self.venues.get_mut(&venue_id) {
                    venue.unreported_lost += 1;
                }
                continue;
            }
            let encoded = codec::encode(event);
            self.stats.events += 1;
            self.stats.fell_back += u64::from(encoded.fell_back);
            let instrument = event.header.instrument_id;
            let Some(venue) = self.venues.get_mut(&venue_id) else {
                continue;
            };
            if !venue.mapped.contains(&instrument)
                && self.directory.contains_key(&(venue_id, instrument))
            {
                venue.remap = true;
            }
            match event.header.kind {
                EventKind::SnapshotBegin => {
                    venue.booked.remove(&instrument);
                    venue.building.insert(instrument);
                }
                EventKind::SnapshotEnd if venue.building.remove(&instrument) => {
                    venue.booked.insert(instrument);
                }
                EventKind::Gap if instrument == ALL_INSTRUMENTS => venue.unbook_all(),
                EventKind::Gap => {
                    venue.booked.remove(&instrument);
                    venue.building.remove(&instrument);
                }
                _ => {}
            }
            let Some(file) = venue.file.as_mut() else {
                continue;
            };
            file.push(encoded.record.as_record_ref());
            if file.pending_bytes() >= self.config.max_frame_bytes {
                self.flush_venue(venue_id);
            }
        }
    }

    /// Every venue the directory names or an event came from, in order.
    fn known_venues(&self) -> Vec<VenueId> {
        let mut venue_ids: Vec<VenueId> = self
            .venue_names
            .keys()
            .chain(self.venues.keys())
            .copied()
            .collect();
        venue_ids.sort_unstable();
        venue_ids.dedup();
        venue_ids
    }

    /// The bus lapped the recorder: `missed` events are lost. Every venue's file gets a gap.
    pub fn overrun(&mut self, missed: u64) {
        self.stats.overruns += 1;
        self.stats.missed += missed;
        let from = self.bus_position;
        self.bus_position += missed;
        let now = self.clock.wall_ns();
        let venue_ids = self.known_venues();
        for venue in self.venues.values_mut() {
            // Events were lost: no book in any file can be trusted until its next snapshot.
            // Asked for on the follow-up schedule, not at once (a lapped reader backs off).
            venue.unbook_all();
        }
        for venue_id in venue_ids {
            if self.ensure_file(venue_id) {
                let gap = recorder_gap(venue_id, now, from, missed);
                if let Some(file) = self
                    .venues
                    .get_mut(&venue_id)
                    .and_then(|venue| venue.file.as_mut())
                {
                    file.push(codec::encode(&gap).record.as_record_ref());
                    self.stats.gaps_written += 1;
                }
            } else if let Some(venue) = self.venues.get_mut(&venue_id) {
                venue.unreported_lost += missed;
            }
        }
    }

    /// The bus turned out damaged under the recorder (a reader error: a slot that is no event,
    /// a truncated file): an unknown number of events is lost until a new bus. Every venue's
    /// file gets a gap with reason `Unknown` whose `expected_seq == received_seq` (the bus
    /// position where the damage was found): never a silent hole.
    pub fn bus_damaged(&mut self) {
        self.stats.bus_damaged += 1;
        let now = self.clock.wall_ns();
        let position = self.bus_position;
        let venue_ids = self.known_venues();
        for venue_id in venue_ids {
            if !self.ensure_file(venue_id) {
                continue;
            }
            let gap = gap_event(
                venue_id,
                now,
                Gap::new(GapReason::Unknown, position, position),
            );
            if let Some(file) = self
                .venues
                .get_mut(&venue_id)
                .and_then(|venue| venue.file.as_mut())
            {
                file.push(codec::encode(&gap).record.as_record_ref());
                self.stats.gaps_written += 1;
            }
        }
    }

    /// The books to ask the appliance for now, as `(venue_id, instrument_id)` (instrument
    /// [`ALL_INSTRUMENTS`] for every book of the venue): see the module doc. Looks at the files
    /// at most every 50 ms; cheap to call in every loop.
    pub fn books_to_request(&mut self) -> Vec<(VenueId, u32)> {
        let now = self.clock.monotonic_ns();
        if now < self.next_book_check_mono_ns {
            return Vec::new();
        }
        self.next_book_check_mono_ns = now.saturating_add(BOOK_CHECK_INTERVAL.as_nanos() as u64);
        let max_follow_up = BOOK_FOLLOW_UP_MAX.as_nanos() as u64;
        let mut wanted = Vec::new();
        let mut venue_ids: Vec<VenueId> = self.venues.keys().copied().collect();
        venue_ids.sort_unstable();
        for venue_id in venue_ids {
            let Some(venue) = self.venues.get_mut(&venue_id) else {
                continue;
            };
            if venue.file.is_none() {
                continue;
            }
            let mut missing: Vec<u32> = self
                .directory
                .keys()
                .filter(|&&(id, instrument)| {
                    id == venue_id
                        && !venue.booked.contains(&instrument)
                        && !venue.building.contains(&instrument)
                })
                .map(|&(_, instrument)| instrument)
                .collect();
            if missing.is_empty() && venue.building.is_empty() {
                venue.books_follow_up_ns = BOOK_FOLLOW_UP.as_nanos() as u64;
                continue;
            }
            match venue.books_asked_mono_ns {
                None => {
                    venue.books_asked_mono_ns = Some(now);
                    wanted.push((venue_id, ALL_INSTRUMENTS));
                }
                Some(asked) if now.saturating_sub(asked) >= venue.books_follow_up_ns => {
                    if missing.is_empty() {
                        continue;
                    }
                    venue.books_asked_mono_ns = Some(now);
                    venue.books_follow_up_ns = venue
                        .books_follow_up_ns
                        .saturating_mul(2)
                        .min(max_follow_up);
                    let known = self
                        .directory
                        .keys()
                        .filter(|&&(id, _)| id == venue_id)
                        .count();
                    if missing.len() == known {
                        wanted.push((venue_id, ALL_INSTRUMENTS));
                    } else {
                        missing.sort_unstable();
                        wanted.extend(missing.into_iter().map(|instrument| (venue_id, instrument)));
                    }
                }
                Some(_) => {}
            }
        }
        self.stats.book_requests += wanted.len() as u64;
        wanted
    }

    fn flush_venue(&mut self, venue_id: VenueId) {
        let now_mono = self.clock.monotonic_ns();
        let Some(venue) = self.venues.get_mut(&venue_id) else {
            return;
        };
        venue.last_flush_mono_ns = now_mono;
        let Some(file) = venue.file.as_mut() else {
            return;
        };
        let pending = file.pending_records();
        let before = file.bytes_written();
        match file.flush() {
            Ok(()) => {
                self.stats.bytes += file.bytes_written() - before;
                self.stats.frames += u64::from(pending > 0);
                let too_big = self
                    .config
                    .max_file_bytes
                    .is_some_and(|max| file.bytes_written() >= max);
                if too_big {
                    self.close_venue(venue_id);
                }
            }
            Err(error) => self.fail(venue_id, error),
        }
    }

    fn close_venue(&mut self, venue_id: VenueId) {
        let Some(file) = self
            .venues
            .get_mut(&venue_id)
            .and_then(|venue| venue.file.take())
        else {
            return;
        };
        let before = file.bytes_written();
        let pending = file.pending_records();
        let path = file.path().to_path_buf();
        match file.close() {
            Ok(total) => {
                self.stats.frames += u64::from(pending > 0);
                self.stats.bytes += total - before;
            }
            Err(error) => {
                self.stats.lost += pending;
                self.stats.write_errors += 1;
                if let Some(venue) = self.venues.get_mut(&venue_id) {
                    venue.unreported_lost += pending;
                }
                tracing::error!(path = %path.display(), %error, lost = pending, "closing a recording file failed");
            }
        }
    }

    fn close_all(&mut self) {
        let mut venue_ids: Vec<VenueId> = self.venues.keys().copied().collect();
        venue_ids.sort_unstable();
        for venue_id in venue_ids {
            self.close_venue(venue_id);
        }
    }

    /// Called often (each loop of the driving thread): daily rotation, due flushes, rotation
    /// for new instruments, retries.
    pub fn tick(&mut self) {
        self.rotate_if_new_day();
        let now_mono = self.clock.monotonic_ns();
        let interval = self.config.flush_interval.as_nanos() as u64;
        let rotate_after = NEW_INSTRUMENT_ROTATE_AFTER.as_nanos() as u64;
        let mut due = Vec::new();
        let mut remap = Vec::new();
        for venue in self.venues.values() {
            if venue.file.is_none() {
                continue;
            }
            if now_mono.saturating_sub(venue.last_flush_mono_ns) >= interval {
                due.push(venue.venue_id);
            }
            if venue.remap && now_mono.saturating_sub(venue.opened_mono_ns) >= rotate_after {
                remap.push(venue.venue_id);
            }
        }
        for venue_id in due {
            self.flush_venue(venue_id);
        }
        for venue_id in remap {
            self.close_venue(venue_id);
            self.ensure_file(venue_id);
        }
        // A venue waiting to retry with losses to report opens its file as soon as it may, so
        // that the gap is on disk even if the venue stays quiet.
        let retry: Vec<VenueId> = self
            .venues
            .values()
            .filter(|venue| venue.file.is_none() && venue.unreported_lost > 0)
            .map(|venue| venue.venue_id)
            .collect();
        for venue_id in retry {
            self.ensure_file(venue_id);
        }
    }

    /// Flushes every file now.
    pub fn flush(&mut self) {
        let venue_ids: Vec<VenueId> = self.venues.keys().copied().collect();
        for venue_id in venue_ids {
            self.flush_venue(venue_id);
        }
    }

    /// Flushes and closes every file.
    pub fn close(mut self) -> RecorderStats {
        self.close_all();
        self.stats
    }
}
