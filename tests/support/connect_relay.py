#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/connect_relay.py - a local port whose every connection is a CONNECT tunnel.

    connect_relay.py --proxy 127.0.0.1:P --connect HOST:PORT --ready FILE

Listens on 127.0.0.1 (a port the kernel picks, written to the --ready file once listening).
Each accepted connection opens a new connection to the proxy, sends
`CONNECT HOST:PORT HTTP/1.1` with a matching Host, and once the proxy answers 200 relays bytes
both ways until either side closes; any other answer closes the accepted connection. A client
that cannot speak through an HTTP proxy itself (or speaks it in a way the proxy refuses, as
testssl.sh's bare-LF CONNECT lines are) then reaches the proxy's interception side as if it
were the origin. Every connection is bounded: 10 s to connect and read the CONNECT answer, and
60 s without a byte either way. Loopback only; standard library only.
"""

import argparse
import os
import socket
import sys
import threading

HEAD_MAX = 16384
IDLE_S = 60


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def tunnel(proxy, target):
    up = socket.create_connection(proxy, timeout=10)
    try:
        up.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = up.recv(4096)
            if not data or len(head) + len(data) > HEAD_MAX:
                raise OSError("no complete CONNECT answer")
            head += data
        status = head.split(b"\r\n", 1)[0].split(b" ")
        if len(status) < 2 or status[1] != b"200":
            raise OSError("CONNECT answered %r" % head.split(b"\r\n", 1)[0])
        # Bytes after the head would belong to the origin's side: the proxy sends none first.
        if not head.endswith(b"\r\n\r\n"):
            raise OSError("bytes after the CONNECT answer")
        up.settimeout(IDLE_S)
        return up
    except OSError:
        up.close()
        raise


def serve(conn, proxy, target):
    conn.settimeout(IDLE_S)
    try:
        up = tunnel(proxy, target)
    except OSError as e:
        print("connect_relay: %s" % e, file=sys.stderr, flush=True)
        conn.close()
        return
    t = threading.Thread(target=pipe, args=(up, conn), daemon=True)
    t.start()
    pipe(conn, up)
    t.join(IDLE_S)
    conn.close()
    up.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--proxy", required=True, help="ADDR:PORT of the proxy (loopback)")
    ap.add_argument("--connect", required=True, help="HOST:PORT for the CONNECT line")
    ap.add_argument("--ready", required=True, help="file that receives the port once listening")
    a = ap.parse_args()
    host, _, port = a.proxy.rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        sys.exit("connect_relay: the proxy must be on 127.0.0.1")
    proxy = (host, int(port))
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    with open(a.ready + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    # Renamed into place: a reader never sees a half-written port.
    os.replace(a.ready + ".tmp", a.ready)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, proxy, a.connect), daemon=True).start()


if __name__ == "__main__":
    main()
