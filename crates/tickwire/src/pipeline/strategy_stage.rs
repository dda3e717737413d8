//! The strategy stage: the end of the pipeline. It reads the event ring in place, in batches of
//! at most [`EVENT_BATCH`] events, and for each event records receive-to-strategy latency
//! (except a snapshot's levels) and decoded-to-strategy latency (from the decoder's
//! [`PublishMark`]s), publishes quotes on the [`QuoteBoard`], matches quotes to the simulator's
//! send stamps when given, and applies it to the per-instrument [`Market`]; then it hands the
//! batch to the user's [`Strategy`], and calls the strategy's timer when it is due.
//!
//! **Invariant:** the strategy sees the events where the decoder wrote them: a batch is a
//! borrowed run of the event ring ([`crate::ring::ReadChunk`]), returned to the decoder only
//! after the strategy has returned, never a copy. A batch that would wrap around the ring's end
//! is handed over as two runs, each after the market has applied it.
//!
//! With several decoders it reads one event ring per decoder, each with its own marks. A round
//! takes one batch from every ring in turn, starting one ring further at each poll, and goes on
//! while any ring still hands over full batches, so that no decoder's ring starves the others.
//! **What is promised about order:** each instrument belongs to one venue and each venue to one
//! decoder, so an instrument's events (and a venue's, statuses included) reach the strategy in
//! the order their decoder wrote them. Across decoders, events come in batches in the order the
//! rings are visited; nothing orders two venues' events by their receive time (each event
//! carries `recv_ts_ns` for a strategy that wants to).

use super::rings::{PublishMark, StrategyEnds};
use super::{StagePoll, BATCHES_PER_POLL, EVENT_BATCH, HIGHEST_LATENCY_NS};
use crate::clock::Clock;
use crate::event::{flags, Body, Event};
use crate::metrics::{self, CounterReader, CounterWriter, LatencyCollector, LatencyRecorder};
use crate::ring::{self, ReadChunk};
use crate::strategy::board::QuoteBoard;
use crate::strategy::stamps::{Stamp, StampMatcher};
use crate::strategy::{Market, Strategy};
use std::sync::Arc;

/// The strategy stage: reads events in place, records how long they took from the wire, keeps
/// the quote board and the market, calls the user's strategy.
pub(super) struct StrategyStage {
    /// One per decoder, by decoder index.
    inputs: Vec<Input>,
    /// The input the next poll starts with (rotates every poll).
    next_input: usize,
    clock: Clock,
    tally: Tally,
    user: Option<Box<dyn Strategy>>,
    market: Market,
    next_timer_ns: u64,
}

/// What the stage records about every event before the strategy sees it. Apart from the event
/// ring, so that it is updated while a chunk of the ring is lent.
struct Tally {
    received: CounterWriter,
    gaps: CounterWriter,
    wire_to_strategy: LatencyRecorder,
    board: Arc<QuoteBoard>,
    stamps: Option<(StampMatcher, LatencyRecorder, CounterWriter)>,
    decoded_to_strategy: LatencyRecorder,
}

/// One decoder's event ring and its publication marks.
struct Input {
    events: ring::Consumer<Event>,
    marks: Marks,
}

/// Where the strategy is among one decoder's publications.
struct Marks {
    ring: ring::Consumer<PublishMark>,
    /// The publication the next events belong to, and how many events were taken so far.
    mark: PublishMark,
    taken: u64,
}

/// What the control thread keeps of the strategy stage.
pub(super) struct StrategyReaders {
    pub events_received: CounterReader,
    pub gaps: CounterReader,
    pub wire_to_strategy: LatencyCollector,
    pub decoded_to_strategy: LatencyCollector,
    pub send_to_strategy: Option<LatencyCollector>,
    pub unstamped: Option<CounterReader>,
    pub board: Arc<QuoteBoard>,
}

impl StrategyStage {
    /// The stage with its rings, a quote board and a market of `board_instruments` instruments,
    /// the simulator's send stamps if given, and the user's strategy if any.
    pub(super) fn new(
        clock: Clock,
        latency_digits: u8,
        board_instruments: usize,
        stamps: Option<ring::Consumer<Stamp>>,
        user: Option<Box<dyn Strategy>>,
        rings: StrategyEnds,
    ) -> Result<(StrategyStage, StrategyReaders), metrics::HistogramError> {
        let (stamps, send_to_strategy, unstamped) = match stamps {
            Some(consumer) => {
                let (recorder, collector) =
                    metrics::latency("send_to_strategy", HIGHEST_LATENCY_NS, latency_digits)?;
                let (unstamped_writer, unstamped) = metrics::counter();
                (
                    Some((StampMatcher::new(consumer), recorder, unstamped_writer)),
                    Some(collector),
                    Some(unstamped),
                )
            }
            None => (None, None, None),
        };
        let (wire_to_strategy, wire_to_strategy_reader) =
            metrics::latency("wire_to_strategy", HIGHEST_LATENCY_NS, latency_digits)?;
        let (decoded_to_strategy, decoded_to_strategy_reader) =
            metrics::latency("decoded_to_strategy", HIGHEST_LATENCY_NS, latency_digits)?;
        let (received, events_received) = metrics::counter();
        let (gaps, gaps_reader) = metrics::counter();
        let board = Arc::new(QuoteBoard::new(board_instruments));
        let inputs = rings
            .inputs
            .into_iter()
            .map(|input| Input {
                events: input.events,
                marks: Marks {
                    ring: input.publish_marks,
                    mark: PublishMark {
                        events: 0,
                        at_ns: 0,
                    },
                    taken: 0,
                },
            })
            .collect();
        let stage = StrategyStage {
            inputs,
            next_input: 0,
            clock,
            tally: Tally {
                received,
                gaps,
                wire_to_strategy,
                board: board.clone(),
                stamps,
                decoded_to_strategy,
            },
            user,
            market: Market::new(board_instruments),
            next_timer_ns: 0,
        };
        let readers = StrategyReaders {
            events_received,
            gaps: gaps_reader,
            wire_to_strategy: wire_to_strategy_reader,
            decoded_to_strategy: decoded_to_strategy_reader,
            send_to_strategy,
            unstamped,
            board,
        };
        Ok((stage, readers))
    }
}

impl StagePoll for StrategyStage {
    fn poll(&mut self) -> bool {
        // Several batches per round while they are full, so that a backlog drains at the rate
        // a decoder on the same thread can produce it: up to the ring's capacity, which is what
        // one decoder round may publish (a byte stream's chunks make a thousand events each;
        // `BATCHES_PER_POLL` batches a round let a fused decoder, then the network stage's frame
        // ring, fall behind a Databento stream). Each round takes one batch from every decoder's
        // ring in turn, starting with a different ring at each poll.
        let count = self.inputs.len();
        let rounds = self
            .inputs
            .iter()
            .map(|input| input.events.capacity() / EVENT_BATCH)
            .max()
            .unwrap_or(0)
            .max(BATCHES_PER_POLL);
        let first = self.next_input;
        self.next_input = if first + 1 >= count { 0 } else { first + 1 };
        let mut drained = 0;
        for _ in 0..rounds {
            let mut full = false;
            let mut round = 0;
            let mut last_ns = 0;
            for step in 0..count {
                let index = (first + step) % count;
                let (batch, batch_ns) = self.poll_batch(index);
                round += batch;
                full |= batch == EVENT_BATCH;
                if batch > 0 {
                    last_ns = batch_ns;
                }
            }
            self.after_round(round, last_ns);
            drained += round;
            if !full {
                break;
            }
        }
        drained > 0
    }

    fn finish(&mut self) {
        self.tally.wire_to_strategy.flush();
        self.tally.decoded_to_strategy.flush();
        if let Some((_, send_latency, _)) = self.tally.stamps.as_mut() {
            send_latency.flush();
        }
        if let Some(user) = self.user.as_mut() {
            user.finish(&self.market);
        }
    }
}

impl StrategyStage {
    /// One batch of events from decoder `index`'s ring: bookkeeping, the market, the user's
    /// strategy; returns how many, and the last clock read.
    fn poll_batch(&mut self, index: usize) -> (usize, u64) {
        let Some(input) = self.inputs.get_mut(index) else {
            return (0, 0);
        };
        let marks = &mut input.marks;
        let lent = Lent(Some(input.events.read_chunk(EVENT_BATCH)));
        let (first, second) = lent.as_slices();
        let mut last_ns = 0;
        for run in [first, second] {
            if run.is_empty() {
                continue;
            }
            // One clock read for the run, taken as the stage takes it off the ring: the time its
            // bookkeeping records, and the strategy's `now_ns`.
            let now_ns = self.clock.now_ns();
            last_ns = now_ns;
            self.tally.received.add(run.len() as u64);
            for event in run {
                self.market.apply(event);
            }
            if let Some(user) = self.user.as_mut() {
                user.on_events(run, &self.market, now_ns);
            }
            // The stage's own bookkeeping (histograms, the quote board, the simulator's stamps)
            // after the strategy has seen the run, so that it never delays the strategy.
            for event in run {
                self.tally.take(event, now_ns, marks);
            }
        }
        let drained = first.len() + second.len();
        drop(lent);
        (drained, last_ns)
    }

    /// After a round over every ring: the strategy's timer when due, and the histograms'
    /// hand-over when asked.
    fn after_round(&mut self, drained: usize, last_ns: u64) {
        if let Some(user) = self.user.as_mut() {
            if let Some(interval) = user.timer_interval_ns() {
                // The round's last clock read, or one now for an idle round.
                let now_ns = if drained > 0 {
                    last_ns
                } else {
                    self.clock.now_ns()
                };
                if now_ns >= self.next_timer_ns {
                    if self.next_timer_ns > 0 {
                        user.on_timer(&self.market, now_ns);
                    }
                    self.next_timer_ns = now_ns + interval;
                }
            }
        }
        self.tally.wire_to_strategy.flush_if_requested();
        self.tally.decoded_to_strategy.flush_if_requested();
        if let Some((_, send_latency, _)) = self.tally.stamps.as_mut() {
            send_latency.flush_if_requested();
        }
    }
}

impl Tally {
    /// The stage's own bookkeeping for one event, taken off the ring at `now_ns`.
    #[inline]
    fn take(&mut self, event: &Event, now_ns: u64, marks: &mut Marks) {
        // The event's publication: the first mark of its decoder that covers its position.
        marks.taken += 1;
        while marks.mark.events < marks.taken {
            match marks.ring.try_pop() {
                Some(next) => marks.mark = next,
                None => break,
            }
        }
        if marks.mark.events >= marks.taken {
            self.decoded_to_strategy
                .record(now_ns.saturating_sub(marks.mark.at_ns));
        }
        // A snapshot's levels came over REST, not the wire: their receive time is the
        // snapshot's, so they would measure the sync, not the pipeline.
        if event.header.flags & flags::SNAPSHOT == 0 {
            self.wire_to_strategy
                .record(now_ns.saturating_sub(event.header.recv_ts_ns));
        }
        match event.body() {
            Body::Quote(quote) => {
                self.board.publish(event.header.instrument_id, &quote);
                // Only quotes the venue sent as such carry a simulator stamp.
                if event.header.flags & flags::DERIVED == 0 {
                    if let Some((matcher, send_latency, unstamped)) = self.stamps.as_mut() {
                        match matcher.send_ns(event.header.venue_seq) {
                            Some(send_ns) => send_latency.record(now_ns.saturating_sub(send_ns)),
                            None => unstamped.increment(),
                        }
                    }
                }
            }
            Body::Gap(_) => self.gaps.increment(),
            // The market and the strategy see these; the stage itself keeps nothing of them.
            Body::Trade(_)
            | Body::BookLevel(_)
            | Body::SnapshotBegin(_)
            | Body::SnapshotEnd(_)
            | Body::VenueStatus(_)
            | Body::Reference(_)
            | Body::Bar(_)
            | Body::TradingStatus(_)
            | Body::Imbalance(_)
            | Body::Statistic(_)
            | Body::Liquidation(_) => {}
        }
    }
}

/// A chunk of the event ring, committed when dropped: once the strategy has returned, or while a
/// panicking strategy unwinds, so that the events it was handed are consumed either way, as they
/// were when the stage copied them out of the ring before calling it.
struct Lent<'a>(Option<ReadChunk<'a, Event>>);

impl Lent<'_> {
    fn as_slices(&self) -> (&[Event], &[Event]) {
        match &self.0 {
            Some(chunk) => chunk.as_slices(),
            None => (&[], &[]),
        }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(chunk) = self.0.take() {
            chunk.commit_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RingsConfig;
    use crate::event::{EventHeader, EventKind, Quote};
    use crate::fixed::Fixed;
    use crate::pipeline::rings::{DecoderEnds, Rings};
    use std::sync::Mutex;

    /// The prices of quote `seq`: its sequence number plus one, so that the market's top says
    /// which quote it applied last.
    fn price(seq: u64) -> Fixed {
        let units = i64::try_from(seq).expect("small test sequences") + 1;
        Fixed::from_units(units).expect("small test prices")
    }

    fn quote(seq: u64) -> Event {
        let px = price(seq);
        Event::new(
            EventHeader {
                exchange_ts_ns: 1,
                recv_ts_ns: 2,
                venue_seq: seq,
                instrument_id: 0,
                venue_id: 0,
                kind: EventKind::Quote,
                flags: 0,
            },
            Body::Quote(Quote {
                bid_px: px,
                bid_sz: px,
                ask_px: px,
                ask_sz: px,
            }),
        )
    }

    /// What a strategy saw: per call, the sequence numbers handed over and the bid of the
    /// market's top at the time.
    #[derive(Default)]
    struct Seen {
        calls: Vec<(Vec<u64>, Option<Fixed>)>,
    }

    /// Records every call; panics on the call numbered `panic_on`, if any.
    struct Recorder {
        seen: Arc<Mutex<Seen>>,
        panic_on: Option<usize>,
    }

    impl Strategy for Recorder {
        fn on_events(&mut self, events: &[Event], market: &Market, _now_ns: u64) {
            let top = market
                .get(0)
                .and_then(|state| state.top)
                .map(|top| top.bid_px);
            let seqs = events.iter().map(|event| event.header.venue_seq).collect();
            let mut seen = self.seen.lock().expect("no panic while recording");
            seen.calls.push((seqs, top));
            if self.panic_on == Some(seen.calls.len()) {
                drop(seen);
                panic!("strategy bug");
            }
        }
    }

    /// The stage on an event ring of `slots`, with a `Recorder`; the decoder's ends to feed it.
    fn stage(
        slots: usize,
        panic_on: Option<usize>,
    ) -> (
        StrategyStage,
        StrategyReaders,
        DecoderEnds,
        Arc<Mutex<Seen>>,
    ) {
        let rings = Rings::new(
            &RingsConfig {
                frame_ring_bytes: 1 << 16,
                event_ring_slots: slots,
            },
            1,
        );
        let seen = Arc::new(Mutex::new(Seen::default()));
        let recorder = Recorder {
            seen: seen.clone(),
            panic_on,
        };
        let (stage, readers) = StrategyStage::new(
            Clock::monotonic(),
            3,
            1,
            None,
            Some(Box::new(recorder)),
            rings.strategy,
        )
        .expect("the histograms' bounds are valid");
        let decoder = rings.decoders.into_iter().next().expect("one decoder");
        (stage, readers, decoder, seen)
    }

    /// Every event reaches the strategy once and in order, in batches of at most
    /// `EVENT_BATCH` that never straddle the ring's end, each after the market applied it.
    #[test]
    fn every_event_reaches_the_strategy_in_order_across_the_rings_end() {
        let (mut stage, readers, mut decoder, seen) = stage(128, None);
        let mut next = 0u64;
        // Publications of uneven sizes, so that batches start anywhere and wrap often.
        for size in [1usize, 63, 64, 65, 100, 7, 128, 3, 90, 50]
            .iter()
            .cycle()
            .take(40)
        {
            let batch: Vec<Event> = (next..next + *size as u64).map(quote).collect();
            assert_eq!(decoder.events.push_slice(&batch), batch.len());
            next += *size as u64;
            assert!(stage.poll());
        }
        assert!(!stage.poll(), "nothing left");
        let seen = seen.lock().expect("no panic while recording");
        let handed: Vec<u64> = seen
            .calls
            .iter()
            .flat_map(|(seqs, _)| seqs.iter().copied())
            .collect();
        assert_eq!(handed, (0..next).collect::<Vec<_>>());
        assert_eq!(readers.events_received.get(), next);
        let mut position = 0;
        for (seqs, top) in &seen.calls {
            assert!(!seqs.is_empty() && seqs.len() <= EVENT_BATCH);
            assert_eq!(
                *top,
                seqs.last().map(|&seq| price(seq)),
                "the market applied the batch before the strategy saw it"
            );
            assert_eq!(
                position / 128,
                (position + seqs.len() - 1) / 128,
                "a batch never straddles the ring's end"
            );
            position += seqs.len();
        }
    }

    /// A strategy that panics takes the stage down with it, as before, and the events it was
    /// handed are consumed: their slots go back to the decoder, none is handed over twice.
    #[test]
    fn the_batch_a_panicking_strategy_was_handed_is_consumed() {
        let (mut stage, readers, mut decoder, seen) = stage(256, Some(1));
        let batch: Vec<Event> = (0..100).map(quote).collect();
        assert_eq!(decoder.events.push_slice(&batch), 100);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stage.poll()));
        assert!(
            result.is_err(),
            "the strategy's panic goes through the stage"
        );
        assert_eq!(readers.events_received.get(), EVENT_BATCH as u64);
        assert_eq!(
            decoder.events.free_slots(),
            256 - (100 - EVENT_BATCH),
            "the first batch's slots came back"
        );
        let seen = seen
            .lock()
            .expect("the panic happened after the lock was released");
        assert_eq!(seen.calls.len(), 1);
        assert_eq!(seen.calls[0].0, (0..EVENT_BATCH as u64).collect::<Vec<_>>());
    }
}
