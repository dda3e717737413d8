//! OKX v5's public WebSocket (venue kind `okx`): what its market channels send, turned into
//! normalized events, the order books verified by the venue's own checksum.
//!
//! **Documentation followed:** OKX's API v5 page (`okx.com/docs-v5/en/`), in the copy of its
//! sections dated 2026-06-15 (no OKX documentation is in `../shared/reference`; the sections
//! were read through a public mirror of the page and its changelog notice): "Order book
//! channel" (`books`, `books5`, `bbo-tbt`, `books-l2-tbt`, `books50-l2-tbt`; "Sequence ID";
//! "Checksum"), "Trades channel", "All trades channel" (`trades-all`, on
//! `/ws/v5/business`), "Tickers channel", "Mark price channel", "Index tickers channel",
//! "Funding rate channel", "Open interest channel", "Liquidation orders channel" (2026-07-19),
//! and the WebSocket overview: "Connect" (the text `ping` after less than 30 s of silence, 3
//! connections a second, 480 `subscribe`/`unsubscribe`/`login` requests an hour a
//! connection), "Connection count limit", "Login", "Subscribe" (`args` of at most 64 KB). The
//! examples of these sections are the module's tests, verbatim. OKX announced on 2026-05-21
//! ("Order Book Channels Checksum Field Deprecation") that from 2026-06-23 in production the
//! `checksum` of `books`, `books-l2-tbt` and `books50-l2-tbt` "will remain present in push
//! messages but will always return 0", and that `seqId`/`prevSeqId` are to be used instead.
//! There is no OKX capture in `../shared/data`.
//!
//! **What a checksum of 0, or none, means.** The page defines the checksum as a signed 32-bit
//! CRC32 and gives no meaning to 0; the deprecation notice says 0 is what every message carries
//! once the field is retired, and users report exactly that (a public recorder's notes: "zero
//! on every frame", snapshot and update alike, measured on BTC-USDT and ETH-USDT). So a checksum
//! of 0 is read as "not given": the book is not verified on that message (the `seqId` chain
//! still is). A true checksum of 0 happens once in 2^32 books; that one check is given up.
//! A message without the field is treated the same. A checksum over a book with fewer than 25
//! levels a side covers the levels there are ("the missing depth data will be ignored").
//!
//! **Where the page is silent, tickwire chooses:**
//! - key order: none is assumed (`decode`); `data` of a book channel holds one row;
//! - a checksum mismatch or a break in the `seqId` chain is a `gap` event and a resubscription
//!   of that one channel and instrument (`unsubscribe` then `subscribe`, whose answer is a new
//!   snapshot), and the book publishes nothing until then (`book`);
//! - `liquidation-orders` is subscribed by `instType` (the page's only argument): SWAP for a
//!   `-SWAP` instrument, OPTION for a `-C`/`-P` one, FUTURES for a dated one, MARGIN for a spot
//!   pair; its rows are routed by their `instId`, and a row for an instrument not in the venue
//!   file is counted as `unknown_symbol`. A detail's position side is `posSide` (`long`: a
//!   long was liquidated, [`Side::Bid`](crate::event::Side::Bid)); in net mode the order's
//!   `side` tells it (`sell` closes a long);
//! - `index-tickers` takes an index, not an instrument: tickwire subscribes the instrument's
//!   underlying (its first two `-` parts, `BTC-USDT` for `BTC-USDT-SWAP`) and publishes its
//!   `idxPx` as the instrument's `index` reference;
//! - `funding-rate` and `open-interest` are decoded and checked (plain decimals, no exponent)
//!   and counted, but not published: the event model has no kind for a funding rate,
//!   `Statistic`'s quantity is whole units, and both carry more decimals than `Fixed` holds
//!   (the page's examples: 16 and 11);
//! - `trades` and `trades-all` trade ids are strings of digits, kept as their number; `seqId`
//!   of `trades` is the event's `venue_seq`;
//! - the login key: `credentials.key_id` is the API key, and the secret the file points at
//!   (`api_key_env` or `api_key_credential`) holds the secret key and the passphrase on two
//!   lines; the signature is the page's (HMAC SHA256 of `timestamp` + `GET` +
//!   `/users/self/verify`, base64).
//!
//! - `decode` reads one message in place into a typed, borrowed [`decode::Message`];
//! - `checksum` computes the venue's CRC32 over the top 25 levels' strings;
//! - `book` keeps one instrument's book by the page's rules, with the strings the checksum
//!   needs in fixed-capacity storage;
//! - `feed` puts them together on the decoder thread as a [`crate::venue::feed::Feed`];
//! - `protocol` is the venue's [`crate::venue::protocol::Protocol`].
//!
//! **Invariant:** `decode`, `checksum`, `book` and `feed` never do I/O and never allocate per
//! message once their buffers have grown; nothing the venue sends can make them panic.

pub mod book;
pub mod checksum;
pub mod decode;
pub mod feed;
pub mod protocol;

#[cfg(test)]
mod tests;
