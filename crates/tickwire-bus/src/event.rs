//! Normalized events: what every venue decoder produces and the strategy consumes.
//!
//! An [`Event`] is one cache line: a 32-byte [`EventHeader`] that every event carries (who, when,
//! which venue sequence) and a 32-byte payload whose meaning the header's [`EventKind`] gives.
//! Events are `#[repr(C)]`, `Copy` and aligned to 64 bytes, so a slot of the event ring is exactly
//! one line and a producer and a consumer never share one (see `ring::spsc`).
//!
//! The payload is a union of plain-integer structs: every bit pattern is a valid value of every
//! variant, so reading it can never be undefined behaviour, and [`Event::body`] turns it into the
//! [`Body`] enum that strategies match on.

use crate::fixed::Fixed;
use std::fmt;

pub mod json;

/// Identifies a venue within one process (its position in the appliance's venue list).
pub type VenueId = u16;
/// Identifies an instrument within one process (assigned by the venue's instrument table).
pub type InstrumentId = u32;

/// What an event's payload holds.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Best bid and ask, price and size ([`Quote`]).
    Quote = 1,
    /// A trade print ([`Trade`]).
    Trade = 2,
    /// One price level of the book changed ([`BookLevel`]).
    BookLevel = 3,
    /// A full book follows as `BookLevel` events, until `SnapshotEnd` ([`Snapshot`]).
    SnapshotBegin = 4,
    /// The book announced by `SnapshotBegin` is complete and valid ([`Snapshot`]).
    SnapshotEnd = 5,
    /// The instrument's stream lost continuity; its book is invalid until the next `SnapshotEnd`
    /// ([`Gap`]).
    Gap = 6,
    /// The venue connection or a stream changed state ([`VenueStatus`]).
    VenueStatus = 7,
    /// A reference price that is not a tradable quote: mark price, index price
    /// ([`Reference`]).
    Reference = 8,
    /// An OHLCV bar ([`Bar`]); the volume rides in the header's `venue_seq` and the interval
    /// in the header's flags ([`BarInterval`]).
    Bar = 9,
    /// The venue changed an instrument's trading state: halted, pre-open, trading...
    /// ([`TradingStatus`]).
    TradingStatus = 10,
    /// An auction imbalance indication ([`Imbalance`]).
    Imbalance = 11,
    /// A venue statistic: open, settlement, high, low, open interest... ([`Statistic`]).
    Statistic = 12,
    /// A position was liquidated ([`Liquidation`]); added in bus layout version 2.
    Liquidation = 13,
}

impl EventKind {
    /// Every kind, in the order of [`EventKind::index`]: the per-kind event counters' order.
    pub const ALL: [EventKind; 13] = [
        EventKind::Quote,
        EventKind::Trade,
        EventKind::BookLevel,
        EventKind::SnapshotBegin,
        EventKind::SnapshotEnd,
        EventKind::Gap,
        EventKind::VenueStatus,
        EventKind::Reference,
        EventKind::Bar,
        EventKind::TradingStatus,
        EventKind::Imbalance,
        EventKind::Statistic,
        EventKind::Liquidation,
    ];
    pub const COUNT: usize = EventKind::ALL.len();

    /// The kind's position in [`EventKind::ALL`], for arrays of per-kind counters.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            EventKind::Quote => 0,
            EventKind::Trade => 1,
            EventKind::BookLevel => 2,
            EventKind::SnapshotBegin => 3,
            EventKind::SnapshotEnd => 4,
            EventKind::Gap => 5,
            EventKind::VenueStatus => 6,
            EventKind::Reference => 7,
            EventKind::Bar => 8,
            EventKind::TradingStatus => 9,
            EventKind::Imbalance => 10,
            EventKind::Statistic => 11,
            EventKind::Liquidation => 12,
        }
    }

    /// The kind a byte names, `None` for a byte no kind has (a reader of shared memory checks
    /// before it makes an [`Event`] of the bytes).
    pub const fn from_u8(byte: u8) -> Option<EventKind> {
        match byte {
            1 => Some(EventKind::Quote),
            2 => Some(EventKind::Trade),
            3 => Some(EventKind::BookLevel),
            4 => Some(EventKind::SnapshotBegin),
            5 => Some(EventKind::SnapshotEnd),
            6 => Some(EventKind::Gap),
            7 => Some(EventKind::VenueStatus),
            8 => Some(EventKind::Reference),
            9 => Some(EventKind::Bar),
            10 => Some(EventKind::TradingStatus),
            11 => Some(EventKind::Imbalance),
            12 => Some(EventKind::Statistic),
            13 => Some(EventKind::Liquidation),
            _ => None,
        }
    }

    /// The kind whose [`EventKind::name`] this is.
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The kind's name: the `type` of its JSON line (`event::json`; a reference's line names its
    /// reference kind instead) and the `kind` label of `tickwire_venue_events_total`.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Quote => "quote",
            EventKind::Trade => "trade",
            EventKind::BookLevel => "level",
            EventKind::SnapshotBegin => "snapshot_begin",
            EventKind::SnapshotEnd => "snapshot_end",
            EventKind::Gap => "gap",
            EventKind::VenueStatus => "status",
            EventKind::Reference => "reference",
            EventKind::Bar => "bar",
            EventKind::TradingStatus => "trading_status",
            EventKind::Imbalance => "imbalance",
            EventKind::Statistic => "statistic",
            EventKind::Liquidation => "liquidation",
        }
    }
}

/// `EventKind::ALL` lists each kind at its own index, so an array of `EventKind::COUNT` counters
/// has exactly one slot per kind (checked when the crate compiles).
const _: () = {
    let mut position = 0;
    while position < EventKind::COUNT {
        assert!(EventKind::ALL[position].index() == position);
        position += 1;
    }
};

/// Side of a book level, or the aggressor side of a trade (`Bid` = the buyer took liquidity).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    None = 0,
    Bid = 1,
    Ask = 2,
}

impl Side {
    /// Reads a side from its byte, mapping anything unknown to `None`.
    #[inline]
    pub const fn from_u8(byte: u8) -> Side {
        match byte {
            1 => Side::Bid,
            2 => Side::Ask,
            _ => Side::None,
        }
    }
}

/// Flag bits in [`EventHeader::flags`].
pub mod flags {
    /// The last event made from one venue message: a consumer may act on the state now.
    pub const LAST: u8 = 1 << 0;
    /// The event belongs to a snapshot (between `SnapshotBegin` and `SnapshotEnd`).
    pub const SNAPSHOT: u8 = 1 << 1;
    /// The venue sent no usable exchange timestamp; `exchange_ts_ns` is 0.
    pub const NO_EXCHANGE_TS: u8 = 1 << 2;
    /// tickwire computed the event from its own state (a quote from its order book) rather than
    /// decoding it from a venue message of that kind (a bookTicker).
    pub const DERIVED: u8 = 1 << 3;
    /// On a `Bar` only: the bar's interval, a [`BarInterval`](super::BarInterval) in these bits
    /// (read it with `BarInterval::from_flags`).
    pub const BAR_INTERVAL_MASK: u8 = 0b0111_0000;
    /// The shift of [`BAR_INTERVAL_MASK`].
    pub const BAR_INTERVAL_SHIFT: u32 = 4;
    /// On a `BookLevel` or a `Quote`: a size was larger than `Fixed` holds (9,223,372,036.85
    /// units at 1e-9; an order book level's total can be) and reads `Fixed::MAX`, a floor of
    /// the true size, not the size. The venue's feed counts each such event.
    pub const SATURATED: u8 = 1 << 7;
}

/// A price field that the venue left empty: DBN's `UNDEF_PRICE` (`i64::MAX`, the same bits as
/// `Fixed::MAX`), kept as it is in the optional prices of [`Imbalance`] and [`Statistic`]. Quotes
/// use 0 price and 0 size for an empty side instead, as every venue's quotes do.
pub const NO_PRICE: Fixed = Fixed::MAX;

/// The fields every event carries. 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHeader {
    /// When the venue says the event happened, ns since the Unix epoch (0 when unknown).
    pub exchange_ts_ns: u64,
    /// When our network thread reaped the bytes that carried it, ns since the Unix epoch
    /// (see `clock`).
    pub recv_ts_ns: u64,
    /// The venue's own sequence for this stream (Binance `u`, DBN `sequence`, ...), 0 if none.
    pub venue_seq: u64,
    pub instrument_id: InstrumentId,
    pub venue_id: VenueId,
    pub kind: EventKind,
    /// Bits from [`flags`].
    pub flags: u8,
}

/// Best bid and offer. A side with no level has price and size 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Quote {
    pub bid_px: Fixed,
    pub bid_sz: Fixed,
    pub ask_px: Fixed,
    pub ask_sz: Fixed,
}

/// One trade print.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Trade {
    pub price: Fixed,
    pub size: Fixed,
    pub trade_id: u64,
    /// A [`Side`] as its byte; read it with [`Trade::aggressor`].
    pub aggressor_side: u8,
    pub _reserved: [u8; 7],
}

impl Trade {
    pub fn new(price: Fixed, size: Fixed, trade_id: u64, aggressor: Side) -> Trade {
        Trade {
            price,
            size,
            trade_id,
            aggressor_side: aggressor as u8,
            _reserved: [0; 7],
        }
    }

    pub fn aggressor(&self) -> Side {
        Side::from_u8(self.aggressor_side)
    }
}

impl fmt::Debug for Trade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trade")
            .field("price", &self.price)
            .field("size", &self.size)
            .field("trade_id", &self.trade_id)
            .field("aggressor", &self.aggressor())
            .finish()
    }
}

/// One price level set to a new total size; size 0 removes the level.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct BookLevel {
    pub price: Fixed,
    pub size: Fixed,
    /// A [`Side`] as its byte; read it with [`BookLevel::side`].
    pub side: u8,
    pub _reserved: [u8; 15],
}

impl BookLevel {
    pub fn new(side: Side, price: Fixed, size: Fixed) -> BookLevel {
        BookLevel {
            price,
            size,
            side: side as u8,
            _reserved: [0; 15],
        }
    }

    pub fn side(&self) -> Side {
        Side::from_u8(self.side)
    }
}

impl fmt::Debug for BookLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BookLevel")
            .field("side", &self.side())
            .field("price", &self.price)
            .field("size", &self.size)
            .finish()
    }
}

/// Brackets a full book: `SnapshotBegin` announces the level counts, `SnapshotEnd` repeats them
/// once every level has been sent.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub bid_levels: u32,
    pub ask_levels: u32,
    /// The venue's id of the snapshot (Binance `lastUpdateId`), 0 if none.
    pub snapshot_id: u64,
    pub _reserved: [u64; 2],
}

/// Why continuity was lost.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GapReason {
    Unknown = 0,
    /// The venue's sequence skipped (Binance `pu` != previous `u`).
    SequenceBreak = 1,
    /// The connection dropped and was re-established.
    Reconnect = 2,
    /// A ring between our own threads was full and frames were dropped.
    RingOverflow = 3,
    /// The stream went stale past its configured limit.
    Stale = 4,
    /// The NATS bridge's queue in front of the network was full and it dropped messages
    /// (`tickwire-nats`): `expected_seq..received_seq` are the subject sequence numbers lost.
    BridgeDrop = 5,
    /// A bus consumer (the NATS bridge) was lapped by the appliance: `received_seq -
    /// expected_seq` events of every instrument are lost.
    BusOverrun = 6,
    /// A bound of the appliance was reached (a Databento L3 book's order limit, a gateway
    /// session's instrument mappings): the instrument's book was dropped, and is rebuilt from
    /// what follows (issue 32).
    Limit = 7,
}

impl GapReason {
    pub const fn from_u8(byte: u8) -> GapReason {
        match byte {
            1 => GapReason::SequenceBreak,
            2 => GapReason::Reconnect,
            3 => GapReason::RingOverflow,
            4 => GapReason::Stale,
            5 => GapReason::BridgeDrop,
            6 => GapReason::BusOverrun,
            7 => GapReason::Limit,
            _ => GapReason::Unknown,
        }
    }
}

/// Continuity was lost between `expected_seq` and `received_seq`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Gap {
    /// The sequence that should have come next (0 if unknown).
    pub expected_seq: u64,
    /// The sequence that came instead (0 if unknown).
    pub received_seq: u64,
    /// A [`GapReason`] as its byte; read it with [`Gap::reason`].
    pub reason: u8,
    pub _reserved: [u8; 15],
}

impl Gap {
    pub fn new(reason: GapReason, expected_seq: u64, received_seq: u64) -> Gap {
        Gap {
            expected_seq,
            received_seq,
            reason: reason as u8,
            _reserved: [0; 15],
        }
    }

    pub fn reason(&self) -> GapReason {
        GapReason::from_u8(self.reason)
    }
}

impl fmt::Debug for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gap")
            .field("reason", &self.reason())
            .field("expected_seq", &self.expected_seq)
            .field("received_seq", &self.received_seq)
            .finish()
    }
}

/// Connection or stream state, as the strategy sees it.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VenueState {
    Unknown = 0,
    Connecting = 1,
    Live = 2,
    /// No data for longer than the stream's staleness limit.
    Stale = 3,
    /// Data flows again after `Stale`.
    Recovered = 4,
    Disconnected = 5,
}

impl VenueState {
    pub const fn from_u8(byte: u8) -> VenueState {
        match byte {
            1 => VenueState::Connecting,
            2 => VenueState::Live,
            3 => VenueState::Stale,
            4 => VenueState::Recovered,
            5 => VenueState::Disconnected,
            _ => VenueState::Unknown,
        }
    }
}

/// A venue or stream changed state. `instrument_id` in the header is 0 when the whole
/// connection is meant.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct VenueStatus {
    /// A [`VenueState`] as its byte; read it with [`VenueStatus::state`].
    pub state: u8,
    pub _reserved: [u8; 7],
    /// A reason code from the connection state machine (0 = none).
    pub reason_code: u32,
    pub _reserved2: u32,
    /// Free-form detail for the reason (for example the close code or attempt number).
    pub detail: u64,
    pub _reserved3: u64,
}

impl VenueStatus {
    pub fn new(state: VenueState, reason_code: u32, detail: u64) -> VenueStatus {
        VenueStatus {
            state: state as u8,
            reason_code,
            detail,
            ..VenueStatus::default()
        }
    }

    pub fn state(&self) -> VenueState {
        VenueState::from_u8(self.state)
    }
}

impl fmt::Debug for VenueStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VenueStatus")
            .field("state", &self.state())
            .field("reason_code", &self.reason_code)
            .field("detail", &self.detail)
            .finish()
    }
}

/// What a [`Reference`] price is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReferenceKind {
    Unknown = 0,
    /// The venue's mark price for the instrument.
    Mark = 1,
    /// The price of the instrument's underlying index.
    Index = 2,
}

impl ReferenceKind {
    pub const fn from_u8(byte: u8) -> ReferenceKind {
        match byte {
            1 => ReferenceKind::Mark,
            2 => ReferenceKind::Index,
            _ => ReferenceKind::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceKind::Unknown => "unknown",
            ReferenceKind::Mark => "mark",
            ReferenceKind::Index => "index",
        }
    }
}

/// A mark or index price for an instrument.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Reference {
    pub price: Fixed,
    /// A [`ReferenceKind`] as its byte; read it with [`Reference::kind`].
    pub kind: u8,
    pub _reserved: [u8; 7],
    pub _reserved2: [u64; 2],
}

impl Reference {
    pub fn new(kind: ReferenceKind, price: Fixed) -> Reference {
        Reference {
            price,
            kind: kind as u8,
            ..Reference::default()
        }
    }

    pub fn kind(&self) -> ReferenceKind {
        ReferenceKind::from_u8(self.kind)
    }
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reference")
            .field("kind", &self.kind())
            .field("price", &self.price)
            .finish()
    }
}

/// The period an OHLCV [`Bar`] covers, kept in the header's flags
/// ([`flags::BAR_INTERVAL_MASK`]).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BarInterval {
    Unknown = 0,
    Second = 1,
    Minute = 2,
    Hour = 3,
    Day = 4,
    /// A daily bar that closes at the venue's end-of-day settlement rather than at midnight UTC
    /// (DBN `ohlcv-eod`).
    EndOfDay = 5,
}

impl BarInterval {
    pub const fn from_flags(flags: u8) -> BarInterval {
        match (flags & flags::BAR_INTERVAL_MASK) >> flags::BAR_INTERVAL_SHIFT {
            1 => BarInterval::Second,
            2 => BarInterval::Minute,
            3 => BarInterval::Hour,
            4 => BarInterval::Day,
            5 => BarInterval::EndOfDay,
            _ => BarInterval::Unknown,
        }
    }

    /// The interval's bits, to OR into a header's flags.
    pub const fn to_flags(self) -> u8 {
        (self as u8) << flags::BAR_INTERVAL_SHIFT
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BarInterval::Unknown => "unknown",
            BarInterval::Second => "1s",
            BarInterval::Minute => "1m",
            BarInterval::Hour => "1h",
            BarInterval::Day => "1d",
            BarInterval::EndOfDay => "eod",
        }
    }
}

/// An OHLCV bar. OHLCV records carry no sequence number, so the bar's traded volume (whole
/// units) rides in the header's `venue_seq`, and its interval in the header's flags
/// ([`BarInterval::from_flags`]). `exchange_ts_ns` is the bar's opening time.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bar {
    pub open: Fixed,
    pub high: Fixed,
    pub low: Fixed,
    pub close: Fixed,
}

/// The venue changed an instrument's trading state (DBN `StatusMsg`). The codes are DBN's
/// (`dbn::enums::{StatusAction, StatusReason, TradingEvent}`); the three booleans are DBN's
/// characters: `b'Y'`, `b'N'`, or `b'~'` when the venue did not say.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TradingStatus {
    pub action: u16,
    pub reason: u16,
    pub trading_event: u16,
    pub is_trading: u8,
    pub is_quoting: u8,
    pub is_short_sell_restricted: u8,
    pub _reserved: [u8; 23],
}

/// An auction imbalance (DBN `ImbalanceMsg`), the fields that fit one payload. Not carried:
/// `auction_time`, `auct_interest_clr_price`, `ssr_filling_price`, `ind_match_price`, the collars,
/// `market_imbalance_qty`, `unpaired_qty` and `ts_recv`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Imbalance {
    /// The price the imbalance is computed at ([`NO_PRICE`] when unused).
    pub ref_price: Fixed,
    /// The hypothetical clearing price of cross and continuous orders (Nasdaq's near
    /// indicative clearing price; [`NO_PRICE`] when unused).
    pub cont_book_clr_price: Fixed,
    /// Shares matched at `ref_price`.
    pub paired_qty: u32,
    /// Shares not matched at `ref_price`.
    pub total_imbalance_qty: u32,
    /// The side of the imbalance, a [`Side`] as its byte; read it with [`Imbalance::side`].
    pub side: u8,
    /// DBN's character: `b'O'` open, `b'C'` close, `b'H'` halt/IPO...
    pub auction_type: u8,
    /// DBN's character (`b'~'` when not given).
    pub significant_imbalance: u8,
    /// A [`Side`] as its byte.
    pub unpaired_side: u8,
    pub auction_status: u8,
    pub freeze_status: u8,
    pub num_extensions: u8,
    pub _reserved: u8,
}

impl Imbalance {
    pub fn side(&self) -> Side {
        Side::from_u8(self.side)
    }

    pub fn unpaired_side(&self) -> Side {
        Side::from_u8(self.unpaired_side)
    }
}

impl fmt::Debug for Imbalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Imbalance")
            .field("ref_price", &self.ref_price)
            .field("cont_book_clr_price", &self.cont_book_clr_price)
            .field("paired_qty", &self.paired_qty)
            .field("total_imbalance_qty", &self.total_imbalance_qty)
            .field("side", &self.side())
            .field("auction_type", &char::from(self.auction_type))
            .field(
                "significant_imbalance",
                &char::from(self.significant_imbalance),
            )
            .field("unpaired_side", &self.unpaired_side())
            .field("auction_status", &self.auction_status)
            .field("freeze_status", &self.freeze_status)
            .field("num_extensions", &self.num_extensions)
            .finish()
    }
}

/// A venue statistic (DBN `StatMsg`): what it is in `stat_type` (DBN's `StatType` code: 1
/// opening price, 3 settlement price, 9 open interest...).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Statistic {
    /// [`NO_PRICE`] when the statistic is not a price.
    pub price: Fixed,
    /// Whole units, as the venue sent it; [`Statistic::NO_QUANTITY`] when it is not a quantity.
    pub quantity: i64,
    /// The time the statistic refers to, ns since the Unix epoch (`u64::MAX` when unused).
    pub ts_ref: u64,
    pub stat_type: u16,
    /// The venue's channel (DBN `channel_id`).
    pub channel_id: u16,
    /// DBN's `StatUpdateAction`: 1 new, 2 delete.
    pub update_action: u8,
    /// DBN's venue-specific `stat_flags`.
    pub stat_flags: u8,
    pub _reserved: [u8; 2],
}

impl Statistic {
    /// No quantity (DBN v3 `UNDEF_STAT_QUANTITY`).
    pub const NO_QUANTITY: i64 = i64::MAX;
}

/// A forced close of a position by the venue (Bybit `allLiquidation`, OKX `liquidation-orders`).
/// The time the venue gives for it is the header's `exchange_ts_ns`; the header's `venue_seq` is
/// 0 (venues number no liquidations).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Liquidation {
    /// The price the position was closed at, as the venue gives it (Bybit: the bankruptcy
    /// price).
    pub price: Fixed,
    /// The size closed, in the instrument's units.
    pub size: Fixed,
    /// The side of the position that was liquidated, a [`Side`] as its byte: `Bid` = a long
    /// position (the venue sold it), `Ask` = a short (the venue bought it). Read it with
    /// [`Liquidation::position_side`].
    pub position_side: u8,
    pub _reserved: [u8; 15],
}

impl Liquidation {
    pub fn new(position_side: Side, price: Fixed, size: Fixed) -> Liquidation {
        Liquidation {
            price,
            size,
            position_side: position_side as u8,
            _reserved: [0; 15],
        }
    }

    pub fn position_side(&self) -> Side {
        Side::from_u8(self.position_side)
    }
}

impl fmt::Debug for Liquidation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Liquidation")
            .field("position_side", &self.position_side())
            .field("price", &self.price)
            .field("size", &self.size)
            .finish()
    }
}

/// The 32 payload bytes. Private: read through [`Event::body`].
#[repr(C)]
#[derive(Clone, Copy)]
union Payload {
    quote: Quote,
    trade: Trade,
    level: BookLevel,
    snapshot: Snapshot,
    gap: Gap,
    status: VenueStatus,
    reference: Reference,
    bar: Bar,
    trading_status: TradingStatus,
    imbalance: Imbalance,
    statistic: Statistic,
    liquidation: Liquidation,
    raw: [u64; 4],
}

/// A payload read by value, to match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Quote(Quote),
    Trade(Trade),
    BookLevel(BookLevel),
    SnapshotBegin(Snapshot),
    SnapshotEnd(Snapshot),
    Gap(Gap),
    VenueStatus(VenueStatus),
    Reference(Reference),
    Bar(Bar),
    TradingStatus(TradingStatus),
    Imbalance(Imbalance),
    Statistic(Statistic),
    Liquidation(Liquidation),
}

/// One normalized event: exactly one 64-byte cache line.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Event {
    pub header: EventHeader,
    payload: Payload,
}

impl Event {
    /// Builds an event; the header's `kind` is taken from `body`.
    #[inline]
    pub fn new(mut header: EventHeader, body: Body) -> Event {
        let (kind, payload) = match body {
            Body::Quote(quote) => (EventKind::Quote, Payload { quote }),
            Body::Trade(trade) => (EventKind::Trade, Payload { trade }),
            Body::BookLevel(level) => (EventKind::BookLevel, Payload { level }),
            Body::SnapshotBegin(snapshot) => (EventKind::SnapshotBegin, Payload { snapshot }),
            Body::SnapshotEnd(snapshot) => (EventKind::SnapshotEnd, Payload { snapshot }),
            Body::Gap(gap) => (EventKind::Gap, Payload { gap }),
            Body::VenueStatus(status) => (EventKind::VenueStatus, Payload { status }),
            Body::Reference(reference) => (EventKind::Reference, Payload { reference }),
            Body::Bar(bar) => (EventKind::Bar, Payload { bar }),
            Body::TradingStatus(trading_status) => {
                (EventKind::TradingStatus, Payload { trading_status })
            }
            Body::Imbalance(imbalance) => (EventKind::Imbalance, Payload { imbalance }),
            Body::Statistic(statistic) => (EventKind::Statistic, Payload { statistic }),
            Body::Liquidation(liquidation) => (EventKind::Liquidation, Payload { liquidation }),
        };
        header.kind = kind;
        Event { header, payload }
    }

    #[inline]
    pub fn kind(&self) -> EventKind {
        self.header.kind
    }

    /// The payload as the header's kind says.
    #[inline]
    pub fn body(&self) -> Body {
        // SAFETY: every union field is a `repr(C)` struct of integers and `Fixed` (an i64) with
        // no padding, so any 32 bytes are a valid value of any of them; reading the field that
        // `kind` names is therefore sound even if a caller edited `header.kind`.
        unsafe {
            match self.header.kind {
                EventKind::Quote => Body::Quote(self.payload.quote),
                EventKind::Trade => Body::Trade(self.payload.trade),
                EventKind::BookLevel => Body::BookLevel(self.payload.level),
                EventKind::SnapshotBegin => Body::SnapshotBegin(self.payload.snapshot),
                EventKind::SnapshotEnd => Body::SnapshotEnd(self.payload.snapshot),
                EventKind::Gap => Body::Gap(self.payload.gap),
                EventKind::VenueStatus => Body::VenueStatus(self.payload.status),
                EventKind::Reference => Body::Reference(self.payload.reference),
                EventKind::Bar => Body::Bar(self.payload.bar),
                EventKind::TradingStatus => Body::TradingStatus(self.payload.trading_status),
                EventKind::Imbalance => Body::Imbalance(self.payload.imbalance),
                EventKind::Statistic => Body::Statistic(self.payload.statistic),
                EventKind::Liquidation => Body::Liquidation(self.payload.liquidation),
            }
        }
    }

    /// The payload's 32 bytes as words, for hashing, logging and byte-exact comparisons.
    #[inline]
    pub fn payload_words(&self) -> [u64; 4] {
        // SAFETY: `raw` is four u64s covering the whole union, which has no padding; any bytes
        // are valid u64s.
        unsafe { self.payload.raw }
    }
}

/// The byte offset of the header's `kind` inside an event (pinned by `layout_tests`).
const KIND_OFFSET: usize = 30;

impl Event {
    /// The event's 64 bytes as eight little-endian words, as the bus stores them.
    #[inline]
    pub fn to_words(&self) -> [u64; 8] {
        // SAFETY: an `Event` is 64 bytes without padding (the header's fields fill 32 bytes and
        // every payload variant fills 32; `layout_tests` pins both), so every byte is
        // initialized and any 64 initialized bytes are a valid `[u64; 8]`.
        unsafe { std::mem::transmute::<Event, [u64; 8]>(*self) }
    }

    /// The kind byte of an event's words.
    #[inline]
    pub fn kind_byte(words: &[u64; 8]) -> u8 {
        (words[KIND_OFFSET / 8] >> ((KIND_OFFSET % 8) * 8)) as u8
    }

    /// The event these words hold, `None` when the kind byte names no [`EventKind`] (the one
    /// field whose bit patterns are not all valid).
    #[inline]
    pub fn from_words(words: [u64; 8]) -> Option<Event> {
        EventKind::from_u8(Event::kind_byte(&words))?;
        // SAFETY: 64 bytes, and every field of `Event` accepts any bit pattern except the kind
        // byte, just checked: the header's other fields are integers, the payload is a union of
        // integer structs. The alignment of the result is `Event`'s own (transmute moves by
        // value).
        Some(unsafe { std::mem::transmute::<[u64; 8], Event>(words) })
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.header == other.header && self.payload_words() == other.payload_words()
    }
}

impl Eq for Event {}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("header", &self.header)
            .field("body", &self.body())
            .finish()
    }
}

#[cfg(test)]
mod layout_tests {
    //! Pins the size, alignment and field offsets of every type that crosses a ring, as `dbn`'s
    //! layout tests do: a change here changes what consumers read.
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn event_is_one_cache_line() {
        assert_eq!(size_of::<Event>(), 64);
        assert_eq!(align_of::<Event>(), 64);
        assert_eq!(size_of::<EventHeader>(), 32);
        assert_eq!(size_of::<Payload>(), 32);
        assert_eq!(offset_of!(Event, header), 0);
        assert_eq!(offset_of!(Event, payload), 32);
    }

    #[test]
    fn header_offsets() {
        assert_eq!(offset_of!(EventHeader, exchange_ts_ns), 0);
        assert_eq!(offset_of!(EventHeader, recv_ts_ns), 8);
        assert_eq!(offset_of!(EventHeader, venue_seq), 16);
        assert_eq!(offset_of!(EventHeader, instrument_id), 24);
        assert_eq!(offset_of!(EventHeader, venue_id), 28);
        assert_eq!(offset_of!(EventHeader, kind), 30);
        assert_eq!(offset_of!(EventHeader, flags), 31);
    }

    #[test]
    fn payloads_fill_32_bytes_without_padding() {
        assert_eq!(size_of::<Quote>(), 32);
        assert_eq!(size_of::<Trade>(), 32);
        assert_eq!(size_of::<BookLevel>(), 32);
        assert_eq!(size_of::<Snapshot>(), 32);
        assert_eq!(size_of::<Gap>(), 32);
        assert_eq!(size_of::<VenueStatus>(), 32);
        assert_eq!(size_of::<Reference>(), 32);
        assert_eq!(offset_of!(Reference, kind), 8);
        assert_eq!(offset_of!(Trade, aggressor_side), 24);
        assert_eq!(offset_of!(BookLevel, side), 16);
        assert_eq!(offset_of!(Gap, reason), 16);
        assert_eq!(offset_of!(VenueStatus, reason_code), 8);
        assert_eq!(offset_of!(VenueStatus, detail), 16);
        assert_eq!(size_of::<Bar>(), 32);
        assert_eq!(size_of::<TradingStatus>(), 32);
        assert_eq!(size_of::<Imbalance>(), 32);
        assert_eq!(size_of::<Statistic>(), 32);
        assert_eq!(offset_of!(Bar, close), 24);
        assert_eq!(offset_of!(TradingStatus, trading_event), 4);
        assert_eq!(offset_of!(TradingStatus, is_short_sell_restricted), 8);
        assert_eq!(offset_of!(Imbalance, paired_qty), 16);
        assert_eq!(offset_of!(Imbalance, side), 24);
        assert_eq!(offset_of!(Imbalance, num_extensions), 30);
        assert_eq!(offset_of!(Statistic, ts_ref), 16);
        assert_eq!(offset_of!(Statistic, stat_type), 24);
        assert_eq!(offset_of!(Statistic, update_action), 28);
        assert_eq!(size_of::<Liquidation>(), 32);
        assert_eq!(offset_of!(Liquidation, size), 8);
        assert_eq!(offset_of!(Liquidation, position_side), 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> EventHeader {
        EventHeader {
            exchange_ts_ns: 1_723_075_200_000_000_000,
            recv_ts_ns: 1_723_075_201_000_000_000,
            venue_seq: 42,
            instrument_id: 7,
            venue_id: 1,
            kind: EventKind::VenueStatus,
            flags: flags::LAST,
        }
    }

    #[test]
    fn body_round_trips_and_sets_kind() {
        let bodies = [
            Body::Quote(Quote {
                bid_px: Fixed(1),
                bid_sz: Fixed(2),
                ask_px: Fixed(3),
                ask_sz: Fixed(4),
            }),
            Body::Trade(Trade::new(Fixed(5), Fixed(6), 7, Side::Ask)),
            Body::BookLevel(BookLevel::new(Side::Bid, Fixed(8), Fixed::ZERO)),
            Body::SnapshotBegin(Snapshot {
                bid_levels: 10,
                ask_levels: 11,
                snapshot_id: 12,
                _reserved: [0; 2],
            }),
            Body::SnapshotEnd(Snapshot::default()),
            Body::Gap(Gap::new(GapReason::SequenceBreak, 100, 103)),
            Body::VenueStatus(VenueStatus::new(VenueState::Stale, 3, 500)),
            Body::Reference(Reference::new(ReferenceKind::Index, Fixed(9))),
            Body::Bar(Bar {
                open: Fixed(1),
                high: Fixed(4),
                low: Fixed(0),
                close: Fixed(2),
            }),
            Body::TradingStatus(TradingStatus {
                action: 7,
                reason: 1,
                trading_event: 0,
                is_trading: b'Y',
                is_quoting: b'Y',
                is_short_sell_restricted: b'~',
                _reserved: [0; 23],
            }),
            Body::Imbalance(Imbalance {
                ref_price: Fixed(3),
                cont_book_clr_price: NO_PRICE,
                paired_qty: 5,
                total_imbalance_qty: 6,
                side: Side::Bid as u8,
                auction_type: b'O',
                ..Imbalance::default()
            }),
            Body::Statistic(Statistic {
                price: Fixed(9),
                quantity: Statistic::NO_QUANTITY,
                ts_ref: u64::MAX,
                stat_type: 3,
                update_action: 1,
                ..Statistic::default()
            }),
            Body::Liquidation(Liquidation::new(Side::Bid, Fixed(44_990), Fixed(20_000))),
        ];
        let kinds = [
            EventKind::Quote,
            EventKind::Trade,
            EventKind::BookLevel,
            EventKind::SnapshotBegin,
            EventKind::SnapshotEnd,
            EventKind::Gap,
            EventKind::VenueStatus,
            EventKind::Reference,
            EventKind::Bar,
            EventKind::TradingStatus,
            EventKind::Imbalance,
            EventKind::Statistic,
            EventKind::Liquidation,
        ];
        assert_eq!(bodies.len(), kinds.len());
        for (body, kind) in bodies.into_iter().zip(kinds) {
            let event = Event::new(header(), body);
            assert_eq!(event.kind(), kind);
            assert_eq!(event.body(), body);
            assert_eq!(event.header.venue_seq, 42);
        }
        // Every body's kind has its own counter slot and metric name.
        assert_eq!(
            kinds,
            EventKind::ALL,
            "EventKind::ALL lists every kind, in order"
        );
        let mut names: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventKind::COUNT);
    }

    #[test]
    fn events_round_trip_through_words_and_a_bad_kind_is_refused() {
        let event = Event::new(
            header(),
            Body::Gap(Gap::new(GapReason::SequenceBreak, 100, 103)),
        );
        let words = event.to_words();
        assert_eq!(Event::kind_byte(&words), EventKind::Gap as u8);
        assert_eq!(Event::from_words(words), Some(event));
        for kind in EventKind::ALL {
            assert_eq!(EventKind::from_u8(kind as u8), Some(kind));
            assert_eq!(EventKind::from_name(kind.name()), Some(kind));
        }
        let mut bad = words;
        bad[3] &= !(0xff << 48);
        assert_eq!(Event::from_words(bad), None);
        bad[3] |= 14 << 48;
        assert_eq!(Event::from_words(bad), None);
    }

    #[test]
    fn bar_interval_round_trips_through_the_flags() {
        for interval in [
            BarInterval::Second,
            BarInterval::Minute,
            BarInterval::Hour,
            BarInterval::Day,
            BarInterval::EndOfDay,
        ] {
            let flags = flags::LAST | flags::NO_EXCHANGE_TS | interval.to_flags();
            assert_eq!(BarInterval::from_flags(flags), interval);
            assert_eq!(flags & flags::LAST, flags::LAST);
        }
        assert_eq!(BarInterval::from_flags(0x70), BarInterval::Unknown);
    }

    #[test]
    fn unknown_side_and_reason_bytes_read_as_unknown() {
        let mut trade = Trade::new(Fixed(1), Fixed(1), 1, Side::Bid);
        trade.aggressor_side = 200;
        assert_eq!(trade.aggressor(), Side::None);
        assert_eq!(GapReason::from_u8(99), GapReason::Unknown);
        assert_eq!(VenueState::from_u8(99), VenueState::Unknown);
    }

    #[test]
    fn a_retagged_event_reads_other_variant_soundly() {
        let mut event = Event::new(
            header(),
            Body::Trade(Trade::new(Fixed(5), Fixed(6), 7, Side::Ask)),
        );
        event.header.kind = EventKind::Quote;
        match event.body() {
            Body::Quote(quote) => {
                assert_eq!(quote.bid_px, Fixed(5));
                assert_eq!(quote.ask_px, Fixed(7));
            }
            other => panic!("expected a quote view, got {other:?}"),
        }
    }
}
