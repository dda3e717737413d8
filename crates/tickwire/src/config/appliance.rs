//! The appliance file (`config/tickwire.toml`): logging, metrics, ring sizes, process privileges,
//! how the three hot threads are placed and paced, and which venue files to load.
//!
//! Serde checks shapes and enum values; `validate` then checks everything that depends on more
//! than one value, and reports all of it at once.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::source::{KeyPath, Problem};

/// The validated appliance file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplianceConfig {
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    /// `[http]`: the serving plane (`serve`).
    pub http: HttpConfig,
    pub rings: RingsConfig,
    pub process: ProcessConfig,
    pub net: NetConfig,
    pub threads: ThreadsConfig,
    pub strategy: StrategyConfig,
    /// `[bus]`: the shared-memory event bus, `None` when the table is absent (no bus).
    pub bus: Option<BusConfig>,
    /// `[record]`: the DBN recorder thread, `None` when the table is absent (no recording).
    pub record: Option<RecordConfig>,
    /// `[bridge]`: the appliance's name on NATS and where `tickwire bridge nats` (or, with
    /// `in_appliance`, a thread of `tickwire run`) publishes the bus; `None` when absent.
    pub bridge: Option<BridgeConfig>,
    /// Venue files as written in the appliance file, relative to its directory unless absolute.
    /// `LoadedConfig::venues` holds them resolved and loaded.
    pub venues: Vec<PathBuf>,
}

impl ApplianceConfig {
    /// The cores that unfused threads are pinned to, sorted and without duplicates; the runtime
    /// checks these against its affinity mask and isolated CPUs before it starts.
    pub fn pinned_cores(&self) -> Vec<usize> {
        let threads = &self.threads;
        let mut cores: Vec<usize> = std::iter::once(&threads.net)
            .chain(threads.decoders.iter())
            .chain(std::iter::once(&threads.strategy))
            .filter(|thread| thread.fuse_into.is_none())
            .filter_map(|thread| thread.core)
            .collect();
        cores.sort_unstable();
        cores.dedup();
        cores
    }
}

/// `[log]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub level: LogLevel,
    pub format: LogFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// The name as written in the file, which is also what `tracing_subscriber::EnvFilter` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

impl From<LogLevel> for tracing::Level {
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Trace => tracing::Level::TRACE,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Error => tracing::Level::ERROR,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `[metrics]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsConfig {
    /// How often the metrics thread snapshots counters and histograms.
    pub report_interval_ms: u64,
    /// Significant decimal digits the latency histograms keep (2 or 3): 2 resolves a latency to
    /// 1 %, 3 to 0.1 %. Each of the appliance's 15 histograms (three stages, five histograms in
    /// circulation each) takes about 28 KiB at 2 digits and 200 KiB at 3. The default is 2:
    /// `/metrics` exports fixed buckets in 1-2.5-5 steps, far coarser than 1 %, so a third digit
    /// would only sharpen the report line and `/v1/latency`, for 2.6 MiB.
    pub latency_digits: u8,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            report_interval_ms: 10_000,
            latency_digits: 2,
        }
    }
}

/// `[metrics]` as written: `listen` is accepted by serde only to be refused by `validate` with
/// a message naming its new place, `[http] listen`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawMetrics {
    listen: Option<toml::Value>,
    report_interval_ms: u64,
    latency_digits: u8,
}

impl Default for RawMetrics {
    fn default() -> Self {
        Self {
            listen: None,
            report_interval_ms: MetricsConfig::default().report_interval_ms,
            latency_digits: MetricsConfig::default().latency_digits,
        }
    }
}

/// `[http]`: the serving plane (HTTP API, `/metrics`, the WebSocket stream, the status page).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Where the serving thread listens; `None` (the key absent) turns the serving plane off.
    pub listen: Option<SocketAddr>,
    /// The environment variable that holds the bearer token.
    pub token_env: String,
    /// The systemd credential (`LoadCredential=`) that holds the bearer token, read from
    /// `$CREDENTIALS_DIRECTORY/<name>` when the environment variable is not set.
    pub token_credential: String,
    /// Connections served at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// A request head (request line and headers) larger than this is refused.
    pub max_request_head_bytes: usize,
    /// A client that has not sent a whole request head this long after connecting (or after
    /// its previous response) is disconnected: the slowloris defence.
    pub header_timeout_ms: u64,
    /// A response (or a WebSocket message) that the client does not take within this long
    /// closes the connection.
    pub write_timeout_ms: u64,
    /// Messages a `/v1/stream` client may have queued; one more closes it (1008).
    pub stream_queue: usize,
    /// Pin the serving thread to this core (absent: unpinned, on the process's cores). A core
    /// no hot thread is pinned to: a request's work must not preempt a hot thread.
    pub core: Option<usize>,
    /// Names the serving plane answers for besides its own address (and `localhost` on
    /// loopback), as a `Host` header carries them: `name` (any port) or `name:port`. Any other
    /// `Host` is refused (421): the guard against DNS rebinding (`serve::hosts`).
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://name[:port]`) whose pages may open `/v1/stream`, besides the status
    /// page's own; a WebSocket from any other page is refused (403).
    pub allowed_origins: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: None,
            token_env: "TICKWIRE_HTTP_TOKEN".to_owned(),
            token_credential: "tickwire-http-token".to_owned(),
            max_connections: 256,
            // Hyper's smallest read buffer is 8 KiB; a scraper or a browser sends well under
            // that, and 16 KiB leaves room for cookies a browser adds for the host.
            max_request_head_bytes: 16 * 1024,
            header_timeout_ms: 5_000,
            write_timeout_ms: 10_000,
            stream_queue: 4096,
            core: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

const HTTP_MAX_CONNECTIONS_MAX: usize = 65_536;
const HTTP_HEAD_BYTES_RANGE: std::ops::RangeInclusive<usize> = 8192..=(1 << 20);
const HTTP_TIMEOUT_MS_RANGE: std::ops::RangeInclusive<u64> = 100..=600_000;
const HTTP_STREAM_QUEUE_RANGE: std::ops::RangeInclusive<usize> = 16..=(1 << 20);

/// `[rings]`: capacities of the SPSC rings between the hot threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingsConfig {
    /// Bytes in the frame ring between the net and decoder threads.
    pub frame_ring_bytes: usize,
    /// Event slots in the ring between the decoder and strategy threads.
    pub event_ring_slots: usize,
}

impl Default for RingsConfig {
    fn default() -> Self {
        Self {
            // Sized to their purpose rather than to the most a ring could ever be asked to hold,
            // because a ring is touched in full at start (`ring::prefault`) and stays resident
            // (issue 24: 64 MiB and 4 MiB rings took the appliance from 16 MB to 85 MB).
            //
            // Frames: four times the default largest message (net.max_message_bytes, 256 KiB;
            // a frame may take at most half the ring, and a Databento chunk can be that large),
            // or some 80 ms of a 50,000 messages/s Binance feed of ~250-byte messages, far more
            // than a decoder that keeps up ever finds waiting (`tickwire_ring_high_water`).
            frame_ring_bytes: 1024 * 1024,
            // Events: the largest snapshot a book makes at once (a 1,000-level Binance depth
            // snapshot is 2,000 levels; the decoder holds a snapshot back until the ring has room
            // for all of it) four times over, or a Databento chunk of 64 KiB of MBO records
            // (1,170 events) with the decoder's spare room (`EVENT_ROOM_PER_BATCH`) beside it.
            // 512 KiB.
            event_ring_slots: 8_192,
        }
    }
}

/// `[bus]`: the shared-memory event bus that consumer processes read (`tickwire_bus`). The table's
/// presence turns the bus on; every key has a default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BusConfig {
    /// The bus file; `None`: [`BusConfig::resolved_path`]'s default.
    pub path: Option<PathBuf>,
    /// Event slots in the ring (a power of two): how far behind a reader may fall before it is
    /// lapped.
    pub capacity: u64,
    /// Instrument entries the directory holds.
    pub directory_capacity: u64,
    /// The group given the file (mode 0640) and the request socket (0660): consumers in it may
    /// read the bus and ask for snapshots. The appliance must be a member (under systemd:
    /// `SupplementaryGroups=`).
    pub group: Option<String>,
    /// The shortest time between two book snapshots of one instrument that readers ask for.
    pub snapshot_interval_ms: u64,
    /// The decoder's budget for the books readers ask for, across every request: book levels
    /// written per second, a book's begin and end each counting as one
    /// ([`BUS_SNAPSHOT_LEVELS_PER_S_RANGE`]). A tenth of a second's worth may go at once; a
    /// book the budget cannot pay for now waits in a queue, and is written once it can.
    pub snapshot_levels_per_s: u64,
    /// Books that may wait for the budget at once ([`BUS_SNAPSHOT_QUEUE_BOOKS_RANGE`]); a
    /// book asked for again while it waits keeps its place. A book that finds the queue full
    /// is refused and counted (`tickwire_bus_book_requests_total{result="refused"}`).
    pub snapshot_queue_books: usize,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            path: None,
            // 16 MiB of events: a quarter of a second at 1 M events/s, minutes at the shipped
            // config's rates.
            capacity: 1 << 18,
            directory_capacity: 4096,
            group: None,
            snapshot_interval_ms: 100,
            // Ten 1,000-level Binance books (2,000 levels each) ten times a second, some 2 ms a
            // second of the decoder thread and under a tenth of the default ring's 262,144
            // slots at once (a burst is a tenth of a second's worth).
            snapshot_levels_per_s: 200_000,
            // As many books as the default directory names: a reader asking for every book
            // queues them all.
            snapshot_queue_books: 4096,
        }
    }
}

/// Where the bus goes when `[bus] path` is not given: systemd's runtime directory for the service
/// (`RuntimeDirectory=tickwire`, `/run/tickwire`), else `/dev/shm`.
pub const BUS_FILE_NAME: &str = "tickwire.bus";
const BUS_SNAPSHOT_INTERVAL_MS_MAX: u64 = 60_000;
/// `[bus] snapshot_levels_per_s`'s valid values.
pub const BUS_SNAPSHOT_LEVELS_PER_S_RANGE: std::ops::RangeInclusive<u64> = 1_000..=100_000_000;
/// `[bus] snapshot_queue_books`'s valid values.
pub const BUS_SNAPSHOT_QUEUE_BOOKS_RANGE: std::ops::RangeInclusive<usize> = 1..=1 << 20;
/// The longest `[strategy] summary_interval_ms` (a day), and `[metrics] report_interval_ms`.
const INTERVAL_MS_MAX: u64 = 86_400_000;
/// The longest `[bridge] jetstream_max_age_s`: ten years (NATS takes the age in nanoseconds,
/// which a `u64` holds for 584 years).
const JETSTREAM_MAX_AGE_S_MAX: u64 = 10 * 365 * 86_400;

impl BusConfig {
    /// The bus file's path: `path`, or `$RUNTIME_DIRECTORY/tickwire.bus` (the first directory
    /// when systemd lists several), or `/dev/shm/tickwire.bus`.
    pub fn resolved_path(&self) -> PathBuf {
        if let Some(path) = &self.path {
            return path.clone();
        }
        match std::env::var_os("RUNTIME_DIRECTORY") {
            Some(dirs) if !dirs.is_empty() => {
                let dirs = dirs.to_string_lossy().into_owned();
                let first = dirs.split(':').next().unwrap_or_default().to_owned();
                PathBuf::from(first).join(BUS_FILE_NAME)
            }
            _ => PathBuf::from("/dev/shm").join(BUS_FILE_NAME),
        }
    }
}

/// `[record]`: record every event of the bus to DBN files on a thread of the appliance (never a
/// hot one), as `tickwire record --events` does in a process of its own. The table's presence
/// turns it on; it needs `[bus]`, whose events it records.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordConfig {
    /// The directory the files go to (one set per venue); it must be absolute.
    pub dir: PathBuf,
    /// How long an event may wait before its zstd frame is written: what `kill -9` may lose.
    pub flush_interval_ms: u64,
    /// When files are fsynced: `never`, `every-flush` or `on-close` (after the metadata and
    /// when a file is closed).
    pub fsync: RecordFsync,
    /// Start new files at each UTC midnight.
    pub rotate_daily: bool,
    /// Start a new file once one holds this many MiB (compressed); absent: no size limit.
    pub max_file_mib: Option<u64>,
    /// zstd's level: 1 (the fastest, the default) to 19.
    pub zstd_level: i32,
    /// Pin the recorder thread to this core (absent: unpinned). A core no hot thread is pinned
    /// to: the recorder's work (encoding, compressing, writing) must not preempt a hot thread.
    pub core: Option<usize>,
    /// The DBN dataset of a venue, by venue name, where the default does not suit: Binance
    /// USD-M venues default to `BINANCE.USDM`, Thalex to `THALEX`, Databento venues to their
    /// `databento.dataset`.
    pub datasets: std::collections::BTreeMap<String, String>,
}

/// `[record] fsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordFsync {
    Never,
    EveryFlush,
    OnClose,
}

impl Default for RecordConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("/var/lib/tickwire/recordings"),
            flush_interval_ms: 1000,
            fsync: RecordFsync::OnClose,
            rotate_daily: true,
            max_file_mib: None,
            zstd_level: 1,
            core: None,
            datasets: std::collections::BTreeMap::new(),
        }
    }
}

/// `[bridge]`: the bus on NATS for consumers on other hosts (`tickwire_nats`). Every key has a
/// default; `tickwire bridge nats` flags override them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeConfig {
    /// The appliance's name: the subjects' second token (`tickwire.<name>.<venue>...`), one per
    /// appliance sharing a NATS cluster. `None`: the host name.
    pub name: Option<String>,
    /// The NATS servers (`nats://host:port`); the client reconnects across them.
    pub nats_urls: Vec<String>,
    /// Run the bridge as a thread of `tickwire run` (a bus consumer, never on the hot path)
    /// instead of a process of its own. Needs `[bus]` and `nats_urls`.
    pub in_appliance: bool,
    /// Messages (up to 64 events each) the queue in front of the network holds; a full queue
    /// drops and the drop is published as a gap.
    pub queue_messages: usize,
    /// A JetStream stream to keep the events in for replay (made if missing); `None`: none.
    pub jetstream_stream: Option<String>,
    /// The stream's retention: events older than this go (0: no age limit).
    pub jetstream_max_age_s: u64,
    /// The stream's retention: at most this many bytes, the oldest first out (-1: no limit).
    pub jetstream_max_bytes: i64,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            name: None,
            nats_urls: Vec::new(),
            in_appliance: false,
            queue_messages: 8192,
            jetstream_stream: None,
            jetstream_max_age_s: 3600,
            jetstream_max_bytes: 1 << 30,
        }
    }
}

const RECORD_FLUSH_INTERVAL_MS_MAX: u64 = 60_000;
const RECORD_MAX_FILE_MIB_MAX: u64 = 1 << 20;

impl BridgeConfig {
    /// `name`, or the host name (`tickwire` when it cannot be read).
    pub fn resolved_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|name| name.trim().to_owned())
                .ok()
                .filter(|name| !name.is_empty())
                .unwrap_or_else(|| "tickwire".into())
        })
    }
}

const BRIDGE_QUEUE_MAX: usize = 1 << 20;

/// Ring sizes must be powers of two so that a cursor maps to a slot with a mask, not a division.
const FRAME_RING_BYTES_MIN: usize = 64 * 1024;
const FRAME_RING_BYTES_MAX: usize = 1024 * 1024 * 1024;
const EVENT_RING_SLOTS_MIN: usize = 1024;
const EVENT_RING_SLOTS_MAX: usize = 16 * 1024 * 1024;
const REPORT_INTERVAL_MS_MIN: u64 = 100;
/// `metrics.latency_digits`: 1 digit is too coarse for a percentile worth reporting, and 4 would
/// take 1.6 MiB per histogram.
const LATENCY_DIGITS: std::ops::RangeInclusive<u8> = 2..=3;

/// `[net]`: the network thread's I/O backend and its sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetConfig {
    pub backend: NetBackend,
    pub wait: NetWait,
    /// Longest sleep in the kernel per poll for `wait = "block"`.
    pub block_timeout_us: u64,
    pub connect_timeout_ms: u64,
    pub max_connections: u32,
    /// Size of one receive buffer; a read never returns more.
    pub recv_buffer_bytes: u32,
    /// Provided receive buffers for io_uring (a power of two).
    pub recv_buffers: u16,
    /// `SO_RCVBUF`; absent keeps the kernel's autotuning.
    pub rcvbuf_bytes: Option<u32>,
    /// `SO_BUSY_POLL` in microseconds; absent leaves it off.
    pub busy_poll_us: Option<u32>,
    /// Largest WebSocket frame or message accepted; a larger one closes the connection (1009).
    pub max_message_bytes: u32,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            backend: NetBackend::Auto,
            wait: NetWait::Block,
            block_timeout_us: 1_000,
            connect_timeout_ms: 5_000,
            max_connections: 64,
            recv_buffer_bytes: 64 * 1024,
            // The provided buffers are mapped and touched at start (1 MiB here): 16 reads of up
            // to 64 KiB each can complete between two rounds of the network thread before the
            // kernel runs out (it then ends the multishot receive, which the engine re-arms).
            // 64 of them took 4 MiB of resident memory for a handful of connections (issue 24).
            recv_buffers: 16,
            rcvbuf_bytes: None,
            busy_poll_us: None,
            // The largest message any venue kind sends, with room to spare: Binance's market
            // streams send a few KB at most (a depth diff of a few hundred levels), Thalex's
            // book snapshots tens of KB, and Databento's raw stream is handed over in chunks of
            // at most the network stage's 256 KiB plaintext buffer, which the frame ring must
            // take anyway. A venue that sends more is told with close code 1009.
            max_message_bytes: 256 * 1024,
        }
    }
}

/// Which I/O backend the network thread uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetBackend {
    /// io_uring where it can be set up, epoll otherwise (one log line says which and why).
    #[default]
    Auto,
    IoUring,
    Epoll,
}

/// `[strategy]`: which built-in strategy the strategy thread runs, and its settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StrategyConfig {
    pub name: StrategyName,
    /// `mid`: where to write one record per venue quote at exit (its update id and the time its
    /// mid was computed, 16 bytes little-endian, as the benchmark peers write them);
    /// `arrivals`: one per venue message (its `venue_seq` and the time its last event reached
    /// the strategy).
    pub record_file: Option<PathBuf>,
    /// `mid`, `arrivals`: records kept in memory (preallocated; beyond, counted, not kept).
    pub record_capacity: usize,
    /// `mid`, `quoter`: how often a one-line summary is logged, in milliseconds (0: never).
    pub summary_interval_ms: u64,
    pub quoter: QuoterConfig,
}

impl Default for StrategyConfig {
    fn default() -> Self {
        Self {
            name: StrategyName::None,
            record_file: None,
            record_capacity: 1 << 20,
            summary_interval_ms: 10_000,
            quoter: QuoterConfig::default(),
        }
    }
}

/// The built-in strategies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StrategyName {
    /// Only the strategy stage's own bookkeeping (latency, quote board).
    #[default]
    None,
    /// Every event as a JSON line on stdout, as `tickwire decode` prints them.
    Print,
    /// Mid price, microprice and spread of every quote.
    Mid,
    /// A two-sided quote around the microprice with inventory skew: computed, never sent.
    Quoter,
    /// One record per venue message (its sequence number and the time the strategy got its
    /// last event), for latency benchmarks of feeds that carry no quotes.
    Arrivals,
}

/// `[strategy.quoter]`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuoterConfig {
    /// Distance of each side from the microprice, in basis points.
    pub half_spread_bps: f64,
    /// Shift of both sides per unit of position, in basis points (long: lower, to sell).
    pub skew_bps_per_unit: f64,
    /// Size of each side of the quote.
    pub quote_size: f64,
    /// No bid above this long position, no ask below its negative.
    pub max_position: f64,
}

impl Default for QuoterConfig {
    fn default() -> Self {
        Self {
            half_spread_bps: 2.0,
            skew_bps_per_unit: 1.0,
            quote_size: 1.0,
            max_position: 10.0,
        }
    }
}

/// How the network thread waits for I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetWait {
    /// Reap completions without sleeping: lowest latency, a whole core.
    BusyPoll,
    /// Sleep in the kernel until I/O completes or `block_timeout_us` passes.
    #[default]
    Block,
}

const BLOCK_TIMEOUT_US_MAX: u64 = 1_000_000;
const CONNECT_TIMEOUT_MS_RANGE: std::ops::RangeInclusive<u64> = 100..=120_000;
const MAX_CONNECTIONS_MAX: u32 = 4_096;
const RECV_BUFFER_BYTES_RANGE: std::ops::RangeInclusive<u32> = 4_096..=(1 << 20);
const RECV_BUFFERS_MAX: u16 = 32_768;
/// The frame ring stores each message behind a 16-byte header and timestamp, and a frame may
/// take at most half the ring (see `ring::bytes`).
const FRAME_OVERHEAD_BYTES: usize = 16;

/// `[process]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProcessConfig {
    /// Lock all current and future pages in RAM so that no page fault lands on the hot path.
    pub mlockall: bool,
    pub on_privilege_error: PrivilegeErrorPolicy,
    /// The cores every thread other than the pinned hot ones runs on: the control thread and
    /// every thread started after it (resolver, snapshots, serving, recorder, bridge) unless its
    /// own table pins it. Empty (the default): they run on the process's whole affinity mask,
    /// hot cores included, where they can preempt a hot thread. None may be a hot thread's core.
    pub housekeeping_cores: Vec<usize>,
    /// Once every venue has been live for 2 s (and again after each recovery), give back the
    /// resident pages of code and read-only data that only start-up ran, and the heap's free
    /// pages (`pages::release_startup_pages`): resident memory for a small host, at the cost
    /// of a few hundred minor page faults as the feed's own code maps back in. Not with
    /// `mlockall`, which keeps every page.
    pub release_startup_pages: bool,
}

/// What to do when the kernel refuses `SCHED_FIFO`, `mlockall` or pinning a thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrivilegeErrorPolicy {
    /// Refuse to start: latency numbers from an appliance that silently lost its tuning lie.
    #[default]
    Fail,
    /// Log a warning and run without the refused setting, for development machines.
    Warn,
}

/// How an idle hot thread waits for work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitKind {
    /// Busy-poll forever: the lowest wake-up latency, and a whole core burnt.
    Spin,
    /// Busy-poll `spin_iterations` times, then `sched_yield` between polls.
    #[default]
    SpinThenYield,
    /// Busy-poll `spin_iterations` times, then park for up to `park_timeout_us`.
    Park,
}

impl WaitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Spin => "spin",
            WaitKind::SpinThenYield => "spin-then-yield",
            WaitKind::Park => "park",
        }
    }
}

/// The three hot pipeline stages, each of which runs on its own thread unless fused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Net,
    Decoder,
    Strategy,
}

impl Stage {
    /// In pipeline order.
    pub const ALL: [Stage; 3] = [Stage::Net, Stage::Decoder, Stage::Strategy];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Net => "net",
            Stage::Decoder => "decoder",
            Stage::Strategy => "strategy",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// `[threads.<stage>]`, with defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadConfig {
    /// The core the thread is pinned to; `None` leaves placement to the scheduler.
    pub core: Option<usize>,
    pub wait: WaitKind,
    /// Polls before yielding or parking (used by `SpinThenYield` and `Park`).
    pub spin_iterations: u32,
    /// Longest park (used by `Park`).
    pub park_timeout_us: u64,
    /// `SCHED_FIFO` priority; `None` keeps the normal scheduler.
    pub sched_fifo_priority: Option<u8>,
    /// The stage whose thread runs this stage inline. Always `None` for `net`; only `Net` for the
    /// decoder; `Decoder` or `Net` for the strategy. A fused stage's other fields are defaults.
    pub fuse_into: Option<Stage>,
}

impl Default for ThreadConfig {
    fn default() -> Self {
        Self {
            core: None,
            wait: WaitKind::default(),
            spin_iterations: DEFAULT_SPIN_ITERATIONS,
            park_timeout_us: DEFAULT_PARK_TIMEOUT_US,
            sched_fifo_priority: None,
            fuse_into: None,
        }
    }
}

const DEFAULT_SPIN_ITERATIONS: u32 = 10_000;
const DEFAULT_PARK_TIMEOUT_US: u64 = 100;
const PARK_TIMEOUT_US_MAX: u64 = 1_000_000;
/// `sched_get_priority_min/max(SCHED_FIFO)` on Linux (sched(7)).
const SCHED_FIFO_PRIORITY_MIN: u8 = 1;
const SCHED_FIFO_PRIORITY_MAX: u8 = 99;

/// The most decoder threads `[[threads.decoders]]` may ask for (a frame route is one byte, and
/// the network thread's wake-up mask one word).
pub const MAX_DECODERS: usize = 64;

/// `[threads]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadsConfig {
    pub net: ThreadConfig,
    /// One per decoder thread, by decoder index: `[[threads.decoders]]`, or the single
    /// `[threads.decoder]` (one decoder). Never empty.
    pub decoders: Vec<ThreadConfig>,
    pub strategy: ThreadConfig,
}

impl Default for ThreadsConfig {
    fn default() -> Self {
        Self {
            net: ThreadConfig::default(),
            decoders: vec![ThreadConfig::default()],
            strategy: ThreadConfig::default(),
        }
    }
}

impl ThreadsConfig {
    /// A stage's thread settings; for the decoder, decoder 0's.
    pub fn get(&self, stage: Stage) -> &ThreadConfig {
        match stage {
            Stage::Net => &self.net,
            Stage::Decoder => &self.decoders[0],
            Stage::Strategy => &self.strategy,
        }
    }

    /// Decoder `index`'s settings (decoder 0's for an index out of range).
    pub fn decoder(&self, index: usize) -> &ThreadConfig {
        self.decoders.get(index).unwrap_or(&self.decoders[0])
    }

    /// How many decoder threads (or fused decoder stages) the pipeline has.
    pub fn decoder_count(&self) -> usize {
        self.decoders.len()
    }

    /// The stage whose thread actually runs `stage`, following fusion transitively: a strategy
    /// fused into a decoder that is itself fused into net runs on the net thread.
    pub fn runs_on(&self, stage: Stage) -> Stage {
        match self.get(stage).fuse_into {
            None => stage,
            // Fusion only ever points to an earlier stage (serde restricts the values), so this
            // recursion is at most two deep.
            Some(host) if host < stage => self.runs_on(host),
            Some(_) => stage,
        }
    }
}

/// The keys of `RawAppliance`, for the hint about keys written below a table header.
pub(crate) const TOP_LEVEL_KEYS: &[&str] = &[
    "log", "metrics", "http", "rings", "process", "net", "threads", "strategy", "bus", "record",
    "bridge", "venues",
];

/// The appliance file as serde sees it; `validate` turns it into an `ApplianceConfig`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAppliance {
    #[serde(default)]
    log: LogConfig,
    #[serde(default)]
    metrics: RawMetrics,
    #[serde(default)]
    http: HttpConfig,
    #[serde(default)]
    rings: RingsConfig,
    #[serde(default)]
    process: ProcessConfig,
    #[serde(default)]
    net: NetConfig,
    /// Left out: the shipped `config/tickwire.toml`'s threads ([`RawThreads::shipped`]), not
    /// each key's own default (which an empty `[threads]` table still gets).
    #[serde(default = "RawThreads::shipped")]
    threads: RawThreads,
    #[serde(default)]
    strategy: StrategyConfig,
    #[serde(default)]
    bus: Option<BusConfig>,
    #[serde(default)]
    record: Option<RecordConfig>,
    bridge: Option<BridgeConfig>,
    #[serde(default)]
    pub(crate) venues: Vec<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThreads {
    #[serde(default)]
    net: RawNetThread,
    /// `[threads.decoder]`: one decoder. Refused beside `[[threads.decoders]]`.
    decoder: Option<RawFusableThread<DecoderFuse>>,
    /// `[[threads.decoders]]`: one table per decoder thread, by index.
    decoders: Option<Vec<RawFusableThread<DecoderFuse>>>,
    #[serde(default)]
    strategy: RawFusableThread<StrategyFuse>,
}

/// `[threads.net]`. It has no `fuse_into`: there is nothing before it to fuse into, and
/// `deny_unknown_fields` says so with the list of keys that are valid.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetThread {
    core: Option<usize>,
    wait: Option<WaitKind>,
    spin_iterations: Option<u32>,
    park_timeout_us: Option<u64>,
    sched_fifo_priority: Option<u8>,
}

/// `[threads.decoder]` and `[threads.strategy]`. Every field is an `Option` so that validation can
/// tell a key that was written from one left to its default.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFusableThread<F> {
    core: Option<usize>,
    wait: Option<WaitKind>,
    spin_iterations: Option<u32>,
    park_timeout_us: Option<u64>,
    sched_fifo_priority: Option<u8>,
    fuse_into: Option<F>,
}

impl<F> Default for RawFusableThread<F> {
    fn default() -> Self {
        Self {
            core: None,
            wait: None,
            spin_iterations: None,
            park_timeout_us: None,
            sched_fifo_priority: None,
            fuse_into: None,
        }
    }
}

/// The decoder can only fuse into net; a separate enum makes serde list exactly that.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DecoderFuse {
    Net,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StrategyFuse {
    Decoder,
    Net,
}

/// One thread's settings as written, common to all three stages.
struct WrittenThread {
    stage: Stage,
    /// For a decoder: its index, and whether it was written as `[[threads.decoders]]`.
    decoder: Option<(usize, bool)>,
    core: Option<usize>,
    wait: Option<WaitKind>,
    spin_iterations: Option<u32>,
    park_timeout_us: Option<u64>,
    sched_fifo_priority: Option<u8>,
    fuse_into: Option<Stage>,
}

impl WrittenThread {
    fn path(&self) -> KeyPath {
        match self.decoder {
            Some((index, true)) => KeyPath::dotted("threads.decoders").index(index),
            _ => KeyPath::dotted("threads").key(self.stage.as_str()),
        }
    }

    /// The thread as messages name it: "net", "decoder", "decoder 1", "strategy".
    fn label(&self) -> String {
        match self.decoder {
            Some((index, true)) => format!("decoder {index}"),
            _ => self.stage.as_str().to_owned(),
        }
    }

    /// The keys that were written and that a fused stage ignores.
    fn pacing_keys_set(&self) -> Vec<&'static str> {
        let set = [
            ("core", self.core.is_some()),
            ("wait", self.wait.is_some()),
            ("spin_iterations", self.spin_iterations.is_some()),
            ("park_timeout_us", self.park_timeout_us.is_some()),
            ("sched_fifo_priority", self.sched_fifo_priority.is_some()),
        ];
        set.iter()
            .filter(|(_, is_set)| *is_set)
            .map(|(key, _)| *key)
            .collect()
    }

    fn resolve(&self) -> ThreadConfig {
        ThreadConfig {
            core: self.core,
            wait: self.wait.unwrap_or_default(),
            spin_iterations: self.spin_iterations.unwrap_or(DEFAULT_SPIN_ITERATIONS),
            park_timeout_us: self.park_timeout_us.unwrap_or(DEFAULT_PARK_TIMEOUT_US),
            sched_fifo_priority: self.sched_fifo_priority,
            fuse_into: self.fuse_into,
        }
    }
}

impl RawThreads {
    /// What the shipped `config/tickwire.toml` writes under `[threads]`, for a file that has no
    /// `[threads]` table: the decoder inline on the net thread (`spin-then-yield`, 10,000 polls),
    /// the strategy on its own thread, parking after 1,000 polls for up to 100 µs, nothing pinned.
    /// `tests/config.rs` holds it to the shipped file.
    fn shipped() -> RawThreads {
        RawThreads {
            net: RawNetThread {
                wait: Some(WaitKind::SpinThenYield),
                spin_iterations: Some(10_000),
                ..RawNetThread::default()
            },
            decoder: Some(RawFusableThread {
                fuse_into: Some(DecoderFuse::Net),
                ..RawFusableThread::default()
            }),
            decoders: None,
            strategy: RawFusableThread {
                wait: Some(WaitKind::Park),
                spin_iterations: Some(1_000),
                park_timeout_us: Some(100),
                ..RawFusableThread::default()
            },
        }
    }

    /// Every thread as written, in pipeline order: net, the decoders by index, strategy.
    fn written(&self) -> Vec<WrittenThread> {
        let net = &self.net;
        let strategy = &self.strategy;
        let mut written = vec![WrittenThread {
            stage: Stage::Net,
            decoder: None,
            core: net.core,
            wait: net.wait,
            spin_iterations: net.spin_iterations,
            park_timeout_us: net.park_timeout_us,
            sched_fifo_priority: net.sched_fifo_priority,
            fuse_into: None,
        }];
        let default = RawFusableThread::default();
        let decoders: Vec<(&RawFusableThread<DecoderFuse>, bool)> = match &self.decoders {
            Some(list) if !list.is_empty() => list.iter().map(|decoder| (decoder, true)).collect(),
            _ => vec![(self.decoder.as_ref().unwrap_or(&default), false)],
        };
        for (index, (decoder, listed)) in decoders.into_iter().enumerate() {
            written.push(WrittenThread {
                stage: Stage::Decoder,
                decoder: Some((index, listed)),
                core: decoder.core,
                wait: decoder.wait,
                spin_iterations: decoder.spin_iterations,
                park_timeout_us: decoder.park_timeout_us,
                sched_fifo_priority: decoder.sched_fifo_priority,
                fuse_into: decoder.fuse_into.map(|DecoderFuse::Net| Stage::Net),
            });
        }
        written.push(WrittenThread {
            stage: Stage::Strategy,
            decoder: None,
            core: strategy.core,
            wait: strategy.wait,
            spin_iterations: strategy.spin_iterations,
            park_timeout_us: strategy.park_timeout_us,
            sched_fifo_priority: strategy.sched_fifo_priority,
            fuse_into: strategy.fuse_into.map(|fuse| match fuse {
                StrategyFuse::Decoder => Stage::Decoder,
                StrategyFuse::Net => Stage::Net,
            }),
        });
        written
    }
}

/// The number of CPUs configured on this host, which bounds `threads.*.core`.
///
/// `_SC_NPROCESSORS_CONF` rather than `std::thread::available_parallelism`: the latter honours
/// this process's affinity mask and cgroup quota, so `tickwire check` run under `taskset` or in a
/// container would reject cores the appliance itself may well be allowed to use.
pub fn host_cpu_count() -> usize {
    // SAFETY: sysconf takes no pointers and only reads a system constant; it has no preconditions
    // and is thread-safe.
    let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    match usize::try_from(configured) {
        Ok(count) if count > 0 => count,
        // sysconf returns -1 only where the value is unknown; the affinity-based count is the
        // closest substitute and is never zero.
        _ => std::thread::available_parallelism().map_or(1, usize::from),
    }
}

/// Checks everything serde cannot, returning every problem found. `cpu_count` is a parameter, not
/// read here, so that tests do not depend on the machine running them.
pub(crate) fn validate(
    raw: RawAppliance,
    cpu_count: usize,
) -> Result<ApplianceConfig, Vec<Problem>> {
    let mut problems = Vec::new();

    if raw.metrics.listen.is_some() {
        problems.push(Problem::new(
            KeyPath::dotted("metrics.listen"),
            "has moved: write it as `listen` under `[http]` (the serving plane now answers \
             /metrics, /healthz, /readyz, the API and the status page), and remove it from \
             `[metrics]`",
        ));
    }
    check_http(&mut problems, &raw.http);
    if raw.metrics.report_interval_ms < REPORT_INTERVAL_MS_MIN {
        problems.push(Problem::new(
            KeyPath::dotted("metrics.report_interval_ms"),
            format!(
                "{} ms is too short; the minimum is {REPORT_INTERVAL_MS_MIN} ms, because every \
                 report snapshots and formats every metric",
                raw.metrics.report_interval_ms
            ),
        ));
    } else if raw.metrics.report_interval_ms > INTERVAL_MS_MAX {
        problems.push(Problem::new(
            KeyPath::dotted("metrics.report_interval_ms"),
            format!(
                "{} is out of range; valid values are {REPORT_INTERVAL_MS_MIN} to {INTERVAL_MS_MAX}",
                raw.metrics.report_interval_ms
            ),
        ));
    }
    if !LATENCY_DIGITS.contains(&raw.metrics.latency_digits) {
        problems.push(Problem::new(
            KeyPath::dotted("metrics.latency_digits"),
            format!(
                "{} is not a supported precision; use 3 (0.1 %, the default) or 2 (1 %, 1/7 of \
                 the memory)",
                raw.metrics.latency_digits
            ),
        ));
    }
    check_ring_size(
        &mut problems,
        "rings.frame_ring_bytes",
        raw.rings.frame_ring_bytes,
        FRAME_RING_BYTES_MIN,
        FRAME_RING_BYTES_MAX,
    );
    check_ring_size(
        &mut problems,
        "rings.event_ring_slots",
        raw.rings.event_ring_slots,
        EVENT_RING_SLOTS_MIN,
        EVENT_RING_SLOTS_MAX,
    );

    // The message limit is checked against the ring only when the ring size itself is valid:
    // an invalid ring size has its own error.
    let frame_ring_valid = raw.rings.frame_ring_bytes.is_power_of_two()
        && (FRAME_RING_BYTES_MIN..=FRAME_RING_BYTES_MAX).contains(&raw.rings.frame_ring_bytes);
    check_net(
        &mut problems,
        &raw.net,
        frame_ring_valid.then_some(raw.rings.frame_ring_bytes),
    );

    check_decoder_tables(&mut problems, &raw.threads);
    let written = raw.threads.written();
    for thread in &written {
        check_thread(&mut problems, thread, cpu_count);
    }
    check_fusion_chain(&mut problems, &written);
    check_shared_spinning_cores(&mut problems, &written, cpu_count);
    check_shared_decoder_cores(&mut problems, &written, cpu_count);
    check_bus_partitions(&mut problems, &raw, written.len().saturating_sub(2));
    check_venue_paths(&mut problems, &raw.venues);
    check_strategy(&mut problems, &raw.strategy);
    if let Some(bus) = &raw.bus {
        check_bus(&mut problems, bus);
    }
    if let Some(record) = &raw.record {
        check_record(&mut problems, record, raw.bus.is_some());
        if let Some(core) = record.core {
            check_side_core(
                &mut problems,
                "record",
                "recorder",
                core,
                &written,
                cpu_count,
            );
        }
    }
    if let Some(core) = raw.http.core {
        check_side_core(&mut problems, "http", "serving", core, &written, cpu_count);
    }
    for &core in &raw.process.housekeeping_cores {
        check_side_core(
            &mut problems,
            "process.housekeeping_cores",
            "housekeeping",
            core,
            &written,
            cpu_count,
        );
    }
    if raw.process.release_startup_pages && raw.process.mlockall {
        problems.push(Problem::new(
            KeyPath::dotted("process.release_startup_pages"),
            "cannot be set with process.mlockall = true: locked pages cannot be given back; \
             choose one (mlockall for no page fault on the hot path, release_startup_pages for \
             the smallest resident memory)"
                .to_owned(),
        ));
    }
    if let Some(bridge) = &raw.bridge {
        check_bridge(&mut problems, bridge, raw.bus.is_some());
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    let net = written[0].resolve();
    let strategy = written[written.len() - 1].resolve();
    let decoders = written[1..written.len() - 1]
        .iter()
        .map(WrittenThread::resolve)
        .collect();
    Ok(ApplianceConfig {
        log: raw.log,
        metrics: MetricsConfig {
            report_interval_ms: raw.metrics.report_interval_ms,
            latency_digits: raw.metrics.latency_digits,
        },
        http: raw.http,
        rings: raw.rings,
        process: raw.process,
        net: raw.net,
        threads: ThreadsConfig {
            net,
            decoders,
            strategy,
        },
        strategy: raw.strategy,
        bus: raw.bus,
        record: raw.record,
        bridge: raw.bridge,
        venues: raw.venues,
    })
}

fn check_http(problems: &mut Vec<Problem>, http: &HttpConfig) {
    let path = KeyPath::dotted("http");
    let mut out_of_range = |key: &str, value: String, valid: String| {
        problems.push(Problem::new(
            path.key(key),
            format!("{value} is out of range; valid values are {valid}"),
        ));
    };
    if !(1..=HTTP_MAX_CONNECTIONS_MAX).contains(&http.max_connections) {
        out_of_range(
            "max_connections",
            http.max_connections.to_string(),
            format!("1 to {HTTP_MAX_CONNECTIONS_MAX}"),
        );
    }
    if !HTTP_HEAD_BYTES_RANGE.contains(&http.max_request_head_bytes) {
        out_of_range(
            "max_request_head_bytes",
            http.max_request_head_bytes.to_string(),
            format!(
                "{} to {}",
                HTTP_HEAD_BYTES_RANGE.start(),
                HTTP_HEAD_BYTES_RANGE.end()
            ),
        );
    }
    for (key, value) in [
        ("header_timeout_ms", http.header_timeout_ms),
        ("write_timeout_ms", http.write_timeout_ms),
    ] {
        if !HTTP_TIMEOUT_MS_RANGE.contains(&value) {
            out_of_range(
                key,
                value.to_string(),
                format!(
                    "{} to {}",
                    HTTP_TIMEOUT_MS_RANGE.start(),
                    HTTP_TIMEOUT_MS_RANGE.end()
                ),
            );
        }
    }
    if !HTTP_STREAM_QUEUE_RANGE.contains(&http.stream_queue) {
        out_of_range(
            "stream_queue",
            http.stream_queue.to_string(),
            format!(
                "{} to {}",
                HTTP_STREAM_QUEUE_RANGE.start(),
                HTTP_STREAM_QUEUE_RANGE.end()
            ),
        );
    }
    let names_valid = |name: &str| {
        !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
    };
    for (key, name) in [
        ("token_env", &http.token_env),
        ("token_credential", &http.token_credential),
    ] {
        if !names_valid(name) || name.starts_with('.') {
            problems.push(Problem::new(
                KeyPath::dotted("http").key(key),
                format!(
                    "{name:?} is not a valid name; use letters, digits, '_', '-' and '.' \
                     (not first)"
                ),
            ));
        }
    }
    for (index, host) in http.allowed_hosts.iter().enumerate() {
        if crate::serve::hosts::parse_authority(host).is_none() {
            problems.push(Problem::new(
                KeyPath::dotted("http.allowed_hosts").index(index),
                format!(
                    "{host:?} is not a host as a Host header carries it: write a name or an \
                     address, optionally with a port (\"tickwire.example.com\", \
                     \"tickwire.example.com:8443\", \"10.0.0.5\", \"[fd00::5]\"), without a \
                     scheme, a path or a wildcard"
                ),
            ));
        }
    }
    for (index, origin) in http.allowed_origins.iter().enumerate() {
        if crate::serve::hosts::parse_origin(origin).is_none() {
            problems.push(Problem::new(
                KeyPath::dotted("http.allowed_origins").index(index),
                format!(
                    "{origin:?} is not an origin as a browser sends it: write the scheme and \
                     the host, optionally with a port, and nothing after \
                     (\"https://dash.example.com\", \"http://10.0.0.5:8080\")"
                ),
            ));
        }
    }
    if let Some(addr) = http.listen {
        if !addr.ip().is_loopback() && crate::serve::auth::token(http).is_none() {
            problems.push(Problem::new(
                KeyPath::dotted("http.listen"),
                format!(
                    "{addr} is not a loopback address, and no bearer token is set: a serving \
                     plane reachable from other hosts needs one. Set the environment variable \
                     {} or the systemd credential {} (LoadCredential=) to a token of at least \
                     {} characters, or listen on 127.0.0.1",
                    http.token_env,
                    http.token_credential,
                    crate::serve::auth::MIN_TOKEN_BYTES
                ),
            ));
        }
    }
}

/// Whether `text` holds a byte no NATS name may: whitespace, `.`, `*` or `>`.
fn bad_nats_name(text: &str) -> bool {
    text.is_empty() || text.contains(|c: char| c.is_whitespace() || matches!(c, '.' | '*' | '>'))
}

fn check_bridge(problems: &mut Vec<Problem>, bridge: &BridgeConfig, has_bus: bool) {
    if let Some(name) = &bridge.name {
        if name.is_empty() || name.len() > 64 {
            problems.push(Problem::new(
                KeyPath::dotted("bridge.name"),
                format!(
                    "{name:?} is not valid; give 1 to 64 bytes (escaped in subjects as needed), \
                     or leave the key out for the host name"
                ),
            ));
        }
    }
    for (index, url) in bridge.nats_urls.iter().enumerate() {
        let (scheme, rest) = url.split_once("://").unwrap_or(("nats", url.as_str()));
        let host_port_ok = rest.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !matches!(scheme, "nats" | "tls") || !host_port_ok || url.contains([' ', ',']) {
            problems.push(Problem::new(
                KeyPath::dotted("bridge.nats_urls").index(index),
                format!(
                    "{url:?} is not a NATS server URL; give one such as \"nats://10.0.0.5:4222\" \
                     (scheme nats or tls, a host and a port)"
                ),
            ));
        }
    }
    if bridge.in_appliance && (!has_bus || bridge.nats_urls.is_empty()) {
        problems.push(Problem::new(
            KeyPath::dotted("bridge.in_appliance"),
            "is true, but the bridge needs [bus] (it reads the bus) and bridge.nats_urls (where \
             to publish); add them, or set it to false and run `tickwire bridge nats`"
                .to_owned(),
        ));
    }
    if !(1..=BRIDGE_QUEUE_MAX).contains(&bridge.queue_messages) {
        problems.push(Problem::new(
            KeyPath::dotted("bridge.queue_messages"),
            format!(
                "{} is out of range; valid values are 1 to {BRIDGE_QUEUE_MAX}",
                bridge.queue_messages
            ),
        ));
    }
    if let Some(stream) = &bridge.jetstream_stream {
        if bad_nats_name(stream) || stream.contains(['/', '\\']) {
            problems.push(Problem::new(
                KeyPath::dotted("bridge.jetstream_stream"),
                format!(
                    "{stream:?} is not a JetStream stream name; give one without '.', '*', '>', \
                     '/', '\\' or whitespace, such as \"TICKWIRE_NY4\""
                ),
            ));
        }
    }
    if bridge.jetstream_max_age_s > JETSTREAM_MAX_AGE_S_MAX {
        problems.push(Problem::new(
            KeyPath::dotted("bridge.jetstream_max_age_s"),
            format!(
                "{} is out of range; valid values are 0 (no age limit) to {JETSTREAM_MAX_AGE_S_MAX}",
                bridge.jetstream_max_age_s
            ),
        ));
    }
    if bridge.jetstream_max_bytes == 0 || bridge.jetstream_max_bytes < -1 {
        problems.push(Problem::new(
            KeyPath::dotted("bridge.jetstream_max_bytes"),
            format!(
                "{} is not valid; give a positive number of bytes, or -1 for no limit",
                bridge.jetstream_max_bytes
            ),
        ));
    }
}

/// A side thread's core (`[record] core`, `[http] core`, each of `[process]
/// housekeeping_cores`): one that exists and that no hot thread is pinned to. `table` is the
/// table, or a key's whole dotted path.
fn check_side_core(
    problems: &mut Vec<Problem>,
    table: &str,
    thread_name: &str,
    core: usize,
    written: &[WrittenThread],
    cpu_count: usize,
) {
    let key = if table.contains('.') {
        table.to_owned()
    } else {
        format!("{table}.core")
    };
    if core >= cpu_count {
        problems.push(Problem::new(
            KeyPath::dotted(&key),
            format!(
                "core {core} does not exist: this host has {cpu_count} CPUs, so valid cores are \
                 0 to {}",
                cpu_count.saturating_sub(1)
            ),
        ));
    }
    for thread in written {
        if thread.fuse_into.is_none() && thread.core == Some(core) {
            problems.push(Problem::new(
                KeyPath::dotted(&key),
                format!(
                    "core {core} is the {} thread's ({} core): the {thread_name} thread \
                     would preempt it; pick a core no hot thread is pinned to, or leave the key out",
                    thread.label(),
                    thread.path()
                ),
            ));
        }
    }
}

fn check_record(problems: &mut Vec<Problem>, record: &RecordConfig, has_bus: bool) {
    if !has_bus {
        problems.push(Problem::new(
            KeyPath::dotted("record"),
            "needs [bus]: the recorder records the bus's events; add a [bus] table".to_owned(),
        ));
    }
    if !record.dir.is_absolute() {
        problems.push(Problem::new(
            KeyPath::dotted("record.dir"),
            format!(
                "{:?} is not an absolute directory; give one such as \"/var/lib/tickwire/recordings\"",
                record.dir.display()
            ),
        ));
    }
    if !(1..=RECORD_FLUSH_INTERVAL_MS_MAX).contains(&record.flush_interval_ms) {
        problems.push(Problem::new(
            KeyPath::dotted("record.flush_interval_ms"),
            format!(
                "{} is out of range; valid values are 1 to {RECORD_FLUSH_INTERVAL_MS_MAX}",
                record.flush_interval_ms
            ),
        ));
    }
    if let Some(mib) = record.max_file_mib {
        if !(1..=RECORD_MAX_FILE_MIB_MAX).contains(&mib) {
            problems.push(Problem::new(
                KeyPath::dotted("record.max_file_mib"),
                format!("{mib} is out of range; valid values are 1 to {RECORD_MAX_FILE_MIB_MAX}"),
            ));
        }
    }
    if !(1..=19).contains(&record.zstd_level) {
        problems.push(Problem::new(
            KeyPath::dotted("record.zstd_level"),
            format!(
                "{} is out of range; valid values are 1 to 19",
                record.zstd_level
            ),
        ));
    }
    for (venue, dataset) in &record.datasets {
        let valid = !dataset.is_empty()
            && dataset.len() <= 15
            && dataset.bytes().all(|byte| {
                byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'.' || byte == b'_'
            });
        if !valid {
            problems.push(Problem::new(
                KeyPath::dotted("record.datasets").key(venue),
                format!(
                    "{dataset:?} is not a dataset name; use capitals, digits, '.' and '_', at \
                     most 15 characters (DBN's limit), such as \"BINANCE.USDM\""
                ),
            ));
        }
    }
}

fn check_bus(problems: &mut Vec<Problem>, bus: &BusConfig) {
    use tickwire_bus::layout;
    if !bus.capacity.is_power_of_two()
        || !(layout::MIN_CAPACITY..=layout::MAX_CAPACITY).contains(&bus.capacity)
    {
        problems.push(Problem::new(
            KeyPath::dotted("bus.capacity"),
            format!(
                "{} is not valid; valid values are powers of two from {} to {}",
                bus.capacity,
                layout::MIN_CAPACITY,
                layout::MAX_CAPACITY
            ),
        ));
    }
    if !(1..=layout::MAX_DIRECTORY).contains(&bus.directory_capacity) {
        problems.push(Problem::new(
            KeyPath::dotted("bus.directory_capacity"),
            format!(
                "{} is out of range; valid values are 1 to {}",
                bus.directory_capacity,
                layout::MAX_DIRECTORY
            ),
        ));
    }
    if !BUS_SNAPSHOT_LEVELS_PER_S_RANGE.contains(&bus.snapshot_levels_per_s) {
        problems.push(Problem::new(
            KeyPath::dotted("bus.snapshot_levels_per_s"),
            format!(
                "{} is out of range; valid values are {} to {}",
                bus.snapshot_levels_per_s,
                BUS_SNAPSHOT_LEVELS_PER_S_RANGE.start(),
                BUS_SNAPSHOT_LEVELS_PER_S_RANGE.end()
            ),
        ));
    }
    if !BUS_SNAPSHOT_QUEUE_BOOKS_RANGE.contains(&bus.snapshot_queue_books) {
        problems.push(Problem::new(
            KeyPath::dotted("bus.snapshot_queue_books"),
            format!(
                "{} is out of range; valid values are {} to {}",
                bus.snapshot_queue_books,
                BUS_SNAPSHOT_QUEUE_BOOKS_RANGE.start(),
                BUS_SNAPSHOT_QUEUE_BOOKS_RANGE.end()
            ),
        ));
    }
    if !(1..=BUS_SNAPSHOT_INTERVAL_MS_MAX).contains(&bus.snapshot_interval_ms) {
        problems.push(Problem::new(
            KeyPath::dotted("bus.snapshot_interval_ms"),
            format!(
                "{} is out of range; valid values are 1 to {BUS_SNAPSHOT_INTERVAL_MS_MAX}",
                bus.snapshot_interval_ms
            ),
        ));
    }
    if let Some(path) = &bus.path {
        if !path.is_absolute() || path.file_name().is_none() {
            problems.push(Problem::new(
                KeyPath::dotted("bus.path"),
                format!(
                    "{:?} is not an absolute file path; give one such as \"/run/tickwire/{BUS_FILE_NAME}\" \
                     or leave the key out for the default",
                    path.display()
                ),
            ));
        }
    }
    if let Some(group) = &bus.group {
        if group.is_empty() {
            problems.push(Problem::new(
                KeyPath::dotted("bus.group"),
                "is empty; name a group, or leave the key out to keep the appliance's own"
                    .to_owned(),
            ));
        }
    }
}

fn check_strategy(problems: &mut Vec<Problem>, strategy: &StrategyConfig) {
    if strategy.summary_interval_ms > INTERVAL_MS_MAX {
        problems.push(Problem::new(
            KeyPath::dotted("strategy.summary_interval_ms"),
            format!(
                "{} is out of range; valid values are 0 (never) to {INTERVAL_MS_MAX}",
                strategy.summary_interval_ms
            ),
        ));
    }
    if strategy.name == StrategyName::Arrivals && strategy.record_file.is_none() {
        problems.push(Problem::new(
            KeyPath::dotted("strategy.record_file"),
            "the `arrivals` strategy keeps one record per venue message for this file; name \
             one (it records nothing without it)"
                .to_owned(),
        ));
    }
    if !(1..=1 << 28).contains(&strategy.record_capacity) {
        problems.push(Problem::new(
            KeyPath::dotted("strategy.record_capacity"),
            format!(
                "{} is out of range; valid values are 1 to {}",
                strategy.record_capacity,
                1 << 28
            ),
        ));
    }
    let quoter = &strategy.quoter;
    let path = KeyPath::dotted("strategy.quoter");
    // Negated comparisons, so that NaN fails them.
    let checks = [
        (
            "half_spread_bps",
            quoter.half_spread_bps,
            quoter.half_spread_bps > 0.0 && quoter.half_spread_bps <= 10_000.0,
            "above 0 and at most 10000",
        ),
        (
            "skew_bps_per_unit",
            quoter.skew_bps_per_unit,
            quoter.skew_bps_per_unit >= 0.0 && quoter.skew_bps_per_unit.is_finite(),
            "0 or more",
        ),
        (
            "quote_size",
            quoter.quote_size,
            quoter.quote_size > 0.0 && quoter.quote_size.is_finite(),
            "above 0",
        ),
        (
            "max_position",
            quoter.max_position,
            quoter.max_position > 0.0 && quoter.max_position.is_finite(),
            "above 0",
        ),
    ];
    for (key, value, valid, what) in checks {
        if !valid {
            problems.push(Problem::new(
                path.key(key),
                format!("{value} is out of range; valid values are {what}"),
            ));
        }
    }
}

fn check_net(problems: &mut Vec<Problem>, net: &NetConfig, frame_ring_bytes: Option<usize>) {
    let mut out_of_range = |key: &str, value: String, valid: String| {
        problems.push(Problem::new(
            KeyPath::dotted("net").key(key),
            format!("{value} is out of range; valid values are {valid}"),
        ));
    };
    if !(1..=BLOCK_TIMEOUT_US_MAX).contains(&net.block_timeout_us) {
        out_of_range(
            "block_timeout_us",
            net.block_timeout_us.to_string(),
            format!("1 to {BLOCK_TIMEOUT_US_MAX}"),
        );
    }
    if !CONNECT_TIMEOUT_MS_RANGE.contains(&net.connect_timeout_ms) {
        out_of_range(
            "connect_timeout_ms",
            net.connect_timeout_ms.to_string(),
            format!(
                "{} to {}",
                CONNECT_TIMEOUT_MS_RANGE.start(),
                CONNECT_TIMEOUT_MS_RANGE.end()
            ),
        );
    }
    if !(1..=MAX_CONNECTIONS_MAX).contains(&net.max_connections) {
        out_of_range(
            "max_connections",
            net.max_connections.to_string(),
            format!("1 to {MAX_CONNECTIONS_MAX}"),
        );
    }
    if !RECV_BUFFER_BYTES_RANGE.contains(&net.recv_buffer_bytes) {
        out_of_range(
            "recv_buffer_bytes",
            net.recv_buffer_bytes.to_string(),
            format!(
                "{} to {}",
                RECV_BUFFER_BYTES_RANGE.start(),
                RECV_BUFFER_BYTES_RANGE.end()
            ),
        );
    }
    if !(net.recv_buffers.is_power_of_two() && (2..=RECV_BUFFERS_MAX).contains(&net.recv_buffers)) {
        out_of_range(
            "recv_buffers",
            net.recv_buffers.to_string(),
            format!("powers of two from 2 to {RECV_BUFFERS_MAX}"),
        );
    }
    let Some(frame_ring_bytes) = frame_ring_bytes else {
        return;
    };
    let largest_frame = (frame_ring_bytes / 2).saturating_sub(FRAME_OVERHEAD_BYTES);
    if net.max_message_bytes as usize > largest_frame || net.max_message_bytes < 1024 {
        problems.push(Problem::new(
            KeyPath::dotted("net.max_message_bytes"),
            format!(
                "{} does not fit: a message must fit in half the frame ring less {FRAME_OVERHEAD_BYTES} \
                 bytes, so with rings.frame_ring_bytes = {frame_ring_bytes} valid values are 1024 \
                 to {largest_frame}; raise rings.frame_ring_bytes or lower this",
                net.max_message_bytes
            ),
        ));
    }
}

fn check_ring_size(problems: &mut Vec<Problem>, key: &str, size: usize, min: usize, max: usize) {
    if size.is_power_of_two() && (min..=max).contains(&size) {
        return;
    }
    let why = if size.is_power_of_two() {
        "is out of range".to_owned()
    } else {
        let below: usize = if size < 2 {
            1
        } else {
            1 << (usize::BITS - 1 - size.leading_zeros())
        };
        format!(
            "is not a power of two (the nearest ones are {below} and {})",
            below.saturating_mul(2)
        )
    };
    problems.push(Problem::new(
        KeyPath::dotted(key),
        format!("{size} {why}; valid values are powers of two from {min} to {max}"),
    ));
}

fn check_thread(problems: &mut Vec<Problem>, thread: &WrittenThread, cpu_count: usize) {
    let path = thread.path();
    if let Some(host) = thread.fuse_into {
        for key in thread.pacing_keys_set() {
            problems.push(Problem::new(
                path.key(key),
                format!(
                    "has no effect when fuse_into is set: the {} stage runs inline on the {host} \
                     thread, so set `{key}` under [threads.{host}] or remove fuse_into",
                    thread.label()
                ),
            ));
        }
        return;
    }
    if let Some(core) = thread.core {
        if core >= cpu_count {
            problems.push(Problem::new(
                path.key("core"),
                format!(
                    "core {core} does not exist: this host has {cpu_count} CPUs, so valid cores \
                     are 0 to {}",
                    cpu_count.saturating_sub(1)
                ),
            ));
        }
    }
    if thread.spin_iterations == Some(0) {
        problems.push(Problem::new(
            path.key("spin_iterations"),
            "0 is too small; the minimum is 1 (use wait = \"park\" with a short park_timeout_us \
             to stop polling sooner)",
        ));
    }
    if let Some(timeout) = thread.park_timeout_us {
        if !(1..=PARK_TIMEOUT_US_MAX).contains(&timeout) {
            problems.push(Problem::new(
                path.key("park_timeout_us"),
                format!("{timeout} is out of range; valid values are 1 to {PARK_TIMEOUT_US_MAX}"),
            ));
        }
    }
    if let Some(priority) = thread.sched_fifo_priority {
        if !(SCHED_FIFO_PRIORITY_MIN..=SCHED_FIFO_PRIORITY_MAX).contains(&priority) {
            problems.push(Problem::new(
                path.key("sched_fifo_priority"),
                format!(
                    "{priority} is out of range; SCHED_FIFO priorities are \
                     {SCHED_FIFO_PRIORITY_MIN} to {SCHED_FIFO_PRIORITY_MAX} (remove the key for \
                     normal scheduling)"
                ),
            ));
        }
    }
}

/// A strategy fused into net would skip the decoder, which only makes sense when the decoder runs
/// on the net thread as well.
fn check_fusion_chain(problems: &mut Vec<Problem>, written: &[WrittenThread]) {
    let (decoder, strategy) = (&written[1], &written[written.len() - 1]);
    if strategy.fuse_into == Some(Stage::Net) && decoder.fuse_into != Some(Stage::Net) {
        problems.push(Problem::new(
            strategy.path().key("fuse_into"),
            "\"net\" is only valid when threads.decoder.fuse_into = \"net\", because the \
             strategy consumes the decoder's output; fuse the decoder into net as well, or use \
             fuse_into = \"decoder\"",
        ));
    }
}

/// Two threads that never yield cannot share a core: whichever the scheduler is not running makes
/// no progress until its time slice comes round, so the pipeline stalls for milliseconds at a time.
/// Cores that do not exist are skipped: they already have an error of their own.
fn check_shared_spinning_cores(
    problems: &mut Vec<Problem>,
    written: &[WrittenThread],
    cpu_count: usize,
) {
    let mut spinners_by_core: BTreeMap<usize, String> = BTreeMap::new();
    for thread in written {
        let (Some(core), None, Some(WaitKind::Spin)) = (thread.core, thread.fuse_into, thread.wait)
        else {
            continue;
        };
        if core >= cpu_count {
            continue;
        }
        if let Some(first) = spinners_by_core.get(&core) {
            problems.push(Problem::new(
                thread.path().key("core"),
                format!(
                    "core {core} is also the core of the {first} thread, and both use wait = \
                     \"spin\", so they would starve each other; pin them to different cores, or \
                     give one of them wait = \"spin-then-yield\" or \"park\""
                ),
            ));
        } else {
            spinners_by_core.insert(core, thread.label());
        }
    }
}

/// `[threads.decoder]` and `[[threads.decoders]]` are two ways to say how many decoders there
/// are; a file says it one way. The list holds 1 to [`MAX_DECODERS`] tables.
fn check_decoder_tables(problems: &mut Vec<Problem>, threads: &RawThreads) {
    let Some(list) = &threads.decoders else {
        return;
    };
    if threads.decoder.is_some() {
        problems.push(Problem::new(
            KeyPath::dotted("threads.decoder"),
            "cannot be written beside [[threads.decoders]]: [threads.decoder] means one decoder; \
             move its keys into the first [[threads.decoders]] table, or remove the list",
        ));
    }
    if list.is_empty() || list.len() > MAX_DECODERS {
        problems.push(Problem::new(
            KeyPath::dotted("threads.decoders"),
            format!(
                "has {} tables; write 1 to {MAX_DECODERS}, one per decoder thread",
                list.len()
            ),
        ));
    }
}

/// With several decoders, each is there to decode its venues on a core of its own: two hot
/// threads pinned to one core (whatever their wait) would put one decoder's venues behind the
/// other thread's work, which is what several decoders are for. Refused, naming both.
fn check_shared_decoder_cores(
    problems: &mut Vec<Problem>,
    written: &[WrittenThread],
    cpu_count: usize,
) {
    if written.len() <= 3 {
        return;
    }
    let mut by_core: BTreeMap<usize, String> = BTreeMap::new();
    for thread in written {
        let (Some(core), None) = (thread.core, thread.fuse_into) else {
            continue;
        };
        if core >= cpu_count {
            continue;
        }
        match by_core.get(&core) {
            Some(first) => {
                // Two spinners already have their own error.
                let both_spin = thread.wait == Some(WaitKind::Spin)
                    && written
                        .iter()
                        .any(|other| other.label() == *first && other.wait == Some(WaitKind::Spin));
                if !both_spin {
                    problems.push(Problem::new(
                        thread.path().key("core"),
                        format!(
                            "core {core} is also the core of the {first} thread: with several \
                             decoders every hot thread needs a core of its own, or one \
                             decoder's venues wait behind another thread's work; pin them to \
                             different cores, or fuse a decoder into net"
                        ),
                    ));
                }
            }
            None => {
                by_core.insert(core, thread.label());
            }
        }
    }
}

/// The event bus has one partition per decoder (each decoder its partition's one writer), and
/// a bus holds at most `MAX_PARTITIONS`: a file with more decoders cannot have a bus, nor what
/// reads one (the serving plane, whose private bus the decoders would write, and the recorder).
fn check_bus_partitions(problems: &mut Vec<Problem>, raw: &RawAppliance, decoders: usize) {
    let most = tickwire_bus::layout::MAX_PARTITIONS as usize;
    if decoders <= most {
        return;
    }
    let tables = [
        ("bus", raw.bus.is_some()),
        ("http", raw.http.listen.is_some()),
        ("record", raw.record.is_some()),
    ];
    for (table, present) in tables {
        if present {
            problems.push(Problem::new(
                KeyPath::dotted(table),
                format!(
                    "cannot be used with {decoders} decoders: the event bus has one partition \
                     per decoder and holds at most {most}; remove [{table}] or use at most \
                     {most} decoders"
                ),
            ));
        }
    }
}

fn check_venue_paths(problems: &mut Vec<Problem>, venues: &[PathBuf]) {
    for (index, venue) in venues.iter().enumerate() {
        let path = KeyPath::dotted("venues").index(index);
        if venue.as_os_str().is_empty() {
            problems.push(Problem::new(
                path,
                "is empty; expected the path of a venue file, relative to this file",
            ));
        } else if let Some(first) = venues[..index].iter().position(|earlier| earlier == venue) {
            problems.push(Problem::new(
                path,
                format!("`{}` is already listed at venues[{first}]", venue.display()),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> RawAppliance {
        toml::from_str(text).expect("test appliance text deserializes")
    }

    fn problem_keys(text: &str, cpu_count: usize) -> Vec<String> {
        match validate(raw(text), cpu_count) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.iter().map(|p| p.key.to_string()).collect(),
        }
    }

    #[test]
    fn a_record_table_turns_the_recorder_on_and_bad_values_name_their_key() {
        assert_eq!(validate(raw("[threads]\n[bus]\n"), 4).unwrap().record, None);
        let config = validate(raw("[threads]\n[bus]\n[record]\n"), 4).expect("defaults");
        assert_eq!(config.record, Some(RecordConfig::default()));
        assert_eq!(problem_keys("[threads]\n[record]\n", 4), ["record"]);
        assert_eq!(
            problem_keys(
                "[threads]\n[bus]\n[record]\ndir = \"relative\"\nflush_interval_ms = 0\n\
                 max_file_mib = 0\nzstd_level = 30\n[record.datasets]\nmy-venue = \"lower.case\"\n",
                4
            ),
            [
                "record.dir",
                "record.flush_interval_ms",
                "record.max_file_mib",
                "record.zstd_level",
                "record.datasets.my-venue"
            ]
        );
        assert!(
            toml::from_str::<RawAppliance>("[threads]\n[record]\nfsync = \"sometimes\"\n").is_err()
        );
        let config = validate(
            raw(
                "[threads]\n[bus]\n[record]\ndir = \"/tmp/rec\"\nfsync = \"every-flush\"\n\
                 max_file_mib = 64\n[record.datasets]\nbinance = \"BINANCE.USDM\"\n",
            ),
            4,
        )
        .expect("valid");
        let record = config.record.expect("on");
        assert_eq!(record.fsync, RecordFsync::EveryFlush);
        assert_eq!(record.max_file_mib, Some(64));
        assert_eq!(record.datasets["binance"], "BINANCE.USDM");
    }

    #[test]
    fn a_bus_table_turns_the_bus_on_with_defaults_and_bad_values_name_their_key() {
        assert_eq!(validate(raw("[threads]\n"), 4).unwrap().bus, None);
        let config = validate(raw("[threads]\n[bus]\n"), 4).expect("defaults are valid");
        assert_eq!(config.bus, Some(BusConfig::default()));
        assert_eq!(
            problem_keys(
                "[threads]\n[bus]\ncapacity = 1000\ndirectory_capacity = 0\n\
                 snapshot_interval_ms = 0\npath = \"relative.bus\"\ngroup = \"\"\n",
                4
            ),
            [
                "bus.capacity",
                "bus.directory_capacity",
                "bus.snapshot_interval_ms",
                "bus.path",
                "bus.group"
            ]
        );
        let bus = BusConfig {
            path: Some(PathBuf::from("/run/x/tickwire.bus")),
            ..BusConfig::default()
        };
        assert_eq!(bus.resolved_path(), PathBuf::from("/run/x/tickwire.bus"));
    }

    #[test]
    fn a_file_without_threads_gets_the_shipped_threads() {
        // tests/config.rs holds these to config/tickwire.toml itself.
        let threads = validate(raw(""), 4).expect("valid").threads;
        assert_eq!(threads.runs_on(Stage::Decoder), Stage::Net);
        assert_eq!(
            (threads.net.wait, threads.net.spin_iterations),
            (WaitKind::SpinThenYield, 10_000)
        );
        assert_eq!(
            (
                threads.strategy.wait,
                threads.strategy.spin_iterations,
                threads.strategy.park_timeout_us
            ),
            (WaitKind::Park, 1_000, 100)
        );
        assert_eq!(
            validate(raw("[threads]\n"), 4).unwrap().threads,
            ThreadsConfig::default()
        );
    }

    #[test]
    fn defaults_fill_an_empty_threads_table() {
        let config = validate(raw("[threads]\n"), 4).expect("defaults are valid");
        assert_eq!(config.threads, ThreadsConfig::default());
        assert_eq!(config.rings, RingsConfig::default());
        assert_eq!(config.http.listen, None);
        assert!(config.pinned_cores().is_empty());
    }

    #[test]
    fn core_check_uses_the_given_cpu_count() {
        let text = "[threads.net]\ncore = 3\n";
        assert!(problem_keys(text, 4).is_empty());
        assert_eq!(problem_keys(text, 3), ["threads.net.core"]);
        assert_eq!(problem_keys(text, 1), ["threads.net.core"]);
    }

    #[test]
    fn side_thread_cores_exist_and_stay_off_the_hot_cores() {
        let hot = "[threads.net]\ncore = 1\n";
        assert!(problem_keys(&format!("{hot}[http]\ncore = 0\n"), 2).is_empty());
        assert_eq!(
            problem_keys(&format!("{hot}[http]\ncore = 1\n"), 2),
            ["http.core"]
        );
        assert_eq!(
            problem_keys(&format!("{hot}[http]\ncore = 2\n"), 2),
            ["http.core"]
        );
        let config = validate(raw(&format!("{hot}[http]\ncore = 0\n")), 2).expect("valid");
        assert_eq!(config.http.core, Some(0));
        // A fused stage has no thread of its own, so its core is no hot thread's.
        let fused = "[threads.net]\ncore = 1\n[threads.decoder]\nfuse_into = \"net\"\ncore = 0\n";
        assert_eq!(
            problem_keys(&format!("{fused}[http]\ncore = 0\n"), 2)
                .iter()
                .filter(|key| key.as_str() == "http.core")
                .count(),
            0
        );
    }

    #[test]
    fn releasing_startup_pages_refuses_mlockall() {
        assert_eq!(
            problem_keys(
                "[process]\nmlockall = true\nrelease_startup_pages = true\n",
                2
            ),
            ["process.release_startup_pages"]
        );
        let config = validate(raw("[process]\nrelease_startup_pages = true\n"), 2).expect("valid");
        assert!(config.process.release_startup_pages);
        assert!(
            !validate(raw(""), 2)
                .expect("valid")
                .process
                .release_startup_pages
        );
    }

    #[test]
    fn housekeeping_cores_must_exist_and_stay_off_the_hot_cores() {
        let text = "[process]\nhousekeeping_cores = [0, 3]\n[threads.net]\ncore = 1\n\
                    [threads.decoder]\ncore = 2\n[threads.strategy]\ncore = 3\n";
        let problems = validate(raw(text), 4).expect_err("core 3 is the strategy's");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key.to_string(), "process.housekeeping_cores");
        assert!(problems[0].message.contains("strategy"), "{problems:?}");
        assert_eq!(
            problem_keys("[process]\nhousekeeping_cores = [4]\n", 4),
            ["process.housekeeping_cores"]
        );
        let config = validate(
            raw("[process]\nhousekeeping_cores = [0]\n[threads.net]\ncore = 1\n"),
            4,
        )
        .expect("valid");
        assert_eq!(config.process.housekeeping_cores, [0]);
    }

    #[test]
    fn pinned_cores_are_sorted_and_deduplicated() {
        let text = "[threads.net]\ncore = 3\n[threads.decoder]\ncore = 1\n\
                    [threads.strategy]\ncore = 3\n";
        let config = validate(raw(text), 8).expect("valid");
        assert_eq!(config.pinned_cores(), [1, 3]);
    }

    #[test]
    fn runs_on_follows_fusion() {
        let text =
            "[threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nfuse_into = \"decoder\"\n";
        let config = validate(raw(text), 8).expect("valid");
        assert_eq!(config.threads.runs_on(Stage::Strategy), Stage::Net);
        assert_eq!(config.threads.runs_on(Stage::Decoder), Stage::Net);
        assert_eq!(config.threads.runs_on(Stage::Net), Stage::Net);
    }

    #[test]
    fn spinning_threads_may_share_a_core_only_if_one_of_them_yields() {
        let shared = "[threads.net]\ncore = 2\nwait = \"spin\"\n[threads.strategy]\ncore = 2\nwait = \"spin\"\n";
        assert_eq!(problem_keys(shared, 4), ["threads.strategy.core"]);
        let yielding = shared.replacen(
            "wait = \"spin\"\n[threads.strategy]",
            "wait = \"park\"\n[threads.strategy]",
            1,
        );
        assert!(problem_keys(&yielding, 4).is_empty());
    }

    #[test]
    fn ring_sizes_must_be_powers_of_two_in_range() {
        assert_eq!(
            problem_keys(
                "[threads]\n[rings]\nframe_ring_bytes = 100000\nevent_ring_slots = 512\n",
                1
            ),
            ["rings.frame_ring_bytes", "rings.event_ring_slots"]
        );
        assert!(problem_keys("[threads]\n[rings]\nframe_ring_bytes = 1073741824\n", 1).is_empty());
    }
}
