"""Reads a bridge's trades with tickwire_bus.nats (nats-py) for tests/nats/python.rs.

Usage: read_nats.py URL SUBJECT COUNT APPLIANCE. Prints "ready" once subscribed, then, after
COUNT trades (or 20 s), one JSON line: what it read, checked field by field here.
"""

import asyncio
import json
import sys

import numpy as np

from tickwire_bus import KIND_TRADE
from tickwire_bus.nats import NatsReader


async def main():
    url, subject, count, appliance = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    reader = await NatsReader.connect([url], [subject])
    await reader.flush()
    print("ready", flush=True)
    batches, missed, duplicates = [], 0, 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    got = 0
    while got < count and loop.time() < deadline:
        batch = await reader.read(timeout=0.2)
        missed += batch.missed
        duplicates += batch.duplicates
        if len(batch.events):
            assert set(batch.appliances) == {appliance}, batch.appliances
            batches.append(batch.events)
            got += len(batch.events)
    events = np.concatenate(batches)
    assert np.all(events["kind"] == KIND_TRADE)
    # The test's trades: price = trade id (in 1e-9 units), size 1e-9.
    assert np.array_equal(events["trade_price"], events["trade_id"].astype("<i8"))
    assert np.all(events["trade_size"] == 1)
    per_instrument = {}
    for instrument in np.unique(events["instrument_id"]):
        ids = events["trade_id"][events["instrument_id"] == instrument]
        per_instrument[int(instrument)] = {
            "first": int(ids[0]),
            "last": int(ids[-1]),
            "count": int(len(ids)),
            "increasing": bool(np.all(np.diff(ids.astype(np.int64)) > 0)),
        }
    directory = await reader.directory(appliance)
    print(
        json.dumps(
            {
                "count": int(len(events)),
                "missed": missed,
                "duplicates": duplicates,
                "instruments": per_instrument,
                "directory": sorted((e.symbol, e.venue_symbol) for e in directory),
            }
        ),
        flush=True,
    )
    await reader.close()


asyncio.run(main())
