//! The record layer after the handshake: application data, alerts and post-handshake messages
//! protected and unprotected in place, in the session's own buffers, so that steady-state
//! traffic allocates nothing in either direction (rustls 0.23's own record layer moves every
//! received record's plaintext into a `Vec` and encrypts every sent record into one).
//!
//! rustls still owns what is not per-record: the handshake, the key schedule and the session
//! cache. Once the handshake is over the session turns its `UnbufferedClientConnection` into a
//! [`KernelConnection`] (the interface rustls offers for kTLS) with the traffic keys and
//! sequence numbers; it asks that for the next keys on a TLS 1.3 KeyUpdate and hands it the
//! server's NewSessionTickets, so resumption works as before. Those are rare and may allocate.
//!
//! What this file does is what rustls's record layer did, and checks what rustls checked:
//! - TLS 1.3 (RFC 8446 section 5): the AEAD over the record with the header as additional data,
//!   the nonce the IV XOR the sequence number, the inner content type after the content and any
//!   zero padding; outer type application_data only.
//! - TLS 1.2 (RFC 5246 section 6.2.3.3, RFC 5288, RFC 7905): the additional data the sequence
//!   number, type, version and plaintext length; AES-GCM with an 8-byte explicit nonce (rustls's
//!   own construction on sending: the IV XOR the sequence number), ChaCha20-Poly1305 with the
//!   IV XOR the sequence number.
//! - Limits: a record longer than the version allows is `record_overflow`, a plaintext over
//!   2^14 bytes too; at most 4 warning alerts (none but user_canceled in TLS 1.3), 32 KeyUpdate
//!   requests between two application data records, one renegotiation request (refused with a
//!   `no_renegotiation` warning) and 32 empty records in a row, as rustls allows.
//! - A KeyUpdate must end its record and no handshake fragment may wait when it arrives; a
//!   KeyUpdate that asks for one is answered before the next data; the sending keys are also
//!   renewed (TLS 1.3) before the suite's confidentiality limit, or the session ends (TLS 1.2).

use rustls::client::ClientConnectionData;
use rustls::crypto::cipher::{AeadKey, Iv};
use rustls::kernel::KernelConnection;
use rustls::{
    AlertDescription, ConnectionTrafficSecrets, ContentType, Error, ExtractedSecrets,
    HandshakeType, InvalidMessage, PeerMisbehaved, ProtocolVersion, SupportedCipherSuite,
};
use std::ops::Range;

use ring::aead;

/// The AEAD tag every suite rustls offers appends (AES-GCM and ChaCha20-Poly1305).
const TAG_BYTES: usize = 16;
/// The explicit nonce of TLS 1.2 AES-GCM records.
const EXPLICIT_NONCE_BYTES: usize = 8;
/// The largest plaintext of a record (RFC 8446 section 5.1, RFC 5246 section 6.2.1).
const MAX_PLAINTEXT: usize = 1 << 14;
/// The largest protected record body: TLS 1.3 allows 256 bytes of expansion, TLS 1.2 2048.
const MAX_BODY_TLS13: usize = MAX_PLAINTEXT + 256;
const MAX_BODY_TLS12: usize = MAX_PLAINTEXT + 2048;
/// The largest post-handshake message kept while its fragments arrive (what rustls accepts).
const MAX_HANDSHAKE_MESSAGE: usize = 0xffff;
/// rustls's sequence number limit: past it a session would reuse nonces.
const SEQ_SOFT_LIMIT: u64 = 0xffff_ffff_ffff_0000;

/// The length of the record that carries `content` bytes.
const fn sealed_len(tls13: bool, explicit_nonce: bool, content: usize) -> usize {
    5 + content
        + TAG_BYTES
        + if tls13 { 1 } else { 0 }
        + if explicit_nonce {
            EXPLICIT_NONCE_BYTES
        } else {
            0
        }
}

/// A record layer failure: the error to report and the alert to send the server, if any.
pub(super) struct Failure {
    pub error: Error,
    pub alert: Option<AlertDescription>,
}

impl Failure {
    fn new(error: impl Into<Error>, alert: AlertDescription) -> Failure {
        Failure {
            error: error.into(),
            alert: Some(alert),
        }
    }

    /// A failure the server reported itself, or one no alert describes better than silence.
    fn silent(error: impl Into<Error>) -> Failure {
        Failure {
            error: error.into(),
            alert: None,
        }
    }
}

/// What one received record held, once unprotected in place.
pub(super) enum Received {
    /// Application data at this range of the record (possibly empty).
    Data(Range<usize>),
    /// The server's close_notify: nothing after it counts.
    CloseNotify,
    /// Nothing for the caller (a warning alert, a session ticket, a KeyUpdate).
    Nothing,
}

/// One direction's key, IV and sequence number.
struct Cipher {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    /// TLS 1.2 AES-GCM: an explicit nonce travels in each record.
    explicit_nonce: bool,
}

impl Cipher {
    fn new(secrets: ConnectionTrafficSecrets, seq: u64, tls13: bool) -> Result<Cipher, Error> {
        let (algorithm, key, iv, gcm): (_, AeadKey, Iv, bool) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, true),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, true),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, false)
            }
            _ => {
                return Err(Error::General(
                    "the negotiated cipher suite has no record protection here".into(),
                ))
            }
        };
        let key = aead::UnboundKey::new(algorithm, key.as_ref())
            .map_err(|_| Error::General("a traffic key of the wrong length".into()))?;
        let iv: [u8; aead::NONCE_LEN] = iv
            .as_ref()
            .try_into()
            .map_err(|_| Error::General("a traffic IV of the wrong length".into()))?;
        Ok(Cipher {
            key: aead::LessSafeKey::new(key),
            iv,
            seq,
            explicit_nonce: gcm && !tls13,
        })
    }

    /// The IV XOR the sequence number (RFC 8446 section 5.3; rustls's TLS 1.2 construction).
    fn nonce(&self, seq: u64) -> [u8; aead::NONCE_LEN] {
        let mut nonce = self.iv;
        for (byte, seq_byte) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *byte ^= seq_byte;
        }
        nonce
    }

    /// The next sequence number, or the end of the session before one would repeat.
    fn next_seq(&mut self) -> Result<u64, Failure> {
        let seq = self.seq;
        if seq >= SEQ_SOFT_LIMIT {
            return Err(Failure::silent(Error::EncryptError));
        }
        self.seq += 1;
        Ok(seq)
    }

    /// Unprotects `record` (header included) in place; returns the content type and the
    /// content's range within `record`.
    fn open(&mut self, record: &mut [u8], tls13: bool) -> Result<(u8, Range<usize>), Failure> {
        let header: [u8; 5] = [record[0], record[1], record[2], record[3], record[4]];
        let seq = self
            .next_seq()
            .map_err(|_| Failure::silent(Error::DecryptError))?;
        let body = &mut record[5..];
        if tls13 {
            if body.len() < TAG_BYTES + 1 {
                return Err(Failure::new(
                    Error::DecryptError,
                    AlertDescription::BadRecordMac,
                ));
            }
            let nonce = aead::Nonce::assume_unique_for_key(self.nonce(seq));
            let inner = self
                .key
                .open_in_place(nonce, aead::Aad::from(header), body)
                .map_err(|_| Failure::new(Error::DecryptError, AlertDescription::BadRecordMac))?;
            // The content type is the last byte that is not padding (RFC 8446 section 5.4).
            let Some(end) = inner.iter().rposition(|&byte| byte != 0) else {
                return Err(Failure::new(
                    PeerMisbehaved::IllegalTlsInnerPlaintext,
                    AlertDescription::UnexpectedMessage,
                ));
            };
            if end > MAX_PLAINTEXT {
                return Err(Failure::new(
                    Error::PeerSentOversizedRecord,
                    AlertDescription::RecordOverflow,
                ));
            }
            Ok((inner[end], 5..5 + end))
        } else {
            let explicit = if self.explicit_nonce {
                EXPLICIT_NONCE_BYTES
            } else {
                0
            };
            if body.len() < explicit + TAG_BYTES {
                return Err(Failure::new(
                    Error::DecryptError,
                    AlertDescription::BadRecordMac,
                ));
            }
            let length = body.len() - explicit - TAG_BYTES;
            let nonce = if self.explicit_nonce {
                let mut nonce = [0_u8; aead::NONCE_LEN];
                nonce[..4].copy_from_slice(&self.iv[..4]);
                nonce[4..].copy_from_slice(&body[..EXPLICIT_NONCE_BYTES]);
                nonce
            } else {
                self.nonce(seq)
            };
            let aad = tls12_aad(seq, header[0], [header[1], header[2]], length);
            self.key
                .open_in_place(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(aad),
                    &mut body[explicit..],
                )
                .map_err(|_| Failure::new(Error::DecryptError, AlertDescription::BadRecordMac))?;
            if length > MAX_PLAINTEXT {
                return Err(Failure::new(
                    Error::PeerSentOversizedRecord,
                    AlertDescription::RecordOverflow,
                ));
            }
            Ok((header[0], 5 + explicit..5 + explicit + length))
        }
    }

    /// Protects `content` of `content_type` as one record at the start of `out`; returns its
    /// length, or `None` (nothing written, no sequence number used) when `out` is too short.
    fn seal(
        &mut self,
        tls13: bool,
        content_type: u8,
        content: &[u8],
        out: &mut [u8],
    ) -> Result<Option<usize>, Failure> {
        let total = sealed_len(tls13, self.explicit_nonce, content.len());
        if out.len() < total {
            return Ok(None);
        }
        let seq = self.next_seq()?;
        let explicit = if self.explicit_nonce {
            EXPLICIT_NONCE_BYTES
        } else {
            0
        };
        let inner = content.len() + usize::from(tls13);
        let body = u16::try_from(total - 5).map_err(|_| Failure::silent(Error::EncryptError))?;
        let outer_type = if tls13 {
            u8::from(ContentType::ApplicationData)
        } else {
            content_type
        };
        let [high, low] = body.to_be_bytes();
        let header = [outer_type, 3, 3, high, low];
        out[..5].copy_from_slice(&header);
        let nonce = self.nonce(seq);
        out[5..5 + explicit].copy_from_slice(&nonce[4..4 + explicit]);
        let start = 5 + explicit;
        out[start..start + content.len()].copy_from_slice(content);
        if tls13 {
            out[start + content.len()] = content_type;
        }
        let nonce = aead::Nonce::assume_unique_for_key(nonce);
        let sealed = &mut out[start..start + inner];
        let tag = if tls13 {
            self.key
                .seal_in_place_separate_tag(nonce, aead::Aad::from(header), sealed)
        } else {
            let aad = tls12_aad(seq, content_type, [3, 3], content.len());
            self.key
                .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), sealed)
        }
        .map_err(|_| Failure::silent(Error::EncryptError))?;
        out[start + inner..total].copy_from_slice(tag.as_ref());
        Ok(Some(total))
    }
}

/// TLS 1.2's additional data: sequence number, type, version, plaintext length.
fn tls12_aad(seq: u64, content_type: u8, version: [u8; 2], length: usize) -> [u8; 13] {
    let mut aad = [0_u8; 13];
    aad[..8].copy_from_slice(&seq.to_be_bytes());
    aad[8] = content_type;
    aad[9..11].copy_from_slice(&version);
    aad[11..13].copy_from_slice(&(length as u16).to_be_bytes());
    aad
}

/// The record layer of one session after its handshake.
pub(super) struct Records {
    kernel: KernelConnection<ClientConnectionData>,
    tls13: bool,
    tx: Cipher,
    rx: Cipher,
    /// Records sent under one key before it is renewed (TLS 1.3) or the session ends.
    tx_limit: u64,
    /// A post-handshake message whose fragments are arriving (empty nearly always, so its
    /// allocation waits for the first fragmented message).
    handshake: Vec<u8>,
    /// A KeyUpdate is owed to the server before the next application data.
    key_update_due: bool,
    /// A `no_renegotiation` warning is owed to the server (TLS 1.2 HelloRequest).
    no_renegotiation_due: bool,
    warning_alerts_left: u8,
    key_update_requests_left: u8,
    renegotiation_requests_left: u8,
    empty_records_left: u8,
}

const KEY_UPDATE_REQUESTS: u8 = 32;
const EMPTY_RECORDS: u8 = 32;

impl Records {
    pub(super) fn new(
        secrets: ExtractedSecrets,
        kernel: KernelConnection<ClientConnectionData>,
    ) -> Result<Records, Error> {
        let tls13 = kernel.protocol_version() == ProtocolVersion::TLSv1_3;
        let limit = match kernel.negotiated_cipher_suite() {
            SupportedCipherSuite::Tls13(suite) => suite.common.confidentiality_limit,
            SupportedCipherSuite::Tls12(suite) => suite.common.confidentiality_limit,
        };
        let (tx_seq, tx) = secrets.tx;
        let (rx_seq, rx) = secrets.rx;
        Ok(Records {
            tls13,
            tx: Cipher::new(tx, tx_seq, tls13)?,
            rx: Cipher::new(rx, rx_seq, tls13)?,
            tx_limit: limit.min(SEQ_SOFT_LIMIT),
            kernel,
            handshake: Vec::new(),
            key_update_due: false,
            no_renegotiation_due: false,
            warning_alerts_left: 4,
            key_update_requests_left: KEY_UPDATE_REQUESTS,
            renegotiation_requests_left: 1,
            empty_records_left: EMPTY_RECORDS,
        })
    }

    /// The largest record body the server may send.
    pub(super) fn max_body(&self) -> usize {
        if self.tls13 {
            MAX_BODY_TLS13
        } else {
            MAX_BODY_TLS12
        }
    }

    /// Whether a control record (a KeyUpdate, a warning) waits to be sent.
    pub(super) fn control_due(&self) -> bool {
        self.key_update_due || self.no_renegotiation_due || self.tx.seq >= self.tx_limit
    }

    /// Checks a record header before its body has arrived: the content type and version a
    /// record may have now, and its length.
    pub(super) fn check_header(&self, header: &[u8; 5]) -> Result<usize, Failure> {
        let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if header[1] != 3 {
            return Err(Failure::new(
                InvalidMessage::UnknownProtocolVersion,
                AlertDescription::DecodeError,
            ));
        }
        let expected = if self.tls13 {
            matches!(ContentType::from(header[0]), ContentType::ApplicationData)
        } else {
            matches!(
                ContentType::from(header[0]),
                ContentType::ApplicationData | ContentType::Alert | ContentType::Handshake
            )
        };
        if !expected {
            return Err(Failure::new(
                Error::InappropriateMessage {
                    expect_types: vec![ContentType::ApplicationData],
                    got_type: ContentType::from(header[0]),
                },
                AlertDescription::UnexpectedMessage,
            ));
        }
        if length > self.max_body() {
            return Err(Failure::new(
                Error::PeerSentOversizedRecord,
                AlertDescription::RecordOverflow,
            ));
        }
        Ok(length)
    }

    /// Unprotects one whole record (header included) in place and acts on what it holds.
    pub(super) fn receive(&mut self, record: &mut [u8]) -> Result<Received, Failure> {
        let (content_type, range) = self.rx.open(record, self.tls13)?;
        let content = &record[range.clone()];
        let content_type = ContentType::from(content_type);
        if !self.handshake.is_empty() && content_type != ContentType::Handshake {
            // Handshake fragments must not be interleaved with other records.
            return Err(Failure::new(
                PeerMisbehaved::KeyEpochWithPendingFragment,
                AlertDescription::UnexpectedMessage,
            ));
        }
        match content_type {
            ContentType::ApplicationData => {
                self.key_update_requests_left = KEY_UPDATE_REQUESTS;
                if content.is_empty() {
                    self.empty_records_left =
                        self.empty_records_left.checked_sub(1).ok_or_else(|| {
                            Failure::new(
                                PeerMisbehaved::TooManyEmptyFragments,
                                AlertDescription::UnexpectedMessage,
                            )
                        })?;
                } else {
                    self.empty_records_left = EMPTY_RECORDS;
                }
                Ok(Received::Data(range))
            }
            ContentType::Alert => self.alert(content),
            ContentType::Handshake if !content.is_empty() => {
                self.handshake_content(content)?;
                Ok(Received::Nothing)
            }
            other => Err(Failure::new(
                Error::InappropriateMessage {
                    expect_types: vec![ContentType::ApplicationData],
                    got_type: other,
                },
                AlertDescription::UnexpectedMessage,
            )),
        }
    }

    fn alert(&mut self, content: &[u8]) -> Result<Received, Failure> {
        let &[level, description] = content else {
            return Err(Failure::new(
                InvalidMessage::MessageTooShort,
                AlertDescription::DecodeError,
            ));
        };
        let description = AlertDescription::from(description);
        match level {
            1 | 2 if description == AlertDescription::CloseNotify => Ok(Received::CloseNotify),
            1 => {
                self.warning_alerts_left = self
                    .warning_alerts_left
                    .checked_sub(1)
                    .ok_or_else(|| Failure::silent(PeerMisbehaved::TooManyWarningAlertsReceived))?;
                // Warnings are outlawed in TLS 1.3, except for user_canceled.
                if self.tls13 && description != AlertDescription::UserCanceled {
                    return Err(Failure::new(
                        Error::AlertReceived(description),
                        AlertDescription::DecodeError,
                    ));
                }
                Ok(Received::Nothing)
            }
            2 => Err(Failure::silent(Error::AlertReceived(description))),
            _ => Err(Failure::new(
                Error::AlertReceived(description),
                AlertDescription::IllegalParameter,
            )),
        }
    }

    /// The content of a handshake record: whole messages handled, a partial one kept.
    fn handshake_content(&mut self, content: &[u8]) -> Result<(), Failure> {
        if self.handshake.is_empty() {
            let used = self.handshake_messages(content)?;
            self.handshake.extend_from_slice(&content[used..]);
        } else {
            if self.handshake.len() + content.len() > MAX_HANDSHAKE_MESSAGE + 4 {
                return Err(Failure::new(
                    InvalidMessage::HandshakePayloadTooLarge,
                    AlertDescription::DecodeError,
                ));
            }
            let mut joined = std::mem::take(&mut self.handshake);
            joined.extend_from_slice(content);
            let result = self.handshake_messages(&joined);
            if let Ok(used) = result {
                joined.drain(..used);
            }
            self.handshake = joined;
            result?;
        }
        Ok(())
    }

    /// Handles the whole messages at the start of `data`; returns the bytes they took.
    fn handshake_messages(&mut self, data: &[u8]) -> Result<usize, Failure> {
        let mut used = 0;
        while let [kind, a, b, c, ..] = data[used..] {
            let length = u32::from_be_bytes([0, a, b, c]) as usize;
            if length > MAX_HANDSHAKE_MESSAGE {
                return Err(Failure::new(
                    InvalidMessage::HandshakePayloadTooLarge,
                    AlertDescription::DecodeError,
                ));
            }
            let Some(body) = data.get(used + 4..used + 4 + length) else {
                break;
            };
            used += 4 + length;
            let aligned = used == data.len();
            self.handshake_message(HandshakeType::from(kind), body, aligned)?;
        }
        Ok(used)
    }

    fn handshake_message(
        &mut self,
        kind: HandshakeType,
        body: &[u8],
        aligned: bool,
    ) -> Result<(), Failure> {
        match (self.tls13, kind) {
            (true, HandshakeType::NewSessionTicket) => self
                .kernel
                .handle_new_session_ticket(body)
                .map_err(|error| Failure::new(error, AlertDescription::DecodeError)),
            (true, HandshakeType::KeyUpdate) => {
                let &[request] = body else {
                    return Err(Failure::new(
                        InvalidMessage::InvalidKeyUpdate,
                        AlertDescription::DecodeError,
                    ));
                };
                if request > 1 {
                    return Err(Failure::new(
                        InvalidMessage::InvalidKeyUpdate,
                        AlertDescription::IllegalParameter,
                    ));
                }
                // The new keys start with the next record: nothing may follow in this one.
                if !aligned {
                    return Err(Failure::new(
                        PeerMisbehaved::KeyEpochWithPendingFragment,
                        AlertDescription::UnexpectedMessage,
                    ));
                }
                self.key_update_requests_left = self
                    .key_update_requests_left
                    .checked_sub(1)
                    .ok_or_else(|| Failure::silent(PeerMisbehaved::TooManyKeyUpdateRequests))?;
                let (seq, secrets) = self
                    .kernel
                    .update_rx_secret()
                    .map_err(|error| Failure::new(error, AlertDescription::InternalError))?;
                self.rx = Cipher::new(secrets, seq, true)
                    .map_err(|error| Failure::new(error, AlertDescription::InternalError))?;
                if request == 1 {
                    self.key_update_due = true;
                }
                Ok(())
            }
            (false, HandshakeType::HelloRequest) if body.is_empty() => {
                // Refused with a warning once (as rustls does); a second is fatal.
                self.renegotiation_requests_left = self
                    .renegotiation_requests_left
                    .checked_sub(1)
                    .ok_or_else(|| {
                        Failure::new(
                            PeerMisbehaved::TooManyRenegotiationRequests,
                            AlertDescription::NoRenegotiation,
                        )
                    })?;
                self.no_renegotiation_due = true;
                Ok(())
            }
            (tls13, got_type) => Err(Failure::new(
                Error::InappropriateHandshakeMessage {
                    expect_types: if tls13 {
                        vec![HandshakeType::NewSessionTicket, HandshakeType::KeyUpdate]
                    } else {
                        vec![HandshakeType::HelloRequest]
                    },
                    got_type,
                },
                AlertDescription::UnexpectedMessage,
            )),
        }
    }

    /// Seals the control records that are due (a KeyUpdate, a `no_renegotiation` warning) into
    /// `out`; returns the bytes written. What does not fit waits for the next call.
    pub(super) fn seal_control(&mut self, out: &mut [u8]) -> Result<usize, Failure> {
        let mut written = 0;
        if self.no_renegotiation_due {
            let alert = [1, u8::from(AlertDescription::NoRenegotiation)];
            match self.tx.seal(
                self.tls13,
                u8::from(ContentType::Alert),
                &alert,
                &mut out[written..],
            )? {
                Some(count) => {
                    written += count;
                    self.no_renegotiation_due = false;
                }
                None => return Ok(written),
            }
        }
        if self.key_update_due || self.tx.seq >= self.tx_limit {
            if !self.tls13 {
                return Err(Failure::silent(Error::General(
                    "the cipher suite's confidentiality limit was reached (TLS 1.2 cannot \
                     renew its keys)"
                        .into(),
                )));
            }
            // KeyUpdate, update_not_requested (RFC 8446 section 4.6.3), under the old key.
            let message = [u8::from(HandshakeType::KeyUpdate), 0, 0, 1, 0];
            match self.tx.seal(
                true,
                u8::from(ContentType::Handshake),
                &message,
                &mut out[written..],
            )? {
                Some(count) => {
                    written += count;
                    let (seq, secrets) = self
                        .kernel
                        .update_tx_secret()
                        .map_err(|error| Failure::new(error, AlertDescription::InternalError))?;
                    self.tx = Cipher::new(secrets, seq, true)
                        .map_err(|error| Failure::new(error, AlertDescription::InternalError))?;
                    self.key_update_due = false;
                }
                None => return Ok(written),
            }
        }
        Ok(written)
    }

    /// Seals `content` as one application data record into `out`; `None` if it does not fit.
    /// Control records that are due go first ([`Records::seal_control`]).
    pub(super) fn seal_data(
        &mut self,
        content: &[u8],
        out: &mut [u8],
    ) -> Result<Option<usize>, Failure> {
        self.tx.seal(
            self.tls13,
            u8::from(ContentType::ApplicationData),
            content,
            out,
        )
    }

    /// Seals an alert; `None` if it does not fit.
    pub(super) fn seal_alert(
        &mut self,
        level: u8,
        description: AlertDescription,
        out: &mut [u8],
    ) -> Result<Option<usize>, Failure> {
        self.tx.seal(
            self.tls13,
            u8::from(ContentType::Alert),
            &[level, u8::from(description)],
            out,
        )
    }
}
