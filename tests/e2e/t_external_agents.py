#!/usr/bin/python3
# External agents and the end of a session.  A session created with
# agents ["manus","claude"] and an objective stays "created" (waitingFor
# both, chat queued but no turn) until both agents' streams
# (?role=agent&agentId=) are connected, then logs session_state
# active:true and runs the queued turn.  agent_joined / agent_left are
# logged once per agent even with two streams of one agent.  A required
# agent that drops gets error AGENT_DISCONNECT (recoverable) and comes
# back (agent_joined reconnected); one that does not come back within
# agent-reconnect-timeout ends the session failed (session_complete
# reason error, the result in GET /sessions/{id}), also across a worker
# SIGKILL, on time.  config.maxDurationMs ends a session with reason
# time_limit, terminate with reason terminated; the summary is the lead
# agent's (the script provider's reply) when its provider answers, else
# (terminate, or a provider that is down) a plain one with the counts.
# Bad agents / maxDurationMs are BAD_REQUEST naming the field.  An
# observer stream counts for no agent.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from datetime import datetime
from parley import *

TIMEOUT = 3.0   # agent-reconnect-timeout


def agent_url(d, sid, name):
    return d.url("/sessions/%s/stream?role=agent&agentId=%s" % (sid, name))


def of(evs, t, agent=None):
    return [e for e in evs if e["type"] == t and
            (agent is None or e.get("agentId") == agent)]


def info(d, sid):
    st, js = d.http_json("GET", "/sessions/%s" % sid)
    check(st == 200, "GET /sessions/%s -> %d %s" % (sid, st, js))
    return js


def ext(js, name):
    a = [x for x in js["agents"] if x.get("agentId") == name]
    check(len(a) == 1, "agent %s not in %s" % (name, js["agents"]))
    return a[0]


def ts(e):
    return datetime.strptime(e["ts"].replace("Z", "+0000"),
                             "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


async def ended_on_time(d, sid, what):
    """The session ends failed agent-reconnect-timeout after the
    AGENT_DISCONNECT; returns the log and the session_complete."""
    evs = await log_until(d, sid, lambda e: of(e, "session_complete"),
                          "%s: no end" % what, timeout=TIMEOUT + 10)
    err, sc = of(evs, "error")[0], of(evs, "session_complete")[0]
    took = ts(sc) - ts(err)
    check(TIMEOUT - 0.3 <= took <= TIMEOUT + 2.5, "%s: ended %.1f s after "
          "the drop (timeout %.1f)" % (what, took, TIMEOUT))
    check(sc["reason"] == "error", "%s: end %s" % (what, sc))
    return evs, sc


async def agent(d, sid, name):
    ws = await ws_connect(agent_url(d, sid, name))
    first = await ws_recv(ws)
    check(first["type"] == "session_state", "%s first event %s" % (name, first))
    return ws


def create(d, sid, agents=None, objective=None, config=None):
    body = {"sessionId": sid}
    if agents is not None:
        body["agents"] = agents
    if objective:
        body["objective"] = objective
    if config:
        body["config"] = config
    st, js = d.http_json("POST", "/sessions", body)
    check(st == 201, "create %s -> %d %s" % (sid, st, js))


async def required_agents(d):
    sid = "ext-team"
    create(d, sid, ["manus", "claude"], "Plan a launch")
    js = info(d, sid)
    check(js["status"] == "created" and
          sorted(js.get("waitingFor", [])) == ["claude", "manus"],
          "before agents: %s %s" % (js["status"], js.get("waitingFor")))
    check(ext(js, "manus")["status"] == "disconnected" and
          ext(js, "manus")["required"] is True, "manus %s" % ext(js, "manus"))
    # Chat waits for the team: logged, no turn.
    st, r = d.http_json("POST", "/sessions/%s/messages" % sid,
                        {"v": 1, "type": "chat", "sessionId": sid,
                         "message": "go"})
    check(st == 202, "chat -> %d %s" % (st, r))
    # An observer is nobody's presence.
    obs = await ws_connect(d.url("/sessions/%s/stream?role=observer" % sid))
    await ws_recv(obs)
    m1 = await agent(d, sid, "manus")
    m2 = await agent(d, sid, "manus")   # a second stream of one agent
    await log_until(d, sid, lambda e: of(e, "agent_joined", "manus"),
                   "no agent_joined manus")
    await asyncio.sleep(0.8)
    evs = d.log_events(sid)
    check(len(of(evs, "agent_joined")) == 1 and not of(evs, "done"),
          "one agent: %s" % [short(e) for e in evs])
    check(info(d, sid)["status"] == "created", "active with one agent")
    c1 = await agent(d, sid, "claude")
    evs = await log_until(d, sid, lambda e: of(e, "done"),
                         "the queued turn did not run once both joined")
    act = [e for e in of(evs, "session_state") if e.get("active") is True]
    check(len(act) == 1 and act[0]["seq"] > of(evs, "agent_joined",
                                               "claude")[0]["seq"],
          "no logged active session_state after claude: %s" % act)
    check(act[0]["status"] != "created", "active state %s" % act[0]["status"])
    js = info(d, sid)
    check(js["status"] in ("idle", "running", "suspended") and
          "waitingFor" not in js, "after join: %s" % js["status"])
    check(ext(js, "claude")["status"] == "connected", "claude %s" % js)
    # One of manus's streams goes: nothing logged.
    await m1.close()
    await asyncio.sleep(0.8)
    evs = d.log_events(sid)
    check(not of(evs, "agent_left"), "left with a stream still open")
    # The last goes: agent_left, AGENT_DISCONNECT recoverable.
    await m2.close()
    evs = await log_until(d, sid, lambda e: of(e, "error"),
                         "no AGENT_DISCONNECT")
    check(len(of(evs, "agent_left", "manus")) == 1, "agent_left manus")
    err = of(evs, "error")[0]
    check(err["code"] == "AGENT_DISCONNECT" and
          err["severity"] == "recoverable" and err["agentId"] == "manus",
          "error %s" % err)
    check(ext(info(d, sid), "manus")["status"] == "disconnected",
          "manus still connected")
    # It comes back in time: logged, the session goes on.
    m3 = await agent(d, sid, "manus")
    evs = await log_until(d, sid, lambda e: len(of(e, "agent_joined",
                                                  "manus")) == 2,
                         "manus did not rejoin")
    check(of(evs, "agent_joined", "manus")[1].get("reconnected") is True,
          "rejoin %s" % of(evs, "agent_joined", "manus")[1])
    await asyncio.sleep(TIMEOUT + 1)
    evs = d.log_events(sid)
    check(not of(evs, "session_complete"), "ended though manus came back")
    check(ext(info(d, sid), "manus")["status"] == "connected", "manus back")
    # A chat now runs at once.
    st, r = d.http_json("POST", "/sessions/%s/messages" % sid,
                        {"v": 1, "type": "chat", "sessionId": sid,
                         "message": "again"})
    await log_until(d, sid, lambda e: len(of(e, "done")) == 2, "second turn")
    # terminate: reason terminated, the result kept.
    st, r = d.http_json("POST", "/sessions/%s/messages" % sid,
                        {"v": 1, "type": "terminate", "sessionId": sid})
    check(st == 202, "terminate -> %d %s" % (st, r))
    evs = await log_until(d, sid, lambda e: of(e, "session_complete"),
                         "no session_complete")
    sc = of(evs, "session_complete")[0]
    # terminate: a plain summary, logged before the answer
    check(sc["reason"] == "terminated" and "usage" in sc and
          sc["summary"].startswith("terminated by request") and
          "2 messages" in sc["summary"] and "3 agents" in sc["summary"],
          "terminate %s" % sc)
    # Nothing is logged after the end, not even the agents leaving.
    for w in (m3, c1, obs):
        await w.close()
    await asyncio.sleep(0.5)
    evs = d.log_events(sid)
    check(evs[-1]["type"] == "session_complete", "logged after the end: %s"
          % [short(e) for e in evs[-3:]])
    js = info(d, sid)
    check(js["status"] == "completed" and
          js["result"]["reason"] == "terminated", "after terminate %s" % js)


async def dropped_for_good(d):
    sid = "ext-fail"
    create(d, sid, ["a1", "a2"], "Something")
    a1 = await agent(d, sid, "a1")
    a2 = await agent(d, sid, "a2")
    await log_until(d, sid, lambda e: any(x.get("active") for x in
                                         of(e, "session_state")), "not active")
    await a1.close()
    evs, sc = await ended_on_time(d, sid, "a1 gone")
    # the lead agent (the script provider) wrote the summary
    check(sc["summary"] == FAST_REPLY, "end %s" % sc)
    js = info(d, sid)
    check(js["status"] == "failed" and js["result"]["reason"] == "error",
          "GET after failure %s %s" % (js["status"], js.get("result")))
    st, r = d.http_json("POST", "/sessions/%s/messages" % sid,
                        {"v": 1, "type": "chat", "sessionId": sid,
                         "message": "late"})
    check(st == 409 and r["error"]["code"] == "SESSION_ENDED",
          "chat after failure %d %s" % (st, r))
    await a2.close()


async def time_limit(d, sid, summary):
    """A session with a 1.5 s time limit ends so; summary(text) checks
    what its summary says."""
    create(d, sid, objective="Be quick", config={"maxDurationMs": 1500})
    st, r = d.http_json("POST", "/sessions/%s/messages" % sid,
                        {"v": 1, "type": "chat", "sessionId": sid,
                         "message": "hello"})
    evs = await log_until(d, sid, lambda e: of(e, "session_complete"),
                          "no time limit end")
    sc = of(evs, "session_complete")[0]
    check(sc["reason"] == "time_limit" and summary(sc["summary"]),
          "time limit %s" % sc)
    check(1.3 <= ts(sc) - ts(evs[0]) <= 1.5 + 3, "time limit at %.1f s" %
          (ts(sc) - ts(evs[0])))
    js = info(d, sid)
    check(js["status"] == "completed" and
          js["result"]["reason"] == "time_limit" and
          js["result"]["summary"] == sc["summary"], "after time limit %s" % js)


async def worker_kill(d):
    sid = "ext-kill"
    create(d, sid, ["k1", "k2"])
    k1 = await agent(d, sid, "k1")
    k2 = await agent(d, sid, "k2")
    await log_until(d, sid, lambda e: any(x.get("active") for x in
                                         of(e, "session_state")), "not active")
    await k1.close()
    await log_until(d, sid, lambda e: of(e, "error"), "no AGENT_DISCONNECT")
    d.kill_workers()
    try:
        await k2.close()
    except Exception:
        pass
    k2 = await agent(d, sid, "k2")      # the survivor comes back
    evs, sc = await ended_on_time(d, sid, "after a worker kill")
    check(len(of(evs, "agent_joined", "k2")) == 1 and
          not of(evs, "agent_left", "k2"),
          "k2's presence across the kill: %s" % [short(e) for e in evs])
    await k2.close()


async def bad_input(d):
    for body, field in (({"agents": "manus"}, "'agents'"),
                        ({"agents": [""]}, "agents[0]"),
                        ({"agents": ["a", 3]}, "agents[1]"),
                        ({"agents": ["a", "a"]}, "agents[1]"),
                        ({"agents": ["a b"]}, "agents[0]"),
                        ({"config": {"maxDurationMs": "1m"}},
                         "config.maxDurationMs"),
                        ({"config": {"maxDurationMs": 1}},
                         "config.maxDurationMs")):
        st, js = d.http_json("POST", "/sessions", body)
        check(st == 400 and js["error"]["code"] == "BAD_REQUEST" and
              field in js["error"]["message"],
              "%s -> %d %s" % (body, st, js))
    # An object is an internal agent: not this module's to refuse.
    create(d, "ext-obj", [{"name": "helper", "role": "helper"}, "x1"])
    check(info(d, "ext-obj").get("waitingFor") == ["x1"], "object agent")


async def test():
    d = Daemon(extra="agent-reconnect-timeout %ds\n" % TIMEOUT)
    with with_daemon(d):
        await bad_input(d)
        # sessions of their own, each checked on its own clock: at once
        await asyncio.gather(required_agents(d), dropped_for_good(d),
                             time_limit(d, "ext-time",
                                        lambda s: s == FAST_REPLY))
        # alone: it SIGKILLs every worker
        await worker_kill(d)
    # No provider answers: a plain summary.
    d = Daemon(providers='provider down {\n    type openai\n'
               '    url "http://127.0.0.1:1/v1"\n    model "m"\n'
               '    max-retries 0\n}\n', default="down")
    with with_daemon(d):
        await time_limit(d, "ext-time-plain", lambda s: s.startswith(
            "Session ended (time_limit)") and "1 messages" in s)


run_test("external_agents", test)
