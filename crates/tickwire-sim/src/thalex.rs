//! A Thalex compatible server: the venue's WebSocket JSON-RPC API (`/ws/api/v2`) over the same
//! TLS listener, certificates and RFC 6455 framing as the Binance simulator, with a synthetic
//! market made per connection and per-connection fault injection.
//!
//! What it sends is written from Thalex's own API description (`api.yaml`, OpenAPI 3.1), not
//! from what tickwire's decoder reads: `channel.rs` holds the channel grammar, `market.rs` the
//! market, `render.rs` the notification shapes; this file is the server (sockets, TLS, the
//! WebSocket, requests, pacing and faults).
//!
//! Threads (blocking sockets, as in `server`): an accept thread, and one thread per connection
//! that does everything for it: the TLS handshake and the upgrade, the client's requests, and
//! the data, paced by the socket's read timeout (the next message due is the read deadline), so
//! no thread sleeps or spins for pacing alone. One thread owning its connection needs no lock.
//!
//! Requests are `{"method":M,"params":{..},"id":N}` (any key order, `id` optional). Methods:
//! `public/login` (`params.token`, an RS512 JWT; result `{"account_number":..}`),
//! `public/subscribe`, `private/subscribe` (after a login) and `unsubscribe` (public and private
//! channels mixed), each answered with the list of the channels it applied to: it "returns
//! successfully even if no channels were valid". Replies are `{"id":N,"result":R}` or
//! `{"id":N,"error":{"code":C,"message":M}}`, `id` first since clients route on a reply's first
//! bytes, `null` when the request had none, and no `jsonrpc` key. Error codes are Thalex's
//! (from its SDKs' list): 4 throttle exceeded, 6 invalid request (not JSON, not an object, no
//! method, bad params), 7 not logged in, 19 authentication failed, 31 unknown method.
//!
//! Notifications are `{"channel_name":C,"notification":N}`; the first one of a subscription
//! holds its snapshot (the whole book, the last trades), and a book's says so with
//! `"snapshot":true` after the notification. `render.rs` lists the payload of each channel kind.
//!
//! With [`ThalexOptions::replay`], a recording (`replay.rs`) takes the synthetic market's place:
//! each connection replays the recorded notifications of the channels it subscribed.
//!
//! Decisions the documentation leaves open: the channel's `delay` is accepted and ignored (the
//! connection's `rate` paces every channel); `public/unsubscribe` and `private/unsubscribe`,
//! which the description does not have, are unknown methods (31).

mod channel;
mod market;
mod render;
mod replay;

pub use channel::{DELAYS, TRADE_CATEGORIES};
pub use market::{LOT, TICK_USD, UNDERLYINGS};
pub use render::{RECONNECT_EVENT, SNAPSHOT_TRADES};
pub use replay::{Recording, Replay, ReplayPace};

use super::accept::{self, accept_loop, Sockets};
use super::cert;
use super::frame::{self, Incoming};
use super::http;
use super::server::{SimError, CLOSE_GRACE};
use super::wire::{
    self, later, lock, send_final, send_plain, set_linger_zero, NextRequest, MAX_READ_WAIT,
    READ_BYTES, REQUEST_TIMEOUT,
};
use channel::Channel;
use market::Market;
use render::Subscription;
use replay::ReplayCursor;
use rustls::{ServerConfig, ServerConnection};
use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire::venue::thalex::auth;
use tickwire::ws::close_code;
use tickwire::ws::frame::OpCode;

/// The key id of the simulator's test key; `public/login` accepts tokens of this key only.
pub const TEST_KEY_ID: &str = "tickwire-sim-test-key";

/// The simulator's private key, PKCS#8 PEM, 2048-bit RSA. **Test only**: it is public (it is in
/// the repository), so it authenticates nothing anywhere but this simulator; make tokens for the
/// simulator with it (`venue::thalex::auth::login_token(TEST_KEY_ID, TEST_PRIVATE_KEY_PEM, now)`).
pub const TEST_PRIVATE_KEY_PEM: &str = include_str!("thalex_test_key.pem");

/// The public half of [`TEST_PRIVATE_KEY_PEM`] (PKCS#1 `RSAPublicKey` DER), which the simulator
/// verifies login tokens with.
pub fn test_public_key_der() -> Vec<u8> {
    auth::public_key_der(TEST_PRIVATE_KEY_PEM)
        .expect("the committed test key is a valid 2048-bit RSA PKCS#8 key")
}

/// The WebSocket endpoint's path; any other path is answered 404.
pub const PATH: &str = "/ws/api/v2";

/// The channels `private/subscribe` accepts (no data flows on them here).
pub const PRIVATE_CHANNELS: [&str; 3] = [
    "account.orders",
    "account.portfolio",
    "account.trade_history",
];

/// How far a login token's `iat` may be from the server's clock.
pub const LOGIN_IAT_TOLERANCE_SECS: u64 = 60;

/// The payload of the server's pings.
const PING_PAYLOAD: &[u8] = b"tickwire-sim";

/// At most this many data messages are written per wake-up; a connection that fell further
/// behind (a slow client, a busy machine) skips ahead rather than bursting.
const MAX_DATA_PER_WAKE: u32 = 64;

/// Thalex's JSON-RPC error codes, from the error code list of its SDKs.
mod codes {
    pub const THROTTLED: i64 = 4;
    pub const INVALID_REQUEST: i64 = 6;
    pub const NOT_LOGGED_IN: i64 = 7;
    pub const AUTHENTICATION_FAILED: i64 = 19;
    pub const UNKNOWN_METHOD: i64 = 31;
}

/// Fault injection for the Thalex server, all off by default. The faults apply to the first
/// `fault_connections` WebSocket connections in upgrade order, so that a client that reconnects
/// eventually gets a clean one; message counts are data messages (notifications) sent on that
/// connection, snapshots included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThalexFaults {
    /// After N data messages, a close frame with code 1000, then the TCP close.
    pub close_after: Option<u64>,
    /// After N data messages, a TCP reset (SO_LINGER 0, then close) without a close frame.
    pub reset_after: Option<u64>,
    /// After N data messages, no data and no server pings for the duration while TCP stays
    /// open; requests are still answered. Data due meanwhile is not sent later.
    pub stall_after: Option<(u64, Duration)>,
    /// During the stall, the server is hung: client pings get no pong and requests no answer.
    pub stall_silent: bool,
    /// After N data messages, `{"channel_name":"system","notification":{"event":"reconnect"}}`
    /// (to a connection subscribed to `system`; the close comes either way), then data as usual
    /// and, after the duration, a close frame with code 1001.
    pub reconnect_event_after: Option<(u64, Duration)>,
    /// How many connections the faults apply to.
    pub fault_connections: u32,
}

impl Default for ThalexFaults {
    fn default() -> ThalexFaults {
        ThalexFaults {
            close_after: None,
            reset_after: None,
            stall_after: None,
            stall_silent: false,
            reconnect_event_after: None,
            fault_connections: 1,
        }
    }
}

/// What a Thalex simulator run is told.
#[derive(Clone, Debug)]
pub struct ThalexOptions {
    /// Where the TLS port listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Where `ca.pem` (the run's throwaway CA) is written; created if missing.
    pub cert_dir: PathBuf,
    /// The instrument names channels may name; none may contain a `.`.
    pub instruments: Vec<String>,
    /// Data messages per second on each connection, over all its subscribed channels in turn.
    pub rate: f64,
    /// The synthetic market's seed: every connection sees the same market for the same seed.
    pub seed: u64,
    /// Requests per connection within any one second beyond which requests fail with code 4.
    pub request_limit_per_sec: u32,
    /// How often the server pings each connection.
    pub ping_interval: Duration,
    /// How long one write to a client may block before that client is dropped.
    pub write_timeout: Duration,
    pub faults: ThalexFaults,
    /// A recording to replay instead of the synthetic market (`rate`, `seed` and `instruments`
    /// then do not apply to data).
    pub replay: Option<Replay>,
}

/// The instruments served when none are named: perpetuals, a future, an option, an option
/// combination (whose name holds `[`, `:`, `,` and `]`) and a future roll (what
/// `recent_trades.BTCUSD.future_rolls` carries).
pub fn default_instruments() -> Vec<String> {
    [
        "BTC-PERPETUAL",
        "ETH-PERPETUAL",
        "BTC-27JUN25",
        "BTC-27JUN25-100000-C",
        "[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]",
        "[BTC-PERPETUAL:-1,BTC-27JUN25:1]",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The first `count` notifications a connection subscribed to `channels` (channel names as a
/// client subscribes to them, `ticker.BTC-PERPETUAL.100ms`) receives from a server serving
/// `instruments` with `seed`: the same market, channels taken in turn as the server takes them,
/// the clock advancing `1 / rate` s a message from `start_secs`. Without a server, for tests and
/// benchmarks that need Thalex's messages as the simulator writes them. A name the server would
/// refuse is skipped.
pub fn notifications(
    instruments: &[String],
    channels: &[&str],
    seed: u64,
    start_secs: f64,
    rate: f64,
    count: usize,
) -> Vec<String> {
    let mut market = Market::new(instruments, seed, start_secs);
    let mut subscriptions: Vec<Subscription> = channels
        .iter()
        .filter_map(|name| {
            channel::parse(name, instruments).map(|channel| Subscription::new(name, channel))
        })
        .collect();
    let mut messages = Vec::with_capacity(count);
    let mut cursor = 0;
    let mut idle = 0;
    while messages.len() < count && !subscriptions.is_empty() && idle < subscriptions.len() {
        let now_secs = start_secs + messages.len() as f64 / rate;
        let index = cursor % subscriptions.len();
        cursor = index + 1;
        match subscriptions[index].render(&mut market, now_secs) {
            Some(message) => {
                idle = 0;
                messages.push(message);
            }
            None => idle += 1,
        }
    }
    messages
}

impl ThalexOptions {
    /// The defaults on `127.0.0.1:0`, with `cert_dir` for `ca.pem`: the default instruments,
    /// 100 messages per second, seed 1, 50 requests per second, pings every 15 s.
    pub fn new(cert_dir: impl Into<PathBuf>) -> ThalexOptions {
        ThalexOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            cert_dir: cert_dir.into(),
            instruments: default_instruments(),
            rate: 100.0,
            seed: 1,
            request_limit_per_sec: 50,
            ping_interval: Duration::from_secs(15),
            write_timeout: Duration::from_secs(5),
            faults: ThalexFaults::default(),
            replay: None,
        }
    }
}

/// Counters of a run, from [`ThalexHandle::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThalexStats {
    /// TCP connections accepted.
    pub connections_accepted: u64,
    /// Completed WebSocket upgrades.
    pub websocket_connections: u64,
    pub logins_ok: u64,
    pub logins_failed: u64,
    /// `public/subscribe` and `private/subscribe` requests executed.
    pub subscribe_requests: u64,
    /// Channels named in subscribe requests that were valid, and that were dropped.
    pub channels_accepted: u64,
    pub channels_rejected: u64,
    /// Requests refused with code 4.
    pub throttled_requests: u64,
    /// WebSocket pings from clients (each answered with a pong).
    pub pings_received: u64,
    /// Notifications sent on data channels, summed over connections.
    pub data_messages_sent: u64,
    pub reconnect_events_sent: u64,
    pub closes_injected: u64,
    pub resets_injected: u64,
    pub stalls_injected: u64,
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    websocket_connections: AtomicU64,
    logins_ok: AtomicU64,
    logins_failed: AtomicU64,
    subscribe_requests: AtomicU64,
    channels_accepted: AtomicU64,
    channels_rejected: AtomicU64,
    throttled_requests: AtomicU64,
    pings_received: AtomicU64,
    data_messages_sent: AtomicU64,
    reconnect_events_sent: AtomicU64,
    closes_injected: AtomicU64,
    resets_injected: AtomicU64,
    stalls_injected: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> ThalexStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ThalexStats {
            connections_accepted: get(&self.connections_accepted),
            websocket_connections: get(&self.websocket_connections),
            logins_ok: get(&self.logins_ok),
            logins_failed: get(&self.logins_failed),
            subscribe_requests: get(&self.subscribe_requests),
            channels_accepted: get(&self.channels_accepted),
            channels_rejected: get(&self.channels_rejected),
            throttled_requests: get(&self.throttled_requests),
            pings_received: get(&self.pings_received),
            data_messages_sent: get(&self.data_messages_sent),
            reconnect_events_sent: get(&self.reconnect_events_sent),
            closes_injected: get(&self.closes_injected),
            resets_injected: get(&self.resets_injected),
            stalls_injected: get(&self.stalls_injected),
        }
    }
}

struct Shared {
    options: ThalexOptions,
    /// The gap between two data messages of a connection.
    data_interval: Duration,
    tls: Arc<ServerConfig>,
    public_key_der: Vec<u8>,
    stopping: AtomicBool,
    registry: Mutex<Sockets>,
    counters: Counters,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Makes the certificates, binds the port and starts the accept thread.
pub fn start(options: ThalexOptions) -> Result<ThalexHandle, SimError> {
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return Err(SimError::InvalidRate(options.rate));
    }
    if let Some(bad) = options
        .instruments
        .iter()
        .find(|name| name.is_empty() || name.contains('.') || name.contains('"'))
    {
        return Err(SimError::InvalidInstrument(bad.clone()));
    }
    // A rate so low that its interval overflows means "never", as `later` reads it.
    let data_interval = Duration::try_from_secs_f64(1.0 / options.rate).unwrap_or(Duration::MAX);
    let hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let (tls, ca_pem_path) = cert::server_config(&options.cert_dir, &hosts)?;
    let listener = TcpListener::bind(options.listen).map_err(|source| SimError::Listen {
        addr: options.listen,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| SimError::Listen {
        addr: options.listen,
        source,
    })?;
    let shared = Arc::new(Shared {
        options,
        data_interval: data_interval.max(Duration::from_nanos(1)),
        tls,
        public_key_der: test_public_key_der(),
        stopping: AtomicBool::new(false),
        registry: Mutex::new(Sockets::default()),
        counters: Counters::default(),
    });
    let accept_shared = Arc::clone(&shared);
    let accept = std::thread::Builder::new()
        .name("sim-thalex-accept".into())
        .spawn(move || {
            accept_loop(
                &listener,
                &accept_shared.registry,
                &|| accept_shared.stopping(),
                &accept::pause_after_failed_accept,
                "sim-thalex",
                |tcp, peer, socket_id| {
                    bump(&accept_shared.counters.connections_accepted, 1);
                    let thread_shared = Arc::clone(&accept_shared);
                    move || serve_connection(&thread_shared, tcp, peer, socket_id)
                },
            );
        })
        .map_err(SimError::Spawn)?;
    tracing::info!(%addr, ca = %ca_pem_path.display(), "Thalex simulator listening");
    Ok(ThalexHandle {
        shared,
        addr,
        ca_pem_path,
        accept: Some(accept),
    })
}

/// A running Thalex simulator; stops on [`ThalexHandle::stop`] or drop.
pub struct ThalexHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    ca_pem_path: PathBuf,
    accept: Option<JoinHandle<()>>,
}

impl ThalexHandle {
    /// The address bound (with the port chosen for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run's CA certificate, for the client to trust.
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// `wss://127.0.0.1:PORT/ws/api/v2`.
    pub fn url(&self) -> String {
        let host = match self.addr {
            SocketAddr::V4(addr) if !addr.ip().is_unspecified() => addr.ip().to_string(),
            SocketAddr::V6(addr) if !addr.ip().is_unspecified() => format!("[{}]", addr.ip()),
            _ => "127.0.0.1".to_owned(),
        };
        format!("wss://{host}:{}{PATH}", self.addr.port())
    }

    pub fn stats(&self) -> ThalexStats {
        self.shared.counters.snapshot()
    }

    /// Stops the accept thread and every connection; returns once all threads have ended
    /// (each within its write timeout at worst).
    pub fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            accept::stop_accepting(self.addr, accept);
        }
        let threads = lock(&self.shared.registry).shut_down();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for ThalexHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_connection(shared: &Arc<Shared>, tcp: Arc<TcpStream>, peer: SocketAddr, socket_id: u64) {
    if let Err(error) = run_connection(shared, &tcp) {
        if !shared.stopping() {
            tracing::info!(%peer, %error, "sim: Thalex connection ended with an error");
        }
    }
    lock(&shared.registry).remove(socket_id);
}

/// The TLS handshake and the upgrade request, then the WebSocket connection.
fn run_connection(shared: &Shared, tcp: &TcpStream) -> io::Result<()> {
    tcp.set_nodelay(true)?;
    tcp.set_write_timeout(Some(shared.options.write_timeout))?;
    tcp.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let (mut tls, mut plaintext) = wire::accept_tls(&shared.tls, tcp)?;
    let mut buf = vec![0u8; READ_BYTES];
    let request = match wire::read_request(&mut tls, tcp, &mut plaintext, &mut buf)? {
        NextRequest::Request(request) => request,
        NextRequest::Closed => return Ok(()),
        NextRequest::Invalid(error) => {
            let reply = http::response(400, "text/plain", error.to_string().as_bytes(), false);
            send_final(&mut tls, tcp, &reply)?;
            return Err(io::Error::new(io::ErrorKind::InvalidData, error));
        }
    };
    let path = request
        .target
        .split_once('?')
        .map_or(request.target.as_str(), |(path, _)| path);
    if path != PATH {
        let body = format!("not found: the WebSocket API is at {PATH}");
        let reply = http::response(404, "text/plain", body.as_bytes(), false);
        return send_final(&mut tls, tcp, &reply);
    }
    if !request.header_has_token("upgrade", "websocket") {
        let reply = http::response(
            400,
            "text/plain",
            b"this endpoint needs a WebSocket upgrade",
            false,
        );
        return send_final(&mut tls, tcp, &reply);
    }
    let response = match http::upgrade_response(&request) {
        Ok(response) => response,
        Err((status, message)) => {
            let reply = http::response(status, "text/plain", message.as_bytes(), false);
            return send_final(&mut tls, tcp, &reply);
        }
    };
    send_plain(&mut tls, tcp, &response)?;
    let index = shared
        .counters
        .websocket_connections
        .fetch_add(1, Ordering::Relaxed);
    let now = Instant::now();
    let mut connection = Connection {
        shared,
        tcp,
        tls,
        faulty: index < u64::from(shared.options.faults.fault_connections),
        state: State::Open,
        logged_in: false,
        subscriptions: Vec::new(),
        private: Vec::new(),
        cursor: 0,
        replay: ReplayCursor::default(),
        market: Market::new(
            &shared.options.instruments,
            shared.options.seed,
            unix_secs_f64(),
        ),
        requests: VecDeque::new(),
        data_sent: 0,
        next_data: now,
        next_ping: later(now, shared.options.ping_interval),
        stall_until: None,
        reconnect_close_at: None,
        done: FaultsDone::default(),
    };
    let result = connection.run(plaintext, &mut buf);
    if connection.state != State::Reset {
        let _ = tcp.shutdown(Shutdown::Both);
    }
    result
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// Our close frame is out; waiting up to [`CLOSE_GRACE`] for the echo (RFC 6455 section
    /// 7.1.1: the server then closes TCP first).
    Closing {
        since: Instant,
    },
    /// The connection is over: the thread returns and shuts TCP down.
    Done,
    /// Reset fault: linger 0 is set, and TCP must only be closed (a shutdown would send a FIN).
    Reset,
}

/// The one-shot faults already fired on a connection.
#[derive(Default)]
struct FaultsDone {
    close: bool,
    reset: bool,
    stall: bool,
    reconnect: bool,
}

/// One WebSocket connection, owned by its thread.
struct Connection<'a> {
    shared: &'a Shared,
    tcp: &'a TcpStream,
    tls: ServerConnection,
    faulty: bool,
    state: State,
    logged_in: bool,
    /// Public channels in subscription order: data goes round-robin over them.
    subscriptions: Vec<Subscription>,
    private: Vec<String>,
    /// The round-robin position in `subscriptions`.
    cursor: usize,
    /// Where the connection is in the replay, when the server replays a recording.
    replay: ReplayCursor,
    market: Market,
    /// When this connection's recent requests were executed, for the throttle.
    requests: VecDeque<Instant>,
    data_sent: u64,
    next_data: Instant,
    next_ping: Instant,
    stall_until: Option<Instant>,
    reconnect_close_at: Option<Instant>,
    done: FaultsDone,
}

/// What handling a request produced besides its reply.
enum Reply {
    Result(String),
    Error(i64, String),
}

impl wire::Session for Connection<'_> {
    fn transport(&mut self) -> (&TcpStream, &mut ServerConnection) {
        (self.tcp, &mut self.tls)
    }

    fn after_data(&mut self) -> io::Result<()> {
        Connection::after_data(self)
    }

    fn handle_incoming(&mut self, incoming: Incoming) -> io::Result<()> {
        Connection::handle_incoming(self, incoming)
    }

    fn start_close(&mut self, code: u16, reason: &str) -> io::Result<()> {
        Connection::start_close(self, code, reason)
    }

    fn run_timers(&mut self) -> io::Result<()> {
        Connection::run_timers(self)
    }

    fn next_deadline(&self, now: Instant) -> Instant {
        Connection::next_deadline(self, now)
    }

    fn over(&self) -> bool {
        Connection::over(self)
    }

    fn stopping(&self) -> bool {
        self.shared.stopping()
    }
}

impl<'a> Connection<'a> {
    fn run(&mut self, leftover: Vec<u8>, buf: &mut [u8]) -> io::Result<()> {
        wire::run_session(self, leftover, buf)
    }

    fn over(&self) -> bool {
        matches!(self.state, State::Done | State::Reset)
    }

    fn stalled(&self, now: Instant) -> bool {
        self.stall_until.is_some_and(|until| now < until)
    }

    fn has_data_channels(&self) -> bool {
        if let Some(replay) = &self.shared.options.replay {
            return self.replay.active(&replay.recording);
        }
        self.subscriptions
            .iter()
            .any(|subscription| subscription.channel != Channel::System)
    }

    /// When the thread must wake next for its own sake.
    fn next_deadline(&self, now: Instant) -> Instant {
        let mut deadline = later(now, MAX_READ_WAIT);
        match self.state {
            State::Closing { since } => return deadline.min(later(since, CLOSE_GRACE)),
            State::Done | State::Reset => return now,
            State::Open => {}
        }
        if let Some(at) = self.reconnect_close_at {
            deadline = deadline.min(at);
        }
        if let Some(until) = self.stall_until.filter(|&until| now < until) {
            return deadline.min(until);
        }
        deadline = deadline.min(self.next_ping);
        if self.has_data_channels() {
            deadline = deadline.min(self.next_data);
        }
        deadline
    }

    fn send(&mut self, plaintext: &[u8]) -> io::Result<()> {
        send_plain(&mut self.tls, self.tcp, plaintext)
    }

    fn send_text(&mut self, text: &str) -> io::Result<()> {
        let mut wire = Vec::with_capacity(text.len() + 14);
        frame::write_frame(&mut wire, true, OpCode::Text, text.as_bytes());
        self.send(&wire)
    }

    fn start_close(&mut self, code: u16, reason: &str) -> io::Result<()> {
        if self.state != State::Open {
            return Ok(());
        }
        let mut wire = Vec::new();
        frame::write_close(&mut wire, code, reason);
        self.state = State::Closing {
            since: Instant::now(),
        };
        self.send(&wire)
    }

    fn handle_incoming(&mut self, incoming: Incoming) -> io::Result<()> {
        let hung =
            self.faulty && self.shared.options.faults.stall_silent && self.stalled(Instant::now());
        let open = self.state == State::Open && !hung;
        match incoming {
            Incoming::Text(text) if open => {
                let reply = self.handle_request(&text);
                self.send_text(&reply)?;
            }
            Incoming::Binary(_) => {}
            Incoming::Ping(payload) => {
                bump(&self.shared.counters.pings_received, 1);
                if open {
                    let mut wire = Vec::new();
                    frame::write_frame(&mut wire, true, OpCode::Pong, &payload);
                    self.send(&wire)?;
                }
            }
            Incoming::Pong(_) => {}
            Incoming::Close(code, _) => {
                if open {
                    // Echo the code (section 5.5.1); an invalid one fails with 1002 instead.
                    let mut wire = Vec::new();
                    match code {
                        None => frame::write_frame(&mut wire, true, OpCode::Close, &[]),
                        Some(code) if close_code::is_valid(code) => {
                            frame::write_close(&mut wire, code, "")
                        }
                        Some(_) => frame::write_close(&mut wire, 1002, "invalid close code"),
                    }
                    let _ = self.send(&wire);
                }
                self.state = State::Done;
            }
            // Requests after our close frame are dropped (section 5.5.1).
            Incoming::Text(_) => {}
        }
        Ok(())
    }

    /// Parses, throttles and executes one request; returns the reply's text.
    fn handle_request(&mut self, text: &[u8]) -> String {
        let Ok(request) = serde_json::from_slice::<serde_json::Value>(text) else {
            return error_reply(None, codes::INVALID_REQUEST, "invalid request: not JSON");
        };
        let Some(object) = request.as_object() else {
            return error_reply(
                None,
                codes::INVALID_REQUEST,
                "invalid request: not a JSON object",
            );
        };
        let id = object.get("id");
        let now = Instant::now();
        while self
            .requests
            .front()
            .is_some_and(|&at| now.duration_since(at) >= Duration::from_secs(1))
        {
            self.requests.pop_front();
        }
        if self.requests.len() >= self.shared.options.request_limit_per_sec as usize {
            bump(&self.shared.counters.throttled_requests, 1);
            return error_reply(id, codes::THROTTLED, "throttle exceeded");
        }
        // Throttled requests do not count: a client that waits gets its full quota back.
        self.requests.push_back(now);
        let Some(method) = object.get("method").and_then(serde_json::Value::as_str) else {
            return error_reply(id, codes::INVALID_REQUEST, "invalid request: no method");
        };
        let params = object.get("params");
        let reply = match method {
            "public/login" => self.login(params),
            "public/subscribe" => self.subscribe(params, false),
            "private/subscribe" => self.subscribe(params, true),
            "unsubscribe" => self.unsubscribe(params),
            _ => Reply::Error(codes::UNKNOWN_METHOD, format!("unknown method: {method}")),
        };
        match reply {
            Reply::Result(result) => format!("{{\"id\":{},\"result\":{result}}}", id_text(id)),
            Reply::Error(code, message) => error_reply(id, code, &message),
        }
    }

    fn login(&mut self, params: Option<&serde_json::Value>) -> Reply {
        let counters = &self.shared.counters;
        let Some(token) = params
            .and_then(|params| params.get("token"))
            .and_then(serde_json::Value::as_str)
        else {
            bump(&counters.logins_failed, 1);
            return Reply::Error(
                codes::INVALID_REQUEST,
                "invalid request: params.token must be a string".to_owned(),
            );
        };
        match check_token(token, &self.shared.public_key_der, unix_secs()) {
            Ok(()) => {
                bump(&counters.logins_ok, 1);
                self.logged_in = true;
                Reply::Result(r#"{"account_number":"sim"}"#.to_owned())
            }
            Err(why) => {
                bump(&counters.logins_failed, 1);
                Reply::Error(
                    codes::AUTHENTICATION_FAILED,
                    format!("authentication failed: {why}"),
                )
            }
        }
    }

    fn subscribe(&mut self, params: Option<&serde_json::Value>, private: bool) -> Reply {
        if private && !self.logged_in {
            return Reply::Error(codes::NOT_LOGGED_IN, "not logged in".to_owned());
        }
        let Some(names) = channel_list(params) else {
            return bad_channels();
        };
        let counters = &self.shared.counters;
        bump(&counters.subscribe_requests, 1);
        let mut accepted = Vec::new();
        for name in names {
            if private {
                if !PRIVATE_CHANNELS.contains(&name) {
                    continue;
                }
                if !self.private.iter().any(|known| known == name) {
                    self.private.push(name.to_owned());
                }
            } else if let Some(replay) = &self.shared.options.replay {
                // A replay serves the recorded channels; `system` also carries the reconnect
                // fault's event.
                let recorded = self.replay.subscribe(&replay.recording, name);
                let system = name == "system";
                if system && !self.subscriptions.iter().any(|known| known.name == name) {
                    self.subscriptions
                        .push(Subscription::new(name, Channel::System));
                }
                if !recorded && !system {
                    continue;
                }
            } else {
                let Some(channel) = channel::parse(name, &self.shared.options.instruments) else {
                    continue;
                };
                if !self.subscriptions.iter().any(|known| known.name == name) {
                    self.subscriptions.push(Subscription::new(name, channel));
                }
            }
            if !accepted.contains(&name) {
                accepted.push(name);
            }
        }
        bump(&counters.channels_accepted, accepted.len() as u64);
        bump(
            &counters.channels_rejected,
            (names_len(params) - accepted.len()) as u64,
        );
        if self.has_data_channels() && self.next_data < Instant::now() {
            self.next_data = Instant::now();
        }
        Reply::Result(json_string_array(&accepted))
    }

    /// `unsubscribe`: public and private channels mixed; the result lists those that were
    /// subscribed.
    fn unsubscribe(&mut self, params: Option<&serde_json::Value>) -> Reply {
        let Some(names) = channel_list(params) else {
            return bad_channels();
        };
        let mut removed = Vec::new();
        for name in names {
            let (public_before, private_before) = (self.subscriptions.len(), self.private.len());
            self.subscriptions.retain(|known| known.name != name);
            self.private.retain(|known| known != name);
            let replayed = self
                .shared
                .options
                .replay
                .as_ref()
                .is_some_and(|replay| self.replay.unsubscribe(&replay.recording, name));
            let found = replayed
                || self.subscriptions.len() != public_before
                || self.private.len() != private_before;
            if found && !removed.contains(&name) {
                removed.push(name);
            }
        }
        Reply::Result(json_string_array(&removed))
    }

    /// Close grace, the reconnect fault's close, the stall's end, server pings and data.
    fn run_timers(&mut self) -> io::Result<()> {
        let now = Instant::now();
        match self.state {
            State::Closing { since } => {
                if now >= later(since, CLOSE_GRACE) {
                    self.state = State::Done;
                }
                return Ok(());
            }
            State::Done | State::Reset => return Ok(()),
            State::Open => {}
        }
        if self.reconnect_close_at.is_some_and(|at| now >= at) {
            self.reconnect_close_at = None;
            return self.start_close(1001, "reconnect");
        }
        if let Some(until) = self.stall_until {
            if now < until {
                return Ok(());
            }
            // Data due during the stall is lost, not sent in a burst afterwards.
            self.stall_until = None;
            self.next_data = now;
        }
        if now >= self.next_ping {
            self.next_ping = later(now, self.shared.options.ping_interval);
            let mut wire = Vec::new();
            frame::write_frame(&mut wire, true, OpCode::Ping, PING_PAYLOAD);
            self.send(&wire)?;
        }
        if !self.has_data_channels() {
            return Ok(());
        }
        let shared: &'a Shared = self.shared;
        if let Some(replay) = &shared.options.replay {
            return self.replay_due(replay, now);
        }
        let mut written = 0;
        while self.next_data <= now && written < MAX_DATA_PER_WAKE {
            self.next_data = later(self.next_data, self.shared.data_interval);
            written += 1;
            let Some(message) = self.next_data_message() else {
                continue;
            };
            self.send_text(&message)?;
            self.data_sent += 1;
            bump(&self.shared.counters.data_messages_sent, 1);
            self.after_data()?;
            if self.state != State::Open || self.stalled(Instant::now()) {
                return Ok(());
            }
        }
        if self.next_data < now {
            self.next_data = now;
        }
        Ok(())
    }

    /// Sends the recorded notifications due by `now` (at most [`MAX_DATA_PER_WAKE`]) and sets
    /// when the next one is due.
    fn replay_due(&mut self, replay: &'a Replay, now: Instant) -> io::Result<()> {
        let mut written = 0;
        while written < MAX_DATA_PER_WAKE {
            match self.replay.next(&replay.recording, replay.pace, now) {
                Ok(text) => {
                    written += 1;
                    self.send_text(text)?;
                    self.data_sent += 1;
                    bump(&self.shared.counters.data_messages_sent, 1);
                    self.after_data()?;
                    if self.state != State::Open || self.stalled(Instant::now()) {
                        return Ok(());
                    }
                }
                Err(due) => {
                    // Nothing left: the deadline is the read wait's own.
                    self.next_data = due.unwrap_or_else(|| later(now, MAX_READ_WAIT));
                    return Ok(());
                }
            }
        }
        self.next_data = now;
        Ok(())
    }

    /// The faults due after the data messages sent so far, in this order: stall, reconnect
    /// event, close, reset.
    fn after_data(&mut self) -> io::Result<()> {
        if !self.faulty || self.state != State::Open {
            return Ok(());
        }
        let faults = &self.shared.options.faults;
        let counters = &self.shared.counters;
        let sent = self.data_sent;
        if let Some((after, duration)) = faults.stall_after {
            if !self.done.stall && sent >= after {
                self.done.stall = true;
                bump(&counters.stalls_injected, 1);
                self.stall_until = Some(later(Instant::now(), duration));
            }
        }
        if let Some((after, grace)) = faults.reconnect_event_after {
            if !self.done.reconnect && sent >= after {
                self.done.reconnect = true;
                self.reconnect_close_at = Some(later(Instant::now(), grace));
                let system = self
                    .subscriptions
                    .iter()
                    .any(|subscription| subscription.channel == Channel::System);
                if system {
                    bump(&counters.reconnect_events_sent, 1);
                    self.send_text(RECONNECT_EVENT)?;
                }
            }
        }
        if let Some(after) = faults.close_after {
            if !self.done.close && sent >= after {
                self.done.close = true;
                bump(&counters.closes_injected, 1);
                return self.start_close(1000, "close_after fault");
            }
        }
        if let Some(after) = faults.reset_after {
            if !self.done.reset && sent >= after {
                self.done.reset = true;
                bump(&counters.resets_injected, 1);
                if let Err(error) = set_linger_zero(self.tcp) {
                    tracing::warn!(%error, "sim: cannot set SO_LINGER 0; the reset becomes a close");
                }
                self.state = State::Reset;
            }
        }
        Ok(())
    }

    /// The next data channel in turn that has something to send, and its notification; `None`
    /// when none has (trades channels whose instruments did not trade).
    fn next_data_message(&mut self) -> Option<String> {
        let count = self.subscriptions.len();
        let now_secs = unix_secs_f64();
        for _ in 0..count {
            let index = self.cursor % count;
            self.cursor = (index + 1) % count;
            if let Some(message) = self.subscriptions[index].render(&mut self.market, now_secs) {
                return Some(message);
            }
        }
        None
    }
}

/// Why a login token is refused, or `Ok`: it must verify with the test key, name
/// [`TEST_KEY_ID`], and be issued within [`LOGIN_IAT_TOLERANCE_SECS`] of `now_secs`.
fn check_token(token: &str, public_key_der: &[u8], now_secs: u64) -> Result<(), String> {
    let claims = auth::verify_token(token, public_key_der).map_err(|error| error.to_string())?;
    if claims.kid != TEST_KEY_ID {
        return Err("unknown key id".to_owned());
    }
    let skew = claims.iat.abs_diff(now_secs);
    if skew > LOGIN_IAT_TOLERANCE_SECS {
        return Err(format!(
            "stale iat: issued {skew} s away from the server's clock, more than {LOGIN_IAT_TOLERANCE_SECS} s"
        ));
    }
    Ok(())
}

fn id_text(id: Option<&serde_json::Value>) -> String {
    id.map_or_else(|| "null".to_owned(), serde_json::Value::to_string)
}

fn error_reply(id: Option<&serde_json::Value>, code: i64, message: &str) -> String {
    let message = serde_json::Value::String(message.to_owned());
    format!(
        "{{\"id\":{},\"error\":{{\"code\":{code},\"message\":{message}}}}}",
        id_text(id)
    )
}

fn bad_channels() -> Reply {
    Reply::Error(
        codes::INVALID_REQUEST,
        "invalid request: params.channels must be an array of strings".to_owned(),
    )
}

fn json_string_array(items: &[&str]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

/// The channel names of `params.channels`; `None` when it is not an array of strings.
fn channel_list(params: Option<&serde_json::Value>) -> Option<Vec<&str>> {
    params?
        .get("channels")?
        .as_array()?
        .iter()
        .map(serde_json::Value::as_str)
        .collect()
}

fn names_len(params: Option<&serde_json::Value>) -> usize {
    channel_list(params).map_or(0, |names| names.len())
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Now as float seconds since the epoch, the venue's timestamp form.
fn unix_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_for_key_id_and_age() {
        let der = test_public_key_der();
        let now = 1_700_000_000;
        let good = auth::login_token(TEST_KEY_ID, TEST_PRIVATE_KEY_PEM, now).unwrap();
        assert_eq!(check_token(&good, &der, now + 60), Ok(()));
        let stale = check_token(&good, &der, now + 61).unwrap_err();
        assert!(stale.starts_with("stale iat"), "{stale}");
        let other = auth::login_token("someone", TEST_PRIVATE_KEY_PEM, now).unwrap();
        assert_eq!(check_token(&other, &der, now), Err("unknown key id".into()));
    }

    #[test]
    fn errors_are_thalex_codes_with_the_request_id() {
        assert_eq!(
            error_reply(
                Some(&serde_json::json!(7)),
                codes::UNKNOWN_METHOD,
                "unknown method"
            ),
            r#"{"id":7,"error":{"code":31,"message":"unknown method"}}"#
        );
        assert_eq!(
            error_reply(None, codes::INVALID_REQUEST, "invalid request: not JSON"),
            r#"{"id":null,"error":{"code":6,"message":"invalid request: not JSON"}}"#
        );
    }
}
