//! Nasdaq TotalView-ITCH 5.0 messages, read in place from their big-endian bytes.
//!
//! Followed: "Nasdaq TotalView-ITCH 5.0", the specification dated 03/06/2015 (section 4, Message
//! Formats). Every message type of that edition is here, each with its fixed length (the type
//! byte included) checked before a field is read: [`parse`] refuses a length that disagrees with
//! the type ([`ItchError::Length`] names both), an empty message and a type byte the
//! specification does not define ([`ItchError::UnknownType`], which a caller counts and skips).
//! The LULD Auction Collar message (`J`) is not in the 2015 edition; Nasdaq added it later and
//! the captures in `../shared/data/itch` carry it, so it is read too, with the layout those
//! captures show (4 prices of 4 decimals and a 4-byte extension count after the stock).
//!
//! Data types (specification section 3): integers are unsigned big-endian; alpha fields are ASCII,
//! left-justified and space-padded ([`Symbol`]); `Price (4)` has 4 implied decimals and
//! `Price (8)` (the MWCB decline levels) 8, both made into [`Fixed`] (1e-9 units) exactly;
//! the timestamp is 6 bytes of nanoseconds since midnight, made into epoch ns with the session's
//! date by [`epoch_ns`] (New York time).
//!
//! Nothing here allocates, and no input panics: every field offset lies inside the length
//! checked first.

use crate::fixed::Fixed;
use std::fmt;

/// The fields every message starts with (offsets 1 to 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The stock locate code (0 for the messages about no stock).
    pub locate: u16,
    /// Nasdaq's internal tracking number.
    pub tracking: u16,
    /// Nanoseconds since midnight, New York time.
    pub timestamp_ns: u64,
}

/// An 8-byte (or 4-byte MPID) alpha field, space-padded on the right, as sent.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol(pub [u8; 8]);

impl Symbol {
    /// The symbol without its padding (the bytes as sent; ASCII by the specification).
    pub fn trimmed(&self) -> &[u8] {
        let end = self.0.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
        &self.0[..end]
    }

    /// The trimmed symbol as text, `None` when it is not UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(self.trimmed()).ok()
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.trimmed()))
    }
}

/// A 4-byte market participant identifier (MPID), space-padded.
pub type Mpid = [u8; 4];

/// One ITCH message, its fields read out of the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// `S` (4.1), 12 bytes.
    SystemEvent { header: Header, event_code: u8 },
    /// `R` (4.2.1), 39 bytes.
    StockDirectory {
        header: Header,
        stock: Symbol,
        market_category: u8,
        financial_status: u8,
        round_lot_size: u32,
        round_lots_only: u8,
        issue_classification: u8,
        issue_sub_type: [u8; 2],
        authenticity: u8,
        short_sale_threshold: u8,
        ipo_flag: u8,
        luld_reference_price_tier: u8,
        etp_flag: u8,
        etp_leverage_factor: u32,
        inverse_indicator: u8,
    },
    /// `H` (4.2.2), 25 bytes.
    StockTradingAction {
        header: Header,
        stock: Symbol,
        trading_state: u8,
        reserved: u8,
        reason: [u8; 4],
    },
    /// `Y` (4.2.3), 20 bytes.
    RegShoRestriction {
        header: Header,
        stock: Symbol,
        action: u8,
    },
    /// `L` (4.2.4), 26 bytes.
    MarketParticipantPosition {
        header: Header,
        mpid: Mpid,
        stock: Symbol,
        primary_market_maker: u8,
        market_maker_mode: u8,
        participant_state: u8,
    },
    /// `V` (4.2.5.1), 35 bytes; the levels are `Price (8)`.
    MwcbDeclineLevel {
        header: Header,
        level1: Fixed,
        level2: Fixed,
        level3: Fixed,
    },
    /// `W` (4.2.5.2), 12 bytes.
    MwcbStatus { header: Header, breached_level: u8 },
    /// `K` (4.2.6), 28 bytes.
    IpoQuotingPeriodUpdate {
        header: Header,
        stock: Symbol,
        release_time_s: u32,
        release_qualifier: u8,
        ipo_price: Fixed,
    },
    /// `J`, 35 bytes: not in the 2015 edition (see the module docs).
    LuldAuctionCollar {
        header: Header,
        stock: Symbol,
        reference_price: Fixed,
        upper_price: Fixed,
        lower_price: Fixed,
        extension: u32,
    },
    /// `A` (4.3.1), 36 bytes.
    AddOrder {
        header: Header,
        order_ref: u64,
        side: u8,
        shares: u32,
        stock: Symbol,
        price: u32,
    },
    /// `F` (4.3.2), 40 bytes.
    AddOrderMpid {
        header: Header,
        order_ref: u64,
        side: u8,
        shares: u32,
        stock: Symbol,
        price: u32,
        attribution: Mpid,
    },
    /// `E` (4.4.1), 31 bytes.
    OrderExecuted {
        header: Header,
        order_ref: u64,
        executed_shares: u32,
        match_number: u64,
    },
    /// `C` (4.4.2), 36 bytes.
    OrderExecutedWithPrice {
        header: Header,
        order_ref: u64,
        executed_shares: u32,
        match_number: u64,
        printable: u8,
        execution_price: u32,
    },
    /// `X` (4.4.3), 23 bytes.
    OrderCancel {
        header: Header,
        order_ref: u64,
        canceled_shares: u32,
    },
    /// `D` (4.4.4), 19 bytes.
    OrderDelete { header: Header, order_ref: u64 },
    /// `U` (4.4.5), 35 bytes.
    OrderReplace {
        header: Header,
        original_ref: u64,
        new_ref: u64,
        shares: u32,
        price: u32,
    },
    /// `P` (4.5.1), 44 bytes.
    Trade {
        header: Header,
        order_ref: u64,
        side: u8,
        shares: u32,
        stock: Symbol,
        price: u32,
        match_number: u64,
    },
    /// `Q` (4.5.2), 40 bytes.
    CrossTrade {
        header: Header,
        shares: u64,
        stock: Symbol,
        cross_price: u32,
        match_number: u64,
        cross_type: u8,
    },
    /// `B` (4.5.3), 19 bytes.
    BrokenTrade { header: Header, match_number: u64 },
    /// `I` (4.6), 50 bytes.
    Noii {
        header: Header,
        paired_shares: u64,
        imbalance_shares: u64,
        imbalance_direction: u8,
        stock: Symbol,
        far_price: u32,
        near_price: u32,
        current_reference_price: u32,
        cross_type: u8,
        price_variation_indicator: u8,
    },
    /// `N` (4.7), 20 bytes.
    RetailInterest {
        header: Header,
        stock: Symbol,
        interest_flag: u8,
    },
}

/// Why a message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ItchError {
    #[error("ITCH message is empty")]
    Empty,
    #[error("ITCH message type {:?} (0x{:02x}) is not in the specification", *.0 as char, .0)]
    UnknownType(u8),
    #[error("ITCH message type {:?} is {expected} bytes long, this one {got}", *kind as char)]
    Length {
        kind: u8,
        expected: usize,
        got: usize,
    },
    #[error("ITCH message type {:?}: a Price (8) of {raw} does not fit a Fixed", *kind as char)]
    PriceRange { kind: u8, raw: u64 },
}

/// The fixed length (type byte included) of each message type, `None` for a type the
/// specification does not define.
pub const fn message_length(kind: u8) -> Option<usize> {
    Some(match kind {
        b'S' => 12,
        b'R' => 39,
        b'H' => 25,
        b'Y' => 20,
        b'L' => 26,
        b'V' => 35,
        b'W' => 12,
        b'K' => 28,
        b'J' => 35,
        b'A' => 36,
        b'F' => 40,
        b'E' => 31,
        b'C' => 36,
        b'X' => 23,
        b'D' => 19,
        b'U' => 35,
        b'P' => 44,
        b'Q' => 40,
        b'B' => 19,
        b'I' => 50,
        b'N' => 20,
        _ => return None,
    })
}

/// Every message type byte [`parse`] reads.
pub const MESSAGE_TYPES: [u8; 21] = *b"SRHYLVWKJAFECXDUPQBIN";

/// Each type byte's place in [`MESSAGE_TYPES`], `u8::MAX` for a byte that is no type: one load
/// per message where a search would compare up to 21 bytes.
const TYPE_PLACES: [u8; 256] = {
    let mut places = [u8::MAX; 256];
    let mut at = 0;
    while at < MESSAGE_TYPES.len() {
        places[MESSAGE_TYPES[at] as usize] = at as u8;
        at += 1;
    }
    places
};

/// `kind`'s place in [`MESSAGE_TYPES`], if it is a type [`parse`] reads.
#[inline]
pub fn type_place(kind: u8) -> Option<usize> {
    match TYPE_PLACES[usize::from(kind)] {
        u8::MAX => None,
        place => Some(usize::from(place)),
    }
}

/// A `Price (4)` as [`Fixed`]: exact, as 4 decimals are 100,000 units of 1e-9.
#[inline]
pub const fn price4(raw: u32) -> Fixed {
    Fixed(raw as i64 * 100_000)
}

/// A `Price (8)` as [`Fixed`] (10 units of 1e-9 per count), `None` past `Fixed`'s range.
#[inline]
pub const fn price8(raw: u64) -> Option<Fixed> {
    if raw > (i64::MAX / 10) as u64 {
        None
    } else {
        Some(Fixed(raw as i64 * 10))
    }
}

#[inline(always)]
fn u16_at<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn u32_at<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn u48_at<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    u64::from_be_bytes([
        0,
        0,
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
    ])
}

#[inline(always)]
fn u64_at<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    u64::from_be_bytes([
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
        b[at + 6],
        b[at + 7],
    ])
}

#[inline(always)]
fn symbol_at<const N: usize>(b: &[u8; N], at: usize) -> Symbol {
    Symbol([
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
        b[at + 6],
        b[at + 7],
    ])
}

#[inline(always)]
fn four_at<const N: usize>(b: &[u8; N], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

/// Reads one message (its bytes without the MoldUDP64 length prefix).
#[inline]
pub fn parse(b: &[u8]) -> Result<Message, ItchError> {
    let mut message = Message::SystemEvent {
        header: Header {
            locate: 0,
            tracking: 0,
            timestamp_ns: 0,
        },
        event_code: 0,
    };
    parse_into(b, &mut message)?;
    Ok(message)
}

/// [`parse`] into `out`, which is left as it was on an error. Each type writes its fields
/// straight into `out`: a returned `Message` is assembled from its variants' bytes where they
/// meet, which cost the book's path more than the reading itself.
#[inline]
pub fn parse_into(b: &[u8], out: &mut Message) -> Result<(), ItchError> {
    let Some(&kind) = b.first() else {
        return Err(ItchError::Empty);
    };
    let expected = message_length(kind).ok_or(ItchError::UnknownType(kind))?;
    if b.len() != expected {
        return Err(ItchError::Length {
            kind,
            expected,
            got: b.len(),
        });
    }
    // Every offset below is inside `expected` bytes, the specification's layout of `kind`.
    // Each type's fields are read from an array of its length (`fixed!`), so that the reads
    // need no bounds checks and neighbouring bytes load together; every message is at least 12
    // bytes long (`message_length`).
    let too_short = ItchError::Length {
        kind,
        expected,
        got: b.len(),
    };
    macro_rules! fixed {
        ($len:literal) => {
            b.first_chunk::<$len>().ok_or(too_short)?
        };
    }
    let head = fixed!(12);
    let header = Header {
        locate: u16_at(head, 1),
        tracking: u16_at(head, 3),
        timestamp_ns: u48_at(head, 5),
    };
    let price8_of = |raw: u64| price8(raw).ok_or(ItchError::PriceRange { kind, raw });
    match kind {
        b'S' => {
            let b = fixed!(12);
            *out = Message::SystemEvent {
                header,
                event_code: b[11],
            };
        }
        b'R' => {
            let b = fixed!(39);
            *out = Message::StockDirectory {
                header,
                stock: symbol_at(b, 11),
                market_category: b[19],
                financial_status: b[20],
                round_lot_size: u32_at(b, 21),
                round_lots_only: b[25],
                issue_classification: b[26],
                issue_sub_type: [b[27], b[28]],
                authenticity: b[29],
                short_sale_threshold: b[30],
                ipo_flag: b[31],
                luld_reference_price_tier: b[32],
                etp_flag: b[33],
                etp_leverage_factor: u32_at(b, 34),
                inverse_indicator: b[38],
            };
        }
        b'H' => {
            let b = fixed!(25);
            *out = Message::StockTradingAction {
                header,
                stock: symbol_at(b, 11),
                trading_state: b[19],
                reserved: b[20],
                reason: four_at(b, 21),
            };
        }
        b'Y' => {
            let b = fixed!(20);
            *out = Message::RegShoRestriction {
                header,
                stock: symbol_at(b, 11),
                action: b[19],
            };
        }
        b'L' => {
            let b = fixed!(26);
            *out = Message::MarketParticipantPosition {
                header,
                mpid: four_at(b, 11),
                stock: symbol_at(b, 15),
                primary_market_maker: b[23],
                market_maker_mode: b[24],
                participant_state: b[25],
            };
        }
        b'V' => {
            let b = fixed!(35);
            *out = Message::MwcbDeclineLevel {
                header,
                level1: price8_of(u64_at(b, 11))?,
                level2: price8_of(u64_at(b, 19))?,
                level3: price8_of(u64_at(b, 27))?,
            };
        }
        b'W' => {
            let b = fixed!(12);
            *out = Message::MwcbStatus {
                header,
                breached_level: b[11],
            };
        }
        b'K' => {
            let b = fixed!(28);
            *out = Message::IpoQuotingPeriodUpdate {
                header,
                stock: symbol_at(b, 11),
                release_time_s: u32_at(b, 19),
                release_qualifier: b[23],
                ipo_price: price4(u32_at(b, 24)),
            };
        }
        b'J' => {
            let b = fixed!(35);
            *out = Message::LuldAuctionCollar {
                header,
                stock: symbol_at(b, 11),
                reference_price: price4(u32_at(b, 19)),
                upper_price: price4(u32_at(b, 23)),
                lower_price: price4(u32_at(b, 27)),
                extension: u32_at(b, 31),
            };
        }
        b'A' => {
            let b = fixed!(36);
            *out = Message::AddOrder {
                header,
                order_ref: u64_at(b, 11),
                side: b[19],
                shares: u32_at(b, 20),
                stock: symbol_at(b, 24),
                price: u32_at(b, 32),
            };
        }
        b'F' => {
            let b = fixed!(40);
            *out = Message::AddOrderMpid {
                header,
                order_ref: u64_at(b, 11),
                side: b[19],
                shares: u32_at(b, 20),
                stock: symbol_at(b, 24),
                price: u32_at(b, 32),
                attribution: four_at(b, 36),
            };
        }
        b'E' => {
            let b = fixed!(31);
            *out = Message::OrderExecuted {
                header,
                order_ref: u64_at(b, 11),
                executed_shares: u32_at(b, 19),
                match_number: u64_at(b, 23),
            };
        }
        b'C' => {
            let b = fixed!(36);
            *out = Message::OrderExecutedWithPrice {
                header,
                order_ref: u64_at(b, 11),
                executed_shares: u32_at(b, 19),
                match_number: u64_at(b, 23),
                printable: b[31],
                execution_price: u32_at(b, 32),
            };
        }
        b'X' => {
            let b = fixed!(23);
            *out = Message::OrderCancel {
                header,
                order_ref: u64_at(b, 11),
                canceled_shares: u32_at(b, 19),
            };
        }
        b'D' => {
            let b = fixed!(19);
            *out = Message::OrderDelete {
                header,
                order_ref: u64_at(b, 11),
            };
        }
        b'U' => {
            let b = fixed!(35);
            *out = Message::OrderReplace {
                header,
                original_ref: u64_at(b, 11),
                new_ref: u64_at(b, 19),
                shares: u32_at(b, 27),
                price: u32_at(b, 31),
            };
        }
        b'P' => {
            let b = fixed!(44);
            *out = Message::Trade {
                header,
                order_ref: u64_at(b, 11),
                side: b[19],
                shares: u32_at(b, 20),
                stock: symbol_at(b, 24),
                price: u32_at(b, 32),
                match_number: u64_at(b, 36),
            };
        }
        b'Q' => {
            let b = fixed!(40);
            *out = Message::CrossTrade {
                header,
                shares: u64_at(b, 11),
                stock: symbol_at(b, 19),
                cross_price: u32_at(b, 27),
                match_number: u64_at(b, 31),
                cross_type: b[39],
            };
        }
        b'B' => {
            let b = fixed!(19);
            *out = Message::BrokenTrade {
                header,
                match_number: u64_at(b, 11),
            };
        }
        b'I' => {
            let b = fixed!(50);
            *out = Message::Noii {
                header,
                paired_shares: u64_at(b, 11),
                imbalance_shares: u64_at(b, 19),
                imbalance_direction: b[27],
                stock: symbol_at(b, 28),
                far_price: u32_at(b, 36),
                near_price: u32_at(b, 40),
                current_reference_price: u32_at(b, 44),
                cross_type: b[48],
                price_variation_indicator: b[49],
            };
        }
        b'N' => {
            let b = fixed!(20);
            *out = Message::RetailInterest {
                header,
                stock: symbol_at(b, 11),
                interest_flag: b[19],
            };
        }
        // `message_length` knows exactly the types matched above.
        _ => return Err(ItchError::UnknownType(kind)),
    }
    Ok(())
}

impl Message {
    /// The header every message carries.
    pub fn header(&self) -> Header {
        match *self {
            Message::SystemEvent { header, .. }
            | Message::StockDirectory { header, .. }
            | Message::StockTradingAction { header, .. }
            | Message::RegShoRestriction { header, .. }
            | Message::MarketParticipantPosition { header, .. }
            | Message::MwcbDeclineLevel { header, .. }
            | Message::MwcbStatus { header, .. }
            | Message::IpoQuotingPeriodUpdate { header, .. }
            | Message::LuldAuctionCollar { header, .. }
            | Message::AddOrder { header, .. }
            | Message::AddOrderMpid { header, .. }
            | Message::OrderExecuted { header, .. }
            | Message::OrderExecutedWithPrice { header, .. }
            | Message::OrderCancel { header, .. }
            | Message::OrderDelete { header, .. }
            | Message::OrderReplace { header, .. }
            | Message::Trade { header, .. }
            | Message::CrossTrade { header, .. }
            | Message::BrokenTrade { header, .. }
            | Message::Noii { header, .. }
            | Message::RetailInterest { header, .. } => header,
        }
    }

    /// The stock field of the messages that carry one (they name the locate's symbol too).
    pub fn stock(&self) -> Option<Symbol> {
        match *self {
            Message::StockDirectory { stock, .. }
            | Message::StockTradingAction { stock, .. }
            | Message::RegShoRestriction { stock, .. }
            | Message::MarketParticipantPosition { stock, .. }
            | Message::IpoQuotingPeriodUpdate { stock, .. }
            | Message::LuldAuctionCollar { stock, .. }
            | Message::AddOrder { stock, .. }
            | Message::AddOrderMpid { stock, .. }
            | Message::Trade { stock, .. }
            | Message::CrossTrade { stock, .. }
            | Message::Noii { stock, .. }
            | Message::RetailInterest { stock, .. } => Some(stock),
            _ => None,
        }
    }
}

/// A calendar date (the trading session's, in New York).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// The day of the month of the `nth` Sunday (1-based) of a month.
fn nth_sunday(year: i32, month: u32, nth: u32) -> u32 {
    // 1970-01-01 was a Thursday: weekday 0 = Sunday.
    let first = days_from_civil(year, month, 1);
    let weekday = (first + 4).rem_euclid(7) as u32;
    let first_sunday = 1 + (7 - weekday) % 7;
    first_sunday + 7 * (nth - 1)
}

/// Whether New York's midnight starting `date` is in daylight saving time (EDT, UTC-4).
///
/// The United States' rule since 2007: DST begins at 02:00 local on the second Sunday of March
/// and ends at 02:00 local on the first Sunday of November. Midnight of the second Sunday of
/// March is still standard time; midnight of the first Sunday of November is still daylight
/// time.
pub fn is_dst_at_midnight(date: Date) -> bool {
    let start = nth_sunday(date.year, 3, 2);
    let end = nth_sunday(date.year, 11, 1);
    match date.month {
        4..=10 => true,
        3 => date.day > start,
        11 => date.day <= end,
        _ => false,
    }
}

/// Epoch ns of an ITCH timestamp (ns since New York midnight) on the session's `date`.
///
/// Midnight New York is 05:00 UTC in standard time and 04:00 UTC in daylight time
/// ([`is_dst_at_midnight`]); the timestamp counts from that midnight (on the two changeover
/// Sundays, when Nasdaq does not trade, a timestamp after 02:00 is taken at midnight's offset).
/// `None` for a date that is not a calendar date, a year before 2007 (the rule above) or after
/// 2200, or a timestamp of a day or more.
pub fn epoch_ns(date: Date, timestamp_ns: u64) -> Option<u64> {
    const DAY_NS: u64 = 86_400_000_000_000;
    const HOUR_NS: u64 = 3_600_000_000_000;
    if !(2007..=2200).contains(&date.year)
        || !(1..=12).contains(&date.month)
        || date.day == 0
        || date.day > days_in_month(date.year, date.month)
        || timestamp_ns >= DAY_NS
    {
        return None;
    }
    let days = u64::try_from(days_from_civil(date.year, date.month, date.day)).ok()?;
    let offset = if is_dst_at_midnight(date) { 4 } else { 5 } * HOUR_NS;
    days.checked_mul(DAY_NS)?
        .checked_add(offset)?
        .checked_add(timestamp_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: i32, month: u32, day: u32) -> Date {
        Date { year, month, day }
    }

    #[test]
    fn every_type_refuses_every_other_length() {
        for &kind in &MESSAGE_TYPES {
            let expected = message_length(kind).expect("listed type");
            for len in 1..=60 {
                let mut bytes = [0u8; 60];
                bytes[0] = kind;
                let result = parse(&bytes[..len]);
                if len == expected {
                    assert!(result.is_ok(), "{} at {len}", kind as char);
                } else {
                    assert_eq!(
                        result,
                        Err(ItchError::Length {
                            kind,
                            expected,
                            got: len
                        })
                    );
                }
            }
        }
        assert_eq!(parse(&[]), Err(ItchError::Empty));
        assert_eq!(parse(b"Z"), Err(ItchError::UnknownType(b'Z')));
        let message = ItchError::Length {
            kind: b'A',
            expected: 36,
            got: 35,
        }
        .to_string();
        assert!(message.contains("'A'") && message.contains("36") && message.contains("35"));
    }

    /// `parse_into` reads every field at the specification's offset: each byte of a message of
    /// every type set to its own value, and the fields read back against the offsets; on an
    /// error the output keeps what it held.
    #[test]
    fn parse_into_reads_what_parse_reads_and_keeps_its_output_on_errors() {
        for &kind in &MESSAGE_TYPES {
            let len = message_length(kind).expect("listed type");
            let mut bytes: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            bytes[0] = kind;
            // The 8-byte prices of `V` in range.
            if kind == b'V' {
                for at in [11, 19, 27] {
                    bytes[at] = 0;
                }
            }
            let mut out = parse(b"S\0\0\0\0\0\0\0\0\0\0Q").expect("a system event");
            parse_into(&bytes, &mut out).unwrap_or_else(|e| panic!("{}: {e}", kind as char));
            assert_eq!(Ok(out), parse(&bytes), "{}", kind as char);
            let header = out.header();
            assert_eq!(header.locate, u16::from_be_bytes([bytes[1], bytes[2]]));
            assert_eq!(header.tracking, u16::from_be_bytes([bytes[3], bytes[4]]));
            let mut ts = [0u8; 8];
            ts[2..].copy_from_slice(&bytes[5..11]);
            assert_eq!(header.timestamp_ns, u64::from_be_bytes(ts));
            let kept = out;
            assert!(parse_into(&bytes[..len - 1], &mut out).is_err());
            assert_eq!(out, kept, "{}: kept on a short message", kind as char);
        }
        let mut add = [0u8; 36];
        add[0] = b'A';
        add[11..19].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        add[19] = b'B';
        add[20..24].copy_from_slice(&300u32.to_be_bytes());
        add[24..32].copy_from_slice(b"AAPL    ");
        add[32..36].copy_from_slice(&1_234_500u32.to_be_bytes());
        let mut out = parse(b"S\0\0\0\0\0\0\0\0\0\0Q").expect("a system event");
        parse_into(&add, &mut out).expect("an add");
        match out {
            Message::AddOrder {
                order_ref,
                side,
                shares,
                stock,
                price,
                ..
            } => {
                assert_eq!(order_ref, 0x0102_0304_0506_0708);
                assert_eq!((side, shares, price), (b'B', 300, 1_234_500));
                assert_eq!(stock.as_str(), Some("AAPL"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_type_has_its_place_and_no_other_byte_has_one() {
        for byte in 0..=255u8 {
            assert_eq!(
                type_place(byte),
                MESSAGE_TYPES.iter().position(|&kind| kind == byte),
                "{byte}"
            );
        }
    }

    #[test]
    fn prices_are_exact() {
        // 200,000.0000, the largest Price (4) the specification allows.
        assert_eq!(price4(0x7735_9400).to_string(), "200000");
        assert_eq!(price4(1).to_string(), "0.0001");
        assert_eq!(price8(1).map(|p| p.to_string()), Some("0.00000001".into()));
        assert_eq!(price8(u64::MAX), None);
        let mut v = [0u8; 35];
        v[0] = b'V';
        v[11..19].copy_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(
            parse(&v),
            Err(ItchError::PriceRange {
                kind: b'V',
                raw: u64::MAX
            })
        );
    }

    #[test]
    fn new_york_midnight_follows_the_dst_rule() {
        // 2023: DST from Sunday 12 March to Sunday 5 November.
        assert!(!is_dst_at_midnight(date(2023, 3, 11)));
        assert!(!is_dst_at_midnight(date(2023, 3, 12)));
        assert!(is_dst_at_midnight(date(2023, 3, 13)));
        assert!(is_dst_at_midnight(date(2023, 11, 5)));
        assert!(!is_dst_at_midnight(date(2023, 11, 6)));
        assert!(!is_dst_at_midnight(date(2023, 1, 15)));
        assert!(is_dst_at_midnight(date(2023, 7, 4)));
        // 2024: 10 March and 3 November.
        assert!(!is_dst_at_midnight(date(2024, 3, 10)));
        assert!(is_dst_at_midnight(date(2024, 3, 11)));
        assert!(is_dst_at_midnight(date(2024, 11, 3)));
        assert!(!is_dst_at_midnight(date(2024, 11, 4)));
        // 2023-08-22 09:30 EDT is 13:30 UTC: 1692711000 s since the epoch.
        let open = 9 * 3_600_000_000_000 + 30 * 60_000_000_000;
        assert_eq!(
            epoch_ns(date(2023, 8, 22), open),
            Some(1_692_711_000_000_000_000)
        );
        // 2024-01-02 09:30 EST is 14:30 UTC: 1704205800 s.
        assert_eq!(
            epoch_ns(date(2024, 1, 2), open),
            Some(1_704_205_800_000_000_000)
        );
        assert_eq!(epoch_ns(date(2023, 2, 29), 0), None);
        assert_eq!(epoch_ns(date(2023, 13, 1), 0), None);
        assert_eq!(epoch_ns(date(2006, 1, 3), 0), None);
        assert_eq!(epoch_ns(date(2023, 1, 3), 86_400_000_000_000), None);
    }

    #[test]
    fn symbols_drop_their_padding() {
        assert_eq!(Symbol(*b"AAPL    ").trimmed(), b"AAPL");
        assert_eq!(Symbol(*b"        ").trimmed(), b"");
        assert_eq!(Symbol(*b"ABCDEFGH").as_str(), Some("ABCDEFGH"));
    }
}
