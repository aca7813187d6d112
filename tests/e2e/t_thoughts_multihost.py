#!/usr/bin/python3
# Thoughts across hosts sharing Redis (two parleyd on 127.0.0.1, the
# cluster harness without namespaces), config.thoughtVisibility summary:
#  a. agent a1 shares on host 0, which owns the session; agent a2 and an
#     observer are on host 1, which follows it: the observer gets a1's
#     analysis reduced, a2 shares a reply through host 1 (forwarded to the
#     owner), a2 gets its own in full and the observer reduced; through
#     host 1 an unknown reference, a reused id and a bad field are
#     BAD_REQUEST, an observer's share FORBIDDEN, and nothing is logged;
#  b. host 0 dies; host 1 takes the session over: the thoughts are still
#     known there (a reply to one accepted, a reused id refused, the
#     graph whole), and the observer's replay is filtered as before.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

SID = "thm-1"


async def open_ws(h, q):
    ws = await ws_connect(h.url("/sessions/%s/stream?%s" % (SID, q)))
    st = await ws_recv(ws)
    check(st["type"] == "session_state", "first event %s" % st)
    return ws


async def share(ws, mid, thought, into):
    await ws_send(ws, {"v": 1, "type": "thought_share", "sessionId": SID,
                       "id": mid, "thought": thought})
    got = await ws_until(ws, lambda e: e.get("id") == mid and
                         e.get("type") in ("ack", "error"), 30)
    into += got
    return got[-1]


def thought_at(events, seq):
    for e in events:
        if e.get("seq") == seq:
            return e
    return None


async def until_seq(ws, seq, into):
    if thought_at(into, seq) is None:
        await ws_until(ws, lambda e: e.get("seq") == seq, 30, into=into)
    return thought_at(into, seq)


def is_reduced(e, author):
    return (e and e["type"] == "thought" and e["agentId"] == author and
            e["thought"].get("redacted") is True and
            "content" not in e["thought"])


async def main():
    with Cluster(2, lease="2s", netns=False, workers=1) as c:
        h0, h1 = c.hosts
        print("-- a: shared on both hosts", flush=True)
        st, js = h0.http_json("POST", "/sessions", {
            "sessionId": SID, "config": {"thoughtVisibility": "summary"}})
        check(st == 201, "POST /sessions -> %s %s" % (st, js))
        a1ev, a2ev, obev = [], [], []
        a1 = await open_ws(h0, "role=agent&agentId=a1&lastSeq=0")
        a2 = await open_ws(h1, "role=agent&agentId=a2&lastSeq=0")
        ob = await open_ws(h1, "role=observer&lastSeq=0")
        r = await share(a1, "m1", {"thoughtId": "th_m1",
                        "content": "two webhooks race",
                        "category": "analysis", "confidence": 0.8}, a1ev)
        check(r["type"] == "ack", "a1's share -> %s" % r)
        s1 = r["eventSeq"]
        e = await until_seq(ob, s1, obev)
        check(is_reduced(e, "a1"), "observer on host 1 got %s" % e)
        e = await until_seq(a2, s1, a2ev)
        check(is_reduced(e, "a1"), "a2 on host 1 got %s" % e)
        r = await share(a2, "m2", {"thoughtId": "th_m2",
                        "content": "lock both", "category": "plan",
                        "confidence": 0.6, "inResponseTo": "th_m1",
                        "references": ["th_m1"]}, a2ev)
        check(r["type"] == "ack", "a2's share through host 1 -> %s" % r)
        for mid, t, code in (
                ("b1", {"content": "x", "category": "plan",
                        "confidence": 0.1, "inResponseTo": "th_none"},
                 "BAD_REQUEST"),
                ("b2", {"thoughtId": "th_m1", "content": "x",
                        "category": "plan", "confidence": 0.1},
                 "BAD_REQUEST"),
                ("b3", {"content": "x", "category": "plan",
                        "confidence": 2}, "BAD_REQUEST")):
            r = await share(a2, mid, t, a2ev)
            check(r["type"] == "error" and r["code"] == code,
                  "through host 1, %s -> %s" % (mid, r))
        r = await share(ob, "b4", {"content": "x", "category": "plan",
                        "confidence": 0.1}, obev)
        check(r["type"] == "error" and r["code"] == "FORBIDDEN",
              "an observer's share through host 1 -> %s" % r)
        # a2's thought is logged by the owner and comes back to a2 in full
        deadline = time.time() + 30
        while True:
            log = c.log_events(SID)
            mine = [e for e in log if e.get("type") == "thought" and
                    e["thought"]["thoughtId"] == "th_m2"]
            if mine:
                break
            check(time.time() < deadline, "a2's thought never logged: %s"
                  % [short(e) for e in log])
            await asyncio.sleep(0.2)
        s2 = mine[0]["seq"]
        check(len([e for e in log if e.get("type") == "thought"]) == 2,
              "refused shares were logged: %s" % [short(e) for e in log])
        e = await until_seq(a2, s2, a2ev)
        check(e["type"] == "thought" and e["thought"]["content"] ==
              "lock both", "a2 got its own as %s" % e)
        e = await until_seq(ob, s2, obev)
        check(is_reduced(e, "a2"), "observer got a2's plan as %s" % e)
        e = await until_seq(a1, s2, a1ev)
        check(is_reduced(e, "a2"), "a1 on host 0 got a2's plan as %s" % e)
        for ws in (a1, a2, ob):
            await ws.close()

        print("-- b: the owner dies", flush=True)
        h0.crash()
        deadline = time.time() + 30
        while True:
            ws = await open_ws(h1, "role=agent&agentId=a1")
            r = await share(ws, "k1", {"content": "after the failover",
                            "category": "synthesis", "confidence": 0.9,
                            "inResponseTo": "th_m2",
                            "references": ["th_m1", "th_m2"]}, [])
            if r["type"] == "ack" and c.owner(SID) and \
                    c.owner(SID).startswith("h1/"):
                break
            await ws.close()
            check(time.time() < deadline, "host 1 never took the session "
                  "over: %s, owner %s" % (r, c.owner(SID)))
            await asyncio.sleep(0.5)
        r = await share(ws, "k2", {"thoughtId": "th_m2", "content": "x",
                        "category": "plan", "confidence": 0.1}, [])
        check(r["type"] == "error" and r["code"] == "BAD_REQUEST",
              "after the failover, a reused id -> %s" % r)
        await ws.close()
        st, g = h1.http_json("GET", "/sessions/%s/thoughts" % SID)
        check(st == 200 and [n["thoughtId"] for n in g["nodes"]][:2] ==
              ["th_m1", "th_m2"] and len(g["nodes"]) == 3 and
              len(g["edges"]) == 5, "graph after the failover: %s" % g)
        ob = await open_ws(h1, "role=observer&lastSeq=0")
        ev = await ws_until(ob, lambda e: e.get("seq") == s2, 30)
        await ob.close()
        check_contiguous([e for e in ev if "seq" in e], 1, "observer replay")
        check(is_reduced(thought_at(ev, s1), "a1") and
              is_reduced(thought_at(ev, s2), "a2"),
              "observer replay after the failover: %s"
              % [short(e) for e in ev])


run_test("thoughts_multihost", main)
