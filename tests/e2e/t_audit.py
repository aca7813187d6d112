#!/usr/bin/python3
# The audit trail end to end, with the MCP project's reference server
# (server-everything: get-sum is low, a `tool-policy` rule makes echo high)
# and the script provider's "@tool" fixture as the model, on the local
# store or (E2E_STORE=redis) on Redis:
#  a. three turns: echo approved (admin), echo rejected (user), then
#     set_autonomy FULL_AUTO (user) and both calls run without asking;
#     GET /api/audit gives exactly the log's audit_entry and
#     autonomy_changed events, in order, with next = the log's end;
#  b. who may read it: admin and a token scoped to the session (user or
#     observer) yes; an unscoped user token, a token scoped to another
#     session 403, no token 401;
#  c. paging: limit=2 pages joined equal the whole; after=N; more/next;
#  d. bad requests: no sessionId, a bad one, bad after or limit (400), an
#     unknown session (404), POST (405);
#  e. parleyctl audit: the table (seq, time, tool, risk, decision, by),
#     --json, --limit, --after, an unknown session (exit 3);
#  f. the audit-log file: one line per entry, sessionId, seq and type
#     first, the event's other fields, no "v"; mode 0640;
#  g. every worker SIGKILLed, then the session idled out of memory: the
#     trail read from the store is the same;
#  h. SIGUSR1: the file renamed, the supervisor signalled, another turn:
#     its entries are in the new file, none in the old one.
import sys, os, signal, stat
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN, USER = "adm-secret", "usr-secret"
SCOPED, SCOPED_OBS, OTHER = "scp-secret", "sob-secret", "oth-secret"
SID = "au-1"
SUM = "everything__get-sum"
ECHO = "everything__echo"
CALLS = [{"name": SUM, "arguments": {"a": 2, "b": 3}},
         {"name": ECHO, "arguments": {"message": "audited"}}]
AUDIT_TYPES = ("audit_entry", "autonomy_changed")


def script_tool(calls, then="Tool results:"):
    return "@tool " + json.dumps({"calls": calls, "then": then},
                                 separators=(",", ":"))


def daemon(mcp):
    tokens = ("token %s role user\ntoken %s role user session %s\n"
              "token %s role observer session %s\n"
              "token %s role user session au-other\n"
              % (USER, SCOPED, SID, SCOPED_OBS, SID, OTHER))
    d = Daemon(extra=mcp + tokens, default="tooly", token=ADMIN,
               idle_timeout="2s", providers=provider_block("tooly", script_tool(CALLS),
                                        chunk=16))
    d.audit_path = os.path.join(d.tmp, "audit.jsonl")
    d.extra += "audit-log %s\n" % d.audit_path
    d.write_conf()
    return d


def err_code(js):
    return ((js or {}).get("error") or {}).get("code")


def audit(d, query, token=ADMIN):
    headers = {"Authorization": "Bearer " + token} if token else \
        {"Authorization": ""}
    return d.http_json("GET", "/api/audit?" + query, headers=headers)


def audit_ok(d, query, token=ADMIN):
    s, js = audit(d, query, token)
    check(s == 200 and isinstance(js, dict), "GET /api/audit?%s -> %s %s"
          % (query, s, js))
    check(set(js) == {"sessionId", "entries", "next", "more"} and
          isinstance(js["entries"], list) and isinstance(js["next"], int) and
          isinstance(js["more"], bool), "audit page shape: %s" % js)
    return js


def post(d, sid, body, token=ADMIN):
    body = dict(body, v=1, sessionId=sid)
    return d.http_json("POST", "/sessions/%s/messages" % sid, body,
                       headers={"Authorization": "Bearer " + token})


async def turn(d, sid, decision=None, token=ADMIN):
    """One chat turn; each approval request gets decision from token.
    Returns the turn's events, up to the agent's idle after done."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    ev = []
    try:
        await ws_recv(ws)   # session_state
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "go"})
        while True:
            e = (await ws_until(ws, lambda e: is_done(e) or e.get("type") ==
                                "tool_approve_request", 30, into=ev))[-1]
            if is_done(e):
                break
            check(decision is not None, "asked unexpectedly: %s" % e)
            s, js = post(d, sid, {"type": "tool_approve",
                                  "toolCallId": e["toolCallId"],
                                  "decision": decision}, token)
            check(s == 202, "%s -> %s %s" % (decision, s, js))
        await ws_until(ws, is_idle, 30, into=ev)
    finally:
        await ws.close()
    return ev


async def wait_mcp(d):
    """FULL_AUTO turns in scratch sessions until the worker knows the
    tools (their entries go to the file too, under their own ids)."""
    deadline = time.time() + 30
    n = 0
    while True:
        n += 1
        sid = "au-warm-%d" % n
        st, js = d.http_json("POST", "/sessions", {"sessionId": sid,
                             "config": {"autonomy": "FULL_AUTO"}})
        check(st == 201, "POST /sessions -> %s %s" % (st, js))
        ev = await chat_turn(d, sid, "warm up")
        if not [e for e in of_type(ev, "tool_result") if e.get("error")]:
            return
        check(time.time() < deadline, "MCP tools never known")
        await asyncio.sleep(0.5)


def trail_of(d, sid):
    return [e for e in d.log_events(sid) if e["type"] in AUDIT_TYPES]


def file_lines(path, sid=None):
    out = []
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return out
    check(text == "" or text.endswith("\n"), "audit-log %s: last line not "
          "ended: %r" % (path, text[-200:]))
    for ln in text.splitlines():
        js = json.loads(ln)
        check(list(js)[:3] == ["sessionId", "seq", "type"] and
              "v" not in js, "audit-log line %r" % ln)
        if sid is None or js["sessionId"] == sid:
            out.append(js)
    return out


def as_line(e):
    return {k: v for k, v in e.items() if k != "v"}


async def part_a(d):
    await turn(d, SID, "approve", ADMIN)
    await turn(d, SID, "reject", USER)
    s, js = post(d, SID, {"type": "set_autonomy", "level": "FULL_AUTO"}, USER)
    check(s == 202, "set_autonomy -> %s %s" % (s, js))
    await turn(d, SID)
    trail = trail_of(d, SID)
    got = [(e["type"], e.get("tool"), e.get("decision"), e["by"])
           for e in trail]
    want = [("audit_entry", SUM, "auto", "parleyd"),
            ("audit_entry", ECHO, "approved", "admin"),
            ("audit_entry", SUM, "auto", "parleyd"),
            ("audit_entry", ECHO, "rejected", "user"),
            ("autonomy_changed", None, None, "user"),
            ("audit_entry", SUM, "auto", "parleyd"),
            ("audit_entry", ECHO, "auto", "parleyd")]
    check(got == want, "the log's trail %s, want %s" % (got, want))
    ch = trail[4]
    check(ch["level"] == "FULL_AUTO" and ch["previous"] == "SUPERVISED",
          "autonomy_changed %s" % ch)
    js = audit_ok(d, "sessionId=" + SID)
    check(js["sessionId"] == SID and js["entries"] == trail,
          "GET /api/audit entries %s, want %s" % (js["entries"], trail))
    check(js["more"] is False and js["next"] == d.last_seq(SID),
          "next %s more %s, lastSeq %s" % (js["next"], js["more"],
                                          d.last_seq(SID)))
    return trail


def part_b(d, trail):
    for tok in (SCOPED, SCOPED_OBS):
        js = audit_ok(d, "sessionId=" + SID, tok)
        check(js["entries"] == trail, "scoped token's trail %s" % js)
    for tok, what in ((USER, "unscoped user"), (OTHER, "other session's")):
        s, js = audit(d, "sessionId=" + SID, tok)
        check(s == 403 and err_code(js) == "FORBIDDEN" and
              js["error"]["message"], "%s token -> %s %s" % (what, s, js))
    s, js = audit(d, "sessionId=" + SID, None)
    check(s == 401 and err_code(js) == "UNAUTHORIZED", "no token -> %s %s"
          % (s, js))


def part_c(d, trail):
    pages, after = [], 0
    while True:
        js = audit_ok(d, "sessionId=%s&after=%d&limit=2" % (SID, after))
        check(len(js["entries"]) <= 2, "limit=2 gave %d" % len(js["entries"]))
        check(js["next"] >= after, "next %d before after %d" % (js["next"],
                                                               after))
        pages.append(js)
        after = js["next"]
        if not js["more"]:
            break
        check(len(pages) < 10, "paging does not end: %s" % pages)
    joined = [e for p in pages for e in p["entries"]]
    check(joined == trail, "pages joined %s, want %s" % (joined, trail))
    check(len(pages) == 4 and pages[0]["more"] and
          pages[0]["next"] >= trail[1]["seq"] and
          pages[0]["next"] < trail[2]["seq"], "pages %s" %
          [(len(p["entries"]), p["next"], p["more"]) for p in pages])
    js = audit_ok(d, "sessionId=%s&after=%d" % (SID, trail[3]["seq"]))
    check(js["entries"] == trail[4:], "after=%d: %s" % (trail[3]["seq"], js))
    js = audit_ok(d, "sessionId=%s&after=%d" % (SID, 10 ** 9))
    check(js["entries"] == [] and js["more"] is False, "after the end: %s"
          % js)


def part_d(d):
    for q in ("", "after=0", "sessionId=", "sessionId=a%20b",
              "sessionId=" + "x" * 129,
              "sessionId=%s&limit=0" % SID, "sessionId=%s&limit=1001" % SID,
              "sessionId=%s&limit=x" % SID, "sessionId=%s&after=-1" % SID):
        s, js = audit(d, q)
        check(s == 400 and err_code(js) == "BAD_REQUEST" and
              len(js["error"]["message"]) > 20, "?%s -> %s %s" % (q, s, js))
    s, js = audit(d, "sessionId=au-none")
    check(s == 404 and err_code(js) == "NOT_FOUND", "unknown session -> %s %s"
          % (s, js))
    s, _, body = d.http("POST", "/api/audit?sessionId=" + SID, body="{}")
    check(s == 405, "POST /api/audit -> %s %s" % (s, body))


def part_e(d, trail):
    rc, out, err = d.ctl("audit", SID, check_rc=0)
    rows = [ln.split() for ln in out.splitlines()]
    check(rows and rows[0] == ["SEQ", "TIME", "TOOL", "RISK", "DECISION",
                               "BY"], "parleyctl audit header: %r" % out)
    check(len(rows) == 1 + len(trail), "parleyctl audit rows: %r" % out)
    for r, e in zip(rows[1:], trail):
        check(r[0] == str(e["seq"]) and r[-1] == e["by"] and
              r[1] == e.get("timestamp", e["ts"]), "row %s for %s" % (r, e))
        if e["type"] == "audit_entry":
            check(r[2:5] == [e["tool"], e["risk"], e["decision"]],
                  "row %s for %s" % (r, e))
        else:
            check(r[2:6] == ["(autonomy)", "-", "SUPERVISED", "->"] and
                  r[6] == "FULL_AUTO", "autonomy row %s" % r)
    rc, out, err = d.ctl("audit", "--json", SID, check_rc=0)
    js = json.loads(out)
    check(js["entries"] == trail and js["more"] is False and
          js["next"] == d.last_seq(SID), "parleyctl audit --json: %s" % out)
    rc, out, err = d.ctl("--json", "audit", "--limit", "3", SID, check_rc=0)
    js = json.loads(out)
    check(js["entries"] == trail[:3] and js["more"] is True,
          "--limit 3 --json: %s" % out)
    rc, out, err = d.ctl("audit", "--after", str(trail[4]["seq"]),
                         "--limit", "1", SID, check_rc=0)
    rows = out.splitlines()
    check(len(rows) == 2 and rows[1].split()[0] == str(trail[5]["seq"]),
          "--after --limit 1: %r" % out)
    rc, out, err = d.ctl("audit", "au-none")
    check(rc == 3 and "NOT_FOUND" in err, "unknown session: %d %r %r"
          % (rc, out, err))
    rc, out, err = d.ctl("audit", "--limit", "0", SID)
    check(rc == 2 and "--limit" in err, "--limit 0: %d %r" % (rc, err))
    rc, out, err = d.ctl("audit")
    check(rc == 2 and "usage" in err, "no id: %d %r" % (rc, err))


def part_f(d, trail):
    lines = file_lines(d.audit_path, SID)
    check(lines == [as_line(e) for e in trail], "audit-log lines %s, want %s"
          % (lines, trail))
    mode = stat.S_IMODE(os.stat(d.audit_path).st_mode)
    check(mode == 0o640, "audit-log mode %o" % mode)
    check("audit-log" not in d.log_text(), "audit-log warnings: %s" %
          [ln for ln in d.log_text().splitlines() if "audit-log" in ln])


async def part_g(d, trail):
    d.kill_workers()
    js = audit_ok(d, "sessionId=" + SID)
    check(js["entries"] == trail, "after the kill: %s" % js)
    # the new owner re-opened it; idle-timeout lets it go
    deadline = time.time() + 20
    while True:
        rc, out, _ = d.ctl("--json", "sessions", check_rc=0)
        if SID not in [s["sessionId"] for s in json.loads(out)["sessions"]]:
            break
        check(time.time() < deadline, "%s still in memory: %s" % (SID, out))
        await asyncio.sleep(0.2)
    js = audit_ok(d, "sessionId=" + SID)
    check(js["entries"] == trail, "out of memory: %s" % js)


async def part_h(d, trail):
    rotated = d.audit_path + ".1"
    os.rename(d.audit_path, rotated)
    before = d.log_text().count("received SIGUSR1")
    d.signal(signal.SIGUSR1)
    deadline = time.time() + 10
    while d.log_text().count("received SIGUSR1") == before:
        check(time.time() < deadline, "SIGUSR1 not logged")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)    # the workers hear it over IPC
    await turn(d, SID)
    now = trail_of(d, SID)
    new = now[len(trail):]
    check(len(new) == 2 and now[:len(trail)] == trail, "trail after the "
          "turn: %s" % now)
    check(file_lines(d.audit_path, SID) == [as_line(e) for e in new],
          "the new file %s, want %s" % (file_lines(d.audit_path), new))
    check(file_lines(rotated, SID) == [as_line(e) for e in trail],
          "the rotated file %s" % file_lines(rotated, SID))


async def main():
    srv = Everything()
    try:
        mcp = ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
               "tool-policy everything__echo high\n" % srv.url())
        d = daemon(mcp)
        with with_daemon(d):
            await wait_mcp(d)
            print("-- part_a", flush=True)
            trail = await part_a(d)
            for p in (part_b, part_c, part_e, part_f):
                print("--", p.__name__, flush=True)
                p(d, trail)
            print("-- part_d", flush=True)
            part_d(d)
            print("-- part_g", flush=True)
            await part_g(d, trail)
            print("-- part_h", flush=True)
            await part_h(d, trail)
    finally:
        srv.stop()


run_test("audit", main)
