//! Nasdaq TotalView-ITCH 5.0 over MoldUDP64 as the control side sees it: a venue that is live
//! when datagrams flow, with no login and no subscription step. The file's `url` is line A
//! (`udp://group:port`), `[nasdaq_itch]` (`config.rs`) the rest; its one channel, `itch`,
//! carries every message; every stock is decoded and the `symbols` filter (`*` or a list) says
//! which publish.
//!
//! The network thread does not open UDP sockets yet: a nasdaq-itch venue file is checked in
//! full, and starting the appliance on it stops with a clear error ([`NOT_LIVE`]) rather than
//! trying a TCP connection; `tickwire decode --venue nasdaq-itch` reads its captures through the
//! same decoder the live path is to run (`decoder.rs`).

use super::config::{self, ItchConfig, CHANNEL, TABLE};
use crate::config::{Endpoint, Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, RecordMode, Response, RestUrl, SubscribeContext, TableCheck,
    Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};

/// The Nasdaq ITCH protocol.
pub struct NasdaqItch;

/// Why a nasdaq-itch venue cannot start.
pub const NOT_LIVE: &str = "the network thread does not join UDP multicast groups yet (issue \
                            37); `tickwire decode --venue nasdaq-itch` reads its captures";

fn not_live(venue: &VenueConfig) -> VenueError {
    VenueError::NotLive {
        venue: venue.name.clone(),
        kind: VenueKind::NasdaqItch.as_str(),
        why: NOT_LIVE,
    }
}

impl Protocol for NasdaqItch {
    /// `--venue nasdaq-itch` (`capture.rs`): pcap, pcapng and raw ITCH files.
    fn capture_decoder(&self) -> Option<&'static dyn crate::venue::capture::CaptureDecoder> {
        Some(&super::capture::ItchCapture)
    }

    fn check_table(&self, table: Option<&toml::Value>, check: &mut TableCheck<'_>) {
        config::check_table(table, check);
    }

    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "XNAS.ITCH".to_owned()
    }

    fn record_mode(&self) -> RecordMode {
        RecordMode::Subscribe
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Udp]
    }

    /// Line A: an IPv4 multicast group.
    fn check_url(&self, url: &Endpoint) -> Result<(), String> {
        config::multicast(&format!("{}:{}", url.host, url.port))
            .map(|_| ())
            .map_err(|message| format!("line A: {message}"))
    }

    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::Unused {
                why: "its books are built from the feed's own order messages",
            },
            key: KeyUse::Unused,
            table: Some(TABLE),
        }
    }

    /// MoldUDP64 heartbeats come once a second when nothing else does; no pings.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    /// `*` (every stock) or an ITCH symbol: 1 to 8 printable ASCII characters, no space.
    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        if symbol == "*"
            || (!symbol.is_empty()
                && symbol.len() <= 8
                && symbol.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Ok(());
        }
        Err(format!(
            "\"{symbol}\" is not an ITCH symbol (1 to 8 printable ASCII characters, such as \
             AAPL or BRK A written BRK.A as Nasdaq sends it) nor `*` (every stock)"
        ))
    }

    fn check_channel(&self, channel: &str, _earlier: &[String]) -> Result<(), String> {
        if channel == CHANNEL {
            return Ok(());
        }
        Err(format!(
            "\"{channel}\" is not a channel of nasdaq-itch; its one channel is \"{CHANNEL}\" \
             (every message of the feed)"
        ))
    }

    fn stream_names(&self, symbols: &[String], _channels: &[String]) -> Vec<String> {
        symbols
            .iter()
            .map(|symbol| format!("itch:{symbol}"))
            .collect()
    }

    /// One "connection" (the two lines and the re-request socket) carries every symbol:
    /// nothing is subscribed, so the stream cap does not split it.
    fn shards(
        &self,
        symbols: &[String],
        _channels: &[String],
        _max_streams: usize,
    ) -> Option<Vec<Shard>> {
        Some(vec![Shard {
            symbols: 0..symbols.len(),
            channels: vec![0],
            path: None,
            requests: Vec::new(),
        }])
    }

    fn names_a_stream(&self, _name: &str) -> bool {
        true
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        _streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        Err(not_live(venue))
    }

    fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        Ok(None)
    }

    fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
        Err("nasdaq-itch has no login".to_owned())
    }

    /// Nothing is subscribed: the feed is live when datagrams flow.
    fn subscribe_request(&self, _request: &SubscribeContext<'_>) -> Option<String> {
        None
    }

    fn answer_lists_accepted(&self) -> bool {
        false
    }

    fn read_response(&self, _reply: &VenueReply) -> Response {
        Response::Answer
    }

    fn feed(
        &self,
        _venue_id: VenueId,
        venue: &VenueConfig,
        _instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        // The table is checked by the config; read here so that a bad one is never half used.
        ItchConfig::of(venue).ok_or_else(|| not_live(venue))?;
        Err(not_live(venue))
    }
}
