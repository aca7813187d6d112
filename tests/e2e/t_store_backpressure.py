#!/usr/bin/python3
# A model that streams faster than the store takes appends: the script
# provider's 60,000 one-byte chunks at once (delay 0, flush-interval 0) into
# a Redis store, whose write queue per session holds 16,384 records.  Every
# chunk must reach the log, in order (tokens coalesce while the queue is
# near its bound: the text is the test, not the count), then the turn's
# done; no append may be refused.  Before, tokens refused with EAGAIN were
# dropped and the turn went on without them (27 to 370 of 100,000 in
# bench/run's replay fill; once the done too).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

N = 60000


async def test():
    need_redis()
    reply = "".join("abcdefghij"[i % 10] for i in range(N))
    r = RedisServer().start()
    try:
        d = Daemon(providers=provider_block("flood", reply, chunk=1,
                                            delay="0"),
                   default="flood", flush="0", workers=1,
                   store="redis://127.0.0.1:%d" % r.port).start()
        try:
            events = await chat_turn(d, "flood-1", "go", timeout=120)
            types = [e.get("type") for e in events]
            check("done" in types, "no done: the last events were %s"
                  % types[-5:])
            log = d.log_events("flood-1")
            text = "".join(e.get("content", "") for e in log
                           if e.get("type") == "token")
            check(len(text) == N, "the log holds %d of %d bytes of the "
                  "reply" % (len(text), N))
            check(text == reply, "the log's text differs from the reply")
            types = [e["type"] for e in log]
            check("done" in types and all(t != "token" for t in
                  types[types.index("done"):]),
                  "tokens after the done: %s" % types[-5:])
            with open(d.logpath) as f:
                refused = [ln for ln in f if "append of seq" in ln]
            check(not refused, "appends refused: %s" % refused[:3])
            print("%d events for %d chunks" % (len(log), N), flush=True)
        finally:
            d.stop()
    finally:
        r.stop()


run_test("store_backpressure", test)
