//! The recorder's loop over a bus: what `tickwire record --events` runs in its own process and
//! the appliance runs on a thread of its own (never a hot one).

use crate::recorder::{Clock, Recorder, RecorderStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickwire_client::{Client, Next};

/// How long the recorder sleeps when the bus has nothing new. It polls and sleeps rather than
/// `Client::wait`, which spins and yields before it sleeps: a recorder needs no microsecond
/// wake-up, and on a small host its thread shares a core with the appliance's busy-polling
/// threads. 2 ms at 2 M events/s is 4,000 events, a sixtieth of the default ring.
pub const IDLE_SLEEP: Duration = Duration::from_millis(2);

/// How long a stopped recorder goes on reading what the bus still holds, at most.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The recorder's counters as another thread reads them (the appliance's `/metrics`): the
/// recording thread stores them once per loop. A mutex: neither side is a hot thread.
#[derive(Clone, Debug, Default)]
pub struct SharedStats(Arc<Mutex<RecorderStats>>);

impl SharedStats {
    pub fn get(&self) -> RecorderStats {
        self.0
            .lock()
            .map_or_else(|poisoned| *poisoned.into_inner(), |stats| *stats)
    }

    fn set(&self, stats: RecorderStats) {
        match self.0.lock() {
            Ok(mut shared) => *shared = stats,
            Err(poisoned) => *poisoned.into_inner() = stats,
        }
    }
}

/// How a recording session ended.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOutcome {
    pub stats: RecorderStats,
    /// Times the bus was damaged under the recorder (the client then waits for a new epoch).
    pub read_errors: u64,
    /// New buses (appliance restarts) the recorder followed.
    pub epochs: u64,
    /// Book requests that could not be sent (no appliance takes them: a replay's bus).
    pub request_errors: u64,
}

/// Records every event of `client`'s bus until `stop` is set or `until` passes (asking the
/// appliance for the books each file lacks: [`Recorder::books_to_request`]), then records
/// what the bus still holds for it (up to [`DRAIN_LIMIT`]), so that an appliance stopping its
/// recorder after its last publication loses nothing, and closes every file. Nothing the bus
/// holds can make it panic: a damaged bus is an error the client reports, counted here.
pub fn record_bus<C: Clock>(
    client: &mut Client,
    mut recorder: Recorder<C>,
    stop: &AtomicBool,
    until: Option<Instant>,
    shared: Option<&SharedStats>,
) -> RunOutcome {
    let mut outcome = RunOutcome::default();
    let mut known_directory = usize::MAX;
    while !stop.load(Ordering::Relaxed) && until.is_none_or(|until| Instant::now() < until) {
        match client.poll() {
            Ok(Next::Events(events)) => {
                // The directory names an instrument before its first event is published, so
                // it is taken in before the batch is recorded.
                let directory = events.directory();
                if directory.len() != known_directory {
                    known_directory = directory.len();
                    recorder.learn(directory.iter());
                }
                recorder.record(&events);
            }
            Ok(Next::Overrun { missed, .. }) => {
                tracing::warn!(missed, "the bus lapped the recorder; a gap is written");
                recorder.overrun(missed);
            }
            Ok(Next::NewEpoch { epoch }) => {
                tracing::info!(epoch, "a new bus: new recording files");
                outcome.epochs += 1;
                recorder.new_epoch();
                known_directory = usize::MAX;
            }
            Ok(Next::Closed | Next::Removed | Next::Idle) => std::thread::sleep(IDLE_SLEEP),
            Err(error) => {
                outcome.read_errors += 1;
                tracing::error!(%error, "reading the bus failed; a gap is written, waiting for a new bus");
                recorder.bus_damaged();
                std::thread::sleep(IDLE_SLEEP);
            }
        }
        if client.directory().len() != known_directory {
            known_directory = client.directory().len();
            recorder.learn(client.directory().iter());
        }
        recorder.tick();
        // Every file stands on its own: the books a file lacks are asked for (issue 33).
        for (venue_id, instrument_id) in recorder.books_to_request() {
            if let Err(error) = client.request_snapshots(venue_id, instrument_id) {
                outcome.request_errors += 1;
                if outcome.request_errors == 1 {
                    tracing::warn!(%error, "the recorder cannot ask for books; files may lack them");
                }
            }
        }
        if let Some(shared) = shared {
            shared.set(recorder.stats());
        }
    }
    let drain_until = Instant::now() + DRAIN_LIMIT;
    while Instant::now() < drain_until {
        match client.poll() {
            Ok(Next::Events(events)) => recorder.record(&events),
            Ok(Next::Overrun { missed, .. }) => recorder.overrun(missed),
            Ok(Next::NewEpoch { .. } | Next::Closed | Next::Removed | Next::Idle) | Err(_) => break,
        }
    }
    outcome.stats = recorder.close();
    if let Some(shared) = shared {
        shared.set(outcome.stats);
    }
    outcome
}
