#!/usr/bin/python3
# Staleness of knowledge (parley-knowledge(7); workers/kgstale.c): a
# parleyd whose index-root is a scratch directory, watched (index-watch
# yes), indexed by POST /api/index; project P records file
# understandings with the files' real SHA-256, a pattern located at
# "a.c:3" and a principle at ["a.c:1"]; with P's stream open (WebSocket):
#  1. a.c changed on disk: within 10 s one knowledge_stale arrives naming
#     a.c, the new hash, was = the recorded one, and the entities that
#     refer to a.c (its understanding, the pattern, the principle; not
#     b.c's); the same event replays over SSE (?after=0); (get-stale)
#     lists them (JSON and S-expression answers); nothing is reported
#     twice for the same change;
#  2. a.c recorded again at its new hash: its understanding is no longer
#     stale (the pattern and principle still are, until reviewed);
#  3. an understanding recorded with an already outdated hash is marked
#     stale at once (the owner's check after each batch): within 3 s;
#  4. a file removed from disk: knowledge_stale with hash "" once the
#     watcher's build dropped it;
#  5. an understanding recorded without a hash, or of a file the index
#     does not hold, is never stale.
import sys, os, hashlib, shutil, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADM = "t-adm"
P = "stale-proj"

A_C = "int\nmain(void)\n{\n\treturn 0;\n}\n"
A_C2 = "int\nmain(void)\n{\n\treturn 1;\t/* changed */\n}\n"
B_C = "int b;\n"
C_C = "int c;\n"


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def status(d):
    st, js = d.http_json("GET", "/api/index/status")
    check(st == 200, "GET /api/index/status -> %s %s" % (st, js))
    return js


def wait_idle(d, timeout=60):
    deadline = time.time() + timeout
    while True:
        js = status(d)
        if js.get("state") in ("idle", "failed"):
            check(js["state"] == "idle", "the build failed: %s" % js)
            return js
        check(time.time() < deadline, "the build did not end: %s" % js)
        time.sleep(0.1)


def act(d, actions, want=202):
    st, js = d.http_json("POST", "/knowledge/%s/actions" % P,
                         {"actions": actions})
    check(st == want, "POST /knowledge/%s/actions %s -> %s %s"
          % (P, actions, st, js))
    return js


def query(d, q, fmt="json"):
    st, js = d.http_json("POST", "/knowledge/%s/query" % P,
                         {"query": q, "format": fmt})
    check(st == 200 and "error" not in js and js.get("format") == fmt,
          "query %s (%s) -> %s %s" % (q, fmt, st, js))
    return js["result"]


def stale_keys(d):
    """(kind, name) of what (get-stale) lists."""
    res = query(d, "(get-stale)")
    check(isinstance(res, list), "(get-stale) JSON answer %r" % res)
    return sorted((e.get("kind"), e.get("path") or e.get("name") or
                   e.get("from")) for e in res)


def field(e, k):
    """An event's field, at the top or in a body/data object."""
    if k in e:
        return e[k]
    for inner in ("body", "data"):
        if isinstance(e.get(inner), dict) and k in e[inner]:
            return e[inner][k]
    return None


async def next_stale(ws, path, timeout, seen):
    """The next knowledge_stale for path on ws (others kept in seen)."""
    got = await ws_until(ws, lambda e: e.get("type") == "knowledge_stale"
                         and field(e, "path") == path, timeout, into=seen)
    return got[-1]


async def quiet(ws, secs, seen):
    """Reads ws for secs; returns the knowledge_stale events it brought."""
    out = []
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            e = await ws_recv(ws, deadline - time.time())
        except asyncio.TimeoutError:
            break
        seen.append(e)
        if e.get("type") == "knowledge_stale":
            out.append(e)
    return out


def curl_sse(d, path, max_time):
    cmd = ["curl", "-s", "-N", "-m", str(max_time), d.url(path, "http")]
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


def write(root, rel, text):
    with open(os.path.join(root, rel), "w") as f:
        f.write(text)


async def test():
    base = tempfile.mkdtemp(prefix="parley-kgstale-", dir="/tmp")
    root = os.path.join(base, "root")
    os.makedirs(root)
    for rel, text in (("a.c", A_C), ("b.c", B_C), ("c.c", C_C)):
        write(root, rel, text)
    os.mkdir(os.path.join(root, "node_modules"))
    write(root, "node_modules/x.js", "module.exports = 1;\n")
    d = Daemon(extra="index-root %s\nindex-watch yes\n" % root, token=ADM)
    try:
        with with_daemon(d):
            await body(d, root)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def body(d, root):
    st, js = d.http_json("POST", "/api/index", {"path": root})
    check(st == 202, "POST /api/index -> %s %s" % (st, js))
    js = wait_idle(d)
    check(js.get("progress", {}).get("indexedFiles") == 3,
          "indexed: %s" % js)
    deadline = time.time() + 20
    while not status(d)["watching"]:
        check(time.time() < deadline, "not watching after 20 s")
        await asyncio.sleep(0.1)

    h1 = sha(A_C)
    r = act(d, [
        ["record-file-understanding", {"path": "a.c", "hash": h1,
                                       "summary": "the main program"}],
        ["record-file-understanding", {"path": "b.c", "hash": sha(B_C),
                                       "summary": "b"}],
        # no hash: never judged, whatever the file holds
        ["record-file-understanding", {"path": "c.c", "summary": "c"}],
        # not in the index (a default exclude): never judged
        ["record-file-understanding", {"path": "node_modules/x.js",
                                       "hash": "0" * 64, "summary": "x"}],
        ["record-pattern", {"name": "early-return", "type": "idiom",
                            "description": "main returns at once",
                            "confidence": 0.8, "location": "a.c:3"}],
        ["record-principle", {"name": "tiny-main",
                              "description": "main stays tiny",
                              "confidence": 0.9, "locations": ["a.c:1"]}],
        ["record-decision", {"name": "b-only", "description": "about b",
                             "rationale": "r", "status": "active",
                             "locations": ["b.c:1"]}],
    ])
    check(r.get("actions") == 7 and r.get("seq", 0) >= 1,
          "the first batch: %s" % r)

    seen = []
    ws = await ws_connect(d.url("/knowledge/%s/stream" % P))
    try:
        # the owner's after-batch check found nothing stale
        early = await quiet(ws, 2.5, seen)
        check(early == [], "stale before any change: %s" % early)
        check(stale_keys(d) == [], "(get-stale) before any change: %s"
              % stale_keys(d))

        # -- 1. a.c changes ---------------------------------------------
        t0 = time.time()
        write(root, "a.c", A_C2)
        h2 = sha(A_C2)
        e = await next_stale(ws, "a.c", 10, seen)
        print("a changed file marked stale in %.2f s" % (time.time() - t0))
        check(field(e, "hash") == h2 and field(e, "was") == h1,
              "knowledge_stale hash/was: %s" % e)
        ents = sorted((x["kind"], x["name"]) for x in field(e, "entities"))
        check(ents == [("file", "a.c"), ("pattern", "early-return"),
                       ("principle", "tiny-main")],
              "knowledge_stale entities: %s" % ents)
        check(isinstance(field(e, "hlc"), (int, float)) and
              isinstance(field(e, "origin"), str) and
              isinstance(e.get("seq"), int),
              "knowledge_stale without hlc, origin or seq: %s" % e)
        want = [("file", "a.c"), ("pattern", "early-return"),
                ("principle", "tiny-main")]
        check(stale_keys(d) == want, "(get-stale): %s" % stale_keys(d))
        sx = query(d, "(get-stale)", "sexp")
        check('"a.c"' in sx and '"early-return"' in sx and
              '"tiny-main"' in sx and '"b.c"' not in sx,
              "(get-stale) sexp: %s" % sx)
        # the same event over SSE, by its seq
        sse = curl_sse(d, "/knowledge/%s/stream?after=0" % P, 3)
        same = [x for x in sse if x[1].get("type") == "knowledge_stale"]
        check(len(same) == 1 and same[0][1].get("seq") == e["seq"] and
              same[0][0] == str(e["seq"]) and
              field(same[0][1], "hash") == h2,
              "SSE replay: %s" % [x[1] for x in same])
        # one change, one event (the 1 s timer saw it already)
        more = await quiet(ws, 2.5, seen)
        check(more == [], "reported twice: %s" % more)

        # -- 2. recorded again at the new hash --------------------------
        act(d, [["record-file-understanding", {
            "path": "a.c", "hash": h2, "summary": "main returns 1"}]])
        check(stale_keys(d) == [("pattern", "early-return"),
                                ("principle", "tiny-main")],
              "(get-stale) after a.c was recorded again: %s"
              % stale_keys(d))
        st, js = d.http_json("GET", "/knowledge/%s" % P)
        check(st == 200, "GET /knowledge/%s -> %s" % (P, st))
        fa = [f for f in js["files"] if f.get("path") == "a.c"]
        check(len(fa) == 1 and not fa[0].get("stale") and
              fa[0].get("hash") == h2, "a.c after it was recorded again: %s"
              % fa)
        more = await quiet(ws, 2.0, seen)
        check(more == [], "stale again after a fresh record: %s" % more)

        # -- 3. recorded with an outdated hash --------------------------
        t0 = time.time()
        act(d, [["record-file-understanding", {
            "path": "c.c", "hash": sha("int c_old;\n"), "summary": "c"}]])
        e = await next_stale(ws, "c.c", 3, seen)
        print("an outdated record marked stale in %.2f s"
              % (time.time() - t0))
        check(field(e, "hash") == sha(C_C) and
              field(e, "was") == sha("int c_old;\n"),
              "c.c knowledge_stale: %s" % e)
        check(("file", "c.c") in stale_keys(d), "c.c not in (get-stale)")

        # -- 4. a file removed ------------------------------------------
        os.unlink(os.path.join(root, "b.c"))
        e = await next_stale(ws, "b.c", 10, seen)
        check(field(e, "hash") == "" and field(e, "was") == sha(B_C),
              "b.c removed: %s" % e)
        ents = sorted((x["kind"], x["name"]) for x in field(e, "entities"))
        check(ents == [("decision", "b-only"), ("file", "b.c")],
              "b.c's entities: %s" % ents)

        # -- 5. never stale: no hash, not indexed ------------------------
        more = await quiet(ws, 2.0, seen)
        check(more == [], "more stale events: %s" % more)
        paths = [field(x, "path") for x in seen
                 if x.get("type") == "knowledge_stale"]
        check(sorted(paths) == ["a.c", "b.c", "c.c"],
              "knowledge_stale paths on the stream: %s" % paths)
        keys = stale_keys(d)
        check(("file", "node_modules/x.js") not in keys,
              "an unindexed file judged: %s" % keys)
    finally:
        await ws.close()


if __name__ == "__main__":
    run_test("knowledge_stale", test)
