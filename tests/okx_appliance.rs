//! The appliance against the OKX simulator over loopback (TLS, WebSocket, OKX v5's ops): books
//! verified by the venue's checksum, trades, quotes and marks from the simulator to the
//! strategy and the bus, the text `ping` as the heartbeat, the documented sequence reset (no
//! break), and corrupted checksums (each a gap, a resubscription and a fresh snapshot). Every
//! test checks what reached the strategy.

use crate::support::appliance;

use appliance::{quote_list, write_appliance, Setup};
use std::collections::BTreeMap;
use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{flags, Body, Event, EventKind, GapReason, ReferenceKind, Side};
use tickwire::fixed::Fixed;
use tickwire_bus::{BusReader, Start};
use tickwire_sim::okx::{self, OkxHandle, OkxOptions};

type Pair = appliance::Pair<OkxHandle>;

impl appliance::SimReport for OkxHandle {
    fn report(&self) -> String {
        format!("{:?}", self.stats())
    }
}

fn venue_file(sim: &OkxHandle, symbols: &[&str], channels: &[&str], extra: &str) -> String {
    format!(
        "name = \"okx-sim\"\nkind = \"okx\"\nurl = {:?}\n\
         symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n\
         [reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 200\nmax_attempts_per_minute = 100\n\
         {extra}\n",
        sim.url(false),
        quote_list(symbols),
        quote_list(channels),
        sim.ca_pem_path().display().to_string(),
    )
}

fn start(
    options: impl FnOnce(&mut OkxOptions),
    symbols: &[&str],
    channels: &[&str],
    appliance_extra: &str,
) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let mut sim_options = OkxOptions::new(dir.path().join("sim"));
    sim_options.rate = 300.0;
    options(&mut sim_options);
    let sim = okx::start(sim_options).expect("the simulator starts");
    let heartbeat = "[lifecycle]\nping_interval_ms = 300\nread_timeout_ms = 3000\n";
    std::fs::write(
        dir.path().join("okx.toml"),
        venue_file(&sim, symbols, channels, heartbeat),
    )
    .unwrap();
    let setup = Setup {
        appliance_extra: appliance_extra.to_owned(),
        ..Setup::default()
    };
    let appliance = write_appliance(dir.path(), "okx.toml", &setup);
    appliance::start_session(sim, dir, &appliance, Clock::calibrate())
}

/// Replays the book events of `instrument` as a strategy would and checks every derived top of
/// book against the replayed book. Returns (snapshots, changes, quotes checked).
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
                checked += 1;
            }
            _ => {}
        }
    }
    (snapshots, changes, checked)
}

fn drain(reader: &mut BusReader, into: &mut Vec<Event>) {
    let mut buffer = vec![
        Event::new(
            tickwire::venue::feed::own_header(0, 0, 0),
            Body::Gap(Default::default())
        );
        1024
    ];
    loop {
        let batch = reader.read(&mut buffer).expect("the bus reads");
        into.extend_from_slice(&buffer[..batch.count]);
        if batch.count == 0 && batch.missed == 0 {
            return;
        }
    }
}

/// Books verified by checksum on every update, trades, quotes and marks reach the strategy and
/// the bus; the text `ping` is answered; the documented sequence reset is no break.
#[test]
fn books_verified_by_checksum_trades_quotes_and_marks_reach_the_strategy_and_the_bus() {
    let bus_dir = tempfile::tempdir().unwrap();
    let bus = bus_dir.path().join("tickwire.bus");
    let mut pair = start(
        |options| options.faults.seq_reset_after = Some(200),
        &["BTC-USDT", "ETH-USDT-SWAP"],
        &["books", "trades", "tickers", "mark-price"],
        &format!(
            "[bus]\npath = {:?}\ncapacity = 262144\n",
            bus.display().to_string()
        ),
    );
    let mut reader = BusReader::open(&bus, Start::Oldest, 1024).expect("the bus exists");
    pair.run_until(
        Duration::from_secs(20),
        "books, trades, quotes and marks of both instruments, a sequence reset, and pongs",
        |pair| {
            let events = pair.recorded.snapshot();
            let has = |instrument: u32, what: &dyn Fn(&Event) -> bool| {
                events
                    .iter()
                    .any(|e| e.header.instrument_id == instrument && what(e))
            };
            let trade = |e: &Event| e.kind() == EventKind::Trade;
            let quote = |e: &Event| {
                matches!(e.body(), Body::Quote(_)) && e.header.flags & flags::DERIVED == 0
            };
            let mark = |e: &Event| {
                matches!(e.body(), Body::Reference(r) if r.kind() == ReferenceKind::Mark)
            };
            (0..2).all(|i| {
                has(i, &trade)
                    && has(i, &quote)
                    && has(i, &mark)
                    && check_books(&events, i).1 >= 50
                    && check_books(&events, i).2 >= 10
            }) && pair.sim.stats().seq_resets_injected == 1
                && pair.sim.stats().data_messages_sent >= 400
                && pair.sim.stats().pings_answered >= 4
        },
    );
    let verified = pair.counters().message("books_verified");
    let gaps = pair.counters().book_gaps.get();
    let stats = pair.sim.stats();
    let seen = pair.finish();
    let mut on_bus = Vec::new();
    drain(&mut reader, &mut on_bus);
    assert_eq!(on_bus, seen, "the bus has exactly the strategy's events");
    assert_eq!(gaps, 0, "no break: the sequence reset is documented");
    assert!(
        !seen.iter().any(|e| e.kind() == EventKind::Gap),
        "no gap reached the strategy"
    );
    assert!(verified >= 100, "books verified by checksum: {verified}");
    assert_eq!(stats.requests_refused, 0);
    assert_eq!(stats.websocket_connections, 1, "{stats:?}");
    for instrument in 0..2 {
        assert_eq!(check_books(&seen, instrument).0, 1, "one snapshot each");
    }
}

/// Every 25th book update carries a wrong checksum: each is a gap, the stream is resubscribed,
/// and the book comes back from a fresh snapshot; between them every derived quote is the
/// replayed book's top.
#[test]
fn a_corrupted_checksum_is_a_gap_and_a_fresh_snapshot() {
    let mut pair = start(
        |options| options.faults.corrupt_checksum_every = Some(25),
        &["BTC-USDT"],
        &["books", "trades"],
        "",
    );
    pair.run_until(
        Duration::from_secs(20),
        "three corruptions caught and three books rebuilt",
        |pair| {
            let events = pair.recorded.snapshot();
            let (snapshots, _, quotes) = check_books(&events, 0);
            pair.gaps(GapReason::SequenceBreak) >= 3 && snapshots >= 4 && quotes >= 20
        },
    );
    let gaps = pair.counters().book_gaps.get();
    let stats = pair.sim.stats();
    let seen = pair.finish();
    let caught = seen
        .iter()
        .filter(|e| matches!(e.body(), Body::Gap(gap) if gap.reason() == GapReason::SequenceBreak))
        .count() as u64;
    assert!(caught >= 3);
    assert!(
        caught <= stats.corruptions_injected,
        "only corruptions are gaps: {caught} of {stats:?}"
    );
    assert_eq!(gaps, caught);
    assert!(
        stats.streams_subscribed > 2,
        "the book was resubscribed: {stats:?}"
    );
    assert_eq!(
        stats.websocket_connections, 1,
        "resubscribed, not reconnected"
    );
}
