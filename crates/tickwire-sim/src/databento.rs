//! A mock Databento Live Subscription Gateway (LSG): plain TCP, text control lines, then DBN v3.
//!
//! Per connection, as `databento/src/live/protocol.rs` (the official client, 0.64) expects:
//! the server greets with `lsg_version=..` and `cram=<32 characters>`; the client answers
//! `auth=<hex sha256("<challenge>|<key>")>-<last 5 characters of key>|dataset=..|encoding=dbn|
//! compression=none|ts_out=0|1|client=..[|heartbeat_interval_s=N][|slow_reader_behavior=..]`
//! and gets `success=1|session_id=N` (or `success=0|error=..` and a close); then subscription
//! lines (`schema=..|stype_in=..|symbols=..|snapshot=..|is_last=..[|start=..][|id=..]`, one
//! subscription in chunks of at most 500 symbols, `is_last=1` on the last) and `start_session`.
//! The server then streams the DBN metadata and records: a `SymbolMappingMsg` per resolved symbol,
//! per subscription an `ErrorMsg` `SymbolResolutionFailed` naming the symbols it does not know
//! (the known ones are kept) and a `SystemMsg` `SubscriptionAck`, the errors of invalid lines
//! (`InvalidSubscription`: lines sent before `start_session` are answered right after the
//! metadata), then data, and `SystemMsg` heartbeats whenever nothing was written for the
//! heartbeat interval (30 s unless the client set one). Subscriptions and `unsubscribe|..` lines
//! after `start_session` are served at once.
//!
//! Sources ([`DatabentoSource`]):
//! - `Synthetic`: one MBO market per gateway, shared by all connections (`market.rs`), made at
//!   `rate` records a second by a generator thread (or, at rate 0, as fast as the fastest
//!   session reads), keeping the last `history` records. `snapshot=1` sends the current book as
//!   an MBO snapshot; `start=<ns>` replays the retained records from that time on, then joins
//!   the live stream with no gap and no duplicate, and says `ReplayCompleted`, or answers
//!   `ReplayDataAgedOut` (and streams live) when the history no longer reaches back that far.
//!   Schemas `mbo` and `trades` (the `T` records as `TradeMsg`).
//! - `File`: a `.dbn` or `.dbn.zst` file, upgraded to DBN v3, replayed to each session from its
//!   start at `rate` records a second (0: as fast as possible), once or looping; records go to
//!   the subscribed instruments whatever the schema named. The file may also be a `tickwire
//!   record --venue` recording of a gateway session (gzip or plain lines `<ns> base64:<one DBN
//!   unit>`, the metadata first; told apart from DBN by its first bytes): its records are
//!   replayed the same way, its instruments are those its `SymbolMappingMsg`s name, and the
//!   recorded session's own mappings, acknowledgements, heartbeats and errors are left out
//!   (each replay's session makes its own).
//! - `Benchmark`: a batch of MBO records made once at start, written to each session in
//!   [`WRITE_SLICE_BYTES`] slices as fast as the socket takes them, then a `SystemMsg` whose
//!   text starts with [`BENCHMARK_END`], then a close.
//!
//! Threads (blocking sockets, as in `thalex`): an accept thread, per connection a session thread
//! that does the handshake and then writes, and after `start_session` a reader thread that hands
//! the client's lines to it over a channel; with a synthetic market at a rate, a generator
//! thread. Waiting sessions sleep on the market's condition variable, never spin.

mod control;
mod market;

pub use control::{cram_reply, ALL_SYMBOLS, API_KEY_LEN};
pub use market::{FIRST_INSTRUMENT_ID, PUBLISHER_ID, TICK};

use super::accept::{self, accept_loop, Sockets};
use super::wire::{later, lock, set_linger_zero};
use control::{ClientLine, SubscriptionLine, UnsubscriptionLine};
use dbn::encode::DbnMetadataEncoder;
use dbn::{
    rtype, ErrorCode, ErrorMsg, MboMsg, MetadataBuilder, RecordHeader, SType, Schema,
    SymbolMappingMsg, SystemCode, SystemMsg, TradeMsg,
};
use market::{Generator, History};
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire::venue::databento::stream::{Item, RecordStream};

/// The API key the simulator accepts by default, shared by its tests and the appliance's.
/// **Test only**: it is in the repository and opens nothing but this simulator.
pub const TEST_API_KEY: &str = "db-tickwire-test-key-00000000001";

/// The dataset the simulator serves by default; a client asking for another is refused, as a
/// real gateway serves one dataset.
pub const DEFAULT_DATASET: &str = "GLBX.MDP3";

/// The greeting's version (`lsg_version=..`); the official client only logs it.
pub const LSG_VERSION: &str = "tickwire-sim-1";

/// The heartbeat interval when the client sets none (the gateway's documented default).
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);

/// The text that starts the `SystemMsg` ending a benchmark batch (`"<this>: N records"`).
pub const BENCHMARK_END: &str = "tickwire benchmark end";

/// Benchmark mode writes its batch in slices of this size.
pub const WRITE_SLICE_BYTES: usize = 256 * 1024;

/// A control line longer than this ends the connection (500 symbols of 22 characters fit).
const MAX_LINE_BYTES: usize = 64 * 1024;

/// How long the handshake may take, and how long a session may wait for `start_session`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
const START_TIMEOUT: Duration = Duration::from_secs(600);

/// A session looks at its input, its timers and the stop flag at least this often.
const MAX_WAIT: Duration = Duration::from_millis(20);

/// Records a session copies out of the market per lock.
const BATCH_RECORDS: usize = 4096;

/// At rate 0, a session at the head of the market makes this many records per lock.
const ON_DEMAND_RECORDS: u64 = 1024;

/// The generator thread makes at most this many records per lock when it is behind.
const MAX_RECORDS_PER_LOCK: u64 = 65_536;

/// The pause between the pieces of a split write.
const SPLIT_PAUSE: Duration = Duration::from_micros(200);

/// How long a benchmark session waits for the client's close after its last byte.
const BENCHMARK_LINGER: Duration = Duration::from_secs(10);

/// Where the records come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabentoSource {
    /// The shared synthetic MBO market.
    Synthetic,
    /// A `.dbn` or `.dbn.zst` file, or a `tickwire record --venue` recording of a session,
    /// replayed to each session.
    File { path: PathBuf, looping: bool },
    /// A batch of this many MBO records (rounded up to whole events), for throughput tests.
    Benchmark { records: u64 },
}

/// An `ErrorMsg` the server sends before it closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedError {
    /// After this many data records on the connection.
    pub after_records: u64,
    /// The `ErrorMsg` code (an `ErrorCode` value such as 6, `InternalError`).
    pub code: u8,
    pub text: String,
}

/// Fault injection, all off by default. Counts are data records (market data, snapshot records
/// included) sent on the connection; the faults apply to the first `fault_connections`
/// connections in accept order, so that a client that reconnects eventually gets a clean one.
/// Benchmark mode honours `refuse_auth` and `split_writes` only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabentoFaults {
    /// Every record (and the metadata) is written in two pieces with a short pause between, so
    /// the client reads partial records.
    pub split_writes: bool,
    /// After N records an `ErrorMsg` with the code and text, then the close.
    pub error_after: Option<InjectedError>,
    /// After N records nothing at all (no heartbeats) for the duration (`Duration::MAX`: for
    /// ever); the socket stays open and the client's lines are read but not served.
    pub stall_after: Option<(u64, Duration)>,
    /// After N records a `SystemMsg` `SlowReaderWarning`; the data goes on.
    pub slow_reader_warning_after: Option<u64>,
    /// After N records the server closes the connection (FIN).
    pub close_after: Option<u64>,
    /// This long after `start_session`, the server closes the connection.
    pub close_after_time: Option<Duration>,
    /// After N records a TCP reset (SO_LINGER 0, then close).
    pub reset_after: Option<u64>,
    /// Authentication fails (`success=0|error=Authentication failed.`) whatever the key.
    pub refuse_auth: bool,
    /// How many connections the faults apply to.
    pub fault_connections: u32,
}

impl Default for DatabentoFaults {
    fn default() -> DatabentoFaults {
        DatabentoFaults {
            split_writes: false,
            error_after: None,
            stall_after: None,
            slow_reader_warning_after: None,
            close_after: None,
            close_after_time: None,
            reset_after: None,
            refuse_auth: false,
            fault_connections: 1,
        }
    }
}

/// What a Databento gateway simulator run is told.
#[derive(Clone, Debug)]
pub struct DatabentoOptions {
    /// Where the TCP port listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// The one key that authenticates: 32 ASCII characters.
    pub api_key: String,
    /// The dataset served.
    pub dataset: String,
    /// The synthetic market's instruments (raw symbols; ids from [`FIRST_INSTRUMENT_ID`] in
    /// this order). A file brings its own.
    pub symbols: Vec<String>,
    pub source: DatabentoSource,
    /// Records per second of the synthetic market or of a file's replay; 0: as fast as the
    /// clients read.
    pub rate: f64,
    /// With a rate: the synthetic market makes records in pulses, `on` at the rate then `off`
    /// with none, from when the gateway starts ([`DatabentoHandle::started_ns`]); `None`:
    /// steadily. A benchmark measures another stream's latency with the flood on and off in
    /// the same run (`benches/decoders.rs`).
    pub pulse: Option<(Duration, Duration)>,
    /// How many of the synthetic market's last records are kept for replays.
    pub history: usize,
    /// The synthetic market's seed.
    pub seed: u64,
    /// A write blocked this long ends its connection.
    pub write_timeout: Duration,
    pub faults: DatabentoFaults,
}

/// `ESM5` and `NQM5`.
pub fn default_symbols() -> Vec<String> {
    vec!["ESM5".to_owned(), "NQM5".to_owned()]
}

/// `SIM0001`, `SIM0002`, .. : `count` instrument names.
pub fn numbered_symbols(count: usize) -> Vec<String> {
    (1..=count).map(|n| format!("SIM{n:04}")).collect()
}

impl Default for DatabentoOptions {
    /// On `127.0.0.1:0`: [`TEST_API_KEY`], [`DEFAULT_DATASET`], [`default_symbols`], the
    /// synthetic market at 1000 records a second keeping 1,000,000, seed 1, a 5 s write timeout.
    fn default() -> DatabentoOptions {
        DatabentoOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_key: TEST_API_KEY.to_owned(),
            dataset: DEFAULT_DATASET.to_owned(),
            symbols: default_symbols(),
            source: DatabentoSource::Synthetic,
            rate: 1000.0,
            pulse: None,
            history: 1_000_000,
            seed: 1,
            write_timeout: Duration::from_secs(5),
            faults: DatabentoFaults::default(),
        }
    }
}

/// The authentication fields of a connection, as parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthFields {
    pub dataset: String,
    pub encoding: String,
    pub compression: String,
    pub ts_out: bool,
    pub client: String,
    pub heartbeat_interval_s: Option<u64>,
    pub slow_reader_behavior: Option<String>,
}

/// One subscription as received (all its chunks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionStats {
    /// The connection's number in accept order, from 0.
    pub connection: u64,
    pub id: Option<u32>,
    pub schema: String,
    pub stype_in: String,
    /// The lines (chunks) it came in.
    pub lines: u32,
    pub symbols: usize,
    pub snapshot: bool,
    pub start: Option<u64>,
    /// Whether it came after `start_session`.
    pub after_start: bool,
}

/// Counters of a run, from [`DatabentoHandle::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabentoStats {
    pub connections_accepted: u64,
    pub auths_ok: u64,
    pub auths_failed: u64,
    /// Subscription lines (chunks) received.
    pub subscription_lines: u64,
    /// Every complete subscription, in arrival order.
    pub subscriptions: Vec<SubscriptionStats>,
    pub unsubscription_lines: u64,
    /// Lines answered with `InvalidSubscription`.
    pub invalid_lines: u64,
    /// Symbols answered with `SymbolResolutionFailed`.
    pub unresolved_symbols: u64,
    /// `start_session` received.
    pub sessions_started: u64,
    /// Data records (market data, snapshots included) sent, summed over connections.
    pub records_sent: u64,
    pub heartbeats_sent: u64,
    pub replays_served: u64,
    pub replays_aged_out: u64,
    pub snapshots_served: u64,
    /// Times a session fell behind the history and skipped records.
    pub slow_reader_skips: u64,
    /// Records the synthetic market made.
    pub market_records: u64,
    /// Records of the benchmark batch sent, summed over connections.
    pub benchmark_records_sent: u64,
    pub errors_injected: u64,
    pub stalls_injected: u64,
    pub closes_injected: u64,
    pub resets_injected: u64,
    pub slow_reader_warnings_sent: u64,
    /// The authentication fields of the last connection that sent a parsable auth line.
    pub last_auth: Option<AuthFields>,
}

#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    auths_ok: AtomicU64,
    auths_failed: AtomicU64,
    subscription_lines: AtomicU64,
    unsubscription_lines: AtomicU64,
    invalid_lines: AtomicU64,
    unresolved_symbols: AtomicU64,
    sessions_started: AtomicU64,
    records_sent: AtomicU64,
    heartbeats_sent: AtomicU64,
    replays_served: AtomicU64,
    replays_aged_out: AtomicU64,
    snapshots_served: AtomicU64,
    slow_reader_skips: AtomicU64,
    benchmark_records_sent: AtomicU64,
    errors_injected: AtomicU64,
    stalls_injected: AtomicU64,
    closes_injected: AtomicU64,
    resets_injected: AtomicU64,
    slow_reader_warnings_sent: AtomicU64,
    subscriptions: Mutex<Vec<SubscriptionStats>>,
    last_auth: Mutex<Option<AuthFields>>,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// The shared synthetic market and the condition variable its new records are announced on.
struct Market {
    history: Mutex<History>,
    changed: Condvar,
}

/// A file's records, upgraded to DBN v3, one after the other.
struct FileRecords {
    bytes: Vec<u8>,
    /// Offset, length and instrument id of each record.
    records: Vec<(usize, usize, u32)>,
}

struct Shared {
    options: DatabentoOptions,
    stopping: AtomicBool,
    registry: Mutex<Sockets>,
    counters: Counters,
    /// The instruments that subscriptions resolve to: raw symbol and instrument id.
    instruments: Vec<(String, u32)>,
    by_symbol: HashMap<String, usize>,
    by_id: HashMap<u32, usize>,
    market: Option<Market>,
    file: Option<FileRecords>,
    /// The benchmark batch, encoded, and its record count.
    batch: Option<(Vec<u8>, u64)>,
    next_session_id: AtomicU64,
    /// When the gateway started: the origin of the market's rate and pulses.
    started: Instant,
    started_ns: u64,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Reads a DBN file (any version, plain or zstd) into v3 records and its instruments: the
/// metadata's symbol mappings when they map to instrument ids, otherwise each instrument id
/// as its own symbol.
fn load_file(path: &std::path::Path) -> io::Result<(FileRecords, Vec<(String, u32)>)> {
    let named_io =
        |error: io::Error| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
    if is_recording(path).map_err(named_io)? {
        return load_recording(path);
    }
    let named = |error: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {error}", path.display()),
        )
    };
    let reader = dbn::decode::DynReader::from_file(path).map_err(|e| named(e.to_string()))?;
    let mut file = FileRecords {
        bytes: Vec::new(),
        records: Vec::new(),
    };
    let metadata = decode_stream(reader, |record| {
        let bytes: &[u8] = record.as_ref();
        file.records
            .push((file.bytes.len(), bytes.len(), record.header().instrument_id));
        file.bytes.extend_from_slice(bytes);
    })
    .map_err(named)?;
    let mut instruments: Vec<(String, u32)> = Vec::new();
    for mapping in &metadata.mappings {
        if let Some(id) = mapping
            .intervals
            .iter()
            .find_map(|interval| interval.symbol.parse::<u32>().ok())
        {
            instruments.push((mapping.raw_symbol.clone(), id));
        }
    }
    let known: HashSet<u32> = instruments.iter().map(|(_, id)| *id).collect();
    let mut extra: Vec<u32> = file
        .records
        .iter()
        .map(|&(_, _, id)| id)
        .filter(|id| *id != 0 && !known.contains(id))
        .collect::<HashSet<u32>>()
        .into_iter()
        .collect();
    extra.sort_unstable();
    instruments.extend(extra.into_iter().map(|id| (id.to_string(), id)));
    Ok((file, instruments))
}

/// Decodes a whole DBN stream (metadata, then records in any DBN version, upgraded to v3) through
/// the appliance's own [`RecordStream`], which refuses what would make the `dbn` crate's upgrade
/// panic (a v1 or v2 record shorter than its old struct) and what no DBN stream holds; `record`
/// gets each record. Returns the metadata, or what is wrong with the stream and where.
fn decode_stream(
    mut input: impl io::Read,
    mut record: impl FnMut(dbn::RecordRef<'_>),
) -> Result<dbn::Metadata, String> {
    let mut stream = RecordStream::new();
    let mut metadata = None;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.to_string()),
        };
        stream.feed(&chunk[..read]);
        while let Some(item) = stream.next() {
            match item {
                Ok(Item::Metadata(header)) => metadata = Some(*header),
                Ok(Item::Record(decoded)) => record(decoded),
                Err(error) => return Err(format!("at byte {}: {error}", stream.position())),
            }
        }
    }
    stream
        .finish()
        .map_err(|error| format!("at byte {}: {error}", stream.position()))?;
    metadata.ok_or_else(|| "no DBN metadata".to_owned())
}

/// Whether `path` holds a `tickwire record --venue` recording (gzip, or lines that start with a
/// receive time) rather than DBN (`DBN`, or a zstd frame).
fn is_recording(path: &std::path::Path) -> io::Result<bool> {
    let mut head = [0u8; 2];
    let mut file = std::fs::File::open(path)?;
    let read = io::Read::read(&mut file, &mut head)?;
    Ok(read > 0 && (head == [0x1f, 0x8b] || head[0].is_ascii_digit()))
}

/// A recording of a gateway session (see the module docs): its lines' DBN units joined are the
/// session's DBN stream, decoded as a file is.
fn load_recording(path: &std::path::Path) -> io::Result<(FileRecords, Vec<(String, u32)>)> {
    use base64::Engine as _;
    let invalid = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    let named_io =
        |error: io::Error| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
    let file = std::fs::File::open(path).map_err(named_io)?;
    let mut buffered = BufReader::new(file);
    let gzip = buffered
        .fill_buf()
        .map_err(named_io)?
        .starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn BufRead> = if gzip {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(buffered)))
    } else {
        Box::new(buffered)
    };
    let mut stream = Vec::new();
    for (number, line) in reader.lines().enumerate() {
        let line = line.map_err(named_io)?;
        let text = line
            .split_once(' ')
            .map_or(line.as_str(), |(_, text)| text)
            .trim_end();
        let Some(encoded) = text.strip_prefix("base64:") else {
            // A blank line or text: no DBN unit.
            continue;
        };
        let unit = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|error| invalid(format!("line {}: {error}", number + 1)))?;
        stream.extend_from_slice(&unit);
    }
    let mut instruments: Vec<(String, u32)> = Vec::new();
    let mut file = FileRecords {
        bytes: Vec::new(),
        records: Vec::new(),
    };
    decode_stream(stream.as_slice(), |record| {
        if let Some(mapping) = record.get::<SymbolMappingMsg>() {
            let id = mapping.hd.instrument_id;
            if let Ok(symbol) = mapping.stype_in_symbol() {
                if !instruments.iter().any(|&(_, known)| known == id) {
                    instruments.push((symbol.to_owned(), id));
                }
            }
            return;
        }
        if matches!(record.header().rtype, rtype::SYSTEM | rtype::ERROR) {
            return;
        }
        let bytes: &[u8] = record.as_ref();
        file.records
            .push((file.bytes.len(), bytes.len(), record.header().instrument_id));
        file.bytes.extend_from_slice(bytes);
    })
    .map_err(invalid)?;
    if instruments.is_empty() {
        return Err(invalid(
            "no SymbolMappingMsg: not a recording of a gateway session".to_owned(),
        ));
    }
    Ok((file, instruments))
}

/// Makes the benchmark batch: at least `records` MBO records of a fresh market of `instruments`
/// instruments (ids from [`FIRST_INSTRUMENT_ID`]), whole events, as DBN v3 record bytes with no
/// metadata. Returns the bytes and the number of records. What benchmark mode serves; public so
/// that the file-decode benchmark (`benches/databento.rs`) times the same records.
pub fn benchmark_batch(instruments: usize, seed: u64, records: u64) -> (Vec<u8>, u64) {
    let mut generator = Generator::new(instruments, seed);
    let record_bytes = std::mem::size_of::<MboMsg>();
    let mut bytes = Vec::with_capacity(records as usize * record_bytes);
    let mut scratch = Vec::new();
    let mut made = 0u64;
    let base_ns = now_ns();
    while made < records {
        scratch.clear();
        let count = generator.step(base_ns + made, &mut scratch);
        if count == 0 {
            break;
        }
        for record in &scratch {
            bytes.extend_from_slice(record.as_ref());
        }
        made += count as u64;
    }
    (bytes, made)
}

/// Checks the options, loads the file or makes the batch, binds the port and starts the accept
/// thread (and the market's generator thread when it has a rate).
pub fn start(options: DatabentoOptions) -> io::Result<DatabentoHandle> {
    if options.api_key.len() != API_KEY_LEN || !options.api_key.is_ascii() {
        return Err(invalid_input(format!(
            "the API key must be {API_KEY_LEN} ASCII characters"
        )));
    }
    if let Some((on, off)) = options.pulse {
        if on.is_zero() || off.is_zero() || on.checked_add(off).is_none() {
            return Err(invalid_input(format!(
                "a pulse needs an on and an off phase longer than zero (and a period that fits a Duration), not {on:?} and {off:?}"
            )));
        }
    }
    if !(options.rate.is_finite() && options.rate >= 0.0) {
        return Err(invalid_input(format!(
            "the rate must be a finite number of records per second, 0 or more, not {}",
            options.rate
        )));
    }
    let mut file = None;
    let mut batch = None;
    let mut market = None;
    let instruments: Vec<(String, u32)> = match &options.source {
        DatabentoSource::File { path, .. } => {
            let (records, instruments) = load_file(path)?;
            file = Some(records);
            instruments
        }
        DatabentoSource::Synthetic | DatabentoSource::Benchmark { .. } => {
            if options.symbols.is_empty() {
                return Err(invalid_input("the synthetic market needs a symbol".into()));
            }
            if let Some(bad) = options.symbols.iter().find(|symbol| {
                symbol.is_empty()
                    || symbol.len() >= dbn::SYMBOL_CSTR_LEN
                    || symbol.contains([',', '|', '\n'])
                    || symbol.as_str() == ALL_SYMBOLS
            }) {
                return Err(invalid_input(format!("invalid symbol {bad:?}")));
            }
            if let DatabentoSource::Benchmark { records } = options.source {
                batch = Some(benchmark_batch(
                    options.symbols.len(),
                    options.seed,
                    records,
                ));
            } else {
                let generator = Generator::new(options.symbols.len(), options.seed);
                market = Some(Market {
                    history: Mutex::new(History::new(generator, options.history)),
                    changed: Condvar::new(),
                });
            }
            options
                .symbols
                .iter()
                .enumerate()
                .map(|(position, symbol)| (symbol.clone(), FIRST_INSTRUMENT_ID + position as u32))
                .collect()
        }
    };
    let listener = TcpListener::bind(options.listen)?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        by_symbol: instruments
            .iter()
            .enumerate()
            .map(|(position, (symbol, _))| (symbol.clone(), position))
            .collect(),
        by_id: instruments
            .iter()
            .enumerate()
            .map(|(position, (_, id))| (*id, position))
            .collect(),
        instruments,
        options,
        stopping: AtomicBool::new(false),
        registry: Mutex::new(Sockets::default()),
        counters: Counters::default(),
        market,
        file,
        batch,
        next_session_id: AtomicU64::new(1),
        started: Instant::now(),
        started_ns: now_ns(),
    });
    let generator = if shared.market.is_some() && shared.options.rate > 0.0 {
        let generator_shared = Arc::clone(&shared);
        Some(
            std::thread::Builder::new()
                .name("sim-dbn-market".into())
                .spawn(move || run_generator(&generator_shared))?,
        )
    } else {
        None
    };
    let accept_shared = Arc::clone(&shared);
    let accept = std::thread::Builder::new()
        .name("sim-dbn-accept".into())
        .spawn(move || {
            accept_loop(
                &listener,
                &accept_shared.registry,
                &|| accept_shared.stopping(),
                &accept::pause_after_failed_accept,
                "sim-dbn",
                |tcp, peer, socket_id| {
                    bump(&accept_shared.counters.connections_accepted, 1);
                    let thread_shared = Arc::clone(&accept_shared);
                    move || {
                        if let Err(error) = run_connection(&thread_shared, &tcp, socket_id) {
                            if !thread_shared.stopping() {
                                tracing::info!(%peer, %error, "sim: Databento connection ended with an error");
                            }
                        }
                        lock(&thread_shared.registry).remove(socket_id);
                    }
                },
            );
        })?;
    tracing::info!(%addr, "Databento gateway simulator listening");
    Ok(DatabentoHandle {
        shared,
        addr,
        accept: Some(accept),
        generator,
    })
}

/// A running gateway simulator; stops on [`DatabentoHandle::stop`] or drop.
pub struct DatabentoHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
    generator: Option<JoinHandle<()>>,
}

impl DatabentoHandle {
    /// The address bound (with the port chosen for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// When the gateway started (ns since the epoch): the origin of [`DatabentoOptions::pulse`].
    pub fn started_ns(&self) -> u64 {
        self.shared.started_ns
    }

    /// The key that authenticates.
    pub fn api_key(&self) -> &str {
        &self.shared.options.api_key
    }

    pub fn dataset(&self) -> &str {
        &self.shared.options.dataset
    }

    /// The instruments served: raw symbol and instrument id.
    pub fn instruments(&self) -> &[(String, u32)] {
        &self.shared.instruments
    }

    /// The number of records in the benchmark batch (0 in the other modes).
    pub fn benchmark_records(&self) -> u64 {
        self.shared
            .batch
            .as_ref()
            .map_or(0, |(_, records)| *records)
    }

    pub fn stats(&self) -> DatabentoStats {
        let counters = &self.shared.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        DatabentoStats {
            connections_accepted: get(&counters.connections_accepted),
            auths_ok: get(&counters.auths_ok),
            auths_failed: get(&counters.auths_failed),
            subscription_lines: get(&counters.subscription_lines),
            subscriptions: lock(&counters.subscriptions).clone(),
            unsubscription_lines: get(&counters.unsubscription_lines),
            invalid_lines: get(&counters.invalid_lines),
            unresolved_symbols: get(&counters.unresolved_symbols),
            sessions_started: get(&counters.sessions_started),
            records_sent: get(&counters.records_sent),
            heartbeats_sent: get(&counters.heartbeats_sent),
            replays_served: get(&counters.replays_served),
            replays_aged_out: get(&counters.replays_aged_out),
            snapshots_served: get(&counters.snapshots_served),
            slow_reader_skips: get(&counters.slow_reader_skips),
            market_records: self
                .shared
                .market
                .as_ref()
                .map_or(0, |market| lock(&market.history).head()),
            benchmark_records_sent: get(&counters.benchmark_records_sent),
            errors_injected: get(&counters.errors_injected),
            stalls_injected: get(&counters.stalls_injected),
            closes_injected: get(&counters.closes_injected),
            resets_injected: get(&counters.resets_injected),
            slow_reader_warnings_sent: get(&counters.slow_reader_warnings_sent),
            last_auth: lock(&counters.last_auth).clone(),
        }
    }

    /// Stops the accept thread, the generator and every connection; returns once all threads
    /// have ended (each within its write timeout at worst).
    pub fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            accept::stop_accepting(self.addr, accept);
        }
        if let Some(market) = &self.shared.market {
            market.changed.notify_all();
        }
        if let Some(generator) = self.generator.take() {
            let _ = generator.join();
        }
        let threads = lock(&self.shared.registry).shut_down();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for DatabentoHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Makes the market's records at `rate` a second, waking when the next one is due (at least a
/// millisecond apart, so a high rate is served in batches rather than by a spinning thread).
fn run_generator(shared: &Shared) {
    let Some(market) = &shared.market else {
        return;
    };
    let rate = shared.options.rate;
    let origin = shared.started;
    let mut made = 0u64;
    while !shared.stopping() {
        let elapsed = origin.elapsed();
        let (active, off_for) = pulse_time(elapsed, shared.options.pulse);
        if !off_for.is_zero() {
            std::thread::sleep(off_for.min(Duration::from_millis(50)));
            continue;
        }
        let due = (active.as_secs_f64() * rate) as u64;
        if due > made {
            let wanted = (due - made).min(MAX_RECORDS_PER_LOCK);
            made += lock(&market.history).generate(wanted, now_ns());
            market.changed.notify_all();
            if due > made {
                continue;
            }
        }
        let next_due = Duration::from_secs_f64((made + 1) as f64 / rate);
        let wait = next_due
            .saturating_sub(pulse_time(origin.elapsed(), shared.options.pulse).0)
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        std::thread::sleep(wait);
    }
}

/// For `elapsed` since the start: the time spent in `on` phases so far (all of it without
/// pulses), and, in an `off` phase, how long it has left (zero in an `on` phase).
fn pulse_time(elapsed: Duration, pulse: Option<(Duration, Duration)>) -> (Duration, Duration) {
    let Some((on, off)) = pulse else {
        return (elapsed, Duration::ZERO);
    };
    let period = (on + off).as_nanos().max(1);
    let at = elapsed.as_nanos();
    let cycles = at / period;
    let within = at % period;
    let on_ns = on.as_nanos();
    let active = cycles * on_ns + within.min(on_ns);
    let left = if within < on_ns { 0 } else { period - within };
    let nanos = |n: u128| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX));
    (nanos(active), nanos(left))
}

/// 32 random ASCII letters and digits.
fn challenge() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut random = [0u8; 32];
    if getrandom::fill(&mut random).is_err() {
        // Entropy matters little for a test server; the clock is unpredictable enough.
        let mut rng = super::source::SplitMix64::new(now_ns());
        random.fill_with(|| rng.next_u64() as u8);
    }
    random
        .iter()
        .map(|byte| ALPHABET[*byte as usize % ALPHABET.len()] as char)
        .collect()
}

/// Reads one `\n`-terminated line (without it, and without a `\r` before it); `None` at the
/// end of the stream.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(None);
        }
        if let Some(end) = available.iter().position(|&byte| byte == b'\n') {
            line.extend_from_slice(&available[..end]);
            reader.consume(end + 1);
            break;
        }
        let taken = available.len();
        line.extend_from_slice(available);
        reader.consume(taken);
        if line.len() > MAX_LINE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a control line longer than {MAX_LINE_BYTES} bytes"),
            ));
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a control line is not UTF-8"))
}

/// Text safe inside a `key=value|..` line.
fn field_text(text: &str) -> String {
    text.chars()
        .map(|c| if c == '|' || c.is_control() { ' ' } else { c })
        .take(200)
        .collect()
}

/// Text for an `ErrorMsg` or `SystemMsg`: ASCII (the records truncate by bytes, which must not
/// cut a character in two) and short enough for either.
fn record_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_control() {
                c
            } else {
                '?'
            }
        })
        .take(300)
        .collect()
}

/// Checks an auth line against the challenge and the options; the error is the reply's text.
fn check_auth(
    shared: &Shared,
    line: &str,
    challenge: &str,
    faulty: bool,
) -> Result<control::AuthRequest, String> {
    let request = control::parse_auth(line)?;
    *lock(&shared.counters.last_auth) = Some(AuthFields {
        dataset: request.dataset.clone(),
        encoding: request.encoding.clone(),
        compression: request.compression.clone(),
        ts_out: request.ts_out,
        client: request.client.clone(),
        heartbeat_interval_s: request.heartbeat_interval_s,
        slow_reader_behavior: request.slow_reader_behavior.clone(),
    });
    let options = &shared.options;
    if (faulty && options.faults.refuse_auth)
        || request.auth != cram_reply(challenge, &options.api_key)
    {
        return Err("Authentication failed.".to_owned());
    }
    if request.dataset != options.dataset {
        return Err(format!(
            "Unknown dataset {}; this gateway serves {}",
            field_text(&request.dataset),
            options.dataset
        ));
    }
    if request.encoding != "dbn" {
        return Err(format!(
            "Unsupported encoding {}; the gateway sends dbn",
            field_text(&request.encoding)
        ));
    }
    if request.compression != "none" {
        return Err(format!(
            "Unsupported compression {}; the simulator sends compression=none",
            field_text(&request.compression)
        ));
    }
    if request.ts_out && matches!(options.source, DatabentoSource::Benchmark { .. }) {
        return Err("ts_out=1 is not served in benchmark mode".to_owned());
    }
    Ok(request)
}

fn run_connection(shared: &Shared, tcp: &TcpStream, connection: u64) -> io::Result<()> {
    tcp.set_nodelay(true)?;
    tcp.set_write_timeout(Some(shared.options.write_timeout))?;
    tcp.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let faulty = connection < u64::from(shared.options.faults.fault_connections);
    let challenge = challenge();
    let mut writer = tcp;
    writer.write_all(format!("lsg_version={LSG_VERSION}\ncram={challenge}\n").as_bytes())?;
    let mut reader = BufReader::new(tcp.try_clone()?);
    let Some(line) = read_line(&mut reader)? else {
        return Ok(());
    };
    let request = match check_auth(shared, &line, &challenge, faulty) {
        Ok(request) => request,
        Err(error) => {
            bump(&shared.counters.auths_failed, 1);
            let reply = format!("success=0|error={}\n", field_text(&error));
            writer.write_all(reply.as_bytes())?;
            let _ = tcp.shutdown(Shutdown::Both);
            return Ok(());
        }
    };
    bump(&shared.counters.auths_ok, 1);
    let session_id = shared.next_session_id.fetch_add(1, Ordering::Relaxed);
    writer.write_all(format!("success=1|session_id={session_id}\n").as_bytes())?;
    let mut session = Session::new(shared, tcp, connection, faulty, &request);
    let result = session.run(reader);
    if session.reset {
        // The socket's last close sends the RST: wake the reader so it drops its descriptor.
        let _ = tcp.shutdown(Shutdown::Read);
    } else {
        let _ = tcp.shutdown(Shutdown::Both);
    }
    if let Some(reader) = session.reader.take() {
        let _ = reader.join();
    }
    result
}

/// What the reader thread hands the session.
enum Input {
    Line(String),
    Closed,
}

/// One subscription being received or received whole.
#[derive(Clone, Debug)]
struct Subscription {
    schema: Schema,
    stype_in: SType,
    symbols: Vec<String>,
    snapshot: bool,
    start: Option<u64>,
    id: Option<u32>,
    lines: u32,
}

/// The schemas served per instrument: their slots in `Session::active`.
const SLOT_MBO: usize = 0;
const SLOT_TRADES: usize = 1;

/// What a session does next.
#[derive(PartialEq, Eq)]
enum Step {
    Go,
    /// Stalled or idle: nothing to write now.
    Wait,
    End,
}

/// The one-shot faults already fired on a connection.
#[derive(Default)]
struct Fired {
    warning: bool,
    stall: bool,
}

/// One authenticated connection, owned by its thread.
struct Session<'a> {
    shared: &'a Shared,
    tcp: &'a TcpStream,
    connection: u64,
    faulty: bool,
    dataset: String,
    ts_out: bool,
    heartbeat: Duration,
    /// Records waiting to be written.
    out: Vec<u8>,
    /// The chunks of a subscription whose last chunk has not come yet.
    pending: Option<Subscription>,
    started: bool,
    /// Before `start_session`: the complete subscriptions and the errors to send.
    early_subscriptions: Vec<Subscription>,
    early_errors: Vec<String>,
    /// Per instrument and schema slot: `Some(n)` when subscribed, sending records numbered
    /// `n` and later.
    active: Vec<[Option<u64>; 2]>,
    /// Instruments whose mapping was sent.
    mapped: HashSet<usize>,
    /// The number of the next market record to look at.
    cursor: u64,
    /// Replays in progress: the market's head when each was asked for, and its ack label.
    replays: Vec<(u64, String)>,
    /// File replay: the next record, how many were passed, whether a pass sent any.
    file_position: usize,
    file_emitted: u64,
    file_pass_sent: bool,
    stream_start: Instant,
    data_sent: u64,
    last_write: Instant,
    stall_until: Option<Instant>,
    fired: Fired,
    input: Option<mpsc::Receiver<Input>>,
    reader: Option<JoinHandle<()>>,
    reset: bool,
}

impl<'a> Session<'a> {
    fn new(
        shared: &'a Shared,
        tcp: &'a TcpStream,
        connection: u64,
        faulty: bool,
        request: &control::AuthRequest,
    ) -> Session<'a> {
        let now = Instant::now();
        Session {
            shared,
            tcp,
            connection,
            faulty,
            dataset: request.dataset.clone(),
            ts_out: request.ts_out,
            heartbeat: request
                .heartbeat_interval_s
                .map_or(DEFAULT_HEARTBEAT_INTERVAL, Duration::from_secs),
            out: Vec::with_capacity(BATCH_RECORDS * 64),
            pending: None,
            started: false,
            early_subscriptions: Vec::new(),
            early_errors: Vec::new(),
            active: vec![[None; 2]; shared.instruments.len()],
            mapped: HashSet::new(),
            cursor: 0,
            replays: Vec::new(),
            file_position: 0,
            file_emitted: 0,
            file_pass_sent: false,
            stream_start: now,
            data_sent: 0,
            last_write: now,
            stall_until: None,
            fired: Fired::default(),
            input: None,
            reader: None,
            reset: false,
        }
    }

    fn faults(&self) -> Option<&'a DatabentoFaults> {
        self.faulty.then_some(&self.shared.options.faults)
    }

    fn run(&mut self, mut reader: BufReader<TcpStream>) -> io::Result<()> {
        self.tcp.set_read_timeout(Some(START_TIMEOUT))?;
        loop {
            let Some(line) = read_line(&mut reader)? else {
                return Ok(());
            };
            if self.shared.stopping() {
                return Ok(());
            }
            if line == "start_session" {
                break;
            }
            self.handle_line(&line)?;
        }
        bump(&self.shared.counters.sessions_started, 1);
        self.started = true;
        self.stream_start = Instant::now();
        reader.get_ref().set_read_timeout(None)?;
        let (sender, receiver) = mpsc::channel();
        self.input = Some(receiver);
        self.reader = Some(
            std::thread::Builder::new()
                .name(format!("sim-dbn-{}-read", self.connection))
                .spawn(move || loop {
                    match read_line(&mut reader) {
                        Ok(Some(line)) => {
                            if sender.send(Input::Line(line)).is_err() {
                                return;
                            }
                        }
                        Ok(None) | Err(_) => {
                            let _ = sender.send(Input::Closed);
                            return;
                        }
                    }
                })?,
        );
        self.start_stream()?;
        match self.shared.options.source {
            DatabentoSource::Synthetic => self.stream_market(),
            DatabentoSource::File { looping, .. } => self.stream_file(looping),
            DatabentoSource::Benchmark { .. } => self.stream_batch(),
        }
    }

    /// A control line after authentication.
    fn handle_line(&mut self, line: &str) -> io::Result<()> {
        match control::parse_client_line(line) {
            Ok(ClientLine::Subscribe(chunk)) => self.add_chunk(chunk),
            Ok(ClientLine::Unsubscribe(unsubscription)) => self.unsubscribe(unsubscription),
            Ok(ClientLine::StartSession) => {
                self.invalid("start_session: the session has started already".to_owned())
            }
            Err(error) => self.invalid(error),
        }
    }

    fn invalid(&mut self, error: String) -> io::Result<()> {
        bump(&self.shared.counters.invalid_lines, 1);
        if self.started {
            self.push_error(ErrorCode::InvalidSubscription, &error);
        } else {
            self.early_errors.push(error);
        }
        Ok(())
    }

    fn add_chunk(&mut self, chunk: SubscriptionLine) -> io::Result<()> {
        bump(&self.shared.counters.subscription_lines, 1);
        let is_last = chunk.is_last;
        match &mut self.pending {
            // Later chunks only add symbols: the first chunk's parameters hold.
            Some(pending) => {
                pending.symbols.extend(chunk.symbols);
                pending.lines += 1;
            }
            None => {
                self.pending = Some(Subscription {
                    schema: chunk.schema,
                    stype_in: chunk.stype_in,
                    symbols: chunk.symbols,
                    snapshot: chunk.snapshot,
                    start: chunk.start,
                    id: chunk.id,
                    lines: 1,
                })
            }
        }
        if !is_last {
            return Ok(());
        }
        let Some(subscription) = self.pending.take() else {
            return Ok(());
        };
        lock(&self.shared.counters.subscriptions).push(SubscriptionStats {
            connection: self.connection,
            id: subscription.id,
            schema: subscription.schema.to_string(),
            stype_in: subscription.stype_in.to_string(),
            lines: subscription.lines,
            symbols: subscription.symbols.len(),
            snapshot: subscription.snapshot,
            start: subscription.start,
            after_start: self.started,
        });
        if !self.started {
            self.early_subscriptions.push(subscription);
            return Ok(());
        }
        let resolved = self.resolve(&subscription);
        if let Ok((positions, _)) = &resolved {
            self.push_mappings(positions);
        }
        self.push_verdict(&subscription, &resolved);
        if let Ok((positions, _)) = resolved {
            self.activate(&subscription, &positions);
        }
        Ok(())
    }

    fn unsubscribe(&mut self, unsubscription: UnsubscriptionLine) -> io::Result<()> {
        bump(&self.shared.counters.unsubscription_lines, 1);
        if !self.started {
            return self.invalid("unsubscribe before start_session".to_owned());
        }
        let slot = match unsubscription.schema {
            Schema::Trades => SLOT_TRADES,
            _ => SLOT_MBO,
        };
        let everything = unsubscription.symbols.iter().any(|s| s == ALL_SYMBOLS);
        for position in 0..self.active.len() {
            let (symbol, id) = &self.shared.instruments[position];
            let named = everything
                || unsubscription
                    .symbols
                    .iter()
                    .any(|s| s == symbol || s.parse::<u32>().ok() == Some(*id));
            if named {
                self.active[position][slot] = None;
            }
        }
        if unsubscription.is_last {
            let text = format!(
                "Unsubscribe request for {} data succeeded",
                unsubscription.schema
            );
            self.push_system(SystemCode::UnsubscribeAck, &text);
        }
        Ok(())
    }

    /// The subscription's instruments (positions) and the symbols nobody knows, or why the
    /// whole subscription is invalid.
    #[allow(
        clippy::type_complexity,
        reason = "a private pair read right where it is made"
    )]
    fn resolve(&self, subscription: &Subscription) -> Result<(Vec<usize>, Vec<String>), String> {
        let source = &self.shared.options.source;
        let schema_served = match source {
            DatabentoSource::Synthetic => {
                matches!(subscription.schema, Schema::Mbo | Schema::Trades)
            }
            DatabentoSource::Benchmark { .. } => subscription.schema == Schema::Mbo,
            DatabentoSource::File { .. } => true,
        };
        if !schema_served {
            return Err(format!(
                "schema {} is not served by the simulator (mbo{})",
                subscription.schema,
                if *source == DatabentoSource::Synthetic {
                    ", trades"
                } else {
                    ""
                }
            ));
        }
        if !matches!(
            subscription.stype_in,
            SType::RawSymbol | SType::InstrumentId
        ) {
            return Err(format!(
                "stype_in {} is not served by the simulator (raw_symbol, instrument_id)",
                subscription.stype_in
            ));
        }
        // A file or a benchmark batch starts with no order resting, so its snapshot is empty:
        // `snapshot=1` is served by sending none. A replay needs the synthetic market's history.
        if subscription.start.is_some() && *source != DatabentoSource::Synthetic {
            return Err("start (a replay) is served by the synthetic market only".to_owned());
        }
        let mut positions = Vec::new();
        let mut unknown = Vec::new();
        for symbol in &subscription.symbols {
            if symbol == ALL_SYMBOLS {
                positions.extend(0..self.shared.instruments.len());
                continue;
            }
            let position = match subscription.stype_in {
                SType::InstrumentId => symbol
                    .parse::<u32>()
                    .ok()
                    .and_then(|id| self.shared.by_id.get(&id)),
                _ => self.shared.by_symbol.get(symbol),
            };
            match position {
                Some(&position) => positions.push(position),
                None => unknown.push(symbol.clone()),
            }
        }
        positions.sort_unstable();
        positions.dedup();
        Ok((positions, unknown))
    }

    fn push_mappings(&mut self, positions: &[usize]) {
        let ts = now_ns();
        for &position in positions {
            if !self.mapped.insert(position) {
                continue;
            }
            let (symbol, id) = &self.shared.instruments[position];
            if let Ok(mapping) = SymbolMappingMsg::new(
                *id,
                ts,
                SType::RawSymbol,
                symbol,
                SType::InstrumentId,
                &id.to_string(),
                ts,
                dbn::UNDEF_TIMESTAMP,
            ) {
                self.push_record(mapping.as_ref());
            }
        }
    }

    /// The subscription's errors, if any, and its ack when it stands.
    fn push_verdict(
        &mut self,
        subscription: &Subscription,
        resolved: &Result<(Vec<usize>, Vec<String>), String>,
    ) {
        match resolved {
            Err(error) => {
                bump(&self.shared.counters.invalid_lines, 1);
                self.push_error(ErrorCode::InvalidSubscription, error);
            }
            Ok((_, unknown)) => {
                if !unknown.is_empty() {
                    bump(
                        &self.shared.counters.unresolved_symbols,
                        unknown.len() as u64,
                    );
                    let text = format!(
                        "Failed to resolve {} symbol{} for {}: {}",
                        unknown.len(),
                        if unknown.len() == 1 { "" } else { "s" },
                        subscription.schema,
                        unknown.join(",")
                    );
                    self.push_error(ErrorCode::SymbolResolutionFailed, &text);
                }
                let text = match subscription.id {
                    Some(id) => format!(
                        "Subscription request {id} for {} data succeeded",
                        subscription.schema
                    ),
                    None => format!(
                        "Subscription request for {} data succeeded",
                        subscription.schema
                    ),
                };
                self.push_system(SystemCode::SubscriptionAck, &text);
            }
        }
    }

    /// Starts the subscription's instruments: a snapshot, a replay or live from now.
    fn activate(&mut self, subscription: &Subscription, positions: &[usize]) {
        let slot = if subscription.schema == Schema::Trades {
            SLOT_TRADES
        } else {
            SLOT_MBO
        };
        let fresh: Vec<usize> = positions
            .iter()
            .copied()
            .filter(|&position| self.active[position][slot].is_none())
            .collect();
        let shared = self.shared;
        let Some(market) = &shared.market else {
            for position in fresh {
                self.active[position][slot] = Some(0);
            }
            return;
        };
        let counters = &shared.counters;
        let history = lock(&market.history);
        let head = history.head();
        if subscription.snapshot && slot == SLOT_MBO {
            bump(&counters.snapshots_served, 1);
            let mut records = Vec::new();
            let now = now_ns();
            for &position in &fresh {
                history.generator().snapshot(position, now, &mut records);
                self.active[position][slot] = Some(head);
            }
            drop(history);
            for record in &records {
                self.push_data(record.as_ref());
            }
            return;
        }
        let Some(start_ns) = subscription.start else {
            for position in fresh {
                self.active[position][slot] = Some(head);
            }
            return;
        };
        let aged_out = history.has_dropped()
            && history
                .oldest_ts_ns()
                .is_none_or(|oldest_ns| start_ns < oldest_ns);
        if aged_out {
            let oldest = history.oldest_ts_ns().unwrap_or(0);
            drop(history);
            bump(&counters.replays_aged_out, 1);
            self.push_error(
                ErrorCode::ReplayDataAgedOut,
                &format!(
                    "start {start_ns} is older than the retained history (from {oldest}); streaming live"
                ),
            );
            for position in fresh {
                self.active[position][slot] = Some(head);
            }
            return;
        }
        let from = history.index_at_or_after(start_ns);
        drop(history);
        bump(&counters.replays_served, 1);
        if from < self.cursor {
            // What was sent up to the cursor must not be sent again.
            let cursor = self.cursor;
            for slots in &mut self.active {
                for state in slots.iter_mut().flatten() {
                    *state = (*state).max(cursor);
                }
            }
            self.cursor = from;
        }
        for position in fresh {
            self.active[position][slot] = Some(from);
        }
        let label = match subscription.id {
            Some(id) => format!(
                "Replay completed for {} subscription {id}",
                subscription.schema
            ),
            None => format!("Replay completed for {} subscription", subscription.schema),
        };
        self.replays.push((head, label));
        self.complete_replays();
    }

    fn complete_replays(&mut self) {
        let cursor = self.cursor;
        let mut done = Vec::new();
        self.replays.retain(|(until, label)| {
            let over = *until <= cursor;
            if over {
                done.push(label.clone());
            }
            !over
        });
        for label in done {
            self.push_system(SystemCode::ReplayCompleted, &label);
        }
    }

    /// Appends a record (with the `ts_out` stamp when the client asked for it).
    fn push_record(&mut self, bytes: &[u8]) {
        let start = self.out.len();
        self.out.extend_from_slice(bytes);
        if self.ts_out {
            // The header's length counts 4-byte words; the stamp adds two.
            self.out[start] += 2;
            self.out.extend_from_slice(&now_ns().to_le_bytes());
        }
    }

    fn push_data(&mut self, bytes: &[u8]) {
        self.push_record(bytes);
        self.data_sent += 1;
    }

    fn push_error(&mut self, code: ErrorCode, text: &str) {
        let error = ErrorMsg::new(now_ns(), Some(code), &record_text(text), true);
        self.push_record(error.as_ref());
    }

    fn push_system(&mut self, code: SystemCode, text: &str) {
        if let Ok(message) = SystemMsg::new(now_ns(), Some(code), &record_text(text)) {
            self.push_record(message.as_ref());
        }
    }

    /// Writes `bytes` whole, or in two halves with a pause between (the split fault).
    fn write_split(&self, bytes: &[u8]) -> io::Result<()> {
        let mut writer = self.tcp;
        if !self.faults().is_some_and(|faults| faults.split_writes) || bytes.len() < 2 {
            return writer.write_all(bytes);
        }
        let (first, second) = bytes.split_at(bytes.len() / 2);
        writer.write_all(first)?;
        std::thread::sleep(SPLIT_PAUSE);
        writer.write_all(second)?;
        std::thread::sleep(SPLIT_PAUSE);
        Ok(())
    }

    /// Writes the records waiting (each split in two under the split fault).
    fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let result = if self.faults().is_some_and(|faults| faults.split_writes) {
            let mut at = 0;
            let mut result = Ok(());
            while at < out.len() && result.is_ok() {
                let length = (usize::from(out[at]) * RecordHeader::LENGTH_MULTIPLIER)
                    .clamp(1, out.len() - at);
                result = self.write_split(&out[at..at + length]);
                at += length;
            }
            result
        } else {
            (&*self.tcp).write_all(&out)
        };
        self.out = out;
        self.out.clear();
        self.last_write = Instant::now();
        result
    }

    /// The metadata, then per subscription received before `start_session` its mappings,
    /// verdict and start, and the errors of the invalid lines.
    fn start_stream(&mut self) -> io::Result<()> {
        let subscriptions = std::mem::take(&mut self.early_subscriptions);
        let resolved: Vec<_> = subscriptions
            .iter()
            .map(|subscription| self.resolve(subscription))
            .collect();
        let schema = common(subscriptions.iter().map(|s| s.schema));
        let stype_in = common(subscriptions.iter().map(|s| s.stype_in));
        let mut symbols: Vec<String> = subscriptions
            .iter()
            .flat_map(|s| s.symbols.iter().cloned())
            .collect();
        symbols.sort_unstable();
        symbols.dedup();
        let mut not_found: Vec<String> = resolved
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .flat_map(|(_, unknown)| unknown.iter().cloned())
            .collect();
        not_found.sort_unstable();
        not_found.dedup();
        let metadata = MetadataBuilder::new()
            .dataset(self.dataset.clone())
            .schema(schema)
            .start(now_ns())
            .stype_in(stype_in)
            .stype_out(SType::InstrumentId)
            .ts_out(self.ts_out)
            .symbols(symbols)
            .not_found(not_found)
            .build();
        let mut encoded = Vec::new();
        DbnMetadataEncoder::new(&mut encoded)
            .encode(&metadata)
            .map_err(|error| io::Error::other(error.to_string()))?;
        self.write_split(&encoded)?;
        if let Some(market) = &self.shared.market {
            self.cursor = lock(&market.history).head();
        }
        for (positions, _) in resolved.iter().flatten() {
            self.push_mappings(positions);
        }
        for (subscription, resolved) in subscriptions.iter().zip(&resolved) {
            self.push_verdict(subscription, resolved);
        }
        for error in std::mem::take(&mut self.early_errors) {
            self.push_error(ErrorCode::InvalidSubscription, &error);
        }
        for (subscription, resolved) in subscriptions.iter().zip(resolved) {
            if let Ok((positions, _)) = resolved {
                self.activate(subscription, &positions);
            }
        }
        self.flush()?;
        self.last_write = Instant::now();
        Ok(())
    }

    /// The client's lines, the stop flag, the time-based close and the stall.
    fn tick(&mut self) -> io::Result<Step> {
        if self.shared.stopping() {
            return Ok(Step::End);
        }
        let now = Instant::now();
        let stalled = self.stall_until.is_some_and(|until| now < until);
        let mut lines = Vec::new();
        if let Some(input) = &self.input {
            loop {
                match input.try_recv() {
                    Ok(Input::Line(line)) => lines.push(line),
                    Ok(Input::Closed) | Err(mpsc::TryRecvError::Disconnected) => {
                        return Ok(Step::End)
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
        }
        if let Some(after) = self.faults().and_then(|faults| faults.close_after_time) {
            if now >= later(self.stream_start, after) {
                bump(&self.shared.counters.closes_injected, 1);
                return Ok(Step::End);
            }
        }
        if stalled {
            // Hung: the lines are read (so the client never blocks) but not served.
            let until = self.stall_until.unwrap_or(now);
            std::thread::sleep(until.saturating_duration_since(now).min(MAX_WAIT));
            return Ok(Step::Wait);
        }
        for line in lines {
            self.handle_line(&line)?;
        }
        self.flush()?;
        Ok(Step::Go)
    }

    /// Records the connection may still send before a count fault is due.
    fn records_until_fault(&self) -> u64 {
        let Some(faults) = self.faults() else {
            return u64::MAX;
        };
        [
            faults.error_after.as_ref().map(|error| error.after_records),
            faults.close_after,
            faults.reset_after,
            faults
                .stall_after
                .filter(|_| !self.fired.stall)
                .map(|(after, _)| after),
            faults
                .slow_reader_warning_after
                .filter(|_| !self.fired.warning),
        ]
        .into_iter()
        .flatten()
        .map(|after| after.saturating_sub(self.data_sent))
        .filter(|&left| left > 0)
        .min()
        .unwrap_or(u64::MAX)
    }

    /// Fires the count faults that are due; `End` when one ends the connection.
    fn fire_faults(&mut self) -> io::Result<Step> {
        let Some(faults) = self.faults() else {
            return Ok(Step::Go);
        };
        let sent = self.data_sent;
        let counters = &self.shared.counters;
        if let Some(after) = faults.slow_reader_warning_after {
            if sent >= after && !self.fired.warning {
                self.fired.warning = true;
                bump(&counters.slow_reader_warnings_sent, 1);
                self.push_system(
                    SystemCode::SlowReaderWarning,
                    "Warning: reading too slowly, the gateway's send buffer is filling",
                );
                self.flush()?;
            }
        }
        if let Some(error) = &faults.error_after {
            if sent >= error.after_records {
                bump(&counters.errors_injected, 1);
                let message = ErrorMsg::new(now_ns(), None, &record_text(&error.text), true);
                let message = ErrorMsg {
                    code: error.code,
                    ..message
                };
                self.push_record(message.as_ref());
                self.flush()?;
                return Ok(Step::End);
            }
        }
        if faults.reset_after.is_some_and(|after| sent >= after) {
            bump(&counters.resets_injected, 1);
            set_linger_zero(self.tcp)?;
            self.reset = true;
            return Ok(Step::End);
        }
        if faults.close_after.is_some_and(|after| sent >= after) {
            bump(&counters.closes_injected, 1);
            return Ok(Step::End);
        }
        if let Some((after, duration)) = faults.stall_after {
            if sent >= after && !self.fired.stall {
                self.fired.stall = true;
                bump(&counters.stalls_injected, 1);
                self.stall_until = Some(later(Instant::now(), duration));
            }
        }
        Ok(Step::Go)
    }

    fn heartbeat_due(&self) -> Instant {
        later(self.last_write, self.heartbeat)
    }

    fn heartbeat_if_due(&mut self) -> io::Result<()> {
        if Instant::now() >= self.heartbeat_due() {
            bump(&self.shared.counters.heartbeats_sent, 1);
            let heartbeat = SystemMsg::heartbeat(now_ns());
            self.push_record(heartbeat.as_ref());
            self.flush()?;
        }
        Ok(())
    }

    /// Counts the data written since the last call.
    fn count_sent(&self, before: u64) {
        bump(&self.shared.counters.records_sent, self.data_sent - before);
    }

    fn stream_market(&mut self) -> io::Result<()> {
        if self.fire_faults()? == Step::End {
            return Ok(());
        }
        loop {
            match self.tick()? {
                Step::End => return Ok(()),
                Step::Wait => continue,
                Step::Go => {}
            }
            let before = self.data_sent;
            let limit = self.records_until_fault();
            self.collect_market(limit);
            self.count_sent(before);
            if !self.out.is_empty() {
                self.flush()?;
                if self.fire_faults()? == Step::End {
                    return Ok(());
                }
            } else {
                self.heartbeat_if_due()?;
            }
        }
    }

    /// Copies the session's next records out of the market (at most `limit` data records), or
    /// when there are none waits for new ones (at rate 0 makes them) up to the next timer.
    fn collect_market(&mut self, limit: u64) {
        let shared = self.shared;
        let Some(market) = &shared.market else {
            return;
        };
        let mut history = lock(&market.history);
        if self.cursor < history.first_index() {
            // Fell out of the history: what was dropped cannot be sent.
            let first = history.first_index();
            drop(history);
            bump(&self.shared.counters.slow_reader_skips, 1);
            self.push_error(
                ErrorCode::SkippedRecordsAfterSlowReading,
                &format!(
                    "the session fell {} records behind the live stream; records were skipped",
                    first - self.cursor
                ),
            );
            for slots in &mut self.active {
                for state in slots.iter_mut().flatten() {
                    *state = (*state).max(first);
                }
            }
            self.cursor = first;
            return;
        }
        let head = history.head();
        if self.cursor == head {
            let subscribed = self.active.iter().flatten().any(Option::is_some);
            if self.shared.options.rate == 0.0 && subscribed {
                history.generate(ON_DEMAND_RECORDS, now_ns());
                market.changed.notify_all();
            } else {
                let timeout = self
                    .heartbeat_due()
                    .saturating_duration_since(Instant::now())
                    .clamp(Duration::from_millis(1), MAX_WAIT);
                let _ = market.changed.wait_timeout(history, timeout);
            }
            return;
        }
        let mut taken = 0u64;
        let mut scanned = 0;
        while scanned < BATCH_RECORDS && taken < limit && self.cursor < head {
            let index = self.cursor;
            self.cursor += 1;
            scanned += 1;
            let Some(record) = history.get(index) else {
                break;
            };
            let position = record.hd.instrument_id.wrapping_sub(FIRST_INSTRUMENT_ID) as usize;
            let Some(&slots) = self.active.get(position) else {
                continue;
            };
            if slots[SLOT_MBO].is_some_and(|from| index >= from) {
                self.push_data(record.as_ref());
                taken += 1;
            }
            if record.action as u8 == b'T' && slots[SLOT_TRADES].is_some_and(|from| index >= from) {
                let trade = trade_of(record);
                self.push_data(trade.as_ref());
                taken += 1;
            }
        }
        drop(history);
        self.complete_replays();
    }

    fn stream_file(&mut self, looping: bool) -> io::Result<()> {
        let shared = self.shared;
        let Some(file) = &shared.file else {
            return Ok(());
        };
        let rate = self.shared.options.rate;
        let mut done = file.records.is_empty();
        if self.fire_faults()? == Step::End {
            return Ok(());
        }
        loop {
            match self.tick()? {
                Step::End => return Ok(()),
                Step::Wait => continue,
                Step::Go => {}
            }
            let before = self.data_sent;
            let limit = self.records_until_fault();
            let mut next_due = None;
            let mut scanned = 0;
            let now = Instant::now();
            while !done && scanned < BATCH_RECORDS && self.data_sent - before < limit {
                if self.file_position == file.records.len() {
                    if !looping {
                        done = true;
                        break;
                    }
                    self.file_position = 0;
                    if !std::mem::take(&mut self.file_pass_sent) {
                        // A pass with nothing subscribed: wait rather than spin.
                        next_due = Some(now + MAX_WAIT);
                        break;
                    }
                }
                if rate > 0.0 {
                    let due = self.stream_start
                        + Duration::from_secs_f64(self.file_emitted as f64 / rate);
                    if due > now {
                        next_due = Some(due);
                        break;
                    }
                }
                let (offset, length, instrument_id) = file.records[self.file_position];
                self.file_position += 1;
                self.file_emitted += 1;
                scanned += 1;
                let wanted = match self.shared.by_id.get(&instrument_id) {
                    Some(&position) => self.active[position].iter().any(Option::is_some),
                    None => true,
                };
                if wanted {
                    self.file_pass_sent = true;
                    self.push_data(&file.bytes[offset..offset + length]);
                }
            }
            self.count_sent(before);
            if !self.out.is_empty() {
                self.flush()?;
                if self.fire_faults()? == Step::End {
                    return Ok(());
                }
                continue;
            }
            self.heartbeat_if_due()?;
            if done || next_due.is_some() {
                let now = Instant::now();
                let wake = next_due
                    .unwrap_or(now + MAX_WAIT)
                    .min(self.heartbeat_due())
                    .min(now + MAX_WAIT);
                std::thread::sleep(wake.saturating_duration_since(now));
            }
        }
    }

    /// The batch in big slices, the end marker, then a close once the client has read it.
    fn stream_batch(&mut self) -> io::Result<()> {
        let shared = self.shared;
        let Some((batch, records)) = &shared.batch else {
            return Ok(());
        };
        let record_bytes = std::mem::size_of::<MboMsg>();
        let mut written = 0;
        for slice in batch.chunks(WRITE_SLICE_BYTES) {
            if self.shared.stopping() {
                return Ok(());
            }
            self.write_split(slice)?;
            let sent = (written + slice.len()) / record_bytes - written / record_bytes;
            written += slice.len();
            bump(&self.shared.counters.benchmark_records_sent, sent as u64);
            bump(&self.shared.counters.records_sent, sent as u64);
        }
        self.push_system_plain(&format!("{BENCHMARK_END}: {records} records"));
        self.flush()?;
        let _ = self.tcp.shutdown(Shutdown::Write);
        if let Some(input) = &self.input {
            let deadline = Instant::now() + BENCHMARK_LINGER;
            while Instant::now() < deadline && !self.shared.stopping() {
                match input.recv_timeout(MAX_WAIT * 5) {
                    Ok(Input::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Ok(Input::Line(_)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
            }
        }
        Ok(())
    }

    /// A `SystemMsg` without a code (255, unset).
    fn push_system_plain(&mut self, text: &str) {
        if let Ok(message) = SystemMsg::new(now_ns(), None, text) {
            self.push_record(message.as_ref());
        }
    }
}

/// The value every item has, if they agree (and there is one).
fn common<T: PartialEq>(mut values: impl Iterator<Item = T>) -> Option<T> {
    let first = values.next()?;
    values.all(|value| value == first).then_some(first)
}

/// The trade an MBO `T` record reports, as the `trades` schema carries it.
fn trade_of(record: &MboMsg) -> TradeMsg {
    TradeMsg {
        hd: RecordHeader::new::<TradeMsg>(
            rtype::MBP_0,
            PUBLISHER_ID,
            record.hd.instrument_id,
            record.hd.ts_event,
        ),
        price: record.price,
        size: record.size,
        action: record.action,
        side: record.side,
        flags: dbn::FlagSet::new(dbn::flags::LAST),
        depth: 0,
        ts_recv: record.ts_recv,
        ts_in_delta: record.ts_in_delta,
        sequence: record.sequence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 DBN file whose instrument definition is 76 bytes (v1's struct is 360): `dbn`'s
    /// upgrade to v3 panics on it, so `sim --source` refuses it with the record's offset. The
    /// bytes are what the `dbn_recording` fuzz target found for the recording reader.
    #[test]
    fn pulses_count_only_their_on_phases() {
        let ms = Duration::from_millis;
        let pulse = Some((ms(200), ms(300)));
        assert_eq!(pulse_time(ms(150), None), (ms(150), ms(0)));
        assert_eq!(pulse_time(ms(150), pulse), (ms(150), ms(0)));
        assert_eq!(pulse_time(ms(200), pulse), (ms(200), ms(300)));
        assert_eq!(pulse_time(ms(450), pulse), (ms(200), ms(50)));
        assert_eq!(pulse_time(ms(500), pulse), (ms(200), ms(0)));
        assert_eq!(pulse_time(ms(1_120), pulse), (ms(520), ms(0)));
        assert_eq!(pulse_time(ms(1_300), pulse), (ms(600), ms(200)));
    }

    #[test]
    fn a_dbn_file_with_a_record_shorter_than_its_version_struct_is_refused_not_a_panic() {
        const FOUND: &str = "44424e01940000000000000000000000000000000000000000000000000400000000\
            000000000000000000000000000000f5000000000000000000000000000000000000040000000000000000\
            0000000000000000000000f500000000000000000000000000000000000000000000000000000000000000\
            0000000000000000000000002e2e2e2e2e2e2e2e262e2e2e2e2e2e2e2e2e2e2e2e2e131313131313131313\
            1313131313131313131313131313131313131313131313131313131313131313131313131313131313131313\
            13131313131313131300000000000000000000000000000000000000000000007a4600ea";
        let bytes: Vec<u8> = (0..FOUND.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&FOUND[at..at + 2], 16).expect("hex"))
            .collect();
        let dir = std::env::temp_dir().join(format!("tickwire-sim-dbn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("short-v1.dbn");
        std::fs::write(&path, &bytes).expect("write");
        let error = load_file(&path).err().expect("refused");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("at byte"), "{error}");
    }
}
