#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/tls_keyupdate.py - a TLS 1.3 client that floods KeyUpdate messages.

Opens a tunnel through the proxy (CONNECT TARGET), completes a TLS 1.3 handshake (trusting
CAFILE, SNI the target's host), then sends KeyUpdate(update_requested) messages, each of which
asks the peer for a KeyUpdate of its own, and reads nothing. Python's ssl module has no way to
send a KeyUpdate, so this drives libssl through ctypes. It stops after COUNT messages, or once a
send has been blocked for SEND_TIMEOUT seconds (the peer stopped reading), or after --seconds.
Prints one line: `sent=N blocked=yes|no`, and exits 0; exit 2 when the tunnel or the handshake
fails.

  tls_keyupdate.py --proxy PORT --target HOST:PORT --cafile CA [--count N] [--send-timeout S]
                   [--seconds S] [--then-request] [--hold S]

With --then-request, a GET / with Connection: close follows the flood (when it was not blocked),
and the response's status line is printed too: `status=200`, or `status=none`. With --hold,
the connection stays open for S seconds after the line is printed.
"""
import argparse
import ctypes
import ctypes.util
import socket
import struct
import sys
import time

from tunnel import open_tunnel

SSL_CTRL_SET_TLSEXT_HOSTNAME = 55
SSL_CTRL_SET_MIN_PROTO_VERSION = 123
TLS1_3_VERSION = 0x0304
SSL_VERIFY_PEER = 1
SSL_KEY_UPDATE_REQUESTED = 1


def load_ssl():
    name = ctypes.util.find_library("ssl") or "libssl.so.3"
    lib = ctypes.CDLL(name)
    vp, ip, lp, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p
    for fn, res, args in (
        ("TLS_client_method", vp, []),
        ("SSL_CTX_new", vp, [vp]),
        ("SSL_CTX_load_verify_locations", ip, [vp, cp, cp]),
        ("SSL_CTX_set_verify", None, [vp, ip, vp]),
        ("SSL_CTX_ctrl", lp, [vp, ip, lp, vp]),
        ("SSL_new", vp, [vp]),
        ("SSL_set_fd", ip, [vp, ip]),
        ("SSL_ctrl", lp, [vp, ip, lp, vp]),
        ("SSL_set1_host", ip, [vp, cp]),
        ("SSL_connect", ip, [vp]),
        ("SSL_key_update", ip, [vp, ip]),
        ("SSL_do_handshake", ip, [vp]),
        ("SSL_write", ip, [vp, cp, ip]),
        ("SSL_read", ip, [vp, cp, ip]),
    ):
        f = getattr(lib, fn)
        f.restype = res
        f.argtypes = args
    return lib


def tunnel(port, target):
    s, head = open_tunnel(port, target, 10)
    if not head.startswith(b"HTTP/1.1 200"):
        print(f"error CONNECT answered {head[:40]!r}")
        sys.exit(2)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--cafile", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--send-timeout", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--then-request", action="store_true")
    ap.add_argument("--hold", type=float, default=0.0)
    a = ap.parse_args()
    host = a.target.rsplit(":", 1)[0]

    lib = load_ssl()
    ctx = lib.SSL_CTX_new(lib.TLS_client_method())
    if not ctx or lib.SSL_CTX_load_verify_locations(ctx, a.cafile.encode(), None) != 1:
        print("error cannot load the CA file")
        sys.exit(2)
    lib.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, None)
    lib.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_3_VERSION, None)
    sock = tunnel(a.proxy, a.target)
    sock.setblocking(True)
    secs = int(a.send_timeout)
    usecs = int((a.send_timeout - secs) * 1e6)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", secs, usecs))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 10, 0))
    ssl = lib.SSL_new(ctx)
    lib.SSL_set_fd(ssl, sock.fileno())
    lib.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, 0, ctypes.c_char_p(host.encode()))
    lib.SSL_set1_host(ssl, host.encode())
    if lib.SSL_connect(ssl) != 1:
        print("error the TLS handshake failed")
        sys.exit(2)
    sent = 0
    blocked = False
    deadline = time.monotonic() + a.seconds
    while sent < a.count and time.monotonic() < deadline:
        if lib.SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED) != 1 or lib.SSL_do_handshake(ssl) != 1:
            blocked = True
            break
        sent += 1
    line = f"sent={sent} blocked={'yes' if blocked else 'no'}"
    if a.then_request and not blocked:
        req = f"GET / HTTP/1.1\r\nHost: {a.target}\r\nConnection: close\r\n\r\n".encode()
        status = "none"
        if lib.SSL_write(ssl, req, len(req)) == len(req):
            buf = ctypes.create_string_buffer(4096)
            got = b""
            while b"\r\n" not in got:
                n = lib.SSL_read(ssl, buf, len(buf))
                if n <= 0:
                    break
                got += buf.raw[:n]
            if got.startswith(b"HTTP/1.1 "):
                status = got[9:12].decode(errors="replace")
        line += f" status={status}"
    print(line, flush=True)
    time.sleep(a.hold)
    sock.close()


if __name__ == "__main__":
    main()
