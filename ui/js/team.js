// Replaced by the team view (issue 17).
import { h } from "./dom.js";
export function create(ctx) {
  ctx.root.appendChild(h("p", { class: "muted" }, "team view"));
  return { show() {}, hide() {}, destroy() {} };
}
