//! `tickwire decode`: a capture file in, normalized events out as JSON lines, with the same
//! decoder the appliance runs.
//!
//! Input: plain or gzip (told apart by the gzip magic bytes, not the name); one message per line,
//! raw JSON, optionally prefixed by its receive time in ns and a space (the hftbacktest capture
//! format of `../shared/data/binance-futures/`). Output: one object per normalized event on
//! stdout, a summary on stderr.

use flate2::read::MultiGzDecoder;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use tickwire::venue::binance::decode::{self, Message, TradeKind};
use tickwire::venue::binance::json;

/// The venue label printed on every line.
const VENUE: &str = "binance-futures";

/// The venue label of Thalex files.
const THALEX: &str = "thalex";

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

pub fn decode(venue: &str, path: &Path) -> ExitCode {
    let result = match venue {
        VENUE => run(path),
        THALEX => run_thalex(path),
        _ => {
            eprintln!("decode: venue {venue:?} is not supported; valid: {VENUE}, {THALEX}");
            return ExitCode::from(2);
        }
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
                    json::write_event(&mut buffer, VENUE, mark.symbol, &event);
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
    let types: Vec<String> = by_type
        .iter()
        .map(|(name, count)| format!("{name}={count}"))
        .chain(
            unknown_types
                .iter()
                .map(|(name, count)| format!("unknown:{name}={count}")),
        )
        .collect();
    Ok(format!(
        "decode: {lines} lines; {} messages ({}); {events} events; {skipped} skipped; {malformed} malformed",
        by_type.values().sum::<u64>() + unknown_types.values().sum::<u64>(),
        types.join(", ")
    ))
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
    use tickwire::venue::thalex::decode::{decode as read, Message as ThalexMessage, Scratch};
    use tickwire::venue::thalex::feed::ThalexFeed;

    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut scratch = Scratch::default();
    for_each_message(path, |_, _, message| {
        if let Ok(ThalexMessage::Notification { channel, .. }) = read(message, &mut scratch) {
            if !seen.contains(channel) {
                seen.insert(channel.to_vec());
                names.push(String::from_utf8_lossy(channel).into_owned());
            }
        }
        Ok(())
    })?;
    let (mut feed, counters) = ThalexFeed::for_channels(0, THALEX, &names);
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
            json::write_event(&mut buffer, THALEX, symbol, &event);
        }
        out.write_all(&buffer)
    })?;
    out.flush()?;
    Ok(format!(
        "decode: {lines} lines; {messages} messages (ticker+lwt={}, book={}, trades={}, \
         price_index={}, responses={}, errors={}, unknown channel={}, duplicate={}); {events} \
         events; {} malformed",
        counters.book_tickers.get(),
        counters.depth_updates.get(),
        counters.trades.get(),
        counters.mark_prices.get(),
        counters.replies.get(),
        counters.error_replies.get(),
        counters.unknown_symbol.get() + counters.unknown.get(),
        counters.duplicates.get(),
        counters.malformed.get(),
    ))
}
