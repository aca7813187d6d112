#!/usr/bin/env python3
"""A real knowledge graph of Parley itself, as batch files of actions
(parley-knowledge(7)), for bench/knowledge/run.

    graph.py TOP OUTDIR

Writes OUTDIR/batch-NNN.json, each {"actions":[...]} of at most 200
actions, to be recorded in order:

- one record-file-understanding per .c and .h file under src/, workers/,
  supervisor/ and tools/: hash = its SHA-256, summary = its top comment,
  importantSymbols = the functions it defines that are not static,
  concepts = the terms of a fixed list it names, relatedFiles = the
  headers of the tree it includes;
- one record-decision per "## " section of docs/design-notes.md
  (description: the heading; rationale: its first paragraph);
- one record-principle per "*Lead-in.*" paragraph of those sections
  (description: the paragraph; evidence and locations: the files of the
  tree it names; confidence: 0.5 + 0.1 per such file, at most 1);
- one record-pattern per module prefix (kb for kb.c, kb_rag.c, ...);
- link-entities: file --uses--> each header it includes, principle
  --supports--> its section's decision, file --implements--> its module's
  pattern.
"""
import hashlib
import json
import os
import re
import sys

DIRS = ["src", "workers", "supervisor", "tools"]
PER_BATCH = 200
TEXT_MAX = 8192
ITEM_MAX = 1024
LIST_MAX = 64
# Terms a file's concepts are drawn from (case-insensitive, whole words).
CONCEPTS = ["WebSocket", "SSE", "HTTP", "TLS", "JWT", "Redis", "store",
            "log", "seq", "resume", "snapshot", "supervisor", "worker",
            "IPC", "session", "agent", "turn", "tool", "approval", "MCP",
            "provider", "stream", "token", "index", "BM25", "embedding",
            "knowledge", "thought", "action", "audit", "metrics", "config",
            "quota", "lease", "follower", "owner", "timeout", "libevent",
            "cJSON", "UTF-8", "fuzz", "dashboard", "team", "directive"]


def slug(s):
    s = re.sub(r"[`*_]", "", s.lower())
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-")[:120] or "x"


def clip(s, n=TEXT_MAX):
    b = s.encode()
    if len(b) <= n:
        return s
    return b[:n].decode(errors="ignore")


def top_comment(text):
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    if not m:
        return ""
    lines = [re.sub(r"^\s*\* ?", "", l) for l in m.group(1).splitlines()]
    return clip(re.sub(r"\s+", " ", " ".join(lines)).strip())


def functions(text):
    """Non-static function definitions, OpenBSD style: the type on its own
    line, the name at the start of the next, the body's { at column 0."""
    out = []
    lines = text.splitlines()
    for i in range(1, len(lines)):
        m = re.match(r"([A-Za-z_]\w*)\(", lines[i])
        if not m or lines[i - 1].startswith(("static", "#", " ", "\t")) or \
                not lines[i - 1].strip() or lines[i - 1].rstrip().endswith(";"):
            continue
        # the definition's body follows; a prototype ends with ';'
        for j in range(i, min(i + 8, len(lines))):
            if lines[j].startswith("{"):
                out.append(m.group(1))
                break
            if lines[j].rstrip().endswith(";"):
                break
    return out


def includes(top, path, text):
    out = []
    for inc in re.findall(r'^#include "([^"]+)"', text, re.M):
        for cand in (os.path.join("include", inc),
                     os.path.join(os.path.dirname(path), inc),
                     os.path.join("supervisor", inc),
                     os.path.join("workers", inc)):
            if os.path.isfile(os.path.join(top, cand)):
                out.append(os.path.normpath(cand))
                break
    return sorted(set(out))


def module(path):
    base = os.path.basename(path).rsplit(".", 1)[0]
    return base.split("_")[0]


def files(top):
    out = []
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(top, d))):
            if name.endswith((".c", ".h")):
                out.append(os.path.join(d, name))
    return out


def design_notes(top, known):
    """[(decision action, [principle actions])] from docs/design-notes.md."""
    path = "docs/design-notes.md"
    lines = open(os.path.join(top, path)).read().splitlines()
    secs = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            secs.append([lines[i][3:].strip(), i + 1, []])
        elif secs and lines[i].strip():
            start = i
            para = []
            while i < len(lines) and lines[i].strip() and \
                    not lines[i].startswith("#"):
                para.append(lines[i].strip())
                i += 1
            secs[-1][2].append((start + 1, " ".join(para)))
            continue
        i += 1
    out = []
    for title, line, paras in secs:
        d = {"name": slug(title), "description": clip(title),
             "status": "active", "impact": 5,
             "locations": ["%s:%d" % (path, line)]}
        if paras:
            d["rationale"] = clip(paras[0][1])
        ps = []
        for pl, text in paras:
            m = re.match(r"(?:- )?\*\*?(.+?)\.?\*\*?\s*(.*)", text)
            if not m:
                continue
            named = sorted({p for p in re.findall(r"`([\w./-]+)`", text)
                            if p in known})[:LIST_MAX - 1]
            ps.append({"name": slug(m.group(1)), "description": clip(text),
                       "confidence": round(min(1.0, 0.5 + 0.1 * len(named)),
                                           2),
                       "locations": ["%s:%d" % (path, pl)] + named,
                       "evidence": named, "tags": [d["name"]]})
        out.append((d, ps))
    return out


def main():
    top, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    paths = files(top)
    known = set(paths)
    for root in ("include/parley",):
        for name in os.listdir(os.path.join(top, root)):
            known.add(os.path.join(root, name))
    records, links = [], []
    mods = {}
    for p in paths:
        raw = open(os.path.join(top, p), "rb").read()
        text = raw.decode(errors="replace")
        inc = includes(top, p, text)
        low = text.lower()
        concepts = [c for c in CONCEPTS
                    if re.search(r"\b%s\b" % re.escape(c.lower()), low)]
        summary = top_comment(text)
        if not summary:
            # a .c without one is described by its module's header
            base = os.path.basename(p).rsplit(".", 1)[0] + ".h"
            for h in (os.path.join("include/parley", base),
                      os.path.join(os.path.dirname(p), base)):
                if os.path.isfile(os.path.join(top, h)):
                    summary = top_comment(open(os.path.join(top, h),
                                               errors="replace").read())
                    break
        f = {"path": p, "hash": hashlib.sha256(raw).hexdigest(),
             "summary": summary or "(no top comment)",
             "concepts": concepts[:LIST_MAX],
             "importantSymbols": [s[:ITEM_MAX] for s in
                                  functions(text)][:LIST_MAX],
             "relatedFiles": inc[:LIST_MAX],
             "lastAnalyzed": 1795000000000}
        records.append(["record-file-understanding", f])
        mods.setdefault(module(p), []).append(p)
        for h in inc:
            links.append((p, h, "uses"))
    # the headers of include/parley a file includes: understood too, so
    # that a link's "to" names a live entity
    for h in sorted({l[1] for l in links} - set(paths)):
        raw = open(os.path.join(top, h), "rb").read()
        text = raw.decode(errors="replace")
        records.append(["record-file-understanding", {
            "path": h, "hash": hashlib.sha256(raw).hexdigest(),
            "summary": top_comment(text) or "(no top comment)",
            "importantSymbols": [], "concepts": [], "relatedFiles": []}])
    for m, ps in sorted(mods.items()):
        hdr = [p for p in ps if p.endswith(".h")]
        pat = {"name": "module-" + m, "type": "module",
               "description": "The %s module: %s (one prefix, one header)" %
               (m, ", ".join(ps)),
               "confidence": 0.9 if hdr else 0.7,
               "location": (hdr or ps)[0],
               "tags": sorted({p.split("/")[0] for p in ps})}
        records.append(["record-pattern", pat])
        for p in ps:
            links.append((p, "module-" + m, "implements"))
    for d, ps in design_notes(top, known):
        records.append(["record-decision", d])
        for p in ps:
            records.append(["record-principle", p])
            links.append((p["name"], d["name"], "supports"))
    acts = records + [["link-entities", {"from": a, "to": b, "type": t,
                                         "confidence": 1.0}]
                      for a, b, t in links]
    n = 0
    for i in range(0, len(acts), PER_BATCH):
        with open(os.path.join(outdir, "batch-%03d.json" % n), "w") as f:
            json.dump({"actions": acts[i:i + PER_BATCH]}, f)
        n += 1
    kinds = {}
    for a in acts:
        kinds[a[0]] = kinds.get(a[0], 0) + 1
    print(json.dumps({"batches": n, "actions": kinds}))


if __name__ == "__main__":
    main()
