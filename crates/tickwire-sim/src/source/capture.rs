//! Replay of a recorded capture, such as `../shared/data/binance-futures/btcusdt_20240808.gz`.
//!
//! The file holds one message a line, `<local receive time, ns since the Unix epoch> <JSON>`, where
//! the JSON is the combined-stream wrapper `{"stream":"btcusdt@bookTicker","data":{..}}`. Also
//! read: lines without the time (they keep the previous line's offset, so a file without any
//! times replays as fast as the pacer allows) and raw venue messages without the wrapper (the
//! stream is derived from the event type and symbol, and a wrapper is built around the recorded
//! bytes). The file is gzip or plain, told apart by the gzip magic bytes, not by its name.
//!
//! A line holding a recorded REST depth snapshot (`{"lastUpdateId":..,"bids":..,"asks":..}`,
//! as hftbacktest's collector writes one at start) is recognised, counted
//! ([`CaptureSource::rest_snapshot_lines`]) and passed over: it is not a stream message. The depth
//! book behind [`Source::depth_snapshot`] is built from the replayed diffs alone, never seeded
//! from such a line (the line names no symbol, and diffs recorded before it would have to be
//! re-applied); so it knows only the levels the diffs touched (see `RecordedBook`).
//!
//! The replay is byte-exact: `combined` is the recorded JSON itself, never re-serialised, so a
//! record-then-replay round trip gives identical bytes. The file is read lazily, one line at a
//! time through a buffered (and, for gzip, streaming) reader: memory stays flat however long
//! the capture is.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::depth::{LevelChange, RecordedBook, RecordedDiff};
use super::{SimMessage, Source, SourceError};
use tickwire::fixed::Fixed;

/// The first bytes of every gzip member (RFC 1952, section 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Bad lines logged one by one before the log goes quiet (they are all counted either way): a
/// damaged capture must not flood the log.
const LOGGED_BAD_LINES: u64 = 5;

const READ_BUFFER_BYTES: usize = 1 << 16;

/// A capture file replayed in order. See the module docs for the format.
pub struct CaptureSource {
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    /// The current line, reused from line to line.
    line: Vec<u8>,
    line_number: u64,
    first_recv_ns: Option<u64>,
    last_offset_ns: u64,
    messages_read: u64,
    skipped_lines: u64,
    rest_snapshot_lines: u64,
    read_error: Option<std::io::Error>,
    finished: bool,
    /// Depth books by upper-case symbol, fed by every diff `next_message` returned.
    books: HashMap<String, RecordedBook>,
}

impl CaptureSource {
    /// Opens a capture, gzip or plain.
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureSource, SourceError> {
        let path = path.as_ref().to_path_buf();
        let open_error = |source| SourceError::Open {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(open_error)?;
        let mut buffered = BufReader::with_capacity(READ_BUFFER_BYTES, file);
        let is_gzip = buffered
            .fill_buf()
            .map_err(open_error)?
            .starts_with(&GZIP_MAGIC);
        // MultiGzDecoder: a capture that was appended to in several runs holds several gzip
        // members, and a single-member decoder would stop after the first.
        let reader: Box<dyn BufRead + Send> = if is_gzip {
            Box::new(BufReader::with_capacity(
                READ_BUFFER_BYTES,
                flate2::bufread::MultiGzDecoder::new(buffered),
            ))
        } else {
            Box::new(buffered)
        };
        Ok(CaptureSource {
            path,
            reader,
            line: Vec::with_capacity(4096),
            line_number: 0,
            first_recv_ns: None,
            last_offset_ns: 0,
            messages_read: 0,
            skipped_lines: 0,
            rest_snapshot_lines: 0,
            read_error: None,
            finished: false,
            books: HashMap::new(),
        })
    }

    /// Messages handed out so far.
    pub fn messages_read(&self) -> u64 {
        self.messages_read
    }

    /// Lines that were not a message the replay understands, skipped (blank lines are not counted).
    pub fn skipped_lines(&self) -> u64 {
        self.skipped_lines
    }

    /// Recorded REST depth snapshots passed over: they are not stream messages (a client fetches
    /// snapshots over REST, where the simulator serves [`Source::depth_snapshot`]), and they do not
    /// seed the book (see the module docs). The real capture holds one, at line 55.
    pub fn rest_snapshot_lines(&self) -> u64 {
        self.rest_snapshot_lines
    }

    /// The error that ended the replay early (a truncated gzip stream, a failing disk), if any.
    /// The messages before it were replayed; the replay then ends as if the file ended there.
    pub fn read_error(&self) -> Option<&std::io::Error> {
        self.read_error.as_ref()
    }

    fn skip(&mut self, error: LineError) {
        self.skipped_lines += 1;
        if self.skipped_lines <= LOGGED_BAD_LINES {
            tracing::warn!(
                path = %self.path.display(),
                line = self.line_number,
                "capture line skipped: {error}"
            );
            if self.skipped_lines == LOGGED_BAD_LINES {
                tracing::warn!(
                    path = %self.path.display(),
                    "further bad capture lines are counted but not logged"
                );
            }
        }
    }

    /// The offset for a line received at `recv_ns`: time since the first timed line, never less
    /// than the previous offset (a clock step back does not reorder the replay). An untimed line
    /// keeps the previous offset.
    fn offset_for(&mut self, recv_ns: Option<u64>) -> u64 {
        if let Some(recv_ns) = recv_ns {
            let first_ns = *self.first_recv_ns.get_or_insert(recv_ns);
            if let Some(offset_ns) = recv_ns.checked_sub(first_ns) {
                self.last_offset_ns = self.last_offset_ns.max(offset_ns);
            }
        }
        self.last_offset_ns
    }
}

impl Source for CaptureSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        while !self.finished {
            self.line.clear();
            match self.reader.read_until(b'\n', &mut self.line) {
                Ok(0) => {
                    self.finished = true;
                    break;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.line_number + 1,
                        "capture read failed, replay ends here: {error}"
                    );
                    self.read_error = Some(error);
                    self.finished = true;
                    break;
                }
            }
            self.line_number += 1;
            let decoded = match decode_line(&self.line) {
                Ok(Line::Message(decoded)) => decoded,
                Ok(Line::Blank) => continue,
                Ok(Line::RestSnapshot) => {
                    self.rest_snapshot_lines += 1;
                    continue;
                }
                Err(error) => {
                    self.skip(error);
                    continue;
                }
            };
            let offset_ns = self.offset_for(decoded.recv_ns);
            if let Some(diff) = decoded.diff {
                self.books
                    .entry(diff.symbol.clone())
                    .or_default()
                    .apply(diff);
            }
            self.messages_read += 1;
            return Some(SimMessage {
                stream: decoded.stream,
                combined: decoded.combined,
                data: decoded.data,
                offset_ns,
                stamp_key: decoded.stamp_key,
            });
        }
        None
    }

    /// The book built from the diffs replayed so far (see [`RecordedBook`]: a capture holds no
    /// snapshot, so this book only knows the levels the diffs touched). `None` until the first
    /// diff for `symbol` has been returned.
    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>> {
        let book = match self.books.get(symbol) {
            Some(book) => book,
            None => self.books.get(&symbol.to_ascii_uppercase())?,
        };
        Some(book.snapshot(limit))
    }
}

/// Why a line was skipped.
#[derive(Debug, thiserror::Error)]
enum LineError {
    #[error("the receive time is not a number of nanoseconds followed by a space")]
    BadReceiveTime,
    #[error("no JSON object after the receive time")]
    NoJson,
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("`data` of the combined-stream wrapper is not an object")]
    DataNotObject,
    #[error("a raw message without an `e` and `s` to name its stream")]
    Unnamed,
    #[error("event type `{0}` has no stream name this replay knows")]
    UnknownEvent(String),
    #[error("symbol `{0}` is not ASCII letters and digits")]
    BadSymbol(String),
    #[error("bookTicker without its update id `u`")]
    BookTickerWithoutUpdateId,
    #[error("depthUpdate field `{0}` is missing")]
    DepthFieldMissing(&'static str),
    #[error("depthUpdate level `{text}`: {error}")]
    BadDecimal {
        text: String,
        error: tickwire::fixed::ParseError,
    },
}

/// A line turned into a message, not yet given its offset.
struct DecodedLine {
    recv_ns: Option<u64>,
    stream: String,
    combined: Vec<u8>,
    data: Range<usize>,
    stamp_key: Option<u64>,
    diff: Option<RecordedDiff>,
}

/// The fields of a venue message the replay reads: the event type, the symbol, and the update id
/// of a bookTicker. Everything else is ignored (and still validated as JSON by the parse).
#[derive(Deserialize)]
struct EventHeader<'a> {
    #[serde(borrow)]
    e: Option<Cow<'a, str>>,
    #[serde(borrow)]
    s: Option<Cow<'a, str>>,
    u: Option<IdOrOther>,
}

/// `u` is a number in the book messages; other messages are free to use the key for anything, so
/// anything else is accepted and ignored rather than failing the line.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdOrOther {
    Id(u64),
    Other(IgnoredAny),
}

impl EventHeader<'_> {
    fn update_id(&self) -> Option<u64> {
        match self.u {
            Some(IdOrOther::Id(id)) => Some(id),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Wrapper<'a> {
    #[serde(borrow)]
    stream: Cow<'a, str>,
    #[serde(borrow)]
    data: EventHeader<'a>,
}

#[derive(Deserialize)]
#[allow(
    non_snake_case,
    reason = "the venue's field names, kept so the mapping is obvious"
)]
struct DepthFields<'a> {
    #[serde(borrow)]
    s: Option<Cow<'a, str>>,
    E: Option<u64>,
    T: Option<u64>,
    u: Option<u64>,
    #[serde(borrow)]
    b: Option<Vec<(Cow<'a, str>, Cow<'a, str>)>>,
    #[serde(borrow)]
    a: Option<Vec<(Cow<'a, str>, Cow<'a, str>)>>,
}

/// What a line of a capture holds.
enum Line {
    Blank,
    /// A recorded REST depth snapshot (`{"lastUpdateId":..,"bids":..,"asks":..}`): hftbacktest's
    /// collector writes the one it fetched at start into the capture. It is not a stream message.
    RestSnapshot,
    Message(DecodedLine),
}

/// Decodes one line.
fn decode_line(line: &[u8]) -> Result<Line, LineError> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Ok(Line::Blank);
    }
    let (recv_ns, json) = split_receive_time(line)?;
    let fields = top_level_fields(json).ok_or(LineError::NoJson)?;
    let decoded = match fields.data {
        Some(data) if fields.stream.is_some() => decode_wrapped(recv_ns, json, data)?,
        _ if fields.last_update_id => {
            serde_json::from_slice::<IgnoredAny>(json)?;
            return Ok(Line::RestSnapshot);
        }
        _ => decode_raw(recv_ns, json)?,
    };
    Ok(Line::Message(decoded))
}

/// A combined-stream line: `combined` is the recorded JSON as it is.
fn decode_wrapped(
    recv_ns: Option<u64>,
    json: &[u8],
    data: Range<usize>,
) -> Result<DecodedLine, LineError> {
    let wrapper: Wrapper<'_> = serde_json::from_slice(json)?;
    if json.get(data.start) != Some(&b'{') {
        return Err(LineError::DataNotObject);
    }
    let stamp_key = stamp_key(&wrapper.data)?;
    let stream = wrapper.stream.into_owned();
    let diff = if is_diff_stream(&stream) && wrapper.data.e.as_deref() == Some("depthUpdate") {
        Some(parse_diff(
            json.get(data.clone()).ok_or(LineError::NoJson)?,
        )?)
    } else {
        None
    };
    Ok(DecodedLine {
        recv_ns,
        stream,
        combined: json.to_vec(),
        data,
        stamp_key,
        diff,
    })
}

/// A raw venue message: the stream is named after its event type and symbol, and the wrapper is
/// built around the recorded bytes.
fn decode_raw(recv_ns: Option<u64>, json: &[u8]) -> Result<DecodedLine, LineError> {
    let header: EventHeader<'_> = serde_json::from_slice(json)?;
    let (Some(event), Some(symbol)) = (header.e.as_deref(), header.s.as_deref()) else {
        return Err(LineError::Unnamed);
    };
    let channel = match event {
        "bookTicker" => "bookTicker",
        "trade" => "trade",
        "aggTrade" => "aggTrade",
        "depthUpdate" => "depth",
        "markPriceUpdate" => "markPrice",
        other => return Err(LineError::UnknownEvent(other.to_owned())),
    };
    // The symbol goes into the wrapper unescaped, so it must need no escaping.
    if symbol.is_empty() || !symbol.bytes().all(|byte| byte.is_ascii_alphanumeric()) {
        return Err(LineError::BadSymbol(symbol.to_owned()));
    }
    let stamp_key = stamp_key(&header)?;
    let diff = if event == "depthUpdate" {
        Some(parse_diff(json)?)
    } else {
        None
    };
    let stream = format!("{}@{channel}", symbol.to_ascii_lowercase());
    let mut combined = Vec::with_capacity(json.len() + stream.len() + 24);
    combined.extend_from_slice(b"{\"stream\":\"");
    combined.extend_from_slice(stream.as_bytes());
    combined.extend_from_slice(b"\",\"data\":");
    let data_start = combined.len();
    combined.extend_from_slice(json);
    let data = data_start..combined.len();
    combined.push(b'}');
    Ok(DecodedLine {
        recv_ns,
        stream,
        combined,
        data,
        stamp_key,
        diff,
    })
}

/// The latency-stamping key: the update id of a bookTicker, required there.
fn stamp_key(header: &EventHeader<'_>) -> Result<Option<u64>, LineError> {
    if header.e.as_deref() != Some("bookTicker") {
        return Ok(None);
    }
    header
        .update_id()
        .map(Some)
        .ok_or(LineError::BookTickerWithoutUpdateId)
}

/// Whether a stream carries diffs (`<sym>@depth`, `<sym>@depth@100ms`) rather than the partial
/// book depth streams (`<sym>@depth5@100ms`), whose messages replace the top levels instead of
/// changing them and so must not be applied to the book.
fn is_diff_stream(stream: &str) -> bool {
    match stream.split_once('@') {
        Some((_, channel)) => channel == "depth" || channel.starts_with("depth@"),
        None => false,
    }
}

/// Splits off the receive time: digits then blanks then the JSON. A line starting with `{` has
/// no time.
fn split_receive_time(line: &[u8]) -> Result<(Option<u64>, &[u8]), LineError> {
    if line.first() == Some(&b'{') {
        return Ok((None, line));
    }
    let digits_end = line
        .iter()
        .position(|byte| !byte.is_ascii_digit())
        .ok_or(LineError::NoJson)?;
    let (digits, rest) = line.split_at(digits_end);
    if digits.is_empty() || !rest.first().is_some_and(u8::is_ascii_whitespace) {
        return Err(LineError::BadReceiveTime);
    }
    let mut recv_ns: u64 = 0;
    for &digit in digits {
        recv_ns = recv_ns
            .checked_mul(10)
            .and_then(|value| value.checked_add(u64::from(digit - b'0')))
            .ok_or(LineError::BadReceiveTime)?;
    }
    let json = rest.trim_ascii_start();
    if json.first() != Some(&b'{') {
        return Err(LineError::NoJson);
    }
    Ok((Some(recv_ns), json))
}

fn parse_diff(data: &[u8]) -> Result<RecordedDiff, LineError> {
    let fields: DepthFields<'_> = serde_json::from_slice(data)?;
    let symbol = fields.s.ok_or(LineError::DepthFieldMissing("s"))?;
    Ok(RecordedDiff {
        symbol: symbol.to_ascii_uppercase(),
        event_time_ms: fields.E.ok_or(LineError::DepthFieldMissing("E"))?,
        // Older USD-M diffs and the spot ones carry no transaction time; E stands in for it.
        transaction_time_ms: fields
            .T
            .or(fields.E)
            .ok_or(LineError::DepthFieldMissing("T"))?,
        final_update_id: fields.u.ok_or(LineError::DepthFieldMissing("u"))?,
        bids: parse_levels(fields.b.ok_or(LineError::DepthFieldMissing("b"))?)?,
        asks: parse_levels(fields.a.ok_or(LineError::DepthFieldMissing("a"))?)?,
    })
}

fn parse_levels(levels: Vec<(Cow<'_, str>, Cow<'_, str>)>) -> Result<Vec<LevelChange>, LineError> {
    let parse = |text: &str| {
        Fixed::parse_str(text).map_err(|error| LineError::BadDecimal {
            text: text.to_owned(),
            error,
        })
    };
    levels
        .into_iter()
        .map(|(price, quantity)| {
            Ok(LevelChange {
                price: parse(&price)?,
                quantity: parse(&quantity)?,
                price_text: price.into(),
                quantity_text: quantity.into(),
            })
        })
        .collect()
}

/// Where the values of the top-level `stream` and `data` keys sit in a JSON object.
#[derive(Debug, Default, PartialEq)]
struct TopLevelFields {
    stream: Option<Range<usize>>,
    data: Option<Range<usize>>,
    /// Whether a `lastUpdateId` key is present: the mark of a REST depth snapshot.
    last_update_id: bool,
}

/// Finds the top-level `stream` and `data` values (and whether there is a `lastUpdateId`) of a JSON object by a structural scan (strings
/// and nesting only). The scan delimits values but does not validate them: the caller parses
/// the same bytes with serde_json, which rejects anything malformed, so the ranges found here
/// are only used on JSON known to be valid. `None` if the bytes are not shaped like an object.
fn top_level_fields(json: &[u8]) -> Option<TopLevelFields> {
    let mut fields = TopLevelFields::default();
    let mut at = skip_blanks(json, 0);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_blanks(json, at + 1);
    if json.get(at) == Some(&b'}') {
        return Some(fields);
    }
    loop {
        let key_end = string_end(json, at)?;
        let key = json.get(at + 1..key_end - 1)?;
        at = skip_blanks(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value_start = skip_blanks(json, at + 1);
        let value_end = value_end(json, value_start)?;
        match key {
            b"stream" => fields.stream = Some(value_start..value_end),
            b"data" => fields.data = Some(value_start..value_end),
            b"lastUpdateId" => fields.last_update_id = true,
            _ => {}
        }
        at = skip_blanks(json, value_end);
        match json.get(at)? {
            b',' => at = skip_blanks(json, at + 1),
            b'}' => return Some(fields),
            _ => return None,
        }
    }
}

fn skip_blanks(json: &[u8], mut at: usize) -> usize {
    while json
        .get(at)
        .is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\r' | b'\n'))
    {
        at += 1;
    }
    at
}

/// The index just past the string that opens at `start`.
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    if json.get(start) != Some(&b'"') {
        return None;
    }
    let mut at = start + 1;
    loop {
        match json.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

/// The index just past the value that starts at `start`.
fn value_end(json: &[u8], start: usize) -> Option<usize> {
    match json.get(start)? {
        b'"' => string_end(json, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match json.get(at)? {
                    b'"' => {
                        at = string_end(json, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let end = json[start..]
                .iter()
                .position(|byte| matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .map_or(json.len(), |length| start + length);
            (end > start).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_finds_data_after_strings_that_look_like_structure() {
        let json =
            br#"{"x":"}{\"data\":1","stream":"a@b","data":{"s":"[}","n":[1,{"a":2}]},"y":3}"#;
        let fields = top_level_fields(json).unwrap();
        assert_eq!(&json[fields.stream.unwrap()], br#""a@b""#);
        assert_eq!(
            &json[fields.data.unwrap()],
            br#"{"s":"[}","n":[1,{"a":2}]}"#
        );
    }

    #[test]
    fn the_scan_refuses_what_is_not_an_object() {
        for json in [
            &b"[1]"[..],
            b"{\"a\"",
            b"{\"a\":}",
            b"{\"a\":1 x}",
            b"{\"a\":\"open",
        ] {
            assert_eq!(
                top_level_fields(json),
                None,
                "{}",
                String::from_utf8_lossy(json)
            );
        }
    }

    #[test]
    fn receive_time_parsing() {
        assert_eq!(
            split_receive_time(b"12 {}").unwrap(),
            (Some(12), &b"{}"[..])
        );
        assert_eq!(split_receive_time(b"{}").unwrap(), (None, &b"{}"[..]));
        assert!(split_receive_time(b"12{}").is_err());
        assert!(split_receive_time(b"99999999999999999999999 {}").is_err());
        assert!(split_receive_time(b"x {}").is_err());
        assert!(split_receive_time(b"12 x").is_err());
    }

    #[test]
    fn diff_streams_exclude_partial_depth() {
        assert!(is_diff_stream("btcusdt@depth"));
        assert!(is_diff_stream("btcusdt@depth@0ms"));
        assert!(!is_diff_stream("btcusdt@depth5@100ms"));
        assert!(!is_diff_stream("btcusdt@bookTicker"));
    }
}
