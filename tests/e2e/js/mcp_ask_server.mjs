// An MCP server on the MCP project's TypeScript SDK (Streamable HTTP on
// 127.0.0.1:$PORT/mcp) whose tools send a request of their own to the
// client in the middle of a call, as servers do, for t_mcp_ask.py:
//   ping-client  ping; its result says how long the answer took
//   sample       sampling/createMessage (which Parley does not offer)
//   list-roots   roots/list (likewise)
// The SDK's sendRequest would wait 60 s for an answer; each tool gives up
// after 20 s, so a client that never answers shows as a slow tool.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CreateMessageResultSchema,
  EmptyResultSchema,
  ListRootsResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

const WAIT = { timeout: 20000 };

function newServer() {
  const s = new McpServer({ name: "parley-e2e-ask", version: "1.0.0" });
  s.registerTool("ping-client", { description: "Pings the client" },
    async (extra) => {
      const t0 = Date.now();
      await extra.sendRequest({ method: "ping" }, EmptyResultSchema, WAIT);
      return { content: [{ type: "text",
        text: `pong after ${Date.now() - t0} ms` }] };
    });
  s.registerTool("sample", { description: "Asks the client's model" },
    async (extra) => {
      const r = await extra.sendRequest({
        method: "sampling/createMessage",
        params: {
          messages: [{ role: "user", content: { type: "text", text: "hi" } }],
          maxTokens: 10,
        },
      }, CreateMessageResultSchema, WAIT);
      return { content: [{ type: "text", text: JSON.stringify(r) }] };
    });
  s.registerTool("list-roots", { description: "Asks the client's roots" },
    async (extra) => {
      const r = await extra.sendRequest({ method: "roots/list" },
        ListRootsResultSchema, WAIT);
      return { content: [{ type: "text", text: JSON.stringify(r) }] };
    });
  return s;
}

const sessions = new Map();

async function handle(req, res) {
  if (req.url !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  let body = "";
  for await (const chunk of req)
    body += chunk;
  const sid = req.headers["mcp-session-id"];
  let t = sid !== undefined ? sessions.get(sid) : undefined;
  if (t === undefined) {
    if (sid !== undefined || req.method !== "POST") {
      res.writeHead(404, { "Content-Type": "application/json" }).end(
        JSON.stringify({ jsonrpc: "2.0", id: null,
          error: { code: -32001, message: "Session not found" } }));
      return;
    }
    t = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, t),
    });
    await newServer().connect(t);
  }
  await t.handleRequest(req, res, body !== "" ? JSON.parse(body) : undefined);
}

const port = Number(process.env.PORT);
http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.log("error:", e);
    if (!res.headersSent)
      res.writeHead(500).end();
  });
}).listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
