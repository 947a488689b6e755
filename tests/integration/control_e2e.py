#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_e2e.py - `sluice control` driving a real `sluice proxy` (docs/reference/snapshot.md
# §3, docs/reference/proxy.md §4.9, docs/reference/api.md §5.1, §5.1b, docs/control-plane.md): policy changes reach traffic within a second,
# a restarted proxy gets the current policy, a stopped control plane leaves the last policy in
# force; 32 concurrent API clients; bad input leaves the database unchanged; restart keeps
# everything; a corrupt database is refused and left alone; a changed encryption key.
# Run by control_e2e.sh, which starts nginx (tests/support/fixture.sh) and passes
# FX_TLS_PORT, FX_TEST_CA, FX_NGINX_LOG, FX_WORK. stdlib only; output TAP-like.
import base64
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from httpjson import (  # noqa: E402
    bearer, curl_via_proxy, free_port, port_open, request, sluice_env, unix_get_json, wait_for, wait_healthy)
from tap import check, checks, diag, failures, not_ok  # noqa: E402

BIN = os.environ["SLUICE_BIN"]
PORT = int(os.environ["FX_TLS_PORT"])
TESTCA = os.environ["FX_TEST_CA"]
NGINX_LOG = os.environ["FX_NGINX_LOG"]
WORK = os.path.join(os.environ["FX_WORK"], "e2e")
os.makedirs(WORK, exist_ok=True)
CDATA = os.path.join(WORK, "control-data")
PDATA = os.path.join(WORK, "proxy-data")
SOCK = os.path.join(WORK, "proxy.sock")
AUDIT = os.path.join(WORK, "audit.log")
KEY1 = base64.b64encode(os.urandom(32)).decode()
KEY2 = base64.b64encode(os.urandom(32)).decode()
E = "/api/v1/environments"

st = {"control": None, "cport": 0, "proxy": None, "pport": 0, "key": KEY1, "nproxy": 0,
      "ncontrol": 0}
tokens = {}


SANITIZER = ("Sanitizer", "runtime error:")
short_stderr = []   # stderr of the runs that must refuse to start


def clean(text):
    return not any(m in text for m in SANITIZER)


# ---- control plane --------------------------------------------------------------------------

def call(method, path, body=None, who="root", raw=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", st["cport"], timeout=timeout)
    return request(conn, method, path, body, bearer(None if who is None else tokens.get(who, who)),
                   raw, lenient=True)


def control_start(key=None, data=None, wait=True):
    key = key or st["key"]
    st["ncontrol"] += 1
    port = free_port()
    log = open(os.path.join(WORK, "control%d.log" % st["ncontrol"]), "wb")
    proc = subprocess.Popen([BIN, "control", "--listen", "127.0.0.1:%d" % port,
                             "--data", data or CDATA, "--proxy-admin-socket", SOCK,
                             "--log-level", "debug"],
                            env=sluice_env(key), stdout=log, stderr=log)
    st["control"], st["cport"], st["key"] = proc, port, key
    if not wait:
        return proc
    wait_healthy(proc, port, 15, timeout=2)
    return proc


def control_stop():
    proc = st["control"]
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=15)
    st["control"] = None
    return rc


def user_add(name, admin=False, data=None):
    args = [BIN, "user", "add", name, "--data", data or CDATA] + (["--admin"] if admin else [])
    out = subprocess.run(args, env=sluice_env(st["key"]), capture_output=True, text=True,
                         check=True, timeout=20).stdout
    tokens[name] = out.strip()


def dump(who="root"):
    """A canonical dump of what the API shows: environments and static clients."""
    s, envs = call("GET", E, who=who)
    assert s == 200, (s, envs)
    s2, clients = call("GET", "/api/v1/clients", who="root")
    assert s2 == 200, (s2, clients)
    key = lambda x: x.get("id", "")  # noqa: E731
    return json.dumps({"environments": sorted(envs["environments"], key=key),
                       "clients": sorted(clients["clients"], key=key)}, sort_keys=True)


# ---- proxy ------------------------------------------------------------------------------------

def proxy_start():
    st["nproxy"] += 1
    if not os.path.exists(os.path.join(PDATA, "ca.pem")):
        subprocess.run([BIN, "ca", "init", "--out", PDATA], env=sluice_env(st["key"]),
                       capture_output=True, check=True, timeout=20)
    port = free_port()
    log = open(os.path.join(WORK, "proxy%d.log" % st["nproxy"]), "wb")
    args = [BIN, "proxy", "--listen", "127.0.0.1:%d" % port, "--data", PDATA,
            "--admin-socket", SOCK, "--audit-log", AUDIT, "--upstream-ca", TESTCA,
            "--allow-upstream", "127.0.0.0/8", "--log-level", "debug"]
    for h in ("a", "b", "c"):
        args += ["--resolve", "%s.sluice.test:%d:127.0.0.1" % (h, PORT)]
    proc = subprocess.Popen(args, env=sluice_env(st["key"]), stdout=log, stderr=log)
    st["proxy"], st["pport"] = proc, port
    deadline = time.time() + 10
    while time.time() < deadline:
        if port_open(port):
            return proc
        if proc.poll() is not None:
            raise AssertionError("sluice proxy exited with %d" % proc.returncode)
        time.sleep(0.02)
    raise AssertionError("sluice proxy did not start")


def admin_status():
    return unix_get_json(SOCK, "/v1/status", timeout=3)


def proxy_version():
    try:
        return admin_status().get("version") or 0
    except (OSError, ValueError, IndexError):
        return 0


def curl(host, probe, path="/hello"):
    """A fresh request through the proxy: (status, reason). status is the CONNECT status when
    the tunnel was refused."""
    return curl_via_proxy(st["pport"], os.path.join(PDATA, "ca.pem"),
                          "https://%s.sluice.test:%d%s" % (host, PORT, path),
                          os.path.join(WORK, "curl.hdrs"), ["-H", "X-Probe: " + probe])


def poll_status(host, want, secs, tag):
    """Fresh requests until one gets WANT, at most SECS; (elapsed, last (status, reason))."""
    t0 = time.time()
    n = 0
    while True:
        n += 1
        got = curl(host, "%s-%d" % (tag, n))
        el = time.time() - t0
        if got[0] == want or el > secs:
            return el, got
        time.sleep(0.05)


def nginx_lines_served(probe_prefix, secs=2.0):
    """nginx_lines() once a served (200) request of that prefix is in the log: nginx writes its
    access line after the response, so a client can finish before the line exists."""
    t0 = time.time()
    while True:
        lines = nginx_lines(probe_prefix)
        if any(x.get("status") == 200 for x in lines) or time.time() - t0 > secs:
            return lines
        time.sleep(0.05)


def nginx_lines(probe_prefix):
    out = []
    try:
        with open(NGINX_LOG) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if d.get("probe", "").startswith(probe_prefix):
                    out.append(d)
    except OSError:
        pass
    return out


def audit_lines():
    out = []
    try:
        with open(AUDIT) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


# ---- 1. end to end --------------------------------------------------------------------------

CRED1 = "Bearer e2e-" + os.urandom(8).hex()
CRED2 = "Bearer e2e-" + os.urandom(8).hex()
CRED3 = "Bearer e2e-" + os.urandom(8).hex()
ENVID = {}


def rule(h, cred=None):
    r = {"host": "%s.sluice.test:%d" % (h, PORT)}
    if cred:
        r["credential"] = {"header": "Authorization", "value": cred}
    return r


def global_env(name, rules, **kw):
    d = {"name": name, "scope": "global", "base_image": "debian:12", "network": "on",
         "egress": {"default": "deny", "rules": rules}}
    d.update(kw)
    return d


def test_end_to_end():
    proxy_start()
    st_, reason = curl("a", "e2e-nopolicy")
    check("1. proxy without a policy refuses: 503 no-policy", (st_, reason) == (503, "no-policy"),
          "%r %r" % (st_, reason))
    user_add("root", admin=True)
    user_add("alice")
    control_start()
    t0 = time.time()
    s, env = call("POST", E, global_env("e2e", [rule("a", CRED1)]))
    if not check("1. create the global environment (201)", s == 201, "%d %r" % (s, env)):
        return
    ENVID["e2e"] = env["id"]
    s, cl = call("POST", "/api/v1/clients", {"id": "local", "cidr": "127.0.0.0/8",
                                             "environment": env["id"]})
    check("1. create the static client 127.0.0.0/8 (201)", s == 201, "%d %r" % (s, cl))
    el, got = poll_status("a", 200, 3, "e2e-allow")
    check("1. within 1 s curl through the proxy reaches nginx (200)", got[0] == 200 and el <= 1.0,
          "%r after %.2f s (since create: %.2f s)" % (got, el, time.time() - t0))
    diag("allowed after %.2f s of polling" % el)
    lines = nginx_lines_served("e2e-allow")
    check("1. nginx saw the injected credential", lines and
          all(x["authorization"] == CRED1 for x in lines if x["status"] == 200),
          repr(lines[-1:] if lines else lines))
    # Replace the rule for a.sluice.test by one for b.sluice.test (network on + deny needs a rule).
    s, env2 = call("PUT", E + "/" + env["id"], global_env("e2e", [rule("b")]))
    check("1. PUT the environment without the rule (200)", s == 200, "%d %r" % (s, env2))
    el, got = poll_status("a", 403, 3, "e2e-deny")
    check("1. the next request is refused 403 host-not-allowed within 1 s",
          got == (403, "host-not-allowed") and el <= 1.0, "%r after %.2f s" % (got, el))
    # kill -9 the proxy, start it again on the same admin socket.
    st["proxy"].send_signal(signal.SIGKILL)
    st["proxy"].wait(timeout=5)
    proxy_start()
    t_up = time.time()
    el, got = poll_status("b", 200, 2, "e2e-restart")
    delay = time.time() - t_up
    diag("restarted proxy served the current policy %.2f s after it came up" % delay)
    check("1. a proxy restarted after kill -9 serves the current policy within 2 s",
          got[0] == 200 and delay <= 2.0, "%r after %.2f s" % (got, delay))
    check("1. restarted proxy refuses what the policy refuses",
          curl("a", "e2e-restart-deny") == (403, "host-not-allowed"))
    test_end_to_end.restart_delay = delay
    # Stop the control plane: the proxy keeps enforcing the last policy.
    rc = control_stop()
    check("1. sluice control exits 0 on SIGTERM", rc == 0, "rc %d" % rc)
    time.sleep(1.2)  # longer than the pusher's status interval
    a, b = curl("a", "e2e-noctl-deny"), curl("b", "e2e-noctl-allow")
    check("1. control stopped: the refused host stays refused", a == (403, "host-not-allowed"),
          repr(a))
    check("1. control stopped: the allowed host stays allowed", b[0] == 200, repr(b))
    # Audit lines carry the environment id.
    def audit_ok():
        lines = audit_lines()
        allow = [x for x in lines if x.get("decision") == "allow"]
        deny = [x for x in lines if x.get("reason") == "host-not-allowed"]
        return allow and deny and all(x.get("environment") == env["id"] for x in allow + deny)
    got = wait_for(audit_ok, 5)
    check("1. audit lines (allow and host-not-allowed) carry the environment id", bool(got),
          repr([(x.get("decision"), x.get("reason"), x.get("environment"))
                for x in audit_lines()[-4:]]))


# ---- 4. restart keeps everything --------------------------------------------------------------

def test_restart_keeps_everything():
    call("POST", E, {"name": "alice-own", "base_image": "x", "network": "off",
                     "env": [{"name": "S", "value": "v", "secret": True}]}, who="alice")
    before, before_alice = dump(), call("GET", E, who="alice")
    rc = control_stop()
    check("4. SIGTERM exits 0", rc == 0, "rc %d" % rc)
    control_start()
    after, after_alice = dump(), call("GET", E, who="alice")
    check("4. restart keeps environments and static clients (root's view)", before == after)
    check("4. restart keeps alice's environments; her token is still valid",
          after_alice[0] == 200 and before_alice == after_alice, repr(after_alice)[:200])
    lst = json.loads(after)["environments"]
    check("4. nothing undecryptable after a restart with the same key",
          all("undecryptable" not in x for x in lst))


def refuses_corrupt(d, content, what):
    """`sluice control` on the data directory `d` whose sluice.db holds `content` must exit
    non-zero naming the file, and leave the file byte for byte as it was."""
    db = os.path.join(d, "sluice.db")
    os.makedirs(d)
    with open(db, "wb") as f:
        f.write(content)
    r = subprocess.run([BIN, "control", "--listen", "127.0.0.1:%d" % free_port(), "--data", d],
                       env=sluice_env(KEY1), capture_output=True, text=True, timeout=15)
    short_stderr.append(r.stderr)
    check("4. %s: non-zero exit, message names the file" % what,
          r.returncode != 0 and "sluice.db" in r.stderr, "rc %d: %r" % (r.returncode, r.stderr))
    with open(db, "rb") as f:
        check("4. %s: the file is byte-identical afterwards" % what, f.read() == content)


def test_corrupt_database():
    junk = os.urandom(os.path.getsize(os.path.join(CDATA, "sluice.db")) or 65536)
    refuses_corrupt(os.path.join(WORK, "corrupt"), junk, "a corrupt sluice.db")
    # A real database with its pages (after the header) overwritten.
    with open(os.path.join(CDATA, "sluice.db"), "rb") as f:
        real = bytearray(f.read())
    real[100:] = os.urandom(len(real) - 100)
    refuses_corrupt(os.path.join(WORK, "corrupt2"), bytes(real),
                    "a sluice.db with valid header and random pages")


# ---- 3. bad input ----------------------------------------------------------------------------

SQL = "'; DROP TABLE environments; --"


def test_bad_input():
    s, victim = call("POST", E, {"name": "victim", "base_image": "x", "network": "off",
                                 "description": "keep"})
    assert s == 201, (s, victim)
    base = {"name": "bad", "base_image": "x", "network": "off"}

    def variant(**kw):
        d = dict(base)
        d.update(kw)
        return d

    big = "n" * (10 * 1024 * 1024)
    cases = [
        ("invalid JSON", None, b"{not json"),
        ("truncated JSON", None, b'{"name":"x","base_image":'),
        ("JSON array", None, b"[1,2]"),
        ("JSON with trailing garbage", None, b'{"name":"tg","base_image":"x","network":"off"} x'),
        ("name is a number", variant(name=5), None),
        ("cpus is a string", variant(cpus="two"), None),
        ("network is a bool", variant(network=True), None),
        ("env is a string", variant(env="A=1"), None),
        ("env value is a number", variant(env=[{"name": "A", "value": 1}]), None),
        ("egress.rules is an object", variant(network="on", egress={"default": "deny",
                                                                     "rules": {}}), None),
        ("methods is a string", variant(network="on", egress={"default": "deny", "rules": [
            {"host": "x.example.com", "methods": "GET"}]}), None),
        ("repositories is a string", variant(repositories="a/b"), None),
        ("unknown top-level field", variant(colour="blue"), None),
        ("unknown field in a rule", variant(network="on", egress={"default": "deny", "rules": [
            {"host": "x.example.com", "port": 1}]}), None),
        ("10 MB name", variant(name=big), None),
        ("10 MB description", variant(description=big), None),
        ("NUL in name", variant(name="a\u0000b"), None),
        ("NUL in description", variant(description="a\u0000b"), None),
        ("NUL in env value", variant(env=[{"name": "A", "value": "x\u0000y"}]), None),
        ("NUL in credential value", variant(network="on", egress={"default": "deny", "rules": [
            {"host": "x.example.com", "credential": {"header": "Authorization",
                                                     "value": "a\u0000b"}}]}), None),
        ("SQL in memory", variant(memory=SQL), None),
        ("SQL in base_image (not an image reference)", variant(base_image=SQL), None),
        ("SQL in scope", variant(scope=SQL), None),
        ("SQL in network", variant(network=SQL), None),
        ("SQL in env name", variant(env=[{"name": SQL, "value": "v"}]), None),
        ("SQL in rule host", variant(network="on", egress={"default": "deny", "rules": [
            {"host": SQL}]}), None),
        ("SQL in rule method", variant(network="on", egress={"default": "deny", "rules": [
            {"host": "x.example.com", "methods": [SQL]}]}), None),
        ("SQL in credential header", variant(network="on", egress={"default": "deny", "rules": [
            {"host": "x.example.com", "credential": {"header": SQL, "value": "v"}}]}), None),
        ("SQL in egress default", variant(network="on", egress={"default": SQL, "rules": [
            {"host": "x.example.com"}]}), None),
        ("SQL in repositories", variant(repositories=[SQL]), None),
    ]
    for desc, body, raw in cases:
        for method, path in (("POST", E), ("PUT", E + "/" + victim["id"])):
            before = dump()
            try:
                s, doc = call(method, path, body=body, raw=raw, timeout=30)
            except OSError as e:
                s, doc = 0, repr(e)
            after = dump()
            check("3. %s %s: 4xx, database unchanged" % (method, desc),
                  400 <= s < 500 and before == after, "%d %r" % (s, str(doc)[:200]))
    # SQL metacharacters in every free-text field of a valid create: stored verbatim.
    before = dump()
    body = {"name": SQL, "description": SQL, "base_image": "x", "network": "on",
            "env": [{"name": "PLAIN", "value": SQL}, {"name": "SEC", "value": SQL,
                                                       "secret": True}],
            "egress": {"default": "deny", "rules": [
                {"host": "sql.example.com", "credential": {"header": "X-Sql", "value": SQL}}]},
            "repositories": ["sql/repo"]}
    s, e = call("POST", E, body)
    check("3. SQL metacharacters in every free-text field: 201", s == 201, "%d %r" % (s, e))
    if s == 201:
        s, got = call("GET", E + "/" + urllib.parse.quote(SQL, safe=""))
        check("3. ... returned verbatim (name, description, env value)",
              s == 200 and got["name"] == SQL and got["description"] == SQL and
              got["env"][0]["value"] == SQL and
              got["id"] == e["id"], "%d %r" % (s, got))
        after = json.loads(dump())["environments"]
        b = json.loads(before)["environments"]
        check("3. ... and the rest of the database is unchanged",
              [x for x in after if x["id"] != e["id"]] == b)
        call("DELETE", E + "/" + e["id"])
    fx_skip("3. body over 64 MiB", "control_api.sh tests 413")


def fx_skip(desc, why):
    print("ok - %s # SKIP %s" % (desc, why), flush=True)


# ---- 2. concurrency --------------------------------------------------------------------------

def test_concurrency():
    shared = []
    for i in range(3):
        s, g = call("POST", E, {"name": "shared-%d" % i, "scope": "global", "base_image": "x",
                                "network": "off"})
        assert s == 201, (s, g)
        shared.append(g["id"])
    expected = {}      # name -> fields or None (deleted)
    fivexx = []
    errors = []
    default_ok = [0]
    lock = threading.Lock()
    stop_at = time.time() + 10
    counts = [0]

    def worker(t):
        rnd = random.Random(t)
        who = "alice" if t % 2 else "root"   # half the threads are a non-admin user
        mine = {}        # name -> (id, body) for existing ones
        names = ["t%02d-e%d" % (t, k) for k in range(4)]
        n = 0
        while time.time() < stop_at:
            n += 1
            try:
                if t % 8 == 0 and rnd.random() < 0.5:
                    gid = rnd.choice(shared)
                    s, doc = call("POST", E + "/" + gid + "/set-default")
                    if s == 200:
                        with lock:
                            default_ok[0] += 1
                else:
                    name = rnd.choice(names)
                    body = {"name": name, "base_image": "img-%d" % n, "network": "off",
                            "description": "t%d n%d" % (t, n),
                            "cpus": rnd.choice([None, 1, 1.5, 0.25]),
                            "memory": rnd.choice([None, "512MiB", "2GiB"]),
                            "env": [{"name": "N", "value": str(n)}]}
                    if name not in mine:
                        s, doc = call("POST", E, body, who=who)
                        if s == 201:
                            mine[name] = (doc["id"], body)
                    elif rnd.random() < 0.3:
                        s, doc = call("DELETE", E + "/" + mine[name][0], who=who)
                        if s == 204:
                            del mine[name]
                    else:
                        s, doc = call("PUT", E + "/" + mine[name][0], body, who=who)
                        if s == 200:
                            mine[name] = (mine[name][0], body)
                if s >= 500:
                    with lock:
                        fivexx.append((s, doc))
                elif s >= 400:
                    with lock:
                        errors.append((s, doc))
            except OSError as e:
                with lock:
                    errors.append((0, repr(e)))
                    fivexx.append((0, repr(e)))
        with lock:
            counts[0] += n
            for name in names:
                expected[name] = (who, mine.get(name))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(32)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    diag("concurrency: %d requests, %d 4xx, %d set-default 200" %
         (counts[0], len(errors), default_ok[0]))
    check("2. 32 concurrent clients for 10 s: no 5xx and no broken connection", not fivexx,
          repr(fivexx[:3]))
    check("2. 4xx answers only where expected (none)", not errors, repr(errors[:3]))
    envs = {}
    for who in ("root", "alice"):
        s, lst = call("GET", E, who=who)
        envs[who] = {x["name"]: x for x in lst["environments"] if x["scope"] == "user"}
    bad = []
    for name, (who, want) in expected.items():
        got = envs[who].get(name)
        if want is None:
            if got is not None:
                bad.append((name, "exists", got["id"]))
            continue
        eid, body = want
        if got is None:
            bad.append((name, "missing"))
            continue
        s1, one = call("GET", E + "/" + got["id"], who=who)
        got = dict(got, env=one.get("env", []) if s1 == 200 else [])
        fields = {"id": got["id"], "base_image": got["base_image"],
                  "description": got["description"], "cpus": got["cpus"],
                  "memory": got["memory"], "env": [(v["name"], v.get("value")) for v in got["env"]]}
        wantf = {"id": eid, "base_image": body["base_image"], "description": body["description"],
                 "cpus": body["cpus"], "memory": body["memory"],
                 "env": [(v["name"], v["value"]) for v in body["env"]]}
        if fields != wantf:
            bad.append((name, fields, wantf))
    extra = [n for w in envs for n in envs[w] if n.startswith("t") and
             (n not in expected or expected[n][0] != w)]
    check("2. final state equals what the successful responses imply", not bad and not extra,
          repr((bad[:3], extra[:3])))
    defaults = [x["id"] for x in lst["environments"] if x["is_default"]]
    check("2. exactly one default, one of the raced environments",
          default_ok[0] == 0 or (len(defaults) == 1 and defaults[0] in shared), repr(defaults))


# ---- 5. encryption key change ----------------------------------------------------------------

def test_key_change():
    eid = ENVID["e2e"]
    s, _ = call("PUT", E + "/" + eid, global_env(
        "e2e", [rule("b"), rule("a", CRED2)],
        env=[{"name": "SECRET_X", "value": "sx-" + os.urandom(4).hex(), "secret": True}]))
    check("5. PUT a secret env var and a credential (200)", s == 200, str(s))
    el, got = poll_status("a", 200, 3, "key-before")
    lines = nginx_lines_served("key-before")
    check("5. with the first key the credential is injected",
          got[0] == 200 and lines and lines[-1]["authorization"] == CRED2, repr((got, lines[-1:])))
    v_before = proxy_version()
    control_stop()
    control_start(key=KEY2)
    s, doc = call("GET", E + "/" + eid)
    und = doc.get("undecryptable") if isinstance(doc, dict) else None
    check("5. a different key: GET shows undecryptable naming the env var and the credential",
          s == 200 and und and "SECRET_X" in und and any("a.sluice.test" in x for x in und),
          "%d %r" % (s, und))
    # The snapshot pushed meanwhile leaves the credential's rule out.
    newer = wait_for(lambda: proxy_version() > v_before, 3)
    check("5. the control plane started with the new key pushed a snapshot", bool(newer))
    got = curl("a", "key-after")
    b = curl("b", "key-after-b")
    lines = [x for x in (nginx_lines_served("key-after") if got[0] == 200
                         else nginx_lines("key-after")) if x["probe"] == "key-after"]
    check("5. the undecryptable credential's host is refused or sent without the header",
          got == (403, "host-not-allowed") or (got[0] == 200 and lines and
                                               lines[-1]["authorization"] in ("", "-")),
          repr((got, lines)))
    diag("with the new key a.sluice.test gets %r" % (got,))
    check("5. the rest of the environment still works (b.sluice.test 200)", b[0] == 200, repr(b))
    leaked = [x for x in nginx_lines("key-") if not x["probe"].startswith("key-before")
              and x["authorization"] not in ("", "-")]
    check("5. no stale or sealed credential value ever reaches nginx", not leaked, repr(leaked))
    s, doc2 = call("PUT", E + "/" + eid, doc if isinstance(doc, dict) else {})
    check("5. PUT without giving them anew: 409", s == 409, "%d %r" % (s, doc2))
    body = global_env("e2e", [rule("b"), rule("a", CRED3)],
                      env=[{"name": "SECRET_X", "value": "new", "secret": True}])
    s, doc3 = call("PUT", E + "/" + eid, body)
    check("5. PUT giving them anew: 200, undecryptable gone",
          s == 200 and "undecryptable" not in doc3, "%d %r" % (s, doc3))
    s, doc4 = call("GET", E + "/" + eid)
    check("5. GET afterwards: no undecryptable", s == 200 and "undecryptable" not in doc4)
    el, got = poll_status("a", 200, 3, "key-new")
    lines = nginx_lines_served("key-new")
    check("5. the new credential is injected within 1 s",
          got[0] == 200 and el <= 1.0 and lines and lines[-1]["authorization"] == CRED3,
          repr((got, el, lines[-1:])))
    logs = ""
    for name in sorted(os.listdir(WORK)):
        if name.endswith(".log"):
            with open(os.path.join(WORK, name), errors="replace") as f:
                logs += f.read()
    check("5. no credential value in the proxy, control or audit logs",
          all(c.split()[1] not in logs for c in (CRED1, CRED2, CRED3)))
    # Malformed keys.
    for desc, key in (("not base64", "not*base64!" + os.urandom(4).hex()),
                      ("16 bytes", base64.b64encode(b"K" * 16).decode()),
                      ("33 bytes", base64.b64encode(os.urandom(33)).decode())):
        r = subprocess.run([BIN, "control", "--listen", "127.0.0.1:%d" % free_port(),
                            "--data", CDATA], env=sluice_env(key), capture_output=True, text=True,
                           timeout=15)
        short_stderr.append(r.stderr)
        check("5. malformed key (%s): refuses to start with a message, key text not echoed"
              % desc, r.returncode != 0 and r.stderr.strip() and key not in r.stderr + r.stdout
              and "SLUICE_ENCRYPTION_KEY" in r.stderr, "rc %d %r" % (r.returncode, r.stderr))


def main():
    tests = [test_end_to_end, test_restart_keeps_everything, test_bad_input, test_concurrency,
             test_key_change, test_corrupt_database]
    try:
        for t in tests:
            if t is not test_end_to_end and st["control"] is None and t is not \
                    test_corrupt_database:
                control_start()
            try:
                t()
            except Exception as e:  # one failure must not hide the others
                import traceback
                traceback.print_exc(file=sys.stdout)
                not_ok(t.__name__, repr(e))
    finally:
        rcs = {}
        for k in ("control", "proxy"):
            p = st[k]
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    rcs[k] = p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    rcs[k] = "killed"
    check("the last control plane and proxy exit 0 on SIGTERM",
          all(v == 0 for v in rcs.values()) and "proxy" in rcs, repr(rcs))
    logs = {}
    for name in sorted(os.listdir(WORK)):
        if name.endswith(".log"):
            with open(os.path.join(WORK, name), errors="replace") as f:
                logs[name] = f.read()
    check("no sanitizer report in any log or refused start",
          all(clean(t) for t in list(logs.values()) + short_stderr),
          repr([n for n, t in logs.items() if not clean(t)]))
    if failures:
        for n in range(1, st["ncontrol"] + 1):
            p = os.path.join(WORK, "control%d.log" % n)
            with open(p, "rb") as f:
                tail = f.read().decode(errors="replace")[-1500:]
            print("# --- control%d.log tail\n# " % n + tail.replace("\n", "\n# "))
    print("# %d checks, %d failed" % (checks[0], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
