//! The appliance against the Binance Spot SBE simulator, on loopback: a `kind =
//! "binance-spot-sbe"` venue file, the API key in `X-MBX-APIKEY`, SBE binary frames (made by
//! sbe-tool's generated encoder in the simulator) decoded in place into quotes, trades and a book
//! synced from SBE depth diffs and `/api/v3/depth`; a refused key backs off instead of looping.

use crate::support::appliance::{quote_list, start_session, write_appliance, Pair, Setup};

use std::time::Duration;
use tickwire::clock::Clock;
use tickwire::event::{flags, Body};
use tickwire_sim::sbe::SbeSource;
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::spot::SpotSource;
use tickwire_sim::{Pace, Sim, SimOptions};

/// The key the simulator takes.
const KEY: &str = "tickwire-test-sbe-key-0123456789";

/// An SBE simulator taking [`KEY`] and the appliance on `channels` of BTCUSDT and ETHUSDT, with
/// the key from the environment variable `variable` (set to `key`).
fn start_sbe(variable: &str, key: &str, channels: &[&str], venue_extra: &str) -> Pair {
    std::env::set_var(variable, key);
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::calibrate();
    let mut options = SimOptions::binance_spot_sbe(dir.path().join("sim"));
    options.clock = clock;
    options.pace = Pace::Recorded { speed: 1.0 };
    options.api_key = Some(KEY.to_owned());
    let source = SyntheticSource::new(SyntheticConfig {
        symbols: 2,
        rate_per_sec: 2000.0,
        channels: ["bookTicker", "depth@100ms", "trade"]
            .map(str::to_owned)
            .to_vec(),
        ..SyntheticConfig::default()
    })
    .unwrap();
    let source = SbeSource::new(Box::new(SpotSource::new(Box::new(source))));
    let sim = Sim::start(options, Box::new(source)).expect("the simulator starts");
    let port = sim.addr().port();
    std::fs::write(
        dir.path().join("venue.toml"),
        format!(
            "name = \"sbe\"\nkind = \"binance-spot-sbe\"\n\
             url = \"wss://127.0.0.1:{port}/stream\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [\"BTCUSDT\", \"ETHUSDT\"]\nchannels = [{}]\n\
             [tls]\nextra_ca_file = {:?}\n[credentials]\napi_key_env = \"{variable}\"\n{venue_extra}",
            quote_list(channels),
            sim.ca_pem_path().display().to_string(),
        ),
    )
    .unwrap();
    let appliance = write_appliance(dir.path(), "venue.toml", &Setup::default());
    start_session(sim, dir, &appliance, clock)
}

#[test]
fn sbe_frames_reach_the_strategy_with_books_synced_from_sbe_diffs() {
    let mut pair = start_sbe(
        "TICKWIRE_TEST_SBE_KEY",
        KEY,
        &["bestBidAsk", "depth", "trade", "depth20"],
        "",
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
    assert_eq!(counters.malformed.get(), 0, "every SBE frame decodes");
    assert_eq!(
        counters.book_gaps.get(),
        0,
        "the SBE U/u chain is continuous"
    );
    assert_eq!(counters.message("error"), 0, "every SUBSCRIBE accepted");
    assert!(counters.message("bestBidAsk") > 0);
    assert!(counters.message("depthUpdate") > 0);
    assert!(counters.message("partialDepth") > 0, "depth20 snapshots");
    let stats = pair.sim.stats();
    assert_eq!(stats.api_key_refused, 0);
    assert!(stats.rest_requests >= 2, "each book from /api/v3/depth");
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
            .all(|quote| quote.header.flags & flags::NO_EXCHANGE_TS == 0
                && quote.header.exchange_ts_ns > 1_600_000_000_000_000_000),
        "bestBidAsk carries its event time (microseconds, as ns)"
    );
    let snapshots = events
        .iter()
        .filter(|event| matches!(event.body(), Body::SnapshotEnd(_)))
        .count();
    assert_eq!(snapshots, 2);
}

/// A key the venue refuses (HTTP 401) is a failed handshake with the venue's status in it, and
/// the connection backs off: a handful of attempts in two seconds, not a tight loop.
#[test]
fn a_refused_key_backs_off_with_the_venues_status() {
    let mut pair = start_sbe(
        "TICKWIRE_TEST_SBE_WRONG_KEY",
        "not-the-key",
        &["bestBidAsk"],
        "[reconnect]\ninitial_delay_ms = 200\nmax_delay_ms = 1000\nfactor = 2.0\n",
    );
    pair.run_until(Duration::from_secs(10), "two refusals", |pair| {
        pair.sim.stats().api_key_refused >= 2
    });
    std::thread::sleep(Duration::from_secs(2));
    pair.run_until(Duration::from_secs(1), "still running", |_| true);
    let refused = pair.sim.stats().api_key_refused;
    assert!(
        refused <= 12,
        "{refused} refused upgrades in about 2 s: the attempts must back off"
    );
    let ends = &pair.session.venues.ends;
    let error = ends
        .iter()
        .find_map(|end| end.error.clone())
        .expect("a failed attempt");
    assert!(error.contains("401"), "{error}");
    assert_eq!(pair.counters().market_messages(), 0);
}
