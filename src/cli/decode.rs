//! `tickwire decode`: a capture file in, normalized events out as JSON lines, with the same
//! decoder the appliance runs.
//!
//! Input: plain or gzip (told apart by the gzip magic bytes, not the name); one message per line,
//! raw JSON, optionally prefixed by its receive time in ns and a space (the hftbacktest capture
//! format of `../shared/data/binance-futures/`). Output: one object per normalized event on
//! stdout, a summary on stderr.
//!
//! Databento: DBN files (plain or zstd, detected from the bytes) go through the live code path,
//! `RecordStream` fed in chunks and `Normalizer`; legacy DBZ (version 0) files too, their
//! metadata read by `dbn`'s `DynDecoder` and their records (DBN v1 records) fed to the stream as
//! a v1 fragment. Fragments (`.frag`: records, no metadata) need `--dbn-version`. A stream error
//! (a truncated file, a record shorter than its layout) ends the decode with exit 1 naming the
//! file and the byte offset, after the events decoded before it are written.

use flate2::read::MultiGzDecoder;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use tickwire::config::VenueKind;
use tickwire::event::json as event_json;
use tickwire::venue::binance::decode::{self, Message, TradeKind};
use tickwire::venue::binance::json;

/// The venue label printed on every line.
const VENUE: &str = "binance-futures";

/// The venue label of Binance Spot files.
const SPOT: &str = "binance-spot";

/// The venue label of Thalex files.
const THALEX: &str = "thalex";

/// The venue label of Databento (DBN) files.
const DATABENTO: &str = "databento";

/// Opens `path`, decompressing when it starts with the gzip magic bytes.
pub fn open_lines(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let mut file = BufReader::with_capacity(1 << 20, File::open(path)?);
    let gzip = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzip {
        Box::new(BufReader::with_capacity(1 << 20, MultiGzDecoder::new(file)))
    } else {
        Box::new(file)
    })
}

/// Splits `<ns> <json>` into its parts; a line with no numeric prefix is all message.
pub fn split_line(line: &[u8]) -> (u64, &[u8]) {
    if let Some(space) = line.iter().position(|&byte| byte == b' ') {
        let prefix = &line[..space];
        if !prefix.is_empty() && prefix.len() <= 20 && prefix.iter().all(u8::is_ascii_digit) {
            if let Some(ns) = std::str::from_utf8(prefix)
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
            {
                return (ns, &line[space + 1..]);
            }
        }
    }
    (0, line)
}

/// The venues whose captures `decode` reads: four with a reader of their own here, and every
/// venue kind whose protocol decodes captures through its own feed
/// (`Protocol::capture_feed`: Bybit's), labelled by its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DecodeVenue {
    Binance,
    BinanceSpot,
    Thalex,
    Databento,
    Feed(VenueKind),
}

impl DecodeVenue {
    fn all() -> Vec<DecodeVenue> {
        let mut all = vec![
            DecodeVenue::Binance,
            DecodeVenue::BinanceSpot,
            DecodeVenue::Thalex,
            DecodeVenue::Databento,
        ];
        all.extend(
            VenueKind::ALL
                .into_iter()
                .filter(|kind| kind.protocol().capture_feed(&[]).is_some())
                .map(DecodeVenue::Feed),
        );
        all
    }

    /// The `--venue` label, also printed on every line.
    fn label(self) -> &'static str {
        match self {
            DecodeVenue::Binance => VENUE,
            DecodeVenue::BinanceSpot => SPOT,
            DecodeVenue::Thalex => THALEX,
            DecodeVenue::Databento => DATABENTO,
            DecodeVenue::Feed(kind) => kind.as_str(),
        }
    }

    fn from_label(label: &str) -> Option<DecodeVenue> {
        DecodeVenue::all()
            .into_iter()
            .find(|venue| venue.label() == label)
    }
}

pub fn decode(venue: &str, path: &Path, dbn_version: Option<u8>) -> ExitCode {
    let label = venue;
    let venue = DecodeVenue::from_label(label);
    if dbn_version.is_some() && venue != Some(DecodeVenue::Databento) {
        eprintln!("decode: --dbn-version is for --venue {DATABENTO} only");
        return ExitCode::from(2);
    }
    let Some(venue) = venue else {
        let valid: Vec<&str> = DecodeVenue::all()
            .iter()
            .map(|venue| venue.label())
            .collect();
        eprintln!(
            "decode: venue {label:?} is not supported; valid: {}",
            valid.join(", ")
        );
        return ExitCode::from(2);
    };
    let result = match venue {
        DecodeVenue::Binance => run(path),
        DecodeVenue::BinanceSpot => run_spot(path),
        DecodeVenue::Thalex => run_thalex(path),
        DecodeVenue::Databento => databento::run(path, dbn_version),
        DecodeVenue::Feed(kind) => run_feed(kind, path),
    };
    match result {
        Ok(summary) => {
            eprintln!("{summary}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("decode: {}: {error:#}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// A venue whose protocol decodes captures through its own feed (`Protocol::capture_stream`,
/// `Protocol::capture_feed`): a first pass collects the streams the file holds, then every
/// message goes through the feed, and every event it writes is printed with the line's receive
/// time.
fn run_feed(kind: VenueKind, path: &Path) -> anyhow::Result<String> {
    use tickwire::venue::feed::EventSink;
    let protocol = kind.protocol();
    let mut names: Vec<String> = Vec::new();
    for_each_message(path, |_, _, message| {
        if let Some(name) = protocol.capture_stream(message) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Ok(())
    })?;
    let Some(capture) = protocol.capture_feed(&names) else {
        anyhow::bail!("{kind} has no capture decoder");
    };
    let (mut feed, counters, symbols) = (capture.feed, capture.counters, capture.symbols);
    let label = kind.as_str();
    let (mut producer, mut consumer) = tickwire::ring::spsc::ring(1 << 16);
    let mut lost = false;
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut buffer = Vec::with_capacity(1 << 16);
    let mut events = 0u64;
    let mut messages = 0u64;
    let lines = for_each_message(path, |_, recv_ts_ns, message| {
        messages += 1;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, recv_ts_ns, message, &mut sink);
        sink.publish();
        if let Some(sample) = feed.take_malformed() {
            eprintln!("decode: {}: {}", sample.error(), sample.text());
        }
        while feed.take_reply().is_some() {}
        buffer.clear();
        while let Some(event) = consumer.try_pop() {
            events += 1;
            let symbol = symbols
                .get(event.header.instrument_id as usize)
                .map_or(&b"?"[..], |symbol| symbol.as_bytes());
            event_json::write_event(&mut buffer, label, symbol, &event);
        }
        out.write_all(&buffer)
    })?;
    out.flush()?;
    let kinds: Vec<String> = counters
        .messages()
        .map(|(kind, count)| format!("{}={count}", kind.name))
        .collect();
    Ok(format!(
        "decode: {lines} lines; {messages} messages ({}, unknown topic={}, duplicate={}); \
         {events} events; {} malformed; books: {} synced, {} gaps, {} deletes of absent levels",
        kinds.join(", "),
        counters.unknown_symbol.get(),
        counters.duplicates.get(),
        counters.malformed.get(),
        counters.book_syncs.get(),
        counters.book_gaps.get(),
        counters.book_refused.get(),
    ))
}

fn run(path: &Path) -> anyhow::Result<String> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut unknown_types: BTreeMap<String, u64> = BTreeMap::new();
    let mut skipped = 0u64;
    let mut malformed = 0u64;
    let mut events = 0u64;
    let mut buffer = Vec::with_capacity(1 << 16);
    let lines = for_each_message(path, |line, recv_ts_ns, message| {
        buffer.clear();
        match decode::decode(message) {
            Ok(Message::BookTicker(ticker)) => {
                *by_type.entry("bookTicker").or_default() += 1;
                json::write_quote(&mut buffer, VENUE, &ticker, recv_ts_ns);
                events += 1;
            }
            Ok(Message::Trade(trade)) => {
                let name = match trade.kind {
                    TradeKind::Trade => "trade",
                    TradeKind::AggTrade => "aggTrade",
                };
                *by_type.entry(name).or_default() += 1;
                json::write_trade(&mut buffer, VENUE, &trade, recv_ts_ns);
                events += 1;
            }
            Ok(Message::Depth(depth)) => {
                *by_type.entry("depthUpdate").or_default() += 1;
                json::write_levels(&mut buffer, VENUE, &depth, recv_ts_ns);
                events += (depth.bids.len() + depth.asks.len()) as u64;
            }
            Ok(Message::MarkPrice(mark)) => {
                *by_type.entry("markPriceUpdate").or_default() += 1;
                let header = tickwire::event::EventHeader {
                    exchange_ts_ns: mark.event_time_ms.saturating_mul(1_000_000),
                    recv_ts_ns,
                    venue_seq: mark.event_time_ms,
                    instrument_id: 0,
                    venue_id: 0,
                    kind: tickwire::event::EventKind::Reference,
                    flags: 0,
                };
                for (kind, price) in [
                    (tickwire::event::ReferenceKind::Mark, mark.mark_price),
                    (tickwire::event::ReferenceKind::Index, mark.index_price),
                ] {
                    let event = tickwire::event::Event::new(
                        header,
                        tickwire::event::Body::Reference(tickwire::event::Reference::new(
                            kind, price,
                        )),
                    );
                    event_json::write_event(&mut buffer, VENUE, mark.symbol, &event);
                    events += 1;
                }
            }
            Ok(Message::Unknown { event_type, .. }) => {
                *unknown_types
                    .entry(String::from_utf8_lossy(event_type).into_owned())
                    .or_default() += 1;
                skipped += 1;
            }
            Ok(Message::DepthSnapshot(_)) => {
                // A REST snapshot recorded beside the streams (the hftbacktest captures hold
                // one): not a stream event.
                *by_type.entry("depthSnapshot").or_default() += 1;
                skipped += 1;
            }
            Ok(_) => {
                *by_type.entry("reply").or_default() += 1;
                skipped += 1;
            }
            Err(error) => {
                malformed += 1;
                if malformed <= 5 {
                    eprintln!("decode: line {line}: {error}: {}", decode::sample(message));
                }
            }
        }
        out.write_all(&buffer)
    })?;
    out.flush()?;
    Ok(json_summary(
        lines,
        &by_type,
        &unknown_types,
        (events, skipped, malformed),
    ))
}

/// `--venue binance-spot`: the Spot decoder, the same `quote`, `trade` and `level` lines as
/// `--venue binance-futures` (`venue::binance_spot::json`), the same summary.
fn run_spot(path: &Path) -> anyhow::Result<String> {
    use tickwire::venue::binance_spot::decode::{self as spot, Message as SpotMessage};
    use tickwire::venue::binance_spot::json as spot_json;
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut unknown_types: BTreeMap<String, u64> = BTreeMap::new();
    let (mut skipped, mut malformed, mut events) = (0u64, 0u64, 0u64);
    let mut buffer = Vec::with_capacity(1 << 16);
    let mut binary = Vec::with_capacity(1 << 16);
    let lines = for_each_message(path, |line, recv_ts_ns, message| {
        buffer.clear();
        // A binary message `tickwire record --venue` kept in base64: one SBE frame.
        if let Some(encoded) = message.strip_prefix(super::record::BINARY_PREFIX.as_bytes()) {
            use base64::Engine as _;
            use tickwire::venue::binance_spot::sbe::{self, Message as Sbe};
            binary.clear();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode_vec(encoded, &mut binary)
                .map_err(|error| error.to_string())
                .and_then(|()| sbe::decode(&binary).map_err(|error| error.to_string()));
            match decoded {
                Ok(frame) => {
                    let (name, count) = match &frame {
                        Sbe::BestBidAsk(_) => ("sbe:bestBidAsk", 1),
                        Sbe::Trades(m) => ("sbe:trade", m.trades.len()),
                        Sbe::DepthDiff(m) => ("sbe:depth", m.bids.len() + m.asks.len()),
                        Sbe::DepthSnapshot(m) => ("sbe:depth20", m.bids.len() + m.asks.len()),
                    };
                    *by_type.entry(name).or_default() += 1;
                    events += count as u64;
                    spot_json::write_sbe(&mut buffer, SPOT, &frame, recv_ts_ns);
                }
                Err(error) => {
                    malformed += 1;
                    if malformed <= 5 {
                        eprintln!(
                            "decode: line {line}: a binary message that does not decode: {error}"
                        );
                    }
                }
            }
            return out.write_all(&buffer);
        }
        match spot::decode(message) {
            Ok(SpotMessage::BookTicker(ticker)) => {
                *by_type.entry("bookTicker").or_default() += 1;
                spot_json::write_quote(&mut buffer, SPOT, &ticker, recv_ts_ns);
                events += 1;
            }
            Ok(SpotMessage::Trade(trade)) => {
                let name = match trade.kind {
                    TradeKind::Trade => "trade",
                    TradeKind::AggTrade => "aggTrade",
                };
                *by_type.entry(name).or_default() += 1;
                spot_json::write_trade(&mut buffer, SPOT, &trade, recv_ts_ns);
                events += 1;
            }
            Ok(SpotMessage::Depth(depth)) => {
                *by_type.entry("depthUpdate").or_default() += 1;
                spot_json::write_levels(&mut buffer, SPOT, &depth, recv_ts_ns);
                events += (depth.bids.len() + depth.asks.len()) as u64;
            }
            Ok(SpotMessage::PartialDepth(partial)) => {
                *by_type.entry("partialDepth").or_default() += 1;
                let symbol = partial.stream_symbol().to_ascii_uppercase();
                spot_json::write_partial_levels(&mut buffer, SPOT, &symbol, &partial, recv_ts_ns);
                events += (partial.bids.len() + partial.asks.len()) as u64;
            }
            Ok(SpotMessage::Unknown { event_type, .. }) => {
                *unknown_types
                    .entry(String::from_utf8_lossy(event_type).into_owned())
                    .or_default() += 1;
                skipped += 1;
            }
            Ok(SpotMessage::DepthSnapshot(_)) => {
                // A REST snapshot recorded beside the streams: not a stream event.
                *by_type.entry("depthSnapshot").or_default() += 1;
                skipped += 1;
            }
            Ok(
                SpotMessage::Ack { .. }
                | SpotMessage::Subscriptions { .. }
                | SpotMessage::Reply { .. }
                | SpotMessage::ErrorReply { .. },
            ) => {
                *by_type.entry("reply").or_default() += 1;
                skipped += 1;
            }
            Err(error) => {
                malformed += 1;
                if malformed <= 5 {
                    eprintln!("decode: line {line}: {error}: {}", spot::sample(message));
                }
            }
        }
        out.write_all(&buffer)
    })?;
    out.flush()?;
    Ok(json_summary(
        lines,
        &by_type,
        &unknown_types,
        (events, skipped, malformed),
    ))
}

/// The summary line of a JSON venue's decode: lines, messages by type (and unknown types),
/// events, skipped and malformed messages.
fn json_summary(
    lines: u64,
    by_type: &BTreeMap<&'static str, u64>,
    unknown_types: &BTreeMap<String, u64>,
    (events, skipped, malformed): (u64, u64, u64),
) -> String {
    let types: Vec<String> = by_type
        .iter()
        .map(|(name, count)| format!("{name}={count}"))
        .chain(
            unknown_types
                .iter()
                .map(|(name, count)| format!("unknown:{name}={count}")),
        )
        .collect();
    format!(
        "decode: {lines} lines; {} messages ({}); {events} events; {skipped} skipped; {malformed} malformed",
        by_type.values().sum::<u64>() + unknown_types.values().sum::<u64>(),
        types.join(", ")
    )
}

/// Each non-blank line of `path`, as (line number, receive time, message); returns the lines
/// read.
fn for_each_message(
    path: &Path,
    mut on_message: impl FnMut(u64, u64, &[u8]) -> std::io::Result<()>,
) -> anyhow::Result<u64> {
    let mut input = open_lines(path)?;
    let mut raw = Vec::with_capacity(1 << 16);
    let mut lines = 0u64;
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        lines += 1;
        let line = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (recv_ts_ns, message) = split_line(line);
        on_message(lines, recv_ts_ns, message)?;
    }
    Ok(lines)
}

/// Thalex: the appliance's Thalex feed, its routes made from the channels the file holds (a
/// first pass collects them), every event it writes printed.
fn run_thalex(path: &Path) -> anyhow::Result<String> {
    use tickwire::venue::feed::{EventSink, Feed};
    use tickwire::venue::thalex::decode::{
        decode as read, Body as ThalexBody, Message as ThalexMessage, Scratch,
    };
    use tickwire::venue::thalex::feed::ThalexFeed;

    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // An underlying's recent_trades channel and each instrument its trades name.
    let mut trade_instruments: Vec<(String, String)> = Vec::new();
    let mut scratch = Scratch::default();
    for_each_message(path, |_, _, message| {
        if let Ok(ThalexMessage::Notification { channel, body, .. }) = read(message, &mut scratch) {
            let name = String::from_utf8_lossy(channel).into_owned();
            if !seen.contains(channel) {
                seen.insert(channel.to_vec());
                names.push(name.clone());
            }
            if body == ThalexBody::Trades {
                for trade in &scratch.trades {
                    let instrument = message
                        .get(trade.instrument.0..trade.instrument.1)
                        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
                        .unwrap_or_default();
                    let pair = (name.clone(), instrument);
                    if !trade_instruments.contains(&pair) {
                        trade_instruments.push(pair);
                    }
                }
            }
        }
        Ok(())
    })?;
    let (mut feed, counters) = ThalexFeed::for_channels(0, THALEX, &names, &trade_instruments);
    let symbols: Vec<String> = feed.symbols().to_vec();
    let (mut producer, mut consumer) = tickwire::ring::spsc::ring(1 << 16);
    let mut lost = false;
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut buffer = Vec::with_capacity(1 << 16);
    let mut events = 0u64;
    let mut messages = 0u64;
    let lines = for_each_message(path, |_, recv_ts_ns, message| {
        messages += 1;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, recv_ts_ns, message, &mut sink);
        sink.publish();
        if let Some(sample) = feed.take_malformed() {
            eprintln!("decode: {}: {}", sample.error(), sample.text());
        }
        while feed.take_reply().is_some() {}
        buffer.clear();
        while let Some(event) = consumer.try_pop() {
            events += 1;
            let symbol = symbols
                .get(event.header.instrument_id as usize)
                .map_or(&b"?"[..], |symbol| symbol.as_bytes());
            event_json::write_event(&mut buffer, THALEX, symbol, &event);
        }
        out.write_all(&buffer)
    })?;
    out.flush()?;
    // The venue's own message kinds (the feed's table), then what the feed dropped.
    let kinds: Vec<String> = counters
        .messages()
        .map(|(kind, count)| format!("{}={count}", kind.name))
        .collect();
    Ok(format!(
        "decode: {lines} lines; {messages} messages ({}, unknown channel={}, duplicate={}); \
         {events} events; {} malformed",
        kinds.join(", "),
        counters.unknown_symbol.get(),
        counters.duplicates.get(),
        counters.malformed.get(),
    ))
}

/// `--venue databento`: DBN files through the live path (`RecordStream` + `Normalizer`).
///
/// Symbols: a record is named by what the stream's own records said of its instrument (a
/// symbol mapping's subscribed symbol, a definition's raw symbol; the latest wins, as for the
/// live gateway), otherwise by the metadata's symbol mappings at the record's date through
/// Databento's own `TsSymbolMap` (so a continuous `ES.c.0` or a parent `ES.FUT` names each
/// instrument over the dates it was mapped, not by whichever mapping came last), otherwise by
/// its instrument id.
///
/// Errors: the events decoded before a stream error are written and flushed, then the error
/// names the file and the byte offset of the record that failed (exit 1).
mod databento {
    use super::DATABENTO;
    use anyhow::{bail, Context};
    use dbn::decode::{DbnMetadata, DynDecoder, DynReader};
    use dbn::{
        Compression, Metadata, RecordRef, SymbolMappingMsg, TsSymbolMap, VersionUpgradePolicy,
    };
    use std::collections::HashMap;
    use std::io::{BufWriter, Read, Write};
    use std::path::Path;
    use tickwire::event::json as event_json;
    use tickwire::venue::databento::normalize::{
        record_ts_recv, Control, NormalizeError, Normalizer, Outcome,
    };
    use tickwire::venue::databento::stream::{Item, RecordStream};

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
    struct Decode<W: Write> {
        normalizer: Normalizer,
        /// The metadata's symbol mappings, by date.
        by_date: TsSymbolMap,
        /// Names from the stream's records (symbol mappings, definitions): the latest per
        /// instrument, ahead of `by_date`.
        named: HashMap<u32, String>,
        out: W,
        buffer: Vec<u8>,
        records: u64,
        events: u64,
        book_errors: u64,
        malformed: u64,
        system: u64,
        gateway_errors: u64,
    }

    impl<W: Write> Decode<W> {
        fn metadata(&mut self, metadata: &Metadata) {
            self.normalizer.on_metadata(metadata);
            if metadata.mappings.is_empty() {
                return;
            }
            match TsSymbolMap::from_metadata(metadata) {
                Ok(map) => self.by_date = map,
                Err(error) => eprintln!(
                    "decode: the metadata's symbol mappings cannot be used ({error}); records \
                     are named by instrument id"
                ),
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
                    event_json::write_event(buffer, DATABENTO, symbol.as_bytes(), &event);
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
                        eprintln!(
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
                        eprintln!(
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

    pub fn run(path: &Path, dbn_version: Option<u8>) -> anyhow::Result<String> {
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
        let stdout = std::io::stdout();
        let mut decode = Decode {
            normalizer: Normalizer::new(0),
            by_date: TsSymbolMap::new(),
            named: HashMap::new(),
            out: BufWriter::with_capacity(1 << 20, stdout.lock()),
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
    fn decode_file<W: Write>(
        path: &Path,
        dbn_version: Option<u8>,
        head: &[u8],
        decode: &mut Decode<W>,
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
    fn dbz<W: Write>(path: &Path, decode: &mut Decode<W>) -> anyhow::Result<String> {
        let metadata = DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3)
            .context("cannot read the DBZ header")?
            .metadata()
            .clone();
        decode.metadata(&metadata);
        // zstd decoders skip skippable frames, so the metadata frame is passed over and the
        // records' frame read.
        let file = std::io::BufReader::new(std::fs::File::open(path)?);
        let mut records = DynReader::with_buffer(file, Compression::Zstd)
            .context("cannot read the DBZ records")?;
        let mut stream = RecordStream::fragment(1)?.with_ts_out(metadata.ts_out);
        decode.stream(&mut records, &mut stream, "decompressed record ", false)?;
        Ok("legacy DBZ (version 0, records read as DBN v1)".to_owned())
    }
}
