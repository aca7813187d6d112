// The dashboard view of a session: live charts of the `metrics` events
// (its own read-only /dashboard stream), tokens and cost per agent, the
// tool calls waiting for approval (answered on the session's main stream,
// ctx.conn: a dashboard may not write) and the audit trail (GET /api/audit,
// then the audit events as they are logged), filtered in the page.
//
// The model is kept whether or not the view is shown; the DOM is touched
// only while it is shown, at most once per animation frame (schedule()).
// Every string from the server reaches the DOM as text (h() children,
// textContent, setAttribute of data-/aria-/title attributes).
import { h, svg, clear, schedule, fmtTime, fmtCost, fmtNumber } from "./dom.js";
import { Conn } from "./conn.js";
import { drawLine, drawBars } from "./charts.js";

const WINDOW = 60;              // samples a line chart shows
const AUDIT_PAGE = 1000;        // entries asked for per /api/audit page
const AUDIT_PAGES = 100;        // pages read at most per load
const ARGS_SHOWN = 400;         // characters of a pending call's arguments

// The audit trail's events (man parley-protocol(7), GET /api/audit).
const AUDIT_TYPES = new Set(["audit_entry", "autonomy_changed",
    "action_proposed", "action_approved", "action_rejected",
    "action_execute", "action_result", "action_expired"]);
const DECISIONS = ["approved", "rejected", "always", "auto", "denied",
    "timeout", "cancelled", "expired"];
const RISKS = ["low", "medium", "high", "critical"];

let instances = 0;

function num(v) {
	return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function str(v) {
	return typeof v === "string" ? v : v == null ? "" : String(v);
}

function setText(el, t) {
	if (el.textContent !== t) el.textContent = t;
}

function attrOf(el, name, v) {
	if (v === null) el.removeAttribute(name);
	else if (el.getAttribute(name) !== v) el.setAttribute(name, v);
}

function fmtBytes(n) {
	if (n < 1024) return `${fmtNumber(Math.round(n))} B`;
	if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
	return `${(n / 1048576).toFixed(1)} MiB`;
}

function fmtRate(n) {
	return Number.isInteger(n) ? fmtNumber(n) : n.toFixed(1);
}

// "user 1 · observer 2": the non-zero counts of obj, in keys' order.
function counts(obj, keys) {
	if (!obj || typeof obj !== "object") return "";
	const out = [];
	for (const k of keys) {
		const v = num(obj[k]);
		if (v) out.push(`${k} ${fmtNumber(v)}`);
	}
	return out.join(" · ");
}

// The line charts: one <svg data-metric=NAME> each, in this order.
const CHARTS = [
	{ metric: "connections", title: "Connections", fmt: fmtNumber,
	  get: (m) => m.connections && m.connections.total,
	  detail: (m) => counts(m.connections, ["user", "agent", "observer",
	      "admin", "dashboard"]) },
	{ metric: "tokens", title: "Tokens (session)", fmt: fmtNumber,
	  get: (m) => m.usage && m.usage.tokens,
	  detail: (m) => m.usage ? `in ${fmtNumber(num(m.usage.inputTokens) ||
	      0)} · out ${fmtNumber(num(m.usage.outputTokens) || 0)} · ` +
	      `${fmtNumber(num(m.turns) || 0)} turns` : "" },
	{ metric: "cost", title: "Cost (session)", fmt: fmtCost,
	  get: (m) => m.usage && m.usage.cost },
	{ metric: "thoughtsPerMinute", title: "Thoughts / minute", fmt: fmtRate,
	  get: (m) => m.rates && m.rates.thoughtsPerMinute,
	  detail: (m) => m.rates && num(m.rates.windowMs) !== null &&
	      m.rates.windowMs < 60000 ? `over the last ${Math.round(
	      m.rates.windowMs / 1000)} s` : "" },
	{ metric: "eventsPerMinute", title: "Events / minute", fmt: fmtRate,
	  get: (m) => m.rates && m.rates.eventsPerMinute },
	{ metric: "queueMessages", title: "Queued messages", fmt: fmtNumber,
	  get: (m) => m.queues && m.queues.messages,
	  detail: () => "chat messages waiting for their turn" },
	{ metric: "eventsBehind", title: "Events behind", fmt: fmtNumber,
	  get: (m) => m.queues && m.queues.eventsBehind,
	  detail: (m) => m.queues && num(m.queues.maxEventsBehind) ?
	      `most for one connection ${fmtNumber(m.queues.maxEventsBehind)}` :
	      "" },
	{ metric: "bytesQueued", title: "Bytes queued", fmt: fmtBytes,
	  get: (m) => m.queues && m.queues.bytesQueued,
	  detail: (m) => m.queues && num(m.queues.maxBytesQueued) ?
	      `most for one connection ${fmtBytes(m.queues.maxBytesQueued)}` :
	      "" },
	{ metric: "pending", title: "Pending requests", fmt: fmtNumber,
	  get: (m) => m.pending && m.pending.total,
	  detail: (m) => m.pending ? counts(m.pending, Object.keys(m.pending)
	      .filter((k) => k !== "total")) : "" },
];

// The per-agent bar charts.
const BARS = [
	{ metric: "agentTokens", title: "Tokens per agent", fmt: fmtNumber,
	  get: (u) => u && u.tokens },
	{ metric: "agentCost", title: "Cost per agent", fmt: fmtCost,
	  get: (u) => u && u.cost },
];

function agentName(a) {
	return str(a.name) || str(a.agentId) || "(agent)";
}

export function create(ctx) {
	const uid = ++instances;
	const key = `dash-${uid}`;
	const sid = ctx.sessionId;
	const root = ctx.root;
	const conn = ctx.conn;
	const unsubs = [];

	// --- the model ---
	const samples = [];             // the last WINDOW metrics events
	let lastSampleAt = 0;           // Date.now() of the newest
	let dashState = "idle";         // the dashboard Conn's state
	let dashError = null;           // {code, message} from the dashboard
	const pending = new Map();      // toolCallId -> {ev, sent, note, error}
	const sentIds = new Map();      // our tool_approve's id -> toolCallId
	const audit = new Map();        // seq -> audit event
	const auditNew = [];            // seqs not yet in the table
	let auditLoad = { state: "idle", error: null, gen: 0, next: 0 };

	let visible = false, started = false, destroyed = false;
	let staleTimer = 0;
	const dirty = new Set();

	// --- the dashboard's own stream ---
	// Its logged events are not used here (the main stream brings them
	// all), so it starts where the session is instead of replaying the log.
	const dconn = new Conn({ sessionId: sid, path: "dashboard",
	    role: "observer", from: "live" });
	const sub = (c, type, fn) => {
		const off = c.on(type, (ev, meta) => {
			if (!destroyed) fn(ev, meta || {});
		});
		if (typeof off === "function") unsubs.push(off);
	};
	sub(dconn, "metrics", (ev) => {
		samples.push(ev);
		if (samples.length > WINDOW) samples.splice(0,
		    samples.length - WINDOW);
		lastSampleAt = Date.now();
		dashError = null;
		invalidate("charts", "agents", "head");
	});
	sub(dconn, "error", (ev) => {
		// A dashboard sends nothing, so its errors are about the stream
		// (an unknown session, a gap in retention, its token).
		if (ev.seq != null || ev.code === "RESUME_GAP") return;
		dashError = { code: str(ev.code), message: str(ev.message) };
		invalidate("head");
	});
	{
		// (onState reports the current state at once: "closed" before
		// the first connect, which here is "not connected yet".)
		const off = dconn.onState((s) => {
			if (destroyed) return;
			dashState = started ? s : "idle";
			invalidate("head");
		});
		if (typeof off === "function") unsubs.push(off);
	}

	// --- the session's main stream: approvals and audit events ---
	sub(conn, "session_state", (ev) => {
		// Rebuilt on every (re)connect: what waits is what it says.
		const keep = new Map(pending);
		pending.clear();
		for (const r of Array.isArray(ev.pendingApprovals) ?
		    ev.pendingApprovals : []) {
			if (!r || !r.toolCallId) continue;
			const old = keep.get(r.toolCallId);
			pending.set(r.toolCallId, old ? Object.assign(old,
			    { ev: r }) : { ev: r, sent: null, note: "",
			    error: null });
		}
		invalidate("pending");
	});
	sub(conn, "tool_approve_request", (ev, meta) => {
		// A request logged before this page connected still waits only
		// if session_state said so: the others were answered since.
		if (!ev.toolCallId || meta.replay) return;
		if (!pending.has(ev.toolCallId))
			pending.set(ev.toolCallId, { ev, sent: null, note: "",
			    error: null });
		invalidate("pending");
	});
	const answered = (ev) => {
		if (ev.toolCallId && pending.delete(ev.toolCallId))
			invalidate("pending");
	};
	sub(conn, "tool_result", answered);
	sub(conn, "session_complete", () => {
		pending.clear();
		invalidate("pending");
	});
	for (const t of AUDIT_TYPES) {
		sub(conn, t, (ev) => {
			if (t === "audit_entry") answered(ev);
			addAudit(ev);
		});
	}
	sub(conn, "ack", (ev) => {
		const tc = sentIds.get(ev.id);
		if (tc === undefined) return;
		sentIds.delete(ev.id);
		const p = pending.get(tc);
		if (p) {
			p.note = "Answer accepted; waiting for the audit entry.";
			invalidate("pending");
		}
	});
	sub(conn, "error", (ev) => {
		const tc = ev.id != null ? sentIds.get(ev.id) : undefined;
		if (tc === undefined) return;
		sentIds.delete(ev.id);
		const p = pending.get(tc);
		if (!p) return;
		p.sent = null;
		p.note = "";
		p.error = `${str(ev.code) || "ERROR"}: ${str(ev.message)}` +
		    (ev.code === "FORBIDDEN" && !ev.message ? " (answering " +
		    "needs the user or admin role)" : ev.code === "NOT_FOUND" ?
		    " (it was answered or expired meanwhile)" : "");
		invalidate("pending");
	});

	function addAudit(ev) {
		if (!ev || !AUDIT_TYPES.has(ev.type)) return;
		const seq = num(ev.seq);
		if (seq === null || audit.has(seq)) return;
		audit.set(seq, ev);
		auditNew.push(seq);
		invalidate("audit");
	}

	// --- the DOM skeleton (built once; filled while shown) ---
	root.classList.add("dash-view");
	const statusEl = h("span", { id: "dash-status", class: "dash-status",
	    attrs: { role: "status" }, dataset: { state: "idle" } },
	    "Not connected");
	const metaEl = h("span", { class: "dash-meta" });
	const headErr = h("div", { class: "error-banner dash-error",
	    hidden: true, attrs: { role: "alert" } });
	const chartsEl = h("div", { id: "charts", class: "dash-charts" });
	const chartEls = new Map();     // metric -> {svg, value, detail}
	const agentBody = h("tbody");
	const agentEmpty = h("p", { class: "dash-empty" },
	    "No agent usage yet.");
	const agentTable = h("table", { id: "agent-usage",
	    class: "dash-table", hidden: true },
	    h("caption", { class: "dash-caption" },
	        "Tokens and cost per agent (latest sample)"),
	    h("thead", null, h("tr", null,
	        ["Agent", "Role", "Status", "Input", "Output", "Tokens",
	         "Cost"].map((t) => h("th", { attrs: { scope: "col" } },
	         t)))),
	    agentBody);
	const pendingCount = h("span", { class: "dash-count" });
	const pendingEl = h("div", { id: "pending-approvals",
	    class: "dash-pending", attrs: { tabindex: "-1",
	    "aria-live": "polite" } });
	const cards = new Map();        // toolCallId -> card element

	const fTool = h("input", { id: "audit-filter-tool", attrs: {
	    type: "search", placeholder: "tool", autocomplete: "off" } });
	const fAgent = h("input", { id: "audit-filter-agent", attrs: {
	    type: "search", placeholder: "agent", autocomplete: "off" } });
	const fDecision = h("select", { id: "audit-filter-decision" },
	    h("option", { attrs: { value: "" } }, "any decision"),
	    DECISIONS.map((d) => h("option", { attrs: { value: d } }, d)));
	const fRisk = h("select", { id: "audit-filter-risk" },
	    h("option", { attrs: { value: "" } }, "any risk"),
	    RISKS.map((r) => h("option", { attrs: { value: r } }, r)));
	const refreshBtn = h("button", { id: "audit-refresh",
	    class: "dash-button", attrs: { type: "button" },
	    on: { click: () => {
		if (auditLoad.state !== "loading") loadAudit();
	    } } }, "Refresh");
	const auditCount = h("span", { class: "dash-count",
	    attrs: { "aria-live": "polite" } });
	const auditErr = h("div", { class: "error-banner dash-error",
	    hidden: true, attrs: { role: "alert" } });
	const auditBody = h("tbody");
	const auditEmpty = h("p", { class: "dash-empty" }, "No audit entries.");
	const auditWrap = h("div", { class: "dash-table-wrap dash-audit-wrap",
	    attrs: { tabindex: "0", "aria-label": "Audit trail entries" } },
	    h("table", { id: "audit-table", class: "dash-table" },
	        h("caption", { class: "dash-caption" },
	            "Decisions on tool calls, autonomy changes and actions, " +
	            "oldest first"),
	        // fixed widths (dash.css): a new row does not lay out the
	        // whole table again
	        h("colgroup", null, ["seq", "time", "tool", "agent", "risk",
	            "decision", "by", "summary"].map((c) =>
	            h("col", { class: `audit-col-${c}` }))),
	        h("thead", null, h("tr", null,
	            ["Seq", "Time", "Tool / event", "Agent", "Risk", "Decision",
	             "By", "Summary"].map((t) =>
	             h("th", { attrs: { scope: "col" } }, t)))),
	        auditBody));
	const auditRows = new Map();    // seq -> tr
	const auditSeqs = [];           // the seqs in the table, ascending
	const label = (text, control) => h("label", { class: "dash-filter" },
	    h("span", null, text), control);

	for (const el of [fTool, fAgent])
		el.addEventListener("input", () => invalidate("filter"));
	for (const el of [fDecision, fRisk])
		el.addEventListener("change", () => invalidate("filter"));

	root.append(
	    h("header", { class: "dash-head" },
	        h("h2", null, "Dashboard"), statusEl, metaEl),
	    headErr,
	    h("section", { class: "dash-panel dash-metrics",
	        attrs: { "aria-labelledby": `dash-h-metrics-${uid}` } },
	        h("h3", { id: `dash-h-metrics-${uid}` }, "Live metrics"),
	        chartsEl),
	    h("section", { class: "dash-panel dash-agents",
	        attrs: { "aria-labelledby": `dash-h-agents-${uid}` } },
	        h("h3", { id: `dash-h-agents-${uid}` }, "Agents"),
	        agentEmpty,
	        h("div", { class: "dash-table-wrap" }, agentTable)),
	    h("section", { class: "dash-panel dash-approvals",
	        attrs: { "aria-labelledby": `dash-h-pending-${uid}` } },
	        h("h3", { id: `dash-h-pending-${uid}` }, "Pending approvals ",
	            pendingCount),
	        pendingEl),
	    h("section", { class: "dash-panel dash-audit",
	        attrs: { "aria-labelledby": `dash-h-audit-${uid}` } },
	        h("h3", { id: `dash-h-audit-${uid}` }, "Audit trail ",
	            auditCount),
	        h("div", { class: "dash-filters", attrs: { role: "search",
	            "aria-label": "Filter the audit trail" } },
	            label("Tool", fTool), label("Agent", fAgent),
	            label("Decision", fDecision), label("Risk", fRisk),
	            refreshBtn),
	        auditErr,
	        auditWrap,
	        auditEmpty));

	// --- rendering ---
	function invalidate(...parts) {
		for (const p of parts) dirty.add(p);
		if (visible && !destroyed) schedule(key, render);
	}

	function render() {
		if (!visible || destroyed) return;
		const parts = new Set(dirty);
		dirty.clear();
		if (parts.has("head")) renderHead();
		if (parts.has("charts")) renderCharts();
		if (parts.has("agents")) renderAgents();
		if (parts.has("pending")) renderPending();
		if (parts.has("audit")) renderAudit();
		if (parts.has("audit") || parts.has("filter"))
			renderFilter(parts.has("filter"));
	}

	const STATE_TEXT = {
		idle: "Not connected",
		connecting: "Connecting to the dashboard stream…",
		live: "Live",
		reconnecting: "Reconnecting…",
		closed: "Closed",
	};

	function renderHead() {
		const last = samples[samples.length - 1];
		let state = dashState;
		const interval = last && num(last.intervalMs) || 5000;
		if (state === "live" && last && Date.now() - lastSampleAt >
		    interval * 3 + 1000)
			state = "stale";
		statusEl.dataset.state = state;
		statusEl.textContent = state === "stale" ?
		    "No sample for a while (the stream is open)" :
		    STATE_TEXT[state] || state;
		if (last) {
			metaEl.textContent = `session ${str(last.status) || "?"}` +
			    ` · seq ${fmtNumber(num(last.lastSeq) || 0)}` +
			    ` · a sample every ${(interval / 1000).toFixed(
			    interval % 1000 ? 1 : 0)} s · updated ` +
			    fmtTime(last.ts || lastSampleAt);
		} else
			metaEl.textContent = "";
		if (dashError) {
			headErr.hidden = false;
			headErr.textContent = `Dashboard stream: ${dashError.code}` +
			    (dashError.message ? ` — ${dashError.message}` : "") +
			    (dashError.code === "NOT_FOUND" ? ". The session may " +
			    "have ended or left retention; pick another one." :
			    dashError.code === "FORBIDDEN" ||
			    dashError.code === "UNAUTHORIZED" ? ". Check the " +
			    "access token (it must allow this session)." : "");
		} else
			headErr.hidden = true;
	}

	function chartCard(metric, title) {
		const svgEl = svg("svg", { "data-metric": metric,
		    focusable: "false", class: "chart" });
		const value = h("span", { class: "chart-value" });
		const detail = h("span", { class: "chart-detail" });
		const card = h("figure", { class: "chart-card" },
		    h("figcaption", null, h("span", { class: "chart-title" },
		        title), value, detail),
		    svgEl);
		chartEls.set(metric, { svg: svgEl, value, detail });
		return card;
	}

	function renderCharts() {
		if (!samples.length) {
			if (!chartsEl.querySelector(".dash-empty")) {
				clear(chartsEl);
				chartEls.clear();
				chartsEl.append(h("p", { class: "dash-empty" },
				    "No metrics yet — the first sample comes " +
				    "as soon as the dashboard stream is open."));
			}
			return;
		}
		if (!chartEls.size) {
			clear(chartsEl);
			for (const c of CHARTS)
				chartsEl.append(chartCard(c.metric, c.title));
			for (const b of BARS)
				chartsEl.append(chartCard(b.metric, b.title));
		}
		const last = samples[samples.length - 1];
		const times = [fmtTime(samples[0].ts), fmtTime(last.ts)];
		for (const c of CHARTS) {
			const el = chartEls.get(c.metric);
			const values = samples.map((m) => num(c.get(m)));
			const v = values[values.length - 1];
			el.value.textContent = v === null ? "—" : c.fmt(v);
			el.detail.textContent = c.detail ? c.detail(last) : "";
			drawLine(el.svg, { series: [{ name: c.title, values }],
			    capacity: WINDOW, times, format: c.fmt,
			    title: c.title });
		}
		const agents = Array.isArray(last.agents) ? last.agents : [];
		for (const b of BARS) {
			const el = chartEls.get(b.metric);
			const bars = agents.map((a) => ({ label: agentName(a),
			    value: num(b.get(a.usage)) }));
			// The session keeps a usage per agent only for some
			// agents (a lone one always): the others show n/a.
			let sum = 0, known = 0;
			for (const x of bars) {
				if (x.value === null) continue;
				sum += x.value;
				known++;
			}
			el.value.textContent = known ? b.fmt(sum) : "—";
			el.detail.textContent = agents.length ?
			    `${agents.length} agent${agents.length > 1 ? "s" : ""}` :
			    "no agents";
			drawBars(el.svg, { bars, format: b.fmt, title: b.title });
		}
	}

	function renderAgents() {
		const last = samples[samples.length - 1];
		const agents = last && Array.isArray(last.agents) ? last.agents :
		    [];
		clear(agentBody);
		agentTable.hidden = !agents.length;
		agentEmpty.hidden = !!agents.length;
		agentEmpty.textContent = last ? "This session has no agents." :
		    "No agent usage yet.";
		for (const a of agents) {
			const u = a.usage && typeof a.usage === "object" ? a.usage :
			    null;
			const n = (k) => u && num(u[k]) !== null ? fmtNumber(u[k]) :
			    "—";
			agentBody.append(h("tr", { dataset: { agentId:
			    str(a.agentId), status: str(a.status) } },
			    h("th", { attrs: { scope: "row", title:
			        str(a.agentId) } }, agentName(a)),
			    h("td", null, [str(a.role), a.provider ?
			        ` (${str(a.provider)})` : ""].join("")),
			    h("td", null, h("span", { class: "agent-status " +
			        `agent-status-${str(a.status).replace(
			        /[^a-z_]/gi, "")}` }, str(a.status) || "—")),
			    h("td", { class: "num" }, n("inputTokens")),
			    h("td", { class: "num" }, n("outputTokens")),
			    h("td", { class: "num" }, n("tokens")),
			    h("td", { class: "num" }, u && num(u.cost) !== null ?
			        fmtCost(u.cost) : "—")));
		}
	}

	function answer(toolCallId, decision) {
		const p = pending.get(toolCallId);
		if (!p || p.sent) return;
		p.error = null;
		p.sent = decision;
		p.note = `Sending “${decision}”…`;
		const id = conn.send({ type: "tool_approve", toolCallId,
		    decision });
		if (id != null)
			sentIds.set(id, toolCallId);
		else {
			// Conn refused it (too many messages wait to be sent).
			p.sent = null;
			p.note = "";
			p.error = "Not sent: the page is waiting for the server; " +
			    "try again once the connection is live.";
		}
		invalidate("pending");
	}

	function pendingCard(tc, p) {
		const ev = p.ev;
		let args = "";
		try {
			args = ev.args === undefined ? "" : JSON.stringify(ev.args);
		} catch (e) {
			args = "";
		}
		if (args.length > ARGS_SHOWN)
			args = args.slice(0, ARGS_SHOWN) + "…";
		const risk = str(ev.risk);
		const buttons = [["approve", "Approve"], ["reject", "Reject"],
		    ["always", "Always allow"]].map(([d, t]) => h("button", {
		    class: `dash-button decision-${d}`, dataset: { decision: d },
		    attrs: { type: "button", "aria-label":
		    `${t} ${str(ev.tool)} (${tc})` },
		    on: { click: () => answer(tc, d) } }, t));
		const note = h("p", { class: "pending-note" });
		const err = h("p", { class: "pending-error", attrs: {
		    role: "alert" } });
		const card = h("article", { class: "pending-approval",
		    dataset: { toolCallId: tc, risk } },
		    h("header", null,
		        h("span", { class: "pending-tool" }, str(ev.tool) ||
		            "(tool)"),
		        h("span", { class: `risk risk-${risk.replace(/[^a-z]/g,
		            "")}` }, risk || "?"),
		        h("span", { class: "pending-agent" }, str(ev.agentId)),
		        h("time", { class: "pending-time" }, ev.ts ?
		            fmtTime(ev.ts) : "")),
		    // the summary is the tool and the start of its arguments:
		    // shown when the arguments are not
		    ev.summary && !args ? h("p", { class: "pending-summary" },
		        str(ev.summary)) : null,
		    args ? h("pre", { class: "pending-args" }, args) : null,
		    h("div", { class: "pending-buttons" }, buttons),
		    note, err);
		card._dash = { buttons, note, err };
		return card;
	}

	function renderPending() {
		for (const [tc, card] of cards) {
			if (pending.has(tc)) continue;
			const hadFocus = card.contains(document.activeElement);
			card.remove();
			cards.delete(tc);
			if (hadFocus) pendingEl.focus();
		}
		for (const [tc, p] of pending) {
			let card = cards.get(tc);
			if (!card) {
				card = pendingCard(tc, p);
				cards.set(tc, card);
				pendingEl.append(card);
			}
			const d = card._dash;
			// aria-disabled, not disabled: the focused button keeps the
			// focus until its card goes (then the list gets it)
			for (const b of d.buttons)
				attrOf(b, "aria-disabled", p.sent ? "true" : null);
			card.dataset.state = p.sent ? "sent" : "waiting";
			d.note.textContent = p.note;
			d.note.hidden = !p.note;
			d.err.textContent = p.error || "";
			d.err.hidden = !p.error;
		}
		let empty = pendingEl.querySelector(".dash-empty");
		if (!pending.size && !empty) {
			empty = h("p", { class: "dash-empty" },
			    "No tool call is waiting for approval.");
			pendingEl.append(empty);
		} else if (pending.size && empty)
			empty.remove();
		pendingCount.textContent = pending.size ? `(${pending.size})` :
		    "";
	}

	// The row's fields, as shown and as filtered.
	function clip(x, n) {
		let t = typeof x === "string" ? x : "";
		if (!t && x !== undefined && x !== null) {
			try { t = JSON.stringify(x); } catch (e) { t = ""; }
		}
		return t.length > n ? t.slice(0, n) + "…" : t;
	}

	function auditFields(ev) {
		const t = ev.type;
		const f = { tool: "", agent: str(ev.agentId), risk: "",
		    decision: "", by: str(ev.by), summary: "",
		    time: ev.timestamp || ev.ts };
		const who = ev.approverId ? `${f.by} ${str(ev.approverId)}`.trim() :
		    f.by;
		if (t === "audit_entry") {
			f.tool = str(ev.tool);
			f.risk = str(ev.risk);
			f.decision = str(ev.decision);
			f.summary = str(ev.summary);
			if (!f.tool && ev.actionId) {
				// an agent's approval of a proposed action
				f.tool = "action approval";
				f.by = who;
				f.summary = [str(ev.actionId), f.summary,
				    ev.awaiting ? `awaiting ${str(ev.awaiting)}` : ""]
				    .filter(Boolean).join(" — ");
			}
		} else if (t === "autonomy_changed") {
			f.tool = "autonomy";
			f.summary = `${str(ev.previous) || "?"} → ${str(ev.level)}`;
		} else {
			const a = ev.action && typeof ev.action === "object" ?
			    ev.action : null;
			let what = "";
			f.tool = t.replace("_", " ");
			if (t === "action_proposed" || t === "action_execute")
				what = a ? [str(a.type), str(a.description)]
				    .filter(Boolean).join(": ") : "";
			else if (t === "action_approved") {
				f.decision = "approved";
				f.by = who;
			} else if (t === "action_rejected") {
				f.decision = "rejected";
				f.by = who;
				what = str(ev.reason);
			} else if (t === "action_expired") {
				f.decision = "expired";
				what = ev.phase ? `expired while ${str(ev.phase)}` : "";
			} else if (t === "action_result")
				what = ev.error !== undefined && ev.error !== null ?
				    "error: " + clip(ev.error && ev.error.message ||
				    ev.error, 200) : clip(ev.result, 200);
			f.summary = [str(ev.actionId), what].filter(Boolean)
			    .join(" — ");
		}
		return f;
	}

	function auditRow(seq, ev) {
		const f = auditFields(ev);
		const risk = f.risk.replace(/[^a-z]/g, "");
		const dec = f.decision.replace(/[^a-z]/g, "");
		const tr = h("tr", { dataset: { seq: String(seq),
		    type: str(ev.type), decision: f.decision, risk: f.risk } },
		    h("td", { class: "num" }, String(seq)),
		    h("td", { class: "audit-time" }, h("time", { attrs: { datetime:
		        str(ev.timestamp || ev.ts) } }, f.time ?
		        fmtTime(f.time) : "")),
		    h("td", { class: "audit-tool" }, f.tool),
		    h("td", { class: "audit-agent" }, f.agent),
		    h("td", null, f.risk ? h("span", { class:
		        `risk risk-${risk}` }, f.risk) : ""),
		    h("td", null, f.decision ? h("span", { class:
		        `decision decision-${dec}` }, f.decision) : ""),
		    h("td", null, f.by),
		    h("td", { class: "audit-summary" }, f.summary));
		if (ev.type === "audit_entry" && ev.toolCallId)
			tr.setAttribute("data-tool-call-id", str(ev.toolCallId));
		if (ev.actionId)
			tr.setAttribute("data-action-id", str(ev.actionId));
		tr._dash = { tool: f.tool.toLowerCase(), agent:
		    f.agent.toLowerCase(), decision: f.decision, risk: f.risk };
		return tr;
	}

	function lowerBound(arr, v) {
		let lo = 0, hi = arr.length;
		while (lo < hi) {
			const mid = (lo + hi) >> 1;
			if (arr[mid] < v) lo = mid + 1;
			else hi = mid;
		}
		return lo;
	}

	function renderAudit() {
		// Like a log: a table scrolled to its end stays at its end.
		const wrap = auditWrap;
		const atEnd = wrap.scrollTop + wrap.clientHeight >=
		    wrap.scrollHeight - 8;
		if (auditNew.length) {
			auditNew.sort((a, b) => a - b);
			const tail = document.createDocumentFragment();
			const tailSeqs = [];
			const max = auditSeqs.length ?
			    auditSeqs[auditSeqs.length - 1] : -1;
			for (const seq of auditNew) {
				if (auditRows.has(seq) || !audit.has(seq)) continue;
				const tr = auditRow(seq, audit.get(seq));
				auditRows.set(seq, tr);
				if (!filter) filter = readFilter();
				if (matches(tr._dash, filter)) shown++;
				else tr.hidden = true;
				if (seq > max) {
					tail.append(tr);
					tailSeqs.push(seq);
				} else {
					const i = lowerBound(auditSeqs, seq);
					auditBody.insertBefore(tr,
					    auditRows.get(auditSeqs[i]));
					auditSeqs.splice(i, 0, seq);
				}
			}
			auditNew.length = 0;
			auditBody.append(tail);
			for (const s of tailSeqs) auditSeqs.push(s);
			if (atEnd && tailSeqs.length)
				wrap.scrollTop = wrap.scrollHeight;
		}
		const L = auditLoad;
		if (L.error) {
			auditErr.hidden = false;
			auditErr.textContent = L.error;
		} else
			auditErr.hidden = true;
		// Not disabled while loading: a focused button that is disabled
		// loses the keyboard focus.
		attrOf(refreshBtn, "aria-disabled", L.state === "loading" ? "true" :
		    null);
		setText(refreshBtn, L.state === "loading" ? "Loading…" :
		    "Refresh");
	}

	// The filters as they are now; a row is shown when it matches.
	let filter = null;
	let shown = 0;                  // rows that match it

	function readFilter() {
		return { tool: fTool.value.trim().toLowerCase(),
		    agent: fAgent.value.trim().toLowerCase(),
		    dec: fDecision.value, risk: fRisk.value };
	}

	function matches(d, f) {
		return (!f.tool || d.tool.includes(f.tool)) &&
		    (!f.agent || d.agent.includes(f.agent)) &&
		    (!f.dec || d.decision === f.dec) &&
		    (!f.risk || d.risk === f.risk);
	}

	// New rows are filtered as they are made (renderAudit); every row
	// is walked again only when a filter changed.
	function renderFilter(changed) {
		if (changed || !filter) {
			filter = readFilter();
			shown = 0;
			for (const tr of auditRows.values()) {
				const ok = matches(tr._dash, filter);
				if (tr.hidden === ok) tr.hidden = !ok;
				if (ok) shown++;
			}
		}
		const f = filter;
		const total = auditRows.size;
		const filtered = f.tool || f.agent || f.dec || f.risk;
		setText(auditCount, total ? filtered ? `(${shown} of ${total})` :
		    `(${total})` : "");
		auditEmpty.hidden = shown > 0;
		setText(auditEmpty, auditLoad.state === "loading" && !total ?
		    "Loading the audit trail…" : total ?
		    "No entry matches the filters." : "No audit entries yet.");
	}

	// --- the audit trail from the server ---
	async function loadAudit() {
		const gen = ++auditLoad.gen;
		auditLoad.state = "loading";
		auditLoad.error = null;
		invalidate("audit");
		let after = 0, pages = 0;
		try {
			for (;;) {
				const page = await ctx.api("GET", "/api/audit?sessionId=" +
				    encodeURIComponent(sid) + `&after=${after}` +
				    `&limit=${AUDIT_PAGE}`);
				if (destroyed || gen !== auditLoad.gen) return;
				const entries = page && Array.isArray(page.entries) ?
				    page.entries : [];
				for (const ev of entries) addAudit(ev);
				pages++;
				const next = page ? num(page.next) : null;
				if (!page || !page.more || next === null ||
				    next <= after || pages >= AUDIT_PAGES) {
					if (next !== null) auditLoad.next = next;
					break;
				}
				after = next;
			}
			auditLoad.state = "done";
		} catch (e) {
			if (destroyed || gen !== auditLoad.gen) return;
			auditLoad.state = "error";
			const code = e && e.code ? e.code : "";
			const status = e && e.status ? e.status : 0;
			let what = "";
			if (status === 403 || code === "FORBIDDEN")
				what = " Only the entries logged while this page " +
				    "is open are shown; an admin token, or one " +
				    "scoped to this session, reads the whole trail.";
			else if (status === 401 || code === "UNAUTHORIZED")
				what = " Enter a valid access token, then Refresh.";
			else if (status === 404 || code === "NOT_FOUND")
				what = " The session does not exist any more " +
				    "(retention passed).";
			else
				what = " Press Refresh to try again.";
			auditLoad.error = "Could not load the audit trail: " +
			    [code || (status ? `HTTP ${status}` : ""),
			    e && e.message ? e.message : String(e)]
			    .filter(Boolean).join(" — ") + "." + what;
		}
		invalidate("audit");
	}


	function tick() {
		// Only while shown: notices a stream that stopped sending.
		invalidate("head");
	}

	return {
		show() {
			if (destroyed) return;
			visible = true;
			root.hidden = false;
			if (!started) {
				started = true;
				dconn.connect();
				loadAudit();
			}
			if (!staleTimer) staleTimer = setInterval(tick, 2000);
			invalidate("head", "charts", "agents", "pending", "audit");
		},
		hide() {
			visible = false;
			root.hidden = true;
			if (staleTimer) {
				clearInterval(staleTimer);
				staleTimer = 0;
			}
		},
		destroy() {
			if (destroyed) return;
			destroyed = true;
			visible = false;
			if (staleTimer) clearInterval(staleTimer);
			staleTimer = 0;
			for (const off of unsubs) {
				try { off(); } catch (e) { /* already gone */ }
			}
			unsubs.length = 0;
			dconn.close();
			auditLoad.gen++;
		},
	};
}
