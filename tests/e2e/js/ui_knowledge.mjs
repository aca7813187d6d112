// ui_knowledge: the knowledge view and the chat's context blocks
// (t_ui_knowledge.py: parleyd with its script provider, an admin token
// for the page and an observer token, UI_OBSERVER).
//  - a document added through #kb-add-content/#kb-add-title is listed in
//    #kb-docs with its preview, length and title (the POST carried an
//    Idempotency-Key; kb_added is logged); one added and removed by another
//    client comes and goes by itself (the Conn's kb_added/kb_removed), its
//    markup shown as text;
//  - a search from #kb-search-input lists the document in #kb-results
//    with its score, the mode keyword and the keyword-only note;
//  - a chat turn logs rag_context before the reply, and the chat shows it
//    as a .rag-context <details> before the agent's message, naming the
//    document;
//  - the remove button removes it (kb_removed logged, the list empty);
//  - with the observer token: the list and the search work, an add and a
//    remove show the server's FORBIDDEN in an .error-banner;
//  - light and dark.
// Screenshots: E2E_LOGDIR/ui-knowledge*.png.
import { main, check, sleep, log, logEvents, logUntil, ofType, doneCount,
  openChat, sendChat, xssFindings, rest, TOKEN } from "./ui_lib.mjs";

const SID = process.env.UI_KB_SID || "ui-kb-1";
const OBSERVER = process.env.UI_OBSERVER || "";
const CONTENT = "The zorblax relay listens on port 7419.\n" +
  "It retries thrice, then gives up and writes a zorblax_failure line to its log.\n" +
  "Operators restart it with `zorblaxctl restart`; the restart takes about two seconds.\n";
const TITLE = "Zorblax notes";
const MARKUP = "<img src=x onerror=\"window.__xss=1\"> <b>not bold</b> quuxfrob";

const kbDocs = () => [...document.querySelectorAll("#kb-docs .kb-doc[data-document-id]")]
  .map((e) => e.getAttribute("data-document-id"));

// Opens the view of SID with token tok in the tab's sessionStorage, put
// there before the page's scripts run (as its dialog would keep it).
async function openWith(t, tok) {
  const { identifier } = await t.page.evaluateOnNewDocument((v) => {
    if (location.pathname.startsWith("/ui/")) sessionStorage.setItem("parley.token", v);
  }, tok);
  await openChat(t, SID, "knowledge");
  await t.page.removeScriptToEvaluateOnNewDocument(identifier);
}

await main("ui_knowledge", async (t) => {
  const { page } = t;
  const keys = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && /\/sessions\/[^/]+\/kb$/.test(r.url()))
      keys.push(r.headers()["idempotency-key"] || "");
  });
  const r = await rest("POST", "/sessions", { sessionId: SID });
  check(r.status === 201, `POST /sessions -> ${r.status} ${JSON.stringify(r.body)}`);

  // the view, empty
  if (TOKEN) await openWith(t, TOKEN);
  else await openChat(t, SID, "knowledge");
  await t.waitSel('nav a[data-view="knowledge"][aria-current="page"]', 5000, "the knowledge nav link current");
  await t.waitFn("the empty list", () => {
    const l = document.querySelector("#kb-docs");
    return l && !l.hasAttribute("aria-busy") && !document.querySelector(".kb-empty").hidden;
  });
  check(await t.count("#kb-docs .kb-doc") === 0, "documents listed in a new session");

  // add through the page
  await page.type("#kb-add-content", CONTENT);
  await page.type("#kb-add-title", TITLE);
  await page.click("#kb-add-submit");
  const added = ofType(await logUntil(SID, (e) => ofType(e, "kb_added").length === 1, "kb_added of the page's add"), "kb_added")[0];
  const doc = added.documentId;
  log(`kb_added ${JSON.stringify(added)}`);
  check(!("content" in added), "kb_added carries the content");
  check(added.metadata && added.metadata.title === TITLE, `kb_added metadata ${JSON.stringify(added.metadata)}`);
  check(keys.length === 1 && /^[\x21-\x7e]{1,128}$/.test(keys[0]), `the POST's Idempotency-Key: ${JSON.stringify(keys)}`);
  const item = `#kb-docs .kb-doc[data-document-id="${doc}"]`;
  await t.waitSel(item, 10000, `${doc} in #kb-docs`);
  const shown = await page.$eval(item, (e) => ({
    preview: e.querySelector(".kb-preview").textContent,
    text: e.textContent,
    remove: e.querySelector('button[data-act="remove"]') !== null,
  }));
  log(`listed: ${JSON.stringify(shown)}`);
  check(shown.preview.startsWith(CONTENT.slice(0, 100)), `preview ${JSON.stringify(shown.preview)}`);
  check(shown.text.includes(TITLE), "the title is not shown");
  check(shown.text.includes(`${[...CONTENT].length} characters`), `the length (${[...CONTENT].length}) is not shown: ${shown.text}`);
  check(shown.remove, "no remove button");
  check(await page.$eval("#kb-add-content", (e) => e.value) === "", "the form kept the content after the add");
  check(await page.$eval("#kb-add-status", (e, id) => e.textContent.includes(id), doc), "#kb-add-status does not name the document");

  // another client's add and remove reach the list through the stream
  const other = await rest("POST", `/sessions/${SID}/kb`, { content: MARKUP, metadata: { title: "<i>raw</i>", n: 2 } });
  check(other.status === 202, `REST add -> ${other.status} ${JSON.stringify(other.body)}`);
  const oid = other.body.documentId;
  await t.waitFn("the other client's document listed", (id) => {
    const e = document.querySelector(`#kb-docs .kb-doc[data-document-id="${id}"]`);
    return e && e.querySelector(".kb-preview").textContent;
  }, oid, 10000);
  check(await page.$eval(`#kb-docs .kb-doc[data-document-id="${oid}"] .kb-preview`, (e) => e.textContent) === MARKUP,
    "the markup document's preview is not its text");
  const xss = await xssFindings(t);
  check(xss.length === 0, `markup ran: ${xss.join("; ")}`);
  await t.shot("knowledge-two");
  const del = await rest("DELETE", `/sessions/${SID}/kb/${oid}`);
  check(del.status === 202, `REST delete -> ${del.status}`);
  await t.waitFn("the other client's document gone", (id) =>
    !document.querySelector(`#kb-docs .kb-doc[data-document-id="${id}"]`), oid, 10000);

  // search
  await page.focus("#kb-search-input");
  await page.keyboard.type("zorblax port");
  await page.keyboard.press("Enter");
  await t.waitSel("#kb-results .kb-hit", 10000, "a hit in #kb-results");
  const want = await rest("POST", `/sessions/${SID}/kb/search`, { query: "zorblax port", limit: 10 });
  check(want.status === 200 && want.body.results.length >= 1, `REST search -> ${JSON.stringify(want.body)}`);
  const hits = await page.$$eval("#kb-results .kb-hit", (els) => els.map((e) => ({
    id: e.getAttribute("data-document-id"),
    score: e.querySelector(".kb-score").textContent,
    text: e.textContent,
  })));
  const modeInfo = await page.$eval("#kb-mode", (e) => ({ mode: e.getAttribute("data-mode"), text: e.textContent,
    note: document.querySelector("#kb-note").textContent }));
  log(`hits ${JSON.stringify(hits)} mode ${JSON.stringify(modeInfo)}`);
  check(hits.length === want.body.results.length, `${hits.length} hits shown, the search has ${want.body.results.length}`);
  check(hits[0].id === doc, `first hit ${hits[0].id}, want ${doc}`);
  check(Number(hits[0].score) > 0 && hits[0].score === want.body.results[0].score.toFixed(3),
    `score shown ${hits[0].score}, the search's ${want.body.results[0].score}`);
  check(hits[0].text.includes("keyword " + want.body.results[0].keywordScore.toFixed(3)), "the keywordScore is not shown");
  check(hits[0].text.includes("listens on port 7419"), "the hit's chunk is not shown");
  check(modeInfo.mode === "keyword" && /keyword/.test(modeInfo.text), `#kb-mode ${JSON.stringify(modeInfo)}`);
  check(want.body.note && modeInfo.note === want.body.note, `#kb-note ${JSON.stringify(modeInfo.note)}, want ${JSON.stringify(want.body.note)}`);
  await t.shot("knowledge");

  // a chat turn: rag_context, then the reply; the chat shows the context first
  await page.click('nav a[data-view="chat"]');
  await t.waitFn("the chat route", (sid) => location.hash === `#/s/${sid}/chat`, SID);
  await sendChat(t, "How do I restart the zorblax relay?");
  const evs = await logUntil(SID, (e) => doneCount(e) === 1, "done of the chat turn");
  const rag = ofType(evs, "rag_context");
  check(rag.length === 1, `${rag.length} rag_context events`);
  const firstToken = ofType(evs, "token")[0];
  check(firstToken && rag[0].seq < firstToken.seq, "rag_context is not before the reply");
  check(rag[0].chunks.some((c) => c.source === "kb" && c.documentId === doc), `rag_context ${JSON.stringify(rag[0])}`);
  await t.chatMatchesLog(SID);
  await t.waitSel("#chat-log .rag-context", 10000, "the .rag-context block");
  const block = await page.$eval("#chat-log .rag-context", (d) => {
    const msg = document.querySelector("#chat-log .msg-agent");
    return {
      tag: d.tagName, summary: d.querySelector("summary").textContent, text: d.textContent, open: d.open,
      before: !!msg && !!(d.compareDocumentPosition(msg) & Node.DOCUMENT_POSITION_FOLLOWING),
      chunks: d.querySelectorAll(".rag-chunk").length,
    };
  });
  log(`rag block ${JSON.stringify(block)}`);
  const n = rag[0].chunks.length;
  check(block.tag === "DETAILS" && !block.open, "the context block is not a closed <details>");
  check(block.summary.startsWith(`Context: ${n} chunk${n === 1 ? "" : "s"}`), `summary ${JSON.stringify(block.summary)}`);
  check(block.chunks === n && block.text.includes(doc) && block.text.includes("[1]"), `the block does not list ${doc} as [1]: ${block.text}`);
  check(block.text.includes("score " + rag[0].chunks[0].score.toFixed(3)), "the chunk's score is not shown");
  check(block.before, "the context block is not before the agent's reply");
  await page.click("#chat-log .rag-context summary");
  await t.waitFn("the block open", () => document.querySelector("#chat-log .rag-context").open);
  await t.shot("knowledge-chat");

  // remove through the page
  await page.click('nav a[data-view="knowledge"]');
  await t.waitFn("the knowledge route", (sid) => location.hash === `#/s/${sid}/knowledge`, SID);
  await page.focus(`${item} button[data-act="remove"]`);
  await page.keyboard.press("Enter");
  await logUntil(SID, (e) => ofType(e, "kb_removed").some((x) => x.documentId === doc), "kb_removed after the remove button");
  await t.waitFn("the list empty", () => document.querySelectorAll("#kb-docs .kb-doc").length === 0 &&
    !document.querySelector(".kb-empty").hidden, null, 10000);
  const list = await rest("GET", `/sessions/${SID}/kb`);
  check(list.status === 200 && list.body.totalCount === 0, `GET kb after the remove: ${JSON.stringify(list.body)}`);
  check(await page.evaluate(() => document.activeElement && document.activeElement.id) === "kb-add-content",
    "the focus did not move on from the removed document's button");

  // a reload reads the list again; the chat still shows the turn's context
  const keep = await rest("POST", `/sessions/${SID}/kb`, { content: CONTENT, metadata: { title: TITLE } });
  check(keep.status === 202, `REST add -> ${keep.status}`);
  await openChat(t, SID, "knowledge");
  await t.waitFn("the list after a reload", kbDocs, null, 10000);
  check(JSON.stringify(await page.evaluate(kbDocs)) === JSON.stringify([keep.body.documentId]), "the list after a reload");

  // light and dark
  const lum = () => {
    const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number);
    const l = ([r, g, b]) => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
    const p = getComputedStyle(document.querySelector(".kb-panel"));
    const m = getComputedStyle(document.querySelector(".kb-preview"));
    return { bg: l(rgb(p.backgroundColor)), fg: l(rgb(m.color)) };
  };
  const light = await page.evaluate(lum);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  await sleep(300);
  const dark = await page.evaluate(lum);
  log(`panel light ${JSON.stringify(light)}, dark ${JSON.stringify(dark)}`);
  check(light.bg > 0.6 && light.fg < 0.4, `light: panel ${light.bg.toFixed(2)}, text ${light.fg.toFixed(2)}`);
  check(dark.bg < 0.3 && dark.fg > 0.6, `dark: panel ${dark.bg.toFixed(2)}, text ${dark.fg.toFixed(2)}`);
  await page.focus("#kb-search-input");
  await page.keyboard.type("zorblaxctl");
  await page.keyboard.press("Enter");
  await t.waitSel("#kb-results .kb-hit", 10000, "a hit in the dark");
  await t.shot("knowledge-dark");
  await page.click('nav a[data-view="chat"]');
  await t.waitSel("#chat-log .rag-context", 10000, "the .rag-context block after a reload");
  await page.click("#chat-log .rag-context summary");
  await sleep(200);
  await t.shot("knowledge-chat-dark");
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);

  // every control of the list is a button (keyboard usable)
  const notButtons = await page.$$eval("#kb-docs [data-act], #kb-add-submit, #kb-search-submit", (els) =>
    els.filter((e) => e.tagName !== "BUTTON").map((e) => e.tagName + "#" + e.id));
  check(notButtons.length === 0, `controls that are not <button>: ${notButtons}`);

  // an observer lists and searches; its add and remove are refused, said
  if (OBSERVER) {
    await openWith(t, OBSERVER);
    await t.waitFn("the observer's list", kbDocs, null, 10000);
    await page.type("#kb-search-input", "restart");
    await page.click("#kb-search-submit");
    await t.waitSel("#kb-results .kb-hit", 10000, "the observer's search");
    await page.type("#kb-add-content", "an observer's document");
    await page.click("#kb-add-submit");
    await t.waitSel("#kb-add-form .error-banner:not([hidden])", 10000, "the refused add's .error-banner");
    const err = await page.$eval("#kb-add-form .error-banner", (e) => ({ code: e.dataset.code, text: e.textContent }));
    log(`observer's add: ${JSON.stringify(err)}`);
    check(err.code === "FORBIDDEN" && /not added/.test(err.text), `the refusal: ${JSON.stringify(err)}`);
    check(await page.$eval("#kb-add-content", (e) => e.value) === "an observer's document", "the refused document's text is gone");
    await page.click('#kb-docs button[data-act="remove"]');
    await t.waitSel(".kb-docs-panel .error-banner:not([hidden])", 10000, "the refused remove's .error-banner");
    await t.shot("knowledge-observer");
    check((await logEvents(SID)).filter((e) => e.type === "kb_added").length === 3, "the observer's add was logged");
    check(await t.count("#kb-docs .kb-doc") === 1, "the refused remove removed the document from the list");
  }
}, { allowStatus: (url, st) => OBSERVER && st === 403 && /\/sessions\/[^/]+\/kb(\/[^/]+)?$/.test(url) });
