# SPDX-License-Identifier: Apache-2.0
"""tests/support/tunnel.py - a CONNECT tunnel through the proxy under test, for the test programs
that then speak TLS by hand over it (tls_hrr.py, tls_keyupdate.py).

open_tunnel(port, target, timeout, nodelay) connects to 127.0.0.1:port (with TCP_NODELAY when
nodelay is true), sends `CONNECT target` and reads the answer's head a byte at a time (so that
not a byte of the tunnel is read with it). It returns the socket and the head; the caller decides what a head other than
`HTTP/1.1 200` means.
"""

import socket


def open_tunnel(port, target, timeout, nodelay=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if nodelay:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head
