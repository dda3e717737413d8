//! The bridge: a bus consumer that publishes every event on NATS (`tickwire bridge nats`).
//!
//! Two threads. The **reader** (the caller's thread) reads the bus through
//! `tickwire_client::Client`, cuts each batch into messages by subject, numbers them (per-subject
//! sequences, `wire`) and offers each to a bounded queue with `try_send`: **the reader never
//! waits on NATS**. A full queue drops the message: the drop is counted, its sequences become a
//! hole every consumer sees, and a `Gap` event (`BridgeDrop`) for the instrument follows as soon
//! as the queue has room. An overrun of the bus (the appliance lapped the bridge) is published as
//! a `Gap` (`BusOverrun`) on the `*`/`*` gap subject. The **network** thread runs a tokio
//! current-thread runtime: it takes messages off the queue and publishes them with `async-nats`,
//! which reconnects across every server it was given (and those the cluster gossips), answers
//! directory requests, and, when configured, makes the JetStream stream that keeps the events for
//! replay.
//!
//! Why a queue of whole messages rather than of events: a message is numbered when it is made,
//! so a dropped one is an exact hole in its subject's sequence, whatever the consumer subscribed
//! to.
//!
//! **Resuming (issue 33).** With [`BridgeOptions::state`], the bridge keeps where it is in a
//! state file ([`BridgeState`]): the bus epoch, its stream id, the bus position (per partition) of the next event
//! to publish and every subject's next sequence. The reader puts a checkpoint into the queue
//! after a batch at most every [`CHECKPOINT_INTERVAL`] (and one when it stops); the network
//! thread writes it (a new file renamed over the old) once every message queued before it has
//! been flushed to the server. A restarted bridge that finds the same bus epoch in the file goes
//! on from that position with the same stream and sequences, so consumers see no new stream and
//! lose nothing; if the ring no longer holds that position, the first read's exact overrun is
//! published as a `BusOverrun` gap with the count. Messages published after the last checkpoint
//! (a bridge killed with `kill -9`) are published again with the same sequences, which
//! consumers skip as duplicates. A new bus epoch (the appliance restarted) starts a new stream.

use crate::wire::{self, MessageHeader, MAX_EVENTS_PER_MESSAGE};
use async_nats::{ServerAddr, Subject};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tickwire_bus::event::{
    Body, Event, EventHeader, EventKind, Gap, GapReason, InstrumentId, VenueId,
};
use tickwire_bus::{DirectoryEntry, SnapshotRequest, Start};
use tickwire_client::{Client, ClientError, Directory, Next};
use tokio::sync::mpsc::error::TrySendError;

/// Messages the queue in front of the network holds by default (at most 4 KiB each: 32 MiB).
pub const DEFAULT_QUEUE_MESSAGES: usize = 8192;

/// A JetStream stream that keeps the bridge's events for replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JetStreamOptions {
    /// The stream's name (JetStream allows no `.`, `*`, `>` or whitespace in it).
    pub stream: String,
    /// Events older than this are dropped by the server (0: kept until `max_bytes`).
    pub max_age: Duration,
    /// The stream's size limit in bytes; the oldest messages go first (-1: no limit).
    pub max_bytes: i64,
}

/// What the bridge is to do.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// The bus file to read.
    pub bus: PathBuf,
    /// How long to wait for the bus to appear at start.
    pub bus_wait: Duration,
    /// The NATS servers (`nats://host:port`); the client reconnects across them.
    pub servers: Vec<ServerAddr>,
    /// The appliance's name: the subjects' second token.
    pub appliance: String,
    /// Messages the queue in front of the network holds.
    pub queue_messages: usize,
    pub jetstream: Option<JetStreamOptions>,
    /// The longest pause between reconnection attempts (they start at 50 ms and double).
    pub max_reconnect_delay: Duration,
    /// Where the bridge keeps its position, to resume from it after a restart (see the module
    /// doc); `None`: a restarted bridge starts a new stream at the bus's latest event.
    pub state: Option<PathBuf>,
}

impl BridgeOptions {
    pub fn new(bus: PathBuf, servers: Vec<ServerAddr>, appliance: String) -> BridgeOptions {
        BridgeOptions {
            bus,
            bus_wait: Duration::from_secs(10),
            servers,
            appliance,
            queue_messages: DEFAULT_QUEUE_MESSAGES,
            jetstream: None,
            max_reconnect_delay: Duration::from_secs(1),
            state: None,
        }
    }
}

/// How often at most the reader asks for its position to be written to the state file.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// Where a bridge is, as its state file keeps it: what a restarted bridge resumes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BridgeState {
    /// The bus's epoch.
    pub appliance_epoch: u64,
    /// The stream id the bridge's messages carry.
    pub stream: u64,
    /// The bus position of the next event to publish, per partition (one per decoder of the
    /// appliance): `position 123456` in the file for one partition, `position 10,20,30` for
    /// three.
    pub positions: Vec<u64>,
    /// The bridge's count of bus events (its `BusOverrun` gaps' numbering).
    pub counted: u64,
    /// Every subject's next sequence: `(venue_id, instrument_id, kind byte, next sequence)`.
    pub sequences: Vec<(VenueId, InstrumentId, u8, u64)>,
}

const STATE_MAGIC: &str = "tickwire-nats-bridge-state 1";

impl BridgeState {
    /// The file's text.
    pub fn to_text(&self) -> String {
        let positions: Vec<String> = self.positions.iter().map(u64::to_string).collect();
        let mut text = format!(
            "{STATE_MAGIC}\nepoch {}\nstream {}\nposition {}\ncounted {}\n",
            self.appliance_epoch,
            self.stream,
            positions.join(","),
            self.counted
        );
        for (venue_id, instrument_id, kind, next) in &self.sequences {
            text.push_str(&format!(
                "subject {venue_id} {instrument_id} {kind} {next}\n"
            ));
        }
        text
    }

    /// Reads a state file's text; `None` for anything that is not one whole.
    pub fn from_text(text: &str) -> Option<BridgeState> {
        let mut lines = text.lines();
        if lines.next()? != STATE_MAGIC {
            return None;
        }
        let mut field = |name: &str| -> Option<&str> {
            let line = lines.next()?;
            line.strip_prefix(name)?.strip_prefix(' ')
        };
        let number = |text: &str| -> Option<u64> { text.parse().ok() };
        let appliance_epoch = number(field("epoch")?)?;
        let stream = number(field("stream")?)?;
        let positions = field("position")?
            .split(',')
            .map(number)
            .collect::<Option<Vec<u64>>>()?;
        if positions.len() > tickwire_bus::layout::MAX_PARTITIONS as usize {
            return None;
        }
        let counted = number(field("counted")?)?;
        let mut state = BridgeState {
            appliance_epoch,
            stream,
            positions,
            counted,
            sequences: Vec::new(),
        };
        for line in lines {
            let mut words = line.strip_prefix("subject ")?.split(' ');
            let venue_id = words.next()?.parse().ok()?;
            let instrument_id = words.next()?.parse().ok()?;
            let kind: u8 = words.next()?.parse().ok()?;
            EventKind::from_u8(kind)?;
            let next = words.next()?.parse().ok()?;
            if words.next().is_some() || next == 0 {
                return None;
            }
            state.sequences.push((venue_id, instrument_id, kind, next));
        }
        Some(state)
    }

    /// The state at `path`: `Ok(None)` when there is none, an error (for a warning) when it
    /// cannot be read or is no state file.
    pub fn load(path: &std::path::Path) -> Result<Option<BridgeState>, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => BridgeState::from_text(&text)
                .map(Some)
                .ok_or_else(|| format!("{} is not a bridge state file; ignored", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(format!("cannot read {}: {error}", path.display())),
        }
    }

    /// Writes the state to `path` whole: a new file beside it, synced, renamed over it.
    pub fn store(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".new");
        let temporary = PathBuf::from(temporary);
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(self.to_text().as_bytes())?;
        file.sync_data()?;
        std::fs::rename(&temporary, path)
    }
}

/// Parses `nats://a:4222,nats://b:4222` (a URL without a scheme is `nats://`).
pub fn parse_servers(urls: &str) -> Result<Vec<ServerAddr>, String> {
    let servers: Vec<ServerAddr> = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| {
            url.parse::<ServerAddr>()
                .map_err(|error| format!("{url}: not a NATS server URL ({error})"))
        })
        .collect::<Result<_, _>>()?;
    if servers.is_empty() {
        return Err("no NATS server URL given".into());
    }
    Ok(servers)
}

/// What the bridge did, readable from any thread while it runs.
#[derive(Debug, Default)]
pub struct BridgeCounters {
    /// Events read from the bus.
    pub events_read: AtomicU64,
    /// Messages offered to the queue and taken.
    pub messages_queued: AtomicU64,
    /// Messages the full queue refused, and the events in them.
    pub messages_dropped: AtomicU64,
    pub events_dropped: AtomicU64,
    /// Bus overruns, and the events they lost.
    pub bus_overruns: AtomicU64,
    pub bus_missed: AtomicU64,
    /// Messages handed to the NATS client, and those it refused.
    pub messages_published: AtomicU64,
    pub publish_errors: AtomicU64,
    /// Gap events published for drops and overruns.
    pub gaps_published: AtomicU64,
    /// Connections made to a server (the first and every reconnection), and losses.
    pub connects: AtomicU64,
    pub disconnects: AtomicU64,
    /// Directory requests answered.
    pub directory_replies: AtomicU64,
    /// Positions written to the state file.
    pub checkpoints: AtomicU64,
    /// Whether this bridge resumed a stream from its state file.
    pub resumed: AtomicBool,
    /// Whether the JetStream stream exists (made or found).
    pub jetstream_ready: AtomicBool,
}

impl BridgeCounters {
    fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the bus: {0}")]
    Client(#[from] ClientError),
    #[error("the network thread: {0}")]
    Network(String),
}

/// One numbered message on its way to the network, or a checkpoint to write once every message
/// before it is on the server.
enum Outgoing {
    Message { subject: Subject, payload: Bytes },
    Checkpoint(BridgeState),
}

/// The directory as the network thread answers it: entries in `(venue_id, instrument_id)`
/// order, so that pages are stable.
#[derive(Default)]
struct Published {
    entries: Vec<DirectoryEntry>,
    appliance_epoch: u64,
    stream: u64,
}

type Key = (VenueId, InstrumentId, EventKind);

/// A subject's name and the next sequence it gives.
struct SubjectState {
    subject: Subject,
    next_sequence: u64,
}

/// Sequences dropped on a subject, owed a `BridgeDrop` gap.
struct OwedGap {
    key: Key,
    first: u64,
    end: u64,
}

/// The reader's side: subjects, sequences, the queue's sending end.
struct Reader {
    appliance: String,
    queue: tokio::sync::mpsc::Sender<Outgoing>,
    subjects: HashMap<Key, SubjectState>,
    owed: Vec<OwedGap>,
    appliance_epoch: u64,
    stream: u64,
    /// Events of the bus counted so far, read or missed (the `BusOverrun` gaps' numbering).
    bus_position: u64,
    counters: Arc<BridgeCounters>,
    published: Arc<Mutex<Arc<Published>>>,
    directory_len: usize,
    /// Reused buffers: the batch's groups and one message's bytes.
    groups: Vec<(Key, Vec<Event>)>,
    encoded: Vec<u8>,
    /// Subjects' next sequences from a state file, used when each subject is first named.
    restored: HashMap<Key, u64>,
    /// Whether checkpoints are made (a state file is configured), and when the last was.
    checkpoints: bool,
    last_checkpoint: Option<std::time::Instant>,
}

/// A stream id: the time in ns, above the last one, never 0.
fn next_stream(previous: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    now.max(previous + 1).max(1)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

impl Reader {
    fn subject(&mut self, directory: &Directory, key: Key) -> &mut SubjectState {
        let appliance = &self.appliance;
        let restored = &self.restored;
        self.subjects.entry(key).or_insert_with(|| {
            let (venue_id, instrument_id, kind) = key;
            let venue = if venue_id == SnapshotRequest::ALL_VENUES {
                "*"
            } else {
                directory.venue(venue_id).unwrap_or("?")
            };
            let symbol = if instrument_id == SnapshotRequest::ALL_INSTRUMENTS {
                "*"
            } else {
                directory
                    .get(venue_id, instrument_id)
                    .map_or("?", |entry| entry.symbol.as_str())
            };
            SubjectState {
                subject: Subject::from(wire::event_subject(appliance, venue, symbol, kind)),
                next_sequence: restored.get(&key).copied().unwrap_or(1),
            }
        })
    }

    /// Numbers `events` (one subject's, at most a message's worth) and offers them to the
    /// queue; a refused message is counted and owed a gap.
    fn offer(
        &mut self,
        directory: &Directory,
        key: Key,
        events: &[Event],
    ) -> Result<(), BridgeError> {
        let (appliance_epoch, stream) = (self.appliance_epoch, self.stream);
        let state = self.subject(directory, key);
        let sequence = state.next_sequence;
        state.next_sequence += events.len() as u64;
        let subject = state.subject.clone();
        wire::encode_message(
            MessageHeader {
                appliance_epoch,
                stream,
                sequence,
            },
            events,
            &mut self.encoded,
        );
        let outgoing = Outgoing::Message {
            subject,
            payload: Bytes::copy_from_slice(&self.encoded),
        };
        match self.queue.try_send(outgoing) {
            Ok(()) => {
                BridgeCounters::add(&self.counters.messages_queued, 1);
                Ok(())
            }
            Err(TrySendError::Full(_)) => {
                BridgeCounters::add(&self.counters.messages_dropped, 1);
                BridgeCounters::add(&self.counters.events_dropped, events.len() as u64);
                let end = sequence + events.len() as u64;
                match self
                    .owed
                    .iter_mut()
                    .find(|owed| owed.key == key && owed.end == sequence)
                {
                    Some(owed) => owed.end = end,
                    None => self.owed.push(OwedGap {
                        key,
                        first: sequence,
                        end,
                    }),
                }
                Ok(())
            }
            Err(TrySendError::Closed(_)) => {
                Err(BridgeError::Network("the network thread stopped".into()))
            }
        }
    }

    /// Offers a gap event; says whether the queue took it (a refused gap keeps its sequence
    /// unspent and is offered again later).
    fn offer_gap(
        &mut self,
        directory: &Directory,
        key: Key,
        gap: Event,
    ) -> Result<bool, BridgeError> {
        let (appliance_epoch, stream) = (self.appliance_epoch, self.stream);
        let state = self.subject(directory, (key.0, key.1, EventKind::Gap));
        let sequence = state.next_sequence;
        let subject = state.subject.clone();
        wire::encode_message(
            MessageHeader {
                appliance_epoch,
                stream,
                sequence,
            },
            std::slice::from_ref(&gap),
            &mut self.encoded,
        );
        let outgoing = Outgoing::Message {
            subject,
            payload: Bytes::copy_from_slice(&self.encoded),
        };
        match self.queue.try_send(outgoing) {
            Ok(()) => {
                self.subject(directory, (key.0, key.1, EventKind::Gap))
                    .next_sequence += 1;
                BridgeCounters::add(&self.counters.messages_queued, 1);
                BridgeCounters::add(&self.counters.gaps_published, 1);
                Ok(true)
            }
            Err(TrySendError::Full(_)) => Ok(false),
            Err(TrySendError::Closed(_)) => {
                Err(BridgeError::Network("the network thread stopped".into()))
            }
        }
    }

    /// Offers the gaps owed for drops, oldest first, while the queue takes them.
    fn pay_owed_gaps(&mut self, directory: &Directory) -> Result<(), BridgeError> {
        while let Some(owed) = self.owed.first() {
            let (key, first, end) = (owed.key, owed.first, owed.end);
            let gap = gap_event(
                key.0,
                key.1,
                key.2 as u8 as u64,
                Gap::new(GapReason::BridgeDrop, first, end),
            );
            if !self.offer_gap(directory, key, gap)? {
                return Ok(());
            }
            self.owed.remove(0);
        }
        Ok(())
    }

    fn events(&mut self, directory: &Directory, events: &[Event]) -> Result<(), BridgeError> {
        BridgeCounters::add(&self.counters.events_read, events.len() as u64);
        self.bus_position += events.len() as u64;
        self.refresh_directory(directory);
        self.pay_owed_gaps(directory)?;
        // Group by subject, keeping each subject's order; groups are few (one per instrument
        // and kind in the batch), so a linear search beats hashing.
        let mut groups = std::mem::take(&mut self.groups);
        let mut used = 0;
        for event in events {
            let key = (
                event.header.venue_id,
                event.header.instrument_id,
                event.kind(),
            );
            match groups[..used].iter_mut().find(|(group, _)| *group == key) {
                Some((_, group)) => group.push(*event),
                None => {
                    if used == groups.len() {
                        groups.push((key, Vec::with_capacity(16)));
                    }
                    groups[used].0 = key;
                    groups[used].1.clear();
                    groups[used].1.push(*event);
                    used += 1;
                }
            }
        }
        let mut result = Ok(());
        for (key, group) in &groups[..used] {
            for chunk in group.chunks(MAX_EVENTS_PER_MESSAGE) {
                if let Err(error) = self.offer(directory, *key, chunk) {
                    result = Err(error);
                }
            }
        }
        // Keep a bounded number of group buffers between batches.
        groups.truncate(64);
        self.groups = groups;
        result
    }

    fn overrun(&mut self, directory: &Directory, missed: u64) -> Result<(), BridgeError> {
        BridgeCounters::add(&self.counters.bus_overruns, 1);
        BridgeCounters::add(&self.counters.bus_missed, missed);
        let from = self.bus_position;
        self.bus_position += missed;
        let key = (
            SnapshotRequest::ALL_VENUES,
            SnapshotRequest::ALL_INSTRUMENTS,
            EventKind::Gap,
        );
        let gap = gap_event(
            key.0,
            key.1,
            0,
            Gap::new(GapReason::BusOverrun, from, from + missed),
        );
        if !self.offer_gap(directory, key, gap)? {
            // The queue is full too: the gap's own loss is not numbered (it kept its sequence),
            // so it is counted as a drop of one event.
            BridgeCounters::add(&self.counters.messages_dropped, 1);
            BridgeCounters::add(&self.counters.events_dropped, 1);
        }
        Ok(())
    }

    /// The state a restarted bridge would resume from, after everything offered so far.
    fn state(&self, positions: Vec<u64>) -> BridgeState {
        let mut sequences: HashMap<Key, u64> = self.restored.clone();
        for (key, subject) in &self.subjects {
            sequences.insert(*key, subject.next_sequence);
        }
        let mut sequences: Vec<(VenueId, InstrumentId, u8, u64)> = sequences
            .into_iter()
            .map(|((venue_id, instrument_id, kind), next)| {
                (venue_id, instrument_id, kind as u8, next)
            })
            .collect();
        sequences.sort_unstable();
        BridgeState {
            appliance_epoch: self.appliance_epoch,
            stream: self.stream,
            positions,
            counted: self.bus_position,
            sequences,
        }
    }

    /// Queues a checkpoint at the bus reader's positions (the next event to publish in each
    /// partition) when one is due (or `force`), unless gaps are still owed (their sequences are
    /// not spent yet). A full queue skips it; the next batch tries again.
    fn checkpoint(&mut self, bus: &tickwire_bus::BusReader, force: bool) {
        if !self.checkpoints || !self.owed.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        if !force
            && self
                .last_checkpoint
                .is_some_and(|last| now.duration_since(last) < CHECKPOINT_INTERVAL)
        {
            return;
        }
        let state = self.state(bus.positions());
        let sent = if force {
            self.queue
                .blocking_send(Outgoing::Checkpoint(state))
                .is_ok()
        } else {
            self.queue.try_send(Outgoing::Checkpoint(state)).is_ok()
        };
        if sent {
            self.last_checkpoint = Some(now);
        }
    }

    fn new_epoch(&mut self, epoch: u64, directory: &Directory) {
        self.appliance_epoch = epoch;
        self.stream = next_stream(self.stream);
        self.subjects.clear();
        self.restored.clear();
        self.owed.clear();
        self.bus_position = 0;
        self.directory_len = usize::MAX;
        self.refresh_directory(directory);
    }

    /// Hands the network thread a new copy of the directory when it grew (or the epoch
    /// changed).
    fn refresh_directory(&mut self, directory: &Directory) {
        if directory.len() == self.directory_len {
            return;
        }
        self.directory_len = directory.len();
        let mut entries: Vec<DirectoryEntry> = directory.iter().cloned().collect();
        entries.sort_by_key(|entry| (entry.venue_id, entry.instrument_id));
        let published = Arc::new(Published {
            entries,
            appliance_epoch: self.appliance_epoch,
            stream: self.stream,
        });
        if let Ok(mut slot) = self.published.lock() {
            *slot = published;
        }
    }
}

fn gap_event(venue_id: VenueId, instrument_id: InstrumentId, venue_seq: u64, gap: Gap) -> Event {
    let now = now_ns();
    Event::new(
        EventHeader {
            exchange_ts_ns: now,
            recv_ts_ns: now,
            venue_seq,
            instrument_id,
            venue_id,
            kind: EventKind::Gap,
            flags: tickwire_bus::event::flags::LAST,
        },
        Body::Gap(gap),
    )
}

/// A running bridge's network thread and what the reader shares with it.
struct Network {
    thread: std::thread::JoinHandle<()>,
}

fn start_network(
    options: &BridgeOptions,
    receiver: tokio::sync::mpsc::Receiver<Outgoing>,
    counters: Arc<BridgeCounters>,
    published: Arc<Mutex<Arc<Published>>>,
) -> Result<Network, BridgeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| BridgeError::Network(format!("no tokio runtime: {error}")))?;
    let servers = options.servers.clone();
    let appliance = options.appliance.clone();
    let jetstream = options.jetstream.clone();
    let max_delay = options.max_reconnect_delay;
    let state = options.state.clone();
    let thread = std::thread::Builder::new()
        .name("tickwire-nats".into())
        .spawn(move || {
            runtime.block_on(network(
                servers, appliance, jetstream, max_delay, receiver, counters, published, state,
            ))
        })
        .map_err(|error| BridgeError::Network(format!("no thread: {error}")))?;
    Ok(Network { thread })
}

/// The options every tickwire NATS connection uses: retry from the start (a bridge may start
/// before the servers), reconnect forever, 50 ms doubling to `max_delay` between attempts.
pub(crate) fn connect_options(
    max_delay: Duration,
    counters: Option<Arc<BridgeCounters>>,
) -> async_nats::ConnectOptions {
    async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(move |attempts| {
            let doublings = attempts.min(16) as u32;
            (Duration::from_millis(50) * 2u32.pow(doublings.saturating_sub(1))).min(max_delay)
        })
        .event_callback(move |event| {
            let counters = counters.clone();
            async move {
                if let Some(counters) = &counters {
                    match event {
                        async_nats::Event::Connected => BridgeCounters::add(&counters.connects, 1),
                        async_nats::Event::Disconnected => {
                            BridgeCounters::add(&counters.disconnects, 1)
                        }
                        _ => {}
                    }
                }
                tracing::info!(%event, "nats");
            }
        })
}

#[allow(clippy::too_many_arguments)]
async fn network(
    servers: Vec<ServerAddr>,
    appliance: String,
    jetstream: Option<JetStreamOptions>,
    max_delay: Duration,
    mut receiver: tokio::sync::mpsc::Receiver<Outgoing>,
    counters: Arc<BridgeCounters>,
    published: Arc<Mutex<Arc<Published>>>,
    state_path: Option<PathBuf>,
) {
    let mut state_error_logged = false;
    let options = connect_options(max_delay, Some(Arc::clone(&counters)))
        .name(format!("tickwire-bridge {appliance}"));
    let client = match async_nats::connect_with_options(servers, options).await {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "nats: cannot connect");
            return;
        }
    };
    if let Some(jetstream) = jetstream {
        let client = client.clone();
        let counters = Arc::clone(&counters);
        let subjects = format!("{}.{}.*.*.*", wire::ROOT, wire::escape(&appliance));
        tokio::spawn(async move { make_stream(client, jetstream, subjects, counters).await });
    }
    let mut requests = match client.subscribe(wire::directory_subject(&appliance)).await {
        Ok(requests) => Some(requests),
        Err(error) => {
            tracing::error!(%error, "nats: cannot serve the directory");
            None
        }
    };
    let mut batch = Vec::with_capacity(256);
    loop {
        tokio::select! {
            taken = receiver.recv_many(&mut batch, 256) => {
                if taken == 0 {
                    break;
                }
                for outgoing in batch.drain(..) {
                    match outgoing {
                        Outgoing::Message { subject, payload } => {
                            match client.publish(subject, payload).await {
                                Ok(()) => BridgeCounters::add(&counters.messages_published, 1),
                                Err(_) => BridgeCounters::add(&counters.publish_errors, 1),
                            }
                        }
                        Outgoing::Checkpoint(state) => {
                            let Some(path) = &state_path else { continue };
                            // Only what the server has: a checkpoint behind an unflushed
                            // message would let a restart skip it.
                            let flushed = tokio::time::timeout(Duration::from_secs(2), client.flush())
                                .await
                                .is_ok_and(|flushed| flushed.is_ok());
                            if !flushed {
                                continue;
                            }
                            match state.store(path) {
                                Ok(()) => BridgeCounters::add(&counters.checkpoints, 1),
                                Err(error) if !state_error_logged => {
                                    state_error_logged = true;
                                    tracing::warn!(path = %path.display(), %error, "nats: cannot write the bridge's state; a restarted bridge will start a new stream");
                                }
                                Err(_) => {}
                            }
                        }
                    }
                }
            }
            request = async { match &mut requests {
                Some(requests) => requests.next().await,
                None => std::future::pending().await,
            } } => {
                let Some(request) = request else {
                    requests = None;
                    continue;
                };
                let (Some(reply), Some(first)) =
                    (request.reply, wire::decode_directory_request(&request.payload))
                else {
                    continue;
                };
                let directory = published.lock().map(|slot| Arc::clone(&slot)).unwrap_or_default();
                let payload = wire::encode_directory_reply(
                    &directory.entries,
                    first,
                    directory.appliance_epoch,
                    directory.stream,
                );
                if client.publish(reply, payload.into()).await.is_ok() {
                    BridgeCounters::add(&counters.directory_replies, 1);
                }
            }
        }
    }
    // Stopping: what was queued has been handed to the client; give it a bounded time to reach
    // the server.
    let _ = tokio::time::timeout(Duration::from_secs(2), client.flush()).await;
}

/// Makes (or finds) the JetStream stream, retrying while no server is reachable.
async fn make_stream(
    client: async_nats::Client,
    options: JetStreamOptions,
    subjects: String,
    counters: Arc<BridgeCounters>,
) {
    let context = async_nats::jetstream::new(client);
    let config = async_nats::jetstream::stream::Config {
        name: options.stream.clone(),
        subjects: vec![subjects],
        max_age: options.max_age,
        max_bytes: options.max_bytes,
        storage: async_nats::jetstream::stream::StorageType::File,
        ..Default::default()
    };
    let mut delay = Duration::from_millis(100);
    loop {
        match context.get_or_create_stream(config.clone()).await {
            Ok(_) => {
                counters.jetstream_ready.store(true, Ordering::Relaxed);
                tracing::info!(stream = %options.stream, "nats: JetStream stream ready");
                return;
            }
            Err(error) => {
                tracing::warn!(%error, stream = %options.stream, "nats: JetStream stream not made yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Runs the bridge on this thread until `stop` is set: attaches to the bus (waiting up to
/// `bus_wait`), starts the network thread, and publishes until told to stop; then lets the
/// network thread send what is queued (bounded). `counters` can be read meanwhile.
pub fn run(
    options: &BridgeOptions,
    stop: &AtomicBool,
    counters: Arc<BridgeCounters>,
) -> Result<(), BridgeError> {
    let mut client = Client::options()
        .start(Start::Latest)
        .batch(1024)
        .attach_wait(&options.bus, options.bus_wait)?;
    // A state file of this bus's epoch: go on from where the last bridge stopped, with its
    // stream and sequences.
    let saved = match options.state.as_deref().map(BridgeState::load) {
        Some(Ok(saved)) => saved,
        Some(Err(why)) => {
            tracing::warn!("nats: {why}");
            None
        }
        None => None,
    };
    let resume = match saved {
        Some(saved) if saved.appliance_epoch == client.epoch() => {
            let mut resumed = Client::options()
                .start(Start::At(saved.positions.first().copied().unwrap_or(0)))
                .batch(1024)
                .attach(&options.bus)?;
            // Every partition from where the last bridge stopped in it.
            resumed.seek(&saved.positions);
            if resumed.epoch() == saved.appliance_epoch {
                tracing::info!(
                    positions = ?saved.positions,
                    behind = resumed.lag(),
                    "nats: resuming the last bridge's stream"
                );
                client = resumed;
                counters.resumed.store(true, Ordering::Relaxed);
                Some(saved)
            } else {
                None
            }
        }
        Some(saved) => {
            tracing::info!(
                saved_epoch = saved.appliance_epoch,
                epoch = client.epoch(),
                "nats: the bus is a new one since the last bridge; a new stream starts"
            );
            None
        }
        None => None,
    };
    let (sender, receiver) = tokio::sync::mpsc::channel(options.queue_messages.max(1));
    let published = Arc::new(Mutex::new(Arc::new(Published::default())));
    let network = start_network(
        options,
        receiver,
        Arc::clone(&counters),
        Arc::clone(&published),
    )?;
    let mut reader = Reader {
        appliance: options.appliance.clone(),
        queue: sender,
        subjects: HashMap::new(),
        owed: Vec::new(),
        appliance_epoch: client.epoch(),
        stream: resume
            .as_ref()
            .map_or_else(|| next_stream(0), |saved| saved.stream),
        bus_position: resume.as_ref().map_or(0, |saved| saved.counted),
        counters,
        published,
        directory_len: usize::MAX,
        groups: Vec::new(),
        encoded: Vec::with_capacity(wire::HEADER_BYTES + 64 * MAX_EVENTS_PER_MESSAGE),
        restored: resume
            .as_ref()
            .map(|saved| {
                saved
                    .sequences
                    .iter()
                    .filter_map(|&(venue_id, instrument_id, kind, next)| {
                        Some(((venue_id, instrument_id, EventKind::from_u8(kind)?), next))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        checkpoints: options.state.is_some(),
        last_checkpoint: None,
    };
    reader.refresh_directory(client.directory());
    let result = read_loop(&mut client, &mut reader, stop);
    drop(reader);
    if network.thread.join().is_err() {
        return Err(BridgeError::Network("the network thread panicked".into()));
    }
    result
}

fn read_loop(
    client: &mut Client,
    reader: &mut Reader,
    stop: &AtomicBool,
) -> Result<(), BridgeError> {
    while !stop.load(Ordering::Relaxed) {
        match client.wait(Duration::from_millis(50)) {
            Ok(Next::Events(events)) => {
                reader.events(events.directory(), events.as_slice())?;
                reader.checkpoint(client.reader(), false);
            }
            Ok(Next::Overrun { missed, .. }) => {
                reader.overrun(client.directory(), missed)?;
            }
            Ok(Next::NewEpoch { epoch }) => {
                tracing::info!(epoch, "bus: a new appliance epoch; a new stream starts");
                reader.new_epoch(epoch, client.directory());
            }
            Ok(Next::Closed) => tracing::info!("bus: the appliance stopped"),
            Ok(Next::Removed) => tracing::info!("bus: the bus file was removed"),
            Ok(Next::Idle) => reader.pay_owed_gaps(client.directory())?,
            Err(error) => tracing::warn!(%error, "bus"),
        }
    }
    // Everything read was offered: the next bridge starts after it.
    if client.lag() == client.reader().lag() {
        reader.checkpoint(client.reader(), true);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_reads_back_and_anything_else_is_refused_not_trusted() {
        let state = BridgeState {
            appliance_epoch: 77,
            stream: 1_700_000_000_000_000_001,
            positions: vec![123_456],
            counted: 123_000,
            sequences: vec![
                (0, 1, EventKind::Trade as u8, 42),
                (0, u32::MAX, EventKind::Gap as u8, 7),
            ],
        };
        assert_eq!(
            BridgeState::from_text(&state.to_text()),
            Some(state.clone())
        );
        // A bus of three partitions keeps each one's position.
        let three = BridgeState {
            positions: vec![10, 0, 7],
            ..state.clone()
        };
        assert!(three.to_text().contains("\nposition 10,0,7\n"));
        assert_eq!(BridgeState::from_text(&three.to_text()), Some(three));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        assert_eq!(BridgeState::load(&path), Ok(None), "no file: no state");
        state.store(&path).unwrap();
        assert_eq!(BridgeState::load(&path), Ok(Some(state.clone())));
        let text = state.to_text();
        // Cut anywhere, a wrong kind byte, a sequence of 0, an extra word, garbage: refused.
        for bad in [
            text[..text.len() / 2].to_owned(),
            text.replace(" 42\n", " 0\n"),
            text.replace(&format!(" {} 42", EventKind::Trade as u8), " 250 42"),
            text.replace(" 42\n", " 42 9\n"),
            text.replace("position 123456", "position -1"),
            text.replace("position 123456", "position 1,"),
            text.replace(
                "position 123456",
                &format!("position {}", ["1"; 32].join(",")),
            ),
            "\u{0}\u{ff}garbage".to_owned(),
        ] {
            assert_eq!(BridgeState::from_text(&bad), None, "{bad:?}");
        }
        std::fs::write(&path, "no state").unwrap();
        assert!(BridgeState::load(&path)
            .unwrap_err()
            .contains("not a bridge state file"));
    }
}
