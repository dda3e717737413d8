//! Reading recordings back: [`RecordingReader`] gives one file's events, [`Replay`] merges
//! several files (venues, days) into one stream in time order.
//!
//! Damage is reported, never skipped: a frame that does not decompress, a file cut inside a
//! frame (what `kill -9` leaves), or a record tickwire does not write ends the file's events
//! with a [`ReadError`] that names the file and the byte offset in it where the damaged frame
//! starts; every event before it has been handed out.

use crate::codec::{self, DecodeError};
use dbn::decode::{DbnMetadata, DecodeRecordRef};
use dbn::Metadata;
use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tickwire_bus::event::Event;
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};

/// Why a recording stopped before its end, or could not be opened.
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    /// Where the damaged frame starts in the file (compressed bytes); 0 when the file could not
    /// be opened or holds no metadata.
    pub offset: u64,
    /// In words, for people: what is wrong with the file.
    pub what: String,
    /// Whether the file was opened and its metadata read (the offset then says where the
    /// damage is; before, there is no offset to name).
    pub opened: bool,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)?;
        if self.opened {
            write!(f, " (at byte offset {})", self.offset)?;
        }
        Ok(())
    }
}

impl std::error::Error for ReadError {}

/// An I/O error in words: the message it carries (not its debug form), and for the system's
/// errors what they mean for a recording, without the errno.
fn io_words(error: &io::Error) -> String {
    if let Some(inner) = error.get_ref() {
        return inner.to_string();
    }
    match error.kind() {
        io::ErrorKind::NotFound => "no such file".to_owned(),
        io::ErrorKind::PermissionDenied => {
            "not readable by this user (permission denied)".to_owned()
        }
        io::ErrorKind::IsADirectory => "a directory, not a recording".to_owned(),
        io::ErrorKind::UnexpectedEof => "the file ends in the middle of a record".to_owned(),
        _ => {
            let text = error.to_string();
            // "... (os error N)": the number says nothing more to a person.
            match text.find(" (os error ") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        }
    }
}

/// A `dbn` error in words: its I/O errors by what they carry, not their debug form.
fn dbn_words(error: &dbn::Error) -> String {
    match error {
        dbn::Error::Io { source, .. } => io_words(source),
        dbn::Error::Decode(what) => what.clone(),
        other => other.to_string(),
    }
}

/// A zstd multi-frame stream that knows where its last whole frame ended.
struct FrameReader {
    file: File,
    dctx: DCtx<'static>,
    input: Vec<u8>,
    input_pos: usize,
    input_len: usize,
    /// File offset of `input[0]`.
    input_offset: u64,
    /// File offset just past the last frame that decompressed whole.
    frame_end: Rc<Cell<u64>>,
    in_frame: bool,
}

impl FrameReader {
    fn new(file: File, frame_end: Rc<Cell<u64>>) -> FrameReader {
        FrameReader {
            file,
            dctx: DCtx::create(),
            input: vec![0; 1 << 17],
            input_pos: 0,
            input_len: 0,
            input_offset: 0,
            frame_end,
            in_frame: false,
        }
    }
}

impl Read for FrameReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.input_pos == self.input_len {
                self.input_offset += self.input_len as u64;
                self.input_pos = 0;
                self.input_len = self.file.read(&mut self.input)?;
                if self.input_len == 0 {
                    return if self.in_frame {
                        // Not `UnexpectedEof`: `dbn`'s decoder takes that for the clean end of a
                        // stream, and a cut frame is damage.
                        Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "the file ends inside a zstd frame (cut while being written)",
                        ))
                    } else {
                        Ok(0)
                    };
                }
            }
            let mut input = InBuffer::around(&self.input[self.input_pos..self.input_len]);
            let mut output = OutBuffer::around(&mut *buf);
            let hint = self
                .dctx
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "a zstd frame does not decompress: {}",
                            zstd::zstd_safe::get_error_name(code)
                        ),
                    )
                })?;
            self.input_pos += input.pos();
            self.in_frame = hint != 0;
            if hint == 0 {
                self.frame_end
                    .set(self.input_offset + self.input_pos as u64);
            }
            if output.pos() > 0 {
                return Ok(output.pos());
            }
        }
    }
}

/// Checks the decompressed DBN stream's framing as it passes to the `dbn` decoder, which
/// assumes it: the metadata ends on an 8-byte boundary (DBN pads it so) and every record is a
/// whole number of 8-byte words, at least a header long. A record off the 8-byte grid makes
/// `dbn` 0.73 panic (`RecordRef::new` asserts alignment; found by the `dbn_recording` fuzz
/// target), so such a stream is an I/O error here, before the decoder sees the bytes.
struct FramingCheck<R> {
    inner: R,
    prelude: [u8; 8],
    prelude_seen: usize,
    /// Bytes of the current metadata or record still to pass; at 0, the next byte starts a
    /// record.
    skip: u64,
}

impl<R: Read> FramingCheck<R> {
    fn new(inner: R) -> FramingCheck<R> {
        FramingCheck {
            inner,
            prelude: [0; 8],
            prelude_seen: 0,
            skip: 0,
        }
    }

    fn check(&mut self, bytes: &[u8]) -> io::Result<()> {
        let damaged = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let mut at = 0;
        while at < bytes.len() {
            if self.prelude_seen < self.prelude.len() {
                self.prelude[self.prelude_seen] = bytes[at];
                self.prelude_seen += 1;
                at += 1;
                if self.prelude_seen == self.prelude.len() {
                    let length = u32::from_le_bytes([
                        self.prelude[4],
                        self.prelude[5],
                        self.prelude[6],
                        self.prelude[7],
                    ]);
                    if length % 8 != 0 {
                        return Err(damaged(format!(
                            "the DBN metadata is {length} bytes, not a whole number of 8-byte \
                             words: a damaged or foreign file"
                        )));
                    }
                    self.skip = u64::from(length);
                }
                continue;
            }
            if self.skip == 0 {
                let words = bytes[at];
                let length = usize::from(words) * dbn::RecordHeader::LENGTH_MULTIPLIER;
                if words % 2 == 1 || length < std::mem::size_of::<dbn::RecordHeader>() {
                    return Err(damaged(format!(
                        "a record of {length} bytes (DBN records are whole 8-byte words, at \
                         least a 16-byte header): a damaged or foreign file"
                    )));
                }
                self.skip = length as u64;
            }
            let take = self.skip.min((bytes.len() - at) as u64);
            self.skip -= take;
            at += take as usize;
        }
        Ok(())
    }
}

impl<R: Read> Read for FramingCheck<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.check(&buf[..read])?;
        Ok(read)
    }
}

/// The largest DBN metadata a recording may declare. The recorder's metadata is the header and one
/// symbol mapping per instrument (a few hundred bytes each), so this allows hundreds of thousands
/// of instruments; what it refuses is a damaged or foreign file whose length field would make the
/// `dbn` decoder allocate gigabytes before it finds out (found by the `dbn_recording` fuzz target).
pub const MAX_METADATA_BYTES: u32 = 64 << 20;

/// Reads the DBN prelude (`DBN`, the version byte, the metadata length) from the decompressed
/// start of the file and refuses a metadata length over [`MAX_METADATA_BYTES`]. A file too short
/// to hold a prelude is left to the `dbn` decoder, which names what is missing.
fn check_prelude(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {}", io_words(&e)))?;
    let mut reader = FrameReader::new(file, Rc::new(Cell::new(0)));
    let mut prelude = [0u8; 8];
    let mut filled = 0;
    while filled < prelude.len() {
        match reader.read(&mut prelude[filled..]) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(read) => filled += read,
        }
    }
    if &prelude[..3] != b"DBN" {
        return Ok(());
    }
    // tickwire writes the current DBN version only. The `dbn` decoder would upgrade an older
    // version's records by reading each as that version's struct, and panics on one shorter
    // than the struct (found by the `dbn_recording` fuzz target: a v1 file with a 76-byte
    // instrument definition), so an older or newer file is refused here, by name.
    if prelude[3] != dbn::DBN_VERSION {
        return Err(format!(
            "DBN version {} (tickwire records and reads version {}): not a tickwire recording",
            prelude[3],
            dbn::DBN_VERSION
        ));
    }
    let length = u32::from_le_bytes([prelude[4], prelude[5], prelude[6], prelude[7]]);
    if length > MAX_METADATA_BYTES {
        return Err(format!(
            "the DBN metadata claims {length} bytes, more than a recording holds (at most \
             {MAX_METADATA_BYTES}): a damaged or foreign file"
        ));
    }
    Ok(())
}

/// One recording file's events, in the order they were recorded.
pub struct RecordingReader {
    path: PathBuf,
    decoder: dbn::decode::dbn::Decoder<FramingCheck<FrameReader>>,
    frame_end: Rc<Cell<u64>>,
    failed: bool,
}

impl RecordingReader {
    /// Opens a file and reads its metadata.
    pub fn open(path: &Path) -> Result<RecordingReader, ReadError> {
        let frame_end = Rc::new(Cell::new(0));
        let error = |what: String| ReadError {
            path: path.to_path_buf(),
            offset: 0,
            what,
            opened: false,
        };
        let file = File::open(path).map_err(|e| error(format!("cannot open: {}", io_words(&e))))?;
        check_prelude(path).map_err(error)?;
        // `AsIs`: the version is checked above, and no upgrade is ever wanted.
        let decoder = dbn::decode::dbn::Decoder::with_upgrade_policy(
            FramingCheck::new(FrameReader::new(file, Rc::clone(&frame_end))),
            dbn::VersionUpgradePolicy::AsIs,
        )
        .map_err(|e| {
            error(format!(
                "not a recording (no DBN metadata): {}",
                dbn_words(&e)
            ))
        })?;
        Ok(RecordingReader {
            path: path.to_path_buf(),
            decoder,
            frame_end,
            failed: false,
        })
    }

    pub fn metadata(&self) -> &Metadata {
        self.decoder.metadata()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&mut self, what: String) -> ReadError {
        self.failed = true;
        ReadError {
            path: self.path.clone(),
            offset: self.frame_end.get(),
            what,
            opened: true,
        }
    }

    /// The next event, `Ok(None)` at the end of the file. After an error, `Ok(None)`.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        if self.failed {
            return Ok(None);
        }
        let decoded = match self.decoder.decode_record_ref() {
            Ok(Some(record)) => codec::decode(record),
            Ok(None) => return Ok(None),
            Err(error) => return Err(self.error(dbn_words(&error))),
        };
        match decoded {
            Ok(event) => Ok(Some(event)),
            Err(
                error @ (DecodeError::UnknownRType { .. }
                | DecodeError::Short { .. }
                | DecodeError::UnknownAction { .. }
                | DecodeError::UnknownKind { .. }),
            ) => Err(self.error(format!("not a tickwire record: {error}"))),
        }
    }
}

/// Several recordings merged into one stream: at each step the event with the earliest
/// `recv_ts_ns` among the files' next events (ties to the file given first). Each file's own
/// order, the bus's order for its venue, is kept as it is.
pub struct Replay {
    files: Vec<(RecordingReader, Option<Event>)>,
    /// Damage found while reading ahead, handed out before the next event.
    errors: VecDeque<ReadError>,
}

/// One file of a [`Replay`]: where it is, its metadata, and its venue (the `venue_id` of its
/// first event, `None` for a file with none).
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    pub metadata: Metadata,
    pub venue_id: Option<u16>,
}

impl Replay {
    /// The files, in the order given.
    pub fn sources(&self) -> Vec<Source> {
        self.files
            .iter()
            .map(|(reader, head)| Source {
                path: reader.path().to_path_buf(),
                metadata: reader.metadata().clone(),
                venue_id: head.map(|event| event.header.venue_id),
            })
            .collect()
    }

    /// Opens every file and reads its first event. A file that cannot be opened or has no
    /// metadata fails the whole call; damage after the metadata comes from
    /// [`Replay::next_event`].
    pub fn open(paths: &[PathBuf]) -> Result<Replay, ReadError> {
        let mut files = Vec::with_capacity(paths.len());
        let mut errors = VecDeque::new();
        for path in paths {
            let mut reader = RecordingReader::open(path)?;
            let head = reader.next_event().unwrap_or_else(|error| {
                errors.push_back(error);
                None
            });
            files.push((reader, head));
        }
        Ok(Replay { files, errors })
    }

    /// The next event in time order, or the damage found in a file (whose events before the
    /// damage were all handed out; the other files go on). `None` at the end of every file.
    pub fn next_event(&mut self) -> Option<Result<Event, ReadError>> {
        if let Some(error) = self.errors.pop_front() {
            return Some(Err(error));
        }
        let (index, _) = self
            .files
            .iter()
            .enumerate()
            .filter_map(|(index, (_, head))| head.map(|event| (index, event.header.recv_ts_ns)))
            .min_by_key(|&(index, recv_ts_ns)| (recv_ts_ns, index))?;
        let (reader, head) = &mut self.files[index];
        let event = head.take()?;
        *head = reader.next_event().unwrap_or_else(|error| {
            self.errors.push_back(error);
            None
        });
        Some(Ok(event))
    }
}
