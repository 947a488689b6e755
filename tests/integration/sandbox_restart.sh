#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_restart.sh - docs/reference/containers.md §5.4: a restarted control plane finds its
# containers by label and reconciles them. With two sandboxes running, the control plane is
# stopped (SIGTERM, then, in a second round, SIGKILL) and started again: each sandbox is either
# re-adopted (exec works, its files are there, the proxy still lets it out, it can be closed) or
# removed (container gone, 404) - never orphaned. A third stop (SIGTERM) comes while a sandbox's
# container is created but its start is held back (tests/support/docker_hold.py between the
# control plane and the daemon): the control plane waits for the start and removes that
# container before it exits. At the end no container of this test's network is left. Network
# sl-t-restart, subnet 10.213.16.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-restart 16

# round SIGNAL : two sandboxes, the control plane stopped with SIGNAL and started again.
round() {
  local sig=$1 ids=() cids=() ips=() toks=() i id cid n=0 readopted=0 removed=0
  for i in 1 2; do
    sbx_create sbx main || fx_bail "[$sig] create sandbox $i: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
    ids+=("$SBX_ID")
    cids+=("$(sbx_cid "$SBX_ID" || true)")
    ips+=("$(sbx_ip "$SBX_ID" || true)")
    toks+=("$(sbx_token "$SBX_ID" || true)")
    sbx_exec "$SBX_ID" "echo marker-$SBX_ID > /workspace/repo/marker; curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: restart-$sig-before-$i' $(sbx_url_tls /hello)"
    check_api "[$sig] sandbox $i works before the restart (marker written, proxy 200)" 200 \
      'd["stdout"]' 200
  done
  if [ "$sig" = TERM ]; then
    # A call in flight when the stop comes is still answered, with its reason.
    curl -q -sS --max-time 60 -X POST -H "Authorization: Bearer $SBX_TOK_alice" \
      -H 'Content-Type: application/json' --data-binary '{"cmd":"sleep 30"}' \
      -o "$FX_WORK/stop-exec.body" -w '%{http_code}' \
      "http://127.0.0.1:$SBX_CPORT/api/v1/repos/$SBX_REPO/sandboxes/${ids[0]}/exec" \
      >"$FX_WORK/stop-exec.code" 2>"$FX_WORK/stop-exec.err" &
    stop_exec=$!
    sleep 1
    sbx_control_stop || true
    check_eq "[$sig] the control plane exits 0" "$SBX_CONTROL_EXIT" 0
    wait "$stop_exec" 2>/dev/null || true
    check_eq "[$sig] an exec in flight is answered: 503 the control plane is stopping" \
      "$(cat "$FX_WORK/stop-exec.code") $(fx_json "$FX_WORK/stop-exec.body" 'd.get("message")')" \
      "503 the control plane is stopping"
  else
    kill -KILL "$SBX_CONTROL_PID"
    wait "$SBX_CONTROL_PID" 2>/dev/null || true
  fi
  fx_note "[$sig] containers while the control plane is down: $(sbx_leftovers 2>/dev/null | head -c 400)"
  sbx_control_start || fx_bail "[$sig] the control plane starts again"
  sbx_wait_ready || fx_bail "[$sig] sandboxes ready after the restart"
  for i in 0 1; do
    id=${ids[$i]}
    cid=${cids[$i]}
    n=$((i + 1))
    sbx_exec "$id" "cat /workspace/repo/marker; curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: restart-$sig-after-$n' $(sbx_url_tls /hello)"
    if [ "$SBX_STATUS" = 200 ]; then
      readopted=$((readopted + 1))
      check_eq "[$sig] sandbox $n re-adopted: its marker is there and the proxy lets it out" \
        "$(sbx_field 'd["stdout"]')" "marker-$id"$'\n'"200"
      check_eq "[$sig] ... in the same container" "$(sbx_cid "$id" || true)" "$cid"
      sbx_api GET "" >/dev/null
      check_eq "[$sig] ... and listed" \
        "$(I=$id sbx_field 'any(x.get("id") == __import__("os").environ["I"] for x in (d if isinstance(d, list) else d.get("sandboxes", [])))')" true
      sbx_close "$id" || true
      check_api "[$sig] ... and it can be closed (204)" 204
      check "[$sig] ... which removes its container" fx_wait 10 sbx_container_gone "$id"
    else
      removed=$((removed + 1))
      fx_note "[$sig] sandbox $n not re-adopted: exec answered $SBX_STATUS $(head -c 200 "$SBX_BODY")"
      check_api "[$sig] sandbox $n not re-adopted: exec answers 404 sandbox not found" 404 \
        'd.get("message")' "sandbox not found"
      check "[$sig] ... and its container is removed (not orphaned)" fx_wait 15 sbx_container_gone "$id"
      check_eq "[$sig] ... and its id and token, from its old address, get 407" \
        "$(sbx_curl_from "${ips[$i]:-10.213.16.250}" "$id" "${toks[$i]:-none}" "restart-$sig-stale-$n")" 407
    fi
  done
  fx_note "[$sig] re-adopted $readopted, removed $removed"
  check "[$sig] nothing of this test's network is left running" fx_wait 15 sbx_no_leftovers
  if [ "$FX_LAST" = 1 ]; then
    sbx_leftovers | head -c 600
    echo
  fi
}

round TERM
round KILL

# --- SIGTERM while a sandbox's container exists but its start has not been reported ------------
HOLD=$FX_WORK/hold-start
HELD=$FX_WORK/held-start
HSOCK=$FX_WORK/docker-hold.sock
"$FX_PYTHON" "$FX_SUPPORT/docker_hold.py" --listen "$HSOCK" --to /var/run/docker.sock \
  --hold "$HOLD" --held "$HELD" >"$FX_WORK/docker_hold.log" 2>&1 &
FX_PIDS+=("$!")
fx_wait 10 test -S "$HSOCK" || fx_bail "docker_hold.py listens on $HSOCK"
sbx_control_stop || true
sbx_control_start --docker-socket "$HSOCK" || fx_bail "the control plane starts on the held socket"
sbx_wait_ready || fx_bail "sandboxes ready on the held socket"
touch "$HOLD"
curl -q -sS --max-time 120 -X POST -H "Authorization: Bearer $SBX_TOK_alice" \
  -H 'Content-Type: application/json' --data-binary '{"ref":"main","environment":"sbx"}' \
  -o "$FX_WORK/held-create.body" -w '%{http_code}' \
  "http://127.0.0.1:$SBX_CPORT/api/v1/repos/$SBX_REPO/sandboxes" >"$FX_WORK/held-create.code" \
  2>"$FX_WORK/held-create.err" &
held_curl=$!
check "a sandbox's container is created and its start held back" fx_wait 60 test -s "$HELD"
held_cid=$(head -c 64 "$HELD" 2>/dev/null || true)
check "... the container exists" sbx_dockerctl exists "${held_cid:-none}"
kill -TERM "$SBX_CONTROL_PID"
sleep 1
rm -f "$HOLD"
fx_wait_exit "$SBX_CONTROL_PID" 30 || true
check_eq "SIGTERM while a sandbox starts: the control plane exits 0" "$FX_EXIT" 0
held_gone() { ! sbx_dockerctl exists "${held_cid:-none}"; }
check "... after removing the container it had created (not orphaned)" held_gone
check "... and nothing of this test's network is left running" sbx_no_leftovers
wait "$held_curl" 2>/dev/null || true
check_eq "... and the create it cut off is answered: 503 the control plane is stopping" \
  "$(cat "$FX_WORK/held-create.code") $(fx_json "$FX_WORK/held-create.body" 'd.get("message")')" \
  "503 the control plane is stopping"
SBX_CONTROL_ARGS=()
sbx_control_start || fx_bail "the control plane starts again on the daemon's socket"
sbx_wait_ready || fx_bail "sandboxes ready after the third restart"

# A new sandbox after three restarts still works end to end.
sbx_create sbx main || true
check_api "a sandbox created after the restarts: 201" 201
if [ -n "$SBX_ID" ]; then
  sbx_exec "$SBX_ID" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: restart-new' $(sbx_url_tls /hello)"
  check_api "... and it gets out through the proxy (200)" 200 'd["stdout"]' 200
  sbx_close "$SBX_ID" || true
fi
sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
