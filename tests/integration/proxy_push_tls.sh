#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_push_tls.sh - snapshots pushed to a proxy over the network under mutual
# TLS (docs/reference/proxy.md §4.9, `sluice pki`, `sluice control --proxy-admin-url`), all on
# 127.0.0.1:
#   - a PKI made by `sluice pki`; a real `sluice proxy --admin-listen` with its certificate, the
#     CA and the CRL, and a real `sluice control` pushing to it by URL only;
#   - the proxy enforces what was pushed (an allowed host passes, another is 403) and a policy
#     change through the REST API reaches it; /api/v1/status shows the URL with the acknowledged
#     version;
#   - the admin port: the control certificate gets /v1/status; no client certificate (curl and
#     openssl s_client), another CA's, a proxy's, plain HTTP all get no HTTP; a control
#     certificate served once, then revoked (`sluice pki revoke`), is refused at once without a
#     restart;
#   - the proxy killed and started again on the same admin port: pushed again within seconds;
#   - a proxy whose own certificate is revoked: a control plane pushing to it sends nothing (the
#     proxy stays without a policy) and its status says "certificate revoked";
#   - certificates of the wrong kind: a clientAuth one with OU=engine gets no HTTP on the admin
#     port; a proxy showing a node's engine certificate gets nothing ("not a proxy certificate").
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx

pki=$FX_WORK/control-pki
other=$FX_WORK/other-pki
# sluice pki ARGS... quietly; its output goes to the log.
pk() { "$SLUICE_BIN" pki "$@" >>"$FX_WORK/pki.log" 2>&1; }
pk init "$pki" || fx_bail "sluice pki init"
pk issue "$pki" proxy p1 --ip 127.0.0.1 || fx_bail "issue p1"
pk issue "$pki" proxy p2 --ip 127.0.0.1 || fx_bail "issue p2"
pk issue "$pki" control cp || fx_bail "issue cp"
pk issue "$pki" control spare || fx_bail "issue spare"
pk issue "$pki" engine e1 --ip 127.0.0.1 || fx_bail "issue e1"
# What `sluice pki` never issues: a client certificate (clientAuth) of this CA whose kind is
# another's (OU=engine), to see the admin port check the kind on its own.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=sluice/OU=engine/CN=odd" \
  -keyout "$pki/odd.key" -out "$FX_WORK/odd.csr" >>"$FX_WORK/pki.log" 2>&1 || fx_bail "odd: request"
printf 'extendedKeyUsage=clientAuth\n' >"$FX_WORK/odd.ext"
openssl x509 -req -in "$FX_WORK/odd.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -set_serial 4242 \
  -days 1 -extfile "$FX_WORK/odd.ext" -out "$pki/odd.pem" >>"$FX_WORK/pki.log" 2>&1 ||
  fx_bail "odd: certificate"
pk init "$other" || fx_bail "the other PKI"
pk issue "$other" control cp || fx_bail "the other PKI's control certificate"
# p2's certificate is revoked before anything runs.
pk revoke "$pki" "$pki/proxy-p2.pem" || fx_bail "revoke p2"

fx_resolve a.sluice.test b.sluice.test
aport=$(fx_free_port)
admin_args=(--admin-listen "127.0.0.1:$aport" --admin-cert "$pki/proxy-p1.pem"
  --admin-key "$pki/proxy-p1.key" --admin-client-ca "$pki/ca.pem" --admin-crl "$pki/crl.pem")
common=(--upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}")

# The proxy refuses --admin-listen without its certificate, key and CA.
if "$SLUICE_BIN" proxy --data "$FX_WORK/none" --admin-listen "127.0.0.1:$aport" \
  --admin-cert "$pki/proxy-p1.pem" >"$FX_WORK/refused.out" 2>&1; then
  not_ok "--admin-listen without --admin-key and --admin-client-ca is refused"
else
  check_match "--admin-listen without --admin-key and --admin-client-ca is refused, saying so" \
    "$(cat "$FX_WORK/refused.out")" "--admin-listen needs --admin-cert, --admin-key and --admin-client-ca"
fi

fx_proxy_start "${common[@]}" "${admin_args[@]}" || fx_bail "sluice proxy --admin-listen starts"
fx_wait 10 fx_port_open "$aport" || fx_bail "the admin port listens"

# admin_curl CERTNAME [DIR] : GET /v1/status on the admin port as CERTNAME of DIR (default the
# PKI; "-" for no certificate). Prints the HTTP status (000 when none came).
admin_curl() {
  local dir=${2:-$pki} cert=()
  if [ "$1" != - ]; then cert=(--cert "$dir/$1.pem" --key "$dir/$1.key"); fi
  curl -sS --max-time 10 -o "$FX_WORK/admin.body" -w '%{http_code}' --cacert "$pki/ca.pem" \
    "${cert[@]}" "https://127.0.0.1:$aport/v1/status" 2>"$FX_WORK/admin.err" || true
}

# ---- The admin port: who gets in ----
check_eq "the control certificate gets GET /v1/status over TLS" "$(admin_curl control-cp)" 200
check_eq "no client certificate: no HTTP answer (curl)" "$(admin_curl -)" 000
check_match "... the handshake failed: certificate required" "$(cat "$FX_WORK/admin.err")" \
  "certificate required"
sout=$(printf 'GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n' |
  timeout 10 openssl s_client -quiet -connect "127.0.0.1:$aport" -CAfile "$pki/ca.pem" 2>&1 || true)
check "no client certificate: no HTTP answer (openssl s_client)" \
  test -z "$(grep -a 'HTTP/1.1' <<<"$sout" || true)"
check_match "... s_client saw the alert" "$sout" "alert certificate required"
check_eq "a certificate of another CA: no HTTP answer" "$(admin_curl control-cp "$other")" 000
check_match "... refused as an unknown CA" "$(cat "$FX_WORK/admin.err")" "unknown ca"
check_eq "a proxy's certificate used as a client's: no HTTP answer" "$(admin_curl proxy-p1)" 000
check_eq "a client certificate of this CA but of another kind (OU=engine): no HTTP answer" \
  "$(admin_curl odd)" 000
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$aport/v1/status" 2>/dev/null || true)
check_eq "plain HTTP to the admin port: no HTTP answer" "$code" 000
check_eq "the spare control certificate gets in before it is revoked" "$(admin_curl control-spare)" 200
pk revoke "$pki" "$pki/control-spare.pem" || not_ok "sluice pki revoke control-spare"
check_eq "revoked (no restart): no HTTP answer" "$(admin_curl control-spare)" 000
check_match "... refused as revoked" "$(cat "$FX_WORK/admin.err")" "certificate revoked"
check_eq "the proxy still runs (the same process)" "$(kill -0 "$FX_PROXY_PID" && echo alive)" alive
check_eq "... and the control certificate still gets in" "$(admin_curl control-cp)" 200

# ---- A control plane pushing by URL ----
cdata=$FX_WORK/control-data
fx_control_data "$cdata"
ctoken=$FX_CONTROL_TOKEN
cport=$(fx_free_port)
url="https://127.0.0.1:$aport"
# control_start DATA PORT URL LOG : sluice control pushing to URL only, no Docker.
control_start() {
  "$SLUICE_BIN" control --listen "127.0.0.1:$2" --data "$1" --proxy-admin-url "$3" \
    --proxy-admin-cert "$pki/control-cp.pem" --proxy-admin-key "$pki/control-cp.key" \
    --proxy-admin-ca "$pki/ca.pem" --proxy-admin-crl "$pki/crl.pem" \
    --network "pushtls$$" --docker-socket "$FX_WORK/no-docker.sock" >>"$4" 2>&1 &
  FX_CONTROL_PID=$!
  FX_PIDS+=("$FX_CONTROL_PID")
  fx_wait 15 curl -sf -o /dev/null "http://127.0.0.1:$2/healthz"
}
control_start "$cdata" "$cport" "$url" "$FX_WORK/control.log" || fx_bail "sluice control starts"

# api METHOD PATH [JSON] : the control plane's API; FX_CODE and $FX_WORK/api.json.
api() {
  local data=()
  if [ $# -ge 3 ]; then data=(-H 'Content-Type: application/json' -d "$3"); fi
  FX_CODE=$(curl -sS --max-time 20 -o "$FX_WORK/api.json" -w '%{http_code}' -X "$1" \
    -H "Authorization: Bearer $ctoken" "${data[@]}" "http://127.0.0.1:$cport$2" || true)
}
env_json() {
  printf '{"name":"pushtls","scope":"global","base_image":"debian:12","network":"on",'
  printf '"egress":{"default":"deny","rules":[{"host":"%s.sluice.test:%s"}]}}' "$1" "$FX_TLS_PORT"
}
api POST /api/v1/environments "$(env_json a)"
check_eq "create an environment allowing a.sluice.test (201)" "$FX_CODE" 201
envid=$(fx_json "$FX_WORK/api.json" 'd["id"]')
api POST /api/v1/clients "{\"id\":\"local\",\"cidr\":\"127.0.0.0/8\",\"environment\":\"$envid\"}"
check_eq "a static client 127.0.0.0/8 in it (201)" "$FX_CODE" 201

# status_is HOST CODE : a request through the proxy to HOST gets CODE.
status_is() {
  fx_curl "https://$1.sluice.test:$FX_TLS_PORT/hello"
  [ "$FX_CODE" = "$2" ]
}
check "pushed by URL: the proxy lets a.sluice.test through (200)" fx_wait 5 status_is a 200
check "... and refuses b.sluice.test (403)" status_is b 403

# acked_url : /api/v1/status lists the URL with the snapshot's version acknowledged.
acked_url() {
  curl -sf -H "Authorization: Bearer $ctoken" "http://127.0.0.1:$cport/api/v1/status" \
    >"$FX_WORK/status.json" || return 1
  fx_json "$FX_WORK/status.json" \
    '(lambda s, p: p["url"] == "'"$url"'" and "socket" not in p and p["acknowledged_version"] == s["version"] > 0 and not p["unreachable"] and p["last_error"] == "")(d["snapshot"], d["snapshot"]["proxies"][0])' |
    grep -qx true
}
check "/api/v1/status shows the URL with the acknowledged version" fx_wait 5 acked_url
v1=$(fx_json "$FX_WORK/status.json" 'd["snapshot"]["version"]')

api PUT "/api/v1/environments/$envid" "$(env_json b)"
check_eq "change the policy through the REST API: b.sluice.test instead (200)" "$FX_CODE" 200
check "the change reaches the proxy: b.sluice.test passes" fx_wait 5 status_is b 200
check "... and a.sluice.test is refused (403)" status_is a 403
check "/api/v1/status: the newer version acknowledged" fx_wait 5 acked_url
v2=$(fx_json "$FX_WORK/status.json" 'd["snapshot"]["version"]')
check "... newer than the first ($v2 > $v1)" test "$v2" -gt "$v1"

# ---- The proxy killed and started again on the same admin port ----
kill -KILL "$FX_PROXY_PID"
fx_wait_exit "$FX_PROXY_PID" 5 || true
fx_proxy_start "${common[@]}" "${admin_args[@]}" || fx_bail "the proxy starts again"
t0=$(date +%s%N)
# proxy_version : the restarted proxy's version, from its own admin socket.
proxy_has_v2() {
  fx_admin GET /v1/status
  [ "$FX_CODE" = 200 ] && [ "$(fx_json "$FX_ADMIN_BODY" 'd["version"]')" = "$v2" ]
}
if fx_wait 5 proxy_has_v2; then
  ms=$((($(date +%s%N) - t0) / 1000000))
  check_le "restarted: the current snapshot pushed again within 3 s (ms)" "$ms" 3000
else
  not_ok "restarted: the current snapshot pushed again"
fi
check "... and enforced: b.sluice.test passes" status_is b 200
check "... a.sluice.test refused" status_is a 403

# refused_proxy CERT N WHY : a proxy showing CERT (of the PKI) on its admin port and a control
# plane (the Nth) pushing to it alone, with an environment to push; checks that its status says
# the proxy is unreachable because of WHY (in last_error) and acknowledged nothing, and that the
# proxy, a second later, still has no policy and logged no TLS connection that got through.
refused_proxy() {
  local cert=$1 n=$2 why=$3 port cport data token
  port=$(fx_free_port)
  fx_proxy_start "${common[@]}" --admin-listen "127.0.0.1:$port" \
    --admin-cert "$pki/$cert.pem" --admin-key "$pki/$cert.key" \
    --admin-client-ca "$pki/ca.pem" --admin-crl "$pki/crl.pem" || fx_bail "a proxy with $cert starts"
  fx_wait 10 fx_port_open "$port" || fx_bail "its admin port listens"
  data=$FX_WORK/control-data$n
  fx_control_data "$data"
  token=$FX_CONTROL_TOKEN
  cport=$(fx_free_port)
  control_start "$data" "$cport" "https://127.0.0.1:$port" "$FX_WORK/control$n.log" ||
    fx_bail "control plane $n starts"
  curl -sS -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "$(env_json a)" "http://127.0.0.1:$cport/api/v1/environments" || true
  # said : the status names WHY for the proxy.
  said() {
    curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$cport/api/v1/status" \
      >"$FX_WORK/status$n.json" || return 1
    fx_json "$FX_WORK/status$n.json" \
      '(lambda p: p["unreachable"] and p["acknowledged_version"] == 0 and "'"$why"'" in p["last_error"])(d["snapshot"]["proxies"][0])' |
      grep -qx true
  }
  check "$cert: unreachable, status says $why" fx_wait 5 said
  fx_note "its last_error: $(fx_json "$FX_WORK/status$n.json" 'd["snapshot"]["proxies"][0]["last_error"]' || true)"
  sleep 1
  fx_admin GET /v1/status
  check_eq "... and it got nothing: still no policy after a second" \
    "$(fx_json "$FX_ADMIN_BODY" 'd["version"]')" null
  check "... its log shows no TLS connection that got through" \
    test -z "$(grep -a 'http tls peer=' "$FX_PROXY_LOG" || true)"
}

# ---- A proxy whose certificate is revoked: nothing is pushed to it ----
refused_proxy proxy-p2 2 "certificate revoked"
# ---- A proxy that shows a node's engine certificate (the same address, serverAuth) ----
refused_proxy engine-e1 3 "not a proxy certificate"

fx_done
