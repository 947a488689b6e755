#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_limits.sh - docs/reference/api.md §5.3 ownership and limits: another user gets
# 403 `not your sandbox` on every action (an admin may use any sandbox); a sixth open sandbox
# of one user in one repository → 429 with the exact message (other users and other
# repositories unaffected; closing one frees a slot); a closed sandbox's container is gone and
# its proxy token gets 407; an image whose registry is unreachable → 502 naming it, nothing
# left; then, with the control plane restarted with `--idle-timeout 3`, an
# idle sandbox is closed (calls keep it open), and with `--sandbox-lifetime 5`, a sandbox's
# credential stops working and the sandbox is closed about 5 s after start. Network
# sl-t-limits, subnet 10.213.15.0/24.
# shellcheck disable=SC2016,SC2317,SC2034 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
SBX_REPOS="acme/other acme/noimage" sbx_setup sl-t-limits 15

LIMIT_MSG="you have 5 open sandboxes in this repository, the most allowed; close one first"

# --- ownership --------------------------------------------------------------------------------
sbx_create sbx main || fx_bail "alice creates a sandbox: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
s1=$SBX_ID
SBX_WHO=bob
sbx_exec "$s1" 'echo bob-was-here > /tmp/bob'
check_api "bob: exec on alice's sandbox → 403 not your sandbox" 403 'd.get("message")' "not your sandbox"
sbx_read "$s1" "/etc/hostname"
check_api "bob: read → 403 not your sandbox" 403 'd.get("message")' "not your sandbox"
printf 'x' >"$FX_WORK/x"
sbx_write "$s1" "bob.txt" "$FX_WORK/x"
check_api "bob: write → 403 not your sandbox" 403 'd.get("message")' "not your sandbox"
sbx_api POST "/$s1/close" >/dev/null
check_api "bob: close → 403 not your sandbox" 403 'd.get("message")' "not your sandbox"
sbx_api GET "" >/dev/null
check_eq "bob's list does not show alice's sandbox" \
  "$(I=$s1 sbx_field 'any(x.get("id") == __import__("os").environ["I"] for x in (d if isinstance(d, list) else d.get("sandboxes", [])))')" false
SBX_WHO=root
sbx_exec "$s1" 'echo admin-was-here'
check_api "admin: exec on alice's sandbox → 200" 200 'd["stdout"]' "admin-was-here"
SBX_WHO=alice
sbx_exec "$s1" 'test -e /tmp/bob && echo leaked || echo clean'
check_api "bob's refused exec never ran" 200 'd["stdout"]' "clean"

SBX_REPO=acme/other sbx_exec "$s1" 'true'
check_api "alice's sandbox under another repository's URL → 404 sandbox not found" 404 \
  'd.get("message")' "sandbox not found"

# --- five per user per repository ----------------------------------------------------------------
ids=("$s1")
for i in 2 3 4 5; do
  if sbx_create sbx main; then ids+=("$SBX_ID"); else
    echo "#   create $i: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
  fi
done
check_eq "alice opens 5 sandboxes in $SBX_REPO" "${#ids[@]}" 5
sbx_create sbx main || true
check_api "the sixth → 429 with the exact message" 429 'd.get("message")' "$LIMIT_MSG"
SBX_WHO=bob sbx_create sbx main || true
check_api "bob may still open one in the same repository (201)" 201
bob_id=$SBX_ID
SBX_REPO=acme/other sbx_create sbx main || true
check_api "alice may still open one in another repository (201)" 201
other_id=$SBX_ID

# --- an image that cannot be had: the pull's error, nothing left ------------------------------------
# A registry nobody listens at (port 1 on loopback): the pull fails at once, whatever the
# machine's network (sandbox_registry.sh tests a real registry).
SBX_WHO=root sbx_api POST /api/v1/environments \
  '{"name":"sbx-noimage","scope":"global","base_image":"127.0.0.1:1/sluice-t/no-such-image:never","network":"off"}' \
  >/dev/null
check_api "an environment whose image cannot be pulled (201)" 201
before=$(sbx_leftovers | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
SBX_REPO=acme/noimage sbx_create sbx-noimage main || true
check_api "an image whose registry is unreachable → 502" 502
check_match "... with the message naming the registry" "$(sbx_field 'd.get("message")')" \
  "^registry unreachable: 127\.0\.0\.1:1: "
after=$(sbx_leftovers | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
check_eq "... and nothing of it is left (containers of this network before and after)" "$after" "$before"
SBX_REPO=acme/noimage sbx_api GET "" >/dev/null
check_api "... nor listed" 200 'len(d)' 0

# --- close: container gone, token refused -----------------------------------------------------------
token=$(sbx_token "$s1" || true)
check "sandbox 1's proxy token is known (docker inspect)" test -n "$token"
SBX_TOK_sandbox=${token:-none}
SBX_WHO=sandbox sbx_create sbx main || true
check_api "a sandbox's proxy token starting a sandbox → 403" 403 'd.get("message")' \
  "job and sandbox tokens can't start sandboxes"
[ "$FX_LAST" = 0 ] || sbx_show
SBX_WHO=sandbox sbx_api GET /api/v1/environments >/dev/null
check_api "... and on any other route → 403" 403 'd.get("message")' \
  "sandbox tokens cannot use the API nor start sandboxes"
SBX_TOK_nobody=
SBX_WHO=nobody sbx_api GET "" >/dev/null
check_api "no token → 401" 401
s1ip=$(sbx_ip "$s1" || true)
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy 'http://$s1:$token@$SBX_GW:$SBX_PPORT' -H 'X-Probe: limits-before-close' $(sbx_url_http /hello)"
check_api "positive control: its id and token work from its address (explicit --proxy, 200)" \
  200 'd["stdout"]' 200
sbx_close "$s1" || true
check_api "alice closes sandbox 1 (204)" 204
check "its container is gone" fx_wait 10 sbx_container_gone "$s1"
check_eq "its id and token, from its old address ${s1ip:-?} (a helper container), now get 407" \
  "$(sbx_curl_from "${s1ip:-10.213.15.250}" "$s1" "${token:-none}" limits-after-close)" 407
check_eq "... and the origin never saw that request" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~limits-after-close")" 0
sbx_api POST "/$s1/exec" '{"cmd":"true"}' >/dev/null
check_api "a closed sandbox: exec → 404 sandbox not found" 404 'd.get("message")' "sandbox not found"
sbx_create sbx main || true
check_api "a slot is free again: create → 201" 201
ids=("${ids[@]:1}" "$SBX_ID")
sbx_create sbx main || true
check_api "... and the next is refused again (429)" 429 'd.get("message")' "$LIMIT_MSG"
for i in "${ids[@]}" "$other_id"; do
  [ -n "$i" ] || continue
  if [ "$i" = "$other_id" ]; then SBX_REPO=acme/other sbx_close "$i" || true; else sbx_close "$i" || true; fi
done
SBX_WHO=bob sbx_close "$bob_id" || true
check "every container of this part is gone" fx_wait 15 sbx_no_leftovers

# Six creates at once: starting sandboxes count, so exactly one is refused.
pids=()
for i in 1 2 3 4 5 6; do
  curl -q -sS --max-time 200 -X POST -H "Authorization: Bearer $SBX_TOK_alice" \
    -H 'Content-Type: application/json' --data-binary '{"ref":"main","environment":"sbx"}' \
    -o "$FX_WORK/race-$i.json" -w '%{http_code}' \
    "http://127.0.0.1:$SBX_CPORT/api/v1/repos/$SBX_REPO/sandboxes" >"$FX_WORK/race-$i.code" 2>/dev/null &
  pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || true; done
codes=$(for i in 1 2 3 4 5 6; do cat "$FX_WORK/race-$i.code"; echo; done | sort | tr '\n' ' ')
check_eq "six parallel creates: five 201 and one 429" "$codes" "201 201 201 201 201 429 "
for i in 1 2 3 4 5 6; do
  rid=$(fx_json "$FX_WORK/race-$i.json" 'd.get("id", "")' || true)
  [ -n "$rid" ] && { sbx_close "$rid" || true; }
done
check "... all closed again" fx_wait 15 sbx_no_leftovers

# --- idle timeout -----------------------------------------------------------------------------------
sbx_control_stop || true
sbx_control_start --idle-timeout 3 || fx_bail "control restarts with --idle-timeout 3"
sbx_wait_ready || fx_bail "sandboxes ready after the restart"
sbx_create sbx main || fx_bail "create with --idle-timeout 3: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
idle=$SBX_ID
itoken=$(sbx_token "$idle" || true)
iip=$(sbx_ip "$idle" || true)
alive=0
for i in 1 2 3 4 5 6; do
  sleep 1
  sbx_exec "$idle" 'true'
  [ "$SBX_STATUS" = 200 ] && alive=$((alive + 1))
done
check_eq "calls every second keep it open for 6 s (6 execs of 6 answered)" "$alive" 6
sbx_exec "$idle" 'sleep 6; echo done'
check_api "an exec running longer than the idle timeout is use: it completes (sleep 6)" 200 \
  'd["stdout"]' "done"
t0=$(date +%s)
check "left idle, its container is removed within 3 s + 10 s" fx_wait 13 sbx_container_gone "$idle"
fx_note "idle close took about $(($(date +%s) - t0)) s"
sbx_exec "$idle" 'true'
check_api "... and exec answers 404 sandbox not found" 404 'd.get("message")' "sandbox not found"
check_eq "... and its id and token, from its old address, get 407" \
  "$(sbx_curl_from "${iip:-10.213.15.250}" "$idle" "${itoken:-none}" limits-idle)" 407

# --- lifetime ---------------------------------------------------------------------------------------
sbx_control_stop || true
sbx_control_start --sandbox-lifetime 5 || fx_bail "control restarts with --sandbox-lifetime 5"
sbx_wait_ready || fx_bail "sandboxes ready after the restart"
# Send the create late in a wall-clock second (x.85 s): an expiry computed from a time truncated
# to whole seconds would then come almost a second early, every time, not now and then.
"$FX_PYTHON" -c 'import time; time.sleep((0.85 - time.time() % 1) % 1)'
t0=$(date +%s%N)
sbx_create sbx main || fx_bail "create with --sandbox-lifetime 5: $SBX_STATUS $(head -c 200 "$SBX_BODY")"
life=$SBX_ID
ltoken=$(sbx_token "$life" || true)
lip=$(sbx_ip "$life" || true)
sbx_exec "$life" "curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -H 'X-Probe: limits-life-early' $(sbx_url_tls /hello)"
early=$((($(date +%s%N) - t0) / 1000000))
if [ "$early" -lt 4500 ]; then
  check_api "within the lifetime the sandbox gets out through the proxy (${early} ms after create)" \
    200 'd["stdout"]' 200
else
  fx_skip "within the lifetime the sandbox gets out" "the first exec came ${early} ms after create"
fi
# Poll from inside while the sandbox is open; once it is closed, from a helper at its address.
life_state() {
  sbx_exec "$life" "curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -H 'X-Probe: limits-life-late' $(sbx_url_http /hello)"
  if [ "$SBX_STATUS" = 404 ]; then
    life_refused=$(sbx_curl_from "${lip:-10.213.15.250}" "$life" "${ltoken:-none}" limits-life-after)
    life_how="closed; its token from its address gets $life_refused"
    [ "$life_refused" = 407 ] || [ "$life_refused" = 403 ]
    return
  fi
  life_refused=$(sbx_field 'd.get("stdout", "")' || true)
  life_how="still open; a request from inside gets $life_refused"
  [ "$life_refused" = 407 ] || [ "$life_refused" = 403 ]
}
check "its credential is refused (407, or 403 expired) by 5 s + 10 s" fx_wait 15 life_state
el=$((($(date +%s%N) - t0) / 1000000))
check "... not before 5 s after the create call was sent ($el ms)" test "$el" -ge 4950
fx_note "after $el ms: $life_how"
check "the sandbox is closed: its container is removed" fx_wait 10 sbx_container_gone "$life"
sbx_exec "$life" 'true'
check_api "... and exec answers 404 sandbox not found" 404 'd.get("message")' "sandbox not found"

sbx_shutdown_checks
fx_done
