#!/usr/bin/python3
# Tool approvals across hosts sharing Redis (two parleyd on 127.0.0.1, the
# cluster harness without namespaces), server-everything as the MCP server,
# echo made high by a tool-policy rule:
#  a. the request waits on host 0, which owns the session; host 1, which
#     followed the session from before, lists it in session_state; the
#     approval is posted to host 1, which forwards it to the owner: echo
#     runs once, and host 1 lists nothing pending;
#  b. the request waits on host 0, host 0 dies; a client on host 1 finds
#     the request in session_state (host 1 takes the session over after
#     the lease), is not asked again, approves: echo runs once, one done.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

ECHO = "everything__echo"
CALLS = [{"name": ECHO, "arguments": {"message": "across-hosts"}}]


async def pending(d, sid, ev, timeout=30):
    """A stream on host d, a chat, and the tool_approve_request."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    await ws_recv(ws)
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "message": "echo"})
    await ws_until(ws, lambda e: e.get("type") == "tool_approve_request",
                   timeout, into=ev)
    return ws, of_type(ev, "tool_approve_request")[-1]


def approve(d, sid, call):
    return d.http_json("POST", "/sessions/%s/messages" % sid,
                       {"v": 1, "type": "tool_approve", "sessionId": sid,
                        "toolCallId": call, "decision": "approve"})


def wait_log(c, sid, pred, what, timeout=30):
    return c.log_until(sid, pred, what, timeout)


def once(log, call, what):
    starts = [e for e in log if e["type"] == "tool_start" and
              e["tool"] == ECHO and e["toolCallId"] == call]
    check(len(starts) == 1, "%s: echo started %d times" % (what, len(starts)))
    check(len([e for e in log if e["type"] == "tool_approve_request"]) == 1,
          "%s: asked more than once" % what)
    check(sum(map(is_done, log)) == 1, "%s: dones %s" % (what,
                                                         [short(e) for e in log]))
    res = [e for e in log if e["type"] == "tool_result" and e["tool"] == ECHO]
    check(res and res[0].get("result") == "Echo: across-hosts",
          "%s: result %s" % (what, res))


async def warm(h, n):
    """Each host's workers know the MCP tools before the parts start."""
    deadline = time.time() + 30
    while True:
        n += 1
        sid = "apm-warm-%d" % n
        ev = []
        ws, req = await pending(h, sid, ev)
        approve(h, sid, req["toolCallId"])
        await ws_until(ws, is_done, 20, into=ev)
        await ws.close()
        res = [e for e in of_type(ev, "tool_result") if e.get("error")]
        if not res:
            return n
        check(time.time() < deadline, "tools not known: %s" % res)
        await asyncio.sleep(0.5)


async def main():
    srv = Everything()
    try:
        prov = provider_block("tooly", "@tool " + json.dumps(
            {"calls": CALLS, "then": "Tool results:"},
            separators=(",", ":")), chunk=16)
        extra = ("mcp-server everything {\n    url %s\n}\n"
                 "tool-policy everything__echo high\n" % srv.url())
        with Cluster(2, lease="2s", providers=prov, default="tooly",
                     extra=extra, netns=False, workers=1) as c:
            h0, h1 = c.hosts
            n = await warm(h0, 0)
            await warm(h1, n)

            print("-- a: approved through the other host", flush=True)
            sid, ev = "apm-a", []
            # host 1 follows the session from before the request: what it
            # lists as pending follows the owner's log
            h0.http_json("POST", "/sessions", {"sessionId": sid})
            fw = await ws_connect(h1.url("/sessions/%s/stream" % sid))
            await ws_recv(fw)
            ws, req = await pending(h0, sid, ev)
            await ws_until(fw, lambda e: e.get("type") ==
                           "tool_approve_request", 30)
            f2 = await ws_connect(h1.url("/sessions/%s/stream" % sid))
            st = await ws_recv(f2)
            await f2.close()
            pend = st.get("pendingApprovals") or []
            check(len(pend) == 1 and pend[0]["toolCallId"] ==
                  req["toolCallId"], "a: the follower lists %s" % pend)
            st, js = approve(h1, sid, req["toolCallId"])
            check(st == 202, "approve through host 1 -> %s %s" % (st, js))
            log = wait_log(c, sid, lambda l: sum(map(is_done, l)) == 1,
                           "a: no done")
            await ws_until(fw, is_done, 30)
            f2 = await ws_connect(h1.url("/sessions/%s/stream" % sid))
            st = await ws_recv(f2)
            await f2.close()
            check(st.get("pendingApprovals") == [],
                  "a: after the answer the follower lists %s" %
                  st.get("pendingApprovals"))
            await fw.close()
            await ws.close()
            once(log, req["toolCallId"], "a")

            print("-- b: the owner dies while the request waits", flush=True)
            sid, ev = "apm-b", []
            ws, req = await pending(h0, sid, ev)
            await ws.close()
            h0.crash()
            deadline = time.time() + 30
            while True:
                ws = await ws_connect(h1.url("/sessions/%s/stream" % sid))
                st = await ws_recv(ws)
                pend = st.get("pendingApprovals") or []
                if pend and c.owner(sid) and c.owner(sid).startswith("h1/"):
                    break
                await ws.close()
                check(time.time() < deadline, "host 1 never listed the "
                      "request: %s, owner %s" % (st, c.owner(sid)))
                await asyncio.sleep(0.3)
            check(pend[0]["toolCallId"] == req["toolCallId"],
                  "b: pending %s" % pend)
            st, js = approve(h1, sid, req["toolCallId"])
            check(st == 202, "approve on host 1 -> %s %s" % (st, js))
            await ws_until(ws, is_done, 30)
            await ws.close()
            log = c.log_events(sid)
            once(log, req["toolCallId"], "b")
    finally:
        srv.stop()


run_test("approvals_multihost", main)
