//! Normalized events as JSON lines: what `tickwire decode` prints for every venue and what
//! `tickwire run --print-events` and the `print` strategy write, one object per event.
//!
//! It lives beside the events because every venue and the strategy stage write the same lines;
//! a venue that prints its raw messages with fields an event does not carry (Binance's event
//! time and update-id chain) builds them with the same [`Line`] writer in its own folder.
//!
//! The writer appends to a caller's `Vec<u8>` (reused, so nothing allocates once it has grown to
//! a message's size). Numbers are written with `itoa`-style integer formatting from the standard
//! library's `Display`, and decimals with `Fixed::write_to`: exact, no exponent, no rounding.

use crate::event::{Event, EventKind};
use crate::fixed::Fixed;
use std::io::Write;

/// ns in a ms, for a venue's millisecond times.
pub const NS_PER_MS: u64 = 1_000_000;

/// One JSON object being written as a line: fields separated by commas, closed by `end`.
pub struct Line<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Line<'a> {
    pub fn start(out: &'a mut Vec<u8>, kind: &str, venue: &str, symbol: &[u8]) -> Line<'a> {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.push(b'"');
        let mut line = Line { out };
        line.string("venue", venue.as_bytes());
        line.string("symbol", symbol);
        line
    }

    pub fn key(&mut self, key: &str) {
        self.out.extend_from_slice(b",\"");
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    pub fn string(&mut self, key: &str, value: &[u8]) {
        self.key(key);
        self.out.push(b'"');
        // Venue names and symbols need no escaping (config names are [a-z0-9-], the decoder
        // refuses escapes in symbols); anything else is escaped all the same.
        for &byte in value {
            match byte {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                0..=0x1f => {
                    let _ = write!(self.out, "\\u{byte:04x}");
                }
                _ => self.out.push(byte),
            }
        }
        self.out.push(b'"');
    }

    pub fn number(&mut self, key: &str, value: u64) {
        self.key(key);
        let _ = write!(self.out, "{value}");
    }

    /// A venue time in ms, written in ns.
    pub fn time_ms(&mut self, key: &str, ms: u64) {
        self.number(key, ms.saturating_mul(NS_PER_MS));
    }

    pub fn decimal(&mut self, key: &str, value: Fixed) {
        self.key(key);
        let mut digits = [0u8; 21];
        let len = value.write_to(&mut digits);
        self.out.push(b'"');
        self.out.extend_from_slice(&digits[..len]);
        self.out.push(b'"');
    }

    /// A decimal, or `null` for [`NO_PRICE`](crate::event::NO_PRICE).
    pub fn price(&mut self, key: &str, value: Fixed) {
        if value == crate::event::NO_PRICE {
            self.key(key);
            self.out.extend_from_slice(b"null");
        } else {
            self.decimal(key, value);
        }
    }

    pub fn signed(&mut self, key: &str, value: i64) {
        self.key(key);
        let _ = write!(self.out, "{value}");
    }

    /// A DBN character field (`Y`, `N`, `~`...) as a one-character string.
    pub fn char(&mut self, key: &str, value: u8) {
        self.string(key, &[value]);
    }

    /// `"saturated":true` when a size reads `Fixed::MAX` because the true one does not fit
    /// (`flags::SATURATED`); nothing otherwise.
    pub fn saturated(&mut self, flags: u8) {
        if flags & crate::event::flags::SATURATED != 0 {
            self.key("saturated");
            self.out.extend_from_slice(b"true");
        }
    }

    pub fn end(self) {
        self.out.extend_from_slice(b"}\n");
    }
}

/// An enum variant's name (its `Debug` form, which the lines print) written into `buffer`,
/// without allocating: the strategy thread prints gaps and statuses too.
fn debug_name(value: impl std::fmt::Debug, buffer: &mut [u8; 32]) -> &[u8] {
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    // A variant name longer than the buffer is cut short, which none is.
    let _ = write!(cursor, "{value:?}");
    let length = cursor.position() as usize;
    &buffer[..length]
}

/// The side of a liquidated position as a `liquidation` line names it: `long` (a [`Side::Bid`]
/// position), `short`, or `unknown`.
///
/// [`Side::Bid`]: crate::event::Side::Bid
pub fn position_name(side: crate::event::Side) -> &'static [u8] {
    use crate::event::Side;
    match side {
        Side::Bid => b"long",
        Side::Ask => b"short",
        Side::None => b"unknown",
    }
}

/// One line for a normalized event, in the same format (the fields an event carries: no
/// separate event time, no `first_seq`/`prev_seq` on levels; `"saturated":true` on a level or
/// quote whose size did not fit and reads its largest value), plus `gap`, `status`,
/// `snapshot_begin`/`snapshot_end`, the `bar`, `trading_status`, `imbalance` and `statistic`
/// lines of DBN venues (an unused price is `null`), and `liquidation` (`position` `long` or
/// `short`, the price and size closed). What the `print` strategy writes.
pub fn write_event(out: &mut Vec<u8>, venue: &str, symbol: &[u8], event: &Event) {
    use crate::event::{Body, Side};
    let header = &event.header;
    let side_name = |side: Side| -> &'static [u8] {
        match side {
            Side::Bid => b"bid",
            Side::Ask => b"ask",
            Side::None => b"none",
        }
    };
    let mut line;
    match event.body() {
        Body::Quote(quote) => {
            line = Line::start(out, EventKind::Quote.name(), venue, symbol);
            line.number("seq", header.venue_seq);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
            line.decimal("bid_px", quote.bid_px);
            line.decimal("bid_qty", quote.bid_sz);
            line.decimal("ask_px", quote.ask_px);
            line.decimal("ask_qty", quote.ask_sz);
            if header.flags & crate::event::flags::DERIVED != 0 {
                line.string("source", b"book");
            }
            line.saturated(header.flags);
        }
        Body::Trade(trade) => {
            line = Line::start(out, EventKind::Trade.name(), venue, symbol);
            line.number("trade_id", trade.trade_id);
            line.decimal("px", trade.price);
            line.decimal("qty", trade.size);
            let aggressor: &[u8] = match trade.aggressor() {
                Side::Bid => b"buy",
                Side::Ask => b"sell",
                Side::None => b"unknown",
            };
            line.string("aggressor", aggressor);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::BookLevel(level) => {
            line = Line::start(out, EventKind::BookLevel.name(), venue, symbol);
            line.string("side", side_name(level.side()));
            line.decimal("px", level.price);
            line.decimal("qty", level.size);
            line.number("seq", header.venue_seq);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
            line.saturated(header.flags);
        }
        Body::SnapshotBegin(_) | Body::SnapshotEnd(_) => {
            line = Line::start(out, header.kind.name(), venue, symbol);
            line.number("seq", header.venue_seq);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Gap(gap) => {
            line = Line::start(out, EventKind::Gap.name(), venue, symbol);
            line.string("reason", debug_name(gap.reason(), &mut [0; 32]));
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::VenueStatus(status) => {
            line = Line::start(out, EventKind::VenueStatus.name(), venue, symbol);
            line.string("state", debug_name(status.state(), &mut [0; 32]));
            line.number("reason_code", u64::from(status.reason_code));
            line.number("detail", status.detail);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Reference(reference) => {
            line = Line::start(out, reference.kind().as_str(), venue, symbol);
            line.decimal("px", reference.price);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Bar(bar) => {
            line = Line::start(out, EventKind::Bar.name(), venue, symbol);
            let interval = crate::event::BarInterval::from_flags(header.flags);
            line.string("interval", interval.as_str().as_bytes());
            line.decimal("open", bar.open);
            line.decimal("high", bar.high);
            line.decimal("low", bar.low);
            line.decimal("close", bar.close);
            line.number("volume", header.venue_seq);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::TradingStatus(status) => {
            line = Line::start(out, EventKind::TradingStatus.name(), venue, symbol);
            line.number("action", u64::from(status.action));
            line.number("reason", u64::from(status.reason));
            line.number("trading_event", u64::from(status.trading_event));
            line.char("is_trading", status.is_trading);
            line.char("is_quoting", status.is_quoting);
            line.char("is_short_sell_restricted", status.is_short_sell_restricted);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Imbalance(imbalance) => {
            line = Line::start(out, EventKind::Imbalance.name(), venue, symbol);
            line.price("ref_px", imbalance.ref_price);
            line.price("cont_book_clr_px", imbalance.cont_book_clr_price);
            line.number("paired_qty", u64::from(imbalance.paired_qty));
            line.number(
                "total_imbalance_qty",
                u64::from(imbalance.total_imbalance_qty),
            );
            line.string("side", side_name(imbalance.side()));
            line.char("auction_type", imbalance.auction_type);
            line.char("significant_imbalance", imbalance.significant_imbalance);
            line.string("unpaired_side", side_name(imbalance.unpaired_side()));
            line.number("auction_status", u64::from(imbalance.auction_status));
            line.number("freeze_status", u64::from(imbalance.freeze_status));
            line.number("num_extensions", u64::from(imbalance.num_extensions));
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Statistic(statistic) => {
            line = Line::start(out, EventKind::Statistic.name(), venue, symbol);
            line.number("stat_type", u64::from(statistic.stat_type));
            line.price("px", statistic.price);
            if statistic.quantity == crate::event::Statistic::NO_QUANTITY {
                line.key("qty");
                line.out.extend_from_slice(b"null");
            } else {
                line.signed("qty", statistic.quantity);
            }
            line.number("ts_ref_ns", statistic.ts_ref);
            line.number("update_action", u64::from(statistic.update_action));
            line.number("stat_flags", u64::from(statistic.stat_flags));
            line.number("channel_id", u64::from(statistic.channel_id));
            line.number("seq", header.venue_seq);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
        Body::Liquidation(liquidation) => {
            line = Line::start(out, EventKind::Liquidation.name(), venue, symbol);
            line.string("position", position_name(liquidation.position_side()));
            line.decimal("px", liquidation.price);
            line.decimal("qty", liquidation.size);
            line.number("exch_ts_ns", header.exchange_ts_ns);
            line.number("recv_ts_ns", header.recv_ts_ns);
        }
    }
    line.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saturated_size_says_so() {
        use crate::event::{flags, Body, BookLevel, Event, EventHeader, EventKind, Side};
        let header = EventHeader {
            exchange_ts_ns: 1,
            recv_ts_ns: 2,
            venue_seq: 3,
            instrument_id: 0,
            venue_id: 0,
            kind: EventKind::BookLevel,
            flags: flags::LAST,
        };
        let level = Body::BookLevel(BookLevel::new(Side::Bid, Fixed(5), Fixed::MAX));
        let mut out = Vec::new();
        write_event(&mut out, "db", b"ESZ6", &Event::new(header, level));
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(json.get("saturated").is_none(), "{json}");
        out.clear();
        let saturated = EventHeader {
            flags: flags::LAST | flags::SATURATED,
            ..header
        };
        write_event(&mut out, "db", b"ESZ6", &Event::new(saturated, level));
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["saturated"], true);
        assert_eq!(json["qty"], "9223372036.854775807");
    }

    #[test]
    fn a_liquidation_line_names_the_position_price_size_and_times() {
        use crate::event::{flags, Body, Event, EventHeader, EventKind, Liquidation, Side};
        let header = EventHeader {
            exchange_ts_ns: 1_739_502_302_929_000_000,
            recv_ts_ns: 1_739_502_303_300_000_000,
            venue_seq: 0,
            instrument_id: 0,
            venue_id: 0,
            kind: EventKind::Liquidation,
            flags: flags::LAST,
        };
        let liquidation = Liquidation::new(
            Side::Ask,
            Fixed::parse(b"0.04499").unwrap(),
            Fixed::parse(b"20000").unwrap(),
        );
        let mut out = Vec::new();
        let event = Event::new(header, Body::Liquidation(liquidation));
        write_event(&mut out, "bybit-linear", b"ROSEUSDT", &event);
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "liquidation", "venue": "bybit-linear", "symbol": "ROSEUSDT",
                "position": "short", "px": "0.04499", "qty": "20000",
                "exch_ts_ns": 1_739_502_302_929_000_000u64,
                "recv_ts_ns": 1_739_502_303_300_000_000u64,
            })
        );
    }
}
