//! The DBN recorder's sustained rate from a bus, beside rusqlite on the same events.
//!
//! `record-rate check`: records events from a bus and reads the files back; they must be the
//! published events exactly (run first by `scripts/bench-record`: nothing is timed unchecked).
//!
//! `record-rate rates [--seconds S] R...`: for each rate R (events/s), a writer thread
//! publishes a Binance-like mix (quotes, book levels, trades; fractional sizes, 40-bit
//! sequences) to a bus (262144 slots, the default `[bus] capacity`), paced in batches, while
//! this thread runs the recorder on it (a `tickwire_client::Client` and a `Recorder`, as
//! `tickwire_record::record_bus` does, with the default 1 s flush interval and zstd level 1) into
//! a directory on disk. Per rate: the rate reached, overruns (a lapped recorder: loss), bytes
//! per event on disk, the recorder thread's CPU, the process's peak RSS, and the p50/p99/max
//! from an event's publication to the moment the frame holding it was written. Every rate is
//! checked: the files hold every published event, less those an overrun reported.
//!
//! `record-rate sqlite [--events N]`: the same events into SQLite (rusqlite, WAL,
//! `synchronous = NORMAL`, one prepared INSERT of the event's fields, a transaction per 4096),
//! as fast as it goes, and the recorder on the same events from memory (no bus), for the ratio.

use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire_bus::event::{
    flags, Body, BookLevel, Event, EventHeader, EventKind, Quote, Side, Trade,
};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};
use tickwire_client::{Client, Next, Start};
use tickwire_record::{Recorder, RecorderConfig, Replay, SystemClock};

const BUS_SLOTS: u64 = 1 << 18;
const INSTRUMENTS: u32 = 8;

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// A Binance-like event stream: 60% quotes, 30% book levels, 10% trades, prices on a random
/// walk, fractional sizes, update ids past 32 bits. Deterministic (xorshift).
struct Feed {
    state: u64,
    n: u64,
    mid: [i64; INSTRUMENTS as usize],
}

impl Feed {
    fn new() -> Feed {
        Feed {
            state: 0x9e37_79b9_7f4a_7c15,
            n: 0,
            mid: [60_000_000_000_000; INSTRUMENTS as usize],
        }
    }

    fn next_random(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// The next event, stamped `recv_ts_ns`.
    fn next_event(&mut self, recv_ts_ns: u64) -> Event {
        let random = self.next_random();
        self.n += 1;
        let instrument = (random % u64::from(INSTRUMENTS)) as u32;
        let mid = &mut self.mid[instrument as usize];
        *mid += ((random >> 8) % 21) as i64 * 100_000_000 - 1_000_000_000;
        let tick = 100_000_000;
        let size = Fixed(((random >> 16) % 50_000 + 1) as i64 * 1_000_000);
        let header = EventHeader {
            exchange_ts_ns: recv_ts_ns - 2_000_000,
            recv_ts_ns,
            venue_seq: 8_000_000_000_000 + self.n,
            instrument_id: instrument,
            venue_id: 0,
            kind: EventKind::Quote,
            flags: flags::LAST,
        };
        let body = match (random >> 40) % 10 {
            0..=5 => Body::Quote(Quote {
                bid_px: Fixed(*mid - tick),
                bid_sz: size,
                ask_px: Fixed(*mid + tick),
                ask_sz: Fixed(size.0 / 3 + 1_000_000),
            }),
            6..=8 => Body::BookLevel(BookLevel::new(
                if random & 1 == 0 {
                    Side::Bid
                } else {
                    Side::Ask
                },
                Fixed(*mid + ((random >> 24) % 40) as i64 * tick - 20 * tick),
                if random & 2 == 0 { size } else { Fixed::ZERO },
            )),
            _ => Body::Trade(Trade::new(
                Fixed(*mid),
                size,
                5_000_000_000 + self.n,
                if random & 4 == 0 {
                    Side::Bid
                } else {
                    Side::Ask
                },
            )),
        };
        Event::new(header, body)
    }
}

fn directory() -> Vec<DirectoryEntry> {
    (0..INSTRUMENTS)
        .map(|instrument_id| DirectoryEntry {
            instrument_id,
            venue_id: 0,
            venue: "binance-usdm".to_owned(),
            symbol: format!("SYM{instrument_id}USDT"),
            venue_symbol: format!("sym{instrument_id}usdt"),
        })
        .collect()
}

fn make_bus(path: &Path) -> BusWriter {
    let options = BusOptions {
        path: path.to_path_buf(),
        geometry: Geometry::new(BUS_SLOTS, 64).expect("valid geometry"),
        group: None,
    };
    let mut writer = BusWriter::create(&options, realtime_ns(), realtime_ns()).expect("the bus");
    for entry in directory() {
        writer
            .add_instrument(&entry)
            .expect("room in the directory");
    }
    writer
}

/// Publishes `total` events at `rate` per second in batches, each stamped with its publication
/// time; sleeps (never spins) between batches. Keeps a copy of them when `keep` (the check).
fn publish(mut writer: BusWriter, rate: f64, total: u64, keep: bool) -> Vec<Event> {
    let mut feed = Feed::new();
    let batch = ((rate / 2_000.0) as u64).clamp(16, 4096);
    let started = Instant::now();
    let mut published = 0u64;
    let mut all = Vec::with_capacity(if keep { total as usize } else { 0 });
    while published < total {
        let due = started + Duration::from_secs_f64(published as f64 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let stamp = realtime_ns();
        for _ in 0..batch.min(total - published) {
            let event = feed.next_event(stamp);
            writer.write(&event);
            if all.capacity() > 0 {
                all.push(event);
            }
            published += 1;
        }
        writer.publish();
    }
    all
}

fn thread_cpu() -> Duration {
    // SAFETY: a zeroed rusage is a valid out-parameter; RUSAGE_THREAD names the calling thread.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage
    };
    let time = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.metadata().ok())
                .map(|meta| meta.len())
                .sum()
        })
        .unwrap_or(0)
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the directory")
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.to_string_lossy().ends_with(".dbn.zst"))
        .collect();
    files.sort();
    files
}

fn count_back(dir: &Path) -> u64 {
    let mut replay = Replay::open(&recordings(dir)).expect("the recordings open");
    let mut count = 0;
    while let Some(next) = replay.next_event() {
        next.expect("no damage");
        count += 1;
    }
    count
}

fn read_back(dir: &Path) -> Vec<Event> {
    let mut replay = Replay::open(&recordings(dir)).expect("the recordings open");
    let mut events = Vec::new();
    while let Some(next) = replay.next_event() {
        events.push(next.expect("no damage"));
    }
    events
}

struct RateResult {
    target: f64,
    reached: f64,
    published: u64,
    recorded: u64,
    overruns: u64,
    missed: u64,
    bytes: u64,
    cpu: Duration,
    wall: Duration,
    flush_latency: Histogram<u64>,
    read_back: u64,
    gaps: u64,
    published_events: Vec<Event>,
    recorded_events: Vec<Event>,
}

/// One paced run: a writer thread at `rate` for `seconds`, the recorder on this thread.
fn run_rate(rate: f64, seconds: f64, out: &Path, keep: bool) -> RateResult {
    let bus_dir = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm");
    let bus_path = bus_dir.path().join("record-rate.bus");
    let writer = make_bus(&bus_path);
    let mut client = Client::options()
        .start(Start::Oldest)
        .batch(4096)
        .attach(&bus_path)
        .expect("attach");
    let total = (rate * seconds) as u64;
    let done = Arc::new(AtomicBool::new(false));
    let writer_done = Arc::clone(&done);
    let started = Instant::now();
    let writer_thread = std::thread::spawn(move || {
        let events = publish(writer, rate, total, keep);
        writer_done.store(true, Ordering::Release);
        events
    });
    let mut config = RecorderConfig::new(out);
    config
        .datasets
        .insert("binance-usdm".to_owned(), "BINANCE.USDM".to_owned());
    let mut recorder = Recorder::new(config, SystemClock::default());
    recorder.learn(&directory());
    let cpu_before = thread_cpu();
    let mut flush_latency = Histogram::<u64>::new(3).expect("histogram");
    // Publication times of events handed to the recorder and not yet in a written frame.
    let mut unflushed: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
    let mut handed = 0u64;
    let mut flushed = 0u64;
    let mut note_flushed = |recorder: &Recorder<SystemClock>,
                            handed: u64,
                            unflushed: &mut std::collections::VecDeque<u64>,
                            flushed: &mut u64| {
        let now = realtime_ns();
        let on_disk = handed - recorder.pending_records().min(handed);
        while *flushed < on_disk {
            if let Some(published) = unflushed.pop_front() {
                let _ = flush_latency.record(now.saturating_sub(published).max(1));
            }
            *flushed += 1;
        }
    };
    let mut idle_after_done = 0;
    loop {
        // As `tickwire_record::record_bus` reads: poll, and sleep when idle.
        match client.poll() {
            Ok(Next::Events(events)) => {
                unflushed.extend(events.iter().map(|event| event.header.recv_ts_ns));
                handed += events.len() as u64;
                recorder.record(&events);
            }
            Ok(Next::Overrun { missed, .. }) => recorder.overrun(missed),
            Ok(Next::Idle | Next::Closed) => {
                std::thread::sleep(tickwire_record::run::IDLE_SLEEP);
                if done.load(Ordering::Acquire) {
                    idle_after_done += 1;
                    if idle_after_done > 2 {
                        break;
                    }
                }
            }
            Ok(Next::NewEpoch { .. } | Next::Removed) => {}
            Err(error) => panic!("the bus failed under the recorder: {error}"),
        }
        recorder.tick();
        note_flushed(&recorder, handed, &mut unflushed, &mut flushed);
    }
    recorder.flush();
    note_flushed(&recorder, handed, &mut unflushed, &mut flushed);
    let cpu = thread_cpu() - cpu_before;
    let wall = started.elapsed();
    let stats = recorder.close();
    let published_events = writer_thread.join().expect("the writer");
    let recorded_events = if published_events.is_empty() {
        Vec::new()
    } else {
        read_back(out)
    };
    let read_back = count_back(out);
    RateResult {
        target: rate,
        reached: total as f64 / wall.as_secs_f64(),
        published: total,
        recorded: stats.events,
        overruns: stats.overruns,
        missed: stats.missed,
        bytes: dir_bytes(out),
        cpu,
        wall,
        flush_latency,
        read_back,
        gaps: stats.gaps_written,
        published_events,
        recorded_events,
    }
}

fn check() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let result = run_rate(200_000.0, 1.0, out.path(), true);
    assert_eq!(
        result.overruns, 0,
        "200k events/s must not lap the recorder"
    );
    assert_eq!(result.recorded, result.published);
    assert_eq!(
        result.recorded_events, result.published_events,
        "the files hold exactly the published events"
    );
    println!(
        "check: {} events published, recorded and read back identical",
        result.published
    );
}

fn rates(seconds: f64, rates: &[f64]) {
    println!(
        "| target events/s | reached | overruns (events missed) | recorded | bytes/event on disk | \
         recorder CPU | peak RSS (process) | publication -> frame written p50 / p99 / max |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &rate in rates {
        let out = tempfile::tempdir_in(
            std::env::var_os("RECORD_DIR").unwrap_or_else(|| "/var/tmp".into()),
        )
        .expect("a directory on disk");
        let result = run_rate(rate, seconds, out.path(), false);
        // The check of every timed run: everything published is on disk, less what an
        // overrun reported (the recorder's gap records are counted in `recorded` too).
        assert_eq!(
            result.recorded + result.missed,
            result.published,
            "every event is recorded or reported missed"
        );
        assert_eq!(
            result.read_back,
            result.recorded + result.gaps,
            "the files hold them"
        );
        let latency = &result.flush_latency;
        println!(
            "| {:.2} M | {:.2} M | {} ({}) | {} | {:.1} | {:.0}% of a core | {} MiB | {:.1} / {:.1} / {:.1} ms |",
            result.target / 1e6,
            result.reached / 1e6,
            result.overruns,
            result.missed,
            result.recorded,
            result.bytes as f64 / result.recorded.max(1) as f64,
            100.0 * result.cpu.as_secs_f64() / result.wall.as_secs_f64(),
            peak_rss_kib() / 1024,
            latency.value_at_quantile(0.5) as f64 / 1e6,
            latency.value_at_quantile(0.99) as f64 / 1e6,
            latency.max() as f64 / 1e6,
        );
    }
}

fn sqlite(events: u64) {
    let mut feed = Feed::new();
    let base = realtime_ns();
    let all: Vec<Event> = (0..events)
        .map(|n| feed.next_event(base + n * 500))
        .collect();

    // The recorder from memory: encode, frame, compress, write.
    let out = tempfile::tempdir_in("/var/tmp").expect("a directory on disk");
    let mut config = RecorderConfig::new(out.path());
    config
        .datasets
        .insert("binance-usdm".to_owned(), "BINANCE.USDM".to_owned());
    let mut recorder = Recorder::new(config, SystemClock::default());
    recorder.learn(&directory());
    let started = Instant::now();
    for batch in all.chunks(4096) {
        recorder.record(batch);
        recorder.tick();
    }
    let stats = recorder.close();
    let recorder_time = started.elapsed();
    assert_eq!(
        read_back(out.path()),
        all,
        "the recorder's files hold the events"
    );
    let recorder_bytes = dir_bytes(out.path());

    // SQLite: the event's fields as columns, WAL, batched inserts.
    let db_dir = tempfile::tempdir_in("/var/tmp").expect("a directory on disk");
    let db_path = db_dir.path().join("events.sqlite");
    let mut db = rusqlite::Connection::open(&db_path).expect("open");
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE events (ts_event INTEGER, ts_recv INTEGER, seq INTEGER, instrument INTEGER,
           venue INTEGER, kind INTEGER, flags INTEGER, w0 INTEGER, w1 INTEGER, w2 INTEGER, w3 INTEGER);",
    )
    .expect("schema");
    let started = Instant::now();
    for batch in all.chunks(4096) {
        let tx = db.transaction().expect("begin");
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .expect("prepare");
            for event in batch {
                let header = &event.header;
                let words = event.payload_words();
                insert
                    .execute(rusqlite::params![
                        header.exchange_ts_ns as i64,
                        header.recv_ts_ns as i64,
                        header.venue_seq as i64,
                        header.instrument_id,
                        header.venue_id,
                        header.kind as u8,
                        header.flags,
                        words[0] as i64,
                        words[1] as i64,
                        words[2] as i64,
                        words[3] as i64,
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    let sqlite_time = started.elapsed();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM events", [], |row| row.get(0))
        .expect("count");
    assert_eq!(rows as u64, events, "SQLite holds every event");
    drop(db);
    let sqlite_bytes = dir_bytes(db_dir.path());
    let recorder_rate = stats.events as f64 / recorder_time.as_secs_f64();
    let sqlite_rate = events as f64 / sqlite_time.as_secs_f64();
    println!("| writer | events | events/s | bytes/event on disk |");
    println!("|---|---|---|---|");
    println!(
        "| tickwire recorder (DBN, zstd 1) | {events} | {:.2} M | {:.1} |",
        recorder_rate / 1e6,
        recorder_bytes as f64 / events as f64
    );
    println!(
        "| rusqlite (WAL, synchronous=NORMAL, 4096 rows per transaction) | {events} | {:.3} M | {:.1} |",
        sqlite_rate / 1e6,
        sqlite_bytes as f64 / events as f64
    );
    println!();
    println!(
        "recorder / SQLite: {:.1}x the rate, {:.1}x fewer bytes",
        recorder_rate / sqlite_rate,
        sqlite_bytes as f64 / recorder_bytes.max(1) as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut seconds = 5.0;
    let mut events = 2_000_000;
    let mut positional = Vec::new();
    let mut iter = args.iter().skip(1);
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = iter
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds S")
            }
            "--events" => {
                events = iter
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--events N")
            }
            other => positional.push(other.parse::<f64>().expect("a rate in events/s")),
        }
    }
    match args.first().map(String::as_str) {
        Some("check") => check(),
        Some("rates") => rates(seconds, &positional),
        Some("sqlite") => sqlite(events),
        _ => {
            eprintln!(
                "usage: record-rate check | rates [--seconds S] RATE... | sqlite [--events N]"
            );
            std::process::exit(2);
        }
    }
}
