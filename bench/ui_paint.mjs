// The browser side of bench/ui_paint (read its header): node ui_paint.mjs
// '{"scenario":{sid,lastSeq,messageId,textLength,emptySid},"rounds":R}'
// with UI_BASE=http://127.0.0.1:PORT.  Prints progress, then one JSON line
// {"rounds":[{paintMs, liveMs, emptyMs, wsMs, logMs, marks, metrics}, ...]}.
// Every time is the page's performance.now(): milliseconds since the
// navigation started (or since the baseline's own start for ws and log).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(new URL("../tests/e2e/package.json", import.meta.url));
const puppeteer = require("puppeteer-core");

const BASE = process.env.UI_BASE;
const { scenario: sc, rounds } = JSON.parse(process.argv[2]);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "parley-ui-paint-"));
const browser = await puppeteer.launch({
  executablePath: CHROMIUM, headless: true, userDataDir: profile,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update",
    "--window-size=1280,900"],
  defaultViewport: { width: 1280, height: 900 }, protocolTimeout: 120000,
});

// A fresh context (no cache, no storage) and page that notes when
// #conn-status first says live and what went wrong.
// __lastAt: when the page's WebSocket received the filled session's last
// event (a string search per frame, no second parse).
async function freshPage(lastSeq) {
  const ctx = await browser.createBrowserContext();
  const page = await ctx.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.evaluateOnNewDocument((last) => {
    window.__lastAt = null;
    const needle = `"seq":${last},`;
    const W = window.WebSocket;
    window.WebSocket = class extends W {
      constructor(...a) {
        super(...a);
        this.addEventListener("message", (m) => {
          if (window.__lastAt === null && typeof m.data === "string" && m.data.includes(needle))
            window.__lastAt = performance.now();
        });
      }
    };
  }, lastSeq || -1);
  await page.evaluateOnNewDocument(() => {
    window.__liveAt = null;
    new MutationObserver(() => {
      const s = document.getElementById("conn-status");
      if (window.__liveAt === null && s && s.getAttribute("data-state") === "live")
        window.__liveAt = performance.now();
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-state"] });
  });
  return { ctx, page, problems };
}

async function pageFacts(page) {
  const f = await page.evaluate(() => ({
    liveMs: window.__liveAt,
    lastEventMs: window.__lastAt,
    marks: performance.getEntriesByType("mark").map((m) => [m.name, Math.round(m.startTime)]),
    measures: performance.getEntriesByType("measure").map((m) => [m.name, Math.round(m.duration)]),
    fcpMs: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || null,
    nodes: document.getElementsByTagName("*").length,
    messages: document.querySelectorAll("#chat-log .msg").length,
  }));
  const m = await page.metrics();
  f.metrics = { scriptMs: Math.round(m.ScriptDuration * 1000), layoutMs: Math.round(m.LayoutDuration * 1000),
    styleMs: Math.round(m.RecalcStyleDuration * 1000), taskMs: Math.round(m.TaskDuration * 1000),
    heapMB: Math.round(m.JSHeapUsedSize / 1048576 * 10) / 10 };
  return f;
}

// Navigation start to the animation frame in which the last message of
// the filled session shows its whole text.
async function paintRun() {
  const { ctx, page, problems } = await freshPage(sc.lastSeq);
  try {
    await page.goto(`${BASE}/ui/#/s/${encodeURIComponent(sc.sid)}/chat`, { waitUntil: "domcontentloaded" });
    const h = await page.waitForFunction((mid, len) => {
      const b = document.querySelector(`#chat-log .msg[data-message-id="${CSS.escape(mid)}"] .msg-body`);
      return b && b.textContent.length >= len ? performance.now() : false;
    }, { polling: "raf", timeout: 100000 }, sc.messageId, sc.textLength);
    const paintMs = await h.jsonValue();
    const f = await pageFacts(page);
    return { paintMs, ...f, problems };
  } finally {
    await ctx.close();
  }
}

// The page on an empty session until it is usable; then, in that page, the
// bare WebSocket replay and the /log paging of the filled session.
async function emptyRun() {
  const { ctx, page, problems } = await freshPage();
  try {
    await page.goto(`${BASE}/ui/#/s/${encodeURIComponent(sc.emptySid)}/chat`, { waitUntil: "domcontentloaded" });
    const h = await page.waitForFunction(() => {
      const s = document.getElementById("conn-status");
      return s && s.getAttribute("data-state") === "live" && document.getElementById("chat-input")
        ? performance.now() : false;
    }, { polling: "raf", timeout: 60000 });
    const emptyMs = await h.jsonValue();
    const wsMs = await page.evaluate((sid, last) => new Promise((res, rej) => {
      const t0 = performance.now();
      const ws = new WebSocket(`ws://${location.host}/sessions/${encodeURIComponent(sid)}/stream?lastSeq=0`);
      let n = 0;
      ws.onmessage = (m) => {
        const ev = JSON.parse(m.data);
        if (typeof ev.seq === "number") n++;
        if (ev.seq === last) { const t = performance.now() - t0; ws.close(); res(t); }
      };
      ws.onerror = () => rej(new Error("websocket error after " + n + " events"));
    }), sc.sid, sc.lastSeq);
    const logMs = await page.evaluate(async (sid, last) => {
      const t0 = performance.now();
      let after = 0;
      while (after < last) {
        const r = await fetch(`/sessions/${encodeURIComponent(sid)}/log?after=${after}&limit=500`);
        const evs = await r.json();
        if (!evs.length) throw new Error("log ended at " + after);
        after = evs[evs.length - 1].seq;
      }
      return performance.now() - t0;
    }, sc.sid, sc.lastSeq);
    return { emptyMs, wsMs, logMs, emptyLiveMs: await page.evaluate(() => window.__liveAt), problems };
  } finally {
    await ctx.close();
  }
}

const out = [];
try {
  // one warm-up pair (chromium's own first start), not counted
  await emptyRun();
  for (let i = 0; i < rounds; i++) {
    // alternate the order so neither always runs first
    const a = i % 2 ? await emptyRun() : null;
    const p = await paintRun();
    const b = a || await emptyRun();
    const r = { round: i + 1, ...p, ...b, problems: [...p.problems, ...b.problems] };
    out.push(r);
    console.log(`round ${i + 1}: paint ${Math.round(r.paintMs)} ms (live at ${Math.round(r.liveMs)} ms, last event in at ${Math.round(r.lastEventMs)} ms, ` +
      `${r.messages} messages, ${r.nodes} elements, script ${r.metrics.scriptMs} ms, layout ${r.metrics.layoutMs} ms); ` +
      `empty ${Math.round(r.emptyMs)} ms, ws replay ${Math.round(r.wsMs)} ms, /log ${Math.round(r.logMs)} ms` +
      (r.marks.length ? `; marks ${JSON.stringify(r.marks)}` : "") +
      (r.problems.length ? `; PROBLEMS ${r.problems.slice(0, 3).join(" | ")}` : ""));
  }
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify({ rounds: out }));
