//! The server's side of RFC 6455 framing: client frames in (masked, section 5.3), server frames
//! out (unmasked). The client side in `ws::frame` rejects masked frames, as a client must, so the
//! simulator keeps its own small reader; frame headers are written with `ws::frame::write_header`.

use tickwire::ws::frame::{apply_mask, write_header, OpCode, MAX_CONTROL_PAYLOAD_BYTES};

/// The longest client message accepted: subscription requests are small, and a client cannot
/// make the simulator hold more than this.
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 64 * 1024;

/// One complete message or control frame from the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The client's close frame: its code (none for an empty payload) and reason.
    Close(Option<u16>, String),
}

/// A client frame broke RFC 6455 or the size limit; the connection is failed with the code of
/// [`FrameError::close_code`] (section 7.1.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("reserved bits set without an extension (RFC 6455 section 5.2)")]
    ReservedBits,
    #[error("reserved opcode {0:#x} (RFC 6455 section 5.2)")]
    ReservedOpcode(u8),
    #[error("unmasked client frame (RFC 6455 section 5.3)")]
    Unmasked,
    #[error("control frame longer than 125 bytes or fragmented (RFC 6455 section 5.5)")]
    BadControlFrame,
    #[error("continuation frame without a message in progress (RFC 6455 section 5.4)")]
    UnexpectedContinuation,
    #[error("new data frame inside a fragmented message (RFC 6455 section 5.4)")]
    ExpectedContinuation,
    #[error("client message longer than {MAX_CLIENT_MESSAGE_BYTES} bytes")]
    TooLarge,
    #[error("text message or close reason that is not UTF-8 (RFC 6455 section 8.1)")]
    InvalidUtf8,
    #[error("close frame with a 1-byte payload (RFC 6455 section 5.5.1)")]
    CloseLength1,
}

impl FrameError {
    /// The close code the server fails the connection with (RFC 6455 section 7.4.1).
    pub fn close_code(self) -> u16 {
        match self {
            FrameError::TooLarge => 1009,
            FrameError::InvalidUtf8 => 1007,
            _ => 1002,
        }
    }
}

/// Reassembles client frames from received plaintext.
#[derive(Debug, Default)]
pub struct FrameReader {
    /// Received bytes not yet parsed.
    pending: Vec<u8>,
    /// The fragmented message in progress: its opcode and the payload so far.
    assembling: Option<(OpCode, Vec<u8>)>,
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Appends received plaintext.
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next complete message or control frame, `None` until more bytes arrive.
    pub fn next_incoming(&mut self) -> Result<Option<Incoming>, FrameError> {
        loop {
            let Some(RawFrame {
                fin,
                opcode,
                payload,
                frame_bytes,
            }) = self.parse_frame()?
            else {
                return Ok(None);
            };
            self.pending.drain(..frame_bytes);
            match opcode {
                OpCode::Ping => return Ok(Some(Incoming::Ping(payload))),
                OpCode::Pong => return Ok(Some(Incoming::Pong(payload))),
                OpCode::Close => return close_frame(&payload).map(Some),
                OpCode::Text | OpCode::Binary => {
                    if self.assembling.is_some() {
                        return Err(FrameError::ExpectedContinuation);
                    }
                    if fin {
                        return message(opcode, payload).map(Some);
                    }
                    self.assembling = Some((opcode, payload));
                }
                OpCode::Continuation => {
                    let Some((first, mut so_far)) = self.assembling.take() else {
                        return Err(FrameError::UnexpectedContinuation);
                    };
                    if so_far.len() + payload.len() > MAX_CLIENT_MESSAGE_BYTES {
                        return Err(FrameError::TooLarge);
                    }
                    so_far.extend_from_slice(&payload);
                    if fin {
                        return message(first, so_far).map(Some);
                    }
                    self.assembling = Some((first, so_far));
                }
            }
        }
    }

    /// Parses the frame at the front of `pending`, `None` until it is whole.
    fn parse_frame(&self) -> Result<Option<RawFrame>, FrameError> {
        let input = &self.pending;
        let (Some(&first), Some(&second)) = (input.first(), input.get(1)) else {
            return Ok(None);
        };
        if first & 0x70 != 0 {
            return Err(FrameError::ReservedBits);
        }
        let opcode =
            OpCode::from_bits(first & 0x0f).ok_or(FrameError::ReservedOpcode(first & 0x0f))?;
        let fin = first & 0x80 != 0;
        if second & 0x80 == 0 {
            return Err(FrameError::Unmasked);
        }
        let short_len = usize::from(second & 0x7f);
        if opcode.is_control() && (!fin || short_len > MAX_CONTROL_PAYLOAD_BYTES) {
            return Err(FrameError::BadControlFrame);
        }
        let (len_bytes, payload_bytes) = match short_len {
            126 => match input.get(2..4) {
                Some(&[high, low]) => (2, u64::from(u16::from_be_bytes([high, low]))),
                _ => return Ok(None),
            },
            127 => match input
                .get(2..10)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            {
                Some(bytes) => (8, u64::from_be_bytes(bytes)),
                None => return Ok(None),
            },
            len => (0, len as u64),
        };
        let payload_bytes = match usize::try_from(payload_bytes) {
            Ok(len) if len <= MAX_CLIENT_MESSAGE_BYTES => len,
            _ => return Err(FrameError::TooLarge),
        };
        let mask_start = 2 + len_bytes;
        let payload_start = mask_start + 4;
        let frame_bytes = payload_start + payload_bytes;
        let (Some(mask), Some(payload)) = (
            input
                .get(mask_start..payload_start)
                .and_then(|bytes| <[u8; 4]>::try_from(bytes).ok()),
            input.get(payload_start..frame_bytes),
        ) else {
            return Ok(None);
        };
        let mut payload = payload.to_vec();
        apply_mask(&mut payload, mask);
        Ok(Some(RawFrame {
            fin,
            opcode,
            payload,
            frame_bytes,
        }))
    }
}

/// One client frame, unmasked.
struct RawFrame {
    fin: bool,
    opcode: OpCode,
    payload: Vec<u8>,
    /// The whole frame's length on the wire, header included.
    frame_bytes: usize,
}

fn message(opcode: OpCode, payload: Vec<u8>) -> Result<Incoming, FrameError> {
    if opcode == OpCode::Text {
        if std::str::from_utf8(&payload).is_err() {
            return Err(FrameError::InvalidUtf8);
        }
        Ok(Incoming::Text(payload))
    } else {
        Ok(Incoming::Binary(payload))
    }
}

fn close_frame(payload: &[u8]) -> Result<Incoming, FrameError> {
    match payload {
        [] => Ok(Incoming::Close(None, String::new())),
        [_] => Err(FrameError::CloseLength1),
        [high, low, reason @ ..] => {
            let reason = std::str::from_utf8(reason).map_err(|_| FrameError::InvalidUtf8)?;
            Ok(Incoming::Close(
                Some(u16::from_be_bytes([*high, *low])),
                reason.to_owned(),
            ))
        }
    }
}

/// Appends one unmasked server frame.
pub fn write_frame(out: &mut Vec<u8>, fin: bool, opcode: OpCode, payload: &[u8]) {
    write_header(out, fin, opcode, payload.len(), None);
    out.extend_from_slice(payload);
}

/// Appends a text message as `fragments` frames (a text frame, then continuations; fewer when
/// the payload is shorter than that), or as one frame for `fragments` 0 or 1.
#[cfg(test)]
pub fn write_text(out: &mut Vec<u8>, payload: &[u8], fragments: u32) {
    write_message(out, OpCode::Text, payload, fragments);
}

/// Appends a text or binary message as `fragments` frames, as [`write_text`] does.
pub fn write_message(out: &mut Vec<u8>, opcode: OpCode, payload: &[u8], fragments: u32) {
    let first = opcode;
    let fragments = (fragments.max(1) as usize).min(payload.len().max(1));
    if fragments == 1 {
        write_frame(out, true, first, payload);
        return;
    }
    let part_bytes = payload.len().div_ceil(fragments);
    let parts = payload.chunks(part_bytes).count();
    for (index, part) in payload.chunks(part_bytes).enumerate() {
        let opcode = if index == 0 {
            first
        } else {
            OpCode::Continuation
        };
        write_frame(out, index + 1 == parts, opcode, part);
    }
}

/// Appends a close frame with `code` and `reason` (cut to fit 125 bytes at a character boundary).
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let mut cut = reason.len().min(MAX_CONTROL_PAYLOAD_BYTES - 2);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut payload = Vec::with_capacity(2 + cut);
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(&reason.as_bytes()[..cut]);
    write_frame(out, true, OpCode::Close, &payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1, 2, 3, 4];
        let mut out = Vec::new();
        write_header(
            &mut out,
            first & 0x80 != 0,
            OpCode::Text,
            payload.len(),
            Some(mask),
        );
        out[0] = first;
        let start = out.len();
        out.extend_from_slice(payload);
        apply_mask(&mut out[start..], mask);
        out
    }

    #[test]
    fn reassembles_fragments_split_anywhere() {
        let mut wire = masked(0x01, b"{\"met");
        wire.extend(masked(0x89, b"hi"));
        wire.extend(masked(0x80, b"hod\"}"));
        let mut reader = FrameReader::new();
        let mut got = Vec::new();
        for byte in wire {
            reader.push(&[byte]);
            while let Some(incoming) = reader.next_incoming().unwrap() {
                got.push(incoming);
            }
        }
        assert_eq!(
            got,
            [
                Incoming::Ping(b"hi".to_vec()),
                Incoming::Text(b"{\"method\"}".to_vec())
            ]
        );
    }

    #[test]
    fn rejects_unmasked_and_oversized_frames() {
        let mut reader = FrameReader::new();
        reader.push(&[0x81, 0x02, b'h', b'i']);
        assert_eq!(reader.next_incoming(), Err(FrameError::Unmasked));
        let mut reader = FrameReader::new();
        reader.push(&[0x81, 0xff, 0, 0, 0, 0, 0, 2, 0, 0]);
        assert_eq!(reader.next_incoming(), Err(FrameError::TooLarge));
    }

    #[test]
    fn fragments_split_the_payload_into_k_frames() {
        let mut out = Vec::new();
        write_text(&mut out, b"abcdefg", 3);
        // 3+3+1 bytes, each behind a 2-byte header: text (not fin), continuation, final.
        assert_eq!(
            out,
            [0x01, 3, b'a', b'b', b'c', 0x00, 3, b'd', b'e', b'f', 0x80, 1, b'g']
        );
    }
}
