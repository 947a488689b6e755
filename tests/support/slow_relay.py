#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/slow_relay.py - a TCP relay whose answers trickle.

    slow_relay.py --listen PORT --to PORT --rate BYTES_PER_S

Listens on 127.0.0.1:--listen; each accepted connection opens one to 127.0.0.1:--to and relays
bytes both ways until either side closes: what the client sends at full speed, what the server
answers at most --rate bytes a second per connection. The bytes are not looked at (TLS passes
through), so a client sees the server's own certificate. A test uses it to make a download
take long enough to be watched (an image pull's progress). Loopback only; standard library
only; every connection ends after 120 s without a byte either way.
"""

import argparse
import socket
import threading
import time

IDLE_S = 120
CHUNK = 16384


def pipe(src, dst, rate, look=None):
    """Relays src to dst (at most `rate` bytes a second, 0: at once) until either side ends;
    `look`, when given, sees each piece before it is passed on (and may hold it back)."""
    try:
        while True:
            data = src.recv(CHUNK if rate == 0 else min(CHUNK, max(1, rate // 10)))
            if not data:
                break
            if look is not None:
                look(data)
            dst.sendall(data)
            if rate:
                time.sleep(len(data) / rate)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, to, rate):
    try:
        up = socket.create_connection(("127.0.0.1", to), timeout=10)
    except OSError:
        conn.close()
        return
    for s in (conn, up):
        s.settimeout(IDLE_S)
    t = threading.Thread(target=pipe, args=(conn, up, 0), daemon=True)
    t.start()
    pipe(up, conn, rate)
    t.join(IDLE_S)
    conn.close()
    up.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--rate", type=int, required=True)
    a = ap.parse_args()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", a.listen))
    ls.listen(64)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, a.to, a.rate), daemon=True).start()


if __name__ == "__main__":
    main()
