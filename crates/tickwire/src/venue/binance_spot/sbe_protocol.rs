//! Binance Spot's SBE market data streams as the control side sees them (venue kind
//! `binance-spot-sbe`), from `sbe-market-data-streams.md` (binance-spot-api-docs commit a5e0bc3,
//! 2026-07-21): the host `stream-sbe.binance.com` (port 443 or 9443), the single entry point
//! (`/ws`, `/stream?streams=`) and live `SUBSCRIBE` of Spot's JSON streams, JSON text frames for
//! control and SBE binary frames for events, read by the same [`super::feed::SpotFeed`] as the
//! JSON streams.
//!
//! - Streams: `<symbol>@trade`, `@bestBidAsk`, `@depth` (diffs every 20 ms) and `@depth20`
//!   (the top 20 levels every 50 ms). `@depth` books start from `GET /api/v3/depth` on
//!   `rest_url` and follow Spot's own procedure, as the JSON diffs do.
//! - An API key is required, Ed25519 only, sent in the `X-MBX-APIKEY` header of the upgrade;
//!   no timestamp or signature. It comes from `credentials.api_key_env` or
//!   `credentials.api_key_credential`, never from the file. It is checked once at start to be
//!   a header value (visible ASCII, no spaces), so that a key with a stray newline stops the
//!   start with a clear error rather than failing every connection. A key the venue refuses
//!   fails the upgrade (HTTP 401): the connection backs off as any failed handshake does, with
//!   the venue's status in the log, and the storm breaker caps the attempts.
//! - Limits: 5 incoming messages a second per connection (pings, pongs, requests), 1024
//!   streams per connection, 300 connection attempts per 5 minutes per IP, 24 h per connection
//!   (rotated at 23 h by default, as the JSON streams); the server pings every 20 s and closes a
//!   connection without a pong within a minute; `serverShutdown` (JSON) announces a close,
//!   which the feed turns into a make-before-break rotation.

use super::protocol::BinanceSpot;
use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, Response, RestUrl, SubscribeContext, Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};

/// The Binance Spot SBE market data streams.
pub struct BinanceSpotSbe;

/// The header the API key travels in.
pub const API_KEY_HEADER: &str = "X-MBX-APIKEY";

/// The SBE market data streams ("Available Streams").
pub const CHANNELS: [&str; 4] = ["trade", "bestBidAsk", "depth", "depth20"];

/// The longest key accepted (Binance's keys are 64 characters).
const MAX_KEY_BYTES: usize = 256;

/// Whether `key` can travel as a header value: visible ASCII, no spaces, not too long.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(format!(
            "is {} bytes long; expected 1 to {MAX_KEY_BYTES}",
            key.len()
        ));
    }
    if let Some(position) = key.bytes().position(|byte| !byte.is_ascii_graphic()) {
        return Err(format!(
            "holds a character that cannot go in an HTTP header (a space, a control character \
             or non-ASCII) at byte {position}"
        ));
    }
    Ok(())
}

impl Protocol for BinanceSpotSbe {
    /// Binance Spot's events, JSON or SBE alike.
    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "BINANCE.SPOT".to_owned()
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Wss, Scheme::Ws]
    }

    /// Diff-depth books start from a REST snapshot; the streams need an API key.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::NeededFor {
                channels: crate::venue::binance::DIFF_DEPTH_CHANNELS,
            },
            key: KeyUse::Required {
                missing: "has no API key: Binance's SBE market data streams need an Ed25519 API \
                          key in the X-MBX-APIKEY header; set credentials.api_key_env (an \
                          environment variable) or credentials.api_key_credential (a systemd \
                          credential)",
            },
            table: None,
        }
    }

    /// The server pings every 20 s; tickwire answers and sends no ping of its own.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        BinanceSpot.check_symbol(symbol)
    }

    fn check_channel(&self, channel: &str, _earlier: &[String]) -> Result<(), String> {
        if CHANNELS.contains(&channel) {
            return Ok(());
        }
        Err(format!(
            "\"{channel}\" is not a {} channel; valid channels: {} (the JSON streams' bookTicker \
             is bestBidAsk here; for other streams use a binance-spot venue)",
            VenueKind::BinanceSpotSbe,
            CHANNELS.join(", ")
        ))
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        BinanceSpot.stream_names(symbols, channels)
    }

    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        BinanceSpot.shards(symbols, channels, max_streams)
    }

    fn names_a_stream(&self, name: &str) -> bool {
        BinanceSpot.names_a_stream(name)
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        BinanceSpot.transport(venue, streams_in_url)
    }

    /// `X-MBX-APIKEY: <key>`, the key read now (control thread, at start).
    fn upgrade_headers(&self, venue: &VenueConfig) -> Result<Vec<(String, String)>, VenueError> {
        let error = |reason: String| VenueError::Login {
            venue: venue.name.clone(),
            reason,
        };
        let key = venue
            .api_key()
            .map_err(|e| error(e.to_string()))?
            .ok_or_else(|| {
                error(
                    "no API key: the SBE streams need one; set credentials.api_key_env or \
                     credentials.api_key_credential"
                        .to_owned(),
                )
            })?;
        check_key(&key).map_err(|reason| error(format!("the API key {reason}")))?;
        Ok(vec![(API_KEY_HEADER.to_owned(), key)])
    }

    fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        Ok(None)
    }

    fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
        Err("binance-spot-sbe sends its key in the upgrade's header, not in a login".to_owned())
    }

    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        BinanceSpot.subscribe_request(request)
    }

    fn answer_lists_accepted(&self) -> bool {
        BinanceSpot.answer_lists_accepted()
    }

    fn read_response(&self, reply: &VenueReply) -> Response {
        BinanceSpot.read_response(reply)
    }

    fn feed(
        &self,
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        BinanceSpot.feed(venue_id, venue, instrument_base)
    }

    fn snapshot_target(
        &self,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<Option<crate::venue::snapshot::SnapshotTarget>, VenueError> {
        BinanceSpot.snapshot_target(venue, instrument_base)
    }

    fn check_book_depth(&self, depth: u32) -> Result<(), String> {
        BinanceSpot.check_book_depth(depth)
    }

    fn channel_needs_rest_snapshot(&self, channel: &str) -> bool {
        BinanceSpot.channel_needs_rest_snapshot(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn venue(extra: &str) -> Result<VenueConfig, String> {
        let text = format!(
            "name = \"sbe\"\nkind = \"binance-spot-sbe\"\n\
             url = \"wss://stream-sbe.binance.com:9443/stream\"\n\
             rest_url = \"https://api.binance.com\"\nsymbols = [\"BTCUSDT\"]\n\
             channels = [\"bestBidAsk\", \"trade\", \"depth\", \"depth20\"]\n{extra}"
        );
        crate::config::venue_from_text(&text).map_err(|errors| errors.to_string())
    }

    #[test]
    fn a_file_needs_a_key_and_takes_only_the_sbe_streams() {
        let missing = venue("").expect_err("no key");
        assert!(missing.contains("X-MBX-APIKEY"), "{missing}");
        let ok = venue("[credentials]\napi_key_env = \"TICKWIRE_TEST_SBE_KEY\"\n");
        assert!(ok.is_ok(), "{ok:?}");
        assert!(BinanceSpotSbe.check_channel("bookTicker", &[]).is_err());
        assert!(BinanceSpotSbe.check_channel("depth@100ms", &[]).is_err());
        for channel in CHANNELS {
            assert!(
                BinanceSpotSbe.check_channel(channel, &[]).is_ok(),
                "{channel}"
            );
        }
    }

    #[test]
    fn a_key_goes_in_a_header_only_when_it_can() {
        assert_eq!(check_key("abcDEF0123456789"), Ok(()));
        assert!(check_key("").is_err());
        assert!(check_key("abc\r\nX-Injected: 1").is_err());
        assert!(check_key("abc def").is_err());
        assert!(check_key("clé").is_err());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
    }
}
