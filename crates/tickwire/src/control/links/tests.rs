//! The link logic on a fake clock: no threads, no sockets. Each test plays the network thread
//! (statuses), the decoder thread (the activity table and the venue's replies) and time, and
//! reads the commands the logic returns.

use super::*;
use crate::config::venue_from_text;
use crate::event::Body;

const MS: u64 = 1_000_000;
/// The fake clock's start: far from 0, like a real clock.
const T0: u64 = 1_000_000 * MS;

const BINANCE: &str = r#"name = "binance-test"
kind = "binance-usdm-futures"
url = "ws://127.0.0.1:9443"
symbols = ["BTCUSDT", "ETHUSDT"]
channels = ["bookTicker", "trade"]

[reconnect]
initial_delay_ms = 100
max_delay_ms = 100

[lifecycle]
rotate_after_ms = 60000
rotation_overlap_ms = 5000

[staleness]
default_ms = 500
"#;

const THALEX: &str = r#"name = "thalex-test"
kind = "thalex"
url = "wss://127.0.0.1:9444/ws/api/v2"
symbols = ["BTC-PERPETUAL"]
channels = ["ticker.100ms", "book.none.10.100ms"]

[reconnect]
initial_delay_ms = 100
max_delay_ms = 100

[lifecycle]
ping_interval_ms = 5000
read_timeout_ms = 7000
"#;

const DATABENTO: &str = r#"name = "databento-test"
kind = "databento"
url = "tcp://127.0.0.1:13000"
symbols = ["ESM5", "NQM5"]
channels = ["mbo", "trades"]

[databento]
dataset = "GLBX.MDP3"
recovery = "replay"

[reconnect]
initial_delay_ms = 100
max_delay_ms = 100

[credentials]
api_key_env = "DATABENTO_TEST_KEY"
"#;

/// A venue whose heartbeat is an application message (`Protocol::heartbeat`) and whose feed
/// can ask for one stream afresh (`Protocol::resubscribe_requests`).
const BYBIT: &str = r#"name = "bybit-test"
kind = "bybit-linear"
url = "wss://127.0.0.1:9443/v5/public/linear"
symbols = ["BTCUSDT"]
channels = ["orderbook.50", "publicTrade"]

[reconnect]
initial_delay_ms = 100
max_delay_ms = 100
"#;

/// The simulator's test-only Thalex key, so that a login request can be signed. Read from the
/// simulator crate beside this one at test time: the appliance crate carries no key.
fn test_key_pem() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tickwire-sim/src/thalex_test_key.pem"
    );
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

struct Fixture {
    venues: Venues,
    activity: Vec<Arc<StreamActivity>>,
    out: Vec<LinkCommand>,
    /// The network thread's last-read time of every slot.
    read_ns: u64,
}

fn config(text: &str) -> VenueConfig {
    match venue_from_text(text) {
        Ok(config) => config,
        Err(errors) => panic!("test venue: {errors}"),
    }
}

fn fixture_with(configs: &[VenueConfig], login: Option<Login>) -> Fixture {
    let mut activity = Vec::new();
    let plans = configs
        .iter()
        .enumerate()
        .map(|(index, config)| {
            let table = Arc::new(StreamActivity::new(
                config.symbols.len(),
                config.channels.len(),
            ));
            activity.push(table.clone());
            VenuePlan {
                config,
                id: index as VenueId,
                instrument_base: (index * 100) as InstrumentId,
                activity: table,
                prepared: true,
                login: login.clone(),
            }
        })
        .collect();
    let (venues, _) = Venues::plan(plans, 64, 7).expect("plan");
    Fixture {
        venues,
        activity,
        out: Vec::new(),
        read_ns: 0,
    }
}

fn fixture(text: &str) -> Fixture {
    fixture_with(&[config(text)], None)
}

impl Fixture {
    fn take(&mut self) -> Vec<LinkCommand> {
        std::mem::take(&mut self.out)
    }

    fn start(&mut self, now: u64) -> Vec<LinkCommand> {
        self.venues.start(now, &mut self.out);
        self.take()
    }

    fn tick(&mut self, now: u64) -> Vec<LinkCommand> {
        let read_ns = self.read_ns;
        self.venues.tick(now, &|_| read_ns, &mut self.out);
        self.take()
    }

    fn status(&mut self, now: u64, slot: ConnId, generation: u32, kind: NetStatusKind) {
        let status = NetStatus {
            conn: slot,
            generation,
            kind,
        };
        self.venues.on_status(now, status, &mut self.out);
    }

    fn reply(&mut self, now: u64, reply: VenueReply) -> Vec<LinkCommand> {
        self.venues.on_reply(now, reply, &mut self.out);
        self.take()
    }

    /// Plays the network thread through a stream `Open`ed in `commands` on `slot`: connected,
    /// secured when it is TLS, open. Returns the requests the connection then sent.
    fn bring_up(&mut self, now: u64, slot: ConnId, commands: &[LinkCommand]) -> Vec<String> {
        let generation = opened(commands, slot).expect("an Open for the slot");
        self.status(now, slot, generation, NetStatusKind::Connected);
        self.status(now, slot, generation, NetStatusKind::Secured);
        self.status(now, slot, generation, NetStatusKind::Open);
        sent(&self.take(), slot)
    }

    /// Answers every request in `requests` (sent on `slot` of venue `venue`) as accepted.
    fn ack_all(&mut self, now: u64, venue: VenueId, requests: &[String]) -> Vec<LinkCommand> {
        let mut out = Vec::new();
        for request in requests {
            out.extend(self.reply(now, VenueReply::new(venue, request_id(request), None, b"")));
        }
        out
    }

    /// Starts the fixture's venue 0 and brings its first shard's active connection live.
    fn live(&mut self, now: u64) -> Vec<String> {
        let started = self.start(now);
        let requests = self.bring_up(now, 0, &started);
        self.ack_all(now, 0, &requests);
        assert_eq!(self.venues.state(0, 0, Role::Active), Some(ConnState::Live));
        requests
    }

    fn stream(&self, venue: usize, symbol: usize, channel: usize) -> usize {
        symbol * self.activity[venue].channels() + channel
    }
}

/// The generation of the stream opened on `slot` among `commands`.
fn opened(commands: &[LinkCommand], slot: ConnId) -> Option<u32> {
    commands.iter().find_map(|command| {
        let LinkCommand::Open {
            slot: opened,
            generation,
            ..
        } = command
        else {
            return None;
        };
        (*opened == slot).then_some(*generation)
    })
}

/// The texts sent on `slot` among `commands`.
fn sent(commands: &[LinkCommand], slot: ConnId) -> Vec<String> {
    commands
        .iter()
        .filter_map(|command| {
            let LinkCommand::Send { slot: to, text } = command else {
                return None;
            };
            (*to == slot).then(|| text.clone())
        })
        .collect()
}

fn closed(commands: &[LinkCommand], slot: ConnId) -> bool {
    commands
        .iter()
        .any(|command| matches!(command, LinkCommand::Close { slot: to } if *to == slot))
}

/// Whether `commands` drop `slot` at once, without a close handshake.
fn aborted(commands: &[LinkCommand], slot: ConnId) -> bool {
    commands
        .iter()
        .any(|command| matches!(command, LinkCommand::Abort { slot: to } if *to == slot))
}

/// The status events among `commands`: (instrument, state, detail).
fn statuses(commands: &[LinkCommand]) -> Vec<(InstrumentId, VenueState, u64)> {
    commands
        .iter()
        .filter_map(|command| {
            let LinkCommand::Event(event) = command else {
                return None;
            };
            let Body::VenueStatus(status) = event.body() else {
                return None;
            };
            Some((event.header.instrument_id, status.state(), status.detail))
        })
        .collect()
}

/// A JSON-RPC request's id (`..,"id":N}`).
fn request_id(text: &str) -> u64 {
    let value: serde_json::Value = serde_json::from_str(text).expect("a JSON request");
    // JSON-RPC's numeric `id`, or the decimal string `req_id` of an `op` request.
    value["id"]
        .as_u64()
        .or_else(|| value["req_id"].as_str()?.parse().ok())
        .expect("a numeric id")
}

#[test]
fn roles_pair_up() {
    assert_eq!(Role::Active.other(), Role::Spare);
    assert_eq!(Role::Spare.other(), Role::Active);
    assert_eq!(Role::Active.other().other(), Role::Active);
}

#[test]
fn a_connection_goes_live_once_every_request_is_answered() {
    let mut fx = fixture(BINANCE);
    let started = fx.start(T0);
    assert_eq!(opened(&started, 0), Some(1));
    assert_eq!(opened(&started, 1), None, "the spare stays idle");
    let requests = fx.bring_up(T0, 0, &started);
    assert_eq!(requests.len(), 1);
    let answered = fx.ack_all(T0 + MS, 0, &requests);
    assert_eq!(
        statuses(&answered),
        [(ALL_INSTRUMENTS, VenueState::Live, 0)]
    );
    assert!(fx.venues.all_live());
    assert!(fx.venues.take_changed());
    assert!(!fx.venues.take_changed());
}

#[test]
fn rotation_opens_the_spare_on_time_and_switches_when_both_agree() {
    let mut fx = fixture(BINANCE);
    fx.live(T0);
    let rotate_at = T0 + 60_000 * MS;
    // Keep every stream fresh, so that staleness stays out of the way.
    let fresh = |fx: &Fixture, now: u64| {
        for stream in 0..4 {
            fx.activity[0].saw(stream, now);
        }
    };
    fresh(&fx, rotate_at - MS);
    let before = fx.tick(rotate_at - MS);
    assert_eq!(opened(&before, 1), None, "not before rotate_after_ms");
    let at = fx.tick(rotate_at);
    assert_eq!(
        opened(&at, 1),
        Some(1),
        "the spare opens at the rotation time"
    );
    let requests = fx.bring_up(rotate_at, 1, &at);
    assert_eq!(requests.len(), 1, "the spare subscribes the same streams");
    fx.ack_all(rotate_at + MS, 0, &requests);
    assert_eq!(fx.venues.state(0, 0, Role::Spare), Some(ConnState::Live));

    // Both deliver; the decoder saw the same ids on all but one stream: no switch yet.
    let now = rotate_at + 100 * MS;
    fresh(&fx, now);
    for stream in 0..3 {
        fx.activity[0].agreed(stream, now);
    }
    let waiting = fx.tick(now);
    assert!(!closed(&waiting, 0));
    assert_eq!(fx.venues.counters(0).rotations, 0);

    // The last stream agrees: switch, retire the old connection, no gap for the strategy.
    fx.activity[0].agreed(3, now + MS);
    let switched = fx.tick(now + MS);
    assert!(closed(&switched, 0), "the old connection is retired");
    assert!(!switched
        .iter()
        .any(|command| matches!(command, LinkCommand::Disconnected { .. })));
    assert!(
        statuses(&switched).is_empty(),
        "the strategy sees no status"
    );
    assert_eq!(
        fx.venues.slot(1),
        Some(SlotRef {
            venue: 0,
            shard: 0,
            role: Role::Active
        })
    );
    assert_eq!(fx.venues.slot(0).map(|at| at.role), Some(Role::Spare));
    let counters = fx.venues.counters(0);
    assert_eq!((counters.rotations, counters.forced_rotations), (1, 0));

    // The old connection closes and rests; the new one carries the shard.
    let generation = 1;
    fx.status(
        now + 2 * MS,
        0,
        generation,
        NetStatusKind::Closed {
            close_code: Some(1000),
            reason: Reason::Retired,
            error: None,
        },
    );
    assert_eq!(fx.venues.state(0, 0, Role::Spare), Some(ConnState::Idle));
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));
    assert!(fx.venues.all_live());
}

#[test]
fn rotation_is_forced_when_the_overlap_runs_out() {
    let mut fx = fixture(BINANCE);
    fx.live(T0);
    let rotate_at = T0 + 60_000 * MS;
    for stream in 0..4 {
        fx.activity[0].saw(stream, rotate_at);
    }
    let at = fx.tick(rotate_at);
    let requests = fx.bring_up(rotate_at, 1, &at);
    fx.ack_all(rotate_at, 0, &requests);
    // The streams deliver, but the two connections never agree on an id.
    let within = rotate_at + 4_999 * MS;
    for stream in 0..4 {
        fx.activity[0].saw(stream, within);
    }
    assert!(!closed(&fx.tick(within), 0), "within rotation_overlap_ms");
    let after = rotate_at + 5_000 * MS;
    for stream in 0..4 {
        fx.activity[0].saw(stream, after);
    }
    assert!(closed(&fx.tick(after), 0), "the overlap ran out");
    let counters = fx.venues.counters(0);
    assert_eq!((counters.rotations, counters.forced_rotations), (1, 1));
    assert_eq!(fx.venues.slot(1).map(|at| at.role), Some(Role::Active));
}

#[test]
fn a_stream_goes_stale_after_its_threshold_and_recovers() {
    let mut fx = fixture(BINANCE);
    fx.live(T0);
    let quiet = fx.stream(0, 0, 0);
    let busy: Vec<usize> = (0..4).filter(|&stream| stream != quiet).collect();
    fx.activity[0].saw(quiet, T0 + 400 * MS);
    for now in [T0 + 800 * MS, T0 + 900 * MS] {
        for &stream in &busy {
            fx.activity[0].saw(stream, now);
        }
        assert!(statuses(&fx.tick(now)).is_empty(), "within 500 ms");
    }
    let late = T0 + 901 * MS;
    for &stream in &busy {
        fx.activity[0].saw(stream, late);
    }
    let stale = fx.tick(late);
    assert_eq!(
        statuses(&stale),
        [(0, VenueState::Stale, 0)],
        "BTCUSDT's bookTicker (instrument 0, channel 0)"
    );
    assert_eq!(fx.venues.counters(0).stale_streams, 1);
    assert_eq!(
        fx.venues.health_problems(),
        ["venue binance-test: stream btcusdt@bookTicker stale"]
    );
    assert!(!closed(&stale, 0), "other streams still deliver");

    let back = T0 + 1_000 * MS;
    for stream in 0..4 {
        fx.activity[0].saw(stream, back);
    }
    let recovered = fx.tick(back);
    assert_eq!(statuses(&recovered), [(0, VenueState::Recovered, 0)]);
    assert_eq!(fx.venues.counters(0).recovered_streams, 1);
    assert!(fx.venues.health_problems().is_empty());
}

#[test]
fn a_connection_whose_every_stream_is_stale_is_dropped_and_reopened() {
    let mut fx = fixture(BINANCE);
    fx.live(T0);
    let silent = fx.tick(T0 + 501 * MS);
    assert_eq!(
        statuses(&silent).len(),
        5,
        "four streams stale, then the shard down"
    );
    // Judged dead: dropped at once, with no close handshake to wait for (issue 24).
    assert!(aborted(&silent, 0), "the stale connection is dropped");
    assert!(!closed(&silent, 0), "no close handshake with a dead peer");
    assert!(silent.iter().any(|command| matches!(
        command,
        LinkCommand::Disconnected { venue: 0, slot: 0, instruments } if *instruments == (0..2)
    )));
    assert_eq!(
        fx.venues.state(0, 0, Role::Active),
        Some(ConnState::BackingOff)
    );
    // The network thread's report of the aborted stream changes nothing.
    fx.status(
        T0 + 502 * MS,
        0,
        1,
        NetStatusKind::Closed {
            close_code: None,
            reason: Reason::AllStreamsStale,
            error: None,
        },
    );
    assert!(!fx.take().iter().any(|command| matches!(
        command,
        LinkCommand::Disconnected { .. } | LinkCommand::Open { .. }
    )));
    assert_eq!(
        fx.venues.state(0, 0, Role::Active),
        Some(ConnState::BackingOff)
    );
    let reopened = fx.tick(T0 + 700 * MS);
    assert_eq!(
        opened(&reopened, 0),
        Some(2),
        "a new stream, a new generation"
    );
    // A status about the old stream is ignored.
    fx.status(T0 + 701 * MS, 0, 1, NetStatusKind::Open);
    assert_eq!(
        fx.venues.state(0, 0, Role::Active),
        Some(ConnState::Connecting)
    );
    // The new connection goes live; its streams, still marked stale from the old one, have
    // had no time to deliver: it is not recycled for their silence before its threshold.
    let requests = fx.bring_up(T0 + 702 * MS, 0, &reopened);
    fx.ack_all(T0 + 702 * MS, 0, &requests);
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));
    let just_live = fx.tick(T0 + 703 * MS);
    assert!(!aborted(&just_live, 0), "{just_live:?}");
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));
    // Silent past the threshold on the new connection as well: recycled again.
    let silent_again = fx.tick(T0 + 1_203 * MS);
    assert!(aborted(&silent_again, 0), "{silent_again:?}");
}

#[test]
fn after_a_reconnect_every_request_is_sent_again_login_first() {
    let login = Login {
        key_id: "tickwire-sim-test-key".to_owned(),
        private_key_pem: test_key_pem(),
    };
    let mut fx = fixture_with(&[config(THALEX)], Some(login));
    let started = fx.start(T0);
    let first = fx.bring_up(T0, 0, &started);
    assert_eq!(first.len(), 2, "the login, then the subscription");
    assert!(first[0].contains("public/login"), "{}", first[0]);
    assert!(first[1].contains("public/subscribe"), "{}", first[1]);
    assert!(first[1].contains("\"system\""), "{}", first[1]);
    fx.ack_all(T0, 0, &first);
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));

    fx.status(
        T0 + MS,
        0,
        1,
        NetStatusKind::Closed {
            close_code: Some(1001),
            reason: Reason::ClosedByVenue,
            error: None,
        },
    );
    let down = fx.take();
    assert_eq!(
        statuses(&down),
        [(ALL_INSTRUMENTS, VenueState::Disconnected, 0)]
    );
    assert_eq!(fx.venues.streams_ended, 1);
    let reopened = fx.tick(T0 + 200 * MS);
    let again = fx.bring_up(T0 + 200 * MS, 0, &reopened);
    assert_eq!(again.len(), 2);
    assert!(again[0].contains("public/login"), "login first again");
    let params = |text: &str| {
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        value["params"].clone()
    };
    assert_eq!(params(&again[1]), params(&first[1]), "every channel again");
    assert_ne!(request_id(&again[1]), request_id(&first[1]));
}

#[test]
fn a_databento_session_is_requested_again_and_started_by_the_gateway() {
    let mut fx = fixture(DATABENTO);
    let started = fx.start(T0);
    let generation = opened(&started, 0).expect("open");
    // A raw TCP session: connected, then open once the preamble is done.
    fx.status(T0, 0, generation, NetStatusKind::Connected);
    fx.status(T0, 0, generation, NetStatusKind::Open);
    let first = sent(&fx.take(), 0);
    assert_eq!(first.len(), 1);
    assert!(first[0].contains("schema=mbo"), "{}", first[0]);
    assert!(first[0].contains("start_session"), "{}", first[0]);
    // Slot 0: the id's upper half is 0.
    let session = crate::venue::databento::feed::SESSION_STARTED;
    fx.reply(T0, VenueReply::new(0, session, None, b""));
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));

    // With replay recovery, the next session replays from what the feed last saw.
    fx.activity[0].mark_replay(0, 1_700_000_000_000_000_000);
    fx.status(
        T0 + MS,
        0,
        generation,
        NetStatusKind::Closed {
            close_code: None,
            reason: Reason::ConnectionLost,
            error: Some("reset".to_owned()),
        },
    );
    let reopened = fx.tick(T0 + 200 * MS);
    let generation = opened(&reopened, 0).expect("reopen");
    fx.status(T0 + 200 * MS, 0, generation, NetStatusKind::Connected);
    fx.status(T0 + 200 * MS, 0, generation, NetStatusKind::Open);
    let again = sent(&fx.take(), 0);
    assert_eq!(again.len(), 1);
    assert!(
        again[0].contains("start=1700000000000000000"),
        "{}",
        again[0]
    );
}

#[test]
fn a_throttled_request_recycles_the_connection() {
    let mut fx = fixture(THALEX);
    let started = fx.start(T0);
    let requests = fx.bring_up(T0, 0, &started);
    let throttled = VenueReply::new(
        0,
        request_id(&requests[0]),
        Some(crate::venue::thalex::subscribe::THROTTLED),
        b"throttle exceeded",
    );
    let out = fx.reply(T0, throttled);
    assert!(closed(&out, 0));
    assert_eq!(fx.venues.counters(0).throttled_requests, 1);
    assert_eq!(fx.venues.counters(0).refused_requests, 0);
}

#[test]
fn a_refused_request_is_counted_and_the_connection_carries_on() {
    let mut fx = fixture(BINANCE);
    let started = fx.start(T0);
    let requests = fx.bring_up(T0, 0, &started);
    let refused = VenueReply::new(0, request_id(&requests[0]), Some(-1121), b"Invalid symbol.");
    let out = fx.reply(T0, refused);
    assert!(!closed(&out, 0));
    assert_eq!(fx.venues.counters(0).refused_requests, 1);
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));
}

#[test]
fn channels_left_out_of_an_answer_are_counted() {
    let mut fx = fixture(THALEX);
    let started = fx.start(T0);
    let requests = fx.bring_up(T0, 0, &started);
    // The feed marks what the answer accepted: the ticker, not the book.
    fx.activity[0].accept(0, 0);
    fx.ack_all(T0, 0, &requests);
    assert_eq!(fx.venues.counters(0).rejected_channels, 1);
}

#[test]
fn a_reconnect_notice_opens_the_replacement_before_the_venue_closes() {
    let mut fx = fixture(THALEX);
    fx.live(T0);
    assert_eq!(opened(&fx.tick(T0 + MS), 1), None);
    fx.reply(T0 + 2 * MS, VenueReply::reconnect_notice(0, 0));
    assert_eq!(fx.venues.counters(0).reconnect_notices, 1);
    let at = fx.tick(T0 + 3 * MS);
    assert_eq!(opened(&at, 1), Some(1), "the spare opens at once");
    // A notice about the spare itself asks for nothing.
    fx.reply(T0 + 4 * MS, VenueReply::reconnect_notice(0, 1));
    assert_eq!(fx.venues.counters(0).reconnect_notices, 2);
}

#[test]
fn gateway_notices_are_counted_and_a_broken_stream_is_recycled() {
    let mut fx = fixture(DATABENTO);
    let started = fx.start(T0);
    let generation = opened(&started, 0).expect("open");
    fx.status(T0, 0, generation, NetStatusKind::Connected);
    fx.status(T0, 0, generation, NetStatusKind::Open);
    fx.take();
    let session = crate::venue::databento::feed::SESSION_STARTED;
    fx.reply(T0, VenueReply::new(0, session, None, b""));
    let slow = dbn::SystemCode::SlowReaderWarning as u8;
    fx.reply(T0, VenueReply::notice(0, 0, slow, None, b"slow"));
    let replayed = dbn::SystemCode::ReplayCompleted as u8;
    fx.reply(T0, VenueReply::notice(0, 0, replayed, None, b"done"));
    let counters = fx.venues.counters(0);
    assert_eq!(
        (counters.slow_reader_warnings, counters.venue_notices),
        (1, 1)
    );
    let broken = VenueReply::notice(
        0,
        0,
        0,
        Some(crate::venue::databento::feed::STREAM_BROKEN),
        b"bad record",
    );
    let out = fx.reply(T0 + MS, broken);
    assert_eq!(fx.venues.counters(0).venue_errors, 1);
    assert!(closed(&out, 0), "the broken stream is recycled");
}

#[test]
fn heartbeats_ping_and_a_silent_connection_is_recycled() {
    let mut fx = fixture(THALEX);
    fx.live(T0);
    fx.read_ns = T0;
    let first = fx.tick(T0 + MS);
    assert!(first
        .iter()
        .any(|command| matches!(command, LinkCommand::Ping { slot: 0 })));
    let soon = fx.tick(T0 + 2 * MS);
    assert!(!soon
        .iter()
        .any(|command| matches!(command, LinkCommand::Ping { .. })));
    fx.read_ns = T0 + 5_000 * MS;
    assert!(!closed(&fx.tick(T0 + 7_000 * MS), 0));
    let silent = fx.tick(T0 + 12_001 * MS);
    assert!(
        aborted(&silent, 0),
        "nothing read for read_timeout_ms: dropped at once"
    );
    assert_eq!(
        fx.venues.counters(0).transitions.get(Reason::ReadTimeout),
        2
    );
}

#[test]
fn a_message_heartbeat_is_sent_as_text_and_a_resubscription_stays_on_its_connection() {
    let mut fx = fixture(BYBIT);
    fx.live(T0);
    fx.read_ns = T0;
    let first = fx.tick(T0 + MS);
    assert!(
        !first
            .iter()
            .any(|command| matches!(command, LinkCommand::Ping { .. })),
        "no ping frame: the venue's heartbeat is its own message"
    );
    assert_eq!(sent(&first, 0), [r#"{"op":"ping"}"#]);
    assert!(
        sent(&fx.tick(T0 + 2 * MS), 0).is_empty(),
        "one a ping interval"
    );
    // The feed asks for the book (stream 0) afresh: unsubscribe and subscribe on the same
    // connection, which stays live.
    let out = fx.reply(T0 + 3 * MS, VenueReply::resubscribe(0, 0, 0));
    assert_eq!(
        sent(&out, 0),
        [
            r#"{"req_id":"resubscribe","op":"unsubscribe","args":["orderbook.50.BTCUSDT"]}"#,
            r#"{"req_id":"resubscribe","op":"subscribe","args":["orderbook.50.BTCUSDT"]}"#
        ]
    );
    assert!(!closed(&out, 0) && !aborted(&out, 0));
    assert_eq!(fx.venues.state(0, 0, Role::Active), Some(ConnState::Live));
    // A venue without resubscription requests (Thalex) recycles the connection instead.
    let mut fx = fixture(THALEX);
    fx.live(T0);
    let out = fx.reply(T0 + MS, VenueReply::resubscribe(0, 0, 0));
    assert!(closed(&out, 0) || aborted(&out, 0), "{out:?}");
}

#[test]
fn streams_split_over_shards_with_a_symbols_channels_together() {
    let text = BINANCE.replace(
        "symbols = [\"BTCUSDT\", \"ETHUSDT\"]",
        "symbols = [\"BTCUSDT\", \"ETHUSDT\", \"SOLUSDT\"]\nmax_streams_per_connection = 4",
    );
    let mut fx = fixture(&text);
    let started = fx.start(T0);
    assert_eq!(opened(&started, 0), Some(1), "shard 0's active connection");
    assert_eq!(opened(&started, 2), Some(1), "shard 1's active connection");
    assert_eq!(fx.venues.slot(2).map(|at| at.shard), Some(1));
    let names = |text: &str| -> Vec<String> {
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        value["params"]
            .as_array()
            .expect("params")
            .iter()
            .filter_map(|name| name.as_str().map(str::to_owned))
            .collect()
    };
    let shard0 = fx.bring_up(T0, 0, &started);
    let shard1 = fx.bring_up(T0, 2, &started);
    assert_eq!(
        names(&shard0[0]),
        [
            "btcusdt@bookTicker",
            "btcusdt@trade",
            "ethusdt@bookTicker",
            "ethusdt@trade"
        ]
    );
    assert_eq!(names(&shard1[0]), ["solusdt@bookTicker", "solusdt@trade"]);
    fx.ack_all(T0, 0, &shard0);
    assert!(!fx.venues.all_live(), "shard 1 is not live yet");
    let live = fx.ack_all(T0, 0, &shard1);
    assert_eq!(
        statuses(&live),
        [(ALL_INSTRUMENTS, VenueState::Live, 1)],
        "detail = shard"
    );
    assert!(fx.venues.all_live());
    // Shard 1's gap names only its instrument.
    fx.status(
        T0 + MS,
        2,
        1,
        NetStatusKind::Closed {
            close_code: None,
            reason: Reason::ConnectionLost,
            error: None,
        },
    );
    assert!(fx.take().iter().any(|command| matches!(
        command,
        LinkCommand::Disconnected { slot: 2, instruments, .. } if *instruments == (2..3)
    )));
}

/// Binance USD-M since 2026: bookTicker on `/public`, aggTrade on `/market`, each entry point its
/// own shard with its own path; each shard's staleness watches its own streams, and a `/market`
/// connection that goes stale is recycled alone.
#[test]
fn channels_on_two_entry_points_get_shards_and_paths_of_their_own() {
    let text = BINANCE.replace(
        "channels = [\"bookTicker\", \"trade\"]",
        "channels = [\"aggTrade\", \"bookTicker\"]",
    );
    let mut fx = fixture(&text);
    let paths = fx.venues.slot_paths();
    assert_eq!(
        paths,
        [
            Some("/public/stream".to_owned()),
            Some("/public/stream".to_owned()),
            Some("/market/stream".to_owned()),
            Some("/market/stream".to_owned()),
        ]
    );
    let started = fx.start(T0);
    let public = fx.bring_up(T0, 0, &started);
    let market = fx.bring_up(T0, 2, &started);
    let names = |text: &str| -> Vec<String> {
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        value["params"]
            .as_array()
            .expect("params")
            .iter()
            .filter_map(|name| name.as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        names(&public[0]),
        ["btcusdt@bookTicker", "ethusdt@bookTicker"]
    );
    assert_eq!(names(&market[0]), ["btcusdt@aggTrade", "ethusdt@aggTrade"]);
    fx.ack_all(T0, 0, &public);
    fx.ack_all(T0, 0, &market);
    assert!(fx.venues.all_live());
    // The venue's streams are symbol-major over its channels: aggTrade is channel 0.
    let shards = &fx.venues.venues[0].shards;
    assert_eq!(shards[0].streams, [1, 3], "bookTicker of both symbols");
    assert_eq!(shards[1].streams, [0, 2], "aggTrade of both symbols");
    // The quotes flow, the trades stop: only the /market connection goes stale and is recycled.
    let mut now = T0;
    let mut commands = Vec::new();
    for _ in 0..10 {
        now += 100 * MS;
        fx.activity[0].saw(1, now);
        fx.activity[0].saw(3, now);
        commands.extend(fx.tick(now));
    }
    let stale: Vec<InstrumentId> = statuses(&commands)
        .into_iter()
        .filter(|(_, state, _)| *state == VenueState::Stale)
        .map(|(instrument, _, _)| instrument)
        .collect();
    assert_eq!(stale, [0, 1], "both symbols' aggTrade");
    assert!(
        commands.iter().any(|command| matches!(
            command,
            LinkCommand::Close { slot: 2 } | LinkCommand::Abort { slot: 2 }
        )),
        "the /market connection is recycled: {commands:?}"
    );
    assert!(
        !commands.iter().any(|command| matches!(
            command,
            LinkCommand::Close { slot: 0 } | LinkCommand::Abort { slot: 0 }
        )),
        "the /public connection stays"
    );
}

#[test]
fn venues_of_every_kind_plan_side_by_side() {
    let fx = fixture_with(&[config(BINANCE), config(THALEX), config(DATABENTO)], None);
    // Two slots per shard, one shard each, in the file's order.
    let venues: Vec<Option<usize>> = (0..6)
        .map(|slot| fx.venues.slot(slot).map(|at| at.venue))
        .collect();
    assert_eq!(
        venues,
        [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2)]
    );
    assert_eq!(fx.venues.slot(6), None);
    assert_eq!(fx.venues.name(2), "databento-test");
}

/// The resolver's answer about `slot`'s attempt `generation`.
fn resolved(slot: ConnId, generation: u32, result: Result<&str, &str>) -> Resolved {
    Resolved {
        venue: 0,
        slot,
        generation,
        result: result
            .map(|addr| addr.parse().expect("a socket address"))
            .map_err(str::to_owned),
    }
}

#[test]
fn a_host_that_does_not_resolve_backs_off_with_dns_failed_and_is_asked_again() {
    let mut fixture = fixture(BINANCE);
    let started = fixture.start(T0);
    let generation = opened(&started, 0).expect("the first attempt");
    fixture.venues.on_resolved(
        T0 + MS,
        resolved(0, generation, Err("no such host")),
        &mut fixture.out,
    );
    let failed = fixture.take();
    assert_eq!(
        fixture.venues.state(0, 0, Role::Active),
        Some(ConnState::BackingOff)
    );
    assert!(
        !failed
            .iter()
            .any(|command| matches!(command, LinkCommand::Connect { .. })),
        "{failed:?}"
    );
    // The strategy hears why the venue stays away.
    let events: Vec<u32> = failed
        .iter()
        .filter_map(|command| match command {
            LinkCommand::Event(event) => match event.body() {
                Body::VenueStatus(status) => Some(status.reason_code),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(events, [Reason::DnsFailed as u32]);
    assert_eq!(
        statuses(&failed),
        [(ALL_INSTRUMENTS, VenueState::Disconnected, 0)]
    );
    assert_eq!(
        fixture
            .venues
            .counters(0)
            .transitions
            .get(Reason::DnsFailed),
        1
    );
    let health = fixture.venues.health_problems();
    assert!(
        health
            .iter()
            .any(|problem| problem.contains("backing-off after dns-failed")),
        "{health:?}"
    );
    // The backoff (at most 100 ms) elapses: a new attempt, which resolves again.
    let retry = fixture.venues.next_deadline_ns().expect("a backoff timer");
    assert!(retry <= T0 + 101 * MS, "{retry}");
    let again = fixture.tick(retry);
    let next = opened(&again, 0).expect("a second attempt");
    assert_ne!(next, generation);
    // A late answer about the first attempt is not taken for the second's.
    fixture.venues.on_resolved(
        retry,
        resolved(0, generation, Ok("127.0.0.1:9443")),
        &mut fixture.out,
    );
    assert!(fixture.take().is_empty());
    fixture.venues.on_resolved(
        retry,
        resolved(0, next, Ok("127.0.0.2:9443")),
        &mut fixture.out,
    );
    let connect = fixture.take();
    assert!(
        matches!(
            connect.as_slice(),
            [LinkCommand::Connect { venue: 0, slot: 0, generation, addr }]
                if *generation == next && *addr == "127.0.0.2:9443".parse().unwrap()
        ),
        "{connect:?}"
    );
    let requests = fixture.bring_up(retry, 0, &again);
    fixture.ack_all(retry, 0, &requests);
    assert_eq!(
        fixture.venues.state(0, 0, Role::Active),
        Some(ConnState::Live)
    );
    assert_eq!(fixture.venues.counters(0).attempts, 2);
}

#[test]
fn an_answer_after_the_shutdown_opens_nothing() {
    let mut fixture = fixture(BINANCE);
    let started = fixture.start(T0);
    let generation = opened(&started, 0).expect("the first attempt");
    fixture.venues.close_all(T0 + MS, &mut fixture.out);
    fixture.take();
    assert!(fixture.venues.all_closed());
    fixture.venues.on_resolved(
        T0 + 2 * MS,
        resolved(0, generation, Ok("127.0.0.1:9443")),
        &mut fixture.out,
    );
    assert!(fixture.take().is_empty());
}
