#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/up.sh - docs/reference/cli.md §1.2, docs/reference/data.md §2, docs/reference/containers.md §5.4 (docs/up.md): on a fresh data
# directory up creates the CA, the encryption key (with a warning, the only one a normal start
# prints: none about the proxy admin socket while the proxy comes up, none about the open-files
# limit; a second start prints none at all), the database and the admin
# (token printed once, kept 0600 in admin.token), starts control and proxy, and the example it
# prints runs verbatim: a sandbox's `curl https://example.com/` reaches a local origin (mapped
# with proxy flags after `--`). Killing the proxy child: it is restarted after its back-off,
# and while it is down the container's request fails and never reaches the origin. SIGTERM
# stops both children and removes the nftables table. The proxy also answers DNS on the gateway's
# port 53 and listens there on 443, 80 and 3129 (transparent interception). Killing the control plane child: the
# table stays while it is down, it comes back, the proxy is untouched. A second start on the
# same directory reuses everything (same CA and key, the token still works, no new token) and
# builds a missing sluice/sandbox tag with the recipe (from its cache). With no Docker daemon: the
# output says so, sandbox calls answer 503, environments work; in that run --proxy-admin-url and
# its certificates reach the control plane, which pushes to a second proxy over mutual TLS. Bad flags: one line, exit 2; a
# bad proxy flag after `--`: the proxy is not restarted, up stops and exits 1. SIGKILL to up:
# the children stop by themselves and the table is removed.
# Network sl-t-up, subnet 10.213.41.0/24; the origin listens on 127.77.41.1:443.
# shellcheck disable=SC2016,SC2317 # sandbox commands single-quoted on purpose; helpers run via check, fx_wait and trap
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup

NET=sl-t-up
SUBNET=10.213.41.0/24
GW=10.213.41.1
TABLE=sluice_sl_t_up
ORIGIN_ADDR=127.77.41.1
TAG_IMAGE=sluice/sandbox:up-t41
BACKOFF_MS=6000

sbx_require_docker

UP_PID=
UP_N=0
up_cleanup() {
  local rc=$? pid
  set +e
  trap - EXIT
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    up_stop >/dev/null
  fi
  for pid in $(pgrep -f "sluice (up|control|proxy) .*--network $NET " 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null
  done
  sbx_dockerctl cleanup "$NET" | sed 's/^/# cleanup: /'
  nft delete table inet "$TABLE" 2>/dev/null
  curl -q -s --max-time 30 --unix-socket /var/run/docker.sock -X DELETE -o /dev/null \
    "http://localhost/v1.41/images/$TAG_IMAGE?noprune=1" 2>/dev/null
  if [ "$rc" != 0 ]; then
    fx__dump "$FX_WORK"/up*.err
  fi
  (exit "$rc")
  fx__cleanup
}
trap up_cleanup EXIT
sbx_dockerctl cleanup "$NET" | sed 's/^/# stale: /'
nft delete table inet "$TABLE" 2>/dev/null || true

# --- the origin: example.com on ORIGIN_ADDR:443, a certificate from the test CA ---------------
fx_test_ca || fx_bail "test CA"
(cd "$FX_PKI" && fx__leaf example ca "DNS:example.com" 2>>"$FX_PKI/openssl.log") ||
  fx_bail "example.com certificate"
ORIGIN_LOG=$FX_WORK/origin.log
ORIGIN_BODY="hello from the up test origin $(fx_random_hex 6)"
: >"$ORIGIN_LOG"
"$FX_PYTHON" -c '
import http.server, ssl, sys
addr, cert, key, log, body = sys.argv[1:6]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.path, self.headers.get("X-Probe", "-")))
        b = (body + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((addr, 443), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
' "$ORIGIN_ADDR" "$FX_PKI/example.pem" "$FX_PKI/example.key" "$ORIGIN_LOG" "$ORIGIN_BODY" \
  2>"$FX_WORK/origin.err" &
FX_PIDS+=($!)
fx_wait 10 fx_port_open 443 "$ORIGIN_ADDR" || {
  fx__dump "$FX_WORK/origin.err"
  fx_bail "origin listens on $ORIGIN_ADDR:443"
}

# --- helpers ---------------------------------------------------------------------------------
DATA=$FX_WORK/var
mapfile -t ports < <(fx_free_ports 3)
CPORT=${ports[0]}
PPORT=${ports[1]}
GPORT=${ports[2]}
API=http://127.0.0.1:$CPORT/api/v1
PROXY_FLAGS=(--resolve "example.com:443:$ORIGIN_ADDR" --allow-upstream "$ORIGIN_ADDR/32"
  --upstream-ca "$FX_TEST_CA")

# up_start [ARGS...] : sluice up with this test's network and ports (ARGS before `--`); waits
# for the summary (≤ 120 s). UP_OUT, UP_ERR.
up_start() {
  UP_N=$((UP_N + 1))
  UP_OUT=$FX_WORK/up$UP_N.out
  UP_ERR=$FX_WORK/up$UP_N.err
  : >"$UP_OUT"
  env -u SLUICE_ENCRYPTION_KEY "$SLUICE_BIN" up --data "$DATA" \
    --control-listen "127.0.0.1:$CPORT" --proxy-listen "127.0.0.1:$PPORT" \
    --proxy-port "$GPORT" --network "$NET" --subnet "$SUBNET" "$@" -- "${PROXY_FLAGS[@]}" \
    >"$UP_OUT" 2>"$UP_ERR" &
  UP_PID=$!
  FX_PIDS+=("$UP_PID")
  if ! fx_wait 120 up__summarised; then
    echo "# sluice up printed no summary"
    fx__dump "$UP_OUT" "$UP_ERR"
    return 1
  fi
}

up__summarised() {
  kill -0 "$UP_PID" 2>/dev/null && grep -q '^Ctrl-C stops everything' "$UP_OUT"
}

# up_stop : SIGTERM, ≤ 90 s. UP_EXIT = its status (or "timeout").
up_stop() {
  fx_stop_pid "$UP_PID" 90 || true
  UP_EXIT=$FX_EXIT
  [ "$UP_EXIT" != timeout ]
}

# child_pid ROLE : the pid of up's `sluice ROLE` child.
child_pid() {
  ps -o pid=,args= --ppid "$UP_PID" 2>/dev/null | awk -v r="$1" '$3 == r { print $1; exit }'
}

# api METHOD PATH [BODY] : as the admin; STATUS, BODY_FILE.
api() {
  local data=()
  BODY_FILE=$FX_WORK/api.body
  : >"$BODY_FILE"
  if [ $# -ge 3 ]; then data=(-H 'Content-Type: application/json' --data-binary "$3"); fi
  STATUS=$(curl -q -sS --max-time 240 -X "$1" -H "Authorization: Bearer $TOKEN" "${data[@]}" \
    -o "$BODY_FILE" -w '%{http_code}' "$API$2" 2>/dev/null) || true
  STATUS=${STATUS:-000}
}

field() {
  fx_json "$BODY_FILE" "$1"
}

# exec_curl SANDBOX PROBE : curl https://example.com/ inside; prints "rc=N" and the body.
exec_curl() {
  api POST "/repos/demo/hello/sandboxes/$1/exec" \
    "{\"cmd\":\"curl -sS --max-time 5 -H 'X-Probe: $2' https://example.com/; echo rc=\$?\"}"
  field 'd.get("stdout", "")'
}

mode_of() {
  stat -c %a "$1" 2>/dev/null
}

no_table() {
  ! nft list table inet "$TABLE" >/dev/null 2>&1
}

none_running() {
  ! pgrep -f "sluice (up|control|proxy) .*--network $NET " >/dev/null
}

no_leftovers() {
  [ "$(sbx_leftovers)" = "[]" ]
}

SBX_NET=$NET

# --- bad flags ---------------------------------------------------------------------------------
rc=0
"$SLUICE_BIN" up --data "$DATA" --no-such-flag >"$FX_WORK/bad.out" 2>"$FX_WORK/bad.err" || rc=$?
check_eq "an unknown flag: exit 2" "$rc" 2
check_eq "... with one line naming it" \
  "$(grep -c -- "--no-such-flag" "$FX_WORK/bad.err")/$(wc -l <"$FX_WORK/bad.err")" "1/1"
check "... and nothing was created" test ! -e "$DATA"
rc=0
"$SLUICE_BIN" up --data "$DATA" --audit-log - >/dev/null 2>"$FX_WORK/bad.err" || rc=$?
check_eq "--audit-log - (no file for the dashboard to tail): exit 2" "$rc" 2
check_eq "... with one line naming it" \
  "$(grep -c -- "'--audit-log' needs a file" "$FX_WORK/bad.err")/$(wc -l <"$FX_WORK/bad.err")" "1/1"
check "... and nothing was created" test ! -e "$DATA"
# Every flag of `sluice control` is one up takes (and passes on): the two lists must not drift.
missing=""
for flag in $("$SLUICE_BIN" control --help 2>&1 | grep -oE '^  --[a-z-]+' | sort -u); do
  "$SLUICE_BIN" up "$flag" 1 --help >/dev/null 2>&1 || missing="$missing $flag"
done
check_eq "up accepts every flag of sluice control" "${missing:-none}" none
# ... and refuses those that put sandboxes on a cluster, naming the flag and why.
rc=0
"$SLUICE_BIN" up --data "$DATA" --launcher swarm >/dev/null 2>"$FX_WORK/bad.err" || rc=$?
check_eq "--launcher swarm: exit 2" "$rc" 2
check_eq "... with one line naming it and sluice control" \
  "$(grep -c -- "'--launcher' is for \`sluice control\` on a Docker Swarm" "$FX_WORK/bad.err")/$(wc -l <"$FX_WORK/bad.err")" "1/1"
check "... and nothing was created" test ! -e "$DATA"
rc=0
"$SLUICE_BIN" up --no-such-flag 1 --help >/dev/null 2>&1 || rc=$?
check_eq "... and refuses one it does not know (exit 2)" "$rc" 2
"$SLUICE_BIN" up --help >"$FX_WORK/help.out"
check "--help lists --proxy-listen, --control-listen, control flags and the proxy flags" \
  bash -c "grep -q -- --proxy-listen '$FX_WORK/help.out' && grep -q -- --control-listen '$FX_WORK/help.out' && grep -q -- --git-token '$FX_WORK/help.out' && grep -q 'after \`--\`' '$FX_WORK/help.out'"

# --- first run -----------------------------------------------------------------------------------
up_start --restart-backoff "$BACKOFF_MS" || fx_bail "sluice up comes up on a fresh data directory"
ok "sluice up comes up on a fresh data directory"
TOKEN=$(sed -n 's/^  admin token  \(sl_[A-Za-z0-9_-]*\)$/\1/p' "$UP_OUT")
check_match "the admin token is printed" "$TOKEN" '^sl_[A-Za-z0-9_-]{43}$'
check_eq "admin.token holds the same token" "$(cat "$DATA/admin.token" 2>/dev/null)" "$TOKEN"
check_eq "admin.token is 0600" "$(mode_of "$DATA/admin.token")" 600
check_eq "the data directory is 0700" "$(mode_of "$DATA")" 700
check "the CA is there (ca.pem, ca.key 0600)" \
  bash -c "test -s '$DATA/ca.pem' && test \"\$(stat -c %a '$DATA/ca.key')\" = 600"
check_eq "encryption.key is 0600" "$(mode_of "$DATA/encryption.key")" 600
check_match "encryption.key is base64 of 32 bytes" \
  "$(base64 -d "$DATA/encryption.key" 2>/dev/null | wc -c)" '^32$'
check "stderr warns that the operator should provide the key" \
  grep -q "warning: SLUICE_ENCRYPTION_KEY is unset" "$UP_ERR"
check "sluice.db exists" test -s "$DATA/sluice.db"
check "the summary names the dashboard URL" grep -qF "http://127.0.0.1:$CPORT/dashboard/" "$UP_OUT"
check "the summary names the API URL" grep -qF "http://127.0.0.1:$CPORT/api/v1/" "$UP_OUT"
check "the summary names both proxy addresses" \
  grep -qF "127.0.0.1:$PPORT (this host), $GW:$GPORT (containers on network $NET)" "$UP_OUT"
check "the summary names the CA path" grep -qF "$DATA/ca.pem" "$UP_OUT"
check "nftables table inet $TABLE is installed" nft list table inet "$TABLE"
check "the proxy accepts on the gateway $GW:$GPORT" fx_port_open "$GPORT" "$GW"
for p in 443 80 3129; do
  check "the proxy takes transparent connections on $GW:$p (proxy.md §4.12)" fx_port_open "$p" "$GW"
done
check_eq "the proxy answers DNS on $GW:53: an A query gets the gateway" \
  "$("$FX_PYTHON" - "$GW" <<'EOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(q, (sys.argv[1], 53))
a = s.recv(512)
print(socket.inet_ntoa(a[-4:]) if struct.unpack(">H", a[6:8])[0] == 1 else "no answer")
EOF
)" "$GW"
check "the proxy accepts on 127.0.0.1:$PPORT" fx_port_open "$PPORT"
CONTROL_PID=$(child_pid control)
PROXY_PID=$(child_pid proxy)
check "control and proxy run as children of up" test -n "$CONTROL_PID" -a -n "$PROXY_PID"
api GET /environments
check_eq "the token works on the API" "$STATUS" 200

# --- the printed example, verbatim ---------------------------------------------------------------
sed -n '/^----8<---- example$/,/^----8<---- end of example$/p' "$UP_OUT" | sed '1d;$d' \
  >"$FX_WORK/example.sh"
check "the output holds an example" test -s "$FX_WORK/example.sh"
fx_note "example: $(wc -l <"$FX_WORK/example.sh") lines"
(cd "$FX_WORK" && timeout 300 bash "$FX_WORK/example.sh") >"$FX_WORK/example.out" \
  2>"$FX_WORK/example.err" || true
out=$(cat "$FX_WORK/example.out")
check_match "the example's sandbox curl gets the origin's answer" "$out" \
  "\"stdout\":\"$ORIGIN_BODY\\\\n\""
check_match "... with exit code 0" "$out" '"exitCode":0'
check_eq "the origin saw exactly that request" "$(grep -c '^/ ' "$ORIGIN_LOG")" 1
FX_AUDIT=$DATA/audit.log
check_audit "the audit log in DATA records the allowed request" decision=allow host=example.com
check "the example closed its sandbox (no container left)" fx_wait 20 no_leftovers
if [ "$FX_LAST" != 0 ] || ! grep -q '"exitCode":0' "$FX_WORK/example.out"; then
  fx__dump "$FX_WORK/example.out" "$FX_WORK/example.err"
fi

# A normal start warns of nothing but what the operator must act on: here the encryption key up
# wrote. Not that the proxy admin socket is unreachable while the proxy up started beside the
# control plane is still coming up, nor that the open-files limit (20 000 hard, say) is short of
# what the default --max-connections needs (it is lowered to what the limit holds).
# warnings FILE : the lines of FILE that warn (up's `warning:` and the children's `warn` level).
warnings() { grep -E '(^| )warn |warning' "$1" || true; }
check_eq "a normal start warns only of the encryption key it wrote" \
  "$(warnings "$UP_ERR" | grep -vc 'warning: SLUICE_ENCRYPTION_KEY is unset')" 0
if [ "$FX_LAST" != 0 ]; then warnings "$UP_ERR" | sed 's/^/# /'; fi

# --- killing the proxy child ---------------------------------------------------------------------
api POST /repos/demo/hello/sandboxes '{"ref":"main","environment":"example"}'
check_eq "a second sandbox for the restart checks: 201" "$STATUS" 201
SB=$(field 'd.get("id", "")')
probe_ok=up-before-$(fx_random_hex 6)
check_match "before the kill its curl works" "$(exec_curl "$SB" "$probe_ok")" "rc=0"
# A client that ignores HTTP(S)_PROXY: the name resolves to the gateway (the proxy's DNS
# responder) and the connection to its 443 is intercepted and decided like a CONNECT.
probe_tp=up-transparent-$(fx_random_hex 6)
api POST "/repos/demo/hello/sandboxes/$SB/exec" \
  "{\"cmd\":\"getent ahostsv4 example.com | head -n1; curl -sS --max-time 5 --noproxy '*' -H 'X-Probe: $probe_tp' https://example.com/; echo rc=\$?\"}"
out=$(field 'd.get("stdout", "")')
check_match "inside, example.com resolves to the gateway $GW (the proxy's DNS responder)" "$out" "^${GW//./\\.} "
check_match "... and curl --noproxy '*' https://example.com/ gets the origin's answer" "$out" "rc=0"
check_eq "... which saw that request once" "$(grep -c -- " $probe_tp\$" "$ORIGIN_LOG")" 1
check_audit "... audited as transparent" decision=allow host=example.com mode=transparent
check_audit "the lookup has its audit line" decision=dns
kill -KILL "$PROXY_PID"
t_kill=$(date +%s%N)
probe_down=up-down-$(fx_random_hex 6)
down_out=$(exec_curl "$SB" "$probe_down") || true
t_done=$(date +%s%N)
window_ms=$(((t_done - t_kill) / 1000000))
check "the request ran within the proxy's back-off (${window_ms} ms < $BACKOFF_MS ms)" \
  test "$window_ms" -lt "$BACKOFF_MS"
check "... and no new proxy was running yet" test -z "$(child_pid proxy)"
check_match "while the proxy is down the container's request fails" "$down_out" "rc=[1-9]"
check_eq "... and never reaches the origin" "$(grep -c -- " $probe_down\$" "$ORIGIN_LOG")" 0
check "up logs the proxy's exit and the back-off" \
  grep -q "msg=\"exited; restarting after a back-off\" child=proxy pid=$PROXY_PID signal=9" "$UP_ERR"
new_proxy() {
  local p
  p=$(child_pid proxy)
  [ -n "$p" ] && [ "$p" != "$PROXY_PID" ] && fx_port_open "$GPORT" "$GW"
}
check "the proxy is restarted (new pid, on the gateway again) within 30 s" fx_wait 30 new_proxy
check "the control plane warned that the proxy admin socket was unreachable (a real outage)" \
  grep -q 'warn conn=0 msg="proxy admin socket unreachable; retrying"' "$UP_ERR"
after_ok() {
  [[ $(exec_curl "$SB" "up-after-$(fx_random_hex 4)") == *rc=0* ]]
}
check "after the restart the container's curl works again (policy pushed again)" \
  fx_wait 30 after_ok
check_eq "the control plane was not restarted" "$(child_pid control)" "$CONTROL_PID"
api POST "/repos/demo/hello/sandboxes/$SB/close"
check_eq "close the second sandbox: 204" "$STATUS" 204

# --- killing the control plane child ----------------------------------------------------------
PROXY_PID=$(child_pid proxy)
kill -KILL "$CONTROL_PID"
check "while the control plane is down the firewall table stays" \
  nft list table inet "$TABLE"
check "... and the proxy keeps running" kill -0 "$PROXY_PID"
new_control() {
  local p
  p=$(child_pid control)
  [ -n "$p" ] && [ "$p" != "$CONTROL_PID" ] &&
    [ "$(curl -q -s --max-time 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$CPORT/healthz")" = 200 ]
}
check "the control plane is restarted and answers /healthz within 30 s" fx_wait 30 new_control
check "up logs the control plane's exit" \
  grep -q "msg=\"exited; restarting after a back-off\" child=control pid=$CONTROL_PID signal=9" "$UP_ERR"
api GET /environments
check_eq "the API works again with the same token" "$STATUS" 200
CONTROL_PID=$(child_pid control)
check_eq "the proxy was not restarted" "$(child_pid proxy)" "$PROXY_PID"

# --- SIGTERM -------------------------------------------------------------------------------------
PROXY_PID=$(child_pid proxy)
up_stop
check_eq "SIGTERM: up exits 0" "$UP_EXIT" 0
check "... the control plane is gone" bash -c "! kill -0 $CONTROL_PID 2>/dev/null"
check "... the proxy is gone" bash -c "! kill -0 ${PROXY_PID:-0} 2>/dev/null"
check "... the nftables table inet $TABLE is removed" no_table
check "... no container is left" no_leftovers
check "... up says the control plane exited 0, then the proxy" bash -c \
  "grep -n 'msg=\"exited\" child=' '$UP_ERR' | tr '\n' ' ' | grep -q 'child=control pid=[0-9]* exit=0.*child=proxy pid=[0-9]* exit=0'"

# --- second run on the same directory --------------------------------------------------------------
ca_sum=$(sha256sum <"$DATA/ca.pem")
key_sum=$(sha256sum <"$DATA/encryption.key")
have_cache=0
if ls /var/cache/sluice/sandbox-*.tar >/dev/null 2>&1; then have_cache=1; fi
image_args=()
if [ "$have_cache" = 1 ]; then image_args=(--image "$TAG_IMAGE"); fi
up_start "${image_args[@]}" || fx_bail "sluice up starts again on the same directory"
check "no new token is printed" bash -c "! grep -q '^  admin token  sl_' '$UP_OUT'"
check "the output says where the token file is" \
  grep -qF "admin token  in $DATA/admin.token" "$UP_OUT"
check_eq "the CA is the same" "$(sha256sum <"$DATA/ca.pem")" "$ca_sum"
check_eq "the encryption key is the same" "$(sha256sum <"$DATA/encryption.key")" "$key_sum"
check "no key warning this time" bash -c "! grep -q 'SLUICE_ENCRYPTION_KEY is unset' '$UP_ERR'"
api GET /environments
check_eq "the first token still works" "$STATUS" 200
check_eq "... and the environment of the first run is there" \
  "$(field '[e["name"] for e in d["environments"]]')" '["example"]'
if [ "$have_cache" = 1 ]; then
  check "the missing $TAG_IMAGE was made by the recipe" sbx_dockerctl image-exists "$TAG_IMAGE"
  check "... and up said so" grep -q "the sandbox image $TAG_IMAGE is missing: building it" \
    "$UP_ERR"
else
  fx_note "no image cache in /var/cache/sluice: the recipe check is skipped"
fi
up_stop
check_eq "SIGTERM again: exit 0" "$UP_EXIT" 0
check "... the table is removed" no_table
check_eq "a second, normal start printed no warning at all, from its start to its stop" \
  "$(warnings "$UP_ERR" | wc -l)" 0
if [ "$FX_LAST" != 0 ]; then warnings "$UP_ERR" | sed 's/^/# /'; fi

# --- no Docker daemon (and the audit log elsewhere) ---------------------------------------------------
# --audit-log as a relative path: up makes it absolute and gives it to both children.
mkdir -p "$FX_WORK/logs"
audit_lines_in_data=$(wc -l <"$DATA/audit.log")
# ... and a proxy on the network besides up's own: --proxy-admin-url and its certificates pass
# through to the control plane, which pushes to it under mutual TLS.
PKI=$FX_WORK/control-pki
{ "$SLUICE_BIN" pki init "$PKI" && "$SLUICE_BIN" pki issue "$PKI" proxy net --ip 127.0.0.1 &&
  "$SLUICE_BIN" pki issue "$PKI" control up; } >"$FX_WORK/pki.log" 2>&1 || fx_bail "sluice pki"
NPORT=$(fx_free_port)
fx_proxy_start --admin-listen "127.0.0.1:$NPORT" --admin-cert "$PKI/proxy-net.pem" \
  --admin-key "$PKI/proxy-net.key" --admin-client-ca "$PKI/ca.pem" ||
  fx_bail "a proxy with --admin-listen starts"
cd "$FX_WORK" || fx_bail "cd $FX_WORK"
up_start --docker-socket "$FX_WORK/nothing.sock" --audit-log logs/audit.log \
  --proxy-admin-url "https://127.0.0.1:$NPORT" --proxy-admin-cert "$PKI/control-up.pem" \
  --proxy-admin-key "$PKI/control-up.key" --proxy-admin-ca "$PKI/ca.pem" ||
  fx_bail "sluice up starts without a Docker daemon"
cd - >/dev/null || fx_bail "cd back"
# url_acked : /api/v1/status lists the URL with the newest version acknowledged.
url_acked() {
  api GET /status
  [ "$(field '[p.get("acknowledged_version") == d["snapshot"]["version"] > 0 for p in d["snapshot"]["proxies"] if p.get("url") == "https://127.0.0.1:'"$NPORT"'"]')" = "[true]" ]
}
check "--proxy-admin-url through up: the control plane pushed to that proxy over TLS" \
  fx_wait 10 url_acked
fx_admin GET /v1/status
check_match "... which holds the snapshot" "$(fx_json "$FX_ADMIN_BODY" 'd["version"]')" '^[0-9]+$'
check "the summary names the audit log given" grep -qF "(audit log: $FX_WORK/logs/audit.log)" "$UP_OUT"
probe_status=$(curl -q -sS --max-time 10 -o "$FX_WORK/probe.body" -w '%{http_code}' \
  -x "http://127.0.0.1:$PPORT" http://up-audit-probe.test/ 2>/dev/null) || true
# 407 no-identity (no sandbox has this address; audited as the challenge it is, proxy.md §4.7),
# or 503 no-policy before the first push (a deny): refused either way, and audited.
check_match "a request from this host is refused" "${probe_status:-000}" '^(407|503)$'
FX_AUDIT=$FX_WORK/logs/audit.log
if [ "${probe_status:-000}" = 407 ]; then
  check_audit "--audit-log FILE: the proxy writes its decision there (challenge no-identity)" \
    host=up-audit-probe.test decision=challenge reason=no-identity status=407
  check "... its body names the address and the control plane's route that registers a client" \
    grep -qF "no-identity: source address 127.0.0.1 is not a registered client, and the request sent no Proxy-Authorization; to be identified, register this address as a client (POST /api/v1/clients" "$FX_WORK/probe.body"
else
  check_audit "--audit-log FILE: the proxy writes its decision there (error no-policy)" \
    host=up-audit-probe.test decision=error reason=no-policy
fi
check_eq "... and not in DATA/audit.log" "$(wc -l <"$DATA/audit.log")" "$audit_lines_in_data"
api GET '/audit?limit=5'
check_eq "... and the dashboard's audit tail reads it" \
  "$(field '[e["host"] for e in d["entries"]][:1]')" '["up-audit-probe.test"]'
check "the output says plainly that no Docker daemon answers" \
  grep -qF "NOT AVAILABLE: no Docker daemon answers on $FX_WORK/nothing.sock" "$UP_OUT"
check "the proxy still listens on this host" fx_port_open "$PPORT"
api POST /repos/demo/hello/sandboxes '{"ref":"main","environment":"example"}'
check_eq "sandbox create without Docker: 503" "$STATUS" 503
check_match "... with a clear message" "$(field 'd.get("message")')" \
  '^sandboxes are not available: the container runtime does not answer'
check_match "... naming the socket and why" "$(field 'd.get("message")')" \
  "cannot connect to $FX_WORK/nothing.sock: No such file or directory"
api GET /environments
check_eq "environments work without Docker" "$STATUS" 200
api POST /environments '{"name":"nodocker","base_image":"x","network":"off"}'
check_eq "... and can be created" "$STATUS" 201
up_stop
check_eq "SIGTERM without Docker: exit 0" "$UP_EXIT" 0
check "... the table is removed" no_table

# --- a bad proxy flag after -- : the proxy exits 2, is not restarted, up stops ---------------------
rc=0
timeout 60 env -u SLUICE_ENCRYPTION_KEY "$SLUICE_BIN" up --data "$DATA" \
  --control-listen "127.0.0.1:$CPORT" --proxy-listen "127.0.0.1:$PPORT" --proxy-port "$GPORT" \
  --network "$NET" --subnet "$SUBNET" --docker-socket "$FX_WORK/nothing.sock" \
  -- --no-such-proxy-flag >"$FX_WORK/badproxy.out" 2>"$FX_WORK/badproxy.err" || rc=$?
check_eq "a bad proxy flag: up exits 1" "$rc" 1
check "... the proxy's own line names the flag" \
  grep -q "proxy: unknown option '--no-such-proxy-flag'" "$FX_WORK/badproxy.err"
check "... up says the proxy exited while starting" \
  grep -q "up: the proxy exited while starting" "$FX_WORK/badproxy.err"
check_eq "... and it was started once" "$(grep -c 'msg="started" child=proxy' "$FX_WORK/badproxy.err")" 1
check "... the control plane was stopped and its table removed" no_table
check "... nothing of it is left running" none_running

# --- up itself killed: its children stop on their own (PR_SET_PDEATHSIG) ----------------------------
up_start --docker-socket "$FX_WORK/nothing.sock" || fx_bail "sluice up starts once more"
check "the table is installed again" nft list table inet "$TABLE"
kill -KILL "$UP_PID"
wait "$UP_PID" 2>/dev/null || true
check "SIGKILL to up: its children stop within 30 s" fx_wait 30 none_running
check "... and the control plane still removed its table" no_table

# --- a user "Admin" made by hand holds up's name "admin" (names are unique ignoring case) -----------
DATA=$FX_WORK/var-admin
"$SLUICE_BIN" user add Admin --data "$DATA" >/dev/null 2>"$FX_WORK/user-add.err" ||
  fx_bail "sluice user add Admin"
up_start --docker-socket "$FX_WORK/nothing.sock" ||
  fx_bail "sluice up starts while a user Admin holds the name admin"
check "... it says that no admin was created and which user holds the name" grep -qF \
  'warning: no admin user "admin" was created: the user "Admin" holds the name' "$UP_ERR"
check "... the summary says there is no admin token and how to make an admin" \
  grep -qF "admin token  none ($DATA/admin.token does not exist); make another admin with" "$UP_OUT"
check "... and no token file was written" test ! -e "$DATA/admin.token"
up_stop
check_eq "... SIGTERM: exit 0" "$UP_EXIT" 0

fx_done
