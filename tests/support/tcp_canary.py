#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/tcp_canary.py - listeners that must never be reached (stdlib only).

    tcp_canary.py --log FILE --ready FILE ADDR:PORT...

Listens on every ADDR:PORT (IPv6 as [ADDR]:PORT, bound IPv6-only) and logs each accepted
connection as one JSON line {"addr": ..., "port": ..., "peer": ...}, then closes it without
reading. A test asserts that the log stays empty. An address that cannot be bound is reported on
stderr and skipped; the --ready file lists the ones that are listening, one per line.
"""

import json
import os
import socket
import sys
import threading
import time


def accept_loop(sock, log, lock):
    addr, port = sock.getsockname()[:2]
    while True:
        try:
            conn, peer = sock.accept()
        except OSError:
            return
        with lock, open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"addr": addr, "port": port, "peer": peer[0]}) + "\n")
        conn.close()


def main():
    args = sys.argv[1:]
    if len(args) < 5 or args[0] != "--log" or args[2] != "--ready":
        sys.exit("usage: tcp_canary.py --log FILE --ready FILE ADDR:PORT...")
    log, ready, specs = args[1], args[3], args[4:]
    open(log, "a").close()
    lock = threading.Lock()
    bound = []
    for spec in specs:
        host, _, port = spec.rpartition(":")
        family = socket.AF_INET
        if host.startswith("["):
            host, family = host[1:-1], socket.AF_INET6
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((host, int(port)))
            s.listen(64)
        except OSError as e:
            print(f"tcp_canary.py: cannot listen on {spec}: {e}", file=sys.stderr, flush=True)
            continue
        bound.append(spec)
        threading.Thread(target=accept_loop, args=(s, log, lock), daemon=True).start()
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(b + "\n" for b in bound))
    os.replace(tmp, ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
