//! `tickwire bench e2e`: one run that measures, on the same simulated stream, every client
//! computing the mid price of every bookTicker: tickwire's backends and wait modes, a
//! tokio-tungstenite + serde_json peer, a Node.js `ws` + `JSON.parse` peer, and the tcp-floor (a
//! busy-polling raw TCP reader of a plain stream with the same messages and pacing).
//!
//! Method: the simulator runs in this process, pinned to one core; each client runs as its own
//! process pinned to the other core, alone on the stream (it is the simulator's first and only
//! connection, so every bookTicker sent to it has a send stamp). Clients write one record per
//! bookTicker (its update id and the CLOCK_REALTIME ns at which its mid was computed); the
//! simulator's stamps use the same clock. Latency is record minus stamp, joined on the update id;
//! a stamped message without a record is lost. Peak RSS and CPU times come from `wait4`.

pub mod hot;
pub mod perf;

use crate::perf::ProcessCounters;
use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::strategy::stamps::Stamp;
use tickwire_sim::source::{Source, SyntheticConfig, SyntheticSource};
use tickwire_sim::{Pace, Sim, SimOptions, Start};

/// The command line of `bench e2e`.
pub struct E2eArgs {
    pub rates: Vec<f64>,
    pub duration: Duration,
    pub json: Option<PathBuf>,
    pub out: PathBuf,
    pub quick: bool,
    pub symbols: usize,
    pub clients: Option<Vec<String>>,
    pub sim_core: usize,
    pub client_core: usize,
    pub search: bool,
    /// A core for a tickwire client's threads other than its hot one (issue 39: the tuned
    /// layout); `None`: every thread of the client on `client_core`, as before.
    pub housekeeping_core: Option<usize>,
    /// Runs of every client at every rate, the clients' order reversed on every other run.
    pub repeat: usize,
}

/// Every client, in the order they run; the first is the reference for the ratios.
pub const CLIENTS: [&str; 8] = [
    "tickwire-uring-spin",
    "tickwire-uring-spin-bus",
    "tickwire-uring-spin-bus-record",
    "tickwire-uring-block",
    "tickwire-epoll",
    "tokio-tungstenite",
    "node-ws",
    "tcp-floor",
];

/// The control client, run only when named: the tcp-floor again, as a second client beside the
/// first. Its ratios to the tcp-floor of the same run (an A/A comparison) are how far two runs
/// of the same client differ on this host, the noise every other client's ratio carries too.
pub const FLOOR_AGAIN: &str = "tcp-floor-again";

/// What a tickwire client publishes beside its strategy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BusMode {
    Off,
    Bus,
    BusAndRecord,
}

/// A client ready to run.
enum Client {
    Tickwire {
        exe: PathBuf,
        backend: &'static str,
        spin: bool,
        /// With `[bus]`: every event also written to the shared-memory bus (issue 20); and with
        /// `[record]`, recorded from it to DBN files by the appliance's recorder thread (issue 21).
        bus: BusMode,
    },
    /// A peer program: the command up to its own flags.
    Peer {
        program: Vec<String>,
    },
    TcpFloor {
        exe: PathBuf,
    },
}

/// One client at one rate.
#[derive(Clone)]
struct Outcome {
    client: String,
    rate: f64,
    /// Which of `--repeat`'s runs (0-based).
    run: usize,
    /// The sender's side of each stamped message: from its stamp to the `write`'s return (the
    /// kernel's loopback delivery). Part of `latency`, which starts at the same stamp: both
    /// senders stamp just before the `write` that puts the message's bytes on the wire.
    send_path: Option<tickwire_sim::SendPath>,
    /// The simulator's TLS encryption of each stamped message, which comes before its stamp
    /// (so it is in no latency figure); `None` for the tcp-floor, which has no TLS.
    encrypt_path: Option<tickwire_sim::SendPath>,
    /// Messages per second the simulator achieved.
    achieved: f64,
    sent: u64,
    received: u64,
    lost: u64,
    latency: Histogram<u64>,
    rss_kb: u64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    /// The client's performance counters over the run (hardware ones where the host has them).
    counters: Vec<crate::perf::Reading>,
    /// What reached the client's hot thread and its core during the window.
    hot: Option<crate::hot::HotWindow>,
    /// The client exited cleanly (a client that failed still gets its row and its note).
    clean: bool,
    note: Option<String>,
}

impl Outcome {
    fn quantile(&self, q: f64) -> u64 {
        if self.latency.is_empty() {
            0
        } else {
            self.latency.value_at_quantile(q)
        }
    }
}

pub fn e2e(args: E2eArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench e2e: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn repo_root() -> PathBuf {
    // The clone this binary was built from (this crate sits in its `crates/tickwire-bench`):
    // where the peers' sources are.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: E2eArgs) -> anyhow::Result<()> {
    let names: Vec<String> = match &args.clients {
        Some(list) => {
            for name in list {
                if !CLIENTS.contains(&name.as_str()) && name != FLOOR_AGAIN {
                    bail!(
                        "unknown client `{name}`; the clients are {} and the control \
                         {FLOOR_AGAIN}",
                        CLIENTS.join(", ")
                    );
                }
            }
            list.clone()
        }
        None => CLIENTS.iter().map(|name| name.to_string()).collect(),
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.sim_core >= cpus || args.client_core >= cpus {
        bail!(
            "--sim-core {} / --client-core {}: this machine has cores 0 to {}",
            args.sim_core,
            args.client_core,
            cpus - 1
        );
    }
    if let Some(core) = args.housekeeping_core {
        if core >= cpus || core == args.client_core {
            bail!(
                "--housekeeping-core {core}: a core other than the client's ({}), 0 to {}",
                args.client_core,
                cpus - 1
            );
        }
    }
    let machine = machine_header();
    // This process (the simulator and its threads, which inherit it) on one core.
    pin(args.sim_core).context("pinning the simulator")?;
    eprintln!("{machine}");
    let mut clients = Vec::new();
    for name in &names {
        match prepare(name) {
            Ok(client) => clients.push((name.clone(), client)),
            Err(error) => eprintln!("bench e2e: {name} skipped: {error:#}"),
        }
    }
    if clients.is_empty() {
        bail!("no client could be prepared");
    }
    // Configs, CA files and records of each run, kept for inspection (records are removed once
    // read).
    // Absolute: the configs written there name files in it, and a config resolves a relative
    // path against its own directory, not the working directory.
    let work = std::path::absolute(args.out.join("work"))?;
    std::fs::create_dir_all(&work)?;
    // The tuned layout: kernel threads that may move kept off the clients' core as well, for
    // every client alike, as a tuned host's `isolcpus=domain` keeps them, and every other
    // process's threads, as `isolcpus=domain` or a cpuset shield keeps them.
    let core = args.client_core;
    let threads_away = args.housekeeping_core.map(|_| {
        let kernel = hot::ThreadsAway::kernel_off_core(core);
        let others = hot::ThreadsAway::others_off_core(core);
        for (away, what, stay) in [
            (
                &kernel,
                "kernel threads",
                format!("bound to it stay (per-core: kworker/{core}, migration/{core}, ksoftirqd/{core} ...)"),
            ),
            (&others, "threads of other processes", "pinned to it stay".to_owned()),
        ] {
            let mut names = away.names.clone();
            names.sort();
            names.dedup();
            eprintln!(
                "bench e2e: {} {what} moved off core {core} for the runs ({}); {} {stay}",
                away.names.len(),
                names.join(", "),
                away.bound,
            );
        }
        (kernel, others)
    });
    let irqs_away = args.housekeeping_core.map(|_| {
        let away = hot::IrqsAway::off_core(args.client_core);
        eprintln!(
            "bench e2e: {} interrupts steered off core {} for the runs ({:?}); {} could not move",
            away.irqs.len(),
            args.client_core,
            away.irqs,
            away.refused
        );
        away
    });
    // And what a tuned host has for good: the sysctl profile's vmstat interval (each core's
    // `vmstat_update` every 10 s instead of every second) and the unbound workqueues' workers
    // kept off the core (the kernel does that itself for cores isolated at boot, as
    // `tuning/isolate-cores` isolates them). Put back after the runs.
    let settings = args.housekeeping_core.map(|_| {
        let mut kept = Vec::new();
        for (what, setting) in [
            (
                "vm.stat_interval 10 (tuning/sysctl's value)".to_owned(),
                hot::Setting::set("/proc/sys/vm/stat_interval", "10"),
            ),
            (
                format!("the unbound workqueues' cpumask without core {core}"),
                hot::Setting::unbound_work_off_core(core),
            ),
        ] {
            match setting {
                Ok(setting) => {
                    eprintln!(
                        "bench e2e: {what} for the runs ({} -> {})",
                        setting.before, setting.value
                    );
                    kept.push(setting);
                }
                Err(why) => eprintln!("bench e2e: {what} not set: {why}"),
            }
        }
        kept
    });
    let mut outcomes: Vec<Outcome> = Vec::new();
    for run in 0..args.repeat.max(1) {
        for &rate in &args.rates {
            // Every other run takes the clients in reverse, so that none always runs first.
            let order: Vec<&(String, Client)> = if run % 2 == 0 {
                clients.iter().collect()
            } else {
                clients.iter().rev().collect()
            };
            for (name, client) in order {
                eprintln!(
                    "bench e2e: {name} at {rate} msg/s for {:?} (run {})",
                    args.duration,
                    run + 1
                );
                let mut outcome = measure(name, client, rate, args.duration, &args, &work)?;
                outcome.run = run;
                eprintln!("  {}", summary_line(&outcome));
                outcomes.push(outcome);
            }
        }
    }
    // The highest rate each sustains without loss: doubling from the highest lossless rate
    // measured, in shorter runs, until a loss or the simulator's own limit.
    let mut lossless: Vec<(String, f64, String)> = Vec::new();
    if args.search && !args.quick {
        for (name, client) in &clients {
            let mut best = outcomes
                .iter()
                .filter(|o| &o.client == name && o.lost == 0 && o.received > 0)
                .map(|o| o.achieved)
                .fold(0.0, f64::max);
            let mut rate = args.rates.iter().copied().fold(0.0, f64::max) * 2.0;
            let mut why = "loss at the next doubling".to_owned();
            while rate <= 1_600_000.0 {
                let duration = Duration::from_secs(3);
                eprintln!("bench e2e: {name} search at {rate} msg/s");
                let outcome = measure(name, client, rate, duration, &args, &work)?;
                eprintln!("  {}", summary_line(&outcome));
                if outcome.lost > 0 || outcome.received == 0 {
                    break;
                }
                best = best.max(outcome.achieved);
                if outcome.achieved < rate * 0.9 {
                    why = format!(
                        "simulator-limited: it sent {:.0} msg/s when asked for {rate}",
                        outcome.achieved
                    );
                    break;
                }
                rate *= 2.0;
            }
            lossless.push((name.clone(), best, why));
        }
    }
    drop(threads_away);
    drop(irqs_away);
    drop(settings);
    let table = render_table(&outcomes, &lossless);
    println!("{table}");
    if args.repeat > 1 {
        println!("{}", render_spread(&outcomes));
    }
    let json = render_json(&outcomes, &lossless, &machine);
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("e2e.json"));
    std::fs::write(&json_path, json).with_context(|| format!("writing {}", json_path.display()))?;
    let report = format!(
        "# tickwire bench e2e\n\n```text\n{machine}\n```\n\nOne-way latency from the simulator's \
         send to the mid price computed, per bookTicker; ratios to tickwire-uring-spin.\n\n{}{}",
        render_markdown(&outcomes, &lossless),
        if args.repeat > 1 {
            format!("\n{}", render_spread(&outcomes))
        } else {
            String::new()
        }
    );
    std::fs::write(args.out.join("e2e.md"), report)?;
    let mut plots = Vec::new();
    for &rate in &args.rates {
        let path = args.out.join(format!("e2e-{}.svg", rate as u64));
        let runs: Vec<&Outcome> = outcomes.iter().filter(|o| o.rate == rate).collect();
        std::fs::write(&path, render_svg(&runs, rate))?;
        plots.push(path);
    }
    eprintln!(
        "bench e2e: wrote {}, {}, {}",
        json_path.display(),
        args.out.join("e2e.md").display(),
        plots
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // The reports are written either way; a run whose client failed makes the command fail,
    // so that a script never takes an empty row for a measurement.
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.clean)
        .map(|o| format!("{} at {} msg/s", o.client, o.rate))
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} runs failed (the notes above say why): {}",
            failed.len(),
            outcomes.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// Builds or installs what a client needs.
fn prepare(name: &str) -> anyhow::Result<Client> {
    let root = repo_root();
    let exe = std::env::current_exe()?;
    let cargo_peer = |dir: &str, bin: &str| -> anyhow::Result<PathBuf> {
        let manifest = root.join("benches/peers").join(dir).join("Cargo.toml");
        if !manifest.exists() {
            bail!(
                "{} not found (run from a tickwire clone)",
                manifest.display()
            );
        }
        // The peer's own target folder, named explicitly: a CARGO_TARGET_DIR in the
        // environment would otherwise put the binary somewhere this function does not look.
        let target = root.join("benches/peers").join(dir).join("target");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args(["build", "--release", "--quiet", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .status()
            .context("running cargo")?;
        if !status.success() {
            bail!("building {} failed ({status})", manifest.display());
        }
        Ok(target.join("release").join(bin))
    };
    Ok(match name {
        "tickwire-uring-spin" => Client::Tickwire {
            exe,
            backend: "io-uring",
            spin: true,
            bus: BusMode::Off,
        },
        "tickwire-uring-spin-bus" => Client::Tickwire {
            exe,
            backend: "io-uring",
            spin: true,
            bus: BusMode::Bus,
        },
        "tickwire-uring-spin-bus-record" => Client::Tickwire {
            exe,
            backend: "io-uring",
            spin: true,
            bus: BusMode::BusAndRecord,
        },
        "tickwire-uring-block" => Client::Tickwire {
            exe,
            backend: "io-uring",
            spin: false,
            bus: BusMode::Off,
        },
        "tickwire-epoll" => Client::Tickwire {
            exe,
            backend: "epoll",
            spin: true,
            bus: BusMode::Off,
        },
        "tokio-tungstenite" => Client::Peer {
            program: vec![cargo_peer("tokio-tungstenite", "tw-peer-tokio")?
                .display()
                .to_string()],
        },
        "tcp-floor" | FLOOR_AGAIN => Client::TcpFloor {
            exe: cargo_peer("tcp-floor", "tw-peer-tcp-floor")?,
        },
        "node-ws" => {
            let dir = root.join("benches/peers/node-ws");
            let node_ok = Command::new("node")
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if !node_ok {
                bail!("node is not installed");
            }
            if !dir.join("node_modules/ws").exists() {
                let status = Command::new("npm")
                    .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&dir)
                    .status()
                    .context("running npm")?;
                if !status.success() {
                    bail!("npm install in {} failed ({status})", dir.display());
                }
            }
            Client::Peer {
                program: vec![
                    "node".to_owned(),
                    dir.join("index.js").display().to_string(),
                ],
            }
        }
        other => bail!("unknown client {other}"),
    })
}

/// Pins the calling thread (and what it spawns later) to `core`.
fn pin(core: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it for core < CPU_SETSIZE
    // (checked); sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if core >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::other("core out of range"));
        }
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn spawn_pinned(mut command: Command, cores: &[usize]) -> anyhow::Result<Child> {
    if cores.iter().any(|&core| core >= libc::CPU_SETSIZE as usize) {
        bail!("core out of range: {cores:?}");
    }
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it for cores below
    // CPU_SETSIZE (checked above).
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            libc::CPU_SET(core, &mut set);
        }
        set
    };
    // SAFETY: the closure only calls sched_setaffinity (async-signal-safe) between fork and
    // exec, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(command.spawn()?)
}

/// Waits for a child up to `timeout` (then kills it); returns its rusage.
fn wait_with_usage(child: &mut Child, timeout: Duration) -> anyhow::Result<(bool, libc::rusage)> {
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + timeout;
    loop {
        // SAFETY: a zeroed rusage is valid for wait4 to fill; the status pointer is valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let mut status = 0;
        // SAFETY: pid is our own child; WNOHANG returns at once.
        let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if waited == pid {
            let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            return Ok((clean, usage));
        }
        if waited < 0 {
            bail!("wait4: {}", std::io::Error::last_os_error());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn seconds(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn symbol_names(count: usize) -> Vec<String> {
    const NAMED: [&str; 8] = [
        "BTCUSDT", "ETHUSDT", "SOLUSDT", "BNBUSDT", "XRPUSDT", "DOGEUSDT", "ADAUSDT", "AVAXUSDT",
    ];
    (0..count)
        .map(|index| {
            NAMED
                .get(index)
                .map_or_else(|| format!("SYM{index}USDT"), |name| name.to_string())
        })
        .collect()
}

fn source(symbols: usize, rate: f64, messages: u64) -> anyhow::Result<Box<dyn Source>> {
    Ok(Box::new(SyntheticSource::new(SyntheticConfig {
        symbols,
        rate_per_sec: rate,
        channels: vec!["bookTicker".to_owned()],
        duration_messages: Some(messages),
        ..SyntheticConfig::default()
    })?))
}

/// One client at one rate.
fn measure(
    name: &str,
    client: &Client,
    rate: f64,
    duration: Duration,
    args: &E2eArgs,
    work: &Path,
) -> anyhow::Result<Outcome> {
    let messages = (rate * duration.as_secs_f64()).ceil() as u64;
    let dir = work.join(format!("{name}-{}", rate as u64));
    std::fs::create_dir_all(&dir)?;
    let records_path = dir.join("records.bin");
    let clock = Clock::monotonic();
    let ring_slots = (messages as usize + 4096).next_power_of_two();
    let (stamp_tx, mut stamp_rx) = tickwire::ring::ring::<Stamp>(ring_slots);
    let wait_budget = duration * 3 + Duration::from_secs(20);
    let mut child;
    let counters;
    let sent;
    let achieved;
    let hot;
    let send_path;
    let mut encrypt_path = None;
    match client {
        Client::TcpFloor { exe } => {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            let mut command = Command::new(exe);
            command
                .arg("--addr")
                .arg(listener.local_addr()?.to_string())
                .arg("--out")
                .arg(&records_path)
                .arg("--count")
                .arg(messages.to_string())
                .arg("--duration-secs")
                .arg((duration.as_secs_f64() + 10.0).ceil().to_string())
                .stdout(Stdio::null());
            child = spawn_pinned(command, &[args.client_core])?;
            counters = ProcessCounters::open(child.id() as libc::pid_t);
            let mut source = source(args.symbols, rate, messages)?;
            // Its one thread is the hot one; the window opens as the stream starts.
            let probe = crate::hot::HotProbe::open(child.id(), None, args.client_core);
            let (count, elapsed, path) = plain_stream(&listener, source.as_mut(), stamp_tx, clock)?;
            hot = probe.close();
            send_path = path;
            sent = count;
            achieved = count as f64 / elapsed.as_secs_f64().max(1e-9);
        }
        _ => {
            let mut options = SimOptions::new(dir.join("sim"));
            options.listen = "127.0.0.1:0".parse::<SocketAddr>()?;
            options.pace = Pace::Recorded { speed: 1.0 };
            options.start = Start::FirstSubscriber;
            options.stamps = Some(stamp_tx);
            options.clock = clock;
            // A slow client is measured, not dropped, for the length of a run.
            options.write_timeout = duration + Duration::from_secs(10);
            let mut sim = Sim::start(options, source(args.symbols, rate, messages)?)?;
            let symbols = symbol_names(args.symbols);
            let streams: Vec<String> = symbols
                .iter()
                .map(|symbol| format!("{}@bookTicker", symbol.to_ascii_lowercase()))
                .collect();
            let command = match client {
                Client::Tickwire {
                    exe,
                    backend,
                    spin,
                    bus,
                } => {
                    let config = tickwire_config(
                        &dir,
                        &sim,
                        &symbols,
                        backend,
                        (
                            *spin,
                            *bus,
                            args.sim_core,
                            args.housekeeping_core.map(|core| (args.client_core, core)),
                        ),
                        &records_path,
                        messages,
                    )?;
                    let mut command = Command::new(exe);
                    command.args(["run", "--config"]).arg(config);
                    command
                }
                Client::Peer { program } => {
                    let mut command = Command::new(&program[0]);
                    command
                        .args(&program[1..])
                        .arg("--url")
                        .arg(sim.ws_url(&streams.iter().map(String::as_str).collect::<Vec<_>>()))
                        .arg("--ca")
                        .arg(sim.ca_pem_path())
                        .arg("--out")
                        .arg(&records_path)
                        .arg("--count")
                        .arg(messages.to_string())
                        .arg("--duration-secs")
                        .arg((duration.as_secs_f64() + 10.0).ceil().to_string());
                    command
                }
                Client::TcpFloor { .. } => unreachable!("handled above"),
            };
            let mut command = command;
            command.stdout(Stdio::null()).stderr(Stdio::piped());
            // A tickwire client with a housekeeping core may run there and on its hot core:
            // its hot thread pins itself to the client core, everything else stays off it.
            let (cores, hot_name) = match (client, args.housekeeping_core) {
                (Client::Tickwire { .. }, Some(housekeeping)) => {
                    (vec![args.client_core, housekeeping], Some("tw-net"))
                }
                (Client::Tickwire { .. }, None) => (vec![args.client_core], Some("tw-net")),
                _ => (vec![args.client_core], None),
            };
            child = spawn_pinned(command, &cores)?;
            counters = ProcessCounters::open(child.id() as libc::pid_t);
            let started = Instant::now();
            // The window opens with the first message sent (the client has subscribed), when
            // the hot thread runs.
            let opened = Instant::now() + wait_budget;
            while sim.stats().messages_sent == 0 && Instant::now() < opened {
                std::thread::sleep(Duration::from_millis(1));
            }
            let probe = crate::hot::HotProbe::open(child.id(), hot_name, args.client_core);
            if !sim.wait_source_done(wait_budget) {
                eprintln!("  the simulator did not finish its messages in time");
            }
            hot = probe.close();
            // The tail of the stream, on its way.
            std::thread::sleep(Duration::from_millis(500));
            let stats = sim.stats();
            sent = stats.stamps_pushed;
            send_path = stats.send_path.clone();
            encrypt_path = stats.encrypt_path.clone();
            achieved = stats.messages_sent as f64 / started.elapsed().as_secs_f64().max(1e-9);
            if stats.stamp_overflows > 0 {
                eprintln!(
                    "  {} send stamps lost to a full ring",
                    stats.stamp_overflows
                );
            }
            if let Client::Tickwire { .. } = client {
                // SAFETY: kill with our own child's pid and a valid signal.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
            sim.stop();
        }
    }
    let (clean, usage) = wait_with_usage(&mut child, wait_budget)?;
    let counters = counters.read();
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    let mut send_ns: HashMap<u64, u64> = HashMap::with_capacity(sent as usize);
    let (mut first_send, mut last_send) = (u64::MAX, 0);
    stamp_rx.drain(usize::MAX, |stamp| {
        send_ns.insert(stamp.key, stamp.send_ns);
        first_send = first_send.min(stamp.send_ns);
        last_send = last_send.max(stamp.send_ns);
    });
    // The rate the simulator achieved: its stamped sends over the time they spanned.
    let achieved = if send_ns.len() > 1 && last_send > first_send {
        (send_ns.len() - 1) as f64 * 1e9 / (last_send - first_send) as f64
    } else {
        achieved
    };
    let records = std::fs::read(&records_path).unwrap_or_default();
    let _ = std::fs::remove_file(&records_path);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut received = 0u64;
    let mut unmatched = 0u64;
    for record in records.chunks_exact(16) {
        let key = u64::from_le_bytes(record[..8].try_into()?);
        let done = u64::from_le_bytes(record[8..].try_into()?);
        match send_ns.get(&key) {
            Some(&send) => {
                received += 1;
                latency.saturating_record(done.saturating_sub(send).max(1));
            }
            None => unmatched += 1,
        }
    }
    let mut notes = Vec::new();
    if !clean {
        notes.push(format!(
            "the client did not exit cleanly: {}",
            stderr.lines().last().unwrap_or("")
        ));
    }
    if unmatched > 0 {
        notes.push(format!("{unmatched} records matched no send stamp"));
    }
    Ok(Outcome {
        client: name.to_owned(),
        rate,
        run: 0,
        hot,
        send_path,
        encrypt_path,
        achieved,
        sent,
        received,
        lost: sent.saturating_sub(received),
        latency,
        // Linux reports ru_maxrss in KiB.
        rss_kb: usage.ru_maxrss as u64,
        cpu_user_s: seconds(usage.ru_utime),
        cpu_sys_s: seconds(usage.ru_stime),
        counters,
        clean,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

/// The tcp-floor's stream: the same bookTicker payloads (the `data` object, one per line) at the
/// same pace, over plain TCP, each stamped just before it is written.
fn plain_stream(
    listener: &TcpListener,
    source: &mut dyn Source,
    mut stamps: tickwire::ring::Producer<Stamp>,
    clock: Clock,
) -> anyhow::Result<(u64, Duration, Option<tickwire_sim::SendPath>)> {
    listener.set_nonblocking(false)?;
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    let start = Instant::now();
    let mut line = Vec::with_capacity(512);
    let mut sent = 0;
    let mut send_path = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    while let Some(message) = source.next_message() {
        let due = start + Duration::from_nanos(message.offset_ns);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        line.clear();
        line.extend_from_slice(&message.combined[message.data.clone()]);
        line.push(b'\n');
        let stamped = message.stamp_key.map(|key| {
            let send_ns = clock.now_ns();
            let _ = stamps.try_push(Stamp { key, send_ns });
            send_ns
        });
        if stream.write_all(&line).is_err() {
            break;
        }
        // The send path, as the simulator measures its own: the stamp to the write's return.
        if let Some(send_ns) = stamped {
            send_path.saturating_record(clock.now_ns().saturating_sub(send_ns).max(1));
        }
        sent += 1;
    }
    let elapsed = start.elapsed();
    drop(stream);
    Ok((sent, elapsed, send_path_of(&send_path)))
}

/// A sender's path's quantiles in the JSON report.
fn path_json(path: &tickwire_sim::SendPath) -> serde_json::Value {
    serde_json::json!({
        "messages": path.messages,
        "p50_ns": path.p50_ns,
        "p99_ns": path.p99_ns,
        "p999_ns": path.p999_ns,
        "max_ns": path.max_ns,
    })
}

/// The quantiles of a sender's send path (`SimStats::send_path`'s shape); `None` when empty.
fn send_path_of(histogram: &Histogram<u64>) -> Option<tickwire_sim::SendPath> {
    (!histogram.is_empty()).then(|| tickwire_sim::SendPath::of(histogram))
}

/// A tickwire client's config: everything on one thread on the client core, the `mid` strategy
/// writing its records; a recorder (`BusMode::BusAndRecord`) on `recorder_core`.
fn tickwire_config(
    dir: &Path,
    sim: &tickwire_sim::SimHandle,
    symbols: &[String],
    backend: &str,
    (spin, bus, recorder_core, housekeeping): (bool, BusMode, usize, Option<(usize, usize)>),
    records: &Path,
    messages: u64,
) -> anyhow::Result<PathBuf> {
    // The tuned layout: the hot thread pinned to the client core, everything else on the
    // housekeeping core.
    let (hot_core, process) = match housekeeping {
        Some((client_core, core)) => (
            format!("core = {client_core}\n"),
            format!("[process]\nhousekeeping_cores = [{core}]\n"),
        ),
        None => (String::new(), String::new()),
    };
    let port = sim.addr().port();
    let quoted: Vec<String> = symbols.iter().map(|s| format!("{s:?}")).collect();
    std::fs::write(
        dir.join("venue.toml"),
        format!(
            "name = \"sim\"\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:{port}\"\nsymbols = [{}]\nchannels = [\"bookTicker\"]\n\
             [tls]\nextra_ca_file = {:?}\n[lifecycle]\nrotate_after_ms = 0\n",
            quoted.join(", "),
            sim.ca_pem_path().display().to_string()
        ),
    )?;
    let (net_wait, thread_wait) = if spin {
        ("busy-poll", "spin")
    } else {
        ("block", "park")
    };
    let path = dir.join("tickwire.toml");
    std::fs::write(
        &path,
        format!(
            "venues = [\"venue.toml\"]\n[log]\nlevel = \"warn\"\n{process}[metrics]\nreport_interval_ms = 60000\n\
             [rings]\nframe_ring_bytes = 2097152\nevent_ring_slots = 16384\n\
             [net]\nbackend = \"{backend}\"\nwait = \"{net_wait}\"\nmax_message_bytes = 65536\n\
             recv_buffer_bytes = 16384\nrecv_buffers = 64\n\
             [threads.net]\n{hot_core}wait = \"{thread_wait}\"\n\
             [threads.decoder]\nfuse_into = \"net\"\n[threads.strategy]\nfuse_into = \"decoder\"\n\
             [strategy]\nname = \"mid\"\nrecord_file = {:?}\nrecord_capacity = {}\n\
             summary_interval_ms = 0\n{}",
            records.display().to_string(),
            messages + 1024,
            match bus {
                BusMode::Off => String::new(),
                BusMode::Bus => format!(
                    "[bus]\npath = {:?}\n",
                    dir.join("tickwire.bus").display().to_string()
                ),
                // The recorder on the simulator's core, not the client's: the client process is
                // pinned to one core with a busy-polling thread on it, which any work of the
                // recorder there would preempt.
                BusMode::BusAndRecord => format!(
                    "[bus]\npath = {:?}\n[record]\ndir = {:?}\ncore = {recorder_core}\n",
                    dir.join("tickwire.bus").display().to_string(),
                    dir.join("recordings").display().to_string()
                ),
            }
        ),
    )?;
    Ok(path)
}

fn machine_header() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_owned())
            .unwrap_or_else(|_| "unavailable".to_owned())
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let kernel = read("/proc/sys/kernel/osrelease");
    let governor = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
    let aslr = read("/proc/sys/kernel/randomize_va_space");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "machine: {cpu}, {cores} cores, Linux {kernel}, governor {governor}, ASLR {aslr} \
         (0 = off), {}",
        time_now()
    )
}

fn time_now() -> String {
    let secs = tickwire::clock::system_realtime_ns() / 1_000_000_000;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let days = (secs / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60
    )
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// Each counter per message received: `instructions 1234/msg`, or why it is missing.
fn per_message(o: &Outcome) -> Vec<(String, Option<f64>, String)> {
    o.counters
        .iter()
        .map(|reading| match &reading.value {
            Ok(value) if o.received > 0 => (
                reading.name.to_owned(),
                Some(*value as f64 / o.received as f64),
                format!(
                    "{} {:.1}/msg",
                    reading.name,
                    *value as f64 / o.received as f64
                ),
            ),
            Ok(_) => (reading.name.to_owned(), None, format!("{} -", reading.name)),
            Err(why) => (
                reading.name.to_owned(),
                None,
                format!("{} {why}", reading.name),
            ),
        })
        .collect()
}

fn summary_line(o: &Outcome) -> String {
    let counters: Vec<String> = per_message(o)
        .into_iter()
        .map(|(_, _, text)| text)
        .collect();
    format!(
        "{}\n  counters: {}\n  hot thread: {}\n  sender: {}",
        summary(o),
        counters.join("; "),
        hot_text(o),
        send_path_text(o)
    )
}

/// The sender's side of the run's latency (the stamp to the `write`'s return), and the
/// simulator's encryption before the stamp.
fn send_path_text(o: &Outcome) -> String {
    let quantiles = |path: &tickwire_sim::SendPath| {
        format!(
            "p50 {} us p99 {} us p99.9 {} us max {} us ({} messages)",
            us(path.p50_ns),
            us(path.p99_ns),
            us(path.p999_ns),
            us(path.max_ns),
            path.messages
        )
    };
    let mut text = o.send_path.as_ref().map_or_else(
        || "not measured".to_owned(),
        |path| format!("stamp to write returned {}", quantiles(path)),
    );
    if let Some(path) = &o.encrypt_path {
        text.push_str(&format!(
            "; TLS encryption before the stamp {}",
            quantiles(path)
        ));
    }
    text
}

fn hot_text(o: &Outcome) -> String {
    o.hot.as_ref().map_or_else(
        || "not read (the thread was not found or ended early)".to_owned(),
        ToString::to_string,
    )
}

/// With `--repeat`: each client's p50, p99 and p99.9 in every run, their spread, each run's
/// ratio to the tcp-floor of the same run and rate, and the hot thread's context switches.
fn render_spread(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let mut rates: Vec<f64> = outcomes.iter().map(|o| o.rate).collect();
    rates.dedup();
    let _ = writeln!(
        out,
        "Repeated runs: per run, in run order; ratios to tcp-floor of the same run; switches \
         are the hot thread's (voluntary + involuntary) in the timed window, steal the time the \
         host took the client core's virtual CPU for something else in it (`/proc/stat`), sender \
         p99 the 99th percentile of the sender's own part (the stamp to its `write`'s return); \
         tcp-floor-again, where it ran, is the tcp-floor once more: its ratios are the host's \
         noise between two runs of one client.\n"
    );
    let _ = writeln!(
        out,
        "| client | rate | p50 us per run | p99 us per run | p99.9 us per run | p50 / floor | \
         p99 / floor | p99 min / median / max us | hot-thread switches per run | host steal ms \
         per run | sender p99 us per run |"
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(11));
    // The median over runs of each client's ratio to the floor of the same run.
    let mut medians: Vec<String> = Vec::new();
    // How many of each client's runs keep within the report's bounds.
    let mut within: Vec<String> = Vec::new();
    for rate in rates {
        let mut names: Vec<&str> = Vec::new();
        for o in outcomes.iter().filter(|o| o.rate == rate) {
            if !names.contains(&o.client.as_str()) {
                names.push(&o.client);
            }
        }
        for name in names {
            let mut runs: Vec<&Outcome> = outcomes
                .iter()
                .filter(|o| o.rate == rate && o.client == name)
                .collect();
            runs.sort_by_key(|o| o.run);
            let list = |q: f64| -> String {
                runs.iter()
                    .map(|o| us(o.quantile(q)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let floor_of = |o: &Outcome| {
                outcomes
                    .iter()
                    .find(|f| f.client == "tcp-floor" && f.rate == rate && f.run == o.run)
            };
            let floor_ratio = |q: f64| -> String {
                runs.iter()
                    .map(|o| ratio(o.quantile(q), floor_of(o).map(|f| f.quantile(q))))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if name != "tcp-floor" {
                let median_ratio = |q: f64| {
                    median(
                        runs.iter()
                            .filter_map(|o| {
                                let floor = floor_of(o)?.quantile(q);
                                (floor > 0).then(|| o.quantile(q) as f64 / floor as f64)
                            })
                            .collect(),
                    )
                };
                if let (Some(p50), Some(p99)) = (median_ratio(0.5), median_ratio(0.99)) {
                    medians.push(format!(
                        "{name} at {}: p50 {p50:.2}x, p99 {p99:.2}x the floor's",
                        rate as u64
                    ));
                }
                let pairs: Vec<(f64, f64)> = runs
                    .iter()
                    .filter_map(|o| {
                        let floor = floor_of(o)?;
                        let (p50, p99) = (floor.quantile(0.5), floor.quantile(0.99));
                        (p50 > 0 && p99 > 0).then(|| {
                            (
                                o.quantile(0.5) as f64 / p50 as f64,
                                o.quantile(0.99) as f64 / p99 as f64,
                            )
                        })
                    })
                    .collect();
                if !pairs.is_empty() {
                    within.push(format!(
                        "{name} at {}: {} of {}",
                        rate as u64,
                        runs_within(&pairs, REPORT_BOUNDS),
                        pairs.len()
                    ));
                }
            }
            let mut p99: Vec<u64> = runs.iter().map(|o| o.quantile(0.99)).collect();
            p99.sort_unstable();
            let spread = match (p99.first(), p99.get(p99.len() / 2), p99.last()) {
                (Some(min), Some(median), Some(max)) => {
                    format!("{} / {} / {}", us(*min), us(*median), us(*max))
                }
                _ => "-".to_owned(),
            };
            // One cell per run, "-" where the run has no such reading.
            let per_run = |cell: &dyn Fn(&Outcome) -> Option<String>| -> String {
                runs.iter()
                    .map(|o| cell(o).unwrap_or_else(|| "-".to_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let switches = per_run(&|o| {
                o.hot.as_ref().map(|hot| {
                    format!(
                        "{}+{}",
                        hot.delta.voluntary_switches, hot.delta.involuntary_switches
                    )
                })
            });
            let steal = per_run(&|o| {
                o.hot
                    .as_ref()
                    .map(|hot| hot.delta.core_steal_ms.to_string())
            });
            let sender = per_run(&|o| o.send_path.as_ref().map(|path| us(path.p99_ns)));
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {} | {spread} | {switches} | {steal} | \
                 {sender} |",
                rate as u64,
                list(0.5),
                list(0.99),
                list(0.999),
                floor_ratio(0.5),
                floor_ratio(0.99),
            );
        }
    }
    if !medians.is_empty() {
        let _ = writeln!(
            out,
            "\nMedian over the runs of each run's ratio to the tcp-floor of the same run: {}.",
            medians.join("; ")
        );
    }
    if !within.is_empty() {
        let _ = writeln!(
            out,
            "Runs within the published Rust feed's bounds (issue 39: p50 at most {:.1}x and p99 at \
             most {:.1}x the tcp-floor of the same run): {}.",
            REPORT_BOUNDS.0,
            REPORT_BOUNDS.1,
            within.join("; ")
        );
    }
    out
}

/// The bounds a run's ratios to the tcp-floor of the same run must keep (p50, p99): issue 39's
/// goal, from the published Rust Binance feed's report.
const REPORT_BOUNDS: (f64, f64) = (1.2, 1.3);

/// How many runs' (p50, p99) ratios are both within `bounds` (at most, inclusive).
fn runs_within(ratios: &[(f64, f64)], bounds: (f64, f64)) -> usize {
    ratios
        .iter()
        .filter(|(p50, p99)| *p50 <= bounds.0 && *p99 <= bounds.1)
        .count()
}

/// `[("name", count), ...]` as `[{"name": ..., "count": ...}, ...]`.
fn counted_json(counts: &[(String, u64)]) -> serde_json::Value {
    counts
        .iter()
        .map(|(name, count)| serde_json::json!({ "name": name, "count": count }))
        .collect()
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        len if len % 2 == 1 => values.get(middle).copied(),
        _ => Some((values.get(middle - 1)? + values.get(middle)?) / 2.0),
    }
}

fn summary(o: &Outcome) -> String {
    format!(
        "sent {} received {} lost {}; p50 {} us p99 {} us max {} us; rss {} KiB; cpu {:.2}+{:.2} s{}",
        o.sent,
        o.received,
        o.lost,
        us(o.quantile(0.5)),
        us(o.quantile(0.99)),
        us(o.latency.max()),
        o.rss_kb,
        o.cpu_user_s,
        o.cpu_sys_s,
        o.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
    )
}

fn ratio(value: u64, reference: Option<u64>) -> String {
    match reference {
        Some(reference) if reference > 0 && value > 0 => {
            format!("{:.2}x", value as f64 / reference as f64)
        }
        _ => "-".to_owned(),
    }
}

fn rows(outcomes: &[Outcome]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for o in outcomes {
        let reference = outcomes
            .iter()
            .find(|r| r.client == CLIENTS[0] && r.rate == o.rate && r.run == o.run);
        let q = |o: &Outcome, q: f64| o.quantile(q);
        rows.push(vec![
            o.client.clone(),
            format!("{}", o.rate as u64),
            format!("{:.0}", o.achieved),
            o.received.to_string(),
            o.lost.to_string(),
            us(q(o, 0.5)),
            us(q(o, 0.9)),
            us(q(o, 0.99)),
            us(q(o, 0.999)),
            us(o.latency.max()),
            ratio(q(o, 0.5), reference.map(|r| q(r, 0.5))),
            ratio(q(o, 0.99), reference.map(|r| q(r, 0.99))),
            format!("{:.1}", o.rss_kb as f64 / 1024.0),
            format!("{:.2}", o.cpu_user_s),
            format!("{:.2}", o.cpu_sys_s),
        ]);
    }
    rows
}

const HEADERS: [&str; 15] = [
    "client",
    "rate",
    "sent/s",
    "received",
    "lost",
    "p50 us",
    "p90 us",
    "p99 us",
    "p99.9 us",
    "max us",
    "p50 ratio",
    "p99 ratio",
    "RSS MiB",
    "user s",
    "sys s",
];

fn render_table(outcomes: &[Outcome], lossless: &[(String, f64, String)]) -> String {
    let rows = rows(outcomes);
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:>width$}"))
            .collect();
        let _ = writeln!(out, "{}", padded.join("  "));
    };
    line(HEADERS.iter().map(|h| h.to_string()).collect(), &mut out);
    for row in rows {
        line(row, &mut out);
    }
    for o in outcomes.iter().filter(|o| o.note.is_some()) {
        let _ = writeln!(
            out,
            "note: {} at {}: {}",
            o.client,
            o.rate,
            o.note.as_deref().unwrap_or("")
        );
    }
    if !lossless.is_empty() {
        let _ = writeln!(out, "\nhighest lossless rate (msg/s):");
        for (client, rate, why) in lossless {
            let _ = writeln!(out, "  {client:>22}  {rate:>10.0}  ({why})");
        }
    }
    out
}

fn render_markdown(outcomes: &[Outcome], lossless: &[(String, f64, String)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(HEADERS.len()));
    for row in rows(outcomes) {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    if !lossless.is_empty() {
        let _ = writeln!(
            out,
            "\n| client | highest lossless rate (msg/s) | limit |\n| --- | --- | --- |"
        );
        for (client, rate, why) in lossless {
            let _ = writeln!(out, "| {client} | {rate:.0} | {why} |");
        }
    }
    let _ = writeln!(
        out,
        "\nPerformance counters per message (perf_event_open on the client process, kernel \
         included; hardware counters where the host exposes them):\n"
    );
    for o in outcomes {
        let counters: Vec<String> = per_message(o)
            .into_iter()
            .map(|(_, _, text)| text)
            .collect();
        let _ = writeln!(
            out,
            "- {} at {}: {}",
            o.client,
            o.rate as u64,
            counters.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "\nWhat reached each client's hot thread and its core in the timed window \
         (/proc: the thread's status and stat, the core's column of /proc/interrupts and \
         /proc/softirqs):\n"
    );
    for o in outcomes {
        let _ = writeln!(
            out,
            "- {} at {} (run {}): {}",
            o.client,
            o.rate as u64,
            o.run + 1,
            hot_text(o)
        );
    }
    for o in outcomes.iter().filter(|o| o.note.is_some()) {
        let _ = writeln!(
            out,
            "\nNote: {} at {}: {}",
            o.client,
            o.rate,
            o.note.as_deref().unwrap_or("")
        );
    }
    out
}

fn render_json(outcomes: &[Outcome], lossless: &[(String, f64, String)], machine: &str) -> String {
    // One entry per run and rate, in the order measured.
    let mut keys: Vec<(usize, f64)> = outcomes.iter().map(|o| (o.run, o.rate)).collect();
    keys.dedup();
    let runs: Vec<serde_json::Value> = keys
        .iter()
        .map(|&(run, rate)| {
            let clients: serde_json::Map<String, serde_json::Value> = outcomes
                .iter()
                .filter(|o| o.rate == rate && o.run == run)
                .map(|o| {
                    (
                        o.client.clone(),
                        serde_json::json!({
                            "rate": o.rate,
                            "achieved_rate": o.achieved,
                            "p50_ns": o.quantile(0.5),
                            "p90_ns": o.quantile(0.9),
                            "p99_ns": o.quantile(0.99),
                            "p999_ns": o.quantile(0.999),
                            "max_ns": o.latency.max(),
                            "sent": o.sent,
                            "received": o.received,
                            "lost": o.lost,
                            "rss_kb": o.rss_kb,
                            "cpu_user_s": o.cpu_user_s,
                            "cpu_sys_s": o.cpu_sys_s,
                            "per_message": per_message(o)
                                .into_iter()
                                .map(|(name, value, text)| {
                                    (name, value.map_or(serde_json::Value::String(text), serde_json::Value::from))
                                })
                                .collect::<serde_json::Map<String, serde_json::Value>>(),
                            "hot_thread": o.hot.as_ref().map(|hot| serde_json::json!({
                                "thread": hot.thread,
                                "core": hot.core,
                                "voluntary_switches": hot.delta.voluntary_switches,
                                "involuntary_switches": hot.delta.involuntary_switches,
                                "minor_faults": hot.delta.minor_faults,
                                "major_faults": hot.delta.major_faults,
                                "core_interrupts": hot.delta.core_interrupts,
                                "core_timer_interrupts": hot.delta.core_timer_interrupts,
                                "core_softirqs": hot.delta.core_softirqs,
                                "core_steal_ms": hot.delta.core_steal_ms,
                                "ran_instead": hot.ran_instead.as_ref().ok().map(|tasks| counted_json(tasks)),
                                "work": counted_json(&hot.work),
                            })),
                            "send_path": o.send_path.as_ref().map(path_json),
                            "encrypt_path": o.encrypt_path.as_ref().map(path_json),
                            "note": o.note,
                        }),
                    )
                })
                .collect();
            serde_json::json!({ "rate": rate, "run": run + 1, "clients": clients })
        })
        .collect();
    let lossless: serde_json::Map<String, serde_json::Value> = lossless
        .iter()
        .map(|(client, rate, why)| {
            (
                client.clone(),
                serde_json::json!({ "rate": rate, "limit": why }),
            )
        })
        .collect();
    let value = serde_json::json!({
        "machine": machine,
        "runs": runs,
        "highest_lossless_rate": lossless,
    });
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// A latency-by-percentile plot in the HdrHistogram style: the x axis is `1 / (1 - percentile)`
/// on a log scale (so 90%, 99%, 99.9% are evenly spaced), the y axis latency on a log scale.
fn render_svg(runs: &[&Outcome], rate: f64) -> String {
    const W: f64 = 900.0;
    const H: f64 = 520.0;
    const LEFT: f64 = 80.0;
    const BOTTOM: f64 = 60.0;
    const TOP: f64 = 40.0;
    const RIGHT: f64 = 200.0;
    const COLORS: [&str; 6] = [
        "#1f77b4", "#2ca02c", "#17becf", "#d62728", "#ff7f0e", "#7f7f7f",
    ];
    let max_x = 1e5_f64; // up to the 99.999th percentile
    let (mut lo, mut hi) = (f64::MAX, 1.0_f64);
    for run in runs {
        if !run.latency.is_empty() {
            lo = lo.min(run.latency.min().max(1) as f64);
            hi = hi.max(run.latency.max() as f64);
        }
    }
    if lo > hi {
        lo = 1_000.0;
        hi = 1_000_000.0;
    }
    let (ylo, yhi) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let x = |inv: f64| LEFT + (inv.log10() / max_x.log10()) * (W - LEFT - RIGHT);
    let y = |ns: f64| H - BOTTOM - ((ns.max(1.0).log10() - ylo) / (yhi - ylo)) * (H - BOTTOM - TOP);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"24\" font-size=\"15\">Latency by percentile, simulator send to mid computed, {} msg/s</text>\n",
        rate as u64
    );
    for (label, inv) in [
        ("0%", 1.0),
        ("90%", 10.0),
        ("99%", 100.0),
        ("99.9%", 1e3),
        ("99.99%", 1e4),
        ("99.999%", 1e5),
    ] {
        let px = x(inv);
        let _ = writeln!(
            svg,
            "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            H - BOTTOM,
            H - BOTTOM + 18.0
        );
    }
    let mut decade = ylo;
    while decade <= yhi {
        let ns = 10f64.powf(decade);
        let py = y(ns);
        let label = if ns >= 1e6 {
            format!("{} ms", ns / 1e6)
        } else {
            format!("{} us", ns / 1e3)
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0
        );
        decade += 1.0;
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">percentile (log scale of 1/(1-p))</text>",
        (LEFT + W - RIGHT) / 2.0,
        H - 16.0
    );
    for (index, run) in runs.iter().enumerate() {
        if run.latency.is_empty() {
            continue;
        }
        let color = COLORS[index % COLORS.len()];
        let mut points = Vec::new();
        let mut inv = 1.0_f64;
        while inv <= max_x {
            let q = 1.0 - 1.0 / inv;
            points.push(format!(
                "{:.1},{:.1}",
                x(inv),
                y(run.latency.value_at_quantile(q) as f64)
            ));
            inv *= 1.2;
        }
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let ly = TOP + 20.0 * index as f64 + 10.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"3\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            W - RIGHT + 10.0,
            W - RIGHT + 30.0,
            W - RIGHT + 36.0,
            ly + 4.0,
            run.client
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::{median, runs_within, REPORT_BOUNDS};

    #[test]
    fn a_run_is_within_the_bounds_only_when_both_ratios_are() {
        let runs = [
            (1.2, 1.3),
            (1.19, 1.31),
            (1.21, 0.5),
            (0.7, 0.62),
            (f64::NAN, 1.0),
        ];
        assert_eq!(runs_within(&runs, REPORT_BOUNDS), 2);
        assert_eq!(runs_within(&runs, (2.0, 2.0)), 4);
        assert_eq!(runs_within(&[], REPORT_BOUNDS), 0);
    }

    #[test]
    fn the_median_of_runs_is_the_middle_value_or_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![1.3]), Some(1.3));
        assert_eq!(median(vec![2.0, 0.5, 1.1, 0.9, 1.6]), Some(1.1));
        assert_eq!(median(vec![1.0, 4.0, 2.0, 3.0]), Some(2.5));
    }
}
