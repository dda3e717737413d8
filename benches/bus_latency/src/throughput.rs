//! The writer's sustained rate with 0, 1, 4 and 16 reader processes, and with one stalled
//! reader, each reader checking every event it keeps and counting what it missed.
//!
//! The writer (this process, pinned to the writer core) writes as fast as it can for a fixed
//! time, publishing once per 64 events, as the decoder stage does. Readers are processes pinned
//! together to the other core (two busy cores is all this machine has): each reads batches of up
//! to 256 and yields when the ring is empty. Each event carries its position and a check word, so
//! a reader refuses a torn event and checks that `missed` accounts for every position it skipped.
//!
//! The stalled reader opens the bus, then waits (blocked on stdin, using no CPU) until the writer
//! has finished, and reads once: it must be told it missed exactly the positions between where it
//! stood and the first event it gets (at least all but the last ring's worth), then read the rest
//! to the end with nothing unaccounted.

/// The most positions the writer claims ahead of what it has written (`ring.rs`).
const CLAIM_AHEAD_MAX: u64 = 1024;

use crate::clock;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Trade};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::{BusReader, BusWriter, Start};

const CHECK: u64 = 0x0123_4567_89ab_cdef;
/// Events per `publish`.
pub const BATCH: u64 = 64;
/// Events a reader copies per read.
const READ_BATCH: usize = 256;

fn event_at(position: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: position ^ CHECK,
            recv_ts_ns: position,
            venue_seq: position,
            instrument_id: 9,
            venue_id: 1,
            kind: EventKind::Trade,
            flags: 0,
        },
        Body::Trade(Trade::new(
            Fixed(9_500_010_000_000),
            Fixed(1),
            77,
            tickwire_bus::event::Side::Bid,
        )),
    )
}

fn check(event: &Event, position: u64) -> Result<(), String> {
    // The three header words that change per event must agree with the position; the payload
    // is the same in every event.
    let whole = event.header.venue_seq == position
        && event.header.recv_ts_ns == position
        && event.header.exchange_ts_ns == position ^ CHECK
        && matches!(event.body(), Body::Trade(trade) if trade.price == Fixed(9_500_010_000_000) && trade.trade_id == 77);
    if whole {
        Ok(())
    } else {
        Err(format!(
            "event at position {position} is torn or misplaced (venue_seq {})",
            event.header.venue_seq
        ))
    }
}

/// What the writer did in one run.
pub struct WriterRun {
    pub written: u64,
    pub seconds: f64,
    /// Nanoseconds spent in `write` and `publish` (the whole run at full speed; the batches
    /// alone, clock reads included, when paced).
    pub busy_ns: f64,
}

/// Writes for `duration`, as fast as it can (`rate` None) or paced to `rate` events per second
/// in batches of `BATCH`, busy-waiting between batches as a decoder waiting on its socket would.
pub fn write_for(
    writer: &mut BusWriter,
    duration: Duration,
    rate: Option<f64>,
    ticks_per_ns: f64,
) -> WriterRun {
    let mut template = event_at(0);
    let start = Instant::now();
    let start_ticks = clock::ticks();
    let batch_ticks = rate.map(|rate| BATCH as f64 / rate * 1e9 * ticks_per_ns);
    let mut busy_ticks = 0u64;
    let mut batches = 0u64;
    let mut position = writer.written();
    let first = position;
    loop {
        // 64 batches between clock reads: the clock costs nothing measurable per event.
        for _ in 0..64 {
            let batch_start = match batch_ticks {
                Some(batch_ticks) => {
                    let due = start_ticks + (batches as f64 * batch_ticks) as u64;
                    while clock::ticks() < due {
                        std::hint::spin_loop();
                    }
                    clock::ticks()
                }
                None => 0,
            };
            for _ in 0..BATCH {
                template.header.venue_seq = position;
                template.header.recv_ts_ns = position;
                template.header.exchange_ts_ns = position ^ CHECK;
                writer.write(&template);
                position += 1;
            }
            writer.publish();
            if batch_ticks.is_some() {
                busy_ticks += clock::ticks() - batch_start;
            }
            batches += 1;
        }
        let elapsed = start.elapsed();
        if elapsed >= duration {
            let seconds = elapsed.as_secs_f64();
            return WriterRun {
                written: position - first,
                seconds,
                busy_ns: match batch_ticks {
                    Some(_) => busy_ticks as f64 / ticks_per_ns,
                    None => seconds * 1e9,
                },
            };
        }
    }
}

/// What one reader reports.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReaderReport {
    pub read: u64,
    pub missed: u64,
    /// Reads that reported `missed > 0`: how often it was lapped.
    pub overruns: u64,
    pub seconds: f64,
}

impl ReaderReport {
    pub fn to_line(self) -> String {
        format!(
            "result {} {} {} {}",
            self.read, self.missed, self.overruns, self.seconds
        )
    }

    pub fn parse(line: &str) -> Result<ReaderReport, String> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ["result", read, missed, overruns, seconds] = fields[..] else {
            return Err(format!("not a reader result: {line:?}"));
        };
        let number = |text: &str| text.parse::<u64>().map_err(|error| error.to_string());
        Ok(ReaderReport {
            read: number(read)?,
            missed: number(missed)?,
            overruns: number(overruns)?,
            seconds: seconds.parse().map_err(|error| format!("{error}"))?,
        })
    }
}

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    // A parent that went away leaves nobody to tell: the child ends on its next wait.
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Reads one batch, checking every event and the accounting of what was skipped.
fn read_checked(
    reader: &mut BusReader,
    out: &mut [Event],
    report: &mut ReaderReport,
) -> Result<(u64, usize), String> {
    let before = reader.position();
    let batch = reader.read(out).map_err(|error| error.to_string())?;
    let first = before + batch.missed;
    for (offset, event) in out[..batch.count].iter().enumerate() {
        check(event, first + offset as u64)?;
    }
    if reader.position() != first + batch.count as u64 {
        return Err(format!(
            "position {} after a read from {before} that missed {} and returned {}",
            reader.position(),
            batch.missed,
            batch.count
        ));
    }
    report.read += batch.count as u64;
    report.missed += batch.missed;
    report.overruns += u64::from(batch.missed > 0);
    Ok((batch.missed, batch.count))
}

/// A reader process that keeps reading (yielding when the ring is empty) until the writer closes
/// the bus; prints its report.
pub fn reader(path: &Path, core: usize) -> Result<(), String> {
    clock::pin(core)?;
    let mut reader =
        BusReader::open(path, Start::Latest, READ_BATCH).map_err(|error| error.to_string())?;
    let start_position = reader.position();
    let mut out = vec![event_at(0); READ_BATCH];
    let mut report = ReaderReport::default();
    say("ready");
    let mut started: Option<Instant> = None;
    let mut closed = false;
    loop {
        let (missed, count) = read_checked(&mut reader, &mut out, &mut report)?;
        if count > 0 || missed > 0 {
            started.get_or_insert_with(Instant::now);
            continue;
        }
        if closed {
            break;
        }
        // Closed is stored after the last publish: one more read after seeing it drains all.
        closed = reader.is_closed();
        if !closed {
            std::thread::yield_now();
        }
    }
    report.seconds = started.map_or(0.0, |started| started.elapsed().as_secs_f64());
    if report.read + report.missed != reader.position() - start_position {
        return Err(format!(
            "read {} + missed {} != positions moved {}",
            report.read,
            report.missed,
            reader.position() - start_position
        ));
    }
    say(&report.to_line());
    Ok(())
}

/// The stalled reader: opens, waits for `read` on stdin, reads to the end once the writer has
/// closed, and checks the accounting of the overrun exactly.
pub fn stalled_reader(path: &Path, core: usize) -> Result<(), String> {
    clock::pin(core)?;
    let mut reader =
        BusReader::open(path, Start::Latest, READ_BATCH).map_err(|error| error.to_string())?;
    let stood_at = reader.position();
    say("ready");
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|error| format!("stdin: {error}"))?;
    if line.trim() != "read" {
        return Err(format!("expected read from the parent, got {line:?}"));
    }
    if !reader.is_closed() {
        return Err("the writer is still open: the stalled reader reads after it ends".to_owned());
    }
    let cursor = reader.cursor();
    let capacity = reader.capacity();
    let mut out = vec![event_at(0); READ_BATCH];
    let mut report = ReaderReport::default();
    let started = Instant::now();
    let (missed, count) = read_checked(&mut reader, &mut out, &mut report)?;
    // The first read reports the whole overrun: exactly the positions between where the reader
    // stood and the first event it got (checked by `read_checked` against the event's own
    // position), which is at least everything but the last ring's worth, and at most the
    // writer's claim-ahead (at most 1024, `ring.rs`) more.
    let first = if count > 0 {
        out[0].header.venue_seq
    } else {
        reader.position()
    };
    if missed != first - stood_at {
        return Err(format!(
            "missed {missed}, but the first event is at {first} from {stood_at}"
        ));
    }
    let lapped_by = cursor.saturating_sub(capacity).saturating_sub(stood_at);
    if missed < lapped_by || missed > lapped_by + CLAIM_AHEAD_MAX {
        return Err(format!(
            "missed {missed}: expected {lapped_by} to {} (cursor {cursor}, capacity {capacity})",
            lapped_by + CLAIM_AHEAD_MAX
        ));
    }
    loop {
        let (more_missed, count) = read_checked(&mut reader, &mut out, &mut report)?;
        if more_missed > 0 {
            return Err(format!(
                "missed {more_missed} more after the writer had stopped"
            ));
        }
        if count == 0 {
            break;
        }
    }
    if reader.position() != cursor || report.read + report.missed != cursor - stood_at {
        return Err(format!(
            "read {} + missed {} from {stood_at} does not reach the cursor {cursor}",
            report.read, report.missed
        ));
    }
    report.seconds = started.elapsed().as_secs_f64();
    say(&report.to_line());
    Ok(())
}
