// The Vercel AI SDK's own client code against parleyd's /api/chat: its
// DefaultChatTransport and readUIMessageStream, and its Chat core
// (AbstractChat with a plain ChatState, what useChat wraps) for tool
// approvals and resume.  Prints one JSON line with what it got.
// usage: node aisdk_client.mjs MODE PORT TOKEN CHAT TEXT [ARG]
//   stream	send TEXT, read the reply with readUIMessageStream
//   last	the same, posting only the last message
//		(prepareSendMessagesRequest)
//   approve	Chat: send TEXT, answer every approval request with
//		ARG ("approve" or "reject") through addToolApprovalResponse;
//		sendAutomaticallyWhen posts the answers
//   resume	Chat: send TEXT, stop after ARG text-delta chunks, then
//		resumeStream (GET /api/chat/CHAT/stream)
//   reconnect	transport.reconnectToStream once (null: 204)
import {
	AbstractChat,
	DefaultChatTransport,
	lastAssistantMessageIsCompleteWithApprovalResponses,
	readUIMessageStream,
} from "ai";

const [mode, port, token, chatId, text, arg] = process.argv.slice(2);
const api = `http://127.0.0.1:${port}/api/chat`;
const out = { mode, chunks: [] };

const timer = setTimeout(() => {
	out.end = "timeout";
	finish(1);
}, 60000);

function finish(rc) {
	clearTimeout(timer);
	console.log(JSON.stringify(out));
	process.exit(rc);
}

// A ChatState as plain as can be: what AbstractChat asks of a UI
// framework's store.
class PlainState {
	constructor() {
		this.status = "ready";
		this.error = undefined;
		this.messages = [];
	}
	pushMessage(m) {
		this.messages = this.messages.concat([m]);
	}
	popMessage() {
		this.messages = this.messages.slice(0, -1);
	}
	replaceMessage(i, m) {
		this.messages = this.messages.map((x, j) => (j === i ? m : x));
	}
	snapshot(thing) {
		return structuredClone(thing);
	}
}

class Chat extends AbstractChat {
	constructor(init) {
		super({ ...init, state: new PlainState() });
	}
}

// fetch that keeps every chunk the transport parses, for the test.
function recordingFetch(onChunk) {
	return async (url, init) => {
		const r = await fetch(url, init);
		out.requests = (out.requests || []).concat([{
			method: init.method, url: String(url), status: r.status,
			header: r.headers.get("x-vercel-ai-ui-message-stream"),
			body: init.body ? JSON.parse(init.body) : null,
		}]);
		if (!r.body || !onChunk)
			return r;
		const [a, b] = r.body.tee();
		(async () => {
			const rd = b.pipeThrough(new TextDecoderStream()).getReader();
			let buf = "";
			try {
				for (;;) {
					const { value, done } = await rd.read();
					if (done)
						break;
					buf += value;
					let i;
					while ((i = buf.indexOf("\n\n")) >= 0) {
						onChunk(buf.slice(0, i));
						buf = buf.slice(i + 2);
					}
				}
			} catch (e) {
				/* cut: the test's own abort */
			}
		})();
		return new Response(a, { status: r.status, headers: r.headers });
	};
}

function transport(opts = {}) {
	return new DefaultChatTransport({
		api,
		headers: { Authorization: `Bearer ${token}` },
		fetch: recordingFetch((block) => out.chunks.push(block)),
		...opts,
	});
}

function textOf(m) {
	return (m?.parts || []).filter((p) => p.type === "text")
	    .map((p) => p.text).join("");
}

const userMessage = {
	id: `u${Date.now().toString(36)}`,
	role: "user",
	parts: [{ type: "text", text }],
};

async function streamMode(onlyLast) {
	const t = transport(onlyLast ? {
		prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
			body: { id, messages: messages.slice(-1), trigger, messageId },
		}),
	} : {});
	const history = onlyLast ? [{
		id: "old1", role: "user", parts: [{ type: "text", text: "x" }],
	}, { id: "old2", role: "assistant", parts: [] }, userMessage] :
	    [userMessage];
	const stream = await t.sendMessages({
		chatId, messages: history, trigger: "submit-message",
		messageId: undefined, abortSignal: undefined,
	});
	let last;
	for await (const m of readUIMessageStream({ stream }))
		last = m;
	out.message = last;
	out.text = textOf(last);
}

async function approveMode() {
	const chat = new Chat({
		id: chatId,
		transport: transport(),
		sendAutomaticallyWhen:
		    lastAssistantMessageIsCompleteWithApprovalResponses,
		onError: (e) => { out.errors = (out.errors || []).concat([String(e)]); },
	});
	await chat.sendMessage({ text });
	out.afterFirst = structuredClone(chat.messages);
	// Answer what is asked, as a user clicking would; the Chat then
	// posts the answers and reads the rest of the turn.
	for (let round = 0; round < 5; round++) {
		const asks = chat.lastMessage.parts.filter((p) =>
		    p.state === "approval-requested");
		if (asks.length === 0)
			break;
		for (const p of asks)
			await chat.addToolApprovalResponse({
				id: p.approval.id,
				approved: arg === "approve",
				reason: arg === "approve" ? undefined : "not now",
			});
		// The automatic request runs after the job: wait for it.
		const deadline = Date.now() + 30000;
		await new Promise((r) => setTimeout(r, 50));
		while ((chat.status === "submitted" || chat.status === "streaming")
		    && Date.now() < deadline)
			await new Promise((r) => setTimeout(r, 50));
	}
	out.status = chat.status;
	out.messages = chat.messages;
	out.text = textOf(chat.lastMessage);
}

async function resumeMode() {
	let deltas = 0, chat;
	const want = Number(arg || 3);
	const t = transport();
	chat = new Chat({
		id: chatId,
		transport: t,
		onError: (e) => { out.errors = (out.errors || []).concat([String(e)]); },
	});
	// Cut the first request after `want` text deltas reached the Chat.
	const seen = new Promise((resolve) => {
		const iv = setInterval(() => {
			deltas = out.chunks.filter((b) =>
			    b.includes('"type":"text-delta"')).length;
			if (deltas >= want) {
				clearInterval(iv);
				resolve();
			}
		}, 5);
	});
	const sending = chat.sendMessage({ text });
	await seen;
	await chat.stop();
	await sending;
	out.cutAfter = deltas;
	out.textAtCut = textOf(chat.lastMessage);
	out.chunksAtCut = out.chunks.length;
	await chat.resumeStream();
	out.status = chat.status;
	out.messages = chat.messages;
	out.text = textOf(chat.lastMessage);
}

async function reconnectMode() {
	const stream = await transport().reconnectToStream({ chatId });
	if (stream === null) {
		out.none = true;
		return;
	}
	let last;
	for await (const m of readUIMessageStream({ stream }))
		last = m;
	out.message = last;
	out.text = textOf(last);
}

try {
	if (mode === "stream" || mode === "last")
		await streamMode(mode === "last");
	else if (mode === "approve")
		await approveMode();
	else if (mode === "resume")
		await resumeMode();
	else if (mode === "reconnect")
		await reconnectMode();
	else
		throw new Error(`no mode ${mode}`);
} catch (e) {
	out.error = String(e && e.stack || e);
	finish(1);
}
finish(0);
