#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# integration.swarm_launcher - the Swarm launcher (control/sandbox/swarm.h) against the two-node
# lab of tools/swarm-lab.sh, driven through tests/integration/swarm_probe.c from the lab's
# control plane seat (the namespace slsw-br): the manager answers; the sandbox overlay is made
# and an existing one accepted; sandboxes land on both nodes with their inner wall installed by
# the helper image (tools/node-image.sh); exec, a file copied in at create, write and read work
# on both; a sandbox cannot reach another; list shows them running; node 2 stopped: its sandbox
# is gone in the list and the others still answer; node 2 back: no container of the lost
# sandbox left on it; everything removed: no service, no task container on either node. The lab
# is stopped at exit whatever happens. Skips when not root, without Docker or when the lab cannot
# start (another lab up, for one).
set -euo pipefail

src=${SLUICE_SRC:?}
probe=${SLUICE_SWARM_PROBE:?}
lab="$src/tools/swarm-lab.sh"
skip() {
  echo "SKIP: $*"
  exit 0
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root (the lab's namespaces and daemons)"
command -v docker >/dev/null && [ -S /var/run/docker.sock ] || skip "no Docker daemon on the host"
docker image inspect sluice/sandbox:bookworm >/dev/null 2>&1 ||
  skip "the host's daemon has no sluice/sandbox:bookworm to copy into the nodes"
if ip netns list | grep -q '^slsw-'; then
  # A lab left by a run that was killed (ctest never runs two swarm tests at once: they share
  # the lock swarm_lab): our own names only.
  echo "# stale: a swarm lab was up; stopping it"
  "$lab" stop >/dev/null 2>&1 || true
fi
work=$(mktemp -d)
cleanup() {
  "$lab" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! SLSW_SLUICE=${SLUICE_BIN:?} "$lab" start >"$work/lab.log" 2>&1; then
  cat "$work/lab.log" >&2
  fail "the swarm lab did not start"
fi

export SLSW_PKI=/var/tmp/slsw-pki SLSW_MANAGER=10.213.200.11 SLSW_WALL_IMAGE=sluice/wall:test
"$src/tools/node-image.sh" "${SLUICE_BIN:?}" "$work/wall.tar"
for n in 1 2; do
  "$lab" docker "$n" import --change 'ENTRYPOINT ["/sluice"]' "$work/wall.tar" \
    "$SLSW_WALL_IMAGE" >/dev/null
done
p() { ip netns exec slsw-br "$probe" "$@"; }

p ping || fail "the manager does not answer as one"
p net sbx-net 10.213.211.0/24 10.213.211.1 || fail "ensure_network (new)"
p net sbx-net 10.213.211.0/24 10.213.211.1 || fail "ensure_network (existing)"
if p net slsw-ov 10.213.212.0/24 10.213.212.1 2>"$work/err"; then
  fail "an existing overlay with another subnet was accepted"
fi
grep -q "exists with subnet" "$work/err" || fail "wrong refusal: $(cat "$work/err")"
# With encryption asked for (the control plane's default): an existing unencrypted overlay is
# refused, naming the way out; a new one is made encrypted.
if SLSW_ENCRYPT=1 p net sbx-net 10.213.211.0/24 10.213.211.1 2>"$work/err"; then
  fail "an unencrypted overlay was accepted with encryption asked for"
fi
grep -q "not encrypted.*--swarm-encrypted off" "$work/err" || fail "wrong refusal: $(cat "$work/err")"
SLSW_ENCRYPT=1 p net sbx-enc 10.213.213.0/24 10.213.213.1 || fail "ensure_network (encrypted)"
"$lab" docker 1 network inspect sbx-enc | jq -e '.[0].Options | has("encrypted")' >/dev/null ||
  fail "the new overlay is not encrypted: $("$lab" docker 1 network inspect sbx-enc)"
SLSW_ENCRYPT=1 p net sbx-enc 10.213.213.0/24 10.213.213.1 || fail "ensure_network (encrypted, existing)"
"$lab" docker 1 network rm sbx-enc >/dev/null

# Swarm spreads the tasks: create until both nodes have one (at most four).
declare -A on
ids=()
for s in a b c d; do
  out=$(p create "sbx-$s" sbx-net sluice/sandbox:bookworm 10.213.211.1 3128) ||
    fail "create sbx-$s"
  id=${out%% *}
  ids+=("$id")
  on[$(echo "$id" | cut -d. -f3-)]=$id
  echo "created $out"
  [ "${#on[@]}" -eq 2 ] && break
done
[ "${#on[@]}" -eq 2 ] || fail "the sandboxes did not land on both nodes: ${!on[*]}"
id1=${on[10.213.200.11]}
id2=${on[10.213.200.12]}

for id in "$id1" "$id2"; do
  node=$(echo "$id" | cut -d. -f3-)
  [ "$(p exec "$id" hostname)" = "$(printf 'sandbox\nexit 0')" ] || fail "exec on $node"
  [ "$(p read "$id" /etc/sluice/marker)" = swarm ] || fail "the file copied in at create"
  p write "$id" /workspace/repo/note.txt "hello $node" || fail "write_file on $node"
  [ "$(p read "$id" /workspace/repo/note.txt)" = "hello $node" ] ||
    fail "read_file on $node"
  # The command is the runner, waiting; the wall is in place (nft is not in the image: the
  # wall shows in what it refuses).
  p exec "$id" cat /proc/1/cmdline | tr '\0' ' ' | grep -q 'sluice-run --idle' ||
    fail "the task's command is not the runner"
done
ip2=$(p list sluice.test | awk -v id="$id2" '$1 == id {print $3}')
out=$(p exec "$id1" sh -c "curl -s -m 5 http://$ip2:8080/ >/dev/null; echo curl=\$?")
echo "$out" | grep -q '^curl=7$' || fail "a sandbox reached another past its wall: $out"

p list sluice.test >"$work/list"
[ "$(grep -c ' running ' "$work/list")" -eq "${#ids[@]}" ] || fail "list: $(cat "$work/list")"

# A lost node: its sandbox is gone, the others answer.
"$lab" node-stop 2
for _ in $(seq 1 30); do
  p list sluice.test >"$work/list"
  grep -q "^${id2%%.*} gone" "$work/list" && break
  sleep 1
done
grep -q "^${id2%%.*} gone" "$work/list" || fail "node 2's sandbox is not gone: $(cat "$work/list")"
if p exec "$id2" true 2>/dev/null; then
  fail "exec on a lost node's sandbox succeeded"
fi
[ "$(p exec "$id1" hostname)" = "$(printf 'sandbox\nexit 0')" ] || fail "exec on node 1 after"

# Its return: the lost sandbox's container is removed by the node, nothing else appears.
"$lab" node-start 2
cid2=$(echo "$id2" | cut -d. -f2)
for _ in $(seq 1 30); do
  [ -z "$("$lab" docker 2 ps -aq --filter "id=$cid2")" ] && break
  sleep 1
done
[ -z "$("$lab" docker 2 ps -aq --filter "id=$cid2")" ] || fail "the lost sandbox's container is left"
grep -q "^${id2%%.*} gone" <(p list sluice.test) || fail "the lost sandbox came back"

for id in "${ids[@]}"; do
  p rm "$id" || fail "remove $id"
done
p rm "${ids[0]}" || fail "removing a removed sandbox is not success"
[ -z "$(p list sluice.test)" ] || fail "services left after remove"
for n in 1 2; do
  for _ in $(seq 1 30); do
    [ -z "$("$lab" docker "$n" ps -aq --filter label=sluice.test)" ] && break
    sleep 1
  done
  [ -z "$("$lab" docker "$n" ps -aq --filter label=sluice.test)" ] ||
    fail "containers left on node $n"
  [ -z "$("$lab" docker "$n" ps -aq --filter label=sluice.wall-of)" ] ||
    fail "wall helpers left on node $n"
done
echo "PASS: swarm_launcher"
