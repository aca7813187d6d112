#!/usr/bin/python3
# Client-side MCP tools end to end (local store, or Redis with
# E2E_STORE=redis), with the script provider's "@tool" fixture as the model
# and the MCP project's reference server beside them:
#  a. mcp_tools registers "ide" tools over a stream (logged client_tools,
#     acknowledged); bad registrations are refused and change nothing: an
#     observer, a name the models refuse, a configured server's name, tools
#     that is not an array;
#  b. the model calls ide__read_file: mcp_call (server, tool, args) reaches
#     the client, whose mcp_result becomes the tool_result the model reads;
#     a second answer is a duplicate, an unknown call NOT_FOUND;
#  c. away: the call waits while no client is connected; every worker is
#     SIGKILLed; the client comes back, finds the call in session_state
#     (pendingClientCalls) and in the replay, and answers over POST
#     .../messages with an MCP CallToolResult: one mcp_call, one tool_start,
#     one tool_result, one done;
#  d. a write tool without annotations is high risk: approved first, then
#     asked of the client, whose error reaches the model;
#  e. client-tool-timeout: the call is answered TOOL_TIMEOUT, the turn ends;
#  f. withdrawn tools are no longer offered; a registration of one server
#     leaves another's in place;
#  g. a read-only MCP tool interrupted by a worker's death is run again; the
#     turn finishes;
#  h. at most once: a tool with effects (lib/effect_mcp.mjs, counted at the
#     server), approved, then its worker killed while it runs: it is
#     reported interrupted to the model, never run again; one done.
import sys, os, signal
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN, USER, OBS = "adm-secret", "usr-secret", "obs-secret"
READ = "ide__read_file"
WRITE = "ide__write_file"
LONG = "everything__trigger-long-running-operation"

TOOLS = [{"server": "ide", "name": "read_file",
          "description": "Reads a file of the user's workspace",
          "inputSchema": {"type": "object",
                          "properties": {"path": {"type": "string"}}},
          "annotations": {"readOnlyHint": True}},
         {"server": "ide", "name": "write_file",
          "description": "Writes a file of the user's workspace",
          "inputSchema": {"type": "object"}}]


def script(calls, then="Tool results:"):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


def daemon(mcp, reply, extra=""):
    tokens = "token %s role user\ntoken %s role observer\n" % (USER, OBS)
    return Daemon(extra=mcp + tokens + extra, default="tooly", token=ADMIN,
                  providers=provider_block("tooly", reply, chunk=16))


async def until(ws, what, pred, into, timeout=30):
    try:
        return (await ws_until(ws, pred, timeout, into=into))[-1]
    except asyncio.TimeoutError:
        raise Fail("%s: not seen in %d s; got %s" % (what, timeout,
                                                     [short(e) for e in into[-12:]]))


async def open_stream(d, sid, last=None, token=None):
    path = "/sessions/%s/stream" % sid
    q = []
    if last is not None:
        q.append("lastSeq=%d" % last)
    if token:
        q.append("access_token=" + token)
    if q:
        path += "?" + "&".join(q)
    ws = await ws_connect(d.url(path))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "first event %s" % short(st))
    return ws, st


def post(d, sid, body, token=ADMIN):
    return post_message(d, sid, body, token)


async def register(d, sid, tools, servers=None, ev=None):
    ev = [] if ev is None else ev
    ws, _ = await open_stream(d, sid)
    msg = {"v": 1, "type": "mcp_tools", "sessionId": sid, "id": "reg-%d" %
           int(time.time() * 1e6), "tools": tools}
    if servers is not None:
        msg["servers"] = servers
    await ws_send(ws, msg)
    ack = await until(ws, "ack of mcp_tools", lambda e: e.get("type") in
                      ("ack", "error"), ev)
    check(ack["type"] == "ack", "mcp_tools answered %s" % ack)
    reg = [e for e in ev if e.get("type") == "client_tools"]
    check(reg, "no client_tools event: %s" % [short(e) for e in ev])
    return ws, reg[-1]


async def part_a(d):
    sid, ev = "ct-a", []
    ws, reg = await register(d, sid, TOOLS, ev=ev)
    names = sorted(t["name"] for t in reg["tools"])
    check(names == ["read_file", "write_file"] and reg["by"] == "admin" and
          reg["tools"][0]["inputSchema"]["type"] == "object",
          "client_tools %s" % reg)
    bad = [({"tools": TOOLS}, OBS, 403, "FORBIDDEN"),
           ({"tools": [{"server": "ide", "name": "read file"}]}, ADMIN, 400,
            "BAD_REQUEST"),
           ({"tools": [{"server": "everything", "name": "x"}]}, ADMIN, 400,
            "BAD_REQUEST"),
           ({"tools": {"server": "ide"}}, ADMIN, 400, "BAD_REQUEST"),
           ({"tools": [{"server": "ide", "name": "x" * 70}]}, ADMIN, 400,
            "BAD_REQUEST"),
           ({"tools": [TOOLS[0], TOOLS[0]]}, ADMIN, 400, "BAD_REQUEST")]
    for body, tok, st, code in bad:
        s, js = post(d, sid, dict(body, type="mcp_tools"), tok)
        check(s == st and err_code(js) == code,
              "mcp_tools %s -> %s %s" % (short(body), s, js))
        check(js["error"]["message"], "no message: %s" % js)
    log = [e for e in d.log_events(sid) if e["type"] == "client_tools"]
    check(len(log) == 1, "a refused registration was logged: %s" % log)
    await ws.close()


async def asked(d, sid, ev):
    """Registers TOOLS, chats; returns (ws, the mcp_call)."""
    ws, _ = await register(d, sid, TOOLS)
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "read it"})
    return ws, await until(ws, "mcp_call", lambda e: e.get("type") ==
                           "mcp_call", ev)


async def part_b(d):
    sid, ev = "ct-b", []
    ws, call = await asked(d, sid, ev)
    check(call["server"] == "ide" and call["tool"] == "read_file" and
          call["args"] == {"path": "/etc/motd"} and call.get("toolCallId"),
          "mcp_call %s" % call)
    starts = of_type(ev, "tool_start")
    check(starts and starts[-1]["tool"] == READ and
          starts[-1]["risk"] == "low", "tool_start %s" % starts)
    s, js = post(d, sid, {"type": "mcp_result", "toolCallId": "nope",
                          "result": "x"})
    check(s == 404 and err_code(js) == "NOT_FOUND",
          "unknown call -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call["toolCallId"]})
    check(s == 400 and err_code(js) == "BAD_REQUEST",
          "no result nor error -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call["toolCallId"], "result": "x"},
                 OBS)
    check(s == 403, "observer's result -> %s %s" % (s, js))
    await ws_send(ws, {"v": 1, "type": "mcp_result", "sessionId": sid,
                       "id": "res-b", "toolCallId": call["toolCallId"],
                       "result": "hello from the client"})
    await until(ws, "done", is_done, ev)
    res = [e for e in of_type(ev, "tool_result") if e.get("tool") == READ]
    check(len(res) == 1 and res[0].get("result") == "hello from the client",
          "tool_result %s" % res)
    check("hello from the client" in tokens_text(ev),
          "the model did not read the client's result: %r" % tokens_text(ev))
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call["toolCallId"], "result": "again"})
    check(s == 200 and js.get("duplicate") is True,
          "second answer -> %s %s" % (s, js))
    log = d.log_events(sid)
    check(len([e for e in log if e["type"] == "tool_result"]) == 1,
          "the second answer changed the log")
    # The model numbers its calls from 1 each turn: the next turn's call
    # gets an id of its own, so a late answer to the first one is a
    # duplicate and not taken as this one's.
    ev = []
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "read it again"})
    call2 = await until(ws, "second mcp_call", lambda e: e.get("type") ==
                        "mcp_call", ev)
    check(call2["toolCallId"] != call["toolCallId"],
          "the second turn's call reuses id %s" % call["toolCallId"])
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call["toolCallId"], "result": "late"})
    check(s == 200 and js.get("duplicate") is True,
          "a late answer to the first call -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call2["toolCallId"],
                          "result": "second"})
    check(s == 202, "answer to the second call -> %s %s" % (s, js))
    await until(ws, "second done", is_done, ev)
    res = [e for e in of_type(ev, "tool_result") if e.get("tool") == READ]
    check(len(res) == 1 and res[0]["result"] == "second",
          "second turn's result %s" % res)
    await ws.close()


async def part_c(d):
    sid, ev = "ct-c", []
    ws, call = await asked(d, sid, ev)
    first = min(e["seq"] for e in ev if "seq" in e)
    await ws.close()
    d.kill_workers()
    ev2 = []
    ws, st = await open_stream(d, sid, first - 1)
    pend = st.get("pendingClientCalls") or []
    check(len(pend) == 1 and pend[0]["toolCallId"] == call["toolCallId"] and
          pend[0]["tool"] == "read_file" and pend[0]["server"] == "ide",
          "after the kill, pendingClientCalls %s" % pend)
    check(st.get("pendingApprovals") == [], "pendingApprovals %s" %
          st.get("pendingApprovals"))
    await until(ws, "mcp_call in the replay", lambda e: e.get("type") ==
                "mcp_call", ev2)
    s, js = post(d, sid, {"type": "mcp_result",
                          "toolCallId": call["toolCallId"],
                          "result": {"content": [{"type": "text",
                                                  "text": "line one"},
                                                 {"type": "text",
                                                  "text": "line two"}],
                                     "isError": False}})
    check(s == 202, "mcp_result after the kill -> %s %s" % (s, js))
    await until(ws, "done after the kill", is_done, ev2)
    await ws.close()
    log = d.log_events(sid)
    for t, n in (("mcp_call", 1), ("tool_start", 1), ("tool_result", 1),
                 ("done", 1)):
        got = [e for e in log if e["type"] == t]
        check(len(got) == n, "%d %s, want %d: %s" % (len(got), t, n,
                                                     [short(e) for e in log]))
    res = [e for e in log if e["type"] == "tool_result"][0]
    check(res.get("result") == "line one\nline two", "result %s" % res)
    check(not [e for e in log if e["type"] == "error"],
          "a waiting turn was reported interrupted: %s" %
          [e for e in log if e["type"] == "error"])
    _, st = await open_stream(d, sid)
    check(st.get("pendingClientCalls") == [], "still pending: %s" % st)


async def part_d(d):
    sid, ev = "ct-d", []
    ws, _ = await register(d, sid, TOOLS)
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "write it"})
    req = await until(ws, "tool_approve_request", lambda e: e.get("type") ==
                      "tool_approve_request", ev)
    check(req["tool"] == WRITE and req["risk"] == "high", "request %s" % req)
    check(not of_type(ev, "mcp_call"), "asked the client before approval")
    s, js = post(d, sid, {"type": "tool_approve",
                          "toolCallId": req["toolCallId"],
                          "decision": "approve"}, USER)
    check(s == 202, "approve -> %s %s" % (s, js))
    call = await until(ws, "mcp_call", lambda e: e.get("type") == "mcp_call",
                       ev)
    check(call["tool"] == "write_file", "mcp_call %s" % call)
    await ws_send(ws, {"v": 1, "type": "mcp_result", "sessionId": sid,
                       "toolCallId": call["toolCallId"],
                       "error": {"message": "disk full"}})
    await until(ws, "done", is_done, ev)
    res = [e for e in of_type(ev, "tool_result") if e.get("tool") == WRITE]
    check(res and res[0].get("error", {}).get("message") == "disk full" and
          res[0]["error"]["code"] == "TOOL_ERROR", "tool_result %s" % res)
    await ws.close()


async def part_f(d):
    sid, ev = "ct-f", []
    ws, _ = await register(d, sid, TOOLS)
    ws2, reg = await register(d, sid, [{"server": "cli", "name": "ls"}])
    check(sorted(t["server"] + "/" + t["name"] for t in reg["tools"]) ==
          ["cli/ls", "ide/read_file", "ide/write_file"],
          "another server's registration replaced: %s" % reg)
    await ws2.close()
    ws2, reg = await register(d, sid, [], servers=["ide"])
    check([t["name"] for t in reg["tools"]] == ["ls"],
          "withdrawing ide left %s" % reg)
    await ws2.close()
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "read it"})
    await until(ws, "done", is_done, ev)
    res = [e for e in of_type(ev, "tool_result") if e.get("tool") == READ]
    check(res and "no such tool" in res[0].get("error", {}).get("message", ""),
          "a withdrawn tool was called: %s" % res)
    check(not of_type(ev, "mcp_call"), "mcp_call for a withdrawn tool")
    ws2, reg = await register(d, sid, [])
    check(reg["tools"] == [], "withdrawing all left %s" % reg)
    await ws2.close()
    await ws.close()


async def part_e(mcp):
    d = daemon(mcp, script([{"name": READ, "arguments": {"path": "/x"}}]),
               "client-tool-timeout 1s\n")
    with with_daemon(d):
        sid, ev = "ct-e", []
        ws, _ = await register(d, sid, TOOLS)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "read it"})
        await until(ws, "done", is_done, ev)
        res = [e for e in of_type(ev, "tool_result") if e.get("tool") == READ]
        check(res and res[0].get("error", {}).get("code") == "TOOL_TIMEOUT",
              "timed-out call: %s" % res)
        s, js = post(d, sid, {"type": "mcp_result",
                              "toolCallId": res[0]["toolCallId"],
                              "result": "late"})
        check(s == 200 and js.get("duplicate") is True,
              "a late answer -> %s %s" % (s, js))
        await ws.close()


async def kill_while_running(d, sid, ws, ev):
    """Once the tool started, SIGKILLs the workers; waits for done."""
    await until(ws, "tool_start", lambda e: e.get("type") == "tool_start", ev)
    await ws.close()
    await asyncio.sleep(0.5)
    d.kill_workers()
    ws, _ = await open_stream(d, sid, 0)
    await until(ws, "done", is_done, [], timeout=60)
    await ws.close()


async def part_g(mcp):
    d = daemon(mcp, script([{"name": LONG, "arguments": {"duration": 3,
                                                         "steps": 3}}]),
               "autonomy FULL_AUTO\n")
    with with_daemon(d):
        sid, ev = "ct-g", []
        ws, _ = await open_stream(d, sid)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "run long"})
        await kill_while_running(d, sid, ws, ev)
        log = d.log_events(sid)
        res = [e for e in log if e["type"] == "tool_result"]
        check(len(res) == 1 and "completed" in res[0].get("result", ""),
              "the read-only tool was not run again: %s" % res)
        check(sum(map(is_done, log)) == 1, "dones: %s" % [short(e) for e in log])
        started = [ln for ln in d.log_text().splitlines() if "session=%s " % sid
                   in ln and "tool %s: call" % LONG in ln and "started" in ln]
        check(len(started) == 2, "the read-only tool started %d times, want 2 "
              "(once, then again after the kill): %s" % (len(started), started))


async def part_h():
    eff = EffectServer()
    try:
        mcp = ("mcp-server effect {\n    url %s\n    timeout 20s\n}\n"
               "tool-policy effect__append high\n" % eff.url())
        d = daemon(mcp, script([{"name": "effect__append",
                                 "arguments": {"ms": 2500, "line": "once"}}]))
        with with_daemon(d):
            sid, ev = "ct-h", []
            ws, _ = await open_stream(d, sid)
            await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                               "message": "append"})
            req = await until(ws, "tool_approve_request", lambda e:
                              e.get("type") == "tool_approve_request", ev)
            s, js = post(d, sid, {"type": "tool_approve",
                                  "toolCallId": req["toolCallId"],
                                  "decision": "approve"}, USER)
            check(s == 202, "approve -> %s %s" % (s, js))
            await kill_while_running(d, sid, ws, ev)
            await asyncio.sleep(3)
            check(eff.count() == 1, "the tool with effects ran %d times"
                  % eff.count())
            log = d.log_events(sid)
            res = [e for e in log if e["type"] == "tool_result"]
            check(len(res) == 1 and "interrupted" in
                  res[0].get("error", {}).get("message", ""),
                  "tool_result after the kill: %s" % res)
            check(sum(map(is_done, log)) == 1, "dones: %s" %
                  [short(e) for e in log])
    finally:
        eff.stop()


async def main():
    srv = Everything()
    try:
        mcp = ("mcp-server everything {\n    url %s\n    timeout 20s\n}\n"
               % srv.url())
        reply = script([{"name": READ, "arguments": {"path": "/etc/motd"}}])
        d = daemon(mcp, reply)
        with with_daemon(d):
            for p in (part_a, part_b, part_c):
                print("--", p.__name__, flush=True)
                await p(d)
        d = daemon(mcp, script([{"name": WRITE, "arguments": {"p": 1}}]))
        with with_daemon(d):
            print("-- part_d", flush=True)
            await part_d(d)
        d = daemon(mcp, reply)
        with with_daemon(d):
            print("-- part_f", flush=True)
            await part_f(d)
        print("-- part_e", flush=True)
        await part_e(mcp)
        print("-- part_g", flush=True)
        await part_g(mcp)
        print("-- part_h", flush=True)
        await part_h()
    finally:
        srv.stop()


run_test("client_tools", main)
