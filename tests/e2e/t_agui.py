#!/usr/bin/python3
# AG-UI (POST /api/agui, GET /api/agui/{threadId}/stream) end to end with
# AG-UI's own client library, @ag-ui/client's HttpAgent (its pipeline
# validates every event and verifies their order), from
# tests/e2e/js/agui_client.mjs, on the local store or Redis
# (E2E_STORE=redis):
#  a. a run streams a reply: RUN_STARTED ... RUN_FINISHED, the agent's
#     assistant text equals the tokens in /log, messageId m-SEQ;
#  b. an approval: the run ends with RUN_FINISHED outcome interrupt
#     (id = toolCallId, reason tool_approval, expiresAt = asked +
#     approval-timeout, responseSchema); the next run's resume approves,
#     the tool runs once and the reply completes; answering again is
#     acknowledged by Parley and, the turn being over, refused with 409;
#  c. a client tool: tools become the session's "agui" client tools, the
#     run ends with pendingToolCallIds, the client sees its own tool
#     name; the next run's tool message is the call's answer and the
#     turn goes on to its reply; read-only by its metadata.annotations it
#     is low risk; without, high: an interrupt, resumed, then the same
#     round trip;
#  d. the event order: verifyEvents passes the run as it came and fails
#     it with TEXT_MESSAGE_START left out; an HttpAgent against a fixture
#     server that sends a wrong order fails;
#  e. a client cut mid-reply comes back with the eventsource package and
#     Last-Event-ID on GET .../stream: with the first part, exactly the
#     run's blocks (same ids SEQ:K, no duplicate, no gap, same text as
#     /log); without an id it gets the run from RUN_STARTED (an id too
#     long to read is a 400, not that); after the turn, 204; a client
#     that has the whole turn comes back while it runs and its stream
#     ends with the turn;
#  f. bad input is refused with 400 saying what to fix and creates no
#     session (also what only the session checked: repeated tools, a
#     long description, a kg: thread); a bad thread in GET's path is a
#     400; an observer's run is refused with 403;
#  g. two hosts on one Redis: runs POSTed to the host that only follows
#     the session (the chat found by its id once the owner logs it; the
#     tool message that continues the turn) stream the turn its owner
#     runs;
#  h. tools when the host has an mcp-server named "agui" are a 400 that
#     creates nothing; a POST that answers a waiting approval and something that waits
#     for nothing (an interrupt, a tool call) is refused whole (404) and
#     applies nothing; the good answer alone continues the run, whose
#     runId is the first run's and the answer's seq.
import sys, os, subprocess, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import Cluster, TOKEN

ADMIN, USER, OBS = "adm-secret", "usr-secret", "obs-secret"
E2E = os.path.dirname(os.path.abspath(__file__))
ECHO = "everything__echo"
REPLY = ("Parley speaks AG-UI: every event is logged once, numbered, and "
         "a client that loses its connection resumes exactly where it "
         "stopped, with nothing twice and nothing missing.")


def script_tool(calls, then):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


def node(d, token, thread, step):
    p = subprocess.run(["node", os.path.join(E2E, "js", "agui_client.mjs"),
                        str(d.port), token, thread, step],
                       capture_output=True, text=True, timeout=90, cwd=E2E)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    try:
        out = json.loads(line)
    except ValueError:
        raise Fail("agui_client %s: no JSON (rc %d): %r %r" % (
            step, p.returncode, p.stdout[-500:], p.stderr[-1500:]))
    check(out.get("end") == "ok", "agui_client %s: %s; stderr %r" % (
        step, out.get("error") or out.get("end"), p.stderr[-1500:]))
    return out


def log_text(d, sid):
    return "".join(e.get("content", "") for e in d.log_events(sid)
                   if e["type"] == "token")


def types(events):
    return [e["type"] for e in events]


def check_run(events, what, outcome="success"):
    t = types(events)
    check(t[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and
          t[-1] == "RUN_FINISHED", "%s: run shape %s" % (what, t))
    check(t.count("RUN_STARTED") == 1 and t.count("RUN_FINISHED") == 1,
          "%s: one run %s" % (what, t))
    got = (events[-1].get("outcome") or {}).get("type", "success")
    check(got == outcome, "%s: outcome %s, want %s" % (what, got, outcome))
    for e in events:
        check(isinstance(e.get("timestamp"), int) or
              isinstance(e.get("timestamp"), float),
              "%s: %s without timestamp" % (what, e["type"]))


def part_a(d):
    out = node(d, ADMIN, "ag-a", "reply")
    ev = out["events"]
    check_run(ev, "reply")
    check(ev[0]["threadId"] == "ag-a" and ev[0]["runId"] == "run-reply-1",
          "RUN_STARTED %s" % ev[0])
    logged = log_text(d, "ag-a")
    check(out["text"] == logged == REPLY, "agent text %r, /log %r" % (
        out["text"], logged))
    um = [e for e in d.log_events("ag-a") if e["type"] == "user_message"]
    check(len(um) == 1 and um[0]["id"] == "agui:run-reply-1" and
          um[0]["message"] == "hello", "user_message %s" % um)
    starts = [e for e in ev if e["type"] == "TEXT_MESSAGE_START"]
    check(starts and starts[0]["messageId"] == "m-%d" % um[0]["seq"],
          "messageId %s" % starts)
    check("STEP_STARTED" in types(ev) and "STEP_FINISHED" in types(ev),
          "steps %s" % types(ev))
    usage = ev[-1].get("usage")
    check(isinstance(usage, list) and usage[0]["outputTokens"] > 0,
          "usage %s" % usage)
    msgs = [m["role"] for m in out["messages"]]
    check(msgs == ["user", "assistant"], "messages %s" % msgs)


def part_b(d):
    out = node(d, USER, "ag-b", "approve")
    ev1 = out["run1"]["events"]
    check_run(ev1, "approval run", "interrupt")
    ints = ev1[-1]["outcome"]["interrupts"]
    reqs = [e for e in d.log_events("ag-b")
            if e["type"] == "tool_approve_request"]
    check(len(reqs) == 1 and len(ints) == 1, "interrupts %s, requests %s"
          % (ints, reqs))
    i, r = ints[0], reqs[0]
    check(i["id"] == r["toolCallId"] == i["toolCallId"] and
          i["reason"] == "tool_approval" and i["message"] == r["summary"],
          "interrupt %s for %s" % (i, r))
    asked = agui_ms(r["ts"])
    check(agui_ms(i["expiresAt"]) == asked + 3600 * 1000,
          "expiresAt %s, asked %s" % (i["expiresAt"], r["ts"]))
    check(i["responseSchema"]["properties"]["approved"]["type"] ==
          "boolean", "responseSchema %s" % i["responseSchema"])
    check(out["run1"]["pendingInterrupts"][0]["id"] == i["id"],
          "the agent's pendingInterrupts %s" % out["run1"]["pendingInterrupts"])
    starts = [e for e in ev1 if e["type"] == "TOOL_CALL_START"]
    check([s["toolCallName"] for s in starts] == ["everything__get-sum",
                                                  ECHO],
          "tool calls %s" % starts)
    ev2 = out["run2"]["events"]
    check_run(ev2, "resumed run")
    # The continued run's id is the log's: the chat's runId and the seq
    # of the answer it starts at (the client's "run-approve-2" is not).
    ans = [e for e in d.log_events("ag-b") if e["type"] == "audit_entry"
           and e.get("decision") == "approved"]
    check(ev2[0]["runId"] == ev2[-1]["runId"] == "run-approve-1.%d"
          % ans[0]["seq"], "run 2 %s, answer %s" % (ev2[0], ans))
    res = [e for e in ev2 if e["type"] == "TOOL_CALL_RESULT"]
    check(any("approved-echo" in e["content"] for e in res),
          "echo's result %s" % res)
    check("TOOL_CALL_START" not in types(ev2), "run 2 repeats calls %s"
          % types(ev2))
    logged = d.log_events("ag-b")
    check(sum(1 for e in logged if e["type"] == "tool_start" and
              e["tool"] == ECHO) == 1, "echo ran more than once")
    check(sum(1 for e in logged if e["type"] == "done") == 1, "one done")
    check(out["text"] == log_text(d, "ag-b") and "approved-echo" in
          out["text"], "text %r, /log %r" % (out["text"],
                                             log_text(d, "ag-b")))
    check(out["again"] == "error: 409", "answered again: %s" % out["again"])


def agui_ms(iso):
    import datetime
    dt = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(dt.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
               + 0.5)


def part_c(d, step="client", sid="ag-c", token=USER):
    out = node(d, token, sid, step)
    if step == "client_approve":
        ev0 = out["asked"]["events"]
        check_run(ev0, "asked run", "interrupt")
        check(out["asked"]["pendingInterrupts"][0]["toolCallId"] ==
              "call_1", "interrupt %s" % out["asked"]["pendingInterrupts"])
        check([e["toolCallName"] for e in ev0
               if e["type"] == "TOOL_CALL_START"] == ["lookup"],
              "asked %s" % types(ev0))
    ev1 = out["run1"]["events"]
    check_run(ev1, "client tool run")
    pend = ev1[-1]["outcome"].get("pendingToolCallIds")
    check(pend == ["call_1"], "pendingToolCallIds %s" % pend)
    start = [e for e in ev1 if e["type"] == "TOOL_CALL_START"]
    if step == "client_approve":
        check(start == [], "the call starts again: %s" % types(ev1))
    else:
        check(len(start) == 1 and start[0]["toolCallName"] == "lookup",
              "the client's own tool name %s" % start)
    check(out["calls"][0]["function"]["arguments"] == '{"q":"parley"}',
          "args %s" % out["calls"])
    logged = d.log_events(sid)
    ct = [e for e in logged if e["type"] == "client_tools"]
    check(ct and ct[0]["tools"][0]["server"] == "agui" and
          ct[0]["tools"][0]["name"] == "lookup", "client_tools %s" % ct)
    ev2 = out["run2"]["events"]
    check_run(ev2, "answered run")
    res = [e for e in ev2 if e["type"] == "TOOL_CALL_RESULT"]
    check(len(res) == 1 and res[0]["content"].startswith("RESULT-42"),
          "result %s" % res)
    tr = [e for e in logged if e["type"] == "tool_result"]
    check(len(tr) == 1 and tr[0]["result"].startswith("RESULT-42"),
          "tool_result %s" % tr)
    check("RESULT-42" in out["text"] and out["text"] == log_text(d, sid),
          "text %r" % out["text"])
    risk = [e["risk"] for e in logged if e["type"] == "tool_start"]
    check(risk == (["high"] if step == "client_approve" else ["low"]),
          "risk %s" % risk)


def part_d(d):
    out = node(d, ADMIN, "ag-d", "verify")
    check(out["asIs"] == "ok", "verifyEvents on the run: %s" % out["asIs"])
    check(out["broken"].startswith("error:") and
          "TEXT_MESSAGE_START" in out["broken"],
          "verifyEvents without TEXT_MESSAGE_START: %s" % out["broken"])
    check(out["fixture"].startswith("error:"),
          "HttpAgent took a wrong order: %s" % out["fixture"])


def ids_of(blocks):
    return [b["id"] for b in blocks]


def key(i):
    s, k = i.split(":")
    return (int(s), int(k))


def part_e(d):
    out = node(d, ADMIN, "ag-e", "resume")
    first, rest = out["first"], out["follow"]["got"]
    ref = out["replay"]
    check(out["follow"]["errors"][-1] == 204,
          "the follower was not told 204: %s" % out["follow"]["errors"])
    check(len(first) >= 4 and rest, "cut %d, then %d" % (len(first),
                                                        len(rest)))
    both = ids_of(first) + ids_of(rest)
    check(both == ids_of(ref), "resumed ids %s\nreference %s" % (both,
                                                                ids_of(ref)))
    check(len(set(both)) == len(both) and both == sorted(both, key=key),
          "ids repeat or go back: %s" % both)
    check([b["event"] for b in first + rest] == [b["event"] for b in ref],
          "resumed events differ from the run's")
    text = "".join(b["event"].get("delta", "") for b in first + rest
                   if b["event"]["type"] == "TEXT_MESSAGE_CONTENT")
    check(text == log_text(d, "ag-e") == REPLY, "text %r" % text)
    whole = out["whole"]["got"]
    check(whole and whole[0]["event"]["type"] == "RUN_STARTED" and
          ids_of(whole) == ids_of(ref),
          "without Last-Event-ID: %s" % ids_of(whole))
    check(out["after"]["got"] == [] and out["after"]["errors"] == [204],
          "after the turn: %s" % out["after"])
    # The id: extension also takes ?lastEventId=; a bad one is a 400.
    st, _, body = d.http("GET", "/api/agui/ag-e/stream?lastEventId=5:1")
    check(st == 204, "no run: %d %r" % (st, body))
    st, _, body = d.http("GET", "/api/agui/ag-e/stream?lastEventId=x")
    check(st == 400 and b"SEQ:K" in body, "bad id: %d %r" % (st, body))
    # One too long to read is a 400 too, not the whole turn again.
    st, _, body = d.http("GET", "/api/agui/ag-e/stream", headers={
        "Last-Event-ID": "0" * 70 + "3:2"})
    check(st == 400 and b"too long" in body, "long id: %d %r" % (st, body))
    # A client that has the whole turn (an id past its last chunk) comes
    # back while it runs: its stream ends with the turn.
    post = threading.Thread(target=d.http, args=(
        "POST", "/api/agui", {"threadId": "ag-e2", "runId": "r1",
                              "messages": [{"id": "u", "role": "user",
                                            "content": "hi"}]}),
        kwargs={"timeout": 30})
    post.start()
    deadline = time.time() + 10
    while True:
        t0 = time.time()
        st, _, body = d.http("GET", "/api/agui/ag-e2/stream", headers={
            "Last-Event-ID": "18446744073709551615:1"}, timeout=20)
        if st == 200 or time.time() > deadline:
            break
        time.sleep(0.05)
    took = time.time() - t0
    post.join()
    check(st == 200 and b"data:" not in body and took < 15,
          "past the end: %d after %.1fs %r" % (st, took, body[:200]))


def part_f(d):
    good = {"threadId": "ag-f", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "hi"}]}
    bad = [
        ("not json", "{", "JSON"),
        ("no threadId", {"runId": "r", "messages": []}, "threadId"),
        ("no runId", {"threadId": "ag-f", "messages": []}, "runId"),
        ("messages", dict(good, messages="hi"), "messages"),
        ("last assistant", dict(good, messages=[
            {"id": "a", "role": "assistant", "content": "x"}]), "user"),
        ("empty", dict(good, messages=[{"id": "u", "role": "user",
                                         "content": ""}]), "content"),
        ("tool name", dict(good, tools=[{"name": "a b",
                                          "description": "x"}]), "name"),
        ("resume", dict(good, resume=[{"interruptId": "call_1",
                                        "status": "resolved"}]), "approved"),
    ]
    for what, body, word in bad:
        st, _, data = d.http("POST", "/api/agui", body,
                             {"Content-Type": "application/json"})
        check(st == 400 and word.lower() in data.decode().lower(),
              "%s -> %d %r" % (what, st, data[:300]))
    st, js = d.http_json("GET", "/sessions/ag-f")
    check(st == 404, "a bad body created the session: %d %s" % (st, js))
    # What the session would refuse is refused before it is made.
    for what, sid, extra, word in [
            ("repeated tool", "ag-f-dup", {"tools": [
                {"name": "a", "parameters": {"type": "object"}},
                {"name": "a"}]}, "repeats"),
            ("long description", "ag-f-big", {"tools": [
                {"name": "a", "description": "x" * 100000}]},
             "description"),
            ("knowledge session", "kg:agf", {}, "knowledge")]:
        body = dict(good, threadId=sid, **extra)
        st, _, data = d.http("POST", "/api/agui", body)
        check(st == 400 and word in data.decode(), "%s -> %d %r"
              % (what, st, data[:300]))
        st, js = d.http_json("GET", "/sessions/" + sid)
        check(st == 404, "%s created the session: %d %s" % (what, st, js))
    st, _, data = d.http("GET", "/api/agui/.x/stream")
    check(st == 400 and b"threadId" in data, "bad thread -> %d %r"
          % (st, data[:300]))
    out = node(d, OBS, "ag-f", "observer")
    check(out["result"].startswith("error: 403"), "observer: %s"
          % out["result"])
    st, js = d.http_json("GET", "/sessions/ag-f")
    check(st == 404, "an observer created the session: %d %s" % (st, js))
    # Answers for a run that waits for none: Parley's NOT_FOUND.
    body = dict(good, threadId="ag-a", runId="r9", resume=[
        {"interruptId": "call_9", "status": "cancelled"}])
    st, _, data = d.http("POST", "/api/agui", body)
    check(st == 404 and b"call_9" in data, "unknown interrupt -> %d %r"
          % (st, data[:300]))


def sse_events(data):
    return [json.loads(line[6:]) for line in data.decode().split("\n")
            if line.startswith("data: ")]


def part_h(d):
    """A POST whose answers are not all good applies none of them."""
    st, _, data = d.http("POST", "/api/agui", {
        "threadId": "ag-h-srv", "runId": "s1", "messages": [
            {"id": "u", "role": "user", "content": "go"}],
        "tools": [{"name": "lookup"}]})
    check(st == 400 and b"mcp-server named 'agui'" in data,
          "h: tools under a configured server -> %d %r" % (st, data[:300]))
    st, js = d.http_json("GET", "/sessions/ag-h-srv")
    check(st == 404, "h: the clash created the session: %d %s" % (st, js))
    sid, user = "ag-h", [{"id": "u", "role": "user", "content": "go"}]
    st, _, data = d.http("POST", "/api/agui", {
        "threadId": sid, "runId": "h1", "messages": user}, timeout=30)
    ev = sse_events(data)
    check(st == 200 and ev[-1]["type"] == "RUN_FINISHED" and
          ev[-1]["outcome"]["type"] == "interrupt", "h: %d %s" % (st,
                                                                 types(ev)))
    call = ev[-1]["outcome"]["interrupts"][0]["id"]
    ok = {"interruptId": call, "status": "resolved",
          "payload": {"approved": True}}
    for what, body, word in [
            ("unknown interrupt", {"resume": [ok, dict(
                ok, interruptId="call_zz")]}, b"call_zz"),
            ("unknown tool call", {"resume": [ok], "messages": user + [
                {"id": "t", "role": "tool", "toolCallId": "call_yy",
                 "content": "x"}]}, b"call_yy")]:
        req = {"threadId": sid, "runId": "h2", "messages": user}
        req.update(body)
        st, _, data = d.http("POST", "/api/agui", req, timeout=30)
        check(st == 404 and word in data and b"nothing was applied" in
              data, "h: %s -> %d %r" % (what, st, data[:300]))
        check(not [e for e in d.log_events(sid) if e["type"] ==
                   "audit_entry" and e.get("toolCallId") == call],
              "h: %s applied the good answer" % what)
    st, _, data = d.http("POST", "/api/agui", {
        "threadId": sid, "runId": "h3", "messages": user, "resume": [ok]},
        timeout=30)
    ev = sse_events(data)
    ans = [e for e in d.log_events(sid) if e["type"] == "audit_entry" and
           e.get("toolCallId") == call]
    check(st == 200 and len(ans) == 1 and ev[-1]["type"] == "RUN_FINISHED"
          and ev[0]["runId"] == "h1.%d" % ans[0]["seq"],
          "h: the good answer alone -> %d %s %s" % (st, ev[:1], ans))


async def part_g(tool):
    with Cluster(2, lease="2s", netns=False, workers=1, default="p",
                 providers=provider_block("p", tool, chunk=16)) as c:
        h0, h1 = c.hosts
        sid = "ag-mh"
        st, js = h0.http_json("POST", "/sessions", {"sessionId": sid})
        check(st == 201, "g: POST /sessions on host 0 -> %s %s" % (st, js))
        # A stream on host 0 keeps the session there.
        ws = await ws_connect(h0.url("/sessions/%s/stream" % sid))
        await ws_recv(ws)
        check(h1.host == "127.0.0.1", "g: host 1 on %s" % h1.host)
        part_c(h1, "client", sid, TOKEN)
        check("turn m-" not in h1.log_text(), "g: the follower ran it")
        check("turn m-" in h0.log_text(), "g: the owner did not run it")
        await ws.close()


def daemon(extra, reply, delay="2ms", chunk=16):
    tokens = "token %s role user\ntoken %s role observer\n" % (USER, OBS)
    return Daemon(extra=extra + tokens, default="p", token=ADMIN,
                  providers=provider_block("p", reply, chunk=chunk,
                                           delay=delay))


def main():
    with with_daemon(daemon("", REPLY)) as d:
        for p in (part_a, part_d, part_f):
            print("--", p.__name__, flush=True)
            p(d)
    with with_daemon(daemon("", REPLY, delay="40ms", chunk=4)) as d:
        print("-- part_e", flush=True)
        part_e(d)
    tool = script_tool([{"name": "agui__lookup",
                         "arguments": {"q": "parley"}}], "Found:")
    with with_daemon(daemon("", tool)) as d:
        print("-- part_c", flush=True)
        part_c(d)
        part_c(d, "client_approve", "ag-c2")
    print("-- part_g", flush=True)
    asyncio.run(part_g(tool))
    srv = Everything()
    try:
        # An mcp-server named "agui" too: AG-UI clients' tools clash.
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "mcp-server agui {\n    url %s\n    timeout 10s\n}\n"
               "tool-policy %s high\napproval-timeout 1h\n"
               % (srv.url(), srv.url(), ECHO))
        calls = [{"name": "everything__get-sum", "arguments": {"a": 2,
                                                               "b": 3}},
                 {"name": ECHO, "arguments": {"message": "approved-echo"}}]
        with with_daemon(daemon(mcp, script_tool(calls, "Tools:"))) as d:
            wait_tools(d)
            print("-- part_b", flush=True)
            part_b(d)
            print("-- part_h", flush=True)
            part_h(d)
    finally:
        srv.stop()


def wait_tools(d):
    """The MCP server's tools are known once a warm-up turn calls them."""
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        sid = "ag-warm-%d" % n
        st, _, data = d.http("POST", "/api/agui", {
            "threadId": sid, "runId": "w", "messages": [
                {"id": "u", "role": "user", "content": "warm up"}]})
        if b"tool_approval" in data:
            return
        check(time.time() < deadline, "MCP tools never known: %r"
              % data[-300:])
        time.sleep(0.5)


run_test("agui", main)
