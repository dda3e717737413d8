//! What goes on NATS, byte by byte: the subjects, the event messages and the directory service.
//! The bridge writes it, [`crate::NatsClient`] and the Python package (`tickwire_bus.nats`) read
//! it. Every integer is little-endian. Sans-IO: this module only builds and parses bytes.
//!
//! # Subjects
//!
//! ```text
//! tickwire.<appliance>.<venue>.<symbol>.<kind>
//! ```
//!
//! - `appliance`: the name the bridge was given (`[bridge] name`, or `--appliance`), so that
//!   several appliances, each with its own venues or symbols, share one NATS cluster and a
//!   consumer takes them all with `tickwire.*.<venue>.<symbol>.<kind>` or `tickwire.>`.
//! - `venue`, `symbol`: the instrument directory's names (`binance-futures`, `BTCUSDT`); `*` for an
//!   event about every venue or every instrument (as `tickwire decode` prints it), `?` for an id
//!   the directory does not name. Both escaped as below.
//! - `kind`: [`EventKind::name`] (`quote`, `trade`, `level`, `snapshot_begin`, `snapshot_end`,
//!   `gap`, `status`, `reference`, `bar`, `trading_status`, `imbalance`, `statistic`,
//!   `liquidation`). The events are the bus's 64 bytes, so they follow its layout version
//!   (`tickwire_bus::layout::LAYOUT_VERSION`; the event bytes are as in version 2, which added
//!   the `liquidation` kind, 13; version 3 added partitions, which the wire does not carry): a
//!   consumer built before version 2 refuses a message holding a liquidation as one with an unknown kind byte,
//!   and a subscription that names its kinds never gets one.
//!
//! **Escaping.** A NATS subject token cannot hold `.` (the separator), `*` or `>` (wildcards) or
//! whitespace, and `$` opens the server's own subjects. So every byte of a name's UTF-8 outside
//! `A-Z a-z 0-9 - _` is written `%XX` (two upper-case hex digits), `%` itself included, and an
//! empty name is the token `%` alone (which no escaped name can be, since an escape is always three
//! characters). `BTC-PERPETUAL` stays as it is; `ES.FUT` is `ES%2EFUT`, `BTC/USD` is `BTC%2FUSD`,
//! `*` is `%2A`. The mapping is one-to-one ([`unescape`] inverts it), so a consumer can subscribe
//! to one instrument by escaping its symbol with [`escape`] (Python: `tickwire_bus.nats.escape`).
//!
//! # Event messages
//!
//! One message carries 1 to [`MAX_EVENTS_PER_MESSAGE`] events of one subject, in the order the
//! appliance published them: a 32-byte header, then the events.
//!
//! | offset | type | field |
//! |---:|---|---|
//! | 0 | `[u8; 2]` | magic `TW` |
//! | 2 | u8 | format version ([`FORMAT_VERSION`], 1) |
//! | 3 | u8 | flags (0; reserved) |
//! | 4 | u16 | count: events in this message, `1..=MAX_EVENTS_PER_MESSAGE` |
//! | 6 | u16 | reserved (0) |
//! | 8 | u64 | appliance epoch: the epoch of the bus the bridge reads (new at every appliance start) |
//! | 16 | u64 | stream: nonzero, new each time a bridge starts or follows a new bus epoch |
//! | 24 | u64 | sequence of the first event on this subject in this stream (the first is 1) |
//! | 32 | `count x [u8; 64]` | the events, each the bus's 64 bytes (`tickwire_bus::layout`) |
//!
//! The message's length is exactly `32 + 64 * count`; anything else is refused.
//!
//! **Sequence numbers are per subject** (event `i` of a message has `sequence + i`), so a
//! consumer of any set of subjects, wildcards included, checks each subject's continuity
//! exactly: a hole between the last sequence it saw and the next is exactly the events it lost
//! (a server lost with messages in flight, its own queue overflowing, the bridge's queue full), a
//! sequence at or below the last is a duplicate. Numbers are given before the bridge's
//! drop-on-full queue, so the bridge's own drops are holes too. Within a stream the sequence
//! never goes back; a new `stream` starts every subject again at 1.
//!
//! Batching: the bridge reads the bus in batches and puts the events of one batch that share a
//! subject into as few messages as it can (never waiting for more events, so batching adds no
//! latency). NATS keeps one publisher's messages in order for each subscriber, so a consumer of
//! several subjects gets every subject's events in order; across subjects of one batch, events
//! are grouped by subject.
//!
//! **Gaps the bridge publishes.** Besides the holes, the bridge publishes `Gap` events (kind
//! `gap`, on the `gap` subject of the instrument concerned) so that a consumer that only
//! records sees them too:
//!
//! - [`GapReason::BridgeDrop`](tickwire_bus::event::GapReason::BridgeDrop): its queue was full;
//!   `expected_seq..received_seq` are the sequences that were dropped on the subject of the
//!   instrument whose kind byte ([`EventKind`]) the gap's header carries in `venue_seq`.
//! - [`GapReason::BusOverrun`](tickwire_bus::event::GapReason::BusOverrun): the appliance lapped
//!   the bridge on the bus; venue and symbol `*` (`venue_id` 65535, `instrument_id`
//!   4294967295), `received_seq - expected_seq` events lost, counted in the bridge's own
//!   numbering of the bus's events.
//!
//! # Directory service
//!
//! A late subscriber learns what `venue_id`/`instrument_id` name by request/reply (no JetStream
//! needed): it sends a request to `tickwire.<appliance>.directory` whose payload is empty or a
//! u32 `first` entry index; the bridge answers with the entries from `first` on, as many as fit
//! [`DIRECTORY_ENTRIES_PER_REPLY`]:
//!
//! | offset | type | field |
//! |---:|---|---|
//! | 0 | `[u8; 4]` | magic `TWD1` |
//! | 4 | u32 | total: entries the directory holds |
//! | 8 | u32 | first: the index of the first entry in this reply |
//! | 12 | u32 | count: entries in this reply |
//! | 16 | u64 | appliance epoch |
//! | 24 | u64 | stream |
//! | 32 | `count x [u8; 256]` | the entries, each as the bus file's directory entry (`tickwire_bus::layout`) |
//!
//! A consumer asks again with `first + count` until it has `total`. The subject has three tokens,
//! so no event subscription (five tokens) takes it, except `tickwire.>`, whose reader skips it.

use tickwire_bus::event::{Event, EventKind};
use tickwire_bus::DirectoryEntry;

/// The first token of every subject.
pub const ROOT: &str = "tickwire";
/// The version of the message format.
pub const FORMAT_VERSION: u8 = 1;
/// The two bytes every event message starts with.
pub const MAGIC: [u8; 2] = *b"TW";
/// Bytes before the events.
pub const HEADER_BYTES: usize = 32;
/// Bytes per event.
pub const EVENT_BYTES: usize = 64;
/// The most events one message carries: 4 KiB of events, so one message is one small write and
/// a lost message costs little.
pub const MAX_EVENTS_PER_MESSAGE: usize = 64;
/// The four bytes a directory reply starts with.
pub const DIRECTORY_MAGIC: [u8; 4] = *b"TWD1";
/// Bytes before a directory reply's entries.
pub const DIRECTORY_HEADER_BYTES: usize = 32;
/// Bytes per directory entry.
pub const DIRECTORY_ENTRY_BYTES: usize = 256;
/// The most entries one reply carries (256 KiB: under the server's default 1 MiB payload limit).
pub const DIRECTORY_ENTRIES_PER_REPLY: usize = 1024;

/// Whether a byte stands for itself in a subject token.
fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// A name as a subject token (see the module doc).
pub fn escape(name: &str) -> String {
    if name.is_empty() {
        return "%".to_owned();
    }
    let mut token = String::with_capacity(name.len());
    for &byte in name.as_bytes() {
        if plain(byte) {
            token.push(char::from(byte));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            token.push('%');
            token.push(char::from(HEX[usize::from(byte >> 4)]));
            token.push(char::from(HEX[usize::from(byte & 0x0F)]));
        }
    }
    token
}

/// The name a subject token stands for; `None` when the token is not one [`escape`] makes.
pub fn unescape(token: &str) -> Option<String> {
    if token == "%" {
        return Some(String::new());
    }
    if token.is_empty() {
        return None;
    }
    let bytes = token.as_bytes();
    let mut name = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if plain(byte) {
            name.push(byte);
            at += 1;
        } else if byte == b'%' && at + 2 < bytes.len() {
            let hex = |digit: u8| match digit {
                b'0'..=b'9' => Some(digit - b'0'),
                b'A'..=b'F' => Some(digit - b'A' + 10),
                _ => None,
            };
            let value = hex(bytes[at + 1])? << 4 | hex(bytes[at + 2])?;
            // An escaped plain byte is not what `escape` writes: refused, so that one name has
            // one token.
            if plain(value) {
                return None;
            }
            name.push(value);
            at += 3;
        } else {
            return None;
        }
    }
    String::from_utf8(name).ok()
}

/// `tickwire.<appliance>.<venue>.<symbol>.<kind>`, every name escaped.
pub fn event_subject(appliance: &str, venue: &str, symbol: &str, kind: EventKind) -> String {
    format!(
        "{ROOT}.{}.{}.{}.{}",
        escape(appliance),
        escape(venue),
        escape(symbol),
        kind.name()
    )
}

/// `tickwire.<appliance>.directory`.
pub fn directory_subject(appliance: &str) -> String {
    format!("{ROOT}.{}.directory", escape(appliance))
}

/// An event subject read back: the names unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSubject {
    pub appliance: String,
    pub venue: String,
    pub symbol: String,
    pub kind: EventKind,
}

/// Reads an event subject; `None` for any other subject (a directory request, a stranger's).
pub fn parse_event_subject(subject: &str) -> Option<EventSubject> {
    let mut tokens = subject.split('.');
    let (root, appliance, venue, symbol, kind) = (
        tokens.next()?,
        tokens.next()?,
        tokens.next()?,
        tokens.next()?,
        tokens.next()?,
    );
    if root != ROOT || tokens.next().is_some() {
        return None;
    }
    Some(EventSubject {
        appliance: unescape(appliance)?,
        venue: unescape(venue)?,
        symbol: unescape(symbol)?,
        kind: EventKind::from_name(kind)?,
    })
}

/// An event message's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageHeader {
    pub appliance_epoch: u64,
    pub stream: u64,
    /// The sequence of the message's first event on its subject.
    pub sequence: u64,
}

/// Why a message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("shorter than the {HEADER_BYTES}-byte header")]
    Short,
    #[error("no TW magic")]
    Magic,
    #[error("format version {0}; this reader knows {FORMAT_VERSION}")]
    Version(u8),
    #[error("{0} events: a message holds 1 to {MAX_EVENTS_PER_MESSAGE}")]
    Count(usize),
    #[error("{actual} bytes where the count says {expected}")]
    Length { expected: usize, actual: usize },
    #[error("event {0} has a kind byte no kind has")]
    Kind(usize),
    #[error("a directory reply: no TWD1 magic, or a length its count does not give")]
    Directory,
    #[error("a zero sequence or stream")]
    Zero,
}

/// Builds one message: the header, then `events` (1 to [`MAX_EVENTS_PER_MESSAGE`]; the caller
/// keeps to that, and anything past it is not written).
pub fn encode_message(header: MessageHeader, events: &[Event], out: &mut Vec<u8>) {
    let events = &events[..events.len().min(MAX_EVENTS_PER_MESSAGE)];
    out.clear();
    out.reserve(HEADER_BYTES + EVENT_BYTES * events.len());
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(0);
    out.extend_from_slice(&(events.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&header.appliance_epoch.to_le_bytes());
    out.extend_from_slice(&header.stream.to_le_bytes());
    out.extend_from_slice(&header.sequence.to_le_bytes());
    for event in events {
        for word in event.to_words() {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
}

/// Reads a message: its header, and its events appended to `events`. Nothing is appended when
/// the message is refused.
pub fn decode_message(bytes: &[u8], events: &mut Vec<Event>) -> Result<MessageHeader, WireError> {
    if bytes.len() < HEADER_BYTES {
        return Err(WireError::Short);
    }
    if bytes[0..2] != MAGIC {
        return Err(WireError::Magic);
    }
    if bytes[2] != FORMAT_VERSION {
        return Err(WireError::Version(bytes[2]));
    }
    let count = usize::from(u16::from_le_bytes([bytes[4], bytes[5]]));
    if !(1..=MAX_EVENTS_PER_MESSAGE).contains(&count) {
        return Err(WireError::Count(count));
    }
    let expected = HEADER_BYTES + EVENT_BYTES * count;
    if bytes.len() != expected {
        return Err(WireError::Length {
            expected,
            actual: bytes.len(),
        });
    }
    let header = MessageHeader {
        appliance_epoch: u64_at(bytes, 8),
        stream: u64_at(bytes, 16),
        sequence: u64_at(bytes, 24),
    };
    if header.stream == 0 || header.sequence == 0 {
        return Err(WireError::Zero);
    }
    let start = events.len();
    for (index, chunk) in bytes[HEADER_BYTES..].chunks_exact(EVENT_BYTES).enumerate() {
        let mut words = [0u64; 8];
        for (word, at) in words.iter_mut().zip((0..EVENT_BYTES).step_by(8)) {
            *word = u64_at(chunk, at);
        }
        match Event::from_words(words) {
            Some(event) => events.push(event),
            None => {
                events.truncate(start);
                return Err(WireError::Kind(index));
            }
        }
    }
    Ok(header)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// A directory request's payload: the index of the first entry wanted.
pub fn encode_directory_request(first: u32) -> [u8; 4] {
    first.to_le_bytes()
}

/// The first entry a request wants: 0 for an empty payload, `None` for a malformed one.
pub fn decode_directory_request(payload: &[u8]) -> Option<u32> {
    match payload.len() {
        0 => Some(0),
        4 => Some(u32_at(payload, 0)),
        _ => None,
    }
}

/// A directory reply read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryReply {
    pub total: u32,
    pub first: u32,
    pub appliance_epoch: u64,
    pub stream: u64,
    pub entries: Vec<DirectoryEntry>,
}

/// The reply to a request for the entries from `first` on: at most
/// [`DIRECTORY_ENTRIES_PER_REPLY`] of them.
pub fn encode_directory_reply(
    entries: &[DirectoryEntry],
    first: u32,
    appliance_epoch: u64,
    stream: u64,
) -> Vec<u8> {
    let start = (first as usize).min(entries.len());
    let part = &entries[start..entries.len().min(start + DIRECTORY_ENTRIES_PER_REPLY)];
    let mut out = Vec::with_capacity(DIRECTORY_HEADER_BYTES + DIRECTORY_ENTRY_BYTES * part.len());
    out.extend_from_slice(&DIRECTORY_MAGIC);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(start as u32).to_le_bytes());
    out.extend_from_slice(&(part.len() as u32).to_le_bytes());
    out.extend_from_slice(&appliance_epoch.to_le_bytes());
    out.extend_from_slice(&stream.to_le_bytes());
    for entry in part {
        out.extend_from_slice(&entry.to_bytes().0);
    }
    out
}

pub fn decode_directory_reply(bytes: &[u8]) -> Result<DirectoryReply, WireError> {
    if bytes.len() < DIRECTORY_HEADER_BYTES || bytes[0..4] != DIRECTORY_MAGIC {
        return Err(WireError::Directory);
    }
    let count = u32_at(bytes, 12) as usize;
    if count > DIRECTORY_ENTRIES_PER_REPLY
        || bytes.len() != DIRECTORY_HEADER_BYTES + DIRECTORY_ENTRY_BYTES * count
    {
        return Err(WireError::Directory);
    }
    let entries = bytes[DIRECTORY_HEADER_BYTES..]
        .chunks_exact(DIRECTORY_ENTRY_BYTES)
        .map(|chunk| {
            let mut entry = [0u8; DIRECTORY_ENTRY_BYTES];
            entry.copy_from_slice(chunk);
            DirectoryEntry::from_bytes(&entry)
        })
        .collect();
    Ok(DirectoryReply {
        total: u32_at(bytes, 4),
        first: u32_at(bytes, 8),
        appliance_epoch: u64_at(bytes, 16),
        stream: u64_at(bytes, 24),
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwire_bus::event::{Body, EventHeader, Gap, GapReason, Side, Trade};
    use tickwire_bus::fixed::Fixed;

    fn trade(n: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: n,
                recv_ts_ns: n + 1,
                venue_seq: n + 2,
                instrument_id: 7,
                venue_id: 1,
                kind: EventKind::Trade,
                flags: 1,
            },
            Body::Trade(Trade::new(Fixed(n as i64), Fixed(3), n, Side::Ask)),
        )
    }

    #[test]
    fn names_that_subjects_cannot_carry_are_escaped_one_to_one() {
        for (name, token) in [
            ("BTCUSDT", "BTCUSDT"),
            ("BTC-PERPETUAL", "BTC-PERPETUAL"),
            ("ES.FUT", "ES%2EFUT"),
            ("a*b>c", "a%2Ab%3Ec"),
            ("two words\t", "two%20words%09"),
            ("100%", "100%25"),
            ("$SYS", "%24SYS"),
            ("*", "%2A"),
            ("", "%"),
            ("é", "%C3%A9"),
        ] {
            assert_eq!(escape(name), token, "{name:?}");
            assert_eq!(unescape(token).as_deref(), Some(name), "{token:?}");
            assert!(!token.contains(['.', '*', '>', ' ', '\t', '$']), "{token}");
        }
        // Tokens `escape` never makes are refused rather than read two ways.
        for token in ["", "%4", "%2", "%41", "%zz", "a.b", "%2a", "a%"] {
            assert_eq!(unescape(token), None, "{token:?}");
        }
    }

    #[test]
    fn subjects_carry_the_four_names_and_read_back() {
        let subject = event_subject("ny4 a", "binance-usdm", "ES.H5", EventKind::BookLevel);
        assert_eq!(subject, "tickwire.ny4%20a.binance-usdm.ES%2EH5.level");
        assert_eq!(
            parse_event_subject(&subject),
            Some(EventSubject {
                appliance: "ny4 a".into(),
                venue: "binance-usdm".into(),
                symbol: "ES.H5".into(),
                kind: EventKind::BookLevel,
            })
        );
        assert_eq!(directory_subject("ny4"), "tickwire.ny4.directory");
        assert_eq!(parse_event_subject("tickwire.ny4.directory"), None);
        assert_eq!(parse_event_subject("tickwire.a.b.c.nokind"), None);
        assert_eq!(parse_event_subject("tickwire.a.b.c.trade.more"), None);
        assert_eq!(parse_event_subject("other.a.b.c.trade"), None);
    }

    #[test]
    fn a_message_is_the_header_then_the_bus_bytes_and_reads_back() {
        let events: Vec<Event> = (0..3).map(trade).collect();
        let header = MessageHeader {
            appliance_epoch: 0x0102_0304_0506_0708,
            stream: 9,
            sequence: 41,
        };
        let mut bytes = Vec::new();
        encode_message(header, &events, &mut bytes);
        assert_eq!(bytes.len(), 32 + 3 * 64);
        assert_eq!(&bytes[0..8], &[b'T', b'W', 1, 0, 3, 0, 0, 0]);
        assert_eq!(&bytes[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[24..32], &41u64.to_le_bytes());
        // The event bytes are the bus's: exchange_ts_ns first, the kind byte at 30.
        assert_eq!(&bytes[32..40], &0u64.to_le_bytes());
        assert_eq!(bytes[32 + 30], EventKind::Trade as u8);
        let mut read = Vec::new();
        assert_eq!(decode_message(&bytes, &mut read), Ok(header));
        assert_eq!(read, events);
    }

    #[test]
    fn damaged_messages_are_refused_and_append_nothing() {
        let mut bytes = Vec::new();
        let header = MessageHeader {
            appliance_epoch: 1,
            stream: 2,
            sequence: 3,
        };
        encode_message(header, &[trade(1), trade(2)], &mut bytes);
        let mut read = Vec::new();
        let refused = |edit: &dyn Fn(&mut Vec<u8>), read: &mut Vec<Event>| {
            let mut copy = bytes.clone();
            edit(&mut copy);
            decode_message(&copy, read).unwrap_err()
        };
        assert_eq!(refused(&|b| b.truncate(10), &mut read), WireError::Short);
        assert_eq!(refused(&|b| b[0] = b'X', &mut read), WireError::Magic);
        assert_eq!(refused(&|b| b[2] = 2, &mut read), WireError::Version(2));
        assert_eq!(refused(&|b| b[4] = 0, &mut read), WireError::Count(0));
        assert_eq!(
            refused(&|b| b.pop().map(drop).unwrap_or(()), &mut read),
            WireError::Length {
                expected: 160,
                actual: 159
            }
        );
        assert_eq!(refused(&|b| b[96 + 30] = 0, &mut read), WireError::Kind(1));
        assert_eq!(refused(&|b| b[24] = 0, &mut read), WireError::Zero);
        assert!(read.is_empty());
        // Any bytes at all: refused or read, never a panic.
        for length in 0..200 {
            let noise: Vec<u8> = (0..length).map(|i| (i * 37 + length) as u8).collect();
            let _ = decode_message(&noise, &mut read);
            let _ = decode_directory_reply(&noise);
            let _ = decode_directory_request(&noise);
        }
    }

    #[test]
    fn a_directory_reply_pages_the_entries() {
        let entries: Vec<DirectoryEntry> = (0..1500)
            .map(|i| DirectoryEntry {
                instrument_id: i,
                venue_id: 2,
                venue: "thalex".into(),
                symbol: format!("S{i}"),
                venue_symbol: format!("s{i}"),
            })
            .collect();
        let first = decode_directory_reply(&encode_directory_reply(&entries, 0, 5, 6)).unwrap();
        assert_eq!(
            (first.total, first.first, first.entries.len()),
            (1500, 0, 1024)
        );
        assert_eq!((first.appliance_epoch, first.stream), (5, 6));
        let rest = decode_directory_reply(&encode_directory_reply(&entries, 1024, 5, 6)).unwrap();
        assert_eq!((rest.first, rest.entries.len()), (1024, 476));
        assert_eq!(rest.entries[0], entries[1024]);
        assert_eq!(
            decode_directory_request(&encode_directory_request(1024)),
            Some(1024)
        );
        assert_eq!(decode_directory_request(&[]), Some(0));
        assert_eq!(decode_directory_request(&[1, 2]), None);
        let past = decode_directory_reply(&encode_directory_reply(&entries, 9999, 5, 6)).unwrap();
        assert_eq!((past.first, past.entries.len()), (1500, 0));
    }

    #[test]
    fn the_gap_reasons_the_bridge_writes_read_back() {
        for reason in [GapReason::BridgeDrop, GapReason::BusOverrun] {
            assert_eq!(GapReason::from_u8(reason as u8), reason);
            assert_eq!(Gap::new(reason, 1, 2).reason(), reason);
        }
    }

    /// The fuzz targets' seeds (fuzz/seeds/nats_message/ and fuzz/seeds/nats_directory_reply/):
    /// messages and directory replies as the bridge writes them. Under `TICKWIRE_WRITE_SEEDS=1`
    /// this writes them; otherwise it checks that every committed seed still decodes, so the
    /// fuzzer starts from inputs that reach past the header checks.
    #[test]
    fn fuzz_seeds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
        let header = MessageHeader {
            appliance_epoch: 3,
            stream: 9,
            sequence: 41,
        };
        let gap = Event::new(
            EventHeader {
                exchange_ts_ns: 5,
                recv_ts_ns: 6,
                venue_seq: 0,
                instrument_id: 7,
                venue_id: 1,
                kind: EventKind::Gap,
                flags: 0,
            },
            Body::Gap(Gap::new(GapReason::BridgeDrop, 10, 98)),
        );
        let mut messages = Vec::new();
        for (name, events) in [
            ("one_trade", vec![trade(1)]),
            ("trades", (0..5).map(trade).collect::<Vec<_>>()),
            ("gap", vec![gap]),
            (
                "full",
                (0..MAX_EVENTS_PER_MESSAGE as u64).map(trade).collect(),
            ),
        ] {
            let mut bytes = Vec::new();
            encode_message(header, &events, &mut bytes);
            messages.push((name, bytes));
        }
        let entries: Vec<DirectoryEntry> = (0..3)
            .map(|i| DirectoryEntry {
                instrument_id: i,
                venue_id: 2,
                venue: "thalex".into(),
                symbol: format!("BTC-{i}"),
                venue_symbol: format!("btc-{i}"),
            })
            .collect();
        let replies = [
            ("three", encode_directory_reply(&entries, 0, 5, 6)),
            ("from_second", encode_directory_reply(&entries, 1, 5, 6)),
            ("empty", encode_directory_reply(&[], 0, 5, 6)),
        ];
        let write = std::env::var_os("TICKWIRE_WRITE_SEEDS").is_some();
        for (folder, seeds) in [
            ("nats_message", &messages[..]),
            ("nats_directory_reply", &replies[..]),
        ] {
            let dir = root.join(folder);
            if write {
                std::fs::create_dir_all(&dir).expect("make the seeds folder");
                for (name, bytes) in seeds {
                    std::fs::write(dir.join(name), bytes).expect("write a seed");
                }
            }
            let Ok(read) = std::fs::read_dir(&dir) else {
                println!(
                    "SKIPPED: {} is not here (a checkout without fuzz/)",
                    dir.display()
                );
                continue;
            };
            let mut count = 0;
            for file in read {
                let bytes = std::fs::read(file.expect("an entry").path()).expect("a seed");
                if folder == "nats_message" {
                    assert!(decode_message(&bytes, &mut Vec::new()).is_ok());
                } else {
                    assert!(decode_directory_reply(&bytes).is_ok());
                }
                count += 1;
            }
            assert_eq!(count, seeds.len(), "{folder}: the committed seeds");
        }
    }
}
