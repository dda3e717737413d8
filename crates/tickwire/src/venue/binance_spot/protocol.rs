//! Binance Spot as the control side sees it: stream names `<symbol lowercase>@<channel>`,
//! `SUBSCRIBE` requests, books from `GET /api/v3/depth` snapshots, no login.
//!
//! From "WebSocket Streams for Binance" (`web-socket-streams.md`, binance-spot-api-docs commit
//! a5e0bc3, 2026-07-21):
//!
//! - Endpoints `wss://stream.binance.com:9443` (or `:443`; market data only:
//!   `wss://data-stream.binance.vision`); raw streams at `/ws/<stream>`, combined streams at
//!   `/stream?streams=a/b`, wrapped as `{"stream":..,"data":..}`. tickwire connects to the
//!   combined endpoint (`/stream`) and subscribes live, so every event names its stream.
//! - [`MAX_STREAMS_PER_CONNECTION`] = 1024 streams per connection (the config's default for
//!   `max_streams_per_connection`).
//! - [`INCOMING_MESSAGES_PER_SEC`] = 5 incoming messages per second per connection, pings, pongs
//!   and JSON control messages all counted; beyond it the connection is closed and an IP
//!   disconnected repeatedly may be banned. USD-M allows 10: Spot's requests therefore name up
//!   to [`MAX_STREAMS_PER_REQUEST`] = 256 streams, so that a full connection subscribes in four
//!   requests, paced at most `lifecycle::REQUESTS_PER_SEC` a second, with room left for a pong.
//! - [`CONNECTION_ATTEMPTS_PER_5_MIN`] = 300 connection attempts per IP every 5 minutes; the
//!   lifecycle's backoff and storm breaker keep far below it.
//! - A connection is valid for 24 hours: the lifecycle's default rotation (`rotate_after_ms`,
//!   23 h, make-before-break) replaces it before the venue cuts it.
//! - The server pings every 20 s and disconnects a client that has not answered within a minute;
//!   the WebSocket layer answers every ping with its payload, so tickwire sends no ping of its
//!   own and no read timeout is set by default.
//! - A `serverShutdown` event precedes a shutdown: the feed counts it (as an unknown event) and
//!   the dropped connection is reopened by the lifecycle.

use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::{DepthSnapshot, VenueReply};
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, Response, RestUrl, SubscribeContext, Transport,
};
use crate::venue::snapshot::{SnapshotApi, SnapshotTarget};
use crate::venue::{Shard, VenueError, VenueFeed};

/// "A single connection can listen to a maximum of 1024 streams."
pub const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// "WebSocket connections have a limit of 5 incoming messages per second" (PING, PONG and JSON
/// control messages).
pub const INCOMING_MESSAGES_PER_SEC: u32 = 5;

/// "There is a limit of 300 connections per attempt every 5 minutes per IP."
pub const CONNECTION_ATTEMPTS_PER_5_MIN: u32 = 300;

/// Streams named in one `SUBSCRIBE` request at most (the venue documents no limit; see the
/// module docs for why 256).
pub const MAX_STREAMS_PER_REQUEST: usize = 256;

/// Binance Spot's REST depth endpoint, whose body is read by [`parse_depth`].
pub const SNAPSHOT_API: SnapshotApi = SnapshotApi {
    path: "/api/v3/depth",
    parse: parse_depth,
    // Spot's whole `exchangeInfo` is tens of megabytes: not fetched at start (symbols unchecked).
    listing: None,
};

/// The Binance Spot protocol.
pub struct BinanceSpot;

/// The channels read: "Individual Symbol Book Ticker Streams", "Trade Streams", "Aggregate Trade
/// Streams", "Diff. Depth Stream" (1000 ms or 100 ms). The partial book streams `depth5/10/20`
/// take `@100ms` optionally (1000 ms without).
const CHANNELS: [&str; 5] = ["bookTicker", "trade", "aggTrade", "depth", "depth@100ms"];

fn is_channel(channel: &str) -> bool {
    if CHANNELS.contains(&channel) {
        return true;
    }
    let (levels, speed) = match channel.split_once('@') {
        Some((levels, speed)) => (levels, Some(speed)),
        None => (channel, None),
    };
    matches!(levels, "depth5" | "depth10" | "depth20") && matches!(speed, None | Some("100ms"))
}

/// `{"lastUpdateId":..,"bids":[..],"asks":[..]}`, the body of `GET /api/v3/depth`, read by the
/// stream decoder: one pass, every decimal exact, the whole body checked as JSON and UTF-8.
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

/// Levels reserved per side of a Spot book: a snapshot brings up to 5000, and Spot's diff
/// stream is not bounded to the snapshot's depth (BTCUSDT's book passed 2,048 levels a side in
/// the 2024-08-08 capture, six minutes after a 1000-level snapshot), so the book is sized above
/// the USD-M default, that it does not grow on the decoder thread.
pub const LEVELS_PER_SIDE: usize = 8_192;

/// The book synchronisation settings of a Spot venue whose snapshots ask for `book_depth`
/// levels.
pub fn sync_config(book_depth: u32) -> crate::venue::binance::sync::SyncConfig {
    crate::venue::binance::sync::SyncConfig {
        snapshot_limit: book_depth,
        expected_levels_per_side: LEVELS_PER_SIDE.max(book_depth as usize * 2),
        ..crate::venue::binance::sync::SyncConfig::default()
    }
}

/// `{"method":"SUBSCRIBE","params":[..],"id":N}` (Spot's "Subscribe to a stream").
pub fn subscribe_request(id: u64, streams: &[String]) -> String {
    crate::venue::binance::subscribe::subscribe_request(id, streams)
}

/// Splits `symbols` × `channels` into connections of at most `max_streams` streams and requests
/// of at most [`MAX_STREAMS_PER_REQUEST`] names.
pub fn shards(symbols: &[String], channels: &[String], max_streams: usize) -> Option<Vec<Shard>> {
    crate::venue::plan_shards(
        symbols,
        channels.len(),
        max_streams,
        MAX_STREAMS_PER_REQUEST,
        |symbol| crate::venue::binance::protocol::stream_names(&[symbol.to_owned()], channels),
    )
}

impl Protocol for BinanceSpot {
    /// `--venue binance-spot` (`capture.rs`), which reads the SBE streams' captures too.
    fn capture_decoder(&self) -> Option<&'static dyn crate::venue::capture::CaptureDecoder> {
        Some(&super::capture::SpotCapture)
    }

    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "BINANCE.SPOT".to_owned()
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

    /// The server pings every 20 s; tickwire answers and sends no ping of its own.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        let valid_chars = symbol
            .bytes()
            .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit());
        if symbol.is_empty() || !valid_chars {
            return Err(format!(
                "\"{symbol}\" is not a valid symbol; use uppercase letters and digits as the \
                 venue writes it (BTCUSDT; tickwire lowercases it in stream names)"
            ));
        }
        Ok(())
    }

    fn check_channel(&self, channel: &str, _earlier: &[String]) -> Result<(), String> {
        if is_channel(channel) {
            return Ok(());
        }
        Err(format!(
            "\"{channel}\" is not a {} channel; valid channels: {}, depth5, depth10, depth20 \
             (each optionally with @100ms)",
            VenueKind::BinanceSpot,
            CHANNELS.join(", ")
        ))
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        crate::venue::binance::protocol::stream_names(symbols, channels)
    }

    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        shards(symbols, channels, max_streams)
    }

    fn names_a_stream(&self, _name: &str) -> bool {
        true
    }

    /// The combined endpoint as configured, or with every stream in its URL for a recording.
    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        // Spot keeps the single entry point (`/ws`, `/stream`) that USD-M retired: the url's.
        if !streams_in_url {
            return Ok(Transport::WebSocket {
                path: venue.url.path.clone(),
            });
        }
        let streams = self.stream_names(&venue.symbols, &venue.channels);
        if streams.len() > venue.max_streams_per_connection as usize {
            return Err(VenueError::TooManyStreams {
                venue: venue.name.clone(),
                streams: streams.len(),
                max: venue.max_streams_per_connection,
            });
        }
        let separator = if venue.url.path.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(Transport::WebSocket {
            path: format!("{}{separator}streams={}", venue.url.path, streams.join("/")),
        })
    }

    fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        Ok(None)
    }

    fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
        Err("binance-spot market streams have no login".to_owned())
    }

    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        Some(subscribe_request(request.id, request.names))
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
        let sync = sync_config(venue.book_depth);
        let (feed, counters) = super::feed::SpotFeed::new(super::feed::FeedConfig {
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

    /// `GET /api/v3/depth` on the venue file's `rest_url`.
    fn snapshot_target(
        &self,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<Option<SnapshotTarget>, VenueError> {
        crate::venue::rest_snapshot_target_at(venue, instrument_base, SNAPSHOT_API)
    }

    /// `limit` 1 to 5000 (`rest-api.md`, "Order book").
    fn check_book_depth(&self, depth: u32) -> Result<(), String> {
        if super::sync::SNAPSHOT_LIMITS.contains(&depth) {
            return Ok(());
        }
        Err(format!(
            "{depth} is not a depth binance-spot serves; valid values are 1 to 5000 \
             (GET /api/v3/depth's limit)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spot keeps the single entry point USD-M retired: its connections go to the url's path.
    #[test]
    fn connections_use_the_urls_single_entry_point() {
        let text = "name = \"s\"\nkind = \"binance-spot\"\n\
                    url = \"wss://127.0.0.1:9443/stream\"\nsymbols = [\"BTCUSDT\"]\n\
                    channels = [\"bookTicker\", \"trade\"]\n";
        let venue = crate::config::venue_from_text(text).expect("a valid Spot file");
        let Ok(Transport::WebSocket { path }) = BinanceSpot.transport(&venue, false) else {
            panic!("a WebSocket path");
        };
        assert_eq!(path, "/stream");
        let Ok(Transport::WebSocket { path }) = BinanceSpot.transport(&venue, true) else {
            panic!("a WebSocket path");
        };
        assert_eq!(path, "/stream?streams=btcusdt@bookTicker/btcusdt@trade");
        let shards = BinanceSpot.shards(&venue.symbols, &venue.channels, 1024);
        assert!(shards
            .expect("fits")
            .iter()
            .all(|shard| shard.path.is_none()));
    }

    #[test]
    fn spot_channels() {
        for valid in [
            "bookTicker",
            "depth@100ms",
            "depth",
            "depth5",
            "depth20@100ms",
        ] {
            assert!(is_channel(valid), "{valid}");
        }
        // USD-M's speeds and streams are not Spot's.
        for invalid in [
            "depth@0ms",
            "depth@500ms",
            "depth5@250ms",
            "markPrice",
            "bookticker",
            "",
        ] {
            assert!(!is_channel(invalid), "{invalid}");
        }
    }

    #[test]
    fn a_full_connection_subscribes_in_four_requests() {
        let symbols: Vec<String> = (0..600).map(|i| format!("S{i}")).collect();
        let channels = vec!["bookTicker".to_owned(), "depth@100ms".to_owned()];
        let planned = shards(&symbols, &channels, 1024).expect("fits");
        assert_eq!(planned.len(), 2);
        let sizes: Vec<usize> = planned[0].requests.iter().map(Vec::len).collect();
        assert_eq!(sizes, [256, 256, 256, 256]);
        assert_eq!(planned[0].requests[0][1], "s0@depth@100ms");
    }

    #[test]
    fn snapshots_come_from_api_v3_depth_without_times() {
        let snapshot = parse_depth(
            br#"{"lastUpdateId":1027024,"bids":[["4.00000000","431.00000000"]],"asks":[["4.00000200","12.00000000"]]}"#,
        )
        .expect("the documented response");
        assert_eq!(snapshot.sequence, 1027024);
        assert_eq!(snapshot.bids.len(), 1);
        assert_eq!(SNAPSHOT_API.path, "/api/v3/depth");
        let refused = parse_depth(br#"{"code":-1121,"msg":"Invalid symbol."}"#).unwrap_err();
        assert!(refused.contains("error -1121"), "{refused}");
        assert!(BinanceSpot.check_book_depth(5000).is_ok());
        assert!(BinanceSpot.check_book_depth(1).is_ok());
        assert!(BinanceSpot.check_book_depth(0).is_err());
        assert!(BinanceSpot.check_book_depth(5001).is_err());
    }
}
