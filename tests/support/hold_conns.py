#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hold_conns.py HOST PORT N DIR NAME SECONDS [BIND] - holds N idle TCP connections.

Opens N connections to HOST:PORT (from the address BIND when given, the kernel's port), sends
nothing, and prints "held". When the file DIR/NAME-close1 appears it closes the first and prints
"closed one"; when DIR/NAME-stop appears, or after SECONDS (bounded), it ends and the rest close
with it. Loopback or the test's own namespaces only: the caller picks HOST.
"""

import os
import socket
import sys
import time


def main():
    host, port, n, work, name, secs = sys.argv[1:7]
    bind = sys.argv[7] if len(sys.argv) > 7 else None
    socks = []
    for _ in range(int(n)):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        if bind is not None:
            s.bind((bind, 0))
        s.settimeout(5)
        s.connect((host, int(port)))
        socks.append(s)
    print("held", flush=True)
    close1 = os.path.join(work, name + "-close1")
    stop = os.path.join(work, name + "-stop")
    t0 = time.monotonic()
    closed = False
    while time.monotonic() - t0 < float(secs) and not os.path.exists(stop):
        if not closed and os.path.exists(close1):
            socks.pop(0).close()
            closed = True
            print("closed one", flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
