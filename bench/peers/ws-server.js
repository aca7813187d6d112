#!/usr/bin/env node
// A small session server on the `ws` package, the way a user would put one
// in front of an agent: one process, sessions in memory, each with a
// bounded log of its events so that a client can resume with lastSeq.
//
//   node ws-server.js --port P [--host 127.0.0.1] [--log-max 100000]
//
// ws://H:P/?session=ID&role=user|observer&lastSeq=N
//   -> {"type":"hello","session":ID,"lastSeq":L}
//   -> the events of the session with seq > N still in its log, then live
//      ones: {"type":"token","seq":S,"content":"<wall-clock µs> "} and
//      {"type":"done","seq":S} at the end of a turn.
// <- {"type":"chat","message":TEXT,"tokens":K,"interval":MS} starts a turn
//    (from a user): K tokens, one every MS ms (0: as fast as possible).
// Seq is per session, contiguous from 1.  See README.md.
'use strict';

const http = require('http');
const { option, stampUs } = require('./common');
const { WebSocketServer } = require('ws');


const port = Number(option('port', '0'));
const host = option('host', '127.0.0.1');
const LOG_MAX = Number(option('log-max', '100000'));
const BATCH = 64;            // tokens sent between yields when interval is 0

if (!/^127\.|^localhost$|^::1$/.test(host)) {
  console.error('ws-server: binds a loopback address only');
  process.exit(2);
}


// id -> { seq, first, log: [json strings], clients: Set, busy, queue }
const sessions = new Map();

function getSession(id) {
  let s = sessions.get(id);
  if (s === undefined) {
    s = { seq: 0, first: 1, log: [], clients: new Set(), busy: false,
          queue: [] };
    sessions.set(id, s);
  }
  return s;
}

// Log an event and send it to every client of the session: encoded once.
function publish(s, type, content) {
  const seq = ++s.seq;
  const json = content === undefined
    ? '{"type":"' + type + '","seq":' + seq + '}'
    : JSON.stringify({ type, seq, content });
  s.log.push(json);
  if (s.log.length > LOG_MAX + (LOG_MAX >> 2)) {
    const drop = s.log.length - LOG_MAX;
    s.log.splice(0, drop);
    s.first += drop;
  }
  if (s.clients.size === 0)
    return;
  const frame = Buffer.from(json);
  for (const ws of s.clients)
    ws.send(frame, { binary: false });
}

function runTurn(s, tokens, interval) {
  s.busy = true;
  let left = tokens;
  const finish = () => {
    publish(s, 'done');
    s.busy = false;
    const next = s.queue.shift();
    if (next !== undefined)
      runTurn(s, next.tokens, next.interval);
  };
  if (interval > 0) {
    const tick = () => {
      if (left <= 0)
        return finish();
      left--;
      publish(s, 'token', stampUs() + ' ');
      setTimeout(tick, interval);
    };
    setTimeout(tick, interval);
  } else {
    const burst = () => {
      for (let i = 0; i < BATCH && left > 0; i++, left--)
        publish(s, 'token', stampUs() + ' ');
      if (left > 0)
        setImmediate(burst);
      else
        finish();
    };
    setImmediate(burst);
  }
}

function onChat(s, msg) {
  const tokens = Math.max(0, Math.min(10000000, Number(msg.tokens) || 0));
  const interval = Math.max(0, Number(msg.interval) || 0);
  if (s.busy)
    s.queue.push({ tokens, interval });
  else
    runTurn(s, tokens, interval);
}

const server = http.createServer((req, res) => {
  res.writeHead(426, { 'content-type': 'text/plain' });
  res.end('WebSocket only\n');
});

const wss = new WebSocketServer({
  server,
  perMessageDeflate: false,
  clientTracking: false,
  maxPayload: 1024 * 1024,
});

wss.on('connection', (ws, req) => {
  const q = new URL(req.url, 'http://x').searchParams;
  const id = q.get('session');
  if (!id) {
    ws.close(1008, 'session required');
    return;
  }
  const role = q.get('role') === 'observer' ? 'observer' : 'user';
  const after = Math.max(0, Number(q.get('lastSeq')) || 0);
  const s = getSession(id);

  ws.on('error', () => {});
  ws.send('{"type":"hello","session":' + JSON.stringify(id) +
          ',"lastSeq":' + s.seq + '}');
  // Replay what the log still holds after the client's lastSeq; this runs
  // to its end before any live event can be published, so nothing is
  // missed or sent twice.
  for (let i = Math.max(0, after + 1 - s.first); i < s.log.length; i++)
    ws.send(s.log[i]);
  s.clients.add(ws);

  ws.on('close', () => s.clients.delete(ws));
  ws.on('message', (data, isBinary) => {
    if (isBinary || role !== 'user')
      return;
    let msg;
    try {
      msg = JSON.parse(data);
    } catch (e) {
      return;
    }
    if (msg && msg.type === 'chat')
      onChat(s, msg);
  });
});

server.listen({ port, host, backlog: 1024 }, () => {
  console.error('ws-server listening on %s:%d', host, server.address().port);
});

for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => process.exit(0));
