//! Nasdaq TotalView-ITCH 5.0 over MoldUDP64 as the control side sees it: a venue that is live
//! when datagrams flow, with no login and no subscription step. The file's `url` is line A
//! (`udp://group:port`), `[nasdaq_itch]` (`config.rs`) the rest; its one channel, `itch`,
//! carries every message; every stock is decoded and the `symbols` filter (`*` or a list) says
//! which publish.
//!
//! Its transport is [`Transport::Datagram`]: the network thread joins line A and line B on the
//! configured interface (source-specific where `source` is set) and connects a socket to the
//! re-request server, in the slot of the venue's one connection; the slot is `Open` with its
//! first datagram. With `backend = "af-xdp"` the lines' datagrams are read through AF_XDP on
//! that interface instead (`net::udp::XdpLines`; the re-request socket stays a kernel socket),
//! and the frames the feed reads are the same. The feed (`feed.rs`) runs the decoder the capture path runs (`decoder.rs`).
use super::config::{self, ItchConfig, CHANNEL, TABLE};
use super::feed::{decoder_config, FeedConfig, ItchFeed};
use crate::config::{Endpoint, Scheme, VenueConfig};
use crate::event::{InstrumentId, VenueId};
use crate::net::udp::{interface_address, interface_name, DatagramSpec, MulticastConfig, XdpLines};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, RecordMode, Response, RestUrl, SubscribeContext, TableCheck,
    Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};
use std::net::{Ipv4Addr, SocketAddrV4};

/// The Nasdaq ITCH protocol.
pub struct NasdaqItch;

/// The venue's sockets as its file describes them (the interface named by name is looked up
/// now: call it on the control thread).
pub fn datagram_spec(venue: &VenueConfig) -> Result<DatagramSpec, String> {
    let itch = ItchConfig::of(venue).ok_or("its [nasdaq_itch] table does not read")?;
    let interface = interface_address(&itch.interface)
        .map_err(|error| format!("nasdaq_itch.interface: {error}"))?;
    let source = match &itch.source {
        Some(text) => Some(
            text.parse::<Ipv4Addr>()
                .map_err(|_| format!("nasdaq_itch.source: \"{text}\" is not an IPv4 address"))?,
        ),
        None => None,
    };
    let rcvbuf = itch.rcvbuf_bytes.unwrap_or(RCVBUF_DEFAULT) as usize;
    let line = |group: SocketAddrV4| MulticastConfig {
        group,
        interface,
        source,
        rcvbuf,
    };
    let line_a = config::multicast(&format!("{}:{}", venue.url.host, venue.url.port))
        .map_err(|message| format!("line A: {message}"))?;
    let line_b = match &itch.line_b {
        Some(text) => Some(
            config::multicast(text).map_err(|message| format!("nasdaq_itch.line_b: {message}"))?,
        ),
        None => None,
    };
    let reply = match &itch.rerequest {
        Some(text) => Some(text.parse::<SocketAddrV4>().map_err(|_| {
            format!("nasdaq_itch.rerequest: \"{text}\" is not an IPv4 address:port")
        })?),
        None => None,
    };
    let xdp = match itch
        .xdp()
        .map_err(|(key, message)| format!("{key}: {message}"))?
    {
        Some(choice) => {
            // AF_XDP binds to an interface by name: one named by its address is looked up.
            let name = match itch.interface.parse::<Ipv4Addr>() {
                Ok(address) => interface_name(address)
                    .map_err(|error| format!("nasdaq_itch.interface: {error}"))?,
                Err(_) => itch.interface.clone(),
            };
            let mut lines = XdpLines::new(&name, choice.queues, choice.lines).ok_or_else(|| {
                format!("nasdaq_itch.interface: \"{name}\" is not an interface name")
            })?;
            lines.busy_poll_us = choice.busy_poll_us;
            Some(lines)
        }
        None => None,
    };
    Ok(DatagramSpec {
        lines: [Some(line(line_a)), line_b.map(line)],
        reply,
        xdp,
    })
}

/// `nasdaq_itch.rcvbuf_bytes` unset: 16 MiB per line.
pub const RCVBUF_DEFAULT: u32 = 16 << 20;

/// Instrument ids a `*` venue keeps: one per stock locate ITCH can name.
const ALL_STOCKS: InstrumentId = 1 << 16;

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
        let spec = datagram_spec(venue).map_err(|reason| VenueError::Datagram {
            venue: venue.name.clone(),
            reason,
        })?;
        Ok(Transport::Datagram { spec })
    }

    /// `*` publishes every stock, each named as the feed names it.
    fn instrument_span(&self, venue: &VenueConfig) -> InstrumentId {
        if venue.symbols.iter().any(|symbol| symbol == "*") {
            ALL_STOCKS
        } else {
            venue.symbols.len() as InstrumentId
        }
    }

    /// Under `*` the feed names each stock in the bus's directory as its Stock Directory
    /// message names it (`feed.rs`).
    fn names_instruments_live(&self, venue: &VenueConfig) -> bool {
        venue.symbols.iter().any(|symbol| symbol == "*")
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
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        // The table is checked by the config; read here so that a bad one is never half used.
        let itch = ItchConfig::of(venue).ok_or_else(|| VenueError::Datagram {
            venue: venue.name.clone(),
            reason: "its [nasdaq_itch] table does not read".to_owned(),
        })?;
        let activity = std::sync::Arc::new(crate::venue::feed::StreamActivity::new(
            venue.symbols.len(),
            venue.channels.len().max(1),
        ));
        let (feed, counters) = ItchFeed::new(
            FeedConfig {
                decoder: decoder_config(venue_id, instrument_base, &venue.symbols, &itch),
                venue: venue.name.clone(),
            },
            activity,
        );
        Ok(VenueFeed {
            feed: Box::new(feed),
            counters,
        })
    }
}
