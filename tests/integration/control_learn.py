#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_learn.py - learn mode end to end without containers (docs/reference/
# api.md §5.1, docs/reference/snapshot.md §3 observe): a static client (127.0.0.0/8) in a global
# environment with default deny; observe started (admins only for a global environment), the
# same requests let out and recorded as observed; the suggestions condensed from the audit log
# (wildcards on request); the chosen rules applied; observe ended (logged, and the answer waits
# for the proxy); the same requests pass under deny while others are refused; observe ending
# by its deadline, the control plane rebuilding the snapshot then and saying so in its log.
# Run by control_learn.sh (nginx from tests/support/fixture.sh; FX_TLS_PORT, FX_TEST_CA,
# FX_WORK). stdlib only; output TAP-like.
import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from httpjson import curl_via_proxy, free_port, request, bearer, sluice_env, unix_get_json, wait_healthy  # noqa: E402
from tap import check, checks, failures, not_ok  # noqa: E402

BIN = os.environ["SLUICE_BIN"]
PORT = int(os.environ["FX_TLS_PORT"])
TESTCA = os.environ["FX_TEST_CA"]
WORK = os.path.join(os.environ["FX_WORK"], "learn")
os.makedirs(WORK, exist_ok=True)
CDATA = os.path.join(WORK, "control-data")
PDATA = os.path.join(WORK, "proxy-data")
SOCK = os.path.join(WORK, "proxy.sock")
AUDIT = os.path.join(WORK, "audit.log")
CLOG = os.path.join(WORK, "control.log")
KEY = base64.b64encode(os.urandom(32)).decode()
HOSTS = ("a", "b", "c", "d", "e")

st = {"cport": 0, "pport": 0}
tokens = {}


def env():
    return sluice_env(KEY)


def call(method, path, body=None, who="root"):
    conn = http.client.HTTPConnection("127.0.0.1", st["cport"], timeout=10)
    return request(conn, method, path, body, bearer(tokens[who]), lenient=True)


def user_add(name, admin=False):
    args = [BIN, "user", "add", name, "--data", CDATA] + (["--admin"] if admin else [])
    tokens[name] = subprocess.run(args, env=env(), capture_output=True, text=True, check=True,
                                  timeout=20).stdout.strip()


def proxy_version():
    try:
        return unix_get_json(SOCK, "/v1/status", timeout=3).get("version") or 0
    except (OSError, ValueError, IndexError):
        return 0


def wait_version_above(v, secs=10):
    deadline = time.time() + secs
    while time.time() < deadline:
        if proxy_version() > v:
            return True
        time.sleep(0.05)
    return False


def curl(host, method="GET", path="/hello"):
    """A fresh request through the proxy: (status, reason)."""
    return curl_via_proxy(st["pport"], os.path.join(PDATA, "ca.pem"),
                          "https://%s.sluice.test:%d%s" % (host, PORT, path),
                          os.path.join(WORK, "curl.hdrs"), ["-X", method])


def audit_lines(**want):
    """The audit lines whose fields equal `want` (waits up to 5 s for at least one)."""
    deadline = time.time() + 5
    while True:
        found = []
        try:
            with open(AUDIT, errors="replace") as f:
                for line in f:
                    try:
                        doc = json.loads(line)
                    except ValueError:
                        continue
                    if all(doc.get(k) == v for k, v in want.items()):
                        found.append(doc)
        except OSError:
            pass
        if found or time.time() > deadline:
            return found
        time.sleep(0.1)


def control_log():
    with open(CLOG, errors="replace") as f:
        return f.read()


def wait_log(text, secs):
    deadline = time.time() + secs
    while time.time() < deadline:
        if text in control_log():
            return True
        time.sleep(0.2)
    return False


def main():
    subprocess.run([BIN, "ca", "init", "--out", PDATA], env=env(), capture_output=True,
                   check=True, timeout=20)
    st["pport"] = free_port()
    args = [BIN, "proxy", "--listen", "127.0.0.1:%d" % st["pport"], "--data", PDATA,
            "--admin-socket", SOCK, "--audit-log", AUDIT, "--upstream-ca", TESTCA,
            "--allow-upstream", "127.0.0.0/8", "--log-level", "debug"]
    for h in HOSTS:
        args += ["--resolve", "%s.sluice.test:%d:127.0.0.1" % (h, PORT)]
    proxy = subprocess.Popen(args, env=env(), stdout=open(os.path.join(WORK, "proxy.log"), "wb"),
                             stderr=subprocess.STDOUT)
    user_add("root", admin=True)
    user_add("alice")
    st["cport"] = free_port()
    control = subprocess.Popen([BIN, "control", "--listen", "127.0.0.1:%d" % st["cport"],
                                "--data", CDATA, "--proxy-admin-socket", SOCK, "--audit-log",
                                AUDIT, "--log-level", "debug"],
                               env=env(), stdout=open(CLOG, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_healthy(control, st["cport"], 15, timeout=2)
        run()
    finally:
        for p in (control, proxy):
            p.send_signal(signal.SIGTERM)
        for p in (control, proxy):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
    for name in ("control.log", "proxy.log"):
        with open(os.path.join(WORK, name), errors="replace") as f:
            text = f.read()
        check("no sanitizer report in the %s" % name,
              "Sanitizer" not in text and "runtime error:" not in text)


def run():
    a_rule = "a.sluice.test:%d" % PORT
    s, e = call("POST", "/api/v1/environments", {
        "name": "learn", "scope": "global", "base_image": "debian:12", "network": "on",
        "egress": {"default": "deny", "rules": [{"host": a_rule, "methods": ["GET"]}]}})
    check("a global environment with default deny: 201", s == 201, str(e))
    env_id = e["id"]
    check("it is not in observe", e.get("observe_until") is None, str(e.get("observe_until")))
    s, c = call("POST", "/api/v1/clients",
                {"id": "ci", "cidr": "127.0.0.0/8", "environment": env_id})
    check("a static client for 127/8 in it: 201", s == 201, str(c))
    check("the proxy got the policy", wait_version_above(0), "no snapshot version")

    # The proxy reports only a version, and the control plane may push the environment and the
    # client as two snapshots: until the client's has landed the request is unidentified (407).
    deadline = time.time() + 10
    got = curl("b")
    while got[0] == 407 and time.time() < deadline:
        time.sleep(0.1)
        got = curl("b")
    check("before: b.sluice.test is refused host-not-allowed",
          got == (403, "host-not-allowed"), str(got))
    check("before: POST to a.sluice.test is refused method-not-allowed",
          curl("a", "POST") == (403, "method-not-allowed"))

    base = "/api/v1/environments/" + env_id
    s, r = call("POST", base + "/observe", {"minutes": 30}, who="alice")
    check("a user may not put a global environment in observe: 403", s == 403, str(r))
    s, r = call("POST", base + "/observe", {"minutes": 2000})
    check("more than 24 hours: 422", s == 422, str(r))
    v = proxy_version()
    s, r = call("POST", base + "/observe", {"minutes": 30})
    check("an admin puts it in observe for 30 minutes: 200", s == 200, str(r))
    until = (r or {}).get("observe_until") or ""
    check("the environment shows observe_until", until.endswith("Z"), until)
    check("entering observe is in the control plane's log",
          wait_log('msg="environment enters observe', 5) and "minutes=30 by=root" in control_log())
    check("the proxy got the snapshot in observe", wait_version_above(v))

    for h in ("b", "c", "d"):
        check("in observe, %s.sluice.test is let out" % h, curl(h)[0] == 200, str(curl(h)))
    check("in observe, POST to a.sluice.test is let out", curl("a", "POST")[0] == 200)
    lines = audit_lines(host="b.sluice.test", method="GET", observed=True)
    check("the audit line is marked observed with the refusal it escaped",
          len(lines) > 0 and lines[0].get("would_deny") == "host-not-allowed"
          and lines[0].get("decision") == "allow", str(lines[:1]))
    lines = audit_lines(host="a.sluice.test", method="POST", observed=True)
    check("... would_deny method-not-allowed for a method the rule refuses",
          len(lines) > 0 and lines[0].get("would_deny") == "method-not-allowed", str(lines[:1]))
    s, t = call("GET", "/api/v1/audit?limit=50")
    check("the audit tail shows the observed lines",
          s == 200 and any(x.get("observed") for x in t.get("entries", [])), str(s))

    s, r = call("GET", base + "/suggestions", who="alice")
    check("a user may not read a global environment's suggestions: 403", s == 403, str(r))
    s, sg = call("GET", base + "/suggestions")
    check("suggestions: 200", s == 200, str(sg))
    rules = [x["rule"] for x in sg.get("suggestions", [])]
    want = [{"host": "b.sluice.test:%d" % PORT, "methods": ["GET"]},
            {"host": "c.sluice.test:%d" % PORT, "methods": ["GET"]},
            {"host": "d.sluice.test:%d" % PORT, "methods": ["GET"]},
            {"host": a_rule, "methods": ["POST"]}]
    check("one rule per host and port with its methods, the refused method of a's rule too",
          sorted(rules, key=json.dumps) == sorted(want, key=json.dumps), json.dumps(rules))
    b = [x for x in sg["suggestions"] if x["rule"]["host"].startswith("b.")]
    check("with counts, the last time seen and what they escaped",
          b and b[0]["count"] >= 1 and b[0]["last_seen"].endswith("Z")
          and b[0]["would_deny"] == ["host-not-allowed"] and b[0]["observed"] >= 1, str(b))
    check("the suggestions name the environment and its deadline",
          sg.get("environment", {}).get("name") == "learn" and sg.get("observe_until") == until)
    s, sw = call("GET", base + "/suggestions?wildcards=1")
    wild = [x for x in sw.get("suggestions", []) if x["rule"]["host"].startswith("*.")]
    check("wildcards on request: *.sluice.test:PORT for b, c and d (a stays with its own rule)",
          s == 200 and len(wild) == 1 and wild[0]["rule"]["host"] == "*.sluice.test:%d" % PORT
          and sorted(wild[0]["hosts"]) == ["b.sluice.test", "c.sluice.test", "d.sluice.test"]
          and any(x["rule"]["host"] == a_rule for x in sw["suggestions"]),
          json.dumps(sw.get("suggestions")))

    for flag in ("2", "yes", "on", "%00", "1%200"):
        s, r = call("GET", base + "/suggestions?wildcards=" + flag)
        check("wildcards=%s is no flag: 422 naming it, never read as off" % flag,
              s == 422 and [e.get("field") for e in r.get("errors", [])] == ["wildcards"], str(r))
    for flag in ("0", "false", ""):
        s, r = call("GET", base + "/suggestions?wildcards=" + flag)
        check("wildcards=%s: off" % flag, s == 200 and r.get("wildcards") is False, str(r))

    s, r = call("POST", base + "/suggestions/apply", {"rules": [{"host": "b..bad"}]})
    check("applying a rule that is no host pattern: 422, nothing changed", s == 422, str(r))
    s, r = call("POST", base + "/suggestions/apply", {"rules": rules}, who="alice")
    check("a user may not apply rules to a global environment: 403", s == 403, str(r))
    s, r = call("POST", base + "/suggestions/apply", {"rules": rules})
    check("applying the chosen rules: 200", s == 200, str(r))
    check("... the answer shows it still in observe, with the deadline",
          (r or {}).get("observe_until") == until, str((r or {}).get("observe_until")))
    got = (r or {}).get("egress", {}).get("rules", [])
    check("a's rule took POST, the others were added",
          {"host": a_rule, "methods": ["GET", "POST"]} in got and len(got) == 4, json.dumps(got))
    check("applying is in the control plane's log",
          wait_log('msg="suggested rules applied"', 5))
    s, sg = call("GET", base + "/suggestions")
    check("what the environment allows by now is no longer suggested",
          s == 200 and sg.get("suggestions") == [], json.dumps(sg.get("suggestions")))

    s, e = call("GET", base)
    e = {k: v for k, v in e.items() if k in ("name", "scope", "base_image", "network", "egress")}
    e["description"] = "replaced while in observe"
    s, r = call("PUT", base, e)
    check("a PUT while in observe: 200 showing the deadline (still in observe)",
          s == 200 and r.get("observe_until") == until, "%d %s" % (s, (r or {}).get(
              "observe_until")))
    check("... as a GET then does", call("GET", base)[1].get("observe_until") == until)

    v = proxy_version()
    s, r = call("DELETE", base + "/observe")
    check("ending observe: 200, once the proxy holds it", s == 200 and proxy_version() > v, str(r))
    check("the environment no longer shows observe_until",
          (r or {}).get("observe_until", "x") is None)
    check("leaving observe is in the control plane's log",
          wait_log('msg="environment leaves observe" env=%s env_name="learn" by=root' % env_id, 5))

    for h in ("b", "c", "d"):
        check("under deny, %s.sluice.test now passes" % h, curl(h)[0] == 200)
    check("under deny, POST to a.sluice.test now passes", curl("a", "POST")[0] == 200)
    check("under deny, e.sluice.test (never seen) is refused",
          curl("e") == (403, "host-not-allowed"))
    check("... and audited as a plain refusal",
          len(audit_lines(host="e.sluice.test", decision="deny", reason="host-not-allowed")) > 0)

    # The deadline: the proxy ends observe by itself, the control plane builds again and says so.
    v = proxy_version()
    s, r = call("POST", base + "/observe", {"minutes": 1})
    check("observe for one minute: 200", s == 200, str(r))
    check("the proxy got it", wait_version_above(v))
    check("in observe again, e.sluice.test is let out", curl("e")[0] == 200)
    v = proxy_version()
    check("at the deadline the control plane logs the end and pushes a new snapshot",
          wait_log("reason=deadline", 75) and wait_version_above(v, 10))
    check("after the deadline, e.sluice.test is refused again",
          curl("e") == (403, "host-not-allowed"))
    s, e = call("GET", base)
    check("the environment no longer shows observe_until", s == 200 and e["observe_until"] is None)


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # a broken step fails the test with its reason
        not_ok("the test ran to its end", "%s: %s" % (type(exc).__name__, exc))
    if failures:
        print("# %d of %d check(s) failed" % (len(failures), checks[0]))
        for name in ("control.log", "proxy.log"):
            try:
                with open(os.path.join(WORK, name), errors="replace") as f:
                    tail = f.read().splitlines()[-15:]
                print("# --- last lines of %s" % name)
                for line in tail:
                    print("#   " + line)
            except OSError:
                pass
        sys.exit(1)
    print("# all %d checks passed" % checks[0])
