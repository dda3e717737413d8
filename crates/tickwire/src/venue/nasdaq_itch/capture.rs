//! `tickwire decode --venue nasdaq-itch FILE`: a packet capture or a raw ITCH file through the
//! live path's decoder ([`ItchDecoder`]: the arbiter, the parser, the L3 book), its events
//! printed as JSON lines.
//!
//! The file is told by its first bytes (gzip is decompressed first):
//!
//! - a classic pcap (µs or ns, either byte order) or a pcapng ([`pcap::Capture`]): every UDP
//!   datagram is a MoldUDP64 packet. A datagram to a multicast group is a line's: the first
//!   group:port seen is line A, the second line B (a third is counted and skipped). A datagram
//!   to a unicast address is a re-request server's answer, except a 20-byte request asking for
//!   messages (the client's own request, counted and skipped). Packets are taken in file order
//!   with the capture's timestamps as the arbiter's clock, so a loss on one line is filled by
//!   the other or by an answer, as live; what nothing fills is a `gap` (re-requests the arbiter
//!   would send are counted, not sent), and a gap still open at the end of the file is given up
//!   there. A packet whose sequence number is 0 (never a MoldUDP64 number: anonymised captures
//!   zero it) is decoded in file order without arbitration, its events' `seq` 0, and counted.
//!   The session's New York date, for exchange timestamps, is the first packet's capture time.
//! - anything else is a raw ITCH file in Nasdaq's format (each message prefixed by its 2-byte
//!   big-endian length), its messages numbered from 1; the date comes from a name that starts
//!   with `MMDDYYYY` (Nasdaq's daily files, `01302019.NASDAQ_ITCH50`), else events carry no
//!   exchange time.
//!
//! Every stock publishes (`symbols = ["*"]`), each printed under its ITCH symbol. A truncated
//! record ends the decode with an error after what came before it was printed.

use super::book::BookConfig;
use super::decoder::{new_york_date, DecoderConfig, ItchDecoder, Symbols};
use super::itch::{self, Date};
use super::mold::{self, ArbiterConfig, Line, Packet, PacketKind};
use super::pcap;
use crate::event::json as event_json;
use crate::event::Event;
use crate::venue::capture::{Capture, CaptureDecoder};
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

/// The `--venue` label.
pub const LABEL: &str = "nasdaq-itch";

/// Nasdaq ITCH's capture decoder (`Protocol::capture_decoder` of `nasdaq-itch`).
pub struct ItchCapture;

impl CaptureDecoder for ItchCapture {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        let mut input = open(capture.path)?;
        let mut run = Run::new(capture.out, capture.notes);
        let result = if is_capture(input.fill_buf()?) {
            // A capture is read whole: the pcap reader borrows its bytes.
            let mut bytes = Vec::new();
            input.read_to_end(&mut bytes).context("read")?;
            run.capture(&bytes)
        } else {
            // A raw file is streamed: a day's file is gigabytes.
            run.raw(&mut input, date_from_name(capture.path))
        };
        run.flush()?;
        let what = result?;
        Ok(run.summary(what))
    }
}

/// The book a decode holds: a day's live orders with room to spare (the appliance's own is set
/// in the venue file).
const DECODE_BOOK: BookConfig = BookConfig {
    max_orders: 4 << 20,
    max_levels: 1 << 20,
};

fn make_decoder(date: Option<Date>) -> ItchDecoder {
    ItchDecoder::new(DecoderConfig {
        venue_id: 0,
        instrument_base: 0,
        symbols: Symbols::All,
        arbiter: ArbiterConfig::default(),
        book: DECODE_BOOK,
        date,
    })
}

/// The file, through a gzip decoder when it starts with gzip's magic.
fn open(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    let mut file =
        BufReader::with_capacity(1 << 20, std::fs::File::open(path).context("cannot open")?);
    if file.fill_buf()?.starts_with(&[0x1f, 0x8b]) {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(file),
        )));
    }
    Ok(Box::new(file))
}

fn is_capture(bytes: &[u8]) -> bool {
    let Some(magic) = bytes.get(..4) else {
        return false;
    };
    let le = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    let be = u32::from_be_bytes([magic[0], magic[1], magic[2], magic[3]]);
    [0xa1b2_c3d4, 0xa1b2_3c4d, 0x0a0d_0d0a].contains(&le)
        || [0xa1b2_c3d4, 0xa1b2_3c4d].contains(&be)
}

/// The date of a name that starts with `MMDDYYYY`.
pub fn date_from_name(path: &Path) -> Option<Date> {
    let name = path.file_name()?.to_str()?;
    let digits = name.get(..8)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let date = Date {
        month: digits[..2].parse().ok()?,
        day: digits[2..4].parse().ok()?,
        year: digits[4..].parse().ok()?,
    };
    // A date `epoch_ns` refuses is no date.
    itch::epoch_ns(date, 0).map(|_| date)
}

struct Run<'a> {
    decoder: Option<ItchDecoder>,
    out: &'a mut dyn Write,
    notes: &'a mut dyn Write,
    events: Vec<Event>,
    buffer: Vec<u8>,
    printed: u64,
    datagrams: u64,
    unsequenced: u64,
    requests_seen: u64,
    requests_due: u64,
    other_groups: u64,
    notes_written: u64,
    capture_counters: pcap::CaptureCounters,
}

impl<'a> Run<'a> {
    fn new(out: &'a mut dyn Write, notes: &'a mut dyn Write) -> Run<'a> {
        Run {
            decoder: None,
            out,
            notes,
            events: Vec::with_capacity(1 << 16),
            buffer: Vec::with_capacity(1 << 20),
            printed: 0,
            datagrams: 0,
            unsequenced: 0,
            requests_seen: 0,
            requests_due: 0,
            other_groups: 0,
            notes_written: 0,
            capture_counters: pcap::CaptureCounters::default(),
        }
    }

    /// Prints the events collected, and the decoder's problem as a note (the first 20).
    fn print(&mut self) -> std::io::Result<()> {
        let Some(decoder) = &mut self.decoder else {
            return Ok(());
        };
        if let Some(problem) = decoder.take_problem() {
            self.notes_written += 1;
            if self.notes_written <= 20 {
                writeln!(self.notes, "decode: {problem}")?;
            }
        }
        self.buffer.clear();
        for event in &self.events {
            let symbol = decoder
                .symbol_of(event.header.instrument_id)
                .unwrap_or(b"?");
            event_json::write_event(&mut self.buffer, LABEL, symbol, event);
        }
        self.printed += self.events.len() as u64;
        self.events.clear();
        self.out.write_all(&self.buffer)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.print()?;
        self.out.flush()
    }

    fn capture(&mut self, bytes: &[u8]) -> anyhow::Result<&'static str> {
        let mut capture = pcap::Capture::new(bytes)?;
        let mut groups: [Option<([u8; 4], u16)>; 2] = [None, None];
        let mut last_ts = 0u64;
        for datagram in capture.by_ref() {
            let datagram = datagram?;
            self.datagrams += 1;
            last_ts = datagram.ts_ns;
            let line = if (224..=239).contains(&datagram.dst.0[0]) {
                match groups {
                    [Some(a), _] if a == datagram.dst => Line::A,
                    [_, Some(b)] if b == datagram.dst => Line::B,
                    [None, _] => {
                        groups[0] = Some(datagram.dst);
                        Line::A
                    }
                    [_, None] => {
                        groups[1] = Some(datagram.dst);
                        Line::B
                    }
                    _ => {
                        self.other_groups += 1;
                        continue;
                    }
                }
            } else {
                if is_request(datagram.payload) {
                    self.requests_seen += 1;
                    continue;
                }
                Line::Rerequest
            };
            let date = new_york_date(datagram.ts_ns).filter(|_| datagram.ts_ns > 0);
            let ts = datagram.ts_ns;
            let events = &mut self.events;
            let decoder = self.decoder.get_or_insert_with(|| make_decoder(date));
            match Packet::parse(datagram.payload) {
                Ok(packet) if packet.sequence == 0 && packet.kind() == PacketKind::Messages => {
                    self.unsequenced += 1;
                    for (_, message) in packet.messages() {
                        decoder.on_message(0, message, ts, &mut |event| events.push(event));
                    }
                }
                _ => {
                    // A refused packet is counted and noted by the decoder.
                    let _ = decoder.on_packet(line, datagram.payload, ts, ts, &mut |event| {
                        events.push(event)
                    });
                }
            }
            if decoder.poll(ts, &mut |event| events.push(event)).is_some() {
                self.requests_due += 1;
            }
            self.print()?;
        }
        self.capture_counters = capture.counters();
        // A gap still open at the end is given up: never a silent hole.
        if let Some(decoder) = &mut self.decoder {
            let events = &mut self.events;
            // Each poll a give-up time later gives up the next missing run.
            let step = ArbiterConfig::default().give_up_ns.saturating_add(1);
            let mut now = last_ts;
            for _ in 0..1 << 20 {
                if !decoder.arbiter().in_gap() {
                    break;
                }
                now = now.saturating_add(step);
                let _ = decoder.poll(now, &mut |event| events.push(event));
            }
            self.print()?;
        }
        Ok("packet capture")
    }

    fn raw(&mut self, input: &mut dyn BufRead, date: Option<Date>) -> anyhow::Result<&'static str> {
        let mut sequence = 0u64;
        let mut offset = 0u64;
        let mut message = [0u8; u16::MAX as usize];
        loop {
            let mut len = [0u8; 2];
            match read_full(input, &mut len)? {
                0 => break,
                2 => {}
                got => bail!(pcap::CaptureError::TruncatedMessage {
                    offset: offset as usize,
                    needed: 2,
                    left: got,
                }),
            }
            let len = usize::from(u16::from_be_bytes(len));
            let got = read_full(input, &mut message[..len])?;
            if got < len {
                bail!(pcap::CaptureError::TruncatedMessage {
                    offset: offset as usize,
                    needed: 2 + len,
                    left: 2 + got,
                });
            }
            offset += 2 + len as u64;
            sequence += 1;
            let events = &mut self.events;
            self.decoder
                .get_or_insert_with(|| make_decoder(date))
                .on_message(sequence, &message[..len], 0, &mut |event| {
                    events.push(event)
                });
            if self.events.len() >= 1 << 15 {
                self.print()?;
            }
        }
        self.print()?;
        Ok("raw ITCH")
    }

    fn summary(&self, what: &str) -> String {
        let counters = self
            .decoder
            .as_ref()
            .map(|d| d.counters())
            .unwrap_or_default();
        let arbiter = self
            .decoder
            .as_ref()
            .map(|d| d.arbiter().counters())
            .unwrap_or_default();
        let book = self
            .decoder
            .as_ref()
            .map(|d| d.book().counters())
            .unwrap_or_default();
        let types: Vec<String> = itch::MESSAGE_TYPES
            .iter()
            .zip(counters.by_type)
            .filter(|(_, count)| *count > 0)
            .map(|(kind, count)| format!("{}={count}", *kind as char))
            .collect();
        let capture = &self.capture_counters;
        format!(
            "decode: {what}; {} datagrams ({} not UDP/IPv4, {} other groups, {} requests, \
             {} unsequenced); {} messages ({}); {} events; {} malformed packets, {} malformed \
             messages; lines A/B/re-request delivered {}/{}/{}, duplicates {}/{}/{}; {} gaps \
             ({} messages), {} re-requests due, {} session changes, {} ends of session; \
             {} stocks; book: {} unknown refs, {} reused refs, {} unknown replaces, {} full",
            self.datagrams,
            capture.not_ethernet
                + capture.not_ipv4
                + capture.not_udp
                + capture.fragments
                + capture.short_frames,
            self.other_groups,
            self.requests_seen,
            self.unsequenced,
            counters.messages,
            types.join(", "),
            self.printed,
            counters.malformed_packets,
            counters.malformed_messages,
            arbiter.lines[0].delivered,
            arbiter.lines[1].delivered,
            arbiter.lines[2].delivered,
            arbiter.lines[0].duplicates,
            arbiter.lines[1].duplicates,
            arbiter.lines[2].duplicates,
            counters.gaps,
            arbiter.gap_messages,
            self.requests_due,
            counters.session_changes,
            counters.end_of_session,
            counters.stocks,
            book.unknown_ref,
            book.reused_ref,
            book.unknown_replace,
            counters.book_full,
        )
    }
}

/// A client's re-request: 20 bytes whose count asks for messages.
fn is_request(payload: &[u8]) -> bool {
    payload.len() == mold::HEADER_LEN
        && mold::Request::parse(payload)
            .is_ok_and(|request| request.count != 0 && request.count != mold::END_OF_SESSION)
}

/// Fills `buffer` from `input` as far as it goes; the bytes read (short only at the end).
fn read_full(input: &mut dyn BufRead, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buffer.len() {
        match input.read(&mut buffer[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(got)
}
