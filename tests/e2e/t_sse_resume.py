#!/usr/bin/python3
# SSE: the eventsource package follows /events, drops, reconnects with
# Last-Event-ID; curl replays with Last-Event-ID and ?lastSeq; exactly once;
# a malformed Last-Event-ID is a 400.
import sys, os, subprocess
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "Server-sent events resume after Last-Event-ID. " * 10


def curl_sse(d, path, headers=(), max_time=3, meanwhile=None):
    """Run curl on an SSE URL for max_time s, calling meanwhile() once it
    started; returns (rc, [(id, event, data)])."""
    cmd = ["curl", "-s", "-N", "-m", str(max_time), d.url(path, "http")]
    for h in headers:
        cmd += ["-H", h]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if meanwhile:
            meanwhile()
        out, _ = p.communicate(timeout=max_time + 10)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    evs, cur = [], {}
    for ln in out.decode(errors="replace").split("\n"):
        ln = ln.rstrip("\r")
        if not ln:
            if "data" in cur:
                evs.append((cur.get("id"), cur.get("event"), json.loads(cur["data"])))
            cur = {}
        elif not ln.startswith(":") and ":" in ln:
            k, v = ln.split(":", 1)
            cur[k] = v[1:] if v.startswith(" ") else v
    return p.returncode, evs


def test():
    d = Daemon(providers=provider_block("slow", LONG, chunk=4, delay="5ms"),
               default="slow")
    with with_daemon(d):
        sid = "sse-1"
        # A page opens its EventSource before it posts: the session is
        # created by the GET, and the turn posted after arrives on it.
        def post_first():
            deadline = time.time() + 10
            while d.http("GET", "/sessions/pre-1")[0] != 200:
                check(time.time() < deadline, "GET /events did not create "
                      "the session")
                time.sleep(0.05)
            st, _, _ = d.http("POST", "/sessions/pre-1/messages",
                              {"v": 1, "type": "chat", "message": "hi"})
            check(st == 202, "POST after GET /events -> %d" % st)
        env = dict(os.environ, NODE_PATH=os.path.join(E2E, "node_modules"))
        # The EventSource-first page (curl for 6 s) and the node client's
        # drop and resume (session sse-1) share nothing: at once.
        with ThreadPoolExecutor(2) as ex:
            pre = ex.submit(curl_sse, d, "/sessions/pre-1/events", max_time=6,
                            meanwhile=post_first)
            node = ex.submit(subprocess.run,
                             ["node", os.path.join(E2E, "js", "sse_resume.js"),
                              str(d.port), sid], capture_output=True,
                             timeout=60, env=env)
            _, evs = pre.result()
            p = node.result()
        types = [e[2]["type"] for e in evs]
        check(types[:2] == ["session_state", "user_message"] and
              "done" in types, "EventSource opened first saw %s" % types)
        check(evs[0][2]["status"] == "created" and evs[0][2]["lastSeq"] == 0,
              "first session_state %s" % evs[0][2])
        try:
            res = json.loads(p.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise Fail("node client output %r stderr %r" % (p.stdout[:300], p.stderr[:300]))
        check(res["end"] == "ok", "node client: %s; saw %s" % (res["end"], res["conns"]))
        c1, c2 = res["conns"]
        check(c1[0]["type"] == "session_state" and c2[0]["type"] == "session_state",
              "connections do not start with session_state")
        check(c1[0]["id"] in ("", None), "session_state carries an id: %r" % c1[0]["id"])
        seen = [e for e in c1 + c2 if e.get("seq")]
        for e in seen:
            check(e["id"] == str(e["seq"]), "SSE id %r != seq %r" % (e["id"], e["seq"]))
        check(logged(c2)[0]["seq"] == res["resumeFrom"] + 1,
              "resume after %d started at %s" % (res["resumeFrom"], logged(c2)[0]["seq"]))
        check_contiguous(seen, 1, "eventsource union")
        text = "".join(e["content"] for e in seen if e["type"] == "token")
        check(text == LONG, "streamed text differs: %r" % text[:80])
        last = seen[-1]["seq"]
        # curl with Last-Event-ID and with ?lastSeq replays exactly the
        # rest; without either, live only (the three at once: nothing is
        # posted meanwhile)
        with ThreadPoolExecutor(3) as ex:
            replays = [(how, ex.submit(curl_sse, d, path, hdrs)) for how, path, hdrs in (
                ("Last-Event-ID", "/sessions/%s/events" % sid, ["Last-Event-ID: 5"]),
                ("?lastSeq", "/sessions/%s/events?lastSeq=5" % sid, []))]
            plain = ex.submit(curl_sse, d, "/sessions/%s/events" % sid, [], 2)
            replays = [(how, f.result()) for how, f in replays]
            plain = plain.result()
        for how, (rc, evs) in replays:
            check(rc == 28, "%s: curl ended early (rc %d) on a live stream; got %d events, last %s" % (how, rc, len(evs), [(i, t) for i, t, e in evs][-3:]))
            check(evs and evs[0][1] == "session_state", "%s: first event %s" % (how, evs[:1]))
            rep = [e for i, t, e in evs if i]
            check_contiguous(rep, 6, "curl %s: 5" % how)
            check(rep[-1]["seq"] == last, "curl %s: replay ended at %s, lastSeq %d"
                  % (how, rep[-1]["seq"], last))
        # no lastSeq: live only
        rc, evs = plain
        check([t for i, t, e in evs] == ["session_state"] and evs[0][2]["lastSeq"] == last,
              "plain follow of an idle session: %s" % [(i, t) for i, t, e in evs])
        # a Last-Event-ID that is no id of ours is refused, not dropped
        # (the stream would start live: the client would miss events)
        for bad in ("5.abc", "5x", "5." + "0" * 40, "1" * 40, "-1"):
            st, _, body = d.http("GET", "/sessions/%s/events?lastSeq=5" % sid,
                                 headers={"Last-Event-ID": bad}, timeout=5)
            check(st == 400 and b"Last-Event-ID" in body,
                  "Last-Event-ID %r: %d %r (want 400 naming the header)"
                  % (bad, st, body[:200]))

run_test("sse_resume", test)
