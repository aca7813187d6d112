#!/usr/bin/python3
# GET /sessions/{id}/dashboard, on the local store or (E2E_STORE=redis) Redis:
#  a. a dashboard gets session_state, then a metrics event at once and every
#     dashboard-interval (300ms here), with every documented field; its
#     connection counts are right (1 user stream, 1 observer stream, 1
#     dashboard; a control channel counts as admin);
#  b. it sees every logged event of a chat turn, in order, the same as the
#     log; metrics after the turn: turns, usage (the session's and the lone
#     agent's), events per minute, agent idle again;
#  c. any write on it (chat, cancel, tool_approve, pause, an unknown type)
#     gets error FORBIDDEN and the connection stays open (ping -> pong);
#  d. an observer stream's writes are FORBIDDEN the same way, and so is an
#     observer's POST .../messages (403); a user's chat still works;
#  e. resume with ?lastSeq=K, or a first message resume, replays exactly
#     the events after K, then metrics; ?lastSeq=0 replays the whole log;
#  f. the session's counting starts again once its last dashboard left
#     (windowMs small again), and a dashboard of an unknown session is 404.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN, OBS = "adm-secret", "obs-secret"
SID = "dash-1"
FIELDS = ("status", "lastSeq", "intervalMs", "connections", "agents", "usage",
          "turns", "rates", "queues", "pending", "ts")


async def open_dash(d, sid=SID, last=None):
    path = "/sessions/%s/dashboard" % sid
    if last is not None:
        path += "?lastSeq=%d" % last
    ws = await ws_connect(d.url(path))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "dashboard's first event %s"
          % short(st))
    return ws


async def next_metrics(ws, into=None, timeout=10):
    got = await ws_until(ws, lambda e: e.get("type") == "metrics", timeout,
                         into=into)
    return got[-1]


def check_fields(m):
    for f in FIELDS:
        check(f in m, "metrics lacks %s: %s" % (f, m))
    check("seq" not in m, "metrics carries a seq: %s" % m)
    check(m["intervalMs"] == 300, "intervalMs %s" % m["intervalMs"])
    for k in ("user", "agent", "observer", "admin", "dashboard", "total"):
        check(isinstance(m["connections"].get(k), int), "connections.%s: %s"
              % (k, m["connections"]))
    for k in ("thoughtsPerMinute", "eventsPerMinute", "windowMs"):
        check(k in m["rates"], "rates.%s: %s" % (k, m["rates"]))
    for k in ("messages", "bytesQueued", "maxBytesQueued", "eventsBehind",
              "maxEventsBehind", "slowest"):
        check(k in m["queues"], "queues.%s: %s" % (k, m["queues"]))
    for k in ("approvals", "clientCalls", "questions", "actions", "total"):
        check(k in m["pending"], "pending.%s: %s" % (k, m["pending"]))
    check(len(m["agents"]) == 1 and m["agents"][0].get("agentId") and
          m["agents"][0].get("status") in ("idle", "thinking") and
          "usage" in m["agents"][0], "agents %s" % m["agents"])
    for k in ("inputTokens", "outputTokens", "tokens", "cost"):
        check(k in m["usage"], "usage.%s: %s" % (k, m["usage"]))


async def wait_conns(ws, want, what):
    deadline = time.time() + 10
    while True:
        m = await next_metrics(ws)
        got = {k: m["connections"][k] for k in want}
        if got == want:
            return m
        check(time.time() < deadline, "%s: connections %s, want %s"
              % (what, m["connections"], want))


async def forbidden(ws, msg, what):
    await ws_send(ws, dict(msg, v=1, sessionId=SID, id="f-%s" % msg["type"]))
    e = await ws_until(ws, lambda e: e.get("type") in ("error", "ack"))
    e = e[-1]
    check(e["type"] == "error" and e.get("code") == "FORBIDDEN" and
          e.get("id") == "f-%s" % msg["type"] and "observer" in e["message"],
          "%s %s: %s" % (what, msg["type"], e))


async def still_open(ws, what):
    await ws_send(ws, {"v": 1, "type": "ping", "sessionId": SID, "id": "p"})
    e = await ws_until(ws, lambda e: e.get("type") == "pong")
    check(e[-1].get("id") == "p", "%s: pong %s" % (what, e[-1]))


WRITES = ({"type": "chat", "message": "not from a reader"},
          {"type": "cancel"},
          {"type": "tool_approve", "toolCallId": "x", "decision": "approve"},
          {"type": "set_autonomy", "level": "MANUAL"},
          {"type": "mcp_tools", "tools": []},
          {"type": "pause"},
          {"type": "terminate"},
          {"type": "agent_add", "role": "critic"},
          {"type": "no_such_type"})


async def test():
    d = Daemon(extra="dashboard-interval 300ms\ntoken %s role observer\n"
               % OBS, token=ADMIN)
    with with_daemon(d):
        st, js = d.http_json("POST", "/sessions", {"sessionId": SID})
        check(st == 201, "POST /sessions -> %s %s" % (st, js))
        st, js = d.http_json("GET", "/sessions/nope/dashboard")
        check(st == 404, "dashboard of an unknown session -> %s %s" % (st, js))

        # a. at once, then every interval, with the fields
        dash = await open_dash(d)
        t0 = time.time()
        m = await next_metrics(dash, timeout=2)
        check(time.time() - t0 < 0.25, "no metrics at connect")
        check_fields(m)
        check(m["connections"]["dashboard"] == 1 and
              m["connections"]["total"] == 1, "alone: %s" % m["connections"])
        t0 = time.time()
        m2 = await next_metrics(dash)
        check(0.15 < time.time() - t0 < 1.5, "metrics interval %.2fs"
              % (time.time() - t0))
        user = await ws_connect(d.url("/sessions/%s/stream?role=user" % SID))
        await ws_recv(user)
        obs = await ws_connect(d.url("/sessions/%s/stream?access_token=%s"
                                     % (SID, OBS)))
        await ws_recv(obs)
        await wait_conns(dash, {"user": 1, "observer": 1, "dashboard": 1,
                                "admin": 0, "agent": 0, "total": 3},
                         "user + observer + dashboard")
        ctl = await ws_connect(d.url("/sessions/%s/control" % SID))
        await ws_recv(ctl)
        await wait_conns(dash, {"admin": 1, "total": 4}, "with control")
        await ctl.close()

        # b. a turn, seen whole
        top = d.last_seq(SID)
        seen = []
        await ws_send(user, {"v": 1, "type": "chat", "sessionId": SID,
                             "id": "u-1", "message": "hello dashboard"})
        await ws_until(dash, lambda e: e.get("type") == "done", 20, into=seen)
        await ws_until(dash, is_idle, 10, into=seen)
        ev = [e for e in seen if "seq" in e]
        log = d.log_events(SID, top)
        same_events(ev, log[:len(ev)], "dashboard vs log")
        check(len(ev) == len(log), "dashboard saw %d of %d logged events"
              % (len(ev), len(log)))
        check([e["type"] for e in ev][:1] == ["user_message"] and
              of_type(ev, "token") and of_type(ev, "done"),
              "turn events %s" % [short(e) for e in ev])
        m = await next_metrics(dash)
        check_fields(m)
        check(m["turns"] == 1 and m["usage"]["tokens"] > 0 and
              m["agents"][0]["usage"] == m["usage"] and
              m["agents"][0]["status"] == "idle" and
              m["rates"]["eventsPerMinute"] >= len(ev) and
              m["rates"]["thoughtsPerMinute"] == 0 and
              m["lastSeq"] == log[-1]["seq"] and m["status"] == "idle",
              "metrics after the turn: %s" % m)

        # c. the dashboard is read-only
        for msg in WRITES:
            await forbidden(dash, msg, "dashboard")
        await still_open(dash, "dashboard after writes")
        # d. so is an observer stream; a user is not
        for msg in WRITES:
            await forbidden(obs, msg, "observer stream")
        await still_open(obs, "observer stream after writes")
        st, js = post_message(d, SID, {"type": "chat", "message": "x"}, OBS)
        check(st == 403 and err_code(js) == "FORBIDDEN",
              "observer POST -> %s %s" % (st, js))
        check(d.last_seq(SID) == log[-1]["seq"], "a refused write was logged")
        await ws_send(user, {"v": 1, "type": "chat", "sessionId": SID,
                             "id": "u-2", "message": "second"})
        await ws_until(user, lambda e: e.get("type") == "done", 20)
        await ws_until(user, is_idle, 10)

        # e. resume
        full = d.log_events(SID)
        k = full[len(full) // 2]["seq"]
        await dash.close()
        dash = await open_dash(d, last=k)
        got = []
        while len([e for e in got if "seq" in e]) < len(full) - k:
            got.append(await ws_recv(dash))
        rep = [e for e in got if "seq" in e]
        same_events(rep, [e for e in full if e["seq"] > k], "resume replay")
        m = await next_metrics(dash, into=got)
        check_fields(m)
        await dash.close()
        dash = await open_dash(d)
        await ws_send(dash, {"v": 1, "type": "resume", "sessionId": SID,
                             "lastSeq": k})
        got = []
        while len([e for e in got if "seq" in e]) < len(full) - k:
            got.append(await ws_recv(dash))
        same_events([e for e in got if "seq" in e],
                    [e for e in full if e["seq"] > k], "resume message")
        await dash.close()
        dash = await open_dash(d, last=0)
        got = []
        while len([e for e in got if "seq" in e]) < len(full):
            got.append(await ws_recv(dash))
        same_events([e for e in got if "seq" in e], full, "lastSeq=0 replay")

        # f. the last dashboard leaves, the next one starts counting anew
        deadline = time.time() + 5
        while True:
            m = await next_metrics(dash)
            if m["rates"]["windowMs"] >= 1000:
                break
            check(time.time() < deadline, "windowMs %s" % m["rates"])
        await dash.close()
        await asyncio.sleep(0.3)
        dash = await open_dash(d)
        m = await next_metrics(dash)
        check(m["rates"]["windowMs"] < 800 and
              m["rates"]["eventsPerMinute"] == 0,
              "a new dashboard found old counts: %s" % m["rates"])
        for w in (dash, user, obs):
            await w.close()


run_test("dashboard", test)
