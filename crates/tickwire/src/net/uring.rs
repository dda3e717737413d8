//! The io_uring backend.
//!
//! - Set-up: SINGLE_ISSUER (only the network thread touches the ring) and DEFER_TASKRUN (the
//!   kernel runs completion work only when this thread enters with GETEVENTS, so it never
//!   interrupts the loop), with TASKRUN_FLAG so the kernel raises `IORING_SQ_TASKRUN` in shared
//!   memory when such work is pending. Older kernels get COOP_TASKRUN, then plain.
//! - Sockets are registered files (a fixed slot per connection: no fd table lookup per op).
//! - Receives are multishot into one provided-buffer ring shared by every connection: one
//!   submission per connection for its whole life, and the kernel picks a buffer per completion.
//!   A buffer goes back into the ring right after its bytes were handed to the caller; the ring's
//!   tail is published once per poll.
//! - A connect is linked to a LINK_TIMEOUT, so the kernel cancels it when the timeout passes.
//!
//! In busy-poll mode `poll` enters the kernel only when there are submissions or the kernel
//! raised the task-run flag: an idle loop spins on shared memory without a syscall. Without
//! TASKRUN_FLAG support it must enter (with GETEVENTS) on every poll, since deferred completions
//! are only posted on such an enter.

use super::socket::{self, RawAddr};
use super::udp::{self, DatagramLine, DatagramSockets};
use super::{ConnId, IoEvent, NetError, TransportConfig, WaitMode};
use crate::clock::Clock;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};

const OP_CONNECT: u64 = 1;
const OP_CONNECT_TIMEOUT: u64 = 2;
const OP_RECV: u64 = 3;
const OP_SEND: u64 = 4;
/// A datagram socket's multishot `recvmsg`: `OP_DATAGRAM + line` (`udp::DatagramLine`).
const OP_DATAGRAM: u64 = 8;
const OP_CANCEL: u64 = 16;
/// Bytes of control messages a datagram's `recvmsg` keeps: a timespec and a u32, with their
/// headers (56), rounded up.
const DATAGRAM_CONTROL_BYTES: u32 = 64;
/// The provided-buffer group all receives draw from.
const BUFFER_GROUP: u16 = 0;
/// `IORING_ENTER_GETEVENTS` from `linux/io_uring.h` (the crate keeps its sys module private).
const IORING_ENTER_GETEVENTS: u32 = 1 << 0;
/// Completions copied out of the queue per pass.
const CQE_BATCH: usize = 64;

fn user_data(op: u64, conn: ConnId, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(conn) << 8) | op
}

fn decode(user_data: u64) -> (u64, ConnId, u32) {
    (
        user_data & 0xff,
        ((user_data >> 8) & 0xff_ffff) as ConnId,
        (user_data >> 32) as u32,
    )
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Free,
    Connecting,
    Open,
}

struct Slot {
    fd: Option<OwnedFd>,
    generation: u32,
    state: State,
    /// Kept at a stable address while the kernel reads them (connect and its timeout).
    addr: Box<RawAddr>,
    timeout: Box<types::Timespec>,
    /// The bytes of the send in flight (stable until its completion) and how many are sent.
    inflight: Vec<u8>,
    inflight_pos: usize,
    sending: bool,
    /// Bytes queued behind the send in flight.
    queued: Vec<u8>,
}

/// The `msghdr` every datagram socket's multishot `recvmsg` is armed with: no name, no iovec
/// (the provided buffer takes its place), room for [`DATAGRAM_CONTROL_BYTES`] of control
/// messages. The kernel reads it when the submission is taken, and the layout of each provided
/// buffer it fills follows from it (`types::RecvMsgOut::parse`).
struct DatagramHeader(Box<libc::msghdr>);

// SAFETY: the header holds only null pointers and lengths; nothing aliases it.
unsafe impl Send for DatagramHeader {}

/// A datagram slot: its sockets (by line) and which of them have a receive armed.
struct DatagramSlot {
    sockets: DatagramSockets,
}

/// Page-aligned anonymous memory, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a `Mapping` owns its pages exclusively (nothing else holds the pointer but the
// kernel, through the ring owned alongside it); moving the owner to another thread moves that
// ownership, as with a `Box`.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping made in `new` and not unmapped elsewhere.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The provided-buffer ring: `entries` descriptors and `entries` buffers of `buffer_bytes`.
struct BufferRing {
    descriptors: Mapping,
    buffers: Mapping,
    buffer_bytes: usize,
    mask: u16,
    /// Our copy of the tail; published to the kernel by `publish`.
    tail: u16,
    published: u16,
}

impl BufferRing {
    fn new(entries: u16, buffer_bytes: usize) -> io::Result<BufferRing> {
        let descriptors =
            Mapping::new(entries as usize * std::mem::size_of::<types::BufRingEntry>())?;
        let buffers = Mapping::new(entries as usize * buffer_bytes)?;
        let mut ring = BufferRing {
            descriptors,
            buffers,
            buffer_bytes,
            mask: entries - 1,
            tail: 0,
            published: 0,
        };
        for bid in 0..entries {
            ring.recycle(bid);
        }
        ring.publish();
        Ok(ring)
    }

    fn base(&self) -> *mut types::BufRingEntry {
        self.descriptors.ptr.cast()
    }

    /// Puts buffer `bid` back at the tail (not yet visible to the kernel).
    fn recycle(&mut self, bid: u16) {
        let index = (self.tail & self.mask) as usize;
        // SAFETY: `index <= mask < entries`, inside the descriptor mapping; the kernel only reads
        // descriptors between its head and the published tail, and this one is past the tail.
        let entry = unsafe { &mut *self.base().add(index) };
        // SAFETY: `bid < entries`, so the buffer lies inside the buffer mapping.
        let addr = unsafe { self.buffers.ptr.add(bid as usize * self.buffer_bytes) };
        entry.set_addr(addr as u64);
        entry.set_len(self.buffer_bytes as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes recycled buffers visible to the kernel with one release store.
    fn publish(&mut self) {
        if self.tail == self.published {
            return;
        }
        // SAFETY: the tail field overlays the first descriptor's `resv`, inside the mapping,
        // 2-byte aligned; the kernel reads it with acquire semantics, so it is accessed
        // atomically here.
        unsafe {
            let tail = types::BufRingEntry::tail(self.base()) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
        self.published = self.tail;
    }

    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let len = len.min(self.buffer_bytes);
        // SAFETY: the kernel finished writing `len` bytes into buffer `bid` (its completion was
        // reaped) and will not touch it again until it is recycled, after this borrow ends.
        unsafe {
            std::slice::from_raw_parts(self.buffers.ptr.add(bid as usize * self.buffer_bytes), len)
        }
    }
}

pub struct UringTransport {
    // Field order matters: the ring (and with it the kernel's use of the buffers) goes first.
    ring: IoUring,
    buffers: BufferRing,
    clock: Clock,
    config: TransportConfig,
    slots: Vec<Slot>,
    /// Whether the kernel raises IORING_SQ_TASKRUN for pending deferred work.
    taskrun_flag: bool,
    setup: &'static str,
    cqes: Vec<cqueue::Entry>,
    pub(super) warnings: Vec<String>,
    /// Times the kernel had no free receive buffer (the receive is re-armed).
    pub buffer_exhaustions: u64,
    /// Send buffers of closed connections whose send was still in flight, kept alive (the
    /// kernel may still read them) until that send's completion arrives: (slot, generation of
    /// the send, buffer). Only closes with a send in flight put anything here.
    retired: Vec<(ConnId, u32, Vec<u8>)>,
    /// By slot: its datagram sockets, when it is a datagram slot (`open_datagrams`).
    datagrams: Vec<Option<DatagramSlot>>,
    datagram_header: DatagramHeader,
}

fn build_ring(entries: u32) -> Result<(IoUring, bool, &'static str), io::Error> {
    let mut builder = IoUring::builder();
    builder
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .setup_cqsize(entries * 4);
    if let Ok(ring) = builder.build(entries) {
        return Ok((ring, true, "SINGLE_ISSUER|DEFER_TASKRUN|TASKRUN_FLAG"));
    }
    let mut builder = IoUring::builder();
    builder
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(entries * 4);
    if let Ok(ring) = builder.build(entries) {
        return Ok((ring, false, "SINGLE_ISSUER|DEFER_TASKRUN"));
    }
    let mut builder = IoUring::builder();
    builder
        .setup_coop_taskrun()
        .setup_taskrun_flag()
        .setup_cqsize(entries * 4);
    if let Ok(ring) = builder.build(entries) {
        return Ok((ring, true, "COOP_TASKRUN|TASKRUN_FLAG"));
    }
    let ring = IoUring::builder()
        .setup_cqsize(entries * 4)
        .build(entries)?;
    Ok((ring, false, "no task-run flags"))
}

impl UringTransport {
    pub fn new(config: TransportConfig, clock: Clock) -> Result<UringTransport, NetError> {
        let entries = (config.max_connections * 4)
            .next_power_of_two()
            .clamp(64, 4096);
        let (ring, taskrun_flag, setup) = build_ring(entries).map_err(NetError::UringSetup)?;
        let recv_buffers = config.recv_buffers.clamp(2, 32768).next_power_of_two();
        let buffers = BufferRing::new(recv_buffers, config.recv_buffer_bytes as usize)
            .map_err(NetError::UringSetup)?;
        // SAFETY: the descriptor mapping holds `recv_buffers` entries, is page-aligned and lives
        // as long as the ring (the ring field is dropped first).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buffers.base() as u64,
                recv_buffers,
                BUFFER_GROUP,
                0,
            )
        }
        .map_err(NetError::UringSetup)?;
        ring.submitter()
            .register_files_sparse(config.max_connections)
            .map_err(NetError::UringSetup)?;
        let slots = (0..config.max_connections)
            .map(|_| Slot {
                fd: None,
                generation: 0,
                state: State::Free,
                addr: Box::new(RawAddr::new(SocketAddr::from(([0, 0, 0, 0], 0)))),
                timeout: Box::new(types::Timespec::new()),
                inflight: Vec::new(),
                inflight_pos: 0,
                sending: false,
                queued: Vec::new(),
            })
            .collect();
        Ok(UringTransport {
            ring,
            buffers,
            clock,
            config,
            slots,
            taskrun_flag,
            setup,
            cqes: Vec::with_capacity(CQE_BATCH),
            warnings: Vec::new(),
            buffer_exhaustions: 0,
            retired: Vec::new(),
            datagrams: (0..config.max_connections).map(|_| None).collect(),
            datagram_header: DatagramHeader(Box::new({
                // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
                let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
                header.msg_controllen = DATAGRAM_CONTROL_BYTES as _;
                header
            })),
        })
    }

    /// Makes `conn` a datagram slot: a multishot `recvmsg` per socket into the provided
    /// buffers.
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
        self.datagrams[conn as usize] = Some(DatagramSlot { sockets });
        for line in DatagramLine::ALL {
            if let Err(error) = self.arm_datagram(conn, line) {
                self.close(conn);
                return Err(error.into());
            }
        }
        Ok(())
    }

    fn arm_datagram(&mut self, conn: ConnId, line: DatagramLine) -> io::Result<()> {
        let Some(Some(slot)) = self.datagrams.get(conn as usize) else {
            return Ok(());
        };
        let Some(fd) = slot.sockets[line as usize].as_ref() else {
            return Ok(());
        };
        let generation = self.slots[conn as usize].generation;
        let entry = opcode::RecvMsgMulti::new(
            types::Fd(fd.as_raw_fd()),
            &*self.datagram_header.0,
            BUFFER_GROUP,
        )
        .build()
        .user_data(user_data(OP_DATAGRAM + line as u64, conn, generation));
        self.push(&entry)
    }

    /// Sends one datagram on socket `line` of datagram slot `conn` (a plain non-blocking
    /// `send`: requests are rare, and a datagram needs no buffer kept alive for the kernel).
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
            .and_then(|slot| slot.sockets[line as usize].as_ref())
            .ok_or(NetError::NotOpen(conn))?;
        udp::send_on(fd.as_raw_fd(), bytes)?;
        Ok(())
    }

    /// Closes a datagram slot: its receives are cancelled (their late completions are stale
    /// by the new generation), its sockets closed.
    fn close_datagrams(&mut self, conn: ConnId) -> bool {
        let Some(slot) = self.datagrams.get_mut(conn as usize).and_then(Option::take) else {
            return false;
        };
        let generation = self.slots[conn as usize].generation;
        for line in DatagramLine::ALL {
            if slot.sockets[line as usize].is_some() {
                let cancel = opcode::AsyncCancel::new(user_data(
                    OP_DATAGRAM + line as u64,
                    conn,
                    generation,
                ))
                .build()
                .user_data(user_data(OP_CANCEL, conn, generation));
                let _ = self.push(&cancel);
            }
        }
        let _ = self.ring.submit();
        let slot_state = &mut self.slots[conn as usize];
        slot_state.generation = slot_state.generation.wrapping_add(1);
        drop(slot);
        true
    }

    /// One completion of a datagram socket's receive.
    fn complete_datagram(
        &mut self,
        conn: ConnId,
        line: DatagramLine,
        cqe: &cqueue::Entry,
        recv_ts_ns: u64,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> usize {
        let result = cqe.result();
        let more = cqueue::more(cqe.flags());
        let buffer = cqueue::buffer_select(cqe.flags());
        let mut delivered = 0;
        if result >= 0 {
            if let Some(bid) = buffer {
                let bytes = self.buffers.bytes(bid, result as usize);
                match types::RecvMsgOut::parse(bytes, &self.datagram_header.0) {
                    Ok(out) => {
                        let (kernel_ts, dropped) = udp::parse_control(out.control_data());
                        on_event(
                            conn,
                            IoEvent::Datagram {
                                line,
                                bytes: out.payload_data(),
                                recv_ts_ns: kernel_ts.unwrap_or(recv_ts_ns),
                                kernel_ts: kernel_ts.is_some(),
                                dropped,
                                truncated: out.is_payload_truncated(),
                            },
                        );
                    }
                    Err(()) => on_event(
                        conn,
                        IoEvent::DatagramError {
                            line,
                            error: io::Error::other(
                                "a received datagram's buffer is too short for its header",
                            ),
                        },
                    ),
                }
                self.buffers.recycle(bid);
                delivered = 1;
            }
        } else if result == -libc::ENOBUFS {
            self.buffer_exhaustions += 1;
        } else if result != -libc::ECANCELED {
            on_event(
                conn,
                IoEvent::DatagramError {
                    line,
                    error: io::Error::from_raw_os_error(-result),
                },
            );
            delivered = 1;
        }
        if !more && result != -libc::ECANCELED && result != -libc::EBADF {
            if let Err(error) = self.arm_datagram(conn, line) {
                on_event(conn, IoEvent::DatagramError { line, error });
                delivered += 1;
            }
        }
        delivered
    }

    /// The set-up flags the kernel accepted, for the start-up log line.
    pub fn setup_flags(&self) -> &'static str {
        self.setup
    }

    /// Now, on the clock that stamps received bytes (ns since the epoch).
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Queues a submission, flushing the queue to the kernel first if it is full.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry pushed here points only at memory that stays valid until its
        // completion: slot boxes (address, timeout), slot send buffers (not touched while
        // `sending`), and registered files.
        if unsafe { self.ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        self.ring.submit()?;
        // SAFETY: as above.
        unsafe { self.ring.submission().push(entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))
    }

    pub fn connect(&mut self, conn: ConnId, addr: SocketAddr) -> Result<(), NetError> {
        if self
            .slots
            .get(conn as usize)
            .is_none_or(|slot| slot.state != State::Free)
        {
            return Err(NetError::BadSlot(conn));
        }
        let fd = socket::tcp_socket(addr, false)?;
        self.warnings
            .extend(socket::apply_options(&fd, &self.config.socket)?);
        self.ring
            .submitter()
            .register_files_update(conn, &[fd.as_raw_fd()])?;
        let timeout = self.config.connect_timeout;
        let slot = &mut self.slots[conn as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.fd = Some(fd);
        slot.state = State::Connecting;
        *slot.addr = RawAddr::new(addr);
        *slot.timeout = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        slot.inflight.clear();
        slot.inflight_pos = 0;
        slot.sending = false;
        slot.queued.clear();
        let generation = slot.generation;
        let connect = opcode::Connect::new(types::Fixed(conn), slot.addr.as_ptr(), slot.addr.len)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(user_data(OP_CONNECT, conn, generation));
        let link_timeout = opcode::LinkTimeout::new(&*slot.timeout)
            .build()
            .user_data(user_data(OP_CONNECT_TIMEOUT, conn, generation));
        self.push(&connect)?;
        self.push(&link_timeout)?;
        Ok(())
    }

    pub fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), NetError> {
        let slot = self
            .slots
            .get_mut(conn as usize)
            .ok_or(NetError::BadSlot(conn))?;
        if slot.state == State::Free {
            return Err(NetError::NotOpen(conn));
        }
        slot.queued.extend_from_slice(bytes);
        if slot.state == State::Open && !slot.sending {
            self.start_send(conn)?;
        }
        Ok(())
    }

    pub fn unsent(&self, conn: ConnId) -> usize {
        self.slots.get(conn as usize).map_or(0, |slot| {
            slot.queued.len() + slot.inflight.len() - slot.inflight_pos
        })
    }

    /// Moves the queued bytes in flight and submits them.
    fn start_send(&mut self, conn: ConnId) -> io::Result<()> {
        let slot = &mut self.slots[conn as usize];
        if slot.queued.is_empty() {
            return Ok(());
        }
        // Swap buffers: both keep their capacity, so steady state allocates nothing.
        std::mem::swap(&mut slot.inflight, &mut slot.queued);
        slot.queued.clear();
        slot.inflight_pos = 0;
        slot.sending = true;
        self.submit_inflight(conn)
    }

    fn submit_inflight(&mut self, conn: ConnId) -> io::Result<()> {
        let slot = &self.slots[conn as usize];
        let rest = &slot.inflight[slot.inflight_pos..];
        let entry = opcode::Send::new(types::Fixed(conn), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(user_data(OP_SEND, conn, slot.generation));
        self.push(&entry)
    }

    fn arm_recv(&mut self, conn: ConnId) -> io::Result<()> {
        let generation = self.slots[conn as usize].generation;
        let entry = opcode::RecvMulti::new(types::Fixed(conn), BUFFER_GROUP)
            .build()
            .user_data(user_data(OP_RECV, conn, generation));
        self.push(&entry)
    }

    pub fn close(&mut self, conn: ConnId) {
        if self.close_datagrams(conn) {
            return;
        }
        let Some(slot) = self.slots.get_mut(conn as usize) else {
            return;
        };
        if slot.state == State::Free {
            return;
        }
        slot.state = State::Free;
        if slot.sending {
            // The kernel may still read the send buffer: keep it alive until the (now stale)
            // completion of that send arrives, and give the slot a fresh one.
            let buffer = std::mem::take(&mut slot.inflight);
            self.retired.push((conn, slot.generation, buffer));
            slot.sending = false;
            slot.inflight_pos = 0;
        }
        // A new generation makes every completion still in flight for this slot stale.
        slot.generation = slot.generation.wrapping_add(1);
        if let Some(fd) = slot.fd.take() {
            // Shutting down ends the multishot receive and any send in flight; dropping our
            // descriptor and the registered one closes the socket once the kernel is done.
            // SAFETY: `fd` is an open socket we own.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
            drop(fd);
        }
        let _ = self.ring.submitter().register_files_update(conn, &[-1]);
        self.slots[conn as usize].queued.clear();
    }

    pub fn poll(
        &mut self,
        wait: WaitMode,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> Result<usize, NetError> {
        self.enter(wait)?;
        let recv_ts_ns = self.clock.now_ns();
        let mut delivered = 0;
        loop {
            self.cqes.clear();
            {
                let mut completion = self.ring.completion();
                completion.sync();
                self.cqes.extend(completion.by_ref().take(CQE_BATCH));
            }
            if self.cqes.is_empty() {
                break;
            }
            for index in 0..self.cqes.len() {
                let cqe = self.cqes[index].clone();
                delivered += self.complete(&cqe, recv_ts_ns, on_event);
            }
            self.buffers.publish();
            if self.cqes.len() < CQE_BATCH {
                break;
            }
        }
        // Re-armed receives and continued sends go out with the next enter; in busy-poll mode
        // submit them now so they do not wait for the next poll.
        if wait == WaitMode::BusyPoll && !self.ring.submission().is_empty() {
            self.ring.submit()?;
        }
        Ok(delivered)
    }

    fn enter(&mut self, wait: WaitMode) -> io::Result<()> {
        let result = match wait {
            WaitMode::BusyPoll => {
                let pending = !self.ring.submission().is_empty();
                if self.taskrun_flag {
                    if pending || self.ring.submission().taskrun() {
                        self.ring.submit().map(drop)
                    } else {
                        Ok(())
                    }
                } else {
                    let to_submit = self.ring.submission().len() as u32;
                    // SAFETY: a plain io_uring_enter with GETEVENTS and no argument.
                    unsafe {
                        self.ring.submitter().enter::<libc::sigset_t>(
                            to_submit,
                            0,
                            IORING_ENTER_GETEVENTS,
                            None,
                        )
                    }
                    .map(drop)
                }
            }
            WaitMode::Block { timeout } => {
                if self.ring.completion().is_empty() {
                    let timespec = types::Timespec::new()
                        .sec(timeout.as_secs())
                        .nsec(timeout.subsec_nanos());
                    let args = types::SubmitArgs::new().timespec(&timespec);
                    self.ring.submitter().submit_with_args(1, &args).map(drop)
                } else {
                    self.ring.submit().map(drop)
                }
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Handles one completion; returns the number of events delivered.
    fn complete(
        &mut self,
        cqe: &cqueue::Entry,
        recv_ts_ns: u64,
        on_event: &mut impl FnMut(ConnId, IoEvent<'_>),
    ) -> usize {
        let (op, conn, generation) = decode(cqe.user_data());
        let result = cqe.result();
        let buffer = cqueue::buffer_select(cqe.flags());
        if (OP_DATAGRAM..OP_CANCEL).contains(&op) {
            let current = self.slots.get(conn as usize).map(|slot| slot.generation);
            let open = self
                .datagrams
                .get(conn as usize)
                .is_some_and(Option::is_some);
            match DatagramLine::from_index((op - OP_DATAGRAM) as usize) {
                Some(line) if open && current == Some(generation) => {
                    return self.complete_datagram(conn, line, cqe, recv_ts_ns, on_event);
                }
                _ => {
                    if let Some(bid) = buffer {
                        self.buffers.recycle(bid);
                    }
                    return 0;
                }
            }
        }
        if op == OP_CANCEL {
            return 0;
        }
        let Some(slot) = self.slots.get_mut(conn as usize) else {
            if let Some(bid) = buffer {
                self.buffers.recycle(bid);
            }
            return 0;
        };
        if slot.generation != generation || slot.state == State::Free {
            // A completion for a closed connection: return its buffer, finish its send.
            if let Some(bid) = buffer {
                self.buffers.recycle(bid);
            }
            if op == OP_SEND {
                if let Some(index) = self.retired.iter().position(|(slot, send_generation, _)| {
                    *slot == conn && *send_generation == generation
                }) {
                    // That send is over: its buffer can go.
                    self.retired.swap_remove(index);
                }
            }
            return 0;
        }
        match op {
            OP_CONNECT => {
                if result == 0 {
                    slot.state = State::Open;
                    on_event(conn, IoEvent::Connected);
                    let armed = self.arm_recv(conn).and_then(|()| {
                        if !self.slots[conn as usize].sending {
                            self.start_send(conn)
                        } else {
                            Ok(())
                        }
                    });
                    if let Err(error) = armed {
                        self.close(conn);
                        on_event(conn, IoEvent::Closed(Some(error)));
                        return 2;
                    }
                    1
                } else {
                    let error = if result == -libc::ECANCELED {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "connect timed out after {} ms",
                                self.config.connect_timeout.as_millis()
                            ),
                        )
                    } else {
                        io::Error::from_raw_os_error(-result)
                    };
                    self.close(conn);
                    on_event(conn, IoEvent::ConnectFailed(error));
                    1
                }
            }
            OP_CONNECT_TIMEOUT => 0,
            OP_RECV => {
                let more = cqueue::more(cqe.flags());
                if result > 0 {
                    let delivered = match buffer {
                        Some(bid) => {
                            on_event(
                                conn,
                                IoEvent::Data {
                                    bytes: self.buffers.bytes(bid, result as usize),
                                    recv_ts_ns,
                                },
                            );
                            self.buffers.recycle(bid);
                            1
                        }
                        None => 0,
                    };
                    if !more && self.slots[conn as usize].state == State::Open {
                        if let Err(error) = self.arm_recv(conn) {
                            self.close(conn);
                            on_event(conn, IoEvent::Closed(Some(error)));
                            return delivered + 1;
                        }
                    }
                    delivered
                } else if result == 0 {
                    if let Some(bid) = buffer {
                        self.buffers.recycle(bid);
                    }
                    self.close(conn);
                    on_event(conn, IoEvent::Closed(None));
                    1
                } else if result == -libc::ENOBUFS {
                    // Every buffer was in use: the receive ended; buffers come back as the
                    // completions before this one are handled, so re-arm.
                    self.buffer_exhaustions += 1;
                    if !more {
                        if let Err(error) = self.arm_recv(conn) {
                            self.close(conn);
                            on_event(conn, IoEvent::Closed(Some(error)));
                            return 1;
                        }
                    }
                    0
                } else {
                    self.close(conn);
                    on_event(
                        conn,
                        IoEvent::Closed(Some(io::Error::from_raw_os_error(-result))),
                    );
                    1
                }
            }
            OP_SEND => {
                if result < 0 {
                    slot.sending = false;
                    self.close(conn);
                    on_event(
                        conn,
                        IoEvent::Closed(Some(io::Error::from_raw_os_error(-result))),
                    );
                    return 1;
                }
                slot.inflight_pos += result as usize;
                let outcome = if slot.inflight_pos < slot.inflight.len() {
                    self.submit_inflight(conn)
                } else {
                    slot.sending = false;
                    slot.inflight.clear();
                    slot.inflight_pos = 0;
                    self.start_send(conn)
                };
                if let Err(error) = outcome {
                    self.close(conn);
                    on_event(conn, IoEvent::Closed(Some(error)));
                    return 1;
                }
                0
            }
            _ => 0,
        }
    }
}
