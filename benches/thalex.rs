//! The Thalex message path, tickwire against the design a published performance audit of a
//! Thalex Rust SDK timed: the same input bytes, both designs, one run.
//!
//! Two scenarios, each from the message's bytes to the value in the hands of whoever waits for
//! it:
//!
//! - **Ticker to a subscriber** (`thalex/ticker/{tickwire,audited}/{1,10,100}`): one real-shaped
//!   `ticker.BTC-PERPETUAL.100ms` notification (api.yaml's `Ticker` keys in the schema's order,
//!   a perpetual's fields, floats with up to 17 significant digits as Thalex prints them: a
//!   `Quote`, a `Reference(Mark)` and a `Reference(Index)`), with 1, 10 or 100 live
//!   subscriptions, one of which it matches (`BTC-PERPETUAL` plus `BTC-27JUN25-<strike>-C`
//!   options). `thalex/ticker-audit/...` delivers the audit's own 165-byte ticker instead, and
//!   `thalex/ticker-varied/...` 64 real-shaped tickers in turn, each with other values of other
//!   lengths (`varied_tickers`): the single ticker, sent again and again, lets the CPU learn
//!   every branch of the number loops, which a live feed's tickers do not allow.
//! - **RPC response to a pending request** (`thalex/rpc/{tickwire,audited}`): the answer to
//!   request 12345, while four requests (12345 among them) await theirs.
//!
//! **tickwire** runs its own code from the crate, called as the decoder stage calls it
//! (`pipeline/decoder_stage.rs`: through `dyn Feed`):
//!
//! - Ticker: `ThalexFeed::on_message` into an `EventSink` over the decoder-to-strategy event
//!   ring (the appliance's default `rings.event_ring_slots`), `publish`, then the strategy's side
//!   pops every event (`try_pop` until empty: a `Quote` and a `Reference(Mark)`). Delivery is
//!   the event read from the ring; producer and consumer run on the same thread here, so the
//!   number has no cross-core cache-line transfer in it (see the ring benches for that).
//! - RPC: `on_message` decodes the response into a `VenueReply`; `take_reply` hands it over and,
//!   as the decoder stage does, it crosses the reply ring to the control thread (one
//!   `try_push`, one `try_pop`, same thread here). The control thread's pending check then
//!   mirrors `lifecycle::Connection::batch_of`/`awaits` and `on_ack`
//!   (`control/links.rs`): a linear scan of the connection's short `outstanding:
//!   Vec<(id, deadline, batch)>`, then `retain` without the answered id. Request 12345 is pushed
//!   back at the end of every iteration (inside the timing: it stands for sending the next
//!   request), so every iteration finds it pending, always last of the four.
//!
//! **audited** reimplements the SDK's path as the audit describes it: a `serde_json::Value`
//! DOM parse, a `String` copy of the routing key and a `tokio::sync::Mutex` around a `HashMap`
//! of channel senders.
//!
//! - Ticker: parse to `Value`, read `channel_name` as `&str` and `.to_string()` it, lock the
//!   `Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>` (one sender per subscription, the
//!   same channel names as tickwire's routes), look the sender up, send the `notification`
//!   value (taken out of the parsed message); the subscriber `try_recv`s it and reads the best
//!   bid.
//! - RPC: parse to `Value`, read `id` as `u64`, lock the
//!   `Mutex<HashMap<u64, oneshot::Sender<Value>>>` (four pending requests), remove 12345's
//!   sender, send the `result` value; the waiter `try_recv`s it. Then a fresh `oneshot` pair is
//!   made and its sender registered under the lock for the next iteration: in that design every
//!   request pays for a pair (an `Arc` allocation) and a second lock, so it stays in the timing.
//! - Locks use `try_lock()`: the bench runs outside a runtime, and uncontended, `lock().await`
//!   takes the same semaphore fast path (one compare-and-swap) plus the poll of its future, so if
//!   anything the audited figures here are slightly low.
//!
//! Every value each iteration produces (events, replies, `Value`s, `String`s, channel nodes) is
//! dropped inside the timing, as it is in either design.
//!
//! Before timing, both designs run on the inputs and the bench panics unless: the real-shaped
//! ticker gives a `Quote` (bid 76000, ask 76001, the exchange time of `mark_timestamp`), a
//! `Reference(Mark)` 76000.717914438 and a `Reference(Index)` 76283.259166667 (the venue's
//! 17-digit floats rounded to 1e-9), the audit's ticker a `Quote` (50000.5, 50001) and a
//! `Reference(Mark)` 50000.6, each varied ticker the values computed from the digits it was
//! generated with (marks and indices rounded to nine decimals by the bench's own rounding), for
//! BTC-PERPETUAL's instrument id, and the audited subscriber of
//! BTC-PERPETUAL (and no other) receives the same prices (bid and ask through `Fixed`, the mark
//! as the nearest float); the response
//! gives one reply for 12345 with no error, the audited waiter receives `{"status":"ok"}`, and
//! both leave four requests pending.
//!
//! Run with `cargo bench --bench thalex`; at the end it prints a table of Criterion's medians
//! for this run and the ratio audited / tickwire.
//!
//! For instruction counts, `THALEX_PASS=<scenario>:<iterations>` skips Criterion and runs one
//! scenario (`tickwire-ticker-<n>`, `audited-ticker-<n>`, `tickwire-ticker-audit-<n>`,
//! `audited-ticker-audit-<n>`, `tickwire-ticker-varied-<n>`, `audited-ticker-varied-<n>`,
//! `tickwire-rpc`, `audited-rpc`) that
//! many times inside `measured_pass`, after a warm-up iteration:
//!
//! ```text
//! cargo bench --bench thalex --no-run   # prints the binary's path
//! THALEX_PASS=tickwire-ticker-10:100000 valgrind --tool=callgrind \
//!     --toggle-collect='*measured_pass*' target/release/deps/thalex-<hash>
//! ```
//!
//! For the ratio on a machine whose speed drifts from second to second (a shared VM),
//! `THALEX_RATIO=<ticker|ticker-varied|ticker-audit|rpc>[:<batches>]` checks both designs as
//! above, then times them in alternating batches of about a millisecond in one process and
//! prints the median and quartiles of the batches' ratios (audited / tickwire).

use criterion::{criterion_group, BenchmarkId, Criterion};
use serde_json::Value;
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tickwire::config::RingsConfig;
use tickwire::event::{Body, Event, ReferenceKind};
use tickwire::fixed::Fixed;
use tickwire::net::ConnId;
use tickwire::ring::{Consumer, Producer};
use tickwire::venue::feed::{EventSink, Feed, FeedCounters, ReplyKind, VenueReply};
use tickwire::venue::thalex::feed::{FeedConfig, ThalexFeed};
use tokio::sync::{mpsc, oneshot, Mutex};

/// A real-shaped ticker: api.yaml's `Ticker` keys in the schema's order, the fields a
/// perpetual's ticker carries, marks, indices and rates printed as Thalex prints them (binary
/// floats, up to 17 significant digits; a live capture: `"mark_price":53.21791443839902`,
/// `"index":76283.25916666667`, `"mark_timestamp":1776715497.7188172`).
const REAL_TICKER: &[u8] = br#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":76000,"best_bid_amount":0.26,"best_ask_price":76001,"best_ask_amount":0.25,"last_price":76000.5,"mark_price":76000.71791443839,"mark_timestamp":1776715497.7188172,"delta":1,"index":76283.25916666667,"volume_24h":1234.56,"value_24h":93950717.1234567,"low_price_24h":75120,"high_price_24h":77001,"change_24h":-320,"collar_low":75240.39913435821,"collar_high":76760.66522393041,"open_interest":1534.18,"funding_rate":0.00001237751098016,"funding_mark":0.2012345678901234}}"#;
/// The audit's ticker, byte for byte.
const AUDIT_TICKER: &[u8] = br#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_ask_price":50001.0,"best_bid_price":50000.5,"mark_price":50000.6,"mark_timestamp":1234567890.123}}"#;
const AUDIT_TICKER_BYTES: usize = 165;

/// Which ticker a scenario delivers.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Real,
    Audit,
    /// [`VARIED_TICKERS`] real-shaped tickers, each with other values and other lengths, one
    /// after the other ([`varied_tickers`]).
    Varied,
}

/// What a ticker must give: bid, ask, mark, index (if any), exchange time.
type Expected = (Fixed, Fixed, Fixed, Option<Fixed>, u64);

/// How many tickers `Shape::Varied` cycles through.
const VARIED_TICKERS: usize = 64;

impl Shape {
    const ALL: [Shape; 3] = [Shape::Real, Shape::Audit, Shape::Varied];

    /// The tickers a scenario delivers in turn, each with what it must give.
    fn tickers(self) -> Vec<(Vec<u8>, Expected)> {
        match self {
            Shape::Real | Shape::Audit => {
                let bytes = match self {
                    Shape::Real => REAL_TICKER,
                    _ => AUDIT_TICKER,
                };
                vec![(bytes.to_vec(), self.expected())]
            }
            Shape::Varied => varied_tickers(VARIED_TICKERS),
        }
    }

    /// The tickers' bytes alone.
    fn bytes(self) -> Vec<Vec<u8>> {
        self.tickers().into_iter().map(|(bytes, _)| bytes).collect()
    }

    /// The Criterion group and scenario prefix.
    fn group(self) -> &'static str {
        match self {
            Shape::Real => "ticker",
            Shape::Audit => "ticker-audit",
            Shape::Varied => "ticker-varied",
        }
    }

    /// What the one ticker of `Real` and `Audit` must give.
    fn expected(self) -> Expected {
        match self {
            Shape::Real => (
                price("76000"),
                price("76001"),
                // 76000.71791443839 and 76283.25916666667 rounded to nine decimals.
                price("76000.717914438"),
                Some(price("76283.259166667")),
                1_776_715_497_718_817_200,
            ),
            Shape::Audit | Shape::Varied => (
                price("50000.5"),
                price("50001"),
                price("50000.6"),
                None,
                1_234_567_890_123_000_000,
            ),
        }
    }
}

/// `count` real-shaped tickers (`REAL_TICKER`'s keys in its order) whose every value differs
/// from one ticker to the next, in value and in length: integers or halves for prices, one to
/// four decimals for amounts, 9 to 14 for marks, indices and collars (as Thalex prints its
/// binary floats: no trailing zeros), negative changes, rates with up to 18 decimals. The
/// bench's single ticker, sent again and again, lets the CPU learn every branch of the byte
/// loops; a live feed's tickers do not repeat, and these do not either. A fixed seed, so every
/// run gets the same tickers. What each must give is computed from the generated digits here,
/// not by tickwire's reader (marks and indices rounded to nine decimals, ties to even).
fn varied_tickers(count: usize) -> Vec<(Vec<u8>, Expected)> {
    let mut rng = Lcg(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(count);
    for i in 0..count as u64 {
        let bid = 76_000 + rng.below(2_000);
        let bid_text = if rng.below(2) == 1 {
            format!("{bid}.5")
        } else {
            bid.to_string()
        };
        let ask_text = (bid + 1 + rng.below(3)).to_string();
        let bid_amount = format!("{}.{}", rng.below(3), rng.fraction(1, 4));
        let ask_amount = format!("{}.{}", rng.below(3), rng.fraction(1, 4));
        let last = format!("{}.5", bid + rng.below(2));
        let mark_int = bid + rng.below(3);
        let mark_fraction = rng.fraction(9, 14);
        let ts_int = 1_776_715_497 + i;
        let ts_fraction = rng.fraction(4, 7);
        let index_int = 76_000 + rng.below(2_000);
        let index_fraction = rng.fraction(9, 14);
        let delta = if rng.below(4) == 0 { "0.99" } else { "1" };
        let volume = format!("{}.{}", 1_000 + rng.below(9_000), rng.fraction(1, 2));
        let value = format!(
            "{}.{}",
            10_000_000 + rng.below(90_000_000),
            rng.fraction(5, 7)
        );
        let low = 74_000 + rng.below(1_000);
        let high = 77_000 + rng.below(1_000);
        let change = 1 + rng.below(999);
        let collar_low = format!("{}.{}", 75_000 + rng.below(500), rng.fraction(9, 13));
        let collar_high = format!("{}.{}", 76_500 + rng.below(500), rng.fraction(9, 13));
        let open_interest = format!("{}.{}", 1_000 + rng.below(1_000), rng.fraction(1, 2));
        let rate = rng.fraction(10, 14);
        let funding = rng.fraction(14, 16);
        let text = format!(
            "{{\"channel_name\":\"ticker.BTC-PERPETUAL.100ms\",\"notification\":{{\
             \"best_bid_price\":{bid_text},\"best_bid_amount\":{bid_amount},\
             \"best_ask_price\":{ask_text},\"best_ask_amount\":{ask_amount},\
             \"last_price\":{last},\"mark_price\":{mark_int}.{mark_fraction},\
             \"mark_timestamp\":{ts_int}.{ts_fraction},\"delta\":{delta},\
             \"index\":{index_int}.{index_fraction},\"volume_24h\":{volume},\
             \"value_24h\":{value},\"low_price_24h\":{low},\"high_price_24h\":{high},\
             \"change_24h\":-{change},\"collar_low\":{collar_low},\
             \"collar_high\":{collar_high},\"open_interest\":{open_interest},\
             \"funding_rate\":0.0000{rate},\"funding_mark\":0.{funding}}}}}"
        );
        let expected = (
            price(&bid_text),
            price(&ask_text),
            rounded(mark_int, &mark_fraction),
            Some(rounded(index_int, &index_fraction)),
            ts_int * 1_000_000_000 + rounded(0, &ts_fraction).raw() as u64,
        );
        out.push((text.into_bytes(), expected));
    }
    out
}

/// A linear congruential generator (Knuth's MMIX constants): the varied tickers' fixed seed.
struct Lcg(u64);

impl Lcg {
    /// A number below `below`.
    fn below(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }

    /// `least` to `most` random digits, trailing zeros dropped (one digit at least), as a
    /// binary float's shortest form ends.
    fn fraction(&mut self, least: u64, most: u64) -> String {
        let digits = least + self.below(most - least + 1);
        let mut text: String = (0..digits)
            .map(|_| char::from(b'0' + self.below(10) as u8))
            .collect();
        while text.len() > 1 && text.ends_with('0') {
            text.pop();
        }
        text
    }
}

/// `integer.fraction` rounded to nine decimals, ties to even: the reference the varied tickers'
/// marks and indices are held to.
fn rounded(integer: u64, fraction: &str) -> Fixed {
    let digit = |at: usize| u64::from(fraction.as_bytes().get(at).map_or(0, |byte| byte - b'0'));
    let mut kept = (0..9).fold(0u64, |value, at| value * 10 + digit(at));
    let round = digit(9);
    let sticky = fraction.bytes().skip(10).any(|byte| byte != b'0');
    if round > 5 || (round == 5 && (sticky || kept % 2 == 1)) {
        kept += 1;
    }
    Fixed((integer * 1_000_000_000 + kept) as i64)
}
/// The audit's RPC response, byte for byte.
const RESPONSE: &[u8] = br#"{"id":12345,"jsonrpc":"2.0","result":{"status":"ok"}}"#;

const INSTRUMENT: &str = "BTC-PERPETUAL";
const CHANNEL_TEMPLATE: &str = "ticker.100ms";
const PENDING_ID: u64 = 12345;
/// The other requests awaiting an answer, beside `PENDING_ID`.
const OTHER_PENDING_IDS: [u64; 3] = [12342, 12343, 12344];
const SUBSCRIPTIONS: [usize; 3] = [1, 10, 100];
const CONN: ConnId = 0;
const RECV_TS_NS: u64 = 1_700_000_000_000_000_000;
/// A request's ack deadline; never reached here.
const DEADLINE_NS: u64 = u64::MAX;
/// The decoder-to-control reply ring (`pipeline/rings.rs`, `VENUE_REPLY_SLOTS`).
const REPLY_RING_SLOTS: usize = 1024;

/// `BTC-PERPETUAL` and `n - 1` call options.
fn symbols(n: usize) -> Vec<String> {
    std::iter::once(INSTRUMENT.to_owned())
        .chain((1..n).map(|i| format!("BTC-27JUN25-{}-C", 50_000 + 1_000 * i)))
        .collect()
}

fn feed(symbols: Vec<String>) -> (ThalexFeed, FeedCounters) {
    ThalexFeed::new(FeedConfig {
        venue_id: 0,
        venue_name: "thalex".into(),
        symbols,
        channels: vec![CHANNEL_TEMPLATE.into()],
        instrument_base: 0,
    })
}

fn price(text: &str) -> Fixed {
    Fixed::parse_str(text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// A JSON number as `Fixed`, through its shortest decimal form (`50001.0`, `50000.5`).
fn value_price(value: &Value, key: &str) -> Fixed {
    let number = value
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{key} missing in {value}"));
    price(&number.to_string())
}

/// The ticker at `next`, moving `next` on to the one after it (back to the first after the last).
#[inline(always)]
fn in_turn<'a>(tickers: &'a [Vec<u8>], next: &mut usize) -> &'a [u8] {
    let ticker = &tickers[*next];
    *next = if *next + 1 == tickers.len() {
        0
    } else {
        *next + 1
    };
    ticker
}

// ---- tickwire ----

/// The decoder stage's side (feed, event ring producer) and the strategy's (consumer).
struct TickwireTicker {
    /// The tickers delivered in turn (one, but for `Shape::Varied`), and the next one's index.
    tickers: Vec<Vec<u8>>,
    next: usize,
    feed: ThalexFeed,
    _counters: FeedCounters,
    events: Producer<Event>,
    lost: bool,
    strategy: Consumer<Event>,
}

impl TickwireTicker {
    fn new(subscriptions: usize, shape: Shape) -> TickwireTicker {
        let (feed, counters) = feed(symbols(subscriptions));
        let (events, strategy) =
            tickwire::ring::ring::<Event>(RingsConfig::default().event_ring_slots);
        TickwireTicker {
            tickers: shape.bytes(),
            next: 0,
            feed,
            _counters: counters,
            events,
            lost: false,
            strategy,
        }
    }

    /// One ticker from bytes to the strategy; returns the events it read.
    #[inline]
    fn deliver(&mut self, mut on_event: impl FnMut(Event)) -> usize {
        // The stage holds its feeds as `Box<dyn Feed>`: keep the call indirect.
        let feed: &mut dyn Feed = black_box(&mut self.feed);
        let mut sink = EventSink::new(&mut self.events, &mut self.lost);
        let ticker = in_turn(&self.tickers, &mut self.next);
        feed.on_message(CONN, RECV_TS_NS, black_box(ticker), &mut sink);
        sink.publish();
        let mut delivered = 0;
        while let Some(event) = self.strategy.try_pop() {
            on_event(event);
            delivered += 1;
        }
        delivered
    }
}

/// The decoder stage's side (feed, reply ring producer) and the control thread's (reply ring
/// consumer, the connection's outstanding requests).
struct TickwireRpc {
    feed: ThalexFeed,
    _counters: FeedCounters,
    events: Producer<Event>,
    lost: bool,
    _strategy: Consumer<Event>,
    replies: Producer<VenueReply>,
    control: Consumer<VenueReply>,
    /// `lifecycle::Connection::outstanding`: (id, deadline, batch).
    outstanding: Vec<(u64, u64, usize)>,
}

impl TickwireRpc {
    fn new() -> TickwireRpc {
        let (feed, counters) = feed(symbols(1));
        let (events, strategy) =
            tickwire::ring::ring::<Event>(RingsConfig::default().event_ring_slots);
        let (replies, control) = tickwire::ring::ring::<VenueReply>(REPLY_RING_SLOTS);
        let mut outstanding = Vec::with_capacity(8);
        for (batch, id) in OTHER_PENDING_IDS
            .into_iter()
            .chain([PENDING_ID])
            .enumerate()
        {
            outstanding.push((id, DEADLINE_NS, batch));
        }
        TickwireRpc {
            feed,
            _counters: counters,
            events,
            lost: false,
            _strategy: strategy,
            replies,
            control,
            outstanding,
        }
    }

    /// One response from bytes to the pending request it answers; returns the last reply that
    /// answered a pending request, with its batch.
    #[inline]
    fn respond(&mut self) -> Option<(VenueReply, usize)> {
        let feed: &mut dyn Feed = black_box(&mut self.feed);
        let mut sink = EventSink::new(&mut self.events, &mut self.lost);
        feed.on_message(CONN, RECV_TS_NS, black_box(RESPONSE), &mut sink);
        sink.publish();
        // The decoder stage relays replies to the control thread at once.
        while let Some(reply) = feed.take_reply() {
            let _ = self.replies.try_push(reply);
        }
        // The control thread: `Connection::batch_of` (the scan `awaits` makes too), then
        // `on_ack`'s `retain`.
        let mut answered = None;
        while let Some(reply) = self.control.try_pop() {
            let Some(batch) = self
                .outstanding
                .iter()
                .find(|&&(pending, _, _)| pending == reply.id)
                .map(|&(_, _, batch)| batch)
            else {
                continue;
            };
            self.outstanding
                .retain(|&(pending, _, _)| pending != reply.id);
            answered = Some((reply, batch));
        }
        // The next request goes out: `Connection::send_due`'s push.
        if let Some((_, batch)) = answered {
            self.outstanding.push((PENDING_ID, DEADLINE_NS, batch));
        }
        answered
    }
}

// ---- The audited design ----

struct AuditedTicker {
    /// As [`TickwireTicker`]'s.
    tickers: Vec<Vec<u8>>,
    next: usize,
    subscriptions: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
    /// BTC-PERPETUAL's subscriber.
    subscriber: mpsc::UnboundedReceiver<Value>,
    /// Every other subscriber, kept alive (their channels stay open, as live subscriptions').
    others: Vec<mpsc::UnboundedReceiver<Value>>,
}

impl AuditedTicker {
    fn new(subscriptions: usize, shape: Shape) -> AuditedTicker {
        let names = ThalexFeed::channel_names(&symbols(subscriptions), &[CHANNEL_TEMPLATE.into()]);
        let mut senders = HashMap::new();
        let mut subscriber = None;
        let mut others = Vec::new();
        for (index, name) in names.into_iter().enumerate() {
            let (sender, receiver) = mpsc::unbounded_channel();
            senders.insert(name, sender);
            if index == 0 {
                subscriber = Some(receiver);
            } else {
                others.push(receiver);
            }
        }
        AuditedTicker {
            tickers: shape.bytes(),
            next: 0,
            subscriptions: Mutex::new(senders),
            subscriber: subscriber.expect("BTC-PERPETUAL is the first symbol"),
            others,
        }
    }

    /// One ticker from bytes to the subscriber; returns the notification it received.
    #[inline]
    fn deliver(&mut self) -> Option<Value> {
        let ticker = in_turn(&self.tickers, &mut self.next);
        let mut message: Value = serde_json::from_slice(black_box(ticker)).ok()?;
        let channel = message.get("channel_name")?.as_str()?.to_string();
        let notification = message.get_mut("notification")?.take();
        {
            let subscriptions = self.subscriptions.try_lock().ok()?;
            subscriptions.get(&channel)?.send(notification).ok()?;
        }
        self.subscriber.try_recv().ok()
    }
}

struct AuditedRpc {
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    /// The caller awaiting request 12345.
    waiter: oneshot::Receiver<Value>,
    /// The callers awaiting the other requests.
    _others: Vec<oneshot::Receiver<Value>>,
}

impl AuditedRpc {
    fn new() -> AuditedRpc {
        let mut pending = HashMap::new();
        let mut others = Vec::new();
        for id in OTHER_PENDING_IDS {
            let (sender, receiver) = oneshot::channel();
            pending.insert(id, sender);
            others.push(receiver);
        }
        let (sender, waiter) = oneshot::channel();
        pending.insert(PENDING_ID, sender);
        AuditedRpc {
            pending: Mutex::new(pending),
            waiter,
            _others: others,
        }
    }

    /// One response from bytes to the caller awaiting it; returns what the caller received.
    #[inline]
    fn respond(&mut self) -> Option<Value> {
        let mut message: Value = serde_json::from_slice(black_box(RESPONSE)).ok()?;
        let id = message.get("id")?.as_u64()?;
        let result = message.get_mut("result")?.take();
        let sender = self.pending.try_lock().ok()?.remove(&id)?;
        sender.send(result).ok()?;
        let answer = self.waiter.try_recv().ok();
        // The next request: a fresh pair, its sender registered under the lock.
        let (sender, waiter) = oneshot::channel();
        self.pending.try_lock().ok()?.insert(PENDING_ID, sender);
        self.waiter = waiter;
        answer
    }

    fn pending(&self) -> usize {
        self.pending.try_lock().map_or(0, |pending| pending.len())
    }
}

// ---- Checks before timing ----

fn check_ticker(subscriptions: usize, shape: Shape) {
    assert_eq!(
        AUDIT_TICKER.len(),
        AUDIT_TICKER_BYTES,
        "the audit's ticker is 165 bytes"
    );
    let names = ThalexFeed::channel_names(&symbols(subscriptions), &[CHANNEL_TEMPLATE.into()]);
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), subscriptions, "one route per subscription");
    let channel = format!("ticker.{INSTRUMENT}.100ms");
    assert!(names.contains(&channel), "the ticker matches a route");

    let mut tickwire = TickwireTicker::new(subscriptions, shape);
    let instrument_id = tickwire
        .feed
        .symbols()
        .iter()
        .position(|symbol| symbol == INSTRUMENT)
        .expect("BTC-PERPETUAL is configured") as u32;
    let tickers = shape.tickers();
    // The second round runs with the stream's owner connection already set, as every later one
    // (each round delivers every ticker of the shape, in turn).
    for (round, (_, expected)) in tickers.iter().chain(&tickers).enumerate() {
        let (bid, ask, mark, index, exchange_ts_ns) = *expected;
        let mut events = Vec::new();
        let delivered = tickwire.deliver(|event| events.push(event));
        assert_eq!(
            delivered,
            2 + usize::from(index.is_some()),
            "{shape:?} round {round}: a quote, a mark and the index if the ticker has one"
        );
        for event in &events {
            assert_eq!(event.header.instrument_id, instrument_id);
            assert_eq!(event.header.recv_ts_ns, RECV_TS_NS);
            assert_eq!(event.header.exchange_ts_ns, exchange_ts_ns);
        }
        match events[0].body() {
            Body::Quote(quote) => {
                assert_eq!((quote.bid_px, quote.ask_px), (bid, ask), "round {round}");
            }
            other => panic!("round {round}: expected a quote, got {other:?}"),
        }
        match events[1].body() {
            Body::Reference(reference) => {
                assert_eq!(reference.kind(), ReferenceKind::Mark);
                assert_eq!(reference.price, mark, "round {round}");
            }
            other => panic!("round {round}: expected a mark price, got {other:?}"),
        }
        if let Some(index) = index {
            match events[2].body() {
                Body::Reference(reference) => {
                    assert_eq!(reference.kind(), ReferenceKind::Index);
                    assert_eq!(reference.price, index, "round {round}");
                }
                other => panic!("round {round}: expected an index, got {other:?}"),
            }
        }
    }

    let mut audited = AuditedTicker::new(subscriptions, shape);
    let nearest = |fixed: Fixed| fixed.to_f64();
    for (round, (_, expected)) in tickers.iter().chain(&tickers).enumerate() {
        let (bid, ask, mark, _, _) = *expected;
        let notification = audited
            .deliver()
            .expect("the subscriber receives the ticker");
        let float = |key: &str| {
            notification
                .get(key)
                .and_then(Value::as_f64)
                .unwrap_or_else(|| panic!("{key} missing"))
        };
        assert_eq!(value_price(&notification, "best_bid_price"), bid);
        assert_eq!(value_price(&notification, "best_ask_price"), ask);
        // The audited design keeps binary floats: the nearest f64 to tickwire's decimal.
        assert!(
            (float("mark_price") - nearest(mark)).abs() < 1e-6,
            "round {round}"
        );
        for other in &mut audited.others {
            assert!(
                other.try_recv().is_err(),
                "only BTC-PERPETUAL's subscriber receives"
            );
        }
    }
    let (bid, ask, mark, _, _) = tickers[0].1;
    eprintln!(
        "thalex: {shape:?} ticker ({} in turn) with {subscriptions} subscriptions: both deliver \
         bid {bid}, ask {ask}, mark {mark} for {INSTRUMENT} (the first), and what each must",
        tickers.len()
    );
}

fn check_rpc() {
    let mut tickwire = TickwireRpc::new();
    let mut audited = AuditedRpc::new();
    for round in 0..2 {
        let (reply, batch) = tickwire.respond().expect("a reply to a pending request");
        assert_eq!(reply.id, PENDING_ID, "round {round}");
        assert_eq!(reply.error, None, "round {round}");
        assert_eq!(reply.kind, ReplyKind::Response, "round {round}");
        assert_eq!(batch, OTHER_PENDING_IDS.len(), "round {round}");
        assert_eq!(tickwire.outstanding.len(), OTHER_PENDING_IDS.len() + 1);
        assert!(
            tickwire.control.try_pop().is_none(),
            "one reply per response"
        );

        let answer = audited.respond().expect("the waiter receives the result");
        assert_eq!(
            answer,
            serde_json::json!({ "status": "ok" }),
            "round {round}"
        );
        assert_eq!(audited.pending(), OTHER_PENDING_IDS.len() + 1);
    }
    eprintln!("thalex: rpc: both answer request {PENDING_ID} with no error; four stay pending");
}

// ---- Timing ----

fn thalex(c: &mut Criterion) {
    for shape in Shape::ALL {
        for subscriptions in SUBSCRIPTIONS {
            check_ticker(subscriptions, shape);
        }
    }
    check_rpc();

    for shape in Shape::ALL {
        let mut group = c.benchmark_group(format!("thalex/{}", shape.group()));
        group.sample_size(50);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        for subscriptions in SUBSCRIPTIONS {
            let mut tickwire = TickwireTicker::new(subscriptions, shape);
            group.bench_function(BenchmarkId::new("tickwire", subscriptions), |b| {
                b.iter(|| {
                    tickwire.deliver(|event| {
                        black_box(event);
                    })
                })
            });
            let mut audited = AuditedTicker::new(subscriptions, shape);
            group.bench_function(BenchmarkId::new("audited", subscriptions), |b| {
                b.iter(|| {
                    let notification = audited.deliver();
                    black_box(
                        notification
                            .as_ref()
                            .and_then(|value| value.get("best_bid_price"))
                            .and_then(Value::as_f64),
                    )
                })
            });
        }
        group.finish();
    }

    let mut group = c.benchmark_group("thalex/rpc");
    group.sample_size(50);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let mut tickwire = TickwireRpc::new();
    group.bench_function("tickwire", |b| {
        b.iter(|| tickwire.respond().map(|(reply, _)| reply.id))
    });
    let mut audited = AuditedRpc::new();
    group.bench_function("audited", |b| b.iter(|| audited.respond()));
    group.finish();
}

// ---- The summary table ----

/// Where Criterion writes (its own rule: `CRITERION_HOME`, else the cargo target directory).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("criterion")
}

/// Median ns of every `thalex/...` benchmark Criterion saved since `since`, by its full id.
fn medians(dir: &Path, since: SystemTime, out: &mut HashMap<String, f64>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            medians(&path, since, out);
            continue;
        }
        let is_new = path.parent().and_then(Path::file_name) == Some("new".as_ref());
        if !is_new || path.file_name() != Some("benchmark.json".as_ref()) {
            continue;
        }
        let fresh = std::fs::metadata(&path)
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified >= since);
        let read = |path: &Path| -> Option<Value> {
            serde_json::from_slice(&std::fs::read(path).ok()?).ok()
        };
        let (Some(meta), Some(estimates)) =
            (read(&path), read(&path.with_file_name("estimates.json")))
        else {
            continue;
        };
        let Some(id) = meta.get("full_id").and_then(Value::as_str) else {
            continue;
        };
        if fresh && id.starts_with("thalex/") {
            if let Some(median) = estimates
                .pointer("/median/point_estimate")
                .and_then(Value::as_f64)
            {
                out.insert(id.to_owned(), median);
            }
        }
    }
}

fn summary(since: SystemTime) {
    let mut found = HashMap::new();
    medians(&criterion_dir(), since, &mut found);
    if found.is_empty() {
        return;
    }
    let mut scenarios: Vec<(String, String)> = Shape::ALL
        .iter()
        .flat_map(|shape| {
            SUBSCRIPTIONS.iter().map(move |n| {
                (
                    format!("{} ticker, {n} subscriptions", shape.group()),
                    format!("thalex/{}/{{}}/{n}", shape.group()),
                )
            })
        })
        .collect();
    scenarios.push(("rpc response".into(), "thalex/rpc/{}".into()));
    println!("\nthalex: Criterion medians of this run, ns per message");
    println!("| scenario | tickwire | audited | audited / tickwire |");
    println!("|---|--:|--:|--:|");
    for (label, pattern) in scenarios {
        let get = |design: &str| found.get(&pattern.replace("{}", design)).copied();
        let cell = |value: Option<f64>| value.map_or("-".to_owned(), |ns| format!("{ns:.1}"));
        let (tickwire, audited) = (get("tickwire"), get("audited"));
        let ratio = match (tickwire, audited) {
            (Some(tickwire), Some(audited)) => format!("{:.1}x", audited / tickwire),
            _ => "-".to_owned(),
        };
        println!(
            "| {label} | {} | {} | {ratio} |",
            cell(tickwire),
            cell(audited)
        );
    }
}

// ---- One scenario for callgrind ----

enum Scenario {
    TickwireTicker(TickwireTicker),
    AuditedTicker(AuditedTicker),
    TickwireRpc(TickwireRpc),
    AuditedRpc(AuditedRpc),
}

impl Scenario {
    fn parse(name: &str) -> Scenario {
        let subscriptions =
            |prefix: &str| -> Option<usize> { name.strip_prefix(prefix)?.parse().ok() };
        if let Some(n) = subscriptions("tickwire-ticker-varied-") {
            Scenario::TickwireTicker(TickwireTicker::new(n, Shape::Varied))
        } else if let Some(n) = subscriptions("audited-ticker-varied-") {
            Scenario::AuditedTicker(AuditedTicker::new(n, Shape::Varied))
        } else if let Some(n) = subscriptions("tickwire-ticker-") {
            Scenario::TickwireTicker(TickwireTicker::new(n, Shape::Real))
        } else if let Some(n) = subscriptions("audited-ticker-") {
            Scenario::AuditedTicker(AuditedTicker::new(n, Shape::Real))
        } else if let Some(n) = subscriptions("tickwire-ticker-audit-") {
            Scenario::TickwireTicker(TickwireTicker::new(n, Shape::Audit))
        } else if let Some(n) = subscriptions("audited-ticker-audit-") {
            Scenario::AuditedTicker(AuditedTicker::new(n, Shape::Audit))
        } else if name == "tickwire-rpc" {
            Scenario::TickwireRpc(TickwireRpc::new())
        } else if name == "audited-rpc" {
            Scenario::AuditedRpc(AuditedRpc::new())
        } else {
            panic!("unknown scenario {name}: see the module documentation")
        }
    }

    #[inline]
    fn once(&mut self) -> usize {
        match self {
            Scenario::TickwireTicker(s) => s.deliver(|event| {
                black_box(event);
            }),
            Scenario::AuditedTicker(s) => usize::from(black_box(s.deliver()).is_some()),
            Scenario::TickwireRpc(s) => usize::from(black_box(s.respond()).is_some()),
            Scenario::AuditedRpc(s) => usize::from(black_box(s.respond()).is_some()),
        }
    }
}

/// `iterations` runs of one scenario, not inlined so callgrind can count just this.
#[inline(never)]
fn measured_pass(scenario: &mut Scenario, iterations: u64) -> usize {
    (0..iterations).map(|_| scenario.once()).sum()
}

/// `THALEX_RATIO=<ticker|ticker-varied|ticker-audit|rpc>[:<batches>]`: the two designs on the
/// same messages, checked first as the Criterion run checks them, then timed in alternating
/// batches of about a millisecond each in one process, so that whatever slows this machine for
/// a while slows both: per message, each design's fastest tenth and median batch, and the
/// median and quartiles of the batches' ratios audited / tickwire.
fn same_run_ratio(spec: &str) {
    let (name, batches) = spec.split_once(':').unwrap_or((spec, "400"));
    let batches: usize = batches.parse().expect("batches");
    assert!(batches >= 4, "at least four batches");
    let (mut tickwire, mut audited, tickwire_n, audited_n) = match name {
        "rpc" => {
            check_rpc();
            (
                Scenario::parse("tickwire-rpc"),
                Scenario::parse("audited-rpc"),
                8_000,
                1_000,
            )
        }
        _ => {
            let shape = match name {
                "ticker" => Shape::Real,
                "ticker-varied" => Shape::Varied,
                "ticker-audit" => Shape::Audit,
                _ => panic!("THALEX_RATIO: ticker, ticker-varied, ticker-audit or rpc"),
            };
            check_ticker(1, shape);
            (
                Scenario::parse(&format!("tickwire-{name}-1")),
                Scenario::parse(&format!("audited-{name}-1")),
                2_000,
                250,
            )
        }
    };
    let timed = |scenario: &mut Scenario, iterations: u64| {
        let started = std::time::Instant::now();
        let delivered = measured_pass(scenario, iterations);
        let elapsed = started.elapsed();
        assert!(delivered > 0, "{name}: nothing delivered");
        elapsed.as_nanos() as f64 / iterations as f64
    };
    // Warm both.
    timed(&mut tickwire, tickwire_n);
    timed(&mut audited, audited_n);
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..batches {
        let a = timed(&mut tickwire, tickwire_n);
        let b = timed(&mut audited, audited_n);
        ours.push(a);
        theirs.push(b);
        ratios.push(b / a);
    }
    for values in [&mut ours, &mut theirs, &mut ratios] {
        values.sort_by(f64::total_cmp);
    }
    let at =
        |values: &[f64], fraction: f64| values[((values.len() - 1) as f64 * fraction) as usize];
    println!(
        "thalex {name}, {batches} alternating batches: tickwire {:.1} ns (fastest tenth) / \
         {:.1} ns (median), audited {:.1} / {:.1} ns; audited / tickwire per batch: median \
         {:.2}x (quartiles {:.2}x to {:.2}x)",
        at(&ours, 0.1),
        at(&ours, 0.5),
        at(&theirs, 0.1),
        at(&theirs, 0.5),
        at(&ratios, 0.5),
        at(&ratios, 0.25),
        at(&ratios, 0.75),
    );
}

/// `THALEX_PASS=<scenario>:<iterations>`: see the module documentation.
fn single_pass(spec: &str) {
    let (name, iterations) = spec.split_once(':').expect("<scenario>:<iterations>");
    let iterations: u64 = iterations.parse().expect("iterations");
    let mut scenario = Scenario::parse(name);
    assert!(
        scenario.once() > 0,
        "{name}: the warm-up iteration delivered nothing"
    );
    let delivered = measured_pass(&mut scenario, iterations);
    eprintln!("thalex: {iterations} iterations of {name} ({delivered} delivered)");
}

criterion_group!(benches, thalex);

fn main() {
    if let Ok(spec) = std::env::var("THALEX_PASS") {
        single_pass(&spec);
        return;
    }
    if let Ok(spec) = std::env::var("THALEX_RATIO") {
        same_run_ratio(&spec);
        return;
    }
    let started = SystemTime::now();
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary(started);
}
