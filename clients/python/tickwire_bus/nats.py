"""Read a tickwire bridge's events from NATS (``tickwire bridge nats``) into ``EVENT_DTYPE``.

Needs ``nats-py`` (``pip install tickwire-bus[nats]``). The format is ``tickwire_nats::wire``'s:
subjects ``tickwire.<appliance>.<venue>.<symbol>.<kind>`` (names escaped: every byte outside
``A-Z a-z 0-9 - _`` as ``%XX``, an empty name as ``%``), each message a 32-byte header (magic
``TW``, version 1, event count, the appliance's bus epoch, the bridge's stream id, the
subject's sequence number of the first event) and the events' 64 bytes as on the bus.

``NatsReader.read()`` checks every subject's sequence numbers, as the Rust ``NatsClient`` does:
``missed`` is exactly the events lost before the batch's events (a server lost with messages
in flight, a full queue), duplicates are dropped, and a bridge that starts a new stream is
reported in ``new_streams``. Venue ids are each appliance's own: ``appliances[i]`` says whose
event ``events[i]`` is.

    import asyncio
    from tickwire_bus.nats import NatsReader

    async def main():
        reader = await NatsReader.connect(["nats://127.0.0.1:4222"], ["tickwire.>"])
        while True:
            batch = await reader.read(timeout=1.0)
            if batch.missed:
                print("lost", batch.missed)
            for event, appliance in zip(batch.events, batch.appliances):
                ...

    asyncio.run(main())
"""

import asyncio
import struct
from collections import namedtuple

import numpy as np

from .bus import parse_directory_entry
from . import layout

ROOT = "tickwire"
FORMAT_VERSION = 1
MAGIC = b"TW"
HEADER_BYTES = 32
EVENT_BYTES = 64
MAX_EVENTS_PER_MESSAGE = 64
DIRECTORY_MAGIC = b"TWD1"
DIRECTORY_HEADER_BYTES = 32

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def escape(name: str) -> str:
    """A name as a subject token."""
    if name == "":
        return "%"
    return "".join(chr(b) if b in _PLAIN else "%%%02X" % b for b in name.encode("utf-8"))


def unescape(token: str):
    """The name a token stands for, or None for a token ``escape`` never makes."""
    if token == "%":
        return ""
    if not token:
        return None
    raw = token.encode("ascii", errors="replace")
    out = bytearray()
    at = 0
    while at < len(raw):
        byte = raw[at]
        if byte in _PLAIN:
            out.append(byte)
            at += 1
        elif byte == ord("%") and at + 2 < len(raw):
            digits = raw[at + 1 : at + 3]
            if any(d not in b"0123456789ABCDEF" for d in digits):
                return None
            value = int(digits, 16)
            if value in _PLAIN:
                return None
            out.append(value)
            at += 3
        else:
            return None
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def event_subject(appliance: str, venue: str, symbol: str, kind: str) -> str:
    """``tickwire.<appliance>.<venue>.<symbol>.<kind>``, names escaped (kind: ``trade``...)."""
    return ".".join([ROOT, escape(appliance), escape(venue), escape(symbol), kind])


def parse_event_subject(subject: str):
    """``(appliance, venue, symbol, kind)`` of an event subject, or None."""
    tokens = subject.split(".")
    if len(tokens) != 5 or tokens[0] != ROOT:
        return None
    names = [unescape(token) for token in tokens[1:4]]
    if any(name is None for name in names):
        return None
    return names[0], names[1], names[2], tokens[4]


Header = namedtuple("Header", ["appliance_epoch", "stream", "sequence", "count"])


class Malformed(ValueError):
    """Bytes that are not a tickwire message of this format version."""


def decode_message(payload: bytes):
    """``(Header, events)``: the events a numpy array of ``EVENT_DTYPE`` (a copy)."""
    if len(payload) < HEADER_BYTES or payload[0:2] != MAGIC:
        raise Malformed("no TW header")
    if payload[2] != FORMAT_VERSION:
        raise Malformed("format version %d" % payload[2])
    (count,) = struct.unpack_from("<H", payload, 4)
    if not 1 <= count <= MAX_EVENTS_PER_MESSAGE:
        raise Malformed("%d events" % count)
    if len(payload) != HEADER_BYTES + EVENT_BYTES * count:
        raise Malformed("%d bytes for %d events" % (len(payload), count))
    epoch, stream, sequence = struct.unpack_from("<QQQ", payload, 8)
    if stream == 0 or sequence == 0:
        raise Malformed("a zero stream or sequence")
    events = np.frombuffer(payload, dtype=layout.EVENT_DTYPE, count=count, offset=HEADER_BYTES)
    if not np.all((events["kind"] >= 1) & (events["kind"] <= layout.KIND_LIQUIDATION)):
        raise Malformed("an event kind byte no kind has")
    return Header(epoch, stream, sequence, count), events.copy()


def decode_directory_reply(payload: bytes):
    """``(total, first, epoch, stream, [DirectoryEntry])`` of a directory reply."""
    if len(payload) < DIRECTORY_HEADER_BYTES or payload[0:4] != DIRECTORY_MAGIC:
        raise Malformed("no TWD1 header")
    total, first, count, epoch, stream = struct.unpack_from("<IIIQQ", payload, 4)
    entry_bytes = layout.DIRECTORY_ENTRY_BYTES
    if len(payload) != DIRECTORY_HEADER_BYTES + entry_bytes * count:
        raise Malformed("a directory reply of the wrong length")
    entries = [
        parse_directory_entry(payload, DIRECTORY_HEADER_BYTES + index * entry_bytes)
        for index in range(count)
    ]
    return total, first, epoch, stream, entries


NatsBatch = namedtuple("NatsBatch", ["events", "appliances", "missed", "duplicates", "new_streams"])
NatsBatch.__doc__ = """One read: ``missed`` events lost before these (exact, from the sequence
numbers), ``events`` (``EVENT_DTYPE``), ``appliances`` (whose each event is), ``duplicates``
dropped, ``new_streams`` ``[(appliance, epoch)]`` of bridges that started a new stream."""


class NatsReader:
    """A subscriber to tickwire subjects with per-subject continuity checks."""

    def __init__(self, connection, queue):
        self._nc = connection
        self._queue = queue
        self._streams = {}  # appliance -> (stream, seen_start)
        self._next = {}  # subject -> next sequence
        self._held = None  # a message left for the next read (it follows a hole)
        self.malformed = 0

    @classmethod
    async def connect(cls, servers, subjects=("tickwire.>",), queue=65536):
        import nats  # nats-py, the optional extra

        pending = asyncio.Queue(maxsize=queue)

        async def on_message(message):
            try:
                pending.put_nowait((message.subject, message.data))
            except asyncio.QueueFull:
                # Dropped here; the next message of its subject shows the hole.
                pass

        connection = await nats.connect(
            servers=list(servers), max_reconnect_attempts=-1, reconnect_time_wait=0.2
        )
        for subject in subjects:
            await connection.subscribe(subject, cb=on_message)
        return cls(connection, pending)

    async def directory(self, appliance: str, timeout: float = 2.0):
        """The appliance's instrument directory, from its bridge's directory service."""
        subject = ".".join([ROOT, escape(appliance), "directory"])
        entries, first = [], 0
        while True:
            reply = await self._nc.request(subject, struct.pack("<I", first), timeout=timeout)
            total, first_in, _, _, part = decode_directory_reply(reply.data)
            entries.extend(part)
            first = first_in + len(part)
            if not part or first >= total:
                return entries

    def _check(self, subject, payload):
        """Reads one message without changing anything: ``None`` when malformed, else
        ``(header, events, appliance, hole, skip, new_stream)``."""
        names = parse_event_subject(subject)
        if names is None:
            return None
        try:
            header, events = decode_message(payload)
        except Malformed:
            return None
        appliance = names[0]
        known = self._streams.get(appliance)
        if known is None:
            # First contact: the stream is joined wherever it is.
            return header, events, appliance, 0, 0, False
        if header.stream > known[0]:
            expected, new_stream = 1, True
        elif header.stream < known[0]:
            return header, events, appliance, 0, len(events), False
        else:
            expected, new_stream = self._next.get(subject, 1 if known[1] else None), False
            if expected is None:
                return header, events, appliance, 0, 0, False
        hole = max(header.sequence - expected, 0)
        skip = min(max(expected - header.sequence, 0), len(events))
        return header, events, appliance, hole, skip, new_stream

    def _commit(self, subject, header, appliance, new_stream):
        known = self._streams.get(appliance)
        if known is None:
            self._streams[appliance] = (header.stream, False)
        elif new_stream:
            self._streams[appliance] = (header.stream, True)
            self._next = {
                s: n for s, n in self._next.items() if parse_event_subject(s)[0] != appliance
            }
        if self._streams[appliance][0] == header.stream:
            following = header.sequence + header.count
            self._next[subject] = max(self._next.get(subject, 0), following)

    async def read(self, max_events: int = 4096, timeout: float = 1.0) -> NatsBatch:
        """The next events (waiting up to ``timeout`` for the first). A batch ends before a
        message that follows a hole or starts a new stream, so ``missed`` and ``new_streams``
        always come before all of ``events``."""
        parts, appliances, missed, duplicates, new_streams, count = [], [], 0, 0, [], 0
        item = self._held
        self._held = None
        if item is None:
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout)
            except asyncio.TimeoutError:
                return NatsBatch(np.empty(0, dtype=layout.EVENT_DTYPE), [], 0, 0, [])
        while item is not None:
            checked = self._check(*item)
            if checked is None:
                self.malformed += 1
            else:
                header, events, appliance, hole, skip, new_stream = checked
                if (hole or new_stream) and count:
                    self._held = item
                    break
                self._commit(item[0], header, appliance, new_stream)
                missed += hole
                duplicates += skip
                if new_stream:
                    new_streams.append((appliance, header.appliance_epoch))
                events = events[skip:]
                parts.append(events)
                appliances.extend([appliance] * len(events))
                count += len(events)
            if count >= max_events or self._queue.empty():
                break
            item = self._queue.get_nowait()
        events = np.concatenate(parts) if parts else np.empty(0, dtype=layout.EVENT_DTYPE)
        return NatsBatch(events, appliances, missed, duplicates, new_streams)

    async def flush(self):
        """Returns once the server has every subscription (messages published after it reach
        this reader)."""
        await self._nc.flush()

    async def close(self):
        await self._nc.drain()
