//! The appliance against the Binance Spot simulator, on loopback: a `kind = "binance-spot"` venue
//! file, Spot's message shapes (bookTicker without times, depth without `pu`), books from
//! `/api/v3/depth`, and the real Spot capture replayed to the strategy whole and in order.

use crate::support::appliance::{self, quote_list, start_session, write_appliance, Pair, Setup};
use crate::support::common;

use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{flags, Body};
use tickwire_sim::source::{CaptureSource, Source, SyntheticConfig, SyntheticSource};
use tickwire_sim::spot::SpotSource;
use tickwire_sim::{Pace, Sim, SimOptions};

/// A Spot simulator on `source` and the appliance subscribed to `channels` of BTCUSDT and
/// ETHUSDT through a `binance-spot` venue file.
fn start_spot(source: Box<dyn Source>, pace: Pace, symbols: &[&str], channels: &[&str]) -> Pair {
    start_spot_with(source, |options| options.pace = pace, symbols, channels)
}

/// [`start_spot`] with the simulator's options set by `tweak`.
fn start_spot_with(
    source: Box<dyn Source>,
    tweak: impl FnOnce(&mut SimOptions),
    symbols: &[&str],
    channels: &[&str],
) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::calibrate();
    let mut options = SimOptions::binance_spot(dir.path().join("sim"));
    options.clock = clock;
    tweak(&mut options);
    let sim = Sim::start(options, Box::new(SpotSource::new(source))).expect("the simulator starts");
    let port = sim.addr().port();
    std::fs::write(
        dir.path().join("venue.toml"),
        format!(
            "name = \"spot\"\nkind = \"binance-spot\"\n\
             url = \"wss://127.0.0.1:{port}/stream\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n",
            quote_list(symbols),
            quote_list(channels),
            sim.ca_pem_path().display().to_string(),
        ),
    )
    .unwrap();
    let appliance = write_appliance(dir.path(), "venue.toml", &Setup::default());
    start_session(sim, dir, &appliance, clock)
}

#[test]
fn a_synthetic_spot_market_reaches_the_strategy_with_synced_books() {
    let source = Box::new(
        SyntheticSource::new(SyntheticConfig {
            symbols: 2,
            rate_per_sec: 2000.0,
            channels: ["bookTicker", "depth@100ms", "trade"]
                .map(str::to_owned)
                .to_vec(),
            ..SyntheticConfig::default()
        })
        .unwrap(),
    );
    let mut pair = start_spot(
        source,
        Pace::Recorded { speed: 1.0 },
        &["BTCUSDT", "ETHUSDT"],
        &["bookTicker", "depth@100ms", "trade"],
    );
    pair.run_until(
        Duration::from_secs(30),
        "both books live and trades",
        |pair| {
            let counters = pair.counters();
            counters.book_syncs.get() >= 2 && counters.message("trade") >= 20
        },
    );
    let counters = pair.counters();
    assert_eq!(counters.malformed.get(), 0);
    assert_eq!(counters.book_gaps.get(), 0, "the U/u chain is continuous");
    assert_eq!(counters.message("error"), 0, "every SUBSCRIBE accepted");
    assert!(counters.message("bookTicker") > 0);
    assert!(counters.message("depthUpdate") > 0);
    // Two books, each from one REST snapshot at /api/v3/depth.
    assert!(pair.sim.stats().rest_requests >= 2);
    let events = pair.finish();
    let quotes: Vec<_> = events
        .iter()
        .filter(|event| {
            matches!(event.body(), Body::Quote(_)) && event.header.flags & flags::DERIVED == 0
        })
        .collect();
    assert!(!quotes.is_empty());
    assert!(
        quotes
            .iter()
            .all(|quote| quote.header.flags & flags::NO_EXCHANGE_TS != 0),
        "Spot's bookTicker carries no time"
    );
    let snapshots = events
        .iter()
        .filter(|event| matches!(event.body(), Body::SnapshotEnd(_)))
        .count();
    assert_eq!(snapshots, 2);
}

/// The Spot simulator refuses what Spot refuses: a USD-M depth path, a USD-M stream name.
#[test]
fn the_spot_simulator_serves_api_v3_depth_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = appliance::synthetic(100.0);
    let sim = Sim::start(
        SimOptions::binance_spot(dir.path().join("sim")),
        Box::new(SpotSource::new(source)),
    )
    .expect("the simulator starts");
    let client = tickwire::venue::rest::client_for(
        &tickwire::config::Endpoint::parse(&sim.rest_url()).unwrap(),
        &tickwire::config::TlsConfig {
            extra_ca_file: Some(sim.ca_pem_path().to_path_buf()),
            sni: None,
        },
        Duration::from_secs(5),
    )
    .unwrap();
    let wrong = client.get("/fapi/v1/depth?symbol=BTCUSDT&limit=5").unwrap();
    assert_eq!(wrong.status, 404);
    let bad_limit = client.get("/api/v3/depth?symbol=BTCUSDT&limit=0").unwrap();
    assert_eq!(bad_limit.status, 400);
    let snapshot = client.get("/api/v3/depth?symbol=BTCUSDT&limit=5").unwrap();
    assert_eq!(snapshot.status, 200);
    let parsed = tickwire::venue::binance_spot::protocol::parse_depth(&snapshot.body).unwrap();
    assert_eq!(parsed.bids.len(), 5);
    let body: serde_json::Value = serde_json::from_slice(&snapshot.body).unwrap();
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert!(
        body.get("E").is_none() && body.get("T").is_none(),
        "no times on Spot: {keys:?}"
    );
}

/// The real Spot capture through the Spot simulator at ten times its pace: every bookTicker,
/// trade and diff decoded, one book sync and no gap.
#[test]
fn the_spot_capture_at_10x_reaches_the_strategy_whole_and_in_order() {
    let Some(path) = common::shared_data("binance-spot/btcusdt_20240808.gz") else {
        return;
    };
    let source = Box::new(CaptureSource::open(&path).unwrap());
    let mut pair = start_spot(
        source,
        Pace::Recorded { speed: 10.0 },
        &["BTCUSDT"],
        &["bookTicker", "depth@100ms", "trade"],
    );
    // 28040 bookTickers, 9757 trades, 3451 diffs (tests/binance_spot_decode.rs).
    let stream_messages = 28040 + 9757 + 3451;
    pair.run_until(
        Duration::from_secs(120),
        "every capture message decoded",
        |pair| pair.sim.stats().source_done && pair.decoded() >= stream_messages,
    );
    pair.run_until(Duration::from_secs(10), "the strategy drained", |pair| {
        pair.count(|event| matches!(event.body(), Body::Trade(_))) == 9757
    });
    let counters = pair.counters();
    assert_eq!(counters.message("bookTicker"), 28040);
    assert_eq!(counters.message("trade"), 9757);
    assert_eq!(counters.message("depthUpdate"), 3451);
    assert_eq!(counters.malformed.get(), 0);
    assert_eq!(
        counters.book_gaps.get(),
        0,
        "the capture's U/u chain is continuous"
    );
    assert_eq!(counters.book_syncs.get(), 1);
    let events = pair.finish();
    let quotes: Vec<u64> = events
        .iter()
        .filter(|event| {
            matches!(event.body(), Body::Quote(_)) && event.header.flags & flags::DERIVED == 0
        })
        .map(|event| event.header.venue_seq)
        .collect();
    assert_eq!(quotes.len(), 28040);
    assert!(quotes.windows(2).all(|pair| pair[0] < pair[1]), "in order");
}

/// Spot's server pings (every 20 s on the venue, every 300 ms here) are answered with pongs, and
/// the pongs stay inside Spot's 5 incoming messages a second: the one connection stays open, its
/// pong deadline (1 s here) always met.
#[test]
fn server_pings_are_answered_within_spot_limits() {
    let mut pair = start_spot_with(
        appliance::synthetic(200.0),
        |options| {
            options.ping_interval = Duration::from_millis(300);
            options.pong_timeout = Duration::from_secs(1);
        },
        &["BTCUSDT"],
        &["bookTicker", "aggTrade"],
    );
    pair.run_until(Duration::from_secs(20), "quotes flowing", |pair| {
        pair.counters().message("bookTicker") > 10
    });
    pair.run_for(Duration::from_secs(3));
    let stats = pair.sim.stats();
    assert_eq!(stats.websocket_connections, 1, "{stats:?}");
    let connection = &stats.connections[0];
    assert!(connection.open, "{connection:?}");
    assert_eq!(connection.close_reason, None);
    assert_eq!(pair.counters().malformed.get(), 0);
    pair.finish();
}
