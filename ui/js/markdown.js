// A small, safe Markdown renderer for chat text.
//
// It builds DOM nodes only: every piece of source text reaches the page as a
// text node, and the only attributes it sets are class names it makes up, a
// list's start number and the href of a link whose scheme is http:, https:
// or mailto:.  There is no innerHTML anywhere, and raw HTML in the source is
// shown as text.
//
// Supported: paragraphs (a newline inside one is kept as a line break),
// ATX headings, emphasis, strong, strikethrough, inline code, fenced code
// blocks (language label and a copy button), bullet and ordered lists (nested
// by indentation), blockquotes, thematic breaks, simple pipe tables, links
// [text](url) and <url>, bare http(s) URLs.
//
// Text with no Markdown syntax and no newline renders as one <p> whose
// textContent is the source, character for character (nothing is trimmed or
// decoded).
//
// For streamed text use new MarkdownView(container) and call set(text) as
// often as the text grows (at most once per animation frame): the source is
// split into top-level blocks and a block whose source did not change keeps
// its nodes, so only the growing tail is parsed and built again.

const FENCE = /^( {0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST = /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)/;
const TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const BLANK = /^[ \t]*$/;
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

function isBlank(line) {
  return BLANK.test(line);
}

// Whether line starts a block other than a paragraph (so it ends one).
function startsBlock(line) {
  return FENCE.test(line) || ATX.test(line) || HR.test(line) ||
    QUOTE.test(line) || LIST.test(line);
}

function indentOf(line) {
  let n = 0;
  for (const c of line) {
    if (c === " ") n++;
    else if (c === "\t") n += 4 - (n % 4);
    else break;
  }
  return n;
}

// Removes up to n columns of leading indentation.
function dedent(line, n) {
  let i = 0, col = 0;
  while (i < line.length && col < n) {
    if (line[i] === " ") col++;
    else if (line[i] === "\t") col += 4 - (col % 4);
    else break;
    i++;
  }
  return line.slice(i);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && s[i + 1] === "|") { cur += "|"; i++; continue; }
    if (s[i] === "|") { cells.push(cur.trim()); cur = ""; continue; }
    cur += s[i];
  }
  cells.push(cur.trim());
  return cells;
}

// Splits lines into block descriptors {type, src, ...}.  Nested content
// (quotes, list items) is kept as lines and parsed when the block is built.
export function parseBlocks(lines) {
  const blocks = [];
  let i = 0;
  const n = lines.length;
  while (i < n) {
    const line = lines[i];
    if (isBlank(line)) { i++; continue; }
    const start = i;
    let m;
    if ((m = FENCE.exec(line))) {
      const indent = m[1].length, fence = m[2];
      const body = [];
      const closer = new RegExp("^ {0,3}" + fence[0] + "{" + fence.length +
                                ",}[ \\t]*$");
      let closed = false;
      i++;
      while (i < n) {
        const l = lines[i];
        if (closer.test(l)) { closed = true; i++; break; }
        body.push(dedent(l, indent));
        i++;
      }
      blocks.push({ type: "code", lang: m[3] || "", text: body.join("\n"),
                    closed, src: lines.slice(start, i).join("\n") });
      continue;
    }
    if ((m = ATX.exec(line))) {
      blocks.push({ type: "heading", level: m[1].length, text: m[2] || "",
                    src: line });
      i++;
      continue;
    }
    if (HR.test(line)) {
      blocks.push({ type: "hr", src: line });
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < n && !isBlank(lines[i])) {
        if (QUOTE.test(lines[i])) inner.push(lines[i].replace(QUOTE, ""));
        else if (startsBlock(lines[i])) break;
        else inner.push(lines[i]);           // lazy continuation
        i++;
      }
      blocks.push({ type: "quote", lines: inner,
                    src: lines.slice(start, i).join("\n") });
      continue;
    }
    if ((m = LIST.exec(line))) {
      const ordered = /\d/.test(m[2]);
      const delim = m[2].slice(-1);
      const items = [];
      let tight = true;
      while (i < n) {
        const l = lines[i];
        const mm = LIST.exec(l);
        if (!mm || /\d/.test(mm[2]) !== ordered || mm[2].slice(-1) !== delim ||
            HR.test(l)) break;
        const contentCol = mm[1].length + mm[2].length +
          (mm[3].length > 4 || mm[3].length === 0 ? 1 : mm[3].length);
        const item = { lines: [l.slice(mm[0].length)],
                       number: ordered ? parseInt(mm[2], 10) : 0 };
        i++;
        let sawBlank = false;
        while (i < n) {
          const c = lines[i];
          if (isBlank(c)) { sawBlank = true; item.lines.push(""); i++; continue; }
          // Indented past the item's marker: its content, and a list
          // item there is nested (models indent by 2 under "1. " too).
          if (indentOf(c) >= contentCol ||
              (indentOf(c) > mm[1].length + 1 && LIST.test(c))) {
            if (sawBlank) tight = false;
            item.lines.push(dedent(c, Math.min(indentOf(c), contentCol)));
            sawBlank = false;
            i++;
            continue;
          }
          if (sawBlank || startsBlock(c)) break;
          item.lines.push(c);                  // lazy continuation
          i++;
        }
        while (item.lines.length && isBlank(item.lines[item.lines.length - 1]))
          item.lines.pop();
        items.push(item);
        if (sawBlank && i < n && LIST.test(lines[i])) tight = false;
        if (sawBlank && (i >= n || !LIST.test(lines[i]))) break;
      }
      blocks.push({ type: "list", ordered, start: items[0].number, items, tight,
                    src: lines.slice(start, i).join("\n") });
      continue;
    }
    if (line.includes("|") && i + 1 < n && TABLE_SEP.test(lines[i + 1]) &&
        lines[i + 1].includes("-")) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]).map((c) =>
        c.startsWith(":") && c.endsWith(":") ? "center" :
          c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "");
      const rows = [];
      i += 2;
      while (i < n && !isBlank(lines[i]) && lines[i].includes("|")) {
        rows.push(splitRow(lines[i]));
        i++;
      }
      blocks.push({ type: "table", head, aligns, rows,
                    src: lines.slice(start, i).join("\n") });
      continue;
    }
    // Paragraph: up to a blank line or the start of another block.
    const para = [line];
    i++;
    while (i < n && !isBlank(lines[i]) && !startsBlock(lines[i])) {
      para.push(lines[i]);
      i++;
    }
    blocks.push({ type: "para", text: para.join("\n"), src: para.join("\n") });
  }
  return blocks;
}

// ---- inline ----

function isSpace(c) {
  return c === undefined || c === "" || /\s/.test(c);
}

function isPunct(c) {
  return c !== undefined && /[!-/:-@[-`{-~]/.test(c);
}

function isAlnum(c) {
  return c !== undefined && /[\p{L}\p{N}]/u.test(c);
}

// The URL if it is absolute with a safe scheme, else null.
export function safeUrl(raw) {
  const s = String(raw).trim();
  if (s === "" || /[\u0000-\u001f\u007f\s]/.test(s)) return null;
  let u;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  if (!SAFE_SCHEMES.has(u.protocol)) return null;
  return u.href;
}

function link(href, children) {
  const a = el("a");
  a.setAttribute("href", href);
  a.setAttribute("rel", "noopener noreferrer");
  a.setAttribute("target", "_blank");
  for (const c of children) a.append(c);
  return a;
}

// Index of the closing run of n backticks after position i, or -1.
function findBackticks(s, i, n) {
  let j = i;
  while (j < s.length) {
    const k = s.indexOf("`", j);
    if (k < 0) return -1;
    let e = k;
    while (s[e] === "`") e++;
    if (e - k === n) return k;
    j = e;
  }
  return -1;
}

// Finds the closer of a delimiter run (ch repeated n times) opened at `from`.
function findCloser(s, from, ch, n) {
  let j = from;
  while (j < s.length) {
    const c = s[j];
    if (c === "\\") { j += 2; continue; }
    if (c === "`") {
      let e = j;
      while (s[e] === "`") e++;
      const close = findBackticks(s, e, e - j);
      j = close < 0 ? e : close + (e - j);
      continue;
    }
    if (c === ch) {
      let e = j;
      while (s[e] === ch) e++;
      const run = e - j;
      const before = s[j - 1], after = s[e];
      const rightFlanking = !isSpace(before) &&
        (!isPunct(before) || isSpace(after) || isPunct(after));
      const okUnderscore = ch !== "_" || !isAlnum(after);
      if (run >= n && rightFlanking && okUnderscore && j > from) {
        // For a longer run, close with its last n characters.
        return j + run - n;
      }
      j = e;
      continue;
    }
    j++;
  }
  return -1;
}

// Finds the ] matching the [ at i, or -1.
function findBracket(s, i) {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (c === "\\") { j++; continue; }
    if (c === "`") {
      let e = j;
      while (s[e] === "`") e++;
      const close = findBackticks(s, e, e - j);
      if (close >= 0) j = close + (e - j) - 1;
      else j = e - 1;
      continue;
    }
    if (c === "[") depth++;
    else if (c === "]" && --depth === 0) return j;
  }
  return -1;
}

const URL_RE = /(?:https?:\/\/|mailto:)[^\s<>]*[^\s<>.,:;!?"')\]}*_~]/y;

const BRACKETS_MAX = 64;

// Parses inline Markdown of s into an array of Nodes.
export function inline(s) {
  const out = [];
  // Without these, many openers that never close make the scans for
  // their closers quadratic: 20,000 "_a " took 20 s.  A run that found
  // no closer from e finds none from any later position either; and past
  // BRACKETS_MAX unmatched [ the rest are text.
  const noCloser = new Map();
  let badBrackets = 0;
  let text = "";
  const flush = () => {
    if (text) { out.push(document.createTextNode(text)); text = ""; }
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && isPunct(s[i + 1])) {
      text += s[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      let e = i;
      while (s[e] === "`") e++;
      const n = e - i;
      const close = findBackticks(s, e, n);
      if (close < 0) { text += s.slice(i, e); i = e; continue; }
      let code = s.slice(e, close).replace(/\n/g, " ");
      if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " &&
          code.trim() !== "") code = code.slice(1, -1);
      flush();
      const ce = el("code", "md-icode");
      ce.textContent = code;
      out.push(ce);
      i = close + n;
      continue;
    }
    if (c === "*" || c === "_" || c === "~") {
      let e = i;
      while (s[e] === c) e++;
      const run = e - i;
      const before = s[i - 1], after = s[e];
      const leftFlanking = !isSpace(after) &&
        (!isPunct(after) || isSpace(before) || isPunct(before));
      const okUnderscore = c !== "_" || !isAlnum(before);
      if (leftFlanking && okUnderscore && (c !== "~" || run === 2)) {
        const want = c === "~" ? 2 : run >= 2 ? 2 : 1;
        // Open with the last `want` characters of the run.
        const open = e - want;
        const key = c + want;
        let close = -1;
        if (!(noCloser.get(key) <= e)) {
          close = findCloser(s, e, c, want);
          if (close < 0) noCloser.set(key, e);
        }
        if (close > e) {
          text += s.slice(i, open);
          flush();
          const tag = c === "~" ? "del" : want === 2 ? "strong" : "em";
          const node = el(tag);
          for (const k of inline(s.slice(e, close))) node.append(k);
          out.push(node);
          i = close + want;
          continue;
        }
      }
      text += s.slice(i, e);
      i = e;
      continue;
    }
    if (c === "[") {
      const rb = badBrackets < BRACKETS_MAX ? findBracket(s, i) : -1;
      if (rb < 0) badBrackets++;
      if (rb > 0 && s[rb + 1] === "(") {
        const m = /^\(\s*<?([^\s<>()]*(?:\([^\s<>()]*\)[^\s<>()]*)*)>?(?:\s+("[^"]*"|'[^']*'))?\s*\)/
          .exec(s.slice(rb + 1));
        if (m) {
          const label = inline(s.slice(i + 1, rb));
          const href = safeUrl(m[1]);
          flush();
          if (href) {
            const a = link(href, label);
            if (m[2]) a.setAttribute("title", m[2].slice(1, -1));
            out.push(a);
          } else {
            // Unsafe or relative: show the label and the target as text.
            const span = el("span", "md-badlink");
            for (const k of label) span.append(k);
            span.setAttribute("title", "link not followed: " + m[1]);
            out.push(span);
          }
          i = rb + 1 + m[0].length;
          continue;
        }
      }
      text += c;
      i++;
      continue;
    }
    if (c === "<") {
      const m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/.exec(s.slice(i));
      const href = m && safeUrl(m[1]);
      if (href) {
        flush();
        out.push(link(href, [document.createTextNode(m[1])]));
        i += m[0].length;
        continue;
      }
      text += c;
      i++;
      continue;
    }
    if ((c === "h" || c === "m") && !isAlnum(s[i - 1])) {
      URL_RE.lastIndex = i;
      const m = URL_RE.exec(s);
      const href = m && safeUrl(m[0]);
      if (href) {
        flush();
        out.push(link(href, [document.createTextNode(m[0])]));
        i += m[0].length;
        continue;
      }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}

// ---- blocks to DOM ----

function copyText(text, button) {
  const done = (ok) => {
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  };
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).then(() => done(true), () => done(false));
  } else {
    done(false);
  }
}

function buildCode(b) {
  const wrap = el("div", "md-code");
  const head = el("div", "md-code-head");
  const label = el("span", "md-code-lang");
  label.textContent = b.lang || "text";
  const btn = el("button", "md-copy");
  btn.setAttribute("type", "button");
  btn.setAttribute("aria-label", "Copy code" + (b.lang ? " (" + b.lang + ")" : ""));
  btn.textContent = "Copy";
  const pre = el("pre");
  const code = el("code");
  if (/^[\w+#.-]{1,32}$/.test(b.lang)) code.className = "language-" + b.lang;
  code.textContent = b.text;
  btn.addEventListener("click", () => copyText(code.textContent, btn));
  head.append(label, btn);
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

// Past these, a block is shown as its plain source: text from a model
// must not be able to make the page's parser work for seconds (or blow
// the stack with 3,000 nested quotes).
const MAX_DEPTH = 16;		// nested quotes and lists
const MAX_INLINE = 16384;	// characters of one paragraph or heading

function plain(text, tight) {
  if (tight) return document.createTextNode(text);
  const p = el("p");
  p.textContent = text;
  return p;
}

function buildBlock(b, tight, depth = 0) {
  if (depth > MAX_DEPTH) return plain(b.src, tight);
  switch (b.type) {
    case "para": {
      if (b.text.length > MAX_INLINE) return plain(b.text, tight);
      if (tight) {
        const f = document.createDocumentFragment();
        for (const k of inline(b.text)) f.append(k);
        return f;
      }
      const p = el("p");
      for (const k of inline(b.text)) p.append(k);
      return p;
    }
    case "heading": {
      // Level 1 is the page's, level 2 the view's: a message's headings
      // start at h3, and keep their Markdown level as a class.
      const e = el("h" + Math.min(6, b.level + 2), "md-h" + b.level);
      if (b.text.length > MAX_INLINE) e.textContent = b.text;
      else for (const k of inline(b.text)) e.append(k);
      return e;
    }
    case "hr":
      return el("hr");
    case "code":
      return buildCode(b);
    case "quote": {
      const q = el("blockquote");
      for (const k of parseBlocks(b.lines)) q.append(buildBlock(k, false, depth + 1));
      return q;
    }
    case "list": {
      const l = el(b.ordered ? "ol" : "ul");
      if (b.ordered && b.start !== 1) l.setAttribute("start", String(b.start));
      for (const it of b.items) {
        const li = el("li");
        for (const k of parseBlocks(it.lines)) li.append(buildBlock(k, b.tight, depth + 1));
        l.append(li);
      }
      return l;
    }
    case "table": {
      const wrap = el("div", "md-table");
      const t = el("table");
      const thead = el("thead");
      const tr = el("tr");
      b.head.forEach((cell, k) => {
        const th = el("th");
        if (b.aligns[k]) th.className = "md-align-" + b.aligns[k];
        for (const x of inline(cell)) th.append(x);
        tr.append(th);
      });
      thead.append(tr);
      const tbody = el("tbody");
      for (const row of b.rows) {
        const r = el("tr");
        for (let k = 0; k < b.head.length; k++) {
          const td = el("td");
          if (b.aligns[k]) td.className = "md-align-" + b.aligns[k];
          for (const x of inline(row[k] || "")) td.append(x);
          r.append(td);
        }
        tbody.append(r);
      }
      t.append(thead, tbody);
      wrap.append(t);
      return wrap;
    }
  }
  return document.createTextNode("");
}

// Renders Markdown text into a new DocumentFragment.
export function render(text) {
  const f = document.createDocumentFragment();
  for (const b of parseBlocks(String(text).split("\n"))) f.append(buildBlock(b, false));
  return f;
}

// Keeps container showing the Markdown of a growing text; set() reuses the
// nodes of every top-level block whose source is unchanged.
export class MarkdownView {
  constructor(container) {
    this.container = container;
    this.text = null;
    this.blocks = [];      // [{src, type, node}]
  }

  set(text) {
    text = String(text);
    if (text === this.text) return;
    const parsed = parseBlocks(text.split("\n"));
    const old = this.blocks;
    const next = [];
    let k = 0;
    // Keep the unchanged prefix.
    while (k < parsed.length && k < old.length && old[k].src === parsed[k].src &&
           old[k].type === parsed[k].type) {
      next.push(old[k]);
      k++;
    }
    for (let j = k; j < old.length; j++) old[j].node.remove();
    for (let j = k; j < parsed.length; j++) {
      const node = buildBlock(parsed[j], false);
      this.container.append(node);
      next.push({ src: parsed[j].src, type: parsed[j].type, node });
    }
    this.blocks = next;
    // Only once built: a text that failed is tried again, not skipped.
    this.text = text;
  }

  clear() {
    for (const b of this.blocks) b.node.remove();
    this.blocks = [];
    this.text = null;
  }
}
