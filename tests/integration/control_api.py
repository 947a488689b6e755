#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_api.py - the REST API of environments, static clients,
# resolution, the audit tail's filters and its refusals grouped (docs/reference/api.md §5 intro,
# §5.1, §5.1b, §5.2, §5.7, on an audit log the test writes) against a real `sluice control` on loopback,
# with users made by `sluice user add`. One function per rule; stdlib only.
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from httpjson import free_port, request, bearer, unix_get_json, wait_healthy  # noqa: E402

BIN = os.environ.get("SLUICE_BIN") or sys.argv[1]
WORK = tempfile.mkdtemp(prefix="sluice-control-api-")
DATA = os.path.join(WORK, "data")
ENV = dict(os.environ, SLUICE_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode())
ENV.pop("SLUICE_DATA", None)

state = {"proc": None, "port": 0}
tokens = {}


def start(extra=()):
    port = free_port()
    log = open(os.path.join(WORK, "control.log"), "ab")
    proc = subprocess.Popen([BIN, "control", "--listen", "127.0.0.1:%d" % port, "--data", DATA]
                            + list(extra), env=ENV, stdout=log, stderr=log)
    state["proc"], state["port"] = proc, port
    wait_healthy(proc, port, 10)


def stop():
    proc = state["proc"]
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=10)
    assert rc == 0, "sluice control exited %d after SIGTERM" % rc


def call(method, path, body=None, who=None, raw=None):
    conn = http.client.HTTPConnection("127.0.0.1", state["port"], timeout=10)
    return request(conn, method, path, body, bearer(None if who is None else tokens.get(who, who)),
                   raw)


def expect(got, status, what):
    assert got[0] == status, "%s: want %d, got %d %s" % (what, status, got[0], got[1])
    return got[1]


def user_add(name, admin=False):
    args = [BIN, "user", "add", name, "--data", DATA] + (["--admin"] if admin else [])
    out = subprocess.run(args, env=ENV, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sl_"), out
    tokens[name] = lines[0]


def env_doc(name, **kw):
    doc = {"name": name, "base_image": "python:3.12-slim", "network": "off"}
    doc.update(kw)
    return doc


def create(who, name, **kw):
    return expect(call("POST", "/api/v1/environments", env_doc(name, **kw), who), 201,
                  "create " + name)


E = "/api/v1/environments"


# ---- the rules -----------------------------------------------------------------------------

def test_user_add_prints_one_token_and_refuses_a_taken_name():
    r = subprocess.run([BIN, "user", "add", "alice", "--data", DATA], env=ENV,
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == "" and "alice" in r.stderr, r


def test_health_needs_no_token():
    assert expect(call("GET", "/healthz"), 200, "healthz") == {"ok": True}


def test_no_token_or_unknown_token_is_401():
    doc = expect(call("GET", E), 401, "no token")
    assert "message" in doc
    expect(call("GET", E, who="sl_" + "A" * 43), 401, "unknown token")
    expect(call("GET", "/api/v1/status", who="nonsense"), 401, "garbage token")


def test_status_reports_the_version():
    doc = expect(call("GET", "/api/v1/status", who="alice"), 200, "status")
    assert doc["version"]


def test_user_cannot_write_global_environments():
    expect(call("POST", E, env_doc("g-by-user", scope="global"), "alice"), 403, "create global")
    g = create("root", "g-guarded", scope="global")
    expect(call("PUT", E + "/" + g["id"], env_doc("g-guarded", scope="global"), "alice"), 403,
           "put global")
    expect(call("PUT", E + "/" + g["id"], {"bad": 1}, "alice"), 403, "put global, bad body")
    expect(call("DELETE", E + "/" + g["id"], who="alice"), 403, "delete global")
    expect(call("POST", E + "/" + g["id"] + "/set-default", who="alice"), 403, "set-default")
    # Everyone reads global environments.
    expect(call("GET", E + "/" + g["id"], who="alice"), 200, "read global")


def test_user_cannot_see_another_users_environment():
    mine = create("alice", "alice-private")
    expect(call("GET", E + "/" + mine["id"], who="bob"), 404, "bob reads alice's")
    expect(call("PUT", E + "/" + mine["id"], env_doc("x"), "bob"), 404, "bob puts alice's")
    expect(call("DELETE", E + "/" + mine["id"], who="bob"), 404, "bob deletes alice's")
    names = [e["name"] for e in expect(call("GET", E, who="bob"), 200, "list")["environments"]]
    assert "alice-private" not in names


def test_admin_can_do_everything():
    g = create("root", "admin-global", scope="global")
    u = create("root", "admin-own")
    assert u["owner"] == "root" and g["owner"] is None
    expect(call("PUT", E + "/" + g["id"], env_doc("admin-global", scope="global",
                                                   description="d"), "root"), 200, "put")
    expect(call("POST", E + "/" + g["id"] + "/set-default", who="root"), 200, "set-default")
    h = create("root", "admin-global-2", scope="global")
    expect(call("POST", E + "/" + h["id"] + "/set-default", who="root"), 200, "promote")
    expect(call("DELETE", E + "/" + g["id"], who="root"), 204, "delete")
    expect(call("DELETE", E + "/" + u["id"], who="root"), 204, "delete own")


def test_create_get_list_put_delete():
    e = create("alice", "crud", cpus=1.5, memory="2GiB", description="first",
               repositories=["acme/crud"])
    assert e["scope"] == "user" and e["cpus"] == 1.5 and e["memory"] == "2GiB"
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get by id")
    assert got == e
    by_name = expect(call("GET", E + "/crud", who="alice"), 200, "get by name")
    assert by_name["id"] == e["id"]
    lst = expect(call("GET", E, who="alice"), 200, "list")["environments"]
    assert e["id"] in [x["id"] for x in lst]
    put = expect(call("PUT", E + "/" + e["id"], env_doc("crud2", description="second"),
                      "alice"), 200, "put")
    assert put["name"] == "crud2" and put["description"] == "second" and put["cpus"] is None
    assert put["created_at"] == e["created_at"]
    expect(call("DELETE", E + "/" + e["id"], who="alice"), 204, "delete")
    expect(call("GET", E + "/" + e["id"], who="alice"), 404, "gone")


def test_names_are_unique_per_scope_and_owner():
    create("alice", "same-name")
    doc = expect(call("POST", E, env_doc("same-name"), "alice"), 409, "twice for alice")
    assert "same-name" in doc["message"]
    create("bob", "same-name")
    create("root", "same-name", scope="global")
    expect(call("POST", E, env_doc("same-name", scope="global"), "root"), 409, "twice global")


def test_one_global_default_and_delete_default_is_409():
    a = create("root", "def-a", scope="global")
    b = create("root", "def-b", scope="global")
    expect(call("POST", E + "/" + a["id"] + "/set-default", who="root"), 200, "a default")
    expect(call("POST", E + "/" + b["id"] + "/set-default", who="root"), 200, "b default")
    lst = expect(call("GET", E, who="root"), 200, "list")["environments"]
    defaults = [x["name"] for x in lst if x["is_default"]]
    assert defaults == ["def-b"], defaults
    doc = expect(call("DELETE", E + "/" + b["id"], who="root"), 409, "delete default")
    assert "promote another" in doc["message"]
    u = create("root", "def-user")
    expect(call("POST", E + "/" + u["id"] + "/set-default", who="root"), 422, "user default")


def test_network_on_deny_without_rules_is_422():
    doc = expect(call("POST", E, env_doc("closed", network="on",
                                         egress={"default": "deny", "rules": []}), "alice"),
                 422, "deny no rules")
    assert doc["errors"] and doc["message"]


def test_network_off_stores_no_egress():
    e = create("alice", "offline", egress={"default": "allow",
                                           "rules": [{"host": "x.example.com"}]})
    assert e["network"] == "off" and e["egress"] is None
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get")
    assert got["egress"] is None


def test_env_var_names_and_100_entries():
    bad = expect(call("POST", E, env_doc("badvar", env=[{"name": "A", "value": "1"},
                                                         {"name": "1X", "value": "2"}]),
                      "alice"), 422, "bad name")
    assert any(x["field"].startswith("env[1]") for x in bad["errors"]), bad
    many = [{"name": "V%d" % i, "value": "x"} for i in range(101)]
    doc = expect(call("POST", E, env_doc("toomany", env=many), "alice"), 422, "101 vars")
    assert any(x["field"].startswith("env") for x in doc["errors"]), doc
    create("alice", "hundred", env=many[:100])


def test_at_most_100_rules():
    rules = [{"host": "h%d.example.com" % i} for i in range(101)]
    doc = expect(call("POST", E, env_doc("rules101", network="on",
                                         egress={"default": "deny", "rules": rules}), "alice"),
                 422, "101 rules")
    assert any(x["field"].startswith("egress.rules") for x in doc["errors"]), doc
    create("alice", "rules100", network="on", egress={"default": "deny", "rules": rules[:100]})


def test_secrets_are_masked_and_kept_on_resave():
    e = create("alice", "secretive", env=[{"name": "TOKEN", "value": "s3cr3t", "secret": True},
                                          {"name": "PLAIN", "value": "p"}])
    vals = {v["name"]: v["value"] for v in e["env"]}
    assert vals == {"TOKEN": "******", "PLAIN": "p"}, vals
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get")
    got["description"] = "resaved"
    put = expect(call("PUT", E + "/" + e["id"], got, "alice"), 200, "resave masked")
    assert [v["value"] for v in put["env"]] == ["******", "p"]
    # The kept value is the stored one: resolve with the environment shows it still masked,
    # and a masked value for an unknown name is refused.
    got["env"].append({"name": "NEW", "value": "******", "secret": True})
    expect(call("PUT", E + "/" + e["id"], got, "alice"), 422, "mask without a stored value")
    assert "s3cr3t" not in json.dumps(expect(call("GET", E, who="alice"), 200, "list"))


def test_credentials_are_never_returned():
    rules = [{"host": "api.example.com", "methods": ["GET"],
              "credential": {"header": "Authorization", "value": "Bearer topsecret"}}]
    e = create("alice", "creds", network="on", egress={"default": "deny", "rules": rules})
    cred = e["egress"]["rules"][0]["credential"]
    assert cred == {"header": "Authorization", "has_value": True}, cred
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get")
    assert "topsecret" not in json.dumps(got)
    put = expect(call("PUT", E + "/" + e["id"], got, "alice"), 200, "resave without value")
    assert put["egress"]["rules"][0]["credential"]["has_value"] is True


def test_passthrough_rules_round_trip_and_refuse_methods_or_credentials():
    pin = {"host": "pinned.example.com", "tls": "passthrough"}
    e = create("alice", "pinned", network="on", egress={"default": "deny", "rules": [
        pin, {"host": "pkgs.example.org", "tls": "intercept", "methods": ["GET"]}]})
    rules = e["egress"]["rules"]
    assert rules[0] == {"host": "pinned.example.com", "methods": [], "tls": "passthrough"}, rules
    assert "tls" not in rules[1], rules
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get")
    assert got["egress"]["rules"][0]["tls"] == "passthrough", got
    expect(call("PUT", E + "/" + e["id"], got, "alice"), 200, "resave as returned")
    for extra, field in (({"methods": ["GET"]}, "egress.rules[0].methods"),
                         ({"credential": {"header": "X-K", "value": "v"}},
                          "egress.rules[0].credential")):
        doc = expect(call("POST", E, env_doc("pinbad", network="on", egress={
            "default": "deny", "rules": [dict(pin, **extra)]}), "alice"), 422, field)
        assert [x["field"] for x in doc["errors"]] == [field], doc
    doc = expect(call("POST", E, env_doc("pinbad", network="on", egress={
        "default": "deny", "rules": [dict(pin, tls="bypass")]}), "alice"), 422, "bad tls")
    assert [x["field"] for x in doc["errors"]] == ["egress.rules[0].tls"], doc


def test_host_patterns_are_checked_and_normalised_with_warnings():
    # A '*' without a label boundary and an xn-- label that is no A-label: 422, with the field.
    for host in ("*", "*github.test", "api.*.github.test", "xn--zz", "api.xn--zz.test:8443"):
        doc = expect(call("POST", E, env_doc("badhost", network="on", egress={
            "default": "deny", "rules": [{"host": host}]}), "alice"), 422, "host " + host)
        assert [x["field"] for x in doc["errors"]] == ["egress.rules[0].host"], doc
    # Upper case and a trailing dot are stored in normal form, and the answer says so.
    e = create("alice", "warned", network="on", egress={"default": "deny", "rules": [
        {"host": "API.GITHUB.TEST"}, {"host": "api.github.test."}, {"host": "pkgs.example.org"},
        {"host": "*.github.test"}, {"host": "xn--bcher-kva.test"}]})
    assert [r["host"] for r in e["egress"]["rules"]] == [
        "api.github.test", "api.github.test", "pkgs.example.org", "*.github.test",
        "xn--bcher-kva.test"], e
    assert e["warnings"] == [
        {"field": "egress.rules[0].host", "message": 'host pattern "API.GITHUB.TEST" is stored as '
         '"api.github.test" (host names are matched in lower case)'},
        {"field": "egress.rules[1].host", "message": 'host pattern "api.github.test." is stored '
         'as "api.github.test" (the trailing dot is dropped)'}], e
    put = expect(call("PUT", E + "/" + e["id"], env_doc("warned", network="on", egress={
        "default": "deny", "rules": [{"host": "Pkgs.Example.Org"}]}), "alice"), 200, "put")
    assert [w["field"] for w in put["warnings"]] == ["egress.rules[0].host"], put
    got = expect(call("GET", E + "/" + e["id"], who="alice"), 200, "get")
    assert "warnings" not in got, got
    clean = create("alice", "unwarned", network="on", egress={"default": "deny", "rules": [
        {"host": "pkgs.example.org"}]})
    assert "warnings" not in clean, clean


def test_repository_conflict_names_the_other_environment():
    create("alice", "repo-one", repositories=["acme/shared"])
    doc = expect(call("POST", E, env_doc("repo-two", repositories=["acme/shared"]), "alice"),
                 409, "repo bound")
    assert "repo-one" in doc["message"], doc


def test_same_repo_in_user_and_global_environment():
    create("alice", "repo-user", repositories=["acme/both"])
    create("root", "repo-global", scope="global", repositories=["acme/both"])
    create("bob", "repo-bob", repositories=["acme/both"])


def test_invalid_json_400_unknown_field_422():
    expect(call("POST", E, who="alice", raw=b"{not json"), 400, "invalid json")
    doc = expect(call("POST", E, env_doc("unknown", colour="blue"), "alice"), 422, "unknown")
    assert any("colour" in x["field"] for x in doc["errors"]), doc


def test_body_over_64_mib_is_413():
    s = socket.create_connection(("127.0.0.1", state["port"]), timeout=10)
    s.sendall(("POST /api/v1/environments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{"
               % (tokens["alice"], 64 * 1024 * 1024 + 1)).encode())
    head = s.recv(4096)
    s.close()
    assert head.startswith(b"HTTP/1.1 413 "), head[:100]


def raw_head(s):
    """The response head read from socket `s` (up to its blank line), as text."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode("latin-1")


def test_bodies_only_from_callers_with_a_token():
    """A request with a body is answered 401 before any byte of it is read (no 100 Continue),
    and holds no part of the body budget: one from the same address that announced 64 MiB and
    sent one byte does not keep a caller with a token from posting (api.md §5)."""
    port = state["port"]
    for auth, why in (("", "an API token is required"),
                      ("Authorization: Bearer sl_not-a-token\r\n", "unknown API token")):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n"
                   % (E, auth, 64 * 1024 * 1024)).encode())
        got = b""
        while True:  # the answer, then the end: the connection is closed, the body never read
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        s.close()
        assert got.startswith(b"HTTP/1.1 401 "), got[:200]
        assert b"WWW-Authenticate: Bearer" in got and b"Connection: close" in got, got
        assert why.encode() in got and b"100 Continue" not in got, got
    holder = socket.create_connection(("127.0.0.1", port), timeout=10)
    holder.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\n\r\n{" % (E, 64 * 1024 * 1024)).encode())
    assert raw_head(holder).startswith("HTTP/1.1 401 ")
    expect(call("POST", E, env_doc("after-a-tokenless-body"), who="alice"), 201,
           "a POST with a token while a tokenless one announced 64 MiB")
    holder.close()


def test_bearer_scheme_is_case_insensitive():
    conn = http.client.HTTPConnection("127.0.0.1", state["port"], timeout=10)
    conn.request("GET", E, headers={"Authorization": "bearer " + tokens["alice"]})
    assert conn.getresponse().status == 200
    conn.close()


def test_sql_metacharacters_are_stored_verbatim():
    name = "x'); DROP TABLE environments; --"
    e = create("alice", name, description="\"quoted\" % _ \\ ;")
    got = expect(call("GET", E + "/" + urllib.parse.quote(name, safe=""), who="alice"), 200,
                 "get by odd name")
    assert got["name"] == name and got["description"] == "\"quoted\" % _ \\ ;"
    assert got["id"] == e["id"]


def resolve(who, query):
    return call("GET", "/api/v1/resolve?" + urllib.parse.urlencode(query), who=who)


def test_resolve_every_matched_by():
    # No default yet for a repo nobody binds: after the default tests the default is def-b.
    create("carol", "carol-bound", repositories=["res/user"])
    create("root", "res-global", scope="global", repositories=["res/global"])
    x = create("carol", "carol-explicit")
    doc = expect(resolve("carol", {"repo": "res/user"}), 200, "user-binding")
    assert doc["matched_by"] == "user-binding" and doc["environment"]["name"] == "carol-bound"
    doc = expect(resolve("carol", {"repo": "res/global"}), 200, "global-binding")
    assert doc["matched_by"] == "global-binding"
    doc = expect(resolve("carol", {"repo": "res/nothing", "environment": x["id"]}), 200,
                 "explicit")
    assert doc["matched_by"] == "explicit"
    doc = expect(resolve("carol", {"repo": "res/nothing", "environment": "carol-explicit"}),
                 200, "explicit by name")
    assert doc["matched_by"] == "explicit"
    doc = expect(resolve("carol", {"repo": "res/nothing"}), 200, "global-default")
    assert doc["matched_by"] == "global-default" and doc["environment"]["name"] == "def-b"
    # Webhook runs skip user bindings.
    doc = expect(resolve("carol", {"repo": "res/user", "trigger": "webhook"}), 200, "webhook")
    assert doc["matched_by"] == "global-default", doc
    expect(resolve("carol", {"repo": "not a repo"}), 400, "bad repo")
    expect(resolve("carol", {"repo": "res/user", "environment": "alice-private"}), 404,
           "another user's env")


# ---- the audit tail's filters (§5.7) --------------------------------------------------------

def audit_line(ts, client, env, decision, reason, host, method="GET", port=443):
    return json.dumps({"ts": ts, "client": client, "environment": env, "src": "10.0.0.5:4000",
                       "method": method, "scheme": "https", "host": host, "port": port,
                       "path": "/", "decision": decision, "reason": reason, "rule": None,
                       "credential": False, "status": 403 if decision == "deny" else 200,
                       "bytes_up": 0, "bytes_down": 0, "ms": 1.0, "policy_version": 1})


def audit_get(query, who="root"):
    return call("GET", "/api/v1/audit?" + query, who=who)


def test_audit_filters_keep_only_matching_lines():
    env = create("root", "audit-web", scope="global", network="on",
                 egress={"default": "deny", "rules": [{"host": "a.sluice.test"}]})
    lines = [
        audit_line("2026-11-30T02:00:00.000Z", "sb_one", env["id"], "deny", "host-not-allowed",
                   "b.sluice.test"),
        audit_line("2026-11-30T02:00:01.000Z", "ci-runner", env["id"], "allow", None,
                   "a.sluice.test"),
        audit_line("2026-11-30T02:00:02.000Z", "sb_one", env["id"], "deny", "method-not-allowed",
                   "API.Example.com", method="POST"),
        audit_line("2026-11-30T02:00:03.000Z", "sb_two", "other-env", "error", "upstream-failed",
                   "b.sluice.test"),
        audit_line("2026-11-30T02:00:04.000Z", "sb_one", env["id"], "deny", "host-not-allowed",
                   "b.sluice.test"),
    ]
    path = os.path.join(DATA, "audit.log")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        def times(query, who="root"):
            doc = expect(audit_get(query, who), 200, query)
            return [e["ts"][17:19] for e in doc["entries"]], doc

        got, doc = times("")
        assert got == ["04", "03", "02", "01", "00"], got
        assert doc["truncated"] is False and doc["scanned_to"] == "2026-11-30T02:00:00.000Z", doc
        assert times("client=sb_one")[0] == ["04", "02", "00"]
        assert times("client=sb_")[0] == []
        assert times("decision=deny")[0] == ["04", "02", "00"]
        assert times("reason=host-not-allowed")[0] == ["04", "00"]
        # A substring of the host in any case; the environment by its id or its name.
        assert times("host=EXAMPLE")[0] == ["02"]
        assert times("host=sluice.test")[0] == ["04", "03", "01", "00"]
        assert times("environment=audit-web")[0] == ["04", "02", "01", "00"]
        assert times("environment=" + env["id"])[0] == ["04", "02", "01", "00"]
        assert times("environment=other-env")[0] == ["03"]
        # Since inclusive, until exclusive; ANDed with the rest; limit counts matching lines.
        assert times("since=2026-11-30T02:00:01Z&until=2026-11-30T02:00:04Z")[0] == \
            ["03", "02", "01"]
        assert times("since=2026-11-30T02:00:01Z&client=sb_one&decision=deny")[0] == ["04", "02"]
        assert times("decision=deny&limit=2")[0] == ["04", "02"]
        assert times("decision=deny&host=b.sluice&limit=1")[0] == ["04"]
        assert times("client=sb_one&decision=allow")[0] == []
        # Each line keeps its suggestion and environment name.
        e = times("client=sb_one&limit=1")[1]["entries"][0]
        assert e["environment_name"] == "audit-web" and e["suggestion"].startswith("to allow it"), e
        # Bad values: 422 naming the parameter.
        for query, field in (("decision=refused", "decision"), ("since=yesterday", "since"),
                             ("until=2026-11-30T02:00:00%2B01:00", "until"),
                             ("reason=Not%20Allowed", "reason"), ("client=a%01b", "client"),
                             ("host=" + "x" * 513, "host"), ("limit=0&client=x", "limit"),
                             ("since=2026-11-30T02:00:02Z&until=2026-11-30T02:00:01Z", "until")):
            doc = expect(audit_get(query), 422, query)
            assert doc["errors"][0]["field"] == field and doc["message"].startswith(field + ": "), \
                (query, doc)
        # A user sees only the lines of her sandboxes (none here), whatever the filters.
        got, doc = times("client=sb_one", "alice")
        assert got == [] and doc["all"] is False, doc
    finally:
        os.unlink(path)


def test_audit_scan_is_bounded_and_says_so():
    """More than 4 MiB of lines: a filter that matches only the oldest is cut short and says
    so; `since` ends the scan early without a cut."""
    path = os.path.join(DATA, "audit.log")
    filler = audit_line("2026-11-30T03:00:00.000Z", "ci-runner", "e", "allow", None, "a.test")
    n = (4 << 20) // (len(filler) + 1) + 100
    with open(path, "w") as f:
        f.write(audit_line("2026-11-30T01:00:00.000Z", "sb_old", "e", "deny", "host-not-allowed",
                           "b.test") + "\n")
        f.write((filler + "\n") * n)
    try:
        doc = expect(audit_get("client=sb_old"), 200, "old client")
        assert doc["entries"] == [] and doc["truncated"] is True, doc
        assert doc["scanned_to"] == "2026-11-30T03:00:00.000Z", doc
        doc = expect(audit_get("client=ci-runner&limit=3"), 200, "filler")
        assert len(doc["entries"]) == 3 and doc["truncated"] is False, doc
        with open(path, "a") as f:
            f.write(audit_line("2026-11-30T05:00:00.000Z", "sb_new", "e", "deny",
                               "host-not-allowed", "b.test") + "\n")
        doc = expect(audit_get("since=2026-11-30T04:00:00Z"), 200, "since")
        assert [e["client"] for e in doc["entries"]] == ["sb_new"], doc
        assert doc["truncated"] is False and doc["scanned_to"] == "2026-11-30T03:00:00.000Z", doc
    finally:
        os.unlink(path)


def test_audit_refusals_are_grouped_with_the_rule_to_apply():
    env = create("root", "refusals-web", scope="global", network="on",
                 egress={"default": "deny", "rules": [{"host": "a.sluice.test",
                                                       "methods": ["GET"]}]})
    mine = create("alice", "refusals-alice", network="on",
                  egress={"default": "deny", "rules": [{"host": "a.sluice.test"}]})
    gone = "5d0c0000-0000-4000-8000-00000000dead"
    deny = "host-not-allowed"
    lines = [
        audit_line("2026-11-30T02:00:00.000Z", "ci", env["id"], "deny", deny, "b.sluice.test"),
        audit_line("2026-11-30T02:00:01.000Z", "ci", env["id"], "deny", "port-not-allowed",
                   "c.test", port=8080),
        audit_line("2026-11-30T02:00:02.000Z", "ci", env["id"], "deny", deny, "b.sluice.test"),
        audit_line("2026-11-30T02:00:03.000Z", "ci", env["id"], "deny", "method-not-allowed",
                   "a.sluice.test", method="POST"),
        audit_line("2026-11-30T02:00:04.000Z", "ci", env["id"], "allow", None, "a.sluice.test"),
        audit_line("2026-11-30T02:00:05.000Z", "ci", mine["id"], "deny", deny, "d.test"),
        audit_line("2026-11-30T02:00:06.000Z", "ci", gone, "deny", deny, "e.test"),
        audit_line("2026-11-30T02:00:07.000Z", "ci", None, "deny", "no-identity", "f.test"),
        audit_line("2026-11-30T02:00:08.000Z", "ci", env["id"], "deny", "port-not-allowed",
                   "c.test", port=8080),
        audit_line("2026-11-30T02:00:09.000Z", "ci", env["id"], "deny", deny, "b.sluice.test"),
        # The same host with another method is another group.
        audit_line("2026-11-30T02:00:10.000Z", "ci", env["id"], "deny", deny, "b.sluice.test",
                   method="POST"),
    ]
    path = os.path.join(DATA, "audit.log")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    R = "/api/v1/audit/refusals"
    try:
        doc = expect(call("GET", R, who="root"), 200, "refusals")
        groups = doc["groups"]
        assert doc["lines"] == 10 and doc["left_out"] == 0 and doc["all"] is True, doc
        assert doc["truncated"] is False, doc
        assert [(g["host"], g["method"], g["count"]) for g in groups[:2]] == \
            [("b.sluice.test", "GET", 3), ("c.test", "GET", 2)], groups
        b = groups[0]
        assert b["environment"] == {"id": env["id"], "name": "refusals-web"}, b
        assert (b["port"], b["reason"]) == (443, deny), b
        assert b["first"] == "2026-11-30T02:00:00.000Z" and b["last"] == \
            "2026-11-30T02:00:09.000Z", b
        assert b["rule"] == {"host": "b.sluice.test", "methods": ["GET"]}, b
        assert b["extends"] is None and b["can_apply"] is True, b
        assert b["suggestion"] == ('to allow it, add {"host":"b.sluice.test","methods":["GET"]}'
                                   " to environment refusals-web"), b
        assert groups[1]["rule"] == {"host": "c.test:8080", "methods": ["GET"]}, groups[1]
        by = {(g["host"], g["method"]): g for g in groups}
        assert len(by) == len(groups) == 7, groups
        post = by[("a.sluice.test", "POST")]
        assert post["rule"] == {"host": "a.sluice.test", "methods": ["POST"]}, post
        assert post["extends"] == "a.sluice.test", post
        assert post["suggestion"].startswith('to allow it, add "POST" to the methods of'), post
        # Another user's environment is private, also to an admin: its id, no name, no rule;
        # a deleted environment and none at all have no rule either.
        d = by[("d.test", "GET")]
        assert d["environment"] == {"id": mine["id"], "name": None}, d
        assert d["rule"] is None and d["suggestion"] is None and d["can_apply"] is False, d
        e = by[("e.test", "GET")]
        assert e["environment"] == {"id": gone, "name": None} and e["rule"] is None, e
        assert e["can_apply"] is False and e["suggestion"] is None, e
        f = by[("f.test", "GET")]
        assert f["environment"] is None and f["rule"] is None and f["can_apply"] is False, f
        # The filters apply; decision is deny and nothing else.
        doc = expect(call("GET", R + "?host=B.SLUICE&since=2026-11-30T02:00:01Z", who="root"),
                     200, "filtered")
        assert [(g["method"], g["count"]) for g in doc["groups"]] == [("GET", 2), ("POST", 1)], doc
        assert doc["groups"][0]["first"] == "2026-11-30T02:00:02.000Z", doc
        doc = expect(call("GET", R + "?environment=" + mine["id"], who="root"), 200, "by env")
        assert [g["host"] for g in doc["groups"]] == ["d.test"], doc
        doc = expect(call("GET", R + "?environment=refusals-alice", who="root"), 200,
                     "by a name the admin cannot see")
        assert doc["groups"] == [], doc
        expect(call("GET", R + "?decision=deny", who="root"), 200, "decision=deny")
        doc = expect(call("GET", R + "?decision=allow", who="root"), 422, "decision=allow")
        assert doc["errors"][0]["field"] == "decision", doc
        doc = expect(call("GET", R + "?until=soon", who="root"), 422, "until=soon")
        assert doc["errors"][0]["field"] == "until", doc
        expect(call("POST", R, {}, "root"), 405, "POST")
        # A user sees the refusals of her sandboxes only: none here.
        doc = expect(call("GET", R, who="alice"), 200, "alice")
        assert doc["groups"] == [] and doc["all"] is False and doc["lines"] == 0, doc
        # The rule applied as it is: the group has nothing left to add.
        expect(call("POST", E + "/" + env["id"] + "/suggestions/apply", {"rules": [b["rule"]]},
                    "root"), 200, "apply")
        doc = expect(call("GET", R + "?host=b.sluice.test", who="root"), 200, "after apply")
        g = [g for g in doc["groups"] if g["method"] == "GET"][0]
        assert g["count"] == 3 and g["rule"] is None and g["suggestion"] is None, g
        # At most 200 groups, the most refused first; the rest counted as left out.
        with open(path, "w") as f:
            for i in range(205):
                for _ in range(2 if i == 204 else 1):
                    f.write(audit_line("2026-11-30T03:00:00.000Z", "ci", env["id"], "deny", deny,
                                       "h%d.test" % i) + "\n")
        doc = expect(call("GET", R, who="root"), 200, "many")
        assert len(doc["groups"]) == 200 and doc["left_out"] == 5 and doc["lines"] == 206, \
            (len(doc["groups"]), doc["left_out"], doc["lines"])
        assert doc["groups"][0]["host"] == "h204.test" and doc["groups"][0]["count"] == 2
    finally:
        os.unlink(path)


def test_static_clients_admin_only_token_shown_once():
    expect(call("GET", "/api/v1/clients", who="alice"), 403, "user lists")
    expect(call("POST", "/api/v1/clients", {"id": "x", "ip": "10.0.0.1", "environment": "def-b"},
                "alice"), 403, "user creates")
    doc = expect(call("POST", "/api/v1/clients", {"id": "ci-runners", "cidr": "10.20.0.0/16",
                                                  "environment": "def-b"}, "root"), 201, "cidr")
    assert doc["cidr"] == "10.20.0.0/16" and "token" not in doc
    doc = expect(call("POST", "/api/v1/clients", {"id": "builder", "token": True,
                                                  "environment": "def-b"}, "root"), 201, "token")
    token = doc["token"]
    assert token.startswith("sl_")
    expect(call("POST", "/api/v1/clients", {"id": "builder", "ip": "10.0.0.2",
                                            "environment": "def-b"}, "root"), 409, "taken")
    # Every 422 names its field, as every validation error of the API does.
    for body, field, message in (
            ({"id": "bad", "cidr": "10.0.0.0/99", "environment": "def-b"}, "cidr",
             "cidr: an address block like 10.20.0.0/16"),
            ({"id": "nowhere", "ip": "10.0.0.3", "environment": "no-such"}, "environment",
             "environment: no environment 'no-such'"),
            ({"id": "a b", "ip": "10.0.0.3", "environment": "def-b"}, "id",
             "id: 1-128 letters, digits, '-', '_' or '.' required"),
            ({"id": "two", "ip": "10.0.0.3", "cidr": "10.0.0.0/8", "environment": "def-b"},
             "ip", "give exactly one of ip, cidr and \"token\": true"),
            ({"id": "odd", "ip": "10.0.0.3", "environment": "def-b", "port": 1}, "port",
             "unknown field 'port'")):
        doc = expect(call("POST", "/api/v1/clients", body, "root"), 422, field)
        assert doc["message"] == message and doc["errors"][0]["field"] == field, doc
    lst = expect(call("GET", "/api/v1/clients", who="root"), 200, "list")
    assert token not in json.dumps(lst)
    assert {c["id"] for c in lst["clients"]} == {"ci-runners", "builder"}
    expect(call("DELETE", "/api/v1/clients/ci-runners", who="root"), 204, "delete")
    expect(call("DELETE", "/api/v1/clients/ci-runners", who="root"), 404, "delete twice")


def test_restart_keeps_everything():
    before = expect(call("GET", E, who="alice"), 200, "list")
    stop()
    start()
    after = expect(call("GET", E, who="alice"), 200, "list after restart")
    assert before == after
    secret = [e for e in after["environments"] if e["name"] == "secretive"][0]
    got = expect(call("GET", E + "/" + secret["id"], who="alice"), 200, "get after restart")
    assert "undecryptable" not in got


def test_corrupt_database_refuses_to_start():
    d = os.path.join(WORK, "corrupt")
    os.makedirs(d)
    db = os.path.join(d, "sluice.db")
    junk = os.urandom(8192)
    with open(db, "wb") as f:
        f.write(junk)
    r = subprocess.run([BIN, "control", "--listen", "127.0.0.1:%d" % free_port(), "--data", d],
                       env=ENV, capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "sluice.db" in r.stderr, r
    with open(db, "rb") as f:
        assert f.read() == junk


def test_missing_key_is_a_clear_error():
    env = dict(ENV)
    del env["SLUICE_ENCRYPTION_KEY"]
    d = os.path.join(WORK, "nokey")
    r = subprocess.run([BIN, "control", "--listen", "127.0.0.1:%d" % free_port(), "--data", d],
                       env=env, capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "SLUICE_ENCRYPTION_KEY" in r.stderr, r


def test_resolve_none_on_a_fresh_database():
    d = os.path.join(WORK, "fresh")
    global DATA
    saved, DATA = DATA, d
    try:
        user_add("dave")
        stop()
        start()
        doc = expect(resolve("dave", {"repo": "any/thing"}), 200, "none")
        assert doc["matched_by"] == "none" and doc["network"] == "off", doc
    finally:
        DATA = saved


def test_snapshots_reach_the_proxy():
    global DATA
    d = os.path.join(WORK, "push")
    sock = os.path.join(WORK, "push-proxy.sock")
    subprocess.run([BIN, "ca", "init", "--out", d], env=ENV, capture_output=True, check=True)
    proxy = subprocess.Popen([BIN, "proxy", "--data", d, "--listen", "127.0.0.1:%d" % free_port(),
                              "--admin-socket", sock], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    saved, DATA = DATA, d
    try:
        user_add("erin", admin=True)
        stop()
        start(["--proxy-admin-socket", sock])

        def acked(want):
            for _ in range(100):
                snap = expect(call("GET", "/api/v1/status", who="erin"), 200, "status")["snapshot"]
                if snap["version"] >= want and snap["proxies"][0]["acknowledged_version"] \
                        == snap["version"]:
                    return snap["version"]
                time.sleep(0.05)
            raise AssertionError("the proxy did not acknowledge: %r" % snap)

        first = acked(1)
        before = expect(call("GET", "/api/v1/status", who="erin"), 200, "status")["snapshot"]
        assert before["bytes"] > 0 and before["build_us"] > 0, before
        create("erin", "pushed", scope="global", network="on",
               egress={"default": "deny", "rules": [{"host": "pkgs.example.org"}]})
        second = acked(first + 1)
        # The size of what is pushed grows with the environment (and its host) in it.
        after = expect(call("GET", "/api/v1/status", who="erin"), 200, "status")["snapshot"]
        assert after["bytes"] > before["bytes"] + len("pkgs.example.org"), (before, after)
        assert unix_get_json(sock, "/v1/status")["version"] == second
    finally:
        DATA = saved
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(timeout=10)


# ---- the HTTP rules of every answer (§5 "Errors", §5.6) ---------------------------------------

def raw(text, body=b""):
    """Sends `text` (a request head, CRLFs added; Connection: close) and `body` as they are;
    returns (status, {lower-case name: [values]}, body bytes)."""
    head = text.replace("\n", "\r\n") + "Connection: close\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", state["port"]), timeout=10)
    try:
        s.sendall(head.encode("latin-1") + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields.setdefault(name.strip().lower(), []).append(value.strip())
    return int(lines[0].split(" ")[1]), fields, rest


def get_raw(method, path, who=None, extra=""):
    auth = "Authorization: Bearer %s\n" % tokens[who] if who is not None else ""
    return raw("%s %s HTTP/1.1\nHost: x\n%s%s" % (method, path, auth, extra))


def test_paths_and_queries_that_are_not_utf8_are_400_on_every_route():
    env = create("root", "utf8-probe")["id"]
    for method, path in (("GET", E + "/%ff"), ("PUT", E + "/%ff"), ("DELETE", E + "/%ff"),
                         ("GET", E + "/%c3%28/suggestions"), ("GET", E + "/%ff/suggestions"),
                         ("POST", E + "/%ff/set-default"), ("GET", "/api/v1/users/%ff"),
                         ("DELETE", "/api/v1/tokens/%ff"), ("DELETE", "/api/v1/clients/%ff"),
                         ("GET", "/api/v1/repos/a/b/members/%ff"), ("GET", "/api/v1/repos/%ff/b"),
                         ("GET", "/api/v1/jobs/%ff"), ("GET", "/api/v1/schedules/%ed%a0%80"),
                         ("GET", "/api/v1/resolve?repo=a/b&environment=%ff"),
                         ("GET", "/api/v1/audit?host=%ff"), ("GET", E + "?x=%e2%82"),
                         ("GET", "/api/v1/%ff")):
        status, _, body = get_raw(method, path, "root")
        doc = json.loads(body)
        assert status == 400 and "UTF-8" in doc["message"], (method, path, status, body)
    # Valid UTF-8 still reaches its route: a name that does not exist is a 404.
    expect(call("GET", E + "/%C3%A9t%C3%A9", who="root"), 404, "a UTF-8 name")
    expect(call("GET", E + "/" + env, who="root"), 200, "the probe")


def test_jobs_list_limit_is_digits_only():
    # limit is a whole number from 1 to 500 (api.md §5.5): white space and a sign are no part of
    # one ("+5" is " 5" in a query, which was taken as 5).
    for q in ("limit=-18446744073709551615", "limit=+5", "limit=%205", "limit=-0", "limit=0x5",
              "limit=5%20", "limit=501", "limit="):
        doc = expect(call("GET", "/api/v1/jobs?" + q, who="alice"), 422, q)
        assert [e["field"] for e in doc["errors"]] == ["limit"], doc
    expect(call("GET", "/api/v1/jobs?limit=500", who="alice"), 200, "limit=500")
    expect(call("GET", "/api/v1/jobs?limit=05", who="alice"), 200, "limit=05")


# Every documented route with its methods (docs/reference/api.md, the table at the top; a route
# that takes GET takes HEAD), and methods it does not have: each of those is 405 with Allow
# naming exactly the route's.
ROUTES_405 = [
    ("/healthz", "GET, HEAD", ("POST", "DELETE")),
    ("/readyz", "GET, HEAD", ("POST", "PUT")),
    ("/api/v1/status", "GET, HEAD", ("DELETE", "POST", "PUT", "PATCH")),
    ("/api/v1/me", "GET, HEAD", ("POST", "DELETE")),
    ("/api/v1/sandboxes", "GET, HEAD", ("POST",)),
    ("/api/v1/overview", "GET, HEAD", ("POST",)),
    ("/api/v1/audit", "GET, HEAD", ("POST",)),
    ("/api/v1/audit/refusals", "GET, HEAD", ("DELETE",)),
    (E, "GET, HEAD, POST", ("DELETE", "PATCH")),
    (E + "/m405", "GET, HEAD, PUT, DELETE", ("POST", "PATCH")),
    (E + "/m405/set-default", "POST", ("GET",)),
    (E + "/m405/observe", "POST, DELETE", ("GET",)),
    (E + "/m405/suggestions", "GET, HEAD", ("POST",)),
    (E + "/m405/suggestions/apply", "POST", ("GET",)),
    ("/api/v1/clients", "GET, HEAD, POST", ("PUT",)),
    ("/api/v1/clients/CLIENT", "DELETE", ("GET",)),
    ("/api/v1/resolve", "GET, HEAD", ("POST",)),
    ("/api/v1/repos", "GET, HEAD", ("POST",)),
    ("/api/v1/jobs", "GET, HEAD, POST", ("DELETE",)),
    ("/api/v1/jobs/00000000-0000-4000-8000-000000000000", "GET, HEAD", ("DELETE",)),
    ("/api/v1/schedules", "GET, HEAD, POST", ("DELETE",)),
    ("/api/v1/schedules/00000000-0000-4000-8000-000000000000", "GET, HEAD, PUT, DELETE", ("POST",)),
    ("/api/v1/schedules/preview", "GET, HEAD", ("POST",)),
    ("/api/v1/users", "GET, HEAD, POST", ("DELETE",)),
    ("/api/v1/users/alice", "GET, HEAD, PATCH", ("DELETE", "POST")),
    ("/api/v1/tokens", "GET, HEAD, POST", ("DELETE",)),
    ("/api/v1/tokens/TOKEN", "DELETE", ("GET",)),
    # From the route table, before the route looks a name up: the same answer whether the
    # environment, the job, the repository or the member exists or not.
    (E + "/no-such-env", "GET, HEAD, PUT, DELETE", ("PATCH", "POST", "OPTIONS")),
    (E + "/no-such-env/observe", "POST, DELETE", ("GET", "PATCH")),
    (E + "/no-such-env/set-default", "POST", ("PUT",)),
    ("/api/v1/jobs/not-a-job", "GET, HEAD", ("PATCH", "DELETE")),
    ("/api/v1/repos/acme/m405", "GET, HEAD, PUT, DELETE", ("POST", "PATCH")),
    ("/api/v1/repos/acme/m405/members", "GET, HEAD", ("POST", "PUT", "DELETE")),
    ("/api/v1/repos/acme/m405/members/alice", "GET, HEAD, PUT, DELETE", ("POST", "PATCH")),
    ("/api/v1/repos/acme/m405/sandboxes", "GET, HEAD, POST", ("PUT", "DELETE")),
    ("/api/v1/repos/acme/m405/sandboxes/sb_0123456789abcdef/exec", "POST", ("GET", "DELETE")),
    ("/mcp", "POST", ("GET", "DELETE")),
    ("/dashboard/", "GET, HEAD", ("POST", "DELETE")),
]


def test_every_route_answers_405_with_allow_to_a_method_it_does_not_have():
    create("root", "m405")
    client = expect(call("POST", "/api/v1/clients",
                         {"id": "m405-client", "ip": "10.9.9.9", "environment": "m405"}, "root"),
                    201, "client")
    tok = expect(call("POST", "/api/v1/tokens", {"name": "m405", "scope": "read"}, "root"), 201,
                 "token")
    for path, allow, methods in ROUTES_405:
        path = path.replace("CLIENT", client["id"]).replace("TOKEN", tok["id"])
        for method in methods:
            status, fields, body = get_raw(method, path, "root")
            assert status == 405, (method, path, status, body)
            assert fields.get("allow") == [allow], (method, path, fields)
            if method == "HEAD" or path == "/mcp" or path.startswith("/dashboard"):
                continue
            # The message names the same methods: "use GET, PUT or DELETE".
            names = [m for m in allow.split(", ") if m != "HEAD"]
            want = "use " + (", ".join(names[:-1]) + " or " if len(names) > 1 else "") + names[-1]
            assert json.loads(body) == {"message": want}, (method, path, body, want)
    # No route ends in a slash: an empty last name is no resource, whatever the method (it was a
    # route's own 405, without Allow).
    for method, path in (("PATCH", "/api/v1/schedules/"), ("GET", "/api/v1/schedules/"),
                         ("GET", "/api/v1/repos/acme/m405/sandboxes/sb_0123456789abcdef/"),
                         ("POST", "/api/v1/repos/acme/m405/sandboxes/sb_0123456789abcdef/"),
                         ("DELETE", "/api/v1/tokens/"), ("GET", E + "/")):
        status, fields, body = get_raw(method, path, "root")
        assert status == 404 and json.loads(body) == {"message": "no such resource"}, \
            (method, path, status, body)
    expect(call("DELETE", "/api/v1/clients/m405-client", who="root"), 204, "client deleted")


def test_head_is_get_without_the_body_on_every_get_route():
    # RFC 9110 §9.3.2: the same status and fields as GET, Content-Length included, no body.
    for path in ("/healthz", "/readyz", "/api/v1/me", "/api/v1/status", "/api/v1/repos", E,
                 "/api/v1/nope"):
        gs, gf, gbody = get_raw("GET", path, "root")
        hs, hf, hbody = get_raw("HEAD", path, "root")
        assert hs == gs and hbody == b"", (path, gs, hs, hbody)
        if path not in ("/api/v1/status", "/readyz"):   # these two change from call to call
            assert hf.get("content-length") == [str(len(gbody))], (path, hf, len(gbody))
        assert hf.get("content-type") == gf.get("content-type"), (path, hf, gf)
    # Without a token: the GET's 401, with its WWW-Authenticate.
    hs, hf, hbody = get_raw("HEAD", "/api/v1/me")
    assert hs == 401 and hbody == b"" and "www-authenticate" in hf, (hs, hf)
    # A route without GET has no HEAD either.
    hs, hf, _ = get_raw("HEAD", E + "/x/set-default", "root")
    assert hs == 405 and hf.get("allow") == ["POST"], (hs, hf)
    # A read-scoped token may HEAD what it may GET.
    tok = expect(call("POST", "/api/v1/tokens", {"name": "head-read", "scope": "read"}, "root"),
                 201, "token")
    hs, _, _ = raw("HEAD /api/v1/me HTTP/1.1\nHost: x\nAuthorization: Bearer %s\n" % tok["token"])
    assert hs == 200, hs


def test_the_dashboards_answers_all_carry_its_security_headers():
    want = ("content-security-policy", "x-content-type-options", "x-frame-options",
            "referrer-policy")
    for method, path, status in (("GET", "/dashboard/", 200), ("GET", "/dashboard", 308),
                                 ("POST", "/dashboard/", 405), ("GET", "/dashboard/nope", 404),
                                 ("HEAD", "/dashboard/app.js", 200)):
        got, fields, body = get_raw(method, path)
        assert got == status, (method, path, got)
        for name in want:
            assert len(fields.get(name, [])) == 1, (method, path, name, fields)
        assert fields["x-content-type-options"] == ["nosniff"], fields
        if status >= 400:
            assert fields["content-type"] == ["application/json"], (path, fields)
            assert "message" in json.loads(body), body
    assert get_raw("GET", "/dashboard")[1]["location"] == ["/dashboard/"]


def test_a_request_without_host_or_with_a_repeated_field_is_400():
    status, _, body = raw("GET /api/v1/me HTTP/1.1\nAuthorization: Bearer %s\n" % tokens["root"])
    assert status == 400 and "Host" in json.loads(body)["message"], (status, body)
    # HTTP/1.0 has no Host to require.
    assert raw("GET /healthz HTTP/1.0\n")[0] == 200
    auth = "Authorization: Bearer %s\n" % tokens["root"]
    for extra, name in (("Host: y\n", "Host"), (auth, "Authorization"),
                        ("Authorization: Bearer sl_x\n", "Authorization"),
                        ("Content-Type: application/json\nContent-Type: text/plain\n",
                         "Content-Type"),
                        ("Origin: http://a\nOrigin: http://b\n", "Origin"),
                        ("Content-Length: 2\nContent-Length: 2\n", "Content-Length")):
        status, _, body = raw("POST %s HTTP/1.1\nHost: x\n%s%s" % (E, auth, extra), b"{}")
        assert status == 400, (name, status, body)
        assert name in json.loads(body)["message"], (name, body)


def test_an_unknown_method_is_501_json():
    for method in ("FOO", "get", "BREW"):
        status, fields, body = get_raw(method, "/api/v1/me", "root")
        assert status == 501, (method, status, body)
        assert json.loads(body) == {"message": "method not implemented"}, body
    # A method the parser knows but the route does not have is the route's 405.
    status, fields, _ = get_raw("PROPFIND", "/api/v1/me", "root")
    assert status == 405 and fields["allow"] == ["GET, HEAD"], (status, fields)


def test_api_answers_are_never_stored():
    cases = [("POST", "/api/v1/tokens", "root", 201), ("GET", "/api/v1/me", "root", 200),
             ("GET", "/api/v1/me", None, 401), ("GET", "/api/v1/nope", "root", 404),
             ("DELETE", "/api/v1/status", "root", 405), ("GET", "/healthz", None, 200),
             ("GET", "/readyz", None, 200), ("GET", "/mcp", "root", 405),
             ("POST", "/mcp", "root", 400), ("FOO", "/api/v1/me", "root", 501)]
    for method, path, who, want in cases:
        extra = ""
        body = b""
        if method == "POST":
            body = b'{"name":"no-store","scope":"read"}' if path != "/mcp" else b"{"
            extra = "Content-Type: application/json\nAccept: application/json, " \
                    "text/event-stream\nContent-Length: %d\n" % len(body)
        auth = "Authorization: Bearer %s\n" % tokens[who] if who is not None else ""
        status, fields, text = raw("%s %s HTTP/1.1\nHost: x\n%s%s" % (method, path, auth, extra),
                                   body)
        assert status == want, (method, path, status, text)
        assert fields.get("cache-control") == ["no-store"], (method, path, fields)
        assert fields.get("x-content-type-options") == ["nosniff"], (method, path, fields)
        if path == "/api/v1/tokens":
            assert json.loads(text)["token"].startswith("sl_"), text


TESTS = [
    test_user_add_prints_one_token_and_refuses_a_taken_name,
    test_health_needs_no_token,
    test_no_token_or_unknown_token_is_401,
    test_status_reports_the_version,
    test_paths_and_queries_that_are_not_utf8_are_400_on_every_route,
    test_every_route_answers_405_with_allow_to_a_method_it_does_not_have,
    test_the_dashboards_answers_all_carry_its_security_headers,
    test_a_request_without_host_or_with_a_repeated_field_is_400,
    test_an_unknown_method_is_501_json,
    test_api_answers_are_never_stored,
    test_user_cannot_write_global_environments,
    test_user_cannot_see_another_users_environment,
    test_admin_can_do_everything,
    test_create_get_list_put_delete,
    test_names_are_unique_per_scope_and_owner,
    test_one_global_default_and_delete_default_is_409,
    test_network_on_deny_without_rules_is_422,
    test_network_off_stores_no_egress,
    test_env_var_names_and_100_entries,
    test_at_most_100_rules,
    test_secrets_are_masked_and_kept_on_resave,
    test_credentials_are_never_returned,
    test_passthrough_rules_round_trip_and_refuse_methods_or_credentials,
    test_host_patterns_are_checked_and_normalised_with_warnings,
    test_repository_conflict_names_the_other_environment,
    test_same_repo_in_user_and_global_environment,
    test_invalid_json_400_unknown_field_422,
    test_body_over_64_mib_is_413,
    test_bodies_only_from_callers_with_a_token,
    test_bearer_scheme_is_case_insensitive,
    test_sql_metacharacters_are_stored_verbatim,
    test_resolve_every_matched_by,
    test_jobs_list_limit_is_digits_only,
    test_static_clients_admin_only_token_shown_once,
    test_audit_filters_keep_only_matching_lines,
    test_audit_scan_is_bounded_and_says_so,
    test_audit_refusals_are_grouped_with_the_rule_to_apply,
    test_restart_keeps_everything,
    test_corrupt_database_refuses_to_start,
    test_missing_key_is_a_clear_error,
    test_resolve_none_on_a_fresh_database,
    test_snapshots_reach_the_proxy,
]


def main():
    failed = 0
    try:
        for name, admin in (("alice", False), ("bob", False), ("carol", False), ("root", True)):
            user_add(name, admin)
        start()
        for t in TESTS:
            try:
                t()
                print("ok - " + t.__name__)
            except Exception as e:  # one failure must not hide the others
                failed += 1
                print("not ok - %s: %r" % (t.__name__, e))
        stop()
    finally:
        if state["proc"] is not None and state["proc"].poll() is None:
            state["proc"].kill()
        if failed:
            with open(os.path.join(WORK, "control.log"), "rb") as f:
                sys.stdout.write(f.read().decode(errors="replace")[-4000:])
        shutil.rmtree(WORK, ignore_errors=True)
    print("%d checks, %d failed" % (len(TESTS), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
