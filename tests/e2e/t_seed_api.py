#!/usr/bin/python3
# POST /api/agents/stream, the seed-compatible turn stream (seed 001), with
# the script provider's "@tool" fixture as the model and the MCP project's
# server-everything as the tools, on the local store or (E2E_STORE=redis)
# Redis:
#  a. curl: chunks data: {"type","data","timestamp"} only (no id:/event:
#     lines), in order: metadata accepted, metadata executing_tool and a
#     tool_call {toolId, input, result} per call, content, metadata done
#     with usage, and last metadata {"status":"complete"}; the session was
#     created on first use and the turn is in /sessions/{id}/log, the
#     content being its tokens;
#  b. a fetch-based client written as seed 001's useNexusAgent reads it
#     unchanged (tests/e2e/js/seed_client.mjs), on a second turn;
#  c. a bad body (not JSON, no message, no sessionId, message not a
#     string) is one error chunk, logs and creates nothing; GET is 405;
#  d. auth as POST .../messages: no token 401, an observer gets an error
#     chunk FORBIDDEN, a token scoped to another session 403;
#  e. two hosts on one Redis: a POST to the host that only follows the
#     session (the other owns it) streams the turn the owner runs, found by
#     its message id, to its complete chunk.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import Cluster, TOKEN

ADMIN, USER, OBS, SCOPED = "adm-secret", "usr-secret", "obs-secret", "scp-secret"
SUM = "everything__get-sum"
ECHO = "everything__echo"
CALLS = [{"name": SUM, "arguments": {"a": 2, "b": 3}},
         {"name": ECHO, "arguments": {"message": "seed-echo"}}]
REPLY = "@tool " + json.dumps({"calls": CALLS, "then": "Results:"},
                              separators=(",", ":"))


def curl_stream(d, body, token=USER, raw=False):
    """POSTs body with curl; returns (status, content type, chunks, text)."""
    args = ["curl", "-sS", "-N", "-i", "--max-time", "40", "-X", "POST",
            "-H", "Content-Type: application/json",
            "http://127.0.0.1:%d/api/agents/stream" % d.port,
            "--data-binary", body if raw else json.dumps(body)]
    if token:
        args[1:1] = ["-H", "Authorization: Bearer " + token]
    p = subprocess.run(args, capture_output=True, timeout=60)
    check(p.returncode == 0, "curl exited %d: %r" % (p.returncode, p.stderr))
    text = p.stdout.decode()
    head, _, payload = text.partition("\r\n\r\n")
    status = int(head.split()[1])
    ctype = [l.split(":", 1)[1].strip() for l in head.split("\r\n")
             if l.lower().startswith("content-type:")]
    chunks = []
    if status != 200:
        return status, ctype[0] if ctype else None, chunks, payload
    for block in payload.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        check(block.startswith("data: ") and "\n" not in block,
              "a block that is not one data line: %r" % block)
        chunks.append(json.loads(block[6:]))
    return status, ctype[0] if ctype else None, chunks, payload


def check_chunks(chunks, what):
    for c in chunks:
        check(set(c) == {"type", "data", "timestamp"} and
              c["type"] in ("content", "tool_call", "metadata", "error") and
              isinstance(c["timestamp"], int) and
              c["timestamp"] > 1.7e12, "%s: chunk %s" % (what, c))
    ts = [c["timestamp"] for c in chunks]
    check(ts == sorted(ts), "%s: timestamps out of order" % what)
    check(chunks and chunks[-1] == dict(chunks[-1], type="metadata",
                                        data={"status": "complete"}),
          "%s: last chunk %s" % (what, chunks[-1:] ))


def check_tool_turn(chunks, content, tool_calls, what):
    types = [c["type"] for c in chunks]
    check(types[0] == "metadata" and chunks[0]["data"]["status"] ==
          "accepted", "%s: first chunk %s" % (what, chunks[0]))
    calls = {t["toolId"]: t for t in tool_calls}
    check(set(calls) == {SUM, ECHO}, "%s: tool calls %s" % (what, tool_calls))
    check(calls[SUM]["input"] == {"a": 2, "b": 3} and
          calls[SUM]["result"] == "The sum of 2 and 3 is 5." and
          calls[SUM]["status"] == "success" and
          calls[ECHO]["input"] == {"message": "seed-echo"} and
          "seed-echo" in calls[ECHO]["result"],
          "%s: tool calls %s" % (what, tool_calls))
    execs = [c for c in chunks if c["type"] == "metadata" and
             c["data"].get("status") == "executing_tool"]
    check(sorted(c["data"]["toolId"] for c in execs) == sorted(calls),
          "%s: executing_tool %s" % (what, execs))
    first_content = types.index("content")
    check(max(i for i, t in enumerate(types) if t == "tool_call") <
          first_content, "%s: content before the tool results: %s"
          % (what, types))
    check(content.startswith("Results:") and "seed-echo" in content,
          "%s: content %r" % (what, content))
    done = [c for c in chunks if c["type"] == "metadata" and
            c["data"].get("status") == "done"]
    check(len(done) == 1 and chunks[-2] is done[0] and
          done[0]["data"]["usage"]["tokens"] > 0 and
          done[0]["data"]["tokenUsage"]["totalTokens"] ==
          done[0]["data"]["usage"]["tokens"],
          "%s: done %s" % (what, done))
    check(not [c for c in chunks if c["type"] == "error"],
          "%s: error chunks %s" % (what, chunks))


def check_logged(d, sid, content, n_turns, what):
    log = d.log_events(sid)
    dones = of_type(log, "done")
    check(len(dones) == n_turns and len(of_type(log, "user_message")) ==
          n_turns, "%s: log %s" % (what, [short(e) for e in log]))
    mid = dones[-1]["messageId"]
    toks = "".join(e["content"] for e in log if e["type"] == "token" and
                   e.get("messageId") == mid)
    check(toks == content, "%s: streamed %r, logged %r" % (what, content,
                                                          toks))
    check(len([e for e in of_type(log, "tool_result")
               if e.get("messageId") == mid]) == 2,
          "%s: tool results in the log %s" % (what, [short(e) for e in log]))


def bad_body(d, body, raw, want, what):
    st, ctype, chunks, _ = curl_stream(d, body, raw=raw)
    check(st == 200 and ctype == "text/event-stream" and len(chunks) == 1 and
          chunks[0]["type"] == "error" and
          chunks[0]["data"]["code"] == "BAD_REQUEST" and
          want in chunks[0]["data"]["message"],
          "%s -> %s %s %s" % (what, st, ctype, chunks))


async def wait_tools(d):
    """Turns until the worker that owns the session knows the tools."""
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        st, _, chunks, _ = curl_stream(d, {"sessionId": "warm-%d" % n,
                                           "message": "warm up"})
        calls = [c["data"] for c in chunks if c["type"] == "tool_call"]
        if calls and all(c["status"] == "success" for c in calls):
            return
        check(time.time() < deadline, "MCP tools never known: %s" % chunks)
        await asyncio.sleep(0.5)


async def test():
    srv = Everything()
    try:
        tokens = ("token %s role user\ntoken %s role observer\n"
                  "token %s role user session other\n" % (USER, OBS, SCOPED))
        d = Daemon(extra="mcp-server everything {\n    url %s\n"
                   "    timeout 10s\n}\nautonomy FULL_AUTO\n%s"
                   % (srv.url(), tokens), default="tooly", token=ADMIN,
                   providers=provider_block("tooly", REPLY, chunk=6))
        with with_daemon(d):
            await wait_tools(d)
            sid = "seed-1"
            st, js = d.http_json("GET", "/sessions/" + sid)
            check(st == 404, "before first use -> %s %s" % (st, js))
            # a. curl
            st, ctype, chunks, _ = curl_stream(d, {"sessionId": sid,
                                                   "message": "add, echo"})
            check(st == 200 and ctype == "text/event-stream",
                  "status %s %s" % (st, ctype))
            check_chunks(chunks, "curl")
            content = "".join(c["data"] for c in chunks
                              if c["type"] == "content")
            check_tool_turn(chunks, content, [c["data"] for c in chunks if
                                              c["type"] == "tool_call"],
                            "curl")
            check_logged(d, sid, content, 1, "curl")

            # b. the seed's own client code
            p = subprocess.run(["node", os.path.join(E2E, "js",
                                "seed_client.mjs"), str(d.port), USER, sid,
                                "again"], capture_output=True, timeout=60)
            out = json.loads(p.stdout.decode().strip().splitlines()[-1])
            check(p.returncode == 0 and out["status"] == 200 and
                  out["end"] == "eof" and out["rest"] == "",
                  "seed client: %s %r" % (out, p.stderr[-300:]))
            check_chunks(out["chunks"], "seed client")
            check_tool_turn(out["chunks"], out["content"], out["toolCalls"],
                            "seed client")
            check_logged(d, sid, out["content"], 2, "seed client")

            # c. bad bodies
            last = d.last_seq(sid)
            bad_body(d, "not json", True, "JSON object", "garbage")
            bad_body(d, {"sessionId": sid}, False, "'message'", "no message")
            bad_body(d, {"message": "x"}, False, "'sessionId'",
                     "no sessionId")
            bad_body(d, {"sessionId": sid, "message": 7}, False, "'message'",
                     "message 7")
            bad_body(d, {"sessionId": "bad id!", "message": "x"}, False,
                     "'sessionId'", "bad sessionId")
            bad_body(d, {"sessionId": "seed-none"}, False, "'message'",
                     "no message, new session")
            check(d.last_seq(sid) == last, "a bad body was logged")
            st, js = d.http_json("GET", "/sessions/seed-none")
            check(st == 404, "a bad body created its session: %s %s"
                  % (st, js))
            st, _, _ = d.http("GET", "/api/agents/stream")
            check(st == 405, "GET -> %s" % st)

            # d. auth
            st, _, _, _ = curl_stream(d, {"sessionId": sid, "message": "x"},
                                      token=None)
            check(st == 401, "no token -> %s" % st)
            st, _, chunks, _ = curl_stream(d, {"sessionId": sid,
                                               "message": "x"}, token=OBS)
            check(st == 200 and len(chunks) == 1 and
                  chunks[0]["type"] == "error" and
                  chunks[0]["data"]["code"] == "FORBIDDEN",
                  "observer -> %s %s" % (st, chunks))
            st, _, _, text = curl_stream(d, {"sessionId": sid,
                                             "message": "x"}, token=SCOPED)
            check(st == 403 and "FORBIDDEN" in text, "scoped to another "
                  "session -> %s %s" % (st, text))
            check(d.last_seq(sid) == last, "a refused message was logged")
    finally:
        srv.stop()
    await across_hosts()


async def across_hosts():
    with Cluster(2, lease="2s", netns=False, workers=1) as c:
        h0, h1 = c.hosts
        sid = "seed-mh"
        st, js = h0.http_json("POST", "/sessions", {"sessionId": sid})
        check(st == 201, "e: POST /sessions on host 0 -> %s %s" % (st, js))
        ws = await ws_connect(h0.url("/sessions/%s/stream" % sid))
        await ws_recv(ws)
        st, _, chunks, _ = curl_stream(h1, {"sessionId": sid,
                                            "message": "from afar"},
                                       token=TOKEN)
        check(st == 200, "e: status %s" % st)
        check_chunks(chunks, "e: through the follower")
        content = "".join(c["data"] for c in chunks if c["type"] == "content")
        check(chunks[0]["data"].get("status") == "accepted" and
              content == FAST_REPLY, "e: chunks %s" % chunks)
        log = c.hosts[0].log_events(sid)
        check(len(of_type(log, "user_message")) == 1 and
              of_type(log, "user_message")[0]["seq"] ==
              chunks[0]["data"]["seq"], "e: log %s" % [short(e) for e in log])
        check(h0.log_text().count("turn m-") >= 1 and
              "turn m-" not in h1.log_text(), "e: the follower ran the turn")
        await ws.close()


run_test("seed_api", test)
