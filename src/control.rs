//! A running appliance seen from its control thread, shared by `tickwire run`, `tickwire demo`
//! and the integration tests: the runtime, the venue feeds' counters, the snapshot fetcher, and the work
//! done on every control tick (stream status, snapshot requests and replies, malformed-message
//! logs, printed events).

use crate::clock::Clock;
use crate::config::LoadedConfig;
use crate::event::InstrumentId;
use crate::metrics::CounterReader;
use crate::ring::{self, FrameConsumer};
use crate::runtime::{NetStatus, Runtime, RuntimeOptions};
use crate::strategy::stamps::Stamp;
use crate::strategy::Strategy;
use crate::venue::binance::feed::FeedCounters;
use crate::venue::snapshot::SnapshotFetcher;
use crate::venue::{self, feed::SnapshotReply};
use std::io::Write;

/// Bytes of printed JSON lines buffered between the decoder and stdout.
const PRINT_RING_BYTES: usize = 64 << 20;

/// One instrument as the control thread shows it.
pub struct Instrument {
    pub id: InstrumentId,
    pub venue: String,
    pub symbol: String,
}

/// Why a session could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Venue(#[from] crate::venue::VenueError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("more venues than venue ids (65536)")]
    TooManyVenues,
}

/// What a session adds to its config.
#[derive(Default)]
pub struct SessionExtras {
    /// Print every event as a JSON line on stdout (`run --print-events`).
    pub print_events: bool,
    /// The simulator's send stamps (the demo).
    pub stamps: Option<ring::Consumer<Stamp>>,
    /// User code on the strategy thread.
    pub strategy: Option<Box<dyn Strategy>>,
}

pub struct Session {
    pub runtime: Runtime,
    pub venues: VenueTracker,
    /// Per venue: its name and its feed's counters.
    pub feeds: Vec<(String, FeedCounters)>,
    pub instruments: Vec<Instrument>,
    printed: Vec<(FrameConsumer, CounterReader)>,
    fetcher: SnapshotFetcher,
    clock: Clock,
}

impl Session {
    /// Starts the hot threads and opens every venue's stream.
    pub fn start(
        loaded: &LoadedConfig,
        clock: Clock,
        extras: SessionExtras,
    ) -> Result<Session, ControlError> {
        let SessionExtras {
            print_events,
            stamps,
            strategy,
        } = extras;
        let mut feeds = Vec::new();
        let mut counters = Vec::new();
        let mut printed = Vec::new();
        let mut targets = Vec::new();
        let mut instruments = Vec::new();
        let mut base: InstrumentId = 0;
        for (index, loaded_venue) in loaded.venues.iter().enumerate() {
            let config = &loaded_venue.venue;
            let venue_id = u16::try_from(index).map_err(|_| ControlError::TooManyVenues)?;
            let built = venue::feed_for(
                venue_id,
                config,
                base,
                print_events.then_some(PRINT_RING_BYTES),
            )?;
            feeds.push(Some(built.feed));
            counters.push((config.name.clone(), built.counters));
            printed.extend(built.printed);
            targets.push(venue::snapshot_target(config, base)?);
            for symbol in &config.symbols {
                instruments.push(Instrument {
                    id: base,
                    venue: config.name.clone(),
                    symbol: symbol.clone(),
                });
                base += 1;
            }
        }
        let options = RuntimeOptions {
            feeds,
            board_instruments: base as usize,
            stamps,
            strategy,
        };
        let mut runtime = Runtime::start(loaded, clock, options)?;
        tracing::info!("{}", runtime.net_backend);
        let fetcher = SnapshotFetcher::start(targets, clock)?;
        for (index, loaded_venue) in loaded.venues.iter().enumerate() {
            let config = &loaded_venue.venue;
            match venue::stream_spec(config, &loaded.appliance.net) {
                Ok(spec) => {
                    tracing::info!(venue = %config.name, addr = %spec.addr, "connecting");
                    runtime.open_stream(index as u32, spec)?;
                }
                Err(error) => tracing::error!("{error}"),
            }
        }
        Ok(Session {
            runtime,
            venues: VenueTracker::new(loaded),
            feeds: counters,
            instruments,
            printed,
            fetcher,
            clock,
        })
    }

    /// The control thread's routine work; returns whether a stream changed state.
    pub fn tick(&mut self) -> Result<bool, ControlError> {
        let statuses = self.runtime.take_statuses();
        let changed = !statuses.is_empty();
        for status in statuses {
            if let NetStatus::Closed { conn, .. } = &status {
                self.runtime.notify_disconnect(*conn)?;
            }
            self.venues.apply(status);
        }
        for request in self.runtime.take_snapshot_requests() {
            let name = self.venues.name(u32::from(request.venue)).to_owned();
            tracing::info!(venue = %name, instrument = request.instrument, "fetching a depth snapshot");
            self.fetcher.request(request);
        }
        for reply in self.fetcher.take_replies() {
            self.log_snapshot(&reply);
            self.runtime.deliver_snapshot(reply)?;
        }
        for sample in self.runtime.take_malformed() {
            tracing::warn!(
                venue = %self.venues.name(u32::from(sample.venue)),
                error = %sample.error(),
                offset = sample.offset,
                "malformed message skipped (one sample per second at most): {}",
                sample.text()
            );
        }
        self.print_events()?;
        Ok(changed)
    }

    fn log_snapshot(&self, reply: &SnapshotReply) {
        let venue = self.venues.name(u32::from(reply.venue));
        match &reply.result {
            Ok(snapshot) => tracing::info!(
                venue,
                instrument = reply.instrument,
                last_update_id = snapshot.last_update_id,
                bids = snapshot.bids.len(),
                asks = snapshot.asks.len(),
                "depth snapshot"
            ),
            Err(error) => tracing::warn!(
                venue,
                instrument = reply.instrument,
                "depth snapshot failed (the book retries with backoff): {error}"
            ),
        }
    }

    fn print_events(&mut self) -> std::io::Result<()> {
        if self.printed.is_empty() {
            return Ok(());
        }
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for (lines, _) in &mut self.printed {
            let mut result = Ok(());
            lines.drain(usize::MAX, |_, line| {
                if result.is_ok() {
                    result = out.write_all(line);
                }
            });
            result?;
        }
        out.flush()?;
        Ok(())
    }

    /// Printed lines lost because stdout did not keep up.
    pub fn print_dropped(&self) -> u64 {
        self.printed.iter().map(|(_, dropped)| dropped.get()).sum()
    }

    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Stops the hot threads, after writing out what is left to print.
    pub fn shutdown(mut self) -> Vec<String> {
        let _ = self.print_events();
        self.runtime.shutdown()
    }
}

/// Which venues are live, from the network thread's status reports; logs each transition once.
pub struct VenueTracker {
    names: Vec<String>,
    live: Vec<bool>,
    /// Streams that ended (closed by the venue, reset, or failed), all venues together.
    pub streams_ended: u64,
    /// The most recent ends, oldest first (at most `ENDS_KEPT`), for reports and tests.
    pub ends: std::collections::VecDeque<StreamEnd>,
}

/// How a venue stream ended.
#[derive(Clone, Debug)]
pub struct StreamEnd {
    pub conn: u32,
    /// The WebSocket close code the venue sent, if it sent one.
    pub close_code: Option<u16>,
    /// What went wrong, if anything did.
    pub error: Option<String>,
}

const ENDS_KEPT: usize = 64;

impl VenueTracker {
    pub fn new(loaded: &LoadedConfig) -> VenueTracker {
        VenueTracker {
            names: loaded.venues.iter().map(|v| v.venue.name.clone()).collect(),
            live: vec![false; loaded.venues.len()],
            streams_ended: 0,
            ends: std::collections::VecDeque::new(),
        }
    }

    pub fn name(&self, conn: u32) -> &str {
        self.names.get(conn as usize).map_or("?", String::as_str)
    }

    pub fn apply(&mut self, status: NetStatus) {
        match status {
            NetStatus::Open { conn } => {
                tracing::info!(venue = %self.name(conn), "venue live");
                if let Some(live) = self.live.get_mut(conn as usize) {
                    *live = true;
                }
            }
            NetStatus::Closed {
                conn,
                close_code,
                error,
            } => {
                self.streams_ended += 1;
                if self.ends.len() == ENDS_KEPT {
                    self.ends.pop_front();
                }
                self.ends.push_back(StreamEnd {
                    conn,
                    close_code,
                    error: error.clone(),
                });
                match &error {
                    Some(error) => {
                        tracing::warn!(venue = %self.name(conn), ?close_code, "venue stream ended: {error}")
                    }
                    None => {
                        tracing::warn!(venue = %self.name(conn), ?close_code, "venue closed the stream")
                    }
                }
                // Reconnecting is the connection lifecycle's job (backoff, resubscribe); until
                // it exists the venue stays down and the status says so.
                if let Some(live) = self.live.get_mut(conn as usize) {
                    *live = false;
                }
            }
            NetStatus::OpenFailed { conn, error } => {
                self.streams_ended += 1;
                self.ends.push_back(StreamEnd {
                    conn,
                    close_code: None,
                    error: Some(error.clone()),
                });
                tracing::error!(venue = %self.name(conn), "cannot open the venue stream: {error}");
            }
        }
    }

    pub fn all_live(&self) -> bool {
        self.live.iter().all(|live| *live)
    }

    pub fn status_line(&self, threads: usize) -> String {
        let live = self.live.iter().filter(|live| **live).count();
        format!(
            "running: {threads} hot threads; {live}/{} venues live",
            self.live.len()
        )
    }
}
