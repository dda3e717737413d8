//! The client side of an open WebSocket connection (RFC 6455 sections 5-7), sans-IO.
//!
//! [`Client::read`] takes the received bytes that have not been consumed yet and handles at most
//! one frame from their front; the caller drops the `consumed` bytes and calls again until
//! [`Event::NeedMore`]. Everything we send (our messages, pongs, close frames) is appended,
//! masked, to an output buffer the caller drains to the socket with [`Client::output`] and
//! [`Client::consume_output`], or takes whole with [`Client::swap_output`].
//!
//! Where the payload lives: an unfragmented data frame is handed out borrowed from the caller's
//! input, unmasked as it arrived, so the one copy is the caller's (into the frame ring). Frames
//! of a fragmented message, and frames longer than [`Config::max_borrowed_payload_bytes`], are
//! copied as they arrive into one message buffer, which is reserved once, reused for every
//! message and grows at most to [`Config::max_message_bytes`].
//!
//! **Invariant:** nothing here allocates in steady state, locks, logs or panics on any input;
//! lengths from the wire are checked against the limits before any arithmetic that could
//! overflow.

use super::error::close_code;
use super::frame::{self, apply_mask, MaskRng, OpCode, MAX_CONTROL_PAYLOAD_BYTES};
use super::{EntropyError, Error, SendError};

/// 16 MiB: a depth snapshot of thousands of levels fits, and a broken or hostile server cannot
/// make us hold more than this per connection.
const DEFAULT_MAX_BYTES: usize = 16 << 20;

/// What the message buffer reserves up front: enough for the large messages a market-data feed
/// sends (a depth snapshot of some hundred levels) without growing.
const INITIAL_MESSAGE_BUFFER_BYTES: usize = 64 << 10;

/// What the output buffer reserves up front: pongs, subscriptions and close frames are small.
const INITIAL_OUTPUT_BUFFER_BYTES: usize = 4 << 10;

/// Limits and buffering for one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The longest frame payload accepted; a longer one fails the connection with 1009.
    pub max_frame_bytes: usize,
    /// The longest message accepted (all its fragments together); a longer one fails the
    /// connection with 1009.
    pub max_message_bytes: usize,
    /// Unfragmented data frames whose payload is at most this long are handed out borrowed from
    /// the input, and so must arrive whole in one call's input: the caller's receive buffer must
    /// hold this plus a 14-byte header. Longer frames are copied into the message buffer as they
    /// arrive. The default, `usize::MAX`, borrows every unfragmented frame; a caller with a
    /// fixed receive buffer of `N` bytes sets `N - 14`.
    pub max_borrowed_payload_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_frame_bytes: DEFAULT_MAX_BYTES,
            max_message_bytes: DEFAULT_MAX_BYTES,
            max_borrowed_payload_bytes: usize::MAX,
        }
    }
}

/// The two kinds of data message (section 5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// UTF-8 text, validated before it is handed out.
    Text,
    Binary,
}

impl MessageKind {
    fn opcode(self) -> OpCode {
        match self {
            MessageKind::Text => OpCode::Text,
            MessageKind::Binary => OpCode::Binary,
        }
    }
}

/// Where the connection is in the closing handshake (section 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Messages flow both ways.
    Open,
    /// We sent a close frame and wait for the server's; its data frames are dropped meanwhile.
    Closing,
    /// The closing handshake is complete or the connection failed: once [`Client::output`] is
    /// drained, the caller closes the TCP connection. Reads return [`Event::Closed`].
    Closed,
}

/// What one [`Client::read`] call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read<'a> {
    /// How many bytes from the front of the input were used; the caller must not pass them
    /// again. Zero exactly when `event` is [`Event::NeedMore`] or [`Event::Closed`].
    pub consumed: usize,
    pub event: Event<'a>,
}

/// What came out of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The front of the input is an incomplete frame: call again with more bytes appended.
    NeedMore,
    /// A fragment, or part of a long frame, went into the message buffer; no message yet.
    Partial,
    /// A complete message. The payload borrows the input (unfragmented frames) or the message
    /// buffer (the rest); text has been checked to be UTF-8.
    Message {
        kind: MessageKind,
        payload: &'a [u8],
    },
    /// A ping; its pong is already queued in the output (unless we are closing).
    Ping { payload: &'a [u8] },
    /// A pong (a reply to our ping, or a unilateral heartbeat, section 5.5.3).
    Pong { payload: &'a [u8] },
    /// The server closed: `code` is `None` when its close frame had no payload. Our close frame
    /// (its code echoed, or 1000) is queued unless we had sent one; the state is now
    /// [`State::Closed`].
    Close { code: Option<u16>, reason: &'a str },
    /// A data frame (or part of one) that arrived after our close frame, dropped (section 5.5.1).
    Discarded,
    /// The connection is closed; no more input is read.
    Closed,
}

/// A frame payload still arriving, copied (or dropped) into the message buffer as it comes.
#[derive(Clone, Copy, Debug)]
struct Streaming {
    remaining_bytes: u64,
    kind: MessageKind,
    fin: bool,
    /// The frame arrived after our close frame: its bytes are consumed but not kept.
    discard: bool,
}

/// What [`Client::step`] found. Everything but an assembled message borrows only the input,
/// so `step` can hand it out without keeping `self` borrowed; the assembled message borrows
/// the message buffer and is looked up by [`Client::read`] once no error path needs `self`.
#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    Ready(Event<'a>),
    Assembled(MessageKind),
}

/// The client end of one WebSocket connection after a successful handshake.
#[derive(Debug)]
pub struct Client {
    config: Config,
    state: State,
    /// The kind of the message being assembled in `message`, if one is in progress: a
    /// fragmented message (section 5.4) or a frame too long to borrow.
    assembling: Option<MessageKind>,
    /// The message buffer. Holds the message of the last [`Event::Message`] that borrowed it
    /// until the next read, which clears it (`message_delivered`).
    message: Vec<u8>,
    message_delivered: bool,
    /// How many leading bytes of `message` are known to be UTF-8 (for text), so that each
    /// fragment is validated once and an invalid one fails as soon as it arrives.
    message_utf8_valid_bytes: usize,
    /// The frame whose payload is arriving into `message`, if any.
    streaming: Option<Streaming>,
    /// For an unfragmented text frame that has not arrived whole: how many leading payload bytes
    /// are known to be UTF-8. The caller passes the same front bytes again, so this lets an
    /// invalid sequence fail before the rest of the frame arrives (Autobahn 6.4) without
    /// validating any byte twice.
    pending_utf8_valid_bytes: usize,
    /// Bytes to send; `output[output_start..]` is still pending.
    output: Vec<u8>,
    output_start: usize,
    masks: MaskRng,
}

impl Client {
    /// A client for a connection whose handshake has just completed, with masking keys seeded
    /// from the operating system.
    pub fn new(config: Config) -> Result<Self, EntropyError> {
        Ok(Self::with_mask_rng(config, MaskRng::from_entropy()?))
    }

    /// A client whose masking keys come from `masks`: a fixed seed makes tests and benchmarks
    /// repeatable.
    pub fn with_mask_rng(config: Config, masks: MaskRng) -> Self {
        Self {
            config,
            state: State::Open,
            assembling: None,
            message: Vec::with_capacity(INITIAL_MESSAGE_BUFFER_BYTES.min(config.max_message_bytes)),
            message_delivered: false,
            message_utf8_valid_bytes: 0,
            streaming: None,
            pending_utf8_valid_bytes: 0,
            output: Vec::with_capacity(INITIAL_OUTPUT_BUFFER_BYTES),
            output_start: 0,
            masks,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Whether the connection is over and everything we queued has been taken: the caller may
    /// close the TCP connection (after the server's FIN, ideally; section 7.1.1 lets the server
    /// close first).
    pub fn is_finished(&self) -> bool {
        self.state == State::Closed && self.output().is_empty()
    }

    /// Handles at most one frame from the front of `input`, which must start where the last
    /// call's `consumed` bytes ended (the first call: right after the handshake response).
    ///
    /// A protocol error fails the connection (section 7.1.7): the matching close frame is
    /// queued (unless we had sent one), the state becomes [`State::Closed`], and the caller
    /// should send the output and close the TCP connection.
    #[inline]
    pub fn read<'a>(&'a mut self, input: &'a [u8]) -> Result<Read<'a>, Error> {
        if self.message_delivered {
            self.reset_message();
        }
        if self.state == State::Closed {
            return Ok(Read {
                consumed: 0,
                event: Event::Closed,
            });
        }
        let (consumed, step) = match self.step(input) {
            Ok(done) => done,
            Err(error) => {
                self.fail(error);
                return Err(error);
            }
        };
        let event = match step {
            Step::Ready(event) => event,
            Step::Assembled(kind) => Event::Message {
                kind,
                payload: &self.message,
            },
        };
        Ok(Read { consumed, event })
    }

    #[inline]
    fn step<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Step<'a>), Error> {
        if let Some(streaming) = self.streaming {
            return self.stream_payload(input, 0, streaming);
        }
        let Some(header) = frame::parse_server_header(input)? else {
            return Ok((0, Step::Ready(Event::NeedMore)));
        };
        let kind = match header.opcode {
            OpCode::Text | OpCode::Binary if self.assembling.is_some() => {
                return Err(Error::ExpectedContinuation)
            }
            OpCode::Text => MessageKind::Text,
            OpCode::Binary => MessageKind::Binary,
            OpCode::Continuation => self.assembling.ok_or(Error::UnexpectedContinuation)?,
            OpCode::Close | OpCode::Ping | OpCode::Pong => {
                return self.control_frame(
                    input,
                    header.opcode,
                    header.header_bytes,
                    header.payload_bytes,
                )
            }
        };

        let max_frame_bytes = self.config.max_frame_bytes;
        let payload_bytes = match usize::try_from(header.payload_bytes) {
            Ok(len) if len <= max_frame_bytes => len,
            _ => {
                return Err(Error::FrameTooLarge {
                    len_bytes: header.payload_bytes,
                    max_bytes: max_frame_bytes,
                })
            }
        };
        let discard = self.state == State::Closing;
        let starts_message = header.opcode != OpCode::Continuation;
        if !discard {
            // The message so far is at most max_message_bytes, and the frame at most
            // max_frame_bytes: both fit in usize, and so does their sum unless the limits are
            // absurd, in which case the checked sum fails like an oversized message.
            let message_bytes = self.message.len().checked_add(payload_bytes);
            match message_bytes {
                Some(len) if len <= self.config.max_message_bytes => {}
                _ => {
                    return Err(Error::MessageTooLarge {
                        len_bytes: (self.message.len() as u64).saturating_add(header.payload_bytes),
                        max_bytes: self.config.max_message_bytes,
                    })
                }
            }
        }

        if header.fin
            && starts_message
            && !discard
            && payload_bytes <= self.config.max_borrowed_payload_bytes
        {
            return self.borrowed_frame(input, header.header_bytes, payload_bytes, kind);
        }

        if starts_message {
            self.assembling = Some(kind);
        }
        let streaming = Streaming {
            remaining_bytes: header.payload_bytes,
            kind,
            fin: header.fin,
            discard,
        };
        self.streaming = Some(streaming);
        self.stream_payload(input, header.header_bytes, streaming)
    }

    /// A ping, pong or close frame, handled once it is whole.
    #[cold]
    fn control_frame<'a>(
        &mut self,
        input: &'a [u8],
        opcode: OpCode,
        header_bytes: usize,
        payload_bytes: u64,
    ) -> Result<(usize, Step<'a>), Error> {
        // At most 125 bytes, checked by the parser, so the whole frame is at most 127.
        let end = header_bytes + payload_bytes as usize;
        let Some(payload) = input.get(header_bytes..end) else {
            return Ok((0, Step::Ready(Event::NeedMore)));
        };
        let event = match opcode {
            OpCode::Ping => {
                if self.state == State::Open {
                    self.queue_frame(OpCode::Pong, payload);
                }
                Event::Ping { payload }
            }
            OpCode::Pong => Event::Pong { payload },
            _ => self.close_received(payload)?,
        };
        Ok((end, Step::Ready(event)))
    }

    /// An unfragmented data frame, handed out borrowed once it is whole.
    #[inline]
    fn borrowed_frame<'a>(
        &mut self,
        input: &'a [u8],
        header_bytes: usize,
        payload_bytes: usize,
        kind: MessageKind,
    ) -> Result<(usize, Step<'a>), Error> {
        let end = header_bytes.checked_add(payload_bytes);
        let Some(payload) = end.and_then(|end| input.get(header_bytes..end)) else {
            if kind == MessageKind::Text {
                let available = input.get(header_bytes..).unwrap_or_default();
                self.pending_utf8_valid_bytes =
                    validate_utf8_prefix(available, self.pending_utf8_valid_bytes)?;
            }
            return Ok((0, Step::Ready(Event::NeedMore)));
        };
        if kind == MessageKind::Text {
            let checked = std::mem::take(&mut self.pending_utf8_valid_bytes);
            if validate_utf8_prefix(payload, checked)? != payload.len() {
                // The frame ends inside a multi-byte sequence.
                return Err(Error::InvalidUtf8);
            }
        }
        Ok((
            header_bytes + payload.len(),
            Step::Ready(Event::Message { kind, payload }),
        ))
    }

    /// Moves the payload bytes of the streaming frame found at `input[offset..]` into the
    /// message buffer (or drops them), finishing the frame and perhaps the message.
    fn stream_payload<'a>(
        &mut self,
        input: &'a [u8],
        offset: usize,
        mut streaming: Streaming,
    ) -> Result<(usize, Step<'a>), Error> {
        // A frame that started before our close frame is dropped from then on too.
        streaming.discard |= self.state == State::Closing;
        let available = input.get(offset..).unwrap_or_default();
        let take = match usize::try_from(streaming.remaining_bytes) {
            Ok(remaining) => remaining.min(available.len()),
            Err(_) => available.len(),
        };
        let chunk = &available[..take];
        if !streaming.discard {
            // Grown as bytes arrive rather than to the declared length: a header alone cannot
            // make us allocate.
            self.reserve_message(chunk.len());
            self.message.extend_from_slice(chunk);
            if streaming.kind == MessageKind::Text {
                self.message_utf8_valid_bytes =
                    validate_utf8_prefix(&self.message, self.message_utf8_valid_bytes)?;
            }
        }
        streaming.remaining_bytes -= take as u64;
        let consumed = offset + take;
        let in_progress = Step::Ready(if streaming.discard {
            Event::Discarded
        } else {
            Event::Partial
        });
        if streaming.remaining_bytes > 0 {
            self.streaming = Some(streaming);
            let step = if consumed == 0 {
                Step::Ready(Event::NeedMore)
            } else {
                in_progress
            };
            return Ok((consumed, step));
        }
        self.streaming = None;
        if !streaming.fin {
            return Ok((consumed, in_progress));
        }
        self.assembling = None;
        if streaming.discard {
            self.reset_message();
            return Ok((consumed, Step::Ready(Event::Discarded)));
        }
        if streaming.kind == MessageKind::Text
            && self.message_utf8_valid_bytes != self.message.len()
        {
            return Err(Error::InvalidUtf8);
        }
        self.message_delivered = true;
        Ok((consumed, Step::Assembled(streaming.kind)))
    }

    /// The server's close frame (section 5.5.1): validated, echoed unless we closed first.
    fn close_received<'a>(&mut self, body: &'a [u8]) -> Result<Event<'a>, Error> {
        let code = match body {
            [] => None,
            [_] => return Err(Error::CloseLength1),
            [high, low, ..] => {
                let code = u16::from_be_bytes([*high, *low]);
                if !close_code::is_valid(code) {
                    return Err(Error::InvalidCloseCode { code });
                }
                Some(code)
            }
        };
        let reason = std::str::from_utf8(body.get(2..).unwrap_or_default())
            .map_err(|_| Error::InvalidUtf8)?;
        if self.state == State::Open {
            // Section 5.5.1: "the endpoint typically echos the status code it received".
            self.queue_close(code.unwrap_or(close_code::NORMAL), b"");
        }
        self.state = State::Closed;
        self.streaming = None;
        self.assembling = None;
        Ok(Event::Close { code, reason })
    }

    /// Fails the connection (section 7.1.7): our close frame with the error's code, unless we
    /// had sent one already, and no more reading.
    #[cold]
    fn fail(&mut self, error: Error) {
        if self.state == State::Open {
            self.queue_close(error.close_code(), b"");
        }
        self.state = State::Closed;
        self.streaming = None;
        self.assembling = None;
        self.pending_utf8_valid_bytes = 0;
        self.reset_message();
    }

    fn reset_message(&mut self) {
        self.message.clear();
        self.message_delivered = false;
        self.message_utf8_valid_bytes = 0;
    }

    /// Makes room for `additional` more message bytes, growing by doubling but never past
    /// `max_message_bytes` (the caller has checked that the message fits within it).
    fn reserve_message(&mut self, additional: usize) {
        let needed = self.message.len().saturating_add(additional);
        if needed <= self.message.capacity() {
            return;
        }
        let target = self
            .message
            .capacity()
            .saturating_mul(2)
            .min(self.config.max_message_bytes)
            .max(needed);
        self.message.reserve_exact(target - self.message.len());
    }

    /// Queues a text or binary message as one masked frame. Text is checked to be UTF-8.
    pub fn send(&mut self, kind: MessageKind, payload: &[u8]) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::Closed);
        }
        if kind == MessageKind::Text && std::str::from_utf8(payload).is_err() {
            return Err(SendError::InvalidUtf8);
        }
        self.queue_frame(kind.opcode(), payload);
        Ok(())
    }

    /// Queues a ping (at most 125 bytes). The server's pong comes back as [`Event::Pong`].
    pub fn send_ping(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.send_control(OpCode::Ping, payload)
    }

    /// Queues an unsolicited pong, a one-way heartbeat (section 5.5.3).
    pub fn send_pong(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.send_control(OpCode::Pong, payload)
    }

    fn send_control(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::Closed);
        }
        if payload.len() > MAX_CONTROL_PAYLOAD_BYTES {
            return Err(SendError::ControlPayloadTooLong {
                len_bytes: payload.len(),
            });
        }
        self.queue_frame(opcode, payload);
        Ok(())
    }

    /// Starts the closing handshake (section 7.1.2): queues our close frame and moves to
    /// [`State::Closing`], where the server's data frames are dropped until its close arrives.
    /// The caller should give up waiting after a timeout and close the TCP connection.
    pub fn close(&mut self, code: u16, reason: &str) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::Closed);
        }
        if !close_code::is_valid(code) {
            return Err(SendError::InvalidCloseCode { code });
        }
        if reason.len() > MAX_CONTROL_PAYLOAD_BYTES - 2 {
            return Err(SendError::CloseReasonTooLong {
                len_bytes: reason.len(),
            });
        }
        self.queue_close(code, reason.as_bytes());
        self.state = State::Closing;
        // Data frames are now dropped without validation, so no partial check carries over.
        self.pending_utf8_valid_bytes = 0;
        Ok(())
    }

    fn queue_close(&mut self, code: u16, reason: &[u8]) {
        let mut body = [0_u8; MAX_CONTROL_PAYLOAD_BYTES];
        let len = 2 + reason.len().min(MAX_CONTROL_PAYLOAD_BYTES - 2);
        body[..2].copy_from_slice(&code.to_be_bytes());
        body[2..len].copy_from_slice(&reason[..len - 2]);
        self.queue_frame(OpCode::Close, &body[..len]);
    }

    /// Appends one complete, masked frame to the output.
    #[inline]
    fn queue_frame(&mut self, opcode: OpCode, payload: &[u8]) {
        let mask = self.masks.next_mask();
        self.make_output_room(frame::MAX_HEADER_BYTES + payload.len());
        frame::write_header(&mut self.output, true, opcode, payload.len(), Some(mask));
        let start = self.output.len();
        self.output.extend_from_slice(payload);
        apply_mask(&mut self.output[start..], mask);
    }

    /// Before growing the output buffer, reclaims the already-sent bytes at its front, so a
    /// caller that drains in pieces does not make it grow without bound.
    fn make_output_room(&mut self, additional: usize) {
        if self.output_start > 0 && self.output.capacity() - self.output.len() < additional {
            self.output.drain(..self.output_start);
            self.output_start = 0;
        }
        self.output.reserve(additional);
    }

    /// The bytes queued for the socket, oldest first.
    ///
    /// For io_uring: the slice is only valid until the next `&mut self` call (any read can queue
    /// a pong and move the buffer). A loop that keeps a send in flight across calls copies these
    /// bytes into its own send buffer or takes them with [`Client::swap_output`].
    #[inline]
    pub fn output(&self) -> &[u8] {
        self.output.get(self.output_start..).unwrap_or_default()
    }

    /// Marks the first `sent_bytes` of [`Client::output`] as written to the socket (more than
    /// is pending counts as all of it).
    #[inline]
    pub fn consume_output(&mut self, sent_bytes: usize) {
        self.output_start = self
            .output_start
            .saturating_add(sent_bytes)
            .min(self.output.len());
        if self.output_start == self.output.len() {
            self.output.clear();
            self.output_start = 0;
        }
    }

    /// Takes all pending output: `buffer` is cleared and then swapped with the internal buffer,
    /// so that it holds exactly the pending bytes and the client keeps `buffer`'s old
    /// allocation. Two buffers passed back and forth give an io_uring send stable memory
    /// without allocating.
    pub fn swap_output(&mut self, buffer: &mut Vec<u8>) {
        if self.output_start > 0 {
            self.output.drain(..self.output_start);
            self.output_start = 0;
        }
        buffer.clear();
        std::mem::swap(&mut self.output, buffer);
    }
}

/// Validates `bytes` as UTF-8 from `valid_bytes` on (a prefix already known to be valid and to
/// end on a character boundary) and returns the new valid length, which stops short of the end
/// only for a sequence that more bytes could still complete. An invalid sequence fails at once,
/// which is what lets a fragmented text message fail on its first bad fragment (Autobahn 6.x).
#[inline]
fn validate_utf8_prefix(bytes: &[u8], valid_bytes: usize) -> Result<usize, Error> {
    let Some(unchecked) = bytes.get(valid_bytes..) else {
        // Not the bytes the offset was computed on; start over rather than trust it.
        return validate_utf8_prefix(bytes, 0);
    };
    if is_ascii(unchecked) {
        return Ok(bytes.len());
    }
    match std::str::from_utf8(unchecked) {
        Ok(_) => Ok(bytes.len()),
        // `error_len() == None`: the input ends inside a sequence that is valid so far.
        Err(error) if error.error_len().is_none() => Ok(valid_bytes + error.valid_up_to()),
        Err(_) => Err(Error::InvalidUtf8),
    }
}

/// Whether every byte is below 0x80, ORing 32 bytes at a time and testing the high bits once
/// per block: market-data JSON is ASCII, and this runs about twice as fast as `from_utf8` on a
/// 180-byte bookTicker (which checks in smaller steps and tracks multi-byte state), leaving
/// `from_utf8` to the messages that are not ASCII.
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        let mut any = 0_u64;
        for word in block.chunks_exact(8) {
            if let Ok(word) = <[u8; 8]>::try_from(word) {
                any |= u64::from_ne_bytes(word);
            }
        }
        if any & HIGH_BITS != 0 {
            return false;
        }
    }
    blocks.remainder().iter().fold(0, |any, &byte| any | byte) < 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        Client::with_mask_rng(Config::default(), MaskRng::from_seed(7))
    }

    fn server_frame(fin: bool, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::write_header(&mut out, fin, opcode, payload.len(), None);
        out.extend_from_slice(payload);
        out
    }

    /// Decodes our (masked) output frames: (opcode, unmasked payload).
    fn sent_frames(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut frames = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            assert_eq!(rest[1] & 0x80, 0x80, "client frames are masked");
            let (len, mut at) = match rest[1] & 0x7F {
                126 => (u16::from_be_bytes([rest[2], rest[3]]) as usize, 4),
                127 => (
                    u64::from_be_bytes(rest[2..10].try_into().unwrap()) as usize,
                    10,
                ),
                len => (len as usize, 2),
            };
            let mask: [u8; 4] = rest[at..at + 4].try_into().unwrap();
            at += 4;
            let mut payload = rest[at..at + len].to_vec();
            apply_mask(&mut payload, mask);
            frames.push((rest[0], payload));
            rest = &rest[at + len..];
        }
        frames
    }

    #[test]
    fn utf8_prefix_validation_waits_for_incomplete_sequences() {
        let euro = "€".as_bytes();
        assert_eq!(validate_utf8_prefix(&euro[..1], 0), Ok(0));
        assert_eq!(validate_utf8_prefix(&euro[..2], 0), Ok(0));
        assert_eq!(validate_utf8_prefix(euro, 0), Ok(3));
        assert_eq!(validate_utf8_prefix(b"ab\xff", 0), Err(Error::InvalidUtf8));
        // 0xF4 0x90 is above U+10FFFF whatever follows: fail on the second byte.
        assert_eq!(
            validate_utf8_prefix(b"\xf4\x90", 0),
            Err(Error::InvalidUtf8)
        );
    }

    #[test]
    fn word_ascii_check_matches_std_at_every_length_and_position() {
        for len in 0..100 {
            let mut bytes = vec![b'a'; len];
            assert!(is_ascii(&bytes), "length {len}");
            for position in 0..len {
                bytes[position] = 0x80;
                assert!(!is_ascii(&bytes), "length {len}, high byte at {position}");
                bytes[position] = b'a';
            }
        }
    }

    #[test]
    fn assembled_message_is_cleared_on_the_next_read() {
        let mut client = client();
        let mut input = server_frame(false, OpCode::Text, b"ab");
        input.extend(server_frame(true, OpCode::Continuation, b"cd"));
        let first = client.read(&input).unwrap();
        assert_eq!(first.event, Event::Partial);
        let consumed = first.consumed;
        let second = client.read(&input[consumed..]).unwrap();
        assert_eq!(
            second.event,
            Event::Message {
                kind: MessageKind::Text,
                payload: b"abcd"
            }
        );
        assert_eq!(client.read(&[]).unwrap().event, Event::NeedMore);
        assert!(client.message.is_empty());
    }

    #[test]
    fn message_buffer_is_reused_without_growing() {
        let mut client = client();
        let capacity = client.message.capacity();
        let mut input = server_frame(false, OpCode::Binary, &[1; 1000]);
        input.extend(server_frame(true, OpCode::Continuation, &[2; 1000]));
        for _ in 0..100 {
            let mut rest = &input[..];
            while !rest.is_empty() {
                let read = client.read(rest).unwrap();
                rest = &rest[read.consumed..];
            }
        }
        assert_eq!(client.message.capacity(), capacity);
    }

    #[test]
    fn partial_drain_then_more_output_keeps_order() {
        let mut client = client();
        client.send(MessageKind::Binary, &[1; 10]).unwrap();
        let first_len = client.output().len();
        client.consume_output(3);
        client.send(MessageKind::Binary, &[2; 5000]).unwrap();
        let mut all = Vec::new();
        all.extend_from_slice(client.output());
        assert_eq!(all.len(), first_len - 3 + 5000 + 8);
        client.consume_output(usize::MAX);
        assert!(client.output().is_empty());
        client.send(MessageKind::Text, b"x").unwrap();
        let frames = sent_frames(client.output());
        assert_eq!(frames, vec![(0x81, b"x".to_vec())]);
    }
}
