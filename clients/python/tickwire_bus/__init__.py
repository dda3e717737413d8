"""Read tickwire's shared-memory event bus from Python.

``Bus(path)`` maps the bus read-only; ``Bus.read(n)`` returns a numpy batch of ``EVENT_DTYPE``
(one 64-byte record per event, every payload variant's fields at their offsets) and the exact
number of events missed when the reader was lapped; ``Bus.directory()`` names the instruments;
``follow(path)`` yields one ``Bus`` after another across the appliance's restarts;
``Books`` keeps order books by the bus's rules. Prices and sizes are raw int64 counts of 1e-9:
``fixed_to_str``, ``fixed_to_decimal`` and ``fixed_to_float`` turn them into numbers.
"""

from .books import Book, Books
from .bus import (
    Bus,
    BusError,
    Damaged,
    DirectoryEntry,
    LayoutVersionMismatch,
    Malformed,
    NotABus,
    NotFound,
    PermissionDenied,
    ReadResult,
    RequestFailed,
    Truncated,
    UnsupportedPlatform,
    UntrustedOwner,
    describe_user,
    follow,
    snapshot_request_bytes,
)
from .fixed import fixed_to_decimal, fixed_to_float, fixed_to_str
from .layout import *  # noqa: F401,F403  (the layout's constants and EVENT_DTYPE)
from .layout import EVENT_DTYPE, LAYOUT_VERSION

__version__ = "0.1.0"
