#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_dns.sh - DNS answers are checked as they are dialled (docs/reference/proxy.md §4.4):
# the proxy resolves through the system resolver (getaddrinfo), and a scripted DNS responder
# (tests/support/dnsd.py) answers it with loopback, private, link-local (169.254.169.254),
# unspecified and IPv6 forms that embed them (IPv4-mapped, -compatible, NAT64, 6to4, Teredo),
# with answers that change between queries (rebinding: public first, private after the cache
# expired), and with mixed answers (one allowed address, one refused: the refused one is never
# dialled). Refusals are `private-address`, with an audit line; listeners on every refused
# address (tests/support/tcp_canary.py) must never see a connection.
#
# Everything runs in a private network and mount namespace (unshare --net --mount; root only):
# its own loopback, an /etc/resolv.conf bind-mounted there only (nameserver 127.0.0.1, where
# dnsd.py listens), the "public" origin on 192.0.2.10 (TEST-NET-1, a documentation range the
# proxy allows) and the canaries on 127.0.0.1, 169.254.169.254 and ::1 on the origin's ports. No
# packet leaves the namespace, and the machine's resolv.conf is never touched.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup

if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null ||
  ! command -v ip >/dev/null; then
  fx_skip "DNS answers checked as dialled" \
    "needs root, unshare, nsenter and ip for a private network and mount namespace"
  fx_done
fi
fx_test_ca || fx_bail "the test CA"

# --- the namespace ------------------------------------------------------------------------------
host_resolv=$(sha256sum /etc/resolv.conf | cut -d' ' -f1)
unshare --net --mount --propagation private sleep 600 2>/dev/null &
ns_pid=$!
FX_PIDS+=("$ns_pid")
# ns CMD... : runs CMD in the namespace. Background peers are started with nsenter itself
# (--no-fork execs CMD), so that $! is CMD's own pid for the EXIT trap.
ns() { nsenter --no-fork --target "$ns_pid" --net --mount -- "$@"; }
fx_wait 5 fx_netns_own "$ns_pid" || fx_bail "a private network and mount namespace (unshare --net --mount)"
d=$FX_WORK/dns
mkdir -p "$d"
printf 'nameserver 127.0.0.1\noptions timeout:2 attempts:2\n' >"$d/resolv.conf"
{
  ns ip link set lo up &&
    ns ip addr add 192.0.2.10/32 dev lo &&
    ns ip addr add 169.254.169.254/32 dev lo &&
    ns mount --bind "$d/resolv.conf" /etc/resolv.conf
} 2>"$d/setup.err" || {
  fx__dump "$d/setup.err"
  fx_bail "namespace: lo up, 192.0.2.10 and 169.254.169.254 on it, resolv.conf bound"
}
check_eq "namespace: its /etc/resolv.conf names only 127.0.0.1" \
  "$(ns grep -c '^nameserver 127.0.0.1$' /etc/resolv.conf)" 1
check_eq "namespace: the machine's /etc/resolv.conf is untouched" \
  "$(sha256sum /etc/resolv.conf | cut -d' ' -f1)" "$host_resolv"
have6=0
if ns "$FX_PYTHON" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' \
  2>/dev/null; then
  have6=1
fi

# --- the peers: dnsd.py, the public origin, the canaries ---------------------------------------
nsenter --no-fork --target "$ns_pid" --net --mount -- "$FX_PYTHON" "$FX_SUPPORT/origin.py" serve \
  --host 192.0.2.10 --ports-file "$d/origin.ports" --log "$d/origin.log" \
  --cert "$FX_PKI/good.pem" --key "$FX_PKI/good.key" 2>"$d/origin.stderr" &
FX_PIDS+=("$!")
fx_wait 10 test -s "$d/origin.ports" || {
  fx__dump "$d/origin.stderr"
  fx_bail "origin.py starts on 192.0.2.10 in the namespace"
}
OH=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$d/origin.ports")
OT=$(sed -n 's/.*tls=\([0-9]*\).*/\1/p' "$d/origin.ports")
ORIGIN_LOG=$d/origin.log

canaries=()
for a in 127.0.0.1 169.254.169.254; do canaries+=("$a:$OH" "$a:$OT"); done
if [ "$have6" = 1 ]; then canaries+=("[::1]:$OH" "[::1]:$OT"); fi
CANARY_LOG=$d/canary.log
nsenter --no-fork --target "$ns_pid" --net --mount -- "$FX_PYTHON" "$FX_SUPPORT/tcp_canary.py" \
  --log "$CANARY_LOG" --ready "$d/canary.ready" "${canaries[@]}" 2>"$d/canary.stderr" &
FX_PIDS+=("$!")
fx_wait 10 test -f "$d/canary.ready" || fx_bail "the canaries start"
check_eq "canaries listen on every refused address, on the origin's ports" \
  "$(wc -l <"$d/canary.ready")" "${#canaries[@]}"

# The script: NAME -> { "A": [answer sets], "AAAA": [...] }; the k-th query gets set k.
P=192.0.2.10
cat >"$d/script.json" <<EOF
{
  "probe.sluice.test": { "A": [["$P"]] },
  "pub.sluice.test": { "A": [["$P"]] },
  "loop.sluice.test": { "A": [["127.0.0.1"]] },
  "loop2.sluice.test": { "A": [["127.0.0.2"]] },
  "meta.sluice.test": { "A": [["169.254.169.254"]] },
  "zero.sluice.test": { "A": [["0.0.0.0"]] },
  "ten.sluice.test": { "A": [["10.0.0.1"]] },
  "cgnat.sluice.test": { "A": [["100.64.0.1"]] },
  "rebind.sluice.test": { "A": [["$P"], ["127.0.0.1"]] },
  "rebind-tls.sluice.test": { "A": [["$P"], ["169.254.169.254"]] },
  "mix-pub-first.sluice.test": { "A": [["$P", "127.0.0.1"]] },
  "mix-priv-first.sluice.test": { "A": [["127.0.0.1", "169.254.169.254", "$P"]] },
  "mix-v6.sluice.test": { "A": [["$P"]], "AAAA": [["::ffff:127.0.0.1", "::1"]] },
  "mix-dead.sluice.test": { "A": [["127.0.0.1", "192.0.2.99"]] },
  "v6-loop.sluice.test": { "AAAA": [["::1"]] },
  "v6-mapped.sluice.test": { "AAAA": [["::ffff:127.0.0.1"]] },
  "v6-mapped-meta.sluice.test": { "AAAA": [["::ffff:169.254.169.254"]] },
  "v6-compat.sluice.test": { "AAAA": [["::127.0.0.1"]] },
  "v6-nat64.sluice.test": { "AAAA": [["64:ff9b::7f00:1"]] },
  "v6-nat64-meta.sluice.test": { "AAAA": [["64:ff9b::a9fe:a9fe"]] },
  "v6-6to4.sluice.test": { "AAAA": [["2002:7f00:1::1"]] },
  "v6-teredo-server.sluice.test": { "AAAA": [["2001:0:7f00:1::1"]] },
  "v6-teredo-client.sluice.test": { "AAAA": [["2001:0:c000:20a::80ff:fffe"]] },
  "v6-ula.sluice.test": { "AAAA": [["fd00::1"]] },
  "v6-link.sluice.test": { "AAAA": [["fe80::1"]] }
}
EOF
DNS_LOG=$d/queries.log
nsenter --no-fork --target "$ns_pid" --net --mount -- "$FX_PYTHON" "$FX_SUPPORT/dnsd.py" \
  --script "$d/script.json" --log "$DNS_LOG" --ready "$d/dnsd.ready" 2>"$d/dnsd.stderr" &
FX_PIDS+=("$!")
fx_wait 10 test -f "$d/dnsd.ready" || {
  fx__dump "$d/dnsd.stderr"
  fx_bail "dnsd.py starts on 127.0.0.1:53 in the namespace"
}
check_eq "control: getaddrinfo in the namespace asks dnsd.py (getent ahostsv4 probe.sluice.test)" \
  "$(ns timeout 10 getent ahostsv4 probe.sluice.test | awk 'NR == 1 { print $1 }')" "$P"
# queried NAME [TYPE] : how many TYPE (default A) questions dnsd.py got for NAME.
queried() { fx_jsonl_count "$DNS_LOG" name="$1" type="${2:-A}"; }

# --- the proxy, in the namespace -----------------------------------------------------------------
"$SLUICE_BIN" ca init --out "$FX_WORK/sluice-data" >"$FX_WORK/ca-init.out" 2>&1 ||
  fx_bail "sluice ca init"
FX_SLUICE_CA=$FX_WORK/sluice-data/ca.pem
policy=$FX_WORK/policy.json
# Every host is allowed: only the address check stands between a name and what it resolves to.
fx_policy "$policy" '{ "version": 1, "environments": { "all": { "default": "allow" } },
  "clients": [ { "id": "local", "cidr": "127.0.0.0/8", "environment": "all" } ] }'
FX_PROXY_PORT=$(ns "$FX_PYTHON" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
FX_AUDIT=$FX_WORK/proxy1.audit.log
FX_PROXY_LOG=$FX_WORK/proxy1.log
FX_ADMIN_SOCK=$FX_WORK/proxy1.sock
# One worker: one resolver cache, so the query counts below are exact.
nsenter --no-fork --target "$ns_pid" --net --mount -- "$SLUICE_BIN" proxy \
  --listen "127.0.0.1:$FX_PROXY_PORT" --data "$FX_WORK/sluice-data" --policy "$policy" \
  --audit-log "$FX_AUDIT" --admin-socket "$FX_ADMIN_SOCK" --log-level debug --workers 1 \
  --upstream-ca "$FX_TEST_CA" --upstream-timeout 5 >"$FX_WORK/proxy1.stdout" \
  2>"$FX_PROXY_LOG" &
FX_PROXY_PID=$!
FX_PIDS+=("$FX_PROXY_PID")
# shellcheck disable=SC2317 # called through fx_wait
ns_port_open() { FX_PROBE_IN=ns fx_port_open "$1"; }
fx_wait 10 ns_port_open "$FX_PROXY_PORT" || fx_bail "sluice proxy starts in the namespace"
ok "sluice proxy starts in the namespace"
# fx_curl runs curl in the namespace, through that proxy.
FX_CURL_IN="nsenter --target $ns_pid --net --mount --"

# --- (1) a public answer is dialled (the control) -----------------------------------------------
fx_curl "http://pub.sluice.test:$OH/echo?probe=pub-http"
check_status "control: a name answering $P (documentation range): plain HTTP 200" 200 -
fx_curl "https://pub.sluice.test:$OT/echo?probe=pub-tls"
check_status "control: ... and through a tunnel (TLS to the origin): 200" 200 -
check_eq "control: the origin on $P got both" \
  "$(fx_jsonl_count "$ORIGIN_LOG" target~probe=pub-)" 2
check_eq "control: the proxy resolved pub.sluice.test through dnsd.py (once: then cached)" \
  "$(queried pub.sluice.test)" 1

# --- (2) rebinding, first half: public now, private on the next query --------------------------
# /close answers are delimited by close, so no upstream connection is pooled across the wait.
rebind_t0=$SECONDS
fx_curl "http://rebind.sluice.test:$OH/close?bytes=5&probe=rebind-1"
check_status "rebinding: rebind.sluice.test answers $P first: 200" 200 -
fx_curl "https://rebind-tls.sluice.test:$OT/close?bytes=5&probe=rebind-tls-1"
check_status "rebinding: rebind-tls.sluice.test answers $P first (tunnel): 200" 200 -

# --- (3) names answering refused addresses --------------------------------------------------------
# refused NAME PORT [https] : a request for NAME is refused with private-address and an audit
# line, after dnsd.py was asked about NAME.
refused() {
  local name=$1 p=$2 scheme=${3:-http} type=A
  case $name in v6-*) type=AAAA ;; esac
  fx_curl --max-time 10 "$scheme://$name.sluice.test:$p/echo?probe=$name"
  check_refused "$name.sluice.test ($scheme): refused, private-address" private-address
  check "$name.sluice.test: ... after dnsd.py answered the proxy's $type query" \
    test "$(queried "$name.sluice.test" "$type")" -ge 1
  check_audit "$name.sluice.test: audit line with reason private-address" \
    decision=deny reason=private-address host="$name.sluice.test"
}
for n in loop loop2 meta zero ten cgnat; do refused "$n" "$OH"; done
refused loop "$OT" https
refused meta "$OT" https
for n in v6-loop v6-mapped v6-mapped-meta v6-compat v6-nat64 v6-nat64-meta v6-6to4 \
  v6-teredo-server v6-teredo-client v6-ula v6-link; do
  refused "$n" "$OH"
done
refused v6-mapped "$OT" https

# --- (4) mixed answers: the refused address is skipped, never dialled ---------------------------
for n in mix-pub-first mix-priv-first mix-v6; do
  fx_curl --max-time 10 "http://$n.sluice.test:$OH/echo?probe=$n"
  check_status "$n.sluice.test: the allowed answer ($P) is dialled: 200" 200 -
  check_eq "$n.sluice.test: ... and reached the origin on $P" \
    "$(fx_jsonl_count "$ORIGIN_LOG" target~"probe=$n")" 1
done
fx_curl --max-time 10 "https://mix-priv-first.sluice.test:$OT/echo?probe=mix-tls"
check_status "mix-priv-first.sluice.test through a tunnel: 200" 200 -
fx_curl --max-time 10 "http://mix-dead.sluice.test:$OH/echo?probe=mix-dead"
check_status "mix-dead.sluice.test (127.0.0.1 + an unreachable public address): 502" \
  502 upstream-unreachable
check_eq "after the mixed answers: no canary saw a connection" "$(wc -l <"$CANARY_LOG")" 0

fx_curl --max-time 10 "http://nx.sluice.test:$OH/echo"
check_status "a name dnsd.py does not know (NXDOMAIN): 502 dns" 502 dns

# --- (2) rebinding, second half ------------------------------------------------------------------
# The proxy caches answers for 30 s (proxy/dns.c): wait that out, then the next request
# resolves again, gets the private answer, and must check it.
left=$((rebind_t0 + 32 - SECONDS))
if [ "$left" -gt 0 ]; then
  echo "# waiting ${left} s for the proxy's DNS cache (30 s) to expire"
  sleep "$left"
fi
fx_curl --max-time 10 "http://rebind.sluice.test:$OH/echo?probe=rebind-2"
check_refused "rebinding: rebind.sluice.test now answers 127.0.0.1: private-address" \
  private-address
check_eq "rebinding: the proxy asked again (2 A queries) and got the loopback answer" \
  "$(fx_jsonl_count "$DNS_LOG" name=rebind.sluice.test type=A n=2 answer~127.0.0.1)" 1
fx_curl --max-time 10 "https://rebind-tls.sluice.test:$OT/echo?probe=rebind-tls-2"
check_refused "rebinding: rebind-tls.sluice.test now answers 169.254.169.254: private-address" \
  private-address
check_eq "rebinding: the proxy asked again for rebind-tls.sluice.test" \
  "$(queried rebind-tls.sluice.test)" 2
check_eq "rebinding: neither second request reached the origin" \
  "$(fx_jsonl_count "$ORIGIN_LOG" target~probe=rebind-2) $(fx_jsonl_count "$ORIGIN_LOG" \
    target~probe=rebind-tls-2)" "0 0"

check_eq "no canary (127.0.0.1, 169.254.169.254, ::1 on the origin's ports) ever saw a connection" \
  "$(wc -l <"$CANARY_LOG")" 0
if [ -s "$CANARY_LOG" ]; then sed 's/^/#   canary: /' "$CANARY_LOG"; fi
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
check_eq "the machine's /etc/resolv.conf is still untouched" \
  "$(sha256sum /etc/resolv.conf | cut -d' ' -f1)" "$host_resolv"
fx_done
