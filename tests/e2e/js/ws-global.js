// Node 20 has no global WebSocket; the PROTOCOL.md example expects the
// browser API, which the ws package provides.
if (typeof globalThis.WebSocket === "undefined")
	globalThis.WebSocket = require("ws");
