//! The appliance against the mock Databento gateway over loopback (plain TCP, the gateway's CRAM
//! authentication, subscription lines, DBN): a full session with an error, a slow-reader warning
//! and a reconnect with intraday replay; a reconnect with an MBO snapshot; an error then close
//! with natural refresh; heartbeats on an idle session; a stall caught by the read timeout; a
//! refused key. Every test checks what reached the strategy.

use crate::support::appliance;
use crate::support::common;

use appliance::{quote_list, write_appliance, Setup};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{Body, Event, EventKind, GapReason, Side};
use tickwire::fixed::Fixed;
use tickwire::lifecycle::Reason;
use tickwire::venue::databento::feed::{ERROR_REASON, SYSTEM_REASON};
use tickwire_sim::databento::{
    self, DatabentoHandle, DatabentoOptions, DatabentoSource, InjectedError, TEST_API_KEY,
};

const KEY_VARIABLE: &str = "TICKWIRE_TEST_DATABENTO_KEY";

type Pair = appliance::Pair<DatabentoHandle>;

fn start(
    options: impl FnOnce(&mut DatabentoOptions),
    symbols: &[&str],
    channels: &[&str],
    databento_extra: &str,
    venue_extra: &str,
) -> Pair {
    // Every test sets the same value: harmless when they run in parallel.
    std::env::set_var(KEY_VARIABLE, TEST_API_KEY);
    let dir = tempfile::tempdir().unwrap();
    let mut sim_options = DatabentoOptions {
        rate: 2_000.0,
        ..DatabentoOptions::default()
    };
    options(&mut sim_options);
    let sim = databento::start(sim_options).expect("the gateway simulator starts");
    std::fs::write(
        dir.path().join("databento.toml"),
        format!(
            "name = \"databento-sim\"\nkind = \"databento\"\n\
             url = \"tcp://127.0.0.1:{}\"\n\
             symbols = [{}]\nchannels = [{}]\n\
             [databento]\ndataset = \"GLBX.MDP3\"\n{databento_extra}\n\
             [credentials]\napi_key_env = \"{KEY_VARIABLE}\"\n\
             [reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 200\nmax_attempts_per_minute = 100\n\
             {venue_extra}\n",
            sim.addr().port(),
            quote_list(symbols),
            quote_list(channels),
        ),
    )
    .unwrap();
    let appliance = write_appliance(dir.path(), "databento.toml", &Setup::default());
    appliance::start_session(sim, dir, &appliance, Clock::calibrate())
}

/// Replays an instrument's book events as a strategy would: snapshots reset the book, levels
/// set or remove, and every derived quote must equal the replayed book's top. Returns
/// (snapshots, level changes, quotes checked).
fn check_book(events: &[Event], instrument: u32) -> (usize, usize, usize) {
    let mut bids: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let mut asks: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let (mut snapshots, mut changes, mut checked) = (0, 0, 0);
    for event in events
        .iter()
        .filter(|e| e.header.instrument_id == instrument)
    {
        match event.body() {
            Body::SnapshotBegin(_) => {
                bids.clear();
                asks.clear();
            }
            Body::SnapshotEnd(snapshot) => {
                assert_eq!(snapshot.bid_levels as usize, bids.len());
                assert_eq!(snapshot.ask_levels as usize, asks.len());
                snapshots += 1;
            }
            Body::Gap(_) => {
                bids.clear();
                asks.clear();
            }
            Body::BookLevel(level) => {
                changes += 1;
                let side = match level.side() {
                    Side::Bid => &mut bids,
                    Side::Ask => &mut asks,
                    Side::None => panic!("a level without a side"),
                };
                if level.size.raw() == 0 {
                    side.remove(&level.price);
                } else {
                    side.insert(level.price, level.size);
                }
            }
            Body::Quote(quote) if event.header.flags & tickwire::event::flags::DERIVED != 0 => {
                let best_bid = bids.iter().next_back().map(|(p, s)| (*p, *s));
                let best_ask = asks.iter().next().map(|(p, s)| (*p, *s));
                assert_eq!(
                    best_bid.unwrap_or_default(),
                    (quote.bid_px, quote.bid_sz),
                    "derived bid of instrument {instrument}"
                );
                assert_eq!(
                    best_ask.unwrap_or_default(),
                    (quote.ask_px, quote.ask_sz),
                    "derived ask of instrument {instrument}"
                );
                checked += 1;
            }
            _ => {}
        }
    }
    (snapshots, changes, checked)
}

/// Per instrument, the DBN sequences of the market events: never going back (a duplicate or a
/// record from the wrong session would).
fn check_sequences(events: &[Event]) -> usize {
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut checked = 0;
    for event in events.iter().filter(|e| {
        matches!(
            e.header.kind,
            EventKind::BookLevel | EventKind::Trade | EventKind::Quote
        ) && e.header.venue_seq > 0
    }) {
        let previous = last.entry(event.header.instrument_id).or_insert(0);
        assert!(
            event.header.venue_seq >= *previous,
            "instrument {}: sequence {} after {}",
            event.header.instrument_id,
            event.header.venue_seq,
            previous
        );
        *previous = event.header.venue_seq;
        checked += 1;
    }
    checked
}

fn statuses(events: &[Event], reason_code: u32) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.body(), Body::VenueStatus(s) if s.reason_code == reason_code))
        .count()
}

/// Authentication, subscription, start, records into L3 books, an unknown symbol's error, a
/// slow-reader warning, then the gateway closes: the reconnect replays from the last record
/// time and the strategy sees neither a gap nor a repeat, and every book stays consistent.
#[test]
fn a_full_session_with_an_error_a_warning_and_a_replayed_reconnect() {
    let mut pair = start(
        |options| {
            options.faults.slow_reader_warning_after = Some(300);
            options.faults.close_after = Some(1_500);
            options.faults.fault_connections = 1;
        },
        &["ESM5", "NQM5", "NOPE9"],
        &["mbo"],
        "recovery = \"replay\"\nheartbeat_interval_s = 5\nslow_reader_behavior = \"warn\"",
        "",
    );
    pair.run_until(
        Duration::from_secs(20),
        "two sessions and data after",
        |p| {
            let stats = p.sim.stats();
            stats.sessions_started >= 2
                && p.session.venues.all_live()
                && p.session
                    .venues
                    .counters(0)
                    .transitions
                    .get(Reason::Subscribed)
                    >= 2
                && p.count(|e| e.header.kind == EventKind::BookLevel) > 4_000
        },
    );
    let stats = pair.sim.stats();
    let counters = pair.session.venues.counters(0);
    let feed = &pair.session.feeds[0].1;
    let (duplicates, malformed, refused) = (
        feed.duplicates.get(),
        feed.malformed.get(),
        feed.book_refused.get(),
    );
    let events = pair.finish();

    // The gateway checked the key, and the second session asked for a replay.
    assert!(stats.auths_ok >= 2, "{stats:?}");
    assert_eq!(stats.auths_failed, 0);
    let auth = stats.last_auth.expect("auth fields");
    assert_eq!(auth.dataset, "GLBX.MDP3");
    assert_eq!(auth.heartbeat_interval_s, Some(5));
    assert_eq!(auth.slow_reader_behavior.as_deref(), Some("warn"));
    assert!(auth.client.starts_with("tickwire/"));
    let subscriptions: Vec<_> = stats
        .subscriptions
        .iter()
        .filter(|s| s.schema == "mbo")
        .collect();
    assert!(subscriptions.len() >= 2, "{subscriptions:?}");
    assert_eq!(subscriptions[0].start, None);
    assert!(subscriptions[1].start.is_some(), "{subscriptions:?}");
    assert!(stats.replays_served >= 1);

    // The unknown symbol's error and the warning: logged, counted, and told to the strategy.
    assert!(counters.venue_errors >= 1, "{counters:?}");
    assert_eq!(counters.slow_reader_warnings, 1);
    assert!(statuses(&events, ERROR_REASON + 4) >= 1);
    assert_eq!(statuses(&events, SYSTEM_REASON + 2), 1);
    assert!(counters.transitions.get(Reason::ClosedByVenue) >= 1);

    // The replay: no gap, what it repeated was skipped, and the books never broke.
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.body(), Body::Gap(g) if g.reason() != GapReason::RingOverflow))
            .count(),
        0,
        "no gap with a replay"
    );
    assert!(duplicates > 0, "the replay repeated records");
    assert_eq!(malformed, 0, "no bad record");
    assert_eq!(refused, 0, "no book error");
    assert!(check_sequences(&events) > 4_000);
    for instrument in 0..2 {
        let (_, changes, quotes) = check_book(&events, instrument);
        assert!(changes > 500 && quotes > 100, "{changes} {quotes}");
    }
}

/// `recovery = "snapshot"`: the first session and the one after a reset start with an MBO
/// snapshot; the reset gives a gap, and the snapshot rebuilds the books.
#[test]
fn a_reconnect_with_an_mbo_snapshot_rebuilds_the_books() {
    let mut pair = start(
        |options| {
            options.faults.reset_after = Some(800);
        },
        &["ESM5", "NQM5"],
        &["mbo", "trades"],
        "recovery = \"snapshot\"",
        "",
    );
    pair.run_until(Duration::from_secs(20), "two snapshots per book", |p| {
        p.sim.stats().snapshots_served >= 2
            && p.count(|e| e.header.kind == EventKind::SnapshotEnd) >= 4
            && p.count(|e| e.header.kind == EventKind::BookLevel) > 3_000
    });
    let stats = pair.sim.stats();
    let feed = &pair.session.feeds[0].1;
    let (malformed, refused) = (feed.malformed.get(), feed.book_refused.get());
    let events = pair.finish();
    assert!(stats
        .subscriptions
        .iter()
        .filter(|s| s.schema == "mbo")
        .all(|s| s.snapshot && s.start.is_none()));
    assert!(stats
        .subscriptions
        .iter()
        .filter(|s| s.schema == "trades")
        .all(|s| !s.snapshot));
    for instrument in 0..2 {
        let gaps = events
            .iter()
            .filter(|e| {
                e.header.instrument_id == instrument
                    && matches!(e.body(), Body::Gap(g) if g.reason() == GapReason::Reconnect)
            })
            .count();
        assert_eq!(gaps, 1, "instrument {instrument}");
        let (snapshots, changes, quotes) = check_book(&events, instrument);
        assert!(snapshots >= 2 && changes > 300 && quotes > 50);
    }
    assert_eq!(malformed, 0);
    assert_eq!(
        refused, 0,
        "the snapshots rebuilt books the MBO records fit"
    );
    assert!(events.iter().any(|e| e.header.kind == EventKind::Trade));
}

/// `ErrorMsg` then close, with natural refresh: the error is counted and shown, the
/// instruments get their gap, and data flows again on the new session.
#[test]
fn an_error_then_close_gives_a_gap_and_a_new_session() {
    let mut pair = start(
        |options| {
            options.faults.error_after = Some(InjectedError {
                after_records: 500,
                code: 6,
                text: "Internal error.".to_owned(),
            });
        },
        &["ESM5", "NQM5"],
        &["mbo"],
        "recovery = \"gap\"",
        "",
    );
    pair.run_until(Duration::from_secs(20), "a second session with data", |p| {
        p.sim.stats().sessions_started >= 2
            && p.session.venues.all_live()
            && p.count(|e| e.header.kind == EventKind::Gap) >= 2
            && p.count(|e| e.header.kind == EventKind::BookLevel) > 2_000
    });
    let counters = pair.session.venues.counters(0);
    let events = pair.finish();
    assert!(counters.venue_errors >= 1);
    assert!(statuses(&events, ERROR_REASON + 6) >= 1);
    let gaps: Vec<u32> = events
        .iter()
        .filter(|e| matches!(e.body(), Body::Gap(g) if g.reason() == GapReason::Reconnect))
        .map(|e| e.header.instrument_id)
        .collect();
    assert_eq!(gaps.len(), 2, "{gaps:?}");
}

/// An idle session: the gateway's heartbeats keep it alive past the read timeout, without
/// reaching the strategy.
#[test]
fn heartbeats_keep_an_idle_session_alive() {
    let Some(file) = tickwire_test_data("dbn/test_data.mbo.v3.dbn.zst") else {
        return;
    };
    let mut pair = start(
        |options| {
            options.source = DatabentoSource::File {
                path: file,
                looping: false,
            };
            options.symbols = vec!["ESH1".to_owned()];
        },
        &["ESH1"],
        &["mbo"],
        "heartbeat_interval_s = 5",
        "[lifecycle]\nread_timeout_ms = 6000",
    );
    pair.run_until(Duration::from_secs(20), "heartbeats while idle", |p| {
        p.sim.stats().heartbeats_sent >= 2 && p.session.venues.all_live()
    });
    let counters = pair.session.venues.counters(0);
    let stats = pair.sim.stats();
    pair.finish();
    assert_eq!(stats.sessions_started, 1, "{stats:?}");
    assert_eq!(counters.transitions.get(Reason::ReadTimeout), 0);
}

/// A stalled gateway (no data, no heartbeats): the read timeout recycles the session.
#[test]
fn a_stall_is_caught_by_the_read_timeout() {
    let mut pair = start(
        |options| {
            options.faults.stall_after = Some((200, Duration::MAX));
        },
        &["ESM5"],
        &["mbo"],
        "heartbeat_interval_s = 5",
        "[lifecycle]\nread_timeout_ms = 5500",
    );
    pair.run_until(
        Duration::from_secs(20),
        "a recycle for the read timeout",
        |p| {
            p.session
                .venues
                .counters(0)
                .transitions
                .get(Reason::ReadTimeout)
                >= 1
                && p.sim.stats().sessions_started >= 2
        },
    );
    pair.finish();
}

/// A key the gateway refuses: the connection fails as `auth-failed` and is retried after the
/// backoff.
#[test]
fn a_refused_key_is_an_auth_failure() {
    let mut pair = start(
        |options| {
            options.faults.refuse_auth = true;
            options.faults.fault_connections = u32::MAX;
        },
        &["ESM5"],
        &["mbo"],
        "",
        "",
    );
    pair.run_until(
        Duration::from_secs(10),
        "two refused authentications",
        |p| {
            p.session
                .venues
                .counters(0)
                .transitions
                .get(Reason::AuthFailed)
                >= 2
        },
    );
    let stats = pair.sim.stats();
    let events = pair.finish();
    assert!(stats.auths_failed >= 2);
    assert_eq!(stats.sessions_started, 0);
    assert!(!events.iter().any(|e| e.header.kind == EventKind::BookLevel));
}

fn tickwire_test_data(relative: &str) -> Option<std::path::PathBuf> {
    common::shared_data(relative)
}
