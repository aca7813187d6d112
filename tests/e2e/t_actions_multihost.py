#!/usr/bin/python3
# Proposed actions across hosts sharing Redis (two parleyd on 127.0.0.1,
# the cluster harness without namespaces):
#  a. agent manus on host 0 (the owner) proposes; agent claude, on host 1
#     (a follower), sees it, finds it in session_state and approves there:
#     host 1 forwards the answer to the owner, action_execute reaches manus,
#     and host 1's session_state says the action is executing;
#  b. host 0 dies while the action waits for its result: manus reconnects
#     to host 1, which takes the session over, finds the action pending and
#     posts its result, logged once; a pending proposal from before the
#     failover is still answered there.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

ACTION = {"type": "deploy", "description": "Deploy the fix to staging"}


async def agent(h, sid, name):
    ws = await ws_connect(h.url("/sessions/%s/stream?role=agent&agentId=%s"
                                % (sid, name)))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "first event %s" % short(st))
    return ws, st


def post(h, sid, body, name):
    body = dict(body, v=1, sessionId=sid)
    return h.http_json("POST", "/sessions/%s/messages?role=agent&agentId=%s"
                       % (sid, name), body)


async def seen(ws, pred, what, timeout=30):
    try:
        return (await ws_until(ws, pred, timeout))[-1]
    except (Fail, asyncio.TimeoutError):
        raise Fail("%s: not seen in %d s" % (what, timeout))


def pending_of(st):
    return {p["actionId"]: p for p in st.get("pendingActions") or []}


async def main():
    with Cluster(2, lease="2s", netns=False, workers=1) as c:
        h0, h1 = c.hosts
        sid = "acm-a"
        print("-- a: approved through the other host", flush=True)
        h0.http_json("POST", "/sessions", {"sessionId": sid})
        wm, _ = await agent(h0, sid, "manus")
        wc, _ = await agent(h1, sid, "claude")
        await ws_send(wm, {"v": 1, "type": "action_propose",
                           "sessionId": sid, "action": ACTION})
        p1 = await seen(wc, lambda e: e.get("type") == "action_proposed",
                        "a: the proposal on host 1")
        aid = p1["actionId"]
        s, js = post(h0, sid, {"type": "action_propose", "action": ACTION},
                     "manus")
        check(s == 202, "second proposal -> %s %s" % (s, js))
        p2 = await seen(wc, lambda e: e.get("type") == "action_proposed" and
                        e["actionId"] != aid, "a: the second proposal")
        _, st = await agent(h1, sid, "claude")
        check(set(pending_of(st)) == {aid, p2["actionId"]},
              "a: the follower lists %s" % pending_of(st))
        await ws_send(wc, {"v": 1, "type": "action_approve", "sessionId": sid,
                           "id": "ap-h1", "actionId": aid})
        ex = await seen(wm, lambda e: e.get("type") == "action_execute",
                        "a: action_execute on host 0")
        check(ex["actionId"] == aid and ex["agentId"] == "manus",
              "a: action_execute %s" % ex)
        await seen(wc, lambda e: e.get("type") == "action_execute",
                   "a: action_execute on host 1")
        w2, st = await agent(h1, sid, "observer-x")
        await w2.close()
        check(pending_of(st).get(aid, {}).get("phase") == "executing" and
              pending_of(st).get(p2["actionId"], {}).get("phase") ==
              "proposed", "a: the follower lists %s" % pending_of(st))
        await wm.close()
        await wc.close()

        print("-- b: the owner dies before the result", flush=True)
        h0.crash()
        deadline = time.time() + 30
        while True:
            wm, st = await agent(h1, sid, "manus")
            owner = c.owner(sid) or ""     # read once: the lease may lapse
            if aid in pending_of(st) and owner.startswith("h1/"):
                break
            await wm.close()
            check(time.time() < deadline, "b: host 1 never took over: %s, "
                  "owner %s" % (st, c.owner(sid)))
            await asyncio.sleep(0.3)
        check(pending_of(st)[aid]["phase"] == "executing",
              "b: pending %s" % pending_of(st))
        s, js = post(h1, sid, {"type": "action_result", "actionId": aid,
                               "result": {"url": "https://staging"}},
                     "manus")
        check(s == 202, "b: result -> %s %s" % (s, js))
        s, js = post(h1, sid, {"type": "action_result", "actionId": aid,
                               "result": "again"}, "manus")
        check(s == 200 and js.get("duplicate"), "b: second result -> %s %s"
              % (s, js))
        s, js = post(h1, sid, {"type": "action_approve",
                               "actionId": p2["actionId"],
                               "decision": "reject"}, "claude")
        check(s == 202, "b: reject after the failover -> %s %s" % (s, js))
        await wm.close()
        log = c.log_events(sid)
        steps = [(e["type"], e.get("actionId")) for e in log
                 if e["type"].startswith("action_")]
        check(steps == [("action_proposed", aid),
                        ("action_proposed", p2["actionId"]),
                        ("action_approved", aid), ("action_execute", aid),
                        ("action_result", aid),
                        ("action_rejected", p2["actionId"])],
              "b: logged steps %s" % steps)


run_test("actions_multihost", main)
