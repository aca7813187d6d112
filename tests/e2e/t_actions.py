#!/usr/bin/python3
# Proposed actions and directives end to end, two external agents (A and B,
# websocket clients on /sessions/ID/stream?role=agent&agentId=) and a user,
# on the local store or (E2E_STORE=redis) on Redis:
#  a. A proposes (actionId assigned, action normalised) -> B approves ->
#     action_approved, action_execute to A -> A's action_result; A's own
#     approval, an observer's and B's result are FORBIDDEN; a second approve
#     and a second result are duplicates; bad actions are BAD_REQUEST; every
#     step is in GET /api/audit and `parleyctl audit`;
#  b. the user rejects (action_rejected with the reason); a result after it
#     is a duplicate; an executor named in the action gets action_execute;
#     once the session is terminated, answers get SESSION_ENDED;
#  c. autonomy MANUAL: B's approval is an audit_entry awaiting a person, the
#     result is refused until the user approves too;
#  d. pending actions in session_state after a reconnect; every worker is
#     SIGKILLed between the approval and the result: the executor comes
#     back, has action_execute in the log, posts the result once;
#  e. a directive: logged, received by an external agent, FORBIDDEN from an
#     agent, and seen once by the model (fakellm) in its next call;
#  f. action-timeout 2s: an unanswered proposal expires (action_expired),
#     a late approval is acknowledged as a duplicate.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN, USER, OBS, AGENT = "adm-secret", "usr-secret", "obs-secret", "agt-secret"


def daemon(port, extra=""):
    tokens = ("token %s role user\ntoken %s role observer\n"
              "token %s role agent\n" % (USER, OBS, AGENT))
    prov = ('provider oa {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "m"\n}\n' % port)
    return Daemon(extra=tokens + extra, default="oa", token=ADMIN,
                  providers=prov)


async def until(ws, what, pred, into, timeout=20):
    """Events until pred(event); one already in into counts (an ack and
    the event it names may come in either order)."""
    for i, e in enumerate(into):
        if pred(e):
            return into[:i + 1]
    try:
        return await ws_until(ws, pred, timeout, into=into)
    except (asyncio.TimeoutError, Fail):
        raise Fail("%s: not seen in %d s; got %s" % (what, timeout,
                                                     [short(e) for e in into[-12:]]))


async def agent(d, sid, name, last=None):
    path = "/sessions/%s/stream?role=agent&agentId=%s&access_token=%s" % (
        sid, name, AGENT)
    if last is not None:
        path += "&lastSeq=%d" % last
    ws = await ws_connect(d.url(path))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "first event %s" % short(st))
    return ws, st


async def user(d, sid):
    ws = await ws_connect(d.url("/sessions/%s/stream?access_token=%s" %
                                (sid, USER)))
    st = await ws_recv(ws)
    check(st.get("type") == "session_state", "first event %s" % short(st))
    return ws, st


def post(d, sid, body, token=USER, agent_id=None):
    body = dict(body, v=1, sessionId=sid)
    q = "?role=agent&agentId=%s" % agent_id if agent_id else ""
    return d.http_json("POST", "/sessions/%s/messages%s" % (sid, q), body,
                       headers={"Authorization": "Bearer " + token})


def msg(sid, t, **kw):
    return dict(kw, v=1, type=t, sessionId=sid)


async def reply(ws, ev, mid, what):
    """The ack or error answering client message mid, sent just now."""
    new = []
    got = await until(ws, what, lambda e: e.get("id") == mid and
                      e.get("type") in ("ack", "error") or
                      (e.get("type") == "error" and "seq" not in e), new)
    ev += new
    return got[-1]


ACTION = {"type": "code_change", "description": "Extend the mutex to cover "
          "the idempotency check", "params": {"file": "src/retry.ts",
                                              "lines": [245, 260]}}


async def propose(ws, ev, sid, mid, action=ACTION):
    await ws_send(ws, msg(sid, "action_propose", id=mid, action=action))
    a = await reply(ws, ev, mid, "ack of %s" % mid)
    check(a["type"] == "ack" and a.get("eventSeq"), "propose -> %s" % a)
    got = await until(ws, "action_proposed", lambda e: e.get("type") ==
                      "action_proposed" and e.get("seq") == a["eventSeq"], ev)
    return got[-1]


def log_of(d, sid, t, aid=None):
    return [e for e in d.log_events(sid) if e["type"] == t and
            (aid is None or e.get("actionId") == aid)]


async def part_a(d):
    sid, ea, eb = "ac-a", [], []
    wa, _ = await agent(d, sid, "manus")
    wb, _ = await agent(d, sid, "claude")
    p = await propose(wa, ea, sid, "p-1")
    aid = p["actionId"]
    check(aid.startswith("act-") and p["agentId"] == "manus" and
          p["action"] == dict(ACTION, executor="manus", risk="medium") and
          p["needsHuman"] is False and p.get("expiresAt") and
          p.get("id") == "p-1", "action_proposed %s" % p)
    await until(wb, "B sees the proposal", lambda e: e.get("type") ==
                "action_proposed" and e.get("actionId") == aid, eb)
    # the same message again (a retry) is the same proposal
    await ws_send(wa, msg(sid, "action_propose", id="p-1", action=ACTION))
    a = await reply(wa, ea, "p-1", "ack of the retry")
    check(a.get("duplicate") is True and a.get("eventSeq") == p["seq"],
          "retried proposal -> %s" % a)
    # bad actions
    for bad, field in (({"description": "x"}, "action.type"),
                       (dict(ACTION, type="rm -rf"), "action.type"),
                       (dict(ACTION, description=""), "action.description"),
                       (dict(ACTION, params=[1]), "action.params"),
                       (dict(ACTION, risk="extreme"), "action.risk"),
                       (dict(ACTION, executor="a b"), "action.executor"),
                       (dict(ACTION, color="red"), "action.color"),
                       ("do it", "action")):
        s, js = post(d, sid, {"type": "action_propose", "action": bad},
                     AGENT, "manus")
        check(s == 400 and err_code(js) == "BAD_REQUEST" and field in
              js["error"]["message"], "bad action %r -> %s %s" % (bad, s, js))
    s, js = post(d, sid, {"type": "action_propose", "action": ACTION}, USER)
    check(s == 403, "a user's proposal -> %s %s" % (s, js))
    # self-approval, an observer, an unknown action
    await ws_send(wa, msg(sid, "action_approve", id="self-1", actionId=aid))
    a = await reply(wa, ea, "self-1", "self-approval answer")
    check(a["type"] == "error" and a["code"] == "FORBIDDEN" and "own" in
          a["message"], "self-approval -> %s" % a)
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid}, OBS)
    check(s == 403, "observer's approval -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "action_approve", "actionId": "act-no"})
    check(s == 404 and err_code(js) == "NOT_FOUND", "unknown -> %s %s"
          % (s, js))
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid,
                          "decision": "maybe"}, AGENT, "claude")
    check(s == 400 and "decision" in js["error"]["message"],
          "decision maybe -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "action_result", "actionId": aid,
                          "result": "x"}, AGENT, "manus")
    check(s == 409, "result before approval -> %s %s" % (s, js))
    # B approves: approved, then execute addressed to A
    await ws_send(wb, msg(sid, "action_approve", id="ap-1", actionId=aid,
                          decision="approve"))
    a = await reply(wb, eb, "ap-1", "B's approval")
    check(a["type"] == "ack" and a.get("eventSeq"), "approve -> %s" % a)
    await until(wa, "action_execute", lambda e: e.get("type") ==
                "action_execute", ea)
    ap = of_type(ea, "action_approved")
    ex = of_type(ea, "action_execute")[-1]
    check(ap and ap[-1]["actionId"] == aid and ap[-1]["by"] == "agent" and
          ap[-1]["approverId"] == "claude" and ap[-1]["agentId"] == "manus",
          "action_approved %s" % ap)
    check(ex["actionId"] == aid and ex["agentId"] == "manus" and
          ex["proposer"] == "manus" and ex["action"]["type"] ==
          "code_change" and ex["seq"] > ap[-1]["seq"], "action_execute %s"
          % ex)
    # a second approval is a duplicate
    await ws_send(wb, msg(sid, "action_approve", id="ap-2", actionId=aid))
    a = await reply(wb, eb, "ap-2", "the second approval")
    check(a["type"] == "ack" and a.get("duplicate") is True,
          "second approve -> %s" % a)
    s, js = post(d, sid, {"type": "action_result", "actionId": aid,
                          "result": "x"}, AGENT, "claude")
    check(s == 403 and "executor" in js["error"]["message"],
          "B's result -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "action_result", "actionId": aid},
                 AGENT, "manus")
    check(s == 400, "result without result -> %s %s" % (s, js))
    res = {"patched": True, "tests": "12 passed"}
    await ws_send(wa, msg(sid, "action_result", id="r-1", actionId=aid,
                          result=res))
    a = await reply(wa, ea, "r-1", "the result's ack")
    check(a["type"] == "ack", "result -> %s" % a)
    got = await until(wb, "B sees the result", lambda e: e.get("type") ==
                      "action_result", eb)
    r = got[-1]
    check(r["actionId"] == aid and r["agentId"] == "manus" and
          r["result"] == res and r["proposer"] == "manus" and
          isinstance(r.get("duration"), (int, float)), "action_result %s" % r)
    s, js = post(d, sid, {"type": "action_result", "actionId": aid,
                          "result": "again"}, AGENT, "manus")
    check(s == 200 and js.get("duplicate") is True, "second result -> %s %s"
          % (s, js))
    await wa.close()
    await wb.close()
    types = [e["type"] for e in d.log_events(sid) if
             e["type"].startswith("action_")]
    check(types == ["action_proposed", "action_approved", "action_execute",
                    "action_result"], "logged steps %s" % types)
    st, js = d.http_json("GET", "/api/audit?sessionId=%s" % sid)
    got = [e["type"] for e in (js or {}).get("entries", js or [])
           if isinstance(e, dict)] if st == 200 else []
    check(st == 200 and got == types, "GET /api/audit -> %s %s" % (st, js))
    rc, out, err = d.ctl("audit", sid)
    check(rc == 0 and out.count("action " + aid) == 4 and "proposed" in out
          and "execute" in out, "parleyctl audit: %s %s" % (out, err))


async def part_b(d):
    sid, ea = "ac-b", []
    wa, _ = await agent(d, sid, "manus")
    p = await propose(wa, ea, sid, "pb-1", dict(ACTION, executor="claude"))
    aid = p["actionId"]
    check(p["action"]["executor"] == "claude", "executor %s" % p)
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid,
                          "decision": "reject", "reason": "too risky"})
    check(s == 202 and js.get("seq"), "reject -> %s %s" % (s, js))
    got = await until(wa, "action_rejected", lambda e: e.get("type") ==
                      "action_rejected", ea)
    rj = got[-1]
    check(rj["actionId"] == aid and rj["by"] == "user" and
          rj["reason"] == "too risky" and "approverId" not in rj,
          "action_rejected %s" % rj)
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid},
                 AGENT, "claude")
    check(s == 200 and js.get("duplicate"), "approve after reject -> %s %s"
          % (s, js))
    check(not log_of(d, sid, "action_execute"), "executed after a reject")
    # executor claude: the user's approval sends action_execute to claude
    p = await propose(wa, ea, sid, "pb-2", dict(ACTION, executor="claude"))
    s, js = post(d, sid, {"type": "action_approve",
                          "actionId": p["actionId"]})
    check(s == 202, "user's approval -> %s %s" % (s, js))
    got = await until(wa, "action_execute", lambda e: e.get("type") ==
                      "action_execute", ea)
    check(got[-1]["agentId"] == "claude" and got[-1]["proposer"] == "manus",
          "execute addressed to %s" % got[-1])
    s, js = post(d, sid, {"type": "action_result", "actionId": p["actionId"],
                          "error": "disk full"}, AGENT, "claude")
    check(s == 202, "claude's error result -> %s %s" % (s, js))
    r = log_of(d, sid, "action_result", p["actionId"])
    check(len(r) == 1 and r[0]["error"] == "disk full" and "result" not in
          r[0], "error result %s" % r)
    # a completed session takes no more: its open action stays open
    p = await propose(wa, ea, sid, "pb-3")
    s, js = post(d, sid, {"type": "terminate"}, ADMIN)
    check(s == 202, "terminate -> %s %s" % (s, js))
    for body, tok in (({"type": "action_approve", "actionId": p["actionId"]},
                       USER), ({"type": "directive", "message": "x"}, USER)):
        s, js = post(d, sid, body, tok)
        check(s == 409 and err_code(js) == "SESSION_ENDED",
              "%s after the end -> %s %s" % (body["type"], s, js))
    await wa.close()
    wa, st = await agent(d, sid, "manus")
    check([x["actionId"] for x in st.get("pendingActions")] ==
          [p["actionId"]], "pending after the end %s" % st)
    await wa.close()


async def part_c(d):
    sid, ea = "ac-c", []
    wu, _ = await user(d, sid)
    s, js = post(d, sid, {"type": "set_autonomy", "level": "MANUAL"})
    check(s == 202, "set_autonomy -> %s %s" % (s, js))
    wa, _ = await agent(d, sid, "manus")
    p = await propose(wa, ea, sid, "pc-1", dict(ACTION, risk="low"))
    aid = p["actionId"]
    check(p["needsHuman"] is True, "MANUAL needs a human: %s" % p)
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid},
                 AGENT, "claude")
    check(s == 202, "B's approval -> %s %s" % (s, js))
    got = await until(wa, "audit_entry", lambda e: e.get("type") ==
                      "audit_entry" and e.get("actionId") == aid, ea)
    au = got[-1]
    check(au["decision"] == "approved" and au["awaiting"] == "human" and
          au["approverId"] == "claude" and au["tool"] == "action:code_change",
          "audit_entry %s" % au)
    s, js = post(d, sid, {"type": "action_approve", "actionId": aid},
                 AGENT, "claude")
    check(s == 200 and js.get("duplicate"), "B again -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "action_result", "actionId": aid,
                          "result": 1}, AGENT, "manus")
    check(s == 409, "result with only B's approval -> %s %s" % (s, js))
    check(not log_of(d, sid, "action_approved"), "approved without a person")
    ws2, st = await agent(d, sid, "claude")
    pend = st.get("pendingActions") or []
    check(len(pend) == 1 and pend[0]["actionId"] == aid and
          pend[0]["phase"] == "proposed" and
          pend[0]["approvals"] == ["agent:claude"], "pending %s" % pend)
    await ws2.close()
    await ws_send(wu, msg(sid, "action_approve", id="u-1", actionId=aid))
    await until(wa, "action_execute", lambda e: e.get("type") ==
                "action_execute", ea)
    ap = of_type(ea, "action_approved")[-1]
    check(ap["by"] == "user" and ap["approvals"] == ["agent:claude", "user"],
          "action_approved %s" % ap)
    s, js = post(d, sid, {"type": "action_result", "actionId": aid,
                          "result": 1}, AGENT, "manus")
    check(s == 202, "result -> %s %s" % (s, js))
    await wa.close()
    await wu.close()


async def part_d(d):
    sid, ea, eb = "ac-d", [], []
    wa, _ = await agent(d, sid, "manus")
    wb, _ = await agent(d, sid, "claude")
    p1 = await propose(wa, ea, sid, "pd-1")
    p2 = await propose(wa, ea, sid, "pd-2")
    await wb.close()
    wb, st = await agent(d, sid, "claude")
    pend = {x["actionId"]: x for x in st.get("pendingActions") or []}
    check(set(pend) == {p1["actionId"], p2["actionId"]} and
          pend[p1["actionId"]]["agentId"] == "manus" and
          pend[p1["actionId"]]["action"]["type"] == "code_change",
          "pending after a reconnect %s" % pend)
    await ws_send(wb, msg(sid, "action_approve", id="d-1",
                          actionId=p1["actionId"]))
    await until(wa, "action_execute", lambda e: e.get("type") ==
                "action_execute", ea)
    ex = of_type(ea, "action_execute")[-1]
    last = ex["seq"] - 1
    await wa.close()
    await wb.close()
    d.kill_workers()
    ea2 = []
    wa, st = await agent(d, sid, "manus", last)
    pend = {x["actionId"]: x for x in st.get("pendingActions") or []}
    check(pend.get(p1["actionId"], {}).get("phase") == "executing" and
          pend.get(p2["actionId"], {}).get("phase") == "proposed",
          "after the kill, pendingActions %s" % pend)
    got = await until(wa, "action_execute replayed", lambda e: e.get(
        "type") == "action_execute", ea2)
    check(got[-1]["seq"] == ex["seq"], "replayed %s" % got[-1])
    await ws_send(wa, msg(sid, "action_result", id="dr-1",
                          actionId=p1["actionId"], result="done"))
    a = await reply(wa, ea2, "dr-1", "result after the kill")
    check(a["type"] == "ack" and not a.get("duplicate"), "result -> %s" % a)
    await ws_send(wa, msg(sid, "action_result", id="dr-2",
                          actionId=p1["actionId"], result="done"))
    a = await reply(wa, ea2, "dr-2", "second result after the kill")
    check(a["type"] == "ack" and a.get("duplicate") is True,
          "second result -> %s" % a)
    # the other proposal is still approvable after the kill
    s, js = post(d, sid, {"type": "action_approve",
                          "actionId": p2["actionId"]}, AGENT, "claude")
    check(s == 202, "approve after the kill -> %s %s" % (s, js))
    await wa.close()
    for aid in (p1["actionId"], p2["actionId"]):
        check(len(log_of(d, sid, "action_execute", aid)) == 1,
              "%s executed %d times" % (aid, len(log_of(
                  d, sid, "action_execute", aid))))
    check(len(log_of(d, sid, "action_result")) == 1, "results %s" %
          log_of(d, sid, "action_result"))


async def part_e(d, f):
    sid, ea = "ac-e", []
    wa, _ = await agent(d, sid, "manus")
    wu, _ = await user(d, sid)
    text = "Focus on the payment retry path first"
    await ws_send(wu, msg(sid, "directive", id="dir-1", message=text))
    got = await until(wa, "directive", lambda e: e.get("type") ==
                      "directive", ea)
    dv = got[-1]
    check(dv["message"] == text and dv["from"] == "user" and dv.get("seq"),
          "directive %s" % dv)
    s, js = post(d, sid, {"type": "directive", "message": "x"}, AGENT,
                 "manus")
    check(s == 403, "an agent's directive -> %s %s" % (s, js))
    s, js = post(d, sid, {"type": "directive", "message": ""})
    check(s == 400 and "message" in js["error"]["message"],
          "empty directive -> %s %s" % (s, js))
    f.reset()
    f.script([{"kind": "text", "text": "On it."},
              {"kind": "text", "text": "Still on it."}])
    await chat_turn(d, sid, "What first?")
    msgs = f.requests()[0]["body"]["messages"]
    want = "Directive from the user: " + text
    check({"role": "user", "content": want} in msgs and msgs[-1] == {
        "role": "user", "content": want}, "model's messages %s" % msgs)
    await chat_turn(d, sid, "And then?")
    msgs = f.requests()[1]["body"]["messages"]
    check([m for m in msgs if m["content"] == want] == [{
        "role": "user", "content": want}] and msgs[-1]["content"] ==
        "And then?", "second call's messages %s" % msgs)
    await wa.close()
    await wu.close()


async def part_f(port):
    d = daemon(port, "action-timeout 2s\n")
    with with_daemon(d):
        sid, ea = "ac-f", []
        wa, _ = await agent(d, sid, "manus")
        p = await propose(wa, ea, sid, "pf-1")
        got = await until(wa, "action_expired", lambda e: e.get("type") ==
                          "action_expired", ea, timeout=10)
        x = got[-1]
        check(x["actionId"] == p["actionId"] and x["phase"] == "approval" and
              x["by"] == "parleyd", "action_expired %s" % x)
        s, js = post(d, sid, {"type": "action_approve",
                              "actionId": p["actionId"]})
        check(s == 200 and js.get("duplicate"), "late approval -> %s %s"
              % (s, js))
        await wa.close()
        wa, st = await agent(d, sid, "manus")
        check(st.get("pendingActions") == [], "pending after expiry %s"
              % st.get("pendingActions"))
        await wa.close()


async def main():
    with with_fakellm() as f:
        d = daemon(f.port)
        with with_daemon(d):
            for p in (part_a, part_b, part_c, part_d):
                print("--", p.__name__, flush=True)
                await p(d)
            print("-- part_e", flush=True)
            await part_e(d, f)
        print("-- part_f", flush=True)
        await part_f(f.port)


run_test("actions", main)
