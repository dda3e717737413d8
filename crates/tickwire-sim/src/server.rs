//! The simulator's server: one TLS port on loopback speaking Binance USDⓈ-M Futures' WebSocket
//! market streams and its REST depth snapshot, fed by one [`Source`] at a chosen pace.
//!
//! Threads (blocking sockets: this is the other side of the wire, not tickwire's hot path):
//!
//! - the accept thread takes connections and starts one connection thread each;
//! - a connection thread does the TLS handshake, reads HTTP requests (answering REST ones), and
//!   after a WebSocket upgrade reads the client's frames: subscription requests, pings, pongs,
//!   close. It also keeps the connection's timers (server pings, the pong deadline, the wait
//!   for a close echo) through its socket's read timeout, so no thread sleeps for them alone;
//! - the pacer thread pulls messages from the source, sleeps until each is due, and writes it
//!   to every connection subscribed to its stream.
//!
//! Both the pacer and the connection thread write to a connection, under its mutex, which holds
//! the rustls session; the connection thread reads the socket without holding it, and feeds
//! what it read to the session under it. A write that blocks longer than the write timeout
//! drops that client, so a slow reader stalls the others at most that long.
//!
//! **Latency stamps:** with `SimOptions::stamps`, the first WebSocket connection to which a
//! data message is written is the stamped one: for each message with a `stamp_key` written to
//! it, a [`Stamp`] is taken and pushed once the message is encrypted, just before the `write`
//! that hands its bytes to the kernel (so a fast client never holds a message whose stamp is not
//! visible yet): the moment it goes on the wire, where a plain TCP sender stamps too. The
//! encryption before it is timed on its own ([`SimStats::encrypt_path`]). Other
//! connections are never stamped, and once the stamped connection closes no more stamps come.
//!
//! **Closing:** the server closes with a close frame and waits up to [`CLOSE_GRACE`] for the
//! client's echo before it closes TCP (RFC 6455 section 7.1.1: the server closes TCP first),
//! except on a pong timeout, where the close frame (1008) is followed by the TCP close at once:
//! a client that answers no ping is not expected to answer a close.

use super::accept::{self, accept_loop, Sockets};
use super::cert;
use super::control::{self, Subscriptions};
use super::frame::{self, FrameReader, Incoming};
use super::http::{self, EntryPoint, Request, Route};
use super::options::{Faults, Pace, SimOptions, SimVenue, Stamp, Start};
use super::source::{SimMessage, Source};
use super::wire::{
    self, feed_tls, later, lock, send_final, send_plain, send_plain_then, set_linger_zero,
    NextRequest, READ_BYTES, REQUEST_TIMEOUT,
};
use rustls::{ServerConfig, ServerConnection};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::ring::Producer;
use tickwire::ws::close_code;
use tickwire::ws::frame::OpCode;

/// How long the server waits for the client's close frame after sending its own.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The payload of the server's pings.
const PING_PAYLOAD: &[u8] = b"tickwire-sim";

/// The REST depth `limit` values the venue accepts (GET /fapi/v1/depth).
const DEPTH_LIMITS: [usize; 7] = [5, 10, 20, 50, 100, 500, 1000];
const DEPTH_LIMIT_DEFAULT: usize = 500;

/// The REST depth path of each venue.
fn depth_path(venue: SimVenue) -> &'static str {
    match venue {
        SimVenue::BinanceUsdmFutures => "/fapi/v1/depth",
        SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe => "/api/v3/depth",
    }
}

/// The levels per side a depth request's `limit` asks for, or `None` when the venue refuses it.
/// USD-M takes [`DEPTH_LIMITS`] (default 500); Spot ("Order book", `rest-api.md`) takes 1 to
/// 5000 (default 100) and answers a larger limit with 5000 levels.
fn depth_limit(venue: SimVenue, limit: Option<&str>) -> Option<usize> {
    match venue {
        SimVenue::BinanceUsdmFutures => match limit {
            None => Some(DEPTH_LIMIT_DEFAULT),
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|limit| DEPTH_LIMITS.contains(limit)),
        },
        SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe => match limit {
            None => Some(crate::spot::DEPTH_LIMIT_DEFAULT),
            Some(text) => text
                .parse::<usize>()
                .ok()
                .filter(|&limit| limit >= 1)
                .map(|limit| limit.min(crate::spot::DEPTH_LIMIT_MAX)),
        },
    }
}

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
    #[error("cannot write the CA certificate at {path}: {source}")]
    CertDir { path: PathBuf, source: io::Error },
    #[error("certificate generation failed: {0}")]
    Certificate(rcgen::Error),
    #[error("TLS server configuration failed: {0}")]
    Tls(rustls::Error),
    #[error("the replay speed must be a positive finite number, not {0}")]
    InvalidSpeed(f64),
    #[error("the data rate must be a positive finite number of messages per second, not {0}")]
    InvalidRate(f64),
    #[error("invalid instrument name {0:?}: it must be non-empty, without `.` or `\"`")]
    InvalidInstrument(String),
    #[error("cannot start a simulator thread: {0}")]
    Spawn(io::Error),
}

/// The stamped messages' send path ([`SimStats::send_path`]), in ns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendPath {
    pub messages: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl SendPath {
    /// The quantiles of a histogram of ns (the bench's tcp-floor sender builds its own).
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> SendPath {
        SendPath {
            messages: histogram.len(),
            p50_ns: histogram.value_at_quantile(0.5),
            p99_ns: histogram.value_at_quantile(0.99),
            p999_ns: histogram.value_at_quantile(0.999),
            max_ns: histogram.max(),
        }
    }
}

/// Counters of a run, from [`SimHandle::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// TCP connections accepted (WebSocket and REST).
    pub connections_accepted: u64,
    /// Completed WebSocket upgrades.
    pub websocket_connections: u64,
    /// HTTP requests that were not upgrades, whatever their answer.
    pub rest_requests: u64,
    /// Of those, the depth snapshot requests (`/fapi/v1/depth`, `/api/v3/depth`).
    pub depth_requests: u64,
    /// Messages pulled from the source.
    pub messages_pulled: u64,
    /// Pulled messages no connection was subscribed to: consumed and dropped, as the venue does.
    pub messages_unsubscribed: u64,
    /// Data messages written, summed over connections.
    pub messages_sent: u64,
    /// Whether the source is exhausted.
    pub source_done: bool,
    pub stamps_pushed: u64,
    /// Stamps lost to a full stamp ring.
    pub stamp_overflows: u64,
    /// Every WebSocket connection of the run, in upgrade order.
    pub connections: Vec<ConnectionStats>,
    /// Requests for the retired single entry point (`/ws`, `/stream`), refused with 404.
    pub retired_refused: u64,
    /// Binance Spot SBE: WebSocket upgrades refused with 401 for a missing or wrong
    /// `X-MBX-APIKEY`.
    pub api_key_refused: u64,
    /// With latency stamps: the stamped messages' send path, from the stamp to the `write`'s
    /// return (the benchmarks' sender side); `None` before the first.
    pub send_path: Option<SendPath>,
    /// With latency stamps: the stamped messages' TLS encryption, which comes before the stamp
    /// (from the framed message handed to the TLS session to its encrypted record); `None`
    /// before the first.
    pub encrypt_path: Option<SendPath>,
}

/// One WebSocket connection's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Its place in upgrade order, from 0 (connection faults apply below `fault_connections`).
    pub index: u64,
    /// The request target of its upgrade.
    pub path: String,
    pub messages_sent: u64,
    /// Data messages for its streams not sent: due during a stall, or the skipped depth message.
    pub messages_lost: u64,
    /// Ping frames the client sent (each answered with a pong while the connection is open).
    pub pings_received: u64,
    pub open: bool,
    /// Why it closed, as the server saw it.
    pub close_reason: Option<String>,
    /// The code of the client's close frame, if it sent one.
    pub client_close_code: Option<u16>,
    /// Streams subscribed (in the URL or by `SUBSCRIBE`) on an entry point that does not serve
    /// them: acknowledged, as the venue does, and never delivered.
    pub misrouted: u64,
}

/// The simulator.
pub struct Sim;

impl Sim {
    /// Makes the certificates, binds the port and starts the threads; the pacer begins as
    /// `options.start` says.
    pub fn start(options: SimOptions, source: Box<dyn Source>) -> Result<SimHandle, SimError> {
        if let Pace::Recorded { speed } = options.pace {
            if !(speed.is_finite() && speed > 0.0) {
                return Err(SimError::InvalidSpeed(speed));
            }
        }
        let served_hosts = if options.faults.wrong_host_cert {
            vec![cert::WRONG_HOST.to_owned()]
        } else {
            options.cert_hosts.clone()
        };
        let (tls, ca_pem_path) = cert::server_config(&options.cert_dir, &served_hosts)?;
        let listener = TcpListener::bind(options.listen).map_err(|source| SimError::Listen {
            addr: options.listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| SimError::Listen {
            addr: options.listen,
            source,
        })?;
        let url_host = url_host(&options.cert_hosts, addr);
        let shared = Arc::new(Shared {
            settings: Settings {
                venue: options.venue,
                ping_interval: options.ping_interval,
                pong_timeout: options.pong_timeout,
                max_incoming_per_sec: options.max_incoming_per_sec,
                max_streams: options.max_streams_per_connection,
                write_timeout: options.write_timeout,
                faults: options.faults,
                api_key: options.api_key,
            },
            tls,
            source: Mutex::new(source),
            control: Mutex::new(Control::default()),
            wake: Condvar::new(),
            stopping: AtomicBool::new(false),
            registry: Mutex::new(Registry::default()),
            counters: Counters::default(),
        });
        let mut handle = SimHandle {
            shared: Arc::clone(&shared),
            addr,
            ca_pem_path,
            url_host,
            accept: None,
            pacer: None,
        };
        let stamper = Stamper {
            producer: options.stamps,
            clock: options.clock,
            stamped_index: None,
            writing_ns: None,
        };
        let (pace, start) = (options.pace, options.start);
        let pacer_shared = Arc::clone(&shared);
        handle.pacer = Some(
            std::thread::Builder::new()
                .name("sim-pacer".into())
                .spawn(move || pace_messages(&pacer_shared, pace, start, stamper))
                .map_err(SimError::Spawn)?,
        );
        let accept_shared = Arc::clone(&shared);
        handle.accept = Some(
            std::thread::Builder::new()
                .name("sim-accept".into())
                .spawn(move || {
                    accept_loop(
                        &listener,
                        &accept_shared.registry,
                        &|| accept_shared.stopping(),
                        &|| {
                            accept_shared
                                .sleep_until(Some(Instant::now() + Duration::from_millis(100)))
                        },
                        "sim-conn",
                        |tcp, peer, socket_id| {
                            let accept_index = accept_shared
                                .counters
                                .connections_accepted
                                .fetch_add(1, Ordering::Relaxed);
                            let thread_shared = Arc::clone(&accept_shared);
                            move || {
                                serve_connection(
                                    &thread_shared,
                                    tcp,
                                    peer,
                                    socket_id,
                                    accept_index,
                                );
                            }
                        },
                    );
                })
                .map_err(SimError::Spawn)?,
        );
        tracing::info!(%addr, ca = %handle.ca_pem_path.display(), "venue simulator listening");
        Ok(handle)
    }
}

/// The host name URLs use: `localhost` when the certificate names it, else its first name.
fn url_host(cert_hosts: &[String], addr: SocketAddr) -> String {
    let host = if cert_hosts.iter().any(|host| host == "localhost") {
        "localhost".to_owned()
    } else {
        cert_hosts
            .first()
            .cloned()
            .unwrap_or_else(|| addr.ip().to_string())
    };
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    }
}

/// A running simulator; stops on [`SimHandle::stop`] or drop.
pub struct SimHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    ca_pem_path: PathBuf,
    url_host: String,
    accept: Option<JoinHandle<()>>,
    pacer: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// The address bound (with the port chosen for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run's CA certificate, for the client's `tls.extra_ca_file`.
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// The host URLs name (`localhost` unless the certificate does not name it).
    pub fn host(&self) -> &str {
        &self.url_host
    }

    /// `wss://host:port/<entry>/stream?streams=a/b`: a combined-stream URL on the entry
    /// point that serves the first stream (`/public` for none); Spot's has no entry point.
    pub fn ws_url(&self, streams: &[&str]) -> String {
        format!(
            "wss://{}:{}{}/stream?streams={}",
            self.url_host,
            self.addr.port(),
            self.entry_prefix(streams.first().copied()),
            streams.join("/")
        )
    }

    /// `wss://host:port/<entry>/ws/<stream>`: a raw-stream URL on the stream's entry point.
    pub fn raw_ws_url(&self, stream: &str) -> String {
        format!(
            "wss://{}:{}{}/ws/{stream}",
            self.url_host,
            self.addr.port(),
            self.entry_prefix(Some(stream))
        )
    }

    fn entry_prefix(&self, stream: Option<&str>) -> &'static str {
        match self.shared.settings.venue {
            SimVenue::BinanceSpot | SimVenue::BinanceSpotSbe => "",
            SimVenue::BinanceUsdmFutures => entry_of(stream).path(),
        }
    }

    /// `wss://host:port`: the host root a venue file names (the venue routes its channels).
    pub fn root_url(&self) -> String {
        format!("wss://{}:{}", self.url_host, self.addr.port())
    }

    /// `https://host:port`: the REST base URL.
    pub fn rest_url(&self) -> String {
        format!("https://{}:{}", self.url_host, self.addr.port())
    }

    pub fn stats(&self) -> SimStats {
        let counters = &self.shared.counters;
        let connections: Vec<ConnectionStats> = lock(&self.shared.registry)
            .stats
            .iter()
            .map(|stats| stats.snapshot())
            .collect();
        SimStats {
            connections_accepted: counters.connections_accepted.load(Ordering::Relaxed),
            websocket_connections: counters.websocket_connections.load(Ordering::Relaxed),
            rest_requests: counters.rest_requests.load(Ordering::Relaxed),
            depth_requests: counters.rest_depth_requests.load(Ordering::Relaxed),
            messages_pulled: counters.messages_pulled.load(Ordering::Relaxed),
            messages_unsubscribed: counters.messages_unsubscribed.load(Ordering::Relaxed),
            messages_sent: connections.iter().map(|conn| conn.messages_sent).sum(),
            source_done: lock(&self.shared.control).source_done,
            stamps_pushed: counters.stamps_pushed.load(Ordering::Relaxed),
            stamp_overflows: counters.stamp_overflows.load(Ordering::Relaxed),
            retired_refused: counters.retired_refused.load(Ordering::Relaxed),
            api_key_refused: counters.api_key_refused.load(Ordering::Relaxed),
            send_path: lock(&counters.send_path).as_ref().map(SendPath::of),
            encrypt_path: lock(&counters.encrypt_path).as_ref().map(SendPath::of),
            connections,
        }
    }

    /// Waits until the source is exhausted; false on timeout.
    pub fn wait_source_done(&self, timeout: Duration) -> bool {
        let deadline = later(Instant::now(), timeout);
        let mut control = lock(&self.shared.control);
        while !control.source_done {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            control = self
                .shared
                .wake
                .wait_timeout(control, deadline - now)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
        }
        true
    }

    /// Stops every thread and closes every connection; returns once all threads have ended.
    pub fn stop(&mut self) {
        {
            // Set under the lock the sleepers check it under, so that no wake-up is lost.
            let _control = lock(&self.shared.control);
            self.shared.stopping.store(true, Ordering::SeqCst);
        }
        self.shared.wake.notify_all();
        if let Some(accept) = self.accept.take() {
            accept::stop_accepting(self.addr, accept);
        }
        let threads = lock(&self.shared.registry).sockets.shut_down();
        if let Some(pacer) = self.pacer.take() {
            let _ = pacer.join();
        }
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The options the threads read.
struct Settings {
    venue: SimVenue,
    ping_interval: Duration,
    pong_timeout: Duration,
    max_incoming_per_sec: u32,
    max_streams: usize,
    write_timeout: Duration,
    faults: Faults,
    api_key: Option<String>,
}

struct Shared {
    settings: Settings,
    tls: Arc<ServerConfig>,
    source: Mutex<Box<dyn Source>>,
    /// What the pacer and `wait_source_done` sleep on, with `wake`.
    control: Mutex<Control>,
    wake: Condvar,
    /// Written under `control`'s lock (see `SimHandle::stop`), read anywhere.
    stopping: AtomicBool,
    registry: Mutex<Registry>,
    counters: Counters,
}

#[derive(Default)]
struct Control {
    /// A WebSocket connection has subscribed to at least one stream.
    subscribed: bool,
    source_done: bool,
}

#[derive(Default)]
struct Registry {
    /// Every connection thread's socket and the threads themselves.
    sockets: Sockets,
    /// The open WebSocket connections, which the pacer writes to.
    live: Vec<Arc<Conn>>,
    /// Every WebSocket connection of the run, for `stats`.
    stats: Vec<Arc<ConnStats>>,
}

impl accept::Registry for Registry {
    fn sockets(&mut self) -> &mut Sockets {
        &mut self.sockets
    }
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    websocket_connections: AtomicU64,
    rest_requests: AtomicU64,
    rest_errors_served: AtomicU32,
    /// Depth requests answered or failed, for `Faults::rest_error_every`.
    rest_depth_requests: AtomicU64,
    messages_pulled: AtomicU64,
    messages_unsubscribed: AtomicU64,
    stamps_pushed: AtomicU64,
    stamp_overflows: AtomicU64,
    retired_refused: AtomicU64,
    api_key_refused: AtomicU64,
    /// Stamped messages' send path: from the stamp to the `write`'s return (the kernel's
    /// delivery of the encrypted record), in ns. Recorded by the pacer thread only.
    send_path: Mutex<Option<hdrhistogram::Histogram<u64>>>,
    /// Stamped messages' TLS encryption, before the stamp, in ns. Recorded by the pacer thread
    /// only.
    encrypt_path: Mutex<Option<hdrhistogram::Histogram<u64>>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Sleeps until `due` (forever for `None`); false when the simulator is stopping.
    fn sleep_until(&self, due: Option<Instant>) -> bool {
        let mut control = lock(&self.control);
        loop {
            if self.stopping() {
                return false;
            }
            let now = Instant::now();
            control = match due {
                Some(due) if now >= due => return true,
                Some(due) => self
                    .wake
                    .wait_timeout(control, due - now)
                    .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard),
                None => self
                    .wake
                    .wait(control)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            };
        }
    }

    fn mark_subscribed(&self) {
        let mut control = lock(&self.control);
        if !control.subscribed {
            control.subscribed = true;
            self.wake.notify_all();
        }
    }
}

/// One WebSocket connection, shared by its connection thread and the pacer.
struct Conn {
    /// The entry point it was upgraded on (USD-M): it delivers only the streams that one
    /// serves. `None` on Spot's single entry point, which serves every stream.
    entry: Option<EntryPoint>,
    socket_id: u64,
    tcp: Arc<TcpStream>,
    /// Whether the connection faults apply to it.
    faulty: bool,
    stats: Arc<ConnStats>,
    out: Mutex<Outbound>,
}

/// The writing side of a connection, under its mutex.
struct Outbound {
    tls: ServerConnection,
    subscriptions: Subscriptions,
    state: ConnState,
    data_sent: u64,
    stall_until: Option<Instant>,
    done: FaultsDone,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    Open,
    /// Our close frame is out; waiting for the echo.
    Closing {
        since: Instant,
    },
    /// Shut down; the threads let go of it.
    Dead,
    /// Being reset: linger 0 is set, and TCP must not be shut down (which would send a FIN) but
    /// only closed, when the last handle drops.
    Reset,
}

/// The one-shot faults already fired on a connection.
#[derive(Default)]
struct FaultsDone {
    oversized: bool,
    stall: bool,
    close: bool,
    reset: bool,
    skip_depth: bool,
    server_shutdown: bool,
}

struct ConnStats {
    index: u64,
    path: String,
    messages_sent: AtomicU64,
    messages_lost: AtomicU64,
    pings_received: AtomicU64,
    open: AtomicBool,
    close_reason: Mutex<Option<String>>,
    /// 0 for none (0 is not a valid close code).
    client_close_code: AtomicU32,
    misrouted: AtomicU64,
}

impl ConnStats {
    fn snapshot(&self) -> ConnectionStats {
        let code = self.client_close_code.load(Ordering::Relaxed);
        ConnectionStats {
            index: self.index,
            path: self.path.clone(),
            messages_sent: self.messages_sent.load(Ordering::Relaxed),
            messages_lost: self.messages_lost.load(Ordering::Relaxed),
            pings_received: self.pings_received.load(Ordering::Relaxed),
            open: self.open.load(Ordering::Relaxed),
            close_reason: lock(&self.close_reason).clone(),
            client_close_code: u16::try_from(code).ok().filter(|code| *code != 0),
            misrouted: self.misrouted.load(Ordering::Relaxed),
        }
    }

    /// Records why the connection closed, unless a reason was recorded first.
    fn set_close_reason(&self, reason: impl Into<String>) {
        lock(&self.close_reason).get_or_insert_with(|| reason.into());
    }
}

impl Outbound {
    /// Encrypts and writes `plaintext`, blocking up to the socket's write timeout per write.
    fn send(&mut self, tcp: &TcpStream, plaintext: &[u8]) -> io::Result<()> {
        send_plain(&mut self.tls, tcp, plaintext)
    }

    /// As [`Outbound::send`], and calls `on_wire` just before the first `write`
    /// ([`send_plain_then`]).
    fn send_then(
        &mut self,
        tcp: &TcpStream,
        plaintext: &[u8],
        on_wire: impl FnOnce(),
    ) -> io::Result<()> {
        send_plain_then(&mut self.tls, tcp, plaintext, on_wire)
    }
}

impl Conn {
    /// Sends `plaintext`; a failed write (a timeout included) kills the connection.
    fn send_or_fail(&self, out: &mut Outbound, plaintext: &[u8]) -> bool {
        self.send_or_fail_then(out, plaintext, || {})
    }

    /// As [`Conn::send_or_fail`], with [`Outbound::send_then`]'s `on_wire`.
    fn send_or_fail_then(
        &self,
        out: &mut Outbound,
        plaintext: &[u8],
        on_wire: impl FnOnce(),
    ) -> bool {
        match out.send_then(&self.tcp, plaintext, on_wire) {
            Ok(()) => true,
            Err(error) => {
                self.kill(out, format!("write failed: {error}"));
                false
            }
        }
    }

    /// Sends a close frame and waits (in the connection thread) for the echo.
    fn start_close(&self, out: &mut Outbound, code: u16, reason: &str) {
        if out.state != ConnState::Open {
            return;
        }
        self.stats.set_close_reason(format!("{code} {reason}"));
        let mut wire = Vec::new();
        frame::write_close(&mut wire, code, reason);
        if self.send_or_fail(out, &wire) {
            out.state = ConnState::Closing {
                since: Instant::now(),
            };
        }
    }

    /// Shuts the connection down at once; its threads let go of it.
    fn kill(&self, out: &mut Outbound, reason: String) {
        self.stats.set_close_reason(reason);
        if out.state != ConnState::Reset {
            out.state = ConnState::Dead;
            let _ = self.tcp.shutdown(Shutdown::Both);
        }
    }

    /// Resets the connection (fault): SO_LINGER 0 makes the kernel answer the final close with
    /// an RST instead of a FIN. Shutting down the read side wakes the connection thread, which
    /// lets go of the socket; the last handle to drop closes it.
    fn reset(&self, out: &mut Outbound) {
        self.stats.set_close_reason("reset_after fault: TCP reset");
        if let Err(error) = set_linger_zero(&self.tcp) {
            tracing::warn!(%error, "sim: cannot set SO_LINGER 0; the reset becomes a close");
        }
        out.state = ConnState::Reset;
        let _ = self.tcp.shutdown(Shutdown::Read);
    }
}

/// A connection thread: runs the connection, then unregisters it.
fn serve_connection(
    shared: &Arc<Shared>,
    tcp: Arc<TcpStream>,
    peer: SocketAddr,
    socket_id: u64,
    accept_index: u64,
) {
    if let Err(error) = run_connection(shared, &tcp, socket_id, accept_index) {
        if !shared.stopping() {
            tracing::info!(%peer, %error, "sim: connection ended with an error");
        }
    }
    let mut registry = lock(&shared.registry);
    registry.sockets.remove(socket_id);
    registry.live.retain(|conn| conn.socket_id != socket_id);
}

/// The TLS handshake and the HTTP requests, up to a WebSocket upgrade.
fn run_connection(
    shared: &Arc<Shared>,
    tcp: &Arc<TcpStream>,
    socket_id: u64,
    accept_index: u64,
) -> io::Result<()> {
    let settings = &shared.settings;
    tcp.set_nodelay(true)?;
    tcp.set_write_timeout(Some(settings.write_timeout))?;
    tcp.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    if let Some(delay) = settings.faults.handshake_delay {
        if accept_index < u64::from(settings.faults.fault_connections)
            && !shared.sleep_until(Some(later(Instant::now(), delay)))
        {
            return Ok(());
        }
    }
    let (mut tls, mut plaintext) = wire::accept_tls(&shared.tls, tcp)?;
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        let request = match wire::read_request(&mut tls, tcp, &mut plaintext, &mut buf)? {
            NextRequest::Request(request) => request,
            NextRequest::Closed => return Ok(()),
            NextRequest::Invalid(error) => {
                let status = if error == http::HttpError::HeadTooLarge {
                    431
                } else {
                    400
                };
                let reply = http::json_error(status, -1, &error.to_string(), false);
                send_final(&mut tls, tcp, &reply)?;
                return Err(io::Error::new(io::ErrorKind::InvalidData, error));
            }
        };
        if request.header_has_token("upgrade", "websocket") {
            // USD-M serves its two entry points and refuses the single one it retired; Spot
            // serves the single one only.
            let spot = shared.settings.venue.is_spot();
            let (streams, combined, entry) = match (http::route(&request.target), spot) {
                (
                    Route::Stream {
                        streams,
                        combined,
                        entry,
                    },
                    false,
                ) => (streams, combined, Some(entry)),
                (Route::Single { streams, combined }, true) => (streams, combined, None),
                (Route::Single { .. }, false) => {
                    shared
                        .counters
                        .retired_refused
                        .fetch_add(1, Ordering::Relaxed);
                    let reply = http::json_error(404, -1, RETIRED, false);
                    return send_final(&mut tls, tcp, &reply);
                }
                (Route::Stream { .. } | Route::Depth { .. } | Route::NotFound, _) => {
                    let reply = http::json_error(404, -1, "no WebSocket endpoint here", false);
                    return send_final(&mut tls, tcp, &reply);
                }
            };
            if shared.settings.venue == SimVenue::BinanceSpotSbe {
                if let Some((code, msg)) = api_key_refusal(&request, &shared.settings) {
                    shared
                        .counters
                        .api_key_refused
                        .fetch_add(1, Ordering::Relaxed);
                    let reply = http::json_error(401, code, msg, false);
                    return send_final(&mut tls, tcp, &reply);
                }
            }
            let response = match http::upgrade_response(&request) {
                Ok(response) => response,
                Err((status, msg)) => {
                    let reply = http::json_error(status, -1, msg, false);
                    return send_final(&mut tls, tcp, &reply);
                }
            };
            let upgrade = Upgrade {
                response,
                streams,
                combined,
                entry,
                path: request.target,
            };
            return run_websocket(shared, tcp, socket_id, tls, plaintext, upgrade);
        }
        shared
            .counters
            .rest_requests
            .fetch_add(1, Ordering::Relaxed);
        let keep_alive = request.keep_alive() && !request.has_body();
        let reply = rest_response(shared, &request, keep_alive);
        if !keep_alive {
            return send_final(&mut tls, tcp, &reply);
        }
        send_plain(&mut tls, tcp, &reply)?;
    }
}

/// Binance Spot SBE ("An API Key is necessary for access", in `X-MBX-APIKEY`): the code and
/// message of the 401 refusing an upgrade without a key (-2014) or with a key other than the
/// configured one (-2015); `None` lets it through.
fn api_key_refusal(request: &Request, settings: &Settings) -> Option<(i64, &'static str)> {
    let key = request
        .header("x-mbx-apikey")
        .map(str::trim)
        .filter(|key| !key.is_empty());
    match (key, settings.api_key.as_deref()) {
        (None, _) => Some((-2014, "API-key format invalid.")),
        (Some(key), Some(expected)) if key != expected => {
            Some((-2015, "Invalid API-key, IP, or permissions for action."))
        }
        _ => None,
    }
}

/// The answer to a REST request: `GET /fapi/v1/depth`, or an error in the venue's JSON shape.
fn rest_response(shared: &Shared, request: &Request, keep_alive: bool) -> Vec<u8> {
    let path = request
        .target
        .split_once('?')
        .map_or(request.target.as_str(), |(path, _)| path);
    let route = http::route(&request.target);
    if request.method != "GET" {
        return http::json_error(405, -1, "only GET is served", keep_alive);
    }
    // The instrument list, USD-M's shape cut to what the appliance reads: each symbol and its
    // status.
    if path == "/fapi/v1/exchangeInfo" && shared.settings.venue == SimVenue::BinanceUsdmFutures {
        let Some(symbols) = lock(&shared.source).listed_symbols() else {
            return http::json_error(404, -1, &format!("not found: {path}"), keep_alive);
        };
        let listed: Vec<serde_json::Value> = symbols
            .iter()
            .map(|symbol| serde_json::json!({ "symbol": symbol, "status": "TRADING" }))
            .collect();
        let body = serde_json::json!({ "timezone": "UTC", "symbols": listed }).to_string();
        return http::response(200, "application/json", body.as_bytes(), keep_alive);
    }
    let (symbol, limit) = match route {
        Route::Depth { symbol, limit } if path == depth_path(shared.settings.venue) => {
            (symbol, limit)
        }
        Route::Depth { .. } => {
            return http::json_error(404, -1, &format!("not found: {path}"), keep_alive)
        }
        Route::Stream { .. } => {
            return http::json_error(
                400,
                -1,
                "this endpoint needs a WebSocket upgrade",
                keep_alive,
            )
        }
        Route::NotFound => {
            return http::json_error(404, -1, &format!("not found: {path}"), keep_alive)
        }
        Route::Single { .. } if shared.settings.venue.is_spot() => {
            return http::json_error(
                400,
                -1,
                "this endpoint needs a WebSocket upgrade",
                keep_alive,
            )
        }
        Route::Single { .. } => {
            shared
                .counters
                .retired_refused
                .fetch_add(1, Ordering::Relaxed);
            return http::json_error(404, -1, RETIRED, keep_alive);
        }
    };
    let rest_errors = shared.settings.faults.rest_errors;
    let first_errors = shared
        .counters
        .rest_errors_served
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |served| {
            (served < rest_errors).then_some(served + 1)
        })
        .is_ok();
    let depth_request = shared
        .counters
        .rest_depth_requests
        .fetch_add(1, Ordering::Relaxed)
        + 1;
    let every_error = shared
        .settings
        .faults
        .rest_error_every
        .is_some_and(|every| every > 0 && depth_request % u64::from(every) == 0);
    let fail = first_errors || every_error;
    if fail {
        return http::json_error(
            503,
            -1001,
            "Internal error; unable to process your request. Please try again.",
            keep_alive,
        );
    }
    let Some(symbol) = symbol.filter(|symbol| !symbol.is_empty()) else {
        return http::json_error(
            400,
            -1102,
            "Mandatory parameter 'symbol' was not sent, was empty/null, or malformed.",
            keep_alive,
        );
    };
    let Some(limit) = depth_limit(shared.settings.venue, limit.as_deref()) else {
        return http::json_error(
            400,
            -1130,
            "Data sent for parameter 'limit' is not valid.",
            keep_alive,
        );
    };
    match lock(&shared.source).depth_snapshot(&symbol, limit) {
        Some(body) => http::response(200, "application/json", &body, keep_alive),
        None => http::json_error(400, -1121, "Invalid symbol.", keep_alive),
    }
}

/// Per-connection timers, kept by the connection thread.
struct Keepalive {
    next_ping: Instant,
    /// When the oldest ping still without a pong was sent.
    awaiting_pong_since: Option<Instant>,
    /// When the client's recent messages arrived, for the rate limit.
    incoming: VecDeque<Instant>,
}

/// What the connection thread does after handling a frame.
enum Flow {
    Continue,
    Stop,
}

/// The entry point that serves `stream` (`/public` for none).
fn entry_of(stream: Option<&str>) -> EntryPoint {
    match stream {
        Some(stream) if EntryPoint::Market.serves(stream) => EntryPoint::Market,
        _ => EntryPoint::Public,
    }
}

/// A request that asked for, and may have, a WebSocket upgrade.
struct Upgrade {
    /// The 101 response.
    response: Vec<u8>,
    /// The streams the URL names.
    streams: Vec<String>,
    combined: bool,
    entry: Option<EntryPoint>,
    path: String,
}

/// The WebSocket phase of a connection: registers it with the pacer, then reads the client's
/// frames and keeps the timers until the connection ends.
///
/// **Invariant:** a client that has the 101 response is subscribed to the URL's streams: the
/// connection is registered, and the 101 sent, under its lock, so that no data message can
/// come before the 101 and none due after it is missed.
fn run_websocket(
    shared: &Arc<Shared>,
    tcp: &Arc<TcpStream>,
    socket_id: u64,
    tls: ServerConnection,
    leftover: Vec<u8>,
    upgrade: Upgrade,
) -> io::Result<()> {
    let settings = &shared.settings;
    let index = shared
        .counters
        .websocket_connections
        .fetch_add(1, Ordering::Relaxed);
    let stats = Arc::new(ConnStats {
        index,
        path: upgrade.path,
        messages_sent: AtomicU64::new(0),
        messages_lost: AtomicU64::new(0),
        pings_received: AtomicU64::new(0),
        open: AtomicBool::new(true),
        close_reason: Mutex::new(None),
        client_close_code: AtomicU32::new(0),
        misrouted: AtomicU64::new(misrouted(upgrade.entry, &upgrade.streams)),
    });
    let mut subscriptions = Subscriptions {
        streams: Vec::new(),
        combined: upgrade.combined,
    };
    subscriptions.add(&upgrade.streams);
    let conn = Arc::new(Conn {
        entry: upgrade.entry,
        socket_id,
        tcp: Arc::clone(tcp),
        faulty: index < u64::from(settings.faults.fault_connections),
        stats: Arc::clone(&stats),
        out: Mutex::new(Outbound {
            tls,
            subscriptions,
            state: ConnState::Open,
            data_sent: 0,
            stall_until: None,
            done: FaultsDone::default(),
        }),
    });
    let subscribed = {
        let mut out = lock(&conn.out);
        {
            let mut registry = lock(&shared.registry);
            registry.live.push(Arc::clone(&conn));
            registry.stats.push(Arc::clone(&stats));
        }
        let count = out.subscriptions.streams.len();
        let upgraded = conn.send_or_fail(&mut out, &upgrade.response);
        if upgraded && count > settings.max_streams {
            let reason = too_many_streams(count, settings.max_streams);
            conn.start_close(&mut out, 1008, &reason);
        } else if upgraded {
            // Faults set to fire after 0 messages fire now.
            post_send_faults(&conn, &mut out, &settings.faults);
        }
        upgraded && (1..=settings.max_streams).contains(&count)
    };
    if subscribed {
        shared.mark_subscribed();
    }
    let result = websocket_loop(shared, &conn, leftover);
    stats.open.store(false, Ordering::Relaxed);
    let mut out = lock(&conn.out);
    if out.state != ConnState::Reset {
        conn.kill(&mut out, "the client went away".into());
    }
    result
}

fn websocket_loop(shared: &Shared, conn: &Conn, leftover: Vec<u8>) -> io::Result<()> {
    let settings = &shared.settings;
    let mut reader = FrameReader::new();
    reader.push(&leftover);
    let mut keepalive = Keepalive {
        next_ping: later(Instant::now(), settings.ping_interval),
        awaiting_pong_since: None,
        incoming: VecDeque::new(),
    };
    let mut buf = vec![0u8; READ_BYTES];
    let mut plaintext = Vec::new();
    loop {
        loop {
            match reader.next_incoming() {
                Ok(Some(incoming)) => {
                    if let Flow::Stop = handle_incoming(shared, conn, &mut keepalive, incoming) {
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    let mut out = lock(&conn.out);
                    conn.start_close(&mut out, error.close_code(), &error.to_string());
                    conn.kill(&mut out, format!("protocol error: {error}"));
                    return Err(io::Error::new(io::ErrorKind::InvalidData, error));
                }
            }
        }
        if let Flow::Stop = run_timers(shared, conn, &mut keepalive) {
            return Ok(());
        }
        let deadline = {
            let out = lock(&conn.out);
            let mut deadline = keepalive.next_ping;
            if let Some(since) = keepalive.awaiting_pong_since {
                deadline = deadline.min(later(since, settings.pong_timeout));
            }
            match out.state {
                ConnState::Open => {}
                ConnState::Closing { since } => deadline = deadline.min(later(since, CLOSE_GRACE)),
                ConnState::Dead | ConnState::Reset => return Ok(()),
            }
            deadline
        };
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        conn.tcp.set_read_timeout(Some(timeout))?;
        match (&*conn.tcp).read(&mut buf) {
            Ok(0) => {
                conn.stats
                    .set_close_reason("the client closed TCP without a close frame");
                return Ok(());
            }
            Ok(read) => {
                let mut out = lock(&conn.out);
                if matches!(out.state, ConnState::Dead | ConnState::Reset) {
                    return Ok(());
                }
                plaintext.clear();
                match feed_tls(&mut out.tls, &conn.tcp, &buf[..read], &mut plaintext) {
                    Ok(false) => {}
                    Ok(true) => {
                        conn.kill(&mut out, "the client sent TLS close_notify".into());
                        return Ok(());
                    }
                    Err(error) => {
                        conn.kill(&mut out, format!("TLS error: {error}"));
                        return Err(error);
                    }
                }
                drop(out);
                reader.push(&plaintext);
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(error) => {
                let mut out = lock(&conn.out);
                conn.kill(&mut out, format!("read failed: {error}"));
                return Err(error);
            }
        }
    }
}

/// The refusal of the retired single entry point.
const RETIRED: &str = "the single entry point (/ws, /stream) was retired on 2026-04-23: \
    connect to /public (bookTicker, depth) or /market (aggTrade, markPrice, ...)";

/// Whether a connection on `entry` delivers `stream`.
fn serves(entry: Option<EntryPoint>, stream: &str) -> bool {
    entry.is_none_or(|entry| entry.serves(stream))
}

/// How many of `streams` `entry` does not serve.
fn misrouted(entry: Option<EntryPoint>, streams: &[String]) -> u64 {
    streams
        .iter()
        .filter(|stream| !serves(entry, stream))
        .count() as u64
}

fn too_many_streams(count: usize, max: usize) -> String {
    format!("too many streams: {count} subscribed, the limit is {max} per connection")
}

/// Handles one message or control frame from the client.
fn handle_incoming(
    shared: &Shared,
    conn: &Conn,
    keepalive: &mut Keepalive,
    incoming: Incoming,
) -> Flow {
    let settings = &shared.settings;
    if matches!(incoming, Incoming::Ping(_)) {
        conn.stats.pings_received.fetch_add(1, Ordering::Relaxed);
    }
    let mut out = lock(&conn.out);
    if !matches!(incoming, Incoming::Close(..)) {
        // Binance counts every incoming message, pings and pongs included, against the limit.
        let now = Instant::now();
        keepalive.incoming.push_back(now);
        while keepalive
            .incoming
            .front()
            .is_some_and(|&at| now.duration_since(at) >= Duration::from_secs(1))
        {
            keepalive.incoming.pop_front();
        }
        if keepalive.incoming.len() > settings.max_incoming_per_sec as usize {
            let reason = format!(
                "too many requests: more than {} incoming messages per second",
                settings.max_incoming_per_sec
            );
            conn.start_close(&mut out, 1008, &reason);
            return Flow::Continue;
        }
    }
    let open = out.state == ConnState::Open;
    match incoming {
        Incoming::Text(_) if open && conn.faulty && settings.faults.ignore_requests => {
            tracing::debug!("sim: request ignored (fault)");
        }
        Incoming::Text(text) if open => {
            let before = out.subscriptions.streams.len();
            let reply = control::handle_for(settings.venue, &text, &mut out.subscriptions);
            let added = out.subscriptions.streams.get(before..).unwrap_or_default();
            conn.stats
                .misrouted
                .fetch_add(misrouted(conn.entry, added), Ordering::Relaxed);
            let mut wire = Vec::new();
            frame::write_frame(&mut wire, true, OpCode::Text, reply.text.as_bytes());
            if !conn.send_or_fail(&mut out, &wire) {
                return Flow::Stop;
            }
            let count = out.subscriptions.streams.len();
            if count > settings.max_streams {
                let reason = too_many_streams(count, settings.max_streams);
                conn.start_close(&mut out, 1008, &reason);
            } else if reply.subscribed {
                drop(out);
                shared.mark_subscribed();
            }
        }
        Incoming::Binary(_) if open => {
            tracing::debug!("sim: binary message from a client ignored");
        }
        Incoming::Ping(payload) if open => {
            let mut wire = Vec::new();
            frame::write_frame(&mut wire, true, OpCode::Pong, &payload);
            if !conn.send_or_fail(&mut out, &wire) {
                return Flow::Stop;
            }
        }
        // Spot SBE: "Unsolicited pong frames are allowed, but will not prevent disconnection":
        // only a pong with our ping's payload answers it.
        Incoming::Pong(payload)
            if settings.venue == SimVenue::BinanceSpotSbe && payload != PING_PAYLOAD => {}
        Incoming::Pong(_) => keepalive.awaiting_pong_since = None,
        Incoming::Close(code, _) => {
            conn.stats
                .client_close_code
                .store(code.map_or(0, u32::from), Ordering::Relaxed);
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
                let _ = out.send(&conn.tcp, &wire);
                let reason = code.map_or("the client closed".to_owned(), |code| {
                    format!("the client closed with {code}")
                });
                conn.kill(&mut out, reason);
            } else {
                conn.kill(&mut out, "closing handshake complete".into());
            }
            return Flow::Stop;
        }
        // Data frames after our close frame are dropped (section 5.5.1).
        Incoming::Text(_) | Incoming::Binary(_) | Incoming::Ping(_) => {}
    }
    Flow::Continue
}

/// Server pings, the pong deadline and the close grace period.
fn run_timers(shared: &Shared, conn: &Conn, keepalive: &mut Keepalive) -> Flow {
    let settings = &shared.settings;
    let now = Instant::now();
    let mut out = lock(&conn.out);
    match out.state {
        ConnState::Dead | ConnState::Reset => return Flow::Stop,
        ConnState::Closing { since } => {
            if now >= later(since, CLOSE_GRACE) {
                conn.kill(&mut out, "no close frame from the client in time".into());
                return Flow::Stop;
            }
        }
        ConnState::Open => {
            if let Some(since) = keepalive.awaiting_pong_since {
                if now >= later(since, settings.pong_timeout) {
                    let reason =
                        format!("pong timeout: no pong within {:?}", settings.pong_timeout);
                    conn.start_close(&mut out, 1008, &reason);
                    conn.kill(&mut out, reason);
                    return Flow::Stop;
                }
            }
            if now >= keepalive.next_ping {
                keepalive.next_ping = later(now, settings.ping_interval);
                let stalled = out.stall_until.is_some_and(|until| now < until);
                if !stalled {
                    let mut wire = Vec::new();
                    frame::write_frame(&mut wire, true, OpCode::Ping, PING_PAYLOAD);
                    if !conn.send_or_fail(&mut out, &wire) {
                        return Flow::Stop;
                    }
                    keepalive.awaiting_pong_since.get_or_insert(now);
                }
            }
        }
    }
    Flow::Continue
}

/// The latency stamps: see the module documentation.
struct Stamper {
    producer: Option<Producer<Stamp>>,
    clock: Clock,
    /// The index of the stamped connection, once one received data.
    stamped_index: Option<u64>,
    /// The stamp of the message being written, until its write returns.
    writing_ns: Option<u64>,
}

impl Stamper {
    /// The clock, when a message with `key` may be stamped (the encryption's start).
    fn clock_if_stamping(&self, key: Option<u64>) -> Option<u64> {
        (self.producer.is_some() && key.is_some()).then(|| self.clock.now_ns())
    }

    /// Stamps a message that is encrypted and about to be written: the time is taken after the
    /// TLS encryption, just before the `write` that hands it to the kernel (where a plain TCP
    /// sender stamps), so the measured latency is from the wire on, as the plain sender's is.
    /// The encryption, from `encrypting_ns`, is recorded on its own.
    fn before_write(
        &mut self,
        index: u64,
        key: Option<u64>,
        encrypting_ns: Option<u64>,
        counters: &Counters,
    ) {
        let Some(producer) = self.producer.as_mut() else {
            return;
        };
        // The stamped connection is the first that is written a stamped message (a bookTicker):
        // another entry point's connection (`/market`, trades only) may be written to first.
        let Some(key) = key else {
            return;
        };
        if *self.stamped_index.get_or_insert(index) != index {
            return;
        }
        let send_ns = self.clock.now_ns();
        self.writing_ns = Some(send_ns);
        match producer.try_push(Stamp { key, send_ns }) {
            Ok(()) => counters.stamps_pushed.fetch_add(1, Ordering::Relaxed),
            Err(_) => counters.stamp_overflows.fetch_add(1, Ordering::Relaxed),
        };
        if let Some(start) = encrypting_ns {
            record(&counters.encrypt_path, send_ns.saturating_sub(start));
        }
    }
}

/// Records `elapsed` ns (at least 1) into a stamped path's histogram.
fn record(path: &Mutex<Option<hdrhistogram::Histogram<u64>>>, elapsed: u64) {
    let mut path = lock(path);
    let histogram = path.get_or_insert_with(|| {
        hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3)
            .expect("constant bounds are valid")
    });
    histogram.saturating_record(elapsed.max(1));
}

impl Stamper {
    /// The stamped message's write returned (`written`: it succeeded): its send path is
    /// recorded.
    fn after_write(&mut self, written: bool, counters: &Counters) {
        let Some(send_ns) = self.writing_ns.take() else {
            return;
        };
        if !written {
            return;
        }
        record(
            &counters.send_path,
            self.clock.now_ns().saturating_sub(send_ns),
        );
    }
}

/// The pacer thread.
fn pace_messages(shared: &Shared, pace: Pace, start: Start, mut stamper: Stamper) {
    if start == Start::FirstSubscriber {
        let mut control = lock(&shared.control);
        while !control.subscribed {
            if shared.stopping() {
                return;
            }
            control = shared
                .wake
                .wait(control)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
    let started = Instant::now();
    loop {
        if shared.stopping() {
            return;
        }
        let next = lock(&shared.source).next_message();
        let Some(message) = next else {
            lock(&shared.control).source_done = true;
            shared.wake.notify_all();
            tracing::info!("sim: the source is exhausted");
            return;
        };
        shared
            .counters
            .messages_pulled
            .fetch_add(1, Ordering::Relaxed);
        if let Pace::Recorded { speed } = pace {
            let offset = Duration::try_from_secs_f64(message.offset_ns as f64 / 1e9 / speed)
                .unwrap_or(Duration::MAX);
            if !shared.sleep_until(started.checked_add(offset)) {
                return;
            }
        }
        let live = lock(&shared.registry).live.clone();
        let mut subscribed = false;
        for conn in &live {
            subscribed |= deliver(
                conn,
                &message,
                &shared.settings.faults,
                &mut stamper,
                shared,
            );
        }
        if !subscribed {
            shared
                .counters
                .messages_unsubscribed
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Writes one data message to one connection if it is subscribed to the message's stream,
/// applying the connection's faults; returns whether it was subscribed.
fn deliver(
    conn: &Conn,
    message: &SimMessage,
    faults: &Faults,
    stamper: &mut Stamper,
    shared: &Shared,
) -> bool {
    let sbe = shared.settings.venue == SimVenue::BinanceSpotSbe;
    let mut out = lock(&conn.out);
    if out.state != ConnState::Open
        || !out.subscriptions.contains(&message.stream)
        || !serves(conn.entry, &message.stream)
    {
        return false;
    }
    let faults = conn.faulty.then_some(faults);
    if let Some(until) = out.stall_until {
        if Instant::now() < until {
            conn.stats.messages_lost.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        out.stall_until = None;
    }
    if let Some(after) = faults.and_then(|faults| faults.skip_depth_after) {
        if !out.done.skip_depth && out.data_sent >= after && is_depth_stream(&message.stream) {
            out.done.skip_depth = true;
            conn.stats.messages_lost.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    // SBE frames are the same on every endpoint: the message alone, no combined wrapper.
    let payload = if out.subscriptions.combined && !sbe {
        Some(message.combined.as_slice())
    } else {
        message.combined.get(message.data.clone())
    };
    let Some(payload) = payload else {
        tracing::warn!(stream = %message.stream, "sim: the source's data range is outside its message");
        return true;
    };
    let number = out.data_sent + 1;
    let malformed = faults
        .and_then(|faults| faults.malformed_every)
        .is_some_and(|every| every > 0 && number % every == 0);
    let payload = if malformed {
        truncated(payload)
    } else {
        payload
    };
    let fragments = faults.and_then(|faults| faults.fragment_into).unwrap_or(1);
    let mut wire = Vec::with_capacity(payload.len() + 16);
    let opcode = if sbe { OpCode::Binary } else { OpCode::Text };
    frame::write_message(&mut wire, opcode, payload, fragments);
    // The stamp is taken once the message is encrypted and goes out before its bytes: a client
    // on another core can take the message off the wire before this thread returns from the
    // write, and must find its stamp then.
    let encrypting_ns = stamper.clock_if_stamping(message.stamp_key);
    let written = conn.send_or_fail_then(&mut out, &wire, || {
        stamper.before_write(
            conn.stats.index,
            message.stamp_key,
            encrypting_ns,
            &shared.counters,
        );
    });
    stamper.after_write(written, &shared.counters);
    if !written {
        return true;
    }
    out.data_sent = number;
    conn.stats.messages_sent.fetch_add(1, Ordering::Relaxed);
    if let Some(faults) = faults {
        post_send_faults(conn, &mut out, faults);
    }
    true
}

/// `<symbol>@depth`, `<symbol>@depth@100ms`, `<symbol>@depth20`: the streams of depth updates.
fn is_depth_stream(stream: &str) -> bool {
    stream
        .split_once('@')
        .is_some_and(|(_, channel)| channel.starts_with("depth"))
}

/// The first half of a message, cut at a character boundary: still UTF-8 (a text frame must
/// be), never valid JSON (an object cut short leaves a brace open).
fn truncated(payload: &[u8]) -> &[u8] {
    let mut cut = payload.len() / 2;
    if let Ok(text) = std::str::from_utf8(payload) {
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
    }
    &payload[..cut]
}

/// The faults that fire after the N-th data message of a faulty connection, in this order:
/// the oversized frame, the stall, the close, the reset.
fn post_send_faults(conn: &Conn, out: &mut Outbound, faults: &Faults) {
    if !conn.faulty || out.state != ConnState::Open {
        return;
    }
    let sent = out.data_sent;
    // With `rotate_faults`, the one of stall, close and reset that is this connection's turn.
    let turn = faults.rotate_faults.then(|| {
        let configured = [
            faults.stall_after.is_some(),
            faults.close_after.is_some(),
            faults.reset_after.is_some(),
        ];
        let count = configured.iter().filter(|&&set| set).count().max(1) as u64;
        let nth = (conn.stats.index % count) as usize;
        configured
            .iter()
            .enumerate()
            .filter(|(_, &set)| set)
            .nth(nth)
            .map_or(usize::MAX, |(kind, _)| kind)
    });
    let mine = |kind: usize| turn.is_none_or(|turn| turn == kind);
    if let Some((after, size_bytes)) = faults.oversized_after {
        if !out.done.oversized && sent >= after {
            out.done.oversized = true;
            let mut wire = Vec::with_capacity(size_bytes + 16);
            frame::write_frame(
                &mut wire,
                true,
                OpCode::Text,
                &oversized_payload(size_bytes),
            );
            if !conn.send_or_fail(out, &wire) {
                return;
            }
        }
    }
    if let Some(after) = faults.server_shutdown_after {
        if !out.done.server_shutdown && sent >= after {
            out.done.server_shutdown = true;
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis());
            let event = format!("{{\"e\":\"serverShutdown\",\"E\":{now_ms}}}");
            let mut wire = Vec::new();
            frame::write_frame(&mut wire, true, OpCode::Text, event.as_bytes());
            if !conn.send_or_fail(out, &wire) {
                return;
            }
            conn.start_close(out, 1001, "server shutdown");
            return;
        }
    }
    if let Some((after, duration)) = faults.stall_after {
        if mine(0) && !out.done.stall && sent >= after {
            out.done.stall = true;
            out.stall_until = Some(later(Instant::now(), duration));
        }
    }
    if let Some(after) = faults.close_after {
        if mine(1) && !out.done.close && sent >= after {
            out.done.close = true;
            conn.start_close(out, 1000, "close_after fault");
            return;
        }
    }
    if let Some(after) = faults.reset_after {
        if mine(2) && !out.done.reset && sent >= after {
            out.done.reset = true;
            conn.reset(out);
        }
    }
}

/// A JSON object of exactly `size_bytes` bytes (padding with `a`), or `a`s alone when it is
/// too short for the object.
fn oversized_payload(size_bytes: usize) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"e\":\"oversized\",\"pad\":\"";
    const TAIL: &[u8] = b"\"}";
    if size_bytes < HEAD.len() + TAIL.len() {
        return vec![b'a'; size_bytes];
    }
    let mut payload = Vec::with_capacity(size_bytes);
    payload.extend_from_slice(HEAD);
    payload.resize(size_bytes - TAIL.len(), b'a');
    payload.extend_from_slice(TAIL);
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_utf8_and_breaks_json() {
        let message = "{\"s\":\"é€\"}".as_bytes();
        let cut = truncated(message);
        assert!(std::str::from_utf8(cut).is_ok());
        assert!(serde_json::from_slice::<serde_json::Value>(cut).is_err());
    }

    #[test]
    fn oversized_payload_has_the_exact_size() {
        for size in [0, 5, 26, 27, 1000] {
            assert_eq!(oversized_payload(size).len(), size);
        }
        assert!(serde_json::from_slice::<serde_json::Value>(&oversized_payload(1000)).is_ok());
    }

    #[test]
    fn depth_streams_are_recognised() {
        assert!(is_depth_stream("btcusdt@depth@100ms"));
        assert!(is_depth_stream("btcusdt@depth20"));
        assert!(!is_depth_stream("btcusdt@bookTicker"));
        assert!(!is_depth_stream("depth"));
    }
}
