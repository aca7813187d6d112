// ui_views: the team and dashboard views render and work (t_ui_views.py:
// parleyd, fakellm as the model, server-everything's echo high risk).
// Two external agents share a thread of thoughts and one proposes an
// action; a chat turn runs a low-risk tool (audited auto) and a second one
// waits for approval.
//  team: #roster lists the agents (data-agent-id, data-status), each
//    thought is one [data-thought-id] in #thought-graph's SVG, the action
//    is shown proposed, approved by its button (action_approved in /log),
//    done after the agent's result; a directive typed in #directive-input
//    is logged;
//  dashboard: #charts has one <svg data-metric> per chart, the pending
//    approval is listed in #pending-approvals, #audit-table has a row per
//    audited call, the #audit-filter-* inputs narrow it.
// Screenshots: E2E_LOGDIR/ui-team.png, ui-dashboard.png (and ui-views-chat).
import { main, check, sleep, log, logEvents, logUntil, ofType, doneCount,
  fakeScript, openChat, sendChat, socket, sendAcked, rest } from "./ui_lib.mjs";

const SID = "ui-views-1";

await main("ui_views", async (t) => {
  const { page } = t;
  const r = await rest("POST", "/sessions", { sessionId: SID, objective: "Show the views", config: { thoughtVisibility: "all" } });
  check(r.status === 201, `POST /sessions -> ${r.status} ${JSON.stringify(r.body)}`);
  const a1 = await socket(SID, "role=agent&agentId=analyst");
  const a2 = await socket(SID, "role=agent&agentId=reviewer");
  const th = [
    [a1, { thoughtId: "th_1", content: "The retry loop re-sends after a timeout", category: "analysis", confidence: 0.9, references: [] }],
    [a2, { thoughtId: "th_2", content: "That explains the duplicate orders", category: "hypothesis", confidence: 0.6, references: ["th_1"], inResponseTo: "th_1" }],
    [a1, { thoughtId: "th_3", content: "Add an idempotency key to each order", category: "synthesis", confidence: 0.8, references: ["th_1", "th_2"], inResponseTo: "th_2", actionable: true }],
  ];
  for (const [who, thought] of th) await sendAcked(who, { type: "thought_share", thought });

  // a turn with a low-risk tool (audited "auto"), then one left waiting for approval
  await openChat(t, SID);
  await fakeScript([
    { kind: "tool_calls", calls: [{ id: "call_v_1", name: "everything__get-sum", arguments: JSON.stringify({ a: 2, b: 3 }) }] },
    { kind: "text", text: "The sum is five", usage: { in: 40, out: 12 } },
    { kind: "tool_calls", calls: [{ id: "call_v_2", name: "everything__echo", arguments: JSON.stringify({ message: "pending-one" }) }] },
    { kind: "text", text: "Echoed" }]);
  await sendChat(t, "add two and three");
  await logUntil(SID, (e) => doneCount(e) === 1, "done of the first turn");
  await sendChat(t, "now echo");
  const req = ofType(await logUntil(SID, (e) => ofType(e, "tool_approve_request").length === 1,
    "the echo's approval request"), "tool_approve_request")[0];
  await t.waitSel(`section:has(#chat-log) .approval[data-tool-call-id="${req.toolCallId}"]`, 10000, "the approval prompt");
  await t.shot("views-chat");

  // team
  await page.click('a[data-view="team"]');
  await t.waitFn("the team route", (sid) => location.hash === `#/s/${sid}/team`, SID);
  await t.waitFn("three thoughts in #thought-graph", () =>
    document.querySelectorAll("#thought-graph [data-thought-id]").length >= 3, null, 10000);
  const ids = await page.$$eval("#thought-graph [data-thought-id]", (els) => els.map((e) => e.getAttribute("data-thought-id")));
  for (const id of ["th_1", "th_2", "th_3"])
    check(ids.filter((x) => x === id).length === 1, `thought ${id} is ${ids.filter((x) => x === id).length} nodes in the graph: ${ids}`);
  check(await t.count("#thought-graph svg") >= 1, "#thought-graph has no <svg>");
  check(await page.$$eval("#thought-graph [data-thought-id]", (els) => els.every((e) => e.closest("svg"))),
    "thought nodes are not inside the graph's <svg>");
  const roster = await page.$$eval("#roster .agent[data-agent-id]", (els) =>
    els.map((e) => [e.getAttribute("data-agent-id"), e.getAttribute("data-status")]));
  log("roster:", JSON.stringify(roster));
  check(roster.length >= 1 && roster.every(([, s]) => s), `#roster ${JSON.stringify(roster)}`);
  const st = await rest("GET", `/sessions/${SID}`);
  for (const ag of (st.body && st.body.agents) || [])
    if (ag.agentId) check(roster.some(([id]) => id === ag.agentId), `agent ${ag.agentId} of GET /sessions/${SID} not in #roster`);

  const prop = await sendAcked(a1, { type: "action_propose", action: { type: "code_change",
    description: "Add an idempotency key to POST /orders", params: { file: "src/orders.ts" } } });
  const proposed = ofType(await logUntil(SID, (e) => ofType(e, "action_proposed").length === 1, "action_proposed"), "action_proposed")[0];
  const aid = proposed.actionId;
  log(`action ${aid} proposed (ack ${JSON.stringify(prop)})`);
  const act = `#actions .action[data-action-id="${aid}"]`;
  await t.waitSel(`${act}[data-state="proposed"]`, 10000, "the action in state proposed");
  await t.shot("team");
  await page.click(`${act} button[data-act="approve"]`);
  await logUntil(SID, (e) => ofType(e, "action_approved").some((x) => x.actionId === aid), "action_approved after the click");
  await t.waitFn("the action approved or executing", (s) =>
    ["approved", "executing"].includes((document.querySelector(s) || {}).getAttribute?.("data-state")), act, 10000);
  await sendAcked(a1, { type: "action_result", actionId: aid, result: { ok: true, summary: "merged" } });
  await t.waitSel(`${act}[data-state="done"]`, 10000, "the action in state done after its result");
  const appr = ofType(await logEvents(SID), "action_approved").filter((x) => x.actionId === aid);
  check(appr.length === 1, `${appr.length} action_approved for one click`);

  await t.waitSel("#directive-input");
  await page.type("#directive-input", "Focus on the order service");
  await page.click("#directive-send");
  await logUntil(SID, (e) => ofType(e, "directive").some((x) => x.message === "Focus on the order service"),
    "the directive sent from #directive-input");
  await sleep(300);
  await t.shot("team-after");

  // dashboard
  await page.click('a[data-view="dashboard"]');
  await t.waitFn("the dashboard route", (sid) => location.hash === `#/s/${sid}/dashboard`, SID);
  await t.waitFn("charts in #charts", () => document.querySelectorAll("#charts svg[data-metric]").length >= 1, null, 15000);
  const metrics = await page.$$eval("#charts svg[data-metric]", (els) => els.map((e) => e.getAttribute("data-metric")));
  log("charts:", metrics.join(", "));
  check(new Set(metrics).size === metrics.length, `a metric has two charts: ${metrics}`);
  // a metrics event with data drawn: wait for something more than the axes
  await t.waitFn("a chart with data", () => [...document.querySelectorAll("#charts svg[data-metric]")]
    .some((s) => s.querySelector("path, polyline, rect, circle")), null, 15000);
  await t.waitFn("the pending approval in #pending-approvals", (id) => {
    const p = document.querySelector("#pending-approvals");
    return p && (p.querySelector(`[data-tool-call-id="${id}"]`) || p.textContent.includes("everything__echo"));
  }, req.toolCallId, 10000);
  const audit = await rest("GET", `/api/audit?sessionId=${SID}`);
  check(audit.status === 200, `GET /api/audit -> ${audit.status}`);
  const entries = Array.isArray(audit.body) ? audit.body : (audit.body.entries || audit.body.items || []);
  await t.waitFn("rows in #audit-table", () => document.querySelectorAll("#audit-table tr[data-tool-call-id]").length >= 1, null, 10000);
  const rows = await page.$$eval("#audit-table tr[data-tool-call-id]", (els) => els.map((e) => e.getAttribute("data-tool-call-id")));
  log(`audit rows ${rows.length}, /api/audit ${entries.length}: ${JSON.stringify(entries).slice(0, 300)}`);
  const auto = ofType(await logEvents(SID), "audit_entry").filter((e) => e.tool === "everything__get-sum");
  check(auto.length === 1 && rows.includes(auto[0].toolCallId), `no #audit-table row for the get-sum call ${auto[0] && auto[0].toolCallId}: ${rows}`);
  const filters = await page.$$eval("[id^='audit-filter-']", (els) => els.map((e) => e.id));
  check(filters.length >= 1, "no #audit-filter-* input");
  log("audit filters:", filters.join(", "));
  await t.shot("dashboard");
  // a filter on the tool narrows the table (when there is one for it)
  const toolF = filters.find((f) => /tool/.test(f));
  if (toolF) {
    const tag = await page.$eval(`#${toolF}`, (e) => e.tagName);
    if (tag === "SELECT") {
      const vals = await page.$$eval(`#${toolF} option`, (os) => os.map((o) => o.value));
      if (vals.includes("everything__get-sum")) await page.select(`#${toolF}`, "everything__get-sum");
    } else {
      await page.type(`#${toolF}`, "get-sum");
    }
    await t.waitFn("the audit table filtered by tool", () =>
      [...document.querySelectorAll("#audit-table tr[data-tool-call-id]")].filter((r) => r.offsetParent !== null)
        .every((r) => r.textContent.includes("get-sum")), null, 5000);
    await t.shot("dashboard-filtered");
  }

  // dark: the colour scheme follows prefers-color-scheme
  const lum = () => {
    const rgb = (c) => (c.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number);
    const l = ([r, g, b]) => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
    const cs = getComputedStyle(document.body);
    return { bg: l(rgb(cs.backgroundColor)), fg: l(rgb(cs.color)), bgc: cs.backgroundColor };
  };
  const light = await page.evaluate(lum);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  await sleep(300);
  const dark = await page.evaluate(lum);
  log(`body light ${JSON.stringify(light)}, dark ${JSON.stringify(dark)}`);
  check(light.bg > 0.6 && light.fg < 0.4, `light scheme: background ${light.bgc} (luminance ${light.bg.toFixed(2)}), text ${light.fg.toFixed(2)}`);
  check(dark.bg < 0.3 && dark.fg > 0.6, `dark scheme: background ${dark.bgc} (luminance ${dark.bg.toFixed(2)}), text ${dark.fg.toFixed(2)}`);
  await t.shot("dashboard-dark");
  await page.click('a[data-view="team"]');
  await t.waitFn("the team route", (sid) => location.hash === `#/s/${sid}/team`, SID);
  await sleep(300);
  await t.shot("team-dark");
  await page.click('a[data-view="chat"]');
  await t.waitFn("the chat route", (sid) => location.hash === `#/s/${sid}/chat`, SID);
  await sleep(300);
  await t.shot("chat-dark");
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);

  // every control the views made is a real button (keyboard usable)
  const notButtons = await page.$$eval(".approval [data-decision], #pending-approvals [data-decision], #actions [data-act]", (els) =>
    els.filter((e) => e.tagName !== "BUTTON").map((e) => e.tagName + "." + e.className));
  check(notButtons.length === 0, `controls that are not <button>: ${notButtons.slice(0, 5)}`);
  check(await t.count(".approval button[data-decision]") >= 3, "the pending approval's buttons are gone from the chat view");
  a1.close();
  a2.close();
});
