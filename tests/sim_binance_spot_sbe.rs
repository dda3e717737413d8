//! The Binance Spot SBE market-data simulator (`SimVenue::BinanceSpotSbe`) end to end over
//! loopback, with tickwire's own network engine as the client: binary frames decoded by the
//! OFFICIAL generated decoder (`binance-sbe-official`) into the values the source produced (the
//! same synthetic market through the Spot JSON shapes), the `@depth` U/u chain continuous and
//! consistent with `/api/v3/depth` and with `@depth20`, JSON control answers, the API key's
//! 401s, `serverShutdown`, and the refusal of stream names SBE does not have.
//!
//! Run: `cargo test -p tickwire-cli --test tickwire -- sim_binance_spot_sbe::`.

use binance_sbe_official::message_header_codec::MessageHeaderDecoder;
use binance_sbe_official::{
    best_bid_ask_stream_event_codec, depth_diff_stream_event_codec,
    depth_snapshot_stream_event_codec, trades_stream_event_codec, BoolEnum, ReadBuf,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::engine::{
    split_frame, split_tag, FrameKind, NetEngine, StreamError, StreamEvent, StreamSpec,
    WebSocketTarget,
};
use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
use tickwire::ring::{frame_ring, FrameConsumer};
use tickwire::tls::{server_name, TlsSettings};
use tickwire_sim::sbe::SbeSource;
use tickwire_sim::source::{Source, SyntheticConfig, SyntheticSource};
use tickwire_sim::spot::SpotSource;
use tickwire_sim::{Pace, Sim, SimHandle, SimOptions};

const DEADLINE: Duration = Duration::from_secs(20);
const KEY: &str = "test-api-key";

// ---------------------------------------------------------------------------------------------
// The official decoder

#[derive(Clone, Debug, PartialEq)]
enum Sbe {
    BestBidAsk {
        update_id: i64,
        bid: (i64, i64),
        ask: (i64, i64),
        exponents: (i8, i8),
        symbol: String,
    },
    Trades {
        event_time_us: i64,
        transact_time_us: i64,
        /// `(id, price, qty, is_buyer_maker)`.
        trades: Vec<(i64, i64, i64, bool)>,
        exponents: (i8, i8),
        symbol: String,
    },
    Diff {
        first: i64,
        last: i64,
        bids: Vec<(i64, i64)>,
        asks: Vec<(i64, i64)>,
        exponents: (i8, i8),
        symbol: String,
    },
    Snapshot {
        update_id: i64,
        bids: Vec<(i64, i64)>,
        asks: Vec<(i64, i64)>,
        exponents: (i8, i8),
        symbol: String,
    },
}

fn symbol_at(frame: &[u8], (at, len): (usize, usize)) -> String {
    String::from_utf8(frame[at..at + len].to_vec()).unwrap()
}

/// One frame through the SBE tool's generated decoder.
fn decode(frame: &[u8]) -> Sbe {
    let header = MessageHeaderDecoder::default().wrap(ReadBuf::new(frame), 0);
    assert_eq!(header.schema_id(), 1);
    match header.template_id() {
        10001 => {
            let mut d = best_bid_ask_stream_event_codec::BestBidAskStreamEventDecoder::default()
                .header(header);
            let values = (
                d.book_update_id(),
                (d.bid_price(), d.bid_qty()),
                (d.ask_price(), d.ask_qty()),
                (d.price_exponent(), d.qty_exponent()),
            );
            let symbol = symbol_at(frame, d.symbol_decoder());
            Sbe::BestBidAsk {
                update_id: values.0,
                bid: values.1,
                ask: values.2,
                exponents: values.3,
                symbol,
            }
        }
        10000 => {
            let d = trades_stream_event_codec::TradesStreamEventDecoder::default().header(header);
            let times = (d.event_time(), d.transact_time());
            let exponents = (d.price_exponent(), d.qty_exponent());
            let mut group = d.trades_decoder();
            let mut trades = Vec::new();
            while group.advance().unwrap().is_some() {
                trades.push((
                    group.id(),
                    group.price(),
                    group.qty(),
                    group.is_buyer_maker() == BoolEnum::True,
                ));
            }
            let mut d = group.parent().unwrap();
            Sbe::Trades {
                event_time_us: times.0,
                transact_time_us: times.1,
                trades,
                exponents,
                symbol: symbol_at(frame, d.symbol_decoder()),
            }
        }
        10003 => {
            let d = depth_diff_stream_event_codec::DepthDiffStreamEventDecoder::default()
                .header(header);
            let ids = (d.first_book_update_id(), d.last_book_update_id());
            let exponents = (d.price_exponent(), d.qty_exponent());
            let mut group = d.bids_decoder();
            let mut bids = Vec::new();
            while group.advance().unwrap().is_some() {
                bids.push((group.price(), group.qty()));
            }
            let mut group = group.parent().unwrap().asks_decoder();
            let mut asks = Vec::new();
            while group.advance().unwrap().is_some() {
                asks.push((group.price(), group.qty()));
            }
            let mut d = group.parent().unwrap();
            Sbe::Diff {
                first: ids.0,
                last: ids.1,
                bids,
                asks,
                exponents,
                symbol: symbol_at(frame, d.symbol_decoder()),
            }
        }
        10002 => {
            let d = depth_snapshot_stream_event_codec::DepthSnapshotStreamEventDecoder::default()
                .header(header);
            let update_id = d.book_update_id();
            let exponents = (d.price_exponent(), d.qty_exponent());
            let mut group = d.bids_decoder();
            let mut bids = Vec::new();
            while group.advance().unwrap().is_some() {
                bids.push((group.price(), group.qty()));
            }
            let mut group = group.parent().unwrap().asks_decoder();
            let mut asks = Vec::new();
            while group.advance().unwrap().is_some() {
                asks.push((group.price(), group.qty()));
            }
            let mut d = group.parent().unwrap();
            Sbe::Snapshot {
                update_id,
                bids,
                asks,
                exponents,
                symbol: symbol_at(frame, d.symbol_decoder()),
            }
        }
        other => panic!("unknown template {other}"),
    }
}

/// A value in units of 1e-12, from a mantissa and its exponent.
fn scaled(mantissa: i64, exponent: i8) -> i128 {
    let shift = 12 + i32::from(exponent);
    assert!((0..=18).contains(&shift), "exponent {exponent}");
    i128::from(mantissa) * 10i128.pow(shift as u32)
}

/// A decimal string in units of 1e-12, parsed apart from the simulator's code.
fn decimal(text: &str) -> i128 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let fraction = fraction.trim_end_matches('0');
    assert!(fraction.len() <= 12, "{text}");
    let digits = format!("{whole}{fraction:0<12}");
    digits.parse().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Simulator and client

fn market(symbols: usize) -> Box<dyn Source> {
    Box::new(
        SyntheticSource::new(SyntheticConfig {
            symbols,
            rate_per_sec: 3000.0,
            seed: 7,
            channels: ["bookTicker", "depth@100ms", "trade"]
                .map(str::to_owned)
                .to_vec(),
            ..SyntheticConfig::default()
        })
        .unwrap(),
    )
}

struct Running {
    sim: SimHandle,
    _dir: tempfile::TempDir,
}

fn start(configure: impl FnOnce(&mut SimOptions)) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SimOptions::binance_spot_sbe(dir.path().join("certs"));
    options.pace = Pace::Recorded { speed: 1.0 };
    configure(&mut options);
    let sim = Sim::start(options, Box::new(SbeSource::new(market(1)))).unwrap();
    Running { sim, _dir: dir }
}

struct Client {
    engine: NetEngine,
    frames: FrameConsumer,
    /// Binary frames' payloads.
    binary: Vec<Vec<u8>>,
    text: Vec<String>,
    opened: bool,
    closed: Option<(Option<u16>, Option<StreamError>)>,
}

impl Client {
    fn open(sim: &SimHandle, path: &str, key: Option<&str>) -> Client {
        let config = TransportConfig::default();
        let (transport, _) =
            Transport::open(BackendChoice::Auto, config, Clock::monotonic()).unwrap();
        let (producer, frames) = frame_ring(16 << 20);
        let wait = WaitMode::Block {
            timeout: Duration::from_millis(5),
        };
        let mut engine = NetEngine::new(transport, producer, wait, config.max_connections);
        let tls = TlsSettings::new()
            .extra_ca_file(sim.ca_pem_path())
            .build()
            .unwrap();
        let headers = key
            .map(|key| vec![("X-MBX-APIKEY".to_owned(), key.to_owned())])
            .unwrap_or_default();
        let spec = StreamSpec {
            addr: sim.addr(),
            tls: Some((tls, server_name(sim.host(), None).unwrap())),
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: sim.host().to_owned(),
                port: sim.addr().port(),
                path: path.to_owned(),
                secure: true,
                max_message_bytes: 1 << 20,
                headers,
            }),
        };
        engine.open(0, spec).unwrap();
        Client {
            engine,
            frames,
            binary: Vec::new(),
            text: Vec::new(),
            opened: false,
            closed: None,
        }
    }

    fn poll(&mut self) {
        let mut events = Vec::new();
        self.engine
            .poll(&mut |conn, event| events.push((conn, event)))
            .unwrap();
        let (binary, text) = (&mut self.binary, &mut self.text);
        self.frames.drain(usize::MAX, |tag, frame| {
            let (_, kind) = split_tag(tag);
            let (_, payload) = split_frame(frame).unwrap();
            match kind {
                FrameKind::Binary => binary.push(payload.to_vec()),
                FrameKind::Text => text.push(String::from_utf8(payload.to_vec()).unwrap()),
                FrameKind::Bytes
                | FrameKind::LineA
                | FrameKind::LineB
                | FrameKind::Reply
                | FrameKind::Disconnect => {
                    panic!("a non-WebSocket frame")
                }
            }
        });
        for (_, event) in events {
            match event {
                StreamEvent::Open => self.opened = true,
                StreamEvent::Closed { close_code, error } => {
                    self.closed.get_or_insert((close_code, error));
                }
                StreamEvent::Connected | StreamEvent::Secured => {}
            }
        }
    }

    fn run_until(&mut self, what: &str, done: impl Fn(&Client) -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: not after {DEADLINE:?}");
            assert!(self.closed.is_none(), "{what}: closed {:?}", self.closed);
            self.poll();
        }
    }

    fn run_to_close(&mut self, what: &str) {
        let deadline = Instant::now() + DEADLINE;
        while self.closed.is_none() {
            assert!(Instant::now() < deadline, "{what}: no close");
            self.poll();
        }
    }
}

/// An upgrade request with `key` (or none) on a raw TLS connection: the status and JSON body.
fn raw_upgrade(sim: &SimHandle, key: Option<&str>) -> (u16, serde_json::Value) {
    let config = TlsSettings::new()
        .extra_ca_file(sim.ca_pem_path())
        .build()
        .unwrap();
    let session =
        rustls::ClientConnection::new(config, server_name(sim.host(), None).unwrap()).unwrap();
    let mut tls =
        rustls::StreamOwned::new(session, std::net::TcpStream::connect(sim.addr()).unwrap());
    let key_line = key.map_or(String::new(), |key| format!("X-MBX-APIKEY: {key}\r\n"));
    let request = format!(
        "GET /ws/btcusdt@trade HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n{key_line}\r\n"
    );
    tls.write_all(request.as_bytes()).unwrap();
    tls.sock.set_read_timeout(Some(DEADLINE)).unwrap();
    // Up to the end of the head and the body its Content-Length announces (a 101 has none and
    // its connection stays open).
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                let body = serde_json::from_str(&body[..length]).unwrap_or(serde_json::Value::Null);
                return (status, body);
            }
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => panic!("no complete response: {text}"),
            Ok(read) => bytes.extend_from_slice(&chunk[..read]),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn frames_decode_with_the_official_decoder_into_the_sources_values() {
    // The same synthetic market through Spot's JSON shapes, pulled here, is the reference.
    let mut reference = SpotSource::new(market(1));
    let running = start(|_| {});
    let mut client = Client::open(
        &running.sim,
        "/stream?streams=btcusdt@bestBidAsk/btcusdt@trade/btcusdt@depth",
        Some(KEY),
    );
    client.run_until("300 SBE frames", |client| client.binary.len() >= 300);
    assert!(client.text.is_empty(), "{:?}", client.text);
    let (mut tickers, mut trades, mut diffs) = (0, 0, 0);
    for frame in &client.binary {
        let expected = reference.next_message().expect("the reference market");
        let json: serde_json::Value = serde_json::from_slice(expected.data()).unwrap();
        let text = |key: &str| json[key].as_str().unwrap().to_owned();
        match decode(frame) {
            Sbe::BestBidAsk {
                update_id,
                bid,
                ask,
                exponents: (p, q),
                symbol,
            } => {
                assert_eq!(expected.stream, "btcusdt@bookTicker");
                assert_eq!(symbol, "BTCUSDT");
                assert_eq!(update_id, json["u"].as_i64().unwrap());
                assert_eq!(scaled(bid.0, p), decimal(&text("b")));
                assert_eq!(scaled(bid.1, q), decimal(&text("B")));
                assert_eq!(scaled(ask.0, p), decimal(&text("a")));
                assert_eq!(scaled(ask.1, q), decimal(&text("A")));
                tickers += 1;
            }
            Sbe::Trades {
                event_time_us,
                transact_time_us,
                trades: list,
                exponents: (p, q),
                symbol,
            } => {
                assert_eq!(expected.stream, "btcusdt@trade");
                assert_eq!(symbol, "BTCUSDT");
                assert_eq!(event_time_us, json["E"].as_i64().unwrap() * 1000);
                assert_eq!(transact_time_us, json["T"].as_i64().unwrap() * 1000);
                assert_eq!(list.len(), 1);
                let (id, price, qty, maker) = list[0];
                assert_eq!(id, json["t"].as_i64().unwrap());
                assert_eq!(scaled(price, p), decimal(&text("p")));
                assert_eq!(scaled(qty, q), decimal(&text("q")));
                assert_eq!(maker, json["m"].as_bool().unwrap());
                trades += 1;
            }
            Sbe::Diff {
                first,
                last,
                bids,
                asks,
                exponents: (p, q),
                symbol,
            } => {
                assert_eq!(expected.stream, "btcusdt@depth@100ms");
                assert_eq!(symbol, "BTCUSDT");
                assert_eq!(first, json["U"].as_i64().unwrap());
                assert_eq!(last, json["u"].as_i64().unwrap());
                for (levels, key) in [(&bids, "b"), (&asks, "a")] {
                    let want: Vec<(i128, i128)> = json[key]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|level| {
                            (
                                decimal(level[0].as_str().unwrap()),
                                decimal(level[1].as_str().unwrap()),
                            )
                        })
                        .collect();
                    let got: Vec<(i128, i128)> = levels
                        .iter()
                        .map(|&(price, qty)| (scaled(price, p), scaled(qty, q)))
                        .collect();
                    assert_eq!(got, want);
                }
                diffs += 1;
            }
            other => panic!("not subscribed: {other:?}"),
        }
    }
    assert!(
        tickers > 0 && trades > 0 && diffs > 0,
        "{tickers} {trades} {diffs}"
    );
}

type Book = (BTreeMap<i128, i128>, BTreeMap<i128, i128>);

fn apply(book: &mut Book, bids: &[(i64, i64)], asks: &[(i64, i64)], (p, q): (i8, i8)) {
    for (side, levels) in [(&mut book.0, bids), (&mut book.1, asks)] {
        for &(price, qty) in levels {
            if qty == 0 {
                side.remove(&scaled(price, p));
            } else {
                side.insert(scaled(price, p), scaled(qty, q));
            }
        }
    }
}

#[test]
fn a_book_synced_from_sbe_diffs_and_the_rest_snapshot_matches_depth20() {
    let running = start(|_| {});
    let mut client = Client::open(&running.sim, "/ws/btcusdt@depth/btcusdt@depth20", Some(KEY));
    client.run_until("some diffs", |client| client.binary.len() >= 10);
    let rest = tickwire::venue::rest::client_for(
        &tickwire::config::Endpoint::parse(&running.sim.rest_url()).unwrap(),
        &tickwire::config::TlsConfig {
            extra_ca_file: Some(running.sim.ca_pem_path().to_path_buf()),
            sni: None,
        },
        Duration::from_secs(5),
    )
    .unwrap();
    let snapshot = rest.get("/api/v3/depth?symbol=BTCUSDT&limit=5000").unwrap();
    assert_eq!(snapshot.status, 200);
    let snapshot: serde_json::Value = serde_json::from_slice(&snapshot.body).unwrap();
    let last_update_id = snapshot["lastUpdateId"].as_i64().unwrap();
    let side = |key: &str| -> BTreeMap<i128, i128> {
        snapshot[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|level| {
                (
                    decimal(level[0].as_str().unwrap()),
                    decimal(level[1].as_str().unwrap()),
                )
            })
            .collect()
    };
    let mut book: Book = (side("bids"), side("asks"));
    let decoded_up_to = |client: &Client| {
        client
            .binary
            .iter()
            .filter_map(|frame| match decode(frame) {
                Sbe::Diff { last, .. } => Some(last),
                _ => None,
            })
            .filter(|&last| last > last_update_id)
            .count()
    };
    client.run_until("20 diffs past the snapshot", |client| {
        decoded_up_to(client) >= 20
    });
    let mut previous_last: Option<i64> = None;
    let mut synced = false;
    let mut compared = 0;
    for frame in &client.binary {
        match decode(frame) {
            Sbe::Diff {
                first,
                last,
                bids,
                asks,
                exponents,
                ..
            } => {
                if let Some(previous) = previous_last {
                    assert_eq!(first, previous + 1, "the U/u chain is continuous");
                }
                previous_last = Some(last);
                if last <= last_update_id {
                    continue;
                }
                if !synced {
                    assert!(
                        first <= last_update_id + 1,
                        "the first diff after the snapshot covers it: U {first}, lastUpdateId {last_update_id}"
                    );
                    synced = true;
                }
                apply(&mut book, &bids, &asks, exponents);
            }
            Sbe::Snapshot {
                update_id,
                bids,
                asks,
                exponents: (p, q),
                symbol,
            } => {
                assert_eq!(symbol, "BTCUSDT");
                assert!(bids.len() <= 20 && asks.len() <= 20);
                if !synced || Some(update_id) != previous_last {
                    continue;
                }
                let top = |side: &BTreeMap<i128, i128>, rev: bool| -> Vec<(i128, i128)> {
                    let levels: Vec<(i128, i128)> = side.iter().map(|(&k, &v)| (k, v)).collect();
                    if rev {
                        levels.into_iter().rev().take(20).collect()
                    } else {
                        levels.into_iter().take(20).collect()
                    }
                };
                let as_scaled = |levels: &[(i64, i64)]| -> Vec<(i128, i128)> {
                    levels
                        .iter()
                        .map(|&(price, qty)| (scaled(price, p), scaled(qty, q)))
                        .collect()
                };
                assert_eq!(as_scaled(&bids), top(&book.0, true), "bids at {update_id}");
                assert_eq!(as_scaled(&asks), top(&book.1, false), "asks at {update_id}");
                compared += 1;
            }
            other => panic!("not subscribed: {other:?}"),
        }
    }
    assert!(
        synced && compared >= 10,
        "compared {compared} depth20 snapshots"
    );
}

#[test]
fn subscribe_answers_in_json_and_unknown_stream_names_are_refused() {
    let running = start(|_| {});
    let mut client = Client::open(&running.sim, "/ws", Some(KEY));
    client.run_until("open", |client| client.opened);
    let ask = |client: &mut Client, text: &str| -> serde_json::Value {
        let before = client.text.len();
        client.engine.send_text(0, text).unwrap();
        client.run_until("an answer", |client| client.text.len() > before);
        serde_json::from_str(&client.text[before]).unwrap()
    };
    assert_eq!(
        ask(
            &mut client,
            r#"{"method":"SUBSCRIBE","params":["btcusdt@bestBidAsk"],"id":1}"#
        ),
        serde_json::json!({"result":null,"id":1})
    );
    let refused = ask(
        &mut client,
        r#"{"method":"SUBSCRIBE","params":["btcusdt@bookTicker"],"id":2}"#,
    );
    assert_eq!(refused["code"], 2, "{refused}");
    assert_eq!(refused["id"], 2);
    assert!(refused["msg"]
        .as_str()
        .unwrap()
        .contains("btcusdt@bookTicker"));
    assert_eq!(
        ask(&mut client, r#"{"method":"LIST_SUBSCRIPTIONS","id":3}"#),
        serde_json::json!({"result":["btcusdt@bestBidAsk"],"id":3})
    );
    client.run_until("bestBidAsk frames", |client| client.binary.len() >= 3);
    assert!(client
        .binary
        .iter()
        .all(|frame| matches!(decode(frame), Sbe::BestBidAsk { .. })));
}

#[test]
fn upgrades_without_the_api_key_or_with_a_wrong_one_get_401() {
    let running = start(|options| options.api_key = Some(KEY.to_owned()));
    let (status, body) = raw_upgrade(&running.sim, None);
    assert_eq!(status, 401);
    assert_eq!(
        body,
        serde_json::json!({"code":-2014,"msg":"API-key format invalid."})
    );
    let (status, body) = raw_upgrade(&running.sim, Some("wrong"));
    assert_eq!(status, 401);
    assert_eq!(
        body,
        serde_json::json!({"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."})
    );
    let (status, _) = raw_upgrade(&running.sim, Some(KEY));
    assert_eq!(status, 101);
    assert_eq!(running.sim.stats().api_key_refused, 2);
    // Without a configured key any non-empty one is taken, a missing one still refused.
    let open = start(|_| {});
    assert_eq!(raw_upgrade(&open.sim, Some("anything")).0, 101);
    assert_eq!(raw_upgrade(&open.sim, None).0, 401);
}

#[test]
fn server_shutdown_is_sent_as_json_text_then_the_connection_closes() {
    let running = start(|options| options.faults.server_shutdown_after = Some(3));
    let mut client = Client::open(&running.sim, "/ws/btcusdt@bestBidAsk", Some(KEY));
    client.run_to_close("serverShutdown");
    assert_eq!(client.binary.len(), 3);
    assert_eq!(client.text.len(), 1, "{:?}", client.text);
    let event: serde_json::Value = serde_json::from_str(&client.text[0]).unwrap();
    assert_eq!(event["e"], "serverShutdown");
    assert!(event["E"].as_u64().unwrap() > 1_600_000_000_000);
    assert_eq!(client.closed.as_ref().unwrap().0, Some(1001));
}

#[test]
fn best_bid_ask_frames_are_stamped_by_book_update_id() {
    let (producer, mut consumer) = tickwire::ring::ring(1 << 12);
    let running = start(|options| options.stamps = Some(producer));
    let mut client = Client::open(
        &running.sim,
        "/ws/btcusdt@bestBidAsk/btcusdt@trade",
        Some(KEY),
    );
    client.run_until("20 frames", |client| client.binary.len() >= 20);
    let ids: Vec<u64> = client
        .binary
        .iter()
        .filter_map(|frame| match decode(frame) {
            Sbe::BestBidAsk { update_id, .. } => Some(u64::try_from(update_id).unwrap()),
            _ => None,
        })
        .collect();
    let mut stamps = Vec::new();
    consumer.drain(usize::MAX, |stamp| stamps.push(stamp.key));
    assert!(!ids.is_empty());
    assert!(
        stamps.starts_with(&ids),
        "stamps {stamps:?} for frames {ids:?}"
    );
}
