//! Receive backends for a multicast feed on the same wire (issue 38): AF_XDP (`net::xdp`, the
//! program attached to the receiver's end of a veth pair) against kernel UDP sockets read with
//! the appliance's io_uring transport (`net::uring`: multishot `recvmsg` into provided buffers,
//! as a datagram slot reads a line) and with epoll, in one run, over the same veth between two
//! network namespaces this bench creates (`tests/support/netns.rs`). Root and iproute2; without
//! them it says so and exits.
//!
//! `cargo bench --bench xdp` (under a minute). Per backend and rate (`--rates`, default 100k
//! and 1M datagrams/s, each for `--seconds`, default 2):
//! - one-way latency from the sender's clock read just before `sendmmsg` to the receiver's read
//!   when it holds the datagram (both `CLOCK_MONOTONIC`, one host), p50 / p99 / p99.9;
//! - the rate the sender achieved (`sent/s`: on a loaded 2-vCPU VM it falls short of the rate
//!   asked, and the datagrams then queue before any receiver sees them);
//! - datagrams sent, received and lost (by sequence number);
//! - the receiver's CPU time per datagram in the rounds that received something (the loop
//!   busy-polls, so its idle rounds are not counted).
//!
//! Then each backend's highest lossless rate: doubling from twice the highest lossless rate of
//! the table, in 1 s runs, until a loss, the sender falling short of the rate asked (below
//! 90 %: the sender's limit, not the receiver's), or 8 M/s (`--no-search` skips it).
//!
//! Two busy threads, pinned: the sender on core 0 and the receiver on core 1. On veth, XDP runs
//! in the sender's softirq (the veth transmit), in copy mode: the frame is copied into the UMEM
//! there, so the kernel's share of the AF_XDP path is charged to the sender's core, not the
//! receiver's. Every received datagram is checked (length, sequence in range) before it is timed.

#[path = "../tests/support/netns.rs"]
mod netns;

use hdrhistogram::Histogram;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::udp::{MulticastConfig, MulticastSocket};
use tickwire::net::xdp::socket::UmemConfig;
use tickwire::net::xdp::{XdpConfig, XdpReceiver};
use tickwire::net::{BackendChoice, IoEvent, Transport, TransportConfig, WaitMode};

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 38, 9, 1);
const PORT: u16 = 26400;
const PAYLOAD: usize = 64;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    AfXdp,
    IoUring,
    Epoll,
}

impl Backend {
    const ALL: [Backend; 3] = [Backend::AfXdp, Backend::IoUring, Backend::Epoll];

    fn name(self) -> &'static str {
        match self {
            Backend::AfXdp => "af-xdp",
            Backend::IoUring => "io_uring",
            Backend::Epoll => "epoll",
        }
    }
}

struct Outcome {
    sent: u64,
    received: u64,
    histogram: Histogram<u64>,
    busy_cpu_ns: u64,
    /// How long the sender took to send them all.
    sender_ns: u64,
    note: String,
}

/// What the receiver does with one datagram: check it, time it.
struct Tally {
    histogram: Histogram<u64>,
    received: u64,
    seen: Vec<bool>,
    bad: u64,
}

impl Tally {
    fn take(&mut self, payload: &[u8], now: u64) {
        if payload.len() != PAYLOAD {
            self.bad += 1;
            return;
        }
        let seq = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
        let sent = u64::from_le_bytes(payload[8..16].try_into().expect("8 bytes"));
        match self.seen.get_mut(seq as usize) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                self.bad += 1;
                return;
            }
        }
        self.received += 1;
        let _ = self.histogram.record(now.saturating_sub(sent).max(1));
    }
}

fn run(pair: &netns::Pair, backend: Backend, rate: u64, seconds: f64) -> Result<Outcome, String> {
    let total = (rate as f64 * seconds) as u64;
    let done = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let interface = pair.receiver_veth.clone();
    let receiver_address = pair.receiver_address;
    let receiver = {
        let done = done.clone();
        let ready = ready.clone();
        netns::in_namespace(
            &pair.receiver,
            move || -> Result<(Tally, u64, String), String> {
                netns::pin(1);
                let mut tally = Tally {
                    histogram: Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram"),
                    received: 0,
                    seen: vec![false; total as usize],
                    bad: 0,
                };
                let mut busy_cpu = 0u64;
                match backend {
                    Backend::AfXdp => {
                        let mut receiver = XdpReceiver::open(&XdpConfig {
                            interface,
                            feeds: vec![SocketAddrV4::new(GROUP, PORT)],
                            queues: None,
                            // 32 MiB of frames: about what the kernel socket's 8 MiB receive
                            // buffer holds of 64-byte datagrams (16k), for equal slack.
                            umem: UmemConfig {
                                frames: 16384,
                                ..UmemConfig::default()
                            },
                            force_generic: false,
                            verify_udp_checksum: false,
                        })
                        .map_err(|error| error.to_string())?;
                        let note = receiver.describe();
                        ready.store(true, Ordering::Release);
                        while !done.load(Ordering::Acquire) {
                            let cpu = thread_cpu_ns();
                            let got = receiver.poll(64, |datagram| {
                                tally.take(datagram.payload, monotonic_ns());
                            });
                            if got > 0 {
                                busy_cpu += thread_cpu_ns() - cpu;
                            }
                        }
                        let kernel = receiver.kernel_counters();
                        let note = format!(
                            "{note}; kernel: rx_ring_full {}, fill_ring_empty {}, rx_dropped {}",
                            kernel.rx_ring_full, kernel.rx_fill_ring_empty, kernel.rx_dropped
                        );
                        Ok((tally, busy_cpu, note))
                    }
                    Backend::IoUring => {
                        // The appliance's own transport, as a datagram slot reads a line: the
                        // line's socket (`net::udp`, 8 MiB buffer) read by multishot recvmsg.
                        let socket = MulticastSocket::open(&MulticastConfig {
                            group: SocketAddrV4::new(GROUP, PORT),
                            interface: receiver_address,
                            source: None,
                            rcvbuf: 8 << 20,
                        })
                        .map_err(|e| e.to_string())?;
                        let (mut transport, why) = Transport::open(
                            BackendChoice::IoUring,
                            TransportConfig {
                                max_connections: 4,
                                recv_buffer_bytes: 2048,
                                recv_buffers: 4096,
                                ..TransportConfig::default()
                            },
                            Clock::monotonic(),
                        )
                        .map_err(|e| e.to_string())?;
                        transport
                            .open_datagrams(0, [Some(socket.into_fd()), None, None])
                            .map_err(|e| e.to_string())?;
                        ready.store(true, Ordering::Release);
                        let mut errors = 0u64;
                        while !done.load(Ordering::Acquire) {
                            let cpu = thread_cpu_ns();
                            let got = transport
                                .poll(WaitMode::BusyPoll, &mut |_, event| match event {
                                    IoEvent::Datagram { bytes, .. } => {
                                        tally.take(bytes, monotonic_ns())
                                    }
                                    IoEvent::DatagramError { .. } => errors += 1,
                                    _ => {}
                                })
                                .map_err(|e| e.to_string())?;
                            if got > 0 {
                                busy_cpu += thread_cpu_ns() - cpu;
                            }
                        }
                        let exhaustions = match &transport {
                            Transport::Uring(uring) => uring.buffer_exhaustions,
                            Transport::Epoll(_) => 0,
                        };
                        Ok((
                            tally,
                            busy_cpu,
                            format!(
                                "{why}; multishot recvmsg, busy-polled; {errors} socket errors; \
                                 {exhaustions} times out of provided buffers (receive re-armed)"
                            ),
                        ))
                    }
                    Backend::Epoll => {
                        // The same socket as io_uring's (`net::udp`: SO_REUSEADDR, bound to the
                        // group, 8 MiB buffer): the socket of the io_uring run before it may
                        // outlive its ring for a moment (io_uring tears down asynchronously).
                        let socket = MulticastSocket::open(&MulticastConfig {
                            group: SocketAddrV4::new(GROUP, PORT),
                            interface: receiver_address,
                            source: None,
                            rcvbuf: 8 << 20,
                        })
                        .map_err(|e| e.to_string())?
                        .into_fd();
                        let raw_socket = socket.as_raw_fd();
                        // SAFETY: a new epoll instance, closed below.
                        let epoll = unsafe { libc::epoll_create1(0) };
                        let mut event = libc::epoll_event {
                            events: libc::EPOLLIN as u32,
                            u64: 0,
                        };
                        // SAFETY: valid descriptors and event.
                        unsafe {
                            libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, raw_socket, &mut event)
                        };
                        ready.store(true, Ordering::Release);
                        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
                        let mut buf = [0u8; 2048];
                        while !done.load(Ordering::Acquire) {
                            // SAFETY: a valid epoll descriptor and event array; no wait (busy poll).
                            let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), 4, 0) };
                            if n <= 0 {
                                continue;
                            }
                            let cpu = thread_cpu_ns();
                            while let Ok(Some(got)) =
                                tickwire::net::udp::recv_on(raw_socket, &mut buf)
                            {
                                let len = got.len;
                                tally.take(&buf[..len], monotonic_ns());
                            }
                            busy_cpu += thread_cpu_ns() - cpu;
                        }
                        // SAFETY: closes the epoll descriptor made above.
                        unsafe { libc::close(epoll) };
                        Ok((
                            tally,
                            busy_cpu,
                            "kernel UDP socket, epoll_wait(0) and recvmsg until EAGAIN".into(),
                        ))
                    }
                }
            },
        )
    };
    let started = Instant::now();
    while !ready.load(Ordering::Acquire) {
        if receiver.is_finished() || started.elapsed() > Duration::from_secs(10) {
            done.store(true, Ordering::Release);
            return match receiver.join() {
                Ok(Err(error)) => Err(error),
                _ => Err("the receiver did not start".into()),
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let sender_address = pair.sender_address;
    let sender = {
        let sent = sent.clone();
        netns::in_namespace(&pair.sender, move || {
            netns::pin(0);
            let socket = UdpSocket::bind((sender_address, 0)).expect("bind");
            socket.set_multicast_ttl_v4(4).expect("ttl");
            socket.connect((GROUP, PORT)).expect("connect");
            const BATCH: usize = 32;
            let mut payloads = [[0u8; PAYLOAD]; BATCH];
            let start = monotonic_ns();
            let mut next = 0u64;
            while next < total {
                let due = ((monotonic_ns() - start) as u128 * rate as u128 / 1_000_000_000) as u64;
                let n = due.min(total).saturating_sub(next).min(BATCH as u64) as usize;
                if n == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let now = monotonic_ns();
                let mut iovecs: [libc::iovec; BATCH] = [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                }; BATCH];
                // SAFETY: zeroed mmsghdr are valid (no name, no control).
                let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
                for i in 0..n {
                    payloads[i][..8].copy_from_slice(&(next + i as u64).to_le_bytes());
                    payloads[i][8..16].copy_from_slice(&now.to_le_bytes());
                    iovecs[i].iov_base = payloads[i].as_mut_ptr().cast();
                    iovecs[i].iov_len = PAYLOAD;
                    headers[i].msg_hdr.msg_iov = &mut iovecs[i];
                    headers[i].msg_hdr.msg_iovlen = 1;
                }
                // SAFETY: `n` initialised headers pointing at live buffers.
                let done_now = unsafe {
                    libc::sendmmsg(socket.as_raw_fd(), headers.as_mut_ptr(), n as u32, 0)
                };
                if done_now > 0 {
                    next += done_now as u64;
                }
            }
            sent.store(next, Ordering::Release);
            monotonic_ns() - start
        })
    };
    let sender_ns = sender.join().map_err(|_| "the sender panicked")?;
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Release);
    let (tally, busy_cpu_ns, note) = receiver
        .join()
        .map_err(|_| "the receiver panicked".to_string())??;
    if tally.bad > 0 {
        return Err(format!(
            "{} datagrams were malformed or repeated",
            tally.bad
        ));
    }
    Ok(Outcome {
        sent: sent.load(Ordering::Acquire),
        received: tally.received,
        histogram: tally.histogram,
        busy_cpu_ns,
        sender_ns,
        note,
    })
}

fn main() {
    let mut rates = vec![100_000u64, 1_000_000];
    let mut seconds = 2.0f64;
    let mut search = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rates" => {
                rates = args
                    .next()
                    .expect("--rates LIST")
                    .split(',')
                    .map(|r| r.parse().expect("a rate"))
                    .collect()
            }
            "--seconds" => seconds = args.next().expect("--seconds S").parse().expect("seconds"),
            "--no-search" => search = false,
            _ => {} // cargo bench passes --bench
        }
    }
    if !netns::available() {
        println!("xdp: skipped: needs root and iproute2 (network namespaces)");
        return;
    }
    let pair = netns::Pair::create("b", 41).expect("namespaces");
    println!("{}", netns::host_line());
    println!(
        "| backend | rate/s | sent/s | sent | received | lost | p50 us | p99 us | p99.9 us | CPU ns/datagram |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut notes = Vec::new();
    // By backend: the highest rate of the table it took without loss.
    let mut lossless = [0u64; 3];
    for &rate in &rates {
        for (index, backend) in Backend::ALL.into_iter().enumerate() {
            match run(&pair, backend, rate, seconds) {
                Ok(outcome) => {
                    // Credited with what the sender achieved, when it fell short of the rate.
                    let achieved = outcome.sent as f64 * 1e9 / outcome.sender_ns.max(1) as f64;
                    if outcome.sent == outcome.received && outcome.received > 0 {
                        lossless[index] = lossless[index].max((achieved as u64).min(rate));
                    }
                    let h = &outcome.histogram;
                    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
                    println!(
                        "| {} | {} | {:.0} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} |",
                        backend.name(),
                        rate,
                        outcome.sent as f64 * 1e9 / outcome.sender_ns.max(1) as f64,
                        outcome.sent,
                        outcome.received,
                        outcome.sent - outcome.received,
                        us(0.5),
                        us(0.99),
                        us(0.999),
                        outcome.busy_cpu_ns as f64 / outcome.received.max(1) as f64
                    );
                    notes.push(format!("{} at {rate}/s: {}", backend.name(), outcome.note));
                }
                Err(error) => println!("| {} | {} | failed: {error} |", backend.name(), rate),
            }
        }
    }
    for note in notes {
        println!("- {note}");
    }
    if !search {
        return;
    }
    println!();
    println!("| backend | highest lossless rate/s | why the search stopped |");
    println!("|---|--:|---|");
    for (index, backend) in Backend::ALL.into_iter().enumerate() {
        let mut best = lossless[index];
        let mut rate = (best * 2).max(50_000);
        let mut why = "8 M/s reached".to_owned();
        while rate <= 8_000_000 {
            match run(&pair, backend, rate, 1.0) {
                Ok(outcome) => {
                    let lost = outcome.sent - outcome.received;
                    if lost > 0 || outcome.received == 0 {
                        why = format!("{lost} of {} lost at {rate}/s", outcome.sent);
                        break;
                    }
                    let achieved = outcome.sent as f64 * 1e9 / outcome.sender_ns.max(1) as f64;
                    best = best.max((achieved as u64).min(rate));
                    if achieved < rate as f64 * 0.9 {
                        why = format!(
                            "sender-limited: it sent {achieved:.0}/s when asked for {rate}/s"
                        );
                        break;
                    }
                }
                Err(error) => {
                    why = format!("failed at {rate}/s: {error}");
                    break;
                }
            }
            rate *= 2;
        }
        println!("| {} | {best} | {why} |", backend.name());
    }
}
