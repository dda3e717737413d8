//! The README stays true: its examples run, the names it uses ship, the `../shared` files the
//! tests read are listed, and a skipped test is seen by whoever runs `cargo test`.
//!
//! The examples are taken from README.md itself when the test runs (a fenced block of the
//! language, found by what it uses), with only the bus path or the recording's path replaced by
//! the test's own, and run against a bus this test writes (trades of `binance-futures`
//! `BTCUSDT`): the Rust reader (compiled here: its text must equal [`rust_bus_example`]'s body),
//! the C reader (wrapped in a `main`, built with `cc -Werror`), the Python readers (README.md's
//! and `clients/python/README.md`'s), the `databento` snippet on a recording `tickwire record`
//! makes of that bus, the quick start's commands (`cargo run --release -- demo` is the binary's
//! `demo`; each `tickwire` command line's options must be ones its `--help` lists), and the NATS
//! section (its appliance file, the bridge and `tail --nats` commands, its Rust reader and
//! `clients/python/README.md`'s NATS reader, against a real `nats-server`); every TOML block
//! passes `tickwire check-config`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Quote, Side, Trade};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};

/// The path the README's bus examples use, replaced by the test's bus.
const README_BUS: &str = "/run/tickwire/tickwire.bus";
/// The venue and symbol of the test bus: a shipped venue's name, as the docs use.
const VENUE: &str = "binance-futures";
const SYMBOL: &str = "BTCUSDT";
/// How long an example may take to print its first trade.
const PATIENCE: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|error| panic!("read {relative}: {error}"))
}

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

/// The fenced code blocks of `lang` in a Markdown text, each without its fence's indentation
/// (blocks inside list items are indented).
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match current.take() {
            None => {
                if trimmed.strip_prefix("```") == Some(lang) {
                    current = Some((indent, String::new()));
                }
            }
            Some((fence, mut text)) => {
                if trimmed == "```" {
                    out.push(text);
                } else {
                    let cut = line
                        .char_indices()
                        .nth(fence)
                        .map_or(line.len(), |(at, _)| at)
                        .min(indent);
                    text.push_str(&line[cut..]);
                    text.push('\n');
                    current = Some((fence, text));
                }
            }
        }
    }
    out
}

/// The one block of `lang` in `markdown` that contains every one of `needles`.
fn block_with(markdown: &str, lang: &str, needles: &[&str], file: &str) -> String {
    let found: Vec<String> = blocks(markdown, lang)
        .into_iter()
        .filter(|block| needles.iter().all(|needle| block.contains(needle)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{file}: expected one ```{lang} block with {needles:?}, found {}",
        found.len()
    );
    found.into_iter().next().unwrap()
}

fn price(n: u64) -> Fixed {
    Fixed::parse_str(&format!("{}.5", 60_000 + n % 1000)).unwrap()
}

/// A bus in a temporary folder, with a thread publishing quotes and trades of
/// `binance-futures` `BTCUSDT` every few milliseconds until it is dropped: the examples start at
/// the latest event, so the trades must keep coming.
struct LiveBus {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// The bus's request socket, as the appliance's: the Python `Books` asks for snapshots
    /// (a bus without it is refused as not running).
    _requests: std::os::unix::net::UnixDatagram,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveBus {
    fn start() -> LiveBus {
        let dir = tempfile::Builder::new()
            .prefix("tickwire-readme-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("tickwire.bus");
        let options = BusOptions {
            path: path.clone(),
            geometry: Geometry::new(65_536, 64).unwrap(),
            group: None,
        };
        let mut writer = BusWriter::create(&options, 1, now_ns()).expect("create the bus");
        writer
            .add_instrument(&DirectoryEntry {
                instrument_id: 1,
                venue_id: 0,
                venue: VENUE.into(),
                symbol: SYMBOL.into(),
                venue_symbol: SYMBOL.to_lowercase(),
            })
            .unwrap();
        let requests =
            std::os::unix::net::UnixDatagram::bind(tickwire_bus::request_socket_path(&path))
                .expect("bind the bus's request socket");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = Arc::clone(&stop);
            move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let header = |kind| EventHeader {
                        exchange_ts_ns: now_ns(),
                        recv_ts_ns: now_ns(),
                        venue_seq: n,
                        instrument_id: 1,
                        venue_id: 0,
                        kind,
                        flags: 0,
                    };
                    writer.write(&Event::new(
                        header(EventKind::Quote),
                        Body::Quote(Quote {
                            bid_px: price(n),
                            bid_sz: Fixed::parse_str("1.25").unwrap(),
                            ask_px: price(n + 1),
                            ask_sz: Fixed::parse_str("2").unwrap(),
                        }),
                    ));
                    writer.write(&Event::new(
                        header(EventKind::Trade),
                        Body::Trade(Trade::new(
                            price(n),
                            Fixed::parse_str("0.5").unwrap(),
                            n,
                            Side::Bid,
                        )),
                    ));
                    writer.publish();
                    n += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        LiveBus {
            _dir: dir,
            path,
            _requests: requests,
            stop,
            thread: Some(thread),
        }
    }

    fn path(&self) -> &str {
        self.path.to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for LiveBus {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// A running example: its stdout lines on a channel, killed when dropped.
struct Running {
    child: Child,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    what: String,
}

impl Running {
    fn spawn(command: &mut Command, what: &str) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("start {what}: {error}"));
        let pipe = |reader: Box<dyn std::io::Read + Send>| {
            let (sender, receiver) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(reader).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            });
            receiver
        };
        let lines = pipe(Box::new(child.stdout.take().unwrap()));
        let stderr = pipe(Box::new(child.stderr.take().unwrap()));
        Running {
            child,
            lines,
            stderr,
            what: what.to_owned(),
        }
    }

    /// Waits for a stdout line that `wanted` accepts; panics with what the example printed when
    /// none comes within [`PATIENCE`] or the example exits first.
    fn expect_line(&mut self, wanted: impl Fn(&str) -> bool, description: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return line,
                Ok(line) => {
                    if seen.len() < 20 {
                        seen.push(line);
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.child.kill();
                    let status = self.child.wait().ok();
                    let stderr: Vec<String> = self.stderr.try_iter().take(40).collect();
                    panic!(
                        "{} printed no {description} (exit: {status:?});\nstdout: {seen:#?}\nstderr: {}",
                        self.what,
                        stderr.join("\n")
                    );
                }
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `line` ends with one of the test bus's trade prices.
fn is_trade_price(text: &str) -> bool {
    text.strip_suffix(".5")
        .and_then(|whole| whole.parse::<u64>().ok())
        .is_some_and(|whole| (60_000..61_000).contains(&whole))
}

// ---------------------------------------------------------------------------------------------
// Rust

/// The README's Rust bus example, compiled: `rust_bus_example_is_the_readmes` checks that its
/// body (between the markers) is the README's text with the path replaced by `bus`.
#[rustfmt::skip] // the README's text, as it is there
fn rust_bus_example(bus: &str) -> Result<(), Box<dyn std::error::Error>> {
    // README example begins
    use std::time::Duration;
    use tickwire_client::{Client, Next};

    let mut client = Client::attach_wait(bus, Duration::from_secs(10))?;
    loop {
        match client.wait(Duration::from_secs(1))? {
            Next::Events(events) => {
                for event in events {
                    let (venue, symbol) = events.name(event);
                    println!("{venue} {symbol} {:?}", event.body());
                }
            }
            Next::Overrun { missed, partition } => {
                eprintln!("lapped: {missed} events of partition {partition:?} lost")
            }
            Next::NewEpoch { epoch } => eprintln!("appliance restarted (epoch {epoch})"),
            Next::Closed | Next::Removed | Next::Idle => {}
        }
    }
    // README example ends
}

/// Runs [`rust_bus_example`] in a process of its own (this binary, started by
/// `readme_rust_bus_example_prints_the_trades`), since it loops for ever.
#[test]
#[ignore = "a child of readme::readme_rust_bus_example_prints_the_trades"]
fn rust_bus_example_child() {
    if let Ok(bus) = std::env::var("TICKWIRE_README_BUS") {
        if let Err(error) = rust_bus_example(&bus) {
            panic!("the README's Rust example failed: {error}");
        }
    }
}

#[test]
fn rust_bus_example_is_the_readmes() {
    let readme = read("README.md");
    let example = block_with(
        &readme,
        "rust",
        &["tickwire_client", "attach_wait"],
        "README.md",
    );
    let compiled = compiled_example("README example");
    let expected = example.replace(&format!("{README_BUS:?}"), "bus");
    assert_eq!(
        compiled, expected,
        "README.md's Rust bus example and the copy tests/readme.rs compiles and runs differ"
    );
}

#[test]
fn readme_rust_bus_example_prints_the_trades() {
    let bus = LiveBus::start();
    let mut running = Running::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "readme::rust_bus_example_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TICKWIRE_README_BUS", bus.path()),
        "the README's Rust bus example",
    );
    let line = running.expect_line(
        |line| line.contains(&format!("{VENUE} {SYMBOL} Trade(Trade {{ price: Fixed(")),
        "trade of the test bus",
    );
    let price = line
        .split("price: Fixed(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_default();
    assert!(is_trade_price(price), "{line}");
}

// ---------------------------------------------------------------------------------------------
// C

#[test]
fn readme_c_bus_example_prints_the_trades() {
    if !crate::bus_clients::cc_available() {
        return;
    }
    let readme = read("README.md");
    let example = block_with(
        &readme,
        "c",
        &["tickwire_bus.h", "tw_bus_open"],
        "README.md",
    );
    // Its own preprocessor lines stay at the top (nothing added: the example must say what it
    // needs); the rest is `main`'s body, reading the bus in argv[1].
    let (includes, body): (Vec<&str>, Vec<&str>) =
        example.lines().partition(|line| line.starts_with('#'));
    let mut program = String::new();
    for line in includes {
        program.push_str(line);
        program.push('\n');
    }
    program.push_str("int main(int argc, char **argv) {\n    if (argc < 2) return 2;\n");
    for line in body {
        program.push_str("    ");
        program.push_str(&line.replace(&format!("{README_BUS:?}"), "argv[1]"));
        program.push('\n');
    }
    program.push_str("    return 0;\n}\n");
    assert!(
        program.contains("argv[1]"),
        "the README's C example names no bus path"
    );
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("readme_example.c");
    std::fs::write(&source, &program).unwrap();
    let binary = crate::bus_clients::build_c(&source, dir.path());

    let bus = LiveBus::start();
    let mut running = Running::spawn(
        Command::new(&binary).arg(bus.path()),
        "the README's C bus example",
    );
    running.expect_line(
        |line| line.strip_prefix("trade ").is_some_and(is_trade_price),
        "`trade PRICE` line",
    );
}

// ---------------------------------------------------------------------------------------------
// Python

fn numpy_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required =
            std::env::var("TICKWIRE_REQUIRE_BUS_CLIENTS").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_BUS_CLIENTS=1 but python3 with numpy is missing (pip install numpy)"
        );
        crate::support::skip::skipped("python3 with numpy is not installed (pip install numpy)");
    }
    ok
}

fn run_python_bus_example(file: &str) {
    if !numpy_available() {
        return;
    }
    let markdown = read(file);
    let example = block_with(&markdown, "python", &["tickwire_bus", "follow("], file);
    assert!(
        example.contains(&format!("{README_BUS:?}")),
        "{file}'s Python bus example does not read {README_BUS}"
    );
    let bus = LiveBus::start();
    let code = example.replace(&format!("{README_BUS:?}"), &format!("{:?}", bus.path()));
    let mut running = Running::spawn(
        Command::new("python3")
            .args(["-c", &code])
            .env("PYTHONPATH", root().join("clients/python"))
            .env("PYTHONUNBUFFERED", "1"),
        &format!("{file}'s Python bus example"),
    );
    running.expect_line(
        |line| {
            line.strip_prefix(&format!("{SYMBOL} "))
                .is_some_and(is_trade_price)
        },
        "`BTCUSDT PRICE` line of a trade",
    );
}

#[test]
fn readme_python_bus_example_prints_the_trades() {
    run_python_bus_example("README.md");
}

#[test]
fn python_client_readme_example_prints_the_trades() {
    run_python_bus_example("clients/python/README.md");
}

/// The README's Python bus example is the Python package's own, line for line (`blocks` takes
/// off the README's list-item indent).
#[test]
fn the_python_bus_examples_are_one() {
    let readme = block_with(
        &read("README.md"),
        "python",
        &["tickwire_bus", "follow("],
        "README.md",
    );
    let package = block_with(
        &read("clients/python/README.md"),
        "python",
        &["tickwire_bus", "follow("],
        "clients/python/README.md",
    );
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| line.trim_end().to_owned())
            .collect()
    };
    assert_eq!(lines(&readme), lines(&package));
}

// ---------------------------------------------------------------------------------------------
// The databento snippet, on a recording of the test bus

#[test]
fn readme_databento_snippet_reads_a_recording() {
    let readme = read("README.md");
    let snippet = block_with(
        &readme,
        "python",
        &["import databento", "from_file("],
        "README.md",
    );
    let python_has = Command::new("python3")
        .args(["-c", "import databento"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !python_has {
        let required = std::env::var("TICKWIRE_REQUIRE_DBN_PYTHON").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_DBN_PYTHON=1 but Python lacks databento (pip install databento)"
        );
        crate::support::skip::skipped("Python lacks databento (pip install databento)");
        return;
    }
    let named = snippet
        .split("from_file(\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the snippet's file")
        .to_owned();

    let bus = LiveBus::start();
    let out = tempfile::tempdir().unwrap();
    let output = tickwire()
        .args(["record", "--events", "--bus", bus.path(), "--out"])
        .arg(out.path())
        .args(["--duration", "2"])
        .output()
        .unwrap();
    drop(bus);
    assert!(
        output.status.success(),
        "tickwire record: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let files: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let recorded = &files[0];
    // The README's file is named as the recorder names a file of a shipped venue.
    let stem = |path: &Path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        tickwire_record::venue_of_file_name(&name).map(str::to_owned)
    };
    assert_eq!(
        stem(Path::new(&named)),
        stem(recorded),
        "the README's recording {named} is not named as the recorder names {VENUE}'s"
    );
    let code = format!(
        "{}\nprint('quotes', len(quotes), 'trades', len(trades), 'prices', sorted(set(trades.price.astype(str)))[:3])\n",
        snippet.replace(&named, recorded.to_str().unwrap())
    );
    let output = Command::new("python3")
        .args(["-c", &code])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the README's databento snippet failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let counts: Vec<u64> = stdout
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    assert!(
        counts.len() >= 2 && counts[0] > 0 && counts[1] > 0,
        "the snippet found no quotes or no trades: {stdout}"
    );
}

// ---------------------------------------------------------------------------------------------
// The commands

/// `tickwire <command words>` and the options on a command line of the README.
fn command_line(line: &str) -> Option<(Vec<String>, Vec<String>)> {
    let line = line.split(" #").next().unwrap_or(line).trim();
    let line = line.trim_end_matches('&').trim();
    let rest = line
        .strip_prefix("tickwire ")
        .or_else(|| line.strip_prefix("cargo run --release -- "))?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let command: Vec<String> = words
        .iter()
        .take_while(|word| !word.starts_with('-'))
        .take(2)
        .map(|word| word.to_string())
        .collect();
    let options = words
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap().to_owned())
        .collect();
    Some((command, options))
}

#[test]
fn readme_shell_commands_are_the_binarys() {
    let readme = read("README.md");
    let mut checked = 0;
    for block in blocks(&readme, "sh") {
        for line in block.lines() {
            let Some((mut command, options)) = command_line(line) else {
                continue;
            };
            // The second word is a subcommand only where the first has subcommands.
            if command.first().map(String::as_str) != Some("bridge") {
                command.truncate(1);
            }
            let output = tickwire().args(&command).arg("--help").output().unwrap();
            let help = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "README: `{line}`: `tickwire {} --help` fails",
                command.join(" ")
            );
            for option in options {
                assert!(
                    help.contains(&format!("{option} ")) || help.contains(&format!("{option}\n")),
                    "README: `{line}`: `tickwire {}` has no {option}",
                    command.join(" ")
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 3,
        "the README's shell blocks hold {checked} tickwire commands"
    );
}

/// The quick start's `cargo run --release -- demo` (the same binary, built for tests): it runs
/// on its own, prints the status page and the bus it publishes, and exits 0.
#[test]
fn readme_quick_start_demo_runs() {
    let readme = read("README.md");
    let quick_start = readme
        .split("## Quick start")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Quick start section");
    let demo = blocks(quick_start, "sh")
        .iter()
        .flat_map(|block| block.lines().map(str::to_owned).collect::<Vec<_>>())
        .find(|line| line.starts_with("cargo run --release -- "))
        .expect("the quick start runs the demo");
    let arguments: Vec<&str> = demo
        .trim_start_matches("cargo run --release -- ")
        .split_whitespace()
        .collect();
    assert_eq!(arguments.first(), Some(&"demo"), "{demo}");
    let output = tickwire().args(&arguments).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "`tickwire {}`: {stdout}\n{}",
        arguments.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("status page: http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(stdout.contains("event bus: "), "{stdout}");
    assert!(stdout.contains("BTCUSDT bid"), "{stdout}");
}

// ---------------------------------------------------------------------------------------------
// Names that ship

/// The `name` of every shipped venue file.
fn shipped_venue_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("config/venues")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let table: toml::Table = text.parse().unwrap();
        if let Some(name) = table.get("name").and_then(toml::Value::as_str) {
            names.insert(name.to_owned());
        }
    }
    names
}

/// The words of `text` that start with `prefix` up to a character no name or path holds.
fn words_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(prefix) {
        let start = from + at;
        let boundary = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'));
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || "`'\"),]".contains(c))
            .map_or(text.len(), |len| start + len);
        if boundary || prefix.starts_with('/') {
            out.push(&text[start..end]);
        }
        from = end.max(start + 1);
    }
    out
}

/// The names a text gives that must ship: venue files, the venue in NATS subjects, the venue a
/// recording's file name starts with. Returns what is wrong.
fn wrong_names(file: &str, text: &str, venues: &BTreeSet<String>) -> Vec<String> {
    let mut wrong = Vec::new();
    for path in words_starting(text, "venues/") {
        let path = path.trim_end_matches(['.', ':']);
        if path.ends_with(".toml")
            && !path.contains('*')
            && !root().join("config").join(path).is_file()
        {
            wrong.push(format!("{file}: {path} is not a file of config/venues/"));
        }
    }
    for subject in words_starting(text, "tickwire.") {
        let parts: Vec<&str> = subject.split('.').collect();
        // tickwire.<appliance>.<venue>.<symbol>.<kind>: a venue named outright must ship.
        if parts.len() >= 4 {
            let venue = parts[2];
            let placeholder = venue.starts_with('<') || matches!(venue, "*" | ">" | "%2A");
            if !placeholder && !venues.contains(venue) {
                wrong.push(format!(
                    "{file}: subject {subject} names venue {venue}, which no config/venues/ file is"
                ));
            }
        }
    }
    let mut from = 0;
    while let Some(at) = text[from..].find(".dbn.zst") {
        let end = from + at;
        let start = text[..end]
            .rfind(|c: char| c.is_whitespace() || "/`'\"(".contains(c))
            .map_or(0, |at| at + 1);
        let name = &text[start..end + ".dbn.zst".len()];
        if let Some(venue) = tickwire_record::venue_of_file_name(name) {
            if !venue.starts_with('<') && !venues.contains(venue) {
                wrong.push(format!(
                    "{file}: recording {name} is of venue {venue}, which no config/venues/ file is"
                ));
            }
        }
        from = end + 1;
    }
    wrong
}

#[test]
fn docs_and_help_name_the_venues_that_ship() {
    let venues = shipped_venue_names();
    assert!(venues.contains(VENUE), "{venues:?}");
    let mut wrong = Vec::new();
    for file in [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKING.md",
        "clients/python/README.md",
        "tuning/README.md",
        "config/tickwire.toml",
    ] {
        if root().join(file).is_file() {
            wrong.extend(wrong_names(file, &read(file), &venues));
        }
    }
    for command in [
        &["tail"][..],
        &["record"],
        &["replay"],
        &["bridge", "nats"],
        &["run"],
    ] {
        let output = tickwire().args(command).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&output.stdout).into_owned();
        let what = format!("tickwire {} --help", command.join(" "));
        wrong.extend(wrong_names(&what, &help, &venues));
        // "(its name in the directory, e.g. NAME)": an example venue name must ship.
        for line in help.lines().filter(|line| line.contains("venue")) {
            for example in line.split("e.g. ").skip(1) {
                let name = example
                    .split(|c: char| c.is_whitespace() || ")`,;".contains(c))
                    .next()
                    .unwrap_or_default();
                if name.contains('-') && !name.contains('.') && !venues.contains(name) {
                    wrong.push(format!("{what}: example venue {name} does not ship"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "names that do not ship:\n{}",
        wrong.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// ../shared

/// Every `../shared` file or folder a test reads, as `data/<...>` or `reference/<...>`.
fn shared_files_the_tests_read() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push(path);
            }
        }
    }
    let mut sources = Vec::new();
    walk(&root().join("tests"), &mut sources);
    let mut found = BTreeSet::new();
    for source in sources {
        if source.ends_with("readme.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&source).unwrap();
        for (call, folder) in [
            ("shared_data(", "data"),
            ("shared_dir(", "data"),
            ("shared_reference(", "reference"),
            ("tickwire_test_data(", "data"),
        ] {
            for after in text.split(call).skip(1) {
                let argument = after.split(')').next().unwrap_or_default().trim();
                let value = if let Some(literal) = argument.strip_prefix('"') {
                    literal.trim_end_matches('"').to_owned()
                } else if !argument.is_empty() && !argument.contains(' ') {
                    // A constant: `const NAME: &str = "...";` in the same file.
                    match text
                        .split(&format!("const {argument}: &str = \""))
                        .nth(1)
                        .and_then(|rest| rest.split('"').next())
                    {
                        Some(value) => value.to_owned(),
                        None => continue,
                    }
                } else {
                    continue;
                };
                found.insert(format!("{folder}/{value}"));
            }
        }
    }
    found
}

#[test]
fn readme_lists_every_shared_file_the_tests_read() {
    let readme = read("README.md");
    let files = shared_files_the_tests_read();
    assert!(
        files.contains("reference/thalex/api.yaml") && files.len() >= 5,
        "{files:?}"
    );
    let missing: Vec<&String> = files
        .iter()
        .filter(|file| {
            // Each file itself, or its folder (`../shared/data/dbn/`), is named.
            let folder = file.rsplit_once('/').map_or(file.as_str(), |(dir, _)| dir);
            !readme.contains(&format!("../shared/{file}"))
                && !readme.contains(&format!("../shared/{folder}/`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README.md does not name these ../shared files the tests read: {missing:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Skips are seen

/// A test that skips, run by `a_skipped_test_is_seen_with_its_reason_and_counted` in a process
/// of its own: `cc` and `python3` are not on its `PATH`.
#[test]
#[ignore = "a child of readme::a_skipped_test_is_seen_with_its_reason_and_counted"]
fn skipping_child() {
    if std::env::var_os("TICKWIRE_README_SKIP_CHILD").is_none() {
        return;
    }
    assert!(!crate::bus_clients::cc_available());
    assert!(!numpy_available());
}

#[test]
fn a_skipped_test_is_seen_with_its_reason_and_counted() {
    // As a user runs it: output captured (no --nocapture), no TICKWIRE_REQUIRE_* variable.
    let empty = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "readme::skipping_child", "--ignored"])
        .env("PATH", empty.path())
        .env("TICKWIRE_README_SKIP_CHILD", "1");
    for (key, _) in std::env::vars() {
        if key.starts_with("TICKWIRE_REQUIRE_") {
            command.env_remove(key);
        }
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let both = format!("{stdout}{stderr}");
    let reasons = [
        "SKIPPED readme::skipping_child: a C compiler (cc) is not installed (apt-get install -y gcc)",
        "SKIPPED readme::skipping_child: python3 with numpy is not installed (pip install numpy)",
    ];
    for reason in reasons {
        assert!(both.contains(reason), "no `{reason}` in:\n{both}");
    }
    // The count and the reasons again, as the last lines, after libtest's result.
    let summary = stderr
        .find(": 2 skips in 1 test, ")
        .unwrap_or_else(|| panic!("no count of the skips in:\n{stderr}"));
    let tail = &stderr[summary..];
    for reason in reasons {
        assert!(
            tail.contains(reason),
            "the summary lacks `{reason}`:\n{tail}"
        );
    }
    assert!(
        tail.trim_end().ends_with(reasons[1]),
        "the summary is not the end of the output:\n{tail}"
    );
}

// ---------------------------------------------------------------------------------------------
// NATS: the README's commands and its Rust reader, against a real nats-server

/// The servers the README's NATS section names, replaced by the test's server.
const README_NATS_URLS: [&str; 3] = [
    "nats://10.0.0.5:4222",
    "nats://10.0.0.6:4222",
    "nats://10.0.0.7:4222",
];

/// The README's NATS Rust example, compiled: `rust_nats_example_is_the_readmes` checks that its
/// body is the README's text with the servers replaced by `urls`.
#[rustfmt::skip] // the README's text, as it is there
fn rust_nats_example(urls: &str) -> Result<(), Box<dyn std::error::Error>> {
    // README NATS example begins
    use tickwire_nats::{NatsClient, NatsOptions, Next, bridge::parse_servers};
    let mut client = NatsClient::connect(NatsOptions::new(
        parse_servers(urls)?,
        vec!["tickwire.>".into()],
    ))?;
    loop {
        match client.wait(std::time::Duration::from_secs(1))? {
            Next::Events(events) => {
                for event in events {
                    let (venue, symbol) = events.name(event);
                    println!("{venue} {symbol} {:?}", event.body());
                }
            }
            Next::Overrun { missed, .. } => eprintln!("lost {missed}"),
            _ => {}
        }
    }
    // README NATS example ends
}

/// The text between `// <marker> begins` and `// <marker> ends` in this file, dedented once.
fn compiled_example(marker: &str) -> String {
    let source = read("tests/readme.rs");
    let body = source
        .split_once(&format!("    // {marker} begins\n"))
        .and_then(|(_, rest)| rest.split_once(&format!("    // {marker} ends\n")))
        .map(|(body, _)| body)
        .unwrap_or_else(|| panic!("the {marker} markers in tests/readme.rs"));
    body.lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn rust_nats_example_is_the_readmes() {
    let readme = read("README.md");
    let example = block_with(
        &readme,
        "rust",
        &["NatsClient", "parse_servers"],
        "README.md",
    );
    let servers = example
        .split("parse_servers(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the example's servers");
    assert!(
        servers.starts_with('"') && servers.contains(README_NATS_URLS[0]),
        "{servers}"
    );
    let expected = example.replace(servers, "urls");
    assert_eq!(
        compiled_example("README NATS example"),
        expected,
        "README.md's NATS Rust example and the copy tests/readme.rs compiles and runs differ"
    );
}

/// Runs [`rust_nats_example`] in a process of its own, for `readme_nats_walkthrough_runs`.
#[test]
#[ignore = "a child of readme::readme_nats_walkthrough_runs"]
fn rust_nats_example_child() {
    if let Ok(urls) = std::env::var("TICKWIRE_README_NATS") {
        if let Err(error) = rust_nats_example(&urls) {
            panic!("the README's NATS Rust example failed: {error}");
        }
    }
}

/// A shell line's words, with single-quoted words unquoted (the README's commands quote no
/// other way).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The NATS section as a user follows it: appliance A's file from the README (its `[bus]` where
/// the test's bus is, its servers the test's `nats-server`), the bridge started by the README's
/// command, then each README `tail --nats` command and the README's Rust reader print the bus's
/// trades. (`tickwire run` itself is not run: its venue is Binance's mainnet; the test's bus
/// stands in for the appliance's.)
#[test]
fn readme_nats_walkthrough_runs() {
    let Some(binary) = crate::nats::nats_server_binary() else {
        return;
    };
    let server = crate::nats::NatsServer::start(&binary);
    let readme = read("README.md");
    let section = readme
        .split("## Beyond one host: NATS")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the NATS section");
    let mut appliance = block_with(section, "toml", &["[bridge]", "nats_urls"], "README.md");
    for url in README_NATS_URLS {
        appliance = appliance.replace(url, &server.url());
    }
    let bus = LiveBus::start();
    let folder = bus.path.parent().unwrap().to_owned();
    // The appliance file's venues, beside it as under /etc/tickwire.
    std::fs::create_dir_all(folder.join("venues")).unwrap();
    for venue in words_starting(&appliance, "venues/") {
        let venue = venue.trim_end_matches(['"', ',', ']']);
        std::fs::copy(root().join("config").join(venue), folder.join(venue))
            .unwrap_or_else(|error| panic!("README's appliance file names {venue}: {error}"));
    }
    let config = folder.join("tickwire.toml");
    std::fs::write(&config, &appliance).unwrap();
    let commands: Vec<Vec<String>> = blocks(section, "sh")
        .iter()
        .flat_map(|block| block.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| line.starts_with("tickwire "))
        .map(|line| {
            let line = line
                .split(" #")
                .next()
                .unwrap()
                .trim()
                .trim_end_matches('&');
            shell_words(line)
                .into_iter()
                .skip(1)
                .map(|word| {
                    let mut word =
                        word.replace("/etc/tickwire/tickwire.toml", config.to_str().unwrap());
                    for url in README_NATS_URLS {
                        word = word
                            .replace(&format!("{url},"), "")
                            .replace(url, &server.url());
                    }
                    word
                })
                .collect()
        })
        .collect();
    let bridge_command = commands
        .iter()
        .find(|words| words.first().map(String::as_str) == Some("bridge"))
        .expect("the README starts the bridge");
    // The bus of an appliance file without `[bus] path` is in $RUNTIME_DIRECTORY.
    let _bridge = Running::spawn(
        tickwire()
            .args(bridge_command)
            .env("RUNTIME_DIRECTORY", &folder)
            .env("RUST_LOG", "warn"),
        "the README's `tickwire bridge nats`",
    );
    let tails: Vec<&Vec<String>> = commands
        .iter()
        .filter(|words| words.first().map(String::as_str) == Some("tail"))
        .collect();
    assert!(tails.len() >= 2, "{commands:?}");
    for words in tails {
        let mut tail = Running::spawn(
            tickwire().args(words),
            &format!("tickwire {}", words.join(" ")),
        );
        let line = tail.expect_line(
            |line| line.contains("\"trade\"") && line.contains(SYMBOL) && line.contains(VENUE),
            "trade of the test bus",
        );
        assert!(line.starts_with('{'), "{line}");
    }
    // clients/python/README.md's NATS reader (nats-py), on the same bridge.
    if python_nats_available() {
        let file = "clients/python/README.md";
        let example = block_with(&read(file), "python", &["NatsReader", "asyncio"], file);
        assert!(example.contains(README_NATS_URLS[0]), "{example}");
        let code = example.replace(README_NATS_URLS[0], &server.url());
        let mut python = Running::spawn(
            Command::new("python3")
                .args(["-c", &code])
                .env("PYTHONPATH", root().join("clients/python"))
                .env("PYTHONUNBUFFERED", "1"),
            &format!("{file}'s NATS reader"),
        );
        python.expect_line(
            |line| line.strip_prefix("1 ").is_some_and(is_trade_price),
            "`INSTRUMENT PRICE` line of a trade",
        );
    }
    let mut rust = Running::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "readme::rust_nats_example_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TICKWIRE_README_NATS", server.url()),
        "the README's NATS Rust example",
    );
    rust.expect_line(
        |line| line.contains(&format!("{VENUE} {SYMBOL} Trade(Trade {{ price: Fixed(")),
        "trade of the test bus",
    );
}

/// Whether python3 has numpy and nats-py (`clients/python`'s NATS extra); prints why not, or
/// fails under `TICKWIRE_REQUIRE_NATS=1`.
fn python_nats_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, nats"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !ok {
        let required = std::env::var("TICKWIRE_REQUIRE_NATS").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "TICKWIRE_REQUIRE_NATS=1 but python3 with numpy and nats-py is missing"
        );
        crate::support::skip::skipped(
            "its Python NATS reader: python3 with numpy and nats-py is not installed \
             (pip install numpy nats-py)",
        );
    }
    ok
}

/// Every TOML block of the README is a valid appliance file, or a valid part of one: each is
/// checked by `tickwire check-config` in an appliance file of its own (the shipped mainnet venue
/// beside it, and a `[bus]` table where the block needs one and has none).
#[test]
fn readme_toml_blocks_pass_check_config() {
    let readme = read("README.md");
    let toml_blocks = blocks(&readme, "toml");
    assert!(toml_blocks.len() >= 3, "{}", toml_blocks.len());
    for (index, block) in toml_blocks.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("venues")).unwrap();
        let mut file = String::new();
        if !block.contains("venues =") {
            file.push_str("venues = [\"venues/binance-futures.toml\"]\n");
        }
        file.push_str(block);
        if !block.lines().any(|line| line.trim() == "[bus]") {
            file.push_str("\n[bus]\n");
        }
        for venue in words_starting(&file, "venues/") {
            let venue = venue.trim_end_matches(['"', ',', ']']);
            std::fs::copy(root().join("config").join(venue), dir.path().join(venue))
                .unwrap_or_else(|error| panic!("README's block {index} names {venue}: {error}"));
        }
        let path = dir.path().join("tickwire.toml");
        std::fs::write(&path, &file).unwrap();
        let output = tickwire().arg("check-config").arg(&path).output().unwrap();
        assert!(
            output.status.success(),
            "README's TOML block {index} fails check-config:\n{file}\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
