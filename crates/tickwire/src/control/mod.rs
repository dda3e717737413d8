//! A running appliance seen from its control thread, shared by `tickwire run`, `tickwire demo`
//! and the integration tests: the runtime, the venue feeds' counters, the snapshot fetcher, and the work
//! done on every control tick (stream status, snapshot requests and replies, malformed-message
//! logs, printed events).
//!
//! The control plane is split three ways:
//! - [`links`]: the decisions, sans-IO: statuses, replies and time in, [`links::LinkCommand`]s
//!   out (unit-tested on a fake clock in `links/tests.rs`);
//! - [`apply`]: the effects, the commands carried out on the [`Runtime`];
//! - `link_view` (and `metrics`): the view, health and Prometheus text;
//! - [`publish`]: what the serving thread (`serve`) is handed, every 100 ms and on every
//!   connection change.
//!
//! The control thread runs [`Session::tick`] after [`Session::wait`], which sleeps until a hot
//! stage or a worker (resolver, snapshots) hands it work, a connection's timer falls due, or the
//! caller's tick passes (`thread::wake`): each step of a connection is taken as soon as it
//! happens, not at the next tick.
//!
//! **Invariant:** `control/` names no venue; what differs between venues comes from
//! `venue::protocol::Protocol`.

use crate::clock::Clock;
use crate::config::LoadedConfig;
use crate::event::InstrumentId;
use crate::pipeline::{Runtime, RuntimeOptions};
use crate::ring;
use crate::strategy::stamps::Stamp;
use crate::strategy::Strategy;
use crate::thread::{ControlWait, Woken};
use crate::venue::feed::FeedCounters;
use crate::venue::resolve::{Resolve, ResolverWorker, SystemResolver};
use crate::venue::snapshot::SnapshotFetcher;
use crate::venue::{self, feed::SnapshotReply};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

pub mod apply;
pub mod bus;
mod link_view;
pub mod links;
mod metrics;
pub mod publish;
pub mod record;

pub use metrics::{memory_kb, LATENCY_BUCKETS_NS};

pub use links::{LinkCommand, LinkCounters, Role, SlotRef, StreamEnd, Venues};

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
    Runtime(#[from] crate::pipeline::RuntimeError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("more venues than venue ids (65536)")]
    TooManyVenues,
    #[error(transparent)]
    Bus(#[from] tickwire_bus::BusError),
    #[error("{0}")]
    BusDirectory(String),
    #[error("bus request socket {}: {source}", path.display())]
    BusSocket {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "venue {venue}: {symbols}: not listed by the venue (GET {path}); check the spelling in \
         the venue file's `symbols`"
    )]
    Unlisted {
        venue: String,
        path: &'static str,
        symbols: String,
    },
    #[error(transparent)]
    Http(#[from] crate::serve::ServeError),
    #[error(
        "cannot make the serving plane's private bus ([http] without [bus]) in {}: {source}",
        dir.display()
    )]
    PrivateBus {
        dir: std::path::PathBuf,
        source: std::io::Error,
    },
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
    /// What resolves venue hosts at each connection attempt (the system's resolver when
    /// `None`; tests inject one).
    pub resolver: Option<Arc<dyn Resolve>>,
}

pub struct Session {
    pub runtime: Runtime,
    /// Every venue's connections and their lifecycle.
    pub venues: Venues,
    /// Carries out what `venues` decides.
    applier: apply::Applier,
    /// Commands decided and not yet applied (kept for its allocation).
    commands: Vec<LinkCommand>,
    /// Per venue: its name and its feed's counters.
    pub feeds: Vec<(String, FeedCounters)>,
    pub instruments: Vec<Instrument>,
    /// The rings the strategy stage's text goes through (`--print-events`, the built-in
    /// strategies' lines and summaries), written out by this thread.
    printed: Vec<crate::strategy::output::OutputReader>,
    fetcher: SnapshotFetcher,
    clock: Clock,
    /// The serving thread, when `http.listen` is set.
    http: Option<crate::serve::HttpServer>,
    /// What was last published for it.
    window: publish::Window,
    /// When the stage histograms were last collected.
    collected_ns: u64,
    /// The shared-memory event bus, when `[bus]` is configured.
    bus: Option<bus::BusControl>,
    /// The DBN recorder thread, when `[record]` is configured.
    recorder: Option<record::RecorderThread>,
    /// Where the control thread sleeps until a stage or a worker hands it work.
    wait: ControlWait,
    /// Gives start-up's pages back once every venue is live (`[process]
    /// release_startup_pages`).
    release: Option<crate::pages::StartupRelease>,
    /// The serving plane's own bus (`[http]` without `[bus]`): `bus` is it. Last, so that it is
    /// removed after the serving thread that reads it (`http`) has stopped.
    private_bus: Option<bus::PrivateBus>,
}

/// How often the control thread collects the stage histograms.
const COLLECT_EVERY_NS: u64 = 100_000_000;

impl Session {
    /// Starts the hot threads and every venue's connections.
    pub fn start(
        loaded: &LoadedConfig,
        clock: Clock,
        extras: SessionExtras,
    ) -> Result<Session, ControlError> {
        let SessionExtras {
            print_events,
            stamps,
            strategy,
            resolver,
        } = extras;
        let wait = ControlWait::new()?;
        // Bound first: a port in use fails the start before any thread runs.
        let http_listener = match loaded.appliance.http.listen {
            Some(addr) => Some(crate::serve::bind(addr)?),
            None => None,
        };
        let mut feeds = Vec::new();
        let mut counters = Vec::new();
        let mut printed = Vec::new();
        let mut targets = Vec::new();
        let mut instruments = Vec::new();
        let mut plans = Vec::new();
        let mut specs = Vec::new();
        let mut venue_names = Vec::new();
        let mut base: InstrumentId = 0;
        let mut venue_ranges = Vec::new();
        // Instruments of venues that name theirs as the feed goes: the feed names them in the
        // bus's directory itself, so the file's symbols (`*`) are not listed there.
        let mut named_live = Vec::new();
        for (index, loaded_venue) in loaded.venues.iter().enumerate() {
            let config = &loaded_venue.venue;
            let venue_id = u16::try_from(index).map_err(|_| ControlError::TooManyVenues)?;
            let built = venue::feed_for(venue_id, config, base)?;
            feeds.push(built.feed);
            let activity = built.counters.activity.clone();
            counters.push((config.name.clone(), built.counters));
            let target = venue::snapshot_target(config, base)?;
            // A symbol the venue does not list would only show as a stream that never delivers:
            // checked now, off the hot path, against the venue's instrument list where it has
            // one. A list that cannot be had is said once and not waited for.
            if let Some(target) = &target {
                match venue::snapshot::check_listed(target) {
                    venue::snapshot::Listing::Listed => {}
                    venue::snapshot::Listing::Unlisted { path, symbols } => {
                        return Err(ControlError::Unlisted {
                            venue: config.name.clone(),
                            path,
                            symbols: symbols.join(", "),
                        });
                    }
                    venue::snapshot::Listing::Unavailable(reason) => tracing::warn!(
                        venue = %config.name,
                        "the venue's instrument list could not be read, so its symbols are not \
                         checked: {reason}"
                    ),
                }
            }
            targets.push(target);
            // The address is not resolved here but at every attempt (`control::apply`): a host
            // that does not resolve now is retried with backoff, and a venue that moves is
            // followed.
            let spec = match venue::subscribe_spec(config, &loaded.appliance.net) {
                Ok(spec) => Some(spec),
                Err(error) => {
                    tracing::error!("{error}");
                    None
                }
            };
            let login = venue::login_for(config)?;
            plans.push(links::VenuePlan {
                login,
                config,
                id: venue_id,
                instrument_base: base,
                activity,
                prepared: spec.is_some(),
            });
            specs.push(spec);
            venue_names.push(config.name.clone());
            let first = base;
            let live = config.kind.protocol().names_instruments_live(config);
            for symbol in &config.symbols {
                named_live.push(live);
                instruments.push(Instrument {
                    id: base,
                    venue: config.name.clone(),
                    symbol: symbol.clone(),
                });
                base += 1;
            }
            // A venue that names its instruments as the feed goes (`*`: every stock of an
            // exchange feed) keeps ids for all it may name.
            base = base.max(first.saturating_add(config.kind.protocol().instrument_span(config)));
            venue_ranges.push(first..base);
        }
        // With [http] and no [bus], a bus of the serving plane's own: `/v1/quotes`, `/v1/book`
        // and `/v1/stream` read the bus, and a user who turns the status page on expects them.
        let private_bus = match (&loaded.appliance.bus, loaded.appliance.http.listen) {
            (None, Some(_)) => Some(bus::PrivateBus::create()?),
            _ => None,
        };
        let bus_config = match &private_bus {
            Some(private) => Some(private.config()),
            None => loaded.appliance.bus.clone(),
        };
        // The bus before the threads: its file and socket fail the start with a clear error.
        let (bus, bus_writer) = match &bus_config {
            Some(config) => {
                let venue_of = |id: InstrumentId| {
                    venue_ranges
                        .iter()
                        .position(|range| range.contains(&id))
                        .unwrap_or(0) as crate::event::VenueId
                };
                let listed: Vec<bus::BusInstrument<'_>> = instruments
                    .iter()
                    .zip(&named_live)
                    .filter(|(_, live)| !**live)
                    .map(|(instrument, _)| bus::BusInstrument {
                        id: instrument.id,
                        venue_id: venue_of(instrument.id),
                        venue: &instrument.venue,
                        symbol: &instrument.symbol,
                    })
                    .collect();
                // One partition per decoder, each written by its decoder alone.
                let partitions = loaded.appliance.threads.decoder_count() as u32;
                let (mut control, writers) = bus::BusControl::create(
                    config,
                    &listed,
                    venue_ranges.clone(),
                    partitions,
                    clock.now_ns(),
                )?;
                if named_live.iter().any(|live| *live) {
                    control.watch_live_naming();
                }
                if private_bus.is_some() {
                    tracing::info!(
                        path = %control.path().display(),
                        capacity = config.capacity,
                        "the serving plane's private event bus ([http] without [bus]; removed \
                         at exit): add a [bus] table to publish one for other readers"
                    );
                } else {
                    tracing::info!(
                        path = %control.path().display(),
                        capacity = config.capacity,
                        partitions,
                        "event bus: read it with `tickwire tail --bus {}`",
                        control.path().display()
                    );
                }
                (Some(control), writers)
            }
            None => (None, Vec::new()),
        };
        let seed = clock.now_ns() ^ u64::from(std::process::id());
        let (mut venues, conn_venues) =
            Venues::plan(plans, loaded.appliance.net.max_connections, seed)?;
        let names = crate::strategy::print::EventNames::new(
            loaded
                .venues
                .iter()
                .map(|loaded_venue| loaded_venue.venue.name.clone())
                .collect(),
            instruments
                .iter()
                .map(|instrument| crate::strategy::print::InstrumentName {
                    venue: instrument.venue.clone(),
                    symbol: instrument.symbol.clone(),
                })
                .collect(),
        );
        let strategy = match strategy {
            Some(strategy) => Some(strategy),
            None => {
                let (strategy, output) = crate::strategy::builtin::from_config(
                    &loaded.appliance.strategy,
                    names.clone(),
                );
                printed.extend(output);
                strategy
            }
        };
        // `--print-events` prints what the strategy stage hands the strategy: every event,
        // gaps and statuses included, ahead of the strategy itself.
        let strategy = if print_events {
            use crate::strategy::output;
            let (lines, reader) = output::output(output::PRINT_RING_BYTES, 64 << 10);
            let tap = crate::strategy::print::EventTap::new(names, lines, strategy);
            printed.push(reader);
            Some(Box::new(tap) as Box<dyn Strategy>)
        } else {
            strategy
        };
        // The decoder's budget for the books bus readers ask for (none come without a bus).
        let bus_config = loaded.appliance.bus.clone().unwrap_or_default();
        let book_requests = crate::pipeline::book_requests::BookRequestConfig {
            levels_per_s: bus_config.snapshot_levels_per_s,
            queue_books: bus_config.snapshot_queue_books,
            venues: venue_ranges,
        };
        let options = RuntimeOptions {
            feeds,
            conn_venues,
            board_instruments: base as usize,
            stamps,
            strategy,
            bus: bus_writer,
            book_requests,
            control_wakeup: Some(wait.wakeup()),
        };
        // The recorder attaches before the first event is published, and reads from the
        // bus's oldest event, so that the recording starts with the session.
        let recorder = match &bus {
            Some(control) => record::RecorderThread::start(loaded, control.path())?,
            None => None,
        };
        let mut runtime = match Runtime::start(loaded, clock, options) {
            Ok(runtime) => runtime,
            Err(error) => {
                if let Some(recorder) = recorder {
                    let _ = recorder.stop();
                }
                return Err(error.into());
            }
        };
        tracing::info!("{}", runtime.net_backend);
        // The venues' decoders: named in each venue file (`decoder = N`) or assigned in the
        // order of the venue list, the same for the same files.
        for (index, loaded_venue) in loaded.venues.iter().enumerate() {
            let decoder = runtime.decoder_of(index as crate::event::VenueId);
            tracing::info!(
                venue = %loaded_venue.venue.name,
                decoder,
                thread = %runtime.decoders.get(decoder).map_or("", |view| view.thread.as_str()),
                chosen = if loaded_venue.venue.decoder.is_some() { "venue file" } else { "default" },
                "venue decoder"
            );
        }
        let fetcher = SnapshotFetcher::start(targets, clock, Some(wait.wakeup()))?;
        let resolver = ResolverWorker::start(
            resolver.unwrap_or_else(|| Arc::new(SystemResolver)),
            Some(wait.wakeup()),
        )?;
        let mut applier = apply::Applier::new(specs, venues.slot_paths(), venue_names, resolver);
        let mut commands = Vec::new();
        venues.start(clock.now_ns(), &mut commands);
        applier.apply(&mut runtime, &mut commands)?;
        let mut session = Session {
            runtime,
            venues,
            applier,
            commands,
            feeds: counters,
            instruments,
            printed,
            fetcher,
            clock,
            http: None,
            window: publish::Window::default(),
            collected_ns: 0,
            bus,
            recorder,
            wait,
            release: loaded
                .appliance
                .process
                .release_startup_pages
                .then(crate::pages::StartupRelease::default),
            private_bus,
        };
        if let Some(listener) = http_listener {
            let instruments = session
                .instruments
                .iter()
                .map(|instrument| crate::serve::InstrumentView {
                    venue: instrument.venue.clone(),
                    symbol: instrument.symbol.clone(),
                    instrument_id: instrument.id,
                })
                .collect();
            let first = session.build_published(clock.now_ns());
            let bus_path = session.bus.as_ref().map(|bus| bus.path().to_owned());
            let http = crate::serve::HttpServer::start(
                listener,
                &loaded.appliance.http,
                instruments,
                bus_path,
                first,
            )?;
            tracing::info!(
                addr = %http.local_addr(),
                "serving plane: http://{}/ (status page), /metrics, /healthz, /readyz, /v1/...",
                http.local_addr()
            );
            session.http = Some(http);
        }
        Ok(session)
    }

    /// Sleeps until there is work for [`Session::tick`]: a network status, a venue's reply, a
    /// snapshot request, a worker's answer (each wakes this thread), a connection's timer falling
    /// due, or `at_most` passing; or until `extra` (a signalfd) becomes readable. Call `tick`
    /// after it, whatever it returns.
    pub fn wait(
        &mut self,
        at_most: Duration,
        extra: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> std::io::Result<Woken> {
        let now_ns = self.clock.now_ns();
        let release = self
            .release
            .as_ref()
            .and_then(|release| release.deadline_ns());
        let timeout = match self
            .venues
            .next_deadline_ns()
            .into_iter()
            .chain(release)
            .min()
        {
            Some(deadline) => at_most.min(Duration::from_nanos(deadline.saturating_sub(now_ns))),
            None => at_most,
        };
        let runtime = &mut self.runtime;
        self.wait
            .wait(timeout, extra, || runtime.has_control_work())
    }

    /// Where the serving plane listens (with the port the kernel chose for port 0).
    pub fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.http.as_ref().map(crate::serve::HttpServer::local_addr)
    }

    /// The serving plane, when `[http] listen` is set.
    pub fn http(&self) -> Option<&crate::serve::HttpServer> {
        self.http.as_ref()
    }

    /// The control thread's routine work; returns whether a connection changed state (a
    /// network status, an acknowledgement, a timer: whatever moved a lifecycle).
    pub fn tick(&mut self) -> Result<bool, ControlError> {
        let now_ns = self.clock.now_ns();
        let statuses = self.runtime.take_statuses();
        for status in statuses {
            self.venues.on_status(now_ns, status, &mut self.commands);
        }
        for resolved in self.applier.take_resolved() {
            self.venues
                .on_resolved(now_ns, resolved, &mut self.commands);
        }
        self.applier.apply(&mut self.runtime, &mut self.commands)?;
        for reply in self.runtime.take_replies() {
            self.venues.on_reply(now_ns, reply, &mut self.commands);
        }
        self.applier.apply(&mut self.runtime, &mut self.commands)?;
        let runtime = &self.runtime;
        self.venues.tick(
            now_ns,
            &|slot| runtime.last_read_ns(slot),
            &mut self.commands,
        );
        self.applier.apply(&mut self.runtime, &mut self.commands)?;
        for request in self.runtime.take_snapshot_requests() {
            let name = self.venues.name(usize::from(request.venue)).to_owned();
            tracing::info!(venue = %name, instrument = request.instrument, "fetching a depth snapshot");
            self.fetcher.request(request);
        }
        for reply in self.fetcher.take_replies() {
            self.log_snapshot(&reply);
            self.runtime.deliver_snapshot(reply)?;
        }
        for sample in self.runtime.take_malformed() {
            let venue = self.venues.name(usize::from(sample.venue));
            match sample.kind {
                crate::venue::feed::SampleKind::Malformed => tracing::warn!(
                    venue = %venue,
                    error = %sample.error(),
                    offset = sample.offset,
                    "malformed message skipped (one sample per second at most): {}",
                    sample.text()
                ),
                crate::venue::feed::SampleKind::Limit => tracing::error!(
                    venue = %venue,
                    error = %sample.error(),
                    "a bound of the venue's config was reached (databento.max_orders_per_book \
                     or databento.max_instrument_mappings): the instrument got a gap; logged \
                     once per limit, counted in tickwire_venue_book_events_total{{event=\"limit\"}}: {}",
                    sample.text()
                ),
            }
        }
        self.print_events()?;
        if let Some(bus) = self.bus.as_mut() {
            bus.poll(now_ns, &mut self.runtime);
        }
        // Keep the stage histograms flowing to this thread, so a scrape or a report sees them
        // whole (each recorder hands over at its next poll after a request); every
        // `COLLECT_EVERY_NS`, not every tick: a merge walks the whole histogram.
        if now_ns.saturating_sub(self.collected_ns) >= COLLECT_EVERY_NS {
            self.collected_ns = now_ns;
            self.runtime.receive_to_decoded.collect();
            self.runtime.decoded_to_strategy.collect();
            self.runtime.wire_to_strategy.collect();
        }
        if let Some(released) = self
            .release
            .as_mut()
            .and_then(|release| release.tick(now_ns, self.venues.all_live()))
        {
            tracing::info!(
                code_kib = released.code_bytes / 1024,
                heap_trimmed = released.heap_trimmed,
                "every venue live: gave back start-up's code and heap pages \
                 ([process] release_startup_pages)"
            );
        }
        let changed = self.venues.take_changed();
        if changed || now_ns.saturating_sub(self.window.published_ns) >= publish::PUBLISH_EVERY_NS {
            self.publish(now_ns);
        }
        Ok(changed)
    }

    fn log_snapshot(&self, reply: &SnapshotReply) {
        let venue = self.venues.name(usize::from(reply.venue));
        match &reply.result {
            Ok(snapshot) => tracing::info!(
                venue,
                instrument = reply.instrument,
                sequence = snapshot.sequence,
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
        write_printed(&mut self.printed)
    }

    /// The event bus, when `[bus]` is configured, or the serving plane's private one
    /// ([`Session::private_bus`]).
    pub fn bus(&self) -> Option<&bus::BusControl> {
        self.bus.as_ref()
    }

    /// The directory of the serving plane's private bus, when `[http]` is on without `[bus]`.
    pub fn private_bus(&self) -> Option<&std::path::Path> {
        self.private_bus.as_ref().map(bus::PrivateBus::dir)
    }

    /// Printed lines (and strategy summaries) lost because this thread did not keep up.
    pub fn print_dropped(&self) -> u64 {
        self.printed.iter().map(|reader| reader.dropped()).sum()
    }

    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Stops cleanly: close frames on every connection (each answered or given up on within
    /// `close_timeout`), the rings drained into the strategy (within `drain_timeout`), what is
    /// left to print written out, then the hot threads stopped. Returns the names of threads
    /// that panicked.
    pub fn shutdown_within(
        mut self,
        close_timeout: std::time::Duration,
        drain_timeout: std::time::Duration,
    ) -> Vec<String> {
        let deadline = std::time::Instant::now() + close_timeout;
        self.venues
            .close_all(self.clock.now_ns(), &mut self.commands);
        if self
            .applier
            .apply(&mut self.runtime, &mut self.commands)
            .is_ok()
        {
            while !self.venues.all_closed() && std::time::Instant::now() < deadline {
                // Until a close is answered (a status wakes this thread) or a close times out.
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if self
                    .wait(left.min(Duration::from_millis(20)), None)
                    .is_err()
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                if self.tick().is_err() {
                    break;
                }
            }
        }
        if !self.runtime.drain(drain_timeout) {
            tracing::warn!("the rings did not drain in time; stopping anyway");
        }
        let _ = self.print_events();
        let mut printed = std::mem::take(&mut self.printed);
        let mut lines = self.runtime.shutdown();
        // What the strategy wrote in its `finish` (a last summary).
        let _ = write_printed(&mut printed);
        // After the runtime: every event is on the bus, and the recorder drains it.
        if let Some(recorder) = self.recorder.take() {
            if let Err(thread) = recorder.stop() {
                lines.push(thread);
            }
        }
        lines
    }

    /// [`Session::shutdown_within`] with the appliance's budget: 1 s for the closes, 0.5 s to
    /// drain, so that a stop signal is done within 2 s.
    pub fn shutdown(self) -> Vec<String> {
        self.shutdown_within(
            std::time::Duration::from_millis(1_000),
            std::time::Duration::from_millis(500),
        )
    }
}

/// Writes out what the strategy stage's rings hold: lines to stdout, summaries to the log.
fn write_printed(printed: &mut [crate::strategy::output::OutputReader]) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for reader in printed.iter_mut() {
        reader.drain(&mut out, crate::strategy::output::log_line)?;
    }
    out.flush()
}
