#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_upstream_tls.sh - the upstream TLS matrix of docs/reference/proxy.md §4.4: each of
# these upstreams gets a 502 with X-Sluice-Reason upstream-tls, the verification error in the
# body, an audit line, and not one request sent to it:
#   not yet valid; SAN naming another host while the CN names the right one; CN only, no SAN;
#   extendedKeyUsage clientAuth only; self-signed; a wildcard two labels deep (*.sluice.test for
#   a.b.sluice.test); a server that speaks only TLS 1.0/1.1.
#   a server that asks for a client certificate (TLS 1.3: its alert after the handshake);
#   a 1024-bit RSA key, also when the host's OpenSSL would take it (security level 1).
# (Expired, untrusted CA, wrong name and a TLS session reused for another name are in
# proxy_upstream.sh.) Each bad upstream is nginx with a leaf from fx_test_ca_matrix that differs
# from the good one in that one respect; a positive control (the good leaf, same nginx) shows
# that the setup itself works.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup

fx_test_ca_matrix || fx_bail "the test CA makes the matrix leaves"
ok "the test CA makes the matrix leaves"

# One nginx server per bad leaf, plus one that speaks only TLS 1.0 and 1.1 (good leaf). OpenSSL 3
# needs security level 0 for those versions (their handshake signatures use SHA-1).
names=(notyet sanother cnonly clientauth selfsigned old weakkey)
mapfile -t mports < <(fx_free_ports "${#names[@]}")
declare -A port
FX_NGINX_EXTRA=
FX_NGINX_EXTRA_PORTS=
for i in "${!names[@]}"; do
  n=${names[$i]}
  port[$n]=${mports[$i]}
  leaf=$n
  extra=
  if [ "$n" = old ]; then
    leaf=good
    extra='ssl_protocols TLSv1 TLSv1.1; ssl_ciphers DEFAULT:@SECLEVEL=0;'
  elif [ "$n" = weakkey ]; then
    leaf=rsa1024
    extra='ssl_ciphers DEFAULT:@SECLEVEL=0;'
  fi
  FX_NGINX_EXTRA+="
  server {
    listen 127.0.0.1:${port[$n]} ssl;
    ssl_certificate $FX_PKI/$leaf.pem;
    ssl_certificate_key $FX_PKI/$leaf.key;
    $extra
    include $FX_WORK/nginx/common.conf;
  }"
  FX_NGINX_EXTRA_PORTS+=" ${port[$n]}"
done
fx_nginx_start || fx_bail "nginx starts"
ok "nginx starts (the good upstream and ${#names[@]} bad ones)"

# The TLS 1.0/1.1 server must really be one: it completes a TLS 1.1 handshake and refuses 1.2.
# Otherwise its 502 below would prove nothing.
old_tls() { # old_tls VERSION-FLAG : a direct handshake with the old server (no proxy)
  timeout 10 openssl s_client -connect "127.0.0.1:${port[old]}" "$1" \
    -cipher 'DEFAULT:@SECLEVEL=0' -CAfile "$FX_TEST_CA" </dev/null 2>&1
}
out=$(old_tls -tls1_1 || true)
old_ok=0
if grep -qE 'Protocol *: TLSv1\.1' <<<"$out"; then
  old_ok=1
  ok "control: the old server completes a TLS 1.1 handshake (direct, no proxy)"
else
  not_ok "control: the old server completes a TLS 1.1 handshake (direct, no proxy)"
  grep -E 'Protocol|error|alert' <<<"$out" | head -n 5 | sed 's/^/#   /'
fi
out=$(old_tls -tls1_2 || true)
check "control: ... and refuses TLS 1.2" grep -q 'Cipher is (NONE)' <<<"$out"

# An upstream that wants a client certificate, TLS 1.3 only: its alert (certificate_required)
# comes after the proxy's Finished, once it has read the request, not in the handshake the
# proxy saw complete. openssl s_server, as nginx answers a missing certificate with an HTTP 400.
port[certreq]=$(fx_free_port)
openssl s_server -quiet -accept "127.0.0.1:${port[certreq]}" -tls1_3 -Verify 1 \
  -CAfile "$FX_TEST_CA" -cert "$FX_PKI/good.pem" -key "$FX_PKI/good.key" -www \
  </dev/null >"$FX_WORK/certreq.log" 2>&1 &
FX_PIDS+=("$!")
fx_wait 10 fx_port_open "${port[certreq]}" || fx_bail "openssl s_server (client certificate) starts"
certreq_direct() { # certreq_direct [ARGS...] : a GET to the s_server straight, no proxy
  printf 'GET / HTTP/1.0\r\n\r\n' | timeout 10 openssl s_client -quiet \
    -connect "127.0.0.1:${port[certreq]}" -servername a.sluice.test -CAfile "$FX_TEST_CA" \
    "$@" 2>&1
}
out=$(certreq_direct -cert "$FX_PKI/clientauth.pem" -key "$FX_PKI/clientauth.key" || true)
check "control: the client-certificate server answers a client with a certificate (direct)" \
  grep -q 'HTTP/1.0 200' <<<"$out"
out=$(certreq_direct || true)
check "control: ... and refuses one without (direct): certificate required" \
  grep -q 'certificate required' <<<"$out"

policy=$FX_WORK/policy.json
rules=""
for p in "$FX_TLS_PORT" "${port[@]}"; do
  rules+="{ \"host\": \"a.sluice.test:$p\" }, "
done
fx_policy "$policy" "{
  \"version\": 1,
  \"environments\": { \"tls\": { \"default\": \"deny\", \"rules\": [
    $rules { \"host\": \"a.b.sluice.test:$FX_TLS_PORT\" } ] } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"tls\" } ]
}"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$policy' >/dev/null"
resolve=(--resolve "a.sluice.test:$FX_TLS_PORT:127.0.0.1"
  --resolve "a.b.sluice.test:$FX_TLS_PORT:127.0.0.1")
for p in "${port[@]}"; do
  resolve+=(--resolve "a.sluice.test:$p:127.0.0.1")
done
proxy_args=(--policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8
  "${resolve[@]}")
fx_proxy_start "${proxy_args[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

fx_curl -H "X-Probe: good" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "control: the good upstream (same CA, same nginx): 200" 200 -
check_eq "control: ... with nginx's body" "$(cat "$FX_BODY")" "hello from nginx"

# bad_tls ID NAME PORT BODY-REGEX [HOST] : three requests (a failure must not be cached as a
# success, nor a session kept) each get 502 upstream-tls with a body matching BODY-REGEX; none
# of them (X-Probe: ID-N) reaches nginx; an audit line says upstream-tls.
bad_tls() {
  local id=$1 name=$2 p=$3 want=$4 host=${5:-a.sluice.test} try body_ok=1
  for try in 1 2 3; do
    fx_curl -H "X-Probe: $id-$try" "https://$host:$p/hello"
    check_status "$name: try $try: 502 upstream-tls" 502 upstream-tls
    if ! grep -qE -- "$want" "$FX_BODY"; then body_ok=0; fi
  done
  if [ "$body_ok" = 1 ]; then
    ok "$name: the 502 body names the error (/$want/)"
  else
    not_ok "$name: the 502 body names the error (/$want/)"
    fx_curl_show
  fi
  check_eq "$name: no request reached that upstream" \
    "$(fx_jsonl_count "$FX_NGINX_LOG" probe~"$id-")" 0
  check_audit "$name: audit line with reason upstream-tls" \
    decision=error reason=upstream-tls host="$host" port="$p"
}
bad_tls notyet "not yet valid" "${port[notyet]}" 'not yet valid'
bad_tls sanother "SAN other.example, CN a.sluice.test" "${port[sanother]}" 'hostname mismatch'
bad_tls cnonly "CN a.sluice.test, no SAN" "${port[cnonly]}" 'hostname mismatch'
bad_tls clientauth "EKU clientAuth only" "${port[clientauth]}" 'unsuitable certificate purpose'
bad_tls selfsigned "self-signed" "${port[selfsigned]}" 'self.signed certificate'
bad_tls certreq "asks for a client certificate (TLS 1.3)" "${port[certreq]}" \
  "TLS failed: .*certificate required"
check "asks for a client certificate: the proxy's log says why (upstream refused)" \
  grep -q 'msg="upstream refused".*reason=upstream-tls.*certificate required' "$FX_PROXY_LOG"
bad_tls wild2 "*.sluice.test for a.b.sluice.test" "$FX_TLS_PORT" 'hostname mismatch' \
  a.b.sluice.test
if [ "$old_ok" = 1 ]; then
  bad_tls old "TLS 1.0/1.1 only" "${port[old]}" 'TLS handshake failed|closed the connection'
else
  fx_skip "TLS 1.0/1.1 only upstream: 502 upstream-tls" \
    "nginx with this OpenSSL cannot serve TLS 1.1 here (see the control above)"
fi

fx_curl -H "X-Probe: good-after" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "control: the good upstream still works after the failures: 200" 200 -

# A 1024-bit RSA leaf is below the floor the proxy sets for upstreams (OpenSSL security level
# 2, 112 bits) whatever the host's OpenSSL defaults to. OpenSSL's own default is level 1, which
# takes it; Debian's build says 2. A proxy whose OpenSSL says 1 (another build, or OPENSSL_CONF
# as here) used to take the weak key.
bad_tls weakkey "1024-bit RSA leaf" "${port[weakkey]}" 'key too weak'
level1=$FX_WORK/seclevel1.cnf
printf '%s\n' 'openssl_conf = conf' '[conf]' 'ssl_conf = ssl' '[ssl]' \
  'system_default = system_default' '[system_default]' 'CipherString = DEFAULT:@SECLEVEL=1' \
  >"$level1"
weak_direct() { # weak_direct [OPENSSL_CONF] : s_client to the weak-key server, verifying
  env ${1:+OPENSSL_CONF="$1"} timeout 10 openssl s_client -connect "127.0.0.1:${port[weakkey]}" \
    -servername a.sluice.test -CAfile "$FX_TEST_CA" -verify_return_error </dev/null 2>&1
}
out=$(weak_direct "$level1" || true)
check "control: under that configuration OpenSSL itself takes the 1024-bit key (direct)" \
  grep -q 'Verify return code: 0 (ok)' <<<"$out"
out=$(weak_direct || true)
check "control: ... and under this host's default it does not (direct)" \
  grep -q 'key too weak' <<<"$out"
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
export OPENSSL_CONF=$level1
fx_proxy_start "${proxy_args[@]}" || fx_bail "sluice proxy starts under OPENSSL_CONF (level 1)"
unset OPENSSL_CONF
ok "sluice proxy starts under an OPENSSL_CONF of security level 1"
fx_curl -H "X-Probe: good-level1" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "control: level 1: the good upstream: 200" 200 -
bad_tls weakkey1 "level 1: 1024-bit RSA leaf" "${port[weakkey]}" 'key too weak'
check "SIGTERM stops the second proxy with exit 0" fx_proxy_stop

fx_done
