// Counts the tokens of each answer kg-bench printed (one JSON object a
// line on standard input) with OpenAI's o200k_base and cl100k_base BPE
// (npm gpt-tokenizer): the S-expression, the JSON as Parley sends it
// (compact) and the same JSON indented by two spaces (the seed's way of
// showing it).  Prints one JSON object: {"rows":[...]}.
import { readFileSync } from "node:fs";
import { encode as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { encode as cl100k } from "gpt-tokenizer/encoding/cl100k_base";

const count = (s) => ({ bytes: Buffer.byteLength(s), o200k: o200k(s).length,
    cl100k: cl100k(s).length });
const rows = [];
for (const line of readFileSync(0, "utf8").split("\n")) {
  if (!line.trim())
    continue;
  const r = JSON.parse(line);
  if (r.export) {
    rows.push({ export: r.export, text: count(r.text) });
    continue;
  }
  const pretty = r.jsonError ? r.json :
      JSON.stringify(JSON.parse(r.json), null, 2);
  rows.push({ query: r.query, error: r.sexpError || r.jsonError,
      answer: r.sexpError ? r.sexp : undefined,
      sexp: count(r.sexp), json: count(r.json), jsonPretty: count(pretty),
      usSexp: r.usSexp, usJson: r.usJson });
}
console.log(JSON.stringify({ rows }));
