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
libcurl, sends one request at a time on a connection); standard library only.
"""

import argparse
import os
import re
import socket
import threading
import time

HOLD_MAX_S = 60
CHUNK = 65536
START = re.compile(rb"^POST [^ ]*/containers/([0-9a-f]+)/start[ ?]")


def to_daemon(src, dst, args):
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            m = START.match(data)
            if m is not None and os.path.exists(args.hold):
                with open(args.held, "wb") as f:
                    f.write(m.group(1) + b"\n")
                end = time.monotonic() + HOLD_MAX_S
                while os.path.exists(args.hold) and time.monotonic() < end:
                    time.sleep(0.05)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def to_client(src, dst):
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


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
        threading.Thread(target=to_daemon, args=(client, daemon, args), daemon=True).start()
        threading.Thread(target=to_client, args=(daemon, client), daemon=True).start()


if __name__ == "__main__":
    main()
