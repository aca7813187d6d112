// The chat view: messages, streamed replies as Markdown, tool cards,
// approval prompts, autonomy, cancel, usage per turn and errors.
//
// Every event updates a model first; the DOM is brought up to date at most
// once per animation frame (schedule), and only for the messages that
// changed.  Only the last WINDOW messages are built at first; older ones
// come with the "show earlier" button.  Text reaches the page as text nodes
// only (markdown.js builds nodes; tool and user text go through textContent).

import { h, clear, schedule, fmtTime, fmtDuration, fmtCost, fmtNumber } from "./dom.js";
import { authNeeded } from "./api.js";
import { MarkdownView } from "./markdown.js";
import { ragBlock } from "./ragview.js";

const WINDOW = 40;              // messages built when the view first paints
const MAX_BANNERS = 4;
const REPLAY_FIRST_MS = 300;    // first paint while the past is still replayed
const REPLAY_PAINT_MS = 1000;   // then at most one progress paint a second
const MAX_SHOWN_JSON = 20000;   // characters of tool args/result shown
const LEVELS = ["FULL_AUTO", "SUPERVISED", "CAUTIOUS", "MANUAL"];
const LEVEL_LABELS = {
  FULL_AUTO: "Full auto",
  SUPERVISED: "Supervised",
  CAUTIOUS: "Cautious",
  MANUAL: "Manual",
};

// What to do about an error, by code.
const HINTS = {
  RATE_LIMITED: "Wait a moment, then send again.",
  SESSION_ENDED: "This session has ended: start a new session.",
  UNAUTHORIZED: "Enter a valid access token.",
  FORBIDDEN: "Your token does not allow this: use a token with the right role or session scope.",
  LLM_ERROR: "The model provider failed: retry the message.",
  TOOL_ERROR: "The tool failed; the agent has the error and may try another way.",
  TOOL_TIMEOUT: "The tool took too long; the agent has been told. Retry if needed.",
  APPROVAL_TIMEOUT: "The approval was not answered in time; ask again.",
  BAD_REQUEST: "The page sent a message the server did not accept; reload the page.",
  PROTOCOL_MISMATCH: "The page and the server disagree on the protocol: reload the page.",
  NOT_FOUND: "It is gone or never existed: check the session, or reload.",
  SESSION_MISMATCH: "Open the session again from the list.",
  RESUME_GAP: "Older events were trimmed by retention; the transcript starts later.",
  AGENT_DISCONNECT: "An external agent dropped: wait for it to reconnect, or cancel.",
  OVERLOADED: "The server is busy: retry in a few seconds.",
  INTERNAL: "If the turn carries on (it is re-run after a worker stopped) there is nothing to do; otherwise retry, and check the server log if it happens again.",
};

// agent_state statuses of a turn at work (an external agent's own
// statuses, such as connected, are not), as the status line says them.
const BUSY = new Map([
  ["thinking", "thinking…"],
  ["tool", "running a tool…"],
  ["waiting_approval", "waiting for approval"],
]);

let instances = 0;

function str(v) {
  return typeof v === "string" ? v : v == null ? "" : String(v);
}

// Pretty JSON of a value (a string holding JSON is parsed first), bounded.
function pretty(v) {
  let out;
  if (typeof v === "string") {
    const t = v.trim();
    if ((t.startsWith("{") && t.endsWith("}")) || (t.startsWith("[") && t.endsWith("]"))) {
      try {
        out = JSON.stringify(JSON.parse(t), null, 2);
      } catch {
        out = v;
      }
    } else {
      out = v;
    }
  } else if (v === undefined) {
    out = "";
  } else {
    try {
      out = JSON.stringify(v, null, 2);
    } catch {
      out = String(v);
    }
  }
  if (out.length > MAX_SHOWN_JSON)
    out = out.slice(0, MAX_SHOWN_JSON) + "\n… (" + num(out.length - MAX_SHOWN_JSON) +
      " more characters)";
  return out;
}

// A count with thousands separators; cheap (no Intl object per call), as
// it runs for every message's usage line.
function num(n) {
  return Number.isInteger(n) ? String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",") : fmtNumber(n);
}

function toolKey(ev) {
  return str(ev.messageId) + "|" + (ev.step == null ? "" : String(ev.step)) + "|" +
    str(ev.toolCallId);
}

export function create(ctx) {
  const inst = ++instances;
  const skey = (k) => "chat" + inst + ":" + k;
  const conn = ctx.conn;

  // ---- model ----
  const entries = [];             // the transcript, in order
  const byMessage = new Map();    // messageId -> agent entry
  const tools = new Map();        // toolKey -> tool
  const toolsById = new Map();    // toolCallId -> [toolKey]
  const approvals = new Map();    // toolKey -> approval
  const agents = new Map();       // agentId -> {name, role, status}
  const openTurns = new Set();    // messageIds of turns without done
  const sentIds = new Map();      // client message id -> {type, ...}
  const dirty = new Set();        // entries to render
  let autonomy = null;
  let sessionStatus = null;
  let connState = "connecting";
  let snapshot = null;            // {lastSeq, approvals: Set, calls: Set} of the last connect
  let lastUserText = "";
  let userSeq = 0;
  let visible = false;
  let destroyed = false;
  let sawReplay = false;          // a replayed event came since the last paint
  let armed = false;              // the log announces additions
  let approvalsDirty = true;
  let controlsDirty = true;
  let statusDirty = true;
  let firstShown = -1;            // index in entries of the first built entry
  let expanded = false;           // the user asked for earlier messages
  let stickToBottom = true;
  let pendingLevel = null;        // id of a set_autonomy not yet answered
  let holdSince = 0;              // first frame a paint was held for replay
  let paintedOnce = false;        // a paint showed messages

  // ---- DOM skeleton ----
  const root = ctx.root;
  root.classList.add("chat-view");
  const banners = h("div", { class: "chat-banners" });
  const earlier = h("button", {
    class: "show-earlier",
    attrs: { type: "button" },
    hidden: true,
    on: { click: showEarlier },
  }, "Show earlier messages");
  const list = h("div", { class: "chat-messages" });
  const log = h("div", {
    id: "chat-log",
    class: "chat-log",
    attrs: { role: "log", "aria-live": "off", "aria-relevant": "additions", tabindex: "0",
             "aria-label": "Conversation" },
    on: { scroll: onScroll },
  }, earlier, list);
  const jump = h("button", {
    class: "jump-latest",
    attrs: { type: "button" },
    hidden: true,
    on: { click: () => {
      stickToBottom = true;
      jump.hidden = true;
      log.scrollTop = log.scrollHeight;
      paint();
    } },
  }, "New messages ↓");
  const statusLine = h("div", {
    class: "chat-status",
    attrs: { role: "status", "aria-live": "polite" },
  });
  const approvalBox = h("div", {
    class: "chat-approvals",
    attrs: { "aria-label": "Approvals waiting for you" },
  });
  const input = h("textarea", {
    id: "chat-input",
    attrs: { rows: "2", placeholder: "Message (Enter sends, Shift+Enter new line)",
             "aria-label": "Message", autocomplete: "off" },
    on: { keydown: onKey },
  });
  const sendBtn = h("button", {
    id: "chat-send",
    class: "primary",
    attrs: { type: "button" },
    on: { click: sendChat },
  }, "Send");
  const cancelBtn = h("button", {
    id: "cancel",
    attrs: { type: "button", title: "Cancel the running turn and its pending approvals" },
    on: { click: () => send({ type: "cancel" }) },
  }, "Cancel");
  cancelBtn.disabled = true;
  const autonomySel = h("select", {
    id: "autonomy",
    attrs: { "aria-label": "Autonomy: when tool calls need approval" },
    on: { change: onAutonomy },
  }, LEVELS.map((l) => h("option", { attrs: { value: l } }, LEVEL_LABELS[l])));
  autonomySel.value = "";
  const composer = h("div", { class: "chat-composer" },
    input,
    h("div", { class: "chat-actions" },
      sendBtn,
      cancelBtn,
      h("label", { class: "chat-autonomy" }, "Autonomy ", autonomySel)));
  root.append(banners, log, jump, statusLine, approvalBox, composer);

  // ---- sending ----

  function send(msg) {
    let id = null;
    try {
      id = conn.send(msg);
    } catch (e) {
      banner({ code: "INTERNAL", message: "could not send: " + (e && e.message || e) });
      return null;
    }
    if (id) {
      sentIds.set(id, msg);
      if (sentIds.size > 500) sentIds.delete(sentIds.keys().next().value);
    }
    return id;
  }

  function sendChat() {
    const text = input.value;
    if (text.trim() === "") return;
    lastUserText = text;
    if (send({ type: "chat", message: text }) !== null) input.value = "";
    input.focus();
  }

  function onKey(e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey &&
        !e.metaKey) {
      e.preventDefault();
      sendChat();
    }
  }

  function onAutonomy() {
    const level = autonomySel.value;
    if (!LEVELS.includes(level) || level === autonomy) return;
    pendingLevel = send({ type: "set_autonomy", level });
  }

  function decide(ap, decision) {
    if (ap.answered || ap.sent) return;
    ap.sent = decision;
    ap.sentId = send({ type: "tool_approve", toolCallId: ap.ev.toolCallId, decision });
    if (!ap.sentId) ap.sent = "";
    approvalsDirty = true;
    paint();
  }

  // ---- model updates ----

  function touch(entry) {
    dirty.add(entry);
    paint();
  }

  function paint() {
    if (!destroyed) schedule(skey("paint"), flush);
  }

  function agentName(agentId) {
    const a = agents.get(agentId);
    return (a && a.name) || agentId || "agent";
  }

  function agentEntry(ev, meta) {
    const id = str(ev.messageId) || "m-unknown";
    let m = byMessage.get(id);
    if (!m) {
      m = {
        kind: "agent", id, agentId: ev.agentId || "", text: "", checkpoint: 0,
        textDirty: true, tools: [], usage: null, done: false, cancelled: false,
        turns: null, failed: null, ts: ev.ts, live: !(meta && meta.replay),
        el: null, index: entries.length,
      };
      byMessage.set(id, m);
      entries.push(m);
      openTurns.add(id);
    }
    if (!m.agentId && ev.agentId) m.agentId = ev.agentId;
    return m;
  }

  function noteAgent(a) {
    if (!a || !a.agentId) return;
    const cur = agents.get(a.agentId) || { name: "", role: "", status: "idle" };
    if (a.name) cur.name = a.name;
    if (a.role) cur.role = a.role;
    if (a.status) cur.status = a.status;
    agents.set(a.agentId, cur);
  }

  function getTool(ev, create) {
    const k = toolKey(ev);
    let t = tools.get(k);
    if (!t && (ev.step == null || !ev.messageId)) {
      // Events that lack step or messageId still find their call.
      const keys = toolsById.get(str(ev.toolCallId)) || [];
      for (let i = keys.length - 1; i >= 0 && !t; i--) {
        const c = tools.get(keys[i]);
        if (!ev.messageId || c.messageId === ev.messageId) t = c;
      }
    }
    if (!t && create) {
      t = {
        key: k, toolCallId: str(ev.toolCallId), messageId: str(ev.messageId),
        tool: str(ev.tool), args: ev.args, risk: str(ev.risk), state: "running",
        phase: "", result: undefined, error: null, duration: null, decision: "",
        client: false, server: "", el: null,
      };
      tools.set(k, t);
      const keys = toolsById.get(t.toolCallId) || [];
      keys.push(k);
      toolsById.set(t.toolCallId, keys);
    }
    return t;
  }

  function addToolTo(m, t) {
    if (!m.tools.includes(t.key)) m.tools.push(t.key);
    touch(m);
  }

  function approvalAnswered(ev) {
    let ap = approvals.get(toolKey(ev));
    if (!ap && (ev.step == null || !ev.messageId)) {
      for (const a of approvals.values())
        if (a.ev.toolCallId === ev.toolCallId && (!ev.messageId || a.ev.messageId === ev.messageId))
          ap = a;
    }
    if (ap && !ap.answered) {
      ap.answered = true;
      approvalsDirty = true;
      paint();
    }
  }

  function addApproval(ev, meta) {
    const k = toolKey(ev);
    let ap = approvals.get(k);
    if (!ap) {
      ap = { ev, answered: false, sent: "", sentId: null, el: null };
      approvals.set(k, ap);
    }
    // A request logged before the last connect that session_state no
    // longer lists was answered (maybe by an event this page cannot see).
    if (snapshot && typeof ev.seq === "number" &&
        ev.seq <= snapshot.lastSeq && !snapshot.approvals.has(k))
      ap.answered = true;
    approvalsDirty = true;
    paint();
    return ap;
  }

  function reconcile(state, fromConnect) {
    if (Array.isArray(state.pendingApprovals)) {
      const keys = new Set(state.pendingApprovals.map(toolKey));
      for (const [k, ap] of approvals) {
        if (keys.has(k) || ap.answered) continue;
        ap.answered = true;
        const t = tools.get(k);
        if (t && t.phase === "approval") {
          t.phase = "answered";
          touchTool(t);
        }
      }
      // The prompts come back here; their tool cards come with the logged
      // tool_approve_request, at its place in the transcript.
      for (const p of state.pendingApprovals) {
        const ap = approvals.get(toolKey(p));
        if (!ap) {
          addApproval(p, null);
        } else if (!ap.finalized && ap.answered) {
          ap.answered = false;
          const t = tools.get(toolKey(p));
          if (t && t.phase === "answered") {
            t.phase = "approval";
            touchTool(t);
          }
        }
      }
      approvalsDirty = true;
      if (fromConnect) snapshot = { lastSeq: Number(state.lastSeq) || 0, approvals: keys,
                                    calls: new Set(), status: "", agents: [],
                                    settled: false };
    }
    if (Array.isArray(state.pendingClientCalls)) {
      const keys = new Set(state.pendingClientCalls.map(toolKey));
      for (const t of tools.values())
        if (t.client && t.state === "running" && !keys.has(t.key)) {
          t.phase = "gone";
          if (t.el) touchTool(t);
        }
      for (const p of state.pendingClientCalls) {
        const t = getTool(p, false);
        if (t && t.phase === "gone") { t.phase = ""; touchTool(t); }
      }
      if (fromConnect && snapshot) snapshot.calls = keys;
    }
  }

  function touchTool(t) {
    const m = byMessage.get(t.messageId);
    if (m) touch(m);
  }

  function onMcpCall(ev, meta) {
    const t = getTool(ev, true);
    t.client = true;
    t.server = str(ev.server);
    if (!t.tool) t.tool = str(ev.tool);
    if (t.args === undefined) t.args = ev.args;
    if (!t.risk) t.risk = str(ev.risk);
    if (snapshot && typeof ev.seq === "number" &&
        ev.seq <= snapshot.lastSeq && !snapshot.calls.has(t.key) && t.state === "running")
      t.phase = "gone";
    addToolTo(agentEntry(ev, meta), t);
  }

  // A message that will get no more tokens (done, or its turn stopped).
  function endMessage(m) {
    if (m.ended) return;
    m.ended = true;
    touch(m);
  }

  function addNote(kind, ev, meta) {
    const e = { kind, ev, el: null, index: entries.length, live: !(meta && meta.replay) };
    entries.push(e);
    touch(e);
    return e;
  }

  const bannerList = [];

  function banner(ev) {
    const b = { ev, el: null };
    bannerList.push(b);
    while (bannerList.length > MAX_BANNERS) {
      const old = bannerList.shift();
      if (old.el) old.el.remove();
    }
    renderBanner(b);
  }

  function onError(ev, meta) {
    // A reply to one of this page's messages: give back what it took.
    const mine = ev.id && sentIds.get(ev.id);
    if (mine) {
      if (mine.type === "chat" && input.value === "") input.value = str(mine.message);
      if (mine.type === "tool_approve") {
        for (const ap of approvals.values()) {
          if (ap.sentId !== ev.id) continue;
          // NOT_FOUND: nothing is pending for it any more (answered
          // elsewhere, expired); otherwise the buttons are usable again.
          if (ev.code === "NOT_FOUND") ap.answered = true;
          ap.sent = "";
          ap.sentId = null;
          approvalsDirty = true;
        }
      }
      if (mine.type === "set_autonomy" && ev.id === pendingLevel) {
        pendingLevel = null;
        controlsDirty = true;
      }
    }
    if (ev.messageId) {
      const m = byMessage.get(str(ev.messageId));
      if (m && ev.retrying) {
        // LLM_ERROR retrying: the reply since the last tool result is
        // replaced by the one that follows (same messageId).
        m.text = m.text.slice(0, m.checkpoint);
        m.textDirty = true;
        touch(m);
      } else if (!ev.retrying && ev.severity !== "warning") {
        // The turn's message stops here (a provider failure ends the
        // turn; a worker's death re-runs it under another messageId).
        if (m) {
          if (ev.code === "LLM_ERROR") m.failed = ev;
          endMessage(m);
        }
        openTurns.delete(str(ev.messageId));
        controlsDirty = true;
      }
    }
    if (typeof ev.seq === "number") addNote("error", ev, meta);
    else banner(ev);
  }

  // The page has caught up with the connect's session_state: what it said
  // of the agents and the session now holds (the log's last agent_state of
  // a turn a dead worker left is not the truth any more).
  function settle() {
    snapshot.settled = true;
    for (const a of snapshot.agents) noteAgent(a);
    if (["idle", "completed", "failed"].includes(snapshot.status)) {
      for (const id of openTurns) {
        const m = byMessage.get(id);
        if (m) endMessage(m);
      }
      openTurns.clear();
    }
    statusDirty = controlsDirty = true;
    paint();
  }

  function handle(ev, meta) {
    if (destroyed || !ev || typeof ev.type !== "string") return;
    if (meta && meta.replay) sawReplay = true;
    dispatch(ev, meta);
    if (snapshot && !snapshot.settled && typeof ev.seq === "number" &&
        ev.seq >= snapshot.lastSeq)
      settle();
  }

  function dispatch(ev, meta) {
    switch (ev.type) {
      case "session_state": {
        const fromConnect = typeof ev.seq !== "number";
        sessionStatus = ev.status || sessionStatus;
        if (Array.isArray(ev.agents)) for (const a of ev.agents) noteAgent(a);
        if (LEVELS.includes(ev.autonomy)) autonomy = ev.autonomy;
        reconcile(fromConnect && !Array.isArray(ev.pendingApprovals)
          ? Object.assign({}, ev, { pendingApprovals: [] }) : ev, fromConnect);
        if (fromConnect) {
          snapshot.status = str(ev.status);
          snapshot.agents = Array.isArray(ev.agents) ? ev.agents : [];
          if (Number(conn.lastSeq || 0) >= snapshot.lastSeq) settle();
        }
        controlsDirty = statusDirty = true;
        paint();
        break;
      }
      case "team_update":
        if (Array.isArray(ev.agents)) for (const a of ev.agents) noteAgent(a);
        for (const m of byMessage.values()) if (m.el) dirty.add(m);
        statusDirty = true;
        paint();
        break;
      case "agent_state":
        noteAgent({ agentId: ev.agentId, role: ev.role, status: ev.status || "idle" });
        statusDirty = controlsDirty = true;
        paint();
        break;
      case "user_message": {
        const seq = typeof ev.seq === "number" ? ev.seq : --userSeq;
        const e = {
          kind: "user", id: "u-" + seq, text: str(ev.message), to: str(ev.to),
          mine: !!(ev.id && sentIds.has(ev.id)), ts: ev.ts, el: null, index: entries.length,
        };
        entries.push(e);
        if (e.mine) stickToBottom = true;
        touch(e);
        break;
      }
      case "token": {
        const m = agentEntry(ev, meta);
        m.text += str(ev.content);
        m.textDirty = true;
        openTurns.add(m.id);
        controlsDirty = true;
        touch(m);
        break;
      }
      case "tool_approve_request": {
        const t = getTool(ev, true);
        if (t.state === "running" && !t.decision) t.phase = "approval";
        t.tool = t.tool || str(ev.tool);
        if (t.args === undefined) t.args = ev.args;
        t.risk = str(ev.risk) || t.risk;
        t.summary = str(ev.summary);
        const ap = addApproval(ev, meta);
        if (ap.answered && t.phase === "approval") t.phase = "answered";
        addToolTo(agentEntry(ev, meta), t);
        break;
      }
      case "audit_entry": {
        approvalAnswered(ev);
        const ap = approvals.get(toolKey(ev));
        if (ap) ap.finalized = true;
        const t = getTool(ev, false);
        if (t) {
          t.decision = str(ev.decision);
          if (t.phase === "approval") t.phase = "";
          if (t.state === "running" && ["rejected", "denied", "timeout", "cancelled"]
              .includes(t.decision) && t.result === undefined)
            t.phase = "not run";
          touchTool(t);
        }
        break;
      }
      case "tool_start": {
        approvalAnswered(ev);
        const t = getTool(ev, true);
        t.tool = str(ev.tool) || t.tool;
        t.args = ev.args !== undefined ? ev.args : t.args;
        t.risk = str(ev.risk) || t.risk;
        if (t.phase === "approval") t.phase = "";
        addToolTo(agentEntry(ev, meta), t);
        openTurns.add(str(ev.messageId));
        controlsDirty = true;
        break;
      }
      case "tool_result": {
        approvalAnswered(ev);
        const t = getTool(ev, true);
        t.tool = t.tool || str(ev.tool);
        t.duration = typeof ev.duration === "number" ? ev.duration : t.duration;
        if (ev.error) {
          t.state = "error";
          t.error = ev.error;
        } else {
          t.state = "done";
          t.result = ev.result;
        }
        t.phase = "";
        const m = agentEntry(ev, meta);
        m.checkpoint = m.text.length;
        addToolTo(m, t);
        break;
      }
      case "mcp_call":
        onMcpCall(ev, meta);
        break;
      case "rag_context":
        // before the turn's reply: its agent message comes with its first token
        addNote("rag", ev, meta);
        break;
      case "done": {
        const m = agentEntry(ev, meta);
        m.done = true;
        m.usage = ev.usage || null;
        m.cancelled = !!ev.cancelled;
        m.turns = ev.turns;
        m.maxTurns = !!ev.maxTurnsReached;
        openTurns.delete(m.id);
        for (const k of m.tools) {
          const t = tools.get(k);
          if (t && t.state === "running" && !t.phase) t.phase = "ended";
        }
        controlsDirty = true;
        touch(m);
        break;
      }
      case "autonomy_changed":
        if (LEVELS.includes(ev.level)) autonomy = ev.level;
        pendingLevel = null;
        controlsDirty = true;
        paint();
        break;
      case "error":
        onError(ev, meta);
        break;
      case "session_complete":
        sessionStatus = "completed";
        for (const id of openTurns) {
          const m = byMessage.get(id);
          if (m) endMessage(m);
        }
        openTurns.clear();
        addNote("ended", ev, meta);
        controlsDirty = true;
        break;
      case "ack":
        if (ev.id) {
          const mine = sentIds.get(ev.id);
          if (mine && mine.type === "chat") {
            for (let i = entries.length - 1; i >= 0 && i >= entries.length - 50; i--) {
              const e = entries[i];
              if (e.kind === "user" && e.id === "u-" + ev.eventSeq && !e.mine) {
                e.mine = true;
                touch(e);
              }
            }
          }
        }
        break;
      default:
        break;
    }
  }

  // ---- rendering ----

  function onScroll() {
    stickToBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    if (stickToBottom) jump.hidden = true;
    // Scrolled up to the top: the earlier messages come by themselves.
    if (log.scrollTop < 30 && firstShown > 0 && !stickToBottom && visible)
      schedule(skey("earlier"), () => { if (!destroyed && log.scrollTop < 30) showEarlier(); });
  }

  function running() {
    if (openTurns.size > 0) return true;
    for (const a of agents.values()) if (BUSY.has(a.status)) return true;
    return sessionStatus === "running";
  }

  function flush() {
    if (destroyed) return;
    if (!visible) return;
    const replayed = sawReplay;
    sawReplay = false;
    // While the logged past pours in, building the last messages on every
    // frame is wasted work (they are pushed out by the next ones): wait for
    // a frame without replayed events; to show progress, paint anyway
    // after REPLAY_FIRST_MS, then at most every REPLAY_PAINT_MS.
    if (replayed) {
      const now = performance.now();
      if (!holdSince) holdSince = now;
      if (now - holdSince < (paintedOnce ? REPLAY_PAINT_MS : REPLAY_FIRST_MS)) {
        paint();
        return;
      }
    }
    holdSince = 0;
    if (entries.length) paintedOnce = true;
    const t0 = performance.now();

    const wasAtBottom = stickToBottom;
    // Which entries are built: the last WINDOW unless the user asked for more.
    if (firstShown < 0) firstShown = Math.max(0, entries.length - WINDOW);
    if (!expanded && stickToBottom && entries.length - firstShown > WINDOW * 1.5) {
      const nf = entries.length - WINDOW;
      for (let i = firstShown; i < nf; i++) {
        const e = entries[i];
        if (e.el) { e.el.remove(); e.el = null; e.view = null; }
        dirty.delete(e);
      }
      firstShown = nf;
    }
    const count = list.childElementCount;
    for (const e of dirty) {
      if (e.index < firstShown) continue;
      renderEntry(e);
    }
    dirty.clear();
    // Reading further up: say that something came, do not scroll.
    if (!wasAtBottom && list.childElementCount > count) jump.hidden = false;
    earlier.hidden = firstShown <= 0;
    if (firstShown > 0)
      earlier.textContent = "Show earlier messages (" + num(firstShown) + " more)";

    if (approvalsDirty) renderApprovals();
    if (controlsDirty) renderControls();
    if (statusDirty || controlsDirty) renderStatus();
    approvalsDirty = controlsDirty = statusDirty = false;

    if (wasAtBottom) log.scrollTop = log.scrollHeight;
    // Announce additions only once the logged past is on the page: the
    // Conn has delivered up to the lastSeq its first session_state named.
    if (!armed && !replayed && snapshot && Number(conn.lastSeq || 0) >= snapshot.lastSeq) {
      armed = true;
      log.setAttribute("aria-live", "polite");
      // For bench/ui_paint: when the replayed past was first painted, and
      // what that paint cost.
      try {
        performance.measure("chat-paint", { start: t0, end: performance.now() });
        performance.mark("chat-first-paint", { detail: { entries: entries.length } });
      } catch { /* no user timing */ }
    }
  }

  // Puts entry e's element at its place among the built ones.
  function place(e) {
    if (e.el.parentNode === list) return;
    // Entries are built in order except for "show earlier", which inserts
    // itself; find the next built entry.
    for (let i = e.index + 1; i < entries.length; i++) {
      const n = entries[i];
      if (n.el && n.el.parentNode === list) {
        list.insertBefore(e.el, n.el);
        return;
      }
    }
    list.append(e.el);
  }

  function renderEntry(e) {
    if (e.kind === "user") renderUser(e);
    else if (e.kind === "agent") renderAgent(e);
    else renderNote(e);
    place(e);
  }

  function renderUser(e) {
    if (e.el) {
      e.who.textContent = e.mine ? "You" : "User";
      return;
    }
    e.who = h("span", { class: "msg-who" }, e.mine ? "You" : "User");
    const body = h("div", { class: "msg-body msg-plain" });
    body.textContent = e.text;
    e.el = h("article", {
      class: "msg msg-user",
      dataset: { messageId: e.id },
    },
    h("header", { class: "msg-head" }, e.who,
      e.to ? h("span", { class: "msg-to" }, "to " + e.to) : null,
      e.ts ? h("time", { class: "msg-time", attrs: { datetime: str(e.ts) } }, fmtTime(e.ts)) : null),
    body);
  }

  function renderAgent(m) {
    if (!m.el) {
      m.who = h("span", { class: "msg-who" });
      m.role = h("span", { class: "msg-role" });
      m.toolsEl = h("div", { class: "msg-tools" });
      m.body = h("div", { class: "msg-body md" });
      m.foot = h("div", { class: "msg-foot" });
      m.el = h("article", {
        class: "msg msg-agent",
        dataset: { messageId: m.id },
      },
      h("header", { class: "msg-head" }, m.who, m.role,
        m.ts ? h("time", { class: "msg-time", attrs: { datetime: str(m.ts) } }, fmtTime(m.ts)) : null),
      m.toolsEl, m.body, m.foot);
      m.view = new MarkdownView(m.body);
      m.textDirty = true;
      m.footState = "";
    }
    const a = agents.get(m.agentId);
    m.who.textContent = agentName(m.agentId);
    if (m.agentId) m.who.setAttribute("title", m.agentId);
    m.role.textContent = a && a.role ? a.role : "";
    if (m.textDirty) {
      m.view.set(m.text);
      m.textDirty = false;
    }
    const streaming = !m.done && !m.ended;
    if (streaming) m.body.setAttribute("aria-busy", "true");
    else m.body.removeAttribute("aria-busy");
    m.el.classList.toggle("streaming", streaming);
    // Tool cards, in the order they were asked for.
    for (const k of m.tools) {
      const t = tools.get(k);
      if (!t) continue;
      renderTool(t);
      if (t.el.parentNode !== m.toolsEl) m.toolsEl.append(t.el);
    }
    renderFoot(m);
  }

  function renderFoot(m) {
    const key = JSON.stringify([m.done, m.usage, m.cancelled, m.turns, m.failed && m.failed.seq]);
    if (key === m.footState) return;
    m.footState = key;
    clear(m.foot);
    if (m.usage || (m.done && !m.failed)) {
      const u = m.usage || {};
      const parts = [];
      if (u.inputTokens != null) parts.push(num(u.inputTokens) + " in");
      if (u.outputTokens != null) parts.push(num(u.outputTokens) + " out");
      if (u.inputTokens == null && u.tokens != null) parts.push(num(u.tokens) + " tokens");
      const cost = u.cost != null ? fmtCost(u.cost) : "";
      m.foot.append(h("div", { class: "usage", attrs: { title: "Tokens and cost of this turn" } },
        h("span", { class: "usage-tokens" }, parts.join(" · ") + (parts.length ? " tokens" : "")),
        cost ? h("span", { class: "usage-cost" }, cost) : null,
        m.turns > 1 ? h("span", { class: "usage-turns" }, m.turns + " model calls") : null,
        u.estimated ? h("span", { class: "usage-est" }, "estimated") : null,
        m.cancelled ? h("span", { class: "badge badge-cancelled" }, "cancelled") : null,
        m.maxTurns ? h("span", { class: "badge badge-warn" }, "turn limit reached") : null));
    }
    if (m.failed) {
      m.foot.append(h("div", { class: "msg-failed" },
        "The reply stopped: " + str(m.failed.message)));
    }
  }

  function toolStatus(t) {
    if (t.phase === "approval") return "waiting for approval";
    if (t.phase === "not run") return t.decision === "cancelled" ? "cancelled" :
      t.decision === "timeout" ? "approval timed out" : "not run (" + t.decision + ")";
    if (t.phase === "gone") return "no longer waiting";
    if (t.phase === "answered") return "approval answered";
    if (t.phase === "ended") return "ended";
    if (t.state === "running") return t.client ? "waiting for a client" : "running…";
    if (t.state === "error") return "error";
    return "done";
  }

  function renderTool(t) {
    if (!t.el) {
      t.nameEl = h("span", { class: "tool-name" });
      t.riskEl = h("span", { class: "tool-risk" });
      t.statusEl = h("span", { class: "tool-status" });
      t.durEl = h("span", { class: "tool-duration" });
      t.argsEl = h("pre", { class: "tool-args" });
      t.resultEl = h("pre", { class: "tool-result" });
      t.decisionEl = h("div", { class: "tool-decision" });
      t.noteEl = h("div", { class: "tool-note" });
      t.el = h("details", {
        class: "tool-card",
        dataset: { toolCallId: t.toolCallId },
      },
      h("summary", null, h("span", { class: "tool-kind" }, t.client ? "client tool" : "tool"),
        t.nameEl, t.riskEl, t.statusEl, t.durEl),
      t.noteEl,
      h("div", { class: "tool-section" }, h("div", { class: "tool-label" }, "Arguments"), t.argsEl),
      h("div", { class: "tool-section" }, h("div", { class: "tool-label" }, "Result"), t.resultEl),
      t.decisionEl);
      t.shown = "";
    }
    const state = [t.state, t.phase, t.decision, t.duration, t.risk, t.tool, t.client,
                   t.result === undefined ? 0 : 1, t.error ? 1 : 0, t.args === undefined ? 0 : 1];
    const sk = JSON.stringify(state);
    if (sk === t.shown) return;
    t.shown = sk;
    t.el.dataset.state = t.state;
    t.el.classList.toggle("mcp-card", t.client);
    t.nameEl.textContent = t.client && t.server ? t.server + " / " + t.tool : t.tool;
    t.riskEl.textContent = t.risk || "";
    t.riskEl.className = "tool-risk" + (t.risk ? " risk-" + t.risk.replace(/[^a-z]/g, "") : "");
    t.riskEl.hidden = !t.risk;
    if (t.risk) t.riskEl.setAttribute("title", "risk: " + t.risk);
    t.statusEl.textContent = toolStatus(t);
    t.durEl.textContent = t.duration != null ? fmtDuration(t.duration) : "";
    t.argsEl.textContent = pretty(t.args);
    if (t.error) {
      const err = t.error;
      t.resultEl.textContent = typeof err === "object"
        ? (err.code ? err.code + ": " : "") + str(err.message || pretty(err))
        : str(err);
      t.resultEl.classList.add("tool-error");
    } else {
      t.resultEl.textContent = t.result === undefined ? "" : pretty(t.result);
      t.resultEl.classList.remove("tool-error");
    }
    t.decisionEl.textContent = t.decision ? "Decision: " + t.decision : "";
    t.noteEl.textContent = t.client
      ? "This is a call of a client-side tool. This page cannot run client tools: it waits " +
        "for a client that registered the tool to answer (or times out). Cancel the turn to stop it."
      : "";
    t.noteEl.hidden = !t.client;
  }

  function renderNote(e) {
    if (e.el) return;
    const ev = e.ev;
    if (e.kind === "error") {
      e.el = errorBox(ev, false, e.live);
      e.el.classList.add("inline");
    } else if (e.kind === "rag") {
      e.el = ragBlock(ev, agentName(ev.agentId));
    } else {
      e.el = h("div", { class: "chat-note ended" },
        h("strong", null, "Session ended"),
        ev.reason ? " (" + str(ev.reason) + ")" : "",
        ev.summary ? h("div", { class: "chat-note-summary" }, str(ev.summary)) : null,
        h("div", { class: "error-hint" }, "Start a new session to go on."));
    }
  }

  // live: the error came while this page watched, so "the last message
  // typed here" is the one that failed (not so for a replayed one).
  function errorBox(ev, dismissible, live = true) {
    const code = str(ev.code) || "ERROR";
    let hint = Object.hasOwn(HINTS, code) ? HINTS[code] : "Retry, or reload the page.";
    if (code === "RESUME_GAP" && typeof ev.from === "number")
      hint = "A server failover lost events this page showed; the session goes on from event " +
        ev.from + " as stored. Reload the page for a transcript without the lost ones.";
    if (code === "LLM_ERROR" && ev.retrying) hint = "The provider's stream broke; the model call is starting over.";
    if (code === "RATE_LIMITED" && (ev.retryAfterMs || ev.retryAfter)) {
      const ms = ev.retryAfterMs || ev.retryAfter * 1000;
      hint = "Wait " + fmtDuration(ms) + ", then send again.";
    }
    const box = h("div", {
      class: "error-banner severity-" + (str(ev.severity) || "recoverable").replace(/[^a-z]/g, ""),
      attrs: { role: "alert" },
      dataset: { code },
    },
    h("span", { class: "error-code" }, code),
    h("span", { class: "error-message" }, str(ev.message)),
    h("span", { class: "error-hint" }, hint));
    if (code === "LLM_ERROR" && !ev.retrying && lastUserText && live) {
      box.append(h("button", {
        class: "error-retry",
        attrs: { type: "button" },
        on: { click: () => { send({ type: "chat", message: lastUserText }); box.remove(); } },
      }, "Retry"));
    }
    if (code === "UNAUTHORIZED") {
      box.append(h("button", {
        class: "error-token",
        attrs: { type: "button" },
        on: { click: () => authNeeded(str(ev.message)) },
      }, "Enter token"));
    }
    if (dismissible) {
      box.append(h("button", {
        class: "error-dismiss",
        attrs: { type: "button", "aria-label": "Dismiss" },
        on: { click: () => {
          box.remove();
          const i = bannerList.findIndex((b) => b.el === box);
          if (i >= 0) bannerList.splice(i, 1);
        } },
      }, "×"));
    }
    return box;
  }

  function renderBanner(b) {
    b.el = errorBox(b.ev, true);
    banners.append(b.el);
  }

  function renderApprovals() {
    const pending = [];
    let refocus = false;
    for (const ap of approvals.values()) {
      if (ap.answered) {
        if (ap.el) {
          // Keyboard users keep their place: the focus moves on, not to <body>.
          if (ap.el.contains(document.activeElement)) refocus = true;
          ap.el.remove();
          ap.el = null;
        }
        continue;
      }
      pending.push(ap);
    }
    for (const ap of pending) {
      const ev = ap.ev;
      if (!ap.el) {
        const buttons = [
          ["approve", "Approve"],
          ["reject", "Reject"],
          ["always", "Always allow " + str(ev.tool)],
        ].map(([d, label]) => h("button", {
          class: "approval-" + d,
          attrs: { type: "button" },
          dataset: { decision: d },
          on: { click: () => decide(ap, d) },
        }, label));
        ap.buttons = buttons;
        ap.stateEl = h("span", { class: "approval-state" });
        ap.el = h("div", {
          class: "approval",
          dataset: { toolCallId: str(ev.toolCallId) },
          attrs: { role: "group", "aria-label": "Approve tool call " + str(ev.tool) },
        },
        h("div", { class: "approval-head" },
          h("strong", null, agentName(ev.agentId)), " wants to run ",
          h("code", { class: "approval-tool" }, str(ev.tool)),
          ev.risk ? h("span", { class: "tool-risk risk-" + str(ev.risk).replace(/[^a-z]/g, "") },
            str(ev.risk)) : null),
        ev.summary ? h("div", { class: "approval-summary" }, str(ev.summary)) : null,
        h("details", { class: "approval-args" }, h("summary", null, "Arguments"),
          h("pre", null, pretty(ev.args))),
        h("div", { class: "approval-buttons" }, buttons, ap.stateEl));
        approvalBox.append(ap.el);
      }
      // aria-disabled, not disabled: the button keeps the keyboard focus
      // while the answer is on its way (decide() ignores a second press).
      for (const b of ap.buttons) {
        if (ap.sent) b.setAttribute("aria-disabled", "true");
        else b.removeAttribute("aria-disabled");
      }
      ap.stateEl.textContent = ap.sent ? "sent: " + ap.sent + "…" : "";
    }
    approvalBox.hidden = pending.length === 0;
    if (refocus) {
      const next = pending.length && pending[0].buttons.find((b) => !b.hasAttribute("aria-disabled"));
      (next || input).focus();
    }
  }

  function renderControls() {
    cancelBtn.disabled = !running();
    // While a change is on its way the select shows what was chosen.
    if (autonomy && !pendingLevel) autonomySel.value = autonomy;
  }

  function renderStatus() {
    const parts = [];
    for (const [id, a] of agents)
      if (BUSY.has(a.status)) parts.push(agentName(id) + " is " + BUSY.get(a.status));
    let text = parts.join(" · ");
    if (!text && connState === "reconnecting") text = "";
    if (statusLine.textContent !== text) statusLine.textContent = text;
    statusLine.dataset.busy = parts.length ? "true" : "false";
  }

  function showEarlier() {
    if (firstShown <= 0) return;
    expanded = true;
    const nf = Math.max(0, firstShown - WINDOW);
    const before = log.scrollHeight;
    const anchor = entries[firstShown] && entries[firstShown].el;
    const frag = document.createDocumentFragment();
    for (let i = nf; i < firstShown; i++) {
      const e = entries[i];
      if (e.kind === "user") renderUser(e);
      else if (e.kind === "agent") renderAgent(e);
      else renderNote(e);
      frag.append(e.el);
    }
    if (anchor && anchor.parentNode === list) list.insertBefore(frag, anchor);
    else list.prepend(frag);
    firstShown = nf;
    earlier.hidden = firstShown <= 0;
    earlier.textContent = "Show earlier messages (" + num(firstShown) + " more)";
    log.scrollTop += log.scrollHeight - before;
  }

  // ---- wiring ----

  const offs = [];
  const o1 = conn.on("*", handle);
  if (typeof o1 === "function") offs.push(o1);
  if (typeof conn.onState === "function") {
    const o2 = conn.onState((s) => {
      if (destroyed) return;
      connState = s;
      root.dataset.conn = s;
      statusDirty = true;
      paint();
    });
    if (typeof o2 === "function") offs.push(o2);
  }

  return {
    show() {
      visible = true;
      root.hidden = false;
      stickToBottom = stickToBottom || firstShown < 0;
      flush();
    },
    hide() {
      visible = false;
      root.hidden = true;
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
