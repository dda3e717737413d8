//! Issue 33: the C example (`clients/c/example/tail.c`) and the Python example (the first one of
//! `clients/python/README.md`, run as written but for the bus's path) follow the appliance
//! across a clean restart, as `tickwire tail` does: every event of the first bus, the close,
//! then every event of the new bus made at the same path, none lost and none twice.

use super::{build_c, cc_available, numpy_available, root};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use tickwire_bus::event::{flags, Body, Event, EventHeader, EventKind, Side, Trade};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};

const PATIENCE: Duration = Duration::from_secs(30);
const FIRST_EPOCH: u64 = 0x5eed_0000_0001;
const SECOND_EPOCH: u64 = 0x5eed_0000_0002;

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A bus at `path` (replacing the file there) naming BTCUSDT.
fn create(path: &Path, epoch: u64) -> BusWriter {
    let options = BusOptions {
        path: path.to_owned(),
        geometry: Geometry::new(1024, 64).unwrap(),
        group: None,
    };
    let mut writer = BusWriter::create(&options, epoch, 1_700_000_000_000_000_000).unwrap();
    writer
        .add_instrument(&DirectoryEntry {
            instrument_id: 1,
            venue_id: 0,
            venue: "sim".into(),
            symbol: "BTCUSDT".into(),
            venue_symbol: "btcusdt".into(),
        })
        .unwrap();
    writer
}

/// Trades of BTCUSDT at the whole prices `prices`, published.
fn trades(writer: &mut BusWriter, prices: std::ops::RangeInclusive<i64>) {
    for price in prices {
        let header = EventHeader {
            exchange_ts_ns: 1,
            recv_ts_ns: 2,
            venue_seq: price as u64,
            instrument_id: 1,
            venue_id: 0,
            kind: EventKind::Trade,
            flags: flags::LAST,
        };
        let trade = Trade::new(Fixed(price * 1_000_000_000), Fixed(1), 7, Side::Bid);
        writer.write(&Event::new(header, Body::Trade(trade)));
    }
    writer.publish();
}

/// The lines of `reader`, as they come.
fn lines(reader: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Collects lines into `seen` until `done` holds of them; panics after `PATIENCE`.
fn until(
    who: &str,
    receiver: &Receiver<String>,
    seen: &mut Vec<String>,
    done: impl Fn(&[String]) -> bool,
) {
    let started = Instant::now();
    while !done(seen) {
        assert!(started.elapsed() < PATIENCE, "{who} printed only {seen:#?}");
        if let Ok(line) = receiver.recv_timeout(Duration::from_millis(50)) {
            seen.push(line);
        }
    }
}

/// The `px` of each of tail.c's JSON lines.
fn prices(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            value["px"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn strings(range: std::ops::RangeInclusive<i64>) -> Vec<String> {
    range.map(|price| price.to_string()).collect()
}

#[test]
fn the_c_and_python_examples_follow_the_appliance_across_a_clean_restart() {
    let c = cc_available();
    let python = numpy_available();
    if !c && !python {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.bus");
    let mut first = create(&path, FIRST_EPOCH);
    trades(&mut first, 1..=3);

    // tail.c from the oldest event; the README's Python loop from the latest, as written.
    let mut c_out = None;
    let mut _c_running = None;
    if c {
        let tail = build_c(&root().join("clients/c/example/tail.c"), dir.path());
        let mut child = Command::new(tail)
            .arg("--oldest")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        _c_running = Some(Running(child));
        c_out = Some((stdout, stderr, Vec::new(), Vec::new()));
    }
    let mut python_out = None;
    let mut _python_running = None;
    if python {
        let readme = std::fs::read_to_string(root().join("clients/python/README.md")).unwrap();
        let example = readme
            .split("```python\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the README's first Python example");
        assert!(example.contains("/run/tickwire/tickwire.bus"), "{example}");
        let script = dir.path().join("example.py");
        std::fs::write(
            &script,
            example.replace("/run/tickwire/tickwire.bus", path.to_str().unwrap()),
        )
        .unwrap();
        let mut child = Command::new("python3")
            .arg(&script)
            .env("PYTHONPATH", root().join("clients/python"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        _python_running = Some(Running(child));
        python_out = Some((stdout, stderr, Vec::new()));
    }

    // Both read the first bus; the Python loop has opened it (it starts at the latest event).
    if let Some((stdout, _, seen, _)) = c_out.as_mut() {
        until("tail.c", stdout, seen, |seen| seen.len() >= 3);
    }
    let first_epoch = format!("epoch {FIRST_EPOCH}");
    if let Some((stdout, _, seen)) = python_out.as_mut() {
        until("the Python example", stdout, seen, |seen| {
            seen.contains(&first_epoch)
        });
    }
    // The appliance writes more, then stops cleanly: the bus is closed.
    trades(&mut first, 4..=6);
    drop(first);
    if let Some((_, stderr, _, said)) = c_out.as_mut() {
        until("tail.c (stderr)", stderr, said, |said| {
            said.iter().any(|line| line.contains("closed the bus"))
        });
    }
    if let Some((stdout, _, seen)) = python_out.as_mut() {
        until("the Python example", stdout, seen, |seen| {
            seen.iter().any(|line| line == "closed")
        });
    }
    // The restarted appliance makes a new bus at the path.
    let mut second = create(&path, SECOND_EPOCH);
    trades(&mut second, 101..=103);
    if let Some((stdout, stderr, seen, said)) = c_out.as_mut() {
        until("tail.c", stdout, seen, |seen| seen.len() >= 9);
        assert_eq!(
            prices(seen),
            [strings(1..=6), strings(101..=103)].concat(),
            "tail.c: every trade of both buses, once, in order"
        );
        until("tail.c (stderr)", stderr, said, |said| {
            said.iter().any(|line| line.contains("a new bus at"))
        });
    }
    if let Some((stdout, stderr, seen)) = python_out.as_mut() {
        until("the Python example", stdout, seen, |seen| seen.len() >= 9);
        let mut want = vec![first_epoch.clone()];
        want.extend((4..=6).map(|price| format!("BTCUSDT {price}")));
        want.push("closed".into());
        want.push(format!("epoch {SECOND_EPOCH}"));
        want.extend((101..=103).map(|price| format!("BTCUSDT {price}")));
        let errors: Vec<String> = stderr.try_iter().collect();
        assert_eq!(*seen, want, "the Python example; stderr: {errors:#?}");
    }
    drop(second);
}
