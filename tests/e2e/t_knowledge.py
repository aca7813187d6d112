#!/usr/bin/python3
# A project's knowledge graph end to end (the session kg:P; the endpoints
# /knowledge/P, parley-knowledge(7)), on either store:
#  1. POST /knowledge/P/actions: 202 with the seq, a repeat (batchId, or
#     the Idempotency-Key header) 200 "duplicate" with the same seq; a bad
#     batch 400 INVALID_ACTION naming the action, op and field, nothing
#     logged; an observer's refused; a bad projectId 400;
#  2. over the WebSocket of /knowledge/P/stream: knowledge_act acked with
#     the knowledge_batch's seq (seen on the stream), a repeat acked as a
#     duplicate, INVALID_ACTION with its fields; knowledge_query answered
#     to the requester only; chat refused (also through POST
#     /sessions/kg:P/messages), nothing logged;
#  3. queries: sexp and json, an error as data, an absent project an
#     empty graph that is not created;
#  4. GET export as JSON and Markdown; ?at=SEQ rebuilds an earlier state;
#  5. the stream resumes exactly: WebSocket with lastSeq after a cut, SSE
#     (curl) with ?after= and Last-Event-ID;
#  6. more than 64 batches, every worker SIGKILLed: the same graph, read
#     from the snapshot (the log says so);
#  7. workers SIGKILLed while batches are posted: every acknowledged batch
#     is in the log and in the graph;
#  8. retention: with a 2 s retention an idle ordinary session expires,
#     the project (its log from seq 1) does not.
import sys, os, re, subprocess, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

P = "proj-1"
SID = "kg:" + P
OBS = "obs-tok"


def principle(name, conf=None, desc="d"):
    f = {"name": name, "description": desc}
    if conf is not None:
        f["confidence"] = conf
    return ["record-principle", f]


def act(d, actions, batch=None, headers=None, project=P):
    body = {"actions": actions}
    if batch is not None:
        body["batchId"] = batch
    return d.http_json("POST", "/knowledge/%s/actions" % project, body,
                       headers)


def query(d, q, fmt=None, project=P):
    body = {"query": q}
    if fmt:
        body["format"] = fmt
    st, js = d.http_json("POST", "/knowledge/%s/query" % project, body)
    check(st == 200, "query %s -> %s %s" % (q, st, js))
    return js


def export(d, q=""):
    st, js = d.http_json("GET", "/knowledge/%s%s" % (P, q))
    check(st == 200, "GET /knowledge/%s%s -> %s %s" % (P, q, st, js))
    return js


def names(js):
    return sorted(p["name"] for p in js["principles"])


def curl_sse(d, path, headers=(), max_time=3):
    cmd = ["curl", "-s", "-N", "-m", str(max_time), d.url(path, "http")]
    for h in headers:
        cmd += ["-H", h]
    p = subprocess.run(cmd, capture_output=True, timeout=max_time + 10)
    evs, cur = [], {}
    for ln in p.stdout.decode(errors="replace").split("\n"):
        ln = ln.rstrip("\r")
        if not ln:
            if "data" in cur:
                evs.append((cur.get("id"), json.loads(cur["data"])))
            cur = {}
        elif not ln.startswith(":") and ":" in ln:
            k, v = ln.split(":", 1)
            cur[k] = v[1:] if v.startswith(" ") else v
    return evs


async def ws_open(d, q=""):
    ws = await ws_connect(d.url("/knowledge/%s/stream%s" % (P, q)))
    st = await ws_recv(ws)
    check(st["type"] == "session_state", "first event %s" % st)
    return ws


async def ws_ask(ws, msg, types):
    await ws_send(ws, dict(msg, v=1, sessionId=SID))
    got = await ws_until(ws, lambda e: e.get("id") == msg.get("id") and
                         e.get("type") in types, 20)
    return got[-1], got


async def part_http(d):
    print("-- 1: POST actions", flush=True)
    st, js = d.http_json("GET", "/knowledge/%s" % P)
    check(st == 200 and js["principles"] == [] and js["seq"] == 0,
          "absent project's export -> %s %s" % (st, js))
    js = query(d, "(get-principles)")
    check(js["format"] == "sexp" and "error" not in js,
          "absent project's query -> %s" % js)
    st, _ = d.http_json("GET", "/sessions/%s" % SID)
    check(st == 404, "a read created the project: GET /sessions -> %s" % st)
    st, js = act(d, [principle("small-functions", 0.8,
                               "Keep functions short")], "b-1")
    check(st == 202 and js["seq"] == 1 and js["batchId"] == "b-1" and
          js["actions"] == 1, "first act -> %s %s" % (st, js))
    st, js = act(d, [principle("small-functions", 0.8)], "b-1")
    check(st == 200 and js.get("duplicate") is True and js["seq"] == 1,
          "repeat -> %s %s" % (st, js))
    st, js = act(d, [principle("errors-as-data", 0.9)], None,
                 {"Idempotency-Key": "k-2"})
    check(st == 202 and js["seq"] == 2 and js["batchId"] == "k-2",
          "Idempotency-Key act -> %s %s" % (st, js))
    st, js = act(d, [principle("errors-as-data", 0.9)], None,
                 {"Idempotency-Key": "k-2"})
    check(st == 200 and js.get("duplicate") and js["seq"] == 2,
          "Idempotency-Key repeat -> %s %s" % (st, js))
    before = d.last_seq(SID)
    st, js = act(d, [principle("ok-one", 0.5),
                     ["record-pattern", {"name": "p", "type": "t",
                                         "description": "x",
                                         "confidence": "high"}]], "bad-1")
    e = js.get("error", {}) if js else {}
    check(st == 400 and e.get("code") == "INVALID_ACTION" and
          e.get("action") == 1 and e.get("op") == "record-pattern" and
          e.get("field") == "confidence" and "confidence" in e["message"],
          "invalid batch -> %s %s" % (st, js))
    st, js = act(d, [["delete-principle", {"name": "nope"}]], "bad-2")
    check(st == 400 and js["error"]["code"] == "INVALID_ACTION" and
          js["error"]["field"] == "name", "delete of nothing -> %s" % js)
    check(d.last_seq(SID) == before, "an invalid batch was logged")
    st, js = act(d, [principle("x")], "obs-1",
                 {"Authorization": "Bearer " + OBS})
    check(st == 403, "observer's act -> %s %s" % (st, js))
    st, js = d.http_json("POST", "/knowledge/%s/query" % P,
                         {"query": "(get-principles)"},
                         {"Authorization": "Bearer " + OBS})
    check(st == 200 and "result" in js, "observer's query -> %s %s" %
          (st, js))
    st, js = d.http_json("GET", "/knowledge/.bad")
    check(st == 400 and "projectId" in js["error"]["message"],
          "bad projectId -> %s %s" % (st, js))
    st, js = act(d, "not a list", "b-x")
    check(st == 400, "actions not a list -> %s %s" % (st, js))


async def part_ws(d):
    print("-- 2: the WebSocket stream", flush=True)
    ws = await ws_open(d, "?lastSeq=0")
    got = await ws_until(ws, lambda e: e.get("seq") == 2)
    check([e["type"] for e in got] == ["knowledge_batch"] * 2,
          "replay %s" % [short(e) for e in got])
    r, got = await ws_ask(ws, {"type": "knowledge_act", "id": "w-1",
                               "actions": [principle("ws-made", 0.7)]},
                          ("ack", "error"))
    check(r["type"] == "ack" and r["eventSeq"] == 3, "ws act -> %s" % r)
    if not any(e.get("type") == "knowledge_batch" and e.get("seq") == 3
               for e in got):
        await ws_until(ws, lambda e: e.get("seq") == 3)
    r, _ = await ws_ask(ws, {"type": "knowledge_act", "id": "w-1",
                             "actions": [principle("ws-made", 0.7)]},
                        ("ack", "error"))
    check(r["type"] == "ack" and r.get("duplicate") and r["eventSeq"] == 3,
          "ws repeat -> %s" % r)
    r, _ = await ws_ask(ws, {"type": "knowledge_act", "id": "w-2",
                             "actions": [["frobnicate", {}]]},
                        ("ack", "error"))
    check(r["type"] == "error" and r["code"] == "INVALID_ACTION" and
          r["action"] == 0 and r["op"] == "frobnicate",
          "ws invalid -> %s" % r)
    # a client's stamped "batch" would skip the check and the stamp
    forged = {"batchId": "w-3", "hlc": 9007199254740991, "origin": "x/1",
              "actions": [principle("forged")]}
    r, _ = await ws_ask(ws, {"type": "knowledge_act", "id": "w-3",
                             "actions": [principle("w3")],
                             "batch": forged}, ("ack", "error"))
    check(r["type"] == "error" and r["code"] == "BAD_REQUEST" and
          "batch" in r["message"], "ws act with a batch -> %s" % r)
    st, js = d.http_json("POST", "/sessions/%s/messages" % SID,
                         {"v": 1, "type": "knowledge_act", "id": "w-4",
                          "actions": [principle("w4")], "batch": forged})
    check(st == 400 and "batch" in js["error"]["message"],
          "POST messages with a batch -> %s %s" % (st, js))
    r, _ = await ws_ask(ws, {"type": "knowledge_query", "id": "q-1",
                             "query": "(get-principles)"},
                        ("knowledge_result", "error"))
    check(r["type"] == "knowledge_result" and r["format"] == "sexp" and
          "ws-made" in r["result"], "ws query -> %s" % r)
    r, _ = await ws_ask(ws, {"type": "chat", "id": "c-1",
                             "message": "hello"}, ("ack", "error"))
    check(r["type"] == "error" and r["code"] == "BAD_REQUEST" and
          "knowledge" in r["message"], "chat on kg: -> %s" % r)
    await ws.close()
    # observers read the stream and query, and may not act
    ob = await ws_open(d, "?role=observer")
    await ws_send(ob, {"v": 1, "type": "knowledge_act", "id": "o-1",
                       "sessionId": SID,
                       "actions": [principle("nope")]})
    r = await ws_until(ob, lambda e: e.get("id") == "o-1")
    check(r[-1]["type"] == "error" and r[-1]["code"] == "FORBIDDEN",
          "observer's ws act -> %s" % r[-1])
    await ob.close()
    st, js = d.http_json("POST", "/sessions/%s/messages" % SID,
                         {"v": 1, "type": "chat", "message": "hi"})
    check(st == 400 and "knowledge" in js["error"]["message"],
          "chat via POST messages -> %s %s" % (st, js))
    st, js = d.http_json("POST", "/sessions", {"sessionId": "plain-1"})
    check(st == 201, "POST /sessions -> %s" % st)
    st, js = d.http_json("POST", "/sessions/plain-1/messages",
                         {"v": 1, "type": "knowledge_query",
                          "query": "(get-principles)"})
    check(st == 400 and "kg:" in js["error"]["message"],
          "knowledge_query on an ordinary session -> %s %s" % (st, js))
    check(d.last_seq(SID) == 3, "refusals were logged")


async def part_query(d):
    print("-- 3, 4: queries, exports, ?at=", flush=True)
    js = query(d, "(get-principles)")
    check("small-functions" in js["result"] and
          "errors-as-data" in js["result"], "sexp -> %s" % js)
    js = query(d, "(get-principles)", "json")
    check(isinstance(js["result"], list) and sorted(
        p["name"] for p in js["result"]) == ["errors-as-data",
                                              "small-functions", "ws-made"],
          "json -> %s" % js)
    js = query(d, "(no-such-function 1)")
    check(js["error"]["code"] in ("QUERY_ERROR", "QUERY_SYNTAX") and
          js["format"] == "sexp", "error as data -> %s" % js)
    js = query(d, "(get-principles", "json")
    check(js["error"]["code"] == "QUERY_SYNTAX", "syntax -> %s" % js)
    st, js = d.http_json("POST", "/knowledge/%s/query" % P,
                         {"query": "(get-principles)", "format": "xml"})
    check(st == 400, "format xml -> %s %s" % (st, js))
    js = query(d, "(get-principles)", project="never-made")
    check("error" not in js, "absent project query -> %s" % js)
    st, _ = d.http_json("GET", "/sessions/kg:never-made")
    check(st == 404, "a query created the project")
    full = export(d)
    check(names(full) == ["errors-as-data", "small-functions", "ws-made"]
          and full["seq"] == 3 and full["batches"] == 3 and full["hlc"] > 0,
          "export %s" % full)
    at1 = export(d, "?at=1")
    check(names(at1) == ["small-functions"] and at1["seq"] == 1,
          "?at=1 -> %s" % at1)
    check(export(d, "?at=0")["principles"] == [], "?at=0 not empty")
    st, h, body = d.http("GET", "/knowledge/%s?format=md" % P)
    text = body.decode()
    check(st == 200 and h["content-type"].startswith("text/markdown") and
          "small-functions" in text and "Keep functions short" in text,
          "markdown -> %s %s %r" % (st, h.get("content-type"), text[:200]))
    st, js = d.http_json("GET", "/knowledge/%s?at=x" % P)
    check(st == 400, "?at=x -> %s" % st)


async def part_resume(d):
    print("-- 5: exact resume, WebSocket and SSE", flush=True)
    ws = await ws_open(d, "?lastSeq=1")
    got = await ws_until(ws, lambda e: e.get("seq") == 3)
    check([e["seq"] for e in got] == [2, 3], "from 1: %s" %
          [short(e) for e in got])
    await ws.close()    # the cut
    for i in range(3):
        st, js = act(d, [principle("r-%d" % i, 0.1)], "r-%d" % i)
        check(st == 202, "act r-%d -> %s %s" % (i, st, js))
    ws = await ws_open(d, "?lastSeq=3")
    got = await ws_until(ws, lambda e: e.get("seq") == 6)
    check([e["seq"] for e in got] == [4, 5, 6] and
          got[0]["batchId"] == "r-0", "resumed %s" %
          [short(e) for e in got])
    await ws.close()
    # resume as the first message, as on a session stream
    ws = await ws_open(d)
    await ws_send(ws, {"v": 1, "type": "resume", "sessionId": SID,
                       "lastSeq": 4})
    got = await ws_until(ws, lambda e: e.get("seq") == 6)
    check([e["seq"] for e in got] == [5, 6], "resume message: %s" %
          [short(e) for e in got])
    await ws.close()
    evs = curl_sse(d, "/knowledge/%s/stream?after=2" % P)
    seqs = [e[1].get("seq") for e in evs if e[1].get("seq")]
    check(evs and evs[0][1]["type"] == "session_state" and
          seqs == [3, 4, 5, 6] and evs[-1][0] == "6",
          "SSE ?after=2 -> %s" % [(i, e.get("type")) for i, e in evs])
    evs = curl_sse(d, "/knowledge/%s/stream" % P, ["Last-Event-ID: 4"])
    seqs = [e[1].get("seq") for e in evs if e[1].get("seq")]
    check(seqs == [5, 6], "SSE Last-Event-ID 4 -> %s" % seqs)


async def part_snapshot(d):
    print("-- 6: snapshot, workers killed", flush=True)
    n0 = export(d)["batches"]
    for i in range(70):
        st, js = act(d, [principle("s-%02d" % i, (i % 10) / 10.0)],
                     "s-%d" % i)
        check(st == 202, "act s-%d -> %s %s" % (i, st, js))
    before = export(d)
    check(before["batches"] == n0 + 70, "batches %s" % before["batches"])
    deadline = time.time() + 10
    while "knowledge snapshot at seq" not in d.log_text():
        check(time.time() < deadline, "no snapshot written: %s" %
              d.log_tail())
        time.sleep(0.1)
    d.kill_workers()
    after = export(d)
    check(after == before, "state after SIGKILL differs:\n%s\n%s" %
          (before, after))
    check(re.search(r"session kg:%s: knowledge read from its snapshot at "
                    r"seq \d+" % P, d.log_text()) is not None,
          "the load did not read the snapshot: %s" % d.log_tail())


async def part_kill(d):
    print("-- 7: workers killed mid-writes", flush=True)
    acked, stop = [], threading.Event()

    def writer(k):
        i = 0
        while not stop.is_set():
            try:
                st, js = act(d, [principle("k%d-%d" % (k, i))],
                             "k%d-%d" % (k, i))
                if st in (200, 202):
                    acked.append(("k%d-%d" % (k, i), js["seq"]))
            except (OSError, ValueError, Fail):
                pass
            i += 1
    ts = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    time.sleep(0.5)
    d.kill_workers()
    time.sleep(0.5)
    stop.set()
    for t in ts:
        t.join(30)
    check(len(acked) > 5, "only %d batches acknowledged" % len(acked))
    evs = d.log_events(SID)
    logged = {e["batchId"]: e["seq"] for e in evs
              if e["type"] == "knowledge_batch"}
    lost = [(b, s) for b, s in acked if logged.get(b) != s]
    check(not lost, "acknowledged but not logged at their seq: %s" %
          lost[:5])
    check_seqs([e["seq"] for e in evs], 1, "the project's log")
    have = set(names(export(d)))
    missing = [b for b, _ in acked if b not in have]
    check(not missing, "acknowledged but not in the graph: %s" %
          missing[:5])


async def part_absent(d):
    print("-- 0: refusals and reads create no project", flush=True)
    for i, acts in enumerate(([], [["nope", {}]],
                              [["add-evidence", {"name": "x",
                                                 "evidence": "e"}]])):
        st, js = act(d, acts, project="junk%d" % i)
        check(st == 400, "a refused first batch -> %s %s" % (st, js))
        st, _ = d.http_json("GET", "/sessions/kg:junk%d" % i)
        check(st == 404, "a refused batch created kg:junk%d (%s)" % (i, st))
    st, js = act(d, [["nope", {}]], project="junk1")
    check(st == 400 and js["error"]["code"] == "INVALID_ACTION" and
          js["error"]["op"] == "nope", "INVALID_ACTION on an absent "
          "project -> %s %s" % (st, js))
    st, _, body = d.http("GET", "/knowledge/nothere/stream")
    check(st == 404 and b"/knowledge/nothere/actions" in body and
          b"chat" not in body, "SSE of an absent project -> %s %s" %
          (st, body))
    try:
        ws = await ws_connect(d.url("/knowledge/nothere/stream"))
        await ws.close()
        check(False, "a WebSocket opened on an absent project")
    except Exception as e:
        check("404" in str(e), "WS on an absent project -> %s" % e)
    st, _ = d.http_json("GET", "/sessions/kg:nothere")
    check(st == 404, "reading the stream created kg:nothere (%s)" % st)
    st, js = d.http_json("POST", "/knowledge/nothere/query",
                         {"query": "(get-principles)"})
    check(st == 200, "query on an absent project -> %s %s" % (st, js))
    st, _ = d.http_json("GET", "/sessions/kg:nothere")
    check(st == 404, "a query created kg:nothere (%s)" % st)


async def part_at(d):
    print("-- 9: ?at= bounds; the session_state has no agents", flush=True)
    cur = export(d)
    for q in ("18446744073709551615", "18446744073709551616", "-1", "1e3",
              "", "x", "99999999999999999999999"):
        st, js = d.http_json("GET", "/knowledge/%s?at=%s" % (P, q))
        check(st == 400 and "at" in js["error"]["message"],
              "?at=%s -> %s %s" % (q, st, js))
    js = export(d, "?at=%d" % (cur["seq"] + 1000))
    check(js["seq"] == cur["seq"] and names(js) == names(cur),
          "?at= past the end -> %s, want the current graph" % js["seq"])
    js = export(d, "?at=1")
    check(js["seq"] == 1, "?at=1 -> %s" % js["seq"])
    ws = await ws_open(d, "?lastSeq=%d" % cur["seq"])
    await ws.close()
    ws = await ws_connect(d.url("/knowledge/%s/stream" % P))
    st = await ws_recv(ws)
    await ws.close()
    check(st["type"] == "session_state" and st.get("agents") == [] and
          st.get("status") != "created", "session_state of a project: %s" %
          st)


async def main():
    d = Daemon(token="adm-tok", extra="token %s role observer\n" % OBS)
    with with_daemon(d):
        await part_absent(d)
        await part_http(d)
        await part_ws(d)
        await part_query(d)
        await part_resume(d)
        await part_snapshot(d)
        await part_kill(d)
        await part_at(d)

    print("-- 8: retention keeps the project", flush=True)
    d = Daemon(retention="2s", idle_timeout="1s")
    with with_daemon(d):
        st, js = act(d, [principle("kept", 1)], "keep-1", project="ret")
        check(st == 202, "act -> %s %s" % (st, js))
        st, _ = d.http_json("POST", "/sessions", {"sessionId": "gone-1"})
        check(st == 201, "POST /sessions -> %s" % st)
        # Untouched (a read would load it again): idle after 1 s, past
        # its 2 s retention then, removed by the next sweep (local) or
        # by its keys' TTL (Redis).
        await asyncio.sleep(7)
        st, _ = d.http_json("GET", "/sessions/gone-1")
        check(st == 404, "the ordinary session did not expire: %s" % st)
        st, js = d.http_json("GET", "/knowledge/ret")
        check(st == 200 and [p["name"] for p in js["principles"]] ==
              ["kept"], "the project after retention -> %s %s" % (st, js))
        evs = d.log_events("kg:ret")
        check(evs and evs[0]["seq"] == 1, "the project's log was trimmed: "
              "%s" % [short(e) for e in evs])


if __name__ == "__main__":
    run_test("knowledge", main)
