#!/usr/bin/python3
# A client that stops reading must not stall another client of the same
# session; when it reads again it gets every event exactly once, in order
# (resuming from the log with lastSeq if the server closed it with 1008).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("%05d-abcdefghij " % i for i in range(3500))[:60000]


async def test():
    d = Daemon(providers=provider_block("big", LONG, chunk=16, delay="0ms"),
               default="big", flush="0ms", extra="max-output-buffer 4k\n")
    with with_daemon(d):
        sid = "slow-1"
        slow = RawWS(d.port, "/sessions/%s/stream" % sid, rcvbuf=2048, timeout=20)
        e = slow.recv_event()
        check(isinstance(e, dict) and e["type"] == "session_state", "slow first %s" % (e,))
        # the slow client now reads nothing while the session streams
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "long"})
        normal = logged(await ws_until(ws, is_idle, timeout=90))
        await ws.close()
        check_contiguous(normal, 1, "normal client")
        text = "".join(e["content"] for e in normal if e["type"] == "token")
        check(text == LONG, "normal client text differs (%d vs %d bytes)" % (len(text), len(LONG)))
        last = normal[-1]["seq"]
        # now the slow one reads everything
        got, closes = [], []
        deadline = time.time() + 90
        while not got or got[-1]["seq"] < last:
            check(time.time() < deadline, "slow client stuck at %s; closes %s"
                  % (got[-1]["seq"] if got else 0, closes))
            try:
                e = slow.recv_event()
            except (EOFError, OSError) as ex:
                e = ("close", str(ex))
            if isinstance(e, tuple):
                closes.append(e[1])
                check(e[1] in (1008, 1001) or isinstance(e[1], str),
                      "slow client closed with %s" % (e[1],))
                slow.close()
                slow = RawWS(d.port, "/sessions/%s/stream?lastSeq=%d"
                             % (sid, got[-1]["seq"] if got else 0), timeout=20)
                continue
            if "seq" in e and e.get("type") not in ("ack", "pong"):
                got.append(e)
        slow.close()
        if closes:
            print("slow client was closed %s times (%s) and resumed" % (len(closes), closes))
        check_contiguous(got, 1, "slow client")
        same_events(got, normal, "slow vs normal client")

run_test("slow_consumer", test)
