//! Normalized events as JSON lines: what `tickwire decode` and `tickwire run --print-events`
//! print, one object per event.
//!
//! The writer appends to a caller's `Vec<u8>` (reused, so nothing allocates once it has grown to
//! a message's size). Numbers are written with `itoa`-style integer formatting from the standard
//! library's `Display`, and decimals with `Fixed::write_to`: exact, no exponent, no rounding.

use super::decode::{BookTicker, DepthUpdate, TradePrint};
use crate::fixed::Fixed;
use std::io::Write;

/// ns in a ms, for the venue's millisecond times.
const NS_PER_MS: u64 = 1_000_000;

fn push_str_field(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":\"");
    // Venue names and symbols are checked to need no escaping: config names are [a-z0-9-] and
    // the decoder refuses escapes in symbols. Anything else is escaped all the same.
    for &byte in value {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                let _ = write!(out, "\\u{byte:04x}");
            }
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

fn push_u64_field(out: &mut Vec<u8>, key: &str, value: u64) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    let _ = write!(out, "{value}");
}

fn push_fixed_field(out: &mut Vec<u8>, key: &str, value: Fixed) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":\"");
    let mut digits = [0u8; 21];
    let len = value.write_to(&mut digits);
    out.extend_from_slice(&digits[..len]);
    out.push(b'"');
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(NS_PER_MS)
}

/// One `quote` line (from a bookTicker), newline included.
pub fn write_quote(out: &mut Vec<u8>, venue: &str, ticker: &BookTicker<'_>, recv_ts_ns: u64) {
    out.extend_from_slice(b"{\"type\":\"quote\",");
    push_str_field(out, "venue", venue.as_bytes());
    out.push(b',');
    push_str_field(out, "symbol", ticker.symbol);
    out.push(b',');
    push_u64_field(out, "seq", ticker.update_id);
    out.push(b',');
    push_u64_field(out, "event_ts_ns", ms_to_ns(ticker.event_time_ms));
    out.push(b',');
    push_u64_field(out, "exch_ts_ns", ms_to_ns(ticker.transaction_time_ms));
    out.push(b',');
    push_u64_field(out, "recv_ts_ns", recv_ts_ns);
    out.push(b',');
    push_fixed_field(out, "bid_px", ticker.bid_px);
    out.push(b',');
    push_fixed_field(out, "bid_qty", ticker.bid_qty);
    out.push(b',');
    push_fixed_field(out, "ask_px", ticker.ask_px);
    out.push(b',');
    push_fixed_field(out, "ask_qty", ticker.ask_qty);
    out.extend_from_slice(b"}\n");
}

/// One `trade` line (from a trade or an aggTrade), newline included.
pub fn write_trade(out: &mut Vec<u8>, venue: &str, trade: &TradePrint<'_>, recv_ts_ns: u64) {
    out.extend_from_slice(b"{\"type\":\"trade\",");
    push_str_field(out, "venue", venue.as_bytes());
    out.push(b',');
    push_str_field(out, "symbol", trade.symbol);
    out.push(b',');
    push_u64_field(out, "trade_id", trade.trade_id);
    out.push(b',');
    push_fixed_field(out, "px", trade.price);
    out.push(b',');
    push_fixed_field(out, "qty", trade.qty);
    out.push(b',');
    // `m`: the buyer was the maker, so the taker (the aggressor) sold.
    let aggressor: &[u8] = if trade.buyer_is_maker {
        b"sell"
    } else {
        b"buy"
    };
    push_str_field(out, "aggressor", aggressor);
    out.push(b',');
    push_u64_field(out, "event_ts_ns", ms_to_ns(trade.event_time_ms));
    out.push(b',');
    push_u64_field(out, "exch_ts_ns", ms_to_ns(trade.trade_time_ms));
    out.push(b',');
    push_u64_field(out, "recv_ts_ns", recv_ts_ns);
    out.extend_from_slice(b"}\n");
}

/// One `level` line per price level of a depthUpdate, bids then asks, each in message order.
pub fn write_levels(out: &mut Vec<u8>, venue: &str, depth: &DepthUpdate<'_>, recv_ts_ns: u64) {
    let sides: [(&[u8], _); 2] = [(b"bid", depth.bids), (b"ask", depth.asks)];
    for (side, levels) in sides {
        for (price, qty) in levels {
            out.extend_from_slice(b"{\"type\":\"level\",");
            push_str_field(out, "venue", venue.as_bytes());
            out.push(b',');
            push_str_field(out, "symbol", depth.symbol);
            out.push(b',');
            push_str_field(out, "side", side);
            out.push(b',');
            push_fixed_field(out, "px", price);
            out.push(b',');
            push_fixed_field(out, "qty", qty);
            out.push(b',');
            push_u64_field(out, "seq", depth.final_update_id);
            out.push(b',');
            push_u64_field(out, "first_seq", depth.first_update_id);
            out.push(b',');
            push_u64_field(out, "prev_seq", depth.prev_final_update_id);
            out.push(b',');
            push_u64_field(out, "event_ts_ns", ms_to_ns(depth.event_time_ms));
            out.push(b',');
            push_u64_field(out, "exch_ts_ns", ms_to_ns(depth.transaction_time_ms));
            out.push(b',');
            push_u64_field(out, "recv_ts_ns", recv_ts_ns);
            out.extend_from_slice(b"}\n");
        }
    }
}
