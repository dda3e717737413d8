//! Plain socket plumbing shared by both backends: creating a TCP socket, its options, and
//! `SocketAddr` to `sockaddr` conversion. Everything here is a thin, checked wrapper over libc.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Per-connection socket options, from the appliance's `[net]` config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketOptions {
    /// `SO_RCVBUF` in bytes; `None` keeps the kernel's autotuning (usually best on loopback).
    pub rcvbuf_bytes: Option<u32>,
    /// `SO_BUSY_POLL` in microseconds: the kernel polls the NIC queue on a blocking read for
    /// that long before sleeping. Needs CAP_NET_ADMIN to raise; refusals are reported, not fatal.
    pub busy_poll_us: Option<u32>,
}

/// A `sockaddr_storage` holding a v4 or v6 address, and its length: what `connect` takes.
#[derive(Clone, Copy)]
pub struct RawAddr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
}

impl RawAddr {
    pub fn new(addr: SocketAddr) -> RawAddr {
        // SAFETY: an all-zero sockaddr_storage is a valid value (it is plain old data).
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
                unsafe {
                    std::ptr::write(
                        (&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(),
                        sin,
                    )
                };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write(
                        (&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
                        sin6,
                    )
                };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }
}

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// A new TCP socket for `addr`'s family: close-on-exec, optionally non-blocking.
pub fn tcp_socket(addr: SocketAddr, nonblocking: bool) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let mut kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if nonblocking {
        kind |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: socket(2) with valid constants; the returned descriptor is owned below.
    let fd = check(unsafe { libc::socket(family, kind, libc::IPPROTO_TCP) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` lives across the call and its size is passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Applies the options; returns the ones the kernel refused (as warnings for the caller to log
/// once), failing only if TCP_NODELAY itself fails.
pub fn apply_options(fd: &OwnedFd, options: &SocketOptions) -> io::Result<Vec<String>> {
    let raw = fd.as_raw_fd();
    // Market data is many small messages: never let Nagle hold our pongs and requests back.
    set_int_option(raw, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    let mut refused = Vec::new();
    if let Some(bytes) = options.rcvbuf_bytes {
        if let Err(error) = set_int_option(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes as i32) {
            refused.push(format!("SO_RCVBUF={bytes}: {error}"));
        }
    }
    if let Some(us) = options.busy_poll_us {
        if let Err(error) = set_int_option(raw, libc::SOL_SOCKET, libc::SO_BUSY_POLL, us as i32) {
            refused.push(format!(
                "SO_BUSY_POLL={us}: {error} (raising it needs CAP_NET_ADMIN)"
            ));
        }
    }
    Ok(refused)
}

/// The pending error of a socket (`SO_ERROR`), which a non-blocking connect reports through.
pub fn take_socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writing and `len` holds the size of `value`.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((value != 0).then(|| io::Error::from_raw_os_error(value)))
}
