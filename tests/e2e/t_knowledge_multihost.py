#!/usr/bin/python3
# A project's knowledge written from two hosts at once (two parleyd on
# 127.0.0.1 sharing one Redis, the cluster harness without namespaces):
# host 0 owns kg:P, host 1 follows it and posts its stamped batches to the
# owner.  Over many rounds both hosts record the same principles at the
# same time, each with its own description and confidence, and add
# evidence to them.  Then:
#  - every batch either host acknowledged is in the log, at its seq;
#  - GET /knowledge/P on both hosts is the same (each folds the log);
#  - the merge rule's outcome, computed here from the log's batches:
#    each field holds the write with the highest stamp (hlc, then origin,
#    then the action's index), and evidence is the union of every add;
#  - the batches of both hosts carry different origins and each host's
#    hlc stamps only grow.
# Then a follower's batch reaches an owner whose graph is still loading
# (host 0's workers killed, host 1 posts at once): it is logged, and host
# 1 answers 202 with its seq.  And a follower that takes the project over
# while its batch waits answers it with its seq once it logged it.
import sys, os, json, signal, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

P = "mh-1"
SID = "kg:" + P
ROUNDS = 25
NAMES = ["alpha", "beta", "gamma"]


def batch(host, rnd):
    acts = []
    for i, n in enumerate(NAMES):
        acts.append(["record-principle", {
            "name": n, "description": "h%d round %d" % (host, rnd),
            "confidence": round(((rnd * 7 + host * 3 + i) % 10) / 10.0, 1)}])
        acts.append(["add-evidence", {"name": n,
                                      "evidence": "ev-h%d-%d" % (host, rnd)}])
    return acts


def expected(log):
    """The graph's principles as the merge rules make them from the log."""
    best, evidence = {}, {}
    for e in log:
        if e["type"] != "knowledge_batch":
            continue
        for idx, (op, f) in enumerate(e["actions"]):
            stamp = (int(e["hlc"]), e["origin"], idx)
            if op == "record-principle":
                for k in ("description", "confidence"):
                    if k not in f:
                        continue
                    cur = best.setdefault(f["name"], {}).get(k)
                    if cur is None or stamp > cur[0]:
                        best[f["name"]][k] = (stamp, f[k])
            elif op == "add-evidence":
                evidence.setdefault(f["name"], set()).add(f["evidence"])
    return {n: {"description": v["description"][1],
                "confidence": v.get("confidence", (0, None))[1],
                "evidence": sorted(evidence.get(n, ()))}
            for n, v in best.items()}


async def main():
    with Cluster(2, lease="2s", netns=False, workers=2) as c:
        h0, h1 = c.hosts
        st, js = h0.http_json("POST", "/knowledge/%s/actions" % P,
                              {"actions": [["record-principle", {
                                  "name": "seed", "description": "first"}]],
                               "batchId": "seed"})
        check(st == 202 and js["seq"] == 1, "seed on host 0 -> %s %s" %
              (st, js))
        acked, errors = [], []
        go = threading.Barrier(2)

        def writer(host, h):
            for r in range(ROUNDS):
                bid = "h%d-r%d" % (host, r)
                try:
                    go.wait(10)
                except threading.BrokenBarrierError:
                    pass
                st, js = h.http_json("POST", "/knowledge/%s/actions" % P,
                                     {"actions": batch(host, r),
                                      "batchId": bid})
                if st != 202:
                    errors.append((bid, st, js))
                else:
                    acked.append((bid, js.get("seq")))
        ts = [threading.Thread(target=writer, args=(i, h))
              for i, h in enumerate((h0, h1))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        check(not errors, "refused batches: %s" % errors[:3])
        check(len(acked) == 2 * ROUNDS, "acked %d of %d" %
              (len(acked), 2 * ROUNDS))
        check(all(s for _, s in acked), "an ack without its seq: %s" %
              [a for a in acked if not a[1]][:3])

        log = h0.log_events(SID)
        bids = {e["batchId"]: e["seq"] for e in log
                if e["type"] == "knowledge_batch"}
        check(len(bids) == 2 * ROUNDS + 1, "%d batches logged, want %d" %
              (len(bids), 2 * ROUNDS + 1))
        wrong = [(b, s) for b, s in acked if bids.get(b) != s]
        check(not wrong, "acked at another seq than logged: %s" % wrong[:3])
        origins = {}
        for e in log:
            if e["type"] == "knowledge_batch" and e["batchId"] != "seed":
                origins.setdefault(e["batchId"][:2], []).append(
                    (e["seq"], e["origin"], int(e["hlc"])))
        o0 = {o for _, o, _ in origins["h0"]}
        o1 = {o for _, o, _ in origins["h1"]}
        check(len(o0) == 1 and len(o1) == 1 and o0 != o1,
              "origins: host 0 %s, host 1 %s" % (o0, o1))
        for h, rows in origins.items():
            hl = [x for _, _, x in sorted(rows)]
            check(hl == sorted(hl) and len(set(hl)) == len(hl),
                  "%s's stamps do not grow: %s" % (h, hl))

        deadline = time.time() + 30
        while True:
            st0, g0 = h0.http_json("GET", "/knowledge/%s" % P)
            st1, g1 = h1.http_json("GET", "/knowledge/%s" % P)
            check(st0 == 200 and st1 == 200, "GET -> %s %s" % (st0, st1))
            if g0 == g1 and g0["seq"] == log[-1]["seq"]:
                break
            check(time.time() < deadline, "the hosts do not converge:\n"
                  "%s\n%s" % (g0, g1))
            await asyncio.sleep(0.2)
        want = expected(log)
        got = {p["name"]: p for p in g0["principles"]}
        for n in NAMES:
            w, g = want[n], got.get(n, {})
            check(g.get("description") == w["description"] and
                  g.get("confidence") == w["confidence"],
                  "%s: the merge gave %s, the highest stamp says %s" %
                  (n, g, w))
            check(sorted(g.get("evidence", [])) == w["evidence"],
                  "%s: evidence %s, want the union %s" %
                  (n, g.get("evidence"), w["evidence"]))
        st, js = h1.http_json("POST", "/knowledge/%s/query" % P,
                              {"query": "(get-principles)",
                               "format": "json"})
        check(st == 200 and sorted(p["name"] for p in js["result"]) ==
              sorted(NAMES + ["seed"]), "query on host 1 -> %s %s" %
              (st, js))
        inbox_while_loading(h0, h1)
        promoted(h0, h1)


def inbox_while_loading(h0, h1):
    """Host 0's new workers load a large project (asynchronously, from
    Redis) while they drain host 1's batch from the inbox: the batch must
    be appended, not taken for a repeat of itself."""
    q = "mh-load"
    big = "x" * 8000
    for i in range(60):
        st, js = h0.http_json("POST", "/knowledge/%s/actions" % q, {
            "actions": [["record-principle", {"name": "p%d_%d" % (i, j),
                                              "description": big}]
                        for j in range(50)]})
        check(st == 202, "batch %d on host 0 -> %s %s" % (i, st, js))
    st, js = h1.http_json("GET", "/knowledge/%s" % q)
    check(st == 200 and js["seq"] == 60, "host 1 reads seq %s" %
          (js or {}).get("seq"))
    for p in h0.workers_pids():
        os.kill(p, signal.SIGKILL)
    st, _, data = h1.http("POST", "/knowledge/%s/actions" % q, {
        "actions": [["record-principle", {"name": "from-h1",
                                          "description": "d"}]],
        "batchId": "h1-batch"}, timeout=40)
    js = json.loads(data)
    check(st == 202 and js.get("seq", 0) > 60, "host 1's batch while the "
          "owner loads -> %s %s" % (st, js))
    ev = [e for e in h0.log_events("kg:" + q)
          if e.get("batchId") == "h1-batch"]
    check(len(ev) == 1 and ev[0]["seq"] == js["seq"], "host 1's batch "
          "in the log: %s" % [(e["seq"], e["type"]) for e in ev])



def promoted(h0, h1):
    """Host 0's workers stopped: their leases lapse and host 1 takes kg:Q
    over while its batch waits to be seen logged; it logs the batch from
    its own inbox and answers it with its seq (not after a 10 s wait)."""
    q = "mh-stop"
    st, js = h0.http_json("POST", "/knowledge/%s/actions" % q, {
        "actions": [["record-principle", {"name": "first",
                                          "description": "d"}]]})
    check(st == 202, "first batch on host 0 -> %s %s" % (st, js))
    st, js = h1.http_json("GET", "/knowledge/%s" % q)
    check(st == 200 and js["seq"] == 1, "host 1 reads %s %s" % (st, js))
    pids = h0.workers_pids()
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    try:
        t0 = time.time()
        st, _, data = h1.http("POST", "/knowledge/%s/actions" % q, {
            "actions": [["record-principle", {"name": "late",
                                              "description": "d"}]],
            "batchId": "h1-late"}, timeout=40)
        took = time.time() - t0
    finally:
        for p in pids:
            os.kill(p, signal.SIGCONT)
    js = json.loads(data)
    check(st == 202 and js.get("seq") == 2 and took < 9, "host 1's batch "
          "across its take-over -> %s %s after %.1f s" % (st, js, took))
    ev = [e for e in h1.log_events("kg:" + q)
          if e.get("batchId") == "h1-late"]
    check(len(ev) == 1 and ev[0]["seq"] == 2, "h1-late logged: %s" %
          [e["seq"] for e in ev])


if __name__ == "__main__":
    run_test("knowledge_multihost", main)
