//! Bybit v5's public WebSocket, spot and linear (venue kinds `bybit-spot` and
//! `bybit-linear`): what its market streams send, turned into normalized events.
//!
//! **Documentation followed:** Bybit's own pages, `bybit-exchange/docs` commit 072c197 of
//! 2026-07-24 (as copied in `../shared/reference/bybit/`): "Orderbook"
//! (`websocket/public/orderbook`: depths, snapshot and delta, `u` and its restart value 1,
//! `seq`, `cts`), "Trade" (`publicTrade`), "Ticker" (`tickers`: linear's snapshot then deltas
//! that carry only what changed, spot's snapshots of 24 h statistics), "All Liquidation", and
//! "Error" (codes). The connection guide ("WebSocket Connect": the entry points, the `ping` op
//! every 20 s, `subscribe`/`unsubscribe` with `args`, the `success`/`ret_msg` answers, the
//! limits on args) is on the published site and not in that copy; what tickwire takes from it
//! is named where it is used (`protocol`), and where the copy is silent the choice is said
//! here, reasoned from the pages (no other source was consulted):
//! - key order: the orderbook page's own note shows `ts` before or after `type` depending on
//!   the topic, so no order is assumed (`decode`);
//! - the `u` chain: each message's `u` is the last one plus one (the page calls it "Update
//!   ID" and gives only the restart rule; a level-1 snapshot repeated after 3 s keeps its `u`,
//!   which a snapshot may); a break is a gap and a resubscription (`book`);
//! - a refused `subscribe` refuses every topic of its request (the answer names none);
//! - trade ids (`i`, a string; a UUID on linear) become 64-bit ids as
//!   [`decode::trade_id`] says;
//! - `tickers` is refused on spot (no best bid and offer, mark or index in spot's ticker), and
//!   `allLiquidation` too (the page covers contracts only); on linear, liquidations are
//!   `Liquidation` events (`S` is the liquidated position's side);
//! - `fundingRate` and `openInterest` are merged with the ticker but not published: the event
//!   model has no kind for a funding rate, and `Statistic`'s quantity is whole units while open
//!   interest is fractional.
//!
//! - `decode` reads one message in place into a typed, borrowed [`decode::Message`];
//! - `book` keeps one instrument's book by the orderbook page's rules;
//! - `feed` puts them together on the decoder thread as a [`crate::venue::feed::Feed`];
//! - `protocol` is the two categories' [`crate::venue::protocol::Protocol`].
//!
//! **Invariant:** `decode`, `book` and `feed` never do I/O and never allocate per message
//! once their buffers have grown; nothing the venue sends can make them panic.

pub mod book;
pub mod decode;
pub mod feed;
pub mod protocol;

#[cfg(test)]
mod tests;
