//! The rings between the stages and the control thread: which ring connects which two ends, what
//! it carries and how many it holds. [`Rings::new`] makes them all and hands each stage its ends
//! ([`NetEnds`], [`DecoderEnds`], [`StrategyEnds`]) and the control thread the others
//! ([`ControlEnds`]), so that a stage's constructor takes exactly the rings it touches.
//!
//! Every decoder has a set of its own: the frame ring from the network thread, the event and
//! mark rings to the strategy, and its control rings. The "decoder" rows below are per decoder,
//! each at the capacity shown (N decoders take N times the memory).
//!
//! | ring | from | to | carries | capacity |
//! |---|---|---|---|---|
//! | frames | network | each decoder | received messages of its venues' connections, in place ([`crate::ring::bytes`]) | `rings.frame_ring_bytes` |
//! | events | each decoder | strategy | [`Event`] | `rings.event_ring_slots` |
//! | publish marks | decoder | strategy | [`PublishMark`], one per publication | `rings.event_ring_slots`, to a power of two |
//! | net commands | control | network | [`NetCommand`] | [`NET_COMMAND_SLOTS`] |
//! | net statuses | network | control | [`NetStatus`] | [`NET_STATUS_SLOTS`] |
//! | decoder commands | control | decoder | [`DecoderCommand`] | [`DECODER_COMMAND_SLOTS`] |
//! | snapshot requests | decoder | control | [`SnapshotRequest`] | [`SNAPSHOT_REQUEST_SLOTS`] |
//! | snapshot replies | control | decoder | boxed [`SnapshotReply`] | [`SNAPSHOT_REPLY_SLOTS`] |
//! | venue replies | decoder | control | [`VenueReply`] | [`VENUE_REPLY_SLOTS`] |
//! | malformed samples | decoder | control | [`MalformedSample`] | [`MALFORMED_SLOTS`] |
//! | send stamps | simulator | strategy | [`crate::strategy::stamps::Stamp`] | the caller's ([`super::RuntimeOptions::stamps`]) |
//!
//! **Invariant:** a producer never waits for its consumer. A full ring refuses and counts (the
//! frame and event rings' refusals are [`super::Runtime::frame_ring`] and
//! [`super::Runtime::event_ring`], per decoder and in all); the control rings are sized so that only a wedged control
//! thread fills them, which the watchdog reports.

use super::decoder_stage::DecoderCommand;
use super::net_stage::{NetCommand, NetStatus};
use crate::config::RingsConfig;
use crate::event::Event;
use crate::ring::{self, Consumer, FrameConsumer, FrameProducer, Producer, RingStats};
use crate::venue::feed::{MalformedSample, SnapshotReply, SnapshotRequest, VenueReply};

/// Commands to the network thread between two of its rounds: a round takes them all, and the
/// control thread sends a few per connection and tick.
pub const NET_COMMAND_SLOTS: usize = 256;
/// Stream state changes between two control ticks (every stream's, during a reconnect storm).
pub const NET_STATUS_SLOTS: usize = 1024;
/// Disconnections and status events for the decoder: one per stream change, written in order
/// with the market events.
pub const DECODER_COMMAND_SLOTS: usize = 4096;
/// Far more than the instruments a venue has: every book may want a snapshot at once.
pub const SNAPSHOT_REQUEST_SLOTS: usize = 1024;
pub const SNAPSHOT_REPLY_SLOTS: usize = 1024;
/// Many requests per connection between two control ticks.
pub const VENUE_REPLY_SLOTS: usize = 1024;
/// At most one sample per feed per second is kept, so a few suffice.
pub const MALFORMED_SLOTS: usize = 64;

/// A publication of the decoder: after it, `events` events in all had been published, at
/// `at_ns`. The strategy stage finds each event's publication by its position.
#[derive(Clone, Copy, Debug)]
pub(super) struct PublishMark {
    pub events: u64,
    pub at_ns: u64,
}

/// Every ring of the pipeline, grouped by the end that holds it.
pub(super) struct Rings {
    pub net: NetEnds,
    /// By decoder index.
    pub decoders: Vec<DecoderEnds>,
    pub strategy: StrategyEnds,
    pub control: ControlEnds,
}

/// The network stage's ends.
pub(super) struct NetEnds {
    /// By decoder index.
    pub frames: Vec<FrameProducer>,
    pub commands: Consumer<NetCommand>,
    pub statuses: Producer<NetStatus>,
}

/// One decoder stage's ends.
pub(super) struct DecoderEnds {
    pub frames: FrameConsumer,
    pub events: Producer<Event>,
    pub publish_marks: Producer<PublishMark>,
    pub commands: Consumer<DecoderCommand>,
    pub snapshot_requests: Producer<SnapshotRequest>,
    pub snapshot_replies: Consumer<Box<SnapshotReply>>,
    pub replies: Producer<VenueReply>,
    pub malformed: Producer<MalformedSample>,
}

/// One decoder's output as the strategy stage reads it.
pub(super) struct StrategyInput {
    pub events: Consumer<Event>,
    pub publish_marks: Consumer<PublishMark>,
}

/// The strategy stage's ends: one input per decoder, by decoder index.
pub(super) struct StrategyEnds {
    pub inputs: Vec<StrategyInput>,
}

/// The control thread's ends with one decoder.
pub(super) struct DecoderControlEnds {
    pub commands: Producer<DecoderCommand>,
    pub snapshot_requests: Consumer<SnapshotRequest>,
    pub snapshot_replies: Producer<Box<SnapshotReply>>,
    pub replies: Consumer<VenueReply>,
    pub malformed: Consumer<MalformedSample>,
    pub frame_ring: RingStats,
    pub event_ring: RingStats,
}

/// The control thread's ends, and the refusal counters of the data rings.
pub(super) struct ControlEnds {
    pub net_commands: Producer<NetCommand>,
    pub net_statuses: Consumer<NetStatus>,
    /// By decoder index.
    pub decoders: Vec<DecoderControlEnds>,
}

impl Rings {
    /// The rings of a pipeline with `decoders` decoders (at least one).
    pub fn new(config: &RingsConfig, decoders: usize) -> Rings {
        let (net_command_tx, net_command_rx) = ring::ring::<NetCommand>(NET_COMMAND_SLOTS);
        let (net_status_tx, net_status_rx) = ring::ring::<NetStatus>(NET_STATUS_SLOTS);
        let mut frames = Vec::new();
        let mut decoder_ends = Vec::new();
        let mut inputs = Vec::new();
        let mut control_ends = Vec::new();
        for _ in 0..decoders.max(1) {
            let (frame_tx, frame_rx) = ring::frame_ring(config.frame_ring_bytes);
            let (event_tx, event_rx) = ring::ring::<Event>(config.event_ring_slots);
            // A mark per publication; the event ring holds at most this many publications of one
            // event each, so the mark ring never fills before the event ring does.
            let (mark_tx, mark_rx) =
                ring::ring::<PublishMark>(config.event_ring_slots.next_power_of_two());
            let (command_tx, command_rx) = ring::ring::<DecoderCommand>(DECODER_COMMAND_SLOTS);
            let (request_tx, request_rx) = ring::ring::<SnapshotRequest>(SNAPSHOT_REQUEST_SLOTS);
            let (snapshot_tx, snapshot_rx) = ring::ring::<Box<SnapshotReply>>(SNAPSHOT_REPLY_SLOTS);
            let (reply_tx, reply_rx) = ring::ring::<VenueReply>(VENUE_REPLY_SLOTS);
            let (malformed_tx, malformed_rx) = ring::ring::<MalformedSample>(MALFORMED_SLOTS);
            control_ends.push(DecoderControlEnds {
                commands: command_tx,
                snapshot_requests: request_rx,
                snapshot_replies: snapshot_tx,
                replies: reply_rx,
                malformed: malformed_rx,
                frame_ring: frame_rx.stats(),
                event_ring: event_rx.stats(),
            });
            frames.push(frame_tx);
            decoder_ends.push(DecoderEnds {
                frames: frame_rx,
                events: event_tx,
                publish_marks: mark_tx,
                commands: command_rx,
                snapshot_requests: request_tx,
                snapshot_replies: snapshot_rx,
                replies: reply_tx,
                malformed: malformed_tx,
            });
            inputs.push(StrategyInput {
                events: event_rx,
                publish_marks: mark_rx,
            });
        }
        Rings {
            net: NetEnds {
                frames,
                commands: net_command_rx,
                statuses: net_status_tx,
            },
            decoders: decoder_ends,
            strategy: StrategyEnds { inputs },
            control: ControlEnds {
                net_commands: net_command_tx,
                net_statuses: net_status_rx,
                decoders: control_ends,
            },
        }
    }
}

/// The rings of a one-decoder pipeline, each end apart, for the stages' unit tests.
#[cfg(test)]
pub(super) struct OneDecoder {
    pub frames: FrameProducer,
    pub commands: Consumer<NetCommand>,
    pub statuses: Producer<NetStatus>,
    pub decoder: DecoderEnds,
    pub strategy: StrategyInput,
    pub control: DecoderControlEnds,
}

#[cfg(test)]
impl Rings {
    pub fn one(config: &RingsConfig) -> OneDecoder {
        let mut rings = Rings::new(config, 1);
        let (Some(frames), Some(decoder), Some(strategy), Some(control)) = (
            rings.net.frames.pop(),
            rings.decoders.pop(),
            rings.strategy.inputs.pop(),
            rings.control.decoders.pop(),
        ) else {
            unreachable!("one decoder's rings");
        };
        OneDecoder {
            frames,
            commands: rings.net.commands,
            statuses: rings.net.statuses,
            decoder,
            strategy,
            control,
        }
    }
}
