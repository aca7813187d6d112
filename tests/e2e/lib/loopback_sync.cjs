// Like loopback.cjs (a listen() without a host gets 127.0.0.1), for servers
// that read server.address() right after listen() returns, as the MCP
// conformance runner's scenario servers do (app.listen(0).address().port).
// listen(port, "127.0.0.1") resolves the host asynchronously, so address()
// is still null then; instead the socket is bound to 127.0.0.1 here, at
// once, and handed to listen().  Where that cannot be done (no tcp_wrap
// binding) it falls back to adding the host, which loopback.cjs does.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;

let TCP = null, SERVER = 0;
try {
  const b = process.binding("tcp_wrap");
  TCP = b.TCP;
  SERVER = b.constants.SERVER;
} catch (e) {
  TCP = null;
}

// The port of listen(args) when it names a port and no host, else null.
function bare_port(args) {
  const a = args[0];
  if (a !== null && typeof a === "object" && !Array.isArray(a)) {
    if (a.port !== undefined && a.host === undefined && a.path === undefined &&
        Object.keys(a).every((k) => k === "port"))
      return Number(a.port);
    return null;
  }
  if ((typeof a === "number" || (typeof a === "string" && /^\d+$/.test(a))) &&
      (args.length < 2 || typeof args[1] !== "string"))
    return Number(a);
  return null;
}

net.Server.prototype.listen = function (...args) {
  const port = bare_port(args);
  if (port === null)
    return listen.apply(this, args);
  const cb = args.find((x) => typeof x === "function");
  if (TCP !== null && Number.isInteger(port) && port >= 0 && port < 65536) {
    const h = new TCP(SERVER);
    if (h.bind("127.0.0.1", port) === 0)
      return cb ? listen.call(this, h, cb) : listen.call(this, h);
    h.close();
  }
  const rest = args.filter((x) => typeof x === "function");
  return listen.call(this, port, "127.0.0.1", ...rest);
};
