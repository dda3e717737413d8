//! The serving thread's view of the market: a bus reader (`tickwire_client::Client` with
//! `follow_books`) whose books answer `/v1/quotes` and `/v1/book`, and whose events are fanned
//! out to the `/v1/stream` WebSocket clients.
//!
//! The bus rather than the decoder's own books: those live on the decoder thread, which must
//! not be asked anything, while the bus already carries every book change to any reader, and
//! `follow_books` rebuilds the books after a lap (a snapshot request to the appliance).
//!
//! **Invariant:** a book is never served half-applied. The decoder may publish the events of
//! one venue message in more than one batch (a large snapshot), so [`Feed::pump`] keeps reading
//! until the last event it applied ends a message (`flags::LAST`) or the ring is empty, and
//! [`Feed::mid_message`] says when it stopped inside one; the book handler then waits for the
//! rest (`serve::api`). The pump runs on the serving thread's only runtime thread and never
//! awaits, so no request is answered while it runs.

use axum::extract::ws::Utf8Bytes;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire_bus::event::json::write_event;
use tickwire_bus::event::{flags, Body, Event, EventKind, InstrumentId, VenueId};
use tickwire_client::{Client, ClientError, Next, Start};
use tokio::sync::mpsc;

use super::ServeCounters;

/// Batches read per pump before the pump yields to the requests (if not inside a message):
/// with the client's default batch, tens of thousands of events.
const BATCHES_PER_PUMP: usize = 64;
/// How long a bus that cannot be attached waits before the next try.
const ATTACH_RETRY: Duration = Duration::from_secs(1);

/// The last quote event of an instrument (for venues whose book the bus does not carry).
#[derive(Clone, Copy, Debug)]
pub struct LastQuote {
    pub quote: tickwire_bus::event::Quote,
    pub recv_ts_ns: u64,
}

/// The last trade event of an instrument (`/v1/quotes`' `last_trade`).
#[derive(Clone, Copy, Debug)]
pub struct LastTrade {
    pub price: tickwire_bus::fixed::Fixed,
    pub size: tickwire_bus::fixed::Fixed,
    pub recv_ts_ns: u64,
}

/// What a `/v1/stream` client asked for; `None` matches everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub venue: Option<String>,
    pub symbol: Option<String>,
    pub kinds: Option<Vec<EventKind>>,
}

impl Filter {
    fn matches(&self, venue: &str, symbol: &str, kind: EventKind) -> bool {
        self.venue.as_deref().is_none_or(|want| want == venue)
            && self.symbol.as_deref().is_none_or(|want| want == symbol)
            && self
                .kinds
                .as_ref()
                .is_none_or(|kinds| kinds.contains(&kind))
    }
}

/// One `/v1/stream` client: its filter and the bounded queue its WebSocket task drains.
pub struct Subscriber {
    pub filter: Filter,
    pub queue: mpsc::Sender<Utf8Bytes>,
    /// Set when the queue filled: the WebSocket task closes with 1008 and says why.
    pub overflowed: Arc<AtomicBool>,
}

pub struct Feed {
    path: PathBuf,
    client: Option<Client>,
    /// Why the bus is not attached, for the API's 503.
    pub error: Option<String>,
    next_attach: Instant,
    /// The pump stopped inside a venue message: the books are not consistent until it resumes.
    pub mid_message: bool,
    pub quotes: HashMap<(VenueId, InstrumentId), LastQuote>,
    pub trades: HashMap<(VenueId, InstrumentId), LastTrade>,
    pub subscribers: Vec<Subscriber>,
    line: Vec<u8>,
}

impl Feed {
    pub fn new(path: PathBuf) -> Feed {
        Feed {
            path,
            client: None,
            error: Some("the bus is not attached yet".to_owned()),
            next_attach: Instant::now(),
            mid_message: false,
            quotes: HashMap::new(),
            trades: HashMap::new(),
            subscribers: Vec::new(),
            line: Vec::with_capacity(512),
        }
    }

    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// Reads what the bus has, applies it to the books and queues it for the stream clients.
    pub fn pump(&mut self, counters: &ServeCounters) {
        if self.client.is_none() {
            if Instant::now() < self.next_attach {
                return;
            }
            self.next_attach = Instant::now() + ATTACH_RETRY;
            match Client::options()
                .start(Start::Latest)
                .follow_books(true)
                .attach(&self.path)
            {
                Ok(client) => {
                    self.client = Some(client);
                    self.error = None;
                }
                Err(error) => {
                    self.error = Some(format!("bus {}: {error}", self.path.display()));
                    return;
                }
            }
        }
        let Some(client) = self.client.as_mut() else {
            return;
        };
        let mut batches = 0;
        loop {
            let next = match client.poll() {
                Ok(next) => {
                    self.error = None;
                    next
                }
                Err(error) => {
                    self.error = Some(describe(&error));
                    self.mid_message = false;
                    return;
                }
            };
            match next {
                Next::Events(events) => {
                    if let Some(last) = events.last() {
                        self.mid_message = last.header.flags & flags::LAST == 0;
                    }
                    for event in events {
                        let (venue, symbol) = events.name(event);
                        Self::on_event(
                            &mut self.quotes,
                            &mut self.trades,
                            &mut self.subscribers,
                            &mut self.line,
                            counters,
                            venue,
                            symbol,
                            event,
                        );
                    }
                    batches += 1;
                    // Stop inside a message only when far past the budget: a venue message
                    // that never ends would otherwise keep the requests waiting for ever.
                    if batches >= BATCHES_PER_PUMP
                        && (!self.mid_message || batches >= 16 * BATCHES_PER_PUMP)
                    {
                        return;
                    }
                }
                Next::Overrun { missed, partition } => {
                    // The client has invalidated its books and asked for snapshots. Stream
                    // clients are told what they missed, in the stream, as a line of its own.
                    counters.bus_missed.fetch_add(missed, Ordering::Relaxed);
                    self.mid_message = false;
                    self.quotes.clear();
                    self.trades.clear();
                    let notice = Utf8Bytes::from(match partition {
                        Some(k) => {
                            format!(
                                "{{\"type\":\"overrun\",\"missed\":{missed},\"partition\":{k}}}"
                            )
                        }
                        None => format!("{{\"type\":\"overrun\",\"missed\":{missed}}}"),
                    });
                    self.subscribers
                        .retain(|subscriber| offer(subscriber, notice.clone(), counters));
                }
                Next::NewEpoch { .. } => {
                    self.mid_message = false;
                    self.quotes.clear();
                    self.trades.clear();
                }
                Next::Closed | Next::Removed | Next::Idle => return,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_event(
        quotes: &mut HashMap<(VenueId, InstrumentId), LastQuote>,
        trades: &mut HashMap<(VenueId, InstrumentId), LastTrade>,
        subscribers: &mut Vec<Subscriber>,
        line: &mut Vec<u8>,
        counters: &ServeCounters,
        venue: &str,
        symbol: &str,
        event: &Event,
    ) {
        let key = (event.header.venue_id, event.header.instrument_id);
        match event.body() {
            Body::Quote(quote) => {
                quotes.insert(
                    key,
                    LastQuote {
                        quote,
                        recv_ts_ns: event.header.recv_ts_ns,
                    },
                );
            }
            Body::Trade(trade) => {
                trades.insert(
                    key,
                    LastTrade {
                        price: trade.price,
                        size: trade.size,
                        recv_ts_ns: event.header.recv_ts_ns,
                    },
                );
            }
            _ => {}
        }
        if subscribers.is_empty() {
            return;
        }
        let kind = event.kind();
        let mut text: Option<Utf8Bytes> = None;
        subscribers.retain(|subscriber| {
            if !subscriber.filter.matches(venue, symbol, kind) {
                return true;
            }
            let text = text
                .get_or_insert_with(|| {
                    line.clear();
                    write_event(line, venue, symbol.as_bytes(), event);
                    // One JSON object per message, without the line's newline.
                    line.pop();
                    Utf8Bytes::from(String::from_utf8_lossy(line).into_owned())
                })
                .clone();
            offer(subscriber, text, counters)
        });
    }
}

/// Queues `text` for one stream client; false when the client is to be dropped: its queue is
/// full (it is marked, and closed with 1008) or its WebSocket task has ended.
fn offer(subscriber: &Subscriber, text: Utf8Bytes, counters: &ServeCounters) -> bool {
    match subscriber.queue.try_send(text) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            subscriber.overflowed.store(true, Ordering::Relaxed);
            counters.stream_slow_closed.fetch_add(1, Ordering::Relaxed);
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

fn describe(error: &ClientError) -> String {
    format!("bus read failed: {error}")
}
