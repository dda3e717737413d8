//! One TLS client session, driven with byte buffers by the network thread's poll loop.

use super::error::{looks_like_tls, TlsError};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ProtocolVersion};
use std::io::{self, Read, Write};
use std::sync::Arc;

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
    /// The server sent close_notify and all it sent has been read: the stream ended cleanly
    /// and nothing more will come.
    CloseNotify,
    /// The transport ended ([`TlsClient::feed_eof`]) without close_notify, after all the
    /// plaintext was read: the last message may be cut short.
    Eof,
}

/// A TLS client session over byte buffers: no socket, no I/O, no blocking.
///
/// The owner of the socket moves bytes in both directions:
/// - received ciphertext goes in through [`feed_tls`](Self::feed_tls) (and the end of the
///   stream through [`feed_eof`](Self::feed_eof)); plaintext comes out of
///   [`read_plaintext`](Self::read_plaintext);
/// - plaintext to send goes in through [`write_plaintext`](Self::write_plaintext); ciphertext
///   to send comes out of [`write_tls`](Self::write_tls) or
///   [`write_tls_to_vec`](Self::write_tls_to_vec) while [`wants_write`](Self::wants_write).
///
/// After an error the session is dead: the same error comes back from `feed_tls`, and any
/// alert rustls queued for the server can still be taken with `write_tls` before the socket
/// is closed.
pub struct TlsClient {
    connection: ClientConnection,
    server_name: ServerName<'static>,
    first_bytes: [u8; FIRST_BYTES],
    first_bytes_len: usize,
    transport_ended: bool,
}

impl TlsClient {
    /// Starts a session; the ClientHello is ready for [`write_tls`](Self::write_tls) at once.
    ///
    /// `server_name` is sent as SNI (unless it is an IP address) and the certificate must be
    /// valid for it; [`server_name`](super::server_name) makes it from a venue's host and
    /// `tls.sni`.
    pub fn new(
        config: Arc<ClientConfig>,
        server_name: ServerName<'static>,
    ) -> Result<Self, TlsError> {
        let connection = ClientConnection::new(config, server_name.clone()).map_err(|error| {
            TlsError::Other {
                message: error.to_string(),
            }
        })?;
        Ok(Self {
            connection,
            server_name,
            first_bytes: [0; FIRST_BYTES],
            first_bytes_len: 0,
            transport_ended: false,
        })
    }

    /// Takes ciphertext received from the server and processes every complete record in it.
    ///
    /// Returns how many bytes were taken. Fewer than given means the decrypted plaintext waiting
    /// to be read has reached rustls's limit (16 KiB): read it with
    /// [`read_plaintext`](Self::read_plaintext), then feed the rest. After the server's
    /// close_notify everything is taken and ignored (RFC 8446 section 6.1).
    pub fn feed_tls(&mut self, ciphertext: &[u8]) -> Result<usize, TlsError> {
        self.remember_first_bytes(ciphertext);
        let mut rest = ciphertext;
        while !rest.is_empty() {
            match self.connection.read_tls(&mut rest) {
                // rustls takes nothing once close_notify has arrived.
                Ok(0) => return Ok(ciphertext.len()),
                Ok(_) => {
                    self.process()?;
                }
                Err(read_error) => {
                    // Either the plaintext limit is reached (back-pressure, not an error) or
                    // the session has failed; processing again tells which.
                    let state = self.process()?;
                    if state.plaintext_bytes_to_read() > 0 {
                        break;
                    }
                    return Err(TlsError::Other {
                        message: read_error.to_string(),
                    });
                }
            }
        }
        Ok(ciphertext.len() - rest.len())
    }

    /// Tells the session that the transport has ended (a read of zero bytes).
    ///
    /// During the handshake this is the error to report; afterwards the plaintext already
    /// received can still be read, then [`read_plaintext`](Self::read_plaintext) gives
    /// [`ReadOutcome::Eof`] (or [`ReadOutcome::CloseNotify`] if the server closed cleanly).
    pub fn feed_eof(&mut self) -> Result<(), TlsError> {
        self.transport_ended = true;
        // An empty read is how rustls learns of the end; when it refuses because plaintext is
        // waiting, `transport_ended` carries the fact to `read_plaintext` instead.
        let _refused_while_plaintext_waits = self.connection.read_tls(&mut io::empty());
        if self.connection.is_handshaking() {
            let seen = self.first_bytes();
            return Err(if looks_like_tls(seen) {
                TlsError::PeerClosedDuringHandshake
            } else {
                TlsError::NotTls {
                    first_bytes: seen.escape_ascii().to_string(),
                }
            });
        }
        Ok(())
    }

    /// Copies decrypted plaintext into `plaintext`. Give it room for at least one record
    /// (16 KiB) so that one call drains what one [`feed_tls`](Self::feed_tls) produced.
    pub fn read_plaintext(&mut self, plaintext: &mut [u8]) -> Result<ReadOutcome, TlsError> {
        match self.connection.reader().read(plaintext) {
            Ok(0) if !plaintext.is_empty() => Ok(ReadOutcome::CloseNotify),
            Ok(written) => Ok(ReadOutcome::Data(written)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                if self.transport_ended {
                    Ok(ReadOutcome::Eof)
                } else {
                    Ok(ReadOutcome::WouldBlock)
                }
            }
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(ReadOutcome::Eof),
            Err(error) => Err(TlsError::Other {
                message: error.to_string(),
            }),
        }
    }

    /// Encrypts application data (a WebSocket upgrade request, frames). Returns how many bytes
    /// were taken: fewer than given when 64 KiB of ciphertext is already waiting to be sent,
    /// so take it with [`write_tls`](Self::write_tls) and write the rest. Data written during
    /// the handshake is held and sent as soon as the handshake allows.
    pub fn write_plaintext(&mut self, plaintext: &[u8]) -> Result<usize, TlsError> {
        self.connection
            .writer()
            .write(plaintext)
            .map_err(|error| TlsError::Other {
                message: error.to_string(),
            })
    }

    /// Moves pending ciphertext (handshake, alerts, encrypted data) into `ciphertext`; returns
    /// how many bytes. What does not fit stays for the next call.
    pub fn write_tls(&mut self, ciphertext: &mut [u8]) -> usize {
        let mut window = ciphertext;
        let mut written = 0;
        while self.connection.wants_write() && !window.is_empty() {
            match self.connection.write_tls(&mut window) {
                Ok(0) | Err(_) => break,
                Ok(count) => written += count,
            }
        }
        written
    }

    /// Appends all pending ciphertext to `ciphertext`; returns how many bytes.
    pub fn write_tls_to_vec(&mut self, ciphertext: &mut Vec<u8>) -> usize {
        let mut written = 0;
        while self.connection.wants_write() {
            match self.connection.write_tls(ciphertext) {
                Ok(0) | Err(_) => break,
                Ok(count) => written += count,
            }
        }
        written
    }

    /// Whether ciphertext is waiting to be sent.
    pub fn wants_write(&self) -> bool {
        self.connection.wants_write()
    }

    /// Whether the handshake is still running. It turns false as soon as the session can carry
    /// data in both directions, possibly while the client's last handshake message still waits
    /// in [`write_tls`](Self::write_tls).
    pub fn is_handshaking(&self) -> bool {
        self.connection.is_handshaking()
    }

    /// Queues a close_notify alert; send it with [`write_tls`](Self::write_tls), then close
    /// the socket. Nothing more can be written afterwards.
    pub fn send_close_notify(&mut self) {
        self.connection.send_close_notify();
    }

    /// The name the certificate is verified against.
    pub fn server_name(&self) -> &ServerName<'static> {
        &self.server_name
    }

    /// The negotiated protocol version, once the server has chosen it.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.connection.protocol_version()
    }

    /// The ALPN protocol the server chose, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.connection.alpn_protocol()
    }

    fn process(&mut self) -> Result<rustls::IoState, TlsError> {
        self.connection.process_new_packets().map_err(|error| {
            TlsError::from_rustls(
                error,
                &self.server_name,
                self.connection.is_handshaking(),
                &self.first_bytes[..self.first_bytes_len],
            )
        })
    }

    fn first_bytes(&self) -> &[u8] {
        &self.first_bytes[..self.first_bytes_len]
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

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .field("handshaking", &self.is_handshaking())
            .field("protocol_version", &self.protocol_version())
            .field("transport_ended", &self.transport_ended)
            .finish_non_exhaustive()
    }
}
