//! `tickwire decode`'s side of a venue: how a capture file of its messages becomes the
//! appliance's normalized events, printed as JSON lines.
//!
//! A venue's [`Protocol::capture_decoder`](super::protocol::Protocol::capture_decoder) hands out
//! its [`CaptureDecoder`], implemented in the venue's own folder (`venue/<name>/capture.rs`); the
//! command reads the file's lines (plain or gzip, each optionally prefixed by its receive time)
//! and names no venue. [`FeedCapture`] is the decoder of a venue that decodes its captures
//! through its own `Feed`, [`print_feed`] the loop it shares with others that do so after a
//! first pass of their own, and [`json_summary`] the summary line of the JSON venues.

use super::feed::{EventSink, Feed, FeedCounters};
use crate::event::json as event_json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The prefix of a binary WebSocket message that `tickwire record --venue` keeps as a line: the
/// frame's bytes follow in standard base64.
pub const BINARY_PREFIX: &str = "base64:";

/// Each non-blank line of the capture, in order, as (line number from 1, receive time in ns (0
/// when the line has none), message); returns the lines read. Given by the command, which
/// reads plain and gzip files.
pub type Lines<'a> = &'a dyn Fn(&mut OnMessage<'_>) -> anyhow::Result<u64>;

/// What [`Lines`] calls per message: (line number, receive time, message).
pub type OnMessage<'a> = dyn FnMut(u64, u64, &[u8]) -> std::io::Result<()> + 'a;

/// One capture to decode and where its output goes.
pub struct Capture<'a> {
    /// The file, for decoders that read it whole (DBN) and for messages.
    pub path: &'a Path,
    /// `--dbn-version`: set only for a decoder whose [`CaptureDecoder::takes_dbn_version`].
    pub dbn_version: Option<u8>,
    /// The file's messages, line by line; may be run more than once (a first pass).
    pub lines: Lines<'a>,
    /// The events, one JSON object a line (stdout).
    pub out: &'a mut dyn Write,
    /// Notes on what was skipped, as they happen (stderr).
    pub notes: &'a mut dyn Write,
}

/// A venue's `tickwire decode` runner.
pub trait CaptureDecoder: Sync {
    /// The `--venue` name, also the venue label printed on every event line.
    fn label(&self) -> &'static str;

    /// Whether `--dbn-version N` (a DBN fragment's version) applies to this venue's files.
    fn takes_dbn_version(&self) -> bool {
        false
    }

    /// Decodes the whole capture; returns the summary line (stderr). An error ends the decode
    /// (exit 1) after the events decoded before it were written and flushed.
    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String>;
}

/// A venue's feed set up for a capture, with the symbols its instrument ids (from 0) stand for.
pub struct CaptureFeed {
    pub feed: Box<dyn Feed>,
    pub counters: FeedCounters,
    pub symbols: Vec<String>,
}

/// The decoder of a venue whose captures go through its own feed: a first pass collects the
/// streams the file holds (`stream`), `feed` builds the feed of those streams, then every
/// message goes through it and every event it writes is printed with the line's receive time.
pub struct FeedCapture {
    pub label: &'static str,
    /// The stream a captured message belongs to, `None` for a message of no stream (an
    /// answer, a pong).
    pub stream: fn(&[u8]) -> Option<String>,
    /// The feed of the streams found, its instruments numbered from 0 in `symbols`' order.
    pub feed: fn(&[String]) -> CaptureFeed,
}

impl CaptureDecoder for FeedCapture {
    fn label(&self) -> &'static str {
        self.label
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        let mut names: Vec<String> = Vec::new();
        (capture.lines)(&mut |_, _, message| {
            if let Some(name) = (self.stream)(message) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            Ok(())
        })?;
        let CaptureFeed {
            mut feed,
            counters,
            symbols,
        } = (self.feed)(&names);
        let printed = print_feed(feed.as_mut(), &symbols, self.label, capture)?;
        let kinds: Vec<String> = counters
            .messages()
            .map(|(kind, count)| format!("{}={count}", kind.name))
            .collect();
        Ok(format!(
            "decode: {} lines; {} messages ({}, unknown topic={}, duplicate={}); \
             {} events; {} malformed; books: {} synced, {} gaps, {} deletes of absent levels",
            printed.lines,
            printed.messages,
            kinds.join(", "),
            counters.unknown_symbol.get(),
            counters.duplicates.get(),
            printed.events,
            counters.malformed.get(),
            counters.book_syncs.get(),
            counters.book_gaps.get(),
            counters.book_refused.get(),
        ))
    }
}

/// What [`print_feed`] read and wrote.
pub struct Printed {
    pub lines: u64,
    pub messages: u64,
    pub events: u64,
}

/// Every message of the capture through `feed`, every event it writes printed under `label`
/// with its instrument's symbol (`?` for an id outside `symbols`); a malformed message's
/// sample goes to the notes, replies are dropped. Flushes the output.
pub fn print_feed(
    feed: &mut dyn Feed,
    symbols: &[String],
    label: &str,
    capture: &mut Capture<'_>,
) -> anyhow::Result<Printed> {
    let (mut producer, mut consumer) = crate::ring::spsc::ring(1 << 16);
    let mut lost = false;
    let mut buffer = Vec::with_capacity(1 << 16);
    let mut events = 0u64;
    let mut messages = 0u64;
    let out = &mut *capture.out;
    let notes = &mut *capture.notes;
    let lines = (capture.lines)(&mut |_, recv_ts_ns, message| {
        messages += 1;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_message(0, recv_ts_ns, message, &mut sink);
        sink.publish();
        if let Some(sample) = feed.take_malformed() {
            let _ = writeln!(notes, "decode: {}: {}", sample.error(), sample.text());
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
    Ok(Printed {
        lines,
        messages,
        events,
    })
}

/// The summary line of a JSON venue's decode: lines, messages by type (and unknown types),
/// events, skipped and malformed messages.
pub fn json_summary(
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

#[cfg(test)]
mod tests {
    use crate::config::VenueKind;

    /// `tickwire decode --venue X` finds one decoder: no two kinds' decoders share a label, and
    /// every label is a name a user can type (no space, not empty).
    #[test]
    fn every_capture_decoder_has_a_label_of_its_own() {
        let labels: Vec<&str> = VenueKind::ALL
            .into_iter()
            .filter_map(|kind| kind.protocol().capture_decoder())
            .map(|decoder| decoder.label())
            .collect();
        assert!(labels.len() >= 2, "{labels:?}");
        for (at, label) in labels.iter().enumerate() {
            assert!(!label.is_empty() && !label.contains(' '), "{label:?}");
            assert!(
                !labels[at + 1..].contains(label),
                "{label} twice: {labels:?}"
            );
        }
    }
}
