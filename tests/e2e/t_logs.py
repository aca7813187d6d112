#!/usr/bin/python3
# Logs.  log-format json + log-file PATH: every line of the file is one JSON
# object with ts, level, proc, pid and msg; a request id (X-Request-Id on
# the answer, 16 hex digits) marks the connection's line, the session's
# turn line and the provider call's line.  After the file is renamed and
# the supervisor alone gets SIGUSR1, the supervisor and the workers write
# to a new file at PATH and no longer to the renamed one.  `parleyctl log
# level debug` makes debug lines appear.  log-format text (to stderr with
# -d): lines carry req=ID.
import sys, os, signal, re
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

REQ = re.compile(r"^[0-9a-f]{16}$")
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (.+)\[(\d+)\] "
                  r"(error|warn|info|debug): (.*)$")
LEVELS = ("error", "warn", "info", "debug")


def read_json_lines(path, what):
    """Every line of path as JSON, checked; returns the objects."""
    out = []
    with open(path, errors="replace") as f:
        for n, ln in enumerate(f, 1):
            try:
                js = json.loads(ln)
            except ValueError:
                raise Fail("%s line %d is not JSON: %r" % (what, n, ln[:200]))
            check(isinstance(js, dict), "%s line %d: %r" % (what, n, ln[:200]))
            for k in ("ts", "level", "proc", "pid", "msg"):
                check(k in js, "%s line %d has no %r: %r" % (what, n, k, ln[:200]))
            check(TS.match(js["ts"]), "%s line %d: ts %r" % (what, n, js["ts"]))
            check(js["level"] in LEVELS, "%s line %d: level %r"
                  % (what, n, js["level"]))
            check(isinstance(js["pid"], int), "%s line %d: pid %r"
                  % (what, n, js["pid"]))
            for k in ("req", "session"):
                check(k not in js or isinstance(js[k], str),
                      "%s line %d: %s %r" % (what, n, k, js.get(k)))
            if "req" in js:
                check(REQ.match(js["req"]), "%s line %d: req %r"
                      % (what, n, js["req"]))
            out.append(js)
    return out


async def ws_turn(d, sid, message):
    """One turn on /sessions/sid/stream; returns (X-Request-Id, events)."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    try:
        rid = ws.response_headers.get("X-Request-Id")
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": message})
        ev = await ws_until(ws, is_done, timeout=30)
        return rid, ev
    finally:
        await ws.close()


def wait_lines(path, pred, what, timeout=5):
    deadline = time.time() + timeout
    while True:
        lines = read_json_lines(path, what) if os.path.exists(path) else []
        if pred(lines):
            return lines
        if time.time() > deadline:
            raise Fail("%s: timed out; last lines: %s" % (
                what, [(j.get("proc"), j.get("level"), j.get("msg", "")[:60])
                       for j in lines[-8:]]))
        time.sleep(0.1)


async def json_file():
    d = Daemon(workers=2)
    path = os.path.join(d.tmp, "parleyd.json.log")
    d.extra = "log-format json\nlog-file %s\n" % path
    d.write_conf()
    with with_daemon(d):
        sup = d.proc.pid
        workers = d.workers_pids()
        sid = "logs-1"
        rid, ev = await ws_turn(d, sid, "hi")
        one_done(ev, "the chat")
        check(rid and REQ.match(rid), "WebSocket handshake: X-Request-Id %r"
              % rid)
        st, h, _ = d.http("GET", "/sessions/%s" % sid)
        hrid = h.get("x-request-id")
        check(st == 200 and hrid and REQ.match(hrid), "GET /sessions/%s: %d, "
              "X-Request-Id %r, want 16 hex digits" % (sid, st, hrid))
        check(rid != hrid, "two requests with one request id %s" % rid)

        lines = wait_lines(path, lambda ls: any(
            j.get("req") == rid and j.get("session") == sid for j in ls),
            "the turn's line with req and session")
        procs = {j["pid"] for j in lines}
        check(sup in procs, "no line from the supervisor (%d) in %s"
              % (sup, sorted(procs)))
        check(procs & set(workers), "no line from a worker %s in %s"
              % (workers, sorted(procs)))
        mine = [j for j in lines if j.get("req") == rid]
        print("lines of request %s:" % rid)
        for j in mine:
            print("   %s %s %s session=%s %s" % (j["proc"], j["pid"], j["level"],
                                                 j.get("session"), j["msg"]))
        missing = []
        if not [j for j in mine if "session" not in j or
                re.search(r"connect|accept|websocket|upgrade|handed|route",
                          j["msg"], re.I)]:
            missing.append("a connection line")
        if not [j for j in mine if j.get("session") == sid and
                re.search(r"turn|chat|message", j["msg"], re.I)]:
            missing.append("a turn line with the session")
        if not [j for j in mine if re.search(r"provider|llm|model", j["msg"],
                                            re.I)]:
            missing.append("a provider call line")
        check(not missing, "request %s has no %s; its lines: %s" % (
            rid, ", ".join(missing), [j["msg"][:80] for j in mine]))
        check(not [j for j in lines if j["level"] == "debug"],
              "debug lines at log-level info")

        # logrotate: rename, SIGUSR1 to the supervisor only, new file.
        os.rename(path, path + ".1")
        d.signal(signal.SIGUSR1)
        await asyncio.sleep(0.5)
        check(d.proc.poll() is None, "parleyd exited on SIGUSR1")
        rid2, ev = await ws_turn(d, "logs-2", "again")
        one_done(ev, "the chat after SIGUSR1")
        d.http("GET", "/api/info")
        lines = wait_lines(path, lambda ls: {j["pid"] for j in ls} & set(workers)
                           and sup in {j["pid"] for j in ls},
                           "lines of the supervisor and a worker in the new file")
        check(any(j.get("req") == rid2 for j in lines),
              "request %s not in the new file" % rid2)
        old = read_json_lines(path + ".1", "the renamed file")
        check(not [j for j in old if j.get("req") == rid2 or
                   j.get("session") == "logs-2"],
              "lines of a request after SIGUSR1 went to the renamed file")
        check(set(d.workers_pids()) == set(workers),
              "workers replaced by SIGUSR1")

        # parleyctl log level debug: debug lines appear.
        d.ctl("log", "level", "debug", check_rc=0)
        rid3, ev = await ws_turn(d, "logs-3", "debug me")
        one_done(ev, "the chat at debug level")
        lines = wait_lines(path, lambda ls: any(j["level"] == "debug"
                                                for j in ls),
                           "debug lines after parleyctl log level debug")
        dbg = {j["pid"] for j in lines if j["level"] == "debug"}
        print("debug lines from %s" % sorted(dbg))
        check(dbg & set(workers), "debug lines only from %s, none from a "
              "worker %s" % (sorted(dbg), workers))
        d.ctl("log", "level", "info", check_rc=0)

        # The supervisor's own answers carry a request id too.
        ids = set()
        for p in ("/api/info", "/health/ready", "/metrics", "/no/such/path"):
            st, h, _ = d.http("GET", p)
            hrid = h.get("x-request-id")
            check(hrid and REQ.match(hrid), "GET %s (%d): X-Request-Id %r, "
                  "want 16 hex digits" % (p, st, hrid))
            ids.add(hrid)
        check(len(ids) == 4, "four requests, request ids %s" % ids)


async def text_stderr():
    d = Daemon(workers=1, extra="log-format text\n")
    with with_daemon(d):
        rid, ev = await ws_turn(d, "logs-t", "hi")
        one_done(ev, "the chat")
        deadline = time.time() + 5
        while time.time() < deadline and ("req=%s" % rid) not in d.log_text():
            await asyncio.sleep(0.1)
        text = d.log_text().splitlines()
        mine = [ln for ln in text if ("req=%s " % rid) in ln]
        check(mine, "no text line carries req=%s; log tail: %s"
              % (rid, d.log_tail()))
        for ln in mine:
            m = TEXT.match(ln)
            check(m, "text line not TIME PROC[PID] LEVEL: ...: %r" % ln)
            check(m.group(4).startswith("req=%s " % rid),
                  "req= not first after the level: %r" % ln)
        check([ln for ln in mine if "session=logs-t " in ln],
              "no text line with req=%s and session=logs-t" % rid)
        for ln in text:
            if ln.startswith("=") or "Sanitizer" in ln or not ln.strip():
                continue
            check(TEXT.match(ln) or ln == "configuration OK",
                  "text line in another format: %r" % ln)


async def test():
    print("-- log-format json, log-file PATH", flush=True)
    await json_file()
    print("-- log-format text on stderr", flush=True)
    await text_stderr()

run_test("logs", test)
