//! A three-server NATS cluster across network namespaces: the servers in three, the bridge (the
//! appliance's side) in a fourth, two consumers in two more, all joined by veth pairs to a Linux
//! bridge in a hub namespace. The server the bridge is connected to is killed mid-stream: both
//! consumers go on, each reports exactly the events it lost, none comes twice.
//!
//! The test makes every namespace, link and process itself, with names unique to this run, and
//! removes them all when it ends, failed or not (`Topology`'s `Drop`). It needs root and `ip`
//! (iproute2); without them it skips with a printed reason, unless `TICKWIRE_REQUIRE_NATS=1`.
//! The consumers are `NatsClient`s on threads of this test that entered their namespace
//! (`setns`), so their network threads live there too.

use super::stream::{Feed, INSTRUMENTS};
use super::{bus_dir, bus_writer, nats_server_binary, PATIENCE};
use crate::support::netns::{self, get, in_namespace, Topology, SUBNET};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::event::Body;
use tickwire_client::Next;
use tickwire_nats::bridge::parse_servers;
use tickwire_nats::{NatsClient, NatsOptions};

const SERVERS: [u8; 3] = [11, 12, 13];
const APPLIANCE: u8 = 20;
const CONSUMERS: [u8; 2] = [31, 32];

fn url(host: u8) -> String {
    format!("nats://{SUBNET}.{host}:4222")
}

/// What a consumer thread saw, published as it goes (the last trade id + 1 of each
/// instrument) and in full at the end.
struct ConsumerView {
    next: [AtomicU64; INSTRUMENTS as usize + 1],
    stop: AtomicBool,
}

#[derive(Debug, Default)]
struct Tally {
    positions: Vec<Vec<u64>>,
    missed: u64,
    duplicates: u64,
}

fn consume(servers: String, view: Arc<ConsumerView>) -> Tally {
    let mut options = NatsOptions::new(
        parse_servers(&servers).unwrap(),
        vec!["tickwire.*.*.*.trade".into()],
    );
    options.max_reconnect_delay = Duration::from_millis(200);
    let mut client = NatsClient::connect(options).unwrap();
    let mut tally = Tally {
        positions: vec![Vec::new(); INSTRUMENTS as usize + 1],
        ..Tally::default()
    };
    let started = Instant::now();
    while !view.stop.load(Ordering::Relaxed) && started.elapsed() < PATIENCE * 3 {
        match client
            .wait(Duration::from_millis(50))
            .expect("the client runs")
        {
            Next::Events(events) => {
                for event in events {
                    let Body::Trade(trade) = event.body() else {
                        continue;
                    };
                    let instrument = event.header.instrument_id as usize;
                    tally.positions[instrument].push(trade.trade_id);
                    view.next[instrument].store(trade.trade_id + 1, Ordering::Relaxed);
                }
            }
            Next::Overrun { missed, .. } => tally.missed += missed,
            Next::NewEpoch { .. } | Next::Closed | Next::Removed | Next::Idle => {}
        }
    }
    tally.duplicates = client.counters().duplicates;
    tally
}

/// Every instrument's trades strictly increasing, and received + reported missed = every trade
/// from the first seen to the last.
fn assert_exact(label: &str, tally: &Tally) {
    let (mut span, mut received) = (0, 0);
    for (instrument, positions) in tally.positions.iter().enumerate().skip(1) {
        assert!(
            !positions.is_empty(),
            "{label}: nothing of instrument {instrument}"
        );
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "{label}: instrument {instrument} repeated or reordered a trade"
        );
        span += positions.last().unwrap() - positions[0] + 1;
        received += positions.len() as u64;
    }
    assert_eq!(
        received + tally.missed,
        span,
        "{label}: received {received} + missed {} != sent {span}",
        tally.missed
    );
    assert_eq!(tally.duplicates, 0, "{label}");
}

fn can_make_namespaces() -> bool {
    if netns::available() {
        return true;
    }
    let required = std::env::var("TICKWIRE_REQUIRE_NATS").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_NATS=1 but no root or no ip (iproute2)"
    );
    crate::support::skip::skipped("network namespaces need root and ip (iproute2)");
    false
}

#[test]
fn a_cluster_across_namespaces_loses_a_server_and_its_consumers_go_on_exactly() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    if !can_make_namespaces() {
        return;
    }
    let hosts: Vec<u8> = SERVERS
        .iter()
        .chain([&APPLIANCE])
        .chain(&CONSUMERS)
        .copied()
        .collect();
    let mut topology = Topology::build(&hosts);
    netns::start_cluster(&mut topology, &binary, SERVERS);

    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 20),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let all: Vec<String> = SERVERS.iter().map(|host| url(*host)).collect();
    let bridge_args: Vec<String> = [
        "bridge".into(),
        "nats".into(),
        "--bus".into(),
        path.display().to_string(),
        "--url".into(),
        all.join(","),
        "--appliance".into(),
        "site-ns".into(),
        "--stats-interval".into(),
        "0".into(),
    ]
    .into();
    topology.spawn(
        APPLIANCE,
        "bridge",
        Path::new(env!("CARGO_BIN_EXE_tickwire")),
        &bridge_args,
    );
    // Each consumer is given the servers in its own order.
    let views: Vec<Arc<ConsumerView>> = CONSUMERS
        .iter()
        .map(|_| {
            Arc::new(ConsumerView {
                next: Default::default(),
                stop: AtomicBool::new(false),
            })
        })
        .collect();
    let consumers: Vec<_> = CONSUMERS
        .iter()
        .zip(&views)
        .enumerate()
        .map(|(index, (host, view))| {
            let mut order = all.clone();
            order.rotate_left(index + 1);
            let view = Arc::clone(view);
            in_namespace(&topology.node(*host), move || {
                consume(order.join(","), view)
            })
        })
        .collect();
    let caught_up = |feed: &Feed| {
        views.iter().all(|view| {
            (1..=INSTRUMENTS as usize).all(|i| view.next[i].load(Ordering::Relaxed) >= feed.next[i])
        })
    };
    // Until both consumers have trades of every instrument.
    let started = Instant::now();
    while !views
        .iter()
        .all(|view| (1..=INSTRUMENTS as usize).all(|i| view.next[i].load(Ordering::Relaxed) > 0))
    {
        assert!(
            started.elapsed() < PATIENCE,
            "no trades reached both consumers"
        );
        feed.write(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        feed.write(200);
        std::thread::sleep(Duration::from_millis(10));
    }
    // Kill the server the bridge is connected to.
    let bridge_server = SERVERS
        .into_iter()
        .find(|host| get(&topology.node(*host), *host, 8222, "/connz").contains("tickwire-bridge"))
        .expect("one server has the bridge's connection");
    topology.kill(&format!("server{bridge_server}"));
    for _ in 0..100 {
        feed.write(200);
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    while !caught_up(&feed) {
        assert!(
            started.elapsed() < PATIENCE,
            "the consumers never caught up"
        );
        feed.write(1);
        std::thread::sleep(Duration::from_millis(20));
    }
    for view in &views {
        view.stop.store(true, Ordering::Relaxed);
    }
    for (consumer, host) in consumers.into_iter().zip(CONSUMERS) {
        let tally = consumer.join().expect("the consumer thread");
        eprintln!(
            "consumer {host}: {} trades received, {} reported missed",
            tally.positions.iter().map(Vec::len).sum::<usize>(),
            tally.missed
        );
        assert_exact(&format!("consumer {host}"), &tally);
    }
}
