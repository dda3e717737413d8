//! The `tickwire` binary as a user runs it: exit codes, error text, and `run` starting its hot
//! threads and stopping cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn check_config_accepts_the_shipped_appliance_file() {
    let output = tickwire()
        .args(["check-config"])
        .arg(repo("config/tickwire.toml"))
        .arg(repo("config/venues/binance-futures.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("tickwire.toml: ok (appliance config)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("binance-futures.toml: ok (venue config)"),
        "{stdout}"
    );
}

/// Issue 36: with several decoders, check-config prints which decoder each venue gets, and
/// refuses a venue's decoder that does not exist.
#[test]
fn check_config_prints_each_venues_decoder_and_refuses_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let venue = |name: &str, decoder: &str| {
        format!(
            "{decoder}name = \"{name}\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:9443\"\nsymbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n"
        )
    };
    std::fs::write(dir.path().join("a.toml"), venue("a", "")).unwrap();
    std::fs::write(dir.path().join("b.toml"), venue("b", "decoder = 0\n")).unwrap();
    let path = dir.path().join("tickwire.toml");
    std::fs::write(
        &path,
        "venues = [\"a.toml\", \"b.toml\"]\n[[threads.decoders]]\n[[threads.decoders]]\n",
    )
    .unwrap();
    let output = tickwire().arg("check-config").arg(&path).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains(
            "  venue a: decoder 1 (by default)\n  venue b: decoder 0 (named in its file)"
        ),
        "{stdout}"
    );
    std::fs::write(dir.path().join("b.toml"), venue("b", "decoder = 2\n")).unwrap();
    let output = tickwire().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("key `decoder`") && stderr.contains("decoder 2 does not exist"),
        "{stderr}"
    );
}

#[test]
fn check_config_names_file_line_and_key_of_a_typo() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.toml");
    std::fs::write(&path, "[threads]\n[threads.net]\nwiat = \"spin\"\n").unwrap();
    let output = tickwire().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}:3:1: key `threads.net.wiat`", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("valid keys here: core, wait"), "{stderr}");
}

/// Issue 32: check-config refuses a key out of its range, naming the key and the range.
#[test]
fn check_config_refuses_an_out_of_range_key_naming_it_and_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.toml");
    std::fs::write(
        &path,
        "[threads]\n[strategy]\nsummary_interval_ms = 9223372036854775807\n",
    )
    .unwrap();
    let output = tickwire().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("key `strategy.summary_interval_ms`")
            && stderr.contains("valid values are 0 (never) to 86400000"),
        "{stderr}"
    );
}

#[test]
fn check_config_prints_pinned_cores_for_the_tuning_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.toml");
    std::fs::write(
        &path,
        "[threads.net]\ncore = 1\n[threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\ncore = 0\n",
    )
    .unwrap();
    let output = tickwire()
        .args(["check-config", "--pinned-cores"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "0,1\n");
}

#[test]
fn run_refuses_an_invalid_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.toml");
    std::fs::write(&path, "[threads.net]\nwait = \"sleepy\"\n").unwrap();
    let output = tickwire()
        .arg("run")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("threads.net.wait"), "{stderr}");
    assert!(stderr.contains("spin-then-yield"), "{stderr}");
}

/// The child's stderr, line by line, read on a thread of its own so a test can wait with a
/// timeout.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    line_rx
}

/// A datagram socket standing in for systemd's notify socket, and its path.
fn notify_socket(dir: &Path) -> (PathBuf, std::os::unix::net::UnixDatagram) {
    let path = dir.join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    (path, socket)
}

/// `tickwire run --config FILE` logging at info, and its stderr's lines.
fn run_logging(config: &Path) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = tickwire()
        .args(["run", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line_rx = stderr_lines(&mut child);
    (child, line_rx)
}

/// Writes an appliance file with no venues, yielding waits and a short report interval.
pub fn quiet_appliance(dir: &Path) -> PathBuf {
    let path = dir.join("tickwire.toml");
    std::fs::write(
        &path,
        "[metrics]\nreport_interval_ms = 200\n[threads.net]\nwait = \"park\"\n\
         [threads.decoder]\nwait = \"park\"\n[threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    path
}

#[test]
fn run_starts_its_threads_reports_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let config = quiet_appliance(dir.path());
    let (mut child, line_rx) = run_logging(&config);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let mut reports = 0;
    while reports < 2 && Instant::now() < deadline {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(100)) {
            if line.contains("report") {
                reports += 1;
            }
            seen.push(line);
        }
    }
    let log = seen.join("\n");
    assert_eq!(reports, 2, "no periodic reports:\n{log}");
    for thread in ["tw-net", "tw-decoder", "tw-strategy"] {
        assert!(
            log.contains(&format!("thread={thread}")),
            "{thread} not started:\n{log}"
        );
    }
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    while let Ok(line) = line_rx.recv_timeout(Duration::from_secs(2)) {
        seen.push(line);
    }
    let log = seen.join("\n");
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(
        log.contains("stopping") && log.contains("signal 15"),
        "{log}"
    );
}

/// Issue 39: with `[process] housekeeping_cores`, every thread but the pinned hot one runs on
/// the housekeeping cores (read from each thread's `Cpus_allowed_list` while it runs), and the
/// hot thread alone on its own core.
#[test]
fn run_keeps_every_thread_but_the_hot_one_on_the_housekeeping_cores() {
    if tickwire::config::host_cpu_count() < 2
        || std::thread::available_parallelism().map_or(1, usize::from) < 2
    {
        eprintln!("skipped: needs two cores this process may run on");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tickwire.toml");
    std::fs::write(
        &config,
        "[metrics]\nreport_interval_ms = 200\n[process]\nhousekeeping_cores = [0]\n\
         [threads.net]\ncore = 1\nwait = \"park\"\n[threads.decoder]\nfuse_into = \"net\"\n\
         [threads.strategy]\nfuse_into = \"decoder\"\n",
    )
    .unwrap();
    let (mut child, line_rx) = run_logging(&config);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline && !seen.iter().any(|line: &String| line.contains("report")) {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(100)) {
            seen.push(line);
        }
    }
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap() {
        let task = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(task.join("status")) else {
            continue;
        };
        let allowed = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_owned();
        threads.push((name.trim().to_owned(), allowed));
    }
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let log = seen.join("\n");
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(log.contains("housekeeping cores"), "{log}");
    assert!(threads.len() >= 2, "{threads:?}");
    for (name, allowed) in &threads {
        let expected = if name == "tw-net" { "1" } else { "0" };
        assert_eq!(allowed, expected, "thread {name}: {threads:?}");
    }
    assert!(
        threads.iter().any(|(name, _)| name == "tw-net"),
        "{threads:?}"
    );
}

/// `tickwire run` as `systemd/tickwire.service` starts it (Type=notify, WatchdogSec): READY=1,
/// then WATCHDOG=1 pings while the hot threads make progress, then STOPPING=1 on SIGTERM, all
/// on a notify socket this test provides.
#[test]
fn run_notifies_systemd_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let config = quiet_appliance(dir.path());
    let (socket_path, socket) = notify_socket(dir.path());
    let mut child = tickwire()
        .args(["run", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket_path)
        // 400 ms: the appliance pings every 200 ms.
        .env("WATCHDOG_USEC", "400000")
        .env_remove("WATCHDOG_PID")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut messages = Vec::new();
    let mut buf = [0u8; 1024];
    let mut pings = 0;
    while pings < 3 {
        let Ok(len) = socket.recv(&mut buf) else {
            break;
        };
        let message = String::from_utf8_lossy(&buf[..len]).into_owned();
        if message == "WATCHDOG=1" {
            pings += 1;
        }
        messages.push(message);
    }
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    while let Ok(len) = socket.recv(&mut buf) {
        messages.push(String::from_utf8_lossy(&buf[..len]).into_owned());
        if messages.last().is_some_and(|m| m.starts_with("STOPPING=1")) {
            break;
        }
    }
    assert!(status.success(), "{status:?}");
    assert!(
        messages[0].starts_with("READY=1\nSTATUS=running: 3 hot threads"),
        "{messages:?}"
    );
    assert_eq!(pings, 3, "{messages:?}");
    assert!(
        messages
            .last()
            .is_some_and(|m| m.starts_with("STOPPING=1\nSTATUS=stopping: signal 15")),
        "{messages:?}"
    );
}

/// `tickwire run` with one venue: it resolves and connects the venue's stream (TLS with the
/// venue's extra CA, the WebSocket upgrade for the configured symbols and channels) on its
/// network thread, sends READY=1 once the venue is live, and the frames reach the decoder stage.
#[test]
fn run_connects_a_venue_and_is_ready_once_it_is_live() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let python_ok = Command::new("python3")
        .args(["-c", "import websockets.asyncio.server"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !python_ok {
        assert!(
            std::env::var("TICKWIRE_REQUIRE_PYTHON_WEBSOCKETS").as_deref() != Ok("1"),
            "python3 with websockets is required here"
        );
        crate::support::skip::skipped("python3 with the websockets package is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let (ca_path, cert_path, key_path) = (
        dir.path().join("ca.pem"),
        dir.path().join("server.pem"),
        dir.path().join("server.key"),
    );
    std::fs::write(&ca_path, ca.pem()).unwrap();
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let mut server = Command::new("python3")
        .arg(repo("tests/support/ws_server.py"))
        .args(["stream", "--cert"])
        .arg(&cert_path)
        .arg("--key")
        .arg(&key_path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line.trim().strip_prefix("READY ").unwrap().parse().unwrap();
    std::fs::create_dir_all(dir.path().join("venues")).unwrap();
    std::fs::write(
        dir.path().join("venues/local.toml"),
        format!(
            "name = \"local\"\nkind = \"binance-usdm-futures\"\nurl = \"wss://localhost:{port}\"\n\
             symbols = [\"BTCUSDT\"]\nchannels = [\"bookTicker\"]\n[tls]\nextra_ca_file = \"{}\"\n",
            ca_path.display()
        ),
    )
    .unwrap();
    let config = dir.path().join("tickwire.toml");
    std::fs::write(
        &config,
        "venues = [\"venues/local.toml\"]\n[metrics]\nreport_interval_ms = 200\n\
         [threads.net]\nwait = \"park\"\n[threads.decoder]\nfuse_into = \"net\"\n\
         [threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let (socket_path, socket) = notify_socket(dir.path());
    let mut child = tickwire()
        .args(["run", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket_path)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line_rx = stderr_lines(&mut child);
    let mut buf = [0u8; 1024];
    let mut ready = None;
    while ready.is_none() {
        let Ok(len) = socket.recv(&mut buf) else {
            break;
        };
        let message = String::from_utf8_lossy(&buf[..len]).into_owned();
        if message.starts_with("READY=1") {
            ready = Some(message);
        }
    }
    // Messages flow: the venue report counts the bookTickers the feed decoded.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = Vec::new();
    let mut frames_seen = false;
    while !frames_seen && Instant::now() < deadline {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(100)) {
            // Only the kinds the venue sent are listed, so a count of 0 never shows.
            frames_seen = line.contains("venue report")
                && line.contains("messages=")
                && line.contains("bookTicker:");
            log.push(line);
        }
    }
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    let stop_took = signalled.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    while let Ok(line) = line_rx.recv_timeout(Duration::from_secs(2)) {
        log.push(line);
    }
    let log = log.join("\n");
    // A clean stop: the close frame answered, the rings drained, well inside systemd's
    // TimeoutStopSec (the design's budget is 2 s; this bound only catches a hang).
    assert!(
        log.contains("reason=\"shutdown\"") && log.contains("stopped: connections closed"),
        "{log}"
    );
    assert!(stop_took < Duration::from_secs(10), "{stop_took:?}\n{log}");
    assert_eq!(
        ready.as_deref(),
        Some("READY=1\nSTATUS=running: 2 hot threads; 1/1 venues live"),
        "{log}"
    );
    assert!(frames_seen, "no message was decoded:\n{log}");
    assert!(
        log.contains("to=\"live\"") || log.contains("to=live"),
        "{log}"
    );
    assert!(status.success(), "{status:?}\n{log}");
}

/// Where io_uring cannot be set up (here: a seccomp filter that refuses `io_uring_setup`, as a
/// container runtime's default profile does), `run` falls back to epoll by itself and says so in
/// one log line.
#[cfg(target_arch = "x86_64")]
#[test]
fn run_falls_back_to_epoll_where_io_uring_is_refused() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let config = quiet_appliance(dir.path());
    let mut command = tickwire();
    command
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec and only makes two prctl
    // calls on data it owns (async-signal-safe).
    unsafe {
        command.pre_exec(|| {
            // seccomp BPF: load the syscall number; io_uring_setup (425 on x86_64) gets
            // ENOSYS, everything else is allowed.
            #[repr(C)]
            struct SockFilter {
                code: u16,
                jt: u8,
                jf: u8,
                k: u32,
            }
            #[repr(C)]
            struct SockFprog {
                len: u16,
                filter: *const SockFilter,
            }
            let filter = [
                SockFilter {
                    code: 0x20,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                SockFilter {
                    code: 0x15,
                    jt: 0,
                    jf: 1,
                    k: 425,
                },
                SockFilter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x0005_0000 | libc::ENOSYS as u32,
                },
                SockFilter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: 0x7fff_0000,
                },
            ];
            let program = SockFprog {
                len: filter.len() as u16,
                filter: filter.as_ptr(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, 2, &program as *const SockFprog, 0, 0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let line_rx = stderr_lines(&mut child);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = Vec::new();
    let mut backend_line = None;
    while backend_line.is_none() && Instant::now() < deadline {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(100)) {
            if line.contains("network backend:") {
                backend_line = Some(line.clone());
            }
            log.push(line);
        }
    }
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let line = backend_line.unwrap_or_else(|| panic!("no backend line:\n{}", log.join("\n")));
    assert!(
        line.contains("network backend: epoll, because io_uring is unavailable here"),
        "{line}"
    );
    assert!(status.success(), "{status:?}");
}

#[test]
fn check_config_accepts_the_binance_spot_file_and_refuses_what_spot_has_not() {
    let output = tickwire()
        .args(["check-config"])
        .arg(repo("config/venues/binance-spot.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("binance-spot.toml: ok (venue config)"),
        "{stdout}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spot.toml");
    std::fs::write(
        &path,
        "name = \"spot\"\nkind = \"binance-spot\"\nurl = \"wss://stream.binance.com:9443/stream\"\n\
         rest_url = \"https://api.binance.com\"\nsymbols = [\"BTCUSDT\"]\n\
         channels = [\"depth@0ms\"]\nbook_depth = 6000\n",
    )
    .unwrap();
    let output = tickwire().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"depth@0ms\" is not a binance-spot channel"),
        "{stderr}"
    );
    assert!(
        stderr.contains("6000 is not a depth binance-spot serves"),
        "{stderr}"
    );
}
