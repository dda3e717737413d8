//! UDP multicast sockets for a datagram venue (Nasdaq ITCH's A and B lines): joined to a group
//! on an interface named by name or address, with a source-specific join where configured
//! (IGMPv3), `SO_RCVBUF` sized (`SO_RCVBUFFORCE` first, which root may use past
//! `net.core.rmem_max`), the kernel's receive time (`SO_TIMESTAMPNS`) and its count of datagrams
//! dropped for want of buffer (`SO_RXQ_OVFL`) read from each datagram's control messages.
//!
//! A datagram is its own frame: [`MulticastSocket::recv`] reads one into the caller's buffer with
//! `recvmsg` (non-blocking, a control buffer on the stack: nothing allocates per datagram).
//! Not yet wired into the network thread's engines (`engine.rs`): the building block for it.

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
        // SAFETY: a plain socket(2) call; the descriptor is owned below.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: a descriptor this function just opened and nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one)?;
        let size = libc::c_int::try_from(config.rcvbuf).unwrap_or(libc::c_int::MAX);
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size).is_err() {
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &size)?;
        }
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one)?;
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &one)?;
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: config.group.port().to_be(),
            sin_addr: in_addr(*config.group.ip()),
            sin_zero: [0; 8],
        };
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
        let got = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if got < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(error),
            };
        }
        let mut received = Received {
            len: got as usize,
            truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
            kernel_ts_ns: None,
            dropped: None,
        };
        // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
        // `msg_controllen`.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let header = &*cmsg;
                let data = libc::CMSG_DATA(cmsg);
                if header.cmsg_level == libc::SOL_SOCKET {
                    if header.cmsg_type == libc::SCM_TIMESTAMPNS {
                        let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                        received.kernel_ts_ns = u64::try_from(ts.tv_sec)
                            .ok()
                            .and_then(|s| s.checked_mul(1_000_000_000))
                            .and_then(|ns| ns.checked_add(ts.tv_nsec as u64));
                    } else if header.cmsg_type == libc::SO_RXQ_OVFL {
                        received.dropped = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        Ok(Some(received))
    }
}

/// The IPv4 address of an interface named by name (`eth1`) or by its address.
pub fn interface_address(interface: &str) -> io::Result<Ipv4Addr> {
    if let Ok(addr) = interface.parse::<Ipv4Addr>() {
        return Ok(addr);
    }
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it owns into `list`; freed below.
    check(unsafe { libc::getifaddrs(&mut list) })?;
    let mut found = None;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: an entry of the list getifaddrs made, alive until freeifaddrs.
        let entry = unsafe { &*at };
        at = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: getifaddrs gives a NUL-terminated name.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) };
        // SAFETY: a non-null socket address, whose family field every family has.
        let family = unsafe { (*entry.ifa_addr).sa_family };
        if name.to_bytes() == interface.as_bytes() && i32::from(family) == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*entry.ifa_addr.cast::<libc::sockaddr_in>() };
            found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            break;
        }
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(list) };
    found.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface {interface:?} has no IPv4 address here"),
        )
    })
}
