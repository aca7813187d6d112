#!/usr/bin/python3
# Internal agent teams end to end, with script providers playing the agents:
#  1. agent_add x3 on a default session (different providers and models):
#     each a team_update with the whole roster; a bad field, an unknown
#     provider (the error names the configured ones), max-agents, a taken
#     name are refused and change nothing; chat `to` a named agent gets its
#     answer (done with its agentId), `to` nobody is BAD_REQUEST;
#     agent_remove: team_update without it, the lead stays;
#  2. POST /sessions with agent objects, strategy lead: the lead hands off
#     with the built-in handoff tool (tool_start/tool_result,
#     agent_handoff), the other agent answers, team_done; each agent's usage
#     in GET /sessions/{id} and their sum;
#  3. round_robin: three agents in turn until the third concludes; then
#     with no conclude, until maxTeamTurns; sequential: each agent once,
#     and a POST .../messages SSE turn stream ends with its team_done;
#  4. the lead's complete_objective ends the session (session_complete,
#     reason objective);
#  5. the fake OpenAI and Anthropic LLMs (tests/fixtures/fakellm.py) as
#     two agents of a sequential team: the reasoning model o3-mini gets
#     max_completion_tokens and no temperature, each agent its system
#     prompt and model, the second the first one's words; their streamed
#     reasoning (reasoning_content deltas, a thinking block) becomes one
#     thought event each, before the agent's tokens;
#  6. the owning worker SIGKILLed during the second agent's turn of a
#     round_robin round: the turn re-runs as that agent, the round goes on
#     to the third, every logged event once (seqs contiguous, one done per
#     messageId); then the same with the whole host crashing (every
#     process at once) and starting again on the same store.
import re
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN = "team-admin"
USER = "team-user"
OBS = "team-observer"


def tool_reply(calls, then):
    return "@tool " + json.dumps({"calls": calls, "then": then})


PROVIDERS = (
    provider_block("fast", FAST_REPLY) +
    provider_block("alpha", "Alpha says hi.") +
    provider_block("beta", "Beta agrees.") +
    provider_block("gamma", "Gamma adds a point.") +
    provider_block("handoff", tool_reply(
        [{"name": "handoff", "arguments": {"agentId": "coder",
                                           "reason": "needs code"}}],
        "Passing to coder.")) +
    provider_block("conclude", tool_reply(
        [{"name": "conclude", "arguments": {"summary": "agreed"}}],
        "We are done.")) +
    provider_block("objective", tool_reply(
        [{"name": "complete_objective",
          "arguments": {"summary": "the plan is ready"}}],
        "Objective met.")) +
    provider_block("slow", "Slowly " + "and surely " * 12 + "done.",
                   chunk=2, delay="60ms"))


def post(d, sid, body, token=ADMIN):
    return post_message(d, sid, body, token)


def create(d, sid, body):
    st, js = d.http_json("POST", "/sessions", dict(body, sessionId=sid))
    check(st == 201, "POST /sessions %s -> %s %s" % (sid, st, js))


def created_log(d, sid):
    """The log once the team_update of the session's creation is in it
    (the 201 does not wait for it to be stored)."""
    deadline = time.time() + 10
    while True:
        ev = d.log_events(sid)
        if of_type(ev, "team_update") or time.time() > deadline:
            return ev
        time.sleep(0.05)


def create_team(d, sid, strategy, agents):
    """A session of agents (name, provider) with roles a, b, c...;
    returns their agentIds by name."""
    create(d, sid, {"agents": [{"role": chr(97 + i), "name": n,
                                "provider": p}
                               for i, (n, p) in enumerate(agents)],
                    "config": {"strategy": strategy}})
    return agent_ids(created_log(d, sid))


def info(d, sid):
    st, js = d.http_json("GET", "/sessions/%s" % sid)
    check(st == 200, "GET /sessions/%s -> %s %s" % (sid, st, js))
    return js


def roster(ev):
    return [(a["name"], a["role"], a["provider"], a.get("model"))
            for a in ev["agents"]]


def check_error(st, js, http, code, words, what):
    check(st == http and js and js.get("error", {}).get("code") == code,
          "%s: expected %d %s, got %s %s" % (what, http, code, st, js))
    msg = js["error"]["message"]
    for w in words:
        check(w in msg, "%s: message %r lacks %r" % (what, msg, w))


async def team_round(d, sid, message, to=None, timeout=60):
    """One chat on the session's stream, read until its team_done (or, for
    a one-agent session, its idle); returns the events."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    try:
        await ws_recv(ws)
        m = {"v": 1, "type": "chat", "sessionId": sid, "message": message}
        if to is not None:
            m["to"] = to
        await ws_send(ws, m)
        return await ws_until(ws, lambda e: e.get("type") in
                              ("team_done", "session_complete"), timeout)
    finally:
        await ws.close()


def dones(ev):
    return [(e["agentId"], e["messageId"]) for e in of_type(ev, "done")]


def agent_ids(ev):
    return {a["name"]: a["agentId"] for a in
            of_type(ev, "team_update")[-1]["agents"]}


async def part_roster(d):
    sid = "team-add"
    create(d, sid, {})
    lead = info(d, sid)["agents"][0]["agentId"]
    adds = [{"role": "Planner", "name": "planner", "provider": "alpha",
             "model": "alpha-large", "goal": "plan the work",
             "domain": "software"},
            {"role": "coder", "provider": "beta", "model": "beta-1",
             "roles": ["tester", "reviewer"]},
            {"role": "critic", "name": "critic", "provider": "gamma"}]
    seqs = []
    for a in adds:
        st, js = post(d, sid, dict(a, type="agent_add"), USER)
        check(st == 202 and js.get("seq"), "agent_add %s -> %s %s"
              % (a, st, js))
        seqs.append(js["seq"])
    ev = d.log_events(sid)
    ups = of_type(ev, "team_update")
    check([u["seq"] for u in ups] == seqs, "team_update seqs %s, acks %s"
          % ([u["seq"] for u in ups], seqs))
    check([len(u["agents"]) for u in ups] == [2, 3, 4],
          "roster sizes %s" % [len(u["agents"]) for u in ups])
    check(roster(ups[-1]) == [
        ("assistant", "assistant", "fast", None),
        ("planner", "Planner", "alpha", "alpha-large"),
        ("coder", "coder", "beta", "beta-1"),
        ("critic", "critic", "gamma", None)], "roster %s" % roster(ups[-1]))
    ids = agent_ids(ev)
    for name, aid in ids.items():
        check(re.fullmatch(r"%s-[0-9a-f]{8}" % name, aid) is not None or
              name == "assistant", "agentId %s of %s" % (aid, name))
    check(ups[-1]["strategy"] == "lead" and ups[-1]["lead"] == lead,
          "strategy/lead %s" % ups[-1])
    check(ups[-1]["agents"][0]["tools"] == ["handoff"],
          "the lead's tools %s" % ups[-1]["agents"][0])
    check(ups[-1]["agents"][2].get("roles") == ["tester", "reviewer"],
          "roles %s" % ups[-1]["agents"][2])

    # Refused, and nothing changes.
    last = d.last_seq(sid)
    st, js = post(d, sid, {"type": "agent_add", "role": "x",
                           "provider": "nope"}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["provider", "nope", "fast",
                                             "alpha", "slow"], "unknown provider")
    st, js = post(d, sid, {"type": "agent_add"}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["role"], "no role")
    st, js = post(d, sid, {"type": "agent_add", "role": "r",
                           "name": "bad name!"}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["name"], "bad name")
    st, js = post(d, sid, {"type": "agent_add", "role": "r",
                           "goal": "g" * 3000}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["goal"], "long goal")
    st, js = post(d, sid, {"type": "agent_add", "role": "r",
                           "name": "critic"}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["critic"], "taken name")
    st, js = post(d, sid, {"type": "agent_add", "role": "r"}, OBS)
    check_error(st, js, 403, "FORBIDDEN", ["agent_add"], "observer")
    st, js = post(d, sid, {"type": "agent_add", "role": "fifth"}, USER)
    check_error(st, js, 409, "BAD_REQUEST", ["max-agents", "4"], "max-agents")
    st, js = post(d, sid, {"type": "agent_remove", "agentId": lead}, USER)
    check_error(st, js, 409, "BAD_REQUEST", ["lead"], "remove the lead")
    st, js = post(d, sid, {"type": "chat", "message": "hi", "to": "nobody"},
                  USER)
    check_error(st, js, 400, "BAD_REQUEST", ["to", "nobody"], "to nobody")
    check(d.last_seq(sid) == last, "refused messages were logged: %d > %d"
          % (d.last_seq(sid), last))

    # chat `to` an agent by name: it answers, with its own provider.
    ev = await team_round(d, sid, "your view?", to="critic")
    check(dones(ev) == [(ids["critic"], "m-%d" % of_type(
        ev, "user_message")[0]["seq"])], "dones %s" % dones(ev))
    check(tokens_text(ev) == "Gamma adds a point.", "text %r" % tokens_text(ev))
    check(all(e["agentId"] == ids["critic"] for e in of_type(ev, "token")),
          "token agentIds %s" % of_type(ev, "token"))
    td = of_type(ev, "team_done")[-1]
    check(td["reason"] == "answered" and td["agentId"] == ids["critic"],
          "team_done %s" % td)
    # and by agentId, to the planner
    ev = await team_round(d, sid, "plan?", to=ids["planner"])
    check([a for a, _ in dones(ev)] == [ids["planner"]], "dones %s"
          % dones(ev))

    # agent_remove: a team_update without it.
    st, js = post(d, sid, {"type": "agent_remove", "agentId": "coder"}, USER)
    check(st == 202, "agent_remove -> %s %s" % (st, js))
    up = of_type(d.log_events(sid, js["seq"] - 1), "team_update")[0]
    check(up["seq"] == js["seq"] and [a["name"] for a in up["agents"]] ==
          ["assistant", "planner", "critic"] and up["change"] == "removed",
          "team_update after remove %s" % up)
    st, js = post(d, sid, {"type": "agent_remove", "agentId": "coder"}, USER)
    check_error(st, js, 404, "NOT_FOUND", ["coder"], "removed twice")
    # session_state and GET list the roster, with per-agent usage.
    js = info(d, sid)
    check([a["name"] for a in js["agents"]] == ["assistant", "planner",
                                               "critic"], "GET agents %s"
          % js["agents"])
    check(js.get("strategy") == "lead", "GET strategy %s" % js)
    per = {a["name"]: a["usage"] for a in js["agents"]}
    check(per["critic"].get("outputTokens", 0) > 0 and
          per["planner"].get("outputTokens", 0) > 0, "per agent usage %s" % per)


def check_sums(js, what):
    for k in ("inputTokens", "outputTokens", "tokens"):
        total = sum(a["usage"].get(k, 0) for a in js["agents"])
        check(total == js["usage"][k], "%s: %s: agents sum %s, session %s"
              % (what, k, total, js["usage"][k]))


async def part_lead(d):
    sid = "team-lead"
    create(d, sid, {"agents": [
        {"role": "planner", "name": "planner", "provider": "handoff"},
        {"role": "coder", "name": "coder", "provider": "beta"},
        {"role": "reviewer", "name": "reviewer", "provider": "gamma",
         "model": "g-2"}], "config": {"strategy": "lead"}})
    ev0 = created_log(d, sid)
    up = of_type(ev0, "team_update")
    check(len(up) == 1 and [a["name"] for a in up[0]["agents"]] ==
          ["planner", "coder", "reviewer"], "created team_update %s" % up)
    ids = agent_ids(ev0)
    ev = await team_round(d, sid, "build it")
    seq = of_type(ev, "user_message")[0]["seq"]
    check(dones(ev) == [(ids["planner"], "m-%d" % seq),
                        (ids["coder"], "m-%d-1" % seq)], "dones %s" % dones(ev))
    ts = of_type(ev, "tool_start")
    tr = of_type(ev, "tool_result")
    check(len(ts) == 1 and ts[0]["tool"] == "handoff" and
          ts[0]["agentId"] == ids["planner"] and len(tr) == 1 and
          "handed off to coder" in tr[0].get("result", ""),
          "handoff tool events %s %s" % (ts, tr))
    ho = of_type(ev, "agent_handoff")
    check(len(ho) == 1 and ho[0]["from"] == ids["planner"] and
          ho[0]["to"] == ids["coder"] and ho[0]["reason"] == "needs code",
          "agent_handoff %s" % ho)
    order = [short(e) for e in ev]
    check(ev.index(of_type(ev, "done")[0]) < ev.index(ho[0]) <
          ev.index(of_type(ev, "done")[1]), "order %s" % order)
    coder_tokens = "".join(e["content"] for e in of_type(ev, "token")
                           if e["agentId"] == ids["coder"])
    check(coder_tokens == "Beta agrees.", "coder said %r" % coder_tokens)
    td = of_type(ev, "team_done")[-1]
    check(td["reason"] == "answered" and td["turns"] == 2 and
          td["agentId"] == ids["coder"], "team_done %s" % td)
    states = [(e["agentId"], e["status"]) for e in of_type(ev, "agent_state")]
    check((ids["coder"], "thinking") in states and
          (ids["planner"], "tool") in states, "agent_state %s" % states)
    js = info(d, sid)
    per = {a["name"]: a for a in js["agents"]}
    check(per["planner"]["turns"] == 1 and per["coder"]["turns"] == 1 and
          per["reviewer"]["turns"] == 0, "per agent turns %s" % per)
    check(per["reviewer"].get("model") == "g-2", "model %s" % per["reviewer"])
    check_sums(js, "lead")
    d_usage = {e["agentId"]: e["usage"]["outputTokens"]
               for e in of_type(ev, "done")}
    check(per["coder"]["usage"]["outputTokens"] == d_usage[ids["coder"]],
          "coder usage %s vs done %s" % (per["coder"], d_usage))


async def part_round_robin(d):
    sid = "team-rr"
    ids = create_team(d, sid, "round_robin", [("a1", "alpha"), ("a2", "beta"),
                                         ("a3", "conclude")])
    ev = await team_round(d, sid, "discuss")
    seq = of_type(ev, "user_message")[0]["seq"]
    check(dones(ev) == [(ids["a1"], "m-%d" % seq), (ids["a2"], "m-%d-1" % seq),
                        (ids["a3"], "m-%d-2" % seq)], "dones %s" % dones(ev))
    td = of_type(ev, "team_done")[-1]
    check(td["reason"] == "concluded" and td["turns"] == 3, "team_done %s" % td)
    check(of_type(ev, "tool_start")[0]["tool"] == "conclude",
          "conclude tool %s" % of_type(ev, "tool_start"))

    check_sums(info(d, sid), "round_robin")
    # No conclude: the cap ends it (set by set_strategy, logged).
    st, js = post(d, sid, {"type": "set_strategy", "maxTeamTurns": 4}, USER)
    check(st == 202, "set_strategy -> %s %s" % (st, js))
    st, js = post(d, sid, {"type": "set_strategy", "strategy": "nope"}, USER)
    check_error(st, js, 400, "BAD_REQUEST", ["strategy"], "bad strategy")
    st, js = post(d, sid, {"type": "agent_remove", "agentId": "a3"}, USER)
    check(st == 202, "agent_remove a3 -> %s %s" % (st, js))
    ev = await team_round(d, sid, "again")
    check([a for a, _ in dones(ev)] == [ids["a1"], ids["a2"], ids["a1"],
                                        ids["a2"]], "dones %s" % dones(ev))
    td = of_type(ev, "team_done")[-1]
    check(td["reason"] == "max_team_turns" and td["turns"] == 4,
          "team_done %s" % td)
    # A removed agent's usage stays in the session's sum.
    js = info(d, sid)
    check(sum(a["usage"]["outputTokens"] for a in js["agents"]) <
          js["usage"]["outputTokens"], "usage after remove %s" % js)

    sid = "team-seq"
    ids = create_team(d, sid, "sequential", [("s1", "alpha"), ("s2", "beta"),
                                         ("s3", "gamma")])
    ev = await team_round(d, sid, "in order")
    check([a for a, _ in dones(ev)] == [ids["s1"], ids["s2"], ids["s3"]],
          "sequential dones %s" % dones(ev))
    check(of_type(ev, "team_done")[-1]["reason"] == "answered",
          "team_done %s" % of_type(ev, "team_done"))
    # POST .../messages as SSE: the response ends with the team's answer.
    st, h, body = d.http("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "chat", "message": "as SSE"},
                         headers={"Accept": "text/event-stream",
                                  "Authorization": "Bearer " + USER},
                         timeout=30)
    sse = [json.loads(l[6:]) for l in body.decode().splitlines()
           if l.startswith("data: ")]
    check(st == 200 and [a for a, _ in dones(sse)] ==
          [ids["s1"], ids["s2"], ids["s3"]] and sse[-1]["type"] ==
          "team_done", "SSE turn stream %s %s" % (st, [short(e) for e in sse]))
    # The seed-compatible stream: the whole team's answer, then one
    # "complete" (the first speaker's done is not the end).
    st, h, body = d.http("POST", "/api/agents/stream",
                         {"sessionId": sid, "message": "as the seed API"},
                         headers={"Authorization": "Bearer " + USER},
                         timeout=30)
    chunks = [json.loads(l[6:]) for l in body.decode().splitlines()
              if l.startswith("data: ")]
    meta = [c["data"] for c in chunks if c["type"] == "metadata"]
    done_agents = [m.get("agentId") for m in meta if m.get("status") == "done"]
    check(st == 200 and done_agents == [ids["s1"], ids["s2"], ids["s3"]] and
          [m["status"] for m in meta].count("complete") == 1 and
          meta[-1]["status"] == "complete",
          "seed stream of a team %s %s" % (st, chunks))

    # POST /sessions refuses a bad team.
    st, js = d.http_json("POST", "/sessions", {"sessionId": "team-bad",
                         "agents": [{"role": "x", "provider": "zz"}]})
    check_error(st, js, 400, "BAD_REQUEST", ["agents[0].provider", "zz"],
                "POST bad provider")
    st, js = d.http_json("POST", "/sessions", {"sessionId": "team-bad",
                         "agents": [{"role": "x"}] * 5})
    check_error(st, js, 400, "BAD_REQUEST", ["max-agents"], "POST too many")
    st, js = d.http_json("POST", "/sessions", {"sessionId": "team-bad",
                         "config": {"strategy": "chaos"}})
    check_error(st, js, 400, "BAD_REQUEST", ["config.strategy"],
                "POST bad strategy")


async def part_objective(d):
    sid = "team-obj"
    create(d, sid, {"objective": "make a plan", "agents": [
        {"role": "lead", "name": "boss", "provider": "objective"},
        {"role": "helper", "name": "helper", "provider": "beta"}]})
    ids = agent_ids(created_log(d, sid))
    check(of_type(d.log_events(sid), "team_update")[0]["agents"][0]["tools"]
          == ["handoff", "complete_objective"], "lead tools")
    ev = await team_round(d, sid, "go")
    sc = of_type(ev, "session_complete")
    check(len(sc) == 1 and sc[0]["reason"] == "objective" and
          sc[0]["summary"].startswith("the plan is ready. Session ended "
                                      "(objective)"),
          "session_complete %s" % sc)
    check(ev.index(of_type(ev, "done")[0]) < ev.index(sc[0]),
          "done after session_complete: %s" % [short(e) for e in ev])
    js = info(d, sid)
    check(js["status"] == "completed" and js["result"]["reason"] ==
          "objective", "GET after objective %s" % js)
    st, js = post(d, sid, {"type": "chat", "message": "more"}, USER)
    check(st == 409, "chat after completion -> %s %s" % (st, js))


async def kill_worker(d, ws, ev):
    return await kill_owner(d, ws, ev)


async def crash_host(d, ws, ev):
    """The whole host dies (every process at once) and comes back."""
    d.crash()
    seen = await drain_logged(ws, ev, 3)
    d.start()
    return seen


async def part_kill(d, sid, kill):
    ids = create_team(d, sid, "round_robin", [("k1", "alpha"), ("k2", "slow"),
                                         ("k3", "conclude")])

    def k2_tokens(n):
        seen = []

        def pred(e):
            if e.get("type") == "token" and e.get("agentId") == ids["k2"]:
                seen.append(e)
            return len(seen) >= n
        return pred
    # From seq 1 (the team_update of its creation) on.
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=0" % sid))
    ev = [await ws_recv(ws)]
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "id": "kill-1", "message": "long one"})
    await ws_until(ws, k2_tokens(3), into=ev, timeout=20)
    seen = await kill(d, ws, ev)
    after, _ = await resume_until(d, sid, seen, lambda e: e.get("type") ==
                                  "team_done", "team round after the kill",
                                  patience=90)
    every = seen + after
    check_contiguous(every, 1, "team round across the kill")
    log = d.log_events(sid)
    same_events(every, log, "stream vs log")
    seq = of_type(log, "user_message")[0]["seq"]
    errs = [e for e in of_type(log, "error") if e.get("code") == "INTERNAL"]
    check(len(errs) == 1 and errs[0]["agentId"] == ids["k2"] and
          errs[0]["messageId"] == "m-%d-1" % seq and
          errs[0]["severity"] == "recoverable", "recovery error %s" % errs)
    ds = dones(log)
    check(ds == [(ids["k1"], "m-%d" % seq), (ids["k2"], "m-%d-1.1" % seq),
                 (ids["k3"], "m-%d-2" % seq)], "dones across the kill %s" % ds)
    check(len(set(ds)) == len(ds), "a done twice %s" % ds)
    rerun = [e for e in of_type(log, "token") if e["messageId"] ==
             "m-%d-1.1" % seq]
    check(rerun and all(e["agentId"] == ids["k2"] for e in rerun),
          "re-run tokens %s" % rerun[:3])
    check(len(of_type(log, "team_done")) == 1 and
          of_type(log, "team_done")[0]["reason"] == "concluded",
          "team_done %s" % of_type(log, "team_done"))


def fake_providers(port):
    return ('provider oa {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "o3-mini"\n'
            '    max-tokens 300\n    temperature 0.5\n'
            '    timeout 10s\n    idle-timeout 10s\n}\n'
            'provider an {\n    type anthropic\n'
            '    url "http://127.0.0.1:%d"\n    model "claude-test"\n'
            '    timeout 10s\n    idle-timeout 10s\n}\n' % (port, port))


async def part_wire(d, f):
    sid = "team-wire"
    create(d, sid, {"agents": [
        {"role": "thinker", "name": "thinker", "provider": "oa"},
        {"role": "critic", "name": "claude", "provider": "an",
         "model": "claude-x", "goal": "check the reasoning"}],
        "config": {"strategy": "sequential"}})
    ids = agent_ids(created_log(d, sid))
    f.script([{"kind": "text", "text": "OA answer.", "reasoning":
               "Reason A, carefully.", "reasoning_chunks": 3},
              {"kind": "text", "text": "AN answer.", "reasoning":
               "Reason B.", "reasoning_chunks": 2}])
    ev = await team_round(d, sid, "why?")
    th = of_type(ev, "thought")
    check([(t["agentId"], t["thought"]["content"], t["thought"]["category"])
           for t in th] == [(ids["thinker"], "Reason A, carefully.",
                             "analysis"),
                            (ids["claude"], "Reason B.", "analysis")],
          "thoughts %s" % th)
    check(all(t["thought"].get("thoughtId", "").startswith("th_") and
              t["thought"].get("shared") is False for t in th),
          "thoughtIds and privacy %s" % th)
    st, g = d.http_json("GET", "/sessions/%s/thoughts" % sid)
    check(st == 200 and sorted(n["thoughtId"] for n in g["nodes"]) ==
          sorted(t["thought"]["thoughtId"] for t in th),
          "reasoning in the thought graph: %s %s" % (st, g))
    for t in th:
        first = [e for e in of_type(ev, "token")
                 if e["agentId"] == t["agentId"]][0]
        check(ev.index(t) < ev.index(first), "thought after the tokens: %s"
              % [short(e) for e in ev])
    check([a for a, _ in dones(ev)] == [ids["thinker"], ids["claude"]],
          "dones %s" % dones(ev))
    reqs = f.requests()
    check(len(reqs) == 2, "provider requests %d" % len(reqs))
    b = reqs[0]["body"]
    check(reqs[0]["path"] == "/v1/chat/completions" and
          b.get("model") == "o3-mini" and
          b.get("max_completion_tokens") == 300 and "max_tokens" not in b
          and "temperature" not in b, "reasoning model request %s" % b)
    check(b["messages"][0]["role"] == "system" and "You are thinker" in
          b["messages"][0]["content"] and "claude" in
          b["messages"][0]["content"], "system prompt %s" % b["messages"][0])
    check(b["messages"][-1] == {"role": "user", "content": "why?"},
          "first speaker's message %s" % b["messages"][-1])
    b = reqs[1]["body"]
    check(reqs[1]["path"] == "/v1/messages" and b.get("model") == "claude-x",
          "anthropic request %s %s" % (reqs[1]["path"], b.get("model")))
    system = b.get("system")
    system = system if isinstance(system, str) else json.dumps(system)
    check("You are claude" in system and "check the reasoning" in system,
          "anthropic system %r" % system)
    last = json.dumps(b["messages"][-1])
    check("why?" in last and "OA answer." in last and "thinker" in last,
          "second speaker did not read the first: %s" % last)


def main():
    tokens = ("token %s role user\ntoken %s role observer\n" % (USER, OBS))
    with with_fakellm() as f:
        d = Daemon(extra="max-agents 4\nautonomy FULL_AUTO\n" + tokens,
                   providers=PROVIDERS + fake_providers(f.port),
                   default="fast", token=ADMIN)
        with with_daemon(d):
            async def all_parts():
                await part_roster(d)
                await part_lead(d)
                await part_round_robin(d)
                await part_objective(d)
                await part_wire(d, f)
                await part_kill(d, "team-kill", kill_worker)
                await part_kill(d, "team-crash", crash_host)
            asyncio.run(asyncio.wait_for(all_parts(), 175))


run_test("team", main)
