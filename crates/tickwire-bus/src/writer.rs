//! The appliance's end of the bus: [`BusWriter`].

use crate::directory::{DirectoryEntry, DirectoryWords};
use crate::event::Event;
use crate::layout::{self, offsets, Geometry};
use crate::ring::RingWriter;
use crate::shm::{self, BusError, Mapping};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where and how big a bus is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusOptions {
    pub path: PathBuf,
    pub geometry: Geometry,
    /// The group the file is given (readers must be in it); `None` keeps the writer's.
    pub group: Option<u32>,
}

/// The one writer of a bus: writes events and directory entries, never waits for a reader.
///
/// Made on the control thread ([`BusWriter::create`]), then moved to the thread that publishes
/// (the decoder stage). [`BusWriter::write`] then [`BusWriter::publish`] once per batch.
/// Dropping it marks the bus closed, so readers learn the appliance stopped.
pub struct BusWriter {
    ring: RingWriter,
    directory: DirectoryWords,
    directory_len: u64,
    /// Names cut to fit their directory field.
    names_cut: u64,
    shared: Arc<Mapping>,
    epoch: u64,
    path: PathBuf,
    /// Held for the writer's life: the `flock` that keeps a second writer out.
    _lock: File,
}

/// What another thread (the control thread's metrics) reads of a bus while its writer runs.
#[derive(Clone)]
pub struct BusStats {
    shared: Arc<Mapping>,
}

impl BusStats {
    /// Events published so far: the write cursor.
    pub fn cursor(&self) -> u64 {
        self.shared.word(offsets::CURSOR).load(Ordering::Acquire)
    }

    /// Directory entries published so far.
    pub fn directory_len(&self) -> u64 {
        self.shared
            .word(offsets::DIRECTORY_COUNT)
            .load(Ordering::Acquire)
    }

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
    /// Makes the bus file (replacing an earlier appliance's) and maps it. `epoch` must differ
    /// from any earlier bus's at this path (the start time in ns does); `now_ns` is recorded
    /// as the creation time.
    pub fn create(options: &BusOptions, epoch: u64, now_ns: u64) -> Result<BusWriter, BusError> {
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
        // (`shm::create`); the words are used only by this writer and `BusStats`, which hold the
        // mapping, and only atomically.
        let (ring, directory) = unsafe { mapping.regions(geometry) };
        Ok(BusWriter {
            ring: RingWriter::new(ring, 0),
            directory,
            directory_len: 0,
            names_cut: 0,
            shared: mapping,
            epoch: created.epoch,
            path: options.path.clone(),
            _lock: created.lock,
        })
    }

    /// Writes `event` at the next position; readers see it after [`BusWriter::publish`].
    #[inline]
    pub fn write(&mut self, event: &Event) {
        self.ring.write(event);
    }

    /// Makes every event written so far visible: one store.
    #[inline]
    pub fn publish(&mut self) {
        self.ring.publish();
    }

    /// Events written so far.
    pub fn written(&self) -> u64 {
        self.ring.written()
    }

    /// Appends an instrument to the directory (visible at once). A full directory refuses it.
    pub fn add_instrument(&mut self, entry: &DirectoryEntry) -> Result<(), DirectoryFull> {
        if self.directory_len >= self.directory.capacity() {
            return Err(DirectoryFull {
                capacity: self.directory.capacity(),
            });
        }
        let (bytes, cut) = entry.to_bytes();
        self.names_cut += u64::from(cut);
        self.directory.append(self.directory_len, &bytes);
        self.directory_len += 1;
        Ok(())
    }

    /// Directory names cut to fit their field so far.
    pub fn names_cut(&self) -> u64 {
        self.names_cut
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle for other threads to read the cursor and the directory's length.
    pub fn stats(&self) -> BusStats {
        BusStats {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for BusWriter {
    fn drop(&mut self) {
        self.ring.publish();
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
