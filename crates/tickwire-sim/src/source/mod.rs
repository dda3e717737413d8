//! Where the simulator's messages come from: a recorded capture replayed in order, or a synthetic
//! market generated on the fly. A source also keeps the order book its depth messages describe, so
//! the REST snapshot the simulator serves is consistent with the diffs already sent.
//!
//! - [`CaptureSource`] replays a recorded file (`<recv ns> <combined JSON>` per line, gzip or
//!   plain) byte for byte and builds its depth book from the recorded diffs.
//! - [`SyntheticSource`] generates a deterministic random-walk Binance USD-M market for any number
//!   of symbols at any rate, with a full book behind its diffs and snapshots.
//! - [`VecSource`] hands out a fixed list, for tests.

mod capture;
mod depth;
mod synthetic;
mod text;

pub use capture::CaptureSource;
pub(crate) use synthetic::SplitMix64;
pub use synthetic::{SyntheticConfig, SyntheticSource, SYNTHETIC_EPOCH_MS};

/// Why a source could not be made. Once made, a source never fails: a bad capture line is counted
/// and skipped, and a read error ends the replay (see [`CaptureSource::read_error`]).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot open capture {path}: {source}")]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("synthetic source: `{field}` {reason}")]
    InvalidConfig { field: &'static str, reason: String },
}

/// One venue message, in the combined-stream form the venue sends on `/stream?streams=..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimMessage {
    /// The stream it belongs to, as a client subscribes to it (`btcusdt@bookTicker`): the symbol
    /// in lower case, then `@`, then the channel.
    pub stream: String,
    /// The whole combined-stream message, `{"stream":"..","data":{..}}`, byte for byte as the
    /// venue sent it (for a capture: exactly the recorded bytes).
    pub combined: Vec<u8>,
    /// Where the `data` object sits inside `combined`: what a raw-stream connection
    /// (`/ws/<stream>`) receives instead of the wrapper.
    pub data: std::ops::Range<usize>,
    /// When the message is due, ns after the source's first message (recorded pace at speed 1).
    pub offset_ns: u64,
    /// For latency stamping: the bookTicker update id `u`, the key a client can match a received
    /// quote with. `None` for other messages.
    pub stamp_key: Option<u64>,
}

impl SimMessage {
    /// The `data` object alone.
    pub fn data(&self) -> &[u8] {
        &self.combined[self.data.clone()]
    }
}

/// A stream of venue messages, pulled in order by the simulator's pacer.
pub trait Source: Send {
    /// The next message, or `None` when the source is exhausted.
    fn next_message(&mut self) -> Option<SimMessage>;

    /// The REST depth snapshot body for `symbol` (upper case, as the REST API takes it), as
    /// `GET /fapi/v1/depth?symbol=..&limit=..` returns it: `{"lastUpdateId":..,"E":..,"T":..,
    /// "bids":[[p,q],..],"asks":[..]}`, best levels first, at most `limit` per side. It reflects
    /// every depth message `next_message` has returned so far, and `lastUpdateId` is the `u` of
    /// the last of them. `None` when the source has no depth stream for the symbol (a synthetic
    /// source without depth channels returns its live book instead: see [`SyntheticSource`]).
    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>>;

    /// The symbols the venue lists (upper case), for `GET /fapi/v1/exchangeInfo`; `None` when
    /// the source does not know them (the endpoint then answers 404).
    fn listed_symbols(&self) -> Option<Vec<String>> {
        None
    }
}

/// A source over a fixed list of messages, for tests.
pub struct VecSource {
    messages: std::collections::VecDeque<SimMessage>,
}

impl VecSource {
    pub fn new(messages: Vec<SimMessage>) -> VecSource {
        VecSource {
            messages: messages.into(),
        }
    }
}

impl Source for VecSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        self.messages.pop_front()
    }

    fn depth_snapshot(&self, _symbol: &str, _limit: usize) -> Option<Vec<u8>> {
        None
    }
}
