//! `tickwire decode --venue databento`: DBN files through the live path (`RecordStream` fed in
//! chunks and `Normalizer`). Plain or zstd DBN (detected from the bytes); legacy DBZ (version 0)
//! files too, their metadata read by `dbn`'s `DynDecoder` and their records (DBN v1 records)
//! fed to the stream as a v1 fragment. Fragments (`.frag`: records, no metadata) need
//! `--dbn-version`.
//!
//! Symbols: a record is named by what the stream's own records said of its instrument (a
//! symbol mapping's subscribed symbol, a definition's raw symbol; the latest wins, as for the
//! live gateway), otherwise by the metadata's symbol mappings at the record's date through
//! Databento's own `TsSymbolMap` (so a continuous `ES.c.0` or a parent `ES.FUT` names each
//! instrument over the dates it was mapped, not by whichever mapping came last), otherwise by
//! its instrument id.
//!
//! Errors: the events decoded before a stream error are written and flushed, then the error
//! names the file and the byte offset of the record that failed (exit 1).

use super::normalize::{record_ts_recv, Control, NormalizeError, Normalizer, Outcome};
use super::stream::{Item, RecordStream};
use crate::event::json as event_json;
use crate::venue::capture::{Capture, CaptureDecoder};
use anyhow::{bail, Context};
use dbn::decode::{DbnMetadata, DynDecoder, DynReader};
use dbn::{Compression, Metadata, RecordRef, SymbolMappingMsg, TsSymbolMap, VersionUpgradePolicy};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

/// The venue label of Databento (DBN) files.
pub const LABEL: &str = "databento";

/// Databento's capture decoder (`Protocol::capture_decoder` of `databento`); the only one that
/// takes `--dbn-version`.
pub struct DbnCapture;

impl CaptureDecoder for DbnCapture {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn takes_dbn_version(&self) -> bool {
        true
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        run(
            capture.path,
            capture.dbn_version,
            capture.out,
            capture.notes,
        )
    }
}

/// The bytes read from the file per feed: the size of a socket read, not a whole file, so
/// records straddle feeds as they do live.
const CHUNK_BYTES: usize = 64 * 1024;
/// A zstd skippable frame's magic, the start of a DBZ file: 0x184D2A50..=0x184D2A5F (LE).
fn is_dbz(head: &[u8]) -> bool {
    head.len() >= 4 && head[0] & 0xf0 == 0x50 && head[1..4] == [0x2a, 0x4d, 0x18]
}

/// The time a record is filed under for symbology: `ts_recv` where its type has one, else
/// `ts_event`, as `dbn`'s `Record::raw_index_ts` (which cannot be called here: it unwraps
/// on a record shorter than its type). An undefined `ts_recv` falls back to `ts_event`.
fn index_ts(record: &RecordRef<'_>) -> u64 {
    record_ts_recv(record).unwrap_or(record.header().ts_event)
}

/// Everything the decode keeps between records.
struct Decode<'a> {
    normalizer: Normalizer,
    /// The metadata's symbol mappings, by date.
    by_date: TsSymbolMap,
    /// Names from the stream's records (symbol mappings, definitions): the latest per
    /// instrument, ahead of `by_date`.
    named: HashMap<u32, String>,
    out: &'a mut dyn Write,
    /// Notes on what was skipped (stderr).
    notes: &'a mut dyn Write,
    buffer: Vec<u8>,
    records: u64,
    events: u64,
    book_errors: u64,
    malformed: u64,
    system: u64,
    gateway_errors: u64,
}

impl Decode<'_> {
    fn metadata(&mut self, metadata: &Metadata) {
        self.normalizer.on_metadata(metadata);
        if metadata.mappings.is_empty() {
            return;
        }
        match TsSymbolMap::from_metadata(metadata) {
            Ok(map) => self.by_date = map,
            Err(error) => {
                let _ = writeln!(
                    self.notes,
                    "decode: the metadata's symbol mappings cannot be used ({error}); records \
                     are named by instrument id"
                );
            }
        }
    }

    /// One record; `offset` is where it starts in the (decompressed) stream, for messages.
    fn record(&mut self, record: RecordRef<'_>, offset: u64) -> std::io::Result<()> {
        self.records += 1;
        let instrument = record.header().instrument_id;
        let recv_ts_ns = record_ts_recv(&record).unwrap_or(0);
        let mut events = 0u64;
        self.buffer.clear();
        let by_id;
        let symbol: &str = match self.named.get(&instrument) {
            Some(name) => name,
            None => match self.by_date.get_for_ts(index_ts(&record), instrument) {
                Some(name) => name,
                None => {
                    by_id = instrument.to_string();
                    &by_id
                }
            },
        };
        let buffer = &mut self.buffer;
        let result = self
            .normalizer
            .normalize(record, instrument, recv_ts_ns, &mut |event| {
                events += 1;
                event_json::write_event(buffer, LABEL, symbol.as_bytes(), &event);
            });
        self.events += events;
        self.out.write_all(&self.buffer)?;
        match result {
            Ok(Outcome::Control(Control::SymbolMapping)) => {
                if let Some(mapping) = record.get::<SymbolMappingMsg>() {
                    if let Ok(name) = mapping.stype_in_symbol() {
                        self.named.insert(instrument, name.to_owned());
                    }
                }
            }
            Ok(Outcome::Control(Control::System)) => self.system += 1,
            Ok(Outcome::Control(Control::Error)) => {
                self.gateway_errors += 1;
                if let Some(error) = record.get::<dbn::ErrorMsg>() {
                    let _ = writeln!(
                        self.notes,
                        "decode: gateway error record: {}",
                        error.err().unwrap_or("(not UTF-8)")
                    );
                }
            }
            Ok(Outcome::Definition) => {
                if let Some(definition) = record.get::<dbn::InstrumentDefMsg>() {
                    if let Ok(name) = definition.raw_symbol() {
                        if !name.is_empty() {
                            self.named.insert(instrument, name.to_owned());
                        }
                    }
                }
            }
            Ok(Outcome::Normalized | Outcome::Unsupported(_)) => {}
            Err(error) => {
                let count = match error {
                    NormalizeError::Book { .. } | NormalizeError::BookLimit { .. } => {
                        &mut self.book_errors
                    }
                    NormalizeError::Short { .. } => &mut self.malformed,
                };
                *count += 1;
                if *count <= 5 {
                    let _ = writeln!(
                        self.notes,
                        "decode: record {} (at byte {offset}): {error}",
                        self.records
                    );
                }
            }
        }
        Ok(())
    }

    /// Feeds `input` to `stream` in `CHUNK_BYTES` pieces and decodes every record; stops at
    /// the first stream error, naming its offset. `what` says what the offsets count.
    fn stream(
        &mut self,
        input: &mut dyn Read,
        stream: &mut RecordStream,
        what: &str,
        fragment: bool,
    ) -> anyhow::Result<()> {
        let mut chunk = vec![0u8; CHUNK_BYTES];
        let mut first = true;
        loop {
            let read = input
                .read(&mut chunk)
                .with_context(|| format!("read error at {what}byte {}", stream.position()))?;
            if read == 0 {
                break;
            }
            if first && fragment && chunk[..read].starts_with(b"DBN") {
                bail!("it starts with a DBN metadata header, so it is not a fragment: drop --dbn-version");
            }
            first = false;
            stream.feed(&chunk[..read]);
            loop {
                let start = stream.position();
                let failed = match stream.next() {
                    None => break,
                    Some(Ok(Item::Metadata(metadata))) => {
                        self.metadata(&metadata);
                        continue;
                    }
                    Some(Ok(Item::Record(record))) => {
                        self.record(record, start)?;
                        continue;
                    }
                    Some(Err(error)) => error,
                };
                bail!(
                    "at {what}byte offset {} (after {} records): {failed}",
                    stream.position(),
                    self.records
                );
            }
        }
        stream
            .finish()
            .with_context(|| format!("at {what}byte offset {}", stream.position()))?;
        Ok(())
    }
}

fn run(
    path: &Path,
    dbn_version: Option<u8>,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> anyhow::Result<String> {
    let mut head = [0u8; 4];
    let head_len = std::fs::File::open(path)?.read(&mut head)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fragment_by_name = name.contains(".frag");
    if fragment_by_name && dbn_version.is_none() {
        bail!(
            "a fragment (records with no metadata header) needs --dbn-version N, the DBN \
             version its records are in (1, 2 or 3; often in the name as .v1/.v2/.v3)"
        );
    }
    let mut decode = Decode {
        normalizer: Normalizer::new(0),
        by_date: TsSymbolMap::new(),
        named: HashMap::new(),
        out,
        notes,
        buffer: Vec::with_capacity(1 << 16),
        records: 0,
        events: 0,
        book_errors: 0,
        malformed: 0,
        system: 0,
        gateway_errors: 0,
    };
    let decoded = decode_file(path, dbn_version, &head[..head_len], &mut decode);
    // What was decoded before an error is written out before the error is reported.
    let flushed = decode.out.flush();
    let described = decoded?;
    flushed?;
    let counters = decode.normalizer.counters();
    Ok(format!(
        "decode: {described}; {} records (mbo={}, mbp-1={}, mbp-10={}, bbo={}, cbbo={}, \
         cmbp-1={}, trades={}, ohlcv={}, status={}, imbalance={}, statistics={}, \
         definitions={}, system={}, errors={}, other control={}, unsupported={}); {} events; \
         {} book errors; {} malformed; {} saturated sizes",
        decode.records,
        counters.mbo,
        counters.mbp1,
        counters.mbp10,
        counters.bbo,
        counters.cbbo,
        counters.cmbp1,
        counters.trades,
        counters.ohlcv,
        counters.status,
        counters.imbalance,
        counters.statistics,
        counters.definitions,
        decode.system,
        decode.gateway_errors,
        counters.control - decode.system - decode.gateway_errors,
        counters.unsupported,
        decode.events,
        decode.book_errors,
        decode.malformed,
        counters.saturated,
    ))
}

/// Decodes the whole file into `decode`; returns how the file was read, for the summary.
fn decode_file(
    path: &Path,
    dbn_version: Option<u8>,
    head: &[u8],
    decode: &mut Decode<'_>,
) -> anyhow::Result<String> {
    if is_dbz(head) {
        if dbn_version.is_some() {
            bail!("a DBZ file has a metadata header: drop --dbn-version");
        }
        return dbz(path, decode);
    }
    let mut reader = DynReader::from_file(path).context("cannot open")?;
    let compressed = reader.is_compressed();
    let mut stream = match dbn_version {
        Some(version) => RecordStream::fragment(version)?,
        None => RecordStream::new(),
    };
    let what = if compressed { "decompressed " } else { "" };
    decode.stream(&mut reader, &mut stream, what, dbn_version.is_some())?;
    let version = stream
        .input_version()
        .map_or("?".to_owned(), |v| v.to_string());
    Ok(format!(
        "{}DBN v{version}{}",
        if dbn_version.is_some() {
            "fragment,"
        } else {
            ""
        },
        if compressed { ", zstd" } else { "" }
    ))
}

/// Legacy DBZ (version 0): the metadata (a zstd skippable frame) read by `dbn`'s
/// `DynDecoder`; the records, which are DBN v1 records in a zstd frame (dbn's DBZ decoder
/// reads them as such), through the record stream as a v1 fragment, like any other DBN.
fn dbz(path: &Path, decode: &mut Decode<'_>) -> anyhow::Result<String> {
    let metadata = DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3)
        .context("cannot read the DBZ header")?
        .metadata()
        .clone();
    decode.metadata(&metadata);
    // zstd decoders skip skippable frames, so the metadata frame is passed over and the
    // records' frame read.
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut records =
        DynReader::with_buffer(file, Compression::Zstd).context("cannot read the DBZ records")?;
    let mut stream = RecordStream::fragment(1)?.with_ts_out(metadata.ts_out);
    decode.stream(&mut records, &mut stream, "decompressed record ", false)?;
    Ok("legacy DBZ (version 0, records read as DBN v1)".to_owned())
}
