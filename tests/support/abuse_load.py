#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/abuse_load.py - hostile load for tests/integration/proxy_abuse.sh.

Standard library only; one thread per command, non-blocking sockets driven by `selectors`, every
loop bounded in count and in time. Loopback only: --proxy is a port on 127.0.0.1.

    slow    --plain N --tunnel M [--silent] --connect HOST:PORT --duration S [--interval S]
            N connections that trickle a request head one byte per --interval (or, with
            --silent, send nothing at all), and M that CONNECT to HOST:PORT and then trickle a
            ClientHello. Prints one summary line:
              opened=N plain=OUTCOME:COUNT,... tunnel=OUTCOME:COUNT,... cut_min=S cut_max=S
            OUTCOME is status-NNN (the proxy answered NNN, then closed or not), eof, reset or
            open (still open after --duration); cut_* are seconds from a connection's first
            byte (its CONNECT's 200 for tunnels; its connect for --silent) to the proxy's
            first byte or close.
    normal  --connect HOST:PORT --path P --count N --cafile CA [--spacing S]
            N requests, each on a new CONNECT + verified TLS connection; prints
              ok=N fail=N max_ms=X p50_ms=X  (then one `fail ...` line per failure)
    flood   --names N --suffix S --port P --concurrency C --deadline S [--pid PID]
            [--sample-every K]
            N CONNECTs to n<i>.SUFFIX:P, each followed by a complete TLS handshake (not
            verified: the leaf's DER must name n<i>.SUFFIX) and a close. Every K handshakes
            prints `rss done=K kib=VmRSS of PID`; at the end `done=N failed=N seconds=X`.
    noread  --plain URL --tunnel HOST:PORT --path P --count N --hold S --pid PID
            N plain requests for URL and N requests for P in tunnels to HOST:PORT that never
            read a byte of their response (receive buffer 4 KiB); samples the proxy's VmRSS each
            0.5 s while holding them for S s (`rss t=S kib=N`), then reads what is left (at
            most 5 s) and prints `closed=N open=N` (closed: the proxy ended it).
    rst     --connect HOST:PORT --path P --count N --after BYTES
            N tunnels that request P, read BYTES of the response and reset the connection
            (SO_LINGER 0); prints `reset=N short=N` (short: the response ended before BYTES).
    halfclose --plain URL | --connect HOST:PORT --path P  --cafile CA [--close]
              [--no-close-notify]
            one request (with `Connection: close` when --close), then the write side is shut
            (FIN; in a tunnel close_notify first, unless --no-close-notify); prints
            `status=NNN length=N complete=yes|no`.
    stallread --prefix URL --count N --stall S
            N Connection: close requests for URL1 ... URLN (receive buffer 64 KiB), none read
            for S seconds, then each read to its end; prints `complete=N short=N`.
    origin  --mode rst|silent --cert C --key K --ports-file F
            a TLS origin on 127.0.0.1: rst answers a request with a 1 MiB Content-Length, sends
            64 KiB of it and resets the connection; silent accepts and never sends a byte.
"""

import argparse
import os
import resource
import selectors
import socket
import ssl
import struct
import sys
import threading
import time


def out(line):
    print(line, flush=True)


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def vmrss(pid):
    try:
        with open("/proc/%d/status" % pid, encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def client_hello(name):
    """The bytes of a ClientHello for SNI `name` (and its SSLObject, unverified)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outg, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return obj, inc, outg, outg.read()


def nb_connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    err = s.connect_ex(("127.0.0.1", port))
    if err not in (0, 115):  # EINPROGRESS
        s.close()
        raise OSError(err, os.strerror(err))
    return s


# ---------------------------------------------------------------------------------------------
# slow: slowloris, plain and in tunnels


class Slow:
    def __init__(self, sock, kind, payload, start):
        self.sock = sock
        self.kind = kind  # "plain" or "tunnel"
        self.payload = payload
        self.sent = 0
        self.got = b""
        self.phase = "connect" if kind == "tunnel" else "trickle"
        self.t0 = start
        self.outcome = None
        self.t_end = None


def run_slow(a):
    raise_nofile()
    sel = selectors.DefaultSelector()
    conns = []
    host, port = a.connect.rsplit(":", 1)
    head = ("GET http://%s/slow HTTP/1.1\r\nHost: %s\r\nX-Slow: " % (a.connect, a.connect)
            ).encode() + b"a" * 4000
    hello = client_hello(host)[3]
    t_start = time.monotonic()
    for i in range(a.plain + a.tunnel):
        kind = "plain" if i < a.plain else "tunnel"
        try:
            s = nb_connect(a.proxy)
        except OSError as e:
            out("# connect %d failed: %s" % (i, e))
            continue
        c = Slow(s, kind, head if kind == "plain" else hello, time.monotonic())
        if kind == "tunnel":
            c.connect_req = ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.connect, a.connect)
                             ).encode()
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)
    deadline = t_start + a.duration
    next_tick = time.monotonic()
    live = len(conns)
    while live > 0 and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_tick:
            next_tick = now + a.interval
            for c in conns:
                if c.outcome is not None:
                    continue
                try:
                    if c.phase == "connect":
                        c.sock.send(c.connect_req)
                        c.phase = "await-200"
                    elif c.phase == "trickle" and not a.silent and c.sent < len(c.payload):
                        if c.sent == 0 and c.kind == "plain":
                            c.t0 = time.monotonic()
                        c.sent += c.sock.send(c.payload[c.sent:c.sent + 1])
                except BlockingIOError:
                    pass
                except OSError:
                    pass  # the read side reports how it ended
        timeout = max(0.0, min(next_tick, deadline) - time.monotonic())
        for key, _ in sel.select(timeout):
            c = key.data
            try:
                data = c.sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = None
            if data:
                if c.phase == "await-200":
                    c.got += data
                    if b"\r\n\r\n" in c.got:
                        if not c.got.startswith(b"HTTP/1.1 200"):
                            c.outcome = "connect-" + c.got[9:12].decode("ascii", "replace")
                        c.phase = "trickle"
                        c.t0 = time.monotonic()
                        c.got = c.got.split(b"\r\n\r\n", 1)[1]
                else:
                    if c.t_end is None:
                        c.t_end = time.monotonic()  # the proxy's first word: when it acted
                    c.got += data[:64]
                continue
            # EOF (b"") or error (None): the proxy ended it.
            if c.outcome is None:
                if c.got.startswith(b"HTTP/1."):
                    c.outcome = "status-" + c.got[9:12].decode("ascii", "replace")
                elif c.got:
                    c.outcome = "data"
                else:
                    c.outcome = "eof" if data == b"" else "reset"
            if c.t_end is None:
                c.t_end = time.monotonic()
            sel.unregister(c.sock)
            c.sock.close()
            live -= 1
    cuts = []
    tally = {"plain": {}, "tunnel": {}}
    for c in conns:
        if c.outcome is None:
            if c.got.startswith(b"HTTP/1."):
                c.outcome = "status-" + c.got[9:12].decode("ascii", "replace") + "-open"
            else:
                c.outcome = "open"
            c.sock.close()
        if c.t_end is not None:
            cuts.append(c.t_end - c.t0)
        tally[c.kind][c.outcome] = tally[c.kind].get(c.outcome, 0) + 1

    def fmt(d):
        return ",".join("%s:%d" % kv for kv in sorted(d.items())) or "-"

    out("opened=%d plain=%s tunnel=%s cut_min=%.2f cut_max=%.2f elapsed=%.1f" % (
        len(conns), fmt(tally["plain"]), fmt(tally["tunnel"]), min(cuts) if cuts else -1,
        max(cuts) if cuts else -1, time.monotonic() - t_start))


# ---------------------------------------------------------------------------------------------
# normal: a well-behaved client, one request per connection


def read_head(sock, what, limit=None):
    """Reads from `sock` up to the blank line that ends a head (and what came with it); OSError
    "closed before WHAT" when the peer closes first, "head too long" past `limit` bytes."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(4096)
        if not d:
            raise OSError("closed before " + what)
        buf += d
        if limit is not None and len(buf) > limit:
            raise OSError("head too long")
    return buf


def read_response(tls):
    """Reads one Content-Length response; returns (status, body length)."""
    buf = read_head(tls, "the head", 65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        d = tls.recv(65536)
        if not d:
            raise OSError("closed in the body")
        body += d
    return status, len(body)


def bio_handshake(s, ctx, host):
    """A TLS client session for `host` over memory BIOs, its handshake driven on the blocking
    socket `s` (at most 20 rounds). Returns the SSLObject and its incoming and outgoing BIOs;
    what the handshake leaves to send (its last flight) is still in the outgoing one."""
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outg, server_hostname=host)
    for _ in range(20):
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            s.sendall(outg.read())
            inc.write(s.recv(16384))
    return obj, inc, outg


def tunnel(proxy, hostport, timeout):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=timeout)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hostport, hostport)).encode())
    buf = read_head(s, "the CONNECT answer")
    if not buf.startswith(b"HTTP/1.1 200"):
        raise OSError("CONNECT answered " + buf.split(b"\r\n", 1)[0].decode("ascii", "replace"))
    return s


def verified_ctx(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def run_normal(a):
    ctx = verified_ctx(a.cafile)
    host = a.connect.rsplit(":", 1)[0]
    lat, fails = [], []
    t_end = time.monotonic() + a.budget
    for i in range(a.count):
        if time.monotonic() > t_end:
            fails.append("%d: out of time" % i)
            continue
        t0 = time.monotonic()
        try:
            s = tunnel(a.proxy, a.connect, a.timeout)
            with ctx.wrap_socket(s, server_hostname=host) as tls:
                tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                             % (a.path, a.connect)).encode())
                status, _ = read_response(tls)
            if status != 200:
                fails.append("%d: status %d" % (i, status))
            else:
                lat.append(time.monotonic() - t0)
        except (OSError, ssl.SSLError) as e:
            fails.append("%d: %s after %.2f s" % (i, e, time.monotonic() - t0))
        time.sleep(a.spacing)
    lat.sort()
    out("ok=%d fail=%d max_ms=%.0f p50_ms=%.0f" % (
        len(lat), len(fails), lat[-1] * 1000 if lat else -1,
        lat[len(lat) // 2] * 1000 if lat else -1))
    for f in fails[:10]:
        out("fail " + f)


# ---------------------------------------------------------------------------------------------
# flood: distinct SNI names, one full handshake each


class Hs:
    def __init__(self, i, name, sock, port):
        self.i = i
        self.name = name
        self.sock = sock
        self.req = ("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name, port, name, port)
                    ).encode()
        self.phase = "connecting"
        self.buf = b""
        self.obj = None


def run_flood(a):
    raise_nofile()
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    deadline = t0 + a.deadline
    nxt, done, failed, live = 0, 0, 0, 0
    fail_notes = []
    last_sample = 0

    def start():
        nonlocal nxt, live, failed
        i = nxt
        nxt += 1
        name = "n%d.%s" % (i, a.suffix)
        try:
            s = nb_connect(a.proxy)
        except OSError as e:
            failed += 1
            if len(fail_notes) < 5:
                fail_notes.append("%s: connect: %s" % (name, e))
            return
        h = Hs(i, name, s, a.port)
        sel.register(s, selectors.EVENT_WRITE, h)
        live += 1

    def finish(h, ok, why=""):
        nonlocal done, failed, live
        sel.unregister(h.sock)
        h.sock.close()
        live -= 1
        if ok:
            done += 1
        else:
            failed += 1
            if len(fail_notes) < 5:
                fail_notes.append("%s: %s" % (h.name, why))

    while time.monotonic() < deadline:
        while live < a.concurrency and nxt < a.names:
            start()
        if live == 0:
            break
        for key, ev in sel.select(min(1.0, max(0.0, deadline - time.monotonic()))):
            h = key.data
            try:
                if h.phase == "connecting":
                    h.sock.send(h.req)
                    h.phase = "await-200"
                    sel.modify(h.sock, selectors.EVENT_READ, h)
                    continue
                d = h.sock.recv(65536)
                if not d:
                    finish(h, False, "closed in phase " + h.phase)
                    continue
                if h.phase == "await-200":
                    h.buf += d
                    if b"\r\n\r\n" not in h.buf:
                        continue
                    if not h.buf.startswith(b"HTTP/1.1 200"):
                        finish(h, False, h.buf.split(b"\r\n", 1)[0].decode("ascii", "replace"))
                        continue
                    h.obj, h.inc, h.outg, hello = client_hello(h.name)
                    h.sock.setblocking(True)
                    h.sock.sendall(hello)
                    h.sock.setblocking(False)
                    h.phase = "handshake"
                    continue
                h.inc.write(d)
                try:
                    h.obj.do_handshake()
                except ssl.SSLWantReadError:
                    pending = h.outg.read()
                    if pending:
                        h.sock.setblocking(True)
                        h.sock.sendall(pending)
                        h.sock.setblocking(False)
                    continue
                pending = h.outg.read()
                if pending:
                    h.sock.setblocking(True)
                    h.sock.sendall(pending)
                der = h.obj.getpeercert(binary_form=True) or b""
                finish(h, h.name.encode() in der, "the leaf does not name it")
            except (OSError, ssl.SSLError) as e:
                finish(h, False, "%s in phase %s" % (e, h.phase))
        if a.pid and done + failed >= last_sample + a.sample_every:
            last_sample = (done + failed) // a.sample_every * a.sample_every
            out("rss done=%d kib=%d" % (done + failed, vmrss(a.pid)))
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    if a.pid:
        out("rss done=%d kib=%d" % (done + failed, vmrss(a.pid)))
    out("done=%d failed=%d seconds=%.1f" % (done, failed, time.monotonic() - t0))
    for f in fail_notes:
        out("fail " + f)


# ---------------------------------------------------------------------------------------------
# noread: clients that never read their response


def run_noread(a):
    raise_nofile()
    socks = []
    host = a.tunnel.rsplit(":", 1)[0]
    for i in range(a.count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", a.proxy))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.plain, a.plain.split("/")[2])
                   ).encode())
        socks.append((s, None))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for i in range(a.count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", a.proxy))
        s.settimeout(10)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.tunnel, a.tunnel)).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(1)  # byte by byte: nothing of the tunnel is read here
            if not d:
                break
            buf += d
        obj, _, outg = bio_handshake(s, ctx, host)
        obj.write(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.path, a.tunnel)).encode())
        s.sendall(outg.read())
        socks.append((s, obj))
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.hold:
        out("rss t=%.1f kib=%d" % (time.monotonic() - t0, vmrss(a.pid)))
        time.sleep(0.5)
    # Read what is left (what the kernel still held for us, at most 64 MiB each) to its end.
    closed = still = 0
    sel = selectors.DefaultSelector()
    for s, _ in socks:
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sel.register(s, selectors.EVENT_READ, [0])
    t_end = time.monotonic() + 10
    while sel.get_map() and time.monotonic() < t_end:
        for key, _ in sel.select(0.5):
            s, got = key.fileobj, key.data
            try:
                d = s.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            got[0] += len(d)
            if not d or got[0] > (64 << 20):
                closed += 1 if not d else 0
                still += 0 if not d else 1
                sel.unregister(s)
                s.close()
    for key in list(sel.get_map().values()):
        still += 1
        key.fileobj.close()
    out("closed=%d open=%d" % (closed, still))


# ---------------------------------------------------------------------------------------------
# rst: clients that reset mid-response


def run_rst(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    host = a.connect.rsplit(":", 1)[0]
    reset = short = 0
    for _ in range(a.count):
        try:
            s = tunnel(a.proxy, a.connect, 10)
            tls = ctx.wrap_socket(s, server_hostname=host)
            tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.path, a.connect)).encode())
            got = 0
            while got < a.after:
                d = tls.recv(65536)
                if not d:
                    break
                got += len(d)
            if got < a.after:
                short += 1
            # SSLSocket.close() sends no close_notify: with SO_LINGER 0 the close is a RST.
            tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            tls.close()
            reset += 1
        except (OSError, ssl.SSLError) as e:
            out("# rst client: %s" % e)
            short += 1
    out("reset=%d short=%d" % (reset, short))


# ---------------------------------------------------------------------------------------------
# halfclose: the client shuts its write side after the request


def run_halfclose(a):
    extra = "Connection: close\r\n" if a.close else ""
    if a.plain:
        s = socket.create_connection(("127.0.0.1", a.proxy), timeout=10)
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n"
                   % (a.plain, a.plain.split("/")[2], extra)).encode())
        s.shutdown(socket.SHUT_WR)
        recv = s.recv
    else:
        host = a.connect.rsplit(":", 1)[0]
        s = tunnel(a.proxy, a.connect, 10)
        obj, inc, outg = bio_handshake(s, verified_ctx(a.cafile), host)
        s.sendall(outg.read())
        obj.write(("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (a.path, a.connect, extra)
                   ).encode())
        if not a.no_close_notify:
            # close_notify (TLS half-close, RFC 8446 §6.1), then FIN.
            try:
                obj.unwrap()
            except ssl.SSLWantReadError:
                pass
        # Else the request, then FIN at once: the TLS session is never closed (what many
        # clients do after a `Connection: close` request).
        s.sendall(outg.read())
        s.shutdown(socket.SHUT_WR)

        def recv(n):
            while True:
                try:
                    return obj.read(n)
                except ssl.SSLWantReadError:
                    d = s.recv(65536)
                    if not d:
                        return b""
                    inc.write(d)
                except ssl.SSLZeroReturnError:
                    return b""
    buf = b""
    try:
        while len(buf) < (64 << 20):
            d = recv(65536)
            if not d:
                break
            buf += d
    except (OSError, ssl.SSLError) as e:
        out("# halfclose: %s" % e)
    head, _, body = buf.partition(b"\r\n\r\n")
    status = head[9:12].decode("ascii", "replace") if head.startswith(b"HTTP/1.") else "none"
    length = -1
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    out("status=%s length=%d complete=%s" % (status, len(body),
                                             "yes" if length == len(body) else "no"))


# ---------------------------------------------------------------------------------------------
# stallread: Connection: close responses left unread for a while, then read to their end


def run_stallread(a):
    raise_nofile()
    socks = []
    hostport = a.prefix.split("/")[2]
    for k in range(1, a.count + 1):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", a.proxy))
        except OSError as e:
            out("# stallread: connect %d: %s" % (k, e))
            s.close()
            continue
        s.sendall(("GET %s%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                   % (a.prefix, k, hostport)).encode())
        socks.append(s)
    time.sleep(a.stall)
    complete = short = 0
    notes = []
    t_end = time.monotonic() + 20
    for k, s in enumerate(socks, 1):
        s.settimeout(max(0.1, t_end - time.monotonic()))
        buf = b""
        total = 0
        try:
            while True:
                d = s.recv(1 << 20)
                if not d:
                    break
                if len(buf) < 4096:
                    buf += d
                total += len(d)
        except OSError as e:
            notes.append("%d: %s" % (k, e))
        s.close()
        head = buf.partition(b"\r\n\r\n")[0]
        length = -1
        for line in head.split(b"\r\n")[1:]:
            name, _, v = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(v.strip())
        body = total - len(head) - 4
        if head.startswith(b"HTTP/1.1 200") and body == length:
            complete += 1
        else:
            short += 1
            notes.append("%d: %s, %d of %d body bytes" % (
                k, head.split(b"\r\n", 1)[0].decode("ascii", "replace"), body, length))
    out("complete=%d short=%d" % (complete, short))
    for n in notes[:10]:
        out("# " + n)


# ---------------------------------------------------------------------------------------------
# origin: an upstream that resets mid-response, or never answers


def origin_conn(conn, mode, ctx):
    try:
        if mode == "silent":
            conn.settimeout(60)
            while conn.recv(4096):
                pass
            return
        conn.settimeout(10)
        tls = ctx.wrap_socket(conn, server_side=True)
        # A client that closes first ends this connection (the OSError below).
        read_head(tls, "the request")
        tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + b"r" * 65536)
        time.sleep(0.2)
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        tls.close()
    except (OSError, ssl.SSLError):
        pass
    finally:
        conn.close()


def run_origin(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    with open(a.ports_file + ".tmp", "w", encoding="ascii") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(a.ports_file + ".tmp", a.ports_file)
    t_end = time.monotonic() + 600
    ls.settimeout(1)
    while time.monotonic() < t_end:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=origin_conn, args=(conn, a.mode, ctx), daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--proxy", type=int, default=0, help="the proxy's port on 127.0.0.1")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("slow")
    s.add_argument("--plain", type=int, default=0)
    s.add_argument("--tunnel", type=int, default=0)
    s.add_argument("--silent", action="store_true")
    s.add_argument("--connect", required=True)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--interval", type=float, default=0.5)
    s = sub.add_parser("normal")
    s.add_argument("--connect", required=True)
    s.add_argument("--path", default="/hello")
    s.add_argument("--count", type=int, default=50)
    s.add_argument("--cafile", required=True)
    s.add_argument("--spacing", type=float, default=0.0)
    s.add_argument("--timeout", type=float, default=10)
    s.add_argument("--budget", type=float, default=60)
    s = sub.add_parser("flood")
    s.add_argument("--names", type=int, required=True)
    s.add_argument("--suffix", required=True)
    s.add_argument("--port", type=int, default=443)
    s.add_argument("--concurrency", type=int, default=50)
    s.add_argument("--deadline", type=float, required=True)
    s.add_argument("--pid", type=int, default=0)
    s.add_argument("--sample-every", type=int, default=1000)
    s = sub.add_parser("noread")
    s.add_argument("--plain", required=True)
    s.add_argument("--tunnel", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--count", type=int, default=10)
    s.add_argument("--hold", type=float, required=True)
    s.add_argument("--pid", type=int, required=True)
    s = sub.add_parser("rst")
    s.add_argument("--connect", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--count", type=int, default=10)
    s.add_argument("--after", type=int, default=65536)
    s = sub.add_parser("halfclose")
    s.add_argument("--plain")
    s.add_argument("--connect")
    s.add_argument("--path", default="/hello")
    s.add_argument("--cafile")
    s.add_argument("--close", action="store_true", help="send Connection: close")
    s.add_argument("--no-close-notify", action="store_true",
                   help="tunnel: FIN without close_notify")
    s = sub.add_parser("stallread")
    s.add_argument("--prefix", required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--stall", type=float, required=True)
    s = sub.add_parser("origin")
    s.add_argument("--mode", choices=["rst", "silent"], required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--ports-file", required=True)
    a = p.parse_args()
    {"slow": run_slow, "normal": run_normal, "flood": run_flood, "noread": run_noread,
     "rst": run_rst, "halfclose": run_halfclose, "stallread": run_stallread,
     "origin": run_origin}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
