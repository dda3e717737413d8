//! The appliance's end of the bus: [`BusWriter`].

use crate::directory::{DirectoryEntry, DirectoryWords, Naming};
use crate::event::Event;
use crate::layout::{self, offsets, Geometry};
use crate::ring::RingWriter;
use crate::shm::{self, BusError, Mapping};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Where and how big a bus is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusOptions {
    pub path: PathBuf,
    pub geometry: Geometry,
    /// The group the file is given (readers must be in it); `None` keeps the writer's.
    pub group: Option<u32>,
}

/// The one writer of one partition of a bus: writes that partition's events, never waits for a
/// reader. A bus of `P` partitions has `P` of them, one per decoder thread
/// ([`BusWriter::create_partitioned`]); a bus of one partition has one ([`BusWriter::create`]).
///
/// Made on the control thread, then each moved to the thread that publishes (its decoder
/// stage). [`BusWriter::write`] then [`BusWriter::publish`] once per batch. The directory is one
/// for the whole bus: it is filled through any of the writers ([`BusWriter::add_instrument`])
/// while they are still on the control thread (appends are serialized, so the directory has one
/// writer at a time). Dropping the last of a bus's writers marks the bus closed, so readers
/// learn the appliance stopped.
pub struct BusWriter {
    ring: RingWriter,
    partition: u32,
    file: Arc<WriterFile>,
}

/// What a bus's partition writers share: the mapping, the directory, the lock.
struct WriterFile {
    shared: Arc<Mapping>,
    directory: Mutex<DirectoryWriter>,
    epoch: u64,
    path: PathBuf,
    /// Held for the writers' life: the `flock` that keeps a second appliance out.
    _lock: File,
}

struct DirectoryWriter {
    words: DirectoryWords,
    len: u64,
    /// Names cut to fit their directory field.
    names_cut: u64,
}

/// What another thread (the control thread's metrics) reads of a bus while its writers run.
#[derive(Clone)]
pub struct BusStats {
    shared: Arc<Mapping>,
    partitions: u32,
}

impl BusStats {
    /// Events published so far, every partition together: the sum of the write cursors.
    pub fn cursor(&self) -> u64 {
        (0..self.partitions).map(|k| self.partition_cursor(k)).sum()
    }

    /// Events published so far in partition `k` (0 past the last partition).
    pub fn partition_cursor(&self, k: u32) -> u64 {
        if k >= self.partitions {
            return 0;
        }
        self.shared
            .word(offsets::cursor(k as usize))
            .load(Ordering::Acquire)
    }

    /// The bus's partitions (one per decoder).
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Directory entries published so far.
    pub fn directory_len(&self) -> u64 {
        self.shared
            .word(offsets::DIRECTORY_COUNT)
            .load(Ordering::Acquire)
    }

    /// Slots per partition.
    pub fn capacity(&self) -> u64 {
        self.shared.read_u64(offsets::CAPACITY)
    }

    pub fn epoch(&self) -> u64 {
        self.shared.read_u64(offsets::EPOCH)
    }

    /// Whether someone truncated the bus file under the appliance: readers get an error, the
    /// writer's stores go to a private page; a restart makes a new bus.
    pub fn truncated(&self) -> bool {
        self.shared.truncated()
    }
}

impl BusWriter {
    /// Makes a bus file of one partition (replacing an earlier appliance's) and maps it.
    /// `epoch` must differ from any earlier bus's at this path (the start time in ns does);
    /// `now_ns` is recorded as the creation time. A geometry of several partitions is refused:
    /// [`BusWriter::create_partitioned`] gives their writers.
    pub fn create(options: &BusOptions, epoch: u64, now_ns: u64) -> Result<BusWriter, BusError> {
        if options.geometry.partitions != 1 {
            return Err(BusError::Geometry(format!(
                "{} partitions need one writer each (BusWriter::create_partitioned)",
                options.geometry.partitions
            )));
        }
        let mut writers = BusWriter::create_partitioned(options, epoch, now_ns)?;
        Ok(writers.remove(0))
    }

    /// Makes a bus file of `options.geometry.partitions` partitions and returns one writer per
    /// partition, partition 0's first. Each must be the only thread that writes its partition.
    pub fn create_partitioned(
        options: &BusOptions,
        epoch: u64,
        now_ns: u64,
    ) -> Result<Vec<BusWriter>, BusError> {
        let epoch = epoch.max(1);
        let created = shm::create(
            &options.path,
            options.geometry,
            options.group,
            epoch,
            now_ns,
        )?;
        let mapping = Arc::new(created.mapping);
        let geometry = options.geometry;
        // SAFETY: the file was sized to `geometry.file_bytes()` before it was mapped
        // (`shm::create`); the words are used only by these writers and `BusStats`, which hold
        // the mapping, and only atomically.
        let (rings, directory) = unsafe { mapping.regions(geometry) };
        let file = Arc::new(WriterFile {
            shared: mapping,
            directory: Mutex::new(DirectoryWriter {
                words: directory,
                len: 0,
                names_cut: 0,
            }),
            epoch: created.epoch,
            path: options.path.clone(),
            _lock: created.lock,
        });
        Ok(rings
            .into_iter()
            .enumerate()
            .map(|(k, ring)| BusWriter {
                ring: RingWriter::new(ring, 0),
                partition: k as u32,
                file: Arc::clone(&file),
            })
            .collect())
    }

    /// Writes `event` at the next position of this partition; readers see it after
    /// [`BusWriter::publish`].
    #[inline]
    pub fn write(&mut self, event: &Event) {
        self.ring.write(event);
    }

    /// Makes every event written so far visible: one store.
    #[inline]
    pub fn publish(&mut self) {
        self.ring.publish();
    }

    /// Events written to this partition so far.
    pub fn written(&self) -> u64 {
        self.ring.written()
    }

    /// The partition this writer writes.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Appends an instrument to the bus's one directory (visible at once). A full directory
    /// refuses it. Not for the hot path: appends from several writers take turns (a lock).
    pub fn add_instrument(&mut self, entry: &DirectoryEntry) -> Result<(), DirectoryFull> {
        self.add_naming(&entry.naming())
    }

    /// [`BusWriter::add_instrument`] with borrowed names: no allocation, so a decoder thread
    /// may name the instruments of a feed that names them as it goes (an uncontended lock,
    /// taken once per instrument named, never per event).
    pub fn add_naming(&mut self, entry: &Naming<'_>) -> Result<(), DirectoryFull> {
        let mut directory = self.directory();
        if directory.len >= directory.words.capacity() {
            return Err(DirectoryFull {
                capacity: directory.words.capacity(),
            });
        }
        let (bytes, cut) = entry.to_bytes();
        directory.names_cut += u64::from(cut);
        let index = directory.len;
        directory.words.append(index, &bytes);
        directory.len += 1;
        Ok(())
    }

    fn directory(&self) -> std::sync::MutexGuard<'_, DirectoryWriter> {
        // A panic while appending cannot leave an entry half-published (the count is stored
        // last), so a poisoned lock's directory is still sound.
        self.file
            .directory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Directory names cut to fit their field so far.
    pub fn names_cut(&self) -> u64 {
        self.directory().names_cut
    }

    pub fn epoch(&self) -> u64 {
        self.file.epoch
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// A handle for other threads to read the cursors and the directory's length.
    pub fn stats(&self) -> BusStats {
        BusStats {
            shared: Arc::clone(&self.file.shared),
            partitions: self.file.shared.read_u64(offsets::PARTITIONS) as u32,
        }
    }
}

impl Drop for BusWriter {
    fn drop(&mut self) {
        self.ring.publish();
    }
}

impl Drop for WriterFile {
    /// The last partition's writer is gone: the bus is closed.
    fn drop(&mut self) {
        self.shared
            .word(offsets::STATE)
            .store(layout::STATE_CLOSED, Ordering::Release);
    }
}

/// The directory has no room for another entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectoryFull {
    pub capacity: u64,
}

impl std::fmt::Display for DirectoryFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the bus directory is full ({} entries; raise [bus] directory_capacity)",
            self.capacity
        )
    }
}

impl std::error::Error for DirectoryFull {}
