//! One server on loopback: every event reaches a consumer in order and once; a consumer that
//! does not read costs the bridge nothing and is told exactly what it lost; a server killed and
//! restarted mid-stream costs the consumer exactly the events it reports lost, none twice; a
//! consumer started after the bridge stopped replays the JetStream stream: what a live consumer
//! got, in order, none twice.

use super::{bus_dir, bus_writer, nats_server_binary, trade, BridgeProcess, NatsServer, PATIENCE};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tickwire::event::Body;
use tickwire_bus::BusWriter;
use tickwire_client::Next;
use tickwire_nats::bridge::parse_servers;
use tickwire_nats::{NatsClient, NatsOptions, ReplayStart};

pub const INSTRUMENTS: u32 = 3;
const TRADES: &str = "tickwire.*.*.*.trade";

/// What a consumer saw: each instrument's trade ids in arrival order, and the losses reported.
#[derive(Default)]
struct Seen {
    positions: HashMap<u32, Vec<u64>>,
    missed: u64,
    names_checked: bool,
}

impl Seen {
    fn last(&self, instrument: u32) -> Option<u64> {
        self.positions
            .get(&instrument)
            .and_then(|seen| seen.last().copied())
    }

    /// Reads what is there now (`wait` bounded by `timeout`), checking names on the way.
    fn read(&mut self, client: &mut NatsClient, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let next = client.wait(remaining).expect("the client runs");
            match next {
                Next::Events(events) => {
                    for event in events {
                        let Body::Trade(trade) = event.body() else {
                            panic!("only trades were subscribed to: {event:?}");
                        };
                        let instrument = event.header.instrument_id;
                        let (venue, symbol) = events.name(event);
                        assert_eq!(venue, "sim");
                        assert_eq!(symbol, format!("SYM.{instrument}"));
                        self.names_checked = true;
                        self.positions
                            .entry(instrument)
                            .or_default()
                            .push(trade.trade_id);
                    }
                }
                Next::Overrun { missed, .. } => self.missed += missed,
                Next::NewEpoch { epoch } => panic!("no new stream was started (epoch {epoch})"),
                Next::Closed | Next::Removed => {}
                Next::Idle => return,
            }
            if remaining.is_zero() {
                return;
            }
        }
    }

    /// Each instrument's trades strictly increasing (nothing twice, nothing out of order), and
    /// every position from the first seen to the last either received or reported missed.
    fn assert_exact(&self, label: &str) {
        let mut span = 0;
        let mut received = 0;
        for (instrument, positions) in &self.positions {
            assert!(
                positions.windows(2).all(|pair| pair[0] < pair[1]),
                "{label}: instrument {instrument} repeated or reordered a trade"
            );
            span += positions.last().unwrap() - positions[0] + 1;
            received += positions.len() as u64;
        }
        assert_eq!(
            received + self.missed,
            span,
            "{label}: received {received} + reported missed {} is not every trade sent ({span})",
            self.missed
        );
    }
}

/// The bus's writer side: the next trade id of each instrument.
pub struct Feed {
    pub bus: BusWriter,
    pub next: [u64; INSTRUMENTS as usize + 1],
}

impl Feed {
    /// `rounds` trades of every instrument, published every 64 rounds.
    pub fn write(&mut self, rounds: u64) {
        for round in 0..rounds {
            for instrument in 1..=INSTRUMENTS {
                let position = &mut self.next[instrument as usize];
                self.bus.write(&trade(instrument, *position));
                *position += 1;
            }
            if round % 64 == 63 {
                self.bus.publish();
            }
        }
        self.bus.publish();
    }

    fn all_seen(&self, seen: &Seen) -> bool {
        (1..=INSTRUMENTS).all(|i| seen.last(i) == Some(self.next[i as usize] - 1))
    }

    /// Reads until the consumer has every instrument's last trade, writing one more of each
    /// every 20 ms meanwhile: a loss shows only when something follows it, so a stream whose
    /// last messages were lost is followed until the consumer has caught up with it.
    fn catch_up(&mut self, client: &mut NatsClient, seen: &mut Seen) {
        let started = Instant::now();
        seen.read(client, Duration::from_millis(100));
        while !self.all_seen(seen) {
            assert!(
                started.elapsed() < PATIENCE,
                "the consumer stopped short: last positions {:?} of {:?}, missed {}",
                (1..=INSTRUMENTS).map(|i| seen.last(i)).collect::<Vec<_>>(),
                self.next,
                seen.missed
            );
            self.write(1);
            seen.read(client, Duration::from_millis(20));
        }
    }

    /// Writes a trade of each instrument every 20 ms until the consumer has one of each (the
    /// bridge and the subscription are both up), bounded.
    fn probe(&mut self, client: &mut NatsClient, seen: &mut Seen) {
        let started = Instant::now();
        while !(1..=INSTRUMENTS).all(|i| seen.last(i).is_some()) {
            assert!(
                started.elapsed() < PATIENCE,
                "no event came through the bridge"
            );
            self.write(1);
            seen.read(client, Duration::from_millis(20));
        }
    }
}

fn consumer(url: &str, queue_messages: usize) -> NatsClient {
    let mut options = NatsOptions::new(parse_servers(url).unwrap(), vec![TRADES.into()]);
    options.queue_messages = queue_messages;
    options.max_reconnect_delay = Duration::from_millis(200);
    NatsClient::connect(options).unwrap()
}

/// The number after `"name":` (the last one in `text`), in the bridge's counters line or a
/// server's monitoring JSON (which puts a space after the colon).
pub fn counter(text: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let at = text
        .rfind(&key)
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        + key.len();
    text[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

#[test]
fn every_event_in_order_once_and_a_consumer_that_does_not_read_slows_nothing() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let mut fast = consumer(&server.url(), 65536);
    // A consumer whose queue holds 16 messages and that reads nothing until the end.
    let mut slow = consumer(&server.url(), 16);
    let bridge = BridgeProcess::start(&path, &server.url(), "site.a", &[]);
    let mut seen = Seen::default();
    feed.probe(&mut fast, &mut seen);

    feed.write(20_000);
    feed.catch_up(&mut fast, &mut seen);
    seen.assert_exact("the reading consumer");
    assert_eq!(seen.missed, 0, "nothing may be lost with one server up");
    assert!(seen.names_checked);
    let venue = fast
        .directory()
        .find("sim", "SYM.2")
        .expect("named")
        .venue_id;
    assert_eq!(fast.appliance(venue), Some(("site.a", 0)));
    // The directory service filled in what subjects do not carry.
    let started = Instant::now();
    while fast.directory().find("sim", "SYM.2").unwrap().venue_symbol != "sym2" {
        assert!(started.elapsed() < PATIENCE, "no directory reply");
        seen.read(&mut fast, Duration::from_millis(20));
    }
    assert_eq!(fast.counters().duplicates, 0);

    // The slow consumer now reads: its first messages, a hole it reports exactly when the next
    // trades come, then those.
    let mut slow_seen = Seen::default();
    slow_seen.read(&mut slow, Duration::from_millis(200));
    feed.catch_up(&mut slow, &mut slow_seen);
    slow_seen.assert_exact("the consumer that did not read");
    assert!(
        slow_seen.missed > 0,
        "a 16-message queue cannot have held 60,000 trades"
    );

    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(counter(&stderr, "messages_dropped"), 0, "{stderr}");
    assert_eq!(counter(&stderr, "publish_errors"), 0, "{stderr}");
    drop(server);
}

#[test]
fn a_server_restart_mid_stream_costs_exactly_the_events_reported_and_none_twice() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let mut server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 20),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let mut client = consumer(&server.url(), 65536);
    let bridge = BridgeProcess::start(
        &path,
        &server.url(),
        "site-b",
        // A small queue, so that the outage also makes the bridge drop.
        &["--queue", "64"],
    );
    let mut seen = Seen::default();
    feed.probe(&mut client, &mut seen);
    feed.write(2_000);
    feed.catch_up(&mut client, &mut seen);

    // The server dies with the stream running; 300,000 trades go on without it, more messages
    // than the bridge's queue (64) and the NATS client's buffer (2,048) hold, so the bridge
    // must drop some (the bus, 1 Mi events, keeps them all for the bridge).
    server.kill();
    for _ in 0..40 {
        feed.write(2_500);
        std::thread::sleep(Duration::from_millis(10));
    }
    server.restart();
    // Until the consumer sees trades again (both clients reconnected), then a last batch.
    let resumed_from: Vec<u64> = (1..=INSTRUMENTS).map(|i| feed.next[i as usize]).collect();
    let started = Instant::now();
    while !(1..=INSTRUMENTS).all(|i| seen.last(i) >= Some(resumed_from[i as usize - 1])) {
        assert!(started.elapsed() < PATIENCE, "the stream never resumed");
        feed.write(5);
        seen.read(&mut client, Duration::from_millis(20));
    }
    feed.write(2_000);
    feed.catch_up(&mut client, &mut seen);
    seen.assert_exact("across the restart");
    assert!(
        seen.missed > 0,
        "the outage outlasted every buffer: some trades were lost"
    );
    eprintln!(
        "across the restart: {} trades reported missed, {} overruns",
        seen.missed,
        client.counters().overruns
    );
    assert_eq!(client.counters().duplicates, 0);

    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    assert!(counter(&stderr, "disconnects") >= 1, "{stderr}");
    assert!(counter(&stderr, "messages_dropped") >= 1, "{stderr}");
}

#[test]
fn a_consumer_started_after_the_bridge_stopped_replays_what_a_live_one_got() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let monitor_port = super::free_port();
    let server = NatsServer::start_with(
        &binary,
        &[
            "-js".into(),
            "-sd".into(),
            store.path().display().to_string(),
            "-m".into(),
            monitor_port.to_string(),
        ],
    );
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let mut live = consumer(&server.url(), 65536);
    let bridge = BridgeProcess::start(
        &path,
        &server.url(),
        "site-r",
        &["--jetstream-stream", "TICKS", "--jetstream-max-age", "60"],
    );
    // Trades written before the bridge made its stream would reach the live consumer only.
    let started = Instant::now();
    while counter(&super::cli::monitor(monitor_port, "/jsz"), "streams") != 1 {
        assert!(started.elapsed() < PATIENCE, "the bridge made no stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut live_seen = Seen::default();
    feed.probe(&mut live, &mut live_seen);
    feed.write(5_000);
    feed.catch_up(&mut live, &mut live_seen);
    live_seen.assert_exact("the live consumer");
    assert_eq!(
        live_seen.missed, 0,
        "nothing may be lost with one server up"
    );
    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(counter(&stderr, "messages_dropped"), 0, "{stderr}");
    drop(live);

    let mut options = NatsOptions::new(parse_servers(&server.url()).unwrap(), vec![TRADES.into()])
        .replay("TICKS", ReplayStart::All);
    // A queue far smaller than the stream: a replay waits for its reader instead of dropping.
    options.queue_messages = 16;
    let mut replay = NatsClient::connect(options).unwrap();
    let mut replay_seen = Seen::default();
    let started = Instant::now();
    while !feed.all_seen(&replay_seen) {
        assert!(
            started.elapsed() < PATIENCE,
            "the replay stopped short: last positions {:?} of {:?}",
            (1..=INSTRUMENTS)
                .map(|i| replay_seen.last(i))
                .collect::<Vec<_>>(),
            feed.next
        );
        replay_seen.read(&mut replay, Duration::from_millis(50));
    }
    // Nothing more comes: the stream holds nothing after the last trade.
    replay_seen.read(&mut replay, Duration::from_millis(200));
    replay_seen.assert_exact("the replaying consumer");
    assert_eq!(replay_seen.missed, 0, "the stream holds every message");
    assert_eq!(replay.counters().duplicates, 0);
    assert!(replay_seen.names_checked);
    for instrument in 1..=INSTRUMENTS {
        let replayed = &replay_seen.positions[&instrument];
        let lived = &live_seen.positions[&instrument];
        // The stream may hold trades published before the live subscription was up (the
        // probe's first ones); from the live consumer's first trade on, both got the same.
        assert!(
            replayed.ends_with(lived),
            "instrument {instrument}: the replay ({}..={}) is not what the live consumer got ({}..={})",
            replayed[0],
            replayed[replayed.len() - 1],
            lived[0],
            lived[lived.len() - 1]
        );
        assert!(replayed.len() - lived.len() < 1_000);
    }
}

/// Issue 33: a restarted bridge goes on from the bus position where the last one stopped, with
/// its stream and sequences: a consumer sees no new stream and loses none of the trades written
/// while no bridge ran. When the bus has lapped that position meanwhile, the loss is published
/// with its exact count (a `BusOverrun` gap), never an epoch without one.
#[test]
fn a_restarted_bridge_resumes_where_the_last_one_stopped_and_counts_what_the_bus_lost() {
    use tickwire::event::GapReason;
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let capacity = 4096;
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, capacity),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let mut client = consumer(&server.url(), 65536);
    let mut gaps = {
        let mut options = NatsOptions::new(
            parse_servers(&server.url()).unwrap(),
            vec!["tickwire.*.*.*.gap".into()],
        );
        options.max_reconnect_delay = Duration::from_millis(200);
        NatsClient::connect(options).unwrap()
    };
    let bridge = BridgeProcess::start(&path, &server.url(), "site-r", &[]);
    let mut seen = Seen::default();
    feed.probe(&mut client, &mut seen);
    feed.write(100);
    feed.catch_up(&mut client, &mut seen);
    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");

    // 98 rounds written while no bridge runs, which the bus still holds: the restarted bridge
    // publishes every one on the same stream (`Seen::read` fails on a new stream).
    feed.write(98);
    let bridge = BridgeProcess::start(&path, &server.url(), "site-r", &[]);
    feed.catch_up(&mut client, &mut seen);
    seen.assert_exact("across a bridge restart");
    assert_eq!(seen.missed, 0, "nothing lost across a bridge restart");
    assert_eq!(client.counters().duplicates, 0);
    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("\"resumed\":true"), "{stderr}");

    // Now the bus laps the stopped bridge's position: what the restarted bridge could not read
    // is published as a gap with the exact count.
    let before: Vec<u64> = feed.next.to_vec();
    feed.write(2 * capacity);
    let bridge = BridgeProcess::start(&path, &server.url(), "site-r", &[]);
    let mut reported = 0;
    let started = Instant::now();
    while !feed.all_seen(&seen) || reported == 0 {
        assert!(
            started.elapsed() < PATIENCE,
            "no gap or not every trade: reported {reported}"
        );
        feed.write(1);
        seen.read(&mut client, Duration::from_millis(20));
        while let Next::Events(events) = gaps.wait(Duration::from_millis(20)).unwrap() {
            for event in events {
                if let Body::Gap(gap) = event.body() {
                    assert_eq!(gap.reason(), GapReason::BusOverrun);
                    reported += gap.received_seq - gap.expected_seq;
                }
            }
        }
    }
    let written: u64 = (1..=INSTRUMENTS as usize)
        .map(|i| feed.next[i] - before[i])
        .sum();
    let received: u64 = (1..=INSTRUMENTS)
        .map(|i| {
            seen.positions[&i]
                .iter()
                .filter(|&&position| position >= before[i as usize])
                .count() as u64
        })
        .sum();
    assert!(reported > 0 && received > 0, "{reported} {received}");
    assert_eq!(
        received + reported,
        written,
        "every trade written while the bridge was down is received or counted lost"
    );
    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    drop(server);
}
