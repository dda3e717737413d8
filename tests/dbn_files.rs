//! Every shared DBN file (`../shared/data/dbn/`, the `dbn` project's own fixtures: every schema in
//! DBZ, v1, v2, v3 and record-only fragments), decoded twice: by the official decoder
//! (`DynDecoder`, or `DbnRecordDecoder` for fragments) and by tickwire's `RecordStream` fed in
//! awkward chunks (1, 7 and 61 bytes, and whole). Both must yield the same metadata and the same
//! records, byte for byte and field by field; then every record is normalized and the events'
//! fields checked against the record's.
//!
//! The directory is listed, not a hard-coded subset: a file added there is tested too.

use crate::support::common;

use dbn::decode::{DbnMetadata, DbnRecordDecoder, DecodeRecordRef, DynDecoder, DynReader};
use dbn::{Metadata, RecordBuf, RecordRef, RecordRefEnum, VersionUpgradePolicy};
use std::io::Read;
use std::path::Path;
use tickwire::event::{flags, BarInterval, Body, Event, Side};
use tickwire::fixed::Fixed;
use tickwire::venue::databento::normalize::{
    bar_interval, Control, NormalizeError, Normalizer, Outcome,
};
use tickwire::venue::databento::stream::{Item, RecordStream, StreamError};

/// The receive time every normalized record gets here.
const RECV_TS_NS: u64 = 1_234;

/// How a file is to be read, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Legacy DBZ, version 0.
    Dbz,
    /// DBN with its metadata header (plain or zstd).
    Dbn,
    /// Records only, in this DBN version.
    Fragment(u8),
}

fn kind_of(name: &str) -> Kind {
    if name.ends_with(".dbz") {
        Kind::Dbz
    } else if name.contains(".frag") {
        // The version is in the name; the fixtures' untagged fragment is v2 (as the untagged
        // `.dbn` files are, whatever data/README says).
        let version = [1u8, 2, 3]
            .into_iter()
            .find(|v| name.contains(&format!(".v{v}.")))
            .unwrap_or(2);
        Kind::Fragment(version)
    } else {
        Kind::Dbn
    }
}

/// What a decoder made of a file.
struct Decoded {
    metadata: Option<Metadata>,
    records: Vec<RecordBuf>,
}

fn official(path: &Path, kind: Kind) -> dbn::Result<Decoded> {
    let mut records = Vec::new();
    match kind {
        Kind::Fragment(version) => {
            let mut decoder = DbnRecordDecoder::with_version(
                DynReader::from_file(path)?,
                version,
                VersionUpgradePolicy::UpgradeToV3,
                false,
            )?;
            while let Some(record) = decoder.decode_record_ref()? {
                records.push(record.to_owned());
            }
            Ok(Decoded {
                metadata: None,
                records,
            })
        }
        Kind::Dbz | Kind::Dbn => {
            let mut decoder = DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3)?;
            let metadata = decoder.metadata().clone();
            while let Some(record) = decoder.decode_record_ref()? {
                records.push(record.to_owned());
            }
            Ok(Decoded {
                metadata: Some(metadata),
                records,
            })
        }
    }
}

/// The file's bytes as the wire would carry them (zstd undone).
fn wire_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    DynReader::from_file(path)
        .expect("open")
        .read_to_end(&mut bytes)
        .expect("read");
    bytes
}

/// tickwire's stream over `bytes` in `chunk`-byte feeds: the metadata, each record's bytes, and
/// the events each record normalizes to (with its result).
struct Ours {
    metadata: Option<Metadata>,
    records: Vec<RecordBuf>,
    normalized: Vec<(Result<Outcome, NormalizeError>, Vec<Event>)>,
    input_version: Option<u8>,
}

fn ours(bytes: &[u8], kind: Kind, chunk: usize) -> Result<Ours, StreamError> {
    let mut stream = match kind {
        Kind::Fragment(version) => RecordStream::fragment(version)?,
        Kind::Dbz | Kind::Dbn => RecordStream::new(),
    };
    let mut normalizer = Normalizer::new(1);
    let mut result = Ours {
        metadata: None,
        records: Vec::new(),
        normalized: Vec::new(),
        input_version: None,
    };
    for piece in bytes.chunks(chunk.max(1)) {
        stream.feed(piece);
        while let Some(item) = stream.next() {
            match item? {
                Item::Metadata(metadata) => {
                    assert!(result.metadata.is_none(), "metadata comes once");
                    assert!(result.records.is_empty(), "metadata comes first");
                    normalizer.on_metadata(&metadata);
                    result.metadata = Some(*metadata);
                }
                Item::Record(record) => {
                    result.records.push(record.to_owned());
                    result.normalized.push(normalize(&mut normalizer, record));
                }
            }
        }
    }
    stream.finish()?;
    result.input_version = stream.input_version();
    Ok(result)
}

fn normalize(
    normalizer: &mut Normalizer,
    record: RecordRef<'_>,
) -> (Result<Outcome, NormalizeError>, Vec<Event>) {
    let mut events = Vec::new();
    let instrument = record.header().instrument_id;
    let result = normalizer.normalize(record, instrument, RECV_TS_NS, &mut |event| {
        events.push(event)
    });
    (result, events)
}

fn units(size: u32) -> Fixed {
    Fixed::from_units(i64::from(size)).expect("a u32 fits")
}

fn side(c: std::ffi::c_char) -> Side {
    match c as u8 {
        b'B' => Side::Bid,
        b'A' => Side::Ask,
        _ => Side::None,
    }
}

/// (price, size) of a quote side as tickwire sends it: (0, 0) for an undefined price.
fn quote_side(price: i64, size: u32) -> (Fixed, Fixed) {
    if price == dbn::UNDEF_PRICE {
        (Fixed::ZERO, Fixed::ZERO)
    } else {
        (Fixed(price), units(size))
    }
}

fn check_quote(event: &Event, bid_px: i64, bid_sz: u32, ask_px: i64, ask_sz: u32) {
    let Body::Quote(quote) = event.body() else {
        panic!("expected a quote, got {event:?}");
    };
    assert_eq!((quote.bid_px, quote.bid_sz), quote_side(bid_px, bid_sz));
    assert_eq!((quote.ask_px, quote.ask_sz), quote_side(ask_px, ask_sz));
}

fn check_trade(event: &Event, price: i64, size: u32, aggressor: std::ffi::c_char) {
    let Body::Trade(trade) = event.body() else {
        panic!("expected a trade, got {event:?}");
    };
    assert_eq!(trade.price, Fixed(price));
    assert_eq!(trade.size, units(size));
    assert_eq!(trade.aggressor(), side(aggressor));
}

/// The events of one record against the record's own fields. `schema` is the file's, for the
/// interval of legacy OHLCV bars.
fn check_events(
    record: &RecordBuf,
    normalized: &(Result<Outcome, NormalizeError>, Vec<Event>),
    legacy_interval: BarInterval,
) {
    let (result, events) = normalized;
    let hd = record.header();
    for event in events {
        assert_eq!(event.header.instrument_id, hd.instrument_id);
        assert_eq!(event.header.exchange_ts_ns, hd.ts_event);
        assert_eq!(event.header.recv_ts_ns, RECV_TS_NS);
        assert_eq!(event.header.venue_id, 1);
    }
    let with_last = |last: bool| {
        if let Some(event) = events.last() {
            assert_eq!(event.header.flags & flags::LAST != 0, last, "{events:?}");
        }
        for event in events.iter().rev().skip(1) {
            assert_eq!(event.header.flags & flags::LAST, 0);
        }
    };
    match record.as_enum().expect("a known rtype") {
        RecordRefEnum::Trade(trade) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1);
            check_trade(&events[0], trade.price, trade.size, trade.side);
            assert_eq!(events[0].header.venue_seq, u64::from(trade.sequence));
            with_last(trade.flags.is_last());
        }
        RecordRefEnum::Mbo(mbo) => {
            // The fixtures start mid-stream (cancels of orders placed before them): the book
            // refuses those, and says which order.
            match result {
                Ok(outcome) => assert_eq!(*outcome, Outcome::Normalized),
                Err(NormalizeError::Book { instrument, error }) => {
                    assert_eq!(*instrument, hd.instrument_id);
                    assert!(
                        error.to_string().contains(&mbo.order_id.to_string()),
                        "{error}"
                    );
                }
                Err(other) => panic!("{other}"),
            }
            for event in events {
                assert_eq!(event.header.venue_seq, u64::from(mbo.sequence));
                if let Body::BookLevel(level) = event.body() {
                    assert_eq!(level.price, Fixed(mbo.price));
                    assert_eq!(level.side(), side(mbo.side));
                }
            }
            if mbo.action as u8 == b'T' {
                check_trade(&events[0], mbo.price, mbo.size, mbo.side);
            }
            with_last(mbo.flags.is_last());
        }
        RecordRefEnum::Mbp1(mbp) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            let level = &mbp.levels[0];
            let mut rest = &events[..];
            if let Some(first) = rest.first().filter(|e| matches!(e.body(), Body::Quote(_))) {
                check_quote(
                    first,
                    level.bid_px,
                    level.bid_sz,
                    level.ask_px,
                    level.ask_sz,
                );
                assert_eq!(first.header.flags & flags::DERIVED, 0);
                rest = &rest[1..];
            }
            if mbp.action as u8 == b'T' {
                check_trade(&rest[0], mbp.price, mbp.size, mbp.side);
                rest = &rest[1..];
            }
            assert!(rest.is_empty(), "{events:?}");
            for event in events {
                assert_eq!(event.header.venue_seq, u64::from(mbp.sequence));
            }
            with_last(mbp.flags.is_last());
        }
        RecordRefEnum::Mbp10(mbp) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            for event in events {
                assert_eq!(event.header.venue_seq, u64::from(mbp.sequence));
                if let Body::BookLevel(level) = event.body() {
                    // A level sent with a size is one of the record's ten.
                    if level.size != Fixed::ZERO {
                        assert!(mbp.levels.iter().any(|pair| match level.side() {
                            Side::Bid =>
                                Fixed(pair.bid_px) == level.price
                                    && units(pair.bid_sz) == level.size,
                            _ =>
                                Fixed(pair.ask_px) == level.price
                                    && units(pair.ask_sz) == level.size,
                        }));
                    }
                }
            }
            if let Some(quote) = events.iter().find(|e| matches!(e.body(), Body::Quote(_))) {
                let level = &mbp.levels[0];
                check_quote(
                    quote,
                    level.bid_px,
                    level.bid_sz,
                    level.ask_px,
                    level.ask_sz,
                );
            }
            with_last(mbp.flags.is_last());
        }
        RecordRefEnum::Bbo(bbo) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1, "a sampled top always goes out");
            let level = &bbo.levels[0];
            check_quote(
                &events[0],
                level.bid_px,
                level.bid_sz,
                level.ask_px,
                level.ask_sz,
            );
            assert_eq!(events[0].header.venue_seq, u64::from(bbo.sequence));
            with_last(bbo.flags.is_last());
        }
        RecordRefEnum::Cbbo(cbbo) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1, "a sampled top always goes out");
            let level = &cbbo.levels[0];
            check_quote(
                &events[0],
                level.bid_px,
                level.bid_sz,
                level.ask_px,
                level.ask_sz,
            );
            with_last(cbbo.flags.is_last());
        }
        RecordRefEnum::Cmbp1(cmbp) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            let level = &cmbp.levels[0];
            let mut rest = &events[..];
            if let Some(first) = rest.first().filter(|e| matches!(e.body(), Body::Quote(_))) {
                check_quote(
                    first,
                    level.bid_px,
                    level.bid_sz,
                    level.ask_px,
                    level.ask_sz,
                );
                rest = &rest[1..];
            }
            if cmbp.action as u8 == b'T' {
                check_trade(&rest[0], cmbp.price, cmbp.size, cmbp.side);
                rest = &rest[1..];
            }
            assert!(rest.is_empty(), "{events:?}");
            with_last(cmbp.flags.is_last());
        }
        RecordRefEnum::Ohlcv(bar) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1);
            let Body::Bar(got) = events[0].body() else {
                panic!("a bar");
            };
            assert_eq!(
                (got.open, got.high, got.low, got.close),
                (
                    Fixed(bar.open),
                    Fixed(bar.high),
                    Fixed(bar.low),
                    Fixed(bar.close)
                )
            );
            assert_eq!(events[0].header.venue_seq, bar.volume);
            let interval = bar_interval(bar.hd.rtype).unwrap_or(legacy_interval);
            assert_eq!(BarInterval::from_flags(events[0].header.flags), interval);
            assert_ne!(interval, BarInterval::Unknown);
            with_last(true);
        }
        RecordRefEnum::Status(status) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1);
            let Body::TradingStatus(got) = events[0].body() else {
                panic!("a status");
            };
            assert_eq!(
                (got.action, got.reason, got.trading_event),
                (status.action, status.reason, status.trading_event)
            );
            assert_eq!(
                (got.is_trading, got.is_quoting, got.is_short_sell_restricted),
                (
                    status.is_trading as u8,
                    status.is_quoting as u8,
                    status.is_short_sell_restricted as u8
                )
            );
            with_last(true);
        }
        RecordRefEnum::Imbalance(imbalance) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1);
            let Body::Imbalance(got) = events[0].body() else {
                panic!("an imbalance");
            };
            assert_eq!(got.ref_price, Fixed(imbalance.ref_price));
            assert_eq!(
                got.cont_book_clr_price,
                Fixed(imbalance.cont_book_clr_price)
            );
            assert_eq!(got.paired_qty, imbalance.paired_qty);
            assert_eq!(got.total_imbalance_qty, imbalance.total_imbalance_qty);
            assert_eq!(got.side(), side(imbalance.side));
            assert_eq!(got.unpaired_side(), side(imbalance.unpaired_side));
            assert_eq!(got.auction_type, imbalance.auction_type as u8);
            assert_eq!(
                got.significant_imbalance,
                imbalance.significant_imbalance as u8
            );
            assert_eq!(
                (got.auction_status, got.freeze_status, got.num_extensions),
                (
                    imbalance.auction_status,
                    imbalance.freeze_status,
                    imbalance.num_extensions
                )
            );
            with_last(true);
        }
        RecordRefEnum::Stat(stat) => {
            assert_eq!(*result, Ok(Outcome::Normalized));
            assert_eq!(events.len(), 1);
            let Body::Statistic(got) = events[0].body() else {
                panic!("a statistic");
            };
            assert_eq!(got.price, Fixed(stat.price));
            assert_eq!(got.quantity, stat.quantity);
            assert_eq!(got.ts_ref, stat.ts_ref);
            assert_eq!(
                (got.stat_type, got.channel_id),
                (stat.stat_type, stat.channel_id)
            );
            assert_eq!(
                (got.update_action, got.stat_flags),
                (stat.update_action, stat.stat_flags)
            );
            assert_eq!(events[0].header.venue_seq, u64::from(stat.sequence));
            with_last(true);
        }
        RecordRefEnum::InstrumentDef(_) => {
            assert_eq!(*result, Ok(Outcome::Definition));
            assert!(events.is_empty());
        }
        RecordRefEnum::SymbolMapping(_) => {
            assert_eq!(*result, Ok(Outcome::Control(Control::SymbolMapping)));
            assert!(events.is_empty());
        }
        RecordRefEnum::System(_) => {
            assert_eq!(*result, Ok(Outcome::Control(Control::System)));
            assert!(events.is_empty());
        }
        RecordRefEnum::Error(_) => {
            assert_eq!(*result, Ok(Outcome::Control(Control::Error)));
            assert!(events.is_empty());
        }
    }
}

/// Two records, field by field through the typed structs (each derives `PartialEq` over every
/// field), after the header fields one by one.
fn same_record(ours: &RecordBuf, theirs: &RecordBuf, at: &str) {
    assert_eq!(ours.as_ref(), theirs.as_ref(), "{at}: bytes");
    let (a, b) = (ours.header(), theirs.header());
    assert_eq!(a.rtype, b.rtype, "{at}");
    assert_eq!(a.publisher_id, b.publisher_id, "{at}");
    assert_eq!(a.instrument_id, b.instrument_id, "{at}");
    assert_eq!(a.ts_event, b.ts_event, "{at}");
    use RecordRefEnum as E;
    match (
        ours.as_enum().expect("known"),
        theirs.as_enum().expect("known"),
    ) {
        (E::Mbo(a), E::Mbo(b)) => assert_eq!(a, b, "{at}"),
        (E::Trade(a), E::Trade(b)) => assert_eq!(a, b, "{at}"),
        (E::Mbp1(a), E::Mbp1(b)) => assert_eq!(a, b, "{at}"),
        (E::Mbp10(a), E::Mbp10(b)) => assert_eq!(a, b, "{at}"),
        (E::Bbo(a), E::Bbo(b)) => assert_eq!(a, b, "{at}"),
        (E::Cbbo(a), E::Cbbo(b)) => assert_eq!(a, b, "{at}"),
        (E::Cmbp1(a), E::Cmbp1(b)) => assert_eq!(a, b, "{at}"),
        (E::Ohlcv(a), E::Ohlcv(b)) => assert_eq!(a, b, "{at}"),
        (E::Status(a), E::Status(b)) => assert_eq!(a, b, "{at}"),
        (E::Imbalance(a), E::Imbalance(b)) => assert_eq!(a, b, "{at}"),
        (E::Stat(a), E::Stat(b)) => assert_eq!(a, b, "{at}"),
        (E::InstrumentDef(a), E::InstrumentDef(b)) => {
            assert_eq!(a, b, "{at}");
            assert_eq!(a.raw_symbol().ok(), b.raw_symbol().ok(), "{at}");
        }
        (E::Error(a), E::Error(b)) => assert_eq!(a, b, "{at}"),
        (E::System(a), E::System(b)) => assert_eq!(a, b, "{at}"),
        (E::SymbolMapping(a), E::SymbolMapping(b)) => assert_eq!(a, b, "{at}"),
        (a, b) => panic!("{at}: {a:?} vs {b:?}"),
    }
}

fn legacy_interval(metadata: Option<&Metadata>) -> BarInterval {
    use dbn::Schema;
    match metadata.and_then(|md| md.schema) {
        Some(Schema::Ohlcv1S) => BarInterval::Second,
        Some(Schema::Ohlcv1M) => BarInterval::Minute,
        Some(Schema::Ohlcv1H) => BarInterval::Hour,
        Some(Schema::Ohlcv1D) => BarInterval::Day,
        Some(Schema::OhlcvEod) => BarInterval::EndOfDay,
        _ => BarInterval::Unknown,
    }
}

#[test]
fn every_shared_dbn_file_decodes_as_the_official_decoder_does() {
    let Some(dir) = common::shared_dir("dbn") else {
        return;
    };
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_file())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.contains(".dbn") || name.ends_with(".dbz")
        })
        .collect();
    paths.sort();
    assert!(paths.len() >= 80, "the dbn fixtures: {} files", paths.len());
    let mut summary = Vec::new();
    for path in &paths {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let kind = kind_of(&name);
        let official = match official(path, kind) {
            Ok(decoded) => decoded,
            Err(error) => {
                // The official decoder refuses it: so must tickwire.
                let bytes = wire_bytes(path);
                assert!(
                    ours(&bytes, kind, bytes.len()).is_err(),
                    "{name}: official refuses ({error}), tickwire accepts"
                );
                summary.push(format!("{name}: refused by both ({error})"));
                continue;
            }
        };
        let legacy = legacy_interval(official.metadata.as_ref());
        if kind == Kind::Dbz {
            // The live stream reads DBN only, and says so. `tickwire decode` reads a DBZ file's
            // metadata with DynDecoder and feeds its records (DBN v1 records in a zstd frame
            // after the metadata's skippable frame, which zstd passes over) to the stream as a
            // v1 fragment: the same records as the official decoder's, whatever the chunking.
            let mut stream = RecordStream::new();
            stream.feed(&std::fs::read(path).expect("read"));
            assert!(
                matches!(stream.next(), Some(Err(StreamError::Dbz))),
                "{name}"
            );
            let ts_out = official.metadata.as_ref().is_some_and(|m| m.ts_out);
            assert!(!ts_out, "{name}: the fixtures have no ts_out");
            let mut records = Vec::new();
            DynReader::with_buffer(
                std::io::BufReader::new(std::fs::File::open(path).expect("open")),
                dbn::Compression::Zstd,
            )
            .expect("zstd")
            .read_to_end(&mut records)
            .expect("DBZ records");
            for chunk in [1, 7, 61, records.len()] {
                let at = format!("{name} in {chunk}-byte chunks");
                let ours = ours(&records, Kind::Fragment(1), chunk)
                    .unwrap_or_else(|error| panic!("{at}: {error}"));
                assert_eq!(
                    ours.records.len(),
                    official.records.len(),
                    "{at}: record count"
                );
                // The decode gives the normalizer the metadata first (a legacy bar's interval
                // is in its schema), which a fragment's stream has not seen.
                let mut normalizer = Normalizer::new(1);
                if let Some(metadata) = &official.metadata {
                    normalizer.on_metadata(metadata);
                }
                for (index, (a, b)) in ours.records.iter().zip(&official.records).enumerate() {
                    same_record(a, b, &format!("{at}, record {index}"));
                    let normalized = normalize(&mut normalizer, RecordRef::from(a));
                    check_events(b, &normalized, legacy);
                }
            }
            summary.push(format!(
                "{name}: DBZ v0, {} records (v1 records through the stream)",
                official.records.len()
            ));
            continue;
        }
        let bytes = wire_bytes(path);
        let mut first_events: Option<Vec<Vec<Event>>> = None;
        let mut version = None;
        for chunk in [1, 7, 61, bytes.len()] {
            let at = format!("{name} in {chunk}-byte chunks");
            let ours = ours(&bytes, kind, chunk).unwrap_or_else(|error| panic!("{at}: {error}"));
            assert_eq!(
                ours.records.len(),
                official.records.len(),
                "{at}: record count"
            );
            match (&ours.metadata, &official.metadata) {
                (Some(a), Some(b)) => {
                    assert_eq!(a.dataset, b.dataset, "{at}");
                    assert_eq!(a.schema, b.schema, "{at}");
                    assert_eq!(a.start, b.start, "{at}");
                    assert_eq!(a.end, b.end, "{at}");
                    assert_eq!(a.symbols, b.symbols, "{at}");
                    assert_eq!(a.mappings, b.mappings, "{at}");
                    assert_eq!(a.version, dbn::DBN_VERSION, "{at}: upgraded");
                    assert_eq!(a, b, "{at}: every metadata field");
                }
                (None, None) => assert!(matches!(kind, Kind::Fragment(_)), "{at}"),
                (a, b) => panic!("{at}: metadata {a:?} vs {b:?}"),
            }
            for (index, (a, b)) in ours.records.iter().zip(&official.records).enumerate() {
                same_record(a, b, &format!("{at}, record {index}"));
                check_events(b, &ours.normalized[index], legacy);
            }
            let events: Vec<Vec<Event>> = ours
                .normalized
                .iter()
                .map(|(_, events)| events.clone())
                .collect();
            match &first_events {
                None => first_events = Some(events),
                Some(first) => assert_eq!(
                    first, &events,
                    "{at}: the same events whatever the chunking"
                ),
            }
            version = ours.input_version;
        }
        if kind == Kind::Dbn {
            // The version on the wire, as the official decoder reads it without upgrading.
            let as_is = DynDecoder::from_file(path, VersionUpgradePolicy::AsIs).expect("as is");
            assert_eq!(version, Some(as_is.metadata().version), "{name}");
        }
        summary.push(format!(
            "{name}: {kind:?}, wire v{}, {} records",
            version.map_or("?".to_owned(), |v| v.to_string()),
            official.records.len()
        ));
    }
    println!("{}", summary.join("\n"));
}
