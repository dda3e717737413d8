//! The decoder stage's Databento feed: each connection's byte stream through its own
//! [`RecordStream`] (the `dbn` crate's `DbnFsm`), gateway records (symbol mappings, system and
//! error messages) handled here, market records normalized into events by the [`Normalizer`].
//!
//! Streams are (symbol, schema) pairs in the venue file's order, as for the other venues. A
//! record finds its symbol through the connection's symbol mappings (DBN instrument id to the
//! symbol subscribed) and its schema through its record type.
//!
//! Reconnects follow `databento.recovery`:
//! - `gap`: the dropped connection's instruments get a `Gap` and their books are cleared; the
//!   new session carries on live.
//! - `snapshot`: the same, and the new session starts with an MBO snapshot that rebuilds the
//!   books.
//! - `replay`: no gap and the books stay: the new session replays from the latest record time
//!   per stream, and the records it repeats are skipped. Per stream the feed keeps the time of
//!   the latest record it delivered and how many it delivered with that time; a replayed record
//!   older than that time, or one of the first that many at that time, was delivered already.
//!   If the gateway cannot replay (the data aged out, or it skipped records for a slow reader),
//!   the instruments get their gap after all.
//!
//! Limits (issue 32): a session holds at most `max_instrument_mappings` symbol mappings
//! (`databento.max_instrument_mappings`); a mapping of a new DBN instrument id past that is
//! refused, and the symbol it named gets a `Gap` (`GapReason::Limit`) and a cleared book, since
//! its records under that id are dropped from then on (counted as unknown symbols). An MBO book
//! rests at most `max_orders_per_book` orders (`databento.max_orders_per_book`, see
//! `normalize`). Each time either is reached the venue's `book_limits` (and `book_gaps`) count
//! it; the first time, per limit, one sample is logged.
//!
//! **Invariant:** only the connection that owns a stream (the latest whose gateway mapped the
//! stream's symbol) delivers it, so two sessions never both reach the strategy.
//! **Invariant:** no allocation per record: the maps grow only on symbol mappings.

use super::normalize::{typed, NormalizeError, Normalizer};
use super::stream::{Item, RecordStream};
use crate::config::Recovery;
use crate::event::{Body, Event, Gap, GapReason, InstrumentId, VenueId, VenueState};
use crate::hash::IdMap;
use crate::net::ConnId;
use crate::venue::feed::{
    own_header, EventSink, Feed, FeedCounters, FeedWriters, MalformedSample, MalformedSampler,
    MessageKind, ReplyQueue, StreamActivity, VenueReply,
};
use dbn::{ErrorMsg, SymbolMappingMsg, SystemMsg};
use std::collections::HashMap;
use std::sync::Arc;

/// The low half of the reply id that says a connection's gateway session started (its DBN
/// stream began): the answer to the connection's one request.
pub const SESSION_STARTED: u64 = 0xffff_ffff;
/// The `VenueReply` error code tickwire uses for a connection whose DBN stream cannot be read
/// any further (the control thread recycles it).
pub const STREAM_BROKEN: i64 = -1;
/// `VenueStatus` reason codes of gateway messages: a system message's code plus
/// `SYSTEM_REASON`, an error message's code plus `ERROR_REASON`.
pub const SYSTEM_REASON: u32 = 0x100;
pub const ERROR_REASON: u32 = 0x200;

const NO_CONN: ConnId = ConnId::MAX;
const NO_CHANNEL: u8 = u8::MAX;
const REPLIES_KEPT: usize = 256;

/// The records a Databento gateway session carries, market records by the schema that carries
/// them (Databento's schema names; a schema of several intervals counts as one), gateway
/// records by their type, as [`FeedCounters`] counts them (positions are [`Kind`]'s).
pub const MESSAGE_KINDS: &[MessageKind] = &[
    MessageKind::market("mbo"),
    // mbp-1 and tbbo records (both `MBP_1`).
    MessageKind::market("mbp-1"),
    MessageKind::market("mbp-10"),
    MessageKind::market("trades"),
    // bbo-1s and bbo-1m.
    MessageKind::market("bbo"),
    // cbbo-1s and cbbo-1m.
    MessageKind::market("cbbo"),
    MessageKind::market("cmbp-1"),
    MessageKind::market("tcbbo"),
    // Every interval, and the legacy OHLCV record.
    MessageKind::market("ohlcv"),
    MessageKind::market("status"),
    MessageKind::market("imbalance"),
    MessageKind::market("statistics"),
    MessageKind::market("definition"),
    MessageKind::other("symbol_mapping"),
    // Heartbeats, subscription acknowledgements, the gateway's warnings.
    MessageKind::other("system"),
    MessageKind::other("error"),
    // A session's DBN metadata: the gateway started the session.
    MessageKind::other("metadata"),
    // A record of a type no schema the venue file lists carries.
    MessageKind::other("unlisted_record"),
];

// Every `Kind` has its entry in the table (a position past it would count nothing).
const _: () = assert!(MESSAGE_KINDS.len() == Kind::UnlistedRecord as usize + 1);

/// A record's position in [`MESSAGE_KINDS`].
#[derive(Clone, Copy)]
enum Kind {
    Mbo = 0,
    Mbp1 = 1,
    Mbp10 = 2,
    Trades = 3,
    Bbo = 4,
    Cbbo = 5,
    Cmbp1 = 6,
    Tcbbo = 7,
    Ohlcv = 8,
    Status = 9,
    Imbalance = 10,
    Statistics = 11,
    Definition = 12,
    SymbolMapping = 13,
    System = 14,
    Error = 15,
    Metadata = 16,
    UnlistedRecord = 17,
}

/// The kind a market record of type `rtype` counts as (looked up once per type, when the feed
/// is built).
fn record_kind(rtype: u8) -> Kind {
    use dbn::rtype;
    match rtype {
        rtype::MBO => Kind::Mbo,
        rtype::MBP_1 => Kind::Mbp1,
        rtype::MBP_10 => Kind::Mbp10,
        rtype::MBP_0 => Kind::Trades,
        rtype::BBO_1S | rtype::BBO_1M => Kind::Bbo,
        rtype::CBBO_1S | rtype::CBBO_1M => Kind::Cbbo,
        rtype::CMBP_1 => Kind::Cmbp1,
        rtype::TCBBO => Kind::Tcbbo,
        rtype::OHLCV_1S
        | rtype::OHLCV_1M
        | rtype::OHLCV_1H
        | rtype::OHLCV_1D
        | rtype::OHLCV_EOD
        | rtype::OHLCV_DEPRECATED => Kind::Ohlcv,
        rtype::STATUS => Kind::Status,
        rtype::IMBALANCE => Kind::Imbalance,
        rtype::STATISTICS => Kind::Statistics,
        rtype::INSTRUMENT_DEF => Kind::Definition,
        // A record type is a byte: any other is one no schema tickwire subscribes carries.
        _ => Kind::UnlistedRecord,
    }
}

/// What the feed needs to know about its venue.
pub struct FeedConfig {
    pub venue_id: VenueId,
    pub venue_name: String,
    pub symbols: Vec<String>,
    /// DBN schemas, in the venue file's order.
    pub channels: Vec<String>,
    pub instrument_base: InstrumentId,
    pub recovery: Recovery,
    /// The most orders one MBO book rests (`databento.max_orders_per_book`).
    pub max_orders_per_book: usize,
    /// The most symbol mappings (DBN instrument ids) one gateway session holds
    /// (`databento.max_instrument_mappings`).
    pub max_instrument_mappings: usize,
}

/// One connection's gateway session.
struct Session {
    stream: RecordStream,
    /// DBN instrument id to symbol index, from the session's symbol mappings (looked up once per
    /// record: a multiply hash, not SipHash).
    instruments: IdMap<u32>,
    /// The stream could not be read further: everything until the reconnect is dropped.
    broken: bool,
}

/// Per stream: what it delivered last and what a replay must skip.
#[derive(Clone, Copy, Default)]
struct Mark {
    /// `ts_event` of the latest record delivered, and how many were delivered with it.
    ts: u64,
    count: u32,
    /// While a replay repeats what was delivered: skip records before `skip_ts`, and the first
    /// `skip_count` at `skip_ts`.
    skipping: bool,
    skip_ts: u64,
    skip_count: u32,
}

pub struct DatabentoFeed {
    config: FeedConfig,
    sessions: Vec<Option<Session>>,
    symbol_index: HashMap<String, u32>,
    /// By record type: the venue's channel (schema index) it belongs to.
    channel_of: [u8; 256],
    /// By record type: its position in [`MESSAGE_KINDS`].
    kind_of: [u8; 256],
    owners: Vec<ConnId>,
    marks: Vec<Mark>,
    normalizer: Normalizer,
    writers: FeedWriters,
    activity: Arc<StreamActivity>,
    replies: ReplyQueue,
    malformed: MalformedSampler,
    /// Whether the order limit, and the mapping limit, have been logged (once each).
    logged_order_limit: bool,
    logged_mapping_limit: bool,
}

/// The record types a schema's records carry.
pub fn schema_rtypes(schema: &str) -> &'static [u8] {
    use dbn::rtype;
    match schema {
        "mbo" => &[rtype::MBO],
        "mbp-1" | "tbbo" => &[rtype::MBP_1],
        "mbp-10" => &[rtype::MBP_10],
        "trades" => &[rtype::MBP_0],
        "bbo-1s" => &[rtype::BBO_1S],
        "bbo-1m" => &[rtype::BBO_1M],
        "cbbo-1s" => &[rtype::CBBO_1S],
        "cbbo-1m" => &[rtype::CBBO_1M],
        "cmbp-1" => &[rtype::CMBP_1],
        "tcbbo" => &[rtype::TCBBO],
        "ohlcv-1s" => &[rtype::OHLCV_1S, rtype::OHLCV_DEPRECATED],
        "ohlcv-1m" => &[rtype::OHLCV_1M, rtype::OHLCV_DEPRECATED],
        "ohlcv-1h" => &[rtype::OHLCV_1H, rtype::OHLCV_DEPRECATED],
        "ohlcv-1d" => &[rtype::OHLCV_1D, rtype::OHLCV_DEPRECATED],
        "ohlcv-eod" => &[rtype::OHLCV_EOD],
        "status" => &[rtype::STATUS],
        "imbalance" => &[rtype::IMBALANCE],
        "statistics" => &[rtype::STATISTICS],
        "definition" => &[rtype::INSTRUMENT_DEF],
        _ => &[],
    }
}

impl DatabentoFeed {
    pub fn new(config: FeedConfig) -> (DatabentoFeed, FeedCounters) {
        let channels = config.channels.len().max(1);
        let streams = config.symbols.len() * channels;
        let activity = Arc::new(StreamActivity::new(config.symbols.len(), channels));
        let (writers, counters) = FeedCounters::new(MESSAGE_KINDS, Arc::clone(&activity));
        let kind_of = std::array::from_fn(|rtype| record_kind(rtype as u8) as u8);
        let mut channel_of = [NO_CHANNEL; 256];
        // A record type two listed schemas share (mbp-1 and tbbo) goes to the first listed.
        for (index, schema) in config.channels.iter().enumerate().rev() {
            for &rtype in schema_rtypes(schema) {
                channel_of[usize::from(rtype)] = index as u8;
            }
        }
        let symbol_index = config
            .symbols
            .iter()
            .enumerate()
            .map(|(index, symbol)| (symbol.clone(), index as u32))
            .collect();
        let feed = DatabentoFeed {
            normalizer: Normalizer::new(config.venue_id)
                .with_max_orders_per_book(config.max_orders_per_book),
            sessions: Vec::new(),
            symbol_index,
            channel_of,
            kind_of,
            owners: vec![NO_CONN; streams],
            marks: vec![Mark::default(); streams],
            writers,
            activity,
            replies: ReplyQueue::new(REPLIES_KEPT),
            malformed: MalformedSampler::default(),
            logged_order_limit: false,
            logged_mapping_limit: false,
            config,
        };
        (feed, counters)
    }

    fn channels(&self) -> usize {
        self.config.channels.len().max(1)
    }

    fn reply(&mut self, reply: VenueReply) {
        if !self.replies.push(reply) {
            self.writers.replies_dropped.increment();
        }
    }

    fn malformed(&mut self, error: &dyn std::fmt::Display, payload: &[u8], recv_ts_ns: u64) {
        self.writers.malformed.increment();
        self.malformed
            .offer(self.config.venue_id, error, 0, payload, recv_ts_ns);
    }

    /// A gateway notice for the strategy: a `VenueStatus` (still live) with the gateway's code.
    fn status(&self, reason_code: u32, now_ns: u64, sink: &mut EventSink<'_>) {
        sink.push(Event::new(
            own_header(
                self.config.venue_id,
                crate::venue::feed::ALL_INSTRUMENTS,
                now_ns,
            ),
            Body::VenueStatus(crate::event::VenueStatus::new(
                VenueState::Live,
                reason_code,
                0,
            )),
        ));
    }

    /// Every instrument connection `conn` owns gets a gap (and a cleared book); a replay
    /// pending for them is called off.
    fn gap_owned(
        &mut self,
        conn: ConnId,
        reason: GapReason,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let channels = self.channels();
        for symbol in 0..self.config.symbols.len() {
            let streams = symbol * channels..(symbol + 1) * channels;
            if !self.owners[streams.clone()].contains(&conn) {
                continue;
            }
            for stream in streams {
                self.marks[stream].skipping = false;
            }
            let instrument = self.config.instrument_base + symbol as InstrumentId;
            self.normalizer.reset_instrument(instrument);
            sink.push(Event::new(
                own_header(self.config.venue_id, instrument, now_ns),
                Body::Gap(Gap::new(reason, 0, 0)),
            ));
        }
    }

    fn mapping(
        &mut self,
        conn: ConnId,
        mapping: &SymbolMappingMsg,
        payload: &[u8],
        recv_ts_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        let Ok(symbol) = mapping.stype_in_symbol() else {
            self.writers.unknown_symbol.increment();
            return;
        };
        let Some(&index) = self.symbol_index.get(symbol) else {
            self.writers.unknown_symbol.increment();
            return;
        };
        let Some(Some(session)) = self.sessions.get_mut(conn as usize) else {
            return;
        };
        let id = mapping.hd.instrument_id;
        if session.instruments.len() >= self.config.max_instrument_mappings
            && !session.instruments.contains_key(&id)
        {
            // The map is full: this id's records will be dropped, so the symbol's stream is
            // incomplete from here on; its book goes and the strategy is told.
            let limit = self.config.max_instrument_mappings;
            let instrument = self.config.instrument_base + index;
            self.writers.book_limits.increment();
            self.writers.book_gaps.increment();
            self.normalizer.reset_instrument(instrument);
            sink.push(Event::new(
                own_header(self.config.venue_id, instrument, recv_ts_ns),
                Body::Gap(Gap::new(GapReason::Limit, 0, 0)),
            ));
            if !std::mem::replace(&mut self.logged_mapping_limit, true) {
                self.malformed.offer_limit(
                    self.config.venue_id,
                    // Short: a sample keeps 96 bytes of it.
                    &format_args!(
                        "DBN id {id}: mapping refused at the session's limit {limit}; \
                         instrument {instrument} gap"
                    ),
                    payload,
                    recv_ts_ns,
                );
            }
            return;
        }
        session.instruments.insert(id, index);
        // This connection now delivers the symbol's streams; a replaying one skips what was
        // delivered already.
        let channels = self.channels();
        let replay = self.config.recovery == Recovery::Replay;
        for stream in index as usize * channels..(index as usize + 1) * channels {
            if self.owners[stream] == conn {
                continue;
            }
            self.owners[stream] = conn;
            let mark = &mut self.marks[stream];
            mark.skipping = replay && mark.count > 0;
            mark.skip_ts = mark.ts;
            mark.skip_count = mark.count;
        }
    }

    fn system(&mut self, conn: ConnId, message: &SystemMsg, now_ns: u64, sink: &mut EventSink<'_>) {
        if message.is_heartbeat() {
            return;
        }
        let code = message.code;
        let text = message.msg().unwrap_or("");
        self.reply(VenueReply::notice(
            self.config.venue_id,
            conn,
            code,
            None,
            text.as_bytes(),
        ));
        if code == dbn::SystemCode::SlowReaderWarning as u8 {
            self.status(SYSTEM_REASON + u32::from(code), now_ns, sink);
        }
    }

    fn error(&mut self, conn: ConnId, message: &ErrorMsg, now_ns: u64, sink: &mut EventSink<'_>) {
        let code = message.code;
        let text = message.err().unwrap_or("");
        self.reply(VenueReply::notice(
            self.config.venue_id,
            conn,
            0,
            Some(i64::from(code)),
            text.as_bytes(),
        ));
        self.status(ERROR_REASON + u32::from(code), now_ns, sink);
        // Records are lost for good: the replay cannot be served, or the gateway skipped
        // records to catch a slow reader up.
        if code == dbn::ErrorCode::ReplayDataAgedOut as u8
            || code == dbn::ErrorCode::SkippedRecordsAfterSlowReading as u8
        {
            self.gap_owned(conn, GapReason::Unknown, now_ns, sink);
        }
    }
}

impl DatabentoFeed {
    /// One chunk of connection `conn`'s byte stream: every record it completes.
    fn chunk(&mut self, conn: ConnId, recv_ts_ns: u64, payload: &[u8], sink: &mut EventSink<'_>) {
        let slot = conn as usize;
        if self.sessions.len() <= slot {
            self.sessions.resize_with(slot + 1, || None);
        }
        let session = self.sessions[slot].get_or_insert_with(|| Session {
            stream: RecordStream::new(),
            instruments: IdMap::with_capacity_and_hasher(64, Default::default()),
            broken: false,
        });
        if session.broken {
            return;
        }
        session.stream.feed(payload);
        let channels = self.channels();
        loop {
            let Some(Some(session)) = self.sessions.get_mut(slot) else {
                return;
            };
            let record = match session.stream.next() {
                None => return,
                Some(Ok(Item::Metadata(_))) => {
                    self.writers.message(Kind::Metadata as usize);
                    let id = (u64::from(conn) << 32) | SESSION_STARTED;
                    self.reply(VenueReply::new(self.config.venue_id, id, None, b""));
                    continue;
                }
                Some(Ok(Item::Record(record))) => record,
                Some(Err(error)) => {
                    // The stream is misaligned or not DBN: nothing after this can be read.
                    session.broken = true;
                    let text = error.to_string();
                    self.malformed(&text, payload, recv_ts_ns);
                    self.reply(VenueReply::notice(
                        self.config.venue_id,
                        conn,
                        0,
                        Some(STREAM_BROKEN),
                        text.as_bytes(),
                    ));
                    self.gap_owned(conn, GapReason::Unknown, recv_ts_ns, sink);
                    return;
                }
            };
            let header = record.header();
            let rtype = header.rtype;
            match rtype {
                dbn::rtype::SYMBOL_MAPPING => {
                    self.writers.message(Kind::SymbolMapping as usize);
                    // `typed` checks the length: `get` alone panics on a short record.
                    match typed::<SymbolMappingMsg>(&record) {
                        Ok(mapping) => {
                            let mapping = mapping.clone();
                            self.mapping(conn, &mapping, payload, recv_ts_ns, sink);
                        }
                        Err(error) => self.malformed(&error, payload, recv_ts_ns),
                    }
                    continue;
                }
                dbn::rtype::SYSTEM => {
                    self.writers.message(Kind::System as usize);
                    // `typed` checks the length: `get` alone panics on a short record.
                    match typed::<SystemMsg>(&record) {
                        Ok(message) => {
                            let message = message.clone();
                            self.system(conn, &message, recv_ts_ns, sink);
                        }
                        Err(error) => self.malformed(&error, payload, recv_ts_ns),
                    }
                    continue;
                }
                dbn::rtype::ERROR => {
                    self.writers.message(Kind::Error as usize);
                    // `typed` checks the length: `get` alone panics on a short record.
                    match typed::<ErrorMsg>(&record) {
                        Ok(message) => {
                            let message = message.clone();
                            self.error(conn, &message, recv_ts_ns, sink);
                        }
                        Err(error) => self.malformed(&error, payload, recv_ts_ns),
                    }
                    continue;
                }
                _ => {}
            }
            let Some(&symbol) = session.instruments.get(&header.instrument_id) else {
                self.writers.unknown_symbol.increment();
                continue;
            };
            let channel = self.channel_of[usize::from(rtype)];
            if channel == NO_CHANNEL {
                self.writers.message(Kind::UnlistedRecord as usize);
                continue;
            }
            let stream = symbol as usize * channels + usize::from(channel);
            if self.owners.get(stream) != Some(&conn) {
                self.writers.duplicates.increment();
                continue;
            }
            let ts = header.ts_event;
            let mark = &mut self.marks[stream];
            if mark.skipping {
                if ts < mark.skip_ts || (ts == mark.skip_ts && mark.skip_count > 0) {
                    if ts == mark.skip_ts {
                        mark.skip_count -= 1;
                    }
                    self.writers.duplicates.increment();
                    continue;
                }
                mark.skipping = false;
            }
            if ts == mark.ts {
                mark.count += 1;
            } else {
                mark.ts = ts;
                mark.count = 1;
                self.activity.mark_replay(stream, ts);
            }
            self.activity.saw(stream, recv_ts_ns);
            self.writers
                .message(usize::from(self.kind_of[usize::from(rtype)]));
            let instrument = self.config.instrument_base + symbol;
            let saturated = &mut self.writers.book_saturated;
            if let Err(error) =
                self.normalizer
                    .normalize(record, instrument, recv_ts_ns, &mut |event| {
                        if event.header.flags & crate::event::flags::SATURATED != 0 {
                            saturated.increment();
                        }
                        sink.push(event)
                    })
            {
                match error {
                    NormalizeError::Short { .. } => self.writers.malformed.increment(),
                    // The book is unchanged: no resync, the record is counted as refused.
                    NormalizeError::Book { .. } => self.writers.book_refused.increment(),
                    // The book was dropped and the gap sent: logged once.
                    NormalizeError::BookLimit { .. } => {
                        self.writers.book_limits.increment();
                        self.writers.book_gaps.increment();
                        if !std::mem::replace(&mut self.logged_order_limit, true) {
                            self.malformed.offer_limit(
                                self.config.venue_id,
                                &error,
                                payload,
                                recv_ts_ns,
                            );
                        }
                        continue;
                    }
                }
                // Either is worth a (rate-limited) log line.
                self.malformed
                    .offer(self.config.venue_id, &error, 0, payload, recv_ts_ns);
            }
        }
    }
}

impl Feed for DatabentoFeed {
    #[inline]
    fn on_message(
        &mut self,
        conn: ConnId,
        recv_ts_ns: u64,
        payload: &[u8],
        sink: &mut EventSink<'_>,
    ) {
        self.chunk(conn, recv_ts_ns, payload, sink);
    }

    fn book_events(&self, instrument: InstrumentId) -> usize {
        self.normalizer.book_events(instrument)
    }

    fn emit_books(
        &mut self,
        instrument: InstrumentId,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) -> usize {
        self.normalizer
            .emit_books(instrument, now_ns, &mut |event| sink.push(event))
    }

    fn on_disconnect(
        &mut self,
        conn: ConnId,
        _instruments: std::ops::Range<InstrumentId>,
        now_ns: u64,
        sink: &mut EventSink<'_>,
    ) {
        if let Some(session) = self.sessions.get_mut(conn as usize) {
            *session = None;
        }
        // A replay brings back everything missed, into books that are still right; otherwise
        // the instruments lost records.
        if self.config.recovery != Recovery::Replay {
            self.gap_owned(conn, GapReason::Reconnect, now_ns, sink);
        }
        for owner in &mut self.owners {
            if *owner == conn {
                *owner = NO_CONN;
            }
        }
    }

    fn take_malformed(&mut self) -> Option<MalformedSample> {
        self.malformed.take()
    }

    fn take_reply(&mut self) -> Option<VenueReply> {
        self.replies.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use dbn::encode::{DbnMetadataEncoder, EncodeRecord};
    use dbn::{FlagSet, MboMsg, RecordHeader, SType, Schema};

    const ES: u32 = 1001;

    fn metadata() -> Vec<u8> {
        let metadata = dbn::Metadata::builder()
            .dataset("GLBX.MDP3".to_owned())
            .schema(Some(Schema::Mbo))
            .start(0)
            .stype_in(Some(SType::RawSymbol))
            .stype_out(SType::InstrumentId)
            .build();
        let mut bytes = Vec::new();
        DbnMetadataEncoder::new(&mut bytes)
            .encode(&metadata)
            .unwrap();
        bytes
    }

    fn record<R: dbn::encode::DbnEncodable>(bytes: &mut Vec<u8>, record: &R) {
        let mut encoder = dbn::encode::DbnRecordEncoder::new(bytes);
        encoder.encode_record(record).unwrap();
    }

    fn mapping(bytes: &mut Vec<u8>, symbol: &str) {
        mapping_of(bytes, symbol, ES);
    }

    /// A mapping of DBN instrument `id` to `symbol`.
    fn mapping_of(bytes: &mut Vec<u8>, symbol: &str, id: u32) {
        let mapping = SymbolMappingMsg::new(
            id,
            1,
            SType::RawSymbol,
            symbol,
            SType::InstrumentId,
            &id.to_string(),
            0,
            u64::MAX,
        )
        .unwrap();
        record(bytes, &mapping);
    }

    /// An add of order `id` at `ts`, the last record of its event.
    fn add(bytes: &mut Vec<u8>, id: u64, ts: u64) {
        let mbo = MboMsg {
            hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 1, ES, ts),
            order_id: id,
            price: 5_000_000_000_000 + id as i64 * 250_000_000,
            size: 1,
            flags: FlagSet::new(dbn::flags::LAST),
            channel_id: 0,
            action: b'A' as std::ffi::c_char,
            side: b'B' as std::ffi::c_char,
            ts_recv: ts,
            ts_in_delta: 0,
            sequence: id as u32,
        };
        record(bytes, &mbo);
    }

    fn feed(recovery: Recovery) -> (DatabentoFeed, FeedCounters) {
        DatabentoFeed::new(FeedConfig {
            venue_id: 3,
            venue_name: "db".to_owned(),
            symbols: vec!["ESZ6".to_owned()],
            channels: vec!["mbo".to_owned()],
            instrument_base: 0,
            recovery,
            max_orders_per_book: crate::book::mbo::DEFAULT_MAX_ORDERS,
            max_instrument_mappings: 64,
        })
    }

    /// Runs `bytes` through the feed on `conn` (one byte at a time) and returns the events.
    fn run(feed: &mut DatabentoFeed, conn: ConnId, bytes: &[u8]) -> Vec<Event> {
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(1024);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        for chunk in bytes.chunks(1) {
            feed.on_message(conn, 7, chunk, &mut sink);
        }
        sink.publish();
        let mut events = Vec::new();
        while let Some(event) = consumer.try_pop() {
            events.push(event);
        }
        events
    }

    fn added(events: &[Event]) -> Vec<u64> {
        events
            .iter()
            .filter(|e| e.header.kind == EventKind::BookLevel)
            .map(|e| e.header.venue_seq)
            .collect()
    }

    #[test]
    fn a_replay_skips_what_was_delivered_and_misses_nothing() {
        let (mut feed, counters) = feed(Recovery::Replay);
        let mut first = metadata();
        mapping(&mut first, "ESZ6");
        add(&mut first, 1, 10);
        add(&mut first, 2, 20);
        add(&mut first, 3, 20);
        let events = run(&mut feed, 0, &first);
        assert_eq!(added(&events), [1, 2, 3]);
        assert_eq!(feed.activity.replay_from(0), 20);
        // The session's start answers the connection's request.
        let reply = feed.take_reply().expect("session started");
        assert_eq!(reply.id, SESSION_STARTED);

        // The connection drops: with a replay coming, no gap and the book stays.
        let (mut producer, _consumer) = crate::ring::ring::<Event>(16);
        let mut lost = false;
        feed.on_disconnect(0, 0..1, 9, &mut EventSink::new(&mut producer, &mut lost));
        assert_eq!(producer.free_slots(), 16, "no gap with a replay");

        // The replay from ts 10 repeats records 1..3 (two at ts 20), then goes on.
        let mut second = metadata();
        mapping(&mut second, "ESZ6");
        add(&mut second, 1, 10);
        add(&mut second, 2, 20);
        add(&mut second, 3, 20);
        add(&mut second, 4, 20);
        add(&mut second, 5, 30);
        let events = run(&mut feed, 1, &second);
        assert_eq!(added(&events), [4, 5], "nothing repeated, nothing missed");
        assert_eq!(counters.duplicates.get(), 3);
        assert_eq!(counters.malformed.get(), 0, "the book saw no duplicate add");
    }

    #[test]
    fn a_gap_recovery_gives_each_owned_instrument_a_gap_and_a_broken_stream_is_reported() {
        let (mut feed, counters) = feed(Recovery::Gap);
        let mut bytes = metadata();
        mapping(&mut bytes, "ESZ6");
        add(&mut bytes, 1, 10);
        let events = run(&mut feed, 2, &bytes);
        assert_eq!(
            events
                .iter()
                .filter(|e| e.header.kind == EventKind::Quote)
                .count(),
            1
        );
        let (mut producer, mut consumer) = crate::ring::ring::<Event>(16);
        let mut lost = false;
        let mut sink = EventSink::new(&mut producer, &mut lost);
        feed.on_disconnect(2, 0..1, 9, &mut sink);
        sink.publish();
        let gap = consumer.try_pop().expect("a gap");
        assert!(matches!(gap.body(), Body::Gap(g) if g.reason() == GapReason::Reconnect));
        assert_eq!(gap.header.instrument_id, 0);
        while feed.take_reply().is_some() {}

        // Not DBN at all: reported once, nothing decoded, the rest ignored.
        let events = run(&mut feed, 2, b"HTTP/1.1 400 Bad Request\r\n\r\n");
        assert!(events.iter().all(|e| e.header.kind != EventKind::BookLevel));
        let reply = feed.take_reply().expect("the stream is reported broken");
        assert_eq!(reply.error, Some(STREAM_BROKEN));
        assert_eq!(counters.malformed.get(), 1);
    }

    #[test]
    fn a_short_v2_record_from_the_gateway_breaks_the_stream_cleanly() {
        // Issue 24: a 16-byte STATISTICS header after v2 metadata panicked in dbn's upgrade of
        // the record to v3, on the decoder thread (the release profile aborts on a panic).
        let (mut feed, counters) = feed(Recovery::Gap);
        let metadata = dbn::Metadata::builder()
            .version(2)
            .dataset("GLBX.MDP3".to_owned())
            .schema(Some(Schema::Mbo))
            .start(0)
            .stype_in(Some(SType::RawSymbol))
            .stype_out(SType::InstrumentId)
            .build();
        let mut bytes = Vec::new();
        DbnMetadataEncoder::new(&mut bytes)
            .encode(&metadata)
            .unwrap();
        // v2 symbol mappings and MBO records have the v3 layout.
        mapping(&mut bytes, "ESZ6");
        add(&mut bytes, 1, 10);
        let mut short = [0u8; 16];
        short[0] = 4;
        short[1] = dbn::rtype::STATISTICS;
        bytes.extend_from_slice(&short);
        add(&mut bytes, 2, 11);
        let events = run(&mut feed, 2, &bytes);
        assert_eq!(
            added(&events),
            [1],
            "the add before the bad record, none after"
        );
        assert!(
            matches!(events.last().map(Event::body), Some(Body::Gap(g)) if g.reason() == GapReason::Unknown),
            "the owned instrument's gap: {events:?}"
        );
        let reply = loop {
            let reply = feed.take_reply().expect("the stream is reported broken");
            if reply.error.is_some() {
                break reply;
            }
        };
        assert_eq!(reply.error, Some(STREAM_BROKEN));
        assert!(
            reply
                .message()
                .contains("DBN v2 rtype 0x18 record of 16 bytes, under its 64-byte layout"),
            "{}",
            reply.message()
        );
        assert_eq!(counters.malformed.get(), 1);
    }

    #[test]
    fn saturated_level_sizes_are_counted() {
        let (mut feed, counters) = feed(Recovery::Gap);
        let mut bytes = metadata();
        mapping(&mut bytes, "ESZ6");
        for id in 1..=3u64 {
            let mbo = MboMsg {
                hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 1, ES, 10),
                order_id: id,
                price: 5_000_000_000_000,
                size: u32::MAX,
                flags: FlagSet::new(dbn::flags::LAST),
                channel_id: 0,
                action: b'A' as std::ffi::c_char,
                side: b'B' as std::ffi::c_char,
                ts_recv: 10,
                ts_in_delta: 0,
                sequence: id as u32,
            };
            record(&mut bytes, &mbo);
        }
        let events = run(&mut feed, 2, &bytes);
        let flagged = events
            .iter()
            .filter(|e| e.header.flags & crate::event::flags::SATURATED != 0)
            .count();
        assert_eq!(flagged, 2, "the third add's level and its quote");
        assert_eq!(counters.book_saturated.get(), 2);
    }

    fn limit_gaps(events: &[Event]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e.body(), Body::Gap(g) if g.reason() == GapReason::Limit))
            .count()
    }

    /// Issue 32: an L3 book fed past its order limit is dropped with a gap each time, rebuilt
    /// from what follows, counted each time and logged once; its table never grows past the
    /// limit.
    #[test]
    fn a_book_fed_past_its_order_limit_is_dropped_with_a_gap_counted_and_logged_once() {
        const LIMIT: usize = 4;
        let (mut feed, counters) = feed(Recovery::Gap);
        feed.config.max_orders_per_book = LIMIT;
        feed.normalizer = Normalizer::new(3).with_max_orders_per_book(LIMIT);
        let mut bytes = metadata();
        mapping(&mut bytes, "ESZ6");
        for id in 1..=12 {
            add(&mut bytes, id, 10 + id);
        }
        let events = run(&mut feed, 0, &bytes);
        // 1..=4 rest; 5 is refused (gap, book dropped); 6..=9 rest; 10 refused; 11, 12 rest.
        assert_eq!(added(&events), [1, 2, 3, 4, 6, 7, 8, 9, 11, 12]);
        assert_eq!(limit_gaps(&events), 2);
        let gap = events
            .iter()
            .position(|e| e.header.kind == EventKind::Gap)
            .expect("a gap");
        assert_eq!(events[gap].header.instrument_id, 0);
        assert_eq!(
            events[gap - 1].header.venue_seq,
            4,
            "the gap comes after the last add that fit"
        );
        assert_eq!(counters.book_limits.get(), 2);
        assert_eq!(counters.book_gaps.get(), 2);
        assert_eq!(counters.book_refused.get(), 0);
        let book = feed.normalizer.book(0).expect("the book");
        assert_eq!(book.orders(), 2, "rebuilt from what followed the last drop");
        let sample = feed.take_malformed().expect("the limit is logged");
        assert_eq!(sample.kind, crate::venue::feed::SampleKind::Limit);
        assert!(
            sample.error().contains("limit of 4 orders"),
            "{}",
            sample.error()
        );
        // The second drop is counted, not logged again.
        let mut more = Vec::new();
        for id in 13..=20 {
            add(&mut more, id, 30 + id);
        }
        let events = run(&mut feed, 0, &more);
        // 13, 14 join 11, 12; 15 is refused; 16..=19 rest; 20 refused.
        assert_eq!(limit_gaps(&events), 2);
        assert_eq!(counters.book_limits.get(), 4);
        assert!(feed.take_malformed().is_none(), "logged once");
    }

    /// Issue 32: a session's symbol mappings stop at their limit: a mapping of a new DBN id past
    /// it is refused, its symbol gets a gap, its records are dropped as unknown; a mapping of an
    /// id already held still goes through.
    #[test]
    fn symbol_mappings_past_the_limit_are_refused_with_a_gap_counted_and_logged_once() {
        let (mut feed, counters) = feed(Recovery::Gap);
        feed.config.max_instrument_mappings = 3;
        let mut bytes = metadata();
        // A parent symbology maps many ids to one symbol.
        for id in [ES, ES + 1, ES + 2, ES + 3, ES + 4, ES] {
            mapping_of(&mut bytes, "ESZ6", id);
        }
        add(&mut bytes, 1, 10);
        let events = run(&mut feed, 0, &bytes);
        assert_eq!(limit_gaps(&events), 2, "{events:?}");
        assert_eq!(added(&events), [1], "the mapped id still delivers");
        let Some(Some(session)) = feed.sessions.first() else {
            panic!("a session");
        };
        assert_eq!(session.instruments.len(), 3);
        assert_eq!(counters.book_limits.get(), 2);
        assert_eq!(counters.book_gaps.get(), 2);
        let sample = feed.take_malformed().expect("the limit is logged");
        assert_eq!(sample.kind, crate::venue::feed::SampleKind::Limit);
        assert!(
            sample
                .error()
                .contains("mapping refused at the session's limit 3"),
            "{}",
            sample.error()
        );
        // A record under a refused id: dropped as an unknown symbol.
        let mut more = Vec::new();
        let mut refused = MboMsg {
            hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 1, ES + 4, 20),
            order_id: 2,
            price: 5_000_000_000_000,
            size: 1,
            flags: FlagSet::new(dbn::flags::LAST),
            channel_id: 0,
            action: b'A' as std::ffi::c_char,
            side: b'B' as std::ffi::c_char,
            ts_recv: 20,
            ts_in_delta: 0,
            sequence: 2,
        };
        record(&mut more, &refused);
        mapping_of(&mut more, "ESZ6", ES + 5);
        refused.hd.instrument_id = ES + 5;
        record(&mut more, &refused);
        let before = counters.unknown_symbol.get();
        let events = run(&mut feed, 0, &more);
        assert!(added(&events).is_empty());
        assert_eq!(limit_gaps(&events), 1);
        assert_eq!(counters.unknown_symbol.get(), before + 2);
        assert_eq!(counters.book_limits.get(), 3);
        assert!(feed.take_malformed().is_none(), "logged once");
    }

    #[test]
    fn records_are_counted_by_kind_and_a_refused_update_is_not_a_resync() {
        let (mut feed, counters) = feed(Recovery::Gap);
        let mut bytes = metadata();
        mapping(&mut bytes, "ESZ6");
        add(&mut bytes, 1, 10);
        // A cancel of an order the book does not hold: refused, the book unchanged.
        let cancel = MboMsg {
            hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 1, ES, 11),
            order_id: 99,
            price: 5_000_000_000_000,
            size: 1,
            flags: FlagSet::new(dbn::flags::LAST),
            channel_id: 0,
            action: b'C' as std::ffi::c_char,
            side: b'B' as std::ffi::c_char,
            ts_recv: 11,
            ts_in_delta: 0,
            sequence: 99,
        };
        record(&mut bytes, &cancel);
        run(&mut feed, 0, &bytes);
        assert_eq!(counters.message("metadata"), 1);
        assert_eq!(counters.message("symbol_mapping"), 1);
        assert_eq!(counters.message("mbo"), 2);
        assert_eq!(counters.market_messages(), 2);
        assert_eq!(counters.book_refused.get(), 1);
        assert_eq!(counters.book_resyncs.get(), 0, "nothing was resynchronised");
        assert_eq!(
            counters.malformed.get(),
            0,
            "the record itself was well formed"
        );
        assert!(feed.take_malformed().is_some(), "the refusal is logged");
    }
}
