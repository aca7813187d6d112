// The page: the session list, the token dialog, the router (#/s/ID/VIEW)
// and, for the selected session, one Conn shared by the four views.

import { h, clear } from "./dom.js";
import { api, getToken, setToken, onAuthNeeded } from "./api.js";
import { Conn } from "./conn.js";
import * as chat from "./chat.js";
import * as team from "./team.js";
import * as dash from "./dash.js";
import * as knowledge from "./knowledge.js";

const VIEWS = { chat, team, dashboard: dash, knowledge };
const RECENT_KEY = "parley.recent";
const RECENT_MAX = 20;
const ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
const LIST_EVERY_MS = 15000;	// the list's statuses, while the tab is seen

const $ = (id) => document.getElementById(id);
const STATE_TEXT = { connecting: "connecting…", live: "live",
  reconnecting: "reconnecting…", closed: "offline" };

let current = null;	// {sessionId, conn, views: {name: {api, root}}}

function recent() {
  try {
    const v = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
    return Array.isArray(v) ? v.filter((s) => typeof s === "string" && ID_RE.test(s)) : [];
  } catch { return []; }
}

function remember(id) {
  const list = [id, ...recent().filter((s) => s !== id)].slice(0, RECENT_MAX);
  try { localStorage.setItem(RECENT_KEY, JSON.stringify(list)); } catch { /* private mode */ }
}

function parseHash() {
  const m = /^#\/s\/([^/]+)(?:\/(chat|team|dashboard|knowledge))?$/.exec(location.hash);
  if (!m) return null;
  let id;
  try { id = decodeURIComponent(m[1]); } catch { return null; }
  return ID_RE.test(id) ? { id, view: m[2] || "chat" } : null;
}

function navigate(hash) {
  if (location.hash !== hash) location.hash = hash;
  else route();
}

// The list: the server's (sessions this token may see, when it answers)
// and the ones this browser opened, by id.  quiet: a periodic refresh,
// which neither asks for a token nor moves the keyboard focus.
async function renderSessions(quiet) {
  const list = $("session-list");
  const note = $("sessions-note");
  let server = [];
  try {
    const r = await api("GET", "/sessions", undefined, { quiet });
    server = Array.isArray(r && r.sessions) ? r.sessions : [];
    note.textContent = r && r.truncated ? "the server's list was cut short" : "";
  } catch (e) {
    note.textContent = e.status === 401 ? "enter a token to list sessions" :
      e.status === 405 || e.status === 404 ? "" : "cannot list sessions: " + e.message;
  }
  const seen = new Map();
  for (const s of server)
    if (s && typeof s.sessionId === "string" && ID_RE.test(s.sessionId)) seen.set(s.sessionId, s);
  for (const id of recent()) if (!seen.has(id)) seen.set(id, { sessionId: id });
  const ids = [...seen.keys()].sort();
  const sel = current && current.sessionId;
  const focused = list.contains(document.activeElement) ?
    document.activeElement.dataset.sessionId : null;
  // The same sessions as shown: their badges change, nothing else.
  const shown = [...list.querySelectorAll("a[data-session-id]")];
  if (shown.length === ids.length && shown.every((a, k) => a.dataset.sessionId === ids[k])) {
    shown.forEach((a, k) => {
      const s = seen.get(ids[k]);
      if (s.sessionId === sel) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
      const old = a.querySelector(".badge");
      if (old) old.remove();
      if (s.status) a.appendChild(badge(s.status));
    });
    return;
  }
  clear(list);
  for (const id of ids) {
    const s = seen.get(id);
    list.appendChild(h("li", null, h("a", {
      attrs: { href: "#/s/" + encodeURIComponent(id) + "/chat",
        "aria-current": id === sel ? "page" : null },
      dataset: { sessionId: id },
    }, h("span", { class: "sid" }, id), s.status ? badge(s.status) : null)));
  }
  if (!ids.length) list.appendChild(h("li", { class: "muted small" }, "no sessions yet"));
  if (focused) {
    const a = list.querySelector('a[data-session-id="' + CSS.escape(focused) + '"]');
    if (a) a.focus();
  }
}

function badge(status) {
  return h("span", { class: "badge st-" + String(status).replace(/[^a-z]/g, "") }, status);
}

async function openNew(ev) {
  ev.preventDefault();
  const input = $("session-id-input");
  const id = input.value.trim();
  if (id && !ID_RE.test(id)) {
    input.setCustomValidity("1-128 characters of A-Z a-z 0-9 . _ : -");
    input.reportValidity();
    return;
  }
  input.setCustomValidity("");
  let sid = id;
  if (!sid) {
    try {
      const r = await api("POST", "/sessions", {});
      sid = r.sessionId;
    } catch (e) {
      $("sessions-note").textContent = "cannot create a session: " + e.message;
      return;
    }
  }
  input.value = "";
  navigate("#/s/" + encodeURIComponent(sid) + "/chat");
}

function closeSession() {
  if (!current) return;
  for (const v of Object.values(current.views)) {
    try { v.api.destroy(); } catch (e) { console.error(e); }
    v.root.remove();
  }
  current.conn.close();
  current = null;
}

function openSession(id) {
  closeSession();
  remember(id);
  $("welcome").hidden = true;
  const conn = new Conn({ sessionId: id });
  const views = {};
  current = { sessionId: id, conn, views };
  for (const [name, mod] of Object.entries(VIEWS)) {
    const root = h("section", { id: "view-" + name, class: "view", hidden: true,
      attrs: { "aria-label": name } });
    $("main").appendChild(root);
    let viewApi = { show() {}, hide() {}, destroy() {} };
    try {
      viewApi = mod.create({ sessionId: id, conn, root, api, token: getToken, navigate }) || viewApi;
    } catch (e) {
      root.appendChild(h("p", { class: "error-banner" }, "this view failed to start: " + e.message));
      console.error(e);
    }
    views[name] = { api: viewApi, root };
  }
  conn.onState((s) => {
    const el = $("conn-status");
    el.dataset.state = s;
    el.textContent = STATE_TEXT[s] || s;
  });
  $("session-title").textContent = id;
  document.title = id + " · Parley";
  conn.connect();
}

function show(view) {
  for (const [name, v] of Object.entries(current.views)) {
    const on = name === view;
    if (on === !v.root.hidden) continue;
    v.root.hidden = !on;
    try { on ? v.api.show() : v.api.hide(); } catch (e) { console.error(e); }
  }
  for (const a of document.querySelectorAll("nav.views a")) {
    a.setAttribute("href", "#/s/" + encodeURIComponent(current.sessionId) + "/" + a.dataset.view);
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function route() {
  const r = parseHash();
  if (!r) {
    closeSession();
    $("welcome").hidden = false;
    $("session-title").textContent = "";
    const el = $("conn-status");
    el.dataset.state = "closed";
    el.textContent = STATE_TEXT.closed;
    document.title = "Parley";
    renderSessions();
    return;
  }
  if (!current || current.sessionId !== r.id) {
    openSession(r.id);
    renderSessions();
  }
  show(r.view);
}

function askToken(why) {
  const dlg = $("token-dialog");
  $("token-why").textContent = why || "";
  if (!dlg.open) dlg.showModal();
  $("token-input").focus();
}

function init() {
  $("new-session-form").addEventListener("submit", openNew);
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token-input").value.trim();
    if (!t) return;
    setToken(t);
    $("token-input").value = "";
    $("token-dialog").close();
    if (current) current.conn.restart();
    renderSessions();
  });
  onAuthNeeded((msg) => askToken(msg));
  window.addEventListener("hashchange", route);
  setInterval(() => { if (!document.hidden) renderSessions(true); }, LIST_EVERY_MS);
  route();
}

init();
