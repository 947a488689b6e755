#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_access.sh - who may create and use real sandboxes (docs/reference/
# api.md §5.3, §5.8, §5.9) against a real dockerd and the sandbox image: a repository must be
# registered and visible (404 `repository not found`), the caller needs the write role and a
# token that may write (403 `write access required`); a sandbox's proxy token starting one is
# 403 `job and sandbox tokens can't start sandboxes`; calls are the creator's, the repository's
# admins' and global admins' (403 `not your sandbox`); the container carries GIT_AUTHOR_* and
# GIT_COMMITTER_* of its creator and SLUICE_REPO. Taking access away takes effect on the
# sandbox's proxy entry before the change answers: a disabled creator's sandbox gets 407 at once
# and its entry comes back when re-enabled; a creator who loses the repository loses the entry
# too, one lowered to read keeps it but may no longer call. An archived repository refuses
# create, exec, read, write and close with 403 `repository is archived (read-only)`. A close
# that a stopped proxy cannot acknowledge answers 503 naming it, the container gone all the
# same. Network sl-t-access, subnet 10.213.32.0/24.
# shellcheck disable=SC2016,SC2034,SC2119 # commands run inside the sandbox are single-quoted on purpose; tokens are read through SBX_TOK_$SBX_WHO; sbx_create takes optional arguments
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-access 32

R=/api/v1/repos/$SBX_REPO
ARCH="repository is archived (read-only)"

# as WHO METHOD PATH [BODY] : sbx_api as WHO.
as() {
  local who=$1
  shift
  SBX_WHO=$who sbx_api "$@" >/dev/null
}

# proxy_status ID : from inside sandbox ID (run by root, an admin), a plain-HTTP request to
# origin.py through the proxy with the sandbox's own identity: 200 while its entry is in the
# proxy's snapshot, 407 once it is not.
proxy_status() {
  SBX_WHO=root sbx_exec "$1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' $(sbx_url_http /hello)"
  sbx_field 'd.get("stdout", "")'
}

# --- users and roles: carol (none), bob (read), alice (write) ------------------------------------
as root POST /api/v1/users '{"name":"carol"}'
check_api "carol is created by the API" 201
SBX_TOK_carol=$(sbx_field 'd["token"]')
as root PUT "$R/members/bob" '{"role":"read"}'
check_api "bob is a reader of $SBX_REPO" 200 'd["role"]' read
as alice POST /api/v1/tokens '{"name":"reader","scope":"read"}'
check_api "alice makes a read-scoped token" 201
SBX_TOK_aliceread=$(sbx_field 'd["token"]')

# --- create ---------------------------------------------------------------------------------------
SBX_WHO=carol sbx_create || true
check_api "carol (no role) → 404" 404 'd.get("message")' "repository not found"
SBX_REPO=acme/unregistered SBX_WHO=alice sbx_create || true
check_api "an unregistered repository → 404" 404 'd.get("message")' "repository not found"
SBX_WHO=bob sbx_create || true
check_api "bob (read) → 403" 403 'd.get("message")' "write access required"
SBX_WHO=aliceread sbx_create || true
check_api "alice's read-scoped token → 403" 403 'd.get("message")' "write access required"
sbx_create || true
check_api "alice (write) → 201" 201
a1=${SBX_ID:-none}

# --- the creator in the container -----------------------------------------------------------------
sbx_exec "$a1" 'printf "%s|%s|%s|%s|%s" "$GIT_AUTHOR_NAME" "$GIT_AUTHOR_EMAIL" "$GIT_COMMITTER_NAME" "$GIT_COMMITTER_EMAIL" "$SLUICE_REPO"'
check_api "GIT_AUTHOR_*, GIT_COMMITTER_* are alice's (noreply email), SLUICE_REPO the repository" \
  200 'd["stdout"]' "alice|alice@users.noreply.sluice|alice|alice@users.noreply.sluice|$SBX_REPO"
as root PATCH /api/v1/users/alice '{"email":"alice@example.com"}'
check_api "alice gets an email" 200
sbx_create || true
a2=${SBX_ID:-none}
sbx_exec "$a2" 'printf "%s|%s" "$GIT_AUTHOR_EMAIL" "$GIT_COMMITTER_EMAIL"'
check_api "... a new sandbox commits with it" 200 'd["stdout"]' "alice@example.com|alice@example.com"
sbx_close "$a2" || true
check_api "... closed: 204 (every proxy acknowledged)" 204

# --- a sandbox's token is no API token ------------------------------------------------------------
token=$(sbx_token "$a1" || true)
check "the sandbox's proxy token is known (docker inspect)" test -n "$token"
SBX_TOK_sandbox=${token:-none}
SBX_WHO=sandbox sbx_create || true
check_api "its proxy token starting a sandbox → 403" 403 'd.get("message")' \
  "job and sandbox tokens can't start sandboxes"
as sandbox POST /api/v1/jobs "{\"repos\":[{\"repo_id\":\"$SBX_REPO\"}],\"command\":\"true\"}"
check_api "... or a job → 403" 403 'd.get("message")' "job and sandbox tokens can't start sandboxes"
as sandbox GET /api/v1/environments
check_api "... any other call → 403 as before" 403 'd.get("message")' \
  "sandbox tokens cannot use the API nor start sandboxes"

# --- who may call it -------------------------------------------------------------------------------
SBX_WHO=bob sbx_exec "$a1" 'true'
check_api "bob (read) exec → 403" 403 'd.get("message")' "write access required"
as root PUT "$R/members/bob" '{"role":"write"}'
SBX_WHO=bob sbx_exec "$a1" 'true'
check_api "bob (write) exec on alice's → 403" 403 'd.get("message")' "not your sandbox"
as root PUT "$R/members/carol" '{"role":"admin"}'
SBX_WHO=carol sbx_exec "$a1" 'echo hi'
check_api "carol, an admin of the repository, exec on alice's → 200" 200 'd["stdout"]' "hi"
as root DELETE "$R/members/carol"
check_api "carol removed" 204
SBX_WHO=carol sbx_exec "$a1" 'true'
check_api "... then her exec → 404 (she cannot see the repository)" 404 'd.get("message")' \
  "repository not found"
SBX_WHO=root sbx_exec "$a1" 'echo root'
check_api "root (global admin, admin token) exec on alice's → 200" 200 'd["stdout"]' "root"
as root POST /api/v1/tokens '{"name":"w","scope":"write"}'
SBX_TOK_rootwrite=$(sbx_field 'd["token"]')
SBX_WHO=rootwrite sbx_exec "$a1" 'true'
check_api "... with a write token, not a member → 404" 404 'd.get("message")' "repository not found"

# --- taking access away reaches the proxy before the answer -----------------------------------------
check_eq "positive control: the sandbox reaches origin.py through the proxy" "$(proxy_status "$a1")" 200
as root PATCH /api/v1/users/alice '{"disabled":true}'
check_api "disable alice → 200" 200 'd["disabled"]' true
check_eq "... her sandbox gets 407 at once" "$(proxy_status "$a1")" 407
as alice GET /api/v1/environments
check_api "... her token → 401" 401 'd.get("message")' "account disabled"
as root PATCH /api/v1/users/alice '{"disabled":false}'
check_api "enable alice → 200" 200
check_eq "... her sandbox's entry is back" "$(proxy_status "$a1")" 200
as root PUT "$R/members/alice" '{"role":"read"}'
check_api "alice lowered to read → 200" 200
sbx_exec "$a1" 'true'
check_api "... her exec → 403" 403 'd.get("message")' "write access required"
check_eq "... her sandbox keeps its entry (git access read)" "$(proxy_status "$a1")" 200
as root DELETE "$R/members/alice"
check_api "alice removed from the repository → 204" 204
check_eq "... her sandbox gets 407 at once" "$(proxy_status "$a1")" 407
as root PUT "$R/members/alice" '{"role":"write"}'
check_api "alice a writer again" 201
check_eq "... the entry is back" "$(proxy_status "$a1")" 200

# --- archived ---------------------------------------------------------------------------------------
as root PUT "$R" '{"visibility":"private","default_branch":"main","archived":true}'
check_api "archive the repository → 200" 200 'd["archived"]' true
sbx_exec "$a1" 'true'
check_api "archived: exec → 403" 403 'd.get("message")' "$ARCH"
sbx_read "$a1" README
check_api "archived: read → 403" 403 'd.get("message")' "$ARCH"
printf x >"$FX_WORK/x"
sbx_write "$a1" x "$FX_WORK/x"
check_api "archived: write → 403" 403 'd.get("message")' "$ARCH"
sbx_close "$a1" || true
check_api "archived: close → 403" 403 'd.get("message")' "$ARCH"
sbx_create || true
check_api "archived: create → 403" 403 'd.get("message")' "$ARCH"
as alice POST /api/v1/jobs "{\"repos\":[{\"repo_id\":\"$SBX_REPO\"}],\"command\":\"true\"}"
check_api "archived: a job → 403" 403 'd.get("message")' "$ARCH"
# Every call is refused now, so the proxy says what it holds: the snapshot of the archive.
check_match "archived: the sandbox keeps its entry (git access read), as the proxy loaded it" \
  "$(grep 'msg="policy loaded"' "$SBX_PROXY_LOG" | tail -n 1)" 'environments=2 clients=1$'

as root PUT "$R" '{"visibility":"private","default_branch":"main","archived":false}'
check_api "unarchive → 200" 200

# --- a close that a proxy cannot acknowledge -------------------------------------------------------
sbx_proxy_kill
sbx_close "$a1" || true
check_api "the proxy is down: close → 503" 503
check_match "... naming the proxy" "$(sbx_field 'd.get("message")')" \
  "^the sandbox is closed, but the proxy at $SBX_SOCK has not acknowledged snapshot [0-9]+ within 5 s$"
check "... and the container is gone all the same" fx_wait 15 sbx_container_gone "$a1"
sbx_proxy_start || fx_bail "the proxy starts again"

sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
