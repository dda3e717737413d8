//! An OKX v5 WebSocket compatible server: the public entry point (`/ws/v5/public`) and the
//! business one (`/ws/v5/business`, where `trades-all` lives) on one TLS listener, with the
//! certificates, RFC 6455 framing and accept loop of the other simulators, a market per
//! subscription (`okx/market.rs`) and per-connection fault injection.
//!
//! Written from OKX's API v5 page (its WebSocket overview: "Connect", "Login", "Subscribe",
//! "Unsubscribe"; and the channels' sections, as of 2026-06-15), never from what tickwire's
//! decoder reads. Requests are `{"id":..,"op":..,"args":[{..}]}` (any key order, `id`
//! optional):
//! - `subscribe` / `unsubscribe`: each arg answered on its own,
//!   `{"id":..,"event":"subscribe","arg":{..},"connId":..}`; an arg refused is
//!   `{"id":..,"event":"error","code":"60018","msg":"Wrong URL or channel:..., instId:... doesn't
//!   exist.","connId":..}` (an unknown channel or instrument, or a channel of the other entry
//!   point), and a tick-by-tick book before a login `60011` "Please log in" (the codes are the
//!   page's error codes; the texts the simulator's). A subscription's first message follows its
//!   answer;
//! - `login`: the arg's four fields present, answered `{"event":"login","code":"0","msg":"",
//!   "connId":..}` (the simulator checks no signature: it has no account);
//! - the text `ping`: answered with the text `pong`;
//! - anything else: `{"event":"error","code":"60012","msg":"Invalid request: ..."}`.
//!
//! Decisions the page leaves open: the server sends no WebSocket pings of its own; data is
//! paced round-robin over a connection's subscriptions at `rate` messages a second; the book
//! checksum is the true one (production now sends 0, see the `okx` venue module).

mod market;

pub use market::checksum;

use super::accept::{self, accept_loop, Sockets};
use super::cert;
use super::frame::{self, Incoming};
use super::http;
use super::server::{SimError, CLOSE_GRACE};
use super::wire::{
    self, later, lock, send_final, send_plain, set_linger_zero, NextRequest, MAX_READ_WAIT,
    READ_BYTES, REQUEST_TIMEOUT,
};
use market::Subscription;
use rustls::{ServerConfig, ServerConnection};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire::ws::close_code;
use tickwire::ws::frame::OpCode;

/// At most this many data messages are written per wake-up.
const MAX_DATA_PER_WAKE: u32 = 64;

/// Fault injection, all off by default, for the first `fault_connections` WebSocket connections
/// in upgrade order; counts are data messages sent on that connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OkxFaults {
    /// After N data messages, a close frame with code 1000, then the TCP close.
    pub close_after: Option<u64>,
    /// After N data messages, a TCP reset without a close frame.
    pub reset_after: Option<u64>,
    /// After N data messages, no data for the duration while TCP stays open; requests are
    /// still answered unless `stall_silent`.
    pub stall_after: Option<(u64, Duration)>,
    pub stall_silent: bool,
    /// Every Nth book update (of the incremental book channels) carries a wrong checksum.
    pub corrupt_checksum_every: Option<u64>,
    /// After N data messages, every book's next update resets the sequence (the documented
    /// maintenance case: `seqId` smaller than `prevSeqId`), which is no break.
    pub seq_reset_after: Option<u64>,
    pub fault_connections: u32,
}

impl Default for OkxFaults {
    fn default() -> OkxFaults {
        OkxFaults {
            close_after: None,
            reset_after: None,
            stall_after: None,
            stall_silent: false,
            corrupt_checksum_every: None,
            seq_reset_after: None,
            fault_connections: 1,
        }
    }
}

/// What a Bybit simulator run is told.
#[derive(Clone, Debug)]
pub struct OkxOptions {
    /// Where the TLS port listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Where `ca.pem` is written.
    pub cert_dir: PathBuf,
    /// The instruments served (`instId`s).
    pub instruments: Vec<String>,
    /// Data messages per second on each connection, over its subscriptions in turn.
    pub rate: f64,
    pub seed: u64,
    pub write_timeout: Duration,
    pub faults: OkxFaults,
}

impl OkxOptions {
    /// The defaults on `127.0.0.1:0`: BTC-USDT, ETH-USDT, BTC-USDT-SWAP and ETH-USDT-SWAP, 100
    /// messages a second, seed 1.
    pub fn new(cert_dir: impl Into<PathBuf>) -> OkxOptions {
        OkxOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            cert_dir: cert_dir.into(),
            instruments: vec![
                "BTC-USDT".into(),
                "ETH-USDT".into(),
                "BTC-USDT-SWAP".into(),
                "ETH-USDT-SWAP".into(),
            ],
            rate: 100.0,
            seed: 1,
            write_timeout: Duration::from_secs(5),
            faults: OkxFaults::default(),
        }
    }
}

/// The first `count` data messages a connection subscribed to `streams` (`channel:instId`)
/// receives (each stream's first message, its snapshot, then round-robin), stamped from
/// `start_ms` one ms apart. Without a server, for tests and benchmarks that need OKX's messages
/// as the simulator writes them; a stream the server would refuse is left out.
pub fn messages(
    instruments: &[String],
    streams: &[&str],
    seed: u64,
    start_ms: u64,
    count: usize,
) -> Vec<String> {
    let mut subscriptions: Vec<Subscription> = streams
        .iter()
        .filter_map(|stream| {
            let (channel, target) = stream.split_once(':')?;
            let business = channel == "trades-all";
            let kind = market::kind_of(channel, business)?;
            let served: Vec<String> = instruments
                .iter()
                .filter(|id| market::inst_type(id) == target)
                .cloned()
                .collect();
            if kind != market::Kind::Liquidations && !instruments.iter().any(|id| id == target) {
                return None;
            }
            Some(Subscription::new(channel, target, kind, served, seed))
        })
        .collect();
    let mut out = Vec::with_capacity(count);
    if subscriptions.is_empty() {
        return out;
    }
    for index in 0..count {
        let position = index % subscriptions.len();
        out.push(subscriptions[position].render(start_ms + index as u64));
    }
    out
}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OkxStats {
    pub connections_accepted: u64,
    pub websocket_connections: u64,
    pub subscribe_requests: u64,
    pub streams_subscribed: u64,
    /// Args and requests answered with an `error` event.
    pub requests_refused: u64,
    pub logins: u64,
    /// Text `ping`s answered.
    pub pings_answered: u64,
    pub data_messages_sent: u64,
    pub corruptions_injected: u64,
    pub seq_resets_injected: u64,
    pub closes_injected: u64,
    pub resets_injected: u64,
    pub stalls_injected: u64,
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    websocket_connections: AtomicU64,
    subscribe_requests: AtomicU64,
    streams_subscribed: AtomicU64,
    requests_refused: AtomicU64,
    logins: AtomicU64,
    pings_answered: AtomicU64,
    data_messages_sent: AtomicU64,
    corruptions_injected: AtomicU64,
    seq_resets_injected: AtomicU64,
    closes_injected: AtomicU64,
    resets_injected: AtomicU64,
    stalls_injected: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> OkxStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        OkxStats {
            connections_accepted: get(&self.connections_accepted),
            websocket_connections: get(&self.websocket_connections),
            subscribe_requests: get(&self.subscribe_requests),
            streams_subscribed: get(&self.streams_subscribed),
            requests_refused: get(&self.requests_refused),
            logins: get(&self.logins),
            pings_answered: get(&self.pings_answered),
            data_messages_sent: get(&self.data_messages_sent),
            corruptions_injected: get(&self.corruptions_injected),
            seq_resets_injected: get(&self.seq_resets_injected),
            closes_injected: get(&self.closes_injected),
            resets_injected: get(&self.resets_injected),
            stalls_injected: get(&self.stalls_injected),
        }
    }
}

struct Shared {
    options: OkxOptions,
    data_interval: Duration,
    tls: Arc<ServerConfig>,
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
pub fn start(options: OkxOptions) -> Result<OkxHandle, SimError> {
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return Err(SimError::InvalidRate(options.rate));
    }
    if let Some(bad) = options
        .instruments
        .iter()
        .find(|name| name.is_empty() || name.contains([':', '"', '\\']))
    {
        return Err(SimError::InvalidInstrument(bad.clone()));
    }
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
        stopping: AtomicBool::new(false),
        registry: Mutex::new(Sockets::default()),
        counters: Counters::default(),
    });
    let accept_shared = Arc::clone(&shared);
    let accept = std::thread::Builder::new()
        .name("sim-okx-accept".into())
        .spawn(move || {
            accept_loop(
                &listener,
                &accept_shared.registry,
                &|| accept_shared.stopping(),
                &accept::pause_after_failed_accept,
                "sim-okx",
                |tcp, peer, socket_id| {
                    bump(&accept_shared.counters.connections_accepted);
                    let thread_shared = Arc::clone(&accept_shared);
                    move || serve_connection(&thread_shared, tcp, peer, socket_id)
                },
            );
        })
        .map_err(SimError::Spawn)?;
    tracing::info!(%addr, ca = %ca_pem_path.display(), "OKX simulator listening");
    Ok(OkxHandle {
        shared,
        addr,
        ca_pem_path,
        accept: Some(accept),
    })
}

/// A running OKX simulator; stops on [`OkxHandle::stop`] or drop.
pub struct OkxHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    ca_pem_path: PathBuf,
    accept: Option<JoinHandle<()>>,
}

impl OkxHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// `wss://127.0.0.1:PORT/ws/v5/public` (`business`: `/ws/v5/business`).
    pub fn url(&self, business: bool) -> String {
        let host = match self.addr {
            SocketAddr::V4(addr) if !addr.ip().is_unspecified() => addr.ip().to_string(),
            SocketAddr::V6(addr) if !addr.ip().is_unspecified() => format!("[{}]", addr.ip()),
            _ => "127.0.0.1".to_owned(),
        };
        let path = if business {
            "/ws/v5/business"
        } else {
            "/ws/v5/public"
        };
        format!("wss://{host}:{}{path}", self.addr.port())
    }

    pub fn stats(&self) -> OkxStats {
        self.shared.counters.snapshot()
    }

    /// Stops the accept thread and every connection.
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

impl Drop for OkxHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_connection(shared: &Arc<Shared>, tcp: Arc<TcpStream>, peer: SocketAddr, socket_id: u64) {
    if let Err(error) = run_connection(shared, &tcp) {
        if !shared.stopping() {
            tracing::info!(%peer, %error, "sim: OKX connection ended with an error");
        }
    }
    lock(&shared.registry).remove(socket_id);
}

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
    let business = match path {
        "/ws/v5/public" => false,
        "/ws/v5/business" => true,
        _ => {
            let body = "not found: the streams are at /ws/v5/public and /ws/v5/business";
            let reply = http::response(404, "text/plain", body.as_bytes(), false);
            return send_final(&mut tls, tcp, &reply);
        }
    };
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
    let mut connection = Connection {
        shared,
        tcp,
        tls,
        business,
        logged_in: false,
        book_updates: 0,
        conn_id: format!("{index:04x}{:04x}", shared.options.seed & 0xffff),
        faulty: index < u64::from(shared.options.faults.fault_connections),
        state: State::Open,
        subscriptions: Vec::new(),
        cursor: 0,
        data_sent: 0,
        next_data: Instant::now(),
        stall_until: None,
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
    Closing { since: Instant },
    Done,
    Reset,
}

#[derive(Default)]
struct FaultsDone {
    close: bool,
    reset: bool,
    stall: bool,
    seq_reset: bool,
}

struct Connection<'a> {
    shared: &'a Shared,
    tcp: &'a TcpStream,
    tls: ServerConnection,
    business: bool,
    logged_in: bool,
    book_updates: u64,
    conn_id: String,
    faulty: bool,
    state: State,
    subscriptions: Vec<Subscription>,
    cursor: usize,
    data_sent: u64,
    next_data: Instant,
    stall_until: Option<Instant>,
    done: FaultsDone,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// A JSON string for `text` (the answer echoes the client's `id`).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
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

    fn next_deadline(&self, now: Instant) -> Instant {
        let deadline = later(now, MAX_READ_WAIT);
        match self.state {
            State::Closing { since } => return deadline.min(later(since, CLOSE_GRACE)),
            State::Done | State::Reset => return now,
            State::Open => {}
        }
        if let Some(until) = self.stall_until.filter(|&until| now < until) {
            return deadline.min(until);
        }
        if self.subscriptions.is_empty() {
            deadline
        } else {
            deadline.min(self.next_data)
        }
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
                if text == b"ping" {
                    bump(&self.shared.counters.pings_answered);
                    return self.send_text("pong");
                }
                let (answers, first_messages) = self.handle_request(&text);
                for answer in answers {
                    self.send_text(&answer)?;
                }
                for message in first_messages {
                    self.send_text(&message)?;
                    self.data_sent += 1;
                    bump(&self.shared.counters.data_messages_sent);
                }
            }
            Incoming::Binary(_) | Incoming::Pong(_) | Incoming::Text(_) => {}
            Incoming::Ping(payload) => {
                if open {
                    let mut wire = Vec::new();
                    frame::write_frame(&mut wire, true, OpCode::Pong, &payload);
                    self.send(&wire)?;
                }
            }
            Incoming::Close(code, _) => {
                if open {
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
        }
        Ok(())
    }

    /// An `error` event.
    fn error(&self, id: &str, code: &str, msg: &str) -> String {
        bump(&self.shared.counters.requests_refused);
        let id = if id.is_empty() {
            String::new()
        } else {
            format!(r#""id":{},"#, json_string(id))
        };
        format!(
            r#"{{{id}"event":"error","code":"{code}","msg":{},"connId":"{}"}}"#,
            json_string(msg),
            self.conn_id
        )
    }

    /// One request: its answers, and the first message of each stream it subscribed (sent
    /// right after the answers).
    fn handle_request(&mut self, text: &[u8]) -> (Vec<String>, Vec<String>) {
        let request = serde_json::from_slice::<serde_json::Value>(text).ok();
        let object = request.as_ref().and_then(serde_json::Value::as_object);
        let id = object
            .and_then(|object| object.get("id"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned();
        let op = object
            .and_then(|object| object.get("op"))
            .and_then(serde_json::Value::as_str);
        let args = object
            .and_then(|object| object.get("args"))
            .and_then(serde_json::Value::as_array);
        let invalid = |this: &Self| {
            let shown = String::from_utf8_lossy(text);
            vec![this.error(&id, "60012", &format!("Invalid request: {shown}"))]
        };
        let (Some(op), Some(args)) = (op, args) else {
            return (invalid(self), Vec::new());
        };
        match op {
            "login" => {
                let arg = args.first().and_then(serde_json::Value::as_object);
                let complete = arg.is_some_and(|arg| {
                    ["apiKey", "passphrase", "timestamp", "sign"]
                        .iter()
                        .all(|key| {
                            arg.get(*key)
                                .and_then(serde_json::Value::as_str)
                                .is_some_and(|v| !v.is_empty())
                        })
                });
                if !complete {
                    return (vec![self.error(&id, "60009", "Login failed.")], Vec::new());
                }
                self.logged_in = true;
                bump(&self.shared.counters.logins);
                (
                    vec![format!(
                        r#"{{"event":"login","code":"0","msg":"","connId":"{}"}}"#,
                        self.conn_id
                    )],
                    Vec::new(),
                )
            }
            "subscribe" | "unsubscribe" => {
                if op == "subscribe" {
                    bump(&self.shared.counters.subscribe_requests);
                }
                let mut answers = Vec::new();
                let mut first = Vec::new();
                for arg in args {
                    match self.apply(op, arg) {
                        Ok((arg, message)) => {
                            let id = if id.is_empty() {
                                String::new()
                            } else {
                                format!(r#""id":{},"#, json_string(&id))
                            };
                            answers.push(format!(
                                r#"{{{id}"event":"{op}","arg":{arg},"connId":"{}"}}"#,
                                self.conn_id
                            ));
                            first.extend(message);
                        }
                        Err((code, msg)) => answers.push(self.error(&id, code, &msg)),
                    }
                }
                (answers, first)
            }
            _ => (invalid(self), Vec::new()),
        }
    }

    /// Subscribes or unsubscribes one arg: its `arg` object and the stream's first message, or
    /// the error's code and text.
    fn apply(
        &mut self,
        op: &str,
        arg: &serde_json::Value,
    ) -> Result<(String, Option<String>), (&'static str, String)> {
        let field = |key: &str| arg.get(key).and_then(serde_json::Value::as_str);
        let channel = field("channel").unwrap_or("");
        let liquidation = channel == "liquidation-orders";
        let target = if liquidation {
            field("instType")
        } else {
            field("instId")
        }
        .unwrap_or("");
        let missing = || {
            (
                "60018",
                format!("Wrong URL or channel:{channel}, instId:{target} doesn't exist."),
            )
        };
        let kind = market::kind_of(channel, self.business).ok_or_else(missing)?;
        let instruments = &self.shared.options.instruments;
        // An index is served when an instrument of it is.
        let served = if liquidation {
            ["SWAP", "FUTURES", "OPTION", "MARGIN"].contains(&target)
        } else if kind == market::Kind::Index {
            instruments.iter().any(|id| {
                id.match_indices('-')
                    .nth(1)
                    .map_or(id.as_str(), |(at, _)| &id[..at])
                    == target
            })
        } else {
            instruments.iter().any(|id| id == target)
        };
        if !served {
            return Err(missing());
        }
        if market::needs_login(channel) && !self.logged_in {
            return Err(("60011", "Please log in".to_owned()));
        }
        let key = format!("{channel}:{target}");
        let position = self
            .subscriptions
            .iter()
            .position(|s| format!("{}:{}", s.channel, s.target) == key);
        if op == "unsubscribe" {
            if let Some(at) = position {
                let subscription = self.subscriptions.remove(at);
                self.cursor = 0;
                return Ok((subscription.arg, None));
            }
            return Err(missing());
        }
        if let Some(at) = position {
            // Subscribed already: answered again, no new snapshot.
            return Ok((self.subscriptions[at].arg.clone(), None));
        }
        bump(&self.shared.counters.streams_subscribed);
        let of_type: Vec<String> = instruments
            .iter()
            .filter(|id| market::inst_type(id) == target)
            .cloned()
            .collect();
        let mut subscription =
            Subscription::new(channel, target, kind, of_type, self.shared.options.seed);
        let message = subscription.render(now_ms());
        let arg = subscription.arg.clone();
        self.subscriptions.push(subscription);
        Ok((arg, Some(message)))
    }

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
        if let Some(until) = self.stall_until {
            if now < until {
                return Ok(());
            }
            self.stall_until = None;
            self.next_data = now;
        }
        if self.subscriptions.is_empty() {
            return Ok(());
        }
        let mut written = 0;
        while self.next_data <= now && written < MAX_DATA_PER_WAKE {
            self.next_data = later(self.next_data, self.shared.data_interval);
            written += 1;
            let count = self.subscriptions.len();
            let index = self.cursor % count;
            self.cursor = (index + 1) % count;
            let corrupt_every = self.shared.options.faults.corrupt_checksum_every;
            if self.faulty && self.subscriptions[index].is_incremental_book() {
                self.book_updates += 1;
                if corrupt_every.is_some_and(|every| every > 0 && self.book_updates % every == 0) {
                    bump(&self.shared.counters.corruptions_injected);
                    self.subscriptions[index].corrupt();
                }
            }
            let message = self.subscriptions[index].render(now_ms());
            self.send_text(&message)?;
            self.data_sent += 1;
            bump(&self.shared.counters.data_messages_sent);
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

    /// The faults due after the data messages sent so far: sequence reset, stall, close, reset.
    fn after_data(&mut self) -> io::Result<()> {
        if !self.faulty || self.state != State::Open {
            return Ok(());
        }
        let faults = &self.shared.options.faults;
        let counters = &self.shared.counters;
        let sent = self.data_sent;
        let books = self
            .subscriptions
            .iter()
            .any(Subscription::is_incremental_book);
        if let Some(after) = faults.seq_reset_after {
            if !self.done.seq_reset && sent >= after && books {
                self.done.seq_reset = true;
                bump(&counters.seq_resets_injected);
                self.subscriptions
                    .iter_mut()
                    .filter(|s| s.is_incremental_book())
                    .for_each(Subscription::reset_sequence);
            }
        }
        if let Some((after, duration)) = faults.stall_after {
            if !self.done.stall && sent >= after {
                self.done.stall = true;
                bump(&counters.stalls_injected);
                self.stall_until = Some(later(Instant::now(), duration));
            }
        }
        if let Some(after) = faults.close_after {
            if !self.done.close && sent >= after {
                self.done.close = true;
                bump(&counters.closes_injected);
                return self.start_close(1000, "close_after fault");
            }
        }
        if let Some(after) = faults.reset_after {
            if !self.done.reset && sent >= after {
                self.done.reset = true;
                bump(&counters.resets_injected);
                if let Err(error) = set_linger_zero(self.tcp) {
                    tracing::warn!(%error, "sim: cannot set SO_LINGER 0; the reset becomes a close");
                }
                self.state = State::Reset;
            }
        }
        Ok(())
    }
}
