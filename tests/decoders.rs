//! Several decoders (issue 36): three simulated Binance venues, each a simulator of its own,
//! decoded on two and on three decoder threads. Every event reaches the strategy exactly once and
//! each instrument's in order; a decoder held back delays only its own venues; snapshots,
//! resyncs and reconnections reach the decoder that owns the venue.

use super::support::appliance::{quote_list, Recorded};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config;
use tickwire::control::{Session, SessionExtras};
use tickwire::event::{flags, Body, Event, EventKind, GapReason, VenueId};
use tickwire_sim::source::{SyntheticConfig, SyntheticSource};
use tickwire_sim::{Faults, Sim, SimHandle, SimOptions};

const VENUES: [&str; 3] = ["a", "b", "c"];

/// Three simulators and an appliance with `decoders` decoders that reads all three.
struct Three {
    sims: Vec<SimHandle>,
    session: Session,
    recorded: Recorded,
    _dir: tempfile::TempDir,
}

/// What each venue's simulator and file get: its faults, what its file adds, how many messages
/// its market makes (`None`: no end).
struct VenueSetup {
    faults: Faults,
    /// `decoder = N` in the venue file.
    decoder: Option<usize>,
    /// Tables appended to the venue file.
    extra: String,
    messages: Option<u64>,
    rate: f64,
}

impl Default for VenueSetup {
    fn default() -> VenueSetup {
        VenueSetup {
            faults: Faults::default(),
            decoder: None,
            extra: String::new(),
            messages: None,
            rate: 300.0,
        }
    }
}

fn appliance_text(venue_files: &[String], decoders: usize) -> String {
    let mut text = format!(
        "venues = [{}]\n[log]\nlevel = \"warn\"\n\
         [rings]\nframe_ring_bytes = 4194304\nevent_ring_slots = 65536\n\
         [net]\nwait = \"block\"\nblock_timeout_us = 1000\nmax_connections = 16\n\
         [threads.net]\nwait = \"spin-then-yield\"\nspin_iterations = 100\n",
        venue_files
            .iter()
            .map(|file| format!("{file:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for _ in 0..decoders {
        text.push_str(
            "[[threads.decoders]]\nwait = \"park\"\nspin_iterations = 100\npark_timeout_us = 1000\n",
        );
    }
    text.push_str(
        "[threads.strategy]\nwait = \"park\"\nspin_iterations = 100\npark_timeout_us = 1000\n",
    );
    text
}

fn write_venue(dir: &Path, name: &str, sim: &SimHandle, setup: &VenueSetup) -> String {
    let port = sim.addr().port();
    let file = format!("{name}.toml");
    let decoder = setup
        .decoder
        .map_or(String::new(), |decoder| format!("decoder = {decoder}\n"));
    std::fs::write(
        dir.join(&file),
        format!(
            "{decoder}name = {name:?}\nkind = \"binance-usdm-futures\"\n\
             url = \"wss://127.0.0.1:{port}\"\nrest_url = \"https://127.0.0.1:{port}\"\n\
             symbols = [{}]\nchannels = [{}]\n[tls]\nextra_ca_file = {:?}\n{}\n",
            quote_list(&["BTCUSDT", "ETHUSDT"]),
            quote_list(&["bookTicker", "depth@100ms", "aggTrade"]),
            sim.ca_pem_path().display().to_string(),
            setup.extra,
        ),
    )
    .unwrap();
    file
}

impl Three {
    fn start(decoders: usize, setups: Vec<VenueSetup>) -> Three {
        Three::start_with(decoders, setups, |_| String::new())
    }

    /// [`Three::start`], with `extra(dir)` appended to the appliance file (tables such as
    /// `[bus]`, with paths in the test's directory).
    fn start_with(
        decoders: usize,
        setups: Vec<VenueSetup>,
        extra: impl FnOnce(&Path) -> String,
    ) -> Three {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::calibrate();
        let mut sims = Vec::new();
        let mut files = Vec::new();
        for (name, setup) in VENUES.iter().zip(setups) {
            let mut options = SimOptions::new(dir.path().join(format!("sim-{name}")));
            options.clock = clock;
            options.faults = setup.faults.clone();
            let source = SyntheticSource::new(SyntheticConfig {
                symbols: 2,
                rate_per_sec: setup.rate,
                duration_messages: setup.messages,
                ..SyntheticConfig::default()
            })
            .unwrap();
            let sim = Sim::start(options, Box::new(source)).expect("the simulator starts");
            files.push(write_venue(dir.path(), name, &sim, &setup));
            sims.push(sim);
        }
        let appliance: PathBuf = dir.path().join("tickwire.toml");
        let text = appliance_text(&files, decoders) + &extra(dir.path());
        std::fs::write(&appliance, text).unwrap();
        let loaded = config::load(&appliance).unwrap_or_else(|errors| panic!("{errors}"));
        let recorded = Recorded::default();
        let session = Session::start(
            &loaded,
            clock,
            SessionExtras {
                strategy: Some(Box::new(recorded.clone())),
                ..SessionExtras::default()
            },
        )
        .expect("the appliance starts");
        Three {
            sims,
            session,
            recorded,
            _dir: dir,
        }
    }

    fn run_until(
        &mut self,
        timeout: Duration,
        what: &str,
        mut done: impl FnMut(&mut Three) -> bool,
    ) {
        let started = Instant::now();
        loop {
            self.session.tick().expect("control tick");
            assert!(self.session.runtime.all_running(), "a hot thread ended");
            if done(self) {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out after {timeout:?} waiting for: {what}; events per venue {:?}",
                (0..3)
                    .map(|venue| self.venue_events(venue).len())
                    .collect::<Vec<_>>()
            );
            self.session
                .wait(Duration::from_millis(10), None)
                .expect("control wait");
        }
    }

    fn venue_events(&self, venue: VenueId) -> Vec<Event> {
        self.recorded
            .snapshot()
            .into_iter()
            .filter(|event| event.header.venue_id == venue)
            .collect()
    }

    fn book_syncs(&self, venue: usize) -> u64 {
        self.session.feeds[venue].1.book_syncs.get()
    }

    /// Events the decoders published, all of them together.
    fn published(&self) -> u64 {
        self.session
            .runtime
            .decoders
            .iter()
            .map(|view| view.load.events.get())
            .sum()
    }

    fn dir(&self) -> &Path {
        self._dir.path()
    }

    fn finish(self) -> Vec<Event> {
        let failed = self.session.shutdown();
        assert!(failed.is_empty(), "threads panicked: {failed:?}");
        drop(self.sims);
        self.recorded.snapshot()
    }
}

/// Each instrument's quotes and trades as the venue sent them (not derived from a book): their
/// venue sequence numbers rise strictly, so none came twice and none out of order.
fn assert_in_order_per_instrument(events: &[Event]) {
    let mut last: HashMap<(u32, EventKind), u64> = HashMap::new();
    let mut checked = 0;
    for event in events {
        let kind = event.header.kind;
        if !matches!(kind, EventKind::Quote | EventKind::Trade)
            || event.header.flags & flags::DERIVED != 0
        {
            continue;
        }
        let key = (event.header.instrument_id, kind);
        let seq = event.header.venue_seq;
        if let Some(&before) = last.get(&key) {
            assert!(
                seq > before,
                "instrument {} {kind:?}: {seq} after {before}",
                event.header.instrument_id
            );
        }
        last.insert(key, seq);
        checked += 1;
    }
    assert!(checked > 0, "some quotes and trades were checked");
}

fn every_event_once_and_in_order(decoders: usize) {
    let setups = (0..3)
        .map(|_| VenueSetup {
            messages: Some(1_500),
            rate: 500.0,
            ..VenueSetup::default()
        })
        .collect();
    // The event bus on: one partition per decoder, each ring big enough to hold the session.
    let mut three = Three::start_with(decoders, setups, |dir| {
        format!(
            "[bus]\npath = {:?}\ncapacity = 65536\n",
            dir.join("tickwire.bus").display().to_string()
        )
    });
    let bus_path = three.dir().join("tickwire.bus");
    // A client attached before the markets play out reads the whole session.
    let mut client = tickwire_client::Client::options()
        .start(tickwire_bus::Start::Oldest)
        .attach(&bus_path)
        .expect("the client attaches");
    assert_eq!(client.reader().partitions(), decoders as u32);
    let mut bus_events: Vec<Event> = Vec::new();
    let drain = |client: &mut tickwire_client::Client, into: &mut Vec<Event>| loop {
        match client.poll().expect("the client reads") {
            tickwire_client::Next::Events(events) => into.extend_from_slice(&events),
            // Idle, or the appliance stopped (its bus closed, or removed at exit): the client
            // keeps its mapping, so everything published was read before.
            tickwire_client::Next::Idle
            | tickwire_client::Next::Closed
            | tickwire_client::Next::Removed => return,
            other => panic!("the bus reader saw {other:?}"),
        }
    };
    // The default assignment: in list order, the decoder with the fewest venues so far.
    let expected: Vec<usize> = (0..3).map(|venue| venue % decoders).collect();
    assert_eq!(three.session.runtime.venue_decoders, expected);
    for (index, view) in three.session.runtime.decoders.iter().enumerate() {
        assert_eq!(view.thread, format!("tw-decoder-{index}"));
    }
    three.run_until(
        Duration::from_secs(60),
        "every market played out and every event at the strategy",
        |three| {
            let done = three.sims.iter().all(|sim| sim.stats().source_done);
            let recorded = three.recorded.snapshot().len() as u64;
            done && recorded > 0
                && recorded == three.published()
                && (0..3).all(|venue| three.book_syncs(venue) >= 1)
        },
    );
    // Let anything still in flight arrive; nothing more may come but what was published.
    std::thread::sleep(Duration::from_millis(200));
    three.run_until(Duration::from_secs(10), "the pipeline drained", |three| {
        three.recorded.snapshot().len() as u64 == three.published()
    });
    drain(&mut client, &mut bus_events);
    // Decoder k wrote partition k: the metrics' count of each partition is its venues' events.
    let metrics = three.session.render_metrics();
    assert!(
        metrics.contains(&format!("\ntickwire_bus_partitions {decoders}\n")),
        "{metrics}"
    );
    for k in 0..decoders {
        let line = format!("tickwire_bus_partition_events_published_total{{partition=\"{k}\"}} ");
        let published: u64 = metrics
            .lines()
            .find_map(|text| text.strip_prefix(line.as_str()))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {line}in {metrics}"));
        let of_decoder = bus_events
            .iter()
            // An event of no venue (the appliance's own status) is decoder 0's.
            .filter(|event| {
                expected
                    .get(usize::from(event.header.venue_id))
                    .copied()
                    .unwrap_or(0)
                    == k
            })
            .count() as u64;
        assert_eq!(published, of_decoder, "partition {k}");
        assert!(published > 0, "partition {k}");
    }
    let runtime = &three.session.runtime;
    assert_eq!(runtime.frame_ring.overflows(), 0);
    assert_eq!(runtime.event_ring.overflows(), 0);
    assert_eq!(runtime.frames_undecoded.get(), 0);
    assert_eq!(runtime.events_received.get(), three.published());
    for (index, view) in runtime.decoders.iter().enumerate() {
        assert!(view.load.events.get() > 0, "decoder {index} published");
        assert!(view.load.publications.get() > 0);
        assert!(view.load.busy_ns.get() > 0);
        let venues: Vec<VenueId> = (0..3u16)
            .filter(|&venue| expected[usize::from(venue)] == index)
            .collect();
        assert_eq!(view.venues, venues);
    }
    let per_venue_quotes: Vec<u64> = (0..3)
        .map(|venue| runtime.venue_events[venue].get(EventKind::Quote))
        .collect();
    let events = three.finish();
    drain(&mut client, &mut bus_events);
    assert_eq!(client.counters().overruns, 0);
    for venue in 0..3u16 {
        let venue_events: Vec<Event> = events
            .iter()
            .filter(|event| event.header.venue_id == venue)
            .copied()
            .collect();
        // The bus's merged stream holds each venue's events exactly as the strategy got them:
        // the same events, once each, in the same order (the venue's decoder wrote both).
        let on_bus: Vec<Event> = bus_events
            .iter()
            .filter(|event| event.header.venue_id == venue)
            .copied()
            .collect();
        assert_eq!(on_bus.len(), venue_events.len(), "venue {venue} on the bus");
        assert!(
            on_bus == venue_events,
            "venue {venue}: the bus's stream is the strategy's"
        );
        // Exactly once: the strategy saw as many quotes of the venue as its decoder wrote.
        let quotes = venue_events
            .iter()
            .filter(|event| event.header.kind == EventKind::Quote)
            .count() as u64;
        assert_eq!(
            quotes,
            per_venue_quotes[usize::from(venue)],
            "venue {venue}"
        );
        assert!(quotes > 100, "venue {venue}: {quotes} quotes");
        assert_in_order_per_instrument(&venue_events);
        assert!(
            !venue_events
                .iter()
                .any(|event| matches!(event.body(), Body::Gap(_))),
            "venue {venue} had no gap"
        );
    }
}

#[test]
fn two_decoders_deliver_every_event_of_three_venues_once_and_in_order() {
    every_event_once_and_in_order(2);
}

#[test]
fn three_decoders_deliver_every_event_of_three_venues_once_and_in_order() {
    every_event_once_and_in_order(3);
}

/// Decoder 0 (venue a) is held back for a while: venues b and c, on decoder 1, keep reaching
/// the strategy meanwhile, and venue a's events arrive afterwards, all of them, in order.
#[test]
fn a_decoder_held_back_delays_only_its_own_venues() {
    let setups = vec![
        VenueSetup {
            decoder: Some(0),
            ..VenueSetup::default()
        },
        VenueSetup {
            decoder: Some(1),
            ..VenueSetup::default()
        },
        VenueSetup {
            decoder: Some(1),
            ..VenueSetup::default()
        },
    ];
    let mut three = Three::start(2, setups);
    assert_eq!(three.session.runtime.venue_decoders, [0, 1, 1]);
    three.run_until(Duration::from_secs(30), "every venue streaming", |three| {
        (0..3).all(|venue| three.venue_events(venue).len() > 50)
    });
    let hold = Duration::from_millis(2_000);
    three
        .session
        .runtime
        .hold_decoder(0, hold)
        .expect("decoder 0 exists");
    // Held once its published count stands still (it may finish a round first).
    let published =
        |three: &Three, decoder: usize| three.session.runtime.decoders[decoder].load.events.get();
    let mut last = published(&three, 0);
    three.run_until(Duration::from_secs(1), "decoder 0 held", |three| {
        std::thread::sleep(Duration::from_millis(100));
        let now = published(three, 0);
        std::mem::replace(&mut last, now) == now
    });
    let held_from = Instant::now();
    let before: Vec<usize> = (0..3)
        .map(|venue| three.venue_events(venue).len())
        .collect();
    let before_published = (published(&three, 0), published(&three, 1));
    three.run_until(Duration::from_secs(5), "most of the hold", |_| {
        held_from.elapsed() >= Duration::from_millis(900)
    });
    let during: Vec<usize> = (0..3)
        .map(|venue| three.venue_events(venue).len())
        .collect();
    assert_eq!(
        published(&three, 0),
        before_published.0,
        "venue a's decoder is held: it publishes nothing"
    );
    assert!(
        during[0] as u64 <= before_published.0,
        "venue a's events at the strategy are only those its decoder published before the hold"
    );
    assert!(published(&three, 1) > before_published.1);
    assert!(
        during[1] > before[1] + 20 && during[2] > before[2] + 20,
        "venues b and c, on the other decoder, kept flowing: {before:?} -> {during:?}"
    );
    three.run_until(Duration::from_secs(10), "venue a again", |three| {
        three.venue_events(0).len() > during[0] + 50
    });
    assert_eq!(three.session.runtime.frame_ring.overflows(), 0);
    let events = three.finish();
    for venue in 0..3u16 {
        let venue_events: Vec<Event> = events
            .iter()
            .filter(|event| event.header.venue_id == venue)
            .copied()
            .collect();
        assert_in_order_per_instrument(&venue_events);
        assert!(
            !venue_events
                .iter()
                .any(|event| matches!(event.body(), Body::Gap(_))),
            "venue {venue}: the hold lost nothing"
        );
    }
}

/// On three decoders: venue a's depth skips an update (a gap, then a resync from a new REST
/// snapshot), venue b rotates its connections every second, venue c's server closes its first
/// connection (a gap, a reconnection and a new snapshot). Each venue's snapshots, statuses and
/// gaps reach its own decoder: a snapshot routed to another decoder would be lost there, and the
/// venue's book would never sync again.
#[test]
fn snapshots_resyncs_and_rotations_reach_the_right_decoder() {
    let setups = vec![
        VenueSetup {
            // Whichever of the two entry points connects first, depth's is among the faulty.
            faults: Faults {
                skip_depth_after: Some(200),
                fault_connections: 2,
                ..Faults::default()
            },
            ..VenueSetup::default()
        },
        VenueSetup {
            extra: "[lifecycle]\nrotate_after_ms = 1000\n".to_owned(),
            ..VenueSetup::default()
        },
        VenueSetup {
            // Both first connections (depth's and aggTrade's entry points) close.
            faults: Faults {
                close_after: Some(300),
                fault_connections: 2,
                ..Faults::default()
            },
            ..VenueSetup::default()
        },
    ];
    let mut three = Three::start(3, setups);
    assert_eq!(three.session.runtime.venue_decoders, [0, 1, 2]);
    let progress = |three: &Three| {
        let a = &three.session.feeds[0].1;
        let c = &three.session.feeds[2].1;
        (
            a.book_resyncs.get(),
            a.book_syncs.get(),
            three.session.venues.counters(1).attempts,
            three.session.venues.counters(2).attempts,
            c.book_syncs.get(),
        )
    };
    let started = Instant::now();
    loop {
        three.session.tick().expect("control tick");
        assert!(three.session.runtime.all_running(), "a hot thread ended");
        let (a_resyncs, a_syncs, b_attempts, c_attempts, c_syncs) = progress(&three);
        // Two entry points: two connections at start, and each rotation or reconnection opens
        // another.
        if a_resyncs >= 1 && a_syncs >= 3 && b_attempts >= 4 && c_attempts >= 3 && c_syncs >= 3 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a: resyncs {a_resyncs} syncs {a_syncs}; b: attempts {b_attempts}; c: attempts \
             {c_attempts} syncs {c_syncs}"
        );
        three
            .session
            .wait(Duration::from_millis(10), None)
            .expect("control wait");
    }
    // Every sync's snapshot reaches the strategy, from the venue's own decoder.
    let (_, a_syncs, _, _, c_syncs) = progress(&three);
    let snapshot_ends = |three: &Three, venue: VenueId| {
        three
            .venue_events(venue)
            .iter()
            .filter(|event| event.header.kind == EventKind::SnapshotEnd)
            .count() as u64
    };
    three.run_until(
        Duration::from_secs(10),
        "the snapshots at the strategy",
        |three| snapshot_ends(three, 0) >= a_syncs && snapshot_ends(three, 2) >= c_syncs,
    );
    let events = three.finish();
    let of = |venue: VenueId| -> Vec<Event> {
        events
            .iter()
            .filter(|event| event.header.venue_id == venue)
            .copied()
            .collect()
    };
    let gaps = |venue: VenueId, reason: GapReason| {
        of(venue)
            .iter()
            .filter(|event| matches!(event.body(), Body::Gap(gap) if gap.reason() == reason))
            .count()
    };
    let snapshots = |venue: VenueId| {
        of(venue)
            .iter()
            .filter(|event| event.header.kind == EventKind::SnapshotEnd)
            .count()
    };
    assert!(gaps(0, GapReason::SequenceBreak) >= 1);
    // Two instruments, synced, then a resynced.
    assert!(snapshots(0) >= 3, "venue a: {} snapshots", snapshots(0));
    assert!(snapshots(1) >= 2);
    assert!(snapshots(2) >= 3, "venue c: {} snapshots", snapshots(2));
    for venue in 0..3 {
        assert_in_order_per_instrument(&of(venue));
    }
}

/// One HTTP GET to the serving plane, answered while the control loop ticks.
fn http_get(three: &mut Three, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = three
        .session
        .http_addr()
        .expect("the serving plane listens");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let exchange = std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    });
    three.run_until(
        Duration::from_secs(15),
        "the serving plane's answer",
        |_| exchange.is_finished(),
    );
    let response = exchange.join().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
    (status.unwrap_or(0), body.to_owned())
}

/// Two decoders with the serving plane and the recorder, both reading the bus's two
/// partitions: `/v1/quotes` shows every venue's instruments, `/v1/book` each venue's book (its
/// snapshot written by the decoder that owns it), and the recorder's files hold each venue's
/// quotes and trades as the strategy got them.
#[test]
fn two_decoders_serve_quotes_and_books_and_record_every_venue() {
    let setups = (0..3)
        .map(|_| VenueSetup {
            rate: 300.0,
            ..VenueSetup::default()
        })
        .collect();
    let mut three = Three::start_with(2, setups, |dir| {
        format!(
            "[bus]\npath = {:?}\n[http]\nlisten = \"127.0.0.1:0\"\n\
             [record]\ndir = {:?}\nflush_interval_ms = 50\n",
            dir.join("tickwire.bus").display().to_string(),
            dir.join("recordings").display().to_string(),
        )
    });
    assert_eq!(three.session.runtime.venue_decoders, [0, 1, 0]);
    three.run_until(
        Duration::from_secs(30),
        "every venue's books in sync",
        |three| {
            (0..3).all(|venue| {
                three.book_syncs(venue) >= 1 && three.venue_events(venue as u16).len() > 100
            })
        },
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = http_get(&mut three, "/v1/quotes");
        assert_eq!(status, 200, "{body}");
        let quotes: serde_json::Value = serde_json::from_str(&body).unwrap();
        let shown: Vec<(String, String)> = quotes["quotes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|quote| !quote["bid"].is_null())
            .map(|quote| {
                (
                    quote["venue"].as_str().unwrap_or_default().to_owned(),
                    quote["symbol"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let every = VENUES.iter().all(|venue| {
            ["BTCUSDT", "ETHUSDT"]
                .iter()
                .all(|symbol| shown.contains(&(venue.to_string(), symbol.to_string())))
        });
        if every {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every venue's quotes: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Each venue's book, from its own decoder's snapshot on its own partition.
    for venue in VENUES {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, body) = http_get(&mut three, &format!("/v1/book/{venue}/BTCUSDT"));
            if status == 200 {
                let book: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert!(!book["bids"].as_array().unwrap().is_empty(), "{body}");
                break;
            }
            assert_eq!(status, 503, "{body}");
            assert!(
                Instant::now() < deadline,
                "{venue}'s book never valid: {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // The recorder has been reading the bus since before the books were valid: let each venue
    // send 150 more market events so that its recording holds more than a start-up's worth,
    // however late the recorder's first flush came on a loaded machine.
    let before: Vec<usize> = (0..3u16)
        .map(|venue| three.venue_events(venue).len())
        .collect();
    three.run_until(
        Duration::from_secs(30),
        "150 more events from every venue",
        |three| (0..3).all(|venue| three.venue_events(venue as u16).len() > before[venue] + 150),
    );
    let recordings = three.dir().join("recordings");
    let failed = three.session.shutdown();
    assert!(failed.is_empty(), "threads panicked: {failed:?}");
    let events = three.recorded.snapshot();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&recordings)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".dbn.zst"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "one file per venue: {files:?}");
    let market = |event: &Event| {
        matches!(event.header.kind, EventKind::Quote | EventKind::Trade)
            && event.header.flags & flags::DERIVED == 0
    };
    for file in &files {
        let mut replay = tickwire_record::Replay::open(std::slice::from_ref(file)).unwrap();
        let mut recorded = Vec::new();
        while let Some(next) = replay.next_event() {
            recorded.push(next.expect("no damage"));
        }
        let venue = recorded
            .iter()
            .find(|event| market(event))
            .unwrap()
            .header
            .venue_id;
        let recorded: Vec<Event> = recorded.into_iter().filter(market).collect();
        let seen: Vec<Event> = events
            .iter()
            .filter(|event| event.header.venue_id == venue && market(event))
            .copied()
            .collect();
        assert!(
            recorded.len() > 50,
            "venue {venue}: {} recorded",
            recorded.len()
        );
        // The recording ends at its last flush: what it holds is what the strategy saw, in
        // order, from the start.
        assert!(recorded.len() <= seen.len());
        assert!(
            recorded[..] == seen[..recorded.len()],
            "venue {venue}: the recording is the strategy's stream"
        );
    }
    drop(three.sims);
}

/// A venue that sends its whole stream and closes the connection while its decoder is behind
/// (held here, as a busy core would): every record before the close is decoded, and the
/// disconnect's gap comes after them. The disconnect reaches the decoder through the network
/// thread, behind the connection's last frame; handed to the decoder directly, it was taken
/// while frames of the connection still waited in the ring, and the Databento feed, which
/// starts a connection's stream afresh on a disconnect, misread the rest ("not a DBN stream")
/// and lost it.
#[test]
fn a_stream_closed_while_its_decoder_is_behind_is_decoded_to_its_end_before_the_disconnect() {
    use tickwire_sim::databento::{self, DatabentoOptions, DatabentoSource, TEST_API_KEY};
    const KEY_VARIABLE: &str = "TICKWIRE_TEST_DECODERS_DATABENTO_KEY";
    std::env::set_var(KEY_VARIABLE, TEST_API_KEY);
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = databento::start(DatabentoOptions {
        symbols: vec!["ESM5".to_owned(), "NQM5".to_owned()],
        source: DatabentoSource::Benchmark { records: 200_000 },
        seed: 36,
        ..DatabentoOptions::default()
    })
    .unwrap();
    let sent = gateway.benchmark_records();
    std::fs::write(
        dir.path().join("databento.toml"),
        format!(
            "name = \"databento\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:{}\"\n\
             symbols = [\"ESM5\", \"NQM5\"]\nchannels = [\"mbo\"]\n\
             [databento]\ndataset = \"GLBX.MDP3\"\nrecovery = \"gap\"\n\
             [credentials]\napi_key_env = \"{KEY_VARIABLE}\"\n\
             [reconnect]\ninitial_delay_ms = 600000\nmax_delay_ms = 600000\n",
            gateway.addr().port()
        ),
    )
    .unwrap();
    let appliance = dir.path().join("tickwire.toml");
    std::fs::write(
        &appliance,
        "venues = [\"databento.toml\"]\n[log]\nlevel = \"warn\"\n\
         [rings]\nframe_ring_bytes = 33554432\nevent_ring_slots = 4096\n\
         [net]\nbackend = \"epoll\"\nwait = \"block\"\nblock_timeout_us = 1000\n\
         [threads.net]\nwait = \"park\"\n[threads.decoder]\nwait = \"park\"\n\
         [threads.strategy]\nwait = \"park\"\n",
    )
    .unwrap();
    let loaded = config::load(&appliance).unwrap();
    let mut session =
        Session::start(&loaded, Clock::calibrate(), SessionExtras::default()).unwrap();
    // The decoder stalls while the gateway sends all and closes (tens of milliseconds).
    session
        .runtime
        .hold_decoder(0, Duration::from_millis(1_500))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (decoded, malformed) = loop {
        session.tick().unwrap();
        let counters = &session.feeds[0].1;
        let decoded = counters.message("mbo");
        let malformed = counters.malformed.get();
        if decoded >= sent || malformed > 0 || Instant::now() > deadline {
            break (decoded, malformed);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(session.runtime.frame_ring.overflows(), 0);
    let failed = session.shutdown();
    gateway.stop();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(
        (decoded, malformed),
        (sent, 0),
        "every record before the close decoded, none misread"
    );
}
