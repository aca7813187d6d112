// The knowledge view: the session's knowledge base (parley-protocol(7),
// Knowledge base).  Its documents as GET /sessions/{id}/kb lists them, read
// again whenever the Conn delivers a kb_added or kb_removed that happened
// after the page connected; a form that adds one (POST .../kb, with an
// Idempotency-Key so a retried request is the same document); a remove
// button per document (DELETE .../kb/{documentId}); a search (POST
// .../kb/search) showing each hit's scores and whether the search was
// keyword only, and why.
//
// An observer may list and search; what the server refuses (an observer's
// add, a full knowledge base) is shown with its message.  Nothing is asked
// of the server while the view is hidden.  Text reaches the page through
// h() and textContent only.

import { h, clear, schedule, fmtNumber } from "./dom.js";

const SEARCH_LIMIT = 10;
const META_SHOWN = 200;         // characters of a metadata value shown

// What to do about a refusal, by code.
const HINTS = {
  FORBIDDEN: "Your token does not allow this: use a token with the right role or session scope.",
  QUOTA_EXCEEDED: "The knowledge base is full (kb-max-documents or kb-max-bytes): " +
    "remove a document first, or split this one.",
  BAD_REQUEST: "The server did not accept this: see its message.",
  NOT_FOUND: "The session does not exist (yet), or its retention period passed.",
  SESSION_ENDED: "This session has ended: start a new session.",
  UNAUTHORIZED: "Enter a valid access token.",
  NETWORK: "Check that parleyd runs, then try again.",
  INTERNAL: "Try again; check the server log if it happens again.",
};

const WRITE_FORBIDDEN = "An observer's token may list and search only: adding or " +
  "removing a document needs a user, agent or admin token.";

function str(v) {
  return typeof v === "string" ? v : v == null ? "" : String(v);
}

function score(v) {
  return typeof v === "number" && isFinite(v) ? v.toFixed(3) : "";
}

function plural(n, one, many) {
  return fmtNumber(n) + " " + (n === 1 ? one : many);
}

const two = (n) => String(n).padStart(2, "0");

function fmtDate(ts) {
  const d = new Date(str(ts));
  if (!ts || isNaN(d)) return str(ts);
  return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
    two(d.getHours()) + ":" + two(d.getMinutes());
}

function metaText(v) {
  let s;
  if (typeof v === "string") s = v;
  else {
    try { s = JSON.stringify(v); } catch { s = String(v); }
  }
  return s.length > META_SHOWN ? s.slice(0, META_SHOWN) + "…" : s;
}

function title(meta) {
  return meta && typeof meta === "object" && typeof meta.title === "string" ? meta.title : "";
}

// A key for one add: 32 hex digits (getRandomValues works on plain http
// too, where randomUUID does not).
function newKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return "kb-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function lines(l) {
  if (!Array.isArray(l) || l.length !== 2) return "";
  return l[0] === l[1] ? "line " + l[0] : "lines " + l[0] + "–" + l[1];
}

let instances = 0;

export function create(ctx) {
  const { conn, sessionId } = ctx;
  const skey = "kb" + (++instances) + ":docs";
  const base = "/sessions/" + encodeURIComponent(sessionId) + "/kb";

  // ---- model ----
  let docs = null;               // the last kb_list_result's documents
  let total = 0;
  const added = new Map();       // documentId -> its kb_added (vectors, note)
  let visible = false;
  let destroyed = false;
  let stale = true;              // the list may differ from the server's
  let loading = false;
  let live = conn.state === "live";
  let pendingAdd = null;         // {key, content, title} of an add that may have reached the server
  let searchSeq = 0;

  // ---- DOM ----
  const root = ctx.root;
  root.classList.add("kb-view");

  const banner = () => h("div", { class: "error-banner kb-error", hidden: true,
    attrs: { role: "alert" } });
  const listErr = banner();
  const addErr = banner();
  const searchErr = banner();

  const count = h("span", { id: "kb-count", class: "kb-count muted" });
  const refreshBtn = h("button", { id: "kb-refresh", attrs: { type: "button" },
    on: { click: () => { stale = true; load(); } } }, "Refresh");
  const docList = h("ul", { id: "kb-docs", class: "kb-docs",
    attrs: { "aria-label": "Documents", "aria-busy": "true" } });
  const empty = h("p", { class: "kb-empty muted", hidden: true },
    "No documents yet: add one above, or send kb_add from a client.");

  const content = h("textarea", { id: "kb-add-content", attrs: { rows: "6", required: true,
    placeholder: "The document's text (Ctrl+Enter adds it)", spellcheck: "false" },
  on: { keydown: (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); add(); }
  } } });
  const titleIn = h("input", { id: "kb-add-title", attrs: { type: "text", autocomplete: "off",
    maxlength: "500", placeholder: "optional" } });
  const addBtn = h("button", { id: "kb-add-submit", class: "primary", attrs: { type: "submit" } },
    "Add document");
  const addStatus = h("p", { id: "kb-add-status", class: "kb-status muted small",
    attrs: { role: "status" } });
  const addForm = h("form", { id: "kb-add-form", class: "kb-form",
    attrs: { "aria-label": "Add a document" },
    on: { submit: (e) => { e.preventDefault(); add(); } } },
  h("label", { attrs: { for: "kb-add-content" } }, "Content"), content,
  h("label", { attrs: { for: "kb-add-title" } }, "Title ", h("span", { class: "muted small" },
    "(metadata, optional)")), titleIn,
  h("div", { class: "kb-form-actions" }, addBtn, addStatus), addErr);

  const query = h("input", { id: "kb-search-input", attrs: { type: "search", autocomplete: "off",
    maxlength: "4096", placeholder: "words to look for", "aria-label": "Search query" } });
  const searchBtn = h("button", { id: "kb-search-submit", class: "primary",
    attrs: { type: "submit" } }, "Search");
  const mode = h("span", { id: "kb-mode", class: "kb-mode" });
  const note = h("span", { id: "kb-note", class: "kb-note muted small" });
  const info = h("p", { class: "kb-search-info", hidden: true,
    attrs: { role: "status" } }, mode, note);
  const results = h("ol", { id: "kb-results", class: "kb-results",
    attrs: { "aria-label": "Search results" } });
  const searchForm = h("form", { id: "kb-search-form", class: "kb-search",
    attrs: { role: "search", "aria-label": "Search the knowledge base" },
    on: { submit: (e) => { e.preventDefault(); search(); } } }, query, searchBtn);

  root.append(h("div", { class: "kb-grid" },
    h("div", { class: "kb-col" },
      h("section", { class: "kb-panel", attrs: { "aria-labelledby": "kb-add-h" } },
        h("h2", { id: "kb-add-h" }, "Add a document"), addForm),
      h("section", { class: "kb-panel kb-docs-panel", attrs: { "aria-labelledby": "kb-docs-h" } },
        h("div", { class: "kb-head" }, h("h2", { id: "kb-docs-h" }, "Documents"), count, refreshBtn),
        listErr, empty, docList)),
    h("div", { class: "kb-col" },
      h("section", { class: "kb-panel", attrs: { "aria-labelledby": "kb-search-h" } },
        h("h2", { id: "kb-search-h" }, "Search"), searchForm, searchErr, info, results))));

  // write: a change (add, remove), which an observer's token may not make
  function showError(el, e, what, write) {
    clear(el);
    if (!e) { el.hidden = true; return; }
    const code = str(e.code) || "ERROR";
    const hint = write && code === "FORBIDDEN" ? WRITE_FORBIDDEN :
      Object.hasOwn(HINTS, code) ? HINTS[code] : "";
    el.dataset.code = code;
    el.append(h("span", { class: "error-code" }, code),
      " ", h("span", { class: "error-message" }, what + ": " + str(e.message)),
      hint ? h("span", { class: "error-hint" }, hint) : null);
    el.hidden = false;
  }

  // ---- the list ----

  async function load() {
    if (destroyed || !visible || !live || !stale) return;
    if (loading) return;
    loading = true;
    stale = false;
    docList.setAttribute("aria-busy", "true");
    try {
      const r = await ctx.api("GET", base);
      if (destroyed) return;
      docs = Array.isArray(r && r.documents) ? r.documents.filter((d) => d && d.documentId) : [];
      total = typeof (r && r.totalCount) === "number" ? r.totalCount : docs.length;
      showError(listErr, null);
      renderDocs();
    } catch (e) {
      if (destroyed) return;
      showError(listErr, e, "cannot list the documents");
    } finally {
      loading = false;
      docList.removeAttribute("aria-busy");
    }
    // a change came while the answer was on its way
    if (stale) load();
  }

  function invalidate() {
    stale = true;
    load();
  }

  function renderDocs() {
    if (destroyed || !docs) return;
    // The keyboard focus stays on the same document, or moves to the next.
    const act = document.activeElement;
    const focusedItem = act && docList.contains(act) ? act.closest(".kb-doc") : null;
    const focusedId = focusedItem ? focusedItem.dataset.documentId : null;
    const oldIds = [...docList.querySelectorAll(".kb-doc")].map((e) => e.dataset.documentId);
    clear(docList);
    for (const d of docs) docList.append(docItem(d));
    empty.hidden = docs.length > 0;
    count.textContent = docs.length < total ? plural(total, "document", "documents") +
      " (" + fmtNumber(docs.length) + " shown)" : plural(docs.length, "document", "documents");
    if (focusedId !== null) {
      let target = docList.querySelector('.kb-doc[data-document-id="' + CSS.escape(focusedId) + '"]');
      for (let i = oldIds.indexOf(focusedId) + 1; !target && i < oldIds.length; i++)
        target = docList.querySelector('.kb-doc[data-document-id="' + CSS.escape(oldIds[i]) + '"]');
      const btn = target ? target.querySelector("button") : docList.querySelector("button");
      (btn || content).focus();
    }
  }

  function docItem(d) {
    const id = str(d.documentId);
    const meta = d.metadata && typeof d.metadata === "object" && !Array.isArray(d.metadata) ?
      d.metadata : null;
    const t = title(meta);
    const length = typeof d.length === "number" ? d.length : null;
    const preview = str(d.preview);
    const more = length !== null && length > [...preview].length;
    const info = added.get(id);
    const facts = [];
    if (length !== null) facts.push(plural(length, "character", "characters"));
    if (typeof d.chunks === "number") facts.push(plural(d.chunks, "chunk", "chunks"));
    if (info) facts.push(info.vectors ? "vectors" : "keyword only");
    if (d.createdAt) facts.push("added " + fmtDate(d.createdAt));
    const other = meta ? Object.entries(meta).filter(([k]) => k !== "title") : [];
    const btn = h("button", { class: "kb-remove", attrs: { type: "button",
      "aria-label": "Remove " + (t || id) }, dataset: { act: "remove" },
    on: { click: () => remove(id, btn) } }, "Remove");
    return h("li", { class: "kb-doc", dataset: { documentId: id } },
      h("div", { class: "kb-doc-head" },
        t ? h("strong", { class: "kb-title" }, t) : null,
        h("code", { class: "kb-id" }, id),
        btn),
      h("p", { class: "kb-preview" }, preview + (more ? "…" : "")),
      h("p", { class: "kb-facts muted small" }, facts.join(" · ")),
      info && info.note ? h("p", { class: "kb-doc-note small" }, info.note) : null,
      other.length ? h("dl", { class: "kb-meta small" }, other.map(([k, v]) =>
        [h("dt", null, k), h("dd", null, metaText(v))])) : null);
  }

  async function remove(id, btn) {
    if (btn.getAttribute("aria-disabled") === "true") return;
    btn.setAttribute("aria-disabled", "true");
    btn.textContent = "Removing…";
    try {
      await ctx.api("DELETE", base + "/" + encodeURIComponent(id));
      showError(listErr, null);
    } catch (e) {
      showError(listErr, e, "cannot remove " + id, true);
      btn.removeAttribute("aria-disabled");
      btn.textContent = "Remove";
      return;
    }
    invalidate();
  }

  // ---- adding ----

  async function add() {
    if (addBtn.getAttribute("aria-disabled") === "true") return;
    const text = content.value;
    const t = titleIn.value.trim();
    if (text === "") {
      addStatus.textContent = "Type the document's text first.";
      content.focus();
      return;
    }
    // The same document sent again after a failure keeps its key: if the
    // first request reached the server, this one is answered as it was.
    if (!pendingAdd || pendingAdd.content !== text || pendingAdd.title !== t)
      pendingAdd = { key: newKey(), content: text, title: t };
    const body = { content: text };
    if (t) body.metadata = { title: t };
    addBtn.setAttribute("aria-disabled", "true");
    addStatus.textContent = "Adding…";
    try {
      const r = await ctx.api("POST", base, body, { headers: { "Idempotency-Key": pendingAdd.key } });
      pendingAdd = null;
      showError(addErr, null);
      content.value = "";
      titleIn.value = "";
      const id = str(r && r.documentId);
      addStatus.textContent = r && r.duplicate ? "Already added as " + id + "." :
        id ? "Added " + id + "." : "Sent to the session's host; it shows here once added.";
      invalidate();
    } catch (e) {
      // A refusal is final; a lost answer may be retried with the key.
      if (e.status && e.status < 500) pendingAdd = null;
      addStatus.textContent = "";
      showError(addErr, e, "the document was not added", true);
    } finally {
      addBtn.removeAttribute("aria-disabled");
    }
  }

  // ---- searching ----

  async function search() {
    const q = query.value.trim();
    if (q === "") { query.focus(); return; }
    const mine = ++searchSeq;
    searchBtn.setAttribute("aria-disabled", "true");
    results.setAttribute("aria-busy", "true");
    try {
      const r = await ctx.api("POST", base + "/search", { query: q, limit: SEARCH_LIMIT });
      if (destroyed || mine !== searchSeq) return;
      showError(searchErr, null);
      renderResults(r || {});
    } catch (e) {
      if (destroyed || mine !== searchSeq) return;
      showError(searchErr, e, "the search failed");
    } finally {
      if (mine === searchSeq) {
        searchBtn.removeAttribute("aria-disabled");
        results.removeAttribute("aria-busy");
      }
    }
  }

  function renderResults(r) {
    const hits = Array.isArray(r.results) ? r.results.filter((x) => x && typeof x === "object") : [];
    const m = str(r.mode);
    mode.dataset.mode = m;
    mode.textContent = (m === "hybrid" ? "hybrid: keyword and vector" : m || "?") + " search, " +
      plural(hits.length, "hit", "hits");
    note.textContent = str(r.note);
    note.hidden = !r.note;
    info.hidden = false;
    clear(results);
    hits.forEach((x, i) => results.append(hitItem(x, i + 1)));
  }

  function hitItem(x, rank) {
    const t = title(x.metadata);
    const s = typeof x.score === "number" ? x.score : 0;
    const parts = [];
    if (typeof x.keywordScore === "number") parts.push("keyword " + score(x.keywordScore));
    if (typeof x.vectorScore === "number") parts.push("vector " + score(x.vectorScore));
    return h("li", { class: "kb-hit", dataset: { documentId: str(x.documentId) } },
      h("div", { class: "kb-hit-head" },
        h("span", { class: "kb-rank" }, "#" + rank),
        h("meter", { class: "kb-meter", attrs: { min: "0", max: "1", value: String(Math.max(0, Math.min(1, s))),
          "aria-label": "score" } }),
        h("span", { class: "kb-score", attrs: { title: "score" } }, score(x.score)),
        parts.length ? h("span", { class: "kb-subscores muted small" }, parts.join(" · ")) : null,
        t ? h("strong", { class: "kb-title" }, t) : null,
        h("code", { class: "kb-id" }, str(x.documentId)),
        lines(x.lines) ? h("span", { class: "kb-lines muted small" }, lines(x.lines)) : null),
      h("pre", { class: "kb-chunk" }, str(x.content)));
  }

  // ---- wiring ----

  const offs = [
    conn.on("kb_added", (ev, meta) => {
      if (ev.documentId)
        added.set(str(ev.documentId), { vectors: !!ev.vectors, note: str(ev.note) });
      // What happened before the page connected is in the list it read
      // then; the replayed events only add whether a document has vectors.
      if (!(meta && meta.replay)) invalidate();
      else if (docs && visible) schedule(skey, renderDocs);
    }),
    conn.on("kb_removed", (ev, meta) => {
      added.delete(str(ev.documentId));
      if (!(meta && meta.replay)) invalidate();
    }),
    conn.onState((s) => { live = s === "live"; }),
    // Each connect reads the list again (the Conn is live by then): what
    // changed while the page was away may not all be in the log any more.
    conn.on("session_state", (ev) => {
      if (typeof ev.seq !== "number") invalidate();
    }),
  ];

  return {
    show() {
      visible = true;
      load();
    },
    hide() {
      visible = false;
    },
    destroy() {
      destroyed = true;
      for (const off of offs) {
        try { off(); } catch { /* already gone */ }
      }
      clear(root);
    },
  };
}
