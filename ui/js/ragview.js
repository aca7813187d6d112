// The chat's view of a rag_context event (parley-protocol(7), Knowledge
// base): what a turn's agent was given from the session's knowledge base
// and the host's index before its first model call, as a collapsed
// <details> the chat places before that turn's reply.  Each chunk: its [n]
// (the number the agent cites), where it came from (a document id, or a
// path and lines), its score and size.  Text only, through h().

import { h, fmtNumber } from "./dom.js";

function str(v) {
  return typeof v === "string" ? v : v == null ? "" : String(v);
}

// "10-40", or "10" for one line
function lines(l) {
  if (!Array.isArray(l) || l.length !== 2) return "";
  return l[0] === l[1] ? String(l[0]) : l[0] + "-" + l[1];
}

function chunkItem(c) {
  const kb = c.source === "kb";
  const where = kb ? str(c.documentId) : str(c.path) + (lines(c.lines) ? ":" + lines(c.lines) : "");
  return h("li", { class: "rag-chunk", dataset: { source: str(c.source) || "?" } },
    h("span", { class: "rag-n" }, "[" + str(c.n) + "]"),
    h("span", { class: "rag-source" }, kb ? "kb" : str(c.source) || "?"),
    h("code", { class: "rag-where" }, where),
    kb && lines(c.lines) ? h("span", { class: "rag-lines" },
      (/-/.test(lines(c.lines)) ? "lines " : "line ") + lines(c.lines)) : null,
    typeof c.score === "number" ?
      h("span", { class: "rag-score", attrs: { title: "score" } }, "score " + c.score.toFixed(3)) : null,
    typeof c.bytes === "number" ? h("span", { class: "rag-bytes" }, fmtNumber(c.bytes) + " B") : null);
}

// ragBlock(ev, agent): the block of rag_context ev; agent: the name of
// the agent it was given to.
export function ragBlock(ev, agent) {
  const chunks = Array.isArray(ev.chunks) ? ev.chunks.filter((c) => c && typeof c === "object") : [];
  const n = chunks.length;
  return h("details", { class: "rag-context", dataset: { agentId: str(ev.agentId) } },
    h("summary", null, "Context: " + n + (n === 1 ? " chunk" : " chunks"),
      h("span", { class: "rag-for" }, " given to " + (agent || str(ev.agentId) || "the agent") +
        (ev.mode ? " (" + str(ev.mode) + " search)" : ""))),
    ev.query ? h("div", { class: "rag-query" }, "Searched for: ", h("q", null, str(ev.query))) : null,
    ev.note ? h("div", { class: "rag-note" }, str(ev.note)) : null,
    h("ol", { class: "rag-chunks" }, chunks.map(chunkItem)));
}
