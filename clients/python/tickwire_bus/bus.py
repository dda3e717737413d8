"""A reader of tickwire's shared-memory event bus: ``Bus``.

The bus is a file (``[bus] path`` in tickwire.toml) that the appliance writes and any number of
processes map read-only. ``Bus.read`` follows the protocol of crates/tickwire-bus/src/ring.rs,
validate-after-read: load the write **cursor**, copy the slots of the positions below it, then
load the writer's **claim**; a copied position ``p`` whose slot the writer may have begun to
reuse (``p + capacity < claim``) is thrown away and counted as missed. The count of missed
events is therefore exact, and no event returned is torn or stale.

Partitions (layout version 3). An appliance with several decoder threads writes one ring per
decoder, each with its own claim and cursor. ``Bus.read`` merges them as the Rust and C readers
do: each read takes one partition's next events (``ReadResult.partition`` says which), the
partitions in turn from the one after the last read's. Every instrument is in one partition, so
its events come in order; a reader lapped on one partition is told how many it lost there and
reads the others on. ``Bus.positions`` holds each partition's position.

Why this is sound in Python. The Rust and C readers order their loads with atomics: the cursor
with acquire, the slots with relaxed loads, an acquire fence, then the claim. Python has no
atomics or fences; it relies instead on the x86-64 memory model, in which loads are not
reordered with other loads and stores are not reordered with other stores (Intel SDM vol. 3,
8.2.2). The writer stores the claim before it overwrites a slot and the slots before the cursor;
this reader loads the cursor before the slots and the slots before the claim (each load is a
separate numpy call, so the compiler cannot reorder them either). So if a copied slot holds a
later write, the claim load sees the claim that preceded it, exactly as the fences guarantee in
Rust. The cursor and the claim are read as aligned 8-byte loads (one numpy element each), which
x86-64 performs atomically; slots may be copied in any width, as a slot being overwritten is
discarded whole. On another architecture (aarch64 reorders loads) none of this holds, so
``Bus`` refuses to open there rather than risk returning torn events.

Whose file. ``Bus`` reads a bus only from an owner it trusts, checked with ``fstat`` on the
descriptor it maps: root, this process's user, or the owner of the directory the path names when
no one else may write there (``/run/tickwire`` under systemd); ``owner=`` names another (the
appliance's user, for a bus in ``/dev/shm``, where any user could make the path first and serve a
forged feed). Anyone else's file raises ``UntrustedOwner``, naming its owner.

Truncation. A mapped page past the end of a file truncated under the reader raises SIGBUS,
which kills Python. ``Bus.read`` checks the file's size (one ``os.fstat``) before every batch and
raises ``Truncated`` instead; a truncation in the microseconds between that check and the copy
can still raise SIGBUS (the Rust reader closes that window with a SIGBUS handler, which Python
cannot install safely). Readers cannot truncate the file; its owner or root can.
"""

import mmap
import os
import platform
import pwd
import socket
import stat
import struct
import sys
import time
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from . import layout
from .layout import EVENT_DTYPE

_WORD = {
    name: offset // 8
    for name, offset in [
        ("partitions", layout.OFF_PARTITIONS),
        ("directory_count", layout.OFF_DIRECTORY_COUNT),
        ("state", layout.OFF_STATE),
    ]
}


def parse_directory_entry(raw, at: int):
    """The 256-byte directory entry at byte ``at`` of ``raw`` (the bus's layout, which a NATS
    directory reply carries as it is)."""
    instrument_id, venue_id = struct.unpack_from("<IH", raw, at)

    def field(spec):
        return _text(raw[at + spec[0] : at + spec[0] + spec[1]])

    return DirectoryEntry(
        instrument_id=instrument_id,
        venue_id=venue_id,
        venue=field(layout.ENTRY_VENUE),
        symbol=field(layout.ENTRY_SYMBOL),
        venue_symbol=field(layout.ENTRY_VENUE_SYMBOL),
    )


class BusError(Exception):
    """Why a bus could not be opened or read. The message names the file and what to do."""


class NotFound(BusError):
    """No file at the path: no appliance has made a bus there."""


class PermissionDenied(BusError):
    """The file exists but this user may not read it (not in the bus's group)."""


class NotABus(BusError):
    """The file is not a tickwire bus (no TICKWBUS magic, or not a regular file)."""


class UntrustedOwner(BusError):
    """The file belongs to a user this reader does not trust (``owner``): a file another user
    made at the path could be a forged feed."""

    def __init__(self, message, uid):
        super().__init__(message)
        self.uid = uid


class LayoutVersionMismatch(BusError):
    """A bus of another layout version than this package reads."""

    def __init__(self, message, found, supported):
        super().__init__(message)
        self.found = found
        self.supported = supported


class Malformed(BusError):
    """The header's sizes do not fit the file."""


class Truncated(BusError):
    """The file was truncated under this reader: open the bus again once an appliance made one."""


class Damaged(BusError):
    """The memory does not behave as one writer's ring (the file was rewritten or damaged)."""


class UnsupportedPlatform(BusError):
    """This reader's protocol needs x86-64's load ordering (see the module documentation)."""


class RequestFailed(BusError):
    """A snapshot request could not be sent (no appliance listening at the request socket)."""


@dataclass(frozen=True)
class DirectoryEntry:
    """One instrument as the directory names it."""

    instrument_id: int
    venue_id: int
    venue: str
    symbol: str
    venue_symbol: str


class ReadResult(namedtuple("ReadResult", ["events", "missed"])):
    """What one read returned: ``missed`` events of partition ``partition`` lost to its writer
    (the reader was lapped there), then ``events`` of that partition, a numpy array of
    ``EVENT_DTYPE`` that follows them without a hole. Unpacks as ``(events, missed)``."""

    def __new__(cls, events, missed, partition=0):
        result = super().__new__(cls, events, missed)
        result.partition = partition
        return result


def _text(raw: bytes) -> str:
    """A NUL-padded field's text: up to its first NUL, invalid UTF-8 replaced."""
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def snapshot_request_bytes(venue_id: int, instrument_id: int) -> bytes:
    """The 16 bytes of a snapshot request (layout.rs's ``SnapshotRequest``)."""
    return struct.pack(
        "<4sHHHHI",
        layout.REQUEST_MAGIC,
        layout.LAYOUT_VERSION,
        layout.REQUEST_KIND_BOOK_SNAPSHOT,
        venue_id,
        0,
        instrument_id,
    )


def describe_user(uid: int) -> str:
    """``user NAME (uid N)``, or ``uid N`` for an id with no name here."""
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _check_owner(path: str, uid: int, owner) -> None:
    """Raises ``UntrustedOwner`` unless a bus file of ``uid`` at ``path`` is accepted: the rule
    of the Rust reader's ``Owner`` (see ``Bus``)."""
    if owner is not None:
        try:
            expected = owner if isinstance(owner, int) else pwd.getpwnam(owner).pw_uid
        except KeyError:
            raise BusError(f"bus {path}: no user {owner!r} on this host") from None
        if uid == expected:
            return
        trusted = f"{describe_user(expected)} only, as asked"
    else:
        me = os.geteuid()
        if uid in (0, me):
            return
        directory = os.path.dirname(path) or "."
        try:
            info = os.stat(directory)
            if info.st_uid == uid and info.st_mode & 0o022 == 0:
                return
        except OSError:
            pass
        trusted = (
            f"root, its own {describe_user(me)} and the owner of {directory} when no one else "
            "may write there"
        )
    raise UntrustedOwner(
        f"bus {path} belongs to {describe_user(uid)}, whom this reader does not trust (it trusts "
        f"{trusted}): a file another user made at the path could be a forged feed, so it is not "
        "read; if that user runs the appliance, name it as the bus's owner (Bus(path, owner=...))",
        uid=uid,
    )


class Bus:
    """One reader of a bus, with its own position; any number may read one bus.

    ``start`` is ``"latest"`` (only events published from now on), ``"oldest"`` (the oldest the
    ring still holds) or a position (one gone already is reported as missed by the first read).

    ``owner`` says whose file to accept (checked on the opened file): ``None`` (the default) is
    root, this process's user, or the owner of the bus's directory when no one else may write it
    (``/run/tickwire`` under systemd); a user name or uid is exactly that user (the appliance's,
    for a bus in a directory others may write too, such as ``/dev/shm``). A file of anyone else
    raises ``UntrustedOwner`` naming its owner.
    """

    def __init__(self, path, start="latest", owner=None):
        self.path = os.fspath(path)
        if platform.machine().lower() not in ("x86_64", "amd64") or sys.byteorder != "little":
            raise UnsupportedPlatform(
                f"bus {self.path}: this Python reader runs on x86-64 only ({platform.machine()} "
                "may reorder loads, which its read protocol relies on not happening); use the C "
                "header or the Rust client there"
            )
        self._mmap = None
        self._header = None
        self._ring = None
        self._rings = None
        try:
            # O_NONBLOCK: a FIFO planted at the path must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            raise NotFound(
                f"no bus at {self.path}: no appliance has made one there (is it running, with "
                "[bus] in its tickwire.toml naming this path?)"
            ) from None
        except PermissionError as error:
            raise PermissionDenied(
                f"bus {self.path}: permission denied ({error.strerror}); readers need to be in "
                "the group that [bus] group names"
            ) from None
        except OSError as error:
            raise BusError(f"bus {self.path}: opening: {error.strerror}") from None
        try:
            self._open(fd, start, owner)
        except BaseException:
            self.close()
            os.close(fd)
            raise
        self._fd = fd

    def _open(self, fd, start, owner):
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(info.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(info.st_mode)
                else "a socket"
                if stat.S_ISSOCK(info.st_mode)
                else "a device"
            )
            raise NotABus(f"{self.path} is not a tickwire bus: it is {kind}, not a regular file")
        # The owner of the file opened (fstat), so the file checked is the file read.
        _check_owner(self.path, info.st_uid, owner)
        size = info.st_size
        self._identity = (info.st_dev, info.st_ino)
        if size < layout.HEADER_BYTES:
            first = os.pread(fd, 8, 0)
            if first != layout.MAGIC:
                raise NotABus(f"{self.path} is not a tickwire bus (no TICKWBUS magic)")
            raise Malformed(
                f"bus {self.path} is damaged: {size} bytes, shorter than its "
                f"{layout.HEADER_BYTES}-byte header"
            )
        self._mmap = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        self._size = size
        self._header = np.frombuffer(self._mmap, dtype="<u8", count=layout.HEADER_BYTES // 8)
        (magic, version, event_size) = struct.unpack_from("<8sII", self._mmap, 0)
        if magic != layout.MAGIC:
            raise NotABus(f"{self.path} is not a tickwire bus (no TICKWBUS magic)")
        if version != layout.LAYOUT_VERSION:
            raise LayoutVersionMismatch(
                f"bus {self.path} has layout version {version}; this reader reads version "
                f"{layout.LAYOUT_VERSION} (update the reader or the appliance so that they match)",
                found=version,
                supported=layout.LAYOUT_VERSION,
            )
        if event_size != layout.EVENT_SIZE:
            raise Malformed(f"bus {self.path} is damaged: event size {event_size}, not 64")
        word = lambda offset: int(self._header[offset // 8])  # noqa: E731
        capacity = word(layout.OFF_CAPACITY)
        directory_capacity = word(layout.OFF_DIRECTORY_CAPACITY)
        partitions = word(layout.OFF_PARTITIONS)
        if not 1 <= partitions <= layout.MAX_PARTITIONS:
            raise Malformed(
                f"bus {self.path} is damaged: {partitions} partitions: a bus has from 1 to "
                f"{layout.MAX_PARTITIONS} (one per decoder)"
            )
        if (
            capacity & (capacity - 1) != 0
            or not layout.MIN_CAPACITY <= capacity <= layout.MAX_CAPACITY
        ):
            raise Malformed(
                f"bus {self.path} is damaged: capacity {capacity}: the ring holds a power of two "
                f"of events, from {layout.MIN_CAPACITY} to {layout.MAX_CAPACITY}"
            )
        if not 1 <= directory_capacity <= layout.MAX_DIRECTORY:
            raise Malformed(
                f"bus {self.path} is damaged: directory capacity {directory_capacity}: from 1 "
                f"to {layout.MAX_DIRECTORY} entries"
            )
        directory_offset = layout.HEADER_BYTES + partitions * capacity * layout.EVENT_SIZE
        if (
            word(layout.OFF_RING_OFFSET) != layout.HEADER_BYTES
            or word(layout.OFF_DIRECTORY_OFFSET) != directory_offset
            or word(layout.OFF_DIRECTORY_ENTRY_SIZE) != layout.DIRECTORY_ENTRY_BYTES
        ):
            raise Malformed(
                f"bus {self.path} is damaged: its region offsets do not follow from its capacity"
            )
        file_bytes = directory_offset + directory_capacity * layout.DIRECTORY_ENTRY_BYTES
        if size < file_bytes:
            raise Malformed(
                f"bus {self.path} is damaged: {size} bytes, shorter than the {file_bytes} its "
                "header describes"
            )
        self.capacity = capacity
        self.directory_capacity = directory_capacity
        self._directory_offset = directory_offset
        self.epoch = word(layout.OFF_EPOCH)
        self.created_ns = word(layout.OFF_CREATED_NS)
        self.writer_pid = word(layout.OFF_WRITER_PID)
        self.partitions = partitions
        self._rings = [
            np.frombuffer(
                self._mmap,
                dtype="<u8",
                count=capacity * 8,
                offset=layout.HEADER_BYTES + k * capacity * layout.EVENT_SIZE,
            ).reshape(capacity, 8)
            for k in range(partitions)
        ]
        self._ring = self._rings[0]
        self._turn = 0
        self.positions = [0] * partitions
        for k in range(partitions):
            cursor = self.partition_cursor(k)
            if start == "latest":
                self.positions[k] = cursor
            elif start == "oldest":
                # The oldest slot the writer has not claimed for reuse (the claim runs a little
                # ahead of the cursor), as the Rust reader starts.
                claim = self._claim(k)
                self.positions[k] = max(claim - capacity, cursor - capacity, 0)
            elif isinstance(start, int) and start >= 0:
                # A position of partition 0; the others start at their cursor.
                self.positions[k] = start if k == 0 else cursor
            else:
                raise ValueError(f"start: 'latest', 'oldest' or a position, not {start!r}")
        self.missed_total = 0

    # -- the header's live words --------------------------------------------------------------

    def partition_cursor(self, k: int) -> int:
        """Partition ``k``'s write cursor: events published there since the bus was made."""
        return int(self._header[(layout.OFF_CURSOR + layout.PARTITION_STRIDE * k) // 8])

    def _claim(self, k: int) -> int:
        return int(self._header[(layout.OFF_CLAIM + layout.PARTITION_STRIDE * k) // 8])

    @property
    def cursor(self) -> int:
        """The write cursors together: events published since the bus was made."""
        return sum(self.partition_cursor(k) for k in range(self.partitions))

    @property
    def position(self) -> int:
        """The position of the next event this reader reads in partition 0 (the only one of a
        bus of one partition); ``positions`` holds every partition's. Set it to seek."""
        return self.positions[0]

    @position.setter
    def position(self, value: int):
        self.positions[0] = value

    @property
    def lag(self) -> int:
        """Events published that this reader has not read, every partition together (above
        the capacity: lapped)."""
        return sum(
            max(self.partition_cursor(k) - self.positions[k], 0) for k in range(self.partitions)
        )

    def is_closed(self) -> bool:
        """Whether the appliance stopped cleanly: nothing more will be written to this file."""
        return int(self._header[_WORD["state"]]) == layout.STATE_CLOSED

    def replaced(self) -> bool:
        """Whether the path now names another file (a restarted appliance made a new bus: open
        it again) or none (it was removed). A ``stat``: call it when idle, not per read."""
        try:
            info = os.stat(self.path)
        except OSError:
            return True
        return (info.st_dev, info.st_ino) != self._identity

    def ended(self) -> bool:
        """Whether nothing more will come from this file: the appliance closed it (a clean stop)
        and this reader has read every event, or another file replaced it at the path (a
        restart). Calls ``replaced``: call it when idle, not per read. ``follow`` then opens the
        next bus."""
        return (self.is_closed() and self.lag == 0) or self.replaced()

    def check_size(self):
        """Raises ``Truncated`` when the file is shorter than the mapping (one ``fstat``)."""
        size = os.fstat(self._fd).st_size
        if size < self._size:
            raise Truncated(
                f"bus {self.path} was truncated under this reader ({size} bytes, {self._size} "
                "mapped); open it again once an appliance has made a new one"
            )

    # -- events -------------------------------------------------------------------------------

    def read(self, max_events: int = 4096) -> ReadResult:
        """Copies up to ``max_events`` events of one partition, oldest first, after counting in
        ``missed`` any that partition's writer lapped this reader by (``partition`` says which).
        Takes the partitions in turn, from the one after the last read's, and returns the first
        that has something. Never blocks."""
        self.check_size()
        for step in range(self.partitions):
            k = (self._turn + step) % self.partitions
            result = self._read_partition(k, max_events)
            if len(result.events) or result.missed:
                self._turn = (k + 1) % self.partitions
                return result
        return ReadResult(np.empty(0, dtype=EVENT_DTYPE), 0)

    def _read_partition(self, k: int, max_events: int) -> ReadResult:
        """One partition's read: ring.rs's ``RingReader::read``, step for step."""
        empty = np.empty(0, dtype=EVENT_DTYPE)
        cursor = self.partition_cursor(k)
        position = self.positions[k]
        if cursor == position or max_events <= 0:
            return ReadResult(empty, 0, k)
        if cursor < position:
            raise Damaged(
                f"bus {self.path} is damaged: the cursor {cursor} of partition {k} is below this "
                f"reader's position {position} (the file was replaced or rewritten)"
            )
        capacity = self.capacity
        ring = self._rings[k]
        # Positions more than a ring behind the cursor are gone already.
        start = max(position, cursor - min(capacity, cursor))
        copied = min(cursor - start, max_events)
        words = np.empty((copied, 8), dtype="<u8")
        first_slot = start & (capacity - 1)
        head = min(copied, capacity - first_slot)
        words[:head] = ring[first_slot : first_slot + head]
        if head < copied:
            words[head:] = ring[: copied - head]
        # The claim, loaded after the copy (x86-64 keeps loads in order: the module doc).
        claim = self._claim(k)
        # The oldest position whose slot the writer has not started to reuse.
        oldest_intact = max(claim - capacity, 0)
        end = start + copied
        if oldest_intact >= end:
            # Everything copied may be torn: skip to what is intact and report the loss.
            missed = oldest_intact - position
            self.positions[k] = oldest_intact
            self.missed_total += missed
            return ReadResult(empty, missed, k)
        first = max(oldest_intact, start)
        events = words[first - start :].view(EVENT_DTYPE).reshape(-1)
        kinds = events["kind"]
        bad = np.flatnonzero((kinds < layout.KIND_QUOTE) | (kinds > layout.KIND_LIQUIDATION))
        if bad.size:
            index = int(bad[0])
            raise Damaged(
                f"bus {self.path} is damaged: the event at position {first + index} of partition "
                f"{k} has kind byte {int(kinds[index])}, which no writer writes"
            )
        missed = first - position
        self.positions[k] = end
        self.missed_total += missed
        return ReadResult(events, missed, k)

    def __iter__(self):
        """Every event available now, one numpy record at a time; stops when caught up. Events
        missed on the way are added to ``missed_total`` (read in batches to see each overrun)."""
        while True:
            events, missed = self.read()
            if len(events) == 0 and missed == 0:
                return
            yield from events

    # -- the directory ------------------------------------------------------------------------

    def directory_len(self) -> int:
        """Directory entries published so far."""
        return min(int(self._header[_WORD["directory_count"]]), self.directory_capacity)

    def directory(self):
        """Every entry published so far, in order (a later entry for an instrument holds)."""
        count = self.directory_len()
        start = self._directory_offset
        raw = self._mmap[start : start + count * layout.DIRECTORY_ENTRY_BYTES]
        return [
            parse_directory_entry(raw, index * layout.DIRECTORY_ENTRY_BYTES)
            for index in range(count)
        ]

    def directory_map(self):
        """``{(venue_id, instrument_id): DirectoryEntry}``, the later entry holding."""
        return {(entry.venue_id, entry.instrument_id): entry for entry in self.directory()}

    # -- requests -----------------------------------------------------------------------------

    def request_snapshot(
        self, venue_id: int = layout.ALL_VENUES, instrument_id: int = layout.ALL_INSTRUMENTS
    ):
        """Asks the appliance for book snapshots (every venue and instrument by default): a
        datagram to the Unix socket at the bus path plus ``.requests``. The books come back in
        the stream; an instrument gets at most one snapshot per the appliance's interval."""
        target = self.path + layout.REQUEST_SOCKET_SUFFIX
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto(snapshot_request_bytes(venue_id, instrument_id), target)
            except OSError as error:
                raise RequestFailed(
                    f"bus {self.path}: sending a snapshot request to {target}: {error.strerror} "
                    "(is the appliance running with this bus?)"
                ) from None

    # -- lifetime -----------------------------------------------------------------------------

    def close(self):
        """Unmaps the bus. Arrays returned by ``read`` are copies and stay valid."""
        self._header = None
        self._ring = None
        self._rings = None
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def follow(path, start="latest", owner=None, poll=0.1, stop=None):
    """The buses an appliance makes at ``path``, one after another, the way ``tickwire tail``
    follows it across clean restarts: yields a ``Bus`` to read until its ``ended()``; when the
    caller asks for the next, waits for the path to name a new bus (a restarted appliance's,
    polling every ``poll`` seconds) and yields it, opened at ``"oldest"`` so that nothing of the
    new epoch is missed. ``start`` and ``owner`` are ``Bus``'s, for the first bus; a bus that
    does not exist yet is waited for. Each yielded bus is closed when the next is asked for.
    ``stop``, a callable, ends the waiting (and the generator) when it returns true.

    A bus that cannot be trusted (``UntrustedOwner``), read (``PermissionDenied``) or understood
    (``LayoutVersionMismatch``, ``UnsupportedPlatform``) raises at once; other errors while the
    new bus is being made (none yet, not sized yet) are waited out."""
    fatal = (UntrustedOwner, PermissionDenied, LayoutVersionMismatch, UnsupportedPlatform)
    while True:
        try:
            bus = Bus(path, start=start, owner=owner)
        except fatal:
            raise
        except BusError:
            if stop is not None and stop():
                return
            time.sleep(poll)
            continue
        try:
            yield bus
            # The caller is done with it: wait until the path names another file.
            while not bus.replaced():
                if stop is not None and stop():
                    return
                time.sleep(poll)
        finally:
            bus.close()
        start = "oldest"
