//! A Nasdaq TotalView-ITCH 5.0 sender over MoldUDP64 (the venue's MoldUDP64 V1.00 framing, as
//! `tickwire::venue::nasdaq_itch` reads it): the messages of a raw ITCH file or of a generated
//! market, framed in packets of up to `messages_per_packet` messages, sent to two multicast
//! groups (line A and line B) from one interface, with faults, and a re-request server on a
//! unicast UDP port that answers from the whole session's history.
//!
//! Faults, each chosen per packet by a seeded generator (so that a run is repeatable):
//! a packet dropped on line A only, on line B only, on both (the receiver needs the re-request
//! server), on both and unknown to the server (lost for good: the receiver must report a gap),
//! sent on line A after the next one (reordering), sent twice on line A (a duplicate); and line
//! B late by a number of packets. Once the messages are sent the session ends: heartbeats every
//! `heartbeat_ms` for `linger_ms` (the re-request server answering all the while), then an end of
//! session (count 0xFFFF) on both lines.
//!
//! The re-request server answers a 20-byte request for `count` messages of its session from
//! `sequence` with packets of at most `messages_per_packet` messages, leaving out the messages
//! lost for good (an answer in part); a request of another session, or past the end, gets no
//! answer.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::venue::nasdaq_itch::generate::{Generator, MAX_GENERATED_LEN};

/// The MoldUDP64 header: Session (10 bytes), Sequence Number (8, big-endian), Message Count (2).
const HEADER_LEN: usize = 20;
/// The Message Count of an end-of-session packet.
const END_OF_SESSION: u16 = 0xFFFF;

/// A MoldUDP64 session name, 10 bytes as sent.
pub type Session = [u8; 10];

/// A downstream packet (written here from the MoldUDP64 specification, not with the decoder's
/// code): the header, then each message as a 2-byte big-endian length and its bytes.
fn mold_packet<'m>(
    session: Session,
    sequence: u64,
    messages: impl IntoIterator<Item = &'m [u8]>,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(&session);
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let mut count = 0u16;
    for message in messages {
        out.extend_from_slice(&(message.len() as u16).to_be_bytes());
        out.extend_from_slice(message);
        count += 1;
    }
    out[18..20].copy_from_slice(&count.to_be_bytes());
}

/// A request packet read: (session, sequence, count), `None` unless exactly 20 bytes.
fn read_request(bytes: &[u8]) -> Option<(Session, u64, u16)> {
    if bytes.len() != HEADER_LEN {
        return None;
    }
    let mut session = [0u8; 10];
    session.copy_from_slice(&bytes[..10]);
    let mut sequence = [0u8; 8];
    sequence.copy_from_slice(&bytes[10..18]);
    Some((
        session,
        u64::from_be_bytes(sequence),
        u16::from_be_bytes([bytes[18], bytes[19]]),
    ))
}

/// Per-packet fault rates, in parts per million of the packets sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItchFaults {
    pub drop_a: u32,
    pub drop_b: u32,
    /// Dropped on both lines; the re-request server has it.
    pub drop_both: u32,
    /// Dropped on both lines and unknown to the re-request server.
    pub lose: u32,
    /// Sent on line A after the packet that follows it.
    pub reorder: u32,
    /// Sent twice on line A.
    pub duplicate: u32,
    /// Line B trails line A by this many packets.
    pub late_b_packets: u32,
}

/// Where the messages come from.
#[derive(Clone, Debug)]
pub enum ItchSource {
    /// A raw ITCH file's bytes (each message prefixed by its 2-byte length).
    Raw(Vec<u8>),
    /// A generated market (`Generator::new(seed, stocks, live)`), `messages` long.
    Generate {
        seed: u64,
        stocks: u16,
        live: usize,
        messages: usize,
    },
}

/// The sender's settings.
#[derive(Clone, Debug)]
pub struct ItchSimOptions {
    pub line_a: SocketAddrV4,
    pub line_b: SocketAddrV4,
    /// The sending interface's IPv4 address (`IP_MULTICAST_IF`).
    pub interface: Ipv4Addr,
    /// Where the re-request server listens.
    pub rerequest: SocketAddrV4,
    pub session: Session,
    pub source: ItchSource,
    /// At most this many messages a packet (1 to 64; the packet stays under 1,500 bytes).
    pub messages_per_packet: usize,
    /// Packets a second on each line (0: as fast as the socket takes them).
    pub packet_rate: u64,
    pub faults: ItchFaults,
    pub seed: u64,
    pub heartbeat_ms: u64,
    /// How long the session lingers after the last message, heartbeating and answering.
    pub linger_ms: u64,
    /// Multicast TTL (1: the local link).
    pub ttl: u32,
    /// Keep each packet's send time ([`ItchSim::wait_with_send_times`]), for latency
    /// benchmarks.
    pub record_send_times: bool,
}

/// When a packet left (or, dropped, would have left) on line A: for joining a receiver's
/// arrival times by sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketSent {
    /// The sequence number of its first message, and its message count.
    pub sequence: u64,
    pub count: u16,
    /// CLOCK_REALTIME ns just before it was handed to the socket.
    pub realtime_ns: u64,
    /// Dropped on both lines: only the re-request server delivers it.
    pub dropped_both: bool,
}

/// What a run sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItchSimStats {
    pub messages: u64,
    pub packets: u64,
    pub dropped_a: u64,
    pub dropped_b: u64,
    pub dropped_both: u64,
    pub lost: u64,
    /// Messages lost for good (in `lost` packets).
    pub lost_messages: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub requests: u64,
    pub answers: u64,
}

/// The session: every message by sequence number (from 1), and what the server must not know.
struct History {
    bytes: Vec<u8>,
    /// (offset, len) of message `sequence - 1`.
    spans: Vec<(usize, u16)>,
    lost: Vec<bool>,
}

impl History {
    fn message(&self, sequence: u64) -> Option<&[u8]> {
        let (at, len) = *self
            .spans
            .get(usize::try_from(sequence.checked_sub(1)?).ok()?)?;
        Some(&self.bytes[at..at + usize::from(len)])
    }
}

fn history(source: &ItchSource) -> io::Result<History> {
    let mut out = History {
        bytes: Vec::new(),
        spans: Vec::new(),
        lost: Vec::new(),
    };
    match source {
        ItchSource::Raw(raw) => {
            // Nasdaq's file format: each message after its 2-byte big-endian length.
            let mut at = 0;
            while at < raw.len() {
                let len = raw
                    .get(at..at + 2)
                    .map(|len| usize::from(u16::from_be_bytes([len[0], len[1]])));
                let Some(message) = len.and_then(|len| raw.get(at + 2..at + 2 + len)) else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("raw ITCH file: the message at byte {at} is cut short"),
                    ));
                };
                out.spans.push((out.bytes.len(), message.len() as u16));
                out.bytes.extend_from_slice(message);
                at += 2 + message.len();
            }
        }
        ItchSource::Generate {
            seed,
            stocks,
            live,
            messages,
        } => {
            let mut generator = Generator::new(*seed, *stocks, *live);
            let mut buffer = [0u8; MAX_GENERATED_LEN];
            for _ in 0..*messages {
                let len = generator.next_message(&mut buffer);
                out.spans.push((out.bytes.len(), len as u16));
                out.bytes.extend_from_slice(&buffer[..len]);
            }
        }
    }
    out.lost = vec![false; out.spans.len()];
    Ok(out)
}

/// A seeded xorshift for the faults.
struct Rng(u64);

impl Rng {
    fn per_million(&mut self, rate: u32) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        rate > 0 && (self.0 % 1_000_000) < u64::from(rate)
    }
}

fn multicast_sender(interface: Ipv4Addr, ttl: u32) -> io::Result<UdpSocket> {
    let socket = UdpSocket::bind(SocketAddrV4::new(interface, 0))?;
    socket.set_multicast_ttl_v4(ttl)?;
    socket.set_multicast_loop_v4(true)?;
    let addr = libc::in_addr {
        s_addr: u32::from_ne_bytes(interface.octets()),
    };
    // SAFETY: a valid socket and a pointer to an `in_addr` of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            std::ptr::from_ref(&addr).cast(),
            std::mem::size_of::<libc::in_addr>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
}

/// What the sender thread returns: its counts and, when asked for, each packet's send time.
type Sent = (ItchSimStats, Vec<PacketSent>);

/// A running sender; [`ItchSim::wait`] joins it.
pub struct ItchSim {
    stop: Arc<AtomicBool>,
    sender: Option<std::thread::JoinHandle<io::Result<Sent>>>,
    server: Option<std::thread::JoinHandle<()>>,
    requests: Arc<AtomicU64>,
    answers: Arc<AtomicU64>,
    /// Where the re-request server listens.
    pub rerequest: SocketAddr,
}

impl ItchSim {
    /// Binds the sockets (errors here: a bad interface, a port in use) and starts sending.
    pub fn start(options: ItchSimOptions) -> io::Result<ItchSim> {
        if !(1..=64).contains(&options.messages_per_packet) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "messages_per_packet must be 1 to 64",
            ));
        }
        let mut history = history(&options.source)?;
        // Choose the faults up front, so that the server knows what is lost for good.
        let mut rng = Rng(options.seed | 1);
        let per = options.messages_per_packet;
        let packets = history.spans.len().div_ceil(per);
        let mut plan = Vec::with_capacity(packets);
        for k in 0..packets {
            let fault = if rng.per_million(options.faults.lose) {
                for lost in &mut history.lost[k * per..((k + 1) * per).min(history.spans.len())] {
                    *lost = true;
                }
                Fault::Lose
            } else if rng.per_million(options.faults.drop_both) {
                Fault::DropBoth
            } else if rng.per_million(options.faults.drop_a) {
                Fault::DropA
            } else if rng.per_million(options.faults.drop_b) {
                Fault::DropB
            } else if rng.per_million(options.faults.reorder) {
                Fault::Reorder
            } else if rng.per_million(options.faults.duplicate) {
                Fault::Duplicate
            } else {
                Fault::None
            };
            plan.push(fault);
        }
        let history = Arc::new(history);
        let server_socket = UdpSocket::bind(options.rerequest)?;
        server_socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        let rerequest = server_socket.local_addr()?;
        let sender_socket = multicast_sender(options.interface, options.ttl)?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let answers = Arc::new(AtomicU64::new(0));
        let server = {
            let stop = stop.clone();
            let history = history.clone();
            let (requests, answers) = (requests.clone(), answers.clone());
            let (session, per) = (options.session, per);
            std::thread::Builder::new()
                .name("itch-rerequest".into())
                .spawn(move || {
                    serve(
                        &server_socket,
                        &history,
                        session,
                        per,
                        &stop,
                        &requests,
                        &answers,
                    )
                })?
        };
        let sender = {
            let stop = stop.clone();
            let (requests, answers) = (requests.clone(), answers.clone());
            std::thread::Builder::new()
                .name("itch-sender".into())
                .spawn(move || {
                    let mut times = Vec::new();
                    if options.record_send_times {
                        times.reserve_exact(plan.len());
                    }
                    let mut stats =
                        send(&sender_socket, &options, &history, &plan, &stop, &mut times)?;
                    stop.store(true, Ordering::Relaxed);
                    stats.requests = requests.load(Ordering::Relaxed);
                    stats.answers = answers.load(Ordering::Relaxed);
                    Ok((stats, times))
                })?
        };
        Ok(ItchSim {
            stop,
            sender: Some(sender),
            server: Some(server),
            requests,
            answers,
            rerequest,
        })
    }

    /// Stops early (the session still ends with its end-of-session packets).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the session has ended (every message sent, lingered, ended).
    pub fn finished(&self) -> bool {
        self.sender
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
    }

    /// Re-requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Waits for the session's end; what it sent.
    pub fn wait(self) -> io::Result<ItchSimStats> {
        self.wait_with_send_times().map(|(stats, _)| stats)
    }

    /// [`ItchSim::wait`], with every packet's send time when
    /// [`ItchSimOptions::record_send_times`] asked for them (in the order sent).
    pub fn wait_with_send_times(mut self) -> io::Result<(ItchSimStats, Vec<PacketSent>)> {
        let sent = match self.sender.take().map(std::thread::JoinHandle::join) {
            Some(Ok(sent)) => sent,
            _ => Err(io::Error::other("the sender thread panicked")),
        };
        self.stop.store(true, Ordering::Relaxed);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        let (mut stats, times) = sent?;
        stats.answers = self.answers.load(Ordering::Relaxed);
        Ok((stats, times))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    DropA,
    DropB,
    DropBoth,
    Lose,
    Reorder,
    Duplicate,
}

fn packet_of(history: &History, session: Session, k: usize, per: usize, out: &mut Vec<u8>) {
    let first = k * per;
    let last = ((k + 1) * per).min(history.spans.len());
    let messages = (first..last).filter_map(|i| history.message(i as u64 + 1));
    mold_packet(session, first as u64 + 1, messages, out);
}

/// CLOCK_REALTIME in ns (the clock of the appliance's `arrivals` records).
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

fn control(session: Session, sequence: u64, count: u16) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..10].copy_from_slice(&session);
    out[10..18].copy_from_slice(&sequence.to_be_bytes());
    out[18..].copy_from_slice(&count.to_be_bytes());
    out
}

fn send(
    socket: &UdpSocket,
    options: &ItchSimOptions,
    history: &History,
    plan: &[Fault],
    stop: &AtomicBool,
    times: &mut Vec<PacketSent>,
) -> io::Result<ItchSimStats> {
    let per = options.messages_per_packet;
    let (a, b) = (
        SocketAddr::V4(options.line_a),
        SocketAddr::V4(options.line_b),
    );
    let late = options.faults.late_b_packets as usize;
    let mut stats = ItchSimStats::default();
    let mut packet = Vec::with_capacity(2048);
    let mut held: Option<usize> = None;
    let start = Instant::now();
    let interval_ns = 1_000_000_000u64
        .checked_div(options.packet_rate)
        .unwrap_or(0);
    let send_b = |k: usize, packet: &mut Vec<u8>, stats: &mut ItchSimStats| -> io::Result<()> {
        match plan[k] {
            Fault::DropB => stats.dropped_b += 1,
            Fault::DropBoth | Fault::Lose => {}
            _ => {
                packet_of(history, options.session, k, per, packet);
                socket.send_to(packet, b)?;
            }
        }
        Ok(())
    };
    for k in 0..plan.len() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if interval_ns > 0 {
            let due = Duration::from_nanos(interval_ns * k as u64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        packet_of(history, options.session, k, per, &mut packet);
        let count = u64::from(u16::from_be_bytes([packet[18], packet[19]]));
        if options.record_send_times {
            times.push(PacketSent {
                sequence: (k * per) as u64 + 1,
                count: count as u16,
                realtime_ns: realtime_ns(),
                dropped_both: plan[k] == Fault::DropBoth,
            });
        }
        stats.packets += 1;
        stats.messages += count;
        match plan[k] {
            Fault::DropA => stats.dropped_a += 1,
            Fault::DropBoth => stats.dropped_both += 1,
            Fault::Lose => {
                stats.lost += 1;
                stats.lost_messages += count;
            }
            Fault::Reorder if held.is_none() && k + 1 < plan.len() => {
                stats.reordered += 1;
                held = Some(k);
            }
            Fault::Duplicate => {
                stats.duplicated += 1;
                socket.send_to(&packet, a)?;
                socket.send_to(&packet, a)?;
            }
            _ => {
                socket.send_to(&packet, a)?;
            }
        }
        if let Some(h) = held {
            if h != k {
                packet_of(history, options.session, h, per, &mut packet);
                socket.send_to(&packet, a)?;
                held = None;
            }
        }
        if k >= late {
            send_b(k - late, &mut packet, &mut stats)?;
        }
    }
    for k in plan.len().saturating_sub(late)..plan.len() {
        send_b(k, &mut packet, &mut stats)?;
    }
    let next = history.spans.len() as u64 + 1;
    let linger = Instant::now();
    while linger.elapsed() < Duration::from_millis(options.linger_ms) {
        let heartbeat = control(options.session, next, 0);
        socket.send_to(&heartbeat, a)?;
        socket.send_to(&heartbeat, b)?;
        std::thread::sleep(Duration::from_millis(options.heartbeat_ms.max(1)));
    }
    let end = control(options.session, next, END_OF_SESSION);
    socket.send_to(&end, a)?;
    socket.send_to(&end, b)?;
    Ok(stats)
}

fn serve(
    socket: &UdpSocket,
    history: &History,
    session: Session,
    per: usize,
    stop: &AtomicBool,
    requests: &AtomicU64,
    answers: &AtomicU64,
) {
    let mut buffer = [0u8; 64];
    let mut packet = Vec::with_capacity(2048);
    while !stop.load(Ordering::Relaxed) {
        let Ok((len, from)) = socket.recv_from(&mut buffer) else {
            continue;
        };
        let Some((asked_session, asked, count)) = read_request(&buffer[..len]) else {
            continue;
        };
        requests.fetch_add(1, Ordering::Relaxed);
        if asked_session != session {
            continue;
        }
        let end = asked
            .saturating_add(u64::from(count))
            .min(history.spans.len() as u64 + 1);
        let mut sequence = asked.max(1);
        while sequence < end {
            // What the server never had is skipped: the rest of the range is answered.
            if history.lost[(sequence - 1) as usize] {
                sequence += 1;
                continue;
            }
            let first = sequence;
            let mut messages = Vec::with_capacity(per);
            while sequence < end && messages.len() < per && !history.lost[(sequence - 1) as usize] {
                if let Some(message) = history.message(sequence) {
                    messages.push(message);
                }
                sequence += 1;
            }
            mold_packet(session, first, messages.iter().copied(), &mut packet);
            if socket.send_to(&packet, from).is_ok() {
                answers.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The IPv4 address of an interface named by name (`eth1`, `lo`) or by its address (the
/// appliance's own lookup, so that the simulator and the appliance read a name alike).
pub use tickwire::net::udp::interface_address;

/// Reads `--itch-faults`: `name=ppm` pairs separated by commas (`drop_a`, `drop_b`,
/// `drop_both`, `lose`, `reorder`, `duplicate`, in parts per million of the packets; `late_b`,
/// in packets).
pub fn parse_faults(spec: &str) -> Result<ItchFaults, String> {
    let mut faults = ItchFaults::default();
    for pair in spec.split(',').filter(|pair| !pair.trim().is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not name=value"))?;
        let value: u32 = value
            .trim()
            .parse()
            .map_err(|_| format!("{pair:?}: the value is not a whole number"))?;
        let field = match name.trim() {
            "drop_a" => &mut faults.drop_a,
            "drop_b" => &mut faults.drop_b,
            "drop_both" => &mut faults.drop_both,
            "lose" => &mut faults.lose,
            "reorder" => &mut faults.reorder,
            "duplicate" => &mut faults.duplicate,
            "late_b" => &mut faults.late_b_packets,
            other => {
                return Err(format!(
                    "{other:?} is not a fault; valid: drop_a, drop_b, drop_both, lose, reorder, \
                     duplicate (parts per million of the packets), late_b (packets)"
                ))
            }
        };
        if name.trim() != "late_b" && value > 1_000_000 {
            return Err(format!("{pair:?}: at most 1000000 per million"));
        }
        *field = value;
    }
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_and_interfaces_are_read() {
        let faults = parse_faults("drop_a=100, drop_both=5,late_b=3").unwrap();
        assert_eq!(
            faults,
            ItchFaults {
                drop_a: 100,
                drop_both: 5,
                late_b_packets: 3,
                ..ItchFaults::default()
            }
        );
        assert!(parse_faults("drop_c=1").is_err());
        assert!(parse_faults("drop_a=2000000").is_err());
        assert!(parse_faults("drop_a").is_err());
        assert_eq!(interface_address("lo").unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(
            interface_address("10.1.2.3").unwrap(),
            Ipv4Addr::new(10, 1, 2, 3)
        );
        assert!(interface_address("no-such-if0").is_err());
    }
}
