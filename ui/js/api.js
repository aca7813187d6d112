// HTTP calls to parleyd.  The token lives in this tab's sessionStorage and
// travels in the Authorization header (the WebSocket carries it as a
// subprotocol, conn.js): not in a URL, so no access log, proxy log or
// browser history ever holds it.

const KEY = "parley.token";

export function getToken() {
  try { return sessionStorage.getItem(KEY) || ""; } catch { return ""; }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY);
  } catch { /* storage off: the token lasts as long as the page */ }
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Listeners told when the server refuses the token (401), so the page can
// ask for another.
const authListeners = new Set();
export function onAuthNeeded(fn) { authListeners.add(fn); return () => authListeners.delete(fn); }
export function authNeeded(message) { for (const fn of authListeners) fn(message); }

// api(method, path, body, opts): the parsed JSON answer (null when
// empty); throws ApiError with the server's code and message.  opts.quiet:
// a 401 does not ask for a token (a background refresh); opts.headers:
// more request headers (e.g. Idempotency-Key).
export async function api(method, path, body, opts) {
  const headers = Object.assign({}, opts && opts.headers, { "Accept": "application/json" });
  const t = getToken();
  if (t) headers["Authorization"] = "Bearer " + t;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 15000);
  let res;
  try {
    res = await fetch(path, {
      method, headers, signal: ctl.signal, cache: "no-store",
      credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "NETWORK", e.name === "AbortError" ?
      "the server did not answer within 15 s; check that parleyd runs" :
      "cannot reach the server (" + e.message + "); check that parleyd runs");
  } finally {
    clearTimeout(timer);
  }
  const text = await res.text();
  let js = null;
  if (text) {
    try { js = JSON.parse(text); } catch { js = null; }
  }
  if (!res.ok) {
    const err = js && js.error ? js.error : {};
    const e = new ApiError(res.status, err.code || "HTTP_" + res.status,
      err.message || (res.status + " " + res.statusText));
    if (res.status === 401 && !(opts && opts.quiet)) authNeeded(e.message);
    throw e;
  }
  return js;
}
