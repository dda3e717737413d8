//! The Thalex simulator (`tickwire::sim::thalex`) against a real client over loopback: TLS from
//! rustls trusting the run's CA, tickwire's own sans-IO WebSocket client, JSON-RPC requests as a
//! Thalex client sends them, and login tokens made with `venue::thalex::auth::login_token`.
//!
//! Every test starts its own server on port 0 with a temporary certificate folder.
//!
//! Run: `cargo test --test sim_thalex`.

use rustls::{ClientConnection, StreamOwned};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tickwire::sim::thalex::{self, ThalexFaults, ThalexHandle, ThalexOptions};
use tickwire::tls::{server_name, TlsSettings};
use tickwire::venue::thalex::auth;
use tickwire::ws;

const DEADLINE: Duration = Duration::from_secs(10);
const COMBO: &str = "[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]";

struct Running {
    sim: ThalexHandle,
    _cert_dir: tempfile::TempDir,
}

fn start(configure: impl FnOnce(&mut ThalexOptions)) -> Running {
    let cert_dir = tempfile::tempdir().unwrap();
    let mut options = ThalexOptions::new(cert_dir.path());
    options.rate = 200.0;
    configure(&mut options);
    Running {
        sim: thalex::start(options).unwrap(),
        _cert_dir: cert_dir,
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn good_token() -> String {
    auth::login_token(
        thalex::TEST_KEY_ID,
        thalex::TEST_PRIVATE_KEY_PEM,
        now_secs(),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// A blocking client: tickwire's sans-IO WebSocket client over a rustls stream

#[derive(Debug, PartialEq)]
enum Ev {
    Text(Value),
    Ping,
    Pong(Vec<u8>),
    Close(Option<u16>),
    Eof,
    Timeout,
}

struct Client {
    tls: StreamOwned<ClientConnection, TcpStream>,
    ws: ws::Client,
    received: Vec<u8>,
    next_id: u64,
}

fn tls_stream(sim: &ThalexHandle) -> StreamOwned<ClientConnection, TcpStream> {
    let config = TlsSettings::new()
        .extra_ca_file(sim.ca_pem_path())
        .build()
        .unwrap();
    let session = ClientConnection::new(config, server_name("127.0.0.1", None).unwrap()).unwrap();
    StreamOwned::new(session, TcpStream::connect(sim.addr()).unwrap())
}

/// Sends an upgrade request for `path` and returns the stream and the response head.
fn upgrade(sim: &ThalexHandle, path: &str) -> (StreamOwned<ClientConnection, TcpStream>, String) {
    let mut tls = tls_stream(sim);
    let mut handshake = ws::Handshake::new().unwrap();
    let request = handshake
        .request(&ws::Request {
            host: "127.0.0.1",
            port: sim.addr().port(),
            secure: true,
            path,
            headers: &[],
        })
        .unwrap();
    tls.write_all(&request).unwrap();
    tls.sock.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    while !received.windows(4).any(|window| window == b"\r\n\r\n") {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(read) => received.extend_from_slice(&chunk[..read]),
        }
    }
    (tls, String::from_utf8_lossy(&received).into_owned())
}

impl Client {
    fn connect(sim: &ThalexHandle) -> Client {
        let (tls, head) = upgrade(sim, thalex::PATH);
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        Client {
            tls,
            ws: ws::Client::new(ws::Config::default()).unwrap(),
            received: Vec::new(),
            next_id: 1,
        }
    }

    fn send_text(&mut self, text: &str) {
        self.ws
            .send(ws::MessageKind::Text, text.as_bytes())
            .unwrap();
        self.flush();
    }

    fn flush(&mut self) {
        let output = self.ws.output().to_vec();
        self.ws.consume_output(output.len());
        if !output.is_empty() {
            let _ = self.tls.write_all(&output);
        }
    }

    /// Sends a request and returns its id.
    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_text(&json!({"method": method, "params": params, "id": id}).to_string());
        id
    }

    /// The next message or control frame (pings are answered by the client).
    fn next(&mut self, timeout: Duration) -> Ev {
        let deadline = Instant::now() + timeout;
        loop {
            let (consumed, event) = {
                let read = self.ws.read(&self.received).expect("valid server frames");
                let event = match read.event {
                    ws::Event::Message { payload, .. } => {
                        let text = std::str::from_utf8(payload).unwrap();
                        Some(Ev::Text(serde_json::from_str(text).unwrap_or_else(
                            |error| panic!("not JSON ({error}): {text}"),
                        )))
                    }
                    ws::Event::Ping { .. } => Some(Ev::Ping),
                    ws::Event::Pong { payload } => Some(Ev::Pong(payload.to_vec())),
                    ws::Event::Close { code, .. } => Some(Ev::Close(code)),
                    _ => None,
                };
                (read.consumed, event)
            };
            self.received.drain(..consumed);
            self.flush();
            if let Some(event) = event {
                return event;
            }
            if consumed > 0 {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ev::Timeout;
            }
            self.tls
                .sock
                .set_read_timeout(Some(deadline - now))
                .unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.tls.read(&mut chunk) {
                Ok(0) => return Ev::Eof,
                Ok(read) => self.received.extend_from_slice(&chunk[..read]),
                Err(error)
                    if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return Ev::Timeout
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                    ) =>
                {
                    return Ev::Eof
                }
                Err(error) => panic!("read failed: {error}"),
            }
        }
    }

    /// The next JSON message, skipping pings.
    fn next_json(&mut self) -> Value {
        loop {
            match self.next(DEADLINE) {
                Ev::Ping => {}
                Ev::Text(value) => return value,
                other => panic!("expected a message, got {other:?}"),
            }
        }
    }

    /// The reply to request `id`, skipping notifications.
    fn reply(&mut self, id: u64) -> Value {
        loop {
            let message = self.next_json();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            assert!(
                message.get("channel_name").is_some(),
                "neither a notification nor reply {id}: {message}"
            );
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.reply(id)
    }

    /// The next notification of `channel`, skipping others.
    fn notification(&mut self, channel: &str) -> Value {
        loop {
            let message = self.next_json();
            if message.get("channel_name") == Some(&json!(channel)) {
                return message;
            }
        }
    }
}

fn error_code(reply: &Value) -> Option<i64> {
    reply.pointer("/error/code").and_then(Value::as_i64)
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn login_accepts_the_test_key_and_refuses_other_tokens_with_the_reason() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);

    let other_kid = auth::login_token("someone-else", thalex::TEST_PRIVATE_KEY_PEM, now_secs());
    let id = client.next_id;
    client.send_text(&auth::login_request(id, &other_kid.unwrap()));
    client.next_id += 1;
    let reply = client.reply(id);
    assert_eq!(error_code(&reply), Some(1), "{reply}");
    assert!(reply.to_string().contains("unknown key id"), "{reply}");

    let stale = auth::login_token(
        thalex::TEST_KEY_ID,
        thalex::TEST_PRIVATE_KEY_PEM,
        now_secs() - 3600,
    )
    .unwrap();
    let reply = client.call("public/login", json!({ "token": stale }));
    assert!(reply.to_string().contains("stale iat"), "{reply}");

    let mut forged = good_token();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let reply = client.call("public/login", json!({ "token": forged }));
    assert_eq!(error_code(&reply), Some(1), "{reply}");
    assert!(reply.to_string().contains("signature"), "{reply}");

    let id = client.next_id;
    client.send_text(&auth::login_request(id, &good_token()));
    let reply = client.reply(id);
    assert!(reply.get("result").is_some(), "{reply}");
    assert!(
        reply.to_string().starts_with(&format!("{{\"id\":{id},")),
        "id first: {reply}"
    );
    let stats = running.sim.stats();
    assert_eq!((stats.logins_ok, stats.logins_failed), (1, 3));
}

#[test]
fn private_subscribe_needs_a_login() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    let channels = json!({ "channels": ["account.orders", "account.portfolio"] });
    let reply = client.call("private/subscribe", channels.clone());
    assert_eq!(error_code(&reply), Some(1), "{reply}");
    assert!(reply.to_string().contains("not logged in"), "{reply}");
    let reply = client.call("public/login", json!({ "token": good_token() }));
    assert!(reply.get("result").is_some(), "{reply}");
    let reply = client.call("private/subscribe", channels);
    assert_eq!(
        reply["result"],
        json!(["account.orders", "account.portfolio"])
    );
}

#[test]
fn subscribe_answers_with_the_valid_channels_only() {
    let running = start(|options| options.rate = 20.0);
    let mut client = Client::connect(&running.sim);
    let book = format!("book.{COMBO}.1.5.raw");
    let reply = client.call(
        "public/subscribe",
        json!({ "channels": [
            "ticker.BTC-PERPETUAL.100ms",
            "ticker.NOT-AN-INSTRUMENT.100ms",
            "lwt.ETH-PERPETUAL.7ms",
            book,
            "price_index.BTCUSD",
            "recent_trades.BTCUSD.all",
            "candles.BTC-PERPETUAL",
            "system",
        ]}),
    );
    assert_eq!(
        reply["result"],
        json!([
            "ticker.BTC-PERPETUAL.100ms",
            book,
            "price_index.BTCUSD",
            "recent_trades.BTCUSD.all",
            "system"
        ]),
        "{reply}"
    );
    let stats = running.sim.stats();
    assert_eq!((stats.channels_accepted, stats.channels_rejected), (5, 3));

    let ticker = client.notification("ticker.BTC-PERPETUAL.100ms");
    let keys: Vec<&str> = ticker["notification"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "best_bid_price",
        "best_ask_price",
        "mark_price",
        "index",
        "mark_timestamp",
    ] {
        assert!(keys.contains(&key), "{ticker}");
    }
    let trades = client.notification("recent_trades.BTCUSD.all");
    assert_eq!(trades["snapshot"], json!(true));
    let first = &trades["notification"][0];
    assert!(first["trade_id"]
        .as_str()
        .unwrap()
        .bytes()
        .all(|b| b.is_ascii_digit()));
    assert_eq!(first["instrument_name"], json!("BTC-PERPETUAL"));
    let index = client.notification("price_index.BTCUSD");
    assert_eq!(index["notification"]["index_name"], json!("BTCUSD"));
}

/// Applies `[price, amount, outright]` changes to one side, keyed by price in 0.5 ticks.
fn apply(side: &mut BTreeMap<i64, f64>, changes: &Value) {
    for change in changes.as_array().unwrap() {
        let price = change[0].as_f64().unwrap();
        let amount = change[1].as_f64().unwrap();
        let ticks = (price * 2.0).round() as i64;
        assert_eq!(ticks as f64 / 2.0, price, "price on the 0.5 tick");
        if amount == 0.0 {
            side.remove(&ticks);
        } else {
            side.insert(ticks, amount);
        }
    }
}

#[test]
fn a_book_is_a_snapshot_then_changes_that_keep_it_sane() {
    let running = start(|options| options.rate = 500.0);
    let mut client = Client::connect(&running.sim);
    let channel = "book.BTC-PERPETUAL.1.10.100ms";
    let reply = client.call("public/subscribe", json!({ "channels": [channel] }));
    assert_eq!(reply["result"], json!([channel]));
    let snapshot = client.notification(channel);
    assert_eq!(snapshot["snapshot"], json!(true), "{snapshot}");
    let text = snapshot.to_string();
    assert!(text.starts_with(r#"{"channel_name":"#), "{text}");
    let (mut bids, mut asks) = (BTreeMap::new(), BTreeMap::new());
    apply(&mut bids, &snapshot["notification"]["bid_changes"]);
    apply(&mut asks, &snapshot["notification"]["ask_changes"]);
    assert_eq!((bids.len(), asks.len()), (10, 10));
    let (mut integers, mut fractions, mut trades) = (0, 0, 0);
    for _ in 0..200 {
        let update = client.notification(channel);
        assert_eq!(update.get("snapshot"), None, "{update}");
        let notification = &update["notification"];
        for side in ["bid_changes", "ask_changes"] {
            for change in notification[side].as_array().unwrap() {
                // Grouping 1 puts every price on a whole number; amounts are both kinds.
                assert!(change[0].is_u64(), "{change}");
                if change[1].is_u64() {
                    integers += 1;
                } else {
                    fractions += 1;
                }
            }
        }
        trades += notification["trades"].as_array().unwrap().len();
        apply(&mut bids, &notification["bid_changes"]);
        apply(&mut asks, &notification["ask_changes"]);
        assert_eq!((bids.len(), asks.len()), (10, 10), "{update}");
        let best_bid = bids.keys().next_back().unwrap();
        let best_ask = asks.keys().next().unwrap();
        assert!(best_bid < best_ask, "crossed: {best_bid} >= {best_ask}");
        assert!(notification["time"].is_f64());
    }
    assert!(integers > 0 && fractions > 0, "{integers} {fractions}");
    assert!(trades > 0);
}

#[test]
fn more_requests_than_the_limit_are_throttled() {
    let running = start(|options| options.request_limit_per_sec = 5);
    let mut client = Client::connect(&running.sim);
    let ids: Vec<u64> = (0..8)
        .map(|_| client.request("public/subscribe", json!({ "channels": ["system"] })))
        .collect();
    let codes: Vec<Option<i64>> = ids
        .iter()
        .map(|&id| error_code(&client.reply(id)))
        .collect();
    assert_eq!(codes.iter().filter(|code| code.is_none()).count(), 5);
    assert_eq!(codes[5..], [Some(4), Some(4), Some(4)]);
    assert_eq!(running.sim.stats().throttled_requests, 3);
}

#[test]
fn unknown_methods_and_bad_json_get_code_2() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    let reply = client.call("public/nonsense", json!({}));
    assert_eq!(error_code(&reply), Some(2));
    client.send_text("{not json");
    let reply = client.next_json();
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(error_code(&reply), Some(2));
}

#[test]
fn unsubscribe_stops_the_data() {
    let running = start(|options| options.rate = 200.0);
    let mut client = Client::connect(&running.sim);
    let channel = "ticker.ETH-PERPETUAL.raw";
    client.call("public/subscribe", json!({ "channels": [channel] }));
    for _ in 0..5 {
        client.notification(channel);
    }
    let reply = client.call(
        "public/unsubscribe",
        json!({ "channels": [channel, "ticker.BTC-PERPETUAL.raw"] }),
    );
    assert_eq!(reply["result"], json!([channel]));
    let sent = running.sim.stats().data_messages_sent;
    match client.next(Duration::from_millis(300)) {
        Ev::Timeout => {}
        other => panic!("data after the unsubscribe reply: {other:?}"),
    }
    assert_eq!(running.sim.stats().data_messages_sent, sent);
}

#[test]
fn the_reconnect_event_comes_then_a_1001_close() {
    let grace = Duration::from_millis(300);
    let running = start(|options| {
        options.rate = 100.0;
        options.faults = ThalexFaults {
            reconnect_event_after: Some((3, grace)),
            ..ThalexFaults::default()
        };
    });
    let mut client = Client::connect(&running.sim);
    client.call(
        "public/subscribe",
        json!({ "channels": ["system", "lwt.BTC-PERPETUAL.raw"] }),
    );
    let event = client.notification("system");
    let at = Instant::now();
    assert_eq!(event["notification"], json!({"event": "reconnect"}));
    loop {
        match client.next(DEADLINE) {
            Ev::Text(message) => {
                assert_eq!(message["channel_name"], json!("lwt.BTC-PERPETUAL.raw"))
            }
            Ev::Ping => {}
            Ev::Close(code) => {
                assert_eq!(code, Some(1001));
                break;
            }
            other => panic!("expected data then a close, got {other:?}"),
        }
    }
    assert!(at.elapsed() >= grace - Duration::from_millis(50));
    let stats = running.sim.stats();
    assert_eq!(stats.reconnect_events_sent, 1);

    // The fault applies to the first connection only: the next one stays up.
    let mut second = Client::connect(&running.sim);
    second.call(
        "public/subscribe",
        json!({ "channels": ["system", "lwt.BTC-PERPETUAL.raw"] }),
    );
    for _ in 0..10 {
        second.notification("lwt.BTC-PERPETUAL.raw");
    }
    assert_eq!(running.sim.stats().reconnect_events_sent, 1);
}

#[test]
fn close_after_sends_a_1000_close() {
    let running = start(|options| {
        options.faults = ThalexFaults {
            close_after: Some(4),
            ..ThalexFaults::default()
        };
    });
    let mut client = Client::connect(&running.sim);
    client.call(
        "public/subscribe",
        json!({ "channels": ["ticker.BTC-27JUN25.raw"] }),
    );
    let mut data = 0;
    loop {
        match client.next(DEADLINE) {
            Ev::Text(_) => data += 1,
            Ev::Ping => {}
            Ev::Close(code) => {
                assert_eq!(code, Some(1000));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(data, 4);
    assert_eq!(running.sim.stats().closes_injected, 1);
}

#[test]
fn a_ping_is_answered_with_its_payload() {
    let running = start(|_| {});
    let mut client = Client::connect(&running.sim);
    client.ws.send_ping(b"are you there").unwrap();
    client.flush();
    loop {
        match client.next(DEADLINE) {
            Ev::Pong(payload) => {
                assert_eq!(payload, b"are you there");
                break;
            }
            Ev::Ping => {}
            other => panic!("expected a pong, got {other:?}"),
        }
    }
    assert_eq!(running.sim.stats().pings_received, 1);
}

#[test]
fn other_paths_are_404() {
    let running = start(|_| {});
    let (_tls, head) = upgrade(&running.sim, "/ws/api/v1");
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
    assert!(running.sim.url().ends_with("/ws/api/v2"));
}
