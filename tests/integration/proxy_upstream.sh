#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_upstream.sh - what `sluice proxy` dials and how (docs/reference/proxy.md §4.4): the
# upstream certificate is verified (wrong name, expired, untrusted CA -> 502 upstream-tls, every
# time, also after a session with the same address was cached), unreachable and silent
# upstreams (502/504), and addresses it must never dial: loopback without --allow-upstream,
# IP literals in any spelling, [::1], 169.254.169.254, --deny-upstream over --allow-upstream,
# and a wildcard listener or --deny-upstream (0.0.0.0:P) denied on every loopback address, and
# the proxy's own --admin-listen (also 0.0.0.0:P).
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup
fx_test_ca || fx_bail "the test CA"
# One more server with the good leaf that closes every connection after its response, so that
# each request through the proxy is a new upstream TLS connection (the pool keeps none).
close_port=$(fx_free_port)
FX_NGINX_EXTRA="
  server {
    listen 127.0.0.1:$close_port ssl;
    ssl_certificate $FX_PKI/good.pem;
    ssl_certificate_key $FX_PKI/good.key;
    keepalive_timeout 0;
    include $FX_WORK/nginx/common.conf;
  }"
FX_NGINX_EXTRA_PORTS=$close_port
fx_nginx_start || fx_bail "nginx starts"
fx_origin_start || fx_bail "the Python origin starts"
dead_port=$(fx_free_port) # nothing listens there
tls6_port=${FX_TLS6_PORT:-$FX_TLS_PORT}

# rules HOST PORT... : JSON rule objects for HOST on each PORT.
rules() {
  local h=$1 p sep=""
  shift
  for p in "$@"; do
    printf '%s{ "host": "%s:%s" }' "$sep" "$h" "$p"
    sep=", "
  done
}

policy=$FX_WORK/policy.json
fx_policy "$policy" "{
  \"version\": 1,
  \"environments\": { \"up\": { \"default\": \"deny\", \"rules\": [
    $(rules a.sluice.test "$FX_TLS_PORT" "$FX_WRONG_PORT" "$FX_EXPIRED_PORT" \
  "$FX_UNTRUSTED_PORT" "$FX_HTTP_PORT" "$FX_PY_TLS_PORT" "$dead_port" "$close_port"),
    $(rules other.example "$FX_TLS_PORT"),
    $(rules 127.0.0.1 "$FX_TLS_PORT" "$FX_HTTP_PORT"),
    $(rules '[::1]' "$tls6_port"),
    { \"host\": \"169.254.169.254\" } ] } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"up\" },
    { \"id\": \"second\", \"cidr\": \"127.0.0.2/32\", \"environment\": \"up\" } ]
}"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$policy' >/dev/null"
fx_resolve a.sluice.test other.example
resolve=("${FX_RESOLVE[@]}" --resolve "a.sluice.test:$dead_port:127.0.0.1"
  --resolve "a.sluice.test:$close_port:127.0.0.1")
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --upstream-timeout 3 "${resolve[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

# --- (5) upstream TLS verification ------------------------------------------------------------
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "a verified upstream (test CA via --upstream-ca): 200" 200 -
check_eq "... with nginx's body" "$(cat "$FX_BODY")" "hello from nginx"

bad_tls() { # bad_tls NAME PORT
  local name=$1 port=$2 try fails=0
  for try in 1 2 3; do
    fx_curl -H "X-Probe: $name-$try" "https://a.sluice.test:$port/hello"
    check_status "$name upstream certificate, try $try: 502 upstream-tls" 502 upstream-tls
    if [ "$FX_LAST" = 0 ] && [ ! -s "$FX_BODY" ]; then fails=1; fi
  done
  check_eq "$name: the 502 carries a body (the verification error)" "$fails" 0
  check_eq "$name: no request was ever sent to that upstream" \
    "$(fx_jsonl_count "$FX_NGINX_LOG" port="$port")" 0
  check_audit "$name: audit line with reason upstream-tls" \
    decision=error reason=upstream-tls host=a.sluice.test port="$port"
}
bad_tls "wrong-name" "$FX_WRONG_PORT"
bad_tls "expired" "$FX_EXPIRED_PORT"
bad_tls "untrusted-CA" "$FX_UNTRUSTED_PORT"

# The same address and port under another name: a TLS session cached for a.sluice.test must not
# let other.example skip the host name check (good.pem names *.sluice.test only).
for try in 1 2 3; do
  fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello?try=$try"
  check_status "session cache, try $try: a.sluice.test still 200" 200 -
  fx_curl -H "X-Probe: other-$try" "https://other.example:$FX_TLS_PORT/hello"
  check_status "session cache, try $try: other.example on the same address gets 502 upstream-tls" \
    502 upstream-tls
done
check_eq "session cache: nothing was sent for other.example" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe~other-)" 0

# Upstream TLS sessions are kept per client (proxy.md §4.4): the upstream cannot link two
# clients' connections by a resumed session. On the closing server every request is a new TLS
# connection; nginx logs whether it resumed one.
resumed() { # resumed PROBE : the "reused" field of the request with that X-Probe
  "$FX_PYTHON" -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("probe") == sys.argv[2]:
        print(r.get("reused", "?"))' "$FX_NGINX_LOG" "$1"
}
for step in local-1 local-2 second-1 second-2 local-3; do
  src=127.0.0.1
  case $step in second-*) src=127.0.0.2 ;; esac
  fx_curl --interface "$src" -H "X-Probe: scope-$step" "https://a.sluice.test:$close_port/hello"
  check_status "session scope: $step (from $src): 200" 200 -
done
check_eq "session scope: the first connection for client local runs in full" \
  "$(resumed scope-local-1)" .
check_eq "session scope: the next one for local resumes its session" "$(resumed scope-local-2)" r
check_eq "session scope: client second's first connection does not resume local's session" \
  "$(resumed scope-second-1)" .
check_eq "session scope: second's next connection resumes its own" "$(resumed scope-second-2)" r
check_eq "session scope: local still resumes its own" "$(resumed scope-local-3)" r
check_audit "session scope: the requests from 127.0.0.2 are client second's" \
  client=second host=a.sluice.test port="$close_port"

fx_curl "https://a.sluice.test:$dead_port/hello"
check_status "nothing listening upstream: 502 upstream-unreachable" 502 upstream-unreachable
fx_curl --max-time 15 "https://a.sluice.test:$FX_PY_TLS_PORT/stall?ms=8000"
check_status "an upstream silent past --upstream-timeout 3: 504 upstream-timeout" \
  504 upstream-timeout

check "SIGTERM stops the proxy with exit 0" fx_proxy_stop

# --- (6) addresses that are never dialled without --allow-upstream -----------------------------
apolicy=$FX_WORK/allow-all.json
fx_policy "$apolicy" "{
  \"version\": 1,
  \"environments\": { \"open\": { \"default\": \"allow\", \"rules\": [] } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"open\" } ]
}"
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" "${resolve[@]}" ||
  fx_bail "sluice proxy starts without --allow-upstream"

refused() { # refused DESCRIPTION URL [curl args]: private-address, answered within 5 s
  local what=$1 url=$2
  shift 2
  fx_curl --max-time 5 "$@" "$url"
  check_refused "$what" private-address
}
refused "loopback origin by name, no --allow-upstream: private-address" \
  "https://a.sluice.test:$FX_TLS_PORT/hello" -H 'X-Probe: priv-name'
refused "plain HTTP to a loopback origin by name: private-address" \
  "http://a.sluice.test:$FX_HTTP_PORT/hello" -H 'X-Probe: priv-plain'
refused "https://127.0.0.1:PORT/ as a literal target: private-address" \
  "https://127.0.0.1:$FX_TLS_PORT/hello" -H 'X-Probe: priv-literal'
refused "https://[::1]:PORT/ as a literal target: private-address" \
  "https://[::1]:$tls6_port/hello" -H 'X-Probe: priv-v6'
check_eq "none of those reached nginx" "$(fx_jsonl_count "$FX_NGINX_LOG" probe~priv-)" 0
check_audit "audit line with reason private-address" decision=deny reason=private-address
refused "http://169.254.169.254/ (metadata address): private-address" \
  "http://169.254.169.254/latest/meta-data/"
refused "https://169.254.169.254/ (metadata address): private-address" \
  "https://169.254.169.254/latest/meta-data/"

check "SIGTERM stops that proxy with exit 0" fx_proxy_stop

# IP literals in other spellings, under a policy that allows every host: only the address
# check stands between them and the loopback. Sent raw (curl would normalise them).
fx_proxy_start --policy "$apolicy" --upstream-ca "$FX_TEST_CA" ||
  fx_bail "sluice proxy starts with a default-allow policy"
for host in 127.0.0.1 2130706433 0x7f.1 0177.0.0.1 127.1 '[::ffff:127.0.0.1]' '[::ffff:7f00:1]' \
  '[::1]'; do
  out=$(fx_pyclient --absolute "http://$host:$FX_HTTP_PORT/hello" --header "X-Probe: spell" \
    --timeout 5 2>&1 | head -n 1) || true
  check_match "http://$host:PORT/ (sent raw) is refused: private-address" "$out" \
    "^status=[45][0-9][0-9] reason=private-address "
done
check_eq "no spelling reached nginx" "$(fx_jsonl_count "$FX_NGINX_LOG" probe=spell)" 0
check "SIGTERM stops the default-allow proxy with exit 0" fx_proxy_stop

# --- --deny-upstream wins over --allow-upstream ------------------------------------------------
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --deny-upstream "127.0.0.1:$FX_PY_TLS_PORT" "${resolve[@]}" ||
  fx_bail "sluice proxy starts with --deny-upstream"
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "--deny-upstream ADDR:PORT leaves other ports alone: 200" 200 -
fx_curl --max-time 5 "https://a.sluice.test:$FX_PY_TLS_PORT/hello?probe=denyup"
check_refused "--deny-upstream 127.0.0.1:PORT refuses that port despite --allow-upstream" \
  private-address
check_eq "the denied upstream never saw the request" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=denyup)" 0
check "SIGTERM stops the --deny-upstream proxy with exit 0" fx_proxy_stop

# --- the proxy never dials itself, also through a wildcard listener ------------------------------
# With --listen 0.0.0.0:P the proxy listens on every interface; 127.0.0.1:P is one of its own
# addresses and must be refused even though --allow-upstream covers loopback. (Only loopback
# is targeted: the check is that the proxy refuses, so nothing is ever sent elsewhere.)
wild_port=$(fx_free_port)
self_policy="$FX_WORK/self-policy.json"
fx_policy "$self_policy" '{ "version": 1, "environments": { "all": { "default": "allow" } },
  "clients": [ { "id": "local", "cidr": "127.0.0.0/8", "environment": "all" } ] }'
fx_proxy_start --policy "$self_policy" --allow-upstream 127.0.0.0/8 \
  --listen "0.0.0.0:$wild_port" || fx_bail "sluice proxy starts with a wildcard listener"
fx_curl --max-time 5 "http://127.0.0.1:$wild_port/self"
check_status "a wildcard listener's loopback address is the proxy's own: refused" \
  403 private-address
# It answers on every loopback address, not only on the interface's 127.0.0.1.
fx_curl --max-time 5 "http://127.0.0.2:$wild_port/self"
check_status "... and so is 127.0.0.2: refused" 403 private-address
check "SIGTERM stops the wildcard-listener proxy with exit 0" fx_proxy_stop

# --- nor its own admin listener (--admin-listen), also a wildcard one ---------------------------
# A client let out to it would hold the admin server's connections, which the control plane's
# pushes and lease renewals need. (The listener is reached directly first: it is there.)
pki=$FX_WORK/admin-pki
"$SLUICE_BIN" pki init "$pki" >>"$FX_WORK/pki.log" 2>&1 || fx_bail "sluice pki init"
"$SLUICE_BIN" pki issue "$pki" proxy p1 --ip 127.0.0.1 >>"$FX_WORK/pki.log" 2>&1 ||
  fx_bail "sluice pki issue (the proxy's admin certificate)"
admin_tls=(--admin-cert "$pki/proxy-p1.pem" --admin-key "$pki/proxy-p1.key"
  --admin-client-ca "$pki/ca.pem")
for listen in 127.0.0.1 0.0.0.0; do
  aport=$(fx_free_port)
  fx_proxy_start --policy "$self_policy" --allow-upstream 127.0.0.0/8 \
    --admin-listen "$listen:$aport" "${admin_tls[@]}" ||
    fx_bail "sluice proxy starts with --admin-listen $listen:P"
  check "control: the admin listener $listen:P accepts connections (direct)" \
    fx_port_open "$aport"
  for a in 127.0.0.1 127.0.0.2; do
    if [ "$listen" = 127.0.0.1 ] && [ "$a" = 127.0.0.2 ]; then continue; fi
    out=$(fx_pyclient --absolute "http://$a:$aport/v1/status" --timeout 5 2>&1 | head -n 1) || true
    check_match "--admin-listen $listen:P: http://$a:P/ is refused (private-address)" "$out" \
      "^status=403 reason=private-address "
  done
  check "SIGTERM stops the --admin-listen $listen:P proxy with exit 0" fx_proxy_stop
done

# --- a wildcard --deny-upstream (sluice up passes --control-listen 0.0.0.0:P as one) -----------
# A stand-in for a control plane on 0.0.0.0:P, which answers on every address of the host: the
# entry must deny all of them, not only the literal 0.0.0.0 that the class refuses anyway.
ctl_port=$(fx_free_port)
ctl_hits=$FX_WORK/ctl-hits
"$FX_PYTHON" - "$ctl_port" "$ctl_hits" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(16)
s.settimeout(1)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(2)
    try:
        got = c.recv(4096)
    except OSError:
        got = b""
    if got:  # the readiness probe connects and sends nothing
        with open(sys.argv[2], "a") as f:
            f.write("hit\n")
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 13\r\n\r\nfake control\n")
    c.close()
PY
FX_PIDS+=("$!")
fx_wait 5 fx_port_open "$ctl_port" || fx_bail "the stand-in control plane listens"
fx_proxy_start --policy "$self_policy" --allow-upstream 127.0.0.0/8 \
  --deny-upstream "0.0.0.0:$ctl_port" || fx_bail "sluice proxy starts with a wildcard deny"
for a in 127.0.0.1 127.0.0.2 '[::ffff:127.0.0.1]' 2130706433; do
  out=$(fx_pyclient --absolute "http://$a:$ctl_port/api/v1/status" --timeout 5 2>&1 |
    head -n 1) || true
  check_match "--deny-upstream 0.0.0.0:P refuses http://$a:P/ (sent raw)" "$out" \
    "^status=403 reason=private-address "
done
fx_curl --max-time 5 "http://127.0.0.1:$FX_HTTP_PORT/hello"
check_status "... and leaves other ports alone: 200" 200 -
check "the stand-in control plane was never reached" test ! -e "$ctl_hits"
check "SIGTERM stops the wildcard-deny proxy with exit 0" fx_proxy_stop

fx_done
