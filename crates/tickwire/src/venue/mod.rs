//! Venues: each venue's decoders, book synchronisation and protocol under `venue/<name>/`, and
//! how a venue file becomes connections.
//!
//! - [`protocol`]: the [`protocol::Protocol`] trait, everything the config and the control side
//!   need from a venue; each venue implements it in `venue/<name>/protocol.rs` and
//!   `config::VenueKind::protocol` hands it out. The functions here dispatch through it.
//! - [`login`]: a venue login's key material.
//! - [`feed`]: the decoder stage's `Feed` trait and what feeds share.
//! - [`rest`], [`snapshot`]: REST book snapshots, fetched off the hot path.
//! - [`resolve`]: a venue's address, looked up at every connection attempt on a worker thread.
//! - [`capture`]: `tickwire decode`'s interface to a venue (`CaptureDecoder`), implemented in
//!   each venue's `capture.rs`.
//!
//! This module also prepares a venue's stream for the network thread (its TLS settings, its
//! WebSocket target or preamble: [`PreparedStream`]), to which each attempt adds the address it
//! resolved.

pub mod binance;
pub mod binance_spot;
pub mod bybit;
pub mod capture;
pub mod databento;
pub mod emit;
pub mod feed;
pub mod json;
pub mod login;
pub mod nasdaq_itch;
pub mod okx;
pub mod protocol;
pub mod resolve;
pub mod rest;
pub mod snapshot;
pub mod thalex;

use crate::config::{NetConfig, VenueConfig};
use crate::net::engine::{StreamSpec, WebSocketTarget};
use crate::tls::{server_name, TlsSettings};
use protocol::Transport;
use std::net::SocketAddr;

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
    /// A kind whose live transport the network thread cannot open yet.
    #[error("venue `{venue}`: kind {kind} cannot run live: {why}")]
    NotLive {
        venue: String,
        kind: &'static str,
        why: &'static str,
    },
    /// A datagram venue's sockets cannot be described (an interface with no IPv4 address, a
    /// group that is not one).
    #[error("venue `{venue}`: {reason}")]
    Datagram { venue: String, reason: String },
    #[error("venue `{venue}`: login: {reason}")]
    Login { venue: String, reason: String },
    /// A connection whose URL names every stream, asked of a venue that has none (its streams
    /// are subscribed to: `Protocol::record_mode` says so).
    #[error(
        "venue `{venue}`: kind {kind} names no stream in its URL; its streams are subscribed to"
    )]
    Unsupported { venue: String, kind: &'static str },
}

/// One connection of a recording (`tickwire record --venue`): the stream to open, and the
/// requests to send once it is open, in order (the login, then the subscriptions; none for a
/// stream whose URL names its streams).
pub struct RecordConnection {
    pub spec: StreamSpec,
    pub requests: Vec<String>,
}

/// Resolves the venue's address and builds the connections of a recording, as the venue's
/// protocol says (`Protocol::record_mode`): the streams that name every stream in their URL
/// ([`stream_specs`]), or the appliance's own connections, one per shard, each with the venue's
/// login (when its file has a key; the token is made now) and its shard's subscription requests.
/// Blocking (DNS, reading CA and key files): call it on the control thread.
pub fn record_connections(
    venue: &VenueConfig,
    net: &NetConfig,
) -> Result<Vec<RecordConnection>, VenueError> {
    let protocol = venue.kind.protocol();
    if protocol.record_mode() == protocol::RecordMode::StreamsInUrl {
        return Ok(stream_specs(venue, net)?
            .into_iter()
            .map(|spec| RecordConnection {
                spec,
                requests: Vec::new(),
            })
            .collect());
    }
    let prepared = prepare(venue, net, false)?;
    if prepared.datagram.is_some() {
        return Err(VenueError::NotLive {
            venue: venue.name.clone(),
            kind: venue.kind.as_str(),
            why: "`tickwire record` records streams; capture a datagram feed with a packet \
                  capture (tcpdump -w) and read it with `tickwire decode`",
        });
    }
    let addr = resolve_prepared(venue, &prepared)?;
    let login = login_for(venue)?;
    let channels = venue.channels.len().max(1);
    let activity = feed::StreamActivity::new(venue.symbols.len(), channels);
    let mut next_id = 1u64;
    let mut out = Vec::new();
    for shard in shards(venue)? {
        let mut requests = Vec::new();
        if let Some(login) = &login {
            let text =
                protocol
                    .login_request(next_id, login)
                    .map_err(|reason| VenueError::Login {
                        venue: venue.name.clone(),
                        reason,
                    })?;
            requests.push(text);
            next_id += 1;
        }
        let streams: Vec<usize> = shard
            .symbols
            .clone()
            .flat_map(|symbol| {
                shard
                    .channels
                    .iter()
                    .map(move |&channel| symbol * channels + channel)
            })
            .collect();
        for names in &shard.requests {
            let request = protocol::SubscribeContext {
                id: next_id,
                names,
                venue,
                symbols: shard.symbols.clone(),
                streams: &streams,
                activity: &activity,
            };
            next_id += 1;
            if let Some(text) = protocol.subscribe_request(&request) {
                requests.push(text);
            }
        }
        out.push(RecordConnection {
            spec: prepared.at_path(addr, shard.path.as_deref()),
            requests,
        });
    }
    Ok(out)
}

/// The address of a prepared stream: an IP literal as it is, a name looked up now.
fn resolve_prepared(
    venue: &VenueConfig,
    prepared: &PreparedStream,
) -> Result<SocketAddr, VenueError> {
    resolve::literal(&prepared.host, prepared.port)
        .map_or_else(
            || resolve::Resolve::resolve(&resolve::SystemResolver, &prepared.host, prepared.port),
            Ok,
        )
        .map_err(|reason| VenueError::Resolve {
            venue: venue.name.clone(),
            host: prepared.host.clone(),
            port: prepared.port,
            reason,
        })
}

/// Resolves the venue's address and builds everything the network thread needs to open the
/// streams that name every stream in their URL (`/stream?streams=a/b`: live at once, no
/// subscription requests; what `tickwire record` uses): one connection, or one per entry point
/// for a venue whose streams live on several (`Protocol::record_paths`). Blocking (DNS, reading
/// CA files): call it on the control thread.
pub fn stream_specs(venue: &VenueConfig, net: &NetConfig) -> Result<Vec<StreamSpec>, VenueError> {
    let prepared = prepare(venue, net, true)?;
    let addr = resolve_prepared(venue, &prepared)?;
    let paths = venue.kind.protocol().record_paths(venue)?;
    if paths.is_empty() {
        return Ok(vec![prepared.at(addr)]);
    }
    Ok(paths
        .iter()
        .map(|path| prepared.at_path(addr, Some(path)))
        .collect())
}

/// Everything the network thread needs to open a connection that subscribes after the upgrade
/// (the appliance's connections, run by the lifecycle; the URL as configured), except the
/// address, which each attempt resolves afresh ([`resolve`]). Reads CA files: call it on the
/// control thread.
pub fn subscribe_spec(venue: &VenueConfig, net: &NetConfig) -> Result<PreparedStream, VenueError> {
    prepare(venue, net, false)
}

/// A venue's stream without its address: the host and port to resolve, and the layers to run.
#[derive(Clone)]
pub struct PreparedStream {
    pub host: String,
    pub port: u16,
    tls: Option<(
        std::sync::Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
    websocket: Option<WebSocketTarget>,
    preamble: Option<crate::net::engine::PreambleMaker>,
    /// A datagram venue's sockets: opened in place of a stream.
    datagram: Option<crate::net::udp::DatagramSpec>,
}

impl PreparedStream {
    /// A datagram venue's sockets (`Protocol::transport`'s `Datagram`), opened in place of a
    /// stream (`net::engine::NetEngine::open_datagrams`).
    pub fn datagram(&self) -> Option<&crate::net::udp::DatagramSpec> {
        self.datagram.as_ref()
    }

    /// The stream to open at `addr`, the address this attempt resolved.
    pub fn at(&self, addr: SocketAddr) -> StreamSpec {
        self.at_path(addr, None)
    }

    /// The stream to open at `addr` for a shard whose connections take their own WebSocket
    /// `path` (a venue with several entry points, [`Shard::path`]); `None`: the venue's own.
    pub fn at_path(&self, addr: SocketAddr, path: Option<&str>) -> StreamSpec {
        let websocket = self.websocket.clone().map(|mut target| {
            if let Some(path) = path {
                path.clone_into(&mut target.path);
            }
            target
        });
        StreamSpec {
            addr,
            tls: self.tls.clone(),
            websocket,
            preamble: self.preamble.clone(),
        }
    }
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

/// One connection's share of a venue: a run of its symbols and the channels of each that one
/// entry point serves (every channel, for a venue with one entry point; then a symbol's book
/// and quotes never straddle two connections), in requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Indexes into the venue file's `symbols`.
    pub symbols: std::ops::Range<usize>,
    /// Indexes into the venue file's `channels`, in the order each symbol's names are listed in
    /// `requests`: the shard's streams are `symbol * channels + channel` for each pair.
    pub channels: Vec<usize>,
    /// The WebSocket path (and query) of this shard's connections, for a venue whose channels
    /// live on several entry points; `None`: the venue's own (`Protocol::transport`).
    pub path: Option<String>,
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
            channels: (0..channels).collect(),
            path: None,
            requests: streams
                .chunks(per_request.max(1))
                .map(<[String]>::to_vec)
                .collect(),
        });
        start = end;
    }
    Some(out)
}

/// The login a venue's connections start with, when its file points at a key. The key is read
/// and a token made once here, so that a missing or unusable key stops the start with a clear
/// error instead of failing on every connection.
pub fn login_for(venue: &VenueConfig) -> Result<Option<login::Login>, VenueError> {
    venue.kind.protocol().login(venue)
}

/// Every stream's name as the venue spells it, symbol-major (stream `symbol * channels +
/// channel`), for logs and metrics: `btcusdt@bookTicker`, `ticker.BTC-PERPETUAL.100ms`.
pub fn stream_names(venue: &VenueConfig) -> Vec<String> {
    venue
        .kind
        .protocol()
        .stream_names(&venue.symbols, &venue.channels)
}

/// A venue's connections: which symbols each carries and its subscription requests.
pub fn shards(venue: &VenueConfig) -> Result<Vec<Shard>, VenueError> {
    let max = venue.max_streams_per_connection as usize;
    let planned = venue
        .kind
        .protocol()
        .shards(&venue.symbols, &venue.channels, max);
    planned.ok_or_else(|| VenueError::TooManyStreams {
        venue: venue.name.clone(),
        streams: venue.channels.len(),
        max: venue.max_streams_per_connection,
    })
}

fn prepare(
    venue: &VenueConfig,
    net: &NetConfig,
    streams_in_url: bool,
) -> Result<PreparedStream, VenueError> {
    let (path, websocket, preamble, datagram) =
        match venue.kind.protocol().transport(venue, streams_in_url)? {
            Transport::WebSocket { path } => (path, true, None, None),
            Transport::Raw { preamble } => (String::new(), false, Some(preamble), None),
            Transport::Datagram { spec } => (String::new(), false, None, Some(spec)),
        };
    let headers = if websocket {
        venue.kind.protocol().upgrade_headers(venue)?
    } else {
        Vec::new()
    };
    let host = venue.url.host.as_str();
    let port = venue.url.port;
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
    Ok(PreparedStream {
        host: host.to_owned(),
        port,
        tls,
        preamble,
        datagram,
        websocket: websocket.then(|| WebSocketTarget {
            host: host.to_owned(),
            port,
            path,
            secure,
            max_message_bytes: net.max_message_bytes as usize,
            headers,
        }),
    })
}

/// A venue's decoding feed for the decoder stage, and the counters the control thread reads.
pub struct VenueFeed {
    pub feed: Box<dyn feed::Feed>,
    pub counters: feed::FeedCounters,
}

/// Builds the feed for venue `venue_id`, whose instruments take ids from `instrument_base` on
/// (one per symbol, in the file's order). (`run --print-events` prints at the strategy stage,
/// `strategy::print`, not in the feeds.)
pub fn feed_for(
    venue_id: crate::event::VenueId,
    venue: &VenueConfig,
    instrument_base: crate::event::InstrumentId,
) -> Result<VenueFeed, VenueError> {
    venue.kind.protocol().feed(venue_id, venue, instrument_base)
}

/// How the control thread fetches a venue's REST snapshots, when its books start from one.
pub fn snapshot_target(
    venue: &VenueConfig,
    instrument_base: crate::event::InstrumentId,
) -> Result<Option<snapshot::SnapshotTarget>, VenueError> {
    venue
        .kind
        .protocol()
        .snapshot_target(venue, instrument_base)
}

/// The REST snapshot target of a venue file's `rest_url`, when it has one, for a venue whose
/// depth endpoint is `api` (Binance USD-M's `/fapi/v1/depth`, Spot's `/api/v3/depth`): what a
/// venue whose books start from REST snapshots returns from
/// [`protocol::Protocol::snapshot_target`].
pub fn rest_snapshot_target_at(
    venue: &VenueConfig,
    instrument_base: crate::event::InstrumentId,
    api: snapshot::SnapshotApi,
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
        api,
        symbols: venue.symbols.clone(),
        depth: venue.book_depth,
        instrument_base,
    }))
}
