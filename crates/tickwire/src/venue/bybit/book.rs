//! One instrument's `orderbook.{depth}.{symbol}` book, kept by the rules of Bybit's orderbook
//! page ("Process snapshot/delta"), in the order the page gives them:
//!
//! - a `snapshot` replaces the book, whatever its `u` (`u` = 1 is the service's restart: "a
//!   snapshot data due to the restart of the service. So please overwrite your local
//!   orderbook"; level 1 re-sends a snapshot with the same `u` after 3 s without change);
//! - a `delta` applies each level: size `0` deletes the price, an unknown price is inserted, a
//!   known one takes the new size;
//! - `u` goes up by one from each message to the next on the topic (the reading of the
//!   page's "Update ID"; the page gives no other rule): a delta whose `u` is not the last one
//!   plus one is a break, told as a `Gap` (`SequenceBreak`, expected and received `u`), and the
//!   book waits for a new snapshot, which its feed asks for by resubscribing the topic;
//! - a delta before the first snapshot (or after a break) changes nothing;
//! - a delete of a price the book does not hold leaves the book as it is and is counted (on a
//!   book kept by these rules it means a message was lost, though `u` did not show it; the
//!   book's next snapshot settles it);
//! - a book crossed or locked after a message (best bid at or above best ask: Bybit's matching
//!   engine would have traded) is wrong: told as a `Gap` (`SequenceBreak`, expected 0, received
//!   the message's `u`) and resubscribed like a break.
//!
//! Events: a snapshot is `SnapshotBegin` (its `snapshot_id` the `u`), every level best first,
//! `SnapshotEnd`; a delta is one `BookLevel` per level it changes (the new size, 0 for a
//! delete); then a derived `Quote` (`flags::DERIVED`) when the top of the book changed. Every
//! event carries the message's `u` as `venue_seq`; the last one of a message is flagged `LAST`.

use crate::book::{BookSide, LevelChange, OrderBook};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, Gap, GapReason, Quote, Side, Snapshot,
};
use crate::fixed::Fixed;
use crate::venue::emit::Emitter;

/// What one message did to the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A snapshot replaced the book.
    Snapshot,
    /// A delta was applied.
    Delta,
    /// A delta before the book's first snapshot (or after a break): nothing changed.
    BeforeSnapshot,
    /// A delta whose `u` broke the chain: the book is dropped until a new snapshot.
    Gap { expected: u64, received: u64 },
    /// The message left the book crossed: the book is dropped until a new snapshot.
    Crossed,
}

impl Applied {
    /// Whether the book broke and its topic must be sent afresh.
    pub fn broke(self) -> bool {
        matches!(self, Applied::Gap { .. } | Applied::Crossed)
    }
}

/// What one message did, and how many of its deletes named a price the book does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub applied: Applied,
    pub absent_deletes: u32,
}

/// One instrument's book and where its `u` chain stands.
#[derive(Clone, Debug)]
pub struct BookSync {
    book: OrderBook,
    /// The last `u` applied; `None` while the book waits for a snapshot.
    last_u: Option<u64>,
    /// The top of the book last published, to publish a derived quote only when it changes.
    top: Quote,
}

impl BookSync {
    /// An empty book, waiting for its snapshot, with room for `levels` a side.
    pub fn new(levels: usize) -> BookSync {
        BookSync {
            book: OrderBook::with_capacity(levels),
            last_u: None,
            top: Quote::default(),
        }
    }

    /// Whether the book is in sync (a snapshot applied and nothing broken since).
    pub fn in_sync(&self) -> bool {
        self.last_u.is_some()
    }

    /// The book (empty while not in sync).
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    /// The last `u` applied.
    pub fn last_update_id(&self) -> Option<u64> {
        self.last_u
    }

    /// The book is no longer known (its connection dropped): it waits for a snapshot.
    pub fn invalidate(&mut self) {
        self.last_u = None;
        self.book.clear();
        self.top = Quote::default();
    }

    /// Applies one message: `bids` and `asks` as the message lists them. `header` is the
    /// events' header (instrument, times; its kind and flags are set here); `out` takes them.
    pub fn apply(
        &mut self,
        snapshot: bool,
        update_id: u64,
        bids: &[(Fixed, Fixed)],
        asks: &[(Fixed, Fixed)],
        header: EventHeader,
        out: &mut impl FnMut(Event),
    ) -> Outcome {
        let mut header = header;
        header.venue_seq = update_id;
        header.flags &= !(flags::LAST | flags::SNAPSHOT | flags::DERIVED);
        let mut emitter = Emitter::new(out);
        let mut absent_deletes = 0u32;
        if snapshot {
            self.book.clear();
            for &(price, size) in bids {
                self.book.set(BookSide::Bid, price, size);
            }
            for &(price, size) in asks {
                self.book.set(BookSide::Ask, price, size);
            }
            self.last_u = Some(update_id);
            if self.book.is_crossed() {
                return self.crossed(update_id, header, &mut emitter);
            }
            let counts = Snapshot {
                bid_levels: u32::try_from(self.book.len(BookSide::Bid)).unwrap_or(u32::MAX),
                ask_levels: u32::try_from(self.book.len(BookSide::Ask)).unwrap_or(u32::MAX),
                snapshot_id: update_id,
                _reserved: [0; 2],
            };
            let mut snapshot_header = header;
            snapshot_header.flags |= flags::SNAPSHOT;
            emitter.push(Event::new(snapshot_header, Body::SnapshotBegin(counts)));
            for side in [BookSide::Bid, BookSide::Ask] {
                for (price, size) in self.book.levels(side) {
                    emitter.push(Event::new(
                        snapshot_header,
                        Body::BookLevel(BookLevel::new(Side::from(side), price, size)),
                    ));
                }
            }
            emitter.push(Event::new(header, Body::SnapshotEnd(counts)));
            self.quote(header, &mut emitter, true);
            emitter.finish(true);
            return Outcome {
                applied: Applied::Snapshot,
                absent_deletes,
            };
        }
        let Some(last) = self.last_u else {
            return Outcome {
                applied: Applied::BeforeSnapshot,
                absent_deletes,
            };
        };
        let expected = last.wrapping_add(1);
        if update_id != expected {
            self.invalidate();
            let mut gap_header = header;
            gap_header.flags |= flags::LAST;
            emitter.push(Event::new(
                gap_header,
                Body::Gap(Gap::new(GapReason::SequenceBreak, expected, update_id)),
            ));
            emitter.finish(true);
            return Outcome {
                applied: Applied::Gap {
                    expected,
                    received: update_id,
                },
                absent_deletes,
            };
        }
        self.last_u = Some(update_id);
        for (side, levels) in [(BookSide::Bid, bids), (BookSide::Ask, asks)] {
            for &(price, size) in levels {
                match self.book.set(side, price, size) {
                    LevelChange::Absent => absent_deletes += 1,
                    LevelChange::Unchanged => {}
                    _ => emitter.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(
                            Side::from(side),
                            price,
                            size.max(Fixed::ZERO),
                        )),
                    )),
                }
            }
        }
        if self.book.is_crossed() {
            return self.crossed(update_id, header, &mut emitter);
        }
        self.quote(header, &mut emitter, false);
        emitter.finish(true);
        Outcome {
            applied: Applied::Delta,
            absent_deletes,
        }
    }

    /// A derived quote when the top changed (or always, after a snapshot: the book restarts).
    fn quote<F: FnMut(Event)>(
        &mut self,
        header: EventHeader,
        emitter: &mut Emitter<'_, F>,
        always: bool,
    ) {
        let top = self.book.top();
        if always || top != self.top {
            self.top = top;
            let mut quote_header = header;
            quote_header.flags |= flags::DERIVED;
            emitter.push(Event::new(quote_header, Body::Quote(top)));
        }
    }

    fn crossed<F: FnMut(Event)>(
        &mut self,
        update_id: u64,
        header: EventHeader,
        emitter: &mut Emitter<'_, F>,
    ) -> Outcome {
        self.invalidate();
        emitter.push(Event::new(
            header,
            Body::Gap(Gap::new(GapReason::SequenceBreak, 0, update_id)),
        ));
        emitter.finish(true);
        Outcome {
            applied: Applied::Crossed,
            absent_deletes: 0,
        }
    }
}
