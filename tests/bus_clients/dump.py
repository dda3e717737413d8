"""The Python side of tests/bus_clients: reads a bus with the tickwire_bus package and prints it in
the canonical text format of dump.c and tests/bus_clients/mod.rs (every field of every event by
name, then the payload's raw words), so that the three can be compared line for line.

    python3 dump.py [--from POSITION] [--batch N] BUS     the directory, then every event
    python3 dump.py --request VENUE INSTRUMENT BUS        sends one snapshot request
    python3 dump.py --books BUS                           every book Books keeps, at the end
    --owner USER                                          accept only USER's bus (name or uid)
"""

import argparse
import sys

import tickwire_bus as tw

# The payload fields each kind prints: (label, dtype field, is a fixed-point decimal).
FIELDS = {
    tw.KIND_QUOTE: [
        ("bid_px", "quote_bid_px", True),
        ("bid_sz", "quote_bid_sz", True),
        ("ask_px", "quote_ask_px", True),
        ("ask_sz", "quote_ask_sz", True),
    ],
    tw.KIND_TRADE: [
        ("price", "trade_price", True),
        ("size", "trade_size", True),
        ("trade_id", "trade_id", False),
        ("aggressor", "trade_aggressor_side", False),
    ],
    tw.KIND_BOOK_LEVEL: [
        ("side", "level_side", False),
        ("price", "level_price", True),
        ("size", "level_size", True),
    ],
    tw.KIND_SNAPSHOT_BEGIN: [
        ("bid_levels", "snapshot_bid_levels", False),
        ("ask_levels", "snapshot_ask_levels", False),
        ("snapshot_id", "snapshot_id", False),
    ],
    tw.KIND_GAP: [
        ("expected", "gap_expected_seq", False),
        ("received", "gap_received_seq", False),
        ("reason", "gap_reason", False),
    ],
    tw.KIND_VENUE_STATUS: [
        ("state", "status_state", False),
        ("reason_code", "status_reason_code", False),
        ("detail", "status_detail", False),
    ],
    tw.KIND_REFERENCE: [
        ("price", "reference_price", True),
        ("kind", "reference_kind", False),
    ],
    tw.KIND_BAR: [
        ("open", "bar_open", True),
        ("high", "bar_high", True),
        ("low", "bar_low", True),
        ("close", "bar_close", True),
    ],
    tw.KIND_TRADING_STATUS: [
        ("action", "trading_status_action", False),
        ("reason", "trading_status_reason", False),
        ("trading_event", "trading_status_trading_event", False),
        ("is_trading", "trading_status_is_trading", False),
        ("is_quoting", "trading_status_is_quoting", False),
        ("ssr", "trading_status_is_short_sell_restricted", False),
    ],
    tw.KIND_IMBALANCE: [
        ("ref_price", "imbalance_ref_price", True),
        ("cont_book_clr_price", "imbalance_cont_book_clr_price", True),
        ("paired_qty", "imbalance_paired_qty", False),
        ("total_imbalance_qty", "imbalance_total_imbalance_qty", False),
        ("side", "imbalance_side", False),
        ("auction_type", "imbalance_auction_type", False),
        ("significant_imbalance", "imbalance_significant_imbalance", False),
        ("unpaired_side", "imbalance_unpaired_side", False),
        ("auction_status", "imbalance_auction_status", False),
        ("freeze_status", "imbalance_freeze_status", False),
        ("num_extensions", "imbalance_num_extensions", False),
    ],
    tw.KIND_STATISTIC: [
        ("price", "statistic_price", True),
        ("quantity", "statistic_quantity", False),
        ("ts_ref", "statistic_ts_ref", False),
        ("stat_type", "statistic_stat_type", False),
        ("channel_id", "statistic_channel_id", False),
        ("update_action", "statistic_update_action", False),
        ("stat_flags", "statistic_stat_flags", False),
    ],
    tw.KIND_LIQUIDATION: [
        ("price", "liquidation_price", True),
        ("size", "liquidation_size", True),
        ("position_side", "liquidation_position_side", False),
    ],
}
FIELDS[tw.KIND_SNAPSHOT_END] = FIELDS[tw.KIND_SNAPSHOT_BEGIN]


def line(position, event, names):
    kind = int(event["kind"])
    entry = names.get((int(event["venue_id"]), int(event["instrument_id"])))
    parts = [
        str(position),
        tw.KIND_NAMES[kind],
        f"v={event['venue_id']}",
        f"i={event['instrument_id']}",
        f"f={event['flags']}",
        f"ex={event['exchange_ts_ns']}",
        f"rx={event['recv_ts_ns']}",
        f"seq={event['venue_seq']}",
        f"sym={entry.symbol if entry else '-'}",
        "|",
    ]
    for label, field, decimal in FIELDS[kind]:
        value = event[field]
        parts.append(f"{label}={tw.fixed_to_str(value) if decimal else int(value)}")
    raw = "".join(f"{int(word):016x}" for word in event["payload"])
    parts.append(f"| raw={raw}")
    return " ".join(parts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="start", type=int)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--request", nargs=2, type=int)
    parser.add_argument("--books", action="store_true")
    parser.add_argument("--owner")
    parser.add_argument("bus")
    args = parser.parse_args()
    try:
        owner = args.owner
        if owner is not None and owner.isdigit():
            owner = int(owner)
        bus = tw.Bus(args.bus, start="oldest", owner=owner)
    except tw.BusError as error:
        print(f"dump.py: {error}", file=sys.stderr)
        return 1
    if args.start is not None:
        # Partition 0 from this position (as dump.c's --from), the others from their oldest.
        bus.position = args.start
    if args.request:
        try:
            bus.request_snapshot(*args.request)
        except tw.BusError as error:
            print(f"dump.py: {error}", file=sys.stderr)
            return 1
        return 0
    if args.books:
        books = tw.Books()
        while True:
            result = bus.read(args.batch)
            events, missed = result
            books.apply(events, missed, result.partition)
            if len(events) == 0 and missed == 0:
                break
        for key in sorted(books.books):
            book = books.books[key]
            bids, asks = book.levels()
            text = lambda levels: ",".join(f"{p}:{s}" for p, s in levels)  # noqa: E731
            print(f"book v={key[0]} i={key[1]} {book.state} bids={text(bids)} asks={text(asks)}")
        return 0
    out = sys.stdout
    out.write(
        f"open capacity={bus.capacity} epoch={bus.epoch} cursor={bus.cursor} "
        f"closed={int(bus.is_closed())}\n"
    )
    entries = bus.directory()
    for index, entry in enumerate(entries):
        out.write(
            f"dir {index} v={entry.venue_id} i={entry.instrument_id} venue={entry.venue} "
            f"symbol={entry.symbol} venue_symbol={entry.venue_symbol}\n"
        )
    names = bus.directory_map()
    several = bus.partitions > 1
    while True:
        try:
            result = bus.read(args.batch)
        except tw.BusError as error:
            print(f"dump.py: {error}", file=sys.stderr)
            return 1
        events, missed = result
        if missed and several:
            out.write(f"missed {missed} partition={result.partition}\n")
        elif missed:
            out.write(f"missed {missed}\n")
        if len(events) == 0 and missed == 0:
            break
        # A bus of several partitions: each event's position is its partition's.
        prefix = f"{result.partition}:" if several else ""
        first = bus.positions[result.partition] - len(events)
        for index, event in enumerate(events):
            out.write(prefix + line(first + index, event, names) + "\n")
    out.write(f"end position={','.join(str(p) for p in bus.positions)}\n")
    bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
