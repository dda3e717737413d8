//! The serving plane: one thread, not pinned and not a hot thread, running axum on hyper on a
//! current-thread tokio runtime. It answers `/metrics`, `/healthz`, `/readyz`, the JSON API
//! (`/v1/...`), the WebSocket event stream (`/v1/stream`) and the status page (`/`).
//!
//! What it reads, and how, so that nothing it does reaches a hot thread or waits on another:
//! - The control thread's view (venue states, health, the Prometheus text with the merged
//!   latency histograms) comes as one immutable [`snapshot::Published`] that the control thread
//!   builds every 100 ms and whenever a connection changes state, and swaps in with
//!   `ArcSwap::store`. `arc-swap` rather than a mutex or a seqlock: the control thread's store
//!   never waits for a reader (a mutex would let a slow request stall the control tick), a
//!   reader's `load` is a few atomic operations and never sees a value half-written (a seqlock
//!   over a `String` would need copying and retries), and the old value is freed by whichever
//!   side drops it last. A channel would do as well but keeps only the latest on one side anyway.
//!   The latency histograms are merged on the control thread, where they already are
//!   (`metrics::LatencyCollector`), so the serving thread never touches a recorder.
//! - Books and events come from the shared-memory bus, which every reader reads at its own
//!   pace without the writer ever waiting (`feed`).
//! - Its own counters are atomics it alone writes.
//!
//! **Invariant:** the serving thread never blocks the control thread or a hot thread: it takes
//! no lock they take, and they never wait on it.

pub mod auth;
pub mod hosts;
pub mod snapshot;

mod api;
mod conn;
mod feed;

use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify};

use crate::config::HttpConfig;
pub use api::CLOSE_SLOW;
pub use snapshot::{InstrumentView, Published};

/// How often the serving thread reads the bus when it has caught up: far inside the bus's
/// capacity at any rate the appliance sustains, and rare enough to cost nothing when idle.
const BUS_POLL: Duration = Duration::from_millis(2);

/// What the serving thread counts about itself (`tickwire_http_*`).
#[derive(Debug, Default)]
pub struct ServeCounters {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    pub unauthorized: AtomicU64,
    /// Requests refused for a `Host` that is not this listener's (421).
    pub refused_host: AtomicU64,
    /// WebSocket upgrades refused for a foreign `Origin` (403).
    pub refused_origin: AtomicU64,
    pub header_timeouts: AtomicU64,
    pub stream_clients: AtomicU64,
    pub stream_slow_closed: AtomicU64,
    pub bus_missed: AtomicU64,
}

/// What every request handler shares.
pub(crate) struct Shared {
    published: Arc<ArcSwap<Published>>,
    published_at: Arc<ArcSwap<Instant>>,
    instruments: Vec<InstrumentView>,
    /// The bus reader, `None` without a `[bus]`. Only the serving thread takes this lock: the
    /// pump and the handlers, which run one at a time on its single runtime thread.
    feed: Option<Mutex<feed::Feed>>,
    /// Notified whenever the pump stops between venue messages.
    consistent: Notify,
    token: Option<auth::Token>,
    /// The `Host` and `Origin` rules, checked before the routes (`conn`).
    hosts: hosts::Policy,
    stream_queue: usize,
    counters: Arc<ServeCounters>,
}

/// Why the serving plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("http: cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http: cannot start the serving thread: {0}")]
    Thread(std::io::Error),
}

/// The serving thread, seen from the thread that started it.
pub struct HttpServer {
    addr: SocketAddr,
    published: Arc<ArcSwap<Published>>,
    published_at: Arc<ArcSwap<Instant>>,
    counters: Arc<ServeCounters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Binds the listening socket (so that a port in use fails the start before any thread runs).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| ServeError::Listen { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ServeError::Listen { addr, source })?;
    Ok(listener)
}

impl HttpServer {
    /// Starts the serving thread on `listener` (from [`bind`]). `bus` is the bus file the books
    /// and the stream are read from.
    pub fn start(
        listener: std::net::TcpListener,
        config: &HttpConfig,
        instruments: Vec<InstrumentView>,
        bus: Option<PathBuf>,
        first: Published,
    ) -> Result<HttpServer, ServeError> {
        let addr = listener.local_addr().map_err(|source| ServeError::Listen {
            addr: config.listen.unwrap_or(([127, 0, 0, 1], 0).into()),
            source,
        })?;
        let published = Arc::new(ArcSwap::from_pointee(first));
        let published_at = Arc::new(ArcSwap::from_pointee(Instant::now()));
        let counters = Arc::new(ServeCounters::default());
        let shared = Arc::new(Shared {
            published: published.clone(),
            published_at: published_at.clone(),
            instruments,
            feed: bus.map(|path| Mutex::new(feed::Feed::new(path))),
            consistent: Notify::new(),
            token: auth::token(config).as_deref().map(auth::Token::new),
            hosts: hosts::Policy::new(config),
            stream_queue: config.stream_queue,
            counters: counters.clone(),
        });
        let limits = conn::Limits {
            max_connections: config.max_connections,
            max_head_bytes: config.max_request_head_bytes,
            header_timeout: Duration::from_millis(config.header_timeout_ms),
            write_timeout: Duration::from_millis(config.write_timeout_ms),
        };
        let (stop, stopped) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ServeError::Thread)?;
        let core = config.core;
        let thread = std::thread::Builder::new()
            .name("tickwire-http".to_owned())
            .spawn(move || {
                crate::thread::pin_side_thread(core, "serving");
                runtime.block_on(serve(listener, shared, limits, stopped));
            })
            .map_err(ServeError::Thread)?;
        Ok(HttpServer {
            addr,
            published,
            published_at,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it listens (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces what the control thread last published. Never waits for a reader.
    pub fn publish(&self, published: Published) {
        self.published.store(Arc::new(published));
        self.published_at.store(Arc::new(Instant::now()));
    }

    pub fn counters(&self) -> &ServeCounters {
        &self.counters
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The serving thread's whole life: the accept loop and the bus pump, until `stopped`.
async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    limits: conn::Limits,
    stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!("http: the listener cannot join the runtime: {error}");
            return;
        }
    };
    let app = api::router(shared.clone());
    let pump = tokio::spawn(pump(shared.clone()));
    conn::accept_loop(listener, app, limits, shared.clone(), stopped).await;
    pump.abort();
}

/// Reads the bus every [`BUS_POLL`] (when there is one).
async fn pump(shared: Arc<Shared>) {
    let Some(feed) = &shared.feed else {
        return;
    };
    let mut interval = tokio::time::interval(BUS_POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let consistent = {
            let mut feed = feed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            feed.pump(&shared.counters);
            !feed.mid_message
        };
        if consistent {
            shared.consistent.notify_waiters();
        }
    }
}

/// One request through the routes without a socket: the `http_router` fuzz target's way in.
/// `token` as `[http]`'s token would be; the instruments are a venue `sim` with `BTCUSDT`; `bus`
/// the bus file the books would be read from (a missing one answers 503, as a live appliance's
/// does before its bus exists). `None` when the method, URI or a header is not one hyper would
/// have passed on (it answers those 400 itself, before any route). The status and the body.
#[doc(hidden)]
pub fn answer_one(
    method: &[u8],
    uri: &[u8],
    headers: &[(&[u8], &[u8])],
    token: Option<&str>,
    bus: Option<PathBuf>,
) -> Option<(u16, Vec<u8>)> {
    use tower_service::Service;
    let mut request = axum::http::Request::builder()
        .method(axum::http::Method::from_bytes(method).ok()?)
        .uri(axum::http::Uri::try_from(uri).ok()?);
    for (name, value) in headers {
        request = request.header(
            axum::http::HeaderName::from_bytes(name).ok()?,
            axum::http::HeaderValue::from_bytes(value).ok()?,
        );
    }
    let request = request.body(axum::body::Body::empty()).ok()?;
    let shared = Arc::new(Shared {
        published: Arc::new(ArcSwap::from_pointee(Published::default())),
        published_at: Arc::new(ArcSwap::from_pointee(Instant::now())),
        instruments: vec![InstrumentView {
            venue: "sim".to_owned(),
            symbol: "BTCUSDT".to_owned(),
            instrument_id: 1,
        }],
        feed: bus.map(|path| Mutex::new(feed::Feed::new(path))),
        consistent: Notify::new(),
        token: token.map(auth::Token::new),
        hosts: hosts::Policy::default(),
        stream_queue: 16,
        counters: Arc::new(ServeCounters::default()),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .ok()?;
    runtime.block_on(async move {
        let mut app = api::router(shared);
        let response = match app.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .ok()?;
        Some((status, body.to_vec()))
    })
}
