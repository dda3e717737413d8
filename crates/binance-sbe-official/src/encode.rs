//! Whole frames made with the generated encoders, from plain values: the helpers the tests,
//! fuzz seeds and benchmarks share. Hand-written (not generated); it only calls the generated
//! API, so each frame's layout is the SBE tool's, not ours.

use crate::best_bid_ask_stream_event_codec::BestBidAskStreamEventEncoder;
use crate::depth_diff_stream_event_codec::encoder as diff;
use crate::depth_snapshot_stream_event_codec::encoder as snapshot;
use crate::trades_stream_event_codec::encoder as trades;
use crate::{message_header_codec, BoolEnum, WriteBuf};

/// Room for the largest frame these helpers are asked for (a `u16` count of levels on each side
/// with a 255-byte symbol fits in 2.1 MB; tests use far less).
fn buffer(levels: usize) -> Vec<u8> {
    vec![0; 512 + levels * 32]
}

/// `BestBidAskStreamEvent`'s fields, as on the wire.
#[derive(Clone, Copy, Debug)]
pub struct BestBidAsk<'s> {
    pub event_time_us: i64,
    pub book_update_id: i64,
    pub price_exponent: i8,
    pub qty_exponent: i8,
    pub bid_price: i64,
    pub bid_qty: i64,
    pub ask_price: i64,
    pub ask_qty: i64,
    pub symbol: &'s str,
}

/// One entry of `TradesStreamEvent`'s `trades` group.
#[derive(Clone, Copy, Debug)]
pub struct Trade {
    pub id: i64,
    pub price: i64,
    pub qty: i64,
    pub is_buyer_maker: bool,
}

/// `TradesStreamEvent`'s fields.
#[derive(Clone, Copy, Debug)]
pub struct Trades<'s> {
    pub event_time_us: i64,
    pub transact_time_us: i64,
    pub price_exponent: i8,
    pub qty_exponent: i8,
    pub trades: &'s [Trade],
    pub symbol: &'s str,
}

/// `DepthDiffStreamEvent`'s fields; `DepthSnapshotStreamEvent` uses them too, with
/// `last_update_id` as its `bookUpdateId` (and no first id).
#[derive(Clone, Copy, Debug)]
pub struct Depth<'s> {
    pub event_time_us: i64,
    pub first_update_id: i64,
    pub last_update_id: i64,
    pub price_exponent: i8,
    pub qty_exponent: i8,
    /// `(price, qty)` mantissas.
    pub bids: &'s [(i64, i64)],
    pub asks: &'s [(i64, i64)],
    pub symbol: &'s str,
}

/// A `BestBidAskStreamEvent` frame, header included.
pub fn best_bid_ask(values: &BestBidAsk<'_>) -> Vec<u8> {
    let mut out = buffer(0);
    let encoder = BestBidAskStreamEventEncoder::default().wrap(
        WriteBuf::new(&mut out),
        message_header_codec::ENCODED_LENGTH,
    );
    let mut header = encoder.header(0);
    let mut encoder = header.parent().expect("the header's parent is set");
    encoder.event_time(values.event_time_us);
    encoder.book_update_id(values.book_update_id);
    encoder.price_exponent(values.price_exponent);
    encoder.qty_exponent(values.qty_exponent);
    encoder.bid_price(values.bid_price);
    encoder.bid_qty(values.bid_qty);
    encoder.ask_price(values.ask_price);
    encoder.ask_qty(values.ask_qty);
    encoder.symbol(values.symbol);
    let len = message_header_codec::ENCODED_LENGTH + encoder.encoded_length();
    out.truncate(len);
    out
}

/// A `TradesStreamEvent` frame.
pub fn trades(values: &Trades<'_>) -> Vec<u8> {
    let mut out = buffer(values.trades.len());
    let encoder = trades::TradesStreamEventEncoder::default().wrap(
        WriteBuf::new(&mut out),
        message_header_codec::ENCODED_LENGTH,
    );
    let mut header = encoder.header(0);
    let mut encoder = header.parent().expect("the header's parent is set");
    encoder.event_time(values.event_time_us);
    encoder.transact_time(values.transact_time_us);
    encoder.price_exponent(values.price_exponent);
    encoder.qty_exponent(values.qty_exponent);
    let count = u32::try_from(values.trades.len()).expect("at most u32::MAX trades");
    let mut group = encoder.trades_encoder(count, trades::TradesEncoder::default());
    for trade in values.trades {
        group.advance().expect("the group's parent is set");
        group.id(trade.id);
        group.price(trade.price);
        group.qty(trade.qty);
        group.is_buyer_maker(if trade.is_buyer_maker {
            BoolEnum::True
        } else {
            BoolEnum::False
        });
    }
    let mut encoder = group.parent().expect("the group's parent is set");
    encoder.symbol(values.symbol);
    let len = message_header_codec::ENCODED_LENGTH + encoder.encoded_length();
    out.truncate(len);
    out
}

fn count16(levels: &[(i64, i64)]) -> u16 {
    u16::try_from(levels.len()).expect("at most u16::MAX levels")
}

/// A `DepthDiffStreamEvent` frame.
pub fn depth_diff(values: &Depth<'_>) -> Vec<u8> {
    let mut out = buffer(values.bids.len() + values.asks.len());
    let encoder = diff::DepthDiffStreamEventEncoder::default().wrap(
        WriteBuf::new(&mut out),
        message_header_codec::ENCODED_LENGTH,
    );
    let mut header = encoder.header(0);
    let mut encoder = header.parent().expect("the header's parent is set");
    encoder.event_time(values.event_time_us);
    encoder.first_book_update_id(values.first_update_id);
    encoder.last_book_update_id(values.last_update_id);
    encoder.price_exponent(values.price_exponent);
    encoder.qty_exponent(values.qty_exponent);
    let mut bids = encoder.bids_encoder(count16(values.bids), diff::BidsEncoder::default());
    for &(price, qty) in values.bids {
        bids.advance().expect("the group's parent is set");
        bids.price(price);
        bids.qty(qty);
    }
    let encoder = bids.parent().expect("the group's parent is set");
    let mut asks = encoder.asks_encoder(count16(values.asks), diff::AsksEncoder::default());
    for &(price, qty) in values.asks {
        asks.advance().expect("the group's parent is set");
        asks.price(price);
        asks.qty(qty);
    }
    let mut encoder = asks.parent().expect("the group's parent is set");
    encoder.symbol(values.symbol);
    let len = message_header_codec::ENCODED_LENGTH + encoder.encoded_length();
    out.truncate(len);
    out
}

/// A `DepthSnapshotStreamEvent` frame (`first_update_id` is not part of it).
pub fn depth_snapshot(values: &Depth<'_>) -> Vec<u8> {
    let mut out = buffer(values.bids.len() + values.asks.len());
    let encoder = snapshot::DepthSnapshotStreamEventEncoder::default().wrap(
        WriteBuf::new(&mut out),
        message_header_codec::ENCODED_LENGTH,
    );
    let mut header = encoder.header(0);
    let mut encoder = header.parent().expect("the header's parent is set");
    encoder.event_time(values.event_time_us);
    encoder.book_update_id(values.last_update_id);
    encoder.price_exponent(values.price_exponent);
    encoder.qty_exponent(values.qty_exponent);
    let mut bids = encoder.bids_encoder(count16(values.bids), snapshot::BidsEncoder::default());
    for &(price, qty) in values.bids {
        bids.advance().expect("the group's parent is set");
        bids.price(price);
        bids.qty(qty);
    }
    let encoder = bids.parent().expect("the group's parent is set");
    let mut asks = encoder.asks_encoder(count16(values.asks), snapshot::AsksEncoder::default());
    for &(price, qty) in values.asks {
        asks.advance().expect("the group's parent is set");
        asks.price(price);
        asks.qty(qty);
    }
    let mut encoder = asks.parent().expect("the group's parent is set");
    encoder.symbol(values.symbol);
    let len = message_header_codec::ENCODED_LENGTH + encoder.encoded_length();
    out.truncate(len);
    out
}
