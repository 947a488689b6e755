#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_policy.sh - changing the policy of a running `sluice proxy` (docs/reference/snapshot.md
# §3, docs/reference/proxy.md §4.8, §4.9): the --policy file reloaded when it changes and on SIGHUP, decided per
# request even on a tunnel opened before the change; a broken file keeps the old policy; the
# admin socket (0600) swaps snapshots with version rules (older 409, identical 200) and reports
# status and metrics.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx

# snapshot VERSION NAME... : a policy allowing NAME.sluice.test on nginx's TLS port, for 127/8.
snapshot() {
  local version=$1 h sep="" rules=""
  shift
  for h in "$@"; do
    rules+="$sep{ \"host\": \"$h.sluice.test:$FX_TLS_PORT\" }"
    sep=", "
  done
  printf '{ "version": %s,\n  "environments": { "pol": { "default": "deny", "rules": [ %s ] } },\n  "clients": [ { "id": "local", "cidr": "127.0.0.0/8", "environment": "pol" } ] }\n' \
    "$version" "$rules"
}

# get_code NAME CODE : a fresh request to NAME.sluice.test gets CODE.
# wait_code SECONDS NAME CODE : fresh requests until one gets CODE (bounded).
# shellcheck disable=SC2317 # called through check
get_code() {
  fx_curl --max-time 5 "https://$1.sluice.test:$FX_TLS_PORT/hello"
  [ "$FX_CODE" = "$2" ]
}
# shellcheck disable=SC2317
wait_code() {
  local secs=$1 i
  for ((i = 0; i < secs * 2; i++)); do
    if get_code "$2" "$3"; then return 0; fi
    sleep 0.5
  done
  return 1
}

fx_resolve a.sluice.test b.sluice.test
common=(--upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}")

# --- (11) reloading the --policy file ---------------------------------------------------------
policy=$FX_WORK/policy.json
fx_policy "$policy" "$(snapshot 1 a b)"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$policy' >/dev/null"
fx_proxy_start --policy "$policy" "${common[@]}" || fx_bail "sluice proxy starts with --policy"
ok "sluice proxy starts with --policy"

check "a tunnel to a.sluice.test opens" \
  fx_client_open t1 --connect "a.sluice.test:$FX_TLS_PORT" --header 'X-Probe: t1'
check_match "request 1 on the tunnel: 200" "$(fx_client_send t1 'GET /hello')" '^status=200 '
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "b.sluice.test: 200 under version 1" 200 -

# The file changes (written to a temporary file and renamed, as tools do): a is removed.
sleep 1.1 # a new mtime second, for a proxy that compares mtimes
fx_policy "$policy" "$(snapshot 2 b)"
check "the changed file is picked up without a signal (a new request to a gets 403, <= 10 s)" \
  wait_code 10 a 403
check_status "... 403 host-not-allowed" 403 host-not-allowed
check_match "request 2 on the tunnel opened under version 1: 403 host-not-allowed" \
  "$(fx_client_send t1 'GET /hello')" '^status=403 reason=host-not-allowed '
check_eq "nginx saw only the tunnel's first request" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=t1)" 1
check_audit "the audit line of the refusal names version 2" \
  decision=deny reason=host-not-allowed host=a.sluice.test policy_version=2
fx_client_close t1
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "b.sluice.test: still 200 under version 2" 200 -

# SIGHUP: the file is rewritten in place with its old mtime (so only the signal says it changed).
mtime_ref=$FX_WORK/mtime.ref
touch -r "$policy" "$mtime_ref"
snapshot 3 a b >"$policy"
touch -r "$mtime_ref" "$policy"
kill -HUP "$FX_PROXY_PID" 2>/dev/null || true
check "SIGHUP reloads the file (a gets 200 again, <= 10 s)" wait_code 10 a 200
check "the proxy survives SIGHUP" fx_proxy_alive
check "a new tunnel to a.sluice.test opens under version 3" \
  fx_client_open t2 --connect "a.sluice.test:$FX_TLS_PORT"
check_match "a request on it: 200" "$(fx_client_send t2 'GET /hello')" '^status=200 '

# A broken file keeps the policy that is loaded; the log says why.
log_before=$(wc -c <"$FX_PROXY_LOG")
sleep 1.1
printf '{ "version": 4, "environments": ' >"$policy" # truncated JSON
kill -HUP "$FX_PROXY_PID" 2>/dev/null || true
sleep 2
check "broken file: the proxy is still running" fx_proxy_alive
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "broken file: version 3 still applies (a 200)" 200 -
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "broken file: version 3 still applies (b 200)" 200 -
check_match "broken file: the open tunnel still passes" "$(fx_client_send t2 'GET /hello')" \
  '^status=200 '
tail -c +"$((log_before + 1))" "$FX_PROXY_LOG" >"$FX_WORK/log.after-broken"
check "broken file: the proxy log reports the error" \
  grep -qiE 'error|invalid|fail|reject|refus' "$FX_WORK/log.after-broken"

# A well-formed snapshot that fails validation (an unknown field) is refused the same way.
sleep 1.1
snapshot 5 b | sed 's/"default": "deny"/"default": "deny", "defualt": "allow"/' >"$policy"
kill -HUP "$FX_PROXY_PID" 2>/dev/null || true
sleep 2
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "invalid snapshot: version 3 still applies (a 200)" 200 -

# And a good file after the broken ones is loaded again.
sleep 1.1
fx_policy "$policy" "$(snapshot 6 b)"
kill -HUP "$FX_PROXY_PID" 2>/dev/null || true
check "a valid file after broken ones is loaded (a gets 403, <= 10 s)" wait_code 10 a 403
check_match "the open tunnel follows it: 403" "$(fx_client_send t2 'GET /hello')" '^status=403 '
fx_client_close t2
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop

# --- (12) the admin socket --------------------------------------------------------------------
fx_proxy_start "${common[@]}" || fx_bail "sluice proxy starts without --policy"
check "the admin socket exists" fx_wait 10 test -S "$FX_ADMIN_SOCK"
check_eq "the admin socket has mode 0600" "$(stat -c '%a' "$FX_ADMIN_SOCK" 2>/dev/null)" 600

fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "before any snapshot: 503 no-policy" 503 no-policy

put() { # put FILE : PUT /v1/snapshot with FILE's bytes
  fx_admin PUT /v1/snapshot --data-binary @"$1" -H 'Content-Type: application/json'
}
snapshot 5 a >"$FX_WORK/v5.json"
put "$FX_WORK/v5.json"
check_eq "PUT version 5: 200" "$FX_CODE" 200
check_eq "PUT version 5: {\"version\":5}" "$(fx_json "$FX_ADMIN_BODY" 'd["version"]')" 5
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "version 5 applies at once: a 200" 200 -
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "version 5 applies at once: b 403 host-not-allowed" 403 host-not-allowed

snapshot 4 a b >"$FX_WORK/v4.json"
put "$FX_WORK/v4.json"
check_eq "PUT an older version (4): 409" "$FX_CODE" 409
check "... with a JSON error" test -n "$(fx_json "$FX_ADMIN_BODY" 'd["error"]')"
put "$FX_WORK/v5.json"
check_eq "PUT version 5 again, byte-identical: 200" "$FX_CODE" 200
check_eq "... {\"version\":5}" "$(fx_json "$FX_ADMIN_BODY" 'd["version"]')" 5
snapshot 5 a b >"$FX_WORK/v5b.json"
put "$FX_WORK/v5b.json"
check_eq "PUT version 5 with different bytes: 409" "$FX_CODE" 409
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "the refused pushes changed nothing: b still 403" 403 host-not-allowed

snapshot 7 a | sed 's/"host"/"hots"/' >"$FX_WORK/bad.json"
put "$FX_WORK/bad.json"
check_match "PUT an invalid snapshot: 4xx" "$FX_CODE" '^4[0-9][0-9]$'
check_match "... {\"error\":..., \"path\":\"\$...\"}" \
  "$(fx_json "$FX_ADMIN_BODY" 'd["path"] if d["error"] else ""')" '^\$'
printf '{ "version": 8, ' >"$FX_WORK/broken.json"
put "$FX_WORK/broken.json"
check_match "PUT broken JSON: 4xx" "$FX_CODE" '^4[0-9][0-9]$'
check "... with a JSON error" test -n "$(fx_json "$FX_ADMIN_BODY" 'd["error"]')"

check "a tunnel to a.sluice.test opens under version 5" \
  fx_client_open t3 --connect "a.sluice.test:$FX_TLS_PORT"
check_match "a request on it: 200" "$(fx_client_send t3 'GET /hello')" '^status=200 '
snapshot 6 b >"$FX_WORK/v6.json"
put "$FX_WORK/v6.json"
check_eq "PUT version 6 (b only): 200 {\"version\":6}" \
  "$FX_CODE $(fx_json "$FX_ADMIN_BODY" 'd["version"]')" "200 6"
check_match "the tunnel opened under version 5: next request 403" \
  "$(fx_client_send t3 'GET /hello')" '^status=403 reason=host-not-allowed '
fx_client_close t3
fx_curl "https://b.sluice.test:$FX_TLS_PORT/hello"
check_status "version 6: b 200" 200 -
check_audit "the audit line names policy_version 6" decision=allow host=b.sluice.test \
  policy_version=6

fx_admin GET /v1/status
check_eq "GET /v1/status: 200" "$FX_CODE" 200
check "GET /v1/status: JSON" test -n "$(fx_json "$FX_ADMIN_BODY" 'type(d).__name__')"
check "GET /v1/status: reports the loaded version, 6" \
  grep -qE '"[a-z_]*version[a-z_]*" *: *6([^0-9]|$)' "$FX_ADMIN_BODY"
fx_admin GET /metrics
check_eq "GET /metrics: 200" "$FX_CODE" 200
check "GET /metrics: Prometheus text" \
  grep -qE '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [0-9.e+-]+' "$FX_ADMIN_BODY"
check "SIGTERM stops the admin-socket proxy with exit 0" fx_proxy_stop

fx_done
