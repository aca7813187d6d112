// The web UI tests' harness: Debian's chromium (headless, through
// puppeteer-core: no browser is ever downloaded) against a real parleyd
// that the python wrapper (tests/e2e/t_ui_*.py, lib/ui.py) started.
//
// Anything the browser reports as wrong fails the test: a Content Security
// Policy violation (the console's error and the document's
// securitypolicyviolation event, injected before any script of the page
// runs), an uncaught page error, a failed request or an HTTP error answer
// (other than what the test says it expects).  Each view is saved as a
// screenshot, E2E_LOGDIR/ui-NAME.png, for review.
//
// Environment (set by lib/ui.py): UI_BASE (http://127.0.0.1:PORT), UI_TOKEN
// (a token for the harness's own REST calls, "" when none is configured),
// UI_PARLEYD_PID (the supervisor), UI_FAKELLM (http://127.0.0.1:PORT of
// tests/fixtures/fakellm.py, when the test has one), E2E_LOGDIR, CHROMIUM.

import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import puppeteer from "puppeteer-core";
import WebSocket from "ws";

export const BASE = process.env.UI_BASE || "http://127.0.0.1:7777";
export const TOKEN = process.env.UI_TOKEN || "";
export const LOGDIR = process.env.E2E_LOGDIR || "/tmp";
export const FAKELLM = process.env.UI_FAKELLM || "";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

export class UiFail extends Error {}

export function fail(msg) { throw new UiFail(msg); }
export function check(cond, msg) { if (!cond) fail(typeof msg === "function" ? msg() : msg); }
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function log(...a) {
  console.log(new Date().toISOString().slice(11, 23), ...a);
}

// -- parleyd over HTTP (the harness's view of the truth) ---------------------

export async function rest(method, p, body, token = TOKEN) {
  const headers = { "Accept": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(BASE + p, { method, headers,
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let js = null;
  try { js = text ? JSON.parse(text) : null; } catch { js = text; }
  return { status: res.status, headers: res.headers, body: js };
}

// Every logged event of sid, through GET /sessions/{id}/log.
export async function logEvents(sid) {
  const out = [];
  let after = 0;
  for (;;) {
    const r = await rest("GET", `/sessions/${encodeURIComponent(sid)}/log?after=${after}&limit=500`);
    check(r.status === 200 && Array.isArray(r.body), () => `GET log of ${sid} -> ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    if (r.body.length === 0) return out;
    out.push(...r.body);
    after = r.body[r.body.length - 1].seq;
  }
}

export const ofType = (evs, t) => evs.filter((e) => e.type === t);

// messageId -> the text of its token events, in log order.
export function agentTexts(evs) {
  const m = new Map();
  for (const e of evs) {
    if (e.type !== "token") continue;
    m.set(e.messageId, (m.get(e.messageId) || "") + (e.content || ""));
  }
  return m;
}

// Polls sid's log until pred(events); returns them.
export async function logUntil(sid, pred, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const evs = await logEvents(sid);
    if (pred(evs)) return evs;
    if (Date.now() > deadline)
      fail(`${what}: not in the log after ${timeoutMs} ms; log ends ${evs.slice(-8).map((e) => e.type + "/" + e.seq).join(" ")}`);
    await sleep(100);
  }
}

export const doneCount = (evs) => ofType(evs, "done").length;

// -- the fake LLM (tests/fixtures/fakellm.py) --------------------------------

export async function fakeScript(steps, append = false) {
  check(FAKELLM, "this test has no fakellm");
  const r = await fetch(FAKELLM + "/_script", { method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ queue: steps, append }) });
  check(r.ok, `fakellm /_script -> ${r.status}`);
}

export async function fakeRequests() {
  const r = await fetch(FAKELLM + "/_requests");
  return r.json();
}

// -- the daemon's processes ---------------------------------------------------

function workers(pid) {
  try {
    return execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
      .split(/\s+/).filter(Boolean).map(Number);
  } catch { return []; }
}

// SIGKILL every worker of parleyd; resolves once as many new ones are up
// and /health answers 200 (lib/parley.py's Daemon.kill_workers).
export async function killWorkers(timeoutMs = 30000) {
  const pid = Number(process.env.UI_PARLEYD_PID);
  check(pid > 0, "UI_PARLEYD_PID is not set");
  const old = workers(pid);
  check(old.length > 0, `no workers under parleyd ${pid}`);
  for (const p of old) process.kill(p, "SIGKILL");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = workers(pid);
    if (now.length >= old.length && !now.some((p) => old.includes(p))) {
      try {
        const r = await rest("GET", "/health");
        if (r.status === 200) return;
      } catch { /* not yet */ }
    }
    check(Date.now() < deadline, "workers not back after SIGKILL");
    await sleep(100);
  }
}

// -- the browser --------------------------------------------------------------

// A fresh chromium with one page; t.problems collects what fails the test.
// opts.allowStatus(url, status): true for an HTTP error answer the test
// expects (e.g. 401 before the token is given).
export async function launch(name, opts = {}) {
  const profile = fs.mkdtempSync(path.join(LOGDIR, `ui-${name}-profile-`));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // root in a container: no sandbox; no first-run, sync or
    // component downloads; a small /dev/shm is not enough for chromium.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--no-first-run",
      "--no-default-browser-check", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
      "--window-size=1280,900", `--user-data-dir=${profile}`],
    defaultViewport: { width: 1280, height: 900 },
    userDataDir: profile,
    protocolTimeout: 60000,
  });
  const page = await browser.newPage();
  const t = new Ui(name, browser, page, profile, opts);
  await t.install();
  return t;
}

class Ui {
  constructor(name, browser, page, profile, opts) {
    this.name = name;
    this.browser = browser;
    this.page = page;
    this.profile = profile;
    this.opts = opts;
    this.problems = [];
    this.consoleLines = [];
    this.requests = [];		// every URL the page asked for (HTTP and WebSocket)
    this.requestHeaders = [];	// {url, method, auth} of every HTTP request
    this.wsFrames = [];		// {dir, url, data} of every WebSocket frame
    this.wsHandshakes = [];	// {url, headers} of every WebSocket upgrade request
    this.expectAbort = 0;	// requests aborted by a navigation until then are fine
  }

  problem(what) {
    log(`PROBLEM ${what}`);
    this.problems.push(what);
  }

  async install() {
    const { page } = this;
    await page.exposeFunction("__uiCspViolation", (v) => {
      this.problem(`CSP violation (securitypolicyviolation): ${v}`);
    });
    await page.evaluateOnNewDocument(() => {
      document.addEventListener("securitypolicyviolation", (e) => {
        // the harness's own binding; exposed before the page's scripts run
        window.__uiCspViolation(`${e.violatedDirective} blocked ${e.blockedURI || "(inline)"} at ${e.sourceFile || ""}:${e.lineNumber || ""} sample=${JSON.stringify(e.sample || "")}`);
      }, true);
    });
    page.on("console", (m) => {
      const text = m.text();
      this.consoleLines.push(`${m.type()}: ${text}`);
      if (m.type() === "error" && /Content.Security.Policy/i.test(text))
        this.problem(`CSP violation (console): ${text}`);
      else if (m.type() === "error" && !/Failed to load resource/.test(text))
        log(`console error: ${text}`);
    });
    page.on("pageerror", (e) => this.problem(`page error: ${e && e.message ? e.message : e}`));
    page.on("request", (r) => {
      this.requests.push(r.url());
      this.requestHeaders.push({ url: r.url(), method: r.method(), auth: r.headers().authorization || "" });
    });
    page.on("requestfailed", (r) => {
      const err = r.failure() ? r.failure().errorText : "?";
      if (err === "net::ERR_ABORTED" && Date.now() < this.expectAbort) return;
      this.problem(`request failed: ${r.method()} ${r.url()}: ${err}`);
    });
    page.on("response", (r) => {
      const st = r.status();
      if (st < 400) return;
      const url = r.url();
      if (this.opts.allowStatus && this.opts.allowStatus(url, st)) return;
      this.problem(`HTTP ${st} for ${r.request().method()} ${url}`);
    });
    // WebSockets are not "requests" to puppeteer: watch them through CDP.
    const cdp = await page.createCDPSession();
    this.cdp = cdp;
    await cdp.send("Network.enable");
    const wsUrls = new Map();
    cdp.on("Network.webSocketCreated", (e) => { wsUrls.set(e.requestId, e.url); this.requests.push(e.url); });
    cdp.on("Network.webSocketWillSendHandshakeRequest", (e) =>
      this.wsHandshakes.push({ url: wsUrls.get(e.requestId) || "", headers: (e.request && e.request.headers) || {} }));
    cdp.on("Network.webSocketFrameSent", (e) => this.wsFrames.push({ dir: "out", data: e.response.payloadData }));
    cdp.on("Network.webSocketFrameReceived", (e) => this.wsFrames.push({ dir: "in", data: e.response.payloadData }));
  }

  // Requests a navigation cuts short are not failures.
  allowAborts(ms = 3000) { this.expectAbort = Date.now() + ms; }

  async goto(p) {
    this.allowAborts();
    const r = await this.page.goto(BASE + p, { waitUntil: "load", timeout: 20000 });
    check(r && r.status() < 400, `GET ${p} -> ${r && r.status()}`);
    return r;
  }

  async reload() {
    this.allowAborts();
    await this.page.reload({ waitUntil: "load", timeout: 20000 });
  }

  async shot(view) {
    const file = path.join(LOGDIR, `ui-${view}.png`);
    await this.page.screenshot({ path: file, fullPage: false });
    log(`screenshot ${file}`);
    return file;
  }

  // Waits for fn(arg) in the page to be truthy; returns its value.
  async waitFn(what, fn, arg, timeoutMs = 15000) {
    try {
      const h = await this.page.waitForFunction(fn, { timeout: timeoutMs, polling: 50 }, arg);
      return await h.jsonValue();
    } catch (e) {
      if (e && e.name === "TimeoutError") fail(`${what}: not seen within ${timeoutMs} ms`);
      throw e;
    }
  }

  async waitSel(sel, timeoutMs = 15000, what = sel) {
    return this.waitFn(what, (s) => !!document.querySelector(s), sel, timeoutMs);
  }

  async count(sel) { return this.page.$$eval(sel, (els) => els.length); }

  async texts(sel) { return this.page.$$eval(sel, (els) => els.map((e) => e.textContent)); }

  // messageId -> .msg-body text of every agent message shown in the chat.
  async chatTexts() {
    return new Map(await this.page.$$eval("#chat-log .msg.msg-agent[data-message-id]",
      (els) => els.map((e) => {
        const b = e.querySelector(".msg-body");
        return [e.getAttribute("data-message-id"), b ? b.textContent : null];
      })));
  }

  // The chat shows, for every agent message of sid's log, exactly its
  // logged text (character for character), each once, and no other agent
  // message.  Polls up to timeoutMs for the page to catch up, then fails
  // naming the first difference.
  async chatMatchesLog(sid, timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const evs = await logEvents(sid);
      const want = agentTexts(evs);
      const dupes = await this.page.$$eval("#chat-log .msg.msg-agent[data-message-id]", (els) => {
        const seen = new Set(), d = [];
        for (const e of els) {
          const id = e.getAttribute("data-message-id");
          if (seen.has(id)) d.push(id);
          seen.add(id);
        }
        return d;
      });
      const got = await this.chatTexts();
      const diff = compareTexts(want, got);
      const bad = dupes.length ? `message ${dupes[0]} shown twice` : diff;
      if (!bad) return { evs, texts: want };
      if (Date.now() > deadline) fail(`chat differs from /log of ${sid}: ${bad}`);
      await sleep(150);
    }
  }

  // The harness's own verdict: fails on any problem the browser reported.
  checkClean() {
    check(this.problems.length === 0, () => `the browser reported ${this.problems.length} problem(s): ${this.problems.slice(0, 5).join(" || ")}`);
  }

  async close() {
    try { await this.browser.close(); } catch { /* gone */ }
    fs.rmSync(this.profile, { recursive: true, force: true });
  }
}

// "" when want (messageId -> text, from the log) and got (from the page)
// agree exactly; else the first difference.
export function compareTexts(want, got) {
  for (const [id, text] of want) {
    if (!got.has(id)) return `message ${id} (${text.length} chars logged) not shown; shown: ${[...got.keys()].join(", ") || "none"}`;
    const g = got.get(id);
    if (g === null) return `message ${id} has no .msg-body`;
    if (g !== text) {
      let i = 0;
      while (i < text.length && i < g.length && text[i] === g[i]) i++;
      return `message ${id}: text differs at char ${i} of ${text.length} logged / ${g.length} shown: ` +
        `logged ${JSON.stringify(text.slice(Math.max(0, i - 20), i + 30))} shown ${JSON.stringify(g.slice(Math.max(0, i - 20), i + 30))}`;
    }
  }
  for (const id of got.keys())
    if (!want.has(id)) return `agent message ${id} shown but has no tokens in the log`;
  return "";
}

// Runs body(t) against a fresh browser; prints "UI-OK NAME" or "UI-FAIL:
// reason" (with a screenshot ui-NAME-fail.png) and exits 0 or 1.
export async function main(name, body, opts = {}) {
  let t = null;
  let code = 0;
  const timer = setTimeout(() => {
    console.log(`UI-FAIL: ${name}: the browser test did not finish within ${opts.timeoutMs || 90000} ms`);
    process.exit(1);
  }, opts.timeoutMs || 90000);
  try {
    t = await launch(name, opts);
    await body(t);
    t.checkClean();
    console.log(`UI-OK ${name}`);
  } catch (e) {
    code = 1;
    if (t) {
      try { await t.shot(`${name}-fail`); } catch { /* the page is gone */ }
      console.log("--- browser console (last 30):\n" + t.consoleLines.slice(-30).join("\n"));
      if (t.problems.length) console.log("--- browser problems:\n" + t.problems.join("\n"));
    }
    if (!(e instanceof UiFail)) console.log(e && e.stack ? e.stack : String(e));
    console.log(`UI-FAIL: ${name}: ${e && e.message ? e.message : e}`);
  } finally {
    clearTimeout(timer);
    if (t) await t.close();
  }
  process.exit(code);
}

// -- the page's parts (selectors of the brief) --------------------------------

// Opens the chat of sid through its hash route and waits for the
// connection to be live.
// A fresh load each time: a hash change alone would leave the previous
// session's state on screen while the harness looks for the new one.
export async function openChat(t, sid, view = "chat") {
  if (t.page.url() !== "about:blank") {
    t.allowAborts();
    await t.page.goto("about:blank");
  }
  await t.goto(`/ui/#/s/${encodeURIComponent(sid)}/${view}`);
  await waitLive(t);
}

export async function waitLive(t, timeoutMs = 15000) {
  await t.waitFn("#conn-status live", () => {
    const s = document.querySelector("#conn-status");
    return s && s.getAttribute("data-state") === "live";
  }, null, timeoutMs);
}

// Types text into #chat-input and presses Enter.
export async function sendChat(t, text) {
  await t.waitSel("#chat-input");
  await t.page.focus("#chat-input");
  await t.page.keyboard.type(text);
  await t.page.keyboard.press("Enter");
}

// Records every data-state #conn-status takes (in window.__connStates).
export async function watchConnStates(t) {
  await t.page.evaluate(() => {
    const s = document.querySelector("#conn-status");
    window.__connStates = [s.getAttribute("data-state")];
    new MutationObserver(() => {
      const v = s.getAttribute("data-state");
      if (window.__connStates[window.__connStates.length - 1] !== v) window.__connStates.push(v);
    }).observe(s, { attributes: true, attributeFilter: ["data-state"] });
  });
}

// What would show that model, tool or thought text ran as markup.
export async function xssFindings(t) {
  return t.page.evaluate(() => {
    const out = [];
    if (typeof window.__xss !== "undefined") out.push(`window.__xss is ${String(window.__xss)}`);
    for (const root of ["#chat-log", "#thought-graph", "#actions", "#roster", "#audit-table", "#pending-approvals"]) {
      const r = document.querySelector(root);
      if (!r) continue;
      for (const el of r.querySelectorAll("img, script, iframe, object, embed"))
        out.push(`<${el.tagName.toLowerCase()}> element inside ${root}`);
    }
    for (const el of document.querySelectorAll("*")) {
      for (const a of el.getAttributeNames())
        if (/^on/i.test(a)) out.push(`${el.tagName.toLowerCase()} has an ${a} attribute`);
    }
    return out;
  });
}

// -- other clients of the session (an external agent, another user) ---------


let socketIds = 0;

// A WebSocket to /sessions/{sid}/stream as query (e.g. "role=agent&agentId=a1");
// send(msg) resolves the ack or error that answers it.
export async function socket(sid, query, token = TOKEN) {
  const url = BASE.replace(/^http/, "ws") + `/sessions/${encodeURIComponent(sid)}/stream?${query}`;
  const opts = token ? { headers: { Authorization: "Bearer " + token } } : {};
  const ws = new WebSocket(url, opts);
  const waiting = new Map();
  await new Promise((res, rej) => {
    ws.once("open", res);
    ws.once("error", rej);
  });
  ws.on("message", (m) => {
    let ev;
    try { ev = JSON.parse(m.toString()); } catch { return; }
    if ((ev.type === "ack" || ev.type === "error") && ev.id && waiting.has(ev.id)) {
      waiting.get(ev.id)(ev);
      waiting.delete(ev.id);
    }
  });
  return {
    ws,
    send(msg) {
      // ids are per session, whoever sends them: unique across sockets
      const id = msg.id || `h-${process.pid}-${++socketIds}`;
      const full = { v: 1, sessionId: sid, ...msg, id };
      return new Promise((res, rej) => {
        const timer = setTimeout(() => rej(new UiFail(`no answer to ${full.type} ${id}`)), 10000);
        waiting.set(id, (ev) => { clearTimeout(timer); res(ev); });
        ws.send(JSON.stringify(full));
      });
    },
    close() { ws.close(); },
  };
}

// Sends msg on s and fails unless it is acknowledged.
export async function sendAcked(s, msg) {
  const a = await s.send(msg);
  check(a.type === "ack" && !a.duplicate, () => `${msg.type} -> ${JSON.stringify(a)}`);
  return a;
}
