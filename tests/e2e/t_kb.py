#!/usr/bin/python3
# The session knowledge base end to end (kb_add, kb_search, kb_list,
# kb_remove; parley-protocol(7), Knowledge base), with
# tests/fixtures/fakellm.py as the OpenAI provider and, for the second
# daemon, as the embedder:
#  1. over WebSocket: kb_add acked with the kb_added event's seq (logged,
#     without the content), a resend with the same id is the same
#     document, kb_search and kb_list answer the requester only, kb_remove
#     logs kb_removed (an unknown id answers found false, not logged); an
#     observer lists but may not add;
#  2. over HTTP: the messages through POST .../messages, and the REST
#     /sessions/{id}/kb (list, add with Idempotency-Key, search, delete),
#     GET /sessions/{id}'s "knowledge";
#  3. bounds (kb-max-documents, kb-max-bytes): refused with
#     QUOTA_EXCEEDED, nothing changed;
#  4. every worker SIGKILLed: the documents are still there;
#  5. retrieval in the turn: a rag_context event and the context, as a
#     system message just before the user's, in the request the fake LLM
#     received; config.rag false: nothing injected, nothing logged;
#  6. the built-in kb_search tool called by a scripted model reply; the
#     host's directory index searched too (its chunks given with their
#     path and lines) and kb_search offered for it;
#  7. with an embedder: kb_added says vectors, and a search for a synonym
#     only the fake embedder knows ("car" for "automobile") finds the
#     document (mode hybrid).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

KB_DOCS = 5


def conf(fport, embedder=False, root=None):
    extra = ("kb-max-documents %d\nkb-max-bytes 4k\n" % KB_DOCS)
    if root:
        extra += "index-root %s\n" % root
    if embedder:
        extra += ('embedder emb {\n    type openai\n'
                  '    url "http://127.0.0.1:%d/v1"\n    model "emb-test"\n'
                  '    timeout 5s\n}\n' % fport)
    return (extra, 'provider oa {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "gpt-test"\n'
            '    timeout 10s\n    idle-timeout 10s\n}\n' % fport)


def msg(sid, type_, **kw):
    return dict(kw, v=1, type=type_, sessionId=sid)


def create(d, sid, config=None):
    body = {"sessionId": sid}
    if config is not None:
        body["config"] = config
    st, js = d.http_json("POST", "/sessions", body)
    check(st == 201, "POST /sessions %s -> %s %s" % (sid, st, js))


async def recv_type(ws, types, timeout=10):
    """The next event of one of types (others skipped)."""
    got = await ws_until(ws, lambda e: e.get("type") in types, timeout)
    return got[-1]


async def s_websocket(d):
    sid = "kb-ws"
    create(d, sid)
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    try:
        await recv_type(ws, ("session_state",))
        await ws_send(ws, msg(sid, "kb_add", id="add-1",
                              content="The zorblax protocol listens on port "
                              "7419.\nIt retries thrice.",
                              metadata={"title": "Zorblax", "n": 1}))
        ev = await ws_until(ws, lambda e: e.get("type") == "ack" and
                            e.get("id") == "add-1")
        added = of_type(ev, "kb_added")
        ack = ev[-1]
        if not added:
            added = [await recv_type(ws, ("kb_added",))]
        a = added[0]
        check(ack.get("eventSeq") == a.get("seq"), "ack %s, kb_added %s"
              % (ack, a))
        check(a.get("documentId", "").startswith("doc-") and
              len(a["documentId"]) == 20, "documentId %s" % a)
        check(a.get("length") == 61 and a.get("chunks") == 1 and
              a.get("vectors") is False and
              a.get("metadata") == {"title": "Zorblax", "n": 1},
              "kb_added fields %s" % a)
        check("content" not in a, "kb_added carries the content: %s" % a)
        doc = a["documentId"]

        # The same message again: the same document, acked as a repeat.
        await ws_send(ws, msg(sid, "kb_add", id="add-1",
                              content="The zorblax protocol listens on port "
                              "7419.\nIt retries thrice."))
        ack2 = await recv_type(ws, ("ack", "error"))
        check(ack2.get("type") == "ack" and ack2.get("duplicate") is True and
              ack2.get("eventSeq") == a["seq"], "resend answered %s" % ack2)

        await ws_send(ws, msg(sid, "kb_search", id="q-1", query="zorblax port"))
        r = await recv_type(ws, ("kb_search_result", "error"))
        check(r.get("type") == "kb_search_result" and r.get("id") == "q-1",
              "kb_search answered %s" % r)
        check(r.get("mode") == "keyword" and r.get("note") ==
              "keyword search only: no embedder is configured",
              "mode/note %s" % r)
        res = r.get("results") or []
        check(len(res) == 1 and res[0].get("documentId") == doc and
              "7419" in res[0].get("content", "") and
              0 < res[0].get("score") <= 1 and
              res[0].get("keywordScore") == res[0].get("score") and
              res[0].get("metadata") == {"title": "Zorblax", "n": 1} and
              res[0].get("lines") == [1, 2], "results %s" % res)
        await ws_send(ws, msg(sid, "kb_search", query="x", limit=51))
        e = await recv_type(ws, ("error", "kb_search_result"))
        check(e.get("type") == "error" and e.get("code") == "BAD_REQUEST" and
              "limit" in e.get("message", ""), "limit 51 answered %s" % e)

        await ws_send(ws, msg(sid, "kb_list", id="l-1"))
        r = await recv_type(ws, ("kb_list_result", "error"))
        check(r.get("type") == "kb_list_result" and r.get("totalCount") == 1,
              "kb_list answered %s" % r)
        dd = r["documents"][0]
        check(dd.get("documentId") == doc and dd.get("length") == 61 and
              dd.get("chunks") == 1 and dd.get("preview") ==
              "The zorblax protocol listens on port 7419.\nIt retries "
              "thrice." and isinstance(dd.get("createdAt"), str),
              "kb_list document %s" % dd)

        # An observer reads, never adds.
        ob = await ws_connect(d.url("/sessions/%s/stream?role=observer"
                                    % sid))
        try:
            await recv_type(ob, ("session_state",))
            await ws_send(ob, msg(sid, "kb_list", id="ol"))
            r = await recv_type(ob, ("kb_list_result", "error"))
            check(r.get("type") == "kb_list_result", "observer's kb_list %s"
                  % r)
            await ws_send(ob, msg(sid, "kb_add", id="oa", content="x"))
            r = await recv_type(ob, ("error", "ack"))
            check(r.get("code") == "FORBIDDEN", "observer's kb_add %s" % r)
        finally:
            await ob.close()

        await ws_send(ws, msg(sid, "kb_remove", id="rm-0",
                              documentId="doc-0000000000000000"))
        r = await recv_type(ws, ("kb_removed", "error"))
        check(r.get("found") is False and "seq" not in r, "unknown remove %s"
              % r)
        await ws_send(ws, msg(sid, "kb_remove", id="rm-1", documentId=doc))
        ev = await ws_until(ws, lambda e: e.get("type") == "ack" and
                            e.get("id") == "rm-1")
        rm = of_type(ev, "kb_removed") or [await recv_type(ws, ("kb_removed",))]
        check(rm[0].get("found") is True and rm[0].get("seq") ==
              ev[-1].get("eventSeq"), "kb_removed %s ack %s" % (rm, ev[-1]))
    finally:
        await ws.close()
    evs = d.log_events(sid)
    types = [e["type"] for e in evs]
    check(types.count("kb_added") == 1 and types.count("kb_removed") == 1 and
          "kb_search_result" not in types and "kb_list_result" not in types,
          "the log holds %s" % types)


def s_http(d):
    sid = "kb-http"
    create(d, sid)
    # The messages through POST .../messages.
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         msg(sid, "kb_add", id="h1", content="alpha beta"))
    check(st == 202 and js.get("seq"), "POST messages kb_add -> %s %s"
          % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         msg(sid, "kb_search", query="beta"))
    check(st == 200 and js.get("type") == "kb_search_result" and
          len(js.get("results", [])) == 1, "POST messages kb_search -> %s %s"
          % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         msg(sid, "kb_list"))
    check(st == 200 and js.get("totalCount") == 1, "POST messages kb_list "
          "-> %s %s" % (st, js))
    # REST.
    hk = {"Idempotency-Key": "rest-key-1"}
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "gamma delta\nsecond line",
                          "metadata": {"src": "rest"}}, headers=hk)
    check(st == 202 and js.get("documentId", "").startswith("doc-") and
          js.get("seq"), "POST kb -> %s %s" % (st, js))
    doc = js["documentId"]
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "gamma delta\nsecond line"}, headers=hk)
    check(st == 200 and js.get("documentId") == doc and
          js.get("duplicate") is True, "POST kb again -> %s %s" % (st, js))
    st, js = d.http_json("GET", "/sessions/%s/kb" % sid)
    check(st == 200 and js.get("totalCount") == 2 and
          {x["documentId"] for x in js["documents"]} >= {doc},
          "GET kb -> %s %s" % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb/search" % sid,
                         {"query": "gamma", "limit": 1})
    check(st == 200 and [r["documentId"] for r in js.get("results", [])] ==
          [doc] and js["results"][0]["metadata"] == {"src": "rest"},
          "POST kb/search -> %s %s" % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb/search" % sid,
                         {"query": "gamma", "threshold": 2})
    check(st == 400 and err_code(js) == "BAD_REQUEST", "threshold 2 -> %s %s"
          % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid, {"content": ""})
    check(st == 400 and err_code(js) == "BAD_REQUEST", "empty content -> "
          "%s %s" % (st, js))
    st, js = d.http_json("GET", "/sessions/%s" % sid)
    k = js.get("knowledge") or {}
    check(st == 200 and k.get("documents") == 2 and k.get("bytes") == 33 and
          k.get("chunks") == 2, "GET session knowledge %s" % js)
    st, js = d.http_json("DELETE", "/sessions/%s/kb/%s" % (sid, doc))
    check(st == 202 and js.get("seq"), "DELETE kb/doc -> %s %s" % (st, js))
    st, js = d.http_json("DELETE", "/sessions/%s/kb/%s" % (sid, doc))
    check(st == 200 and js.get("found") is False, "DELETE again -> %s %s"
          % (st, js))
    st, js = d.http_json("PUT", "/sessions/%s/kb" % sid, {})
    check(st == 405, "PUT kb -> %s %s" % (st, js))


def s_bounds(d):
    sid = "kb-bounds"
    create(d, sid)
    for i in range(KB_DOCS):
        st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                             {"content": "document %d" % i})
        check(st == 202, "add %d -> %s %s" % (i, st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "one too many"})
    check(st == 413 and err_code(js) == "QUOTA_EXCEEDED" and
          "kb-max-documents %d" % KB_DOCS in js["error"]["message"],
          "past kb-max-documents -> %s %s" % (st, js))
    st, js = d.http_json("GET", "/sessions/%s/kb" % sid)
    check(js.get("totalCount") == KB_DOCS, "after the refusal %s" % js)
    # Bytes: 4k in all, on another session.
    sid = "kb-bytes"
    create(d, sid)
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "a" * 3000})
    check(st == 202, "3000 bytes -> %s %s" % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "b" * 2000})
    check(st == 413 and err_code(js) == "QUOTA_EXCEEDED" and
          "kb-max-bytes" in js["error"]["message"], "past kb-max-bytes -> "
          "%s %s" % (st, js))
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "c" * 5000})
    check(st == 400, "past kb-max-bytes alone -> %s %s" % (st, js))
    st, js = d.http_json("GET", "/sessions/%s" % sid)
    check(js.get("knowledge", {}).get("documents") == 1 and
          js["knowledge"]["bytes"] == 3000, "after refusals %s" % js)
    ev = d.log_events(sid)
    check(len(of_type(ev, "kb_added")) == 1, "kb_added events %s"
          % [short(e) for e in ev])


def s_sigkill(d):
    d.kill_workers()
    st, js = d.http_json("GET", "/sessions/kb-bounds/kb")
    check(st == 200 and js.get("totalCount") == KB_DOCS, "after SIGKILL: %s %s"
          % (st, js))
    st, js = d.http_json("POST", "/sessions/kb-http/kb/search",
                         {"query": "alpha"})
    check(st == 200 and len(js.get("results", [])) == 1,
          "search after SIGKILL: %s %s" % (st, js))


CONTEXT = ("Context from the session's knowledge base and indexed files. "
           "Cite a source by its [n] when you use it.")


async def s_rag(d, f):
    sid = "kb-rag"
    create(d, sid)
    st, js = d.http_json("POST", "/sessions/%s/kb" % sid,
                         {"content": "The zorblax daemon listens on port "
                          "7419.", "metadata": {"title": "ops"}})
    check(st == 202, "add -> %s %s" % (st, js))
    doc = js["documentId"]
    f.reset()
    f.script([{"kind": "text", "text": "Port 7419 [1]."}])
    ev = await chat_turn(d, sid, "Which port does zorblax use?")
    one_done(ev, "rag turn")
    rc = of_type(ev, "rag_context")
    check(len(rc) == 1, "rag_context events %s" % [short(e) for e in ev])
    r = rc[0]
    check(r.get("query") == "Which port does zorblax use?" and
          r.get("agentId") and r.get("chunks") and
          r["chunks"][0].get("source") == "kb" and
          r["chunks"][0].get("documentId") == doc and
          r["chunks"][0].get("n") == 1 and r["chunks"][0].get("bytes") == 40,
          "rag_context %s" % r)
    first_token = [e for e in ev if e.get("type") == "token"]
    check(first_token and ev.index(r) < ev.index(first_token[0]),
          "rag_context after the reply began: %s" % [short(e) for e in ev])
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    check(len(reqs) == 1, "provider requests %d" % len(reqs))
    msgs = reqs[0]["body"]["messages"]
    check(msgs[-1].get("role") == "user" and msgs[-2].get("role") ==
          "system", "messages %s" % msgs)
    sysm = msgs[-2]["content"]
    check(sysm.startswith(CONTEXT) and "[1] kb %s (title=ops)\nThe zorblax "
          "daemon listens on port 7419." % doc in sysm,
          "the context given: %r" % sysm)

    # config.rag false: nothing given, nothing logged.
    sid = "kb-norag"
    create(d, sid, {"rag": False})
    st, js = d.http_json("POST", "/sessions", {"sessionId": "kb-badrag",
                                               "config": {"rag": "no"}})
    check(st == 400 and "config.rag" in js["error"]["message"],
          "config.rag not a boolean -> %s %s" % (st, js))
    d.http_json("POST", "/sessions/%s/kb" % sid,
                {"content": "The zorblax daemon listens on port 7419."})
    f.reset()
    f.script([{"kind": "text", "text": "No idea."}])
    ev = await chat_turn(d, sid, "Which port does zorblax use?")
    one_done(ev, "norag turn")
    check(not of_type(ev, "rag_context"), "rag_context with rag false")
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    check(not any(CONTEXT in (m.get("content") or "") for m in
                  reqs[0]["body"]["messages"]), "context given with rag "
          "false: %s" % reqs[0]["body"]["messages"])


async def s_rag_index(d, f, root):
    """A session without documents, the host with an index: the index's
    chunks are given, with their path and lines."""
    st, js = d.http_json("POST", "/api/index", {"path": root})
    check(st == 202, "POST /api/index -> %s %s" % (st, js))
    deadline = time.time() + 60
    while True:
        st, js = d.http_json("GET", "/api/index/status")
        if js.get("state") in ("idle", "failed"):
            break
        check(time.time() < deadline, "the index build did not end: %s" % js)
        await asyncio.sleep(0.1)
    check(js.get("state") == "idle", "index status %s" % js)
    sid = "kb-idx"
    create(d, sid)
    f.reset()
    f.script([{"kind": "text", "text": "It returns quasar [1]."}])
    ev = await chat_turn(d, sid, "What does frobnicate_widget return?")
    one_done(ev, "index rag turn")
    rc = of_type(ev, "rag_context")
    path = os.path.join(os.path.realpath(root), "widget.py")
    check(len(rc) == 1 and rc[0]["chunks"][0].get("source") == "index" and
          rc[0]["chunks"][0].get("path") == path and
          rc[0]["chunks"][0].get("lines") == [1, 2],
          "rag_context from the index %s" % rc)
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    msgs = reqs[0]["body"]["messages"]
    check(msgs[-2].get("role") == "system" and
          "[1] %s:1-2\ndef frobnicate_widget():" % path in
          msgs[-2].get("content", ""), "the index's context: %s" % msgs)
    check(any(t["function"]["name"] == "kb_search" for t in
              reqs[0]["body"].get("tools", [])), "kb_search not offered "
          "with an index")


async def s_tool(d, f):
    sid = "kb-rag"      # it has a document
    f.reset()
    f.script([{"kind": "tool_calls", "calls": [
                  {"id": "call_kb", "name": "kb_search", "arguments":
                   json.dumps({"query": "zorblax port", "limit": 2})}]},
              {"kind": "text", "text": "Found it."}])
    ev = await chat_turn(d, sid, "Look it up with the tool.")
    one_done(ev, "tool turn")
    st = of_type(ev, "tool_start")
    rs = of_type(ev, "tool_result")
    check(len(st) == 1 and st[0].get("tool") == "kb_search" and
          st[0].get("risk") == "low", "tool_start %s" % st)
    check(len(rs) == 1 and not rs[0].get("error"), "tool_result %s" % rs)
    out = json.loads(rs[0]["result"])
    hit = out["results"][0]
    check(hit.get("source") == "kb" and "7419" in hit.get("content", "") and
          hit.get("documentId", "").startswith("doc-") and
          hit.get("lines") == [1, 1], "the tool's hits %s" % out)
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    check(any(t["function"]["name"] == "kb_search" for t in
              reqs[0]["body"].get("tools", [])), "kb_search not offered: %s"
          % reqs[0]["body"].get("tools"))
    # The second model call of the turn has the context too.
    check(len(reqs) == 2 and any(CONTEXT in (m.get("content") or "") for m
                                 in reqs[1]["body"]["messages"]),
          "the tool loop's second call without the context")


async def s_hybrid(d, f):
    sid = "kb-hybrid"
    create(d, sid)
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         msg(sid, "kb_add", id="hy1",
                             content="My automobile is red."))
    check(st == 202, "add -> %s %s" % (st, js))
    d.http_json("POST", "/sessions/%s/kb" % sid,
                {"content": "The boat is blue."})
    ev = d.log_events(sid)
    check([e.get("vectors") for e in of_type(ev, "kb_added")] ==
          [True, True], "kb_added vectors %s" % of_type(ev, "kb_added"))
    st, js = d.http_json("POST", "/sessions/%s/kb/search" % sid,
                         {"query": "car"})
    check(st == 200 and js.get("mode") == "hybrid" and "note" not in js,
          "hybrid search -> %s %s" % (st, js))
    res = js.get("results") or []
    check(res and res[0]["content"] == "My automobile is red." and
          len(res) == 1 and res[0].get("vectorScore", 0) > 0.5 and
          res[0].get("keywordScore") == 0, "a synonym only the embedder "
          "knows: %s" % res)
    # The embedder failing: keyword search, and why.
    f._call("POST", "/_embeddings_script", {"queue": [
        {"kind": "http_error", "status": 500}]})
    st, js = d.http_json("POST", "/sessions/%s/kb/search" % sid,
                         {"query": "boat"})
    check(st == 200 and js.get("mode") == "keyword" and
          "embedder failed" in js.get("note", "") and
          js["results"][0]["content"] == "The boat is blue.",
          "search with the embedder failing -> %s %s" % (st, js))
    embeds = [q for q in f.requests() if q.get("api") == "embeddings"]
    check(len(embeds) >= 4, "embeddings requests %d" % len(embeds))


async def test():
    f = FakeLLM().start()
    root = tempfile.mkdtemp(prefix="parley-kb-", dir="/tmp")
    with open(os.path.join(root, "widget.py"), "w") as fh:
        fh.write("def frobnicate_widget():\n    return 'quasar-9'\n")
    try:
        extra, prov = conf(f.port, root=root)
        d = Daemon(extra=extra, providers=prov, default="oa")
        with with_daemon(d):
            await s_websocket(d)
            s_http(d)
            s_bounds(d)
            s_sigkill(d)
            await s_rag_index(d, f, root)
            await s_rag(d, f)
            await s_tool(d, f)
        extra, prov = conf(f.port, embedder=True)
        d = Daemon(extra=extra, providers=prov, default="oa")
        with with_daemon(d):
            f.reset()
            await s_hybrid(d, f)
    finally:
        f.stop()
        f.cleanup()
        shutil.rmtree(root, ignore_errors=True)


run_test("kb", test)
