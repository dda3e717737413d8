//! A consumer's end of the bus: [`BusReader`], a read-only mapping and a position of its own.

use crate::directory::{DirectoryEntry, DirectoryWords};
use crate::event::Event;
use crate::layout::{self, offsets, Geometry};
use crate::ring::{Batch, RingError, RingReader};
use crate::shm::{self, BusError, Mapping, Owner};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Where a new reader starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Start {
    /// At the write cursor: only events published from now on.
    #[default]
    Latest,
    /// At the oldest event the ring still holds.
    Oldest,
    /// At this position (a consumer resuming where it stopped, as the NATS bridge does), at
    /// most the write cursor. A position the writer has reused since is reported by the first
    /// read as an overrun with the exact number of events lost.
    At(u64),
}

/// Why a read failed. Each says what to do: open the bus again, or give up on this file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The file was truncated under the reader (its owner or root did it): the mapping no
    /// longer holds the bus.
    Truncated { path: PathBuf },
    /// The memory does not behave as one writer's ring: the file was damaged or rewritten.
    Damaged { path: PathBuf, error: RingError },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Truncated { path } => write!(
                f,
                "bus {} was truncated under this reader; open it again once an appliance has \
                 made a new one",
                path.display()
            ),
            ReadError::Damaged { path, error } => {
                write!(f, "bus {} is damaged: {error:?}", path.display())
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// One reader of a bus, in this process. Any number may read one bus, each at its own pace;
/// none can disturb the writer or another reader (the file is mapped read-only).
///
/// A bus of several partitions (one per decoder) is read as one stream: each read takes one
/// partition's next events, the partitions in turn, so that none starves the others and each
/// instrument's events (all in one partition) come in order. A position is a partition's:
/// [`BusReader::positions`] gives every partition's.
pub struct BusReader {
    rings: Vec<RingReader>,
    /// The partition the next read looks at first.
    turn: usize,
    directory: DirectoryWords,
    mapping: Mapping,
    geometry: Geometry,
    epoch: u64,
    identity: (u64, u64),
    path: PathBuf,
}

impl BusReader {
    /// Maps the bus at `path` and checks its owner ([`Owner::Trusted`]) and its header.
    /// `batch` is the most events one [`BusReader::read`] copies.
    pub fn open(path: &Path, start: Start, batch: usize) -> Result<BusReader, BusError> {
        BusReader::open_owned(path, start, batch, Owner::Trusted)
    }

    /// [`BusReader::open`], accepting the file only from `owner`.
    pub fn open_owned(
        path: &Path,
        start: Start,
        batch: usize,
        owner: Owner,
    ) -> Result<BusReader, BusError> {
        let opened = shm::open(path, owner)?;
        let mapping = opened.mapping;
        let geometry = opened.geometry;
        // SAFETY: `shm::open` checked that the file holds the header and both regions where
        // `geometry` places them; the words are used only by this reader, which holds the
        // mapping, and only atomically.
        let (rings, directory) = unsafe { mapping.regions(geometry) };
        let rings = rings
            .into_iter()
            .enumerate()
            .map(|(k, ring)| {
                let cursor = ring.load_cursor();
                let position = match start {
                    Start::Latest => cursor,
                    // The oldest slot the writer has not claimed for reuse (the claim runs a
                    // little ahead of the cursor): a reader starting lower would be told at
                    // once that it missed what it never had.
                    Start::Oldest => ring
                        .oldest_intact()
                        .max(cursor.saturating_sub(geometry.capacity)),
                    Start::At(position) if k == 0 => position.min(cursor),
                    // `At` names a position of partition 0; the others start at their cursor
                    // unless `BusReader::seek` says otherwise.
                    Start::At(_) => cursor,
                };
                RingReader::new(ring, position, batch)
            })
            .collect();
        Ok(BusReader {
            rings,
            turn: 0,
            directory,
            mapping,
            geometry,
            epoch: opened.epoch,
            identity: opened.identity,
            path: path.to_owned(),
        })
    }

    /// Copies the next events of one partition into `out` (at most its length and the batch
    /// size), after reporting in `missed` any the writer of that partition lapped this reader
    /// by; [`Batch::partition`] says which. Takes the partitions in turn, from the one after
    /// the last read's, and returns the first that has something. Never blocks.
    #[inline]
    pub fn read(&mut self, out: &mut [Event]) -> Result<Batch, ReadError> {
        let partitions = self.rings.len();
        let mut result = Ok(Batch::default());
        for step in 0..partitions {
            let k = (self.turn + step) % partitions;
            result = self.rings[k].read(out).map(|batch| Batch {
                partition: k as u32,
                ..batch
            });
            match &result {
                Ok(batch) if batch.count == 0 && batch.missed == 0 => continue,
                _ => {
                    self.turn = (k + 1) % partitions;
                    break;
                }
            }
        }
        if self.mapping.truncated() {
            return Err(ReadError::Truncated {
                path: self.path.clone(),
            });
        }
        result
            .map(|batch| {
                if batch.count == 0 && batch.missed == 0 {
                    Batch::default()
                } else {
                    batch
                }
            })
            .map_err(|error| ReadError::Damaged {
                path: self.path.clone(),
                error,
            })
    }

    /// The position of the next event this reader will read in partition 0 (the only one of a
    /// bus of one partition): [`BusReader::positions`] gives every partition's.
    pub fn position(&self) -> u64 {
        self.rings[0].position()
    }

    /// The position of the next event this reader will read in each partition.
    pub fn positions(&self) -> Vec<u64> {
        self.rings.iter().map(RingReader::position).collect()
    }

    /// Moves partition `k`'s position to `positions[k]` (at most its cursor), for every
    /// partition `positions` names: a consumer resuming where it stopped. A position the writer
    /// has reused since is reported by a read as an overrun of that partition.
    pub fn seek(&mut self, positions: &[u64]) {
        for (ring, &position) in self.rings.iter_mut().zip(positions) {
            ring.seek(position);
        }
    }

    /// Events published that this reader has not read, every partition together (above the
    /// capacity: it is lapped).
    pub fn lag(&self) -> u64 {
        self.rings.iter().map(RingReader::lag).sum()
    }

    /// The write cursors together: events published since the bus was made.
    pub fn cursor(&self) -> u64 {
        (0..self.rings.len())
            .map(|k| self.partition_cursor(k as u32))
            .sum()
    }

    /// Partition `k`'s write cursor (0 past the last partition).
    pub fn partition_cursor(&self, k: u32) -> u64 {
        if k as usize >= self.rings.len() {
            return 0;
        }
        self.mapping
            .word(offsets::cursor(k as usize))
            .load(Ordering::Acquire)
    }

    /// The bus's partitions: one per decoder of the appliance that writes it.
    pub fn partitions(&self) -> u32 {
        self.rings.len() as u32
    }

    /// The bus's epoch: a new value each time an appliance makes the bus.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Slots in each partition's ring.
    pub fn capacity(&self) -> u64 {
        self.geometry.capacity
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer's process id.
    pub fn writer_pid(&self) -> u32 {
        self.mapping.read_u64(offsets::WRITER_PID) as u32
    }

    /// Whether the appliance stopped cleanly: nothing more will be written to this file.
    pub fn is_closed(&self) -> bool {
        self.mapping.word(offsets::STATE).load(Ordering::Acquire) == layout::STATE_CLOSED
    }

    /// The identity (device, inode) of the file this reader maps.
    pub fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// Whether the path now names another file (a restarted appliance made a new bus) or
    /// none (it was removed). A `stat`: call it when idle, not per read.
    pub fn replaced(&self) -> bool {
        shm::identity_at(&self.path) != Some(self.identity)
    }

    /// Directory entries published so far.
    pub fn directory_len(&self) -> u64 {
        self.directory.count()
    }

    /// Entry `index` (below [`BusReader::directory_len`]).
    pub fn directory_entry(&self, index: u64) -> Option<DirectoryEntry> {
        (index < self.directory.count()).then(|| self.directory.read(index))
    }

    /// Every entry published so far, in order (a later entry for the same instrument holds).
    pub fn directory(&self) -> Vec<DirectoryEntry> {
        (0..self.directory.count())
            .map(|index| self.directory.read(index))
            .collect()
    }
}
