//! [`Emitter`]: how a decoder hands out the events one venue message (or DBN record) makes, so
//! that the last of them carries [`flags::LAST`] without the decoder knowing in advance which
//! event is the last. Binance's book sync and Databento's normalizer use it.

use crate::event::{flags, Event};

/// Hands events to `out` one behind: each [`Emitter::push`] sends the event held before it, and
/// [`Emitter::finish`] sends the one still held, flagged `LAST` when the message is complete.
pub struct Emitter<'o, F: FnMut(Event)> {
    out: &'o mut F,
    pending: Option<Event>,
}

impl<'o, F: FnMut(Event)> Emitter<'o, F> {
    pub fn new(out: &'o mut F) -> Self {
        Emitter { out, pending: None }
    }

    #[inline]
    pub fn push(&mut self, event: Event) {
        if let Some(previous) = self.pending.replace(event) {
            (self.out)(previous);
        }
    }

    /// Sends the held event, if any, with `LAST` when `last` says this ends the venue's message
    /// (a DBN record may end one only with its own `F_LAST` flag). The emitter may be used for a
    /// next message afterwards.
    #[inline]
    pub fn finish(&mut self, last: bool) {
        if let Some(mut event) = self.pending.take() {
            if last {
                event.header.flags |= flags::LAST;
            }
            (self.out)(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Body, EventHeader, EventKind, Gap};

    fn event(seq: u64) -> Event {
        let header = EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: 0,
            venue_seq: seq,
            instrument_id: 0,
            venue_id: 0,
            kind: EventKind::Gap,
            flags: 0,
        };
        Event::new(header, Body::Gap(Gap::default()))
    }

    #[test]
    fn one_requested_book_is_looked_up_not_searched_for() {
        use crate::venue::feed::ALL_INSTRUMENTS;
        assert_eq!(selected_books(ALL_INSTRUMENTS, 10, 4), 0..4);
        assert_eq!(selected_books(12, 10, 4), 2..3);
        assert_eq!(selected_books(14, 10, 4), 0..0, "past the venue's books");
        assert_eq!(selected_books(3, 10, 4), 0..0, "below them");
    }

    #[test]
    fn only_the_last_event_of_a_message_is_flagged() {
        let mut seen = Vec::new();
        let mut out = |event: Event| seen.push((event.header.venue_seq, event.header.flags));
        let mut emitter = Emitter::new(&mut out);
        emitter.push(event(1));
        emitter.push(event(2));
        emitter.finish(true);
        emitter.push(event(3));
        emitter.finish(false);
        emitter.finish(true);
        assert_eq!(seen, [(1, 0), (2, flags::LAST), (3, 0)]);
    }
}

/// One level of a book being written as a snapshot: side, price, size, and flags it adds
/// ([`flags::SATURATED`] for a size that did not fit).
pub type SnapshotLevel = (
    crate::event::Side,
    crate::fixed::Fixed,
    crate::fixed::Fixed,
    u8,
);

/// A book as it stands now, for a reader of the event bus that asked for it (issue 20):
/// `SnapshotBegin`, every level (bids then asks, best first; flag `SNAPSHOT`), `SnapshotEnd`
/// flagged `LAST`. The same shape a venue's own resync makes, so a reader rebuilds either the
/// same way. `header` is tickwire's own (`feed::own_header`) with the book's last sequence in
/// `venue_seq` where the venue has one.
pub fn book_snapshot(
    header: crate::event::EventHeader,
    bid_levels: usize,
    ask_levels: usize,
    levels: impl Iterator<Item = SnapshotLevel>,
    out: &mut impl FnMut(Event),
) {
    use crate::event::{Body, BookLevel, Snapshot};
    let mut header = header;
    header.flags &= !flags::LAST;
    let counts = Snapshot {
        bid_levels: u32::try_from(bid_levels).unwrap_or(u32::MAX),
        ask_levels: u32::try_from(ask_levels).unwrap_or(u32::MAX),
        snapshot_id: header.venue_seq,
        _reserved: [0; 2],
    };
    let mut snapshot_header = header;
    snapshot_header.flags |= flags::SNAPSHOT;
    out(Event::new(snapshot_header, Body::SnapshotBegin(counts)));
    for (side, price, size, extra) in levels {
        let mut level_header = snapshot_header;
        level_header.flags |= extra;
        out(Event::new(
            level_header,
            Body::BookLevel(BookLevel::new(side, price, size)),
        ));
    }
    let mut end_header = header;
    end_header.flags |= flags::LAST;
    out(Event::new(end_header, Body::SnapshotEnd(counts)));
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::event::{Body, EventHeader, EventKind, Side};
    use crate::fixed::Fixed;

    #[test]
    fn a_book_snapshot_is_begin_levels_end_with_the_counts() {
        let header = EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: 5,
            venue_seq: 9,
            instrument_id: 3,
            venue_id: 1,
            kind: EventKind::Gap,
            flags: flags::NO_EXCHANGE_TS,
        };
        let levels = [
            (Side::Bid, Fixed(100), Fixed(1), 0),
            (Side::Ask, Fixed(101), Fixed::MAX, flags::SATURATED),
        ];
        let mut events = Vec::new();
        book_snapshot(header, 1, 1, levels.into_iter(), &mut |event| {
            events.push(event)
        });
        assert_eq!(events.len(), 4);
        let Body::SnapshotBegin(begin) = events[0].body() else {
            panic!("{:?}", events[0]);
        };
        assert_eq!(
            (begin.bid_levels, begin.ask_levels, begin.snapshot_id),
            (1, 1, 9)
        );
        assert_ne!(events[1].header.flags & flags::SNAPSHOT, 0);
        assert_ne!(events[2].header.flags & flags::SATURATED, 0);
        assert_eq!(events[3].kind(), EventKind::SnapshotEnd);
        assert_ne!(events[3].header.flags & flags::LAST, 0);
        assert_eq!(events[3].header.flags & flags::SNAPSHOT, 0);
        assert!(events[..3]
            .iter()
            .all(|event| event.header.flags & flags::LAST == 0));
    }
}

/// `Feed::emit_books` for a venue whose books are price-level [`OrderBook`]s (Binance, Thalex):
/// each book `instrument` selects (`ALL_INSTRUMENTS`: every one) that is in sync, written with
/// [`order_book_snapshot`] under tickwire's own header with its last sequence. `books` gives
/// each instrument's book and sequence, `None` for one out of sync. Returns the books written.
///
/// [`OrderBook`]: crate::book::OrderBook
pub fn order_books_snapshot<'b>(
    venue: crate::event::VenueId,
    instrument: crate::event::InstrumentId,
    now_ns: u64,
    books: impl Iterator<
        Item = (
            crate::event::InstrumentId,
            Option<(&'b crate::book::OrderBook, u64)>,
        ),
    >,
    out: &mut impl FnMut(Event),
) -> usize {
    let mut written = 0;
    for (id, book) in books {
        let Some((book, venue_seq)) = book else {
            continue;
        };
        if instrument != crate::venue::feed::ALL_INSTRUMENTS && instrument != id {
            continue;
        }
        let mut header = crate::venue::feed::own_header(venue, id, now_ns);
        header.venue_seq = venue_seq;
        order_book_snapshot(book, header, out);
        written += 1;
    }
    written
}

/// The positions (`id - base`) among a venue's `len` books that `instrument` selects: every one
/// for `ALL_INSTRUMENTS`, the one it names, or none for an id that is not the venue's. A feed
/// writes one requested book without walking the others.
pub fn selected_books(
    instrument: crate::event::InstrumentId,
    base: crate::event::InstrumentId,
    len: usize,
) -> std::ops::Range<usize> {
    if instrument == crate::venue::feed::ALL_INSTRUMENTS {
        return 0..len;
    }
    match instrument.checked_sub(base).map(|index| index as usize) {
        Some(index) if index < len => index..index + 1,
        _ => 0..0,
    }
}

/// The events [`order_book_snapshot`] writes for `book`: its levels, its begin and its end
/// (`Feed::book_events`).
pub fn order_book_events(book: &crate::book::OrderBook) -> usize {
    use crate::book::BookSide;
    book.len(BookSide::Bid) + book.len(BookSide::Ask) + 2
}

/// [`book_snapshot`] of a price-level [`OrderBook`](crate::book::OrderBook) (Binance's and
/// Thalex's books).
pub fn order_book_snapshot(
    book: &crate::book::OrderBook,
    header: crate::event::EventHeader,
    out: &mut impl FnMut(Event),
) {
    use crate::book::BookSide;
    let levels = [BookSide::Bid, BookSide::Ask].into_iter().flat_map(|side| {
        book.levels(side)
            .map(move |(price, size)| (side.into(), price, size, 0))
    });
    book_snapshot(
        header,
        book.len(BookSide::Bid),
        book.len(BookSide::Ask),
        levels,
        out,
    );
}
