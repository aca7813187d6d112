// The team view: roster, thought graph, actions, directives.
//
// Model first: every event updates plain objects (cheap, also while the view
// is hidden); the DOM is brought up to date in one animation frame
// (schedule) and only while the view is shown.  Text from agents, tools and
// people reaches the DOM only as text (h() children, textContent).

import { h, clear, schedule, fmtTime, fmtDuration } from "./dom.js";
import { ThoughtGraph, CATEGORIES, categoryClass, confidenceText } from "./graph.js";

const MAX_DRAWN = 300;        // thoughts drawn in the graph
const MAX_DIRECTIVES = 100;   // directives listed
const MAX_ACTIONS = 200;      // finished actions listed (pending always are)

const FINAL = new Set(["done", "rejected", "expired"]);
const RANK = { proposed: 0, approved: 1, executing: 2, done: 3, rejected: 3, expired: 3 };

let instances = 0;

function str(v) {
  return typeof v === "string" ? v : v == null ? "" : String(v);
}

function json(v) {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

function safeUrl(s) {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

export function create(ctx) {
  const uid = ++instances;
  const { conn, sessionId } = ctx;

  // ---- model ----
  const agents = new Map();   // agentId -> {agentId, name, role, provider, model, tools, status, lead, kind, required}
  let strategy = null;
  let lead = null;
  const thoughts = new Map(); // thoughtId -> thought (+ agentId, seq, ts)
  let order = [];             // thoughts in arrival order
  const replies = new Map();  // thoughtId -> [thoughtIds responding to it]
  const actions = new Map();  // actionId -> {...}
  let actionOrder = [];
  const directives = [];
  const sent = new Map();     // client message id -> {kind, actionId?}
  const timers = new Set();

  let visible = false;
  let destroyed = false;
  let fetched = false;
  let selected = null;
  const dirty = { roster: false, graph: false, detail: false, actions: new Set(), actionsAll: false, directives: false, notice: false, ended: false };
  let notice = null;          // {text, error}
  let detailKey = null;       // what the side panel shows
  let ended = false;          // session_complete seen: nothing more is taken

  // ---- DOM skeleton ----
  const rosterEl = h("ul", { id: "roster", class: "team-roster", attrs: { "aria-label": "Agents" } });
  const strategyEl = h("p", { class: "team-strategy muted" });
  const graphEl = h("div", { id: "thought-graph", class: "team-graph", attrs: { tabindex: "-1" } });
  const graphNote = h("p", { class: "team-graph-note muted", attrs: { "aria-live": "polite" } });
  const zoomText = h("span", { class: "tg-zoom-level muted", attrs: { "aria-live": "polite" } }, "100%");
  const zoomBar = h("div", { class: "tg-zoom", attrs: { role: "group", "aria-label": "Zoom" } },
    h("button", { attrs: { type: "button", title: "Zoom out", "aria-label": "Zoom out" }, dataset: { zoom: "out" }, text: "\u2212" }),
    zoomText,
    h("button", { attrs: { type: "button", title: "Zoom in", "aria-label": "Zoom in" }, dataset: { zoom: "in" }, text: "+" }),
    h("button", { attrs: { type: "button", title: "Actual size" }, dataset: { zoom: "reset" }, text: "1:1" }));
  const thoughtCount = h("span", { class: "team-count muted" });
  const detailEl = h("aside", { id: "thought-detail", class: "team-detail", attrs: { "aria-live": "polite", "aria-label": "Selected thought" } });
  const actionsEl = h("ul", { id: "actions", class: "team-actions", attrs: { "aria-label": "Actions" } });
  const actionsCount = h("span", { class: "team-count muted" });
  const dirInput = h("textarea", {
    id: "directive-input", class: "team-directive-input",
    attrs: { rows: "2", maxlength: "4096", placeholder: "Guidance for every agent (Enter sends, Shift+Enter new line)" },
  });
  const dirSend = h("button", { id: "directive-send", class: "team-directive-send", attrs: { type: "button" }, text: "Send directive" });
  const dirStatus = h("p", { class: "team-directive-status muted", attrs: { role: "status" } });
  const dirList = h("ol", { id: "directive-list", class: "team-directives", attrs: { "aria-label": "Directives" } });

  const legend = h("ul", { class: "tg-legend", attrs: { "aria-label": "Categories" } },
    CATEGORIES.map((c) => h("li", { class: categoryClass(c) }, h("span", { class: "tg-swatch", attrs: { "aria-hidden": "true" } }), c)),
    h("li", { class: "tg-legend-conf" }, h("span", { class: "tg-legend-bar", attrs: { "aria-hidden": "true" } }), "confidence"),
    h("li", { class: "tg-legend-ref" }, h("span", { class: "tg-legend-dash", attrs: { "aria-hidden": "true" } }), "reference"));

  const graph = new ThoughtGraph({
    maxNodes: MAX_DRAWN,
    agentLabel: (id) => agentName(id),
    onSelect: (id) => selectThought(id),
  });
  graphEl.append(graph.el);

  const view = h("div", { class: "team-view" }, h("div", { class: "team-view-in" },
    h("div", { class: "team-side" },
      h("section", { class: "team-panel team-roster-panel", attrs: { "aria-labelledby": `team-roster-h-${uid}` } },
        h("h2", { id: `team-roster-h-${uid}` }, "Team"), strategyEl, rosterEl),
      h("section", { class: "team-panel team-directive-panel", attrs: { "aria-labelledby": `team-dir-h-${uid}` } },
        h("h2", { id: `team-dir-h-${uid}` }, "Directives"),
        h("label", { class: "sr-only", attrs: { for: "directive-input" } }, "Directive"),
        dirInput,
        h("div", { class: "team-row" }, dirSend),
        dirStatus, dirList),
      h("section", { class: "team-panel team-actions-panel", attrs: { "aria-labelledby": `team-act-h-${uid}` } },
        h("h2", { id: `team-act-h-${uid}` }, "Actions ", actionsCount), actionsEl)),
    h("div", { class: "team-main" },
      h("section", { class: "team-panel team-graph-panel", attrs: { "aria-labelledby": `team-graph-h-${uid}` } },
        h("div", { class: "team-graph-head" },
          h("h2", { id: `team-graph-h-${uid}` }, "Thoughts ", thoughtCount), zoomBar, legend),
        graphNote, graphEl),
      detailEl)));
  ctx.root.classList.add("team-root");
  ctx.root.append(view);
  renderDetail();

  // ---- helpers ----
  function agentName(id) {
    const a = agents.get(id);
    return (a && a.name) || id || "?";
  }

  function want(part) {
    if (part) dirty[part] = true;
    if (visible && !destroyed) schedule(`team-${uid}`, flush);
  }

  function touchAction(id) {
    dirty.actions.add(id);
    want(null);
  }

  function upsertAgent(src, extra) {
    if (!src || typeof src.agentId !== "string") return null;
    const id = src.agentId;
    const a = agents.get(id) || { agentId: id };
    for (const k of ["name", "role", "roles", "provider", "model", "tools", "status", "kind", "required", "goal", "domain"]) {
      if (src[k] !== undefined) a[k] = src[k];
    }
    if (src.lead === true) a.lead = true;
    Object.assign(a, extra || {});
    agents.set(id, a);
    return a;
  }

  // ---- events ----
  function onSessionState(ev) {
    if (ev.status === "completed" || ev.status === "failed") setEnded();
    if (Array.isArray(ev.agents)) {
      const seen = new Set();
      for (const a of ev.agents) {
        const x = upsertAgent(a);
        if (x) {
          seen.add(x.agentId);
          x.lead = a.lead === true;
        }
      }
      // The server's roster is the truth at connect: forget agents it no
      // longer lists (removed while we were away).
      for (const id of [...agents.keys()]) if (!seen.has(id)) agents.delete(id);
      if (typeof ev.strategy === "string") strategy = ev.strategy;
      want("roster");
    }
    if (Array.isArray(ev.pendingActions)) {
      for (const p of ev.pendingActions) {
        if (!p || typeof p.actionId !== "string") continue;
        const phase = p.phase === "approved" || p.phase === "executing" ? p.phase : "proposed";
        const a = actionFrom(p, phase);
        if (typeof p.agentId === "string") a.proposer = p.agentId;   // as in action_proposed
        if (Array.isArray(p.approvals)) a.approvals = p.approvals.slice();
        if (p.expiresAt) a.expiresAt = p.expiresAt;
        if (typeof p.ts === "number") a.ts = p.ts;
        a.busy = false;
        touchAction(a.actionId);
      }
    }
  }

  function onTeamUpdate(ev) {
    if (!Array.isArray(ev.agents)) return;
    const listed = new Set();
    for (const a of ev.agents) {
      const x = upsertAgent(a);
      if (x) {
        listed.add(x.agentId);
        if (!x.status) x.status = "idle";
        if (x.kind === "external") delete x.kind;
      }
    }
    // Internal agents not in the roster any more were removed.
    for (const [id, a] of agents) {
      if (a.kind !== "external" && !listed.has(id)) agents.delete(id);
    }
    if (typeof ev.strategy === "string") strategy = ev.strategy;
    if (typeof ev.lead === "string") lead = ev.lead;
    for (const a of agents.values()) {
      if (a.kind !== "external") a.lead = lead ? a.agentId === lead : !!a.lead;
    }
    dirty.graph = true;        // names may have changed
    want("roster");
  }

  function onAgentState(ev) {
    const a = upsertAgent(ev);
    if (a && a.kind === undefined) a.kind = "internal";
    want("roster");
  }

  function onPresence(ev, joined) {
    if (typeof ev.agentId !== "string") return;
    const a = agents.get(ev.agentId) || { agentId: ev.agentId };
    if (a.kind === undefined || a.kind === "external") {
      a.kind = "external";
      a.status = joined ? "connected" : "disconnected";
    }
    if (ev.required !== undefined) a.required = ev.required;
    if (ev.reconnected) a.reconnected = true;
    agents.set(ev.agentId, a);
    want("roster");
  }

  function addThought(t, agentId, seq, ts) {
    if (!t || typeof t.thoughtId !== "string") return false;
    const old = thoughts.get(t.thoughtId);
    if (old) {
      // Same thought again: /thoughts then the event (keep the fuller copy),
      // or an internal agent's reasoning block logged again when its
      // interrupted turn re-ran (same thoughtId, later seq: the new text).
      if ((old.redacted && !t.redacted) || (typeof seq === "number" && typeof old.seq === "number" && seq > old.seq)) {
        Object.assign(old, t, { redacted: !!t.redacted, seq });
        if (ts) old.ts = ts;
        return true;
      }
      return false;
    }
    const x = Object.assign({}, t);
    x.agentId = agentId || t.agentId || "?";
    if (typeof seq === "number") x.seq = seq;
    if (ts) x.ts = ts;
    thoughts.set(x.thoughtId, x);
    order.push(x);
    if (typeof x.inResponseTo === "string") {
      let r = replies.get(x.inResponseTo);
      if (!r) replies.set(x.inResponseTo, (r = []));
      r.push(x.thoughtId);
    }
    return true;
  }

  function onThought(ev, meta) {
    if (addThought(ev.thought, ev.agentId, ev.seq, ev.ts)) {
      // A thought that arrives live is marked once when drawn; the past,
      // replayed, is not.
      if (!meta.replay && visible) thoughts.get(ev.thought.thoughtId).fresh = true;
      if (selected && ev.thought.inResponseTo === selected) dirty.detail = true;
      want("graph");
    }
  }

  function actionFrom(ev, state) {
    const id = ev.actionId;
    let a = actions.get(id);
    if (!a) {
      a = { actionId: id, state: "proposed", approvals: [] };
      actions.set(id, a);
      actionOrder.push(id);
    }
    if (ev.action && typeof ev.action === "object") a.action = Object.assign({}, a.action, ev.action);
    if (state === "proposed" && typeof ev.agentId === "string") a.proposer = ev.agentId;
    if (typeof ev.proposer === "string") a.proposer = ev.proposer;
    if (typeof ev.needsHuman === "boolean") a.needsHuman = ev.needsHuman;
    if (typeof ev.expiresAt === "string") a.expiresAt = ev.expiresAt;
    if (state && RANK[state] >= RANK[a.state] && !FINAL.has(a.state)) a.state = state;
    return a;
  }

  function onAction(ev) {
    if (typeof ev.actionId !== "string") return;
    let a;
    switch (ev.type) {
      case "action_proposed":
        a = actionFrom(ev, "proposed");
        if (!a.ts && ev.ts) a.ts = ev.ts;
        break;
      case "action_approved":
        a = actionFrom(ev, "approved");
        if (Array.isArray(ev.approvals)) a.approvals = ev.approvals.slice();
        a.approvedBy = ev.approverId ? `${ev.by || "agent"} ${ev.approverId}` : ev.by;
        a.busy = false;
        break;
      case "action_execute":
        a = actionFrom(ev, "executing");
        if (typeof ev.agentId === "string") a.executor = ev.agentId;
        break;
      case "action_result":
        a = actionFrom(ev, "done");
        if (typeof ev.agentId === "string") a.executor = ev.agentId;
        if (ev.error !== undefined) a.error = ev.error;
        if (ev.result !== undefined) a.result = ev.result;
        if (typeof ev.duration === "number") a.duration = ev.duration;
        break;
      case "action_rejected":
        a = actionFrom(ev, "rejected");
        a.rejectedBy = ev.approverId ? `${ev.by || "agent"} ${ev.approverId}` : ev.by;
        if (ev.reason) a.reason = ev.reason;
        a.busy = false;
        break;
      case "action_expired":
        a = actionFrom(ev, "expired");
        a.expiredPhase = ev.phase;
        a.timeoutMs = ev.timeoutMs;
        a.busy = false;
        break;
      case "audit_entry": {
        // An agent's approval that waits for a person.
        a = actions.get(ev.actionId);
        if (!a) return;
        const key = ev.approverId ? `agent:${ev.approverId}` : null;
        if (key && !a.approvals.includes(key)) a.approvals.push(key);
        if (ev.awaiting === "human") a.needsHuman = true;
        break;
      }
      default:
        return;
    }
    touchAction(a.actionId);
  }

  function setEnded() {
    if (ended) return;
    ended = true;
    dirty.actionsAll = true;
    want("ended");
  }

  function onDirective(ev) {
    directives.push({ message: str(ev.message), from: str(ev.from), ts: ev.ts, seq: ev.seq });
    if (directives.length > MAX_DIRECTIVES) directives.splice(0, directives.length - MAX_DIRECTIVES);
    want("directives");
  }

  function onReply(ev) {
    // ack / error answering one of our own messages.
    const m = typeof ev.id === "string" ? sent.get(ev.id) : null;
    if (!m) return;
    sent.delete(ev.id);
    if (ev.type === "error") {
      const text = `${str(ev.code)}: ${str(ev.message)}`;
      if (m.kind === "directive") {
        notice = { text: `Directive not sent \u2014 ${text}. Edit it and send again.`, error: true };
        if (!dirInput.value && m.message) dirInput.value = m.message;
        want("notice");
      } else if (m.actionId) {
        const a = actions.get(m.actionId);
        if (a) {
          a.busy = false;
          a.err = `${text}${ev.code === "FORBIDDEN" ? " (this token may not answer actions)" : ""}`;
          touchAction(a.actionId);
        }
      }
    } else if (ev.type === "ack") {
      if (m.kind === "directive") {
        notice = { text: "Directive sent.", error: false };
        want("notice");
      } else if (m.actionId && ev.duplicate) {
        // The Conn sends a message again after a drop until it is
        // acknowledged; "duplicate" then means the first one was applied:
        // this page's answer, not someone else's.  The action's own
        // events say what became of it.
        const a = actions.get(m.actionId);
        if (a) {
          a.busy = false;
          touchAction(a.actionId);
        }
      }
    }
  }

  const handlers = {
    session_state: onSessionState,
    team_update: onTeamUpdate,
    agent_state: onAgentState,
    agent_joined: (ev) => onPresence(ev, true),
    agent_left: (ev) => onPresence(ev, false),
    thought: onThought,
    action_proposed: onAction,
    action_approved: onAction,
    action_execute: onAction,
    action_result: onAction,
    action_rejected: onAction,
    action_expired: onAction,
    audit_entry: (ev) => { if (typeof ev.actionId === "string") onAction(ev); },
    directive: onDirective,
    session_complete: setEnded,
    ack: onReply,
    error: onReply,
  };
  const unsubs = [];
  for (const [type, fn] of Object.entries(handlers)) {
    const u = conn.on(type, (ev, meta) => {
      if (!destroyed && ev && typeof ev === "object") fn(ev, meta || {});
    });
    if (typeof u === "function") unsubs.push(u);
  }

  // ---- user input ----
  function sendDirective() {
    const message = dirInput.value.trim();
    if (!message) {
      notice = { text: "Write a directive first.", error: true };
      want("notice");
      dirInput.focus();
      return;
    }
    const id = conn.send({ type: "directive", message });
    if (typeof id !== "string") {
      // The Conn's queue is full (the server has been away a while).
      notice = { text: "Not sent: too many messages are waiting for the server. Try again once connected.", error: true };
      want("notice");
      return;
    }
    sent.set(id, { kind: "directive", message });
    dirInput.value = "";
    notice = { text: "Sending\u2026", error: false };
    want("notice");
  }

  function answerAction(actionId, decision) {
    const a = actions.get(actionId);
    if (!a || a.state !== "proposed" || a.busy) return;
    const msg = { type: "action_approve", actionId };
    if (decision === "reject") msg.decision = "reject";
    const id = conn.send(msg);
    if (typeof id !== "string") return;   // not queued; the Conn said why
    sent.set(id, { kind: "action", actionId });
    a.busy = true;
    a.err = null;
    touchAction(actionId);
    // No answer at all (a connection that stays down): let the person retry.
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (destroyed || !a.busy || a.state !== "proposed") return;
      a.busy = false;
      a.err = "No answer from the server yet; try again once connected.";
      touchAction(actionId);
    }, 20000);
    timers.add(timer);
  }

  const onDirKey = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      sendDirective();
    }
  };
  const onDirClick = () => sendDirective();
  const onActionClick = (e) => {
    const b = e.target.closest && e.target.closest("button[data-act]");
    if (!b || !actionsEl.contains(b)) return;
    const li = b.closest(".action[data-action-id]");
    if (li) answerAction(li.dataset.actionId, b.dataset.act);
  };
  const onDetailClick = (e) => {
    const b = e.target.closest && e.target.closest("button[data-ref]");
    if (b && detailEl.contains(b)) {
      selectThought(b.dataset.ref);
      graph.focus(b.dataset.ref);
    }
  };
  const onZoom = (e) => {
    const b = e.target.closest && e.target.closest("button[data-zoom]");
    if (!b) return;
    const z = b.dataset.zoom === "in" ? graph.zoom * 1.25 : b.dataset.zoom === "out" ? graph.zoom / 1.25 : 1;
    zoomText.textContent = `${Math.round(graph.setZoom(z) * 100)}%`;
  };
  zoomBar.addEventListener("click", onZoom);
  dirInput.addEventListener("keydown", onDirKey);
  dirSend.addEventListener("click", onDirClick);
  actionsEl.addEventListener("click", onActionClick);
  detailEl.addEventListener("click", onDetailClick);

  function selectThought(id) {
    selected = thoughts.has(id) ? id : null;
    graph.select(selected);
    want("detail");
  }

  // ---- rendering ----
  function flush() {
    if (destroyed || !visible) return;
    if (dirty.roster) { dirty.roster = false; renderRoster(); }
    if (dirty.graph) { dirty.graph = false; renderGraph(); }
    if (dirty.detail) { dirty.detail = false; renderDetail(); }
    if (dirty.actionsAll || dirty.actions.size) renderActions();
    if (dirty.directives) { dirty.directives = false; renderDirectives(); }
    if (dirty.notice) { dirty.notice = false; renderNotice(); }
    if (dirty.ended) {
      dirty.ended = false;
      dirInput.disabled = dirSend.disabled = ended;
      if (ended) {
        notice = { text: "The session has ended: it takes no more directives or answers.", error: false };
        renderNotice();
      }
    }
  }

  function renderRoster() {
    strategyEl.textContent = strategy ? `Strategy: ${strategy}` : "";
    const els = new Map();
    for (const li of rosterEl.children) els.set(li.dataset.agentId, li);
    const list = [...agents.values()].sort((a, b) =>
      (b.lead ? 1 : 0) - (a.lead ? 1 : 0) ||
      (a.kind === "external" ? 1 : 0) - (b.kind === "external" ? 1 : 0));
    const keep = new Set();
    let prev = null;
    for (const a of list) {
      keep.add(a.agentId);
      const k = agentKey(a);
      let li = els.get(a.agentId);
      if (!li || li.tmKey !== k) {
        const fresh = agentItem(a);
        fresh.tmKey = k;
        if (li) {
          // Keep an opened tool list open.
          const d = li.querySelector("details.agent-tools");
          const nd = fresh.querySelector("details.agent-tools");
          if (d && nd && d.open) nd.open = true;
          li.replaceWith(fresh);
        }
        li = fresh;
      }
      if (prev ? prev.nextSibling !== li : rosterEl.firstChild !== li) {
        if (prev) prev.after(li); else rosterEl.prepend(li);
      }
      prev = li;
    }
    for (const [id, li] of els) if (!keep.has(id)) li.remove();
    if (!list.length) rosterEl.append(h("li", { class: "muted team-empty" }, "No agents yet."));
    else for (const li of [...rosterEl.children]) if (!li.dataset.agentId) li.remove();
  }

  function agentKey(a) {
    return JSON.stringify([a.name, a.role, a.provider, a.model, a.tools, a.status, a.lead, a.kind, a.required]);
  }

  function agentItem(a) {
    const status = a.status || "idle";
    const meta = [];
    if (a.role) meta.push(a.role);
    if (a.provider) meta.push(a.provider + (a.model ? ` \u00b7 ${a.model}` : ""));
    else if (a.model) meta.push(a.model);
    if (a.kind === "external") meta.push(a.required ? "external, required" : "external");
    const tools = Array.isArray(a.tools) ? a.tools.filter((t) => typeof t === "string") : [];
    return h("li", {
      class: `agent status-${status.replace(/[^a-z_]/gi, "")}` + (a.lead ? " lead" : "") + (a.kind === "external" ? " external" : ""),
      dataset: { agentId: a.agentId, status, kind: a.kind === "external" ? "external" : "internal" },
    },
      h("div", { class: "agent-head" },
        h("span", { class: "agent-dot", attrs: { "aria-hidden": "true" } }),
        h("span", { class: "agent-name", attrs: { title: a.agentId } }, a.name || a.agentId),
        a.lead ? h("span", { class: "badge agent-lead" }, "lead") : null,
        h("span", { class: "agent-status" }, status.replace("_", " "))),
      meta.length ? h("div", { class: "agent-meta muted" }, meta.join(" \u00b7 ")) : null,
      tools.length ? h("details", { class: "agent-tools" },
        h("summary", null, `${tools.length} tool${tools.length === 1 ? "" : "s"}`),
        h("ul", null, tools.map((t) => h("li", null, t)))) : null);
  }

  function renderGraph() {
    const { drawn, total } = graph.render(order);
    thoughtCount.textContent = total ? `(${total})` : "";
    graphNote.textContent = total === 0 ? "No thoughts yet." :
      drawn < total ? `Showing the last ${drawn} of ${total} thoughts.` : "";
    graphEl.classList.toggle("empty", total === 0);
    if (selected) dirty.detail = true;      // renderDetail skips an unchanged one
    if (dirty.detail) { dirty.detail = false; renderDetail(); }
  }

  function thoughtButton(id) {
    const t = thoughts.get(id);
    const label = t ? `${agentName(t.agentId)} \u00b7 ${t.category || "?"}: ${t.redacted ? "(redacted)" : str(t.content).slice(0, 80)}` : id;
    return h("button", { class: "td-ref " + (t ? categoryClass(t.category) : ""), attrs: { type: "button" }, dataset: { ref: id }, text: label });
  }

  function renderDetail() {
    const t = selected ? thoughts.get(selected) : null;
    // The same thought as shown: leave it (and the focus, and what a
    // screen reader is reading) alone.
    const key = t ? [t.thoughtId, t.seq, str(t.content).length, t.redacted ? 1 : 0,
      (replies.get(t.thoughtId) || []).length, agentName(t.agentId),
      (t.references || []).filter((r) => thoughts.has(r)).length,
      typeof t.inResponseTo === "string" && thoughts.has(t.inResponseTo) ? 1 : 0].join("\u0001") : "";
    if (key === detailKey && detailEl.firstChild) return;
    detailKey = key;
    const focused = detailEl.contains(document.activeElement) && document.activeElement.dataset ?
      document.activeElement.dataset.ref : null;
    clear(detailEl);
    if (focused) queueMicrotask(() => {
      const b = [...detailEl.querySelectorAll("button[data-ref]")].find((x) => x.dataset.ref === focused);
      if (b) b.focus();
    });
    if (!t) {
      detailEl.append(h("h2", null, "Thought"),
        h("p", { class: "muted" }, "Select a thought in the graph (click it, or focus it and press Enter) to read it in full."));
      return;
    }
    const conf = typeof t.confidence === "number" ? Math.max(0, Math.min(1, t.confidence)) : null;
    const bar = h("span", { class: "td-bar" }, h("span", { class: "td-bar-fill" }));
    if (conf !== null) bar.firstChild.style.width = `${Math.round(conf * 100)}%`;
    detailEl.append(
      h("h2", { class: "td-title" },
        h("span", { class: "tg-swatch " + categoryClass(t.category), attrs: { "aria-hidden": "true" } }),
        `${t.category || "?"} by ${agentName(t.agentId)}`),
      h("p", { class: "td-meta muted" },
        h("code", null, t.thoughtId),
        t.ts ? ` \u00b7 ${fmtTime(t.ts)}` : "",
        t.seq ? ` \u00b7 seq ${t.seq}` : "",
        t.actionable ? h("span", { class: "badge td-actionable" }, "actionable") : null),
      h("p", { class: "td-conf" }, "Confidence ", bar, " ", h("strong", null, confidenceText(t.confidence))),
      h("div", { class: "td-content" + (t.redacted ? " muted" : "") },
        t.redacted ? "(redacted: this session shares only conclusions)" : str(t.content)));
    if (typeof t.inResponseTo === "string") {
      detailEl.append(h("h3", null, "In response to"), h("p", null, thoughtButton(t.inResponseTo)));
    }
    const refs = Array.isArray(t.references) ? t.references.filter((r) => typeof r === "string") : [];
    if (refs.length) {
      detailEl.append(h("h3", null, "References"), h("ul", { class: "td-refs" }, refs.map((r) => {
        if (r.startsWith("th_")) return h("li", null, thoughts.has(r) ? thoughtButton(r) : h("code", null, r));
        const href = safeUrl(r);
        if (href) return h("li", null, h("a", { attrs: { href, rel: "noopener noreferrer", target: "_blank" } }, r));
        return h("li", null, h("code", null, r));
      })));
    }
    const rs = replies.get(t.thoughtId);
    if (rs && rs.length) {
      detailEl.append(h("h3", null, `Replies (${rs.length})`), h("ul", { class: "td-refs" }, rs.map((id) => h("li", null, thoughtButton(id)))));
    }
  }

  function renderActions() {
    const all = dirty.actionsAll;
    dirty.actionsAll = false;
    const ids = dirty.actions;
    dirty.actions = new Set();
    // Which actions are listed: every pending one, and the newest finished.
    let finished = 0;
    const shown = [];
    for (let i = actionOrder.length - 1; i >= 0; i--) {
      const a = actions.get(actionOrder[i]);
      if (FINAL.has(a.state)) {
        if (finished >= MAX_ACTIONS) continue;
        finished++;
      }
      shown.push(a);
    }
    const els = new Map();
    for (const li of actionsEl.children) if (li.dataset.actionId) els.set(li.dataset.actionId, li);
    const keep = new Set();
    let prev = null;
    for (const a of shown) {          // newest first
      keep.add(a.actionId);
      let li = els.get(a.actionId);
      if (!li || all || ids.has(a.actionId)) {
        const fresh = actionItem(a);
        const hadFocus = li && li.contains(document.activeElement);
        if (li) {
          for (const cls of ["action-params", "action-result"]) {
            const d = li.querySelector(`details.${cls}`), nd = fresh.querySelector(`details.${cls}`);
            if (d && nd) nd.open = d.open;
          }
          li.replaceWith(fresh);
        }
        li = fresh;
        if (hadFocus) {
          const b = li.querySelector("button:not([disabled])") || li;
          if (b === li) li.setAttribute("tabindex", "-1");
          b.focus();
        }
      }
      if (prev ? prev.nextSibling !== li : actionsEl.firstChild !== li) {
        if (prev) prev.after(li); else actionsEl.prepend(li);
      }
      prev = li;
    }
    for (const li of [...actionsEl.children]) {
      if (!li.dataset.actionId ? shown.length > 0 : !keep.has(li.dataset.actionId)) li.remove();
    }
    if (!shown.length && !actionsEl.firstChild) actionsEl.append(h("li", { class: "muted team-empty" }, "No actions proposed."));
    const pending = shown.filter((a) => a.state === "proposed").length;
    actionsCount.textContent = actions.size ? `(${pending} awaiting approval, ${actions.size} in all)` : "";
  }

  function actionItem(a) {
    const act = a.action || {};
    const risk = typeof act.risk === "string" ? act.risk : "medium";
    const executor = a.executor || act.executor;
    const stateText = {
      proposed: "awaiting approval", approved: "approved", executing: "executing",
      done: a.error !== undefined ? "failed" : "done", rejected: "rejected", expired: "expired",
    }[a.state];
    const li = h("li", {
      class: `action state-${a.state}` + (a.error !== undefined ? " failed" : ""),
      dataset: { actionId: a.actionId, state: a.state },
    },
      h("div", { class: "action-head" },
        h("span", { class: "action-type" }, str(act.type) || "action"),
        h("span", { class: `badge action-risk risk-${risk.replace(/[^a-z]/g, "")}` }, risk),
        h("span", { class: "badge action-state" }, stateText)),
      h("div", { class: "action-who muted" },
        `by ${agentName(a.proposer)}` + (executor && executor !== a.proposer ? ` \u2192 run by ${agentName(executor)}` : "") +
        (a.ts ? ` \u00b7 ${fmtTime(a.ts)}` : "")),
      act.description ? h("p", { class: "action-desc" }, str(act.description)) : null,
      act.params && typeof act.params === "object" && Object.keys(act.params).length ?
        h("details", { class: "action-params" }, h("summary", null, "Parameters"), h("pre", null, json(act.params))) : null);

    const notes = [];
    if (a.state === "proposed" && a.needsHuman) notes.push("needs a person's approval");
    if (!FINAL.has(a.state) && ended) notes.push("left unfinished when the session ended");
    if (a.approvals && a.approvals.length) notes.push("approved by " + a.approvals.join(", "));
    if (a.state === "rejected") notes.push(`rejected by ${a.rejectedBy || "?"}` + (a.reason ? `: ${a.reason}` : ""));
    if (a.state === "expired") notes.push(`expired waiting for ${a.expiredPhase === "execution" ? "its result" : "approval"}` +
      (a.timeoutMs ? ` (${fmtDuration(a.timeoutMs)})` : ""));
    if (!FINAL.has(a.state) && a.expiresAt && !ended) notes.push(`expires ${fmtTime(a.expiresAt)}`);
    if (notes.length) li.append(h("p", { class: "action-notes muted" }, notes.join(" \u00b7 ")));

    if (a.state === "done") {
      const isErr = a.error !== undefined;
      li.append(h("details", { class: "action-result" + (isErr ? " error" : ""), attrs: { open: "" } },
        h("summary", null, (isErr ? "Error" : "Result") + (typeof a.duration === "number" ? ` \u00b7 ${fmtDuration(a.duration)}` : "")),
        h("pre", null, json(isErr ? a.error : a.result))));
    }
    if (a.state === "proposed" && !ended) {
      li.append(h("div", { class: "action-buttons" },
        h("button", { class: "btn-approve", attrs: { type: "button", ...(a.busy ? { disabled: "" } : {}) }, dataset: { act: "approve" }, text: a.busy ? "Sending\u2026" : "Approve" }),
        h("button", { class: "btn-reject", attrs: { type: "button", ...(a.busy ? { disabled: "" } : {}) }, dataset: { act: "reject" }, text: "Reject" })));
    }
    if (a.err) li.append(h("p", { class: "action-err", attrs: { role: "alert" } }, a.err));
    return li;
  }

  function renderDirectives() {
    clear(dirList);
    for (let i = directives.length - 1; i >= 0; i--) {
      const d = directives[i];
      dirList.append(h("li", { class: "directive", dataset: d.seq ? { seq: String(d.seq) } : null },
        h("span", { class: "directive-meta muted" }, `${d.ts ? fmtTime(d.ts) + " \u00b7 " : ""}${d.from || "user"}`),
        h("span", { class: "directive-msg" }, d.message)));
    }
  }

  function renderNotice() {
    dirStatus.textContent = notice ? notice.text : "";
    dirStatus.classList.toggle("error", !!(notice && notice.error));
  }

  // The graph as the server has it: thoughts older than a trimmed log, or
  // seen by a page that joined late, come from GET .../thoughts.  Merged by
  // thoughtId, so the replayed events add nothing twice.
  async function fetchThoughts() {
    if (fetched || !ctx.api) return;
    fetched = true;
    let g;
    try {
      g = await ctx.api("GET", `/sessions/${encodeURIComponent(sessionId)}/thoughts`);
    } catch {
      return;     // the events are enough
    }
    if (destroyed || !g || !Array.isArray(g.nodes)) return;
    let added = false;
    for (const n of g.nodes) if (addThought(n, n.agentId, n.seq, n.ts)) added = true;
    if (added) {
      order = order.map((t, i) => [t, i]).sort((x, y) =>
        (x[0].seq ?? Infinity) - (y[0].seq ?? Infinity) || x[1] - y[1]).map((x) => x[0]);
      want("graph");
    }
  }

  return {
    show() {
      if (destroyed) return;
      visible = true;
      ctx.root.hidden = false;
      dirty.roster = dirty.graph = dirty.detail = dirty.directives = dirty.notice = dirty.ended = true;
      dirty.actionsAll = true;
      want(null);
      fetchThoughts();
    },
    hide() {
      visible = false;
      ctx.root.hidden = true;
    },
    destroy() {
      destroyed = true;
      visible = false;
      for (const u of unsubs) u();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      zoomBar.removeEventListener("click", onZoom);
      dirInput.removeEventListener("keydown", onDirKey);
      dirSend.removeEventListener("click", onDirClick);
      actionsEl.removeEventListener("click", onActionClick);
      detailEl.removeEventListener("click", onDetailClick);
      graph.destroy();
      clear(ctx.root);
    },
  };
}
