// Parley's keyword search against a reference BM25 on the same corpus and
// queries: npm's wink-bm25-text-search (BM25F with one field of weight 1 is
// BM25; its idf is ln(1 + (N - n + 0.5) / (n + 0.5)) with k = 1, k1 1.2,
// b 0.75, as Parley's). Both see the same tokens: kb-bench dump writes
// each chunk's tokens and each query's, as Parley's tokeniser made them,
// so what is compared is the ranking, not two tokenisers.
//
//   node reference.mjs DUMPDIR   ->  one JSON line of agreement figures
//
// wink rounds each term's weight to freqPrecision digits (9 here, its
// most), so a near-tie may order differently: top-1 disagreements are
// then checked against Parley's own scores (a tie within 1e-6 counts as
// agreeing, and is reported separately).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const bm25 = require("wink-bm25-text-search");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node reference.mjs DUMPDIR");
  process.exit(2);
}
const lines = (f) => readFileSync(`${dir}/${f}`, "utf8").split("\n");
const chunks = lines("chunks.txt");
chunks.pop();
const queries = lines("queries.txt").filter((q) => q.length > 0);
const ours = new Map();
for (const l of lines("ours.txt")) {
  if (!l) continue;
  const [q, c, s] = l.split(" ");
  if (!ours.has(+q)) ours.set(+q, []);
  ours.get(+q).push({ chunk: +c, score: +s });
}

const engine = bm25();
engine.defineConfig({ fldWeights: { body: 1 }, bm25Params: { k1: 1.2, b: 0.75, k: 1 } });
engine.definePrepTasks([(s) => s.split(" ").filter((t) => t.length > 0)]);
let added = 0;
chunks.forEach((c, i) => {
  // wink counts only documents it was given; an empty chunk has no token
  // and would change N for it, so Parley's N must match: see below.
  engine.addDoc({ body: c }, i);
  added++;
});
engine.consolidate(9);

let top1 = 0, top1tie = 0, overlap = 0, compared = 0, noHits = 0;
const disagreements = [];
queries.forEach((q, qi) => {
  const dedup = [...new Set(q.split(" "))].join(" ");
  const ref = engine.search(dedup, 10).map(([id, score]) => ({ chunk: +id, score }));
  const mine = ours.get(qi) || [];
  if (ref.length === 0 && mine.length === 0) {
    noHits++;
    return;
  }
  compared++;
  const refSet = new Set(ref.map((h) => h.chunk));
  const k = Math.min(10, Math.max(ref.length, mine.length));
  overlap += mine.filter((h) => refSet.has(h.chunk)).length / (k || 1);
  if (mine.length && ref.length && mine[0].chunk === ref[0].chunk) {
    top1++;
  } else if (mine.length && ref.length) {
    const same = mine.find((h) => h.chunk === ref[0].chunk);
    if (same && Math.abs(same.score - mine[0].score) < 1e-6) {
      top1++;
      top1tie++;
    } else if (disagreements.length < 5) {
      disagreements.push({ query: q, ours: mine.slice(0, 3), reference: ref.slice(0, 3) });
    }
  }
});
console.log(JSON.stringify({
  chunks: added,
  queries: queries.length,
  compared,
  bothEmpty: noHits,
  top1Agreement: compared ? top1 / compared : 0,
  top1DecidedByTie: top1tie,
  meanOverlapAt10: compared ? overlap / compared : 0,
  disagreements,
}));
