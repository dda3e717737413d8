//! The rings between the stages and the control thread: which ring connects which two ends, what
//! it carries and how many it holds. [`Rings::new`] makes them all and hands each stage its ends
//! ([`NetEnds`], [`DecoderEnds`], [`StrategyEnds`]) and the control thread the others
//! ([`ControlEnds`]), so that a stage's constructor takes exactly the rings it touches.
//!
//! | ring | from | to | carries | capacity |
//! |---|---|---|---|---|
//! | frames | network | decoder | received messages, in place ([`crate::ring::bytes`]) | `rings.frame_ring_bytes` |
//! | events | decoder | strategy | [`Event`] | `rings.event_ring_slots` |
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
//! [`super::Runtime::event_ring`]); the control rings are sized so that only a wedged control
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
    pub decoder: DecoderEnds,
    pub strategy: StrategyEnds,
    pub control: ControlEnds,
}

/// The network stage's ends.
pub(super) struct NetEnds {
    pub frames: FrameProducer,
    pub commands: Consumer<NetCommand>,
    pub statuses: Producer<NetStatus>,
}

/// The decoder stage's ends.
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

/// The strategy stage's ends.
pub(super) struct StrategyEnds {
    pub events: Consumer<Event>,
    pub publish_marks: Consumer<PublishMark>,
}

/// The control thread's ends, and the refusal counters of the two data rings.
pub(super) struct ControlEnds {
    pub net_commands: Producer<NetCommand>,
    pub net_statuses: Consumer<NetStatus>,
    pub decoder_commands: Producer<DecoderCommand>,
    pub snapshot_requests: Consumer<SnapshotRequest>,
    pub snapshot_replies: Producer<Box<SnapshotReply>>,
    pub replies: Consumer<VenueReply>,
    pub malformed: Consumer<MalformedSample>,
    pub frame_ring: RingStats,
    pub event_ring: RingStats,
}

impl Rings {
    pub fn new(config: &RingsConfig) -> Rings {
        let (frame_tx, frame_rx) = ring::frame_ring(config.frame_ring_bytes);
        let (event_tx, event_rx) = ring::ring::<Event>(config.event_ring_slots);
        // A mark per publication; the event ring holds at most this many publications of one
        // event each, so the mark ring never fills before the event ring does.
        let (mark_tx, mark_rx) =
            ring::ring::<PublishMark>(config.event_ring_slots.next_power_of_two());
        let (net_command_tx, net_command_rx) = ring::ring::<NetCommand>(NET_COMMAND_SLOTS);
        let (net_status_tx, net_status_rx) = ring::ring::<NetStatus>(NET_STATUS_SLOTS);
        let (decoder_command_tx, decoder_command_rx) =
            ring::ring::<DecoderCommand>(DECODER_COMMAND_SLOTS);
        let (request_tx, request_rx) = ring::ring::<SnapshotRequest>(SNAPSHOT_REQUEST_SLOTS);
        let (snapshot_tx, snapshot_rx) = ring::ring::<Box<SnapshotReply>>(SNAPSHOT_REPLY_SLOTS);
        let (reply_tx, reply_rx) = ring::ring::<VenueReply>(VENUE_REPLY_SLOTS);
        let (malformed_tx, malformed_rx) = ring::ring::<MalformedSample>(MALFORMED_SLOTS);
        let control = ControlEnds {
            net_commands: net_command_tx,
            net_statuses: net_status_rx,
            decoder_commands: decoder_command_tx,
            snapshot_requests: request_rx,
            snapshot_replies: snapshot_tx,
            replies: reply_rx,
            malformed: malformed_rx,
            frame_ring: frame_rx.stats(),
            event_ring: event_rx.stats(),
        };
        Rings {
            net: NetEnds {
                frames: frame_tx,
                commands: net_command_rx,
                statuses: net_status_tx,
            },
            decoder: DecoderEnds {
                frames: frame_rx,
                events: event_tx,
                publish_marks: mark_tx,
                commands: decoder_command_rx,
                snapshot_requests: request_tx,
                snapshot_replies: snapshot_rx,
                replies: reply_tx,
                malformed: malformed_tx,
            },
            strategy: StrategyEnds {
                events: event_rx,
                publish_marks: mark_rx,
            },
            control,
        }
    }
}
