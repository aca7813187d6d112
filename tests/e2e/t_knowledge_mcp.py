#!/usr/bin/python3
# Parley's knowledge as an MCP server (POST /mcp, parley-knowledge(7)),
# on the local store or (E2E_STORE=redis) on Redis:
#  1. the MCP TypeScript SDK's Client with its StreamableHTTPClientTransport
#     (tests/e2e/js/kg_mcp_client.mjs): connects (Mcp-Session-Id "pk-...",
#     the revision negotiated), lists the two tools with their input
#     schemas and the resource templates, records with knowledge_act,
#     queries with knowledge_query (sexp and JSON), reads
#     parley-knowledge://P (Markdown) and .../json; an invalid batch is
#     isError naming the field; an unknown tool and missing arguments are
#     JSON-RPC errors -32602; an unknown resource -32002;
#  2. roles: an observer's token queries and reads, its knowledge_act is
#     isError FORBIDDEN and records nothing; a token scoped to another
#     session reaches neither the tool nor the resource; no token: 401;
#  3. the transport by hand (curl): GET and DELETE 405, notifications 202,
#     an unknown Mcp-Session-Id 404, an unknown method -32601, bad JSON
#     400 -32700, a batch answered under 2025-03-26 and refused under
#     2025-06-18, an unsupported MCP-Protocol-Version 400, initialize
#     answering the client's revision or else 2025-06-18, a foreign
#     browser Origin 403, a body over max-body 413, an empty body 400;
#     knowledge_act sent twice with one request id in one MCP session
#     records once (the second answer says duplicate).
import sys, os, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADM, USR, OBS, SCP = "kgm-admin", "kgm-user", "kgm-obs", "kgm-scoped"
PROJECT = "kg-mcp-proj"


def node(d, token, step):
    p = subprocess.run(["node", os.path.join(E2E, "js", "kg_mcp_client.mjs"),
                        str(d.port), token, PROJECT, step],
                       capture_output=True, timeout=60)
    lines = p.stdout.decode().strip().splitlines()
    check(lines, "kg_mcp_client %s printed nothing: %r" % (step,
                                                          p.stderr[-600:]))
    out = json.loads(lines[-1])
    check(p.returncode == 0 and "error" not in out,
          "kg_mcp_client %s: %s %r" % (step, out.get("error"),
                                       p.stderr[-300:]))
    return out


def curl(d, method, body=None, headers=(), token=ADM,
         ctype="application/json"):
    """curl's view of one /mcp request: (status, headers dict, body)."""
    argv = ["curl", "-s", "-i", "-X", method, "--max-time", "20",
            "http://127.0.0.1:%d/mcp" % d.port]
    if token:
        argv += ["-H", "Authorization: Bearer " + token]
    for h in headers:
        argv += ["-H", h]
    tmp = None
    if body is not None:
        data = body if isinstance(body, str) else json.dumps(body)
        if len(data) > 65536:     # past what an argument may hold
            fd, tmp = tempfile.mkstemp(prefix="kgmcp-", dir="/tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(data)
            data = "@" + tmp
        argv += ["-H", "Content-Type: " + ctype,
                 "-H", "Accept: application/json, text/event-stream",
                 "--data-binary", data]
    try:
        p = subprocess.run(argv, capture_output=True, timeout=30)
    finally:
        if tmp:
            os.unlink(tmp)
    raw = p.stdout.decode("utf-8", "replace")
    head, _, rest = raw.partition("\r\n\r\n")
    lines = head.split("\r\n")
    st = int(lines[0].split()[1])
    hd = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hd[k.strip().lower()] = v.strip()
    return st, hd, rest


def rpc_json(st_hd_body):
    st, hd, body = st_hd_body
    try:
        return st, hd, json.loads(body) if body else None
    except ValueError:
        raise Fail("not JSON: %d %r" % (st, body[:200]))


def s_sdk(d):
    out = node(d, USR, "full")
    check(out.get("sessionId", "").startswith("pk-") and
          len(out["sessionId"]) == 35, "session id %s" % out.get("sessionId"))
    check(out.get("protocolVersion") == "2025-06-18",
          "negotiated %s" % out.get("protocolVersion"))
    check(out["server"].get("name") == "parleyd" and
          "tools" in out["capabilities"] and
          "resources" in out["capabilities"], "server %s %s"
          % (out["server"], out["capabilities"]))
    tools = {t["name"]: t for t in out["tools"]}
    check(sorted(tools) == ["knowledge_act", "knowledge_query"],
          "tools %s" % list(tools))
    q, a = tools["knowledge_query"], tools["knowledge_act"]
    check(q["inputSchema"]["required"] == ["projectId", "query"] and
          q["inputSchema"]["properties"]["format"]["enum"] ==
          ["sexp", "json"] and q["annotations"]["readOnlyHint"] is True,
          "knowledge_query %s" % q)
    check(a["inputSchema"]["required"] == ["projectId", "actions"] and
          a["inputSchema"]["properties"]["actions"]["type"] == "array" and
          a["annotations"]["readOnlyHint"] is False and
          a["annotations"]["destructiveHint"] is False,
          "knowledge_act %s" % a)
    check([t["uriTemplate"] for t in out["templates"]] ==
          ["parley-knowledge://{projectId}",
           "parley-knowledge://{projectId}/json"] and
          out["resources"] == [], "templates %s resources %s"
          % (out["templates"], out["resources"]))
    act = out["act"]
    check(act.get("isError") is False, "act %s" % act)
    res = json.loads(act["text"])
    check(res.get("actions") == 3 and res.get("seq", 0) > 0 and
          res.get("batchId"), "act result %s" % res)
    qr = out["query"]
    check(qr.get("isError") is False and "mcp-principle" in qr["text"] and
          "mcp-decision" in qr["text"], "query %s" % qr)
    qj = out["queryJson"]
    check(qj.get("isError") is False and "mcp-principle" in
          json.dumps(json.loads(qj["text"])), "json query %s" % qj)
    md = out["md"][0]
    check(md["uri"] == "parley-knowledge://%s" % PROJECT and
          md["mimeType"] == "text/markdown" and
          "mcp-principle" in md["text"] and "mcp-decision" in md["text"],
          "markdown %s" % md)
    js = out["json"][0]
    g = json.loads(js["text"])
    check(js["mimeType"] == "application/json" and
          [p["name"] for p in g["principles"]] == ["mcp-principle"] and
          len(g["relationships"]) == 1, "json resource %s" % js)
    inv = out["invalid"]
    check(inv.get("isError") is True and "INVALID_ACTION" in inv["text"] and
          "status" in inv["text"], "invalid batch %s" % inv)
    check(out["unknownTool"].get("thrown") and
          out["unknownTool"].get("code") == -32602, "unknown tool %s"
          % out["unknownTool"])
    check(out["badArgs"].get("thrown") and out["badArgs"].get("code") ==
          -32602 and "query" in out["badArgs"]["message"],
          "missing query %s" % out["badArgs"])
    check(out["badUri"] == {"thrown": True, "code": -32002},
          "unknown resource %s" % out["badUri"])
    # The invalid batch recorded nothing.
    st, js = d.http_json("GET", "/knowledge/%s" % PROJECT)
    check(st == 200 and js.get("batches") == 1, "after the SDK: %s %s"
          % (st, js))
    return js


def s_roles(d, before):
    out = node(d, OBS, "observer")
    check(out["query"].get("isError") is False and "mcp-principle" in
          out["query"]["text"], "observer's query %s" % out["query"])
    check("mcp-principle" in out["md"][0]["text"], "observer's read %s"
          % out["md"])
    check(out["act"].get("isError") is True and "FORBIDDEN" in
          out["act"]["text"], "observer's act %s" % out["act"])
    out = node(d, SCP, "scoped")
    check(out["query"].get("isError") is True and "FORBIDDEN" in
          out["query"]["text"], "scoped token's query %s" % out["query"])
    check(out["read"].get("thrown") and out["read"].get("code") == -32001,
          "scoped token's read %s" % out["read"])
    st, js = d.http_json("GET", "/knowledge/%s" % PROJECT)
    check(js.get("seq") == before.get("seq"), "the observer recorded: %s"
          % js)
    st, _, _ = curl(d, "POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    token=None)
    check(st == 401, "no token -> %s" % st)


def s_transport(d):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    st, hd, _ = curl(d, "GET", headers=["Accept: text/event-stream"])
    check(st == 405 and "POST" in hd.get("allow", ""), "GET -> %s %s"
          % (st, hd))
    st, _, _ = curl(d, "DELETE", headers=["Mcp-Session-Id: pk-" + "0" * 32])
    check(st == 405, "DELETE -> %s" % st)
    st, hd, b = curl(d, "POST", {"jsonrpc": "2.0",
                                 "method": "notifications/initialized"})
    check(st == 202 and b == "", "notification -> %s %r" % (st, b))
    st, _, js = rpc_json(curl(d, "POST", ping,
                              headers=["Mcp-Session-Id: not-ours"]))
    check(st == 404 and js["error"]["code"] == -32600 and js["id"] is None,
          "unknown session -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", ping, headers=[
        "Mcp-Session-Id: pk-" + "a" * 32, "MCP-Protocol-Version: 2025-06-18"]))
    check(st == 200 and js == {"jsonrpc": "2.0", "id": 1, "result": {}},
          "ping -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", {"jsonrpc": "2.0", "id": "x",
                                          "method": "prompts/list"}))
    check(st == 200 and js["id"] == "x" and js["error"]["code"] == -32601,
          "unknown method -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", '{"jsonrpc": "2.0", "id": 1,'))
    check(st == 400 and js["error"]["code"] == -32700 and js["id"] is None,
          "bad JSON -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", {"jsonrpc": "1.0", "id": 1,
                                          "method": "ping"}))
    check(st == 400 and js["error"]["code"] == -32600, "jsonrpc 1.0 -> %s %s"
          % (st, js))
    st, _, js = rpc_json(curl(d, "POST", {"jsonrpc": "2.0", "id": 2,
                                          "method": "tools/call",
                                          "params": {"name": "x"}}))
    check(st == 200 and js["error"]["code"] == -32602, "unknown tool -> %s %s"
          % (st, js))
    batch = [ping, {"jsonrpc": "2.0", "method": "notifications/x"},
             {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                 "name": "knowledge_query", "arguments": {
                     "projectId": PROJECT, "query": "(get-principles)"}}}]
    st, _, js = rpc_json(curl(d, "POST", batch, headers=[
        "MCP-Protocol-Version: 2025-03-26"]))
    check(st == 200 and isinstance(js, list) and [m["id"] for m in js] ==
          [1, 3] and "mcp-principle" in js[1]["result"]["content"][0]["text"],
          "batch under 2025-03-26 -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", batch, headers=[
        "MCP-Protocol-Version: 2025-06-18"]))
    check(st == 400 and js["error"]["code"] == -32600,
          "batch under 2025-06-18 -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", [{"jsonrpc": "2.0", "id": 1,
                                           "method": "initialize",
                                           "params": {"protocolVersion":
                                                      "2025-03-26"}}]))
    check(st == 200 and js[0]["error"]["code"] == -32600,
          "initialize in a batch -> %s %s" % (st, js))
    st, _, js = rpc_json(curl(d, "POST", ping, headers=[
        "MCP-Protocol-Version: 1999-01-01"]))
    check(st == 400 and "1999-01-01" in js["error"]["message"],
          "bad protocol version -> %s %s" % (st, js))
    for asked, got in (("2024-11-05", "2024-11-05"),
                       ("2025-03-26", "2025-03-26"),
                       ("2099-12-31", "2025-06-18")):
        st, hd, js = rpc_json(curl(d, "POST", {
            "jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
                "protocolVersion": asked, "capabilities": {},
                "clientInfo": {"name": "curl", "version": "1"}}}))
        check(st == 200 and js["result"]["protocolVersion"] == got and
              hd.get("mcp-session-id", "").startswith("pk-"),
              "initialize %s -> %s %s %s" % (asked, st, hd, js))
    # A request sent again in the same MCP session (same id) records once.
    act = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {
        "name": "knowledge_act", "arguments": {"projectId": PROJECT,
                                               "actions": [["record-principle",
                                                            {"name": "retried",
                                                             "description": "once"}]]}}}
    hs = ["Mcp-Session-Id: pk-" + "b" * 32, "MCP-Protocol-Version: 2025-06-18"]
    got = []
    for _ in range(2):
        st, _, js = rpc_json(curl(d, "POST", act, headers=hs))
        check(st == 200 and js["result"]["isError"] is False,
              "act -> %s %s" % (st, js))
        got.append(json.loads(js["result"]["content"][0]["text"]))
    check(got[0]["batchId"] == got[1]["batchId"] and
          got[0]["batchId"].startswith("mcp-") and
          got[1].get("duplicate") is True and "duplicate" not in got[0],
          "the same request twice: %s" % got)
    st, js = d.http_json("GET", "/knowledge/%s" % PROJECT)
    check([p["name"] for p in js["principles"]].count("retried") == 1,
          "after the retry: %s" % js)
    st, _, js = rpc_json(curl(d, "POST", ""))
    check(st == 400 and js["error"]["code"] == -32700, "empty body -> %s %s"
          % (st, js))
    st, _, b = curl(d, "POST", ping, headers=["Origin: http://evil.example"])
    check(st == 403 and "Origin" in b, "foreign Origin -> %s %s" % (st, b))
    st, _, js = rpc_json(curl(d, "POST", ping, headers=[
        "Origin: http://127.0.0.1:%d" % d.port]))
    check(st == 200, "own Origin -> %s %s" % (st, js))
    st, _, _ = curl(d, "POST", json.dumps({"jsonrpc": "2.0", "id": 1,
                                           "method": "ping",
                                           "pad": "x" * (1100 * 1024)}))
    check(st == 413, "a body over max-body -> %s" % st)
    st, _, js = rpc_json(curl(d, "POST", ping, ctype="text/plain"))
    check(st == 415 and js["error"]["code"] == -32600,
          "text/plain -> %s %s" % (st, js))


def test():
    tokens = ("token %s role user\ntoken %s role observer\n"
              "token %s role user session kg:elsewhere\n" % (USR, OBS, SCP))
    d = Daemon(extra=tokens, token=ADM)
    with with_daemon(d):
        before = s_sdk(d)
        s_roles(d, before)
        s_transport(d)


run_test("knowledge_mcp", test)
