//! The commands as a user runs them: `tickwire tail --nats` prints the decode lines of the
//! subjects it was given, and `tickwire bridge nats --jetstream-stream` keeps every message it
//! publishes in a JetStream stream.

use super::stream::{counter, Feed, INSTRUMENTS};
use super::{
    bus_dir, bus_writer, free_port, nats_server_binary, trade, BridgeProcess, NatsServer, PATIENCE,
};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::event::json::write_event;

#[test]
fn tail_nats_prints_the_decode_lines_of_its_subjects_only() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let _bridge = BridgeProcess::start(&path, &server.url(), "site.c", &[]);
    let mut tail = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["tail", "--nats", &server.url(), "--subject"])
        // SYM.1 escaped: the one instrument of the three.
        .arg("tickwire.site%2Ec.sim.SYM%2E1.trade")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // What tail must print for SYM.1's trades: exactly the decode format's lines.
    let mut expected = HashSet::new();
    let mut printed = Vec::new();
    let started = Instant::now();
    while printed.len() < 200 {
        assert!(
            started.elapsed() < PATIENCE,
            "tail printed {} lines",
            printed.len()
        );
        let position = feed.next[1];
        feed.write(10);
        for offset in 0..10 {
            let mut line = Vec::new();
            write_event(&mut line, "sim", b"SYM.1", &trade(1, position + offset));
            expected.insert(String::from_utf8(line).unwrap().trim_end().to_owned());
        }
        while let Ok(line) = received.recv_timeout(Duration::from_millis(20)) {
            printed.push(line);
        }
    }
    for line in &printed {
        assert!(expected.contains(line), "not a SYM.1 trade line: {line}");
    }
    // SAFETY: kill(2) on the id of a child this test spawned and has not reaped.
    unsafe { libc::kill(tail.id() as i32, libc::SIGTERM) };
    let status = tail.wait().unwrap();
    assert!(status.success(), "tail ended with {status}");
}

/// A GET to the server's monitoring port; the body.
pub fn monitor(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

#[test]
fn the_jetstream_stream_keeps_every_message_the_bridge_publishes() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let monitor_port = free_port();
    let server = NatsServer::start_with(
        &binary,
        &[
            "-js".into(),
            "-sd".into(),
            store.path().display().to_string(),
            "-m".into(),
            monitor_port.to_string(),
        ],
    );
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let bridge = BridgeProcess::start(
        &path,
        &server.url(),
        "site-d",
        &["--jetstream-stream", "TICKS", "--jetstream-max-age", "60"],
    );
    let started = Instant::now();
    while counter(&monitor(monitor_port, "/jsz"), "streams") != 1 {
        assert!(started.elapsed() < PATIENCE, "the bridge made no stream");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        feed.write(100);
        std::thread::sleep(Duration::from_millis(10));
    }
    let (status, stderr) = bridge.stop();
    assert!(status.success(), "{stderr}");
    let published = counter(&stderr, "messages_published");
    assert!(published > 0, "{stderr}");
    assert!(stderr.contains("\"jetstream_ready\":true"), "{stderr}");
    let started = Instant::now();
    loop {
        let stored = counter(&monitor(monitor_port, "/jsz"), "messages");
        if stored == published {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the stream holds {stored} messages of the {published} published"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let streams = monitor(monitor_port, "/jsz?accounts=true&streams=true&config=true");
    assert!(streams.contains("\"TICKS\""), "{streams}");
    assert!(streams.contains("tickwire.site-d.*.*.*"), "{streams}");
}

#[test]
fn tail_nats_stats_counts_the_events_of_each_second() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let server = NatsServer::start(&binary);
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let mut feed = Feed {
        bus: bus_writer(&path, INSTRUMENTS, 1 << 16),
        next: [0; INSTRUMENTS as usize + 1],
    };
    let _bridge = BridgeProcess::start(&path, &server.url(), "site.e", &[]);
    let mut tail = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args([
            "tail",
            "--stats",
            "--kind",
            "quote",
            "--nats",
            &server.url(),
        ])
        .args(["--subject", "tickwire.site%2Ee.sim.SYM%2E1.trade"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    // SYM.1's trades are counted, second by second, and none is a quote.
    let (mut counted, mut stats_lines) = (0u64, 0);
    let started = Instant::now();
    while counted < 100 {
        assert!(
            started.elapsed() < PATIENCE,
            "tail --nats --stats counted {counted} events in {stats_lines} lines"
        );
        feed.write(10);
        while let Ok(line) = received.recv_timeout(Duration::from_millis(20)) {
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            if value["type"] == "epoch" {
                continue;
            }
            assert_eq!(value["type"], "stats", "{line}");
            assert_eq!(value["matched_per_s"], 0, "{line}");
            assert_eq!(value["missed_total"], 0, "{line}");
            assert!(value["lag"].is_u64(), "{line}");
            assert!(value.get("epoch").is_none(), "{line}");
            stats_lines += 1;
            counted += value["events_per_s"].as_u64().unwrap();
        }
        // Only SYM.1's trades: never more than were written.
        assert!(
            counted <= feed.next[1],
            "counted {counted}, written {}",
            feed.next[1]
        );
    }
    // SAFETY: kill(2) on the id of a child this test spawned and has not reaped.
    unsafe { libc::kill(tail.id() as i32, libc::SIGTERM) };
    let output = tail.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "tail ended with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
