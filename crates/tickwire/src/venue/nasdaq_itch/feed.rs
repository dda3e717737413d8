//! The live path's [`Feed`]: the [`ItchDecoder`] on the decoder thread, fed the datagrams of
//! the venue's slot (line A, line B and the re-request server's answers, each a frame of its
//! own, `net::engine`), its events into the [`EventSink`].
//!
//! - The arbiter's timers (`line_wait_ms`, the re-request interval, `give_up_ms`) run on
//!   [`Feed::tick`], the decoder stage's round, and after every datagram.
//! - A re-request the arbiter asks for leaves without any syscall here: it is encoded into a
//!   [`VenueReply::datagram`] that the control thread passes to the network thread, which sends
//!   it on the slot's request socket (rate-limited and retried as the arbiter says; a lost one
//!   is retried at the next interval, a gap nothing fills is given up as `gap` events).
//! - Per line (A, B, re-request answers) the packets delivered first, the duplicates and the
//!   kernel's drops (`SO_RXQ_OVFL`), and the re-requests sent and gaps given up, are counted as
//!   tallies of the venue's table ([`KINDS`], `MessageKind::tally`) beside every ITCH message
//!   type: `/v1/venues` shows them as `feed_counts`, the metrics as
//!   `tickwire_venue_feed_counts_total`.
//!
//! - Under `*` (every stock publishes), each stock is named in the bus's instrument directory
//!   as the feed first names it (its Stock Directory message, or the stock field of another
//!   message), before its first event ([`EventSink::name_instrument`]): a bus reader sees
//!   `venue`, `symbol` and `venue_symbol` (the ITCH symbol, trimmed) for every instrument id
//!   the feed publishes. A full directory (`[bus] directory_capacity`) is counted as
//!   `stocks_unnamed_on_bus`; the stock's events still reach the bus. With a list of symbols
//!   the control thread names them all before the feed starts.
//!
//! Nothing here allocates after [`ItchFeed::new`].

use super::decoder::{new_york_date, DecoderConfig, DecoderOutput, ItchDecoder, Symbols};
use super::mold::{Line, MoldError};
use crate::event::{Event, InstrumentId, VenueId};
use crate::net::udp::DatagramLine;
use crate::net::ConnId;
use crate::venue::feed::{
    EventSink, Feed, FeedCounters, FeedWriters, MalformedSample, MalformedSampler, MessageKind,
    ReplyQueue, StreamActivity, VenueReply,
};
use std::sync::Arc;

/// The venue's message table: every ITCH 5.0 message type, in `itch::MESSAGE_TYPES`' order,
/// then the arbiter's counts.
pub static KINDS: [MessageKind; KIND_COUNT] = [
    MessageKind::other("system_event"),
    MessageKind::other("stock_directory"),
    MessageKind::market("stock_trading_action"),
    MessageKind::market("reg_sho_restriction"),
    MessageKind::other("market_participant_position"),
    MessageKind::other("mwcb_decline_level"),
    MessageKind::market("mwcb_status"),
    MessageKind::other("ipo_quoting_period_update"),
    MessageKind::other("luld_auction_collar"),
    MessageKind::market("add_order"),
    MessageKind::market("add_order_mpid"),
    MessageKind::market("order_executed"),
    MessageKind::market("order_executed_with_price"),
    MessageKind::market("order_cancel"),
    MessageKind::market("order_delete"),
    MessageKind::market("order_replace"),
    MessageKind::market("trade"),
    MessageKind::market("cross_trade"),
    MessageKind::market("broken_trade"),
    MessageKind::market("noii"),
    MessageKind::other("rpii"),
    // Per line: messages it delivered first, copies that came after another line's, packets
    // the kernel dropped on its socket (SO_RXQ_OVFL).
    MessageKind::tally("line_a_delivered"),
    MessageKind::tally("line_a_duplicates"),
    MessageKind::tally("line_a_kernel_drops"),
    MessageKind::tally("line_b_delivered"),
    MessageKind::tally("line_b_duplicates"),
    MessageKind::tally("line_b_kernel_drops"),
    MessageKind::tally("rerequest_delivered"),
    MessageKind::tally("rerequest_duplicates"),
    MessageKind::tally("rerequest_kernel_drops"),
    // Re-requests sent, runs of messages given up (each a `gap` event per published stock) and
    // the messages in them, session changes, packets refused.
    MessageKind::tally("rerequests"),
    MessageKind::tally("gaps"),
    MessageKind::tally("gap_messages"),
    MessageKind::tally("session_changes"),
    MessageKind::tally("malformed_packets"),
    // Under `*`: stocks the bus's instrument directory had no room for (`[bus]
    // directory_capacity`); their events still reach the bus, unnamed.
    MessageKind::tally("stocks_unnamed_on_bus"),
];

const TYPES: usize = super::itch::MESSAGE_TYPES.len();
/// Entries of [`KINDS`].
pub const KIND_COUNT: usize = TYPES + 9 + 6;

/// What [`ItchFeed::new`] needs.
#[derive(Clone, Debug)]
pub struct FeedConfig {
    pub decoder: DecoderConfig,
    /// The venue file's `name`: the bus directory's venue for the stocks named as they come.
    pub venue: String,
}

/// The nasdaq-itch feed.
pub struct ItchFeed {
    venue_id: VenueId,
    decoder: ItchDecoder,
    writers: FeedWriters,
    /// The values last added to each of [`KINDS`]' counters (they count up from the decoder's
    /// own counters).
    counted: [u64; KIND_COUNT],
    /// By line: the kernel drop count its current socket last reported (a new socket counts
    /// from 0 again: see `on_disconnect`).
    kernel_drops: [u64; 3],
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    malformed: MalformedSampler,
    /// The slot whose request socket takes the re-requests: the one that last brought a
    /// datagram.
    conn: Option<ConnId>,
    /// Re-requests that could not be queued for the control thread (its ring full).
    requests_dropped: u64,
    /// The venue file's name, for the bus directory.
    venue: String,
    /// Stocks the bus's directory had no room for (`[bus] directory_capacity`).
    unnamed: u64,
}

/// The decoder's output on the live path: events into the sink; under `*`, each stock into the
/// bus's instrument directory as it is first named (before its first event).
struct Output<'s, 'a> {
    sink: &'s mut EventSink<'a>,
    venue_id: VenueId,
    venue: &'s str,
    unnamed: &'s mut u64,
}

impl DecoderOutput for Output<'_, '_> {
    #[inline]
    fn event(&mut self, event: Event) {
        self.sink.push(event);
    }

    fn named(&mut self, instrument: InstrumentId, symbol: &[u8]) {
        // An ITCH symbol is eight printable ASCII characters; anything else is named by its
        // valid start.
        let symbol = match std::str::from_utf8(symbol) {
            Ok(symbol) => symbol,
            Err(error) => std::str::from_utf8(&symbol[..error.valid_up_to()]).unwrap_or(""),
        };
        let naming = tickwire_bus::Naming {
            instrument_id: instrument,
            venue_id: self.venue_id,
            venue: self.venue,
            symbol,
            venue_symbol: symbol,
        };
        if self.sink.name_instrument(&naming).is_err() {
            *self.unnamed += 1;
        }
    }
}

fn line_of(line: DatagramLine) -> Line {
    match line {
        DatagramLine::A => Line::A,
        DatagramLine::B => Line::B,
        DatagramLine::Reply => Line::Rerequest,
    }
}

impl ItchFeed {
    /// The feed and the control thread's readers of its counters; `activity` has one stream
    /// per symbol of the venue file (its one channel).
    pub fn new(config: FeedConfig, activity: Arc<StreamActivity>) -> (ItchFeed, FeedCounters) {
        let (writers, counters) = FeedCounters::new(&KINDS, activity.clone());
        let venue_id = config.decoder.venue_id;
        (
            ItchFeed {
                venue_id,
                decoder: ItchDecoder::new(config.decoder),
                writers,
                counted: [0; KIND_COUNT],
                kernel_drops: [0; 3],
                activity,
                replies: ReplyQueue::new(64),
                malformed: MalformedSampler::default(),
                conn: None,
                requests_dropped: 0,
                venue: config.venue,
                unnamed: 0,
            },
            counters,
        )
    }

    pub fn decoder(&self) -> &ItchDecoder {
        &self.decoder
    }

    /// Re-requests lost because the reply queue to the control thread was full.
    pub fn requests_dropped(&self) -> u64 {
        self.requests_dropped
    }

    /// The decoder's counts into the table's counters: only what moved is written.
    fn count(&mut self) {
        let decoder = self.decoder.counters();
        let arbiter = self.decoder.arbiter().counters();
        let mut now = [0u64; KIND_COUNT];
        now[..TYPES].copy_from_slice(&decoder.by_type);
        for (line, counters) in arbiter.lines.iter().enumerate() {
            now[TYPES + line * 3] = counters.delivered;
            now[TYPES + line * 3 + 1] = counters.duplicates;
            now[TYPES + line * 3 + 2] = self.kernel_drops[line];
        }
        now[TYPES + 9] = arbiter.requests;
        now[TYPES + 10] = arbiter.gaps;
        now[TYPES + 11] = arbiter.gap_messages;
        now[TYPES + 12] = decoder.session_changes;
        now[TYPES + 13] = decoder.malformed_packets;
        now[TYPES + 14] = self.unnamed;
        for (kind, (value, counted)) in now.iter().zip(self.counted.iter_mut()).enumerate() {
            if *value > *counted {
                self.writers.add_messages(kind, *value - *counted);
                *counted = *value;
            }
        }
    }

    /// Runs the arbiter's timers; a re-request goes to the control thread for the network
    /// thread to send.
    fn run_timers(&mut self, now_ns: u64, sink: &mut EventSink<'_>) {
        let due = self
            .decoder
            .next_deadline_ns()
            .is_some_and(|deadline| deadline <= now_ns);
        if !due {
            return;
        }
        let request = self.decoder.poll(
            now_ns,
            &mut Output {
                sink,
                venue_id: self.venue_id,
                venue: &self.venue,
                unnamed: &mut self.unnamed,
            },
        );
        if let (Some(request), Some(conn)) = (request, self.conn) {
            let bytes = request.encode();
            let queued = VenueReply::datagram(self.venue_id, conn, DatagramLine::Reply, &bytes)
                .is_some_and(|reply| self.replies.push(reply));
            if !queued {
                self.requests_dropped += 1;
            }
        }
    }
}

impl Feed for ItchFeed {
    /// A datagram with no line (cannot come from the network thread): read as line A's.
    fn on_message(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        self.on_datagram(conn, DatagramLine::A, recv_ts_ns, 0, payload, sink);
    }

    fn on_datagram(
        &mut self,
        conn: ConnId,
        line: DatagramLine,
        recv_ts_ns: u64,
        kernel_drops: u32,
        datagram: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        self.conn = Some(conn);
        if self.decoder.date().is_none() {
            if let Some(date) = new_york_date(recv_ts_ns) {
                self.decoder.set_date(date);
            }
        }
        let index = line as usize;
        self.kernel_drops[index] = self.kernel_drops[index].max(u64::from(kernel_drops));
        let result = self.decoder.on_packet(
            line_of(line),
            datagram,
            recv_ts_ns,
            recv_ts_ns,
            &mut Output {
                sink,
                venue_id: self.venue_id,
                venue: &self.venue,
                unnamed: &mut self.unnamed,
            },
        );
        if let Err(error) = result {
            self.writers.malformed.increment();
            self.malformed
                .offer(self.venue_id, &PacketError(error), 0, datagram, recv_ts_ns);
        }
        if let Some(problem) = self.decoder.take_problem() {
            self.malformed
                .offer(self.venue_id, &problem, 0, datagram, recv_ts_ns);
        }
        // Every stream of the venue file is carried by this one feed: its datagrams are their
        // activity (a heartbeat too: the feed is alive).
        for stream in 0..self.activity.streams() {
            self.activity.saw(stream, recv_ts_ns);
        }
        self.run_timers(recv_ts_ns, sink);
        self.count();
    }

    fn tick(&mut self, now_ns: u64, sink: &mut EventSink<'_>) {
        self.run_timers(now_ns, sink);
        self.count();
    }

    /// The slot's sockets closed: nothing is owed yet. The arbiter finds what was missed by
    /// its sequence numbers when datagrams flow again, and recovers it or reports a gap.
    fn on_disconnect(
        &mut self,
        _conn: ConnId,
        _instruments: std::ops::Range<InstrumentId>,
        _now_ns: u64,
        _sink: &mut EventSink<'_>,
    ) {
        self.conn = None;
        // A new socket's drop count starts from 0 again.
        self.kernel_drops = [0; 3];
        for (kind, counted) in self.counted.iter_mut().enumerate() {
            if (TYPES..TYPES + 9).contains(&kind) && (kind - TYPES) % 3 == 2 {
                *counted = 0;
            }
        }
    }

    fn take_malformed(&mut self) -> Option<MalformedSample> {
        self.malformed.take()
    }

    fn take_reply(&mut self) -> Option<VenueReply> {
        self.replies.pop()
    }

    /// A published stock's book: its levels, begin and end (`ItchDecoder::book_events`).
    fn book_events(&self, instrument: InstrumentId) -> usize {
        self.decoder.book_events(instrument)
    }

    /// Bus readers' snapshots of the L3 books, each stock's levels both sides
    /// (`ItchDecoder::emit_books`).
    fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) -> usize {
        self.decoder
            .emit_books(instrument, now_ns, &mut |event| sink.push(event))
    }
}

/// A refused packet, for the malformed sample's text.
struct PacketError(MoldError);

impl std::fmt::Display for PacketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MoldUDP64 packet refused: {}", self.0)
    }
}

/// The decoder's settings for a venue file.
pub fn decoder_config(
    venue_id: VenueId,
    instrument_base: InstrumentId,
    symbols: &[String],
    itch: &super::config::ItchConfig,
) -> DecoderConfig {
    DecoderConfig {
        venue_id,
        instrument_base,
        symbols: if symbols.iter().any(|symbol| symbol == "*") {
            Symbols::All
        } else {
            Symbols::List(symbols.to_vec())
        },
        arbiter: itch.arbiter(),
        book: itch.book(),
        date: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::book::BookConfig;
    use super::super::decoder::Symbols;
    use super::super::generate::{mold_packet, Generator, MAX_GENERATED_LEN};
    use super::super::mold::{ArbiterConfig, Session};
    use super::*;
    use crate::event::Event;
    use tickwire_bus::{BusOptions, BusReader, BusWriter, Geometry, Start};

    /// Under `*`, every stock the feed names reaches the bus's directory, under the venue's
    /// name and its ITCH symbol, before its first event; a directory too small for them all
    /// names what fits and counts the rest, and their events still reach the bus.
    #[test]
    fn under_a_star_the_feed_names_each_stock_in_the_bus_directory_as_it_comes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let options = BusOptions {
            path: path.clone(),
            geometry: Geometry::new(1 << 16, 8).unwrap(),
            group: None,
        };
        let mut bus = BusWriter::create(&options, 1, 1).unwrap();
        let base = 40;
        let config = FeedConfig {
            decoder: DecoderConfig {
                venue_id: 2,
                instrument_base: base,
                symbols: Symbols::All,
                arbiter: ArbiterConfig::default(),
                book: BookConfig {
                    max_orders: 1 << 14,
                    max_levels: 1 << 12,
                },
                date: None,
            },
            venue: "nasdaq".to_owned(),
        };
        let activity = Arc::new(StreamActivity::new(1, 1));
        let (mut feed, counters) = ItchFeed::new(config, activity);
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(1 << 16);
        let mut lost = false;
        let reader = BusReader::open(&path, Start::Oldest, 64).unwrap();
        // 20 stocks, 8 directory entries: 12 stocks unnamed.
        let mut generator = Generator::new(5, 20, 400);
        let mut packet = Vec::new();
        let mut message = [0u8; MAX_GENERATED_LEN];
        let mut events = 0;
        for sequence in 1..=2_000u64 {
            let len = generator.next_message(&mut message);
            assert!(mold_packet(
                Session(*b"NAMING0001"),
                sequence,
                [&message[..len]],
                &mut packet
            ));
            let mut sink = EventSink::new(&mut producer, &mut lost).with_bus(Some(&mut bus));
            feed.on_datagram(0, DatagramLine::A, 1_000, 0, &packet, &mut sink);
            sink.publish();
            // Every event published so far is of an instrument named by then, or of one the
            // directory had no room for.
            let named = reader.directory_len();
            while let Some(event) = consumer.try_pop() {
                events += 1;
                let offset = u64::from(event.header.instrument_id - base);
                assert!(
                    offset < named || named == 8,
                    "instrument {offset} published before it was named ({named} named)"
                );
            }
        }
        assert!(events > 1_000, "{events} events");
        let directory = reader.directory();
        assert_eq!(directory.len(), 8, "the directory is full");
        for (offset, entry) in directory.iter().enumerate() {
            assert_eq!(entry.instrument_id, base + offset as u32);
            assert_eq!(entry.venue_id, 2);
            assert_eq!(entry.venue, "nasdaq");
            let symbol = feed.decoder().symbol_of(entry.instrument_id).unwrap();
            assert_eq!(entry.symbol.as_bytes(), symbol);
            assert_eq!(entry.venue_symbol, entry.symbol);
            assert!(entry.symbol.starts_with('S') && entry.symbol.len() == 6);
        }
        let unnamed = counters
            .tallies()
            .find(|(name, _)| *name == "stocks_unnamed_on_bus")
            .map(|(_, count)| count);
        assert_eq!(unnamed, Some(12));
        assert_eq!(feed.decoder().counters().stocks, 20);
    }

    /// A symbol that is not UTF-8 (the wire's bytes are the venue's to send) is named by its
    /// valid start, never a panic; an empty one leaves an entry with an empty symbol.
    #[test]
    fn a_symbol_that_is_not_utf8_is_named_by_its_valid_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let options = BusOptions {
            path: path.clone(),
            geometry: Geometry::new(1 << 10, 4).unwrap(),
            group: None,
        };
        let mut bus = BusWriter::create(&options, 1, 1).unwrap();
        let (mut producer, _consumer) = crate::ring::ring::<Event>(16);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost).with_bus(Some(&mut bus));
        let mut unnamed = 0;
        let mut output = Output {
            sink: &mut sink,
            venue_id: 1,
            venue: "nasdaq",
            unnamed: &mut unnamed,
        };
        output.named(7, b"AB\xffCD");
        output.named(8, b"\xfe\xff");
        assert_eq!(unnamed, 0);
        let reader = BusReader::open(&path, Start::Oldest, 16).unwrap();
        let symbols: Vec<(u32, String)> = reader
            .directory()
            .into_iter()
            .map(|entry| (entry.instrument_id, entry.symbol))
            .collect();
        assert_eq!(symbols, [(7, "AB".to_owned()), (8, String::new())]);
    }
}
