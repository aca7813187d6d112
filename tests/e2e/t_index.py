#!/usr/bin/python3
# The directory index (POST /api/index, GET /api/index/status, POST
# /api/search, DELETE /api/index, a session's "index" message):
#   - admin only: 401 without a valid token, 403 for a user token;
#   - path escapes refused with 403 and nothing changed: "..", a symbolic
#     link out of the root, a directory whose name starts with the root's
#     ("/x/root2" for root "/x/root"), a path outside every root;
#   - a generated tree (C, Python, JavaScript, Go, Rust, Java, Markdown, a
#     binary file, a huge file, a symbolic link out of the root,
#     node_modules/, .git/) indexed with include/exclude: the status
#     counts the skips, search finds the right file and lines and nothing
#     of what was left out;
#   - the same tree again: nothing read (filesRead 0, unchanged);
#   - index-watch: a changed file and a new directory's file are found
#     within 2 s;
#   - a session's index message logs index_start, a bounded number of
#     index_progress (one per 500 ms at most) and index_done; a path out
#     of the roots is answered 403 and logs nothing;
#   - every worker SIGKILLed in the middle of a large build: the status
#     says interrupted or running again, search answers from the old
#     segment meanwhile, the build is run again to the end;
#   - DELETE while a build runs is 409; after, it removes everything;
#   - a source swapped for a symbolic link out of the root, and a root
#     removed by a reload: the watcher's build drops both sources and
#     their documents, nothing outside is indexed, the removed root's
#     directory is refused;
#   - a session's index message: a path out of every root is answered
#     with one 403 whether it exists or not, a link's target never told.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADM, USR = "t-adm", "t-usr"

C_SRC = """#include <stdio.h>

static int
helper(int x)
{
\treturn x * 2;
}

int
main(void)
{
\tprintf("zebracorn %d\\n", helper(21));
\treturn 0;
}
"""

FILES = {
    "src/main.c": C_SRC,
    "src/util.py": "def quux_handler(request):\n    return request.body\n",
    "web/app.js": "export function renderWidget(el) {\n  el.textContent = 'ok';\n}\n",
    "go/server.go": "package main\n\nfunc ServeGopherHTTP() {}\n",
    "rust/lib.rs": "pub fn crab_walk() -> u32 {\n    7\n}\n",
    "java/Main.java": "public class Main {\n  static void javaBeanCounter() {}\n}\n",
    "README.md": "# Demo\n\nA demo tree for the index test.\n",
    "skipme/hidden.c": "int skippedword;\n",
    "gen/bundle.min.js": "var minifiedword=1;\n",
    "node_modules/pkg/index.js": "module.exports = 'nodemodword';\n",
    ".git/config": "[core]\n\tgitconfigword = true\n",
}


def make_tree(base):
    root = os.path.join(base, "root")
    outside = os.path.join(base, "outside")
    root2 = os.path.join(base, "root2")
    for d in (root, outside, root2):
        os.makedirs(d)
    for rel, text in FILES.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    with open(os.path.join(root, "blob.bin"), "wb") as f:
        f.write(b"binaryword\x00\x01\x02" * 100)
    with open(os.path.join(root, "huge.txt"), "w") as f:
        f.write("hugeword " * 20000)      # 180 KB > index-max-file 64k
    with open(os.path.join(outside, "secret.txt"), "w") as f:
        f.write("swordfish\n")
    with open(os.path.join(root2, "other.txt"), "w") as f:
        f.write("root2word\n")
    os.symlink(outside, os.path.join(root, "out"))
    os.symlink(os.path.join(outside, "secret.txt"),
               os.path.join(root, "src", "secret.txt"))
    return root, outside, root2


def auth(tok):
    return {"Authorization": "Bearer " + tok}


def api(d, method, path, body=None, tok=ADM):
    return d.http_json(method, path, body, auth(tok))


def status(d):
    st, js = api(d, "GET", "/api/index/status")
    check(st == 200, "GET /api/index/status -> %s %s" % (st, js))
    return js


def wait_idle(d, timeout=60, what="the build"):
    deadline = time.time() + timeout
    while True:
        js = status(d)
        if js.get("state") in ("idle", "failed"):
            return js
        check(time.time() < deadline, "%s did not end: %s" % (what, js))
        time.sleep(0.1)


def index(d, body, timeout=60):
    """POST /api/index (again while the watcher's build runs), then waits."""
    deadline = time.time() + timeout
    while True:
        st, js = api(d, "POST", "/api/index", body)
        if st != 409:
            break
        check(time.time() < deadline, "POST /api/index: 409 for %ss" % timeout)
        time.sleep(0.2)
    check(st == 202 and js.get("state") == "running",
          "POST /api/index %s -> %s %s" % (body, st, js))
    return js, wait_idle(d, timeout)


async def delete_index(d):
    """DELETE /api/index once no build runs.  The watcher may start a
    build at any time (it builds every source again when it saw changes
    during the last one): a DELETE then is 409, as documented."""
    deadline = time.time() + 60
    while True:
        wait_idle(d)
        st, js = api(d, "DELETE", "/api/index")
        if st != 409:
            break
        check(time.time() < deadline, "DELETE: 409 for 60 s")
        await asyncio.sleep(0.2)
    check(st == 200 and js == {"removed": True}, "DELETE -> %s %s" % (st, js))


def search(d, query, limit=None):
    body = {"query": query}
    if limit:
        body["limit"] = limit
    st, js = api(d, "POST", "/api/search", body)
    check(st == 200 and isinstance(js.get("results"), list),
          "POST /api/search %r -> %s %s" % (query, st, js))
    return js


def paths(js):
    return [r["path"] for r in js["results"]]


def seg_path(d):
    return os.path.join(d.state, "index", "segment")


async def test():
    base = tempfile.mkdtemp(prefix="parley-idx-", dir="/tmp")
    root, outside, root2 = make_tree(base)
    # A second root for the session's and the big trees: not under a
    # watched source, so the watcher leaves them alone until indexed.
    more = os.path.join(base, "more")
    os.makedirs(more)
    # A root the reload removes.
    gone = os.path.join(base, "gone")
    os.makedirs(os.path.join(gone, "x"))
    with open(os.path.join(gone, "x", "g.txt"), "w") as f:
        f.write("gonerootword\n")
    # index-watch no at first: the counts of each build are exact (the
    # watcher builds again when the sources change); turned on by a
    # reload before the watcher's checks.
    # idle-timeout 1s: a session with no client would leave memory during
    # its build; the build keeps it (index_part), so its events all land.
    conf = ("token %s role user\nindex-root %s\nindex-root %s\n"
            "index-root %s\nindex-watch no\nindex-max-file 64k\n"
            % (USR, root, more, gone))
    d = Daemon(extra=conf, token=ADM, idle_timeout="1s")
    try:
        with with_daemon(d):
            await body(d, root, outside, root2, more, gone)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def body(d, root, outside, root2, more, gone):
    # -- roles --------------------------------------------------------------
    for m, p, b in (("POST", "/api/index", {"path": root}),
                    ("GET", "/api/index/status", None),
                    ("POST", "/api/search", {"query": "x"}),
                    ("DELETE", "/api/index", None)):
        st, js = api(d, m, p, b, tok="nope")
        check(st == 401, "%s %s, unknown token -> %s %s" % (m, p, st, js))
        st, js = api(d, m, p, b, tok=USR)
        check(st == 403 and err_code(js) == "FORBIDDEN",
              "%s %s, user token -> %s %s" % (m, p, st, js))
    check(not os.path.exists(seg_path(d)), "a refused request made a segment")

    # -- path escapes --------------------------------------------------------
    for p, want in ((root + "/../outside", 403), (root + "/out", 403),
                    (root + "/src/../../outside", 403), (root2, 403),
                    (outside, 403), ("/etc", 403), ("src", 400),
                    (root + "/nope", 404), (root + "/README.md", 400)):
        st, js = api(d, "POST", "/api/index", {"path": p})
        check(st == want, "POST /api/index %s -> %s %s (want %d)"
              % (p, st, js, want))
        check(js["error"]["message"], "no message for %s" % p)
    st, js = api(d, "POST", "/api/index", {"path": root, "include": "*.c"})
    check(st == 400 and "include" in js["error"]["message"],
          "include not an array -> %s %s" % (st, js))
    js = status(d)
    check(js["state"] == "idle" and js["sources"] == [] and
          not os.path.exists(seg_path(d)),
          "refused requests changed the index: %s" % js)

    # -- a generated tree ----------------------------------------------------
    t0 = time.time()
    started, js = index(d, {"path": root + "/src/..",
                            "exclude": ["skipme/**", "*.min.js"]})
    check(started["path"] == root, "path not resolved: %s" % started)
    check(js["state"] == "idle" and js["lastError"] is None,
          "build failed: %s" % js)
    # main.c util.py app.js server.go lib.rs Main.java README.md
    check(js["files"] == 7, "files %s, want 7: %s" % (js["files"], js))
    check(js["skipped"]["binary"] == 1 and js["skipped"]["tooLarge"] == 1
          and js["skipped"]["symlinks"] == 2, "skips: %s" % js["skipped"])
    check(js["sources"] == [{"path": root, "include": [],
                             "exclude": ["skipme/**", "*.min.js"]}],
          "sources: %s" % js["sources"])
    check(js["filesRead"] == 8 and js["unchanged"] is False,
          "first build read %s: %s" % (js["filesRead"], js))
    for k in ("chunks", "bytes", "startedAt", "finishedAt", "durationMs",
              "progress", "watching", "embedder"):
        check(k in js, "status has no %s: %s" % (k, js))
    check(js["watching"] is False, "watching: %s" % js)
    print("first build: %.2f s, %s" % (time.time() - t0, js["progress"]))

    r = search(d, "zebracorn")
    check(r["mode"] == "keyword" and "note" in r, "mode: %s" % r)
    check(paths(r)[:1] == [root + "/src/main.c"], "zebracorn: %s" % r)
    first, last = r["results"][0]["lines"]
    check(first <= 12 <= last and "zebracorn" in r["results"][0]["content"],
          "zebracorn lines %s: %s" % ((first, last), r["results"][0]))
    check(0 < r["results"][0]["score"] <= 1 and
          r["results"][0]["keywordScore"] > 0, "scores: %s" % r["results"][0])
    for word, want in (("quux handler", "src/util.py"),
                       ("crab_walk", "rust/lib.rs"),
                       ("javaBeanCounter", "java/Main.java"),
                       ("ServeGopherHTTP", "go/server.go"),
                       ("render widget", "web/app.js")):
        r = search(d, word)
        check(paths(r)[:1] == [root + "/" + want], "%s: %s" % (word, r))
    for word in ("swordfish", "nodemodword", "gitconfigword", "skippedword",
                 "minifiedword", "binaryword", "hugeword", "root2word"):
        check(search(d, word)["results"] == [], "%s was indexed" % word)
    st, js = api(d, "POST", "/api/search", {"query": "x", "limit": 51})
    check(st == 400, "limit 51 -> %s %s" % (st, js))

    # -- unchanged: nothing read ---------------------------------------------
    mtime = os.stat(seg_path(d)).st_mtime_ns
    _, js = index(d, {"path": root, "exclude": ["skipme/**", "*.min.js"]})
    check(js["filesRead"] == 0 and js["unchanged"] is True and
          js["files"] == 7, "unchanged tree: %s" % js)
    check(os.stat(seg_path(d)).st_mtime_ns == mtime,
          "an unchanged tree rewrote the segment")

    # -- a source swapped for a link, a root removed ---------------------------
    swap = os.path.join(root, "swap")
    os.makedirs(swap)
    with open(os.path.join(swap, "s.txt"), "w") as f:
        f.write("swapword\n")
    index(d, {"path": swap})
    index(d, {"path": gone + "/x"})
    check(paths(search(d, "swapword")) == [swap + "/s.txt"] and
          paths(search(d, "gonerootword")) == [gone + "/x/g.txt"],
          "swap or gone not indexed: %s" % status(d))
    aside = os.path.join(os.path.dirname(root), "swap-old")
    os.rename(swap, aside)
    os.symlink(outside, swap)

    # -- the watcher ---------------------------------------------------------
    d.extra = d.extra.replace("index-watch no", "index-watch yes")
    d.extra = d.extra.replace("index-root %s\n" % gone, "")
    d.write_conf()
    d.signal(signal.SIGHUP)
    deadline = time.time() + 20
    while not status(d)["watching"]:
        check(time.time() < deadline, "not watching 20 s after the reload")
        await asyncio.sleep(0.1)
    # the watcher's first build drops both sources
    deadline = time.time() + 20
    while True:
        js = wait_idle(d)
        srcs = [x["path"] for x in js["sources"]]
        if swap not in srcs and gone + "/x" not in srcs:
            break
        check(time.time() < deadline, "sources not dropped: %s" % js)
        await asyncio.sleep(0.1)
    check(srcs == [root], "sources after the reload: %s" % srcs)
    for word in ("swordfish", "swapword", "gonerootword"):
        check(search(d, word)["results"] == [],
              "%s found after its source was dropped" % word)
    check("dropped from the index" in d.log_text(), "no drop in the log")
    st, js = api(d, "POST", "/api/index", {"path": gone + "/x"})
    check(st == 403, "index of a removed root -> %s %s" % (st, js))
    os.remove(swap)
    os.rename(aside, swap)
    wait_idle(d)
    await watch_checks(d, root)

    # -- a session's index message -------------------------------------------
    await session_checks(d, root, more)

    # -- a worker killed in the middle ---------------------------------------
    await kill_checks(d, root, more)

    # -- DELETE --------------------------------------------------------------
    await delete_index(d)
    js = status(d)
    check(js["sources"] == [] and not os.path.exists(seg_path(d)),
          "after DELETE: %s" % js)
    check(search(d, "zebracorn")["results"] == [], "found after DELETE")


async def until_found(d, word, want, timeout):
    t0 = time.time()
    while True:
        r = search(d, word)
        if want in paths(r):
            return time.time() - t0
        if time.time() - t0 > timeout:
            raise Fail("%s not found in %s within %s s: %s; status %s"
                       % (word, want, timeout, r, status(d)))
        await asyncio.sleep(0.05)


async def watch_checks(d, root):
    p = os.path.join(root, "src", "util.py")
    with open(p, "a") as f:
        f.write("\ndef flamingo_quartz():\n    pass\n")
    took = await until_found(d, "flamingo_quartz", p, 2.0)
    print("watch: a changed file found in %.2f s" % took)
    os.makedirs(os.path.join(root, "newdir", "deeper"))
    p = os.path.join(root, "newdir", "deeper", "fresh.py")
    with open(p, "w") as f:
        f.write("def narwhal_tusk():\n    pass\n")
    took = await until_found(d, "narwhal_tusk", p, 2.0)
    print("watch: a new directory's file found in %.2f s" % took)
    # and a file written later in that new directory (now watched)
    await asyncio.sleep(0.5)
    p2 = os.path.join(root, "newdir", "deeper", "later.py")
    with open(p2, "w") as f:
        f.write("def okapi_stripes():\n    pass\n")
    took = await until_found(d, "okapi_stripes", p2, 2.0)
    print("watch: a later file of the new directory found in %.2f s" % took)
    os.remove(p2)
    deadline = time.time() + 2
    while search(d, "okapi_stripes")["results"]:
        check(time.time() < deadline, "a removed file is still found")
        await asyncio.sleep(0.05)
    wait_idle(d)


async def session_checks(d, root, more):
    many = os.path.join(more, "many")
    os.makedirs(many)
    n = 3000
    for i in range(n):
        with open(os.path.join(many, "f%04d.txt" % i), "w") as f:
            f.write("file %d of many, word%d\n" % (i, i))
    wait_idle(d)
    sid = "ix-sess"
    st, js = d.http_json("POST", "/sessions", {"sessionId": sid}, auth(USR))
    check(st == 201, "POST /sessions -> %s %s" % (st, js))
    st, js = post_message(d, sid, {"type": "index",
                                   "path": root + "/../outside"}, USR)
    check(st == 403 and err_code(js) == "FORBIDDEN",
          "index outside -> %s %s" % (st, js))
    check(of_type(d.log_events(sid), "index_start") == [],
          "a refused index logged an event")
    # out of every root: one answer whether it exists or not, and a
    # link's target is never told
    msgs = []
    for p in ("/etc", "/nonexistent-parley-ix"):
        st, js = post_message(d, sid, {"type": "index", "path": p}, USR)
        check(st == 403, "index %s -> %s %s" % (p, st, js))
        msgs.append(js["error"]["message"].replace(p, "P"))
    check(msgs[0] == msgs[1], "answers differ: %s" % msgs)
    st, js = post_message(d, sid, {"type": "index", "path": root + "/out"},
                          USR)
    check(st == 403 and "outside" not in js["error"]["message"],
          "index of a link out -> %s %s" % (st, js))
    deadline = time.time() + 30
    while True:
        st, js = post_message(d, sid, {"type": "index", "path": many}, USR)
        if st != 409:
            break
        check(time.time() < deadline, "index: 409 for 30 s")
        time.sleep(0.2)
    check(st == 202, "index -> %s %s" % (st, js))
    evs = await log_until(d, sid, lambda evs: of_type(evs, "index_done"),
                          "no index_done", timeout=60)
    start = of_type(evs, "index_start")
    prog = of_type(evs, "index_progress")
    done = of_type(evs, "index_done")[0]
    check(len(start) == 1 and start[0]["path"] == many and
          start[0]["totalFiles"] == n, "index_start: %s" % start)
    check("error" not in done and done["fileCount"] >= n and
          done["filesRead"] == n and done["chunkCount"] >= n,
          "index_done: %s" % done)
    # one per 500 ms at most: far fewer than files
    bound = done["durationMs"] / 500 + 2
    check(len(prog) <= bound and len(prog) < n / 20,
          "%d index_progress events for %d files in %d ms"
          % (len(prog), n, done["durationMs"]))
    for e in prog:
        check(0 < e["indexedFiles"] <= e["totalFiles"] == n and
              e["currentFile"].startswith(many), "index_progress: %s" % e)
    ts = [e["seq"] for e in prog]
    check(ts == sorted(ts), "progress out of order")
    print("session: %d files in %d ms, %d progress events"
          % (n, done["durationMs"], len(prog)))
    r = search(d, "word1234")
    check(paths(r)[:1] == [os.path.join(many, "f1234.txt")],
          "word1234: %s" % r)


async def kill_checks(d, root, more):
    big = os.path.join(more, "big")
    os.makedirs(big)
    # big enough that a plain build on an idle machine still runs for
    # seconds (20,000 one-line files took 0.9 s: done before the kill)
    n = 40000
    line = ("".join("token%d " % k for k in range(100)) + "\n") * 4
    for i in range(n):
        sub = os.path.join(big, "d%03d" % (i // 300))
        if i % 300 == 0:
            os.makedirs(sub)
        with open(os.path.join(sub, "g%05d.txt" % i), "w") as f:
            f.write("bigfile%d\n%s" % (i, line))
    wait_idle(d)
    # asked by a session: its log shows the progress until the kill
    sid = "ix-big"
    st, js = d.http_json("POST", "/sessions", {"sessionId": sid}, auth(USR))
    check(st == 201, "POST /sessions -> %s %s" % (st, js))
    deadline = time.time() + 30
    while True:
        st, js = post_message(d, sid, {"type": "index", "path": big}, USR)
        if st != 409:
            break
        check(time.time() < deadline, "index big: 409 for 30 s")
        time.sleep(0.2)
    check(st == 202, "index big -> %s %s" % (st, js))
    t0 = time.time()
    evs = await log_until(
        d, sid, lambda evs: of_type(evs, "index_progress") or
        of_type(evs, "index_done"), "no index_progress", timeout=60)
    check(not of_type(evs, "index_done"),
          "the big build ended before it could be killed: %s" % evs[-1])
    js = status(d)
    check(js["state"] == "running" and
          0 < js["progress"]["indexedFiles"] < n, "status: %s" % js)
    prog = of_type(d.log_events(sid), "index_progress")
    check(len(prog) <= (time.time() - t0) / 0.5 + 2,
          "%d index_progress in %.1f s" % (len(prog), time.time() - t0))
    check(prog[0]["totalFiles"] == n and
          prog[0]["currentFile"].startswith(big), "progress: %s" % prog[0])
    st, js = api(d, "DELETE", "/api/index")
    check(st == 409, "DELETE while building -> %s %s" % (st, js))
    d.kill_workers()
    js = status(d)
    check(js["state"] in ("interrupted", "running"),
          "after the kill: %s" % js)
    # the old segment answers meanwhile
    r = search(d, "zebracorn")
    check(paths(r)[:1] == [root + "/src/main.c"],
          "search during the re-run: %s" % r)
    js = wait_idle(d, 120, "the re-run")
    check(js["state"] == "idle" and js["lastError"] is None,
          "the re-run: %s" % js)
    check(js["files"] >= n + 3000 + 7, "files after the re-run: %s" % js)
    r = search(d, "bigfile19999")
    check(paths(r)[:1] == [os.path.join(big, "d066", "g19999.txt")],
          "bigfile19999: %s" % r)
    check("index: building" in d.log_text(), "no build in the log")

    # A session's build outlives the session's idle timeout (1 s here, no
    # client on it): the build keeps it in memory, so index_done lands in
    # its log.  Its log is read only after the build (reading it would
    # bring the session back).
    await delete_index(d)
    sid = "ix-long"
    st, js = d.http_json("POST", "/sessions", {"sessionId": sid}, auth(USR))
    check(st == 201, "POST /sessions -> %s %s" % (st, js))
    t0 = time.time()
    st, js = post_message(d, sid, {"type": "index", "path": big}, USR)
    check(st == 202, "index big again -> %s %s" % (st, js))
    wait_idle(d, 120, "the long build")
    took = time.time() - t0
    check(took > 2, "the build took only %.1f s: no idle timeout passed "
          "during it" % took)
    evs = d.log_events(sid)
    check(of_type(evs, "index_start") and of_type(evs, "index_done") and
          of_type(evs, "index_done")[0].get("fileCount") == n,
          "the long build's events: %s" % [e["type"] for e in evs])


if __name__ == "__main__":
    run_test("index", test)
