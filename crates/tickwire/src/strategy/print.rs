//! Every event the strategy sees as a JSON line naming its venue and symbol: the `print`
//! strategy's output and `run --print-events`.
//!
//! Both are an [`EventTap`]: it formats at the strategy stage, from the events the stage hands
//! the strategy, and pushes the lines into a ring the control thread writes to stdout
//! (`output.rs`), so that the strategy thread never writes to a pipe, and what is printed is
//! exactly what a strategy sees: market events, the snapshots and gaps a book sync
//! makes, the gap that announces events lost to a full ring, and the connection and stream
//! statuses the control thread sends (issue 24: `--print-events` used to print inside the venue
//! feeds, which never see gaps or statuses, and the `print` strategy named a connection's
//! status by its instrument, which a connection-wide status does not have, so its venue was
//! empty).
//!
//! A line's venue is the event's `venue_id` (every event has one); its symbol is the event's
//! instrument's, `*` for an event about every instrument of the venue
//! ([`ALL_INSTRUMENTS`]: a connection's status, a ring-overflow gap), or `?` for an id no venue
//! has.

use super::output::{StrategyOutput, STDOUT};
use super::{Market, Strategy};
use crate::event::{Event, InstrumentId, VenueId};
use crate::venue::feed::ALL_INSTRUMENTS;

/// An instrument's venue and symbol, for printed lines and summaries.
#[derive(Clone, Debug)]
pub struct InstrumentName {
    pub venue: String,
    pub symbol: String,
}

/// The names printed lines carry: venues by [`VenueId`], instruments by [`InstrumentId`].
#[derive(Clone, Debug, Default)]
pub struct EventNames {
    venues: Vec<String>,
    instruments: Vec<InstrumentName>,
}

impl EventNames {
    /// `venues[id]` names venue `id`, `instruments[id]` instrument `id`.
    pub fn new(venues: Vec<String>, instruments: Vec<InstrumentName>) -> EventNames {
        EventNames {
            venues,
            instruments,
        }
    }

    pub fn instruments(&self) -> &[InstrumentName] {
        &self.instruments
    }

    /// The venue's name, `?` for an id no venue has.
    pub fn venue(&self, venue: VenueId) -> &str {
        self.venues
            .get(usize::from(venue))
            .map_or("?", String::as_str)
    }

    /// The instrument's symbol, `*` for [`ALL_INSTRUMENTS`], `?` for an id no venue has.
    pub fn symbol(&self, instrument: InstrumentId) -> &str {
        if instrument == ALL_INSTRUMENTS {
            return "*";
        }
        self.instruments
            .get(instrument as usize)
            .map_or("?", |name| name.symbol.as_str())
    }

    /// Appends `event` as one JSON line (the `tickwire decode` format).
    pub fn write(&self, out: &mut Vec<u8>, event: &Event) {
        crate::event::json::write_event(
            out,
            self.venue(event.header.venue_id),
            self.symbol(event.header.instrument_id).as_bytes(),
            event,
        );
    }
}

/// The `print` strategy (no `inner`), and `run --print-events` ahead of the configured strategy
/// (if any): every batch of events as JSON lines, one frame of a byte ring
/// ([`StrategyOutput`]) that the control thread drains to stdout, so the strategy thread never
/// writes to a pipe. A full ring drops the batch's lines and counts them; nothing blocks. The
/// line buffer is reused: printing allocates nothing once it has grown to a batch's size.
pub struct EventTap {
    names: EventNames,
    output: StrategyOutput,
    inner: Option<Box<dyn Strategy>>,
}

impl EventTap {
    /// A tap into `output` in front of `inner`.
    pub fn new(
        names: EventNames,
        output: StrategyOutput,
        inner: Option<Box<dyn Strategy>>,
    ) -> EventTap {
        EventTap {
            names,
            output,
            inner,
        }
    }
}

impl Strategy for EventTap {
    fn on_events(&mut self, events: &[Event], market: &Market, now_ns: u64) {
        let lines = self.output.buffer();
        for event in events {
            self.names.write(lines, event);
        }
        self.output.push(STDOUT, events.len() as u64);
        if let Some(inner) = self.inner.as_mut() {
            inner.on_events(events, market, now_ns);
        }
    }

    fn timer_interval_ns(&self) -> Option<u64> {
        self.inner
            .as_ref()
            .and_then(|inner| inner.timer_interval_ns())
    }

    fn on_timer(&mut self, market: &Market, now_ns: u64) {
        if let Some(inner) = self.inner.as_mut() {
            inner.on_timer(market, now_ns);
        }
    }

    fn finish(&mut self, market: &Market) {
        if let Some(inner) = self.inner.as_mut() {
            inner.finish(market);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{
        flags, Body, EventHeader, EventKind, Gap, GapReason, VenueState, VenueStatus,
    };

    fn names() -> EventNames {
        EventNames::new(
            vec!["binance".to_owned(), "db".to_owned()],
            vec![
                InstrumentName {
                    venue: "binance".to_owned(),
                    symbol: "BTCUSDT".to_owned(),
                },
                InstrumentName {
                    venue: "db".to_owned(),
                    symbol: "ESZ6".to_owned(),
                },
            ],
        )
    }

    fn own(venue: VenueId, instrument: InstrumentId, body: Body) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns: 5,
                venue_seq: 0,
                instrument_id: instrument,
                venue_id: venue,
                kind: EventKind::Gap,
                flags: flags::NO_EXCHANGE_TS | flags::LAST,
            },
            body,
        )
    }

    fn lines(out: &[u8]) -> Vec<serde_json::Value> {
        out.split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).expect("JSON"))
            .collect()
    }

    #[test]
    fn venue_wide_and_unknown_events_are_named_by_their_venue() {
        let names = names();
        let mut out = Vec::new();
        let status = Body::VenueStatus(VenueStatus::new(VenueState::Live, 3, 0));
        names.write(&mut out, &own(1, ALL_INSTRUMENTS, status));
        names.write(
            &mut out,
            &own(0, 0, Body::Gap(Gap::new(GapReason::Reconnect, 0, 0))),
        );
        names.write(&mut out, &own(7, 99, status));
        let lines = lines(&out);
        assert_eq!(lines[0]["type"], "status");
        assert_eq!(lines[0]["venue"], "db");
        assert_eq!(lines[0]["symbol"], "*");
        assert_eq!(lines[0]["state"], "Live");
        assert_eq!(lines[1]["type"], "gap");
        assert_eq!(lines[1]["venue"], "binance");
        assert_eq!(lines[1]["symbol"], "BTCUSDT");
        assert_eq!(lines[1]["reason"], "Reconnect");
        assert_eq!(
            (&lines[2]["venue"], &lines[2]["symbol"]),
            (&"?".into(), &"?".into())
        );
    }

    /// A strategy that counts what it is handed.
    struct Count(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Strategy for Count {
        fn on_events(&mut self, events: &[Event], _market: &Market, _now_ns: u64) {
            self.0
                .fetch_add(events.len(), std::sync::atomic::Ordering::Relaxed);
        }

        fn timer_interval_ns(&self) -> Option<u64> {
            Some(42)
        }
    }

    #[test]
    fn the_tap_prints_every_event_then_hands_the_batch_on() {
        let (output, mut reader) = crate::strategy::output::output(1 << 16, 1024);
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tap = EventTap::new(names(), output, Some(Box::new(Count(seen.clone()))));
        assert_eq!(tap.timer_interval_ns(), Some(42));
        let market = Market::new(2);
        let batch = [
            own(
                0,
                ALL_INSTRUMENTS,
                Body::Gap(Gap::new(GapReason::RingOverflow, 0, 0)),
            ),
            own(
                1,
                1,
                Body::VenueStatus(VenueStatus::new(VenueState::Stale, 0, 0)),
            ),
        ];
        tap.on_events(&batch, &market, 9);
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 2);
        let mut printed = Vec::new();
        reader
            .drain(&mut printed, |line| panic!("logged {line}"))
            .expect("drain");
        let lines = lines(&printed);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "gap");
        assert_eq!(lines[0]["venue"], "binance");
        assert_eq!(lines[0]["symbol"], "*");
        assert_eq!(lines[1]["type"], "status");
        assert_eq!(lines[1]["venue"], "db");
        assert_eq!(lines[1]["symbol"], "ESZ6");
        assert_eq!(reader.dropped(), 0);
    }

    #[test]
    fn lines_a_full_ring_cannot_take_are_counted_not_waited_for() {
        let (output, reader) = crate::strategy::output::output(1024, 1024);
        let mut tap = EventTap::new(names(), output, None);
        let status = Body::VenueStatus(VenueStatus::new(VenueState::Live, 0, 0));
        let batch = vec![own(0, 0, status); 20];
        tap.on_events(&batch, &Market::new(2), 0);
        assert_eq!(
            reader.dropped(),
            20,
            "a batch of lines larger than the ring holds"
        );
        assert_eq!(tap.timer_interval_ns(), None);
    }
}
