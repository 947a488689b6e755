#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/docker_hold.py - a Docker API socket that holds container starts.

    docker_hold.py --listen SOCKET --to SOCKET --hold FILE --held FILE

Listens on the unix socket --listen; each accepted connection opens one to the daemon's socket
--to and relays bytes both ways until either side closes. While the file --hold exists, a
request `POST .../containers/ID/start` is kept back (the container is created, not started):
the relay writes ID into --held and forwards the request only once --hold is gone (at most
60 s). A test uses it to stop the control plane at the moment a sandbox's container exists but
its start has not been reported. Only the start line of each request is looked at (the client,
libcurl, sends one request at a time on a connection); the relaying is slow_relay.py's, at full
speed; standard library only.
"""

import argparse
import os
import re
import socket
import threading
import time

from slow_relay import pipe

HOLD_MAX_S = 60
START = re.compile(rb"^POST [^ ]*/containers/([0-9a-f]+)/start[ ?]")


def hold_start(data, args):
    """Keeps a container's start back while --hold exists (noting its id in --held)."""
    m = START.match(data)
    if m is None or not os.path.exists(args.hold):
        return
    with open(args.held, "wb") as f:
        f.write(m.group(1) + b"\n")
    end = time.monotonic() + HOLD_MAX_S
    while os.path.exists(args.hold) and time.monotonic() < end:
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--hold", required=True)
    ap.add_argument("--held", required=True)
    args = ap.parse_args()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(args.listen):
        os.unlink(args.listen)
    srv.bind(args.listen)
    srv.listen(64)
    print(f"docker_hold.py: listening {args.listen}", flush=True)
    while True:
        client, _ = srv.accept()
        daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            daemon.connect(args.to)
        except OSError as e:
            print(f"docker_hold.py: cannot reach {args.to}: {e}", flush=True)
            client.close()
            daemon.close()
            continue
        threading.Thread(target=pipe, args=(client, daemon, 0, lambda data: hold_start(data, args)),
                         daemon=True).start()
        threading.Thread(target=pipe, args=(daemon, client, 0), daemon=True).start()


if __name__ == "__main__":
    main()
