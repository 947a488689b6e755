#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/dockerd.sh start|stop [run|test] | status | clean - the Docker daemon of make run and of the
# tests (make test, CI).
#
#   start OWNER  If /var/run/docker.sock answers /_ping, use that daemon and change nothing.
#           Otherwise start dockerd (overlay2, or vfs when /var/lib/docker sits on overlayfs; log
#           in build/dockerd.log), wait up to 30 s for /_ping, and record OWNER and its pid in
#           build/dockerd.started. A daemon started here first gets `clean`. OWNER is `run`
#           (make run: the daemon then serves a `sluice up` that outlives the command) or `test`
#           (the default: make test, CI).
#   stop OWNER   Only if start OWNER started the daemon: `clean`, then SIGTERM and a wait of up
#           to 30 s (SIGKILL after that). A daemon that was already running, or that the other
#           owner started (make test never stops the daemon make run started: a running
#           `sluice up` would lose its sandboxes), is left alone.
#   status  Whether the daemon answers, and who started it. Exit 0 if it answers.
#   clean   Remove what earlier test runs left: containers and networks labelled
#           sluice.managed=1 or sluice.sandbox, and nftables tables named sluice_t_*. Never run
#           by start against a daemon that was already running: other runs may be using it.
#
# Never starts a second daemon next to a running one (a process named dockerd that does not
# answer is waited for, then reported), and never passes --bridge=none: a dockerd started with
# it deletes docker0 even when docker0 belongs to another daemon.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
sock=/var/run/docker.sock
pidfile=/var/run/docker.pid
state_dir=$top/build
state=$state_dir/dockerd.started
log=$state_dir/dockerd.log
wait_s=30

say() { echo "dockerd: $*" >&2; }
die() { say "$*"; exit 1; }

ping_ok() {
  [ -S "$sock" ] && [ "$(curl -s --max-time 2 --unix-socket "$sock" http://localhost/_ping 2>/dev/null)" = OK ]
}

owner="test"

# our_pid : true when the pid recorded by start is still a dockerd; sets rec_pid to it and
# rec_owner to whom it was started for. A record of an older tools/dockerd.sh holds the pid
# alone: its owner was the tests. Called in this shell (not in $(...)) so both stay set.
rec_pid=""
rec_owner=""
our_pid() {
  local rec
  rec_pid=""
  rec_owner=""
  [ -f "$state" ] || return 1
  rec=$(cat "$state")
  if [[ "$rec" =~ ^(run|test)\ ([0-9]+)$ ]]; then
    rec_owner=${BASH_REMATCH[1]}
    rec_pid=${BASH_REMATCH[2]}
  else
    rec_owner="test"
    rec_pid=$rec
  fi
  [[ "$rec_pid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$rec_pid/comm" 2>/dev/null)" = dockerd ]
}

clean() {
  local ids label
  for label in sluice.managed=1 sluice.sandbox; do
    ids=$(docker ps -aq --filter "label=$label")
    if [ -n "$ids" ]; then
      say "removing leftover containers labelled $label: ${ids//$'\n'/ }"
      # shellcheck disable=SC2086 # one id per word
      docker rm -f $ids >/dev/null
    fi
  done
  for label in sluice.managed=1 sluice.sandbox; do
    ids=$(docker network ls -q --filter "label=$label")
    if [ -n "$ids" ]; then
      say "removing leftover networks labelled $label: ${ids//$'\n'/ }"
      # shellcheck disable=SC2086
      docker network rm $ids >/dev/null
    fi
  done
  if command -v nft >/dev/null 2>&1; then
    nft list tables 2>/dev/null | while read -r _ family name; do
      case "$name" in
      sluice_t_*)
        say "removing leftover test table $family $name"
        nft delete table "$family" "$name" || say "could not remove table $family $name"
        ;;
      esac
    done
  fi
}

# default_dockerd : the pid of a dockerd serving $sock: one started with that host, with
# systemd's socket (fd://), or with no host at all (the default). Daemons on sockets of their
# own (tools/swarm-lab.sh's nodes, one an interrupted test left running) are not it.
default_dockerd() {
  local pid arg hosts
  for pid in $(pgrep -x dockerd); do
    hosts=
    while IFS= read -r -d '' arg; do
      case "$arg" in
      -H | --host) hosts+=" next" ;;
      -H* | --host=*) hosts+=" ${arg#*[H=]}" ;;
      *) if [ "${hosts##* }" = next ]; then hosts="${hosts% next} $arg"; fi ;;
      esac
    done <"/proc/$pid/cmdline" 2>/dev/null || continue
    case " $hosts " in
    "  " | *" unix://$sock "* | *" $sock "* | *" fd://"*)
      echo "$pid"
      return 0
      ;;
    esac
  done
  return 1
}

start() {
  local pid sd i
  if ping_ok; then
    if our_pid && [ "$rec_owner" = "$owner" ]; then
      pid=$rec_pid
      # Ours from a run that never reached stop (interrupted): nobody else uses it.
      say "dockerd (pid $pid, started by an earlier start $owner) answers on $sock"
      clean
    elif our_pid; then
      pid=$rec_pid
      say "dockerd (pid $pid, started for $rec_owner) answers on $sock; using it, and leaving it running at stop $owner"
    else
      rm -f "$state"
      say "a dockerd already answers on $sock; using it, and leaving it running at stop"
    fi
    return 0
  fi
  rm -f "$state"
  command -v dockerd >/dev/null 2>&1 || die "dockerd is missing (tools/deps.sh test installs docker.io)"
  [ "$(id -u)" -eq 0 ] || die "starting dockerd needs root"
  # A dockerd that is still coming up (or wedged): wait for it, never start a second one.
  if pid=$(default_dockerd) && [ -n "$pid" ]; then
    say "a dockerd (pid $pid) runs but $sock does not answer yet; waiting up to $wait_s s"
    for ((i = 0; i < wait_s * 10; i++)); do
      ping_ok && { say "it answers now; leaving it running at stop"; return 0; }
      sleep 0.1
    done
    die "dockerd pid $pid never answered on $sock; not starting a second daemon next to it"
  fi

  # overlay2 cannot stack on overlayfs (the kernel refuses an overlay upper dir on overlayfs):
  # inside such a root, use vfs.
  sd=overlay2
  if [ "$(stat -f -c %T /var/lib/docker 2>/dev/null || stat -f -c %T /var/lib)" = overlayfs ]; then
    sd=vfs
  fi
  mkdir -p "$state_dir"
  say "starting dockerd (storage driver $sd, log $log)"
  # setsid: a Ctrl-C on make must not reach the daemon; stop ends it.
  setsid dockerd --host="unix://$sock" --pidfile="$pidfile" --storage-driver="$sd" \
    --log-level=warn </dev/null >"$log" 2>&1 &
  pid=$!
  for ((i = 0; i < wait_s * 10; i++)); do
    if ping_ok; then
      # The daemon's own pidfile names the process to stop, should setsid have forked.
      if [ "$(cat "/proc/$(cat "$pidfile" 2>/dev/null)/comm" 2>/dev/null)" = dockerd ]; then
        pid=$(cat "$pidfile")
      fi
      echo "$owner $pid" >"$state"
      say "dockerd (pid $pid, started for $owner) answers after $((i / 10)).$((i % 10)) s"
      clean
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 30 "$log" >&2 || true
  kill -TERM "$pid" 2>/dev/null || true
  die "dockerd did not answer on $sock within $wait_s s (log: $log)"
}

stop() {
  local pid i
  if ! our_pid; then
    rm -f "$state"
    say "did not start the running dockerd (or none runs); leaving it alone"
    return 0
  fi
  pid=$rec_pid
  if [ "$rec_owner" != "$owner" ]; then
    say "dockerd (pid $pid) was started for $rec_owner, not $owner; leaving it running"
    return 0
  fi
  if ping_ok; then
    clean || say "clean-up failed; stopping anyway"
  fi
  say "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  for ((i = 0; i < wait_s * 10; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$state"
      say "dockerd stopped after $((i / 10)).$((i % 10)) s"
      return 0
    fi
    sleep 0.1
  done
  say "dockerd (pid $pid) still runs after $wait_s s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$state"
  return 1
}

status() {
  local pid
  if ping_ok; then
    if our_pid; then
      pid=$rec_pid
      say "answers on $sock; started by tools/dockerd.sh start $rec_owner (pid $pid)"
    else
      say "answers on $sock; not started by tools/dockerd.sh (stop leaves it alone)"
    fi
    return 0
  fi
  say "nothing answers on $sock"
  return 1
}

case "${2:-test}" in
run | test) owner=${2:-test} ;;
*)
  echo "usage: tools/dockerd.sh start|stop [run|test]" >&2
  exit 2
  ;;
esac

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
clean)
  ping_ok || die "nothing answers on $sock"
  clean
  ;;
-h | --help)
  sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'
  ;;
*)
  echo "usage: tools/dockerd.sh start|stop [run|test] | status | clean" >&2
  exit 2
  ;;
esac
