//! The event stream through NATS with real `nats-server` processes on loopback ports the tests
//! choose: the bridge (`tickwire bridge nats`, a process of its own) publishing a bus that the
//! test writes with `BusWriter`, consumers reading it with `tickwire_nats::NatsClient` and
//! `tickwire tail --nats`.
//!
//! Without the `nats-server` binary (Debian's `nats-server` package) the tests skip with a
//! printed reason, unless `TICKWIRE_REQUIRE_NATS=1` (set by `.ci/run`), which makes that a
//! failure.

mod appliance;
mod cli;
mod cluster;
mod python;
mod stream;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::event::{Body, Event, EventHeader, EventKind, Side, Trade};
use tickwire::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};

/// Every wait in these tests gives up after this long (a failure, not a timing assertion).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The `nats-server` binary, or `None` (with the reason printed) when the test must skip.
pub fn nats_server_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("nats-server"))
            .find(|path| path.is_file())
    });
    if found.is_none() {
        let required = std::env::var("TICKWIRE_REQUIRE_NATS").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_NATS=1 but no nats-server binary (apt-get install nats-server)"
        );
        crate::support::skip::skipped("no nats-server binary (apt-get install nats-server)");
    }
    found
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// One `nats-server` on a loopback port; killed when dropped.
pub struct NatsServer {
    binary: PathBuf,
    pub port: u16,
    /// Arguments beyond the address and port (JetStream, monitoring).
    extra: Vec<String>,
    child: Option<Child>,
}

impl NatsServer {
    pub fn start(binary: &Path) -> NatsServer {
        NatsServer::start_with(binary, &[])
    }

    pub fn start_with(binary: &Path, extra: &[String]) -> NatsServer {
        let mut server = NatsServer {
            binary: binary.to_owned(),
            port: free_port(),
            extra: extra.to_vec(),
            child: None,
        };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, on the same port) and waits until it takes connections.
    pub fn restart(&mut self) {
        let child = Command::new(&self.binary)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < PATIENCE, "nats-server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL: whatever it held in flight is lost).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `tickwire bridge nats` reading `bus`; stopped with SIGTERM when dropped.
pub struct BridgeProcess {
    child: Option<Child>,
}

impl BridgeProcess {
    pub fn start(bus: &Path, urls: &str, appliance: &str, extra: &[&str]) -> BridgeProcess {
        let child = Command::new(env!("CARGO_BIN_EXE_tickwire"))
            .args(["bridge", "nats", "--bus"])
            .arg(bus)
            .args([
                "--url",
                urls,
                "--appliance",
                appliance,
                "--stats-interval",
                "0",
            ])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tickwire bridge nats starts");
        BridgeProcess { child: Some(child) }
    }

    /// Stops the bridge with SIGTERM; its exit status and last counters line.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().expect("running");
        stop_child(child)
    }
}

fn stop_child(child: Child) -> (std::process::ExitStatus, String) {
    // SAFETY: kill(2) on the id of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().expect("the bridge ends");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl Drop for BridgeProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_child(child);
        }
    }
}

/// A bus of `capacity` events with `instruments` trades instruments of venue 0 (`sim`, symbols `SYM.<n>`: a `.` the
/// subjects must escape).
pub fn bus_writer(path: &Path, instruments: u32, capacity: u64) -> BusWriter {
    let options = BusOptions {
        path: path.to_owned(),
        geometry: Geometry::new(capacity, 64).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, 77, 0).unwrap();
    for instrument_id in 1..=instruments {
        writer
            .add_instrument(&DirectoryEntry {
                instrument_id,
                venue_id: 0,
                venue: "sim".into(),
                symbol: format!("SYM.{instrument_id}"),
                venue_symbol: format!("sym{instrument_id}"),
            })
            .unwrap();
    }
    writer
}

/// Trade number `position` of `instrument_id`: its trade id is the position, so order, loss and
/// duplicates show.
pub fn trade(instrument_id: u32, position: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: position,
            recv_ts_ns: position,
            venue_seq: position,
            instrument_id,
            venue_id: 0,
            kind: EventKind::Trade,
            flags: 0,
        },
        Body::Trade(Trade::new(
            Fixed(position as i64),
            Fixed(1),
            position,
            Side::Bid,
        )),
    )
}

pub fn bus_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tw-nats-")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .unwrap()
}
