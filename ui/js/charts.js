// Tiny SVG charts for the dashboard: a line chart of a rolling window of
// samples and a horizontal bar chart. No library; every node is made with
// svg() from dom.js and every label is a text node, so nothing here parses
// markup. A chart's nodes are made on its first draw (or when its shape
// changes: another number of series or bars); later draws only change the
// attributes and texts that differ, so a redraw is a handful of DOM writes.
// The caller decides how often to draw (dash.js: at most once per
// animation frame, only while the dashboard is shown).
import { svg, clear } from "./dom.js";

const W = 240;          // viewBox width of every chart
const LINE_H = 84;      // viewBox height of a line chart
const PAD_L = 44;       // room for the y-axis labels
const PAD_R = 6;
const PAD_T = 8;
const PAD_B = 16;       // room for the x-axis (time) labels
const MIN_SPAN = 90;    // x distance the oldest time label needs

function finite(v) {
	return typeof v === "number" && Number.isFinite(v);
}

function plain(v) {
	return String(v);
}

// Writes only what changed (a write of the same value is still work).
function attr(el, name, value) {
	const v = String(value);
	if (el.getAttribute(name) !== v) el.setAttribute(name, v);
}

function setText(el, s) {
	const v = String(s);
	if (el.textContent !== v) el.textContent = v;
}

function show(el, on) {
	if (on) {
		if (el.hasAttribute("visibility")) el.removeAttribute("visibility");
	} else
		attr(el, "visibility", "hidden");
}

function text(x, y, anchor, cls) {
	return svg("text", { x: x.toFixed(1), y: y.toFixed(1),
	    "text-anchor": anchor, class: cls });
}

// The chart's name with its value, as its accessible name (role="img"
// makes the <svg> one image named by aria-label) and as its <title>
// (tooltips; the first child, where SVG wants it).
function start(el, viewBox, cls) {
	clear(el);
	el.setAttribute("viewBox", viewBox);
	el.setAttribute("class", cls);
	el.setAttribute("role", "img");
	const title = svg("title");
	el.appendChild(title);
	return title;
}

function name(el, title, s) {
	attr(el, "aria-label", s);
	setText(title, s);
}

// The y range: from min(0, lowest) (or opts.min) to the highest, never empty.
function range(values, fixedMin) {
	let lo = Infinity, hi = -Infinity;
	for (const v of values) {
		if (!finite(v)) continue;
		if (v < lo) lo = v;
		if (v > hi) hi = v;
	}
	if (lo === Infinity) { lo = 0; hi = 0; }
	if (finite(fixedMin)) lo = Math.min(fixedMin, lo);
	else if (lo > 0) lo = 0;
	if (hi <= lo) hi = lo + 1;
	return [lo, hi];
}

function buildLine(el, nseries) {
	const x0 = PAD_L, x1 = W - PAD_R, y0 = PAD_T, y1 = LINE_H - PAD_B;
	const c = { nseries, series: [] };
	c.title = start(el, `0 0 ${W} ${LINE_H}`, "chart chart-line");
	el.appendChild(svg("line", { x1: x0, x2: x1, y1, y2: y1,
	    class: "chart-axis" }));
	el.appendChild(svg("line", { x1: x0, x2: x0, y1: y0, y2: y1,
	    class: "chart-axis" }));
	el.appendChild(svg("line", { x1: x0, x2: x1, y1: (y0 + y1) / 2,
	    y2: (y0 + y1) / 2, class: "chart-grid" }));
	c.max = el.appendChild(text(x0 - 4, y0 + 4, "end", "chart-tick"));
	c.min = el.appendChild(text(x0 - 4, y1, "end", "chart-tick"));
	c.t0 = el.appendChild(text(x0, LINE_H - 3, "start", "chart-tick"));
	c.t1 = el.appendChild(text(x1, LINE_H - 3, "end", "chart-tick"));
	for (let i = 0; i < nseries; i++) {
		const s = {};
		s.path = el.appendChild(svg("path", {
		    class: `chart-series chart-s${i}` }));
		s.name = s.path.appendChild(svg("title"));
		s.dot = el.appendChild(svg("circle", { r: 2.2,
		    class: `chart-dot chart-s${i}` }));
		c.series.push(s);
	}
	el._chart = c;
	return c;
}

/*
 * A line chart in el (an <svg>): opts = {
 *   series: [{name, values: [number|null]}]  (oldest first; the first
 *           series is the one the accessible name gives the value of),
 *   capacity: how many samples the window holds (the x axis; default 60),
 *   times:  [label of the oldest sample, label of the newest] (optional),
 *   format: number -> string for the axis and the name (default String),
 *   title:  what it shows ("Connections"),
 *   min:    the lowest y shown (default 0, or the lowest value if negative)
 * }. Samples fill the window from the right, the newest at the right edge;
 * the y axis is labelled with its min and max, the x axis with the times
 * of the oldest (when there is room) and newest samples.
 */
export function drawLine(el, opts) {
	const series = opts.series || [];
	const fmt = opts.format || plain;
	const cap = Math.max(2, opts.capacity || 60);
	const all = [];
	for (const s of series) for (const v of s.values.slice(-cap)) all.push(v);
	const [lo, hi] = range(all, opts.min);
	const x0 = PAD_L, x1 = W - PAD_R, y0 = PAD_T, y1 = LINE_H - PAD_B;
	const step = (x1 - x0) / (cap - 1);
	const yOf = (v) => y1 - (v - lo) / (hi - lo) * (y1 - y0);
	let c = el._chart;
	if (!c || c.kind !== "line" || c.nseries !== series.length) {
		c = buildLine(el, series.length);
		c.kind = "line";
	}

	const first = series[0];
	const latest = first && first.values.length ?
	    first.values[first.values.length - 1] : null;
	name(el, c.title, `${opts.title}: ${finite(latest) ? fmt(latest) :
	    "no data yet"}`);
	setText(c.max, fmt(hi));
	setText(c.min, fmt(lo));

	const times = opts.times && opts.times.length === 2 ? opts.times :
	    ["", ""];
	const n = Math.min(first ? first.values.length : 0, cap);
	const span = (n - 1) * step;
	show(c.t0, n > 1 && span >= MIN_SPAN);
	attr(c.t0, "x", (x1 - Math.max(span, 0)).toFixed(1));
	setText(c.t0, times[0] || "");
	setText(c.t1, times[1] || "");

	series.forEach((s, si) => {
		const part = c.series[si];
		const vals = s.values.slice(-cap);
		const off = cap - vals.length;
		let d = "", pen = false, lastX = 0, lastY = 0;
		vals.forEach((v, i) => {
			if (!finite(v)) { pen = false; return; }
			const x = x0 + (off + i) * step, y = yOf(v);
			d += `${pen ? "L" : "M"}${x.toFixed(1)} ${y.toFixed(1)}`;
			pen = true;
			lastX = x;
			lastY = y;
		});
		setText(part.name, s.name || "");
		show(part.path, d !== "");
		attr(part.path, "d", d || "M0 0");
		// the newest value's dot, when the newest value is known
		const lastKnown = vals.length && finite(vals[vals.length - 1]);
		show(part.dot, lastKnown);
		if (lastKnown) {
			attr(part.dot, "cx", lastX.toFixed(1));
			attr(part.dot, "cy", lastY.toFixed(1));
		}
	});
}

const BAR_W = W;
const BAR_ROW = 20;
const BAR_LABEL = 64;   // room for the bar's name
const BAR_VALUE = 48;   // room for its value

function buildBars(el, nbars) {
	const h = Math.max(1, nbars) * BAR_ROW + 16;
	const x0 = BAR_LABEL, x1 = BAR_W - BAR_VALUE;
	const c = { kind: "bars", nbars, bars: [] };
	c.title = start(el, `0 0 ${BAR_W} ${h}`, "chart chart-bars");
	el.appendChild(svg("line", { x1: x0, x2: x0, y1: 2, y2: h - 14,
	    class: "chart-axis" }));
	for (let i = 0; i < nbars; i++) {
		const y = 4 + i * BAR_ROW;
		const b = {};
		b.label = el.appendChild(text(x0 - 4, y + 10, "end",
		    "chart-tick"));
		b.full = b.label.appendChild(svg("title"));
		b.short = b.label.appendChild(document.createTextNode(""));
		b.rect = el.appendChild(svg("rect", { x: x0, y, width: 0,
		    height: BAR_ROW - 7, class: `chart-bar chart-s${i % 6}` }));
		b.value = el.appendChild(text(x0, y + 10, "start",
		    "chart-tick"));
		c.bars.push(b);
	}
	// x axis: 0 and the largest value
	c.zero = el.appendChild(text(x0, h - 3, "start", "chart-tick"));
	c.top = el.appendChild(text(x1, h - 3, "end", "chart-tick"));
	el._chart = c;
	return c;
}

/*
 * A horizontal bar chart in el: opts = {bars: [{label, value}], format,
 * title}. One row per bar, scaled to the largest; each bar's value is
 * printed after it (n/a for a value that is not a number); the
 * accessible name lists every bar's value.
 */
export function drawBars(el, opts) {
	const bars = opts.bars || [];
	const fmt = opts.format || plain;
	let max = 0;
	for (const b of bars)
		if (finite(b.value)) max = Math.max(max, b.value);
	if (max <= 0) max = 1;
	let c = el._chart;
	if (!c || c.kind !== "bars" || c.nbars !== bars.length)
		c = buildBars(el, bars.length);
	name(el, c.title, `${opts.title}: ` + (bars.length ? bars.map((b) =>
	    `${b.label} ${finite(b.value) ? fmt(b.value) : "n/a"}`).join(", ") :
	    "no agents"));
	const x0 = BAR_LABEL, x1 = BAR_W - BAR_VALUE;
	bars.forEach((b, i) => {
		const part = c.bars[i];
		const v = finite(b.value) ? b.value : 0;
		const w = Math.max(v > 0 ? 1 : 0, (x1 - x0) * v / max);
		const label = String(b.label);
		setText(part.full, label);
		const short = label.length > 12 ? label.slice(0, 11) + "…" : label;
		if (part.short.data !== short) part.short.data = short;
		attr(part.rect, "width", w.toFixed(1));
		attr(part.value, "x", (x0 + w + 3).toFixed(1));
		setText(part.value, finite(b.value) ? fmt(b.value) : "n/a");
	});
	setText(c.zero, fmt(0));
	setText(c.top, fmt(max));
}
