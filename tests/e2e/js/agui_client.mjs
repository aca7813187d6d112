// Parley's AG-UI endpoint (POST /api/agui, GET /api/agui/{threadId}/stream)
// through AG-UI's own client, @ag-ui/client's HttpAgent, whose pipeline
// validates every event (zod schemas) and verifies their order
// (verifyEvents).  Does what the step says and prints one JSON line of
// what it saw; the Python test (t_agui.py) judges it against /log.
// usage: node agui_client.mjs PORT TOKEN THREAD STEP
//   reply:    one run streaming a reply
//   verify:   verifyEvents on the events of a run as they came (passes)
//             and with TEXT_MESSAGE_START left out (must fail), and an
//             HttpAgent against a fixture server sending a wrong order
//             (runAgent must fail)
//   approve:  a run that ends with an approval interrupt, then a run
//             whose resume approves it
//   client:   a client tool (read-only by its metadata.annotations): a
//             run that ends with pendingToolCallIds, then a run whose
//             tool message answers it
//   client_approve: the same tool without annotations: first an
//             approval interrupt, resumed, then the same round trip
//   resume:   a run read with fetch and cut after a few text deltas,
//             then the eventsource package on GET .../stream with
//             Last-Event-ID and, at once, without one (the run from its
//             start); then the same run POSTed again (its runId: a
//             replay of the whole run) as the reference
//   observer: a run with an observer's token (must fail: HTTP 403)
import http from "node:http";
import { createRequire } from "node:module";
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

const require = createRequire(import.meta.url);
const EventSource = require("eventsource");

const [port, token, thread, step] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const out = { step };
const timer = setTimeout(() => finish("timeout"), 60000);

function finish(why) {
	clearTimeout(timer);
	out.end = why;
	console.log(JSON.stringify(out));
	process.exit(why === "ok" ? 0 : 1);
}

function agent(messages) {
	return new HttpAgent({ url: `${base}/api/agui`, headers,
	    threadId: thread, initialMessages: messages || [] });
}

// One run; the events it saw, its result, the agent's messages.
async function run(a, params) {
	const events = [];
	const res = await a.runAgent(params, {
		onEvent: ({ event }) => { events.push(event); },
	});
	return { events, newMessages: res.newMessages,
	    messages: JSON.parse(JSON.stringify(a.messages)),
	    pendingInterrupts: a.pendingInterrupts || [] };
}

function text(messages) {
	return messages.filter((m) => m.role === "assistant")
	    .map((m) => m.content || "").join("");
}

async function verify(events) {
	try {
		await lastValueFrom(from(events).pipe(verifyEvents(false),
		    toArray()));
		return "ok";
	} catch (e) {
		return `error: ${e.message}`;
	}
}

// A server that answers any POST with a run in the wrong order.
function badServer() {
	return new Promise((resolve) => {
		const s = http.createServer((req, res) => {
			req.resume();
			req.on("end", () => {
				res.writeHead(200, {
				    "Content-Type": "text/event-stream" });
				const ev = [
				    { type: "RUN_STARTED", threadId: "x",
				      runId: "y" },
				    { type: "TEXT_MESSAGE_CONTENT",
				      messageId: "m", delta: "no start" },
				    { type: "RUN_FINISHED", threadId: "x",
				      runId: "y" }];
				for (const e of ev)
					res.write(`data: ${JSON.stringify(e)}\n\n`);
				res.end();
			});
		});
		s.listen(0, "127.0.0.1", () => resolve(s));
	});
}

// POST the run with fetch; the SSE blocks {id, event}, cut after n
// TEXT_MESSAGE_CONTENT (0: read to the end).
async function postRaw(body, n) {
	const ac = new AbortController();
	const r = await fetch(`${base}/api/agui`, { method: "POST",
	    headers: { ...headers, "Content-Type": "application/json",
	    Accept: "text/event-stream" }, body: JSON.stringify(body),
	    signal: ac.signal });
	const got = [];
	const dec = new TextDecoder();
	let buf = "", deltas = 0;
	const reader = r.body.getReader();
	for (;;) {
		let c;
		try {
			c = await reader.read();
		} catch (e) {
			break;
		}
		if (c.done)
			break;
		buf += dec.decode(c.value, { stream: true });
		let i;
		while ((i = buf.indexOf("\n\n")) >= 0) {
			const block = buf.slice(0, i);
			buf = buf.slice(i + 2);
			let id = null, data = "";
			for (const l of block.split("\n")) {
				if (l.startsWith("id: "))
					id = l.slice(4);
				else if (l.startsWith("data: "))
					data += l.slice(6);
			}
			if (!data)
				continue;
			const ev = JSON.parse(data);
			got.push({ id, event: ev });
			if (ev.type === "TEXT_MESSAGE_CONTENT" && n > 0 &&
			    ++deltas >= n) {
				ac.abort();
				return { status: r.status, got };
			}
		}
	}
	return { status: r.status, got };
}

// GET .../stream with the eventsource package from Last-Event-ID last;
// resolves at the server's 204 (no run left), or after the run's end
// when the package would reconnect.
function follow(last) {
	return new Promise((resolve) => {
		const got = [], errors = [];
		const h = { ...headers };
		if (last)
			h["Last-Event-ID"] = last;
		const es = new EventSource(`${base}/api/agui/${thread}/stream`,
		    { headers: h });
		es.onmessage = (m) => {
			got.push({ id: m.lastEventId, event: JSON.parse(m.data) });
		};
		es.onerror = (e) => {
			errors.push(e && e.status ? e.status : "closed");
			// The stream ends after RUN_FINISHED; the package then
			// comes back with that Last-Event-ID, which is answered
			// 204 once the turn is over.
			if ((e && e.status === 204) || errors.length > 3) {
				es.close();
				resolve({ got, errors });
			}
		};
	});
}

async function main() {
	const user = (id, content) => ({ id, role: "user", content });
	if (step === "reply") {
		const a = agent([user("u1", "hello")]);
		const r = await run(a, { runId: "run-reply-1" });
		out.events = r.events;
		out.text = text(r.messages);
		out.messages = r.messages;
	} else if (step === "verify") {
		const a = agent([user("u1", "check the order")]);
		const r = await run(a, { runId: "run-verify-1" });
		out.events = r.events.map((e) => e.type);
		out.asIs = await verify(r.events);
		out.broken = await verify(r.events.filter((e) =>
		    e.type !== "TEXT_MESSAGE_START"));
		const s = await badServer();
		const b = new HttpAgent({ url: `http://127.0.0.1:${
		    s.address().port}/`, threadId: "x",
		    initialMessages: [user("u1", "x")] });
		const err = console.error;
		console.error = () => {};	// its "Agent execution failed"
		try {
			await b.runAgent({ runId: "y" });
			out.fixture = "accepted";
		} catch (e) {
			out.fixture = `error: ${e.message}`;
		}
		console.error = err;
		s.close();
	} else if (step === "approve") {
		const a = agent([user("u1", "echo please")]);
		const r1 = await run(a, { runId: "run-approve-1" });
		out.run1 = { events: r1.events,
		    pendingInterrupts: r1.pendingInterrupts };
		const resume = r1.pendingInterrupts.map((i) => ({
		    interruptId: i.id, status: "resolved",
		    payload: { approved: true } }));
		const r2 = await run(a, { runId: "run-approve-2", resume });
		out.run2 = { events: r2.events };
		// Answered again: Parley acks the duplicate; the turn is
		// over, so there is nothing to continue (409).
		try {
			await agent([user("u1", "echo please")]).runAgent({
			    runId: "run-approve-3", resume });
			out.again = "accepted";
		} catch (e) {
			out.again = `error: ${e.status || e.message}`;
		}
		out.text = text(r2.messages);
		out.messages = r2.messages;
	} else if (step === "client" || step === "client_approve") {
		// Read-only by its MCP annotations: low risk, not asked about;
		// without them a client tool is high risk: an interrupt first.
		const tools = [{ name: "lookup", description: "Looks a word up",
		    parameters: { type: "object", properties: {
		    q: { type: "string" } } } }];
		if (step === "client")
			tools[0].metadata = { annotations: { readOnlyHint: true } };
		const a = agent([user("u1", "look it up")]);
		let r1 = await run(a, { runId: "run-client-1", tools });
		if (step === "client_approve") {
			out.asked = { events: r1.events,
			    pendingInterrupts: r1.pendingInterrupts };
			const resume = r1.pendingInterrupts.map((i) => ({
			    interruptId: i.id, status: "resolved",
			    payload: { approved: true } }));
			r1 = await run(a, { runId: "run-client-1b", tools,
			    resume });
		}
		out.run1 = { events: r1.events };
		const calls = r1.messages.flatMap((m) => m.toolCalls || []);
		out.calls = calls;
		for (const c of calls)
			a.addMessage({ id: `tool-${c.id}`, role: "tool",
			    toolCallId: c.id,
			    content: `RESULT-42 for ${c.function.arguments}` });
		const r2 = await run(a, { runId: "run-client-2", tools });
		out.run2 = { events: r2.events };
		out.text = text(r2.messages);
		out.messages = r2.messages;
	} else if (step === "resume") {
		const body = { threadId: thread, runId: "run-resume-1",
		    messages: [user("u1", "a long answer please")], tools: [],
		    context: [], state: {}, forwardedProps: {} };
		const first = await postRaw(body, 3);
		out.first = first.got;
		const last = first.got[first.got.length - 1].id;
		// With the last id: the rest; without: the run from its start.
		const [rest, whole] = await Promise.all([follow(last),
		    follow(null)]);
		out.follow = rest;
		out.whole = whole;
		// The same runId again: the run replayed, the reference.
		out.replay = (await postRaw(body, 0)).got;
		// The turn is over: no run to follow.
		out.after = await follow(null);
	} else if (step === "observer") {
		const a = agent([user("u1", "may I?")]);
		try {
			await a.runAgent({ runId: "run-obs-1" });
			out.result = "accepted";
		} catch (e) {
			out.result = `error: ${e.status} ${JSON.stringify(
			    e.payload)}`;
		}
	}
	finish("ok");
}

main().catch((e) => {
	out.error = String(e && e.stack || e);
	finish("error");
});
