#!/usr/bin/python3
# The directory index with an embedder (fakellm's /v1/embeddings, whose
# vectors count words, SYNONYMS mapped): the build asks for its chunks'
# vectors in batches across files (far fewer requests than files), and
# POST /api/search embeds the query and answers "hybrid" with a
# vectorScore, finding a file by a synonym of its word that no keyword
# matches.  With the embedder failing, search still answers, keyword
# only, and says why.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADM = "t-adm"


def auth():
    return {"Authorization": "Bearer " + ADM}


async def test():
    base = tempfile.mkdtemp(prefix="parley-idxh-", dir="/tmp")
    root = os.path.join(base, "root")
    os.makedirs(root)
    n = 40
    for i in range(n):
        with open(os.path.join(root, "f%02d.txt" % i), "w") as f:
            f.write("note %d about plain things\n" % i)
    with open(os.path.join(root, "car.txt"), "w") as f:
        f.write("the car is parked in the garage\n")
    f = FakeLLM()
    with with_fakellm(f):
        conf = ("index-root %s\n"
                'embedder emb {\n    type openai\n'
                '    url "http://127.0.0.1:%d/v1"\n'
                '    model "embed-test"\n    timeout 5s\n}\n'
                % (root, f.port))
        d = Daemon(extra=conf, token=ADM)
        try:
            with with_daemon(d):
                await body(d, f, root, n)
        finally:
            shutil.rmtree(base, ignore_errors=True)


async def body(d, f, root, n):
    st, js = d.http_json("POST", "/api/index", {"path": root}, auth())
    check(st == 202, "POST /api/index -> %s %s" % (st, js))
    deadline = time.time() + 30
    while True:
        st, js = d.http_json("GET", "/api/index/status", None, auth())
        if js["state"] != "running":
            break
        check(time.time() < deadline, "build did not end: %s" % js)
        time.sleep(0.1)
    check(js["state"] == "idle" and js["files"] == n + 1 and
          js["unembedded"] == 0 and js["embedder"] == "emb",
          "status: %s" % js)
    reqs = [r for r in f.requests() if r["path"].endswith("/embeddings")]
    inputs = sum(len(r["body"]["input"]) for r in reqs)
    check(inputs == n + 1 and len(reqs) <= 2,
          "%d embeddings requests for %d chunks (want batches)"
          % (len(reqs), inputs))
    # "automobile" is "car" to the fake embedder: no keyword matches it
    st, js = d.http_json("POST", "/api/search",
                         {"query": "automobile", "limit": 3}, auth())
    check(st == 200 and js["mode"] == "hybrid" and "note" not in js,
          "hybrid search -> %s %s" % (st, js))
    check(js["results"] and js["results"][0]["path"] ==
          os.path.join(root, "car.txt") and
          js["results"][0]["vectorScore"] > 0.5 and
          js["results"][0]["keywordScore"] == 0,
          "automobile: %s" % js["results"][:2])
    reqs = [r for r in f.requests() if r["path"].endswith("/embeddings")]
    check(reqs[-1]["body"]["input"] in (["automobile"], "automobile"),
          "the query was not embedded: %s" % reqs[-1]["body"])
    # the embedder failing: keyword only, and why
    f._call("POST", "/_embeddings_script", {"queue": [
        {"kind": "http_error", "status": 500,
         "body": {"error": {"message": "model not loaded"}}}],
        "append": False})
    st, js = d.http_json("POST", "/api/search", {"query": "garage"}, auth())
    check(st == 200 and js["mode"] == "keyword" and
          "embedder failed" in js.get("note", "") and
          js["results"][0]["path"] == os.path.join(root, "car.txt"),
          "search with the embedder failing -> %s %s" % (st, js))


if __name__ == "__main__":
    run_test("index_hybrid", test)
