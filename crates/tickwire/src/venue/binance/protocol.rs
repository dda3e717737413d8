//! Binance USD-M Futures as the control side sees it: stream names `<symbol>@<channel>`,
//! `SUBSCRIBE` requests of at most 200 names, books from REST snapshots, no login.

use super::subscribe;
use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, Response, RestUrl, SubscribeContext, Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};

/// The Binance USD-M Futures protocol.
pub struct BinanceUsdmFutures;

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

impl Protocol for BinanceUsdmFutures {
    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Wss, Scheme::Ws]
    }

    /// Diff-depth books start from a REST snapshot; the market streams need no key.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::NeededForDiffDepth,
            key: KeyUse::Unused,
            databento_table: false,
        }
    }

    /// Binance pings its clients and closes the ones that do not answer: no ping of ours.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
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
        subscribe::shards(symbols, channels, max_streams)
    }

    fn names_a_stream(&self, _name: &str) -> bool {
        true
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        if !streams_in_url {
            return Ok(Transport::WebSocket {
                path: venue.url.path.clone(),
            });
        }
        let streams = stream_names(&venue.symbols, &venue.channels);
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
            .any(|channel| crate::config::is_diff_depth_channel(channel));
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
             url = \"wss://127.0.0.1:9443/stream\"\nsymbols = [\"BTCUSDT\", \"ETHUSDT\"]\n\
             channels = [\"bookTicker\", \"aggTrade\"]\n\
             max_streams_per_connection = {max_streams}\n"
        );
        match crate::config::venue_from_text(&text) {
            Ok(venue) => venue,
            Err(errors) => panic!("test venue: {errors}"),
        }
    }

    #[test]
    fn a_recording_names_every_stream_in_its_url() {
        let Ok(Transport::WebSocket { path }) = BinanceUsdmFutures.transport(&venue(4), true)
        else {
            panic!("a WebSocket path");
        };
        assert_eq!(
            path,
            "/stream?streams=btcusdt@bookTicker/btcusdt@aggTrade/ethusdt@bookTicker/ethusdt@aggTrade"
        );
        let Ok(Transport::WebSocket { path }) = BinanceUsdmFutures.transport(&venue(4), false)
        else {
            panic!("a WebSocket path");
        };
        assert_eq!(path, "/stream");
        assert!(matches!(
            BinanceUsdmFutures.transport(&venue(3), true),
            Err(VenueError::TooManyStreams {
                streams: 4,
                max: 3,
                ..
            })
        ));
    }
}
