//! The plumbing both simulated venues share, below their protocols: the server's TLS session on
//! a blocking socket (handshake, reads fed to rustls, writes flushed), reading HTTP requests up
//! to a WebSocket upgrade, the WebSocket session loop ([`run_session`]), the reset fault's SO_LINGER,
//! and the small lock and time helpers.

use super::frame::{FrameReader, Incoming};
use super::http::{self, HttpError, Request};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a connection may take for its TLS handshake and each HTTP request before the
/// upgrade; a client that stays silent longer is dropped.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Socket reads per call: a whole TLS record and more.
pub const READ_BYTES: usize = 64 * 1024;

/// Plaintext per TLS write: a record's worth, so rustls's send buffer (64 KiB by default) never
/// fills between flushes.
pub const WRITE_CHUNK_BYTES: usize = 16 * 1024;

/// `at + duration`, or a year from `at` when that overflows (`Duration::MAX` as "never").
pub fn later(at: Instant, duration: Duration) -> Instant {
    at.checked_add(duration)
        .or_else(|| at.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(at)
}

/// A mutex whose holder panicked still guards consistent data here (counters, lists, a TLS
/// session that at worst is broken and fails its connection), so a poisoned lock is taken over.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes what the TLS session has queued.
pub fn flush_tls(tls: &mut ServerConnection, tcp: &TcpStream) -> io::Result<()> {
    let mut writer = tcp;
    while tls.wants_write() {
        if tls.write_tls(&mut writer)? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// Feeds received ciphertext to the session and appends the plaintext it yields; true when the
/// client sent close_notify.
pub fn feed_tls(
    tls: &mut ServerConnection,
    tcp: &TcpStream,
    mut ciphertext: &[u8],
    plaintext: &mut Vec<u8>,
) -> io::Result<bool> {
    let mut peer_closed = false;
    while !ciphertext.is_empty() {
        tls.read_tls(&mut ciphertext)?;
        let state = match tls.process_new_packets() {
            Ok(state) => state,
            Err(error) => {
                // The alert rustls queued tells the client why.
                let _ = flush_tls(tls, tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, error));
            }
        };
        let ready = state.plaintext_bytes_to_read();
        if ready > 0 {
            let start = plaintext.len();
            plaintext.resize(start + ready, 0);
            tls.reader().read_exact(&mut plaintext[start..])?;
        }
        peer_closed |= state.peer_has_closed();
    }
    flush_tls(tls, tcp)?;
    Ok(peer_closed)
}

/// Encrypts and writes `bytes`, a TLS record's worth at a time.
pub fn send_plain(tls: &mut ServerConnection, tcp: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    send_plain_then(tls, tcp, bytes, || {})
}

/// As [`send_plain`], and calls `on_wire` once, when the first encrypted bytes are about to be
/// written (after the first chunk's encryption, before its `write`; at once for no bytes).
pub fn send_plain_then(
    tls: &mut ServerConnection,
    tcp: &TcpStream,
    bytes: &[u8],
    on_wire: impl FnOnce(),
) -> io::Result<()> {
    let mut on_wire = Some(on_wire);
    for chunk in bytes.chunks(WRITE_CHUNK_BYTES) {
        tls.writer().write_all(chunk)?;
        if let Some(on_wire) = on_wire.take() {
            on_wire();
        }
        flush_tls(tls, tcp)?;
    }
    if let Some(on_wire) = on_wire.take() {
        on_wire();
    }
    Ok(())
}

/// Sends a last response, then TLS close_notify: the client can tell the end from a cut.
pub fn send_final(tls: &mut ServerConnection, tcp: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    send_plain(tls, tcp, bytes)?;
    tls.send_close_notify();
    flush_tls(tls, tcp)
}

/// Runs the TLS handshake on a blocking socket; returns the session and the plaintext that
/// came with the handshake's last read (TLS 1.3 lets the client send its request right behind
/// its Finished, so rustls may hold it already).
pub fn accept_tls(
    config: &Arc<ServerConfig>,
    tcp: &TcpStream,
) -> io::Result<(ServerConnection, Vec<u8>)> {
    let mut tls = ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
    let mut io_ref = tcp;
    while tls.is_handshaking() {
        tls.complete_io(&mut io_ref)?;
    }
    let mut plaintext = Vec::new();
    match tls.reader().read_to_end(&mut plaintext) {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
        Err(error) => return Err(error),
    }
    Ok((tls, plaintext))
}

/// What [`read_request`] found.
pub enum NextRequest {
    Request(Request),
    /// The client closed (TCP or close_notify) before a whole request.
    Closed,
    /// The bytes are no HTTP request: the caller answers (400, or 431 for a huge head) and
    /// closes.
    Invalid(HttpError),
}

/// Reads until `plaintext` holds a whole request head, and takes it off the front.
pub fn read_request(
    tls: &mut ServerConnection,
    tcp: &TcpStream,
    plaintext: &mut Vec<u8>,
    buf: &mut [u8],
) -> io::Result<NextRequest> {
    loop {
        match http::parse_request(plaintext) {
            Err(error) => return Ok(NextRequest::Invalid(error)),
            Ok(Some((request, consumed))) => {
                plaintext.drain(..consumed);
                return Ok(NextRequest::Request(request));
            }
            Ok(None) => {}
        }
        let read = (&*tcp).read(buf)?;
        if read == 0 || feed_tls(tls, tcp, &buf[..read], plaintext)? {
            return Ok(NextRequest::Closed);
        }
    }
}

/// SO_LINGER 0: the kernel answers the socket's final close with an RST instead of a FIN.
pub fn set_linger_zero(tcp: &TcpStream) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is open for as long as `tcp` lives, and the option value points to
    // a `linger` of exactly the length passed; setsockopt only reads it.
    let result = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The longest a WebSocket session's read waits before it looks at its timers again.
pub const MAX_READ_WAIT: Duration = Duration::from_secs(1);

/// A simulated venue's WebSocket connection after the upgrade, as [`run_session`] drives it: the
/// venue decides what each frame and timer does, the loop below is the same for every venue.
pub trait Session {
    /// The socket and the TLS session the frames come over.
    fn transport(&mut self) -> (&TcpStream, &mut ServerConnection);
    /// After each batch of data (and once at the start): faults set to fire after N messages.
    fn after_data(&mut self) -> io::Result<()>;
    fn handle_incoming(&mut self, incoming: Incoming) -> io::Result<()>;
    /// Starts the closing handshake with `code` and `reason`.
    fn start_close(&mut self, code: u16, reason: &str) -> io::Result<()>;
    fn run_timers(&mut self) -> io::Result<()>;
    /// The next time a timer is due.
    fn next_deadline(&self, now: Instant) -> Instant;
    /// The connection is finished (closed or reset).
    fn over(&self) -> bool;
    /// The simulator is stopping.
    fn stopping(&self) -> bool;
}

/// Runs a session until it is over, the peer goes away or the simulator stops: frames read as
/// they arrive (`leftover`: bytes read past the upgrade request), timers run between reads, each
/// read waiting no longer than the next timer (at most [`MAX_READ_WAIT`]). A malformed frame
/// starts the closing handshake with its close code and ends the session with the error.
pub fn run_session(
    session: &mut impl Session,
    leftover: Vec<u8>,
    buf: &mut [u8],
) -> io::Result<()> {
    let mut reader = FrameReader::new();
    reader.push(&leftover);
    // Faults set to fire after 0 messages fire at once.
    session.after_data()?;
    let mut plaintext = Vec::new();
    loop {
        loop {
            match reader.next_incoming() {
                Ok(Some(incoming)) => session.handle_incoming(incoming)?,
                Ok(None) => break,
                Err(error) => {
                    session.start_close(error.close_code(), &error.to_string())?;
                    return Err(io::Error::new(io::ErrorKind::InvalidData, error));
                }
            }
            if session.over() {
                return Ok(());
            }
        }
        session.run_timers()?;
        if session.over() || session.stopping() {
            return Ok(());
        }
        let now = Instant::now();
        let timeout = session
            .next_deadline(now)
            .saturating_duration_since(now)
            .clamp(Duration::from_millis(1), MAX_READ_WAIT);
        let (tcp, tls) = session.transport();
        tcp.set_read_timeout(Some(timeout))?;
        match (&*tcp).read(buf) {
            Ok(0) => return Ok(()),
            Ok(read) => {
                plaintext.clear();
                if feed_tls(tls, tcp, &buf[..read], &mut plaintext)? {
                    return Ok(());
                }
                reader.push(&plaintext);
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(error) => return Err(error),
        }
    }
}
