//! UDP multicast sockets for a datagram venue (Nasdaq ITCH's A and B lines): joined to a group
//! on an interface named by name or address, with a source-specific join where configured
//! (IGMPv3), `SO_RCVBUF` sized (`SO_RCVBUFFORCE` first, which root may use past
//! `net.core.rmem_max`), the kernel's receive time (`SO_TIMESTAMPNS`) and its count of datagrams
//! dropped for want of buffer (`SO_RXQ_OVFL`) read from each datagram's control messages.
//!
//! A datagram is its own frame: [`MulticastSocket::recv`] reads one into the caller's buffer with
//! `recvmsg` (non-blocking, a control buffer on the stack: nothing allocates per datagram).
//!
//! The network thread opens a datagram venue's sockets from a [`DatagramSpec`] (its lines'
//! joins and the unicast socket that sends re-requests and reads their answers,
//! [`reply_socket`]) and hands them to its transport (`Transport::open_datagrams`): io_uring
//! reads them with multishot `recvmsg` into its provided buffers, epoll with [`recv_on`]; both
//! read the control messages with [`parse_control`].

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What a socket joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulticastConfig {
    pub group: SocketAddrV4,
    /// The interface's IPv4 address ([`interface_address`] resolves a name).
    pub interface: Ipv4Addr,
    /// The sender, for a source-specific join; `None`: any source.
    pub source: Option<Ipv4Addr>,
    /// `SO_RCVBUF`, bytes.
    pub rcvbuf: usize,
}

/// One datagram's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    /// The datagram did not fit the buffer (its tail is lost).
    pub truncated: bool,
    /// The kernel's receive time, ns since the epoch (`SO_TIMESTAMPNS`), when it gave one.
    pub kernel_ts_ns: Option<u64>,
    /// The socket's count of datagrams dropped so far (`SO_RXQ_OVFL`), when the kernel
    /// reported it with this datagram (it does once any was dropped).
    pub dropped: Option<u32>,
}

/// What a datagram venue's slot opens: up to two multicast lines (A and B) and a unicast
/// socket for requests and their answers (a re-request server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramSpec {
    pub lines: [Option<MulticastConfig>; 2],
    /// The server that answers requests (MoldUDP64's re-request server), if any.
    pub reply: Option<SocketAddrV4>,
    /// Lines read through AF_XDP (`net::xdp`) instead of their kernel socket, if any.
    pub xdp: Option<XdpLines>,
}

impl DatagramSpec {
    /// The largest receive buffer any line asks for (`None` without a line).
    pub fn largest_rcvbuf(&self) -> Option<usize> {
        self.lines.iter().flatten().map(|line| line.rcvbuf).max()
    }
}

/// The lines of a datagram slot that the network thread reads through AF_XDP: an XDP program on
/// `interface` steers their groups' datagrams into AF_XDP sockets on its queues, which the
/// engine busy-polls (`net::engine`). Each such line's kernel socket is still opened and joined
/// (the membership makes the interface and the routers deliver the group) but not read. Where
/// the program cannot be attached or a socket bound, the line falls back to its kernel socket.
/// `Copy`, like the spec it is part of: the interface name is a fixed array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpLines {
    /// The interface's name, NUL-padded (`IFNAMSIZ`: at most 15 bytes).
    pub interface: [u8; 16],
    /// Bit `q`: bind queue `q`; 0: every receive queue of the interface.
    pub queues: u64,
    /// By line (A, B): read through AF_XDP.
    pub lines: [bool; 2],
    /// Busy polling (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` for this many µs); 0: none.
    pub busy_poll_us: u32,
}

impl XdpLines {
    /// `None` for a name that is empty or longer than 15 bytes.
    pub fn new(interface: &str, queues: u64, lines: [bool; 2]) -> Option<XdpLines> {
        if interface.is_empty() || interface.len() > 15 || interface.contains('\0') {
            return None;
        }
        let mut name = [0u8; 16];
        name[..interface.len()].copy_from_slice(interface.as_bytes());
        Some(XdpLines {
            interface: name,
            queues,
            lines,
            busy_poll_us: 0,
        })
    }

    pub fn interface(&self) -> &str {
        let len = self.interface.iter().position(|&b| b == 0).unwrap_or(16);
        std::str::from_utf8(&self.interface[..len]).unwrap_or("")
    }

    /// The queues to bind, `None` for every one.
    pub fn queue_list(&self) -> Option<Vec<u32>> {
        (self.queues != 0).then(|| (0..64).filter(|q| self.queues & (1 << q) != 0).collect())
    }
}

/// A datagram slot's socket, by what it carries (the order of a slot's sockets).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramLine {
    A = 0,
    B = 1,
    /// The unicast socket: answers to requests.
    Reply = 2,
}

impl DatagramLine {
    pub const ALL: [DatagramLine; 3] = [DatagramLine::A, DatagramLine::B, DatagramLine::Reply];

    pub fn from_index(index: usize) -> Option<DatagramLine> {
        Self::ALL.get(index).copied()
    }
}

/// A slot's sockets, by [`DatagramLine`] index.
pub type DatagramSockets = [Option<OwnedFd>; 3];

/// The most bytes of a datagram a venue sends (a request): a fixed buffer, so that sending one
/// allocates nothing.
#[derive(Clone, Copy)]
pub struct OutDatagram {
    len: u8,
    bytes: [u8; OutDatagram::MAX],
}

impl OutDatagram {
    pub const MAX: usize = 64;

    /// `bytes`, or `None` when longer than [`OutDatagram::MAX`].
    pub fn new(bytes: &[u8]) -> Option<OutDatagram> {
        if bytes.len() > Self::MAX {
            return None;
        }
        let mut out = OutDatagram {
            len: bytes.len() as u8,
            bytes: [0; Self::MAX],
        };
        out.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(out)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for OutDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OutDatagram({} bytes)", self.len)
    }
}

/// Opens a spec's sockets: each line joined, the reply socket connected.
pub fn open_spec(spec: &DatagramSpec) -> io::Result<DatagramSockets> {
    let mut sockets: DatagramSockets = [None, None, None];
    for (index, line) in spec.lines.iter().enumerate() {
        if let Some(config) = line {
            sockets[index] = Some(MulticastSocket::open(config)?.into_fd());
        }
    }
    if let Some(server) = spec.reply {
        let rcvbuf = spec.largest_rcvbuf().unwrap_or(1 << 20);
        sockets[2] = Some(reply_socket(server, rcvbuf)?);
    }
    Ok(sockets)
}

/// A new non-blocking, close-on-exec IPv4 UDP socket, and its raw descriptor for the options
/// set next.
fn udp_socket() -> io::Result<(OwnedFd, RawFd)> {
    // SAFETY: a plain socket(2) call; the descriptor is owned below.
    let raw = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: a descriptor this function just opened and nothing else owns.
    Ok((unsafe { OwnedFd::from_raw_fd(raw) }, raw))
}

/// A non-blocking UDP socket connected to `server` (a re-request server): what is sent on it
/// goes there, and only its answers arrive, with their kernel receive time and drop count.
pub fn reply_socket(server: SocketAddrV4, rcvbuf: usize) -> io::Result<OwnedFd> {
    let (fd, raw) = udp_socket()?;
    receive_options(raw, rcvbuf)?;
    let addr = sockaddr_in(server);
    // SAFETY: a sockaddr_in of the size given.
    check(unsafe {
        libc::connect(
            raw,
            std::ptr::from_ref(&addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Sends one datagram on a connected socket without blocking: a full socket buffer is an
/// error (`WouldBlock`), never a wait.
pub fn send_on(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `bytes` is live for the call, of the length given.
    let sent = unsafe {
        libc::send(
            fd,
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The control messages of one datagram (`msg_control` as the kernel filled it): the kernel's
/// receive time (`SCM_TIMESTAMPNS`, ns since the epoch) and the socket's drop count
/// (`SO_RXQ_OVFL`). Walks the bytes itself, so that io_uring's copy of them (in a provided
/// buffer, with no `msghdr` around it) reads the same way; anything malformed ends the walk.
pub fn parse_control(control: &[u8]) -> (Option<u64>, Option<u32>) {
    let align = std::mem::size_of::<usize>();
    let round = |len: usize| len.div_ceil(align) * align;
    let header = round(std::mem::size_of::<libc::cmsghdr>());
    let mut timestamp = None;
    let mut dropped = None;
    let mut at = 0usize;
    while at + header <= control.len() {
        let word = |offset: usize, size: usize| &control[at + offset..at + offset + size];
        let mut len_bytes = [0u8; 8];
        len_bytes[..align].copy_from_slice(word(0, align));
        let len = u64::from_ne_bytes(len_bytes) as usize;
        let level = i32::from_ne_bytes(word(align, 4).try_into().unwrap_or([0; 4]));
        let kind = i32::from_ne_bytes(word(align + 4, 4).try_into().unwrap_or([0; 4]));
        if len < header || at + len > control.len() {
            break;
        }
        let data = &control[at + header..at + len];
        if level == libc::SOL_SOCKET {
            if kind == libc::SCM_TIMESTAMPNS && data.len() >= 16 {
                let sec = i64::from_ne_bytes(data[..8].try_into().unwrap_or([0; 8]));
                let nsec = i64::from_ne_bytes(data[8..16].try_into().unwrap_or([0; 8]));
                timestamp = u64::try_from(sec)
                    .ok()
                    .and_then(|s| s.checked_mul(1_000_000_000))
                    .and_then(|ns| ns.checked_add(u64::try_from(nsec).ok()?));
            } else if kind == libc::SO_RXQ_OVFL && data.len() >= 4 {
                dropped = Some(u32::from_ne_bytes(data[..4].try_into().unwrap_or([0; 4])));
            }
        }
        at += round(len);
    }
    (timestamp, dropped)
}

/// One datagram from the non-blocking socket `fd` into `buffer` (see
/// [`MulticastSocket::recv`]), or `None` when none is waiting.
pub fn recv_on(fd: RawFd, buffer: &mut [u8]) -> io::Result<Option<Received>> {
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // Room for a timespec and a u32 with their headers, aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at live buffers of the lengths it says.
    let got = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if got < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(error),
        };
    }
    let control_len = msg.msg_controllen.min(std::mem::size_of_val(&control));
    // SAFETY: the kernel wrote `control_len` bytes of the array, which is plain data.
    let control_bytes =
        unsafe { std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), control_len) };
    let (kernel_ts_ns, dropped) = parse_control(control_bytes);
    Ok(Some(Received {
        len: (got as usize).min(buffer.len()),
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
        kernel_ts_ns,
        dropped,
    }))
}

/// A joined, non-blocking multicast socket.
pub struct MulticastSocket {
    fd: OwnedFd,
    rcvbuf: usize,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a `T` of the size given, alive for the call.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(value).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `addr` as the kernel takes it.
fn sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: in_addr(*addr.ip()),
        sin_zero: [0; 8],
    }
}

/// What every receiving socket of a datagram slot sets: a receive buffer of `rcvbuf` bytes
/// (past `rmem_max` where the process may), kernel receive timestamps and the drop counter.
fn receive_options(raw: libc::c_int, rcvbuf: usize) -> io::Result<()> {
    let one: libc::c_int = 1;
    let size = libc::c_int::try_from(rcvbuf).unwrap_or(libc::c_int::MAX);
    if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size).is_err() {
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &size)?;
    }
    setsockopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one)?;
    setsockopt(raw, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &one)
}

fn in_addr(ip: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from_ne_bytes(ip.octets()),
    }
}

impl MulticastSocket {
    /// Opens, sizes, binds to the group's address and port (so that only the group's datagrams
    /// arrive, beside another line on the same port) and joins.
    pub fn open(config: &MulticastConfig) -> io::Result<MulticastSocket> {
        if !config.group.ip().is_multicast() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a multicast group", config.group),
            ));
        }
        let (fd, raw) = udp_socket()?;
        let one: libc::c_int = 1;
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one)?;
        receive_options(raw, config.rcvbuf)?;
        let addr = sockaddr_in(config.group);
        // SAFETY: a sockaddr_in of the size given.
        check(unsafe {
            libc::bind(
                raw,
                std::ptr::from_ref(&addr).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        match config.source {
            Some(source) => setsockopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_ADD_SOURCE_MEMBERSHIP,
                &libc::ip_mreq_source {
                    imr_multiaddr: in_addr(*config.group.ip()),
                    imr_interface: in_addr(config.interface),
                    imr_sourceaddr: in_addr(source),
                },
            )?,
            None => setsockopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_ADD_MEMBERSHIP,
                &libc::ip_mreq {
                    imr_multiaddr: in_addr(*config.group.ip()),
                    imr_interface: in_addr(config.interface),
                },
            )?,
        }
        let mut got: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an int and its length, written by the kernel.
        check(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                std::ptr::from_mut(&mut got).cast(),
                &mut len,
            )
        })?;
        Ok(MulticastSocket {
            fd,
            rcvbuf: usize::try_from(got).unwrap_or(0),
        })
    }

    /// The receive buffer the kernel granted (Linux reports twice the size asked, its
    /// bookkeeping included).
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf
    }

    /// One datagram into `buffer`, or `None` when none is waiting.
    pub fn recv(&self, buffer: &mut [u8]) -> io::Result<Option<Received>> {
        recv_on(self.fd.as_raw_fd(), buffer)
    }

    /// The socket, for a transport to read.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

/// Every interface's IPv4 addresses, as `(name, address)`, in `getifaddrs` order.
fn ipv4_interfaces() -> io::Result<Vec<(String, Ipv4Addr)>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it owns into `list`; freed below.
    check(unsafe { libc::getifaddrs(&mut list) })?;
    let mut found = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: an entry of the list getifaddrs made, alive until freeifaddrs.
        let entry = unsafe { &*at };
        at = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a non-null socket address, whose family field every family has.
        let family = unsafe { (*entry.ifa_addr).sa_family };
        if i32::from(family) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*entry.ifa_addr.cast::<libc::sockaddr_in>() };
        // SAFETY: getifaddrs gives a NUL-terminated name.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) };
        found.push((
            name.to_string_lossy().into_owned(),
            Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        ));
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// The name of the interface that has IPv4 address `address` (for an interface named by its
/// address where the name is needed: AF_XDP binds to an interface).
pub fn interface_name(address: Ipv4Addr) -> io::Result<String> {
    ipv4_interfaces()?
        .into_iter()
        .find(|(_, found)| *found == address)
        .map(|(name, _)| name)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface here has the address {address}"),
            )
        })
}

/// The IPv4 address of an interface named by name (`eth1`) or by its address.
pub fn interface_address(interface: &str) -> io::Result<Ipv4Addr> {
    if let Ok(addr) = interface.parse::<Ipv4Addr>() {
        return Ok(addr);
    }
    ipv4_interfaces()?
        .into_iter()
        .find(|(name, _)| name == interface)
        .map(|(_, address)| address)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("interface {interface:?} has no IPv4 address here"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::net::{BackendChoice, IoEvent, Transport, TransportConfig, WaitMode};
    use std::time::{Duration, Instant};

    #[test]
    fn xdp_lines_keep_the_interface_name_and_the_queues_as_given() {
        let lines = XdpLines::new("eth1", 0b101, [true, false]).unwrap();
        assert_eq!(lines.interface(), "eth1");
        assert_eq!(lines.queue_list(), Some(vec![0, 2]));
        assert_eq!(lines.lines, [true, false]);
        let all = XdpLines::new("enp129s0f1np1xx", 0, [true, true]).unwrap();
        assert_eq!(all.interface(), "enp129s0f1np1xx", "15 bytes fit");
        assert_eq!(all.queue_list(), None, "0: every queue");
        assert_eq!(
            XdpLines::new("a", 1 << 63, [true, true])
                .unwrap()
                .queue_list(),
            Some(vec![63])
        );
        assert!(XdpLines::new("", 0, [true, true]).is_none());
        assert!(XdpLines::new("sixteen-bytes-xx", 0, [true, true]).is_none());
        assert!(XdpLines::new("a\0b", 0, [true, true]).is_none());
    }

    #[test]
    fn an_interface_is_found_by_its_address() {
        assert_eq!(interface_name(Ipv4Addr::LOCALHOST).unwrap(), "lo");
        let error = interface_name(Ipv4Addr::new(192, 0, 2, 77)).unwrap_err();
        assert!(error.to_string().contains("192.0.2.77"), "{error}");
    }

    /// A control message as the kernel lays it out: header, data, padding to the next.
    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let align = std::mem::size_of::<usize>();
        let header = std::mem::size_of::<libc::cmsghdr>().div_ceil(align) * align;
        let len = header + data.len();
        let mut out = vec![0u8; len.div_ceil(align) * align];
        out[..align].copy_from_slice(&(len as u64).to_ne_bytes()[..align]);
        out[align..align + 4].copy_from_slice(&level.to_ne_bytes());
        out[align + 4..align + 8].copy_from_slice(&kind.to_ne_bytes());
        out[header..header + data.len()].copy_from_slice(data);
        out
    }

    #[test]
    fn control_messages_give_the_kernel_time_and_drop_count_and_never_read_past_their_end() {
        let mut timespec = Vec::new();
        timespec.extend_from_slice(&1_700_000_000i64.to_ne_bytes());
        timespec.extend_from_slice(&123_456_789i64.to_ne_bytes());
        let mut control = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &timespec);
        control.extend(cmsg(
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &7u32.to_ne_bytes(),
        ));
        assert_eq!(
            parse_control(&control),
            (Some(1_700_000_000_123_456_789), Some(7))
        );
        // Another level's message is skipped; every cut of the buffer reads what fits, no more.
        let other = cmsg(libc::IPPROTO_IP, libc::SCM_TIMESTAMPNS, &timespec);
        assert_eq!(parse_control(&other), (None, None));
        for cut in 0..control.len() {
            let (ts, _) = parse_control(&control[..cut]);
            assert!(ts.is_none() || cut >= 32, "{cut}");
        }
        // A length past the buffer, or shorter than a header, ends the walk.
        let mut bad = control.clone();
        bad[0] = 0xff;
        assert_eq!(parse_control(&bad), (None, None));
        bad[..8].copy_from_slice(&4u64.to_ne_bytes());
        assert_eq!(parse_control(&bad), (None, None));
    }

    /// A datagram slot with only its request socket, on loopback (no multicast, no root): what
    /// the "server" sends arrives as one `Datagram` event per datagram, on the reply line, with
    /// the kernel's receive time, through io_uring and through epoll; a request goes out with
    /// `send_datagram`; a closed slot delivers nothing more.
    #[test]
    fn a_datagram_slot_reads_each_datagram_with_its_kernel_time_on_both_backends() {
        for backend in [BackendChoice::IoUring, BackendChoice::Epoll] {
            let Ok((mut transport, _)) =
                Transport::open(backend, TransportConfig::default(), Clock::monotonic())
            else {
                assert_ne!(backend, BackendChoice::Epoll, "epoll always opens");
                eprintln!("skipped: io_uring is unavailable here");
                continue;
            };
            let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let std::net::SocketAddr::V4(addr) = server.local_addr().unwrap() else {
                unreachable!()
            };
            let reply = reply_socket(addr, 1 << 20).unwrap();
            transport
                .open_datagrams(3, [None, None, Some(reply)])
                .unwrap();
            transport
                .send_datagram(3, DatagramLine::Reply, b"request")
                .unwrap();
            let mut buffer = [0u8; 64];
            server
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let (len, client) = server.recv_from(&mut buffer).unwrap();
            assert_eq!(&buffer[..len], b"request");
            let before = crate::clock::system_realtime_ns();
            for index in 0..5u8 {
                server.send_to(&[index; 100], client).unwrap();
            }
            let mut got: Vec<(DatagramLine, Vec<u8>, u64, bool)> = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while got.len() < 5 && Instant::now() < deadline {
                transport
                    .poll(
                        WaitMode::Block {
                            timeout: Duration::from_millis(10),
                        },
                        &mut |conn, event| {
                            assert_eq!(conn, 3);
                            if let IoEvent::Datagram {
                                line,
                                bytes,
                                recv_ts_ns,
                                kernel_ts,
                                ..
                            } = event
                            {
                                got.push((line, bytes.to_vec(), recv_ts_ns, kernel_ts));
                            }
                        },
                    )
                    .unwrap();
            }
            assert_eq!(got.len(), 5, "{backend:?}");
            for (index, (line, bytes, ts, kernel)) in got.iter().enumerate() {
                assert_eq!(*line, DatagramLine::Reply);
                assert_eq!(
                    bytes,
                    &vec![index as u8; 100],
                    "{backend:?}: one frame each"
                );
                assert!(*kernel && *ts >= before, "{backend:?}: the kernel's time");
            }
            transport.close(3);
            server.send_to(b"late", client).unwrap_or(0);
            let mut late = 0;
            for _ in 0..5 {
                transport
                    .poll(
                        WaitMode::Block {
                            timeout: Duration::from_millis(5),
                        },
                        &mut |_, _| late += 1,
                    )
                    .unwrap();
            }
            assert_eq!(late, 0, "{backend:?}: nothing after the close");
            assert!(transport
                .send_datagram(3, DatagramLine::Reply, b"x")
                .is_err());
        }
    }
}
