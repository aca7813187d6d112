// Replaced by the dash view (issue 17).
import { h } from "./dom.js";
export function create(ctx) {
  ctx.root.appendChild(h("p", { class: "muted" }, "dash view"));
  return { show() {}, hide() {}, destroy() {} };
}
