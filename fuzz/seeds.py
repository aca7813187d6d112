#!/usr/bin/env python3
"""Writes fuzz/corpus/NAME/ from what the tests feed the parsers: C string
literals of tests/unit/*.c, the messages and configurations of tests/e2e,
etc/parleyd.conf, and frames and IPC messages built here like the tests
build theirs.  Run from the source tree: python3 fuzz/seeds.py.  A seed for
a harness that cuts its input (fuzz/fuzz.h) starts with a cut byte: "\\0"
(whole) and, for a few, a cut into small fragments.  Inputs that fuzzing
found (crash-*) stay in the corpus."""
import ast
import base64
import hashlib
import hmac
import json
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
MAX_SEED = 8192
CUT = bytes([3, 0, 4, 0x85])    # fragments of 1, 5, 6 bytes, in turn

ESC = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"',
       "'": "'", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def c_strings(path):
    """The string literals of a C file, adjacent ones joined, as bytes."""
    src = open(path, encoding="utf-8", errors="replace").read()
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    out, cur, i, n = [], None, 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            b, i = bytearray(), i + 1
            while i < n and src[i] != '"':
                if src[i] == "\\":
                    e = src[i + 1]
                    if e == "x":
                        m = re.match(r"[0-9a-fA-F]{1,2}", src[i + 2:])
                        b.append(int(m.group(0), 16))
                        i += 2 + len(m.group(0))
                        continue
                    if e in "01234567":
                        m = re.match(r"[0-7]{1,3}", src[i + 1:])
                        b.append(int(m.group(0), 8) & 0xff)
                        i += 1 + len(m.group(0))
                        continue
                    b += ESC.get(e, e).encode()
                    i += 2
                    continue
                b += src[i].encode()
                i += 1
            i += 1
            cur = (cur or b"") + bytes(b)
            continue
        if c == "'":            # a char literal: skip it whole
            j = src.find("'", i + 2 if src[i + 1] == "\\" else i + 1)
            i = j + 1
            continue
        if not c.isspace() and cur is not None:
            out.append(cur)
            cur = None
        i += 1
    if cur is not None:
        out.append(cur)
    return out


class Lit(ast.NodeVisitor):
    """Dict literals of a Python test, names and f-strings read as "s1"."""

    def __init__(self):
        self.dicts = []

    def value(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Name, ast.JoinedStr, ast.Attribute)):
            return "s1"
        if isinstance(node, ast.Dict):
            return {self.value(k): self.value(v)
                    for k, v in zip(node.keys, node.values) if k is not None}
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.value(node.operand)
        raise ValueError

    def visit_Dict(self, node):
        try:
            d = self.value(node)
            json.dumps(d)
            self.dicts.append(d)
        except (ValueError, TypeError):
            pass
        self.generic_visit(node)


def py_dicts(paths):
    lit = Lit()
    for p in paths:
        try:
            lit.visit(ast.parse(open(p).read()))
        except SyntaxError:
            pass
    return lit.dicts


def files(d, ext):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(ext))


def write(name, seeds, cut=True, ncut=8):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    # Its own seeds only: crash-* files are inputs fuzzing found, kept.
    for f in os.listdir(d):
        if re.fullmatch(r"[0-9a-f]{16}", f):
            os.unlink(os.path.join(d, f))
    seen, k = set(), 0
    for s in seeds:
        if not s or len(s) > MAX_SEED or s in seen:
            continue
        seen.add(s)
        variants = [b"\0" + s] if cut else [s]
        if cut and k < ncut:
            variants.append(CUT + s)
            k += 1
        for v in variants:
            h = hashlib.sha1(v).hexdigest()[:16]
            open(os.path.join(d, h), "wb").write(v)
    print("%-14s %d seeds" % (name, len(os.listdir(d))))


def ws_frame(op, payload, fin=True, mask=b"\x37\xfa\x21\x3d"):
    n = len(payload)
    h = bytes([(0x80 if fin else 0) | op])
    if n < 126:
        h += bytes([0x80 | n])
    elif n < 65536:
        h += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        h += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return h + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ipc_msg(typ, payload, fd=False):
    return struct.pack("<HHII", 2, typ, 1 if fd else 0, len(payload)) + payload


def ipc_conn(kind, role, session, scope, subject, body, first=0):
    pad = lambda s, n: s.encode().ljust(n, b"\0")
    c = struct.pack("<IIIIQQII", kind, role, first, len(body), 7, 1, 0, 0)
    c += pad(session, 129) + pad(scope, 1025) + pad(subject, 129)
    c = c.ljust(1328, b"\0") + struct.pack("<Q", 0) + pad("127.0.0.1", 64)
    assert len(c) == 1400
    return c + body


def main():
    unit = os.path.join(ROOT, "tests", "unit")
    e2e = os.path.join(ROOT, "tests", "e2e")
    cs = {os.path.basename(p): c_strings(p) for p in files(unit, ".c")}
    allc = [s for v in cs.values() for s in v]
    pyd = py_dicts(files(e2e, ".py") + files(os.path.join(e2e, "lib"), ".py"))

    # HTTP: every request a unit test writes, and requests built from the
    # e2e messages (a POST of each, as t_post_messages does).
    meth = re.compile(rb"^(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|[A-Z]+ /)")
    http = [s for s in allc if meth.match(s) and b"HTTP/" in s]
    envs = [json.dumps(d).encode() for d in pyd if "v" in d and "type" in d]
    for e in envs[:20]:
        http.append(b"POST /sessions/s1/messages HTTP/1.1\r\nHost: "
                    b"127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Type: "
                    b"application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(e), e))
    http.append(b"GET /sessions/s1/ws?access_token=abc&since=3 HTTP/1.1\r\n"
                b"Host: 127.0.0.1:8080\r\nUpgrade: websocket\r\nConnection: "
                b"keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub"
                b"25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: "
                b"http://127.0.0.1:8080\r\n\r\n")
    http.append(b"POST /chat HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                b"chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n")
    http.append(b"GET /health HTTP/1.1\r\nHost: h\r\n\r\nGET /metrics "
                b"HTTP/1.1\r\nHost: h\r\n\r\n")
    write("http", http)

    # Envelopes: the e2e messages and the unit tests' JSON objects.
    jsn = [s for s in allc if s.startswith(b"{") and b'"v"' in s]
    proto = envs + jsn + [b'{"v":1,"type":"chat","sessionId":"s1","message":'
                          b'"\\u00e9\\ud83d\\ude00 \\u0000"}',
                          b'{"v":1,"type":"chat","sessionId":"s1","x":' +
                          b"[" * 20 + b"]" * 20 + b"}"]
    write("proto", proto, cut=False)

    # WebSocket: the envelopes as masked client frames, fragmented
    # messages with a ping between, the close and length forms.
    ws = [ws_frame(1, e) for e in envs[:30]]
    ws.append(ws_frame(1, b"Hel", fin=False) + ws_frame(9, b"p") +
              ws_frame(0, b"lo"))
    ws.append(ws_frame(8, struct.pack(">H", 1000) + b"bye"))
    ws.append(ws_frame(8, b""))
    ws.append(ws_frame(10, b"pong") + ws_frame(2, b"\x00\xff"))
    ws.append(ws_frame(1, b"x" * 300))
    ws.append(ws_frame(1, "\u00e9\u20ac\U0001f600".encode()))
    ws.append(bytes([0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d,
                     0x51, 0x58]))
    write("ws", ws)

    # SSE and the provider streams: every stream a unit test feeds.
    sse = [s for s in allc if re.search(rb"(^|\n)(data|event|id|retry|:)",
                                        s) and b"\n" in s]
    write("sse", sse)
    llm = cs.get("test_llm.c", []) + cs.get("test_llm_script.c", [])
    streams = [s for s in llm if b"data:" in s]
    oa = [s for s in streams if b"choices" in s or b"[DONE]" in s or
          b"error" in s]
    an = [s for s in streams if b"event:" in s or b"message_start" in s or
          b"content_block" in s]
    for p in ("t_provider_openai.py", "t_provider_anthropic.py"):
        for s in re.findall(r"(?:event: [a-z_]+\\n)?data: [^\n]*",
                            open(os.path.join(e2e, p)).read()):
            (an if "anthropic" in p else oa).append(
                s.encode().decode("unicode_escape").encode() + b"\n\n")
    write("llm_openai", oa)
    write("llm_anthropic", an)

    # MCP answers: JSON bodies and event streams of test_mcp.c, with the
    # mode byte fuzz/mcp.c reads first (0: JSON 200, 1: event stream 200).
    rpc = [s for s in cs.get("test_mcp.c", []) if b"jsonrpc" in s]
    mcp = []
    for s in rpc:
        s = s.replace(b"%ld", b"1").replace(b"%d", b"1").replace(b"%s", b"x")
        if s.startswith(b"data:") or b"\ndata:" in s:
            mcp.append(b"\x01\0" + s)
        else:
            mcp.append(b"\x00\0" + s)
    mcp.append(b'\x00\0[{"jsonrpc":"2.0","method":"notifications/progress"},'
               b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text",'
               b'"text":"hi"},{"type":"image","data":"AA=="}]}}]')
    mcp.append(b'\x00\0{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":'
               b'"echo","description":"d","inputSchema":{"type":"object"},'
               b'"annotations":{"readOnlyHint":true}}],"nextCursor":"c"}}')
    mcp.append(b'\x04\0{"jsonrpc":"2.0","id":1,"error":{"code":-32602,'
               b'"message":"bad"}}')
    mcp.append(b'\x01\0event: message\nid: 1\ndata: {"jsonrpc":"2.0","id":9,'
               b'"method":"elicitation/create","params":{}}\n\ndata: '
               b'{"jsonrpc":"2.0","id":1,"result":{"structuredContent":'
               b'{"a":1}}}\n\n')
    write("mcp", mcp, cut=False)

    # Configurations: the example file, every one the unit tests parse,
    # and those the e2e tests write.
    conf = [open(os.path.join(ROOT, "etc", "parleyd.conf"), "rb").read()]
    conf += [s for s in cs.get("test_config.c", []) if b"\n" in s]
    for p in files(e2e, ".py") + files(e2e, ".sh"):
        for m in re.findall(r'"""(.*?)"""', open(p).read(), re.S):
            if re.search(r"^\s*(listen|provider|worker|token|store)\b", m,
                         re.M):
                conf.append(m.encode())
    write("config", conf, cut=False)

    # IPC: one of each message the supervisor and the workers send, a
    # hand-off with its descriptor (the first fragment's cut byte has the
    # high bit set), several in one read.
    req = b"GET /sessions/s1/ws HTTP/1.1\r\nHost: h\r\n\r\n"
    fdcut = bytes([15, 0xff] + [0x7f] * 14)
    ipc = [
        fdcut + ipc_msg(2, ipc_conn(1, 2, "s1", "", "", req), fd=True),
        fdcut + ipc_msg(3, ipc_conn(2, 4, "s1", "s1\nteam-*", "alice",
                                    b'{"v":1}' + b"\x81\x00", 7), fd=True),
        fdcut + ipc_msg(2, ipc_conn(1, 1, "", "a*", "bob", b""), fd=True),
    ]
    sess = struct.pack("<Q", 5) + b"s1".ljust(136, b"\0")
    plain = [ipc_msg(4, sess), ipc_msg(5, sess),
             ipc_msg(6, struct.pack("<IIIIQ", 3, 4, 1, 0, 99)),
             ipc_msg(7, struct.pack("<II", 2, 5000)),
             ipc_msg(9, struct.pack("<II", 1, 1) + b"running".ljust(16, b"\0")),
             ipc_msg(10, struct.pack("<IIII", 1, 0, 2, 0) + b"[]"),
             ipc_msg(11, struct.pack("<II", 2, 1)),
             ipc_msg(1, struct.pack("<II", 0, 1234))]
    ipc += [b"\0" + m for m in plain] + [b"\0" + b"".join(plain[:6])]
    ipc.append(CUT + b"".join(plain[:4]))
    write("ipc", ipc, cut=False)

    # JWT (fuzz/jwt.c): the first byte picks a token (0), a JWKS file (1)
    # or claims the harness signs with its HS256 key (2).
    def b64u(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=")
    secret = b"fuzz-secret-0123456789abcdef-0123"
    claims = [
        {"sub": "alice", "role": "user", "exp": 1800000600, "iss": "iss",
         "aud": "aud", "sessions": ["s1", "team-*"]},
        {"sub": "bob", "role": "admin", "exp": 1800000600, "nbf": 1799999990,
         "iat": 1799999990, "iss": "iss", "aud": ["x", "aud"]},
        {"sub": "c", "role": "observer", "exp": 1, "iss": "iss", "aud": "aud"},
        {"role": "user", "iss": "iss", "aud": "aud"},
    ]
    heads = [{"alg": "HS256", "kid": "hs", "typ": "JWT"},
             {"alg": "EdDSA", "kid": "ed"}, {"alg": "none"},
             {"alg": "HS256", "crit": ["exp"]}]
    jwt = []
    for h in heads:
        for c in claims:
            hj, cj = json.dumps(h).encode(), json.dumps(c).encode()
            jwt.append(b"\x02" + hj + b"\n" + cj)
            si = b64u(hj) + b"." + b64u(cj)
            sig = hmac.new(secret, si, hashlib.sha256).digest()
            jwt.append(b"\x00" + si + b"." + b64u(sig))
    jwt.append(b"\x01" + json.dumps({"keys": [
        {"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": b64u(b"\x01" * 32).decode()},
        {"kty": "oct", "alg": "HS512", "kid": "k2", "k": b64u(b"s" * 64).decode()},
        {"kty": "EC", "crv": "P-256", "kid": "k3", "x": b64u(b"\x02" * 32).decode(),
         "y": b64u(b"\x03" * 32).decode()},
        {"kty": "RSA", "kid": "k4", "n": b64u(b"\xc1" * 256).decode(), "e": "AQAB"}]}).encode())
    write("jwt", jwt, cut=False)

    # PROXY protocol (fuzz/proxyproto.c): v1 and v2 headers, then a request.
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    v2_4 = sig + b"\x21\x11" + struct.pack(">H", 12) + bytes([192, 0, 2, 1, 10, 0, 0, 1]) + struct.pack(">HH", 4000, 80)
    v2_6 = sig + b"\x21\x21" + struct.pack(">H", 36) + bytes(range(16)) + bytes(16) + struct.pack(">HH", 4000, 443)
    v2_local = sig + b"\x20\x00" + struct.pack(">H", 0)
    v2_tlv = sig + b"\x21\x11" + struct.pack(">H", 19) + bytes([192, 0, 2, 1, 10, 0, 0, 1]) + struct.pack(">HH", 1, 2) + b"\x04\x00\x04abcd"
    pp = [b"PROXY TCP4 192.0.2.1 10.0.0.1 4000 80\r\n" + req,
          b"PROXY TCP6 2001:db8::1 ::1 4000 443\r\n" + req,
          b"PROXY UNKNOWN\r\n" + req, b"PROXY TCP4 1.2.3.4\r\n",
          v2_4 + req, v2_6 + req, v2_local + req, v2_tlv + req, req,
          b"192.0.2.7, 10.0.0.9\n203.0.113.5", b"unknown, 10.0.0.1"]
    write("proxyproto", pp)


if __name__ == "__main__":
    sys.exit(main())
