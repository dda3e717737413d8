//! What the control side needs from a venue, in one interface: [`Protocol`].
//!
//! A venue implements it with a unit struct in `venue/<name>/protocol.rs`; the config's registry
//! (`config::VenueKind::protocol`, the one `match` over venue kinds) hands it out, and everything
//! else (the config's checks, the stream plan, the control plane's requests and its reading of
//! replies, the decoder feed, the REST snapshot target) goes through it. Adding a venue is a new
//! folder with its protocol plus one registration line.
//!
//! **Invariant:** nothing here does I/O except where a method says so (`transport` reads key
//! files, `snapshot_target` builds an HTTP client); a reply from the venue is read, never
//! trusted: no method panics on what a venue sent.

use super::feed::{StreamActivity, VenueReply};
use super::login::Login;
use super::{Shard, VenueError, VenueFeed};
use crate::config::{Scheme, VenueConfig};
use crate::event::{InstrumentId, VenueId};
use crate::net::engine::PreambleMaker;
use std::ops::Range;

/// How a venue's stream is carried once the socket (and TLS) is up.
pub enum Transport {
    /// A WebSocket upgrade to `path` (with its query).
    WebSocket { path: String },
    /// A raw stream that starts with the venue's own opening exchange (an authentication).
    Raw { preamble: PreambleMaker },
    /// No stream: datagram sockets (multicast lines, a request socket) that the network
    /// thread opens in the venue's slot; live when datagrams flow.
    Datagram { spec: crate::net::udp::DatagramSpec },
}

/// Everything a subscription request may be made from: the request's id and stream names, and
/// the shard it is for (a Databento session request replays from what the feed last saw).
pub struct SubscribeContext<'a> {
    pub id: u64,
    /// The stream names of the request, in the venue's spelling.
    pub names: &'a [String],
    pub venue: &'a VenueConfig,
    /// The shard's symbols: indexes into the venue file's `symbols`.
    pub symbols: Range<usize>,
    /// The shard's streams in the venue's activity table.
    pub streams: &'a [usize],
    pub activity: &'a StreamActivity,
}

/// How `tickwire record --venue` reaches every stream of a venue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordMode {
    /// Connections whose URL names every stream, live at once with no request:
    /// [`Protocol::transport`] with `streams_in_url`, one connection per
    /// [`Protocol::record_paths`] entry (Binance).
    StreamsInUrl,
    /// The appliance's own connections, one per shard, each sent the venue's login (when its
    /// file has a key) and its subscription requests once open (Thalex's JSON-RPC, Databento's
    /// gateway session).
    Subscribe,
}

/// What a [`crate::venue::feed::ReplyKind::Response`] means, as the venue's protocol reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// The answer to request `reply.id`: accepted, or refused with `reply.error`.
    Answer,
    /// The venue started the session: that answers the connection's oldest outstanding request
    /// (the reply's id names only the connection).
    SessionStarted,
    /// The venue refused the request for its rate limit: the connection starts again after the
    /// backoff rather than run without it.
    Throttled,
}

/// What a [`crate::venue::feed::ReplyKind::Notice`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoticeKind {
    /// An error on a running session; `what` names the venue's code.
    Error { what: String },
    /// tickwire reads too slowly for the venue.
    SlowReader,
    /// Anything else (an acknowledgement, a replay completed); `what` names the venue's code.
    Other { what: String },
}

/// A notice read by the venue's protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub kind: NoticeKind,
    /// The feed cannot read the connection's stream any further: start afresh.
    pub stream_broken: bool,
}

/// A venue's rules for the parts of its file that not every venue uses; the config checks the
/// file against them.
#[derive(Clone, Copy, Debug)]
pub struct FileRules {
    pub rest_url: RestUrl,
    pub key: KeyUse,
    /// The name of the venue's own table in its file (Databento's `[databento]`: a gateway
    /// session's settings), which [`Protocol::check_table`] reads and checks in the venue's
    /// folder; `None`: the file has none. The config keeps the table raw
    /// (`VenueConfig::table`), refuses it on a kind that does not name it, and lists it among
    /// the file's valid keys for the kind that does.
    pub table: Option<&'static str>,
}

/// What [`Protocol::check_table`] sees of a venue file being checked, and may change.
pub struct TableCheck<'a> {
    /// The file's `channels`.
    pub channels: &'a [String],
    /// The file's `[lifecycle]` as written, before the kind's heartbeat defaults are applied:
    /// the venue may change a default (Databento turns the default rotation off).
    pub lifecycle: &'a mut crate::config::LifecycleConfig,
    /// The read timeout's default (the kind's `default_heartbeat_ms`); the table may set
    /// another (Databento's follows its heartbeat interval).
    pub read_timeout_default: Option<u64>,
    /// What is wrong.
    pub problems: Vec<TableProblem>,
}

/// A problem [`Protocol::check_table`] found in a venue file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableProblem {
    /// Dotted: the table's own key, such as `databento.dataset`, or another of the file's keys
    /// the table rules on.
    pub key: String,
    pub message: String,
    /// The problem is with the value (the error points at it rather than at the key).
    pub at_value: bool,
}

impl TableCheck<'_> {
    /// Records a problem at `key` (dotted).
    pub fn problem(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(TableProblem {
            key: key.to_owned(),
            message: message.into(),
            at_value: false,
        });
    }
}

/// What a venue does with `rest_url`.
#[derive(Clone, Copy, Debug)]
pub enum RestUrl {
    /// The books of some channels start from a REST snapshot: a file that lists one of them
    /// ([`Protocol::channel_needs_rest_snapshot`]) needs `rest_url`. `channels` names them for
    /// the config's message ("a diff depth channel (depth, depth@...)").
    NeededFor { channels: &'static str },
    /// The venue has no use for one, for the reason `why`: giving one is a mistake.
    Unused { why: &'static str },
    /// Accepted, and used for REST snapshots when a feed asks for one.
    Accepted,
}

/// What a venue does with a key (`credentials.api_key_env` or `credentials.api_key_credential`).
#[derive(Clone, Copy, Debug)]
pub enum KeyUse {
    /// Nothing: its market data is public.
    Unused,
    /// An optional key that signs a login, named by `credentials.key_id`; the messages for a
    /// key without its id and an id without its key.
    SignedLogin {
        missing_key_id: &'static str,
        key_id_without_key: &'static str,
    },
    /// A key is required; the message when there is none.
    Required { missing: &'static str },
}

/// How a venue's connections are kept alive from tickwire's side (the
/// `lifecycle.ping_interval_ms` timer): a WebSocket ping frame, an application message of the
/// venue's, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// A WebSocket ping frame (RFC 6455 section 5.5.2); the pong shows only as a read.
    Frame,
    /// The venue's own ping message, sent as a text frame (Bybit's `{"op":"ping"}`); its answer
    /// is the feed's to read.
    Message(&'static str),
    /// Both: a ping frame and then the message.
    Both(&'static str),
}

impl Heartbeat {
    /// Whether a ping frame is sent.
    pub fn frame(self) -> bool {
        matches!(self, Heartbeat::Frame | Heartbeat::Both(_))
    }

    /// The application message sent, if any.
    pub fn message(self) -> Option<&'static str> {
        match self {
            Heartbeat::Frame => None,
            Heartbeat::Message(text) | Heartbeat::Both(text) => Some(text),
        }
    }
}

/// A venue's protocol, as the config and the control plane use it. Implemented by one unit
/// struct per venue; see the module doc.
pub trait Protocol: Sync {
    /// Schemes valid for the venue file's `url`.
    fn feed_schemes(&self) -> &'static [Scheme];

    /// How the venue uses the optional parts of its file.
    fn file_rules(&self) -> FileRules;

    /// Whether the venue file's `url` (its scheme already checked) names a place the venue
    /// serves; the error is the config's message, saying what to write instead. The default
    /// takes any path.
    fn check_url(&self, _url: &crate::config::Endpoint) -> Result<(), String> {
        Ok(())
    }

    /// The heartbeat defaults: (ping interval, read timeout) in ms.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>);

    /// What tickwire sends every ping interval. The default: a WebSocket ping frame.
    fn heartbeat(&self) -> Heartbeat {
        Heartbeat::Frame
    }

    /// Whether `channel`'s books start from a REST snapshot, so that the file needs `rest_url`
    /// (when its [`FileRules::rest_url`] is [`RestUrl::NeededFor`]). The default: none does.
    fn channel_needs_rest_snapshot(&self, _channel: &str) -> bool {
        false
    }

    /// Whether `symbol` is one the venue can name; the error is the config's message.
    fn check_symbol(&self, symbol: &str) -> Result<(), String>;

    /// Whether `channel` is one of the venue's channels, given the channels listed before it;
    /// the error is the config's message.
    fn check_channel(&self, channel: &str, earlier: &[String]) -> Result<(), String>;

    /// Every stream's name as the venue spells it, symbol-major (stream `symbol * channels +
    /// channel`), for logs and metrics.
    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String>;

    /// The venue's connections: which symbols each carries and its subscription requests, at
    /// most `max_streams` streams each. `None` when one symbol's channels alone exceed it.
    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>>;

    /// Whether a name of a subscription request is one of the venue's streams (not a
    /// connection-wide channel such as Thalex's `system`).
    fn names_a_stream(&self, name: &str) -> bool;

    /// How the stream is carried: the WebSocket path, or the raw stream's opening exchange.
    /// With `streams_in_url`, a stream that names every stream in its URL, live at once with no
    /// subscription request (what `tickwire record` uses), where the venue has one. May read
    /// the venue's key (control thread only).
    fn transport(&self, venue: &VenueConfig, streams_in_url: bool)
        -> Result<Transport, VenueError>;

    /// Extra header fields of every WebSocket upgrade, such as an API key the venue wants in a
    /// header (Binance Spot SBE's `X-MBX-APIKEY`). Reads the key (control thread only); an
    /// unusable key is an error that stops the start. The default: none.
    fn upgrade_headers(&self, _venue: &VenueConfig) -> Result<Vec<(String, String)>, VenueError> {
        Ok(Vec::new())
    }

    /// How `tickwire record --venue` reaches the venue's streams. The default:
    /// [`RecordMode::StreamsInUrl`].
    fn record_mode(&self) -> RecordMode {
        RecordMode::StreamsInUrl
    }

    /// The DBN dataset the venue's events are recorded under (`[record]`, `tickwire record
    /// --events`) when `[record] datasets` names none for it.
    fn dbn_dataset(&self, venue: &VenueConfig) -> String;

    /// The WebSocket paths of a recording (`tickwire record --venue`), one connection each,
    /// for a venue whose streams live on several entry points; empty (the default): one
    /// connection, at [`Protocol::transport`]'s path with `streams_in_url`.
    fn record_paths(&self, _venue: &VenueConfig) -> Result<Vec<String>, VenueError> {
        Ok(Vec::new())
    }

    /// The login a connection starts with, when the venue file points at a key. Reads the key
    /// and checks it can sign, so that an unusable key stops the start with a clear error.
    fn login(&self, venue: &VenueConfig) -> Result<Option<Login>, VenueError>;

    /// The login request with `id`, made now (a token's issue time is the wall clock's).
    fn login_request(&self, id: u64, login: &Login) -> Result<String, String>;

    /// The subscription request for `request.names`; `None` when the venue file lacks what it
    /// is made from (nothing is sent, and the acknowledgement timeout recycles the connection).
    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String>;

    /// Whether an accepted subscription's answer lists the streams the venue accepted (the feed
    /// marks them in the activity table), so that the ones it left out can be counted.
    fn answer_lists_accepted(&self) -> bool;

    /// What a response to a request means.
    fn read_response(&self, reply: &VenueReply) -> Response;

    /// What a notice reports. The default is for a venue whose feed sends no notices of its
    /// own: should one come, it is counted as an error when it carries one, else as a plain
    /// notice.
    fn read_notice(&self, reply: &VenueReply) -> Notice {
        let kind = match reply.error {
            Some(code) => NoticeKind::Error {
                what: format!("code {code}"),
            },
            None => NoticeKind::Other {
                what: format!("code {}", reply.id & 0xff),
            },
        };
        Notice {
            kind,
            stream_broken: false,
        }
    }

    /// The decoder stage's feed for venue `venue_id`, whose instruments take ids from
    /// `instrument_base` on (one per symbol, in the file's order).
    fn feed(
        &self,
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError>;

    /// How the control thread fetches the venue's REST book snapshots: its path, body parser
    /// and instrument list ([`super::snapshot::SnapshotApi`]) on the venue file's `rest_url`
    /// (`venue::rest_snapshot_target_at`). The default: none, for a venue whose books start
    /// from the stream's own snapshots.
    fn snapshot_target(
        &self,
        _venue: &VenueConfig,
        _instrument_base: InstrumentId,
    ) -> Result<Option<super::snapshot::SnapshotTarget>, VenueError> {
        Ok(None)
    }

    /// Whether `depth`, a `book_depth` the venue file sets (the REST snapshot's `limit`), is
    /// one the venue serves; the error is the config's message. The default, for a venue with
    /// no REST snapshots: the key has no use.
    fn check_book_depth(&self, _depth: u32) -> Result<(), String> {
        Err("has no use for this venue: its books start from the stream's own snapshots".to_owned())
    }

    /// The requests that make the venue send stream `name` afresh (its book's snapshot), on a
    /// connection that carries it, for a feed that asked for it
    /// ([`crate::venue::feed::ReplyKind::Resubscribe`]: a break in the book's sequence, a
    /// crossed book). Empty (the default): the connection is recycled instead, and its new
    /// subscriptions bring every book afresh.
    fn resubscribe_requests(&self, _name: &str) -> Vec<String> {
        Vec::new()
    }

    /// Checks the venue's own table ([`FileRules::table`], `None` when the file has none; read
    /// into the venue's typed config with `config::read_venue_table`) and the rest of the file
    /// against it. Called for every file of the kind, so a venue that needs the table says so
    /// here. The default: nothing to check (a kind with no table).
    fn check_table(&self, _table: Option<&toml::Value>, _check: &mut TableCheck<'_>) {}

    /// How many instrument ids the venue's feed may use from its base: one per symbol of the
    /// file by default; more for a feed that names instruments as they come (a `*` that
    /// publishes every stock of an exchange feed).
    fn instrument_span(&self, venue: &VenueConfig) -> InstrumentId {
        venue.symbols.len() as InstrumentId
    }

    /// Whether the venue's feed names its instruments in the bus's directory itself, as the
    /// feed names them (a `*` that publishes every stock of an exchange feed, each under the
    /// name its own stock directory gives), so that the file's symbols are not listed there.
    /// The default: no, the file's symbols are the instruments.
    fn names_instruments_live(&self, _venue: &VenueConfig) -> bool {
        false
    }

    /// `tickwire decode --venue <label>`: the venue's capture decoder
    /// ([`super::capture::CaptureDecoder`], in its own folder), `None` (the default) for a kind
    /// whose captures another kind's decoder reads or that has none.
    fn capture_decoder(&self) -> Option<&'static dyn super::capture::CaptureDecoder> {
        None
    }
}
