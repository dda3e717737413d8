//! Binance's raw messages as JSON lines: what `tickwire decode --venue binance-futures` prints
//! for bookTicker, trade and depthUpdate messages, with the fields only the raw message has
//! (its event time, and a level's `first_seq` and `prev_seq`). Normalized events use
//! [`crate::event::json`], whose [`Line`] writer these lines share.

use super::decode::{BookTicker, DepthUpdate, TradePrint};
use crate::event::json::Line;

/// One `quote` line (from a bookTicker), newline included.
pub fn write_quote(out: &mut Vec<u8>, venue: &str, ticker: &BookTicker<'_>, recv_ts_ns: u64) {
    let mut line = Line::start(out, "quote", venue, ticker.symbol);
    line.number("seq", ticker.update_id);
    line.time_ms("event_ts_ns", ticker.event_time_ms);
    line.time_ms("exch_ts_ns", ticker.transaction_time_ms);
    line.number("recv_ts_ns", recv_ts_ns);
    line.decimal("bid_px", ticker.bid_px);
    line.decimal("bid_qty", ticker.bid_qty);
    line.decimal("ask_px", ticker.ask_px);
    line.decimal("ask_qty", ticker.ask_qty);
    line.end();
}

/// One `trade` line (from a trade or an aggTrade), newline included.
pub fn write_trade(out: &mut Vec<u8>, venue: &str, trade: &TradePrint<'_>, recv_ts_ns: u64) {
    let mut line = Line::start(out, "trade", venue, trade.symbol);
    line.number("trade_id", trade.trade_id);
    line.decimal("px", trade.price);
    line.decimal("qty", trade.qty);
    // `m`: the buyer was the maker, so the taker (the aggressor) sold.
    let aggressor: &[u8] = if trade.buyer_is_maker {
        b"sell"
    } else {
        b"buy"
    };
    line.string("aggressor", aggressor);
    line.time_ms("event_ts_ns", trade.event_time_ms);
    line.time_ms("exch_ts_ns", trade.trade_time_ms);
    line.number("recv_ts_ns", recv_ts_ns);
    line.end();
}

/// One `level` line per price level of a depthUpdate, bids then asks, each in message order.
pub fn write_levels(out: &mut Vec<u8>, venue: &str, depth: &DepthUpdate<'_>, recv_ts_ns: u64) {
    let sides: [(&[u8], _); 2] = [(b"bid", depth.bids), (b"ask", depth.asks)];
    for (side, levels) in sides {
        for (price, qty) in levels {
            let mut line = Line::start(out, "level", venue, depth.symbol);
            line.string("side", side);
            line.decimal("px", price);
            line.decimal("qty", qty);
            line.number("seq", depth.final_update_id);
            line.number("first_seq", depth.first_update_id);
            line.number("prev_seq", depth.prev_final_update_id);
            line.time_ms("event_ts_ns", depth.event_time_ms);
            line.time_ms("exch_ts_ns", depth.transaction_time_ms);
            line.number("recv_ts_ns", recv_ts_ns);
            line.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::venue::binance::decode::{decode, Message};

    #[test]
    fn a_line_is_valid_json_whatever_the_venue_name_holds() {
        let bytes = br#"{"e":"trade","E":1,"T":2,"s":"BTCUSDT","t":3,"p":"1.5","q":"2","X":"MARKET","m":false}"#;
        let Ok(Message::Trade(trade)) = decode(bytes) else {
            panic!("a trade");
        };
        let mut out = Vec::new();
        write_trade(&mut out, "a\"b\\c\u{1}", &trade, 9);
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["venue"], "a\"b\\c\u{1}");
        assert_eq!(json["aggressor"], "buy");
        assert_eq!(json["event_ts_ns"], 1_000_000);
        assert!(out.ends_with(b"}\n"));
    }
}
