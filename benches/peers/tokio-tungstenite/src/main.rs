//! `tw-peer-tokio`: the program a typical Rust user writes to follow Binance bookTicker streams,
//! measured beside tickwire by `tickwire bench e2e`.
//!
//! tokio + tokio-tungstenite (rustls) + serde_json, with nothing tuned: one WebSocket connection to
//! a combined-stream URL, each text frame deserialized into a small `#[derive(Deserialize)]`
//! struct, the best bid and ask parsed as `f64`, their mid computed, and one record kept per
//! bookTicker: the update id `u` and the CLOCK_REALTIME time the mid was computed. Records stay in
//! memory (preallocated for `--count`) and are written at exit, so file I/O stays out of the
//! measurement. The record format is described in `benches/peers/README.md`.


use anyhow::Context as _;
use futures_util::StreamExt as _;
use serde::Deserialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_tungstenite::tungstenite::{self, Message};

const USAGE: &str = "usage: tw-peer-tokio --url WSS_URL --ca CA_PEM --out FILE \
[--count N] [--duration-secs S] [--core N]";

/// Records reserved up front when `--count` is not given (16 MiB of address space; pages are
/// touched only as records arrive).
const DEFAULT_RECORD_CAPACITY: usize = 1 << 20;

/// The combined-stream wrapper, `{"stream":"btcusdt@bookTicker","data":{...}}`.
#[derive(Deserialize)]
struct CombinedMessage<'a> {
    #[serde(borrow)]
    data: BookTicker<'a>,
}

/// The fields of a USD-M Futures bookTicker event that the mid needs (Binance "Individual Symbol
/// Book Ticker Streams"); prices arrive as decimal strings.
#[derive(Deserialize)]
struct BookTicker<'a> {
    #[serde(rename = "e")]
    event_type: &'a str,
    #[serde(rename = "u")]
    update_id: u64,
    #[serde(rename = "b")]
    best_bid: &'a str,
    #[serde(rename = "a")]
    best_ask: &'a str,
}

/// One output record: the update id and when its mid was computed.
struct Record {
    update_id: u64,
    done_ns: u64,
}

struct Args {
    url: String,
    ca: PathBuf,
    out: PathBuf,
    count: Option<u64>,
    duration: Option<Duration>,
    core: Option<usize>,
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("tw-peer-tokio: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut records = Vec::new();
    let mut outcome = run(&args, &mut records);
    // The records are written and the line printed whatever ended the run: a failed run still
    // shows how far it got, and the harness reads the same things from every peer.
    let written = write_records(&args.out, &records);
    println!("received={}", records.len());
    if outcome.is_ok() {
        outcome = written;
    } else if let Err(error) = written {
        eprintln!("tw-peer-tokio: {error:#}");
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tw-peer-tokio: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args, records: &mut Vec<Record>) -> anyhow::Result<()> {
    if let Some(core) = args.core {
        pin_to_core(core).with_context(|| format!("pinning to core {core}"))?;
    }
    let tls = client_config(&args.ca)?;
    let capacity = args.count.map_or(DEFAULT_RECORD_CAPACITY, |count| {
        usize::try_from(count).unwrap_or(usize::MAX)
    });
    records.reserve_exact(capacity);
    // current_thread: the peer follows one connection with one task, so a multi-thread runtime
    // would add only work-stealing wake-ups and worker threads that compete with the simulator
    // for this machine's cores. A user who thought about it writes the same, often as
    // `#[tokio::main(flavor = "current_thread")]`.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(follow(args, tls, records))
}

/// Trusts the CA in `ca_path` and nothing else: the simulator's throwaway CA.
fn client_config(ca_path: &std::path::Path) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    let certificates = rustls_pki_types::CertificateDer::pem_file_iter(ca_path)
        .with_context(|| format!("{}", ca_path.display()))?;
    for certificate in certificates {
        let certificate = certificate.with_context(|| format!("{}", ca_path.display()))?;
        roots
            .add(certificate)
            .with_context(|| format!("{}: adding the CA", ca_path.display()))?;
    }
    if roots.is_empty() {
        anyhow::bail!("{}: no certificate in the file", ca_path.display());
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Connects and records until `--count`, `--duration-secs` or the server's close.
async fn follow(
    args: &Args,
    tls: Arc<rustls::ClientConfig>,
    records: &mut Vec<Record>,
) -> anyhow::Result<()> {
    let connector = tokio_tungstenite::Connector::Rustls(tls);
    let (mut socket, _response) =
        tokio_tungstenite::connect_async_tls_with_config(&args.url, None, false, Some(connector))
            .await
            // tungstenite's errors repeat their source in their own text, so the chain is cut.
            .map_err(|error| anyhow::anyhow!("connecting to {}: {error}", args.url))?;
    // Counted out here, so the number survives when `--duration-secs` drops `receiving`.
    let mut skipped = 0u64;
    let receiving = receive(&mut socket, args.count, records, &mut skipped);
    let outcome = match args.duration {
        Some(duration) => tokio::time::timeout(duration, receiving)
            .await
            .unwrap_or(Ok(())),
        None => receiving.await,
    };
    // A polite close; the server may already be gone, and that is no failure of the run.
    let _ = socket.close(None).await;
    if skipped > 0 {
        eprintln!("tw-peer-tokio: skipped {skipped} frames that were not bookTicker messages");
    }
    outcome
}

async fn receive<S>(
    socket: &mut tokio_tungstenite::WebSocketStream<S>,
    count: Option<u64>,
    records: &mut Vec<Record>,
    skipped: &mut u64,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let limit = count.unwrap_or(u64::MAX);
    let mut mid_checksum = 0.0f64;
    while (records.len() as u64) < limit {
        let message = match socket.next().await {
            // tungstenite answers pings itself; pongs and binary frames carry no ticker.
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(_))) | None => break,
            Some(Ok(_)) => continue,
            Some(Err(
                tungstenite::Error::ConnectionClosed
                | tungstenite::Error::AlreadyClosed
                | tungstenite::Error::Protocol(
                    tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
                ),
            )) => break,
            Some(Err(error)) => anyhow::bail!("receiving: {error}"),
        };
        let Ok(CombinedMessage { data: ticker }) =
            serde_json::from_str::<CombinedMessage<'_>>(message.as_str())
        else {
            *skipped += 1;
            continue;
        };
        if ticker.event_type != "bookTicker" {
            *skipped += 1;
            continue;
        }
        let (Ok(best_bid), Ok(best_ask)) = (
            ticker.best_bid.parse::<f64>(),
            ticker.best_ask.parse::<f64>(),
        ) else {
            *skipped += 1;
            continue;
        };
        let mid = black_box((best_bid + best_ask) / 2.0);
        records.push(Record {
            update_id: ticker.update_id,
            done_ns: realtime_ns(),
        });
        mid_checksum += mid;
    }
    black_box(mid_checksum);
    Ok(())
}

/// CLOCK_REALTIME in ns since the Unix epoch (`SystemTime` reads it through the vDSO).
fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since_epoch| since_epoch.as_nanos() as u64)
}

/// 16 bytes per record: `u` then `done_ns`, both u64 little-endian.
fn write_records(path: &std::path::Path, records: &[Record]) -> anyhow::Result<()> {
    let mut bytes = Vec::with_capacity(records.len() * 16);
    for record in records {
        bytes.extend_from_slice(&record.update_id.to_le_bytes());
        bytes.extend_from_slice(&record.done_ns.to_le_bytes());
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn pin_to_core(core: usize) -> std::io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "core number past CPU_SETSIZE",
        ));
    }
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is the empty set.
    let mut cpus: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core < CPU_SETSIZE` (checked above), so the bit set lies inside `cpus`.
    unsafe { libc::CPU_SET(core, &mut cpus) };
    // SAFETY: `cpus` is an initialised `cpu_set_t` and the size passed is its own; pid 0 is the
    // calling thread, which is the only one so far, and threads started later inherit its mask.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpus) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn parse_args(mut words: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut url, mut ca, mut out) = (None, None, None);
    let (mut count, mut duration, mut core) = (None, None, None);
    while let Some(word) = words.next() {
        let (flag, inline_value) = match word.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (word, None),
        };
        let mut value = || {
            inline_value
                .clone()
                .or_else(|| words.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--url" => url = Some(value()?),
            "--ca" => ca = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--count" => count = Some(number::<u64>(&flag, &value()?)?),
            "--duration-secs" => {
                let seconds = number::<f64>(&flag, &value()?)?;
                duration = Some(
                    Duration::try_from_secs_f64(seconds)
                        .map_err(|_| format!("{flag}: not a non-negative number of seconds"))?,
                );
            }
            "--core" => core = Some(number::<usize>(&flag, &value()?)?),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(Args {
        url: url.ok_or("--url is required")?,
        ca: ca.ok_or("--ca is required")?,
        out: out.ok_or("--out is required")?,
        count,
        duration,
        core,
    })
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag}: {text:?} is not a valid number"))
}
