//! Venues: how a venue file becomes connections, and (in later work) each venue's decoders,
//! subscriptions and book synchronisation under `venue/<name>/`.
//!
//! For now this is the part the control thread needs to open a venue's stream: resolve its
//! address (DNS may block: control thread only), build its TLS settings, and compose the
//! WebSocket request target from the configured symbols and channels.

pub mod binance;

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
    #[error("venue `{venue}`: {streams} streams exceed max_streams_per_connection = {max}; splitting a venue across connections is not supported yet")]
    TooManyStreams {
        venue: String,
        streams: usize,
        max: u32,
    },
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

/// Resolves the venue's address and builds everything the network thread needs to open its
/// stream. Blocking (DNS, reading CA files): call it on the control thread.
pub fn stream_spec(venue: &VenueConfig, net: &NetConfig) -> Result<StreamSpec, VenueError> {
    let (path, websocket) = match venue.kind {
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
        websocket: websocket.then(|| WebSocketTarget {
            host: host.to_owned(),
            port,
            path,
            secure,
            max_message_bytes: net.max_message_bytes as usize,
        }),
    })
}
