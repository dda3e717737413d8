//! The fallback backend: non-blocking sockets and level-triggered epoll.
//!
//! Reads go into one receive buffer owned by the transport and are handed out borrowed, so a
//! receive costs `epoll_wait` (amortised over every ready socket) plus one `recv` per read.
//! Sends are attempted at once; what the kernel does not take waits in the connection's send
//! buffer until the socket is writable.

use super::socket::{self, RawAddr};
use super::udp::{self, DatagramLine, DatagramSockets};
use super::{ConnId, IoEvent, NetError, TransportConfig, WaitMode};
use crate::clock::Clock;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

/// Reads per ready socket per poll at most. Stream sockets are read in turns, one read each
/// per pass over those still holding a full buffer's worth, so a connection with a burst
/// waiting delays another ready connection's read by one read at most, never by eight.
const READS_PER_WAKE: usize = 8;
const MAX_EVENTS: usize = 64;

#[derive(Debug, PartialEq, Eq)]
enum State {
    Free,
    Connecting { deadline: Instant },
    Open,
}

struct Slot {
    fd: Option<OwnedFd>,
    /// Bumped on every connect, so a stale epoll event for a reused slot is recognised.
    generation: u32,
    state: State,
    /// Bytes waiting for the socket to become writable; `send_pos` of them are already sent.
    unsent: Vec<u8>,
    send_pos: usize,
    /// Whether EPOLLOUT is in the interest set.
    watching_writable: bool,
    /// A send failed: reported as `Closed` at the next poll.
    failed: Option<io::Error>,
}

pub struct EpollTransport {
    epoll: OwnedFd,
    clock: Clock,
    config: TransportConfig,
    slots: Vec<Slot>,
    recv_buffer: Vec<u8>,
    events: Vec<libc::epoll_event>,
    connecting: usize,
    /// Slots with a `failed` send waiting to be reported.
    failures: usize,
    pub(super) warnings: Vec<String>,
    /// By slot: its datagram sockets and their generation, when it is a datagram slot.
    datagrams: Vec<Option<(DatagramSockets, u32)>>,
    /// Stream slots whose last read in this poll filled the buffer (more may be waiting): read
    /// again in the next pass; and the pass being read (both keep their capacity).
    again: Vec<ConnId>,
    pass: Vec<ConnId>,
}

fn token(conn: ConnId, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(conn)
}

/// A datagram socket's token: its slot (24 bits), its line and this flag in the low word.
const DATAGRAM_TOKEN: u64 = 1 << 31;

fn datagram_token(conn: ConnId, line: DatagramLine, generation: u32) -> u64 {
    (u64::from(generation) << 32)
        | DATAGRAM_TOKEN
        | ((line as u64) << 24)
        | u64::from(conn & 0x00ff_ffff)
}

impl EpollTransport {
    pub fn new(config: TransportConfig, clock: Clock) -> Result<EpollTransport, NetError> {
        // SAFETY: epoll_create1 with a valid flag; the descriptor is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(NetError::EpollSetup(io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let slots = (0..config.max_connections)
            .map(|_| Slot {
                fd: None,
                generation: 0,
                state: State::Free,
                unsent: Vec::new(),
                send_pos: 0,
                watching_writable: false,
                failed: None,
            })
            .collect();
        Ok(EpollTransport {
            epoll,
            clock,
            config,
            slots,
            recv_buffer: vec![0; config.recv_buffer_bytes as usize],
            // SAFETY: epoll_event is plain old data; zero is a valid value.
            events: vec![unsafe { std::mem::zeroed() }; MAX_EVENTS],
            connecting: 0,
            failures: 0,
            warnings: Vec::new(),
            datagrams: (0..config.max_connections).map(|_| None).collect(),
            again: Vec::with_capacity(MAX_EVENTS),
            pass: Vec::with_capacity(MAX_EVENTS),
        })
    }

    /// Makes `conn` a datagram slot: each socket in the epoll set, read when readable.
    pub fn open_datagrams(
        &mut self,
        conn: ConnId,
        sockets: DatagramSockets,
    ) -> Result<(), NetError> {
        if self
            .slots
            .get(conn as usize)
            .is_none_or(|slot| slot.state != State::Free)
            || self.datagrams[conn as usize].is_some()
        {
            return Err(NetError::BadSlot(conn));
        }
        let slot = &mut self.slots[conn as usize];
        slot.generation = slot.generation.wrapping_add(1);
        let generation = slot.generation;
        for line in DatagramLine::ALL {
            if let Some(fd) = &sockets[line as usize] {
                let mut event = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: datagram_token(conn, line, generation),
                };
                // SAFETY: both descriptors are open and `event` is valid for the call.
                let result = unsafe {
                    libc::epoll_ctl(
                        self.epoll.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        fd.as_raw_fd(),
                        &mut event,
                    )
                };
                if result < 0 {
                    return Err(io::Error::last_os_error().into());
                }
            }
        }
        self.datagrams[conn as usize] = Some((sockets, generation));
        Ok(())
    }

    /// Sends one datagram on socket `line` of datagram slot `conn`, without blocking.
    pub fn send_datagram(
        &mut self,
        conn: ConnId,
        line: DatagramLine,
        bytes: &[u8],
    ) -> Result<(), NetError> {
        let fd = self
            .datagrams
            .get(conn as usize)
            .and_then(Option::as_ref)
            .and_then(|(sockets, _)| sockets[line as usize].as_ref())
            .ok_or(NetError::NotOpen(conn))?;
        udp::send_on(fd.as_raw_fd(), bytes)?;
        Ok(())
    }

    /// Reads what a datagram socket holds (a few datagrams per wake, like a stream).
    fn read_datagrams(
        &mut self,
        conn: ConnId,
        line: DatagramLine,
        recv_ts_ns: u64,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> usize {
        let mut delivered = 0;
        for _ in 0..READS_PER_WAKE {
            let Some(fd) = self
                .datagrams
                .get(conn as usize)
                .and_then(Option::as_ref)
                .and_then(|(sockets, _)| sockets[line as usize].as_ref())
                .map(AsRawFd::as_raw_fd)
            else {
                break;
            };
            match udp::recv_on(fd, &mut self.recv_buffer) {
                Ok(Some(received)) => {
                    on_event(
                        conn,
                        IoEvent::Datagram {
                            line,
                            bytes: &self.recv_buffer[..received.len],
                            recv_ts_ns: received.kernel_ts_ns.unwrap_or(recv_ts_ns),
                            kernel_ts: received.kernel_ts_ns.is_some(),
                            dropped: received.dropped,
                            truncated: received.truncated,
                        },
                    );
                    delivered += 1;
                }
                Ok(None) => break,
                Err(error) => {
                    on_event(conn, IoEvent::DatagramError { line, error });
                    delivered += 1;
                    break;
                }
            }
        }
        delivered
    }

    fn ctl(&self, op: libc::c_int, conn: ConnId, writable: bool) -> io::Result<()> {
        let slot = &self.slots[conn as usize];
        let Some(fd) = &slot.fd else {
            return Ok(());
        };
        let mut flags = libc::EPOLLIN | libc::EPOLLRDHUP;
        if writable {
            flags |= libc::EPOLLOUT;
        }
        let mut event = libc::epoll_event {
            events: flags as u32,
            u64: token(conn, slot.generation),
        };
        // SAFETY: both descriptors are open and `event` is valid for the call.
        let result =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd.as_raw_fd(), &mut event) };
        if result < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    pub fn connect(&mut self, conn: ConnId, addr: SocketAddr) -> Result<(), NetError> {
        let slot = self
            .slots
            .get(conn as usize)
            .filter(|slot| slot.state == State::Free)
            .ok_or(NetError::BadSlot(conn))?;
        let _ = slot;
        let fd = socket::tcp_socket(addr, true)?;
        self.warnings
            .extend(socket::apply_options(&fd, &self.config.socket)?);
        let raw = RawAddr::new(addr);
        // SAFETY: `raw` holds a valid sockaddr of `raw.len` bytes.
        let result = unsafe { libc::connect(fd.as_raw_fd(), raw.as_ptr(), raw.len) };
        if result < 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(error.into());
            }
        }
        let deadline = Instant::now() + self.config.connect_timeout;
        let slot = &mut self.slots[conn as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.fd = Some(fd);
        slot.state = State::Connecting { deadline };
        slot.unsent.clear();
        slot.send_pos = 0;
        slot.watching_writable = true;
        self.connecting += 1;
        self.ctl(libc::EPOLL_CTL_ADD, conn, true)?;
        Ok(())
    }

    pub fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), NetError> {
        let slot = self
            .slots
            .get_mut(conn as usize)
            .ok_or(NetError::BadSlot(conn))?;
        match slot.state {
            State::Free => return Err(NetError::NotOpen(conn)),
            State::Connecting { .. } => {
                slot.unsent.extend_from_slice(bytes);
                return Ok(());
            }
            State::Open => {}
        }
        if slot.failed.is_some() {
            return Ok(());
        }
        slot.unsent.extend_from_slice(bytes);
        self.flush(conn);
        Ok(())
    }

    pub fn unsent(&self, conn: ConnId) -> usize {
        self.slots
            .get(conn as usize)
            .map_or(0, |slot| slot.unsent.len() - slot.send_pos)
    }

    /// Now, on the clock that stamps received bytes (ns since the epoch).
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Sends what the kernel takes; watches for writability while anything is left.
    fn flush(&mut self, conn: ConnId) {
        let slot = &mut self.slots[conn as usize];
        let Some(fd) = &slot.fd else { return };
        while slot.send_pos < slot.unsent.len() {
            let rest = &slot.unsent[slot.send_pos..];
            // SAFETY: `rest` is valid for reading `rest.len()` bytes; MSG_NOSIGNAL turns a
            // broken pipe into EPIPE instead of a signal.
            let sent = unsafe {
                libc::send(
                    fd.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if sent < 0 {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    _ => {
                        slot.failed = Some(error);
                        self.failures += 1;
                        return;
                    }
                }
            }
            slot.send_pos += sent as usize;
        }
        if slot.send_pos == slot.unsent.len() {
            slot.unsent.clear();
            slot.send_pos = 0;
        }
        let want_writable = !slot.unsent.is_empty();
        if want_writable != slot.watching_writable {
            slot.watching_writable = want_writable;
            if let Err(error) = self.ctl(libc::EPOLL_CTL_MOD, conn, want_writable) {
                self.slots[conn as usize].failed = Some(error);
                self.failures += 1;
            }
        }
    }

    pub fn close(&mut self, conn: ConnId) {
        if let Some(Some(_)) = self.datagrams.get_mut(conn as usize).map(Option::take) {
            // Closing the descriptors removes them from the epoll set; events already
            // reaped for them are stale by the new generation.
            let slot = &mut self.slots[conn as usize];
            slot.generation = slot.generation.wrapping_add(1);
            return;
        }
        let Some(slot) = self.slots.get_mut(conn as usize) else {
            return;
        };
        if let State::Connecting { .. } = slot.state {
            self.connecting -= 1;
        }
        slot.state = State::Free;
        slot.unsent.clear();
        slot.send_pos = 0;
        if slot.failed.take().is_some() {
            self.failures -= 1;
        }
        slot.watching_writable = false;
        // Closing the descriptor removes it from the epoll set.
        slot.fd = None;
    }

    pub fn poll(
        &mut self,
        wait: WaitMode,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> Result<usize, NetError> {
        let mut delivered = 0;
        // Send failures found outside poll are reported first.
        if self.failures > 0 {
            for conn in 0..self.slots.len() as ConnId {
                if let Some(error) = self.slots[conn as usize].failed.take() {
                    self.failures -= 1;
                    self.close(conn);
                    on_event(conn, IoEvent::Closed(Some(error)));
                    delivered += 1;
                }
            }
        }
        let timeout_ms = match wait {
            WaitMode::BusyPoll => 0,
            WaitMode::Block { timeout } => {
                let mut ms = timeout.as_millis().min(i32::MAX as u128) as i32;
                if timeout.as_nanos() > 0 && ms == 0 {
                    ms = 1;
                }
                if self.connecting > 0 {
                    let now = Instant::now();
                    for slot in &self.slots {
                        if let State::Connecting { deadline } = slot.state {
                            let left =
                                deadline.saturating_duration_since(now).as_millis() as i32 + 1;
                            ms = ms.min(left);
                        }
                    }
                }
                ms
            }
        };
        // SAFETY: `events` has room for MAX_EVENTS entries and outlives the call.
        let ready = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                MAX_EVENTS as i32,
                timeout_ms,
            )
        };
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINTR) {
                return Ok(delivered);
            }
            return Err(error.into());
        }
        let recv_ts_ns = self.clock.now_ns();
        for index in 0..ready as usize {
            let event = self.events[index];
            let generation = (event.u64 >> 32) as u32;
            if event.u64 & DATAGRAM_TOKEN != 0 {
                let conn = (event.u64 & 0x00ff_ffff) as ConnId;
                let line = DatagramLine::from_index(((event.u64 >> 24) & 0x7f) as usize);
                let current = self
                    .datagrams
                    .get(conn as usize)
                    .and_then(Option::as_ref)
                    .map(|(_, generation)| *generation);
                if let (Some(line), Some(current)) = (line, current) {
                    if current == generation {
                        delivered += self.read_datagrams(conn, line, recv_ts_ns, on_event);
                    }
                }
                continue;
            }
            let conn = (event.u64 & 0xffff_ffff) as ConnId;
            let Some(slot) = self.slots.get(conn as usize) else {
                continue;
            };
            if slot.generation != generation || slot.state == State::Free {
                continue;
            }
            let flags = event.events as i32;
            if let State::Connecting { .. } = slot.state {
                if flags & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) == 0 {
                    continue;
                }
                let fd = slot.fd.as_ref().map_or(-1, AsRawFd::as_raw_fd);
                self.connecting -= 1;
                match socket::take_socket_error(fd) {
                    Ok(None) => {
                        self.slots[conn as usize].state = State::Open;
                        on_event(conn, IoEvent::Connected);
                        delivered += 1;
                        self.flush(conn);
                    }
                    Ok(Some(error)) | Err(error) => {
                        // `close` must not count this slot as connecting again.
                        self.slots[conn as usize].state = State::Free;
                        self.close(conn);
                        on_event(conn, IoEvent::ConnectFailed(error));
                        delivered += 1;
                    }
                }
                continue;
            }
            if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) != 0 {
                let (count, more) = self.read_once(conn, recv_ts_ns, on_event);
                delivered += count;
                if more {
                    self.again.push(conn);
                }
            }
            if flags & libc::EPOLLOUT != 0 && self.slots[conn as usize].state == State::Open {
                self.flush(conn);
            }
        }
        // Further passes, one read per socket that filled the buffer, in the same order.
        for _ in 1..READS_PER_WAKE {
            if self.again.is_empty() {
                break;
            }
            std::mem::swap(&mut self.again, &mut self.pass);
            for index in 0..self.pass.len() {
                let conn = self.pass[index];
                let (count, more) = self.read_once(conn, recv_ts_ns, on_event);
                delivered += count;
                if more {
                    self.again.push(conn);
                }
            }
            self.pass.clear();
        }
        self.again.clear();
        if self.connecting > 0 {
            delivered += self.expire_connects(on_event);
        }
        Ok(delivered)
    }

    /// One read of stream slot `conn`: the events it delivered, and whether it filled the
    /// buffer (so more may be waiting: the caller reads it again in its next pass).
    fn read_once(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> (usize, bool) {
        loop {
            let Some(slot) = self.slots.get(conn as usize) else {
                return (0, false);
            };
            if slot.state != State::Open {
                return (0, false);
            }
            let Some(fd) = slot.fd.as_ref().map(AsRawFd::as_raw_fd) else {
                return (0, false);
            };
            // SAFETY: the buffer is valid for writing its whole length.
            let received = unsafe {
                libc::recv(
                    fd,
                    self.recv_buffer.as_mut_ptr().cast(),
                    self.recv_buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if received > 0 {
                on_event(
                    conn,
                    IoEvent::Data {
                        bytes: &self.recv_buffer[..received as usize],
                        recv_ts_ns,
                    },
                );
                // The handler may have closed the connection.
                let open = self.slots[conn as usize].state == State::Open;
                return (1, open && received as usize == self.recv_buffer.len());
            }
            if received == 0 {
                self.close(conn);
                on_event(conn, IoEvent::Closed(None));
                return (1, false);
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EAGAIN) => return (0, false),
                Some(libc::EINTR) => continue,
                _ => {
                    self.close(conn);
                    on_event(conn, IoEvent::Closed(Some(error)));
                    return (1, false);
                }
            }
        }
    }

    fn expire_connects(&mut self, on_event: &mut impl FnMut(ConnId, IoEvent<'_>)) -> usize {
        let now = Instant::now();
        let mut delivered = 0;
        for conn in 0..self.slots.len() as ConnId {
            if let State::Connecting { deadline } = self.slots[conn as usize].state {
                if now >= deadline {
                    self.close(conn);
                    on_event(
                        conn,
                        IoEvent::ConnectFailed(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "connect timed out after {} ms",
                                self.config.connect_timeout.as_millis()
                            ),
                        )),
                    );
                    delivered += 1;
                }
            }
        }
        delivered
    }
}
