#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_tls_client.sh - the client side of an intercepted tunnel (docs/reference/proxy.md §4.3):
# a ClientHello without SNI gets the CONNECT host's certificate (by name, and by IP address for
# an IP-literal CONNECT) and its requests work, with the proper SNI sent upstream; an SNI naming
# another host than an IP-literal CONNECT is refused (host-mismatch) before any certificate;
# TLS 1.3 early data sent on a resumed session is rejected and never reaches the origin; a TLS 1.2
# renegotiation is refused; an SNI holding a NUL or raw UTF-8, or one changed in the ClientHello
# after a HelloRetryRequest, is refused as another host's, with its audit line; a client that
# does not trust the proxy's CA is counted and named in the log.
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

# --- (4) TLS 1.3 early data (0-RTT) is never taken ---------------------------------------------
# The proxy's tickets allow no early data. A client that sends some anyway (its saved session
# edited to say 16 KiB are allowed: OpenSSL's s_client then sends the request as 0-RTT data) has
# it rejected: the handshake completes as a resumption, and nothing of the early data is read as
# a request, nor reaches the origin (a replayable request must never go upstream).
sess=$FX_WORK/early.sess
out=$(request ticket2 "$A:$FX_TLS_PORT" | sclient "$A:$FX_TLS_PORT" -servername "$A" \
  -sess_out "$sess" -ign_eof)
check "a ticket from the proxy allows no early data (Max Early Data: 0)" \
  grep -q 'Max Early Data: 0' <<<"$(openssl sess_id -in "$sess" -noout -text 2>&1)"
# force_early SESSION_PEM : the same session with max_early_data 16384 (SSL_SESSION_ASN1 field
# [15], after [14]), on stdout.
force_early() {
  "$FX_PYTHON" - "$1" <<'PY'
import base64, sys
def rd_len(b, i):
    n = b[i]
    if n < 0x80:
        return n, i + 1
    k = n & 0x7F
    return int.from_bytes(b[i + 1:i + 1 + k], "big"), i + 1 + k
def enc_len(n):
    if n < 0x80:
        return bytes([n])
    s = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(s)]) + s
der = base64.b64decode(open(sys.argv[1]).read().split("-----")[2])
n, i = rd_len(der, 1)
kids, j = [], i
while j < i + n:
    ln, k = rd_len(der, j + 1)
    kids.append(der[j:k + ln])
    j = k + ln
kids = [c for c in kids if c[0] != 0xAF]
field = bytes([0xAF, 0x04, 0x02, 0x02, 0x40, 0x00])
at = next((x for x, c in enumerate(kids) if 0xAF < c[0] <= 0xBF), len(kids))
kids.insert(at, field)
body = b"".join(kids)
b64 = base64.b64encode(bytes([0x30]) + enc_len(len(body)) + body).decode()
print("-----BEGIN SSL SESSION PARAMETERS-----")
for x in range(0, len(b64), 64):
    print(b64[x:x + 64])
print("-----END SSL SESSION PARAMETERS-----")
PY
}
force_early "$sess" >"$sess.early"
request early0rtt "$A:$FX_TLS_PORT" >"$FX_WORK/early.req"
out=$(sclient "$A:$FX_TLS_PORT" -servername "$A" -sess_in "$sess.early" \
  -early_data "$FX_WORK/early.req" -ign_eof </dev/null)
check "0-RTT: the client resumed and sent its request as early data" \
  grep -q 'Reused, TLSv1.3' <<<"$out"
check "0-RTT: the proxy rejected the early data (s_client: Early data was rejected)" \
  grep -q 'Early data was rejected' <<<"$out"
check "0-RTT: no response came back for it (nothing of it was read as a request)" \
  bash -c "! grep -q 'HTTP/1.1' <<<'$out'"
check_eq "0-RTT: nothing of it reached nginx" "$(fx_jsonl_count "$FX_NGINX_LOG" probe=early0rtt)" 0

# --- (5) TLS 1.2 renegotiation is refused ---------------------------------------------------------
# s_client's R command asks for a renegotiation: the proxy answers with a no_renegotiation alert
# (renegotiation is off, docs/reference/proxy.md §4.1), which OpenSSL's client takes as the end.
out=$( (
  printf 'R\n'
  sleep 1
  request reneg "$A:$FX_TLS_PORT"
  sleep 1
) 2>/dev/null | sclient "$A:$FX_TLS_PORT" -servername "$A" -tls1_2) || true # s_client may end first
check "TLS 1.2: the handshake completed" grep -q 'New, TLSv1.2' <<<"$out"
check "TLS 1.2 renegotiation: refused (the client got a no_renegotiation alert)" \
  grep -q 'no renegotiation' <<<"$out"
check_eq "TLS 1.2 renegotiation: no request went on after it" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=reneg)" 0

# --- (6) an SNI no host can have is refused as another host's, with its audit line -------------
# rawsni TARGET STAND_IN BYTES : CONNECT TARGET, then a ClientHello whose SNI is BYTES (a Python
# bytes literal; Python's ssl refuses such names, so a stand-in of the same length is replaced
# in the ClientHello's bytes). Prints the proxy's answer: `alert=N` (the TLS alert's code), or
# the first bytes in hex.
rawsni() {
  timeout 20 "$FX_PYTHON" - "$FX_PROXY_PORT" "$@" <<'PY'
import ast, socket, ssl, sys
port, target, standin, real = int(sys.argv[1]), sys.argv[2], sys.argv[3], ast.literal_eval(sys.argv[4])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname=standin)
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
assert hello.count(standin.encode()) == 1 and len(real) == len(standin)
hello = hello.replace(standin.encode(), real)
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
s.sendall(hello)
got = b""
try:
    while True:
        d = s.recv(4096)
        if not d:
            break
        got += d
except OSError:
    pass
print(f"alert={got[6]}" if got[:1] == b"\x15" and len(got) >= 7 else f"answer={got[:8].hex()}")
PY
}
mm0=$(fx_jsonl_count "$FX_AUDIT" decision=error reason=host-mismatch host="$A")
out=$(rawsni "$A:$FX_TLS_PORT" "$A-evil" "b'$A\\x00evil'")
check_eq "SNI '$A\\0evil' (a NUL) in a tunnel to $A: refused, unrecognized_name (112)" "$out" \
  alert=112
out=$(rawsni "$A:$FX_TLS_PORT" "xx.$A" "b'\\xc3\\xa4.$A'")
check_eq "SNI 'ä.$A' (raw UTF-8, not an A-label) in a tunnel to $A: refused, unrecognized_name" \
  "$out" alert=112
mm_has() {
  [ "$(fx_jsonl_count "$FX_AUDIT" decision=error reason=host-mismatch host="$A" status=0)" \
    -ge $((mm0 + 2)) ]
}
check "... each with its audit line: CONNECT $A, host-mismatch, status 0" fx_wait 5 mm_has

# --- (7) the ClientHello after a HelloRetryRequest keeps the first one's SNI ---------------------
# hrr SNI2 : CONNECT $A, a TLS 1.3 ClientHello with SNI $A and no key share (the proxy answers
# with a HelloRetryRequest), then a second ClientHello with a key share and SNI SNI2
# (tests/support/tls_hrr.py). Prints `hrr` when the first answer was a HelloRetryRequest, then
# `hello` (the handshake went on: a ServerHello) or `alert=N`.
hrr() {
  timeout 20 "$FX_PYTHON" "$FX_SUPPORT/tls_hrr.py" --proxy "$FX_PROXY_PORT" \
    --target "$A:$FX_TLS_PORT" --sni1 "$A" --sni2 "$1"
}
check_eq "a HelloRetryRequest, then the same SNI again: the handshake goes on" \
  "$(hrr "$A" | paste -sd' ' -)" "hrr hello"
mm0=$(fx_jsonl_count "$FX_AUDIT" decision=error reason=host-mismatch host="$A")
check_eq "a HelloRetryRequest, then SNI b.sluice.test: refused (illegal_parameter, 47)" \
  "$(hrr b.sluice.test | paste -sd' ' -)" "hrr alert=47"
mm_has() {
  [ "$(fx_jsonl_count "$FX_AUDIT" decision=error reason=host-mismatch host="$A" status=0)" \
    -ge $((mm0 + 1)) ]
}
check "... with its audit line: CONNECT $A, host-mismatch, status 0" fx_wait 5 mm_has

# --- (8) a client that does not trust the proxy's CA is named at the info level ----------------
# curl trusting only the test CA (not the proxy's) refuses the minted leaf with an unknown_ca
# alert. The proxy says so once per worker per 10 s with the host and the client's address, and
# counts every such refusal; the handshake failures above (refusals of the proxy's own, a client
# leaving) are not counted. The curls run on CPU 0, so they meet one worker (§4.8).
# refusals : sluice_tls_certificate_refusals_total in a fresh scrape.
refusals() {
  fx_admin GET /metrics
  awk '$1 == "sluice_tls_certificate_refusals_total" { print $2 }' "$FX_ADMIN_BODY"
}
pin=
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin="taskset -c 0"; fi
check_eq "no certificate refusal counted yet (the failures above were not the client's alerts)" \
  "$(refusals)" 0
untrusted=0
for i in 1 2 3; do
  FX_CURL_IN=$pin fx_curl --cacert "$FX_TEST_CA" "https://$A:$FX_TLS_PORT/hello"
  if [ "$FX_RC" = 60 ]; then untrusted=$((untrusted + 1)); fi
done
check_eq "3 curls that trust only the test CA fail to verify the proxy's leaf (exit 60)" \
  "$untrusted" 3
# The proxy reads the alert after curl has gone: give it a moment.
# shellcheck disable=SC2317 # called through check
refusals_are() { [ "$(refusals)" = "$1" ]; }
check "... sluice_tls_certificate_refusals_total counts 3" fx_wait 5 refusals_are 3
refused_line="a client refused the proxy's certificate: it must trust the proxy's CA"
check "... the log names the refusal, the alert, the host and the client's address" \
  fx_wait 5 grep -qF \
  "$refused_line (sluice ca show)\" alert=\"unknown CA\" host=$A client_address=127.0.0.1" \
  "$FX_PROXY_LOG"
if [ -n "$pin" ]; then
  check_eq "... once for the three (one line per worker per 10 s)" \
    "$(grep -cF "$refused_line" "$FX_PROXY_LOG")" 1
fi
FX_CURL_IN=$pin fx_curl "https://$A:$FX_TLS_PORT/hello"
check_eq "a curl that trusts the proxy's CA still gets 200" "$FX_CODE" 200
check_eq "... and adds no refusal" "$(refusals)" 3

check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
