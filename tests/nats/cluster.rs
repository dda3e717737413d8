//! A three-server NATS cluster across network namespaces: the servers in three, the bridge (the
//! appliance's side) in a fourth, two consumers in two more, all joined by veth pairs to a Linux
//! bridge in a hub namespace. The server the bridge is connected to is killed mid-stream: both
//! consumers go on, each reports exactly the events it lost, none comes twice.
//!
//! The test makes every namespace, link and process itself, with names unique to this run, and
//! removes them all when it ends, failed or not (`Topology`'s `Drop`). It needs root and `ip`
//! (iproute2); without them it skips with a printed reason, unless `TICKWIRE_REQUIRE_NATS=1`.
//! The consumers are `NatsClient`s on threads of this test that entered their namespace
//! (`setns`), so their network threads live there too.

use super::stream::{Feed, INSTRUMENTS};
use super::{bus_dir, bus_writer, nats_server_binary, PATIENCE};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::event::Body;
use tickwire_client::Next;
use tickwire_nats::bridge::parse_servers;
use tickwire_nats::{NatsClient, NatsOptions};

const SUBNET: &str = "10.77.0";
const SERVERS: [u8; 3] = [11, 12, 13];
const APPLIANCE: u8 = 20;
const CONSUMERS: [u8; 2] = [31, 32];

/// Runs `ip` with `args`; panics with its stderr when it fails.
fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The namespaces, links and processes of one run; all removed on drop.
struct Topology {
    prefix: String,
    namespaces: Vec<String>,
    processes: Vec<(String, Child)>,
}

impl Topology {
    fn hub(&self) -> String {
        format!("{}h", self.prefix)
    }

    fn node(&self, host: u8) -> String {
        format!("{}n{host}", self.prefix)
    }

    /// The hub with its bridge device, and one namespace per host, each with a veth to the hub.
    fn build() -> Topology {
        // Interface names have at most 15 bytes: `tw` + 5 digits + `v` + 2 digits + a side.
        let prefix = format!("tw{:05}", std::process::id() % 100_000);
        let mut topology = Topology {
            prefix,
            namespaces: Vec::new(),
            processes: Vec::new(),
        };
        let hub = topology.hub();
        ip(&["netns", "add", &hub]);
        topology.namespaces.push(hub.clone());
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for host in SERVERS.iter().chain([&APPLIANCE]).chain(&CONSUMERS) {
            let node = topology.node(*host);
            ip(&["netns", "add", &node]);
            topology.namespaces.push(node.clone());
            let hub_end = format!("{}v{host}h", topology.prefix);
            let node_end = format!("{}v{host}n", topology.prefix);
            ip(&[
                "link", "add", &hub_end, "netns", &hub, "type", "veth", "peer", "name", &node_end,
                "netns", &node,
            ]);
            ip(&["-n", &hub, "link", "set", &hub_end, "master", "br0"]);
            ip(&["-n", &hub, "link", "set", &hub_end, "up"]);
            ip(&["-n", &node, "link", "set", "lo", "up"]);
            let address = format!("{SUBNET}.{host}/24");
            ip(&["-n", &node, "addr", "add", &address, "dev", &node_end]);
            ip(&["-n", &node, "link", "set", &node_end, "up"]);
        }
        topology
    }

    /// Starts `program` in a host's namespace.
    fn spawn(&mut self, host: u8, label: &str, program: &Path, args: &[String]) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.node(host)])
            .arg(program)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ip netns exec starts");
        self.processes.push((label.to_owned(), child));
    }

    /// Kills the process started under `label` (SIGKILL).
    fn kill(&mut self, label: &str) {
        if let Some(at) = self.processes.iter().position(|(name, _)| name == label) {
            let (_, mut child) = self.processes.remove(at);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
        for namespace in self.namespaces.iter().rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .status();
        }
    }
}

/// Runs `work` on a thread that entered the namespace `name` (threads it starts are there too).
fn in_namespace<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = PathBuf::from("/run/netns").join(name);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the namespace's file");
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on an open namespace file; it changes only this thread's network
        // namespace, which the thread keeps to its end.
        let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
        work()
    })
}

/// A GET to `host:port` from inside its namespace; the body.
fn get(namespace: &str, host: u8, port: u16, path: &str) -> String {
    let path = path.to_owned();
    in_namespace(namespace, move || {
        let Ok(mut stream) = TcpStream::connect((format!("{SUBNET}.{host}").as_str(), port)) else {
            return String::new();
        };
        let _ = write!(stream, "GET {path} HTTP/1.0\r\n\r\n");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    })
    .join()
    .unwrap_or_default()
}

fn url(host: u8) -> String {
    format!("nats://{SUBNET}.{host}:4222")
}

/// What a consumer thread saw, published as it goes (the last trade id + 1 of each
/// instrument) and in full at the end.
struct ConsumerView {
    next: [AtomicU64; INSTRUMENTS as usize + 1],
    stop: AtomicBool,
}

#[derive(Debug, Default)]
struct Tally {
    positions: Vec<Vec<u64>>,
    missed: u64,
    duplicates: u64,
}

fn consume(servers: String, view: Arc<ConsumerView>) -> Tally {
    let mut options = NatsOptions::new(
        parse_servers(&servers).unwrap(),
        vec!["tickwire.*.*.*.trade".into()],
    );
    options.max_reconnect_delay = Duration::from_millis(200);
    let mut client = NatsClient::connect(options).unwrap();
    let mut tally = Tally {
        positions: vec![Vec::new(); INSTRUMENTS as usize + 1],
        ..Tally::default()
    };
    let started = Instant::now();
    while !view.stop.load(Ordering::Relaxed) && started.elapsed() < PATIENCE * 3 {
        match client
            .wait(Duration::from_millis(50))
            .expect("the client runs")
        {
            Next::Events(events) => {
                for event in events {
                    let Body::Trade(trade) = event.body() else {
                        continue;
                    };
                    let instrument = event.header.instrument_id as usize;
                    tally.positions[instrument].push(trade.trade_id);
                    view.next[instrument].store(trade.trade_id + 1, Ordering::Relaxed);
                }
            }
            Next::Overrun { missed } => tally.missed += missed,
            Next::NewEpoch { .. } | Next::Closed | Next::Removed | Next::Idle => {}
        }
    }
    tally.duplicates = client.counters().duplicates;
    tally
}

/// Every instrument's trades strictly increasing, and received + reported missed = every trade
/// from the first seen to the last.
fn assert_exact(label: &str, tally: &Tally) {
    let (mut span, mut received) = (0, 0);
    for (instrument, positions) in tally.positions.iter().enumerate().skip(1) {
        assert!(
            !positions.is_empty(),
            "{label}: nothing of instrument {instrument}"
        );
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{label}: instrument {instrument} repeated or reordered a trade"
        );
        span += positions.last().unwrap() - positions[0] + 1;
        received += positions.len() as u64;
    }
    assert_eq!(
        received + tally.missed,
        span,
        "{label}: received {received} + missed {} != sent {span}",
        tally.missed
    );
    assert_eq!(tally.duplicates, 0, "{label}");
}

fn can_make_namespaces() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let has_ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if root && has_ip {
        return true;
    }
    let required = std::env::var("TICKWIRE_REQUIRE_NATS").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_NATS=1 but no root or no ip (iproute2)"
    );
    eprintln!("SKIPPED: network namespaces need root and ip (iproute2)");
    false
}

#[test]
fn a_cluster_across_namespaces_loses_a_server_and_its_consumers_go_on_exactly() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    if !can_make_namespaces() {
        return;
    }
    let mut topology = Topology::build();
    let routes: Vec<String> = SERVERS
        .iter()
        .map(|host| format!("nats://{SUBNET}.{host}:6222"))
        .collect();
    for host in SERVERS {
        let args: Vec<String> = [
            "-a".into(),
            format!("{SUBNET}.{host}"),
            "-p".into(),
            "4222".into(),
            "-m".into(),
            "8222".into(),
            "--cluster_name".into(),
            "tickwire".into(),
            "--cluster".into(),
            format!("nats://{SUBNET}.{host}:6222"),
            "--routes".into(),
            routes.join(","),
        ]
        .into();
        topology.spawn(host, &format!("server{host}"), &binary, &args);
    }
    // The cluster is formed when every server has routes to both others.
    let started = Instant::now();
    for host in SERVERS {
        let node = topology.node(host);
        while !get(&node, host, 8222, "/routez").contains("\"num_routes\": 2") {
            assert!(started.elapsed() < PATIENCE, "the cluster never formed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 20),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let all: Vec<String> = SERVERS.iter().map(|host| url(*host)).collect();
    let bridge_args: Vec<String> = [
        "bridge".into(),
        "nats".into(),
        "--bus".into(),
        path.display().to_string(),
        "--url".into(),
        all.join(","),
        "--appliance".into(),
        "site-ns".into(),
        "--stats-interval".into(),
        "0".into(),
    ]
    .into();
    topology.spawn(
        APPLIANCE,
        "bridge",
        Path::new(env!("CARGO_BIN_EXE_tickwire")),
        &bridge_args,
    );
    // Each consumer is given the servers in its own order.
    let views: Vec<Arc<ConsumerView>> = CONSUMERS
        .iter()
        .map(|_| {
            Arc::new(ConsumerView {
                next: Default::default(),
                stop: AtomicBool::new(false),
            })
        })
        .collect();
    let consumers: Vec<_> = CONSUMERS
        .iter()
        .zip(&views)
        .enumerate()
        .map(|(index, (host, view))| {
            let mut order = all.clone();
            order.rotate_left(index + 1);
            let view = Arc::clone(view);
            in_namespace(&topology.node(*host), move || {
                consume(order.join(","), view)
            })
        })
        .collect();
    let caught_up = |feed: &Feed| {
        views.iter().all(|view| {
            (1..=INSTRUMENTS as usize).all(|i| view.next[i].load(Ordering::Relaxed) >= feed.next[i])
        })
    };
    // Until both consumers have trades of every instrument.
    let started = Instant::now();
    while !views
        .iter()
        .all(|view| (1..=INSTRUMENTS as usize).all(|i| view.next[i].load(Ordering::Relaxed) > 0))
    {
        assert!(
            started.elapsed() < PATIENCE,
            "no trades reached both consumers"
        );
        feed.write(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        feed.write(200);
        std::thread::sleep(Duration::from_millis(10));
    }
    // Kill the server the bridge is connected to.
    let bridge_server = SERVERS
        .into_iter()
        .find(|host| get(&topology.node(*host), *host, 8222, "/connz").contains("tickwire-bridge"))
        .expect("one server has the bridge's connection");
    topology.kill(&format!("server{bridge_server}"));
    for _ in 0..100 {
        feed.write(200);
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    while !caught_up(&feed) {
        assert!(
            started.elapsed() < PATIENCE,
            "the consumers never caught up"
        );
        feed.write(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    for view in &views {
        view.stop.store(true, Ordering::Relaxed);
    }
    for (consumer, host) in consumers.into_iter().zip(CONSUMERS) {
        let tally = consumer.join().expect("the consumer thread");
        eprintln!(
            "consumer {host}: {} trades received, {} reported missed",
            tally.positions.iter().map(Vec::len).sum::<usize>(),
            tally.missed
        );
        assert_exact(&format!("consumer {host}"), &tally);
    }
}
