//! MoldUDP64 (Nasdaq's "MoldUDP64 Protocol Specification", V1.00, 07/07/2009): downstream
//! packets, request packets, and the [`Arbiter`] that makes one ordered stream of messages out
//! of an A line, a B line and the re-request server's answers.
//!
//! A downstream packet is a 20-byte header (Session, 10 bytes of ASCII; Sequence Number, 8 bytes
//! big-endian, the sequence number of its first message; Message Count, 2 bytes big-endian), then
//! that many message blocks, each a 2-byte big-endian length and that many bytes. A count of 0 is
//! a heartbeat (its sequence number is the next one expected); 0xFFFF marks the end of the
//! session (no message blocks). A request packet has the same 20-byte layout, its count the
//! number of messages asked for. [`Packet::parse`] checks every block against the packet's end:
//! a count that runs past it ([`MoldError::CountPastEnd`]) or bytes left after the last block
//! ([`MoldError::Trailing`]) refuse the whole packet.

use std::fmt;

/// The MoldUDP64 header's length.
pub const HEADER_LEN: usize = 20;
/// The Message Count of an end-of-session packet.
pub const END_OF_SESSION: u16 = 0xFFFF;

/// A session name: 10 bytes of ASCII as sent.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Session(pub [u8; 10]);

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoldError {
    #[error("MoldUDP64 packet of {0} bytes is shorter than its 20-byte header")]
    Short(usize),
    #[error("MoldUDP64 packet: message count {count} runs past the packet's end at message {index} ({len} bytes)")]
    CountPastEnd { count: u16, index: u16, len: usize },
    #[error("MoldUDP64 packet: {0} bytes after its last message")]
    Trailing(usize),
    #[error("MoldUDP64 packet: sequence {sequence} plus count {count} passes 2^64")]
    SequenceOverflow { sequence: u64, count: u16 },
}

/// What a downstream packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// `count` messages from `sequence` on.
    Messages,
    /// Count 0: nothing new; `sequence` is the next expected.
    Heartbeat,
    /// Count 0xFFFF: the session ends; `sequence` is one past its last message.
    EndOfSession,
}

/// A checked downstream packet, borrowing its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    pub session: Session,
    pub sequence: u64,
    pub count: u16,
    blocks: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Reads a packet and checks that its message blocks fill it exactly.
    pub fn parse(bytes: &'a [u8]) -> Result<Packet<'a>, MoldError> {
        if bytes.len() < HEADER_LEN {
            return Err(MoldError::Short(bytes.len()));
        }
        let (header, blocks) = bytes.split_at(HEADER_LEN);
        let mut session = [0u8; 10];
        session.copy_from_slice(&header[..10]);
        let mut sequence = [0u8; 8];
        sequence.copy_from_slice(&header[10..18]);
        let sequence = u64::from_be_bytes(sequence);
        let count = u16::from_be_bytes([header[18], header[19]]);
        let messages = if count == END_OF_SESSION { 0 } else { count };
        if sequence.checked_add(u64::from(messages)).is_none() {
            return Err(MoldError::SequenceOverflow { sequence, count });
        }
        let mut at = 0usize;
        for index in 0..messages {
            let Some(len) = blocks.get(at..at + 2) else {
                return Err(MoldError::CountPastEnd {
                    count,
                    index,
                    len: bytes.len(),
                });
            };
            let end = at + 2 + usize::from(u16::from_be_bytes([len[0], len[1]]));
            if end > blocks.len() {
                return Err(MoldError::CountPastEnd {
                    count,
                    index,
                    len: bytes.len(),
                });
            }
            at = end;
        }
        if at != blocks.len() {
            return Err(MoldError::Trailing(blocks.len() - at));
        }
        Ok(Packet {
            session: Session(session),
            sequence,
            count,
            blocks,
        })
    }

    pub fn kind(&self) -> PacketKind {
        match self.count {
            0 => PacketKind::Heartbeat,
            END_OF_SESSION => PacketKind::EndOfSession,
            _ => PacketKind::Messages,
        }
    }

    /// The messages with their sequence numbers (checked by [`Packet::parse`]).
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            rest: self.blocks,
            sequence: self.sequence,
        }
    }
}

/// The messages of a [`Packet`].
pub struct Messages<'a> {
    rest: &'a [u8],
    sequence: u64,
}

impl<'a> Iterator for Messages<'a> {
    type Item = (u64, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        let len = self.rest.get(..2)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        let message = self.rest.get(2..2 + len)?;
        self.rest = &self.rest[2 + len..];
        let sequence = self.sequence;
        self.sequence = self.sequence.wrapping_add(1);
        Some((sequence, message))
    }
}

/// A request to the re-request server: `count` messages of `session` from `sequence` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub session: Session,
    pub sequence: u64,
    pub count: u16,
}

impl Request {
    /// The 20-byte request packet.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..10].copy_from_slice(&self.session.0);
        out[10..18].copy_from_slice(&self.sequence.to_be_bytes());
        out[18..].copy_from_slice(&self.count.to_be_bytes());
        out
    }

    /// Reads a request packet (exactly 20 bytes).
    pub fn parse(bytes: &[u8]) -> Result<Request, MoldError> {
        if bytes.len() < HEADER_LEN {
            return Err(MoldError::Short(bytes.len()));
        }
        if bytes.len() > HEADER_LEN {
            return Err(MoldError::Trailing(bytes.len() - HEADER_LEN));
        }
        let mut session = [0u8; 10];
        session.copy_from_slice(&bytes[..10]);
        let mut sequence = [0u8; 8];
        sequence.copy_from_slice(&bytes[10..18]);
        Ok(Request {
            session: Session(session),
            sequence: u64::from_be_bytes(sequence),
            count: u16::from_be_bytes([bytes[18], bytes[19]]),
        })
    }
}

/// Where a packet came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    A = 0,
    B = 1,
    /// An answer of the re-request server.
    Rerequest = 2,
}

/// The arbiter's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArbiterConfig {
    /// The session to expect; `None` takes the first packet's.
    pub expected_session: Option<Session>,
    /// The first sequence number to hand out in a session (MoldUDP64 numbers a session's
    /// messages from 1): `Some(1)` recovers a session from its start; `None` joins it at the
    /// first packet seen.
    pub first_sequence: Option<u64>,
    /// How long a gap waits for the other line before the first re-request.
    pub line_wait_ns: u64,
    /// The least time between two re-requests.
    pub request_interval_ns: u64,
    /// The most re-requests for one gap.
    pub max_requests: u32,
    /// From the gap's start, when an unanswered gap is given up as a [`Output::Gap`].
    pub give_up_ns: u64,
    /// The most messages one re-request asks for.
    pub max_request_count: u16,
    /// Sequence numbers the arbiter holds ahead of a gap (each message at most
    /// [`MAX_BUFFERED_LEN`] bytes), allocated once.
    pub buffer: usize,
}

impl Default for ArbiterConfig {
    fn default() -> Self {
        ArbiterConfig {
            expected_session: None,
            first_sequence: None,
            line_wait_ns: 2_000_000,
            request_interval_ns: 5_000_000,
            max_requests: 5,
            give_up_ns: 50_000_000,
            max_request_count: 1024,
            buffer: 65_536,
        }
    }
}

/// The longest message the arbiter holds ahead of a gap (ITCH's longest is 50 bytes).
pub const MAX_BUFFERED_LEN: usize = 64;

/// What the arbiter hands out, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Output<'a> {
    /// The message of sequence number `sequence`, from `line` (the first to bring it).
    Message {
        sequence: u64,
        line: Line,
        bytes: &'a [u8],
    },
    /// `count` messages from `first` on that no source delivered in time: skipped, never
    /// delivered later.
    Gap { first: u64, count: u64 },
    /// The session changed: everything of `from` still missing is dropped, and the sequence
    /// starts again from the new session's packets.
    SessionChange { from: Session, to: Session },
    /// The session's last message is delivered.
    EndOfSession { session: Session },
}

/// Counts per source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineCounters {
    /// Messages this line delivered first.
    pub delivered: u64,
    /// Messages that arrived after another source's copy.
    pub duplicates: u64,
    /// Packets refused ([`MoldError`]).
    pub malformed: u64,
    /// Packets of another session dropped (a retired session's late packets, or a re-request
    /// answer of a session other than the current one).
    pub wrong_session: u64,
}

/// The arbiter's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArbiterCounters {
    pub lines: [LineCounters; 3],
    pub requests: u64,
    pub gaps: u64,
    pub gap_messages: u64,
    pub session_changes: u64,
    /// Messages longer than [`MAX_BUFFERED_LEN`] that arrived ahead of a gap: given up.
    pub too_long: u64,
}

#[derive(Clone, Copy)]
struct Slot {
    sequence: u64,
    line: Line,
    len: u8,
    bytes: [u8; MAX_BUFFERED_LEN],
}

const FREE: u64 = u64::MAX;

/// A/B arbitration and gap recovery, sans-IO: packets from a [`Line`] and the time in; each
/// sequence number's message exactly once and in order, [`Request`]s to send, [`Output::Gap`]s
/// and session changes out.
///
/// - The first packet (of the expected session, when one is configured) sets the session and,
///   unless [`ArbiterConfig::first_sequence`] names it, the next sequence number expected: the
///   arbiter joins a session where it finds it.
/// - A message at the next sequence number is handed out at once, then whatever was held
///   behind it; one below is a duplicate, counted on its line; one above is held (a copy, in a
///   ring of [`ArbiterConfig::buffer`] slots allocated once) and opens a gap at the next
///   sequence number. A heartbeat ahead of the next sequence number opens one too.
/// - [`Arbiter::poll`] runs the gap's timers: after `line_wait_ns` (the other line's chance) it
///   returns a [`Request`] for the missing run from the next sequence number (at most
///   `max_request_count`), again every `request_interval_ns`, at most `max_requests` times; a
///   re-request answer ([`Line::Rerequest`]) is a third source, taken as a line's packet is.
///   At `give_up_ns` from the gap's start (or when a message arrives too far ahead for the
///   ring) the missing run is given up as one [`Output::Gap`] and what was held behind it
///   follows. The timers belong to the first missing run: when the next sequence number moves
///   (a run recovered or given up while later ones are still missing) they start again, so that
///   each run gets its wait, its re-requests and its give-up time.
/// - A line packet of a session other than the current one, and not one retired before, is a
///   session change: [`Output::SessionChange`], the held messages and the gap dropped (a gap of
///   the old session's known missing run is reported first), and the new session starts from
///   its packet. A re-request answer of another session is dropped and counted
///   ([`LineCounters::wrong_session`]), never a session change.
/// - An end-of-session packet is handed out as [`Output::EndOfSession`] once every message
///   before its sequence number has been handed out (or given up).
pub struct Arbiter {
    config: ArbiterConfig,
    session: Option<Session>,
    retired: Option<Session>,
    /// The next sequence number to hand out.
    next: u64,
    /// One past the highest sequence number known to exist.
    known_end: u64,
    end_of_session: Option<u64>,
    ended: bool,
    slots: Box<[Slot]>,
    held: usize,
    gap_since_ns: Option<u64>,
    /// The sequence number the gap's timers started at: when `next` moves past it (a run
    /// recovered or given up while others are still missing), the timers start again for the
    /// next run, so that each missing run gets its own wait, re-requests and give-up time.
    gap_at: u64,
    last_request_ns: u64,
    requests_for_gap: u32,
    counters: ArbiterCounters,
}

impl Arbiter {
    pub fn new(config: ArbiterConfig) -> Arbiter {
        let size = config.buffer.max(1);
        let empty = Slot {
            sequence: FREE,
            line: Line::A,
            len: 0,
            bytes: [0; MAX_BUFFERED_LEN],
        };
        Arbiter {
            config,
            session: config.expected_session,
            retired: None,
            next: 0,
            known_end: 0,
            end_of_session: None,
            ended: false,
            slots: vec![empty; size].into_boxed_slice(),
            held: 0,
            gap_since_ns: None,
            gap_at: 0,
            last_request_ns: 0,
            requests_for_gap: 0,
            counters: ArbiterCounters::default(),
        }
    }

    pub fn counters(&self) -> ArbiterCounters {
        self.counters
    }

    /// The current session, once known.
    pub fn session(&self) -> Option<Session> {
        self.session
    }

    /// The next sequence number to hand out (0 before the first packet).
    pub fn next_sequence(&self) -> u64 {
        self.next
    }

    /// Whether a gap is open (messages missing before held or announced ones).
    pub fn in_gap(&self) -> bool {
        self.gap_since_ns.is_some()
    }

    fn slot_index(&self, sequence: u64) -> usize {
        (sequence % self.slots.len() as u64) as usize
    }

    /// Takes one packet from `line` at `now_ns`; hands out what it completes through `out`.
    pub fn on_packet(
        &mut self,
        line: Line,
        bytes: &[u8],
        now_ns: u64,
        out: &mut dyn FnMut(Output<'_>),
    ) -> Result<(), MoldError> {
        let packet = match Packet::parse(bytes) {
            Ok(packet) => packet,
            Err(error) => {
                self.counters.lines[line as usize].malformed += 1;
                return Err(error);
            }
        };
        match self.session {
            None => {
                self.start(packet.session, packet.sequence);
            }
            Some(current) if current != packet.session => {
                if line == Line::Rerequest
                    || self.retired == Some(packet.session)
                    || (self.next == 0 && self.config.expected_session.is_some())
                {
                    self.counters.lines[line as usize].wrong_session += 1;
                    return Ok(());
                }
                if self.next != 0 {
                    // What the old session is known to miss is a gap, never a silent hole.
                    self.give_up_all(out);
                    out(Output::SessionChange {
                        from: current,
                        to: packet.session,
                    });
                    self.counters.session_changes += 1;
                    self.retired = Some(current);
                }
                self.start(packet.session, packet.sequence);
            }
            Some(_) => {
                if self.next == 0 {
                    self.next = self.config.first_sequence.unwrap_or(packet.sequence).max(1);
                    self.known_end = self.next;
                }
            }
        }
        let messages = match packet.kind() {
            PacketKind::Heartbeat => 0,
            PacketKind::EndOfSession => {
                if self.end_of_session.is_none() {
                    self.end_of_session = Some(packet.sequence);
                }
                0
            }
            PacketKind::Messages => packet.count,
        };
        // A heartbeat or an end of session says every number below its sequence exists.
        self.known_end = self
            .known_end
            .max(packet.sequence.saturating_add(u64::from(messages)));
        for (sequence, message) in packet.messages() {
            self.take(line, sequence, message, out);
        }
        self.settle(now_ns, out);
        Ok(())
    }

    fn start(&mut self, session: Session, sequence: u64) {
        self.session = Some(session);
        self.next = self.config.first_sequence.unwrap_or(sequence).max(1);
        self.known_end = self.next;
        self.end_of_session = None;
        self.ended = false;
        self.gap_since_ns = None;
        self.requests_for_gap = 0;
        if self.held > 0 {
            for slot in self.slots.iter_mut() {
                slot.sequence = FREE;
            }
            self.held = 0;
        }
    }

    #[inline]
    fn take(&mut self, line: Line, sequence: u64, message: &[u8], out: &mut dyn FnMut(Output<'_>)) {
        if sequence < self.next {
            self.counters.lines[line as usize].duplicates += 1;
            return;
        }
        if sequence == self.next {
            self.counters.lines[line as usize].delivered += 1;
            self.next += 1;
            out(Output::Message {
                sequence,
                line,
                bytes: message,
            });
            if self.held > 0 {
                self.drain(out);
            }
            return;
        }
        // Ahead of a gap: hold it, if the ring reaches that far.
        let span = self.slots.len() as u64;
        if sequence - self.next >= span {
            // Too far ahead: what would not fit is given up now.
            let first_kept = sequence - span + 1;
            self.give_up_until(first_kept, out);
            if sequence == self.next {
                self.take(line, sequence, message, out);
                return;
            }
        }
        if message.len() > MAX_BUFFERED_LEN {
            self.counters.too_long += 1;
            return;
        }
        let index = self.slot_index(sequence);
        let slot = &mut self.slots[index];
        if slot.sequence == sequence {
            self.counters.lines[line as usize].duplicates += 1;
            return;
        }
        slot.sequence = sequence;
        slot.line = line;
        slot.len = message.len() as u8;
        slot.bytes[..message.len()].copy_from_slice(message);
        self.held += 1;
    }

    /// Hands out the held messages that follow `next` without a hole.
    fn drain(&mut self, out: &mut dyn FnMut(Output<'_>)) {
        while self.held > 0 {
            let index = self.slot_index(self.next);
            let slot = &mut self.slots[index];
            if slot.sequence != self.next {
                break;
            }
            slot.sequence = FREE;
            self.held -= 1;
            let slot = self.slots[index];
            self.counters.lines[slot.line as usize].delivered += 1;
            self.next += 1;
            out(Output::Message {
                sequence: self.next - 1,
                line: slot.line,
                bytes: &slot.bytes[..usize::from(slot.len)],
            });
        }
    }

    /// Gives up every missing number below `until` (a [`Output::Gap`] per missing run), handing
    /// out what was held between them.
    fn give_up_until(&mut self, until: u64, out: &mut dyn FnMut(Output<'_>)) {
        while self.next < until {
            let first = self.next;
            let end = self.first_held(first, until);
            if end > first {
                out(Output::Gap {
                    first,
                    count: end - first,
                });
                self.counters.gaps += 1;
                self.counters.gap_messages = self.counters.gap_messages.saturating_add(end - first);
                self.next = end;
            }
            self.drain(out);
        }
        self.gap_since_ns = None;
        self.requests_for_gap = 0;
    }

    /// Gives up everything known to be missing (a session change).
    fn give_up_all(&mut self, out: &mut dyn FnMut(Output<'_>)) {
        let mut until = self.known_end;
        if self.held > 0 {
            let highest = self
                .slots
                .iter()
                .filter(|slot| slot.sequence != FREE)
                .map(|slot| slot.sequence + 1)
                .max()
                .unwrap_or(0);
            until = until.max(highest);
        }
        self.give_up_until(until, out);
    }

    fn is_held(&self, sequence: u64) -> bool {
        self.held > 0 && self.slots[self.slot_index(sequence)].sequence == sequence
    }

    /// The first missing run from `next`: its length, at most `limit`.
    fn missing_run(&self, limit: u64) -> u64 {
        let until = self.known_end.min(self.next.saturating_add(limit));
        self.first_held(self.next, until).saturating_sub(self.next)
    }

    /// The first held sequence number in `from..until`, else `until`. Held numbers all lie
    /// within the ring's span of `next`, so the scan is bounded by the ring's size however far
    /// `until` is (a heartbeat may announce any sequence number).
    fn first_held(&self, from: u64, until: u64) -> u64 {
        if self.held == 0 || from >= until {
            return until.max(from);
        }
        let scan_end = until.min(self.next.saturating_add(self.slots.len() as u64));
        let mut at = from;
        while at < scan_end {
            if self.is_held(at) {
                return at;
            }
            at += 1;
        }
        until
    }

    /// Opens or closes the gap and hands out the end of the session when reached.
    fn settle(&mut self, now_ns: u64, out: &mut dyn FnMut(Output<'_>)) {
        if self.next < self.known_end {
            if self.gap_since_ns.is_none() || self.gap_at != self.next {
                self.gap_since_ns = Some(now_ns);
                self.gap_at = self.next;
                self.requests_for_gap = 0;
            }
        } else {
            self.gap_since_ns = None;
            self.requests_for_gap = 0;
        }
        if let (Some(end), false, Some(session)) = (self.end_of_session, self.ended, self.session) {
            if self.next >= end {
                self.ended = true;
                out(Output::EndOfSession { session });
            }
        }
    }

    /// Runs the gap's timers at `now_ns`: a [`Request`] to send when one is due; a gap given up
    /// past `give_up_ns` (through `out`, with what was held behind it). Call it after every
    /// packet and on a timer while [`Arbiter::in_gap`].
    pub fn poll(&mut self, now_ns: u64, out: &mut dyn FnMut(Output<'_>)) -> Option<Request> {
        let since = self.gap_since_ns?;
        let waited = now_ns.saturating_sub(since);
        if waited >= self.config.give_up_ns {
            let run = self.missing_run(u64::MAX);
            let until = self.next + run;
            self.give_up_until(until, out);
            self.settle(now_ns, out);
            return None;
        }
        if waited < self.config.line_wait_ns
            || self.requests_for_gap >= self.config.max_requests
            || (self.requests_for_gap > 0
                && now_ns.saturating_sub(self.last_request_ns) < self.config.request_interval_ns)
        {
            return None;
        }
        let count = self.missing_run(u64::from(self.config.max_request_count));
        let session = self.session?;
        if count == 0 {
            return None;
        }
        self.requests_for_gap += 1;
        self.last_request_ns = now_ns;
        self.counters.requests += 1;
        Some(Request {
            session,
            sequence: self.next,
            count: count as u16,
        })
    }

    /// When [`Arbiter::poll`] next has something to do, if a gap is open.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        let since = self.gap_since_ns?;
        let give_up = since.saturating_add(self.config.give_up_ns);
        let request = if self.requests_for_gap >= self.config.max_requests {
            give_up
        } else if self.requests_for_gap == 0 {
            since.saturating_add(self.config.line_wait_ns)
        } else {
            self.last_request_ns
                .saturating_add(self.config.request_interval_ns)
        };
        Some(request.min(give_up))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: Session = Session(*b"SESSION001");
    const S2: Session = Session(*b"SESSION002");

    /// A downstream packet of `messages` (each its own bytes) from `sequence`.
    fn packet(session: Session, sequence: u64, messages: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&session.0);
        out.extend_from_slice(&sequence.to_be_bytes());
        out.extend_from_slice(&(messages.len() as u16).to_be_bytes());
        for message in messages {
            out.extend_from_slice(&(message.len() as u16).to_be_bytes());
            out.extend_from_slice(message);
        }
        out
    }

    fn control(session: Session, sequence: u64, count: u16) -> Vec<u8> {
        Request {
            session,
            sequence,
            count,
        }
        .encode()
        .to_vec()
    }

    /// The message of sequence number `n` (its bytes name it).
    fn body(n: u64) -> Vec<u8> {
        format!("msg{n}").into_bytes()
    }

    #[derive(Debug, PartialEq, Eq, Clone)]
    enum Seen {
        Message(u64, Line, Vec<u8>),
        Gap(u64, u64),
        Change(Session, Session),
        End(Session),
    }

    fn feed(arbiter: &mut Arbiter, line: Line, bytes: &[u8], now: u64, seen: &mut Vec<Seen>) {
        arbiter
            .on_packet(line, bytes, now, &mut |o| seen.push(record(o)))
            .expect("well-formed packet");
    }

    fn record(output: Output<'_>) -> Seen {
        match output {
            Output::Message {
                sequence,
                line,
                bytes,
            } => Seen::Message(sequence, line, bytes.to_vec()),
            Output::Gap { first, count } => Seen::Gap(first, count),
            Output::SessionChange { from, to } => Seen::Change(from, to),
            Output::EndOfSession { session } => Seen::End(session),
        }
    }

    fn config() -> ArbiterConfig {
        ArbiterConfig {
            expected_session: Some(S1),
            first_sequence: Some(1),
            line_wait_ns: 1_000,
            request_interval_ns: 2_000,
            max_requests: 3,
            give_up_ns: 10_000,
            max_request_count: 100,
            buffer: 64,
        }
    }

    /// Packets of the sequence 1..=12: one or two messages each (6 packets).
    fn packets() -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut sequence = 1;
        for size in [1u64, 2, 1, 3, 2, 3] {
            let bodies: Vec<Vec<u8>> = (sequence..sequence + size).map(body).collect();
            let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
            out.push((sequence, packet(S1, sequence, &refs)));
            sequence += size;
        }
        out
    }

    /// Every pattern of single-line loss (each packet lost on A, on B, or on neither; 3^6),
    /// under three arrivals (B just after A; B a whole stream late; B first): every message
    /// exactly once, in order, from the line that brought it first; no request, no gap, and
    /// each line's duplicates exactly the copies that came second.
    #[test]
    fn every_single_line_loss_pattern_delivers_everything_once_in_order() {
        let packets = packets();
        let n = packets.len() as u32;
        for pattern in 0..3u32.pow(n) {
            let lost: Vec<u32> = (0..n).map(|i| pattern / 3u32.pow(i) % 3).collect(); // 0 none, 1 A, 2 B
            for arrival in 0..3 {
                let mut arrivals: Vec<(Line, usize)> = Vec::new();
                match arrival {
                    0 => (0..packets.len()).for_each(|i| {
                        arrivals.push((Line::A, i));
                        arrivals.push((Line::B, i));
                    }),
                    1 => {
                        (0..packets.len()).for_each(|i| arrivals.push((Line::A, i)));
                        (0..packets.len()).for_each(|i| arrivals.push((Line::B, i)));
                    }
                    _ => (0..packets.len()).for_each(|i| {
                        arrivals.push((Line::B, i));
                        arrivals.push((Line::A, i));
                    }),
                }
                arrivals.retain(|(line, i)| {
                    !(lost[*i] == 1 && *line == Line::A || lost[*i] == 2 && *line == Line::B)
                });
                let mut arbiter = Arbiter::new(config());
                let mut seen = Vec::new();
                let mut first_line = [None; 13];
                for (line, i) in &arrivals {
                    let (first, bytes) = &packets[*i];
                    let size = Packet::parse(bytes).unwrap().count as u64;
                    for s in *first..*first + size {
                        first_line[s as usize].get_or_insert(*line);
                    }
                    // The other line is late, never past the wait: time stands still.
                    feed(&mut arbiter, *line, bytes, 0, &mut seen);
                    assert_eq!(arbiter.poll(0, &mut |o| seen.push(record(o))), None);
                }
                let want: Vec<Seen> = (1..=12)
                    .map(|s| Seen::Message(s, first_line[s as usize].unwrap(), body(s)))
                    .collect();
                assert_eq!(seen, want, "pattern {lost:?} arrival {arrival}");
                assert!(!arbiter.in_gap());
                let c = arbiter.counters();
                assert_eq!(c.requests + c.gaps, 0);
                let copies = arrivals.len() as u64;
                let total_dups = c.lines[0].duplicates + c.lines[1].duplicates;
                let messages_sent: u64 = arrivals
                    .iter()
                    .map(|(_, i)| Packet::parse(&packets[*i].1).unwrap().count as u64)
                    .sum();
                assert!(copies > 0);
                assert_eq!(total_dups, messages_sent - 12);
                assert_eq!(c.lines[0].delivered + c.lines[1].delivered, 12);
            }
        }
    }

    /// Each packet lost on both lines, alone and in pairs: after the line wait the arbiter asks
    /// for exactly the missing run, the answer fills it, and the stream is complete and in order.
    #[test]
    fn both_line_losses_are_recovered_by_rerequest() {
        let packets = packets();
        for lost_a in 0..packets.len() {
            for lost_b in lost_a..packets.len() {
                let mut arbiter = Arbiter::new(config());
                let mut seen = Vec::new();
                let mut now = 0;
                let mut requests = Vec::new();
                for (i, (_, bytes)) in packets.iter().enumerate() {
                    if i == lost_a || i == lost_b {
                        continue;
                    }
                    now += 100;
                    feed(&mut arbiter, Line::A, bytes, now, &mut seen);
                    feed(&mut arbiter, Line::B, bytes, now, &mut seen);
                }
                // A lost tail shows as missing only once a heartbeat says where the stream is.
                feed(&mut arbiter, Line::A, &packet(S1, 13, &[]), now, &mut seen);
                for _ in 0..20 {
                    now += 500;
                    if let Some(request) = arbiter.poll(now, &mut |o| seen.push(record(o))) {
                        requests.push(request);
                        let bodies: Vec<Vec<u8>> = (request.sequence
                            ..request.sequence + u64::from(request.count))
                            .map(body)
                            .collect();
                        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
                        feed(
                            &mut arbiter,
                            Line::Rerequest,
                            &packet(S1, request.sequence, &refs),
                            now,
                            &mut seen,
                        );
                    }
                }
                let messages: Vec<u64> = seen
                    .iter()
                    .map(|s| match s {
                        Seen::Message(n, _, bytes) => {
                            assert_eq!(*bytes, body(*n));
                            *n
                        }
                        other => panic!("{other:?} with packets {lost_a} and {lost_b} lost"),
                    })
                    .collect();
                assert_eq!(messages, (1..=12).collect::<Vec<_>>());
                let first_lost = packets[lost_a].0;
                assert_eq!(requests[0].sequence, first_lost);
                assert_eq!(requests[0].session, S1);
                assert!(requests.len() <= 2);
                assert_eq!(arbiter.counters().gaps, 0);
                assert!(seen.iter().any(
                    |s| matches!(s, Seen::Message(n, Line::Rerequest, _) if *n == first_lost)
                ));
            }
        }
    }

    /// Two runs missing at once: the first recovered after its last allowed request, the second
    /// still gets its own wait and requests (the timers start again when the first missing
    /// number moves), not a give-up on the first run's clock.
    #[test]
    fn each_missing_run_gets_its_own_requests() {
        let mut arbiter = Arbiter::new(config());
        let mut seen = Vec::new();
        for sequence in 1..=10u64 {
            if sequence != 3 && sequence != 7 {
                let bytes = body(sequence);
                feed(
                    &mut arbiter,
                    Line::A,
                    &packet(S1, sequence, &[&bytes]),
                    100,
                    &mut seen,
                );
            }
        }
        let mut requests = Vec::new();
        let answer = |arbiter: &mut Arbiter, sequence: u64, now: u64, seen: &mut Vec<Seen>| {
            let bytes = body(sequence);
            feed(
                arbiter,
                Line::Rerequest,
                &packet(S1, sequence, &[&bytes]),
                now,
                seen,
            );
        };
        for now in [1_100, 3_100, 5_100] {
            requests.extend(arbiter.poll(now, &mut |o| seen.push(record(o))));
        }
        assert_eq!(requests.len(), 3, "the first run used its requests");
        answer(&mut arbiter, 3, 6_000, &mut seen);
        for now in [6_500, 7_100] {
            requests.extend(arbiter.poll(now, &mut |o| seen.push(record(o))));
        }
        assert_eq!(requests.last().map(|r| r.sequence), Some(7), "{requests:?}");
        answer(&mut arbiter, 7, 7_200, &mut seen);
        arbiter.poll(20_000, &mut |o| seen.push(record(o)));
        assert_eq!(arbiter.counters().gaps, 0);
        assert_eq!(arbiter.next_sequence(), 11);
    }

    /// A request goes out after the line wait, no sooner; it is retried at the interval, at most
    /// `max_requests` times; a server that never answers, or answers with another session,
    /// ends in a gap of exactly the lost run at the bound, and the rest follows.
    #[test]
    fn an_unrecoverable_loss_is_a_gap_never_a_hole() {
        for wrong_session_answer in [false, true] {
            let mut arbiter = Arbiter::new(config());
            let mut seen = Vec::new();
            feed(
                &mut arbiter,
                Line::A,
                &packet(S1, 1, &[&body(1), &body(2)]),
                0,
                &mut seen,
            );
            feed(
                &mut arbiter,
                Line::A,
                &packet(S1, 6, &[&body(6)]),
                100,
                &mut seen,
            );
            assert!(arbiter.in_gap());
            let mut out = |o: Output<'_>| panic!("nothing to hand out yet: {o:?}");
            assert_eq!(
                arbiter.poll(1_099, &mut out),
                None,
                "waits for the other line"
            );
            let first = arbiter.poll(1_100, &mut out).expect("first request");
            assert_eq!(
                first,
                Request {
                    session: S1,
                    sequence: 3,
                    count: 3
                }
            );
            assert_eq!(arbiter.poll(3_099, &mut out), None, "rate-limited");
            if wrong_session_answer {
                feed(
                    &mut arbiter,
                    Line::Rerequest,
                    &packet(S2, 3, &[&body(3)]),
                    3_000,
                    &mut seen,
                );
                assert_eq!(arbiter.counters().lines[2].wrong_session, 1);
                assert_eq!(
                    arbiter.session(),
                    Some(S1),
                    "an answer never changes the session"
                );
            }
            assert!(arbiter.poll(3_100, &mut out).is_some());
            assert!(arbiter.poll(5_100, &mut out).is_some());
            assert_eq!(arbiter.poll(7_100, &mut out), None, "at most max_requests");
            assert_eq!(arbiter.next_deadline_ns(), Some(10_100));
            assert_eq!(arbiter.poll(10_099, &mut out), None);
            assert_eq!(arbiter.poll(10_100, &mut |o| seen.push(record(o))), None);
            assert_eq!(
                seen,
                [
                    Seen::Message(1, Line::A, body(1)),
                    Seen::Message(2, Line::A, body(2)),
                    Seen::Gap(3, 3),
                    Seen::Message(6, Line::A, body(6)),
                ]
            );
            assert!(!arbiter.in_gap());
            // A late answer after the gap is a duplicate, never delivered.
            feed(
                &mut arbiter,
                Line::Rerequest,
                &packet(S1, 3, &[&body(3)]),
                11_000,
                &mut seen,
            );
            assert_eq!(seen.len(), 4);
            assert_eq!(arbiter.counters().gap_messages, 3);
        }
    }

    #[test]
    fn a_message_too_far_ahead_gives_up_what_the_ring_cannot_hold() {
        let mut arbiter = Arbiter::new(ArbiterConfig {
            buffer: 4,
            ..config()
        });
        let mut seen = Vec::new();
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 1, &[&body(1)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 3, &[&body(3)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 9, &[&body(9)]),
            0,
            &mut seen,
        );
        assert_eq!(
            seen,
            [
                Seen::Message(1, Line::A, body(1)),
                Seen::Gap(2, 1),
                Seen::Message(3, Line::A, body(3)),
                Seen::Gap(4, 2),
            ]
        );
        feed(
            &mut arbiter,
            Line::B,
            &packet(S1, 6, &[&body(6), &body(7), &body(8)]),
            0,
            &mut seen,
        );
        assert_eq!(seen.len(), 8);
        assert_eq!(seen[7], Seen::Message(9, Line::A, body(9)));
    }

    #[test]
    fn a_session_change_resets_with_a_signal_and_the_old_session_stays_retired() {
        let mut arbiter = Arbiter::new(config());
        let mut seen = Vec::new();
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 1, &[&body(1)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 3, &[&body(3)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::A,
            &packet(S2, 1, &[&body(1)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::B,
            &packet(S1, 2, &[&body(2)]),
            0,
            &mut seen,
        );
        assert_eq!(
            seen,
            [
                Seen::Message(1, Line::A, body(1)),
                Seen::Gap(2, 1),
                Seen::Message(3, Line::A, body(3)),
                Seen::Change(S1, S2),
                Seen::Message(1, Line::A, body(1)),
            ]
        );
        assert_eq!(arbiter.counters().lines[1].wrong_session, 1);
        assert_eq!(arbiter.counters().session_changes, 1);
        // An expected session drops another session's packets until its own arrives.
        let mut expecting = Arbiter::new(ArbiterConfig {
            first_sequence: None,
            ..config()
        });
        let mut seen = Vec::new();
        feed(
            &mut expecting,
            Line::A,
            &packet(S2, 5, &[&body(5)]),
            0,
            &mut seen,
        );
        assert!(seen.is_empty());
        feed(
            &mut expecting,
            Line::A,
            &packet(S1, 5, &[&body(5)]),
            0,
            &mut seen,
        );
        assert_eq!(seen, [Seen::Message(5, Line::A, body(5))]);
    }

    /// A heartbeat or a packet announcing a sequence number far ahead costs at most a scan of
    /// the ring, and what it says is missing becomes one gap, not a hang.
    #[test]
    fn far_sequence_numbers_are_bounded_work() {
        let mut arbiter = Arbiter::new(config());
        let mut seen = Vec::new();
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 1, &[&body(1)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::A,
            &control(S1, u64::MAX - 1, 0),
            0,
            &mut seen,
        );
        let request = arbiter.poll(1_000, &mut |o| seen.push(record(o)));
        assert_eq!(
            request,
            Some(Request {
                session: S1,
                sequence: 2,
                count: 100
            })
        );
        arbiter.poll(10_000, &mut |o| seen.push(record(o)));
        assert_eq!(seen[1], Seen::Gap(2, u64::MAX - 3));
        feed(
            &mut arbiter,
            Line::B,
            &packet(S1, 1 << 62, &[&body(1 << 62)]),
            20_000,
            &mut seen,
        );
        assert_eq!(seen.len(), 2, "a number below the next is a duplicate");
        let mut far = Arbiter::new(config());
        let mut seen = Vec::new();
        feed(
            &mut far,
            Line::A,
            &packet(S1, 1 << 60, &[&body(1 << 60)]),
            0,
            &mut seen,
        );
        assert_eq!(seen[0], Seen::Gap(1, (1 << 60) - 64));
        assert!(far.in_gap());
    }

    #[test]
    fn heartbeats_and_end_of_session() {
        let mut arbiter = Arbiter::new(config());
        let mut seen = Vec::new();
        feed(
            &mut arbiter,
            Line::A,
            &packet(S1, 1, &[&body(1)]),
            0,
            &mut seen,
        );
        feed(&mut arbiter, Line::A, &packet(S1, 2, &[]), 0, &mut seen);
        assert!(
            !arbiter.in_gap(),
            "a heartbeat at the next number is no gap"
        );
        feed(
            &mut arbiter,
            Line::A,
            &control(S1, 4, END_OF_SESSION),
            0,
            &mut seen,
        );
        assert!(arbiter.in_gap(), "the end says 2 and 3 exist");
        feed(
            &mut arbiter,
            Line::B,
            &packet(S1, 2, &[&body(2), &body(3)]),
            0,
            &mut seen,
        );
        feed(
            &mut arbiter,
            Line::B,
            &control(S1, 4, END_OF_SESSION),
            0,
            &mut seen,
        );
        assert_eq!(
            seen,
            [
                Seen::Message(1, Line::A, body(1)),
                Seen::Message(2, Line::B, body(2)),
                Seen::Message(3, Line::B, body(3)),
                Seen::End(S1),
            ]
        );
    }

    #[test]
    fn malformed_packets_are_errors_counted_per_line() {
        let good = packet(S1, 1, &[b"abc", b"de"]);
        assert_eq!(
            Packet::parse(&good[..19]).unwrap_err(),
            MoldError::Short(19)
        );
        // The count says 3 messages; two are there.
        let mut past = good.clone();
        past[19] = 3;
        assert_eq!(
            Packet::parse(&past).unwrap_err(),
            MoldError::CountPastEnd {
                count: 3,
                index: 2,
                len: good.len()
            }
        );
        // A block length past the end.
        let mut long = good.clone();
        long[21] = 200;
        assert!(matches!(
            Packet::parse(&long),
            Err(MoldError::CountPastEnd { index: 0, .. })
        ));
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(
            Packet::parse(&trailing).unwrap_err(),
            MoldError::Trailing(1)
        );
        let overflow = packet(S1, u64::MAX, &[b"x"]);
        assert!(matches!(
            Packet::parse(&overflow),
            Err(MoldError::SequenceOverflow { .. })
        ));
        let mut arbiter = Arbiter::new(config());
        assert!(arbiter.on_packet(Line::B, &past, 0, &mut |_| {}).is_err());
        assert_eq!(arbiter.counters().lines[1].malformed, 1);
        let parsed = Packet::parse(&good).unwrap();
        assert_eq!(parsed.kind(), PacketKind::Messages);
        let messages: Vec<_> = parsed.messages().collect();
        assert_eq!(messages, [(1, &b"abc"[..]), (2, &b"de"[..])]);
        let request = Request {
            session: S2,
            sequence: 0x0102_0304_0506_0708,
            count: 9,
        };
        assert_eq!(Request::parse(&request.encode()), Ok(request));
        assert_eq!(&request.encode()[10..], &[1, 2, 3, 4, 5, 6, 7, 8, 0, 9]);
    }
}
