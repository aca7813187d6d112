#!/usr/bin/python3
# Tool approvals end to end, with the MCP project's reference server
# (server-everything: get-sum is read-only, so low; so is echo, which a
# `tool-policy` rule makes high) and the script provider's "@tool" fixture as the
# model, on the local store or (E2E_STORE=redis) on Redis:
#  a. SUPERVISED (the default): get-sum runs at once, echo is asked
#     (tool_approve_request with risk, summary, args; agent_state
#     waiting_approval); session_state lists it on every connect; an
#     observer's or agent's answer is FORBIDDEN, an unknown call NOT_FOUND;
#     approve: audit_entry, then tool_start, tool_result, done; a second
#     answer is a duplicate and changes nothing;
#  b. reject: the model reads that the user declined, the turn finishes;
#  c. always: the next turn runs echo without asking;
#  d. cancel while waiting: audit_entry cancelled, done cancelled:true;
#  e. set_autonomy MANUAL asks for the low tool too; two requests answered
#     in reverse order; a bad level, an observer and a level above
#     max-autonomy are refused; POST /sessions with a bad config.autonomy
#     is refused;
#  f. away: request pending, the client leaves, every worker is SIGKILLed,
#     the client comes back: session_state still lists the request, it is
#     not asked again, the approval runs echo exactly once, one done;
#  g. approval-timeout: the call is answered APPROVAL_TIMEOUT;
#  h. PROTOCOL.md's example client completes a turn that needs approval.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN, USER, OBS, AGENT = "adm-secret", "usr-secret", "obs-secret", "agt-secret"
SUM = "everything__get-sum"
ECHO = "everything__echo"


def script_tool(calls, then="Tool results:"):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


CALLS = [{"name": SUM, "arguments": {"a": 2, "b": 3}},
         {"name": ECHO, "arguments": {"message": "approved-echo"}}]


def daemon(mcp, extra="", **kw):
    tokens = ("token %s role user\ntoken %s role observer\n"
              "token %s role agent\n" % (USER, OBS, AGENT))
    return Daemon(extra=mcp + tokens + extra, default="tooly", token=ADMIN,
                  providers=provider_block("tooly", script_tool(CALLS),
                                           chunk=16), **kw)


async def until(ws, what, pred, into, timeout=30):
    try:
        return await ws_until(ws, pred, timeout, into=into)
    except asyncio.TimeoutError:
        raise Fail("%s: not seen in %d s; got %s" % (what, timeout,
                                                     [short(e) for e in into[-12:]]))


async def open_stream(d, sid, last=None, token=None):
    path = "/sessions/%s/stream" % sid
    if last is not None:
        path += "?lastSeq=%d" % last
    if token:
        path += ("&" if "?" in path else "?") + "access_token=" + token
    ws = await ws_connect(d.url(path))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "first event %s" % short(st))
    return ws, st


async def ask(d, sid, ev, message="echo please"):
    """Opens a stream, chats, returns (ws, the tool_approve_request)."""
    ws, _ = await open_stream(d, sid)
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": message})
    await until(ws, "tool_approve_request",
                lambda e: e.get("type") == "tool_approve_request", ev)
    await until(ws, "agent_state waiting_approval",
                lambda e: e.get("type") == "agent_state" and
                e.get("status") == "waiting_approval", ev)
    return ws, of_type(ev, "tool_approve_request")[-1]


def post(d, sid, body, token=ADMIN):
    return post_message(d, sid, body, token)


def answer(d, sid, call, decision, token=ADMIN):
    return post(d, sid, {"type": "tool_approve", "toolCallId": call,
                         "decision": decision}, token)


async def wait_mcp(d, sid_prefix):
    """A first turn under FULL_AUTO, until the worker knows the tools."""
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        sid = "%s-%d" % (sid_prefix, n)
        st, js = d.http_json("POST", "/sessions", {"sessionId": sid,
                             "config": {"autonomy": "FULL_AUTO"}})
        check(st == 201, "POST /sessions FULL_AUTO -> %s %s" % (st, js))
        ev = await chat_turn(d, sid, "warm up")
        errs = [e for e in of_type(ev, "tool_result") if e.get("error")]
        if not errs:
            return
        check(time.time() < deadline, "MCP tools never known: %s" % errs)
        await asyncio.sleep(0.5)


async def part_a(d):
    sid, ev = "ap-a", []
    ws, req = await ask(d, sid, ev)
    check(req["tool"] == ECHO and req["risk"] == "high" and
          req["args"] == {"message": "approved-echo"} and
          req["summary"].startswith(ECHO + "(") and req.get("toolCallId"),
          "request %s" % req)
    sums = [e for e in of_type(ev, "tool_result") if e.get("tool") == SUM]
    check(sums and sums[0].get("result") == "The sum of 2 and 3 is 5.",
          "the low-risk get-sum did not run at once: %s" % [short(e) for e in ev])
    check(not [e for e in of_type(ev, "tool_start") if e.get("tool") == ECHO],
          "echo started before its approval")
    call = req["toolCallId"]
    ws2, st = await open_stream(d, sid)
    pend = st.get("pendingApprovals") or []
    check(len(pend) == 1 and pend[0]["toolCallId"] == call and
          pend[0]["tool"] == ECHO, "session_state pendingApprovals %s" % pend)
    check(st["agents"][0]["status"] == "waiting_approval",
          "session_state agent %s" % st["agents"])
    await ws2.close()
    for tok, role in ((OBS, "observer"), (AGENT, "agent")):
        s, js = answer(d, sid, call, "approve", tok)
        check(s == 403 and err_code(js) == "FORBIDDEN",
              "%s's approval -> %s %s" % (role, s, js))
    s, js = answer(d, sid, "no-such-call", "approve")
    check(s == 404 and err_code(js) == "NOT_FOUND", "unknown call -> %s %s"
          % (s, js))
    s, js = answer(d, sid, call, "maybe")
    check(s == 400, "decision maybe -> %s %s" % (s, js))
    s, js = answer(d, sid, call, "approve", USER)
    check(s == 202 and js.get("seq"), "approve -> %s %s" % (s, js))
    await until(ws, "done", is_done, ev)
    await ws.close()
    s, js = answer(d, sid, call, "reject")
    check(s == 200 and js.get("duplicate") is True,
          "second answer -> %s %s" % (s, js))
    log = d.log_events(sid)
    types = [(e["type"], e.get("tool"), e.get("decision")) for e in log]
    i_req = types.index(("tool_approve_request", ECHO, None))
    i_dec = types.index(("audit_entry", ECHO, "approved"))
    i_start = types.index(("tool_start", ECHO, None))
    check(i_req < i_dec < i_start, "order request/decision/start: %s" % types)
    audit = [e for e in log if e["type"] == "audit_entry" and
             e["tool"] == ECHO][0]
    check(audit["by"] == "user" and audit["risk"] == "high" and
          audit["toolCallId"] == call and audit.get("timestamp") and
          audit["decision"] == "approved", "audit_entry %s" % audit)
    auto = [e for e in log if e["type"] == "audit_entry" and e["tool"] == SUM]
    check(len(auto) == 1 and auto[0]["decision"] == "auto" and
          auto[0]["by"] == "parleyd", "get-sum's audit_entry %s" % auto)
    res = [e for e in log if e["type"] == "tool_result" and e["tool"] == ECHO]
    check(len(res) == 1 and res[0].get("result") == "Echo: approved-echo",
          "echo result %s" % res)
    check(sum(map(is_done, log)) == 1, "dones: %s" % types)
    check(types.count(("audit_entry", ECHO, "rejected")) == 0,
          "the duplicate answer was logged: %s" % types)
    ws, st = await open_stream(d, sid)
    check(st.get("pendingApprovals") == [], "pending after the answer: %s"
          % st.get("pendingApprovals"))
    await ws.close()


async def answered(d, sid, decision, ev):
    """A turn whose request gets decision; returns its open stream."""
    ws, req = await ask(d, sid, ev)
    s, js = answer(d, sid, req["toolCallId"], decision)
    check(s == 202, "%s -> %s %s" % (decision, s, js))
    await until(ws, "done", is_done, ev)
    return ws


async def part_b(d):
    ev = []
    ws = await answered(d, "ap-b", "reject", ev)
    await ws.close()
    res = [e for e in of_type(ev, "tool_result") if e.get("tool") == ECHO]
    check(res and "declined" in res[0].get("error", {}).get("message", ""),
          "rejected echo: %s" % res)
    check("declined" in tokens_text(ev), "the model did not read the "
          "rejection: %r" % tokens_text(ev))


async def part_c(d):
    sid, ev = "ap-c", []
    ws = await answered(d, sid, "always", ev)
    ev2 = []
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "again"})
    await until(ws, "second done", is_done, ev2)
    await ws.close()
    check(not of_type(ev2, "tool_approve_request"), "asked again after "
          "always: %s" % [short(e) for e in ev2])
    res = [e for e in of_type(ev2, "tool_result") if e.get("tool") == ECHO]
    check(res and res[0].get("result") == "Echo: approved-echo",
          "echo after always: %s" % res)
    au = [e for e in of_type(ev2, "audit_entry") if e.get("tool") == ECHO]
    check(au and au[0]["decision"] == "always", "audit after always %s" % au)


async def part_d(d):
    sid, ev = "ap-d", []
    ws, req = await ask(d, sid, ev)
    await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": sid})
    await until(ws, "done", is_done, ev)
    await ws.close()
    dn = of_type(ev, "done")[-1]
    check(dn.get("cancelled") is True, "done after cancel %s" % dn)
    au = [e for e in of_type(ev, "audit_entry") if e.get("decision") == "cancelled"]
    check(au and au[0]["toolCallId"] == req["toolCallId"],
          "no audit_entry cancelled: %s" % [short(e) for e in ev])
    s, js = answer(d, sid, req["toolCallId"], "approve")
    check(s == 200 and js.get("duplicate"), "approve after cancel -> %s %s"
          % (s, js))


async def part_e(d):
    sid, ev = "ap-e", []
    ws, _ = await open_stream(d, sid)
    await ws_send(ws, {"v": 1, "type": "set_autonomy", "sessionId": sid,
                       "id": "sa-1", "level": "MANUAL"})
    ack = await until(ws, "ack", lambda e: e.get("type") == "ack", ev)
    check(ack[-1].get("eventSeq"), "set_autonomy ack %s" % ack[-1])
    ch = of_type(ev, "autonomy_changed")
    check(ch and ch[0]["level"] == "MANUAL", "autonomy_changed %s" % ch)
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "both"})
    await until(ws, "two requests", lambda e: len(of_type(
        ev, "tool_approve_request")) == 2, ev)
    reqs = of_type(ev, "tool_approve_request")
    check({r["tool"] for r in reqs} == {SUM, ECHO} and
          [r for r in reqs if r["tool"] == SUM][0]["risk"] == "low",
          "MANUAL asks every call: %s" % reqs)
    for r in reversed(reqs):
        s, js = answer(d, sid, r["toolCallId"], "approve")
        check(s == 202, "approve %s -> %s %s" % (r["tool"], s, js))
    await until(ws, "done", is_done, ev)
    await ws.close()
    check(len(of_type(ev, "tool_result")) == 2, "two results: %s" %
          [short(e) for e in ev])
    s, js = post(d, sid, {"type": "set_autonomy", "level": "YOLO"})
    check(s == 400, "level YOLO -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "set_autonomy", "level": "FULL_AUTO"}, OBS)
    check(s == 403, "observer set_autonomy -> %s %s" % (s, js))
    s, js = d.http_json("POST", "/sessions", {"sessionId": "ap-e2",
                        "config": {"autonomy": "RECKLESS"}})
    check(s == 400 and "autonomy" in (js or {}).get("error", {}).get("message", ""),
          "POST /sessions autonomy RECKLESS -> %s %s" % (s, js))
    ws, st = await open_stream(d, sid)
    check(st.get("autonomy") == "MANUAL", "session_state autonomy %s" %
          st.get("autonomy"))
    await ws.close()


async def part_f(d):
    sid, ev = "ap-f", []
    ws, req = await ask(d, sid, ev)
    call = req["toolCallId"]
    last = max(e["seq"] for e in ev if "seq" in e)
    await ws.close()
    d.kill_workers()
    ev2 = []
    ws, st = await open_stream(d, sid, last)
    pend = st.get("pendingApprovals") or []
    check(len(pend) == 1 and pend[0]["toolCallId"] == call,
          "after the kill, session_state pendingApprovals %s" % pend)
    s, js = answer(d, sid, call, "approve")
    check(s == 202, "approve after the kill -> %s %s" % (s, js))
    await until(ws, "done after the kill", is_done, ev2)
    await ws.close()
    log = d.log_events(sid)
    starts = [e for e in log if e["type"] == "tool_start" and e["tool"] == ECHO]
    reqs = [e for e in log if e["type"] == "tool_approve_request"]
    check(len(starts) == 1 and starts[0]["toolCallId"] == call,
          "echo started %d times: %s" % (len(starts), starts))
    check(len(reqs) == 1, "asked %d times" % len(reqs))
    check(sum(map(is_done, log)) == 1, "dones: %s" % [short(e) for e in log])
    check(not [e for e in log if e["type"] == "error"],
          "a waiting turn was reported interrupted: %s" %
          [e for e in log if e["type"] == "error"])
    # the script provider's call ids repeat across sessions: this one's
    called = [ln for ln in d.log_text().splitlines() if "session=%s " % sid
              in ln and "tool %s: call %s started" % (ECHO, call) in ln]
    check(len(called) == 1, "echo called %d times across the workers: %s"
          % (len(called), called))


async def part_g(mcp):
    d = daemon(mcp, "approval-timeout 1s\n")
    with with_daemon(d):
        await wait_mcp(d, "ap-g-warm")
        ev = []
        ws, req = await ask(d, "ap-g", ev)
        await until(ws, "done", is_done, ev)
        await ws.close()
        res = [e for e in of_type(ev, "tool_result") if e.get("tool") == ECHO]
        check(res and res[0].get("error", {}).get("code") ==
              "APPROVAL_TIMEOUT", "timed-out echo: %s" % res)
        au = [e for e in of_type(ev, "audit_entry") if e.get("tool") == ECHO]
        check(au and au[0]["decision"] == "timeout", "audit %s" % au)


async def part_i(mcp):
    """Waiting sessions leave memory under idle-timeout; an answer, or a
    client, brings one back: approved, the tool runs once; cancelled, the
    turn ends cancelled; past its approval-timeout, a late answer is
    refused and the call answered timeout."""
    d = daemon(mcp, "approval-timeout 3s\n", idle_timeout="1s")
    with with_daemon(d):
        await wait_mcp(d, "ap-i-warm")
        ev, ev2, ev3 = [], [], []
        ws, req = await ask(d, "ap-i", ev)
        await ws.close()
        ws, req2 = await ask(d, "ap-i2", ev2)
        await ws.close()
        ws, req3 = await ask(d, "ap-i3", ev3)
        await ws.close()
        asked = time.time()
        deadline = time.time() + 15
        while True:
            st, js = d.http_json("GET", "/api/info", headers={
                "Authorization": "Bearer " + ADMIN})
            if js.get("activeSessions") == 0:
                break
            check(time.time() < deadline, "waiting sessions stay in "
                  "memory: %s" % js)
            await asyncio.sleep(0.2)
        check(time.time() - asked < 2.5, "left memory only after %.1f s"
              % (time.time() - asked))
        s, js = answer(d, "ap-i", req["toolCallId"], "approve")
        check(s == 202, "approve of a session out of memory -> %s %s"
              % (s, js))
        s, js = post(d, "ap-i3", {"type": "cancel"})
        check(s == 202, "cancel of a session out of memory -> %s %s"
              % (s, js))
        await asyncio.sleep(max(0, 3.5 - (time.time() - asked)))
        # past approval-timeout, out of memory: the late answer is refused
        # and the request answered timeout
        s, js = answer(d, "ap-i2", req2["toolCallId"], "approve")
        check(s == 404 and "expired" in js["error"]["message"],
              "approve past the timeout -> %s %s" % (s, js))
        for sid, want in (("ap-i", None), ("ap-i2", "APPROVAL_TIMEOUT"),
                          ("ap-i3", "CANCELLED")):
            ws, _ = await open_stream(d, sid, 0)
            await until(ws, "done of %s" % sid, is_done, [])
            await ws.close()
            log = d.log_events(sid)
            res = [e for e in log if e["type"] == "tool_result" and
                   e.get("tool") == ECHO]
            got = (res[0].get("error") or {}).get("code") if res else "-"
            # a cancelled turn's waiting call gets no tool_result
            check((len(res) == 1 and got == want) or (not res and want ==
                  "CANCELLED"), "%s: echo results %s" % (sid, res))
            starts = [e for e in log if e["type"] == "tool_start" and
                      e.get("tool") == ECHO]
            check(len(starts) == (1 if want is None else 0),
                  "%s: echo started %d times" % (sid, len(starts)))
            au = [e["decision"] for e in log if e["type"] == "audit_entry"
                  and e.get("tool") == ECHO]
            check(au == [{None: "approved", "APPROVAL_TIMEOUT": "timeout",
                          "CANCELLED": "cancelled"}[want]],
                  "%s: echo's audit %s" % (sid, au))
            if want == "CANCELLED":
                dn = [e for e in log if is_done(e)]
                check(dn and dn[0].get("cancelled") is True,
                      "%s: done %s" % (sid, dn))
            check(sum(map(is_done, log)) == 1 and not [
                e for e in log if e["type"] == "error"],
                "%s: %s" % (sid, [short(e) for e in log]))


def part_h(d):
    src = open(os.path.join(E2E, "js", "protocol_example.js")).read()
    env = dict(os.environ, NODE_PATH=os.path.join(E2E, "node_modules"))
    src = src.replace("/chat", "/chat?access_token=" + USER)
    text, err = run_example(["node", "-r", os.path.join(E2E, "js",
                                                        "ws-global.js")],
                            src, d.port, d.tmp, "example.js", 30,
                            until=b"cost:", env=env)
    check("[Done]" in text and "[Error]" not in err, "example: %r %r"
          % (text[-300:], err[-300:]))
    log = d.log_events("my-session")
    check([e for e in log if e["type"] == "audit_entry" and
           e.get("decision") == "approved"], "the example's approval is not "
          "in the log: %s" % [short(e) for e in log])


async def main():
    srv = Everything()
    try:
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "max-autonomy SUPERVISED\n"
               "tool-policy everything__echo high\n" % srv.url())
        d = daemon(mcp)
        with with_daemon(d):
            await wait_mcp_refused(d)
            for p in (part_a, part_b, part_c, part_d, part_e, part_f):
                print("--", p.__name__, flush=True)
                await p(d)
            print("-- part_h", flush=True)
            part_h(d)
        print("-- part_g", flush=True)
        await part_g(mcp.replace("max-autonomy SUPERVISED\n", ""))
        print("-- part_i", flush=True)
        await part_i(mcp.replace("max-autonomy SUPERVISED\n", ""))
    finally:
        srv.stop()


async def wait_mcp_refused(d):
    """Under max-autonomy SUPERVISED a session cannot be FULL_AUTO: warm up
    with a turn that asks and is answered instead."""
    s, js = d.http_json("POST", "/sessions", {"sessionId": "ap-cap",
                        "config": {"autonomy": "FULL_AUTO"}})
    check(s == 403 and err_code(js) == "FORBIDDEN",
          "FULL_AUTO above max-autonomy SUPERVISED -> %s %s" % (s, js))
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        sid, ev = "ap-warm-%d" % n, []
        ws, _ = await open_stream(d, sid)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "warm up"})
        e = await until(ws, "request or done", lambda e: is_done(e) or
                        e.get("type") == "tool_approve_request", ev)
        if e[-1].get("type") == "tool_approve_request":
            answer(d, sid, e[-1]["toolCallId"], "reject")
            await until(ws, "done", is_done, ev)
            await ws.close()
            return
        await ws.close()
        check(time.time() < deadline, "MCP tools never known")
        await asyncio.sleep(0.5)


run_test("approvals", main)
