//! One TLS client session, driven with byte buffers by the network thread's poll loop.
//!
//! The handshake runs on rustls's unbuffered API (`UnbufferedClientConnection`): rustls
//! processes records in place in a buffer this session owns and hands back one state at a
//! time; this file turns that state machine into feed / read / write / write_tls calls. Once
//! the handshake is over the session takes the record layer over (`records.rs`, through
//! rustls's `KernelConnection`), because rustls 0.23 allocates a `Vec` per record in each
//! direction and this one allocates nothing. Every buffer is allocated once, in
//! [`TlsClient::new`]; see `mod.rs` for why this API and not `ClientConnection`.

use super::error::{looks_like_tls, TlsError};
use super::records::{Failure, Received, Records};
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, InsufficientSizeError, ReadTraffic,
    WriteTraffic,
};
use rustls::{AlertDescription, ClientConfig, ProtocolVersion};
use std::sync::Arc;

/// The largest record plaintext (RFC 8446 section 5.1).
pub const MAX_RECORD_PLAINTEXT_BYTES: usize = 1 << 14;
/// The largest record on the wire: the header, the plaintext and at most 2048 bytes of
/// expansion (RFC 5246 section 6.2.3; TLS 1.3 allows less, RFC 8446 section 5.2).
pub const MAX_RECORD_WIRE_BYTES: usize = 5 + MAX_RECORD_PLAINTEXT_BYTES + 2048;
/// Received bytes the session holds: ciphertext not yet decrypted plus plaintext not yet read.
/// rustls joins the fragments of a handshake message in the ciphertext buffer and refuses
/// messages over 64 KiB, so this holds one such message and two records.
pub const INCOMING_BYTES: usize = 0xffff + 2 * MAX_RECORD_WIRE_BYTES;
/// Ciphertext waiting for the socket owner.
pub const OUTGOING_BYTES: usize = 64 * 1024;
/// Plaintext written before it can be encrypted (during the handshake, or while the outgoing
/// buffer is full): room for a WebSocket upgrade request and the first subscriptions.
pub const UNSENT_BYTES: usize = 16 * 1024;
/// Room left for a record's header, explicit nonce, content type and tag when plaintext is cut
/// to fit the outgoing buffer (at most 5 + 8 + 16 for TLS 1.2 AES-GCM, 5 + 1 + 16 for TLS 1.3).
const RECORD_OVERHEAD_BYTES: usize = 64;
/// How many of the server's first bytes are kept to tell "not TLS" from "broken TLS".
const FIRST_BYTES: usize = 32;

/// What [`TlsClient::read_plaintext`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many plaintext bytes were written to the start of the buffer (more than zero,
    /// unless the buffer was empty).
    Data(usize),
    /// No plaintext now: feed more ciphertext.
    WouldBlock,
    /// The server sent close_notify and all it sent before has been read: the stream ended
    /// cleanly and nothing more will come.
    CloseNotify,
    /// The transport ended ([`TlsClient::feed_eof`]) without close_notify, after all the
    /// plaintext was read: the last message may be cut short.
    Eof,
}

/// A TLS client session over byte buffers: no socket, no I/O, no blocking, and no allocation
/// after the handshake (pinned by `tests/tls_alloc.rs`) but on a TLS 1.3 KeyUpdate or session
/// ticket, which rustls handles.
///
/// The owner of the socket moves bytes in both directions:
/// - received ciphertext goes in through [`feed_tls`](Self::feed_tls) (and the end of the
///   stream through [`feed_eof`](Self::feed_eof)); plaintext comes out of
///   [`read_plaintext`](Self::read_plaintext), which is where records are decrypted;
/// - plaintext to send goes in through [`write_plaintext`](Self::write_plaintext); ciphertext
///   to send comes out of [`write_tls`](Self::write_tls) or
///   [`write_tls_to_vec`](Self::write_tls_to_vec) whenever [`wants_write`](Self::wants_write),
///   which any call may turn on.
///
/// After an error the session is dead: every later call returns the same error, and the alert
/// prepared for the server (if the error calls for one) can still be taken with `write_tls`
/// before the socket closes.
pub struct TlsClient {
    /// rustls's connection, until the handshake is over and the session has taken the record
    /// layer over (`records`). **Invariant:** exactly one of `connection` and `records` is set,
    /// unless taking over failed (then `failed` is set).
    connection: Option<UnbufferedClientConnection>,
    /// The record layer after the handshake.
    records: Option<Box<Records>>,
    /// The protocol version and ALPN protocol, kept when `connection` goes.
    version: Option<ProtocolVersion>,
    alpn: Option<Vec<u8>>,
    server_name: ServerName<'static>,
    /// Received ciphertext not yet processed.
    incoming: Window,
    /// Ciphertext for the socket owner.
    outgoing: Window,
    /// Decrypted plaintext not yet read: the rest of a record that did not fit the caller's
    /// buffer, or records decrypted to get past them (rustls yields received data before it
    /// lets data be encrypted, and before the end of a handshake). **Invariant:** `incoming`
    /// and `stash` together hold at most [`INCOMING_BYTES`], so decrypting every complete
    /// record into the stash always fits (a record's plaintext is shorter than its ciphertext),
    /// and rustls never keeps a decrypted record between calls. With the session's own record
    /// layer, records stay in `incoming` until read, and only the rest of a record that did not
    /// fit the caller's buffer is stashed.
    stash: Window,
    /// Plaintext accepted by `write_plaintext` and not yet encrypted. Its capacity is fixed.
    unsent: Vec<u8>,
    close_notify_requested: bool,
    close_notify_queued: bool,
    peer_closed: bool,
    transport_ended: bool,
    failed: Option<TlsError>,
    first_bytes: [u8; FIRST_BYTES],
    first_bytes_len: usize,
}

/// What to do after one state of rustls's state machine.
enum Step {
    Continue,
    Stop,
    Failed(TlsError),
    RustlsFailed(rustls::Error),
}

impl TlsClient {
    /// Starts a session; the ClientHello is ready for [`write_tls`](Self::write_tls) at once.
    ///
    /// `server_name` is sent as SNI (unless it is an IP address) and the certificate must be
    /// valid for it; [`server_name`](super::server_name) makes it from a venue's host and
    /// `tls.sni`. Allocates all of the session's buffers (about 280 KiB: received bytes and
    /// unread plaintext, [`INCOMING_BYTES`] each; [`OUTGOING_BYTES`]; [`UNSENT_BYTES`]).
    ///
    /// The session needs `config.enable_secret_extraction` to take the record layer over after
    /// the handshake; [`TlsSettings::build`](super::TlsSettings::build) sets it, and a config
    /// without it is copied with it set (the copy shares the session cache).
    pub fn new(
        config: Arc<ClientConfig>,
        server_name: ServerName<'static>,
    ) -> Result<Self, TlsError> {
        let config = if config.enable_secret_extraction {
            config
        } else {
            let mut copy = (*config).clone();
            copy.enable_secret_extraction = true;
            Arc::new(copy)
        };
        let connection =
            UnbufferedClientConnection::new(config, server_name.clone()).map_err(|error| {
                TlsError::Other {
                    message: error.to_string(),
                }
            })?;
        let mut client = Self {
            connection: Some(connection),
            records: None,
            version: None,
            alpn: None,
            server_name,
            incoming: Window::new(INCOMING_BYTES),
            outgoing: Window::new(OUTGOING_BYTES),
            stash: Window::new(INCOMING_BYTES),
            unsent: Vec::with_capacity(UNSENT_BYTES),
            close_notify_requested: false,
            close_notify_queued: false,
            peer_closed: false,
            transport_ended: false,
            failed: None,
            first_bytes: [0; FIRST_BYTES],
            first_bytes_len: 0,
        };
        client.drive(&mut [])?;
        Ok(client)
    }

    /// Takes ciphertext received from the server; returns how many bytes were taken.
    ///
    /// During the handshake the records are processed at once. Afterwards they are only
    /// stored, and decrypted by [`read_plaintext`](Self::read_plaintext) straight into the
    /// caller's buffer, so call it after every feed. Fewer bytes taken than given means the
    /// session holds [`INCOMING_BYTES`] received and unread: read plaintext, then feed the
    /// rest. After the server's close_notify everything is taken and ignored
    /// (RFC 8446 section 6.1).
    pub fn feed_tls(&mut self, ciphertext: &[u8]) -> Result<usize, TlsError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.peer_closed {
            return Ok(ciphertext.len());
        }
        self.remember_first_bytes(ciphertext);
        self.incoming.make_room(ciphertext.len());
        let held = self.incoming.len() + self.stash.len();
        let spare = self.incoming.spare();
        let taken = ciphertext
            .len()
            .min(spare.len())
            .min(INCOMING_BYTES.saturating_sub(held));
        spare[..taken].copy_from_slice(&ciphertext[..taken]);
        self.incoming.commit(taken);
        if self.is_handshaking() {
            self.drive(&mut [])?;
            if self.is_handshaking() && self.incoming.len() + self.stash.len() >= INCOMING_BYTES {
                // Cannot happen with a server that rustls would accept (it refuses handshake
                // messages that would not fit); refusing beats waiting forever.
                return Err(self.fail(TlsError::Other {
                    message: format!(
                        "the server's handshake does not fit in {INCOMING_BYTES} bytes"
                    ),
                }));
            }
        }
        Ok(taken)
    }

    /// Tells the session that the transport has ended (a read of zero bytes).
    ///
    /// During the handshake this is the error to report; afterwards the plaintext already
    /// received can still be read, then [`read_plaintext`](Self::read_plaintext) gives
    /// [`ReadOutcome::Eof`] (or [`ReadOutcome::CloseNotify`] if the server closed cleanly).
    pub fn feed_eof(&mut self) -> Result<(), TlsError> {
        self.transport_ended = true;
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.is_handshaking() {
            let seen = &self.first_bytes[..self.first_bytes_len];
            let error = if looks_like_tls(seen) {
                TlsError::PeerClosedDuringHandshake
            } else {
                TlsError::NotTls {
                    first_bytes: seen.escape_ascii().to_string(),
                }
            };
            return Err(self.fail(error));
        }
        Ok(())
    }

    /// Decrypts received records and copies their plaintext into `plaintext` (in place in the
    /// session's buffer; nothing is allocated).
    ///
    /// A buffer of at least [`MAX_RECORD_PLAINTEXT_BYTES`] takes every record whole; with a
    /// smaller one the rest of a record waits in the session for the next call. Plaintext that
    /// arrived before an error is returned first; the error comes with the next call.
    pub fn read_plaintext(&mut self, plaintext: &mut [u8]) -> Result<ReadOutcome, TlsError> {
        if plaintext.is_empty() {
            return Ok(ReadOutcome::Data(0));
        }
        let mut written = self.stash.take_into(plaintext);
        if written < plaintext.len() && self.failed.is_none() && self.records.is_some() {
            written = self.read_records(plaintext, written);
            if self
                .records
                .as_ref()
                .is_some_and(|records| records.control_due())
            {
                self.pump_records();
            }
        } else if written < plaintext.len() && (self.failed.is_some() || self.may_progress()) {
            match self.drive(&mut plaintext[written..]) {
                Ok(count) => written += count,
                Err(error) if written == 0 => return Err(error),
                Err(_) => {}
            }
        }
        if written > 0 {
            Ok(ReadOutcome::Data(written))
        } else if let Some(error) = &self.failed {
            Err(error.clone())
        } else if self.peer_closed {
            Ok(ReadOutcome::CloseNotify)
        } else if self.transport_ended {
            Ok(ReadOutcome::Eof)
        } else {
            Ok(ReadOutcome::WouldBlock)
        }
    }

    /// Takes application data to encrypt (a WebSocket upgrade request, frames); returns how
    /// many bytes were taken. Data written during the handshake waits, up to
    /// [`UNSENT_BYTES`], and goes out as soon as the handshake allows. Fewer bytes taken than
    /// given means that much is waiting: send what [`write_tls`](Self::write_tls) gives and
    /// write the rest.
    pub fn write_plaintext(&mut self, plaintext: &[u8]) -> Result<usize, TlsError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.close_notify_requested {
            return Err(TlsError::Other {
                message: "cannot write after send_close_notify".to_owned(),
            });
        }
        let taken = plaintext
            .len()
            .min(self.unsent.capacity() - self.unsent.len());
        self.unsent.extend_from_slice(&plaintext[..taken]);
        if self.records.is_some() {
            self.pump_records();
            if let Some(error) = &self.failed {
                return Err(error.clone());
            }
        } else if !self.is_handshaking() {
            self.drive(&mut [])?;
        }
        Ok(taken)
    }

    /// Moves pending ciphertext (handshake, alerts, encrypted data) into `ciphertext`; returns
    /// how many bytes. What does not fit stays for the next call.
    pub fn write_tls(&mut self, ciphertext: &mut [u8]) -> usize {
        let mut written = self.outgoing.take_into(ciphertext);
        if written < ciphertext.len() && self.encrypt_pending() {
            written += self.outgoing.take_into(&mut ciphertext[written..]);
        }
        written
    }

    /// Appends all pending ciphertext to `ciphertext`; returns how many bytes.
    pub fn write_tls_to_vec(&mut self, ciphertext: &mut Vec<u8>) -> usize {
        let mut written = 0;
        loop {
            let pending = self.outgoing.filled();
            ciphertext.extend_from_slice(pending);
            written += pending.len();
            let count = pending.len();
            self.outgoing.consume(count);
            if !self.encrypt_pending() {
                return written;
            }
        }
    }

    /// Whether ciphertext is waiting to be sent.
    pub fn wants_write(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Whether the handshake is still running. It turns false as soon as the session can carry
    /// data in both directions, possibly while the client's last handshake message still waits
    /// in [`write_tls`](Self::write_tls).
    pub fn is_handshaking(&self) -> bool {
        self.connection
            .as_ref()
            .is_some_and(|connection| connection.is_handshaking())
    }

    /// Queues a close_notify alert; send it with [`write_tls`](Self::write_tls), then close the
    /// socket. Nothing more can be written afterwards. During the handshake the alert waits
    /// for its end; to give up on a handshake, close the socket.
    pub fn send_close_notify(&mut self) {
        self.close_notify_requested = true;
        if self.failed.is_some() {
        } else if self.records.is_some() {
            self.pump_records();
        } else if !self.is_handshaking() {
            // An error here is kept in `failed` and reported by the next call that can.
            let _reported_later = self.drive(&mut []);
        }
    }

    /// The name the certificate is verified against.
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.server_name
    }

    /// The negotiated protocol version, once the server has chosen it.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        match &self.connection {
            Some(connection) => connection.protocol_version(),
            None => self.version,
        }
    }

    /// The ALPN protocol the server chose, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        match &self.connection {
            Some(connection) => connection.alpn_protocol(),
            None => self.alpn.as_deref(),
        }
    }

    /// Whether a call into rustls can yield anything: always during the handshake; afterwards
    /// only with a complete record received, a record or data waiting, or a close_notify to
    /// queue. A record whose header announces more than TLS allows counts as complete, so
    /// that rustls reports it rather than the session waiting for bytes that never come.
    fn may_progress(&self) -> bool {
        if self.is_handshaking()
            || !self.unsent.is_empty()
            || (self.close_notify_requested && !self.close_notify_queued)
        {
            return true;
        }
        match *self.incoming.filled() {
            [_, _, _, high, low, ref body @ ..] => {
                let length = usize::from(u16::from_be_bytes([high, low]));
                body.len() >= length || length > MAX_RECORD_WIRE_BYTES - 5
            }
            _ => false,
        }
    }

    /// After ciphertext was taken: encrypts what waits (unsent data, a close_notify) into the
    /// room just made. Returns whether new ciphertext is ready.
    fn encrypt_pending(&mut self) -> bool {
        let waiting = !self.unsent.is_empty()
            || (self.close_notify_requested && !self.close_notify_queued)
            || self
                .records
                .as_ref()
                .is_some_and(|records| records.control_due());
        if !waiting || self.failed.is_some() || self.is_handshaking() {
            return false;
        }
        let before = self.outgoing.len();
        if self.records.is_some() {
            self.pump_records();
            return self.outgoing.len() > before;
        }
        // An error here is kept in `failed` and reported by the next call that can.
        let _reported_later = self.drive(&mut []);
        self.outgoing.len() > before
    }

    /// Runs rustls's state machine until it needs more input, copying application data into
    /// `plaintext` while it fits; the rest of a record goes to the stash, and then it stops.
    /// With an empty `plaintext` (handshake, writes) every record goes to the stash and it runs
    /// on, to where data can be encrypted. Returns the plaintext bytes written.
    ///
    /// Once the handshake is over and rustls has nothing left in hand (no record received and
    /// unprocessed, nothing to send: its `WriteTraffic` state over an empty buffer), the
    /// session takes the record layer over ([`TlsClient::take_records_over`]).
    fn drive(&mut self, plaintext: &mut [u8]) -> Result<usize, TlsError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut written = 0;
        loop {
            let Some(connection) = self.connection.as_mut() else {
                return Ok(written);
            };
            let incoming = &mut self.incoming;
            let status =
                connection.process_tls_records(&mut incoming.bytes[incoming.start..incoming.end]);
            let mut discard = status.discard;
            let mut write_traffic = false;
            let step = match status.state {
                Err(error) => Step::RustlsFailed(error),
                Ok(ConnectionState::ReadTraffic(mut traffic)) => read_records(
                    &mut traffic,
                    plaintext,
                    &mut written,
                    &mut self.stash,
                    &mut discard,
                ),
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    encode_handshake(&mut encode, &mut self.outgoing)
                }
                Ok(ConnectionState::TransmitTlsData(mut transmit)) => {
                    // TLS 1.3 lets data written during the handshake leave with the client's
                    // Finished. The encoded records are in `outgoing` already, in order, and
                    // the socket owner sends them from there.
                    let step = match transmit.may_encrypt_app_data() {
                        Some(mut traffic) => {
                            encrypt_unsent(&mut traffic, &mut self.unsent, &mut self.outgoing)
                        }
                        None => Step::Continue,
                    };
                    transmit.done();
                    step
                }
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    write_traffic = true;
                    match encrypt_unsent(&mut traffic, &mut self.unsent, &mut self.outgoing) {
                        Step::Continue => {
                            if self.close_notify_requested
                                && !self.close_notify_queued
                                && self.unsent.is_empty()
                            {
                                let spare = self.outgoing.spare();
                                if let Ok(count) = traffic.queue_close_notify(spare) {
                                    self.outgoing.commit(count);
                                    self.close_notify_queued = true;
                                }
                            }
                            // Nothing left to process until more ciphertext arrives.
                            Step::Stop
                        }
                        other => other,
                    }
                }
                Ok(ConnectionState::BlockedHandshake) => Step::Stop,
                Ok(ConnectionState::PeerClosed) => {
                    self.peer_closed = true;
                    Step::Continue
                }
                Ok(ConnectionState::Closed) => {
                    self.peer_closed = true;
                    Step::Stop
                }
                // Early data is a server's state; later rustls states are not asked for.
                Ok(_) => Step::Stop,
            };
            self.incoming.consume(discard);
            match step {
                Step::Stop if write_traffic && self.may_take_records_over() => {
                    self.take_records_over()?;
                    return Ok(written);
                }
                // Once the handshake is over, what rustls yields after an application data
                // record comes from the records that follow it: with no complete record left,
                // asking again would only be told so (a call that costs about as much as
                // decrypting a small record), unless it is to reach the state in which the
                // session takes the record layer over.
                Step::Continue if !self.may_progress() && !self.may_take_records_over() => {
                    return Ok(written)
                }
                Step::Continue => {}
                Step::Stop => return Ok(written),
                Step::Failed(error) => return Err(self.fail(error)),
                Step::RustlsFailed(error) => {
                    let error = TlsError::from_rustls(
                        error,
                        &self.server_name,
                        self.is_handshaking(),
                        &self.first_bytes[..self.first_bytes_len],
                    );
                    return Err(self.fail(error));
                }
            }
        }
    }

    /// Whether rustls may hand the record layer over now: the handshake is over, every
    /// received byte has been processed (a partial record could be half of a handshake message
    /// rustls is joining in place), and no close_notify is under way.
    fn may_take_records_over(&self) -> bool {
        self.connection.is_some()
            && self.failed.is_none()
            && !self.is_handshaking()
            && self.incoming.is_empty()
            && !self.close_notify_requested
            && !self.peer_closed
    }

    /// Turns rustls's connection into the session's own record layer: the traffic keys and
    /// sequence numbers, and rustls's `KernelConnection` for KeyUpdates and session tickets.
    /// Called in rustls's `WriteTraffic` state with nothing received, so nothing rustls holds
    /// is lost. Allocates (once per session).
    ///
    /// One thing rustls could hold and not say: the answer to a KeyUpdate that asks for one,
    /// which it keeps until the next data it encrypts. Only a server that sends a KeyUpdate in
    /// the flight of its own Finished (allowed, and sent by no server known) could make one
    /// wait here; the answer would then be lost and the server unable to read what follows, so
    /// the connection would fail and be replaced, nothing worse (no key or nonce is reused).
    fn take_records_over(&mut self) -> Result<(), TlsError> {
        let Some(connection) = self.connection.take() else {
            return Ok(());
        };
        self.version = connection.protocol_version();
        self.alpn = connection.alpn_protocol().map(<[u8]>::to_vec);
        let records = connection
            .dangerous_into_kernel_connection()
            .and_then(|(secrets, kernel)| Records::new(secrets, kernel));
        match records {
            Ok(records) => {
                self.records = Some(Box::new(records));
                // Data written while rustls still held the session and the outgoing buffer was
                // full goes out under the session's own record layer.
                self.pump_records();
                match &self.failed {
                    Some(error) => Err(error.clone()),
                    None => Ok(()),
                }
            }
            Err(error) => {
                let error = TlsError::Other {
                    message: format!("cannot take the TLS record layer over: {error}"),
                };
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Reads received records with the session's record layer: application data into
    /// `plaintext[written..]` while it fits (the rest of a record into the stash), alerts and
    /// post-handshake messages handled. Stops when `plaintext` is full, no complete record is
    /// left, the server closed, or on an error (kept in `failed`, with an alert queued for the
    /// server). Returns the bytes now in `plaintext`.
    fn read_records(&mut self, plaintext: &mut [u8], mut written: usize) -> usize {
        while written < plaintext.len() && !self.peer_closed && self.failed.is_none() {
            let Some(records) = self.records.as_deref_mut() else {
                break;
            };
            let header: [u8; 5] = match *self.incoming.filled() {
                [a, b, c, d, e, ..] => [a, b, c, d, e],
                _ => break,
            };
            let length = match records.check_header(&header) {
                Ok(length) => length,
                Err(failure) => {
                    self.fail_records(failure);
                    break;
                }
            };
            if self.incoming.len() < 5 + length {
                break;
            }
            let start = self.incoming.start;
            let record = &mut self.incoming.bytes[start..start + 5 + length];
            match records.receive(record) {
                Ok(Received::Data(range)) => {
                    let content = &record[range];
                    let room = plaintext.len() - written;
                    let (direct, rest) = content.split_at(content.len().min(room));
                    plaintext[written..written + direct.len()].copy_from_slice(direct);
                    written += direct.len();
                    // Cannot fail: the record leaves `incoming` as its rest enters the stash,
                    // and a record's plaintext is shorter than the record (`stash`'s
                    // invariant).
                    if !self.stash.push(rest) {
                        self.fail(TlsError::Other {
                            message: "received plaintext overflowed the session's buffer"
                                .to_owned(),
                        });
                        break;
                    }
                }
                Ok(Received::CloseNotify) => {
                    self.peer_closed = true;
                    // Whatever follows close_notify is ignored (RFC 8446 section 6.1).
                    let held = self.incoming.len();
                    self.incoming.consume(held);
                    break;
                }
                Ok(Received::Nothing) => {}
                Err(failure) => {
                    self.fail_records(failure);
                    break;
                }
            }
            self.incoming.consume(5 + length);
        }
        written
    }

    /// With the session's record layer: seals what is due into the outgoing buffer, as far as
    /// it has room: control records (a KeyUpdate owed, a `no_renegotiation` warning), then
    /// unsent plaintext, a record at a time, then a requested close_notify. An error is kept in
    /// `failed`.
    fn pump_records(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let Some(records) = self.records.as_deref_mut() else {
            return;
        };
        let result = (|| {
            if records.control_due() {
                self.outgoing.make_room(MAX_RECORD_WIRE_BYTES);
                let count = records.seal_control(self.outgoing.spare())?;
                self.outgoing.commit(count);
                if records.control_due() {
                    // No room yet: data must not overtake a KeyUpdate owed.
                    return Ok(());
                }
            }
            let mut taken = 0;
            while taken < self.unsent.len() {
                self.outgoing.make_room(MAX_RECORD_WIRE_BYTES);
                let spare = self.outgoing.spare();
                let piece = (self.unsent.len() - taken)
                    .min(MAX_RECORD_PLAINTEXT_BYTES)
                    .min(spare.len().saturating_sub(RECORD_OVERHEAD_BYTES));
                if piece == 0 {
                    break;
                }
                match records.seal_data(&self.unsent[taken..taken + piece], spare)? {
                    Some(count) => {
                        self.outgoing.commit(count);
                        taken += piece;
                    }
                    None => break,
                }
                if records.control_due() {
                    // The sending key reached its limit: renew it before the next record.
                    self.outgoing.make_room(MAX_RECORD_WIRE_BYTES);
                    let count = records.seal_control(self.outgoing.spare())?;
                    self.outgoing.commit(count);
                    if records.control_due() {
                        break;
                    }
                }
            }
            // Moves the rest to the front; the capacity is kept, nothing is allocated.
            self.unsent.drain(..taken);
            if self.close_notify_requested && !self.close_notify_queued && self.unsent.is_empty() {
                self.outgoing.make_room(MAX_RECORD_WIRE_BYTES);
                if records
                    .seal_alert(1, AlertDescription::CloseNotify, self.outgoing.spare())?
                    .map(|count| self.outgoing.commit(count))
                    .is_some()
                {
                    self.close_notify_queued = true;
                }
            }
            Ok::<(), Failure>(())
        })();
        if let Err(failure) = result {
            self.fail_records(failure);
        }
    }

    /// Records a failure of the session's record layer, and queues its alert for the server.
    fn fail_records(&mut self, failure: Failure) {
        let error = TlsError::from_rustls(
            failure.error,
            &self.server_name,
            false,
            &self.first_bytes[..self.first_bytes_len],
        );
        self.failed = Some(error);
        if let (Some(alert), Some(records)) = (failure.alert, self.records.as_deref_mut()) {
            self.outgoing.make_room(MAX_RECORD_WIRE_BYTES);
            // Best effort: the session is over whether or not the alert fits.
            if let Ok(Some(count)) = records.seal_alert(2, alert, self.outgoing.spare()) {
                self.outgoing.commit(count);
            }
        }
    }

    /// Records the failure and takes the alert rustls prepared for the server.
    ///
    /// The unbuffered API hands a queued record over at the start of the next call, before it
    /// looks at the received bytes again, so exactly one more call is made: a second one would
    /// parse the bytes that failed once more (and trip rustls's one-fatal-alert assertion).
    fn fail(&mut self, error: TlsError) -> TlsError {
        self.failed = Some(error.clone());
        let Some(connection) = self.connection.as_mut() else {
            return error;
        };
        let incoming = &mut self.incoming;
        let status =
            connection.process_tls_records(&mut incoming.bytes[incoming.start..incoming.end]);
        let discard = status.discard;
        if let Ok(ConnectionState::EncodeTlsData(mut encode)) = status.state {
            // Best effort: the session is over whether or not the alert fits.
            let _alert_is_a_courtesy = encode_handshake(&mut encode, &mut self.outgoing);
        }
        self.incoming.consume(discard);
        error
    }

    fn remember_first_bytes(&mut self, ciphertext: &[u8]) {
        if self.first_bytes_len < FIRST_BYTES {
            let take = ciphertext.len().min(FIRST_BYTES - self.first_bytes_len);
            self.first_bytes[self.first_bytes_len..self.first_bytes_len + take]
                .copy_from_slice(&ciphertext[..take]);
            self.first_bytes_len += take;
        }
    }
}

/// Copies the records of a `ReadTraffic` state into `plaintext[*written..]`, and what does
/// not fit into the stash. Stops once `plaintext` is full; with an empty `plaintext` it goes on.
fn read_records<Data>(
    traffic: &mut ReadTraffic<'_, '_, Data>,
    plaintext: &mut [u8],
    written: &mut usize,
    stash: &mut Window,
    discard: &mut usize,
) -> Step {
    let mut step = Step::Continue;
    while let Some(record) = traffic.next_record() {
        let record = match record {
            Ok(record) => record,
            Err(error) => return Step::RustlsFailed(error),
        };
        *discard += record.discard;
        let room = plaintext.len() - *written;
        let (direct, rest) = record.payload.split_at(record.payload.len().min(room));
        plaintext[*written..*written + direct.len()].copy_from_slice(direct);
        *written += direct.len();
        if !rest.is_empty() {
            if !stash.push(rest) {
                // The invariant on `stash` makes this unreachable; fail rather than lose data.
                return Step::Failed(TlsError::Other {
                    message: "received plaintext overflowed the session's buffer".to_owned(),
                });
            }
            if !plaintext.is_empty() {
                step = Step::Stop;
            }
        }
    }
    step
}

/// Encodes a handshake or alert record into the outgoing buffer.
fn encode_handshake<Data>(encode: &mut EncodeTlsData<'_, Data>, outgoing: &mut Window) -> Step {
    match encode.encode(outgoing.spare()) {
        Ok(count) => {
            outgoing.commit(count);
            return Step::Continue;
        }
        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
            outgoing.make_room(required_size);
        }
        Err(EncodeError::AlreadyEncoded) => return Step::Continue,
    }
    match encode.encode(outgoing.spare()) {
        Ok(count) => {
            outgoing.commit(count);
            Step::Continue
        }
        // Dropping the state would lose the record and break the session, so fail clearly.
        Err(error) => Step::Failed(TlsError::Other {
            message: format!(
                "{error}, but {} bytes of ciphertext are waiting: take them with write_tls",
                outgoing.len()
            ),
        }),
    }
}

/// Encrypts as much unsent plaintext as the outgoing buffer has room for, a record at a time.
fn encrypt_unsent<Data>(
    traffic: &mut WriteTraffic<'_, Data>,
    unsent: &mut Vec<u8>,
    outgoing: &mut Window,
) -> Step {
    let mut taken = 0;
    let mut step = Step::Continue;
    while taken < unsent.len() {
        outgoing.make_room(MAX_RECORD_WIRE_BYTES);
        let spare = outgoing.spare();
        let piece = (unsent.len() - taken)
            .min(MAX_RECORD_PLAINTEXT_BYTES)
            .min(spare.len().saturating_sub(RECORD_OVERHEAD_BYTES));
        if piece == 0 {
            break;
        }
        match traffic.encrypt(&unsent[taken..taken + piece], spare) {
            Ok(count) => {
                outgoing.commit(count);
                taken += piece;
            }
            Err(EncryptError::InsufficientSize(_)) => break,
            Err(error) => {
                step = Step::Failed(TlsError::Other {
                    message: error.to_string(),
                });
                break;
            }
        }
    }
    // Moves the rest to the front; the capacity is kept, nothing is allocated.
    unsent.drain(..taken);
    step
}

/// A buffer used as a queue: bytes are appended at `end` and taken from `start`.
struct Window {
    bytes: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Window {
    fn new(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn filled(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    /// The free bytes after the filled ones.
    fn spare(&mut self) -> &mut [u8] {
        &mut self.bytes[self.end..]
    }

    fn commit(&mut self, count: usize) {
        self.end = (self.end + count).min(self.bytes.len());
    }

    fn consume(&mut self, count: usize) {
        self.start = (self.start + count).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Moves the filled bytes to the front when fewer than `wanted` bytes are free after them.
    /// Rare: only a partial record or unread records are ever left behind.
    fn make_room(&mut self, wanted: usize) {
        if self.bytes.len() - self.end < wanted && self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Copies as much as fits into `out` and takes it out of the window.
    fn take_into(&mut self, out: &mut [u8]) -> usize {
        let count = self.len().min(out.len());
        out[..count].copy_from_slice(&self.bytes[self.start..self.start + count]);
        self.consume(count);
        count
    }

    /// Appends `bytes`; false (and nothing appended) if they do not fit.
    fn push(&mut self, bytes: &[u8]) -> bool {
        self.make_room(bytes.len());
        let spare = self.spare();
        if bytes.len() > spare.len() {
            return false;
        }
        spare[..bytes.len()].copy_from_slice(bytes);
        self.commit(bytes.len());
        true
    }
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .field("handshaking", &self.is_handshaking())
            .field("protocol_version", &self.protocol_version())
            .field("incoming_bytes", &self.incoming.len())
            .field("outgoing_bytes", &self.outgoing.len())
            .field("peer_closed", &self.peer_closed)
            .field("transport_ended", &self.transport_ended)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_queues_and_compacts() {
        let mut window = Window::new(8);
        window.spare()[..6].copy_from_slice(b"abcdef");
        window.commit(6);
        let mut out = [0_u8; 4];
        assert_eq!(window.take_into(&mut out), 4);
        assert_eq!(&out, b"abcd");
        window.make_room(5);
        assert_eq!(window.filled(), b"ef");
        assert_eq!(window.spare().len(), 6);
        assert_eq!(window.take_into(&mut out), 2);
        assert!(window.is_empty());
        assert!(window.push(b"1234567"));
        assert!(window.push(b"8"));
        assert_eq!(window.len(), 8);
        assert!(!window.push(b"x"), "no room");
        assert_eq!(window.take_into(&mut out), 4);
        assert!(
            window.push(b"abcd"),
            "room made by moving the rest to the front"
        );
        assert_eq!(window.filled(), b"5678abcd");
    }
}
