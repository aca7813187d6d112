// Counts the tokens of each answer kg-bench printed (one JSON object a
// line on standard input) with OpenAI's o200k_base and cl100k_base BPE
// (npm gpt-tokenizer): the S-expression, the JSON as Parley sends it
// (compact) and the same JSON indented by two spaces (the seed's way of
// showing it); and the compact form with symbol-like list items bare
// (see bare()).  Prints one JSON object: {"rows":[...]}.
import { readFileSync } from "node:fs";
import { encode as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { encode as cl100k } from "gpt-tokenizer/encoding/cl100k_base";

// What the compact form would cost if a string in a [...] list that reads
// as a symbol were printed bare, as the seed's own example does
// (:tags [plexus sync]): strings elsewhere, and items with a space, a
// quote, a bracket or a paren, stay quoted.  Not what Parley prints: an
// estimate of what that would save.
function bare(s) {
  let out = "", depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '"') {
      let j = i + 1;
      while (j < s.length && s[j] !== '"')
        j += s[j] === "\\" ? 2 : 1;
      const lit = s.slice(i, j + 1), body = s.slice(i + 1, j);
      out += depth > 0 && /^[A-Za-z0-9_.\/@:+#*-]+$/.test(body) &&
          !/^[0-9:#]/.test(body) ? body : lit;
      i = j;
      continue;
    }
    if (c === "[")
      depth++;
    else if (c === "]" && depth > 0)
      depth--;
    out += c;
  }
  return out;
}

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
      sexp: count(r.sexp), sexpBare: count(bare(r.sexp)), json: count(r.json),
      jsonPretty: count(pretty),
      usSexp: r.usSexp, usJson: r.usJson });
}
console.log(JSON.stringify({ rows }));
