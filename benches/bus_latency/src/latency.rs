//! One-way latency from a writer process to a reader process on another core, through three
//! transports carrying the same 64 bytes: tickwire's bus, iceoryx2 publish-subscribe, and a Unix
//! domain socket (SOCK_SEQPACKET).
//!
//! The writer stamps each message with the clock (`clock::ticks`) just before handing it to the
//! transport, then waits `interval` (busy, on its own core) before the next, so the reader
//! measures delivery and not a queue. The reader busy-polls on the other core and records its
//! own clock read minus the stamp as soon as a message is in its hands. Every message carries its
//! sequence number and a check word derived from it: the reader refuses a torn or reordered
//! message and counts lost ones (none are expected at this pace).
//!
//! Protocol with the parent: each child prints `ready` once its end is set up; the writer then
//! waits for `go` on stdin; the reader prints `result ...` when it has seen the last message.

use crate::clock;
use hdrhistogram::Histogram;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Quote};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusReader, BusWriter, Geometry, Start};

/// XORed into the sequence to make the check word.
const CHECK: u64 = 0x5a5a_1234_dead_beef;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    Bus,
    Iceoryx2,
    UnixSocket,
}

impl System {
    pub const ALL: [System; 3] = [System::Bus, System::Iceoryx2, System::UnixSocket];

    pub fn name(self) -> &'static str {
        match self {
            System::Bus => "tickwire bus",
            System::Iceoryx2 => "iceoryx2 publish-subscribe",
            System::UnixSocket => "Unix domain socket (SOCK_SEQPACKET)",
        }
    }

    pub fn arg(self) -> &'static str {
        match self {
            System::Bus => "bus",
            System::Iceoryx2 => "iceoryx2",
            System::UnixSocket => "uds",
        }
    }

    pub fn from_arg(arg: &str) -> Result<System, String> {
        System::ALL
            .into_iter()
            .find(|system| system.arg() == arg)
            .ok_or_else(|| format!("unknown system {arg:?}: bus, iceoryx2 or uds"))
    }
}

/// The 64 bytes every transport carries: sequence, stamp, then check words.
fn message(sequence: u64, stamp: u64) -> [u64; 8] {
    let check = sequence ^ CHECK;
    [sequence, stamp, check, check, check, check, check, check]
}

/// The sequence and stamp of a message, or an error if it is torn.
fn open_message(words: &[u64; 8]) -> Result<(u64, u64), String> {
    let check = words[0] ^ CHECK;
    if words[2..].iter().any(|&word| word != check) {
        return Err(format!("torn message at sequence {}: {words:x?}", words[0]));
    }
    Ok((words[0], words[1]))
}

fn quote_for(sequence: u64, stamp: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: sequence ^ CHECK,
            recv_ts_ns: stamp,
            venue_seq: sequence,
            instrument_id: 7,
            venue_id: 1,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote {
            bid_px: Fixed((sequence ^ CHECK) as i64),
            bid_sz: Fixed(1),
            ask_px: Fixed(2),
            ask_sz: Fixed(3),
        }),
    )
}

fn open_quote(event: &Event) -> Result<(u64, u64), String> {
    let sequence = event.header.venue_seq;
    let whole = event.header.exchange_ts_ns == sequence ^ CHECK
        && matches!(event.body(), Body::Quote(quote) if quote.bid_px == Fixed((sequence ^ CHECK) as i64));
    if !whole {
        return Err(format!("torn event at sequence {sequence}"));
    }
    Ok((sequence, event.header.recv_ts_ns))
}

/// What a child needs to know.
pub struct Args {
    pub system: System,
    /// A private directory for the bus file and the socket.
    pub dir: PathBuf,
    /// Messages in all, warm-up included.
    pub total: u64,
    /// Messages at the start not recorded.
    pub warmup: u64,
    pub interval_ns: u64,
    pub ticks_per_ns: f64,
    pub core: usize,
}

impl Args {
    pub fn to_strings(&self) -> Vec<String> {
        vec![
            self.system.arg().to_owned(),
            self.dir.display().to_string(),
            self.total.to_string(),
            self.warmup.to_string(),
            self.interval_ns.to_string(),
            self.ticks_per_ns.to_string(),
            self.core.to_string(),
        ]
    }

    pub fn parse(args: &[String]) -> Result<Args, String> {
        let [system, dir, total, warmup, interval_ns, ticks_per_ns, core] = args else {
            return Err(format!("expected 7 arguments, got {args:?}"));
        };
        let number = |text: &String| {
            text.parse::<u64>()
                .map_err(|error| format!("{text:?}: {error}"))
        };
        Ok(Args {
            system: System::from_arg(system)?,
            dir: PathBuf::from(dir),
            total: number(total)?,
            warmup: number(warmup)?,
            interval_ns: number(interval_ns)?,
            ticks_per_ns: ticks_per_ns
                .parse()
                .map_err(|error| format!("{ticks_per_ns:?}: {error}"))?,
            core: number(core)? as usize,
        })
    }
}

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    // A parent that went away leaves nobody to tell: the child then ends on its next wait.
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

fn wait_for_go() -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|error| format!("stdin: {error}"))?;
    if line.trim() != "go" {
        return Err(format!("expected go from the parent, got {line:?}"));
    }
    Ok(())
}

fn bus_path(dir: &Path) -> PathBuf {
    dir.join("latency.bus")
}

fn socket_path(dir: &Path) -> PathBuf {
    dir.join("latency.sock")
}

fn iceoryx2_service_name(dir: &Path) -> String {
    // One service per run: the directory's name is unique.
    let leaf = dir.file_name().map_or_else(
        || "run".to_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    format!("tickwire-bench/{leaf}")
}

/// Sends `total` messages paced by `interval`, each stamped just before `send`.
fn paced(args: &Args, mut send: impl FnMut(u64, u64) -> Result<(), String>) -> Result<(), String> {
    let interval_ticks = (args.interval_ns as f64 * args.ticks_per_ns) as u64;
    let mut next = clock::ticks();
    for sequence in 0..args.total {
        while clock::ticks() < next {
            std::hint::spin_loop();
        }
        let stamp = clock::ticks();
        send(sequence, stamp)?;
        next = stamp + interval_ticks;
    }
    Ok(())
}

pub fn writer(args: &Args) -> Result<(), String> {
    clock::pin(args.core)?;
    match args.system {
        System::Bus => {
            let options = BusOptions {
                path: bus_path(&args.dir),
                geometry: Geometry::new(1 << 16, 16)?,
                group: None,
            };
            let mut writer =
                BusWriter::create(&options, 1, 0).map_err(|error| error.to_string())?;
            say("ready");
            wait_for_go()?;
            paced(args, |sequence, stamp| {
                writer.write(&quote_for(sequence, stamp));
                writer.publish();
                Ok(())
            })
        }
        System::Iceoryx2 => {
            use iceoryx2::prelude::*;
            let node = NodeBuilder::new()
                .create::<ipc::Service>()
                .map_err(|error| format!("iceoryx2 node: {error:?}"))?;
            let name = iceoryx2_service_name(&args.dir);
            let service = node
                .service_builder(
                    &name
                        .as_str()
                        .try_into()
                        .map_err(|error| format!("iceoryx2 service name: {error:?}"))?,
                )
                .publish_subscribe::<[u64; 8]>()
                .subscriber_max_buffer_size(1024)
                .history_size(0)
                .enable_safe_overflow(true)
                .open_or_create()
                .map_err(|error| format!("iceoryx2 service: {error:?}"))?;
            let publisher = service
                .publisher_builder()
                .create()
                .map_err(|error| format!("iceoryx2 publisher: {error:?}"))?;
            say("ready");
            wait_for_go()?;
            paced(args, |sequence, stamp| {
                // The zero-copy path: loan a sample in shared memory, fill it, send it.
                let sample = publisher
                    .loan_uninit()
                    .map_err(|error| format!("iceoryx2 loan: {error:?}"))?;
                let sample = sample.write_payload(message(sequence, stamp));
                sample
                    .send()
                    .map_err(|error| format!("iceoryx2 send: {error:?}"))?;
                Ok(())
            })
        }
        System::UnixSocket => {
            let listener = uds::Socket::listen(&socket_path(&args.dir))?;
            say("ready");
            wait_for_go()?;
            let connection = listener.accept()?;
            paced(args, |sequence, stamp| {
                connection.send(&message(sequence, stamp))
            })
        }
    }
}

/// Records each message's latency; checks order; stops at the last sequence.
struct Recorder {
    histogram: Histogram<u64>,
    warmup: u64,
    last: u64,
    expected: Option<u64>,
    lost: u64,
    negative: u64,
}

impl Recorder {
    fn new(args: &Args) -> Recorder {
        Recorder {
            // Bounded (one ns to ten seconds, in ticks) and fixed: a value past the top is
            // clamped to it, and the table's max would show it.
            histogram: Histogram::new_with_bounds(1, (10e9 * args.ticks_per_ns) as u64, 3)
                .expect("valid bounds"),
            warmup: args.warmup,
            last: args.total - 1,
            expected: None,
            lost: 0,
            negative: 0,
        }
    }

    /// Takes one message received at `now`; true when it was the last.
    #[inline]
    fn take(&mut self, sequence: u64, stamp: u64, now: u64) -> Result<bool, String> {
        if let Some(expected) = self.expected {
            if sequence < expected {
                return Err(format!(
                    "sequence {sequence} after {}: reordered or repeated",
                    expected - 1
                ));
            }
            self.lost += sequence - expected;
        }
        self.expected = Some(sequence + 1);
        if sequence >= self.warmup {
            if now < stamp {
                // The clocks of the two cores disagree: counted, and recorded as the floor (one tick).
                self.negative += 1;
            }
            self.histogram
                .saturating_record(now.saturating_sub(stamp).max(1));
        }
        Ok(sequence >= self.last)
    }

    fn report(&self, ticks_per_ns: f64) -> String {
        let ns = |ticks: u64| (ticks as f64 / ticks_per_ns).round() as u64;
        let at = |quantile: f64| ns(self.histogram.value_at_quantile(quantile));
        format!(
            "result {} {} {} {} {} {} {} {}",
            at(0.5),
            at(0.9),
            at(0.99),
            at(0.999),
            ns(self.histogram.max()),
            self.histogram.len(),
            self.lost,
            self.negative
        )
    }
}

pub fn reader(args: &Args) -> Result<(), String> {
    clock::pin(args.core)?;
    let mut recorder = Recorder::new(args);
    match args.system {
        System::Bus => {
            let mut reader = BusReader::open(&bus_path(&args.dir), Start::Latest, 64)
                .map_err(|error| error.to_string())?;
            let mut out = vec![quote_for(0, 0); 64];
            say("ready");
            loop {
                let batch = reader.read(&mut out).map_err(|error| error.to_string())?;
                if batch.count == 0 {
                    if batch.missed > 0 {
                        return Err(format!("lapped: {} events missed", batch.missed));
                    }
                    std::hint::spin_loop();
                    continue;
                }
                let now = clock::ticks();
                let mut done = false;
                for event in &out[..batch.count] {
                    let (sequence, stamp) = open_quote(event)?;
                    done |= recorder.take(sequence, stamp, now)?;
                }
                if done {
                    break;
                }
            }
        }
        System::Iceoryx2 => {
            use iceoryx2::prelude::*;
            let node = NodeBuilder::new()
                .create::<ipc::Service>()
                .map_err(|error| format!("iceoryx2 node: {error:?}"))?;
            let name = iceoryx2_service_name(&args.dir);
            let service = node
                .service_builder(
                    &name
                        .as_str()
                        .try_into()
                        .map_err(|error| format!("iceoryx2 service name: {error:?}"))?,
                )
                .publish_subscribe::<[u64; 8]>()
                .subscriber_max_buffer_size(1024)
                .history_size(0)
                .enable_safe_overflow(true)
                .open_or_create()
                .map_err(|error| format!("iceoryx2 service: {error:?}"))?;
            let subscriber = service
                .subscriber_builder()
                .buffer_size(1024)
                .create()
                .map_err(|error| format!("iceoryx2 subscriber: {error:?}"))?;
            say("ready");
            loop {
                let Some(sample) = subscriber
                    .receive()
                    .map_err(|error| format!("iceoryx2 receive: {error:?}"))?
                else {
                    std::hint::spin_loop();
                    continue;
                };
                let now = clock::ticks();
                let (sequence, stamp) = open_message(sample.payload())?;
                if recorder.take(sequence, stamp, now)? {
                    break;
                }
            }
        }
        System::UnixSocket => {
            let socket = uds::Socket::connect(&socket_path(&args.dir))?;
            say("ready");
            let mut words = [0u64; 8];
            loop {
                if !socket.try_recv(&mut words)? {
                    std::hint::spin_loop();
                    continue;
                }
                let now = clock::ticks();
                let (sequence, stamp) = open_message(&words)?;
                if recorder.take(sequence, stamp, now)? {
                    break;
                }
            }
        }
    }
    say(&recorder.report(args.ticks_per_ns));
    Ok(())
}

/// A SOCK_SEQPACKET Unix socket through libc (std has no seqpacket type).
mod uds {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    pub struct Socket {
        fd: libc::c_int,
    }

    impl Drop for Socket {
        fn drop(&mut self) {
            // SAFETY: `fd` is a descriptor this value owns and closes once.
            unsafe { libc::close(self.fd) };
        }
    }

    fn last_error(what: &str) -> String {
        format!("{what}: {}", std::io::Error::last_os_error())
    }

    fn address(path: &Path) -> Result<(libc::sockaddr_un, libc::socklen_t), String> {
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid (empty) address.
        let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        address.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() >= address.sun_path.len() {
            return Err(format!("socket path {} is too long", path.display()));
        }
        for (slot, &byte) in address.sun_path.iter_mut().zip(bytes) {
            *slot = byte as libc::c_char;
        }
        Ok((
            address,
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        ))
    }

    fn socket() -> Result<Socket, String> {
        // SAFETY: plain socket(2) call with constant arguments.
        let fd =
            unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_error("socket(AF_UNIX, SOCK_SEQPACKET)"));
        }
        Ok(Socket { fd })
    }

    impl Socket {
        pub fn listen(path: &Path) -> Result<Socket, String> {
            let socket = socket()?;
            let (address, length) = address(path)?;
            // SAFETY: `address` is a valid sockaddr_un of `length` bytes; `fd` is open.
            let bound = unsafe {
                libc::bind(
                    socket.fd,
                    &address as *const libc::sockaddr_un as *const libc::sockaddr,
                    length,
                )
            };
            if bound != 0 {
                return Err(last_error("bind"));
            }
            // SAFETY: `fd` is an open, bound socket.
            if unsafe { libc::listen(socket.fd, 1) } != 0 {
                return Err(last_error("listen"));
            }
            Ok(socket)
        }

        pub fn accept(&self) -> Result<Socket, String> {
            // SAFETY: `fd` is a listening socket; null address pointers are allowed.
            let fd = unsafe {
                libc::accept4(
                    self.fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(last_error("accept"));
            }
            Ok(Socket { fd })
        }

        pub fn connect(path: &Path) -> Result<Socket, String> {
            let socket = socket()?;
            let (address, length) = address(path)?;
            // SAFETY: `address` is a valid sockaddr_un of `length` bytes; `fd` is open.
            let connected = unsafe {
                libc::connect(
                    socket.fd,
                    &address as *const libc::sockaddr_un as *const libc::sockaddr,
                    length,
                )
            };
            if connected != 0 {
                return Err(last_error("connect"));
            }
            Ok(socket)
        }

        /// Sends one 64-byte message (blocking).
        pub fn send(&self, words: &[u64; 8]) -> Result<(), String> {
            // SAFETY: `words` is 64 readable bytes; `fd` is a connected socket.
            let sent = unsafe { libc::send(self.fd, words.as_ptr().cast(), 64, 0) };
            if sent != 64 {
                return Err(last_error("send"));
            }
            Ok(())
        }

        /// Receives one message without blocking: false when none is there.
        pub fn try_recv(&self, words: &mut [u64; 8]) -> Result<bool, String> {
            // SAFETY: `words` is 64 writable bytes; `fd` is a connected socket.
            let got =
                unsafe { libc::recv(self.fd, words.as_mut_ptr().cast(), 64, libc::MSG_DONTWAIT) };
            match got {
                64 => Ok(true),
                0 => Err("the writer closed the socket early".to_owned()),
                _ if got < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock =>
                {
                    Ok(false)
                }
                _ if got < 0 => Err(last_error("recv")),
                _ => Err(format!("a {got}-byte message, expected 64")),
            }
        }
    }
}
