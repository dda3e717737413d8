//! Venues: how a venue file becomes connections, and (in later work) each venue's decoders,
//! subscriptions and book synchronisation under `venue/<name>/`.
//!
//! For now this is the part the control thread needs to open a venue's stream: resolve its
//! address (DNS may block: control thread only), build its TLS settings, and compose the
//! WebSocket request target from the configured symbols and channels.

pub mod binance;
pub mod databento;
pub mod emit;
pub mod feed;
pub mod json;
pub mod rest;
pub mod snapshot;
pub mod thalex;

use crate::config::{NetConfig, VenueConfig, VenueKind};
use crate::net::engine::{StreamSpec, WebSocketTarget};
use crate::tls::{server_name, TlsSettings};
use std::net::ToSocketAddrs;

/// Why a venue's stream could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum VenueError {
    #[error("venue `{venue}`: cannot resolve {host}:{port}: {reason}")]
    Resolve {
        venue: String,
        host: String,
        port: u16,
        reason: String,
    },
    #[error("venue `{venue}`: TLS: {reason}")]
    Tls { venue: String, reason: String },
    #[error("venue `{venue}`: {streams} streams exceed max_streams_per_connection = {max} (a symbol's channels share one connection)")]
    TooManyStreams {
        venue: String,
        streams: usize,
        max: u32,
    },
    #[error("venue `{venue}`: its connections need more stream slots than net.max_connections = {max} (two per connection: one for rotation)")]
    TooManyConnections { venue: String, max: u32 },
    #[error("venue `{venue}`: login: {reason}")]
    Login { venue: String, reason: String },
    #[error("venue `{venue}`: kind {kind} has no network feed in this build yet")]
    Unsupported { venue: String, kind: &'static str },
}

/// The stream names of a Binance venue: `<symbol lowercase>@<channel>` for every pair, the form
/// its combined-stream endpoint takes (`/stream?streams=a/b`).
pub fn binance_streams(venue: &VenueConfig) -> Vec<String> {
    venue
        .symbols
        .iter()
        .flat_map(|symbol| {
            venue
                .channels
                .iter()
                .map(move |channel| format!("{}@{channel}", symbol.to_ascii_lowercase()))
        })
        .collect()
}

/// Resolves the venue's address and builds everything the network thread needs to open a
/// stream that names every stream in its URL (`/stream?streams=a/b`: live at once, no
/// subscription requests; what `tickwire record` uses). Blocking (DNS, reading CA files): call
/// it on the control thread.
pub fn stream_spec(venue: &VenueConfig, net: &NetConfig) -> Result<StreamSpec, VenueError> {
    build_spec(venue, net, true)
}

/// Like [`stream_spec`], for a connection that subscribes after the upgrade (the appliance's
/// connections, run by the lifecycle): the URL as configured.
pub fn subscribe_spec(venue: &VenueConfig, net: &NetConfig) -> Result<StreamSpec, VenueError> {
    build_spec(venue, net, false)
}

/// A JSON-RPC request naming streams: `{head}["a","b",..]{tail}{id}}`. The names come from a
/// validated config and fixed channel words (no quotes, no backslashes): nothing to escape.
pub fn names_request(head: &str, names: &[String], tail: &str, id: u64) -> String {
    let mut text = String::with_capacity(
        head.len() + tail.len() + 24 + names.iter().map(|name| name.len() + 3).sum::<usize>(),
    );
    text.push_str(head);
    text.push('[');
    for (index, name) in names.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push('"');
        text.push_str(name);
        text.push('"');
    }
    text.push(']');
    text.push_str(tail);
    text.push_str(&id.to_string());
    text.push('}');
    text
}

/// One connection's share of a venue: a run of its symbols, every channel of each (so that a
/// symbol's book and quotes never straddle two connections), in requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Indexes into the venue file's `symbols`.
    pub symbols: std::ops::Range<usize>,
    /// Stream names per request, in the venue's own spelling.
    pub requests: Vec<Vec<String>>,
}

/// Splits `symbols` (each with `channels` streams, named by `names`) into connections of at
/// most `max_streams` streams and requests of at most `per_request` names. `None` when one
/// symbol's channels alone exceed `max_streams`.
pub fn plan_shards(
    symbols: &[String],
    channels: usize,
    max_streams: usize,
    per_request: usize,
    names: impl Fn(&str) -> Vec<String>,
) -> Option<Vec<Shard>> {
    let symbols_per_shard = max_streams / channels.max(1);
    if symbols_per_shard == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < symbols.len() {
        let end = (start + symbols_per_shard).min(symbols.len());
        let streams: Vec<String> = symbols[start..end]
            .iter()
            .flat_map(|symbol| names(symbol))
            .collect();
        out.push(Shard {
            symbols: start..end,
            requests: streams
                .chunks(per_request.max(1))
                .map(<[String]>::to_vec)
                .collect(),
        });
        start = end;
    }
    Some(out)
}

/// The login a venue's connections start with, when its file points at a key (Thalex only).
/// The key is read and a token made once here, so that a missing or unusable key stops the
/// start with a clear error instead of failing on every connection.
pub fn login_for(venue: &VenueConfig) -> Result<Option<crate::control::links::Login>, VenueError> {
    if venue.kind != VenueKind::Thalex {
        return Ok(None);
    }
    let error = |reason: String| VenueError::Login {
        venue: venue.name.clone(),
        reason,
    };
    let Some(pem) = venue.api_key().map_err(|e| error(e.to_string()))? else {
        return Ok(None);
    };
    let key_id = venue
        .credentials
        .key_id
        .clone()
        .ok_or_else(|| error("credentials.key_id is not set".to_owned()))?;
    thalex::auth::login_token(&key_id, &pem, 0).map_err(|e| error(e.to_string()))?;
    Ok(Some(crate::control::links::Login {
        key_id,
        private_key_pem: pem,
    }))
}

/// Every stream's name as the venue spells it, symbol-major (stream `symbol * channels +
/// channel`), for logs and metrics: `btcusdt@bookTicker`, `ticker.BTC-PERPETUAL.100ms`.
pub fn stream_names(venue: &VenueConfig) -> Vec<String> {
    match venue.kind {
        VenueKind::Thalex => {
            thalex::feed::ThalexFeed::channel_names(&venue.symbols, &venue.channels)
        }
        VenueKind::Databento => databento::subscribe::stream_names(&venue.symbols, &venue.channels),
        _ => binance_streams(venue),
    }
}

/// A venue's connections: which symbols each carries and its subscription requests.
pub fn shards(venue: &VenueConfig) -> Result<Vec<Shard>, VenueError> {
    let max = venue.max_streams_per_connection as usize;
    let planned = match venue.kind {
        VenueKind::BinanceUsdmFutures => {
            binance::subscribe::shards(&venue.symbols, &venue.channels, max)
        }
        VenueKind::Thalex => thalex::subscribe::shards(&venue.symbols, &venue.channels, max),
        VenueKind::Databento => databento::subscribe::shards(&venue.symbols, &venue.channels, max),
    };
    planned.ok_or_else(|| VenueError::TooManyStreams {
        venue: venue.name.clone(),
        streams: venue.channels.len(),
        max: venue.max_streams_per_connection,
    })
}

fn build_spec(
    venue: &VenueConfig,
    net: &NetConfig,
    streams_in_url: bool,
) -> Result<StreamSpec, VenueError> {
    let mut preamble = None;
    let (path, websocket) = match venue.kind {
        VenueKind::BinanceUsdmFutures | VenueKind::Thalex if !streams_in_url => {
            (venue.url.path.clone(), true)
        }
        VenueKind::Databento if !streams_in_url => {
            preamble = Some(databento::subscribe::preamble_for(venue)?);
            (String::new(), false)
        }
        VenueKind::BinanceUsdmFutures => {
            let streams = binance_streams(venue);
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
            (
                format!("{}{separator}streams={}", venue.url.path, streams.join("/")),
                true,
            )
        }
        other => {
            return Err(VenueError::Unsupported {
                venue: venue.name.clone(),
                kind: other.as_str(),
            })
        }
    };
    let host = venue.url.host.as_str();
    let port = venue.url.port;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|error| error.to_string())
        .and_then(|mut addrs| addrs.next().ok_or_else(|| "no address".to_owned()))
        .map_err(|reason| VenueError::Resolve {
            venue: venue.name.clone(),
            host: host.to_owned(),
            port,
            reason,
        })?;
    let secure = venue.url.scheme.is_tls();
    let tls = if secure {
        let tls_error = |reason: String| VenueError::Tls {
            venue: venue.name.clone(),
            reason,
        };
        let config = TlsSettings::from_venue(&venue.tls)
            .build()
            .map_err(|error| tls_error(error.to_string()))?;
        let name = server_name(host, venue.tls.sni.as_deref())
            .map_err(|error| tls_error(error.to_string()))?;
        Some((config, name))
    } else {
        None
    };
    Ok(StreamSpec {
        addr,
        tls,
        preamble,
        websocket: websocket.then(|| WebSocketTarget {
            host: host.to_owned(),
            port,
            path,
            secure,
            max_message_bytes: net.max_message_bytes as usize,
        }),
    })
}

/// A venue's decoding feed for the decoder stage, and the counters the control thread reads.
pub struct VenueFeed {
    pub feed: Box<dyn feed::Feed>,
    pub counters: binance::feed::FeedCounters,
}

/// Builds the feed for venue `venue_id`, whose instruments take ids from `instrument_base` on
/// (one per symbol, in the file's order). (`run --print-events` prints at the strategy stage,
/// `strategy::print`, not in the feeds.)
pub fn feed_for(
    venue_id: crate::event::VenueId,
    venue: &VenueConfig,
    instrument_base: crate::event::InstrumentId,
) -> Result<VenueFeed, VenueError> {
    match venue.kind {
        VenueKind::BinanceUsdmFutures => {
            let books = venue
                .channels
                .iter()
                .any(|channel| crate::config::is_diff_depth_channel(channel));
            let sync = binance::sync::SyncConfig {
                snapshot_limit: venue.book_depth,
                ..binance::sync::SyncConfig::default()
            };
            let (feed, counters) = binance::feed::BinanceFeed::new(binance::feed::FeedConfig {
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
        VenueKind::Thalex => {
            let (feed, counters) = thalex::feed::ThalexFeed::new(thalex::feed::FeedConfig {
                venue_id,
                venue_name: venue.name.clone(),
                symbols: venue.symbols.clone(),
                channels: venue.channels.clone(),
                instrument_base,
            });
            Ok(VenueFeed {
                feed: Box::new(feed),
                counters,
            })
        }
        VenueKind::Databento => {
            let (feed, counters) =
                databento::feed::DatabentoFeed::new(databento::feed::FeedConfig {
                    venue_id,
                    venue_name: venue.name.clone(),
                    symbols: venue.symbols.clone(),
                    channels: venue.channels.clone(),
                    instrument_base,
                    recovery: venue
                        .databento
                        .as_ref()
                        .map(|config| config.recovery)
                        .unwrap_or_default(),
                });
            Ok(VenueFeed {
                feed: Box::new(feed),
                counters,
            })
        }
    }
}

/// How the control thread fetches a venue's REST snapshots, when it has a REST endpoint.
pub fn snapshot_target(
    venue: &VenueConfig,
    instrument_base: crate::event::InstrumentId,
) -> Result<Option<snapshot::SnapshotTarget>, VenueError> {
    let Some(rest_url) = &venue.rest_url else {
        return Ok(None);
    };
    let client = rest::client_for(rest_url, &venue.tls, std::time::Duration::from_secs(10))
        .map_err(|reason| VenueError::Tls {
            venue: venue.name.clone(),
            reason,
        })?;
    Ok(Some(snapshot::SnapshotTarget {
        client,
        symbols: venue.symbols.clone(),
        depth: venue.book_depth,
        instrument_base,
    }))
}
