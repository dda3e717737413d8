//! The connection lifecycle: one explicit state machine per venue connection, run by the control
//! thread, sans-IO (it takes inputs with the time and returns actions; the control thread turns
//! those into commands for the network thread).
//!
//! ```text
//!            start / backoff elapsed
//!   Idle ───────────────────────────► Connecting ──tcp up──► TlsHandshake ──► Upgrading
//!    ▲                                    ▲                      (wss only)       │ 101
//!    │ retired, shutdown                  │ backoff elapsed                       ▼
//!  Closing ◄── ack timeout, all stale, ─ BackingOff ◄── any failure ──── Subscribing
//!    │          rotation done               ▲                                │ every ack
//!    └──── closed / close timeout ──────────┘                                ▼
//!                                           Live ◄──── recovered ────── Stale
//! ```
//!
//! `Connecting` covers the address lookup too: every attempt resolves the venue's host afresh
//! (off the control thread, `venue::resolve`), so a venue that moves is followed, and a lookup
//! that fails ends the attempt with [`Reason::DnsFailed`] like any other failure.
//!
//! Every transition carries a [`Reason`]; the machine counts transitions per reason, and the
//! control thread logs each transition once. Timers (handshake, acknowledgement, closing
//! handshake, backoff) are deadlines checked by [`Connection::tick`], so nothing sleeps;
//! [`Connection::next_deadline_ns`] says when the next one falls due, so the control thread can
//! wake for it.
//!
//! **Invariant:** a connection attempt never starts before its backoff delay has passed and
//! never exceeds the venue's [`StormBreaker`] cap, whatever the venue does.

pub mod backoff;

pub use backoff::{Backoff, StormBreaker};

use crate::config::{LifecycleConfig, ReconnectConfig};
use crate::net::engine::{PreambleError, StreamError};
use crate::net::ConnId;
use std::collections::VecDeque;

const NS_PER_MS: u64 = 1_000_000;
/// Subscription requests sent per second at most. Binance USD-M allows 10 incoming messages per
/// second per connection, pongs and the close frame included: half of it leaves room for those.
pub const REQUESTS_PER_SEC: usize = 5;

/// Where a connection is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnState {
    /// Not started, or retired (after a rotation or at shutdown).
    Idle = 0,
    /// The venue's host is being resolved, or the TCP connect is in flight.
    Connecting = 1,
    TlsHandshake = 2,
    /// The WebSocket upgrade request is out.
    Upgrading = 3,
    /// Subscription requests are out and acknowledgements are awaited.
    Subscribing = 4,
    Live = 5,
    /// Every stream on the connection went silent; it is being recycled.
    Stale = 6,
    /// A close frame is out; the socket is dropped when the venue answers or the timeout passes.
    Closing = 7,
    /// Waiting before the next attempt.
    BackingOff = 8,
    /// `reconnect.max_attempts` failures in a row: no more attempts.
    GaveUp = 9,
}

impl ConnState {
    pub fn name(self) -> &'static str {
        match self {
            ConnState::Idle => "idle",
            ConnState::Connecting => "connecting",
            ConnState::TlsHandshake => "tls-handshake",
            ConnState::Upgrading => "upgrading",
            ConnState::Subscribing => "subscribing",
            ConnState::Live => "live",
            ConnState::Stale => "stale",
            ConnState::Closing => "closing",
            ConnState::BackingOff => "backing-off",
            ConnState::GaveUp => "gave-up",
        }
    }

    /// Whether a socket exists (or is being made) in this state.
    pub fn has_socket(self) -> bool {
        matches!(
            self,
            ConnState::Connecting
                | ConnState::TlsHandshake
                | ConnState::Upgrading
                | ConnState::Subscribing
                | ConnState::Live
                | ConnState::Stale
                | ConnState::Closing
        )
    }
}

/// Why a transition happened. The number is the `reason_code` of status events.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    Start = 1,
    TcpConnected = 2,
    TlsEstablished = 3,
    Upgraded = 4,
    Subscribed = 5,
    BackoffElapsed = 6,
    ConnectFailed = 7,
    HandshakeTimeout = 8,
    TlsFailed = 9,
    HandshakeFailed = 10,
    /// The venue closed the connection cleanly (a WebSocket close).
    ClosedByVenue = 11,
    /// A reset, an I/O error, or TCP closed without a WebSocket close.
    ConnectionLost = 12,
    ProtocolError = 13,
    AckTimeout = 14,
    AllStreamsStale = 15,
    /// A new connection replaces this one before the venue's lifetime limit.
    Rotation = 16,
    /// The replacement is live and agrees with this one: this one closes.
    Retired = 17,
    CloseTimeout = 18,
    Shutdown = 19,
    /// `reconnect.max_attempts` failures in a row.
    AttemptsExhausted = 20,
    /// The network thread could not open the stream (no free slot, bad TLS settings).
    OpenRefused = 21,
    /// Data flows again on a stale connection.
    Recovered = 22,
    /// Nothing at all was read for `lifecycle.read_timeout_ms` (not even pongs).
    ReadTimeout = 23,
    /// The venue refused a request for exceeding its request rate (Thalex error code 4).
    Throttled = 24,
    /// The venue refused the credentials (Databento's gateway answered the challenge with
    /// `success=0`).
    AuthFailed = 25,
    /// The frame ring was full and a byte stream lost bytes (the decoder fell behind).
    Overrun = 26,
    /// The venue's host did not resolve to an address (DNS is asked again at every attempt).
    DnsFailed = 27,
}

impl Reason {
    pub const ALL: [Reason; 27] = [
        Reason::Start,
        Reason::TcpConnected,
        Reason::TlsEstablished,
        Reason::Upgraded,
        Reason::Subscribed,
        Reason::BackoffElapsed,
        Reason::ConnectFailed,
        Reason::HandshakeTimeout,
        Reason::TlsFailed,
        Reason::HandshakeFailed,
        Reason::ClosedByVenue,
        Reason::ConnectionLost,
        Reason::ProtocolError,
        Reason::AckTimeout,
        Reason::AllStreamsStale,
        Reason::Rotation,
        Reason::Retired,
        Reason::CloseTimeout,
        Reason::Shutdown,
        Reason::AttemptsExhausted,
        Reason::OpenRefused,
        Reason::Recovered,
        Reason::ReadTimeout,
        Reason::Throttled,
        Reason::AuthFailed,
        Reason::Overrun,
        Reason::DnsFailed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Start => "start",
            Reason::TcpConnected => "tcp-connected",
            Reason::TlsEstablished => "tls-established",
            Reason::Upgraded => "upgraded",
            Reason::Subscribed => "subscribed",
            Reason::BackoffElapsed => "backoff-elapsed",
            Reason::ConnectFailed => "connect-failed",
            Reason::HandshakeTimeout => "handshake-timeout",
            Reason::TlsFailed => "tls-failed",
            Reason::HandshakeFailed => "handshake-failed",
            Reason::ClosedByVenue => "closed-by-venue",
            Reason::ConnectionLost => "connection-lost",
            Reason::ProtocolError => "protocol-error",
            Reason::AckTimeout => "ack-timeout",
            Reason::AllStreamsStale => "all-streams-stale",
            Reason::Rotation => "rotation",
            Reason::Retired => "retired",
            Reason::CloseTimeout => "close-timeout",
            Reason::Shutdown => "shutdown",
            Reason::AttemptsExhausted => "attempts-exhausted",
            Reason::OpenRefused => "open-refused",
            Reason::Recovered => "recovered",
            Reason::ReadTimeout => "read-timeout",
            Reason::Throttled => "throttled",
            Reason::AuthFailed => "auth-failed",
            Reason::Overrun => "overrun",
            Reason::DnsFailed => "dns-failed",
        }
    }

    fn index(self) -> usize {
        self as usize - 1
    }

    /// Whether a connection ending for this reason counts as a failure for the backoff.
    fn is_failure(self) -> bool {
        !matches!(self, Reason::Retired | Reason::Shutdown)
    }

    /// Whether a connection recycled for this reason is judged dead: nothing arrives on it, so
    /// no close frame would be answered either.
    fn means_dead(self) -> bool {
        matches!(self, Reason::AllStreamsStale | Reason::ReadTimeout)
    }
}

/// How a stream's end, as the network engine reports it, counts for the lifecycle.
pub fn reason_of(error: Option<&StreamError>) -> Reason {
    match error {
        None => Reason::ClosedByVenue,
        Some(StreamError::Connect(_)) => Reason::ConnectFailed,
        Some(StreamError::Io(_) | StreamError::ClosedWithoutClose) => Reason::ConnectionLost,
        Some(StreamError::Tls(_)) => Reason::TlsFailed,
        Some(StreamError::Handshake(_) | StreamError::ClosedDuringHandshake) => {
            Reason::HandshakeFailed
        }
        Some(StreamError::WebSocket(_)) => Reason::ProtocolError,
        Some(StreamError::Preamble(PreambleError::Refused(_))) => Reason::AuthFailed,
        Some(StreamError::Preamble(PreambleError::Protocol(_))) => Reason::HandshakeFailed,
        Some(StreamError::Overrun(_)) => Reason::Overrun,
    }
}

/// Transitions per reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasonCounts([u64; Reason::ALL.len()]);

impl ReasonCounts {
    pub fn get(&self, reason: Reason) -> u64 {
        self.0[reason.index()]
    }

    fn add(&mut self, reason: Reason) {
        self.0[reason.index()] += 1;
    }

    /// Adds another connection's counts.
    pub fn merge(&mut self, other: &ReasonCounts) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }

    /// `(reason, count)` for every reason counted at least once.
    pub fn nonzero(&self) -> impl Iterator<Item = (Reason, u64)> + '_ {
        Reason::ALL
            .iter()
            .map(|&reason| (reason, self.get(reason)))
            .filter(|&(_, count)| count > 0)
    }
}

/// What the machine asks the control thread to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open the connection's stream (a new attempt).
    Open,
    /// Send subscription request `batch` (an index into the batches given to `new`) with `id`.
    Subscribe { id: u64, batch: usize },
    /// Start the WebSocket closing handshake.
    Close,
    /// Drop the socket at once.
    Abort,
    /// A state change, for the log (once per transition) and status events.
    Transition {
        from: ConnState,
        to: ConnState,
        reason: Reason,
    },
    /// The connection that carried data ended: unless it was retired after a rotation, the
    /// strategy is owed a gap for its instruments.
    Down { gap: bool },
}

/// The timers of a connection, from the venue config.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub handshake_timeout_ns: u64,
    pub ack_timeout_ns: u64,
    pub close_timeout_ns: u64,
    pub reset_after_live_ns: u64,
    pub max_attempts: Option<u32>,
}

impl Timing {
    pub fn new(reconnect: &ReconnectConfig, lifecycle: &LifecycleConfig) -> Timing {
        Timing {
            // Saturating: the config check bounds every key, and a value past it must not wrap
            // into a short timer (issue 32).
            handshake_timeout_ns: lifecycle.handshake_timeout_ms.saturating_mul(NS_PER_MS),
            ack_timeout_ns: lifecycle.ack_timeout_ms.saturating_mul(NS_PER_MS),
            close_timeout_ns: lifecycle.close_timeout_ms.saturating_mul(NS_PER_MS),
            reset_after_live_ns: reconnect.reset_after_live_ms.saturating_mul(NS_PER_MS),
            max_attempts: reconnect.max_attempts,
        }
    }
}

/// One venue connection's state machine.
pub struct Connection {
    slot: ConnId,
    secure: bool,
    timing: Timing,
    state: ConnState,
    since_ns: u64,
    /// The current state's timer (`u64::MAX`: none).
    deadline_ns: u64,
    backoff: Backoff,
    /// When the connection last became live.
    live_since_ns: Option<u64>,
    /// Whether data may have flowed on the current socket (it reached `Subscribing`).
    carried_data: bool,
    /// Where `Closing` leads: `Idle` for a retirement or shutdown, else `BackingOff`.
    after_close: ConnState,
    /// The reason the current close or failure started with, for the next transition.
    closing_reason: Reason,
    batches: usize,
    next_batch: usize,
    next_id: u64,
    /// Requests sent and not acknowledged: `(id, deadline)`.
    /// Requests awaiting an answer: (id, deadline, batch).
    outstanding: Vec<(u64, u64, usize)>,
    /// When the requests of the last second went out (pacing).
    sent: VecDeque<u64>,
    /// Requests the venue refused (logged by the control thread).
    pub refused: u64,
    counts: ReasonCounts,
    /// The reason of the last transition (`None` before the first).
    last_reason: Option<Reason>,
    /// Attempts started, in all.
    pub attempts: u64,
}

impl Connection {
    /// A connection in `Idle` for stream slot `slot`, whose subscriptions take `batches`
    /// requests. `seed` seeds the backoff jitter.
    pub fn new(
        slot: ConnId,
        secure: bool,
        timing: Timing,
        reconnect: &ReconnectConfig,
        batches: usize,
        seed: u64,
    ) -> Connection {
        Connection {
            slot,
            secure,
            timing,
            state: ConnState::Idle,
            since_ns: 0,
            deadline_ns: u64::MAX,
            backoff: Backoff::new(reconnect, seed ^ u64::from(slot).wrapping_mul(0x9e37)),
            live_since_ns: None,
            carried_data: false,
            after_close: ConnState::BackingOff,
            closing_reason: Reason::Shutdown,
            batches,
            next_batch: 0,
            next_id: 1,
            outstanding: Vec::new(),
            sent: VecDeque::with_capacity(REQUESTS_PER_SEC),
            refused: 0,
            counts: ReasonCounts::default(),
            last_reason: None,
            attempts: 0,
        }
    }

    pub fn slot(&self) -> ConnId {
        self.slot
    }

    pub fn state(&self) -> ConnState {
        self.state
    }

    /// When the current state was entered.
    pub fn since_ns(&self) -> u64 {
        self.since_ns
    }

    pub fn live_since_ns(&self) -> Option<u64> {
        self.live_since_ns
    }

    pub fn counts(&self) -> &ReasonCounts {
        &self.counts
    }

    /// Why the machine entered its current state (`None` before the first transition): what
    /// `/healthz` names for a connection that is not live, `dns-failed` for one backing off
    /// because its host did not resolve.
    pub fn last_reason(&self) -> Option<Reason> {
        self.last_reason
    }

    /// The earliest time [`Connection::tick`] has something to do (a timeout, the end of the
    /// backoff, the next paced request), so that the control thread can sleep until then and
    /// not a tick longer; `None` when no timer runs.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        let deadline = match self.state {
            ConnState::TlsHandshake
            | ConnState::Upgrading
            | ConnState::Closing
            | ConnState::BackingOff => self.deadline_ns,
            ConnState::Subscribing => {
                let acks = self
                    .outstanding
                    .iter()
                    .map(|&(_, deadline, _)| deadline)
                    .min()
                    .unwrap_or(u64::MAX);
                let paced = if self.next_batch < self.batches {
                    // The next request goes out when the oldest of the last second's leaves
                    // the pacing window.
                    self.sent
                        .front()
                        .map_or(u64::MAX, |&at| at.saturating_add(1_000 * NS_PER_MS))
                } else {
                    u64::MAX
                };
                acks.min(paced)
            }
            ConnState::Idle
            | ConnState::Connecting
            | ConnState::Live
            | ConnState::Stale
            | ConnState::GaveUp => u64::MAX,
        };
        (deadline != u64::MAX).then_some(deadline)
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// When the next attempt is due while backing off.
    pub fn retry_at_ns(&self) -> Option<u64> {
        (self.state == ConnState::BackingOff).then_some(self.deadline_ns)
    }

    fn go(&mut self, now_ns: u64, to: ConnState, reason: Reason, out: &mut Vec<Action>) {
        self.counts.add(reason);
        self.last_reason = Some(reason);
        out.push(Action::Transition {
            from: self.state,
            to,
            reason,
        });
        self.state = to;
        self.since_ns = now_ns;
        self.deadline_ns = u64::MAX;
    }

    /// Starts the first attempt (or a new one from `Idle`), within the storm breaker's cap.
    pub fn start(&mut self, now_ns: u64, breaker: &mut StormBreaker, out: &mut Vec<Action>) {
        if self.state != ConnState::Idle {
            return;
        }
        self.attempt(now_ns, Reason::Start, breaker, out);
    }

    fn attempt(
        &mut self,
        now_ns: u64,
        reason: Reason,
        breaker: &mut StormBreaker,
        out: &mut Vec<Action>,
    ) {
        let allowed = breaker.earliest(now_ns);
        if allowed > now_ns {
            breaker.postponed += 1;
            if self.state != ConnState::BackingOff {
                self.go(now_ns, ConnState::BackingOff, reason, out);
            }
            self.deadline_ns = allowed;
            return;
        }
        breaker.record(now_ns);
        self.attempts += 1;
        self.carried_data = false;
        self.outstanding.clear();
        self.next_batch = 0;
        self.after_close = ConnState::BackingOff;
        self.go(now_ns, ConnState::Connecting, reason, out);
        out.push(Action::Open);
    }

    /// TCP is up.
    pub fn on_connected(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        if self.state != ConnState::Connecting {
            return;
        }
        let next = if self.secure {
            ConnState::TlsHandshake
        } else {
            ConnState::Upgrading
        };
        self.go(now_ns, next, Reason::TcpConnected, out);
        self.deadline_ns = now_ns.saturating_add(self.timing.handshake_timeout_ns);
    }

    /// The TLS handshake finished.
    pub fn on_secured(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        if self.state != ConnState::TlsHandshake {
            return;
        }
        let deadline = self.deadline_ns;
        self.go(now_ns, ConnState::Upgrading, Reason::TlsEstablished, out);
        self.deadline_ns = deadline;
    }

    /// The WebSocket upgrade is done: subscribe.
    pub fn on_open(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        if !matches!(
            self.state,
            ConnState::Connecting | ConnState::TlsHandshake | ConnState::Upgrading
        ) {
            return;
        }
        self.carried_data = true;
        // The venue's limit is per connection (Binance: 10 incoming messages a second per
        // connection): a new socket starts with a fresh window, so a reconnect never waits for
        // the requests its dead predecessor sent (issue 24: the fifth reconnect within a second
        // waited 250-430 ms for them).
        self.sent.clear();
        self.go(now_ns, ConnState::Subscribing, Reason::Upgraded, out);
        self.send_due(now_ns, out);
        self.maybe_live(now_ns, out);
    }

    /// The venue acknowledged request `id`.
    pub fn on_ack(&mut self, now_ns: u64, id: u64, out: &mut Vec<Action>) {
        self.outstanding.retain(|&(pending, _, _)| pending != id);
        self.maybe_live(now_ns, out);
    }

    /// The venue refused request `id` (counted; the connection stays up for the other streams).
    pub fn on_refused(&mut self, now_ns: u64, id: u64, out: &mut Vec<Action>) {
        if self
            .outstanding
            .iter()
            .any(|&(pending, _, _)| pending == id)
        {
            self.refused += 1;
        }
        self.on_ack(now_ns, id, out);
    }

    /// Whether `id` is a request of this connection's current socket that awaits an answer.
    pub fn awaits(&self, id: u64) -> bool {
        self.outstanding
            .iter()
            .any(|&(pending, _, _)| pending == id)
    }

    /// The oldest request still awaiting an answer.
    pub fn oldest_outstanding(&self) -> Option<u64> {
        self.outstanding.first().map(|&(id, _, _)| id)
    }

    /// The batch request `id` sent, while it awaits an answer.
    pub fn batch_of(&self, id: u64) -> Option<usize> {
        self.outstanding
            .iter()
            .find(|&&(pending, _, _)| pending == id)
            .map(|&(_, _, batch)| batch)
    }

    fn maybe_live(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        if self.state == ConnState::Subscribing
            && self.next_batch == self.batches
            && self.outstanding.is_empty()
        {
            self.go(now_ns, ConnState::Live, Reason::Subscribed, out);
            self.live_since_ns = Some(now_ns);
        }
    }

    /// Sends the requests the pacing allows now.
    fn send_due(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        while self.next_batch < self.batches {
            while self
                .sent
                .front()
                .is_some_and(|&at| at + 1_000 * NS_PER_MS <= now_ns)
            {
                self.sent.pop_front();
            }
            if self.sent.len() >= REQUESTS_PER_SEC {
                return;
            }
            let id = (u64::from(self.slot) << 32) | self.next_id;
            self.next_id += 1;
            out.push(Action::Subscribe {
                id,
                batch: self.next_batch,
            });
            self.outstanding.push((
                id,
                now_ns.saturating_add(self.timing.ack_timeout_ns),
                self.next_batch,
            ));
            self.next_batch += 1;
            self.sent.push_back(now_ns);
        }
    }

    /// The stream ended (the network thread reported it closed, or could not open it).
    pub fn on_closed(&mut self, now_ns: u64, reason: Reason, out: &mut Vec<Action>) {
        if !self.state.has_socket() {
            return;
        }
        let reason = if self.state == ConnState::Closing {
            self.closing_reason
        } else {
            reason
        };
        self.ended(now_ns, reason, out);
    }

    /// The socket is gone: back off, give up, or rest.
    fn ended(&mut self, now_ns: u64, reason: Reason, out: &mut Vec<Action>) {
        let retiring = self.state == ConnState::Closing && self.after_close == ConnState::Idle;
        if self.carried_data {
            out.push(Action::Down { gap: !retiring });
            self.carried_data = false;
        }
        self.outstanding.clear();
        if retiring || !reason.is_failure() {
            self.live_since_ns = None;
            self.go(now_ns, ConnState::Idle, reason, out);
            return;
        }
        if self
            .live_since_ns
            .take()
            .is_some_and(|since| now_ns.saturating_sub(since) >= self.timing.reset_after_live_ns)
        {
            self.backoff.reset();
        }
        let delay = self.backoff.next_delay_ns();
        if self
            .timing
            .max_attempts
            .is_some_and(|max| self.backoff.failures() >= max)
        {
            self.go(now_ns, ConnState::GaveUp, Reason::AttemptsExhausted, out);
            return;
        }
        self.go(now_ns, ConnState::BackingOff, reason, out);
        self.deadline_ns = now_ns.saturating_add(delay);
    }

    /// Starts a close that ends in `after` (`Idle` to retire, `BackingOff` to reconnect).
    fn close(&mut self, now_ns: u64, reason: Reason, after: ConnState, out: &mut Vec<Action>) {
        if !self.state.has_socket() || self.state == ConnState::Closing {
            if self.state == ConnState::Closing && after == ConnState::Idle {
                self.after_close = ConnState::Idle;
                self.closing_reason = reason;
            }
            return;
        }
        self.after_close = after;
        self.closing_reason = reason;
        if matches!(
            self.state,
            ConnState::Subscribing | ConnState::Live | ConnState::Stale
        ) {
            self.go(now_ns, ConnState::Closing, reason, out);
            self.deadline_ns = now_ns.saturating_add(self.timing.close_timeout_ns);
            out.push(Action::Close);
        } else {
            // Nothing to close gracefully before the upgrade.
            out.push(Action::Abort);
            self.state = ConnState::Closing;
            self.ended(now_ns, reason, out);
        }
    }

    /// Every stream of the live connection went silent: recycle it.
    pub fn recycle(&mut self, now_ns: u64, out: &mut Vec<Action>) {
        self.recycle_for(now_ns, Reason::AllStreamsStale, out);
    }

    /// The live (or subscribing) connection is unhealthy for `reason`: close it and reconnect.
    /// A connection judged dead (every watched stream silent, or nothing read within the read
    /// timeout) is dropped at once and the backoff starts: a peer that sends nothing will not
    /// answer a close frame either, and waiting out the close timeout would only delay the
    /// reconnect (issue 24). Any other reason closes gracefully.
    pub fn recycle_for(&mut self, now_ns: u64, reason: Reason, out: &mut Vec<Action>) {
        if !matches!(self.state, ConnState::Live | ConnState::Subscribing) {
            return;
        }
        self.go(now_ns, ConnState::Stale, reason, out);
        if reason.means_dead() {
            // From `Stale` straight to the backoff: the strategy hears the connection go down
            // now, not after a close timeout.
            self.after_close = ConnState::BackingOff;
            self.closing_reason = reason;
            out.push(Action::Abort);
            self.ended(now_ns, reason, out);
        } else {
            self.close(now_ns, reason, ConnState::BackingOff, out);
        }
    }

    /// Closes the connection for good (after a rotation, or at shutdown).
    pub fn retire(&mut self, now_ns: u64, reason: Reason, out: &mut Vec<Action>) {
        match self.state {
            ConnState::BackingOff | ConnState::GaveUp => {
                self.go(now_ns, ConnState::Idle, reason, out)
            }
            _ => self.close(now_ns, reason, ConnState::Idle, out),
        }
    }

    /// Checks the timers.
    pub fn tick(&mut self, now_ns: u64, breaker: &mut StormBreaker, out: &mut Vec<Action>) {
        match self.state {
            ConnState::TlsHandshake | ConnState::Upgrading if now_ns >= self.deadline_ns => {
                out.push(Action::Abort);
                self.ended(now_ns, Reason::HandshakeTimeout, out);
            }
            ConnState::Subscribing => {
                if self
                    .outstanding
                    .iter()
                    .any(|&(_, deadline, _)| now_ns >= deadline)
                {
                    self.close(now_ns, Reason::AckTimeout, ConnState::BackingOff, out);
                } else {
                    self.send_due(now_ns, out);
                }
            }
            ConnState::Closing if now_ns >= self.deadline_ns => {
                out.push(Action::Abort);
                let reason = self.closing_reason;
                self.counts.add(Reason::CloseTimeout);
                self.ended(now_ns, reason, out);
            }
            ConnState::BackingOff if now_ns >= self.deadline_ns => {
                self.attempt(now_ns, Reason::BackoffElapsed, breaker, out);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = NS_PER_MS;

    fn reconnect() -> ReconnectConfig {
        ReconnectConfig {
            initial_delay_ms: 100,
            max_delay_ms: 1_000,
            factor: 2.0,
            max_attempts: None,
            reset_after_live_ms: 10_000,
            max_attempts_per_minute: 100,
        }
    }

    fn machine(batches: usize, reconnect: &ReconnectConfig) -> Connection {
        let timing = Timing::new(reconnect, &LifecycleConfig::default());
        Connection::new(3, true, timing, reconnect, batches, 1)
    }

    fn transitions(out: &[Action]) -> Vec<(ConnState, Reason)> {
        out.iter()
            .filter_map(|action| match action {
                Action::Transition { to, reason, .. } => Some((*to, *reason)),
                _ => None,
            })
            .collect()
    }

    fn go_live(machine: &mut Connection, breaker: &mut StormBreaker, now: u64) -> Vec<Action> {
        let mut out = Vec::new();
        machine.start(now, breaker, &mut out);
        machine.on_connected(now, &mut out);
        machine.on_secured(now, &mut out);
        machine.on_open(now, &mut out);
        let ids: Vec<u64> = out
            .iter()
            .filter_map(|action| match action {
                Action::Subscribe { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        for id in ids {
            machine.on_ack(now, id, &mut out);
        }
        out
    }

    #[test]
    fn walks_every_state_to_live_with_reasons() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(2, &reconnect());
        let out = go_live(&mut conn, &mut breaker, 0);
        assert_eq!(
            transitions(&out),
            [
                (ConnState::Connecting, Reason::Start),
                (ConnState::TlsHandshake, Reason::TcpConnected),
                (ConnState::Upgrading, Reason::TlsEstablished),
                (ConnState::Subscribing, Reason::Upgraded),
                (ConnState::Live, Reason::Subscribed),
            ]
        );
        assert_eq!(
            out.first(),
            Some(&Action::Transition {
                from: ConnState::Idle,
                to: ConnState::Connecting,
                reason: Reason::Start
            })
        );
        assert!(out.contains(&Action::Open));
        // Request ids carry the slot in their high half, so replies find their connection.
        assert!(out.contains(&Action::Subscribe {
            id: (3 << 32) | 1,
            batch: 0
        }));
        assert_eq!(conn.counts().get(Reason::Subscribed), 1);
    }

    #[test]
    fn a_drop_backs_off_then_reconnects_and_owes_a_gap() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        go_live(&mut conn, &mut breaker, 0);
        let mut out = Vec::new();
        conn.on_closed(5 * MS, Reason::ConnectionLost, &mut out);
        assert!(out.contains(&Action::Down { gap: true }));
        assert_eq!(conn.state(), ConnState::BackingOff);
        let retry = conn.retry_at_ns().expect("a retry is scheduled");
        assert!(
            (5 * MS + MS..=5 * MS + 100 * MS).contains(&retry),
            "{retry}"
        );
        out.clear();
        conn.tick(retry - 1, &mut breaker, &mut out);
        assert!(out.is_empty(), "no attempt before the delay: {out:?}");
        conn.tick(retry, &mut breaker, &mut out);
        assert_eq!(
            transitions(&out),
            [(ConnState::Connecting, Reason::BackoffElapsed)]
        );
        assert!(out.contains(&Action::Open));
    }

    #[test]
    fn a_host_that_does_not_resolve_backs_off_and_is_asked_again() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        assert!(out.contains(&Action::Open));
        assert_eq!(
            conn.next_deadline_ns(),
            None,
            "resolving has no timer of its own"
        );
        out.clear();
        conn.on_closed(MS, Reason::DnsFailed, &mut out);
        assert_eq!(
            transitions(&out),
            [(ConnState::BackingOff, Reason::DnsFailed)]
        );
        assert!(
            !out.iter()
                .any(|action| matches!(action, Action::Down { .. })),
            "no data flowed: no gap"
        );
        assert_eq!(conn.last_reason(), Some(Reason::DnsFailed));
        assert_eq!(conn.failures(), 1);
        let retry = conn.retry_at_ns().expect("a retry is scheduled");
        assert_eq!(conn.next_deadline_ns(), Some(retry));
        out.clear();
        conn.tick(retry, &mut breaker, &mut out);
        assert_eq!(
            transitions(&out),
            [(ConnState::Connecting, Reason::BackoffElapsed)]
        );
        assert!(
            out.contains(&Action::Open),
            "the next attempt resolves again"
        );
        assert_eq!(conn.counts().get(Reason::DnsFailed), 1);
        assert_eq!(conn.attempts, 2);
    }

    #[test]
    fn the_next_deadline_is_the_running_timer() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        let mut out = Vec::new();
        assert_eq!(conn.next_deadline_ns(), None);
        conn.start(0, &mut breaker, &mut out);
        conn.on_connected(2 * MS, &mut out);
        let handshake = LifecycleConfig::default().handshake_timeout_ms * MS;
        assert_eq!(conn.next_deadline_ns(), Some(2 * MS + handshake));
        conn.on_secured(3 * MS, &mut out);
        assert_eq!(conn.next_deadline_ns(), Some(2 * MS + handshake));
        conn.on_open(4 * MS, &mut out);
        let ack = LifecycleConfig::default().ack_timeout_ms * MS;
        assert_eq!(conn.next_deadline_ns(), Some(4 * MS + ack));
        let id = out
            .iter()
            .find_map(|action| match action {
                Action::Subscribe { id, .. } => Some(*id),
                _ => None,
            })
            .expect("a subscription request");
        conn.on_ack(5 * MS, id, &mut out);
        assert_eq!(conn.state(), ConnState::Live);
        assert_eq!(
            conn.next_deadline_ns(),
            None,
            "the link logic times a live one"
        );
    }

    #[test]
    fn handshake_and_ack_timeouts() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        conn.on_connected(0, &mut out);
        out.clear();
        conn.tick(10_000 * MS - 1, &mut breaker, &mut out);
        assert!(out.is_empty());
        conn.tick(10_000 * MS, &mut breaker, &mut out);
        assert_eq!(out[0], Action::Abort);
        assert_eq!(conn.state(), ConnState::BackingOff);
        assert_eq!(conn.counts().get(Reason::HandshakeTimeout), 1);
        // The next attempt gets upgraded, but its subscription is never acknowledged.
        let now = conn.retry_at_ns().unwrap();
        out.clear();
        conn.tick(now, &mut breaker, &mut out);
        conn.on_connected(now, &mut out);
        conn.on_secured(now, &mut out);
        conn.on_open(now, &mut out);
        out.clear();
        conn.tick(now + 5_000 * MS, &mut breaker, &mut out);
        assert_eq!(
            transitions(&out),
            [(ConnState::Closing, Reason::AckTimeout)]
        );
        assert!(out.contains(&Action::Close));
        out.clear();
        conn.on_closed(now + 5_001 * MS, Reason::ClosedByVenue, &mut out);
        assert_eq!(
            transitions(&out),
            [(ConnState::BackingOff, Reason::AckTimeout)]
        );
        assert_eq!(conn.counts().get(Reason::AckTimeout), 2);
    }

    #[test]
    fn a_close_that_is_not_answered_is_aborted() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        go_live(&mut conn, &mut breaker, 0);
        let mut out = Vec::new();
        conn.recycle_for(MS, Reason::Throttled, &mut out);
        assert_eq!(
            transitions(&out),
            [
                (ConnState::Stale, Reason::Throttled),
                (ConnState::Closing, Reason::Throttled)
            ]
        );
        assert!(out.contains(&Action::Close));
        out.clear();
        conn.tick(MS + 1_000 * MS, &mut breaker, &mut out);
        assert_eq!(out[0], Action::Abort);
        assert_eq!(conn.state(), ConnState::BackingOff);
        assert_eq!(conn.counts().get(Reason::CloseTimeout), 1);
    }

    #[test]
    fn a_dead_connection_is_dropped_at_once() {
        for reason in [Reason::AllStreamsStale, Reason::ReadTimeout] {
            let mut breaker = StormBreaker::new(10);
            let mut conn = machine(1, &reconnect());
            go_live(&mut conn, &mut breaker, 0);
            let mut out = Vec::new();
            conn.recycle_for(MS, reason, &mut out);
            assert_eq!(
                transitions(&out),
                [(ConnState::Stale, reason), (ConnState::BackingOff, reason)],
                "{reason:?}"
            );
            assert!(out.contains(&Action::Abort), "{reason:?}");
            assert!(
                !out.contains(&Action::Close),
                "{reason:?}: no close handshake"
            );
            assert_eq!(conn.counts().get(Reason::CloseTimeout), 0);
            // The backoff runs from the moment it was judged dead.
            assert!(conn.retry_at_ns().is_some_and(|at| at > MS));
        }
    }

    #[test]
    fn retiring_owes_no_gap_and_rests() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(1, &reconnect());
        go_live(&mut conn, &mut breaker, 0);
        let mut out = Vec::new();
        conn.retire(MS, Reason::Retired, &mut out);
        assert!(out.contains(&Action::Close));
        out.clear();
        conn.on_closed(2 * MS, Reason::ClosedByVenue, &mut out);
        assert!(out.contains(&Action::Down { gap: false }));
        assert_eq!(conn.state(), ConnState::Idle);
        assert_eq!(conn.failures(), 0);
    }

    #[test]
    fn gives_up_after_max_attempts() {
        let mut config = reconnect();
        config.max_attempts = Some(3);
        let mut breaker = StormBreaker::new(100);
        let mut conn = machine(1, &config);
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        let mut now = 0;
        for _ in 0..3 {
            conn.on_closed(now, Reason::ConnectFailed, &mut out);
            if let Some(retry) = conn.retry_at_ns() {
                now = retry;
                conn.tick(now, &mut breaker, &mut out);
            }
        }
        assert_eq!(conn.state(), ConnState::GaveUp);
        assert_eq!(conn.attempts, 3);
        out.clear();
        conn.tick(now + 3_600_000 * MS, &mut breaker, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn staying_live_resets_the_backoff() {
        let mut breaker = StormBreaker::new(100);
        let mut conn = machine(1, &reconnect());
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        let mut now = 0;
        for _ in 0..4 {
            conn.on_closed(now, Reason::ConnectFailed, &mut out);
            now = conn.retry_at_ns().unwrap();
            conn.tick(now, &mut breaker, &mut out);
        }
        assert_eq!(conn.failures(), 4);
        conn.on_connected(now, &mut out);
        conn.on_secured(now, &mut out);
        out.clear();
        conn.on_open(now, &mut out);
        let Some(Action::Subscribe { id, .. }) = out
            .iter()
            .find(|a| matches!(a, Action::Subscribe { .. }))
            .cloned()
        else {
            panic!("no request: {out:?}");
        };
        assert!(conn.awaits(id));
        conn.on_ack(now, id, &mut out);
        assert_eq!(conn.state(), ConnState::Live);
        conn.on_closed(now + 10_000 * MS, Reason::ClosedByVenue, &mut out);
        // Reset, then this failure counted: the delay is drawn from the initial range again.
        assert_eq!(conn.failures(), 1);
        let delay = conn.retry_at_ns().unwrap() - (now + 10_000 * MS);
        assert!(delay <= 100 * MS, "{delay}");
    }

    #[test]
    fn the_breaker_caps_attempts_per_minute() {
        let mut config = reconnect();
        config.initial_delay_ms = 1;
        config.max_delay_ms = 1;
        let mut breaker = StormBreaker::new(5);
        let mut conn = machine(1, &config);
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        let mut now = 0;
        // Refused at once every time, for two minutes, checked every millisecond.
        while now < 119_000 * MS {
            if conn.state() == ConnState::Connecting {
                conn.on_closed(now, Reason::ConnectFailed, &mut out);
            }
            now += MS;
            conn.tick(now, &mut breaker, &mut out);
        }
        // 5 in the first minute, 5 in the second.
        assert_eq!(conn.attempts, 10, "{}", conn.attempts);
        assert!(breaker.postponed > 0);
    }

    #[test]
    fn requests_are_paced() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(7, &reconnect());
        let mut out = Vec::new();
        conn.start(0, &mut breaker, &mut out);
        conn.on_connected(0, &mut out);
        conn.on_secured(0, &mut out);
        out.clear();
        conn.on_open(0, &mut out);
        let sent = |out: &[Action]| {
            out.iter()
                .filter(|action| matches!(action, Action::Subscribe { .. }))
                .count()
        };
        assert_eq!(sent(&out), REQUESTS_PER_SEC);
        out.clear();
        conn.tick(999 * MS, &mut breaker, &mut out);
        assert_eq!(sent(&out), 0);
        conn.tick(1_000 * MS, &mut breaker, &mut out);
        assert_eq!(sent(&out), 2);
    }

    #[test]
    fn a_new_connection_paces_its_requests_afresh() {
        let mut breaker = StormBreaker::new(10);
        let mut conn = machine(7, &reconnect());
        let mut out = Vec::new();
        let sent = |out: &[Action]| {
            out.iter()
                .filter(|action| matches!(action, Action::Subscribe { .. }))
                .count()
        };
        conn.start(0, &mut breaker, &mut out);
        conn.on_connected(0, &mut out);
        conn.on_secured(0, &mut out);
        conn.on_open(0, &mut out);
        assert_eq!(sent(&out), REQUESTS_PER_SEC);
        // The socket dies 10 ms later; the next one opens well inside the same second.
        let mut now = 10 * MS;
        conn.on_closed(now, Reason::ConnectionLost, &mut out);
        while conn.state() != ConnState::Connecting {
            now += MS;
            conn.tick(now, &mut breaker, &mut out);
        }
        conn.on_connected(now, &mut out);
        conn.on_secured(now, &mut out);
        out.clear();
        conn.on_open(now, &mut out);
        assert!(now < 1_000 * MS, "{now}");
        assert_eq!(
            sent(&out),
            REQUESTS_PER_SEC,
            "the new socket's limit is its own"
        );
    }
}
