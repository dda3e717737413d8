"""Order books kept from the bus's events, by the rules every client follows.

A book is keyed by ``(venue_id, instrument_id)``; prices and sizes stay raw fixed-point ints.

- ``SnapshotBegin``: clear the book and mark it *building*.
- ``BookLevel``: set the level to its size, size 0 removes it; only in a book that has seen a
  ``SnapshotBegin`` (before that this reader does not know the book, and ignores the level).
- ``SnapshotEnd``: the book is *valid*.
- ``Gap`` for the instrument, or for instrument ``ALL_INSTRUMENTS`` (every instrument of the
  venue): the book(s) are cleared and *unknown* until their next ``SnapshotBegin``.
- After an overrun (``missed > 0``) of bus partition ``partition`` (one decoder's ring) the
  books of that partition are unknown: a book belongs to the partition its last snapshot began
  in, and one whose partition is not known is invalidated too. Without a partition (a source
  with none, or a caller that does not say) every book is unknown.

Given the ``Bus``, ``Books`` asks for snapshots itself: every book after an overrun, and a book
it sees levels for but does not know (once, until its ``SnapshotBegin``). The appliance answers
into the stream (``SnapshotBegin``, the levels, ``SnapshotEnd``), so these rules rebuild it.

After an overrun it backs off: the request for every book waits until ``FOLLOW_UP_S`` has passed
since the last one, a wait that doubles (up to ``OVERRUN_BACKOFF_MAX_S``) with each such request
sent before every book is valid again; until it goes, no book is asked for alone. On a ring
smaller than the snapshots readers ask for, asking again at once is what makes an overrun storm.
The owed request goes in a later ``apply`` (call it after every ``Bus.read``, empty or not).
"""

import time

from . import layout
from .bus import RequestFailed

#: The first wait after a request for every book before an overrun may ask again, in seconds.
FOLLOW_UP_S = 0.25
#: The longest wait between two requests for every book after overruns, in seconds.
OVERRUN_BACKOFF_MAX_S = 8.0

UNKNOWN = "unknown"
BUILDING = "building"
VALID = "valid"


class Book:
    """One instrument's book: ``bids`` and ``asks`` map raw price to raw size."""

    __slots__ = ("venue_id", "instrument_id", "state", "bids", "asks", "partition")

    def __init__(self, venue_id, instrument_id):
        self.venue_id = venue_id
        self.instrument_id = instrument_id
        self.state = UNKNOWN
        # The bus partition its last snapshot began in, where the reader said.
        self.partition = None
        self.bids = {}
        self.asks = {}

    @property
    def valid(self) -> bool:
        """Complete and consistent: a snapshot ended and no gap or overrun since."""
        return self.state == VALID

    def clear(self, state):
        self.bids.clear()
        self.asks.clear()
        self.state = state

    def best_bid(self):
        """``(price, size)`` of the best bid, or ``None``."""
        if not self.bids:
            return None
        price = max(self.bids)
        return price, self.bids[price]

    def best_ask(self):
        """``(price, size)`` of the best ask, or ``None``."""
        if not self.asks:
            return None
        price = min(self.asks)
        return price, self.asks[price]

    def levels(self):
        """``(bids best first, asks best first)`` as lists of ``(price, size)``."""
        return (
            sorted(self.bids.items(), reverse=True),
            sorted(self.asks.items()),
        )


class Books:
    """Every book the stream names. ``apply(result.events, result.missed, result.partition)``
    after each ``Bus.read``."""

    def __init__(self, bus=None):
        self.bus = bus
        self.books = {}
        self._requested = set()
        # Back-off after overruns: when every book was last asked for, whether an overrun
        # owes a request for every book, and how long after the last one it waits.
        self._asked_all_at = None
        self._owed_all = False
        self._backoff = FOLLOW_UP_S

    def __getitem__(self, key):
        return self.books[key]

    def get(self, venue_id, instrument_id):
        return self.books.get((venue_id, instrument_id))

    def _book(self, key):
        book = self.books.get(key)
        if book is None:
            book = self.books[key] = Book(*key)
        return book

    def _request(self, venue_id, instrument_id):
        if self.bus is None or (venue_id, instrument_id) in self._requested:
            return
        if self._owed_all and instrument_id != layout.ALL_INSTRUMENTS:
            # A request for every book is owed (backing off after an overrun): it covers this.
            return
        self._requested.add((venue_id, instrument_id))
        try:
            self.bus.request_snapshot(venue_id, instrument_id)
        except (OSError, RequestFailed):
            # No appliance listening: the next overrun or unknown book asks again.
            self._requested.discard((venue_id, instrument_id))

    def request_all(self):
        """Asks for every book (a late joiner's first step)."""
        self._requested.clear()
        self._asked_all_at = time.monotonic()
        self._request(layout.ALL_VENUES, layout.ALL_INSTRUMENTS)

    def _after_overrun(self):
        self._owed_all = True
        self._pay_owed()

    def _pay_owed(self):
        """Sends the request for every book an overrun owes, once its back-off has passed."""
        if not self._owed_all:
            return
        if (
            self._asked_all_at is not None
            and time.monotonic() - self._asked_all_at < self._backoff
        ):
            return
        self._owed_all = False
        self._backoff = min(self._backoff * 2, OVERRUN_BACKOFF_MAX_S)
        self.request_all()

    def invalidate_all(self):
        """Every book unknown: what an overrun means."""
        for book in self.books.values():
            book.clear(UNKNOWN)

    def invalidate_partition(self, partition):
        """The books of bus partition ``partition``, and those whose partition is not known,
        unknown: what an overrun of that partition means. Returns their keys."""
        keys = set()
        for key, book in self.books.items():
            if book.partition is None or book.partition == partition:
                book.clear(UNKNOWN)
                keys.add(key)
        return keys

    def apply(self, events, missed=0, partition=None):
        """Applies a batch (a numpy array of ``EVENT_DTYPE``) of bus partition ``partition``
        (``ReadResult.partition``; None where not known) that follows ``missed`` lost events;
        returns the set of keys whose book changed."""
        changed = set()
        if missed > 0:
            if partition is None:
                self.invalidate_all()
                changed.update(self.books)
            else:
                changed.update(self.invalidate_partition(partition))
            self._after_overrun()
        else:
            self._pay_owed()
        if (
            self._backoff > FOLLOW_UP_S
            and not self._owed_all
            and self.books
            and all(book.state == VALID for book in self.books.values())
        ):
            # Every book valid again since the last overrun: the back-off starts over.
            self._backoff = FOLLOW_UP_S
        if len(events) == 0:
            return changed
        # Columns as Python lists: one conversion per batch instead of one per field access.
        kinds = events["kind"].tolist()
        venues = events["venue_id"].tolist()
        instruments = events["instrument_id"].tolist()
        sides = events["level_side"].tolist()
        prices = events["level_price"].tolist()
        sizes = events["level_size"].tolist()
        for index, kind in enumerate(kinds):
            key = (venues[index], instruments[index])
            if kind == layout.KIND_SNAPSHOT_BEGIN:
                book = self._book(key)
                book.clear(BUILDING)
                book.partition = partition
                self._requested.discard(key)
                self._requested.discard((key[0], layout.ALL_INSTRUMENTS))
                changed.add(key)
            elif kind == layout.KIND_BOOK_LEVEL:
                book = self.books.get(key)
                if book is None or book.state == UNKNOWN:
                    self._request(*key)
                    continue
                side = sides[index]
                if side not in (layout.SIDE_BID, layout.SIDE_ASK):
                    continue
                levels = book.bids if side == layout.SIDE_BID else book.asks
                if sizes[index] == 0:
                    levels.pop(prices[index], None)
                else:
                    levels[prices[index]] = sizes[index]
                changed.add(key)
            elif kind == layout.KIND_SNAPSHOT_END:
                book = self.books.get(key)
                if book is not None and book.state == BUILDING:
                    book.state = VALID
                    changed.add(key)
            elif kind == layout.KIND_GAP:
                if key[1] == layout.ALL_INSTRUMENTS:
                    for other_key, book in self.books.items():
                        if other_key[0] == key[0]:
                            book.clear(UNKNOWN)
                            changed.add(other_key)
                elif key in self.books:
                    self.books[key].clear(UNKNOWN)
                    changed.add(key)
            # Other kinds do not change books.
        return changed
