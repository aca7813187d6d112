// DOM helpers.  Every piece of text from the server, a model, a tool or a
// user reaches the page through these as a text node or an attribute
// value, never as markup: there is no innerHTML anywhere in the page.

const SVGNS = "http://www.w3.org/2000/svg";

function append(el, c) {
  if (c === null || c === undefined || c === false) return;
  if (Array.isArray(c)) { for (const x of c) append(el, x); return; }
  el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
}

function apply(el, props) {
  if (!props) return;
  for (const [k, v] of Object.entries(props)) {
    if (v === null || v === undefined) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "id") el.id = v;
    else if (k === "text") el.textContent = String(v);
    else if (k === "hidden") el.hidden = !!v;
    else if (k === "attrs") {
      for (const [a, av] of Object.entries(v)) {
        // Event handler attributes would be script from data.
        if (/^on/i.test(a)) throw new Error("dom: refusing attribute " + a);
        if (av !== null && av !== undefined && av !== false)
          el.setAttribute(a, av === true ? "" : String(av));
      }
    } else if (k === "dataset") {
      for (const [d, dv] of Object.entries(v))
        if (dv !== null && dv !== undefined) el.dataset[d] = String(dv);
    } else if (k === "on") {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    } else {
      throw new Error("dom: unknown property " + k);
    }
  }
}

// h(tag, props, ...children): an HTML element.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

// svg(tag, attrs, ...children): an SVG element; attrs are attributes.
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  if (attrs) {
    for (const [a, v] of Object.entries(attrs)) {
      if (/^on/i.test(a)) throw new Error("dom: refusing attribute " + a);
      if (v !== null && v !== undefined && v !== false)
        el.setAttribute(a, String(v));
    }
  }
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// schedule(key, fn): fn runs once in the next animation frame, however
// often it is asked for before then; the latest fn for a key wins.  A
// page in a background tab gets no frames, so a timer stands in.
const pending = new Map();
let frame = 0;
function flush() {
  frame = 0;
  const jobs = [...pending.values()];
  pending.clear();
  for (const fn of jobs) {
    try { fn(); } catch (e) { console.error(e); }
  }
}
export function schedule(key, fn) {
  pending.set(key, fn);
  if (frame) return;
  frame = document.hidden ? setTimeout(flush, 50) : requestAnimationFrame(flush);
}

const two = (n) => String(n).padStart(2, "0");

export function fmtTime(ts) {
  if (ts === undefined || ts === null || ts === "") return "";
  const d = new Date(typeof ts === "number" ? ts : String(ts));
  if (isNaN(d)) return String(ts);
  return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
}

export function fmtDuration(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}

export function fmtCost(usd) {
  if (typeof usd !== "number" || !isFinite(usd)) return "";
  if (usd === 0) return "$0";
  if (usd < 0.01) return "$" + usd.toPrecision(2);
  return "$" + usd.toFixed(usd < 1 ? 4 : 2);
}

export function fmtNumber(n) {
  if (typeof n !== "number" || !isFinite(n)) return "";
  return n.toLocaleString("en-US");
}
