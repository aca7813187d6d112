// One WebSocket to a session, kept open: it reconnects with backoff and
// jitter, resumes after the last seq it delivered, and so hands its
// listeners every logged event exactly once and in order, however often
// the connection drops, the worker dies or the session moves to another
// host.  Messages it sends carry ids and are sent again after a drop until
// acknowledged; the server applies an id once.

import { getToken, api, authNeeded } from "./api.js";

// The seed's schedule: 1 s doubling to 30 s, plus up to half again.
const BASE_MS = 1000, MAX_MS = 30000, JITTER = 0.5;
const QUEUE_MAX = 200;		// unsent and unacknowledged messages
const OPEN_TIMEOUT_MS = 10000;	// a connect that neither opens nor fails
const STALE_MS = 45000;		// no frame at all (heartbeats are 15 s)
// What an HTTP token (RFC 9110), and so a subprotocol, may hold.
const TCHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PAGE = 1000;		// events per /log page (the server's most)
const PARALLEL = 4;		// /log pages asked for at once

let idCounter = 0;
const idBase = Math.random().toString(36).slice(2, 8);

export function backoff(attempt) {
  const base = Math.min(BASE_MS * Math.pow(2, attempt), MAX_MS);
  return base + base * JITTER * Math.random();
}

export class Conn {
  // from: "start" replays the whole log first; "live" starts where the
  // session is (a second stream of a session whose past another shows).
  constructor({ sessionId, path = "stream", role = "user", from = "start" }) {
    this.sessionId = sessionId;
    this.path = path;
    this.role = role;
    this.fromLive = from === "live";
    this.listeners = new Map();
    this.stateListeners = new Set();
    this.state = "closed";
    this.seq = 0;		// highest seq delivered
    this.liveAfter = null;	// lastSeq of the first session_state
    // The log's epoch the delivered events are of ("" none), sent with
    // lastSeq; a session_state's is taken once an event follows it (a
    // RESUME_GAP for a rewritten history would come first).
    this.epoch = "";
    this.nextEpoch = null;
    this.outbox = [];		// [{id, msg, sent}] until acked
    this.attempt = 0;
    this.ws = null;
    this.timer = 0;
    this.closed = false;
    this.catchingUp = false;	// reading the past over /log (first connect)
    this.held = [];		// logged events the socket brought meanwhile
  }

  get lastSeq() { return this.seq; }

  on(type, fn) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type).add(fn);
    return () => this.listeners.get(type).delete(fn);
  }

  onState(fn) {
    this.stateListeners.add(fn);
    fn(this.state);
    return () => this.stateListeners.delete(fn);
  }

  setState(s) {
    if (s === this.state) return;
    this.state = s;
    for (const fn of this.stateListeners) fn(s);
  }

  emit(ev, meta) {
    for (const key of [ev.type, "*"]) {
      const set = this.listeners.get(key);
      if (!set) continue;
      for (const fn of set) {
        try { fn(ev, meta); } catch (e) { console.error("view failed on", ev.type, e); }
      }
    }
  }

  // token: one a subprotocol cannot carry, for the query instead.
  url(token) {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    // No lastSeq: the server goes live after session_state.lastSeq (and
    // catchUp() reads the past up to there over HTTP, unless from "live").
    const q = new URLSearchParams(this.liveAfter === null && (this.fromLive || this.viaLog()) ?
      {} : { lastSeq: String(this.seq) });
    if (q.has("lastSeq") && this.epoch) q.set("epoch", this.epoch);
    if (this.path === "stream" && this.role !== "user") q.set("role", this.role);
    if (token) q.set("access_token", token);
    return scheme + "//" + location.host + "/sessions/" +
      encodeURIComponent(this.sessionId) + "/" + this.path + "?" + q;
  }

  // Whether the first connect reads the past over /log: a user's stream
  // (/log answers with the token's view, which is what it shows).
  viaLog() {
    return !this.fromLive && this.seq === 0 && this.path === "stream" && this.role === "user";
  }

  // The logged past up to the first session_state's lastSeq, read in pages
  // over HTTP once the socket is live: several times faster than a replay
  // of one WebSocket frame per event, which is what a long session's first
  // paint waited for.  Views get session_state first, as on any connect,
  // and no request is made for a session with no past (a new one).  What
  // the socket brings meanwhile is held, then delivered in seq order, once
  // each.  A failed page closes the socket: the reconnect replays from the
  // last seq delivered, as after any drop.
  async catchUp(upTo) {
    this.catchingUp = true;
    const base = "/sessions/" + encodeURIComponent(this.sessionId) + "/log?limit=" + PAGE + "&after=";
    let ok = true;
    try {
      while (this.seq < upTo && !this.closed) {
        // Seqs have no gaps, so the next pages can be asked for at once;
        // what does not follow on from the last seq delivered (a page cut
        // short by the server's read bound) is asked for again.
        const starts = [];
        for (let a = this.seq; a < upTo && starts.length < PARALLEL; a += PAGE) starts.push(a);
        const pages = await Promise.all(starts.map((a) => api("GET", base + a)));
        if (this.closed) break;
        const before = this.seq;
        for (const evs of pages) {
          if (!Array.isArray(evs)) break;
          let gap = false;
          for (const ev of evs) {
            if (!ev || typeof ev !== "object" || typeof ev.seq !== "number" ||
                ev.seq <= this.seq || ev.seq > upTo) continue;
            // The first event may follow a trimmed past (retention): said
            // as the socket's replay says it.
            if (ev.seq !== this.seq + 1 && this.seq !== 0) { gap = true; break; }
            if (this.seq === 0 && ev.seq > 1)
              this.emit({ type: "error", code: "RESUME_GAP", severity: "warning", local: true,
                oldestSeq: ev.seq, message: "the session's events before seq " + ev.seq +
                " are past its retention and no longer kept" }, { replay: false });
            this.seq = ev.seq;
            this.emit(ev, { replay: true });
          }
          if (gap) break;
        }
        if (this.seq === before) { ok = false; break; }
      }
    } catch {
      ok = false;
    }
    if (this.closed) {
      this.catchingUp = false;
      this.held = [];
      return;
    }
    if (!ok) {
      // what the socket held lies past a gap now
      this.catchingUp = false;
      this.held = [];
      if (this.ws) this.ws.close(4000, "catch-up failed");
      return;
    }
    this.catchingUp = false;
    const held = this.held.sort((a, b) => a.seq - b.seq);
    this.held = [];
    for (const ev of held) this.receive(ev);
  }

  connect() {
    if (this.closed || this.ws) return;
    this.setState(this.attempt === 0 && this.liveAfter === null ? "connecting" : "reconnecting");
    const t = getToken();
    let ws;
    try {
      // The token as a subprotocol beside "parley": a browser cannot set
      // a header on a WebSocket, and a URL ends up in proxies' logs.  A
      // token a subprotocol cannot hold (one of base64's / or =) goes in
      // the query, which parleyd itself never logs.
      if (!t) ws = new WebSocket(this.url());
      else if (TCHAR.test(t)) ws = new WebSocket(this.url(), ["parley", "bearer." + t]);
      else ws = new WebSocket(this.url(t));
    } catch (e) {
      this.fail("cannot open a WebSocket to this server (" + e.message + ")");
      return;
    }
    this.ws = ws;
    let opened = false;
    const openTimer = setTimeout(() => { if (!opened) ws.close(); }, OPEN_TIMEOUT_MS);
    let stale = 0;
    const touch = () => {
      clearTimeout(stale);
      stale = setTimeout(() => ws.close(4000, "no frame for 45 s"), STALE_MS);
    };
    ws.onopen = () => { opened = true; clearTimeout(openTimer); touch(); };
    ws.onmessage = (m) => {
      touch();
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      if (ev && typeof ev === "object") this.receive(ev);
    };
    ws.onclose = (c) => {
      clearTimeout(openTimer);
      clearTimeout(stale);
      if (this.ws === ws) {
        this.ws = null;
        this.nextEpoch = null;	// its session_state named no event's epoch
      }
      if (this.closed) return;
      if (c.code === 4001) authNeeded("the token expired; enter a new one");
      this.retry(opened);
    };
    ws.onerror = () => { /* onclose follows */ };
  }

  receive(ev) {
    if (ev.type === "heartbeat") return;
    if (ev.type === "session_state") {
      const first = this.liveAfter === null;
      const catchUp = first && this.viaLog();
      this.nextEpoch = typeof ev.epoch === "string" ? ev.epoch : "";
      if (first) {
        this.liveAfter = typeof ev.lastSeq === "number" ? ev.lastSeq : 0;
        if (this.fromLive) this.seq = this.liveAfter;
      }
      this.attempt = 0;
      this.setState("live");
      this.emit(ev, { replay: false, first });
      this.flushOutbox(true);
      if (catchUp && this.liveAfter > this.seq) this.catchUp(this.liveAfter);
      return;
    }
    if (typeof ev.seq === "number" && this.nextEpoch !== null) {
      this.epoch = this.nextEpoch;
      this.nextEpoch = null;
    }
    if (ev.type === "error" && ev.code === "RESUME_GAP" && typeof ev.epoch === "string") {
      // The history was rewritten from ev.from: what this page has from
      // there on is replaced by the replay that follows.
      this.epoch = ev.epoch;
      this.nextEpoch = null;
      if (typeof ev.from === "number" && ev.from >= 1) this.seq = Math.min(this.seq, ev.from - 1);
    }
    if (this.catchingUp && typeof ev.seq === "number") {
      this.held.push(ev);
      return;
    }
    if (ev.type === "ack") {
      this.outbox = this.outbox.filter((o) => o.id !== ev.id);
    } else if (ev.type === "error" && typeof ev.seq !== "number" && ev.id) {
      this.outbox = this.outbox.filter((o) => o.id !== ev.id);
    }
    if (typeof ev.seq === "number") {
      if (ev.seq <= this.seq) return;	// replayed twice: already delivered
      this.seq = ev.seq;
      this.emit(ev, { replay: this.liveAfter !== null && ev.seq <= this.liveAfter });
      return;
    }
    this.emit(ev, { replay: false });
  }

  retry(wasOpen) {
    if (this.closed) return;
    this.setState("reconnecting");
    const delay = backoff(this.attempt++);
    // A socket refused before it opened says nothing of why: ask over
    // HTTP, which does (a bad token, a wrong scope, a full server).
    if (!wasOpen && this.attempt >= 2) this.probe();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  async probe() {
    try {
      await api("GET", "/sessions/" + encodeURIComponent(this.sessionId));
    } catch (e) {
      if (e.status === 401) return;	// api() asked for a token
      if (e.status && e.status !== 404)
        this.emit({ type: "error", code: e.code, message: e.message,
          severity: "recoverable", local: true }, { replay: false });
    }
  }

  fail(message) {
    this.emit({ type: "error", code: "INTERNAL", message,
      severity: "fatal", local: true }, { replay: false });
    this.setState("closed");
  }

  // send(msg): fills v, sessionId and id; returns the id.
  send(msg) {
    const id = msg.id || "c-" + idBase + "-" + (++idCounter);
    const full = Object.assign({ v: 1, sessionId: this.sessionId }, msg, { id });
    if (this.outbox.length >= QUEUE_MAX) {
      this.emit({ type: "error", code: "OVERLOADED", severity: "warning", local: true,
        message: "too many messages are waiting for the server; wait for it to reconnect" },
        { replay: false });
      return null;
    }
    this.outbox.push({ id, msg: full, sent: false });
    this.flushOutbox(false);
    return id;
  }

  // Sends what is not sent yet; after a reconnect (again=true) also what
  // was sent but never acknowledged: the server applies an id once.
  flushOutbox(again) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || this.state !== "live") return;
    for (const o of this.outbox) {
      if (o.sent && !again) continue;
      this.ws.send(JSON.stringify(o.msg));
      o.sent = true;
    }
    // A message that needs no ack (ping) must not stay forever.
    this.outbox = this.outbox.filter((o) => o.msg.type !== "ping");
  }

  // Starts over with a new token (after the dialog).
  restart() {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.attempt = 0;
    if (this.ws) this.ws.close(1000, "new token");
    else this.connect();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, "page left the session");
    this.ws = null;
    this.setState("closed");
  }
}
