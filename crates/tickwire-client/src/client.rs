//! [`Client`]: one consumer of a bus, with waiting, overruns, epochs, the directory and
//! (optionally) books on top of [`BusReader`].
//!
//! # What [`Client::poll`] returns, and when
//!
//! - [`Next::Events`]: the next events, in order, without a hole since the last batch (or since
//!   the overrun or new epoch just reported).
//! - [`Next::Overrun`]: the writer of one partition (one decoder's ring) lapped this client;
//!   `missed` events of that partition are lost for good (the exact count), the other
//!   partitions lost nothing. The events after the loss follow on the next poll. The books of
//!   that partition are invalid (and asked for again); the others stay valid.
//! - [`Next::NewEpoch`]: an appliance made a new bus at the path (it restarted). The client
//!   has already switched to it and reads it from its oldest event; nothing of the old bus is
//!   handed out after this. Books are dropped and the directory reloaded.
//! - [`Next::Closed`]: the appliance stopped cleanly and nothing replaced the bus yet; reported
//!   once, then the client waits for a new epoch.
//! - [`Next::Removed`]: the bus file was deleted and nothing replaced it. The client keeps its
//!   mapping (a writer still running writes on, and those events still come), and waits for a
//!   new bus at the path.
//! - [`Next::Idle`]: nothing new.
//!
//! Errors: [`ClientError::Read`] once when the file is truncated or damaged under the client
//! (it then waits for a new epoch), [`ClientError::Bus`] once for a new bus it cannot open (for
//! example another layout version).
//!
//! The path is looked at (a `stat`) only when the client is idle, at most every
//! [`CHECK_INTERVAL`]: the old bus is drained before a new one is taken.

use crate::books::Books;
use crate::directory::Directory;
use crate::error::ClientError;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tickwire_bus::event::{Event, InstrumentId, VenueId};
use tickwire_bus::{request_socket_path, BusError, BusReader, Owner, SnapshotRequest, Start};

/// How often an idle client looks at the path for a new, closed or removed bus.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(50);
/// How long [`Client::attach_wait`] sleeps between looks for a bus.
pub const ATTACH_POLL: Duration = Duration::from_millis(50);
/// Events one poll copies at most, unless [`ClientOptions::batch`] says otherwise.
pub const DEFAULT_BATCH: usize = 256;
/// How long a client that follows books waits before asking again for the books still not
/// valid (past the appliance's default 100 ms per-instrument interval, inside which a second
/// request is dropped).
const FOLLOW_UP_AFTER: Duration = Duration::from_millis(250);
/// The longest a book-following client waits after an overrun before it asks for every book
/// again (issue 33): the wait starts at [`FOLLOW_UP_AFTER`] and doubles with each such request
/// sent before every book was valid again, so that on a ring smaller than the snapshots they
/// ask for, readers do not lap each other in a storm of requests.
pub const OVERRUN_BACKOFF_MAX: Duration = Duration::from_secs(8);

/// What happened next on the bus; see the module doc for each.
#[derive(Debug)]
pub enum Next<'a> {
    Events(Events<'a>),
    /// `partition`: the bus partition lapped; `None` where the source has no partitions (the
    /// NATS client of `tickwire-nats`).
    Overrun {
        missed: u64,
        partition: Option<u32>,
    },
    NewEpoch {
        epoch: u64,
    },
    Closed,
    Removed,
    Idle,
}

/// A batch of events, borrowed from the client until the next poll, with the directory that
/// names them and the books they were applied to (when the client follows books).
/// Dereferences to `[Event]`.
#[derive(Clone, Copy)]
pub struct Events<'a> {
    events: &'a [Event],
    directory: &'a Directory,
    books: Option<&'a Books>,
}

impl<'a> Events<'a> {
    /// A batch of events named by `directory`: for sources of events other than a bus (the
    /// NATS client of `tickwire-nats` hands out its events in this same shape).
    pub fn new(
        events: &'a [Event],
        directory: &'a Directory,
        books: Option<&'a Books>,
    ) -> Events<'a> {
        Events {
            events,
            directory,
            books,
        }
    }

    pub fn as_slice(&self) -> &'a [Event] {
        self.events
    }

    /// The event's venue and symbol ([`Directory::name`]).
    pub fn name(&self, event: &Event) -> (&'a str, &'a str) {
        self.directory.name(event)
    }

    pub fn directory(&self) -> &'a Directory {
        self.directory
    }

    /// The books with this batch applied, when the client follows books.
    pub fn books(&self) -> Option<&'a Books> {
        self.books
    }
}

impl std::ops::Deref for Events<'_> {
    type Target = [Event];

    fn deref(&self) -> &[Event] {
        self.events
    }
}

impl<'a> IntoIterator for Events<'a> {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;

    fn into_iter(self) -> Self::IntoIter {
        self.events.iter()
    }
}

impl std::fmt::Debug for Events<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.events).finish()
    }
}

/// What a client has seen, since it attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events handed out.
    pub events_read: u64,
    /// Overruns reported.
    pub overruns: u64,
    /// Events lost to overruns, in total.
    pub missed: u64,
    /// New epochs reported (appliance restarts seen).
    pub epochs: u64,
    /// Snapshot requests sent (by [`Client::request_snapshots`] or the book-following mode).
    pub snapshot_requests: u64,
    /// Snapshot requests that could not be sent.
    pub snapshot_request_errors: u64,
}

/// How a client attaches: where it starts, how many events a poll copies at most, whether it
/// follows books, whose bus files it accepts. `ClientOptions::default()` is [`Start::Latest`],
/// [`DEFAULT_BATCH`], no books, [`Owner::Trusted`].
#[derive(Clone, Copy, Debug)]
pub struct ClientOptions {
    start: Start,
    batch: usize,
    follow_books: bool,
    owner: Owner,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            start: Start::Latest,
            batch: DEFAULT_BATCH,
            follow_books: false,
            owner: Owner::Trusted,
        }
    }
}

impl ClientOptions {
    /// Where the first bus is read from (a new epoch is always read from its oldest event).
    pub fn start(mut self, start: Start) -> ClientOptions {
        self.start = start;
        self
    }

    /// The most events one poll hands out (at least 1).
    pub fn batch(mut self, batch: usize) -> ClientOptions {
        self.batch = batch.max(1);
        self
    }

    /// Keep books from the events ([`Client::follow_books`]).
    pub fn follow_books(mut self, follow: bool) -> ClientOptions {
        self.follow_books = follow;
        self
    }

    /// Whose bus files to accept, this bus's and every later epoch's: by default
    /// ([`Owner::Trusted`]) root, this process's user, or the owner of the bus's directory when
    /// no one else may write it (`/run/tickwire` under systemd). Name the appliance's user
    /// ([`Owner::Uid`], [`tickwire_bus::user_id`]) when it writes the bus in a directory others
    /// may write too (`/dev/shm`): a file another user made there is refused, not read.
    pub fn owner(mut self, owner: Owner) -> ClientOptions {
        self.owner = owner;
        self
    }

    /// Attaches to the bus at `path`; fails at once if there is none.
    pub fn attach(self, path: impl AsRef<Path>) -> Result<Client, ClientError> {
        let path = path.as_ref();
        let reader = BusReader::open_owned(path, self.start, self.batch, self.owner)?;
        Ok(Client::new(path, reader, self))
    }

    /// Attaches to the bus at `path`, waiting up to `timeout` for an appliance to make it (for
    /// a consumer started before the appliance). Only a missing bus is waited for; any other
    /// error (permission, layout version) is returned at once.
    pub fn attach_wait(
        self,
        path: impl AsRef<Path>,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let path = path.as_ref();
        let started = Instant::now();
        loop {
            match BusReader::open_owned(path, self.start, self.batch, self.owner) {
                Ok(reader) => return Ok(Client::new(path, reader, self)),
                Err(BusError::NotFound { .. }) => {
                    let waited = started.elapsed();
                    if waited >= timeout {
                        return Err(ClientError::NoBusWithin {
                            path: path.to_owned(),
                            waited,
                        });
                    }
                    std::thread::sleep(ATTACH_POLL.min(timeout - waited));
                }
                Err(error) => return Err(ClientError::Bus(error)),
            }
        }
    }
}

/// Whether the file at the path is still the one being read.
enum PathState {
    Same,
    Removed,
    /// Another file, with its (device, inode).
    Replaced((u64, u64)),
}

/// What a poll found, before it is lent out as a [`Next`] (kept apart so that a loop can call
/// it again without holding a borrow of the client).
enum Step {
    Events(usize),
    Overrun { missed: u64, partition: u32 },
    NewEpoch(u64),
    Closed,
    Removed,
    Idle,
}

/// One consumer of one bus path, across the appliance's restarts. See the module doc.
pub struct Client {
    path: PathBuf,
    reader: BusReader,
    batch: usize,
    owner: Owner,
    buffer: Vec<Event>,
    /// Events in `buffer` read with an overrun and not handed out yet.
    pending: usize,
    /// The partition the pending events were read from.
    pending_partition: u32,
    /// The reader failed (truncated, damaged): read nothing more from it.
    broken: bool,
    /// `Closed` or `Removed` was reported for the current bus.
    closed_reported: bool,
    removed_reported: bool,
    /// A new file at the path that could not be opened, reported once.
    refused: Option<(u64, u64)>,
    next_check: Instant,
    directory: Directory,
    books: Option<Books>,
    /// Book-following: a request for every book is owed (not sent yet, or its send failed).
    request_owed: bool,
    /// Book-following: when to ask again for the books still not valid.
    follow_up_at: Option<Instant>,
    /// Book-following: when every book was last asked for, whether the owed request is an
    /// overrun's, and how long after the last one an overrun's request waits (doubling with
    /// each one sent before the books are valid again).
    every_book_asked_at: Option<Instant>,
    owed_by_overrun: bool,
    overrun_backoff: Duration,
    socket: Option<UnixDatagram>,
    counters: Counters,
}

impl Client {
    /// Attaches to the bus at `path`, reading from the next event published
    /// ([`Start::Latest`]). Fails at once with [`ClientError::Bus`] if there is none.
    pub fn attach(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        ClientOptions::default().attach(path)
    }

    /// Attaches to the bus at `path`, waiting up to `timeout` for an appliance to make it.
    pub fn attach_wait(path: impl AsRef<Path>, timeout: Duration) -> Result<Client, ClientError> {
        ClientOptions::default().attach_wait(path, timeout)
    }

    /// Options for [`ClientOptions::attach`]: start, batch size, books.
    pub fn options() -> ClientOptions {
        ClientOptions::default()
    }

    fn new(path: &Path, reader: BusReader, options: ClientOptions) -> Client {
        let mut directory = Directory::default();
        directory.refresh(&reader);
        let mut client = Client {
            path: path.to_owned(),
            reader,
            batch: options.batch,
            owner: options.owner,
            buffer: vec![zero_event(); options.batch],
            pending: 0,
            pending_partition: 0,
            broken: false,
            closed_reported: false,
            removed_reported: false,
            refused: None,
            next_check: Instant::now(),
            directory,
            books: None,
            request_owed: false,
            follow_up_at: None,
            every_book_asked_at: None,
            owed_by_overrun: false,
            overrun_backoff: FOLLOW_UP_AFTER,
            socket: None,
            counters: Counters::default(),
        };
        if options.follow_books {
            client.follow_books(true);
        }
        client
    }

    /// Turns book keeping on or off. On: events are applied to [`Client::books`] before they
    /// are handed out, and snapshots of every book are asked for now, after each overrun and
    /// after each new epoch (again [`FOLLOW_UP_AFTER`] later for books still not valid). After
    /// an overrun the request waits until [`FOLLOW_UP_AFTER`] has passed since the last request
    /// for every book, a wait that doubles (up to [`OVERRUN_BACKOFF_MAX`]) with each such
    /// request sent before every book is valid again: a lapped reader backs off. A
    /// request that cannot be sent (no appliance listens) is counted in
    /// [`Counters::snapshot_request_errors`] and retried while the client is idle.
    pub fn follow_books(&mut self, follow: bool) {
        if follow == self.books.is_some() {
            return;
        }
        if follow {
            self.books = Some(Books::new());
            self.ask_for_every_book();
        } else {
            self.books = None;
            self.request_owed = false;
            self.follow_up_at = None;
        }
    }

    /// The books, when the client follows them.
    pub fn books(&self) -> Option<&Books> {
        self.books.as_ref()
    }

    /// The directory of the current bus.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The event's venue and symbol ([`Directory::name`]).
    pub fn name(&self, event: &Event) -> (&str, &str) {
        self.directory.name(event)
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The current bus's epoch.
    pub fn epoch(&self) -> u64 {
        self.reader.epoch()
    }

    /// Events published and not read yet (above the capacity: the next poll reports an
    /// overrun). One atomic load.
    pub fn lag(&self) -> u64 {
        if self.broken {
            0
        } else {
            self.reader.lag() + self.pending as u64
        }
    }

    /// Slots in the current bus's ring.
    pub fn capacity(&self) -> u64 {
        self.reader.capacity()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying reader of the current bus (its cursor, writer pid, state).
    pub fn reader(&self) -> &BusReader {
        &self.reader
    }

    /// Moves partition `k`'s read position to `positions[k]` (at most its cursor) for every
    /// partition `positions` names: a consumer resuming where it stopped in each partition (as
    /// the NATS bridge does). Events read and not handed out yet are dropped.
    pub fn seek(&mut self, positions: &[u64]) {
        self.pending = 0;
        self.reader.seek(positions);
    }

    /// What happened next, without waiting. See the module doc.
    pub fn poll(&mut self) -> Result<Next<'_>, ClientError> {
        let step = self.step()?;
        Ok(self.view(step))
    }

    /// Like [`Client::poll`], but waits up to `timeout` for something other than
    /// [`Next::Idle`]: it spins a little, then yields, then sleeps in growing steps up to 1 ms,
    /// so a quiet bus costs little CPU and a busy one is read at once.
    pub fn wait(&mut self, timeout: Duration) -> Result<Next<'_>, ClientError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::default();
        loop {
            match self.step()? {
                Step::Idle => {
                    let now = Instant::now();
                    let remaining = match deadline {
                        Some(deadline) if now >= deadline => return Ok(Next::Idle),
                        Some(deadline) => deadline - now,
                        None => Duration::MAX,
                    };
                    backoff.snooze(remaining);
                }
                step => return Ok(self.view(step)),
            }
        }
    }

    /// Asks the appliance for snapshots of a book ([`SnapshotRequest::ALL_VENUES`] and
    /// [`SnapshotRequest::ALL_INSTRUMENTS`] widen it). The snapshot comes back in the stream
    /// (for every reader) as `SnapshotBegin`, levels, `SnapshotEnd`. An error says that no
    /// appliance listens on the request socket.
    pub fn request_snapshots(
        &mut self,
        venue_id: VenueId,
        instrument_id: InstrumentId,
    ) -> Result<(), ClientError> {
        let socket_path = request_socket_path(&self.path);
        let bytes = SnapshotRequest {
            venue_id,
            instrument_id,
        }
        .to_bytes();
        let sent = match &self.socket {
            Some(socket) => socket.send_to(&bytes, &socket_path),
            None => UnixDatagram::unbound().and_then(|socket| {
                socket
                    .send_to(&bytes, &socket_path)
                    .inspect(|_| self.socket = Some(socket))
            }),
        };
        match sent {
            Ok(_) => {
                self.counters.snapshot_requests += 1;
                Ok(())
            }
            Err(source) => {
                self.counters.snapshot_request_errors += 1;
                Err(ClientError::Request {
                    socket: socket_path,
                    source,
                })
            }
        }
    }

    fn view(&self, step: Step) -> Next<'_> {
        match step {
            Step::Events(count) => Next::Events(Events {
                events: &self.buffer[..count],
                directory: &self.directory,
                books: self.books.as_ref(),
            }),
            Step::Overrun { missed, partition } => Next::Overrun {
                missed,
                partition: Some(partition),
            },
            Step::NewEpoch(epoch) => Next::NewEpoch { epoch },
            Step::Closed => Next::Closed,
            Step::Removed => Next::Removed,
            Step::Idle => Next::Idle,
        }
    }

    fn step(&mut self) -> Result<Step, ClientError> {
        if self.pending > 0 {
            let count = std::mem::take(&mut self.pending);
            self.deliver(count, self.pending_partition);
            return Ok(Step::Events(count));
        }
        if !self.broken {
            match self.reader.read(&mut self.buffer) {
                Ok(batch) if batch.missed > 0 => {
                    self.counters.overruns += 1;
                    self.counters.missed += batch.missed;
                    self.pending = batch.count;
                    self.pending_partition = batch.partition;
                    if let Some(books) = &mut self.books {
                        books.invalidate_partition(batch.partition);
                        self.ask_after_overrun();
                    }
                    return Ok(Step::Overrun {
                        missed: batch.missed,
                        partition: batch.partition,
                    });
                }
                Ok(batch) if batch.count > 0 => {
                    self.deliver(batch.count, batch.partition);
                    return Ok(Step::Events(batch.count));
                }
                Ok(_) => {}
                Err(error) => {
                    self.broken = true;
                    self.pending = 0;
                    return Err(ClientError::Read(error));
                }
            }
        }
        self.idle()
    }

    fn deliver(&mut self, count: usize, partition: u32) {
        self.counters.events_read += count as u64;
        // The appliance names an instrument before it writes events about it, so the
        // directory is refreshed (one atomic load when nothing is new) before they go out.
        self.directory.refresh(&self.reader);
        if let Some(books) = &mut self.books {
            books.apply_partition(&self.buffer[..count], partition);
        }
    }

    /// Nothing to read: at most every `CHECK_INTERVAL`, owed snapshot requests and the path.
    fn idle(&mut self) -> Result<Step, ClientError> {
        let now = Instant::now();
        if now < self.next_check {
            return Ok(Step::Idle);
        }
        self.next_check = now + CHECK_INTERVAL;
        if !self.broken {
            self.directory.refresh(&self.reader);
        }
        self.send_owed_requests(now);
        match self.path_state() {
            PathState::Same => {
                if !self.broken && !self.closed_reported && self.reader.is_closed() {
                    self.closed_reported = true;
                    return Ok(Step::Closed);
                }
                Ok(Step::Idle)
            }
            PathState::Removed => {
                if self.removed_reported {
                    return Ok(Step::Idle);
                }
                self.removed_reported = true;
                Ok(Step::Removed)
            }
            PathState::Replaced(identity) => {
                if self.refused == Some(identity) {
                    return Ok(Step::Idle);
                }
                match BusReader::open_owned(&self.path, Start::Oldest, self.batch, self.owner) {
                    Ok(reader) => Ok(Step::NewEpoch(self.switch(reader))),
                    // Removed again between the stat and the open.
                    Err(BusError::NotFound { .. }) => Ok(Step::Idle),
                    Err(error) => {
                        self.refused = Some(identity);
                        Err(ClientError::Bus(error))
                    }
                }
            }
        }
    }

    /// What the path names now: one `stat`.
    fn path_state(&self) -> PathState {
        match tickwire_bus::identity_at(&self.path) {
            Some(identity) if identity == self.reader.identity() => PathState::Same,
            Some(identity) => PathState::Replaced(identity),
            None => PathState::Removed,
        }
    }

    /// Takes the new bus: everything kept about the old one goes.
    fn switch(&mut self, reader: BusReader) -> u64 {
        self.reader = reader;
        self.pending = 0;
        self.broken = false;
        self.closed_reported = false;
        self.removed_reported = false;
        self.refused = None;
        self.directory = Directory::default();
        self.directory.refresh(&self.reader);
        self.counters.epochs += 1;
        if let Some(books) = &mut self.books {
            books.clear();
            self.ask_for_every_book();
        }
        self.reader.epoch()
    }

    fn ask_for_every_book(&mut self) {
        self.request_owed = true;
        self.owed_by_overrun = false;
        self.follow_up_at = None;
        self.every_book_asked_at = None;
        self.send_owed_requests(Instant::now());
    }

    /// An overrun: every book is owed, asked for once the back-off since the last request for
    /// every book has passed (at once when there was none).
    fn ask_after_overrun(&mut self) {
        if !self.request_owed {
            self.owed_by_overrun = true;
        }
        self.request_owed = true;
        self.follow_up_at = None;
        self.send_owed_requests(Instant::now());
    }

    fn send_owed_requests(&mut self, now: Instant) {
        if self.books.is_none() {
            return;
        }
        if self.request_owed {
            // An overrun's request waits out the back-off (measured from the last request for
            // every book); a new epoch's or the first one's goes at once.
            if self.owed_by_overrun
                && self.every_book_asked_at.is_some_and(|asked| {
                    now.saturating_duration_since(asked) < self.overrun_backoff
                })
            {
                return;
            }
            if self
                .request_snapshots(
                    SnapshotRequest::ALL_VENUES,
                    SnapshotRequest::ALL_INSTRUMENTS,
                )
                .is_ok()
            {
                self.request_owed = false;
                if std::mem::take(&mut self.owed_by_overrun) {
                    self.overrun_backoff = (self.overrun_backoff * 2).min(OVERRUN_BACKOFF_MAX);
                }
                self.every_book_asked_at = Some(now);
                self.follow_up_at = Some(now + FOLLOW_UP_AFTER);
            }
            return;
        }
        if self.overrun_backoff > FOLLOW_UP_AFTER && self.follow_up_at.is_none() {
            // Every book valid again since the last overrun: the back-off starts over.
            let books = self.books.as_ref().expect("checked above");
            let all_valid = self
                .directory
                .iter()
                .all(|entry| books.is_valid(entry.venue_id, entry.instrument_id));
            if all_valid {
                self.overrun_backoff = FOLLOW_UP_AFTER;
            }
        }
        if self.follow_up_at.is_some_and(|at| now >= at) {
            self.follow_up_at = None;
            let books = self.books.as_ref().expect("checked above");
            let missing: Vec<(VenueId, InstrumentId)> = self
                .directory
                .iter()
                .map(|entry| (entry.venue_id, entry.instrument_id))
                .filter(|&(venue, instrument)| !books.is_valid(venue, instrument))
                .collect();
            for (venue, instrument) in missing {
                // A failure is counted; the first request went, so the appliance is there.
                let _ = self.request_snapshots(venue, instrument);
            }
        }
    }
}

/// An all-zero event to fill the read buffer with.
fn zero_event() -> Event {
    use tickwire_bus::event::{Body, EventHeader, EventKind, Quote};
    Event::new(
        EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: 0,
            venue_seq: 0,
            instrument_id: 0,
            venue_id: 0,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote::default()),
    )
}

/// How [`Client::wait`] idles: spin, then yield, then sleep in steps growing to 1 ms.
#[derive(Default)]
struct Backoff {
    step: u32,
}

impl Backoff {
    const SPINS: u32 = 16;
    const YIELDS: u32 = 32;
    const LONGEST_SLEEP: Duration = Duration::from_millis(1);

    fn snooze(&mut self, remaining: Duration) {
        if self.step < Self::SPINS {
            for _ in 0..(1 << (self.step / 4).min(6)) {
                std::hint::spin_loop();
            }
        } else if self.step < Self::YIELDS {
            std::thread::yield_now();
        } else {
            let doublings = (self.step - Self::YIELDS).min(5);
            let sleep = (Duration::from_micros(32) * (1 << doublings)).min(Self::LONGEST_SLEEP);
            std::thread::sleep(sleep.min(remaining));
        }
        self.step = self.step.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    //! The client's states against a real `BusWriter` in this process; the cross-process faults
    //! are the root package's `tests/bus/`.
    use super::*;
    use tickwire_bus::event::{Body, BookLevel, EventHeader, EventKind, Side, Snapshot, Trade};
    use tickwire_bus::fixed::Fixed;
    use tickwire_bus::{BusOptions, BusWriter, DirectoryEntry, Geometry};

    fn trade(position: u64) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: position,
                recv_ts_ns: position,
                venue_seq: position,
                instrument_id: 7,
                venue_id: 1,
                kind: EventKind::Trade,
                flags: 0,
            },
            Body::Trade(Trade::new(
                tickwire_bus::fixed::Fixed(position as i64),
                tickwire_bus::fixed::Fixed(1),
                position,
                Side::Bid,
            )),
        )
    }

    fn writer(path: &Path, epoch: u64) -> BusWriter {
        let options = BusOptions {
            path: path.to_owned(),
            geometry: Geometry::new(1024, 16).unwrap(),
            group: None,
        };
        BusWriter::create(&options, epoch, 0).unwrap()
    }

    /// Polls until something other than `Idle` comes, sleeping between polls (bounded).
    fn next_step(client: &mut Client) -> Step {
        for _ in 0..400 {
            match client.step().unwrap() {
                Step::Idle => std::thread::sleep(Duration::from_millis(5)),
                step => return step,
            }
        }
        panic!("nothing happened within 2 s");
    }

    #[test]
    fn attach_names_a_missing_bus_and_attach_wait_gives_up_with_the_time_waited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let error = Client::attach(&path).err().unwrap().to_string();
        assert!(error.contains("no bus at"), "{error}");
        let error = Client::attach_wait(&path, Duration::from_millis(60))
            .err()
            .unwrap();
        assert!(matches!(error, ClientError::NoBusWithin { .. }), "{error}");
        assert!(error.to_string().contains("no bus appeared"), "{error}");
    }

    #[test]
    fn events_then_an_exact_overrun_then_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let mut bus = writer(&path, 1);
        bus.add_instrument(&DirectoryEntry {
            instrument_id: 7,
            venue_id: 1,
            venue: "binance-usdm".into(),
            symbol: "BTCUSDT".into(),
            venue_symbol: "btcusdt".into(),
        })
        .unwrap();
        let mut client = Client::options().batch(64).attach(&path).unwrap();
        for position in 0..10 {
            bus.write(&trade(position));
        }
        bus.publish();
        match client.poll().unwrap() {
            Next::Events(events) => {
                assert_eq!(events.len(), 10);
                assert_eq!(events[3], trade(3));
                assert_eq!(events.name(&events[0]), ("binance-usdm", "BTCUSDT"));
            }
            other => panic!("{other:?}"),
        }
        for position in 10..5000 {
            bus.write(&trade(position));
        }
        bus.publish();
        let Next::Overrun { missed, .. } = client.poll().unwrap() else {
            panic!("no overrun")
        };
        let mut read = 10;
        let mut expected = 10 + missed;
        loop {
            match client.poll().unwrap() {
                Next::Events(events) => {
                    for event in events {
                        assert_eq!(*event, trade(expected));
                        expected += 1;
                        read += 1;
                    }
                }
                Next::Idle => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(read + missed, 5000);
        let counters = client.counters();
        assert_eq!((counters.overruns, counters.missed), (1, missed));
        assert_eq!(counters.events_read, read);
    }

    #[test]
    fn closed_once_then_a_new_epoch_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let mut first = writer(&path, 1);
        let mut client = Client::attach(&path).unwrap();
        first.write(&trade(0));
        first.publish();
        drop(first);
        assert!(matches!(next_step(&mut client), Step::Events(1)));
        assert!(matches!(next_step(&mut client), Step::Closed));
        let mut second = writer(&path, 2);
        second.write(&trade(100));
        second.publish();
        assert!(matches!(next_step(&mut client), Step::NewEpoch(2)));
        assert!(matches!(next_step(&mut client), Step::Events(1)));
        assert_eq!(client.buffer[0], trade(100));
        assert_eq!(client.counters().epochs, 1);
    }

    #[test]
    fn a_removed_bus_is_reported_once_and_its_writer_still_reaches_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let mut bus = writer(&path, 1);
        let mut client = Client::attach(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(next_step(&mut client), Step::Removed));
        bus.write(&trade(5));
        bus.publish();
        assert!(matches!(next_step(&mut client), Step::Events(1)));
        assert_eq!(client.buffer[0], trade(5));
    }

    #[test]
    fn a_snapshot_request_without_an_appliance_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let _bus = writer(&path, 1);
        let mut client = Client::attach(&path).unwrap();
        let error = client.request_snapshots(1, 7).unwrap_err().to_string();
        assert!(
            error.contains("no appliance takes snapshot requests"),
            "{error}"
        );
        assert!(error.contains("bus.requests"), "{error}");
        // A bound socket takes it, and the appliance reads the 16 bytes of the layout.
        let listener = UnixDatagram::bind(request_socket_path(&path)).unwrap();
        client.request_snapshots(1, 7).unwrap();
        let mut bytes = [0u8; 32];
        let received = listener.recv(&mut bytes).unwrap();
        assert_eq!(
            SnapshotRequest::from_bytes(&bytes[..received]),
            Ok(SnapshotRequest {
                venue_id: 1,
                instrument_id: 7
            })
        );
        assert_eq!(client.counters().snapshot_requests, 1);
        assert_eq!(client.counters().snapshot_request_errors, 1);
    }

    /// A bus of two partitions (two decoders): a lapped partition is named in the overrun, its
    /// missed count is that partition's alone, and only its books become unknown; the other
    /// partition's events and books are untouched.
    #[test]
    fn an_overrun_names_its_partition_and_invalidates_only_its_books() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let options = BusOptions {
            path: path.clone(),
            geometry: Geometry::new(1024, 16).unwrap().with_partitions(2).unwrap(),
            group: None,
        };
        let mut writers = BusWriter::create_partitioned(&options, 1, 0).unwrap();
        let mut second = writers.pop().unwrap();
        let mut first = writers.pop().unwrap();
        let book_of = |bus: &mut BusWriter, venue_id, instrument_id| {
            let mut header = trade(0).header;
            header.venue_id = venue_id;
            header.instrument_id = instrument_id;
            let mut level = Event::new(
                EventHeader {
                    kind: EventKind::BookLevel,
                    ..header
                },
                Body::BookLevel(BookLevel::new(Side::Bid, Fixed(100), Fixed(1))),
            );
            level.header.flags = tickwire_bus::event::flags::SNAPSHOT;
            let begin = Event::new(
                EventHeader {
                    kind: EventKind::SnapshotBegin,
                    ..header
                },
                Body::SnapshotBegin(Snapshot::default()),
            );
            let end = Event::new(
                EventHeader {
                    kind: EventKind::SnapshotEnd,
                    ..header
                },
                Body::SnapshotEnd(Snapshot::default()),
            );
            for event in [begin, level, end] {
                bus.write(&event);
            }
            bus.publish();
        };
        book_of(&mut first, 1, 7);
        book_of(&mut second, 2, 8);
        let mut client = Client::options()
            .follow_books(true)
            .batch(64)
            .start(Start::Oldest)
            .attach(&path)
            .unwrap();
        for _ in 0..2 {
            let _ = next_step(&mut client);
        }
        let books = client.books().unwrap();
        assert!(books.is_valid(1, 7) && books.is_valid(2, 8));
        // Partition 1 laps the client; partition 0 writes a little.
        for position in 0..3000 {
            let mut event = trade(position);
            event.header.venue_id = 2;
            event.header.instrument_id = 8;
            second.write(&event);
        }
        second.publish();
        first.write(&trade(1));
        first.publish();
        let mut overruns = Vec::new();
        let mut events_of = [0u64; 2];
        loop {
            match client.step().unwrap() {
                Step::Overrun { missed, partition } => overruns.push((partition, missed)),
                Step::Events(count) => {
                    for event in &client.buffer[..count] {
                        events_of[usize::from(event.header.venue_id - 1)] += 1;
                    }
                }
                Step::Idle => break,
                other => panic!("{:?}", std::mem::discriminant(&other)),
            }
        }
        assert_eq!(overruns.len(), 1, "{overruns:?}");
        let (partition, missed) = overruns[0];
        assert_eq!(partition, 1);
        assert_eq!(
            events_of[1] + missed,
            3000,
            "partition 1: read + missed = written"
        );
        assert_eq!(events_of[0], 1, "partition 0 lost nothing");
        let books = client.books().unwrap();
        assert!(books.is_valid(1, 7), "partition 0's book stays valid");
        assert!(!books.is_valid(2, 8), "partition 1's book is unknown");
    }

    /// Issue 33: a book-following client lapped again and again (a ring smaller than the
    /// snapshots readers ask for) backs off instead of asking for every book at each overrun;
    /// the owed request still goes once the back-off has passed.
    #[test]
    fn a_lapped_book_follower_backs_off_instead_of_asking_at_every_overrun() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let mut bus = writer(&path, 1);
        let listener = UnixDatagram::bind(request_socket_path(&path)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let received = |listener: &UnixDatagram| {
            let mut requests = Vec::new();
            let mut bytes = [0u8; 32];
            while let Ok(count) = listener.recv(&mut bytes) {
                requests.push(SnapshotRequest::from_bytes(&bytes[..count]).unwrap());
            }
            requests
        };
        let every_book = SnapshotRequest {
            venue_id: SnapshotRequest::ALL_VENUES,
            instrument_id: SnapshotRequest::ALL_INSTRUMENTS,
        };
        let mut client = Client::options().follow_books(true).attach(&path).unwrap();
        assert_eq!(received(&listener), [every_book], "the first request");
        let mut position = 0;
        for _ in 0..10 {
            for _ in 0..1100 {
                bus.write(&trade(position));
                position += 1;
            }
            bus.publish();
            assert!(matches!(client.step().unwrap(), Step::Overrun { .. }));
            assert!(matches!(client.step().unwrap(), Step::Events(_)));
        }
        assert_eq!(client.counters().overruns, 10);
        // Ten overruns within the back-off: at most one request (a host that stalls this loop
        // past the back-off may let one through), never one per overrun.
        let storm = received(&listener);
        assert!(storm.len() <= 1, "{storm:?}");
        // Idle: the owed request goes once the back-off has passed.
        let mut owed = Vec::new();
        for _ in 0..400 {
            let _ = client.step().unwrap();
            owed.extend(received(&listener));
            if !owed.is_empty() || !storm.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            storm.len() + owed.len() == 1 && owed.iter().chain(&storm).all(|r| *r == every_book),
            "{storm:?} {owed:?}"
        );
    }
}
