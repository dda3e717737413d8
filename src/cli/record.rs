//! `tickwire record`, two modes.
//!
//! `--events` ([`record_events`]): the bus's normalized events to DBN files, through
//! `tickwire_record` (the same recorder the appliance runs for `[record]`).
//!
//! `--venue` ([`record`]): capture a venue's raw messages with their receive times, in the line format
//! the simulator replays (`<receive time, ns since the Unix epoch> <message>\n`, gzip), the format
//! of the hftbacktest captures in `../shared/data/binance-futures/`. A WebSocket binary message
//! (Binance Spot's SBE events) is kept as `<receive time> base64:<the message in standard
//! base64>`: no JSON message starts with `base64:`, so `tickwire decode` tells the two apart.
//!
//! Every venue records: the connections are the venue protocol's (`venue::record_connections`):
//! Binance's name every stream in their URL; Thalex's and Databento's are the appliance's own,
//! each sent the venue's login (a Thalex key, when the file has one) and its subscription
//! requests once open, whose answers are recorded with the data. A raw byte stream (Databento's
//! gateway, after the authentication the connection's preamble did) is cut into its DBN units,
//! the metadata header first and then one record a line, each as `base64:` at the receive time
//! of the read that completed it: the bytes of a line are the bytes the gateway sent.
//!
//! One thread does everything here: it drives a `NetEngine` in blocking mode and writes each
//! message as it drains the frame ring. Recording is not latency work; what matters is that every
//! message is kept, so a message the ring had to drop is counted and reported, never hidden.

use super::signals::StopSignals;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config::{self, NetConfig};
use tickwire::net::engine::{split_frame, split_tag, FrameKind, NetEngine, StreamEvent};
use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
use tickwire::ring::frame_ring;
use tickwire::venue;

/// Enough for seconds of a busy venue while the writer compresses.
const RING_BYTES: usize = 64 << 20;

/// What a line's message starts with when it is a binary WebSocket message, in base64 (what
/// the capture decoders read back: `venue::capture::BINARY_PREFIX`).
pub const BINARY_PREFIX: &str = tickwire::venue::capture::BINARY_PREFIX;

/// `tickwire record --events`: a bus consumer writing DBN files into `out` until the duration
/// ends or a stop signal comes.
pub fn record_events(
    config: Option<&Path>,
    bus: Option<&Path>,
    out: &Path,
    duration: Option<Duration>,
) -> ExitCode {
    let (bus_path, recorder_config) = match (bus, config) {
        (Some(bus), _) => (bus.to_path_buf(), tickwire_record::RecorderConfig::new(out)),
        (None, Some(config_path)) => match config::load(config_path) {
            Ok(loaded) => {
                let Some(bus) = &loaded.appliance.bus else {
                    eprintln!(
                        "tickwire record: {} has no [bus] table: that appliance publishes no \
                         events to record (add [bus] to it, or name a bus with --bus PATH)",
                        config_path.display()
                    );
                    return ExitCode::from(2);
                };
                let record = loaded.appliance.record.clone().unwrap_or_default();
                let datasets = tickwire::control::record::datasets(&loaded);
                (
                    bus.resolved_path(),
                    tickwire::control::record::recorder_config(&record, out, datasets),
                )
            }
            Err(errors) => {
                eprintln!("tickwire record: {errors}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("tickwire record --events: --config FILE or --bus PATH names the bus");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = std::fs::create_dir_all(out) {
        eprintln!("tickwire record: cannot make {}: {error}", out.display());
        return ExitCode::FAILURE;
    }
    let Some(stop) = super::signals::stop_flag("record") else {
        return ExitCode::FAILURE;
    };
    let until = duration.map(|duration| Instant::now() + duration);
    // The bus may not exist yet (the recorder started first): wait for it as long as the
    // recording would last, or a minute.
    let attach_wait = duration.unwrap_or(Duration::from_secs(60));
    let mut client = match tickwire_client::Client::options()
        .start(tickwire_client::Start::Oldest)
        .batch(4096)
        .attach_wait(&bus_path, attach_wait)
    {
        Ok(client) => client,
        Err(error) => {
            eprintln!("tickwire record: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "record: recording {} to {}",
        bus_path.display(),
        out.display()
    );
    let recorder =
        tickwire_record::Recorder::new(recorder_config, tickwire_record::SystemClock::default());
    let outcome = tickwire_record::record_bus(&mut client, recorder, &stop, until, None);
    let stats = outcome.stats;
    eprintln!(
        "record: {} events in {} files ({} bytes, {:.1} bytes/event), {} overruns ({} events \
         missed), {} lost to write errors ({} errors), {} in the private encoding, {} bus errors",
        stats.events,
        stats.files_opened,
        stats.bytes,
        stats.bytes as f64 / stats.events.max(1) as f64,
        stats.overruns,
        stats.missed,
        stats.lost,
        stats.write_errors,
        stats.fell_back,
        outcome.read_errors
    );
    ExitCode::SUCCESS
}

/// `tickwire record --venue`: one venue's raw messages.
pub fn record(venue_file: &Path, out: &Path, duration: Option<Duration>) -> ExitCode {
    match run(venue_file, out, duration) {
        Ok(summary) => {
            eprintln!("{summary}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("record: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// What a recording kept and lost.
#[derive(Default)]
struct Tally {
    messages: u64,
    bytes: u64,
    /// Messages the network thread could not hand over (frame ring full).
    dropped: u64,
    /// Raw byte-stream bytes that are no DBN unit (a stream that is not DBN): not recorded.
    not_dbn: u64,
}

/// The DBN metadata header's fixed start: `DBN`, the version, the length of the rest (u32 LE).
const DBN_PRELUDE: usize = 8;

/// Cuts a raw DBN byte stream into its units: the metadata header, then one record each (a
/// record's first byte is its length in 4-byte words). The bytes are kept as they came.
#[derive(Default)]
struct DbnUnits {
    pending: Vec<u8>,
    metadata_done: bool,
    /// The stream is not DBN: everything after it is counted, not recorded.
    broken: bool,
}

impl DbnUnits {
    /// Takes `chunk` and hands each whole unit it completes to `unit`; returns the bytes it
    /// could not place (a stream that is not DBN).
    fn push(&mut self, chunk: &[u8], mut unit: impl FnMut(&[u8])) -> u64 {
        if self.broken {
            return chunk.len() as u64;
        }
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            let length = if self.metadata_done {
                match rest.first() {
                    Some(0) => {
                        // A record can not be 0 words long: not DBN.
                        self.broken = true;
                        let lost = rest.len() as u64;
                        self.pending.clear();
                        return lost;
                    }
                    Some(&words) => usize::from(words) * 4,
                    None => break,
                }
            } else {
                if rest.len() < DBN_PRELUDE {
                    break;
                }
                if &rest[..3] != b"DBN" {
                    self.broken = true;
                    let lost = rest.len() as u64;
                    self.pending.clear();
                    return lost;
                }
                let body = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
                DBN_PRELUDE + body as usize
            };
            if rest.len() < length {
                break;
            }
            unit(&rest[..length]);
            self.metadata_done = true;
            start += length;
        }
        self.pending.drain(..start);
        0
    }
}

fn run(venue_file: &Path, out: &Path, duration: Option<Duration>) -> anyhow::Result<String> {
    let venue = config::load_venue(venue_file).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    let net = NetConfig::default();
    // One connection, one per entry point (Binance USD-M's /public and /market), or one per
    // shard with its requests (Thalex, Databento).
    let connections = venue::record_connections(&venue, &net)?;
    let conns = u32::try_from(connections.len()).unwrap_or(u32::MAX);
    let signals = StopSignals::block()?;
    let file = File::create(out)
        .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", out.display()))?;
    let mut writer = GzEncoder::new(BufWriter::new(file), Compression::default());
    let clock = Clock::calibrate();
    let transport_config = TransportConfig {
        max_connections: conns,
        connect_timeout: Duration::from_millis(net.connect_timeout_ms),
        ..TransportConfig::default()
    };
    let (transport, _why) = Transport::open(BackendChoice::Auto, transport_config, clock)?;
    let (producer, mut frames) = frame_ring(RING_BYTES);
    let wait = WaitMode::Block {
        timeout: Duration::from_millis(50),
    };
    let mut engine = NetEngine::new(transport, producer, wait, conns);
    let mut requests = Vec::with_capacity(connections.len());
    for (conn, connection) in (0..).zip(connections) {
        let spec = connection.spec;
        let path = spec
            .websocket
            .as_ref()
            .map_or("", |target| target.path.as_str());
        let path = path.split('?').next().unwrap_or_default();
        let scheme = venue.url.scheme;
        eprintln!("record: connecting to {scheme}://{}{path}", spec.addr);
        engine.open(conn, spec)?;
        requests.push(connection.requests);
    }
    let mut units: Vec<DbnUnits> = (0..conns).map(|_| DbnUnits::default()).collect();
    // The venue's own heartbeat at its interval (Thalex asks clients to ping, Bybit to send its
    // `ping` op).
    let ping_every = venue.lifecycle.ping_interval().map(Duration::from_millis);
    let mut last_ping = Instant::now();
    let mut open = 0;

    let terminal = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut last_progress = Instant::now();
    let mut last_messages = 0;
    let mut ended: Option<String> = None;
    let mut line = Vec::with_capacity(64 << 10);
    let stop = loop {
        if let Some(signal) = signals.wait(Duration::ZERO)? {
            break format!("signal {signal}");
        }
        if duration.is_some_and(|limit| started.elapsed() >= limit) {
            break "duration reached".to_owned();
        }
        if let Some(reason) = ended.take() {
            break reason;
        }
        let mut events = Vec::new();
        engine.poll(&mut |conn, event| events.push((conn, event)))?;
        let mut write_error = None;
        let mut write_line = |recv_ts_ns: u64, text: Option<&[u8]>, binary: Option<&[u8]>| {
            line.clear();
            line.extend_from_slice(recv_ts_ns.to_string().as_bytes());
            line.push(b' ');
            if let Some(text) = text {
                line.extend_from_slice(text);
            }
            if let Some(binary) = binary {
                use base64::Engine as _;
                line.extend_from_slice(BINARY_PREFIX.as_bytes());
                let encoded = base64::engine::general_purpose::STANDARD.encode(binary);
                line.extend_from_slice(encoded.as_bytes());
            }
            line.push(b'\n');
            if let Err(error) = writer.write_all(&line) {
                write_error.get_or_insert(error);
            }
        };
        frames.drain(usize::MAX, |tag, frame| {
            let (conn, kind) = split_tag(tag);
            let Some((recv_ts_ns, payload)) = split_frame(frame) else {
                return;
            };
            match kind {
                FrameKind::Text => {
                    write_line(recv_ts_ns, Some(payload), None);
                    tally.messages += 1;
                    tally.bytes += payload.len() as u64;
                }
                FrameKind::Binary => {
                    write_line(recv_ts_ns, None, Some(payload));
                    tally.messages += 1;
                    tally.bytes += payload.len() as u64;
                }
                FrameKind::Bytes => {
                    let Some(stream) = units.get_mut(conn as usize) else {
                        return;
                    };
                    tally.not_dbn += stream.push(payload, |unit| {
                        write_line(recv_ts_ns, None, Some(unit));
                        tally.messages += 1;
                        tally.bytes += unit.len() as u64;
                    });
                }
                // `record` opens no datagram venue (`venue::record_connections` refuses one),
                // and no control thread sends it disconnect notices.
                FrameKind::LineA | FrameKind::LineB | FrameKind::Reply | FrameKind::Disconnect => {}
            }
        });
        if let Some(error) = write_error {
            anyhow::bail!("writing {}: {error}", out.display());
        }
        tally.dropped = (0..conns)
            .filter_map(|conn| engine.stats(conn))
            .map(|stats| stats.dropped)
            .sum();
        for (conn, event) in events {
            match event {
                StreamEvent::Open => {
                    for text in requests.get(conn as usize).into_iter().flatten() {
                        engine.send_text(conn, text)?;
                    }
                    open += 1;
                    if open == conns {
                        eprintln!("record: live; writing {}", out.display());
                    }
                }
                StreamEvent::Closed { close_code, error } => {
                    ended = Some(match error {
                        Some(error) => format!("the stream ended: {error}"),
                        None => format!("the venue closed the stream (code {close_code:?})"),
                    });
                }
                StreamEvent::Connected | StreamEvent::Secured => {}
            }
        }
        if ping_every.is_some_and(|every| last_ping.elapsed() >= every) {
            last_ping = Instant::now();
            // A ping frame, the venue's own ping message, or both (`Protocol::heartbeat`).
            let heartbeat = venue.kind.protocol().heartbeat();
            for conn in 0..conns {
                // A stream not open yet (or a raw one) has nothing to ping.
                if heartbeat.frame() {
                    let _ = engine.ping(conn);
                }
                if let Some(text) = heartbeat.message() {
                    let _ = engine.send_text(conn, text);
                }
            }
        }
        if terminal && last_progress.elapsed() >= Duration::from_secs(1) {
            let rate =
                (tally.messages - last_messages) as f64 / last_progress.elapsed().as_secs_f64();
            eprint!(
                "\rrecord: {} messages, {} bytes, {rate:.0} msg/s, {} dropped   ",
                tally.messages, tally.bytes, tally.dropped
            );
            last_messages = tally.messages;
            last_progress = Instant::now();
        }
    };
    if terminal {
        eprintln!();
    }
    for conn in 0..conns {
        engine.close(conn, 1000);
    }
    writer
        .finish()
        .and_then(|mut inner| inner.flush())
        .map_err(|error| anyhow::anyhow!("finishing {}: {error}", out.display()))?;
    let mut summary = format!(
        "record: stopped ({stop}); {} messages, {} bytes in {:.1} s to {}",
        tally.messages,
        tally.bytes,
        started.elapsed().as_secs_f64(),
        out.display()
    );
    if tally.dropped > 0 {
        summary.push_str(&format!(
            "; {} messages DROPPED (the writer fell behind the frame ring)",
            tally.dropped
        ));
    }
    if tally.not_dbn > 0 {
        summary.push_str(&format!(
            "; {} bytes of the raw stream not recorded (not DBN)",
            tally.not_dbn
        ));
    }
    if stop.starts_with("the ") {
        anyhow::bail!("{summary}");
    }
    Ok(summary)
}
