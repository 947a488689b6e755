#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/key_client.py - what an SDK does with an API key from its environment: one
HTTPS request through an HTTP proxy, the key taken from the variable VAR and sent in HEADER
(`Bearer KEY` for Authorization, the key alone otherwise, or as the Basic password with
`--basic USER`).

    key_client.py requests|http.client PROXY URL CAFILE VAR HEADER [--basic USER] [--show]

PROXY is HOST:PORT, or `env`: the proxy the environment names (HTTPS_PROXY or https_proxy,
with its user and password, as in a sandbox). CAFILE is a file, or `env`: what the
environment says (REQUESTS_CA_BUNDLE for requests, SSL_CERT_FILE for the standard library's
default context). `requests` is the library most Python SDKs build on; where it is not
installed (the sandbox image), pip's vendored copy of it (`pip._vendor.requests`) is used.
`http.client` is the standard library's tunnel (set_tunnel). Prints "status=N" and the body;
with --show first "client=NAME" and "sent=HEADER: VALUE" (what left the client). Exit 0 when a
response came, 1 otherwise. Bounded: 20 s.
"""
import base64
import http.client
import os
import ssl
import sys
import urllib.parse


def headers(var, header, basic_user):
    key = os.environ[var]
    if basic_user is not None:
        token = base64.b64encode(f"{basic_user}:{key}".encode()).decode()
        return {"Authorization": f"Basic {token}"}
    if header.lower() == "authorization":
        return {header: f"Bearer {key}"}
    return {header: key}


def import_requests():
    try:
        import requests

        return requests, "requests"
    except ImportError:
        from pip._vendor import requests

        return requests, "pip._vendor.requests"


def env_proxy():
    """(host, port, Proxy-Authorization value or None) of HTTPS_PROXY."""
    url = os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"]
    u = urllib.parse.urlsplit(url)
    auth = None
    if u.username is not None:
        cred = "%s:%s" % (urllib.parse.unquote(u.username),
                          urllib.parse.unquote(u.password or ""))
        auth = "Basic " + base64.b64encode(cred.encode()).decode()
    return u.hostname, u.port or 80, auth


def main():
    mode, proxy, url, cafile, var, header = sys.argv[1:7]
    rest = sys.argv[7:]
    basic_user = rest[rest.index("--basic") + 1] if "--basic" in rest else None
    show = "--show" in rest
    h = headers(var, header, basic_user)
    if mode == "requests":
        requests, name = import_requests()
        kw = {"headers": h, "timeout": 20}
        if proxy != "env":
            kw["proxies"] = {"https": f"http://{proxy}"}
        if cafile != "env":
            kw["verify"] = cafile
        if show:
            print(f"client={name} {requests.__version__}")
        r = requests.get(url, **kw)
        status, text = r.status_code, r.text
    else:
        u = urllib.parse.urlsplit(url)
        if proxy == "env":
            phost, pport, auth = env_proxy()
        else:
            phost, pport = proxy.rsplit(":", 1)
            auth = None
        if cafile == "env":
            ctx = ssl.create_default_context()
        else:
            ctx = ssl.create_default_context(cafile=cafile)
        conn = http.client.HTTPSConnection(phost, int(pport), context=ctx, timeout=20)
        conn.set_tunnel(u.hostname, u.port or 443,
                        headers={"Proxy-Authorization": auth} if auth else None)
        if show:
            print("client=http.client")
        target = u.path or "/"
        if u.query:
            target += "?" + u.query
        conn.request("GET", target, headers=h)
        r = conn.getresponse()
        status, text = r.status, r.read().decode("utf-8", "replace")
    if show:
        for k, v in h.items():
            print(f"sent={k}: {v}")
    print(f"status={status}")
    print(text, end="")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the test prints what went wrong
        print(f"error {type(e).__name__}: {e}")
        sys.exit(1)
