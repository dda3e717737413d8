//! Order books kept from the bus's events, by the rules every tickwire consumer follows.
//!
//! A book is keyed by `(venue_id, instrument_id)` and goes through three states:
//!
//! 1. `SnapshotBegin` clears the book and makes it [`BookState::Building`] (a book the reader
//!    has not seen begin is unknown, and levels for it are ignored: the reader cannot know the
//!    levels it was not told).
//! 2. `BookLevel` sets a level (side bid or ask) to its size; size 0 removes it. Applied while
//!    the book is building or valid.
//! 3. `SnapshotEnd` makes a building book [`BookState::Valid`]: complete and consistent.
//!
//! A `Gap` for the instrument, or for instrument 0xFFFF_FFFF (every instrument of the venue),
//! clears the book(s) and makes them [`BookState::Unknown`] until their next `SnapshotBegin`.
//! After an overrun of one partition of the bus (one decoder's ring) the books of that
//! partition are unknown ([`Books::invalidate_partition`]: a book belongs to the partition its
//! last `SnapshotBegin` came from, and one whose partition is not known is invalidated too);
//! after an overrun with no partition named, every book ([`Books::invalidate_all`]); after a new epoch the ids
//! may name other instruments, so the books are dropped ([`Books::clear`]). Other kinds do not
//! change books. Late joiners and lapped readers get a snapshot by asking the appliance for one
//! (`Client::request_snapshots`); it comes back in the stream for every reader.
//!
//! `BTreeMap`s per side: this is the consumer's convenience, not the appliance's hot path.

use std::collections::{BTreeMap, HashMap};
use tickwire_bus::event::{Body, Event, InstrumentId, Side, VenueId};
use tickwire_bus::fixed::Fixed;
use tickwire_bus::SnapshotRequest;

/// Where a book stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookState {
    /// Not known: never begun, or cleared by a gap or an overrun. Levels are ignored.
    Unknown,
    /// A snapshot began and has not ended: levels are arriving.
    Building,
    /// The last snapshot ended and no gap came since: the book is the appliance's.
    Valid,
}

/// One instrument's book: price to size on each side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Book {
    state: BookState,
    bids: BTreeMap<Fixed, Fixed>,
    asks: BTreeMap<Fixed, Fixed>,
    /// The bus partition the last `SnapshotBegin` came from, where the reader said.
    partition: Option<u32>,
}

impl Book {
    fn unknown() -> Book {
        Book {
            state: BookState::Unknown,
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            partition: None,
        }
    }

    /// The bus partition (decoder) this book's last snapshot came from, where known.
    pub fn partition(&self) -> Option<u32> {
        self.partition
    }

    fn reset(&mut self, state: BookState) {
        self.state = state;
        self.bids.clear();
        self.asks.clear();
    }

    pub fn state(&self) -> BookState {
        self.state
    }

    /// Complete and consistent: a snapshot ended and no gap or overrun came since.
    pub fn is_valid(&self) -> bool {
        self.state == BookState::Valid
    }

    /// Bid levels, best (highest price) first, as `(price, size)`.
    pub fn bids(&self) -> impl Iterator<Item = (Fixed, Fixed)> + '_ {
        self.bids.iter().rev().map(|(&price, &size)| (price, size))
    }

    /// Ask levels, best (lowest price) first, as `(price, size)`.
    pub fn asks(&self) -> impl Iterator<Item = (Fixed, Fixed)> + '_ {
        self.asks.iter().map(|(&price, &size)| (price, size))
    }

    pub fn best_bid(&self) -> Option<(Fixed, Fixed)> {
        self.bids().next()
    }

    pub fn best_ask(&self) -> Option<(Fixed, Fixed)> {
        self.asks().next()
    }

    fn set(&mut self, side: Side, price: Fixed, size: Fixed) -> bool {
        let levels = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
            Side::None => return false,
        };
        if size == Fixed::ZERO {
            levels.remove(&price);
        } else {
            levels.insert(price, size);
        }
        true
    }
}

/// Every book the events have begun, by `(venue_id, instrument_id)`.
#[derive(Clone, Debug, Default)]
pub struct Books {
    books: HashMap<(VenueId, InstrumentId), Book>,
    /// Levels for books not begun (or of no side), ignored by the rules.
    ignored_levels: u64,
}

impl Books {
    pub fn new() -> Books {
        Books::default()
    }

    /// Applies one event by the rules in the module doc.
    pub fn apply(&mut self, event: &Event) {
        self.apply_in(event, None);
    }

    /// Applies an event read from bus partition `partition` (where known): a book begun by it
    /// belongs to that partition, for [`Books::invalidate_partition`].
    pub fn apply_in(&mut self, event: &Event, partition: Option<u32>) {
        let key = (event.header.venue_id, event.header.instrument_id);
        match event.body() {
            Body::SnapshotBegin(_) => {
                let book = self.books.entry(key).or_insert_with(Book::unknown);
                book.reset(BookState::Building);
                book.partition = partition;
            }
            Body::BookLevel(level) => {
                let applied = match self.books.get_mut(&key) {
                    Some(book) if book.state != BookState::Unknown => {
                        book.set(level.side(), level.price, level.size)
                    }
                    Some(_) | None => false,
                };
                if !applied {
                    self.ignored_levels += 1;
                }
            }
            Body::SnapshotEnd(_) => {
                if let Some(book) = self.books.get_mut(&key) {
                    if book.state == BookState::Building {
                        book.state = BookState::Valid;
                    }
                }
            }
            Body::Gap(_) => {
                if key.1 == SnapshotRequest::ALL_INSTRUMENTS {
                    for ((venue_id, _), book) in self.books.iter_mut() {
                        if *venue_id == key.0 {
                            book.reset(BookState::Unknown);
                        }
                    }
                } else if let Some(book) = self.books.get_mut(&key) {
                    book.reset(BookState::Unknown);
                }
            }
            Body::Quote(_)
            | Body::Trade(_)
            | Body::VenueStatus(_)
            | Body::Reference(_)
            | Body::Bar(_)
            | Body::TradingStatus(_)
            | Body::Imbalance(_)
            | Body::Statistic(_)
            | Body::Liquidation(_) => {}
        }
    }

    /// Applies every event, in order.
    pub fn apply_all(&mut self, events: &[Event]) {
        for event in events {
            self.apply(event);
        }
    }

    /// Applies every event of one read of bus partition `partition`, in order.
    pub fn apply_partition(&mut self, events: &[Event], partition: u32) {
        for event in events {
            self.apply_in(event, Some(partition));
        }
    }

    /// The book of `(venue_id, instrument_id)`, if a snapshot of it ever began.
    pub fn book(&self, venue_id: VenueId, instrument_id: InstrumentId) -> Option<&Book> {
        self.books.get(&(venue_id, instrument_id))
    }

    /// Whether the book is known and complete.
    pub fn is_valid(&self, venue_id: VenueId, instrument_id: InstrumentId) -> bool {
        self.book(venue_id, instrument_id)
            .is_some_and(Book::is_valid)
    }

    /// Every book, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = ((VenueId, InstrumentId), &Book)> {
        self.books.iter().map(|(&key, book)| (key, book))
    }

    /// Every book cleared and unknown: what an overrun means (events were lost, so no book can
    /// be trusted until its next snapshot).
    pub fn invalidate_all(&mut self) {
        for book in self.books.values_mut() {
            book.reset(BookState::Unknown);
        }
    }

    /// The books of bus partition `partition`, and those whose partition is not known,
    /// cleared and unknown: what an overrun of that partition means (its writer lapped the
    /// reader; the other partitions lost nothing). Returns how many books it invalidated.
    pub fn invalidate_partition(&mut self, partition: u32) -> usize {
        let mut count = 0;
        for book in self.books.values_mut() {
            if book.partition.is_none_or(|k| k == partition) {
                book.reset(BookState::Unknown);
                count += 1;
            }
        }
        count
    }

    /// Forgets every book: what a new epoch means (a restarted appliance may number its
    /// instruments differently).
    pub fn clear(&mut self) {
        self.books.clear();
    }

    /// Levels ignored because their book was unknown (or they named no side).
    pub fn ignored_levels(&self) -> u64 {
        self.ignored_levels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwire_bus::event::{
        flags, BookLevel, EventHeader, EventKind, Gap, GapReason, Snapshot, Trade,
    };

    fn event(instrument_id: InstrumentId, body: Body) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns: 0,
                venue_seq: 0,
                instrument_id,
                venue_id: 1,
                kind: EventKind::Quote,
                flags: 0,
            },
            body,
        )
    }

    fn level(instrument: InstrumentId, side: Side, price: i64, size: i64) -> Event {
        let mut event = event(
            instrument,
            Body::BookLevel(BookLevel::new(side, Fixed(price), Fixed(size))),
        );
        event.header.flags = flags::SNAPSHOT;
        event
    }

    fn begin(instrument: InstrumentId) -> Event {
        event(instrument, Body::SnapshotBegin(Snapshot::default()))
    }

    fn end(instrument: InstrumentId) -> Event {
        event(instrument, Body::SnapshotEnd(Snapshot::default()))
    }

    fn gap(instrument: InstrumentId) -> Event {
        event(
            instrument,
            Body::Gap(Gap::new(GapReason::SequenceBreak, 1, 3)),
        )
    }

    #[test]
    fn levels_before_a_snapshot_begins_are_ignored() {
        let mut books = Books::new();
        books.apply(&level(7, Side::Bid, 100, 1));
        assert!(books.book(1, 7).is_none());
        assert_eq!(books.ignored_levels(), 1);
    }

    #[test]
    fn a_snapshot_builds_then_validates_and_updates_apply() {
        let mut books = Books::new();
        books.apply_all(&[
            begin(7),
            level(7, Side::Bid, 100, 1),
            level(7, Side::Bid, 99, 2),
            level(7, Side::Ask, 101, 3),
        ]);
        assert_eq!(books.book(1, 7).unwrap().state(), BookState::Building);
        assert!(!books.is_valid(1, 7));
        books.apply(&end(7));
        assert!(books.is_valid(1, 7));
        books.apply_all(&[level(7, Side::Bid, 100, 0), level(7, Side::Ask, 102, 4)]);
        let book = books.book(1, 7).unwrap();
        assert_eq!(book.best_bid(), Some((Fixed(99), Fixed(2))));
        assert_eq!(
            book.asks().collect::<Vec<_>>(),
            vec![(Fixed(101), Fixed(3)), (Fixed(102), Fixed(4))]
        );
        // A trade changes no book.
        books.apply(&event(
            7,
            Body::Trade(Trade::new(Fixed(100), Fixed(1), 1, Side::Bid)),
        ));
        assert_eq!(
            books.book(1, 7).unwrap().best_bid(),
            Some((Fixed(99), Fixed(2)))
        );
    }

    #[test]
    fn a_new_snapshot_replaces_the_book() {
        let mut books = Books::new();
        books.apply_all(&[begin(7), level(7, Side::Bid, 100, 1), end(7)]);
        books.apply_all(&[begin(7), level(7, Side::Ask, 105, 1), end(7)]);
        let book = books.book(1, 7).unwrap();
        assert_eq!(book.best_bid(), None);
        assert_eq!(book.best_ask(), Some((Fixed(105), Fixed(1))));
    }

    #[test]
    fn gaps_invalidate_one_instrument_or_the_whole_venue() {
        let mut books = Books::new();
        books.apply_all(&[begin(7), level(7, Side::Bid, 100, 1), end(7)]);
        books.apply_all(&[begin(8), level(8, Side::Bid, 50, 1), end(8)]);
        books.apply(&gap(7));
        assert_eq!(books.book(1, 7).unwrap().state(), BookState::Unknown);
        assert_eq!(books.book(1, 7).unwrap().best_bid(), None);
        assert!(books.is_valid(1, 8));
        // Levels for the unknown book are ignored until its next SnapshotBegin.
        books.apply(&level(7, Side::Bid, 101, 1));
        assert_eq!(books.book(1, 7).unwrap().best_bid(), None);
        books.apply(&gap(SnapshotRequest::ALL_INSTRUMENTS));
        assert!(!books.is_valid(1, 8));
        assert_eq!(books.book(1, 8).unwrap().best_bid(), None);
    }

    #[test]
    fn an_overrun_of_one_partition_invalidates_its_books_and_those_of_no_known_partition() {
        let mut books = Books::new();
        books.apply_partition(&[begin(7), level(7, Side::Bid, 100, 1), end(7)], 0);
        books.apply_partition(&[begin(8), level(8, Side::Bid, 50, 1), end(8)], 1);
        books.apply_all(&[begin(9), level(9, Side::Ask, 60, 2), end(9)]);
        assert_eq!(books.book(1, 7).unwrap().partition(), Some(0));
        assert_eq!(books.book(1, 8).unwrap().partition(), Some(1));
        assert_eq!(books.book(1, 9).unwrap().partition(), None);
        assert_eq!(books.invalidate_partition(1), 2);
        assert!(books.is_valid(1, 7), "partition 0 lost nothing");
        assert!(!books.is_valid(1, 8));
        assert_eq!(books.book(1, 8).unwrap().best_bid(), None);
        assert!(
            !books.is_valid(1, 9),
            "a book of no known partition cannot be trusted"
        );
        // A book's partition is the one its last snapshot began in.
        books.apply_partition(&[begin(8), level(8, Side::Bid, 51, 1), end(8)], 0);
        assert_eq!(
            books.invalidate_partition(1),
            1,
            "book 9 alone, unknown already"
        );
        assert!(books.is_valid(1, 8));
        assert_eq!(books.invalidate_partition(0), 3);
        assert!(!books.is_valid(1, 7) && !books.is_valid(1, 8));
    }

    #[test]
    fn an_overrun_invalidates_every_book() {
        let mut books = Books::new();
        books.apply_all(&[begin(7), level(7, Side::Bid, 100, 1), end(7)]);
        books.invalidate_all();
        assert_eq!(books.book(1, 7).unwrap().state(), BookState::Unknown);
        books.apply(&end(7));
        assert!(
            !books.is_valid(1, 7),
            "an end without a begin validates nothing"
        );
    }
}
