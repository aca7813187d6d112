// Tiny SVG charts for the dashboard: a line chart of a rolling window of
// samples and a horizontal bar chart. No library; every node is made with
// svg() from dom.js and every label is a text node, so nothing here parses
// markup. Each draw replaces the chart's children (a few dozen nodes): the
// caller decides how often (dash.js draws at most once per animation frame
// and only while the dashboard is visible).
import { svg, clear } from "./dom.js";

const W = 240;          // viewBox width of every chart
const LINE_H = 84;      // viewBox height of a line chart
const PAD_L = 44;       // room for the y-axis labels
const PAD_R = 6;
const PAD_T = 8;
const PAD_B = 16;       // room for the x-axis (time) labels

function finite(v) {
	return typeof v === "number" && Number.isFinite(v);
}

function plain(v) {
	return String(v);
}

// "tokens: 1,234" in both the <title> (tooltips, some screen readers) and
// aria-label (role="img" makes it one image with that name).
function label(el, text) {
	el.setAttribute("role", "img");
	el.setAttribute("aria-label", text);
	el.appendChild(svg("title", null, text));
}

function text(x, y, anchor, cls, s) {
	return svg("text", { x: x.toFixed(1), y: y.toFixed(1),
	    "text-anchor": anchor, class: cls }, s);
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

/*
 * A line chart in el (an <svg>): opts = {
 *   series: [{name, values: [number|null], cls?}]  (oldest first; the
 *           first series is the one the label names),
 *   capacity: how many samples the window holds (the x axis; default 60),
 *   times:  [label of the oldest sample, label of the newest] (optional),
 *   format: number -> string for the axis and the label (default String),
 *   title:  what it shows ("Connections"),
 *   min:    the lowest y shown (default 0, or the lowest value if negative)
 * }. Samples fill the window from the right, newest at the right edge.
 */
export function drawLine(el, opts) {
	const series = opts.series || [];
	const fmt = opts.format || plain;
	const cap = Math.max(2, opts.capacity || 60);
	const all = [];
	for (const s of series) for (const v of s.values) all.push(v);
	const [lo, hi] = range(all, opts.min);
	const x0 = PAD_L, x1 = W - PAD_R, y0 = PAD_T, y1 = LINE_H - PAD_B;
	const step = (x1 - x0) / (cap - 1);
	const yOf = (v) => y1 - (v - lo) / (hi - lo) * (y1 - y0);

	clear(el);
	el.setAttribute("viewBox", `0 0 ${W} ${LINE_H}`);
	el.setAttribute("class", "chart chart-line");
	const first = series[0];
	const latest = first && first.values.length ?
	    first.values[first.values.length - 1] : null;
	label(el, `${opts.title}: ${finite(latest) ? fmt(latest) :
	    "no data yet"}`);

	// frame and a middle grid line
	el.appendChild(svg("line", { x1: x0, x2: x1, y1: y1, y2: y1,
	    class: "chart-axis" }));
	el.appendChild(svg("line", { x1: x0, x2: x0, y1: y0, y2: y1,
	    class: "chart-axis" }));
	el.appendChild(svg("line", { x1: x0, x2: x1, y1: (y0 + y1) / 2,
	    y2: (y0 + y1) / 2, class: "chart-grid" }));
	// y axis: its max and min
	el.appendChild(text(x0 - 4, y0 + 4, "end", "chart-tick", fmt(hi)));
	el.appendChild(text(x0 - 4, y1, "end", "chart-tick", fmt(lo)));
	// x axis: the times of the newest sample and, once the line is long
	// enough for both labels to fit, of the oldest one shown
	if (opts.times && opts.times.length === 2) {
		const n = Math.min(first ? first.values.length : 0, cap);
		if (n > 1 && (n - 1) * step >= 90)
			el.appendChild(text(x1 - (n - 1) * step, LINE_H - 3,
			    "start", "chart-tick", opts.times[0] || ""));
		el.appendChild(text(x1, LINE_H - 3, "end", "chart-tick",
		    opts.times[1] || ""));
	}

	series.forEach((s, si) => {
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
		const cls = `chart-series chart-s${si}` + (s.cls ? ` ${s.cls}` : "");
		if (d) {
			const p = svg("path", { d, class: cls });
			if (s.name) p.appendChild(svg("title", null, s.name));
			el.appendChild(p);
		}
		if (pen)
			el.appendChild(svg("circle", { cx: lastX.toFixed(1),
			    cy: lastY.toFixed(1), r: 2.2,
			    class: `chart-dot chart-s${si}` }));
	});
}

const BAR_W = W;
const BAR_ROW = 20;
const BAR_LABEL = 64;   // room for the bar's name
const BAR_VALUE = 48;   // room for its value

/*
 * A horizontal bar chart in el: opts = {bars: [{label, value}], format,
 * title}. One row per bar, scaled to the largest; each bar's value is
 * printed after it; the label names every bar's value.
 */
export function drawBars(el, opts) {
	const bars = opts.bars || [];
	const fmt = opts.format || plain;
	const h = Math.max(1, bars.length) * BAR_ROW + 16;
	let max = 0;
	for (const b of bars)
		if (finite(b.value)) max = Math.max(max, b.value);
	if (max <= 0) max = 1;
	clear(el);
	el.setAttribute("viewBox", `0 0 ${BAR_W} ${h}`);
	el.setAttribute("class", "chart chart-bars");
	label(el, `${opts.title}: ` + (bars.length ? bars.map((b) =>
	    `${b.label} ${finite(b.value) ? fmt(b.value) : "n/a"}`).join(", ") :
	    "no agents"));
	const x0 = BAR_LABEL, x1 = BAR_W - BAR_VALUE;
	el.appendChild(svg("line", { x1: x0, x2: x0, y1: 2,
	    y2: h - 14, class: "chart-axis" }));
	bars.forEach((b, i) => {
		const y = 4 + i * BAR_ROW;
		const v = finite(b.value) ? b.value : 0;
		const w = Math.max(v > 0 ? 1 : 0, (x1 - x0) * v / max);
		const name = b.label.length > 12 ? b.label.slice(0, 11) + "…" :
		    b.label;
		const t = text(x0 - 4, y + 10, "end", "chart-tick", name);
		t.appendChild(svg("title", null, b.label));
		el.appendChild(t);
		el.appendChild(svg("rect", { x: x0, y, width: w.toFixed(1),
		    height: BAR_ROW - 7, class: `chart-bar chart-s${i % 6}` }));
		el.appendChild(text(x0 + w + 3, y + 10, "start", "chart-tick",
		    finite(b.value) ? fmt(b.value) : "n/a"));
	});
	// x axis: 0 and the largest value
	el.appendChild(text(x0, h - 3, "start", "chart-tick", fmt(0)));
	el.appendChild(text(x1, h - 3, "end", "chart-tick", fmt(max)));
}
