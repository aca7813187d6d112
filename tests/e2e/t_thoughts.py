#!/usr/bin/python3
# Thoughts end to end (thought_share, the "thought" event, the DAG, the
# visibility modes, thought-rate), on the local store or (E2E_STORE=redis)
# on Redis:
#  a. for each of config.thoughtVisibility all, selective and summary: two
#     external agents (a1, a2) share a thread (inResponseTo, references
#     to earlier thoughts and to a file, a private one, a synthesis, one
#     without an id that the server names); an unknown reference, a
#     duplicate id, a self-reference, a bad category, a user's and an
#     observer's thought_share are refused and change nothing;
#  b. what each recipient (agent a1, agent a2, an observer, a user) gets
#     of each thought -- in full, reduced (summary) or as a "filtered"
#     event of the same seq -- is exactly the documented rule, live, in a
#     replay (?lastSeq=0), over SSE (/events) and through /log, with seqs
#     contiguous from 1 on every channel; an admin gets everything;
#  c. GET /sessions/{id}/thoughts: nodes and edges, ?agentId= and
#     ?category= filters, and the requester's visibility;
#  d. thought-rate (set to 5): throttle_warning at the 4th and 5th
#     thought, RATE_LIMITED at the 6th, on the agent's own stream;
#  e. every worker SIGKILLed: the thoughts are still known (a reply to
#     one is accepted, its id still taken, the graph whole).
import sys, os, socket
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

RATE = 5
AGENTS = ("a1", "a2")


def stream_path(sid, who, last=None):
    q = {"a1": "role=agent&agentId=a1", "a2": "role=agent&agentId=a2",
         "observer": "role=observer", "user": "role=user",
         "admin": "role=admin"}[who]
    if last is not None:
        q += "&lastSeq=%d" % last
    return "/sessions/%s/stream?%s" % (sid, q)


async def open_ws(d, sid, who, last=None):
    ws = await ws_connect(d.url(stream_path(sid, who, last)))
    st = await ws_recv(ws)
    check(st["type"] == "session_state", "%s: first event %s" % (who, st))
    return ws


async def share(ws, sid, mid, thought, into=None):
    """Sends one thought_share; returns its ack or error and what came
    before it (the logged events and throttle warnings between, also
    added to into)."""
    await ws_send(ws, {"v": 1, "type": "thought_share", "sessionId": sid,
                       "id": mid, "thought": thought})
    got = await ws_until(ws, lambda e: e.get("id") == mid and
                         e.get("type") in ("ack", "error"))
    if into is not None:
        into += got
    return got[-1], got


def rule(mode, who, author, category, shared):
    """The documented per-recipient rule: full, reduced or hidden."""
    if who == "admin" or who == author:
        return "full"
    if mode == "all":
        return "full"
    if not shared:
        return "hidden"
    if mode == "selective" or category == "synthesis":
        return "full"
    return "reduced"


def check_view(events, mode, who, thoughts, what):
    """events: one channel's logged events; thoughts: seq -> (author,
    category, shared, content).  Each thought seq must come as the rule
    says; the seqs are contiguous from 1."""
    evs = [e for e in events if "seq" in e]
    check_contiguous(evs, 1, "%s %s" % (mode, what))
    by_seq = {e["seq"]: e for e in evs}
    for seq, (author, cat, shared, content) in thoughts.items():
        e = by_seq.get(seq)
        check(e is not None, "%s %s: seq %d missing" % (mode, what, seq))
        want = rule(mode, who, author, cat, shared)
        if want == "hidden":
            check(e["type"] == "filtered" and "thought" not in e and
                  "agentId" not in e,
                  "%s %s: seq %d should be filtered, got %s"
                  % (mode, what, seq, e))
            continue
        check(e["type"] == "thought" and e.get("agentId") == author,
              "%s %s: seq %d should be a thought of %s, got %s"
              % (mode, what, seq, author, e))
        t = e["thought"]
        if want == "full":
            check(t.get("content") == content and "redacted" not in t,
                  "%s %s: seq %d should be in full, got %s"
                  % (mode, what, seq, t))
        else:
            check("content" not in t and "references" not in t and
                  "confidence" not in t and t.get("redacted") is True and
                  t.get("category") == cat,
                  "%s %s: seq %d should be reduced, got %s"
                  % (mode, what, seq, t))
    for e in evs:
        if e["seq"] not in thoughts:
            check(e["type"] not in ("thought", "filtered"),
                  "%s %s: unexpected %s" % (mode, what, e))


def sse_events(d, path, until_seq, timeout=15):
    """The events of an SSE stream until one with id until_seq."""
    s = socket.create_connection((d.host, d.port), timeout=timeout)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream"
               "\r\n\r\n" % (path, d.host, d.port)).encode())
    buf = b""
    deadline = time.time() + timeout
    try:
        while ("\nid: %d\n" % until_seq).encode() not in buf:
            check(time.time() < deadline, "SSE %s: no id %d in %r"
                  % (path, until_seq, buf[-300:]))
            b = s.recv(65536)
            check(b, "SSE %s closed early: %r" % (path, buf[-300:]))
            buf += b
        # the rest of that event
        while not buf.endswith(b"\n\n"):
            b = s.recv(65536)
            if not b:
                break
            buf += b
    finally:
        s.close()
    out = []
    for line in buf.decode().split("\n"):
        if line.startswith("data: "):
            out.append(json.loads(line[6:]))
    return out


def graph(d, sid, query=""):
    st, js = d.http_json("GET", "/sessions/%s/thoughts%s" % (sid, query))
    check(st == 200 and isinstance(js, dict), "GET thoughts%s -> %s %s"
          % (query, st, js))
    return js


def edges_of(js):
    return sorted((e["from"], e["to"], e["kind"]) for e in js["edges"])


async def mode_case(d, mode):
    sid = "th-" + mode
    st, js = d.http_json("POST", "/sessions", {
        "sessionId": sid, "config": {"thoughtVisibility": mode}})
    check(st == 201, "POST /sessions %s -> %s %s" % (mode, st, js))
    live = {}
    got = {}
    for who in ("a1", "a2", "observer", "user"):
        live[who] = await open_ws(d, sid, who, 0)
        got[who] = []
    a1, a2 = live["a1"], live["a2"]
    thoughts = {}   # seq -> (author, category, shared, content)

    async def ok(ws, author, mid, t):
        r, _ = await share(ws, sid, mid, t, got[author])
        check(r["type"] == "ack" and r.get("eventSeq"),
              "%s: %s share %s -> %s" % (mode, author, mid, r))
        thoughts[r["eventSeq"]] = (author, t["category"],
                                   t.get("shared", True), t["content"])
        return r["eventSeq"]

    async def refused(ws, who, mid, t, code, what):
        r, _ = await share(ws, sid, mid, t, got[who])
        check(r["type"] == "error" and r["code"] == code,
              "%s: %s -> %s (wanted %s)" % (mode, what, r, code))

    base = {"confidence": 0.5, "references": [], "actionable": False}
    await ok(a1, "a1", "m1", dict(base, thoughtId="th_obs1",
             category="observation", content="retry runs 3x"))
    await ok(a2, "a2", "m2", dict(base, thoughtId="th_ana2",
             category="analysis", content="race in webhook",
             inResponseTo="th_obs1",
             references=["th_obs1", "src/pay/retry.c:245"]))
    await ok(a1, "a1", "m3", dict(base, thoughtId="th_hyp3",
             category="hypothesis", content="mutex too narrow",
             inResponseTo="th_ana2", shared=False, confidence=0.9))
    await ok(a2, "a2", "m4", dict(base, thoughtId="th_syn4",
             category="synthesis", content="extend the mutex",
             inResponseTo="th_ana2", references=["th_obs1", "th_ana2"],
             actionable=True))
    s5 = await ok(a1, "a1", "m5", dict(base, category="plan",
                  content="patch line 247", inResponseTo="th_syn4"))
    last = d.last_seq(sid)
    # refused: nothing logged
    await refused(a1, "a1", "e1", dict(base, category="analysis", content="x",
                  inResponseTo="th_nope"), "BAD_REQUEST", "unknown parent")
    await refused(a1, "a1", "e2", dict(base, category="analysis", content="x",
                  references=["th_nope"]), "BAD_REQUEST",
                  "unknown reference")
    await refused(a2, "a2", "e3", dict(base, thoughtId="th_obs1",
                  category="analysis", content="x"), "BAD_REQUEST",
                  "duplicate id")
    await refused(a2, "a2", "e4", dict(base, thoughtId="th_self",
                  category="analysis", content="x",
                  inResponseTo="th_self"), "BAD_REQUEST", "self reply")
    await refused(a2, "a2", "e5", dict(base, category="musing", content="x"),
                  "BAD_REQUEST", "bad category")
    await refused(a2, "a2", "e6", dict(base, category="plan", content="x",
                  confidence=1.5), "BAD_REQUEST", "confidence 1.5")
    await refused(live["user"], "user", "e7", dict(base, category="plan",
                  content="x"), "FORBIDDEN", "a user's thought_share")
    await refused(live["observer"], "observer", "e8", dict(base, category="plan",
                  content="x"), "FORBIDDEN", "an observer's thought_share")
    check(d.last_seq(sid) == last, "%s: refused shares logged something "
          "(lastSeq %d -> %d)" % (mode, last, d.last_seq(sid)))
    # the server named the plan
    full = {e["seq"]: e for e in d.log_events(sid)}
    pid = full[s5]["thought"]["thoughtId"]
    check(pid.startswith("th_") and len(pid) > 3, "%s: assigned id %r"
          % (mode, pid))
    # b. live, for everyone
    for who, ws in live.items():
        if not any(e.get("seq") == last for e in got[who]):
            await ws_until(ws, lambda e: e.get("seq") == last,
                           into=got[who])
        check_view(got[who], mode, who, thoughts, "%s live" % who)
        await ws.close()
    # replay, SSE and /log for each recipient
    for who in ("a1", "a2", "observer", "user"):
        ws = await open_ws(d, sid, who, 0)
        ev = await ws_until(ws, lambda e: e.get("seq") == last)
        await ws.close()
        check_view(ev, mode, who, thoughts, "%s replay" % who)
        q = stream_path(sid, who).split("?", 1)[1]
        ev = sse_events(d, "/sessions/%s/events?%s&lastSeq=0" % (sid, q),
                        last)
        check_view(ev, mode, who, thoughts, "%s SSE" % who)
        st, ev = d.http_json("GET", "/sessions/%s/log?%s&after=0&limit=500"
                             % (sid, q))
        check(st == 200, "%s: /log as %s -> %s" % (mode, who, st))
        check_view(ev, mode, who, thoughts, "%s /log" % who)
    check_view(list(full.values()), mode, "admin", thoughts, "admin /log")
    # c. the graph
    g = graph(d, sid)
    check(len(g["nodes"]) == 5, "%s: admin graph nodes %s" % (mode, g))
    want = sorted([("th_ana2", "th_obs1", "inResponseTo"),
                   ("th_ana2", "th_obs1", "reference"),
                   ("th_hyp3", "th_ana2", "inResponseTo"),
                   ("th_syn4", "th_ana2", "inResponseTo"),
                   ("th_syn4", "th_obs1", "reference"),
                   ("th_syn4", "th_ana2", "reference"),
                   (pid, "th_syn4", "inResponseTo")])
    check(edges_of(g) == want, "%s: edges %s, wanted %s"
          % (mode, edges_of(g), want))
    g = graph(d, sid, "?agentId=a1")
    check(sorted(n["thoughtId"] for n in g["nodes"]) ==
          sorted(["th_obs1", "th_hyp3", pid]) and g["edges"] == [],
          "%s: ?agentId=a1 -> %s" % (mode, g))
    g = graph(d, sid, "?category=synthesis")
    check([n["thoughtId"] for n in g["nodes"]] == ["th_syn4"] and
          g["nodes"][0]["content"] == "extend the mutex",
          "%s: ?category=synthesis -> %s" % (mode, g))
    by_id = {"th_obs1": "observation", "th_ana2": "analysis",
             "th_hyp3": "hypothesis", "th_syn4": "synthesis", pid: "plan"}
    author = {"th_obs1": "a1", "th_ana2": "a2", "th_hyp3": "a1",
              "th_syn4": "a2", pid: "a1"}
    for who, q in (("observer", "?role=observer"),
                   ("a2", "?role=agent&agentId=a2")):
        g = graph(d, sid, q)
        seen = {n["thoughtId"]: n for n in g["nodes"]}
        for tid, cat in by_id.items():
            w = rule(mode, who, author[tid], cat, tid != "th_hyp3")
            n = seen.get(tid)
            check((n is None) == (w == "hidden") and
                  (n is None or ("content" in n) == (w == "full")),
                  "%s: thoughts as %s: %s is %s, wanted %s"
                  % (mode, who, tid, n, w))
        for e in g["edges"]:
            check(e["from"] in seen and e["to"] in seen,
                  "%s: an edge to a thought %s may not see: %s"
                  % (mode, who, e))
    return sid, pid


async def rate_case(d):
    sid = "th-rate"
    st, _ = d.http_json("POST", "/sessions", {"sessionId": sid})
    check(st == 201, "POST /sessions th-rate -> %s" % st)
    ws = await open_ws(d, sid, "a1", 0)
    warned = []
    for i in range(RATE + 1):
        r, got = await share(ws, sid, "r%d" % i, {
            "content": "step %d" % i, "category": "plan",
            "confidence": 0.1, "references": [], "actionable": False})
        w = [e for e in got if e.get("type") == "throttle_warning"]
        if i < RATE:
            check(r["type"] == "ack", "rate: share %d -> %s" % (i, r))
        else:
            check(r["type"] == "error" and r["code"] == "RATE_LIMITED",
                  "rate: share %d past thought-rate -> %s" % (i, r))
        for e in w:
            check(e["agentId"] == "a1" and e["limit"] == RATE and
                  e["windowMs"] == 60000 and "seq" not in e,
                  "rate: throttle_warning %s" % e)
        warned.append(len(w))
    # the warnings may trail their ack: collect what is left
    await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid, "id": "p"})
    rest = await ws_until(ws, lambda e: e.get("type") == "pong")
    extra = len([e for e in rest if e.get("type") == "throttle_warning"])
    check(warned[:3] == [0, 0, 0] and sum(warned) + extra == 2,
          "rate: throttle_warning after shares %s (+%d later), wanted one "
          "each at 4 and 5" % (warned, extra))
    # another agent has its own window
    ws2 = await open_ws(d, sid, "a2", 0)
    r, _ = await share(ws2, sid, "o1", {"content": "mine",
                       "category": "plan", "confidence": 0.1})
    check(r["type"] == "ack", "rate: a2's first share -> %s" % r)
    await ws.close()
    await ws2.close()


async def kill_case(d, sid, pid):
    before = graph(d, sid)
    d.kill_workers()
    after = graph(d, sid)
    check(after == before, "graph after the kill differs:\n%s\n%s"
          % (before, after))
    ws = await open_ws(d, sid, "a2")
    r, _ = await share(ws, sid, "k1", {"thoughtId": "th_obs1",
                       "content": "again", "category": "plan",
                       "confidence": 0.3})
    check(r["type"] == "error" and r["code"] == "BAD_REQUEST",
          "after the kill, a taken id -> %s" % r)
    r, _ = await share(ws, sid, "k2", {"content": "after the kill",
                       "category": "critique", "confidence": 0.3,
                       "inResponseTo": pid, "references": ["th_hyp3"]})
    check(r["type"] == "ack", "after the kill, a reply -> %s" % r)
    r, _ = await share(ws, sid, "k3", {"content": "x", "category": "plan",
                       "confidence": 0.3, "inResponseTo": "th_gone"})
    check(r["type"] == "error" and r["code"] == "BAD_REQUEST",
          "after the kill, an unknown parent -> %s" % r)
    await ws.close()
    g = graph(d, sid)
    check(len(g["nodes"]) == 6 and (g["nodes"][-1]["inResponseTo"] == pid),
          "graph after the kill and a reply: %s" % g["nodes"][-1:])
    check_contiguous(d.log_events(sid), 1, "log after the kill")


def bad_config(d):
    st, js = d.http_json("POST", "/sessions", {
        "sessionId": "th-bad", "config": {"thoughtVisibility": "some"}})
    check(st == 400 and err_code(js) == "BAD_REQUEST" and
          "thoughtVisibility" in json.dumps(js),
          "POST /sessions with a bad thoughtVisibility -> %s %s" % (st, js))


async def main():
    d = Daemon(extra="thought-rate %d\n" % RATE)
    with with_daemon(d):
        bad_config(d)
        ids = {}
        for mode in ("all", "selective", "summary"):
            ids[mode] = await mode_case(d, mode)
        await rate_case(d)
        await kill_case(d, *ids["summary"])


run_test("thoughts", main)
