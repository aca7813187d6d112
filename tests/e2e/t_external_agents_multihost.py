#!/usr/bin/python3
# External agents' presence across hosts sharing Redis (two parleyd on
# 127.0.0.1, the cluster harness without namespaces):
#  a. the session is owned by host 0; claude connects through host 1 (a
#     follower), which reports it to the owner's inbox: agent_joined
#     claude, the session becomes active; a second stream of claude on
#     host 0 logs nothing, nor does closing it; closing the one on host 1
#     logs agent_left and AGENT_DISCONNECT; back on host 1: agent_joined
#     reconnected;
#  b. host 0 dies: host 1 takes the session over; manus reconnects there,
#     claude never left: no agent_left for either after the takeover;
#     then manus leaves for good and the new owner ends the session
#     failed agent-reconnect-timeout later.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

TIMEOUT = 3


def of(evs, t, agent=None):
    return [e for e in evs if e["type"] == t and
            (agent is None or e.get("agentId") == agent)]


def wait_log(c, sid, pred, what, timeout=30):
    return c.log_until(sid, pred, what, timeout)


async def agent(h, sid, name):
    ws = await ws_connect(h.url("/sessions/%s/stream?role=agent&agentId=%s"
                                % (sid, name)))
    await ws_recv(ws)
    return ws


async def main():
    with Cluster(2, lease="2s", netns=False, workers=1,
                 extra="agent-reconnect-timeout %ds\n" % TIMEOUT) as c:
        h0, h1 = c.hosts
        sid = "extm"
        st, js = h0.http_json("POST", "/sessions", {
            "sessionId": sid, "agents": ["manus", "claude"],
            "objective": "across hosts"})
        check(st == 201, "create -> %s %s" % (st, js))
        check(c.owner(sid).startswith("h0/"), "owner %s" % c.owner(sid))

        print("-- a: presence through a follower", flush=True)
        manus = await agent(h0, sid, "manus")
        claude = await agent(h1, sid, "claude")
        log = wait_log(c, sid, lambda l: any(e.get("active") for e in
                                             of(l, "session_state")),
                       "a: not active with claude on host 1")
        check(len(of(log, "agent_joined", "claude")) == 1, "a: claude joined")
        c2 = await agent(h0, sid, "claude")
        await asyncio.sleep(1)
        await c2.close()
        await asyncio.sleep(1)
        log = c.log_events(sid)
        check(len(of(log, "agent_joined", "claude")) == 1 and
              not of(log, "agent_left"), "a: a second stream logged %s" %
              [short(e) for e in log])
        await claude.close()
        log = wait_log(c, sid, lambda l: of(l, "error"),
                       "a: no AGENT_DISCONNECT for claude")
        err = of(log, "error")[0]
        check(err["code"] == "AGENT_DISCONNECT" and err["agentId"] ==
              "claude" and len(of(log, "agent_left", "claude")) == 1,
              "a: %s" % err)
        claude = await agent(h1, sid, "claude")
        log = wait_log(c, sid, lambda l: len(of(l, "agent_joined",
                                                "claude")) == 2,
                       "a: claude did not rejoin")
        check(of(log, "agent_joined", "claude")[1].get("reconnected"),
              "a: rejoin %s" % of(log, "agent_joined", "claude")[1])

        print("-- b: the owner dies", flush=True)
        mark = c.log_events(sid)[-1]["seq"]
        h0.crash()
        try:
            await manus.close()
        except Exception:
            pass
        deadline = time.time() + 30
        while not (c.owner(sid) or "").startswith("h1/"):
            check(time.time() < deadline, "host 1 never took over: %s" %
                  c.owner(sid))
            await asyncio.sleep(0.2)
        manus = await agent(h1, sid, "manus")
        await asyncio.sleep(17)     # past the new owner's grace
        log = c.log_events(sid)
        after = [e for e in log if e["seq"] > mark]
        check(not of(after, "agent_left") and not of(after, "agent_joined")
              and not of(after, "session_complete"),
              "b: presence changed across the takeover: %s" %
              [short(e) for e in after])
        st, info = h1.http_json("GET", "/sessions/%s" % sid)
        conn = {a["agentId"]: a["status"] for a in info["agents"]
                if a.get("kind") == "external"}
        check(conn == {"manus": "connected", "claude": "connected"},
              "b: GET agents %s" % conn)
        await manus.close()
        log = wait_log(c, sid, lambda l: of(l, "session_complete"),
                       "b: no end after manus left")
        sc = of(log, "session_complete")[0]
        check(sc["reason"] == "error" and sc["summary"] == FAST_REPLY,
              "b: end %s" % sc)
        st, info = h1.http_json("GET", "/sessions/%s" % sid)
        check(info["status"] == "failed", "b: status %s" % info["status"])
        await claude.close()


run_test("external_agents_multihost", main)
