//! The AF_XDP receive path (`net/xdp/`) on a real interface: a veth pair between two network
//! namespaces the test creates, `tickwire xdp-recv` attached to the receiver's end (native mode,
//! copy: veth has no zero-copy), or the network engine's AF_XDP lines polled in this process,
//! datagrams sent by the kernel's UDP stack in the sender's namespace. Root only; without `ip netns` the tests skip with a printed reason, which
//! `TICKWIRE_REQUIRE_NETNS=1` (set by `.ci/run`) turns into a failure.

use crate::support::netns::{in_namespace, Pair};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tickwire");

/// Starts `xdp-recv` in the receiver's namespace with `extra` arguments and waits for its first
/// line (what it attached); returns the child and that line.
fn start(pair: &Pair, wrapper: &[&str], extra: &[&str]) -> (Child, String) {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", &pair.receiver]);
    command.args(wrapper);
    command
        .arg(BIN)
        .args(["xdp-recv", "--interface", &pair.receiver_veth])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("ip netns exec starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("a first line");
    if first.is_empty() {
        let mut error = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut error);
        }
        let _ = child.wait();
        panic!("xdp-recv did not start: {error}");
    }
    // Keep reading in the background so the child never blocks on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    child.stdout = None;
    drop(rest);
    (child, first)
}

fn pair(tag: &str, subnet: u8) -> Option<Pair> {
    crate::support::netns_pair(tag, subnet)
}

fn group(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(239, 38, 1, last)
}

#[test]
fn the_feeds_reach_the_socket_and_everything_else_still_reaches_the_kernel() {
    let Some(pair) = pair("x", 38) else {
        return;
    };
    const N: u64 = 400;
    let feeds = [
        SocketAddrV4::new(group(1), 5000),
        SocketAddrV4::new(group(2), 5002),
    ];
    let mut command = Command::new("ip");
    command
        .args([
            "netns",
            "exec",
            &pair.receiver,
            BIN,
            "xdp-recv",
            "--interface",
        ])
        .arg(&pair.receiver_veth)
        .args([
            "--feed",
            &feeds[0].to_string(),
            "--feed",
            &feeds[1].to_string(),
        ])
        .args(["--count", &(2 * N).to_string(), "--seconds", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("ip netns exec starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("a first line");
    assert!(
        first.contains("af-xdp on") && first.contains("mode"),
        "xdp-recv said: {first}"
    );
    assert!(
        pair.receiver_link().contains("prog/xdp"),
        "no program attached"
    );

    // The receiver's kernel keeps what is not a feed: the same group on another port, and TCP.
    let receiver_address = pair.receiver_address;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let kernel_side = in_namespace(&pair.receiver, move || {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 5001)).expect("bind 5001");
        socket
            .join_multicast_v4(&group(1), &receiver_address)
            .expect("join");
        socket
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let listener = TcpListener::bind((receiver_address, 7038)).expect("listen");
        ready_tx.send(()).unwrap();
        let echo = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).expect("read");
            stream.write_all(&buf).expect("echo");
        });
        let mut buf = [0u8; 2048];
        let mut passed = 0u64;
        // Until every one came, or long after the sender could have sent them all.
        let deadline = Instant::now() + Duration::from_secs(30);
        while passed < N && Instant::now() < deadline {
            if let Ok(len) = socket.recv(&mut buf) {
                assert_eq!(len, 64);
                passed += 1;
            }
        }
        echo.join().expect("echo thread");
        passed
    });
    ready_rx.recv().expect("receiver ready");
    let sender_address = pair.sender_address;
    let sender = in_namespace(&pair.sender, move || {
        let socket = UdpSocket::bind((sender_address, 0)).expect("bind");
        socket.set_multicast_ttl_v4(4).unwrap();
        let mut payload = [0u8; 64];
        for i in 0..N {
            payload[..8].copy_from_slice(&i.to_le_bytes());
            for target in [
                SocketAddrV4::new(group(1), 5000),
                SocketAddrV4::new(group(2), 5002),
                SocketAddrV4::new(group(1), 5001),
            ] {
                socket.send_to(&payload, target).expect("send");
            }
            if i % 50 == 49 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let mut stream = TcpStream::connect((receiver_address, 7038)).expect("TCP connect");
        stream.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        stream.read_exact(&mut back).expect("echo back");
        back
    });
    assert_eq!(&sender.join().expect("sender"), b"hello");
    assert_eq!(kernel_side.join().expect("kernel side"), N);

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "xdp-recv never got every datagram"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "xdp-recv: {rest}");
    let summary = rest
        .lines()
        .find(|line| line.contains("summary"))
        .unwrap_or_else(|| panic!("no summary in {rest}"));
    assert!(
        summary.contains(&format!("datagrams={} ", 2 * N)) && summary.contains("not_a_feed=0"),
        "{summary}"
    );
    // Gone with the process.
    assert!(!pair.receiver_link().contains("prog/xdp"));
}

fn detached_within(pair: &Pair, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !pair.receiver_link().contains("prog/xdp") {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn no_program_stays_attached_after_sigterm_or_kill_9() {
    let Some(pair) = pair("k", 39) else {
        return;
    };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let (mut child, first) = start(&pair, &[], &["--feed", "239.38.2.1:6000"]);
        assert!(first.contains("af-xdp on"), "xdp-recv said: {first}");
        assert!(pair.receiver_link().contains("prog/xdp"));
        // `ip netns exec` execs the command: the child is tickwire itself.
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let status = child.wait().expect("wait");
        assert!(
            detached_within(&pair, Duration::from_secs(5)),
            "a program is still attached after signal {signal} ({status})"
        );
    }
    // A restart right after `kill -9` (as systemd's Restart= would) finds the queue still held
    // by the dead process's socket for a moment: it waits for the kernel to let go.
    let (mut first, _) = start(&pair, &[], &["--feed", "239.38.2.1:6000"]);
    first.kill().expect("kill -9");
    first.wait().expect("wait");
    let (mut second, line) = start(&pair, &[], &["--feed", "239.38.2.1:6000"]);
    assert!(line.contains("af-xdp on"), "the restart said: {line}");
    second.kill().expect("kill -9");
    second.wait().expect("wait");
    assert!(detached_within(&pair, Duration::from_secs(5)));
}

#[test]
fn without_privileges_it_says_which_capabilities_it_needs() {
    let Some(pair) = pair("p", 40) else {
        return;
    };
    // Still uid 0, but with no capability at all.
    let output = Command::new("ip")
        .args(["netns", "exec", &pair.receiver])
        .args([
            "setpriv",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(BIN)
        .args(["xdp-recv", "--interface", &pair.receiver_veth])
        .args(["--feed", "239.38.3.1:7000", "--seconds", "1"])
        .output()
        .expect("setpriv runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "xdp-recv ran without privileges");
    assert!(
        stderr.contains("needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW"),
        "stderr: {stderr}"
    );
    assert!(!pair.receiver_link().contains("prog/xdp"));
}

#[test]
fn check_host_probes_the_interface_and_reports_copy_mode_on_veth() {
    let Some(pair) = pair("h", 42) else {
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/check-host");
    let output = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.receiver,
            script,
            "--json",
            "--xdp-interface",
        ])
        .arg(&pair.receiver_veth)
        .env("TICKWIRE_BIN", BIN)
        .output()
        .expect("check-host runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let item = text
        .lines()
        .find(|line| line.contains("\"af_xdp\""))
        .unwrap_or_else(|| panic!("no af_xdp item in {text}"));
    assert!(
        item.contains("native mode, zero-copy off (copy mode)") && item.contains("1 rx queues"),
        "{item}"
    );
    // The probe left nothing attached.
    assert!(!pair.receiver_link().contains("prog/xdp"));
}

/// The service gets AF_XDP's capabilities only from the drop-in, which `install.sh --af-xdp`
/// installs: the unit alone has none of them.
#[test]
fn the_af_xdp_capabilities_come_only_with_the_drop_in() {
    let repo = env!("CARGO_MANIFEST_DIR");
    let unit = std::fs::read_to_string(format!("{repo}/systemd/tickwire.service")).unwrap();
    let granted: Vec<&str> = unit
        .lines()
        .filter(|line| {
            line.starts_with("AmbientCapabilities=") || line.starts_with("CapabilityBoundingSet=")
        })
        .collect();
    assert_eq!(granted.len(), 2, "the unit's capability lines");
    for line in granted {
        for capability in ["CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW"] {
            assert!(
                !line.contains(capability),
                "the unit itself grants {capability}: {line}"
            );
        }
    }
    let root = std::env::temp_dir().join(format!("tw-xdp-install-{}", std::process::id()));
    let bin = root.join("tickwire");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(&bin, b"").unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let output = Command::new(format!("{repo}/scripts/install.sh"))
        .arg("--destdir")
        .arg(root.join("stage"))
        .args(["--no-user", "--af-xdp", "--bin"])
        .arg(&bin)
        .output()
        .expect("install.sh runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dropin = std::fs::read_to_string(
        root.join("stage/etc/systemd/system/tickwire.service.d/af-xdp.conf"),
    )
    .expect("the drop-in is installed");
    let _ = std::fs::remove_dir_all(&root);
    let line = |key: &str| {
        dropin
            .lines()
            .find(|line| line.starts_with(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in the drop-in"))
            .to_owned()
    };
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        let value = line(key);
        for capability in ["CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_RAW"] {
            assert!(value.contains(capability), "{value}");
        }
    }
    assert!(line("RestrictAddressFamilies").contains("AF_XDP"));
    assert!(line("SystemCallFilter").contains("bpf"));
}

/// The network engine's AF_XDP lines (`DatagramSpec::xdp`): datagrams to line A's and line B's
/// groups arrive as `LineA` and `LineB` frames with their payloads whole and the drop-count
/// head, the slot goes `Open` with the first, and after a warm-up polling and draining
/// allocates nothing (the binary's counting allocator, this thread's only).
#[test]
fn the_engine_reads_af_xdp_lines_into_line_frames_without_allocating() {
    use crate::support::counting_alloc::allocations;
    use tickwire::clock::Clock;
    use tickwire::net::engine::{split_datagram, split_frame, split_tag, FrameKind, NetEngine};
    use tickwire::net::udp::{DatagramSpec, MulticastConfig, XdpLines};
    use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
    use tickwire::ring::frame_ring;
    let Some(pair) = pair("e", 43) else {
        return;
    };
    const PER_LINE: u64 = 3_000;
    const WARM_UP: u64 = 300;
    let lines = [
        SocketAddrV4::new(group(41), 6100),
        SocketAddrV4::new(group(42), 6100),
    ];
    let interface = pair.receiver_veth.clone();
    let address = pair.receiver_address;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_namespace(&pair.receiver, move || {
        let config = TransportConfig::default();
        let (transport, _) =
            Transport::open(BackendChoice::Auto, config, Clock::monotonic()).expect("transport");
        let (producer, mut frames) = frame_ring(16 << 20);
        let wait = WaitMode::Block {
            timeout: Duration::from_millis(2),
        };
        let mut engine = NetEngine::new(transport, producer, wait, config.max_connections);
        let line = |group| {
            Some(MulticastConfig {
                group,
                interface: address,
                source: None,
                rcvbuf: 1 << 20,
            })
        };
        let notes = engine
            .open_datagrams(
                0,
                &DatagramSpec {
                    lines: [line(lines[0]), line(lines[1])],
                    reply: None,
                    xdp: XdpLines::new(&interface, 0, [true, true]),
                },
            )
            .expect("open");
        ready_tx.send(()).unwrap();
        let mut events = Vec::with_capacity(16);
        let mut opened = false;
        let mut by_line = [0u64; 2];
        let mut next = [0u64; 2];
        let mut counted_from = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        while by_line[0] + by_line[1] < 2 * PER_LINE && Instant::now() < deadline {
            if counted_from.is_none() && by_line[0] + by_line[1] >= WARM_UP {
                counted_from = Some(allocations());
            }
            engine
                .poll(&mut |_, event| events.push(event))
                .expect("poll");
            for event in events.drain(..) {
                opened |= matches!(event, tickwire::net::engine::StreamEvent::Open);
            }
            frames.drain(usize::MAX, |tag, frame| {
                let (conn, kind) = split_tag(tag);
                assert_eq!(conn, 0);
                let index = match kind {
                    FrameKind::LineA => 0,
                    FrameKind::LineB => 1,
                    other => panic!("a {other:?} frame"),
                };
                let (_, payload) = split_frame(frame).expect("timestamped");
                let (drops, datagram) = split_datagram(payload).expect("a datagram head");
                assert_eq!(drops, 0);
                assert_eq!(datagram.len(), 100);
                // Each line's datagrams in order, each carrying its line and its number.
                assert_eq!(datagram[0], index as u8);
                let seq = u64::from_le_bytes(datagram[1..9].try_into().unwrap());
                assert_eq!(seq, next[index], "line {index}");
                next[index] += 1;
                by_line[index] += 1;
            });
        }
        let allocated = counted_from.map(|from| allocations() - from);
        (notes, opened, by_line, allocated)
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the engine opened its lines");
    let sender_address = pair.sender_address;
    in_namespace(&pair.sender, move || {
        let socket = UdpSocket::bind((sender_address, 0)).expect("bind");
        socket.set_multicast_ttl_v4(1).unwrap();
        let mut payload = [0u8; 100];
        for seq in 0..PER_LINE {
            for (index, target) in lines.iter().enumerate() {
                payload[0] = index as u8;
                payload[1..9].copy_from_slice(&seq.to_le_bytes());
                socket.send_to(&payload, target).expect("send");
            }
            if seq % 100 == 99 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    })
    .join()
    .expect("sender");
    let (notes, opened, by_line, allocated) = receiver.join().expect("receiver");
    assert!(
        notes.warning.is_none()
            && notes.info.as_deref().is_some_and(|info| {
                info.starts_with("line A and B: af-xdp on ") && info.contains("2 feeds")
            }),
        "{notes:?}"
    );
    assert!(opened, "no Open event");
    assert_eq!(by_line, [PER_LINE, PER_LINE]);
    assert_eq!(allocated, Some(0), "the engine allocated while polling");
    // The program went with the engine: its link's file is released when the engine closes it,
    // but the kernel may finish that release a moment after the thread has gone (it failed once
    // read at once, under load), so within the same bound as after a signal.
    assert!(
        detached_within(&pair, Duration::from_secs(5)),
        "a program is still attached after the engine was dropped"
    );
}
