// Replaced by the chat view (issue 17).
import { h } from "./dom.js";
export function create(ctx) {
  ctx.root.appendChild(h("p", { class: "muted" }, "chat view"));
  return { show() {}, hide() {}, destroy() {} };
}
