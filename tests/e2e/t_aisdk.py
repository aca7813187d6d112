#!/usr/bin/python3
# The Vercel AI SDK's UI message stream (POST /api/chat, GET
# /api/chat/{id}/stream) driven by the SDK's own client code from npm
# (tests/e2e/js/aisdk_client.mjs: DefaultChatTransport,
# readUIMessageStream, the Chat core with a plain ChatState), on the local
# store or (E2E_STORE=redis) Redis:
#  a. a streamed reply (with reasoning) whose text is the turn's tokens in
#     /log; the chunks in order, each with an id SEQ:K; the header v1; a
#     client that posts only its last message; a second turn in the chat;
#  b. a tool call that needs approval, approved through the Chat's
#     addToolApprovalResponse (sendAutomaticallyWhen posts it): the call's
#     output and the text follow; one rejected: tool-output-denied, the
#     turn finishes; a repeated answer changes nothing;
#  c. the Chat cut mid-reply resumes (resumeStream, GET .../stream): its
#     message text is /log's, nothing twice; a raw client cut after some
#     chunks resumes with Last-Event-ID and gets exactly the rest;
#  d. 204 from GET .../stream for an idle chat and an unknown one;
#  e. bad bodies are 400 and create no session; an observer gets 403;
#  f. two hosts on one Redis: a POST to the host that only follows the
#     session streams the turn its owner runs, found by the message's id;
#  g. approval POSTs checked whole before anything is applied: an unknown
#     call among them is 404 and none is applied, an assistant id of
#     another turn is 409, a repeat naming a seq that is no turn ends at
#     once; a Last-Event-ID past the turn's end ends with the turn, one
#     too long is 400;
#  h. the owner worker SIGKILLed mid-reply: the SDK's resume gets the
#     partial text, then the re-run's whole text, and no error.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import Cluster, TOKEN

ADMIN, USER, OBS = "adm-secret", "usr-secret", "obs-secret"
SUM = "everything__get-sum"
ECHO = "everything__echo"
THOUGHT = "first I weigh the question"
REPLY = ("Parley keeps every event in a log, so a client that loses its "
         "connection comes back and reads exactly what it missed, once, "
         "in order, and the reply it shows is whole.")


def think(then):
    return "@think " + json.dumps({"thinking": THOUGHT, "then": then},
                                  separators=(",", ":"))


def tool(calls, then="Tool results:"):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


def node(mode, d, chat, text, arg=None, token=USER):
    argv = ["node", os.path.join(E2E, "js", "aisdk_client.mjs"), mode,
            str(d.port), token, chat, text] + ([arg] if arg else [])
    p = subprocess.run(argv, capture_output=True, timeout=90)
    lines = p.stdout.decode().strip().splitlines()
    check(lines, "%s: no output; stderr %r" % (mode, p.stderr[-600:]))
    out = json.loads(lines[-1])
    check(p.returncode == 0, "%s exited %d: %s; stderr %r" %
          (mode, p.returncode, str(out)[:1500], p.stderr[-600:]))
    return out


def blocks(raw):
    """SSE blocks (list of text) into [(id, data)]."""
    got = []
    for b in raw:
        i, data = None, None
        for line in b.split("\n"):
            if line.startswith("id: "):
                i = line[4:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            got.append((i, data))
    return got


def types(chunks):
    return [("[DONE]" if d == "[DONE]" else json.loads(d)["type"])
            for _, d in chunks]


def check_ids(chunks, what):
    """Every chunk has an id SEQ:K, strictly increasing."""
    prev = (0, 0)
    for i, d in chunks:
        check(i is not None and ":" in i, "%s: chunk without id: %s" %
              (what, d))
        k = tuple(int(x) for x in i.split(":"))
        check(k > prev, "%s: ids not increasing: %s after %s" %
              (what, i, prev))
        prev = k


def turn_of(d, sid, ui_id):
    """The log's events of the turn of the chat "ui-" + ui_id."""
    evs = d.log_events(sid)
    um = [e for e in evs if e.get("type") == "user_message" and
          e.get("id") == "ui-" + ui_id]
    check(len(um) == 1, "user_message ui-%s: %d in the log" % (ui_id,
                                                                len(um)))
    mid = "m-%d" % um[0]["seq"]
    return mid, [e for e in evs if e.get("messageId") == mid]


def log_text(evs):
    return "".join(e["content"] for e in evs if e.get("type") == "token")


def sse_post(d, body, token=USER, cut_after=None, headers=None):
    """POST /api/chat with a raw socket; the SSE blocks read (all, or
    the first cut_after text-delta ones, then the socket closes)."""
    return sse_raw(d, "POST", "/api/chat", json.dumps(body), token,
                   cut_after, headers)


def sse_raw(d, method, path, body, token, cut_after=None, headers=None):
    s = socket.create_connection((d.host, d.port), timeout=20)
    h = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    data = (body or "").encode()
    s.sendall(("%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n"
               "%s\r\n" % (method, path, d.host, d.port, token, len(data),
                                  h)).encode() +
              data)
    buf, head, out, deltas = b"", None, [], 0
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
            if head is None and b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                head = head.decode()
            if head is None:
                continue
            while b"\n\n" in buf:
                blk, buf = buf.split(b"\n\n", 1)
                out.append(blk.decode())
                if '"type":"text-delta"' in out[-1]:
                    deltas += 1
                if cut_after is not None and deltas >= cut_after:
                    return head, out
    finally:
        s.close()
    return head, out


def user_msg(mid, text):
    return {"id": mid, "role": "user", "parts": [{"type": "text",
                                                   "text": text}]}


def create(d, sid, provider, config=None):
    body = {"sessionId": sid, "agents": [{"role": "assistant",
                                          "provider": provider}]}
    if config:
        body["config"] = config
    st, js = d.http_json("POST", "/sessions", body)
    check(st == 201, "POST /sessions %s -> %s %s" % (sid, st, js))


def part_a(d):
    out = node("stream", d, "a-chat", "why a log?")
    r = out["requests"][0]
    check(r["status"] == 200 and r["header"] == "v1",
          "a: POST answered %s, header %r" % (r["status"], r["header"]))
    ui = r["body"]["messages"][-1]["id"]
    mid, evs = turn_of(d, "a-chat", ui)
    m = out["message"]
    check(m["id"] == mid, "a: message id %s, the turn is %s" %
          (m["id"], mid))
    check(out["text"] == log_text(evs) == REPLY, "a: text %r, log %r" %
          (out["text"], log_text(evs)))
    rs = [p for p in m["parts"] if p["type"] == "reasoning"]
    check(len(rs) == 1 and rs[0]["text"] == THOUGHT,
          "a: reasoning parts %s" % rs)
    ch = blocks(out["chunks"])
    check_ids(ch, "a")
    t = types(ch)
    check(t[:3] == ["start", "start-step", "reasoning-start"] and
          t[-4:] == ["text-end", "finish-step", "finish", "[DONE]"] and
          t.count("text-start") == 1 and t.count("start-step") == 1,
          "a: chunk types %s" % t)
    check(json.loads(ch[-2][1]).get("finishReason") == "stop",
          "a: finish %s" % ch[-2][1])
    # a client that posts only its last message; the history is Parley's
    out = node("last", d, "a-chat", "and again?")
    check(len(out["requests"][0]["body"]["messages"]) == 1,
          "a: last-only posted %s" % out["requests"][0]["body"])
    mid2, evs = turn_of(d, "a-chat", out["requests"][0]["body"]
                        ["messages"][0]["id"])
    check(mid2 != mid and out["message"]["id"] == mid2 and
          out["text"] == log_text(evs) == REPLY,
          "a: second turn %s %r" % (mid2, out["text"]))


async def wait_mcp(d):
    """A FULL_AUTO turn until the worker knows the MCP tools."""
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        sid = "warm-%d" % n
        create(d, sid, "tooly", {"autonomy": "FULL_AUTO"})
        ev = await chat_turn(d, sid, "warm up")
        if of_type(ev, "tool_result") and not [
                e for e in of_type(ev, "tool_result") if e.get("error")]:
            return
        check(time.time() < deadline, "MCP tools never known")
        await asyncio.sleep(0.5)


def tool_parts(m):
    return {p.get("toolName"): p for p in m["parts"]
            if p["type"] == "dynamic-tool"}


async def part_b(d):
    await wait_mcp(d)
    create(d, "b-yes", "tooly")
    out = node("approve", d, "b-yes", "echo please", "approve")
    first = tool_parts(out["afterFirst"][-1])
    check(first.get(ECHO, {}).get("state") == "approval-requested" and
          first[ECHO]["approval"]["id"] == first[ECHO]["toolCallId"] and
          first.get(SUM, {}).get("state") == "output-available",
          "b: after the first stream %s" % first)
    check(out["status"] == "ready" and not out.get("errors"),
          "b: chat %s %s" % (out["status"], out.get("errors")))
    last = out["messages"][-1]
    parts = tool_parts(last)
    check(parts[ECHO]["state"] == "output-available" and
          parts[ECHO]["output"] == "Echo: approved-echo" and
          parts[ECHO]["input"] == {"message": "approved-echo"},
          "b: echo part %s" % parts[ECHO])
    ui = out["requests"][0]["body"]["messages"][-1]["id"]
    mid, evs = turn_of(d, "b-yes", ui)
    check(last["id"] == mid and len(out["messages"]) == 2,
          "b: messages %s" % [m["id"] for m in out["messages"]])
    check(out["text"] == log_text(evs) and "Echo: approved-echo" in
          out["text"], "b: text %r, log %r" % (out["text"], log_text(evs)))
    ap = [r for r in out["requests"] if r["body"] and
          r["body"]["messages"][-1]["role"] == "assistant"]
    check(len(ap) == 1 and ap[0]["status"] == 200 and
          ap[0]["body"]["trigger"] == "submit-message",
          "b: approval requests %s" % ap)
    aud = [e for e in evs if e.get("type") == "audit_entry" and
           e.get("tool") == ECHO]
    check([a["decision"] for a in aud] == ["approved"] and
          len([e for e in evs if e.get("type") == "done"]) == 1,
          "b: audit %s" % aud)
    # the same answer again changes nothing and still streams
    last_seq = d.last_seq("b-yes")
    head, raw = sse_post(d, ap[0]["body"])
    check(head.startswith("HTTP/1.1 200") and d.last_seq("b-yes") ==
          last_seq, "b: repeat %s, seq %d -> %d" %
          (head.split("\r\n")[0], last_seq, d.last_seq("b-yes")))

    create(d, "b-no", "tooly")
    out = node("approve", d, "b-no", "echo please", "reject")
    last = out["messages"][-1]
    parts = tool_parts(last)
    check(out["status"] == "ready" and
          parts[ECHO]["state"] == "output-denied" and
          parts[SUM]["state"] == "output-available",
          "b: rejected %s %s" % (out["status"], parts))
    ui = out["requests"][0]["body"]["messages"][-1]["id"]
    mid, evs = turn_of(d, "b-no", ui)
    check(out["text"] == log_text(evs) and out["text"] and
          [e["decision"] for e in evs if e.get("type") == "audit_entry"
           and e.get("tool") == ECHO] == ["rejected"],
          "b: rejected text %r, log %r" % (out["text"], log_text(evs)))
    denied = [c for c in blocks(out["chunks"])
              if '"tool-output-denied"' in c[1]]
    check(len(denied) == 1, "b: tool-output-denied chunks %s" % denied)


def part_c(d):
    create(d, "c-chat", "slow")
    out = node("resume", d, "c-chat", "tell me", "3")
    check(out["cutAfter"] >= 3 and out["status"] == "ready" and
          not out.get("errors"), "c: %s" % {k: out.get(k) for k in
                                             ("cutAfter", "status",
                                              "errors")})
    gets = [r for r in out["requests"] if r["method"] == "GET"]
    check(len(gets) == 1 and gets[0]["status"] == 200 and
          gets[0]["url"].endswith("/api/chat/c-chat/stream"),
          "c: resume requests %s" % gets)
    ui = out["requests"][0]["body"]["messages"][-1]["id"]
    mid, evs = turn_of(d, "c-chat", ui)
    check(len(out["messages"]) == 2 and out["messages"][1]["id"] == mid,
          "c: messages %s" % [m["id"] for m in out["messages"]])
    check(len(out["textAtCut"]) < len(REPLY) and
          out["text"] == log_text(evs) == REPLY,
          "c: text at cut %r, after %r, log %r" %
          (out["textAtCut"], out["text"], log_text(evs)))

    # Last-Event-ID, checked chunk by chunk
    create(d, "c-raw", "slow")
    body = {"id": "c-raw", "messages": [user_msg("craw1", "tell me")],
            "trigger": "submit-message"}
    head, first = sse_post(d, body, cut_after=4)
    check("x-vercel-ai-ui-message-stream: v1" in head.lower(),
          "c: head %r" % head)
    first = blocks(first)
    check_ids(first, "c first")
    # while it runs: a Last-Event-ID that is none is refused
    st, _, data = d.http("GET", "/api/chat/c-raw/stream",
                         headers={"Last-Event-ID": "x"})
    check(st == 400 and b"Last-Event-ID" in data,
          "c: bad Last-Event-ID -> %s %r" % (st, data))
    head, rest = sse_raw(d, "GET", "/api/chat/c-raw/stream", None, USER,
                         headers={"Last-Event-ID": first[-1][0]})
    check(head.startswith("HTTP/1.1 200"), "c: resume %r" % head)
    rest = blocks(rest)
    # the whole turn again: the same POST replays it from its start
    head, whole = sse_post(d, body)
    whole = blocks(whole)
    check_ids(whole, "c whole")
    check(first + rest == whole, "c: cut %d + resumed %d chunks != the "
          "turn's %d: %s" % (len(first), len(rest), len(whole),
                             (first + rest)[len(first) - 1:len(first) + 2]))
    mid, evs = turn_of(d, "c-raw", "craw1")
    text = "".join(json.loads(x)["delta"] for _, x in whole
                   if '"text-delta"' in x)
    check(text == log_text(evs) == REPLY, "c: raw text %r" % text)


def part_d(d):
    for sid in ("a-chat", "never-seen"):
        st, h, body = d.http("GET", "/api/chat/%s/stream" % sid)
        check(st == 204 and body == b"", "d: %s -> %s %r" % (sid, st, body))
    out = node("reconnect", d, "a-chat", "-")
    check(out.get("none") is True, "d: reconnectToStream %s" % out)
    st, _, _ = d.http("GET", "/sessions/never-seen")
    check(st == 404, "d: GET .../stream made a session (%s)" % st)


def part_e(d):
    good = user_msg("e1", "hello")
    bad = [
        ("not json", b"{nope"),
        ("no messages", {"id": "e-1", "trigger": "submit-message"}),
        ("empty messages", {"id": "e-2", "messages": []}),
        ("system last", {"id": "e-3", "messages": [
            {"id": "s", "role": "system", "parts": [
                {"type": "text", "text": "x"}]}]}),
        ("assistant without approvals", {"id": "e-4", "messages": [
            good, {"id": "m-1", "role": "assistant", "parts": [
                {"type": "text", "text": "x"}]}]}),
        ("no text", {"id": "e-5", "messages": [
            {"id": "u", "role": "user", "parts": []}]}),
        ("bad message id", {"id": "e-6", "messages": [
            user_msg("bad id!", "x")]}),
        ("regenerate", {"id": "e-7", "messages": [good],
                        "trigger": "regenerate-message"}),
        ("an edit", {"id": "e-8", "messages": [good], "messageId": "e1",
                     "trigger": "submit-message"}),
        ("bad chat id", {"id": "bad id!", "messages": [good]}),
        ("a project's kg id", {"id": "kg:e-kg", "messages": [good]}),
        ("a kg id answering", {"id": "kg:e-kg2", "messages": [
            {"id": "m-1", "role": "assistant", "parts": [{
                "type": "dynamic-tool", "toolName": "x", "toolCallId": "c",
                "state": "approval-responded", "input": {},
                "approval": {"id": "c", "approved": True}}]}]}),
        ("no chat id", {"messages": [good]}),
    ]
    for what, body in bad:
        st, h, data = d.http("POST", "/api/chat", body, headers={
            "Authorization": "Bearer " + USER,
            "Content-Type": "application/json"})
        js = json.loads(data)
        check(st == 400 and js["error"]["code"] == "BAD_REQUEST" and
              js["error"]["message"], "e: %s -> %s %s" % (what, st, js))
        sid = body.get("id") if isinstance(body, dict) else None
        if sid and store_id_ok(sid):
            st, _, _ = d.http("GET", "/sessions/%s" % sid)
            check(st == 404, "e: %s created session %s (%s)" %
                  (what, sid, st))
    st, h, data = d.http("POST", "/api/chat", {"id": "e-obs",
                                               "messages": [good]},
                         headers={"Authorization": "Bearer " + OBS})
    check(st == 403, "e: observer -> %s %s" % (st, data))
    st, _, _ = d.http("GET", "/sessions/e-obs")
    check(st == 404, "e: the observer's post made a session (%s)" % st)
    st, _, _ = d.http("GET", "/api/chat")
    check(st == 405, "e: GET /api/chat -> %s" % st)
    st, _, data = d.http("GET", "/api/chat/kg:e-kg3/stream")
    check(st == 400 and b"knowledge" in data, "e: GET kg: stream -> %s %r"
          % (st, data))
    st, _, _ = d.http("GET", "/sessions/kg:e-kg3")
    check(st == 404, "e: GET .../stream made kg:e-kg3 (%s)" % st)


def answer(sid, mid, ids, approved=True):
    return {"id": sid, "trigger": "submit-message", "messages": [{
        "id": mid, "role": "assistant", "parts": [{
            "type": "dynamic-tool", "toolName": ECHO, "toolCallId": i,
            "state": "approval-responded", "input": {},
            "approval": {"id": i, "approved": approved}} for i in ids]}]}


def post_json(d, body):
    st, _, data = d.http("POST", "/api/chat", body, headers={
        "Authorization": "Bearer " + USER,
        "Content-Type": "application/json"})
    return st, data


def part_g(d):
    sid = "g-ap"
    create(d, sid, "tooly")
    head, raw = sse_post(d, {"id": sid, "messages": [user_msg("g1", "echo")],
                             "trigger": "submit-message"})
    ch = blocks(raw)
    mid = json.loads(ch[0][1])["messageId"]
    asks = [json.loads(x)["approvalId"] for _, x in ch
            if '"tool-approval-request"' in x]
    check(len(asks) == 1 and types(ch)[-1] == "[DONE]", "g: %s" % types(ch))
    cid, last = asks[0], d.last_seq(sid)

    def audits():
        return [e for e in d.log_events(sid) if e.get("type") ==
                "audit_entry" and e.get("toolCallId") == cid and
                e.get("decision") != "auto"]
    # an unknown call among the answers: none is applied
    st, data = post_json(d, answer(sid, mid, [cid, "call_zz"]))
    check(st == 404 and b"call_zz" in data and d.last_seq(sid) == last and
          not audits(), "g: mixed -> %s %r, seq %d -> %d" %
          (st, data, last, d.last_seq(sid)))
    # the answer in a message that names another turn (or none)
    for forged in ("m-999999", "m-%d" % (int(mid[2:]) + 1)):
        st, data = post_json(d, answer(sid, forged, [cid]))
        check(st == 409 and d.last_seq(sid) == last and not audits(),
              "g: %s -> %s %r" % (forged, st, data))
    # the real one: the rest of the turn
    head, raw = sse_post(d, answer(sid, mid, [cid]))
    ch = blocks(raw)
    check(head.startswith("HTTP/1.1 200") and
          '"tool-output-available"' in "".join(x for _, x in ch) and
          types(ch)[-1] == "[DONE]" and
          [a["decision"] for a in audits()] == ["approved"],
          "g: approved %r %s" % (head[:20], types(ch)))
    last = d.last_seq(sid)
    # a repeat: its message id must name a turn of the chat
    st, data = post_json(d, answer(sid, "m-999999", [cid]))
    check(st == 409 and d.last_seq(sid) == last, "g: repeat m-999999 -> "
          "%s %r" % (st, data))
    t0 = time.time()
    head, raw = sse_post(d, answer(sid, "m-%d" % (int(mid[2:]) + 1), [cid]))
    ch = blocks(raw)
    check(head.startswith("HTTP/1.1 200") and time.time() - t0 < 5 and
          types(ch) == ["error", "[DONE]"] and d.last_seq(sid) == last,
          "g: repeat naming no turn: %r %s in %.1f s" %
          (head[:20], ch, time.time() - t0))

    # a cursor past the turn's end ends with the turn, no chunk
    create(d, "g-past", "slow")
    body = {"id": "g-past", "messages": [user_msg("gp1", "tell me")],
            "trigger": "submit-message"}
    sse_post(d, body, cut_after=2)
    st, _, data = d.http("GET", "/api/chat/g-past/stream",
                         headers={"Last-Event-ID": "0" * 70 + "3:2"})
    check(st == 400 and b"Last-Event-ID" in data,
          "g: a too long Last-Event-ID -> %s %r" % (st, data))
    t0 = time.time()
    head, rest = sse_raw(d, "GET", "/api/chat/g-past/stream", None, USER,
                         headers={"Last-Event-ID": "18446744073709551615:1"})
    check(head.startswith("HTTP/1.1 200") and blocks(rest) == [] and
          any(e.get("type") == "done" for e in d.log_events("g-past")),
          "g: past the end: %r %s after %.1f s" % (head[:20], rest,
                                                 time.time() - t0))


LONG = "".join("chunk%03d " % i for i in range(300))


async def part_h(d):
    sid = "h-crash"
    create(d, sid, "long")
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    await ws_recv(ws)
    pids = d.workers_pids()
    owner = owner_of(pids, ws.transport.get_extra_info("sockname")[1])
    check(owner is not None, "h: no owner among %s" % pids)
    sse_post(d, {"id": sid, "messages": [user_msg("h1", "go")],
                 "trigger": "submit-message"}, cut_after=5)
    os.kill(owner, signal.SIGKILL)
    try:
        await ws.close()
    except Exception:
        pass
    # the SDK resumes (GET .../stream) once the replacement worker is up
    deadline, out = time.time() + 40, None
    while time.time() < deadline:
        try:
            out = node("reconnect", d, sid, "-")
            if out.get("message"):
                break
        except Fail:
            pass
        time.sleep(0.3)
    check(out and out.get("message"), "h: no resume: %s" % out)
    texts = [p["text"] for p in out["message"]["parts"]
             if p["type"] == "text"]
    errs = [b for b in out["chunks"] if '"type":"error"' in b]
    evs = d.log_events(sid)
    check(any(e.get("type") == "error" and e.get("severity") ==
              "recoverable" for e in evs), "h: no recoverable error logged")
    check(not errs and texts and texts[-1] == LONG and
          types(blocks(out["chunks"]))[-2:] == ["finish", "[DONE]"],
          "h: parts %s, errors %s, last chunks %s" %
          ([t[:30] for t in texts], errs, types(blocks(out["chunks"]))[-3:]))


async def part_f():
    with Cluster(2, lease="2s", netns=False, workers=1) as c:
        h0, h1 = c.hosts
        sid = "ai-mh"
        st, js = h0.http_json("POST", "/sessions", {"sessionId": sid})
        check(st == 201, "f: POST /sessions on host 0 -> %s %s" % (st, js))
        ws = await ws_connect(h0.url("/sessions/%s/stream" % sid))
        await ws_recv(ws)
        head, raw = sse_post(h1, {"id": sid, "messages": [
            user_msg("far1", "from afar")]}, token=TOKEN)
        ch = blocks(raw)
        check(head.startswith("HTTP/1.1 200") and ch, "f: %r %s" %
              (head[:40], ch))
        check_ids(ch, "f")
        mid, evs = turn_of(h0, sid, "far1")
        text = "".join(json.loads(x)["delta"] for _, x in ch
                       if '"text-delta"' in x)
        check(json.loads(ch[0][1]) == {"type": "start", "messageId": mid}
              and types(ch)[-1] == "[DONE]" and text == log_text(evs) and
              text, "f: chunks %s" % types(ch))
        check("turn m-" not in h1.log_text(), "f: the follower ran it")
        await ws.close()


def store_id_ok(s):
    return 0 < len(s) <= 128 and all(c.isalnum() or c in "._:-" for c in s)


async def main():
    srv = Everything()
    try:
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "tool-policy everything__echo high\n" % srv.url())
        tokens = "token %s role user\ntoken %s role observer\n" % (USER, OBS)
        prov = (provider_block("thinky", think(REPLY), chunk=8) +
                provider_block("slow", REPLY, chunk=3, delay="40ms") +
                provider_block("long", LONG, chunk=9, delay="10ms") +
                provider_block("tooly", tool([
                    {"name": SUM, "arguments": {"a": 2, "b": 3}},
                    {"name": ECHO, "arguments": {
                        "message": "approved-echo"}}]), chunk=16))
        d = Daemon(extra=mcp + tokens, default="thinky", token=ADMIN,
                   providers=prov)
        with with_daemon(d):
            for p in (part_a, part_b, part_c, part_d, part_e, part_g,
                      part_h):
                print("--", p.__name__, flush=True)
                r = p(d)
                if asyncio.iscoroutine(r):
                    await r
    finally:
        srv.stop()
    print("-- part_f", flush=True)
    await part_f()


run_test("aisdk", main)
