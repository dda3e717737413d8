//! The network thread's I/O: sockets, io_uring, epoll. The only module with syscalls on the hot
//! path.
//!
//! A [`Transport`] owns up to `max_connections` TCP connections, identified by a [`ConnId`] slot
//! index, and does four things: start a non-blocking connect with a timeout, send bytes, close,
//! and [`Transport::poll`]: wait as the [`WaitMode`] says, then hand every completed event to a
//! callback, with received bytes borrowed straight from the kernel's buffer and a receive
//! timestamp taken when the completions were reaped.
//!
//! Two backends sit behind it:
//! - [`uring::UringTransport`]: one io_uring (SINGLE_ISSUER, DEFER_TASKRUN with the TASKRUN
//!   flag, falling back to COOP_TASKRUN), registered file descriptors, multishot receive into a
//!   provided-buffer ring, connect linked to a timeout. In busy-poll mode it enters the kernel
//!   only when it has submissions or the kernel flags pending task work, so an idle loop makes no
//!   syscall at all.
//! - [`epoll::EpollTransport`]: non-blocking sockets and level-triggered epoll, for hosts where
//!   io_uring cannot be set up (the default seccomp profile of container runtimes,
//!   `kernel.io_uring_disabled`).
//!
//! [`Transport::open`] picks io_uring when it works and says in one log line which backend runs
//! and why.
//!
//! A slot may instead hold a datagram venue's sockets ([`Transport::open_datagrams`]: multicast
//! lines and a request socket, [`udp`]): each datagram arrives as an [`IoEvent::Datagram`] with
//! its socket's line, the kernel's receive time and drop count; io_uring reads them with a
//! multishot `recvmsg` into the same provided buffers, epoll with `recvmsg` when readable.
//!
//! **Invariant:** no allocation in `poll` or `send` in steady state: receive buffers are
//! registered once, send buffers are per connection and keep their capacity.

pub mod engine;
pub mod epoll;
pub mod socket;
pub mod udp;
pub mod uring;
pub mod xdp;

pub use socket::SocketOptions;

use crate::clock::Clock;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// A connection's slot: `0..max_connections`.
pub type ConnId = u32;

/// What happened on a connection.
#[derive(Debug)]
pub enum IoEvent<'a> {
    /// The TCP connect completed.
    Connected,
    /// The connect failed or timed out (`io::ErrorKind::TimedOut`); the slot is free again.
    ConnectFailed(io::Error),
    /// Bytes arrived. `recv_ts_ns` is when the completion was reaped (ns since the epoch).
    Data { bytes: &'a [u8], recv_ts_ns: u64 },
    /// The peer closed (`None`: orderly EOF) or the connection failed; the slot is free again.
    Closed(Option<io::Error>),
    /// One datagram on a datagram slot's socket `line` ([`Transport::open_datagrams`]).
    /// `recv_ts_ns` is the kernel's receive time (`SO_TIMESTAMPNS`) when it gave one, else when
    /// the completion was reaped; `dropped` the socket's count of datagrams the kernel dropped
    /// so far (`SO_RXQ_OVFL`), when it reported one.
    Datagram {
        line: udp::DatagramLine,
        bytes: &'a [u8],
        recv_ts_ns: u64,
        kernel_ts: bool,
        dropped: Option<u32>,
        truncated: bool,
    },
    /// A datagram socket failed (its slot stays open: the other lines may still carry data).
    DatagramError {
        line: udp::DatagramLine,
        error: io::Error,
    },
}

/// How `poll` waits when nothing is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Never sleep: reap what is there and return at once (the caller spins).
    BusyPoll,
    /// Sleep in the kernel until something completes or the timeout passes.
    Block { timeout: Duration },
}

/// Which backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// io_uring when it can be set up, else epoll.
    Auto,
    IoUring,
    Epoll,
}

/// Sizes and options of a transport.
#[derive(Clone, Copy, Debug)]
pub struct TransportConfig {
    pub max_connections: u32,
    /// Size of one receive buffer (io_uring provided buffers; the epoll read buffer).
    pub recv_buffer_bytes: u32,
    /// Number of provided receive buffers (io_uring; a power of two up to 32768).
    pub recv_buffers: u16,
    pub connect_timeout: Duration,
    pub socket: SocketOptions,
}

impl Default for TransportConfig {
    fn default() -> TransportConfig {
        TransportConfig {
            max_connections: 64,
            recv_buffer_bytes: 64 * 1024,
            recv_buffers: 64,
            connect_timeout: Duration::from_secs(5),
            socket: SocketOptions::default(),
        }
    }
}

/// Errors of the transport API (the per-connection I/O errors arrive as events instead).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("connection slot {0} is out of range or in use")]
    BadSlot(ConnId),
    #[error("connection {0} is not open")]
    NotOpen(ConnId),
    #[error("io_uring set-up failed: {0}")]
    UringSetup(io::Error),
    #[error("epoll set-up failed: {0}")]
    EpollSetup(io::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A network backend; enum dispatch keeps the hot path free of virtual calls.
#[allow(
    clippy::large_enum_variant,
    reason = "one transport per network thread, used in place: boxing would add a pointer chase per call"
)]
pub enum Transport {
    Uring(uring::UringTransport),
    Epoll(epoll::EpollTransport),
}

impl Transport {
    /// Sets up the chosen backend. Under `Auto` a failed io_uring set-up falls back to epoll,
    /// and the returned text (for one log line) says which backend runs and why.
    pub fn open(
        choice: BackendChoice,
        config: TransportConfig,
        clock: Clock,
    ) -> Result<(Transport, String), NetError> {
        match choice {
            BackendChoice::IoUring => {
                let transport = uring::UringTransport::new(config, clock)?;
                let why = format!(
                    "network backend: io_uring ({}), as configured",
                    transport.setup_flags()
                );
                Ok((Transport::Uring(transport), why))
            }
            BackendChoice::Epoll => Ok((
                Transport::Epoll(epoll::EpollTransport::new(config, clock)?),
                "network backend: epoll, as configured".to_owned(),
            )),
            BackendChoice::Auto => match uring::UringTransport::new(config, clock) {
                Ok(transport) => {
                    let why = format!("network backend: io_uring ({})", transport.setup_flags());
                    Ok((Transport::Uring(transport), why))
                }
                Err(error) => Ok((
                    Transport::Epoll(epoll::EpollTransport::new(config, clock)?),
                    format!(
                        "network backend: epoll, because io_uring is unavailable here ({error}; \
                         see kernel.io_uring_disabled, or the seccomp profile of the container)"
                    ),
                )),
            },
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Transport::Uring(_) => "io_uring",
            Transport::Epoll(_) => "epoll",
        }
    }

    /// Starts connecting slot `conn` to `addr`; the outcome arrives as an event.
    pub fn connect(&mut self, conn: ConnId, addr: SocketAddr) -> Result<(), NetError> {
        match self {
            Transport::Uring(transport) => transport.connect(conn, addr),
            Transport::Epoll(transport) => transport.connect(conn, addr),
        }
    }

    /// Queues `bytes` for sending on `conn` (copied; sent in order).
    #[inline]
    pub fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), NetError> {
        match self {
            Transport::Uring(transport) => transport.send(conn, bytes),
            Transport::Epoll(transport) => transport.send(conn, bytes),
        }
    }

    /// Bytes queued on `conn` and not yet handed to the kernel.
    pub fn unsent(&self, conn: ConnId) -> usize {
        match self {
            Transport::Uring(transport) => transport.unsent(conn),
            Transport::Epoll(transport) => transport.unsent(conn),
        }
    }

    /// Now, on the clock that stamps received bytes (ns since the epoch): for times that must
    /// compare with `IoEvent::Data`'s `recv_ts_ns`.
    pub fn now_ns(&self) -> u64 {
        match self {
            Transport::Uring(transport) => transport.now_ns(),
            Transport::Epoll(transport) => transport.now_ns(),
        }
    }

    /// Makes slot `conn` a datagram slot reading `sockets` (by [`udp::DatagramLine`]): each
    /// datagram arrives as an [`IoEvent::Datagram`]. The slot must be free.
    pub fn open_datagrams(
        &mut self,
        conn: ConnId,
        sockets: udp::DatagramSockets,
    ) -> Result<(), NetError> {
        match self {
            Transport::Uring(transport) => transport.open_datagrams(conn, sockets),
            Transport::Epoll(transport) => transport.open_datagrams(conn, sockets),
        }
    }

    /// Sends one datagram on socket `line` of datagram slot `conn`, without blocking.
    pub fn send_datagram(
        &mut self,
        conn: ConnId,
        line: udp::DatagramLine,
        bytes: &[u8],
    ) -> Result<(), NetError> {
        match self {
            Transport::Uring(transport) => transport.send_datagram(conn, line, bytes),
            Transport::Epoll(transport) => transport.send_datagram(conn, line, bytes),
        }
    }

    /// Closes `conn` now; no event follows for it. Unsent bytes are dropped.
    pub fn close(&mut self, conn: ConnId) {
        match self {
            Transport::Uring(transport) => transport.close(conn),
            Transport::Epoll(transport) => transport.close(conn),
        }
    }

    /// Waits as `wait` says, then hands each event to `on_event`. Returns the number of events.
    #[inline]
    pub fn poll(
        &mut self,
        wait: WaitMode,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> Result<usize, NetError> {
        match self {
            Transport::Uring(transport) => transport.poll(wait, on_event),
            Transport::Epoll(transport) => transport.poll(wait, on_event),
        }
    }

    /// Socket options the kernel refused so far, for the control thread to log.
    pub fn take_warnings(&mut self) -> Vec<String> {
        match self {
            Transport::Uring(transport) => std::mem::take(&mut transport.warnings),
            Transport::Epoll(transport) => std::mem::take(&mut transport.warnings),
        }
    }
}
