#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_tls_client.sh - the client side of an intercepted tunnel (docs/reference/proxy.md §4.3):
# a ClientHello without SNI gets the CONNECT host's certificate (by name, and by IP address for
# an IP-literal CONNECT) and its requests work, with the proper SNI sent upstream; an SNI naming
# another host than an IP-literal CONNECT is refused (host-mismatch) before any certificate.
# (SNI naming another host than a CONNECT by name is in proxy_edges.sh; ALPN h2 alone and
# h2,http/1.1 are in proxy_basic.sh.)
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx
A=a.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" cli "$A:$FX_TLS_PORT" "127.0.0.1:$FX_TLS_PORT"
fx_resolve "$A"
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  "${FX_RESOLVE[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

# sclient TARGET ARGS... : openssl s_client through the proxy (CONNECT TARGET), trusting the
# sluice CA, bounded in time; output (stdout and stderr) on stdout.
sclient() {
  local target=$1
  shift
  timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" -connect "$target" \
    -CAfile "$FX_SLUICE_CA" "$@" 2>&1 || true
}
# request PROBE HOST : a GET /hello with Connection: close.
request() {
  printf 'GET /hello HTTP/1.1\r\nHost: %s\r\nX-Probe: %s\r\nConnection: close\r\n\r\n' "$2" "$1"
}
# leaf_names : the subject and subjectAltName of the first certificate in stdin.
leaf_names() {
  openssl x509 -noout -subject -ext subjectAltName 2>/dev/null | tr '\n' ' '
}
# verified DESCRIPTION TARGET ARGS... : the certificate sclient TARGET ARGS... gets verifies; its
# names in $names.
verified() {
  local what=$1 target=$2 got
  shift 2
  got=$(sclient "$target" "$@" </dev/null)
  check "$what" grep -q 'Verify return code: 0 (ok)' <<<"$got"
  names=$(leaf_names <<<"$got")
}

# --- (0) what a default client gets: TLS 1.3 with AES-128-GCM (the proxy's first choice), and
# one session ticket per full handshake (OpenSSL sends two unless told otherwise) --------------
out=$(request ticket "$A:$FX_TLS_PORT" | sclient "$A:$FX_TLS_PORT" -servername "$A" \
  -verify_return_error -ign_eof)
check "a default client negotiates TLS 1.3 with TLS_AES_128_GCM_SHA256" \
  grep -q 'New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256' <<<"$out"
check_eq "one session ticket per full handshake" \
  "$(grep -c 'Post-Handshake New Session Ticket arrived' <<<"$out")" 1

# --- (1) no SNI, CONNECT by name ----------------------------------------------------------------
verified "no SNI (s_client -noservername), CONNECT $A: the certificate verifies for $A" \
  "$A:$FX_TLS_PORT" -noservername -verify_hostname "$A" -verify_return_error
check_match "no SNI: the certificate is the CONNECT host's (SAN DNS:$A)" "$names" \
  "DNS:$A( |,|\$)"
check_eq "no SNI: ... and names no other host" \
  "$(grep -oE 'DNS:[^ ,]+|IP Address:[^ ,]+' <<<"$names" | sort -u | paste -sd' ' -)" "DNS:$A"
out=$(request nosni "$A:$FX_TLS_PORT" | sclient "$A:$FX_TLS_PORT" -noservername \
  -verify_hostname "$A" -verify_return_error -quiet)
check_match "no SNI: a request in that tunnel works (200, nginx's body)" "$out" \
  $'HTTP/1.1 200.*hello from nginx'
check_eq "no SNI: nginx got it once, with SNI $A sent upstream by the proxy" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=nosni sni="$A" status=200)" 1
check_audit "no SNI: audit line (allow, $A)" decision=allow host="$A" port="$FX_TLS_PORT" \
  status=200

# --- (2) no SNI, CONNECT by IP address ------------------------------------------------------------
# RFC 6066 §3: an IP address is never sent as SNI, so this is what every client sends there.
verified "no SNI, CONNECT 127.0.0.1: the certificate verifies for IP 127.0.0.1" \
  "127.0.0.1:$FX_TLS_PORT" -noservername -verify_ip 127.0.0.1 -verify_return_error
check_match "no SNI, CONNECT 127.0.0.1: the certificate carries IP Address:127.0.0.1" "$names" \
  'IP Address:127\.0\.0\.1'
check "no SNI, CONNECT 127.0.0.1: ... and no DNS name" bash -c "! grep -q 'DNS:' <<<'$names'"
out=$(request nosni-ip "127.0.0.1:$FX_TLS_PORT" | sclient "127.0.0.1:$FX_TLS_PORT" \
  -noservername -verify_ip 127.0.0.1 -verify_return_error -quiet)
check_match "no SNI, CONNECT 127.0.0.1: a request works (200, nginx's body)" "$out" \
  $'HTTP/1.1 200.*hello from nginx'
check_eq "no SNI, CONNECT 127.0.0.1: nginx got it once, without SNI (none is sent for an IP)" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=nosni-ip sni= status=200)" 1

# --- (3) an SNI naming a host while the CONNECT names an IP address ------------------------------
out=$(request sni-ip "127.0.0.1:$FX_TLS_PORT" | sclient "127.0.0.1:$FX_TLS_PORT" \
  -servername "$A" -quiet)
check "SNI $A in a tunnel to 127.0.0.1: the handshake fails before any certificate" \
  bash -c "! grep -q 'HTTP/1.1' <<<'$out'"
out=$(sclient "127.0.0.1:$FX_TLS_PORT" -servername "$A" </dev/null)
check "SNI $A in a tunnel to 127.0.0.1: no certificate was sent" \
  grep -q 'no peer certificate available' <<<"$out"
check_eq "SNI $A in a tunnel to 127.0.0.1: nothing reached nginx" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=sni-ip)" 0
check_audit "SNI $A in a tunnel to 127.0.0.1: audit line with reason host-mismatch" \
  decision=error reason=host-mismatch host=127.0.0.1 port="$FX_TLS_PORT"

check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
