#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/swarm-lab.sh start|stop|status - a two-node Docker Swarm on this one machine, the test
# setting of issue 22 (docs/scale-lab.md says what works here and what does not).
#
#   start   Network namespaces slsw-br (the lab's bridge slsw-br0, 10.213.200.1: the seat of a
#           control plane), slsw-n1 (10.213.200.11) and slsw-n2 (10.213.200.12), joined by veth
#           pairs. In each node's namespace a dockerd of its own (/usr/sbin/dockerd, data root
#           /var/tmp/slsw-nN/data, exec root /var/tmp/slsw-nN/exec, its own managed containerd,
#           pidfile, unix socket /var/tmp/slsw-nN/docker.sock, and TCP 10.213.200.1N:2376 with
#           --tlsverify against the lab's CA in /var/tmp/slsw-pki, made by `sluice pki`: the
#           binary is SLSW_SLUICE, else `sluice` on the PATH; engine-slsw-nN.pem/.key per node,
#           control-slsw-control.pem/.key the client's), a `docker swarm init` on
#           node 1 and a `swarm join` of node 2, the image SLSW_IMAGE (default
#           sluice/sandbox:bookworm) copied from the host's daemon into both, and the overlay
#           network slsw-ov (attachable, --internal, 10.213.210.0/24; encrypted when
#           SLSW_ENCRYPTED=1). Ends when `docker node ls` shows both nodes Ready.
#   stop    Removes every service, leaves the swarm, stops both daemons (SIGTERM, then SIGKILL
#           after 20 s), deletes the namespaces and /var/tmp/slsw-*. Safe to run twice.
#   status  The daemons, the nodes, the networks. Exit 0 when both nodes are Ready.
#
#   Helpers: tools/swarm-lab.sh docker N ARGS...  runs the docker CLI against node N's socket;
#   node-stop N | node-start N  stops node N's daemon as stop does / starts it again (a lost node
#   and its return; the swarm state in its data root is kept).
#
# The bridge sits in a namespace of its own, not in the root namespace: there
# net.bridge.bridge-nf-call-iptables=1 sends bridged frames through the host's FORWARD chain,
# whose policy (the host daemon's) is DROP, and the host's chains are not ours to change.
# Never touches the host's daemon (/var/run/docker.sock) except to read the image from it.
set -euo pipefail

lab=/var/tmp/slsw
pki=/var/tmp/slsw-pki
# The sluice binary that issues the lab's certificates (`sluice pki`).
sluice=${SLSW_SLUICE:-$(command -v sluice || true)}
img=${SLSW_IMAGE:-sluice/sandbox:bookworm}
ov=slsw-ov
ov_subnet=10.213.210.0/24
br_ns=slsw-br
br_addr=10.213.200.1
wait_s=40

say() { echo "swarm-lab: $*" >&2; }
die() {
  say "$*"
  exit 1
}

node_dir() { echo "$lab-n$1"; }
node_ns() { echo "slsw-n$1"; }
node_addr() { echo "10.213.200.1$1"; }
node_sock() { echo "$(node_dir "$1")/docker.sock"; }

# dk N ARGS : the docker CLI against node N (the CLI runs in the root namespace: a unix socket
# needs no network).
dk() {
  local n=$1
  shift
  DOCKER_CONFIG=$(node_dir "$n")/cli docker -H "unix://$(node_sock "$n")" "$@"
}

ping_ok() {
  [ -S "$(node_sock "$1")" ] &&
    [ "$(curl -s --max-time 2 --unix-socket "$(node_sock "$1")" http://localhost/_ping 2>/dev/null)" = OK ]
}

ms_now() { date +%s%3N; }

# pki : the lab's certificates, issued by `sluice pki` (docs/reference/cli.md §1.10): its CA, an
# engine certificate per node (serverAuth, its address as IP SAN), which each node's dockerd
# shows, and the control plane's client certificate (clientAuth), which each dockerd requires.
# Proxies' certificates come from the same CA (`sluice pki issue $pki proxy NAME --ip ...`).
pki() {
  local n
  [ -f "$pki/ca.pem" ] && return 0
  "$sluice" pki init "$pki" >/dev/null
  for n in 1 2; do
    "$sluice" pki issue "$pki" engine "slsw-n$n" --ip "$(node_addr "$n")" --days 2 >/dev/null
  done
  "$sluice" pki issue "$pki" control slsw-control --days 2 >/dev/null
}

net_up() {
  local n
  ip netns add "$br_ns"
  ip -n "$br_ns" link set lo up
  ip -n "$br_ns" link add slsw-br0 type bridge
  ip -n "$br_ns" addr add "$br_addr/24" dev slsw-br0
  ip -n "$br_ns" link set slsw-br0 up
  for n in 1 2; do
    ip netns add "$(node_ns "$n")"
    ip -n "$(node_ns "$n")" link set lo up
    # Both ends are made in the bridge's namespace, then one moves to the node and becomes eth0.
    ip -n "$br_ns" link add "slsw-n${n}b" type veth peer name "slsw-n${n}e"
    ip -n "$br_ns" link set "slsw-n${n}e" netns "$(node_ns "$n")"
    ip -n "$(node_ns "$n")" link set "slsw-n${n}e" name eth0
    ip -n "$(node_ns "$n")" addr add "$(node_addr "$n")/24" dev eth0
    ip -n "$(node_ns "$n")" link set eth0 up
    ip -n "$br_ns" link set "slsw-n${n}b" master slsw-br0
    ip -n "$br_ns" link set "slsw-n${n}b" up
  done
}

# dockerd_up N : node N's daemon, in its namespace, started through `ip netns exec` (which also
# gives it a mount namespace of its own: its container mounts never show in the host's table).
dockerd_up() {
  local n=$1 d sd i
  d=$(node_dir "$n")
  mkdir -p "$d/data" "$d/exec" "$d/cli"
  echo '{}' >"$d/daemon.json"
  sd=overlay2
  [ "$(stat -f -c %T /var/tmp)" = overlayfs ] && sd=vfs
  # `ip netns exec` also mounts a fresh /sys for the namespace, which hides the host's cgroup
  # hierarchies under /sys/fs/cgroup (dockerd then fails: "Devices cgroup isn't mounted"), and a
  # bind from init's mount namespace is refused: mount the same v1 hierarchies again there.
  # shellcheck disable=SC2016 # $0 and $@ belong to the inner shell
  # A UTS namespace too: each node has its own hostname (slsw-nN), which placement
  # constraints (node.hostname==) name.
  SLSW_NODE=$n setsid ip netns exec "$(node_ns "$n")" unshare --uts sh -c '
    hostname "slsw-n$SLSW_NODE" || exit 1
    mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || exit 1
    for c in $(awk '\''$1 !~ /^#/ && $2 != 0 && $4 == 1 {print $1}'\'' /proc/cgroups); do
      mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o "$c" cgroup /sys/fs/cgroup/$c || exit 1
    done
    exec "$0" "$@"' /usr/sbin/dockerd \
    --config-file "$d/daemon.json" \
    --data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/dockerd.pid" \
    -H "unix://$(node_sock "$n")" -H "tcp://$(node_addr "$n"):2376" \
    --tlsverify --tlscacert "$pki/ca.pem" --tlscert "$pki/engine-slsw-n$n.pem" \
    --tlskey "$pki/engine-slsw-n$n.key" \
    --storage-driver "$sd" --cgroup-parent "slsw-n$n" \
    --bip "10.213.20$n.1/24" --default-address-pool "base=10.213.$((216 + n * 8)).0/21,size=24" \
    --log-level info </dev/null >"$d/dockerd.log" 2>&1 &
  for ((i = 0; i < wait_s * 10; i++)); do
    ping_ok "$n" && return 0
    sleep 0.1
  done
  tail -n 20 "$d/dockerd.log" >&2 || true
  die "node $n's dockerd did not answer within $wait_s s (log $d/dockerd.log)"
}

nodes_ready() {
  [ "$(dk 1 node ls --format '{{.Status}}' 2>/dev/null | grep -c '^Ready$')" -eq 2 ]
}

start() {
  local t0 t1 n tok i p1 p2
  [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, a daemon)"
  if ip netns list | grep -q '^slsw-'; then
    die "a lab is up already (or left over): tools/swarm-lab.sh stop first"
  fi
  [ -n "$sluice" ] && [ -x "$sluice" ] ||
    die "no sluice binary to issue the lab's certificates: set SLSW_SLUICE=PATH"
  t0=$(ms_now)
  pki
  net_up
  dockerd_up 1 &
  p1=$!
  dockerd_up 2 &
  p2=$!
  wait "$p1" || die "node 1's daemon did not come up"
  wait "$p2" || die "node 2's daemon did not come up"
  t1=$(ms_now)
  say "both daemons answer after $((t1 - t0)) ms"
  # The overlays' addresses come from the lab's pool, not the default 10.0.0.0/8.
  dk 1 swarm init --advertise-addr "$(node_addr 1)" --listen-addr "$(node_addr 1):2377" \
    --data-path-addr "$(node_addr 1)" --default-addr-pool 10.213.240.0/21 \
    --default-addr-pool-mask-length 24 >/dev/null
  tok=$(dk 1 swarm join-token -q worker)
  dk 2 swarm join --token "$tok" --advertise-addr "$(node_addr 2)" \
    --listen-addr "$(node_addr 2):2377" --data-path-addr "$(node_addr 2)" \
    "$(node_addr 1):2377" >/dev/null
  for ((i = 0; i < wait_s * 10; i++)); do
    nodes_ready && break
    sleep 0.1
  done
  nodes_ready || die "the nodes are not both Ready after $wait_s s"
  say "swarm of two Ready nodes after $(($(ms_now) - t0)) ms"
  if [ -n "$img" ]; then
    docker -H unix:///var/run/docker.sock save "$img" -o "$lab-image.tar"
    for n in 1 2; do
      dk "$n" load -q -i "$lab-image.tar" >/dev/null &
    done
    wait
    rm -f "$lab-image.tar"
    say "image $img loaded on both nodes after $(($(ms_now) - t0)) ms"
  fi
  if [ "${SLSW_ENCRYPTED:-0}" = 1 ]; then
    dk 1 network create -d overlay --attachable --internal --opt encrypted \
      --subnet "$ov_subnet" "$ov" >/dev/null
  else
    dk 1 network create -d overlay --attachable --internal --subnet "$ov_subnet" "$ov" >/dev/null
  fi
  say "lab up after $(($(ms_now) - t0)) ms"
  dk 1 node ls
}

# stop_daemon N : SIGTERM to node N's dockerd (its pidfile, checked to name a dockerd), then a
# wait of 20 s, then SIGKILL to it and to its managed containerd.
stop_daemon() {
  local n=$1 d pid cpid i
  d=$(node_dir "$n")
  pid=$(cat "$d/dockerd.pid" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || return 0
  cpid=$(cat "$d/exec/containerd/containerd.pid" 2>/dev/null || true)
  kill -TERM "$pid"
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "node $n's dockerd (pid $pid) outlived SIGTERM; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ "$cpid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$cpid/comm" 2>/dev/null)" = containerd ]; then
    kill -KILL "$cpid" 2>/dev/null || true
  fi
}

stop() {
  local n s ids pid
  for n in 2 1; do
    ping_ok "$n" || continue
    if [ "$n" = 1 ]; then
      ids=$(dk 1 service ls -q 2>/dev/null || true)
      # shellcheck disable=SC2086 # one id per word
      [ -z "$ids" ] || dk 1 service rm $ids >/dev/null || true
    fi
    ids=$(dk "$n" ps -aq 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || dk "$n" rm -f $ids >/dev/null || true
    dk "$n" swarm leave --force >/dev/null 2>&1 || true
  done
  for n in 1 2; do
    stop_daemon "$n"
  done
  # Anything still running in a lab namespace (a shim, a container's process) is ours.
  for s in slsw-n1 slsw-n2 slsw-br; do
    ip netns list | grep -q "^$s\b" || continue
    for pid in $(ip netns pids "$s" 2>/dev/null); do
      say "killing pid $pid ($(cat "/proc/$pid/comm" 2>/dev/null)) left in $s"
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  sleep 0.5
  for s in slsw-n1 slsw-n2 slsw-br; do
    ip netns list | grep -q "^$s\b" && ip netns delete "$s"
  done
  # A mount of a node's data root that escaped into the host's namespace (none expected).
  mount | awk '$3 ~ /^\/var\/tmp\/slsw-/ {print $3}' | sort -r | while read -r m; do
    umount -l "$m" || true
  done
  rm -rf "$lab-n1" "$lab-n2" "$lab-image.tar" "$pki"
  say "stopped"
}

status() {
  local n rc=0
  ip netns list | grep '^slsw-' || true
  for n in 1 2; do
    if ping_ok "$n"; then
      say "node $n: dockerd answers ($(dk "$n" info --format '{{.Swarm.LocalNodeState}}'))"
    else
      say "node $n: no daemon"
      rc=1
    fi
  done
  if ping_ok 1; then
    dk 1 node ls || true
    dk 1 network ls --filter driver=overlay || true
    nodes_ready || rc=1
  fi
  return "$rc"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
node-stop | node-start)
  [[ "${2:-}" =~ ^[12]$ ]] || die "usage: tools/swarm-lab.sh $1 1|2"
  if [ "$1" = node-stop ]; then
    stop_daemon "$2"
  else
    ping_ok "$2" || dockerd_up "$2"
  fi
  ;;
docker)
  [ $# -ge 2 ] || die "usage: tools/swarm-lab.sh docker N ARGS..."
  n=$2
  shift 2
  dk "$n" "$@"
  ;;
-h | --help)
  sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//'
  ;;
*)
  echo "usage: tools/swarm-lab.sh start|stop|status | node-stop N | node-start N | docker N ARGS..." >&2
  exit 2
  ;;
esac
