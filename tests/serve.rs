//! The serving plane (`tickwire::serve`) during simulator sessions: `/metrics` in the Prometheus
//! text format with the venue's counters, lifecycle transitions and latency histograms;
//! `/healthz` and `/readyz`; the JSON API with exact decimals; the WebSocket stream; the limits
//! (request head size, the slowloris cut-off, the bearer token).

use crate::support::appliance;

use appliance::{start, synthetic, Pair, Setup};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A response: status, head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends `request` as it is and reads the answer to the end (the requests say
/// `Connection: close`), within 10 s.
fn exchange(addr: SocketAddr, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect to the serving plane");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8(response).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status code in {text:?}"));
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// One GET, answered by the serving thread while the control loop keeps ticking (it publishes
/// what the serving thread shows).
fn get_with(pair: &mut Pair, path: &str, extra_headers: &str) -> Answer {
    let addr = pair.session.http_addr().expect("the serving plane listens");
    // The listener's own address: any other name is refused (421, `serve::hosts`).
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra_headers}\r\n");
    let request = std::thread::spawn(move || exchange(addr, request.as_bytes()));
    pair.run_until(
        Duration::from_secs(15),
        "the serving plane's answer",
        |_| request.is_finished(),
    );
    request.join().expect("the request thread")
}

fn get(pair: &mut Pair, path: &str) -> (u16, String) {
    let answer = get_with(pair, path, "");
    (answer.status, answer.body)
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|error| panic!("JSON ({error}): {body}"))
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

const HTTP_TABLE: &str = "[metrics]\nreport_interval_ms = 1000\n[http]\nlisten = \"127.0.0.1:0\"\n";

fn metrics_setup(extra: Setup) -> Setup {
    Setup {
        appliance_extra: format!("{HTTP_TABLE}{}", extra.appliance_extra),
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
        // Cumulative buckets: never decreasing, the last (+Inf) equal to the count, and the
        // bounds the same on every appliance.
        let mut previous = 0.0;
        for bound_ns in tickwire::control::LATENCY_BUCKETS_NS {
            let bucket = value(&format!(
                "tickwire_latency_seconds_bucket{{stage=\"{stage}\",le=\"{}\"}}",
                bound_ns as f64 / 1e9
            ));
            assert!(bucket >= previous, "{stage}: {bucket} after {previous}");
            previous = bucket;
        }
        let infinite = value(&format!(
            "tickwire_latency_seconds_bucket{{stage=\"{stage}\",le=\"+Inf\"}}"
        ));
        assert!(infinite >= previous && infinite == count, "{stage}");
        // A loopback hop takes more than a microsecond and less than ten seconds.
        assert!(previous > 0.0, "{stage}: every value above 10 s?");
        let first = value(&format!(
            "tickwire_latency_seconds_bucket{{stage=\"{stage}\",le=\"0.000001\"}}"
        ));
        assert!(first < count, "{stage}: every value under 1 µs?");
    }
    assert!(!body.contains("quantile="), "summaries are gone");
    assert!(body.contains("# TYPE tickwire_latency_seconds histogram"));
    assert!(value("tickwire_http_requests_total") >= 1.0);
    assert!(value("tickwire_resident_memory_bytes") > 0.0);
    // Every sample belongs to a family announced with HELP and TYPE.
    for key in samples.keys() {
        let name = key.split(['{', ' ']).next().unwrap();
        let family = name
            .strip_suffix("_bucket")
            .or_else(|| name.strip_suffix("_sum"))
            .or_else(|| name.strip_suffix("_count"))
            .unwrap_or(name);
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "{name} has no TYPE line"
        );
    }
    let (status, body) = get(&mut pair, "/healthz");
    assert_eq!((status, json(&body)["status"].as_str()), (200, Some("ok")));
    let (status, body) = get(&mut pair, "/readyz");
    assert_eq!(
        (status, json(&body)["ready"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let (status, body) = get(&mut pair, "/nothing");
    assert_eq!(status, 404);
    assert!(
        json(&body)["error"].as_str().unwrap().contains("/nothing"),
        "{body}"
    );
    pair.finish();
}

#[test]
fn readiness_says_why_when_the_venue_is_down() {
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
    let (status, body) = get(&mut pair, "/readyz");
    assert_eq!(status, 503, "{body}");
    let reasons = json(&body)["reasons"].to_string();
    assert!(reasons.contains("venue sim connection 0:"), "{body}");
    assert!(reasons.contains("failures in a row"), "{body}");
    // Alive all the same: the process and its control thread run.
    assert_eq!(get(&mut pair, "/healthz").0, 200);
    let (_, venues) = get(&mut pair, "/v1/venues");
    let venue = &json(&venues)["venues"][0];
    assert_eq!(venue["name"], "sim");
    assert_eq!(venue["live"], false);
    assert!(venue["attempts_total"].as_u64().unwrap() >= 2, "{venues}");
    let (_, metrics) = get(&mut pair, "/metrics");
    let samples = samples(&metrics);
    assert_eq!(samples["tickwire_venue_live{venue=\"sim\"}"], 0.0);
    assert!(
        samples["tickwire_connection_transitions_total{venue=\"sim\",reason=\"connect-failed\"}"]
            >= 1.0
    );
    pair.finish();
}

#[test]
fn http_core_pins_the_serving_thread() {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        crate::support::skip::skipped(format_args!(
            "[http] core = 1 needs 2 CPUs, this host has {cpus}"
        ));
        return;
    }
    let mut pair = start(
        synthetic(200.0),
        |_| {},
        metrics_setup(Setup {
            appliance_extra: "core = 1\n".to_owned(),
            ..Setup::default()
        }),
    );
    let (status, body) = get(&mut pair, "/healthz");
    assert_eq!(status, 200, "{body}");
    // Other tests' serving threads run unpinned in this process; none but this one is on core 1
    // alone.
    let pinned = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|c| c.trim() == "tickwire-http")
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter(|status| {
            status.lines().any(|line| {
                line.split_whitespace().collect::<Vec<_>>() == ["Cpus_allowed_list:", "1"]
            })
        })
        .count();
    assert_eq!(
        pinned, 1,
        "no tickwire-http thread is pinned to core 1 alone"
    );
    pair.finish();
}

/// The simulator's two symbols (BTCUSDT, ETHUSDT) with books, as `api_setup` configures them.
fn two(rate: f64) -> Box<dyn tickwire_sim::source::Source> {
    appliance::synthetic_two(
        rate,
        tickwire_sim::source::SyntheticConfig::default().book_levels,
    )
}

/// Two symbols with books, on the bus, and the serving plane reading it; `http_extra` goes
/// into `[http]`. The bus (and its lock file) is made in the directory returned, removed with
/// everything in it when the test drops it: nothing is left in /tmp.
fn api_setup(http_extra: &str) -> (Setup, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("tickwire-serve-test-")
        .tempdir()
        .unwrap();
    let bus = dir.path().join("tickwire.bus");
    (
        appliance::bus_setup(&bus, &format!("{HTTP_TABLE}{http_extra}")),
        dir,
    )
}

/// Issue 33: the serving tests' bus files went to /tmp and stayed there (about 14 MB over three
/// runs); the directory `api_setup` makes them in is removed with them.
#[test]
fn the_api_tests_leave_no_bus_file_behind() {
    let (setup, dir) = api_setup("");
    let path = dir.path().to_owned();
    let mut pair = start(two(500.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live", |pair| {
        pair.session.venues.all_live()
    });
    let bus = pair.session.bus().expect("the bus").path().to_owned();
    assert!(bus.starts_with(&path), "{}", bus.display());
    pair.finish();
    drop(dir);
    assert!(!bus.exists(), "{} is left behind", bus.display());
    assert!(!path.exists(), "{} is left behind", path.display());
}

/// Waits until `/v1/book/sim/BTCUSDT` is valid (the serving thread's reader asked for and
/// received a snapshot), returning it.
fn valid_book(pair: &mut Pair, query: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(pair, &format!("/v1/book/sim/BTCUSDT{query}"));
        if status == 200 {
            return json(&body);
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            Instant::now() < deadline,
            "the book never became valid: {body}"
        );
        pair.run_for(Duration::from_millis(100));
    }
}

/// A decimal string as an integer count of 1e-10 (exact for the API's decimals, which have at
/// most nine places, and for a mid, which has at most ten).
fn decimal_tenths(text: &str) -> i128 {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    assert!(fraction.len() <= 10, "{text}");
    let value = whole.parse::<i128>().unwrap() * 10_000_000_000
        + format!("{fraction:0<10}").parse::<i128>().unwrap();
    if negative {
        -value
    } else {
        value
    }
}

/// Issue 33: `/v1/quotes` gives each instrument's mid (exact) and last trade beside its top of
/// book, and `/v1/latency` the last windows' percentiles, which the status page plots at once.
#[test]
fn quotes_carry_the_mid_and_last_trade_and_latency_its_history() {
    let (setup, _bus_dir) = api_setup("");
    let mut pair = start(two(500.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live with a synced book", |pair| {
        pair.session.venues.all_live() && pair.counters().book_syncs.get() >= 1
    });
    valid_book(&mut pair, "");
    let deadline = Instant::now() + Duration::from_secs(20);
    let quote = loop {
        let (status, body) = get(&mut pair, "/v1/quotes");
        assert_eq!(status, 200, "{body}");
        let quotes = json(&body);
        let quote = quotes["quotes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|quote| quote["symbol"] == "BTCUSDT")
            .cloned()
            .unwrap();
        if !quote["last_trade"].is_null() && !quote["mid"].is_null() {
            break quote;
        }
        assert!(Instant::now() < deadline, "no mid or last trade: {quote}");
        pair.run_for(Duration::from_millis(200));
    };
    let (bid, ask, mid) = (
        decimal_tenths(quote["bid"]["price"].as_str().unwrap()),
        decimal_tenths(quote["ask"]["price"].as_str().unwrap()),
        decimal_tenths(quote["mid"].as_str().unwrap()),
    );
    assert_eq!(mid * 2, bid + ask, "{quote}");
    let trade = &quote["last_trade"];
    assert!(
        is_decimal(&trade["price"]) && is_decimal(&trade["size"]),
        "{quote}"
    );
    assert!(trade["recv_ts_ns"].as_u64().unwrap() > 0, "{quote}");

    // A few windows later, the history holds them in order, the last the current one.
    pair.run_for(Duration::from_secs(4));
    let (status, body) = get(&mut pair, "/v1/latency");
    assert_eq!(status, 200, "{body}");
    let latency = json(&body);
    let history = latency["history"].as_array().unwrap();
    assert!(history.len() >= 3, "{body}");
    let windows: Vec<u64> = history
        .iter()
        .map(|point| point["window"].as_u64().unwrap())
        .collect();
    assert!(
        windows.windows(2).all(|pair| pair[0] < pair[1]),
        "{windows:?}"
    );
    assert_eq!(
        history.last().unwrap()["stages"],
        latency["stages"],
        "{body}"
    );
    assert!(
        history.iter().any(|point| point["stages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|stage| stage["stage"] == "receive_to_strategy"
                && stage["count"].as_u64() > Some(0))),
        "{body}"
    );
    pair.finish();
}

/// A decimal string as the API writes them: digits, at most one point, no exponent.
fn is_decimal(value: &serde_json::Value) -> bool {
    value.as_str().is_some_and(|text| {
        !text.is_empty()
            && text
                .bytes()
                .all(|byte| byte.is_ascii_digit() || byte == b'.' || byte == b'-')
            && text.matches('.').count() <= 1
    })
}

#[test]
fn the_api_answers_books_quotes_venues_and_instruments() {
    let (setup, _bus_dir) = api_setup("");
    let mut pair = start(two(500.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live with a synced book", |pair| {
        pair.session.venues.all_live() && pair.counters().book_syncs.get() >= 1
    });
    let book = valid_book(&mut pair, "?depth=5");
    let (bids, asks) = (
        book["bids"].as_array().unwrap(),
        book["asks"].as_array().unwrap(),
    );
    assert!(
        !bids.is_empty() && bids.len() <= 5 && asks.len() <= 5,
        "{book}"
    );
    let price = |level: &serde_json::Value| -> f64 {
        assert!(
            is_decimal(&level["price"]) && is_decimal(&level["size"]),
            "{level}"
        );
        level["price"].as_str().unwrap().parse().unwrap()
    };
    // Best first on each side, and the book is not crossed.
    assert!(
        bids.windows(2)
            .all(|pair| price(&pair[0]) > price(&pair[1])),
        "{book}"
    );
    assert!(
        asks.windows(2)
            .all(|pair| price(&pair[0]) < price(&pair[1])),
        "{book}"
    );
    assert!(price(&bids[0]) < price(&asks[0]), "{book}");
    // The default depth and the largest.
    let deep = valid_book(&mut pair, "");
    assert!(deep["bids"].as_array().unwrap().len() <= 10);

    let (status, body) = get(&mut pair, "/v1/quotes");
    assert_eq!(status, 200, "{body}");
    let quotes = json(&body);
    let quotes = quotes["quotes"].as_array().unwrap();
    assert_eq!(quotes.len(), 2, "{body}");
    let btc = quotes
        .iter()
        .find(|quote| quote["symbol"] == "BTCUSDT")
        .unwrap();
    assert_eq!(btc["venue"], "sim");
    assert!(
        is_decimal(&btc["bid"]["price"]) && is_decimal(&btc["ask"]["size"]),
        "{btc}"
    );
    // Its book is valid (waited for above), so the top of book comes from it.
    assert_eq!(
        (&btc["book"], &btc["source"]),
        (&serde_json::json!("valid"), &serde_json::json!("book")),
        "{btc}"
    );
    for quote in quotes {
        let fields: Vec<&str> = quote
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let source = quote["source"].as_str();
        let mut expected = vec![
            "ask",
            "bid",
            "book",
            "last_trade",
            "mid",
            "source",
            "symbol",
            "venue",
        ];
        if source == Some("quote") {
            expected.insert(5, "recv_ts_ns");
        }
        assert_eq!(fields, expected, "{quote}");
        assert!(matches!(source, None | Some("book" | "quote")), "{quote}");
    }

    let (status, body) = get(&mut pair, "/v1/instruments");
    assert_eq!(status, 200);
    let instruments = json(&body);
    let symbols: Vec<&str> = instruments["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|instrument| instrument["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(symbols, ["BTCUSDT", "ETHUSDT"]);

    let (status, body) = get(&mut pair, "/v1/venues");
    assert_eq!(status, 200);
    let venues = json(&body);
    let venue = &venues["venues"][0];
    assert_eq!(
        (venue["name"].as_str(), venue["live"].as_bool()),
        (Some("sim"), Some(true))
    );
    assert_eq!(venue["connections"][0]["state"], "live", "{body}");
    assert!(venue["messages_total"].as_u64().unwrap() > 0, "{body}");
    assert!(!venue["streams"].as_array().unwrap().is_empty(), "{body}");

    let (status, body) = get(&mut pair, "/v1/latency");
    assert_eq!(status, 200);
    assert!(json(&body)["stages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|stage| stage["stage"] == "receive_to_strategy"));

    // Bad parameters and unknown names: 400 and 404, each with a JSON body that says why.
    for (path, status, says) in [
        ("/v1/book/sim/BTCUSDT?depth=0", 400, "depth"),
        ("/v1/book/sim/BTCUSDT?depth=many", 400, "depth"),
        ("/v1/book/sim/BTCUSDT?deep=5", 400, "query"),
        ("/v1/book/sim/DOGEUSDT", 404, "DOGEUSDT"),
        ("/v1/book/elsewhere/BTCUSDT", 404, "elsewhere"),
        ("/v1/stream?kind=nonsense", 400, "nonsense"),
        ("/v1/stream?venue=elsewhere", 400, "elsewhere"),
        ("/v1/stream", 400, "WebSocket"),
        // Found by the http_router fuzz target: axum's own answer was plain text.
        ("/v1/book/%FF/BTCUSDT", 400, "UTF-8"),
    ] {
        let (got, body) = get(&mut pair, path);
        assert_eq!(got, status, "{path}: {body}");
        let error = json(&body)["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains(says), "{path}: {body}");
    }
    let addr = pair.session.http_addr().unwrap();
    let post = exchange(
        addr,
        format!(
            "POST /v1/quotes HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(post.status, 405, "{}", post.body);
    assert!(json(&post.body)["error"].is_string());
    // The status page is served from the binary and fetches nothing from elsewhere.
    let page = get_with(&mut pair, "/", "");
    assert_eq!(page.status, 200);
    assert!(page
        .head
        .to_ascii_lowercase()
        .contains("content-type: text/html"));
    assert!(
        page.body.contains("/v1/quotes")
            && !page.body.contains("http://")
            && !page.body.contains("https://")
    );
    pair.finish();
}

#[test]
fn a_request_head_too_large_is_refused_and_a_slow_one_is_cut_off() {
    let mut pair = start(
        synthetic(50.0),
        |_| {},
        metrics_setup(Setup {
            appliance_extra: "header_timeout_ms = 1000\nmax_request_head_bytes = 8192\n".to_owned(),
            ..Setup::default()
        }),
    );
    let addr = pair.session.http_addr().unwrap();
    let big = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Padding: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    let answer = exchange(addr, big.as_bytes());
    assert_eq!(answer.status, 431, "{}", answer.head);

    // Slowloris: one byte of a request head every 200 ms, never finishing it. The server must
    // close the connection on its own, long before the head could ever be complete.
    let request = b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let slow = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        for &byte in request.iter() {
            if stream.write_all(&[byte]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
            // A closed connection shows as EOF (or a reset) on a read.
            stream.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 256];
            let closed = match stream.read(&mut buf) {
                Ok(_) => true,
                Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
            };
            stream.set_nonblocking(false).unwrap();
            if closed {
                return true;
            }
        }
        false
    });
    pair.run_until(Duration::from_secs(30), "the slow client's end", |_| {
        slow.is_finished()
    });
    assert!(slow.join().unwrap(), "the slow client was never cut off");
    let (_, metrics) = get(&mut pair, "/metrics");
    assert!(
        samples(&metrics)["tickwire_http_header_timeouts_total"] >= 1.0,
        "{metrics}"
    );
    // The server still answers others.
    assert_eq!(get(&mut pair, "/healthz").0, 200);
    pair.finish();
}

#[test]
fn a_token_when_set_is_required() {
    // Only this test reads this variable.
    std::env::set_var("TICKWIRE_TEST_SERVE_TOKEN", "test-token-0123456789");
    let mut pair = start(
        synthetic(50.0),
        |_| {},
        metrics_setup(Setup {
            appliance_extra: "token_env = \"TICKWIRE_TEST_SERVE_TOKEN\"\n".to_owned(),
            ..Setup::default()
        }),
    );
    let refused = get_with(&mut pair, "/metrics", "");
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(
        refused.head.contains("www-authenticate: Bearer")
            || refused.head.contains("WWW-Authenticate: Bearer"),
        "{}",
        refused.head
    );
    let wrong = get_with(
        &mut pair,
        "/v1/venues",
        "Authorization: Bearer test-token-0123456780\r\n",
    );
    assert_eq!(wrong.status, 401);
    let right = get_with(
        &mut pair,
        "/v1/venues",
        "Authorization: Bearer test-token-0123456789\r\n",
    );
    assert_eq!(right.status, 200, "{}", right.body);
    // Liveness says nothing a supervisor without the token may not know.
    assert_eq!(get_with(&mut pair, "/healthz", "").status, 200);
    let metrics = get_with(
        &mut pair,
        "/metrics",
        "Authorization: Bearer test-token-0123456789\r\n",
    )
    .body;
    assert_eq!(
        samples(&metrics)["tickwire_http_unauthorized_total"],
        2.0,
        "{metrics}"
    );
    pair.finish();
}

/// Runs `tests/support/stream_client.py` with `args` while the session ticks; its stdout lines.
fn stream_client(pair: &mut Pair, args: &[String], within: Duration) -> Vec<String> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/stream_client.py");
    let child = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let output = std::thread::spawn(move || child.wait_with_output().expect("the client ends"));
    pair.run_until(within, "the stream client's end", |_| output.is_finished());
    let output = output.join().unwrap();
    assert!(output.status.success(), "the client failed: {output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_stream_carries_filtered_events_as_json() {
    if !crate::support::common::python_websockets_available() {
        return;
    }
    let (setup, _bus_dir) = api_setup("");
    let mut pair = start(two(500.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live", |pair| {
        pair.session.venues.all_live()
    });
    let addr = pair.session.http_addr().unwrap();
    let url = format!("ws://{addr}/v1/stream?venue=sim&symbol=BTCUSDT&kind=quote,trade");
    let lines = stream_client(
        &mut pair,
        &["read".to_owned(), url, "200".to_owned(), "20".to_owned()],
        Duration::from_secs(40),
    );
    assert_eq!(lines.last().map(String::as_str), Some("done"), "{lines:?}");
    let events: Vec<serde_json::Value> = lines[..lines.len() - 1]
        .iter()
        .map(|line| json(line))
        .collect();
    assert_eq!(events.len(), 200);
    let mut kinds = std::collections::BTreeSet::new();
    for event in &events {
        assert_eq!(
            (event["venue"].as_str(), event["symbol"].as_str()),
            (Some("sim"), Some("BTCUSDT")),
            "{event}"
        );
        let kind = event["type"].as_str().unwrap();
        kinds.insert(kind.to_owned());
        let price = match kind {
            "quote" => &event["bid_px"],
            "trade" => &event["px"],
            other => panic!("a {other} event passed a quote,trade filter: {event}"),
        };
        assert!(is_decimal(price), "{event}");
    }
    assert!(kinds.contains("quote"), "{kinds:?}");
    pair.finish();
}

#[test]
fn a_stream_client_that_stops_reading_is_closed_with_1008() {
    if !crate::support::common::python_websockets_available() {
        return;
    }
    let (setup, _bus_dir) = api_setup("stream_queue = 16\nwrite_timeout_ms = 60000\n");
    let mut pair = start(two(5_000.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live", |pair| {
        pair.session.venues.all_live()
    });
    let addr = pair.session.http_addr().unwrap();
    let url = format!("ws://{addr}/v1/stream");
    let lines = stream_client(
        &mut pair,
        &["stall".to_owned(), url, "8".to_owned(), "30".to_owned()],
        Duration::from_secs(60),
    );
    let closed = lines
        .iter()
        .find(|line| line.starts_with("closed "))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(closed.starts_with("closed 1008 too slow"), "{lines:?}");
    let (_, metrics) = get(&mut pair, "/metrics");
    assert!(samples(&metrics)["tickwire_http_stream_slow_closed_total"] >= 1.0);
    // The appliance itself kept up: nothing the bus writer or the rings refused.
    assert_eq!(
        samples(&metrics)["tickwire_ring_drops_total{ring=\"event\"}"],
        0.0
    );
    pair.finish();
}

/// Chromium, when it is here (Debian's `chromium`); else a printed reason, or a failure under
/// `TICKWIRE_REQUIRE_CHROMIUM=1` (set by `.ci/run`, which installs it).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        std::process::Command::new(name)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("TICKWIRE_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "TICKWIRE_REQUIRE_CHROMIUM=1 but chromium is not installed"
        );
        crate::support::skip::skipped("chromium is not installed (apt-get install -y chromium)");
    }
    found
}

/// Runs headless Chromium on `url` with `action` (`--dump-dom`, `--screenshot=...`) while the
/// session ticks; its stdout.
fn headless(pair: &mut Pair, browser: &'static str, action: String, url: String) -> String {
    let profile = tempfile::tempdir().unwrap();
    let profile_arg = format!("--user-data-dir={}", profile.path().display());
    let run = std::thread::spawn(move || {
        std::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1000,900",
                // Lets the page's timers and fetches run for 3 s of its time before the dump.
                "--virtual-time-budget=3000",
                &profile_arg,
                &action,
                &url,
            ])
            .stderr(std::process::Stdio::null())
            .output()
            .expect("chromium runs")
    });
    pair.run_until(Duration::from_secs(60), "chromium's end", |_| {
        run.is_finished()
    });
    let output = run.join().unwrap();
    assert!(output.status.success(), "chromium failed: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The texts of the cells of the status page's quote row for `symbol`.
fn quote_row(dom: &str, symbol: &str) -> Vec<String> {
    let start = dom
        .find(&format!("<tr class=\"quote\" data-symbol=\"{symbol}\">"))
        .unwrap_or_else(|| panic!("no quote row for {symbol} in:\n{dom}"));
    let row = &dom[start..];
    let row = &row[..row.find("</tr>").unwrap()];
    row.split("<td")
        .skip(1)
        .map(|cell| {
            let text = &cell[cell.find('>').unwrap() + 1..];
            text[..text.find("</td>").unwrap()].to_owned()
        })
        .collect()
}

#[test]
fn the_status_page_shows_live_prices_in_headless_chromium() {
    let Some(browser) = chromium() else {
        return;
    };
    let (setup, _bus_dir) = api_setup("");
    let mut pair = start(two(500.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live with a synced book", |pair| {
        pair.session.venues.all_live() && pair.counters().book_syncs.get() >= 1
    });
    valid_book(&mut pair, "");
    // Some seconds of history for the latency plot to start with.
    pair.run_for(Duration::from_secs(5));
    let url = format!("http://{}/", pair.session.http_addr().unwrap());
    let first = headless(&mut pair, browser, "--dump-dom".to_owned(), url.clone());
    pair.run_for(Duration::from_secs(2));
    let second = headless(&mut pair, browser, "--dump-dom".to_owned(), url.clone());
    // venue, symbol, bid size, bid, ask, ask size, mid, last trade, last size, source.
    let (before, after) = (quote_row(&first, "BTCUSDT"), quote_row(&second, "BTCUSDT"));
    for row in [&before, &after] {
        assert_eq!(row.len(), 10, "{row:?}");
        assert_eq!(
            decimal_tenths(&row[6]) * 2,
            decimal_tenths(&row[3]) + decimal_tenths(&row[4]),
            "the mid of bid and ask: {row:?}"
        );
        assert!(
            is_decimal(&serde_json::Value::String(row[7].clone())),
            "a last trade: {row:?}"
        );
        assert_eq!((row[0].as_str(), row[1].as_str()), ("sim", "BTCUSDT"));
        for cell in &row[2..6] {
            assert!(
                is_decimal(&serde_json::Value::String(cell.clone())),
                "{row:?}"
            );
        }
        let (bid, ask): (f64, f64) = (row[3].parse().unwrap(), row[4].parse().unwrap());
        assert!(bid < ask, "{row:?}");
    }
    assert_ne!(before[2..6], after[2..6], "the prices did not move in 2 s");
    // The latency plot starts with the appliance's history (more windows than the page's 3 s
    // of virtual time could gather), on an axis of round values.
    let (_, latency) = get(&mut pair, "/v1/latency");
    let windows = json(&latency)["history"].as_array().unwrap().len();
    let third = headless(&mut pair, browser, "--dump-dom".to_owned(), url.clone());
    let plot = &third[third.find("id=\"plot\"").expect("the plot")..];
    let plot = &plot[..plot.find('>').unwrap()];
    let attribute = |name: &str| {
        let start = plot
            .find(&format!("data-{name}=\""))
            .unwrap_or_else(|| panic!("no data-{name}: {plot}"))
            + name.len()
            + 7;
        plot[start..start + plot[start..].find('"').unwrap()].to_owned()
    };
    let points: usize = attribute("points").parse().unwrap();
    assert!(
        windows >= 5 && points >= windows,
        "{points} points plotted, {windows} windows kept"
    );
    let ticks = attribute("ticks");
    assert!(!ticks.is_empty(), "{plot}");
    for tick in ticks.split(',') {
        let (number, unit) = tick.split_once(' ').unwrap_or_else(|| panic!("{tick}"));
        assert!(["ns", "µs", "ms", "s"].contains(&unit), "{tick}");
        let digits = number.trim_end_matches('0');
        assert!(
            ["1", "2", "5"].contains(&digits) && number.bytes().all(|b| b.is_ascii_digit()),
            "not a round axis value: {tick} in {ticks}"
        );
    }
    assert!(
        first.contains("id=\"venue-sim\"") && first.contains(">live"),
        "{first}"
    );
    let shot = tempfile::tempdir().unwrap();
    let png = shot.path().join("status.png");
    headless(
        &mut pair,
        browser,
        format!("--screenshot={}", png.display()),
        url,
    );
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let (width, height) = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!((width, height), (1000, 900));
    // A blank page compresses to a few hundred bytes; tables, text and a plot do not.
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
    pair.finish();
}

#[test]
fn connections_beyond_the_cap_wait_until_one_ends() {
    let mut pair = start(
        synthetic(50.0),
        |_| {},
        metrics_setup(Setup {
            appliance_extra: "max_connections = 2\nheader_timeout_ms = 60000\n".to_owned(),
            ..Setup::default()
        }),
    );
    let addr = pair.session.http_addr().unwrap();
    // Two connections that send nothing hold both places.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    pair.run_for(Duration::from_millis(200));
    // The third is accepted by the kernel's backlog, not by the server: no answer while the two
    // are open.
    let mut third = TcpStream::connect(addr).unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 512];
    let early = third.read(&mut buf);
    assert!(
        matches!(&early, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
        "answered beyond the cap: {early:?}"
    );
    drop(idle);
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut response = Vec::new();
    let _ = third.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    pair.finish();
}

/// Sends `request` and reads the answer's head and, when it says `Content-Length`, its body:
/// for answers that leave the connection open (a 101 does).
fn exchange_head(addr: SocketAddr, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect to the serving plane");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = response.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        let read = stream.read(&mut buf).expect("an answer");
        assert!(read > 0, "closed before a whole head: {response:?}");
        response.extend_from_slice(&buf[..read]);
    };
    let head = String::from_utf8(response[..head_end].to_vec()).expect("UTF-8");
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while response.len() < head_end + 4 + length {
        let read = stream.read(&mut buf).expect("the body");
        assert!(read > 0, "closed before the whole body");
        response.extend_from_slice(&buf[..read]);
    }
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status code in {head:?}"));
    Answer {
        status,
        head,
        body: String::from_utf8_lossy(&response[head_end + 4..head_end + 4 + length]).into_owned(),
    }
}

/// `exchange_head` while the session ticks.
fn ask(pair: &mut Pair, request: String) -> Answer {
    let addr = pair.session.http_addr().expect("the serving plane listens");
    let asked = std::thread::spawn(move || exchange_head(addr, request.as_bytes()));
    pair.run_until(
        Duration::from_secs(15),
        "the serving plane's answer",
        |_| asked.is_finished(),
    );
    asked.join().expect("the request thread")
}

/// A GET of `path` with `Host: host`.
fn get_as(pair: &mut Pair, host: &str, path: &str) -> Answer {
    ask(
        pair,
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

/// A WebSocket upgrade of `/v1/stream` with `Host: host` and, when given, `Origin: origin`.
fn upgrade_as(pair: &mut Pair, host: &str, origin: Option<&str>) -> Answer {
    let origin = origin.map_or(String::new(), |origin| format!("Origin: {origin}\r\n"));
    ask(
        pair,
        format!(
            "GET /v1/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n{origin}\r\n"
        ),
    )
}

#[test]
fn foreign_hosts_and_origins_are_refused_and_the_headers_are_sent() {
    let (setup, _bus_dir) = api_setup(
        "allowed_hosts = [\"tickwire.test\", \"proxy.test:8443\"]\n\
             allowed_origins = [\"https://dash.test\"]\n",
    );
    let mut pair = start(two(200.0), |_| {}, setup);
    pair.run_until(Duration::from_secs(20), "live", |pair| {
        pair.session.venues.all_live()
    });
    let addr = pair.session.http_addr().unwrap();
    let port = addr.port();
    let own = addr.to_string();
    let mut refused_hosts = 0;
    let mut refused_origins = 0;

    // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1. Every route but
    // /healthz refuses it, with or without the port; so does another port, or no port.
    for path in [
        "/",
        "/metrics",
        "/readyz",
        "/v1/venues",
        "/v1/instruments",
        "/v1/latency",
        "/v1/quotes",
        "/v1/book/sim/BTCUSDT",
        "/v1/stream",
        "/nothing",
    ] {
        for host in [
            format!("rebind.attacker.example:{port}"),
            "rebind.attacker.example".to_owned(),
            format!("127.0.0.1:{}", port + 1),
            "127.0.0.1".to_owned(),
            format!("proxy.test:{port}"),
        ] {
            let answer = get_as(&mut pair, &host, path);
            assert_eq!(answer.status, 421, "{host} {path}: {}", answer.body);
            assert!(
                json(&answer.body)["error"]
                    .as_str()
                    .is_some_and(|error| error.contains("allowed_hosts")),
                "{}",
                answer.body
            );
            refused_hosts += 1;
        }
    }
    let rebound_upgrade = upgrade_as(
        &mut pair,
        &format!("rebind.attacker.example:{port}"),
        Some(&format!("http://rebind.attacker.example:{port}")),
    );
    assert_eq!(rebound_upgrade.status, 421, "{}", rebound_upgrade.body);
    refused_hosts += 1;
    // Liveness answers a constant: any name may ask.
    let health = get_as(
        &mut pair,
        &format!("rebind.attacker.example:{port}"),
        "/healthz",
    );
    assert_eq!(health.status, 200, "{}", health.body);

    // The listener's own address, `localhost` on loopback, and the configured names pass.
    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        "tickwire.test".to_owned(),
        format!("tickwire.test:{port}"),
        "proxy.test:8443".to_owned(),
    ] {
        for path in ["/", "/v1/venues", "/metrics"] {
            let answer = get_as(&mut pair, &host, path);
            assert_eq!(answer.status, 200, "{host} {path}: {}", answer.body);
        }
    }

    // Cross-site WebSocket hijacking: a page elsewhere opening the stream gets 403, not 101.
    for origin in [
        "https://evil.example".to_owned(),
        format!("http://rebind.attacker.example:{port}"),
        format!("http://127.0.0.1:{}", port + 1),
        "http://dash.test".to_owned(),
        "null".to_owned(),
    ] {
        let answer = upgrade_as(&mut pair, &own, Some(&origin));
        assert_eq!(answer.status, 403, "{origin}: {}", answer.head);
        assert!(
            json(&answer.body)["error"]
                .as_str()
                .is_some_and(|error| error.contains("allowed_origins")),
            "{}",
            answer.body
        );
        refused_origins += 1;
    }
    // The status page's own origin (by address or `localhost`), a configured host's, a
    // configured origin, and a client that sends no Origin (not a browser) get the stream.
    for origin in [
        Some(format!("http://{own}")),
        Some(format!("http://localhost:{port}")),
        Some("http://tickwire.test".to_owned()),
        Some("https://dash.test".to_owned()),
        None,
    ] {
        let answer = upgrade_as(&mut pair, &own, origin.as_deref());
        assert_eq!(answer.status, 101, "{origin:?}: {}", answer.head);
    }

    // The headers: nosniff and same-origin on every answer, refusals included; no CORS; the
    // status page's policy.
    let api = get_as(&mut pair, &own, "/v1/quotes");
    let refusal = get_as(&mut pair, "rebind.attacker.example", "/v1/quotes");
    refused_hosts += 1;
    for answer in [&api, &refusal] {
        let head = answer.head.to_ascii_lowercase();
        assert!(
            head.contains("\r\nx-content-type-options: nosniff"),
            "{head}"
        );
        assert!(
            head.contains("\r\ncross-origin-resource-policy: same-origin"),
            "{head}"
        );
        assert!(!head.contains("access-control-allow"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
    }
    let page = get_as(&mut pair, &own, "/");
    let head = page.head.to_ascii_lowercase();
    let policy = head
        .lines()
        .find_map(|line| line.strip_prefix("content-security-policy: "))
        .unwrap_or_else(|| panic!("no policy: {head}"));
    for directive in [
        "default-src 'none'",
        "script-src 'sha256-",
        "style-src 'sha256-",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(directive), "{directive}: {policy}");
    }
    assert!(!policy.contains("unsafe"), "{policy}");
    assert!(head.contains("\r\nx-frame-options: deny"), "{head}");
    assert!(head.contains("\r\nreferrer-policy: no-referrer"), "{head}");
    assert!(
        head.contains("\r\nx-content-type-options: nosniff"),
        "{head}"
    );

    let (_, metrics) = get(&mut pair, "/metrics");
    let samples = samples(&metrics);
    assert_eq!(
        samples["tickwire_http_refused_host_total"], refused_hosts as f64,
        "{metrics}"
    );
    assert_eq!(
        samples["tickwire_http_refused_origin_total"], refused_origins as f64,
        "{metrics}"
    );
    pair.finish();
}

/// `[http]` without `[bus]`: the appliance makes a private bus for the serving plane, so the
/// quotes, the books and the stream answer as with a bus; it is gone after the appliance stops.
#[test]
fn quotes_books_and_the_stream_need_no_bus_table() {
    let mut pair = start(synthetic(500.0), |_| {}, metrics_setup(Setup::default()));
    pair.run_until(Duration::from_secs(20), "live with a synced book", |pair| {
        pair.session.venues.all_live() && pair.counters().book_syncs.get() >= 1
    });
    let private = pair
        .session
        .private_bus()
        .expect("a private bus without [bus]")
        .to_owned();
    let bus = pair
        .session
        .bus()
        .expect("the private bus")
        .path()
        .to_owned();
    assert_eq!(bus.parent(), Some(private.as_path()));
    assert!(bus.is_file(), "{}", bus.display());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{}", private.display());
    assert!(
        private
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("tickwire-http-"),
        "{}",
        private.display()
    );

    let book = valid_book(&mut pair, "?depth=3");
    assert!(!book["bids"].as_array().unwrap().is_empty(), "{book}");
    let (status, body) = get(&mut pair, "/v1/quotes");
    assert_eq!(status, 200, "{body}");
    let quotes = json(&body);
    let btc = &quotes["quotes"][0];
    assert_eq!(
        (btc["symbol"].as_str(), btc["source"].as_str()),
        (Some("BTCUSDT"), Some("book")),
        "{body}"
    );
    assert!(is_decimal(&btc["bid"]["price"]), "{btc}");
    if crate::support::common::python_websockets_available() {
        let addr = pair.session.http_addr().unwrap();
        let lines = stream_client(
            &mut pair,
            &[
                "read".to_owned(),
                format!("ws://{addr}/v1/stream?kind=quote"),
                "20".to_owned(),
                "20".to_owned(),
            ],
            Duration::from_secs(40),
        );
        assert_eq!(lines.last().map(String::as_str), Some("done"), "{lines:?}");
        assert_eq!(lines.len(), 21, "{lines:?}");
    }
    pair.finish();
    assert!(
        !private.exists(),
        "the private bus outlived the appliance: {}",
        private.display()
    );
}
