//! Nasdaq ITCH over real multicast: the simulator (`tickwire_sim::itch`) in one network
//! namespace sends MoldUDP64 on two groups with faults and serves re-requests; a receiver in a
//! second namespace, joined by a veth pair the test creates (multicast routed over it), joins
//! both groups and feeds every datagram to the venue's `ItchDecoder`, sending the re-requests
//! it asks for. The receiver here is the test's own loop: the network thread does not open UDP
//! sockets yet. Root only; without `ip netns` the tests skip with a printed reason, which
//! `TICKWIRE_REQUIRE_NETNS=1` (set by `.ci/run`) turns into a failure.

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

/// Two namespaces joined by a veth pair, removed on drop.
struct Namespaces {
    sender: String,
    receiver: String,
    /// The receiver's end of the veth pair.
    receiver_veth: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
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

impl Namespaces {
    fn create(tag: &str) -> Result<Namespaces, String> {
        let id = format!("{}{tag}", std::process::id() % 100_000);
        let (veth_s, veth_r) = (format!("v37s{id}"), format!("v37r{id}"));
        let ns = Namespaces {
            sender: format!("tw37s{id}"),
            receiver: format!("tw37r{id}"),
            receiver_veth: veth_r.clone(),
        };
        ip(&["netns", "add", &ns.sender])?;
        ip(&["netns", "add", &ns.receiver])?;
        ip(&[
            "link",
            "add",
            &veth_s,
            "netns",
            &ns.sender,
            "type",
            "veth",
            "peer",
            "name",
            &veth_r,
            "netns",
            &ns.receiver,
        ])?;
        for (name, veth, addr) in [
            (&ns.sender, &veth_s, "10.37.0.1/24"),
            (&ns.receiver, &veth_r, "10.37.0.2/24"),
        ] {
            ip(&["-n", name, "addr", "add", addr, "dev", veth])?;
            ip(&["-n", name, "link", "set", veth, "up"])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
            ip(&["-n", name, "route", "add", "224.0.0.0/4", "dev", veth])?;
        }
        Ok(ns)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.sender]);
        let _ = ip(&["netns", "del", &self.receiver]);
    }
}

/// The namespaces, or `None` with a printed reason (a failure under `TICKWIRE_REQUIRE_NETNS=1`).
fn namespaces(tag: &str) -> Option<Namespaces> {
    match Namespaces::create(tag) {
        Ok(ns) => Some(ns),
        Err(reason) => {
            let required = std::env::var("TICKWIRE_REQUIRE_NETNS").is_ok_and(|v| v == "1");
            assert!(!required, "TICKWIRE_REQUIRE_NETNS=1 but: {reason}");
            crate::support::skip::skipped(format_args!(
                "network namespaces cannot be made here (root and `ip netns` needed): {reason}"
            ));
            None
        }
    }
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
