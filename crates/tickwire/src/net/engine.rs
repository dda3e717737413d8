//! The network thread's loop body: streams (TCP, optionally TLS, optionally WebSocket) over a
//! [`Transport`], with every received message written into the decoder's frame ring.
//!
//! Per received chunk of bytes the path is: TLS decrypt (`tls::TlsClient`) into the stream's
//! plaintext buffer, WebSocket unframe (`ws::Client`) in place, and one copy of each message's
//! payload into the frame ring behind its receive timestamp. A stream without WebSocket (a
//! binary feed such as DBN) hands every received chunk to the ring as it is. Control traffic the
//! protocol owes the server (pongs, close echoes, TLS records) is sent in the same poll.
//!
//! Per slot the engine also keeps when the stream last read anything (data, pongs, TLS records):
//! the receive timestamp of its latest completion, in a table of atomics that other threads read
//! without a lock ([`NetEngine::last_read`]). A venue whose heartbeat is our ping
//! ([`NetEngine::ping`]) is judged dead by that time standing still.
//!
//! A raw stream may start with a plaintext exchange before its bytes are data (Databento's
//! gateway authenticates with a challenge and response): a [`Preamble`], a sans-IO state machine
//! the engine feeds what the server sent and whose answers it sends. Once it is done the stream is
//! `Open`, and whatever the server sent after the preamble is the stream's first frame.
//!
//! Frame layout in the ring: 8 bytes of receive time (ns since the epoch, little-endian), then the
//! payload. The frame's tag is the stream's [`ConnId`] in its low 24 bits and a [`FrameKind`] in
//! its top 8 bits.
//!
//! A datagram venue's slot ([`NetEngine::open_datagrams`]: multicast lines and a re-request
//! socket, `net::udp`) has no stream: each datagram is its own frame, of kind
//! [`FrameKind::LineA`], [`FrameKind::LineB`] or [`FrameKind::Reply`] by the socket it came on,
//! stamped with the kernel's receive time where the kernel gave one, its payload led by the
//! socket's kernel drop count ([`split_datagram`]). The slot reports `Connected` when its
//! sockets are open and `Open` with its first datagram: a datagram venue is live when datagrams
//! flow. A full ring drops the datagram (counted, the slot flagged): the venue's own sequence
//! numbers find the hole, and its recovery fills it.
//!
//! A datagram slot's lines may instead be read through AF_XDP ([`udp::XdpLines`], `net::xdp`):
//! the slot then owns an [`XdpReceiver`] (the XDP program on the interface and a socket per
//! queue) that every `poll` drains after the transport's events, writing the same frames
//! (same kinds, same head: the drop count is the kernel's `XDP_STATISTICS` for the receiver's
//! sockets plus the frames it refused as malformed (fragments, truncated, bad headers or
//! checksums), read at most every 100 ms and shared by the lines on the receiver; the timestamp
//! is the clock read once per batch, at reap). The line's kernel socket stays joined and unread; re-requests and their answers keep
//! the unicast kernel socket. While any slot has an AF_XDP receiver the transport is polled
//! without sleeping in the kernel (an AF_XDP ring has no completion to wake the transport's
//! wait): the thread's own wait strategy (`[threads.net] wait`) says how the loop idles. Where
//! the program cannot be attached or a socket bound (no `CAP_BPF`/`CAP_NET_ADMIN`/
//! `CAP_NET_RAW`, an interface without XDP, a program already there), the lines fall back to
//! their kernel sockets and [`DatagramNotes::warning`] says why, once.
//!
//! **Invariant:** a full frame ring never blocks the network thread: the message is dropped,
//! counted against its stream, and the stream is flagged ([`StreamStats::overflowed`]) so that the
//! venue layer resynchronises. A raw byte stream cannot lose a chunk and stay readable (the
//! records after the hole would be misread), so a raw stream that loses one is closed with
//! [`StreamError::Overrun`] instead: the venue layer reconnects and recovers.

use super::udp::{self, DatagramLine, DatagramSpec, XdpLines};
use super::xdp::socket::UmemConfig;
use super::xdp::{XdpConfig, XdpReceiver};
use super::{ConnId, IoEvent, NetError, Transport, WaitMode};
use crate::ring::FrameProducer;
use crate::thread::Wakeup;
use crate::tls::{ReadOutcome, TlsClient, TlsError};
use crate::ws::{self, HandshakeStatus};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of receive timestamp in front of every frame's payload.
pub const FRAME_TS_BYTES: usize = 8;
/// Bits of a frame tag that hold the connection id.
pub const TAG_CONN_MASK: u32 = 0x00ff_ffff;

/// What a frame's payload is (top 8 bits of its tag).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A chunk of a raw byte stream (no WebSocket).
    Bytes = 0,
    /// A WebSocket text message.
    Text = 1,
    /// A WebSocket binary message.
    Binary = 2,
    /// A datagram of a datagram slot's line A ([`split_datagram`] reads its payload).
    LineA = 3,
    /// A datagram of line B.
    LineB = 4,
    /// A datagram on the slot's unicast socket: an answer to a request.
    Reply = 5,
    /// The control thread's notice that the connection went down ([`DisconnectNotice`]),
    /// written by the network thread after every frame it wrote for the connection, so that
    /// the decoder handles the disconnect in order with them.
    Disconnect = 6,
}

/// What a [`FrameKind::Disconnect`] frame carries: the venue and the instruments the
/// connection carried (little-endian `u16`, `u32`, `u32`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisconnectNotice {
    pub venue: u16,
    pub instruments: std::ops::Range<u32>,
}

impl DisconnectNotice {
    pub const BYTES: usize = 10;

    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut bytes = [0u8; Self::BYTES];
        bytes[..2].copy_from_slice(&self.venue.to_le_bytes());
        bytes[2..6].copy_from_slice(&self.instruments.start.to_le_bytes());
        bytes[6..].copy_from_slice(&self.instruments.end.to_le_bytes());
        bytes
    }

    /// `None` for a payload of another length.
    pub fn from_bytes(bytes: &[u8]) -> Option<DisconnectNotice> {
        let bytes: &[u8; Self::BYTES] = bytes.try_into().ok()?;
        let (venue, rest) = bytes.split_first_chunk::<2>()?;
        let (start, end) = rest.split_first_chunk::<4>()?;
        let end: &[u8; 4] = end.try_into().ok()?;
        Some(DisconnectNotice {
            venue: u16::from_le_bytes(*venue),
            instruments: u32::from_le_bytes(*start)..u32::from_le_bytes(*end),
        })
    }
}

impl FrameKind {
    pub fn from_tag(tag: u32) -> FrameKind {
        match tag >> 24 {
            1 => FrameKind::Text,
            2 => FrameKind::Binary,
            3 => FrameKind::LineA,
            4 => FrameKind::LineB,
            5 => FrameKind::Reply,
            6 => FrameKind::Disconnect,
            _ => FrameKind::Bytes,
        }
    }

    /// The datagram socket a datagram frame came on (`None` for a stream's frame).
    pub fn datagram_line(self) -> Option<DatagramLine> {
        match self {
            FrameKind::LineA => Some(DatagramLine::A),
            FrameKind::LineB => Some(DatagramLine::B),
            FrameKind::Reply => Some(DatagramLine::Reply),
            FrameKind::Bytes | FrameKind::Text | FrameKind::Binary | FrameKind::Disconnect => None,
        }
    }

    fn of_line(line: DatagramLine) -> FrameKind {
        match line {
            DatagramLine::A => FrameKind::LineA,
            DatagramLine::B => FrameKind::LineB,
            DatagramLine::Reply => FrameKind::Reply,
        }
    }
}

/// Bytes in front of a datagram frame's datagram: its socket's kernel drop count.
pub const DATAGRAM_HEAD_BYTES: usize = 4;

/// Splits a datagram frame's payload (after [`split_frame`]) into the count of datagrams the
/// kernel had dropped on its socket by then (`SO_RXQ_OVFL`; 0 until it reports any) and the
/// datagram.
pub fn split_datagram(payload: &[u8]) -> Option<(u32, &[u8])> {
    let (head, datagram) = payload.split_first_chunk::<DATAGRAM_HEAD_BYTES>()?;
    Some((u32::from_le_bytes(*head), datagram))
}

/// Splits a frame tag into its connection and kind.
pub fn split_tag(tag: u32) -> (ConnId, FrameKind) {
    (tag & TAG_CONN_MASK, FrameKind::from_tag(tag))
}

/// Splits a frame into its receive timestamp and payload (`None` for a frame too short to have
/// been written by the engine).
pub fn split_frame(frame: &[u8]) -> Option<(u64, &[u8])> {
    let (ts, payload) = frame.split_first_chunk::<FRAME_TS_BYTES>()?;
    Some((u64::from_le_bytes(*ts), payload))
}

/// The WebSocket part of a stream. Its `Debug` names the extra headers but not their values.
#[derive(Clone)]
pub struct WebSocketTarget {
    /// Host for the `Host` header (a name or an IP literal).
    pub host: String,
    pub port: u16,
    /// The request target: path and query.
    pub path: String,
    pub secure: bool,
    pub max_message_bytes: usize,
    /// Extra header fields of the upgrade request (Binance Spot SBE's `X-MBX-APIKEY`). A value
    /// may be a secret: the engine never logs them.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for WebSocketTarget {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        formatter
            .debug_struct("WebSocketTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.path)
            .field("secure", &self.secure)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("headers", &names)
            .finish()
    }
}

/// What to connect to and which layers to run.
#[derive(Clone)]
pub struct StreamSpec {
    pub addr: SocketAddr,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub websocket: Option<WebSocketTarget>,
    /// Makes a raw stream's opening exchange, a fresh one per connection (ignored with
    /// `websocket`).
    pub preamble: Option<PreambleMaker>,
}

/// Makes a [`Preamble`] for each new connection of a stream.
pub type PreambleMaker = Arc<dyn Fn() -> Box<dyn Preamble> + Send + Sync>;

/// How far a [`Preamble`] got with the bytes it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreambleStep {
    /// Bytes of the input it used; the engine passes the rest again with what arrives next.
    pub consumed: usize,
    /// The exchange is over: the bytes after `consumed` are the stream's data.
    pub done: bool,
}

/// A raw stream's plaintext opening exchange, sans-IO: the engine hands it what the server sent
/// (after TLS, when the stream has TLS) and sends what it writes into `reply`.
pub trait Preamble: Send {
    fn read(&mut self, input: &[u8], reply: &mut Vec<u8>) -> Result<PreambleStep, PreambleError>;
}

/// Why a preamble failed: the server's own words where it gave any.
#[derive(Debug, thiserror::Error)]
pub enum PreambleError {
    /// The server refused the credentials.
    #[error("authentication refused: {0}")]
    Refused(String),
    /// The server said something the exchange does not allow.
    #[error("{0}")]
    Protocol(String),
}

/// A stream's state change, reported to the caller of [`NetEngine::poll`].
#[derive(Debug)]
pub enum StreamEvent {
    /// The TCP connection is up; TLS and the WebSocket upgrade (when the stream has them) follow.
    Connected,
    /// The TLS handshake finished (TLS streams only); the WebSocket upgrade (if any) follows.
    Secured,
    /// Connected and upgraded: messages flow and [`NetEngine::send_text`] works.
    Open,
    /// Closed: cleanly (`error` none; `close_code` set when the server sent a WebSocket close)
    /// or by a failure. The slot is free again.
    Closed {
        close_code: Option<u16>,
        error: Option<StreamError>,
    },
}

/// Why a stream ended.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("connect failed: {0}")]
    Connect(io::Error),
    #[error("connection lost: {0}")]
    Io(io::Error),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("WebSocket handshake: {0}")]
    Handshake(ws::HandshakeError),
    #[error("WebSocket protocol error: {0} (closed with {code})", code = .0.close_code())]
    WebSocket(ws::Error),
    #[error("the server closed the connection before the handshake completed")]
    ClosedDuringHandshake,
    #[error("the server closed the TCP connection without a WebSocket close")]
    ClosedWithoutClose,
    #[error("{0}")]
    Preamble(PreambleError),
    #[error("the frame ring was full and {0} bytes of the byte stream were lost; the stream cannot be read past the hole")]
    Overrun(usize),
}

/// Per-stream counters, readable through [`NetEngine::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub messages: u64,
    pub bytes: u64,
    /// Messages dropped because the frame ring was full.
    pub dropped: u64,
    /// Set when a message was dropped; cleared by [`NetEngine::take_overflow`].
    pub overflowed: bool,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Phase {
    Connecting,
    /// TCP is up; TLS and/or the WebSocket upgrade are in progress.
    Handshaking,
    Open,
}

struct Stream {
    spec_ws: Option<WebSocketTarget>,
    preamble: Option<Box<dyn Preamble>>,
    phase: Phase,
    tls: Option<TlsClient>,
    handshake: Option<ws::Handshake>,
    ws: Option<ws::Client>,
    /// Plaintext received and not yet consumed: `plaintext[start..end]`.
    plaintext: Vec<u8>,
    start: usize,
    end: usize,
    /// Reused buffers for outgoing bytes (WebSocket output, TLS records).
    out_plain: Vec<u8>,
    out_cipher: Vec<u8>,
    stats: StreamStats,
    /// The server's WebSocket close code, once it sent one.
    close_code: Option<u16>,
    /// `StreamEvent::Secured` was reported.
    secured: bool,
}

/// A datagram slot ([`NetEngine::open_datagrams`]).
struct DatagramStream {
    stats: StreamStats,
    /// `Open` was reported (with the first datagram).
    open: bool,
    /// By line: the kernel's drop count as last reported.
    kernel_drops: [u32; 3],
    /// Socket errors (each counted; the slot stays open).
    errors: u64,
    /// The lines read through AF_XDP, when the spec asked for it and it could be set up.
    xdp: Option<XdpSource>,
}

/// A datagram slot's AF_XDP lines.
struct XdpSource {
    receiver: XdpReceiver,
    /// The receiver's feeds (group and port), each with the line it is.
    lines: [Option<(SocketAddrV4, DatagramLine)>; 2],
    /// The lines' kernel sockets: joined, so that the group is delivered, and never read.
    _joined: Vec<OwnedFd>,
    /// The kernel's drop count of the receiver's sockets (`XDP_STATISTICS`), as last read.
    kernel_drops: u32,
    /// When it is read next (the transport's clock).
    next_stats_ns: u64,
}

/// Frames read from each AF_XDP queue per `poll`.
const XDP_BATCH: u32 = 64;
/// How often the AF_XDP sockets' kernel drop counts are read (one `getsockopt` per socket).
const XDP_STATS_NS: u64 = 100_000_000;

/// What [`NetEngine::open_datagrams`] has to say, for the caller to log: how the AF_XDP lines
/// run, or why they fell back to their kernel sockets (one line).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DatagramNotes {
    pub info: Option<String>,
    pub warning: Option<String>,
}

/// Sets up `xdp`'s lines of `spec`; on success takes their kernel sockets out of `sockets`
/// (kept joined, unread). The error is the one warning line of the fallback.
fn open_xdp(
    spec: &DatagramSpec,
    xdp: &XdpLines,
    sockets: &mut udp::DatagramSockets,
) -> Result<(XdpSource, String), String> {
    let mut lines = [None, None];
    let mut feeds = Vec::with_capacity(2);
    for (index, line) in [DatagramLine::A, DatagramLine::B].into_iter().enumerate() {
        if let (true, Some(config)) = (xdp.lines[index], spec.lines[index]) {
            lines[index] = Some((config.group, line));
            feeds.push(config.group);
        }
    }
    let names: Vec<&str> = lines
        .iter()
        .flatten()
        .map(|(_, line)| match line {
            DatagramLine::A => "A",
            DatagramLine::B => "B",
            DatagramLine::Reply => "reply",
        })
        .collect();
    let names = names.join(" and ");
    // As much slack as the lines' kernel sockets would have had: a UMEM of as many 2 KiB frames
    // as their receive buffer holds bytes (16 MiB: 8,192 frames per queue), at least the
    // default's 4,096 and at most 32,768. A receiver that stalls longer than that loses frames
    // (the kernel's `rx_fill_ring_empty`, counted as the lines' drops).
    let umem = {
        let defaults = UmemConfig::default();
        let rcvbuf = spec.largest_rcvbuf().unwrap_or(0);
        let frames = (rcvbuf / defaults.frame_bytes as usize)
            .clamp(defaults.frames as usize, 1 << 15)
            .next_power_of_two() as u32;
        UmemConfig {
            frames,
            busy_poll_us: xdp.busy_poll_us,
            ..defaults
        }
    };
    let config = XdpConfig {
        interface: xdp.interface().to_owned(),
        feeds,
        queues: xdp.queue_list(),
        umem,
        force_generic: false,
        verify_udp_checksum: false,
    };
    match XdpReceiver::open(&config) {
        Ok(receiver) => {
            let mut joined = Vec::with_capacity(2);
            for (index, line) in lines.iter().enumerate() {
                if line.is_some() {
                    joined.extend(sockets[index].take());
                }
            }
            let info = format!("line {names}: {}", receiver.describe());
            Ok((
                XdpSource {
                    receiver,
                    lines,
                    _joined: joined,
                    kernel_drops: 0,
                    next_stats_ns: 0,
                },
                info,
            ))
        }
        Err(error) => {
            let hint = if error.is_permission() {
                " (needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW)"
            } else {
                ""
            };
            Err(format!(
                "af-xdp unavailable for line {names} on {}: {error}{hint}; falling back to the \
                 kernel socket",
                xdp.interface()
            ))
        }
    }
}

/// Drains a datagram slot's AF_XDP queues into its ring; returns the frames read.
fn poll_xdp(
    conn: ConnId,
    slot: &mut DatagramStream,
    transport: &Transport,
    frames: &mut FrameRoutes,
    last_read: &[AtomicU64],
    events: &mut Vec<(ConnId, StreamEvent)>,
) -> u32 {
    let Some(source) = slot.xdp.as_mut() else {
        return 0;
    };
    let lines = source.lines;
    let drops = source.kernel_drops;
    let stats = &mut slot.stats;
    let mut now = 0u64;
    let read = source.receiver.poll(XDP_BATCH, |datagram| {
        let Some(line) = lines
            .iter()
            .flatten()
            .find(|(group, _)| *group == datagram.destination)
            .map(|&(_, line)| line)
        else {
            return;
        };
        if now == 0 {
            // One clock read per batch: the time the frames were reaped.
            now = transport.now_ns();
        }
        write_datagram(
            stats,
            conn,
            line,
            drops,
            datagram.payload,
            now,
            frames.for_conn(conn),
        );
    });
    if now != 0 {
        if let Some(read) = last_read.get(conn as usize) {
            read.store(now, Ordering::Relaxed);
        }
        if !slot.open {
            slot.open = true;
            events.push((conn, StreamEvent::Open));
        }
        if now >= source.next_stats_ns {
            // What the lines lost before user space could hand it on: the kernel's counts, and
            // the frames for the lines' groups refused as not a whole, well-formed datagram.
            let kernel = source.receiver.kernel_counters();
            let refused = source.receiver.counters();
            let total = kernel.rx_dropped
                + kernel.rx_ring_full
                + kernel.rx_fill_ring_empty
                + refused.truncated
                + refused.bad_headers
                + refused.bad_checksums
                + refused.fragments;
            source.kernel_drops = u32::try_from(total).unwrap_or(u32::MAX);
            source.next_stats_ns = now + XDP_STATS_NS;
            // As `NetEngine::datagram_counts` reports them, beside the kernel sockets' counts.
            for (_, line) in lines.iter().flatten() {
                slot.kernel_drops[*line as usize] = source.kernel_drops;
            }
        }
    }
    read
}

/// The plaintext buffer at most: large enough for a TLS record and for the unfragmented frames
/// that are unframed in place; longer frames are assembled by `ws::Client` itself.
const PLAINTEXT_BYTES: usize = 256 * 1024;
/// The plaintext buffer at least (four TLS records).
const MIN_PLAINTEXT_BYTES: usize = 64 * 1024;

/// A stream's plaintext buffer: twice its largest WebSocket message and header, so that a whole
/// message is unframed in place (`max_borrowed_payload_bytes` is half of it), between
/// [`MIN_PLAINTEXT_BYTES`] and [`PLAINTEXT_BYTES`], in whole pages. The buffer is written from
/// end to end over time (it is compacted only once past half), so what it is sized at is
/// resident: a lean profile's 64 KiB messages need 132 KiB, not 256 KiB.
fn plaintext_bytes(websocket: Option<&WebSocketTarget>) -> usize {
    websocket.map_or(PLAINTEXT_BYTES, |target| {
        let wanted = target
            .max_message_bytes
            .saturating_add(WS_HEADER_BYTES)
            .saturating_mul(2);
        wanted
            .clamp(MIN_PLAINTEXT_BYTES, PLAINTEXT_BYTES)
            .next_multiple_of(4096)
            .min(PLAINTEXT_BYTES)
    })
}
/// The longest frame header (RFC 6455 section 5.2).
const WS_HEADER_BYTES: usize = 14;

/// The frame rings the network thread writes, one per decoder, and which ring each connection
/// slot's frames go to (its venue's decoder). A slot has one ring for its whole life, so a
/// connection's frames stay in order; a full ring refuses the frame (counted, never waited for)
/// without touching the other decoders' rings.
///
/// The engine publishes after every read it handles, not once a round: a frame never waits in
/// its ring, unseen by its decoder, while the network thread reads other connections (another
/// venue's burst read in the same round would otherwise hold it back, issue 36's isolation).
/// Each publish wakes the ring's decoder ([`FrameRoutes::wake_with`]): one fence and one load
/// while it spins.
pub struct FrameRoutes {
    rings: Vec<FrameProducer>,
    /// By connection slot: the index of its ring (slots past the end use ring 0).
    route: Vec<u8>,
    /// Bit `i`: ring `i` was written since the last [`FrameRoutes::publish`].
    written: u64,
    /// By ring: the decoder thread to wake when the ring is published (`None`: a decoder polled
    /// on the network thread itself, or no wake-up given).
    wakeups: Vec<Option<Wakeup>>,
}

impl FrameRoutes {
    /// The most rings (a route is a byte, the written mask a word).
    pub const MAX_RINGS: usize = 64;

    /// One ring for every connection.
    pub fn single(ring: FrameProducer) -> FrameRoutes {
        FrameRoutes {
            rings: vec![ring],
            route: Vec::new(),
            written: 0,
            wakeups: Vec::new(),
        }
    }

    /// `rings` (at most [`FrameRoutes::MAX_RINGS`], at least one), with `route[conn]` the ring
    /// of each connection slot; a route past the last ring counts as ring 0.
    pub fn new(rings: Vec<FrameProducer>, route: Vec<u8>) -> FrameRoutes {
        assert!(
            !rings.is_empty() && rings.len() <= Self::MAX_RINGS,
            "1 to 64 frame rings"
        );
        let count = rings.len();
        FrameRoutes {
            rings,
            route: route
                .into_iter()
                .map(|ring| if usize::from(ring) < count { ring } else { 0 })
                .collect(),
            written: 0,
            wakeups: Vec::new(),
        }
    }

    /// Has each publish of ring `i` wake `wakeups[i]` (by decoder index; `None` for a decoder
    /// on the network thread).
    pub fn wake_with(&mut self, wakeups: Vec<Option<Wakeup>>) {
        self.wakeups = wakeups;
    }

    /// The ring that `conn`'s frames go to (its venue's decoder's), marked as written.
    #[inline]
    pub fn for_conn(&mut self, conn: ConnId) -> &mut FrameProducer {
        let ring = self
            .route
            .get(conn as usize)
            .map_or(0, |&ring| ring as usize);
        self.written |= 1 << ring;
        // `new` keeps every route below the ring count.
        &mut self.rings[ring]
    }

    /// Publishes every ring written since the last call and wakes each one's decoder (see
    /// [`FrameRoutes::wake_with`]); returns which were (bit `i`: ring `i`).
    #[inline]
    pub fn publish(&mut self) -> u64 {
        let written = std::mem::take(&mut self.written);
        let mut bits = written;
        while bits != 0 {
            let ring = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.rings[ring].publish();
            if let Some(Some(wakeup)) = self.wakeups.get(ring) {
                wakeup.wake();
            }
        }
        written
    }
}

/// Streams over one transport, writing messages into their decoders' frame rings.
pub struct NetEngine {
    transport: Transport,
    frames: FrameRoutes,
    streams: Vec<Option<Stream>>,
    wait: WaitMode,
    /// Events produced while handling I/O, handed out at the end of `poll`.
    pending: Vec<(ConnId, StreamEvent)>,
    /// Disconnect notices not yet in their frame ring (it was full), oldest first: written
    /// before anything else at the next poll.
    notices: Vec<(ConnId, DisconnectNotice)>,
    /// Streams that received bytes in this poll: the only ones that may owe the server bytes
    /// or have finished their closing handshake.
    touched: Vec<ConnId>,
    /// Per slot: the receive timestamp of the stream's latest read (see [`NetEngine::last_read`]).
    last_read: Arc<[AtomicU64]>,
    /// Per slot: its datagram sockets' state, when it is a datagram slot.
    datagrams: Vec<Option<DatagramStream>>,
    /// The datagram slots that have AF_XDP lines.
    xdp_slots: Vec<ConnId>,
}

impl NetEngine {
    pub fn new(
        transport: Transport,
        frames: FrameProducer,
        wait: WaitMode,
        max_connections: u32,
    ) -> NetEngine {
        let last_read = (0..max_connections).map(|_| AtomicU64::new(0)).collect();
        NetEngine::with_last_read(transport, frames, wait, last_read)
    }

    /// Like [`NetEngine::new`], with the per-slot last-read times written into `last_read`, a
    /// table the caller made so that it can hand it to other threads before the engine exists
    /// (the engine is built on the network thread). One slot per entry.
    pub fn with_last_read(
        transport: Transport,
        frames: FrameProducer,
        wait: WaitMode,
        last_read: Arc<[AtomicU64]>,
    ) -> NetEngine {
        NetEngine::with_routes(transport, FrameRoutes::single(frames), wait, last_read)
    }

    /// Like [`NetEngine::with_last_read`], writing each connection's frames into its own
    /// decoder's ring ([`FrameRoutes`]).
    pub fn with_routes(
        transport: Transport,
        frames: FrameRoutes,
        wait: WaitMode,
        last_read: Arc<[AtomicU64]>,
    ) -> NetEngine {
        let slots = last_read.len();
        NetEngine {
            transport,
            frames,
            streams: (0..slots).map(|_| None).collect(),
            wait,
            pending: Vec::with_capacity(slots),
            notices: Vec::with_capacity(slots),
            touched: Vec::with_capacity(slots),
            last_read,
            datagrams: (0..slots).map(|_| None).collect(),
            xdp_slots: Vec::with_capacity(slots),
        }
    }

    /// Opens a datagram venue's sockets in slot `conn` (joins its lines, connects its request
    /// socket) and reads them: `StreamEvent::Connected` follows at once, `Open` with the first
    /// datagram. A refused join or socket is an error now, nothing half open. Lines the spec
    /// reads through AF_XDP get their receiver here (which may wait up to 3 s for a queue a
    /// process that just ended still holds); where it cannot be set up they are read through
    /// their kernel sockets, and the notes' warning says why.
    pub fn open_datagrams(
        &mut self,
        conn: ConnId,
        spec: &DatagramSpec,
    ) -> Result<DatagramNotes, StreamOpenError> {
        let free = self.streams.get(conn as usize).is_some_and(Option::is_none)
            && self
                .datagrams
                .get(conn as usize)
                .is_some_and(Option::is_none);
        if !free {
            return Err(StreamOpenError::SlotBusy(conn));
        }
        let mut sockets = udp::open_spec(spec).map_err(NetError::Io)?;
        let mut notes = DatagramNotes::default();
        let xdp = match &spec.xdp {
            Some(lines) => match open_xdp(spec, lines, &mut sockets) {
                Ok((source, info)) => {
                    notes.info = Some(info);
                    Some(source)
                }
                Err(warning) => {
                    notes.warning = Some(warning);
                    None
                }
            },
            None => None,
        };
        self.transport.open_datagrams(conn, sockets)?;
        if xdp.is_some() {
            self.xdp_slots.push(conn);
        }
        if let Some(slot) = self.last_read.get(conn as usize) {
            slot.store(self.transport.now_ns(), Ordering::Relaxed);
        }
        self.datagrams[conn as usize] = Some(DatagramStream {
            stats: StreamStats::default(),
            open: false,
            kernel_drops: [0; 3],
            errors: 0,
            xdp,
        });
        self.pending.push((conn, StreamEvent::Connected));
        Ok(notes)
    }

    /// Sends one datagram (a request) on socket `line` of datagram slot `conn`, without
    /// blocking.
    pub fn send_datagram(
        &mut self,
        conn: ConnId,
        line: DatagramLine,
        bytes: &[u8],
    ) -> Result<(), NetError> {
        if self
            .datagrams
            .get(conn as usize)
            .is_none_or(Option::is_none)
        {
            return Err(NetError::NotOpen(conn));
        }
        self.transport.send_datagram(conn, line, bytes)
    }

    /// A datagram slot's kernel drop counts by line (`SO_RXQ_OVFL`, as last reported) and its
    /// socket errors; `None` for a slot that is not one.
    pub fn datagram_counts(&self, conn: ConnId) -> Option<([u32; 3], u64)> {
        self.datagrams
            .get(conn as usize)
            .and_then(Option::as_ref)
            .map(|datagrams| (datagrams.kernel_drops, datagrams.errors))
    }

    /// Closes a datagram slot (no event); false when `conn` is not one.
    fn close_datagrams(&mut self, conn: ConnId) -> bool {
        if self
            .datagrams
            .get_mut(conn as usize)
            .and_then(Option::take)
            .is_none()
        {
            return false;
        }
        self.xdp_slots.retain(|&slot| slot != conn);
        self.transport.close(conn);
        true
    }

    /// Per slot: the receive timestamp (ns since the epoch, the clock of frames' `recv_ts_ns`)
    /// of the latest bytes read on the slot's stream, whatever they were (data, pongs, TLS
    /// records); the time its stream was opened until it reads anything; 0 for a slot never
    /// opened. Written by the network thread alone with one relaxed store per receive
    /// completion (the completion's own timestamp, no extra clock read); any thread may load
    /// it. A slot keeps its last value after its stream closes.
    pub fn last_read(&self) -> &Arc<[AtomicU64]> {
        &self.last_read
    }

    /// `conn`'s entry of [`NetEngine::last_read`] (0 out of range).
    pub fn last_read_ns(&self, conn: ConnId) -> u64 {
        self.last_read
            .get(conn as usize)
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// Starts a stream in slot `conn`; `StreamEvent::Open` or `Closed` follows from `poll`.
    pub fn open(&mut self, conn: ConnId, spec: StreamSpec) -> Result<(), StreamOpenError> {
        if self.streams.get(conn as usize).is_none_or(Option::is_some) {
            return Err(StreamOpenError::SlotBusy(conn));
        }
        let tls = match spec.tls {
            Some((config, name)) => Some(TlsClient::new(config, name)?),
            None => None,
        };
        self.transport.connect(conn, spec.addr)?;
        // A new stream has read nothing yet: its silence is counted from now, not from the
        // slot's previous stream.
        if let Some(slot) = self.last_read.get(conn as usize) {
            slot.store(self.transport.now_ns(), Ordering::Relaxed);
        }
        let plaintext_len = plaintext_bytes(spec.websocket.as_ref());
        self.streams[conn as usize] = Some(Stream {
            preamble: spec
                .preamble
                .filter(|_| spec.websocket.is_none())
                .map(|make| make()),
            spec_ws: spec.websocket,
            phase: Phase::Connecting,
            tls,
            handshake: None,
            ws: None,
            plaintext: vec![0; plaintext_len],
            start: 0,
            end: 0,
            out_plain: Vec::with_capacity(4096),
            out_cipher: Vec::with_capacity(16 * 1024),
            stats: StreamStats::default(),
            close_code: None,
            secured: false,
        });
        Ok(())
    }

    /// Sends a text message (a subscription request, say) on an open stream: a WebSocket text
    /// message, or the bytes as they are on a raw stream.
    pub fn send_text(&mut self, conn: ConnId, text: &str) -> Result<(), StreamSendError> {
        let raw = self
            .streams
            .get(conn as usize)
            .and_then(Option::as_ref)
            .is_some_and(|stream| stream.spec_ws.is_none());
        if raw {
            return self.send_raw(conn, text.as_bytes());
        }
        self.send_message(conn, ws::MessageKind::Text, text.as_bytes())
    }

    /// Sends bytes as they are on an open raw stream (through TLS when it has TLS).
    pub fn send_raw(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), StreamSendError> {
        let stream = self
            .streams
            .get_mut(conn as usize)
            .and_then(Option::as_mut)
            .filter(|stream| stream.phase == Phase::Open)
            .ok_or(StreamSendError::NotOpen(conn))?;
        stream.out_plain.extend_from_slice(bytes);
        if let Err(error) = flush(&mut self.transport, conn, stream) {
            let event = self.fail(conn, error);
            self.pending.push((conn, event));
        }
        Ok(())
    }

    /// Sends a WebSocket message of either kind on an open stream.
    pub fn send_message(
        &mut self,
        conn: ConnId,
        kind: ws::MessageKind,
        payload: &[u8],
    ) -> Result<(), StreamSendError> {
        self.send_with(conn, |client| client.send(kind, payload))
    }

    /// Sends a WebSocket ping (RFC 6455 section 5.5.2) on an open stream, for a venue that
    /// wants the client's pings as its heartbeat. The payload is the send time (ns since the
    /// epoch, 8 bytes little-endian). The server's pong is read like any pong: it counts as a
    /// read in [`NetEngine::last_read`] and is never written to the frame ring.
    pub fn ping(&mut self, conn: ConnId) -> Result<(), StreamSendError> {
        let sent_ns = self.transport.now_ns();
        self.send_with(conn, |client| client.send_ping(&sent_ns.to_le_bytes()))
    }

    /// Queues a frame on an open WebSocket stream with `queue` and sends it at once.
    fn send_with(
        &mut self,
        conn: ConnId,
        queue: impl FnOnce(&mut ws::Client) -> Result<(), ws::SendError>,
    ) -> Result<(), StreamSendError> {
        let stream = self
            .streams
            .get_mut(conn as usize)
            .and_then(Option::as_mut)
            .filter(|stream| stream.phase == Phase::Open)
            .ok_or(StreamSendError::NotOpen(conn))?;
        let client = stream
            .ws
            .as_mut()
            .ok_or(StreamSendError::NotWebSocket(conn))?;
        queue(client).map_err(StreamSendError::WebSocket)?;
        if let Err(error) = flush(&mut self.transport, conn, stream) {
            let event = self.fail(conn, error);
            self.pending.push((conn, event));
        }
        Ok(())
    }

    /// Starts the WebSocket closing handshake (or closes a raw stream or a datagram slot at
    /// once).
    pub fn close(&mut self, conn: ConnId, code: u16) {
        if self.close_datagrams(conn) {
            self.pending.push((
                conn,
                StreamEvent::Closed {
                    close_code: None,
                    error: None,
                },
            ));
            return;
        }
        let Some(stream) = self.streams.get_mut(conn as usize).and_then(Option::as_mut) else {
            return;
        };
        match stream.ws.as_mut() {
            Some(client) if stream.phase == Phase::Open => {
                let _ = client.close(code, "");
                if let Err(error) = flush(&mut self.transport, conn, stream) {
                    let event = self.fail(conn, error);
                    self.pending.push((conn, event));
                }
            }
            _ => {
                self.transport.close(conn);
                self.streams[conn as usize] = None;
                self.pending.push((
                    conn,
                    StreamEvent::Closed {
                        close_code: None,
                        error: None,
                    },
                ));
            }
        }
    }

    /// Drops a stream at once, whatever its phase: no close frame, no event. For a peer that
    /// does not finish a handshake or a closing handshake in time.
    pub fn abort(&mut self, conn: ConnId) {
        self.close_datagrams(conn);
        if let Some(slot) = self.streams.get_mut(conn as usize) {
            if slot.take().is_some() {
                self.transport.close(conn);
            }
        }
        self.pending.retain(|(pending, _)| *pending != conn);
    }

    pub fn stats(&self, conn: ConnId) -> Option<StreamStats> {
        self.streams
            .get(conn as usize)
            .and_then(Option::as_ref)
            .map(|stream| stream.stats)
            .or_else(|| {
                self.datagrams
                    .get(conn as usize)
                    .and_then(Option::as_ref)
                    .map(|datagrams| datagrams.stats)
            })
    }

    /// Whether messages were dropped on `conn` since the last call (and clears the flag).
    pub fn take_overflow(&mut self, conn: ConnId) -> bool {
        self.streams
            .get_mut(conn as usize)
            .and_then(Option::as_mut)
            .is_some_and(|stream| std::mem::take(&mut stream.stats.overflowed))
    }

    /// Writes `notice` into `conn`'s frame ring, after every frame written for it so far; a
    /// full ring keeps it, and every later one, for the next poll, which writes them before it
    /// reads anything. Never blocks, never drops a notice.
    pub fn notify_disconnect(&mut self, conn: ConnId, notice: DisconnectNotice) {
        self.notices.push((conn, notice));
        self.write_notices();
    }

    /// Writes the waiting notices in order, up to the first that does not fit.
    fn write_notices(&mut self) {
        let mut written = 0;
        for (conn, notice) in &self.notices {
            let frames = self.frames.for_conn(*conn);
            let len = FRAME_TS_BYTES + DisconnectNotice::BYTES;
            let Ok(mut grant) = frames.reserve(len) else {
                break;
            };
            let buf = grant.buf();
            buf[..FRAME_TS_BYTES].fill(0);
            buf[FRAME_TS_BYTES..].copy_from_slice(&notice.to_bytes());
            grant.commit_deferred(
                len,
                (conn & TAG_CONN_MASK) | ((FrameKind::Disconnect as u32) << 24),
            );
            written += 1;
        }
        self.notices.drain(..written);
    }

    pub fn poll(
        &mut self,
        on_event: &mut impl FnMut(ConnId, StreamEvent),
    ) -> Result<usize, NetError> {
        if !self.notices.is_empty() {
            self.write_notices();
        }
        let mut events = std::mem::take(&mut self.pending);
        let transport = &mut self.transport;
        let streams = &mut self.streams;
        let frames = &mut self.frames;
        let touched = &mut self.touched;
        let last_read = &self.last_read;
        let datagrams = &mut self.datagrams;
        touched.clear();
        let mut failures: Vec<(ConnId, StreamError)> = Vec::new();
        // An AF_XDP line has nothing that would wake the transport's wait: busy-poll it.
        let wait = if self.xdp_slots.is_empty() {
            self.wait
        } else {
            WaitMode::BusyPoll
        };
        let io_events = transport.poll(wait, &mut |conn, event| {
            match event {
                IoEvent::Datagram {
                    line,
                    bytes,
                    recv_ts_ns,
                    dropped,
                    ..
                } => {
                    let Some(Some(slot)) = datagrams.get_mut(conn as usize) else {
                        return;
                    };
                    if let Some(read) = last_read.get(conn as usize) {
                        read.store(recv_ts_ns, Ordering::Relaxed);
                    }
                    if !slot.open {
                        slot.open = true;
                        events.push((conn, StreamEvent::Open));
                    }
                    let drops = dropped.unwrap_or(slot.kernel_drops[line as usize]);
                    slot.kernel_drops[line as usize] = drops;
                    write_datagram(
                        &mut slot.stats,
                        conn,
                        line,
                        drops,
                        bytes,
                        recv_ts_ns,
                        frames.for_conn(conn),
                    );
                    frames.publish();
                    return;
                }
                IoEvent::DatagramError { .. } => {
                    if let Some(Some(slot)) = datagrams.get_mut(conn as usize) {
                        slot.errors += 1;
                    }
                    return;
                }
                _ => {}
            }
            let Some(Some(stream)) = streams.get_mut(conn as usize) else {
                return;
            };
            // A stream that failed earlier in this poll is closed below, once; what the
            // transport still reaped for it is moot.
            if failures.iter().any(|(failed, _)| *failed == conn) {
                return;
            }
            match event {
                IoEvent::Connected => {
                    stream.phase = Phase::Handshaking;
                    events.push((conn, StreamEvent::Connected));
                    if let Some(target) = &stream.spec_ws {
                        match ws::Handshake::new().and_then(|mut handshake| {
                            let headers: Vec<(&str, &str)> = target
                                .headers
                                .iter()
                                .map(|(name, value)| (name.as_str(), value.as_str()))
                                .collect();
                            let request = ws::Request {
                                host: &target.host,
                                port: target.port,
                                secure: target.secure,
                                path: &target.path,
                                headers: &headers,
                            };
                            let bytes = handshake.request(&request)?;
                            Ok((handshake, bytes))
                        }) {
                            Ok((handshake, bytes)) => {
                                stream.handshake = Some(handshake);
                                stream.out_plain.extend_from_slice(&bytes);
                            }
                            Err(error) => failures.push((conn, StreamError::Handshake(error))),
                        }
                    }
                    if stream.tls.is_none() && stream.spec_ws.is_none() && stream.preamble.is_none()
                    {
                        stream.phase = Phase::Open;
                        events.push((conn, StreamEvent::Open));
                    }
                }
                IoEvent::ConnectFailed(error) => {
                    streams[conn as usize] = None;
                    events.push((
                        conn,
                        StreamEvent::Closed {
                            close_code: None,
                            error: Some(StreamError::Connect(error)),
                        },
                    ));
                    return;
                }
                IoEvent::Data { bytes, recv_ts_ns } => {
                    // One relaxed store of the completion's own timestamp: the control
                    // thread's liveness check costs the hot path nothing more.
                    if let Some(slot) = last_read.get(conn as usize) {
                        slot.store(recv_ts_ns, Ordering::Relaxed);
                    }
                    if let Err(error) = receive(
                        stream,
                        conn,
                        bytes,
                        recv_ts_ns,
                        frames.for_conn(conn),
                        &mut events,
                    ) {
                        failures.push((conn, error));
                        return;
                    }
                    // Visible to its decoder now, before the transport hands over the next
                    // read (another connection's, perhaps a burst).
                    frames.publish();
                }
                IoEvent::Closed(error) => {
                    // After a completed closing handshake, how TCP ends (FIN or a reset by a
                    // server that aborts once it has our close) does not matter.
                    let handshake_done = stream
                        .ws
                        .as_ref()
                        .is_some_and(|client| client.state() == ws::State::Closed);
                    let error = match (error, stream.phase) {
                        (_, Phase::Open) if handshake_done => None,
                        (Some(error), _) => Some(StreamError::Io(error)),
                        (None, Phase::Open)
                            if stream.ws.is_some() && stream.close_code.is_none() =>
                        {
                            Some(StreamError::ClosedWithoutClose)
                        }
                        (None, Phase::Open) => None,
                        (None, _) => Some(match stream.tls.as_mut().map(TlsClient::feed_eof) {
                            Some(Err(tls)) => StreamError::Tls(tls),
                            _ => StreamError::ClosedDuringHandshake,
                        }),
                    };
                    let close_code = stream.close_code;
                    streams[conn as usize] = None;
                    events.push((conn, StreamEvent::Closed { close_code, error }));
                    return;
                }
                // Datagram slots' events are handled above.
                IoEvent::Datagram { .. } | IoEvent::DatagramError { .. } => return,
            }
            // Whatever the protocol owes the server goes out in the same poll.
            if let Some(Some(stream)) = streams.get_mut(conn as usize) {
                if let Err(error) = flush_queued(conn, stream) {
                    failures.push((conn, error));
                }
                if touched.last() != Some(&conn) {
                    touched.push(conn);
                }
            }
        })?;
        let mut xdp_frames = 0usize;
        for &conn in &self.xdp_slots {
            if let Some(Some(slot)) = self.datagrams.get_mut(conn as usize) {
                xdp_frames += poll_xdp(
                    conn,
                    slot,
                    &self.transport,
                    &mut self.frames,
                    &self.last_read,
                    &mut events,
                ) as usize;
                self.frames.publish();
            }
        }
        let io_events = io_events + xdp_frames;
        // Sends happen outside the transport's callback (which borrows the transport).
        for index in 0..self.touched.len() {
            let conn = self.touched[index];
            let Some(stream) = self.streams[conn as usize].as_mut() else {
                continue;
            };
            if stream.out_cipher.is_empty() && stream.out_plain.is_empty() {
                continue;
            }
            if failures.iter().any(|(failed, _)| *failed == conn) {
                continue;
            }
            if let Err(error) = flush(&mut self.transport, conn, stream) {
                failures.push((conn, error));
            }
        }
        let mut failed: Vec<ConnId> = Vec::new();
        for (conn, error) in failures {
            // One close per stream, for its first failure.
            if failed.contains(&conn) {
                continue;
            }
            failed.push(conn);
            let event = self.fail(conn, error);
            events.push((conn, event));
        }
        // A stream whose closing handshake is complete is closed here.
        for index in 0..self.touched.len() {
            let conn = self.touched[index];
            let finished = self.streams[conn as usize]
                .as_ref()
                .and_then(|stream| stream.ws.as_ref().map(ws::Client::is_finished))
                .unwrap_or(false);
            if finished && self.transport.unsent(conn) == 0 {
                let close_code = self.streams[conn as usize]
                    .as_ref()
                    .and_then(|s| s.close_code);
                self.transport.close(conn);
                self.streams[conn as usize] = None;
                events.push((
                    conn,
                    StreamEvent::Closed {
                        close_code,
                        error: None,
                    },
                ));
            }
        }
        // Notices written this round (every read's frames are published as it is handled).
        self.frames.publish();
        let count = events.len();
        for (conn, event) in events.drain(..) {
            on_event(conn, event);
        }
        self.pending = events;
        Ok(io_events.max(count))
    }

    /// Ends a stream after an error: sends what is queued (a close frame, a TLS alert), closes.
    fn fail(&mut self, conn: ConnId, error: StreamError) -> StreamEvent {
        if let Some(stream) = self.streams[conn as usize].as_mut() {
            let _ = flush(&mut self.transport, conn, stream);
        }
        let close_code = self.streams[conn as usize]
            .as_ref()
            .and_then(|s| s.close_code);
        self.transport.close(conn);
        self.streams[conn as usize] = None;
        StreamEvent::Closed {
            close_code,
            error: Some(error),
        }
    }
}

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StreamOpenError {
    #[error("stream slot {0} is in use or out of range")]
    SlotBusy(ConnId),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum StreamSendError {
    #[error("stream {0} is not open")]
    NotOpen(ConnId),
    #[error("stream {0} is not a WebSocket stream")]
    NotWebSocket(ConnId),
    #[error("{0}")]
    WebSocket(ws::SendError),
}

/// Handles received bytes: decrypt, unframe, write messages to the ring.
fn receive(
    stream: &mut Stream,
    conn: ConnId,
    bytes: &[u8],
    recv_ts_ns: u64,
    frames: &mut FrameProducer,
    events: &mut Vec<(ConnId, StreamEvent)>,
) -> Result<(), StreamError> {
    if stream.tls.is_none() {
        if stream.spec_ws.is_none() && stream.preamble.is_none() {
            // A raw byte stream: every chunk is a frame.
            return write_bytes(&mut stream.stats, conn, bytes, recv_ts_ns, frames);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let room = stream.plaintext.len() - stream.end;
            let take = room.min(rest.len());
            stream.plaintext[stream.end..stream.end + take].copy_from_slice(&rest[..take]);
            stream.end += take;
            rest = &rest[take..];
            process_plaintext(stream, conn, recv_ts_ns, frames, events)?;
            if take == 0 {
                // Cannot happen: processing always frees room (frames longer than the buffer
                // are assembled by the WebSocket client). Guard against a stuck loop anyway.
                return Err(StreamError::Io(io::Error::other(
                    "plaintext buffer stuck full",
                )));
            }
        }
        return Ok(());
    }
    let mut rest = bytes;
    loop {
        let tls = stream
            .tls
            .as_mut()
            .ok_or(StreamError::ClosedDuringHandshake)?;
        let taken = tls.feed_tls(rest)?;
        rest = &rest[taken..];
        if !stream.secured && !tls.is_handshaking() {
            stream.secured = true;
            events.push((conn, StreamEvent::Secured));
        }
        // Drain the plaintext this produced.
        loop {
            if stream.end == stream.plaintext.len() {
                process_plaintext(stream, conn, recv_ts_ns, frames, events)?;
                if stream.end == stream.plaintext.len() {
                    return Err(StreamError::Io(io::Error::other(
                        "plaintext buffer stuck full",
                    )));
                }
            }
            let Some(tls) = stream.tls.as_mut() else {
                break;
            };
            match tls.read_plaintext(&mut stream.plaintext[stream.end..]) {
                Ok(ReadOutcome::Data(count)) if count > 0 => {
                    stream.end += count;
                    process_plaintext(stream, conn, recv_ts_ns, frames, events)?;
                }
                Ok(_) => break,
                Err(error) => return Err(error.into()),
            }
        }
        // The TLS handshake finishing opens a raw TLS stream (unless a preamble follows).
        if stream.phase == Phase::Handshaking
            && stream.spec_ws.is_none()
            && stream.preamble.is_none()
            && stream.tls.as_ref().is_some_and(|tls| !tls.is_handshaking())
        {
            stream.phase = Phase::Open;
            events.push((conn, StreamEvent::Open));
        }
        if rest.is_empty() {
            break;
        }
    }
    Ok(())
}

/// Parses what the plaintext buffer holds: the upgrade response, then WebSocket frames.
fn process_plaintext(
    stream: &mut Stream,
    conn: ConnId,
    recv_ts_ns: u64,
    frames: &mut FrameProducer,
    events: &mut Vec<(ConnId, StreamEvent)>,
) -> Result<(), StreamError> {
    if stream.spec_ws.is_none() {
        if let Some(preamble) = stream.preamble.as_mut() {
            let step = preamble
                .read(
                    &stream.plaintext[stream.start..stream.end],
                    &mut stream.out_plain,
                )
                .map_err(StreamError::Preamble)?;
            stream.start += step.consumed.min(stream.end - stream.start);
            if !step.done {
                if stream.start == stream.end {
                    stream.start = 0;
                    stream.end = 0;
                } else if stream.end == stream.plaintext.len() {
                    return Err(StreamError::Preamble(PreambleError::Protocol(format!(
                        "the server sent {} bytes without finishing the opening exchange",
                        stream.end - stream.start
                    ))));
                }
                return Ok(());
            }
            stream.preamble = None;
            stream.phase = Phase::Open;
            events.push((conn, StreamEvent::Open));
        }
        // Raw stream: hand the plaintext over as it is.
        let result = if stream.end > stream.start {
            write_bytes(
                &mut stream.stats,
                conn,
                &stream.plaintext[stream.start..stream.end],
                recv_ts_ns,
                frames,
            )
        } else {
            Ok(())
        };
        stream.start = 0;
        stream.end = 0;
        return result;
    }
    if let Some(handshake) = stream.handshake.as_mut() {
        match handshake
            .parse_response(&stream.plaintext[stream.start..stream.end])
            .map_err(StreamError::Handshake)?
        {
            HandshakeStatus::NeedMore => return Ok(()),
            HandshakeStatus::Done { consumed } => {
                stream.start += consumed;
                stream.handshake = None;
                let max_message_bytes = stream
                    .spec_ws
                    .as_ref()
                    .map_or(16 << 20, |target| target.max_message_bytes);
                let config = ws::Config {
                    max_frame_bytes: max_message_bytes,
                    max_message_bytes,
                    max_borrowed_payload_bytes: stream.plaintext.len() / 2 - WS_HEADER_BYTES,
                };
                stream.ws = Some(
                    ws::Client::new(config)
                        .map_err(|error| StreamError::Io(io::Error::other(error.to_string())))?,
                );
                stream.phase = Phase::Open;
                events.push((conn, StreamEvent::Open));
            }
        }
    }
    let Some(client) = stream.ws.as_mut() else {
        return Ok(());
    };
    loop {
        let input = &stream.plaintext[stream.start..stream.end];
        let read = client.read(input).map_err(StreamError::WebSocket)?;
        let consumed = read.consumed;
        match read.event {
            ws::Event::NeedMore | ws::Event::Closed => {
                stream.start += consumed;
                break;
            }
            ws::Event::Message { kind, payload } => {
                let frame_kind = match kind {
                    ws::MessageKind::Text => FrameKind::Text,
                    ws::MessageKind::Binary => FrameKind::Binary,
                };
                write_frame(
                    &mut stream.stats,
                    conn,
                    frame_kind,
                    payload,
                    recv_ts_ns,
                    frames,
                );
            }
            ws::Event::Close { code, .. } => {
                stream.close_code = code.or(Some(1005));
            }
            ws::Event::Partial
            | ws::Event::Ping { .. }
            | ws::Event::Pong { .. }
            | ws::Event::Discarded => {}
        }
        stream.start += consumed;
    }
    // Move the unparsed tail to the front once the buffer's back half is in use, so that a
    // frame can always be completed in place.
    if stream.start == stream.end {
        stream.start = 0;
        stream.end = 0;
    } else if stream.start > 0 && stream.end > stream.plaintext.len() / 2 {
        stream.plaintext.copy_within(stream.start..stream.end, 0);
        stream.end -= stream.start;
        stream.start = 0;
    }
    // Control frames the client queued (pongs, close echoes) are collected for sending.
    if !client.output().is_empty() {
        stream.out_plain.extend_from_slice(client.output());
        let pending = client.output().len();
        client.consume_output(pending);
    }
    Ok(())
}

/// The one copy: a message into the frame ring, behind its receive timestamp. A full ring drops
/// the message and flags the stream.
#[inline]
fn write_frame(
    stats: &mut StreamStats,
    conn: ConnId,
    kind: FrameKind,
    payload: &[u8],
    recv_ts_ns: u64,
    frames: &mut FrameProducer,
) {
    let len = FRAME_TS_BYTES + payload.len();
    match frames.reserve(len) {
        Ok(mut grant) => {
            let buf = grant.buf();
            buf[..FRAME_TS_BYTES].copy_from_slice(&recv_ts_ns.to_le_bytes());
            buf[FRAME_TS_BYTES..].copy_from_slice(payload);
            grant.commit_deferred(len, (conn & TAG_CONN_MASK) | ((kind as u32) << 24));
            stats.messages += 1;
            stats.bytes += payload.len() as u64;
        }
        Err(_) => {
            stats.dropped += 1;
            stats.overflowed = true;
        }
    }
}

/// One datagram into the frame ring: its receive time, its socket's kernel drop count, the
/// datagram. A full ring drops it (counted, the slot flagged).
#[inline]
fn write_datagram(
    stats: &mut StreamStats,
    conn: ConnId,
    line: DatagramLine,
    kernel_drops: u32,
    datagram: &[u8],
    recv_ts_ns: u64,
    frames: &mut FrameProducer,
) {
    let len = FRAME_TS_BYTES + DATAGRAM_HEAD_BYTES + datagram.len();
    match frames.reserve(len) {
        Ok(mut grant) => {
            let buf = grant.buf();
            buf[..FRAME_TS_BYTES].copy_from_slice(&recv_ts_ns.to_le_bytes());
            buf[FRAME_TS_BYTES..FRAME_TS_BYTES + DATAGRAM_HEAD_BYTES]
                .copy_from_slice(&kernel_drops.to_le_bytes());
            buf[FRAME_TS_BYTES + DATAGRAM_HEAD_BYTES..].copy_from_slice(datagram);
            let kind = FrameKind::of_line(line);
            grant.commit_deferred(len, (conn & TAG_CONN_MASK) | ((kind as u32) << 24));
            stats.messages += 1;
            stats.bytes += datagram.len() as u64;
        }
        Err(_) => {
            stats.dropped += 1;
            stats.overflowed = true;
        }
    }
}

/// A chunk of a raw byte stream into the frame ring. Losing a chunk would misalign everything
/// after it, so a full ring ends the stream instead of flagging it.
#[inline]
fn write_bytes(
    stats: &mut StreamStats,
    conn: ConnId,
    bytes: &[u8],
    recv_ts_ns: u64,
    frames: &mut FrameProducer,
) -> Result<(), StreamError> {
    let dropped = stats.dropped;
    write_frame(stats, conn, FrameKind::Bytes, bytes, recv_ts_ns, frames);
    if stats.dropped != dropped {
        return Err(StreamError::Overrun(bytes.len()));
    }
    Ok(())
}

/// Moves queued plaintext through TLS (if any) into the ciphertext queue.
fn flush_queued(_conn: ConnId, stream: &mut Stream) -> Result<(), StreamError> {
    if let Some(tls) = stream.tls.as_mut() {
        if !stream.out_plain.is_empty() && !tls.is_handshaking() {
            let mut written = 0;
            while written < stream.out_plain.len() {
                let taken = tls.write_plaintext(&stream.out_plain[written..])?;
                if taken == 0 {
                    tls.write_tls_to_vec(&mut stream.out_cipher);
                    continue;
                }
                written += taken;
            }
            stream.out_plain.clear();
        }
        tls.write_tls_to_vec(&mut stream.out_cipher);
    } else if !stream.out_plain.is_empty() {
        stream.out_cipher.extend_from_slice(&stream.out_plain);
        stream.out_plain.clear();
    }
    Ok(())
}

/// Sends everything queued for the stream.
fn flush(transport: &mut Transport, conn: ConnId, stream: &mut Stream) -> Result<(), StreamError> {
    if let Some(client) = stream.ws.as_mut() {
        if !client.output().is_empty() {
            stream.out_plain.extend_from_slice(client.output());
            let pending = client.output().len();
            client.consume_output(pending);
        }
    }
    flush_queued(conn, stream)?;
    if !stream.out_cipher.is_empty() {
        transport
            .send(conn, &stream.out_cipher)
            .map_err(|error| StreamError::Io(io::Error::other(error.to_string())))?;
        stream.out_cipher.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::WebSocketTarget;

    #[test]
    fn a_disconnect_notice_reads_back_as_written() {
        use super::DisconnectNotice;
        let notice = DisconnectNotice {
            venue: 0x1234,
            instruments: 7..0x0102_0304,
        };
        assert_eq!(
            DisconnectNotice::from_bytes(&notice.to_bytes()),
            Some(notice)
        );
        assert_eq!(DisconnectNotice::from_bytes(&[0; 9]), None);
        assert_eq!(DisconnectNotice::from_bytes(&[0; 11]), None);
    }

    /// A frame ring too small for every notice: none is lost, and they come out in the order
    /// given once the ring has room again (the engine writes the waiting ones at each poll).
    #[test]
    fn disconnect_notices_wait_for_room_and_keep_their_order() {
        use super::{split_frame, split_tag, DisconnectNotice, FrameKind, NetEngine};
        use crate::clock::Clock;
        use crate::net::{BackendChoice, Transport, TransportConfig, WaitMode};
        let config = TransportConfig::default();
        let (transport, _) =
            Transport::open(BackendChoice::Epoll, config, Clock::monotonic()).unwrap();
        let (producer, mut frames) = crate::ring::frame_ring(1024);
        let mut engine = NetEngine::new(
            transport,
            producer,
            WaitMode::BusyPoll,
            config.max_connections,
        );
        let notices: Vec<(u32, DisconnectNotice)> = (0..500u32)
            .map(|i| {
                (
                    i % 4,
                    DisconnectNotice {
                        venue: i as u16,
                        instruments: i..i + 1,
                    },
                )
            })
            .collect();
        for (conn, notice) in &notices {
            engine.notify_disconnect(*conn, notice.clone());
        }
        let mut seen = Vec::new();
        for _ in 0..10_000 {
            engine.poll(&mut |_, _| {}).unwrap();
            frames.drain(usize::MAX, |tag, frame| {
                let (conn, kind) = split_tag(tag);
                assert_eq!(kind, FrameKind::Disconnect);
                let (_, payload) = split_frame(frame).unwrap();
                seen.push((conn, DisconnectNotice::from_bytes(payload).unwrap()));
            });
            if seen.len() == notices.len() {
                break;
            }
        }
        assert_eq!(seen, notices);
    }

    #[test]
    fn a_targets_debug_names_its_headers_but_never_their_values() {
        let target = WebSocketTarget {
            host: "stream-sbe.binance.com".to_owned(),
            port: 9443,
            path: "/stream".to_owned(),
            secure: true,
            max_message_bytes: 1 << 20,
            headers: vec![("X-MBX-APIKEY".to_owned(), "secret-key-value".to_owned())],
        };
        let text = format!("{target:?}");
        assert!(text.contains("X-MBX-APIKEY"), "{text}");
        assert!(!text.contains("secret-key-value"), "{text}");
    }

    #[test]
    fn the_plaintext_buffer_holds_two_of_the_largest_messages_within_its_bounds() {
        use super::{plaintext_bytes, MIN_PLAINTEXT_BYTES, PLAINTEXT_BYTES, WS_HEADER_BYTES};
        let target = |max_message_bytes| WebSocketTarget {
            host: "h".to_owned(),
            port: 1,
            path: "/".to_owned(),
            secure: true,
            max_message_bytes,
            headers: Vec::new(),
        };
        // The lean profile's 64 KiB messages: two whole ones fit, in 132 KiB.
        let lean = plaintext_bytes(Some(&target(64 * 1024)));
        assert_eq!(lean, 132 * 1024);
        assert!(lean / 2 - WS_HEADER_BYTES >= 64 * 1024);
        assert_eq!(plaintext_bytes(Some(&target(1 << 20))), PLAINTEXT_BYTES);
        assert_eq!(plaintext_bytes(Some(&target(1024))), MIN_PLAINTEXT_BYTES);
        assert_eq!(plaintext_bytes(None), PLAINTEXT_BYTES);
    }
}
