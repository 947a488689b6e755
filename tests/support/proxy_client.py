#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/proxy_client.py - an HTTP/1.1 client that talks through the proxy on purpose.

curl hides the things some tests need to control: which requests share one tunnel, when a
request is sent, a client that stops reading, request targets curl would normalise. Standard
library only.

Tunnel mode (default): CONNECT --connect HOST:PORT through --proxy, then TLS (verified against
--cafile, SNI and hostname --servername, default the CONNECT host), then requests on that one
connection:

    proxy_client.py --proxy 127.0.0.1:P --connect a.sluice.test:443 --cafile ca.pem \
        --request 'GET /hello' [--request 'POST /echo'] [--count N] [--header 'X: y'] ...

Each request is sent after the previous response was read. With --interactive, request lines
('METHOD PATH') are read from standard input instead, one at a time, so a test can change
something between two requests on the same tunnel.

Plain mode (--absolute URL): the request line carries URL as given (absolute-form, not
normalised), sent straight to the proxy, with Host from --host-header or the URL.

Output, one line per event, flushed at once:
    connect=200                              the CONNECT answer (tunnel mode)
    connect=403 reason=host-not-allowed      ... a refused CONNECT, then exit 3
    tls=ok version=TLSv1.3 alpn=http/1.1     handshake done (tunnel mode)
    tls-error ...                            handshake failed, exit 4
    status=200 reason=- length=N sha256=HEX framing=F
                                             one per response; reason is X-Sluice-Reason or -,
                                             F is none, chunked, length or close
    error ...                                connection closed or broken, exit 5
--dump FILE appends every byte received (after TLS) to FILE, heads included.
--stall-after N --stall-seconds S: after N body bytes of the first response, stop reading for S
seconds (print "stalled bytes=N"), then close without reading the rest.
--pause-after N --pause-seconds S: after N body bytes of each response, stop reading for S seconds
(print "paused bytes=N"), then read on to its end; a response cut short prints
"cut bytes=N" (the body bytes received) instead of its status line. --rcvbuf B sets the
socket's receive buffer (before connecting), so that a pause fills the proxy's buffers soon.

--pipeline: all requests (the --request list, --count times) are sent in one write, then the
responses are read in order. In plain mode a request line may name its own target
('GET http://host:port/path'; '-' or nothing means --absolute).

Raw mode (--raw BYTES, Python escapes such as \\r\\n and \\x00 allowed): BYTES are sent as they
are, instead of built requests: straight to the proxy without --connect, else inside the tunnel
(after TLS, or in the clear with --no-tls). Then --responses N responses (default 1) are read
and reported, then --recv N bytes are read (default 0), then each --then BYTES is sent and as
many bytes are read back (a relay after a 101), then --eof-wait S waits up to S seconds for the
peer to close. Extra lines:
    recv=ESCAPED                             what came back for --recv or one --then
    eof | eof reset | eof data=ESCAPED       the peer closed (cleanly, with a reset, after
                                             sending more bytes)
    open                                     still open after --eof-wait seconds
ESCAPED is Python's bytes repr without b'...'. With --show-body each response line is followed
by body=ESCAPED (its first 400 bytes), with --show-header NAME by header NAME=VALUE (empty when
absent).
"""

import argparse
import base64
import codecs
import hashlib
import socket
import ssl
import sys
import time
import urllib.parse


class Broken(Exception):
    pass


def out(line):
    print(line, flush=True)


class Reader:
    def __init__(self, sock, dump):
        self.sock = sock
        self.buf = b""
        self.dump = dump

    def fill(self):
        try:
            data = self.sock.recv(65536)
        except (ssl.SSLError, OSError) as e:
            raise Broken(f"recv: {e}") from None
        if not data:
            raise Broken("closed by peer")
        if self.dump:
            self.dump.write(data)
            self.dump.flush()
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise Broken("line too long")
            self.fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 256 * 1024:
                raise Broken("head too long")
            self.fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise Broken(f"bad status line {lines[0]!r}")
        headers = []
        for raw in lines[1:]:
            name, _, value = raw.partition(":")
            headers.append((name.strip().lower(), value.strip()))
        return parts[0], int(parts[1]), headers

    def take(self, n, sink):
        while n > 0:
            if not self.buf:
                self.fill()
            piece = self.buf[:n]
            self.buf = self.buf[len(piece):]
            sink(piece)
            n -= len(piece)

    def until_close(self, sink):
        while True:
            if self.buf:
                sink(self.buf)
                self.buf = b""
            try:
                self.fill()
            except Broken:
                return


def get(headers, name):
    vals = [v for n, v in headers if n == name]
    return vals[-1] if vals else None


class Stall(Exception):
    pass


def esc(b):
    """bytes -> their Python repr without b'...' (printable, one line)."""
    return repr(bytes(b))[2:-1]


def unesc(text):
    """A command-line argument with Python escapes (\\r\\n, \\x00) -> bytes."""
    return codecs.escape_decode(text.encode("latin-1"))[0]


class Cut(Exception):
    """The connection ended in the middle of a body: `n` body bytes had arrived."""

    def __init__(self, n):
        super().__init__(f"cut bytes={n}")
        self.n = n


def read_response(r, method, stall=None, keep=None, pause=None):
    """Reads one response (skipping 1xx). Returns (status, headers, length, sha256, closed,
    framing), framing being none, chunked, length or close. `pause` = (bytes, seconds): stop
    reading that long once that many body bytes arrived, then read on; a body cut short then
    raises Cut."""
    while True:
        version, status, headers = r.head()
        if not 100 <= status < 200 or status == 101:
            break
    h = hashlib.sha256()
    n = [0]
    paused = [pause is None]

    def sink(b):
        if keep is not None and len(keep) < 400:
            keep.extend(b[:400 - len(keep)])
        if stall and n[0] + len(b) >= stall[0]:
            h.update(b)
            n[0] += len(b)
            raise Stall()
        h.update(b)
        n[0] += len(b)
        if not paused[0] and n[0] >= pause[0]:
            paused[0] = True
            out(f"paused bytes={n[0]}")
            time.sleep(pause[1])

    closed = False
    te = (get(headers, "transfer-encoding") or "").lower()
    cl = get(headers, "content-length")
    framing = "none"
    try:
        if method == "HEAD" or status in (204, 304) or status == 101:
            pass
        elif te == "chunked":
            framing = "chunked"
            while True:
                size = int(r.line().split(b";")[0].strip(), 16)
                if size == 0:
                    while r.line():
                        pass
                    break
                r.take(size, sink)
                if r.line() != b"":
                    raise Broken("chunk without CRLF")
        elif cl is not None:
            framing = "length"
            r.take(int(cl), sink)
        else:
            framing = "close"
            r.until_close(sink)
            closed = True
    except Broken:
        if pause is not None:
            raise Cut(n[0]) from None
        raise
    conn = (get(headers, "connection") or "").lower()
    if "close" in conn or (version == "HTTP/1.0" and "keep-alive" not in conn):
        closed = True
    return status, headers, n[0], h.hexdigest(), closed, framing


def report(status, headers, length, digest, framing, body=None, show=()):
    reason = get(headers, "x-sluice-reason") or "-"
    out(f"status={status} reason={reason} length={length} sha256={digest} framing={framing}")
    if body is not None:
        out(f"body={esc(body)}")
    for name in show:
        out(f"header {name.lower()}={get(headers, name.lower()) or ''}")


def wait_eof(sock, r, seconds):
    """After the exchange: does the peer close within `seconds`? Prints eof/open."""
    extra = bytearray(r.buf)
    r.buf = b""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    while True:
        try:
            data = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            out(f"open data={esc(extra)}" if extra else "open")
            return
        except (ssl.SSLError, OSError):
            out(f"eof reset data={esc(extra)}" if extra else "eof reset")
            return
        if not data:
            out(f"eof data={esc(extra)}" if extra else "eof")
            return
        extra += data
        left = deadline - time.monotonic()
        if left <= 0:
            out(f"open data={esc(extra)}")
            return
        sock.settimeout(left)


def raw_exchange(sock, r, a):
    """Raw mode, after the tunnel (if any) is up: --raw, --responses, --then, --eof-wait."""
    sock.sendall(unesc(a.raw))
    for _ in range(a.responses):
        keep = bytearray() if a.show_body else None
        status, headers, n, digest, closed, framing = read_response(r, "GET", keep=keep)
        report(status, headers, n, digest, framing, keep, a.show_header)
    for data in ([None] if a.recv else []) + [unesc(t) for t in a.then]:
        if data is not None:
            sock.sendall(data)
        got = bytearray()
        try:
            r.take(a.recv if data is None else len(data), got.extend)
        except Broken:
            out(f"recv={esc(got)}")
            raise
        out(f"recv={esc(got)}")
    if a.eof_wait is not None:
        wait_eof(sock, r, a.eof_wait)
    return 0


def pipelined(sock, r, batch, methods, a):
    """--pipeline: sends every request of `batch` in one write, then reads and reports the
    responses (to `methods`) in order."""
    sock.sendall(batch)
    for method in methods:
        keep = bytearray() if a.show_body else None
        status, headers, n, digest, closed, framing = read_response(r, method, keep=keep)
        report(status, headers, n, digest, framing, keep, a.show_header)
        if closed:
            out("closed")
            return 0
    return 0


def build_request(method, target, host, extra, body, version="HTTP/1.1"):
    lines = [f"{method} {target} {version}", f"Host: {host}"]
    lines += extra
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True, help="HOST:PORT of the proxy")
    ap.add_argument("--connect", help="CONNECT authority, sent as given")
    ap.add_argument("--absolute", help="plain mode: absolute-form URL, sent as given")
    ap.add_argument("--host-header", help="Host header value (default from the target)")
    ap.add_argument("--cafile")
    ap.add_argument("--servername")
    ap.add_argument("--alpn", default="http/1.1")
    ap.add_argument("--proxy-auth", help="ID:TOKEN for Proxy-Authorization: Basic")
    ap.add_argument("--request", action="append", default=[], help="'METHOD PATH'")
    ap.add_argument("--count", type=int, default=1, help="repeat the request list N times")
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--body", help="request body (text) for every request")
    ap.add_argument("--http-version", default="HTTP/1.1", help="request line version")
    ap.add_argument("--interactive", action="store_true")
    ap.add_argument("--stall-after", type=int)
    ap.add_argument("--stall-seconds", type=float, default=5)
    ap.add_argument("--pause-after", type=int)
    ap.add_argument("--pause-seconds", type=float, default=5)
    ap.add_argument("--rcvbuf", type=int)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--dump")
    ap.add_argument("--pipeline", action="store_true", help="send all requests in one write")
    ap.add_argument("--raw", help="bytes to send as they are (Python escapes)")
    ap.add_argument("--no-tls", action="store_true", help="raw mode: no TLS inside the tunnel")
    ap.add_argument("--responses", type=int, default=1, help="raw mode: responses to read")
    ap.add_argument("--recv", type=int, default=0, help="raw mode: bytes to read after them")
    ap.add_argument("--then", action="append", default=[],
                    help="raw mode: after the responses, send these bytes and read as many back")
    ap.add_argument("--eof-wait", type=float, help="wait up to S seconds for the peer to close")
    ap.add_argument("--show-body", action="store_true")
    ap.add_argument("--show-header", action="append", default=[])
    a = ap.parse_args()

    dump = open(a.dump, "ab") if a.dump else None
    phost, _, pport = a.proxy.rpartition(":")
    auth = []
    if a.proxy_auth:
        auth = ["Proxy-Authorization: Basic " + base64.b64encode(a.proxy_auth.encode()).decode()]
    body = a.body.encode() if a.body is not None else None
    pause = (a.pause_after, a.pause_seconds) if a.pause_after is not None else None
    try:
        if a.rcvbuf:
            sock = socket.socket(socket.AF_INET6 if ":" in phost else socket.AF_INET)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
            sock.settimeout(a.timeout)
            sock.connect((phost.strip("[]"), int(pport)))
        else:
            sock = socket.create_connection((phost.strip("[]"), int(pport)), timeout=a.timeout)
    except OSError as e:
        out(f"error connect to proxy: {e}")
        return 5
    sock.settimeout(a.timeout)
    r = Reader(sock, dump)

    try:
        if a.raw is not None and not a.connect:
            return raw_exchange(sock, r, a)
        if a.absolute:
            u = urllib.parse.urlsplit(a.absolute)
            host = a.host_header or u.netloc
            reqs = a.request or ["GET -"]
            if a.pipeline:
                batch, methods = b"", []
                for _ in range(a.count):
                    for line in reqs:
                        method, _, target = line.strip().partition(" ")
                        target = target.strip()
                        if target in ("", "-"):
                            target = a.absolute
                        thost = a.host_header or urllib.parse.urlsplit(target).netloc or host
                        batch += build_request(method, target, thost, auth + a.header, body,
                                               a.http_version)
                        methods.append(method)
                return pipelined(sock, r, batch, methods, a)
            for _ in range(a.count):
                for line in reqs:
                    method = line.split()[0]
                    sock.sendall(build_request(method, a.absolute, host, auth + a.header, body,
                                              a.http_version))
                    status, headers, n, digest, closed, framing = read_response(
                        r, method, pause=pause)
                    report(status, headers, n, digest, framing)
                    if closed:
                        return 0
            return 0

        sock.sendall(f"CONNECT {a.connect} HTTP/1.1\r\nHost: {a.connect}\r\n".encode("latin-1")
                     + "".join(x + "\r\n" for x in auth).encode("latin-1") + b"\r\n")
        version, status, headers = r.head()
        if status != 200:
            reason = get(headers, "x-sluice-reason") or "-"
            out(f"connect={status} reason={reason}")
            cl = get(headers, "content-length")
            if cl is not None:
                try:
                    r.take(int(cl), lambda b: None)
                except Broken:
                    pass
            return 3
        out("connect=200")
        if r.buf:
            out("error bytes after the CONNECT response")
            return 5
        host = a.connect.rsplit(":", 1)[0].strip("[]")
        if a.no_tls:
            out("tls=none")
            return raw_exchange(sock, r, a) if a.raw is not None else 0
        ctx = ssl.create_default_context(cafile=a.cafile)
        ctx.set_alpn_protocols(a.alpn.split(","))
        try:
            tls = ctx.wrap_socket(sock, server_hostname=a.servername or host)
        except (ssl.SSLError, OSError) as e:
            out(f"tls-error {e}")
            return 4
        out(f"tls=ok version={tls.version()} alpn={tls.selected_alpn_protocol()}")
        r = Reader(tls, dump)
        hosthdr = a.host_header or a.connect
        if a.raw is not None:
            return raw_exchange(tls, r, a)
        if a.pipeline:
            batch, methods = b"", []
            for _ in range(a.count):
                for line in a.request or ["GET /"]:
                    method, _, target = line.strip().partition(" ")
                    batch += build_request(method, target or "/", hosthdr, a.header, body,
                                           a.http_version)
                    methods.append(method)
            return pipelined(tls, r, batch, methods, a)

        def one(line, stall=None):
            method, _, target = line.strip().partition(" ")
            tls.sendall(build_request(method, target or "/", hosthdr, a.header, body,
                                      a.http_version))
            status, headers, n, digest, closed, framing = read_response(r, method, stall,
                                                                        pause=pause)
            report(status, headers, n, digest, framing)
            return closed

        if a.stall_after is not None:
            try:
                one(a.request[0] if a.request else "GET /", (a.stall_after,))
            except Stall:
                out(f"stalled bytes={a.stall_after}")
                time.sleep(a.stall_seconds)
            return 0
        if a.interactive:
            for line in sys.stdin:
                if not line.strip():
                    continue
                if one(line):
                    out("closed")
                    return 0
            return 0
        for _ in range(a.count):
            for line in a.request or ["GET /"]:
                if one(line):
                    out("closed")
                    return 0
        return 0
    except Cut as e:
        out(str(e))
        return 5
    except Broken as e:
        out(f"error {e}")
        return 5
    except (OSError, ValueError) as e:
        out(f"error {e!r}")
        return 5
    finally:
        try:
            sock.close()
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
