//! Binance USD-M Futures: what the venue's WebSocket market streams send, turned into typed,
//! borrowed values without allocating.
//!
//! `decode` takes one complete WebSocket text message (the `ws` layer has already unframed it
//! and checked its UTF-8) and returns a [`decode::Message`] whose strings and level arrays point
//! into the caller's buffer. It never does I/O and never allocates, so the decoder thread can run
//! it on bytes still sitting in the SPSC byte ring. Message formats follow the Binance USD-M
//! "Websocket Market Streams" documentation; the real capture in
//! `../shared/data/binance-futures/` is the ground truth the tests check against.
//!
//! **Invariant:** nothing the venue sends can make this module panic or allocate; a message it
//! cannot read is a [`decode::DecodeError`], which the caller counts and skips.

pub mod decode;
