//! `tw-peer-tcp-floor`: the floor under every WebSocket peer in `tickwire bench e2e`.
//!
//! No TLS, no WebSocket framing, no JSON library: a plain TCP stream of bookTicker `data` objects,
//! one per line, read by busy-polling a non-blocking socket (no sleeping, no epoll), with `u`, `b`
//! and `a` found by one hand-written scan of each line. Whatever latency this peer shows is the
//! cost of the loopback TCP path, the clock reads and the machine itself; the gap between it and a
//! WebSocket peer is what TLS, framing, JSON and the runtime add.
//!
//! One record per bookTicker: its update id `u` and the CLOCK_REALTIME time its mid was computed.
//! Records stay in memory (preallocated for `--count`) and are written at exit. The record format
//! is described in `benches/peers/README.md`.


use std::hint::black_box;
use std::io::{ErrorKind, Read as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: tw-peer-tcp-floor --addr HOST:PORT --out FILE \
[--count N] [--duration-secs S] [--core N]";

/// Records reserved up front when `--count` is not given (16 MiB of address space; pages are
/// touched only as records arrive). With `--count`, that many, touched before the stream starts.
const DEFAULT_RECORD_CAPACITY: usize = 1 << 20;

/// The receive buffer: far more than one bookTicker line (about 170 bytes), so a read can take a
/// whole burst of lines at once.
const RECEIVE_BUFFER_BYTES: usize = 1 << 16;

/// Polls between two looks at the clock for `--duration-secs`.
const POLLS_PER_DEADLINE_CHECK: u32 = 1024;

/// One output record: the update id and when its mid was computed.
#[derive(Clone, Copy)]
struct Record {
    update_id: u64,
    done_ns: u64,
}

struct Args {
    addr: String,
    out: PathBuf,
    count: Option<u64>,
    duration: Option<Duration>,
    core: Option<usize>,
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("tw-peer-tcp-floor: {message}\n{USAGE}");
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
    } else if let Err(message) = written {
        eprintln!("tw-peer-tcp-floor: {message}");
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tw-peer-tcp-floor: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args, records: &mut Vec<Record>) -> Result<(), String> {
    if let Some(core) = args.core {
        pin_to_core(core).map_err(|error| format!("pinning to core {core}: {error}"))?;
    }
    let capacity = args.count.map_or(DEFAULT_RECORD_CAPACITY, |count| {
        usize::try_from(count).unwrap_or(usize::MAX)
    });
    records.reserve_exact(capacity);
    if args.count.is_some() {
        // The pages touched now, as tickwire's `mid` strategy does with its record buffer, so
        // that recording costs the timed loop no page fault.
        records.resize(
            capacity,
            Record {
                update_id: 0,
                done_ns: 0,
            },
        );
        std::hint::black_box(&*records);
        records.clear();
    }
    let mut stream = TcpStream::connect(&args.addr)
        .map_err(|error| format!("connecting to {}: {error}", args.addr))?;
    stream
        .set_nonblocking(true)
        .map_err(|error| format!("setting the socket non-blocking: {error}"))?;
    let deadline = args.duration.map(|duration| Instant::now() + duration);
    follow(&mut stream, args.count, deadline, records)
}

/// Reads lines until `count` records, the deadline, or the server's close.
fn follow(
    stream: &mut TcpStream,
    count: Option<u64>,
    deadline: Option<Instant>,
    records: &mut Vec<Record>,
) -> Result<(), String> {
    let limit = count.unwrap_or(u64::MAX);
    let mut buffer = vec![0u8; RECEIVE_BUFFER_BYTES];
    // `buffer[..pending]` holds the start of a line whose `\n` has not arrived yet.
    let mut pending = 0usize;
    let mut polls = 0u32;
    let mut skipped = 0u64;
    let mut mid_checksum = 0.0f64;
    while (records.len() as u64) < limit {
        polls = polls.wrapping_add(1);
        if polls % POLLS_PER_DEADLINE_CHECK == 0 && deadline.is_some_and(|at| Instant::now() >= at)
        {
            break;
        }
        if pending == buffer.len() {
            return Err(format!("a line longer than {RECEIVE_BUFFER_BYTES} bytes"));
        }
        // On Linux `TcpStream::read` is one recv(2) with no flags; on this non-blocking socket it
        // returns at once, with data or with EAGAIN.
        let received = match stream.read(&mut buffer[pending..]) {
            Ok(0) => break,
            Ok(received) => received,
            Err(error) if error.kind() == ErrorKind::WouldBlock => continue,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(format!("receiving: {error}")),
        };
        let filled = pending + received;
        let mut line_start = 0;
        // Only the new bytes can hold a `\n`: the pending ones were searched by the last read.
        let mut search_from = pending;
        while let Some(offset) = buffer[search_from..filled]
            .iter()
            .position(|&byte| byte == b'\n')
        {
            let line_end = search_from + offset;
            match book_ticker(&buffer[line_start..line_end]) {
                Some(ticker) => {
                    let mid = black_box((ticker.best_bid + ticker.best_ask) / 2.0);
                    records.push(Record {
                        update_id: ticker.update_id,
                        done_ns: realtime_ns(),
                    });
                    mid_checksum += mid;
                }
                None => skipped += 1,
            }
            line_start = line_end + 1;
            search_from = line_start;
            if records.len() as u64 >= limit {
                break;
            }
        }
        buffer.copy_within(line_start..filled, 0);
        pending = filled - line_start;
    }
    black_box(mid_checksum);
    if skipped > 0 {
        eprintln!("tw-peer-tcp-floor: skipped {skipped} lines that were not bookTicker messages");
    }
    Ok(())
}

/// What the mid needs from one bookTicker line.
#[derive(Debug, PartialEq)]
struct BookTicker {
    update_id: u64,
    best_bid: f64,
    best_ask: f64,
}

/// One pass over a flat JSON object such as Binance's bookTicker `data`,
/// `{"e":"bookTicker","u":123,"s":"BTCUSDT","b":"60000.10","B":"1.5","a":"60000.20",...}`:
/// every key is one letter, so a key is `"X":` and the scan jumps over each quoted value (so a
/// symbol or price can never be taken for a key). Stops as soon as `u`, `b` and `a` are known.
fn book_ticker(line: &[u8]) -> Option<BookTicker> {
    let (mut update_id, mut best_bid, mut best_ask) = (None, None, None);
    let mut at = 0;
    while at + 4 <= line.len() {
        if !(line[at] == b'"' && line[at + 2] == b'"' && line[at + 3] == b':') {
            at += 1;
            continue;
        }
        let key = line[at + 1];
        let value_start = at + 4;
        let (value, next) = if line.get(value_start) == Some(&b'"') {
            let text_start = value_start + 1;
            let text_len = line[text_start..].iter().position(|&byte| byte == b'"')?;
            let text_end = text_start + text_len;
            (&line[text_start..text_end], text_end + 1)
        } else {
            let value_len = line[value_start..]
                .iter()
                .position(|&byte| byte == b',' || byte == b'}')
                .unwrap_or(line.len() - value_start);
            let value_end = value_start + value_len;
            (&line[value_start..value_end], value_end)
        };
        match key {
            b'u' => update_id = Some(parse_u64(value)?),
            b'b' => best_bid = Some(parse_price(value)?),
            b'a' => best_ask = Some(parse_price(value)?),
            _ => {}
        }
        if let (Some(update_id), Some(best_bid), Some(best_ask)) = (update_id, best_bid, best_ask) {
            return Some(BookTicker {
                update_id,
                best_bid,
                best_ask,
            });
        }
        at = next;
    }
    None
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |value, &byte| {
        let digit = byte.checked_sub(b'0').filter(|digit| *digit <= 9)?;
        value.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// Exact powers of ten as `f64` (every one up to 1e22 is representable).
const POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// A decimal price such as `60000.10`. With at most 15 digits the digits form an integer below
/// 2^53 and the scale a power of ten below 1e22, both exact in `f64`, so one correctly rounded
/// division gives the correctly rounded value: Clinger's fast path ("How to Read Floating Point
/// Numbers Accurately", PLDI 1990). Anything else goes to the standard library's parser.
fn parse_price(text: &[u8]) -> Option<f64> {
    let mut mantissa = 0u64;
    let mut digits = 0usize;
    let mut fraction_digits = None::<usize>;
    for &byte in text {
        match byte {
            b'0'..=b'9' if digits < 15 => {
                mantissa = mantissa * 10 + u64::from(byte - b'0');
                digits += 1;
                if let Some(fraction_digits) = fraction_digits.as_mut() {
                    *fraction_digits += 1;
                }
            }
            b'.' if fraction_digits.is_none() => fraction_digits = Some(0),
            _ => return std::str::from_utf8(text).ok()?.parse().ok(),
        }
    }
    if digits == 0 {
        return None;
    }
    Some(mantissa as f64 / POWERS_OF_TEN[fraction_digits.unwrap_or(0)])
}

/// CLOCK_REALTIME in ns since the Unix epoch (`SystemTime` reads it through the vDSO).
fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since_epoch| since_epoch.as_nanos() as u64)
}

/// 16 bytes per record: `u` then `done_ns`, both u64 little-endian.
fn write_records(path: &std::path::Path, records: &[Record]) -> Result<(), String> {
    let mut bytes = Vec::with_capacity(records.len() * 16);
    for record in records {
        bytes.extend_from_slice(&record.update_id.to_le_bytes());
        bytes.extend_from_slice(&record.done_ns.to_le_bytes());
    }
    std::fs::write(path, bytes).map_err(|error| format!("writing {}: {error}", path.display()))
}

fn pin_to_core(core: usize) -> std::io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "core number past CPU_SETSIZE",
        ));
    }
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is the empty set.
    let mut cpus: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core < CPU_SETSIZE` (checked above), so the bit set lies inside `cpus`.
    unsafe { libc::CPU_SET(core, &mut cpus) };
    // SAFETY: `cpus` is an initialised `cpu_set_t` and the size passed is its own; pid 0 is the
    // calling thread, the program's only one.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpus) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn parse_args(mut words: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut addr, mut out) = (None, None);
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
            "--addr" => addr = Some(value()?),
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
        addr: addr.ok_or("--addr is required")?,
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

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &[u8] = br#"{"e":"bookTicker","u":400900217,"s":"BNBUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000","T":1568014460891,"E":1568014460893}"#;

    #[test]
    fn scans_a_binance_book_ticker() {
        assert_eq!(
            book_ticker(LINE),
            Some(BookTicker {
                update_id: 400900217,
                best_bid: 25.3519,
                best_ask: 25.3652,
            })
        );
    }

    #[test]
    fn missing_fields_are_no_ticker() {
        assert_eq!(book_ticker(br#"{"e":"bookTicker","u":1,"b":"1.0"}"#), None);
        assert_eq!(book_ticker(b""), None);
        assert_eq!(book_ticker(br#"{"u":"x","b":"1","a":"2"}"#), None);
    }

    /// The fast path against the standard library's parser (the oracle).
    #[test]
    fn prices_match_the_standard_parser() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut cases: Vec<String> = [
            "0",
            "0.0",
            "60000.10",
            "60000.2",
            "0.00000001",
            "123456789012345",
            "1234567890123456",
            "99999999.99999999",
            "1e5",
            "-3.5",
            "7.",
        ]
        .iter()
        .map(|case| (*case).to_owned())
        .collect();
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let integer = seed % 1_000_000;
            let scale = (seed >> 32) % 9;
            let fraction = (seed >> 20) % 10u64.pow(scale as u32);
            cases.push(format!(
                "{integer}.{fraction:0width$}",
                width = scale as usize
            ));
        }
        for case in &cases {
            assert_eq!(
                parse_price(case.as_bytes()),
                case.parse::<f64>().ok(),
                "{case}"
            );
        }
    }
}
