"""Order books kept from the bus's events, by the rules every client follows.

A book is keyed by ``(venue_id, instrument_id)``; prices and sizes stay raw fixed-point ints.

- ``SnapshotBegin``: clear the book and mark it *building*.
- ``BookLevel``: set the level to its size, size 0 removes it; only in a book that has seen a
  ``SnapshotBegin`` (before that this reader does not know the book, and ignores the level).
- ``SnapshotEnd``: the book is *valid*.
- ``Gap`` for the instrument, or for instrument ``ALL_INSTRUMENTS`` (every instrument of the
  venue): the book(s) are cleared and *unknown* until their next ``SnapshotBegin``.
- After an overrun (``missed > 0``) every book is unknown.

Given the ``Bus``, ``Books`` asks for snapshots itself: every book after an overrun, and a book
it sees levels for but does not know (once, until its ``SnapshotBegin``). The appliance answers
into the stream (``SnapshotBegin``, the levels, ``SnapshotEnd``), so these rules rebuild it.
"""

from . import layout
from .bus import RequestFailed

UNKNOWN = "unknown"
BUILDING = "building"
VALID = "valid"


class Book:
    """One instrument's book: ``bids`` and ``asks`` map raw price to raw size."""

    __slots__ = ("venue_id", "instrument_id", "state", "bids", "asks")

    def __init__(self, venue_id, instrument_id):
        self.venue_id = venue_id
        self.instrument_id = instrument_id
        self.state = UNKNOWN
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
    """Every book the stream names. ``apply(events, missed)`` after each ``Bus.read``."""

    def __init__(self, bus=None):
        self.bus = bus
        self.books = {}
        self._requested = set()

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
        self._requested.add((venue_id, instrument_id))
        try:
            self.bus.request_snapshot(venue_id, instrument_id)
        except (OSError, RequestFailed):
            # No appliance listening: the next overrun or unknown book asks again.
            self._requested.discard((venue_id, instrument_id))

    def request_all(self):
        """Asks for every book (a late joiner's first step)."""
        self._requested.clear()
        self._request(layout.ALL_VENUES, layout.ALL_INSTRUMENTS)

    def invalidate_all(self):
        """Every book unknown: what an overrun means."""
        for book in self.books.values():
            book.clear(UNKNOWN)

    def apply(self, events, missed=0):
        """Applies a batch (a numpy array of ``EVENT_DTYPE``) that follows ``missed`` lost
        events; returns the set of keys whose book changed."""
        changed = set()
        if missed > 0:
            self.invalidate_all()
            changed.update(self.books)
            self.request_all()
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
                self._book(key).clear(BUILDING)
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
