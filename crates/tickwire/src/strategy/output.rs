//! Text the strategy thread produces (the `print` strategy's and `--print-events`' JSON lines,
//! the `mid` and `quoter` summaries), handed to another thread to write out.
//!
//! The strategy thread is pinned and hot: it must not take the stdout lock, make a write
//! syscall or log through `tracing` (whose subscriber formats, locks and writes). So a strategy
//! formats its text into a buffer it reuses and pushes it, as one frame, into a byte ring
//! ([`StrategyOutput`]); the control thread drains the ring ([`OutputReader::drain`]), writing
//! [`STDOUT`] frames to stdout and logging [`LOG`] frames. A full ring drops the frame and
//! counts its lines (a slow stdout loses lines rather than stalling the strategy); nothing
//! blocks, and nothing is allocated once the buffer has grown to the largest frame.

use crate::metrics::{CounterReader, CounterWriter};
use crate::ring::{FrameConsumer, FrameProducer};
use std::io::Write;

/// A frame of JSON lines for stdout.
pub const STDOUT: u32 = 0;
/// A frame of one log line (no newline), logged at INFO by the draining thread.
pub const LOG: u32 = 1;

/// Bytes of printed JSON lines buffered between the strategy stage and stdout: some seconds of
/// a busy feed, so that a stdout that stalls for a moment loses nothing.
pub const PRINT_RING_BYTES: usize = 64 << 20;
/// Bytes of summary lines buffered (a few per second at most).
pub const LOG_RING_BYTES: usize = 64 << 10;

/// The strategy thread's end: a reused buffer and the ring it is pushed into.
pub struct StrategyOutput {
    ring: FrameProducer,
    buffer: Vec<u8>,
    /// Lines lost because the ring was full.
    dropped: CounterWriter,
}

/// The draining thread's end.
pub struct OutputReader {
    ring: FrameConsumer,
    dropped: CounterReader,
}

/// A ring of `bytes` between a strategy and the thread that writes its text out; the buffer
/// starts with room for `buffer` bytes.
pub fn output(bytes: usize, buffer: usize) -> (StrategyOutput, OutputReader) {
    let (producer, consumer) = crate::ring::frame_ring(bytes);
    let (dropped, reader) = crate::metrics::counter();
    (
        StrategyOutput {
            ring: producer,
            buffer: Vec::with_capacity(buffer),
            dropped,
        },
        OutputReader {
            ring: consumer,
            dropped: reader,
        },
    )
}

impl StrategyOutput {
    /// The buffer, emptied, to append a frame's text to (then [`StrategyOutput::push`]).
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        self.buffer.clear();
        &mut self.buffer
    }

    /// Pushes what the buffer holds as one frame of `tag`; a full ring drops it and counts
    /// `lines` lost. An empty buffer pushes nothing.
    pub fn push(&mut self, tag: u32, lines: u64) {
        if !self.buffer.is_empty() && self.ring.try_push(tag, &self.buffer).is_err() {
            self.dropped.add(lines);
        }
    }

    /// Formats one log line and pushes it ([`LOG`]). Formatting writes into the reused buffer:
    /// `{}` and `{:?}` of numbers and strings allocate nothing.
    pub fn log(&mut self, line: std::fmt::Arguments<'_>) {
        let buffer = self.buffer();
        // Writing into a `Vec` cannot fail.
        let _ = buffer.write_fmt(line);
        self.push(LOG, 1);
    }
}

impl OutputReader {
    /// Writes every [`STDOUT`] frame waiting to `out`, in order, and hands every [`LOG`] line
    /// to `log`. Stops at the first write error (the rest stays for the next call).
    pub fn drain(&mut self, out: &mut dyn Write, mut log: impl FnMut(&str)) -> std::io::Result<()> {
        let mut result = Ok(());
        self.ring.drain(usize::MAX, |tag, bytes| {
            if result.is_err() {
                return;
            }
            match tag {
                LOG => log(&String::from_utf8_lossy(bytes)),
                _ => result = out.write_all(bytes),
            }
        });
        result
    }

    /// Lines lost because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }
}

/// Logs a strategy's line on the draining thread (INFO, target `tickwire::strategy`).
pub fn log_line(line: &str) {
    tracing::info!(target: "tickwire::strategy", "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_in_order_and_a_full_ring_counts_its_losses() {
        let (mut output, mut reader) = output(1024, 64);
        output.buffer().extend_from_slice(b"one\ntwo\n");
        output.push(STDOUT, 2);
        output.log(format_args!("summary {} {:?}", 3, Some(1.5)));
        output.buffer().extend_from_slice(b"three\n");
        output.push(STDOUT, 1);
        let mut out = Vec::new();
        let mut logged = Vec::new();
        reader
            .drain(&mut out, |line| logged.push(line.to_owned()))
            .expect("drain");
        assert_eq!(out, b"one\ntwo\nthree\n");
        assert_eq!(logged, ["summary 3 Some(1.5)"]);

        output.buffer().resize(600, b'x');
        output.push(STDOUT, 5);
        assert_eq!(reader.dropped(), 5, "larger than half the ring");
    }
}
