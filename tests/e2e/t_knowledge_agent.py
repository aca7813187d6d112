#!/usr/bin/python3
# The agents' knowledge tools end to end (parley-knowledge(7)), with
# tests/fixtures/fakellm.py as the model, on the local store or
# (E2E_STORE=redis) on Redis:
#  1. both tools are offered to a session's agents with their schemas;
#  2. an agent of session A calls knowledge_act recording a principle, a
#     pattern and a link between them: run at once (medium risk under
#     SUPERVISED), its result {seq, batchId, actions}, the batch in the
#     project's log (GET /knowledge/P);
#  3. an agent of session B (another session, on either worker) calls
#     knowledge_query (low risk) and its tool_result holds what A
#     recorded; JSON with format "json";
#  4. an invalid batch: the tool's error names the action and the field,
#     nothing is recorded; bad arguments (no projectId) are the tool's
#     error too;
#  5. under CAUTIOUS autonomy knowledge_act waits for approval (a
#     tool_approve_request, nothing recorded until it is approved) while
#     knowledge_query runs at once;
#  6. with `knowledge-tools off` neither tool is offered.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

PROJECT = "kg-agent-proj"
PRINCIPLE = "discovery-action-separation"
PATTERN = "batched-atomic-actions"


def conf(fport, extra=""):
    return (extra, 'provider oa {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "gpt-test"\n'
            '    timeout 10s\n    idle-timeout 10s\n}\n' % fport)


def call(cid, name, args):
    return {"id": cid, "name": name, "arguments": json.dumps(
        args, separators=(",", ":"))}


def create(d, sid, config=None):
    body = {"sessionId": sid}
    if config is not None:
        body["config"] = config
    st, js = d.http_json("POST", "/sessions", body)
    check(st == 201, "POST /sessions %s -> %s %s" % (sid, st, js))


ACTIONS = [
    ["record-principle", {"name": PRINCIPLE,
                          "description": "Queries read, actions write",
                          "confidence": 0.9,
                          "locations": ["README.md:12"],
                          "tags": ["design"]}],
    ["record-pattern", {"name": PATTERN, "type": "batch",
                        "description": "All actions checked, then applied",
                        "confidence": 0.8, "location": "src/kg.c:1"}],
    ["link-entities", {"from": PRINCIPLE, "to": PATTERN,
                       "type": "implements",
                       "description": "the batch is how it is kept"}],
]

QUERY = ('(list (get-principles) (get-patterns) '
         '(get-relationships-from "%s"))' % PRINCIPLE)


def offered(f):
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    check(reqs, "no model request")
    return {t["function"]["name"]: t["function"] for t in
            reqs[0]["body"].get("tools", [])}


def result_of(ev, tool):
    st = [e for e in of_type(ev, "tool_start") if e.get("tool") == tool]
    rs = [e for e in of_type(ev, "tool_result") if e.get("tool") == tool]
    check(len(st) == 1 and len(rs) == 1, "%s: tool_start %s tool_result %s"
          % (tool, st, rs))
    return st[0], rs[0]


def graph(d):
    st, js = d.http_json("GET", "/knowledge/%s" % PROJECT)
    check(st == 200, "GET /knowledge/%s -> %s %s" % (PROJECT, st, js))
    return js


async def s_record(d, f):
    create(d, "kga-a")
    f.reset()
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_act", "knowledge_act",
                       {"projectId": PROJECT, "actions": ACTIONS})]},
              {"kind": "text", "text": "Recorded."}])
    ev = await chat_turn(d, "kga-a", "Record what you learned.")
    one_done(ev, "knowledge_act turn")
    tools = offered(f)
    for name, req in (("knowledge_query", ["projectId", "query"]),
                      ("knowledge_act", ["projectId", "actions"])):
        check(name in tools, "%s not offered: %s" % (name, list(tools)))
        sch = tools[name].get("parameters") or {}
        check(sch.get("type") == "object" and sch.get("required") == req and
              "projectId" in sch.get("properties", {}),
              "%s schema %s" % (name, sch))
    st, rs = result_of(ev, "knowledge_act")
    check(st.get("risk") == "medium", "knowledge_act risk %s" % st)
    check(not rs.get("error"), "knowledge_act failed: %s" % rs)
    out = json.loads(rs["result"])
    check(isinstance(out.get("seq"), int) and out["seq"] > 0 and
          out.get("actions") == 3 and
          out.get("batchId", "").startswith("tc-"), "act result %s" % out)
    g = graph(d)
    check([p["name"] for p in g.get("principles", [])] == [PRINCIPLE] and
          [p["name"] for p in g.get("patterns", [])] == [PATTERN] and
          len(g.get("relationships", [])) == 1, "the graph after A: %s" % g)
    return out


async def s_query(d, f):
    create(d, "kga-b")
    f.reset()
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_q", "knowledge_query",
                       {"projectId": PROJECT, "query": QUERY}),
                  call("call_qj", "knowledge_query",
                       {"projectId": PROJECT, "query": "(get-principles)",
                        "format": "json"})]},
              {"kind": "text", "text": "Known."}])
    ev = await chat_turn(d, "kga-b", "What do we know?")
    one_done(ev, "knowledge_query turn")
    rs = [e for e in of_type(ev, "tool_result")]
    st = of_type(ev, "tool_start")
    check(len(rs) == 2 and all(not e.get("error") for e in rs) and
          all(e.get("risk") == "low" for e in st),
          "query results %s starts %s" % (rs, st))
    text = [e for e in rs if e["toolCallId"] == "call_q"][0]["result"]
    for want in (PRINCIPLE, PATTERN, "implements",
                 "Queries read, actions write"):
        check(want in text, "B's query answer lacks %r: %s" % (want, text))
    js = json.loads([e for e in rs if e["toolCallId"] == "call_qj"][0]
                    ["result"])
    check(PRINCIPLE in json.dumps(js), "json answer %s" % js)
    # The model's next request carried the answer as the tool's message.
    reqs = [q for q in f.requests() if q.get("api") == "openai"]
    msgs = [m for m in reqs[-1]["body"]["messages"] if m.get("role") == "tool"]
    check(any(PATTERN in (m.get("content") or "") for m in msgs),
          "the answer did not reach the model: %s" % msgs)
    # B's session and A's are two sessions; their logs hold their own.
    evs = d.log_events("kga-b")
    check(any(e.get("type") == "tool_result" and PRINCIPLE in
              e.get("result", "") for e in evs), "B's log: %s" %
          [short(e) for e in evs])


async def s_invalid(d, f):
    before = graph(d)
    f.reset()
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_bad", "knowledge_act",
                       {"projectId": PROJECT, "actions": [
                           ["record-principle", {"name": "ok-one",
                                                 "description": "fine"}],
                           ["record-pattern", {"name": "p2", "type": "t",
                                               "confidence": "high"}]]}),
                  call("call_noproj", "knowledge_query",
                       {"query": "(get-principles)"})]},
              {"kind": "text", "text": "Oops."}])
    ev = await chat_turn(d, "kga-a", "Record more.")
    one_done(ev, "invalid turn")
    rs = {e["toolCallId"]: e for e in of_type(ev, "tool_result")}
    e = (rs.get("call_bad") or {}).get("error") or {}
    check("INVALID_ACTION" in e.get("message", "") and
          "confidence" in e.get("message", "") and
          "record-pattern" in e.get("message", ""),
          "invalid batch answered %s" % rs.get("call_bad"))
    e = (rs.get("call_noproj") or {}).get("error") or {}
    check("projectId" in e.get("message", ""), "no projectId answered %s"
          % rs.get("call_noproj"))
    after = graph(d)
    check(after.get("seq") == before.get("seq") and
          len(after.get("principles", [])) == 1,
          "an invalid batch changed the graph: %s -> %s" % (before, after))


async def s_approval(d, f):
    sid = "kga-c"
    create(d, sid, {"autonomy": "CAUTIOUS"})
    before = graph(d)
    f.reset()
    f.script([{"kind": "tool_calls", "calls": [
                  call("call_q2", "knowledge_query",
                       {"projectId": PROJECT, "query": "(get-patterns)"}),
                  call("call_a2", "knowledge_act",
                       {"projectId": PROJECT, "actions": [
                           ["add-evidence", {"name": PRINCIPLE,
                                             "evidence": "approved-fact"}]]})
              ]},
              {"kind": "text", "text": "Done."}])
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    ev = []
    try:
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "Record with approval."})
        await ws_until(ws, lambda e: e.get("type") == "tool_approve_request",
                       30, into=ev)
        req = of_type(ev, "tool_approve_request")[0]
        check(req.get("tool") == "knowledge_act" and
              req.get("risk") == "medium", "approval request %s" % req)
        # The query ran at once; the act has not run.
        await ws_until(ws, lambda e: e.get("type") == "tool_result" and
                       e.get("tool") == "knowledge_query", 30, into=ev)
        check(not [e for e in of_type(ev, "tool_start")
                   if e.get("tool") == "knowledge_act"],
              "knowledge_act started before its approval")
        await asyncio.sleep(0.3)
        check(graph(d).get("seq") == before.get("seq"),
              "recorded before the approval")
        st, js = d.http_json("POST", "/sessions/%s/messages" % sid, {
            "v": 1, "type": "tool_approve", "sessionId": sid,
            "toolCallId": req["toolCallId"], "decision": "approve"})
        check(st == 202, "approve -> %s %s" % (st, js))
        await ws_until(ws, is_done, 30, into=ev)
    finally:
        await ws.close()
    _, rs = result_of(ev, "knowledge_act")
    check(not rs.get("error") and json.loads(rs["result"]).get("actions") ==
          1, "approved act %s" % rs)
    g = graph(d)
    p = [x for x in g["principles"] if x["name"] == PRINCIPLE][0]
    check("approved-fact" in p.get("evidence", []), "evidence %s" % p)


async def s_off(f):
    extra, prov = conf(f.port, "knowledge-tools off\n")
    d = Daemon(extra=extra, providers=prov, default="oa")
    with with_daemon(d):
        create(d, "kga-off")
        f.reset()
        f.script([{"kind": "text", "text": "Hi."}])
        ev = await chat_turn(d, "kga-off", "hello")
        one_done(ev, "knowledge-tools off")
        tools = offered(f)
        check("knowledge_query" not in tools and "knowledge_act" not in tools,
              "offered with knowledge-tools off: %s" % list(tools))


async def s_scoped(f):
    """A session made by a token scoped to it: its agent's tools reach
    no project that scope does not name (kg:P), nor create one."""
    extra, prov = conf(f.port, "token sc-tok role user session kga-s\n"
                       "token sc2-tok role user session k*\n")
    d = Daemon(extra=extra, providers=prov, default="oa", token="adm-tok")
    with with_daemon(d):
        for tok, sid, proj, ok in (("sc-tok", "kga-s", "other", False),
                                   ("sc2-tok", "kga-t", "mine", True)):
            d.token = tok
            create(d, sid)
            f.reset()
            f.script([{"kind": "tool_calls", "calls": [
                          call("call_s", "knowledge_act",
                               {"projectId": proj,
                                "actions": ACTIONS[:1]})]},
                      {"kind": "text", "text": "Done."}])
            ev = await chat_turn(d, sid, "Record it.")
            one_done(ev, "scoped turn")
            rs = {e["toolCallId"]: e for e in of_type(ev, "tool_result")}
            e = (rs.get("call_s") or {}).get("error") or {}
            if ok:
                check(not e, "a scope that names kg:%s refused: %s" %
                      (proj, rs.get("call_s")))
            else:
                check("FORBIDDEN" in e.get("message", "") and
                      "scoped" in e.get("message", ""),
                      "a scoped token's agent wrote kg:%s: %s" %
                      (proj, rs.get("call_s")))
            d.token = "adm-tok"
            st, _ = d.http_json("GET", "/sessions/kg:%s" % proj)
            check(st == (200 if ok else 404), "kg:%s after the tool: %s" %
                  (proj, st))


async def test():
    f = FakeLLM().start()
    try:
        extra, prov = conf(f.port)
        d = Daemon(extra=extra, providers=prov, default="oa")
        with with_daemon(d):
            await s_record(d, f)
            await s_query(d, f)
            await s_invalid(d, f)
            await s_approval(d, f)
        await s_off(f)
        await s_scoped(f)
    finally:
        f.stop()
        f.cleanup()


run_test("knowledge_agent", test)
