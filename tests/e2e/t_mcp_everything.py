#!/usr/bin/python3
# MCP tools end to end: the MCP project's reference server
# (@modelcontextprotocol/server-everything, streamable HTTP, forced onto
# 127.0.0.1 by lib/loopback.cjs) as `mcp-server everything`, and the script
# provider's "@tool" fixture as the model.  A chat makes the model call
# everything__get-sum and everything__echo: tool_start and tool_result
# events come out with the server's real answers, those answers reach the
# model (its final text holds them), and the turn ends with done.  A call
# of a tool the server lacks ends as a tool_result error, not a dead turn.
# max-result: a result of js/big_mcp.mjs (the MCP SDK's server) within the
# bound reaches the model whole, a larger one is the call's TOOL_ERROR
# naming the directive, logged, and the turn still ends with done.
import sys, os, re
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

THEN = "Tool results:"


def script_tool(calls, then=THEN):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


def tool_events(ev, t, name):
    return [e for e in of_type(ev, t) if e.get("tool") == name]


async def turn_with_tools(d, prefix, ready_wait=20):
    """Chats until the worker of a session knows the MCP tools (each worker
    connects to the server by itself after it starts)."""
    deadline = time.time() + ready_wait
    n = 0
    while True:
        n += 1
        ev = await chat_turn(d, "%s-%d" % (prefix, n), "add and echo, please")
        errs = [e for e in of_type(ev, "tool_result") if e.get("error")]
        if not any("no such tool" in (e["error"].get("message") or "")
                   for e in errs) or time.time() > deadline:
            return ev
        await asyncio.sleep(0.5)


async def main():
    srv = Everything()
    try:
        srv.check_loopback_only()
        # Nothing is asked here (t_approvals.py asks).
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "autonomy FULL_AUTO\n" % srv.url())
        calls = [{"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}},
                 {"name": "everything__echo",
                  "arguments": {"message": "parley-mcp"}}]
        d = Daemon(extra=mcp, default="tooly",
                   providers=provider_block("tooly", script_tool(calls),
                                            chunk=16))
        with with_daemon(d):
            ev = await turn_with_tools(d, "mcp")
            names = [short(e) for e in ev]
            starts = of_type(ev, "tool_start")
            results = of_type(ev, "tool_result")
            check(len(starts) == 2 and len(results) == 2,
                  "expected 2 tool_start and 2 tool_result, got %s; results %s"
                  % (names, results))
            s = tool_events(ev, "tool_start", "everything__get-sum")
            check(s and s[0].get("args") == {"a": 2, "b": 3},
                  "tool_start for get-sum: %s" % starts)
            check(s[0].get("risk") == "low",
                  "get-sum is read-only (readOnlyHint), risk %r"
                  % s[0].get("risk"))
            check(s[0].get("toolCallId"), "tool_start without toolCallId")
            r = tool_events(ev, "tool_result", "everything__get-sum")
            check(r and r[0].get("result") == "The sum of 2 and 3 is 5.",
                  "get-sum result: %s" % r)
            check(r[0].get("toolCallId") == s[0].get("toolCallId"),
                  "tool_result toolCallId %r != tool_start's %r"
                  % (r[0].get("toolCallId"), s[0].get("toolCallId")))
            r = tool_events(ev, "tool_result", "everything__echo")
            check(r and r[0].get("result") == "Echo: parley-mcp",
                  "echo result: %s" % r)
            # Order: tool_start before its tool_result, both before done.
            idx = {short(e): i for i, e in enumerate(ev)}
            for e in results:
                st = [x for x in starts if x.get("toolCallId") ==
                      e.get("toolCallId")]
                check(st and idx[short(st[0])] < idx[short(e)],
                      "tool_result before its tool_start: %s" % names)
            dn = of_type(ev, "done")
            check(len(dn) == 1, "expected one done: %s" % names)
            check(idx[short(dn[0])] > max(idx[short(e)] for e in results),
                  "done before the tool results: %s" % names)
            text = tokens_text(ev)
            check(text.startswith(THEN) and "The sum of 2 and 3 is 5." in text
                  and "Echo: parley-mcp" in text,
                  "the results did not reach the model; final text %r" % text)
            check(not of_type(ev, "error"), "error events: %s"
                  % of_type(ev, "error"))
            # The log holds the same tool events as the stream.
            sid = ev[0].get("sessionId") or [e for e in ev if
                                              e.get("sessionId")][0]["sessionId"]
            logged_types = [e.get("type") for e in d.log_events(sid)]
            check(logged_types.count("tool_start") == 2 and
                  logged_types.count("tool_result") == 2,
                  "log of %s: %s" % (sid, logged_types))
            check("mcp server everything: ready" in d.log_text(),
                  "no 'mcp server everything: ready' in the parleyd log")

        # A tool the server does not have: an error result, the turn ends.
        calls = [{"name": "everything__no-such-tool", "arguments": {}}]
        d = Daemon(extra=mcp, default="tooly",
                   providers=provider_block("tooly", script_tool(calls, ""),
                                            chunk=16))
        with with_daemon(d):
            ev = await chat_turn(d, "mcp-missing", "call a missing tool")
            r = of_type(ev, "tool_result")
            check(len(r) == 1 and isinstance(r[0].get("error"), dict) and
                  r[0]["error"].get("code") == "TOOL_ERROR",
                  "missing tool: tool_result %s" % r)
            check(len(of_type(ev, "done")) == 1, "missing tool: no done: %s"
                  % [short(e) for e in ev])

        # The operator's tool-policy: a rule's risk wins over the
        # annotations, and a denied tool is never called; the model reads
        # why.
        calls = [{"name": "everything__get-sum", "arguments": {"a": 1, "b": 1}},
                 {"name": "everything__echo", "arguments": {"message": "no"}}]
        d = Daemon(extra=mcp + "tool-policy everything__echo deny\n"
                   "tool-policy everything__get-* medium\n",
                   default="tooly",
                   providers=provider_block("tooly", script_tool(calls),
                                            chunk=16))
        with with_daemon(d):
            ev = await turn_with_tools(d, "mcp-policy")
            s = tool_events(ev, "tool_start", "everything__get-sum")
            check(s and s[0].get("risk") == "medium",
                  "tool-policy medium: get-sum risk %r" %
                  (s and s[0].get("risk")))
            r = tool_events(ev, "tool_result", "everything__get-sum")
            check(r and r[0].get("result") == "The sum of 1 and 1 is 2.",
                  "get-sum under a risk rule: %s" % r)
            r = tool_events(ev, "tool_result", "everything__echo")
            check(r and isinstance(r[0].get("error"), dict) and
                  "denied by the operator's tool-policy" in
                  r[0]["error"].get("message", ""),
                  "denied echo: tool_result %s" % r)
            check(not re.search(r"tool everything__echo: call \S+ started",
                                d.log_text()),
                  "a denied tool was called: %s" % d.log_text()[-800:])
            au = [e for e in of_type(ev, "audit_entry")
                  if e.get("tool") == "everything__echo"]
            check(au and au[0].get("decision") == "denied",
                  "denied echo's audit_entry: %s" % au)
            check("denied by the operator" in tokens_text(ev),
                  "the model did not read the denial: %r" % tokens_text(ev))
            check(len(of_type(ev, "done")) == 1, "policy turn: no done")
    finally:
        srv.stop()
    await max_result()


async def max_result():
    srv = Everything("big_mcp.mjs")
    try:
        mcp = ("mcp-server big {\n    url %s\n    max-result 64k\n}\n"
               "autonomy FULL_AUTO\n" % srv.url())
        calls = [{"name": "big__big", "arguments": {"bytes": 60000}},
                 {"name": "big__big", "arguments": {"bytes": 70000}}]
        d = Daemon(extra=mcp, default="tooly",
                   providers=provider_block("tooly", script_tool(calls),
                                            chunk=4096))
        with with_daemon(d):
            ev = await turn_with_tools(d, "mcp-big")
            r = of_type(ev, "tool_result")
            check(len(r) == 2, "max-result: tool_results %s"
                  % [short(e) for e in ev])
            ok, big = r if r[0].get("result") else r[::-1]
            check(ok.get("result") == "z" * 60000 and not ok.get("error"),
                  "a result within max-result: %s" % str(ok)[:300])
            err = big.get("error") or {}
            check(err.get("code") == "TOOL_ERROR" and
                  "larger than max-result 64k" in err.get("message", "") and
                  "mcp-server big" in err.get("message", ""),
                  "a result past max-result: %s" % str(big)[:300])
            check("z" * 60000 in tokens_text(ev) and
                  "larger than max-result 64k" in tokens_text(ev),
                  "the model did not read both results")
            check(len(of_type(ev, "done")) == 1, "max-result turn: no done")
            check("larger than max-result 64k" in d.log_text(),
                  "max-result not in the log: %s" % d.log_tail())
    finally:
        srv.stop()


run_test("mcp_everything", main)
