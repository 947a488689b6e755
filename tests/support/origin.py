#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/origin.py - a small HTTP/1.1 origin for the proxy's integration tests.

Standard library only (Python 3.11). It parses requests itself, strictly, because framing is
what the tests look at: Content-Length and chunked request bodies, Expect: 100-continue,
keep-alive, responses delimited by close, HEAD/204/304 without bodies.

    origin.py serve --ports-file F --log F [--cert F --key F] [--host 127.0.0.1] [--http-port N]
                    [--tls-port N]
        Listens on plain HTTP and (with --cert/--key) TLS, both on ports the kernel picks (the
        plain one on N with --http-port, the TLS one on N with --tls-port), and writes
        "http=PORT tls=PORT" into --ports-file once both accept connections.
    origin.py pattern N
        Writes the first N bytes of the test pattern to stdout (see below).

The pattern: 64 KiB blocks, block k being random.Random(k).randbytes(65536); the first N bytes
of block 0, block 1, ... A test compares what it received with `origin.py pattern N | sha256sum`.

Endpoints (any method unless noted; HEAD gets the GET head without a body):
    /echo                JSON: method, target, version, headers ([name, value] in arrival order),
                         body_sha256, body_length. Query `continue=no`: when the request has
                         Expect: 100-continue, answer 417 at once without reading the body, and
                         close.
    /upload              JSON: sha256 and length of the body (any size; hashed as it arrives).
    /hello               a short text body.
    /stream?bytes=N      N pattern bytes, chunked (chunks of up to 16 KiB).
    /close?bytes=N       N pattern bytes, no Content-Length, Connection: close, then close.
    /http10?bytes=N      an HTTP/1.0 response without Content-Length, delimited by close.
    /slow?bytes=N&ms=M   N pattern bytes with Content-Length, dribbled out over about M ms.
    /stall?ms=M          waits M ms before sending any response head, then a short body.
    /status?code=C       a response with status C (no body for 1xx/204/304, else a short one).
    /bighead?size=N&split=A,B,..&ms=M
                         a 200 whose head (status line to the empty line) is exactly N bytes
                         (X-Pad header lines of at most 1000 bytes), body "ok"; written in pieces
                         cut at the offsets A, B, ... with M ms (default 50) between them; the
                         connection then stays open.
    /ws                  WebSocket handshake (GET with Upgrade: websocket, Connection: Upgrade and
                         Sec-WebSocket-Key -> 101 with Sec-WebSocket-Accept per RFC 6455 §4.2.2;
                         anything else -> 426), then a raw echo: every byte received is sent back
                         as is (no frame parsing). Once the bytes received contain "BYE", the
                         origin closes the connection after echoing them.
    /raw?case=NAME       exact response bytes (RAW_CASES: "ok" and malformed framing), written
                         before any body is read; the connection then stays open. case=early-413:
                         413 + Connection: close at once, the body drained (<= 5 s), then close.
                         case=hangup: no answer at all, the connection closed at once (a server
                         that took the request and failed, or a keep-alive connection it closed).
                         case=cut-head: the first bytes of a response head, 0.3 s later the close.
    anything else        404.

Log: one JSON object per request, appended to --log as it arrives (before the response):
{"conn": serial of the connection, "port": the client's port, "tls": bool, "seq": request number
on that connection (1-based), "method", "target", "path", "authorization": value or null,
"headers": [[name, value], ...]}. A test counts distinct upstream connections by "conn"/"port".
"""

import base64
import hashlib
import json
import os
import random
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

BLOCK = 65536
MAX_HEAD = 64 * 1024
MAX_LINE = 8192
IDLE_TIMEOUT_S = 120
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def pattern_block(k):
    return random.Random(k).randbytes(BLOCK)


def pattern_chunks(n, piece=BLOCK):
    """Yields the first n pattern bytes in pieces of at most `piece` bytes."""
    k = 0
    while n > 0:
        block = pattern_block(k)
        k += 1
        take = min(n, BLOCK)
        for off in range(0, take, piece):
            yield block[off:min(take, off + piece)]
        n -= take


class BadRequest(Exception):
    pass


class Closed(Exception):
    pass


class Conn:
    """Buffered reader over a socket with strict line handling."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed()
        self.buf += data

    def read_head(self):
        """Returns the head (without the final CRLFCRLF), or None on a clean close before it."""
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                head, self.buf = self.buf[:i], self.buf[i + 4:]
                return head
            if len(self.buf) > MAX_HEAD:
                raise BadRequest("head too large")
            try:
                self.fill()
            except Closed:
                if self.buf.strip(b"\r\n"):
                    raise BadRequest("connection closed inside a head")
                return None

    def read_line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                if b"\n" in line or b"\r" in line:
                    raise BadRequest("bare CR or LF")
                return line
            if len(self.buf) > MAX_LINE:
                raise BadRequest("line too long")
            self.fill()

    def read_exact(self, n, sink):
        while n > 0:
            if not self.buf:
                self.fill()
            take = self.buf[:n]
            self.buf = self.buf[len(take):]
            sink(take)
            n -= len(take)


def parse_head(head):
    if b"\n" in head.replace(b"\r\n", b"") or b"\r" in head.replace(b"\r\n", b""):
        raise BadRequest("bare CR or LF in head")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("bad request line")
    method, target, version = (p.decode("latin-1") for p in parts)
    headers = []
    for raw in lines[1:]:
        if raw[:1] in (b" ", b"\t"):
            raise BadRequest("obs-fold")
        name, sep, value = raw.partition(b":")
        if not sep or not name or name != name.strip():
            raise BadRequest("bad header line")
        headers.append([name.decode("latin-1"), value.strip(b" \t").decode("latin-1")])
    return method, target, version, headers


def header_values(headers, name):
    return [v for n, v in headers if n.lower() == name]


class Origin:
    def __init__(self, log_path):
        self.log_path = log_path
        self.lock = threading.Lock()
        self.serial = 0

    def next_conn(self):
        with self.lock:
            self.serial += 1
            return self.serial

    def log(self, record):
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self.lock:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line)


def send_response(sock, version, code, reason, headers, body=b"", head_only=False):
    out = [f"{version} {code} {reason}\r\n"]
    for n, v in headers:
        out.append(f"{n}: {v}\r\n")
    out.append("\r\n")
    data = "".join(out).encode("latin-1")
    if not head_only:
        data += body
    sock.sendall(data)


def handle_connection(origin, sock, port, tls):
    conn_id = origin.next_conn()
    c = Conn(sock)
    seq = 0
    while True:
        try:
            head = c.read_head()
        except BadRequest as e:
            send_response(sock, "HTTP/1.1", 400, "Bad Request",
                          [("Content-Length", 0), ("Connection", "close")])
            print(f"origin: conn {conn_id}: {e}", file=sys.stderr, flush=True)
            return
        if head is None:
            return
        seq += 1
        try:
            keep = handle_request(origin, c, head, conn_id, port, tls, seq)
        except BadRequest as e:
            send_response(sock, "HTTP/1.1", 400, "Bad Request",
                          [("Content-Length", 0), ("Connection", "close")])
            print(f"origin: conn {conn_id}: {e}", file=sys.stderr, flush=True)
            return
        if not keep:
            return


def read_body(c, headers, version, sink):
    """Reads the request body into sink(bytes). Returns the framing used."""
    te = header_values(headers, "transfer-encoding")
    cl = header_values(headers, "content-length")
    if te and cl:
        raise BadRequest("both Transfer-Encoding and Content-Length")
    if te:
        if te != ["chunked"] or version == "HTTP/1.0":
            raise BadRequest("unsupported Transfer-Encoding")
        while True:
            line = c.read_line()
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not size_text or any(ch not in b"0123456789abcdefABCDEF" for ch in size_text):
                raise BadRequest("bad chunk size")
            size = int(size_text, 16)
            if size == 0:
                while c.read_line():  # trailers, up to the empty line
                    pass
                return "chunked"
            c.read_exact(size, sink)
            if c.read_line() != b"":
                raise BadRequest("chunk data without CRLF")
    if cl:
        if len(cl) != 1 or not cl[0].isdigit():
            raise BadRequest("bad Content-Length")
        c.read_exact(int(cl[0]), sink)
        return "length"
    return "none"


def handle_request(origin, c, head, conn_id, port, tls, seq):
    sock = c.sock
    method, target, version, headers = parse_head(head)
    url = urllib.parse.urlsplit(target)
    path = url.path
    query = dict(urllib.parse.parse_qsl(url.query))
    auth = header_values(headers, "authorization")
    origin.log({"conn": conn_id, "port": port, "tls": tls, "seq": seq, "method": method,
                "target": target, "path": path, "authorization": auth[0] if auth else None,
                "headers": headers})

    conn_tokens = ",".join(header_values(headers, "connection")).lower()
    if version == "HTTP/1.0":
        keep = "keep-alive" in conn_tokens
    else:
        keep = "close" not in conn_tokens
    head_only = method == "HEAD"
    ka = [] if keep else [("Connection", "close")]

    if path == "/raw":
        return raw_case(c, query.get("case", ""), headers)
    if path == "/bighead":
        return big_head(sock, int(query.get("size", "70000")), query.get("split", ""),
                        int(query.get("ms", "50")))

    expect = ",".join(header_values(headers, "expect")).lower()
    if "100-continue" in expect and version != "HTTP/1.0":
        if path == "/echo" and query.get("continue") == "no":
            send_response(sock, "HTTP/1.1", 417, "Expectation Failed",
                          [("Content-Length", 0), ("Connection", "close")])
            return False
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    h = hashlib.sha256()
    n = [0]

    def sink(b):
        h.update(b)
        n[0] += len(b)

    framing = read_body(c, headers, version, sink)

    def reply(code, reason, body, ctype="text/plain", extra=()):
        send_response(sock, "HTTP/1.1", code, reason,
                      [("Content-Type", ctype), ("Content-Length", len(body)), *ka, *extra],
                      body, head_only)
        return keep

    if path == "/ws":
        return websocket(c, method, headers, reply)
    if path == "/echo":
        doc = {"method": method, "target": target, "version": version, "headers": headers,
               "framing": framing, "body_sha256": h.hexdigest(), "body_length": n[0]}
        return reply(200, "OK", json.dumps(doc).encode() + b"\n", "application/json")
    if path == "/upload":
        doc = {"sha256": h.hexdigest(), "length": n[0]}
        return reply(200, "OK", json.dumps(doc).encode() + b"\n", "application/json")
    if path == "/hello":
        return reply(200, "OK", b"hello from origin.py\n")
    if path == "/status":
        code = int(query.get("code", "200"))
        if code in (204, 304) or 100 <= code < 200:
            send_response(sock, "HTTP/1.1", code, "Status", list(ka), b"", True)
            return keep
        return reply(code, "Status", f"status {code}\n".encode())
    nbytes = int(query.get("bytes", "0"))
    if path == "/stream":
        send_response(sock, "HTTP/1.1", 200, "OK",
                      [("Content-Type", "application/octet-stream"),
                       ("Transfer-Encoding", "chunked"), *ka], b"", True)
        if not head_only:
            for piece in pattern_chunks(nbytes, 16384):
                sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        return keep
    if path in ("/close", "/http10"):
        ver = "HTTP/1.0" if path == "/http10" else "HTTP/1.1"
        send_response(sock, ver, 200, "OK",
                      [("Content-Type", "application/octet-stream"), ("Connection", "close")],
                      b"", True)
        if not head_only:
            for piece in pattern_chunks(nbytes):
                sock.sendall(piece)
        return False
    if path == "/slow":
        ms = int(query.get("ms", "1000"))
        send_response(sock, "HTTP/1.1", 200, "OK",
                      [("Content-Type", "application/octet-stream"),
                       ("Content-Length", nbytes), *ka], b"", True)
        if not head_only:
            steps = 20
            piece = max(1, -(-nbytes // steps))
            for chunk in pattern_chunks(nbytes, piece):
                time.sleep(ms / 1000.0 / steps)
                sock.sendall(chunk)
        return keep
    if path == "/stall":
        time.sleep(int(query.get("ms", "5000")) / 1000.0)
        return reply(200, "OK", b"late\n")
    return reply(404, "Not Found", b"not found\n")


# /raw?case=NAME: exact response bytes, for the proxy's framing checks (docs/reference/proxy.md §4.6). Each is
# written as is and the connection is then kept open for another request (so a proxy that
# wrongly pooled it would be seen reusing it: same "conn" in the log).
RAW_CASES = {
    "ok": b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nraw ok\r\n",
    "cl-te": b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5\r\nhello\r\n0\r\n\r\n",
    "dup-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 9\r\n\r\nhello",
    "te-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "te-gzip-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                       b"5\r\nhello\r\n0\r\n\r\n",
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 5\r\n\r\nhello",
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"zz\r\nhello\r\n0\r\n\r\n",
    "chunk-no-crlf": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhelloXX0\r\n\r\n",
    "http2-status": b"HTTP/2.0 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "icy-status": b"ICY 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "unsolicited-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\n\r\nhello after 101",
    "bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello",
    "bare-cr": b"HTTP/1.1 200 OK\r\nX-A: a\rX-B: b\r\nContent-Length: 5\r\n\r\nhello",
    "dup-cl-same": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "cl-list": b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello",
    "te-chunked-http10": b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5\r\nhello\r\n0\r\n\r\n",
    "empty-name": b"HTTP/1.1 200 OK\r\n: x\r\nContent-Length: 5\r\n\r\nhello",
    "nul-value": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 5\r\n\r\nhello",
    # Interim responses: a few before the answer are relayed; a flood of them is refused.
    "interims": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nraw ok\r\n",
    # A chunked body whose chunk-size lines carry 5000-byte extensions (over the proxy's cap).
    "ext-flood": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                 + (b"1;e=" + b"a" * 5000 + b"\r\nx\r\n") * 4 + b"0\r\n\r\n",
    # 20 000 chunks of one byte each (a body of 20 000 bytes in 120 005 bytes of framing).
    "tiny-chunks": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   + b"1\r\na\r\n" * 20000 + b"0\r\n\r\n",
    "interim-flood": b"HTTP/1.1 100 Continue\r\n\r\n" * 40
                     + b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nraw ok\r\n",
}


def raw_case(c, case, headers):
    """/raw?case=NAME (before the body is read). NAME is a RAW_CASES key, hangup (no answer, the
    connection closed), cut-head (part of a head, then the close), interim-close (a 103 Early
    Hints, then the close: no final response), or early-413: a 413
    with Connection: close sent after the head of a request whose body has not been read; the
    body is then drained (at most 5 s) before the close, so the proxy sees no reset."""
    sock = c.sock
    if case == "hangup":
        return False
    if case == "cut-head":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
        time.sleep(0.3)  # the reader takes these bytes before it learns of the close
        return False
    if case == "interim-close":
        sock.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
        time.sleep(0.3)  # as cut-head: the reader takes these bytes before it learns of the close
        return False
    if case == "early-413":
        sock.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: 14\r\nConnection: close\r\n\r\nupload refused")
        deadline = time.monotonic() + 5
        try:
            while time.monotonic() < deadline:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                if not sock.recv(65536):
                    break
        except (OSError, ssl.SSLError):
            pass
        return False
    if case not in RAW_CASES:
        raise BadRequest(f"unknown raw case {case!r}")
    sock.sendall(RAW_CASES[case])
    return True


def big_head(sock, size, split, ms):
    """/bighead: a 200 whose head is exactly `size` bytes (at least 64), cut into writes at the
    offsets in `split` (comma-separated), `ms` milliseconds apart; the connection stays open."""
    first = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
    room = size - len(first) - 2  # the empty line that ends the head
    if room < 0 or (0 < room < 9):
        raise BadRequest("bighead: size too small")
    lines = []
    while room > 0:
        n = min(room, 1000)
        if room - n != 0 and room - n < 9:
            n = room - 9  # leave room for a last line of at least "X-Pad: \r\n" + 1 byte
        lines.append(b"X-Pad: " + b"p" * (n - 9) + b"\r\n")
        room -= n
    data = first + b"".join(lines) + b"\r\n"
    assert len(data) == size, (len(data), size)
    data += b"ok"
    cuts = sorted({int(x) for x in split.split(",") if x} | {0, len(data)})
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        if i > 0:
            time.sleep(ms / 1000.0)
        sock.sendall(data[a:b])
    return True


def websocket(c, method, headers, reply):
    """/ws: the RFC 6455 opening handshake, then every byte received is echoed back (no frame
    parsing). Closes once the bytes received so far contain b"BYE"."""
    upgrade = ",".join(header_values(headers, "upgrade")).lower()
    conn_tokens = [t.strip() for t in ",".join(header_values(headers, "connection")).lower()
                   .split(",")]
    key = header_values(headers, "sec-websocket-key")
    if (method != "GET" or "websocket" not in upgrade or "upgrade" not in conn_tokens
            or len(key) != 1):
        return reply(426, "Upgrade Required", b"websocket handshake expected\n",
                     extra=[("Upgrade", "websocket")])
    accept = base64.b64encode(hashlib.sha1((key[0] + WS_GUID).encode()).digest()).decode()
    send_response(c.sock, "HTTP/1.1", 101, "Switching Protocols",
                  [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                   ("Sec-WebSocket-Accept", accept)])
    seen = b""
    while True:
        if not c.buf:
            try:
                c.fill()
            except Closed:
                return False
        data, c.buf = c.buf, b""
        c.sock.sendall(data)
        seen = (seen + data)[-64:]
        if b"BYE" in seen:
            return False


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        srv = self.server
        sock = self.request
        sock.settimeout(IDLE_TIMEOUT_S)
        port = self.client_address[1]
        try:
            if srv.tls_ctx is not None:
                sock = srv.tls_ctx.wrap_socket(sock, server_side=True)
            handle_connection(srv.origin, sock, port, srv.tls_ctx is not None)
        except (Closed, OSError, ssl.SSLError, ValueError) as e:
            if not isinstance(e, (Closed, ssl.SSLEOFError, ConnectionResetError)):
                print(f"origin: {self.client_address}: {e!r}", file=sys.stderr, flush=True)
        finally:
            try:
                if isinstance(sock, ssl.SSLSocket):
                    sock.settimeout(2)
                    sock = sock.unwrap()  # close_notify, so close-delimited bodies end cleanly
            except (OSError, ssl.SSLError, ValueError):
                pass
            try:
                sock.close()
            except OSError:
                pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512


def serve(args):
    opts = {}
    it = iter(args)
    for a in it:
        if a in ("--ports-file", "--log", "--cert", "--key", "--host", "--http-port",
                 "--tls-port"):
            opts[a] = next(it)
        else:
            sys.exit(f"origin.py: unknown option {a}")
    host = opts.get("--host", "127.0.0.1")
    origin = Origin(opts["--log"])
    open(opts["--log"], "a").close()
    servers = []
    plain = Server((host, int(opts.get("--http-port", "0"))), Handler, bind_and_activate=True)
    plain.origin, plain.tls_ctx = origin, None
    servers.append(plain)
    ports = f"http={plain.server_address[1]}"
    if "--cert" in opts:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(opts["--cert"], opts["--key"])
        ctx.set_alpn_protocols(["http/1.1"])
        tls = Server((host, int(opts.get("--tls-port", "0"))), Handler, bind_and_activate=True)
        tls.origin, tls.tls_ctx = origin, ctx
        servers.append(tls)
        ports += f" tls={tls.server_address[1]}"
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = opts["--ports-file"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(ports + "\n")
    os.replace(tmp, opts["--ports-file"])
    print(f"origin.py: listening {ports} pid={os.getpid()}", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "pattern":
        out = sys.stdout.buffer
        try:
            for piece in pattern_chunks(int(sys.argv[2])):
                out.write(piece)
            out.flush()
        except BrokenPipeError:
            sys.exit(1)
    else:
        sys.exit("usage: origin.py serve --ports-file F --log F [--cert F --key F] "
                 "[--host H] [--http-port N] [--tls-port N] | origin.py pattern N")


if __name__ == "__main__":
    main()
