//! The built-in strategies, chosen by `[strategy] name` in the appliance file.
//!
//! - `print`: every event as a JSON line on stdout (the `tickwire decode` format), named by
//!   venue and symbol as `print::EventNames` names them (a connection's status by its venue):
//!   a [`print::EventTap`](super::print::EventTap) with nothing behind it.
//! - `mid`: mid price, microprice and spread of every quote, as the published Rust and Node.js
//!   price-feed comparison computed them; optionally one record per venue quote (update id and
//!   the time its mid was computed) for the end-to-end benchmark.
//! - `quoter`: a two-sided quote around the microprice, skewed against the position that
//!   simulated fills (trades through the quote) build up. Computed, never sent.
//!
//! None of them writes, locks or logs on the strategy thread: their lines (JSON lines, the
//! periodic summaries) go through a [`StrategyOutput`] ring that the caller drains
//! ([`OutputReader`]: the control thread in a session, `replay` after each batch).

use super::market::{self, Market};
use super::output::{self, OutputReader, StrategyOutput};
use super::print::EventTap;
use super::Strategy;
use crate::clock::system_realtime_ns;
use crate::config::{QuoterConfig, StrategyConfig, StrategyName};
use crate::event::{flags, Body, Event, EventKind, Side};
use std::path::{Path, PathBuf};

const NS_PER_MS: u64 = 1_000_000;

pub use super::print::{EventNames, InstrumentName};

/// The strategy the config names (`None` for `name = "none"`), and the reader of the ring its
/// text goes through, which the caller drains off the strategy thread ([`OutputReader::drain`]).
pub fn from_config(
    config: &StrategyConfig,
    names: EventNames,
) -> (Option<Box<dyn Strategy>>, Option<OutputReader>) {
    // Bounded by the config check (`strategy.summary_interval_ms`); saturating, so that a value
    // past it means "rarely", never a wrapped short interval (issue 32).
    let summary_ns = (config.summary_interval_ms > 0)
        .then(|| config.summary_interval_ms.saturating_mul(NS_PER_MS));
    match config.name {
        StrategyName::None => (None, None),
        StrategyName::Print => {
            let (lines, reader) = output::output(output::PRINT_RING_BYTES, 64 << 10);
            (
                Some(Box::new(EventTap::new(names, lines, None))),
                Some(reader),
            )
        }
        StrategyName::Mid => {
            let (log, reader) = output::output(output::LOG_RING_BYTES, 1024);
            let mid = Mid::new(
                config.record_file.clone(),
                config.record_capacity,
                summary_ns,
                log,
            );
            (Some(Box::new(mid)), Some(reader))
        }
        StrategyName::Arrivals => {
            let (log, reader) = output::output(output::LOG_RING_BYTES, 1024);
            let arrivals = Arrivals::new(config.record_file.clone(), config.record_capacity, log);
            (Some(Box::new(arrivals)), Some(reader))
        }
        StrategyName::Quoter => {
            let (log, reader) = output::output(output::LOG_RING_BYTES, 1024);
            let quoter = Quoter::new(config.quoter, names.instruments().to_vec(), summary_ns, log);
            (Some(Box::new(quoter)), Some(reader))
        }
    }
}

/// `mid`: per quote the venue sent, mid, microprice and spread.
pub struct Mid {
    /// Quotes seen, and the running sums that keep the computation observable.
    pub quotes: u64,
    pub mid_sum: f64,
    pub microprice_sum: f64,
    pub spread_sum: f64,
    /// `(update id, ns since the epoch when the mid was computed)` per venue quote.
    records: Vec<(u64, u64)>,
    record_file: Option<PathBuf>,
    /// Quotes not recorded because the record buffer was full.
    pub unrecorded: u64,
    summary_ns: Option<u64>,
    last_summary: (u64, u64),
    /// Where the summaries go (see `output.rs`).
    log: StrategyOutput,
}

impl Mid {
    pub fn new(
        record_file: Option<PathBuf>,
        capacity: usize,
        summary_ns: Option<u64>,
        log: StrategyOutput,
    ) -> Mid {
        Mid {
            quotes: 0,
            mid_sum: 0.0,
            microprice_sum: 0.0,
            spread_sum: 0.0,
            records: record_buffer(record_file.is_some(), capacity),
            record_file,
            unrecorded: 0,
            summary_ns,
            last_summary: (0, 0),
            log,
        }
    }

    pub fn records(&self) -> &[(u64, u64)] {
        &self.records
    }
}

/// A record buffer of `capacity` whose pages are already touched, so that recording costs the
/// hot thread no page fault (one every 256 records otherwise); none when nothing is recorded.
fn record_buffer(recording: bool, capacity: usize) -> Vec<(u64, u64)> {
    if !recording {
        return Vec::new();
    }
    let mut records = Vec::with_capacity(capacity);
    records.resize(capacity, (0, 0));
    std::hint::black_box(&records);
    records.clear();
    records
}

impl Strategy for Mid {
    fn on_events(&mut self, events: &[Event], _market: &Market, _now_ns: u64) {
        for event in events {
            let Body::Quote(quote) = event.body() else {
                continue;
            };
            self.quotes += 1;
            self.mid_sum += market::mid(&quote);
            self.microprice_sum += market::microprice(&quote).unwrap_or(f64::NAN);
            self.spread_sum += market::spread(&quote);
            if self.record_file.is_some() && event.header.flags & flags::DERIVED == 0 {
                // CLOCK_REALTIME, as the simulator's send stamps and the peers' records.
                let done = system_realtime_ns();
                if self.records.len() < self.records.capacity() {
                    self.records.push((event.header.venue_seq, done));
                } else {
                    self.unrecorded += 1;
                }
            }
        }
    }

    fn timer_interval_ns(&self) -> Option<u64> {
        self.summary_ns
    }

    fn on_timer(&mut self, market: &Market, now_ns: u64) {
        let (quotes, at) = self.last_summary;
        let seconds = now_ns.saturating_sub(at) as f64 / 1e9;
        if at > 0 && seconds > 0.0 {
            let rate = (self.quotes - quotes) as f64 / seconds;
            let first = market
                .get(0)
                .and_then(|state| state.top.map(|q| market::mid(&q)));
            self.log.log(format_args!(
                "mid quotes={} per_sec={} first_mid={:?}",
                self.quotes, rate as u64, first
            ));
        }
        self.last_summary = (self.quotes, now_ns);
    }

    fn finish(&mut self, _market: &Market) {
        let Some(path) = &self.record_file else {
            return;
        };
        write_records(path, &self.records, &mut self.log, "mid");
    }
}

/// `arrivals`: one record per venue message, its sequence number (`venue_seq`) and the
/// CLOCK_REALTIME ns at which its last event (flag `LAST`) reached the strategy, for the
/// latency benchmarks of feeds that carry no quotes (`cargo bench --bench itch_wire` joins them
/// with the simulator's send times by MoldUDP64 sequence number). Derived events, statuses,
/// gaps and events without a sequence number are not recorded, and a message that publishes
/// for several instruments (a status for every stock) is recorded once. Written to `record_file` at exit (16
/// bytes a record, little-endian, as `mid` writes them); without one it records nothing.
pub struct Arrivals {
    records: Vec<(u64, u64)>,
    /// The venue and sequence number last recorded: a message that publishes for several
    /// instruments (an ITCH system event, a status per stock) is one arrival.
    last: (u16, u64),
    record_file: Option<PathBuf>,
    /// Messages not recorded because the record buffer was full.
    pub unrecorded: u64,
    log: StrategyOutput,
}

impl Arrivals {
    pub fn new(record_file: Option<PathBuf>, capacity: usize, log: StrategyOutput) -> Arrivals {
        Arrivals {
            records: record_buffer(record_file.is_some(), capacity),
            last: (0, 0),
            record_file,
            unrecorded: 0,
            log,
        }
    }

    pub fn records(&self) -> &[(u64, u64)] {
        &self.records
    }
}

impl Strategy for Arrivals {
    fn on_events(&mut self, events: &[Event], _market: &Market, _now_ns: u64) {
        if self.record_file.is_none() {
            return;
        }
        for event in events {
            let header = &event.header;
            if header.flags & flags::LAST == 0
                || header.flags & flags::DERIVED != 0
                || header.venue_seq == 0
                || matches!(header.kind, EventKind::VenueStatus | EventKind::Gap)
                || (header.venue_id, header.venue_seq) == self.last
            {
                continue;
            }
            self.last = (header.venue_id, header.venue_seq);
            let at = system_realtime_ns();
            if self.records.len() < self.records.capacity() {
                self.records.push((header.venue_seq, at));
            } else {
                self.unrecorded += 1;
            }
        }
    }

    fn finish(&mut self, _market: &Market) {
        let Some(path) = &self.record_file else {
            return;
        };
        write_records(path, &self.records, &mut self.log, "arrivals");
        if self.unrecorded > 0 {
            self.log.log(format_args!(
                "arrivals: {} messages not recorded (raise [strategy] record_capacity)",
                self.unrecorded
            ));
        }
    }
}

/// Writes `(id, ns)` records, 16 bytes each, little-endian; an error is logged.
fn write_records(path: &Path, records: &[(u64, u64)], log: &mut StrategyOutput, who: &str) {
    let mut bytes = Vec::with_capacity(records.len() * 16);
    for (id, ns) in records {
        bytes.extend_from_slice(&id.to_le_bytes());
        bytes.extend_from_slice(&ns.to_le_bytes());
    }
    if let Err(error) = std::fs::write(path, bytes) {
        log.log(format_args!(
            "{who}: cannot write the records to {}: {error}",
            path.display()
        ));
    }
}

/// One instrument's quoter state.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuoterBook {
    pub position: f64,
    /// The current quote: `(bid, ask)`, either side `None` at the position limit.
    pub bid: Option<f64>,
    pub ask: Option<f64>,
    pub fills: u64,
}

/// `quoter`: bid and ask at `microprice ∓ half_spread`, both shifted by
/// `-skew_bps_per_unit * position`; a trade print through a side fills it (up to the quote size).
pub struct Quoter {
    config: QuoterConfig,
    names: Vec<InstrumentName>,
    pub books: Vec<QuoterBook>,
    pub requotes: u64,
    summary_ns: Option<u64>,
    /// Where the summaries go (see `output.rs`).
    log: StrategyOutput,
}

impl Quoter {
    pub fn new(
        config: QuoterConfig,
        names: Vec<InstrumentName>,
        summary_ns: Option<u64>,
        log: StrategyOutput,
    ) -> Quoter {
        Quoter {
            config,
            books: vec![QuoterBook::default(); names.len()],
            names,
            requotes: 0,
            summary_ns,
            log,
        }
    }

    fn requote(&mut self, instrument: usize, microprice: f64) {
        let Some(book) = self.books.get_mut(instrument) else {
            return;
        };
        let bps = microprice * 1e-4;
        let center = microprice - self.config.skew_bps_per_unit * book.position * bps;
        let half = self.config.half_spread_bps * bps;
        book.bid = (book.position < self.config.max_position).then_some(center - half);
        book.ask = (book.position > -self.config.max_position).then_some(center + half);
        self.requotes += 1;
    }

    fn fill(&mut self, instrument: usize, price: f64, size: f64, aggressor: Side) {
        let Some(book) = self.books.get_mut(instrument) else {
            return;
        };
        let room_long = self.config.max_position - book.position;
        let room_short = self.config.max_position + book.position;
        match (aggressor, book.bid, book.ask) {
            // A seller hit down to our bid or through it: we buy.
            (Side::Ask, Some(bid), _) if price <= bid && room_long > 0.0 => {
                book.position += size.min(self.config.quote_size).min(room_long);
                book.fills += 1;
            }
            (Side::Bid, _, Some(ask)) if price >= ask && room_short > 0.0 => {
                book.position -= size.min(self.config.quote_size).min(room_short);
                book.fills += 1;
            }
            _ => {}
        }
    }
}

impl Strategy for Quoter {
    fn on_events(&mut self, events: &[Event], _market: &Market, _now_ns: u64) {
        for event in events {
            let instrument = event.header.instrument_id as usize;
            match event.body() {
                Body::Quote(quote) => {
                    if let Some(microprice) = market::microprice(&quote) {
                        self.requote(instrument, microprice);
                    }
                }
                Body::Trade(trade) => {
                    self.fill(
                        instrument,
                        trade.price.to_f64(),
                        trade.size.to_f64(),
                        trade.aggressor(),
                    );
                }
                // The book may be out of date: pull the quote until the next one.
                Body::Gap(_) => {
                    if let Some(book) = self.books.get_mut(instrument) {
                        book.bid = None;
                        book.ask = None;
                    }
                }
                _ => {}
            }
        }
    }

    fn timer_interval_ns(&self) -> Option<u64> {
        self.summary_ns
    }

    fn on_timer(&mut self, _market: &Market, _now_ns: u64) {
        for (name, book) in self.names.iter().zip(&self.books) {
            self.log.log(format_args!(
                "quoter venue={} symbol={} bid={:?} ask={:?} position={} fills={}",
                name.venue, name.symbol, book.bid, book.ask, book.position, book.fills
            ));
        }
    }

    fn finish(&mut self, market: &Market) {
        self.on_timer(market, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventHeader, EventKind, Quote, Trade};
    use crate::fixed::Fixed;

    fn event(kind: EventKind, body: Body, seq: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 1,
                recv_ts_ns: 2,
                venue_seq: seq,
                instrument_id: 0,
                venue_id: 0,
                kind,
                flags: flags::LAST,
            },
            body,
        )
    }

    fn quote(bid: &str, ask: &str) -> Body {
        Body::Quote(Quote {
            bid_px: Fixed::parse_str(bid).unwrap(),
            bid_sz: Fixed::parse_str("1").unwrap(),
            ask_px: Fixed::parse_str(ask).unwrap(),
            ask_sz: Fixed::parse_str("1").unwrap(),
        })
    }

    fn names() -> Vec<InstrumentName> {
        vec![InstrumentName {
            venue: "v".to_owned(),
            symbol: "BTCUSDT".to_owned(),
        }]
    }

    /// What a strategy's output ring holds: the stdout text, and the log lines.
    fn drained(reader: &mut OutputReader) -> (String, Vec<String>) {
        let mut out = Vec::new();
        let mut logged = Vec::new();
        reader
            .drain(&mut out, |line| logged.push(line.to_owned()))
            .expect("drain");
        (String::from_utf8(out).unwrap(), logged)
    }

    fn print(names: EventNames) -> (Box<dyn Strategy>, OutputReader) {
        let config = StrategyConfig {
            name: StrategyName::Print,
            ..StrategyConfig::default()
        };
        let (strategy, reader) = from_config(&config, names);
        (strategy.unwrap(), reader.unwrap())
    }

    #[test]
    fn print_writes_decode_style_lines() {
        let (mut print, mut reader) = print(EventNames::new(vec!["v".to_owned()], names()));
        let market = Market::new(1);
        print.on_events(
            &[event(EventKind::Quote, quote("100", "101"), 7)],
            &market,
            0,
        );
        let (out, logged) = drained(&mut reader);
        assert!(logged.is_empty());
        let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(json["type"], "quote");
        assert_eq!(json["venue"], "v");
        assert_eq!(json["symbol"], "BTCUSDT");
        assert_eq!(json["seq"], 7);
        assert_eq!(json["ask_px"], "101");
    }

    /// Issue 24: a connection's status (instrument `ALL_INSTRUMENTS`) printed `"venue":""`.
    #[test]
    fn print_names_a_connection_status_by_its_venue() {
        let (mut print, mut reader) = print(EventNames::new(
            vec!["v".to_owned(), "w".to_owned()],
            names(),
        ));
        let mut status = event(
            EventKind::VenueStatus,
            Body::VenueStatus(crate::event::VenueStatus::new(
                crate::event::VenueState::Disconnected,
                2,
                0,
            )),
            0,
        );
        status.header.instrument_id = crate::venue::feed::ALL_INSTRUMENTS;
        status.header.venue_id = 1;
        print.on_events(&[status], &Market::new(1), 0);
        let (out, _) = drained(&mut reader);
        let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(json["type"], "status");
        assert_eq!(json["venue"], "w");
        assert_eq!(json["symbol"], "*");
        assert_eq!(json["state"], "Disconnected");
    }

    #[test]
    fn summaries_are_lines_in_the_ring_not_logs() {
        let (log, mut reader) = output::output(output::LOG_RING_BYTES, 1024);
        let mut mid = Mid::new(None, 0, Some(1), log);
        let mut market = Market::new(1);
        let quotes = [event(EventKind::Quote, quote("100", "102"), 1)];
        market.apply(&quotes[0]);
        mid.on_events(&quotes, &market, 0);
        mid.on_timer(&market, 1_000_000_000);
        mid.on_timer(&market, 2_000_000_000);
        let (out, logged) = drained(&mut reader);
        assert!(out.is_empty());
        assert_eq!(logged, ["mid quotes=1 per_sec=0 first_mid=Some(101.0)"]);

        let (log, mut reader) = output::output(output::LOG_RING_BYTES, 1024);
        let mut quoter = Quoter::new(QuoterConfig::default(), names(), Some(1), log);
        quoter.on_timer(&market, 0);
        let (_, logged) = drained(&mut reader);
        assert_eq!(
            logged,
            ["quoter venue=v symbol=BTCUSDT bid=None ask=None position=0 fills=0"]
        );
    }

    #[test]
    fn mid_records_each_venue_quote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let (log, _reader) = output::output(output::LOG_RING_BYTES, 1024);
        let mut mid = Mid::new(Some(path.clone()), 4, None, log);
        let market = Market::new(1);
        let events = [
            event(EventKind::Quote, quote("100", "102"), 1),
            event(EventKind::Quote, quote("100", "101"), 2),
        ];
        mid.on_events(&events, &market, 0);
        assert_eq!(mid.quotes, 2);
        assert_eq!(mid.mid_sum, 101.0 + 100.5);
        assert_eq!(
            mid.records().iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 2]
        );
        mid.finish(&market);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 32);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 2);
    }

    /// `arrivals` keeps one record per venue message (its last event), none for a message's
    /// earlier events, its events for other instruments, derived events, gaps or statuses,
    /// counts what its buffer cannot hold, and writes the records at the end.
    #[test]
    fn arrivals_records_each_venue_message_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let (log, _reader) = output::output(output::LOG_RING_BYTES, 1024);
        let mut arrivals = Arrivals::new(Some(path.clone()), 3, log);
        let market = Market::new(1);
        let mut first_of_two = event(EventKind::BookLevel, quote("1", "2"), 7);
        first_of_two.header.flags = 0;
        let mut derived = event(EventKind::Quote, quote("1", "2"), 8);
        derived.header.flags |= flags::DERIVED;
        let mut second_stock = event(EventKind::BookLevel, quote("1", "2"), 5);
        second_stock.header.instrument_id = 1;
        let gap = event(
            EventKind::Gap,
            Body::Gap(crate::event::Gap::new(
                crate::event::GapReason::SequenceBreak,
                6,
                9,
            )),
            6,
        );
        let status = event(
            EventKind::VenueStatus,
            Body::VenueStatus(crate::event::VenueStatus::new(
                crate::event::VenueState::Live,
                0,
                0,
            )),
            9,
        );
        let events = [
            event(EventKind::Trade, quote("1", "2"), 5),
            second_stock,
            gap,
            first_of_two,
            event(EventKind::BookLevel, quote("1", "2"), 7),
            derived,
            status,
            event(EventKind::BookLevel, quote("1", "2"), 10),
            event(EventKind::BookLevel, quote("1", "2"), 11),
        ];
        let before = system_realtime_ns();
        arrivals.on_events(&events, &market, 0);
        let ids: Vec<u64> = arrivals.records().iter().map(|r| r.0).collect();
        assert_eq!(ids, [5, 7, 10]);
        assert!(arrivals.records().iter().all(|r| r.1 >= before));
        assert_eq!(arrivals.unrecorded, 1);
        arrivals.finish(&market);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 48);
        assert_eq!(u64::from_le_bytes(bytes[32..40].try_into().unwrap()), 10);
    }

    #[test]
    fn quoter_quotes_around_the_microprice_and_skews_with_position() {
        let config = QuoterConfig {
            half_spread_bps: 10.0,
            skew_bps_per_unit: 5.0,
            quote_size: 1.0,
            max_position: 1.0,
        };
        let (log, _reader) = output::output(output::LOG_RING_BYTES, 1024);
        let mut quoter = Quoter::new(config, names(), None, log);
        let market = Market::new(1);
        quoter.on_events(
            &[event(EventKind::Quote, quote("1000", "1000"), 1)],
            &market,
            0,
        );
        let book = quoter.books[0];
        assert!((book.bid.unwrap() - 999.0).abs() < 1e-9);
        assert!((book.ask.unwrap() - 1001.0).abs() < 1e-9);
        // A seller trades through our bid: we buy one, hit the limit, and stop bidding.
        let trade = Body::Trade(Trade::new(
            Fixed::parse_str("998").unwrap(),
            Fixed::parse_str("3").unwrap(),
            1,
            Side::Ask,
        ));
        quoter.on_events(
            &[
                event(EventKind::Trade, trade, 1),
                event(EventKind::Quote, quote("1000", "1000"), 2),
            ],
            &market,
            0,
        );
        let book = quoter.books[0];
        assert_eq!(book.position, 1.0);
        assert_eq!(book.fills, 1);
        assert_eq!(book.bid, None, "at the long limit");
        // Long: the ask moves down by the skew (5 bps of 1000 = 0.5).
        assert!((book.ask.unwrap() - 1000.5).abs() < 1e-9, "{book:?}");
    }
}
