//! The command line: argument parsing and the subcommands. The edge of the program, where
//! `anyhow` and printing are at home.

#[cfg(feature = "dev-tools")]
mod autobahn;
mod bridge;
mod decode;
#[cfg(feature = "dev-tools")]
mod demo;
mod record;
mod replay;
mod run;
mod signals;
#[cfg(feature = "dev-tools")]
mod sim;
mod tail;
mod xdp;
#[cfg(feature = "dev-tools")]
use tickwire_bench as bench;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tickwire::config::{self, FileKind};
#[cfg(feature = "dev-tools")]
use tickwire::net::{BackendChoice, WaitMode};

/// tickwire: a low-latency market-data feed appliance.
///
/// It holds venue connections on a pinned network thread, decodes their feeds on pinned decoder
/// threads and hands normalized events to a strategy thread. Start with `tickwire check-config
/// config/tickwire.toml`, then `tickwire run --config config/tickwire.toml`.
#[derive(Parser, Debug)]
#[command(name = "tickwire", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the appliance: start the hot threads the config plans and report until SIGINT or
    /// SIGTERM.
    ///
    /// Exit status: 0 after a clean stop, 1 when the config is invalid or a thread cannot be
    /// set up as configured (for example SCHED_FIFO without CAP_SYS_NICE).
    Run {
        /// The appliance file (its `venues` list names the venue files).
        #[arg(
            long,
            short,
            value_name = "FILE",
            default_value = "config/tickwire.toml"
        )]
        config: PathBuf,
        /// Log level (trace, debug, info, warn, error); overrides `[log] level`. RUST_LOG, when
        /// set, overrides both.
        #[arg(long, value_name = "LEVEL")]
        log_level: Option<String>,
        /// Also print every normalized event as a JSON line on stdout, in the format of
        /// `tickwire decode` (logs go to stderr), so a venue can be piped.
        #[arg(long)]
        print_events: bool,
    },
    #[cfg(feature = "dev-tools")]
    /// The simulator and the appliance in one process on loopback, with a live view: the first
    /// thing to run. No network and no files needed.
    ///
    /// Shows every second each symbol's best bid and ask, spread and mid, the message rate, the
    /// latency from the simulator's send to the strategy, and drops, gaps and reconnects; ends
    /// with a summary after --duration or on Ctrl-C. Exit status 0, or 1 when no message reached
    /// the appliance.
    Demo {
        /// Seconds to run.
        #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
        duration: f64,
        /// Synthetic market: number of symbols.
        #[arg(long, default_value_t = 4)]
        symbols: usize,
        /// Synthetic market: messages per second over all symbols.
        #[arg(long, default_value_t = 2000.0)]
        rate: f64,
        /// Replay this capture instead (plain or gzip, `<recv ns> <json>` per line).
        #[arg(long, value_name = "FILE")]
        source: Option<PathBuf>,
        /// Replay pace factor (1 = as recorded).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Where the status page and the API listen (loopback; port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        http: std::net::SocketAddr,
    },
    #[cfg(feature = "dev-tools")]
    /// Run the venue simulator: a Binance USDⓈ-M Futures compatible server (WebSocket streams
    /// and REST depth snapshots over TLS) on loopback, replaying a capture or a synthetic
    /// market, with fault injection; `--venue thalex` for Thalex's JSON-RPC API, `--venue
    /// databento` for a mock Databento Live Subscription Gateway, `--venue bybit` for Bybit v5's
    /// public WebSocket (spot and linear), `--venue okx` for OKX v5's WebSocket.
    Sim(Box<sim::SimArgs>),
    /// Decode a capture file with the appliance's decoder and print every normalized event as a
    /// JSON line on stdout, with a summary on stderr.
    ///
    /// For binance-futures, binance-spot, thalex, bybit and okx, FILE is plain or gzip; each line is one raw venue message,
    /// optionally prefixed by its receive time in ns and a space. For databento, FILE is DBN
    /// (`.dbn`, zstd `.dbn.zst`, legacy `.dbz`) or a record-only fragment (`.frag`,
    /// `.frag.zst`, which needs --dbn-version). Exit status: 0 when the file was read (malformed
    /// lines and records the book refuses are counted and skipped), 1 when it cannot be read or
    /// is truncated or malformed.
    Decode {
        /// The venue whose messages the file holds: binance-futures, binance-spot, thalex,
        /// databento, bybit-spot, bybit-linear or okx.
        #[arg(long, value_name = "VENUE")]
        venue: String,
        /// databento: the file is a fragment (records with no metadata header) in this DBN
        /// version (1, 2 or 3).
        #[arg(long, value_name = "N")]
        dbn_version: Option<u8>,
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Print the events of a running appliance's bus as JSON lines (the `decode` format), or
    /// with --stats one line per second of rates, lag and overruns.
    ///
    /// Overruns (`{"type":"overrun","missed":N,"partition":K}`: K the bus partition, one per
    /// decoder, that lapped the reader), new epochs (`{"type":"epoch",...}`: the
    /// appliance restarted), a closed or removed bus are lines of their own. Exit status: 0 on
    /// SIGINT/SIGTERM or when stdout closes, 1 when there is no bus (see --wait).
    Tail(tail::TailArgs),
    /// Bus consumers that carry the events elsewhere: `bridge nats` publishes them on NATS for
    /// consumers on other hosts (`tail --nats`, `tickwire_nats::NatsClient`, the Python
    /// package).
    #[command(subcommand)]
    Bridge(bridge::BridgeCommand),
    /// Attach the AF_XDP receive path to an interface and count the datagrams of the given feeds
    /// that reach it (native or generic mode, zero-copy, queues are said first). Needs
    /// CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW. The program detaches when the command ends,
    /// however it ends. Exit status: 0, or 1 when the path cannot be set up.
    XdpRecv(xdp::XdpRecvArgs),
    /// Check appliance and venue files, printing every error with file, line, column and key.
    ///
    /// Each FILE may be an appliance file (it has a `[threads]` table; its venue files are
    /// checked too) or a venue file (it has a top-level `kind`). Exit status: 0 when all are
    /// valid, 1 otherwise.
    CheckConfig {
        /// Files to check.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print only the cores the (single, appliance) file pins its threads to, comma
        /// separated (an empty line when none), for the tuning scripts.
        #[arg(long)]
        pinned_cores: bool,
    },
    /// Record, in one of two modes: `--events` records the appliance's normalized events from
    /// its bus to DBN files (what `tickwire replay` and Databento's own tools read);
    /// `--venue` records one venue's raw messages with their receive times to a gzip capture
    /// (what `tickwire sim` replays).
    ///
    /// Events mode: a bus consumer in a process of its own, the same recorder as `[record]`
    /// runs in the appliance: one set of `.dbn.zst` files per venue in `--out DIR`, rotated at
    /// UTC midnight (and by size with `[record] max_file_mib`), flushed every second (`[record]
    /// flush_interval_ms`). A restart starts new files; an overrun is written as a gap.
    ///
    /// Raw mode: `<receive ns> <message>` per line, gzip.
    ///
    /// Exit status: 0 when the duration ends or on SIGINT/SIGTERM (the files are complete
    /// either way), 1 when the venue or the bus cannot be reached (raw mode: when the venue
    /// closes the stream), 2 for bad arguments or config.
    Record {
        /// Raw mode: the venue file to connect with.
        #[arg(
            long,
            value_name = "FILE.toml",
            required_unless_present = "events",
            conflicts_with = "events"
        )]
        venue: Option<PathBuf>,
        /// Events mode: record the bus's normalized events to DBN files.
        #[arg(long)]
        events: bool,
        /// Events mode: the appliance's config file, for its bus (`[bus]`), its `[record]`
        /// settings and its venues' datasets.
        #[arg(
            long,
            value_name = "FILE",
            requires = "events",
            required_unless_present_any = ["venue", "bus"]
        )]
        config: Option<PathBuf>,
        /// Events mode: the bus file, instead of the one `--config` names.
        #[arg(
            long,
            value_name = "PATH",
            requires = "events",
            conflicts_with = "config"
        )]
        bus: Option<PathBuf>,
        /// Raw mode: the capture file to write (gzip). Events mode: the directory for the DBN
        /// files (made if missing).
        #[arg(long, value_name = "FILE.gz|DIR")]
        out: PathBuf,
        /// Stop after this many seconds (default: until SIGINT or SIGTERM).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
    },
    /// Replay DBN recordings (`tickwire record --events`, `[record]`) through a strategy, and
    /// optionally onto a bus, in receive-time order across files and venues.
    ///
    /// The strategy gets the recorded events through the same `Strategy` API as on the
    /// appliance's strategy thread (batches of at most 64, after the market state has taken
    /// them in; `now_ns` is the batch's last recorded receive time).
    ///
    /// Exit status: 0 when every file was read to its end, 1 when a file is damaged (its
    /// events up to the damage are replayed, then an error names the file and byte offset),
    /// 2 for bad arguments.
    Replay(replay::ReplayArgs),
    #[cfg(feature = "dev-tools")]
    /// Benchmarks with their peers in one run.
    #[command(subcommand)]
    Bench(BenchCommand),
    #[cfg(feature = "dev-tools")]
    /// Run the Autobahn|Testsuite WebSocket client cases over tickwire's own network stack.
    ///
    /// Connects to a running fuzzing server (`wstest -m fuzzingserver`), echoes every message of
    /// every case back, then asks the server to write its reports. Normally started by
    /// `../shared/tools/autobahn/run-client-suite.sh -- tickwire autobahn`, which starts the
    /// server and prints the verdicts.
    Autobahn {
        /// The fuzzing server (default: $AUTOBAHN_URL, else ws://127.0.0.1:9001).
        #[arg(long, env = "AUTOBAHN_URL", default_value = "ws://127.0.0.1:9001")]
        url: String,
        /// The agent name the reports are filed under.
        #[arg(long, default_value = "tickwire")]
        agent: String,
        /// Network backend: auto, io-uring or epoll.
        #[arg(long, default_value = "auto", value_parser = ["auto", "io-uring", "epoll"])]
        backend: String,
        /// Wait mode of the network loop: busy-poll or block.
        #[arg(long, default_value = "block", value_parser = ["busy-poll", "block"])]
        wait: String,
    },
    /// A development tool this build leaves out (`demo`, `sim`, `bench`, `autobahn`: built
    /// without the `dev-tools` feature, as `scripts/install.sh` builds the installed binary).
    #[cfg(not(feature = "dev-tools"))]
    #[command(external_subcommand)]
    Other(Vec<String>),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            config,
            log_level,
            print_events,
        } => run::run(&config, log_level.as_deref(), print_events),
        Command::Decode {
            venue,
            dbn_version,
            file,
        } => decode::decode(&venue, &file, dbn_version),
        Command::Tail(args) => tail::tail(args),
        Command::XdpRecv(args) => xdp::xdp_recv(args),
        Command::Bridge(command) => bridge::bridge(command),
        #[cfg(feature = "dev-tools")]
        Command::Bench(BenchCommand::E2e {
            rate,
            duration,
            json,
            out,
            quick,
            symbols,
            clients,
            sim_core,
            client_core,
            no_search,
            housekeeping_core,
            repeat,
        }) => {
            let (rates, duration) = if quick {
                (
                    vec![rate.first().copied().unwrap_or(10_000.0)],
                    duration.unwrap_or(3.0),
                )
            } else if rate.is_empty() {
                (vec![1_000.0, 10_000.0, 100_000.0], duration.unwrap_or(10.0))
            } else {
                (rate, duration.unwrap_or(10.0))
            };
            let valid_rates = rates.iter().all(|r| *r > 0.0 && r.is_finite());
            let Ok(duration) = std::time::Duration::try_from_secs_f64(duration) else {
                eprintln!("--duration must be a non-negative number of seconds");
                return ExitCode::from(2);
            };
            if !valid_rates || symbols == 0 || duration.is_zero() || repeat == 0 {
                eprintln!(
                    "--rate must be positive, --symbols and --repeat at least 1, --duration above 0"
                );
                return ExitCode::from(2);
            }
            bench::e2e(bench::E2eArgs {
                rates,
                duration,
                json,
                out,
                quick,
                symbols,
                clients,
                sim_core,
                client_core,
                search: !no_search,
                housekeeping_core,
                repeat,
            })
        }
        #[cfg(feature = "dev-tools")]
        Command::Sim(args) => sim::sim(*args),
        #[cfg(feature = "dev-tools")]
        Command::Demo {
            duration,
            symbols,
            rate,
            source,
            speed,
            http,
        } => {
            if !http.ip().is_loopback() {
                eprintln!("--http must be a loopback address: the demo serves without a token");
                return ExitCode::from(2);
            }
            let Ok(duration) = std::time::Duration::try_from_secs_f64(duration) else {
                eprintln!("--duration must be a non-negative number of seconds");
                return ExitCode::from(2);
            };
            if !(speed > 0.0 && speed.is_finite() && rate > 0.0 && rate.is_finite()) || symbols == 0
            {
                eprintln!("--speed and --rate must be positive numbers, --symbols at least 1");
                return ExitCode::from(2);
            }
            demo::demo(demo::DemoArgs {
                duration,
                symbols,
                rate,
                source,
                speed,
                http,
            })
        }
        Command::Record {
            venue,
            events,
            config,
            bus,
            out,
            duration,
        } => {
            let duration = match duration.map(std::time::Duration::try_from_secs_f64) {
                Some(Err(_)) => {
                    eprintln!("--duration must be a non-negative number of seconds");
                    return ExitCode::from(2);
                }
                Some(Ok(duration)) => Some(duration),
                None => None,
            };
            match (events, venue) {
                (true, _) => {
                    record::record_events(config.as_deref(), bus.as_deref(), &out, duration)
                }
                (false, Some(venue)) => record::record(&venue, &out, duration),
                (false, None) => {
                    eprintln!("tickwire record: --events or --venue FILE says what to record");
                    ExitCode::from(2)
                }
            }
        }
        Command::Replay(args) => replay::replay(args),
        #[cfg(feature = "dev-tools")]
        Command::Autobahn {
            url,
            agent,
            backend,
            wait,
        } => {
            let backend = match backend.as_str() {
                "io-uring" => BackendChoice::IoUring,
                "epoll" => BackendChoice::Epoll,
                _ => BackendChoice::Auto,
            };
            let wait = match wait.as_str() {
                "busy-poll" => WaitMode::BusyPoll,
                _ => WaitMode::Block {
                    timeout: std::time::Duration::from_millis(1),
                },
            };
            autobahn::autobahn(&url, &agent, backend, wait)
        }
        #[cfg(not(feature = "dev-tools"))]
        Command::Other(words) => not_in_this_build(&words),
        Command::CheckConfig {
            files,
            pinned_cores,
        } => {
            if pinned_cores {
                print_pinned_cores(&files)
            } else {
                check_config(&files)
            }
        }
    }
}

/// What the installed binary says when asked for a development tool it does not carry.
#[cfg(not(feature = "dev-tools"))]
fn not_in_this_build(words: &[String]) -> ExitCode {
    let name = words.first().map(String::as_str).unwrap_or_default();
    if DEV_TOOLS.contains(&name) {
        eprintln!(
            "error: `tickwire {name}` is a development tool and this binary was built without it \
             (the `dev-tools` feature; scripts/install.sh installs the appliance alone).\n\
             Run it from a source clone: cargo run --release -- {name}"
        );
    } else {
        eprintln!("error: unrecognized subcommand '{name}'\n\nFor more information, try '--help'.");
    }
    ExitCode::from(2)
}

/// The subcommands the `dev-tools` feature adds.
#[cfg(not(feature = "dev-tools"))]
const DEV_TOOLS: [&str; 4] = ["demo", "sim", "bench", "autobahn"];

fn check_config(files: &[PathBuf]) -> ExitCode {
    let mut failed = false;
    for file in files {
        match config::check_file(file) {
            Ok(kind) => {
                let what = match kind {
                    FileKind::Appliance => "appliance config",
                    FileKind::Venue => "venue config",
                };
                println!("{}: ok ({what})", file.display());
                if kind == FileKind::Appliance {
                    print_decoders(file);
                }
            }
            Err(errors) => {
                failed = true;
                eprintln!("{errors}");
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// With several decoders, which decoder each venue gets (the same assignment `run` logs).
fn print_decoders(file: &std::path::Path) {
    let Ok(loaded) = config::load(file) else {
        return;
    };
    if loaded.appliance.threads.decoder_count() < 2 {
        return;
    }
    for (loaded_venue, decoder) in loaded.venues.iter().zip(loaded.venue_decoders()) {
        let how = if loaded_venue.venue.decoder.is_some() {
            "named in its file"
        } else {
            "by default"
        };
        println!(
            "  venue {}: decoder {decoder} ({how})",
            loaded_venue.venue.name
        );
    }
}

fn print_pinned_cores(files: &[PathBuf]) -> ExitCode {
    let [file] = files else {
        eprintln!("--pinned-cores takes exactly one appliance file");
        return ExitCode::from(2);
    };
    match config::load(file) {
        Ok(loaded) => {
            let cores: Vec<String> = loaded
                .appliance
                .pinned_cores()
                .iter()
                .map(usize::to_string)
                .collect();
            println!("{}", cores.join(","));
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{errors}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "dev-tools")]
#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// End to end: the simulator on one core, each client on the other, computing the mid price
    /// of every bookTicker: tickwire (io_uring spinning, io_uring blocking, epoll), a
    /// tokio-tungstenite peer, a Node.js `ws` peer and the tcp-floor. Prints a table with ratios
    /// to tickwire-uring-spin and writes JSON, a Markdown report and latency plots (SVG).
    ///
    /// Builds the Rust peers with cargo and installs the Node.js one with npm on first use; a
    /// client that cannot be prepared is skipped with the reason.
    E2e {
        /// Messages per second (repeat for several); default 1000, 10000 and 100000.
        #[arg(long)]
        rate: Vec<f64>,
        /// Seconds per run (default 10; 3 with --quick).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
        /// Where to write the JSON results (default OUT/e2e.json).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Directory for the JSON, the Markdown report and the plots.
        #[arg(long, value_name = "DIR", default_value = "target/bench-e2e")]
        out: PathBuf,
        /// One rate (the first --rate, else 10000) for 3 s, no search for the highest lossless rate.
        #[arg(long)]
        quick: bool,
        /// Symbols in the synthetic market.
        #[arg(long, default_value_t = 10)]
        symbols: usize,
        /// Only these clients (comma-separated). `tcp-floor-again`, run only when named, is the
        /// tcp-floor once more as a control: its ratios to the tcp-floor of the same run show
        /// how far two runs of the same client differ on this host.
        #[arg(long, value_delimiter = ',')]
        clients: Option<Vec<String>>,
        /// The simulator's core.
        #[arg(long, default_value_t = 0)]
        sim_core: usize,
        /// The clients' core.
        #[arg(long, default_value_t = 1)]
        client_core: usize,
        /// Skip the search for each client's highest lossless rate.
        #[arg(long)]
        no_search: bool,
        /// A core for a tickwire client's threads other than its hot one (the tuned layout:
        /// `[process] housekeeping_cores`, the hot thread pinned to --client-core). For every
        /// client alike, the kernel threads and device interrupts that may move are kept off
        /// --client-core for the runs (as isolcpus and tuning/irq-affinity keep them on a tuned
        /// host; root) and put back after.
        #[arg(long, value_name = "CORE")]
        housekeeping_core: Option<usize>,
        /// Run every client at every rate this many times, alternating their order, and print
        /// each run's p50/p99/p99.9, ratios to tcp-floor and hot-thread context switches.
        #[arg(long, default_value_t = 1, value_name = "N")]
        repeat: usize,
    },
}
