//! The venue simulator's server end to end over loopback: tickwire's own network engine (TLS +
//! WebSocket, as the appliance runs it), a blocking client built from tickwire's sans-IO
//! WebSocket client over rustls (to see pings, close reasons and replies one by one), a plain
//! rustls HTTPS client for REST, and Python's `websockets` as an independent implementation.
//!
//! Every test starts its own simulator on port 0 with a temporary certificate folder and a
//! `VecSource` of hand-made messages. The Python test needs `python3` with `websockets`; without
//! it, it skips with a printed reason unless `TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS=1`.
//!
//! Run: `cargo test --test tickwire sim_server::`.

use crate::support::common;
use crate::support::ws_client::{self, TlsStream, WsEvent as Ev, WsTestClient};

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::net::engine::{
    split_frame, split_tag, NetEngine, StreamError, StreamEvent, StreamSpec, WebSocketTarget,
};
use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
use tickwire::ring::{frame_ring, FrameConsumer};
use tickwire::tls::{server_name, TlsSettings};
use tickwire_sim::source::{SimMessage, Source, VecSource};
use tickwire_sim::{Faults, Pace, Sim, SimHandle, SimOptions};

const TICKER: &str = "btcusdt@bookTicker";
const DEPTH: &str = "btcusdt@depth@100ms";
const DEADLINE: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// Messages and simulators

fn message(stream: &str, data: &str, offset_ms: u64, stamp_key: Option<u64>) -> SimMessage {
    let head = format!("{{\"stream\":\"{stream}\",\"data\":");
    let combined = format!("{head}{data}}}");
    SimMessage {
        stream: stream.to_owned(),
        combined: combined.into_bytes(),
        data: head.len()..head.len() + data.len(),
        offset_ns: offset_ms * 1_000_000,
        stamp_key,
    }
}

fn ticker(update_id: u64, offset_ms: u64) -> SimMessage {
    let data = format!(
        r#"{{"e":"bookTicker","u":{update_id},"s":"BTCUSDT","b":"60000.10","B":"1.5","a":"60000.20","A":"2.25","T":1723075200000,"E":1723075200001}}"#
    );
    message(TICKER, &data, offset_ms, Some(update_id))
}

fn depth(update_id: u64, offset_ms: u64) -> SimMessage {
    let previous = update_id - 1;
    let data = format!(
        r#"{{"e":"depthUpdate","E":1723075200001,"T":1723075200000,"s":"BTCUSDT","U":{update_id},"u":{update_id},"pu":{previous},"b":[["60000.10","1.0"]],"a":[["60000.20","0"]]}}"#
    );
    message(DEPTH, &data, offset_ms, None)
}

/// A source with a depth book for BTCUSDT only, so the REST snapshot has something to serve.
struct BookSource(VecSource);

impl Source for BookSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        self.0.next_message()
    }

    fn depth_snapshot(&self, symbol: &str, limit: usize) -> Option<Vec<u8>> {
        (symbol == "BTCUSDT").then(|| snapshot_body(limit).into_bytes())
    }
}

fn snapshot_body(limit: usize) -> String {
    format!(
        r#"{{"lastUpdateId":7,"E":1,"T":1,"bids":[["60000.10","1.0"]],"asks":[["60000.20","2.0"]],"limit":{limit}}}"#
    )
}

struct Running {
    sim: SimHandle,
    _dir: tempfile::TempDir,
}

fn start_source(source: Box<dyn Source>, configure: impl FnOnce(&mut SimOptions)) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SimOptions::new(dir.path().join("certs"));
    options.pace = Pace::AsFastAsPossible;
    configure(&mut options);
    let sim = Sim::start(options, source).unwrap();
    assert!(sim.ca_pem_path().is_file());
    Running { sim, _dir: dir }
}

fn start(messages: Vec<SimMessage>, configure: impl FnOnce(&mut SimOptions)) -> Running {
    start_source(Box::new(VecSource::new(messages)), configure)
}

fn combined_bytes(messages: &[SimMessage]) -> Vec<Vec<u8>> {
    messages.iter().map(|m| m.combined.clone()).collect()
}

fn raw_bytes(messages: &[SimMessage]) -> Vec<Vec<u8>> {
    messages.iter().map(|m| m.data().to_vec()).collect()
}

// ---------------------------------------------------------------------------------------------
// tickwire's network engine as the client

struct EngineClient {
    engine: NetEngine,
    frames: FrameConsumer,
    messages: Vec<Vec<u8>>,
    opened: bool,
    closed: Option<(Option<u16>, Option<StreamError>)>,
}

impl EngineClient {
    fn open(sim: &SimHandle, path: &str, max_message_bytes: usize) -> EngineClient {
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
        let spec = StreamSpec {
            addr: sim.addr(),
            tls: Some((tls, server_name(sim.host(), None).unwrap())),
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: sim.host().to_owned(),
                port: sim.addr().port(),
                path: path.to_owned(),
                secure: true,
                max_message_bytes,
                headers: Vec::new(),
            }),
        };
        engine.open(0, spec).unwrap();
        EngineClient {
            engine,
            frames,
            messages: Vec::new(),
            opened: false,
            closed: None,
        }
    }

    /// Polls until `done` holds (or the stream closes, when `stop_on_close`).
    fn run_until(&mut self, what: &str, done: impl Fn(&EngineClient) -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "{what}: not done after {DEADLINE:?}; {} messages, closed {:?}",
                self.messages.len(),
                self.closed
            );
            assert!(
                self.closed.is_none(),
                "{what}: closed early: {:?} after {} messages",
                self.closed,
                self.messages.len()
            );
            self.poll();
        }
    }

    fn run_to_close(&mut self, what: &str) {
        let deadline = Instant::now() + DEADLINE;
        while self.closed.is_none() {
            assert!(
                Instant::now() < deadline,
                "{what}: no close; {}",
                self.messages.len()
            );
            self.poll();
        }
    }

    fn poll(&mut self) {
        let mut events = Vec::new();
        self.engine
            .poll(&mut |conn, event| events.push((conn, event)))
            .unwrap();
        let messages = &mut self.messages;
        self.frames.drain(usize::MAX, |tag, frame| {
            let (conn, _) = split_tag(tag);
            assert_eq!(conn, 0);
            let (_, payload) = split_frame(frame).unwrap();
            messages.push(payload.to_vec());
        });
        for (_, event) in events {
            match event {
                StreamEvent::Open => self.opened = true,
                // The first close is the cause. The engine can report more for the same stream
                // when a failure is followed by more received chunks in the same poll (seen with
                // io_uring: "plaintext buffer stuck full" after FrameTooLarge).
                StreamEvent::Closed { close_code, error } => {
                    self.closed.get_or_insert((close_code, error));
                }
                StreamEvent::Connected | StreamEvent::Secured => {}
            }
        }
    }

    fn send(&mut self, text: &str) {
        self.engine.send_text(0, text).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// A blocking client: tickwire's sans-IO WebSocket client over a rustls stream

/// The blocking client of these tests, on `sim`'s port; `auto_pong: false` ignores pings.
fn connect(sim: &SimHandle, path: &str, auto_pong: bool) -> WsTestClient {
    let mut client =
        WsTestClient::connect(sim.addr(), sim.host(), sim.ca_pem_path(), path, DEADLINE);
    client.auto_pong = auto_pong;
    client
}

fn tls_stream(sim: &SimHandle) -> TlsStream {
    ws_client::tls_stream(sim.addr(), sim.host(), sim.ca_pem_path())
}

/// The next event that is not a ping.
fn next_non_ping(client: &mut WsTestClient) -> Ev {
    loop {
        match client.next(DEADLINE) {
            Ev::Ping(_) => {}
            other => return other,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTPS for REST

struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Sends `requests` (raw HTTP) on one TLS connection and reads until the server closes; the
/// last request should say `Connection: close`.
fn https(sim: &SimHandle, requests: &str) -> Vec<HttpResponse> {
    let mut tls = tls_stream(sim);
    tls.sock.set_read_timeout(Some(DEADLINE)).unwrap();
    tls.write_all(requests.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    match tls.read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(error) => panic!("reading the responses: {error}"),
    }
    parse_responses(&bytes)
}

fn parse_responses(mut bytes: &[u8]) -> Vec<HttpResponse> {
    let mut responses = Vec::new();
    while !bytes.is_empty() {
        let end = bytes
            .windows(4)
            .position(|window| window == b"\r\n\r\n")
            .expect("a complete head");
        let head = std::str::from_utf8(&bytes[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.to_owned(), value.trim().to_owned())
            })
            .collect();
        let length: usize = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .expect("Content-Length")
            .1
            .parse()
            .unwrap();
        let body_start = end + 4;
        assert!(
            bytes.len() >= body_start + length,
            "Content-Length {length} but only {} body bytes",
            bytes.len() - body_start
        );
        responses.push(HttpResponse {
            status,
            headers,
            body: bytes[body_start..body_start + length].to_vec(),
        });
        bytes = &bytes[body_start + length..];
    }
    responses
}

fn get(sim: &SimHandle, target: &str) -> HttpResponse {
    let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut responses = https(sim, &request);
    assert_eq!(responses.len(), 1);
    responses.remove(0)
}

fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not after {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

#[test]
fn a_combined_stream_delivers_the_exact_bytes_in_order() {
    let messages = vec![
        ticker(1, 0),
        depth(2, 0),
        message("ethusdt@bookTicker", r#"{"e":"bookTicker","u":9}"#, 0, None),
        ticker(3, 0),
        depth(4, 0),
    ];
    let running = start(messages.clone(), |_| {});
    let sim = &running.sim;
    let mut client = EngineClient::open(
        sim,
        &format!("/public/stream?streams={TICKER}/{DEPTH}"),
        1 << 20,
    );
    client.run_until("combined", |c| c.messages.len() == 4);
    let expected: Vec<SimMessage> = messages
        .iter()
        .filter(|m| m.stream != "ethusdt@bookTicker")
        .cloned()
        .collect();
    assert_eq!(client.messages, combined_bytes(&expected));
    assert!(sim.wait_source_done(DEADLINE));
    let stats = sim.stats();
    assert!(stats.source_done);
    assert_eq!(stats.messages_pulled, 5);
    assert_eq!(
        stats.messages_unsubscribed, 1,
        "the ethusdt message had no subscriber"
    );
    assert_eq!(stats.messages_sent, 4);
    assert_eq!(stats.connections.len(), 1);
    assert_eq!(stats.connections[0].messages_sent, 4);
    assert!(stats.connections[0].open);
}

#[test]
fn a_raw_stream_delivers_the_data_objects_alone() {
    let messages = vec![ticker(1, 0), depth(2, 0), ticker(3, 0)];
    let running = start(messages.clone(), |_| {});
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_until("raw", |c| c.messages.len() == 2);
    assert_eq!(client.messages, raw_bytes(&[ticker(1, 0), ticker(3, 0)]));
    assert!(running.sim.wait_source_done(DEADLINE));
    assert_eq!(running.sim.stats().messages_unsubscribed, 1);
}

/// Binance retired the single entry point on 2026-04-23: the simulator refuses `/stream` and
/// `/ws` in both modes, upgrades and REST alike, so no test can pass against the old layout.
#[test]
fn the_retired_single_entry_point_is_refused() {
    let running = start(vec![ticker(1, 0)], |_| {});
    for target in [
        format!("/stream?streams={TICKER}"),
        format!("/ws/{TICKER}"),
        "/ws".to_owned(),
    ] {
        let response = get(&running.sim, &target);
        assert_eq!(response.status, 404, "{target}");
        let body = String::from_utf8_lossy(&response.body);
        assert!(
            body.contains("retired") && body.contains("/public"),
            "{body}"
        );
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        let responses = https(&running.sim, &request);
        assert_eq!(responses.len(), 1, "{target}");
        assert_eq!(
            responses[0].status, 404,
            "{target}: no upgrade on a retired path"
        );
    }
    assert_eq!(running.sim.stats().retired_refused, 6);
    assert_eq!(running.sim.stats().websocket_connections, 0);
}

/// Each entry point delivers only its own streams: a trade stream subscribed on `/public` and a
/// bookTicker subscribed on `/market` are acknowledged (as the venue does) and never delivered.
#[test]
fn each_entry_point_delivers_only_its_own_streams() {
    const AGG: &str = "btcusdt@aggTrade";
    // The replay starts with the first subscriber: the rest leaves the other connection half a
    // second to subscribe too.
    let agg = |id: u64| message(AGG, &format!(r#"{{"e":"aggTrade","a":{id}}}"#), 500, None);
    let messages = vec![
        ticker(1, 500),
        agg(1),
        depth(2, 500),
        agg(2),
        ticker(3, 500),
    ];
    let running = start(messages.clone(), |options| {
        options.pace = Pace::Recorded { speed: 1.0 }
    });
    let sim = &running.sim;
    let mut market = EngineClient::open(
        sim,
        &format!("/market/stream?streams={AGG}/{TICKER}"),
        1 << 20,
    );
    market.run_until("market open", |c| c.opened);
    let mut public = EngineClient::open(
        sim,
        &format!("/public/stream?streams={TICKER}/{AGG}"),
        1 << 20,
    );
    public.run_until("public", |c| c.messages.len() == 2);
    market.run_until("market", |c| c.messages.len() == 2);
    assert!(sim.wait_source_done(DEADLINE));
    assert_eq!(
        public.messages,
        combined_bytes(&[ticker(1, 500), ticker(3, 500)])
    );
    assert_eq!(market.messages, combined_bytes(&[agg(1), agg(2)]));
    let stats = sim.stats();
    let misrouted: Vec<u64> = stats.connections.iter().map(|c| c.misrouted).collect();
    assert_eq!(
        misrouted,
        [1, 1],
        "one stream on the wrong entry point each"
    );
}

/// A raw `/ws` connection that subscribes live gets raw payloads; the pacer, waiting for a first
/// subscriber, starts only once it has subscribed, so nothing is missed.
#[test]
fn a_raw_connection_subscribing_live_gets_raw_payloads() {
    let messages = vec![ticker(1, 0), depth(2, 0), ticker(3, 0)];
    let running = start(messages.clone(), |_| {});
    let mut client = EngineClient::open(&running.sim, "/public/ws", 1 << 20);
    client.run_until("open", |c| c.opened);
    client.send(&format!(
        r#"{{"method":"SUBSCRIBE","params":["{TICKER}","{DEPTH}"],"id":1}}"#
    ));
    client.run_until("raw live", |c| c.messages.len() == 4);
    assert_eq!(client.messages[0], br#"{"result":null,"id":1}"#);
    assert_eq!(client.messages[1..], raw_bytes(&messages)[..]);
}

#[test]
fn subscribe_unsubscribe_list_and_properties_answer_as_the_venue() {
    let messages = vec![ticker(1, 0), ticker(2, 0)];
    let running = start(messages.clone(), |options| {
        options.max_incoming_per_sec = 100
    });
    let mut client = connect(&running.sim, "/public/ws", true);
    client.send_text(r#"{"method":"LIST_SUBSCRIPTIONS","id":1}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":[],"id":1}"#.into())
    );
    client.send_text(r#"{"method":"GET_PROPERTY","params":["combined"],"id":2}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":false,"id":2}"#.into())
    );
    client.send_text(r#"{"method":"SET_PROPERTY","params":["combined",true],"id":3}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":null,"id":3}"#.into())
    );
    client.send_text(&format!(
        r#"{{"method":"SUBSCRIBE","params":["{TICKER}"],"id":4}}"#
    ));
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":null,"id":4}"#.into())
    );
    // combined is now on: the wrapped messages follow.
    for expected in combined_bytes(&messages) {
        assert_eq!(
            next_non_ping(&mut client),
            Ev::Text(String::from_utf8(expected).unwrap())
        );
    }
    client.send_text(r#"{"method":"LIST_SUBSCRIPTIONS","id":5}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(format!(r#"{{"result":["{TICKER}"],"id":5}}"#))
    );
    client.send_text(&format!(
        r#"{{"method":"UNSUBSCRIBE","params":["{TICKER}"],"id":6}}"#
    ));
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":null,"id":6}"#.into())
    );
    client.send_text(r#"{"method":"LIST_SUBSCRIPTIONS","id":7}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":[],"id":7}"#.into())
    );
}

#[test]
fn invalid_requests_get_the_venue_error_shape() {
    let running = start(vec![], |options| options.max_incoming_per_sec = 100);
    let mut client = connect(&running.sim, "/public/ws", true);
    let mut ask = |text: &str| -> serde_json::Value {
        client.send_text(text);
        match next_non_ping(&mut client) {
            Ev::Text(reply) => serde_json::from_str(&reply).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let reply = ask(r#"{"method":"SUBSCRIBE","params":"btcusdt@depth","id":11}"#);
    assert_eq!(reply["error"]["code"], 2);
    assert!(reply["error"]["msg"]
        .as_str()
        .unwrap()
        .starts_with("Invalid request: "));
    assert_eq!(reply["id"], 11);
    let reply = ask(r#"{"method":"FETCH","id":12}"#);
    assert_eq!(reply["error"]["code"], 2);
    assert_eq!(
        ask(r#"{"method":"SUBSCRIBE","params":[],"id":"x"}"#)["error"]["code"],
        2
    );
    assert_eq!(
        ask(r#"{"method":"GET_PROPERTY","params":["speed"],"id":13}"#)["error"]["code"],
        0
    );
    assert_eq!(
        ask(r#"{"method":"SET_PROPERTY","params":["combined","yes"],"id":14}"#)["error"]["code"],
        1
    );
    let reply = ask("{not json");
    assert_eq!(reply["error"]["code"], 3);
    assert_eq!(reply["id"], serde_json::Value::Null);
    // The connection survives bad requests.
    assert_eq!(
        ask(r#"{"method":"LIST_SUBSCRIPTIONS","id":15}"#),
        serde_json::json!({"result":[],"id":15})
    );
}

#[test]
fn more_than_the_incoming_message_limit_per_second_disconnects() {
    let running = start(vec![], |_| {});
    let mut client = connect(&running.sim, "/public/ws", true);
    for id in 0..11 {
        client.send_text(&format!(r#"{{"method":"LIST_SUBSCRIPTIONS","id":{id}}}"#));
    }
    for id in 0..10 {
        assert_eq!(
            next_non_ping(&mut client),
            Ev::Text(format!(r#"{{"result":[],"id":{id}}}"#))
        );
    }
    match next_non_ping(&mut client) {
        Ev::Close(Some(1008), reason) => assert!(reason.contains("more than 10"), "{reason}"),
        other => panic!("expected a 1008 close, got {other:?}"),
    }
    assert_eq!(next_non_ping(&mut client), Ev::Eof);
    wait_for("the connection's end", || {
        !running.sim.stats().connections[0].open
    });
    let stats = running.sim.stats();
    assert!(stats.connections[0]
        .close_reason
        .as_deref()
        .unwrap()
        .contains("incoming messages per second"));
}

#[test]
fn more_streams_than_the_limit_disconnects() {
    let running = start(vec![], |options| options.max_streams_per_connection = 2);
    let mut client = connect(&running.sim, "/public/stream?streams=a@x/b@x", true);
    client.send_text(r#"{"method":"SUBSCRIBE","params":["c@x"],"id":1}"#);
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Text(r#"{"result":null,"id":1}"#.into())
    );
    match next_non_ping(&mut client) {
        Ev::Close(Some(1008), reason) => assert!(reason.contains("too many streams"), "{reason}"),
        other => panic!("expected a 1008 close, got {other:?}"),
    }
    // At the handshake too.
    let mut client = connect(&running.sim, "/public/stream?streams=a@x/b@x/c@x", true);
    match next_non_ping(&mut client) {
        Ev::Close(Some(1008), reason) => assert!(reason.contains("3 subscribed"), "{reason}"),
        other => panic!("expected a 1008 close, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Keepalive

#[test]
fn pings_are_sent_and_a_client_without_pongs_is_disconnected() {
    let running = start(vec![], |options| {
        // Under 10 pings a second: the client's pongs count against the incoming-message limit.
        options.ping_interval = Duration::from_millis(120);
        options.pong_timeout = Duration::from_millis(300);
    });
    // A client that never answers: pings, then a 1008 close, then TCP ends.
    let mut silent = connect(&running.sim, "/public/ws", false);
    assert_eq!(silent.next(DEADLINE), Ev::Ping(b"tickwire-sim".to_vec()));
    match next_non_ping(&mut silent) {
        Ev::Close(Some(1008), reason) => assert!(reason.contains("pong timeout"), "{reason}"),
        other => panic!("expected a 1008 close, got {other:?}"),
    }
    assert_eq!(next_non_ping(&mut silent), Ev::Eof);
    // A client that answers every ping: six pings (600 ms past the first, twice the pong
    // timeout), and no close among them.
    let mut answering = connect(&running.sim, "/public/ws", true);
    for _ in 0..6 {
        assert_eq!(answering.next(DEADLINE), Ev::Ping(b"tickwire-sim".to_vec()));
    }
    wait_for("the silent connection's end", || {
        !running.sim.stats().connections[0].open
    });
    let stats = running.sim.stats();
    assert!(stats.connections[0]
        .close_reason
        .as_deref()
        .unwrap()
        .contains("pong timeout"));
    assert!(stats.connections[1].open);
}

#[test]
fn a_client_ping_is_answered_and_a_client_close_echoed() {
    let running = start(vec![], |_| {});
    let mut client = connect(&running.sim, "/public/ws", true);
    client.ws.send_ping(b"are you there").unwrap();
    client.flush();
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Pong(b"are you there".to_vec())
    );
    client.ws.close(4321, "done").unwrap();
    client.flush();
    assert_eq!(
        next_non_ping(&mut client),
        Ev::Close(Some(4321), String::new())
    );
    assert_eq!(next_non_ping(&mut client), Ev::Eof);
    wait_for("the client close code", || {
        running.sim.stats().connections[0].client_close_code == Some(4321)
    });
}

// ---------------------------------------------------------------------------------------------
// REST

#[test]
fn rest_depth_answers_200_400_404_with_exact_lengths() {
    let source = BookSource(VecSource::new(vec![]));
    let running = start_source(Box::new(source), |_| {});
    let sim = &running.sim;

    let response = get(sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=1000");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.body, snapshot_body(1000).as_bytes());
    assert_eq!(
        get(sim, "/fapi/v1/depth?symbol=BTCUSDT").body,
        snapshot_body(500).as_bytes(),
        "the default limit is 500"
    );

    let response = get(sim, "/fapi/v1/depth?symbol=ETHUSDT&limit=5");
    assert_eq!(response.status, 400);
    assert_eq!(
        response.json(),
        serde_json::json!({"code":-1121,"msg":"Invalid symbol."})
    );
    let response = get(sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=7");
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["code"], -1130);
    let response = get(sim, "/fapi/v1/depth");
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["code"], -1102);

    let response = get(sim, "/fapi/v1/exchangeInfo");
    assert_eq!(response.status, 404);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert!(response.json()["msg"].is_string());

    // Keep-alive: two requests on one connection, each answered with its exact length.
    let responses = https(
        sim,
        "GET /fapi/v1/depth?symbol=BTCUSDT&limit=5 HTTP/1.1\r\nHost: localhost\r\n\r\n\
         GET /fapi/v1/depth?symbol=BTCUSDT&limit=10 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let bodies: Vec<&[u8]> = responses.iter().map(|r| r.body.as_slice()).collect();
    assert_eq!(
        bodies,
        [snapshot_body(5).as_bytes(), snapshot_body(10).as_bytes()]
    );
    assert_eq!(sim.stats().rest_requests, 8);
}

#[test]
fn rest_errors_fail_the_first_requests_with_503() {
    let source = BookSource(VecSource::new(vec![]));
    let running = start_source(Box::new(source), |options| options.faults.rest_errors = 2);
    for _ in 0..2 {
        let response = get(&running.sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=100");
        assert_eq!(response.status, 503);
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.json()["code"], -1001);
    }
    let response = get(&running.sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=100");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, snapshot_body(100).as_bytes());
}

#[test]
fn rest_error_every_fails_every_nth_request_for_good() {
    let source = BookSource(VecSource::new(vec![]));
    let running = start_source(Box::new(source), |options| {
        options.faults.rest_error_every = Some(3)
    });
    let statuses: Vec<u16> = (0..7)
        .map(|_| get(&running.sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=5").status)
        .collect();
    assert_eq!(statuses, [200, 200, 503, 200, 200, 503, 200]);
}

#[test]
fn a_broken_client_closes_only_its_own_connection() {
    let source = BookSource(VecSource::new(vec![]));
    let running = start_source(Box::new(source), |_| {});
    // Plain HTTP on the TLS port: the TLS handshake fails; the server closes.
    let mut plain = TcpStream::connect(running.sim.addr()).unwrap();
    plain.set_read_timeout(Some(DEADLINE)).unwrap();
    plain
        .write_all(b"GET /fapi/v1/depth HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut sink = Vec::new();
    let _ = plain.read_to_end(&mut sink);
    // Not HTTP inside TLS: 400, then the connection closes.
    let responses = https(&running.sim, "HELLO\r\n\r\n");
    assert_eq!(responses[0].status, 400);
    // The simulator still serves.
    let response = get(&running.sim, "/fapi/v1/depth?symbol=BTCUSDT&limit=5");
    assert_eq!(response.status, 200);
}

// ---------------------------------------------------------------------------------------------
// Faults

fn tickers(count: u64) -> Vec<SimMessage> {
    (1..=count).map(|u| ticker(u, 0)).collect()
}

fn faulty(faults: Faults) -> impl FnOnce(&mut SimOptions) {
    move |options| options.faults = faults
}

#[test]
fn close_after_sends_a_1000_close_after_n_messages() {
    let faults = Faults {
        close_after: Some(3),
        ..Faults::default()
    };
    let running = start(tickers(6), faulty(faults));
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_to_close("close_after");
    let (code, error) = client.closed.take().unwrap();
    assert!(error.is_none(), "{error:?}");
    assert_eq!(code, Some(1000));
    assert_eq!(client.messages, raw_bytes(&tickers(3)));
}

#[test]
fn reset_after_ends_the_connection_without_a_close_frame() {
    let faults = Faults {
        reset_after: Some(2),
        ..Faults::default()
    };
    let running = start(tickers(6), faulty(faults));
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_to_close("reset_after");
    let (code, error) = client.closed.take().unwrap();
    assert_eq!(code, None, "no close frame");
    assert!(
        matches!(
            error,
            Some(StreamError::Io(_)) | Some(StreamError::ClosedWithoutClose)
        ),
        "{error:?}"
    );
    assert_eq!(client.messages, raw_bytes(&tickers(2)));
}

#[test]
fn rotate_faults_gives_each_connection_one_fault_in_turn() {
    // Without the rotation both connections would be reset after 2 messages (the reset comes
    // first); with it the first is closed after 3 and only the second is reset.
    let faults = Faults {
        close_after: Some(3),
        reset_after: Some(2),
        rotate_faults: true,
        fault_connections: 2,
        ..Faults::default()
    };
    let (gate_sender, gate) = std::sync::mpsc::channel();
    let source = GatedSource {
        gate,
        opened: false,
        messages: VecSource::new(tickers(6)),
    };
    let running = start_source(Box::new(source), faulty(faults));
    // Declared after `running`, so dropped before it: the pacer is never left at the gate.
    let gate = gate_sender;
    let mut first = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    first.run_until("first open", |c| c.opened);
    let mut second = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    second.run_until("second open", |c| c.opened);
    gate.send(()).unwrap();
    first.run_to_close("rotate_faults, first connection");
    let (code, error) = first.closed.take().unwrap();
    assert!(error.is_none(), "{error:?}");
    assert_eq!(code, Some(1000), "the first connection is closed");
    assert_eq!(first.messages.len(), 3);
    second.run_to_close("rotate_faults, second connection");
    let (code, _) = second.closed.take().unwrap();
    assert_eq!(code, None, "the second connection is reset: no close frame");
    assert_eq!(second.messages.len(), 2);
}

#[test]
fn stall_after_goes_silent_then_resumes() {
    // Ten messages 50 ms apart, then the last one 1.5 s later; the stall starts after the
    // third message and lasts 300 ms, so at least the next few are lost, and the last one,
    // due long after the stall ended, arrives.
    let mut messages: Vec<SimMessage> = (1..=10).map(|u| ticker(u, u * 50)).collect();
    messages.push(ticker(11, 2000));
    let faults = Faults {
        stall_after: Some((3, Duration::from_millis(300))),
        ..Faults::default()
    };
    let running = start(messages.clone(), |options| {
        options.faults = faults;
        options.pace = Pace::Recorded { speed: 1.0 };
    });
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_until("stall", |c| {
        c.messages.last() == Some(&messages[10].data().to_vec())
    });
    assert_eq!(client.messages[..3], raw_bytes(&messages[..3])[..]);
    assert!(
        client.messages.len() < messages.len(),
        "some messages were lost"
    );
    // What arrived after the stall is in order, a subsequence of the rest.
    let rest = raw_bytes(&messages[3..]);
    let mut position = 0;
    for received in &client.messages[3..] {
        position += rest[position..].iter().position(|m| m == received).unwrap() + 1;
    }
    // Every message was either sent or lost (counted just after the write returns, so wait).
    wait_for("every message accounted for", || {
        let stats = running.sim.stats();
        stats.connections[0].messages_lost + stats.connections[0].messages_sent == 11
    });
    assert!(running.sim.stats().connections[0].messages_lost >= 1);
}

#[test]
fn malformed_every_sends_truncated_invalid_json() {
    let faults = Faults {
        malformed_every: Some(2),
        ..Faults::default()
    };
    let messages = tickers(4);
    let running = start(messages.clone(), faulty(faults));
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_until("malformed", |c| c.messages.len() == 4);
    let expected = raw_bytes(&messages);
    for (index, (received, original)) in client.messages.iter().zip(&expected).enumerate() {
        if index % 2 == 1 {
            assert!(received.len() < original.len() && original.starts_with(received));
            assert!(serde_json::from_slice::<serde_json::Value>(received).is_err());
        } else {
            assert_eq!(received, original);
        }
    }
}

#[test]
fn an_oversized_frame_makes_the_engine_close_with_1009() {
    let faults = Faults {
        oversized_after: Some((1, 2 << 20)),
        ..Faults::default()
    };
    let running = start(tickers(3), faulty(faults));
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_to_close("oversized");
    let (_, error) = client.closed.take().unwrap();
    match error {
        Some(StreamError::WebSocket(error)) => assert_eq!(error.close_code(), 1009),
        other => panic!("expected a WebSocket error, got {other:?}"),
    }
    assert_eq!(client.messages, raw_bytes(&tickers(1)));
}

#[test]
fn fragments_reassemble_to_identical_bytes() {
    let faults = Faults {
        fragment_into: Some(5),
        ..Faults::default()
    };
    let messages = vec![ticker(1, 0), depth(2, 0), ticker(3, 0)];
    let running = start(messages.clone(), faulty(faults));
    let mut client = EngineClient::open(
        &running.sim,
        &format!("/public/stream?streams={TICKER}/{DEPTH}"),
        1 << 20,
    );
    client.run_until("fragments", |c| c.messages.len() == 3);
    assert_eq!(client.messages, combined_bytes(&messages));
}

#[test]
fn skip_depth_after_drops_one_depth_message() {
    let faults = Faults {
        skip_depth_after: Some(2),
        ..Faults::default()
    };
    let messages = vec![
        depth(2, 0),
        ticker(1, 0),
        ticker(3, 0),
        depth(3, 0),
        depth(4, 0),
    ];
    let running = start(messages.clone(), faulty(faults));
    let mut client = EngineClient::open(
        &running.sim,
        &format!("/public/stream?streams={TICKER}/{DEPTH}"),
        1 << 20,
    );
    client.run_until("skip_depth", |c| c.messages.len() == 4);
    assert!(running.sim.wait_source_done(DEADLINE));
    let expected = [&messages[0], &messages[1], &messages[2], &messages[4]];
    let expected: Vec<Vec<u8>> = expected.iter().map(|m| m.combined.clone()).collect();
    assert_eq!(client.messages, expected);
    assert_eq!(running.sim.stats().connections[0].messages_lost, 1);
}

/// A source that hands out nothing until the test opens its gate, so that every client can be
/// connected and subscribed first.
struct GatedSource {
    gate: std::sync::mpsc::Receiver<()>,
    opened: bool,
    messages: VecSource,
}

impl Source for GatedSource {
    fn next_message(&mut self) -> Option<SimMessage> {
        if !self.opened {
            // A dropped gate ends the source, so a failing test cannot leave the pacer blocked.
            self.gate.recv().ok()?;
            self.opened = true;
        }
        self.messages.next_message()
    }

    fn depth_snapshot(&self, _symbol: &str, _limit: usize) -> Option<Vec<u8>> {
        None
    }
}

#[test]
fn faults_apply_to_the_first_connections_only() {
    let faults = Faults {
        close_after: Some(1),
        fault_connections: 1,
        ..Faults::default()
    };
    let (gate_sender, gate) = std::sync::mpsc::channel();
    let source = GatedSource {
        gate,
        opened: false,
        messages: VecSource::new(tickers(4)),
    };
    let running = start_source(Box::new(source), faulty(faults));
    // Declared after `running`, so dropped before it: the pacer is never left at the gate.
    let gate = gate_sender;
    let mut first = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    first.run_until("first open", |c| c.opened);
    let mut second = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    second.run_until("second open", |c| c.opened);
    gate.send(()).unwrap();
    first.run_to_close("first");
    assert_eq!(first.closed.as_ref().unwrap().0, Some(1000));
    assert_eq!(first.messages, raw_bytes(&tickers(1)));
    // The second connection is past `fault_connections`: it gets everything and stays open.
    second.run_until("second", |c| c.messages.len() == 4);
    assert_eq!(second.messages, raw_bytes(&tickers(4)));
    assert!(running.sim.wait_source_done(DEADLINE));
    second.poll();
    assert!(second.closed.is_none());
    wait_for("the first connection's end", || {
        !running.sim.stats().connections[0].open
    });
    assert!(running.sim.stats().connections[1].open);
}

#[test]
fn handshake_delay_holds_the_tls_handshake() {
    let delay = Duration::from_millis(300);
    let faults = Faults {
        handshake_delay: Some(delay),
        ..Faults::default()
    };
    let running = start(tickers(1), faulty(faults));
    let started = Instant::now();
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_until("delayed open", |c| c.opened);
    // A lower bound only: the server sleeps at least this long before answering.
    assert!(started.elapsed() >= delay);
    client.run_until("data", |c| c.messages.len() == 1);
}

#[test]
fn a_wrong_host_certificate_fails_verification_with_a_name_error() {
    let faults = Faults {
        wrong_host_cert: true,
        ..Faults::default()
    };
    let running = start(tickers(1), faulty(faults));
    let mut client = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    client.run_to_close("wrong host");
    let (_, error) = client.closed.take().unwrap();
    let message = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("TLS")
            && message.contains("localhost")
            && message.contains("wrong-host.invalid"),
        "{message}"
    );
    assert!(client.messages.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Stamps

#[test]
fn stamps_are_pushed_in_send_order_for_the_first_connection() {
    let (producer, mut consumer) = tickwire::ring::ring(64);
    let messages = vec![ticker(10, 0), depth(2, 0), ticker(11, 0), ticker(12, 0)];
    let running = start(messages, |options| options.stamps = Some(producer));
    let mut client = EngineClient::open(
        &running.sim,
        &format!("/public/stream?streams={TICKER}/{DEPTH}"),
        1 << 20,
    );
    client.run_until("stamped", |c| c.messages.len() == 4);
    assert!(running.sim.wait_source_done(DEADLINE));
    let mut stamps = Vec::new();
    consumer.drain(usize::MAX, |stamp| stamps.push(stamp));
    let keys: Vec<u64> = stamps.iter().map(|stamp| stamp.key).collect();
    assert_eq!(keys, [10, 11, 12], "the depth message has no key");
    assert!(stamps
        .windows(2)
        .all(|pair| pair[0].send_ns <= pair[1].send_ns));
    assert!(stamps[0].send_ns > 0);
    let stats = running.sim.stats();
    assert_eq!(stats.stamps_pushed, 3);
    // Each stamped message's send path (stamp to the write's return) is recorded once, and so
    // is its encryption, which comes before the stamp; unstamped messages add to neither.
    let send_path = stats.send_path.expect("the stamped messages' send path");
    assert_eq!(send_path.messages, 3);
    assert!(0 < send_path.p50_ns && send_path.p50_ns <= send_path.max_ns);
    let encrypt_path = stats
        .encrypt_path
        .expect("the stamped messages' encryption");
    assert_eq!(encrypt_path.messages, 3);
    assert!(0 < encrypt_path.p50_ns && encrypt_path.p50_ns <= encrypt_path.max_ns);
}

/// A `/market` connection written to first (its aggTrade comes first) does not take the stamps:
/// they follow the first connection that is written a stamped message, the bookTickers'.
#[test]
fn stamps_follow_the_bookticker_connection_not_the_first_written() {
    const AGG: &str = "btcusdt@aggTrade";
    let (producer, mut consumer) = tickwire::ring::ring(64);
    let agg = message(AGG, r#"{"e":"aggTrade","a":1}"#, 0, None);
    let messages = vec![agg, ticker(10, 500), ticker(11, 500)];
    let running = start(messages, |options| {
        options.stamps = Some(producer);
        options.pace = Pace::Recorded { speed: 1.0 };
    });
    let mut market = EngineClient::open(&running.sim, &format!("/market/ws/{AGG}"), 1 << 20);
    market.run_until("the aggTrade", |c| c.messages.len() == 1);
    let mut public = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    public.run_until("the bookTickers", |c| c.messages.len() == 2);
    let mut keys = Vec::new();
    consumer.drain(usize::MAX, |stamp| keys.push(stamp.key));
    assert_eq!(keys, [10, 11]);
}

// ---------------------------------------------------------------------------------------------
// Python websockets

#[test]
fn python_websockets_receives_the_exact_bytes_and_a_reply() {
    if !common::python_websockets_available() {
        return;
    }
    let messages = vec![ticker(1, 0), depth(2, 0), ticker(3, 0)];
    let running = start(messages.clone(), |_| {});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sim_client.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(running.sim.ws_url(&[TICKER, DEPTH]))
        .arg(running.sim.ca_pem_path())
        .arg("3")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(output.status.success(), "{:?}", output.status);
    let lines: Vec<String> = BufReader::new(&output.stdout[..])
        .lines()
        .map(Result::unwrap)
        .collect();
    let received: Vec<Vec<u8>> = lines
        .iter()
        .filter_map(|line| line.strip_prefix("MSG "))
        .map(|hex| {
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(received, combined_bytes(&messages));
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!(r#"REPLY {{"result":["{TICKER}","{DEPTH}"],"id":7}}"#).as_str())
    );
    wait_for("the python client's close", || {
        running.sim.stats().connections[0].client_close_code == Some(1000)
    });
}

// ---------------------------------------------------------------------------------------------
// Slow clients and stopping

/// A client that stops reading is dropped after the write timeout; the others get everything.
#[test]
fn a_client_that_stops_reading_is_dropped_and_the_others_keep_receiving() {
    // 160 messages of 64 KiB: 10 MiB, more than loopback socket buffers hold for a reader that
    // never reads.
    let padding = "x".repeat(64 * 1024);
    let messages: Vec<SimMessage> = (1..=160)
        .map(|u| {
            let data = format!(r#"{{"e":"bookTicker","u":{u},"pad":"{padding}"}}"#);
            message(TICKER, &data, 0, Some(u))
        })
        .collect();
    let (gate_sender, gate) = std::sync::mpsc::channel();
    let source = GatedSource {
        gate,
        opened: false,
        messages: VecSource::new(messages.clone()),
    };
    let running = start_source(Box::new(source), |options| {
        options.write_timeout = Duration::from_millis(200);
    });
    let gate = gate_sender;
    let _stuck = connect(&running.sim, &format!("/public/ws/{TICKER}"), true);
    let mut reader = EngineClient::open(&running.sim, &format!("/public/ws/{TICKER}"), 1 << 20);
    reader.run_until("open", |c| c.opened);
    gate.send(()).unwrap();
    reader.run_until("all messages", |c| c.messages.len() == messages.len());
    assert_eq!(reader.messages, raw_bytes(&messages));
    let stats = running.sim.stats();
    let reason = stats.connections[0]
        .close_reason
        .clone()
        .unwrap_or_default();
    assert!(reason.contains("write failed"), "{reason}");
    assert!(stats.connections[0].messages_sent < messages.len() as u64);
}

#[test]
fn stop_closes_every_connection_and_returns() {
    let faults = Faults {
        handshake_delay: Some(Duration::from_secs(3600)),
        fault_connections: 1,
        ..Faults::default()
    };
    let mut running = start(tickers(1), faulty(faults));
    // One connection held before its TLS handshake (an hour's delay), one open WebSocket.
    let held = TcpStream::connect(running.sim.addr()).unwrap();
    wait_for("the held connection", || {
        running.sim.stats().connections_accepted == 1
    });
    let mut open = connect(&running.sim, "/public/ws", true);
    running.sim.stop();
    assert_eq!(open.next(DEADLINE), Ev::Eof);
    held.set_read_timeout(Some(DEADLINE)).unwrap();
    match (&held).read(&mut [0u8; 16]) {
        Ok(0) => {}
        Err(error) if error.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("the held connection is still open: {other:?}"),
    }
    // Stopping twice (and dropping after) is harmless.
    running.sim.stop();
}

#[test]
fn starting_immediately_drops_what_nobody_subscribed_and_a_bad_speed_is_refused() {
    let running = start(tickers(5), |options| {
        options.start = tickwire_sim::Start::Immediately;
    });
    assert!(running.sim.wait_source_done(DEADLINE));
    let stats = running.sim.stats();
    assert_eq!((stats.messages_pulled, stats.messages_unsubscribed), (5, 5));
    assert_eq!(stats.messages_sent, 0);

    let dir = tempfile::tempdir().unwrap();
    let mut options = SimOptions::new(dir.path());
    options.pace = Pace::Recorded { speed: 0.0 };
    let error = Sim::start(options, Box::new(VecSource::new(vec![])))
        .err()
        .expect("speed 0 is refused");
    assert!(error.to_string().contains("speed"), "{error}");
}
