#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# tests/support/dockerctl.py - the few Docker Engine API calls the sandbox tests make themselves
# (on the unix socket through httpjson.py, API 1.41, stdlib only; the docker CLI is not needed):
#
#   dockerctl.py ping                          exit 0 when the daemon answers
#   dockerctl.py image-exists IMAGE            exit 0 when IMAGE is present
#   dockerctl.py ls NET                        JSON list of the containers of this test (see
#                                              ours()): id, name, labels, state, networks {net: ip}
#   dockerctl.py exists ID                     exit 0 when container ID (or name) exists
#   dockerctl.py ip ID [NET]                   its address (on NET, else the first network)
#   dockerctl.py run NAME NETWORK TAG IMAGE CMD...
#                                              creates and starts a helper container labelled
#                                              sluice.test=TAG on NETWORK; prints its id
#   dockerctl.py oneshot NAME NETWORK IP TAG IMAGE CMD...
#                                              a helper at a fixed address (or "-"), run to
#                                              completion; prints its output, removes it
#   dockerctl.py cid SANDBOX_ID                the container labelled sluice.sandbox=SANDBOX_ID
#   dockerctl.py env ID                        its Config.Env, one a line
#   dockerctl.py exec ID CMD...                runs CMD in container ID as `docker exec` does (its
#                                              environment, no TTY; at most 120 s); prints stdout
#                                              and stderr; exits with CMD's status (the way in
#                                              when the control plane refuses a sandbox's calls)
#   dockerctl.py inspect ID                    the inspect JSON
#   dockerctl.py cleanup NET                   force-removes every container of this test and the
#                                              network NET; prints what it removed
#   dockerctl.py network-exists NET
#
# "Containers of this test" (NET): label sluice.sandbox and attached to NET, or label
# sluice.network=NET, or label sluice.test=NET (the helpers a test starts).
import json
import os
import sys
import urllib.parse

from httpjson import UnixConnection, request

SOCK = os.environ.get("DOCKER_SOCK", "/var/run/docker.sock")
API = "/v1.41"


def call(method, path, body=None, timeout=30):
    return request(UnixConnection(SOCK, timeout), method, API + path, body, lenient=True)


def q(filters):
    return urllib.parse.quote(json.dumps(filters))


def ours(net):
    found = {}
    for f in ({"label": ["sluice.sandbox"], "network": [net]},
              {"label": ["sluice.network=" + net]},
              {"label": ["sluice.test=" + net]}):
        s, lst = call("GET", "/containers/json?all=1&filters=" + q(f))
        if s != 200:
            continue
        for c in lst:
            found[c["Id"]] = c
    return list(found.values())


def describe(c):
    nets = {k: v.get("IPAddress", "") for k, v in
            (c.get("NetworkSettings", {}).get("Networks") or {}).items()}
    return {"id": c["Id"], "name": (c.get("Names") or ["?"])[0].lstrip("/"),
            "labels": c.get("Labels") or {}, "state": c.get("State"), "networks": nets}


def demux(raw):
    """The payload of a multiplexed (non-TTY) log or exec stream: frames of an 8-byte header
    (stream, 3 zero bytes, big-endian length) and that many bytes, stdout and stderr in the
    order they came."""
    out = b""
    i = 0
    while i + 8 <= len(raw):
        n = int.from_bytes(raw[i + 4:i + 8], "big")
        out += raw[i + 8:i + 8 + n]
        i += 8 + n
    return out


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "ping":
        try:
            return 0 if call("GET", "/_ping", timeout=5)[0] == 200 else 1
        except OSError:
            return 1
    if cmd == "image-exists":
        return 0 if call("GET", "/images/%s/json" % urllib.parse.quote(argv[2], safe=":/"))[0] == 200 else 1
    if cmd == "ls":
        print(json.dumps([describe(c) for c in ours(argv[2])]))
        return 0
    if cmd == "exists":
        return 0 if call("GET", "/containers/%s/json" % argv[2])[0] == 200 else 1
    if cmd == "network-exists":
        return 0 if call("GET", "/networks/%s" % argv[2])[0] == 200 else 1
    if cmd == "ip":
        s, d = call("GET", "/containers/%s/json" % argv[2])
        if s != 200:
            return 1
        nets = d["NetworkSettings"]["Networks"] or {}
        if len(argv) > 3:
            print(nets.get(argv[3], {}).get("IPAddress", ""))
        else:
            print(next(iter(nets.values()), {}).get("IPAddress", ""))
        return 0
    if cmd == "run":
        name, network, tag, image = argv[2:6]
        body = {"Image": image, "Cmd": argv[6:], "Labels": {"sluice.test": tag},
                "HostConfig": {"NetworkMode": network, "AutoRemove": False,
                               "CapDrop": ["ALL"]}}
        call("DELETE", "/containers/%s?force=1" % name)
        s, d = call("POST", "/containers/create?name=%s" % name, body)
        if s != 201:
            print("create: %s %r" % (s, d), file=sys.stderr)
            return 1
        s, e = call("POST", "/containers/%s/start" % d["Id"])
        if s not in (204, 304):
            print("start: %s %r" % (s, e), file=sys.stderr)
            return 1
        print(d["Id"])
        return 0
    if cmd == "oneshot":
        # oneshot NAME NETWORK IP TAG IMAGE CMD... : a helper container at a fixed address on
        # NETWORK (IP "-" for any), run to completion (at most 60 s), its output printed and
        # the container removed; exits with the command's status.
        name, network, ip, tag, image = argv[2:7]
        epc = {}
        if ip != "-":
            epc = {network: {"IPAMConfig": {"IPv4Address": ip}}}
        body = {"Image": image, "Cmd": argv[7:], "Labels": {"sluice.test": tag},
                "HostConfig": {"NetworkMode": network, "CapDrop": ["ALL"]},
                "NetworkingConfig": {"EndpointsConfig": epc}}
        call("DELETE", "/containers/%s?force=1" % name)
        s, d = call("POST", "/containers/create?name=%s" % name, body)
        if s != 201:
            print("create: %s %r" % (s, d), file=sys.stderr)
            return 125
        cid = d["Id"]
        try:
            s, e = call("POST", "/containers/%s/start" % cid)
            if s not in (204, 304):
                print("start: %s %r" % (s, e), file=sys.stderr)
                return 125
            s, w = call("POST", "/containers/%s/wait" % cid, timeout=60)
            c = UnixConnection(SOCK, 30)
            c.request("GET", API + "/containers/%s/logs?stdout=1&stderr=1" % cid)
            raw = c.getresponse().read()
            c.close()
            sys.stdout.write(demux(raw).decode(errors="replace"))
            return (w or {}).get("StatusCode", 125) if s == 200 else 125
        finally:
            call("DELETE", "/containers/%s?force=1" % cid)
    if cmd == "cid":
        f = {"label": ["sluice.sandbox=" + argv[2]]}
        s, lst = call("GET", "/containers/json?all=1&filters=" + q(f))
        if s != 200 or not lst:
            return 1
        print(lst[0]["Id"])
        return 0
    if cmd == "env":
        s, d = call("GET", "/containers/%s/json" % argv[2])
        if s != 200:
            return 1
        print("\n".join(d["Config"].get("Env") or []))
        return 0
    if cmd == "exec":
        s, d = call("POST", "/containers/%s/exec" % argv[2],
                    {"Cmd": argv[3:], "AttachStdout": True, "AttachStderr": True})
        if s != 201:
            print("exec create: %s %r" % (s, d), file=sys.stderr)
            return 125
        eid = d["Id"]
        c = UnixConnection(SOCK, 120)
        c.request("POST", API + "/exec/%s/start" % eid,
                  body=json.dumps({"Detach": False, "Tty": False}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        if r.status != 200:
            print("exec start: %s %r" % (r.status, raw[:200]), file=sys.stderr)
            return 125
        sys.stdout.write(demux(raw).decode(errors="replace"))
        s, d = call("GET", "/exec/%s/json" % eid)
        return d.get("ExitCode", 125) if s == 200 and d.get("ExitCode") is not None else 125
    if cmd == "inspect":
        s, d = call("GET", "/containers/%s/json" % argv[2])
        if s != 200:
            return 1
        print(json.dumps(d))
        return 0
    if cmd == "cleanup":
        net = argv[2]
        n = 0
        for c in ours(net):
            s, _ = call("DELETE", "/containers/%s?force=1&v=1" % c["Id"], timeout=60)
            if s in (204, 404):
                n += 1
                print("removed container %s %s" % (c["Id"][:12], describe(c)["labels"]))
        s, _ = call("DELETE", "/networks/%s" % net)
        if s == 204:
            print("removed network %s" % net)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
