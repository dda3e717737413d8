//! The appliance against the Thalex simulator over loopback (TLS, WebSocket, JSON-RPC): login,
//! subscriptions with an invalid channel, books from snapshot through changes, the venue's
//! `reconnect` notice, a stall and a hung server. Every test checks what reached the strategy.

use crate::support::appliance;

use appliance::{quote_list, write_appliance, Setup};
use std::collections::BTreeMap;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{flags, Body, Event, EventKind, GapReason, ReferenceKind, Side, VenueState};
use tickwire::fixed::Fixed;
use tickwire::lifecycle::Reason;
use tickwire_sim::thalex::{self, ThalexHandle, ThalexOptions, TEST_KEY_ID, TEST_PRIVATE_KEY_PEM};

type Pair = appliance::Pair<ThalexHandle>;

fn start(
    options: impl FnOnce(&mut ThalexOptions),
    symbols: &[&str],
    channels: &[&str],
    venue_extra: &str,
) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let mut sim_options = ThalexOptions::new(dir.path().join("sim"));
    sim_options.rate = 200.0;
    options(&mut sim_options);
    let sim = thalex::start(sim_options).expect("the simulator starts");
    std::fs::write(
        dir.path().join("thalex.toml"),
        format!(
            "name = \"thalex-sim\"\nkind = \"thalex\"\n\
             url = \"wss://127.0.0.1:{}/ws/api/v2\"\n\
             symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n\
             [reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 200\nmax_attempts_per_minute = 100\n\
             {venue_extra}\n",
            sim.addr().port(),
            quote_list(symbols),
            quote_list(channels),
            sim.ca_pem_path().display().to_string(),
        ),
    )
    .unwrap();
    let appliance = write_appliance(dir.path(), "thalex.toml", &Setup::default());
    appliance::start_session(sim, dir, &appliance, Clock::calibrate())
}

fn fixed(text: &str) -> Fixed {
    Fixed::parse_str(text).unwrap()
}

/// Replays an instrument's book events the way a strategy would and checks every derived top
/// of book against the replayed book. Returns (snapshots, changes, derived quotes checked).
fn check_books(events: &[Event], instrument: u32) -> (usize, usize, usize) {
    let mut bids: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let mut asks: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let mut valid = false;
    let (mut snapshots, mut changes, mut checked) = (0, 0, 0);
    for event in events
        .iter()
        .filter(|e| e.header.instrument_id == instrument)
    {
        match event.body() {
            Body::SnapshotBegin(_) => {
                bids.clear();
                asks.clear();
                valid = false;
            }
            Body::SnapshotEnd(snapshot) => {
                assert_eq!(snapshot.bid_levels as usize, bids.len());
                assert_eq!(snapshot.ask_levels as usize, asks.len());
                snapshots += 1;
                valid = true;
            }
            Body::BookLevel(level) => {
                if event.header.flags & flags::SNAPSHOT == 0 {
                    assert!(valid, "a change outside a valid book: {event:?}");
                    changes += 1;
                }
                let side = match level.side() {
                    Side::Bid => &mut bids,
                    Side::Ask => &mut asks,
                    Side::None => panic!("a level without a side"),
                };
                if level.size == Fixed::ZERO {
                    side.remove(&level.price);
                } else {
                    side.insert(level.price, level.size);
                }
            }
            Body::Gap(_) => valid = false,
            Body::Quote(quote) if event.header.flags & flags::DERIVED != 0 => {
                assert!(valid);
                let best_bid = bids.iter().next_back().map(|(p, s)| (*p, *s));
                let best_ask = asks.iter().next().map(|(p, s)| (*p, *s));
                assert_eq!(
                    (
                        Some((quote.bid_px, quote.bid_sz)),
                        Some((quote.ask_px, quote.ask_sz))
                    ),
                    (best_bid, best_ask),
                    "the derived quote is the replayed book's top"
                );
                assert!(quote.bid_px < quote.ask_px, "a crossed book: {quote:?}");
                checked += 1;
            }
            _ => {}
        }
    }
    (snapshots, changes, checked)
}

const KEY_VARIABLE: &str = "TICKWIRE_TEST_THALEX_KEY";

#[test]
fn login_subscribe_with_an_invalid_channel_and_books_from_snapshot_through_changes() {
    std::env::set_var(KEY_VARIABLE, TEST_PRIVATE_KEY_PEM);
    let mut pair = start(
        |_| {},
        &["BTC-PERPETUAL", "ETH-PERPETUAL", "NOPE-PERPETUAL"],
        &[
            "ticker.100ms",
            "book.none.10.100ms",
            "recent_trades.single",
            "price_index",
        ],
        &format!("[credentials]\napi_key_env = {KEY_VARIABLE:?}\nkey_id = {TEST_KEY_ID:?}\n"),
    );
    pair.run_until(
        Duration::from_secs(10),
        "books, quotes, trades and indices",
        |pair| {
            let events = pair.recorded.snapshot();
            let has = |instrument: u32, kind: EventKind| {
                events
                    .iter()
                    .any(|e| e.header.instrument_id == instrument && e.kind() == kind)
            };
            (0..2).all(|i| {
                has(i, EventKind::SnapshotEnd)
                    && has(i, EventKind::BookLevel)
                    && has(i, EventKind::Trade)
                    && has(i, EventKind::Reference)
            }) && check_books(&events, 0).1 >= 20
        },
    );
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    let events = pair.finish();

    assert_eq!(stats.logins_ok, 1, "one login, accepted");
    assert_eq!(counters.refused_logins, 0);
    // NOPE-PERPETUAL's four channels are dropped by the venue and reported.
    assert_eq!(counters.rejected_channels, 4);
    assert_eq!(stats.channels_rejected, 4);
    assert!(events.iter().all(|e| e.header.instrument_id != 2));
    for instrument in 0..2 {
        let (snapshots, changes, checked) = check_books(&events, instrument);
        assert_eq!(snapshots, 1, "one snapshot per book, then changes");
        assert!(
            changes > 0 && checked > 0,
            "{changes} changes, {checked} quotes"
        );
        let of = |what: &dyn Fn(&Event) -> bool| {
            events
                .iter()
                .filter(|e| e.header.instrument_id == instrument && what(e))
                .count()
        };
        let venue_quotes =
            of(&|e| matches!(e.body(), Body::Quote(_)) && e.header.flags & flags::DERIVED == 0);
        let marks =
            of(&|e| matches!(e.body(), Body::Reference(r) if r.kind() == ReferenceKind::Mark));
        let indices =
            of(&|e| matches!(e.body(), Body::Reference(r) if r.kind() == ReferenceKind::Index));
        assert!(venue_quotes > 0 && marks > 0 && indices > 0);
        let trades = of(&|e| matches!(e.body(), Body::Trade(t) if t.price > Fixed::ZERO));
        assert!(trades > 0);
        // BTC around 50000, ETH around 3000 (the simulator's markets).
        let around = if instrument == 0 {
            fixed("50000")
        } else {
            fixed("3000")
        };
        for event in events
            .iter()
            .filter(|e| e.header.instrument_id == instrument)
        {
            if let Body::Quote(quote) = event.body() {
                assert!(
                    quote.bid_px > Fixed(around.raw() / 2)
                        && quote.ask_px < Fixed(around.raw() * 2)
                );
                assert!(
                    event.header.exchange_ts_ns > 0
                        || event.header.flags & flags::NO_EXCHANGE_TS != 0
                );
            }
        }
    }
    assert_eq!(
        events.iter().filter(|e| e.kind() == EventKind::Gap).count(),
        0,
        "no gap on a healthy connection"
    );
}

#[test]
fn a_refused_login_is_counted_and_public_data_still_flows() {
    std::env::set_var("TICKWIRE_TEST_THALEX_OTHER_KEY", TEST_PRIVATE_KEY_PEM);
    let mut pair = start(
        |_| {},
        &["BTC-PERPETUAL"],
        &["ticker.100ms"],
        "[credentials]\napi_key_env = \"TICKWIRE_TEST_THALEX_OTHER_KEY\"\nkey_id = \"not-this-key\"\n",
    );
    pair.run_until(
        Duration::from_secs(10),
        "the refusal and then quotes",
        |pair| {
            pair.session.venues.counters(0).refused_logins == 1
                && pair.count(|e| e.kind() == EventKind::Quote) >= 5
        },
    );
    let stats = pair.sim.stats();
    let states = pair.session.venues.states(0);
    pair.finish();
    assert_eq!((stats.logins_ok, stats.logins_failed), (0, 1));
    assert_eq!(states, [tickwire::lifecycle::ConnState::Live]);
}

#[test]
fn the_reconnect_notice_moves_every_stream_to_a_new_connection_without_a_gap() {
    let mut pair = start(
        |options| {
            options.faults.reconnect_event_after = Some((60, Duration::from_millis(1_500)));
            options.faults.fault_connections = 1;
        },
        &["BTC-PERPETUAL", "ETH-PERPETUAL"],
        &["ticker.100ms", "book.none.10.100ms"],
        "[lifecycle]\nrotation_overlap_ms = 3000\n",
    );
    pair.run_until(
        Duration::from_secs(10),
        "the switch to the new connection",
        |pair| pair.session.venues.counters(0).rotations == 1,
    );
    let before = pair.recorded.snapshot().len();
    pair.run_for(Duration::from_millis(2_000));
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    // Before the shutdown, which reports the connection down.
    let events = pair.recorded.snapshot();
    pair.finish();
    assert_eq!(stats.reconnect_events_sent, 1);
    assert_eq!(counters.reconnect_notices, 1);
    assert_eq!(counters.rotations, 1);
    assert_eq!(
        counters.forced_rotations, 0,
        "every active stream moved over"
    );
    assert_eq!(
        stats.websocket_connections, 2,
        "one replacement, no reconnect"
    );
    assert!(
        events.len() > before + 20,
        "data keeps flowing after the switch"
    );
    assert_eq!(
        events.iter().filter(|e| e.kind() == EventKind::Gap).count(),
        0
    );
    assert!(!events.iter().any(|e| matches!(
        e.body(),
        Body::VenueStatus(status) if status.state() == VenueState::Disconnected
    )));
    for instrument in 0..2 {
        // The book moved over whole: the new connection's snapshot replaced it.
        let (snapshots, changes, checked) = check_books(&events, instrument);
        assert_eq!(snapshots, 2);
        assert!(changes > 0 && checked > 0);
    }
}

#[test]
fn a_stall_makes_the_streams_stale_and_the_reconnect_rebuilds_the_books_after_a_gap() {
    let mut pair = start(
        |options| {
            options.faults.stall_after = Some((60, Duration::from_secs(5)));
        },
        &["BTC-PERPETUAL"],
        &["ticker.100ms", "book.none.10.100ms"],
        "[staleness]\ndefault_ms = 500\n",
    );
    pair.run_until(
        Duration::from_secs(10),
        "a second snapshot after the stall",
        |pair| {
            pair.count(|e| e.kind() == EventKind::SnapshotEnd) == 2
                && pair.count(|e| e.kind() == EventKind::Quote) > 0
        },
    );
    pair.run_for(Duration::from_millis(300));
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    let events = pair.finish();
    assert_eq!(stats.stalls_injected, 1);
    // Live to stale, then stale to backing off at once: a dead connection is dropped.
    assert_eq!(counters.transitions.get(Reason::AllStreamsStale), 2);
    let gaps: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind() == EventKind::Gap)
        .collect();
    assert_eq!(gaps.len(), 1);
    assert!(matches!(gaps[0].body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect));
    let (snapshots, changes, checked) = check_books(&events, 0);
    assert_eq!(snapshots, 2, "a new snapshot after the reconnect");
    assert!(changes > 0 && checked > 0);
}

#[test]
fn a_hung_server_is_recycled_by_the_read_timeout() {
    let mut pair = start(
        |options| {
            options.faults.stall_after = Some((40, Duration::from_secs(10)));
            options.faults.stall_silent = true;
        },
        &["BTC-PERPETUAL"],
        &["ticker.100ms", "book.none.10.100ms"],
        "[lifecycle]\nping_interval_ms = 150\nread_timeout_ms = 600\n",
    );
    pair.run_until(
        Duration::from_secs(10),
        "a second snapshot after the hang",
        |pair| pair.count(|e| e.kind() == EventKind::SnapshotEnd) == 2,
    );
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    let events = pair.finish();
    assert!(stats.pings_received >= 2, "heartbeat pings went out");
    // Live to stale, then stale to backing off at once: a dead connection is dropped.
    assert_eq!(counters.transitions.get(Reason::ReadTimeout), 2);
    assert_eq!(stats.websocket_connections, 2);
    assert_eq!(
        events.iter().filter(|e| e.kind() == EventKind::Gap).count(),
        1
    );
    assert_eq!(check_books(&events, 0).0, 2);
}

#[test]
fn a_throttled_request_is_sent_again_on_a_fresh_connection() {
    std::env::set_var("TICKWIRE_TEST_THALEX_THROTTLE_KEY", TEST_PRIVATE_KEY_PEM);
    // One request a second: the login passes, the subscription that follows it is throttled,
    // every time.
    let mut pair = start(
        |options| options.request_limit_per_sec = 1,
        &["BTC-PERPETUAL"],
        &["ticker.100ms"],
        &format!(
            "[credentials]\napi_key_env = \"TICKWIRE_TEST_THALEX_THROTTLE_KEY\"\nkey_id = {TEST_KEY_ID:?}\n"
        ),
    );
    pair.run_until(
        Duration::from_secs(10),
        "three throttled subscriptions",
        |pair| pair.session.venues.counters(0).throttled_requests >= 3,
    );
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    let events = pair.finish();
    assert!(stats.throttled_requests >= counters.throttled_requests);
    assert!(stats.logins_ok >= 3, "each fresh connection logs in again");
    assert!(counters.transitions.get(Reason::Throttled) >= 3);
    assert_eq!(
        counters.transitions.get(Reason::Subscribed),
        0,
        "never live"
    );
    assert!(!events.iter().any(|e| e.kind() == EventKind::Quote));
}
