//! The bus across processes: one-way latency beside iceoryx2 and a Unix domain socket, and the
//! writer's rate with 0, 1, 4 and 16 readers and with a stalled one. Its own crate and workspace
//! so that iceoryx2 never enters the main workspace's build; `scripts/bench-bus` builds it with
//! the release profile below (fat LTO, one codegen unit) and runs it.
//!
//! ```text
//! bus-latency latency    [--count N] [--warmup N] [--interval-ns NS] [--rounds R]
//!                        [--writer-core C] [--reader-core C] [--only bus,iceoryx2,uds]
//! bus-latency throughput [--seconds S] [--rounds R] [--capacity SLOTS]
//!                        [--writer-core C] [--reader-core C]
//! ```
//!
//! Both print Markdown tables. The processes they start are this binary again, with a role
//! (`latency-writer`, `latency-reader`, `throughput-reader`, `stalled-reader`).

mod clock;
mod latency;
mod throughput;

use latency::System;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;
use tickwire_bus::{BusOptions, BusWriter, Geometry};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("latency") => run_latency(&args[1..]),
        Some("throughput") => run_throughput(&args[1..]),
        Some("latency-writer") => {
            latency::Args::parse(&args[1..]).and_then(|args| latency::writer(&args))
        }
        Some("latency-reader") => {
            latency::Args::parse(&args[1..]).and_then(|args| latency::reader(&args))
        }
        Some("throughput-reader") => {
            role_path_core(&args[1..]).and_then(|(path, core)| throughput::reader(path, core))
        }
        Some("stalled-reader") => role_path_core(&args[1..])
            .and_then(|(path, core)| throughput::stalled_reader(path, core)),
        _ => {
            Err("usage: bus-latency latency|throughput [options] (see the source's header)".into())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bus-latency: {error}");
            ExitCode::FAILURE
        }
    }
}

fn role_path_core(args: &[String]) -> Result<(&Path, usize), String> {
    let [path, core] = args else {
        return Err(format!("expected PATH CORE, got {args:?}"));
    };
    Ok((
        Path::new(path),
        core.parse()
            .map_err(|error| format!("core {core:?}: {error}"))?,
    ))
}

/// `--name value` options with defaults.
struct Options<'a> {
    args: &'a [String],
}

impl Options<'_> {
    fn get<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.args.iter().position(|arg| arg == name) {
            None => Ok(default),
            Some(index) => {
                let value = self
                    .args
                    .get(index + 1)
                    .ok_or_else(|| format!("{name} needs a value"))?;
                value
                    .parse()
                    .map_err(|error| format!("{name} {value:?}: {error}"))
            }
        }
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        for (index, arg) in self.args.iter().enumerate() {
            let is_value = index > 0 && known.contains(&self.args[index - 1].as_str());
            if !is_value && !known.contains(&arg.as_str()) {
                return Err(format!(
                    "unknown option {arg:?}; options: {}",
                    known.join(" ")
                ));
            }
        }
        Ok(())
    }
}

/// A child process of this binary, its stdout read line by line on a thread so that waits are
/// bounded.
struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    role: String,
}

impl Process {
    fn start(role: &str, args: &[String]) -> Result<Process, String> {
        let exe = std::env::current_exe().map_err(|error| format!("current_exe: {error}"))?;
        let mut child = Command::new(exe)
            .arg(role)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("start {role}: {error}"))?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Process {
            stdin: child.stdin.take(),
            child,
            lines,
            role: role.to_owned(),
        })
    }

    /// The next line that starts with `prefix`, within `timeout`.
    fn expect(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) if line.starts_with(prefix) => Ok(line),
            Ok(line) => Err(format!("{}: expected {prefix:?}, got {line:?}", self.role)),
            Err(_) => Err(format!(
                "{}: no {prefix:?} within {timeout:?} (it failed or hangs)",
                self.role
            )),
        }
    }

    fn tell(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|error| format!("{}: {error}", self.role))
    }

    /// Waits for a clean exit.
    fn finish(mut self) -> Result<(), String> {
        self.stdin = None;
        let status = self
            .child
            .wait()
            .map_err(|error| format!("{}: {error}", self.role))?;
        if !status.success() {
            return Err(format!("{} failed: {status}", self.role));
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // A child left running after an error is ended: it is ours, and it may be busy-polling.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn temp_dir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("tickwire-bus-bench")
        .tempdir_in("/dev/shm")
        .map_err(|error| format!("a temp dir under /dev/shm: {error}"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// One latency run's figures, in ns, as the reader printed them.
#[derive(Clone, Copy)]
struct LatencyRun {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    recorded: u64,
    lost: u64,
    negative: u64,
}

fn latency_run(
    system: System,
    count: u64,
    warmup: u64,
    interval_ns: u64,
    ticks_per_ns: f64,
    cores: (usize, usize),
) -> Result<LatencyRun, String> {
    let dir = temp_dir()?;
    let args = |core| latency::Args {
        system,
        dir: dir.path().to_owned(),
        total: warmup + count,
        warmup,
        interval_ns,
        ticks_per_ns,
        core,
    };
    let mut writer = Process::start("latency-writer", &args(cores.0).to_strings())?;
    writer.expect("ready", Duration::from_secs(30))?;
    let mut reader = Process::start("latency-reader", &args(cores.1).to_strings())?;
    reader.expect("ready", Duration::from_secs(30))?;
    writer.tell("go")?;
    let run_time = Duration::from_nanos((warmup + count) * interval_ns);
    let line = reader.expect("result", run_time * 3 + Duration::from_secs(30))?;
    writer.finish()?;
    reader.finish()?;
    let fields: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|field| {
            field
                .parse::<f64>()
                .map_err(|error| format!("{line:?}: {error}"))
        })
        .collect::<Result<_, _>>()?;
    let [p50, p90, p99, p999, max, recorded, lost, negative] = fields[..] else {
        return Err(format!("a result line with 8 fields, got {line:?}"));
    };
    Ok(LatencyRun {
        p50,
        p90,
        p99,
        p999,
        max,
        recorded: recorded as u64,
        lost: lost as u64,
        negative: negative as u64,
    })
}

fn run_latency(args: &[String]) -> Result<(), String> {
    let options = Options { args };
    options.check_known(&[
        "--count",
        "--warmup",
        "--interval-ns",
        "--rounds",
        "--writer-core",
        "--reader-core",
        "--only",
    ])?;
    let count: u64 = options.get("--count", 200_000)?;
    let warmup: u64 = options.get("--warmup", 20_000)?;
    let interval_ns: u64 = options.get("--interval-ns", 5_000)?;
    let rounds: usize = options.get("--rounds", 3)?;
    let cores = (
        options.get("--writer-core", 0usize)?,
        options.get("--reader-core", 1usize)?,
    );
    let only: String = options.get("--only", "bus,iceoryx2,uds".to_owned())?;
    let systems: Vec<System> = only
        .split(',')
        .map(System::from_arg)
        .collect::<Result<_, _>>()?;
    let ticks_per_ns = clock::calibrate(Duration::from_millis(300));
    println!(
        "### One-way latency, writer process on core {} to busy-polling reader process on core {}",
        cores.0, cores.1
    );
    println!();
    println!(
        "{count} messages of 64 B per run after {warmup} of warm-up, one every {interval_ns} ns; \
         {rounds} rounds, the systems alternated in each; clock: {} at {ticks_per_ns:.4} ticks/ns. \
         Each cell is the median over rounds (min..max for p50).",
        clock::source()
    );
    println!();
    let mut runs: Vec<Vec<LatencyRun>> = vec![Vec::new(); systems.len()];
    for round in 0..rounds {
        // Rotate the order each round so no system always runs first or last.
        for offset in 0..systems.len() {
            let index = (round + offset) % systems.len();
            let run = latency_run(
                systems[index],
                count,
                warmup,
                interval_ns,
                ticks_per_ns,
                cores,
            )?;
            eprintln!(
                "round {round} {}: p50 {:.0} p99 {:.0} p99.9 {:.0} max {:.0} ns (lost {}, clock went back {})",
                systems[index].arg(),
                run.p50,
                run.p99,
                run.p999,
                run.max,
                run.lost,
                run.negative
            );
            runs[index].push(run);
        }
    }
    println!("| system | p50 ns | p90 ns | p99 ns | p99.9 ns | max ns | p50 min..max | recorded | lost | clock went back |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (system, runs) in systems.iter().zip(&runs) {
        let field =
            |get: fn(&LatencyRun) -> f64| median(&mut runs.iter().map(get).collect::<Vec<_>>());
        let p50s: Vec<f64> = runs.iter().map(|run| run.p50).collect();
        let low = p50s.iter().copied().fold(f64::INFINITY, f64::min);
        let high = p50s.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {low:.0}..{high:.0} | {} | {} | {} |",
            system.name(),
            field(|run| run.p50),
            field(|run| run.p90),
            field(|run| run.p99),
            field(|run| run.p999),
            field(|run| run.max),
            runs.iter().map(|run| run.recorded).sum::<u64>(),
            runs.iter().map(|run| run.lost).sum::<u64>(),
            runs.iter().map(|run| run.negative).sum::<u64>(),
        );
    }
    println!();
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Readers(usize),
    Stalled,
}

impl Phase {
    fn label(self) -> String {
        match self {
            Phase::Readers(0) => "0 readers".to_owned(),
            Phase::Readers(1) => "1 reader".to_owned(),
            Phase::Readers(count) => format!("{count} readers"),
            Phase::Stalled => "1 stalled reader".to_owned(),
        }
    }
}

struct PhaseRun {
    writer_rate: f64,
    /// The writer's time in `write` and `publish` per event, ns.
    writer_ns_per_event: f64,
    written: u64,
    readers: Vec<throughput::ReaderReport>,
}

fn throughput_run(
    phase: Phase,
    seconds: f64,
    rate: Option<f64>,
    ticks_per_ns: f64,
    capacity: u64,
    reader_core: usize,
) -> Result<PhaseRun, String> {
    let dir = temp_dir()?;
    let options = BusOptions {
        path: dir.path().join("throughput.bus"),
        geometry: Geometry::new(capacity, 16)?,
        group: None,
    };
    let mut writer = BusWriter::create(&options, 1, 0).map_err(|error| error.to_string())?;
    let reader_args = vec![options.path.display().to_string(), reader_core.to_string()];
    let mut readers = Vec::new();
    let (role, count) = match phase {
        Phase::Readers(count) => ("throughput-reader", count),
        Phase::Stalled => ("stalled-reader", 1),
    };
    for _ in 0..count {
        readers.push(Process::start(role, &reader_args)?);
    }
    for reader in &mut readers {
        reader.expect("ready", Duration::from_secs(30))?;
    }
    let run = throughput::write_for(
        &mut writer,
        Duration::from_secs_f64(seconds),
        rate,
        ticks_per_ns,
    );
    // Dropping the writer marks the bus closed: the readers drain what is left and report.
    drop(writer);
    let mut reports = Vec::new();
    for mut reader in readers {
        if phase == Phase::Stalled {
            reader.tell("read")?;
        }
        let line = reader.expect("result", Duration::from_secs(120))?;
        reader.finish()?;
        reports.push(throughput::ReaderReport::parse(&line)?);
    }
    Ok(PhaseRun {
        writer_rate: run.written as f64 / run.seconds,
        writer_ns_per_event: run.busy_ns / run.written as f64,
        written: run.written,
        readers: reports,
    })
}

fn run_throughput(args: &[String]) -> Result<(), String> {
    let options = Options { args };
    options.check_known(&[
        "--seconds",
        "--rounds",
        "--capacity",
        "--rate",
        "--writer-core",
        "--reader-core",
    ])?;
    let seconds: f64 = options.get("--seconds", 1.0)?;
    let rounds: usize = options.get("--rounds", 3)?;
    let capacity: u64 = options.get("--capacity", 1 << 20)?;
    let paced_rate: f64 = options.get("--rate", 20e6)?;
    let writer_core: usize = options.get("--writer-core", 0)?;
    let reader_core: usize = options.get("--reader-core", 1)?;
    clock::pin(writer_core)?;
    let ticks_per_ns = clock::calibrate(Duration::from_millis(300));
    let phases = [
        Phase::Readers(0),
        Phase::Readers(1),
        Phase::Readers(4),
        Phase::Readers(16),
        Phase::Stalled,
    ];
    let modes = [None, Some(paced_rate)];
    println!(
        "### Writer throughput with readers (writer on core {writer_core}, every reader process on core {reader_core})"
    );
    println!();
    println!(
        "{seconds} s of writing per run, one publish per {} events, ring of {capacity} slots \
         ({} MiB); {rounds} rounds, the phases in order in each round. The writer runs at full \
         speed, then paced to {:.0} M events/s (batches of 64 on a schedule, busy-waiting \
         between them). Readers are processes that read up to 256 events per read and yield \
         when the ring is empty; each checks every event it keeps and that its `missed` counts \
         account for every position it skipped. \"vs 0 readers\" is the writer's rate (full \
         speed) or its time per event (paced) over the same with no reader in the same round, \
         median over rounds. The writer's ns/event is its time in `write` and `publish` per \
         event (paced: clock reads included).",
        throughput::BATCH,
        (capacity * 64) >> 20,
        paced_rate / 1e6,
    );
    println!();
    println!("| writer | readers | writer M events/s (median) | min..max | writer ns/event | vs 0 readers | per reader: read M events/s | per reader: share of events read | per reader: overruns (reads that reported a loss) | per reader: events missed |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for rate in modes {
        let mode = match rate {
            None => "full speed".to_owned(),
            Some(rate) => format!("paced, {:.0} M/s", rate / 1e6),
        };
        let mut runs: Vec<Vec<PhaseRun>> = phases.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            for (index, phase) in phases.iter().enumerate() {
                let run =
                    throughput_run(*phase, seconds, rate, ticks_per_ns, capacity, reader_core)?;
                eprintln!(
                    "{mode} round {round} {}: writer {:.1} M events/s, {:.2} ns/event; readers read {:?} M events/s, missed {:?}",
                    phase.label(),
                    run.writer_rate / 1e6,
                    run.writer_ns_per_event,
                    run.readers
                        .iter()
                        .map(|report| (report.read as f64 / report.seconds.max(1e-9) / 1e6
                            * 10.0)
                            .round()
                            / 10.0)
                        .collect::<Vec<_>>(),
                    run.readers
                        .iter()
                        .map(|report| report.missed)
                        .collect::<Vec<_>>()
                );
                runs[index].push(run);
            }
        }
        for (phase, phase_runs) in phases.iter().zip(&runs) {
            let mut rates: Vec<f64> = phase_runs.iter().map(|run| run.writer_rate / 1e6).collect();
            let low = rates.iter().copied().fold(f64::INFINITY, f64::min);
            let high = rates.iter().copied().fold(0.0, f64::max);
            let mut costs: Vec<f64> = phase_runs
                .iter()
                .map(|run| run.writer_ns_per_event)
                .collect();
            // Full speed compares rates; paced compares the writer's cost per event (its rate
            // is the schedule's).
            let mut ratios: Vec<f64> = phase_runs
                .iter()
                .zip(&runs[0])
                .map(|(run, alone)| match rate {
                    None => run.writer_rate / alone.writer_rate,
                    Some(_) => run.writer_ns_per_event / alone.writer_ns_per_event,
                })
                .collect();
            let reader_cells = if phase_runs[0].readers.is_empty() {
                "- | - | - | -".to_owned()
            } else {
                let mut read_rates = Vec::new();
                let mut shares = Vec::new();
                let mut overruns = Vec::new();
                let mut missed = Vec::new();
                for run in phase_runs {
                    for report in &run.readers {
                        read_rates.push(report.read as f64 / report.seconds.max(1e-9) / 1e6);
                        shares.push(report.read as f64 / run.written as f64 * 100.0);
                        overruns.push(report.overruns as f64);
                        missed.push(report.missed as f64);
                    }
                }
                let read_rate = if *phase == Phase::Stalled {
                    // One read of the last ring's worth, after the writer stopped.
                    "reads once, after the writer".to_owned()
                } else {
                    format!("{:.1}", median(&mut read_rates))
                };
                let missed = if *phase == Phase::Stalled {
                    format!(
                        "{:.0} (exactly the positions skipped: checked)",
                        median(&mut missed)
                    )
                } else {
                    format!("{:.0}", median(&mut missed))
                };
                format!(
                    "{read_rate} | {:.1}% | {:.0} | {missed}",
                    median(&mut shares),
                    median(&mut overruns),
                )
            };
            println!(
                "| {mode} | {} | {:.1} | {low:.1}..{high:.1} | {:.2} | {:.2}x | {reader_cells} |",
                phase.label(),
                median(&mut rates),
                median(&mut costs),
                median(&mut ratios),
            );
        }
    }
    println!();
    Ok(())
}
