//! The bus across processes: writers and readers as separate processes (this test binary run
//! again in a child role, `child`), each fault asserting exactly what must happen. Until the
//! appliance writes the bus, the writer is `child`'s `writer` role: a known event sequence at a
//! bounded rate through `BusWriter`.

mod books;
mod faults;
mod owners;
mod tail;
mod unit;

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

/// Who a child process runs as: the user, its group, its supplementary groups and its umask,
/// set in the child (as root) before it runs this binary.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub umask: u32,
}

impl Credentials {
    /// Sets them on `command`: supplementary groups, then the group, then the user (root is
    /// needed for each; afterwards the child has no way back).
    pub fn apply(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        let groups: Vec<libc::gid_t> = self.groups.clone();
        let (uid, gid, umask) = (self.uid, self.gid, self.umask as libc::mode_t);
        // SAFETY: between fork and exec the closure makes only system calls (setgroups, setgid,
        // setuid, umask) on memory made before the fork; it allocates nothing, takes no lock.
        unsafe {
            command.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                libc::umask(umask);
                Ok(())
            });
        }
    }
}

/// Whether this process is root: the tests that run readers and writers as other users need it.
pub fn is_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether any user may run `path`: every folder above it searchable by others, the file
/// readable and executable by them.
fn others_can_run(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .map(|metadata| metadata.permissions().mode())
            .unwrap_or(0)
    };
    mode(path) & 0o005 == 0o005 && path.ancestors().skip(1).all(|dir| mode(dir) & 0o001 != 0)
}

/// This test binary, where a child running as another user can run it: itself when its path
/// allows, else a copy in `dir` (which others must be able to search).
pub fn binary_for_others(dir: &Path) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    if others_can_run(&exe) {
        return exe;
    }
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.join("tickwire-tests");
    if !copy.exists() {
        std::fs::copy(&exe, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
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
        ChildRole::spawn_with(role, None)
    }

    /// Starts `role` as another user: `binary` (from [`binary_for_others`]) with `who`'s
    /// credentials.
    pub fn spawn_as(role: &str, binary: &Path, who: &Credentials) -> ChildRole {
        ChildRole::spawn_with(role, Some((binary, who)))
    }

    fn spawn_with(role: &str, as_user: Option<(&Path, &Credentials)>) -> ChildRole {
        let mut command = match as_user {
            Some((binary, who)) => {
                let mut command = Command::new(binary);
                who.apply(&mut command);
                // Its working folder need not be one that user may enter.
                command.current_dir("/");
                command
            }
            None => Command::new(std::env::current_exe().unwrap()),
        };
        let mut child = command
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
            Next::Overrun { missed, .. } => seen.push(Seen::Overrun(missed)),
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
        "denied-reader" => denied_reader_role(&params),
        "stray-sigbus" => stray_sigbus_role(&params),
        other => panic!("no child role {other}"),
    }
}

/// Makes the bus (with `group=GID`, of that group; with `socket=1`, its request socket too),
/// waits for `go` (if given), writes `count` events of `marker` in batches of 256 with a pause
/// between batches (a bounded rate), then: waits for `go2` and writes `more`; with `socket=1`
/// waits for one snapshot request and prints it (`@request V I`); with `hold=1` stays alive
/// until killed; else drops the writer (the bus reads closed).
fn writer_role(params: &Params) {
    let path = params.path("path").unwrap();
    let marker = params.number("marker", 1) as u32;
    let group = params.get("group").map(|gid| gid.parse().unwrap());
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(params.number("capacity", 65536), 16).unwrap(),
        group,
    };
    let mut writer = BusWriter::create(&options, params.number("epoch", 1), 0).unwrap();
    let socket = (params.number("socket", 0) == 1)
        .then(|| tickwire_bus::bind_request_socket(&path, group).unwrap());
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
    if let Some(socket) = socket {
        socket.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut buffer = [0u8; 64];
        let received = socket.recv(&mut buffer).expect("a snapshot request");
        let request = tickwire_bus::SnapshotRequest::from_bytes(&buffer[..received]).unwrap();
        println!("@request {} {}", request.venue_id, request.instrument_id);
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
/// attached, `@progress` once the first has read an event, `@read events=N missed=M` per client;
/// with `request=1`, then one snapshot request for venue 1, instrument `marker` (`@requested`).
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
                        Next::Overrun { missed: lost, .. } => missed += lost,
                        Next::NewEpoch { .. } | Next::Removed => panic!("the bus changed"),
                        Next::Closed | Next::Idle => {}
                    }
                }
                println!("@read events={read} missed={missed}");
                if params.number("request", 0) == 1 {
                    client.request_snapshots(1, marker).unwrap();
                    println!("@requested");
                }
            });
        }
    });
}

/// A user who may not read the bus: tries to attach and to send a snapshot request, and prints
/// what each was told (`@attach <error>`, `@request <error>`); either succeeding fails the role.
fn denied_reader_role(params: &Params) {
    let path = params.path("path").unwrap();
    match Client::attach(&path) {
        Ok(_) => panic!("attached to a bus this user may not read"),
        Err(error) => println!("@attach {error}"),
    }
    let socket = std::os::unix::net::UnixDatagram::unbound().unwrap();
    let request = tickwire_bus::SnapshotRequest {
        venue_id: 1,
        instrument_id: 1,
    };
    match socket.send_to(
        &request.to_bytes(),
        tickwire_bus::request_socket_path(&path),
    ) {
        Ok(_) => panic!("sent a request to a bus this user may not use"),
        Err(error) => println!("@request {error}"),
    }
}

/// With a bus reader open (so the bus's SIGBUS handler is installed), a SIGBUS that has nothing
/// to do with the bus: `kind=mapping` touches a page of a mapping of its own whose file was
/// truncated. It must kill the process, as it would without the handler (`@armed` first).
fn stray_sigbus_role(params: &Params) {
    let path = params.path("path").unwrap();
    let _reader = tickwire_bus::BusReader::open(&path, Start::Oldest, 16).unwrap();
    let own = params.path("file").unwrap();
    println!("@armed");
    match params.get("kind").unwrap() {
        "mapping" => {
            use std::os::fd::AsRawFd;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&own)
                .unwrap();
            file.set_len(1 << 16).unwrap();
            // SAFETY: a fresh shared mapping of a file this role owns; touched below only
            // through a volatile read, after the file was cut to nothing (the fault under test).
            unsafe {
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    1 << 16,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                );
                assert_ne!(base, libc::MAP_FAILED);
                file.set_len(0).unwrap();
                let value = std::ptr::read_volatile(base.cast::<u8>().add(8192));
                println!("@survived {value}");
            }
        }
        other => panic!("no kind {other}"),
    }
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
