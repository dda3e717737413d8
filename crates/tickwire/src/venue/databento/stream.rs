//! DBN records out of the chunks of bytes tickwire receives: a thin owner of the official `dbn`
//! crate's sans-IO [`DbnFsm`], so that the live gateway's TCP reads, a `.dbn` file and a
//! record-only `.frag` file all go through the same decoder.
//!
//! The stream always decodes with [`VersionUpgradePolicy::UpgradeToV3`]: DBN v1 and v2 input is
//! upgraded record by record into the v3 layouts (`dbn`'s top-level types), so a consumer only
//! ever names `dbn::MboMsg`, `dbn::InstrumentDefMsg`... and a v1 definition is never read as a v3
//! one. (The upgrade copies each record into the FSM's compat buffer; v3 input is zero-copy.)
//! The metadata is upgraded too: its `version` reads 3; [`RecordStream::input_version`] keeps
//! the version that was on the wire.
//!
//! **Invariant:** nothing here allocates per record. `feed` copies into the FSM's buffer, which
//! grows only when a caller feeds more than it drains; [`RecordStream::space`] and
//! [`RecordStream::fill`] avoid even that copy.
//!
//! **Invariant:** after an error the stream is out of step with the bytes (DBN has no resync
//! marker): it reports the error once, then yields nothing until [`RecordStream::reset`].
//!
//! **Invariant:** no input panics. The FSM's upgrade of a v1 or v2 record reads it as its
//! version's struct with `RecordRef::get(..).unwrap()` (dbn 0.73, `upgrade_record` in
//! `decode/dbn/fsm.rs`), which panics on a record shorter than that struct: a STATISTICS header
//! of 16 bytes after v2 metadata aborted `tickwire decode` (issue 24; the release profile is
//! `panic = "abort"`). So before the FSM sees a v1 or v2 record of a type the upgrade converts,
//! [`RecordStream::next`] checks its length byte against that type's size in its version
//! ([`upgraded_layout_bytes`]) and reports a shorter one as [`StreamError::ShortRecord`], at the
//! record's offset. Records of the other types are not converted: they pass through in their
//! (v3-identical) layout, and the normalizer counts a short one as malformed, as it does for
//! v3 input.

use dbn::decode::dbn::fsm::{DbnFsm, ProcessResult};
use dbn::{Metadata, RecordRef, VersionUpgradePolicy};

/// The DBN versions the stream reads (DBN v4 has a wider record header; nothing tickwire
/// receives uses it yet).
pub const SUPPORTED_VERSIONS: std::ops::RangeInclusive<u8> = 1..=3;

/// The largest metadata header accepted, in bytes. The prelude's length field is a `u32` that
/// the FSM would otherwise allocate for before checking anything; a live session's metadata is a
/// few hundred bytes, a historical file's symbology a few MiB.
pub const MAX_METADATA_BYTES: u32 = 64 << 20;

/// The magic bytes of a DBN stream, before the version byte.
const DBN_PREFIX: &[u8; 3] = b"DBN";
/// A zstd frame's magic number, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What a stream yields.
#[derive(Debug)]
pub enum Item<'a> {
    /// The stream's header, once, before any record (not for fragments). Boxed: it is read
    /// once per stream, and a record item stays two words.
    Metadata(Box<Metadata>),
    /// One record, in the v3 layout, borrowed until the next call to [`RecordStream::next`].
    Record(RecordRef<'a>),
}

/// Why the bytes are not a DBN stream tickwire can read.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("DBN version {0} is not supported (tickwire reads versions 1 to 3)")]
    UnsupportedVersion(u8),
    #[error("legacy DBZ (version 0) data: read it with dbn's DynDecoder, which converts it; the record stream reads DBN only")]
    Dbz,
    #[error("zstd-compressed data: decompress it before the record stream")]
    Compressed,
    #[error("not a DBN stream: it starts with {0:02x?}, not \"DBN\"")]
    NotDbn([u8; 4]),
    #[error("DBN metadata of {0} bytes exceeds the {MAX_METADATA_BYTES}-byte limit")]
    MetadataTooLarge(u32),
    /// A v1 or v2 record shorter than its type's struct in that version, which the upgrade to
    /// v3 would read past (see the module docs).
    #[error(
        "DBN v{version} rtype {rtype:#04x} record of {bytes} bytes, under its {needed}-byte layout"
    )]
    ShortRecord {
        version: u8,
        rtype: u8,
        bytes: usize,
        needed: usize,
    },
    /// A record whose length (in 4-byte words) is odd: every DBN record is a struct of 8-byte
    /// alignment, so such a record is damage, and the records after it would start unaligned
    /// (`dbn` asserts their alignment in debug builds and reads them unaligned otherwise; the
    /// `dbn_stream` fuzz target found it).
    #[error("DBN record of {bytes} bytes: not a whole number of 8-byte words")]
    UnalignedRecord { bytes: usize },
    #[error("stream ends inside a DBN {what}: {bytes} bytes left over")]
    Truncated { what: &'static str, bytes: usize },
    #[error("DBN decode: {0}")]
    Decode(#[from] dbn::Error),
}

/// A DBN byte stream decoded record by record. See the module docs.
pub struct RecordStream {
    fsm: DbnFsm,
    /// `Some(version)` for a fragment (records with no metadata header).
    fragment_version: Option<u8>,
    /// Bytes fed since the start or the last reset.
    fed_bytes: u64,
    records: u64,
    /// An error was reported; nothing more until `reset`.
    failed: bool,
    /// The 8-byte prelude (magic, version, metadata length) passed `check_prelude` (always true
    /// for a fragment).
    prelude_checked: bool,
    /// A fragment's records carry the 8-byte send time `ts_out` (a stream with metadata says so
    /// in its metadata).
    fragment_ts_out: bool,
}

/// The size a v1 or v2 record of `rtype` must have for the FSM's upgrade to v3, without
/// `ts_out`: the struct the upgrade reads it as, for the types it converts (dbn 0.73,
/// `DbnFsm::upgrade_record_with_version`); `None` for the types it passes through unchanged.
pub fn upgraded_layout_bytes(version: u8, rtype: u8) -> Option<usize> {
    use dbn::rtype;
    use std::mem::size_of;
    Some(match (version, rtype) {
        (1, rtype::INSTRUMENT_DEF) => size_of::<dbn::v1::InstrumentDefMsg>(),
        (2, rtype::INSTRUMENT_DEF) => size_of::<dbn::v2::InstrumentDefMsg>(),
        (1 | 2, rtype::STATISTICS) => size_of::<dbn::v1::StatMsg>(),
        (1, rtype::SYMBOL_MAPPING) => size_of::<dbn::v1::SymbolMappingMsg>(),
        (1, rtype::ERROR) => size_of::<dbn::v1::ErrorMsg>(),
        (1, rtype::SYSTEM) => size_of::<dbn::v1::SystemMsg>(),
        _ => return None,
    })
}

impl RecordStream {
    /// A stream that starts with DBN metadata: the live gateway's, a `.dbn` file.
    pub fn new() -> RecordStream {
        RecordStream {
            fsm: Self::build(None, false),
            fragment_version: None,
            fed_bytes: 0,
            records: 0,
            failed: false,
            prelude_checked: false,
            fragment_ts_out: false,
        }
    }

    /// A stream of records with no metadata header (a `.frag` file) in DBN `version`.
    pub fn fragment(version: u8) -> Result<RecordStream, StreamError> {
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(StreamError::UnsupportedVersion(version));
        }
        Ok(RecordStream {
            fsm: Self::build(Some(version), false),
            fragment_version: Some(version),
            fed_bytes: 0,
            records: 0,
            failed: false,
            prelude_checked: true,
            fragment_ts_out: false,
        })
    }

    /// A fragment whose records each carry the 8-byte send time `ts_out` (DBN's `WithTsOut`),
    /// as a DBZ file's records do when its metadata says `ts_out`. No effect on a stream with
    /// metadata, which says so itself.
    pub fn with_ts_out(mut self, ts_out: bool) -> RecordStream {
        if self.fragment_version.is_some() {
            self.fragment_ts_out = ts_out;
            self.fsm.set_ts_out(ts_out);
        }
        self
    }

    fn build(fragment_version: Option<u8>, ts_out: bool) -> DbnFsm {
        let builder = DbnFsm::builder()
            .upgrade_policy(VersionUpgradePolicy::UpgradeToV3)
            .compat_size(dbn::MAX_RECORD_LEN);
        let built = match fragment_version {
            Some(version) => builder
                .skip_metadata(true)
                .ts_out(ts_out)
                .input_dbn_version(Some(version))
                .and_then(|builder| builder.build()),
            None => builder.build(),
        };
        // Only a version outside 1..=4 or a policy the v3 header cannot produce fail the build,
        // and both are checked above; the fallback keeps this path panic-free all the same.
        built.unwrap_or_else(|_| DbnFsm::new(DbnFsm::DEFAULT_BUF_SIZE, dbn::MAX_RECORD_LEN))
    }

    /// Copies `bytes` into the stream's buffer.
    #[inline]
    pub fn feed(&mut self, bytes: &[u8]) {
        self.fsm.write_all(bytes);
        self.fed_bytes += bytes.len() as u64;
    }

    /// Free buffer space to read into directly (at least one maximal record when the buffer is
    /// that large); call [`RecordStream::fill`] with what was written.
    #[inline]
    pub fn space(&mut self) -> &mut [u8] {
        self.fsm.space()
    }

    /// Marks `bytes` of [`RecordStream::space`] as written.
    #[inline]
    pub fn fill(&mut self, bytes: usize) {
        self.fsm.fill(bytes);
        self.fed_bytes += bytes as u64;
    }

    /// The next metadata or record, `None` when more bytes are needed (or after an error). Call
    /// it until `None` after each feed.
    #[allow(
        clippy::should_implement_trait,
        reason = "items borrow the stream (a lending iterator), which `Iterator` cannot express"
    )]
    #[inline]
    pub fn next(&mut self) -> Option<Result<Item<'_>, StreamError>> {
        if self.failed {
            return None;
        }
        if !self.prelude_checked {
            if let Err(error) = self.check_prelude() {
                self.failed = true;
                return Some(Err(error));
            }
            // The FSM consumes the prelude once all 8 bytes are here, which `check_prelude` has
            // then seen whole.
            self.prelude_checked = self.fsm.data().len() >= 8;
        }
        if let Err(error) = self.check_record() {
            self.failed = true;
            return Some(Err(error));
        }
        match self.fsm.process() {
            ProcessResult::ReadMore(_) => None,
            ProcessResult::Metadata(metadata) => Some(Ok(Item::Metadata(Box::new(metadata)))),
            ProcessResult::Record(()) => {
                self.records += 1;
                // `process` just returned `Record`, so a record is current.
                self.fsm
                    .last_record()
                    .map(|record| Ok(Item::Record(record)))
            }
            ProcessResult::Err(error) => {
                self.failed = true;
                Some(Err(StreamError::Decode(error)))
            }
        }
    }

    /// Refuses what the FSM would misread or over-allocate for, before it sees the prelude:
    /// another format, a version outside 1..=3, an absurd metadata length.
    fn check_prelude(&self) -> Result<(), StreamError> {
        let data = self.fsm.data();
        let mut head = [0u8; 4];
        let seen = data.len().min(4);
        head[..seen].copy_from_slice(&data[..seen]);
        if seen == 4 && head == ZSTD_MAGIC {
            return Err(StreamError::Compressed);
        }
        // DBZ starts with a zstd skippable frame, magic 0x184D2A50..=0x184D2A5F.
        if seen == 4 && head[0] & 0xf0 == 0x50 && head[1..] == [0x2a, 0x4d, 0x18] {
            return Err(StreamError::Dbz);
        }
        let prefix = seen.min(DBN_PREFIX.len());
        if data[..prefix] != DBN_PREFIX[..prefix] {
            return Err(StreamError::NotDbn(head));
        }
        if seen == 4 && !SUPPORTED_VERSIONS.contains(&head[3]) {
            return Err(StreamError::UnsupportedVersion(head[3]));
        }
        if data.len() >= 8 {
            let length = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
            if length > MAX_METADATA_BYTES {
                return Err(StreamError::MetadataTooLarge(length));
            }
        }
        Ok(())
    }

    /// Refuses a record of an odd number of 4-byte words (every DBN record is a whole number of
    /// 8-byte words), and a v1 or v2 record the FSM's upgrade would read past (see the module
    /// docs). Only the record's first two bytes are needed: its length in 4-byte words and its
    /// rtype.
    #[inline]
    fn check_record(&self) -> Result<(), StreamError> {
        if !self.fsm.has_decoded_metadata() {
            return Ok(());
        }
        let &[length_words, rtype, ..] = self.fsm.data() else {
            return Ok(());
        };
        if length_words % 2 == 1 {
            return Err(StreamError::UnalignedRecord {
                bytes: usize::from(length_words) * dbn::RecordHeader::LENGTH_MULTIPLIER,
            });
        }
        let Some(version @ 1..=2) = self.fsm.input_dbn_version() else {
            return Ok(());
        };
        let Some(layout) = upgraded_layout_bytes(version, rtype) else {
            return Ok(());
        };
        let needed = layout + if self.fsm.ts_out() { 8 } else { 0 };
        let bytes = usize::from(length_words) * dbn::RecordHeader::LENGTH_MULTIPLIER;
        if bytes < needed {
            return Err(StreamError::ShortRecord {
                version,
                rtype,
                bytes,
                needed,
            });
        }
        Ok(())
    }

    /// Checks that the input ended cleanly: no partial record or metadata is buffered. For the
    /// end of a file; a live stream never ends mid-record on purpose either.
    pub fn finish(&self) -> Result<(), StreamError> {
        let bytes = self.fsm.data().len();
        if self.fragment_version.is_none() && !self.fsm.has_decoded_metadata() {
            return Err(StreamError::Truncated {
                what: "metadata header",
                bytes,
            });
        }
        if bytes > 0 {
            return Err(StreamError::Truncated {
                what: "record",
                bytes,
            });
        }
        Ok(())
    }

    /// Back to the start of a stream (a reconnect): buffered bytes are dropped, and a stream
    /// made by [`RecordStream::new`] expects metadata again.
    pub fn reset(&mut self) {
        match self.fragment_version {
            None => self.fsm.reset(),
            // `DbnFsm::reset` would expect metadata and forget the version: build it anew.
            Some(version) => self.fsm = Self::build(Some(version), self.fragment_ts_out),
        }
        self.fed_bytes = 0;
        self.records = 0;
        self.failed = false;
        self.prelude_checked = self.fragment_version.is_some();
    }

    /// The offset, in bytes from the start of the stream, of the first byte not yet decoded:
    /// where the current record ends or, after an error, where the offending header starts.
    pub fn position(&self) -> u64 {
        self.fed_bytes - self.fsm.data().len() as u64
    }

    /// The DBN version on the wire (before the upgrade to v3), once known.
    pub fn input_version(&self) -> Option<u8> {
        self.fsm.input_dbn_version()
    }

    /// Records decoded since the start or the last reset.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether the metadata has been decoded (always true for a fragment).
    pub fn has_metadata(&self) -> bool {
        self.fsm.has_decoded_metadata()
    }
}

impl Default for RecordStream {
    fn default() -> RecordStream {
        RecordStream::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dbn::encode::{DbnEncoder, EncodeRecord};
    use dbn::{MboMsg, MetadataBuilder, RecordHeader, SType, Schema, TradeMsg};

    fn metadata() -> Metadata {
        MetadataBuilder::new()
            .dataset("GLBX.MDP3".to_owned())
            .schema(Some(Schema::Trades))
            .start(1)
            .stype_in(Some(SType::RawSymbol))
            .stype_out(SType::InstrumentId)
            .build()
    }

    fn trade(sequence: u32) -> TradeMsg {
        TradeMsg {
            hd: RecordHeader::new::<TradeMsg>(
                dbn::rtype::MBP_0,
                1,
                42,
                1_000 + u64::from(sequence),
            ),
            price: 5_000_000_000,
            size: 3,
            action: b'T' as std::ffi::c_char,
            side: b'A' as std::ffi::c_char,
            flags: dbn::FlagSet::new(dbn::flags::LAST),
            depth: 0,
            ts_recv: 2_000,
            ts_in_delta: 0,
            sequence,
        }
    }

    fn encoded(records: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut encoder = DbnEncoder::new(&mut bytes, &metadata()).expect("encoder");
        for sequence in 0..records {
            encoder.encode_record(&trade(sequence)).expect("encode");
        }
        bytes
    }

    /// Feeds `bytes` in `chunk`-byte pieces and collects the sequences of the trades read.
    fn read(stream: &mut RecordStream, bytes: &[u8], chunk: usize) -> (bool, Vec<u32>) {
        let mut metadata = false;
        let mut sequences = Vec::new();
        for piece in bytes.chunks(chunk) {
            stream.feed(piece);
            while let Some(item) = stream.next() {
                match item.expect("valid stream") {
                    Item::Metadata(md) => {
                        assert_eq!(md.dataset, "GLBX.MDP3");
                        metadata = true;
                    }
                    Item::Record(record) => {
                        sequences.push(record.get::<TradeMsg>().expect("a trade").sequence)
                    }
                }
            }
        }
        (metadata, sequences)
    }

    #[test]
    fn any_chunking_yields_the_metadata_then_every_record() {
        let bytes = encoded(5);
        for chunk in [1, 2, 7, 61, bytes.len()] {
            let mut stream = RecordStream::new();
            let (metadata, sequences) = read(&mut stream, &bytes, chunk);
            assert!(metadata, "chunk {chunk}");
            assert_eq!(sequences, vec![0, 1, 2, 3, 4], "chunk {chunk}");
            assert_eq!(stream.position(), bytes.len() as u64);
            assert_eq!(stream.input_version(), Some(dbn::DBN_VERSION));
            stream.finish().expect("clean end");
        }
    }

    #[test]
    fn the_space_and_fill_path_reads_the_same() {
        let bytes = encoded(3);
        let mut stream = RecordStream::new();
        let mut sequences = Vec::new();
        for piece in bytes.chunks(13) {
            let space = stream.space();
            space[..piece.len()].copy_from_slice(piece);
            stream.fill(piece.len());
            while let Some(item) = stream.next() {
                if let Item::Record(record) = item.expect("valid") {
                    sequences.push(record.get::<TradeMsg>().expect("trade").sequence);
                }
            }
        }
        assert_eq!(sequences, vec![0, 1, 2]);
    }

    #[test]
    fn a_truncated_stream_is_reported_at_the_end() {
        let bytes = encoded(2);
        let mut stream = RecordStream::new();
        let (_, sequences) = read(&mut stream, &bytes[..bytes.len() - 5], 64);
        assert_eq!(sequences, vec![0]);
        assert!(matches!(
            stream.finish(),
            Err(StreamError::Truncated { what: "record", bytes }) if bytes == 48 - 5
        ));
        let mut empty = RecordStream::new();
        empty.feed(b"DBN");
        assert!(empty.next().is_none());
        assert!(matches!(
            empty.finish(),
            Err(StreamError::Truncated {
                what: "metadata header",
                ..
            })
        ));
    }

    #[test]
    fn other_formats_and_versions_are_refused_clearly_once() {
        type Expect = fn(&StreamError) -> bool;
        let cases: [(&[u8], Expect); 5] = [
            (b"DBN\x04\x10\0\0\0", |e| {
                matches!(e, StreamError::UnsupportedVersion(4))
            }),
            (b"DBN\x00", |e| {
                matches!(e, StreamError::UnsupportedVersion(0))
            }),
            (&[0x50, 0x2a, 0x4d, 0x18, 0, 0], |e| {
                matches!(e, StreamError::Dbz)
            }),
            (&[0x28, 0xb5, 0x2f, 0xfd], |e| {
                matches!(e, StreamError::Compressed)
            }),
            (b"{\"a\"", |e| matches!(e, StreamError::NotDbn(_))),
        ];
        for (bytes, expected) in cases {
            let mut stream = RecordStream::new();
            stream.feed(bytes);
            match stream.next() {
                Some(Err(error)) => assert!(expected(&error), "{bytes:?}: {error}"),
                other => panic!("{bytes:?}: expected an error, got {other:?}"),
            }
            assert!(stream.next().is_none(), "an error is reported once");
        }
        let mut huge = RecordStream::new();
        huge.feed(b"DBN\x03\xff\xff\xff\xff");
        assert!(matches!(
            huge.next(),
            Some(Err(StreamError::MetadataTooLarge(u32::MAX)))
        ));
        assert!(matches!(
            RecordStream::fragment(4),
            Err(StreamError::UnsupportedVersion(4))
        ));
    }

    #[test]
    fn a_bad_record_length_is_an_error_and_reset_recovers() {
        let bytes = encoded(1);
        let mut stream = RecordStream::new();
        let header_end = bytes.len() - 48;
        stream.feed(&bytes[..header_end]);
        assert!(matches!(stream.next(), Some(Ok(Item::Metadata(_)))));
        // A record whose length byte says 0 bytes (shorter than its own header).
        stream.feed(&[0u8; 16]);
        assert!(matches!(stream.next(), Some(Err(StreamError::Decode(_)))));
        assert_eq!(stream.position(), header_end as u64);
        assert!(stream.next().is_none());
        stream.reset();
        let (metadata, sequences) = read(&mut stream, &bytes, 9);
        assert!(metadata);
        assert_eq!(sequences, vec![0]);
    }

    /// DBN `version` metadata (with `ts_out` as given), as Databento's encoder writes it.
    fn old_metadata(version: u8, ts_out: bool) -> Vec<u8> {
        let metadata = MetadataBuilder::new()
            .version(version)
            .dataset("XNAS.ITCH".to_owned())
            .schema(None)
            .start(1)
            .stype_in(Some(SType::RawSymbol))
            .stype_out(SType::InstrumentId)
            .ts_out(ts_out)
            .build();
        let mut bytes = Vec::new();
        DbnEncoder::new(&mut bytes, &metadata).expect("encoder");
        bytes
    }

    /// A record of `length_bytes` (a multiple of 4, at least 16) whose header names `rtype`,
    /// zeros after the header.
    fn raw_record(rtype: u8, length_bytes: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; length_bytes];
        bytes[0] = (length_bytes / 4) as u8;
        bytes[1] = rtype;
        bytes
    }

    #[test]
    fn a_short_v2_statistics_record_is_an_error_not_a_panic() {
        // Issue 24: a 16-byte STATISTICS header after v2 metadata aborted in dbn's upgrade.
        let metadata = old_metadata(2, false);
        let mut bytes = metadata.clone();
        let mut trade_bytes = Vec::new();
        dbn::encode::DbnRecordEncoder::new(&mut trade_bytes)
            .encode_record(&trade(1))
            .expect("encode");
        bytes.extend_from_slice(&trade_bytes);
        let short_at = bytes.len() as u64;
        bytes.extend_from_slice(&raw_record(dbn::rtype::STATISTICS, 16));
        bytes.extend_from_slice(&trade_bytes);
        for chunk in [1, 5, bytes.len()] {
            let mut stream = RecordStream::new();
            let mut trades = 0;
            let mut error = None;
            for piece in bytes.chunks(chunk) {
                stream.feed(piece);
                while let Some(item) = stream.next() {
                    match item {
                        Ok(Item::Metadata(_)) => {}
                        Ok(Item::Record(record)) => {
                            assert!(record.get::<TradeMsg>().is_some());
                            trades += 1;
                        }
                        Err(failure) => {
                            assert!(error.is_none(), "an error is reported once");
                            error = Some((failure, stream.position()));
                        }
                    }
                }
            }
            assert_eq!(trades, 1, "chunk {chunk}: the trade before it");
            let (error, position) = error.expect("the short record is refused");
            assert!(
                matches!(
                    error,
                    StreamError::ShortRecord {
                        version: 2,
                        rtype: dbn::rtype::STATISTICS,
                        bytes: 16,
                        needed: 64,
                    }
                ),
                "chunk {chunk}: {error}"
            );
            assert_eq!(position, short_at, "chunk {chunk}: the record's offset");
        }
    }

    /// Every rtype, in v1 and v2, with and without `ts_out`, at every length from the header's
    /// 16 bytes to past the largest v1/v2 struct: the stream yields records or one error and
    /// never panics. This guards the table in `upgraded_layout_bytes` against a `dbn` release
    /// that converts more types.
    #[test]
    fn no_v1_or_v2_record_length_panics_the_upgrade() {
        let max_layout = std::mem::size_of::<dbn::v2::InstrumentDefMsg>()
            .max(std::mem::size_of::<dbn::v1::InstrumentDefMsg>())
            + 8;
        let mut cases = 0;
        for version in 1..=2u8 {
            for ts_out in [false, true] {
                let metadata = old_metadata(version, ts_out);
                let mut stream = RecordStream::new();
                for rtype in 0..=255u8 {
                    let lengths: Vec<usize> = if upgraded_layout_bytes(version, rtype).is_some() {
                        (16..=max_layout.next_multiple_of(4)).step_by(4).collect()
                    } else {
                        vec![16, 24]
                    };
                    for length in lengths {
                        stream.reset();
                        stream.feed(&metadata);
                        stream.feed(&raw_record(rtype, length));
                        while let Some(item) = stream.next() {
                            if let Ok(Item::Record(record)) = item {
                                assert_eq!(record.header().rtype, rtype);
                            }
                        }
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 2_000, "{cases}");
    }

    #[test]
    fn the_layout_table_holds_dbn_v1_and_v2_sizes() {
        // The sizes DBN documents for these layouts (dbn's own layout tests).
        assert_eq!(upgraded_layout_bytes(1, dbn::rtype::STATISTICS), Some(64));
        assert_eq!(upgraded_layout_bytes(2, dbn::rtype::STATISTICS), Some(64));
        assert_eq!(
            upgraded_layout_bytes(1, dbn::rtype::INSTRUMENT_DEF),
            Some(360)
        );
        assert_eq!(
            upgraded_layout_bytes(2, dbn::rtype::INSTRUMENT_DEF),
            Some(400)
        );
        assert_eq!(
            upgraded_layout_bytes(1, dbn::rtype::SYMBOL_MAPPING),
            Some(80)
        );
        assert_eq!(upgraded_layout_bytes(2, dbn::rtype::SYMBOL_MAPPING), None);
        assert_eq!(upgraded_layout_bytes(3, dbn::rtype::STATISTICS), None);
        assert_eq!(upgraded_layout_bytes(1, dbn::rtype::MBO), None);
    }

    /// The seeds of the `dbn_stream` fuzz target (`fuzz/seeds/dbn_stream/`), read as that
    /// target reads its input (first byte: chunk size, odd for a fragment; second: the
    /// fragment's version), reach the length checks and are refused by them: `short-*` by the
    /// layout check, `odd-*` (a record of an odd number of words) by the alignment check.
    #[test]
    fn the_fuzz_seeds_for_short_records_are_refused_by_the_length_check() {
        // The repository root is two folders up from this crate (`crates/tickwire`).
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/dbn_stream");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).expect("the seeds folder") {
            let path = entry.expect("entry").path();
            let data = std::fs::read(&path).expect("seed");
            let [chunk, version, rest @ ..] = &data[..] else {
                panic!("{}: too short for the target", path.display());
            };
            let mut stream = if chunk & 1 == 1 {
                RecordStream::fragment(1 + version % 3).expect("a version")
            } else {
                RecordStream::new()
            };
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let mut refused = false;
            for piece in rest.chunks(usize::from(*chunk).max(1)) {
                stream.feed(piece);
                while let Some(item) = stream.next() {
                    if let Err(error) = item {
                        refused = if name.starts_with("odd-") {
                            matches!(error, StreamError::UnalignedRecord { .. })
                        } else {
                            matches!(error, StreamError::ShortRecord { .. })
                        };
                    }
                }
            }
            assert!(refused, "{}", path.display());
            seeds += 1;
        }
        assert!(seeds >= 7, "{seeds} seeds");
    }

    #[test]
    fn a_fragment_with_ts_out_reads_its_send_times() {
        let mut bytes = Vec::new();
        let record = dbn::WithTsOut::new(trade(3), 77);
        dbn::encode::DbnRecordEncoder::new(&mut bytes)
            .encode_record(&record)
            .expect("encode");
        for round in 0..2 {
            let mut stream = RecordStream::fragment(3).expect("v3").with_ts_out(true);
            if round == 1 {
                stream.feed(&bytes[..5]);
                stream.reset();
            }
            stream.feed(&bytes);
            let Some(Ok(Item::Record(read))) = stream.next() else {
                panic!("a record");
            };
            assert_eq!(read.header().record_size(), bytes.len());
            assert_eq!(read.get::<TradeMsg>().expect("trade").sequence, 3);
            assert!(stream.next().is_none());
            stream.finish().expect("clean end");
        }
    }

    #[test]
    fn a_fragment_reads_records_with_no_metadata_and_resets_as_one() {
        let mut bytes = Vec::new();
        let mut encoder = dbn::encode::DbnRecordEncoder::new(&mut bytes);
        let mbo = MboMsg {
            hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 1, 7, 10),
            order_id: 9,
            price: 1,
            size: 1,
            flags: dbn::FlagSet::new(dbn::flags::LAST),
            channel_id: 0,
            action: b'A' as std::ffi::c_char,
            side: b'B' as std::ffi::c_char,
            ts_recv: 11,
            ts_in_delta: 0,
            sequence: 77,
        };
        encoder.encode_record(&mbo).expect("encode");
        for round in 0..2 {
            let mut stream = RecordStream::fragment(3).expect("v3");
            if round == 1 {
                stream.feed(&bytes[..10]);
                stream.reset();
            }
            let mut sequences = Vec::new();
            for piece in bytes.chunks(7) {
                stream.feed(piece);
                while let Some(item) = stream.next() {
                    let Ok(Item::Record(record)) = item else {
                        panic!("a record");
                    };
                    sequences.push(record.get::<MboMsg>().expect("mbo").sequence);
                }
            }
            assert_eq!(sequences, vec![77]);
            stream.finish().expect("clean end");
        }
    }
}
