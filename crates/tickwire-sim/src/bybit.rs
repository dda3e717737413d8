//! A Bybit v5 public WebSocket compatible server: the spot and linear entry points
//! (`/v5/public/spot`, `/v5/public/linear`) on one TLS listener, with the certificates, RFC
//! 6455 framing and accept loop of the other simulators, a market per subscription
//! (`bybit/market.rs`) and per-connection fault injection.
//!
//! Written from Bybit's own pages (bybit-exchange/docs 072c197, `../shared/reference/bybit/`)
//! and, for the connection guide that copy leaves out, from what the issue quotes of it (the
//! entry points, the `ping` op, `subscribe` with `args`, `success`/`ret_msg` answers), never
//! from what tickwire's decoder reads. Requests are `{"req_id":..,"op":..,"args":[..]}` (any key
//! order, `req_id` optional); every answer is
//! `{"success":..,"ret_msg":..,"conn_id":..,"req_id":..,"op":..}`:
//! - `subscribe` / `unsubscribe`: each topic checked (`bybit/market.rs`); one that is not
//!   served refuses the whole request with `ret_msg` `error:handler not found,topic:<topic>`,
//!   one subscribed already with `error:already subscribed,topic:<topic>`, an unsubscribe of a
//!   topic not subscribed with `error:not subscribed,topic:<topic>`; spot refuses more than
//!   [`SPOT_MAX_ARGS`] args with `args size >10`. Accepted: `ret_msg` is `subscribe` (or
//!   `unsubscribe`) on spot, empty on linear. A subscription's first message follows its answer.
//! - `ping`: answered `"ret_msg":"pong"` with `"op":"ping"`.
//! - anything else (not JSON, no `op`, another op): `success:false`, `ret_msg`
//!   `error:invalid request` (the text is the simulator's choice: the copy of the pages has
//!   none).
//!
//! Decisions the copy leaves open: the server sends no WebSocket pings of its own (the guide
//! asks clients to ping); data is paced round-robin over a connection's subscriptions at
//! `rate` messages a second.

mod market;

pub use market::{Category, DEPTHS};

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

/// The most args a spot `subscribe` or `unsubscribe` carries.
pub const SPOT_MAX_ARGS: usize = 10;

/// At most this many data messages are written per wake-up.
const MAX_DATA_PER_WAKE: u32 = 64;

/// Fault injection, all off by default, for the first `fault_connections` WebSocket connections
/// in upgrade order; counts are data messages sent on that connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BybitFaults {
    /// After N data messages, a close frame with code 1000, then the TCP close.
    pub close_after: Option<u64>,
    /// After N data messages, a TCP reset without a close frame.
    pub reset_after: Option<u64>,
    /// After N data messages, no data for the duration while TCP stays open; requests are
    /// still answered unless `stall_silent`.
    pub stall_after: Option<(u64, Duration)>,
    pub stall_silent: bool,
    /// After N data messages, every book's next message is a snapshot with `u` = 1 (the
    /// service restarted).
    pub restart_after: Option<u64>,
    /// After N data messages, every book's next delta skips one `u`.
    pub skip_u_after: Option<u64>,
    pub fault_connections: u32,
}

impl Default for BybitFaults {
    fn default() -> BybitFaults {
        BybitFaults {
            close_after: None,
            reset_after: None,
            stall_after: None,
            stall_silent: false,
            restart_after: None,
            skip_u_after: None,
            fault_connections: 1,
        }
    }
}

/// What a Bybit simulator run is told.
#[derive(Clone, Debug)]
pub struct BybitOptions {
    /// Where the TLS port listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Where `ca.pem` is written.
    pub cert_dir: PathBuf,
    /// The symbols each category serves.
    pub spot_symbols: Vec<String>,
    pub linear_symbols: Vec<String>,
    /// Data messages per second on each connection, over its subscriptions in turn.
    pub rate: f64,
    pub seed: u64,
    pub write_timeout: Duration,
    pub faults: BybitFaults,
}

impl BybitOptions {
    /// The defaults on `127.0.0.1:0`: BTCUSDT and ETHUSDT in both categories (and BTC-26DEC25
    /// on linear), 100 messages a second, seed 1.
    pub fn new(cert_dir: impl Into<PathBuf>) -> BybitOptions {
        BybitOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            cert_dir: cert_dir.into(),
            spot_symbols: vec!["BTCUSDT".into(), "ETHUSDT".into()],
            linear_symbols: vec!["BTCUSDT".into(), "ETHUSDT".into(), "BTC-26DEC25".into()],
            rate: 100.0,
            seed: 1,
            write_timeout: Duration::from_secs(5),
            faults: BybitFaults::default(),
        }
    }
}

/// The first `count` data messages a connection of `category` subscribed to `topics` receives
/// (each topic's first message, its snapshot, then round-robin), stamped from `start_ms` one
/// ms apart. Without a server, for tests and benchmarks that need Bybit's messages as the
/// simulator writes them; a topic the server would refuse (`symbols` do not serve it) is left
/// out.
pub fn messages(
    category: Category,
    symbols: &[String],
    topics: &[&str],
    seed: u64,
    start_ms: u64,
    count: usize,
) -> Vec<String> {
    let mut subscriptions: Vec<Subscription> = topics
        .iter()
        .filter_map(|topic| {
            let (kind, symbol) = market::check_topic(topic, category, symbols).ok()?;
            Some(Subscription::new(topic, kind, symbol, category, seed))
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
pub struct BybitStats {
    pub connections_accepted: u64,
    pub websocket_connections: u64,
    pub subscribe_requests: u64,
    pub topics_subscribed: u64,
    /// Requests answered `success:false`.
    pub requests_refused: u64,
    /// `ping` ops answered.
    pub pings_answered: u64,
    pub data_messages_sent: u64,
    pub restarts_injected: u64,
    pub skips_injected: u64,
    pub closes_injected: u64,
    pub resets_injected: u64,
    pub stalls_injected: u64,
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    websocket_connections: AtomicU64,
    subscribe_requests: AtomicU64,
    topics_subscribed: AtomicU64,
    requests_refused: AtomicU64,
    pings_answered: AtomicU64,
    data_messages_sent: AtomicU64,
    restarts_injected: AtomicU64,
    skips_injected: AtomicU64,
    closes_injected: AtomicU64,
    resets_injected: AtomicU64,
    stalls_injected: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> BybitStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        BybitStats {
            connections_accepted: get(&self.connections_accepted),
            websocket_connections: get(&self.websocket_connections),
            subscribe_requests: get(&self.subscribe_requests),
            topics_subscribed: get(&self.topics_subscribed),
            requests_refused: get(&self.requests_refused),
            pings_answered: get(&self.pings_answered),
            data_messages_sent: get(&self.data_messages_sent),
            restarts_injected: get(&self.restarts_injected),
            skips_injected: get(&self.skips_injected),
            closes_injected: get(&self.closes_injected),
            resets_injected: get(&self.resets_injected),
            stalls_injected: get(&self.stalls_injected),
        }
    }
}

struct Shared {
    options: BybitOptions,
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
pub fn start(options: BybitOptions) -> Result<BybitHandle, SimError> {
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return Err(SimError::InvalidRate(options.rate));
    }
    if let Some(bad) = options
        .spot_symbols
        .iter()
        .chain(&options.linear_symbols)
        .find(|name| name.is_empty() || name.contains(['.', '"', '\\']))
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
        .name("sim-bybit-accept".into())
        .spawn(move || {
            accept_loop(
                &listener,
                &accept_shared.registry,
                &|| accept_shared.stopping(),
                &accept::pause_after_failed_accept,
                "sim-bybit",
                |tcp, peer, socket_id| {
                    bump(&accept_shared.counters.connections_accepted);
                    let thread_shared = Arc::clone(&accept_shared);
                    move || serve_connection(&thread_shared, tcp, peer, socket_id)
                },
            );
        })
        .map_err(SimError::Spawn)?;
    tracing::info!(%addr, ca = %ca_pem_path.display(), "Bybit simulator listening");
    Ok(BybitHandle {
        shared,
        addr,
        ca_pem_path,
        accept: Some(accept),
    })
}

/// A running Bybit simulator; stops on [`BybitHandle::stop`] or drop.
pub struct BybitHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    ca_pem_path: PathBuf,
    accept: Option<JoinHandle<()>>,
}

impl BybitHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// `wss://127.0.0.1:PORT/v5/public/{spot,linear}`.
    pub fn url(&self, category: Category) -> String {
        let host = match self.addr {
            SocketAddr::V4(addr) if !addr.ip().is_unspecified() => addr.ip().to_string(),
            SocketAddr::V6(addr) if !addr.ip().is_unspecified() => format!("[{}]", addr.ip()),
            _ => "127.0.0.1".to_owned(),
        };
        format!("wss://{host}:{}{}", self.addr.port(), category.path())
    }

    pub fn stats(&self) -> BybitStats {
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

impl Drop for BybitHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve_connection(shared: &Arc<Shared>, tcp: Arc<TcpStream>, peer: SocketAddr, socket_id: u64) {
    if let Err(error) = run_connection(shared, &tcp) {
        if !shared.stopping() {
            tracing::info!(%peer, %error, "sim: Bybit connection ended with an error");
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
    let category = match path {
        "/v5/public/spot" => Category::Spot,
        "/v5/public/linear" => Category::Linear,
        _ => {
            let body = "not found: the public streams are at /v5/public/spot and /v5/public/linear";
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
        category,
        conn_id: format!("sim-{index:08x}-{:04x}", shared.options.seed & 0xffff),
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
    restart: bool,
    skip: bool,
}

struct Connection<'a> {
    shared: &'a Shared,
    tcp: &'a TcpStream,
    tls: ServerConnection,
    category: Category,
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

/// A JSON string's content for `text` (the answer echoes the client's `req_id`).
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
                let (answer, first_messages) = self.handle_request(&text);
                self.send_text(&answer)?;
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

    fn answer(&self, success: bool, ret_msg: &str, req_id: &str, op: &str) -> String {
        if !success {
            bump(&self.shared.counters.requests_refused);
        }
        format!(
            r#"{{"success":{success},"ret_msg":{},"conn_id":"{}","req_id":{},"op":{}}}"#,
            json_string(ret_msg),
            self.conn_id,
            json_string(req_id),
            json_string(op)
        )
    }

    /// One request: its answer, and the first message of each topic it subscribed (sent right
    /// after the answer).
    fn handle_request(&mut self, text: &[u8]) -> (String, Vec<String>) {
        let request = serde_json::from_slice::<serde_json::Value>(text).ok();
        let object = request.as_ref().and_then(serde_json::Value::as_object);
        let req_id = object
            .and_then(|object| object.get("req_id"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let op = object
            .and_then(|object| object.get("op"))
            .and_then(serde_json::Value::as_str);
        let Some(op) = op else {
            return (
                self.answer(false, "error:invalid request", req_id, ""),
                Vec::new(),
            );
        };
        match op {
            "ping" => {
                bump(&self.shared.counters.pings_answered);
                (self.answer(true, "pong", req_id, "ping"), Vec::new())
            }
            "subscribe" | "unsubscribe" => {
                let args: Option<Vec<&str>> = object
                    .and_then(|object| object.get("args"))
                    .and_then(serde_json::Value::as_array)
                    .and_then(|args| args.iter().map(serde_json::Value::as_str).collect());
                let Some(args) = args else {
                    return (
                        self.answer(false, "error:invalid request", req_id, op),
                        Vec::new(),
                    );
                };
                if op == "subscribe" {
                    bump(&self.shared.counters.subscribe_requests);
                }
                match self.apply(op, &args) {
                    Ok(first) => {
                        let ret_msg = if self.category == Category::Spot {
                            op
                        } else {
                            ""
                        };
                        (self.answer(true, ret_msg, req_id, op), first)
                    }
                    Err(ret_msg) => (self.answer(false, &ret_msg, req_id, op), Vec::new()),
                }
            }
            _ => (
                self.answer(false, "error:invalid request", req_id, op),
                Vec::new(),
            ),
        }
    }

    /// Subscribes or unsubscribes `args`, all or none.
    fn apply(&mut self, op: &str, args: &[&str]) -> Result<Vec<String>, String> {
        if self.category == Category::Spot && args.len() > SPOT_MAX_ARGS {
            return Err(format!("args size >{SPOT_MAX_ARGS}"));
        }
        let symbols = match self.category {
            Category::Spot => &self.shared.options.spot_symbols,
            Category::Linear => &self.shared.options.linear_symbols,
        };
        let subscribed = |topic: &str| self.subscriptions.iter().any(|s| s.name == topic);
        let mut checked = Vec::new();
        for (index, &topic) in args.iter().enumerate() {
            let (kind, symbol) = market::check_topic(topic, self.category, symbols)?;
            let repeated = args[..index].contains(&topic);
            if op == "subscribe" && (subscribed(topic) || repeated) {
                return Err(format!("error:already subscribed,topic:{topic}"));
            }
            if op == "unsubscribe" && !subscribed(topic) {
                return Err(format!("error:not subscribed,topic:{topic}"));
            }
            checked.push((topic, kind, symbol));
        }
        if op == "unsubscribe" {
            self.subscriptions
                .retain(|s| !args.contains(&s.name.as_str()));
            self.cursor = 0;
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut first = Vec::new();
        for (topic, kind, symbol) in checked {
            bump(&self.shared.counters.topics_subscribed);
            let mut subscription =
                Subscription::new(topic, kind, symbol, self.category, self.shared.options.seed);
            first.push(subscription.render(now));
            self.subscriptions.push(subscription);
        }
        Ok(first)
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

    /// The faults due after the data messages sent so far: restart, skip, stall, close, reset.
    fn after_data(&mut self) -> io::Result<()> {
        if !self.faulty || self.state != State::Open {
            return Ok(());
        }
        let faults = &self.shared.options.faults;
        let counters = &self.shared.counters;
        let sent = self.data_sent;
        let books = self.subscriptions.iter().any(Subscription::is_book);
        if let Some(after) = faults.restart_after {
            if !self.done.restart && sent >= after && books {
                self.done.restart = true;
                bump(&counters.restarts_injected);
                self.subscriptions
                    .iter_mut()
                    .filter(|s| s.is_book())
                    .for_each(Subscription::restart);
            }
        }
        if let Some(after) = faults.skip_u_after {
            if !self.done.skip && sent >= after && books {
                self.done.skip = true;
                bump(&counters.skips_injected);
                self.subscriptions
                    .iter_mut()
                    .filter(|s| s.is_book())
                    .for_each(Subscription::skip_u);
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
