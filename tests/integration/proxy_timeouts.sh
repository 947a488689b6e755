#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_timeouts.sh - which timer cuts what (docs/reference/proxy.md §4.10),
# and what the audit line then says (§4.7). With short timeouts by flag (header 2 s, idle 4 s,
# send 8 s):
# - a client that pauses reading longer than the idle timeout but shorter than the send timeout
#   gets its whole response (plain and in a tunnel); the idle timeout is for idle connections;
# - a client that pauses longer than the send timeout is cut: the audit line says
#   "aborted":{"side":"client","cause":"send-timeout"}, and bytes_down is what reached the
#   client's socket (in the clear: exactly what the client then read, to the byte);
# - an upstream that stops sending in the middle of a body is cut by the idle timeout
#   ("side":"upstream","cause":"idle-timeout"), the client gets an incomplete response;
# - a complete response has no "aborted" member;
# - in an intercepted tunnel, the CONNECT's head does not time what follows: a tunnel that says
#   nothing after its handshake is closed silently at the idle timeout (no 408, counted as
#   idle), and the first head inside it is timed by the header timeout.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx origin
fx_nginx_big

A=a.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" timers "$A:$FX_TLS_PORT" "$A:$FX_HTTP_PORT" "$A:$FX_PY_TLS_PORT" \
  "$A:$FX_PY_HTTP_PORT"
fx_resolve "$A"
fx_proxy_start --policy "$policy" --workers 1 --upstream-ca "$FX_TEST_CA" \
  --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" \
  --header-timeout 2 --idle-timeout 4 --send-timeout 8 || fx_bail "sluice proxy starts"
ok "sluice proxy starts (--header-timeout 2 --idle-timeout 4 --send-timeout 8)"

metric() {
  fx_admin GET /metrics
  awk -v k="$1" '$1 == k { print $2 }' "$FX_ADMIN_BODY"
}
# aborted_sum: every series of sluice_transfers_aborted_total added up.
aborted_sum() {
  fx_admin GET /metrics
  awk '$1 ~ /^sluice_transfers_aborted_total[{]/ { n += $2 } END { print n + 0 }' "$FX_ADMIN_BODY"
}
# elapsed CMD... : runs CMD, prints its output then the whole seconds it took.
elapsed() {
  local t0 out
  t0=$(date +%s%N)
  out=$("$@")
  echo "$out $((($(date +%s%N) - t0) / 1000000000))"
}
# audit_json PATH_PROBE EXPR : a Python expression over the audit line (d) whose path is PATH.
audit_json() {
  fx_wait 5 fx_jsonl_has "$FX_AUDIT" path="$1" || true
  "$FX_PYTHON" - "$FX_AUDIT" "$1" "$2" <<'EOF'
import json, sys
line = None
for raw in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(raw)
    if d.get("path") == sys.argv[2]:
        line = d
d = line
print(eval(sys.argv[3]) if d is not None else "no line")
EOF
}

# --- (1) a reader that pauses longer than the idle timeout still gets everything ----------------
# 64 MiB of nginx's /big, Content-Length framed; a 16 KiB receive buffer: the proxy's buffers fill
# within a second of the pause.
big=$((64 << 20))
out=$(fx_pc --timeout 30 --rcvbuf 16384 --pause-after 1048576 --pause-seconds 6 \
  --absolute "http://$A:$FX_HTTP_PORT/big?probe=pause-plain" --header "Range: bytes=0-$((big - 1))")
check_match "paused 6 s (idle timeout 4 s, send timeout 8 s), plain: the whole response" \
  "$out" '^paused bytes=[0-9]+ status=206 reason=-$'
out=$(fx_pc --timeout 30 --rcvbuf 16384 --pause-after 1048576 --pause-seconds 6 \
  --connect "$A:$FX_TLS_PORT" --request "GET /big?probe=pause-tls" \
  --header "Range: bytes=0-$((big - 1))")
check_match "paused 6 s, in a tunnel: the whole response" \
  "$out" '^connect=200 tls=ok paused bytes=[0-9]+ status=206 reason=-$'
check_eq "a complete response's audit line has no \"aborted\" member, bytes_down = its body" \
  "$(audit_json /big "[d.get('aborted', 'none'), d['bytes_down'], d['status']]")" \
  "['none', $big, 206]"

# --- (2) a reader that pauses longer than the send timeout is cut ----------------------------
out=$(fx_pyclient --timeout 40 --rcvbuf 16384 --pause-after 1048576 --pause-seconds 12 \
  --absolute "http://$A:$FX_HTTP_PORT/big?probe=cut-plain" 2>&1 || true)
got=$(sed -n 's/^cut bytes=//p' <<<"$out")
check_match "paused 12 s, plain: cut by the send timeout (the client read what had left)" \
  "$out" $'^paused bytes=[0-9]+\ncut bytes=[0-9]+$'
check_eq "... its audit line: allow, 200, aborted by the client's send timeout" \
  "$(audit_json /big "[d['decision'], d['status'], d.get('aborted')]")" \
  "['allow', 200, {'side': 'client', 'cause': 'send-timeout'}]"
check_eq "... bytes_down is exactly what reached the client" \
  "$(audit_json /big "d['bytes_down']")" "${got:-none}"
out=$(fx_pyclient --timeout 40 --rcvbuf 16384 --pause-after 1048576 --pause-seconds 12 \
  --connect "$A:$FX_TLS_PORT" --request "GET /big?probe=cut-tls" 2>&1 || true)
got=$(sed -n 's/^cut bytes=//p' <<<"$out")
check_match "paused 12 s, in a tunnel: cut by the send timeout" \
  "$out" $'paused bytes=[0-9]+\ncut bytes=[0-9]+$'
check_eq "... its audit line says so" \
  "$(audit_json /big "[d['status'], d.get('aborted')]")" \
  "[200, {'side': 'client', 'cause': 'send-timeout'}]"
# Under TLS the records still waiting are counted whole: within one record of the truth.
check_eq "... bytes_down is what reached the client, within one TLS record" \
  "$(audit_json /big "abs(d['bytes_down'] - ${got:-0}) <= 16384 + 64")" "True"
check "sluice_timeouts_total{phase=\"send\"} counts both" \
  test "$(metric 'sluice_timeouts_total{phase="send"}')" -ge 2

# --- (3) an upstream that stops in the middle of a body: the idle timeout --------------------
out=$(elapsed fx_pc --timeout 20 --connect "$A:$FX_PY_TLS_PORT" \
  --request "GET /slow?bytes=200000&ms=200000&probe=stalled-upstream")
check_match "an upstream silent mid-body: the client's response is cut after the idle timeout" \
  "$out" '^connect=200 tls=ok error closed by peer [4-6]$'
check_eq "... its audit line: aborted by the upstream's idle timeout" \
  "$(audit_json /slow "[d['decision'], d['status'], d.get('aborted')]")" \
  "['allow', 200, {'side': 'upstream', 'cause': 'idle-timeout'}]"
cut_send=$(metric 'sluice_transfers_aborted_total{side="client",cause="send-timeout"}')
cut_idle=$(metric 'sluice_transfers_aborted_total{side="upstream",cause="idle-timeout"}')
check_eq "sluice_transfers_aborted_total: 2 cut by the send timeout, 1 by the idle timeout, no other" \
  "$cut_send $cut_idle $(aborted_sum)" "2 1 3"

# --- (4) the CONNECT's head does not time the tunnel -----------------------------------------
header0=$(metric 'sluice_timeouts_total{phase="header"}')
idle0=$(metric 'sluice_timeouts_total{phase="idle"}')
out=$(elapsed fx_pc --timeout 20 --connect "$A:$FX_TLS_PORT" --raw '' --responses 0 \
  --eof-wait 12)
check_match "a silent intercepted tunnel: closed at the idle timeout, without a 408" \
  "$out" '^connect=200 tls=ok eof [4-6]$'
check_eq "... counted as an idle timeout, not a header timeout" \
  "$(metric 'sluice_timeouts_total{phase="idle"}') $(metric 'sluice_timeouts_total{phase="header"}')" \
  "$((idle0 + 1)) $header0"
out=$(elapsed fx_pc --timeout 20 --connect "$A:$FX_TLS_PORT" \
  --raw "GET /hello?probe=slow-head HTTP/1.1\\r\\nHost: $A:$FX_TLS_PORT\\r\\n" --eof-wait 12)
check_match "the first head inside a tunnel, never finished: 408 at the header timeout" \
  "$out" '^connect=200 tls=ok status=408 reason=bad-request eof( reset)? [1-3]$'

check "the proxy is still running" fx_proxy_alive
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
