#!/usr/bin/python3
# MCP servers that ask: requests a server sends the client in the middle
# of a tools/call, inside that call's event stream, answered by parleyd
# (workers/mcp_ask.c) with a POST of its own rather than left to time out.
#   - js/mcp_ask_server.mjs (the MCP TypeScript SDK): ping-client sends a
#     ping, answered with an empty result; sample and list-roots send
#     sampling/createMessage and roots/list, answered "method not found"
#     (-32601), so those tools fail at once instead of at their timeout.
# The script provider's "@tool" fixture is the model, calling the three at
# once; every server has a 10 s timeout and all must answer well before.
# Then server-everything's trigger-elicitation-request (offered only to a
# client that declares the elicitation capability, as parleyd does): its
# elicitation/create is logged as an elicitation_request for the user,
# listed in session_state's pendingElicitations, and answered with
# elicitation_answer: accept with content over the WebSocket (the tool
# reports the content), decline over POST .../messages; an observer is
# FORBIDDEN, an unknown question NOT_FOUND, a second answer a duplicate;
# unanswered, parleyd declines it to the server before the call's
# timeout and logs it closed; content over 64 KiB is refused; a cancel
# while a question is open ends the turn and closes the question.
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
        calls = [{"name": "asker__ping-client", "arguments": {}},
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
            check(len(results) == 3, "expected 3 tool_result, got %s; %s"
                  % (names, results))
            for r in results:
                check(not (isinstance(r.get("error"), dict) and
                           r["error"].get("code") == "TOOL_TIMEOUT"),
                      "%s timed out: %s" % (r.get("tool"), r))
                check(r.get("duration", 0) < 5000,
                      "%s took %s ms" % (r.get("tool"), r.get("duration")))
            check(took < 8, "the turn took %.1f s" % took)

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
            for want in ("mcp server asker: it asked for "
                         "sampling/createMessage, which parleyd does not "
                         "offer",
                         "mcp server asker: it asked for roots/list, which "
                         "parleyd does not offer"):
                check(want in log, "not in the parleyd log: %r" % want)
        await elicitation(every)
    finally:
        every.stop()
        if asker is not None:
            asker.stop()


ELICIT = "everything__trigger-elicitation-request"


async def ask(d, sid, ev):
    """Chats on a stream until the server's question; (ws, question)."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "ask me"})
    got = await ws_until(ws, lambda e: e.get("type") ==
                         "elicitation_request", 20, into=ev)
    return ws, got[-1]


def answer(d, sid, eid, action, content=None, token="adm"):
    body = {"type": "elicitation_answer", "elicitationId": eid,
            "action": action}
    if content is not None:
        body["content"] = content
    return post_message(d, sid, body, token)


async def elicitation(every):
    mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
           "autonomy FULL_AUTO\ntoken obs role observer\n"
           "token usr role user\n" % every.url())
    reply = "@tool " + json.dumps({"calls": [{"name": ELICIT,
                                              "arguments": {}}],
                                   "then": "Asked."}, separators=(",", ":"))
    d = Daemon(extra=mcp, default="tooly", token="adm",
               providers=provider_block("tooly", reply, chunk=16))
    with with_daemon(d):
        # accept, over the stream
        ev = []
        ws, q = await ask(d, "el-1", ev)
        check(q.get("tool") == ELICIT and q.get("toolCallId") and
              q.get("message") and q["elicitationId"].startswith(
                  q["toolCallId"]) and "name" in
              q["requestedSchema"]["properties"], "question %s" % q)
        ws2 = await ws_connect(d.url("/sessions/el-1/stream"))
        st = await ws_recv(ws2)
        await ws2.close()
        pend = st.get("pendingElicitations") or []
        check(len(pend) == 1 and pend[0]["elicitationId"] ==
              q["elicitationId"], "pendingElicitations %s" % pend)
        s, js = answer(d, "el-1", q["elicitationId"], "accept", {}, "obs")
        check(s == 403, "observer's answer -> %s %s" % (s, js))
        s, js = answer(d, "el-1", "nope", "decline")
        check(s == 404 and err_code(js) == "NOT_FOUND",
              "unknown question -> %s %s" % (s, js))
        s, js = answer(d, "el-1", q["elicitationId"], "accept")
        check(s == 400, "accept without content -> %s %s" % (s, js))
        await ws_send(ws, {"v": 1, "type": "elicitation_answer",
                           "sessionId": "el-1",
                           "elicitationId": q["elicitationId"],
                           "action": "accept",
                           "content": {"name": "Ada Lovelace",
                                       "check": True}})
        await ws_until(ws, is_done, 20, into=ev)
        await ws.close()
        res = of_type(ev, "tool_result")
        check(res and "Name: Ada Lovelace" in res[0].get("result", ""),
              "accepted: tool_result %s" % res)
        got = of_type(ev, "elicitation_result")
        check(len(got) == 1 and got[0]["action"] == "accept" and
              got[0]["by"] == "admin" and got[0]["content"]["name"] ==
              "Ada Lovelace", "elicitation_result %s" % got)
        s, js = answer(d, "el-1", q["elicitationId"], "decline")
        check(s == 200 and js.get("duplicate") is True,
              "second answer -> %s %s" % (s, js))
        # decline, over HTTP by a user
        ev = []
        ws, q = await ask(d, "el-2", ev)
        s, js = answer(d, "el-2", q["elicitationId"], "decline", None, "usr")
        check(s == 202, "decline -> %s %s" % (s, js))
        await ws_until(ws, is_done, 20, into=ev)
        await ws.close()
        res = of_type(ev, "tool_result")
        check(res and "declined" in res[0].get("result", ""),
              "declined: tool_result %s" % res)
        # nobody answers: declined before the 10 s timeout
        ev = []
        t0 = time.time()
        ws, q = await ask(d, "el-3", ev)
        await ws_until(ws, is_done, 30, into=ev)
        await ws.close()
        res = of_type(ev, "tool_result")
        check(res and not res[0].get("error") and "declined" in
              res[0].get("result", "") and time.time() - t0 < 10,
              "unanswered (%.1f s): tool_result %s" % (time.time() - t0, res))
        got = of_type(ev, "elicitation_result")
        check(len(got) == 1 and got[0]["by"] == "parleyd" and
              got[0]["action"] == "cancel", "closed: %s" % got)
        # a cancel while the question is open ends the turn and closes it
        ev = []
        ws, q = await ask(d, "el-4", ev)
        big = {"name": "x" * (70 * 1024)}
        s, js = answer(d, "el-4", q["elicitationId"], "accept", big)
        check(s == 400, "content over 64 KiB -> %s %s" % (s, js))
        s, js = post_message(d, "el-4", {"type": "cancel"}, "adm")
        check(s == 202, "cancel -> %s %s" % (s, js))
        await ws_until(ws, is_done, 20, into=ev)
        await ws.close()
        check(of_type(ev, "done")[0].get("cancelled") is True,
              "done %s" % of_type(ev, "done"))
        got = [e for e in d.log_events("el-4") if e["type"] ==
               "elicitation_result"]
        check(len(got) == 1 and got[0]["by"] == "parleyd", "closed: %s" % got)
        st, _, _ = d.http("GET", "/health")
        check(st == 200, "the worker is stuck: /health %s" % st)


run_test("mcp_ask", main)
