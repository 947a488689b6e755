#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_passthrough.sh - opt-in passthrough rules (`"tls": "passthrough"`,
# README "Policy") and long-lived relays decided again (SECURITY.md): a passthrough tunnel shows
# the origin's own certificate and carries the client's bytes untouched, while an intercepted
# host on the same proxy is still intercepted; SNI naming another host (host-mismatch), bytes
# that are not TLS (not-tls), plain HTTP under a passthrough rule (not-tls, never forwarded); a
# HelloRetryRequest from the origin, after which the second ClientHello must carry the first
# one's SNI (else host-mismatch, an illegal_parameter alert, nothing of it upstream), while
# 0-RTT early data still reaches the origin; one audit line per passthrough tunnel; a snapshot combining passthrough with methods or a
# credential refused with its JSON path (sluice policy check and the admin socket); open
# websocket relays and passthrough tunnels closed within a second of a snapshot that no longer
# allows them, and when their client's expires_at passes, while a relay still allowed stays.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup origin

P=pin.sluice.test   # passthrough
I=int.sluice.test   # intercepted
W=ws.sluice.test    # intercepted, for a websocket relay revoked later
PW=pinws.sluice.test # passthrough, for a tunnel turned to interception later
PT=$FX_PY_TLS_PORT
PH=$FX_PY_HTTP_PORT
# An origin that offers P-256 only: a client whose first ClientHello has an X25519 key share (or
# none) gets a HelloRetryRequest. -trace logs every handshake message it receives, line by line
# (-msgfile would buffer them).
SP=$(fx_free_port)
stdbuf -oL openssl s_server -accept "127.0.0.1:$SP" -groups P-256 -cert "$FX_PKI/good.pem" \
  -key "$FX_PKI/good.key" -www -trace </dev/null >"$FX_WORK/sserver.trace" 2>&1 &
FX_PIDS+=("$!")
fx_wait 10 fx_port_open "$SP" || fx_bail "openssl s_server (P-256 only) starts"
# An origin that takes TLS 1.3 early data and logs it. It reads its stdin: a FIFO this shell
# holds open, which never ends.
EP=$(fx_free_port)
mkfifo "$FX_WORK/edserver.in"
exec {ed_in}<>"$FX_WORK/edserver.in"
stdbuf -oL openssl s_server -accept "127.0.0.1:$EP" -tls1_3 -early_data \
  -cert "$FX_PKI/good.pem" -key "$FX_PKI/good.key" <&"$ed_in" >"$FX_WORK/edserver.log" 2>&1 &
FX_PIDS+=("$!")
fx_wait 10 fx_port_open "$EP" || fx_bail "openssl s_server (early data) starts"

# snapshot VERSION [EXTRA CLIENT MEMBERS] RULES... : a snapshot with one environment `pt`
# holding RULES (JSON objects) and one client `local` (127.0.0.0/8).
snapshot() {
  local version=$1 extra=$2 rules
  shift 2
  rules=$(printf '%s,' "$@")
  printf '{"version":%s,"environments":{"pt":{"default":"deny","rules":[%s]}},"clients":[{"id":"local","cidr":"127.0.0.0/8","environment":"pt"%s}]}\n' \
    "$version" "${rules%,}" "$extra"
}
pass() { printf '{"host":"%s:%s","tls":"passthrough"}' "$1" "$2"; }
icpt() { printf '{"host":"%s:%s"}' "$1" "$2"; }
put() { # put FILE : PUT /v1/snapshot with FILE's bytes
  fx_admin PUT /v1/snapshot --data-binary @"$1" -H 'Content-Type: application/json'
}

base_rules=("$(pass "$P" "$PT")" "$(pass "$P" "$PH")" "$(icpt "$I" "$PT")" "$(icpt "$W" "$PT")"
  "$(pass "$PW" "$PT")" "$(pass "$P" "$SP")" "$(pass "$P" "$EP")")
snapshot 1 "" "${base_rules[@]}" >"$FX_WORK/v1.json"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$FX_WORK/v1.json' >/dev/null"

fx_resolve "$P" "$I" "$W" "$PW"
fx_proxy_start --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" \
  --resolve "$P:$SP:127.0.0.1" --resolve "$P:$EP:127.0.0.1" ||
  fx_bail "sluice proxy starts"
put "$FX_WORK/v1.json"
check_eq "PUT version 1 with passthrough rules: 200" "$FX_CODE" 200

# shellcheck disable=SC2317 # called through fx_wait
audit_count_is() { [ "$(fx_jsonl_count "$FX_AUDIT" "${@:2}")" = "$1" ]; }

# --- (1) the origin's certificate, not sluice's ----------------------------------------------
sclient() { # sclient OUT CAFILE ARGS... : openssl s_client through the proxy
  local out=$1 ca=$2
  shift 2
  timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" -CAfile "$ca" "$@" \
    </dev/null >"$out" 2>&1 || true
}
sclient "$FX_WORK/pt-origin.out" "$FX_TEST_CA" -connect "$P:$PT" -servername "$P" \
  -verify_hostname "$P"
check "passthrough: the certificate verifies against the test origin CA" \
  grep -q 'Verify return code: 0 (ok)' "$FX_WORK/pt-origin.out"
check "passthrough: ... it is the origin's leaf (issuer: sluice test origin CA)" \
  grep -q 'issuer=.*sluice test origin CA' "$FX_WORK/pt-origin.out"
sclient "$FX_WORK/pt-sluice.out" "$FX_SLUICE_CA" -connect "$P:$PT" -servername "$P" \
  -verify_hostname "$P"
check "passthrough: ... and not one sluice minted (sluice's CA does not verify it)" \
  bash -c "! grep -q 'Verify return code: 0 (ok)' '$FX_WORK/pt-sluice.out'"
sclient "$FX_WORK/int.out" "$FX_SLUICE_CA" -connect "$I:$PT" -servername "$I" \
  -verify_hostname "$I"
check "intercept: a host without passthrough on the same proxy gets sluice's certificate" \
  grep -q 'Verify return code: 0 (ok)' "$FX_WORK/int.out"
sclient "$FX_WORK/pt-nosni.out" "$FX_TEST_CA" -connect "$P:$PT" -noservername \
  -verify_hostname "$P"
check "passthrough: a ClientHello without SNI is allowed (the CONNECT host is what counts)" \
  grep -q 'Verify return code: 0 (ok)' "$FX_WORK/pt-nosni.out"

# --- (2) curl: the request works with --cacert the test CA -----------------------------------
rc=0
got=$(curl -q -sS --max-time 20 --http1.1 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_TEST_CA" "https://$P:$PT/hello?probe=pt-curl" 2>"$FX_WORK/curl.err") || rc=$?
check_eq "passthrough: curl --cacert <test CA> https://$P/ through the proxy" \
  "$rc $got" "0 hello from origin.py"
rc=0
curl -q -sS --max-time 20 --http1.1 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_SLUICE_CA" "https://$P:$PT/hello?probe=pt-curl-sluice" \
  >/dev/null 2>"$FX_WORK/curl2.err" || rc=$?
check "passthrough: ... trusting only sluice's CA fails (curl exit 60, no interception)" \
  test "$rc" = 60
check_audit "passthrough: one audit line for the tunnel (CONNECT, allow, tls=passthrough)" \
  method=CONNECT host="$P" port="$PT" decision=allow status=200 tls=passthrough rule="$P:$PT"
check_eq "passthrough: ... and none for the requests inside (the proxy does not see them)" \
  "$(fx_jsonl_count "$FX_AUDIT" host="$P" method!=CONNECT)" 0
check "passthrough: ... the line counts the bytes both ways" \
  test "$(fx_jsonl_count "$FX_AUDIT" method=CONNECT host="$P" decision=allow bytes_up!=0 \
    bytes_down!=0)" -ge 1

# --- (3) the origin sees exactly what the client sent ----------------------------------------
# Hop-by-hop headers the intercepting proxy removes (docs/reference/proxy.md §4.6) pass a passthrough tunnel as
# they are: the proxy never sees them.
hop=('Connection: keep-alive, X-Hop' 'X-Hop: 1' 'Proxy-Connection: keep-alive' 'TE: trailers'
  'Proxy-Authorization: Basic dGVzdDp0ZXN0')
raw() { # raw HOST PROBE : an exact request head
  local out="GET /echo?probe=$2 HTTP/1.1\\r\\nHost: $1:$PT\\r\\n" h
  for h in "${hop[@]}"; do out+="$h\\r\\n"; done
  printf '%s\\r\\n' "$out"
}
# origin_headers PROBE : the headers origin.py logged for PROBE, "Name: value" joined by |.
origin_headers() {
  "$FX_PYTHON" - "$FX_ORIGIN_LOG" "$1" <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        if "probe=" + sys.argv[2] in d["target"]:
            print("|".join(f"{n}: {v}" for n, v in d["headers"]))
            break
EOF
}
out=$(fx_pc --connect "$P:$PT" --cafile "$FX_TEST_CA" --raw "$(raw "$P" pt-exact)")
check_eq "passthrough: a raw request through the tunnel: 200 from the origin" \
  "$out" "connect=200 tls=ok status=200 reason=-"
want="Host: $P:$PT|$(printf '%s|' "${hop[@]}")"
check_eq "passthrough: the origin got the head byte for byte (hop-by-hop headers included)" \
  "$(origin_headers pt-exact)" "${want%|}"
out=$(fx_pc --connect "$I:$PT" --raw "$(raw "$I" int-exact)")
check_eq "intercept: the same request to the intercepted host: 200" \
  "$out" "connect=200 tls=ok status=200 reason=-"
check_eq "intercept: ... there the proxy removed the hop-by-hop headers (the contrast)" \
  "$(origin_headers int-exact)" "Host: $I:$PT"

# --- (4) refusals after the 200 ---------------------------------------------------------------
sclient "$FX_WORK/pt-mismatch.out" "$FX_TEST_CA" -connect "$P:$PT" -servername "$I"
check "host-mismatch: SNI $I in a passthrough tunnel to $P: no handshake, no certificate" \
  bash -c "grep -q 'no peer certificate available' '$FX_WORK/pt-mismatch.out'"
check_audit "host-mismatch: audit line (deny, host-mismatch, tls=passthrough)" \
  method=CONNECT host="$P" decision=error reason=host-mismatch tls=passthrough
out=$(fx_pc --connect "$P:$PT" --no-tls --raw '\x00\x01\x02 hello' --responses 0 --eof-wait 5)
check_eq "not-tls: garbage in a passthrough tunnel is closed unanswered" \
  "$out" "connect=200 tls=none eof"
check_audit "not-tls: audit line (deny, not-tls, tls=passthrough)" \
  method=CONNECT host="$P" port="$PT" decision=error reason=not-tls tls=passthrough
out=$(fx_pc --connect "$P:$PH" --no-tls --raw "GET /echo?probe=pt-http HTTP/1.1\\r\\nHost: $P\\r\\n\\r\\n" \
  --responses 0 --eof-wait 5)
check_eq "not-tls: plain HTTP in a passthrough tunnel is closed unanswered" \
  "$out" "connect=200 tls=none eof"
fx_curl "http://$P:$PH/echo?probe=pt-abs"
check_status "not-tls: an absolute-form http:// request under a passthrough rule -> 400" 400 not-tls
check "not-tls: ... its body says the rule is passthrough and to use https" \
  grep -q 'use https: rule {"host":"'"$P:$PH"'","tls":"passthrough"}' "$FX_BODY"
check_eq "not-tls: the origin saw neither plain request" \
  "$(fx_seen probe=pt-http) $(fx_seen probe=pt-abs)" "0 0"

# --- (5) the ClientHello after a HelloRetryRequest keeps the first one's SNI ---------------------
# RFC 8446 §4.1.2: the second ClientHello repeats the first but for its key share, cookie, early
# data, padding and PSK. A relay that did not look would let a changed SNI reach the origin
# unchecked (domain fronting on the CONNECT host's address).
hellos() { # hellos TARGET TLS_HRR_ARGS... : tls_hrr.py's answers, on one line
  timeout 20 "$FX_PYTHON" "$FX_SUPPORT/tls_hrr.py" --proxy "$FX_PROXY_PORT" --target "$1" \
    --sni1 "$P" "${@:2}" 2>&1 | paste -sd' ' -
}
# shellcheck disable=SC2317 # called through fx_wait
trace_hellos() { grep -c 'ClientHello, Length' "$FX_WORK/sserver.trace" || true; }
ch0=$(trace_hellos)
rc=0
curl -q -sS --max-time 20 --http1.1 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_TEST_CA" --curves X25519:P-256 "https://$P:$SP/" >"$FX_WORK/curl-hrr.out" \
  2>"$FX_WORK/curl-hrr.err" || rc=$?
check_eq "HelloRetryRequest: curl (X25519 share first) to a P-256-only origin, through the tunnel" \
  "$rc $(grep -c '^Ciphers supported in s_server' "$FX_WORK/curl-hrr.out")" "0 1"
check_eq "HelloRetryRequest: ... the origin got two ClientHellos (a retry was asked for)" \
  "$(($(trace_hellos) - ch0))" 2
check_eq "HelloRetryRequest, the same SNI again: the origin's ServerHello comes back" \
  "$(hellos "$P:$SP" --sni2 "$P")" "hrr hello"
check_eq "... after a ChangeCipherSpec, the hello split over records and reads: the same" \
  "$(hellos "$P:$SP" --sni2 "$P" --ccs --split)" "hrr hello"
check_eq "... and to origin.py (X25519 selected), sent ahead of the retry: the same" \
  "$(hellos "$P:$PT" --sni2 "$P" --ahead)" "hrr hello"
# What a client sends after its first ClientHello waits for the origin's first handshake message:
# 0-RTT early data is held until the ServerHello, then goes on.
ed_client() { # ed_client ARGS... : openssl s_client through the proxy to the early-data origin
  (sleep 1; echo Q) | timeout 10 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" \
    -connect "$P:$EP" -servername "$P" -CAfile "$FX_TEST_CA" -tls1_3 "$@" 2>&1 || true
}
ed_client -sess_out "$FX_WORK/ed.sess" >"$FX_WORK/ed1.out"
printf 'early-probe-pt\n' >"$FX_WORK/early.txt"
ed_client -sess_in "$FX_WORK/ed.sess" -early_data "$FX_WORK/early.txt" >"$FX_WORK/ed2.out"
check "0-RTT through a passthrough tunnel: the session resumed, the early data accepted" \
  bash -c "grep -q '^Reused' '$FX_WORK/ed2.out' && grep -q 'Early data was accepted' '$FX_WORK/ed2.out'"
check "... and the origin read it as early data" \
  grep -A1 -q '^Early data received' "$FX_WORK/edserver.log"
check "... the bytes the client sent" grep -q '^early-probe-pt' "$FX_WORK/edserver.log"
# mm_count : the host-mismatch lines of passthrough tunnels to $P so far.
mm_count() { fx_jsonl_count "$FX_AUDIT" method=CONNECT host="$P" decision=error \
  reason=host-mismatch tls=passthrough status=0; }
# shellcheck disable=SC2317 # called through fx_wait
mm_is() { [ "$(mm_count)" = "$1" ]; }
metric() { # metric SERIES : its value in a fresh GET /metrics (0 when absent)
  fx_admin GET /metrics
  awk -v s="$1" '$1 == s { v = $2 } END { print v + 0 }' "$FX_ADMIN_BODY"
}
mm_series='sluice_requests_total{decision="error",reason="host-mismatch"}'
mx0=$(metric "$mm_series")
mm0=$(mm_count)
ch0=$(trace_hellos)
check_eq "HelloRetryRequest, then SNI $I: refused with illegal_parameter (alert 47)" \
  "$(hellos "$P:$SP" --sni2 "$I")" "hrr alert=47"
check_eq "... the origin got the first ClientHello only" "$(($(trace_hellos) - ch0))" 1
check "... the tunnel's line: CONNECT $P, host-mismatch, tls=passthrough, status 0" \
  fx_wait 5 mm_is $((mm0 + 1))
check_eq "HelloRetryRequest, then no SNI: refused (alert 47)" \
  "$(hellos "$P:$SP" --no-sni2)" "hrr alert=47"
check_eq "HelloRetryRequest, then SNI ${P^^} (not byte for byte): refused (alert 47)" \
  "$(hellos "$P:$SP" --sni2 "${P^^}")" "hrr alert=47"
check_eq "... after a ChangeCipherSpec, split over records and reads: refused (alert 47)" \
  "$(hellos "$P:$SP" --sni2 "$I" --ccs --split)" "hrr alert=47"
check_eq "... sent ahead of the retry, to origin.py: held, then refused (alert 47)" \
  "$(hellos "$P:$PT" --sni2 "$I" --ahead)" "hrr alert=47"
check "... each with its line (5 more host-mismatch lines)" fx_wait 5 mm_is $((mm0 + 5))
check_eq "... and none of those second ClientHellos reached the P-256 origin" \
  "$(($(trace_hellos) - ch0))" 4
check_eq "... each counted in $mm_series" "$(($(metric "$mm_series") - mx0))" 5

# --- (6) passthrough with methods or a credential is refused, with the JSON path --------------
snapshot 9 "" "$(pass "$P" "$PT")" \
  "{\"host\":\"a.sluice.test\",\"tls\":\"passthrough\",\"methods\":[\"GET\"]}" \
  "{\"host\":\"b.sluice.test\",\"tls\":\"passthrough\",\"credential\":{\"header\":\"X-K\",\"value\":\"s3cr3t\"}}" \
  >"$FX_WORK/bad.json"
rc=0
"$SLUICE_BIN" policy check "$FX_WORK/bad.json" >"$FX_WORK/check.out" 2>&1 || rc=$?
check_eq "policy check: passthrough with methods or a credential: exit 1" "$rc" 1
check "policy check: ... names \$.environments.pt.rules[1].methods" \
  grep -q '^\$\.environments\.pt\.rules\[1\]\.methods: a "tls": "passthrough" rule cannot filter methods' \
  "$FX_WORK/check.out"
check "policy check: ... and \$.environments.pt.rules[2].credential, never the value" \
  bash -c "grep -q '^\\\$\\.environments\\.pt\\.rules\\[2\\]\\.credential: a \"tls\": \"passthrough\" rule cannot carry a credential' '$FX_WORK/check.out' && ! grep -q s3cr3t '$FX_WORK/check.out'"
put "$FX_WORK/bad.json"
check_match "admin socket: the same snapshot is refused (4xx)" "$FX_CODE" '^4[0-9][0-9]$' 
check_eq "admin socket: ... with the JSON path of the first error" \
  "$(fx_json "$FX_ADMIN_BODY" 'd["path"]')" '$.environments.pt.rules[1].methods'

# --- (7) open relays decided again when a snapshot arrives ------------------------------------
ws_key=dGhlIHNhbXBsZSBub25jZQ==
ws() { # ws HOST PROBE : a WebSocket opening handshake for origin.py's /ws
  printf 'GET /ws?probe=%s HTTP/1.1\\r\\nHost: %s:%s\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n' \
    "$2" "$1" "$PT" "$ws_key"
}
relay_bg() { # relay_bg NAME HOST [ARGS] : a relay kept open (echo once, then wait for EOF)
  fx_pyclient_bg "$FX_WORK/relay-$1.out" --timeout 30 --connect "$2:$PT" "${@:3}" \
    --raw "$(ws "$2" "$1")" --then "ping-$1" --eof-wait 25
}
# shellcheck disable=SC2317 # called through fx_wait
relay_up() { grep -q "^recv=ping-$1" "$FX_WORK/relay-$1.out"; }
# shellcheck disable=SC2317 # called through fx_wait
relay_closed() { grep -qE '^(eof|error)' "$FX_WORK/relay-$1.out"; }

relay_bg ws1 "$W"
relay_bg pw1 "$PW" --cafile "$FX_TEST_CA"
relay_bg keep "$I"
for r in ws1 pw1 keep; do
  fx_wait 10 relay_up "$r" || { not_ok "relay $r opens"; cat "$FX_WORK/relay-$r.out"; }
done
check "relays: a websocket, a passthrough tunnel and another websocket are open" \
  bash -c "! grep -qE '^(eof|error)' '$FX_WORK'/relay-{ws1,pw1,keep}.out"
# Version 2: $W removed, $PW intercepted from now on, $I unchanged.
snapshot 2 "" "$(pass "$P" "$PT")" "$(pass "$P" "$PH")" "$(icpt "$I" "$PT")" \
  "$(icpt "$PW" "$PT")" >"$FX_WORK/v2.json"
put "$FX_WORK/v2.json"
check_eq "PUT version 2 (revokes $W, intercepts $PW): 200" "$FX_CODE" 200
check "revoked: the websocket relay to $W is closed within a second" fx_wait 1 relay_closed ws1
check "revoked: the passthrough tunnel to $PW (now intercepted) is closed within a second" \
  fx_wait 1 relay_closed pw1
check_audit "revoked: the websocket's line (deny, host-not-allowed, 101, version 2)" \
  method=GET host="$W" path=/ws decision=deny reason=host-not-allowed status=101 \
  policy_version=2
check_audit "revoked: the tunnel's line (deny, host-not-allowed, tls=passthrough, version 2)" \
  method=CONNECT host="$PW" decision=deny reason=host-not-allowed tls=passthrough \
  policy_version=2
check "still allowed: the websocket relay to $I stays open" \
  bash -c "sleep 1; ! grep -qE '^(eof|error)' '$FX_WORK/relay-keep.out'"
kill "$FX_BG_PID" 2>/dev/null || true

# --- (8) ... and when the client's expires_at passes ------------------------------------------
exp_epoch=$(($(date +%s) + 5))
exp_at=$(date -u -d "@$exp_epoch" +%Y-%m-%dT%H:%M:%SZ)
snapshot 3 ",\"expires_at\":\"$exp_at\"" "${base_rules[@]}" >"$FX_WORK/v3.json"
put "$FX_WORK/v3.json"
check_eq "PUT version 3 (the client expires at $exp_at): 200" "$FX_CODE" 200
relay_bg ws2 "$W"
relay_bg pw2 "$PW" --cafile "$FX_TEST_CA"
for r in ws2 pw2; do
  fx_wait 4 relay_up "$r" || { not_ok "relay $r opens"; cat "$FX_WORK/relay-$r.out"; }
done
while [ "$(date +%s)" -lt $((exp_epoch - 1)) ]; do sleep 0.1; done
if grep -qE '^(eof|error)' "$FX_WORK"/relay-{ws2,pw2}.out; then
  not_ok "expiry: both relays are still open a second before expires_at"
else
  ok "expiry: both relays are still open a second before expires_at"
fi
while [ "$(date +%s)" -lt "$exp_epoch" ]; do sleep 0.05; done
check "expiry: the websocket relay is closed within a second of expires_at" \
  fx_wait 1 relay_closed ws2
check "expiry: the passthrough tunnel is closed within a second of expires_at" \
  fx_wait 1 relay_closed pw2
check_audit "expiry: the websocket's line (deny, expired, client local)" \
  method=GET host="$W" path=/ws decision=deny reason=expired client=local
check_audit "expiry: the tunnel's line (deny, expired, tls=passthrough)" \
  method=CONNECT host="$PW" decision=deny reason=expired tls=passthrough
check "expiry: a new tunnel by the expired client is refused (403 expired)" \
  bash -c "'$FX_PYTHON' '$FX_SUPPORT/proxy_client.py' --proxy 127.0.0.1:$FX_PROXY_PORT \
    --timeout 10 --connect $P:$PT --cafile '$FX_TEST_CA' --request 'GET /hello' 2>&1 |
    grep -q '^connect=403 reason=expired'"

check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
