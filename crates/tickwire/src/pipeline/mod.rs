//! The pipeline: the three hot stages, the rings between them, and the [`Runtime`] that wires
//! them, starts the hot threads the config plans and is the control thread's handle on them.
//!
//! ```text
//!              NetCommand                 DecoderCommand, SnapshotReply
//!   control ─────────────┐              ┌──────────────────────┐
//!      ▲                 ▼              ▼                      │
//!      │  NetStatus  ┌─────────┐ frames ┌─────────┐ events ┌──────────┐
//!      └─────────────│ network │───────▶│ decoder │───────▶│ strategy │──▶ Strategy::on_events
//!      ▲             └─────────┘  (one  └─────────┘ marks  └──────────┘    (&[Event], in place)
//!      │  SnapshotRequest, VenueReply,  ring │ ×N, each with
//!      └─────── MalformedSample ─────── per  ┘ its own rings
//!                                     decoder)
//! ```
//!
//! | stage | file | built by | does |
//! |---|---|---|---|
//! | network | `net_stage.rs` | `NetStage::new` | sockets, TLS, WebSocket: frames into the frame ring; the control thread's stream commands |
//! | decoder | `decoder_stage.rs` | `DecoderStage::new` | frames through each connection's venue `Feed` into the event ring; snapshot and reply relays |
//! | strategy | `strategy_stage.rs` | `StrategyStage::new` | latency, quote board and market per event, read in place; the user's `Strategy` |
//!
//! `rings.rs` makes every ring, says which ends it connects and how many it holds (a table in
//! its module doc), and hands each constructor its own ends.
//!
//! There are N decoder stages (`[[threads.decoders]]`; one with `[threads.decoder]`), each
//! with its own frame ring, event ring and control rings. Each venue belongs to one decoder
//! (`LoadedConfig::venue_decoders`): the network stage writes its connections' frames into that
//! decoder's ring, the control thread sends its commands and snapshots there, and the strategy
//! stage reads every decoder's event ring in turn.
//!
//! [`Runtime::start`] only wires: it builds the rings, then each stage, then starts the hot
//! threads the plan describes ([`crate::thread::plan`]), last stage first, so that each
//! producer holds its consumer's [`Wakeup`]. Each hot thread runs the stages the plan gave it, in
//! pipeline order, in one poll loop: poll every stage, count a heartbeat, and wait as its wait
//! strategy says when no stage had work. A stage's `start` runs on its own thread before the
//! loop (the network stage builds its transport there, because io_uring's SINGLE_ISSUER binds
//! the ring to the thread that made it).

pub mod book_requests;
mod decoder_stage;
mod net_stage;
mod rings;
mod strategy_stage;

pub use decoder_stage::{DecoderCommand, DecoderLoadReaders};
pub use net_stage::{NetCommand, NetStatus, NetStatusKind};

use crate::clock::Clock;
use crate::config::{LoadedConfig, PrivilegeErrorPolicy, ThreadsConfig};
use crate::event::{Event, InstrumentId, VenueId};
use crate::metrics::{self, CounterReader, CounterSum, LatencyCollector};
use crate::net::engine::StreamSpec;
use crate::net::ConnId;
use crate::ring::{self, RingStats};
use crate::strategy::board::QuoteBoard;
use crate::strategy::stamps::Stamp;
use crate::strategy::Strategy;
use crate::thread::{self, HotThread, Task, ThreadError, Wakeup};
use crate::venue::feed::{Feed, MalformedSample, SnapshotReply, SnapshotRequest, VenueReply};
use decoder_stage::{DecoderStage, Vacant};
use net_stage::NetStage;
use rings::Rings;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use strategy_stage::StrategyStage;

/// Events the decoder writes before publishing them as one batch, and the most the strategy
/// stage hands the strategy at once.
const EVENT_BATCH: usize = 64;
/// Batches a stage handles per poll round at most, while there are full ones.
const BATCHES_PER_POLL: usize = 16;
/// Highest latency the stage histograms track: 10 s (anything above is clamped and counted).
const HIGHEST_LATENCY_NS: u64 = 10_000_000_000;

/// One stage's state on its thread. `poll` does a bounded amount of work and says whether it
/// found any.
trait StagePoll: Send {
    /// Called once on the stage's own thread before the first poll.
    fn start(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// The stage's hot work: what a frame or an event waits on.
    fn poll(&mut self) -> bool;
    /// The stage's other work (control replies, timers, bookkeeping), called after every stage
    /// of the thread has polled, so that on a fused thread none of it stands between a frame
    /// and the strategy. Returns whether it did any.
    fn housekeep(&mut self) -> bool {
        false
    }
    /// Called when the thread is about to stop.
    fn finish(&mut self) {}
}

/// What a caller adds to the config to start an appliance.
#[derive(Default)]
pub struct RuntimeOptions {
    /// By venue id (the venue's index in the config): the feed that decodes it.
    pub feeds: Vec<Box<dyn Feed>>,
    /// By connection slot: the venue id whose feed decodes the slot's frames (`VenueId::MAX`
    /// for none).
    pub conn_venues: Vec<VenueId>,
    /// Instrument ids the quote board holds (ids at or above are not shown).
    pub board_instruments: usize,
    /// The simulator's send stamps, for send-to-strategy latency (the demo and benchmarks).
    pub stamps: Option<ring::Consumer<Stamp>>,
    /// User code called for every event on the strategy thread.
    pub strategy: Option<Box<dyn Strategy>>,
    /// The shared-memory event bus's writers, if there is a bus: one per decoder, writer `k`
    /// for decoder `k`'s partition (each decoder stage writes every event it decodes to its
    /// own partition, so every ring of the bus has one writer).
    pub bus: Vec<tickwire_bus::BusWriter>,
    /// The budget and queue for the books the bus's readers ask for, and each venue's
    /// instruments (`[bus] snapshot_levels_per_s`, `snapshot_queue_books`).
    pub book_requests: book_requests::BookRequestConfig,
    /// Wakes the control thread after a stage hands it work (a network status, a venue's
    /// reply, a snapshot request), so it acts at once rather than at its next tick.
    pub control_wakeup: Option<thread::ControlWakeup>,
}

/// Several rings' refusal counters read as one (one ring per decoder), and each apart.
#[derive(Clone)]
pub struct RingGroup {
    rings: Vec<RingStats>,
}

impl RingGroup {
    /// Refusals of every ring together.
    pub fn overflows(&self) -> u64 {
        self.rings.iter().map(RingStats::overflows).sum()
    }

    /// Reservations that could never fit, every ring together (frame rings only).
    pub fn oversize(&self) -> u64 {
        self.rings.iter().map(RingStats::oversize).sum()
    }

    /// The highest fill any of the rings reached.
    pub fn high_water(&self) -> u64 {
        self.rings
            .iter()
            .map(RingStats::high_water)
            .max()
            .unwrap_or(0)
    }

    /// By decoder index.
    pub fn rings(&self) -> &[RingStats] {
        &self.rings
    }
}

/// What the control thread reads about one decoder.
pub struct DecoderView {
    /// The thread that runs it (`tw-decoder-1`, or `tw-net` for a decoder fused into it).
    pub thread: String,
    /// The venues it decodes, by venue id.
    pub venues: Vec<VenueId>,
    /// Events, publications (batches) and busy time.
    pub load: DecoderLoadReaders,
    pub frames_undecoded: CounterReader,
    /// Its frame ring (network to it) and event ring (it to the strategy).
    pub frame_ring: RingStats,
    pub event_ring: RingStats,
}

/// The control thread's ends with one decoder, and the thread that runs it.
struct DecoderLink {
    commands: ring::Producer<DecoderCommand>,
    snapshot_requests: ring::Consumer<SnapshotRequest>,
    snapshot_replies: ring::Producer<Box<SnapshotReply>>,
    replies: ring::Consumer<VenueReply>,
    malformed: ring::Consumer<MalformedSample>,
    wakeup: Option<Wakeup>,
}

/// What the control thread can read about a running appliance.
pub struct Runtime {
    stop: Arc<AtomicBool>,
    threads: Vec<HotThread<()>>,
    /// Per thread: its name and a counter of poll-loop rounds (the watchdog's heartbeat).
    pub heartbeats: Vec<(String, CounterReader)>,
    /// By decoder index.
    pub decoders: Vec<DecoderView>,
    /// By venue id: the index of the decoder that decodes it.
    pub venue_decoders: Vec<usize>,
    /// Frames no feed took, every decoder together.
    pub frames_undecoded: CounterSum,
    pub events_received: CounterReader,
    /// Gap events the strategy received.
    pub gaps: CounterReader,
    pub wire_to_strategy: LatencyCollector,
    /// Receive to decoded (the decoder stage's batch done), per message, every decoder's.
    pub receive_to_decoded: LatencyCollector,
    /// Decoded (the decoder published the event) to the strategy taking it, per event.
    pub decoded_to_strategy: LatencyCollector,
    /// Per venue: messages and bytes its feed was handed.
    pub venue_traffic: Vec<(CounterReader, CounterReader)>,
    /// Per venue: the events written for the strategy, by kind.
    pub venue_events: Vec<crate::venue::feed::VenueEvents>,
    /// The books the bus's readers asked for: queued, deferred, refused, served (and their
    /// levels).
    pub bus_book_requests: book_requests::BookRequestReaders,
    /// Simulator send to strategy, per quote, when stamps were wired in.
    pub send_to_strategy: Option<LatencyCollector>,
    /// Quotes that found no send stamp.
    pub unstamped: Option<CounterReader>,
    /// The latest quote per instrument.
    pub board: Arc<QuoteBoard>,
    /// Refusals of the net-to-decoder frame rings (a decoder fell behind).
    pub frame_ring: RingGroup,
    /// Refusals of the decoder-to-strategy event rings (the strategy fell behind).
    pub event_ring: RingGroup,
    /// The network backend in use and why, for the log.
    pub net_backend: String,
    /// Per slot: the network thread's last-read times (`Runtime::last_read_ns`).
    last_read: Arc<[AtomicU64]>,
    commands: ring::Producer<NetCommand>,
    statuses: ring::Consumer<NetStatus>,
    net_wakeup: Option<Wakeup>,
    /// By decoder index.
    links: Vec<DecoderLink>,
    /// Per hot thread: whether its last poll round found no work (for draining at shutdown).
    idle: Vec<Arc<AtomicBool>>,
}

impl Runtime {
    /// Wires the rings and starts the hot threads the config plans, last stage first so each
    /// producer knows how to wake its consumer.
    pub fn start(
        config: &LoadedConfig,
        clock: Clock,
        options: RuntimeOptions,
    ) -> Result<Runtime, RuntimeError> {
        let appliance = &config.appliance;
        let count = appliance.threads.decoder_count();
        let venues = options.feeds.len();
        let assigned = config.venue_decoders();
        let venue_decoders: Vec<usize> = (0..venues)
            .map(|venue| assigned.get(venue).copied().unwrap_or(0).min(count - 1))
            .collect();
        if !options.bus.is_empty() && options.bus.len() != count {
            return Err(RuntimeError::BusPartitions {
                partitions: options.bus.len(),
                decoders: count,
            });
        }
        // Each connection slot's frames go to its venue's decoder (slots of no venue: decoder 0,
        // which counts them as undecoded).
        let routes: Vec<u8> = options
            .conn_venues
            .iter()
            .map(|&venue| {
                venue_decoders
                    .get(usize::from(venue))
                    .map_or(0, |&decoder| decoder as u8)
            })
            .collect();
        let mut rings = Rings::new(&appliance.rings, count);
        let (net, net_readers) = NetStage::new(
            &appliance.net,
            clock,
            rings.net,
            routes,
            options.control_wakeup.clone(),
        );
        // Every decoder's feeds are indexed by venue id: its own venues' feeds, a `Vacant` in
        // the place of every other.
        let mut feeds: Vec<Vec<Box<dyn Feed>>> =
            (0..count).map(|_| Vec::with_capacity(venues)).collect();
        for (venue, feed) in options.feeds.into_iter().enumerate() {
            let owner = venue_decoders[venue];
            for (decoder, list) in feeds.iter_mut().enumerate() {
                if decoder != owner {
                    list.push(Box::new(Vacant));
                }
            }
            feeds[owner].push(feed);
            // Keep every list in venue order: the owner's feed went last, where it belongs.
        }
        let mut bus = options.bus.into_iter();
        // The readers' budget for books is for all of them together: each decoder, which
        // writes the books of its own venues, gets an equal share.
        let book_request_share = book_requests::BookRequestConfig {
            levels_per_s: (options.book_requests.levels_per_s / count as u64).max(1),
            ..options.book_requests.clone()
        };
        let mut stages = Vec::with_capacity(count);
        let mut decoder_readers = Vec::with_capacity(count);
        for (decoder_feeds, ends) in feeds.into_iter().zip(rings.decoders.drain(..)) {
            let (stage, readers) = DecoderStage::new(
                clock,
                decoder_feeds,
                options.conn_venues.clone(),
                decoder_stage::DecoderBus {
                    writer: bus.next(),
                    book_requests: &book_request_share,
                },
                ends,
                options.control_wakeup.clone(),
                appliance.metrics.latency_digits,
            )?;
            stages.push(stage);
            decoder_readers.push(readers);
        }
        let (strategy, strategy_readers) = StrategyStage::new(
            clock,
            appliance.metrics.latency_digits,
            options.board_instruments,
            options.stamps,
            options.strategy,
            rings.strategy,
        )?;
        let hot = HotThreads::start(
            &appliance.threads,
            appliance.process.on_privilege_error,
            net,
            stages,
            strategy,
        )?;
        // Written by the network stage's `start`, which has run: `HotThreads::start` waits for
        // every thread's stages to start.
        let net_backend = net_readers
            .backend
            .lock()
            .map(|line| line.clone())
            .unwrap_or_default();
        let control = rings.control;
        // By venue, each from the decoder that decodes it.
        let mut traffic: Vec<Vec<Option<(CounterReader, CounterReader)>>> = Vec::new();
        let mut events: Vec<Vec<Option<crate::venue::feed::VenueEvents>>> = Vec::new();
        let mut receive_to_decoded: Option<LatencyCollector> = None;
        let mut book_requests = None;
        let mut views = Vec::with_capacity(count);
        let mut links = Vec::with_capacity(count);
        for (index, (readers, ends)) in decoder_readers
            .into_iter()
            .zip(control.decoders)
            .enumerate()
        {
            traffic.push(readers.venue_traffic.into_iter().map(Some).collect());
            events.push(readers.venue_events.into_iter().map(Some).collect());
            match receive_to_decoded.as_mut() {
                Some(collector) => collector.join(readers.receive_to_decoded),
                None => receive_to_decoded = Some(readers.receive_to_decoded),
            }
            // Each decoder serves the books of its own venues: their counts are summed.
            book_requests = Some(match book_requests.take() {
                None => readers.book_requests,
                Some(earlier) => {
                    book_requests::BookRequestReaders::join(earlier, readers.book_requests)
                }
            });
            views.push(DecoderView {
                thread: hot.decoder_threads.get(index).cloned().unwrap_or_default(),
                venues: (0..venues)
                    .filter(|&venue| venue_decoders[venue] == index)
                    .map(|venue| venue as VenueId)
                    .collect(),
                load: readers.load,
                frames_undecoded: readers.frames_undecoded,
                frame_ring: ends.frame_ring.clone(),
                event_ring: ends.event_ring.clone(),
            });
            links.push(DecoderLink {
                commands: ends.commands,
                snapshot_requests: ends.snapshot_requests,
                snapshot_replies: ends.snapshot_replies,
                replies: ends.replies,
                malformed: ends.malformed,
                wakeup: hot.decoder_wakeups.get(index).cloned().flatten(),
            });
        }
        let (Some(receive_to_decoded), Some(bus_book_requests)) =
            (receive_to_decoded, book_requests)
        else {
            unreachable!("a pipeline has at least one decoder");
        };
        let venue_traffic = (0..venues)
            .filter_map(|venue| traffic[venue_decoders[venue]][venue].take())
            .collect();
        let venue_events = (0..venues)
            .filter_map(|venue| events[venue_decoders[venue]][venue].take())
            .collect();
        Ok(Runtime {
            stop: hot.stop,
            threads: hot.threads,
            heartbeats: hot.heartbeats,
            frames_undecoded: CounterSum::new(
                views
                    .iter()
                    .map(|view| view.frames_undecoded.clone())
                    .collect(),
            ),
            frame_ring: RingGroup {
                rings: views.iter().map(|view| view.frame_ring.clone()).collect(),
            },
            event_ring: RingGroup {
                rings: views.iter().map(|view| view.event_ring.clone()).collect(),
            },
            decoders: views,
            venue_decoders,
            events_received: strategy_readers.events_received,
            gaps: strategy_readers.gaps,
            wire_to_strategy: strategy_readers.wire_to_strategy,
            receive_to_decoded,
            decoded_to_strategy: strategy_readers.decoded_to_strategy,
            venue_traffic,
            venue_events,
            bus_book_requests,
            send_to_strategy: strategy_readers.send_to_strategy,
            unstamped: strategy_readers.unstamped,
            board: strategy_readers.board,
            net_backend,
            last_read: net_readers.last_read,
            commands: control.net_commands,
            statuses: control.net_statuses,
            net_wakeup: hot.net_wakeup,
            links,
            idle: hot.idle,
        })
    }

    /// The decoder link of `venue` (decoder 0's for an id of no venue, such as a status of the
    /// whole appliance).
    fn link(&mut self, venue: VenueId) -> &mut DecoderLink {
        let decoder = self
            .venue_decoders
            .get(usize::from(venue))
            .copied()
            .unwrap_or(0);
        let index = if decoder < self.links.len() {
            decoder
        } else {
            0
        };
        &mut self.links[index]
    }

    /// The decoder index of `venue` (0 for an id of no venue).
    pub fn decoder_of(&self, venue: VenueId) -> usize {
        self.venue_decoders
            .get(usize::from(venue))
            .copied()
            .unwrap_or(0)
    }

    /// Snapshot requests the feeds made since the last call, every decoder's.
    pub fn take_snapshot_requests(&mut self) -> Vec<SnapshotRequest> {
        let mut out = Vec::new();
        for link in &mut self.links {
            while let Some(request) = link.snapshot_requests.try_pop() {
                out.push(request);
            }
        }
        out
    }

    /// Hands a snapshot (or its failure) to the decoder thread of its venue.
    pub fn deliver_snapshot(&mut self, reply: SnapshotReply) -> Result<(), RuntimeError> {
        let link = self.link(reply.venue);
        link.snapshot_replies
            .try_push(Box::new(reply))
            .map_err(|_| RuntimeError::CommandRingFull)?;
        if let Some(wakeup) = &link.wakeup {
            wakeup.wake();
        }
        Ok(())
    }

    /// Tells the decoder thread of `venue` that the connection carrying `instruments` dropped,
    /// so its feed emits gaps: through the network thread, which writes the notice into the
    /// connection's frame ring after every frame it wrote for it, so that the decoder takes the
    /// disconnect after the connection's last data, never before (a feed that resets its
    /// connection state would otherwise misread the frames still queued, or lose them).
    pub fn notify_disconnect(
        &mut self,
        venue: VenueId,
        conn: ConnId,
        instruments: Range<InstrumentId>,
    ) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Disconnected {
            conn,
            notice: crate::net::engine::DisconnectNotice { venue, instruments },
        })
    }

    /// Hands a status event to the decoder thread of its venue, which writes it in order with
    /// the venue's market events.
    pub fn send_status(&mut self, event: Event) -> Result<(), RuntimeError> {
        self.decoder_command(event.header.venue_id, DecoderCommand::Status(event))
    }

    /// Asks the decoder thread of `venue` to write the books of `instrument`
    /// (`ALL_INSTRUMENTS`: all of them) to the event bus, for its readers.
    pub fn emit_books(
        &mut self,
        venue: VenueId,
        instrument: InstrumentId,
    ) -> Result<(), RuntimeError> {
        self.decoder_command(venue, DecoderCommand::EmitBooks { venue, instrument })
    }

    fn decoder_command(
        &mut self,
        venue: VenueId,
        command: DecoderCommand,
    ) -> Result<(), RuntimeError> {
        let link = self.link(venue);
        link.commands
            .try_push(command)
            .map_err(|_| RuntimeError::CommandRingFull)?;
        if let Some(wakeup) = &link.wakeup {
            wakeup.wake();
        }
        Ok(())
    }

    /// Stalls decoder `decoder` for `duration` from when it takes the command: an artificial
    /// stall for tests and diagnostics (what a decoder held back does to the others' venues).
    pub fn hold_decoder(&mut self, decoder: usize, duration: Duration) -> Result<(), RuntimeError> {
        let link = self
            .links
            .get_mut(decoder)
            .ok_or(RuntimeError::NoSuchDecoder(decoder))?;
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        link.commands
            .try_push(DecoderCommand::Hold { ns })
            .map_err(|_| RuntimeError::CommandRingFull)?;
        if let Some(wakeup) = &link.wakeup {
            wakeup.wake();
        }
        Ok(())
    }

    /// Replies to the control thread's requests that the feeds relayed, every decoder's.
    pub fn take_replies(&mut self) -> Vec<VenueReply> {
        let mut out = Vec::new();
        for link in &mut self.links {
            while let Some(reply) = link.replies.try_pop() {
                out.push(reply);
            }
        }
        out
    }

    /// Malformed messages the feeds kept for logging (at most one per feed per second).
    pub fn take_malformed(&mut self) -> Vec<MalformedSample> {
        let mut out = Vec::new();
        for link in &mut self.links {
            while let Some(sample) = link.malformed.try_pop() {
                out.push(sample);
            }
        }
        out
    }

    /// Hands a prepared stream to the network thread (prepare it with `venue::subscribe_spec`
    /// on this, the control thread). `conn` must be below `net.max_connections`.
    pub fn open_stream(
        &mut self,
        conn: ConnId,
        generation: u32,
        spec: StreamSpec,
    ) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Open {
            conn,
            generation,
            spec: Box::new(spec),
        })
    }

    /// Hands a datagram venue's sockets to the network thread (`conn` below
    /// `net.max_connections`); its statuses come back like a stream's.
    pub fn open_datagrams(
        &mut self,
        conn: ConnId,
        generation: u32,
        spec: crate::net::udp::DatagramSpec,
    ) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::OpenDatagrams {
            conn,
            generation,
            spec: Box::new(spec),
        })
    }

    /// Sends one datagram (a re-request) on socket `line` of datagram slot `conn`.
    pub fn send_datagram(
        &mut self,
        conn: ConnId,
        line: crate::net::udp::DatagramLine,
        datagram: crate::net::udp::OutDatagram,
    ) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::SendDatagram {
            conn,
            line,
            datagram,
        })
    }

    /// Starts the WebSocket closing handshake on `conn`.
    pub fn close_stream(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Close { conn })
    }

    /// Drops `conn`'s socket at once.
    pub fn abort_stream(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Abort { conn })
    }

    /// Sends a text message on `conn`.
    pub fn send_text(&mut self, conn: ConnId, text: String) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Send { conn, text })
    }

    /// Sends a WebSocket ping on `conn` (RFC 6455 section 5.5.2, its payload the send time),
    /// for a venue whose heartbeat is the client's ping. A slot without an open WebSocket stream
    /// ignores it, so a ping racing a close fails nothing. The server's pong is never delivered
    /// as a message; it shows only as a read in [`Runtime::last_read_ns`].
    pub fn ping(&mut self, conn: ConnId) -> Result<(), RuntimeError> {
        self.net_command(NetCommand::Ping { conn })
    }

    /// When `conn` last read anything (data, pongs, TLS records): the receive timestamp of the
    /// network thread's latest completion on the slot, in ns since the epoch on the clock of
    /// frames' receive times; the time its stream was opened until it reads anything; 0 for a
    /// slot never opened or out of range. A lock-free load of a word the network thread stores.
    /// Meaningful once the slot's `Open` status arrived: before the network thread takes an
    /// `Open` command, the slot still shows its previous stream.
    pub fn last_read_ns(&self, conn: ConnId) -> u64 {
        self.last_read
            .get(conn as usize)
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    fn net_command(&mut self, command: NetCommand) -> Result<(), RuntimeError> {
        self.commands
            .try_push(command)
            .map_err(|_| RuntimeError::CommandRingFull)?;
        if let Some(wakeup) = &self.net_wakeup {
            wakeup.wake();
        }
        Ok(())
    }

    /// Waits until every hot thread has found no work twice in a row (the rings are drained),
    /// or `timeout` passes; returns whether they went idle.
    pub fn drain(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut quiet_rounds = 0;
        while std::time::Instant::now() < deadline {
            for thread in &self.threads {
                thread.wakeup.wake();
            }
            std::thread::sleep(Duration::from_millis(2));
            if self.idle.iter().all(|idle| idle.load(Ordering::Relaxed)) {
                quiet_rounds += 1;
                if quiet_rounds == 2 {
                    return true;
                }
            } else {
                quiet_rounds = 0;
            }
        }
        false
    }

    /// Stream state changes the network thread reported since the last call.
    pub fn take_statuses(&mut self) -> Vec<NetStatus> {
        let mut out = Vec::new();
        while let Some(status) = self.statuses.try_pop() {
            out.push(status);
        }
        out
    }

    /// Whether a stage handed the control thread work it has not taken yet: statuses, venue
    /// replies or snapshot requests (what `Session::wait` checks before it sleeps).
    pub fn has_control_work(&mut self) -> bool {
        !self.statuses.is_empty()
            || self
                .links
                .iter_mut()
                .any(|link| !link.replies.is_empty() || !link.snapshot_requests.is_empty())
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

/// The running hot threads and what the control thread keeps of them.
struct HotThreads {
    stop: Arc<AtomicBool>,
    threads: Vec<HotThread<()>>,
    /// Per thread, in plan order: its name and its heartbeat.
    heartbeats: Vec<(String, CounterReader)>,
    /// The thread whose first stage is the network stage, woken by a command.
    net_wakeup: Option<Wakeup>,
    /// By decoder index: the thread that runs it, woken by a command or a snapshot.
    decoder_wakeups: Vec<Option<Wakeup>>,
    /// By decoder index: the name of the thread that runs it.
    decoder_threads: Vec<String>,
    idle: Vec<Arc<AtomicBool>>,
}

impl HotThreads {
    /// Starts the threads `config` plans, each running its stages in one poll loop, from the
    /// last stage backwards; returns once every thread's stages have started, or stops those
    /// already running and returns why one could not.
    fn start(
        config: &ThreadsConfig,
        on_privilege_error: PrivilegeErrorPolicy,
        net: NetStage,
        decoders: Vec<DecoderStage>,
        strategy: StrategyStage,
    ) -> Result<HotThreads, RuntimeError> {
        let count = decoders.len();
        let plans = thread::plan(config, on_privilege_error);
        // Every decoder wakes the strategy's thread once it has started (a decoder on that
        // same thread needs no wake-up): a slot they share, filled when it starts.
        let strategy_wakeup = Arc::new(OnceLock::new());
        let strategy_plan = plans
            .iter()
            .position(|plan| plan.stages.contains(&Task::Strategy));
        let mut decoders: Vec<Option<DecoderStage>> = decoders
            .into_iter()
            .enumerate()
            .map(|(index, mut decoder)| {
                let same_thread = strategy_plan
                    .is_some_and(|at| plans[at].stages.contains(&Task::Decoder(index)));
                if !same_thread {
                    decoder.wake_strategy_with(strategy_wakeup.clone());
                }
                Some(decoder)
            })
            .collect();
        let mut net = Some(net);
        let mut strategy = Some(strategy);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut heartbeats = Vec::new();
        let mut net_wakeup = None;
        let mut decoder_wakeups: Vec<Option<Wakeup>> = vec![None; count];
        let mut decoder_threads = vec![String::new(); count];
        // By decoder index: the wake-up the network stage gives it after frames (none for a
        // decoder on the network thread itself).
        let mut frames_wakeups: Vec<Option<Wakeup>> = vec![None; count];
        let mut idle = Vec::new();
        // Start the plan's threads from the last stage backwards: the network thread, which
        // wakes the decoders, starts last.
        for plan in plans.iter().rev() {
            let mut stages: Vec<Box<dyn StagePoll>> = Vec::new();
            for task in &plan.stages {
                match *task {
                    Task::Net => {
                        if let Some(mut net) = net.take() {
                            net.wake_decoders_with(frames_wakeups.clone());
                            stages.push(Box::new(net));
                        }
                    }
                    Task::Decoder(index) => {
                        if let Some(decoder) = decoders.get_mut(index).and_then(Option::take) {
                            stages.push(Box::new(decoder));
                        }
                    }
                    Task::Strategy => {
                        if let Some(strategy) = strategy.take() {
                            stages.push(Box::new(strategy));
                        }
                    }
                }
            }
            let (mut heartbeat, heartbeat_reader) = metrics::counter();
            heartbeats.push((plan.spec.name.clone(), heartbeat_reader));
            let thread_stop = stop.clone();
            let thread_idle = Arc::new(AtomicBool::new(false));
            idle.push(thread_idle.clone());
            let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
            let hot = thread::spawn(&plan.spec, move |waiter| {
                for stage in stages.iter_mut() {
                    if let Err(error) = stage.start() {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                }
                let _ = ready_tx.send(Ok(()));
                while !thread_stop.load(Ordering::Relaxed) {
                    let mut worked = false;
                    for stage in stages.iter_mut() {
                        worked |= stage.poll();
                    }
                    for stage in stages.iter_mut() {
                        worked |= stage.housekeep();
                    }
                    heartbeat.increment();
                    thread_idle.store(!worked, Ordering::Relaxed);
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
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    let _ = hot.join();
                    stop_all(&stop, threads);
                    return Err(RuntimeError::Stage {
                        thread: plan.spec.name.clone(),
                        error,
                    });
                }
                Err(_) => {
                    stop_all(&stop, threads);
                    return Err(RuntimeError::Stage {
                        thread: plan.spec.name.clone(),
                        error: "the thread ended during start-up".to_owned(),
                    });
                }
            }
            let on_net = plan.stages.contains(&Task::Net);
            for task in &plan.stages {
                match *task {
                    Task::Net => net_wakeup = Some(hot.wakeup.clone()),
                    Task::Decoder(index) => {
                        if let Some(slot) = decoder_wakeups.get_mut(index) {
                            *slot = Some(hot.wakeup.clone());
                        }
                        if let Some(slot) = decoder_threads.get_mut(index) {
                            slot.clone_from(&plan.spec.name);
                        }
                        if !on_net {
                            if let Some(slot) = frames_wakeups.get_mut(index) {
                                *slot = Some(hot.wakeup.clone());
                            }
                        }
                    }
                    // The decoders on other threads wake it from now on.
                    Task::Strategy => {
                        let _ = strategy_wakeup.set(hot.wakeup.clone());
                    }
                }
            }
            tracing::info!(
                thread = %hot.name,
                stages = ?plan.stages,
                core = ?hot.pinned_core,
                realtime = hot.realtime,
                wait = ?plan.spec.wait,
                "hot thread started"
            );
            threads.push(hot);
        }
        heartbeats.reverse();
        Ok(HotThreads {
            stop,
            threads,
            heartbeats,
            net_wakeup,
            decoder_wakeups,
            decoder_threads,
            idle,
        })
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
    #[error("thread `{thread}` could not start its stages: {error}")]
    Stage { thread: String, error: String },
    #[error("a ring from the control thread to a hot thread is full")]
    CommandRingFull,
    #[error("the event bus has {partitions} partitions for {decoders} decoders; it needs one per decoder")]
    BusPartitions { partitions: usize, decoders: usize },
    #[error("there is no decoder {0}")]
    NoSuchDecoder(usize),
}
