// The thought DAG as an SVG graph.
//
// Layout: the reply forest (inResponseTo) in compact layers.  A thought sits
// one column to the right of the thought it responds to; the first reply
// continues its parent's row, later replies open new rows below, so a thread
// reads left to right and a branch drops down.  Thoughts that respond to
// nothing drawn start a new row at column 0, in arrival order.  Reference
// links (references[] naming a thought) are drawn as dashed arrows.
//
// Only the last `maxNodes` thoughts are drawn (a note says so): the page must
// stay readable and fast with thousands of them.  Node elements are kept by
// thoughtId and moved, never rebuilt, so a render costs O(drawn nodes).
//
// Every piece of thought text reaches the DOM as SVG <text>/<title> content
// (textContent), never as markup.

import { svg } from "./dom.js";

// thought_share's categories, and "reasoning": an internal agent's streamed
// reasoning block, logged as a thought by the server.
export const CATEGORIES = ["observation", "analysis", "hypothesis", "plan",
  "critique", "synthesis", "question", "reasoning"];

const NODE_W = 184;
const NODE_H = 56;
const COL_W = 220;
const ROW_H = 72;
const PAD = 16;
const TOP = 36;          // room above row 0 for reference arcs
const EXCERPT = 26;

function excerpt(s, n) {
  s = String(s ?? "").replace(/\s+/g, " ").trim();
  return s.length > n ? s.slice(0, n - 1) + "\u2026" : s;
}

export function categoryClass(cat) {
  return CATEGORIES.includes(cat) ? "cat-" + cat : "cat-other";
}

export function confidenceText(c) {
  return typeof c === "number" && isFinite(c) ? c.toFixed(2) : "\u2013";
}

export class ThoughtGraph {
  // opts: {onSelect(thoughtId), maxNodes, agentLabel(agentId) -> string}
  constructor(opts = {}) {
    this.onSelect = opts.onSelect || (() => {});
    this.maxNodes = opts.maxNodes || 300;
    this.agentLabel = opts.agentLabel || ((id) => id || "?");
    this.nodes = new Map();   // thoughtId -> {g, key}
    this.edges = new Map();   // edge key -> <path>
    this.pos = new Map();     // thoughtId -> {col, row}
    this.drawn = [];          // thoughtIds drawn, arrival order
    this.parentOf = new Map();
    this.firstChild = new Map();
    this.selected = null;
    this.focusId = null;      // the one node with tabindex 0 (roving)
    this.zoom = 1;
    this.w = 1;
    this.h = 1;

    this.el = svg("svg", {
      class: "thought-svg", role: "group",
      "aria-label": "Thought graph: arrow keys move between thoughts, Enter shows one",
      width: 1, height: 1,
    });
    const defs = svg("defs", null,
      svg("marker", {
        id: "tg-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
        markerUnits: "userSpaceOnUse", markerWidth: 8, markerHeight: 8,
        orient: "auto-start-reverse",
      }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: "tg-arrow" })),
      // Text is clipped to its node's box (in each node's own coordinates).
      svg("clipPath", { id: "tg-clip", clipPathUnits: "userSpaceOnUse" },
        svg("rect", { x: 6, y: 0, width: NODE_W - 12, height: NODE_H })));
    this.edgeLayer = svg("g", { class: "tg-edges" });
    this.nodeLayer = svg("g", { class: "tg-nodes" });
    this.el.append(defs, this.edgeLayer, this.nodeLayer);

    this._onClick = (e) => {
      const g = e.target.closest && e.target.closest("[data-thought-id]");
      if (g && this.nodeLayer.contains(g)) this._choose(g.dataset.thoughtId, false);
    };
    this._onKey = (e) => this._key(e);
    this.el.addEventListener("click", this._onClick);
    this.el.addEventListener("keydown", this._onKey);
  }

  destroy() {
    this.el.removeEventListener("click", this._onClick);
    this.el.removeEventListener("keydown", this._onKey);
    this.nodes.clear();
    this.edges.clear();
  }

  // all: thoughts in arrival order ({thoughtId, agentId, content, category,
  // confidence, references, inResponseTo, actionable, redacted}).
  // Returns {drawn, total}.
  render(all) {
    const list = all.length > this.maxNodes ? all.slice(all.length - this.maxNodes) : all;
    const byId = new Map();
    for (const t of list) byId.set(t.thoughtId, t);
    this._layout(list, byId);

    // Nodes: create what is new, update what changed, drop what left.
    for (const [id, n] of this.nodes) {
      if (!byId.has(id)) {
        n.g.remove();
        this.nodes.delete(id);
      }
    }
    let maxCol = 0, maxRow = 0;
    for (const t of list) {
      const p = this.pos.get(t.thoughtId);
      if (p.col > maxCol) maxCol = p.col;
      if (p.row > maxRow) maxRow = p.row;
      let n = this.nodes.get(t.thoughtId);
      const key = nodeKey(t, this.agentLabel(t.agentId));
      if (!n) {
        n = { g: null, key: null };
        this.nodes.set(t.thoughtId, n);
      }
      if (n.key !== key) {
        const g = this._node(t);
        if (n.g) n.g.replaceWith(g); else this.nodeLayer.append(g);
        n.g = g;
        n.key = key;
        n.tgSel = n.tgTab = undefined;   // a new element: set its marks
      }
      const tr = `translate(${PAD + p.col * COL_W},${TOP + p.row * ROW_H})`;
      if (n.g.tgTr !== tr) {     // unchanged attributes are not set again
        n.g.setAttribute("transform", tr);
        n.g.tgTr = tr;
      }
    }
    // Keep DOM order = arrival order so the reading order is sensible.
    let prev = null;
    for (const t of list) {
      const g = this.nodes.get(t.thoughtId).g;
      if (prev ? prev.nextSibling !== g : this.nodeLayer.firstChild !== g) {
        if (prev) prev.after(g); else this.nodeLayer.prepend(g);
      }
      prev = g;
    }

    this._edges(list, byId);
    this._highlight();
    this.w = PAD * 2 + maxCol * COL_W + NODE_W;
    this.h = TOP + PAD + maxRow * ROW_H + NODE_H;
    this._size();

    // Roving tabindex: exactly one node is in the tab order.
    if (!this.focusId || !byId.has(this.focusId)) {
      this.focusId = this.selected && byId.has(this.selected) ? this.selected :
        (list.length ? list[list.length - 1].thoughtId : null);
    }
    this._marks();
    return { drawn: list.length, total: all.length };
  }

  // Zoom: the drawing keeps its coordinates (viewBox), the element scales.
  setZoom(z) {
    this.zoom = Math.max(0.25, Math.min(2, z));
    this._size();
    return this.zoom;
  }

  _size() {
    this.el.setAttribute("viewBox", `0 0 ${this.w} ${this.h}`);
    this.el.setAttribute("width", Math.ceil(this.w * this.zoom));
    this.el.setAttribute("height", Math.ceil(this.h * this.zoom));
  }

  // The selected thought's links stand out.
  _highlight() {
    const id = this.selected;
    for (const e of this.edges.values()) {
      const on = !!id && (e.getAttribute("data-from") === id || e.getAttribute("data-to") === id);
      if (on !== !!e.tgHl) {
        e.classList.toggle("hl", on);
        e.tgHl = on;
        if (on) this.edgeLayer.append(e);   // on top of the other edges
      }
    }
  }

  // Selection and the roving tabindex, set only where they change.
  _marks() {
    for (const [id, n] of this.nodes) {
      const sel = id === this.selected, tab = id === this.focusId;
      if (n.tgSel !== sel) {
        n.g.classList.toggle("selected", sel);
        n.g.setAttribute("aria-pressed", sel ? "true" : "false");
        n.tgSel = sel;
      }
      if (n.tgTab !== tab) {
        n.g.setAttribute("tabindex", tab ? "0" : "-1");
        n.tgTab = tab;
      }
    }
  }

  select(id) {
    this.selected = id;
    this._highlight();
    if (id && this.nodes.has(id)) this.focusId = id;
    this._marks();
  }

  // Moves the focus to a node (and scrolls it into view).
  focus(id) {
    const n = this.nodes.get(id);
    if (!n) return false;
    this.focusId = id;
    this._marks();
    n.g.focus();
    if (n.g.scrollIntoView) n.g.scrollIntoView({ block: "nearest", inline: "nearest" });
    return true;
  }

  _choose(id, viaKey) {
    this.select(id);
    if (viaKey) this.focus(id);
    this.onSelect(id);
  }

  _key(e) {
    const g = e.target.closest && e.target.closest("[data-thought-id]");
    if (!g) return;
    const id = g.dataset.thoughtId;
    let to = null;
    switch (e.key) {
      case "Enter":
      case " ":
        e.preventDefault();
        this._choose(id, true);
        return;
      case "ArrowLeft": to = this.parentOf.get(id); break;
      case "ArrowRight": to = this.firstChild.get(id); break;
      case "ArrowUp": to = this.drawn[this.drawn.indexOf(id) - 1]; break;
      case "ArrowDown": to = this.drawn[this.drawn.indexOf(id) + 1]; break;
      case "Escape":
        if (!this.selected) return;
        e.preventDefault();
        this._choose(null, false);
        return;
      case "Home": to = this.drawn[0]; break;
      case "End": to = this.drawn[this.drawn.length - 1]; break;
      default: return;
    }
    e.preventDefault();
    if (to) this.focus(to);
  }

  _layout(list, byId) {
    const kids = new Map();
    const roots = [];
    this.parentOf.clear();
    this.firstChild.clear();
    this.drawn = list.map((t) => t.thoughtId);
    for (const t of list) {
      const up = t.inResponseTo;
      if (up && byId.has(up) && up !== t.thoughtId) {
        this.parentOf.set(t.thoughtId, up);
        let k = kids.get(up);
        if (!k) { k = []; kids.set(up, k); this.firstChild.set(up, t.thoughtId); }
        k.push(t.thoughtId);
      } else {
        roots.push(t.thoughtId);
      }
    }
    // Iterative depth-first placement (preorder): the first reply stays on
    // its parent's row, each later reply takes the next free row.
    this.pos.clear();
    let nextRow = 0;
    for (const r of roots) {
      const stack = [[r, 0, -1]];
      while (stack.length) {
        const [id, col, want] = stack.pop();
        if (this.pos.has(id)) continue;     // cannot happen in a DAG; be safe
        const row = want < 0 ? nextRow : want;
        this.pos.set(id, { col, row });
        if (row >= nextRow) nextRow = row + 1;
        const k = kids.get(id);
        if (!k) continue;
        for (let i = k.length - 1; i >= 0; i--) stack.push([k[i], col + 1, i === 0 ? row : -1]);
      }
    }
  }

  // Edges are kept by (from, to, kind) too: a path is created once and its
  // d changed only when one of its ends moved.
  _edges(list, byId) {
    const next = new Map();
    const put = (key, cls, from, to, d, marker) => {
      let e = this.edges.get(key);
      if (!e) {
        e = svg("path", { class: cls, "data-from": from, "data-to": to });
        if (marker) e.setAttribute("marker-end", marker);
        this.edgeLayer.append(e);
      }
      if (e.tgD !== d) {
        e.setAttribute("d", d);
        e.tgD = d;
      }
      next.set(key, e);
    };
    for (const t of list) {
      const p = this.pos.get(t.thoughtId);
      const x1 = PAD + p.col * COL_W, y1 = TOP + p.row * ROW_H + NODE_H / 2;
      const up = this.parentOf.get(t.thoughtId);
      if (up) {
        const q = this.pos.get(up);
        const x0 = PAD + q.col * COL_W + NODE_W, y0 = TOP + q.row * ROW_H + NODE_H / 2;
        const mx = (x0 + x1) / 2;
        put(`r\u0001${t.thoughtId}`, "tg-edge tg-reply", t.thoughtId, up,
          `M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}`, null);
      }
      for (const ref of Array.isArray(t.references) ? t.references : []) {
        if (typeof ref !== "string" || !ref.startsWith("th_") || !byId.has(ref) || ref === up ||
            ref === t.thoughtId) continue;
        const q = this.pos.get(ref);
        // From the top of the newer thought to the top of the one it names.
        const ax = PAD + p.col * COL_W + NODE_W / 2, ay = TOP + p.row * ROW_H;
        const bx = PAD + q.col * COL_W + NODE_W / 2, by = TOP + q.row * ROW_H;
        const lift = 18 + Math.min(60, Math.abs(ax - bx) / 6 + Math.abs(ay - by) / 6);
        const cy = Math.max(4, Math.min(ay, by) - lift);
        put(`f\u0001${t.thoughtId}\u0001${ref}`, "tg-edge tg-ref", t.thoughtId, ref,
          `M${ax},${ay} C${ax},${cy} ${bx},${cy} ${bx},${by}`, "url(#tg-arrow)");
      }
    }
    for (const [key, e] of this.edges) if (!next.has(key)) e.remove();
    this.edges = next;
  }

  // One node drawn once, cloned for each thought (much cheaper than
  // building each node element by element).
  _template() {
    if (this.tpl) return this.tpl;
    const bw = NODE_W - 52;
    this.tpl = svg("g", { class: "tg-node", role: "button", tabindex: "-1" },
      svg("title"),
      svg("rect", { class: "tg-box", width: NODE_W, height: NODE_H, rx: 6, ry: 6 }),
      svg("rect", { class: "tg-stripe", width: 5, height: NODE_H, rx: 2, ry: 2 }),
      svg("text", { class: "tg-head", x: 12, y: 16, "clip-path": "url(#tg-clip)" }),
      svg("text", { class: "tg-body", x: 12, y: 33, "clip-path": "url(#tg-clip)" }),
      svg("rect", { class: "tg-conf-track", x: 12, y: 42, width: bw, height: 5, rx: 2, ry: 2 }),
      svg("rect", { class: "tg-conf-bar", x: 12, y: 42, width: 0, height: 5, rx: 2, ry: 2 }),
      svg("text", { class: "tg-conf", x: NODE_W - 8, y: 48, "text-anchor": "end" }),
      svg("text", { class: "tg-flag", x: NODE_W - 8, y: 16, "text-anchor": "end" }));
    return this.tpl;
  }

  _node(t) {
    const agent = this.agentLabel(t.agentId);
    const conf = typeof t.confidence === "number" ? Math.max(0, Math.min(1, t.confidence)) : null;
    const cat = t.category || "?";
    const g = this._template().cloneNode(true);
    g.setAttribute("class", "tg-node " + categoryClass(t.category) + (t.actionable ? " actionable" : "") +
      (t.redacted ? " redacted" : "") + (t.fresh ? " tg-fresh" : ""));
    t.fresh = false;
    g.setAttribute("data-thought-id", t.thoughtId);
    g.setAttribute("data-category", cat);
    g.setAttribute("aria-label", `${agent}, ${cat}, confidence ${confidenceText(t.confidence)}` +
      (t.actionable ? ", actionable" : "") + ": " + (t.redacted ? "redacted" : excerpt(t.content, 120)));
    const [title, , , head, body, , bar, num, flag] = g.children;
    title.textContent = (t.redacted ? "(redacted)" : excerpt(t.content, 600)) +
      `\n\u2014 ${agent} \u00b7 ${cat} \u00b7 ${confidenceText(t.confidence)}`;
    head.textContent = excerpt(agent, 18) + " \u00b7 " + cat;
    body.textContent = t.redacted ? "(redacted)" : excerpt(t.content, EXCERPT);
    // Confidence: a bar and the number.
    if (conf !== null) bar.setAttribute("width", Math.max(1, (NODE_W - 52) * conf));
    else bar.remove();
    num.textContent = confidenceText(t.confidence);
    if (t.actionable) flag.textContent = "\u2691";
    else flag.remove();
    return g;
  }
}

function nodeKey(t, agent) {
  return [agent, t.category, t.confidence, t.actionable ? 1 : 0, t.redacted ? 1 : 0,
    typeof t.content === "string" ? t.content.length : 0,
    typeof t.content === "string" ? t.content.slice(0, EXCERPT) : ""].join("\u0001");
}
