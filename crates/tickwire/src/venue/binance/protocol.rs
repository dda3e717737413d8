//! Binance USD-M Futures as the control side sees it: stream names `<symbol>@<channel>`,
//! `SUBSCRIBE` requests of at most 200 names, books from REST snapshots, no login, and the two
//! routed entry points every market stream lives on since 2026.
//!
//! ## Entry points (Binance, "Important WebSocket Change Notice: Base URL Split & Migration",
//! announced 2026-03-06; the legacy `/ws` and `/stream` URLs were decommissioned 2026-04-23)
//!
//! The venue file names the host root (`url = "wss://fstream.binance.com"`); each channel is
//! routed to its entry point ([`entry_point`]) and each entry point gets shards (connections)
//! of its own, in stream mode (`/public/stream`, `/market/stream`) with live `SUBSCRIBE`:
//! - `/public`, high-frequency public market data: `bookTicker`, the diff and partial depth
//!   streams, and `trade`;
//! - `/market`, regular market data: `aggTrade`, `markPrice`, `markPrice@1s`.
//!
//! The notice names bookTicker and depth for `/public` and aggTrade, markPrice, klines, tickers
//! and forceOrder for `/market`; it does not name `trade` (the raw trade stream is not in the
//! USD-M stream pages). Where the documentation is silent we follow what the venue serves, as
//! its users report it: `trade` is delivered on `/public` and on the legacy root, and never on
//! `/market` (binance/binance-public-data issue 472; BYTEX-TRADE/bytex issue 7; ccxt's routing
//! after its issue 28083).
//!
//! A file that names a path is refused by `check-config` with the line to write instead
//! ([`Protocol::check_url`]), rather than migrated with a warning: a warning scrolls past
//! unseen at start (which is how the retired layout went unnoticed), the fix is one line, and
//! a path other than the root would otherwise be a silent guess about what the operator meant.
//!
//! Because the two entry points are separate connections, a symbol's quotes and book (on
//! `/public`) and its aggregated trades and marks (on `/market`) arrive in an order that need
//! not follow their exchange times (binance/binance-connector-python issue 564); each
//! connection keeps its own staleness, gaps and rotation, and a `/market` connection that drops
//! leaves the books of `/public` alone.

use super::subscribe;
use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::{DepthSnapshot, VenueReply};
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, Response, RestUrl, SubscribeContext, Transport,
};
use crate::venue::snapshot::{ListingApi, SnapshotApi};
use crate::venue::{Shard, VenueError, VenueFeed};

/// The Binance USD-M Futures protocol.
pub struct BinanceUsdmFutures;

/// USD-M's REST depth endpoint, `GET /fapi/v1/depth`, read by [`parse_depth`], and its
/// instrument list, `GET /fapi/v1/exchangeInfo`, read by [`parse_exchange_info`].
pub const SNAPSHOT_API: SnapshotApi = SnapshotApi {
    path: "/fapi/v1/depth",
    parse: parse_depth,
    listing: Some(ListingApi {
        path: "/fapi/v1/exchangeInfo",
        parse: parse_exchange_info,
    }),
};

/// Parses a depth snapshot body,
/// `{"lastUpdateId":..,"E":..,"T":..,"bids":[["px","qty"],..],"asks":[..]}`, with the stream
/// decoder (`binance::decode`), the parser `tickwire decode` also reads recorded snapshots with:
/// one pass, no DOM, the whole body checked as JSON (and as UTF-8, which the WebSocket layer
/// checks for stream messages), every decimal exact, `E` and `T` required, a repeated key refused.
pub fn parse_depth(body: &[u8]) -> Result<DepthSnapshot, String> {
    use super::decode::{self, Message};
    let not_a_snapshot = |why: std::fmt::Arguments<'_>| {
        format!("not a depth snapshot ({why}): {}", decode::sample(body))
    };
    if let Err(error) = std::str::from_utf8(body) {
        return Err(not_a_snapshot(format_args!("{error}")));
    }
    match decode::decode(body) {
        Ok(Message::DepthSnapshot(snapshot)) => Ok(DepthSnapshot {
            sequence: snapshot.last_update_id,
            bids: snapshot.bids.iter().collect(),
            asks: snapshot.asks.iter().collect(),
        }),
        Ok(Message::ErrorReply { code, msg, .. }) => Err(not_a_snapshot(format_args!(
            "the venue answered error {code}: {}",
            decode::sample(msg)
        ))),
        Ok(_) => Err(not_a_snapshot(format_args!(
            "a stream message or a reply, without `lastUpdateId`"
        ))),
        Err(error) => Err(not_a_snapshot(format_args!("{error}"))),
    }
}

/// The symbols of `exchangeInfo`'s body, `{"symbols":[{"symbol":..},..],..}` (the other keys
/// and each entry's other fields are not read), off the hot path at start.
pub fn parse_exchange_info(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct ExchangeInfo {
        symbols: Vec<ListedSymbol>,
    }
    #[derive(serde::Deserialize)]
    struct ListedSymbol {
        symbol: String,
    }
    serde_json::from_slice::<ExchangeInfo>(body)
        .map(|info| info.symbols.into_iter().map(|entry| entry.symbol).collect())
        .map_err(|error| format!("not an instrument list: {error}"))
}

/// Binance USDⓈ-M Futures market streams (Binance docs, "WebSocket Market Streams"). `depth` takes
/// an update speed; the partial-book streams `depth5/10/20` take one optionally.
const CHANNELS: [&str; 10] = [
    "bookTicker",
    "aggTrade",
    "trade",
    "markPrice",
    "markPrice@1s",
    "depth",
    "depth@0ms",
    "depth@100ms",
    "depth@250ms",
    "depth@500ms",
];

/// Where a USD-M market stream is served since the 2026 split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryPoint {
    /// `/public`: bookTicker, depth (diff and partial), trade.
    Public,
    /// `/market`: aggTrade, markPrice.
    Market,
}

impl EntryPoint {
    pub const ALL: [EntryPoint; 2] = [EntryPoint::Public, EntryPoint::Market];

    /// The entry point's path, `/public` or `/market`.
    pub fn path(self) -> &'static str {
        match self {
            EntryPoint::Public => "/public",
            EntryPoint::Market => "/market",
        }
    }
}

/// The entry point that serves `channel` (a valid channel of this venue).
pub fn entry_point(channel: &str) -> EntryPoint {
    let name = channel.split_once('@').map_or(channel, |(name, _)| name);
    match name {
        "aggTrade" | "markPrice" => EntryPoint::Market,
        _ => EntryPoint::Public,
    }
}

/// The message of a `url` that names a path: what to write instead.
fn url_with_a_path(url: &crate::config::Endpoint) -> String {
    let default_port = url.scheme.default_port() == Some(url.port);
    let root = if default_port {
        format!("{}://{}", url.scheme, host_for_url(&url.host))
    } else {
        format!("{}://{}:{}", url.scheme, host_for_url(&url.host), url.port)
    };
    let retired = matches!(url.path.split('?').next(), Some(path) if path == "/stream"
        || path == "/stream/" || path == "/ws" || path.starts_with("/ws/"));
    let why = if retired {
        format!(
            "`{}` is the retired single entry point (Binance decommissioned `/ws` and `/stream` \
             on 2026-04-23)",
            url.path
        )
    } else {
        format!("`{}` is a path", url.path)
    };
    format!(
        "{why}; name the host root instead: url = \"{root}\". tickwire routes each channel to \
         its entry point itself: bookTicker, depth and trade to /public, aggTrade and markPrice \
         to /market, each on connections of its own"
    )
}

fn host_for_url(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn is_channel(channel: &str) -> bool {
    if CHANNELS.contains(&channel) {
        return true;
    }
    let (levels, speed) = match channel.split_once('@') {
        Some((levels, speed)) => (levels, Some(speed)),
        None => (channel, None),
    };
    matches!(levels, "depth5" | "depth10" | "depth20")
        && matches!(speed, None | Some("100ms" | "250ms" | "500ms"))
}

/// The stream names of a Binance venue: `<symbol lowercase>@<channel>` for every pair, the form
/// its combined-stream endpoint takes (`/stream?streams=a/b`).
pub fn stream_names(symbols: &[String], channels: &[String]) -> Vec<String> {
    symbols
        .iter()
        .flat_map(|symbol| {
            channels
                .iter()
                .map(move |channel| format!("{}@{channel}", symbol.to_ascii_lowercase()))
        })
        .collect()
}

/// The entry point of the first channel (the one a venue with no channel would use).
fn entry_point_of(channels: &[String]) -> EntryPoint {
    channels
        .first()
        .map_or(EntryPoint::Public, |channel| entry_point(channel))
}

/// The `limit` values Binance USD-M's `GET /fapi/v1/depth` accepts.
const BOOK_DEPTHS: [u32; 7] = [5, 10, 20, 50, 100, 500, 1000];

impl Protocol for BinanceUsdmFutures {
    /// `--venue binance-futures` (`capture.rs`).
    fn capture_decoder(&self) -> Option<&'static dyn crate::venue::capture::CaptureDecoder> {
        Some(&super::capture::UsdmCapture)
    }

    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "BINANCE.USDM".to_owned()
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Wss, Scheme::Ws]
    }

    /// Diff-depth books start from a REST snapshot; the market streams need no key.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::NeededFor {
                channels: crate::venue::binance::DIFF_DEPTH_CHANNELS,
            },
            key: KeyUse::Unused,
            table: None,
        }
    }

    fn channel_needs_rest_snapshot(&self, channel: &str) -> bool {
        crate::venue::binance::is_diff_depth_channel(channel)
    }

    /// `GET /fapi/v1/depth` on the venue file's `rest_url`.
    fn snapshot_target(
        &self,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<Option<crate::venue::snapshot::SnapshotTarget>, VenueError> {
        crate::venue::rest_snapshot_target_at(venue, instrument_base, SNAPSHOT_API)
    }

    /// `GET /fapi/v1/depth`'s `limit` values.
    fn check_book_depth(&self, depth: u32) -> Result<(), String> {
        if BOOK_DEPTHS.contains(&depth) {
            return Ok(());
        }
        Err(format!(
            "{depth} is not a depth the venue serves; valid values are {}",
            BOOK_DEPTHS.map(|depth| depth.to_string()).join(", ")
        ))
    }

    /// Binance pings its clients and closes the ones that do not answer: no ping of ours.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    /// The host root only: the channels' entry points are the protocol's to choose.
    fn check_url(&self, url: &crate::config::Endpoint) -> Result<(), String> {
        if url.path.is_empty() || url.path == "/" {
            return Ok(());
        }
        Err(url_with_a_path(url))
    }

    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        let valid_chars = symbol.bytes().all(|byte| {
            byte.is_ascii_uppercase() || byte.is_ascii_digit() || matches!(byte, b'_' | b'-' | b'.')
        });
        if symbol.is_empty() || !valid_chars {
            return Err(format!(
                "\"{symbol}\" is not a valid symbol; use uppercase letters, digits, `_`, `-` \
                 and `.` as the venue writes it (tickwire lowercases it where a venue's stream \
                 names need that)"
            ));
        }
        Ok(())
    }

    fn check_channel(&self, channel: &str, _earlier: &[String]) -> Result<(), String> {
        if is_channel(channel) {
            return Ok(());
        }
        Err(format!(
            "\"{channel}\" is not a {} channel; valid channels: {}, depth5, depth10, \
             depth20 (each optionally with @100ms, @250ms or @500ms)",
            VenueKind::BinanceUsdmFutures,
            CHANNELS.join(", ")
        ))
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        stream_names(symbols, channels)
    }

    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        subscribe::routed_shards(symbols, channels, max_streams)
    }

    fn names_a_stream(&self, _name: &str) -> bool {
        true
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        // Every shard names its own entry point (`Shard::path`); this is the first one's.
        let paths = self.record_paths(venue)?;
        let path = match (streams_in_url, paths.first()) {
            (true, Some(path)) => path.clone(),
            _ => format!("{}/stream", entry_point_of(&venue.channels).path()),
        };
        Ok(Transport::WebSocket { path })
    }

    /// One combined-stream URL per entry point the venue file's channels use.
    fn record_paths(&self, venue: &VenueConfig) -> Result<Vec<String>, VenueError> {
        let mut paths = Vec::new();
        for entry in EntryPoint::ALL {
            let channels: Vec<String> = venue
                .channels
                .iter()
                .filter(|channel| entry_point(channel) == entry)
                .cloned()
                .collect();
            if channels.is_empty() {
                continue;
            }
            let streams = stream_names(&venue.symbols, &channels);
            if streams.len() > venue.max_streams_per_connection as usize {
                return Err(VenueError::TooManyStreams {
                    venue: venue.name.clone(),
                    streams: streams.len(),
                    max: venue.max_streams_per_connection,
                });
            }
            paths.push(format!(
                "{}/stream?streams={}",
                entry.path(),
                streams.join("/")
            ));
        }
        Ok(paths)
    }

    fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        Ok(None)
    }

    fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
        Err("binance-usdm-futures market streams have no login".to_owned())
    }

    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        Some(subscribe::subscribe_request(request.id, request.names))
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
        let books = venue
            .channels
            .iter()
            .any(|channel| crate::venue::binance::is_diff_depth_channel(channel));
        let sync = super::sync::SyncConfig {
            snapshot_limit: venue.book_depth,
            ..super::sync::SyncConfig::default()
        };
        let (feed, counters) = super::feed::BinanceFeed::new(super::feed::FeedConfig {
            venue_id,
            venue_name: venue.name.clone(),
            symbols: venue.symbols.clone(),
            channels: venue.channels.clone(),
            instrument_base,
            books,
            sync,
        });
        Ok(VenueFeed {
            feed: Box::new(feed),
            counters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed::Fixed;

    #[test]
    fn parses_a_depth_snapshot() {
        let snapshot = parse_depth(
            br#"{"lastUpdateId":1027024,"E":1589436922972,"T":1589436922959,"bids":[["4.00000000","431.00000000"]],"asks":[["4.00000200","12.00000000"],["4.1","0"]]}"#,
        )
        .unwrap();
        assert_eq!(snapshot.sequence, 1027024);
        assert_eq!(
            snapshot.bids,
            vec![(
                Fixed::parse_str("4").unwrap(),
                Fixed::parse_str("431").unwrap()
            )]
        );
        assert_eq!(snapshot.asks.len(), 2);
        assert!(parse_depth(br#"{"code":-1121,"msg":"Invalid symbol."}"#).is_err());
        assert!(parse_depth(br#"{"lastUpdateId":1,"bids":[["1e3","1"]],"asks":[]}"#).is_err());
        // The errors say what was wrong.
        let refused = parse_depth(br#"{"code":-1121,"msg":"Invalid symbol."}"#).unwrap_err();
        assert!(
            refused.contains("error -1121: Invalid symbol."),
            "{refused}"
        );
        let bad_decimal =
            parse_depth(br#"{"lastUpdateId":1,"E":1,"T":1,"bids":[["1e3","1"]],"asks":[]}"#)
                .unwrap_err();
        assert!(bad_decimal.contains("bad decimal"), "{bad_decimal}");
        let missing = parse_depth(br#"{"lastUpdateId":1,"E":1,"bids":[],"asks":[]}"#).unwrap_err();
        assert!(missing.contains("missing field `T`"), "{missing}");
        assert!(parse_depth(
            b"{\"lastUpdateId\":1,\"E\":1,\"T\":1,\"x\":\"\xff\",\"bids\":[],\"asks\":[]}"
        )
        .is_err());
    }

    #[test]
    fn reads_the_instrument_list() {
        assert_eq!(
            parse_exchange_info(
                br#"{"timezone":"UTC","symbols":[{"symbol":"BTCUSDT","status":"TRADING"},{"symbol":"ETHUSDT"}]}"#
            )
            .unwrap(),
            ["BTCUSDT", "ETHUSDT"]
        );
        let refused = parse_exchange_info(br#"{"code":-1000}"#).unwrap_err();
        assert!(refused.contains("not an instrument list"), "{refused}");
    }

    #[test]
    fn binance_channels() {
        for valid in [
            "bookTicker",
            "depth@100ms",
            "depth5",
            "depth20@500ms",
            "markPrice@1s",
        ] {
            assert!(is_channel(valid), "{valid}");
        }
        for invalid in [
            "bookticker",
            "depth@1000ms",
            "depth15",
            "depth5@0ms",
            "depth10@",
            "",
        ] {
            assert!(!is_channel(invalid), "{invalid}");
        }
    }

    fn venue(max_streams: u32) -> VenueConfig {
        let text = format!(
            "name = \"b\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:9443\"\nsymbols = [\"BTCUSDT\", \"ETHUSDT\"]\n\
             channels = [\"bookTicker\", \"aggTrade\"]\n\
             max_streams_per_connection = {max_streams}\n"
        );
        match crate::config::venue_from_text(&text) {
            Ok(venue) => venue,
            Err(errors) => panic!("test venue: {errors}"),
        }
    }

    #[test]
    fn a_recording_names_every_stream_in_its_url_one_connection_per_entry_point() {
        let paths = BinanceUsdmFutures.record_paths(&venue(4)).expect("fits");
        assert_eq!(
            paths,
            [
                "/public/stream?streams=btcusdt@bookTicker/ethusdt@bookTicker",
                "/market/stream?streams=btcusdt@aggTrade/ethusdt@aggTrade"
            ]
        );
        let Ok(Transport::WebSocket { path }) = BinanceUsdmFutures.transport(&venue(4), true)
        else {
            panic!("a WebSocket path");
        };
        assert_eq!(path, paths[0]);
        let Ok(Transport::WebSocket { path }) = BinanceUsdmFutures.transport(&venue(4), false)
        else {
            panic!("a WebSocket path");
        };
        assert_eq!(path, "/public/stream");
        // Two symbols a connection on each entry point: one stream too many for one.
        assert!(matches!(
            BinanceUsdmFutures.record_paths(&venue(1)),
            Err(VenueError::TooManyStreams {
                streams: 2,
                max: 1,
                ..
            })
        ));
    }

    fn url_problem(url: &str) -> Option<String> {
        let url = crate::config::Endpoint::parse(url).expect("a valid url");
        BinanceUsdmFutures.check_url(&url).err()
    }

    #[test]
    fn a_retired_or_routed_path_is_refused_with_the_line_to_write() {
        assert_eq!(url_problem("wss://fstream.binance.com"), None);
        assert_eq!(url_problem("wss://fstream.binance.com/"), None);
        assert_eq!(url_problem("wss://127.0.0.1:9443"), None);
        for retired in [
            "wss://fstream.binance.com/stream",
            "wss://fstream.binance.com/stream?streams=btcusdt@bookTicker",
            "wss://fstream.binance.com/ws",
            "wss://fstream.binance.com/ws/btcusdt@depth",
        ] {
            let problem = url_problem(retired).expect("refused");
            assert!(problem.contains("retired"), "{problem}");
            assert!(problem.contains("2026-04-23"), "{problem}");
            assert!(
                problem.contains("url = \"wss://fstream.binance.com\""),
                "{problem}"
            );
            assert!(
                problem.contains("/public") && problem.contains("/market"),
                "{problem}"
            );
        }
        let routed = url_problem("wss://127.0.0.1:9443/public").expect("refused");
        assert!(!routed.contains("retired"), "{routed}");
        assert!(
            routed.contains("url = \"wss://127.0.0.1:9443\""),
            "{routed}"
        );
    }

    #[test]
    fn channels_have_their_entry_points() {
        for public in [
            "bookTicker",
            "depth",
            "depth@100ms",
            "depth20@500ms",
            "trade",
        ] {
            assert_eq!(entry_point(public), EntryPoint::Public, "{public}");
        }
        for market in ["aggTrade", "markPrice", "markPrice@1s"] {
            assert_eq!(entry_point(market), EntryPoint::Market, "{market}");
        }
        // Every channel the venue file takes is routed by the table above.
        for channel in CHANNELS {
            assert!(is_channel(channel));
        }
    }
}
