//! [`NatsClient`]: the events of one or more bridges, read on any host, with the bus client's
//! surface: [`NatsClient::poll`] and [`NatsClient::wait`] return `tickwire_client::Next`.
//!
//! What each [`Next`] means here:
//!
//! - [`Next::Events`]: the next events, each subject's in order, none twice. Named by
//!   [`Events::name`](tickwire_client::Events::name) as on the bus.
//! - [`Next::Overrun`]: `missed` events are lost for good, counted exactly from the per-subject
//!   sequence numbers (`wire`): a server lost with messages in flight, this client's queue full,
//!   the bridge's queue full. The events after the hole follow on the next poll. Loss at the end
//!   of a subject's stream shows when its next message comes.
//! - [`Next::NewEpoch`]: an appliance's bridge started a new stream (the appliance or the bridge
//!   restarted); `epoch` is the appliance's bus epoch. Its subjects start again from 1, and
//!   events missing at its start follow as an overrun.
//! - [`Next::Closed`]: the connection to the NATS servers was lost (reported once per loss);
//!   the client reconnects across the servers by itself, and a hole that the loss made is
//!   reported as an overrun when the events flow again.
//! - [`Next::Idle`]: nothing new. `Removed` is never returned.
//!
//! **Venue ids are this client's own.** Several appliances number their venues from 0, so the
//! client gives each `(appliance, venue id)` it meets a local venue id, rewrites the events'
//! `venue_id` to it and keeps a [`Directory`] under those ids: [`NatsClient::appliance`] says
//! which appliance a local venue id is. Events about every venue (`venue_id` 65535) keep it.
//! Names come from the subjects themselves (so the first event is named), and the venue symbol
//! from the bridge's directory service, asked once per appliance and stream.

use crate::bridge::connect_options;
use crate::wire::{self, EventSubject, MessageHeader};
use async_nats::ServerAddr;
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};
use tickwire_bus::event::{Event, VenueId};
use tickwire_bus::{DirectoryEntry, SnapshotRequest};
use tickwire_client::{Directory, Events, Next};

/// Messages the queue between the network thread and the reader holds by default.
pub const DEFAULT_QUEUE_MESSAGES: usize = 65536;
/// Events one poll hands out at most, unless [`NatsOptions::batch`] says otherwise.
pub const DEFAULT_BATCH: usize = 1024;

/// How a [`NatsClient`] connects and what it takes.
#[derive(Clone, Debug)]
pub struct NatsOptions {
    pub servers: Vec<ServerAddr>,
    /// Subjects to subscribe to, wildcards allowed (`tickwire.>`, `tickwire.*.binance-futures.>`).
    pub subjects: Vec<String>,
    pub batch: usize,
    pub queue_messages: usize,
    pub max_reconnect_delay: Duration,
    /// Read from a JetStream stream (from `start` on, then live) instead of a core subscription.
    pub replay: Option<Replay>,
}

/// A JetStream stream to replay (see [`NatsOptions::replay`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    pub stream: String,
    pub start: ReplayStart,
}

/// Where a replay starts in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayStart {
    /// The stream's first message still held.
    All,
    /// The first message stored at or after this time (ns since the Unix epoch).
    TimeNs(u64),
    /// This stream sequence.
    Sequence(u64),
}

impl std::str::FromStr for ReplayStart {
    type Err = String;

    /// `all`, an RFC 3339 time, or nanoseconds since the Unix epoch (`tickwire tail --since`).
    fn from_str(text: &str) -> Result<ReplayStart, String> {
        if text == "all" {
            return Ok(ReplayStart::All);
        }
        if let Ok(ns) = text.parse::<u64>() {
            return Ok(ReplayStart::TimeNs(ns));
        }
        let time =
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .map_err(|error| format!("not all, an RFC 3339 time or nanoseconds: {error}"))?;
        u64::try_from(time.unix_timestamp_nanos())
            .map(ReplayStart::TimeNs)
            .map_err(|_| "a time before 1970".to_owned())
    }
}

impl NatsOptions {
    pub fn new(servers: Vec<ServerAddr>, subjects: Vec<String>) -> NatsOptions {
        NatsOptions {
            servers,
            subjects,
            batch: DEFAULT_BATCH,
            queue_messages: DEFAULT_QUEUE_MESSAGES,
            max_reconnect_delay: Duration::from_secs(1),
            replay: None,
        }
    }

    /// Reads the subjects from JetStream stream `stream`, from `start` on and then live, with
    /// the same decoding and continuity checks as a core subscription. A replay waits for a
    /// full queue instead of dropping: the stream holds the messages.
    pub fn replay(mut self, stream: impl Into<String>, start: ReplayStart) -> NatsOptions {
        self.replay = Some(Replay {
            stream: stream.into(),
            start,
        });
        self
    }
}

/// What a NATS client has seen since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatsCounters {
    pub events_read: u64,
    pub messages: u64,
    /// Overruns reported, and the events they said were lost.
    pub overruns: u64,
    pub missed: u64,
    /// Events that came again (a sequence already seen) and were not handed out.
    pub duplicates: u64,
    /// Messages refused: not a tickwire subject or message (`wire::WireError`).
    pub malformed: u64,
    pub new_streams: u64,
    pub disconnects: u64,
    pub directory_replies: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("no tokio runtime or thread: {0}")]
    Start(std::io::Error),
    #[error("the network thread stopped")]
    Stopped,
}

/// From the network thread to the reader.
enum Incoming {
    Message { subject: String, payload: Bytes },
    Directory { appliance: String, payload: Bytes },
    Disconnected,
}

/// A subject's continuity (in its appliance's current stream).
struct SubjectTrack {
    appliance: String,
    next_sequence: u64,
}

/// What the client knows of one appliance.
struct Appliance {
    stream: u64,
    /// Remote venue id -> local venue id.
    venues: HashMap<VenueId, VenueId>,
    /// This client saw the stream start (it knew the one before), so every subject of it is
    /// numbered from 1 here.
    seen_start: bool,
}

/// What a step found, before it is lent out as a [`Next`].
enum Step {
    Events(usize),
    Overrun(u64),
    NewEpoch(u64),
    Closed,
    Idle,
}

/// A consumer of tickwire subjects on NATS. See the module doc.
pub struct NatsClient {
    incoming: Receiver<Incoming>,
    /// Appliance names whose directory to ask for; dropping it stops the network thread.
    asks: tokio::sync::mpsc::UnboundedSender<String>,
    thread: Option<std::thread::JoinHandle<()>>,
    batch: usize,
    buffer: Vec<Event>,
    /// Events at the buffer's start not handed out yet (after an overrun was reported).
    pending: usize,
    /// A loss to report before the pending events (at a new stream's start).
    pending_overrun: Option<u64>,
    /// A message read but not taken into the current batch (it starts with a hole).
    deferred: Option<Incoming>,
    subjects: HashMap<String, SubjectTrack>,
    appliances: HashMap<String, Appliance>,
    /// Local venue id -> (appliance, remote venue id).
    local_venues: Vec<(String, VenueId)>,
    directory: Directory,
    counters: NatsCounters,
    decoded: Vec<Event>,
}

impl NatsClient {
    /// Connects (in the background: a server that is not up yet is retried) and subscribes.
    pub fn connect(options: NatsOptions) -> Result<NatsClient, NatsError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(NatsError::Start)?;
        let (sender, incoming) = std::sync::mpsc::sync_channel(options.queue_messages.max(1));
        let (asks, ask_receiver) = tokio::sync::mpsc::unbounded_channel();
        let servers = options.servers.clone();
        let subjects = options.subjects.clone();
        let max_delay = options.max_reconnect_delay;
        let replay = options.replay.clone();
        let thread = std::thread::Builder::new()
            .name("tickwire-nats-client".into())
            .spawn(move || {
                runtime.block_on(network(
                    servers,
                    subjects,
                    replay,
                    max_delay,
                    sender,
                    ask_receiver,
                ))
            })
            .map_err(NatsError::Start)?;
        Ok(NatsClient::new(incoming, asks, Some(thread), options.batch))
    }

    /// A client reading `incoming` (the network thread's end, or a test's).
    fn new(
        incoming: Receiver<Incoming>,
        asks: tokio::sync::mpsc::UnboundedSender<String>,
        thread: Option<std::thread::JoinHandle<()>>,
        batch: usize,
    ) -> NatsClient {
        let mut directory = Directory::default();
        directory.insert(DirectoryEntry {
            instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
            venue_id: SnapshotRequest::ALL_VENUES,
            venue: "*".into(),
            symbol: "*".into(),
            venue_symbol: "*".into(),
        });
        NatsClient {
            incoming,
            asks,
            thread,
            batch: batch.max(MAX_MESSAGE_EVENTS),
            buffer: Vec::with_capacity(batch.max(MAX_MESSAGE_EVENTS) * 2),
            pending: 0,
            pending_overrun: None,
            deferred: None,
            subjects: HashMap::new(),
            appliances: HashMap::new(),
            local_venues: Vec::new(),
            directory,
            counters: NatsCounters::default(),
            decoded: Vec::with_capacity(MAX_MESSAGE_EVENTS),
        }
    }

    pub fn counters(&self) -> NatsCounters {
        self.counters
    }

    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The appliance a local venue id belongs to, and its venue id there.
    pub fn appliance(&self, venue_id: VenueId) -> Option<(&str, VenueId)> {
        self.local_venues
            .get(usize::from(venue_id))
            .map(|(name, remote)| (name.as_str(), *remote))
    }

    /// Events received and not handed out yet (in this client's queue).
    pub fn lag(&self) -> usize {
        self.pending
    }

    /// What happened next, without waiting.
    pub fn poll(&mut self) -> Result<Next<'_>, NatsError> {
        let step = self.step(None)?;
        Ok(self.view(step))
    }

    /// Like [`NatsClient::poll`], but blocks up to `timeout` for something other than `Idle`.
    pub fn wait(&mut self, timeout: Duration) -> Result<Next<'_>, NatsError> {
        let step = self.step(Some(Instant::now() + timeout))?;
        Ok(self.view(step))
    }

    fn view(&self, step: Step) -> Next<'_> {
        match step {
            Step::Events(count) => {
                Next::Events(Events::new(&self.buffer[..count], &self.directory, None))
            }
            Step::Overrun(missed) => Next::Overrun {
                missed,
                partition: None,
            },
            Step::NewEpoch(epoch) => Next::NewEpoch { epoch },
            Step::Closed => Next::Closed,
            Step::Idle => Next::Idle,
        }
    }

    fn next_incoming(
        &mut self,
        deadline: Option<Instant>,
        block: bool,
    ) -> Result<Option<Incoming>, NatsError> {
        if let Some(incoming) = self.deferred.take() {
            return Ok(Some(incoming));
        }
        let received = match deadline {
            Some(deadline) if block => {
                let timeout = deadline.saturating_duration_since(Instant::now());
                match self.incoming.recv_timeout(timeout) {
                    Ok(incoming) => Ok(incoming),
                    Err(RecvTimeoutError::Timeout) => return Ok(None),
                    Err(RecvTimeoutError::Disconnected) => Err(()),
                }
            }
            _ => match self.incoming.try_recv() {
                Ok(incoming) => Ok(incoming),
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => Err(()),
            },
        };
        received.map(Some).map_err(|()| NatsError::Stopped)
    }

    fn step(&mut self, deadline: Option<Instant>) -> Result<Step, NatsError> {
        if let Some(missed) = self.pending_overrun.take() {
            self.counters.overruns += 1;
            self.counters.missed += missed;
            return Ok(Step::Overrun(missed));
        }
        if self.pending > 0 {
            let count = std::mem::take(&mut self.pending);
            self.counters.events_read += count as u64;
            return Ok(Step::Events(count));
        }
        self.buffer.clear();
        loop {
            // Block only while nothing is gathered yet.
            let block = self.buffer.is_empty();
            let Some(incoming) = self.next_incoming(deadline, block)? else {
                break;
            };
            match incoming {
                Incoming::Disconnected => {
                    self.counters.disconnects += 1;
                    if self.buffer.is_empty() {
                        return Ok(Step::Closed);
                    }
                    self.deferred = Some(Incoming::Disconnected);
                    break;
                }
                Incoming::Directory { appliance, payload } => {
                    self.directory_reply(&appliance, &payload);
                }
                Incoming::Message { subject, payload } => {
                    self.counters.messages += 1;
                    let Some((names, header)) = self.classify(&subject, &payload) else {
                        self.counters.malformed += 1;
                        continue;
                    };
                    let verdict = self.verdict(&subject, &names, header);
                    let breaks = matches!(verdict, Verdict::Hole(_) | Verdict::NewStream(_));
                    if breaks && !self.buffer.is_empty() {
                        // The events gathered so far go out first; this message is read again
                        // on the next step, which reports what it breaks.
                        self.counters.messages -= 1;
                        self.deferred = Some(Incoming::Message { subject, payload });
                        break;
                    }
                    self.commit(&subject, &names, header, &verdict);
                    match verdict {
                        Verdict::Hole(missed) => {
                            self.counters.overruns += 1;
                            self.counters.missed += missed;
                            self.pending = self.buffer.len();
                            return Ok(Step::Overrun(missed));
                        }
                        Verdict::NewStream(missed) => {
                            self.counters.new_streams += 1;
                            self.pending = self.buffer.len();
                            // The loss at the new stream's start is reported next, before its
                            // events.
                            self.pending_overrun = (missed > 0).then_some(missed);
                            return Ok(Step::NewEpoch(header.appliance_epoch));
                        }
                        Verdict::InOrder | Verdict::Skip(_) => {}
                    }
                }
            }
            if self.buffer.len() >= self.batch {
                break;
            }
        }
        if self.buffer.is_empty() {
            return Ok(Step::Idle);
        }
        let count = self.buffer.len();
        self.counters.events_read += count as u64;
        Ok(Step::Events(count))
    }

    /// Reads a message's subject and bytes; its events are left in `self.decoded`.
    fn classify(&mut self, subject: &str, payload: &[u8]) -> Option<(EventSubject, MessageHeader)> {
        let names = wire::parse_event_subject(subject)?;
        self.decoded.clear();
        let header = wire::decode_message(payload, &mut self.decoded).ok()?;
        Some((names, header))
    }

    /// What a message means for its subject's continuity; changes nothing.
    fn verdict(&self, subject: &str, names: &EventSubject, header: MessageHeader) -> Verdict {
        let count = self.decoded.len() as u64;
        let expected = match self.appliances.get(&names.appliance) {
            // First contact: the stream is joined wherever it is.
            None => return Verdict::InOrder,
            Some(known) if header.stream > known.stream => {
                return Verdict::NewStream(header.sequence.saturating_sub(1))
            }
            // A message of a stream already left behind.
            Some(known) if header.stream < known.stream => return Verdict::Skip(count),
            Some(known) => match self.subjects.get(subject) {
                Some(track) => track.next_sequence,
                // A stream this client saw start numbers every subject from 1.
                None if known.seen_start => 1,
                None => return Verdict::InOrder,
            },
        };
        if header.sequence > expected {
            Verdict::Hole(header.sequence - expected)
        } else if header.sequence < expected {
            Verdict::Skip((expected - header.sequence).min(count))
        } else {
            Verdict::InOrder
        }
    }

    /// Takes a message: continuity, names, the events (less those already seen) into the
    /// buffer with local venue ids.
    fn commit(
        &mut self,
        subject: &str,
        names: &EventSubject,
        header: MessageHeader,
        verdict: &Verdict,
    ) {
        let count = self.decoded.len() as u64;
        let mut ask = false;
        let appliance = self
            .appliances
            .entry(names.appliance.clone())
            .or_insert_with(|| {
                ask = true;
                Appliance {
                    stream: header.stream,
                    venues: HashMap::new(),
                    seen_start: false,
                }
            });
        if matches!(verdict, Verdict::NewStream(_)) {
            appliance.stream = header.stream;
            appliance.venues.clear();
            appliance.seen_start = true;
            ask = true;
            let name = &names.appliance;
            self.subjects.retain(|_, track| track.appliance != *name);
        }
        let skip = match verdict {
            Verdict::Skip(skip) => *skip,
            Verdict::InOrder | Verdict::Hole(_) | Verdict::NewStream(_) => 0,
        };
        self.counters.duplicates += skip;
        if header.stream == appliance.stream {
            // Saturating: a hostile publisher may send any sequence, and nothing from the network may
            // panic the process.
            let next = header.sequence.saturating_add(count);
            let track = self
                .subjects
                .entry(subject.to_owned())
                .or_insert_with(|| SubjectTrack {
                    appliance: names.appliance.clone(),
                    next_sequence: next,
                });
            track.next_sequence = track.next_sequence.max(next);
        }
        if skip >= count {
            return;
        }
        for index in skip as usize..self.decoded.len() {
            let mut event = self.decoded[index];
            event.header.venue_id = self.local_venue(&names.appliance, event.header.venue_id);
            let (venue_id, instrument_id) = (event.header.venue_id, event.header.instrument_id);
            if venue_id != SnapshotRequest::ALL_VENUES
                && instrument_id != SnapshotRequest::ALL_INSTRUMENTS
                && self.directory.get(venue_id, instrument_id).is_none()
            {
                self.directory.insert(DirectoryEntry {
                    instrument_id,
                    venue_id,
                    venue: names.venue.clone(),
                    symbol: names.symbol.clone(),
                    venue_symbol: String::new(),
                });
            }
            self.buffer.push(event);
        }
        if ask {
            self.ask_directory(&names.appliance);
        }
    }

    /// The local venue id of an appliance's venue, given on first sight.
    fn local_venue(&mut self, appliance: &str, remote: VenueId) -> VenueId {
        if remote == SnapshotRequest::ALL_VENUES {
            return remote;
        }
        let Some(known) = self.appliances.get_mut(appliance) else {
            return remote;
        };
        if let Some(&local) = known.venues.get(&remote) {
            return local;
        }
        // Ids run out after 65535 (appliance, venue) pairs: the last ones share 65534.
        let local = self
            .local_venues
            .len()
            .min(usize::from(SnapshotRequest::ALL_VENUES - 1)) as VenueId;
        if self.local_venues.len() < usize::from(SnapshotRequest::ALL_VENUES - 1) {
            self.local_venues.push((appliance.to_owned(), remote));
        }
        known.venues.insert(remote, local);
        local
    }

    fn ask_directory(&mut self, appliance: &str) {
        // Once per appliance and stream; a request that goes unanswered (no bridge serves the
        // directory) leaves the names the subjects gave.
        let _ = self.asks.send(appliance.to_owned());
    }

    /// Folds a directory reply in: the venue symbols, and instruments not seen yet.
    fn directory_reply(&mut self, appliance: &str, payload: &[u8]) {
        let Ok(reply) = wire::decode_directory_reply(payload) else {
            self.counters.malformed += 1;
            return;
        };
        self.counters.directory_replies += 1;
        let current = self
            .appliances
            .get(appliance)
            .is_some_and(|known| known.stream == reply.stream);
        if !current {
            return;
        }
        for mut entry in reply.entries {
            entry.venue_id = self.local_venue(appliance, entry.venue_id);
            self.directory.insert(entry);
        }
    }
}

/// What a message means for its subject (see [`NatsClient::verdict`]).
enum Verdict {
    InOrder,
    /// This many events are missing before it.
    Hole(u64),
    /// Its first this many events were seen already (or its stream is behind: all of them).
    Skip(u64),
    /// The appliance's bridge started a new stream; this many of its first events are
    /// missing (the stream numbers every subject from 1).
    NewStream(u64),
}

impl Drop for NatsClient {
    fn drop(&mut self) {
        // Closing the asks channel ends the network thread's loop.
        let (closed, _) = tokio::sync::mpsc::unbounded_channel();
        self.asks = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The network thread: subscribes, forwards messages to the reader without ever waiting for it
/// (a full queue drops, and the hole shows in the sequences), and asks for directories.
async fn network(
    servers: Vec<ServerAddr>,
    subjects: Vec<String>,
    replay: Option<Replay>,
    max_delay: Duration,
    sender: SyncSender<Incoming>,
    mut asks: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (events_sender, mut connection_events) = tokio::sync::mpsc::unbounded_channel();
    let options = connect_options(max_delay, None)
        .name("tickwire-consumer")
        .event_callback(move |event| {
            let events_sender = events_sender.clone();
            async move {
                let _ = events_sender.send(matches!(event, async_nats::Event::Disconnected));
            }
        });
    let Ok(client) = async_nats::connect_with_options(servers, options).await else {
        return;
    };
    let mut messages = match &replay {
        None => subscribe(&client, subjects).await,
        Some(replay) => replay_stream(&client, subjects, replay, &asks).await,
    };
    let replaying = replay.is_some();
    let forward = |incoming: Incoming| match sender.try_send(incoming) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(_)) => Ok(()),
        Err(TrySendError::Disconnected(_)) => Err(()),
    };
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some((subject, payload)) = message else { break };
                let mut incoming = Incoming::Message { subject, payload };
                loop {
                    match sender.try_send(incoming) {
                        Ok(()) => break,
                        // A replay's stream keeps the messages, so it waits for the reader
                        // rather than making a hole.
                        Err(TrySendError::Full(again)) if replaying => {
                            incoming = again;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        Err(TrySendError::Full(_)) => break,
                        Err(TrySendError::Disconnected(_)) => return,
                    }
                }
            }
            disconnected = connection_events.recv() => {
                if disconnected == Some(true) && forward(Incoming::Disconnected).is_err() {
                    break;
                }
            }
            ask = asks.recv() => {
                let Some(appliance) = ask else { break };
                let client = client.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    let subject = wire::directory_subject(&appliance);
                    let mut first = 0u32;
                    loop {
                        let request = client.request(subject.clone(), Bytes::copy_from_slice(&wire::encode_directory_request(first)));
                        let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(2), request).await else {
                            return;
                        };
                        let Ok(parsed) = wire::decode_directory_reply(&reply.payload) else { return };
                        let next = parsed.first.saturating_add(parsed.entries.len() as u32);
                        let more = !parsed.entries.is_empty() && next < parsed.total;
                        if sender.try_send(Incoming::Directory { appliance: appliance.clone(), payload: reply.payload }).is_err() || !more {
                            return;
                        }
                        first = next;
                    }
                });
            }
        }
    }
}

type MessageStream = futures_util::stream::BoxStream<'static, (String, Bytes)>;

/// Core subscriptions to `subjects`, merged.
async fn subscribe(client: &async_nats::Client, subjects: Vec<String>) -> MessageStream {
    let mut subscriptions = Vec::new();
    for subject in subjects {
        match client.subscribe(subject.clone()).await {
            Ok(subscription) => subscriptions.push(subscription),
            Err(error) => tracing::error!(%error, %subject, "nats: cannot subscribe"),
        }
    }
    futures_util::stream::select_all(subscriptions)
        .map(|message| (message.subject.to_string(), message.payload))
        .boxed()
}

/// One ordered JetStream consumer per subject (a server 2.9 consumer filters on one subject),
/// merged: continuity is per subject, so the order across subjects does not matter.
async fn replay_stream(
    client: &async_nats::Client,
    subjects: Vec<String>,
    replay: &Replay,
    asks: &tokio::sync::mpsc::UnboundedReceiver<String>,
) -> MessageStream {
    use async_nats::jetstream::consumer::{push, DeliverPolicy};
    let deliver_policy = match replay.start {
        ReplayStart::All => DeliverPolicy::All,
        ReplayStart::Sequence(start_sequence) => DeliverPolicy::ByStartSequence {
            start_sequence: start_sequence.max(1),
        },
        ReplayStart::TimeNs(ns) => {
            // Times past the year 9999 are not representable; they start at the stream's end.
            match time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)) {
                Ok(start_time) => DeliverPolicy::ByStartTime { start_time },
                Err(_) => DeliverPolicy::New,
            }
        }
    };
    let jetstream = async_nats::jetstream::new(client.clone());
    let mut consumers = Vec::new();
    let stream = loop {
        match jetstream.get_stream(&replay.stream).await {
            Ok(stream) => break stream,
            // The reader is gone (the asks channel closed): stop waiting.
            Err(_) if asks.is_closed() => return futures_util::stream::empty().boxed(),
            Err(error) => {
                tracing::error!(%error, stream = %replay.stream, "nats: no such JetStream stream yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    for subject in subjects {
        // Server 2.9 takes only a filter within the stream's subjects (`tickwire.<app>.*.*.*`);
        // a wider one (`tickwire.>`) reads the whole stream and filters here.
        let mut filtered = true;
        let mut consumer = None;
        for filter in [subject.clone(), String::new()] {
            let config = push::OrderedConfig {
                deliver_subject: client.new_inbox(),
                filter_subject: filter.clone(),
                deliver_policy,
                ..Default::default()
            };
            match stream.create_consumer(config).await {
                Ok(created) => {
                    filtered = !filter.is_empty();
                    consumer = Some(created);
                    break;
                }
                Err(error) => tracing::debug!(%error, %subject, "nats: replay filter refused"),
            }
        }
        let Some(consumer) = consumer else {
            tracing::error!(%subject, "nats: cannot create a replay consumer");
            continue;
        };
        match consumer.messages().await {
            Ok(messages) => {
                let wanted = subject.clone();
                consumers.push(
                    messages
                        .filter(move |message| {
                            let keep = filtered
                                || message
                                    .as_ref()
                                    .map_or(true, |m| subject_matches(&wanted, m.subject.as_str()));
                            async move { keep }
                        })
                        .boxed(),
                );
            }
            Err(error) => tracing::error!(%error, %subject, "nats: cannot replay"),
        }
    }
    futures_util::stream::select_all(consumers)
        .filter_map(|message| async move {
            match message {
                Ok(message) => Some((message.subject.to_string(), message.payload.clone())),
                Err(error) => {
                    // The ordered consumer recreates itself after such errors; a lost message
                    // shows as a hole in the sequences.
                    tracing::warn!(%error, "nats: replay consumer");
                    None
                }
            }
        })
        // The network thread lives on (directory requests) even if nothing could be replayed.
        .chain(futures_util::stream::pending())
        .boxed()
}

/// Whether NATS subject `subject` matches `pattern` (`*` one token, `>` the rest).
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut tokens = subject.split('.');
    for want in pattern.split('.') {
        match (want, tokens.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (want, Some(token)) if want == token => {}
            _ => return false,
        }
    }
    tokens.next().is_none()
}

const MAX_MESSAGE_EVENTS: usize = wire::MAX_EVENTS_PER_MESSAGE;

#[cfg(test)]
mod tests {
    //! The continuity rules on messages fed straight into the reader's queue (no server): holes,
    //! duplicates, overlaps, new and stale streams, several appliances.
    use super::*;
    use tickwire_bus::event::{Body, EventHeader, EventKind, Side, Trade};
    use tickwire_bus::fixed::Fixed;

    fn trade(venue_id: VenueId, id: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: id,
                recv_ts_ns: id,
                venue_seq: id,
                instrument_id: 7,
                venue_id,
                kind: EventKind::Trade,
                flags: 0,
            },
            Body::Trade(Trade::new(Fixed(id as i64), Fixed(1), id, Side::Bid)),
        )
    }

    struct Feed {
        sender: SyncSender<Incoming>,
        client: NatsClient,
    }

    impl Feed {
        fn new() -> Feed {
            let (sender, incoming) = std::sync::mpsc::sync_channel(1024);
            let (asks, _) = tokio::sync::mpsc::unbounded_channel();
            Feed {
                sender,
                client: NatsClient::new(incoming, asks, None, 1024),
            }
        }

        /// A message of `appliance`'s trades `first..first + count` (trade id = sequence).
        fn send(&self, appliance: &str, stream: u64, first: u64, count: u64) {
            let events: Vec<Event> = (first..first + count).map(|id| trade(0, id)).collect();
            let mut payload = Vec::new();
            wire::encode_message(
                MessageHeader {
                    appliance_epoch: 100 + stream,
                    stream,
                    sequence: first,
                },
                &events,
                &mut payload,
            );
            self.sender
                .send(Incoming::Message {
                    subject: wire::event_subject(appliance, "sim", "S.1", EventKind::Trade),
                    payload: payload.into(),
                })
                .unwrap();
        }

        /// Everything the client says until it is idle, as text.
        fn read(&mut self) -> Vec<String> {
            let mut said = Vec::new();
            loop {
                match self.client.poll().unwrap() {
                    Next::Events(events) => {
                        let ids: Vec<String> = events
                            .iter()
                            .map(|event| {
                                let Body::Trade(trade) = event.body() else {
                                    panic!("{event:?}")
                                };
                                format!("{}:{}", event.header.venue_id, trade.trade_id)
                            })
                            .collect();
                        said.push(ids.join(","));
                    }
                    Next::Overrun { missed, .. } => said.push(format!("missed {missed}")),
                    Next::NewEpoch { epoch } => said.push(format!("epoch {epoch}")),
                    Next::Closed | Next::Removed => said.push("closed".into()),
                    Next::Idle => return said,
                }
            }
        }
    }

    #[test]
    fn holes_are_counted_exactly_and_duplicates_dropped() {
        let mut feed = Feed::new();
        // Joined mid-stream at 5: no loss before it is known.
        feed.send("a", 1, 5, 2);
        feed.send("a", 1, 7, 1);
        // 8 and 9 lost; 10..12 come.
        feed.send("a", 1, 10, 2);
        // A repeat, and an overlap: only 12 is new.
        feed.send("a", 1, 10, 2);
        feed.send("a", 1, 11, 2);
        // The events after a hole go out on their own, as the bus client's do.
        assert_eq!(
            feed.read(),
            ["0:5,0:6,0:7", "missed 2", "0:10,0:11", "0:12"]
        );
        assert_eq!(feed.client.counters().duplicates, 3);
        assert_eq!(feed.client.counters().missed, 2);
        let (venue, symbol) = feed.client.directory().name(&trade(0, 0));
        assert_eq!((venue, symbol), ("sim", "S.1"));
        assert_eq!(feed.client.appliance(0), Some(("a", 0)));
    }

    #[test]
    fn a_new_stream_starts_from_one_and_a_stale_one_is_dropped() {
        let mut feed = Feed::new();
        feed.send("a", 1, 40, 1);
        // The bridge restarted: stream 2, whose first two messages were lost.
        feed.send("a", 2, 3, 1);
        // A late message of stream 1.
        feed.send("a", 1, 41, 1);
        feed.send("a", 2, 4, 1);
        // A new stream may number its venues anew: the client gives them new local ids.
        assert_eq!(feed.read(), ["0:40", "epoch 102", "missed 2", "1:3", "1:4"]);
        assert_eq!(feed.client.counters().duplicates, 1);
    }

    #[test]
    fn appliances_are_apart_and_get_venue_ids_of_their_own() {
        let mut feed = Feed::new();
        feed.send("a", 1, 1, 1);
        feed.send("b", 9, 1, 1);
        feed.send("a", 1, 2, 1);
        // Appliance b's hole does not touch appliance a's subject of the same name.
        feed.send("b", 9, 5, 1);
        assert_eq!(feed.read(), ["0:1,1:1,0:2", "missed 3", "1:5"]);
        assert_eq!(feed.client.appliance(1), Some(("b", 0)));
    }

    #[test]
    fn strangers_and_damaged_messages_are_counted_and_skipped() {
        let mut feed = Feed::new();
        for (subject, payload) in [
            ("other.subject", vec![1u8, 2, 3]),
            ("tickwire.a.sim.S%2E1.trade", vec![0u8; 31]),
            ("tickwire.a.directory", Vec::new()),
        ] {
            feed.sender
                .send(Incoming::Message {
                    subject: subject.into(),
                    payload: payload.into(),
                })
                .unwrap();
        }
        feed.send("a", 1, 1, 1);
        assert_eq!(feed.read(), ["0:1"]);
        assert_eq!(feed.client.counters().malformed, 3);
    }
}
