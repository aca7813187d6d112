#!/usr/bin/python3
# The tool loop end to end, with tests/fixtures/fakellm.py as an OpenAI
# provider and @modelcontextprotocol/server-everything as the MCP server
# (offered twice: `everything` inherits `tool-timeout 1s`, `slow` has its own
# 20 s timeout for the long calls).  One daemon with `max-turns 2`:
#  1. two tool calls in one model step run in parallel; the next chat's
#     provider request holds the whole first exchange, in order;
#  2. a tool slower than tool-timeout answers TOOL_TIMEOUT and the turn ends
#     with done (the model got the error as its result);
#  3. the owning worker SIGKILLed while a tool runs: recoverable INTERNAL
#     error, the unanswered call runs again, the turn finishes; exactly once;
#  4. the owning worker SIGKILLed after a tool_result was logged, during the
#     final model step: the answered call is not run again and its result
#     reaches the re-run model call;
#  5. a model that always asks for tools stops at max-turns: done with
#     maxTurnsReached and turns 2.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG_OP = "trigger-long-running-operation"   # checked against tools/list


def conf(fport, mport):
    # Nothing is asked here (t_approvals.py asks).
    return ("max-turns 2\ntool-timeout 1s\nautonomy FULL_AUTO\n"
            "mcp-server everything {\n    url http://127.0.0.1:%d/mcp\n}\n"
            "mcp-server slow {\n    url http://127.0.0.1:%d/mcp\n"
            "    timeout 20s\n}\n" % (mport, mport),
            'provider oa {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "gpt-test"\n'
            '    timeout 10s\n    idle-timeout 10s\n}\n' % fport)


def call(cid, name, args):
    return {"id": cid, "name": name, "arguments": json.dumps(
        args, separators=(",", ":"))}


def names(ev):
    return [short(e) for e in ev]


def tool_msgs(msgs):
    return [(m.get("tool_call_id"), m.get("content")) for m in msgs
            if m.get("role") == "tool"]


def wait_mcp_ready(d, n_each, timeout=30):
    """Waits until the log says every worker's two MCP servers are ready
    n_each times (once per worker started so far)."""
    deadline = time.time() + timeout
    while True:
        t = d.log_text()
        a = t.count("mcp server everything: ready")
        b = t.count("mcp server slow: ready")
        if a >= n_each and b >= n_each:
            return
        check(time.time() < deadline, "MCP servers not ready in every worker "
              "(everything %d, slow %d, want %d); log: %s"
              % (a, b, n_each, d.log_tail()))
        time.sleep(0.1)


async def s_parallel_then_history(d, f):
    f.script([{"kind": "tool_calls", "text": "Let me check.", "calls": [
                  call("call_sum", "everything__get-sum", {"a": 2, "b": 3}),
                  call("call_echo", "everything__echo", {"message": "tl-1"})]},
              {"kind": "text", "text": "Sum is 5, echo done."},
              {"kind": "text", "text": "Second answer."}])
    ev = await chat_turn(d, "tl-par", "add and echo")
    check(not of_type(ev, "error"), "errors: %s" % of_type(ev, "error"))
    starts = of_type(ev, "tool_start")
    results = of_type(ev, "tool_result")
    check(len(starts) == 2 and len(results) == 2, "expected 2 tool_start and "
          "2 tool_result: %s" % names(ev))
    check(max(ev.index(s) for s in starts) < min(ev.index(r) for r in results),
          "tool calls not started together (a tool_result before the second "
          "tool_start): %s" % names(ev))
    check(sorted(s["toolCallId"] for s in starts) == ["call_echo", "call_sum"],
          "tool_start ids %s" % starts)
    res = {r["toolCallId"]: r.get("result") for r in results}
    check(res == {"call_sum": "The sum of 2 and 3 is 5.",
                  "call_echo": "Echo: tl-1"}, "tool results %s" % results)
    dn = one_done(ev, "parallel")
    check(dn.get("turns") == 2 and not dn.get("maxTurnsReached"),
          "done %s (turns must be 2)" % dn)
    check(tokens_text(ev) == "Let me check.Sum is 5, echo done.",
          "streamed text %r" % tokens_text(ev))
    check(ev.index(dn) > max(ev.index(r) for r in results),
          "done before tool results: %s" % names(ev))

    ev2 = await chat_turn(d, "tl-par", "and again")
    check(tokens_text(ev2) == "Second answer.", "2nd text %r" % tokens_text(ev2))
    one_done(ev2, "second chat")
    reqs = f.requests()
    check(len(reqs) == 3, "expected 3 provider requests, got %d" % len(reqs))
    msgs = reqs[2]["body"]["messages"]
    msgs = [m for m in msgs if m.get("role") != "system"]
    want_roles = ["user", "assistant", "tool", "tool", "assistant", "user"]
    check([m.get("role") for m in msgs] == want_roles,
          "second chat messages roles %s, expected %s: %s"
          % ([m.get("role") for m in msgs], want_roles, msgs))
    check(msgs[0].get("content") == "add and echo", "first user %s" % msgs[0])
    tc = msgs[1].get("tool_calls") or []
    check([(c.get("id"), c["function"]["name"],
            json.loads(c["function"]["arguments"])) for c in tc] ==
          [("call_sum", "everything__get-sum", {"a": 2, "b": 3}),
           ("call_echo", "everything__echo", {"message": "tl-1"})],
          "assistant tool_calls %s" % msgs[1])
    check(msgs[1].get("content") in ("Let me check.",),
          "assistant content with the calls %r" % msgs[1].get("content"))
    check(tool_msgs(msgs[2:4]) == [("call_sum", "The sum of 2 and 3 is 5."),
                                   ("call_echo", "Echo: tl-1")],
          "tool messages %s" % msgs[2:4])
    check(msgs[4].get("content") == "Sum is 5, echo done." and
          not msgs[4].get("tool_calls"), "final assistant %s" % msgs[4])
    check(msgs[5].get("content") == "and again", "second user %s" % msgs[5])
    # the first turn's second request carried the tool results too
    m1 = [m for m in reqs[1]["body"]["messages"] if m.get("role") != "system"]
    check(tool_msgs(m1) == tool_msgs(msgs[2:4]), "tool messages in the "
          "turn's second request: %s" % m1)
    check(any(t["function"]["name"] == "everything__get-sum"
              for t in reqs[0]["body"].get("tools", [])),
          "the MCP tools were not offered to the model")


async def s_tool_timeout(d, f):
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_slow", "everything__" + LONG_OP,
                       {"duration": 5, "steps": 5})]},
              {"kind": "text", "text": "It timed out."}])
    ev = await chat_turn(d, "tl-timeout", "slow please")
    r = of_type(ev, "tool_result")
    check(len(r) == 1 and isinstance(r[0].get("error"), dict) and
          r[0]["error"].get("code") == "TOOL_TIMEOUT",
          "tool_result for a call past tool-timeout 1s: %s" % r)
    check(r[0].get("toolCallId") == "call_slow", "toolCallId %s" % r[0])
    dn = one_done(ev, "tool timeout")
    check(dn.get("turns") == 2, "done %s" % dn)
    check(tokens_text(ev) == "It timed out.", "text %r" % tokens_text(ev))
    reqs = f.requests()
    check(len(reqs) == 2, "expected 2 provider requests, got %d" % len(reqs))
    tm = tool_msgs(reqs[1]["body"]["messages"])
    check(len(tm) == 1 and tm[0][0] == "call_slow" and tm[0][1] ==
          r[0]["error"].get("message"), "the model did not get the timeout "
          "as its result: %s (error %s)" % (tm, r[0]["error"]))


async def kill_and_resume(d, sid, ws, ev, until):
    """SIGKILLs the worker holding ws, then reconnects with lastSeq
    (retrying until the replacement serves it) until until(event).
    Returns (events seen before, logged events after, reconnect notes)."""
    seen = await kill_owner(d, ws, ev)
    after, attempts = await resume_until(
        d, sid, seen, until, "the turn did not finish after the kill",
        patience=40, retry_fail=True)
    first = attempts[-1][0]
    check(first["type"] == "session_state", "first event %s" % short(first))
    check_contiguous(seen + after, 1, "union across the kill")
    same_events(seen + after, d.log_events(sid)[:len(seen + after)],
                "clients vs GET /log")
    return seen, after


def recoverable(after):
    errs = of_type(after, "error")
    check(errs, "no error event for the interrupted turn: %s" % names(after))
    check(errs[0].get("severity") == "recoverable" and
          errs[0].get("code") == "INTERNAL", "error event %s" % errs[0])
    return errs[0]


def turn_over(e):
    return is_idle(e) and e.get("seq") is not None


async def s_kill_during_tool(d, f):
    sid = "tl-kill-tool"
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_long", "slow__" + LONG_OP,
                       {"duration": 4, "steps": 2})]},
              {"kind": "text", "text": "Long op finished."}])
    ws, ev = await stream_chat(d, sid, "k-1", "run the long operation",
                               lambda e: e.get("type") == "tool_start",
                               timeout=15)
    seen, after = await kill_and_resume(
        d, sid, ws, ev, lambda e: is_done(e) or (
            e.get("type") == "error" and e.get("severity") == "fatal"))
    check(not any(e["type"] == "tool_result" for e in seen),
          "the tool answered before the kill: %s" % names(seen))
    err = recoverable(after)
    allev = seen + after
    st = [e for e in allev if e["type"] == "tool_start"]
    rs = [e for e in allev if e["type"] == "tool_result"]
    check(all(e.get("toolCallId") == "call_long" for e in st + rs) and
          1 <= len(st) <= 2, "tool_start events %s" % st)
    check(len(rs) == 1, "expected one tool_result, got %s" % rs)
    check(rs[0].get("result") == "Long running operation completed. "
          "Duration: 4 seconds, Steps: 2.",
          "re-run tool result %s (the re-run call must reach the MCP "
          "server)" % rs[0])
    check(allev.index(err) < allev.index(rs[0]), "error after the result")
    dn = one_done(allev, "kill during tool")
    check(dn["messageId"] == err["messageId"] + ".1",
          "re-run messageId %s, interrupted %s" % (dn["messageId"],
                                                   err["messageId"]))
    check(dn.get("turns") == 2, "done.turns %s: the model call before the "
          "crash must count (checkpointed)" % dn.get("turns"))
    check(tokens_text(allev) == "Long op finished.", "text %r"
          % tokens_text(allev))
    reqs = f.requests()
    check(len(reqs) == 2, "expected 2 provider requests, got %s"
          % [(r["kind"], r["state"]) for r in reqs])
    check(tool_msgs(reqs[1]["body"]["messages"]) == [
        ("call_long", rs[0]["result"])], "the model got %s"
        % tool_msgs(reqs[1]["body"]["messages"]))


async def s_kill_after_result(d, f):
    sid = "tl-kill-final"
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_e", "slow__echo", {"message": "kept-once"})]},
              {"kind": "text", "text": "x" * 60, "chunks": 60,
               "delay_ms": 100},
              {"kind": "text", "text": "Final: Echo: kept-once"}])
    seen_result = []

    def pred(e):
        if e.get("type") == "tool_result":
            seen_result.append(e)
        return seen_result and e.get("type") == "token"
    ws, ev = await stream_chat(d, sid, "k-2", "echo then talk slowly", pred,
                               timeout=15)
    seen, after = await kill_and_resume(
        d, sid, ws, ev, lambda e: is_done(e) or (
            e.get("type") == "error" and e.get("severity") == "fatal"))
    check(not any(is_done(e) for e in seen), "the turn finished before the "
          "kill: %s" % names(seen))
    recoverable(after)
    allev = seen + after
    st = [e for e in allev if e["type"] == "tool_start"]
    rs = [e for e in allev if e["type"] == "tool_result"]
    check(len(st) == 1 and len(rs) == 1,
          "the answered call ran again after recovery: tool_start %s, "
          "tool_result %s" % (st, rs))
    check(rs[0].get("result") == "Echo: kept-once", "result %s" % rs[0])
    check(not [e for e in after if e["type"] in ("tool_start",
                                                 "tool_result")],
          "tool events after the kill: %s" % names(after))
    dn = one_done(allev, "kill after result")
    rerun = "".join(e["content"] for e in allev if e["type"] == "token" and
                    e.get("messageId") == dn["messageId"])
    check(rerun == "Final: Echo: kept-once", "re-run text %r" % rerun)
    reqs = f.requests()
    check(len(reqs) == 3, "expected 3 provider requests, got %s"
          % [(r["kind"], r["state"]) for r in reqs])
    check(tool_msgs(reqs[2]["body"]["messages"]) == [
        ("call_e", "Echo: kept-once")], "the re-run model call got %s"
        % tool_msgs(reqs[2]["body"]["messages"]))
    tc = [m for m in reqs[2]["body"]["messages"] if m.get("tool_calls")]
    check(len(tc) == 1 and tc[0]["tool_calls"][0]["id"] == "call_e",
          "assistant tool_calls in the re-run request: %s" % tc)


async def s_max_turns(d, f):
    steps = [{"kind": "tool_calls", "calls": [
        call("call_m%d" % i, "everything__echo", {"message": "m%d" % i})]}
        for i in range(3)]
    f.script(steps)
    ev = await chat_turn(d, "tl-max", "loop forever")
    dn = one_done(ev, "max turns")
    check(dn.get("maxTurnsReached") is True and dn.get("turns") == 2,
          "done %s (want maxTurnsReached true, turns 2)" % dn)
    reqs = f.requests()
    check(len(reqs) == 2, "max-turns 2 made %d provider requests" % len(reqs))
    st = of_type(ev, "tool_start")
    rs = of_type(ev, "tool_result")
    check([e["toolCallId"] for e in rs] == ["call_m0"] and
          rs[0].get("result") == "Echo: m0" and len(st) == 1,
          "tool events %s %s" % (st, rs))


async def s_cancel_mid_tool(d, f):
    """cancel while a tool runs: the next turn's request carries that call
    answered as cancelled (a call without a result is refused by the
    providers), and the next turn works."""
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_c", "slow__" + LONG_OP, {"duration": 5, "steps": 1})]},
              {"kind": "text", "text": "never"}])

    async def on_event(ws, e, events):
        if e.get("type") == "tool_start":
            await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": "tl-cancel"})

    ev = await chat_turn(d, "tl-cancel", "start something slow", on_event=on_event)
    dn = one_done(ev, "cancel mid tool")
    check(dn.get("cancelled") is True, "done %s" % dn)
    f.reset()
    f.script([{"kind": "text", "text": "fine"}])
    ev = await chat_turn(d, "tl-cancel", "and now?")
    check(tokens_text(ev) == "fine", "next turn text %r" % tokens_text(ev))
    tm = tool_msgs(f.requests()[-1]["body"]["messages"])
    check(tm == [("call_c", "cancelled before it finished")],
          "the cancelled call in the next request: %s" % tm)


async def s_same_id_each_turn(d, f):
    """Servers that number calls per response reuse ids: a call in the
    second turn with the first turn's id still runs and gets its own
    result."""
    for word in ("a", "b"):
        f.reset()
        f.script([{"kind": "tool_calls", "calls": [
                      call("call_0", "everything__echo", {"message": word})]},
                  {"kind": "text", "text": "echoed " + word}])
        ev = await chat_turn(d, "tl-sameid", "echo " + word)
        rs = of_type(ev, "tool_result")
        check([r.get("result") for r in rs] == ["Echo: " + word],
              "turn %s: results for a reused id %s" % (word, rs))
        check(tokens_text(ev) == "echoed " + word, "text %r" % tokens_text(ev))


SCENARIOS = [s_parallel_then_history, s_tool_timeout, s_kill_during_tool,
             s_kill_after_result, s_max_turns, s_cancel_mid_tool,
             s_same_id_each_turn]


async def test():
    srv = Everything()
    try:
        tools = srv.tool_names()
        for t in (LONG_OP, "get-sum", "echo"):
            check(t in tools, "server-everything has no %s tool: %s"
                  % (t, tools))
        with with_fakellm() as f:
            extra, prov = conf(f.port, srv.port)
            d = Daemon(extra=extra, providers=prov, default="oa")
            with with_daemon(d):
                wait_mcp_ready(d, 2)
                await run_scenarios(d, f, SCENARIOS, keep_going=True)
    finally:
        srv.stop()


run_test("tool_loop", test)
