#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/key_client.py - what an SDK does with an API key from its environment: one
HTTPS request through an HTTP proxy, the key taken from the variable VAR and sent in HEADER
(`Bearer KEY` for Authorization, the key alone otherwise, or as the Basic password with
`--basic USER`).

    key_client.py requests|http.client PROXY_HOST:PORT URL CAFILE VAR HEADER [--basic USER]

`requests` is the library most Python SDKs build on (it reads no proxy from the environment
here: the proxy is given); `http.client` is the standard library's tunnel (set_tunnel). Prints
"status=N" and the body; exit 0 when a response came, 1 otherwise. Bounded: 20 s.
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


def main():
    mode, proxy, url, cafile, var, header = sys.argv[1:7]
    basic_user = sys.argv[8] if len(sys.argv) > 8 and sys.argv[7] == "--basic" else None
    h = headers(var, header, basic_user)
    if mode == "requests":
        import requests

        r = requests.get(url, headers=h, proxies={"https": f"http://{proxy}"}, verify=cafile,
                         timeout=20)
        print(f"status={r.status_code}")
        print(r.text, end="")
        return 0
    u = urllib.parse.urlsplit(url)
    phost, pport = proxy.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=cafile)
    conn = http.client.HTTPSConnection(phost, int(pport), context=ctx, timeout=20)
    conn.set_tunnel(u.hostname, u.port or 443)
    conn.request("GET", u.path or "/", headers=h)
    r = conn.getresponse()
    print(f"status={r.status}")
    print(r.read().decode("utf-8", "replace"), end="")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the test prints what went wrong
        print(f"error {type(e).__name__}: {e}")
        sys.exit(1)
