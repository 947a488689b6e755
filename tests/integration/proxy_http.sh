#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_http.sh - HTTP/1.x through `sluice proxy` against nginx and origin.py
# (docs/reference/proxy.md §4.1, §4.4, §4.6, §4.8, §4.10): message framing (chunked both ways, HEAD, 204, 304,
# close-delimited, 100-continue, HTTP/1.0 on either side), hop-by-hop headers, keep-alive and
# upstream pooling, 50 parallel clients, a 1 GiB download and a 256 MiB chunked upload in
# bounded memory, a client that stops reading, plain HTTP in absolute form, and SIGTERM while a
# download is in flight.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx origin
fx_nginx_big

rss_limit_kib=$((64 * 1024))

secret="Bearer sl-$(fx_random_hex 24)"
policy=$FX_WORK/policy.json
fx_local_policy "$policy" web "a.sluice.test:$FX_TLS_PORT" "a.sluice.test:$FX_HTTP_PORT" \
  "a.sluice.test:$FX_PY_TLS_PORT" "a.sluice.test:$FX_PY_HTTP_PORT" \
  "$(fx_cred_rule "cred.sluice.test:$FX_HTTP_PORT" "$secret")"
fx_resolve a.sluice.test cred.sluice.test deny.sluice.test
# Two workers, so the memory bound below does not depend on this machine's core count.
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --workers 2 "${FX_RESOLVE[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

PY=https://a.sluice.test:$FX_PY_TLS_PORT
NG=https://a.sluice.test:$FX_TLS_PORT

# echo_field EXPR : a field of the last /echo answer.
echo_field() { fx_json "$FX_BODY" "$1"; }

# --- (9) framing ------------------------------------------------------------------------------
fx_pattern 300000 >"$FX_WORK/body300k"
sha300k=$(fx_sha256 "$FX_WORK/body300k")

fx_curl -H 'Transfer-Encoding: chunked' --data-binary @"$FX_WORK/body300k" "$PY/echo"
check_status "chunked request body: 200" 200 -
check_eq "chunked request body: the origin got every byte" \
  "$(echo_field 'd["body_sha256"] + " " + str(d["body_length"])')" "$sha300k 300000"

fx_curl --data-binary @"$FX_WORK/body300k" "$PY/echo"
check_eq "Content-Length request body: the origin got every byte" \
  "$(echo_field 'd["body_sha256"] + " " + str(d["body_length"])')" "$sha300k 300000"

fx_curl "$PY/stream?bytes=3000000"
check_status "chunked response: 200" 200 -
check_eq "chunked response: every byte arrived" "$(fx_body_sha256)" "$(fx_pattern_sha256 3000000)"

fx_curl "$PY/close?bytes=2000000"
check_status "close-delimited response: 200" 200 -
check_eq "close-delimited response: every byte arrived" "$(fx_body_sha256)" \
  "$(fx_pattern_sha256 2000000)"

fx_curl "$PY/http10?bytes=500000"
check_status "HTTP/1.0 origin response without length: 200" 200 -
check_eq "HTTP/1.0 origin response: every byte arrived" "$(fx_body_sha256)" \
  "$(fx_pattern_sha256 500000)"

fx_curl -I "$NG/hello"
check_status "HEAD: 200" 200 -
check_eq "HEAD: 200 without a body" "$FX_CODE $FX_SIZE" "200 0"
fx_curl "$NG/204"
check_status "204 from nginx" 204 -
fx_curl "$NG/static.txt"
etag=$(fx_header ETag "$FX_HDRS")
fx_curl -H "If-None-Match: $etag" "$NG/static.txt"
check_status "304 for a matching If-None-Match" 304 -
check_eq "304: without a body" "$FX_CODE $FX_SIZE" "304 0"

# Bodiless responses followed by another request on the same tunnel: the proxy must not wait
# for a body that will never come.
seq_out=$FX_WORK/seq.out
fx_pyclient --connect "a.sluice.test:$FX_TLS_PORT" --header "If-None-Match: $etag" \
  --request 'HEAD /hello' --request 'GET /204' --request 'GET /static.txt' \
  --request 'GET /hello' --timeout 10 >"$seq_out" || true
check_eq "HEAD, 204, 304, then GET on one tunnel (nginx)" \
  "$(grep '^status=' "$seq_out" | cut -d' ' -f1-3 | tr '\n' ' ')" \
  "status=200 reason=- length=0 status=204 reason=- length=0 status=304 reason=- length=0 status=200 reason=- length=17 "
fx_pyclient --connect "a.sluice.test:$FX_PY_TLS_PORT" --request 'HEAD /stream?bytes=100' \
  --request 'GET /status?code=204' --request 'GET /status?code=304' --request 'GET /hello' \
  --timeout 10 >"$seq_out" || true
check_eq "HEAD of a chunked response, 204, 304, then GET on one tunnel (origin.py)" \
  "$(grep '^status=' "$seq_out" | cut -d' ' -f1-3 | tr '\n' ' ')" \
  "status=200 reason=- length=0 status=204 reason=- length=0 status=304 reason=- length=0 status=200 reason=- length=21 "

fx_pattern 2000000 >"$FX_WORK/body2m"
fx_curl -H 'Expect: 100-continue' --expect100-timeout 60 --data-binary @"$FX_WORK/body2m" "$PY/echo"
check_status "Expect: 100-continue: 200 (curl waits 60 s for the 100, max-time 20)" 200 -
check "Expect: 100-continue: the client got 100 Continue" grep -q '^HTTP/1.1 100' "$FX_HDRS"
check_eq "Expect: 100-continue: the origin got every byte" \
  "$(echo_field 'd["body_sha256"]')" "$(fx_sha256 "$FX_WORK/body2m")"
fx_curl -H 'Expect: 100-continue' --expect100-timeout 60 --data-binary @"$FX_WORK/body2m" \
  "$PY/echo?continue=no"
check_status "Expect: 100-continue refused by the origin: its 417 reaches the client" 417 -

fx_curl --http1.0 "$PY/stream?bytes=400000"
check_status "HTTP/1.0 client: 200" 200 -
check_eq "HTTP/1.0 client: a chunked origin body arrives de-chunked" "$(fx_body_sha256)" \
  "$(fx_pattern_sha256 400000)"
check "HTTP/1.0 client: a 200 that is not chunked" \
  bash -c "[ $FX_CODE = 200 ] && ! grep -qi '^transfer-encoding:' '$FX_HDRS'"
fx_curl --http1.0 "$NG/hello"
check_eq "HTTP/1.0 client: nginx body" "$(cat "$FX_BODY")" "hello from nginx"
# The same with an HTTP/1.0 request line after an http/1.1 ALPN (curl --http1.0 offers ALPN
# http/1.0 only): the framing alone.
out=$(fx_pyclient --connect "a.sluice.test:$FX_PY_TLS_PORT" --http-version HTTP/1.0 \
  --request 'GET /stream?bytes=400000' | grep '^status=' | head -n 1) || true
check_match "HTTP/1.0 request line (ALPN http/1.1): the whole body, not chunked" "$out" \
  "^status=200 reason=- length=400000 sha256=$(fx_pattern_sha256 400000) framing=(length|close)\$"

# --- (4.6) hop-by-hop headers are not forwarded -------------------------------------------------
hop=(-H 'Connection: keep-alive, X-Hop' -H 'X-Hop: 1' -H 'Keep-Alive: timeout=5'
  -H 'TE: trailers' -H 'Proxy-Connection: keep-alive' -H 'X-End-To-End: kept')
hop_left() {
  fx_json "$FX_BODY" 'sorted({n.lower() for n, v in d["headers"]} & {"x-hop", "keep-alive",
    "te", "proxy-connection", "proxy-authorization", "trailer"})'
}
fx_curl "${hop[@]}" "$PY/echo"
check_eq "hop-by-hop headers removed inside the tunnel" "$(hop_left)" '[]'
check_eq "end-to-end headers kept inside the tunnel" \
  "$(echo_field '[v for n, v in d["headers"] if n.lower() == "x-end-to-end"]')" '["kept"]'
fx_curl "${hop[@]}" "http://a.sluice.test:$FX_PY_HTTP_PORT/echo"
check_eq "hop-by-hop headers removed on plain HTTP" "$(hop_left)" '[]'

# --- (7) keep-alive: 200 requests, one client connection, one upstream connection -------------
cfg=$FX_WORK/seq.curlrc
for i in $(seq 1 200); do
  printf 'url = "%s/hello?run=curl-seq&i=%d"\noutput = "/dev/null"\n' "$PY" "$i"
done >"$cfg"
timeout 120 curl -q -sS --max-time 60 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_SLUICE_CA" -K "$cfg" -w '%{http_code} %{num_connects}\n' \
  >"$FX_WORK/seq.codes" 2>"$FX_WORK/seq.err" || true
check_eq "200 sequential requests (curl): all 200" \
  "$(grep -c '^200 ' "$FX_WORK/seq.codes" || true)" 200
check_eq "200 sequential requests (curl): one client connection" \
  "$(awk '{ n += $2 } END { print n + 0 }' "$FX_WORK/seq.codes")" 1
check_eq "200 sequential requests (curl): one upstream connection" \
  "$(fx_jsonl_distinct "$FX_ORIGIN_LOG" conn target~run=curl-seq)" 1

fx_pyclient --connect "a.sluice.test:$FX_PY_TLS_PORT" --request 'GET /hello?run=py-seq' \
  --count 200 >"$FX_WORK/pyseq.out" || true
check_eq "200 requests on one tunnel (python client): all 200" \
  "$(grep -c '^status=200 ' "$FX_WORK/pyseq.out" || true)" 200
check_eq "200 requests on one tunnel (python client): one upstream connection" \
  "$(fx_jsonl_distinct "$FX_ORIGIN_LOG" conn target~run=py-seq)" 1

pids=()
for i in $(seq 1 50); do
  curl -q -sS --max-time 60 --proxy "http://127.0.0.1:$FX_PROXY_PORT" --cacert "$FX_SLUICE_CA" \
    -o "$FX_WORK/par.$i.body" -w '%{http_code}' "$PY/stream?bytes=200000&run=par" \
    >"$FX_WORK/par.$i.code" 2>/dev/null &
  pids+=("$!")
  FX_PIDS+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
par_ok=0
want_par=$(fx_pattern_sha256 200000)
for i in $(seq 1 50); do
  if [ "$(cat "$FX_WORK/par.$i.code")" = 200 ] &&
    [ "$(fx_sha256 "$FX_WORK/par.$i.body")" = "$want_par" ]; then
    par_ok=$((par_ok + 1))
  fi
done
check_eq "50 parallel clients: all 200 with the whole body" "$par_ok" 50

# --- (8) big transfers in bounded memory ------------------------------------------------------
rc=0
got=$(curl -q -sS --max-time 180 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_SLUICE_CA" "$NG/big" 2>"$FX_WORK/big.err" | sha256sum | cut -d' ' -f1) || rc=$?
check_eq "1 GiB download: SHA-256 matches" "$got" "$FX_BIG_SHA256"
check_eq "1 GiB download: curl exit 0" "$(cat "$FX_WORK/big.err")$rc" 0

up_size=$((256 * 1024 * 1024))
fx_pattern "$up_size" | curl -q -sS --max-time 180 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_SLUICE_CA" -T - -H 'Transfer-Encoding: chunked' "$PY/upload" \
  >"$FX_WORK/upload.json" 2>"$FX_WORK/upload.err" || true
check_eq "256 MiB chunked upload: the origin got every byte" \
  "$(fx_json "$FX_WORK/upload.json" 'd["sha256"] + " " + str(d["length"])')" \
  "$(fx_pattern_sha256 "$up_size") $up_size"
hwm=$(fx_proxy_mem VmHWM)
if fx_sanitized; then
  fx_skip "the proxy's peak RSS stayed under 64 MiB" "sanitizer build (VmHWM ${hwm} KiB)"
else
  check "the proxy's peak RSS stayed under 64 MiB (VmHWM ${hwm} KiB)" \
    test "${hwm:-0}" -gt 0 -a "${hwm:-0}" -lt "$rss_limit_kib"
fi

# A client that stops reading: the proxy must pause the origin, not buffer the body.
fx_pyclient_bg "$FX_WORK/stall.out" --connect "a.sluice.test:$FX_TLS_PORT" --request 'GET /big' \
  --header 'X-Probe: stall-py' --stall-after 1048576 --stall-seconds 6
stall_pid=$FX_BG_PID
fx_wait 20 grep -q '^stalled' "$FX_WORK/stall.out" || true
check "stalled reader: the client read 1 MiB and stopped" grep -q '^stalled' "$FX_WORK/stall.out"
max_rss=0
for _ in 1 2 3 4; do
  sleep 1
  r=$(fx_proxy_mem VmRSS)
  if [ "${r:-0}" -gt "$max_rss" ]; then max_rss=$r; fi
done
fx_curl "$NG/hello"
check_status "stalled reader: other clients are still served" 200 -
wait "$stall_pid" || true
curl -q -sS --max-time 5 --limit-rate 1k --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
  --cacert "$FX_SLUICE_CA" -H 'X-Probe: stall-curl' -o /dev/null "$NG/big" 2>/dev/null &
slow_pid=$!
FX_PIDS+=("$slow_pid")
for _ in 1 2 3 4; do
  sleep 1
  r=$(fx_proxy_mem VmRSS)
  if [ "${r:-0}" -gt "$max_rss" ]; then max_rss=$r; fi
done
wait "$slow_pid" || true
hwm=$(fx_proxy_mem VmHWM)
if fx_sanitized; then
  fx_skip "slow readers: the proxy's RSS stayed under 64 MiB" "sanitizer build (max ${max_rss} KiB)"
else
  check "slow readers: the proxy's RSS stayed under 64 MiB (max ${max_rss} KiB, peak ${hwm} KiB)" \
    test "$max_rss" -gt 0 -a "$max_rss" -lt "$rss_limit_kib" -a "${hwm:-0}" -lt "$rss_limit_kib"
fi
# Once those clients are gone, their upstream requests end too (nginx logs a request when it
# ends): nothing keeps streaming 1 GiB for a client that left.
check "a stalled client that left: its upstream /big ended within 10 s" \
  fx_wait 10 fx_jsonl_has "$FX_NGINX_LOG" probe=stall-py uri=/big
check "a rate-limited client that left: its upstream /big ended within 10 s" \
  fx_wait 10 fx_jsonl_has "$FX_NGINX_LOG" probe=stall-curl uri=/big

# --- (10) plain HTTP in absolute form ---------------------------------------------------------
fx_curl -H 'X-Probe: plain-1' "http://a.sluice.test:$FX_HTTP_PORT/hello"
check_status "plain HTTP: allowed host 200" 200 -
check_eq "plain HTTP: nginx's body" "$(cat "$FX_BODY")" "hello from nginx"
check_eq "plain HTTP: no CONNECT was used" "$FX_CONNECT_CODE" 000
check_eq "plain HTTP: nginx saw it once, without TLS" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=plain-1 tls= uri=/hello)" 1
check_audit "plain HTTP: audit line with scheme http" \
  decision=allow scheme=http host=a.sluice.test port="$FX_HTTP_PORT" path=/hello
fx_curl -H 'X-Probe: plain-2' "http://deny.sluice.test:$FX_HTTP_PORT/hello"
check_status "plain HTTP: a host not in the policy gets 403 host-not-allowed" 403 host-not-allowed
check_eq "plain HTTP: the denied request never reached nginx" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=plain-2)" 0
fx_curl -H 'X-Probe: plain-3' "http://cred.sluice.test:$FX_HTTP_PORT/echo-auth"
check_status "plain HTTP: a rule with a credential gets 403 credential-needs-tls" \
  403 credential-needs-tls
check_eq "plain HTTP: that request never reached nginx" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=plain-3)" 0
check "plain HTTP: the refusal does not carry the secret" \
  fx_absent "${secret#Bearer }" "$FX_BODY" "$FX_HDRS" "$FX_NGINX_LOG"
rc=0
code=$(curl -q -sS --max-time 10 -o /dev/null -w '%{http_code}' \
  "http://127.0.0.1:$FX_PROXY_PORT/hello" 2>/dev/null) || rc=$?
check_eq "an origin-form request sent straight to the proxy gets 400" "$code" 400

FX_STOP_SECONDS=45
check "SIGTERM stops the proxy with exit 0 (after the checks above; bound 45 s)" fx_proxy_stop
FX_STOP_SECONDS=20

# --- (14) SIGTERM while a slow download is in flight (a fresh proxy) ---------------------------
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  "${FX_RESOLVE[@]}" || fx_bail "a second sluice proxy starts"
slow_bytes=2000000 # sent over 3 s
curl -q -sS --max-time 60 --proxy "http://127.0.0.1:$FX_PROXY_PORT" --cacert "$FX_SLUICE_CA" \
  -o "$FX_WORK/slow.body" "$PY/slow?bytes=$slow_bytes&ms=3000&run=term" \
  2>"$FX_WORK/slow.err" &
slow_pid=$!
FX_PIDS+=("$slow_pid")
fx_wait 10 fx_jsonl_has "$FX_ORIGIN_LOG" path=/slow target~run=term || true
sleep 0.5
kill -TERM "$FX_PROXY_PID" 2>/dev/null || true
sleep 0.5
fx_curl --max-time 3 "$NG/hello"
check "after SIGTERM: a new request is not served" test "$FX_CODE" != 200
rc=0
wait "$slow_pid" || rc=$?
check_eq "SIGTERM: the download in flight completes (curl exit 0)" "$rc" 0
check_eq "SIGTERM: ... with every byte" "$(fx_sha256 "$FX_WORK/slow.body")" \
  "$(fx_pattern_sha256 "$slow_bytes")"
check "SIGTERM: then the proxy exits 0 (within 20 s)" fx_proxy_wait_exit

fx_done
