#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_containment.sh - docs/reference/containers.md §5.4 and SECURITY.md: from
# inside a sandbox nothing but the proxy port on the gateway is reachable, and every other
# attempt fails fast (≤ 1 s, a reject, not a silent drop): a host listener on 0.0.0.0 via the
# gateway, docker0's address and the host's main address; a container on the default bridge; a
# second sandbox; UDP (port 53 included) to the gateway and to another host address. Each
# target is first shown reachable from the host where that makes sense (so a failure from
# inside means something). With the proxy killed, a request through it fails at once; restarted,
# the requests made meanwhile never appear at the origin. Network sl-t-contain, subnet
# 10.213.14.0/24.
# shellcheck disable=SC2016,SC2001 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-contain 14

# --- host listeners: TCP and UDP on 0.0.0.0 (random ports), UDP on the gateway's port 53 --------
HPORT=$(fx_free_port)
UPORT=$(fx_free_port)
HLOG=$FX_WORK/host-listener.log
"$FX_PYTHON" - "$HPORT" "$UPORT" "$SBX_GW" "$HLOG" <<'PY' 2>"$FX_WORK/host-listener.err" &
import socket, sys, threading
port, uport, gw, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = open(log, "a", buffering=1)
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(50)
    while True:
        c, a = s.accept(); out.write("tcp %s\n" % a[0]); c.close()
def udp(addr, p, tag):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, p))
    except OSError as e:
        out.write("nobind %s %s\n" % (tag, e)); return
    out.write("bound %s\n" % tag)
    while True:
        data, a = s.recvfrom(2048); out.write("udp-%s %s\n" % (tag, a[0])); s.sendto(data, a)
threading.Thread(target=udp, args=("0.0.0.0", uport, "any"), daemon=True).start()
threading.Thread(target=udp, args=(gw, 53, "gw53"), daemon=True).start()
tcp()
PY
FX_PIDS+=("$!")
fx_wait 10 fx_port_open "$HPORT" || fx_bail "host listener starts"
check "positive control: the host listener answers on the gateway address from the host" \
  fx_port_open "$HPORT" "$SBX_GW"
DOCKER0=$(ip -4 -o addr show dev docker0 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
MAINDEV=$(ip -4 -o route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1); exit}')
MAINIP=$(ip -4 -o addr show dev "${MAINDEV:-none}" 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
fx_note "docker0 ${DOCKER0:-none}, main address ${MAINIP:-none} (${MAINDEV:-none})"

# --- a container on the default bridge, listening ---------------------------------------------
LISTENER='use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalPort => 8000, Listen => 5, ReuseAddr => 1) or die "listen: $!"; while (my $c = $s->accept) { print $c "hi\n"; close $c }'
bridge_cid=$(sbx_dockerctl run "sl-t-contain-bridge" bridge "$SBX_NET" "$SBX_IMAGE" perl -e "$LISTENER" || true)
bridge_ip=
if [ -n "$bridge_cid" ]; then
  bridge_ip=$(sbx_dockerctl ip "$bridge_cid" bridge)
fi
check "a listener container runs on the default bridge (${bridge_ip:-none})" test -n "$bridge_ip"
check "positive control: the host reaches it on port 8000" fx_wait 10 fx_port_open 8000 "${bridge_ip:-0.0.0.0}"

# --- two sandboxes; the second listens ------------------------------------------------------------
sbx_create sbx main || fx_bail "create sandbox 1: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
s1=$SBX_ID
sbx_create sbx main || fx_bail "create sandbox 2: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
s2=$SBX_ID
s2ip=$(sbx_ip "$s2" || true)
s1ip=$(sbx_ip "$s1" || true)
fx_note "sandbox 1 $s1 at ${s1ip:-?}, sandbox 2 $s2 at ${s2ip:-?}"
sbx_exec "$s2" "setsid nohup perl -e '$LISTENER' >/dev/null 2>&1 < /dev/null & sleep 0.5; echo started"
check_api "sandbox 2 starts a perl listener on port 8000" 200 'd["stdout"].strip()' started
sbx_exec "$s2" 'timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/8000 && head -n1 <&3"'
check_api "positive control: sandbox 2 reaches its own listener" 200 'd["stdout"].strip()' hi
if fx_wait 3 fx_port_open 8000 "${s2ip:-0.0.0.0}"; then
  ok "positive control: the host reaches sandbox 2's listener"
else
  fx_skip "positive control: the host reaches sandbox 2's listener" "host → internal network not routed here"
fi

# --- attempts from sandbox 1 -------------------------------------------------------------------
# One exec tries every target; each line: TARGET rc=RC ms=MS.
targets=("$SBX_GW:$SBX_PPORT" "$SBX_GW:$HPORT" "$SBX_GW:22" "${bridge_ip:-192.0.2.254}:8000"
  "${s2ip:-10.213.14.254}:8000")
[ -n "$DOCKER0" ] && targets+=("$DOCKER0:$HPORT")
[ -n "$MAINIP" ] && targets+=("$MAINIP:$HPORT")
script='for t in '"${targets[*]}"'; do
  s=$(date +%s%N)
  timeout 2 bash -c "exec 3<>/dev/tcp/${t%:*}/${t##*:}" 2>/dev/null; rc=$?
  echo "$t rc=$rc ms=$((($(date +%s%N) - s) / 1000000))"
done'
sbx_exec "$s1" "$script"
check_api "the TCP attempts ran" 200
out=$(sbx_field 'd["stdout"]')
sed "s/^/# /" <<<"$out"
line() { grep -F "$1 " <<<"$out" | head -n 1; }
l=$(line "$SBX_GW:$SBX_PPORT")
check_match "positive control: sandbox 1 connects to the proxy at $SBX_GW:$SBX_PPORT" "$l" "rc=0 "
refused() { # refused DESC TARGET
  local l
  l=$(line "$2")
  if [[ $l =~ rc=([0-9]+)\ ms=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" != 0 ] &&
    [ "${BASH_REMATCH[2]}" -le 1000 ]; then
    ok "$1 fails within 1 s ($l)"
  else
    not_ok "$1 fails within 1 s"
    echo "#   got: '${l:-no line}' (rc 124 = still hanging after 2 s: a silent drop)"
  fi
}
refused "TCP to the host listener via the gateway $SBX_GW:$HPORT" "$SBX_GW:$HPORT"
refused "TCP to the gateway's port 22" "$SBX_GW:22"
if [ -n "$DOCKER0" ]; then
  refused "TCP to the host via docker0 $DOCKER0:$HPORT" "$DOCKER0:$HPORT"
else
  fx_skip "TCP to the host via docker0" "no docker0 address"
fi
if [ -n "$MAINIP" ]; then
  refused "TCP to the host's main address $MAINIP:$HPORT" "$MAINIP:$HPORT"
else
  fx_skip "TCP to the host's main address" "no default route"
fi
refused "TCP to the default-bridge container ${bridge_ip:-?}:8000" "${bridge_ip:-192.0.2.254}:8000"
refused "TCP to sandbox 2 ${s2ip:-?}:8000" "${s2ip:-10.213.14.254}:8000"
sleep 0.3
# (The host's own connections to the gateway address come from that address: not counted.)
check_eq "the host listener never saw a connection from the sandbox subnet" \
  "$(grep "^tcp 10\.213\.$SBX_N\." "$HLOG" | grep -vcF "tcp $SBX_GW" || true)" 0

# --- identities: no credentials, or another sandbox's, get 407 ------------------------------------
tok2=$(sbx_token "$s2" || true)
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy 'http://$SBX_GW:$SBX_PPORT' -H 'X-Probe: contain-noauth' $(sbx_url_http /hello)"
check_api "sandbox 1 through the proxy without credentials → 407" 200 'd["stdout"]' 407
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy 'http://$s2:${tok2:-none}@$SBX_GW:$SBX_PPORT' -H 'X-Probe: contain-spoof' $(sbx_url_http /hello)"
check_api "sandbox 1 with sandbox 2's id and token → 407" 200 'd["stdout"]' 407
check_eq "neither reached the origin" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-noauth") $(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-spoof")" "0 0"

# --- UDP ----------------------------------------------------------------------------------------
fx_note "UDP listeners: $(grep -E '^(bound|nobind)' "$HLOG" | tr '\n' ' ')"
# A DNS-shaped datagram on a connected UDP socket; "answer" when a reply came, "error E" when the
# kernel reported an ICMP error, "silence" after 1.5 s; plus the time taken.
UDPPROBE='use Socket; use Time::HiRes qw(time); my ($ip, $port) = @ARGV; my $t0 = time;
socket(my $s, PF_INET, SOCK_DGRAM, 0) or die; connect($s, pack_sockaddr_in($port, inet_aton($ip))) or die;
my $q = pack("n n n n n n", 0x1234, 0x0100, 1, 0, 0, 0) . "\x07example\x03com\x00" . pack("n n", 1, 1);
my $r = "silence"; for (1 .. 3) { send($s, $q, 0); my $rin = ""; vec($rin, fileno($s), 1) = 1;
if (select(my $rout = $rin, undef, undef, 0.5)) { my $buf; if (defined recv($s, $buf, 512, 0)) { $r = "answer" } else { $r = "error " . ($!+0) } last } }
printf "%s:%s %s ms=%d\n", $ip, $port, $r, (time - $t0) * 1000;'
udp_targets=("$SBX_GW:53" "$SBX_GW:$UPORT")
[ -n "$DOCKER0" ] && udp_targets+=("$DOCKER0:53" "$DOCKER0:$UPORT")
udp_script=''
for t in "${udp_targets[@]}"; do
  udp_script+="perl -e '$UDPPROBE' ${t%:*} ${t##*:} 2>&1; "
done
sbx_exec "$s1" "$udp_script"
uout=$(sbx_field 'd["stdout"]')
sed "s/^/# /" <<<"$uout"
for t in "${udp_targets[@]}"; do
  l=$(grep -F "$t " <<<"$uout" | head -n 1)
  if [[ $l =~ (silence|error\ [0-9]+)\ ms=([0-9]+) ]] && [ "${BASH_REMATCH[2]}" -le 1000 ]; then
    ok "UDP to $t gets no answer and fails within 1 s ($l)"
  elif [[ $l =~ silence ]]; then
    not_ok "UDP to $t fails within 1 s"
    echo "#   got: '$l' (no ICMP error: dropped silently)"
  else
    not_ok "UDP to $t gets no answer"
    echo "#   got: '${l:-no line}'"
  fi
done
check_eq "the host's UDP listeners never saw a datagram from the sandbox subnet" \
  "$(grep -cE "^udp-[a-z0-9]+ 10\.213\.$SBX_N\." "$HLOG" || true)" 0

# --- proxy down ----------------------------------------------------------------------------------
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: contain-up-1' $(sbx_url_tls /hello)"
check_api "through the proxy: 200 before it is killed" 200 'd["stdout"]' 200
sbx_proxy_kill
t0=$(date +%s%N)
sbx_exec "$s1" "for i in 1 2 3; do s=\$(date +%s%N); curl -sS --max-time 10 -o /dev/null -H \"X-Probe: contain-down-\$i\" $(sbx_url_tls /hello) 2>&1 | head -c 200; echo \" rc=\${PIPESTATUS[0]} ms=\$(((\$(date +%s%N) - s) / 1000000))\"; done; curl -sS --max-time 10 -o /dev/null -H 'X-Probe: contain-down-http' $(sbx_url_http /hello); echo \"rc=\$?\""
el=$((($(date +%s%N) - t0) / 1000000))
out=$(sbx_field 'd["stdout"]')
sed "s/^/# /" <<<"$out"
check "with the proxy killed, every curl through it fails" \
  bash -c '! grep -q "rc=0" <<<"$1" && [ "$(grep -c "rc=" <<<"$1")" = 4 ]' _ "$out"
slow=$(grep -oE 'ms=[0-9]+' <<<"$out" | awk -F= '$2 > 1000' | wc -l)
check_eq "... each within 1 s (at once: refused, not hanging)" "$slow" 0
fx_note "the four attempts took ${el} ms in all (API call included)"
sbx_proxy_start || fx_bail "the proxy restarts"
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: contain-up-2' $(sbx_url_tls /hello)"
check_api "the restarted proxy lets sandbox 1 out again (200)" 200 'd["stdout"]' 200
sleep 0.5
check_eq "the requests made while the proxy was down never reached the origin" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-down")" 0
check_eq "the ones made with the proxy up did (2)" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-up")" 2

sbx_close "$s1" || true
sbx_close "$s2" || true
sbx_shutdown_checks
fx_done
