//! The mock Databento Live Subscription Gateway (`tickwire_sim::databento`) against clients over
//! loopback: a plain std `TcpStream` doing the handshake by hand with the records decoded by the
//! official `dbn` decoder, and the official `databento` live client.
//!
//! Every test starts its own gateway on port 0. Run: `cargo test --test tickwire sim_databento::`.

use dbn::decode::{DbnDecoder, DbnMetadata, DecodeRecordRef};
use dbn::{
    ErrorCode, ErrorMsg, MboMsg, Metadata, RecordRefEnum, SymbolMappingMsg, SystemCode, SystemMsg,
    TradeMsg,
};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tickwire_sim::databento::{
    self, cram_reply, DatabentoFaults, DatabentoHandle, DatabentoOptions, DatabentoSource,
    InjectedError, TEST_API_KEY,
};

const DEADLINE: Duration = Duration::from_secs(10);

fn start(configure: impl FnOnce(&mut DatabentoOptions)) -> DatabentoHandle {
    let mut options = DatabentoOptions {
        rate: 20_000.0,
        ..DatabentoOptions::default()
    };
    configure(&mut options);
    databento::start(options).unwrap()
}

fn faults(configure: impl FnOnce(&mut DatabentoFaults)) -> DatabentoFaults {
    let mut faults = DatabentoFaults::default();
    configure(&mut faults);
    faults
}

// ---------------------------------------------------------------------------------------------
// A blocking client: the control lines by hand, then the official DBN decoder

struct Control {
    tcp: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Control {
    fn connect(sim: &DatabentoHandle) -> (Control, String, String) {
        let tcp = TcpStream::connect(sim.addr()).unwrap();
        tcp.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut control = Control {
            reader: BufReader::new(tcp.try_clone().unwrap()),
            tcp,
        };
        let greeting = control.line();
        let cram = control.line();
        (control, greeting, cram)
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line
    }

    fn send(&mut self, line: &str) {
        self.tcp.write_all(line.as_bytes()).unwrap();
        self.tcp.write_all(b"\n").unwrap();
    }

    /// Sends the auth line for `key` with `extra` fields; returns the reply line.
    fn auth(&mut self, cram: &str, key: &str, extra: &str) -> String {
        let challenge = cram.trim_end().strip_prefix("cram=").unwrap();
        self.send(&format!(
            "auth={}|dataset=GLBX.MDP3|encoding=dbn|compression=none|ts_out=0|client=tickwire-test{extra}",
            cram_reply(challenge, key)
        ));
        self.line()
    }

    /// `start_session`, then the official decoder reads the metadata.
    fn start_session(mut self) -> Stream {
        self.send("start_session");
        let decoder = DbnDecoder::new(self.reader).unwrap();
        Stream {
            tcp: self.tcp,
            decoder,
        }
    }
}

/// A connection authenticated with the test key.
fn login(sim: &DatabentoHandle, extra: &str) -> Control {
    let (mut control, _, cram) = Control::connect(sim);
    let reply = control.auth(&cram, TEST_API_KEY, extra);
    assert!(reply.starts_with("success=1|session_id="), "{reply}");
    control
}

fn subscribe_all(sim: &DatabentoHandle, extra_sub: &str) -> Stream {
    let mut control = login(sim, "");
    control.send(&format!(
        "schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=0|is_last=1{extra_sub}"
    ));
    control.start_session()
}

#[derive(Clone, Debug)]
enum Rec {
    Mbo(MboMsg),
    Trade(TradeMsg),
    Mapping(SymbolMappingMsg),
    System(SystemMsg),
    Error(ErrorMsg),
    Other,
}

struct Stream {
    tcp: TcpStream,
    decoder: DbnDecoder<BufReader<TcpStream>>,
}

impl Stream {
    fn metadata(&self) -> &Metadata {
        self.decoder.metadata()
    }

    /// The next record; `None` at the end of the stream, `Err` for a read error or timeout.
    fn try_next(&mut self) -> Result<Option<Rec>, dbn::Error> {
        let Some(record) = self.decoder.decode_record_ref()? else {
            return Ok(None);
        };
        Ok(Some(match record.as_enum()? {
            RecordRefEnum::Mbo(mbo) => Rec::Mbo(mbo.clone()),
            RecordRefEnum::Trade(trade) => Rec::Trade(trade.clone()),
            RecordRefEnum::SymbolMapping(mapping) => Rec::Mapping(mapping.clone()),
            RecordRefEnum::System(system) => Rec::System(system.clone()),
            RecordRefEnum::Error(error) => Rec::Error(error.clone()),
            _ => Rec::Other,
        }))
    }

    fn next(&mut self) -> Rec {
        self.try_next()
            .expect("a record in time")
            .expect("the stream goes on")
    }

    /// The next MBO record, skipping heartbeats.
    fn next_mbo(&mut self) -> MboMsg {
        loop {
            match self.next() {
                Rec::Mbo(mbo) => return mbo,
                Rec::System(system) if system.is_heartbeat() => {}
                other => panic!("expected MBO, got {other:?}"),
            }
        }
    }

    /// The mappings, errors and system messages before the first data record, and that record.
    fn preamble(&mut self) -> (Vec<Rec>, Rec) {
        let mut before = Vec::new();
        loop {
            match self.next() {
                record @ (Rec::Mbo(_) | Rec::Trade(_)) => return (before, record),
                record => before.push(record),
            }
        }
    }
}

fn system_code(record: &Rec) -> Option<SystemCode> {
    match record {
        Rec::System(system) => system.code().ok(),
        _ => None,
    }
}

fn error_code(record: &Rec) -> Option<ErrorCode> {
    match record {
        Rec::Error(error) => error.code().ok(),
        _ => None,
    }
}

/// A plain L3 book per instrument: order id -> (side, price, size).
#[derive(Default)]
struct Books {
    books: BTreeMap<u32, HashMap<u64, (u8, i64, u32)>>,
}

impl Books {
    /// Applies one record and checks the rules of Databento's MBO actions.
    fn apply(&mut self, record: &MboMsg) {
        let book = self.books.entry(record.hd.instrument_id).or_default();
        let id = record.order_id;
        match record.action as u8 {
            b'A' => {
                assert!(record.size > 0);
                assert!(
                    book.insert(id, (record.side as u8, record.price, record.size))
                        .is_none(),
                    "add of a live order {id}"
                );
            }
            b'C' => {
                let order = book.get_mut(&id).expect("cancel of a resting order");
                assert!(order.2 >= record.size, "cancel of more than rests");
                assert_eq!(order.0, record.side as u8);
                order.2 -= record.size;
                if order.2 == 0 {
                    book.remove(&id);
                }
            }
            b'M' => {
                let order = book.get_mut(&id).expect("modify of a resting order");
                assert_eq!(order.0, record.side as u8);
                assert!(record.size > 0);
                order.1 = record.price;
                order.2 = record.size;
            }
            b'F' => {
                let order = book.get(&id).expect("fill of a resting order");
                assert!(order.2 >= record.size, "fill of more than rests");
                assert_eq!(order.1, record.price);
            }
            b'T' => assert!(record.size > 0),
            b'R' => book.clear(),
            other => panic!("unknown action {other}"),
        }
        let best_bid = book.values().filter(|o| o.0 == b'B').map(|o| o.1).max();
        let best_ask = book.values().filter(|o| o.0 == b'A').map(|o| o.1).min();
        if let (Some(bid), Some(ask)) = (best_bid, best_ask) {
            assert!(bid < ask, "crossed book");
        }
    }
}

/// Reads the snapshot of `instruments` instruments (each a clear, then adds, flagged SNAPSHOT,
/// the last LAST) into `books`; returns the snapshot's sequence.
fn read_snapshot(stream: &mut Stream, first: Rec, instruments: usize, books: &mut Books) -> u32 {
    let mut record = first;
    let mut sequence = 0;
    for instrument in 0..instruments {
        if instrument > 0 {
            record = stream.next();
        }
        let Rec::Mbo(clear) = &record else {
            panic!("a snapshot starts with a clear: {record:?}")
        };
        assert_eq!(clear.action as u8, b'R');
        assert!(clear.flags.is_snapshot());
        books.apply(clear);
        sequence = clear.sequence;
        let mut last = clear.flags.is_last();
        while !last {
            let add = stream.next_mbo();
            assert_eq!(add.action as u8, b'A');
            assert!(add.flags.is_snapshot());
            assert_eq!(add.sequence, sequence);
            last = add.flags.is_last();
            books.apply(&add);
        }
    }
    sequence
}

// ---------------------------------------------------------------------------------------------
// Handshake

#[test]
fn greeting_cram_and_authentication() {
    let sim = start(|_| {});
    let (mut control, greeting, cram) = Control::connect(&sim);
    assert!(greeting.starts_with("lsg_version="), "{greeting}");
    let challenge = cram.trim_end().strip_prefix("cram=").unwrap();
    assert_eq!(challenge.len(), 32);
    assert!(challenge.bytes().all(|b| b.is_ascii_alphanumeric()));
    let reply = control.auth(&cram, "db-some-other-key-000000000000001", "");
    assert_eq!(reply, "success=0|error=Authentication failed.\n");
    assert_eq!(control.line(), "", "the gateway closes after a failure");

    // The right hash with the wrong bucket is no good either.
    let (mut control, _, cram) = Control::connect(&sim);
    let good = cram_reply(cram.trim_end().strip_prefix("cram=").unwrap(), TEST_API_KEY);
    control.send(&format!(
        "auth={}-00000|dataset=GLBX.MDP3|encoding=dbn|compression=none|ts_out=0|client=t",
        &good[..64]
    ));
    assert!(control.line().starts_with("success=0|"));

    // Compression other than none, and another dataset, are refused with a reason.
    let (mut control, _, cram) = Control::connect(&sim);
    let reply = control.auth(&cram, TEST_API_KEY, "");
    assert!(reply.starts_with("success=1|session_id="), "{reply}");
    let (mut control, _, cram) = Control::connect(&sim);
    let challenge = cram.trim_end().strip_prefix("cram=").unwrap().to_owned();
    control.send(&format!(
        "auth={}|dataset=GLBX.MDP3|encoding=dbn|compression=zstd|ts_out=0|client=t",
        cram_reply(&challenge, TEST_API_KEY)
    ));
    let reply = control.line();
    assert!(
        reply.starts_with("success=0|error=") && reply.contains("compression"),
        "{reply}"
    );
    let (mut control, _, cram) = Control::connect(&sim);
    let challenge = cram.trim_end().strip_prefix("cram=").unwrap().to_owned();
    control.send(&format!(
        "auth={}|dataset=XNAS.ITCH|encoding=dbn|compression=none|ts_out=0|client=t",
        cram_reply(&challenge, TEST_API_KEY)
    ));
    assert!(control.line().contains("dataset"));

    let (mut control, _, cram) = Control::connect(&sim);
    let reply = control.auth(
        &cram,
        TEST_API_KEY,
        "|heartbeat_interval_s=7|slow_reader_behavior=skip",
    );
    assert!(reply.starts_with("success=1|session_id="), "{reply}");
    let stats = sim.stats();
    assert_eq!(stats.auths_ok, 2);
    assert_eq!(stats.auths_failed, 4);
    let auth = stats.last_auth.unwrap();
    assert_eq!(auth.dataset, "GLBX.MDP3");
    assert_eq!(auth.client, "tickwire-test");
    assert_eq!(auth.heartbeat_interval_s, Some(7));
    assert_eq!(auth.slow_reader_behavior.as_deref(), Some("skip"));
    assert!(!auth.ts_out);
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

#[test]
fn chunked_subscriptions_are_counted_and_unknown_symbols_reported() {
    let sim = start(|options| {
        options.symbols = databento::numbered_symbols(1200);
        options.rate = 100.0;
    });
    let symbols = databento::numbered_symbols(1200);
    let mut control = login(&sim, "");
    for (index, chunk) in symbols.chunks(500).enumerate() {
        let is_last = u8::from(index == 2);
        control.send(&format!(
            "schema=mbo|stype_in=raw_symbol|symbols={}|snapshot=0|is_last={is_last}|id=1",
            chunk.join(",")
        ));
    }
    control.send(
        "schema=trades|stype_in=raw_symbol|symbols=SIM0001,NOPE1,NOPE2|snapshot=0|is_last=1|id=2",
    );
    control.send("schema=ohlcv-1s|stype_in=raw_symbol|symbols=SIM0001|snapshot=0|is_last=1");
    control.send("what is this");
    let mut stream = control.start_session();
    let metadata = stream.metadata().clone();
    assert_eq!(metadata.dataset, "GLBX.MDP3");
    assert_eq!(metadata.version, dbn::DBN_VERSION);
    assert_eq!(metadata.stype_out, dbn::SType::InstrumentId);
    assert_eq!(metadata.symbols.len(), 1202);
    assert_eq!(metadata.not_found, ["NOPE1", "NOPE2"]);

    let mut mapped = HashMap::new();
    for _ in 0..1200 {
        let Rec::Mapping(mapping) = stream.next() else {
            panic!("mappings come first")
        };
        let id: u32 = mapping.stype_out_symbol().unwrap().parse().unwrap();
        assert_eq!(id, mapping.hd.instrument_id);
        mapped.insert(mapping.stype_in_symbol().unwrap().to_owned(), id);
    }
    assert_eq!(mapped.len(), 1200);
    assert_eq!(mapped["SIM0001"], databento::FIRST_INSTRUMENT_ID);
    let ack = stream.next();
    assert_eq!(system_code(&ack), Some(SystemCode::SubscriptionAck));
    let Rec::System(ack) = ack else {
        unreachable!()
    };
    assert!(ack.msg().unwrap().contains("request 1 for mbo"), "{ack:?}");
    let error = stream.next();
    assert_eq!(error_code(&error), Some(ErrorCode::SymbolResolutionFailed));
    let Rec::Error(error) = error else {
        unreachable!()
    };
    assert!(error.err().unwrap().contains("NOPE1,NOPE2"));
    let Rec::System(ack) = stream.next() else {
        panic!("the trades subscription stands with its known symbol")
    };
    assert!(ack.msg().unwrap().contains("request 2 for trades"));
    assert_eq!(
        error_code(&stream.next()),
        Some(ErrorCode::InvalidSubscription),
        "ohlcv-1s is not served"
    );
    let invalid = stream.next();
    assert_eq!(error_code(&invalid), Some(ErrorCode::InvalidSubscription));
    let Rec::Error(invalid) = invalid else {
        unreachable!()
    };
    assert!(invalid.err().unwrap().contains("what is this"));

    let stats = sim.stats();
    assert_eq!(stats.subscription_lines, 5);
    assert_eq!(stats.subscriptions.len(), 3);
    assert_eq!(stats.subscriptions[0].lines, 3);
    assert_eq!(stats.subscriptions[0].symbols, 1200);
    assert_eq!(stats.subscriptions[0].id, Some(1));
    assert_eq!(stats.subscriptions[1].lines, 1);
    assert_eq!(stats.subscriptions[1].schema, "trades");
    assert_eq!(stats.unresolved_symbols, 2);
    assert_eq!(stats.invalid_lines, 2);
    assert_eq!(stats.sessions_started, 1);

    // After the start, a subscription is served at once: its mapping first, then its ack.
    stream
        .tcp
        .write_all(b"schema=mbo|stype_in=instrument_id|symbols=1001|snapshot=0|is_last=1|id=3\n")
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert!(Instant::now() < deadline);
        if let Rec::System(system) = stream.next() {
            if system.msg().unwrap().contains("request 3") {
                break;
            }
        }
    }
}

#[test]
fn the_mbo_stream_keeps_the_l3_rules_and_snapshots_equal_the_rebuilt_book() {
    let sim = start(|_| {});
    let mut first = {
        let mut control = login(&sim, "");
        control.send("schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=1|is_last=1");
        control.start_session()
    };
    let (preamble, record) = first.preamble();
    assert!(matches!(preamble[0], Rec::Mapping(_)));
    assert!(matches!(preamble[1], Rec::Mapping(_)));
    assert_eq!(system_code(&preamble[2]), Some(SystemCode::SubscriptionAck));
    let mut books = Books::default();
    let mut last_sequence = read_snapshot(&mut first, record, 2, &mut books);
    assert_eq!(sim.stats().snapshots_served, 1);

    // Live records go on from exactly where the snapshot was, and each event ends with LAST.
    let mut event: Option<(u64, u32)> = None;
    for _ in 0..5000 {
        let record = first.next_mbo();
        assert!(!record.flags.is_snapshot());
        assert_eq!(record.sequence, last_sequence + 1, "no gap, no duplicate");
        last_sequence = record.sequence;
        if let Some((ts, instrument)) = event {
            assert_eq!(record.hd.ts_event, ts, "an event's records share ts_event");
            assert_eq!(record.hd.instrument_id, instrument);
        }
        event = (!record.flags.is_last()).then_some((record.hd.ts_event, record.hd.instrument_id));
        assert!(record.ts_recv >= record.hd.ts_event);
        books.apply(&record);
    }

    // A second connection's snapshot equals the book the first rebuilt at that sequence.
    let mut second = {
        let mut control = login(&sim, "");
        control.send("schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=1|is_last=1");
        control.start_session()
    };
    let (_, record) = second.preamble();
    let mut snapshot = Books::default();
    let at = read_snapshot(&mut second, record, 2, &mut snapshot);
    while last_sequence < at {
        let record = first.next_mbo();
        last_sequence = record.sequence;
        books.apply(&record);
    }
    assert_eq!(last_sequence, at);
    assert_eq!(books.books, snapshot.books);
    // And both go on with the same records.
    for _ in 0..500 {
        let (a, b) = (first.next_mbo(), second.next_mbo());
        assert_eq!(a.sequence, b.sequence);
        assert_eq!(a.order_id, b.order_id);
        books.apply(&a);
        snapshot.apply(&b);
    }
}

#[test]
fn a_replay_from_start_joins_the_live_stream_without_gap_or_duplicate() {
    let sim = start(|_| {});
    let mut live = subscribe_all(&sim, "");
    let (_, Rec::Mbo(first)) = live.preamble() else {
        panic!("MBO data")
    };
    let mut seen = vec![first];
    while seen.len() < 1500 {
        seen.push(live.next_mbo());
    }
    // The start of an event a thousand records back.
    let from = (1..1000)
        .map(|back| seen.len() - back)
        .find(|&at| seen[at - 1].flags.is_last())
        .unwrap();
    let start_ns = seen[from].hd.ts_event;
    let mut replay = subscribe_all(&sim, &format!("|start={start_ns}|id=9"));
    let (_, Rec::Mbo(record)) = replay.preamble() else {
        panic!("MBO data")
    };
    let mut replayed = vec![record];
    let mut completed_at = None;
    while replayed.len() < seen.len() - from + 2000 {
        match replay.next() {
            Rec::Mbo(record) => replayed.push(record),
            Rec::System(system) if system.code().ok() == Some(SystemCode::ReplayCompleted) => {
                assert!(system.msg().unwrap().contains("subscription 9"));
                completed_at = Some(replayed.len());
            }
            Rec::System(system) if system.is_heartbeat() => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(completed_at.is_some(), "ReplayCompleted after the replay");
    while seen.len() < from + replayed.len() {
        seen.push(live.next_mbo());
    }
    for (replayed, live) in replayed.iter().zip(&seen[from..]) {
        assert_eq!(replayed.sequence, live.sequence);
        assert_eq!(replayed.hd.ts_event, live.hd.ts_event);
        assert_eq!(replayed.order_id, live.order_id);
    }
    for pair in replayed.windows(2) {
        assert_eq!(pair[1].sequence, pair[0].sequence + 1);
    }
    assert_eq!(sim.stats().replays_served, 1);
}

#[test]
fn a_start_older_than_the_history_is_aged_out_then_live() {
    let sim = start(|options| options.history = 100);
    while sim.stats().market_records < 500 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut stream = subscribe_all(&sim, "|start=1000000000");
    let (preamble, first) = stream.preamble();
    assert!(
        preamble
            .iter()
            .any(|record| error_code(record) == Some(ErrorCode::ReplayDataAgedOut)),
        "{preamble:?}"
    );
    assert!(matches!(first, Rec::Mbo(_)));
    assert_eq!(sim.stats().replays_aged_out, 1);
}

#[test]
fn trades_come_from_the_mbo_trades() {
    let sim = start(|_| {});
    let mut control = login(&sim, "");
    control.send("schema=trades|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=0|is_last=1");
    let mut stream = control.start_session();
    assert_eq!(stream.metadata().schema, Some(dbn::Schema::Trades));
    let (_, first) = stream.preamble();
    let Rec::Trade(trade) = first else {
        panic!("{first:?}")
    };
    assert_eq!(trade.action as u8, b'T');
    assert!(trade.size > 0);
    assert!(trade.flags.is_last());
}

#[test]
fn heartbeats_while_idle() {
    let sim = start(|_| {});
    let mut control = login(&sim, "|heartbeat_interval_s=1");
    control.send("schema=mbo|stype_in=raw_symbol|symbols=UNKNOWN|snapshot=0|is_last=1");
    let mut stream = control.start_session();
    assert_eq!(
        error_code(&stream.next()),
        Some(ErrorCode::SymbolResolutionFailed)
    );
    assert_eq!(
        system_code(&stream.next()),
        Some(SystemCode::SubscriptionAck)
    );
    let started = Instant::now();
    for _ in 0..2 {
        let record = stream.next();
        assert_eq!(
            system_code(&record),
            Some(SystemCode::Heartbeat),
            "{record:?}"
        );
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed > Duration::from_millis(1500) && elapsed < Duration::from_secs(4),
        "{elapsed:?}"
    );
    assert!(sim.stats().heartbeats_sent >= 2);
}

// ---------------------------------------------------------------------------------------------
// Faults

/// Reads MBO records until the stream ends or fails; returns them and the non-MBO records.
fn drain(stream: &mut Stream) -> (Vec<MboMsg>, Vec<Rec>, Option<String>) {
    let (mut data, mut other) = (Vec::new(), Vec::new());
    loop {
        match stream.try_next() {
            Ok(Some(Rec::Mbo(record))) => data.push(record),
            Ok(Some(record)) => other.push(record),
            Ok(None) => return (data, other, None),
            Err(error) => return (data, other, Some(error.to_string())),
        }
    }
}

#[test]
fn split_writes_deliver_partial_records_that_still_decode() {
    let sim = start(|options| options.faults = faults(|f| f.split_writes = true));
    let mut control = login(&sim, "");
    control.send("schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=1|is_last=1");
    control.send("start_session");
    // Raw reads, then the boundaries of the DBN stream walked by hand.
    let mut reader = control.reader;
    let mut bytes = Vec::new();
    let mut read_ends = Vec::new();
    let mut chunk = [0u8; 4096];
    while bytes.len() < 20_000 {
        let read = reader.read(&mut chunk).unwrap();
        assert!(read > 0);
        bytes.extend_from_slice(&chunk[..read]);
        read_ends.push(bytes.len());
    }
    let mut boundaries = std::collections::HashSet::new();
    let mut at = 8 + u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    boundaries.insert(at);
    while at < bytes.len() {
        at += bytes[at] as usize * 4;
        boundaries.insert(at);
    }
    let partial = read_ends
        .iter()
        .filter(|end| !boundaries.contains(end))
        .count();
    assert!(
        partial > 10,
        "{partial} of {} reads ended mid-record",
        read_ends.len()
    );
    // The bytes are a valid DBN stream with a consistent book.
    let whole = *boundaries
        .iter()
        .filter(|&&end| end <= bytes.len())
        .max()
        .unwrap();
    let mut decoder = DbnDecoder::new(&bytes[..whole]).unwrap();
    let mut books = Books::default();
    let mut count = 0;
    while let Some(record) = decoder.decode_record_ref().unwrap() {
        if let Some(mbo) = record.get::<MboMsg>() {
            books.apply(mbo);
            count += 1;
        }
    }
    assert!(count > 100);
}

#[test]
fn an_error_then_close_after_n_records() {
    let sim = start(|options| {
        options.faults = faults(|f| {
            f.error_after = Some(InjectedError {
                after_records: 50,
                code: ErrorCode::InternalError as u8,
                text: "boom".into(),
            })
        })
    });
    let mut stream = subscribe_all(&sim, "");
    let (data, other, _) = drain(&mut stream);
    assert_eq!(data.len(), 50);
    let last = other.last().unwrap();
    assert_eq!(error_code(last), Some(ErrorCode::InternalError));
    let Rec::Error(error) = last else {
        unreachable!()
    };
    assert_eq!(error.err().unwrap(), "boom");
    assert_eq!(sim.stats().errors_injected, 1);
    // Only the first connection is faulty.
    let mut stream = subscribe_all(&sim, "");
    stream.preamble();
    for _ in 0..200 {
        stream.next_mbo();
    }
}

#[test]
fn a_stall_sends_nothing_then_resumes() {
    let sim = start(|options| {
        options.faults = faults(|f| f.stall_after = Some((20, Duration::from_millis(1500))))
    });
    let mut control = login(&sim, "|heartbeat_interval_s=1");
    control.send("schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=0|is_last=1");
    let mut stream = control.start_session();
    let (_, first) = stream.preamble();
    let mut last = match first {
        Rec::Mbo(record) => record,
        other => panic!("{other:?}"),
    };
    for _ in 1..20 {
        last = stream.next_mbo();
    }
    let stalled = Instant::now();
    let Rec::Mbo(next) = stream.next() else {
        panic!("data, not a heartbeat, after the stall")
    };
    let gap = stalled.elapsed();
    assert!(gap >= Duration::from_millis(1300), "{gap:?}");
    assert_eq!(next.sequence, last.sequence + 1);
    assert_eq!(sim.stats().stalls_injected, 1);
}

#[test]
fn a_slow_reader_warning_after_n_records() {
    let sim = start(|options| options.faults = faults(|f| f.slow_reader_warning_after = Some(30)));
    let mut stream = subscribe_all(&sim, "");
    let (_, first) = stream.preamble();
    assert!(matches!(first, Rec::Mbo(_)));
    for _ in 1..30 {
        stream.next_mbo();
    }
    assert_eq!(
        system_code(&stream.next()),
        Some(SystemCode::SlowReaderWarning)
    );
    stream.next_mbo();
}

#[test]
fn closes_and_resets_after_n_records_or_a_time() {
    let sim = start(|options| options.faults = faults(|f| f.close_after = Some(40)));
    let mut stream = subscribe_all(&sim, "");
    let (data, _, error) = drain(&mut stream);
    assert_eq!((data.len(), error), (40, None));
    assert_eq!(sim.stats().closes_injected, 1);

    let sim = start(|options| {
        options.faults = faults(|f| f.close_after_time = Some(Duration::from_millis(300)))
    });
    let started = Instant::now();
    let mut stream = subscribe_all(&sim, "");
    let (data, _, _) = drain(&mut stream);
    assert!(!data.is_empty());
    assert!(started.elapsed() < Duration::from_secs(3));

    let sim = start(|options| options.faults = faults(|f| f.reset_after = Some(10)));
    let mut stream = subscribe_all(&sim, "");
    let (data, _, error) = drain(&mut stream);
    assert!(data.len() <= 10);
    let error = error.expect("a reset is an error, not an end");
    assert!(
        error.contains("reset") || error.contains("os error 104"),
        "{error}"
    );
    assert_eq!(sim.stats().resets_injected, 1);
}

#[test]
fn refused_authentication_only_on_the_faulty_connections() {
    let sim = start(|options| {
        options.faults = faults(|f| {
            f.refuse_auth = true;
            f.fault_connections = 2;
        })
    });
    for _ in 0..2 {
        let (mut control, _, cram) = Control::connect(&sim);
        assert_eq!(
            control.auth(&cram, TEST_API_KEY, ""),
            "success=0|error=Authentication failed.\n"
        );
    }
    login(&sim, "");
    assert_eq!(sim.stats().auths_failed, 2);
}

// ---------------------------------------------------------------------------------------------
// Other sources

fn write_file(path: &std::path::Path, zstd: bool) -> Vec<MboMsg> {
    use dbn::encode::{DbnEncoder, EncodeRecord};
    let date = time::Date::from_calendar_date(2025, time::Month::June, 2).unwrap();
    let mapping = |symbol: &str, id: u32| dbn::SymbolMapping {
        raw_symbol: symbol.to_owned(),
        intervals: vec![dbn::MappingInterval {
            start_date: date,
            end_date: date.next_day().unwrap(),
            symbol: id.to_string(),
        }],
    };
    let metadata = dbn::MetadataBuilder::new()
        .dataset("GLBX.MDP3".to_owned())
        .schema(Some(dbn::Schema::Mbo))
        .start(1_748_822_400_000_000_000)
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .symbols(vec!["CLN5".into(), "GCQ5".into()])
        .mappings(vec![mapping("CLN5", 77), mapping("GCQ5", 88)])
        .build();
    let records: Vec<MboMsg> = (0..100u64)
        .map(|n| MboMsg {
            hd: dbn::RecordHeader::new::<MboMsg>(
                dbn::rtype::MBO,
                1,
                if n % 3 == 0 { 88 } else { 77 },
                1_748_822_400_000_000_000 + n,
            ),
            order_id: n + 1,
            price: 60_000_000_000 + n as i64,
            size: 1,
            action: b'A' as _,
            side: b'B' as _,
            flags: dbn::FlagSet::new(dbn::flags::LAST),
            ts_recv: 1_748_822_400_000_000_000 + n,
            ..MboMsg::default()
        })
        .collect();
    let file = std::fs::File::create(path).unwrap();
    if zstd {
        let mut encoder = DbnEncoder::with_zstd(file, &metadata).unwrap();
        for record in &records {
            encoder.encode_record(record).unwrap();
        }
        // The zstd writer finishes its frame when dropped.
        drop(encoder);
    } else {
        let mut encoder = DbnEncoder::new(file, &metadata).unwrap();
        for record in &records {
            encoder.encode_record(record).unwrap();
        }
    }
    records
}

#[test]
fn a_file_is_replayed_to_the_subscribed_instruments_once_or_looping() {
    let dir = tempfile::tempdir().unwrap();
    for zstd in [false, true] {
        let path = dir
            .path()
            .join(if zstd { "mbo.dbn.zst" } else { "mbo.dbn" });
        let written = write_file(&path, zstd);
        let sim = start(|options| {
            options.source = DatabentoSource::File {
                path: path.clone(),
                looping: false,
            };
            options.rate = 0.0;
        });
        assert_eq!(
            sim.instruments(),
            [("CLN5".to_owned(), 77), ("GCQ5".to_owned(), 88)]
        );
        let mut control = login(&sim, "");
        control.send("schema=mbo|stype_in=raw_symbol|symbols=CLN5|snapshot=0|is_last=1");
        let mut stream = control.start_session();
        let (preamble, first) = stream.preamble();
        let Rec::Mapping(mapping) = &preamble[0] else {
            panic!("{preamble:?}")
        };
        assert_eq!(mapping.hd.instrument_id, 77);
        let Rec::Mbo(first) = first else {
            panic!("{first:?}")
        };
        let mut got = vec![first];
        let expected: Vec<&MboMsg> = written
            .iter()
            .filter(|record| record.hd.instrument_id == 77)
            .collect();
        while got.len() < expected.len() {
            got.push(stream.next_mbo());
        }
        for (got, expected) in got.iter().zip(expected) {
            assert_eq!(got, expected);
        }
        assert_eq!(sim.stats().records_sent, 66);
    }
    let path = dir.path().join("mbo.dbn");
    let sim = start(|options| {
        options.source = DatabentoSource::File {
            path: path.clone(),
            looping: true,
        };
        options.rate = 5000.0;
    });
    let mut control = login(&sim, "");
    control.send("schema=mbo|stype_in=instrument_id|symbols=77,88|snapshot=0|is_last=1");
    let mut stream = control.start_session();
    let (_, first) = stream.preamble();
    let Rec::Mbo(first) = first else { panic!() };
    assert_eq!(first.order_id, 1);
    let started = Instant::now();
    let mut order_ids = vec![first.order_id];
    while order_ids.len() < 250 {
        order_ids.push(stream.next_mbo().order_id);
    }
    // Paced at 5000 records a second and looping.
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert_eq!(order_ids[100], 1);
    assert_eq!(order_ids[249], 50);

    let error = databento::start(DatabentoOptions {
        source: DatabentoSource::File {
            path: dir.path().join("missing.dbn"),
            looping: false,
        },
        ..DatabentoOptions::default()
    })
    .err()
    .unwrap();
    assert!(error.to_string().contains("missing.dbn"), "{error}");
}

#[test]
fn benchmark_mode_sends_the_batch_then_the_end_marker() {
    let sim = start(|options| options.source = DatabentoSource::Benchmark { records: 200_000 });
    let batch = sim.benchmark_records();
    assert!((200_000..200_100).contains(&batch));
    let mut stream = subscribe_all(&sim, "");
    let (_, first) = stream.preamble();
    assert!(matches!(first, Rec::Mbo(_)));
    let started = Instant::now();
    let mut count = 1u64;
    let end = loop {
        match stream.next() {
            Rec::Mbo(_) => count += 1,
            Rec::System(system) => break system,
            other => panic!("{other:?}"),
        }
    };
    let elapsed = started.elapsed();
    assert_eq!(count, batch);
    let text = end.msg().unwrap();
    assert!(text.starts_with(databento::BENCHMARK_END), "{text}");
    assert!(text.contains(&batch.to_string()));
    assert!(stream.try_next().unwrap().is_none(), "then the close");
    assert_eq!(sim.stats().benchmark_records_sent, batch);
    eprintln!(
        "benchmark mode (debug build, dbn decoder): {:.1} M records/s",
        count as f64 / elapsed.as_secs_f64() / 1e6
    );
}

// ---------------------------------------------------------------------------------------------
// The official client

#[test]
fn the_official_databento_live_client_authenticates_subscribes_and_reads() {
    let sim = start(|_| {});
    let addr = sim.addr().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = ::databento::LiveClient::builder()
            .addr(addr.as_str())
            .await
            .unwrap()
            .key(TEST_API_KEY)
            .unwrap()
            .dataset("GLBX.MDP3")
            .heartbeat_interval(time::Duration::seconds(5))
            .build()
            .await
            .unwrap();
        client
            .subscribe(
                ::databento::live::Subscription::builder()
                    .symbols(vec!["ESM5", "NQM5"])
                    .schema(dbn::Schema::Mbo)
                    .build(),
            )
            .await
            .unwrap();
        let metadata = client.start().await.unwrap();
        assert_eq!(metadata.dataset, "GLBX.MDP3");
        let (mut mappings, mut acks, mut mbo) = (0, 0, 0);
        let mut books = Books::default();
        while mbo < 300 {
            let record = tokio::time::timeout(DEADLINE, client.next_record())
                .await
                .expect("a record in time")
                .unwrap()
                .expect("the stream goes on");
            if let Some(record) = record.get::<MboMsg>() {
                mbo += 1;
                if mbo == 1 {
                    assert_eq!((mappings, acks), (2, 1));
                }
                // The stream joined mid-market: only orders added since are checked.
                if record.action as u8 == b'A'
                    || books
                        .books
                        .get(&record.hd.instrument_id)
                        .is_some_and(|book| book.contains_key(&record.order_id))
                {
                    books.apply(record);
                }
            } else if record.get::<SymbolMappingMsg>().is_some() {
                mappings += 1;
            } else if let Some(system) = record.get::<SystemMsg>() {
                if system.code().ok() == Some(SystemCode::SubscriptionAck) {
                    acks += 1;
                }
            }
        }
        client.close().await.unwrap();

        // A wrong key is refused by the gateway during build.
        let refused = ::databento::LiveClient::builder()
            .addr(addr.as_str())
            .await
            .unwrap()
            .key("db-wrong-key-0000000000000000000")
            .unwrap()
            .dataset("GLBX.MDP3")
            .build()
            .await;
        match refused {
            Err(::databento::Error::Auth(message)) => {
                assert_eq!(message, "Authentication failed.")
            }
            other => panic!("{:?}", other.err()),
        }
    });
    let stats = sim.stats();
    assert_eq!(stats.auths_ok, 1);
    let auth = stats.last_auth.unwrap();
    assert!(auth.client.starts_with("Databento/"), "{}", auth.client);
    assert_eq!(
        stats.subscriptions[0].id,
        Some(1),
        "the client numbers them"
    );
}
