//! One instrument's book on one of OKX's order book channels, kept by the rules of the "Order
//! book channel" section and verified by its checksum:
//!
//! - `books5` and `bbo-tbt` send a snapshot every time: each message replaces the book;
//! - `books`, `books-l2-tbt` and `books50-l2-tbt` send a `snapshot` (`prevSeqId` -1), then
//!   `update`s: a size of `0` deletes the price, an unknown price is inserted, a known one takes
//!   the new size;
//! - an update's `prevSeqId` must be the `seqId` of the message before it. The documented
//!   exceptions follow from that rule: an update with `seqId` equal to `prevSeqId` (no change,
//!   sent after about 60 s of silence, with empty sides) and one whose `seqId` is smaller than
//!   its `prevSeqId` (the sequence reset after maintenance) both pass, since their `prevSeqId`
//!   names the last message. Any other `prevSeqId`, one from the past included, is a break: a
//!   `Gap` (`SequenceBreak`, expected the last `seqId`, received the `prevSeqId`);
//! - after every message of these three channels, the checksum of the first 25 levels a side
//!   is computed from the venue's own strings (kept per level in a [`Ladder`]) and compared to
//!   the message's `checksum`, when it has one that is not 0 (see the module docs of `okx` for
//!   what 0 means). A mismatch is a `Gap` (`SequenceBreak`, expected the checksum computed,
//!   received the venue's, both as their 32 bits) and none of the message's levels is
//!   published;
//! - after a break or a mismatch the book is dropped and waits for a snapshot, which its feed
//!   asks for by resubscribing; updates before a snapshot change nothing;
//! - a delete of a price the book does not hold is counted and changes nothing (the next
//!   checksum settles whether the book is right);
//! - a crossed book is not an error: "Best ask price may be lower than the best bid price
//!   during the pre-open period".
//!
//! Events: a snapshot is `SnapshotBegin` (its `snapshot_id` the `seqId`, 0 without one), every
//! level best first, `SnapshotEnd`; an update is one `BookLevel` per level it changes (the new
//! size, 0 for a delete); then a derived `Quote` (`flags::DERIVED`) when the top changed. Every
//! event carries the message's `seqId` as `venue_seq` (0 when negative or absent); the last one
//! of a message is flagged `LAST`.
//!
//! **Invariant:** nothing here allocates after [`BookSync::new`]: the ladders have a fixed
//! capacity ([`LADDER_LEVELS`]); a message that would grow a side beyond it drops the book
//! (`Gap`, `Limit`) and asks for a snapshot.

use super::checksum::{self, Input, Text};
use super::decode::{BookChannel, Level};
use crate::book::{BookSide, LevelChange, OrderBook};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, Gap, GapReason, Quote, Side, Snapshot,
};
use crate::fixed::Fixed;
use crate::venue::emit::Emitter;

/// Levels a side a book holds at most: the deepest channel's 400 and room for the levels
/// the venue may leave beyond it.
pub const LADDER_LEVELS: usize = 1024;

/// One level of a ladder: its sort key, and its price and size strings as the checksum
/// writes them.
#[derive(Clone, Copy, Debug)]
struct TextLevel {
    key: i64,
    text: Text,
}

/// One side of a book as the venue's strings, sorted from the worst price to the best (the
/// best last, as `OrderBook` keeps its sides, so that changes near the top move little).
#[derive(Clone, Debug)]
pub struct Ladder {
    side: BookSide,
    levels: Vec<TextLevel>,
}

/// The sort key: a bid's raw price, an ask's complement (ascending keys, best last).
fn key(side: BookSide, price: Fixed) -> i64 {
    match side {
        BookSide::Bid => price.raw(),
        BookSide::Ask => !price.raw(),
    }
}

/// Why a ladder refused a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl Ladder {
    pub fn new(side: BookSide) -> Ladder {
        Ladder {
            side,
            levels: Vec::with_capacity(LADDER_LEVELS),
        }
    }

    pub fn clear(&mut self) {
        self.levels.clear();
    }

    pub fn len(&self) -> usize {
        self.levels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// Sets `price` to `size` with their strings (a size of zero deletes the level):
    /// `Ok(Some(rank))` when the level changed, was inserted or was removed at that rank (0 is
    /// the best), `Ok(None)` for a delete of an absent price.
    #[inline]
    pub fn set(
        &mut self,
        price: Fixed,
        size: Fixed,
        price_text: &[u8],
        size_text: &[u8],
    ) -> Result<Option<usize>, Full> {
        let key = key(self.side, price);
        let at = self.levels.binary_search_by(|level| level.key.cmp(&key));
        let len = self.levels.len();
        if size.raw() <= 0 {
            return Ok(match at {
                Ok(index) => {
                    self.levels.remove(index);
                    Some(len - 1 - index)
                }
                Err(_) => None,
            });
        }
        let level = TextLevel {
            key,
            text: Text::new(price_text, size_text),
        };
        match at {
            Ok(index) => {
                self.levels[index] = level;
                Ok(Some(len - 1 - index))
            }
            Err(index) => {
                if len >= LADDER_LEVELS {
                    return Err(Full);
                }
                self.levels.insert(index, level);
                Ok(Some(len - index))
            }
        }
    }

    /// The level of `rank` (0 is the best).
    #[inline]
    fn at_rank(&self, rank: usize) -> Option<&Text> {
        let index = self.levels.len().checked_sub(rank + 1)?;
        self.levels.get(index).map(|level| &level.text)
    }

    /// The levels, best first, as `(price, size)` strings.
    pub fn best_first(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.levels
            .iter()
            .rev()
            .map(|level| (level.text.price(), level.text.size()))
    }
}

/// What one message did to the book.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A snapshot replaced the book.
    Snapshot,
    /// An update was applied.
    Update,
    /// An update before the book's first snapshot (or after a break): nothing changed.
    BeforeSnapshot,
    /// An update whose `prevSeqId` is not the last `seqId`: the book is dropped.
    Gap { expected: i64, received: i64 },
    /// The book after the message does not have the venue's checksum: the book is dropped.
    Mismatch { computed: i32, venue: i32 },
    /// A side outgrew [`LADDER_LEVELS`]: the book is dropped.
    Full,
}

impl Applied {
    /// Whether the book broke and its channel must be sent afresh.
    pub fn broke(self) -> bool {
        matches!(
            self,
            Applied::Gap { .. } | Applied::Mismatch { .. } | Applied::Full
        )
    }
}

/// Whether the message's checksum was compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verified {
    /// The checksum matched.
    Yes,
    /// The message carried none, or 0, or its channel has none.
    NotChecked,
    /// It did not match (the book broke).
    No,
}

/// What one message did, and how many of its deletes named a price the book does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub applied: Applied,
    pub verified: Verified,
    pub absent_deletes: u32,
}

/// A book message's header fields, as [`super::decode::Message::Book`] gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    pub snapshot: bool,
    pub checksum: Option<i32>,
    pub prev_seq_id: Option<i64>,
    pub seq_id: Option<i64>,
}

/// One instrument's book on one book channel, and where its sequence stands.
#[derive(Clone, Debug)]
pub struct BookSync {
    channel: BookChannel,
    book: OrderBook,
    bids: Ladder,
    asks: Ladder,
    /// The checksum's string of the ladders' first levels.
    input: Input,
    /// The last `seqId` applied (`Some(-1)`-free: `i64::MIN` stands for a snapshot without
    /// one); `None` while the book waits for a snapshot.
    last_seq: Option<i64>,
    /// The top of the book last published, to publish a derived quote only when it changes.
    top: Quote,
}

impl BookSync {
    /// An empty book for `channel`, waiting for its snapshot.
    pub fn new(channel: BookChannel) -> BookSync {
        BookSync {
            channel,
            book: OrderBook::with_capacity(LADDER_LEVELS),
            bids: Ladder::new(BookSide::Bid),
            asks: Ladder::new(BookSide::Ask),
            input: Input::default(),
            last_seq: None,
            top: Quote::default(),
        }
    }

    /// Whether the book is in sync (a snapshot applied and nothing broken since).
    pub fn in_sync(&self) -> bool {
        self.last_seq.is_some()
    }

    /// The book (empty while not in sync).
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    /// The last `seqId` applied, as the events' `venue_seq`.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
            .map_or(0, |seq| u64::try_from(seq).unwrap_or(0))
    }

    /// The checksum of the book as it stands (its string is kept up to date by [`Self::apply`]).
    pub fn checksum(&self) -> i32 {
        self.input.checksum()
    }

    /// The checksum with its whole string written again from the levels first: what a message
    /// that changes the best level of a side costs at most. For the tests and the benchmark.
    pub fn checksum_afresh(&mut self) -> i32 {
        self.input.changed(0);
        self.refresh_input();
        self.input.checksum()
    }

    /// The bids [`Self::checksum`] covers, as `(price, size)` strings, best first.
    pub fn checksum_bids(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.bids.best_first().take(checksum::LEVELS)
    }

    /// The asks [`Self::checksum`] covers, as `(price, size)` strings, best first.
    pub fn checksum_asks(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.asks.best_first().take(checksum::LEVELS)
    }

    #[inline]
    fn refresh_input(&mut self) {
        let (bids, asks) = (&self.bids, &self.asks);
        self.input
            .refresh(|rank| bids.at_rank(rank), |rank| asks.at_rank(rank));
    }

    /// The book is no longer known (its connection dropped, it broke): it waits for a snapshot.
    pub fn invalidate(&mut self) {
        self.last_seq = None;
        self.book.clear();
        self.bids.clear();
        self.asks.clear();
        self.input.clear();
        self.top = Quote::default();
    }

    /// Applies one message: `bids` and `asks` as the message lists them, their strings in
    /// `payload`. `header` is the events' header (instrument, times; its kind and flags are set
    /// here); `out` takes them.
    pub fn apply(
        &mut self,
        update: Update,
        bids: &[Level],
        asks: &[Level],
        payload: &[u8],
        header: EventHeader,
        out: &mut impl FnMut(Event),
    ) -> Outcome {
        let mut header = header;
        let seq = update.seq_id.unwrap_or(i64::MIN);
        header.venue_seq = u64::try_from(seq).unwrap_or(0);
        header.flags &= !(flags::LAST | flags::SNAPSHOT | flags::DERIVED);
        let mut emitter = Emitter::new(out);
        let mut outcome = Outcome {
            applied: Applied::Update,
            verified: Verified::NotChecked,
            absent_deletes: 0,
        };
        let snapshot = update.snapshot || !self.channel.incremental();
        if !snapshot {
            let Some(last) = self.last_seq else {
                outcome.applied = Applied::BeforeSnapshot;
                return outcome;
            };
            let prev = update.prev_seq_id.unwrap_or(i64::MIN);
            if prev != last {
                self.invalidate();
                outcome.applied = Applied::Gap {
                    expected: last,
                    received: prev,
                };
                emitter.push(Event::new(
                    header,
                    Body::Gap(Gap::new(GapReason::SequenceBreak, last as u64, prev as u64)),
                ));
                emitter.finish(true);
                return outcome;
            }
        } else {
            self.bids.clear();
            self.asks.clear();
            self.input.changed(0);
        }
        // The strings first: the checksum decides whether the message is published.
        let mut full = false;
        'sides: for (ladder, levels) in [(&mut self.bids, bids), (&mut self.asks, asks)] {
            for level in levels {
                match ladder.set(
                    level.price,
                    level.size,
                    level.price_str(payload),
                    level.size_str(payload),
                ) {
                    Ok(Some(rank)) => self.input.changed(rank),
                    Ok(None) => outcome.absent_deletes += 1,
                    Err(Full) => {
                        full = true;
                        break 'sides;
                    }
                }
            }
        }
        if full {
            self.invalidate();
            outcome.applied = Applied::Full;
            emitter.push(Event::new(
                header,
                Body::Gap(Gap::new(GapReason::Limit, 0, header.venue_seq)),
            ));
            emitter.finish(true);
            return outcome;
        }
        self.refresh_input();
        if let Some(venue) = update.checksum.filter(|&value| value != 0) {
            if self.channel.incremental() {
                let computed = self.checksum();
                if computed != venue {
                    self.invalidate();
                    outcome.applied = Applied::Mismatch { computed, venue };
                    outcome.verified = Verified::No;
                    emitter.push(Event::new(
                        header,
                        Body::Gap(Gap::new(
                            GapReason::SequenceBreak,
                            u64::from(computed as u32),
                            u64::from(venue as u32),
                        )),
                    ));
                    emitter.finish(true);
                    return outcome;
                }
                outcome.verified = Verified::Yes;
            }
        }
        self.last_seq = Some(seq);
        if snapshot {
            outcome.applied = Applied::Snapshot;
            self.book.clear();
            for level in bids {
                self.book.set(BookSide::Bid, level.price, level.size);
            }
            for level in asks {
                self.book.set(BookSide::Ask, level.price, level.size);
            }
            let counts = Snapshot {
                bid_levels: u32::try_from(self.book.len(BookSide::Bid)).unwrap_or(u32::MAX),
                ask_levels: u32::try_from(self.book.len(BookSide::Ask)).unwrap_or(u32::MAX),
                snapshot_id: header.venue_seq,
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
            return outcome;
        }
        for (side, levels) in [(BookSide::Bid, bids), (BookSide::Ask, asks)] {
            for level in levels {
                match self.book.set(side, level.price, level.size) {
                    LevelChange::Absent | LevelChange::Unchanged => {}
                    _ => emitter.push(Event::new(
                        header,
                        Body::BookLevel(BookLevel::new(
                            Side::from(side),
                            level.price,
                            level.size.max(Fixed::ZERO),
                        )),
                    )),
                }
            }
        }
        self.quote(header, &mut emitter, false);
        emitter.finish(true);
        outcome
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
}
