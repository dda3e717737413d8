//! Binance Spot's raw messages as JSON lines: what `tickwire decode --venue binance-spot` prints,
//! the same `quote`, `trade` and `level` lines as `--venue binance-futures`
//! (`venue::binance::json`), with the fields Spot sends. Spot's bookTicker has no times, so its
//! `quote` line has no `event_ts_ns` or `exch_ts_ns`; its depthUpdate has `E` only (the feed's
//! exchange time, so both `event_ts_ns` and `exch_ts_ns` are `E`) and no `pu`, so a `level` line
//! has no `prev_seq`.

use super::decode::{BookTicker, DepthUpdate, PartialDepth};
use crate::event::json::Line;
use crate::venue::binance::decode::Levels;

pub use crate::venue::binance::json::write_trade;

/// One `quote` line (from a bookTicker), newline included.
pub fn write_quote(out: &mut Vec<u8>, venue: &str, ticker: &BookTicker<'_>, recv_ts_ns: u64) {
    let mut line = Line::start(out, "quote", venue, ticker.symbol);
    line.number("seq", ticker.update_id);
    line.number("recv_ts_ns", recv_ts_ns);
    line.decimal("bid_px", ticker.bid_px);
    line.decimal("bid_qty", ticker.bid_qty);
    line.decimal("ask_px", ticker.ask_px);
    line.decimal("ask_qty", ticker.ask_qty);
    line.end();
}

/// One `level` line per price level of a depthUpdate, bids then asks, each in message order.
pub fn write_levels(out: &mut Vec<u8>, venue: &str, depth: &DepthUpdate<'_>, recv_ts_ns: u64) {
    let sides: [(&[u8], Levels<'_>); 2] = [(b"bid", depth.bids), (b"ask", depth.asks)];
    for (side, levels) in sides {
        for (price, qty) in levels {
            let mut line = Line::start(out, "level", venue, depth.symbol);
            line.string("side", side);
            line.decimal("px", price);
            line.decimal("qty", qty);
            line.number("seq", depth.final_update_id);
            line.number("first_seq", depth.first_update_id);
            line.time_ms("event_ts_ns", depth.event_time_ms);
            line.time_ms("exch_ts_ns", depth.event_time_ms);
            line.number("recv_ts_ns", recv_ts_ns);
            line.end();
        }
    }
}

/// One `level` line per level of a partial depth message (`seq` = `lastUpdateId`), named by
/// `symbol` (the stream's, upper-cased by the caller).
pub fn write_partial_levels(
    out: &mut Vec<u8>,
    venue: &str,
    symbol: &[u8],
    partial: &PartialDepth<'_>,
    recv_ts_ns: u64,
) {
    let sides: [(&[u8], Levels<'_>); 2] = [(b"bid", partial.bids), (b"ask", partial.asks)];
    for (side, levels) in sides {
        for (price, qty) in levels {
            let mut line = Line::start(out, "level", venue, symbol);
            line.string("side", side);
            line.decimal("px", price);
            line.decimal("qty", qty);
            line.number("seq", partial.last_update_id);
            line.number("recv_ts_ns", recv_ts_ns);
            line.end();
        }
    }
}

/// The lines of one SBE message (a recorded binary frame), as the JSON streams' lines: `quote`
/// from bestBidAsk (`seq` = `bookUpdateId`, with its event time), one `trade` per trade,
/// `level` lines of a diff (`seq` = `u`, `first_seq` = `U`) or of depth20 (`seq` =
/// `bookUpdateId`). Times are the message's, in ns.
pub fn write_sbe(
    out: &mut Vec<u8>,
    venue: &str,
    message: &super::sbe::Message<'_>,
    recv_ts_ns: u64,
) {
    use super::sbe::Message as Sbe;
    match message {
        Sbe::BestBidAsk(m) => {
            let mut line = Line::start(out, "quote", venue, m.symbol);
            line.number("seq", m.book_update_id);
            line.number("event_ts_ns", m.event_time_ns);
            line.number("recv_ts_ns", recv_ts_ns);
            line.decimal("bid_px", m.bid_px);
            line.decimal("bid_qty", m.bid_qty);
            line.decimal("ask_px", m.ask_px);
            line.decimal("ask_qty", m.ask_qty);
            line.end();
        }
        Sbe::Trades(m) => {
            for trade in m.trades.iter() {
                let mut line = Line::start(out, "trade", venue, m.symbol);
                line.number("trade_id", trade.trade_id);
                line.decimal("px", trade.price);
                line.decimal("qty", trade.qty);
                let aggressor: &[u8] = if trade.buyer_is_maker {
                    b"sell"
                } else {
                    b"buy"
                };
                line.string("aggressor", aggressor);
                line.number("event_ts_ns", m.event_time_ns);
                line.number("exch_ts_ns", m.transact_time_ns);
                line.number("recv_ts_ns", recv_ts_ns);
                line.end();
            }
        }
        Sbe::DepthDiff(m) => {
            for (side, levels) in [(&b"bid"[..], m.bids), (&b"ask"[..], m.asks)] {
                for (price, qty) in levels {
                    let mut line = Line::start(out, "level", venue, m.symbol);
                    line.string("side", side);
                    line.decimal("px", price);
                    line.decimal("qty", qty);
                    line.number("seq", m.final_update_id);
                    line.number("first_seq", m.first_update_id);
                    line.number("event_ts_ns", m.event_time_ns);
                    line.number("exch_ts_ns", m.event_time_ns);
                    line.number("recv_ts_ns", recv_ts_ns);
                    line.end();
                }
            }
        }
        Sbe::DepthSnapshot(m) => {
            for (side, levels) in [(&b"bid"[..], m.bids), (&b"ask"[..], m.asks)] {
                for (price, qty) in levels {
                    let mut line = Line::start(out, "level", venue, m.symbol);
                    line.string("side", side);
                    line.decimal("px", price);
                    line.decimal("qty", qty);
                    line.number("seq", m.book_update_id);
                    line.number("event_ts_ns", m.event_time_ns);
                    line.number("recv_ts_ns", recv_ts_ns);
                    line.end();
                }
            }
        }
    }
}
