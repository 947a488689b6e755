#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_refusals.sh - refusals real clients can show (docs/reference/proxy.md
# §4.5). pip, npm and git print a refused CONNECT's status line at most; so a CONNECT to port 443
# or 80 that an identified client's environment refuses for its host or port gets its tunnel, and
# the first request inside gets the 403 with X-Sluice-Reason and the body that says what would
# allow it: pip, npm, git and curl each show the reason, nothing is dialled, one audit line.
# Kept at the CONNECT: a client that has not identified itself (407), a host a passthrough rule
# names, any other port; a tunnel whose first bytes are not TLS is closed with that one line.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup

D=denied.sluice.test
tok=sl-$(fx_random_hex 16)
policy=$FX_WORK/policy.json
fx_policy "$policy" "{
  \"version\": 1,
  \"environments\": {
    \"dev\": { \"default\": \"deny\", \"rules\": [
      { \"host\": \"port.sluice.test:8443\" },
      { \"host\": \"pinned.sluice.test:8443\", \"tls\": \"passthrough\" } ] },
    \"tok\": { \"default\": \"deny\" } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"dev\" },
                 { \"id\": \"bytoken\", \"token\": \"$tok\", \"environment\": \"tok\" } ]
}"
fx_proxy_start --policy "$policy" --workers 1 || fx_bail "sluice proxy starts"
ok "sluice proxy starts"
P=http://127.0.0.1:$FX_PROXY_PORT
CA=$FX_SLUICE_CA
# The clients trust the sluice CA and nothing else, whatever this machine's environment says.
clean=(env -u SSL_CERT_DIR -u NODE_EXTRA_CA_CERTS -u PIP_FIND_LINKS -u PIP_CONFIG_FILE
  SSL_CERT_FILE="$CA" REQUESTS_CA_BUNDLE="$CA" PIP_CERT="$CA" CURL_CA_BUNDLE="$CA"
  GIT_SSL_CAINFO="$CA" HTTPS_PROXY="$P" https_proxy="$P" HOME="$FX_WORK")
metric() {
  fx_admin GET /metrics
  awk -v k="$1" '$1 == k { print $2 }' "$FX_ADMIN_BODY"
}
# has TEXT PART : TEXT contains PART (no pattern characters).
# shellcheck disable=SC2317 # called through check
has() { [[ $1 == *"$2"* ]]; }
# lines COND... : audit lines that satisfy every COND, once the writer caught up.
lines() {
  sleep 0.3
  fx_jsonl_count "$FX_AUDIT" "$@"
}
hint="to allow it, add {\"host\":\"$D\",\"methods\":[\"GET\"]} to environment dev"

# --- (1) curl ----------------------------------------------------------------------------------
n0=$(lines host=$D)
fx_curl "https://$D/x?probe=1"
check_eq "curl: the CONNECT is answered 200, the request inside 403 host-not-allowed" \
  "$FX_CONNECT_CODE $FX_CODE $(fx_reason)" "200 403 host-not-allowed"
check_eq "curl: the body says who refused it and what would allow it" "$(cat "$FX_BODY")" \
  "sluice: GET https://$D/x denied: host-not-allowed (client local, environment dev); $hint"
check_match "curl: the status line names the proxy and the reason" \
  "$(grep '^HTTP/1.1 403' "$FX_HDRS" | tr -d '\r')" '^HTTP/1.1 403 Forbidden \(sluice: host-not-allowed\)$'
check_eq "curl: one audit line, the request's (GET /x, 403, host-not-allowed)" \
  "$(lines host=$D) $(lines host=$D method=GET path=/x status=403 decision=deny \
    reason=host-not-allowed client=local environment=dev port=443)" "$((n0 + 1)) 1"

# --- (2) pip, npm, git ------------------------------------------------------------------------
if "$FX_PYTHON" -m pip --version >/dev/null 2>&1; then
  out=$(cd "$FX_WORK" && timeout 60 "${clean[@]}" "$FX_PYTHON" -m pip download --isolated \
    --no-deps --retries 0 --timeout 10 -vv --index-url "https://$D/simple/" -d "$FX_WORK/dl" \
    sluice-probe 2>&1 || true)
  check_match "pip (-vv): says the index answered 403 host-not-allowed, from sluice" "$out" \
    "Could not fetch URL https://$D/simple/sluice-probe/: 403 Client Error: Forbidden \\(sluice: host-not-allowed\\)"
  check_eq "pip: one audit line per request it made" \
    "$(lines host=$D method=GET path=/simple/sluice-probe/ status=403)" 1
else
  not_ok "pip shows the refusal: $FX_PYTHON -m pip is not installed (tools/deps.sh test installs python3-pip)"
fi
if command -v npm >/dev/null; then
  out=$(cd "$FX_WORK" && timeout 60 "${clean[@]}" npm view sluice-probe --registry "https://$D/" \
    --https-proxy "$P" --proxy "$P" --cafile "$CA" --fetch-retries 0 \
    --cache "$FX_WORK/npm-cache" 2>&1 || true)
  check_match "npm: shows 403 with the proxy and the reason" "$out" \
    "403 Forbidden \\(sluice: host-not-allowed\\) - GET https://$D/sluice-probe"
else
  fx_skip "npm shows the refusal" "npm is not installed"
fi
if command -v git >/dev/null; then
  out=$(cd "$FX_WORK" && timeout 60 "${clean[@]}" git -c "http.proxy=$P" \
    ls-remote "https://$D/x" 2>&1 || true)
  check "git: shows the body, the hint included" has "$out" \
    "remote: sluice: GET https://$D/x/info/refs denied: host-not-allowed (client local, environment dev); $hint"
else
  fx_skip "git shows the refusal" "git is not installed"
fi

# --- (2b) port 80: plain HTTP in the tunnel gets it too ---------------------------------------
out=$(fx_pc --connect "$D:80" --no-tls --raw "GET /y?probe=p80 HTTP/1.1\\r\\nHost: $D\\r\\n\\r\\n" \
  --eof-wait 5)
check_eq "CONNECT $D:80, then plain HTTP: 403 host-not-allowed inside, then closed" \
  "$out" "connect=200 tls=none status=403 reason=host-not-allowed eof"
check_eq "... one line, the request's (scheme http)" \
  "$(lines host=$D port=80) $(lines host=$D port=80 method=GET scheme=http path=/y status=403)" "1 1"

# --- (3) the port: refused for its port, held; a port that is neither 443 nor 80: at the CONNECT -
fx_curl "https://port.sluice.test/p?probe=3"
check_eq "port-not-allowed on 443 (the host has a rule for 8443): answered inside" \
  "$FX_CONNECT_CODE $FX_CODE $(fx_reason)" "200 403 port-not-allowed"
check_match "... with the hint for the port" "$(cat "$FX_BODY")" \
  'to allow it, add \{"host":"port.sluice.test","methods":\["GET"\]\} to environment dev$'
fx_curl "https://$D:8443/x?probe=3b"
check_eq "a host refused on port 8443: the CONNECT's own 403" \
  "$FX_CONNECT_CODE $FX_CODE $(fx_reason)" "403 403 host-not-allowed"
check_eq "... one line, the CONNECT's" "$(lines host=$D port=8443 method=CONNECT status=403)" 1

# --- (4) kept at the CONNECT: no identity, a passthrough host -------------------------------
fx_curl --proxy-user "bytoken:wrong" "https://$D/x?probe=4"
check_eq "no identity (a token client with a wrong token): 407 at the CONNECT" \
  "$FX_CONNECT_CODE $(fx_reason)" "407 no-identity"
fx_curl --proxy-user "bytoken:$tok" "https://$D/x?probe=4b"
check_eq "an identified token client refused for the host: answered inside" \
  "$FX_CONNECT_CODE $FX_CODE $(fx_reason)" "200 403 host-not-allowed"
fx_curl "https://pinned.sluice.test/x?probe=5"
check_eq "a host a passthrough rule names (on another port): 403 at the CONNECT, never intercepted" \
  "$FX_CONNECT_CODE $(fx_reason)" "403 port-not-allowed"

# --- (5) the tunnel ends before a request: its one line is the CONNECT's refusal -------------
n0=$(lines host=$D)
out=$(fx_pc --connect "$D:443" --no-tls --raw 'SSH-2.0-probe\r\n' --responses 0 --eof-wait 5)
check_eq "not TLS in a tunnel opened for a refusal: closed" "$out" "connect=200 tls=none eof"
out=$(fx_pc --connect "$D:443" --raw '' --responses 0 --eof-wait 1)
check_eq "a TLS handshake, then nothing: the proxy waits (idle)" "$out" "connect=200 tls=ok open"
check_eq "... each had exactly one line: the CONNECT, host-not-allowed, status 0" \
  "$(lines host=$D) $(lines host=$D method=CONNECT status=0 reason=host-not-allowed decision=deny)" \
  "$((n0 + 2)) 2"

# --- (6) nothing was ever dialled -----------------------------------------------------------
check_eq "no upstream connection was made for any of it" \
  "$(metric sluice_upstream_connections_total)" 0

check "the proxy is still running" fx_proxy_alive
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
