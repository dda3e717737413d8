//! `tickwire bridge nats`: the bus's events on NATS subjects for consumers on other hosts, in a
//! process of its own (`tickwire_nats::bridge` does the work). Prints a line of counters every
//! `--stats-interval` seconds on stderr and a last one when it stops.

use super::signals::StopSignals;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tickwire::config::BridgeConfig;
use tickwire_nats::bridge::{self, BridgeCounters, BridgeOptions, JetStreamOptions};

#[derive(clap::Subcommand, Debug)]
pub enum BridgeCommand {
    /// Publish every event of an appliance's bus on NATS, as
    /// `tickwire.<appliance>.<venue>.<symbol>.<kind>` (see `tickwire_nats::wire`).
    ///
    /// The bus is read at its own pace; a bounded queue stands in front of the network and drops
    /// when full (counted, and published as gap events with reason BridgeDrop); overruns of the
    /// bus are published as gaps with reason BusOverrun. The client reconnects across every
    /// server given. Exit status: 0 on SIGINT/SIGTERM, 1 when the bus cannot be read or the
    /// network thread fails, 2 on bad arguments.
    Nats(Box<NatsArgs>),
}

#[derive(clap::Args, Debug)]
pub struct NatsArgs {
    /// The appliance's config file: the bus its `[bus]` table names, and the defaults of the
    /// flags below from its `[bridge]` table.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "bus",
        conflicts_with = "bus"
    )]
    pub config: Option<PathBuf>,
    /// The bus file, instead of --config.
    #[arg(long, value_name = "PATH")]
    pub bus: Option<PathBuf>,
    /// The NATS servers, comma separated (default: `[bridge] nats_urls`, else
    /// nats://127.0.0.1:4222).
    #[arg(long, value_name = "URL[,URL...]")]
    pub url: Option<String>,
    /// The appliance's name, the subjects' second token (default: `[bridge] name`, else the
    /// host name).
    #[arg(long, value_name = "NAME")]
    pub appliance: Option<String>,
    /// Messages (up to 64 events each) the queue in front of the network holds (default:
    /// `[bridge] queue_messages`, else 8192).
    #[arg(long, value_name = "N")]
    pub queue: Option<usize>,
    /// Keep the events in this JetStream stream (made if missing) for replay (default:
    /// `[bridge] jetstream_stream`, else none).
    #[arg(long, value_name = "NAME")]
    pub jetstream_stream: Option<String>,
    /// The stream's retention: events older than this many seconds go (0: no age limit;
    /// default: `[bridge] jetstream_max_age_s`, else 3600).
    #[arg(long, value_name = "SECONDS")]
    pub jetstream_max_age: Option<f64>,
    /// The stream's retention: at most this many bytes, oldest first out (-1: no limit;
    /// default: `[bridge] jetstream_max_bytes`, else 1 GiB).
    #[arg(long, value_name = "BYTES")]
    pub jetstream_max_bytes: Option<i64>,
    /// Seconds to wait for the bus to appear.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub bus_wait: f64,
    /// Where the bridge keeps its bus position, stream and sequences, so that a restarted bridge
    /// resumes where the last one stopped (while the bus still holds it) instead of starting a
    /// new stream (default: the bus path plus `.nats-<appliance>.state`).
    #[arg(long, value_name = "FILE", conflicts_with = "no_state")]
    pub state: Option<PathBuf>,
    /// Keep no state: a restarted bridge starts a new stream at the bus's latest event.
    #[arg(long)]
    pub no_state: bool,
    /// Seconds between lines of counters on stderr (0: only the last).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub stats_interval: f64,
}

pub fn bridge(command: BridgeCommand) -> ExitCode {
    match command {
        BridgeCommand::Nats(args) => nats(*args),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("tickwire bridge nats: {message}");
    ExitCode::from(2)
}

fn nats(args: NatsArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    let (bus, configured) = match (&args.bus, &args.config) {
        (Some(bus), _) => (bus.clone(), BridgeConfig::default()),
        (None, Some(config)) => match tickwire::config::load(config) {
            Ok(loaded) => match &loaded.appliance.bus {
                Some(bus) => (
                    bus.resolved_path(),
                    loaded.appliance.bridge.clone().unwrap_or_default(),
                ),
                None => {
                    return fail(format_args!(
                        "{} has no [bus] table: that appliance publishes no bus",
                        config.display()
                    ))
                }
            },
            Err(errors) => return fail(errors),
        },
        (None, None) => return fail("--config FILE or --bus PATH names the bus to read"),
    };
    let url = args.url.clone().unwrap_or_else(|| {
        if configured.nats_urls.is_empty() {
            "nats://127.0.0.1:4222".to_owned()
        } else {
            configured.nats_urls.join(",")
        }
    });
    let servers = match bridge::parse_servers(&url) {
        Ok(servers) => servers,
        Err(message) => return fail(format_args!("--url: {message}")),
    };
    let max_age = args
        .jetstream_max_age
        .unwrap_or(configured.jetstream_max_age_s as f64);
    let (Ok(bus_wait), Ok(stats_interval), Ok(max_age)) = (
        Duration::try_from_secs_f64(args.bus_wait),
        Duration::try_from_secs_f64(args.stats_interval),
        Duration::try_from_secs_f64(max_age),
    ) else {
        return fail(
            "--bus-wait, --stats-interval and --jetstream-max-age are seconds, not negative",
        );
    };
    let appliance = args
        .appliance
        .clone()
        .unwrap_or_else(|| configured.resolved_name());
    let default_state = {
        let mut path = bus.as_os_str().to_owned();
        path.push(format!(".nats-{}.state", file_part(&appliance)));
        PathBuf::from(path)
    };
    let mut options = BridgeOptions::new(bus, servers, appliance);
    options.bus_wait = bus_wait;
    options.state = (!args.no_state).then(|| args.state.clone().unwrap_or(default_state));
    options.queue_messages = args.queue.unwrap_or(configured.queue_messages).max(1);
    let max_bytes = args
        .jetstream_max_bytes
        .unwrap_or(configured.jetstream_max_bytes);
    if let Some(stream) = args
        .jetstream_stream
        .as_ref()
        .or(configured.jetstream_stream.as_ref())
    {
        if stream.is_empty() || stream.contains(['.', '*', '>', ' ', '\t', '/', '\\']) {
            return fail(format_args!(
                "--jetstream-stream {stream:?}: a stream name holds no '.', '*', '>', '/', '\\' \
                 or whitespace"
            ));
        }
        options.jetstream = Some(JetStreamOptions {
            stream: stream.clone(),
            max_age,
            max_bytes,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let signals = match StopSignals::block() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("tickwire bridge nats: {error}");
            return ExitCode::FAILURE;
        }
    };
    let counters = Arc::new(BridgeCounters::default());
    {
        let stop = Arc::clone(&stop);
        let counters = Arc::clone(&counters);
        std::thread::spawn(move || {
            let mut since_line = Duration::ZERO;
            loop {
                match signals.wait(Duration::from_millis(200)) {
                    Ok(Some(_)) | Err(_) => {
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(None) => {}
                }
                since_line += Duration::from_millis(200);
                if !stats_interval.is_zero() && since_line >= stats_interval {
                    since_line = Duration::ZERO;
                    eprintln!("{}", counters_line(&counters));
                }
            }
        });
    }
    tracing::info!(
        bus = %options.bus.display(),
        appliance = %options.appliance,
        url = %url,
        "bridge: publishing the bus on NATS"
    );
    let result = bridge::run(&options, &stop, Arc::clone(&counters));
    eprintln!("{}", counters_line(&counters));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tickwire bridge nats: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A name as a file name part: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_part(name: &str) -> String {
    name.chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.') {
                ch
            } else {
                '_'
            }
        })
        .collect()
}

/// The counters as one JSON line.
fn counters_line(counters: &BridgeCounters) -> String {
    let get = BridgeCounters::get;
    format!(
        "{{\"type\":\"bridge\",\"events_read\":{},\"messages_queued\":{},\"messages_published\":{},\
         \"messages_dropped\":{},\"events_dropped\":{},\"bus_overruns\":{},\"bus_missed\":{},\
         \"gaps_published\":{},\"publish_errors\":{},\"connects\":{},\"disconnects\":{},\
         \"directory_replies\":{},\"checkpoints\":{},\"resumed\":{},\"jetstream_ready\":{}}}",
        get(&counters.events_read),
        get(&counters.messages_queued),
        get(&counters.messages_published),
        get(&counters.messages_dropped),
        get(&counters.events_dropped),
        get(&counters.bus_overruns),
        get(&counters.bus_missed),
        get(&counters.gaps_published),
        get(&counters.publish_errors),
        get(&counters.connects),
        get(&counters.disconnects),
        get(&counters.directory_replies),
        get(&counters.checkpoints),
        counters.resumed.load(Ordering::Relaxed),
        counters.jetstream_ready.load(Ordering::Relaxed),
    )
}
