//! The AF_XDP receive path for multicast feeds: an XDP program (`program.rs`) steers the feed's
//! datagrams, by destination group and port, into AF_XDP sockets (`socket.rs`, one per queue of
//! the interface), whose frames are read in place from user-space rings (`ring.rs`) and parsed
//! as Ethernet, VLAN, IPv4 and UDP (`packet.rs`). Everything else the interface receives (ARP,
//! ping, TCP, other groups) passes to the kernel as before.
//!
//! No dependency: the ring code is a few hundred lines against the kernel's documented ABI
//! (`linux/if_xdp.h`, `Documentation/networking/af_xdp.rst`), with each `unsafe` said why, and
//! the program is assembled here (no clang, no libbpf, no libxdp: `xsk-rs` builds libxdp from
//! C and `xdpilone` is EUPL).
//!
//! Privileges: loading the program needs `CAP_BPF` (or `CAP_SYS_ADMIN`) and `CAP_NET_ADMIN` to
//! attach it; the socket needs `CAP_NET_RAW`. [`XdpReceiver::open`] says which step failed, so
//! the caller can fall back to a kernel socket with one log line.

pub mod packet;
pub mod program;
pub mod ring;
pub mod socket;

use packet::{Datagram, PacketError};
use program::{AttachMode, Attached, ProgramError};
use socket::{SocketError, UmemConfig, XdpSocket};
use std::io;
use std::net::SocketAddrV4;

/// What to receive, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface that carries the feed.
    pub interface: String,
    /// The feeds' destination groups and ports.
    pub feeds: Vec<SocketAddrV4>,
    /// The queues to bind; `None`: every receive queue of the interface.
    pub queues: Option<Vec<u32>>,
    pub umem: UmemConfig,
    /// Attach in generic (skb) mode without trying native mode first.
    pub force_generic: bool,
    /// Verify UDP checksums (`packet.rs` says why this is off by default).
    pub verify_udp_checksum: bool,
}

/// Why the AF_XDP path could not start.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("interface `{0}`: no such interface")]
    NoInterface(String),
    #[error("no feeds to steer")]
    NoFeeds,
    #[error("at most {} feeds per interface", program::MAX_FEEDS)]
    TooManyFeeds,
    #[error("queue {queue}: the interface has {queues} receive queues")]
    NoQueue { queue: u32, queues: u32 },
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error("queue {queue}: {source}")]
    Socket { queue: u32, source: SocketError },
}

impl XdpError {
    /// The failure is a missing privilege (EPERM or EACCES somewhere on the way).
    pub fn is_permission(&self) -> bool {
        let denied = |error: &io::Error| {
            matches!(error.kind(), io::ErrorKind::PermissionDenied)
                || error.raw_os_error() == Some(libc::EPERM)
        };
        match self {
            XdpError::Program(ProgramError::Map(error))
            | XdpError::Program(ProgramError::Load { error, .. })
            | XdpError::Program(ProgramError::Insert { error, .. }) => denied(error),
            XdpError::Program(ProgramError::Attach {
                native, generic, ..
            }) => denied(native) || denied(generic),
            XdpError::Socket { source, .. } => match source {
                SocketError::Socket(error)
                | SocketError::Umem { error, .. }
                | SocketError::Ring { error, .. } => denied(error),
                SocketError::Bind { copy, .. } => denied(copy),
                SocketError::Config(_) => false,
            },
            _ => false,
        }
    }
}

/// The interface's index, by name.
pub fn ifindex(name: &str) -> Option<u32> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// The interface's receive queues (`/sys/class/net/<name>/queues/rx-*`); 1 when sysfs says
/// nothing.
pub fn rx_queues(name: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(0)
        .max(1)
}

/// Counts of what the receive path saw and refused. Nothing is dropped without a count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Frames read from the RX rings.
    pub frames: u64,
    /// Datagrams handed on.
    pub datagrams: u64,
    /// Frames that are not a whole, well-formed IPv4 UDP datagram (each kind below).
    pub truncated: u64,
    pub bad_headers: u64,
    pub bad_checksums: u64,
    pub fragments: u64,
    /// Well-formed datagrams for a group and port no feed has (the program steers a group's
    /// fragments, whose port it cannot see).
    pub not_a_feed: u64,
}

impl XdpCounters {
    fn refuse(&mut self, error: PacketError) {
        match error {
            PacketError::Truncated => self.truncated += 1,
            PacketError::Fragment => self.fragments += 1,
            PacketError::BadIpChecksum | PacketError::BadUdpChecksum => self.bad_checksums += 1,
            PacketError::NotIpv4(_)
            | PacketError::BadIpHeader
            | PacketError::BadIpLength { .. }
            | PacketError::NotUdp(_)
            | PacketError::BadUdpLength { .. } => self.bad_headers += 1,
        }
    }
}

/// The kernel's own counts for a socket (`XDP_STATISTICS`): frames it could not deliver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounters {
    /// Dropped for other reasons (no room in the RX ring counts here too on older kernels).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    /// The RX ring was full.
    pub rx_ring_full: u64,
    /// The fill ring was empty when a frame came.
    pub rx_fill_ring_empty: u64,
}

/// The program on the interface and a socket on each queue.
pub struct XdpReceiver {
    // Sockets close before the program detaches (field order is drop order).
    sockets: Vec<XdpSocket>,
    attached: Attached,
    feeds: Vec<SocketAddrV4>,
    interface: String,
    ifindex: u32,
    verify_udp_checksum: bool,
    /// Busy polling was asked for (`UmemConfig::busy_poll_us`): an empty round enters the
    /// kernel, whose `recvfrom` then runs the queue's NAPI poll in this thread.
    busy_poll_us: u32,
    counters: XdpCounters,
    /// One per socket, for [`XdpReceiver::wait`].
    pollfds: Vec<libc::pollfd>,
}

impl XdpReceiver {
    /// Loads and attaches the program, opens and binds a socket per queue and puts each in the
    /// program's map.
    pub fn open(config: &XdpConfig) -> Result<XdpReceiver, XdpError> {
        if config.feeds.is_empty() {
            return Err(XdpError::NoFeeds);
        }
        if config.feeds.len() > program::MAX_FEEDS {
            return Err(XdpError::TooManyFeeds);
        }
        let ifindex = ifindex(&config.interface)
            .ok_or_else(|| XdpError::NoInterface(config.interface.clone()))?;
        let available = rx_queues(&config.interface);
        let queues: Vec<u32> = match &config.queues {
            Some(queues) => queues.clone(),
            None => (0..available).collect(),
        };
        if let Some(&queue) = queues.iter().find(|&&queue| queue >= available) {
            return Err(XdpError::NoQueue {
                queue,
                queues: available,
            });
        }
        let attached = Attached::attach(ifindex, available, &config.feeds, config.force_generic)?;
        let mut sockets = Vec::with_capacity(queues.len());
        for &queue in &queues {
            let socket = XdpSocket::open(ifindex, queue, config.umem)
                .map_err(|source| XdpError::Socket { queue, source })?;
            attached.insert(queue, socket.fd())?;
            sockets.push(socket);
        }
        let pollfds = sockets
            .iter()
            .map(|socket| libc::pollfd {
                fd: socket.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        Ok(XdpReceiver {
            pollfds,
            sockets,
            attached,
            feeds: config.feeds.clone(),
            interface: config.interface.clone(),
            ifindex,
            verify_udp_checksum: config.verify_udp_checksum,
            busy_poll_us: config.umem.busy_poll_us,
            counters: XdpCounters::default(),
        })
    }

    pub fn mode(&self) -> AttachMode {
        self.attached.mode
    }

    /// Every socket got zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.sockets.iter().all(|socket| socket.facts().zero_copy)
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// One line for the log: interface, mode, zero-copy, queues, program size, refused options.
    pub fn describe(&self) -> String {
        let refused: Vec<&str> = self
            .sockets
            .iter()
            .flat_map(|socket| socket.facts().refused_options.iter().map(String::as_str))
            .collect();
        format!(
            "af-xdp on {} (ifindex {}): {} mode, zero-copy {}, queues {:?}, program of {} \
             instructions for {} feeds{}{}",
            self.interface,
            self.ifindex,
            self.attached.mode.as_str(),
            if self.zero_copy() {
                "on"
            } else {
                "off (copy mode)"
            },
            self.sockets
                .iter()
                .map(|socket| socket.facts().queue)
                .collect::<Vec<_>>(),
            self.attached.instructions,
            self.feeds.len(),
            if self.busy_poll_us > 0 {
                format!(", busy polling {} us", self.busy_poll_us)
            } else {
                String::new()
            },
            if refused.is_empty() {
                String::new()
            } else {
                format!("; refused: {}", refused.join(", "))
            }
        )
    }

    pub fn counters(&self) -> XdpCounters {
        self.counters
    }

    /// The kernel's counts, summed over the sockets.
    pub fn kernel_counters(&self) -> KernelCounters {
        let mut total = KernelCounters::default();
        for socket in &self.sockets {
            let mut stats = [0u64; 6];
            let mut len = std::mem::size_of_val(&stats) as libc::socklen_t;
            // SAFETY: a writable buffer of `len` bytes (struct xdp_statistics).
            let result = unsafe {
                libc::getsockopt(socket.fd(), 283, 7, stats.as_mut_ptr().cast(), &mut len)
            };
            if result == 0 {
                total.rx_dropped += stats[0];
                total.rx_invalid_descs += stats[1];
                if len as usize >= 6 * 8 {
                    total.rx_ring_full += stats[3];
                    total.rx_fill_ring_empty += stats[4];
                }
            }
        }
        total
    }

    /// Reads up to `max` frames from each queue and hands each feed datagram to `on_datagram`
    /// (borrowed from the UMEM); what is not one is counted. Returns the frames read. Never
    /// blocks or allocates. Enters the kernel (a non-blocking `recvfrom`) only when the kernel
    /// asks for it (`XDP_USE_NEED_WAKEUP`), or, with busy polling, when a queue had nothing:
    /// that call is the busy-poll round.
    pub fn poll(&mut self, max: u32, mut on_datagram: impl FnMut(&Datagram<'_>)) -> u32 {
        let mut total = 0;
        let counters = &mut self.counters;
        let feeds = &self.feeds;
        let verify = self.verify_udp_checksum;
        let busy_poll = self.busy_poll_us > 0;
        for socket in &mut self.sockets {
            let read = socket.receive(max, |frame| {
                counters.frames += 1;
                match packet::parse(frame, verify) {
                    Ok(datagram) => {
                        if feeds.contains(&datagram.destination) {
                            counters.datagrams += 1;
                            on_datagram(&datagram);
                        } else {
                            counters.not_a_feed += 1;
                        }
                    }
                    Err(error) => counters.refuse(error),
                }
            });
            if socket.needs_wakeup() || (busy_poll && read == 0) {
                socket.wake();
            }
            total += read;
        }
        total
    }

    /// Sleeps until a socket has a frame or `timeout_ms` passes.
    pub fn wait(&mut self, timeout_ms: i32) {
        // SAFETY: `pollfds` is a live array of as many pollfds as passed.
        unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                timeout_ms,
            )
        };
    }
}
