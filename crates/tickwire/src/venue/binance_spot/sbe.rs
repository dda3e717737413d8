//! One Binance Spot SBE market-data frame in, one typed, borrowed [`Message`] out: read in place,
//! no allocation, no copy, every length checked before it is used.
//!
//! Written by hand from Binance's own documents (binance-spot-api-docs commit a5e0bc3,
//! 2026-07-21): "SBE Market Data Streams" (`sbe-market-data-streams.md`), the SBE FAQ
//! (`sbe_faq.md`) and the message schema `stream_1_0.xml`, **schema id 1, version 0**
//! (`package="spot_stream"`, semanticVersion 5.2, little-endian), following the FIX SBE 1.0
//! specification's layout rules. The SBE tool's generated Rust for the same schema
//! (`crates/binance-sbe-official`) is not used here; tests and benches check this decoder
//! against it as an independent encoder.
//!
//! # Layout (all little-endian)
//!
//! ```text
//! messageHeader   blockLength u16, templateId u16, schemaId u16, version u16      (8 bytes)
//! root block      blockLength bytes: the known fields first, anything after them skipped
//! groups          dimension (blockLength u16, numInGroup u32 for groupSizeEncoding or u16 for
//!                 groupSize16Encoding), then numInGroup entries of blockLength bytes each
//! symbol          varString8: length u8, then that many UTF-8 bytes
//! ```
//!
//! | template | message                     | stream             | root block (known) | groups |
//! |----------|-----------------------------|--------------------|--------------------|--------|
//! | 10000    | `TradesStreamEvent`         | `<symbol>@trade`   | 18                 | trades (u32 count), entry 25 |
//! | 10001    | `BestBidAskStreamEvent`     | `<symbol>@bestBidAsk` | 50              | none   |
//! | 10002    | `DepthSnapshotStreamEvent`  | `<symbol>@depth20` | 18                 | bids, asks (u16 count), entry 16 |
//! | 10003    | `DepthDiffStreamEvent`      | `<symbol>@depth`   | 26                 | bids, asks (u16 count), entry 16 |
//!
//! `isBestMatch` in a trade is a constant (`presence="constant"`, always True) and takes no bytes.
//!
//! # Versions: what is accepted
//!
//! The FAQ ("Regarding Legacy support"): a new schema **id** is a breaking change, a new
//! **version** of the same id a non-breaking one, and "an SBE decoder for schema 3:0 is expected
//! to decode schema 3:1 gracefully as detailed in the FIX SBE Specification" (its schema
//! extension mechanism). The stream endpoint takes no schema parameter, so when Binance publishes
//! `stream_1_1.xml` every connection gets version 1. So:
//!
//! - schema id 1, any version: decoded. A block (root or group entry) longer than the fields
//!   known here is skipped by its `blockLength` (fields appended by a newer version); bytes after
//!   the symbol (var data appended by a newer version) are ignored. The message's
//!   [`Message::schema_version`] says which version it was, so the feed can count the newer ones
//!   and an operator can see that a new schema is out.
//! - a block shorter than version 0's fields: [`SbeError::BlockTooShort`] (the fields are not
//!   there; SBE never removes fields within one schema id).
//! - any other schema id: [`SbeError::SchemaMismatch`], counted and skipped by the feed (a
//!   breaking change: this decoder must be rewritten for it).
//!
//! # Numbers
//!
//! Prices and quantities are a mantissa (`i64`) with a per-message exponent (`i8`), the value
//! being `mantissa * 10^exponent`; they become [`Fixed`] (an `i64` count of 1e-9) exactly when
//! the exponent is -9 or more. With more than nine decimals (exponent below -9) the value is
//! **rounded to the nearest 1e-9, ties to even** (banker's rounding: unbiased when many rounded
//! values are summed, and it can never make a magnitude overflow). A value whose 1e-9 count does
//! not fit an `i64` is [`SbeError::DecimalOverflow`], never wrapped or clamped. The exponent's
//! SBE null value (-128) is [`SbeError::BadExponent`]. Every decimal of a message is checked
//! when it is decoded, so iterating its levels or trades afterwards cannot fail.
//!
//! Times are microseconds since the epoch (`utcTimestampUs`, int64) and become nanoseconds
//! (`u64`); a negative time or one beyond `u64` nanoseconds is [`SbeError::BadTimestamp`].
//! Update and trade ids are int64 on the wire and `u64` here; a negative one is
//! [`SbeError::NegativeId`]. The symbol is returned as raw bytes (Binance documents UTF-8, and
//! non-ASCII symbols are possible); it is not validated here, as the USD-M decoder does not.
//!
//! [`events`] turns a decoded message into normalized [`Event`]s, the same ones the USD-M JSON
//! path makes (see its docs).

use crate::event::{flags, Trade, VenueId};
use crate::event::{Body, BookLevel, Event, EventHeader, EventKind, InstrumentId, Quote, Side};
use crate::fixed::Fixed;
use crate::venue::emit::Emitter;

/// The schema this decoder is written from: `stream_1_0.xml`'s `id`.
pub const SCHEMA_ID: u16 = 1;
/// The schema version this decoder is written from; newer versions of [`SCHEMA_ID`] are read too.
pub const SCHEMA_VERSION: u16 = 0;
/// The size of `messageHeader`.
pub const HEADER_LEN: usize = 8;

/// `TradesStreamEvent`'s template id.
pub const TRADES_TEMPLATE_ID: u16 = 10000;
/// `BestBidAskStreamEvent`'s template id.
pub const BEST_BID_ASK_TEMPLATE_ID: u16 = 10001;
/// `DepthSnapshotStreamEvent`'s template id.
pub const DEPTH_SNAPSHOT_TEMPLATE_ID: u16 = 10002;
/// `DepthDiffStreamEvent`'s template id.
pub const DEPTH_DIFF_TEMPLATE_ID: u16 = 10003;

/// Version 0's root block lengths (the fields' sizes summed, as the schema lays them out).
const TRADES_BLOCK: usize = 18;
const BEST_BID_ASK_BLOCK: usize = 50;
const DEPTH_SNAPSHOT_BLOCK: usize = 18;
const DEPTH_DIFF_BLOCK: usize = 26;
/// A trade entry: id i64, price i64, qty i64, isBuyerMaker u8 (isBestMatch is constant).
const TRADE_ENTRY: usize = 25;
/// A book level entry: price i64, qty i64.
const LEVEL_ENTRY: usize = 16;

/// Why a frame could not be decoded. Small and `Copy`: the feed counts it by
/// [`SbeError::kind`] and skips the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SbeError {
    /// The frame ends inside the element that starts at `offset`.
    #[error("frame ends inside the element at byte {offset}")]
    Truncated { offset: u32 },
    /// A root or group block is shorter than version 0's fields.
    #[error("block length {block_length} is shorter than the {needed} bytes of the known fields")]
    BlockTooShort { block_length: u16, needed: u16 },
    /// A group's `numInGroup` entries of `blockLength` bytes run past the end of the frame.
    #[error("group of {count} entries runs past the end of the frame")]
    GroupOverrun { count: u32 },
    /// A template id that schema 1 does not define (the feed logs the id once).
    #[error("unknown template id {template_id}")]
    UnknownTemplate { template_id: u16 },
    /// A schema id other than [`SCHEMA_ID`].
    #[error("schema {schema_id}:{version}, expected schema id {SCHEMA_ID}")]
    SchemaMismatch { schema_id: u16, version: u16 },
    /// An exponent that is the SBE null value (-128).
    #[error("exponent {exponent} is not a value")]
    BadExponent { exponent: i8 },
    /// A price or quantity whose count of 1e-9 does not fit an `i64`.
    #[error("decimal beyond the i64 range of 1e-9 units")]
    DecimalOverflow,
    /// A negative time, or one whose nanoseconds overflow `u64`.
    #[error("timestamp out of range")]
    BadTimestamp,
    /// A negative update or trade id.
    #[error("negative id")]
    NegativeId,
    /// A `boolEnum` byte other than 0 or 1.
    #[error("boolean byte {value}")]
    BadBool { value: u8 },
}

impl SbeError {
    /// The kinds' names, in [`SbeError::kind`]'s order, for per-kind counters.
    pub const KINDS: [&'static str; 10] = [
        "truncated",
        "block_too_short",
        "group_overrun",
        "unknown_template",
        "schema_mismatch",
        "bad_exponent",
        "decimal_overflow",
        "bad_timestamp",
        "negative_id",
        "bad_bool",
    ];

    /// This error's index in [`SbeError::KINDS`].
    pub const fn kind(self) -> usize {
        match self {
            SbeError::Truncated { .. } => 0,
            SbeError::BlockTooShort { .. } => 1,
            SbeError::GroupOverrun { .. } => 2,
            SbeError::UnknownTemplate { .. } => 3,
            SbeError::SchemaMismatch { .. } => 4,
            SbeError::BadExponent { .. } => 5,
            SbeError::DecimalOverflow => 6,
            SbeError::BadTimestamp => 7,
            SbeError::NegativeId => 8,
            SbeError::BadBool { .. } => 9,
        }
    }
}

type Result<T> = std::result::Result<T, SbeError>;

/// The message header, as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub block_length: u16,
    pub template_id: u16,
    pub schema_id: u16,
    pub version: u16,
}

/// Reads the 8-byte message header (no check of its values).
pub fn decode_header(frame: &[u8]) -> Result<Header> {
    let bytes: &[u8; HEADER_LEN] = frame
        .first_chunk()
        .ok_or(SbeError::Truncated { offset: 0 })?;
    Ok(Header {
        block_length: u16::from_le_bytes(field(bytes, 0)),
        template_id: u16::from_le_bytes(field(bytes, 2)),
        schema_id: u16::from_le_bytes(field(bytes, 4)),
        version: u16::from_le_bytes(field(bytes, 6)),
    })
}

/// One decoded frame. Everything borrowed points into the frame given to [`decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `<symbol>@trade`: `TradesStreamEvent`, one or more trades.
    Trades(Trades<'a>),
    /// `<symbol>@bestBidAsk`: `BestBidAskStreamEvent`.
    BestBidAsk(BestBidAsk<'a>),
    /// `<symbol>@depth20`: `DepthSnapshotStreamEvent`, the top levels whole.
    DepthSnapshot(DepthSnapshot<'a>),
    /// `<symbol>@depth`: `DepthDiffStreamEvent`, levels changed between two update ids.
    DepthDiff(DepthDiff<'a>),
}

impl<'a> Message<'a> {
    /// The symbol, as Binance spells it (upper case).
    pub fn symbol(&self) -> &'a [u8] {
        match self {
            Message::Trades(m) => m.symbol,
            Message::BestBidAsk(m) => m.symbol,
            Message::DepthSnapshot(m) => m.symbol,
            Message::DepthDiff(m) => m.symbol,
        }
    }

    /// The schema version the frame's header gave (0 for `stream_1_0.xml`; more is a newer,
    /// compatible schema, see the module docs).
    pub fn schema_version(&self) -> u16 {
        match self {
            Message::Trades(m) => m.schema_version,
            Message::BestBidAsk(m) => m.schema_version,
            Message::DepthSnapshot(m) => m.schema_version,
            Message::DepthDiff(m) => m.schema_version,
        }
    }
}

/// `TradesStreamEvent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trades<'a> {
    pub symbol: &'a [u8],
    pub schema_version: u16,
    pub event_time_ns: u64,
    pub transact_time_ns: u64,
    pub trades: TradeList<'a>,
}

/// `BestBidAskStreamEvent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BestBidAsk<'a> {
    pub symbol: &'a [u8],
    pub schema_version: u16,
    pub event_time_ns: u64,
    pub book_update_id: u64,
    pub bid_px: Fixed,
    pub bid_qty: Fixed,
    pub ask_px: Fixed,
    pub ask_qty: Fixed,
}

/// `DepthSnapshotStreamEvent` (the partial book depth streams).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthSnapshot<'a> {
    pub symbol: &'a [u8],
    pub schema_version: u16,
    pub event_time_ns: u64,
    pub book_update_id: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// `DepthDiffStreamEvent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthDiff<'a> {
    pub symbol: &'a [u8],
    pub schema_version: u16,
    pub event_time_ns: u64,
    /// `firstBookUpdateId` (JSON `U`).
    pub first_update_id: u64,
    /// `lastBookUpdateId` (JSON `u`).
    pub final_update_id: u64,
    pub bids: Levels<'a>,
    pub asks: Levels<'a>,
}

/// A decimal exponent turned into how a mantissa becomes 1e-9 units: a multiplication by
/// `factor` for the exponents -9..=9 (every exponent Binance uses), the rounding or
/// overflowing cases out of line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scale {
    /// `10^(exponent + 9)` when that fits an `i64`; 0 when it does not (exponent above 9) or is
    /// below one (exponent below -9), both taken by [`convert_slow`].
    factor: i64,
    exponent: i8,
}

/// `10^n` for `n` in 0..=18, every power that fits an `i64`.
const POW10: [i64; 19] = {
    let mut table = [1i64; 19];
    let mut n = 1;
    while n < 19 {
        table[n] = table[n - 1] * 10;
        n += 1;
    }
    table
};

impl Scale {
    #[inline]
    fn new(exponent: i8) -> Result<Scale> {
        if exponent == i8::MIN {
            return Err(SbeError::BadExponent { exponent });
        }
        let factor = usize::try_from(i32::from(exponent) + 9)
            .ok()
            .and_then(|digits| POW10.get(digits).copied())
            .unwrap_or(0);
        Ok(Scale { factor, exponent })
    }

    #[inline(always)]
    fn apply(self, mantissa: i64) -> Result<Fixed> {
        if self.factor != 0 {
            mantissa
                .checked_mul(self.factor)
                .map(Fixed)
                .ok_or(SbeError::DecimalOverflow)
        } else {
            convert_slow(mantissa, self.exponent)
        }
    }

    /// [`Scale::apply`] of a mantissa already checked by [`Scale::check_range`] (through
    /// `min` and `max` of its group): it cannot overflow, so the fast path does not check.
    #[inline(always)]
    fn apply_checked(self, mantissa: i64) -> Fixed {
        if self.factor != 0 {
            Fixed(mantissa.wrapping_mul(self.factor))
        } else {
            convert_slow(mantissa, self.exponent).unwrap_or(Fixed::ZERO)
        }
    }

    /// Whether every mantissa from `min` to `max` converts: the conversion is monotonic (a
    /// multiplication by a positive power of ten, or a rounded division by one), so the two
    /// ends decide it.
    #[inline]
    fn check_range(self, min: i64, max: i64) -> Result<()> {
        self.apply(min)?;
        self.apply(max)?;
        Ok(())
    }
}

/// The exponents outside -9..=9: below, divide and round (never overflows); above, only a
/// zero mantissa fits.
#[cold]
#[inline(never)]
fn convert_slow(mantissa: i64, exponent: i8) -> Result<Fixed> {
    let shift = i32::from(exponent) + 9;
    if shift < 0 {
        Ok(Fixed(divide_round_half_even(
            mantissa,
            shift.unsigned_abs(),
        )))
    } else if mantissa == 0 {
        Ok(Fixed::ZERO)
    } else {
        Err(SbeError::DecimalOverflow)
    }
}

/// `mantissa / 10^digits` rounded to the nearest integer, ties to even. `digits` is at least 1,
/// so the result's magnitude is below the mantissa's and always fits.
fn divide_round_half_even(mantissa: i64, digits: u32) -> i64 {
    // |mantissa| < 9.3e18 < 10^19 / 2 * 2; from 10^20 on every quotient rounds to 0.
    if digits >= 20 {
        return 0;
    }
    let divisor = 10i128.pow(digits);
    let value = i128::from(mantissa);
    let quotient = value / divisor;
    let remainder = (value % divisor).abs() * 2;
    let away = remainder > divisor || (remainder == divisor && quotient % 2 != 0);
    let rounded = if away {
        quotient + value.signum()
    } else {
        quotient
    };
    // |rounded| <= |mantissa| / 10 + 1, inside i64.
    i64::try_from(rounded).unwrap_or(0)
}

/// Converts one SBE decimal (`mantissa * 10^exponent`) to [`Fixed`], as [`decode`] does: exact
/// for exponents of -9 and more, rounded to 1e-9 ties to even below, an error when it overflows.
pub fn decimal_to_fixed(mantissa: i64, exponent: i8) -> Result<Fixed> {
    Scale::new(exponent)?.apply(mantissa)
}

/// A group of `[price, qty]` levels, kept as its raw entries. [`decode`] has checked every
/// decimal, so iterating cannot fail and does not allocate.
#[derive(Clone, Copy)]
pub struct Levels<'a> {
    entries: &'a [u8],
    stride: usize,
    count: usize,
    price: Scale,
    qty: Scale,
}

impl<'a> Levels<'a> {
    fn new(
        entries: &'a [u8],
        stride: usize,
        count: usize,
        price: Scale,
        qty: Scale,
    ) -> Result<Self> {
        let levels = Levels {
            entries,
            stride,
            count,
            price,
            qty,
        };
        // One pass for the extremes of each column (no branch per level), then the two ends of
        // each checked: every level between them converts too. Version 0's 16-byte entries get
        // a loop whose stride is a constant.
        let extremes = |chunks: std::slice::ChunksExact<'a, u8>| {
            chunks.map(level).fold(
                (0i64, 0i64, 0i64, 0i64),
                |(price_min, price_max, qty_min, qty_max), (price, qty)| {
                    (
                        price_min.min(price),
                        price_max.max(price),
                        qty_min.min(qty),
                        qty_max.max(qty),
                    )
                },
            )
        };
        let (price_min, price_max, qty_min, qty_max) = if stride == LEVEL_ENTRY {
            extremes(entries.chunks_exact(LEVEL_ENTRY))
        } else {
            extremes(entries.chunks_exact(stride))
        };
        price.check_range(price_min, price_max)?;
        qty.check_range(qty_min, qty_max)?;
        Ok(levels)
    }

    /// The number of levels.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The levels' raw mantissas `(price, qty)`, in wire order.
    pub fn mantissas(&self) -> impl Iterator<Item = (i64, i64)> + 'a {
        self.entries.chunks_exact(self.stride).map(level)
    }

    /// The levels as `(price, qty)`, in wire order (best first, as Binance sends them).
    pub fn iter(&self) -> LevelIter<'a> {
        LevelIter {
            entries: self.entries.chunks_exact(self.stride),
            price: self.price,
            qty: self.qty,
        }
    }
}

impl PartialEq for Levels<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for Levels<'_> {}

impl std::fmt::Debug for Levels<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for Levels<'a> {
    type Item = (Fixed, Fixed);
    type IntoIter = LevelIter<'a>;

    fn into_iter(self) -> LevelIter<'a> {
        self.iter()
    }
}

/// Iterates a [`Levels`]: `(price, qty)` in wire order.
#[derive(Clone)]
pub struct LevelIter<'a> {
    entries: std::slice::ChunksExact<'a, u8>,
    price: Scale,
    qty: Scale,
}

impl Iterator for LevelIter<'_> {
    type Item = (Fixed, Fixed);

    #[inline]
    fn next(&mut self) -> Option<(Fixed, Fixed)> {
        let (price, qty) = level(self.entries.next()?);
        // Checked in `Levels::new`.
        Some((self.price.apply_checked(price), self.qty.apply_checked(qty)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for LevelIter<'_> {}

/// One trade of a [`TradeList`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TradeEntry {
    pub trade_id: u64,
    pub price: Fixed,
    pub qty: Fixed,
    /// `isBuyerMaker`: the buyer was the maker, so the aggressor sold.
    pub buyer_is_maker: bool,
}

/// The `trades` group, kept as its raw entries; every entry was checked by [`decode`].
#[derive(Clone, Copy)]
pub struct TradeList<'a> {
    entries: &'a [u8],
    stride: usize,
    count: usize,
    price: Scale,
    qty: Scale,
}

impl<'a> TradeList<'a> {
    fn new(
        entries: &'a [u8],
        stride: usize,
        count: usize,
        price: Scale,
        qty: Scale,
    ) -> Result<Self> {
        // As for levels: the extremes of each column, then their ends checked.
        let (mut price_min, mut price_max, mut qty_min, mut qty_max) = (0i64, 0i64, 0i64, 0i64);
        let (mut id_min, mut maker_max) = (0i64, 0u8);
        for entry in entries.chunks_exact(stride) {
            id_min = id_min.min(i64_at(entry, 0));
            price_min = price_min.min(i64_at(entry, 8));
            price_max = price_max.max(i64_at(entry, 8));
            qty_min = qty_min.min(i64_at(entry, 16));
            qty_max = qty_max.max(i64_at(entry, 16));
            maker_max = maker_max.max(entry.get(24).copied().unwrap_or(0));
        }
        if id_min < 0 {
            return Err(SbeError::NegativeId);
        }
        if maker_max > 1 {
            return Err(SbeError::BadBool { value: maker_max });
        }
        price.check_range(price_min, price_max)?;
        qty.check_range(qty_min, qty_max)?;
        Ok(TradeList {
            entries,
            stride,
            count,
            price,
            qty,
        })
    }

    /// The number of trades.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The trades, in wire order.
    pub fn iter(&self) -> impl Iterator<Item = TradeEntry> + 'a {
        let (price, qty) = (self.price, self.qty);
        // Checked in `TradeList::new`: the id's fallback is never taken.
        self.entries
            .chunks_exact(self.stride)
            .map(move |entry| TradeEntry {
                trade_id: u64::try_from(i64_at(entry, 0)).unwrap_or(0),
                price: price.apply_checked(i64_at(entry, 8)),
                qty: qty.apply_checked(i64_at(entry, 16)),
                buyer_is_maker: entry.get(24) == Some(&1),
            })
    }
}

impl PartialEq for TradeList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for TradeList<'_> {}

impl std::fmt::Debug for TradeList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Decodes one SBE binary frame (a whole WebSocket binary message).
///
/// Never panics and never reads outside `frame`, whatever it holds; see the module docs for
/// what is accepted.
#[inline]
pub fn decode(frame: &[u8]) -> Result<Message<'_>> {
    let header = decode_header(frame)?;
    if header.schema_id != SCHEMA_ID {
        return Err(SbeError::SchemaMismatch {
            schema_id: header.schema_id,
            version: header.version,
        });
    }
    let mut reader = Reader {
        frame,
        at: HEADER_LEN,
    };
    match header.template_id {
        BEST_BID_ASK_TEMPLATE_ID => best_bid_ask(header, &mut reader).map(Message::BestBidAsk),
        TRADES_TEMPLATE_ID => trades(header, &mut reader).map(Message::Trades),
        DEPTH_SNAPSHOT_TEMPLATE_ID => {
            depth_snapshot(header, &mut reader).map(Message::DepthSnapshot)
        }
        DEPTH_DIFF_TEMPLATE_ID => depth_diff(header, &mut reader).map(Message::DepthDiff),
        template_id => Err(SbeError::UnknownTemplate { template_id }),
    }
}

fn best_bid_ask<'a>(header: Header, reader: &mut Reader<'a>) -> Result<BestBidAsk<'a>> {
    let block: &[u8; BEST_BID_ASK_BLOCK] = reader.root_block(header.block_length)?;
    let price = Scale::new(i8::from_le_bytes(field(block, 16)))?;
    let qty = Scale::new(i8::from_le_bytes(field(block, 17)))?;
    let message = BestBidAsk {
        event_time_ns: micros_to_ns(i64::from_le_bytes(field(block, 0)))?,
        book_update_id: id(i64::from_le_bytes(field(block, 8)))?,
        bid_px: price.apply(i64::from_le_bytes(field(block, 18)))?,
        bid_qty: qty.apply(i64::from_le_bytes(field(block, 26)))?,
        ask_px: price.apply(i64::from_le_bytes(field(block, 34)))?,
        ask_qty: qty.apply(i64::from_le_bytes(field(block, 42)))?,
        symbol: &[],
        schema_version: header.version,
    };
    Ok(BestBidAsk {
        symbol: reader.var_string8()?,
        ..message
    })
}

fn trades<'a>(header: Header, reader: &mut Reader<'a>) -> Result<Trades<'a>> {
    let block: &[u8; TRADES_BLOCK] = reader.root_block(header.block_length)?;
    let event_time_ns = micros_to_ns(i64::from_le_bytes(field(block, 0)))?;
    let transact_time_ns = micros_to_ns(i64::from_le_bytes(field(block, 8)))?;
    let price = Scale::new(i8::from_le_bytes(field(block, 16)))?;
    let qty = Scale::new(i8::from_le_bytes(field(block, 17)))?;
    let (entries, stride, count) = reader.group(GroupDimension::U32Count, TRADE_ENTRY)?;
    let trades = TradeList::new(entries, stride, count, price, qty)?;
    Ok(Trades {
        symbol: reader.var_string8()?,
        schema_version: header.version,
        event_time_ns,
        transact_time_ns,
        trades,
    })
}

fn depth_snapshot<'a>(header: Header, reader: &mut Reader<'a>) -> Result<DepthSnapshot<'a>> {
    let block: &[u8; DEPTH_SNAPSHOT_BLOCK] = reader.root_block(header.block_length)?;
    let event_time_ns = micros_to_ns(i64::from_le_bytes(field(block, 0)))?;
    let book_update_id = id(i64::from_le_bytes(field(block, 8)))?;
    let price = Scale::new(i8::from_le_bytes(field(block, 16)))?;
    let qty = Scale::new(i8::from_le_bytes(field(block, 17)))?;
    let (bids, asks) = reader.bids_asks(price, qty)?;
    Ok(DepthSnapshot {
        symbol: reader.var_string8()?,
        schema_version: header.version,
        event_time_ns,
        book_update_id,
        bids,
        asks,
    })
}

fn depth_diff<'a>(header: Header, reader: &mut Reader<'a>) -> Result<DepthDiff<'a>> {
    let block: &[u8; DEPTH_DIFF_BLOCK] = reader.root_block(header.block_length)?;
    let event_time_ns = micros_to_ns(i64::from_le_bytes(field(block, 0)))?;
    let first_update_id = id(i64::from_le_bytes(field(block, 8)))?;
    let final_update_id = id(i64::from_le_bytes(field(block, 16)))?;
    let price = Scale::new(i8::from_le_bytes(field(block, 24)))?;
    let qty = Scale::new(i8::from_le_bytes(field(block, 25)))?;
    let (bids, asks) = reader.bids_asks(price, qty)?;
    Ok(DepthDiff {
        symbol: reader.var_string8()?,
        schema_version: header.version,
        event_time_ns,
        first_update_id,
        final_update_id,
        bids,
        asks,
    })
}

/// Which dimension composite a group uses.
#[derive(Clone, Copy)]
enum GroupDimension {
    /// `groupSizeEncoding`: blockLength u16, numInGroup u32 (6 bytes).
    U32Count,
    /// `groupSize16Encoding`: blockLength u16, numInGroup u16 (4 bytes).
    U16Count,
}

/// A position in a frame; every read checks it against the frame's end.
struct Reader<'a> {
    frame: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn truncated(&self) -> SbeError {
        SbeError::Truncated {
            offset: u32::try_from(self.at).unwrap_or(u32::MAX),
        }
    }

    /// The next `len` bytes.
    #[inline]
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let bytes = self
            .at
            .checked_add(len)
            .and_then(|end| self.frame.get(self.at..end))
            .ok_or_else(|| self.truncated())?;
        self.at += len;
        Ok(bytes)
    }

    /// The root block of `block_length` bytes, of which the first `N` are version 0's fields.
    #[inline]
    fn root_block<const N: usize>(&mut self, block_length: u16) -> Result<&'a [u8; N]> {
        if usize::from(block_length) < N {
            return Err(SbeError::BlockTooShort {
                block_length,
                needed: N as u16,
            });
        }
        let block = self.take(usize::from(block_length))?;
        block.first_chunk().ok_or_else(|| self.truncated())
    }

    /// A group's entries: its dimension, then `count` entries of `blockLength` bytes, of which
    /// the first `known` are version 0's fields. Returns the entries, the stride and the count.
    fn group(
        &mut self,
        dimension: GroupDimension,
        known: usize,
    ) -> Result<(&'a [u8], usize, usize)> {
        let (block_length, count) = match dimension {
            GroupDimension::U32Count => {
                let bytes: [u8; 6] = self.array()?;
                (
                    u16::from_le_bytes(field(&bytes, 0)),
                    u32::from_le_bytes(field(&bytes, 2)),
                )
            }
            GroupDimension::U16Count => {
                let bytes: [u8; 4] = self.array()?;
                (
                    u16::from_le_bytes(field(&bytes, 0)),
                    u32::from(u16::from_le_bytes(field(&bytes, 2))),
                )
            }
        };
        let stride = usize::from(block_length);
        // An empty group may carry any block length: nothing of it is read.
        if stride < known && count != 0 {
            return Err(SbeError::BlockTooShort {
                block_length,
                needed: known as u16,
            });
        }
        let count_usize = usize::try_from(count).map_err(|_| SbeError::GroupOverrun { count })?;
        let total = stride
            .checked_mul(count_usize)
            .filter(|&total| total <= self.frame.len().saturating_sub(self.at))
            .ok_or(SbeError::GroupOverrun { count })?;
        let entries = self.take(total)?;
        // `chunks_exact` needs a non-zero stride; with no entries any stride will do.
        Ok((entries, stride.max(1), count_usize))
    }

    fn bids_asks(&mut self, price: Scale, qty: Scale) -> Result<(Levels<'a>, Levels<'a>)> {
        let (entries, stride, count) = self.group(GroupDimension::U16Count, LEVEL_ENTRY)?;
        let bids = Levels::new(entries, stride, count, price, qty)?;
        let (entries, stride, count) = self.group(GroupDimension::U16Count, LEVEL_ENTRY)?;
        let asks = Levels::new(entries, stride, count, price, qty)?;
        Ok((bids, asks))
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N)?;
        bytes.first_chunk().copied().ok_or_else(|| self.truncated())
    }

    /// `varString8`: a u8 length, then the bytes.
    #[inline]
    fn var_string8(&mut self) -> Result<&'a [u8]> {
        let [len] = self.array::<1>()?;
        self.take(usize::from(len))
    }
}

/// `N` bytes at `at` of a block whose length is known at compile time. Every caller's range is
/// inside the block, so the optimiser removes the fallback.
#[inline(always)]
fn field<const N: usize, const B: usize>(block: &[u8; B], at: usize) -> [u8; N] {
    block
        .get(at..)
        .and_then(|rest| rest.first_chunk::<N>())
        .copied()
        .unwrap_or([0; N])
}

/// A level entry's `(price, qty)` mantissas: its first 16 bytes (the group's block length is at
/// least that), read with one length check.
#[inline(always)]
fn level(entry: &[u8]) -> (i64, i64) {
    match entry.first_chunk::<LEVEL_ENTRY>() {
        Some(bytes) => (
            i64::from_le_bytes(field(bytes, 0)),
            i64::from_le_bytes(field(bytes, 8)),
        ),
        None => (0, 0),
    }
}

/// An `i64` at `at` of a group entry at least `at + 8` bytes long (checked by the group's block
/// length).
#[inline(always)]
fn i64_at(entry: &[u8], at: usize) -> i64 {
    entry
        .get(at..)
        .and_then(|rest| rest.first_chunk::<8>())
        .map_or(0, |bytes| i64::from_le_bytes(*bytes))
}

#[inline]
fn micros_to_ns(micros: i64) -> Result<u64> {
    u64::try_from(micros)
        .ok()
        .and_then(|micros| micros.checked_mul(1_000))
        .ok_or(SbeError::BadTimestamp)
}

#[inline]
fn id(raw: i64) -> Result<u64> {
    u64::try_from(raw).map_err(|_| SbeError::NegativeId)
}

/// Where the events of one message go: the instrument the feed routed its symbol to, and when
/// the frame was received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTarget {
    pub venue_id: VenueId,
    pub instrument_id: InstrumentId,
    pub recv_ts_ns: u64,
}

/// The normalized events of one decoded message, handed to `out` in order, the last flagged
/// [`flags::LAST`] (through [`Emitter`]), as the USD-M JSON feed writes them:
///
/// - `BestBidAsk`: one `Quote`, `venue_seq` = `bookUpdateId`.
/// - `Trades`: one `Trade` per trade, `venue_seq` = trade id, `trade_id` = trade id, aggressor
///   `Ask` when the buyer was the maker; exchange time `transactTime`.
/// - `DepthDiff`: its levels as `BookLevel`s (bids then asks), `venue_seq` = `u`
///   (`lastBookUpdateId`). The event has no room for `U`; a feed keeping a book passes
///   [`DepthDiff::first_update_id`] to its book sync and does not call this for diffs.
/// - `DepthSnapshot`: its levels as `BookLevel`s, `venue_seq` = `bookUpdateId`, as the USD-M feed
///   writes partial depth.
///
/// Exchange times are the message's `eventTime` unless said otherwise; a time of 0 sets
/// [`flags::NO_EXCHANGE_TS`].
pub fn events(message: &Message<'_>, target: EventTarget, out: &mut impl FnMut(Event)) {
    let mut emitter = Emitter::new(out);
    match message {
        Message::BestBidAsk(ticker) => {
            let header = event_header(
                target,
                EventKind::Quote,
                ticker.event_time_ns,
                ticker.book_update_id,
            );
            emitter.push(Event::new(
                header,
                Body::Quote(Quote {
                    bid_px: ticker.bid_px,
                    bid_sz: ticker.bid_qty,
                    ask_px: ticker.ask_px,
                    ask_sz: ticker.ask_qty,
                }),
            ));
        }
        Message::Trades(trades) => {
            for trade in trades.trades.iter() {
                let header = event_header(
                    target,
                    EventKind::Trade,
                    trades.transact_time_ns,
                    trade.trade_id,
                );
                let aggressor = if trade.buyer_is_maker {
                    Side::Ask
                } else {
                    Side::Bid
                };
                emitter.push(Event::new(
                    header,
                    Body::Trade(Trade::new(
                        trade.price,
                        trade.qty,
                        trade.trade_id,
                        aggressor,
                    )),
                ));
            }
        }
        Message::DepthDiff(diff) => {
            levels(
                &mut emitter,
                target,
                diff.event_time_ns,
                diff.final_update_id,
                diff.bids,
                diff.asks,
            );
        }
        Message::DepthSnapshot(snapshot) => {
            levels(
                &mut emitter,
                target,
                snapshot.event_time_ns,
                snapshot.book_update_id,
                snapshot.bids,
                snapshot.asks,
            );
        }
    }
    emitter.finish(true);
}

fn levels<F: FnMut(Event)>(
    emitter: &mut Emitter<'_, F>,
    target: EventTarget,
    exchange_ts_ns: u64,
    seq: u64,
    bids: Levels<'_>,
    asks: Levels<'_>,
) {
    let header = event_header(target, EventKind::BookLevel, exchange_ts_ns, seq);
    for (side, levels) in [(Side::Bid, bids), (Side::Ask, asks)] {
        for (price, qty) in levels.iter() {
            emitter.push(Event::new(
                header,
                Body::BookLevel(BookLevel::new(side, price, qty)),
            ));
        }
    }
}

fn event_header(
    target: EventTarget,
    kind: EventKind,
    exchange_ts_ns: u64,
    seq: u64,
) -> EventHeader {
    EventHeader {
        exchange_ts_ns,
        recv_ts_ns: target.recv_ts_ns,
        venue_seq: seq,
        instrument_id: target.instrument_id,
        venue_id: target.venue_id,
        kind,
        flags: if exchange_ts_ns == 0 {
            flags::NO_EXCHANGE_TS
        } else {
            0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame laid out by hand from the schema (the official encoder's frames are in
    /// tests/binance_spot_sbe.rs).
    fn header(block_length: u16, template_id: u16, schema_id: u16, version: u16) -> Vec<u8> {
        [block_length, template_id, schema_id, version]
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .collect()
    }

    fn best_bid_ask_frame(block_extra: usize) -> Vec<u8> {
        let mut frame = header(
            (BEST_BID_ASK_BLOCK + block_extra) as u16,
            BEST_BID_ASK_TEMPLATE_ID,
            1,
            0,
        );
        frame.extend(1_700_000_000_123_456i64.to_le_bytes());
        frame.extend(42i64.to_le_bytes());
        frame.extend([(-2i8) as u8, (-8i8) as u8]);
        for mantissa in [6_123_450i64, 150_000_000, 6_123_460, 1] {
            frame.extend(mantissa.to_le_bytes());
        }
        frame.extend(std::iter::repeat_n(0xEE, block_extra));
        frame.push(7);
        frame.extend(b"BTCUSDT");
        frame
    }

    fn depth_diff_frame() -> Vec<u8> {
        let mut frame = header(DEPTH_DIFF_BLOCK as u16, DEPTH_DIFF_TEMPLATE_ID, 1, 0);
        frame.extend(5i64.to_le_bytes());
        frame.extend(100i64.to_le_bytes());
        frame.extend(103i64.to_le_bytes());
        frame.extend([0u8, 0]);
        // bids: two levels; asks: none.
        frame.extend(16u16.to_le_bytes());
        frame.extend(2u16.to_le_bytes());
        for value in [10i64, 1, 9, 0] {
            frame.extend(value.to_le_bytes());
        }
        frame.extend(16u16.to_le_bytes());
        frame.extend(0u16.to_le_bytes());
        frame.push(3);
        frame.extend(b"ETH");
        frame
    }

    #[test]
    fn a_best_bid_ask_decodes_field_by_field() {
        let frame = best_bid_ask_frame(0);
        let Ok(Message::BestBidAsk(ticker)) = decode(&frame) else {
            panic!("{:?}", decode(&frame));
        };
        assert_eq!(ticker.symbol, b"BTCUSDT");
        assert_eq!(ticker.event_time_ns, 1_700_000_000_123_456_000);
        assert_eq!(ticker.book_update_id, 42);
        assert_eq!(ticker.bid_px, Fixed::parse_str("61234.50").unwrap());
        assert_eq!(ticker.bid_qty, Fixed::parse_str("1.5").unwrap());
        assert_eq!(ticker.ask_px, Fixed::parse_str("61234.60").unwrap());
        assert_eq!(ticker.ask_qty, Fixed::parse_str("0.00000001").unwrap());
        assert_eq!(ticker.schema_version, 0);
    }

    #[test]
    fn a_longer_root_block_is_skipped_and_a_shorter_one_refused() {
        let longer = best_bid_ask_frame(13);
        let Ok(Message::BestBidAsk(ticker)) = decode(&longer) else {
            panic!("{:?}", decode(&longer));
        };
        assert_eq!(ticker.symbol, b"BTCUSDT");
        assert_eq!(ticker.ask_qty, Fixed(10));
        let mut shorter = best_bid_ask_frame(0);
        shorter[0..2].copy_from_slice(&49u16.to_le_bytes());
        assert_eq!(
            decode(&shorter),
            Err(SbeError::BlockTooShort {
                block_length: 49,
                needed: 50
            })
        );
    }

    #[test]
    fn a_depth_diff_with_an_empty_group_decodes() {
        let frame = depth_diff_frame();
        let Ok(Message::DepthDiff(diff)) = decode(&frame) else {
            panic!("{:?}", decode(&frame));
        };
        assert_eq!((diff.first_update_id, diff.final_update_id), (100, 103));
        assert_eq!(diff.event_time_ns, 5_000);
        let bids: Vec<_> = diff.bids.iter().collect();
        assert_eq!(
            bids,
            [
                (
                    Fixed::from_units(10).unwrap(),
                    Fixed::from_units(1).unwrap()
                ),
                (Fixed::from_units(9).unwrap(), Fixed::ZERO)
            ]
        );
        assert!(diff.asks.is_empty());
        assert_eq!(diff.symbol, b"ETH");
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        for frame in [
            best_bid_ask_frame(0),
            best_bid_ask_frame(3),
            depth_diff_frame(),
        ] {
            assert!(decode(&frame).is_ok());
            for len in 0..frame.len() {
                match decode(&frame[..len]) {
                    Err(SbeError::Truncated { offset }) => assert!(offset as usize <= len),
                    Err(SbeError::GroupOverrun { .. }) => {}
                    other => panic!("cut at {len}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn schema_and_template_are_checked() {
        let mut frame = best_bid_ask_frame(0);
        frame[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(
            decode(&frame),
            Err(SbeError::SchemaMismatch {
                schema_id: 2,
                version: 0
            })
        );
        let mut frame = best_bid_ask_frame(0);
        frame[2..4].copy_from_slice(&10_004u16.to_le_bytes());
        assert_eq!(
            decode(&frame),
            Err(SbeError::UnknownTemplate {
                template_id: 10_004
            })
        );
        // A newer version of schema 1 is read, and says so.
        let mut frame = best_bid_ask_frame(0);
        frame[6..8].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(decode(&frame).map(|m| m.schema_version()), Ok(1));
    }

    #[test]
    fn decimals_convert_exactly_down_to_nine_decimals() {
        for exponent in -9i8..=9 {
            let expected = 7i64 * 10i64.pow((exponent + 9) as u32);
            assert_eq!(
                decimal_to_fixed(7, exponent),
                Ok(Fixed(expected)),
                "{exponent}"
            );
        }
        assert_eq!(decimal_to_fixed(i64::MAX, -9), Ok(Fixed::MAX));
        assert_eq!(decimal_to_fixed(i64::MIN, -9), Ok(Fixed::MIN));
        assert_eq!(
            decimal_to_fixed(i64::MAX, -8),
            Err(SbeError::DecimalOverflow)
        );
        assert_eq!(
            decimal_to_fixed(i64::MIN, -8),
            Err(SbeError::DecimalOverflow)
        );
        assert_eq!(decimal_to_fixed(9, 9), Ok(Fixed(9 * 10i64.pow(18))));
        assert_eq!(decimal_to_fixed(10, 9), Err(SbeError::DecimalOverflow));
        assert_eq!(decimal_to_fixed(1, 10), Err(SbeError::DecimalOverflow));
        assert_eq!(decimal_to_fixed(0, 127), Ok(Fixed::ZERO));
        assert_eq!(decimal_to_fixed(-1, 127), Err(SbeError::DecimalOverflow));
        assert_eq!(
            decimal_to_fixed(1, i8::MIN),
            Err(SbeError::BadExponent { exponent: i8::MIN })
        );
    }

    #[test]
    fn more_than_nine_decimals_round_half_to_even() {
        // 1e-10 units: 15 -> 1.5 -> 2, 25 -> 2.5 -> 2, 35 -> 4, 26 -> 3, 24 -> 2.
        for (mantissa, expected) in [(15, 2), (25, 2), (35, 4), (26, 3), (24, 2), (5, 0), (6, 1)] {
            assert_eq!(
                decimal_to_fixed(mantissa, -10),
                Ok(Fixed(expected)),
                "{mantissa}"
            );
            assert_eq!(
                decimal_to_fixed(-mantissa, -10),
                Ok(Fixed(-expected)),
                "-{mantissa}"
            );
        }
        assert_eq!(
            decimal_to_fixed(i64::MAX, -10),
            Ok(Fixed(922_337_203_685_477_581))
        );
        assert_eq!(
            decimal_to_fixed(i64::MIN, -10),
            Ok(Fixed(-922_337_203_685_477_581))
        );
        // 10^19: 9.22e18 / 1e19 rounds to 1; 10^20 and beyond: to 0.
        assert_eq!(decimal_to_fixed(i64::MAX, -28), Ok(Fixed(1)));
        assert_eq!(decimal_to_fixed(i64::MIN, -28), Ok(Fixed(-1)));
        assert_eq!(
            decimal_to_fixed(5_000_000_000_000_000_000, -28),
            Ok(Fixed(0))
        );
        assert_eq!(decimal_to_fixed(i64::MAX, -29), Ok(Fixed(0)));
        assert_eq!(decimal_to_fixed(i64::MIN, -127), Ok(Fixed(0)));
    }

    #[test]
    fn times_and_ids_are_checked() {
        let mut frame = best_bid_ask_frame(0);
        frame[8..16].copy_from_slice(&(-1i64).to_le_bytes());
        assert_eq!(decode(&frame), Err(SbeError::BadTimestamp));
        frame[8..16].copy_from_slice(&(u64::MAX / 1000 + 1).min(i64::MAX as u64).to_le_bytes());
        assert_eq!(decode(&frame), Err(SbeError::BadTimestamp));
        let mut frame = best_bid_ask_frame(0);
        frame[16..24].copy_from_slice(&(-5i64).to_le_bytes());
        assert_eq!(decode(&frame), Err(SbeError::NegativeId));
    }

    #[test]
    fn group_counts_past_the_frame_are_refused() {
        let mut frame = depth_diff_frame();
        // The bids' count (at 8 + 26 + 2) claims 3 levels, 2 are there and then 4 + 4 bytes.
        frame[36..38].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(decode(&frame), Err(SbeError::GroupOverrun { count: 3 }));
        frame[36..38].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            decode(&frame),
            Err(SbeError::GroupOverrun { count: 65_535 })
        );
        let mut frame = depth_diff_frame();
        frame[34..36].copy_from_slice(&15u16.to_le_bytes());
        assert_eq!(
            decode(&frame),
            Err(SbeError::BlockTooShort {
                block_length: 15,
                needed: 16
            })
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        // xorshift: a deterministic stream of frames, half of them with a valid header.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut decoded = 0;
        for round in 0..200_000 {
            let len = (next() % 96) as usize;
            // Mostly zeros, so that times, ids, counts and decimals are often valid and the
            // loop reaches past the first check.
            let mut frame: Vec<u8> = (0..len)
                .map(|_| if next() % 4 == 0 { next() as u8 } else { 0 })
                .collect();
            if round % 2 == 0 && len >= HEADER_LEN {
                let template = 10_000 + (next() % 4) as u16;
                let block = [18u16, 50, 18, 26][usize::from(template - 10_000)];
                frame[..HEADER_LEN].copy_from_slice(&header(block, template, 1, 0));
            }
            if let Ok(message) = decode(&frame) {
                decoded += 1;
                let mut count = 0;
                events(
                    &message,
                    EventTarget {
                        venue_id: 1,
                        instrument_id: 2,
                        recv_ts_ns: 3,
                    },
                    &mut |_| count += 1,
                );
                assert!(count <= frame.len() / 16 + 1);
            }
        }
        assert!(decoded > 0, "the loop must reach the decoded path too");
    }

    #[test]
    fn events_follow_the_usdm_conventions() {
        let frame = best_bid_ask_frame(0);
        let message = decode(&frame).unwrap();
        let target = EventTarget {
            venue_id: 4,
            instrument_id: 9,
            recv_ts_ns: 77,
        };
        let mut seen = Vec::new();
        events(&message, target, &mut |event| seen.push(event));
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].header.venue_seq, 42);
        assert_eq!(seen[0].header.exchange_ts_ns, 1_700_000_000_123_456_000);
        assert_eq!(seen[0].header.flags, flags::LAST);
        assert_eq!(seen[0].header.instrument_id, 9);
        let Body::Quote(quote) = seen[0].body() else {
            panic!("{:?}", seen[0]);
        };
        assert_eq!(quote.ask_sz, Fixed(10));

        let frame = depth_diff_frame();
        let message = decode(&frame).unwrap();
        let mut seen = Vec::new();
        events(&message, target, &mut |event| seen.push(event));
        assert_eq!(seen.len(), 2);
        assert!(seen.iter().all(|event| event.header.venue_seq == 103));
        assert_eq!(seen[0].header.flags, 0);
        assert_eq!(seen[1].header.flags, flags::LAST);
        let Body::BookLevel(level) = seen[1].body() else {
            panic!("{:?}", seen[1]);
        };
        assert_eq!((level.side(), level.size), (Side::Bid, Fixed::ZERO));
    }
}
