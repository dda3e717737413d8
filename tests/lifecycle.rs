//! The connection lifecycle against the simulator on loopback: every way a venue connection
//! ends or stalls, and what the appliance does about it. Each test checks that the connection
//! comes back within the bound its config implies, the transition counters, and that the
//! strategy saw every message at most once and in order, with gap and status events where data
//! was lost.

use crate::support::appliance;

use appliance::{start, synthetic, Pair, Setup};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::event::{flags, Body, Event, EventKind, GapReason, VenueState};
use tickwire::lifecycle::Reason;
use tickwire::venue::feed::ALL_INSTRUMENTS;
use tickwire::venue::resolve::Resolve;
use tickwire_sim::{Faults, Sim, SimHandle, SimOptions};

/// Backoff, timeouts and a window of the storm breaker sized for tests on loopback.
const FAST: &str = "[reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 500\nfactor = 2.0\n\
                    reset_after_live_ms = 60000\nmax_attempts_per_minute = 60\n\
                    [lifecycle]\nhandshake_timeout_ms = 1000\nack_timeout_ms = 1000\n\
                    close_timeout_ms = 500\nrotate_after_ms = 0\n";

/// The longest a reconnect may take under `FAST`: the largest backoff, a handshake timeout and
/// an ack timeout, plus room for a loaded machine. Generous on purpose: what it catches is a
/// reconnect that waits for the wrong timer, not a slow one.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);

fn setup(extra: &str) -> Setup {
    Setup {
        venue_extra: format!("{FAST}{extra}"),
        ..Setup::default()
    }
}

fn faults(faults: Faults) -> impl FnOnce(&mut SimOptions) {
    move |options| options.faults = faults
}

fn transitions(pair: &Pair, reason: Reason) -> u64 {
    pair.session.venues.counters(0).transitions.get(reason)
}

fn statuses(events: &[Event]) -> Vec<(u32, VenueState)> {
    events
        .iter()
        .filter_map(|event| match event.body() {
            Body::VenueStatus(status) => Some((event.header.instrument_id, status.state())),
            _ => None,
        })
        .collect()
}

/// Every venue message reached the strategy at most once and in order: per instrument, the
/// update ids of quotes the venue sent and the ids of trades only ever go up.
fn assert_once_and_in_order(events: &[Event]) {
    let mut last: std::collections::HashMap<(u32, EventKind), u64> = Default::default();
    for event in events {
        let kind = event.header.kind;
        let venue_sent = match event.body() {
            Body::Quote(_) => event.header.flags & flags::DERIVED == 0,
            Body::Trade(_) => true,
            _ => false,
        };
        if !venue_sent {
            continue;
        }
        let key = (event.header.instrument_id, kind);
        let seq = event.header.venue_seq;
        if let Some(&previous) = last.get(&key) {
            assert!(
                seq > previous,
                "{kind:?} of instrument {} went from {previous} to {seq}: a duplicate or a \
                 reordering",
                key.0
            );
        }
        last.insert(key, seq);
    }
}

/// Runs until the venue stream has ended once, then until it is live again; returns how long
/// the recovery took.
fn end_then_recover(pair: &mut Pair, what: &str) -> Duration {
    pair.run_until(Duration::from_secs(30), what, |pair| {
        pair.session.venues.streams_ended > 0 || transitions(pair, Reason::AllStreamsStale) > 0
    });
    let ended = Instant::now();
    pair.run_until(RECOVERY_BOUND, "live again", |pair| {
        pair.session.venues.all_live()
    });
    let recovery = ended.elapsed();
    // For the record (`--nocapture`); the bound above is what the test asserts.
    println!("{what}: live again after {recovery:?}");
    recovery
}

#[test]
fn a_clean_close_reconnects_resubscribes_and_owes_one_gap() {
    let mut pair = start(
        synthetic(500.0),
        faults(Faults {
            close_after: Some(300),
            ..Faults::default()
        }),
        setup(""),
    );
    end_then_recover(&mut pair, "the venue's close");
    let before = pair.decoded();
    pair.run_until(
        Duration::from_secs(10),
        "data after the reconnect",
        |pair| pair.decoded() > before + 200 && pair.counters().book_syncs.get() >= 2,
    );
    assert_eq!(pair.session.venues.ends[0].close_code, Some(1000));
    assert_eq!(transitions(&pair, Reason::ClosedByVenue), 1);
    assert_eq!(transitions(&pair, Reason::Subscribed), 2);
    assert_eq!(
        pair.sim.stats().connections.len(),
        2,
        "one WebSocket connection per attempt"
    );
    let events = pair.finish();
    assert_once_and_in_order(&events);
    let gaps: Vec<_> = events
        .iter()
        .filter(
            |event| matches!(event.body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect),
        )
        .collect();
    assert_eq!(
        gaps.len(),
        1,
        "one reconnect, one gap for the one instrument"
    );
    let connection = statuses(&events)
        .into_iter()
        .filter(|(instrument, _)| *instrument == ALL_INSTRUMENTS)
        .map(|(_, state)| state)
        .collect::<Vec<_>>();
    // The last one is the shutdown's close.
    assert_eq!(
        connection,
        [
            VenueState::Live,
            VenueState::Disconnected,
            VenueState::Live,
            VenueState::Disconnected
        ]
    );
}

#[test]
fn a_reset_reconnects_with_a_gap() {
    let mut pair = start(
        synthetic(500.0),
        faults(Faults {
            reset_after: Some(300),
            ..Faults::default()
        }),
        setup(""),
    );
    end_then_recover(&mut pair, "the reset");
    let before = pair.decoded();
    pair.run_until(
        Duration::from_secs(10),
        "data after the reconnect",
        |pair| pair.decoded() > before + 200,
    );
    assert!(pair.session.venues.ends[0].error.is_some());
    assert_eq!(transitions(&pair, Reason::ConnectionLost), 1);
    assert_eq!(transitions(&pair, Reason::Subscribed), 2);
    let events = pair.finish();
    assert_once_and_in_order(&events);
    assert_eq!(
        events
            .iter()
            .filter(|event| matches!(event.body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect))
            .count(),
        1
    );
}

#[test]
fn a_stall_with_the_socket_open_goes_stale_and_the_connection_is_recycled() {
    let mut pair = start(
        synthetic(500.0),
        faults(Faults {
            stall_after: Some((300, Duration::from_secs(30))),
            ..Faults::default()
        }),
        // Only bookTicker is watched: the connection is recycled when it alone is silent.
        setup("[staleness.channels]\n\"bookTicker\" = 300\n"),
    );
    end_then_recover(&mut pair, "the stale streams");
    let before = pair.decoded();
    pair.run_until(Duration::from_secs(10), "the stream recovering", |pair| {
        pair.decoded() > before + 100 && pair.session.venues.counters(0).recovered_streams >= 1
    });
    let counters = pair.session.venues.counters(0);
    assert_eq!(
        counters.transitions.get(Reason::AllStreamsStale),
        2,
        "stale, then backing off at once: a dead connection is dropped, not closed"
    );
    assert_eq!(counters.stale_streams, 1);
    assert_eq!(
        pair.session.venues.streams_ended, 0,
        "we closed it, the venue did not"
    );
    assert!(pair.sim.stats().connections[0].messages_lost > 0);
    let events = pair.finish();
    assert_once_and_in_order(&events);
    let states = statuses(&events);
    let stale = states
        .iter()
        .position(|&(instrument, state)| instrument == 0 && state == VenueState::Stale)
        .expect("a stale status for the instrument");
    let recovered = states
        .iter()
        .position(|&(instrument, state)| instrument == 0 && state == VenueState::Recovered)
        .expect("a recovered status for the instrument");
    assert!(stale < recovered);
    assert!(events.iter().any(
        |event| matches!(event.body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect)
    ));
}

#[test]
fn a_tls_handshake_that_hangs_times_out_and_the_next_attempt_connects() {
    let mut pair = start(
        synthetic(200.0),
        // Two connections: the start's instrument-list request (`/fapi/v1/exchangeInfo`, which
        // times out, so the symbols go unchecked with a warning) and the WebSocket.
        faults(Faults {
            handshake_delay: Some(Duration::from_secs(60)),
            fault_connections: 2,
            ..Faults::default()
        }),
        setup(""),
    );
    let started = Instant::now();
    pair.run_until(
        Duration::from_secs(20),
        "live after the hung handshake",
        |pair| pair.session.venues.all_live(),
    );
    assert!(started.elapsed() < RECOVERY_BOUND);
    assert_eq!(transitions(&pair, Reason::HandshakeTimeout), 1);
    assert_eq!(transitions(&pair, Reason::TlsEstablished), 1);
    assert_eq!(transitions(&pair, Reason::Subscribed), 1);
    let before = pair.decoded();
    pair.run_until(Duration::from_secs(10), "data", |pair| {
        pair.decoded() > before + 50
    });
    let events = pair.finish();
    assert_once_and_in_order(&events);
    // No data flowed on the hung connection: nothing was lost, so no gap.
    assert!(!events
        .iter()
        .any(|event| matches!(event.body(), Body::Gap(_))));
}

#[test]
fn a_subscription_ack_that_never_comes_times_out_and_the_connection_is_replaced() {
    let mut pair = start(
        synthetic(200.0),
        faults(Faults {
            ignore_requests: true,
            ..Faults::default()
        }),
        setup(""),
    );
    pair.run_until(
        Duration::from_secs(20),
        "live on the second connection",
        |pair| pair.session.venues.all_live(),
    );
    assert_eq!(
        transitions(&pair, Reason::AckTimeout),
        2,
        "closing, then backing off"
    );
    assert_eq!(transitions(&pair, Reason::Subscribed), 1);
    let before = pair.decoded();
    pair.run_until(Duration::from_secs(10), "data", |pair| {
        pair.decoded() > before + 50
    });
    let events = pair.finish();
    assert_once_and_in_order(&events);
}

/// A TCP forwarder to `target` that starts listening on `port` only when started.
fn forward(port: u16, target: SocketAddr) -> io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(target) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            if let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) {
                pipe(client, server);
                pipe(server2, client2);
            }
        }
    });
    Ok(())
}

#[test]
fn connections_refused_for_a_while_then_accepted() {
    // A port with nothing behind it, until the forwarder starts there.
    let port = appliance::free_port();
    let mut pair = start(
        synthetic(200.0),
        |_| {},
        Setup {
            port: Some(port),
            // Books need REST, which the forwarder carries too, but keep it to quotes.
            channels: vec!["bookTicker", "trade"],
            ..setup("")
        },
    );
    pair.run_until(Duration::from_secs(20), "refused attempts", |pair| {
        transitions(pair, Reason::ConnectFailed) >= 3
    });
    assert!(!pair.session.venues.all_live());
    forward(port, pair.sim.addr()).expect("the forwarder listens");
    let accepting = Instant::now();
    pair.run_until(RECOVERY_BOUND, "live once accepted", |pair| {
        pair.session.venues.all_live()
    });
    let recovery = accepting.elapsed();
    assert!(recovery < RECOVERY_BOUND, "{recovery:?}");
    let before = pair.decoded();
    pair.run_until(Duration::from_secs(10), "data", |pair| {
        pair.decoded() > before + 50
    });
    let counters = pair.session.venues.counters(0);
    assert_eq!(
        counters.attempts,
        counters.transitions.get(Reason::ConnectFailed) + 1,
        "every attempt but the last was refused"
    );
    let events = pair.finish();
    assert_once_and_in_order(&events);
}

#[test]
fn rotation_while_messages_flow_loses_nothing_and_duplicates_nothing() {
    let mut pair = start(
        synthetic(1_000.0),
        |_| {},
        Setup {
            venue_extra: FAST.replace("rotate_after_ms = 0", "rotate_after_ms = 1500")
                + "rotation_overlap_ms = 5000\n",
            ..Setup::default()
        },
    );
    pair.run_until(Duration::from_secs(30), "two rotations", |pair| {
        pair.session.venues.counters(0).rotations >= 2
    });
    // Let the retired connection finish closing.
    pair.run_until(
        Duration::from_secs(5),
        "the old connection closed",
        |pair| {
            pair.session
                .venues
                .counters(0)
                .transitions
                .get(Reason::Retired)
                >= 4
        },
    );
    let counters = pair.session.venues.counters(0);
    assert_eq!(
        counters.forced_rotations, 0,
        "every stream agreed before the switch"
    );
    assert_eq!(pair.session.venues.streams_ended, 0);
    assert!(
        pair.counters().duplicates.get() > 0,
        "both connections delivered while they overlapped"
    );
    assert_eq!(
        pair.counters().book_syncs.get(),
        1,
        "the book never resynchronised"
    );
    assert_eq!(pair.counters().book_gaps.get(), 0);
    let events = pair.finish();
    assert_once_and_in_order(&events);
    assert!(
        !events
            .iter()
            .any(|event| matches!(event.body(), Body::Gap(_))),
        "no gap reached the strategy"
    );
    // Live once, and down only at the shutdown's close.
    assert_eq!(
        statuses(&events),
        [
            (ALL_INSTRUMENTS, VenueState::Live),
            (ALL_INSTRUMENTS, VenueState::Disconnected)
        ]
    );
}

/// A resolver for the tests: fails its first `failures` lookups, then answers `addrs` in turn
/// (the last one for ever after), and remembers the hosts it was asked for.
struct Scripted {
    failures: usize,
    addrs: Vec<SocketAddr>,
    asked: std::sync::Mutex<Vec<String>>,
}

impl Scripted {
    fn new(failures: usize, addrs: Vec<SocketAddr>) -> Arc<Scripted> {
        Arc::new(Scripted {
            failures,
            addrs,
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn lookups(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

impl Resolve for Scripted {
    fn resolve(&self, host: &str, _port: u16) -> Result<SocketAddr, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.push(host.to_owned());
        let lookup = asked.len() - 1;
        if lookup < self.failures {
            return Err(format!(
                "{host}: no such host (scripted failure {})",
                lookup + 1
            ));
        }
        let answer = (lookup - self.failures).min(self.addrs.len() - 1);
        Ok(self.addrs[answer])
    }
}

/// A simulator of its own (its own CA in `dir/name`) with `faults`.
fn named_sim(dir: &std::path::Path, name: &str, clock: Clock, faults: Faults) -> SimHandle {
    let mut options = SimOptions::new(dir.join(name));
    options.clock = clock;
    options.faults = faults;
    Sim::start(options, synthetic(500.0)).expect("the simulator starts")
}

/// The appliance against `sim`, its venue named by the host `localhost` (which the simulators'
/// certificates name), looked up by `resolver`. `trusted` are the CA files the venue trusts.
fn start_resolving(
    dir: tempfile::TempDir,
    sim: SimHandle,
    trusted: &[&std::path::Path],
    clock: Clock,
    resolver: Arc<Scripted>,
) -> Pair {
    let mut cas = String::new();
    for path in trusted {
        cas.push_str(&std::fs::read_to_string(path).unwrap());
    }
    let ca_file = dir.path().join("cas.pem");
    std::fs::write(&ca_file, cas).unwrap();
    let port = sim.addr().port();
    std::fs::write(
        dir.path().join("venue.toml"),
        format!(
            "name = \"sim\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://localhost:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\", \"trade\"]\n\
             [tls]\nextra_ca_file = {:?}\n{FAST}\n",
            ca_file.display().to_string()
        ),
    )
    .unwrap();
    let appliance = appliance::write_appliance(dir.path(), "venue.toml", &Setup::default());
    appliance::start_session_resolving(sim, dir, &appliance, clock, Some(resolver))
}

/// The reason codes of the connection-wide status events.
fn status_reasons(events: &[Event]) -> Vec<(VenueState, u32)> {
    events
        .iter()
        .filter(|event| event.header.instrument_id == ALL_INSTRUMENTS)
        .filter_map(|event| match event.body() {
            Body::VenueStatus(status) => Some((status.state(), status.reason_code)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_host_that_does_not_resolve_at_first_is_retried_until_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::calibrate();
    let sim = named_sim(dir.path(), "sim", clock, Faults::default());
    let resolver = Scripted::new(3, vec![sim.addr()]);
    let ca = sim.ca_pem_path().to_owned();
    let mut pair = start_resolving(dir, sim, &[&ca], clock, resolver.clone());
    pair.run_until(RECOVERY_BOUND, "live once the host resolves", |pair| {
        pair.session.venues.all_live()
    });
    let before = pair.decoded();
    pair.run_until(Duration::from_secs(10), "data", |pair| {
        pair.decoded() > before + 50
    });
    assert_eq!(transitions(&pair, Reason::DnsFailed), 3);
    let counters = pair.session.venues.counters(0);
    assert_eq!(
        counters.attempts, 4,
        "three attempts ended in the lookup, the fourth connected"
    );
    assert_eq!(
        transitions(&pair, Reason::BackoffElapsed),
        3,
        "each failed lookup backed off before the next attempt"
    );
    assert_eq!(resolver.lookups(), 4, "one lookup per attempt");
    assert!(resolver
        .asked
        .lock()
        .unwrap()
        .iter()
        .all(|host| host == "localhost"));
    assert_eq!(pair.sim.stats().connections.len(), 1);
    let events = pair.finish();
    assert_once_and_in_order(&events);
    let reasons = status_reasons(&events);
    let dns_failed = (VenueState::Disconnected, Reason::DnsFailed as u32);
    assert_eq!(
        reasons
            .iter()
            .filter(|&&status| status == dns_failed)
            .count(),
        3,
        "the strategy heard why the venue stayed away: {reasons:?}"
    );
    assert_eq!(
        reasons.get(3),
        Some(&(VenueState::Live, Reason::Subscribed as u32)),
        "{reasons:?}"
    );
}

#[test]
fn a_reconnect_follows_the_host_to_its_new_address() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::calibrate();
    let old = named_sim(
        dir.path(),
        "old",
        clock,
        Faults {
            reset_after: Some(300),
            ..Faults::default()
        },
    );
    let new = named_sim(dir.path(), "new", clock, Faults::default());
    assert_ne!(old.addr(), new.addr());
    // The first lookup answers the old simulator, every later one the new.
    let resolver = Scripted::new(0, vec![old.addr(), new.addr()]);
    let cas = [old.ca_pem_path().to_owned(), new.ca_pem_path().to_owned()];
    let mut pair = start_resolving(dir, old, &[&cas[0], &cas[1]], clock, resolver.clone());
    end_then_recover(&mut pair, "the reset");
    let before = pair.decoded();
    pair.run_until(
        Duration::from_secs(10),
        "data from the new address",
        |pair| pair.decoded() > before + 100,
    );
    assert_eq!(transitions(&pair, Reason::ConnectionLost), 1);
    assert_eq!(transitions(&pair, Reason::Subscribed), 2);
    assert_eq!(
        resolver.lookups(),
        2,
        "the reconnect looked the host up again"
    );
    assert_eq!(
        pair.sim.stats().connections.len(),
        1,
        "the old address saw only the first connection"
    );
    let moved = new.stats().connections;
    assert_eq!(moved.len(), 1, "the reconnect went to the new address");
    assert!(moved[0].messages_sent > 0, "{moved:?}");
    let events = pair.finish();
    assert_once_and_in_order(&events);
    assert!(events.iter().any(
        |event| matches!(event.body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect)
    ));
}

/// How the measurement's control loop waits between ticks.
#[derive(Clone, Copy, Debug)]
enum ControlLoop {
    /// As `tickwire run` did before issue 24: sleep the 20 ms tick, then tick.
    TickOnly,
    /// As it does now: `Session::wait` (woken by statuses, replies and timers), then tick.
    Woken,
}

/// The data outage of each reconnect: from the last market event before each reconnect gap to
/// the first one after it (receive times), in ms.
fn outages_ms(events: &[Event]) -> Vec<f64> {
    let market = |event: &Event| matches!(event.body(), Body::Quote(_) | Body::Trade(_));
    let mut out = Vec::new();
    for (index, event) in events.iter().enumerate() {
        if !matches!(event.body(), Body::Gap(gap) if gap.reason() == GapReason::Reconnect) {
            continue;
        }
        let before = events[..index].iter().rev().find(|event| market(event));
        let after = events[index + 1..].iter().find(|event| market(event));
        if let (Some(before), Some(after)) = (before, after) {
            let ns = after
                .header
                .recv_ts_ns
                .saturating_sub(before.header.recv_ts_ns);
            out.push(ns as f64 / 1e6);
        }
    }
    out
}

/// Recovery after a clean close and after a reset on loopback, with the control loop as it was
/// (a 20 ms tick) and as it is (woken by what happens), with a 1 ms backoff so the figure is the
/// control loop's and the set-up's. Prints the figures; asserts only that the reconnects
/// happened. Run with
/// `cargo test --release --test tickwire lifecycle::recovery_figures -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints recovery figures"]
fn recovery_figures() {
    const RECONNECTS: u32 = 8;
    let fast = "[reconnect]\ninitial_delay_ms = 1\nmax_delay_ms = 1\nfactor = 1.5\n\
                reset_after_live_ms = 60000\nmax_attempts_per_minute = 600\n\
                [lifecycle]\nhandshake_timeout_ms = 1000\nack_timeout_ms = 1000\n\
                close_timeout_ms = 500\nrotate_after_ms = 0\n";
    // The network thread blocks in the kernel for up to `block_timeout_us` (1 ms in the shipped
    // config) and a command from the control thread (open, subscribe) waits that out; the last
    // run shows what is left with a shorter block.
    let runs = [
        (ControlLoop::TickOnly, 1_000),
        (ControlLoop::Woken, 1_000),
        (ControlLoop::Woken, 100),
    ];
    for fault in ["close", "reset"] {
        for (control, block_timeout_us) in runs {
            let faults = Faults {
                close_after: (fault == "close").then_some(400),
                reset_after: (fault == "reset").then_some(400),
                fault_connections: RECONNECTS,
                ..Faults::default()
            };
            let mut pair = start(
                synthetic(5_000.0),
                move |options| options.faults = faults,
                Setup {
                    channels: vec!["bookTicker"],
                    venue_extra: fast.to_owned(),
                    block_timeout_us,
                    ..Setup::default()
                },
            );
            let started = Instant::now();
            while transitions(&pair, Reason::Subscribed) < u64::from(RECONNECTS) + 1
                || !pair.session.venues.all_live()
            {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{fault}: the reconnects did not happen"
                );
                match control {
                    ControlLoop::TickOnly => std::thread::sleep(Duration::from_millis(20)),
                    ControlLoop::Woken => {
                        pair.session
                            .wait(Duration::from_millis(20), None)
                            .expect("control wait");
                    }
                }
                pair.session.tick().expect("control tick");
            }
            // Some data on the last connection, so its outage is measured too.
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until {
                pair.session
                    .wait(Duration::from_millis(20), None)
                    .expect("control wait");
                pair.session.tick().expect("control tick");
            }
            let events = pair.finish();
            let mut outages = outages_ms(&events);
            assert!(!outages.is_empty(), "{fault}: no reconnect measured");
            let each: Vec<String> = outages.iter().map(|ms| format!("{ms:.1}")).collect();
            println!("  each, in order (ms): {}", each.join(" "));
            outages.sort_by(f64::total_cmp);
            let median = outages[outages.len() / 2];
            let max = outages[outages.len() - 1];
            let min = outages[0];
            println!(
                "recovery after a {fault}, control loop {control:?}, net block {block_timeout_us} \
                 us: {} reconnects, data outage min {min:.2} ms, median {median:.2} ms, max \
                 {max:.2} ms",
                outages.len()
            );
        }
    }
}
