//! One [`Event`] to one DBN record and back, losslessly.
//!
//! # The mapping
//!
//! Every record carries the event's header the same way where the record has the field:
//! `hd.ts_event` = `exchange_ts_ns`, `hd.publisher_id` = `venue_id`, `hd.instrument_id` =
//! `instrument_id`, `ts_recv` = `recv_ts_ns`, `sequence` = the low 32 bits of `venue_seq` and
//! `ts_in_delta` = its high 32 bits (DBN's sequence is a `u32`; Binance's update ids are not).
//!
//! - `Quote` -> `Mbp1Msg`, `action` `N`, `side` `N`, `price` undefined, `levels[0]` the bid and
//!   ask.
//! - `Trade` -> `Mbp1Msg`, `action` `T`, `side` the aggressor (`B` the buyer took liquidity),
//!   `price`/`size` the print, `levels[0].ask_sz` / `ask_ct` the low / high 32 bits of the
//!   trade id, book prices undefined. DBN's `TradeMsg` has no room for a size's fraction and a
//!   64-bit sequence, and Databento's own MBP-1 schema carries trades as `T` actions too.
//! - `BookLevel` -> `Mbp1Msg`, `action` `M` (the level's total is now `size`) or `C` (size 0: the
//!   level is gone), `side` `B`/`A`, `price`/`size` the level, book prices undefined.
//! - `TradingStatus` -> `StatusMsg`, tickwire's flags in `_reserved[0]` and the sequence in
//!   `_reserved[1..5]` (the record has no sequence field).
//! - `Imbalance` -> `ImbalanceMsg`, the fields tickwire carries, the others undefined; flags in
//!   `_reserved[0]`.
//! - `Statistic` -> `StatMsg` as DBN defines it; flags in `_reserved[0]`.
//! - `SnapshotBegin`, `SnapshotEnd`, `Gap`, `VenueStatus`, `Reference`, `Bar`, `Liquidation` ->
//!   the private encoding below. (`OhlcvMsg` has no receive time and no flags, so a bar put
//!   there would lose both; DBN has no liquidation record, and an MBP-1 `T` would show a
//!   liquidation to tools as a trade, so it is a `StatMsg` with `stat_type` `0xFF0D` whose
//!   `price` is the liquidation's price.)
//!
//! Sizes: DBN sizes are whole units (`u32`) and tickwire's are `Fixed` (1e-9). An MBP-1 record
//! keeps the whole units in the size field tools read (`size`, `bid_sz`, `ask_sz`) and the
//! fraction, in 1e-9, in a count field: `levels[0].bid_ct` for a trade's or a level's size,
//! `bid_ct` / `ask_ct` for a quote's bid / ask size. So `size + bid_ct * 1e-9` is the exact
//! size in pandas.
//!
//! Flags: tickwire's `LAST` and `SNAPSHOT` become DBN's `F_LAST` and `F_SNAPSHOT` and
//! `SATURATED` becomes `F_MAYBE_BAD_BOOK` (the size is a floor); the other bits take DBN's unused
//! bits ([`FLAG_BITS`]), so the byte round-trips.
//!
//! # The private encoding
//!
//! A `StatMsg` whose `stat_type` is `0xFF00 | kind byte` ([`PRIVATE_STAT_TYPE`]): `price`,
//! `quantity`, `ts_ref` and `_reserved[0..8]` hold the payload's four little-endian words,
//! `stat_flags` the flags byte, `update_action` 1 (new). It holds any event exactly, so it is
//! also the fallback: [`encode`] decodes what it made and, if that is not the same 64 bytes
//! (a size past `u32::MAX` units, a non-zero reserved byte, a sequence a `StatusMsg` cannot
//! hold), writes the private record instead and says so ([`Encoded::fell_back`]). Per kind, the
//! words are: snapshot `bid_levels | ask_levels << 32`, `snapshot_id`; gap `expected_seq`,
//! `received_seq`, `reason`; status `state`, `reason_code`, `detail`; reference `price`, `kind`;
//! bar `open`, `high`, `low`, `close`; liquidation `price`, `size` (1e-9 units), `position_side`.
//!
//! Recordings made before the liquidation kind (bus layout version 1) hold kinds 1..=12 only,
//! encoded as above, and read unchanged; a reader older than the kind refuses a liquidation's
//! record as an unknown private kind (`DecodeError::UnknownKind`) rather than misreading it.

use dbn::enums::rtype;
use dbn::record::{BidAskPair, ImbalanceMsg, Mbp1Msg, RecordHeader, StatMsg, StatusMsg};
use dbn::{FlagSet, RecordRef, UNDEF_PRICE, UNDEF_TIMESTAMP};
use std::ffi::c_char;
use tickwire_bus::event::{flags, Body, Event, EventKind, Side};
use tickwire_bus::fixed::{Fixed, SCALE};

/// `stat_type` of a private record is this OR the event's kind byte.
pub const PRIVATE_STAT_TYPE: u16 = 0xFF00;

/// Where tickwire's flag bit `i` sits in a DBN flag byte: a permutation, so it round-trips.
/// `LAST` (0) -> `F_LAST` (7), `SNAPSHOT` (1) -> `F_SNAPSHOT` (5), `NO_EXCHANGE_TS` (2) and
/// `DERIVED` (3) -> DBN's reserved bits 0 and 1, the bar interval bits (4..=6, never on an MBP
/// record) -> 4, 6, 3, `SATURATED` (7) -> `F_MAYBE_BAD_BOOK` (2).
pub const FLAG_BITS: [u8; 8] = [7, 5, 0, 1, 4, 6, 3, 2];

const _: () = assert!(flags::LAST == 1 << 0 && flags::SNAPSHOT == 1 << 1);
const _: () = assert!(flags::SATURATED == 1 << 7);

/// tickwire's flags as a DBN flag byte.
pub fn dbn_flags(tickwire: u8) -> FlagSet {
    let mut raw = 0u8;
    for (bit, to) in FLAG_BITS.iter().enumerate() {
        if tickwire & (1 << bit) != 0 {
            raw |= 1 << to;
        }
    }
    FlagSet::new(raw)
}

/// A DBN flag byte made by [`dbn_flags`] back as tickwire's flags.
pub fn tickwire_flags(dbn: FlagSet) -> u8 {
    let raw = dbn.raw();
    let mut flags = 0u8;
    for (bit, from) in FLAG_BITS.iter().enumerate() {
        if raw & (1 << from) != 0 {
            flags |= 1 << bit;
        }
    }
    flags
}

/// The DBN record an event became.
#[derive(Clone, Debug)]
pub enum Record {
    Mbp1(Mbp1Msg),
    Status(StatusMsg),
    Imbalance(ImbalanceMsg),
    Stat(StatMsg),
}

/// What [`encode`] made.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub record: Record,
    /// The event's kind has a DBN record of its own but this event did not fit it losslessly,
    /// so it went to the private encoding.
    pub fell_back: bool,
}

/// Why a record is not a tickwire event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record type {rtype:#04x} is not one tickwire writes")]
    UnknownRType { rtype: u8 },
    #[error("record type {rtype:#04x} is shorter than its struct")]
    Short { rtype: u8 },
    #[error("MBP-1 action {action:?} is not one tickwire writes")]
    UnknownAction { action: char },
    #[error("private record names event kind {kind}, which does not exist")]
    UnknownKind { kind: u16 },
}

fn char_of(byte: u8) -> c_char {
    byte as c_char
}

fn byte_of(ch: c_char) -> u8 {
    ch as u8
}

/// DBN's side character for a tickwire side byte (`B` bid, `A` ask, `N` none).
fn side_char(side_byte: u8) -> c_char {
    match Side::from_u8(side_byte) {
        Side::Bid => char_of(b'B'),
        Side::Ask => char_of(b'A'),
        Side::None => char_of(b'N'),
    }
}

fn side_byte(ch: c_char) -> u8 {
    match byte_of(ch) {
        b'B' => Side::Bid as u8,
        b'A' => Side::Ask as u8,
        _ => Side::None as u8,
    }
}

/// A `Fixed` size as DBN's whole units and the fraction in 1e-9. Out of range (negative, or
/// more than `u32::MAX` units) gives a value that does not decode back, so [`encode`] falls back.
fn split_size(size: Fixed) -> (u32, u32) {
    if size.0 < 0 {
        return (0, u32::MAX);
    }
    let units = size.0 / SCALE;
    let nanos = (size.0 % SCALE) as u32;
    match u32::try_from(units) {
        Ok(units) => (units, nanos),
        Err(_) => (u32::MAX, u32::MAX),
    }
}

fn join_size(units: u32, nanos: u32) -> Fixed {
    // At most u32::MAX * 1e9 + u32::MAX, below i64::MAX: no overflow.
    Fixed(i64::from(units) * SCALE + i64::from(nanos))
}

fn seq_lo(seq: u64) -> u32 {
    seq as u32
}

fn seq_hi(seq: u64) -> i32 {
    (seq >> 32) as u32 as i32
}

fn join_seq(lo: u32, hi: i32) -> u64 {
    u64::from(lo) | (u64::from(hi as u32) << 32)
}

/// An event from its parts; `None` when `kind` is no [`EventKind`].
#[allow(
    clippy::too_many_arguments,
    reason = "the header's seven fields and the payload, each named at the call"
)]
fn event_from_parts(
    exchange_ts_ns: u64,
    recv_ts_ns: u64,
    venue_seq: u64,
    instrument_id: u32,
    venue_id: u16,
    kind: u8,
    flags: u8,
    payload: [u64; 4],
) -> Option<Event> {
    let word3 = u64::from(instrument_id)
        | (u64::from(venue_id) << 32)
        | (u64::from(kind) << 48)
        | (u64::from(flags) << 56);
    Event::from_words([
        exchange_ts_ns,
        recv_ts_ns,
        venue_seq,
        word3,
        payload[0],
        payload[1],
        payload[2],
        payload[3],
    ])
}

fn mbp1_base(event: &Event) -> Mbp1Msg {
    let header = &event.header;
    Mbp1Msg {
        hd: RecordHeader::new::<Mbp1Msg>(
            rtype::MBP_1,
            header.venue_id,
            header.instrument_id,
            header.exchange_ts_ns,
        ),
        price: UNDEF_PRICE,
        size: 0,
        action: char_of(b'N'),
        side: char_of(b'N'),
        flags: dbn_flags(header.flags),
        depth: 0,
        ts_recv: header.recv_ts_ns,
        ts_in_delta: seq_hi(header.venue_seq),
        sequence: seq_lo(header.venue_seq),
        levels: [BidAskPair {
            bid_px: UNDEF_PRICE,
            ask_px: UNDEF_PRICE,
            ..BidAskPair::default()
        }],
    }
}

/// The record of DBN's own that the event's kind maps to, `None` for the kinds that only have
/// the private encoding.
fn encode_natural(event: &Event) -> Option<Record> {
    let header = &event.header;
    let record = match event.body() {
        Body::Quote(quote) => {
            let mut msg = mbp1_base(event);
            let (bid_sz, bid_ct) = split_size(quote.bid_sz);
            let (ask_sz, ask_ct) = split_size(quote.ask_sz);
            msg.levels[0] = BidAskPair {
                bid_px: quote.bid_px.0,
                ask_px: quote.ask_px.0,
                bid_sz,
                ask_sz,
                bid_ct,
                ask_ct,
            };
            Record::Mbp1(msg)
        }
        Body::Trade(trade) => {
            let mut msg = mbp1_base(event);
            let (size, nanos) = split_size(trade.size);
            msg.price = trade.price.0;
            msg.size = size;
            msg.action = char_of(b'T');
            msg.side = side_char(trade.aggressor_side);
            msg.levels[0].bid_ct = nanos;
            msg.levels[0].ask_sz = trade.trade_id as u32;
            msg.levels[0].ask_ct = (trade.trade_id >> 32) as u32;
            Record::Mbp1(msg)
        }
        Body::BookLevel(level) => {
            let mut msg = mbp1_base(event);
            let (size, nanos) = split_size(level.size);
            msg.price = level.price.0;
            msg.size = size;
            msg.action = char_of(if level.size.0 == 0 { b'C' } else { b'M' });
            msg.side = side_char(level.side);
            msg.levels[0].bid_ct = nanos;
            Record::Mbp1(msg)
        }
        Body::TradingStatus(status) => {
            let mut reserved = [0u8; 7];
            reserved[0] = header.flags;
            reserved[1..5].copy_from_slice(&seq_lo(header.venue_seq).to_le_bytes());
            Record::Status(StatusMsg {
                hd: RecordHeader::new::<StatusMsg>(
                    rtype::STATUS,
                    header.venue_id,
                    header.instrument_id,
                    header.exchange_ts_ns,
                ),
                ts_recv: header.recv_ts_ns,
                action: status.action,
                reason: status.reason,
                trading_event: status.trading_event,
                is_trading: char_of(status.is_trading),
                is_quoting: char_of(status.is_quoting),
                is_short_sell_restricted: char_of(status.is_short_sell_restricted),
                _reserved: reserved,
            })
        }
        Body::Imbalance(imbalance) => Record::Imbalance(ImbalanceMsg {
            hd: RecordHeader::new::<ImbalanceMsg>(
                rtype::IMBALANCE,
                header.venue_id,
                header.instrument_id,
                header.exchange_ts_ns,
            ),
            ts_recv: header.recv_ts_ns,
            ref_price: imbalance.ref_price.0,
            auction_time: UNDEF_TIMESTAMP,
            cont_book_clr_price: imbalance.cont_book_clr_price.0,
            auct_interest_clr_price: UNDEF_PRICE,
            ssr_filling_price: UNDEF_PRICE,
            ind_match_price: UNDEF_PRICE,
            upper_collar: UNDEF_PRICE,
            lower_collar: UNDEF_PRICE,
            paired_qty: imbalance.paired_qty,
            total_imbalance_qty: imbalance.total_imbalance_qty,
            market_imbalance_qty: 0,
            unpaired_qty: 0,
            auction_type: char_of(imbalance.auction_type),
            side: side_char(imbalance.side),
            auction_status: imbalance.auction_status,
            freeze_status: imbalance.freeze_status,
            num_extensions: imbalance.num_extensions,
            unpaired_side: side_char(imbalance.unpaired_side),
            significant_imbalance: char_of(imbalance.significant_imbalance),
            _reserved: [header.flags],
        }),
        Body::Statistic(statistic) => {
            let mut reserved = [0u8; 18];
            reserved[0] = header.flags;
            reserved[1..3].copy_from_slice(&statistic._reserved);
            Record::Stat(StatMsg {
                hd: RecordHeader::new::<StatMsg>(
                    rtype::STATISTICS,
                    header.venue_id,
                    header.instrument_id,
                    header.exchange_ts_ns,
                ),
                ts_recv: header.recv_ts_ns,
                ts_ref: statistic.ts_ref,
                price: statistic.price.0,
                quantity: statistic.quantity,
                sequence: seq_lo(header.venue_seq),
                ts_in_delta: seq_hi(header.venue_seq),
                stat_type: statistic.stat_type,
                channel_id: statistic.channel_id,
                update_action: statistic.update_action,
                stat_flags: statistic.stat_flags,
                _reserved: reserved,
            })
        }
        Body::SnapshotBegin(_)
        | Body::SnapshotEnd(_)
        | Body::Gap(_)
        | Body::VenueStatus(_)
        | Body::Reference(_)
        | Body::Bar(_)
        | Body::Liquidation(_) => return None,
    };
    Some(record)
}

/// The private encoding of any event (see the module doc).
pub fn encode_private(event: &Event) -> StatMsg {
    let header = &event.header;
    let words = event.payload_words();
    let mut reserved = [0u8; 18];
    reserved[..8].copy_from_slice(&words[3].to_le_bytes());
    StatMsg {
        hd: RecordHeader::new::<StatMsg>(
            rtype::STATISTICS,
            header.venue_id,
            header.instrument_id,
            header.exchange_ts_ns,
        ),
        ts_recv: header.recv_ts_ns,
        ts_ref: words[2],
        price: words[0] as i64,
        quantity: words[1] as i64,
        sequence: seq_lo(header.venue_seq),
        ts_in_delta: seq_hi(header.venue_seq),
        stat_type: PRIVATE_STAT_TYPE | u16::from(header.kind as u8),
        channel_id: 0,
        update_action: 1,
        stat_flags: header.flags,
        _reserved: reserved,
    }
}

/// The DBN record for `event`: its kind's own record when that holds the event exactly, the
/// private encoding otherwise. Decoding the result with [`decode`] always gives `event` back.
pub fn encode(event: &Event) -> Encoded {
    match encode_natural(event) {
        Some(record) if decode_record(&record).as_ref() == Ok(event) => Encoded {
            record,
            fell_back: false,
        },
        Some(_) => Encoded {
            record: Record::Stat(encode_private(event)),
            fell_back: true,
        },
        None => Encoded {
            record: Record::Stat(encode_private(event)),
            fell_back: false,
        },
    }
}

fn decode_mbp1(msg: &Mbp1Msg) -> Result<Event, DecodeError> {
    let level = &msg.levels[0];
    let payload: [u64; 4];
    let kind = match byte_of(msg.action) {
        b'N' => {
            payload = [
                level.bid_px as u64,
                join_size(level.bid_sz, level.bid_ct).0 as u64,
                level.ask_px as u64,
                join_size(level.ask_sz, level.ask_ct).0 as u64,
            ];
            EventKind::Quote
        }
        b'T' => {
            let trade_id = u64::from(level.ask_sz) | (u64::from(level.ask_ct) << 32);
            payload = [
                msg.price as u64,
                join_size(msg.size, level.bid_ct).0 as u64,
                trade_id,
                u64::from(side_byte(msg.side)),
            ];
            EventKind::Trade
        }
        b'M' | b'C' => {
            payload = [
                msg.price as u64,
                join_size(msg.size, level.bid_ct).0 as u64,
                u64::from(side_byte(msg.side)),
                0,
            ];
            EventKind::BookLevel
        }
        other => {
            return Err(DecodeError::UnknownAction {
                action: char::from(other),
            })
        }
    };
    Ok(event_from_parts(
        msg.hd.ts_event,
        msg.ts_recv,
        join_seq(msg.sequence, msg.ts_in_delta),
        msg.hd.instrument_id,
        msg.hd.publisher_id,
        kind as u8,
        tickwire_flags(msg.flags),
        payload,
    )
    .expect("a kind from EventKind is a valid kind byte"))
}

fn decode_status(msg: &StatusMsg) -> Event {
    let reserved = &msg._reserved;
    let seq = u32::from_le_bytes([reserved[1], reserved[2], reserved[3], reserved[4]]);
    let payload_word0 = u64::from(msg.action)
        | (u64::from(msg.reason) << 16)
        | (u64::from(msg.trading_event) << 32)
        | (u64::from(byte_of(msg.is_trading)) << 48)
        | (u64::from(byte_of(msg.is_quoting)) << 56);
    let payload_word1 = u64::from(byte_of(msg.is_short_sell_restricted));
    event_from_parts(
        msg.hd.ts_event,
        msg.ts_recv,
        u64::from(seq),
        msg.hd.instrument_id,
        msg.hd.publisher_id,
        EventKind::TradingStatus as u8,
        reserved[0],
        [payload_word0, payload_word1, 0, 0],
    )
    .expect("TradingStatus is a valid kind byte")
}

fn decode_imbalance(msg: &ImbalanceMsg) -> Event {
    let bytes = [
        side_byte(msg.side),
        byte_of(msg.auction_type),
        byte_of(msg.significant_imbalance),
        side_byte(msg.unpaired_side),
        msg.auction_status,
        msg.freeze_status,
        msg.num_extensions,
        0,
    ];
    event_from_parts(
        msg.hd.ts_event,
        msg.ts_recv,
        0,
        msg.hd.instrument_id,
        msg.hd.publisher_id,
        EventKind::Imbalance as u8,
        msg._reserved[0],
        [
            msg.ref_price as u64,
            msg.cont_book_clr_price as u64,
            u64::from(msg.paired_qty) | (u64::from(msg.total_imbalance_qty) << 32),
            u64::from_le_bytes(bytes),
        ],
    )
    .expect("Imbalance is a valid kind byte")
}

fn decode_stat(msg: &StatMsg) -> Result<Event, DecodeError> {
    let seq = join_seq(msg.sequence, msg.ts_in_delta);
    let reserved = &msg._reserved;
    if msg.stat_type & PRIVATE_STAT_TYPE == PRIVATE_STAT_TYPE {
        let kind = msg.stat_type & 0xFF;
        let mut word3 = [0u8; 8];
        word3.copy_from_slice(&reserved[..8]);
        return event_from_parts(
            msg.hd.ts_event,
            msg.ts_recv,
            seq,
            msg.hd.instrument_id,
            msg.hd.publisher_id,
            kind as u8,
            msg.stat_flags,
            [
                msg.price as u64,
                msg.quantity as u64,
                msg.ts_ref,
                u64::from_le_bytes(word3),
            ],
        )
        .ok_or(DecodeError::UnknownKind {
            kind: msg.stat_type,
        });
    }
    let tail = u64::from(msg.stat_type)
        | (u64::from(msg.channel_id) << 16)
        | (u64::from(msg.update_action) << 32)
        | (u64::from(msg.stat_flags) << 40)
        | (u64::from(reserved[1]) << 48)
        | (u64::from(reserved[2]) << 56);
    Ok(event_from_parts(
        msg.hd.ts_event,
        msg.ts_recv,
        seq,
        msg.hd.instrument_id,
        msg.hd.publisher_id,
        EventKind::Statistic as u8,
        reserved[0],
        [msg.price as u64, msg.quantity as u64, msg.ts_ref, tail],
    )
    .expect("Statistic is a valid kind byte"))
}

fn decode_record(record: &Record) -> Result<Event, DecodeError> {
    match record {
        Record::Mbp1(msg) => decode_mbp1(msg),
        Record::Status(msg) => Ok(decode_status(msg)),
        Record::Imbalance(msg) => Ok(decode_imbalance(msg)),
        Record::Stat(msg) => decode_stat(msg),
    }
}

/// The event a record written by [`encode`] holds.
pub fn decode(record: RecordRef<'_>) -> Result<Event, DecodeError> {
    let rtype = record.header().rtype;
    let short = DecodeError::Short { rtype };
    match rtype {
        rtype::MBP_1 => decode_mbp1(record.get::<Mbp1Msg>().ok_or(short)?),
        rtype::STATUS => Ok(decode_status(record.get::<StatusMsg>().ok_or(short)?)),
        rtype::IMBALANCE => Ok(decode_imbalance(record.get::<ImbalanceMsg>().ok_or(short)?)),
        rtype::STATISTICS => decode_stat(record.get::<StatMsg>().ok_or(short)?),
        other => Err(DecodeError::UnknownRType { rtype: other }),
    }
}

impl Record {
    /// The record as DBN's borrowed view, to hand to an encoder.
    pub fn as_record_ref(&self) -> RecordRef<'_> {
        match self {
            Record::Mbp1(msg) => RecordRef::from(msg),
            Record::Status(msg) => RecordRef::from(msg),
            Record::Imbalance(msg) => RecordRef::from(msg),
            Record::Stat(msg) => RecordRef::from(msg),
        }
    }
}
