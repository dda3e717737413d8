"""A WebSocket server for tickwire's integration tests, on Python's `websockets` library (an
independent implementation of RFC 6455), on loopback.

Usage: ws_server.py SCENARIO [--cert FILE --key FILE]
Prints "READY <port>" once listening, serves one connection, then exits.

Scenarios:
  script     hello, a fragmented message, a ping that must be answered, a 10 MiB binary
             message, an echo of the client's first message, then close with 4000 "bye".
  stream     a Binance-like combined stream subscribed live: waits for a SUBSCRIBE request
             naming btcusdt@bookTicker, acknowledges it ({"result":null,"id":N}), then sends a
             bookTicker message every 10 ms until the client leaves.
  http       not WebSocket at all: answers every request with a plain HTTP 200.
"""
import asyncio
import ssl
import sys

BIG = 10 * 1024 * 1024


def big_payload():
    return bytes((i * 7) % 251 for i in range(BIG))


async def script(ws):
    await ws.send("hello")
    await ws.send(["frag-", "ment", "ed"])
    pong = await ws.ping(b"tw")
    await asyncio.wait_for(pong, 10)
    await ws.send("pong-ok")
    await ws.send(big_payload())
    message = await ws.recv()
    await ws.send("echo:" + message)
    await ws.close(4000, "bye")


async def stream(ws):
    import json
    request = json.loads(await asyncio.wait_for(ws.recv(), 10))
    if request.get("method") != "SUBSCRIBE" or "btcusdt@bookTicker" not in request.get("params", []):
        await ws.close(4001, "unexpected request " + json.dumps(request))
        return
    await ws.send(json.dumps({"result": None, "id": request["id"]}))
    update = 0
    try:
        while True:
            update += 1
            await ws.send(json.dumps({"stream": "btcusdt@bookTicker", "data": {
                "e": "bookTicker", "u": update, "s": "BTCUSDT", "b": "61234.50", "B": "1.250",
                "a": "61234.60", "A": "0.730", "T": 1723075200000, "E": 1723075200001}}))
            await asyncio.sleep(0.01)
    except Exception:
        return


async def plain_http(reader, writer):
    await reader.read(4096)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    await writer.drain()
    writer.close()


async def main():
    scenario = sys.argv[1]
    args = sys.argv[2:]
    context = None
    if "--cert" in args:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args[args.index("--cert") + 1], args[args.index("--key") + 1])
    done = asyncio.Event()
    if scenario == "http":
        async def handle(reader, writer):
            await plain_http(reader, writer)
            done.set()
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    else:
        from websockets.asyncio.server import serve

        async def handle(ws):
            try:
                await (stream(ws) if scenario == "stream" else script(ws))
            finally:
                done.set()
        server = await serve(handle, "127.0.0.1", 0, ssl=context, max_size=None,
                             ping_interval=None)
    port = server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    try:
        await asyncio.wait_for(done.wait(), 60)
        await asyncio.sleep(0.2)
    finally:
        server.close()


asyncio.run(main())
