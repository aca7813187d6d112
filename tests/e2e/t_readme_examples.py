#!/usr/bin/python3
# The client examples of README.md, read from it each run (so they cannot
# drift from what users copy): the Python WebSocket client, the Node.js
# reference client, the Python resume example, the two-agent session and
# the curl blocks of the knowledge base and the project knowledge graph,
# each run as written but for the port, against a daemon listening as the default does
# (`listen PORT`: 127.0.0.1 and ::1).  Node resolves localhost to ::1 first
# with no fallback, as Node.js 18 does on a stock Debian 12.
#
# --as-written: no daemon of our own, no port change, the system's node
# with `ws` installed by `npm install ws` as the README says: what
# tests/fresh-debian runs against the `parleyd -d` of "Run it".
import sys, os, re, shutil, subprocess, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

README = os.path.join(E2E, "..", "..", "README.md")
AS_WRITTEN = "--as-written" in sys.argv


def blocks(section, lang):
    """The ```lang blocks under the README heading '## section'."""
    text = open(README).read()
    m = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(section), text,
                  re.M | re.S)
    check(m, "README.md has no section '## %s'" % section)
    found = re.findall(r"^```%s\n(.*?)^```$" % lang, m.group(1), re.M | re.S)
    check(found, "README.md '## %s' has no ```%s block" % (section, lang))
    return found


def node_env(tmp):
    """(argv, env) for the README's node client: `npm install ws` in tmp
    as the README says when as written, else the suite's ws and the ::1-
    first resolution of Node.js 18 on a stock Debian 12."""
    if AS_WRITTEN:
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "ws"],
                           cwd=tmp, capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "npm install ws: %s" % r.stderr[-500:])
        return ["node"], dict(os.environ)
    return (["node", "--no-network-family-autoselection", "-r",
             os.path.join(E2E, "js", "localhost-v6.js")],
            dict(os.environ, NODE_PATH=os.path.join(E2E, "node_modules")))


def examples(port, tmp):
    py = blocks("A WebSocket client in one minute", "python")
    out, _ = run_example(["/usr/bin/python3"], py[0], port, tmp, "client.py",
                         30)
    check("[done at seq" in out and "outputTokens" in out,
          "client.py printed no done with usage: %r" % out[-300:])

    js = blocks("A WebSocket client in one minute", "js")
    argv, env = node_env(tmp)
    out, _ = run_example(argv, js[0], port, tmp, "client.js", 30,
                         until=b"[Done]", env=env)
    check("[Error]" not in out, "client.js printed an error: %r" % out[-300:])

    res = blocks("Resume in practice", "python")
    out, _ = run_example(["/usr/bin/python3"], res[0], port, tmp, "resume.py",
                         30)
    seqs = [int(x) for x in re.findall(r"^\w+ (\d+)$", out, re.M)]
    check(seqs and seqs[0] == 9, "resume.py: replay did not start at 9: %r"
          % out[-300:])
    check_seqs(seqs, 9, "resume.py")
    check(re.search(r"^done \d+$", out, re.M), "resume.py: no done: %r"
          % out[-300:])

    two = blocks("Two agents in one session", "python")
    out, _ = run_example(["/usr/bin/python3"], two[0], port, tmp, "team.py",
                         30)
    check("claude saw manus: retry() runs three times too often" in out and
          "result: {'ok': True}" in out and "thoughts: 2 edges:" in out and
          "'kind': 'inResponseTo'" in out,
          "team.py: %r" % out[-400:])

    # the knowledge base in curl: made, added, found, listed
    kb = blocks("Knowledge", "sh")
    sid = "ops-%d" % os.getpid()
    out, _ = run_example(["/bin/sh"], kb[0].replace("ops-1", sid), port,
                         tmp, "kb.sh", 30)
    check(re.search(r'"documentId":\s*"doc-[0-9a-f]{16}"', out),
          "kb.sh: no documentId: %r" % out[-400:])
    check("port 7419" in out and '"score"' in out and
          '"preview"' in out and '"totalCount":1' in out.replace(" ", ""),
          "kb.sh: the search or the list: %r" % out[-600:])

    # the project knowledge graph in curl: a batch, two queries, the
    # Markdown export, then the stream (which stays open: read until it
    # replayed the batch; exec'd, so that stopping the script stops it)
    kg = blocks("Project knowledge (cross-session)", "sh")
    proj = "demo-%d" % os.getpid()
    src = kg[0].replace("/knowledge/demo", "/knowledge/" + proj)
    check(src.count("curl -s -N") == 1, "kg.sh: no one stream line")
    out, _ = run_example(["/bin/sh"], src.replace("curl -s -N",
                         "exec curl -s -N"), port, tmp, "kg.sh", 30,
                         until=b"event: knowledge_batch")
    check(re.search(r'"seq":\s*\d+', out) and '"actions":3' in
          out.replace(" ", ""), "kg.sh: the batch: %r" % out[-600:])
    check('(principle \\"log-is-the-truth\\"' in out,
          "kg.sh: the S-expression query: %r" % out[-600:])
    check('"type":"implements"' in out.replace(" ", ""),
          "kg.sh: the JSON query: %r" % out[-600:])
    check(re.search(r"^#+ \S", out, re.M),
          "kg.sh: the Markdown export: %r" % out[-600:])


def test():
    tmp = tempfile.mkdtemp(prefix="parley-e2e-readme-", dir="/tmp")
    try:
        if AS_WRITTEN:
            examples(7777, tmp)
            return
        # a token event each: the resume example drops at seq 8
        d = Daemon(bare_port=True, providers=provider_block(
            "fast", FAST_REPLY, chunk=4, delay="30ms"))
        with with_daemon(d):
            examples(d.port, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


run_test("readme_examples", test)
