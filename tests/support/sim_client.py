"""A client of tickwire's venue simulator on Python's `websockets` library (an independent
implementation of RFC 6455), for tests/sim_server.rs.

Usage: sim_client.py URL CA_FILE COUNT
Connects to URL trusting only CA_FILE (hostname verified), prints each of the first COUNT
messages as "MSG <hex of the UTF-8 bytes>", then sends LIST_SUBSCRIPTIONS with id 7, prints the
reply as "REPLY <text>", and closes with 1000.
"""
import asyncio
import json
import ssl
import sys

from websockets.asyncio.client import connect


async def main(url, ca_file, count):
    context = ssl.create_default_context(cafile=ca_file)
    async with connect(url, ssl=context, max_size=None, ping_interval=None) as ws:
        for _ in range(count):
            message = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(message, str):
                message = message.encode()
            print("MSG " + message.hex(), flush=True)
        await ws.send(json.dumps({"method": "LIST_SUBSCRIPTIONS", "id": 7}))
        print("REPLY " + await asyncio.wait_for(ws.recv(), 20), flush=True)
        await ws.close(1000)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
