//! The metrics endpoint scraped over HTTP during a simulator session: `/metrics` in the
//! Prometheus text format with the venue's counters, lifecycle transitions and latency, and
//! `/healthz` answering 200 while the venue is live, 503 with the reason when it is not.

use crate::support::appliance;

use appliance::{start, synthetic, Pair, Setup};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request; the control loop keeps ticking while the answer is awaited, as it does in `run`.
fn get(pair: &mut Pair, path: &str) -> (u16, String) {
    let addr = pair.session.metrics_addr().expect("the endpoint listens");
    let mut stream = TcpStream::connect(addr).expect("connect to the endpoint");
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let mut response = Vec::new();
    pair.run_until(Duration::from_secs(10), "the endpoint's answer", |_| {
        let mut buf = [0u8; 65536];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(count) => response.extend_from_slice(&buf[..count]),
                Err(_) => return false,
            }
        }
    });
    let text = String::from_utf8(response).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

/// `name{labels} value` lines, keyed by `name{labels}`.
fn samples(body: &str) -> HashMap<String, f64> {
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (key, value) = line.rsplit_once(' ').expect("a sample line");
            (key.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

fn metrics_setup(extra: Setup) -> Setup {
    Setup {
        appliance_extra: "[metrics]\nlisten = \"127.0.0.1:0\"\nreport_interval_ms = 1000\n"
            .to_owned(),
        ..extra
    }
}

#[test]
fn metrics_and_health_during_a_session() {
    let mut pair = start(synthetic(500.0), |_| {}, metrics_setup(Setup::default()));
    pair.run_until(Duration::from_secs(20), "live with a synced book", |pair| {
        pair.session.venues.all_live()
            && pair.counters().book_syncs.get() >= 1
            && pair.decoded() > 200
    });
    let (status, body) = get(&mut pair, "/metrics");
    assert_eq!(status, 200, "{body}");
    let samples = samples(&body);
    let value = |key: &str| {
        *samples
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in:\n{body}"))
    };
    assert!(value("tickwire_venue_messages_total{venue=\"sim\",kind=\"bookTicker\"}") > 0.0);
    assert!(value("tickwire_venue_received_bytes_total{venue=\"sim\"}") > 0.0);
    assert_eq!(value("tickwire_venue_live{venue=\"sim\"}"), 1.0);
    assert_eq!(
        value("tickwire_connection_transitions_total{venue=\"sim\",reason=\"subscribed\"}"),
        1.0
    );
    assert_eq!(
        value("tickwire_connection_attempts_total{venue=\"sim\"}"),
        1.0
    );
    assert_eq!(
        value("tickwire_venue_book_events_total{venue=\"sim\",event=\"sync\"}"),
        1.0
    );
    assert!(
        value("tickwire_stream_messages_total{venue=\"sim\",stream=\"btcusdt@bookTicker\"}") > 0.0
    );
    assert_eq!(
        value("tickwire_stream_stale{venue=\"sim\",stream=\"btcusdt@bookTicker\"}"),
        0.0
    );
    assert_eq!(value("tickwire_ring_drops_total{ring=\"frame\"}"), 0.0);
    // Messages flowed through both rings, so each consumer found at least one waiting.
    assert!(value("tickwire_ring_high_water{ring=\"frame\"}") > 0.0);
    assert!(value("tickwire_ring_high_water{ring=\"event\"}") >= 1.0);
    for stage in [
        "receive_to_decoded",
        "decoded_to_strategy",
        "receive_to_strategy",
    ] {
        let count = value(&format!(
            "tickwire_latency_seconds_count{{stage=\"{stage}\"}}"
        ));
        assert!(count > 0.0, "{stage}");
        let p50 = value(&format!(
            "tickwire_latency_seconds{{stage=\"{stage}\",quantile=\"0.5\"}}"
        ));
        let p99 = value(&format!(
            "tickwire_latency_seconds{{stage=\"{stage}\",quantile=\"0.99\"}}"
        ));
        assert!(p50 > 0.0 && p99 >= p50, "{stage}: {p50} {p99}");
    }
    assert!(value("tickwire_resident_memory_bytes") > 0.0);
    // Every sample belongs to a family announced with HELP and TYPE.
    for key in samples.keys() {
        let name = key.split(['{', ' ']).next().unwrap();
        let family = name
            .strip_suffix("_sum")
            .or_else(|| name.strip_suffix("_count"))
            .unwrap_or(name);
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "{name} has no TYPE line"
        );
    }
    let (status, body) = get(&mut pair, "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, _) = get(&mut pair, "/nothing");
    assert_eq!(status, 404);
    pair.finish();
}

#[test]
fn health_says_why_when_the_venue_is_down() {
    let closed_port = appliance::free_port();
    let mut pair = start(
        synthetic(100.0),
        |_| {},
        metrics_setup(Setup {
            port: Some(closed_port),
            channels: vec!["bookTicker"],
            venue_extra: "[reconnect]\ninitial_delay_ms = 50\nmax_delay_ms = 200\n".to_owned(),
            ..Setup::default()
        }),
    );
    pair.run_until(Duration::from_secs(10), "a refused attempt", |pair| {
        pair.session.venues.counters(0).attempts >= 2
    });
    let (status, body) = get(&mut pair, "/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("venue sim connection 0:"), "{body}");
    assert!(body.contains("failures in a row"), "{body}");
    let (_, metrics) = get(&mut pair, "/metrics");
    let samples = samples(&metrics);
    assert_eq!(samples["tickwire_venue_live{venue=\"sim\"}"], 0.0);
    assert!(
        samples["tickwire_connection_transitions_total{venue=\"sim\",reason=\"connect-failed\"}"]
            >= 1.0
    );
    pair.finish();
}
