"""The bus file's layout, byte by byte, as crates/tickwire-bus/src/layout.rs gives it, and the
64-byte event as crates/tickwire-bus/src/event.rs pins it.

Everything is little-endian. ``EVENT_DTYPE`` is one numpy record per event: the header's fields,
then every payload variant's fields at their offsets, overlapping (read the ones ``kind`` names),
plus ``payload``, the payload's four raw words.
"""

import numpy as np

MAGIC = b"TICKWBUS"
# Version 2 added KIND_LIQUIDATION; a reader of another version refuses the bus by name.
LAYOUT_VERSION = 3
# The most partitions (rings, one per decoder of the appliance) a bus may have.
MAX_PARTITIONS = 31
EVENT_SIZE = 64
HEADER_BYTES = 4096
DIRECTORY_ENTRY_BYTES = 256
MIN_CAPACITY = 1024
MAX_CAPACITY = 1 << 28
MAX_DIRECTORY = 1 << 20

# Byte offsets of the header's fields.
OFF_MAGIC = 0
OFF_LAYOUT_VERSION = 8
OFF_EVENT_SIZE = 12
OFF_CAPACITY = 16
OFF_EPOCH = 24
OFF_RING_OFFSET = 32
OFF_DIRECTORY_OFFSET = 40
OFF_DIRECTORY_CAPACITY = 48
OFF_DIRECTORY_ENTRY_SIZE = 56
OFF_CREATED_NS = 64
OFF_WRITER_PID = 72
OFF_PARTITIONS = 80
# Partition k's claim and cursor are PARTITION_STRIDE * k bytes after partition 0's.
OFF_CLAIM = 128
OFF_CURSOR = 136
PARTITION_STRIDE = 128
OFF_DIRECTORY_COUNT = 192
OFF_STATE = 200

STATE_LIVE = 1
STATE_CLOSED = 2

# A directory entry's fields: (offset, length).
ENTRY_INSTRUMENT_ID = 0
ENTRY_VENUE_ID = 4
ENTRY_VENUE = (16, 32)
ENTRY_SYMBOL = (48, 104)
ENTRY_VENUE_SYMBOL = (152, 104)

REQUEST_SOCKET_SUFFIX = ".requests"
REQUEST_MAGIC = b"TWRQ"
REQUEST_KIND_BOOK_SNAPSHOT = 1
# A snapshot request's venue: every venue.
ALL_VENUES = 0xFFFF
# A snapshot request's (or a gap's) instrument: every instrument of the venue.
ALL_INSTRUMENTS = 0xFFFF_FFFF

# Event kinds (event.rs's EventKind).
KIND_QUOTE = 1
KIND_TRADE = 2
KIND_BOOK_LEVEL = 3
KIND_SNAPSHOT_BEGIN = 4
KIND_SNAPSHOT_END = 5
KIND_GAP = 6
KIND_VENUE_STATUS = 7
KIND_REFERENCE = 8
KIND_BAR = 9
KIND_TRADING_STATUS = 10
KIND_IMBALANCE = 11
KIND_STATISTIC = 12
KIND_LIQUIDATION = 13  # layout version 2

# The kinds' names: the JSON lines' "type" (a reference's line names its reference kind).
KIND_NAMES = {
    KIND_QUOTE: "quote",
    KIND_TRADE: "trade",
    KIND_BOOK_LEVEL: "level",
    KIND_SNAPSHOT_BEGIN: "snapshot_begin",
    KIND_SNAPSHOT_END: "snapshot_end",
    KIND_GAP: "gap",
    KIND_VENUE_STATUS: "status",
    KIND_REFERENCE: "reference",
    KIND_BAR: "bar",
    KIND_TRADING_STATUS: "trading_status",
    KIND_IMBALANCE: "imbalance",
    KIND_STATISTIC: "statistic",
    KIND_LIQUIDATION: "liquidation",
}

SIDE_NONE = 0
SIDE_BID = 1
SIDE_ASK = 2

# Header flag bits.
FLAG_LAST = 1 << 0
FLAG_SNAPSHOT = 1 << 1
FLAG_NO_EXCHANGE_TS = 1 << 2
FLAG_DERIVED = 1 << 3
FLAG_BAR_INTERVAL_MASK = 0x70
FLAG_BAR_INTERVAL_SHIFT = 4
FLAG_SATURATED = 1 << 7

# An optional price the venue left empty (DBN's UNDEF_PRICE); a statistic that is no quantity.
NO_PRICE = (1 << 63) - 1
NO_QUANTITY = (1 << 63) - 1

# (name, numpy type, byte offset in the event). Payload fields are prefixed by their variant.
EVENT_FIELDS = [
    ("exchange_ts_ns", "<u8", 0),
    ("recv_ts_ns", "<u8", 8),
    ("venue_seq", "<u8", 16),
    ("instrument_id", "<u4", 24),
    ("venue_id", "<u2", 28),
    ("kind", "u1", 30),
    ("flags", "u1", 31),
    ("payload", ("<u8", (4,)), 32),
    ("quote_bid_px", "<i8", 32),
    ("quote_bid_sz", "<i8", 40),
    ("quote_ask_px", "<i8", 48),
    ("quote_ask_sz", "<i8", 56),
    ("trade_price", "<i8", 32),
    ("trade_size", "<i8", 40),
    ("trade_id", "<u8", 48),
    ("trade_aggressor_side", "u1", 56),
    ("level_price", "<i8", 32),
    ("level_size", "<i8", 40),
    ("level_side", "u1", 48),
    ("snapshot_bid_levels", "<u4", 32),
    ("snapshot_ask_levels", "<u4", 36),
    ("snapshot_id", "<u8", 40),
    ("gap_expected_seq", "<u8", 32),
    ("gap_received_seq", "<u8", 40),
    ("gap_reason", "u1", 48),
    ("status_state", "u1", 32),
    ("status_reason_code", "<u4", 40),
    ("status_detail", "<u8", 48),
    ("reference_price", "<i8", 32),
    ("reference_kind", "u1", 40),
    ("bar_open", "<i8", 32),
    ("bar_high", "<i8", 40),
    ("bar_low", "<i8", 48),
    ("bar_close", "<i8", 56),
    ("trading_status_action", "<u2", 32),
    ("trading_status_reason", "<u2", 34),
    ("trading_status_trading_event", "<u2", 36),
    ("trading_status_is_trading", "u1", 38),
    ("trading_status_is_quoting", "u1", 39),
    ("trading_status_is_short_sell_restricted", "u1", 40),
    ("imbalance_ref_price", "<i8", 32),
    ("imbalance_cont_book_clr_price", "<i8", 40),
    ("imbalance_paired_qty", "<u4", 48),
    ("imbalance_total_imbalance_qty", "<u4", 52),
    ("imbalance_side", "u1", 56),
    ("imbalance_auction_type", "u1", 57),
    ("imbalance_significant_imbalance", "u1", 58),
    ("imbalance_unpaired_side", "u1", 59),
    ("imbalance_auction_status", "u1", 60),
    ("imbalance_freeze_status", "u1", 61),
    ("imbalance_num_extensions", "u1", 62),
    ("statistic_price", "<i8", 32),
    ("statistic_quantity", "<i8", 40),
    ("statistic_ts_ref", "<u8", 48),
    ("statistic_stat_type", "<u2", 56),
    ("statistic_channel_id", "<u2", 58),
    ("statistic_update_action", "u1", 60),
    ("statistic_stat_flags", "u1", 61),
    # The liquidated position's side: SIDE_BID a long, SIDE_ASK a short; its time is
    # exchange_ts_ns.
    ("liquidation_price", "<i8", 32),
    ("liquidation_size", "<i8", 40),
    ("liquidation_position_side", "u1", 48),
]

EVENT_DTYPE = np.dtype(
    {
        "names": [name for name, _, _ in EVENT_FIELDS],
        "formats": [fmt for _, fmt, _ in EVENT_FIELDS],
        "offsets": [offset for _, _, offset in EVENT_FIELDS],
        "itemsize": EVENT_SIZE,
    }
)

# Every field lies inside the event: a wrong offset or type above fails at import.
for _name, _fmt, _offset in EVENT_FIELDS:
    assert _offset + np.dtype(_fmt).itemsize <= (32 if _offset < 32 else 64), _name
assert EVENT_DTYPE.itemsize == EVENT_SIZE
