//! The appliance against the Bybit simulator over loopback (TLS, WebSocket, Bybit's v5 public
//! ops): spot and linear together from the simulator to the strategy and the bus, the `ping`
//! op as the heartbeat, a refused subscription, and the book faults (a `u` = 1 restart and a
//! skipped `u`). Every test checks what reached the strategy.

use crate::support::appliance;

use appliance::{quote_list, write_appliance, Setup};
use std::collections::BTreeMap;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{flags, Body, Event, EventKind, GapReason, ReferenceKind, Side};
use tickwire::fixed::Fixed;
use tickwire_bus::{BusReader, Start};
use tickwire_sim::bybit::{self, BybitHandle, BybitOptions, Category};

type Pair = appliance::Pair<BybitHandle>;

impl appliance::SimReport for BybitHandle {
    fn report(&self) -> String {
        format!("{:?}", self.stats())
    }
}

/// A venue file for `category` on the simulator.
fn venue_file(
    sim: &BybitHandle,
    category: Category,
    symbols: &[&str],
    channels: &[&str],
    extra: &str,
) -> String {
    let (name, kind) = match category {
        Category::Spot => ("bybit-spot-sim", "bybit-spot"),
        Category::Linear => ("bybit-linear-sim", "bybit-linear"),
    };
    format!(
        "name = \"{name}\"\nkind = \"{kind}\"\nurl = {:?}\n\
         symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n\
         [reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 200\nmax_attempts_per_minute = 100\n\
         {extra}\n",
        sim.url(category),
        quote_list(symbols),
        quote_list(channels),
        sim.ca_pem_path().display().to_string(),
    )
}

/// The simulator and the appliance on the venue files `venues` makes (file name, text).
fn start(
    options: impl FnOnce(&mut BybitOptions),
    venues: impl FnOnce(&BybitHandle) -> Vec<(&'static str, String)>,
    appliance_extra: &str,
) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let mut sim_options = BybitOptions::new(dir.path().join("sim"));
    sim_options.rate = 300.0;
    options(&mut sim_options);
    let sim = bybit::start(sim_options).expect("the simulator starts");
    let files = venues(&sim);
    for (file, text) in &files {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let setup = Setup {
        appliance_extra: appliance_extra.to_owned(),
        ..Setup::default()
    };
    // `write_appliance` names one venue file: its first line then lists them all.
    let appliance = write_appliance(dir.path(), files[0].0, &setup);
    let text = std::fs::read_to_string(&appliance).unwrap();
    let names: Vec<&str> = files.iter().map(|(file, _)| *file).collect();
    let rest = text.split_once('\n').map_or("", |(_, rest)| rest);
    std::fs::write(
        &appliance,
        format!("venues = [{}]\n{rest}", quote_list(&names)),
    )
    .unwrap();
    appliance::start_session(sim, dir, &appliance, Clock::calibrate())
}

/// Replays the book events of (venue, instrument) as a strategy would and checks every derived
/// top of book against the replayed book. Returns (snapshots, changes, quotes checked).
fn check_books(events: &[Event], venue: u16, instrument: u32) -> (usize, usize, usize) {
    let mut bids: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let mut asks: BTreeMap<Fixed, Fixed> = BTreeMap::new();
    let mut valid = false;
    let (mut snapshots, mut changes, mut checked) = (0, 0, 0);
    for event in events
        .iter()
        .filter(|e| e.header.venue_id == venue && e.header.instrument_id == instrument)
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
            Body::Gap(_) => {
                valid = false;
                bids.clear();
                asks.clear();
            }
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

/// Reads everything the bus reader has not read yet.
fn drain(reader: &mut BusReader, into: &mut Vec<Event>) -> u64 {
    let mut buffer = vec![
        Event::new(
            tickwire::venue::feed::own_header(0, 0, 0),
            Body::Gap(Default::default())
        );
        1024
    ];
    let mut missed = 0;
    loop {
        let batch = reader.read(&mut buffer).expect("the bus reads");
        missed += batch.missed;
        into.extend_from_slice(&buffer[..batch.count]);
        if batch.count == 0 && batch.missed == 0 {
            return missed;
        }
    }
}

#[test]
fn spot_and_linear_reach_the_strategy_and_the_bus_with_books_trades_marks_and_liquidations() {
    let bus_dir = tempfile::tempdir().unwrap();
    let bus = bus_dir.path().join("tickwire.bus");
    let heartbeat = "[lifecycle]\nping_interval_ms = 300\nread_timeout_ms = 3000\n";
    let mut pair = start(
        |_| {},
        |sim| {
            vec![
                (
                    "spot.toml",
                    venue_file(
                        sim,
                        Category::Spot,
                        &["BTCUSDT", "ETHUSDT"],
                        &["orderbook.50", "publicTrade"],
                        heartbeat,
                    ),
                ),
                (
                    "linear.toml",
                    venue_file(
                        sim,
                        Category::Linear,
                        &["BTCUSDT", "BTC-26DEC25"],
                        &["orderbook.50", "publicTrade", "tickers", "allLiquidation"],
                        heartbeat,
                    ),
                ),
            ]
        },
        &format!(
            "[bus]\npath = {:?}\ncapacity = 262144\n",
            bus.display().to_string()
        ),
    );
    let mut reader = BusReader::open(&bus, Start::Oldest, 1024).expect("the bus exists");
    let directory: Vec<(String, String)> = reader
        .directory()
        .iter()
        .map(|entry| (entry.venue.clone(), entry.symbol.clone()))
        .collect();
    assert_eq!(directory.len(), 4, "{directory:?}");
    assert!(directory.contains(&("bybit-linear-sim".to_owned(), "BTC-26DEC25".to_owned())));
    pair.run_until(
        Duration::from_secs(20),
        "books, trades, marks and liquidations of both venues, and pongs",
        |pair| {
            let events = pair.recorded.snapshot();
            let has = |venue: u16, instrument: u32, what: &dyn Fn(&Event) -> bool| {
                events.iter().any(|e| {
                    e.header.venue_id == venue && e.header.instrument_id == instrument && what(e)
                })
            };
            let book = |e: &Event| e.kind() == EventKind::SnapshotEnd;
            let trade = |e: &Event| e.kind() == EventKind::Trade;
            let mark = |e: &Event| {
                matches!(e.body(), Body::Reference(r) if r.kind() == ReferenceKind::Mark)
            };
            let index = |e: &Event| {
                matches!(e.body(), Body::Reference(r) if r.kind() == ReferenceKind::Index)
            };
            let liquidation = |e: &Event| e.kind() == EventKind::Liquidation;
            (0..2).all(|i| has(0, i, &book) && has(0, i, &trade))
                && (2..4).all(|i| {
                    has(1, i, &book)
                        && has(1, i, &trade)
                        && has(1, i, &mark)
                        && has(1, i, &index)
                        && has(1, i, &liquidation)
                })
                && (0..2).all(|i| check_books(&events, 0, i).2 >= 10)
                && (2..4).all(|i| check_books(&events, 1, i).2 >= 10)
                && pair.sim.stats().pings_answered >= 4
        },
    );
    let stats = pair.sim.stats();
    let spot = pair.session.venues.counters(0);
    let linear = pair.session.venues.counters(1);
    let mut on_bus = Vec::new();
    let seen = pair.finish();
    drain(&mut reader, &mut on_bus);
    assert_eq!(
        on_bus, seen,
        "the bus has exactly the strategy's events, in order"
    );
    assert_eq!((spot.refused_requests, linear.refused_requests), (0, 0));
    assert_eq!(stats.requests_refused, 0);
    assert_eq!(
        stats.websocket_connections, 2,
        "one connection a venue, never recycled"
    );
    assert!(
        stats.pings_answered >= 4,
        "the ping op is the heartbeat: {stats:?}"
    );
    for (venue, instruments) in [(0u16, 0..2u32), (1, 2..4)] {
        for instrument in instruments {
            let (snapshots, changes, checked) = check_books(&seen, venue, instrument);
            assert_eq!(snapshots, 1, "one snapshot, then deltas");
            assert!(changes > 0 && checked > 0);
        }
    }
    assert!(
        !seen.iter().any(|e| e.kind() == EventKind::Gap),
        "no gap on healthy connections"
    );
    let trades: Vec<_> = seen
        .iter()
        .filter_map(|e| match e.body() {
            Body::Trade(trade) => Some((e.header.venue_id, e.header.instrument_id, trade)),
            _ => None,
        })
        .collect();
    assert!(trades
        .iter()
        .all(|(_, _, trade)| trade.price > Fixed::ZERO && trade.size > Fixed::ZERO));
    // Every trade of an instrument keeps an id of its own (spot's numbers, linear's UUIDs
    // folded).
    let mut ids: Vec<(u16, u32, u64)> = trades
        .iter()
        .map(|(venue, instrument, trade)| (*venue, *instrument, trade.trade_id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), trades.len());
    // Liquidations: linear's only, each with the liquidated position's side, a price, a size
    // and the venue's time.
    let liquidations: Vec<_> = seen
        .iter()
        .filter_map(|e| match e.body() {
            Body::Liquidation(liquidation) => Some((e, liquidation)),
            _ => None,
        })
        .collect();
    assert!(!liquidations.is_empty());
    for (event, liquidation) in &liquidations {
        assert_eq!(event.header.venue_id, 1, "{event:?}");
        assert!(liquidation.position_side() != Side::None, "{event:?}");
        assert!(liquidation.price > Fixed::ZERO && liquidation.size > Fixed::ZERO);
        assert!(event.header.exchange_ts_ns > 0 && event.header.flags & flags::LAST != 0);
    }
    // Linear tickers: quotes from the merged fields, not derived from a book.
    assert!(seen.iter().any(|e| e.header.venue_id == 1
        && e.header.flags & flags::DERIVED == 0
        && matches!(e.body(), Body::Quote(q) if q.bid_px > Fixed::ZERO && q.ask_px > q.bid_px)));
}

#[test]
fn a_restart_snapshot_rebuilds_and_a_skipped_u_is_a_gap_and_a_resubscription() {
    let mut pair = start(
        |options| {
            options.faults.restart_after = Some(40);
            options.faults.skip_u_after = Some(120);
        },
        |sim| {
            vec![(
                "linear.toml",
                venue_file(sim, Category::Linear, &["BTCUSDT"], &["orderbook.50"], ""),
            )]
        },
        "",
    );
    pair.run_until(
        Duration::from_secs(20),
        "the restart, the break and the resubscription's snapshot",
        |pair| {
            let events = pair.recorded.snapshot();
            let gap_at = events.iter().position(|e| e.kind() == EventKind::Gap);
            gap_at.is_some_and(|at| {
                events[at..]
                    .iter()
                    .any(|e| e.kind() == EventKind::SnapshotEnd)
                    && check_books(&events[at..], 0, 0).2 >= 5
            })
        },
    );
    let stats = pair.sim.stats();
    let counters = pair.counters();
    let (gaps, resyncs, syncs) = (
        counters.book_gaps.get(),
        counters.book_resyncs.get(),
        counters.book_syncs.get(),
    );
    let events = pair.finish();
    assert_eq!((stats.restarts_injected, stats.skips_injected), (1, 1));
    assert_eq!(
        stats.websocket_connections, 1,
        "a resubscription, not a reconnect"
    );
    // The first subscription and the resubscription of the broken book.
    assert_eq!(stats.topics_subscribed, 2);
    let gaps_seen: Vec<_> = events
        .iter()
        .filter_map(|e| match e.body() {
            Body::Gap(gap) => Some(gap),
            _ => None,
        })
        .collect();
    assert_eq!(
        gaps_seen.len(),
        1,
        "the skipped u only: a restart is no gap"
    );
    assert_eq!(gaps_seen[0].reason(), GapReason::SequenceBreak);
    assert_eq!(gaps_seen[0].received_seq, gaps_seen[0].expected_seq + 1);
    assert_eq!((gaps, resyncs), (1, 1));
    // The first snapshot, the restart's (`u` = 1) and the resubscription's.
    assert_eq!(syncs, 3);
    let snapshot_ids: Vec<u64> = events
        .iter()
        .filter_map(|e| match e.body() {
            Body::SnapshotEnd(snapshot) => Some(snapshot.snapshot_id),
            _ => None,
        })
        .collect();
    assert_eq!(snapshot_ids.len(), 3);
    assert_ne!(snapshot_ids[0], 1);
    assert_eq!(snapshot_ids[1], 1, "the restart's snapshot has u = 1");
    let (snapshots, changes, checked) = check_books(&events, 0, 0);
    assert_eq!(snapshots, 3);
    assert!(changes > 0 && checked > 0);
}

#[test]
fn a_refused_subscription_is_counted_and_the_other_requests_stream() {
    let mut pair = start(
        |options| {
            options.linear_symbols = ["BTCUSDT", "ETHUSDT", "BTC-26DEC25", "SOLUSDT", "XRPUSDT"]
                .map(str::to_owned)
                .to_vec();
        },
        |sim| {
            vec![(
                "linear.toml",
                // Ten topics a request: the first carries the served symbols' ten, the second
                // the unknown symbol's two, which the simulator refuses.
                venue_file(
                    sim,
                    Category::Linear,
                    &[
                        "BTCUSDT",
                        "ETHUSDT",
                        "BTC-26DEC25",
                        "SOLUSDT",
                        "XRPUSDT",
                        "NOPEUSDT",
                    ],
                    &["orderbook.1", "publicTrade"],
                    "",
                ),
            )]
        },
        "",
    );
    pair.run_until(Duration::from_secs(20), "the refusal and data", |pair| {
        pair.session.venues.counters(0).refused_requests == 1
            && (0..5).all(|i| {
                pair.count(|e| e.header.instrument_id == i && e.kind() == EventKind::SnapshotEnd)
                    >= 2
            })
    });
    let stats = pair.sim.stats();
    let events = pair.finish();
    assert_eq!(stats.requests_refused, 1);
    assert!(
        events.iter().all(|e| e.header.instrument_id != 5),
        "the refused symbol is silent"
    );
    // Level 1 sends snapshots only: every book message replaces the book.
    assert!(!events
        .iter()
        .any(|e| e.kind() == EventKind::BookLevel && e.header.flags & flags::SNAPSHOT == 0));
}
