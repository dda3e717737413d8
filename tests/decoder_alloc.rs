//! Issue 32, item 11: the decoder stage allocates nothing in steady state, for every venue.
//!
//! Each venue's feed is built as the appliance builds it (`venue::feed_for` on the shipped
//! simulator venue file) and handed the frames the venue's simulator sends (its generators:
//! `SyntheticSource` for Binance USD-M, wrapped by `SpotSource` for Binance Spot JSON and by
//! `SbeSource` for Spot's SBE frames, `thalex::notifications` for Thalex, `bybit::messages` for
//! Bybit spot and linear, `okx::messages` for OKX,
//! `databento::benchmark_batch` behind the gateway's metadata and symbol mappings for
//! Databento), each through an `EventSink` that writes the event ring, counts the events and
//! writes the shared-memory bus, as the decoder stage's does; the events are taken off the ring
//! after each frame as the strategy stage takes them, and the feed's control work (snapshot
//! requests, replies, malformed samples) is asked for after each frame as the stage asks.
//! After a warm-up in which the books sync from the simulator's REST snapshots (served as the
//! simulator serves them) or from the stream's own snapshots, the allocations of a steady-state
//! run are counted: zero, by the binary's counting allocator (the calling thread's only).

use crate::support::counting_alloc::allocations;
use crate::support::sim_ca::{with_ca_file, PLACEHOLDER_CA_PEM};
use std::path::Path;
use tickwire::event::Event;
use tickwire::ring::spsc::{Consumer, Producer};
use tickwire::venue::feed::{EventCounts, EventSink, Feed, SnapshotReply, SnapshotRequest};
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};
use tickwire_sim::source::{Source, SyntheticConfig, SyntheticSource};

/// One frame as the network stage hands it over: a text or a binary WebSocket message, or a
/// chunk of a raw byte stream (Databento).
enum Frame {
    Text(Vec<u8>),
    Binary(Vec<u8>),
}

/// What the decoder stage owns around the feeds: the event ring and its consumer (the
/// strategy stage's end), the event counts, the bus.
struct Stage {
    events: Producer<Event>,
    strategy: Consumer<Event>,
    lost: bool,
    counts: EventCounts,
    bus: BusWriter,
    requests: Vec<SnapshotRequest>,
    decoded: u64,
    _dir: tempfile::TempDir,
}

impl Stage {
    fn new(venue: &str, symbols: &[String]) -> Stage {
        let (events, strategy) = tickwire::ring::spsc::ring::<Event>(8192);
        let (counts, _readers) = EventCounts::new(1);
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = BusOptions {
            path: dir.path().join("bus"),
            geometry: Geometry::new(1 << 16, 4096).expect("geometry"),
            group: None,
        };
        let mut bus = BusWriter::create(&options, 1, 1).expect("bus");
        for (index, symbol) in symbols.iter().enumerate() {
            bus.add_instrument(&DirectoryEntry {
                instrument_id: index as u32,
                venue_id: 0,
                venue: venue.to_owned(),
                symbol: symbol.clone(),
                venue_symbol: symbol.clone(),
            })
            .expect("directory");
        }
        Stage {
            events,
            strategy,
            lost: false,
            counts,
            bus,
            requests: Vec::with_capacity(64),
            decoded: 0,
            _dir: dir,
        }
    }

    /// One frame through the feed, the events published and taken, the control work asked for.
    fn frame(&mut self, feed: &mut dyn Feed, recv_ts_ns: u64, frame: &Frame) {
        let mut sink = EventSink::new(&mut self.events, &mut self.lost)
            .with_bus(Some(&mut self.bus))
            .counting(&mut self.counts);
        match frame {
            Frame::Text(bytes) => feed.on_message(0, recv_ts_ns, bytes, &mut sink),
            Frame::Binary(bytes) => feed.on_binary(0, recv_ts_ns, bytes, &mut sink),
        }
        sink.publish();
        while let Some(event) = self.strategy.try_pop() {
            self.decoded += 1;
            std::hint::black_box(event);
        }
        let requests = &mut self.requests;
        feed.snapshot_requests(recv_ts_ns, &mut |request| requests.push(request));
        while feed.take_reply().is_some() {}
        while feed.take_malformed().is_some() {}
    }

    /// A snapshot reply through the feed, as the decoder stage delivers it.
    fn snapshot(&mut self, feed: &mut dyn Feed, reply: SnapshotReply, now_ns: u64) {
        let mut sink = EventSink::new(&mut self.events, &mut self.lost)
            .with_bus(Some(&mut self.bus))
            .counting(&mut self.counts);
        feed.on_snapshot(reply, now_ns, &mut sink);
        sink.publish();
        while let Some(event) = self.strategy.try_pop() {
            self.decoded += 1;
            std::hint::black_box(event);
        }
    }
}

/// The venue file the simulator ships for `name`, as the appliance loads it. The simulator
/// venues name the CA file `tickwire sim` writes (`/tmp/tickwire-sim/ca.pem`), which exists only
/// once a simulator has run on the machine with its default directory: loaded from a copy that
/// names a placeholder CA file instead (these tests open no TLS connection), so that they pass
/// on a fresh machine whatever ran before them.
fn venue(name: &str) -> tickwire::config::VenueConfig {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/venues")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&shipped)
        .unwrap_or_else(|error| panic!("{}: {error}", shipped.display()));
    let dir = tempfile::TempDir::new().expect("temp dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, PLACEHOLDER_CA_PEM).expect("write the placeholder CA file");
    let path = dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, with_ca_file(&text, &ca_file)).expect("write the venue file's copy");
    tickwire::config::load_venue(&path).unwrap_or_else(|error| panic!("{name}: {error}"))
}

/// Runs `warm_up` frames from `next` (serving the REST snapshots the feed asks for from
/// `rest`, which sees the frames handed over so far, parsed by the venue's `parse`), makes the next `steady` frames (before
/// counting: the simulator's allocations are not the stage's), then counts the allocations of
/// handing them over. Returns them, the events decoded in the steady state, and the feed's
/// counters.
fn run(
    name: &str,
    venue: &tickwire::config::VenueConfig,
    next: &mut dyn FnMut() -> Frame,
    rest: &dyn Fn(&str) -> Option<Vec<u8>>,
    parse: Parse,
    warm_up: usize,
    steady: usize,
) -> (u64, u64, tickwire::venue::feed::FeedCounters) {
    let built = tickwire::venue::feed_for(0, venue, 0).expect("feed");
    let mut feed = built.feed;
    let mut stage = Stage::new(&venue.name, &venue.symbols);
    let mut recv_ts_ns = 1_700_000_000_000_000_000;
    for _ in 0..warm_up {
        let frame = next();
        recv_ts_ns += 100_000;
        stage.frame(feed.as_mut(), recv_ts_ns, &frame);
        for request in std::mem::take(&mut stage.requests) {
            let symbol = &venue.symbols[request.instrument as usize];
            let body = rest(symbol).unwrap_or_else(|| panic!("{name}: no snapshot for {symbol}"));
            let snapshot = parse(&body).expect("snapshot");
            let reply = SnapshotReply {
                venue: request.venue,
                instrument: request.instrument,
                result: Ok(snapshot),
                recv_ts_ns,
            };
            stage.snapshot(feed.as_mut(), reply, recv_ts_ns);
        }
    }
    let frames: Vec<Frame> = (0..steady).map(|_| next()).collect();
    let decoded_before = stage.decoded;
    let before = allocations();
    for frame in &frames {
        recv_ts_ns += 100_000;
        stage.frame(feed.as_mut(), recv_ts_ns, frame);
    }
    let allocated = allocations() - before;
    assert!(
        stage.requests.is_empty(),
        "{name}: snapshots asked for in the steady state"
    );
    (allocated, stage.decoded - decoded_before, built.counters)
}

/// How a venue's REST snapshot body is read (its `SnapshotApi::parse`).
type Parse = fn(&[u8]) -> Result<tickwire::venue::feed::DepthSnapshot, String>;

fn assert_steady(
    name: &str,
    (allocated, decoded, counters): (u64, u64, tickwire::venue::feed::FeedCounters),
    book_syncs: u64,
) {
    println!(
        "{name}: {decoded} events, {allocated} allocations; market messages {}, book syncs {}",
        counters.market_messages(),
        counters.book_syncs.get()
    );
    assert!(decoded > 10_000, "{name}: only {decoded} events decoded");
    assert_eq!(counters.malformed.get(), 0, "{name}: malformed messages");
    assert_eq!(counters.unknown_symbol.get(), 0, "{name}: unknown symbols");
    assert_eq!(counters.duplicates.get(), 0, "{name}: duplicates");
    assert_eq!(counters.book_gaps.get(), 0, "{name}: book gaps");
    assert_eq!(counters.book_resyncs.get(), 0, "{name}: book resyncs");
    assert_eq!(counters.book_syncs.get(), book_syncs, "{name}: book syncs");
    assert_eq!(allocated, 0, "{name}: the decoder stage allocated");
}

/// The synthetic Binance market of a venue file: its symbols, `channels`.
fn synthetic(venue: &tickwire::config::VenueConfig, channels: &[&str]) -> SyntheticSource {
    let source = SyntheticSource::new(SyntheticConfig {
        symbols: venue.symbols.len(),
        rate_per_sec: 50_000.0,
        channels: channels
            .iter()
            .map(|channel| (*channel).to_owned())
            .collect(),
        seed: 32,
        book_levels: 1000,
        duration_messages: None,
    })
    .expect("synthetic source");
    let symbols: Vec<&str> = source.symbols().collect();
    assert_eq!(
        symbols,
        venue.symbols.iter().map(String::as_str).collect::<Vec<_>>(),
        "the simulator's symbols are the venue file's"
    );
    source
}

/// A Binance venue over a simulator source: its messages as text (JSON) or binary (SBE)
/// frames, its book behind the REST snapshots.
fn binance(
    name: &str,
    venue: &tickwire::config::VenueConfig,
    source: Box<dyn Source>,
    binary: bool,
    parse: Parse,
) -> (u64, u64, tickwire::venue::feed::FeedCounters) {
    let source = std::cell::RefCell::new(source);
    let mut next = || {
        let message = source.borrow_mut().next_message().expect("a message");
        if binary {
            Frame::Binary(message.combined)
        } else {
            Frame::Text(message.combined)
        }
    };
    let rest = |symbol: &str| source.borrow().depth_snapshot(symbol, 1000);
    run(name, venue, &mut next, &rest, parse, 20_000, 50_000)
}

#[test]
fn binance_usdm_futures_decodes_without_allocating() {
    let venue = venue("binance-futures-sim");
    let source = synthetic(&venue, &["bookTicker", "depth@100ms", "aggTrade"]);
    let parse = tickwire::venue::binance::protocol::parse_depth;
    let result = binance("binance-usdm", &venue, Box::new(source), false, parse);
    assert_steady("binance-usdm", result, venue.symbols.len() as u64);
}

#[test]
fn binance_spot_json_decodes_without_allocating() {
    let venue = venue("binance-spot-sim");
    let source = synthetic(&venue, &["bookTicker", "depth@100ms", "trade"]);
    let spot = tickwire_sim::spot::SpotSource::new(Box::new(source));
    let parse = tickwire::venue::binance_spot::protocol::parse_depth;
    let result = binance("binance-spot", &venue, Box::new(spot), false, parse);
    assert_steady("binance-spot", result, venue.symbols.len() as u64);
}

#[test]
fn binance_spot_sbe_decodes_without_allocating() {
    let venue = venue("binance-spot-sbe-sim");
    let source = synthetic(&venue, &["bookTicker", "depth@100ms", "trade"]);
    let sbe = tickwire_sim::sbe::SbeSource::new(Box::new(source));
    let parse = tickwire::venue::binance_spot::protocol::parse_depth;
    let result = binance("binance-spot-sbe", &venue, Box::new(sbe), true, parse);
    assert_steady("binance-spot-sbe", result, venue.symbols.len() as u64);
}

#[test]
fn thalex_decodes_without_allocating() {
    let venue = venue("thalex-sim");
    let shards =
        tickwire::venue::thalex::subscribe::shards(&venue.symbols, &venue.channels, 10_000)
            .expect("shards");
    let channels: Vec<String> = shards
        .into_iter()
        .flat_map(|shard| shard.requests.into_iter().flatten())
        .filter(|channel| channel != "system")
        .collect();
    let channels: Vec<&str> = channels.iter().map(String::as_str).collect();
    let messages = tickwire_sim::thalex::notifications(
        &tickwire_sim::thalex::default_instruments(),
        &channels,
        32,
        1_776_715_497.5,
        1000.0,
        70_000,
    );
    assert_eq!(messages.len(), 70_000);
    let mut messages = messages.into_iter();
    let mut next = || Frame::Text(messages.next().expect("a message").into_bytes());
    let no_rest = tickwire::venue::binance::protocol::parse_depth;
    let result = run(
        "thalex",
        &venue,
        &mut next,
        &|_| None,
        no_rest,
        20_000,
        50_000,
    );
    // Each book (one per instrument) from the stream's first, whole view.
    assert_steady("thalex", result, venue.symbols.len() as u64);
}

/// A Bybit category's shipped simulator venue file, fed the simulator's messages of every
/// topic it subscribes.
fn bybit(name: &str, category: tickwire_sim::bybit::Category) {
    let venue = venue(name);
    let topics = tickwire::venue::stream_names(&venue);
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    let messages = tickwire_sim::bybit::messages(
        category,
        &venue.symbols,
        &topics,
        32,
        1_776_715_497_500,
        70_000,
    );
    assert_eq!(messages.len(), 70_000);
    let mut messages = messages.into_iter();
    let mut next = || Frame::Text(messages.next().expect("a message").into_bytes());
    let no_rest = tickwire::venue::binance::protocol::parse_depth;
    let result = run(name, &venue, &mut next, &|_| None, no_rest, 20_000, 50_000);
    // Each book from its topic's first message, a snapshot, then deltas.
    assert_steady(name, result, venue.symbols.len() as u64);
}

#[test]
fn bybit_spot_decodes_without_allocating() {
    bybit("bybit-spot-sim", tickwire_sim::bybit::Category::Spot);
}

#[test]
fn bybit_linear_decodes_without_allocating() {
    bybit("bybit-linear-sim", tickwire_sim::bybit::Category::Linear);
}

#[test]
fn databento_decodes_without_allocating() {
    use dbn::encode::{DbnMetadataEncoder, DbnRecordEncoder, EncodeRecord};
    use tickwire_sim::databento::{benchmark_batch, FIRST_INSTRUMENT_ID};
    let venue = venue("databento-sim");
    // What the gateway sends after the handshake: the metadata, a symbol mapping per symbol,
    // then the records, in 64 KiB reads as the network stage hands a byte stream over.
    let metadata = dbn::Metadata::builder()
        .dataset("GLBX.MDP3".to_owned())
        .schema(None)
        .start(0)
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .build();
    let mut bytes = Vec::new();
    DbnMetadataEncoder::new(&mut bytes)
        .encode(&metadata)
        .expect("metadata");
    for (position, symbol) in venue.symbols.iter().enumerate() {
        let id = FIRST_INSTRUMENT_ID + position as u32;
        let mapping = dbn::SymbolMappingMsg::new(
            id,
            0,
            dbn::SType::RawSymbol,
            symbol,
            dbn::SType::InstrumentId,
            &id.to_string(),
            0,
            dbn::UNDEF_TIMESTAMP,
        )
        .expect("mapping");
        DbnRecordEncoder::new(&mut bytes)
            .encode_record(&mapping)
            .expect("mapping");
    }
    let (records, made) = benchmark_batch(venue.symbols.len(), 32, 300_000);
    assert!(made >= 300_000);
    bytes.extend_from_slice(&records);
    let mut chunks = bytes.chunks(64 * 1024).map(<[u8]>::to_vec);
    let total = bytes.len().div_ceil(64 * 1024);
    let mut next = || Frame::Text(chunks.next().expect("a chunk"));
    let no_rest = tickwire::venue::binance::protocol::parse_depth;
    let warm_up = total / 4;
    let result = run(
        "databento",
        &venue,
        &mut next,
        &|_| None,
        no_rest,
        warm_up,
        total - warm_up,
    );
    assert_steady("databento", result, 0);
}

/// OKX's shipped simulator venue file, fed the simulator's messages of every stream it
/// subscribes (books verified by checksum on every update, trades, tickers, marks).
#[test]
fn okx_decodes_without_allocating() {
    let venue = venue("okx-sim");
    let streams = tickwire::venue::stream_names(&venue);
    let streams: Vec<&str> = streams.iter().map(String::as_str).collect();
    let messages =
        tickwire_sim::okx::messages(&venue.symbols, &streams, 32, 1_776_715_497_500, 70_000);
    assert_eq!(messages.len(), 70_000);
    let mut messages = messages.into_iter();
    let mut next = || Frame::Text(messages.next().expect("a message").into_bytes());
    let no_rest = tickwire::venue::binance::protocol::parse_depth;
    let result = run(
        "okx-sim",
        &venue,
        &mut next,
        &|_| None,
        no_rest,
        20_000,
        50_000,
    );
    // Each book from its stream's first message, a snapshot, then updates.
    assert_steady("okx-sim", result, venue.symbols.len() as u64);
}
