//! The event bus seen from the control thread: made at start with its instrument directory, the
//! readers' snapshot requests answered on every tick, and its metrics.
//!
//! The decoder stage writes the events (`venue::feed::EventSink`); this module only makes the
//! file ([`tickwire_bus::BusWriter::create`], then hands the writer to the runtime) and listens
//! on the request socket beside it (`<bus>.requests`, a Unix datagram socket, mode 0660 with the
//! bus's group so that the readers who may read the bus may ask; bound by
//! [`tickwire_bus::bind_request_socket`], which follows no link and refuses another user's
//! file). A request names a venue and an instrument (or all of them); each instrument gets at
//! most one snapshot per `[bus] snapshot_interval_ms`, and requests inside that interval,
//! malformed datagrams and unknown venues are counted and dropped (one log line a second at
//! most), so that a reader that asks in a loop costs the decoder one book per instrument per
//! interval and nothing more. The decoder then writes the books asked for as far as the
//! readers' budget goes (`[bus] snapshot_levels_per_s`, all readers together), queueing the rest
//! (`snapshot_queue_books`) and refusing what the queue cannot hold
//! (`crate::pipeline::book_requests`); its counts are the bus's metrics here too.

use super::ControlError;
use crate::config::BusConfig;
use crate::event::{InstrumentId, VenueId};
use crate::pipeline::book_requests::BookRequestReaders;
use crate::pipeline::Runtime;
use crate::venue::feed::ALL_INSTRUMENTS;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use tickwire_bus::{BusOptions, BusStats, BusWriter, DirectoryEntry, Geometry, SnapshotRequest};

/// Datagrams read per control tick at most; the rest wait in the socket's buffer.
const REQUESTS_PER_TICK: usize = 256;
/// The shortest time between two log lines about refused requests.
const LOG_EVERY_NS: u64 = 1_000_000_000;

/// One instrument for the directory.
pub struct BusInstrument<'a> {
    pub id: InstrumentId,
    pub venue_id: VenueId,
    pub venue: &'a str,
    pub symbol: &'a str,
}

/// What the control thread keeps of the bus.
pub struct BusControl {
    path: PathBuf,
    socket_path: PathBuf,
    socket: UnixDatagram,
    stats: BusStats,
    /// By venue id: the venue's instrument ids.
    venues: Vec<Range<InstrumentId>>,
    interval_ns: u64,
    /// When each `(venue, instrument)` last had a snapshot sent.
    last_sent_ns: HashMap<(VenueId, InstrumentId), u64>,
    requests: RequestCounts,
    last_log_ns: u64,
    names_cut: u64,
    /// The decoder's refusals of books (its queue full) when last logged.
    books_refused_logged: u64,
    /// The file was found truncated under the appliance (logged once).
    truncated_logged: bool,
    /// The directory's entries, and whether its filling up was logged (once).
    directory_capacity: u64,
    directory_full_logged: bool,
}

/// Readers' snapshot requests by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Instruments whose book snapshot was asked of the decoder.
    pub accepted: u64,
    /// Instruments asked for again within the interval.
    pub throttled: u64,
    /// Datagrams that were not a request, or named a venue or instrument that does not exist.
    pub invalid: u64,
}

impl BusControl {
    /// Makes the bus of `partitions` partitions (one per decoder) with every instrument in its
    /// one directory (written here, before any decoder runs: the directory's one writer);
    /// returns a writer per partition for the runtime, partition 0's first. `venues[id]` holds
    /// venue `id`'s instrument ids.
    pub fn create(
        config: &BusConfig,
        instruments: &[BusInstrument<'_>],
        venues: Vec<Range<InstrumentId>>,
        partitions: u32,
        now_ns: u64,
    ) -> Result<(BusControl, Vec<BusWriter>), ControlError> {
        let path = config.resolved_path();
        let group = config
            .group
            .as_deref()
            .map(tickwire_bus::group_id)
            .transpose()?;
        let geometry = Geometry::new(config.capacity, config.directory_capacity)
            .and_then(|geometry| geometry.with_partitions(partitions))
            .map_err(|what| ControlError::Bus(tickwire_bus::BusError::Geometry(what)))?;
        let options = BusOptions {
            path: path.clone(),
            geometry,
            group,
        };
        // The start time is the epoch: a restarted appliance's is later, so never the same.
        let mut writers = BusWriter::create_partitioned(&options, now_ns, now_ns)?;
        let writer = &mut writers[0];
        for instrument in instruments {
            let entry = DirectoryEntry {
                instrument_id: instrument.id,
                venue_id: instrument.venue_id,
                venue: instrument.venue.to_owned(),
                symbol: instrument.symbol.to_owned(),
                // Every venue so far names its instruments on the wire as its venue file
                // lists them (Binance's stream names lower-case them, its messages do not).
                venue_symbol: instrument.symbol.to_owned(),
            };
            writer
                .add_instrument(&entry)
                .map_err(|full| ControlError::BusDirectory(full.to_string()))?;
        }
        let socket_path = tickwire_bus::request_socket_path(&path);
        // We hold the bus's lock: a socket of ours left here is an earlier run's, replaced;
        // another user's file is refused by name.
        let socket = tickwire_bus::bind_request_socket(&path, group)?;
        socket
            .set_nonblocking(true)
            .map_err(|source| ControlError::BusSocket {
                path: socket_path.clone(),
                source,
            })?;
        let control = BusControl {
            path,
            socket_path,
            socket,
            stats: writer.stats(),
            venues,
            interval_ns: config.snapshot_interval_ms.saturating_mul(1_000_000),
            last_sent_ns: HashMap::new(),
            requests: RequestCounts::default(),
            last_log_ns: 0,
            names_cut: writer.names_cut(),
            books_refused_logged: 0,
            truncated_logged: false,
            directory_capacity: config.directory_capacity,
            // Watched only when a feed names instruments at run time (`watch_live_naming`).
            directory_full_logged: true,
        };
        Ok((control, writers))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub fn stats(&self) -> &BusStats {
        &self.stats
    }

    pub fn requests(&self) -> RequestCounts {
        self.requests
    }

    /// A venue's feed names its instruments in the directory as they come (`*`): log once if
    /// the directory fills up.
    pub fn watch_live_naming(&mut self) {
        self.directory_full_logged = false;
    }

    /// Reads the readers' requests and asks the decoder for the books they may have.
    pub fn poll(&mut self, now_ns: u64, runtime: &mut Runtime) {
        if !self.truncated_logged && self.stats.truncated() {
            self.truncated_logged = true;
            tracing::error!(
                path = %self.path.display(),
                "the bus file was truncated under the appliance (by its owner or root): its \
                 readers now get an error; the appliance goes on, and a restart makes a new bus"
            );
        }
        // A feed that names its instruments as they come (`*`) fills the directory at run time.
        if !self.directory_full_logged && self.stats.directory_len() >= self.directory_capacity {
            self.directory_full_logged = true;
            tracing::warn!(
                path = %self.path.display(),
                entries = self.directory_capacity,
                "the bus directory is full: instruments named from now on reach the bus \
                 without a name (counted by their feed); raise [bus] directory_capacity"
            );
        }
        let mut buffer = [0u8; 64];
        let before = self.requests;
        for _ in 0..REQUESTS_PER_TICK {
            let received = match self.socket.recv(&mut buffer) {
                Ok(received) => received,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    tracing::warn!(path = %self.socket_path.display(), "bus request socket: {error}");
                    break;
                }
            };
            match SnapshotRequest::from_bytes(&buffer[..received.min(buffer.len())]) {
                Ok(request) => self.on_request(request, now_ns, runtime),
                Err(_) => self.requests.invalid += 1,
            }
        }
        let refused =
            (self.requests.throttled - before.throttled) + (self.requests.invalid - before.invalid);
        let books_refused = runtime.bus_book_requests.refused.get();
        let queue_full = books_refused > self.books_refused_logged;
        if (refused > 0 || queue_full) && now_ns.saturating_sub(self.last_log_ns) >= LOG_EVERY_NS {
            self.last_log_ns = now_ns;
            self.books_refused_logged = books_refused;
            tracing::info!(
                throttled = self.requests.throttled,
                invalid = self.requests.invalid,
                queue_full = books_refused,
                "bus snapshot requests refused so far (asked again within \
                 [bus] snapshot_interval_ms, not a valid request, or books that found the \
                 decoder's queue for [bus] snapshot_levels_per_s full: [bus] \
                 snapshot_queue_books)"
            );
        }
    }

    fn on_request(&mut self, request: SnapshotRequest, now_ns: u64, runtime: &mut Runtime) {
        let venues: Range<usize> = if request.venue_id == SnapshotRequest::ALL_VENUES {
            0..self.venues.len()
        } else if usize::from(request.venue_id) < self.venues.len() {
            let venue = usize::from(request.venue_id);
            venue..venue + 1
        } else {
            self.requests.invalid += 1;
            return;
        };
        for venue in venues {
            let range = self.venues[venue].clone();
            let venue_id = venue as VenueId;
            let wanted = if request.instrument_id == SnapshotRequest::ALL_INSTRUMENTS {
                range.clone()
            } else if range.contains(&request.instrument_id) {
                request.instrument_id..request.instrument_id + 1
            } else {
                if request.venue_id != SnapshotRequest::ALL_VENUES {
                    self.requests.invalid += 1;
                }
                continue;
            };
            let asked = wanted.len() as u64;
            let due: Vec<InstrumentId> = wanted
                .filter(|&id| {
                    self.last_sent_ns
                        .get(&(venue_id, id))
                        .is_none_or(|&sent| now_ns.saturating_sub(sent) >= self.interval_ns)
                })
                .collect();
            self.requests.throttled += asked - due.len() as u64;
            if due.is_empty() {
                continue;
            }
            // Every instrument of the venue due: one command for all of them.
            let commands: Vec<InstrumentId> = if due.len() == range.len() && due.len() > 1 {
                vec![ALL_INSTRUMENTS]
            } else {
                due.clone()
            };
            for instrument in commands {
                if runtime.emit_books(venue_id, instrument).is_err() {
                    // The decoder's command ring is full: it is far behind; this request waits
                    // for the reader to ask again.
                    self.requests.throttled += 1;
                    return;
                }
            }
            for id in due {
                self.last_sent_ns.insert((venue_id, id), now_ns);
                self.requests.accepted += 1;
            }
        }
    }

    /// The bus's lines of `/metrics`, with the decoder's counts of the books readers asked for.
    pub fn render_metrics(&self, out: &mut String, books: &BookRequestReaders) {
        let requests = self.requests;
        let _ = writeln!(
            out,
            "# HELP tickwire_bus_events_published_total Events published on the shared-memory bus: its partitions' write cursors together.\n\
             # TYPE tickwire_bus_events_published_total counter\n\
             tickwire_bus_events_published_total {}\n\
             # HELP tickwire_bus_capacity Event slots in each of the bus's rings (one per partition).\n\
             # TYPE tickwire_bus_capacity gauge\n\
             tickwire_bus_capacity {}\n\
             # HELP tickwire_bus_epoch The bus's epoch (its creation time in ns).\n\
             # TYPE tickwire_bus_epoch gauge\n\
             tickwire_bus_epoch {}\n\
             # HELP tickwire_bus_directory_entries Instruments in the bus's directory.\n\
             # TYPE tickwire_bus_directory_entries gauge\n\
             tickwire_bus_directory_entries {}\n\
             # HELP tickwire_bus_directory_names_cut_total Directory names cut to fit their field.\n\
             # TYPE tickwire_bus_directory_names_cut_total counter\n\
             tickwire_bus_directory_names_cut_total {}\n\
             # HELP tickwire_bus_snapshot_requests_total Instruments readers asked book snapshots for, by outcome.\n\
             # TYPE tickwire_bus_snapshot_requests_total counter\n\
             tickwire_bus_snapshot_requests_total{{result=\"accepted\"}} {}\n\
             tickwire_bus_snapshot_requests_total{{result=\"throttled\"}} {}\n\
             tickwire_bus_snapshot_requests_total{{result=\"invalid\"}} {}\n\
             # HELP tickwire_bus_books_served_total Books the decoder wrote to the bus for readers.\n\
             # TYPE tickwire_bus_books_served_total counter\n\
             tickwire_bus_books_served_total {}\n\
             # HELP tickwire_bus_book_requests_total Books asked of the decoder, by what became of them: queued for the readers' budget ([bus] snapshot_levels_per_s), deferred (written in a later round, when the budget paid), refused (the queue, [bus] snapshot_queue_books, was full).\n\
             # TYPE tickwire_bus_book_requests_total counter\n\
             tickwire_bus_book_requests_total{{result=\"queued\"}} {}\n\
             tickwire_bus_book_requests_total{{result=\"deferred\"}} {}\n\
             tickwire_bus_book_requests_total{{result=\"refused\"}} {}\n\
             # HELP tickwire_bus_book_queue Books waiting for the readers' budget now.\n\
             # TYPE tickwire_bus_book_queue gauge\n\
             tickwire_bus_book_queue {}\n\
             # HELP tickwire_bus_snapshot_levels_total Levels the decoder wrote for readers' books (a book's begin and end count as one each): what the budget paid for.\n\
             # TYPE tickwire_bus_snapshot_levels_total counter\n\
             tickwire_bus_snapshot_levels_total {}\n\
             # HELP tickwire_bus_truncated 1 once the bus file was found truncated under the appliance.\n\
             # TYPE tickwire_bus_truncated gauge\n\
             tickwire_bus_truncated {}",
            self.stats.cursor(),
            self.stats.capacity(),
            self.stats.epoch(),
            self.stats.directory_len(),
            self.names_cut,
            requests.accepted,
            requests.throttled,
            requests.invalid,
            books.served.get(),
            books.queued.get(),
            books.deferred.get(),
            books.refused.get(),
            books.waiting(),
            books.levels.get(),
            u8::from(self.stats.truncated()),
        );
        let _ = writeln!(
            out,
            "# HELP tickwire_bus_partitions The bus's partitions: one ring per decoder, each written by its decoder.\n\
             # TYPE tickwire_bus_partitions gauge\n\
             tickwire_bus_partitions {}\n\
             # HELP tickwire_bus_partition_events_published_total Events published on one partition of the bus (decoder k writes partition k): its write cursor.\n\
             # TYPE tickwire_bus_partition_events_published_total counter",
            self.stats.partitions()
        );
        for k in 0..self.stats.partitions() {
            let _ = writeln!(
                out,
                "tickwire_bus_partition_events_published_total{{partition=\"{k}\"}} {}",
                self.stats.partition_cursor(k)
            );
        }
    }
}

impl Drop for BusControl {
    fn drop(&mut self) {
        tickwire_bus::remove_request_socket(&self.path);
    }
}

/// Event slots of a private bus: 4 MiB. Its only reader is the serving thread, which reads it
/// every 2 ms; this is over a second of the shipped config's rates, 65 ms at 1 M events/s. (A
/// `[bus]` of the user's own defaults to four times as much, for readers of every pace.)
pub const PRIVATE_BUS_CAPACITY: u64 = 1 << 16;

/// The serving plane's own bus, for an appliance with `[http]` and no `[bus]`: without one,
/// `/v1/quotes`, `/v1/book` and `/v1/stream` would have nothing to read. A directory of its own,
/// mode 0700, made with `mkdtemp` under `$RUNTIME_DIRECTORY` (systemd's, removed with the
/// service) when set, else `/dev/shm` (shared memory, as the default bus), else the temporary
/// directory; removed with everything in it (the bus, its lock file, its request socket) when
/// this is dropped, after the serving thread that reads it has stopped (`Session`'s field
/// order). Only a `kill -9` leaves it behind (`tickwire-http-XXXXXX`, safe to delete when no
/// appliance runs).
pub struct PrivateBus {
    dir: PathBuf,
}

impl PrivateBus {
    pub fn create() -> Result<PrivateBus, ControlError> {
        let base = match std::env::var_os("RUNTIME_DIRECTORY") {
            Some(dirs) if !dirs.is_empty() => {
                let dirs = dirs.to_string_lossy().into_owned();
                PathBuf::from(dirs.split(':').next().unwrap_or_default())
            }
            _ if std::path::Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            _ => std::env::temp_dir(),
        };
        Ok(PrivateBus {
            dir: make_private_dir(&base.join("tickwire-http-XXXXXX"))?,
        })
    }

    /// The directory everything is in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The bus's settings: its file in the private directory, a smaller ring, every other key
    /// `[bus]`'s default (the group: the appliance's own).
    pub fn config(&self) -> BusConfig {
        BusConfig {
            path: Some(self.dir.join(crate::config::BUS_FILE_NAME)),
            capacity: PRIVATE_BUS_CAPACITY,
            ..BusConfig::default()
        }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(
                dir = %self.dir.display(),
                "the serving plane's private bus could not be removed: {error}"
            );
        }
    }
}

/// `mkdtemp(3)` on `template` (ending in `XXXXXX`): a new directory, mode 0700, its path.
fn make_private_dir(template: &std::path::Path) -> Result<PathBuf, ControlError> {
    use std::os::unix::ffi::OsStringExt;
    let error = |source: std::io::Error| ControlError::PrivateBus {
        dir: template.to_owned(),
        source,
    };
    let template = std::ffi::CString::new(template.as_os_str().as_encoded_bytes())
        .map_err(|_| error(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    let mut bytes = template.into_bytes_with_nul();
    // SAFETY: `bytes` is a NUL-terminated buffer we own, which mkdtemp rewrites in place (the
    // last six characters before the NUL) and does not keep.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if made.is_null() {
        return Err(error(std::io::Error::last_os_error()));
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}
