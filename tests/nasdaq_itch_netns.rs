//! Nasdaq ITCH over real multicast: the simulator (`tickwire_sim::itch`) in one network
//! namespace sends MoldUDP64 on two groups with faults and serves re-requests; a receiver in a
//! second namespace, joined by a veth pair the test creates (multicast routed over it), joins
//! both groups and feeds every datagram to the venue's `ItchDecoder`, sending the re-requests
//! it asks for. Some tests run the receiver as their own loop over the decoder; the others run
//! the real `tickwire run` (its network thread joining the groups over io_uring or epoll, or
//! reading them through AF_XDP with `backend = "af-xdp"`) against `tickwire sim --venue itch`. Root only; without `ip netns` the tests skip with a
//! printed reason, which `TICKWIRE_REQUIRE_NETNS=1` (set by `.ci/run`) turns into a failure.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};
use tickwire::event::Event;
use tickwire::venue::nasdaq_itch::book::BookConfig;
use tickwire::venue::nasdaq_itch::decoder::{DecoderConfig, ItchDecoder, Symbols};
use tickwire::venue::nasdaq_itch::generate::{Generator, MAX_GENERATED_LEN};
use tickwire::venue::nasdaq_itch::mold::{ArbiterConfig, Line, Session};
use tickwire_sim::itch::{ItchFaults, ItchSim, ItchSimOptions, ItchSimStats, ItchSource};

const SESSION: Session = Session(*b"NETNS00037");
const SENDER: Ipv4Addr = Ipv4Addr::new(10, 37, 0, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 37, 0, 2);

/// Two namespaces joined by a veth pair (10.37.0.1 the sender, .2 the receiver), removed on
/// drop; `None` with a printed skip reason (a failure under `TICKWIRE_REQUIRE_NETNS=1`).
fn namespaces(tag: &str) -> Option<crate::support::netns::Pair> {
    crate::support::netns_pair(tag, 37)
}

/// Moves the calling thread into namespace `name`.
fn enter(name: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{name}")).expect("namespace file");
    // SAFETY: a valid namespace file descriptor; only this thread changes namespace.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

struct Received {
    events: Vec<Event>,
    decoder: ItchDecoder,
    ended: bool,
}

fn decoder(give_up_ms: u64) -> ItchDecoder {
    ItchDecoder::new(DecoderConfig {
        venue_id: 1,
        instrument_base: 0,
        symbols: Symbols::All,
        arbiter: ArbiterConfig {
            expected_session: Some(SESSION),
            first_sequence: Some(1),
            give_up_ns: give_up_ms * 1_000_000,
            ..ArbiterConfig::default()
        },
        book: BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 16,
        },
        date: None,
    })
}

/// In namespace `ns`: joins both groups on the veth, then signals `ready`; feeds the decoder
/// until the session's end has been handed out (or `limit` passes).
fn receive(
    ns: &str,
    lines: [SocketAddrV4; 2],
    server: SocketAddrV4,
    give_up_ms: u64,
    ready: std::sync::mpsc::Sender<()>,
    limit: Duration,
) -> Received {
    enter(ns);
    // The lines through `net::udp` (a 16 MiB buffer: a loaded test machine may not read for a
    // while); the re-request answers on a plain socket.
    let join = |group: SocketAddrV4| {
        tickwire::net::udp::MulticastSocket::open(&tickwire::net::udp::MulticastConfig {
            group,
            interface: RECEIVER,
            source: None,
            rcvbuf: 16 << 20,
        })
        .expect("join")
    };
    let lines_sockets = [(join(lines[0]), Line::A), (join(lines[1]), Line::B)];
    let answers = UdpSocket::bind(SocketAddrV4::new(RECEIVER, 0)).unwrap();
    answers.set_nonblocking(true).unwrap();
    let mut decoder = decoder(give_up_ms);
    let mut events = Vec::new();
    let start = Instant::now();
    ready.send(()).unwrap();
    let mut buffer = [0u8; 2048];
    while start.elapsed() < limit {
        let mut idle = true;
        for (socket, line) in &lines_sockets {
            while let Ok(Some(got)) = socket.recv(&mut buffer) {
                idle = false;
                let now = start.elapsed().as_nanos() as u64;
                let _ =
                    decoder.on_packet(*line, &buffer[..got.len], now, now, &mut |e| events.push(e));
            }
        }
        while let Ok(len) = answers.recv(&mut buffer) {
            idle = false;
            let now = start.elapsed().as_nanos() as u64;
            let _ = decoder.on_packet(Line::Rerequest, &buffer[..len], now, now, &mut |e| {
                events.push(e)
            });
        }
        let now = start.elapsed().as_nanos() as u64;
        if let Some(request) = decoder.poll(now, &mut |e| events.push(e)) {
            let _ = answers.send_to(&request.encode(), server);
        }
        if decoder.counters().end_of_session > 0 && !decoder.arbiter().in_gap() {
            return Received {
                events,
                decoder,
                ended: true,
            };
        }
        if idle {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Received {
        events,
        decoder,
        ended: false,
    }
}

/// Runs the simulator in the sender namespace and the receiver in the other.
fn session(
    tag: &str,
    messages: usize,
    packet_rate: u64,
    faults: ItchFaults,
    give_up_ms: u64,
) -> Option<(Received, ItchSimStats)> {
    let ns = namespaces(tag)?;
    let lines = [
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 1), 26477),
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 2), 26477),
    ];
    let server = SocketAddrV4::new(SENDER, 26478);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver_ns = ns.receiver.clone();
    let receiver = std::thread::spawn(move || {
        receive(
            &receiver_ns,
            lines,
            server,
            give_up_ms,
            ready_tx,
            Duration::from_secs(60),
        )
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the receiver joined");
    let sender_ns = ns.sender.clone();
    let sender = std::thread::spawn(move || {
        enter(&sender_ns);
        let sim = ItchSim::start(ItchSimOptions {
            line_a: lines[0],
            line_b: lines[1],
            interface: SENDER,
            rerequest: server,
            session: SESSION.0,
            source: ItchSource::Generate {
                seed: 37,
                stocks: 50,
                live: 800,
                messages,
            },
            messages_per_packet: 8,
            packet_rate,
            faults,
            seed: 99,
            heartbeat_ms: 50,
            linger_ms: 2 * give_up_ms + 1_000,
            ttl: 1,
            record_send_times: false,
        })
        .expect("the simulator starts");
        sim.wait().expect("the session ran")
    });
    let stats = sender.join().expect("sender");
    let received = receiver.join().expect("receiver");
    drop(ns);
    Some((received, stats))
}

/// The events of the same messages decoded one after another, with nothing lost.
fn reference(stocks: u16, live: usize, messages: usize) -> Vec<Event> {
    let mut generator = Generator::new(37, stocks, live);
    let mut decoder = decoder(50);
    let mut events = Vec::new();
    let mut buffer = [0u8; MAX_GENERATED_LEN];
    for sequence in 1..=messages as u64 {
        let len = generator.next_message(&mut buffer);
        decoder.on_message(sequence, &buffer[..len], 0, &mut |e| events.push(e));
    }
    events
}

fn comparable(events: &[Event]) -> Vec<(u64, u32, String)> {
    events
        .iter()
        .map(|e| {
            (
                e.header.venue_seq,
                e.header.instrument_id,
                format!("{:?}", e.body()),
            )
        })
        .collect()
}

/// Losses on line A, on line B and on both (recovered from the re-request server), reordering,
/// duplicates and a late line B: the receiver's events are exactly those of the messages
/// decoded in order with nothing lost.
#[test]
fn both_line_losses_are_recovered_by_rerequest_over_multicast() {
    let messages = 24_000;
    let faults = ItchFaults {
        drop_a: 40_000,
        drop_b: 40_000,
        drop_both: 15_000,
        lose: 0,
        reorder: 10_000,
        duplicate: 10_000,
        late_b_packets: 3,
    };
    let Some((received, stats)) = session("a", messages, 4_000, faults, 2_000) else {
        return;
    };
    assert!(received.ended, "the session's end reached the receiver");
    assert!(stats.dropped_both > 0 && stats.dropped_a > 0 && stats.dropped_b > 0);
    let arbiter = received.decoder.arbiter().counters();
    assert_eq!(arbiter.gaps, 0, "{arbiter:?} {stats:?}");
    assert!(arbiter.requests > 0 && stats.requests > 0, "{stats:?}");
    assert!(arbiter.lines[2].delivered > 0, "answers filled losses");
    assert!(arbiter.lines[0].duplicates > 0, "duplicates dropped");
    assert_eq!(received.decoder.counters().messages, messages as u64);
    assert_eq!(
        comparable(&received.events),
        comparable(&reference(50, 800, messages)),
        "complete and in order"
    );
}

/// Packets lost on both lines and unknown to the re-request server: each missing run becomes
/// one given-up run with its `gap` events, exactly the lost messages are missing, and every
/// other message arrives once, in order.
#[test]
fn an_unrecoverable_loss_is_a_gap_over_multicast() {
    let messages = 6_000;
    let faults = ItchFaults {
        lose: 6_000,
        drop_both: 10_000,
        ..ItchFaults::default()
    };
    let Some((received, stats)) = session("b", messages, 5_000, faults, 200) else {
        return;
    };
    assert!(received.ended, "the session's end reached the receiver");
    assert!(stats.lost > 0, "{stats:?}");
    let arbiter = received.decoder.arbiter().counters();
    assert_eq!(
        arbiter.gap_messages, stats.lost_messages,
        "{arbiter:?} {stats:?}"
    );
    assert!(received.decoder.counters().gaps >= 1);
    assert_eq!(
        received.decoder.counters().messages,
        messages as u64 - stats.lost_messages
    );
    let gaps = received
        .events
        .iter()
        .filter(|e| e.kind() == tickwire::event::EventKind::Gap)
        .count();
    assert!(gaps > 0, "gap events published");
    let mut last = 0;
    for event in &received.events {
        if event.kind() != tickwire::event::EventKind::Gap {
            assert!(event.header.venue_seq >= last, "in order");
            last = event.header.venue_seq;
        }
    }
}

/// `tickwire sim --venue itch` as a user runs it, in the sender namespace (`ip netns exec`),
/// sending to the lines of a venue file with losses on both lines: the receiver gets every
/// message once and in order, re-requested from the command's server where both lines lost it.
#[test]
fn the_sim_command_sends_a_recoverable_session() {
    let Some(ns) = namespaces("c") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let venue = dir.path().join("itch.toml");
    std::fs::write(
        &venue,
        "name = \"itch\"\nkind = \"nasdaq-itch\"\nurl = \"udp://239.192.37.11:26477\"\n\
         symbols = [\"*\"]\nchannels = [\"itch\"]\n[nasdaq_itch]\n\
         line_b = \"239.192.37.12:26477\"\ninterface = \"10.37.0.1\"\n\
         rerequest = \"10.37.0.1:26478\"\nsession = \"NETNS00037\"\n",
    )
    .unwrap();
    let lines = [
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 11), 26477),
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 12), 26477),
    ];
    let server = SocketAddrV4::new(SENDER, 26478);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver_ns = ns.receiver.clone();
    let receiver = std::thread::spawn(move || {
        receive(
            &receiver_ns,
            lines,
            server,
            1_000,
            ready_tx,
            Duration::from_secs(60),
        )
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("joined");
    let messages = 8_000;
    let output = Command::new("ip")
        .args(["netns", "exec", &ns.sender, env!("CARGO_BIN_EXE_tickwire")])
        .args([
            "sim",
            "--venue",
            "itch",
            "--seed",
            "37",
            "--symbols",
            "50",
            "--rate",
            "5000",
        ])
        .args(["--itch-messages", &messages.to_string()])
        .args([
            "--itch-faults",
            "drop_a=30000,drop_b=30000,drop_both=20000,duplicate=5000,late_b=2",
        ])
        .arg("--itch-venue")
        .arg(&venue)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("re-requests"), "{stderr}");
    let received = receiver.join().unwrap();
    drop(ns);
    assert!(received.ended, "{stderr}");
    let arbiter = received.decoder.arbiter().counters();
    assert_eq!(arbiter.gaps, 0, "{arbiter:?} {stderr}");
    assert!(arbiter.lines[2].delivered > 0, "{stderr}");
    assert_eq!(
        comparable(&received.events),
        comparable(&reference(50, 20_000, messages))
    );
}

/// The multicast socket of `net::udp`: a source-specific join receives the sender's datagrams
/// with the kernel's receive time; one naming another source receives nothing; a receive
/// buffer too small for a burst reports the kernel's drop count (`SO_RXQ_OVFL`).
#[test]
fn multicast_sockets_join_by_source_and_count_kernel_drops() {
    use tickwire::net::udp::{interface_address, MulticastConfig, MulticastSocket};
    let Some(ns) = namespaces("d") else {
        return;
    };
    let lines = [
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 21), 26477),
        SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, 22), 26477),
    ];
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let receiver_ns = ns.receiver.clone();
    let veth = ns.receiver_veth.clone();
    let receiver = std::thread::spawn(move || {
        enter(&receiver_ns);
        let interface = interface_address(&veth).expect("the veth's address");
        assert_eq!(interface, RECEIVER);
        let small = MulticastSocket::open(&MulticastConfig {
            group: lines[0],
            interface,
            source: Some(SENDER),
            rcvbuf: 4096,
        })
        .expect("a source-specific join");
        let other_source = MulticastSocket::open(&MulticastConfig {
            group: lines[1],
            interface,
            source: Some(Ipv4Addr::new(10, 37, 0, 9)),
            rcvbuf: 1 << 20,
        })
        .expect("a join of another source");
        let wall = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        };
        let before = wall(std::time::SystemTime::now());
        ready_tx.send(()).unwrap();
        // The burst (500 packets as fast as the socket takes them) overflows the small buffer
        // unread; what arrives after the first reads (heartbeats, the end of session) carries
        // the drop count.
        std::thread::sleep(Duration::from_millis(30));
        let mut buffer = [0u8; 2048];
        let (mut received, mut dropped, mut stamped) = (0u64, 0u32, 0u64);
        let mut finished = false;
        loop {
            while let Some(got) = small.recv(&mut buffer).unwrap() {
                received += 1;
                assert!(!got.truncated);
                if let Some(ns) = got.kernel_ts_ns {
                    // Received after the join, and before it is read.
                    let read = wall(std::time::SystemTime::now());
                    assert!((before..=read).contains(&ns), "{before} {ns} {read}");
                    stamped += 1;
                }
                dropped = dropped.max(got.dropped.unwrap_or(0));
            }
            if finished {
                break;
            }
            finished = !matches!(
                done_rx.recv_timeout(Duration::from_millis(5)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            );
        }
        let mut others = 0;
        while other_source.recv(&mut buffer).unwrap().is_some() {
            others += 1;
        }
        (received, dropped, stamped, others, small.rcvbuf())
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sender_ns = ns.sender.clone();
    let stats = std::thread::spawn(move || {
        enter(&sender_ns);
        ItchSim::start(ItchSimOptions {
            line_a: lines[0],
            line_b: lines[1],
            interface: SENDER,
            rerequest: SocketAddrV4::new(SENDER, 0),
            session: SESSION.0,
            source: ItchSource::Generate {
                seed: 1,
                stocks: 10,
                live: 100,
                messages: 4_000,
            },
            messages_per_packet: 8,
            packet_rate: 0,
            faults: ItchFaults::default(),
            seed: 1,
            heartbeat_ms: 50,
            linger_ms: 100,
            ttl: 1,
            record_send_times: false,
        })
        .unwrap()
        .wait()
        .unwrap()
    })
    .join()
    .unwrap();
    done_tx.send(()).unwrap();
    let (received, dropped, stamped, others, rcvbuf) = receiver.join().unwrap();
    drop(ns);
    assert_eq!(stats.packets, 500);
    assert!(received > 0 && stamped == received, "{received} {stamped}");
    assert!(
        dropped > 0,
        "a {rcvbuf}-byte buffer took {received} datagrams and dropped none"
    );
    assert_eq!(others, 0, "a join of another source receives nothing");
}

// ---- the live path: `tickwire run` on a nasdaq-itch venue ----

/// What `tickwire run --print-events` printed (JSON lines), its log, and its `/v1/venues`.
struct LiveRun {
    events: Vec<serde_json::Value>,
    stderr: String,
    venues: serde_json::Value,
    /// `/v1/quotes` while the appliance ran: every instrument of the bus's directory.
    quotes: serde_json::Value,
    /// `ip -d link show` of the receiver's veth while the appliance ran, and after it ended.
    link_while_running: String,
    link_after: String,
}

/// How the appliance's venue reads its lines.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lines {
    /// Kernel sockets (the venue file's default).
    Kernel,
    /// `backend = "af-xdp"`.
    AfXdp,
    /// `backend = "af-xdp"` with busy polling (`xdp_busy_poll_us`).
    AfXdpBusyPoll,
    /// `backend = "af-xdp"`, the appliance run with no capability at all (still uid 0): it
    /// falls back to the kernel sockets.
    AfXdpWithoutPrivileges,
}

/// `setpriv` arguments that drop every capability of the command they run.
const NO_CAPABILITIES: [&str; 4] = [
    "setpriv",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--bounding-set=-all",
];

/// The last `wanted` of a stdout line count, or the time running out.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// `GET path` from the appliance's HTTP server in namespace `ns`.
fn http_get(ns: &str, port: u16, path: &str) -> String {
    let ns = ns.to_owned();
    let path = path.to_owned();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        enter(&ns);
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the server");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    })
    .join()
    .unwrap()
}

/// `tickwire run --print-events` (the real binary) in the receiver namespace, its nasdaq-itch
/// venue joined on the veth named by name with the network `backend`; then `tickwire sim
/// --venue itch` in the sender namespace with `faults`. Returns once `enough` holds of what the
/// strategy printed (or 60 s pass), with the appliance's `/v1/venues`.
#[allow(clippy::too_many_arguments)]
fn live_session(
    tag: &str,
    backend: &str,
    lines_backend: Lines,
    groups: [u8; 2],
    messages: usize,
    faults: &str,
    give_up_ms: u64,
    enough: impl Fn(&[serde_json::Value]) -> bool,
    while_running: impl FnOnce(&crate::support::netns::Pair),
    appliance_extra: &str,
) -> Option<LiveRun> {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};
    let ns = namespaces(tag)?;
    let dir = tempfile::tempdir().unwrap();
    let venue = |interface: &str| {
        format!(
            "name = \"itch\"\nkind = \"nasdaq-itch\"\nurl = \"udp://239.192.37.{}:26477\"\n\
             symbols = [\"*\"]\nchannels = [\"itch\"]\n[nasdaq_itch]\n\
             line_b = \"239.192.37.{}:26477\"\ninterface = \"{interface}\"\n\
             rerequest = \"10.37.0.1:26478\"\nsession = \"NETNS00037\"\nline_wait_ms = 2\n\
             give_up_ms = {give_up_ms}\nmax_orders = 65536\nmax_levels = 65536\n",
            groups[0], groups[1]
        )
    };
    // The receiver joins on its veth, named by name (looked up in its namespace).
    let mut receiver_venue = venue(&ns.receiver_veth);
    if lines_backend != Lines::Kernel {
        receiver_venue.push_str("backend = \"af-xdp\"\n");
    }
    if lines_backend == Lines::AfXdpBusyPoll {
        receiver_venue.push_str("xdp_busy_poll_us = 50\n");
    }
    std::fs::write(dir.path().join("venue.toml"), receiver_venue).unwrap();
    std::fs::write(dir.path().join("sim.toml"), venue("10.37.0.1")).unwrap();
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        format!(
            "venues = [\"venue.toml\"]\n[net]\nbackend = \"{backend}\"\n\
             [http]\nlisten = \"127.0.0.1:18037\"\n[threads.net]\nwait = \"park\"\n\
             [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n\
             {appliance_extra}"
        ),
    )
    .unwrap();
    let wrapper: &[&str] = if lines_backend == Lines::AfXdpWithoutPrivileges {
        &NO_CAPABILITIES
    } else {
        &[]
    };
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.receiver])
        .args(wrapper)
        .arg(env!("CARGO_BIN_EXE_tickwire"))
        .args(["run", "--print-events", "--config"])
        .arg(&appliance)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out_reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let json = serde_json::from_str(&line)
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
                lines.lock().unwrap().push(json);
            }
        })
    };
    let (log, err_reader) = crate::support::netns::collect_lines(stderr);
    // The sockets are open (joined) once the connection moved on from connecting.
    let joined = wait_for(Duration::from_secs(30), || {
        log.lock().unwrap().contains("upgrading")
    });
    if joined && matches!(lines_backend, Lines::AfXdp | Lines::AfXdpBusyPoll) {
        // One datagram to line A too large for the veth's MTU: the sender's kernel fragments
        // it, the program steers the fragments (it cannot see their port) and the receiver
        // refuses and counts them, as the line's drops.
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 192, 37, groups[0]), 26477);
        crate::support::netns::in_namespace(&ns.sender, move || {
            let socket = UdpSocket::bind((SENDER, 0)).expect("bind");
            socket.set_multicast_ttl_v4(1).unwrap();
            socket.send_to(&[0u8; 3000], group).expect("send");
        })
        .join()
        .unwrap();
    }
    let sim = joined.then(|| {
        Command::new("ip")
            .args(["netns", "exec", &ns.sender, env!("CARGO_BIN_EXE_tickwire")])
            .args(["sim", "--venue", "itch", "--seed", "37", "--symbols", "50"])
            .args(["--rate", "4000"])
            .args(["--itch-messages", &messages.to_string()])
            .args(["--itch-faults", faults])
            .arg("--itch-venue")
            .arg(dir.path().join("sim.toml"))
            .output()
            .unwrap()
    });
    wait_for(Duration::from_secs(60), || enough(&lines.lock().unwrap()));
    let venues = http_get(&ns.receiver, 18037, "/v1/venues");
    let quotes = http_get(&ns.receiver, 18037, "/v1/quotes");
    let link_while_running = ns.receiver_link();
    if joined {
        while_running(&ns);
    }
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    out_reader.join().unwrap();
    err_reader.join().unwrap();
    let link_after = ns.receiver_link();
    drop(ns);
    let stderr = log.lock().unwrap().clone();
    assert!(joined, "the appliance never opened its sockets: {stderr}");
    let sim = sim.unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    assert!(status.success(), "{stderr}");
    let body = venues.split("\r\n\r\n").nth(1).unwrap_or("");
    let venues = serde_json::from_str(body).unwrap_or_else(|error| {
        panic!("/v1/venues is not JSON ({error}): {venues}");
    });
    let body = quotes.split("\r\n\r\n").nth(1).unwrap_or("");
    let quotes = serde_json::from_str(body).unwrap_or_else(|error| {
        panic!("/v1/quotes is not JSON ({error}): {quotes}");
    });
    let events = std::mem::take(&mut *lines.lock().unwrap());
    Some(LiveRun {
        events,
        stderr,
        venues,
        quotes,
        link_while_running,
        link_after,
    })
}

/// The generator's events, as `--print-events` prints them, decoded one message after another
/// with nothing lost (the session's New York date of today, as the live feed takes it).
fn reference_json(stocks: u16, live: usize, messages: usize) -> Vec<serde_json::Value> {
    let mut generator = Generator::new(37, stocks, live);
    let mut decoder = decoder(50);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    decoder.set_date(tickwire::venue::nasdaq_itch::decoder::new_york_date(now).unwrap());
    let mut events = Vec::new();
    let mut buffer = [0u8; MAX_GENERATED_LEN];
    for sequence in 1..=messages as u64 {
        let len = generator.next_message(&mut buffer);
        decoder.on_message(sequence, &buffer[..len], 0, &mut |e| events.push(e));
    }
    let mut out = Vec::new();
    for event in &events {
        tickwire::event::json::write_event(&mut out, "itch", b"?", event);
    }
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The stocks the generator's session names, as the bus's directory should name them: venue
/// `itch`, the trimmed ITCH symbol; sorted.
fn reference_symbols(stocks: u16, live: usize, messages: usize) -> Vec<(String, String)> {
    let mut generator = Generator::new(37, stocks, live);
    let mut decoder = decoder(50);
    let mut buffer = [0u8; MAX_GENERATED_LEN];
    for sequence in 1..=messages as u64 {
        let len = generator.next_message(&mut buffer);
        decoder.on_message(sequence, &buffer[..len], 0, &mut |_| {});
    }
    let named = decoder.counters().stocks as u32;
    assert!(named > 0);
    let mut symbols: Vec<_> = (0..named)
        .map(|id| {
            let symbol = decoder.symbol_of(id).expect("named");
            (
                "itch".to_owned(),
                String::from_utf8(symbol.to_vec()).unwrap(),
            )
        })
        .collect();
    symbols.sort();
    symbols
}

/// What a comparison keeps of a printed event: no receive time, no symbol (the venue file's
/// `*` names no stock), no venue-wide status.
fn market_events(events: &[serde_json::Value]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|event| event["type"] != "status")
        .map(|event| {
            let mut event = event.clone();
            let object = event.as_object_mut().unwrap();
            object.remove("recv_ts_ns");
            object.remove("symbol");
            object.remove("venue");
            event
        })
        .collect()
}

/// Issue 37's live path, with each network backend and each way of reading the lines: losses
/// on line A, on line B and on both (re-requested by the appliance from the simulator's
/// server), duplicates and a late line B; the strategy gets exactly the generator's events,
/// complete and in order, and `/v1/venues` shows the per-line counts.
fn run_recovers_losses_on_both_lines(
    tag: &str,
    backend: &str,
    lines: Lines,
    groups: [u8; 2],
    while_running: impl FnOnce(&crate::support::netns::Pair),
    appliance_extra: &str,
) -> Option<LiveRun> {
    let messages = 6_000;
    let reference = reference_json(50, 20_000, messages);
    let wanted = reference.len();
    let run = live_session(
        tag,
        backend,
        lines,
        groups,
        messages,
        "drop_a=30000,drop_b=30000,drop_both=20000,duplicate=5000,late_b=2",
        2_000,
        |events| market_events(events).len() >= wanted,
        while_running,
        appliance_extra,
    )?;
    let got = market_events(&run.events);
    assert_eq!(got.len(), wanted, "{}", run.stderr);
    for (index, (got, want)) in got.iter().zip(&reference).enumerate() {
        assert_eq!(
            got,
            &market_events(std::slice::from_ref(want))[0],
            "event {index}"
        );
    }
    assert!(
        run.events
            .iter()
            .any(|event| event["type"] == "status" && event["state"] == "Live"),
        "the venue went live when datagrams flowed"
    );
    // The bus's directory names every stock the feed named (the venue file says `*`), as
    // its ITCH symbol, and nothing else: `/v1/quotes` lists the directory.
    let mut named: Vec<(String, String)> = run.quotes["quotes"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", run.quotes))
        .iter()
        .map(|quote| {
            let text = |key: &str| quote[key].as_str().unwrap_or("").to_owned();
            (text("venue"), text("symbol"))
        })
        .collect();
    named.sort();
    assert_eq!(
        named,
        reference_symbols(50, 20_000, messages),
        "{}",
        run.quotes
    );
    let counts = &run.venues["venues"][0]["feed_counts"];
    let count = |name: &str| counts[name].as_u64().unwrap_or(0);
    assert_eq!(count("stocks_unnamed_on_bus"), 0, "{}", run.venues);
    assert!(count("rerequests") > 0, "{}", run.venues);
    assert!(count("rerequest_delivered") > 0, "{}", run.venues);
    assert!(count("line_a_duplicates") > 0, "{}", run.venues);
    assert_eq!(count("gaps"), 0, "{}", run.venues);
    assert_eq!(
        count("line_a_delivered") + count("line_b_delivered") + count("rerequest_delivered"),
        messages as u64,
        "{}",
        run.venues
    );
    Some(run)
}

#[test]
fn tickwire_run_recovers_losses_on_both_lines_over_io_uring() {
    run_recovers_losses_on_both_lines("e", "io-uring", Lines::Kernel, [31, 32], |_| {}, "");
}

#[test]
fn tickwire_run_recovers_losses_on_both_lines_over_epoll() {
    run_recovers_losses_on_both_lines("f", "epoll", Lines::Kernel, [41, 42], |_| {}, "");
}

/// One ICMP echo request to `to` on a raw socket (root; no `ping` binary needed): whether its
/// reply came within 2 s.
fn icmp_echo(to: Ipv4Addr) -> bool {
    // SAFETY: plain socket(2); the descriptor is owned by `fd` below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
    assert!(raw >= 0, "raw socket: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor just opened and owned by nothing else.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    let id = (std::process::id() & 0xffff) as u16;
    // Type 8 (echo request), code 0, checksum, identifier, sequence 1, 8 bytes of payload.
    let mut request = [8u8, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8];
    request[4..6].copy_from_slice(&id.to_be_bytes());
    let mut sum: u32 = request
        .chunks(2)
        .map(|word| u32::from(u16::from_be_bytes([word[0], word[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    request[2..4].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(to.octets()),
        },
        sin_zero: [0; 8],
    };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // SAFETY: a buffer and a sockaddr_in of the sizes given.
    let sent = unsafe {
        libc::sendto(
            raw,
            request.as_ptr().cast(),
            request.len(),
            0,
            std::ptr::from_ref(&addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(
        sent,
        request.len() as isize,
        "{}",
        std::io::Error::last_os_error()
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buffer = [0u8; 1500];
    while Instant::now() < deadline {
        // SAFETY: a writable buffer of the size given; MSG_DONTWAIT never blocks.
        let got = unsafe {
            libc::recv(
                raw,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if got <= 0 {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        // An IPv4 packet: skip its header to the ICMP message; type 0 is an echo reply.
        let got = got as usize;
        let header = usize::from(buffer[0] & 0x0f) * 4;
        if got >= header + 8
            && buffer[header] == 0
            && buffer[header + 4..header + 6] == id.to_be_bytes()
        {
            return true;
        }
    }
    false
}

/// Ping and a TCP exchange from the sender's namespace to the receiver's: what the XDP program
/// does not steer still reaches the receiver's kernel.
fn ping_and_tcp(ns: &crate::support::netns::Pair) {
    use std::io::{Read, Write};
    let address = ns.receiver_address;
    let replied = crate::support::netns::in_namespace(&ns.sender, move || icmp_echo(address))
        .join()
        .unwrap();
    assert!(replied, "no ICMP echo reply from {address}");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = crate::support::netns::in_namespace(&ns.receiver, move || {
        let listener = std::net::TcpListener::bind((address, 7037)).expect("listen");
        ready_tx.send(()).unwrap();
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).expect("read");
        stream.write_all(&buf).expect("echo");
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let back = crate::support::netns::in_namespace(&ns.sender, move || {
        let mut stream = std::net::TcpStream::connect((address, 7037)).expect("TCP connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        stream.read_exact(&mut back).expect("echo back");
        back
    })
    .join()
    .unwrap();
    server.join().unwrap();
    assert_eq!(&back, b"hello");
}

/// The AF_XDP lines of an appliance that had them: the program was attached while it ran (the
/// lines' kernel sockets are not read, so the session arrived through it), its log says how,
/// and nothing is left attached after SIGTERM.
fn assert_read_through_af_xdp(run: &LiveRun) {
    assert!(
        run.stderr.contains("line A and B: af-xdp on "),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("af-xdp unavailable"), "{}", run.stderr);
    assert!(
        run.link_while_running.contains("prog/xdp"),
        "{}",
        run.link_while_running
    );
    assert!(
        !run.link_after.contains("prog/xdp"),
        "a program outlived the appliance: {}",
        run.link_after
    );
    // The fragments of the oversized datagram `live_session` sent to line A were refused and
    // counted as the line's drops (the sim's own datagrams carry the count).
    let drops = run.venues["venues"][0]["feed_counts"]["line_a_kernel_drops"]
        .as_u64()
        .unwrap_or(0);
    assert!(drops >= 2, "line A's drops: {drops}: {}", run.venues);
}

/// A reader of the event bus that attaches once the whole session (with losses on both lines,
/// recovered) has reached the appliance asks for the books and gets every stock's L3 book as
/// a snapshot (nasdaq-itch's `Feed::emit_books`): the levels that the generator's messages,
/// decoded in order with nothing lost, leave (folded from the reference decoder's `level`
/// events), bids and asks best first.
#[test]
fn a_late_bus_reader_gets_every_stock_book() {
    use tickwire::event::Body;
    use tickwire::fixed::Fixed;
    use tickwire_client::{Client, Next, Start};
    type Levels = Vec<(Fixed, Fixed)>;
    let dir = tempfile::tempdir().unwrap();
    let bus = dir.path().join("tickwire.bus");
    // What a reader that saw every level event holds: instrument -> (bids, asks).
    let mut levels = std::collections::BTreeMap::new();
    for event in reference(50, 20_000, 6_000) {
        if let Body::BookLevel(level) = event.body() {
            let key = (event.header.instrument_id, level.side, level.price);
            if level.size == Fixed::ZERO {
                levels.remove(&key);
            } else {
                levels.insert(key, level.size);
            }
        }
    }
    let mut want: std::collections::BTreeMap<u32, (Levels, Levels)> = Default::default();
    for ((instrument, side, price), size) in levels {
        let book = want.entry(instrument).or_default();
        if side == tickwire::event::Side::Bid as u8 {
            book.0.insert(0, (price, size));
        } else {
            book.1.push((price, size));
        }
    }
    assert!(want.len() > 40, "most stocks have a book");
    let late_books = std::sync::Mutex::new(None);
    let run = run_recovers_losses_on_both_lines(
        "l",
        "epoll",
        Lines::Kernel,
        [81, 82],
        |_| {
            let mut late = Client::options()
                .start(Start::Latest)
                .follow_books(true)
                .attach(&bus)
                .expect("the appliance's bus");
            let books = |client: &Client| -> std::collections::BTreeMap<u32, (Levels, Levels)> {
                client
                    .books()
                    .expect("the client follows books")
                    .iter()
                    .filter(|(_, book)| book.is_valid())
                    .filter(|(_, book)| {
                        book.bids().next().is_some() || book.asks().next().is_some()
                    })
                    .map(|((_, instrument), book)| {
                        (instrument, (book.bids().collect(), book.asks().collect()))
                    })
                    .collect()
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(20) && books(&late).len() < want.len() {
                match late
                    .wait(Duration::from_millis(20))
                    .expect("the client reads")
                {
                    Next::Overrun { missed, .. } => {
                        panic!("the late reader was lapped by {missed}")
                    }
                    Next::Events(_) | Next::NewEpoch { .. } | Next::Idle | Next::Removed => {}
                    Next::Closed => break,
                }
            }
            *late_books.lock().unwrap() = Some(books(&late));
        },
        &format!(
            "[bus]\npath = {:?}\ncapacity = 65536\n",
            bus.display().to_string()
        ),
    );
    if run.is_none() {
        return;
    }
    let got = late_books.into_inner().unwrap().expect("the reader ran");
    assert_eq!(got.len(), want.len(), "a book for every stock with levels");
    assert_eq!(got, want, "the late reader's books");
}

/// Issue 38: the same session read through AF_XDP (`backend = "af-xdp"`, io_uring for the
/// re-request socket) is complete and in order; ping and TCP to the receiver work meanwhile.
#[test]
fn tickwire_run_recovers_losses_on_both_lines_over_af_xdp() {
    let Some(run) = run_recovers_losses_on_both_lines(
        "x",
        "io-uring",
        Lines::AfXdp,
        [61, 62],
        ping_and_tcp,
        "",
    ) else {
        return;
    };
    assert_read_through_af_xdp(&run);
}

/// Without CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW the AF_XDP lines fall back to their kernel
/// sockets with one warning line naming the cause, and the session still arrives whole.
#[test]
fn without_privileges_af_xdp_falls_back_to_the_kernel_sockets_with_one_warning() {
    let Some(run) = run_recovers_losses_on_both_lines(
        "n",
        "epoll",
        Lines::AfXdpWithoutPrivileges,
        [71, 72],
        |_| {},
        "",
    ) else {
        return;
    };
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.contains("af-xdp unavailable"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].contains("needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW")
            && warnings[0].contains("falling back to the kernel socket"),
        "{}",
        warnings[0]
    );
    assert!(
        !run.link_while_running.contains("prog/xdp"),
        "{}",
        run.link_while_running
    );
}

/// `kill -9` of an appliance reading through AF_XDP leaves no program attached (the BPF link
/// closes with the process).
#[test]
fn no_program_stays_attached_after_the_appliance_is_killed() {
    use std::io::BufRead;
    let Some(ns) = namespaces("k") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("venue.toml"),
        format!(
            "name = \"itch\"\nkind = \"nasdaq-itch\"\nurl = \"udp://239.192.37.81:26477\"\n\
             symbols = [\"*\"]\nchannels = [\"itch\"]\n[nasdaq_itch]\n\
             line_b = \"239.192.37.82:26477\"\ninterface = \"{}\"\n\
             rerequest = \"10.37.0.1:26478\"\nmax_orders = 1024\nmax_levels = 1024\n\
             backend = \"af-xdp\"\n",
            ns.receiver_veth
        ),
    )
    .unwrap();
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"venue.toml\"]\n[http]\nlisten = \"127.0.0.1:18038\"\n\
         [threads.net]\nwait = \"park\"\n[threads.decoder]\nfuse_into = \"net\"\n\
         [threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.receiver])
        .arg(env!("CARGO_BIN_EXE_tickwire"))
        .args(["run", "--config"])
        .arg(&appliance)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = line_tx.send(line);
        }
    });
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.contains("af-xdp on ") && Instant::now() < deadline {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(100)) {
            log.push_str(&line);
            log.push('\n');
        }
    }
    let attached = ns.receiver_link().contains("prog/xdp");
    child.kill().expect("kill -9");
    child.wait().unwrap();
    reader.join().unwrap();
    assert!(log.contains("af-xdp on "), "{log}");
    assert!(attached, "no program attached while it ran: {log}");
    let detached = wait_for(Duration::from_secs(5), || {
        !ns.receiver_link().contains("prog/xdp")
    });
    assert!(detached, "a program is still attached after kill -9");
}

/// Packets lost on both lines and unknown to the re-request server: the strategy gets a `gap`
/// for each lost run, and every other message once and in order.
#[test]
fn tickwire_run_reports_an_unrecoverable_loss_as_a_gap() {
    unrecoverable_loss_is_a_gap("g", Lines::Kernel, [51, 52]);
}

/// The same over AF_XDP, busy-polled (`xdp_busy_poll_us`: the kernel took the options).
#[test]
fn tickwire_run_reports_an_unrecoverable_loss_as_a_gap_over_af_xdp() {
    if let Some(run) = unrecoverable_loss_is_a_gap("y", Lines::AfXdpBusyPoll, [91, 92]) {
        assert_read_through_af_xdp(&run);
        let line = run
            .stderr
            .lines()
            .find(|line| line.contains("af-xdp on "))
            .unwrap_or_default();
        assert!(
            line.contains("busy polling 50 us") && !line.contains("refused"),
            "{line}"
        );
    }
}

fn unrecoverable_loss_is_a_gap(tag: &str, lines: Lines, groups: [u8; 2]) -> Option<LiveRun> {
    let messages = 4_000;
    let run = live_session(
        tag,
        "auto",
        lines,
        groups,
        messages,
        "lose=8000,drop_both=10000",
        200,
        |events| {
            events
                .iter()
                .filter(|event| event["type"] != "status" && event["type"] != "gap")
                .filter_map(|event| event["seq"].as_u64())
                .max()
                .is_some_and(|seq| seq >= messages as u64 - 20)
        },
        |_| {},
        "",
    )?;
    let gaps = run.events.iter().filter(|e| e["type"] == "gap").count();
    assert!(gaps > 0, "{}", run.stderr);
    let counts = &run.venues["venues"][0]["feed_counts"];
    assert!(counts["gaps"].as_u64().unwrap_or(0) > 0, "{}", run.venues);
    let mut last = 0;
    for event in &run.events {
        if event["type"] != "status" && event["type"] != "gap" {
            let seq = event["seq"].as_u64().unwrap();
            assert!(seq >= last, "in order: {event}");
            last = seq;
        }
    }
    Some(run)
}
