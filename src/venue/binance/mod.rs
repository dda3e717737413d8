//! Binance USD-M Futures: the book synchronisation state machine (`sync`) and, beside it, the
//! decoder of its WebSocket market streams. Both are sans-IO: they take decoded values or bytes
//! and return events or requests, and the caller's threads do every read, write and REST call.

pub mod sync;
