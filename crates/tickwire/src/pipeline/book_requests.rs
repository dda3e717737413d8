//! The books readers of the event bus ask for, on the decoder thread, under a budget (issue 32).
//!
//! Any reader may ask for every book of every venue once per `[bus] snapshot_interval_ms`, and a
//! 1,000-level book is a thousand events written on the hot thread and into the bus, where they
//! can lap the other readers. So the decoder pays for the books it writes for readers out of a
//! token bucket of `[bus] snapshot_levels_per_s` levels a second (a book's begin and end count
//! as one level each), refilled from the decoder's own clock, holding a tenth of a second's
//! worth at most ([`BURST_DIVISOR`]):
//!
//! - `BookRequests::request` puts each book a request names (one, or every book of the venue)
//!   at the back of a queue of at most `[bus] snapshot_queue_books` books. A book already
//!   waiting keeps its place (the queue holds each book once: a reader that asks in a loop
//!   cannot fill it with one book); a book that finds the queue full is refused and counted.
//! - `BookRequests::serve`, in every round of the decoder's control work, writes books from
//!   the front of the queue for as long as the bucket pays for them: a book costs what
//!   `Feed::book_events` says it writes, and goes once the bucket holds that much (or is full,
//!   for a book larger than the bucket, which then goes into debt). A book out of sync by its
//!   turn costs nothing and is skipped, as `Feed::emit_books` skips it. A book served in a later
//!   round than the one that queued it was deferred, and is counted so.
//!
//! So in any span of `t` seconds the readers' books cost at most a tenth of a second's budget
//! plus `t` seconds' (plus one book, for a book larger than the bucket), whatever the readers
//! ask, and every book queued is written in the end.
//!
//! **Invariant:** nothing here allocates after `BookRequests::new`: the queue and the
//! per-instrument marks are sized then.

use crate::event::{InstrumentId, VenueId};
use crate::metrics::{self, CounterSum, CounterWriter};
use crate::venue::feed::{EventSink, Feed, ALL_INSTRUMENTS};
use std::collections::VecDeque;
use std::ops::Range;

/// The bucket holds `levels_per_s / BURST_DIVISOR` levels: a tenth of a second's budget may go
/// at once.
pub const BURST_DIVISOR: u64 = 10;
const NS_PER_S: i128 = 1_000_000_000;

/// What the decoder is told about the readers' books.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BookRequestConfig {
    /// `[bus] snapshot_levels_per_s`.
    pub levels_per_s: u64,
    /// `[bus] snapshot_queue_books`.
    pub queue_books: usize,
    /// By venue id: the venue's instrument ids (what a request for every book of a venue names).
    pub venues: Vec<Range<InstrumentId>>,
}

impl Default for BookRequestConfig {
    fn default() -> BookRequestConfig {
        let bus = crate::config::BusConfig::default();
        BookRequestConfig {
            levels_per_s: bus.snapshot_levels_per_s,
            queue_books: bus.snapshot_queue_books,
            venues: Vec::new(),
        }
    }
}

/// A token bucket of levels, refilled at `levels_per_s` from the caller's clock. Held in
/// billionths of a level, so that a refill of a few nanoseconds is never rounded away.
#[derive(Debug)]
struct Bucket {
    levels_per_s: u64,
    /// The most it holds, in levels.
    capacity: u64,
    /// What it holds, in billionths of a level; below zero after a book larger than the bucket.
    tokens: i128,
    /// The clock at the last refill; `None` before the first (the bucket starts full).
    refilled_ns: Option<u64>,
}

impl Bucket {
    fn new(levels_per_s: u64) -> Bucket {
        let levels_per_s = levels_per_s.max(1);
        let capacity = (levels_per_s / BURST_DIVISOR).max(1);
        Bucket {
            levels_per_s,
            capacity,
            tokens: i128::from(capacity) * NS_PER_S,
            refilled_ns: None,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let elapsed = self
            .refilled_ns
            .map_or(0, |then| now_ns.saturating_sub(then));
        // A clock that went back refills nothing and does not move the mark back.
        self.refilled_ns = Some(self.refilled_ns.map_or(now_ns, |then| then.max(now_ns)));
        let full = i128::from(self.capacity) * NS_PER_S;
        // At most 2^64 ns times 2^27 levels a second: far inside an i128.
        let added = i128::from(elapsed) * i128::from(self.levels_per_s);
        self.tokens = self.tokens.saturating_add(added).min(full);
    }

    /// Pays for `cost` levels if the bucket holds them, or is full (a book larger than the
    /// bucket then leaves it in debt).
    fn pay(&mut self, cost: u64) -> bool {
        let needed = i128::from(cost.min(self.capacity)) * NS_PER_S;
        if self.tokens < needed {
            return false;
        }
        self.tokens -= i128::from(cost) * NS_PER_S;
        true
    }
}

/// One book waiting: its venue and instrument, and the clock when it joined the queue.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    venue: VenueId,
    instrument: InstrumentId,
    queued_ns: u64,
}

/// The decoder's side of the readers' book requests.
pub(super) struct BookRequests {
    venues: Vec<Range<InstrumentId>>,
    queue: VecDeque<Waiting>,
    capacity: usize,
    /// By instrument id: whether the book waits in the queue.
    waiting: Vec<bool>,
    bucket: Bucket,
    counters: Writers,
}

struct Writers {
    queued: CounterWriter,
    dequeued: CounterWriter,
    deferred: CounterWriter,
    refused: CounterWriter,
    served: CounterWriter,
    levels: CounterWriter,
}

/// What the control thread reads about the readers' books (the bus's metrics): every decoder's
/// counts together.
pub struct BookRequestReaders {
    /// Books that joined the queue.
    pub queued: CounterSum,
    /// Books that left it (served, or skipped as out of sync by their turn); `queued -
    /// dequeued` wait now.
    pub dequeued: CounterSum,
    /// Books written in a later round than the one that asked for them: the budget made them
    /// wait.
    pub deferred: CounterSum,
    /// Books refused because the queue was full.
    pub refused: CounterSum,
    /// Books written to the bus because a reader asked.
    pub served: CounterSum,
    /// Events those books made (levels, begins and ends): what the budget paid for.
    pub levels: CounterSum,
}

impl BookRequestReaders {
    /// Adds another decoder's counts to these.
    pub fn join(self, other: BookRequestReaders) -> BookRequestReaders {
        let both = |a: CounterSum, b: CounterSum| {
            CounterSum::new(a.parts().iter().chain(b.parts()).cloned().collect())
        };
        BookRequestReaders {
            queued: both(self.queued, other.queued),
            dequeued: both(self.dequeued, other.dequeued),
            deferred: both(self.deferred, other.deferred),
            refused: both(self.refused, other.refused),
            served: both(self.served, other.served),
            levels: both(self.levels, other.levels),
        }
    }

    /// Books waiting for the budget now.
    pub fn waiting(&self) -> u64 {
        self.queued.get().saturating_sub(self.dequeued.get())
    }
}

impl BookRequests {
    pub(super) fn new(config: &BookRequestConfig) -> (BookRequests, BookRequestReaders) {
        let (queued, queued_r) = metrics::counter();
        let (dequeued, dequeued_r) = metrics::counter();
        let (deferred, deferred_r) = metrics::counter();
        let (refused, refused_r) = metrics::counter();
        let (served, served_r) = metrics::counter();
        let (levels, levels_r) = metrics::counter();
        let instruments = config
            .venues
            .iter()
            .map(|range| range.end as usize)
            .max()
            .unwrap_or(0);
        let capacity = config.queue_books.max(1);
        let requests = BookRequests {
            venues: config.venues.clone(),
            queue: VecDeque::with_capacity(capacity.min(instruments.max(1))),
            capacity,
            waiting: vec![false; instruments],
            bucket: Bucket::new(config.levels_per_s),
            counters: Writers {
                queued,
                dequeued,
                deferred,
                refused,
                served,
                levels,
            },
        };
        let one = |reader| CounterSum::new(vec![reader]);
        let readers = BookRequestReaders {
            queued: one(queued_r),
            dequeued: one(dequeued_r),
            deferred: one(deferred_r),
            refused: one(refused_r),
            served: one(served_r),
            levels: one(levels_r),
        };
        (requests, readers)
    }

    /// A reader asked for the book of `instrument` of `venue` (`ALL_INSTRUMENTS`: each of the
    /// venue's): each book not waiting yet joins the back of the queue, or is refused and
    /// counted when the queue is full. An id that is not the venue's is ignored (the control
    /// thread checked it).
    pub(super) fn request(&mut self, venue: VenueId, instrument: InstrumentId, now_ns: u64) {
        let Some(range) = self.venues.get(usize::from(venue)).cloned() else {
            return;
        };
        let wanted = if instrument == ALL_INSTRUMENTS {
            range
        } else if range.contains(&instrument) {
            instrument..instrument + 1
        } else {
            return;
        };
        for instrument in wanted {
            let Some(waiting) = self.waiting.get_mut(instrument as usize) else {
                continue;
            };
            if *waiting {
                continue;
            }
            if self.queue.len() >= self.capacity {
                self.counters.refused.increment();
                continue;
            }
            *waiting = true;
            self.queue.push_back(Waiting {
                venue,
                instrument,
                queued_ns: now_ns,
            });
            self.counters.queued.increment();
        }
    }

    /// Writes books from the front of the queue while the budget pays for them (see the module
    /// docs). `sink` should send them to the bus only. Returns the books written.
    pub(super) fn serve(
        &mut self,
        now_ns: u64,
        feeds: &mut [Box<dyn Feed>],
        sink: &mut EventSink<'_>,
    ) -> usize {
        if self.queue.is_empty() {
            return 0;
        }
        self.bucket.refill(now_ns);
        let mut served = 0;
        while let Some(&next) = self.queue.front() {
            let feed = feeds.get_mut(usize::from(next.venue));
            let cost = feed
                .as_ref()
                .map_or(0, |feed| feed.book_events(next.instrument));
            if cost > 0 && !self.bucket.pay(cost as u64) {
                break;
            }
            self.queue.pop_front();
            if let Some(waiting) = self.waiting.get_mut(next.instrument as usize) {
                *waiting = false;
            }
            self.counters.dequeued.increment();
            let Some(feed) = feed.filter(|_| cost > 0) else {
                continue;
            };
            let books = feed.emit_books(next.instrument, now_ns, sink);
            served += books;
            self.counters.served.add(books as u64);
            // What the budget paid: what the feed said it writes (a bus-only sink keeps no
            // count of its own).
            self.counters.levels.add(cost as u64);
            if next.queued_ns < now_ns {
                self.counters.deferred.increment();
            }
        }
        served
    }

    /// Books waiting now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Body, Event};
    use crate::net::ConnId;
    use crate::venue::feed::{MalformedSample, SnapshotReply, SnapshotRequest, VenueReply};

    const MS: u64 = 1_000_000;

    /// A venue's books, `levels[i]` levels each (instrument ids from `base`), written as
    /// `emit::book_snapshot` writes them; a book of `None` levels is out of sync.
    struct Books {
        venue: VenueId,
        base: InstrumentId,
        levels: Vec<Option<usize>>,
    }

    impl Feed for Books {
        fn on_message(&mut self, _: ConnId, _: u64, _: &[u8], _: &mut EventSink<'_>) {}

        fn on_snapshot(&mut self, _: SnapshotReply, _: u64, _: &mut EventSink<'_>) {}

        fn snapshot_requests(&mut self, _: u64, _: &mut dyn FnMut(SnapshotRequest)) {}

        fn on_disconnect(
            &mut self,
            _: ConnId,
            _: Range<InstrumentId>,
            _: u64,
            _: &mut EventSink<'_>,
        ) {
        }

        fn take_malformed(&mut self) -> Option<MalformedSample> {
            None
        }

        fn take_reply(&mut self) -> Option<VenueReply> {
            None
        }

        fn book_events(&self, instrument: InstrumentId) -> usize {
            self.levels[(instrument - self.base) as usize].map_or(0, |levels| levels + 2)
        }

        fn emit_books(
            &mut self,
            instrument: InstrumentId,
            now_ns: u64,
            sink: &mut EventSink<'_>,
        ) -> usize {
            assert_ne!(instrument, ALL_INSTRUMENTS, "one book at a time");
            let Some(count) = self.levels[(instrument - self.base) as usize] else {
                return 0;
            };
            let header = crate::venue::feed::own_header(self.venue, instrument, now_ns);
            let one = crate::fixed::Fixed::from_units(1).expect("1 fits");
            let levels = (0..count).map(|_| (crate::event::Side::Bid, one, one, 0));
            crate::venue::emit::book_snapshot(header, count, 0, levels, &mut |event| {
                sink.push(event)
            });
            1
        }
    }

    /// Two venues: venue 0 with ten books of 1,000 levels (ids 0..10), venue 1 with five of
    /// 100 (ids 10..15); the books `out_of_sync` names (venue 0's positions) have none.
    fn venues(out_of_sync: &[usize]) -> Vec<Box<dyn Feed>> {
        let mut big = Books {
            venue: 0,
            base: 0,
            levels: vec![Some(1_000); 10],
        };
        for &index in out_of_sync {
            big.levels[index] = None;
        }
        let small = Books {
            venue: 1,
            base: 10,
            levels: vec![Some(100); 5],
        };
        vec![Box::new(big), Box::new(small)]
    }

    fn config(levels_per_s: u64, queue_books: usize) -> BookRequestConfig {
        BookRequestConfig {
            levels_per_s,
            queue_books,
            venues: vec![0..10, 10..15],
        }
    }

    /// The ring the books are written to, made once (a ring is touched in full when made).
    struct Out {
        producer: crate::ring::Producer<Event>,
        consumer: crate::ring::Consumer<Event>,
    }

    /// One round of the decoder's control work at `now_ns`: the snapshot events it wrote, by
    /// kind (begins, levels, ends), and the instruments begun, in order.
    fn serve_round(
        requests: &mut BookRequests,
        feeds: &mut [Box<dyn Feed>],
        out: &mut Out,
        now_ns: u64,
    ) -> ((usize, usize, usize), Vec<InstrumentId>) {
        let mut lost = false;
        let mut sink = EventSink::new(&mut out.producer, &mut lost);
        requests.serve(now_ns, feeds, &mut sink);
        sink.publish();
        assert!(!lost, "the test's ring holds a round");
        let mut counts = (0, 0, 0);
        let mut begun = Vec::new();
        while let Some(event) = out.consumer.try_pop() {
            match event.body() {
                Body::SnapshotBegin(_) => {
                    counts.0 += 1;
                    begun.push(event.header.instrument_id);
                }
                Body::BookLevel(_) => counts.1 += 1,
                Body::SnapshotEnd(_) => counts.2 += 1,
                other => panic!("only snapshots are written: {other:?}"),
            }
        }
        (counts, begun)
    }

    fn out() -> Out {
        let (producer, consumer) = crate::ring::ring::<Event>(1 << 15);
        Out { producer, consumer }
    }

    /// Issue 32: a reader that asks for every book of every venue every 100 ms (the snapshot
    /// interval) is written at most the budget's worth: with 100,000 levels/s the bucket holds
    /// 10,000, and the books it asks for (10,530 events each time) are more than an interval
    /// refills. Driven by the decoder's clock (a round a millisecond), never by wall time.
    #[test]
    fn a_reader_asking_for_every_book_in_a_loop_gets_at_most_the_budget() {
        const BUDGET: u64 = 100_000;
        let mut feeds = venues(&[]);
        let mut out = out();
        let (mut requests, readers) = BookRequests::new(&config(BUDGET, 64));
        let start = 1_000 * MS;
        let mut per_interval = Vec::new();
        let mut total = 0u64;
        for interval in 0..50u64 {
            let mut events = 0u64;
            for ms in 0..100u64 {
                let now = start + (interval * 100 + ms) * MS;
                if ms == 0 {
                    requests.request(0, ALL_INSTRUMENTS, now);
                    requests.request(1, ALL_INSTRUMENTS, now);
                }
                let ((begins, levels, ends), _) =
                    serve_round(&mut requests, &mut feeds, &mut out, now);
                assert_eq!(begins, ends, "books are written whole");
                events += (begins + levels + ends) as u64;
            }
            total += events;
            per_interval.push(events);
            // Never more than the bucket (a tenth of a second's) and what the time so far
            // refilled.
            let elapsed_ns = (interval + 1) * 100 * MS;
            let allowed = BUDGET / BURST_DIVISOR + BUDGET * elapsed_ns / 1_000_000_000;
            assert!(
                total <= allowed,
                "{total} events after {} intervals: {per_interval:?}",
                interval + 1
            );
        }
        // One interval: at most the bucket and one interval's refill.
        assert!(
            per_interval
                .iter()
                .all(|&events| events <= 2 * BUDGET / BURST_DIVISOR),
            "{per_interval:?}"
        );
        // And the budget is used, not wasted: five seconds' worth, less at most one book.
        assert!(total >= 5 * BUDGET - 1_002, "{total}");
        assert_eq!(readers.levels.get(), total);
        assert!(readers.deferred.get() > 0, "books waited for the budget");
        assert_eq!(readers.refused.get(), 0, "the queue holds each book once");
        assert!(
            readers.waiting() <= 15,
            "each book once: {}",
            readers.waiting()
        );
    }

    /// Books asked for while the budget was spent are written later, every one of them, in the
    /// order asked; asking again for a book that waits does not queue it twice.
    #[test]
    fn queued_books_are_eventually_served_once_each_in_order() {
        let mut feeds = venues(&[]);
        let mut out = out();
        // 1,000 levels/s: the bucket holds 100, less than any book here.
        let (mut requests, readers) = BookRequests::new(&config(1_000, 64));
        let start = 5 * MS;
        requests.request(1, ALL_INSTRUMENTS, start);
        requests.request(0, 3, start);
        requests.request(0, ALL_INSTRUMENTS, start);
        requests.request(1, 12, start);
        assert_eq!(requests.waiting(), 15, "each book once");
        let mut order = Vec::new();
        let mut now = start;
        while requests.waiting() > 0 {
            let ((begins, _, _), begun) = serve_round(&mut requests, &mut feeds, &mut out, now);
            assert!(begins <= 1, "the budget spreads them out");
            order.extend(begun);
            now += MS;
            assert!(
                now < start + 60_000 * MS,
                "served within a minute of decoder time"
            );
        }
        assert_eq!(order, [10, 11, 12, 13, 14, 3, 0, 1, 2, 4, 5, 6, 7, 8, 9]);
        assert_eq!(readers.served.get(), 15);
        assert_eq!(readers.queued.get(), 15);
        assert_eq!(readers.dequeued.get(), 15);
        assert_eq!(readers.deferred.get(), 14, "all but the first waited");
        assert_eq!(readers.waiting(), 0);
        assert_eq!(readers.refused.get(), 0);
        // Each book waits until the bucket is full again after the one before it: the last
        // goes once the first fourteen (five of 102 events, nine of 1,002) are paid for.
        assert_eq!(now - MS - start, (5 * 102 + 9 * 1_002) * MS);
    }

    /// A full queue refuses the books that do not fit and counts them, and takes requests again
    /// once it has room; a book out of sync by its turn is skipped at no cost.
    #[test]
    fn books_beyond_the_queue_are_refused_and_counted() {
        let mut feeds = venues(&[1]);
        let mut out = out();
        let (mut requests, readers) = BookRequests::new(&config(1_000, 4));
        requests.request(0, ALL_INSTRUMENTS, MS);
        assert_eq!(requests.waiting(), 4);
        assert_eq!(readers.refused.get(), 6);
        requests.request(0, ALL_INSTRUMENTS, MS);
        assert_eq!(readers.refused.get(), 12, "the same six again");
        requests.request(1, 10, MS);
        assert_eq!(readers.refused.get(), 13);
        // Not the venue's, or no venue at all: ignored (the control thread checks requests).
        requests.request(0, 12, MS);
        requests.request(9, 0, MS);
        assert_eq!(readers.refused.get(), 13);
        let mut now = MS;
        let mut written = Vec::new();
        while requests.waiting() > 0 {
            written.extend(serve_round(&mut requests, &mut feeds, &mut out, now).1);
            now += MS;
        }
        assert_eq!(written, [0, 2, 3], "book 1 was out of sync");
        assert_eq!(readers.served.get(), 3);
        assert_eq!(readers.dequeued.get(), 4);
        requests.request(0, 9, now);
        assert_eq!(requests.waiting(), 1, "room again");
        assert_eq!(readers.refused.get(), 13);
    }

    /// The bucket never rounds a short refill away, never overflows on a long one, and lets a
    /// book larger than itself go when full, into debt.
    #[test]
    fn the_bucket_refills_exactly_and_saturates() {
        let mut bucket = Bucket::new(1_000);
        bucket.refill(0);
        assert!(bucket.pay(100), "it starts full");
        assert!(!bucket.pay(1));
        // One level a millisecond, refilled a microsecond at a time.
        for step in 1..=1_000u64 {
            bucket.refill(step * 1_000);
        }
        assert!(bucket.pay(1));
        assert!(!bucket.pay(1));
        bucket.refill(u64::MAX);
        assert!(bucket.pay(100));
        assert!(
            !bucket.pay(1),
            "full is the bucket's capacity, however long it waited"
        );
        let mut bucket = Bucket::new(1_000);
        bucket.refill(0);
        assert!(bucket.pay(1_002));
        bucket.refill(900 * MS);
        assert!(!bucket.pay(2), "still paying for the big book");
        bucket.refill(1_100 * MS);
        assert!(bucket.pay(2));
    }
}
