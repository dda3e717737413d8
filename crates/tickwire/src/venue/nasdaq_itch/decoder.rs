//! The ITCH decoder, sans-IO: MoldUDP64 packets from the A line, the B line and the re-request
//! server in ([`ItchDecoder::on_packet`]), through the [`Arbiter`] (each sequence number once and
//! in order), parsed ([`itch::parse`]) and applied to the L3 [`ItchBook`] of every stock; the
//! bus's normalized events out, each with its message's MoldUDP64 sequence number as `venue_seq`,
//! as the Databento MBO path publishes them:
//!
//! - `A` `F` `E` `C` `X` `D` `U`: a `level` per price level the message changes (its aggregated
//!   size after it, 0 when it empties); `E`, `C` with printable `Y`, `P` and `Q` with shares: a
//!   `trade` (the book's [`BookOutput`]s).
//! - `H` Stock Trading Action: a `trading_status` (DBN's status actions: `T` trading, `H` halt,
//!   `P` pause, `Q` quoting); `Y` Reg SHO: a `trading_status` with the short-sale restriction.
//! - `I` NOII: an `imbalance` (reference price, near price as the continuous book's clearing
//!   price, paired and imbalance shares, direction, cross type as the auction type).
//! - `S` System Event: a `trading_status` for every published stock named by then (its
//!   `trading_event` the event code; `Q` start of market hours is trading, `M` end of market
//!   hours a close).
//! - A run of sequence numbers given up by the arbiter, and a session change: a `gap` for every
//!   published stock (an L3 book cannot be rebuilt from the feed itself; its messages after the
//!   gap are applied, unknown references counted by the book). A session change also empties
//!   the books.
//!
//! Symbols: a stock locate is named by the Stock Directory (`R`) and by the stock field of the
//! messages that carry one; the symbols filter ([`Symbols`]) says which stocks publish. Every
//! message is decoded and booked whatever the filter says. With a list, a stock's instrument is
//! `instrument_base` plus its place in the list; with `*`, plus the order in which stocks were
//! first named. Nothing here allocates after [`ItchDecoder::new`].

use super::book::{BookConfig, BookError, BookOutput, ItchBook};
use super::itch::{self, epoch_ns, price4, Date, ItchError, Message};
use super::mold::{Arbiter, ArbiterConfig, Line, MoldError, Output, Request, Session};
use crate::event::{
    flags, Body, Event, EventHeader, EventKind, Gap, GapReason, Imbalance, InstrumentId, Side,
    TradingStatus, VenueId, NO_PRICE,
};
use crate::fixed::Fixed;
use crate::venue::feed::{own_header, ALL_INSTRUMENTS};

/// Where the decoder's output goes: its events, and, under `*` ([`Symbols::All`]), each stock
/// as it is first named and starts to publish (so that the bus's instrument directory can name
/// it before its first event). Any `FnMut(Event)` is an output that ignores the namings.
pub trait DecoderOutput {
    fn event(&mut self, event: Event);

    /// Under `*`: the stock `symbol` (the ITCH symbol, trimmed) publishes from now on as
    /// `instrument`; called once per instrument, before any event of it.
    fn named(&mut self, _instrument: InstrumentId, _symbol: &[u8]) {}
}

impl<F: FnMut(Event)> DecoderOutput for F {
    #[inline]
    fn event(&mut self, event: Event) {
        self(event)
    }
}

/// Which stocks publish events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Symbols {
    /// Every stock (`symbols = ["*"]`).
    All,
    /// These, by their ITCH symbol (trimmed).
    List(Vec<String>),
}

/// The decoder's settings.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub venue_id: VenueId,
    pub instrument_base: InstrumentId,
    pub symbols: Symbols,
    pub arbiter: ArbiterConfig,
    pub book: BookConfig,
    /// The session's date in New York, for exchange timestamps; `None`: events carry no
    /// exchange time (`flags::NO_EXCHANGE_TS`) until [`ItchDecoder::set_date`].
    pub date: Option<Date>,
}

/// What the decoder counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderCounters {
    /// Messages handed out by the arbiter (or fed unsequenced) and parsed.
    pub messages: u64,
    /// Messages by type, indexed by [`itch::MESSAGE_TYPES`]' order.
    pub by_type: [u64; itch::MESSAGE_TYPES.len()],
    /// Messages refused by the parser (unknown type, a length that disagrees with its type).
    pub malformed_messages: u64,
    /// Packets refused by the MoldUDP64 reader.
    pub malformed_packets: u64,
    /// Messages the book could not take (its caps): each a clear error, counted.
    pub book_full: u64,
    pub events: u64,
    /// Runs of sequence numbers given up (each a `gap` event per published stock).
    pub gaps: u64,
    pub session_changes: u64,
    pub end_of_session: u64,
    /// Stocks named (by the directory or a message's stock field).
    pub stocks: u64,
}

/// The last problem worth a log line, kept until taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    Packet(MoldError),
    Message { sequence: u64, error: ItchError },
    Book { sequence: u64, error: BookError },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Packet(error) => write!(f, "{error}"),
            Problem::Message { sequence, error } => write!(f, "message {sequence}: {error}"),
            Problem::Book { sequence, error } => write!(f, "message {sequence}: {error}"),
        }
    }
}

const NO_INSTRUMENT: u32 = u32::MAX;
const NO_LOCATE: u32 = u32::MAX;
/// Levels a side's snapshot holds before its scratch grows.
const SNAPSHOT_LEVELS: usize = 4096;
const LOCATES: usize = 1 << 16;

#[derive(Clone, Copy)]
struct Stock {
    symbol: [u8; 8],
    len: u8,
    /// Offset from `instrument_base`, [`NO_INSTRUMENT`] when it does not publish.
    instrument: u32,
    named: bool,
}

/// Everything but the arbiter, so that the arbiter's output can reach it.
struct State {
    venue_id: VenueId,
    instrument_base: InstrumentId,
    symbols: Symbols,
    book: ItchBook,
    date: Option<Date>,
    stocks: Box<[Stock]>,
    /// Locates that publish, in the order they were named (for gaps and system events).
    published: Vec<u16>,
    /// The locate of each instrument offset ([`NO_LOCATE`] for a listed symbol not yet named).
    by_instrument: Vec<u32>,
    next_instrument: u32,
    counters: DecoderCounters,
    problem: Option<Problem>,
    /// One side's levels being put in order for a snapshot (kept: it grows only for a side
    /// with more levels than any before).
    snapshot: Vec<(u32, u64)>,
}

/// The decoder of one ITCH feed (both lines and the re-request answers).
pub struct ItchDecoder {
    arbiter: Arbiter,
    state: State,
}

impl ItchDecoder {
    /// Allocates the book's tables, the arbiter's ring and the directory at their full size.
    pub fn new(config: DecoderConfig) -> ItchDecoder {
        let empty = Stock {
            symbol: [b' '; 8],
            len: 0,
            instrument: NO_INSTRUMENT,
            named: false,
        };
        let by_instrument = match &config.symbols {
            Symbols::All => Vec::with_capacity(LOCATES),
            Symbols::List(list) => vec![NO_LOCATE; list.len()],
        };
        ItchDecoder {
            arbiter: Arbiter::new(config.arbiter),
            state: State {
                venue_id: config.venue_id,
                instrument_base: config.instrument_base,
                symbols: config.symbols,
                book: ItchBook::new(config.book),
                date: config.date,
                stocks: vec![empty; LOCATES].into_boxed_slice(),
                published: Vec::with_capacity(LOCATES),
                by_instrument,
                next_instrument: 0,
                counters: DecoderCounters::default(),
                problem: None,
                snapshot: Vec::with_capacity(SNAPSHOT_LEVELS),
            },
        }
    }

    pub fn counters(&self) -> DecoderCounters {
        self.state.counters
    }

    pub fn arbiter(&self) -> &Arbiter {
        &self.arbiter
    }

    pub fn book(&self) -> &ItchBook {
        &self.state.book
    }

    /// The session's date, once known (exchange timestamps need it).
    pub fn set_date(&mut self, date: Date) {
        self.state.date = Some(date);
    }

    pub fn date(&self) -> Option<Date> {
        self.state.date
    }

    /// The last problem not yet taken (a log line's worth).
    pub fn take_problem(&mut self) -> Option<Problem> {
        self.state.problem.take()
    }

    /// The symbol of an instrument this decoder publishes, if named.
    pub fn symbol_of(&self, instrument: InstrumentId) -> Option<&[u8]> {
        let offset = instrument.checked_sub(self.state.instrument_base)?;
        let locate = *self.state.by_instrument.get(offset as usize)?;
        let stock = self.state.stocks.get(locate as usize)?;
        Some(&stock.symbol[..usize::from(stock.len)])
    }

    /// One MoldUDP64 packet from `line`, received at `recv_ts_ns` (the event's receive time)
    /// and taken at `now_ns` (the arbiter's clock). A refused packet is counted and kept as the
    /// problem; nothing from it is applied.
    pub fn on_packet(
        &mut self,
        line: Line,
        bytes: &[u8],
        recv_ts_ns: u64,
        now_ns: u64,
        out: &mut dyn DecoderOutput,
    ) -> Result<(), MoldError> {
        // Every order (and added level) the packet's messages name is asked of the cache before
        // the first is applied, so that their misses overlap (`ItchBook::prefetch_raw`; a hint:
        // a packet the arbiter refuses or holds back has cost a few prefetches).
        let mut rest = bytes.get(super::mold::HEADER_LEN..).unwrap_or_default();
        while let Some(&[high, low]) = rest.get(..2) {
            let end = 2 + usize::from(u16::from_be_bytes([high, low]));
            let Some(message) = rest.get(2..end) else {
                break;
            };
            self.state.book.prefetch_raw(message);
            rest = &rest[end..];
        }
        let state = &mut self.state;
        let result = self.arbiter.on_packet(line, bytes, now_ns, &mut |output| {
            state.output(output, recv_ts_ns, out)
        });
        if let Err(error) = result {
            state.counters.malformed_packets += 1;
            state.problem = Some(Problem::Packet(error));
        }
        result
    }

    /// Runs the arbiter's gap timers at `now_ns`: a re-request to send when one is due; a gap
    /// given up (its `gap` events through `out`).
    pub fn poll(&mut self, now_ns: u64, out: &mut dyn DecoderOutput) -> Option<Request> {
        let state = &mut self.state;
        self.arbiter
            .poll(now_ns, &mut |output| state.output(output, now_ns, out))
    }

    /// When [`ItchDecoder::poll`] next has something to do.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.arbiter.next_deadline_ns()
    }

    /// How many events [`ItchDecoder::emit_books`] would write now for `instrument`'s book (one
    /// instrument, not [`ALL_INSTRUMENTS`]): its levels on both sides, its `SnapshotBegin` and
    /// `SnapshotEnd`; 0 for an instrument that is not a published, named stock.
    pub fn book_events(&self, instrument: InstrumentId) -> usize {
        self.state.locate_of(instrument).map_or(0, |locate| {
            let book = &self.state.book;
            book.side_levels(locate, Side::Bid).count()
                + book.side_levels(locate, Side::Ask).count()
                + 2
        })
    }

    /// Writes the book of `instrument` ([`ALL_INSTRUMENTS`]: of every published stock) as it
    /// stands now, as a snapshot (`SnapshotBegin`, the bids best first, then the asks best
    /// first, `SnapshotEnd`: [`crate::venue::emit::book_snapshot`]), with the last sequence
    /// number applied as the snapshot's `venue_seq`; returns the books written. Each side's
    /// levels come from [`ItchBook::side_levels`], which reads that side's ladder and walks
    /// only its part of the far level index. After a gap the book is as the messages since have left it (the feed
    /// cannot rebuild it; the reader has had the `gap`).
    pub fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        out: &mut dyn FnMut(Event),
    ) -> usize {
        let sequence = self.arbiter.next_sequence().saturating_sub(1);
        let state = &mut self.state;
        if instrument == ALL_INSTRUMENTS {
            for at in 0..state.published.len() {
                let locate = state.published[at];
                state.snapshot(locate, sequence, now_ns, out);
            }
            state.published.len()
        } else {
            match state.locate_of(instrument) {
                Some(locate) => {
                    state.snapshot(locate, sequence, now_ns, out);
                    1
                }
                None => 0,
            }
        }
    }

    /// One message outside MoldUDP64 (a raw ITCH file's, numbered by the caller, or a packet
    /// with no sequence number), applied as if the arbiter had handed it out.
    pub fn on_message(
        &mut self,
        sequence: u64,
        bytes: &[u8],
        recv_ts_ns: u64,
        out: &mut dyn DecoderOutput,
    ) {
        self.state.message(sequence, bytes, recv_ts_ns, out);
    }
}

impl State {
    fn output(&mut self, output: Output<'_>, recv_ts_ns: u64, out: &mut dyn DecoderOutput) {
        match output {
            Output::Message {
                sequence, bytes, ..
            } => self.message(sequence, bytes, recv_ts_ns, out),
            Output::Gap { first, count } => {
                self.counters.gaps += 1;
                self.gap_all(first, first.saturating_add(count), recv_ts_ns, out);
            }
            Output::SessionChange { .. } => {
                self.counters.session_changes += 1;
                self.gap_all(0, 0, recv_ts_ns, out);
                self.book.clear();
            }
            Output::EndOfSession { .. } => self.counters.end_of_session += 1,
        }
    }

    fn header(&self, sequence: u64, timestamp_ns: u64, recv_ts_ns: u64) -> EventHeader {
        let exchange = self.date.and_then(|date| epoch_ns(date, timestamp_ns));
        EventHeader {
            exchange_ts_ns: exchange.unwrap_or(0),
            recv_ts_ns,
            venue_seq: sequence,
            instrument_id: 0,
            venue_id: self.venue_id,
            kind: EventKind::Gap,
            flags: if exchange.is_some() {
                0
            } else {
                flags::NO_EXCHANGE_TS
            },
        }
    }

    /// A gap event (`expected..received`) for every published stock.
    fn gap_all(
        &mut self,
        expected: u64,
        received: u64,
        recv_ts_ns: u64,
        out: &mut dyn DecoderOutput,
    ) {
        for &locate in &self.published {
            let instrument = self.stocks[usize::from(locate)].instrument;
            let header = EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns,
                venue_seq: expected,
                instrument_id: self.instrument_base.wrapping_add(instrument),
                venue_id: self.venue_id,
                kind: EventKind::Gap,
                flags: flags::NO_EXCHANGE_TS | flags::LAST,
            };
            out.event(Event::new(
                header,
                Body::Gap(Gap::new(GapReason::SequenceBreak, expected, received)),
            ));
            self.counters.events += 1;
        }
    }

    /// Names `locate` `symbol` (the first name sticks), deciding whether it publishes; under
    /// `*`, the instrument of a stock that publishes from now on.
    fn name(&mut self, locate: u16, symbol: &itch::Symbol) -> Option<InstrumentId> {
        let stock = &mut self.stocks[usize::from(locate)];
        if stock.named {
            return None;
        }
        let trimmed = symbol.trimmed();
        stock.named = true;
        stock.len = trimmed.len() as u8;
        stock.symbol = symbol.0;
        self.counters.stocks += 1;
        let instrument = match &self.symbols {
            Symbols::All => {
                let id = self.next_instrument;
                self.next_instrument += 1;
                Some(id)
            }
            Symbols::List(list) => list
                .iter()
                .position(|wanted| wanted.as_bytes() == trimmed)
                .map(|at| at as u32),
        };
        if let Some(instrument) = instrument {
            stock.instrument = instrument;
            self.published.push(locate);
            match self.symbols {
                Symbols::All => {
                    self.by_instrument.push(u32::from(locate));
                    return Some(self.instrument_base.wrapping_add(instrument));
                }
                Symbols::List(_) => self.by_instrument[instrument as usize] = u32::from(locate),
            }
        }
        None
    }

    /// The locate of a published, named stock's instrument.
    fn locate_of(&self, instrument: InstrumentId) -> Option<u16> {
        let offset = instrument.wrapping_sub(self.instrument_base);
        let locate = *self.by_instrument.get(offset as usize)?;
        u16::try_from(locate).ok()
    }

    /// `locate`'s book as a snapshot (it publishes: the caller has looked).
    fn snapshot(&mut self, locate: u16, sequence: u64, now_ns: u64, out: &mut dyn FnMut(Event)) {
        let Some(instrument) = self.instrument(locate) else {
            return;
        };
        let scratch = &mut self.snapshot;
        scratch.clear();
        scratch.extend(
            self.book
                .side_levels(locate, Side::Bid)
                .map(|(price, shares, _)| (price, shares)),
        );
        let bids = scratch.len();
        scratch[..bids].sort_unstable_by_key(|level| std::cmp::Reverse(level.0));
        scratch.extend(
            self.book
                .side_levels(locate, Side::Ask)
                .map(|(price, shares, _)| (price, shares)),
        );
        scratch[bids..].sort_unstable_by_key(|level| level.0);
        let asks = scratch.len() - bids;
        let mut header = own_header(self.venue_id, instrument, now_ns);
        header.venue_seq = sequence;
        let levels = scratch.iter().enumerate().map(|(at, &(price, shares))| {
            let side = if at < bids { Side::Bid } else { Side::Ask };
            let size = i64::try_from(shares).ok().and_then(Fixed::from_units);
            let extra = if size.is_none() { flags::SATURATED } else { 0 };
            (side, price4(price), size.unwrap_or(Fixed::MAX), extra)
        });
        crate::venue::emit::book_snapshot(header, bids, asks, levels, &mut |event| out(event));
    }

    /// The instrument of `locate`, when it publishes.
    #[inline]
    fn instrument(&self, locate: u16) -> Option<InstrumentId> {
        let instrument = self.stocks[usize::from(locate)].instrument;
        (instrument != NO_INSTRUMENT).then(|| self.instrument_base.wrapping_add(instrument))
    }

    fn message(
        &mut self,
        sequence: u64,
        bytes: &[u8],
        recv_ts_ns: u64,
        out: &mut dyn DecoderOutput,
    ) {
        let message = match itch::parse(bytes) {
            Ok(message) => message,
            Err(error) => {
                self.counters.malformed_messages += 1;
                self.problem = Some(Problem::Message { sequence, error });
                return;
            }
        };
        self.counters.messages += 1;
        if let Some(at) = itch::type_place(bytes[0]) {
            self.counters.by_type[at] += 1;
        }
        let header_fields = message.header();
        if let Some(stock) = message.stock() {
            if let Some(instrument) = self.name(header_fields.locate, &stock) {
                let named = &self.stocks[usize::from(header_fields.locate)];
                out.named(instrument, &named.symbol[..usize::from(named.len)]);
            }
        }
        let header = self.header(sequence, header_fields.timestamp_ns, recv_ts_ns);
        let mut events = 0u64;
        match message {
            Message::StockTradingAction {
                header: h,
                trading_state,
                ..
            } => {
                if let Some(instrument) = self.instrument(h.locate) {
                    let (action, trading, quoting) = match trading_state {
                        b'H' => (dbn::StatusAction::Halt, b'N', b'N'),
                        b'P' => (dbn::StatusAction::Pause, b'N', b'N'),
                        b'Q' => (dbn::StatusAction::Quoting, b'N', b'Y'),
                        b'T' => (dbn::StatusAction::Trading, b'Y', b'Y'),
                        _ => (dbn::StatusAction::None, b'~', b'~'),
                    };
                    events += emit_status(
                        out,
                        header,
                        instrument,
                        action as u16,
                        0,
                        trading,
                        quoting,
                        b'~',
                    );
                }
            }
            Message::RegShoRestriction {
                header: h, action, ..
            } => {
                if let Some(instrument) = self.instrument(h.locate) {
                    let restricted = match action {
                        b'0' => b'N',
                        b'1' | b'2' => b'Y',
                        _ => b'~',
                    };
                    events += emit_status(
                        out,
                        header,
                        instrument,
                        dbn::StatusAction::SsrChange as u16,
                        0,
                        b'~',
                        b'~',
                        restricted,
                    );
                }
            }
            Message::SystemEvent { event_code, .. } => {
                let action = match event_code {
                    b'Q' => dbn::StatusAction::Trading,
                    b'M' => dbn::StatusAction::Close,
                    b'S' => dbn::StatusAction::PreOpen,
                    _ => dbn::StatusAction::None,
                };
                for at in 0..self.published.len() {
                    let locate = self.published[at];
                    let instrument = self
                        .instrument_base
                        .wrapping_add(self.stocks[usize::from(locate)].instrument);
                    events += emit_status(
                        out,
                        header,
                        instrument,
                        action as u16,
                        u16::from(event_code),
                        b'~',
                        b'~',
                        b'~',
                    );
                }
            }
            Message::Noii {
                header: h,
                paired_shares,
                imbalance_shares,
                imbalance_direction,
                near_price,
                current_reference_price,
                cross_type,
                ..
            } => {
                if let Some(instrument) = self.instrument(h.locate) {
                    let price = |raw: u32| if raw == 0 { NO_PRICE } else { price4(raw) };
                    let side = match imbalance_direction {
                        b'B' => Side::Bid,
                        b'S' => Side::Ask,
                        _ => Side::None,
                    };
                    let mut header = header;
                    header.instrument_id = instrument;
                    header.flags |= flags::LAST;
                    out.event(Event::new(
                        header,
                        Body::Imbalance(Imbalance {
                            ref_price: price(current_reference_price),
                            cont_book_clr_price: price(near_price),
                            paired_qty: u32::try_from(paired_shares).unwrap_or(u32::MAX),
                            total_imbalance_qty: u32::try_from(imbalance_shares)
                                .unwrap_or(u32::MAX),
                            side: side as u8,
                            auction_type: cross_type,
                            significant_imbalance: b'~',
                            unpaired_side: Side::None as u8,
                            ..Imbalance::default()
                        }),
                    ));
                    events += 1;
                }
            }
            _ => {
                // The book: levels and trades, each for its order's stock.
                let stocks = &self.stocks;
                let base = self.instrument_base;
                let mut last: Option<Event> = None;
                let result = self.book.apply(&message, &mut |change| {
                    let locate = match change {
                        BookOutput::Level { locate, .. } | BookOutput::Trade { locate, .. } => {
                            locate
                        }
                    };
                    let offset = stocks[usize::from(locate)].instrument;
                    if offset == NO_INSTRUMENT {
                        return;
                    }
                    if let Some(previous) = last.take() {
                        out.event(previous);
                        events += 1;
                    }
                    let mut event = change.event(header, base.wrapping_add(offset));
                    if let Body::BookLevel(level) = event.body() {
                        if level.size == Fixed::MAX {
                            event.header.flags |= flags::SATURATED;
                        }
                    }
                    last = Some(event);
                });
                if let Some(mut event) = last {
                    event.header.flags |= flags::LAST;
                    out.event(event);
                    events += 1;
                }
                if let Err(error) = result {
                    self.counters.book_full += 1;
                    self.problem = Some(Problem::Book { sequence, error });
                }
            }
        }
        self.counters.events += events;
    }
}

#[allow(clippy::too_many_arguments)]
fn emit_status(
    out: &mut dyn DecoderOutput,
    mut header: EventHeader,
    instrument: InstrumentId,
    action: u16,
    trading_event: u16,
    is_trading: u8,
    is_quoting: u8,
    is_short_sell_restricted: u8,
) -> u64 {
    header.instrument_id = instrument;
    header.flags |= flags::LAST;
    out.event(Event::new(
        header,
        Body::TradingStatus(TradingStatus {
            action,
            reason: 0,
            trading_event,
            is_trading,
            is_quoting,
            is_short_sell_restricted,
            _reserved: [0; 23],
        }),
    ));
    1
}

/// The session's New York date at `epoch_ns` (a capture's or the wall clock's time).
pub fn new_york_date(epoch_ns: u64) -> Option<Date> {
    const HOUR_NS: u64 = 3_600_000_000_000;
    let standard = civil_date(epoch_ns.checked_sub(5 * HOUR_NS)?);
    if itch::is_dst_at_midnight(standard) {
        return Some(civil_date(epoch_ns.checked_sub(4 * HOUR_NS)?));
    }
    Some(standard)
}

/// The UTC calendar date of `epoch_ns` (H. Hinnant's `civil_from_days`).
fn civil_date(epoch_ns: u64) -> Date {
    let days = (epoch_ns / 86_400_000_000_000) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    Date { year, month, day }
}

/// The session of a packet's first 10 bytes, for messages.
pub fn session_of(packet: &[u8]) -> Option<Session> {
    let mut session = [0u8; 10];
    session.copy_from_slice(packet.get(..10)?);
    Some(Session(session))
}

#[cfg(test)]
mod tests {
    use super::super::generate::{mold_packet, Generator, MAX_GENERATED_LEN};
    use super::*;

    fn config(symbols: Symbols) -> DecoderConfig {
        DecoderConfig {
            venue_id: 3,
            instrument_base: 100,
            symbols,
            arbiter: ArbiterConfig::default(),
            book: BookConfig {
                max_orders: 1 << 16,
                max_levels: 1 << 14,
            },
            date: Some(Date {
                year: 2019,
                month: 1,
                day: 30,
            }),
        }
    }

    #[test]
    fn new_york_dates_follow_daylight_saving() {
        // 2019-01-30 04:59 UTC is still the 29th in New York (EST); 05:00 is the 30th.
        let jan30 = epoch_ns(
            Date {
                year: 2019,
                month: 1,
                day: 30,
            },
            0,
        )
        .unwrap();
        assert_eq!(new_york_date(jan30).unwrap().day, 30);
        assert_eq!(new_york_date(jan30 - 1).unwrap().day, 29);
        // In July midnight is 04:00 UTC.
        let jul4 = epoch_ns(
            Date {
                year: 2024,
                month: 7,
                day: 4,
            },
            0,
        )
        .unwrap();
        assert_eq!(
            new_york_date(jul4),
            Some(Date {
                year: 2024,
                month: 7,
                day: 4
            })
        );
        assert_eq!(new_york_date(jul4 - 1).unwrap().day, 3);
    }

    /// Every generated message goes through the decoder: the events are the book's outputs
    /// for the published stocks only, each with its message's sequence number, the last of a
    /// message flagged.
    #[test]
    fn generated_packets_publish_levels_and_trades_with_their_sequence_numbers() {
        let mut generator = Generator::new(7, 20, 2_000);
        let mut decoder = ItchDecoder::new(config(Symbols::All));
        let mut reference = ItchBook::new(BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 14,
        });
        let session = Session(*b"TESTSESS01");
        let mut packet = Vec::new();
        let mut sequence = 1u64;
        let mut expected = 0u64;
        for _ in 0..2_000 {
            let mut messages = [[0u8; MAX_GENERATED_LEN]; 5];
            let mut lens = [0usize; 5];
            for (message, len) in messages.iter_mut().zip(lens.iter_mut()) {
                *len = generator.next_message(message);
                let parsed = itch::parse(&message[..*len]).unwrap();
                reference.apply(&parsed, &mut |_| expected += 1).unwrap();
            }
            assert!(mold_packet(
                session,
                sequence,
                messages.iter().zip(lens).map(|(m, len)| &m[..len]),
                &mut packet
            ));
            let first = sequence;
            let mut seen = Vec::new();
            decoder
                .on_packet(Line::A, &packet, 1, 1, &mut |event| seen.push(event))
                .unwrap();
            // Duplicates on line B publish nothing.
            decoder
                .on_packet(Line::B, &packet, 2, 2, &mut |_| {
                    panic!("a duplicate published")
                })
                .unwrap();
            for event in &seen {
                assert!((first..first + 5).contains(&event.header.venue_seq));
                assert!(event.header.instrument_id >= 100);
                assert_eq!(event.header.venue_id, 3);
                assert!(event.header.exchange_ts_ns > 0);
            }
            sequence += 5;
        }
        let counters = decoder.counters();
        assert_eq!(counters.messages, 10_000);
        assert_eq!(counters.events, expected);
        assert_eq!(decoder.arbiter().counters().lines[1].duplicates, 10_000);
    }

    /// A bus reader's snapshot of a stock's book holds the levels that the decoder's own
    /// `level` events have built so far (a plain `BTreeMap` per instrument, side and price, as
    /// a reader keeps it), bids best first then asks best first, between a `SnapshotBegin` with
    /// the counts and a `SnapshotEnd` flagged last; `ALL_INSTRUMENTS` gives every published
    /// stock's; an instrument that is not a published stock gives none.
    #[test]
    fn snapshots_are_the_books_the_level_events_built() {
        use std::collections::BTreeMap;
        let mut generator = Generator::new(11, 12, 1_500);
        let mut decoder = ItchDecoder::new(config(Symbols::All));
        let session = Session(*b"TESTSESS01");
        let mut packet = Vec::new();
        let mut built: BTreeMap<(InstrumentId, u8, i64), i64> = BTreeMap::new();
        for n in 0..6_000u64 {
            let mut message = [0u8; MAX_GENERATED_LEN];
            let len = generator.next_message(&mut message);
            assert!(mold_packet(
                session,
                1 + n,
                std::iter::once(&message[..len]),
                &mut packet
            ));
            decoder
                .on_packet(Line::A, &packet, 1, 1, &mut |event: Event| {
                    if let Body::BookLevel(level) = event.body() {
                        let key = (event.header.instrument_id, level.side, level.price.0);
                        if level.size == Fixed::ZERO {
                            built.remove(&key);
                        } else {
                            built.insert(key, level.size.0);
                        }
                    }
                })
                .unwrap();
        }
        assert_eq!(decoder.counters().stocks, 12);
        let mut all = Vec::new();
        assert_eq!(
            decoder.emit_books(ALL_INSTRUMENTS, 9, &mut |event| all.push(event)),
            12
        );
        let mut total = 0;
        for instrument in 100..112 {
            let mut events = Vec::new();
            assert_eq!(
                decoder.emit_books(instrument, 9, &mut |event| events.push(event)),
                1
            );
            assert_eq!(events.len(), decoder.book_events(instrument));
            total += events.len();
            let mut bids: Vec<_> = built
                .range(
                    (instrument, Side::Bid as u8, i64::MIN)
                        ..=(instrument, Side::Bid as u8, i64::MAX),
                )
                .map(|(key, size)| (Side::Bid, key.2, *size))
                .collect();
            bids.reverse();
            let asks = built
                .range(
                    (instrument, Side::Ask as u8, i64::MIN)
                        ..=(instrument, Side::Ask as u8, i64::MAX),
                )
                .map(|(key, size)| (Side::Ask, key.2, *size));
            let want: Vec<_> = bids.iter().copied().chain(asks).collect();
            assert!(want.len() > 10, "a stock with a book");
            let (first, rest) = events.split_first().unwrap();
            let (last, levels) = rest.split_last().unwrap();
            match (first.body(), last.body()) {
                (Body::SnapshotBegin(begin), Body::SnapshotEnd(end)) => {
                    assert_eq!(begin.bid_levels as usize, bids.len());
                    assert_eq!(begin.bid_levels + begin.ask_levels, want.len() as u32);
                    assert_eq!(begin.snapshot_id, 6_000, "the last sequence applied");
                    assert_eq!(end.bid_levels, begin.bid_levels);
                }
                other => panic!("{other:?}"),
            }
            assert!(last.header.flags & flags::LAST != 0);
            let got: Vec<_> = levels
                .iter()
                .map(|event| match event.body() {
                    Body::BookLevel(level) => {
                        assert!(event.header.flags & flags::SNAPSHOT != 0);
                        assert_eq!(event.header.instrument_id, instrument);
                        (level.side(), level.price.0, level.size.0)
                    }
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(got, want, "instrument {instrument}");
        }
        assert_eq!(all.len(), total);
        for instrument in [99, 112, ALL_INSTRUMENTS - 1] {
            assert_eq!(decoder.book_events(instrument), 0);
            assert_eq!(decoder.emit_books(instrument, 9, &mut |_| panic!()), 0);
        }
    }

    /// Under `*` each publishing stock is named once, before its first event; with a list,
    /// nothing is named (the control thread names the listed symbols).
    #[test]
    fn under_a_star_each_stock_is_named_once_before_its_first_event() {
        #[derive(Default)]
        struct Recorded {
            named: Vec<(InstrumentId, Vec<u8>)>,
            events: u64,
        }
        impl DecoderOutput for Recorded {
            fn event(&mut self, event: Event) {
                let id = event.header.instrument_id;
                assert!(
                    self.named.iter().any(|(named, _)| *named == id),
                    "an event of instrument {id} before it was named"
                );
                self.events += 1;
            }
            fn named(&mut self, instrument: InstrumentId, symbol: &[u8]) {
                assert!(self.named.iter().all(|(named, _)| *named != instrument));
                self.named.push((instrument, symbol.to_vec()));
            }
        }
        struct Listed(u64);
        impl DecoderOutput for Listed {
            fn event(&mut self, _event: Event) {
                self.0 += 1;
            }
            fn named(&mut self, instrument: InstrumentId, _symbol: &[u8]) {
                panic!("listed instrument {instrument} named by the feed");
            }
        }
        for symbols in [Symbols::All, Symbols::List(vec!["S00003".to_owned()])] {
            let listed = symbols != Symbols::All;
            let mut generator = Generator::new(9, 12, 300);
            let mut decoder = ItchDecoder::new(config(symbols));
            let mut out = Recorded::default();
            let mut message = [0u8; MAX_GENERATED_LEN];
            let mut listed_out = Listed(0);
            for sequence in 1..=3_000u64 {
                let len = generator.next_message(&mut message);
                if listed {
                    decoder.on_message(sequence, &message[..len], 0, &mut listed_out);
                } else {
                    decoder.on_message(sequence, &message[..len], 0, &mut out);
                }
            }
            if listed {
                assert!(listed_out.0 > 0);
                continue;
            }
            assert!(out.events > 1_000);
            assert_eq!(out.named.len(), 12);
            for (offset, (instrument, symbol)) in out.named.iter().enumerate() {
                assert_eq!(*instrument, 100 + offset as u32, "in the order first named");
                assert_eq!(decoder.symbol_of(*instrument), Some(symbol.as_slice()));
            }
        }
    }
}
