//! DBN records to tickwire events: one [`RecordRef`] (its instrument already mapped to a tickwire
//! [`InstrumentId`] by the caller) in, zero or more [`Event`]s out through the caller's callback.
//!
//! # The mapping
//!
//! | DBN record | events |
//! |---|---|
//! | MBO | `BookLevel` per level the L3 book ([`MboBook`]) changes; a derived `Quote` when the top changed, at the end of a venue event only (see below); `Trade` for action `T`; nothing for `F` (fill) or `N`; `R` (clear) removes every level; an add flagged `F_TOB` (a top-of-book publisher: IEX, NYSE National) replaces its side's levels with its own, or with none at `UNDEF_PRICE`, as Databento documents (see `book::mbo`) |
//! | MBO snapshot (flag `SNAPSHOT`) | applied silently; at its `LAST` record `SnapshotBegin`, every level best first (bids then asks), `SnapshotEnd`, then the derived `Quote` |
//! | MBP-1 / TBBO, CMBP-1 / TCBBO | `Quote` when the top differs from the last one sent for the instrument, then `Trade` for action `T` |
//! | MBP-10 | `BookLevel` per level that differs from the instrument's previous record (a level gone is size 0), `Quote` when the top changed, `Trade` for action `T` |
//! | BBO-1s/1m, CBBO-1s/1m | `Quote`, always (each is a sample of the top, not a change) |
//! | trades (MBP-0) | `Trade` |
//! | OHLCV (every interval, and the legacy `OHLCV_DEPRECATED`) | `Bar` |
//! | status | `TradingStatus` |
//! | imbalance | `Imbalance` |
//! | statistics | `Statistic` |
//! | instrument definition | nothing ([`Outcome::Definition`], counted) |
//! | symbol mapping, system, error | nothing: [`Outcome::Control`] tells the caller (the feed) which |
//!
//! Prices are DBN's `i64` in 1e-9 units, which is `Fixed`'s raw scale: copied as they are. Sizes
//! are whole units (`Fixed::from_units`). An MBO book level's total (a `u64`) above the
//! 9,223,372,036 units `Fixed` holds goes out as `Fixed::MAX` with `flags::SATURATED`, counted
//! in [`NormalizerCounters::saturated`] (see `level_size`). A quote side with `UNDEF_PRICE` has price and size 0
//! (tickwire's empty side); a trade with `UNDEF_PRICE` is dropped (counted in
//! [`NormalizerCounters::undefined_prices`]); the optional prices of imbalances and statistics
//! keep `UNDEF_PRICE`, which is [`NO_PRICE`] (the same bits).
//!
//! Every event's header: `exchange_ts_ns` = DBN `ts_event` (0 and `NO_EXCHANGE_TS` when it is
//! `UNDEF_TIMESTAMP`), `recv_ts_ns` = the caller's receive time, `venue_seq` = DBN `sequence`
//! where the record has one (0 otherwise; an OHLCV bar's volume, see [`Bar`]). tickwire's `LAST`
//! flag is set on the last event of a record that ends a venue event: DBN records with a `flags`
//! field end one when they carry DBN's `LAST` (0x80); the others (OHLCV, status, imbalance,
//! statistics) always do.
//!
//! An MBO book rests at most [`Normalizer::with_max_orders_per_book`] orders
//! (`databento.max_orders_per_book`). An add past that is refused by the book; the book then
//! lacks an order, so it is dropped: the strategy gets a `Gap` (`GapReason::Limit`) for the
//! instrument, the book restarts empty and is rebuilt from the records that follow (as after a
//! reconnect with `recovery = "gap"`), and the record returns [`NormalizeError::BookLimit`]
//! (counted in [`NormalizerCounters::book_limits`]).
//!
//! **Invariant:** nothing here allocates per record. The per-instrument state (an L3 book, the
//! last MBP-10 levels, the last quote) is made the first time an instrument shows up; an MBO
//! snapshot reads the book's levels into a `Vec` once per snapshot.

use crate::book::mbo::{LevelUpdate, MboBook, MboError};
use crate::book::BookSide;
use crate::event::{
    flags, Bar, BarInterval, Body, BookLevel, Event, EventHeader, EventKind, Gap, GapReason,
    Imbalance, InstrumentId, Quote, Side, Snapshot, Statistic, Trade, TradingStatus, VenueId,
};
use crate::fixed::Fixed;
use crate::hash::IdMap;
use crate::venue::emit::Emitter;
use crate::venue::feed::{own_header, ALL_INSTRUMENTS};
use dbn::{
    rtype, BboMsg, BidAskPair, CbboMsg, Cmbp1Msg, ConsolidatedBidAskPair, ErrorMsg, HasRType,
    ImbalanceMsg, InstrumentDefMsg, MboMsg, Mbp10Msg, Mbp1Msg, OhlcvMsg, Record, RecordHeader,
    RecordRef, Schema, StatMsg, StatusMsg, SymbolMappingMsg, SystemMsg, TradeMsg,
};

/// What a record was, when it is not market data the normalizer turned into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// `SymbolMappingMsg`: the gateway names an instrument id's symbol.
    SymbolMapping,
    /// `SystemMsg`: a heartbeat, subscription ack, slow-reader warning...
    System,
    /// `ErrorMsg`: the gateway reports an error.
    Error,
}

/// What [`Normalizer::normalize`] did with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Market data: its events (possibly none, as for a fill) went to the callback.
    Normalized,
    /// An instrument definition: no events.
    Definition,
    /// Not market data: the caller handles it (read the record as the named type).
    Control(Control),
    /// An rtype the normalizer does not know (its value), skipped.
    Unsupported(u8),
}

/// Why a record could not be normalized. Small and `Copy`: the caller counts it and logs a
/// sample, and the stream goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeError {
    /// The record's length is shorter than its rtype's v3 layout (a corrupt record: the stream
    /// upgrades every older version to v3).
    #[error("record of rtype {rtype:#04x} is {bytes} bytes, shorter than its layout")]
    Short { rtype: u8, bytes: usize },
    /// The L3 book refused an MBO record; the book is unchanged.
    #[error("instrument {instrument}: MBO book: {error}")]
    Book {
        instrument: InstrumentId,
        error: MboError,
    },
    /// An add would have taken the instrument's MBO book past its order limit: the book was
    /// dropped and the strategy told by a `Gap` (`GapReason::Limit`); it is rebuilt from what
    /// follows.
    #[error("instrument {instrument}: L3 book at its limit of {limit} orders: dropped, gap sent")]
    BookLimit {
        instrument: InstrumentId,
        limit: usize,
    },
}

/// Records seen, per kind, and what went wrong. Plain counts: the owner copies them into its
/// metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NormalizerCounters {
    pub mbo: u64,
    pub mbp1: u64,
    pub mbp10: u64,
    pub bbo: u64,
    pub cbbo: u64,
    pub cmbp1: u64,
    pub trades: u64,
    pub ohlcv: u64,
    pub status: u64,
    pub imbalance: u64,
    pub statistics: u64,
    pub definitions: u64,
    pub control: u64,
    pub unsupported: u64,
    /// MBO snapshots completed (`SnapshotEnd` sent).
    pub snapshots: u64,
    /// MBO records the book refused (not counting those at its order limit).
    pub book_errors: u64,
    /// MBO books dropped at their order limit, each with a gap.
    pub book_limits: u64,
    /// Records shorter than their layout.
    pub short: u64,
    /// Trades dropped because their price was `UNDEF_PRICE`.
    pub undefined_prices: u64,
    /// Events whose size a book level's total saturated (`flags::SATURATED`: `Fixed::MAX`, a
    /// floor of the true size).
    pub saturated: u64,
}

/// The orders and levels per side an instrument's L3 book holds before it grows. A book
/// that outgrows them doubles (an allocation each time) until it reaches its working size; from
/// an empty `MboBook` every book did, the first ones in the steady state (issue 32). About
/// 60 KiB per instrument the feed sees MBO records for.
const MBO_ORDERS: usize = 1024;
const MBO_LEVELS_PER_SIDE: usize = 256;

/// One instrument's MBO state.
struct MboState {
    book: MboBook,
    /// The last derived quote sent.
    top: Quote,
    /// A snapshot's records are being applied (silently).
    in_snapshot: bool,
}

impl MboState {
    fn new(max_orders: usize) -> MboState {
        MboState {
            book: MboBook::with_capacity(MBO_ORDERS, MBO_LEVELS_PER_SIDE)
                .with_max_orders(max_orders),
            top: Quote::default(),
            in_snapshot: false,
        }
    }
}

/// The 10 levels of an instrument's last MBP-10 record, and its last quote.
struct Mbp10State {
    levels: [BidAskPair; 10],
}

/// Turns DBN records into tickwire events. One per venue connection (its books follow that
/// connection's stream).
pub struct Normalizer {
    venue_id: VenueId,
    /// The interval of legacy `OHLCV_DEPRECATED` bars, from the metadata's schema.
    legacy_bar_interval: BarInterval,
    books: IdMap<MboState>,
    mbp10: IdMap<Mbp10State>,
    /// The last quote sent per instrument for the event-driven top-of-book schemas (MBP-1,
    /// CMBP-1, MBP-10).
    tops: IdMap<Quote>,
    /// The most orders one MBO book rests.
    max_orders_per_book: usize,
    counters: NormalizerCounters,
}

/// A DBN size (whole units, a `u32`) as `Fixed`. At most 4,294,967,295 units, which `Fixed`
/// always holds (up to 9,223,372,036 at 1e-9); the fallback is never taken.
#[inline]
fn units(size: u32) -> Fixed {
    Fixed::from_units(i64::from(size)).unwrap_or(Fixed::MAX)
}

/// An order book level's total size as `Fixed`, and whether it saturated. The book keeps totals
/// as `u64` sums of `u32` order sizes, which cannot overflow (that would take more than 2^32
/// orders of the largest size at one price), but above 9,223,372,036 units a total does not fit
/// `Fixed`'s `i64` of 1e-9 units: it is then published as `Fixed::MAX` with
/// [`flags::SATURATED`] on the event and counted ([`NormalizerCounters::saturated`]), never
/// silently.
#[inline]
fn level_size(total: u64) -> (Fixed, bool) {
    match i64::try_from(total).ok().and_then(Fixed::from_units) {
        Some(size) => (size, false),
        None => (Fixed::MAX, true),
    }
}

/// The tickwire side of a DBN side character (`B`, `A`; anything else is `None`). For a trade
/// it is the aggressor's side, as tickwire's `Trade` wants it.
#[inline]
fn side_of(side: std::ffi::c_char) -> Side {
    match side as u8 {
        b'B' => Side::Bid,
        b'A' => Side::Ask,
        _ => Side::None,
    }
}

/// One quote side: (price, size), or (0, 0) when DBN has no level.
#[inline]
fn quote_side(price: i64, size: u32) -> (Fixed, Fixed) {
    if price == dbn::UNDEF_PRICE {
        (Fixed::ZERO, Fixed::ZERO)
    } else {
        (Fixed(price), units(size))
    }
}

fn quote_of(bid_px: i64, bid_sz: u32, ask_px: i64, ask_sz: u32) -> Quote {
    let (bid_px, bid_sz) = quote_side(bid_px, bid_sz);
    let (ask_px, ask_sz) = quote_side(ask_px, ask_sz);
    Quote {
        bid_px,
        bid_sz,
        ask_px,
        ask_sz,
    }
}

/// A DBN level's top of book as a quote (`BidAskPair` and `ConsolidatedBidAskPair` alike).
trait TopOfBook {
    fn quote(&self) -> Quote;
}

impl TopOfBook for BidAskPair {
    fn quote(&self) -> Quote {
        quote_of(self.bid_px, self.bid_sz, self.ask_px, self.ask_sz)
    }
}

impl TopOfBook for ConsolidatedBidAskPair {
    fn quote(&self) -> Quote {
        quote_of(self.bid_px, self.bid_sz, self.ask_px, self.ask_sz)
    }
}

/// The record as `T`, checking its length first: `RecordRef::get` panics on a record shorter
/// than `T` (and `try_get` formats a `String` for the error).
#[inline]
pub(crate) fn typed<'a, T: HasRType<Header = RecordHeader>>(
    record: &RecordRef<'a>,
) -> Result<&'a T, NormalizeError> {
    let bytes = record.record_size();
    if bytes < std::mem::size_of::<T>() {
        return Err(NormalizeError::Short {
            rtype: record.header().rtype,
            bytes,
        });
    }
    // The caller matched the rtype to `T` and the length is checked, so `get` neither fails
    // nor panics.
    record.get::<T>().ok_or(NormalizeError::Short {
        rtype: record.header().rtype,
        bytes,
    })
}

/// The venue's capture-server receive time (`ts_recv`) of a market-data record, for replaying a
/// file with its own receive times; `None` for records without one or too short for their type.
pub fn record_ts_recv(record: &RecordRef<'_>) -> Option<u64> {
    let ts_recv = match record.header().rtype {
        rtype::MBO => typed::<MboMsg>(record).ok()?.ts_recv,
        rtype::MBP_0 => typed::<TradeMsg>(record).ok()?.ts_recv,
        rtype::MBP_1 => typed::<Mbp1Msg>(record).ok()?.ts_recv,
        rtype::MBP_10 => typed::<Mbp10Msg>(record).ok()?.ts_recv,
        rtype::BBO_1S | rtype::BBO_1M => typed::<BboMsg>(record).ok()?.ts_recv,
        rtype::CBBO_1S | rtype::CBBO_1M => typed::<CbboMsg>(record).ok()?.ts_recv,
        rtype::CMBP_1 | rtype::TCBBO => typed::<Cmbp1Msg>(record).ok()?.ts_recv,
        rtype::STATUS => typed::<StatusMsg>(record).ok()?.ts_recv,
        rtype::IMBALANCE => typed::<ImbalanceMsg>(record).ok()?.ts_recv,
        rtype::STATISTICS => typed::<StatMsg>(record).ok()?.ts_recv,
        rtype::INSTRUMENT_DEF => typed::<InstrumentDefMsg>(record).ok()?.ts_recv,
        _ => return None,
    };
    (ts_recv != dbn::UNDEF_TIMESTAMP).then_some(ts_recv)
}

/// The interval of an OHLCV rtype (`None` for the legacy one, which does not say).
pub fn bar_interval(rtype: u8) -> Option<BarInterval> {
    Some(match rtype {
        rtype::OHLCV_1S => BarInterval::Second,
        rtype::OHLCV_1M => BarInterval::Minute,
        rtype::OHLCV_1H => BarInterval::Hour,
        rtype::OHLCV_1D => BarInterval::Day,
        rtype::OHLCV_EOD => BarInterval::EndOfDay,
        _ => return None,
    })
}

impl Normalizer {
    pub fn new(venue_id: VenueId) -> Normalizer {
        Normalizer {
            venue_id,
            legacy_bar_interval: BarInterval::Unknown,
            books: IdMap::default(),
            mbp10: IdMap::default(),
            tops: IdMap::default(),
            max_orders_per_book: crate::book::mbo::DEFAULT_MAX_ORDERS,
            counters: NormalizerCounters::default(),
        }
    }

    /// The normalizer with every MBO book limited to `max_orders` resting orders (at least 1;
    /// the default is [`crate::book::mbo::DEFAULT_MAX_ORDERS`]); see the module docs.
    pub fn with_max_orders_per_book(mut self, max_orders: usize) -> Normalizer {
        self.max_orders_per_book = max_orders.max(1);
        self
    }

    /// Takes what the stream's metadata says that records do not: the interval of legacy
    /// `OHLCV_DEPRECATED` bars (DBZ files), from the schema.
    pub fn on_metadata(&mut self, metadata: &dbn::Metadata) {
        self.legacy_bar_interval = match metadata.schema {
            Some(Schema::Ohlcv1S) => BarInterval::Second,
            Some(Schema::Ohlcv1M) => BarInterval::Minute,
            Some(Schema::Ohlcv1H) => BarInterval::Hour,
            Some(Schema::Ohlcv1D) => BarInterval::Day,
            Some(Schema::OhlcvEod) => BarInterval::EndOfDay,
            _ => BarInterval::Unknown,
        };
    }

    /// Drops every book and remembered top (a reconnect: the caller emits the gaps). An MBO
    /// instrument's book then starts empty and is valid again after the next snapshot.
    pub fn reset_books(&mut self) {
        self.books.clear();
        self.mbp10.clear();
        self.tops.clear();
    }

    /// Drops one instrument's book and remembered top (its connection dropped).
    pub fn reset_instrument(&mut self, instrument: InstrumentId) {
        self.books.remove(&instrument);
        self.mbp10.remove(&instrument);
        self.tops.remove(&instrument);
    }

    pub fn counters(&self) -> &NormalizerCounters {
        &self.counters
    }

    /// Writes the book of `instrument` (every book for `ALL_INSTRUMENTS`) as it stands, for a
    /// reader of the event bus (`Feed::emit_books`): an MBO book outside a snapshot, or the ten
    /// levels of the last MBP-10 record. Returns the books written. One instrument's books are
    /// looked up, not searched for among the others.
    pub fn emit_books<F: FnMut(Event)>(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        out: &mut F,
    ) -> usize {
        let venue_id = self.venue_id;
        let mut written = 0;
        let mut saturated = 0u64;
        if instrument == ALL_INSTRUMENTS {
            for (&id, state) in self.books.iter() {
                written += usize::from(mbo_book_snapshot(
                    venue_id,
                    id,
                    state,
                    now_ns,
                    out,
                    &mut saturated,
                ));
            }
            for (&id, state) in self.mbp10.iter() {
                mbp10_book_snapshot(venue_id, id, state, now_ns, out);
                written += 1;
            }
        } else {
            if let Some(state) = self.books.get(&instrument) {
                written += usize::from(mbo_book_snapshot(
                    venue_id,
                    instrument,
                    state,
                    now_ns,
                    out,
                    &mut saturated,
                ));
            }
            if let Some(state) = self.mbp10.get(&instrument) {
                mbp10_book_snapshot(venue_id, instrument, state, now_ns, out);
                written += 1;
            }
        }
        self.counters.saturated += saturated;
        written
    }

    /// The events [`Normalizer::emit_books`] would write now for `instrument` (one, not
    /// `ALL_INSTRUMENTS`): each book's levels, begin and end (`Feed::book_events`).
    pub fn book_events(&self, instrument: InstrumentId) -> usize {
        let mbo = self
            .books
            .get(&instrument)
            .filter(|state| !state.in_snapshot)
            .map_or(0, |state| {
                state.book.level_count(BookSide::Bid) + state.book.level_count(BookSide::Ask) + 2
            });
        let mbp10 = self
            .mbp10
            .get(&instrument)
            .map_or(0, |state| mbp10_present_levels(state) + 2);
        mbo + mbp10
    }

    /// An instrument's L3 book, when MBO records have made one.
    pub fn book(&self, instrument: InstrumentId) -> Option<&MboBook> {
        self.books.get(&instrument).map(|state| &state.book)
    }

    fn header(&self, hd: &RecordHeader, instrument: InstrumentId, recv_ts_ns: u64) -> EventHeader {
        let (exchange_ts_ns, flags) = if hd.ts_event == dbn::UNDEF_TIMESTAMP {
            (0, flags::NO_EXCHANGE_TS)
        } else {
            (hd.ts_event, 0)
        };
        EventHeader {
            exchange_ts_ns,
            recv_ts_ns,
            venue_seq: 0,
            instrument_id: instrument,
            venue_id: self.venue_id,
            kind: EventKind::Quote,
            flags,
        }
    }

    /// Normalizes one record of `instrument`, received at `recv_ts_ns`, into `out`.
    pub fn normalize<F: FnMut(Event)>(
        &mut self,
        record: RecordRef<'_>,
        instrument: InstrumentId,
        recv_ts_ns: u64,
        out: &mut F,
    ) -> Result<Outcome, NormalizeError> {
        let result = self.dispatch(&record, instrument, recv_ts_ns, out);
        match result {
            Err(NormalizeError::Short { .. }) => self.counters.short += 1,
            Err(NormalizeError::Book { .. }) => self.counters.book_errors += 1,
            Err(NormalizeError::BookLimit { .. }) => self.counters.book_limits += 1,
            Ok(_) => {}
        }
        result
    }

    fn dispatch<F: FnMut(Event)>(
        &mut self,
        record: &RecordRef<'_>,
        instrument: InstrumentId,
        recv_ts_ns: u64,
        out: &mut F,
    ) -> Result<Outcome, NormalizeError> {
        let rtype = record.header().rtype;
        match rtype {
            rtype::MBO => {
                self.counters.mbo += 1;
                let mbo = typed::<MboMsg>(record)?;
                self.mbo(mbo, instrument, recv_ts_ns, out)?;
            }
            rtype::MBP_0 => {
                self.counters.trades += 1;
                let trade = typed::<TradeMsg>(record)?;
                let mut header = self.header(&trade.hd, instrument, recv_ts_ns);
                header.venue_seq = u64::from(trade.sequence);
                let mut emit = Emitter::new(out);
                self.trade(header, trade.price, trade.size, trade.side, &mut emit);
                emit.finish(trade.flags.is_last());
            }
            rtype::MBP_1 => {
                self.counters.mbp1 += 1;
                let mbp = typed::<Mbp1Msg>(record)?;
                let mut header = self.header(&mbp.hd, instrument, recv_ts_ns);
                header.venue_seq = u64::from(mbp.sequence);
                let mut emit = Emitter::new(out);
                self.top_changed(header, mbp.levels[0].quote(), &mut emit);
                if mbp.action as u8 == b'T' {
                    self.trade(header, mbp.price, mbp.size, mbp.side, &mut emit);
                }
                emit.finish(mbp.flags.is_last());
            }
            rtype::CMBP_1 | rtype::TCBBO => {
                self.counters.cmbp1 += 1;
                let cmbp = typed::<Cmbp1Msg>(record)?;
                let header = self.header(&cmbp.hd, instrument, recv_ts_ns);
                let mut emit = Emitter::new(out);
                self.top_changed(header, cmbp.levels[0].quote(), &mut emit);
                if cmbp.action as u8 == b'T' {
                    self.trade(header, cmbp.price, cmbp.size, cmbp.side, &mut emit);
                }
                emit.finish(cmbp.flags.is_last());
            }
            rtype::MBP_10 => {
                self.counters.mbp10 += 1;
                let mbp = typed::<Mbp10Msg>(record)?;
                self.mbp10(mbp, instrument, recv_ts_ns, out);
            }
            rtype::BBO_1S | rtype::BBO_1M => {
                self.counters.bbo += 1;
                let bbo = typed::<BboMsg>(record)?;
                let mut header = self.header(&bbo.hd, instrument, recv_ts_ns);
                header.venue_seq = u64::from(bbo.sequence);
                let mut emit = Emitter::new(out);
                emit.push(Event::new(header, Body::Quote(bbo.levels[0].quote())));
                emit.finish(bbo.flags.is_last());
            }
            rtype::CBBO_1S | rtype::CBBO_1M => {
                self.counters.cbbo += 1;
                let cbbo = typed::<CbboMsg>(record)?;
                let header = self.header(&cbbo.hd, instrument, recv_ts_ns);
                let mut emit = Emitter::new(out);
                emit.push(Event::new(header, Body::Quote(cbbo.levels[0].quote())));
                emit.finish(cbbo.flags.is_last());
            }
            rtype::OHLCV_DEPRECATED
            | rtype::OHLCV_1S
            | rtype::OHLCV_1M
            | rtype::OHLCV_1H
            | rtype::OHLCV_1D
            | rtype::OHLCV_EOD => {
                self.counters.ohlcv += 1;
                let bar = typed::<OhlcvMsg>(record)?;
                let interval = bar_interval(rtype).unwrap_or(self.legacy_bar_interval);
                let mut header = self.header(&bar.hd, instrument, recv_ts_ns);
                header.venue_seq = bar.volume;
                header.flags |= interval.to_flags() | flags::LAST;
                out(Event::new(
                    header,
                    Body::Bar(Bar {
                        open: Fixed(bar.open),
                        high: Fixed(bar.high),
                        low: Fixed(bar.low),
                        close: Fixed(bar.close),
                    }),
                ));
            }
            rtype::STATUS => {
                self.counters.status += 1;
                let status = typed::<StatusMsg>(record)?;
                let mut header = self.header(&status.hd, instrument, recv_ts_ns);
                header.flags |= flags::LAST;
                out(Event::new(
                    header,
                    Body::TradingStatus(TradingStatus {
                        action: status.action,
                        reason: status.reason,
                        trading_event: status.trading_event,
                        is_trading: status.is_trading as u8,
                        is_quoting: status.is_quoting as u8,
                        is_short_sell_restricted: status.is_short_sell_restricted as u8,
                        _reserved: [0; 23],
                    }),
                ));
            }
            rtype::IMBALANCE => {
                self.counters.imbalance += 1;
                let imbalance = typed::<ImbalanceMsg>(record)?;
                let mut header = self.header(&imbalance.hd, instrument, recv_ts_ns);
                header.flags |= flags::LAST;
                out(Event::new(
                    header,
                    Body::Imbalance(Imbalance {
                        ref_price: Fixed(imbalance.ref_price),
                        cont_book_clr_price: Fixed(imbalance.cont_book_clr_price),
                        paired_qty: imbalance.paired_qty,
                        total_imbalance_qty: imbalance.total_imbalance_qty,
                        side: side_of(imbalance.side) as u8,
                        auction_type: imbalance.auction_type as u8,
                        significant_imbalance: imbalance.significant_imbalance as u8,
                        unpaired_side: side_of(imbalance.unpaired_side) as u8,
                        auction_status: imbalance.auction_status,
                        freeze_status: imbalance.freeze_status,
                        num_extensions: imbalance.num_extensions,
                        _reserved: 0,
                    }),
                ));
            }
            rtype::STATISTICS => {
                self.counters.statistics += 1;
                let stat = typed::<StatMsg>(record)?;
                let mut header = self.header(&stat.hd, instrument, recv_ts_ns);
                header.venue_seq = u64::from(stat.sequence);
                header.flags |= flags::LAST;
                out(Event::new(
                    header,
                    Body::Statistic(Statistic {
                        price: Fixed(stat.price),
                        quantity: stat.quantity,
                        ts_ref: stat.ts_ref,
                        stat_type: stat.stat_type,
                        channel_id: stat.channel_id,
                        update_action: stat.update_action,
                        stat_flags: stat.stat_flags,
                        _reserved: [0; 2],
                    }),
                ));
            }
            rtype::INSTRUMENT_DEF => {
                self.counters.definitions += 1;
                typed::<InstrumentDefMsg>(record)?;
                return Ok(Outcome::Definition);
            }
            rtype::SYMBOL_MAPPING => {
                self.counters.control += 1;
                typed::<SymbolMappingMsg>(record)?;
                return Ok(Outcome::Control(Control::SymbolMapping));
            }
            rtype::SYSTEM => {
                self.counters.control += 1;
                typed::<SystemMsg>(record)?;
                return Ok(Outcome::Control(Control::System));
            }
            rtype::ERROR => {
                self.counters.control += 1;
                typed::<ErrorMsg>(record)?;
                return Ok(Outcome::Control(Control::Error));
            }
            other => {
                self.counters.unsupported += 1;
                return Ok(Outcome::Unsupported(other));
            }
        }
        Ok(Outcome::Normalized)
    }

    /// A `Trade` for a record with action `T`, unless its price is undefined.
    #[inline]
    fn trade<F: FnMut(Event)>(
        &mut self,
        header: EventHeader,
        price: i64,
        size: u32,
        side: std::ffi::c_char,
        emit: &mut Emitter<'_, F>,
    ) {
        trade(&mut self.counters, header, price, size, side, emit);
    }
}

/// [`Normalizer::trade`] on the counters alone, for a caller that holds a book of the
/// normalizer.
#[inline]
fn trade<F: FnMut(Event)>(
    counters: &mut NormalizerCounters,
    header: EventHeader,
    price: i64,
    size: u32,
    side: std::ffi::c_char,
    emit: &mut Emitter<'_, F>,
) {
    if price == dbn::UNDEF_PRICE {
        counters.undefined_prices += 1;
        return;
    }
    // DBN trades carry no trade id; the header's `venue_seq` has the record's sequence.
    emit.push(Event::new(
        header,
        Body::Trade(Trade::new(Fixed(price), units(size), 0, side_of(side))),
    ));
}

impl Normalizer {
    /// A `Quote` when `quote` differs from the instrument's last one.
    #[inline]
    fn top_changed<F: FnMut(Event)>(
        &mut self,
        header: EventHeader,
        quote: Quote,
        emit: &mut Emitter<'_, F>,
    ) {
        let last = self.tops.entry(header.instrument_id).or_insert(Quote {
            // No quote sent yet: anything differs from an impossible one.
            bid_px: Fixed::MIN,
            ..Quote::default()
        });
        if *last != quote {
            *last = quote;
            emit.push(Event::new(header, Body::Quote(quote)));
        }
    }

    fn mbp10<F: FnMut(Event)>(
        &mut self,
        mbp: &Mbp10Msg,
        instrument: InstrumentId,
        recv_ts_ns: u64,
        out: &mut F,
    ) {
        let mut header = self.header(&mbp.hd, instrument, recv_ts_ns);
        header.venue_seq = u64::from(mbp.sequence);
        let mut emit = Emitter::new(out);
        let empty = BidAskPair {
            bid_px: dbn::UNDEF_PRICE,
            ask_px: dbn::UNDEF_PRICE,
            ..BidAskPair::default()
        };
        let state = self.mbp10.entry(instrument).or_insert(Mbp10State {
            levels: std::array::from_fn(|_| empty.clone()),
        });
        type Read = fn(&[BidAskPair; 10], usize) -> (i64, u32);
        let bids: Read = |levels, index| (levels[index].bid_px, levels[index].bid_sz);
        let asks: Read = |levels, index| (levels[index].ask_px, levels[index].ask_sz);
        for (side, read) in [(Side::Bid, bids), (Side::Ask, asks)] {
            let present = |(price, size): (i64, u32)| price != dbn::UNDEF_PRICE && size > 0;
            // New or resized levels, best first.
            for index in 0..10 {
                let level = read(&mbp.levels, index);
                if present(level) && !(0..10).any(|old| read(&state.levels, old) == level) {
                    emit.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(side, Fixed(level.0), units(level.1))),
                    ));
                }
            }
            // Levels gone from the 10 (deleted, or pushed below the tenth).
            for index in 0..10 {
                let old = read(&state.levels, index);
                if present(old)
                    && !(0..10).any(|new| {
                        let level = read(&mbp.levels, new);
                        present(level) && level.0 == old.0
                    })
                {
                    emit.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(side, Fixed(old.0), Fixed::ZERO)),
                    ));
                }
            }
        }
        state.levels.clone_from(&mbp.levels);
        self.top_changed(header, mbp.levels[0].quote(), &mut emit);
        if mbp.action as u8 == b'T' {
            self.trade(header, mbp.price, mbp.size, mbp.side, &mut emit);
        }
        emit.finish(mbp.flags.is_last());
    }

    fn mbo<F: FnMut(Event)>(
        &mut self,
        mbo: &MboMsg,
        instrument: InstrumentId,
        recv_ts_ns: u64,
        out: &mut F,
    ) -> Result<(), NormalizeError> {
        let mut header = self.header(&mbo.hd, instrument, recv_ts_ns);
        header.venue_seq = u64::from(mbo.sequence);
        let last = mbo.flags.is_last();
        let snapshot = mbo.flags.is_snapshot();
        let action = mbo.action as u8;
        let mut emit = Emitter::new(out);
        let max_orders = self.max_orders_per_book;
        let state = self
            .books
            .entry(instrument)
            .or_insert_with(|| MboState::new(max_orders));
        if state.in_snapshot && !snapshot {
            // A snapshot that never sent its `LAST` record: close it before going on.
            state.in_snapshot = false;
            self.counters.snapshots += 1;
            emit_snapshot(state, header, &mut emit, &mut self.counters.saturated);
        }
        let mut saturated = 0u64;
        let result = if snapshot {
            // Applied silently; the levels go out in one bracket at the snapshot's end.
            state.in_snapshot = true;
            apply_mbo(&mut state.book, mbo, &mut |_| {})
        } else {
            apply_mbo(&mut state.book, mbo, &mut |update: LevelUpdate| {
                let (size, capped) = level_size(update.size);
                let mut level_header = header;
                if capped {
                    level_header.flags |= flags::SATURATED;
                    saturated += 1;
                }
                emit.push(Event::new(
                    level_header,
                    Body::BookLevel(BookLevel::new(
                        update.side.into(),
                        Fixed(update.price),
                        size,
                    )),
                ));
            })
        };
        self.counters.saturated += saturated;
        if let Err(MboError::TooManyOrders { limit, .. }) = result {
            // The book now lacks an order: it is dropped, and the strategy told so, before
            // anything else this record makes. It restarts empty (its snapshot, if one was
            // being applied, with it) and the records that follow rebuild it.
            *state = MboState::new(max_orders);
            let gap = own_header(self.venue_id, instrument, recv_ts_ns);
            emit.push(Event::new(gap, Body::Gap(Gap::new(GapReason::Limit, 0, 0))));
            emit.finish(last);
            return Err(NormalizeError::BookLimit { instrument, limit });
        }
        if action == b'T' && !snapshot {
            trade(
                &mut self.counters,
                header,
                mbo.price,
                mbo.size,
                mbo.side,
                &mut emit,
            );
        }
        if snapshot && last {
            state.in_snapshot = false;
            self.counters.snapshots += 1;
            emit_snapshot(state, header, &mut emit, &mut self.counters.saturated);
        } else if last && !state.in_snapshot {
            let (top, capped) = top_of(&state.book);
            if top != state.top {
                state.top = top;
                let mut quote_header = header;
                quote_header.flags |= flags::DERIVED;
                if capped {
                    quote_header.flags |= flags::SATURATED;
                    self.counters.saturated += 1;
                }
                emit.push(Event::new(quote_header, Body::Quote(top)));
            }
        }
        emit.finish(last);
        result.map_err(|error| NormalizeError::Book { instrument, error })
    }
}

/// Writes an MBO book as it stands for a bus reader (`book_snapshot`'s shape), unless it is in
/// the middle of a snapshot (false: nothing written). Levels whose size saturated are flagged
/// and counted in `saturated`.
fn mbo_book_snapshot<F: FnMut(Event)>(
    venue_id: VenueId,
    id: InstrumentId,
    state: &MboState,
    now_ns: u64,
    out: &mut F,
    saturated: &mut u64,
) -> bool {
    if state.in_snapshot {
        return false;
    }
    let header = own_header(venue_id, id, now_ns);
    let levels = [(BookSide::Bid, Side::Bid), (BookSide::Ask, Side::Ask)]
        .into_iter()
        .flat_map(|(book_side, side)| {
            state
                .book
                .levels(book_side)
                .into_iter()
                .map(move |(price, total, _)| {
                    let (size, capped) = level_size(total);
                    let extra = if capped { flags::SATURATED } else { 0 };
                    (side, Fixed(price), size, extra)
                })
        })
        .inspect(|level| *saturated += u64::from(level.3 != 0));
    crate::venue::emit::book_snapshot(
        header,
        state.book.level_count(BookSide::Bid),
        state.book.level_count(BookSide::Ask),
        levels,
        out,
    );
    true
}

/// A level of an MBP-10 record that holds something.
fn mbp10_present((price, size): (i64, u32)) -> bool {
    price != dbn::UNDEF_PRICE && size > 0
}

/// The levels of the last MBP-10 record that hold something, both sides.
fn mbp10_present_levels(state: &Mbp10State) -> usize {
    state
        .levels
        .iter()
        .map(|level| {
            usize::from(mbp10_present((level.bid_px, level.bid_sz)))
                + usize::from(mbp10_present((level.ask_px, level.ask_sz)))
        })
        .sum()
}

/// Writes the ten levels of an instrument's last MBP-10 record for a bus reader.
fn mbp10_book_snapshot<F: FnMut(Event)>(
    venue_id: VenueId,
    id: InstrumentId,
    state: &Mbp10State,
    now_ns: u64,
    out: &mut F,
) {
    let bids = state
        .levels
        .iter()
        .map(|level| (level.bid_px, level.bid_sz));
    let asks = state
        .levels
        .iter()
        .map(|level| (level.ask_px, level.ask_sz));
    let bid_levels = bids.clone().filter(|&level| mbp10_present(level)).count();
    let ask_levels = asks.clone().filter(|&level| mbp10_present(level)).count();
    let levels = bids
        .map(|level| (Side::Bid, level))
        .chain(asks.map(|level| (Side::Ask, level)))
        .filter(|&(_, level)| mbp10_present(level))
        .map(|(side, (price, size))| (side, Fixed(price), units(size), 0));
    let header = own_header(venue_id, id, now_ns);
    crate::venue::emit::book_snapshot(header, bid_levels, ask_levels, levels, out);
}

/// One MBO record into its book: a top-of-book publisher's add (flagged `F_TOB`) replaces its
/// side, as Databento documents for IEX and NYSE National (see `book::mbo`'s module docs);
/// every other record is an order's.
#[inline]
fn apply_mbo(
    book: &mut MboBook,
    mbo: &MboMsg,
    out: &mut impl FnMut(LevelUpdate),
) -> Result<(), MboError> {
    let action = mbo.action as u8;
    if action == b'A' && mbo.flags.is_tob() {
        book.apply_top_of_book(mbo.side as u8, mbo.order_id, mbo.price, mbo.size, out)
    } else {
        book.apply(
            action,
            mbo.side as u8,
            mbo.order_id,
            mbo.price,
            mbo.size,
            out,
        )
    }
}

/// The book's best levels as a quote (0 for an empty side), and whether a size saturated.
fn top_of(book: &MboBook) -> (Quote, bool) {
    let side = |side: BookSide| match book.best(side) {
        Some((price, total, _)) => {
            let (size, capped) = level_size(total);
            (Fixed(price), size, capped)
        }
        None => (Fixed::ZERO, Fixed::ZERO, false),
    };
    let (bid_px, bid_sz, bid_capped) = side(BookSide::Bid);
    let (ask_px, ask_sz, ask_capped) = side(BookSide::Ask);
    let quote = Quote {
        bid_px,
        bid_sz,
        ask_px,
        ask_sz,
    };
    (quote, bid_capped || ask_capped)
}

/// `SnapshotBegin`, every level best first (bids, then asks), `SnapshotEnd`, then the derived
/// quote (always: after a gap the strategy waits for one). Events with a saturated size are
/// flagged and counted in `saturated`.
fn emit_snapshot<F: FnMut(Event)>(
    state: &mut MboState,
    header: EventHeader,
    emit: &mut Emitter<'_, F>,
    saturated: &mut u64,
) {
    let bids = state.book.levels(BookSide::Bid);
    let asks = state.book.levels(BookSide::Ask);
    let counts = Snapshot {
        bid_levels: u32::try_from(bids.len()).unwrap_or(u32::MAX),
        ask_levels: u32::try_from(asks.len()).unwrap_or(u32::MAX),
        snapshot_id: header.venue_seq,
        _reserved: [0; 2],
    };
    let mut snapshot_header = header;
    snapshot_header.flags |= flags::SNAPSHOT;
    emit.push(Event::new(snapshot_header, Body::SnapshotBegin(counts)));
    for (side, levels) in [(Side::Bid, &bids), (Side::Ask, &asks)] {
        for &(price, total, _) in levels.iter() {
            let (size, capped) = level_size(total);
            let mut level_header = snapshot_header;
            if capped {
                level_header.flags |= flags::SATURATED;
                *saturated += 1;
            }
            emit.push(Event::new(
                level_header,
                Body::BookLevel(BookLevel::new(side, Fixed(price), size)),
            ));
        }
    }
    emit.push(Event::new(header, Body::SnapshotEnd(counts)));
    let (top, capped) = top_of(&state.book);
    state.top = top;
    let mut quote_header = header;
    quote_header.flags |= flags::DERIVED;
    if capped {
        quote_header.flags |= flags::SATURATED;
        *saturated += 1;
    }
    emit.push(Event::new(quote_header, Body::Quote(top)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use dbn::{FlagSet, StatusMsg};
    use std::ffi::c_char;

    const INSTRUMENT: InstrumentId = 3;
    const RECV: u64 = 99;

    fn run(
        normalizer: &mut Normalizer,
        record: RecordRef<'_>,
    ) -> (Result<Outcome, NormalizeError>, Vec<Event>) {
        let mut events = Vec::new();
        let result =
            normalizer.normalize(record, INSTRUMENT, RECV, &mut |event| events.push(event));
        (result, events)
    }

    fn mbo(
        action: u8,
        side: u8,
        order_id: u64,
        price: i64,
        size: u32,
        flags: u8,
        sequence: u32,
    ) -> MboMsg {
        MboMsg {
            hd: RecordHeader::new::<MboMsg>(rtype::MBO, 1, 5482, 1_000 + u64::from(sequence)),
            order_id,
            price,
            size,
            flags: FlagSet::new(flags),
            channel_id: 0,
            action: action as c_char,
            side: side as c_char,
            ts_recv: 2_000,
            ts_in_delta: 0,
            sequence,
        }
    }

    fn px(units: i64) -> i64 {
        units * dbn::FIXED_PRICE_SCALE
    }

    fn fixed(units: i64) -> Fixed {
        Fixed::from_units(units).expect("small")
    }

    fn apply_all(normalizer: &mut Normalizer, records: &[MboMsg]) -> Vec<Event> {
        let mut events = Vec::new();
        for record in records {
            let (result, mut more) = run(normalizer, RecordRef::from(record));
            result.expect("applies");
            events.append(&mut more);
        }
        events
    }

    const LAST: u8 = dbn::flags::LAST;
    const SNAP: u8 = dbn::flags::SNAPSHOT;

    #[test]
    fn mbo_levels_go_out_per_record_and_the_quote_only_at_the_end_of_an_event() {
        let mut normalizer = Normalizer::new(7);
        let first = apply_all(&mut normalizer, &[mbo(b'A', b'B', 1, px(100), 5, 0, 10)]);
        assert_eq!(first.len(), 1);
        assert_eq!(
            first[0].body(),
            Body::BookLevel(BookLevel::new(Side::Bid, fixed(100), fixed(5)))
        );
        assert_eq!(
            first[0].header.flags & flags::LAST,
            0,
            "the venue event is not over"
        );
        assert_eq!(first[0].header.venue_seq, 10);
        assert_eq!(first[0].header.exchange_ts_ns, 1_010);
        assert_eq!(first[0].header.recv_ts_ns, RECV);
        assert_eq!(first[0].header.venue_id, 7);
        assert_eq!(first[0].header.instrument_id, INSTRUMENT);
        let second = apply_all(&mut normalizer, &[mbo(b'A', b'A', 2, px(101), 3, LAST, 11)]);
        assert_eq!(second.len(), 2);
        assert_eq!(
            second[0].body(),
            Body::BookLevel(BookLevel::new(Side::Ask, fixed(101), fixed(3)))
        );
        assert_eq!(
            second[1].body(),
            Body::Quote(Quote {
                bid_px: fixed(100),
                bid_sz: fixed(5),
                ask_px: fixed(101),
                ask_sz: fixed(3)
            })
        );
        assert_eq!(second[1].header.flags, flags::DERIVED | flags::LAST);
        // A change below the top: a level, no quote.
        let third = apply_all(&mut normalizer, &[mbo(b'A', b'B', 3, px(99), 1, LAST, 12)]);
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].kind(), EventKind::BookLevel);
        assert_eq!(third[0].header.flags, flags::LAST);
    }

    #[test]
    fn an_mbo_snapshot_is_applied_silently_then_sent_in_one_bracket() {
        let mut normalizer = Normalizer::new(0);
        apply_all(&mut normalizer, &[mbo(b'A', b'B', 50, px(90), 1, LAST, 1)]);
        let records = [
            mbo(b'R', b'N', 0, dbn::UNDEF_PRICE, 0, SNAP, 0),
            mbo(b'A', b'B', 1, px(100), 2, SNAP, 0),
            mbo(b'A', b'B', 2, px(100), 3, SNAP, 0),
            mbo(b'A', b'B', 3, px(98), 1, SNAP, 0),
            mbo(b'A', b'A', 4, px(102), 4, SNAP | LAST, 0),
        ];
        let mut events = Vec::new();
        for (index, record) in records.iter().enumerate() {
            let (result, mut more) = run(&mut normalizer, RecordRef::from(record));
            result.expect("applies");
            if index < records.len() - 1 {
                assert!(more.is_empty(), "record {index} is applied silently");
            }
            events.append(&mut more);
        }
        let bodies: Vec<Body> = events.iter().map(Event::body).collect();
        let counts = Snapshot {
            bid_levels: 2,
            ask_levels: 1,
            snapshot_id: 0,
            _reserved: [0; 2],
        };
        assert_eq!(
            bodies,
            vec![
                Body::SnapshotBegin(counts),
                Body::BookLevel(BookLevel::new(Side::Bid, fixed(100), fixed(5))),
                Body::BookLevel(BookLevel::new(Side::Bid, fixed(98), fixed(1))),
                Body::BookLevel(BookLevel::new(Side::Ask, fixed(102), fixed(4))),
                Body::SnapshotEnd(counts),
                Body::Quote(Quote {
                    bid_px: fixed(100),
                    bid_sz: fixed(5),
                    ask_px: fixed(102),
                    ask_sz: fixed(4)
                }),
            ]
        );
        for event in &events[..4] {
            assert_ne!(event.header.flags & flags::SNAPSHOT, 0);
        }
        assert_eq!(events[4].header.flags & flags::SNAPSHOT, 0);
        assert_eq!(events[5].header.flags, flags::DERIVED | flags::LAST);
        assert_eq!(normalizer.counters().snapshots, 1);
        let book = normalizer.book(INSTRUMENT).expect("a book");
        assert_eq!(
            book.orders(),
            4,
            "the order resting before the snapshot is gone"
        );
    }

    #[test]
    fn trades_fills_and_clears() {
        let mut normalizer = Normalizer::new(0);
        apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'B', 1, px(100), 5, 0, 1),
                mbo(b'A', b'A', 2, px(101), 5, LAST, 2),
            ],
        );
        let trade = apply_all(&mut normalizer, &[mbo(b'T', b'A', 0, px(100), 2, 0, 3)]);
        assert_eq!(trade.len(), 1);
        assert_eq!(
            trade[0].body(),
            Body::Trade(Trade::new(fixed(100), fixed(2), 0, Side::Ask))
        );
        assert_eq!(trade[0].header.venue_seq, 3);
        assert!(apply_all(&mut normalizer, &[mbo(b'F', b'B', 1, px(100), 2, 0, 4)]).is_empty());
        let cleared = apply_all(
            &mut normalizer,
            &[mbo(b'R', b'N', 0, dbn::UNDEF_PRICE, 0, LAST, 5)],
        );
        let bodies: Vec<Body> = cleared.iter().map(Event::body).collect();
        assert_eq!(
            bodies,
            vec![
                Body::BookLevel(BookLevel::new(Side::Bid, fixed(100), Fixed::ZERO)),
                Body::BookLevel(BookLevel::new(Side::Ask, fixed(101), Fixed::ZERO)),
                Body::Quote(Quote::default()),
            ]
        );
    }

    #[test]
    fn a_book_error_is_returned_and_counted_never_a_panic() {
        let mut normalizer = Normalizer::new(0);
        apply_all(&mut normalizer, &[mbo(b'A', b'B', 1, px(100), 5, 0, 1)]);
        let (result, events) = run(
            &mut normalizer,
            RecordRef::from(&mbo(b'C', b'A', 77, px(1), 1, LAST, 2)),
        );
        assert_eq!(
            result,
            Err(NormalizeError::Book {
                instrument: INSTRUMENT,
                error: MboError::UnknownOrder(77)
            })
        );
        // The event still ends: the quote for the earlier add goes out.
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind(), EventKind::Quote);
        let (result, _) = run(
            &mut normalizer,
            RecordRef::from(&mbo(b'Z', b'A', 1, px(1), 1, 0, 3)),
        );
        assert!(matches!(
            result,
            Err(NormalizeError::Book {
                error: MboError::UnknownAction(b'Z'),
                ..
            })
        ));
        assert_eq!(normalizer.counters().book_errors, 2);
    }

    #[test]
    fn a_record_shorter_than_its_layout_is_an_error() {
        let mut trade = TradeMsg::default();
        trade.hd.rtype = rtype::MBO;
        let mut normalizer = Normalizer::new(0);
        let (result, events) = run(&mut normalizer, RecordRef::from(&trade));
        assert_eq!(
            result,
            Err(NormalizeError::Short {
                rtype: rtype::MBO,
                bytes: 48
            })
        );
        assert!(events.is_empty());
        assert_eq!(normalizer.counters().short, 1);
    }

    fn mbp1(action: u8, bid_px: i64, ask_px: i64, price: i64, sequence: u32) -> Mbp1Msg {
        Mbp1Msg {
            hd: RecordHeader::new::<Mbp1Msg>(rtype::MBP_1, 1, 5482, 500),
            price,
            size: 2,
            action: action as c_char,
            side: b'B' as c_char,
            flags: FlagSet::new(LAST),
            depth: 0,
            ts_recv: 600,
            ts_in_delta: 0,
            sequence,
            levels: [BidAskPair {
                bid_px,
                ask_px,
                bid_sz: 10,
                ask_sz: 20,
                bid_ct: 1,
                ask_ct: 2,
            }],
        }
    }

    #[test]
    fn mbp1_quotes_on_change_trades_on_t_and_undefined_prices_are_empty() {
        let mut normalizer = Normalizer::new(0);
        let (_, events) = run(
            &mut normalizer,
            RecordRef::from(&mbp1(b'A', px(10), dbn::UNDEF_PRICE, px(10), 1)),
        );
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].body(),
            Body::Quote(Quote {
                bid_px: fixed(10),
                bid_sz: fixed(10),
                ask_px: Fixed::ZERO,
                ask_sz: Fixed::ZERO
            })
        );
        assert_eq!(
            events[0].header.flags,
            flags::LAST,
            "a venue quote, not derived"
        );
        assert_eq!(events[0].header.venue_seq, 1);
        // A trade with the same top: the trade only.
        let (_, events) = run(
            &mut normalizer,
            RecordRef::from(&mbp1(b'T', px(10), dbn::UNDEF_PRICE, px(10), 2)),
        );
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].body(),
            Body::Trade(Trade::new(fixed(10), fixed(2), 0, Side::Bid))
        );
        // A trade with no price is dropped and counted.
        let (result, events) = run(
            &mut normalizer,
            RecordRef::from(&mbp1(b'T', px(10), dbn::UNDEF_PRICE, dbn::UNDEF_PRICE, 3)),
        );
        assert_eq!(result, Ok(Outcome::Normalized));
        assert!(events.is_empty());
        assert_eq!(normalizer.counters().undefined_prices, 1);
    }

    #[test]
    fn mbp10_sends_changed_and_removed_levels() {
        let mut normalizer = Normalizer::new(0);
        let mut msg = Mbp10Msg {
            hd: RecordHeader::new::<Mbp10Msg>(rtype::MBP_10, 1, 5482, 500),
            flags: FlagSet::new(LAST),
            sequence: 9,
            ..Mbp10Msg::default()
        };
        for (index, level) in msg.levels.iter_mut().enumerate() {
            let depth = index as i64;
            *level = if index < 2 {
                BidAskPair {
                    bid_px: px(100 - depth),
                    ask_px: px(101 + depth),
                    bid_sz: 1,
                    ask_sz: 2,
                    bid_ct: 1,
                    ask_ct: 1,
                }
            } else {
                BidAskPair {
                    bid_px: dbn::UNDEF_PRICE,
                    ask_px: dbn::UNDEF_PRICE,
                    ..BidAskPair::default()
                }
            };
        }
        let (_, events) = run(&mut normalizer, RecordRef::from(&msg));
        let kinds: Vec<EventKind> = events.iter().map(Event::kind).collect();
        assert_eq!(
            kinds,
            [vec![EventKind::BookLevel; 4], vec![EventKind::Quote]].concat()
        );
        assert_eq!(events[4].header.flags, flags::LAST);
        // The best bid grows, the second ask goes away.
        msg.levels[0].bid_sz = 7;
        msg.levels[1].ask_px = dbn::UNDEF_PRICE;
        msg.levels[1].ask_sz = 0;
        let (_, events) = run(&mut normalizer, RecordRef::from(&msg));
        let bodies: Vec<Body> = events.iter().map(Event::body).collect();
        assert_eq!(
            bodies,
            vec![
                Body::BookLevel(BookLevel::new(Side::Bid, fixed(100), fixed(7))),
                Body::BookLevel(BookLevel::new(Side::Ask, fixed(102), Fixed::ZERO)),
                Body::Quote(Quote {
                    bid_px: fixed(100),
                    bid_sz: fixed(7),
                    ask_px: fixed(101),
                    ask_sz: fixed(2)
                }),
            ]
        );
    }

    #[test]
    fn bars_statuses_imbalances_and_statistics_carry_their_fields() {
        let mut normalizer = Normalizer::new(0);
        let bar = OhlcvMsg {
            hd: RecordHeader::new::<OhlcvMsg>(rtype::OHLCV_1M, 1, 5482, 60_000),
            open: px(1),
            high: px(4),
            low: px(0),
            close: px(2),
            volume: 12_345,
        };
        let (_, events) = run(&mut normalizer, RecordRef::from(&bar));
        assert_eq!(
            events[0].body(),
            Body::Bar(Bar {
                open: fixed(1),
                high: fixed(4),
                low: fixed(0),
                close: fixed(2)
            })
        );
        assert_eq!(events[0].header.venue_seq, 12_345);
        assert_eq!(
            BarInterval::from_flags(events[0].header.flags),
            BarInterval::Minute
        );
        assert_ne!(events[0].header.flags & flags::LAST, 0);
        let mut legacy = bar.clone();
        legacy.hd.rtype = rtype::OHLCV_DEPRECATED;
        let (_, events) = run(&mut normalizer, RecordRef::from(&legacy));
        assert_eq!(
            BarInterval::from_flags(events[0].header.flags),
            BarInterval::Unknown
        );

        let status = StatusMsg {
            hd: RecordHeader::new::<StatusMsg>(rtype::STATUS, 1, 5482, dbn::UNDEF_TIMESTAMP),
            action: 7,
            reason: 1,
            trading_event: 2,
            is_trading: b'Y' as c_char,
            is_quoting: b'N' as c_char,
            is_short_sell_restricted: b'~' as c_char,
            ..StatusMsg::default()
        };
        let (_, events) = run(&mut normalizer, RecordRef::from(&status));
        let Body::TradingStatus(got) = events[0].body() else {
            panic!("a status")
        };
        assert_eq!((got.action, got.reason, got.trading_event), (7, 1, 2));
        assert_eq!(
            (got.is_trading, got.is_quoting, got.is_short_sell_restricted),
            (b'Y', b'N', b'~')
        );
        assert_eq!(events[0].header.exchange_ts_ns, 0);
        assert_eq!(events[0].header.flags, flags::NO_EXCHANGE_TS | flags::LAST);

        let imbalance = ImbalanceMsg {
            hd: RecordHeader::new::<ImbalanceMsg>(rtype::IMBALANCE, 1, 9439, 5),
            ref_price: px(229),
            cont_book_clr_price: dbn::UNDEF_PRICE,
            paired_qty: 1719,
            total_imbalance_qty: 281,
            side: b'B' as c_char,
            auction_type: b'O' as c_char,
            unpaired_side: b'N' as c_char,
            significant_imbalance: b'~' as c_char,
            ..ImbalanceMsg::default()
        };
        let (_, events) = run(&mut normalizer, RecordRef::from(&imbalance));
        let Body::Imbalance(got) = events[0].body() else {
            panic!("an imbalance")
        };
        assert_eq!(got.ref_price, fixed(229));
        assert_eq!(got.cont_book_clr_price, crate::event::NO_PRICE);
        assert_eq!((got.paired_qty, got.total_imbalance_qty), (1719, 281));
        assert_eq!((got.side(), got.unpaired_side()), (Side::Bid, Side::None));
        assert_eq!((got.auction_type, got.significant_imbalance), (b'O', b'~'));

        let stat = StatMsg {
            hd: RecordHeader::new::<StatMsg>(rtype::STATISTICS, 1, 146_945, 5),
            price: px(100),
            quantity: dbn::UNDEF_STAT_QUANTITY,
            ts_ref: dbn::UNDEF_TIMESTAMP,
            sequence: 2,
            stat_type: 5,
            channel_id: 13,
            update_action: 1,
            stat_flags: 0xff,
            ..StatMsg::default()
        };
        let (_, events) = run(&mut normalizer, RecordRef::from(&stat));
        let Body::Statistic(got) = events[0].body() else {
            panic!("a statistic")
        };
        assert_eq!(got.price, fixed(100));
        assert_eq!(got.quantity, Statistic::NO_QUANTITY);
        assert_eq!(
            (got.ts_ref, got.stat_type, got.channel_id),
            (u64::MAX, 5, 13)
        );
        assert_eq!((got.update_action, got.stat_flags), (1, 0xff));
        assert_eq!(events[0].header.venue_seq, 2);
    }

    #[test]
    fn quotes_from_bbo_and_cbbo_always_go_out() {
        let mut normalizer = Normalizer::new(0);
        let bbo = BboMsg {
            hd: RecordHeader::new::<BboMsg>(rtype::BBO_1S, 1, 1, 5),
            flags: FlagSet::new(LAST),
            sequence: 4,
            levels: [BidAskPair {
                bid_px: px(1),
                ask_px: px(2),
                bid_sz: 3,
                ask_sz: 4,
                bid_ct: 0,
                ask_ct: 0,
            }],
            ..BboMsg::default_for_schema(Schema::Bbo1S)
        };
        for _ in 0..2 {
            let (_, events) = run(&mut normalizer, RecordRef::from(&bbo));
            assert_eq!(
                events[0].body(),
                Body::Quote(Quote {
                    bid_px: fixed(1),
                    bid_sz: fixed(3),
                    ask_px: fixed(2),
                    ask_sz: fixed(4)
                })
            );
            assert_eq!(events[0].header.venue_seq, 4);
        }
        let cbbo = CbboMsg {
            hd: RecordHeader::new::<CbboMsg>(rtype::CBBO_1M, 1, 1, 5),
            levels: [ConsolidatedBidAskPair {
                bid_px: px(1),
                ask_px: dbn::UNDEF_PRICE,
                bid_sz: 3,
                ..Default::default()
            }],
            ..CbboMsg::default_for_schema(Schema::Cbbo1M)
        };
        let (_, events) = run(&mut normalizer, RecordRef::from(&cbbo));
        assert_eq!(
            events[0].body(),
            Body::Quote(Quote {
                bid_px: fixed(1),
                bid_sz: fixed(3),
                ask_px: Fixed::ZERO,
                ask_sz: Fixed::ZERO
            })
        );
        assert_eq!(
            events[0].header.flags & flags::LAST,
            0,
            "CBBO without DBN's LAST"
        );
    }

    #[test]
    fn control_records_and_definitions_make_no_events() {
        let mut normalizer = Normalizer::new(0);
        let system = SystemMsg::heartbeat(5);
        let (result, events) = run(&mut normalizer, RecordRef::from(&system));
        assert_eq!(result, Ok(Outcome::Control(Control::System)));
        assert!(events.is_empty());
        let error = ErrorMsg::new(5, None, "boom", true);
        assert_eq!(
            run(&mut normalizer, RecordRef::from(&error)).0,
            Ok(Outcome::Control(Control::Error))
        );
        let mapping = SymbolMappingMsg::default();
        assert_eq!(
            run(&mut normalizer, RecordRef::from(&mapping)).0,
            Ok(Outcome::Control(Control::SymbolMapping))
        );
        let definition = InstrumentDefMsg::default();
        assert_eq!(
            run(&mut normalizer, RecordRef::from(&definition)).0,
            Ok(Outcome::Definition)
        );
        let mut odd = TradeMsg::default();
        odd.hd.rtype = 0x7f;
        assert_eq!(
            run(&mut normalizer, RecordRef::from(&odd)).0,
            Ok(Outcome::Unsupported(0x7f))
        );
        let counters = normalizer.counters();
        assert_eq!(
            (counters.control, counters.definitions, counters.unsupported),
            (3, 1, 1)
        );
    }

    /// Issue 24: MBO from a top-of-book publisher (IEX, NYSE National: each add flagged `F_TOB`
    /// replaces its side, as Databento documents) moved the book only at the first add; every
    /// add after it was refused as a duplicate order.
    #[test]
    fn top_of_book_adds_replace_their_side() {
        const TOB: u8 = dbn::flags::TOB;
        let mut normalizer = Normalizer::new(0);
        let quote = |bid: i64, bid_sz: i64, ask: i64, ask_sz: i64| {
            Body::Quote(Quote {
                bid_px: fixed(bid),
                bid_sz: fixed(bid_sz),
                ask_px: fixed(ask),
                ask_sz: fixed(ask_sz),
            })
        };
        let level = |side: Side, price: i64, size: i64| {
            Body::BookLevel(BookLevel::new(side, fixed(price), fixed(size)))
        };
        let bodies = |events: Vec<Event>| events.iter().map(Event::body).collect::<Vec<_>>();
        // IEX sends order id 0 on every top-of-book record.
        let first = apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'B', 0, px(100), 5, TOB, 1),
                mbo(b'A', b'A', 0, px(102), 7, TOB | LAST, 2),
            ],
        );
        assert_eq!(
            bodies(first),
            [
                level(Side::Bid, 100, 5),
                level(Side::Ask, 102, 7),
                quote(100, 5, 102, 7)
            ]
        );
        let second = apply_all(
            &mut normalizer,
            &[mbo(b'A', b'B', 0, px(101), 3, TOB | LAST, 3)],
        );
        assert_eq!(
            bodies(second),
            [
                level(Side::Bid, 100, 0),
                level(Side::Bid, 101, 3),
                quote(101, 3, 102, 7)
            ]
        );
        // UNDEF_PRICE: the venue has no bid now.
        let third = apply_all(
            &mut normalizer,
            &[mbo(b'A', b'B', 0, dbn::UNDEF_PRICE, 0, TOB | LAST, 4)],
        );
        assert_eq!(
            bodies(third),
            [
                level(Side::Bid, 101, 0),
                Body::Quote(Quote {
                    bid_px: Fixed::ZERO,
                    bid_sz: Fixed::ZERO,
                    ask_px: fixed(102),
                    ask_sz: fixed(7),
                })
            ]
        );
        let book = normalizer.book(INSTRUMENT).expect("a book");
        assert_eq!(book.levels(BookSide::Ask), vec![(px(102), 7, 0)]);
        assert!(
            book.is_empty(),
            "no orders: the levels are the venue's quotes"
        );
        assert_eq!(normalizer.counters().book_errors, 0);
    }

    /// Issue 24: a level's total above 9,223,372,036 units (what `Fixed` holds at 1e-9) was
    /// published as `Fixed::MAX` with nothing to say so.
    #[test]
    fn a_level_total_beyond_fixed_is_flagged_saturated_and_counted() {
        let mut normalizer = Normalizer::new(0);
        let max = u32::MAX;
        let events = apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'B', 1, px(100), max, 0, 1),
                mbo(b'A', b'B', 2, px(100), max, 0, 2),
                mbo(b'A', b'B', 3, px(100), max, LAST, 3),
            ],
        );
        let sizes: Vec<(Fixed, bool)> = events
            .iter()
            .map(|event| {
                let size = match event.body() {
                    Body::BookLevel(level) => level.size,
                    Body::Quote(quote) => quote.bid_sz,
                    other => panic!("{other:?}"),
                };
                (size, event.header.flags & flags::SATURATED != 0)
            })
            .collect();
        let fits = |orders: i64| (fixed(i64::from(max) * orders), false);
        assert_eq!(
            sizes,
            [fits(1), fits(2), (Fixed::MAX, true), (Fixed::MAX, true),],
            "two orders of u32::MAX fit, three do not: the level and the derived quote say so"
        );
        assert_eq!(normalizer.counters().saturated, 2);
        let book = normalizer.book(INSTRUMENT).expect("a book");
        assert_eq!(
            book.level(BookSide::Bid, px(100)),
            Some((3 * u64::from(max), 3)),
            "the book keeps the exact total"
        );
        // Back under the limit: exact again, no flag.
        let events = apply_all(
            &mut normalizer,
            &[mbo(b'C', b'B', 3, px(100), max, LAST, 4)],
        );
        assert!(events
            .iter()
            .all(|e| e.header.flags & flags::SATURATED == 0));
        assert_eq!(
            events[0].body(),
            Body::BookLevel(BookLevel::new(
                Side::Bid,
                fixed(100),
                fixed(2 * i64::from(max))
            ))
        );
        assert_eq!(normalizer.counters().saturated, 2);
        // A snapshot of a saturated level says so too.
        let mut normalizer = Normalizer::new(0);
        let events = apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'A', 1, px(100), max, SNAP, 1),
                mbo(b'A', b'A', 2, px(100), max, SNAP, 2),
                mbo(b'A', b'A', 3, px(100), max, SNAP | LAST, 3),
            ],
        );
        let flagged: Vec<EventKind> = events
            .iter()
            .filter(|e| e.header.flags & flags::SATURATED != 0)
            .map(Event::kind)
            .collect();
        assert_eq!(flagged, [EventKind::BookLevel, EventKind::Quote]);
        assert_eq!(normalizer.counters().saturated, 2);
    }

    /// What a bus reader's book costs (`book_events`) is what `emit_books` writes for it: an MBO
    /// book's levels, an MBP-10 record's present levels, each with its begin and end; nothing
    /// for an instrument without a book or one in the middle of a snapshot.
    #[test]
    fn book_events_counts_what_emit_books_writes() {
        let mut normalizer = Normalizer::new(0);
        apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'B', 1, px(100), 5, 0, 1),
                mbo(b'A', b'B', 2, px(99), 5, 0, 2),
                mbo(b'A', b'A', 3, px(101), 5, LAST, 3),
            ],
        );
        let mut mbp10 = Mbp10Msg {
            hd: RecordHeader::new::<Mbp10Msg>(rtype::MBP_10, 1, 5482, 500),
            flags: FlagSet::new(LAST),
            ..Mbp10Msg::default()
        };
        for (index, level) in mbp10.levels.iter_mut().enumerate() {
            *level = BidAskPair {
                bid_px: if index < 3 { px(50) } else { dbn::UNDEF_PRICE },
                ask_px: if index < 1 { px(51) } else { dbn::UNDEF_PRICE },
                bid_sz: 1,
                ask_sz: 1,
                ..BidAskPair::default()
            };
        }
        let mut ignored = |_: Event| {};
        normalizer
            .normalize(RecordRef::from(&mbp10), INSTRUMENT + 1, RECV, &mut ignored)
            .expect("applies");
        for (instrument, expected) in [(INSTRUMENT, 3 + 2), (INSTRUMENT + 1, 4 + 2), (77, 0)] {
            assert_eq!(normalizer.book_events(instrument), expected, "{instrument}");
            let mut written = Vec::new();
            normalizer.emit_books(instrument, 5, &mut |event| written.push(event));
            assert_eq!(written.len(), expected, "{instrument}: {written:?}");
        }
        // A book in the middle of a snapshot is not written, and costs nothing.
        let (result, _) = run(
            &mut normalizer,
            RecordRef::from(&mbo(b'A', b'B', 9, px(98), 1, SNAP, 4)),
        );
        result.expect("applies");
        assert_eq!(normalizer.book_events(INSTRUMENT), 0);
        let mut written = 0;
        normalizer.emit_books(INSTRUMENT, 5, &mut |_| written += 1);
        assert_eq!(written, 0);
    }

    /// Issue 32: an add past the book's order limit drops the book with a `Limit` gap and an
    /// error naming the limit; the book is rebuilt from what follows.
    #[test]
    fn an_add_past_the_order_limit_drops_the_book_with_a_gap() {
        let mut normalizer = Normalizer::new(4).with_max_orders_per_book(2);
        apply_all(
            &mut normalizer,
            &[
                mbo(b'A', b'B', 1, px(100), 5, LAST, 1),
                mbo(b'A', b'A', 2, px(101), 5, LAST, 2),
            ],
        );
        let (result, events) = run(
            &mut normalizer,
            RecordRef::from(&mbo(b'A', b'A', 3, px(102), 5, LAST, 3)),
        );
        assert_eq!(
            result,
            Err(NormalizeError::BookLimit {
                instrument: INSTRUMENT,
                limit: 2
            })
        );
        assert!(result
            .unwrap_err()
            .to_string()
            .contains("limit of 2 orders"));
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(events[0].body(), Body::Gap(gap) if gap.reason() == GapReason::Limit));
        assert_eq!(events[0].header.instrument_id, INSTRUMENT);
        assert_ne!(
            events[0].header.flags & flags::LAST,
            0,
            "it ends the venue event"
        );
        assert_eq!(normalizer.counters().book_limits, 1);
        assert_eq!(normalizer.counters().book_errors, 0);
        let book = normalizer.book(INSTRUMENT).expect("a book");
        assert!(book.is_empty(), "dropped");
        assert_eq!(book.max_orders(), 2, "and still limited");
        // The next add starts the book again, with its quote.
        let events = apply_all(&mut normalizer, &[mbo(b'A', b'B', 4, px(99), 1, LAST, 4)]);
        assert_eq!(
            events.iter().map(Event::kind).collect::<Vec<_>>(),
            [EventKind::BookLevel, EventKind::Quote]
        );
    }

    #[test]
    fn reset_books_forgets_every_book() {
        let mut normalizer = Normalizer::new(0);
        apply_all(&mut normalizer, &[mbo(b'A', b'B', 1, px(100), 5, LAST, 1)]);
        normalizer.reset_books();
        assert!(normalizer.book(INSTRUMENT).is_none());
        let (result, _) = run(
            &mut normalizer,
            RecordRef::from(&mbo(b'C', b'B', 1, px(100), 5, LAST, 2)),
        );
        assert!(matches!(result, Err(NormalizeError::Book { .. })));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        fn record() -> impl Strategy<Value = MboMsg> {
            (
                prop::sample::select(vec![b'A', b'C', b'M', b'T', b'F', b'R', b'N', b'X']),
                prop::sample::select(vec![b'B', b'A', b'N']),
                0u64..8,
                95i64..105,
                0u32..4,
                prop::sample::select(vec![0u8, LAST, SNAP, SNAP | LAST]),
            )
                .prop_map(|(action, side, id, price, size, flags)| {
                    mbo(action, side, id, px(price), size, flags, 0)
                })
        }

        proptest! {
            /// Whatever the records, nothing panics, and the levels the events describe are
            /// the book's levels once every event has ended (outside snapshots).
            #[test]
            fn events_rebuild_the_book(records in prop::collection::vec(record(), 0..80)) {
                let mut normalizer = Normalizer::new(0);
                let mut levels: BTreeMap<(u8, i64), Fixed> = BTreeMap::new();
                for record in &records {
                    let _ = normalizer.normalize(RecordRef::from(record), INSTRUMENT, 0, &mut |event| {
                        match event.body() {
                            Body::SnapshotBegin(_) => levels.clear(),
                            Body::BookLevel(level) if level.size == Fixed::ZERO => {
                                levels.remove(&(level.side, level.price.0));
                            }
                            Body::BookLevel(level) => {
                                levels.insert((level.side, level.price.0), level.size);
                            }
                            _ => {}
                        }
                    });
                }
                let open_snapshot = normalizer.books.get(&INSTRUMENT).is_some_and(|state| state.in_snapshot);
                if let (Some(book), false) = (normalizer.book(INSTRUMENT), open_snapshot) {
                    let mut expected = BTreeMap::new();
                    for (side, tag) in [(BookSide::Bid, Side::Bid as u8), (BookSide::Ask, Side::Ask as u8)] {
                        for (price, size, _) in book.levels(side) {
                            expected.insert((tag, price), level_size(size).0);
                        }
                    }
                    prop_assert_eq!(levels, expected);
                }
            }
        }
    }
}
