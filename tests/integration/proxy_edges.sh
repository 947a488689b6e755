#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_edges.sh - the edges of `sluice proxy` against real peers (docs/reference/proxy.md
# §4.1, §4.3, §4.5, §4.6, §4.7, §4.10): a tunnel that does not carry TLS (not-tls), plain HTTP
# in a tunnel to port 80 (in a private network namespace; its second head timed by the header
# timeout), host-mismatch (SNI, Host header, absolute-form targets, plain HTTP), the CONNECT's own
# Host header noted and not refused (Node's CONNECT call), bad-host, request heads over 64 KiB, overloaded,
# client-overloaded (--max-connections-per-client: the cap per address, the slots given back; a
# flood of refusals that takes no slot of --max-connections, 128 answered at once, the rest closed),
# pipelining (in a tunnel and on plain HTTP), WebSocket relayed both ways, h2c ignored and others refused,
# CONNECT inside a tunnel, Proxy-Authorization inside a tunnel, a client that expires while its
# tunnel is open, and the client and environment on every refusal line inside a tunnel.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx origin

A=a.sluice.test
B=b.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" edges "$A:$FX_TLS_PORT" "$A:$FX_PY_TLS_PORT" "$A:$FX_PY_HTTP_PORT" \
  "$B:$FX_TLS_PORT" "$B:$FX_PY_TLS_PORT" "$B:$FX_PY_HTTP_PORT" \
  "{ \"host\": \"m.sluice.test:$FX_PY_TLS_PORT\", \"methods\": [\"GET\", \"HEAD\"] }"
fx_resolve "$A" "$B" m.sluice.test
common=(--upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}")
fx_proxy_start --policy "$policy" --workers 2 "${common[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

PYT=$A:$FX_PY_TLS_PORT  # origin.py over TLS (allowed; so is $B on the same port)
PYH=$A:$FX_PY_HTTP_PORT # origin.py in the clear (allowed)

# req METHOD TARGET HOST [HEADER...] : a request head for proxy_client.py --raw, CRLFs written
# as the escapes \r\n (proxy_client.py decodes them, and \xNN).
req() {
  local out="$1 $2 HTTP/1.1\\r\\nHost: $3\\r\\n" h
  for h in "${@:4}"; do out+="$h\\r\\n"; done
  printf '%s\\r\\n' "$out"
}

# origin_headers TEXT NAME... : "name=value" (sorted, space-separated) of the headers NAME of
# the first request origin.py logged whose target contains TEXT.
origin_headers() {
  "$FX_PYTHON" - "$FX_ORIGIN_LOG" "$@" <<'EOF'
import json, sys
path, text, names = sys.argv[1], sys.argv[2], [n.lower() for n in sys.argv[3:]]
with open(path, encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        if text in d["target"]:
            print(" ".join(sorted(n.lower() + "=" + v for n, v in d["headers"]
                                  if n.lower() in names)))
            break
EOF
}

# audit_at_least N COND... : at least N lines of FX_AUDIT satisfy every COND.
# shellcheck disable=SC2317 # called through fx_wait
audit_at_least() { [ "$(fx_jsonl_count "$FX_AUDIT" "${@:2}")" -ge "$1" ]; }

# --- (1) not-tls: a tunnel whose first bytes are not a TLS ClientHello is closed --------------
out=$(fx_pc --connect "$A:$FX_TLS_PORT" --no-tls --raw '\x00\x01\x02 hello' --responses 0 \
  --eof-wait 5)
check_eq "not-tls: garbage in a tunnel to a TLS port: the proxy closes it, answering nothing" \
  "$out" "connect=200 tls=none eof"
check_audit "not-tls: audit line (deny, reason not-tls, host, port)" \
  decision=error reason=not-tls host="$A" port="$FX_TLS_PORT"

# Plain HTTP where TLS is due gets the reason in HTTP (curl -p http://host:8080/ would print
# only "Empty reply from server" otherwise), then the close.
out=$(fx_pc --connect "$PYH" --no-tls --raw "$(req GET /echo?probe=nt-http "$PYH")" \
  --eof-wait 5)
check_match "not-tls: plain HTTP in a tunnel to a port other than 80: 400 not-tls, then closed" \
  "$out" '^connect=200 tls=none status=400 reason=not-tls eof( reset)?$'
out=$(curl -sS -p -x "http://127.0.0.1:$FX_PROXY_PORT" "http://$PYH/echo?probe=nt-http" 2>&1 || true)
check_match "not-tls: ... which curl -p shows" "$out" 'not-tls.*only TLS is taken there'

check_eq "not-tls: ... and that request never reached the origin" "$(fx_seen probe=nt-http)" 0
check_audit "not-tls: audit line for the plain-HTTP tunnel" \
  decision=error reason=not-tls host="$A" port="$FX_PY_HTTP_PORT"

# A TLS record header (handshake, 3.1) whose message is a ServerHello, not a ClientHello.
out=$(fx_pc --connect "$A:$FX_TLS_PORT" --no-tls --responses 0 --eof-wait 5 \
  --raw '\x16\x03\x01\x00\x08\x02\x00\x00\x04\x03\x03\x00\x00')
check_eq "not-tls: a TLS record that is not a ClientHello is closed too" \
  "$out" "connect=200 tls=none eof"

# --- (2) plain HTTP inside a tunnel to port 80 is handled as HTTP -----------------------------
# The port is fixed (80), and binding it on this machine's loopback could collide with whatever
# else runs here. So this part runs in a private network namespace (unshare --net; root only):
# its own loopback, where port 80 is free by construction. An origin.py on 127.0.0.1:80, a
# proxy and the clients all run inside it; the EXIT trap kills them like the rest.

# ns CMD... : runs CMD in the namespace. nsenter --no-fork execs CMD, so `nsenter ... &` puts
# CMD's own pid in $! (not through this function, which would put a subshell in between).
ns() { nsenter --no-fork --target "$ns_pid" --net -- "$@"; }
# shellcheck disable=SC2317 # called through fx_wait
ns_port_open() { FX_PROBE_IN=ns fx_port_open "$1"; } # something accepts on 127.0.0.1:PORT there
ns_pid=
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v nsenter >/dev/null &&
  command -v ip >/dev/null; then
  unshare --net sleep 600 2>/dev/null &
  ns_pid=$!
  FX_PIDS+=("$ns_pid")
  if ! fx_wait 5 fx_netns_own "$ns_pid" || ! ns ip link set lo up 2>/dev/null; then
    ns_pid=
  fi
fi
p80_ok=0
if [ -n "$ns_pid" ]; then
  nsd=$FX_WORK/ns
  mkdir -p "$nsd"
  nsenter --no-fork --target "$ns_pid" --net -- "$FX_PYTHON" "$FX_SUPPORT/origin.py" serve \
    --ports-file "$nsd/ports" --log "$nsd/origin.log" --http-port 80 2>"$nsd/origin.stderr" &
  FX_PIDS+=("$!")
  p80_secret=sl-$(fx_random_hex 24)
  fx_local_policy "$nsd/policy.json" edges p80.sluice.test \
    "$(fx_cred_rule cred80.sluice.test "Bearer $p80_secret")"
  p80_port=$(ns "$FX_PYTHON" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
  nsenter --no-fork --target "$ns_pid" --net -- "$SLUICE_BIN" proxy \
    --listen "127.0.0.1:$p80_port" --data "$FX_WORK/sluice-data" --audit-log "$nsd/audit.log" \
    --admin-socket "$nsd/proxy.sock" --log-level debug --policy "$nsd/policy.json" \
    --header-timeout 3 --idle-timeout 30 \
    --allow-upstream 127.0.0.0/8 --resolve p80.sluice.test:80:127.0.0.1 \
    --resolve cred80.sluice.test:80:127.0.0.1 >"$nsd/proxy.stdout" 2>"$FX_WORK/proxy-ns80.log" &
  p80_pid=$!
  FX_PIDS+=("$p80_pid")
  if fx_wait 10 ns_port_open 80 && fx_wait 10 ns_port_open "$p80_port"; then
    p80_ok=1
  else
    not_ok "port 80: origin.py and a proxy start in a private network namespace"
    fx__dump "$nsd/origin.stderr" "$FX_WORK/proxy-ns80.log"
  fi
fi
if [ "$p80_ok" = 1 ]; then
  # nspc ARGS... : pc, inside the namespace, through the proxy there.
  nspc() {
    { ns timeout 60 "$FX_PYTHON" "$FX_SUPPORT/proxy_client.py" --proxy "127.0.0.1:$p80_port" \
      --timeout 10 "$@" 2>&1 || true; } |
      sed -E 's/^(status=[0-9]+ reason=[^ ]+) .*/\1/' | paste -sd' ' -
  }
  ns_seen() { fx_jsonl_count "$nsd/origin.log" target~"$1"; }
  two="$(req GET /echo?probe=p80-1 p80.sluice.test)$(req GET /hello?probe=p80-2 p80.sluice.test:80)"
  out=$(nspc --connect p80.sluice.test:80 --no-tls --responses 2 --raw "$two")
  check_eq "port 80: plain HTTP in a tunnel to port 80 is served (two requests, keep-alive)" \
    "$out" "connect=200 tls=none status=200 reason=- status=200 reason=-"
  check_eq "port 80: the origin on port 80 got both, in the clear, with Host p80.sluice.test" \
    "$(fx_jsonl_count "$nsd/origin.log" target~probe=p80- tls=false \
      headers~'["Host", "p80.sluice.test"]')" 2
  FX_AUDIT=$nsd/audit.log check_audit "port 80: audit line (allow, scheme http, port 80, path)" \
    decision=allow method=GET scheme=http host=p80.sluice.test port=80 path=/echo status=200
  rc=0
  got=$(ns curl -q -sS --max-time 10 --proxytunnel --proxy "http://127.0.0.1:$p80_port" \
    "http://p80.sluice.test/hello?probe=p80-curl" 2>"$nsd/curl.err") || rc=$?
  check_eq "port 80: curl --proxytunnel http://p80.sluice.test/ (CONNECT :80, then HTTP)" \
    "$rc $got" "0 hello from origin.py"
  # The CONNECT's head does not time the tunnel: its second head gets the header timeout (3 s)
  # from its first byte, like the first one, not the idle timeout (30 s).
  t0=$(date +%s)
  out=$(nspc --connect p80.sluice.test:80 --no-tls --responses 2 --eof-wait 5 --raw \
    "$(req GET /hello?probe=p80-t1 p80.sluice.test)GET /hello?probe=p80-t2 HTTP/1.1\\r\\nHost: p80")
  check_eq "port 80: a second head never finished in that tunnel: 408 at the header timeout" \
    "$out $(($(date +%s) - t0 <= 7))" \
    "connect=200 tls=none status=200 reason=- status=408 reason=bad-request eof 1"
  out=$(nspc --connect p80.sluice.test:80 --no-tls \
    --raw "$(req GET /echo?probe=p80-hm other.sluice.test)")
  check_eq "port 80: a Host naming another host on that tunnel -> 421 host-mismatch" \
    "$out" "connect=200 tls=none status=421 reason=host-mismatch"
  out=$(nspc --connect cred80.sluice.test:80 --no-tls \
    --raw "$(req GET /echo?probe=p80-cred cred80.sluice.test)")
  check_eq "port 80: HTTP in a tunnel to a rule with a credential -> 403 credential-needs-tls" \
    "$out" "connect=200 tls=none status=403 reason=credential-needs-tls"
  check_eq "port 80: the origin never saw the mismatched nor the credential request" \
    "$(ns_seen probe=p80-hm) $(ns_seen probe=p80-cred)" "0 0"
  check "port 80: the credential is nowhere in the origin's log" \
    fx_absent "$p80_secret" "$nsd/origin.log"
  out=$(nspc --connect p80.sluice.test:80 --no-tls --raw '\x00\x01\x02 hello' --responses 0 \
    --eof-wait 5)
  check_eq "port 80: garbage (neither TLS nor HTTP) on that tunnel is still closed (not-tls)" \
    "$out" "connect=200 tls=none eof"
  FX_AUDIT=$nsd/audit.log check_audit "port 80: audit line with reason not-tls" \
    decision=error reason=not-tls host=p80.sluice.test port=80
  check "port 80: SIGTERM stops the namespaced proxy with exit 0" fx_proxy_stop "$p80_pid"
elif [ -z "$ns_pid" ]; then
  fx_skip "port 80: plain HTTP inside a tunnel to port 80 is handled as HTTP" \
    "needs a private network namespace (root, unshare --net, nsenter, ip) to own port 80 safely"
fi

# --- (3) host-mismatch ------------------------------------------------------------------------
# (a) TLS SNI naming another host than the CONNECT: the handshake fails.
rc=0
timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" -connect "$A:$FX_TLS_PORT" \
  -servername "$B" -CAfile "$FX_SLUICE_CA" </dev/null >"$FX_WORK/sni.out" 2>&1 || rc=$?
check "host-mismatch: SNI $B in a tunnel to $A: the handshake fails, no certificate" \
  bash -c "[ $rc -ne 0 ] && grep -q 'Cipher is (NONE)' '$FX_WORK/sni.out' &&
    grep -q 'no peer certificate available' '$FX_WORK/sni.out'"
check_audit "host-mismatch: SNI: audit line with reason host-mismatch" \
  decision=error reason=host-mismatch host="$A" port="$FX_TLS_PORT"
timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" -connect "$A:$FX_TLS_PORT" \
  -servername A.Sluice.TEST -CAfile "$FX_SLUICE_CA" -verify_hostname "$A" \
  </dev/null >"$FX_WORK/sni-case.out" 2>&1 || true
check "an SNI differing only in letter case (A.Sluice.TEST) names the same host: handshake ok" \
  bash -c "grep -q 'Verify return code: 0 (ok)' '$FX_WORK/sni-case.out' &&
    ! grep -q 'Cipher is (NONE)' '$FX_WORK/sni-case.out'"

# (b) a Host header naming another host inside the tunnel: 421, never reaches the origin.
out=$(fx_pc --connect "$PYT" --host-header "$B:$FX_PY_TLS_PORT" --request 'GET /echo?probe=hm-b')
check_match "host-mismatch: Host: $B in a tunnel to $A -> 421 (though $B is allowed)" \
  "$out" "^connect=200 tls=ok status=421 reason=host-mismatch( closed)?\$"
check_eq "host-mismatch: ... the origin never saw it" "$(fx_seen probe=hm-b)" 0
check_audit "host-mismatch: audit line for the Host header" \
  decision=error reason=host-mismatch host="$A" port="$FX_PY_TLS_PORT" method=GET
out=$(fx_pc --connect "$PYT" --host-header "$A" --request 'GET /echo?probe=hm-port')
check_match "host-mismatch: Host without a port (so 443) in a tunnel to another port -> 421" \
  "$out" "^connect=200 tls=ok status=421 reason=host-mismatch( closed)?\$"
check_eq "host-mismatch: ... the origin never saw it" "$(fx_seen probe=hm-port)" 0
out=$(fx_pc --connect "$PYT" --host-header "A.Sluice.Test.:$FX_PY_TLS_PORT" \
  --request 'GET /echo?probe=hm-norm')
check_eq "Host: A.Sluice.Test.:PORT (letter case, trailing dot) is the tunnel's host: 200" \
  "$out" "connect=200 tls=ok status=200 reason=-"

# (b2) the CONNECT's own Host header naming another host (RFC 9110 §7.2 says the target's
# authority; Node's documented CONNECT pattern sends the proxy's address): the tunnel goes to the
# CONNECT host whatever it says, so it is not refused but noted on the CONNECT's audit line; every
# request inside is still checked against the CONNECT host. A malformed one is still bad-host.
out=$(fx_pc --raw "CONNECT $PYT HTTP/1.1\r\nHost: $B:$FX_PY_TLS_PORT\r\n\r\n")
check_eq "CONNECT $A with Host: $B -> 200: the tunnel is $A's" "$out" "status=200 reason=-"
check_audit "... the CONNECT's audit line notes the Host header" decision=allow host="$A" \
  port="$FX_PY_TLS_PORT" method=CONNECT connect_host_header="$B:$FX_PY_TLS_PORT"
out=$(fx_pc --raw "CONNECT $PYT HTTP/1.1\r\nHost: A.Sluice.Test\r\n\r\n")
check_eq "CONNECT $A with Host: A.Sluice.Test (no port, letter case) -> 200" \
  "$out" "status=200 reason=-"
check_eq "... a Host naming the CONNECT host is not noted" \
  "$(fx_jsonl_count "$FX_AUDIT" method=CONNECT connect_host_header=A.Sluice.Test)" 0
out=$(fx_pc --raw "CONNECT $PYT HTTP/1.1\r\nHost: a..b\r\n\r\n")
check_eq "CONNECT $A with a malformed Host (a..b) -> 400 bad-host" "$out" "status=400 reason=bad-host"
out=$(node "$FX_SUPPORT/node_connect.mjs" "$FX_PROXY_PORT" "$PYT" "$FX_SLUICE_CA" \
  "/hello?probe=node-connect" 2>&1 | paste -sd' ' -)
check_eq "Node's http.request({method:'CONNECT', path:'$PYT'}) (Host: the proxy's address): 200" \
  "$out" "connect=200 tls=ok status=200"
check_audit "... its CONNECT line notes the proxy's address as its Host" decision=allow \
  method=CONNECT host="$A" port="$FX_PY_TLS_PORT" connect_host_header="127.0.0.1:$FX_PROXY_PORT"
check_eq "... and its request reached the origin" "$(fx_seen probe=node-connect)" 1
out=$(node "$FX_SUPPORT/node_connect.mjs" "$FX_PROXY_PORT" "$PYT" "$FX_SLUICE_CA" \
  "/hello?probe=node-inside" "127.0.0.1:$FX_PROXY_PORT" 2>&1 | paste -sd' ' -)
check_eq "... inside that tunnel a request whose Host is the proxy's address: 421 host-mismatch" \
  "$out" "connect=200 tls=ok status=421"
check_eq "... which never reached the origin" "$(fx_seen probe=node-inside)" 0

# (c) an absolute-form target naming another host inside the tunnel.
out=$(fx_pc --connect "$PYT" \
  --raw "$(req GET "https://$B:$FX_PY_TLS_PORT/echo?probe=hm-c1" "$B:$FX_PY_TLS_PORT")")
check_eq "host-mismatch: absolute-form https://$B/... in a tunnel to $A -> 421" \
  "$out" "connect=200 tls=ok status=421 reason=host-mismatch"
out=$(fx_pc --connect "$PYT" --raw "$(req GET "https://$B:$FX_PY_TLS_PORT/echo?probe=hm-c2" "$PYT")")
check_eq "host-mismatch: ... also when its Host header names the tunnel's host" \
  "$out" "connect=200 tls=ok status=421 reason=host-mismatch"
out=$(fx_pc --connect "$PYT" --show-body \
  --raw "$(req GET "https://$B:$FX_PY_TLS_PORT/echo?probe=hm-c3" "$PYT")")
check_match "host-mismatch: the body names the URL as sent (no query), not $PYT" \
  "$out" "body=sluice: GET https://$B:$FX_PY_TLS_PORT/echo failed: host-mismatch"
out=$(fx_pc --connect "$PYT" --show-body \
  --raw "$(req GET "https://u:pw@$PYT/echo?probe=hm-c4" "$PYT")")
check_match "a URL with userinfo in a tunnel: 400 bad-host, its body without the userinfo" \
  "$out" "status=400 reason=bad-host body=sluice: GET https://$PYT/echo failed: bad-host"
out=$(fx_pc --connect "$PYT" --show-body \
  --raw "$(req GET "/echo?probe=hm-b2" "$B:$FX_PY_TLS_PORT")")
check_match "host-mismatch: for an origin-form target, the tunnel's URL with its path" \
  "$out" "body=sluice: GET https://$PYT/echo failed: host-mismatch"
check_eq "host-mismatch: ... the origin saw neither" "$(fx_seen probe=hm-c)" 0
out=$(fx_pc --connect "$PYT" --raw "$(req GET "https://$PYT/echo?probe=abs-ok" "$PYT")")
check_eq "absolute-form naming the tunnel's own host inside the tunnel: 200" \
  "$out" "connect=200 tls=ok status=200 reason=-"
check_eq "absolute-form naming the tunnel's own host: the origin got it in origin-form" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target=/echo?probe=abs-ok)" 1

# (d) plain HTTP in absolute-form whose Host header names another host (Node's http.request
# through a proxy sends the proxy's address there): the Host is ignored (RFC 9112 §3.2.2), the
# request goes to the URL's host with the URL's host as its Host.
out=$(fx_pc --absolute "http://$PYH/echo?probe=hm-d" --host-header "$B:$FX_PY_HTTP_PORT")
check_eq "absolute-form http://$A/ with Host: $B: the Host is ignored -> 200" "$out" "status=200 reason=-"
check_eq "... the origin got it once, with the URL's host as its Host" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=hm-d "headers~\"$A:$FX_PY_HTTP_PORT\"]")" 1
check_eq "... and nothing of Host: $B" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=hm-d "headers~$B")" 0

# --- (4) bad-host (docs/reference/proxy.md §4.3) -----------------------------------------------------------------
badhost() { # badhost DESCRIPTION METHOD TARGET : a raw proxy request -> 400 bad-host
  local o
  o=$(fx_pc --raw "$(req "$2" "$3" x)")
  check_eq "bad-host: $1 -> 400 bad-host" "$o" "status=400 reason=bad-host"
}
badhost "CONNECT bad_host.example:443" CONNECT bad_host.example:443
badhost "CONNECT a%00b.example:443" CONNECT a%00b.example:443
badhost "CONNECT with a 64-character label" CONNECT "$(printf 'a%.0s' {1..64}).example:443"
badhost "CONNECT -lead.example:443 (a label starting with -)" CONNECT -lead.example:443
badhost "GET http://bad_host.example/" GET http://bad_host.example/
badhost "GET http://a%00b.example/" GET http://a%00b.example/
# Non-ASCII (UTF-8 bytes; IDNs must arrive as xn-- A-labels): bad-host per docs/reference/proxy.md §4.3.
badhost "CONNECT ex\\xc3\\xa4mple.com:443 (UTF-8 name)" CONNECT 'ex\xc3\xa4mple.com:443'
# A space splits the request line itself: malformed either way, 400.
out=$(fx_pc --raw "$(req GET 'http://exa mple.com/' 'exa mple.com')")
check_match "GET http://exa mple.com/ (a space splits the request line) -> 400" \
  "$out" '^status=400 reason=(bad-request|bad-host)$'
for h in bad_host 'exa mple.com' 'ex\xc3\xa4mple.com'; do
  out=$(fx_pc --connect "$PYT" --raw "$(req GET /echo?probe=bh-hdr "$h")")
  check_eq "bad-host: Host: $h inside a tunnel -> 400 bad-host" \
    "$out" "connect=200 tls=ok status=400 reason=bad-host"
done
out=$(fx_pc --raw "$(req GET "http://$PYH/echo?probe=bh-hdr" 'exa mple.com')")
check_eq "bad-host: plain http://$A/ with Host: exa mple.com -> 400 bad-host" \
  "$out" "status=400 reason=bad-host"
check_eq "bad-host: ... the origin never saw any of them" "$(fx_seen probe=bh-hdr)" 0
check_audit "bad-host: audit line with reason bad-host" decision=error reason=bad-host

# --- (5) too-large: a request head over 64 KiB -> 431, its target alone -> 414 (docs/reference/proxy.md §4.10) ----------------------------
big="X-Big: $(head -c 70000 /dev/zero | tr '\0' a)"
out=$(fx_pc --raw "$(req GET "http://$PYH/echo?probe=big-plain" "$PYH" "$big")")
check_eq "too-large: a 70 kB plain proxy request head -> 431 too-large" \
  "$out" "status=431 reason=too-large"
out=$(fx_pc --raw "$(req CONNECT "$PYT" "$PYT" "$big")")
check_eq "too-large: a 70 kB CONNECT head -> 431 too-large" "$out" "status=431 reason=too-large"
out=$(fx_pc --connect "$PYT" --raw "$(req GET /echo?probe=big-tunnel "$PYT" "$big")")
check_eq "too-large: a 70 kB head inside a tunnel -> 431 too-large" \
  "$out" "connect=200 tls=ok status=431 reason=too-large"
# A request target over the limit alone is a request line too long: 414 (RFC 9112 §3), reason
# too-large, plain (absolute form) and inside a tunnel.
long="$(head -c 70000 /dev/zero | tr '\0' a)"
out=$(fx_pc --raw "$(req GET "http://$PYH/echo?probe=big-target-$long" "$PYH")")
check_eq "too-large: a 70 kB plain proxy request target -> 414 too-large" \
  "$out" "status=414 reason=too-large"
out=$(fx_pc --connect "$PYT" --raw "$(req GET "/echo?probe=big-target-$long" "$PYT")")
check_eq "too-large: a 70 kB request target inside a tunnel -> 414 too-large" \
  "$out" "connect=200 tls=ok status=414 reason=too-large"
check_eq "too-large: the origin saw none of them" "$(fx_seen probe=big-)" 0
check_audit "too-large: audit line with reason too-large" decision=error reason=too-large
check_audit "too-large: audit line of a target too long, status 414" decision=error \
  reason=too-large status=414
fine=$(head -c 60000 /dev/zero | tr '\0' b)
out=$(fx_pc --connect "$PYT" --header "X-Fine: $fine" --request 'GET /echo?probe=fine-60k')
check_eq "a 60 kB head (under the bound) inside a tunnel is forwarded: 200" \
  "$out" "connect=200 tls=ok status=200 reason=-"
check_eq "... and the origin got the 60 kB header" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=fine-60k headers~"$fine")" 1

# --- (7) pipelining (docs/reference/proxy.md §4.1) ---------------------------------------------------------------
# bodies < OUT : the status and body lines of a --show-body run, joined by |.
bodies() { grep -oE '^(status=[0-9]+ reason=[^ ]+|body=.*)' | paste -sd'|' -; }
want_bodies='status=200 reason=-|body=hello from origin.py\n|status=202 reason=-|body=status 202\n'
want_bodies+='|status=203 reason=-|body=status 203\n'
fx_pyclient --timeout 10 --connect "$PYT" --pipeline --show-body \
  --request 'GET /hello?probe=pipe-1' --request 'GET /status?code=202&probe=pipe-2' \
  --request 'GET /status?code=203&probe=pipe-3' >"$FX_WORK/pipe.out" 2>&1 || true
check_eq "pipelining in a tunnel: three requests in one write, three responses in order" \
  "$(bodies <"$FX_WORK/pipe.out")" "$want_bodies"
check_eq "pipelining in a tunnel: the origin got the three on one connection" \
  "$(fx_jsonl_distinct "$FX_ORIGIN_LOG" conn target~probe=pipe-) $(fx_seen probe=pipe-)" "1 3"
fx_pyclient --timeout 10 --connect "m.sluice.test:$FX_PY_TLS_PORT" --pipeline \
  --request 'GET /hello?probe=pipm-1' --request 'DELETE /echo?probe=pipm-2' \
  --request 'GET /status?code=202&probe=pipm-3' >"$FX_WORK/pipe-m.out" 2>&1 || true
check_eq "pipelining: a refused request in the middle (DELETE, GET-only rule) -> 200, 403, 202" \
  "$(grep -oE '^status=[0-9]+ reason=[^ ]+' "$FX_WORK/pipe-m.out" | paste -sd' ' -)" \
  "status=200 reason=- status=403 reason=method-not-allowed status=202 reason=-"
check_eq "pipelining: ... the origin never saw the DELETE" "$(fx_seen probe=pipm-2)" 0
fx_pyclient --timeout 10 --absolute "http://$PYH/hello?probe=pp-1" --pipeline --show-body \
  --request 'GET' --request "GET http://$PYH/status?code=202&probe=pp-2" \
  --request "GET http://$PYH/status?code=203&probe=pp-3" >"$FX_WORK/pipe-plain.out" 2>&1 || true
check_eq "pipelining on plain HTTP: three absolute-form requests in one write, in order" \
  "$(bodies <"$FX_WORK/pipe-plain.out")" "$want_bodies"
check_eq "pipelining on plain HTTP: the origin got all three" "$(fx_seen probe=pp-)" 3

# --- (8) WebSocket relayed both ways; h2c ignored, others refused (docs/reference/proxy.md §4.1) ----------------
ws_key=dGhlIHNhbXBsZSBub25jZQ== # RFC 6455 §1.3: its accept value is s3pPLMBiTxaQ9kYGzzhZRbK+xOo=
ws() { # ws PROBE : a WebSocket opening handshake for origin.py's /ws
  req GET "/ws?probe=$1" "$PYT" 'Upgrade: websocket' 'Connection: Upgrade' \
    "Sec-WebSocket-Key: $ws_key" 'Sec-WebSocket-Version: 13'
}
out=$(fx_pc --connect "$PYT" --raw "$(ws ws-1)" --show-header Sec-WebSocket-Accept \
  --then 'hello ws\x00\xff\r\n' --then 'more bytes, then BYE' --eof-wait 5)
check_eq "websocket: 101, the accept value, bytes echoed both ways, the origin's close relayed" \
  "$out" "connect=200 tls=ok status=101 reason=- \
header sec-websocket-accept=s3pPLMBiTxaQ9kYGzzhZRbK+xOo= recv=hello ws\\x00\\xff\\r\\n \
recv=more bytes, then BYE eof"
check_eq "websocket: the origin got Upgrade: websocket, Connection: Upgrade and the key" \
  "$(origin_headers probe=ws-1 upgrade connection sec-websocket-key)" \
  "connection=Upgrade sec-websocket-key=$ws_key upgrade=websocket"
check_audit "websocket: audit line (allow, 101) once the relay ended" \
  decision=allow method=GET host="$A" path=/ws status=101
# Bytes sent in the same write as the upgrade request; then the client closes first.
out=$(fx_pc --connect "$PYT" --raw "$(ws ws-2)early bytes" --recv 11 --then 'late')
check_eq "websocket: bytes sent right behind the upgrade request are relayed after the 101" \
  "$out" "connect=200 tls=ok status=101 reason=- recv=early bytes recv=late"
check "websocket: the client closing ends the relay (its audit line within 5 s)" \
  fx_wait 5 audit_at_least 2 method=GET path=/ws status=101
out=$(fx_pc --connect "$PYT" --raw "$(req GET /hello?probe=ws-no "$PYT" 'Upgrade: websocket' \
  'Connection: Upgrade' "Sec-WebSocket-Key: $ws_key" 'Sec-WebSocket-Version: 13')" --show-body)
check_eq "websocket: an origin that does not upgrade: its own answer reaches the client" \
  "$out" "connect=200 tls=ok status=200 reason=- body=hello from origin.py\\n"
# An h2c offer (curl --http2 makes one on every plain request) is ignored, as an origin that
# does not speak h2c ignores it (RFC 9113 §3.1): the request goes on in HTTP/1.1 without it,
# and the connection closes after its response (the parser reads nothing after an upgrade).
out=$(fx_pc --connect "$PYT" --raw "$(req GET /echo?probe=h2c "$PYT" \
  'Connection: Upgrade, HTTP2-Settings' 'Upgrade: h2c' 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA')$(
  req GET /echo?probe=h2c-next "$PYT")" --eof-wait 5)
check_eq "Upgrade: h2c inside a tunnel: ignored, 200 in HTTP/1.1, then closed" \
  "$out" "connect=200 tls=ok status=200 reason=- eof"
check_eq "Upgrade: h2c: the origin got the request without Upgrade, HTTP2-Settings, Connection" \
  "$(origin_headers probe=h2c upgrade http2-settings connection)" ""
check_eq "Upgrade: h2c: the request pipelined behind it was not read" "$(fx_seen probe=h2c-next)" 0
out=$(fx_pc --connect "$PYT" --raw "$(req GET /echo?probe=h2c-ws "$PYT" \
  'Connection: Upgrade' 'Upgrade: foo/2')")
check_eq "Upgrade: foo/2 (neither websocket nor h2c) inside a tunnel -> 400 bad-request" \
  "$out" "connect=200 tls=ok status=400 reason=bad-request"
check_eq "Upgrade: foo/2: the origin never saw it" "$(fx_seen probe=h2c-ws)" 0

# --- (9) CONNECT inside a tunnel -> 400 -------------------------------------------------------
out=$(fx_pc --connect "$PYT" --raw "$(req CONNECT "$B:$FX_PY_TLS_PORT" "$B:$FX_PY_TLS_PORT")")
check_eq "CONNECT inside a tunnel -> 400 bad-request" \
  "$out" "connect=200 tls=ok status=400 reason=bad-request"
fx_skip "an origin-form request sent straight to the proxy -> 400" "covered by proxy_http.sh"

# --- (10) Proxy-Authorization inside a tunnel is not forwarded (docs/reference/proxy.md §4.6) --------------------
pa=$(printf 'local:pt-inner-%s' "$(fx_random_hex 8)" | base64 -w0)
out=$(fx_pc --connect "$PYT" --header "Proxy-Authorization: Basic $pa" \
  --request 'GET /echo?probe=pa-tunnel')
check_eq "Proxy-Authorization inside a tunnel: the request passes" \
  "$out" "connect=200 tls=ok status=200 reason=-"
check_eq "Proxy-Authorization inside a tunnel: it never reaches the origin" \
  "$(fx_seen probe=pa-tunnel) $(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=pa-tunnel \
    headers~"$pa")" "1 0"
fx_skip "Proxy-Authorization of a plain HTTP request is not forwarded" "covered by proxy_basic.sh"

# --- docs/reference/proxy.md §4.7 over the refusals above: inside a tunnel the client is known (its CONNECT was
# allowed, and identity is per connection), so every refusal line there names the client and
# the environment; prints REASON:COUNT for the lines that do not.
sleep 1 # let the audit writer catch up
tunnel_refusals_without_env() {
  "$FX_PYTHON" - "$FX_AUDIT" <<'EOF'
import json, sys
allowed, bad = set(), {}
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        if d["method"] == "CONNECT" and d["decision"] == "allow":
            allowed.add(d["src"])
        elif d["decision"] in ("deny", "error") and d["src"] in allowed:
            if not (d.get("client") and d.get("environment")):
                bad[d["reason"]] = bad.get(d["reason"], 0) + 1
print(" ".join(f"{k}:{v}" for k, v in sorted(bad.items())))
EOF
}
check_eq "audit: every refusal inside an allowed tunnel names client and environment" \
  "$(tunnel_refusals_without_env)" ""

check "SIGTERM stops the main proxy with exit 0" fx_proxy_stop

# --- (6) overloaded: --max-connections 2 -> 503 (docs/reference/proxy.md §4.10) ----------------------------------
fx_proxy_start --policy "$policy" --max-connections 2 "${common[@]}" ||
  fx_bail "sluice proxy starts with --max-connections 2"
hold_out=$FX_WORK/hold.out
"$FX_PYTHON" - "$FX_PROXY_PORT" >"$hold_out" 2>&1 <<'EOF' &
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) for _ in range(2)]
print("held", flush=True)
time.sleep(8)  # under the 10 s header timeout
EOF
hold_pid=$!
FX_PIDS+=("$hold_pid")
fx_wait 10 grep -q held "$hold_out" || true
# shellcheck disable=SC2317 # called through check and fx_wait
conns_are() { # conns_are N : GET /v1/status says N connections
  fx_admin GET /v1/status && [ "$(fx_json "$FX_ADMIN_BODY" 'str(d["connections"])')" = "$1" ]
}
check "overloaded: the proxy counts the two idle connections" fx_wait 5 conns_are 2
out=$(fx_pc --raw "$(req GET "http://$PYH/hello?probe=over" "$PYH")" --eof-wait 5)
check_eq "overloaded: a third connection gets 503 overloaded, then the proxy closes it" \
  "$out" "status=503 reason=overloaded eof"
check_eq "overloaded: ... the origin never saw it" "$(fx_seen probe=over)" 0
check_audit "overloaded: audit line with reason overloaded" decision=error reason=overloaded
kill "$hold_pid" 2>/dev/null || true
wait "$hold_pid" 2>/dev/null || true
check "overloaded: the held connections are released (0 connections within 5 s)" \
  fx_wait 5 conns_are 0
out=$(fx_pc --absolute "http://$PYH/hello?probe=after-over")
check_eq "overloaded: once they are gone, a new connection is served" "$out" "status=200 reason=-"
check "SIGTERM stops the --max-connections proxy with exit 0" fx_proxy_stop

# --- (6b) client-overloaded: --max-connections-per-client 3 -> 503 for that address alone ------
# (docs/reference/proxy.md §4.5, §4.10) Three connections from 127.0.0.1 held; a fourth from it
# refused; 127.0.0.2 (loopback) unaffected; one of the three closes and 127.0.0.1 gets in again.
fx_proxy_start --policy "$policy" --workers 2 --max-connections-per-client 3 "${common[@]}" ||
  fx_bail "sluice proxy starts with --max-connections-per-client 3"
pc_metric() { # pc_metric SERIES : its value in a fresh GET /metrics
  fx_admin GET /metrics
  awk -v s="$1" '$1 == s { print $2; exit }' "$FX_ADMIN_BODY"
}
pc_hold=$FX_WORK/pc-hold.out
# Holds three idle connections from 127.0.0.1; closes the first when pc-close1 appears, the rest
# when pc-stop appears (or after 9 s, under the 10 s header timeout).
"$FX_PYTHON" "$SLUICE_SRC/tests/support/hold_conns.py" 127.0.0.1 "$FX_PROXY_PORT" 3 "$FX_WORK" pc 9 \
  127.0.0.1 >"$pc_hold" 2>&1 &
pc_hold_pid=$!
FX_PIDS+=("$pc_hold_pid")
fx_wait 10 grep -q held "$pc_hold" || true
check "client-overloaded: the proxy counts the three idle connections of 127.0.0.1" \
  fx_wait 5 conns_are 3
out=$(fx_pc --raw "$(req GET "http://$PYH/hello?probe=pc-4th" "$PYH")" --eof-wait 5)
check_eq "client-overloaded: a fourth from 127.0.0.1 gets 503 client-overloaded, then the close" \
  "$out" "status=503 reason=client-overloaded eof"
out=$(curl -sS -i -x "http://127.0.0.1:$FX_PROXY_PORT" "http://$PYH/hello?probe=pc-4th-curl" 2>&1 ||
  true)
check_match "client-overloaded: ... curl sees 503 and X-Sluice-Reason: client-overloaded" \
  "$(tr -d '\r' <<<"$out" | paste -sd'|' -)" \
  '^HTTP/1\.1 503 [^|]*\|(.*\|)?X-Sluice-Reason: client-overloaded\|'
# Refused at the accept, before its head was read: the body cannot name the request.
check_eq "client-overloaded: ... and the body says what failed" \
  "$(tr -d '\r' <<<"$out" | tail -n 1)" \
  "sluice: request (unparsed target) failed: client-overloaded: this client address has too many connections open"
check_eq "client-overloaded: ... the origin never saw them" "$(fx_seen probe=pc-4th)" 0
check_audit "client-overloaded: audit line with reason client-overloaded" \
  decision=error reason=client-overloaded
out=$(curl -sS -o /dev/null -w '%{http_code}' --interface 127.0.0.2 \
  -x "http://127.0.0.1:$FX_PROXY_PORT" "http://$PYH/hello?probe=pc-other" 2>&1 || true)
check_eq "client-overloaded: another address (127.0.0.2) is served meanwhile" "$out" 200
check_eq "client-overloaded: sluice_connections_refused_total{reason=\"client-overloaded\"}" \
  "$(pc_metric 'sluice_connections_refused_total{reason="client-overloaded"}')" 2
check_eq "client-overloaded: ... not counted as overloaded" \
  "$(pc_metric 'sluice_connections_refused_total{reason="overloaded"}')" 0
check_eq "client-overloaded: sluice_requests_total{decision=\"error\",reason=\"client-overloaded\"}" \
  "$(pc_metric 'sluice_requests_total{decision="error",reason="client-overloaded"}')" 2
touch "$FX_WORK/pc-close1"
fx_wait 5 grep -q "closed one" "$pc_hold" || true
check "client-overloaded: one of the three closes (2 connections within 5 s)" \
  fx_wait 5 conns_are 2
out=$(fx_pc --absolute "http://$PYH/hello?probe=pc-again")
check_eq "client-overloaded: then 127.0.0.1 is served again" "$out" "status=200 reason=-"
touch "$FX_WORK/pc-stop"
wait "$pc_hold_pid" 2>/dev/null || true
check "client-overloaded: the held connections are released (0 connections within 5 s)" \
  fx_wait 5 conns_are 0
check "SIGTERM stops the --max-connections-per-client 3 proxy with exit 0" fx_proxy_stop

# --- (6c) every way a connection ends gives its address's slot back, exactly once ---------------
# 2 000 connections from 127.0.0.1 under --max-connections-per-client 5, ended every way: closed
# before a byte, reset, half a head then closed, a request served (plain, and in an intercepted
# tunnel), a refusal, a 408 and refusals client-overloaded themselves (six at once). Then the
# address holds nothing: five at once are all served and a sixth is refused. A slot never given
# back would lock the address out for good; one given back twice would let a sixth in.
fx_proxy_start --policy "$policy" --workers 2 --max-connections-per-client 5 \
  --header-timeout 2 "${common[@]}" ||
  fx_bail "sluice proxy starts with --max-connections-per-client 5"
out=$("$FX_PYTHON" - "$FX_PROXY_PORT" "$PYH" "$PYT" "$FX_SLUICE_CA" "$FX_ADMIN_SOCK" <<'EOF'
import json, selectors, socket, ssl, struct, sys, time
port, pyh, pyt, ca, admin = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
counts = {}
opened = [0]
def note(k): counts[k] = counts.get(k, 0) + 1
def conn():
    opened[0] += 1
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s
def read_all(s):
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (ConnectionResetError, socket.timeout):
        pass
    return data
def metrics():
    a = socket.socket(socket.AF_UNIX)
    a.connect(admin)
    a.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = read_all(a).split(b"\r\n\r\n", 1)[1].decode()
    a.close()
    return dict(l.rsplit(" ", 1) for l in body.splitlines() if l and not l.startswith("#"))
# Connections accepted before this script's (the start's readiness probe).
base = int(metrics()["sluice_connections_total"])
def settle():
    # Until the proxy has accepted every connection made so far and let go of them all (GET
    # /metrics on the admin socket), so that each case starts with the address holding none. A
    # connection closed at once may still wait in the kernel's accept queue when none is open:
    # accepted later, it would hold a slot during the next case.
    t = time.monotonic()
    while time.monotonic() - t < 5:
        m = metrics()
        if (m.get("sluice_connections_open") == "0"
                and m.get("sluice_connections_total") == str(base + opened[0])):
            return
        time.sleep(0.01)
    note("unsettled")
def status(data):
    line = data.split(b"\r\n", 1)[0].split()
    return line[1].decode() if len(line) > 1 else "none"
def get(s, target, host):
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, host)).encode())
    return status(read_all(s))
t0 = time.monotonic()
for i in range(2000):
    if time.monotonic() - t0 > 90:
        note("deadline")
        break
    k = i % 10
    if k in (3, 9):
        settle()
    if k == 0:
        conn().close(); note("close")
    elif k == 1:
        s = conn()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close(); note("reset")
    elif k == 2:
        s = conn(); s.sendall(b"GET http://" + pyh.encode() + b"/hel"); s.close(); note("half")
    elif k in (3, 4, 5):
        note("plain-" + get(conn(), "http://%s/hello?probe=churn" % pyh, pyh))
    elif k == 6:
        note("refused-" + get(conn(), "http://denied.sluice.test/", "denied.sluice.test"))
    elif k == 7 and i % 100 == 7:
        s = conn()
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (pyt, pyt)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        if status(head) != "200":
            note("connect-" + status(head))
            s.close()
            continue
        t = ctx.wrap_socket(s, server_hostname=pyt.rsplit(":", 1)[0])
        note("tunnel-" + get(t, "/hello?probe=churn-tls", pyt))
        t.close()
    elif k == 8 and i % 400 == 8:
        s = conn(); s.sendall(b"GET http://"); note("timeout-" + status(read_all(s))); s.close()
    elif k == 9:
        # Six at once: one of them (the last the workers accepted, not always the last
        # connected) is answered 503 at once; the five others stay idle, unanswered.
        socks = [conn() for _ in range(6)]
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        ready = sel.select(5)
        first = ready[0][0].fileobj if ready else socks[5]
        note("sixth-" + status(read_all(first)))
        sel.unregister(first)
        # The five others hold their slots unanswered; on a loaded machine their header timeout
        # (2 s) may have run out meanwhile, and a 408 is their due. Anything else is a fault.
        for key, _ in sel.select(0):
            st = status(read_all(key.fileobj))
            if st != "408":
                note("another-answered-" + st)
        sel.close()
        for s in socks:
            s.close()
    else:
        conn().close(); note("close")
print(" ".join("%s:%d" % kv for kv in sorted(counts.items())))
EOF
) || true
fx_note "churn: $out"
check_eq "churn: 2 000 connections from 127.0.0.1 ended every way, each as expected" "$out" \
  "close:575 half:200 plain-200:600 refused-403:200 reset:200 sixth-503:200 timeout-408:5 tunnel-200:20"
check "churn: afterwards the proxy holds no connection (within 5 s)" fx_wait 5 conns_are 0
out=$("$FX_PYTHON" - "$FX_PROXY_PORT" "$PYH" <<'EOF'
import socket, sys
port, pyh = int(sys.argv[1]), sys.argv[2]
socks = []
for _ in range(6):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.settimeout(10)
    s.connect(("127.0.0.1", port)); socks.append(s)
res = []
for s in socks:
    s.sendall(("GET http://%s/hello?probe=after-churn HTTP/1.1\r\nHost: %s\r\n"
               "Connection: close\r\n\r\n" % (pyh, pyh)).encode())
for s in socks:
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    res.append(data.split(b"\r\n", 1)[0].split()[1].decode())
# Which of the six the workers accepted last is not the order of the connects.
print(" ".join(sorted(res)))
EOF
) || true
check_eq "churn: then five at once from 127.0.0.1 are served and a sixth is refused" "$out" \
  "200 200 200 200 200 503"
check "SIGTERM stops the --max-connections-per-client 5 proxy with exit 0" fx_proxy_stop

# --- (6e) refusals never take the global budget (docs/reference/proxy.md §4.10, SECURITY.md) ----
# --max-connections 16, --max-connections-per-client 4: 127.0.0.1 holds its four, then opens 600
# more in one burst (at most 20 s) and keeps them all open, so that every 503 would linger its
# full 2 s. Each of them is refused client-overloaded without taking a slot of the 16: none is
# refused overloaded, and 127.0.0.2 is served all along. At most 128 refusals are answered at
# once (sluice_connections_refusing, sampled); the others are closed at once, without a byte.
fx_proxy_start --policy "$policy" --workers 2 --max-connections 16 \
  --max-connections-per-client 4 "${common[@]}" ||
  fx_bail "sluice proxy starts with --max-connections 16 --max-connections-per-client 4"
rf_hold=$FX_WORK/rf-hold.out
"$FX_PYTHON" "$SLUICE_SRC/tests/support/hold_conns.py" 127.0.0.1 "$FX_PROXY_PORT" 4 "$FX_WORK" rf 9 \
  127.0.0.1 >"$rf_hold" 2>&1 &
rf_hold_pid=$!
FX_PIDS+=("$rf_hold_pid")
fx_wait 10 grep -q held "$rf_hold" || true
check "refusal flood: the proxy counts the four idle connections of 127.0.0.1" \
  fx_wait 5 conns_are 4
out=$("$FX_PYTHON" - "$FX_PROXY_PORT" "$PYH" "$FX_ADMIN_SOCK" <<'EOF'
import resource, socket, sys, threading, time
port, pyh, admin = int(sys.argv[1]), sys.argv[2], sys.argv[3]
N = 600
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft != resource.RLIM_INFINITY and soft < N + 256:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(N + 256, hard), hard))
counts = {}
def note(k, n=1): counts[k] = counts.get(k, 0) + n
def read_all(s):
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (ConnectionResetError, socket.timeout):
        pass
    return data
def metrics():
    a = socket.socket(socket.AF_UNIX)
    a.connect(admin)
    a.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = read_all(a).split(b"\r\n\r\n", 1)[1].decode()
    a.close()
    return dict(l.rsplit(" ", 1) for l in body.splitlines() if l and not l.startswith("#"))
base = int(metrics()["sluice_connections_total"])
stop = threading.Event()
peak = {"refusing": -1, "open": 0}
def sampler():
    while not stop.is_set():
        m = metrics()
        peak["refusing"] = max(peak["refusing"], int(m.get("sluice_connections_refusing", "-1")))
        peak["open"] = max(peak["open"], int(m["sluice_connections_open"]))
        time.sleep(0.005)
other = {}
def other_client():
    # 127.0.0.2, one request at a time until the flood is over (at most 200).
    for _ in range(200):
        if stop.is_set():
            break
        s = socket.socket(); s.bind(("127.0.0.2", 0)); s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(("GET http://%s/hello?probe=rf-other HTTP/1.1\r\nHost: %s\r\n"
                       "Connection: close\r\n\r\n" % (pyh, pyh)).encode())
            line = read_all(s).split(b"\r\n", 1)[0].split()
            st = line[1].decode() if len(line) > 1 else "none"
        except OSError as e:
            st = type(e).__name__
        s.close()
        other[st] = other.get(st, 0) + 1
threads = [threading.Thread(target=sampler), threading.Thread(target=other_client)]
for t in threads:
    t.start()
flood = []
t0 = time.monotonic()
for i in range(N):
    if time.monotonic() - t0 > 20:
        note("deadline")
        break
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.settimeout(10)
    s.connect(("127.0.0.1", port))
    flood.append(s)
burst = time.monotonic() - t0
# Until the proxy has accepted every one of them (bounded), then a while longer for 127.0.0.2.
t1 = time.monotonic()
while time.monotonic() - t1 < 10:
    if int(metrics()["sluice_connections_total"]) >= base + len(flood) + sum(other.values()):
        break
    time.sleep(0.01)
time.sleep(0.5)
stop.set()
for t in threads:
    t.join()
answered = unanswered = 0
for s in flood:
    s.settimeout(10)
    data = read_all(s)
    if data.startswith(b"HTTP/1.1 503 ") and b"X-Sluice-Reason: client-overloaded\r\n" in data:
        answered += 1
    elif data == b"":
        unanswered += 1
    else:
        note("flood-other")
    s.close()
m = metrics()
print("flood=%d answered-503:%s closed-at-once:%s counted-unanswered:%s other-200-only:%s "
      "other-requests>=3:%s refusing-peak<=128:%s refused-client-overloaded=%s "
      "refused-overloaded=%s %s" % (
    len(flood), answered > 0, unanswered > 0,
    m.get("sluice_connections_refused_unanswered_total") == str(unanswered),
    set(other) == {"200"}, sum(other.values()) >= 3, 0 <= peak["refusing"] <= 128,
    int(m['sluice_connections_refused_total{reason="client-overloaded"}']),
    m['sluice_connections_refused_total{reason="overloaded"}'],
    " ".join("%s:%d" % kv for kv in sorted(counts.items()))))
print("burst %.2f s, answered %d, closed at once %d, 127.0.0.2 %s, peaks %s" % (
    burst, answered, unanswered, other, peak), file=sys.stderr)
EOF
) || true
fx_note "refusal flood: $out"
check_eq "refusal flood: 600 beyond the cap refused, some answered 503 client-overloaded and the rest closed at once; 127.0.0.2 served; at most 128 answering; none overloaded" \
  "$out" "flood=600 answered-503:True closed-at-once:True counted-unanswered:True other-200-only:True other-requests>=3:True refusing-peak<=128:True refused-client-overloaded=600 refused-overloaded=0 "
touch "$FX_WORK/rf-stop"
wait "$rf_hold_pid" 2>/dev/null || true
check "refusal flood: afterwards the proxy holds no connection (within 5 s)" fx_wait 5 conns_are 0
out=$(curl -sS -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$FX_PROXY_PORT" \
  "http://$PYH/hello?probe=rf-after" 2>&1 || true)
check_eq "refusal flood: then 127.0.0.1 is served again" "$out" 200
check "SIGTERM stops the --max-connections 16 proxy with exit 0" fx_proxy_stop

# --- (6d) --max-connections-per-client: a bad value is refused, naming the flag ----------------
for bad in 0 1000001 x 12x -3; do
  out=$("$SLUICE_BIN" proxy --max-connections-per-client="$bad" 2>&1) && rc=0 || rc=$?
  check_eq "--max-connections-per-client=$bad: exit 2" "$rc" 2
  check_eq "--max-connections-per-client=$bad: the error names the flag and the value" "$out" \
    "sluice: proxy: option '--max-connections-per-client' needs a whole number from 1 to 1000000, not '$bad'"
done

# --- (11) a client that expires while its tunnel is open (docs/reference/snapshot.md §3, docs/reference/proxy.md §4.2) ----------------------
exp_epoch=$(($(date +%s) + 6))
exp_at=$(date -u -d "@$exp_epoch" +%Y-%m-%dT%H:%M:%SZ)
epolicy=$FX_WORK/expiry-policy.json
fx_policy "$epolicy" "{
  \"version\": 1,
  \"environments\": { \"edges\": { \"default\": \"deny\", \"rules\": [
    { \"host\": \"$A:$FX_PY_TLS_PORT\" } ] } },
  \"clients\": [ { \"id\": \"soon\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"edges\",
                   \"expires_at\": \"$exp_at\" } ]
}"
fx_proxy_start --policy "$epolicy" "${common[@]}" || fx_bail "sluice proxy starts (expiry policy)"
if fx_client_open exp --connect "$PYT" --timeout 20; then
  r1=$(fx_client_send exp 'GET /hello?probe=exp-1')
  if [ "$(date +%s)" -lt "$exp_epoch" ]; then
    check_match "expiry: before expires_at a request in the tunnel passes" \
      "$r1" '^status=200 reason=- '
  else
    fx_skip "expiry: before expires_at a request in the tunnel passes" \
      "this machine took until expires_at ($exp_at) to get there"
  fi
  while [ "$(date +%s)" -le "$exp_epoch" ]; do sleep 0.2; done # at most ~6 s
  r2=$(fx_client_send exp 'GET /hello?probe=exp-2')
  check_match "expiry: after expires_at the next request on the same tunnel -> 403 expired" \
    "$r2" '^status=403 reason=expired '
  check_eq "expiry: ... the origin never saw it" "$(fx_seen probe=exp-2)" 0
  check_audit "expiry: audit line with reason expired for that client" \
    decision=deny reason=expired client=soon host="$A"
  fx_client_close exp
else
  not_ok "expiry: a tunnel opens before expires_at"
  fx__dump "$FX_WORK/client-exp.out" "$FX_WORK/client-exp.err"
fi
check "SIGTERM stops the expiry proxy with exit 0" fx_proxy_stop

fx_done
