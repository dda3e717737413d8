//! One AF_XDP socket on one queue of an interface: its UMEM (the frames the kernel writes
//! received packets into), the fill ring (frames handed to the kernel), the RX ring (frames
//! received) and the completion ring (required to bind; empty, as nothing is sent).
//!
//! Every frame of the UMEM is allocated once, at [`XdpSocket::open`], and circulates: a received
//! frame is handed to the caller in place and goes back into the fill ring right after, so the
//! receive path neither allocates nor copies.
//!
//! Bind tries zero-copy first (`XDP_ZEROCOPY`, which the driver must support: ice, i40e, mlx5
//! and others) and falls back to copy mode (`XDP_COPY`: the kernel copies each frame into the
//! UMEM, which is what veth and generic mode give). `XDP_USE_NEED_WAKEUP` is asked for, so that
//! in copy mode the kernel is entered only when it says it needs to be. Busy polling
//! (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`, Linux 5.11) is set where the
//! kernel has it; what was refused is reported, not fatal. A queue still held by the socket of a
//! process that has just ended (the kernel releases it after a moment) answers the bind with
//! EBUSY: that is tried again for up to three seconds before it is an error.

use super::ring::{Consumer, Desc, Producer, RingMemory};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const SO_BUSY_POLL: libc::c_int = 46;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;
/// How long a bind that finds the queue busy is tried again (see [`XdpSocket::open`]).
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The UMEM's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmemConfig {
    /// Frames in the UMEM (a power of two): all go into the fill ring at start, and the fill and
    /// RX rings have as many entries, so the kernel can hold that many received frames before
    /// the RX ring is full (its `rx_ring_full` count).
    pub frames: u32,
    /// Bytes per frame: 2048 or 4096 (a frame holds one packet, so at least the MTU plus 14).
    pub frame_bytes: u32,
    /// Busy-poll for this long (µs) per `recvfrom`, 0 for none.
    pub busy_poll_us: u32,
    /// Packets per busy-poll round.
    pub busy_poll_budget: u32,
}

impl Default for UmemConfig {
    fn default() -> UmemConfig {
        UmemConfig {
            frames: 4096,
            frame_bytes: 2048,
            busy_poll_us: 0,
            busy_poll_budget: 64,
        }
    }
}

/// What the bind got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketFacts {
    pub queue: u32,
    pub zero_copy: bool,
    /// Socket options the kernel refused (busy polling on an older kernel), with why.
    pub refused_options: Vec<String>,
}

/// Why a socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("AF_XDP socket: {0} (needs CAP_NET_RAW; the kernel needs CONFIG_XDP_SOCKETS)")]
    Socket(io::Error),
    #[error("UMEM of {frames} frames of {frame_bytes} bytes: {error}")]
    Umem {
        frames: u32,
        frame_bytes: u32,
        error: io::Error,
    },
    #[error("AF_XDP ring set-up ({what}): {error}")]
    Ring {
        what: &'static str,
        error: io::Error,
    },
    #[error(
        "binding to queue {queue} of interface {ifindex}: zero-copy: {zero_copy}; copy: {copy}"
    )]
    Bind {
        ifindex: u32,
        queue: u32,
        zero_copy: io::Error,
        copy: io::Error,
    },
    #[error("UMEM config: {0}")]
    Config(&'static str),
}

/// An anonymous or kernel mapping, unmapped on drop.
struct Mapping {
    at: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value.
unsafe impl Send for Mapping {}

impl Mapping {
    fn map(len: usize, fd: RawFd, offset: libc::off_t) -> io::Result<Mapping> {
        let (flags, fd) = if fd < 0 {
            (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            )
        } else {
            (libc::MAP_SHARED | libc::MAP_POPULATE, fd)
        };
        // SAFETY: a fresh mapping at an address of the kernel's choosing; nothing aliases it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { at, len })
    }

    fn at(&self, offset: u64) -> *mut u8 {
        // SAFETY: the offsets used come from the kernel's XDP_MMAP_OFFSETS, within the mapping.
        unsafe { self.at.cast::<u8>().add(offset as usize) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps what `map` mapped, once.
        unsafe { libc::munmap(self.at, self.len) };
    }
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live, initialised `T` of the size passed.
    let result = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A bound AF_XDP socket receiving one queue's steered frames.
pub struct XdpSocket {
    // Field order is drop order: the rings' mappings go before the socket, the UMEM last.
    rx: Consumer<Desc>,
    fill: Producer<u64>,
    _rx_map: Mapping,
    _fill_map: Mapping,
    _completion_map: Mapping,
    fd: OwnedFd,
    umem: Mapping,
    frame_bytes: u32,
    /// Frame addresses not in the fill ring (between a frame's reading and its return).
    spare: Vec<u64>,
    facts: SocketFacts,
}

impl XdpSocket {
    /// Opens a socket with its UMEM and binds it to `queue` of `ifindex`, zero-copy if the
    /// driver can, copy mode otherwise. Insert it in the program's map
    /// ([`super::program::Attached::insert`]) to receive.
    pub fn open(ifindex: u32, queue: u32, config: UmemConfig) -> Result<XdpSocket, SocketError> {
        if !config.frames.is_power_of_two() || config.frames < 64 {
            return Err(SocketError::Config(
                "frames must be a power of two, at least 64",
            ));
        }
        if config.frame_bytes != 2048 && config.frame_bytes != 4096 {
            return Err(SocketError::Config("frame_bytes must be 2048 or 4096"));
        }
        // SAFETY: plain socket creation; the descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(SocketError::Socket(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = config.frames as usize * config.frame_bytes as usize;
        let umem_error = |error| SocketError::Umem {
            frames: config.frames,
            frame_bytes: config.frame_bytes,
            error,
        };
        let umem = Mapping::map(umem_len, -1, 0).map_err(umem_error)?;
        let registration = libc::xdp_umem_reg {
            addr: umem.at as u64,
            len: umem_len as u64,
            chunk_size: config.frame_bytes,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_raw_fd(), SOL_XDP, XDP_UMEM_REG, &registration).map_err(umem_error)?;
        let ring_size = config.frames;
        let ring_error = |what| move |error| SocketError::Ring { what, error };
        setsockopt(fd.as_raw_fd(), SOL_XDP, XDP_UMEM_FILL_RING, &ring_size)
            .map_err(ring_error("fill ring size"))?;
        let completion_size: u32 = 64;
        setsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            XDP_UMEM_COMPLETION_RING,
            &completion_size,
        )
        .map_err(ring_error("completion ring size"))?;
        setsockopt(fd.as_raw_fd(), SOL_XDP, XDP_RX_RING, &ring_size)
            .map_err(ring_error("RX ring size"))?;

        let mut offsets = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: `offsets` is a writable buffer of `len` bytes.
        let result = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                (&mut offsets as *mut MmapOffsets).cast(),
                &mut len,
            )
        };
        if result < 0 {
            return Err(SocketError::Ring {
                what: "XDP_MMAP_OFFSETS",
                error: io::Error::last_os_error(),
            });
        }
        let rx_map = Mapping::map(
            offsets.rx.desc as usize + ring_size as usize * std::mem::size_of::<Desc>(),
            fd.as_raw_fd(),
            XDP_PGOFF_RX_RING,
        )
        .map_err(ring_error("mapping the RX ring"))?;
        let fill_map = Mapping::map(
            offsets.fr.desc as usize + ring_size as usize * 8,
            fd.as_raw_fd(),
            XDP_UMEM_PGOFF_FILL_RING,
        )
        .map_err(ring_error("mapping the fill ring"))?;
        let completion_map = Mapping::map(
            offsets.cr.desc as usize + completion_size as usize * 8,
            fd.as_raw_fd(),
            XDP_UMEM_PGOFF_COMPLETION_RING,
        )
        .map_err(ring_error("mapping the completion ring"))?;
        let memory = |map: &Mapping, offset: &RingOffset, size: u32| RingMemory {
            producer: map.at(offset.producer).cast::<AtomicU32>(),
            consumer: map.at(offset.consumer).cast::<AtomicU32>(),
            flags: map.at(offset.flags).cast::<AtomicU32>(),
            entries: map.at(offset.desc),
            size,
        };
        // SAFETY: the rings are mapped as the kernel's offsets say and live as long as the
        // socket (fields drop after the handles); we are the RX ring's consumer and the fill
        // ring's producer.
        let (rx, mut fill) = unsafe {
            (
                Consumer::<Desc>::new(memory(&rx_map, &offsets.rx, ring_size)),
                Producer::<u64>::new(memory(&fill_map, &offsets.fr, ring_size)),
            )
        };

        // Every frame to the kernel now; a received frame is spare until it goes back.
        let frame_bytes = u64::from(config.frame_bytes);
        let mut spare: Vec<u64> = (0..u64::from(config.frames))
            .map(|i| i * frame_bytes)
            .collect();
        let handed = fill.free(ring_size);
        for i in 0..handed {
            fill.put(i, spare.pop().expect("as many frames as fill ring entries"));
        }
        fill.submit(handed);

        let mut facts = SocketFacts {
            queue,
            zero_copy: false,
            refused_options: Vec::new(),
        };
        if config.busy_poll_us > 0 {
            let one: libc::c_int = 1;
            let options = [
                (SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL", one),
                (
                    SO_BUSY_POLL,
                    "SO_BUSY_POLL",
                    config.busy_poll_us as libc::c_int,
                ),
                (
                    SO_BUSY_POLL_BUDGET,
                    "SO_BUSY_POLL_BUDGET",
                    config.busy_poll_budget as libc::c_int,
                ),
            ];
            for (option, name, value) in options {
                if let Err(error) = setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, option, &value) {
                    facts.refused_options.push(format!("{name}: {error}"));
                }
            }
        }

        let bind = |flags: u16| {
            let address = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags | XDP_USE_NEED_WAKEUP,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: `address` is a valid sockaddr_xdp of the size passed.
            let result = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&address as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if result < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // A queue whose previous socket was just closed (a process that ended a moment ago)
        // stays busy until the kernel's deferred release has run: EBUSY is retried for a while.
        let busy_until = std::time::Instant::now() + BIND_BUSY_WAIT;
        loop {
            match bind(XDP_ZEROCOPY) {
                Ok(()) => {
                    facts.zero_copy = true;
                    break;
                }
                Err(zero_copy) => match bind(XDP_COPY) {
                    Ok(()) => break,
                    Err(copy)
                        if copy.raw_os_error() == Some(libc::EBUSY)
                            && std::time::Instant::now() < busy_until =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(copy) => {
                        return Err(SocketError::Bind {
                            ifindex,
                            queue,
                            zero_copy,
                            copy,
                        })
                    }
                },
            }
        }
        // What the kernel says it runs (Linux 5.10), in case a copy-mode bind was upgraded.
        let mut options: u32 = 0;
        let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
        // SAFETY: `options` is a writable u32.
        let result = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                SOL_XDP,
                XDP_OPTIONS,
                (&mut options as *mut u32).cast(),
                &mut len,
            )
        };
        if result == 0 {
            facts.zero_copy = options & XDP_OPTIONS_ZEROCOPY != 0;
        }
        Ok(XdpSocket {
            rx,
            fill,
            _rx_map: rx_map,
            _fill_map: fill_map,
            _completion_map: completion_map,
            fd,
            umem,
            frame_bytes: config.frame_bytes,
            spare,
            facts,
        })
    }

    pub fn facts(&self) -> &SocketFacts {
        &self.facts
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Hands up to `max` received frames to `on_frame`, each borrowed from the UMEM, then gives
    /// their buffers back to the kernel. Returns how many. Never blocks, never allocates.
    pub fn receive(&mut self, max: u32, mut on_frame: impl FnMut(&[u8])) -> u32 {
        let ready = self.rx.peek(max);
        let frame_mask = !(u64::from(self.frame_bytes) - 1);
        let umem_len = self.umem.len as u64;
        for i in 0..ready {
            let desc = self.rx.get(i);
            let end = desc.addr.saturating_add(u64::from(desc.len));
            if end <= umem_len && desc.len <= self.frame_bytes {
                // SAFETY: the descriptor lies inside the UMEM (checked above) and the kernel
                // wrote the frame before publishing it; it stays ours until the address goes
                // back into the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.umem.at(desc.addr), desc.len as usize)
                };
                on_frame(frame);
            }
            self.spare.push(desc.addr & frame_mask);
        }
        self.rx.release(ready);
        self.refill();
        ready
    }

    /// Gives spare frames to the kernel.
    fn refill(&mut self) {
        let free = self.fill.free(self.spare.len() as u32);
        for i in 0..free {
            let addr = self.spare.pop().expect("free() is at most the spare count");
            self.fill.put(i, addr);
        }
        if free > 0 {
            self.fill.submit(free);
        }
    }

    /// Whether the kernel wants a `recvfrom` (or `poll`) to go on filling the RX ring.
    pub fn needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }

    /// Enters the kernel so that it processes the queue (a busy-poll round where set up).
    pub fn wake(&self) {
        // SAFETY: a zero-length, non-blocking recvfrom on our own socket.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}
