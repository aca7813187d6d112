#!/usr/bin/python3
# Two parleyd hosts on one Redis: a client that resumes on the follower
# host with an epoch that host has not read yet (it came from the owner,
# which knows a newer one) gets no RESUME_GAP: the follower reads the
# epochs again and cuts it; it comes back and resumes where it was.
# (A follower that decided with its stale list took the unknown epoch for
# the oldest: a needless RESUME_GAP replaying what the client had.)
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *


def gaps(evs):
    return [e for _, e in evs if e.get("code") == "RESUME_GAP"]


async def test():
    why = netns_available()
    if why:
        skip(why)
    need_redis()
    prov = script_provider("short", "A short answer. " * 4, chunk=8,
                           delay="2ms")
    with Cluster(2, lease="2s", providers=prov, default="short") as c:
        A, B = c.hosts
        sid = "stale-epoch"
        meta = "parley:{%s}:meta" % sid
        ws, ev = await stream_chat(A, sid, "n-1", "go", is_idle)
        await ws.close()
        check(c.owner_host(sid) == "h0", "owner %s" % c.owner(sid))
        n = c.check_log(sid, "before")[-1]["seq"]
        # An epoch h1 reads when it opens the session.
        c.rcmd("HSET", meta, "epochs", "11111111:1")
        evs = sse_get(B, sid, "%d.11111111" % n)
        check(evs and evs[0][1]["type"] == "session_state" and
              evs[0][1].get("epoch") == "11111111" and not gaps(evs),
              "h1 at first: %s" % evs[:3])
        check(c.owner_host(sid) == "h0", "owner %s" % c.owner(sid))
        # A newer one the owner's clients know and h1 has not read (no
        # notice; its poll is 30 s away).
        c.rcmd("HSET", meta, "epochs", "11111111:1,22222222:%d" % n)
        seen = []

        def resumed():
            evs = sse_get(B, sid, "%d.22222222" % n)
            seen.append(evs)
            return gaps(evs) or (evs and evs[0][1]["type"] ==
                                 "session_state" and
                                 evs[0][1].get("epoch") == "22222222")
        wait_until(resumed, 20, "h1 to know the client's epoch")
        bad = [g for evs in seen for g in gaps(evs)]
        check(not bad, "h1 answered a client of a newer epoch with "
              "RESUME_GAP: %s" % bad)
        print("h1 resumed the client after %d request(s)" % len(seen))


run_test("redis_stale_epoch", test)
