#!/usr/bin/python3
# parleyctl knowledge against a running parleyd (parley-knowledge(7)):
# import a batch file (the seed's object form, a bare array, standard
# input), export it as Markdown and JSON (to stdout and with -o), the
# same file imported twice recorded once, an invalid batch refused with
# exit 1 naming the action and the field and changing nothing, export
# --at an earlier seq, and the usage errors (exit 2).
import sys, os, json, re, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

P = "parley-ctl"

BATCH = {
    "projectId": "ignored-the-command-line-names-it",
    "actions": [
        ["record-principle", {
            "name": "contagious-materialization",
            "description": "Syncing spreads from root automatically",
            "confidence": 0.95,
            "locations": ["plexus/README.md:28"],
            "evidence": ["tested-in-production", "documented-extensively"],
            "tags": ["plexus", "sync"]}],
        ["record-pattern", {
            "name": "plexus-model-with-decorators",
            "type": "plexus-model",
            "description": "Class extends PlexusModel with @syncing decorators",
            "location": "plexus/src/PlexusModel.ts:15",
            "confidence": 0.9,
            "tags": ["plexus", "pattern"]}],
        ["record-file-understanding", {
            "path": "plexus/src/PlexusModel.ts",
            "hash": "ab" * 32,
            "summary": "Base class for all Plexus entities",
            "concepts": ["decorators", "CRDT", "reactivity"],
            "importantSymbols": ["PlexusModel", "@syncing"],
            "relatedFiles": ["plexus/src/Plexus.ts"]}],
        ["record-decision", {
            "name": "use-stage3-decorators",
            "description": "Use Stage 3 TC39 decorators for Plexus tracking",
            "rationale": "Native browser support, type-safe, automatic tracking",
            "status": "active",
            "impact": 9,
            "locations": ["plexus/README.md:45"]}],
        ["link-entities", {
            "from": "contagious-materialization",
            "to": "plexus-model-with-decorators",
            "type": "implements",
            "description": "Root materialization triggers child sync"}],
    ]}


def ctl(d, *args, rc=0, input=None):
    """d.ctl(args) that must exit rc and leave no sanitizer report."""
    r, out, err = d.ctl(*args, input=input)
    for m in SANITIZER_MARKS:
        check(m not in err, "parleyctl %s: sanitizer report: %s"
              % (" ".join(args), err[err.find(m):err.find(m) + 800]))
    check(r == rc, "parleyctl %s exited %d (want %d); stdout %r; stderr %r"
          % (" ".join(args), r, rc, out[-400:], err[-400:]))
    return out, err


def seq_of(out, what):
    m = re.search(r"at seq (\d+)", out)
    check(m, "%s: no 'at seq N' in %r" % (what, out))
    return int(m.group(1))


def export_json(d, *extra):
    out, _ = ctl(d, "knowledge", "export", "--format", "json", *extra, P)
    try:
        return json.loads(out)
    except ValueError:
        raise Fail("export --format json printed no JSON: %r" % out[:300])


def names(g, kind):
    return [e.get("name", e.get("path")) for e in g.get(kind, [])]


def test():
    tmp = tempfile.mkdtemp(prefix="parley-e2e-ctlkg-", dir="/tmp")
    first = os.path.join(tmp, "learned.json")
    with open(first, "w") as f:
        json.dump(BATCH, f, indent=2)
    d = Daemon()
    with with_daemon(d):
        # import: one batch, its seq printed
        out, _ = ctl(d, "knowledge", "import", P, first)
        check("5 actions recorded" in out, "import: %r" % out)
        seq1 = seq_of(out, "import")
        bid = re.search(r"batch (import-[0-9a-f]{40})\)", out)
        check(bid, "import: no batch id import-<40 hex> in %r" % out)

        # export: Markdown by default, JSON on request
        md, _ = ctl(d, "knowledge", "export", P)
        for want in ("contagious-materialization", "plexus-model-with-decorators",
                     "use-stage3-decorators", "plexus/src/PlexusModel.ts",
                     "Syncing spreads from root automatically"):
            check(want in md, "export md has no %r: %r" % (want, md[:600]))
        check(re.search(r"^#", md, re.M), "export md has no heading: %r"
              % md[:300])
        check(not md.lstrip().startswith("{"), "export md is JSON: %r"
              % md[:200])
        g = export_json(d)
        check(names(g, "principles") == ["contagious-materialization"],
              "json principles: %r" % g.get("principles"))
        p = g["principles"][0]
        check(p.get("confidence") == 0.95 and p.get("tags") ==
              ["plexus", "sync"], "json principle: %r" % p)
        check(names(g, "files") == ["plexus/src/PlexusModel.ts"] and
              g["files"][0].get("hash") == "ab" * 32, "json files: %r"
              % g.get("files"))
        r = g.get("relationships", [])
        check(len(r) == 1 and r[0].get("type") == "implements" and
              r[0].get("to") == "plexus-model-with-decorators",
              "json relationships: %r" % r)
        check(g.get("batches") == 1, "json batches: %r" % g.get("batches"))

        # -o writes the file and prints nothing
        outf = os.path.join(tmp, "k.md")
        out, _ = ctl(d, "knowledge", "export", "-o", outf, P)
        check(out == "", "export -o printed %r" % out)
        check(open(outf).read().rstrip("\n") == md.rstrip("\n"),
              "export -o wrote other text than stdout")

        # the same file again: recorded once
        out, _ = ctl(d, "knowledge", "import", P, first)
        check("already recorded" in out and seq_of(out, "import again") ==
              seq1 and bid.group(1) in out, "import again: %r" % out)
        check(export_json(d).get("batches") == 1, "a repeated import made "
              "a second batch")
        out, _ = ctl(d, "--json", "knowledge", "import", P, first)
        js = json.loads(out)
        check(js.get("duplicate") is True and js.get("seq") == seq1,
              "import --json again: %r" % js)

        # an invalid batch: exit 1, the action and field named, nothing
        # recorded (its first action would be valid on its own)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump([["record-principle", {"name": "not-recorded",
                                             "description": "x",
                                             "confidence": 0.5}],
                       ["record-pattern", {"name": "p2", "type": "t",
                                           "description": "d",
                                           "confidence": "high"}]], f)
        _, err = ctl(d, "knowledge", "import", P, bad, rc=1)
        check("confidence" in err and "INVALID_ACTION" in err and
              "action 1" in err and "record-pattern" in err,
              "invalid import: stderr %r" % err)
        g = export_json(d)
        check("not-recorded" not in names(g, "principles") and
              g.get("batches") == 1, "an invalid batch changed the graph: %r"
              % g)
        # files that are no batch at all: exit 1, said why
        for text, want in (("{not json", "not JSON"),
                           ('{"acts":[]}', "no \"actions\" array")):
            with open(bad, "w") as f:
                f.write(text)
            _, err = ctl(d, "knowledge", "import", P, bad, rc=1)
            check(want in err, "import %r: stderr %r" % (text, err))
        _, err = ctl(d, "knowledge", "import", P, os.path.join(tmp, "none"),
                     rc=1)
        check("No such file" in err, "import of a missing file: %r" % err)

        # a second batch from standard input (the bare array form)
        second = [["update-confidence", {"name": "contagious-materialization",
                                         "confidence": 0.5}],
                  ["record-decision", {"name": "log-is-the-truth",
                                       "description": "State is the fold "
                                       "of the log", "rationale": "resume",
                                       "status": "active", "impact": 8}]]
        out, _ = ctl(d, "knowledge", "import", P, "-",
                     input=json.dumps(second))
        seq2 = seq_of(out, "import -")
        check(seq2 > seq1, "second batch at seq %d, first at %d"
              % (seq2, seq1))
        now = export_json(d)
        check(now["principles"][0].get("confidence") == 0.5 and
              "log-is-the-truth" in names(now, "decisions") and
              now.get("batches") == 2, "after the second batch: %r" % now)

        # --at: the graph as it was after the first batch
        then = export_json(d, "--at", str(seq1))
        check(then["principles"][0].get("confidence") == 0.95 and
              "log-is-the-truth" not in names(then, "decisions"),
              "export --at %d: %r" % (seq1, then))
        md_then, _ = ctl(d, "knowledge", "export", "--at", str(seq1), P)
        check("log-is-the-truth" not in md_then and
              "use-stage3-decorators" in md_then, "export md --at: %r"
              % md_then[:400])

        # usage errors: exit 2, nothing sent
        ctl(d, "knowledge", "export", "--format", "yaml", P, rc=2)
        ctl(d, "knowledge", "export", "--at", "x", P, rc=2)
        ctl(d, "knowledge", "export", ".hidden", rc=2)
        ctl(d, "knowledge", "import", P, rc=2)
        ctl(d, "knowledge", "frob", rc=2)


run_test("ctl_knowledge", test)
