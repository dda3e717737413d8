//! Measurement prototype: the read path over rustls's unbuffered API, to compare with
//! `client.rs`. Handshake and decryption only.

use super::client::ReadOutcome;
use super::error::TlsError;
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::unbuffered::{ConnectionState, EncodeError};
use rustls::ClientConfig;
use std::sync::Arc;

/// Room for the largest handshake message rustls accepts (64 KiB) plus one record.
const INCOMING_CAPACITY: usize = 64 * 1024 + 16 * 1024 + 512;

pub struct UnbufferedTlsClient {
    connection: UnbufferedClientConnection,
    server_name: ServerName<'static>,
    incoming: Box<[u8]>,
    incoming_start: usize,
    incoming_end: usize,
    outgoing: Vec<u8>,
    handshaking: bool,
    peer_closed: bool,
}

impl UnbufferedTlsClient {
    pub fn new(
        config: Arc<ClientConfig>,
        server_name: ServerName<'static>,
    ) -> Result<Self, TlsError> {
        let connection =
            UnbufferedClientConnection::new(config, server_name.clone()).map_err(|error| {
                TlsError::Other {
                    message: error.to_string(),
                }
            })?;
        let mut client = Self {
            connection,
            server_name,
            incoming: vec![0; INCOMING_CAPACITY].into_boxed_slice(),
            incoming_start: 0,
            incoming_end: 0,
            outgoing: Vec::with_capacity(16 * 1024),
            handshaking: true,
            peer_closed: false,
        };
        client.drive(&mut [])?;
        Ok(client)
    }

    pub fn feed_tls(&mut self, ciphertext: &[u8]) -> Result<usize, TlsError> {
        if self.incoming_end + ciphertext.len() > self.incoming.len() && self.incoming_start > 0 {
            self.incoming
                .copy_within(self.incoming_start..self.incoming_end, 0);
            self.incoming_end -= self.incoming_start;
            self.incoming_start = 0;
        }
        let take = ciphertext
            .len()
            .min(self.incoming.len() - self.incoming_end);
        self.incoming[self.incoming_end..self.incoming_end + take]
            .copy_from_slice(&ciphertext[..take]);
        self.incoming_end += take;
        if self.handshaking {
            self.drive(&mut [])?;
        }
        Ok(take)
    }

    pub fn read_plaintext(&mut self, plaintext: &mut [u8]) -> Result<ReadOutcome, TlsError> {
        let written = self.drive(plaintext)?;
        if written > 0 {
            Ok(ReadOutcome::Data(written))
        } else if self.peer_closed {
            Ok(ReadOutcome::CloseNotify)
        } else {
            Ok(ReadOutcome::WouldBlock)
        }
    }

    pub fn write_tls_to_vec(&mut self, ciphertext: &mut Vec<u8>) -> usize {
        let count = self.outgoing.len();
        ciphertext.append(&mut self.outgoing);
        count
    }

    pub fn is_handshaking(&self) -> bool {
        self.handshaking
    }

    /// Processes buffered records, copying application data into `plaintext` while whole
    /// records fit; returns how many plaintext bytes were written.
    fn drive(&mut self, plaintext: &mut [u8]) -> Result<usize, TlsError> {
        let mut written = 0;
        loop {
            let status = self
                .connection
                .process_tls_records(&mut self.incoming[self.incoming_start..self.incoming_end]);
            let mut discard = status.discard;
            let state = match status.state {
                Ok(state) => state,
                Err(error) => {
                    self.incoming_start += discard;
                    return Err(TlsError::from_rustls(
                        error,
                        &self.server_name,
                        self.handshaking,
                        &[],
                    ));
                }
            };
            let mut stop = false;
            match state {
                ConnectionState::ReadTraffic(mut traffic) => {
                    while let Some(length) = traffic.peek_len() {
                        if length.get() > plaintext.len() - written {
                            stop = true;
                            break;
                        }
                        match traffic.next_record() {
                            Some(Ok(record)) => {
                                plaintext[written..written + record.payload.len()]
                                    .copy_from_slice(record.payload);
                                written += record.payload.len();
                                discard += record.discard;
                            }
                            Some(Err(error)) => {
                                return Err(TlsError::Other {
                                    message: error.to_string(),
                                })
                            }
                            None => break,
                        }
                    }
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    let start = self.outgoing.len();
                    self.outgoing.resize(start + 16 * 1024 + 512, 0);
                    match encode.encode(&mut self.outgoing[start..]) {
                        Ok(count) => self.outgoing.truncate(start + count),
                        Err(EncodeError::InsufficientSize(size)) => {
                            self.outgoing.resize(start + size.required_size, 0);
                            let count =
                                encode
                                    .encode(&mut self.outgoing[start..])
                                    .map_err(|error| TlsError::Other {
                                        message: error.to_string(),
                                    })?;
                            self.outgoing.truncate(start + count);
                        }
                        Err(error) => {
                            return Err(TlsError::Other {
                                message: error.to_string(),
                            })
                        }
                    }
                }
                ConnectionState::TransmitTlsData(transmit) => transmit.done(),
                ConnectionState::BlockedHandshake => stop = true,
                ConnectionState::WriteTraffic(_) => {
                    self.handshaking = false;
                    stop = true;
                }
                ConnectionState::PeerClosed => self.peer_closed = true,
                ConnectionState::Closed => {
                    self.peer_closed = true;
                    stop = true;
                }
                _ => stop = true,
            }
            self.incoming_start += discard;
            if stop {
                return Ok(written);
            }
        }
    }
}
