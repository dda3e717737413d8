"""A /v1/stream client for tests/serve.rs, on Python's `websockets` (an independent peer).

    stream_client.py read URL COUNT TIMEOUT_S
        Reads COUNT messages (or until TIMEOUT_S), prints each on its own line, then
        `closed CODE` if the server closed first, else `done`.
    stream_client.py stall URL STALL_S TIMEOUT_S
        Connects with a small receive buffer and reads nothing for STALL_S seconds (the
        library stops reading from the socket once its one-message queue is full), then reads
        until the server closes, and prints `messages N` and `closed CODE REASON`.
"""

import asyncio
import socket
import sys
import urllib.parse

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


async def read(url, count, timeout):
    async with connect(url, max_queue=1024) as ws:
        got = 0
        try:
            async with asyncio.timeout(timeout):
                while got < count:
                    print(await ws.recv(), flush=True)
                    got += 1
        except ConnectionClosed as closed:
            print(f"closed {closed.rcvd.code if closed.rcvd else 1006}", flush=True)
            return
        except TimeoutError:
            pass
        print("done", flush=True)


async def stall(url, stall_s, timeout):
    parts = urllib.parse.urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    async with connect(url, sock=sock, max_queue=1) as ws:
        await asyncio.sleep(stall_s)
        messages = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    await ws.recv()
                    messages += 1
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else 1006
            reason = closed.rcvd.reason if closed.rcvd else ""
            print(f"messages {messages}", flush=True)
            print(f"closed {code} {reason}", flush=True)
            return
        except TimeoutError:
            print(f"messages {messages}", flush=True)
            print("open", flush=True)


def main():
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "read":
        asyncio.run(read(url, int(sys.argv[3]), float(sys.argv[4])))
    elif mode == "stall":
        asyncio.run(stall(url, float(sys.argv[3]), float(sys.argv[4])))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
