//! A recorded Thalex session (`tickwire record --venue` against Thalex or this simulator)
//! replayed instead of the synthetic market: `tickwire sim --venue thalex --source FILE`.
//!
//! The recording holds one message a line, `<receive time, ns since the Unix epoch> <JSON>`
//! (the time may be left out), gzip or plain, told apart by the gzip magic bytes. Its
//! notifications (`{"channel_name":C,...}`) are kept byte for byte, with the channel each names
//! and its time after the first; the answers to the recorder's own requests (`{"id":..}`),
//! blank lines and lines that are not a JSON notification are passed over and counted.
//!
//! A connection replays the recording from its start, from its first subscription to a
//! recorded channel on: each notification of a channel it subscribed goes out as recorded, at
//! the recorded pace times `speed` or as fast as the client reads; notifications of channels it
//! did not subscribe are passed over. `public/subscribe` accepts the channels the recording
//! holds (and `system`); the recording's `system` notifications go to a connection subscribed
//! to `system`. The replay ends with the recording; the connection stays open.
//!
//! **Invariant:** a replayed notification is the recorded line's bytes, never re-serialised, so
//! recording a replay gives the same notifications in the same order.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// The first bytes of every gzip member (RFC 1952, section 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// One recorded notification.
struct Recorded {
    /// ns after the recording's first notification.
    offset_ns: u64,
    /// Index into [`Recording::channels`].
    channel: usize,
    text: String,
}

/// A recording, loaded whole (a replay is for tests and demos: minutes of a venue, not days).
pub struct Recording {
    messages: Vec<Recorded>,
    /// The channel names, sorted.
    channels: Vec<String>,
    /// Lines passed over: answers to requests, blank lines, anything not a notification.
    passed_over: u64,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("notifications", &self.messages.len())
            .field("channels", &self.channels.len())
            .field("passed_over", &self.passed_over)
            .finish()
    }
}

/// How fast a replay goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReplayPace {
    /// The recorded pace, times this factor (2.0: twice as fast).
    Recorded { speed: f64 },
    /// Every notification as soon as the client takes it.
    AsFastAsPossible,
}

/// A recording and how fast to replay it (`ThalexOptions::replay`).
#[derive(Clone, Debug)]
pub struct Replay {
    pub recording: std::sync::Arc<Recording>,
    pub pace: ReplayPace,
}

#[derive(serde::Deserialize)]
struct Envelope {
    channel_name: Option<String>,
}

impl Recording {
    /// Reads a recording, gzip or plain.
    pub fn open(path: &Path) -> io::Result<Recording> {
        let named =
            |error: io::Error| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
        let file = File::open(path).map_err(named)?;
        let mut buffered = BufReader::new(file);
        let is_gzip = buffered.fill_buf().map_err(named)?.starts_with(&GZIP_MAGIC);
        let reader: Box<dyn Read> = if is_gzip {
            Box::new(flate2::read::MultiGzDecoder::new(buffered))
        } else {
            Box::new(buffered)
        };
        Recording::read(BufReader::new(reader)).map_err(named)
    }

    /// Reads a recording's lines.
    pub fn read(reader: impl BufRead) -> io::Result<Recording> {
        let mut messages = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut by_name = std::collections::HashMap::new();
        let mut passed_over = 0;
        let mut first_ns = None;
        let mut last_offset = 0;
        for line in reader.lines() {
            let line = line?;
            let line = line.trim_end_matches('\r');
            let (time, text) = match line.split_once(' ') {
                Some((time, text))
                    if !time.is_empty() && time.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    (time.parse::<u64>().ok(), text)
                }
                _ => (None, line),
            };
            let channel = serde_json::from_str::<Envelope>(text)
                .ok()
                .and_then(|envelope| envelope.channel_name);
            let Some(channel) = channel else {
                passed_over += 1;
                continue;
            };
            // A line without a time keeps the previous one's.
            let offset_ns = match (time, first_ns) {
                (Some(ns), Some(first)) => ns.saturating_sub(first).max(last_offset),
                (Some(ns), None) => {
                    first_ns = Some(ns);
                    0
                }
                (None, _) => last_offset,
            };
            last_offset = offset_ns;
            let index = *by_name.entry(channel.clone()).or_insert_with(|| {
                names.push(channel);
                names.len() - 1
            });
            messages.push(Recorded {
                offset_ns,
                channel: index,
                text: text.to_owned(),
            });
        }
        // Channels sorted, messages renumbered to match.
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_by(|&a, &b| names[a].cmp(&names[b]));
        let mut position = vec![0; names.len()];
        for (sorted, &original) in order.iter().enumerate() {
            position[original] = sorted;
        }
        for message in &mut messages {
            message.channel = position[message.channel];
        }
        let channels = order
            .into_iter()
            .map(|index| names[index].clone())
            .collect();
        Ok(Recording {
            messages,
            channels,
            passed_over,
        })
    }

    /// The recorded notifications.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The channels the recording holds notifications of, sorted.
    pub fn channels(&self) -> &[String] {
        &self.channels
    }

    /// Lines that were no notification (answers, blank lines, other text).
    pub fn passed_over(&self) -> u64 {
        self.passed_over
    }

    fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels
            .binary_search_by(|known| known.as_str().cmp(name))
            .ok()
    }
}

/// One connection's place in the replay.
#[derive(Default)]
pub(super) struct ReplayCursor {
    /// Channels (indexes into the recording's) the connection subscribed.
    subscribed: BTreeSet<usize>,
    /// The next recorded notification to look at.
    position: usize,
    /// When the connection's replay began: its first subscription to a recorded channel.
    start: Option<Instant>,
}

impl ReplayCursor {
    /// Subscribes `name` if the recording holds it; whether it does.
    pub(super) fn subscribe(&mut self, recording: &Recording, name: &str) -> bool {
        let Some(index) = recording.channel_index(name) else {
            return false;
        };
        self.subscribed.insert(index);
        self.start.get_or_insert_with(Instant::now);
        true
    }

    pub(super) fn unsubscribe(&mut self, recording: &Recording, name: &str) -> bool {
        recording
            .channel_index(name)
            .is_some_and(|index| self.subscribed.remove(&index))
    }

    /// Whether anything is left to send.
    pub(super) fn active(&self, recording: &Recording) -> bool {
        !self.subscribed.is_empty() && self.position < recording.messages.len()
    }

    /// The next notification to send now, or `Err(due)`: when the next one is due (`None`:
    /// nothing is left).
    pub(super) fn next<'r>(
        &mut self,
        recording: &'r Recording,
        pace: ReplayPace,
        now: Instant,
    ) -> Result<&'r str, Option<Instant>> {
        let Some(start) = self.start else {
            return Err(None);
        };
        while let Some(message) = recording.messages.get(self.position) {
            if !self.subscribed.contains(&message.channel) {
                self.position += 1;
                continue;
            }
            if let ReplayPace::Recorded { speed } = pace {
                let after = Duration::from_secs_f64(message.offset_ns as f64 / 1e9 / speed);
                let due = start.checked_add(after).unwrap_or(now);
                if due > now {
                    return Err(Some(due));
                }
            }
            self.position += 1;
            return Ok(&message.text);
        }
        Err(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = "\
1000000000 {\"id\":1,\"result\":[\"ticker.X.100ms\",\"book.X.none.10.raw\",\"system\"]}
1000000000 {\"channel_name\":\"book.X.none.10.raw\",\"notification\":{\"time\":1},\"snapshot\":true}
1500000000 {\"channel_name\":\"ticker.X.100ms\",\"notification\":{\"mark_price\":1}}

{\"channel_name\":\"ticker.X.100ms\",\"notification\":{\"mark_price\":2}}
3000000000 {\"channel_name\":\"book.X.none.10.raw\",\"notification\":{\"time\":2}}
";

    #[test]
    fn notifications_are_kept_as_recorded_and_answers_passed_over() {
        let recording = Recording::read(LINES.as_bytes()).unwrap();
        assert_eq!(recording.len(), 4);
        assert_eq!(recording.passed_over(), 2, "the answer and the blank line");
        assert_eq!(
            recording.channels(),
            ["book.X.none.10.raw", "ticker.X.100ms"]
        );
        let offsets: Vec<u64> = recording.messages.iter().map(|m| m.offset_ns).collect();
        assert_eq!(offsets, [0, 500_000_000, 500_000_000, 2_000_000_000]);
        assert!(recording.messages[0].text.ends_with(r#""snapshot":true}"#));
    }

    #[test]
    fn a_cursor_sends_what_its_connection_subscribed_at_the_pace_asked() {
        let recording = Recording::read(LINES.as_bytes()).unwrap();
        let mut cursor = ReplayCursor::default();
        assert!(!cursor.subscribe(&recording, "ticker.Y.100ms"));
        assert!(cursor.subscribe(&recording, "ticker.X.100ms"));
        let now = Instant::now();
        let pace = ReplayPace::AsFastAsPossible;
        let sent: Vec<&str> =
            std::iter::from_fn(|| cursor.next(&recording, pace, now).ok()).collect();
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|text| text.contains("ticker.X.100ms")));
        assert!(!cursor.active(&recording));
        // At the recorded pace, the second notification waits for its time.
        let mut cursor = ReplayCursor::default();
        cursor.subscribe(&recording, "book.X.none.10.raw");
        let start = cursor.start.unwrap();
        let pace = ReplayPace::Recorded { speed: 2.0 };
        assert!(cursor.next(&recording, pace, start).is_ok());
        assert_eq!(
            cursor.next(&recording, pace, start),
            Err(Some(start + Duration::from_secs(1)))
        );
        assert!(cursor
            .next(&recording, pace, start + Duration::from_secs(1))
            .is_ok());
        assert_eq!(cursor.next(&recording, pace, start), Err(None));
    }
}
