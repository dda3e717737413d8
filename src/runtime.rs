//! The running appliance: rings wired between the stages, hot threads started from the plan,
//! and the control thread's report loop.
//!
//! ```text
//!  net stage --(frame ring: FrameProducer/FrameConsumer)--> decoder stage
//!  decoder stage --(event ring: spsc::Producer<Event>/Consumer<Event>)--> strategy stage
//! ```
//!
//! Each hot thread runs the stages the plan gave it, in pipeline order, in one poll loop: poll
//! every stage, count a heartbeat, and wait as its strategy says when no stage had work. The
//! network stage holds the frame ring's producer and no connections yet: the network engine plugs
//! in there. The decoder stage counts frames it has no venue decoder for (none yet) and the
//! strategy stage records wire-to-strategy latency for every event it receives.

use crate::clock::Clock;
use crate::config::{LoadedConfig, Stage};
use crate::event::Event;
use crate::metrics::{self, CounterReader, CounterWriter, LatencyCollector, LatencyRecorder};
use crate::ring::{self, FrameConsumer, FrameProducer, RingStats};
use crate::thread::{self, HotThread, ThreadError, Wakeup};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Events the decoder writes before publishing them as one batch.
const EVENT_BATCH: usize = 64;
/// Highest latency the stage histograms track: 10 s (anything above is clamped and counted).
const HIGHEST_LATENCY_NS: u64 = 10_000_000_000;

/// One stage's state on its thread. `poll` does a bounded amount of work and says whether it
/// found any.
trait StagePoll: Send {
    fn poll(&mut self) -> bool;
    /// Called when the thread is about to stop.
    fn finish(&mut self) {}
}

/// The network stage: owns the frame ring's producer. Venue connections attach here.
struct NetStage {
    _frames: FrameProducer,
}

impl StagePoll for NetStage {
    fn poll(&mut self) -> bool {
        false
    }
}

/// The decoder stage: drains frames, writes events.
struct DecoderStage {
    frames: FrameConsumer,
    _events: ring::Producer<Event>,
    undecoded: CounterWriter,
    strategy_wakeup: Option<Wakeup>,
}

impl StagePoll for DecoderStage {
    fn poll(&mut self) -> bool {
        let undecoded = &mut self.undecoded;
        let drained = self.frames.drain(EVENT_BATCH, |_tag, _bytes| {
            // No venue decoder is registered for this frame's connection.
            undecoded.increment();
        });
        if drained > 0 {
            if let Some(wakeup) = &self.strategy_wakeup {
                wakeup.wake();
            }
        }
        drained > 0
    }
}

/// The strategy stage: drains events and records how long they took from the wire.
struct StrategyStage {
    events: ring::Consumer<Event>,
    clock: Clock,
    received: CounterWriter,
    wire_to_strategy: LatencyRecorder,
}

impl StagePoll for StrategyStage {
    fn poll(&mut self) -> bool {
        let clock = self.clock;
        let received = &mut self.received;
        let latency = &mut self.wire_to_strategy;
        let drained = self.events.drain(EVENT_BATCH, |event| {
            received.increment();
            latency.record(clock.now_ns().saturating_sub(event.header.recv_ts_ns));
        });
        self.wire_to_strategy.flush_if_requested();
        drained > 0
    }

    fn finish(&mut self) {
        self.wire_to_strategy.flush();
    }
}

/// What the control thread can read about a running appliance.
pub struct Runtime {
    stop: Arc<AtomicBool>,
    threads: Vec<HotThread<()>>,
    /// Per thread: its name and a counter of poll-loop rounds (the watchdog's heartbeat).
    pub heartbeats: Vec<(String, CounterReader)>,
    pub frames_undecoded: CounterReader,
    pub events_received: CounterReader,
    pub wire_to_strategy: LatencyCollector,
    /// Refusals of the net-to-decoder frame ring (the decoder fell behind).
    pub frame_ring: RingStats,
    /// Refusals of the decoder-to-strategy event ring (the strategy fell behind).
    pub event_ring: RingStats,
}

impl Runtime {
    /// Wires the rings and starts the hot threads the config plans, last stage first so each
    /// producer knows how to wake its consumer.
    pub fn start(config: &LoadedConfig, clock: Clock) -> Result<Runtime, RuntimeError> {
        let appliance = &config.appliance;
        let (frame_tx, frame_rx) = ring::frame_ring(appliance.rings.frame_ring_bytes);
        let (event_tx, event_rx) = ring::ring::<Event>(appliance.rings.event_ring_slots);
        let (undecoded_writer, frames_undecoded) = metrics::counter();
        let (received_writer, events_received) = metrics::counter();
        let (wire_recorder, wire_to_strategy) =
            metrics::latency("wire_to_strategy", HIGHEST_LATENCY_NS, 3)?;
        let frame_ring = frame_rx.stats();
        let event_ring = event_rx.stats();
        let mut net = Some(NetStage { _frames: frame_tx });
        let mut decoder = Some(DecoderStage {
            frames: frame_rx,
            _events: event_tx,
            undecoded: undecoded_writer,
            strategy_wakeup: None,
        });
        let mut strategy = Some(StrategyStage {
            events: event_rx,
            clock,
            received: received_writer,
            wire_to_strategy: wire_recorder,
        });

        let plans = thread::plan(&appliance.threads, appliance.process.on_privilege_error);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut heartbeats = Vec::new();
        // Start the plan's threads from the last stage backwards.
        for plan in plans.iter().rev() {
            let mut stages: Vec<Box<dyn StagePoll>> = Vec::new();
            for stage in &plan.stages {
                match stage {
                    Stage::Net => {
                        if let Some(net) = net.take() {
                            stages.push(Box::new(net));
                        }
                    }
                    Stage::Decoder => {
                        if let Some(decoder) = decoder.take() {
                            stages.push(Box::new(decoder));
                        }
                    }
                    Stage::Strategy => {
                        if let Some(strategy) = strategy.take() {
                            stages.push(Box::new(strategy));
                        }
                    }
                }
            }
            let (mut heartbeat, heartbeat_reader) = metrics::counter();
            heartbeats.push((plan.spec.name.clone(), heartbeat_reader));
            let thread_stop = stop.clone();
            let hot = thread::spawn(&plan.spec, move |waiter| {
                while !thread_stop.load(Ordering::Relaxed) {
                    let mut worked = false;
                    for stage in stages.iter_mut() {
                        worked |= stage.poll();
                    }
                    heartbeat.increment();
                    if worked {
                        waiter.reset();
                    } else {
                        waiter.idle(|| thread_stop.load(Ordering::Relaxed));
                    }
                }
                for stage in stages.iter_mut() {
                    stage.finish();
                }
            });
            let hot = match hot {
                Ok(hot) => hot,
                Err(error) => {
                    stop_all(&stop, threads);
                    return Err(error.into());
                }
            };
            tracing::info!(
                thread = %hot.name,
                stages = ?plan.stages,
                core = ?hot.pinned_core,
                realtime = hot.realtime,
                wait = ?plan.spec.wait,
                "hot thread started"
            );
            // The stage feeding this thread's first stage wakes it.
            if plan.stages.first() == Some(&Stage::Strategy) {
                if let Some(decoder) = decoder.as_mut() {
                    decoder.strategy_wakeup = Some(hot.wakeup.clone());
                }
            }
            threads.push(hot);
        }
        heartbeats.reverse();
        Ok(Runtime {
            stop,
            threads,
            heartbeats,
            frames_undecoded,
            events_received,
            wire_to_strategy,
            frame_ring,
            event_ring,
        })
    }

    /// Whether every hot thread is still running.
    pub fn all_running(&self) -> bool {
        self.threads.iter().all(|thread| !thread.is_finished())
    }

    /// Asks every hot thread to stop and waits for them. Returns the names of threads that
    /// panicked.
    pub fn shutdown(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut panicked = Vec::new();
        for thread in self.threads {
            thread.wakeup.wake();
            let name = thread.name.clone();
            if thread.join().is_err() {
                panicked.push(name);
            }
        }
        panicked
    }
}

fn stop_all(stop: &AtomicBool, threads: Vec<HotThread<()>>) {
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.wakeup.wake();
        let _ = thread.join();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error(transparent)]
    Histogram(#[from] metrics::HistogramError),
}
