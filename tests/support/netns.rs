//! Network namespaces for tests and benchmarks that need several hosts on one machine: a hub
//! namespace holding a Linux bridge, and one namespace per host joined to it by a veth pair, with
//! addresses in `SUBNET` that exist only inside these namespaces. Everything is named after this
//! process's id and removed when the `Topology` is dropped, failed run or not. Needs root and
//! `ip` (iproute2). Shared by `tests/nats/cluster.rs` and `benches/nats.rs` (included there with
//! `#[path]`).

#![allow(dead_code, reason = "each includer uses a part")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The hosts' subnet (a /24): host `n` is `SUBNET.n`.
pub const SUBNET: &str = "10.77.0";

/// Whether this process may make namespaces: root, with `ip`.
pub fn available() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success())
}

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
pub struct Topology {
    prefix: String,
    namespaces: Vec<String>,
    processes: Vec<(String, Child)>,
}

impl Topology {
    fn hub(&self) -> String {
        format!("{}h", self.prefix)
    }

    /// The namespace of `host`.
    pub fn node(&self, host: u8) -> String {
        format!("{}n{host}", self.prefix)
    }

    /// The hub with its bridge device, and one namespace per host, each with a veth to the hub.
    pub fn build(hosts: &[u8]) -> Topology {
        // Interface names have at most 15 bytes: `tw` + 5 digits + `v` + 3 digits + a side.
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
        for host in hosts {
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

    /// Starts `program` in a host's namespace, under `label`.
    pub fn spawn(&mut self, host: u8, label: &str, program: &Path, args: &[String]) {
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
    pub fn kill(&mut self, label: &str) {
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
pub fn in_namespace<T: Send + 'static>(
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

/// A GET to `SUBNET.host:port` from inside `namespace`; the body (empty when nothing answers).
pub fn get(namespace: &str, host: u8, port: u16, path: &str) -> String {
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

/// Three NATS servers, one per host, clustered (client port 4222, routes 6222, monitoring
/// 8222); returns once every server has routes to both others.
pub fn start_cluster(topology: &mut Topology, binary: &Path, servers: [u8; 3]) {
    let routes: Vec<String> = servers
        .iter()
        .map(|host| format!("nats://{SUBNET}.{host}:6222"))
        .collect();
    for host in servers {
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
        topology.spawn(host, &format!("server{host}"), binary, &args);
    }
    let started = std::time::Instant::now();
    for host in servers {
        let node = topology.node(host);
        while !get(&node, host, 8222, "/routez").contains("\"num_routes\": 2") {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "the cluster never formed"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Two namespaces joined by one veth pair, each end addressed in `10.<subnet>.0.0/24` (the
/// sender `.1`, the receiver `.2`) and routing multicast (224.0.0.0/4) over it. Named after
/// this process, a tag and a counter, so tests in parallel threads each get their own; removed
/// on drop.
pub struct Pair {
    pub sender: String,
    pub receiver: String,
    pub sender_veth: String,
    pub receiver_veth: String,
    pub sender_address: std::net::Ipv4Addr,
    pub receiver_address: std::net::Ipv4Addr,
}

fn try_ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|error| format!("ip: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Pair {
    pub fn create(tag: &str, subnet: u8) -> Result<Pair, String> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Interface names: at most 15 bytes.
        let id = format!("{}{tag}{n}", std::process::id() % 100_000);
        let pair = Pair {
            sender: format!("tws{id}"),
            receiver: format!("twr{id}"),
            sender_veth: format!("vs{id}"),
            receiver_veth: format!("vr{id}"),
            sender_address: std::net::Ipv4Addr::new(10, subnet, 0, 1),
            receiver_address: std::net::Ipv4Addr::new(10, subnet, 0, 2),
        };
        try_ip(&["netns", "add", &pair.sender])?;
        try_ip(&["netns", "add", &pair.receiver])?;
        try_ip(&[
            "link",
            "add",
            &pair.sender_veth,
            "netns",
            &pair.sender,
            "type",
            "veth",
            "peer",
            "name",
            &pair.receiver_veth,
            "netns",
            &pair.receiver,
        ])?;
        for (namespace, veth, address) in [
            (&pair.sender, &pair.sender_veth, pair.sender_address),
            (&pair.receiver, &pair.receiver_veth, pair.receiver_address),
        ] {
            try_ip(&[
                "-n",
                namespace,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                veth,
            ])?;
            try_ip(&["-n", namespace, "link", "set", veth, "up"])?;
            try_ip(&["-n", namespace, "link", "set", "lo", "up"])?;
            try_ip(&["-n", namespace, "route", "add", "224.0.0.0/4", "dev", veth])?;
        }
        Ok(pair)
    }

    /// What `ip -d link show` says of the receiver's end (an attached XDP program shows as
    /// `prog/xdp`).
    pub fn receiver_link(&self) -> String {
        let output = Command::new("ip")
            .args([
                "-n",
                &self.receiver,
                "-d",
                "link",
                "show",
                "dev",
                &self.receiver_veth,
            ])
            .output()
            .expect("ip runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = try_ip(&["netns", "del", &self.sender]);
        let _ = try_ip(&["netns", "del", &self.receiver]);
    }
}

/// The line the namespace benchmarks start with: CPUs, kernel, load average.
pub fn host_line() -> String {
    format!(
        "machine: {} CPUs, kernel {}, load {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Pins the calling thread (and the threads it starts after) to `core`.
pub fn pin(core: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Collects a child's output as it comes, line by line, into a string other threads read while
/// it runs (a log to wait on); the thread ends with the stream.
pub fn collect_lines(
    stream: impl std::io::Read + Send + 'static,
) -> (
    std::sync::Arc<std::sync::Mutex<String>>,
    std::thread::JoinHandle<()>,
) {
    use std::io::BufRead;
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        })
    };
    (log, reader)
}
