#!/usr/bin/env python3
"""Reads tickwire DBN recordings with Databento's own Python packages, as a user would.

Usage: read_dbn.py [--pandas] FILE...

Prints one JSON line per quote and trade (MBP-1 records, action N and T), with the fields
tickwire's README documents: prices in 1e-9 units, sizes rebuilt exactly as
`size + fraction * 1e-9` (the fraction rides in the record's count field), then a line
{"end": ..., "records": N} per file. A file cut by kill -9 is read frame by frame up to the
cut; the end line then says "cut".

--pandas reads with `databento`'s DBNStore.from_file(...).to_df(schema="mbp-1") instead.
"""

import json
import sys

import databento_dbn as dbn
import zstandard

SCALE = 1_000_000_000


def records_of(path):
    """The file's records, and how its zstd stream ended ("whole" or "cut")."""
    decoder = dbn.DBNDecoder()
    reader = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), read_across_frames=True)
    end = "whole"
    while True:
        try:
            chunk = reader.read(1 << 16)
        except zstandard.ZstdError:
            end = "cut"
            break
        if not chunk:
            break
        decoder.write(chunk)
    return [r for r in decoder.decode() if not isinstance(r, dbn.Metadata)], end


def line_of_mbp1(r):
    action = r.action if isinstance(r.action, str) else chr(r.action)
    level = r.levels[0]
    if action == "N":
        return {
            "type": "quote",
            "ts_event": r.ts_event,
            "ts_recv": r.ts_recv,
            "instrument_id": r.instrument_id,
            "publisher_id": r.publisher_id,
            "bid_px": level.bid_px,
            "ask_px": level.ask_px,
            "bid_sz": level.bid_sz * SCALE + level.bid_ct,
            "ask_sz": level.ask_sz * SCALE + level.ask_ct,
        }
    if action == "T":
        side = r.side if isinstance(r.side, str) else chr(r.side)
        return {
            "type": "trade",
            "ts_event": r.ts_event,
            "ts_recv": r.ts_recv,
            "instrument_id": r.instrument_id,
            "publisher_id": r.publisher_id,
            "price": r.price,
            "size": r.size * SCALE + level.bid_ct,
            "side": side,
        }
    return None


def with_dbn(paths):
    for path in paths:
        records, end = records_of(path)
        for r in records:
            if isinstance(r, dbn.MBP1Msg):
                line = line_of_mbp1(r)
                if line is not None:
                    print(json.dumps(line))
        print(json.dumps({"end": end, "records": len(records)}))


def with_pandas(paths):
    import databento

    for path in paths:
        df = databento.DBNStore.from_file(path).to_df(schema="mbp-1", price_type="fixed", pretty_ts=False)
        df = df.reset_index()
        for row in df.itertuples(index=False):
            action = row.action
            if action == "N":
                print(json.dumps({
                    "type": "quote",
                    "ts_event": int(row.ts_event),
                    "ts_recv": int(row.ts_recv),
                    "instrument_id": int(row.instrument_id),
                    "publisher_id": int(row.publisher_id),
                    "bid_px": int(row.bid_px_00),
                    "ask_px": int(row.ask_px_00),
                    "bid_sz": int(row.bid_sz_00) * SCALE + int(row.bid_ct_00),
                    "ask_sz": int(row.ask_sz_00) * SCALE + int(row.ask_ct_00),
                }))
            elif action == "T":
                print(json.dumps({
                    "type": "trade",
                    "ts_event": int(row.ts_event),
                    "ts_recv": int(row.ts_recv),
                    "instrument_id": int(row.instrument_id),
                    "publisher_id": int(row.publisher_id),
                    "price": int(row.price),
                    "size": int(row.size) * SCALE + int(row.bid_ct_00),
                    "side": row.side,
                }))
        print(json.dumps({"end": "whole", "records": len(df)}))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--pandas":
        with_pandas(args[1:])
    else:
        with_dbn(args)
