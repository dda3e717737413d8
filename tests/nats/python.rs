//! The Python package reads a bridge's events from NATS (`tickwire_bus.nats`, with nats-py)
//! into the bus's numpy dtype, with the same continuity checks as the Rust client. Skipped with
//! a printed reason without python3, numpy or nats-py, unless `TICKWIRE_REQUIRE_NATS=1`.

use super::stream::{Feed, INSTRUMENTS};
use super::{bus_dir, bus_writer, nats_server_binary, BridgeProcess, NatsServer, PATIENCE};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickwire_client::Next;
use tickwire_nats::bridge::parse_servers;
use tickwire_nats::{NatsClient, NatsOptions};

fn python_nats_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, nats"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required = std::env::var("TICKWIRE_REQUIRE_NATS").is_ok_and(|value| value == "1");
        assert!(!required, "TICKWIRE_REQUIRE_NATS=1 but python3 with numpy and nats-py is missing (pip install numpy nats-py)");
        crate::support::skip::skipped(
            "python3 with numpy and nats-py is not installed (pip install numpy nats-py)",
        );
    }
    ok
}

#[test]
fn python_reads_every_trade_into_the_event_dtype_in_order() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    if !python_nats_available() {
        return;
    }
    let server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let _bridge = BridgeProcess::start(&path, &server.url(), "site-py", &[]);
    // A Rust consumer first, to know the bridge is attached and connected.
    let mut probe = NatsClient::connect(NatsOptions::new(
        parse_servers(&server.url()).unwrap(),
        vec!["tickwire.>".into()],
    ))
    .unwrap();
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < PATIENCE,
            "nothing came through the bridge"
        );
        feed.write(1);
        if let Next::Events(_) = probe.wait(Duration::from_millis(20)).unwrap() {
            break;
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rounds = 1000;
    let mut python = Command::new("python3")
        .arg(root.join("tests/nats/read_nats.py"))
        .args([
            server.url().as_str(),
            "tickwire.site-py.*.*.trade",
            &(rounds * u64::from(INSTRUMENTS)).to_string(),
            "site-py",
        ])
        .env("PYTHONPATH", root.join("clients/python"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(python.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let first = feed.next;
    feed.write(rounds);
    let summary = lines.next().expect("a summary line").unwrap();
    assert!(python.wait().unwrap().success(), "{summary}");
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        summary["count"],
        rounds * u64::from(INSTRUMENTS),
        "{summary}"
    );
    assert_eq!(summary["missed"], 0, "{summary}");
    assert_eq!(summary["duplicates"], 0, "{summary}");
    for instrument in 1..=INSTRUMENTS {
        let seen = &summary["instruments"][instrument.to_string()];
        let from = first[instrument as usize];
        assert_eq!(seen["first"], from, "{summary}");
        assert_eq!(seen["last"], from + rounds - 1, "{summary}");
        assert_eq!(seen["increasing"], true, "{summary}");
    }
    let directory = summary["directory"].as_array().unwrap();
    assert_eq!(directory.len(), INSTRUMENTS as usize, "{summary}");
    assert_eq!(directory[0], serde_json::json!(["SYM.1", "sym1"]));
}
