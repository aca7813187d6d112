// A Model Context Protocol server, built on the MCP project's own SDK,
// whose one tool returns as much text as asked: "big" {bytes} answers a
// text content of that many "z" characters, read-only.  For max-result:
// a result larger than the bound must fail the call, not the daemon.
// Stateless Streamable HTTP on 127.0.0.1:$PORT/mcp.
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ListToolsRequestSchema, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";

function server() {
  const s = new Server({ name: "big", version: "1.0.0" },
                       { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
      name: "big",
      description: "Returns a text of the given number of bytes",
      inputSchema: { type: "object", properties: {
        bytes: { type: "number" } } },
      annotations: { readOnlyHint: true },
    }],
  }));
  s.setRequestHandler(CallToolRequestSchema, async (req) => {
    const n = Math.min(Number((req.params.arguments || {}).bytes) || 0,
                       64 * 1024 * 1024);
    return { content: [{ type: "text", text: "z".repeat(n) }] };
  });
  return s;
}

http.createServer(async (req, res) => {
  if (req.url !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  const t = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const s = server();
  res.on("close", () => { t.close(); s.close(); });
  await s.connect(t);
  await t.handleRequest(req, res);
}).listen(Number(process.env.PORT), "127.0.0.1", () => {
  console.log("listening");
});
