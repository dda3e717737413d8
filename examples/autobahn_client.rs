//! Runs the Autobahn|Testsuite fuzzing server's client cases against `tickwire::ws`, over a
//! blocking `std::net::TcpStream` (no TLS): `GET /getCaseCount`, then every case with
//! `/runCase?case=N&agent=AGENT` (every text and binary message is echoed back as received,
//! pings are answered, the closing handshake is completed), then `/updateReports?agent=AGENT`.
//!
//! ```sh
//! /work/shared/tools/autobahn/run-client-suite.sh -- \
//!     cargo run --release --example autobahn_client -- --agent tickwire
//! ```
//!
//! This is deliberately thin: the protocol lives in `src/ws/`, and the network engine runs the
//! same cases over its own loops. What is here is only the socket, the receive buffer, and the
//! copy an echo needs (the payload borrows the client, which must then queue the echo).

use anyhow::{bail, Context, Result};
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;
use tickwire::config::Endpoint;
use tickwire::ws::{frame, Client, Config, Event, Handshake, HandshakeStatus, Request, State};

/// The receive buffer. Frames with longer payloads than fit are streamed into the client's
/// message buffer (`max_borrowed_payload_bytes`), which is how a fixed-size io_uring buffer
/// handles Autobahn's 16 MiB messages too.
const RECEIVE_BUFFER_BYTES: usize = 64 << 10;

/// How long to wait for the server to close TCP after the closing handshake (section 7.1.1
/// lets the server close first), and for any read at all before giving up on a case.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

struct Args {
    url: String,
    agent: String,
    verbose: bool,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        url: std::env::var("AUTOBAHN_URL").unwrap_or_else(|_| "ws://127.0.0.1:9001".to_owned()),
        agent: "tickwire".to_owned(),
        verbose: false,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--url" => args.url = words.next().context("--url needs a value")?,
            "--agent" => args.agent = words.next().context("--agent needs a value")?,
            "--verbose" | "-v" => args.verbose = true,
            "--help" | "-h" => {
                println!("usage: autobahn_client [--url ws://127.0.0.1:9001] [--agent tickwire] [--verbose]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let endpoint = Endpoint::parse(&args.url).with_context(|| format!("--url {}", args.url))?;
    if endpoint.scheme.is_tls() {
        bail!("this example speaks plain ws:// only");
    }

    let count_text = run(&endpoint, "/getCaseCount", false, args.verbose)?;
    let case_count: u32 = std::str::from_utf8(&count_text)?
        .trim()
        .parse()
        .context("getCaseCount did not answer with a number")?;
    println!("autobahn: {case_count} cases");

    for case in 1..=case_count {
        let path = format!("/runCase?case={case}&agent={}", args.agent);
        if let Err(error) = run(&endpoint, &path, true, args.verbose) {
            eprintln!("case {case}: {error:#}");
        }
        if case % 50 == 0 {
            println!("autobahn: {case}/{case_count} cases run");
        }
    }

    let path = format!("/updateReports?agent={}", args.agent);
    run(&endpoint, &path, false, args.verbose)?;
    println!("autobahn: reports updated");
    Ok(())
}

/// One WebSocket connection to `path`, until it closes, echoing every message when `echo` is
/// set. Returns the last message received.
fn run(endpoint: &Endpoint, path: &str, echo: bool, verbose: bool) -> Result<Vec<u8>> {
    let mut stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .with_context(|| format!("connect to {endpoint}"))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;

    let mut buffer = vec![0_u8; RECEIVE_BUFFER_BYTES];
    let mut filled = handshake(&mut stream, endpoint, path, &mut buffer)?;

    let config = Config {
        max_borrowed_payload_bytes: RECEIVE_BUFFER_BYTES - frame::MAX_HEADER_BYTES,
        ..Config::default()
    };
    let mut client = Client::new(config)?;
    let mut last_message = Vec::new();
    let mut failure = None;
    loop {
        let mut start = 0;
        loop {
            let read = match client.read(&buffer[start..filled]) {
                Ok(read) => read,
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            };
            start += read.consumed;
            match read.event {
                Event::Message { kind, payload } => {
                    // The payload borrows the client (or the buffer it reads), so it is copied
                    // before the echo is queued.
                    last_message.clear();
                    last_message.extend_from_slice(payload);
                    if echo {
                        // Refused only while we close, when no echo is due.
                        let _ = client.send(kind, &last_message);
                    }
                }
                Event::NeedMore | Event::Closed => break,
                Event::Close { code, reason } if verbose => {
                    eprintln!("{path}: server closed with {code:?} {reason:?}");
                }
                _ => {}
            }
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;

        let pending = client.output();
        if !pending.is_empty() {
            if let Err(error) = stream.write_all(pending) {
                if verbose {
                    eprintln!("{path}: write: {error}");
                }
                return Ok(last_message);
            }
            let sent = pending.len();
            client.consume_output(sent);
        }
        if client.state() == State::Closed {
            break;
        }
        if filled == buffer.len() {
            bail!("receive buffer full with no complete frame (a client bug)");
        }
        match stream.read(&mut buffer[filled..]) {
            Ok(0) => {
                if verbose {
                    eprintln!("{path}: server closed TCP in state {:?}", client.state());
                }
                return Ok(last_message);
            }
            Ok(received) => filled += received,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error).context("read"),
        }
    }

    if let (Some(error), true) = (failure, verbose) {
        eprintln!(
            "{path}: failed the connection: {error} (close code {})",
            error.close_code()
        );
    }
    // Section 7.1.1: after the closing handshake the server closes TCP first; wait a little for
    // its FIN so that the report shows a clean close, then drop the socket either way.
    stream.set_read_timeout(Some(CLOSE_WAIT))?;
    let mut sink = [0_u8; 4096];
    while matches!(stream.read(&mut sink), Ok(received) if received > 0) {}
    Ok(last_message)
}

/// Sends the upgrade request and reads the response; returns how many bytes after it (frames
/// already) are at the front of `buffer`.
fn handshake(
    stream: &mut TcpStream,
    endpoint: &Endpoint,
    path: &str,
    buffer: &mut [u8],
) -> Result<usize> {
    let mut handshake = Handshake::new()?;
    let request = Request {
        path,
        ..Request::from_endpoint(endpoint)
    };
    stream.write_all(&handshake.request(&request)?)?;
    let mut filled = 0;
    loop {
        let received = stream.read(&mut buffer[filled..])?;
        if received == 0 {
            bail!("the server closed the connection during the handshake");
        }
        filled += received;
        if let HandshakeStatus::Done { consumed } = handshake.parse_response(&buffer[..filled])? {
            buffer.copy_within(consumed..filled, 0);
            return Ok(filled - consumed);
        }
    }
}
