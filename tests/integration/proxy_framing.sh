#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_framing.sh - HTTP/1.1 framing through `sluice proxy` (docs/reference/proxy.md §4.6),
# both ways, against origin.py: ambiguous or malformed request framing -> 400 bad-request, the
# connection closed and nothing (nor any smuggled second request) reaching the origin; malformed
# upstream responses (origin.py /raw?case=NAME writes exact bytes) -> 502 with X-Sluice-Reason
# and that upstream connection never reused; an origin answering before the request body ended;
# pipelining after a policy refusal (20 000 refusals to a late reader all answered); a body of
# 20 000 one-byte chunks in few TLS records; a pooled connection closed unanswered (only an
# idempotent request sent again); chunk
# extensions over their caps (request 400, response cut); response heads of every size around
# the buffer sizes and the 64 KiB limit, cut into writes in different ways, answered at once. Inside TLS tunnels and, for
# some, on plain absolute-form HTTP. After each refusal a fresh tunnel must still work.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup origin

A=a.sluice.test
M=m.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" framing "$A:$FX_PY_TLS_PORT" "$A:$FX_PY_HTTP_PORT" \
  "{ \"host\": \"$M:$FX_PY_TLS_PORT\", \"methods\": [\"GET\", \"HEAD\"] }"
fx_resolve "$A" "$M"
# One worker: the upstream pool is then one pool, so "not reused" is meaningful.
fx_proxy_start --policy "$policy" --workers 1 --upstream-ca "$FX_TEST_CA" \
  --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

PYT=$A:$FX_PY_TLS_PORT  # origin.py over TLS
PYH=$A:$FX_PY_HTTP_PORT # origin.py in the clear (plain absolute-form HTTP)

# conn_of TEXT : origin.py's connection number of the last request whose target contains TEXT.
conn_of() {
  "$FX_PYTHON" - "$FX_ORIGIN_LOG" "$1" <<'EOF'
import json, sys
conn = "none"
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        if sys.argv[2] in d["target"]:
            conn = d["conn"]
print(conn)
EOF
}

# healthy TAG : a fresh tunnel to origin.py still gets 200 (the proxy survived the last check).
# shellcheck disable=SC2317 # called through check
healthy() {
  [ "$(fx_pc --connect "$PYT" --request "GET /hello?probe=$1")" = "connect=200 tls=ok status=200 reason=-" ]
}

# The client sees the refusal, then the proxy's close (clean or by reset, nothing after it).
want_400_tls='^connect=200 tls=ok status=400 reason=bad-request eof( reset)?$'
want_400_plain='^status=400 reason=bad-request eof( reset)?$'

# bad_req NAME RAW : RAW (a request, \r\n escapes, its targets tagged probe=rq-NAME) inside a TLS
# tunnel -> 400 bad-request and closed; no request tagged rq-NAME (the smuggled one included)
# reached origin.py; a fresh tunnel still works.
bad_req() {
  local name=$1 raw=$2 out
  out=$(fx_pc --connect "$PYT" --raw "$raw" --eof-wait 5)
  check_match "request $name (tunnel): 400 bad-request, then the connection is closed" \
    "$out" "$want_400_tls"
  check_eq "request $name (tunnel): origin.py received nothing of it" "$(fx_seen "probe=rq-$name")" 0
  check "request $name (tunnel): a fresh tunnel still works afterwards" healthy "after-$name"
}

# bad_plain NAME RAW : the same on plain absolute-form HTTP (no tunnel).
bad_plain() {
  local name=$1 raw=$2 out
  out=$(fx_pc --raw "$raw" --eof-wait 5)
  check_match "request $name (plain HTTP): 400 bad-request, then the connection is closed" \
    "$out" "$want_400_plain"
  check_eq "request $name (plain HTTP): origin.py received nothing of it" \
    "$(fx_seen "probe=rp-$name")" 0
}

# bad_req_body NAME RAW : RAW's head is well formed, its chunked body is not. The head is
# streamed upstream before the body arrives, so origin.py may see an unfinished head; checked
# here: the client gets 400 bad-request (docs/reference/proxy.md §4.6) and its connection is closed; origin.py
# never answers it; the upstream connection that carried its head is never reused; a fresh
# tunnel still works.
bad_req_body() {
  local name=$1 raw=$2 out
  out=$(fx_pc --connect "$PYT" --raw "$raw" --eof-wait 5)
  check_match "request $name (tunnel): 400 bad-request and closed, never answered by origin" \
    "$out" '^connect=200 tls=ok status=400 reason=bad-request eof( reset)?$'
  check "request $name (tunnel): a fresh tunnel still works afterwards" healthy "after-$name"
  check "request $name (tunnel): the upstream connection that carried its head is not reused" \
    test "$(conn_of "probe=after-$name")" != "$(conn_of "probe=rq-$name")"
}

# h NAME : request-line target prefix for NAME in the tunnel.
P="/echo?probe=rq-"
H="Host: $PYT\\r\\n"
SMUG="GET /hello?probe=rq-smuggled HTTP/1.1\\r\\n${H}\\r\\n"

# --- (1) malformed or ambiguous request framing -> 400 (docs/reference/proxy.md §4.6) ---------------------------
bad_req cl-te "POST ${P}cl-te HTTP/1.1\\r\\n${H}Content-Length: 5\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n"
bad_req dup-cl "POST ${P}dup-cl HTTP/1.1\\r\\n${H}Content-Length: 4\\r\\nContent-Length: 5\\r\\n\\r\\nabcde"
bad_req te-gzip-chunked "POST ${P}te-gzip-chunked HTTP/1.1\\r\\n${H}Transfer-Encoding: gzip, chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_req te-space-colon "POST ${P}te-space-colon HTTP/1.1\\r\\n${H}Transfer-Encoding : chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_req te-http10 "POST ${P}te-http10 HTTP/1.0\\r\\n${H}Transfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_req obs-fold "GET ${P}obs-fold HTTP/1.1\\r\\n${H}X-Folded: a\\r\\n b\\r\\n\\r\\n"
bad_req empty-name "GET ${P}empty-name HTTP/1.1\\r\\n${H}: no name\\r\\n\\r\\n"
bad_req bare-lf "GET ${P}bare-lf HTTP/1.1\\nHost: $PYT\\nX-A: a\\n\\n"
bad_req bare-lf-mixed "GET ${P}bare-lf-mixed HTTP/1.1\\r\\n${H}X-A: a\\nX-B: b\\r\\n\\r\\n"
bad_req bare-cr "GET ${P}bare-cr HTTP/1.1\\r\\n${H}X-A: a\\rX-B: b\\r\\n\\r\\n"
bad_req cl-te-smuggle "POST ${P}cl-te-smuggle HTTP/1.1\\r\\n${H}Content-Length: 60\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n${SMUG}"
bad_req te-cl-smuggle "POST ${P}te-cl-smuggle HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\nContent-Length: 4\\r\\n\\r\\n3b\\r\\n${SMUG}\\r\\n0\\r\\n\\r\\n"
bad_req two-hosts-same "GET ${P}two-hosts-same HTTP/1.1\\r\\n${H}${H}\\r\\n"
bad_req nul-value "GET ${P}nul-value HTTP/1.1\\r\\n${H}X-A: a\\x00b\\r\\n\\r\\n"
bad_req_body bad-chunk-size "POST ${P}bad-chunk-size HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\n\\r\\nzz\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_req_body chunk-no-crlf "POST ${P}chunk-no-crlf HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhelloXX0\\r\\n\\r\\n"
bad_req two-hosts-differ "GET ${P}two-hosts-differ HTTP/1.1\\r\\n${H}Host: other.sluice.test\\r\\n\\r\\n"
bad_req dup-cl-same "POST ${P}dup-cl-same HTTP/1.1\\r\\n${H}Content-Length: 5\\r\\nContent-Length: 5\\r\\n\\r\\nabcde"
bad_req cl-list "POST ${P}cl-list HTTP/1.1\\r\\n${H}Content-Length: 5, 5\\r\\n\\r\\nabcde"
bad_req cl-plus "POST ${P}cl-plus HTTP/1.1\\r\\n${H}Content-Length: +5\\r\\n\\r\\nabcde"
bad_req cl-negative "POST ${P}cl-negative HTTP/1.1\\r\\n${H}Content-Length: -1\\r\\n\\r\\n"
bad_req cl-space-colon "POST ${P}cl-space-colon HTTP/1.1\\r\\n${H}Content-Length : 5\\r\\n\\r\\nabcde"
bad_req te-chunked-chunked "POST ${P}te-chunked-chunked HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n"
bad_req te-identity "POST ${P}te-identity HTTP/1.1\\r\\n${H}Transfer-Encoding: identity\\r\\n\\r\\n"
bad_req te-tab-value "POST ${P}te-tab-value HTTP/1.1\\r\\n${H}Transfer-Encoding: \\x0bchunked\\r\\n\\r\\n0\\r\\n\\r\\n"
bad_req_body chunk-size-huge "POST ${P}chunk-size-huge HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\n\\r\\n10000000000000001\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_req space-in-name "GET ${P}space-in-name HTTP/1.1\\r\\n${H}X A: b\\r\\n\\r\\n"
bad_req nul-name "GET ${P}nul-name HTTP/1.1\\r\\n${H}X\\x00A: b\\r\\n\\r\\n"
bad_req two-spaces-target "GET  ${P}two-spaces-target HTTP/1.1\\r\\n${H}\\r\\n"
bad_req two-spaces-version "GET ${P}two-spaces-version  HTTP/1.1\\r\\n${H}\\r\\n"
# Every smuggled request above was tagged rq-smuggled.
check_eq "requests: no smuggled request ever reached origin.py" "$(fx_seen probe=rq-smuggled)" 0

# --- (2) the same on plain absolute-form HTTP -------------------------------------------------
U="http://$PYH/echo?probe=rp-"
HP="Host: $PYH\\r\\n"
bad_plain cl-te "POST ${U}cl-te HTTP/1.1\\r\\n${HP}Content-Length: 5\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n"
bad_plain dup-cl "POST ${U}dup-cl HTTP/1.1\\r\\n${HP}Content-Length: 4\\r\\nContent-Length: 5\\r\\n\\r\\nabcde"
bad_plain te-http10 "POST ${U}te-http10 HTTP/1.0\\r\\n${HP}Transfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_plain obs-fold "GET ${U}obs-fold HTTP/1.1\\r\\n${HP}X-Folded: a\\r\\n b\\r\\n\\r\\n"
bad_plain cl-te-smuggle "POST ${U}cl-te-smuggle HTTP/1.1\\r\\n${HP}Content-Length: 60\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET http://$PYH/hello?probe=rp-smuggled HTTP/1.1\\r\\n${HP}\\r\\n"
bad_plain te-gzip-chunked "POST ${U}te-gzip-chunked HTTP/1.1\\r\\n${HP}Transfer-Encoding: gzip, chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_plain te-space-colon "POST ${U}te-space-colon HTTP/1.1\\r\\n${HP}Transfer-Encoding : chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
bad_plain empty-name "GET ${U}empty-name HTTP/1.1\\r\\n${HP}: no name\\r\\n\\r\\n"
bad_plain bare-lf "GET ${U}bare-lf HTTP/1.1\\nHost: $PYH\\n\\n"
bad_plain bare-cr "GET ${U}bare-cr HTTP/1.1\\r\\n${HP}X-A: a\\rX-B: b\\r\\n\\r\\n"
bad_plain two-spaces-target "GET  ${U}two-spaces-target HTTP/1.1\\r\\n${HP}\\r\\n"
bad_plain two-spaces-version "GET ${U}two-spaces-version  HTTP/1.1\\r\\n${HP}\\r\\n"
bad_plain two-hosts "GET ${U}two-hosts HTTP/1.1\\r\\n${HP}${HP}\\r\\n"
bad_plain nul-value "GET ${U}nul-value HTTP/1.1\\r\\n${HP}X-A: a\\x00b\\r\\n\\r\\n"
bad_plain te-cl-smuggle "POST ${U}te-cl-smuggle HTTP/1.1\\r\\n${HP}Transfer-Encoding: chunked\\r\\nContent-Length: 4\\r\\n\\r\\n5c\\r\\nGET http://$PYH/hello?probe=rp-smuggled HTTP/1.1\\r\\n${HP}\\r\\n\\r\\n0\\r\\n\\r\\n"
check_eq "plain HTTP: no smuggled request ever reached origin.py" "$(fx_seen probe=rp-smuggled)" 0

# --- (3) malformed upstream responses -> 502, connection never pooled -------------------------
# Positive control first: a well-formed /raw response leaves its connection pooled, and the next
# request (fresh tunnel) reuses it - so a new connection after a bad case means "not pooled".
out=$(fx_pc --connect "$PYT" --request "GET /raw?probe=rs-ok&case=ok")
check_eq "response control: /raw?case=ok relayed (200)" "$out" "connect=200 tls=ok status=200 reason=-"
out=$(fx_pc --connect "$PYT" --request "GET /hello?probe=rs-ok-next")
check_eq "response control: the next request reuses the pooled upstream connection" \
  "$out $(conn_of probe=rs-ok-next)" "connect=200 tls=ok status=200 reason=- $(conn_of "probe=rs-ok&")"

# bad_resp CASE [body] : /raw?case=CASE -> 502 with an X-Sluice-Reason; the next request goes
# out on a new upstream connection. With "body" the fault is in the body, after a well-formed
# head that the proxy may already have relayed: then the client must get the 502, or no complete
# response at all (its connection aborted) - never a response that looks whole.
bad_resp() {
  local name=$1 out want='^connect=200 tls=ok status=502 reason=[a-z][a-z-]* (eof|eof reset|open)$'
  local what="502 with an X-Sluice-Reason"
  if [ "${2:-}" = body ]; then
    want='^connect=200 tls=ok (status=502 reason=[a-z][a-z-]* (eof|eof reset|open)|error closed by peer|error recv: .*)$'
    what="502, or the client connection aborted before a complete response"
  fi
  out=$(fx_pc --connect "$PYT" --raw "GET /raw?probe=rs-$name&case=$name HTTP/1.1\\r\\n${H}\\r\\n" \
    --eof-wait 3)
  check_match "response $name: $what" "$out" "$want"
  out=$(fx_pc --connect "$PYT" --request "GET /hello?probe=rs-$name-next")
  check_eq "response $name: the proxy is healthy afterwards" "$out" \
    "connect=200 tls=ok status=200 reason=-"
  check "response $name: that upstream connection was not reused" \
    test "$(conn_of "probe=rs-$name-next")" != "$(conn_of "probe=rs-$name&")"
}
for c in cl-te dup-cl dup-cl-same cl-list te-gzip te-gzip-chunked te-chunked-http10 obs-fold \
  empty-name http2-status icy-status unsolicited-101 bare-lf bare-cr nul-value interim-flood; do
  bad_resp "$c"
done
out=$(fx_pc --connect "$PYT" --raw "GET /raw?probe=rs-interims&case=interims HTTP/1.1\r\n${H}\r\n" \
  --recv 0 --dump "$FX_WORK/interims.raw")
check_eq "response interims: a 100 and a 103 before the answer are relayed, then the 200" \
  "$out $(grep -c '^HTTP/1.1 1' "$FX_WORK/interims.raw")" "connect=200 tls=ok status=200 reason=- 2"
out=$(fx_pc --connect "$PYT" --raw "GET /raw?probe=rs-flood2&case=interim-flood HTTP/1.1\r\n${H}\r\n" \
  --dump "$FX_WORK/flood.raw" --show-body)
check "response interim-flood: 32 interims relayed (not one more), then a 502 that says why" \
  bash -c "[ \"\$(grep -c '^HTTP/1.1 100' '$FX_WORK/flood.raw')\" -eq 32 ] &&
    grep -q 'more than 32 interim' '$FX_WORK/flood.raw'"
bad_resp bad-chunk body
bad_resp chunk-no-crlf body
# Chunk extensions are capped (4 KiB per chunk-size line, 64 KiB per message): a response's
# cut its client's connection after its head (audited aborted, the upstream's malformed body); a
# request's is 400 too-large, and its upstream connection is closed.
bad_resp ext-flood body
check_audit "response ext-flood: audited as cut by the upstream's malformed body" \
  path=/raw status=200 aborted~'"cause": "malformed"' aborted~'"side": "upstream"'
ext=$(head -c 5000 /dev/zero | tr '\0' a)
out=$(fx_pc --connect "$PYT" --eof-wait 5 --raw \
  "POST ${P}ext-flood HTTP/1.1\\r\\n${H}Transfer-Encoding: chunked\\r\\n\\r\\n1;e=$ext\\r\\nx\\r\\n0\\r\\n\\r\\n")
check_match "request with a 5000-byte chunk extension: 400 too-large, then closed" \
  "$out" '^connect=200 tls=ok status=400 reason=too-large eof( reset)?$'
check "request ext-flood: a fresh tunnel still works afterwards" healthy after-ext-flood

# A body of 20 000 one-byte chunks, relayed chunk by chunk: inside TLS the proxy gathers the small
# pieces of a step into one record; one record per piece (the chunk's header, its byte, its CRLF)
# was 12 times the plaintext on the wire. Printed: chunks, plaintext bytes, wire bytes / plaintext.
tiny=$("$FX_PYTHON" - "$FX_PROXY_PORT" "$FX_SLUICE_CA" "$PYT" <<'PY'
import socket, ssl, sys, time
proxy, ca, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
host = target.rsplit(":", 1)[0]
s = socket.create_connection(("127.0.0.1", proxy), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=ca)
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
t = ctx.wrap_bio(inc, out, server_hostname=host)
wire = [0]
def pump():
    if out.pending:
        s.sendall(out.read())
    data = s.recv(1 << 16)
    if not data:
        raise EOFError
    wire[0] += len(data)
    inc.write(data)
while True:
    try:
        t.do_handshake()
        break
    except ssl.SSLWantReadError:
        pump()
t.write(("GET /raw?probe=tiny&case=tiny-chunks HTTP/1.1\r\nHost: %s\r\n\r\n" % target).encode())
s.sendall(out.read())
wire[0], plain, end = 0, b"", time.monotonic() + 30
while not plain.endswith(b"\r\n0\r\n\r\n") and time.monotonic() < end:
    try:
        plain += t.read(1 << 16)
    except ssl.SSLWantReadError:
        pump()
print(plain.count(b"\r\na\r\n"), len(plain), "%.1f" % (wire[0] / len(plain)))
PY
)
read -r chunks plain ratio <<<"$tiny"
check_eq "a body of 20 000 one-byte chunks through a tunnel: every chunk relayed" "$chunks" 20000
check "... in at most 1.5 times its plaintext on the wire (one TLS record per chunk piece: 12 times)" \
  awk -v r="${ratio:-99}" 'BEGIN { exit !(r <= 1.5) }'
fx_note "tiny chunks: $plain bytes of plaintext, $ratio times that on the wire"

# --- (4) an origin that answers before the request body is finished ---------------------------
pad=$(head -c 60000 /dev/zero | tr '\0' x)
out=$(fx_pc --connect "$PYT" --eof-wait 10 --show-header connection --raw \
  "POST /raw?probe=rs-early&case=early-413 HTTP/1.1\\r\\n${H}Content-Length: 10000000\\r\\n\\r\\n$pad")
check_match "early response: the origin's 413 arrives with Connection: close, then the close" \
  "$out" '^connect=200 tls=ok status=413 reason=- header connection=close (eof|eof reset)$'
check "early response: a new connection works afterwards" healthy after-early

# --- (4b) a pooled connection that the upstream closes without an answer ------------------------
# /raw?case=hangup reads the head and closes. On a pooled connection that looks like one the
# upstream closed while it idled, and an idempotent request is sent again on a fresh one; a POST
# or PATCH never is (RFC 9112 §9.3.1.1: the upstream may have acted on it). Either way the
# client's 502 is upstream-closed, its body says why nothing (more) was sent again, and the audit
# line is an error: not bad-request with "malformed", nothing malformed came (proxy.md §4.4, §4.5).
# unanswered OUT ARGS... : proxy_client.py ARGS with --show-body into $FX_WORK/OUT; prints
# "status=S reason=R".
unanswered() {
  local out=$1
  shift
  fx_pyclient --timeout 10 --eof-wait 5 --show-body "$@" >"$FX_WORK/$out" 2>&1 || true
  sed -nE 's/^(status=[0-9]+ reason=[^ ]+) .*/\1/p' "$FX_WORK/$out"
}
# body_of OUT : the body line of that run.
body_of() { sed -n 's/^body=//p' "$FX_WORK/$1"; }
# A new connection first: no plain request has reached origin.py yet, so nothing is pooled there.
check_eq "hang-up on a new connection: nothing pooled to origin.py in the clear yet" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" tls=false)" 0
check_eq "POST on a new connection the upstream closes unanswered: 502 upstream-closed" \
  "$(unanswered hu-new.out --raw "POST http://$PYH/raw?case=hangup&probe=hu-new HTTP/1.1\\r\\n${HP}Content-Length: 0\\r\\n\\r\\n")" \
  "status=502 reason=upstream-closed"
check_match "... its body: the upstream closed the connection before answering, a new one, not sent again" \
  "$(body_of hu-new.out)" \
  '^sluice: POST http://[^ ]+/raw failed: upstream-closed \(client local, environment framing\): the upstream closed the connection before answering \(a new connection: the request was not sent again\)\\n$'
check_eq "... origin.py received it once" "$(fx_seen probe=hu-new)" 1
check_audit "... its audit line: decision error, reason upstream-closed, 502" \
  method=POST scheme=http decision=error reason=upstream-closed status=502
# hangup METHOD PROBE : a fresh tunnel's request first leaves a pooled upstream connection, then
# METHOD /raw?case=hangup (no body) in another tunnel takes it; prints the client's outcome and
# how many times origin.py received the request (the body in $FX_WORK/hu-PROBE.out).
# A third argument names another /raw case than hangup.
hangup() {
  healthy "prime-$2" || echo "# hangup: the priming request failed"
  printf '%s seen=%s\n' "$(unanswered "hu-$2.out" --connect "$PYT" --raw \
    "$1 /raw?case=${3:-hangup}&probe=$2 HTTP/1.1\\r\\n${H}Content-Length: 0\\r\\n\\r\\n")" \
    "$(fx_seen "probe=$2")"
}
for m in POST PATCH; do
  check_eq "$m on a pooled connection the upstream closes unanswered: 502 upstream-closed, sent once, never again" \
    "$(hangup "$m" "hu-$m")" "status=502 reason=upstream-closed seen=1"
  check_match "... its body: the kept-alive connection closed before answering, $m not sent again (not idempotent), the client may retry" \
    "$(body_of "hu-hu-$m.out")" \
    "^sluice: $m https://[^ ]+/raw failed: upstream-closed \\(client local, environment framing\\): the upstream closed the kept-alive connection before answering; the request was not sent again because $m is not idempotent \\(the upstream may have acted on it\\): the client may retry\\\\n\$"
  check_audit "... its audit line: decision error, reason upstream-closed, 502" \
    method="$m" scheme=https decision=error reason=upstream-closed status=502
done
# A GET whose method-override header names POST is a POST to many servers: sent once, and the
# body names the override.
healthy prime-hu-ovr || echo "# the priming request failed"
check_eq "GET with X-HTTP-Method-Override: POST on a pooled connection closed unanswered: 502 upstream-closed, sent once" \
  "$(unanswered hu-ovr.out --connect "$PYT" --raw "GET /raw?case=hangup&probe=hu-ovr HTTP/1.1\\r\\n${H}X-HTTP-Method-Override: POST\\r\\n\\r\\n") seen=$(fx_seen probe=hu-ovr)" \
  "status=502 reason=upstream-closed seen=1"
check_match "... its body names the override as what is not idempotent" \
  "$(body_of hu-ovr.out)" \
  'the request was not sent again because GET with X-HTTP-Method-Override: POST is not idempotent \(the upstream may have acted on it\): the client may retry\\n$'
# A PUT is idempotent, but once its body has gone up it cannot be sent again ($pad: 60 000 bytes).
healthy prime-hu-PUT || echo "# the priming request failed"
check_eq "PUT with a body on a pooled connection the upstream closes unanswered: 502 upstream-closed, sent once" \
  "$(unanswered hu-put.out --connect "$PYT" --raw "PUT /raw?case=hangup&probe=hu-PUT HTTP/1.1\\r\\n${H}Content-Length: 60000\\r\\n\\r\\n$pad") seen=$(fx_seen probe=hu-PUT)" \
  "status=502 reason=upstream-closed seen=1"
check_match "... its body: the kept-alive connection closed before answering, not sent again as its body had gone up" \
  "$(body_of hu-put.out)" \
  '^sluice: PUT https://[^ ]+/raw failed: upstream-closed \(client local, environment framing\): the upstream closed the kept-alive connection before answering( \([^)]*\))?; the request was not sent again because its body had already gone up: the client may retry\\n$'
check_eq "GET on a pooled connection the upstream closes unanswered: sent again on a fresh one, then 502 upstream-closed" \
  "$(hangup GET hu-GET)" "status=502 reason=upstream-closed seen=2"
check_match "... its body: closed before answering after the request was sent again once" \
  "$(body_of hu-hu-GET.out)" \
  '^sluice: GET https://[^ ]+/raw failed: upstream-closed \(client local, environment framing\): the upstream closed the connection before answering, after the request had been sent again once \(the kept-alive connection it first went on had closed unanswered too\)\\n$'
check_audit "... its audit line: decision error, reason upstream-closed, 502" \
  method=GET scheme=https decision=error reason=upstream-closed status=502
# The retry goes on a new connection, never on another pooled one (which may be just as stale):
# two tunnels' requests at once leave two connections in the pool, the GET takes one, and its
# retry must not take the other. seqs_of TEXT : origin.py's request numbers on their connections
# ("seq") of the requests whose target contains TEXT, in order.
seqs_of() {
  "$FX_PYTHON" - "$FX_ORIGIN_LOG" "$1" <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    print(" ".join(str(d["seq"]) for d in map(json.loads, f) if sys.argv[2] in d["target"]))
EOF
}
fx_pc --connect "$PYT" --request "GET /slow?bytes=10&ms=1000&probe=hu-two-a" >/dev/null &
two_a=$!
fx_pc --connect "$PYT" --request "GET /slow?bytes=10&ms=1000&probe=hu-two-b" >/dev/null &
two_b=$!
wait "$two_a" "$two_b" || true
check_eq "GET on one of two pooled connections, closed unanswered: sent again, then 502 upstream-closed" \
  "$(unanswered hu-two.out --connect "$PYT" --raw "GET /raw?case=hangup&probe=hu-two-c HTTP/1.1\\r\\n${H}\\r\\n")" \
  "status=502 reason=upstream-closed"
check_match "... first on a pooled connection, then on a new one (its first request), not the other pooled one" \
  "$(seqs_of probe=hu-two-c)" '^([2-9]|[1-9][0-9]+) 1$'
# An upstream that sent part of a head before it closed did answer (the connection was not
# stale): the GET is not sent again, and the cut head is a malformed response.
check_eq "GET on a pooled connection closed after part of a response head: not sent again, 502 bad-request" \
  "$(hangup GET hu-cut cut-head)" "status=502 reason=bad-request seen=1"
check_match "... its body: the response was cut in the middle" "$(body_of hu-hu-cut.out)" \
  "^sluice: GET https://[^ ]+/raw failed: bad-request .*: the upstream's response was malformed: connection closed in the middle of a message"
# An upstream that sent only an interim response (103 Early Hints) and then closed answered
# nothing final: 502 upstream-closed, not a malformed response; it had read the request, so an
# idempotent GET on a pooled connection is not sent again either. The 103 is relayed first.
check_eq "interim then close, new connection: 502 upstream-closed" \
  "$(unanswered int-new.out --dump "$FX_WORK/int-new.raw" --raw "GET http://$PYH/raw?case=interim-close&probe=int-new HTTP/1.1\\r\\n${HP}\\r\\n") seen=$(fx_seen probe=int-new)" \
  "status=502 reason=upstream-closed seen=1"
check_match "... its body: closed after an interim response, before the final one; not sent again" \
  "$(body_of int-new.out)" \
  '^sluice: GET http://[^ ]+/raw failed: upstream-closed \(client local, environment framing\): the upstream closed the connection after an interim \(1xx\) response, before its final response; the request was not sent again \(the upstream had it\)\\n$'
check_eq "... the client got the 103, then the 502" \
  "$(grep -ao '^HTTP/1.1 [0-9]*' "$FX_WORK/int-new.raw" | paste -sd' ' -)" "HTTP/1.1 103 HTTP/1.1 502"
check_audit "... its audit line: decision error, reason upstream-closed, 502" \
  method=GET path=/raw scheme=http decision=error reason=upstream-closed status=502
check_eq "GET on a pooled connection closed after an interim response: not sent again, 502 upstream-closed" \
  "$(hangup GET hu-int interim-close)" "status=502 reason=upstream-closed seen=1"
check_match "... its body: closed after an interim response on the kept-alive connection" \
  "$(body_of hu-hu-int.out)" \
  '^sluice: GET https://[^ ]+/raw failed: upstream-closed \(client local, environment framing\): the upstream closed the kept-alive connection after an interim \(1xx\) response, before its final response; the request was not sent again \(the upstream had it\)\\n$'
check "a fresh tunnel still works after the hang-ups" healthy after-hangup

# --- (5) pipelining after a policy refusal (docs/reference/proxy.md §4.1, §4.5) ----------------------------------
# statuses FILE : the status and body lines of a --show-body run, the 403's body cut, joined
# by |; a broken connection shows as "closed".
statuses() {
  sed -nE 's/^(status=[0-9]+ reason=[^ ]+) .*/\1/p; s/^body=(sluice: ).*/body=\1.../p;
    /^body=[^s]/p; s/^(error closed by peer|closed)$/closed/p' "$1" | paste -sd'|' -
}
mp() { printf 'GET %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' "$1" "$M:$FX_PY_TLS_PORT"; }
refused='status=403 reason=method-not-allowed\|body=sluice: \.\.\.'
fx_pyclient --timeout 10 --connect "$M:$FX_PY_TLS_PORT" --pipeline --show-body \
  --request 'DELETE /echo?probe=pl-1' --request 'GET /hello?probe=pl-2' >"$FX_WORK/pl.out" 2>&1 || true
check_match "pipelining: refused DELETE then GET: 403, then the GET's own response or a close" \
  "$(statuses "$FX_WORK/pl.out")" \
  "^$refused\\|(status=200 reason=-\\|body=hello from origin\\.py\\\\n|closed)$"
check_eq "pipelining: ... the DELETE never reached origin.py" "$(fx_seen probe=pl-1)" 0

# Many pipelined refusals to a client that starts reading late: every one is answered, in
# order, the later requests waiting in the input while the answers wait for the client (they
# once overflowed the output and the connection was dropped after ~13 000 of 20 000).
flood=$("$FX_PYTHON" - "$FX_PROXY_PORT" "$FX_PY_HTTP_PORT" <<'PY'
import socket, sys, threading, time
n = 20000
port = int(sys.argv[2])
one = ("GET http://denied.sluice.test:%d/x HTTP/1.1\r\nHost: denied.sluice.test:%d\r\n\r\n"
       % (port, port)).encode()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
threading.Thread(target=lambda: s.sendall(one * n), daemon=True).start()
time.sleep(0.5)
# Read until the last answer's reason is in too: a chunk may end between its status line and
# its fields.
got, why, end = b"", 0, time.monotonic() + 60
while why < n and time.monotonic() < end:
    try:
        chunk = s.recv(1 << 16)
    except socket.timeout:
        break
    if not chunk:
        break
    got += chunk
    why = got.count(b"X-Sluice-Reason: host-not-allowed")
print(got.count(b"HTTP/1.1 403 "), why)
PY
)
check_eq "20 000 pipelined refused requests, read after 0.5 s: 20 000 answers of 403 host-not-allowed" \
  "$flood" "20000 20000"
check "a new connection works after the flood" healthy after-flood

# A refused POST whose body is itself a request: the body must be skipped, never parsed.
# carried OUT PROBE FRAMING BODY CODE NEXT CHECK1 CHECK2 : the refused POST /echo?probe=PROBE
# with the header FRAMING and BODY, then /status?code=CODE&probe=NEXT pipelined behind it
# (responses in $FX_WORK/OUT): 403, then CODE (or closed), and the request inside the body
# (probe pl-smuggled) never reaches origin.py.
carried() {
  fx_pyclient --timeout 10 --connect "$M:$FX_PY_TLS_PORT" --show-body --responses 2 --raw \
    "POST /echo?probe=$2 HTTP/1.1\\r\\nHost: $M:$FX_PY_TLS_PORT\\r\\n$3\\r\\n\\r\\n$4$(mp "/status?code=$5&probe=$6")" \
    >"$FX_WORK/$1" 2>&1 || true
  check_match "$7" \
    "$(statuses "$FX_WORK/$1")" "^$refused\\|(status=$5 reason=-\\|body=status $5\\\\n|closed)$"
  check_eq "$8" "$(fx_seen probe=pl-smuggled)" 0
}
inner="$(mp "/hello?probe=pl-smuggled")"
inner_len=$(printf '%b' "$inner" | wc -c)
carried pl-cl.out pl-3 "Content-Length: $inner_len" "$inner" 202 pl-4 \
  "pipelining: refused POST carrying a request as body: 403, then 202 (or closed)" \
  "pipelining: ... the request inside the refused body never reached origin.py"
inner_hex=$(printf '%x' "$inner_len")
carried pl-te.out pl-5 "Transfer-Encoding: chunked" "$inner_hex\\r\\n${inner}\\r\\n0\\r\\n\\r\\n" 203 \
  pl-6 "pipelining: refused chunked POST carrying a request: 403, then 203 (or closed)" \
  "pipelining: ... the chunked body's request never reached origin.py"

# --- (6) response heads around the buffer sizes (docs/reference/proxy.md §4.10) ------------------
# A head of at most 64 KiB is relayed, a longer one is 502 too-large, at once, whatever the
# size and however the upstream cut it into writes (the stream's 32 KiB input blocks, TLS
# records of 16 KiB, the 64 KiB limit), over TLS and in the clear. /bighead keeps its
# connection open: only the proxy's own answer can end the exchange, never a close.
# head_case MODE SIZE SPLIT : one request; prints "OUTCOME at-once", or "OUTCOME after N s" when
# it took 3 s or more (a stall waits for the upstream timeout, or the client's 8 s).
head_case() {
  local mode=$1 size=$2 split=$3 t0 t1 out
  t0=$(date +%s%N)
  if [ "$mode" = tls ]; then
    out=$(fx_pc --timeout 8 --connect "$PYT" \
      --request "GET /bighead?probe=bh&size=$size&split=$split&ms=20")
    out=${out#connect=200 tls=ok }
  else
    out=$(fx_pc --timeout 8 --absolute "http://$PYH/bighead?probe=bh&size=$size&split=$split&ms=20")
  fi
  t1=$(date +%s%N)
  if [ $(((t1 - t0) / 1000000000)) -lt 3 ]; then
    printf '%s at-once\n' "${out%% closed}"
  else
    printf '%s after %d s\n' "${out%% closed}" $(((t1 - t0) / 1000000000))
  fi
}
for mode in tls plain; do
  for size in 32768 49152 50000 55000 60000 65000 65535 65536 65537 66000 70000 131072; do
    want="status=200 reason=- at-once"
    [ "$size" -gt 65536 ] && want="status=502 reason=too-large at-once"
    for split in "" 16384 32767,32768 49152 16000,32000,48000,64000 65536; do
      check_eq "response head of $size bytes ($mode, writes cut at '$split'): answered at once" \
        "$(head_case "$mode" "$size" "$split")" "$want"
    done
  done
done
fx_pc --timeout 8 --absolute "http://$PYH/bighead?probe=bh&size=70000&split=&ms=20" \
  --dump "$FX_WORK/bighead.raw" >/dev/null
check "response head of 70000 bytes: the 502 says why (over the limits: the head too large)" \
  grep -q "the upstream's response is over the proxy's limits: message head too large" \
  "$FX_WORK/bighead.raw"

# --- the upstream pool never hands one client's connection to another ---------------------------
# A second client, `other`, named by the address 127.0.0.2 (an `ip` client comes before the
# cidr one); 127.0.0.1 stays `local`. local's request leaves an idle connection to origin.py;
# other's request to the same place dials its own; local's next one reuses local's.
fx_policy "$policy" "{
  \"version\": 2,
  \"environments\": { \"framing\": { \"default\": \"deny\", \"rules\": [
    { \"host\": \"$PYT\" }, { \"host\": \"$PYH\" } ] } },
  \"clients\": [ { \"id\": \"other\", \"ip\": \"127.0.0.2\", \"environment\": \"framing\" },
    { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"framing\" } ]
}"
for _ in $(seq 50); do
  fx_curl --interface 127.0.0.2 "http://denied.sluice.test/"
  grep -q 'client other' "$FX_BODY" && break
  sleep 0.2
done
check "the policy with a second client is loaded (127.0.0.2 is client other)" \
  grep -q 'client other' "$FX_BODY"
fx_curl "https://$PYT/hello?probe=pool-a1"
check_status "client local, first request: 200" 200 -
fx_curl --interface 127.0.0.2 "https://$PYT/hello?probe=pool-b1"
check_status "client other, same place: 200" 200 -
fx_curl "https://$PYT/hello?probe=pool-a2"
check_status "client local, second request: 200" 200 -
a1=$(conn_of probe=pool-a1)
b1=$(conn_of probe=pool-b1)
a2=$(conn_of probe=pool-a2)
check "client other's request went on a connection of its own (local's: $a1, other's: $b1)" \
  test "$a1" != none -a "$b1" != none -a "$b1" != "$a1"
check_eq "client local's next request reused local's connection" "$a2" "$a1"

check "the proxy is still running" fx_proxy_alive
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
