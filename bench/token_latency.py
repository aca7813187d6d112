#!/usr/bin/python3
"""Provider token -> client frame latency through parleyd.

A stand-in OpenAI-compatible server (in this process, asyncio) streams
chat.completion.chunk deltas, each carrying the CLOCK_MONOTONIC time it was
written ("<t=NANOS>").  N WebSocket clients each hold one session and send
one chat; the latency of a token is the client's receive time minus that
stamp.  Both ends run on this machine, so the clocks agree.  The Python
client adds its own delay: the figures are an upper bound on parleyd's.

usage: bench/token_latency.py PARLEYD [--sessions N] [--tokens N]
       [--rate TOKENS_PER_S] [--flush MS]
Prints one JSON object with the median, p90, p99 and max in ms.
"""
import argparse, asyncio, json, multiprocessing, os, socket, subprocess, sys
import tempfile, time

try:
    import websockets
except ImportError:
    sys.exit("needs Debian's python3-websockets: run with /usr/bin/python3")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


async def provider(reader, writer, tokens, rate):
    """One request: an OpenAI streaming answer of `tokens` stamped deltas."""
    head = await reader.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    await reader.readexactly(n)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")

    def chunk(obj):
        data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    base = {"id": "chatcmpl-b", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": "bench"}
    for i in range(tokens):
        d = dict(base, choices=[{"index": 0, "delta": {
            "content": "<t=%d>" % time.monotonic_ns()}, "finish_reason": None}])
        writer.write(chunk(d))
        await writer.drain()
        await asyncio.sleep(1.0 / rate)
    writer.write(chunk(dict(base, choices=[{"index": 0, "delta": {},
                                            "finish_reason": "stop"}])))
    writer.write(chunk(dict(base, choices=[], usage={
        "prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1})))
    writer.write(b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))
    await writer.drain()
    writer.close()


def provider_main(port, tokens, rate):
    """The provider in its own process, so its timing is not the clients'."""
    async def run():
        srv = await asyncio.start_server(
            lambda r, w: provider(r, w, tokens, rate), "127.0.0.1", port)
        async with srv:
            await srv.serve_forever()
    asyncio.run(run())


async def client(port, sid, lat):
    async with websockets.connect("ws://127.0.0.1:%d/sessions/%s/stream?lastSeq=0"
                                  % (port, sid), max_size=None) as ws:
        await ws.send(json.dumps({"v": 1, "type": "chat", "sessionId": sid,
                                  "message": "go"}))
        while True:
            e = json.loads(await ws.recv())
            now = time.monotonic_ns()
            if e.get("type") == "token":
                for part in e["content"].split("<t=")[1:]:
                    lat.append((now - int(part.split(">")[0])) / 1e6)
            if e.get("type") in ("done", "error"):
                return e["type"]


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parleyd")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--flush", default="20ms")
    ap.add_argument("--fsync", default="batch")
    a = ap.parse_args()
    pport, port = free_port(), free_port()
    prov = multiprocessing.Process(target=provider_main,
                                   args=(pport, a.tokens, a.rate), daemon=True)
    prov.start()
    tmp = tempfile.mkdtemp(prefix="parley-bench-")
    conf = os.path.join(tmp, "parleyd.conf")
    with open(conf, "w") as f:
        f.write("listen 127.0.0.1:%d\nstate-dir %s/state\nflush-interval %s\n"
                "fsync %s\nmax-connections 100000\n"
                "provider b {\n type openai\n url \"http://127.0.0.1:%d/v1\"\n"
                " model \"bench\"\n}\ndefault-provider b\n" % (port, tmp, a.flush, a.fsync,
                                                 pport))
    d = subprocess.Popen([a.parleyd, "-d", "-f", conf], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        lat = []
        t0 = time.time()
        ends = await asyncio.gather(*[client(port, "b%d" % i, lat)
                                      for i in range(a.sessions)])
        wall = time.time() - t0
    finally:
        d.terminate()
        d.wait()
        prov.terminate()
    lat.sort()
    pct = lambda p: round(lat[min(len(lat) - 1, int(len(lat) * p))], 2)
    print(json.dumps({"sessions": a.sessions, "tokens_per_session": a.tokens,
                      "rate": a.rate, "flush_interval": a.flush,
                      "fsync": a.fsync,
                      "tokens_measured": len(lat), "done": ends.count("done"),
                      "wall_s": round(wall, 1), "p50_ms": pct(0.5),
                      "p90_ms": pct(0.9), "p99_ms": pct(0.99),
                      "max_ms": round(lat[-1], 2) if lat else None}))


asyncio.run(main())
