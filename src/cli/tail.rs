//! `tickwire tail`: the bus's events as JSON lines (the `decode` format), or a line of rates
//! per second, read through `tickwire-client` like any other consumer; with `--nats`, the same
//! lines from a bridge's subjects, read through `tickwire_nats::NatsClient`.
//!
//! Overruns, new epochs, a closed or removed bus are lines of their own
//! (`{"type":"overrun","missed":N}`, `{"type":"epoch","epoch":E}`, `{"type":"closed"}`,
//! `{"type":"removed"}`), so a pipe never loses events silently. A closed pipe (`| head`) ends
//! the command with status 0, as do SIGINT and SIGTERM.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tickwire::event::json::write_event;
use tickwire::event::{Event, EventKind};
use tickwire_client::{Client, ClientError, Directory, Next, Owner, Start};
use tickwire_nats::{NatsClient, NatsOptions, ReplayStart};

#[derive(clap::Args, Debug)]
pub struct TailArgs {
    /// The bus file (the appliance's `[bus] path`). One of --bus, --config and --nats names
    /// what to read (none: `tail` says so, naming the three).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["config", "nats"])]
    pub bus: Option<PathBuf>,
    /// Read from NATS instead of a bus: the servers, comma separated (nats://host:port,...).
    /// The events are a bridge's (`tickwire bridge nats`); lines as with --bus, venues named
    /// as the subjects name them.
    #[arg(long, value_name = "URL[,URL...]", conflicts_with_all = ["config", "from"])]
    pub nats: Option<String>,
    /// With --nats: the subjects to take (repeat; wildcards allowed), default `tickwire.>`,
    /// e.g. `tickwire.*.binance-futures.BTCUSDT.*`.
    #[arg(long, value_name = "SUBJECT", requires = "nats")]
    pub subject: Vec<String>,
    /// With --nats: replay JetStream stream STREAM (a bridge's `--jetstream-stream`) from
    /// --since on, then go on live from it.
    #[arg(long, value_name = "STREAM", requires = "nats")]
    pub replay: Option<String>,
    /// With --replay: where to start: all (the stream's oldest message), an RFC 3339 time, or
    /// nanoseconds since the Unix epoch.
    #[arg(long, value_name = "WHEN", requires = "replay")]
    pub since: Option<ReplayStart>,
    /// The appliance's config file: read the bus its `[bus]` table names (its `path`, or the
    /// default the appliance would take in this environment).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only events of this venue (its name in the directory, e.g. binance-futures).
    #[arg(long, value_name = "NAME")]
    pub venue: Option<String>,
    /// Only events of this instrument (the symbol as the venue file lists it).
    #[arg(long, value_name = "SYMBOL")]
    pub symbol: Option<String>,
    /// Only events of these kinds (repeat): quote, trade, level, snapshot_begin, snapshot_end,
    /// gap, status, reference, bar, trading_status, imbalance, statistic, liquidation.
    #[arg(long, value_name = "KIND")]
    pub kind: Vec<String>,
    /// Print one line per second (events/s, lag, overruns, missed) instead of the events; with
    /// --nats too (lag is then the events received and not read yet, and there is no epoch:
    /// each appliance's comes as an `epoch` line).
    #[arg(long)]
    pub stats: bool,
    /// Where to start: latest (only new events) or oldest (what the ring still holds).
    #[arg(long, value_name = "WHERE", value_parser = ["latest", "oldest"])]
    pub from: Option<String>,
    /// Wait up to this many seconds for the bus to appear (default: fail at once if none).
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<f64>,
    /// Read the bus only if this user (a name or a uid) owns it: the appliance's, when it writes
    /// the bus in a directory others may write too (/dev/shm). Default: root, you, or the owner
    /// of the bus's directory when no one else may write there (/run/tickwire under systemd).
    #[arg(long, value_name = "USER", conflicts_with = "nats")]
    pub bus_owner: Option<String>,
}

/// What `tail` says when it was given nothing to read.
const WHAT_TO_READ: &str = "name what to read: --bus PATH (a bus file), --config FILE (the bus an \
     appliance's config names) or --nats URL[,URL...] (a NATS bridge's subjects)";

/// Which events are printed.
struct Filter {
    venue: Option<String>,
    symbol: Option<String>,
    /// By `EventKind::index`; all true when no `--kind` was given.
    kinds: [bool; EventKind::COUNT],
}

impl Filter {
    fn new(args: &TailArgs) -> Result<Filter, String> {
        let mut kinds = [args.kind.is_empty(); EventKind::COUNT];
        for name in &args.kind {
            let kind = EventKind::from_name(name).ok_or_else(|| {
                let valid: Vec<&str> = EventKind::ALL.iter().map(|kind| kind.name()).collect();
                format!("--kind {name}: no such kind; valid: {}", valid.join(", "))
            })?;
            kinds[kind.index()] = true;
        }
        Ok(Filter {
            venue: args.venue.clone(),
            symbol: args.symbol.clone(),
            kinds,
        })
    }

    fn matches(&self, event: &Event, venue: &str, symbol: &str) -> bool {
        self.kinds[event.kind().index()]
            && self.venue.as_deref().is_none_or(|want| want == venue)
            && self.symbol.as_deref().is_none_or(|want| want == symbol)
    }
}

pub fn tail(args: TailArgs) -> ExitCode {
    let filter = match Filter::new(&args) {
        Ok(filter) => filter,
        Err(message) => {
            eprintln!("tickwire tail: {message}");
            return ExitCode::from(2);
        }
    };
    if let Some(urls) = &args.nats {
        return tail_nats(urls, &args, &filter);
    }
    let path = match (&args.bus, &args.config) {
        (Some(path), _) => path.clone(),
        (None, Some(config)) => match tickwire::config::load(config) {
            Ok(loaded) => match &loaded.appliance.bus {
                Some(bus) => bus.resolved_path(),
                None => {
                    eprintln!(
                        "tickwire tail: {} has no [bus] table: that appliance publishes no bus \
                         (add [bus] to it, or name a bus with --bus PATH)",
                        config.display()
                    );
                    return ExitCode::from(2);
                }
            },
            Err(errors) => {
                eprintln!("tickwire tail: {errors}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("tickwire tail: {WHAT_TO_READ}");
            return ExitCode::from(2);
        }
    };
    let wait = match args.wait.map(Duration::try_from_secs_f64) {
        Some(Err(_)) => {
            eprintln!("tickwire tail: --wait must be a non-negative number of seconds");
            return ExitCode::from(2);
        }
        Some(Ok(wait)) => Some(wait),
        None => None,
    };
    // Blocked before any thread starts, so that every thread inherits the mask and the
    // signals reach the one that waits for them.
    let Some(stop) = super::signals::stop_flag("tail") else {
        return ExitCode::FAILURE;
    };
    let start = if args.from.as_deref() == Some("oldest") {
        Start::Oldest
    } else {
        Start::Latest
    };
    let owner = match args.bus_owner.as_deref().map(tickwire_client::user_id) {
        None => Owner::Trusted,
        Some(Ok(uid)) => Owner::Uid(uid),
        Some(Err(error)) => {
            eprintln!("tickwire tail: --bus-owner: {error}");
            return ExitCode::from(2);
        }
    };
    let options = Client::options().start(start).batch(1024).owner(owner);
    let attached = match wait {
        Some(wait) => options.attach_wait(&path, wait),
        None => options.attach(&path),
    };
    let mut client = match attached {
        Ok(client) => client,
        Err(error) => {
            let hint = match &error {
                ClientError::Bus(tickwire_bus::BusError::Untrusted { .. }) => {
                    " (here: --bus-owner USER)"
                }
                _ => "",
            };
            eprintln!("tickwire tail: {error}{hint}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = std::io::stdout();
    let out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = if args.stats {
        stats(&mut client, &filter, out, &stop)
    } else {
        events(&mut client, &filter, out, &stop)
    };
    finish(result)
}

/// `tail --nats`: the same lines, from a `NatsClient`.
fn tail_nats(urls: &str, args: &TailArgs, filter: &Filter) -> ExitCode {
    let servers = match tickwire_nats::bridge::parse_servers(urls) {
        Ok(servers) => servers,
        Err(message) => {
            eprintln!("tickwire tail: --nats: {message}");
            return ExitCode::from(2);
        }
    };
    let subjects = if args.subject.is_empty() {
        vec![format!("{}.>", tickwire_nats::wire::ROOT)]
    } else {
        args.subject.clone()
    };
    let Some(stop) = super::signals::stop_flag("tail") else {
        return ExitCode::FAILURE;
    };
    let mut options = NatsOptions::new(servers, subjects);
    if let Some(stream) = &args.replay {
        options = options.replay(stream.clone(), args.since.unwrap_or(ReplayStart::All));
    }
    let mut client = match NatsClient::connect(options) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("tickwire tail: {error}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = std::io::stdout();
    let out = BufWriter::with_capacity(1 << 16, stdout.lock());
    if args.stats {
        finish(stats(&mut client, filter, out, &stop))
    } else {
        finish(events(&mut client, filter, out, &stop))
    }
}

fn finish(result: std::io::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of the pipe is gone (`| head`): nothing more to do.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tickwire tail: writing to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Where `events` reads from: a bus client or a NATS client, the same `Next`s.
trait Source {
    /// An error ends the command (a NATS client whose network thread stopped) rather than
    /// being waited out (a bus client waits for a new bus).
    const ERRORS_END: bool;
    fn next_within(&mut self, timeout: Duration) -> Result<Next<'_>, String>;
    /// Nothing received and not handed out: the lines go out now.
    fn caught_up(&self) -> bool;
    /// For `--stats`: events received and not handed out yet.
    fn backlog(&self) -> u64;
    /// For `--stats`: overruns reported and the events they said were lost, in total.
    fn losses(&self) -> (u64, u64);
    /// For `--stats`: the bus's epoch (a NATS client reads many appliances: none).
    fn epoch(&self) -> Option<u64>;
}

impl Source for Client {
    const ERRORS_END: bool = false;
    fn next_within(&mut self, timeout: Duration) -> Result<Next<'_>, String> {
        self.wait(timeout).map_err(|error| {
            report(&error);
            error.to_string()
        })
    }

    fn caught_up(&self) -> bool {
        self.lag() == 0
    }

    fn backlog(&self) -> u64 {
        self.lag()
    }

    fn losses(&self) -> (u64, u64) {
        let counters = self.counters();
        (counters.overruns, counters.missed)
    }

    fn epoch(&self) -> Option<u64> {
        Some(Client::epoch(self))
    }
}

impl Source for NatsClient {
    const ERRORS_END: bool = true;
    fn next_within(&mut self, timeout: Duration) -> Result<Next<'_>, String> {
        self.wait(timeout).map_err(|error| {
            eprintln!("tickwire tail: {error}");
            error.to_string()
        })
    }

    fn caught_up(&self) -> bool {
        self.lag() == 0
    }

    fn backlog(&self) -> u64 {
        self.lag() as u64
    }

    fn losses(&self) -> (u64, u64) {
        let counters = self.counters();
        (counters.overruns, counters.missed)
    }

    fn epoch(&self) -> Option<u64> {
        None
    }
}

/// How long one wait lasts, so that a stop signal is seen within it.
const WAIT: Duration = Duration::from_millis(100);

fn events<S: Source>(
    client: &mut S,
    filter: &Filter,
    mut out: impl Write,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(512);
    while !stop.load(Ordering::Relaxed) {
        match client.next_within(WAIT) {
            Ok(Next::Events(events)) => {
                for event in events {
                    let (venue, symbol) = events.name(event);
                    if filter.matches(event, venue, symbol) {
                        line.clear();
                        write_event(&mut line, venue, symbol.as_bytes(), event);
                        out.write_all(&line)?;
                    }
                }
            }
            Ok(Next::Overrun {
                missed,
                partition: Some(partition),
            }) => writeln!(
                out,
                "{{\"type\":\"overrun\",\"missed\":{missed},\"partition\":{partition}}}"
            )?,
            Ok(Next::Overrun {
                missed,
                partition: None,
            }) => writeln!(out, "{{\"type\":\"overrun\",\"missed\":{missed}}}")?,
            Ok(Next::NewEpoch { epoch }) => {
                writeln!(out, "{{\"type\":\"epoch\",\"epoch\":{epoch}}}")?
            }
            Ok(Next::Closed) => writeln!(out, "{{\"type\":\"closed\"}}")?,
            Ok(Next::Removed) => writeln!(out, "{{\"type\":\"removed\"}}")?,
            Ok(Next::Idle) => {}
            // Said on stderr by the source.
            Err(_) if S::ERRORS_END => break,
            Err(_) => {}
        }
        // Caught up: the lines go out now; while behind, they go out in large writes.
        if client.caught_up() {
            out.flush()?;
        }
    }
    out.flush()
}

fn stats<S: Source>(
    client: &mut S,
    filter: &Filter,
    mut out: impl Write,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut next_line = Instant::now() + Duration::from_secs(1);
    let (mut read, mut matched) = (0u64, 0u64);
    let mut last = client.losses();
    while !stop.load(Ordering::Relaxed) {
        match client.next_within(WAIT.min(next_line.saturating_duration_since(Instant::now()))) {
            Ok(Next::Events(events)) => {
                read += events.len() as u64;
                matched += count_matching(&events, events.directory(), filter);
            }
            Ok(Next::NewEpoch { epoch }) => {
                writeln!(out, "{{\"type\":\"epoch\",\"epoch\":{epoch}}}")?;
                out.flush()?;
            }
            Ok(Next::Overrun { .. } | Next::Closed | Next::Removed | Next::Idle) => {}
            // Said on stderr by the source.
            Err(_) if S::ERRORS_END => break,
            Err(_) => {}
        }
        let now = Instant::now();
        if now >= next_line {
            let (overruns, missed) = client.losses();
            let epoch = match client.epoch() {
                Some(epoch) => format!(",\"epoch\":{epoch}"),
                None => String::new(),
            };
            writeln!(
                out,
                "{{\"type\":\"stats\",\"events_per_s\":{read},\"matched_per_s\":{matched},\
                 \"lag\":{},\"overruns\":{},\"missed\":{},\"overruns_total\":{overruns},\
                 \"missed_total\":{missed}{epoch}}}",
                client.backlog(),
                overruns.saturating_sub(last.0),
                missed.saturating_sub(last.1),
            )?;
            out.flush()?;
            (read, matched, last) = (0, 0, (overruns, missed));
            next_line += Duration::from_secs(1);
            if next_line < now {
                next_line = now + Duration::from_secs(1);
            }
        }
    }
    out.flush()
}

fn count_matching(events: &[Event], directory: &Directory, filter: &Filter) -> u64 {
    events
        .iter()
        .filter(|event| {
            let (venue, symbol) = directory.name(event);
            filter.matches(event, venue, symbol)
        })
        .count() as u64
}

/// A bus that failed under the reader: said on stderr; the client waits for a new bus.
fn report(error: &ClientError) {
    eprintln!("tickwire tail: {error}; waiting for the appliance to make a new bus");
}
