#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_containment.sh - docs/reference/containers.md §5.4 and SECURITY.md
# promise 9: from inside a sandbox nothing but sluice's ports on the gateway is reachable, and
# every other attempt fails fast (≤ 1 s, a reject, not a silent drop), with both walls (the
# host's table and the inner wall in the sandbox's own namespace), with the host's table removed
# (the inner wall alone) and with the inner wall removed (the host's table alone): TCP and UDP to a
# host listener on 0.0.0.0 via the gateway, docker0's address and the host's main address; a
# container on the default bridge; a second sandbox; a DNS server of the test's own in a private
# network namespace (it never receives a query, whatever a sandbox asks and wherever); ::1 and
# IPv6. Docker's embedded DNS (127.0.0.11) is unreachable over UDP and TCP and a sibling's name
# never resolves: that is the inner wall's alone (shown answering when the inner wall is
# removed). Each target is first shown reachable from the host where that makes sense. The inner
# wall is there before the container runs anything (its process is `sluice-run --idle`), the
# container cannot change it (no CAP_NET_ADMIN), and a control plane that cannot install it
# (CAP_SYS_ADMIN taken away) starts no sandbox: 503, nothing left. With the proxy killed, a
# request through it fails at once; restarted, the requests made meanwhile never appear at the
# origin. Network sl-t-contain, subnet 10.213.14.0/24; the DNS server's namespace is reached over
# the veth pair sl-t-cdns0/sl-t-cdns1 on 10.214.14.0/30.
# shellcheck disable=SC2016,SC2001 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-contain 14

DNS_HOST_IF=sl-t-cdns0
DNS_NS_IF=sl-t-cdns1
DNS_HOST_IP=10.214.14.1
DNS_IP=10.214.14.2

# --- host listeners: TCP and UDP on 0.0.0.0 (random ports) -------------------------------------
# (The gateway's port 53 is sluice's DNS port: both walls let sandboxes reach it, and no test
# listener stands there; nothing answers it in this test, where the proxy runs no DNS responder.)
HPORT=$(fx_free_port)
UPORT=$(fx_free_port)
HLOG=$FX_WORK/host-listener.log
"$FX_PYTHON" - "$HPORT" "$UPORT" "$HLOG" <<'PY' 2>"$FX_WORK/host-listener.err" &
import socket, sys, threading
port, uport, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = open(log, "a", buffering=1)
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(50)
    while True:
        c, a = s.accept(); out.write("tcp %s\n" % a[0]); c.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", uport))
    out.write("bound udp\n")
    while True:
        data, a = s.recvfrom(2048); out.write("udp %s\n" % a[0]); s.sendto(data, a)
threading.Thread(target=udp, daemon=True).start()
tcp()
PY
FX_PIDS+=("$!")
fx_wait 10 fx_port_open "$HPORT" || fx_bail "host listener starts"
check "positive control: the host listener answers on the gateway address from the host" \
  fx_port_open "$HPORT" "$SBX_GW"
DOCKER0=$(ip -4 -o addr show dev docker0 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
MAINDEV=$(ip -4 -o route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1); exit}')
MAINIP=$(ip -4 -o addr show dev "${MAINDEV:-none}" 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
MAINIP6=$(ip -6 -o addr show scope global 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
fx_note "docker0 ${DOCKER0:-none}, main address ${MAINIP:-none} (${MAINDEV:-none}), global IPv6 ${MAINIP6:-none}"

# --- the test's own DNS server, in a private network namespace ---------------------------------
# dnsd.py answers every name over UDP; a TCP listener on its port 53 logs connections. The host
# reaches it over a veth pair; no sandbox may, directly or through any resolver.
ip link del "$DNS_HOST_IF" 2>/dev/null || true
unshare --net sleep 900 2>/dev/null &
dns_ns=$!
FX_PIDS+=("$dns_ns")
fx_wait 5 fx_netns_own "$dns_ns" || fx_bail "a private network namespace (unshare --net)"
dns() { nsenter --no-fork --target "$dns_ns" --net -- "$@"; }
{
  ip link add "$DNS_HOST_IF" type veth peer name "$DNS_NS_IF" netns "$dns_ns" &&
    ip addr add "$DNS_HOST_IP/30" dev "$DNS_HOST_IF" && ip link set "$DNS_HOST_IF" up &&
    dns ip addr add "$DNS_IP/30" dev "$DNS_NS_IF" && dns ip link set "$DNS_NS_IF" up &&
    dns ip link set lo up
} 2>"$FX_WORK/dns-setup.err" || {
  fx__dump "$FX_WORK/dns-setup.err"
  fx_bail "the DNS server's namespace and its veth pair"
}
DNSD_LOG=$FX_WORK/dnsd.log
DNSD_TCP_LOG=$FX_WORK/dnsd-tcp.log
echo '{"host-control.sl-t-contain.test": {"A": [["192.0.2.53"]]}}' >"$FX_WORK/dnsd.json"
# (nsenter itself, not the function: --no-fork execs the server, so $! is its pid.)
nsenter --no-fork --target "$dns_ns" --net -- "$FX_PYTHON" "$FX_SUPPORT/dnsd.py" \
  --script "$FX_WORK/dnsd.json" --log "$DNSD_LOG" --ready "$FX_WORK/dnsd.ready" \
  --addr "$DNS_IP" --port 53 2>"$FX_WORK/dnsd.err" &
FX_PIDS+=("$!")
nsenter --no-fork --target "$dns_ns" --net -- "$FX_PYTHON" - "$DNS_IP" "$DNSD_TCP_LOG" \
  <<'PY' 2>"$FX_WORK/dnsd-tcp.err" &
import socket, sys
out = open(sys.argv[2], "a", buffering=1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 53)); s.listen(50)
while True:
    c, a = s.accept(); out.write("tcp %s\n" % a[0]); c.close()
PY
FX_PIDS+=("$!")
fx_wait 10 test -s "$FX_WORK/dnsd.ready" || fx_bail "dnsd.py starts in its namespace"
: >>"$DNSD_LOG"
: >>"$DNSD_TCP_LOG"
host_query=$("$FX_PYTHON" - "$DNS_IP" <<'PY'
import socket, struct, sys
q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in "host-control.sl-t-contain.test".split(".")) + b"\0"
q += struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(q, (sys.argv[1], 53))
print("answer" if len(s.recv(512)) > len(q) else "empty")
PY
) || host_query=error
check_eq "positive control: the host's query to the test's DNS server at $DNS_IP is answered" \
  "$host_query" answer
check "positive control: the host reaches its TCP port 53" fx_port_open 53 "$DNS_IP"

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
c1=$(sbx_cid "$s1" || true)
fx_note "sandbox 1 $s1 at ${s1ip:-?}, sandbox 2 $s2 at ${s2ip:-?}"
sbx_exec "$s2" "setsid nohup perl -e '$LISTENER' >/dev/null 2>&1 < /dev/null & sleep 0.5; echo started"
check_api "sandbox 2 starts a perl listener on port 8000" 200 'd["stdout"].strip()' started
sbx_exec "$s2" 'timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/8000 && head -n1 <&3"'
check_api "positive control: sandbox 2 reaches its own listener (its loopback is open)" 200 \
  'd["stdout"].strip()' hi

# --- the inner wall: in place before anything ran, out of the container's reach ---------------
# netns_of CID : the file of the container's network namespace (Docker's SandboxKey).
netns_of() {
  sbx_dockerctl inspect "$1" | "$FX_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["NetworkSettings"]["SandboxKey"])'
}
in_sandbox_ns() { # CID CMD... : CMD in the sandbox's network namespace (on the host's files)
  local key
  key=$(netns_of "$1") || return 1
  shift
  nsenter --net="$key" -- "$@"
}
wall=$(in_sandbox_ns "$c1" nft list table inet sluice_wall 2>&1 || true)
check_match "sandbox 1's namespace holds the inner wall (table inet sluice_wall)" "$wall" \
  "ip daddr 127\.0\.0\.11 meta l4proto tcp reject with tcp reset"
check_match "... which opens only sluice's ports on the gateway (TCP)" "$wall" \
  "ip daddr ${SBX_GW//./\\.} tcp dport \{ [0-9, ]*\} accept"
check_match "... and UDP 53" "$wall" "ip daddr ${SBX_GW//./\\.} udp dport 53 accept"
entry=$(sbx_dockerctl inspect "$c1" | "$FX_PYTHON" -c 'import json, sys; c = json.load(sys.stdin)["Config"]; print(" ".join(c.get("Entrypoint") or []), c.get("Cmd"))')
check_eq "the container's own process is sluice-run --idle (nothing of the image runs first)" \
  "$entry" "/opt/sluice/sluice-run --idle None"
sbx_exec "$s1" 'grep -E "^Cap(Eff|Bnd):" /proc/self/status | awk "{print \$2}" | tr "\n" " "'
caps=$(sbx_field 'd["stdout"]')
caps_ok() {
  local c
  for c in $caps; do
    # CAP_NET_ADMIN 12, CAP_NET_RAW 13, CAP_SYS_ADMIN 21: in neither set.
    (((16#$c >> 12) & 1)) && return 1
    (((16#$c >> 13) & 1)) && return 1
    (((16#$c >> 21) & 1)) && return 1
  done
  [ -n "$caps" ]
}
check "no process in the sandbox has or can get CAP_NET_ADMIN, NET_RAW or SYS_ADMIN ($caps)" caps_ok

# --- the probes ----------------------------------------------------------------------------------
# A DNS question on a connected UDP socket: "answer IP..." (the A records, maybe none), "error E"
# when the kernel reported an ICMP error or refused the send, "silence" after 1.5 s; plus the time.
UDPPROBE='use Socket; use Time::HiRes qw(time); my ($ip, $port, $name) = @ARGV; my $t0 = time;
socket(my $s, PF_INET, SOCK_DGRAM, 0) or die; connect($s, pack_sockaddr_in($port, inet_aton($ip))) or die;
my $q = pack("n n n n n n", 0x1234, 0x0100, 1, 0, 0, 0) . join("", map { chr(length) . $_ } split /\./, $name) . "\0" . pack("n n", 1, 1);
my $r = "silence"; for (1 .. 3) { if (!defined send($s, $q, 0)) { $r = "error " . ($!+0); last }
my $rin = ""; vec($rin, fileno($s), 1) = 1;
if (select(my $rout = $rin, undef, undef, 0.5)) { my $buf; if (defined recv($s, $buf, 512, 0)) {
my ($an) = unpack("x6 n", $buf); my $i = length($q); my @ips;
for (1 .. $an) { while (1) { my $n = ord(substr($buf, $i, 1)); if ($n >= 192) { $i += 2; last } $i += 1 + $n; last if $n == 0 }
my ($t, $c, $ttl, $l) = unpack("n n N n", substr($buf, $i, 10)); $i += 10;
push @ips, join(".", unpack("C4", substr($buf, $i, 4))) if $t == 1 && $l == 4; $i += $l }
$r = "answer " . join(",", @ips) } else { $r = "error " . ($!+0) } last } }
printf "%s:%s %s ms=%d\n", $ip, $port, $r, (time - $t0) * 1000;'

# probes LABEL ALONE : every attempt from sandbox 1, each checked to fail within 1 s. ALONE is
# "both", "inner" (the host's table removed) or "host" (the inner wall removed).
probes() {
  local label=$1 alone=$2 t out l script udp_script n0 nt0 dnsd_before
  local tcp=("$SBX_GW,$SBX_PPORT" "$SBX_GW,$HPORT" "$SBX_GW,22" "${bridge_ip:-192.0.2.254},8000"
    "${s2ip:-10.213.14.254},8000" "$DNS_IP,53" "::1,$HPORT")
  local udp=("$SBX_GW,$UPORT" "$SBX_GW,53" "$DNS_IP,53" "${s2ip:-10.213.14.254},$UPORT")
  [ -n "$DOCKER0" ] && tcp+=("$DOCKER0,$HPORT") && udp+=("$DOCKER0,53" "$DOCKER0,$UPORT")
  [ -n "$MAINIP" ] && tcp+=("$MAINIP,$HPORT") && udp+=("$MAINIP,$UPORT")
  [ -n "$MAINIP6" ] && tcp+=("$MAINIP6,$HPORT")
  [ "$alone" = host ] || tcp+=("127.0.0.11,53")
  n0=$(grep -c . "$HLOG" || true)
  nt0=$(grep -c . "$DNSD_TCP_LOG" || true)
  dnsd_before=$(grep -c . "$DNSD_LOG" || true)

  # TCP, one exec; each line: HOST,PORT rc=RC ms=MS.
  script='for t in '"${tcp[*]}"'; do
    s=$(date +%s%N)
    timeout 2 bash -c "exec 3<>/dev/tcp/${t%,*}/${t##*,}" 2>/dev/null; rc=$?
    echo "$t rc=$rc ms=$((($(date +%s%N) - s) / 1000000))"
  done'
  sbx_exec "$s1" "$script"
  check_api "[$label] the TCP attempts ran" 200
  out=$(sbx_field 'd["stdout"]')
  sed "s/^/# /" <<<"$out"
  for t in "${tcp[@]}"; do
    l=$(grep -F "$t " <<<"$out" | head -n 1)
    if [ "$t" = "$SBX_GW,$SBX_PPORT" ]; then
      check_match "[$label] positive control: sandbox 1 connects to the proxy at $t" "$l" "rc=0 "
    elif [[ $l =~ rc=([0-9]+)\ ms=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" != 0 ] &&
      [ "${BASH_REMATCH[1]}" != 124 ] && [ "${BASH_REMATCH[2]}" -le 1000 ]; then
      ok "[$label] TCP to $t fails within 1 s ($l)"
    else
      not_ok "[$label] TCP to $t fails within 1 s"
      echo "#   got: '${l:-no line}' (rc 124 = still hanging after 2 s: a silent drop)"
    fi
  done

  # UDP: the DNS-shaped probe to each target, asking the name of sandbox 2's container.
  udp_script=''
  for t in "${udp[@]}"; do
    udp_script+="perl -e '$UDPPROBE' ${t%,*} ${t##*,} sluice-$s2 2>&1; "
  done
  if [ "$alone" != host ]; then
    udp_script+="perl -e '$UDPPROBE' 127.0.0.11 53 sluice-$s2 2>&1; "
    udp_script+="perl -e '$UDPPROBE' 127.0.0.11 53 probe-$label.sl-t-contain.test 2>&1; "
  fi
  udp_script+='for h in ::1 '"${MAINIP6:-::1}"'; do s=$(date +%s%N); echo x 2>/dev/null >/dev/udp/$h/53; echo "udp6 $h rc=$? ms=$((($(date +%s%N) - s) / 1000000))"; done; '
  udp_script+='s=$(date +%s%N); getent hosts sluice-'"$s2"'; echo "getent rc=$? ms=$((($(date +%s%N) - s) / 1000000))"'
  sbx_exec "$s1" "$udp_script"
  check_api "[$label] the UDP and DNS attempts ran" 200
  out=$(sbx_field 'd["stdout"]')
  sed "s/^/# /" <<<"$out"
  local udp_checked=("${udp[@]}")
  [ "$alone" = host ] || udp_checked+=("127.0.0.11,53")
  for t in "${udp_checked[@]}"; do
    l=$(grep -F "${t%,*}:${t##*,} " <<<"$out" | head -n 1)
    if [[ $l =~ error\ [0-9]+\ ms=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -le 1000 ]; then
      ok "[$label] UDP to $t gets no answer and fails within 1 s ($l)"
    elif [ "$alone" = host ] && [[ $l =~ (error\ [0-9]+|silence)\ ms=[0-9]+$ ]]; then
      # The host's table answers with ICMP, which the kernel rate-limits per peer (a burst of
      # 6, then 1 a second): after the probes before it, a sender may wait for its own
      # timeout. The datagram itself never arrives (the listeners' logs, below).
      ok "[$label] UDP to $t gets no answer ($l; ICMP from the host is rate-limited)"
    elif [[ $l =~ silence ]]; then
      not_ok "[$label] UDP to $t fails within 1 s"
      echo "#   got: '$l' (no ICMP error: dropped silently)"
    else
      not_ok "[$label] UDP to $t gets no answer"
      echo "#   got: '${l:-no line}'"
    fi
  done
  l=$(grep -E "^udp6 " <<<"$out" | awk '$3 != "rc=0"' | wc -l)
  check_eq "[$label] UDP over IPv6 (::1, the host's global address) fails at once" "$l" 2
  # Bounded by resolv.conf (timeout:1 attempts:2): the port-unreachable answers of the gateway
  # end it at once, unless the kernel's ICMP rate limit swallowed them.
  check_match "[$label] the sibling's container name does not resolve (getent), within 2.5 s" \
    "$(grep '^getent' <<<"$out")" "rc=[1-9][0-9]* ms=([0-9]{1,3}|1[0-9]{3}|2[0-4][0-9]{2})$"
  check "[$label] no answer anywhere holds sandbox 2's address" \
    bash -c '! grep -oE "answer [0-9.,]*" <<<"$2" | grep -qF -- "$1"' _ "${s2ip:-none}" "$out"

  sleep 0.3
  # (The host's own connections to the gateway address come from that address: not counted.)
  check_eq "[$label] the host's listeners never saw a packet from the sandbox subnet" \
    "$(tail -n +"$((n0 + 1))" "$HLOG" | grep -E "^(tcp|udp) 10\.213\.$SBX_N\." | grep -vcF " $SBX_GW" || true)" 0
  check_eq "[$label] the test's DNS server received no query and no connection" \
    "$(($(grep -c . "$DNSD_LOG" || true) - dnsd_before)) $(($(grep -c . "$DNSD_TCP_LOG" || true) - nt0))" "0 0"
}

# --- with both walls --------------------------------------------------------------------------
probes both both

# --- the inner wall alone: the host's table removed (and put back after) -----------------------
nft list table inet "$SBX_TABLE" >"$FX_WORK/host-table.nft"
check "the host's table can be saved" test -s "$FX_WORK/host-table.nft"
nft delete table inet "$SBX_TABLE"
check "the host's table is gone" sbx__no_table
probes inner inner
nft -f "$FX_WORK/host-table.nft"
check "the host's table is back" nft list table inet "$SBX_TABLE"

# --- the host's table alone: sandbox 1's inner wall removed (and put back after) ---------------
in_sandbox_ns "$c1" nft list table inet sluice_wall >"$FX_WORK/inner-wall.nft"
check "sandbox 1's inner wall can be saved" test -s "$FX_WORK/inner-wall.nft"
in_sandbox_ns "$c1" nft delete table inet sluice_wall
check "sandbox 1's inner wall is gone" bash -c '! "$@" >/dev/null 2>&1' _ \
  nsenter --net="$(netns_of "$c1")" -- nft list table inet sluice_wall
probes host host
# The positive control of the inner wall's own promise: Docker's resolver answers without it.
sbx_exec "$s1" "perl -e '$UDPPROBE' 127.0.0.11 53 sluice-$s2 2>&1"
l=$(sbx_field 'd["stdout"]')
if [ -n "$s2ip" ] && grep -qF "answer $s2ip" <<<"$l"; then
  ok "positive control: without the inner wall, 127.0.0.11 names sandbox 2 ($l): the inner wall alone closes it"
else
  fx_skip "positive control: without the inner wall, 127.0.0.11 names sandbox 2" "got '$l'"
fi
in_sandbox_ns "$c1" nft -f "$FX_WORK/inner-wall.nft"
check "sandbox 1's inner wall is back" in_sandbox_ns "$c1" nft list table inet sluice_wall

# --- identities: no credentials, or another sandbox's, get 407 ------------------------------------
tok2=$(sbx_token "$s2" || true)
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy 'http://$SBX_GW:$SBX_PPORT' -H 'X-Probe: contain-noauth' $(sbx_url_http /hello)"
check_api "sandbox 1 through the proxy without credentials → 407" 200 'd["stdout"]' 407
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy 'http://$s2:${tok2:-none}@$SBX_GW:$SBX_PPORT' -H 'X-Probe: contain-spoof' $(sbx_url_http /hello)"
check_api "sandbox 1 with sandbox 2's id and token → 407" 200 'd["stdout"]' 407
check_eq "neither reached the origin" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-noauth") $(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~contain-spoof")" "0 0"

# --- nothing from outside opens a connection into a sandbox --------------------------------------
if fx_port_open 8000 "${s2ip:-0.0.0.0}"; then
  not_ok "the host cannot open a connection to sandbox 2's listener"
else
  ok "the host cannot open a connection to sandbox 2's listener (the inner wall's input chain)"
fi

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

# --- a control plane that cannot install the inner wall starts no sandbox -------------------------
# Without CAP_SYS_ADMIN (taken out of its bounding set) it cannot enter a container's namespace;
# the host's table needs only CAP_NET_ADMIN, so sandboxes are ready and every create fails.
sandboxes_left() {
  sbx_leftovers | "$FX_PYTHON" -c 'import json, sys; print(sum(1 for c in json.load(sys.stdin) if "sluice.sandbox" in c.get("labels", {})))'
}
sbx_control_stop
real_bin=$SLUICE_BIN
cat >"$FX_WORK/sluice-no-sys-admin" <<EOF
#!/bin/sh
exec setpriv --bounding-set -sys_admin -- "$real_bin" "\$@"
EOF
chmod +x "$FX_WORK/sluice-no-sys-admin"
SLUICE_BIN=$FX_WORK/sluice-no-sys-admin
sbx_control_start || fx_bail "sluice control starts without CAP_SYS_ADMIN"
SLUICE_BIN=$real_bin
sbx_wait_ready || fx_bail "sandboxes ready without CAP_SYS_ADMIN (the host's table needs only CAP_NET_ADMIN)"
check "the control plane runs without CAP_SYS_ADMIN" \
  bash -c '! (( (16#$(awk "/^CapEff:/ {print \$2}" /proc/$1/status) >> 21) & 1 ))' _ "$SBX_CONTROL_PID"
sbx_create sbx main || true
check_api "a sandbox whose inner wall cannot be installed is refused" 503 'd.get("message")' \
  "the sandbox container did not start; try again"
check_eq "... and leaves no container behind" "$(sandboxes_left)" 0
check "... the control plane's log says why (the inner wall)" \
  grep -q 'inner wall' "$SBX_CONTROL_LOG"
sbx_shutdown_checks
fx_done
