#!/usr/bin/python3
# MCP servers that ask: requests a server sends the client in the middle
# of a tools/call, inside that call's event stream, answered by parleyd
# (workers/mcp_ask.c) with a POST of its own rather than left to time out.
#   - server-everything's trigger-elicitation-request (offered only to a
#     client that declares the elicitation capability, as parleyd does):
#     elicitation/create, declined at once since the turn asks nobody yet,
#     so the tool reports the decline;
#   - js/mcp_ask_server.mjs (the MCP TypeScript SDK): ping-client sends a
#     ping, answered with an empty result; sample and list-roots send
#     sampling/createMessage and roots/list, answered "method not found"
#     (-32601), so those tools fail at once instead of at their timeout.
# The script provider's "@tool" fixture is the model, calling all four at
# once; every server has a 10 s timeout and all must answer well before.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


def tool_events(ev, t, name):
    return [e for e in of_type(ev, t) if e.get("tool") == name]


async def main():
    every = Everything()
    asker = None
    try:
        asker = Everything("mcp_ask_server.mjs")
        every.check_loopback_only()
        asker.check_loopback_only()
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "mcp-server asker {\n    url %s\n    timeout 10s\n}\n"
               "autonomy FULL_AUTO\n" % (every.url(), asker.url()))
        calls = [{"name": "everything__trigger-elicitation-request",
                  "arguments": {}},
                 {"name": "asker__ping-client", "arguments": {}},
                 {"name": "asker__sample", "arguments": {}},
                 {"name": "asker__list-roots", "arguments": {}}]
        reply = "@tool " + json.dumps({"calls": calls, "then": "Asked."},
                                      separators=(",", ":"))
        d = Daemon(extra=mcp, default="tooly",
                   providers=provider_block("tooly", reply, chunk=16))
        with with_daemon(d):
            # Each worker connects by itself once started: wait until both
            # servers are ready in every worker's log line count.
            deadline = time.time() + 20
            while time.time() < deadline:
                t = d.log_text()
                if (t.count("mcp server everything: ready") >= 2 and
                        t.count("mcp server asker: ready") >= 2):
                    break
                time.sleep(0.2)
            t0 = time.time()
            ev = await chat_turn(d, "ask-1", "ask me things", timeout=30)
            took = time.time() - t0
            names = [short(e) for e in ev]
            results = of_type(ev, "tool_result")
            check(len(results) == 4, "expected 4 tool_result, got %s; %s"
                  % (names, results))
            for r in results:
                check(not (isinstance(r.get("error"), dict) and
                           r["error"].get("code") == "TOOL_TIMEOUT"),
                      "%s timed out: %s" % (r.get("tool"), r))
                check(r.get("duration", 0) < 5000,
                      "%s took %s ms" % (r.get("tool"), r.get("duration")))
            check(took < 8, "the turn took %.1f s" % took)

            r = tool_events(ev, "tool_result",
                            "everything__trigger-elicitation-request")
            check(r and not r[0].get("error") and
                  "declined" in (r[0].get("result") or "") and
                  '"action": "decline"' in r[0].get("result"),
                  "elicitation: tool_result %s" % r)
            r = tool_events(ev, "tool_result", "asker__ping-client")
            check(r and not r[0].get("error") and
                  (r[0].get("result") or "").startswith("pong after"),
                  "ping: tool_result %s" % r)
            for tool, method in (("asker__sample", "sampling/createMessage"),
                                 ("asker__list-roots", "roots/list")):
                r = tool_events(ev, "tool_result", tool)
                msg = (r and isinstance(r[0].get("error"), dict) and
                       r[0]["error"].get("message")) or ""
                check("-32601" in msg and "Method not found: " + method
                      in msg, "%s: tool_result %s" % (tool, r))
            check(len(of_type(ev, "done")) == 1, "no done: %s" % names)
            log = d.log_text()
            for want in ("mcp server everything: a question of tool "
                         "trigger-elicitation-request declined: nobody to "
                         "ask",
                         "mcp server asker: it asked for "
                         "sampling/createMessage, which parleyd does not "
                         "offer",
                         "mcp server asker: it asked for roots/list, which "
                         "parleyd does not offer"):
                check(want in log, "not in the parleyd log: %r" % want)
    finally:
        every.stop()
        if asker is not None:
            asker.stop()


run_test("mcp_ask", main)
