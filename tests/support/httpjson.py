# SPDX-License-Identifier: Apache-2.0
# tests/support/httpjson.py - JSON over HTTP as the Python tests speak it to sluice and to
# Docker: one request on any http.client connection, a connection over a unix socket (the
# Docker Engine API, the proxy's admin socket), a raw GET on a unix socket, a free loopback
# port, whether a loopback port takes connections, waiting for a condition, and waiting for a
# freshly started `sluice control` to answer /healthz, the environment to start sluice in, and
# one request through the proxy with curl (its status and X-Sluice-Reason).
# Used by
# tests/integration/control_api.py, tests/integration/control_access.py,
# tests/integration/control_e2e.py and tests/support/dockerctl.py; standard library only.
import http.client
import json
import os
import socket
import subprocess
import time


class UnixConnection(http.client.HTTPConnection):
    """An http.client connection to the unix socket `path` (the Host header says localhost)."""

    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def request(conn, method, path, body=None, headers=None, raw=None, lenient=False):
    """Sends one request on `conn` and closes it: `body` as JSON (with its Content-Type), or
    the bytes `raw`. Returns (status, doc): the answer's JSON, None for an empty answer. An
    answer that is not JSON raises ValueError, or with `lenient` comes back as its text."""
    headers = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
    finally:
        conn.close()
    if not text:
        return resp.status, None
    try:
        return resp.status, json.loads(text)
    except ValueError:
        if not lenient:
            raise
        return resp.status, text.decode(errors="replace")


def bearer(token):
    """The Authorization header of `token` (None: no header)."""
    return {} if token is None else {"Authorization": "Bearer " + token}


def unix_get_json(path, target, timeout=5):
    """GET `target` on the unix socket `path` with Connection: close, read to the end; the
    body's JSON (ValueError or IndexError when there is none)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def port_open(port):
    """True when 127.0.0.1:`port` takes a TCP connection (within 0.5 s)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_for(pred, secs):
    """Calls `pred` every 50 ms until it returns something true or `secs` have passed; returns
    its last value."""
    deadline = time.time() + secs
    while True:
        v = pred()
        if v or time.time() > deadline:
            return v
        time.sleep(0.05)


def wait_healthy(proc, port, secs, timeout=10):
    """Waits up to `secs` for the `sluice control` process `proc` to answer GET /healthz on
    127.0.0.1:`port` with 200 (each try bounded by `timeout`); AssertionError when it exits or
    does not answer in time."""
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            if request(conn, "GET", "/healthz", lenient=True)[0] == 200:
                return
        except OSError:
            pass
        if proc.poll() is not None:
            raise AssertionError("sluice control exited with %d" % proc.returncode)
        time.sleep(0.05)
    raise AssertionError("sluice control did not start")


def sluice_env(key):
    """os.environ for a sluice child: SLUICE_ENCRYPTION_KEY=key, no SLUICE_DATA (the tests name
    --data) and no proxy variables (the test's own calls must not go through one)."""
    env = dict(os.environ, SLUICE_ENCRYPTION_KEY=key)
    env.pop("SLUICE_DATA", None)
    for v in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(v, None)
    return env


def curl_via_proxy(pport, cafile, url, hdrs, args=()):
    """A fresh curl request for `url` through the proxy on 127.0.0.1:`pport`, trusting `cafile`,
    with the extra curl `args`, the response headers written to the file `hdrs`: (status,
    reason), status being the CONNECT status when the tunnel was refused and reason the
    X-Sluice-Reason header (None without one)."""
    r = subprocess.run(["curl", "-sS", "--max-time", "5", "--proxy", "http://127.0.0.1:%d" % pport,
                        "--cacert", cafile, "-o", os.devnull, "-D", hdrs,
                        "-w", "%{http_code} %{http_connect}"] + list(args) + [url],
                       capture_output=True, text=True, timeout=10)
    code, connect = (r.stdout.split() + ["000", "000"])[:2]
    status = int(code) if code != "000" else int(connect)
    reason = None
    try:
        with open(hdrs, errors="replace") as f:
            for line in f:
                if line.lower().startswith("x-sluice-reason:"):
                    reason = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return status, reason
