//! `tickwire sim`, `tickwire record` and `tickwire demo` as a user runs them.

use flate2::write::GzEncoder;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickwire_sim::source::{CaptureSource, Source, SyntheticConfig, SyntheticSource};

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `count` synthetic messages as a gzip capture (`<ns> <json>` lines).
fn write_capture(path: &Path, count: u64) -> Vec<Vec<u8>> {
    let mut source = SyntheticSource::new(SyntheticConfig {
        symbols: 1,
        rate_per_sec: 1000.0,
        duration_messages: Some(count),
        channels: ["bookTicker", "depth@100ms", "trade"]
            .map(str::to_owned)
            .to_vec(),
        ..SyntheticConfig::default()
    })
    .unwrap();
    let mut out = GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut messages = Vec::new();
    while let Some(message) = source.next_message() {
        write!(out, "{} ", 1_700_000_000_000_000_000 + message.offset_ns).unwrap();
        out.write_all(&message.combined).unwrap();
        out.write_all(b"\n").unwrap();
        messages.push(message.combined);
    }
    out.finish().unwrap();
    messages
}

fn replayed(path: &Path) -> Vec<Vec<u8>> {
    let mut source = CaptureSource::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(message) = source.next_message() {
        out.push(message.combined);
    }
    out
}

/// Starts `tickwire sim` and returns it with the address it printed.
fn start_sim(args: &[&str]) -> (Running, String) {
    start_sim_saying(args, "sim: listening on ")
}

/// Writes `venue.toml` in `dir` for the simulator at `addr` whose CA is in `cert_dir`.
/// Its channels are `channels`, quoted TOML strings.
fn write_sim_venue(dir: &Path, addr: &str, cert_dir: &Path, channels: &str) -> std::path::PathBuf {
    let port = addr.rsplit(':').next().unwrap();
    let venue = dir.join("venue.toml");
    std::fs::write(
        &venue,
        format!(
            "name = \"sim\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:{port}\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [{channels}]\n\
             [tls]\nextra_ca_file = {:?}\n",
            cert_dir.join("ca.pem").display().to_string()
        ),
    )
    .unwrap();
    venue
}

/// `tickwire sim` with one symbol at `rate` bookTickers a second, its CA under `dir/ca`, and
/// `dir/venue.toml` pointed at it with the bookTicker channel: the simulator and the venue file.
fn start_one_symbol_sim(dir: &Path, rate: &str) -> (Running, std::path::PathBuf) {
    let cert_dir = dir.join("ca");
    let (sim, addr) = start_sim(&[
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--rate",
        rate,
        "--symbols",
        "1",
    ]);
    let venue = write_sim_venue(dir, &addr, &cert_dir, r#""bookTicker""#);
    (sim, venue)
}

#[test]
fn record_against_the_simulator_replays_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.gz");
    let original = write_capture(&input, 2000);
    let cert_dir = dir.path().join("ca");
    let stamps = dir.path().join("stamps.bin");
    let (mut sim, addr) = start_sim(&[
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--source",
        input.to_str().unwrap(),
        "--as-fast-as-possible",
        "--stamps",
        stamps.to_str().unwrap(),
    ]);
    // The /public channels only: one connection, whose recording is byte for byte the replay.
    // (A file with /market channels too records each entry point's connection into the file.)
    let venue = write_sim_venue(
        dir.path(),
        &addr,
        &cert_dir,
        r#""bookTicker", "depth@100ms", "trade""#,
    );
    let out = dir.path().join("recorded.gz");
    let output = tickwire()
        .args(["record", "--venue"])
        .arg(&venue)
        .arg("--out")
        .arg(&out)
        .args(["--duration", "4"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("2000 messages"), "{stderr}");

    // Each recorded line is a receive time and the message exactly as the simulator sent it.
    let recorded = std::io::read_to_string(flate2::read::GzDecoder::new(
        std::fs::File::open(&out).unwrap(),
    ))
    .unwrap();
    let mut previous_ns = 0u64;
    let mut bodies = Vec::new();
    for line in recorded.lines() {
        let (ns, body) = line.split_once(' ').unwrap();
        let ns: u64 = ns.parse().expect("a receive time in ns");
        assert!(ns >= previous_ns, "receive times do not go back");
        previous_ns = ns;
        bodies.push(body.as_bytes().to_vec());
    }
    assert_eq!(
        bodies, original,
        "the recording holds the sent bytes, in order"
    );
    // And the simulator replays the recording as it replayed the original.
    assert_eq!(replayed(&out), replayed(&input));

    // The simulator stamped every bookTicker it sent, in order, with its send time.
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(sim.0.id() as i32, libc::SIGTERM) };
    assert!(sim.0.wait().unwrap().success());
    let bytes = std::fs::read(&stamps).unwrap();
    assert_eq!(bytes.len() % 16, 0);
    let records: Vec<(u64, u64)> = bytes
        .chunks_exact(16)
        .map(|record| {
            let (key, send_ns) = record.split_at(8);
            (
                u64::from_le_bytes(key.try_into().unwrap()),
                u64::from_le_bytes(send_ns.try_into().unwrap()),
            )
        })
        .collect();
    let book_tickers: Vec<u64> = original
        .iter()
        .filter_map(|message| {
            let json: serde_json::Value = serde_json::from_slice(message).unwrap();
            (json["data"]["e"] == "bookTicker").then(|| json["data"]["u"].as_u64().unwrap())
        })
        .collect();
    let keys: Vec<u64> = records.iter().map(|(key, _)| *key).collect();
    assert_eq!(keys, book_tickers);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for pair in records.windows(2) {
        assert!(pair[0].1 <= pair[1].1, "send times in order");
    }
    let first = records.first().unwrap().1;
    assert!(
        now_ns - first < 120_000_000_000,
        "send times are wall-clock ns"
    );
}

#[test]
fn sim_refuses_bad_options_with_a_clear_message() {
    let output = tickwire()
        .args([
            "sim",
            "--source",
            "/nonexistent/capture.gz",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/capture.gz"));
    let output = tickwire()
        .args(["sim", "--speed", "0", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--speed"));
}

#[test]
fn record_fails_clearly_when_the_venue_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let venue = dir.path().join("venue.toml");
    // Port 9 on loopback: nothing listens there.
    std::fs::write(
        &venue,
        "name = \"down\"\nkind = \"binance-usdm-futures\"\nurl = \"ws://127.0.0.1:9\"\n\
         symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n",
    )
    .unwrap();
    let output = tickwire()
        .args(["record", "--venue"])
        .arg(&venue)
        .arg("--out")
        .arg(dir.path().join("out.gz"))
        .args(["--duration", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stream ended") || stderr.contains("refused"),
        "{stderr}"
    );
}

/// A pseudo-terminal: the master's fd and the slave's, opened.
fn open_pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt, grantpt, unlockpt and ptsname_r on a master fd this function opened
    // and owns; ptsname_r writes at most `name.len()` bytes into `name`.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        (std::fs::File::from_raw_fd(master), slave)
    }
}

/// Issue 33: on a terminal the first redraw overwrote the `event bus: PATH` line the README
/// tells the user to copy; every redrawn header keeps it, beside the status page's URL.
#[test]
fn demo_on_a_terminal_keeps_the_bus_path_in_the_redrawn_header() {
    use std::io::Read;
    let (mut master, slave) = open_pty();
    let mut child = tickwire()
        .args(["demo", "--duration", "3"])
        .stdout(slave.try_clone().unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(slave);
    // The master reads until the child's end closes the terminal (EIO).
    let reader = std::thread::spawn(move || {
        let mut output = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(read) = master.read(&mut buffer) {
            if read == 0 {
                break;
            }
            output.extend_from_slice(&buffer[..read]);
        }
        String::from_utf8_lossy(&output).into_owned()
    });
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    let output = reader.join().unwrap();
    assert!(status.success(), "{status}: {stderr}\n{output}");
    // The bus the demo printed first, then every redraw (each starts at the top: ESC [H).
    let first = output
        .lines()
        .find_map(|line| line.split("event bus: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no event bus line: {output}"))
        .to_owned();
    let redraws: Vec<&str> = output.split("\x1b[H").skip(2).collect();
    assert!(!redraws.is_empty(), "no redraw: {output:?}");
    for redraw in redraws {
        let header: Vec<&str> = redraw.lines().take(4).collect();
        assert!(
            header
                .iter()
                .any(|line| line.contains("status page: http://")),
            "{header:?}"
        );
        assert!(
            header
                .iter()
                .any(|line| line.contains(&format!("event bus: {first} "))),
            "the bus path {first} is not in the header {header:?}"
        );
    }
}

#[test]
fn demo_runs_on_its_own_and_reports_latency() {
    let output = tickwire()
        .args(["demo", "--duration", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Live lines for the default symbols, then the summary.
    assert!(stdout.contains("BTCUSDT bid"), "{stdout}");
    let summary = stdout
        .lines()
        .find(|line| line.contains("the appliance decoded"))
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let decoded: u64 = summary
        .split("decoded ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(decoded > 0, "{summary}");
    let latency = stdout
        .lines()
        .find(|line| line.contains("simulator send to strategy"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        latency.contains("p50") && latency.contains("p99.9"),
        "{latency}"
    );
    assert!(stdout.contains("drops 0"), "{stdout}");
}

/// Writes `tickwire.toml` in `dir` for `venue.toml` beside it: the decoder fused into a parked
/// network thread and a parked strategy, so that the test's threads share the two cores.
fn write_parked_appliance(dir: &Path) -> std::path::PathBuf {
    let appliance = dir.join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"venue.toml\"]\n[threads.net]\nwait = \"park\"\n\
         [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    appliance
}

/// `tickwire run --print-events` on `appliance`, stdout and stderr piped.
fn run_print_events(appliance: &Path) -> std::process::Child {
    tickwire()
        .args(["run", "--print-events", "--config"])
        .arg(appliance)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Issue 33: a well-formed symbol the venue does not list (`FOOBARUSDT`) is refused at start,
/// checked against the venue's instrument list (`/fapi/v1/exchangeInfo`), rather than showing
/// up later as a stale stream; one it lists starts as before.
#[test]
fn run_refuses_a_symbol_the_venue_does_not_list() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, venue) = start_one_symbol_sim(dir.path(), "200");
    let listed = std::fs::read_to_string(&venue).unwrap();
    std::fs::write(
        &venue,
        listed.replace(
            "symbols = [\"BTCUSDT\"]",
            "symbols = [\"BTCUSDT\", \"FOOBARUSDT\"]",
        ),
    )
    .unwrap();
    let appliance = write_parked_appliance(dir.path());
    let run = || run_print_events(&appliance);
    let mut refused = Running(run());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = refused.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "run did not refuse FOOBARUSDT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut refused.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("FOOBARUSDT") && stderr.contains("not listed by the venue"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("BTCUSDT,"),
        "only the unlisted symbol is named: {stderr}"
    );
    // The listed symbol alone: the appliance starts and prints the venue's events.
    std::fs::write(&venue, listed).unwrap();
    let mut started = Running(run());
    let first = BufReader::new(started.0.stdout.take().unwrap())
        .lines()
        .next()
        .expect("an event line")
        .unwrap();
    let event: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(event["venue"], "sim", "{first}");
}

/// Issue 33: a venue whose instrument list cannot be read (here a simulator replaying a
/// capture, which answers `exchangeInfo` with 404) starts anyway, with one warning that says its
/// symbols were not checked.
#[test]
fn run_warns_once_when_the_instrument_list_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.gz");
    write_capture(&input, 100_000);
    let cert_dir = dir.path().join("ca");
    let (_sim, addr) = start_sim(&[
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--source",
        input.to_str().unwrap(),
    ]);
    write_sim_venue(dir.path(), &addr, &cert_dir, r#""bookTicker""#);
    let appliance = write_parked_appliance(dir.path());
    let mut child = run_print_events(&appliance);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines
        .next()
        .expect("an event line: the appliance started")
        .unwrap();
    assert!(first.contains("\"venue\":\"sim\""), "{first}");
    // Keep reading the events until the appliance stops: a closed pipe would make it fail
    // with EPIPE before SIGTERM reaches it.
    let drain = std::thread::spawn(move || for _ in lines {});
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    drain.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("instrument list could not be read").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("/fapi/v1/exchangeInfo"), "{stderr}");
}

/// Issue 33: the simulator's log to a redirected stderr (here a pipe) is plain text, with no
/// terminal colour codes.
#[test]
fn sim_writes_no_colour_codes_to_a_stderr_that_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = dir.path().join("ca");
    let mut child = tickwire()
        .args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--rate",
            "100",
            "--symbols",
            "1",
        ])
        .arg("--cert-dir")
        .arg(&cert_dir)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _running = Running(child);
    let mut logged = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        let done = line.starts_with("sim: listening on ");
        logged.push(line);
        if done {
            break;
        }
    }
    // The log line the tracing subscriber writes (the others are plain prints).
    assert!(
        logged
            .iter()
            .any(|line| line.contains("venue simulator listening")),
        "{logged:#?}"
    );
    for line in &logged {
        assert!(!line.contains('\x1b'), "a colour code in {line:?}");
    }
}

#[test]
fn run_print_events_pipes_a_venue_as_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = dir.path().join("ca");
    let (_sim, addr) = start_sim(&[
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--rate",
        "500",
        "--symbols",
        "1",
    ]);
    write_sim_venue(
        dir.path(),
        &addr,
        &cert_dir,
        r#""bookTicker", "depth@100ms", "aggTrade""#,
    );
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"venue.toml\"]\n[rings]\nframe_ring_bytes = 16777216\n\
         [net]\nmax_message_bytes = 1048576\n[threads.net]\nwait = \"spin-then-yield\"\n\
         [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let child = tickwire()
        .args(["run", "--print-events", "--config"])
        .arg(&appliance)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut kinds = std::collections::BTreeSet::new();
    let mut live = 0;
    for line in stdout.lines() {
        let json: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        // Every line names its venue, a connection's status too (issue 24: it said "").
        assert_eq!(json["venue"], "sim", "{line}");
        let kind = json["type"].as_str().unwrap().to_owned();
        if json["symbol"] == "*" {
            assert!(
                kind == "status" || kind == "gap",
                "only a venue-wide event has no symbol: {line}"
            );
        } else {
            assert_eq!(json["symbol"], "BTCUSDT", "{line}");
        }
        if kind == "status" && json["state"] == "Live" {
            live += 1;
        }
        kinds.insert(kind);
    }
    // Every event the strategy sees, not only the market data (issue 24): the book's
    // snapshot bracket and the connection's status as well.
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "level",
            "quote",
            "snapshot_begin",
            "snapshot_end",
            "status",
            "trade"
        ],
        "{stderr}"
    );
    assert_eq!(
        live, 2,
        "the /public and the /market connection going live, once each: {stdout}"
    );
}

/// Issue 32: the `print` strategy no longer writes on the strategy thread; its lines go through
/// the ring `--print-events` uses and the control thread writes them. They still reach stdout,
/// every one, in order: the simulator's bookTicker update ids only ever rise.
#[test]
fn run_with_the_print_strategy_writes_every_line_through_the_control_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _venue) = start_one_symbol_sim(dir.path(), "2000");
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"venue.toml\"]\n[threads.net]\nwait = \"spin-then-yield\"\n\
         [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n\
         [strategy]\nname = \"print\"\n",
    )
    .unwrap();
    let child = tickwire()
        .args(["run", "--config"])
        .arg(&appliance)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("printed events lost"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut last_seq = 0;
    let mut quotes = 0;
    for line in stdout.lines() {
        let json: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert_eq!(json["venue"], "sim", "{line}");
        if json["type"] == "quote" {
            let seq = json["seq"].as_u64().unwrap();
            assert!(seq > last_seq, "out of order: {seq} after {last_seq}");
            last_seq = seq;
            quotes += 1;
        }
    }
    assert!(quotes > 1000, "{quotes} quotes in 3 s at 2,000/s: {stderr}");
    assert!(stdout.ends_with('\n'), "the last line is whole");
}

/// Issue 24: `--print-events` printed quotes, trades, levels and references only; the gaps and
/// statuses a dropped connection brings reach the strategy, and now stdout too, each naming its
/// venue.
#[test]
fn run_print_events_prints_a_reconnects_gaps_and_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, addr) = start_sim(&[
        "--venue",
        "databento",
        "--listen",
        "127.0.0.1:0",
        "--rate",
        "2000",
        "--close-after",
        "300",
        "--fault-connections",
        "1",
    ]);
    let port = addr.rsplit(':').next().unwrap();
    std::fs::write(
        dir.path().join("databento.toml"),
        format!(
            "name = \"db-sim\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:{port}\"\n\
             symbols = [\"ESM5\"]\nchannels = [\"mbo\"]\n\
             [databento]\ndataset = \"GLBX.MDP3\"\nrecovery = \"gap\"\n\
             [credentials]\napi_key_env = \"TICKWIRE_CLI_DATABENTO_KEY\"\n\
             [reconnect]\ninitial_delay_ms = 20\nmax_delay_ms = 200\n"
        ),
    )
    .unwrap();
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"databento.toml\"]\n[rings]\nframe_ring_bytes = 16777216\n\
         [net]\nmax_message_bytes = 1048576\n[threads.net]\nwait = \"spin-then-yield\"\n\
         [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let child = tickwire()
        .args(["run", "--print-events", "--config"])
        .arg(&appliance)
        .env(
            "TICKWIRE_CLI_DATABENTO_KEY",
            tickwire_sim::databento::TEST_API_KEY,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut statuses = Vec::new();
    let mut gaps = Vec::new();
    for line in stdout.lines() {
        let json: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert_eq!(json["venue"], "db-sim", "{line}");
        match json["type"].as_str().unwrap() {
            "status" => {
                assert_eq!(json["symbol"], "*", "a connection's status: {line}");
                statuses.push(json["state"].as_str().unwrap().to_owned());
            }
            "gap" => {
                assert_eq!(json["symbol"], "ESM5", "{line}");
                gaps.push(json["reason"].as_str().unwrap().to_owned());
            }
            _ => assert_eq!(json["symbol"], "ESM5", "{line}"),
        }
    }
    assert_eq!(
        gaps,
        ["Reconnect"],
        "the dropped connection's instrument: {stderr}"
    );
    assert!(
        statuses.starts_with(&[
            "Live".to_owned(),
            "Disconnected".to_owned(),
            "Live".to_owned()
        ]),
        "live, dropped, live again: {statuses:?} {stderr}"
    );
}

#[test]
fn sim_venue_databento_serves_the_gateway_protocol() {
    use tickwire_sim::databento::{cram_reply, TEST_API_KEY};
    let (_sim, addr) = start_sim(&[
        "--venue",
        "databento",
        "--listen",
        "127.0.0.1:0",
        "--rate",
        "2000",
    ]);
    let tcp = std::net::TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(tcp.try_clone().unwrap());
    let mut line = || {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        line
    };
    assert!(line().starts_with("lsg_version="));
    let cram = line();
    let challenge = cram.trim_end().strip_prefix("cram=").unwrap();
    let mut writer = &tcp;
    write!(
        writer,
        "auth={}|dataset=GLBX.MDP3|encoding=dbn|compression=none|ts_out=0|client=cli-test\n\
         schema=mbo|stype_in=raw_symbol|symbols=ESM5|snapshot=0|is_last=1\nstart_session\n",
        cram_reply(challenge, TEST_API_KEY)
    )
    .unwrap();
    assert!(line().starts_with("success=1|session_id="));
    let mut decoder = dbn::decode::DbnDecoder::new(reader).unwrap();
    let mut mbo = 0;
    while mbo < 20 {
        use dbn::decode::DecodeRecordRef;
        let record = decoder.decode_record_ref().unwrap().unwrap();
        if record.get::<dbn::MboMsg>().is_some() {
            mbo += 1;
        }
    }
}

#[test]
fn sim_venue_databento_refuses_flags_of_other_venues() {
    let output = tickwire()
        .args(["sim", "--venue", "databento", "--skip-depth-after", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--skip-depth-after not used"));
    let output = tickwire()
        .args(["sim", "--venue", "thalex", "--split-writes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--split-writes not used"));
}

/// `tickwire sim --venue binance-spot` and `tickwire run` on a `binance-spot` venue file: the
/// appliance's books sync from the simulator's `/api/v3/depth`, its quotes carry no exchange
/// time (Spot's bookTicker has none), and trades and levels flow.
#[test]
fn sim_venue_binance_spot_feeds_a_spot_venue() {
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = dir.path().join("ca");
    let (_sim, addr) = start_sim(&[
        "--venue",
        "binance-spot",
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--rate",
        "500",
        "--symbols",
        "1",
    ]);
    let port = addr.rsplit(':').next().unwrap();
    std::fs::write(
        dir.path().join("venue.toml"),
        format!(
            "name = \"spot\"\nkind = \"binance-spot\"\n\
             url = \"wss://127.0.0.1:{port}/stream\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\", \"depth@100ms\", \"trade\"]\n\
             [tls]\nextra_ca_file = {:?}\n",
            cert_dir.join("ca.pem").display().to_string()
        ),
    )
    .unwrap();
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"venue.toml\"]\n[rings]\nframe_ring_bytes = 16777216\n\
         [net]\nmax_message_bytes = 1048576\n[threads.net]\nwait = \"spin-then-yield\"\n\
         [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let child = tickwire()
        .args(["run", "--print-events", "--config"])
        .arg(&appliance)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) with the child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut kinds = std::collections::BTreeSet::new();
    for line in stdout.lines() {
        let json: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert_eq!(json["venue"], "spot", "{line}");
        if json["type"] == "quote" && json.get("source").is_none() {
            assert_eq!(json["exch_ts_ns"], 0, "a bookTicker has no time: {line}");
        }
        kinds.insert(json["type"].as_str().unwrap().to_owned());
    }
    for kind in ["level", "quote", "snapshot_begin", "snapshot_end", "trade"] {
        assert!(kinds.contains(kind), "no {kind}: {kinds:?}; {stderr}");
    }
    assert!(!kinds.contains("gap"), "{stdout}");
}

/// `tickwire record --venue` against the SBE simulator keeps its binary frames as `base64:`
/// lines, and `tickwire decode --venue binance-spot` reads them back into events, each frame
/// made by sbe-tool's encoder in the simulator.
#[test]
fn record_keeps_sbe_frames_and_decode_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = dir.path().join("ca");
    let (_sim, addr) = start_sim(&[
        "--venue",
        "binance-spot-sbe",
        "--api-key",
        "tickwire-cli-sbe-key",
        "--listen",
        "127.0.0.1:0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--rate",
        "500",
        "--symbols",
        "1",
    ]);
    let port = addr.rsplit(':').next().unwrap();
    let venue = dir.path().join("venue.toml");
    std::fs::write(
        &venue,
        format!(
            "name = \"sbe\"\nkind = \"binance-spot-sbe\"\n\
             url = \"wss://127.0.0.1:{port}/stream\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [\"bestBidAsk\", \"depth\", \"trade\"]\n\
             [tls]\nextra_ca_file = {:?}\n[credentials]\napi_key_env = \"TICKWIRE_CLI_SBE_KEY\"\n",
            cert_dir.join("ca.pem").display().to_string()
        ),
    )
    .unwrap();
    let out = dir.path().join("sbe.gz");
    let output = tickwire()
        .args(["record", "--venue"])
        .arg(&venue)
        .arg("--out")
        .arg(&out)
        .args(["--duration", "3"])
        .env("TICKWIRE_CLI_SBE_KEY", "tickwire-cli-sbe-key")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let recorded = std::io::read_to_string(flate2::read::GzDecoder::new(
        std::fs::File::open(&out).unwrap(),
    ))
    .unwrap();
    let binary = recorded
        .lines()
        .filter(|line| {
            line.split_once(' ')
                .is_some_and(|(_, body)| body.starts_with("base64:"))
        })
        .count();
    assert!(
        binary > 100,
        "{binary} binary lines in {} lines",
        recorded.lines().count()
    );
    let output = tickwire()
        .args(["decode", "--venue", "binance-spot"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(" 0 malformed"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut kinds = std::collections::BTreeSet::new();
    for line in stdout.lines() {
        let json: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(json["symbol"], "BTCUSDT", "{line}");
        kinds.insert(json["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["level", "quote", "trade"],
        "{stderr}"
    );
}

/// Starts `tickwire sim` and returns it with the address on the stderr line that starts with
/// `prefix` (the first word after it).
fn start_sim_saying(args: &[&str], prefix: &str) -> (Running, String) {
    let mut child = tickwire()
        .arg("sim")
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(addr) = line.strip_prefix(prefix) {
            let addr = addr.split_whitespace().next().unwrap().to_owned();
            // Keep draining stderr so the simulator never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines {});
            return (running, addr);
        }
        seen.push(line);
    }
    panic!("the simulator did not say {prefix:?}: {seen:#?}");
}

/// `tickwire record --venue` for `seconds`; panics unless it succeeds. Returns its stderr.
fn record_venue(venue: &Path, out: &Path, seconds: &str, env: &[(&str, &str)]) -> String {
    let output = tickwire()
        .args(["record", "--venue"])
        .arg(venue)
        .arg("--out")
        .arg(out)
        .args(["--duration", seconds])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// A recording's lines as (receive time, message), in order.
fn recorded_lines(path: &Path) -> Vec<(u64, String)> {
    let text = std::io::read_to_string(flate2::read::GzDecoder::new(
        std::fs::File::open(path).unwrap(),
    ))
    .unwrap();
    text.lines()
        .map(|line| {
            let (ns, message) = line.split_once(' ').unwrap();
            (
                ns.parse().expect("a receive time in ns"),
                message.to_owned(),
            )
        })
        .collect()
}

/// `tickwire decode --venue thalex` of a recording: its events without their receive times.
fn thalex_events(path: &Path) -> Vec<serde_json::Value> {
    let output = tickwire()
        .args(["decode", "--venue", "thalex"])
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let mut event: serde_json::Value = serde_json::from_str(line).unwrap();
            event.as_object_mut().unwrap().remove("recv_ts_ns");
            event
        })
        .collect()
}

/// `tickwire record --venue` on a Thalex venue subscribes as the appliance does (the JSON-RPC
/// answers are recorded with the data), and `tickwire sim --venue thalex --source` replays the
/// recording: recording the replay gives the same notifications, byte for byte and in order,
/// and the decoder the same events.
#[test]
fn record_thalex_then_sim_source_replays_the_same_notifications() {
    use tickwire_sim::thalex::{self, ThalexOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut options = ThalexOptions::new(dir.path().join("sim"));
    options.rate = 300.0;
    let sim = thalex::start(options).unwrap();
    let venue_file = |port: u16, ca: &Path| {
        let path = dir.path().join(format!("thalex-{port}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"thalex\"\nkind = \"thalex\"\nurl = \"wss://127.0.0.1:{port}/ws/api/v2\"\n\
                 symbols = [\"BTC-PERPETUAL\", \"ETH-PERPETUAL\"]\n\
                 channels = [\"ticker.100ms\", \"book.none.10.100ms\", \"recent_trades.single\"]\n\
                 [tls]\nextra_ca_file = {:?}\n",
                ca.display().to_string()
            ),
        )
        .unwrap();
        path
    };
    let first = dir.path().join("first.gz");
    let stderr = record_venue(
        &venue_file(sim.addr().port(), sim.ca_pem_path()),
        &first,
        "2",
        &[],
    );
    drop(sim);
    let original = recorded_lines(&first);
    // The subscription's answer, then notifications of every channel; each book's first
    // notification is its snapshot, marked as the venue marks it.
    assert!(
        original[0].1.starts_with(r#"{"id":1,"result":["#),
        "{stderr}: {:?}",
        original[0]
    );
    let notifications: Vec<&str> = original
        .iter()
        .map(|(_, message)| message.as_str())
        .filter(|message| message.starts_with(r#"{"channel_name""#))
        .collect();
    assert!(notifications.len() > 100, "{stderr}");
    for symbol in ["BTC-PERPETUAL", "ETH-PERPETUAL"] {
        let book = format!(r#"{{"channel_name":"book.{symbol}.none.10.100ms""#);
        let first_book = notifications
            .iter()
            .find(|message| message.starts_with(&book))
            .unwrap();
        assert!(first_book.ends_with(r#","snapshot":true}"#), "{first_book}");
        for channel in ["ticker", "recent_trades"] {
            let prefix = format!(r#"{{"channel_name":"{channel}.{symbol}"#);
            assert!(notifications
                .iter()
                .any(|message| message.starts_with(&prefix)));
        }
    }

    // Replay the recording and record the replay.
    let cert_dir = dir.path().join("replay-ca");
    let (_replay, addr) = start_sim_saying(
        &[
            "--venue",
            "thalex",
            "--listen",
            "127.0.0.1:0",
            "--cert-dir",
            cert_dir.to_str().unwrap(),
            "--source",
            first.to_str().unwrap(),
            "--as-fast-as-possible",
        ],
        "sim: Thalex WebSocket API on ",
    );
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let second = dir.path().join("second.gz");
    record_venue(
        &venue_file(port, &cert_dir.join("ca.pem")),
        &second,
        "3",
        &[],
    );
    let replayed = recorded_lines(&second);
    let replayed_notifications: Vec<&str> = replayed
        .iter()
        .map(|(_, message)| message.as_str())
        .filter(|message| message.starts_with(r#"{"channel_name""#))
        .collect();
    assert_eq!(replayed_notifications, notifications);
    assert_eq!(thalex_events(&second), thalex_events(&first));
}

/// `tickwire record --venue` on a Databento venue opens the gateway session as the appliance
/// does (CRAM, subscriptions, `start_session`) and records the DBN stream one unit a line
/// (`base64:`, the metadata first); `tickwire sim --venue databento --source` replays the
/// recording's records, and recording the replay gives the same MBO records, byte for byte.
#[test]
fn record_databento_then_sim_source_replays_the_same_records() {
    use tickwire_sim::databento::{self, DatabentoOptions, TEST_API_KEY};
    const KEY: &str = "TICKWIRE_TEST_RECORD_DATABENTO_KEY";
    let dir = tempfile::tempdir().unwrap();
    let sim = databento::start(DatabentoOptions {
        rate: 2_000.0,
        ..DatabentoOptions::default()
    })
    .unwrap();
    let venue_file = |port: u16| {
        let path = dir.path().join(format!("databento-{port}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"databento\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:{port}\"\n\
                 symbols = [\"ESM5\", \"NQM5\"]\nchannels = [\"mbo\"]\n\
                 [databento]\ndataset = \"GLBX.MDP3\"\n\
                 [credentials]\napi_key_env = \"{KEY}\"\n"
            ),
        )
        .unwrap();
        path
    };
    let env = [(KEY, TEST_API_KEY)];
    let first = dir.path().join("first.gz");
    let stderr = record_venue(&venue_file(sim.addr().port()), &first, "2", &env);
    drop(sim);
    use base64::Engine as _;
    let units = |path: &Path| -> Vec<Vec<u8>> {
        recorded_lines(path)
            .into_iter()
            .map(|(_, message)| {
                let encoded = message.strip_prefix("base64:").expect("a base64 line");
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .unwrap()
            })
            .collect()
    };
    let original = units(&first);
    assert!(original[0].starts_with(b"DBN"), "{stderr}");
    // The rest are whole records, each as long as its length byte says.
    for record in &original[1..] {
        assert_eq!(usize::from(record[0]) * 4, record.len());
    }
    let mbo = |units: &[Vec<u8>]| -> Vec<Vec<u8>> {
        units[1..]
            .iter()
            .filter(|record| record[1] == dbn::rtype::MBO)
            .cloned()
            .collect()
    };
    let original_mbo = mbo(&original);
    assert!(original_mbo.len() > 500, "{stderr}");
    assert!(
        original[1..]
            .iter()
            .any(|record| record[1] == dbn::rtype::SYMBOL_MAPPING),
        "the session's symbol mappings are recorded"
    );

    let (_replay, addr) = start_sim_saying(
        &[
            "--venue",
            "databento",
            "--listen",
            "127.0.0.1:0",
            "--source",
            first.to_str().unwrap(),
            "--rate",
            "0",
        ],
        "sim: listening on ",
    );
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let second = dir.path().join("second.gz");
    record_venue(&venue_file(port), &second, "3", &env);
    let replayed = units(&second);
    assert!(replayed[0].starts_with(b"DBN"));
    assert_eq!(mbo(&replayed), original_mbo);
}

/// One field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {pid}"))
}

/// The bookTickers the last `venue report` line counts (`messages=bookTicker:N ...`).
fn reported_book_tickers(line: &str) -> Option<u64> {
    let field = line.split("messages=").nth(1)?;
    field
        .split_whitespace()
        .find_map(|pair| pair.strip_prefix("bookTicker:"))
        .and_then(|count| count.parse().ok())
}

/// Issue 39: the shipped lean profile (`config/tickwire-lean.toml`, `[process]
/// release_startup_pages = true`) gives start-up's pages back once its venue is live: the
/// process's file-backed resident memory falls, and the feed goes on decoding after it.
#[test]
fn the_lean_profile_gives_startup_pages_back_and_keeps_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _venue) = start_one_symbol_sim(dir.path(), "2000");
    let lean = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tickwire-lean.toml"),
    )
    .unwrap();
    assert!(lean.contains("release_startup_pages = true"), "{lean}");
    let config = dir.path().join("tickwire.toml");
    std::fs::write(
        &config,
        lean.replace(
            "venues = [\"venues/binance-futures.toml\"]",
            "venues = [\"venue.toml\"]",
        )
        .replace("report_interval_ms = 10000", "report_interval_ms = 300"),
    )
    .unwrap();
    let mut child = tickwire()
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let running = Running(child);
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut file_live = None;
    let mut file_released = None;
    let mut decoded_at_release = None;
    let mut decoded = 0;
    while Instant::now() < deadline {
        let Ok(line) = line_rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if file_live.is_none() && line.contains("to=\"live\"") {
            file_live = Some(status_kib(pid, "RssFile:"));
        }
        if line.contains("gave back start-up's code and heap pages") {
            file_released = Some(status_kib(pid, "RssFile:"));
            decoded_at_release = Some(decoded);
        }
        if let Some(count) = reported_book_tickers(&line) {
            decoded = count;
        }
        seen.push(line);
        if decoded_at_release.is_some_and(|at| decoded > at + 1000) {
            break;
        }
    }
    drop(running);
    let log = seen.join("\n");
    let (Some(live), Some(released)) = (file_live, file_released) else {
        panic!("no live connection or no release:\n{log}");
    };
    assert!(
        released < live,
        "RssFile {live} KiB once live, {released} KiB after the release:\n{log}"
    );
    let at = decoded_at_release.unwrap();
    assert!(
        decoded > at + 1000,
        "{decoded} bookTickers decoded, {at} at the release:\n{log}"
    );
}
