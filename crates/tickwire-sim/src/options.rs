//! What a simulator run is told: where to listen, how fast to replay, the venue's limits and the
//! faults to inject. A plain struct, so that the CLI, the demo and the tests all fill it the same
//! way; the defaults are Binance USDⓈ-M Futures' documented behaviour.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::ring::Producer;

/// How the pacer spaces the source's messages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Each message is due `SimMessage::offset_ns / speed` after pacing started: speed 1 replays a
    /// capture as recorded, 10 ten times faster.
    Recorded { speed: f64 },
    /// Each message is written as soon as the one before it was; TCP back-pressure from the
    /// slowest subscribed client is the only brake.
    AsFastAsPossible,
}

/// When the pacer pulls the first message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Start {
    /// Once a WebSocket connection is subscribed to at least one stream, so that a client that
    /// connects after start-up still sees the replay from its first message.
    #[default]
    FirstSubscriber,
    /// At once: messages for streams nobody has subscribed yet are consumed and dropped, as the
    /// venue does.
    Immediately,
}

/// One latency stamp: the message's key (`SimMessage::stamp_key`) and when the simulator handed
/// it to TLS and the kernel, in ns since the epoch on the options' clock. The strategy side's type,
/// so the ring runs straight from the simulator to `strategy::stamps::StampMatcher`.
pub use tickwire::strategy::stamps::Stamp;

/// Fault injection, all off by default. Connection faults (everything but `rest_errors`,
/// `rest_error_every`, `handshake_delay` and `wrong_host_cert`) apply to the first
/// `fault_connections` WebSocket connections, counted in the order their upgrade completed, so
/// that a client that reconnects eventually gets a clean connection. Message counts are data messages sent on that connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Faults {
    /// After N data messages, a close frame with code 1000, then the TCP close.
    pub close_after: Option<u64>,
    /// After N data messages, a TCP reset (SO_LINGER 0, then close) without a close frame.
    pub reset_after: Option<u64>,
    /// After N data messages, no data and no server pings are sent for the duration while TCP
    /// stays open; data messages due meanwhile are lost for that connection. Replies to the
    /// client's own requests and pings still go out.
    pub stall_after: Option<(u64, Duration)>,
    /// Every Nth data message goes out truncated to half its length: valid UTF-8, invalid JSON.
    pub malformed_every: Option<u64>,
    /// After N data messages, one text frame of the given size in bytes, once: a JSON object
    /// whose one string is padded to the size.
    pub oversized_after: Option<(u64, usize)>,
    /// Each data message is sent as K frames: a text frame and K-1 continuations (fewer when the
    /// message has fewer than K bytes).
    pub fragment_into: Option<u32>,
    /// After N data messages, the next message of a depth stream (`<symbol>@depth..`) is not sent
    /// on the connection, once: the client's `pu` chain breaks there.
    pub skip_depth_after: Option<u64>,
    /// The first K REST depth requests are answered 503 with a JSON error body.
    pub rest_errors: u32,
    /// Every Nth REST depth request (counting from the first, those failed by `rest_errors`
    /// included; 0: none) is answered 503 as well: a REST error that comes back for as long as
    /// the run lasts, for soak tests.
    pub rest_error_every: Option<u32>,
    /// Each of the first `fault_connections` accepted TCP connections (WebSocket or REST: the
    /// kind is unknown before the handshake) waits this long before the TLS handshake starts.
    pub handshake_delay: Option<Duration>,
    /// The server certificate names only `wrong-host.invalid`, so a client verifying the name
    /// it connected to fails.
    pub wrong_host_cert: bool,
    /// Text requests (SUBSCRIBE, ...) on a faulty connection are read and ignored: no reply,
    /// no effect, as if the venue lost them.
    pub ignore_requests: bool,
    /// Binance Spot SBE: after N data messages, the documented `serverShutdown` event (a JSON
    /// text frame, `{"e":"serverShutdown","E":<ms>}`), then a close frame (1001) at once.
    pub server_shutdown_after: Option<u64>,
    /// How many connections the connection faults apply to.
    pub fault_connections: u32,
    /// Each faulty connection gets one of the configured `stall_after`, `close_after` and
    /// `reset_after` faults rather than all of them, in turn by upgrade order (connection 0 the
    /// first configured of the three, connection 1 the next, ...): with `fault_connections`
    /// large, a soak test meets every kind again and again on one simulator.
    pub rotate_faults: bool,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            close_after: None,
            reset_after: None,
            stall_after: None,
            malformed_every: None,
            oversized_after: None,
            fragment_into: None,
            skip_depth_after: None,
            rest_errors: 0,
            rest_error_every: None,
            handshake_delay: None,
            wrong_host_cert: false,
            rotate_faults: false,
            ignore_requests: false,
            server_shutdown_after: None,
            fault_connections: 1,
        }
    }
}

/// Which Binance venue the server is: the REST depth path and its limits, the shape of request
/// errors and which stream names `SUBSCRIBE` takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimVenue {
    /// Binance USDⓈ-M Futures: `/fapi/v1/depth`, errors as `{"error":{..},"id":..}`.
    #[default]
    BinanceUsdmFutures,
    /// Binance Spot ("WebSocket Streams for Binance", `rest-api.md`; binance-spot-api-docs commit
    /// a5e0bc3): `/api/v3/depth` (limit 1 to 5000, default 100), errors as
    /// `{"code":..,"msg":..,"id":..}`, only Spot's stream names subscribable. Its messages come
    /// through [`crate::spot::SpotSource`], in Spot's shapes.
    BinanceSpot,
    /// Binance Spot's SBE market data streams (`sbe-market-data-streams.md`): the single entry
    /// point, `@trade`, `@bestBidAsk`, `@depth` and `@depth20` as binary SBE frames made by
    /// [`crate::sbe::SbeSource`], an `X-MBX-APIKEY` header required on every upgrade, JSON
    /// control messages and `/api/v3/depth` as [`SimVenue::BinanceSpot`].
    BinanceSpotSbe,
}

impl SimVenue {
    /// Binance Spot, JSON or SBE: Spot's REST path, limits, entry point and error shapes.
    pub fn is_spot(self) -> bool {
        matches!(self, SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe)
    }
}

/// Everything a simulator run needs besides its source.
pub struct SimOptions {
    /// Which venue the server is.
    pub venue: SimVenue,
    /// Where the one TLS port (WebSocket and REST) listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Where `ca.pem` (the run's throwaway CA) is written; created if missing.
    pub cert_dir: PathBuf,
    /// The server certificate's subject alternative names: IP literals become IP SANs.
    pub cert_hosts: Vec<String>,
    pub pace: Pace,
    pub start: Start,
    /// Binance USDⓈ-M: "The websocket server will send a ping frame every 3 minutes".
    pub ping_interval: Duration,
    /// Binance USDⓈ-M: "If the websocket server does not receive a pong frame back from the
    /// connection within a 10 minute period, the connection will be disconnected".
    pub pong_timeout: Duration,
    /// Binance USDⓈ-M: "WebSocket connections have a limit of 10 incoming messages per second".
    pub max_incoming_per_sec: u32,
    /// Binance USDⓈ-M: "A single connection can listen to a maximum of 1024 streams".
    pub max_streams_per_connection: usize,
    /// How long one write to a client may block before that client is dropped, so that a slow
    /// reader cannot stall the pacer (and so every other client) for longer.
    pub write_timeout: Duration,
    pub faults: Faults,
    /// Binance Spot SBE: the one API key upgrades must carry in `X-MBX-APIKEY`; `None` accepts
    /// any non-empty key (a missing or empty one is refused all the same).
    pub api_key: Option<String>,
    /// Latency stamps for benchmarks: see [`Stamp`] and the module documentation of `server`.
    pub stamps: Option<Producer<Stamp>>,
    /// The clock of the stamps.
    pub clock: Clock,
}

impl SimOptions {
    /// The defaults on `127.0.0.1:0`, with `cert_dir` for `ca.pem`. The CLI sets `listen` to
    /// `127.0.0.1:9443`.
    pub fn new(cert_dir: impl Into<PathBuf>) -> SimOptions {
        SimOptions {
            venue: SimVenue::BinanceUsdmFutures,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            cert_dir: cert_dir.into(),
            cert_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            pace: Pace::Recorded { speed: 1.0 },
            start: Start::FirstSubscriber,
            ping_interval: Duration::from_secs(180),
            pong_timeout: Duration::from_secs(600),
            max_incoming_per_sec: 10,
            max_streams_per_connection: 1024,
            write_timeout: Duration::from_secs(5),
            faults: Faults::default(),
            api_key: None,
            stamps: None,
            clock: Clock::monotonic(),
        }
    }

    /// Binance Spot's documented behaviour ("WebSocket Streams for Binance", "General WSS
    /// information" and "WebSocket Limits"): a ping every 20 s, a connection without a pong
    /// for a minute closed, 5 incoming messages per second, 1024 streams per connection.
    pub fn binance_spot(cert_dir: impl Into<PathBuf>) -> SimOptions {
        SimOptions {
            venue: SimVenue::BinanceSpot,
            ping_interval: Duration::from_secs(20),
            pong_timeout: Duration::from_secs(60),
            max_incoming_per_sec: 5,
            max_streams_per_connection: 1024,
            ..SimOptions::new(cert_dir)
        }
    }

    /// Binance Spot's SBE market data streams ("SBE Market Data Streams"): Spot's limits (a
    /// ping every 20 s, a minute for the pong, 5 incoming messages per second, 1024 streams).
    pub fn binance_spot_sbe(cert_dir: impl Into<PathBuf>) -> SimOptions {
        SimOptions {
            venue: SimVenue::BinanceSpotSbe,
            ..SimOptions::binance_spot(cert_dir)
        }
    }
}
