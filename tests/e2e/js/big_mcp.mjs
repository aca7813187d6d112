// A Model Context Protocol server, built on the MCP project's own SDK,
// whose one tool returns as much text as asked: "big" {bytes} answers a
// text content of that many "z" characters, read-only.  For max-result:
// a result larger than the bound must fail the call, not the daemon.
// Stateless Streamable HTTP on 127.0.0.1:$PORT/mcp.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { serveMcp } from "./mcp_http.mjs";
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

serveMcp(server);
