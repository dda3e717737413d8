//! The instrument directory as a consumer keeps it: the bus's append-only entries folded into a
//! map, so that an event's `(venue_id, instrument_id)` names its venue and symbol.

use std::collections::HashMap;
use tickwire_bus::event::{Event, InstrumentId, VenueId};
use tickwire_bus::{BusReader, DirectoryEntry, SnapshotRequest};

/// What a bus's directory says so far, keyed by `(venue_id, instrument_id)`; when two entries
/// name the same pair, the later one holds (the layout's rule).
#[derive(Clone, Debug, Default)]
pub struct Directory {
    entries: HashMap<(VenueId, InstrumentId), DirectoryEntry>,
    /// Venue names by id, from any entry of the venue, for events that name no instrument.
    venues: HashMap<VenueId, String>,
    /// Entries of the bus folded in so far (the bus's directory count when last refreshed).
    folded: u64,
}

impl Directory {
    /// The entry for `(venue_id, instrument_id)`, if the bus has named it.
    pub fn get(&self, venue_id: VenueId, instrument_id: InstrumentId) -> Option<&DirectoryEntry> {
        self.entries.get(&(venue_id, instrument_id))
    }

    /// The venue's name, if any entry of the venue has been published.
    pub fn venue(&self, venue_id: VenueId) -> Option<&str> {
        self.venues.get(&venue_id).map(String::as_str)
    }

    /// The first entry with this venue name and symbol (the instrument as the venue file lists
    /// it), to find the ids to ask snapshots for.
    pub fn find(&self, venue: &str, symbol: &str) -> Option<&DirectoryEntry> {
        self.entries
            .values()
            .find(|entry| entry.venue == venue && entry.symbol == symbol)
    }

    /// The event's venue and symbol as `tickwire decode` prints them: `?` for an id the
    /// directory does not name, symbol `*` for an event about every instrument of the venue
    /// (`instrument_id` 0xFFFF_FFFF: connection statuses, venue-wide gaps).
    pub fn name(&self, event: &Event) -> (&str, &str) {
        let header = &event.header;
        let venue = self.venue(header.venue_id).unwrap_or("?");
        let symbol = if header.instrument_id == SnapshotRequest::ALL_INSTRUMENTS {
            "*"
        } else {
            self.get(header.venue_id, header.instrument_id)
                .map_or("?", |entry| entry.symbol.as_str())
        };
        (venue, symbol)
    }

    /// Instruments named so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every instrument named so far, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &DirectoryEntry> {
        self.entries.values()
    }

    /// Adds or replaces an entry (the later one holds, as on the bus): for sources other than a
    /// bus, which learn names from elsewhere (`tickwire-nats` from subjects and the bridge's
    /// directory service).
    pub fn insert(&mut self, entry: DirectoryEntry) {
        self.venues.insert(entry.venue_id, entry.venue.clone());
        self.entries
            .insert((entry.venue_id, entry.instrument_id), entry);
    }

    /// Folds in the entries the bus published since the last call; says whether there were any.
    /// One atomic load when nothing is new.
    pub(crate) fn refresh(&mut self, reader: &BusReader) -> bool {
        let published = reader.directory_len();
        if published <= self.folded {
            return false;
        }
        for index in self.folded..published {
            if let Some(entry) = reader.directory_entry(index) {
                self.venues
                    .entry(entry.venue_id)
                    .or_insert_with(|| entry.venue.clone());
                self.entries
                    .insert((entry.venue_id, entry.instrument_id), entry);
            }
        }
        self.folded = published;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwire_bus::event::{Body, EventHeader, EventKind, VenueState, VenueStatus};

    fn status(venue_id: VenueId, instrument_id: InstrumentId) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns: 0,
                venue_seq: 0,
                instrument_id,
                venue_id,
                kind: EventKind::VenueStatus,
                flags: 0,
            },
            Body::VenueStatus(VenueStatus::new(VenueState::Live, 0, 0)),
        )
    }

    #[test]
    fn names_follow_decode_conventions() {
        let mut directory = Directory::default();
        directory.venues.insert(1, "thalex".into());
        directory.entries.insert(
            (1, 7),
            DirectoryEntry {
                instrument_id: 7,
                venue_id: 1,
                venue: "thalex".into(),
                symbol: "BTC-PERPETUAL".into(),
                venue_symbol: "BTC-PERPETUAL".into(),
            },
        );
        assert_eq!(directory.name(&status(1, 7)), ("thalex", "BTC-PERPETUAL"));
        assert_eq!(directory.name(&status(1, u32::MAX)), ("thalex", "*"));
        assert_eq!(directory.name(&status(1, 8)), ("thalex", "?"));
        assert_eq!(directory.name(&status(2, 7)), ("?", "?"));
        assert_eq!(
            directory
                .find("thalex", "BTC-PERPETUAL")
                .map(|e| e.instrument_id),
            Some(7)
        );
    }
}
