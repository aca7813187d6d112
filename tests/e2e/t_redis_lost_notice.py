#!/usr/bin/python3
# Two parleyd hosts on one Redis (lease-time 2s): an event that reaches the
# log in Redis without its pub/sub notice (XADD + HSET meta last, as the
# append script writes them, but no PUBLISH, while every subscriber stays
# connected) still reaches a client following the session on the other
# host, through the store's safety net: within its period (30 s,
# RS_POLL_MS in src/store_redis.h) plus a margin, once, in order.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

SAFETY = 30.0
MARGIN = 5.0


async def test():
    why = netns_available()
    if why:
        skip(why)
    need_redis()
    prov = script_provider("short", "A short answer. " * 4, chunk=8,
                           delay="2ms")
    with Cluster(2, lease="2s", providers=prov, default="short") as c:
        A, B = c.hosts
        sid = "lost-notice"
        ws, ev = await stream_chat(A, sid, "n-1", "go", is_idle)
        await ws.close()
        check(c.owner_host(sid) == "h0", "owner %s" % c.owner(sid))
        log = c.check_log(sid, "before")
        n = log[-1]["seq"]
        onb = Follower(B, sid, 0).start()
        await onb.wait_seq(n, 10, "the client on h1")
        # The next event, as the owner's append script would write it,
        # with no PUBLISH: only a read of the log's state can find it.
        e = dict(log[-1])
        e["seq"] = n + 1
        t0 = time.time()
        c.rcmd("XADD", "parley:{%s}:log" % sid, "%d-0" % (n + 1), "t",
               str(int(t0 * 1000)), "e", json.dumps(e))
        c.rcmd("HSET", "parley:{%s}:meta" % sid, "last", str(n + 1))
        await onb.wait_seq(n + 1, SAFETY + MARGIN, "the client on h1 "
                           "(the event written without a notice)")
        print("the follower's client had it %.1fs later" % (time.time() - t0),
              flush=True)
        check(onb.view[-1] == e, "the client on h1 got %s, not %s"
              % (onb.view[-1], e))
        view = await onb.stop()
        check(not onb.problems, "the client on h1: %s" % onb.problems)
        check(view == c.check_log(sid, "after")[:len(view)],
              "the client on h1 saw other events than the log")


run_test("redis_lost_notice", test)
