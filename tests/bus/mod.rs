//! The bus across processes: writers and readers as separate processes (this test binary run
//! again in a child role, `child`), each fault asserting exactly what must happen. Until the
//! appliance writes the bus, the writer is `child`'s `writer` role: a known event sequence at a
//! bounded rate through `BusWriter`.

mod books;
mod faults;
mod tail;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tickwire::event::{Body, Event, EventHeader, EventKind, Side, Trade};
use tickwire::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};
use tickwire_client::{Client, Next, Start};

/// The environment variable that puts this binary in a child role.
const ROLE: &str = "TICKWIRE_BUS_CHILD";
/// Every wait in these tests gives up after this long (a failure, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(20);

/// The event a writer with `marker` writes at `position`: every field derives from both, so a
/// stale or torn event shows.
pub fn event_at(marker: u32, position: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: position,
            recv_ts_ns: position ^ u64::from(marker),
            venue_seq: position,
            instrument_id: marker,
            venue_id: 1,
            kind: EventKind::Trade,
            flags: 0,
        },
        Body::Trade(Trade::new(
            Fixed(position as i64),
            Fixed(i64::from(marker)),
            position,
            Side::Bid,
        )),
    )
}

/// A bus directory in memory when the machine has one (as the appliance's would be).
pub fn bus_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new().prefix("tw-bus-").tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// A child process of this binary in a role, with its `@` lines on a channel.
pub struct ChildRole {
    pub child: Child,
    lines: Receiver<String>,
    name: String,
}

impl ChildRole {
    /// Starts `role` (`writer path=... count=...`; see `child`).
    pub fn spawn(role: &str) -> ChildRole {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "bus::child", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest may have begun the line (`test bus::child ... `) before the role
                // prints: the message is whatever follows the `@`.
                if let Some((_, line)) = line.split_once('@') {
                    if sender.send(line.to_owned()).is_err() {
                        return;
                    }
                }
            }
        });
        ChildRole {
            child,
            lines,
            name: role.to_owned(),
        }
    }

    /// The next `@` line, which must start with `prefix`.
    pub fn expect(&self, prefix: &str) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) if line.starts_with(prefix) => line,
            Ok(line) => panic!("{}: expected {prefix:?}, got {line:?}", self.name),
            Err(RecvTimeoutError::Timeout) => panic!("{}: no {prefix:?} within 20 s", self.name),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("{}: ended before {prefix:?}", self.name)
            }
        }
    }

    /// Waits for the child to end (bounded) and returns its status.
    pub fn finish(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{}: still running after 20 s", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ChildRole {
    fn drop(&mut self) {
        // A test that failed half-way leaves no child behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a reader saw, flattened for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// (marker, position) of an event as `event_at` made it; anything else fails at once.
    Event(u32, u64),
    Overrun(u64),
    Epoch(u64),
    Closed,
    Removed,
}

/// Polls `client` (sleeping when idle) until `done` says the transcript is complete.
pub fn read_until(client: &mut Client, done: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while !done(&seen) {
        assert!(
            Instant::now() < deadline,
            "not done within 20 s: {:?}",
            tail_of(&seen)
        );
        match client.wait(Duration::from_millis(20)).unwrap() {
            Next::Events(events) => {
                for event in events {
                    let (marker, position) = (event.header.instrument_id, event.header.venue_seq);
                    assert_eq!(
                        *event,
                        event_at(marker, position),
                        "a torn or foreign event"
                    );
                    seen.push(Seen::Event(marker, position));
                }
            }
            Next::Overrun { missed } => seen.push(Seen::Overrun(missed)),
            Next::NewEpoch { epoch } => seen.push(Seen::Epoch(epoch)),
            Next::Closed => seen.push(Seen::Closed),
            Next::Removed => seen.push(Seen::Removed),
            Next::Idle => {}
        }
    }
    seen
}

fn tail_of(seen: &[Seen]) -> &[Seen] {
    &seen[seen.len().saturating_sub(5)..]
}

/// `count` events of `marker`, positions `from..from + count`.
pub fn run(marker: u32, from: u64, count: u64) -> Vec<Seen> {
    (from..from + count)
        .map(|position| Seen::Event(marker, position))
        .collect()
}

/// Waits (bounded) until `path` exists.
fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A role's `key=value` words.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
    fn number(&self, key: &str, default: u64) -> u64 {
        self.get(key)
            .map_or(default, |value| value.parse().unwrap())
    }
    fn path(&self, key: &str) -> Option<PathBuf> {
        self.get(key).map(PathBuf::from)
    }
}

/// Not a test: the entry point of the child roles (returns at once without `ROLE`).
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let mut words = role.split_whitespace();
    let name = words.next().unwrap().to_owned();
    let params = Params(
        words
            .map(|word| {
                let (key, value) = word.split_once('=').unwrap();
                (key.to_owned(), value.to_owned())
            })
            .collect(),
    );
    match name.as_str() {
        "writer" => writer_role(&params),
        "reader" => reader_role(&params),
        "truncated-reader" => truncated_reader_role(&params),
        other => panic!("no child role {other}"),
    }
}

/// Makes the bus, waits for `go` (if given), writes `count` events of `marker` in batches of
/// 256 with a pause between batches (a bounded rate), then: waits for `go2` and writes `more`;
/// with `hold=1` stays alive until killed; else drops the writer (the bus reads closed).
fn writer_role(params: &Params) {
    let path = params.path("path").unwrap();
    let marker = params.number("marker", 1) as u32;
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(params.number("capacity", 65536), 16).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, params.number("epoch", 1), 0).unwrap();
    writer
        .add_instrument(&DirectoryEntry {
            instrument_id: marker,
            venue_id: 1,
            venue: "sim".into(),
            symbol: format!("SYM{marker}"),
            venue_symbol: format!("sym{marker}"),
        })
        .unwrap();
    println!("@created");
    let pause = Duration::from_micros(params.number("pause_us", 200));
    let mut write = |from: u64, count: u64| {
        for position in from..from + count {
            writer.write(&event_at(marker, position));
            if position % 256 == 255 {
                writer.publish();
                std::thread::sleep(pause);
            }
        }
        writer.publish();
    };
    if let Some(go) = params.path("go") {
        wait_for_file(&go);
    }
    let count = params.number("count", 1000);
    write(0, count);
    println!("@written {count}");
    if let Some(go) = params.path("go2") {
        wait_for_file(&go);
        let more = params.number("more", 0);
        write(count, more);
        println!("@written {}", count + more);
    }
    if params.number("hold", 0) == 1 {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    drop(writer);
}

/// `threads` clients, each attached from the oldest event, each reading until it has `count`
/// events of `marker` (every one checked, no overrun allowed); `@attached N` once all are
/// attached, `@progress` once the first has read an event, `@read events=N missed=M` per client.
fn reader_role(params: &Params) {
    let path = params.path("path").unwrap();
    let threads = params.number("threads", 1);
    let count = params.number("count", 1000);
    let marker = params.number("marker", 1) as u32;
    let clients: Vec<Client> = (0..threads)
        .map(|_| {
            Client::options()
                .start(Start::Oldest)
                .attach_wait(&path, PATIENCE)
                .unwrap()
        })
        .collect();
    println!("@attached {threads}");
    let progress = std::sync::Once::new();
    std::thread::scope(|scope| {
        for mut client in clients {
            let progress = &progress;
            scope.spawn(move || {
                let (mut read, mut missed) = (0u64, 0u64);
                while read < count {
                    match client.wait(Duration::from_millis(50)).unwrap() {
                        Next::Events(events) => {
                            for event in events {
                                assert_eq!(*event, event_at(marker, read));
                                read += 1;
                            }
                            progress.call_once(|| println!("@progress"));
                        }
                        Next::Overrun { missed: lost } => missed += lost,
                        Next::NewEpoch { .. } | Next::Removed => panic!("the bus changed"),
                        Next::Closed | Next::Idle => {}
                    }
                }
                println!("@read events={read} missed={missed}");
            });
        }
    });
}

/// Reads `count` events, says `@ready`, waits for `go` (the parent truncates the file
/// meanwhile), then polls until the error comes and prints it as `@error <message>`.
fn truncated_reader_role(params: &Params) {
    let path = params.path("path").unwrap();
    let count = params.number("count", 100);
    let mut client = Client::options()
        .start(Start::Oldest)
        .attach_wait(&path, PATIENCE)
        .unwrap();
    let seen = read_until(&mut client, |seen| seen.len() as u64 >= count);
    assert_eq!(seen, run(1, 0, count));
    println!("@ready");
    wait_for_file(&params.path("go").unwrap());
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(Instant::now() < deadline, "no error within 20 s");
        match client.poll() {
            Err(error) => {
                println!("@error {error}");
                // The client goes on: it waits for a new bus and reads nothing stale.
                assert!(matches!(client.poll(), Ok(Next::Idle)));
                return;
            }
            Ok(Next::Events(events)) => panic!("events from a truncated bus: {events:?}"),
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}
