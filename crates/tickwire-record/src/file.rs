//! One recording file: DBN metadata, then records, as a chain of independent zstd frames.
//!
//! **Invariant: every byte on disk is part of a complete zstd frame, except the frame being
//! written when the process died.** The metadata is its own first frame, written (and, by
//! policy, synced) when the file is created; after that, each [`RecordingFile::flush`]
//! compresses the records encoded since the last one (with `dbn`'s own `RecordEncoder`) into one
//! frame and writes it with one `write_all`. A zstd stream is allowed to be several frames
//! concatenated (RFC 8878, section 3.1), so `zstd -d`, `dbn`'s decoder and Python's
//! `zstandard` read the file as one DBN stream, and a file cut by `kill -9` reads back to its
//! last whole frame.
//!
//! Nothing is ever patched: DBN metadata has no record count, its `end` is left unset, and a
//! file that failed a write is abandoned for a new one rather than appended to.

use dbn::encode::dbn::{MetadataEncoder, RecordEncoder};
use dbn::encode::EncodeRecordRef;
use dbn::Metadata;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// When a recording file is `fsync`ed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Never: the page cache decides (a process crash loses nothing flushed; a power cut may).
    Never,
    /// After every flushed frame.
    EveryFlush,
    /// When a file is closed (rotated or at exit), and once after the metadata.
    OnClose,
}

impl FsyncPolicy {
    pub fn from_name(name: &str) -> Option<FsyncPolicy> {
        match name {
            "never" => Some(FsyncPolicy::Never),
            "every-flush" => Some(FsyncPolicy::EveryFlush),
            "on-close" => Some(FsyncPolicy::OnClose),
            _ => None,
        }
    }

    pub const NAMES: &'static str = "never, every-flush, on-close";
}

/// An open recording file.
pub struct RecordingFile {
    path: PathBuf,
    file: File,
    fsync: FsyncPolicy,
    /// Encoded records not yet compressed.
    raw: Vec<u8>,
    /// The frame being written (kept to reuse its allocation).
    frame: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
    records_pending: u64,
    records_written: u64,
    bytes_written: u64,
}

impl RecordingFile {
    /// Creates `dir/name`, which must not exist (a restart never appends to an old file), and
    /// writes the metadata as the first frame.
    pub fn create(
        dir: &Path,
        name: &str,
        metadata: &Metadata,
        fsync: FsyncPolicy,
        zstd_level: i32,
    ) -> io::Result<RecordingFile> {
        let path = dir.join(name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut recording = RecordingFile {
            path,
            file,
            fsync,
            raw: Vec::with_capacity(1 << 20),
            frame: Vec::new(),
            compressor: zstd::bulk::Compressor::new(zstd_level)?,
            records_pending: 0,
            records_written: 0,
            bytes_written: 0,
        };
        MetadataEncoder::new(&mut recording.raw)
            .encode(metadata)
            .map_err(io::Error::other)?;
        recording.write_frame()?;
        if fsync != FsyncPolicy::Never {
            recording.file.sync_data()?;
        }
        Ok(recording)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Encodes a record into the frame being built (no I/O).
    pub fn push(&mut self, record: dbn::RecordRef<'_>) {
        // Writing into a Vec cannot fail, and a `RecordRef` is always a whole record.
        if RecordEncoder::new(&mut self.raw)
            .encode_record_ref(record)
            .is_ok()
        {
            self.records_pending += 1;
        }
    }

    /// Uncompressed bytes waiting for the next flush.
    pub fn pending_bytes(&self) -> usize {
        self.raw.len()
    }

    /// Records waiting for the next flush: what a failed flush loses.
    pub fn pending_records(&self) -> u64 {
        self.records_pending
    }

    /// Records in whole frames on disk.
    pub fn records_written(&self) -> u64 {
        self.records_written
    }

    /// Compressed bytes on disk.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn write_frame(&mut self) -> io::Result<()> {
        self.frame.clear();
        self.frame
            .reserve(zstd::zstd_safe::compress_bound(self.raw.len()));
        self.compressor
            .compress_to_buffer(&self.raw[..], &mut self.frame)?;
        self.file.write_all(&self.frame)?;
        self.bytes_written += self.frame.len() as u64;
        self.raw.clear();
        Ok(())
    }

    /// Writes the pending records as one frame (nothing when none are pending). On an error the
    /// pending records are lost and the file must be abandoned: part of a frame may be on disk.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.records_pending == 0 {
            return Ok(());
        }
        let records = self.records_pending;
        self.records_pending = 0;
        self.write_frame()?;
        self.records_written += records;
        if self.fsync == FsyncPolicy::EveryFlush {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Flushes and closes the file; returns the compressed bytes it holds.
    pub fn close(mut self) -> io::Result<u64> {
        self.flush()?;
        if self.fsync != FsyncPolicy::Never {
            self.file.sync_all()?;
        }
        Ok(self.bytes_written)
    }
}
