#!/usr/bin/python3
# Retention: events older than `retention` are trimmed from the front of the
# log; a client resuming from before the oldest kept event first gets
# RESUME_GAP with oldestSeq, then every kept event exactly once, in order.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


async def chat_and_wait(d, sid, text):
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "chat", "message": text})
    check(st == 202, "POST chat -> %d %s" % (st, js))
    deadline = time.time() + 20
    while time.time() < deadline:
        evs = d.log_events(sid)
        if evs and is_idle(evs[-1]):
            return evs
        await asyncio.sleep(0.1)
    raise Fail("turn on %s did not finish" % sid)


async def test():
    d = Daemon(retention="2s")
    with with_daemon(d):
        await chat_and_wait(d, "gap-1", "first")
        await asyncio.sleep(2.5)
        evs = await chat_and_wait(d, "gap-1", "second")
        last = evs[-1]["seq"]
        first = 1
        deadline = time.time() + 10
        while time.time() < deadline:
            st, info = d.http_json("GET", "/sessions/gap-1")
            check(st == 200, "GET /sessions/gap-1 -> %d" % st)
            first = info.get("firstSeq", 1)
            if first > 1:
                break
            await asyncio.sleep(0.2)
        check(first > 1, "nothing was trimmed after retention passed")
        check(first <= last, "trimmed everything: firstSeq %d lastSeq %d"
              % (first, last))

        # WebSocket resume from the start: gap first, then first..last.
        async with websockets.connect(d.url("/sessions/gap-1/stream?lastSeq=0")) as ws:
            got = []
            st_ev = json.loads(await asyncio.wait_for(ws.recv(), 5))
            check(st_ev["type"] == "session_state", "first event %s" % st_ev)
            gap = json.loads(await asyncio.wait_for(ws.recv(), 5))
            check(gap["type"] == "error" and gap["code"] == "RESUME_GAP"
                  and gap.get("oldestSeq") == first and "seq" not in gap,
                  "expected RESUME_GAP oldestSeq=%d, got %s" % (first, gap))
            while not got or got[-1]["seq"] < last:
                e = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if "seq" in e:
                    got.append(e)
            check_contiguous(got, first, "ws replay after gap")

        # SSE resume from before the oldest: the same gap, then the events.
        out = subprocess.run(
            ["curl", "-s", "-N", "-m", "2", "-H", "Last-Event-ID: 0",
             "http://127.0.0.1:%d/sessions/gap-1/events" % d.port],
            capture_output=True, text=True).stdout
        check("RESUME_GAP" in out and "id: %d\n" % first in out and
              "id: %d\n" % (first - 1) not in out,
              "SSE resume across the gap wrong: %s" % out[:400])


run_test("retention_gap", test)
