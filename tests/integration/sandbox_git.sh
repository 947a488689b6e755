#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_git.sh - docs/reference/api.md §5.3 with a git platform (`--git-url`,
# `--git-token`): the clone runs in the background (with the git server stopped, the create
# answers 201, the list says `cloning`, an exec waits and runs once the server goes on); an
# unknown ref is a failed clone (201, then 409 `the clone failed: unknown ref` on every exec,
# read and write, `failed` in the list, close works), and so is a repository the git server lacks
# (409 with git's reason, no token in it); a sandbox closed while it clones answers its waiting
# exec 409 `the sandbox was closed`; a malformed ref is still 422; SLUICE_CLONE_URL and
# SLUICE_API_URL; a branch, a tag, another branch and a commit SHA are cloned into
# /workspace/repo and checked out;
# the clone goes through the proxy, which injects `Authorization: Basic
# base64(x-access-token:TOKEN)` for the git host (every request the git server saw carried it),
# also for a sandbox whose environment has network off, on the repository's own paths only
# (GET / on the git host goes out without it and gets the server's 401); the token appears
# nowhere inside the sandbox (env, /workspace, /root, /etc, git config) nor in its container's
# Config.Env. The git server is tests/support/gitserver.sh. Network sl-t-git, subnet
# 10.213.17.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup

fx_git_start acme/widget
fx_git_check
sbx_setup sl-t-git 17 --git-url "$FX_GIT_URL" --git-token "$GIT_TOKEN"
log_start=$(wc -l <"$FX_GIT_LOG")

# sbx_clone_state ID : the clone member of the sandbox in the list.
sbx_clone_state() {
  sbx_api GET "" >/dev/null
  I=$1 sbx_field '[x.get("clone") for x in d if x["id"] == __import__("os").environ["I"]][0]'
}

# --- the clone runs in the background -----------------------------------------------------------------
# The git server stopped: the create answers all the same, and an exec waits for the clone.
kill -STOP -- "-$FX_FCGI_PID"
t0=$(date +%s%N)
sbx_create sbx main || true
t1=$(date +%s%N)
check_api "with the git server stopped, create → 201 once the container runs" 201
bg_id=$SBX_ID
check_eq "... the list says the clone is running" "$(sbx_clone_state "$bg_id")" cloning
# bg_exec ID CMD NAME : POST exec in the background as alice; the status goes to
# $FX_WORK/NAME.code, the body to $FX_WORK/NAME.body, the pid to BG_PID.
bg_exec() {
  local body
  body=$(CMD=$2 "$FX_PYTHON" -c 'import json, os; print(json.dumps({"cmd": os.environ["CMD"]}))')
  curl -q -sS --max-time 120 -X POST -H "Authorization: Bearer $SBX_TOK_alice" \
    -H 'Content-Type: application/json' --data-binary "$body" -o "$FX_WORK/$3.body" \
    -w '%{http_code}' "http://127.0.0.1:$SBX_CPORT/api/v1/repos/$SBX_REPO/sandboxes/$1/exec" \
    >"$FX_WORK/$3.code" &
  BG_PID=$!
}
bg_exec "$bg_id" 'git rev-parse HEAD' bg-exec
bg_pid=$BG_PID
sleep 3
check "an exec meanwhile waits for the clone (no answer after 3 s)" kill -0 "$bg_pid"
kill -CONT -- "-$FX_FCGI_PID"
wait "$bg_pid" || true
check_eq "once the server goes on, the exec runs on the clone: 200 and main's commit" \
  "$(cat "$FX_WORK/bg-exec.code") $(fx_json "$FX_WORK/bg-exec.body" 'd.get("stdout", "").strip()')" \
  "200 $FX_GIT_MAIN_SHA"
check_eq "... and the list says done" "$(sbx_clone_state "$bg_id")" "done"
fx_note "create took $(((t1 - t0) / 1000000)) ms with the git server stopped"
sbx_exec "$bg_id" 'printf "%s|%s\n" "$SLUICE_CLONE_URL" "$SLUICE_API_URL"'
check_api "SLUICE_CLONE_URL is the clone URL without a credential, SLUICE_API_URL the API's" 200 \
  'd["stdout"].strip()' "$FX_GIT_URL/acme/widget.git|http://127.0.0.1:$SBX_CPORT"
sbx_close "$bg_id" || true

# A sandbox closed while its clone runs: the call waiting for the clone hears so, at once.
kill -STOP -- "-$FX_FCGI_PID"
sbx_create sbx main || true
check_api "with the git server stopped again, create → 201" 201
cl_id=$SBX_ID
bg_exec "$cl_id" 'true' cl-exec
cl_pid=$BG_PID
sleep 2
check "... an exec waits for the clone" kill -0 "$cl_pid"
check "... close while it clones → 204" sbx_close "$cl_id"
check "... the waiting exec gets its answer within 10 s" fx_wait 10 bash -c "! kill -0 $cl_pid"
wait "$cl_pid" || true
check_eq "... 409 the sandbox was closed" \
  "$(cat "$FX_WORK/cl-exec.code") $(fx_json "$FX_WORK/cl-exec.body" 'd.get("message")')" \
  "409 the sandbox was closed"
kill -CONT -- "-$FX_FCGI_PID"
check "... and nothing is left of it" fx_wait 15 sbx_no_leftovers

# --- refs -----------------------------------------------------------------------------------------
sbx_create sbx 'bad..ref' || true
check_api "a malformed ref → 422 unknown ref at once" 422 'd.get("message")' "unknown ref"
check "... and no container is left for it" sbx_no_leftovers
sbx_create sbx no-such-branch || true
check_api "an unknown ref → 201 (the clone finds it out)" 201
bad_id=$SBX_ID
sbx_exec "$bad_id" 'true'
check_api "... its first exec → 409 the clone failed: unknown ref" 409 'd.get("message")' \
  "the clone failed: unknown ref"
sbx_exec "$bad_id" 'true'
check_api "... and the next one too" 409 'd.get("message")' "the clone failed: unknown ref"
sbx_read "$bad_id" README.md
check_api "... a read too" 409 'd.get("message")' "the clone failed: unknown ref"
printf 'x' >"$FX_WORK/x.txt"
sbx_write "$bad_id" x.txt "$FX_WORK/x.txt"
check_api "... a write too" 409 'd.get("message")' "the clone failed: unknown ref"
sbx_api GET "" >/dev/null
check_eq "... the list says failed, and why" \
  "$(I=$bad_id sbx_field '[(x.get("clone"), x.get("clone_error")) for x in d if x["id"] == __import__("os").environ["I"]]')" \
  '[["failed", "unknown ref"]]'
check "... close works" sbx_close "$bad_id"
check "... and nothing is left of it" sbx_no_leftovers

# A repository sluice knows but the git server does not have: the clone fails, and the call says
# why in git's words.
sbx_repo_register acme/missing || fx_bail "repository acme/missing registered"
SBX_REPO=acme/missing sbx_create sbx main || true
check_api "a repository missing on the git server → 201 (the clone finds it out)" 201
miss_id=$SBX_ID
SBX_REPO=acme/missing sbx_exec "$miss_id" 'true'
check_api "... its first exec → 409 the clone failed, with git's reason" 409 \
  'bool(__import__("re").match(r"the clone failed: .*fatal: .*acme/missing\.git.* not found", d.get("message", "")))' \
  true
miss_msg=$(sbx_field 'd.get("message", "")')
fx_note "$miss_msg"
check "... which holds neither the token nor its Basic form" \
  bash -c '[[ $1 != *"$2"* && $1 != *"$3"* ]]' _ "$miss_msg" "$GIT_TOKEN" "$GIT_BASIC_B64"
SBX_REPO=acme/missing sbx_close "$miss_id" || true
check_api "... close → 204" 204

declare -A want=([main]=$FX_GIT_MAIN_SHA [v1]=$FX_GIT_V1_SHA [feature]=$FX_GIT_FEATURE_SHA
  [$FX_GIT_V1_SHA]=$FX_GIT_V1_SHA)
main_id=
for ref in main v1 feature "$FX_GIT_V1_SHA"; do
  sbx_create sbx "$ref" || true
  check_api "create with ref $ref → 201" 201 'd.get("ref")' "$ref"
  [ -n "$SBX_ID" ] || continue
  sbx_exec "$SBX_ID" 'git rev-parse HEAD; git status --porcelain | wc -l; test -f feature.txt && echo has-feature || echo no-feature'
  out=$(sbx_field 'd["stdout"].split()')
  if [ "$ref" = feature ]; then f=has-feature; else f=no-feature; fi
  check_eq "ref $ref: /workspace/repo is a clean checkout of ${want[$ref]:0:12}" "$out" \
    "[\"${want[$ref]}\", \"0\", \"$f\"]"
  sbx_exec "$SBX_ID" 'printf "%s\n" "$SLUICE_REF"'
  check_api "ref $ref: SLUICE_REF=$ref" 200 'd["stdout"].strip()' "$ref"
  if [ "$ref" = main ]; then
    main_id=$SBX_ID
  else
    sbx_close "$SBX_ID" || true
  fi
done
[ -n "$main_id" ] || fx_bail "no sandbox on main"

# --- the clone went through the proxy with the credential injected -----------------------------------
new_lines() { tail -n +"$((log_start + 1))" "$FX_GIT_LOG"; }
check "the git server saw the clones" test "$(new_lines | grep -c '"status":200')" -gt 0
check_eq "every request it saw carried the platform token (auth=1)" \
  "$(new_lines | grep -c '"auth":0' || true)" 0
check_audit "audit: git.sluice.test allowed with a credential for the sandbox" client="$main_id" \
  host=git.sluice.test decision=allow credential=true
sbx_exec "$main_id" 'git remote get-url origin'
check_api "origin is {git-url}/acme/widget.git" 200 'd["stdout"].strip()' "$FX_GIT_URL/acme/widget.git"
sbx_exec "$main_id" 'git fetch -q origin && git ls-remote origin refs/tags/v1 | cut -c1-40'
check_api "git fetch / ls-remote from inside work (through the proxy)" 200 'd["exitCode"]' 0
n=$(wc -l <"$FX_GIT_LOG")

# --- the token is nowhere inside ----------------------------------------------------------------------
for secret in "$GIT_TOKEN" "$GIT_BASIC_B64"; do
  sbx_exec "$main_id" "{ env; tr '\\0' '\\n' </proc/1/environ; git config --list --show-origin; git -C /workspace/repo config --list --show-origin; } 2>/dev/null | grep -cF -- '$secret'; grep -rlsF -- '$secret' /workspace /root /etc /tmp /home 2>/dev/null | wc -l"
  check_api "the ${secret:0:4}… value is not in env, git config, /workspace, /root, /etc, /tmp, /home" \
    200 'd["stdout"].split()' '["0", "0"]'
done
cid=$(sbx_cid "$main_id" || true)
check "the token is not in the container's Config.Env or labels" \
  bash -c "! '$FX_PYTHON' '$FX_SUPPORT/dockerctl.py' inspect '$cid' | grep -qF -- '$GIT_TOKEN'"

# --- a git host reachable with network off ------------------------------------------------------------
sbx_create sbx-off main || true
check_api "network off, ref main → 201" 201
if [ -n "$SBX_ID" ]; then
  off=$SBX_ID
  sbx_exec "$off" 'git rev-parse HEAD; git fetch -q origin && echo fetched'
  check_api "network off: the clone is there and git fetch works" 200 'd["stdout"].split()' \
    "[\"$FX_GIT_MAIN_SHA\", \"fetched\"]"
  sbx_exec "$off" "curl -sS --max-time 10 -o /dev/null -w '%{http_connect}' $(sbx_url_tls /hello) 2>/dev/null; echo"
  check_api "network off: other hosts are refused (CONNECT 403)" 200 'd["stdout"].strip()' 403
  sbx_exec "$off" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' $FX_GIT_URL/ 2>/dev/null; echo"
  check_api "network off: GET / on the git host reaches it without the credential (the server's 401)" \
    200 'd["stdout"].strip()' 401
  sbx_close "$off" || true
fi
check_eq "the git server saw no request to acme/widget without the token" \
  "$(tail -n +"$((n + 1))" "$FX_GIT_LOG" | grep '"uri":"/acme/widget' | grep -c '"auth":0' || true)" 0
check_eq "... and GET / without it (the credential goes to the repository's own paths only)" \
  "$(tail -n +"$((n + 1))" "$FX_GIT_LOG" | grep '"uri":"/"' | grep -c '"auth":0' || true)" 1

sbx_close "$main_id" || true
check_api "close → 204" 204
sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
