#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_permissions.sh - who may do what, end to end (issue 16, "How it is
# tested"): real git, a real smart-HTTP server, real containers. The git platform of `sluice
# control` (`--git-url`, `--git-token`) is tests/support/gitserver.sh (nginx + git http-backend
# over TLS on loopback) holding acme/site (private, the sandboxes' repository: main protected as
# the default branch, release/* protected), acme/secret (private: alice is a writer of it in
# sluice too) and pub/lib (public: anonymous read). Users: alice (write member of acme/site),
# bob (read member), carol (no role), root (admin).
#
# Checked, with `git` inside alice's sandbox (docs/reference/snapshot.md §3 `git`,
# docs/reference/proxy.md §4.11, docs/reference/api.md §5.3, §5.8, §5.9):
# - `git push origin HEAD:feature-x` lands (the server's ref is alice's commit, authored as
#   her); pushes to main and release/1 fail with the exact guardrail text in git's output and the
#   server's refs unchanged; pub/lib clones; acme/secret fails with the server's own 401; the git
#   token is nowhere in the container (env, /proc/*/environ, git config, files under /, the
#   output of git with curl tracing); GIT_AUTHOR_*, GIT_COMMITTER_*, SLUICE_REPO are set;
# - bob, a read-scoped token of alice, a sandbox's proxy token, carol: 403/404 as api.md says,
#   and no container for any of them;
# - git's 407 challenge is audited as "challenge", never as a deny;
# - a damaged environment row (its egress JSON corrupted in the real sluice.db under the running
#   control plane) is reported in /api/v1/status and compiled deny-all, while the rest of the
#   snapshot still reaches the proxy: the sandbox and a static client keep working, and a
#   deleted static client's token gets 407 as soon as the DELETE answered;
# - a damaged repository record (its protected branches corrupted the same way) is reported, the
#   sandbox's calls are refused (500, fail closed) and, entered with docker exec, its git gets
#   no credential (the server's 401) while its other egress goes on; repaired, git works again;
# - alice lowered to read: her open sandbox's next push is refused (git-read-only, in git's
#   output) while fetch works; alice disabled: 401 `account disabled`, her sandbox's proxy
#   token 407 at once, her exec refused; archived: create and exec are
#   403 `repository is archived (read-only)`, and the open sandbox's pushes get git-read-only.
# Network sl-t-perm, subnet 10.213.33.0/24.
# shellcheck disable=SC2016,SC2034,SC2119 # commands run inside the sandbox are single-quoted on purpose; tokens are read through SBX_TOK_$SBX_WHO; sbx_create takes optional arguments
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup

GUARD='agents may not push to protected or default branches; open a pull request'
ARCH="repository is archived (read-only)"
fx_git_start acme/site acme/secret pub/lib
SITE_MAIN=$(fx_git_sha acme/site main)
PUB_MAIN=$(fx_git_sha pub/lib main)
fx_git_public pub/lib
SBX_REPO=acme/site
SBX_REPOS=acme/secret
sbx_setup sl-t-perm 33 --git-url "$FX_GIT_URL" --git-token "$GIT_TOKEN"
R=/api/v1/repos/$SBX_REPO

# as WHO METHOD PATH [BODY] : sbx_api as WHO.
as() {
  local who=$1
  shift
  SBX_WHO=$who sbx_api "$@" >/dev/null
}

# refs REPO : the server's branches and tags of REPO, one "REF SHA" a line.
refs() {
  git -C "$FX_GIT_ROOT/$1.git" for-each-ref --format='%(refname) %(objectname)' | sort
}

# in_sbx ID CMD : exec as root (an admin: it works whatever alice's state), 120 s; body in
# SBX_BODY.
in_sbx() {
  SBX_WHO=root sbx_exec "$1" "$2" 120000
}

# out : stdout and stderr of the last exec, as one text.
out() {
  sbx_field 'd.get("stdout", "") + d.get("stderr", "")'
}

# proxy_status ID : a plain-HTTP request from inside sandbox ID through the proxy with its own
# identity: 200 while its entry is in the proxy's snapshot, 407 once it is not.
proxy_status() {
  in_sbx "$1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' $(sbx_url_http /hello)"
  sbx_field 'd.get("stdout", "")'
}

# octal TEXT : TEXT as printf's octal escapes, so that a command can hold a secret without
# holding its text.
octal() {
  printf '%s' "$1" | od -An -v -to1 | tr -d '\n' | sed 's/ /\\/g'
}

# containers : how many containers this test's network has.
containers() {
  sbx_leftovers | "$FX_PYTHON" -c 'import json, sys; print(len(json.load(sys.stdin)))'
}

# --- repositories and users --------------------------------------------------------------------
as root PUT "$R" '{"visibility":"private","default_branch":"main","protected_branches":["release/*"]}'
check_api "acme/site: main is the default branch, release/* protected" 200 \
  'd["protected_branches"]' '["release/*"]'
as root PUT /api/v1/repos/pub/lib '{"visibility":"public","default_branch":"main"}'
check_api "pub/lib is registered public" 201
as root PUT "$R/members/bob" '{"role":"read"}'
check_api "bob is a read member of acme/site" 200 'd["role"]' read
as root POST /api/v1/users '{"name":"carol"}'
check_api "carol is created (no role anywhere)" 201
SBX_TOK_carol=$(sbx_field 'd["token"]')
as root PATCH /api/v1/users/alice '{"email":"alice@example.com"}'
check_api "alice has an email" 200
as alice POST /api/v1/tokens '{"name":"reader","scope":"read","expires_in_days":1}'
check_api "alice makes a read-scoped token" 201 'd["scope"]' read
SBX_TOK_aliceread=$(sbx_field 'd["token"]')

# --- who may not create ----------------------------------------------------------------------------
n0=$(containers)
SBX_WHO=bob sbx_create || true
check_api "bob (read member) → 403" 403 'd.get("message")' "write access required"
SBX_WHO=aliceread sbx_create || true
check_api "alice's read-scoped token → 403" 403 'd.get("message")' "write access required"
SBX_WHO=carol sbx_create || true
check_api "carol (no role in the private repository) → 404, as api.md §5.9 says" 404 \
  'd.get("message")' "repository not found"
SBX_REPO=pub/lib SBX_WHO=carol sbx_create || true
check_api "carol on the public pub/lib (read for everyone) → 403" 403 'd.get("message")' \
  "write access required"
check_eq "... and none of them got a container" "$(containers)" "$n0"

# --- alice's sandbox -------------------------------------------------------------------------------
sbx_create || true
check_api "alice (write member) creates a sandbox on acme/site → 201" 201
s1=${SBX_ID:-}
[ -n "$s1" ] || fx_bail "no sandbox for alice"
token=$(sbx_token "$s1" || true)
SBX_TOK_sandbox=${token:-none}
SBX_WHO=sandbox sbx_create || true
check_api "the sandbox's proxy token used as an API token → 403" 403 'd.get("message")' \
  "job and sandbox tokens can't start sandboxes"
check_eq "... no container for it either" "$(containers)" "$((n0 + 1))"

sbx_exec "$s1" 'printf "%s|%s|%s|%s|%s" "$GIT_AUTHOR_NAME" "$GIT_AUTHOR_EMAIL" "$GIT_COMMITTER_NAME" "$GIT_COMMITTER_EMAIL" "$SLUICE_REPO"'
check_api "GIT_AUTHOR_*, GIT_COMMITTER_* are alice's, SLUICE_REPO the repository" 200 \
  'd["stdout"]' "alice|alice@example.com|alice|alice@example.com|acme/site"

# --- pushes --------------------------------------------------------------------------------------------
export GIT_TERMINAL_PROMPT=0
P='export GIT_TERMINAL_PROMPT=0; cd /workspace/repo'
sbx_exec "$s1" "$P; git commit -q --allow-empty -m 'from the sandbox' && git rev-parse HEAD"
check_api "alice commits in her sandbox" 200 'd["exitCode"]' 0
commit=$(sbx_field 'd["stdout"].strip()')
had=$(fx_git_sha acme/site feature-x || echo none)
sbx_exec "$s1" "$P; git push origin HEAD:feature-x >/tmp/out-push-feature 2>&1; echo rc=\$?; cat /tmp/out-push-feature"
check_match "git push origin HEAD:feature-x succeeds" "$(out)" '^rc=0'
check_eq "... the server's feature-x is the sandbox's commit" "$(fx_git_sha acme/site feature-x)" \
  "$commit"
check_eq "... authored by alice" \
  "$(git -C "$FX_GIT_ROOT/acme/site.git" log -1 --format='%an <%ae>|%cn <%ce>' feature-x)" \
  "alice <alice@example.com>|alice <alice@example.com>"
check_audit "audit: the push was allowed with the credential injected" client="$s1" \
  method=POST path=/acme/site.git/git-receive-pack decision=allow credential=true status=200
after_feature=$(refs acme/site)

for target in main release/1; do
  sbx_exec "$s1" "$P; git push origin HEAD:$target >/tmp/out-push-${target//\//-} 2>&1; echo rc=\$?; cat /tmp/out-push-${target//\//-}"
  o=$(out)
  check_match "git push origin HEAD:$target fails" "$o" '^rc=[1-9]'
  check "... with the guardrail text in git's output: ! [remote rejected] HEAD -> $target (...)" \
    grep -qF -- "! [remote rejected] HEAD -> $target ($GUARD)" <<<"$o"
  [ "$FX_LAST" = 0 ] || echo "#   git said: $(tr '\n' '|' <<<"$o" | head -c 600)"
  check_eq "... and the server's refs are unchanged" "$(refs acme/site)" "$after_feature"
done
check_audit "audit: the refused push is git-protected-branch, status 200, no credential" \
  client="$s1" reason=git-protected-branch decision=deny status=200 credential=false
check_eq "the server's main is still the fixture's" "$(fx_git_sha acme/site main)" "$SITE_MAIN"
check_eq "before the pushes the server had no feature-x" "$had" none

# --- other repositories ------------------------------------------------------------------------------
sbx_exec "$s1" "$P; git clone -q $FX_GIT_URL/pub/lib.git /tmp/pub >/tmp/out-clone-pub 2>&1; echo rc=\$?; git -C /tmp/pub rev-parse HEAD"
check_eq "git clone of the public pub/lib works" "$(sbx_field 'd["stdout"].split()')" \
  "[\"rc=0\", \"$PUB_MAIN\"]"
n=$(wc -l <"$FX_GIT_LOG")
sbx_exec "$s1" "$P; git clone -q $FX_GIT_URL/acme/secret.git /tmp/secret >/tmp/out-clone-secret 2>&1; echo rc=\$?; cat /tmp/out-clone-secret; test -d /tmp/secret/.git && echo cloned"
o=$(out)
check_match "git clone of the private acme/secret fails" "$o" '^rc=[1-9]'
check "... nothing was cloned" bash -c "! grep -q '^cloned' <<<'$o'"
check "... because the server answered 401: git wanted a user name" \
  grep -qE "could not read Username|Authentication failed" <<<"$o"
check_ge "... the server's 401 for acme/secret's info/refs, without the token" \
  "$(tail -n +"$((n + 1))" "$FX_GIT_LOG" | grep '"uri":"/acme/secret.git/info/refs' |
    grep -c '"status":401,"auth":0' || true)" 1
sbx_exec "$s1" "curl -sS --max-time 10 -D /tmp/h -o /dev/null -w '%{http_code}\\n' '$FX_GIT_URL/acme/secret.git/info/refs?service=git-upload-pack'; grep -i '^www-authenticate' /tmp/h | tr -d '\\r'"
check_eq "... as curl sees it too: the server's own 401 and challenge" \
  "$(sbx_field 'd["stdout"].strip().lower()')" \
  "$(printf '401\nwww-authenticate: basic realm="sluice test git"')"
check_eq "the server saw no request for acme/secret with the token" \
  "$(grep '"uri":"/acme/secret' "$FX_GIT_LOG" | grep -c '"auth":1' || true)" 0

# --- the token is nowhere in the container ------------------------------------------------------------
sbx_exec "$s1" "$P; GIT_TRACE_CURL=1 GIT_TRACE_REDACT=0 git ls-remote origin >/tmp/out-trace 2>&1; git fetch -v origin >/tmp/out-fetch 2>&1; echo rc=\$?; grep -c 'HTTP/1.1 200' /tmp/out-trace"
check_api "a traced ls-remote and a fetch through the proxy work" 200 'd["stdout"].split()[0]' rc=0
# search TEXT : runs the search below inside alice's sandbox for TEXT (sent as octal escapes).
search() {
  sbx_exec "$s1" "s=\$(printf '$(octal "$1")'); cd /workspace/repo
printf 'env=%s ' \$(env | grep -cF -- \"\$s\")
printf 'environ=%s ' \$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF -- \"\$s\")
printf 'config=%s ' \$({ git config --list --show-origin; git config --system --list; git config --global --list; } 2>/dev/null | grep -cF -- \"\$s\")
printf 'outputs=%s ' \$(cat /tmp/out-* | grep -cF -- \"\$s\")
f=\$(grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -- \"\$s\" / 2>/dev/null)
printf 'files=%s %s' \$(printf '%s' \"\$f\" | grep -c .) \"\$f\"" 300000
}
# The search finds what is there: the sandbox's own proxy token is in its environment, and in
# a file once the environment is copied into one.
sbx_exec "$s1" 'env >/tmp/pc-env'
search "$token"
check_match "positive control: the search finds the proxy token in env, /proc/*/environ, a file" \
  "$(sbx_field 'd["stdout"]')" '^env=[1-9][0-9]* environ=[1-9][0-9]* config=0 outputs=0 files=1 /tmp/pc-env$'
sbx_exec "$s1" 'rm /tmp/pc-env'
for secret in "$GIT_TOKEN" "$GIT_BASIC_B64"; do
  search "$secret"
  check_api "the ${secret:0:4}… value is in no env, /proc/*/environ, git config, git output, file under /" \
    200 'd["stdout"].strip()' "env=0 environ=0 config=0 outputs=0 files=0"
done
cid=$(sbx_cid "$s1" || true)
check "the token is not in the container's configuration (docker inspect)" \
  bash -c "! '$FX_PYTHON' '$FX_SUPPORT/dockerctl.py' inspect '$cid' | grep -qF -- '$GIT_TOKEN'"

# --- git's 407 challenge --------------------------------------------------------------------------------
check_audit "git's first CONNECT without proxy credentials is audited as a challenge" \
  decision=challenge reason=no-identity status=407 method=CONNECT host=git.sluice.test
check_eq "... and never as a deny" "$(fx_jsonl_count "$SBX_AUDIT" reason=no-identity decision=deny)" 0

# --- a damaged environment row ---------------------------------------------------------------------------
doc=$(ENV_HOST="a.sluice.test:$FX_PY_HTTP_PORT" IMG=$SBX_IMAGE "$FX_PYTHON" -c '
import json, os
print(json.dumps({"name": "fragile", "scope": "global", "base_image": os.environ["IMG"],
                  "network": "on", "egress": {"default": "deny",
                  "rules": [{"host": os.environ["ENV_HOST"]}]}}))')
as root POST /api/v1/environments "$doc"
check_api "a second environment, fragile" 201
fragile=$(sbx_field 'd["id"]')
declare -A ctok
for c in ci-keep:sbx ci-gone:sbx ci-fragile:fragile; do
  as root POST /api/v1/clients "{\"id\":\"${c%%:*}\",\"environment\":\"${c#*:}\",\"token\":true}"
  check_api "static client ${c%%:*} (environment ${c#*:})" 201
  ctok[${c%%:*}]=$(sbx_field 'd.get("token", "none")')
done
# static ID : a plain-HTTP request from the host through the proxy as static client ID.
static() {
  sbx_host_curl "$1" "${ctok[$1]}" "$(sbx_url_http /hello)"
  echo "$FX_CODE"
}
# shellcheck disable=SC2317 # called through fx_wait
statics_through() {
  [ "$(static ci-keep)" = 200 ] && [ "$(static ci-gone)" = 200 ] && [ "$(static ci-fragile)" = 200 ]
}
check "the static clients get through (the snapshot holds them)" fx_wait 10 statics_through
"$FX_PYTHON" - "$SBX_DATA/sluice.db" "$fragile" <<'EOF' || fx_bail "corrupt the row"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
n = db.execute("UPDATE environments SET egress_json = ? WHERE id = ?",
               ('{"default":"allow","rules":[{"host":', sys.argv[2])).rowcount
db.commit()
db.close()
sys.exit(0 if n == 1 else 1)
EOF
ok "fragile's stored egress JSON is corrupted in sluice.db while the control plane runs"
as root DELETE /api/v1/clients/ci-gone
check_api "DELETE static client ci-gone → 204 (every proxy acknowledged)" 204
check_eq "... its token gets 407 from the proxy right after" "$(static ci-gone)" 407
check_eq "the rest of the snapshot reached the proxy: ci-keep gets through" "$(static ci-keep)" 200
check_eq "... and alice's sandbox too" "$(proxy_status "$s1")" 200
in_sbx "$s1" 'cd /workspace/repo && git fetch -q origin && echo fetched'
check_api "... and its git" 200 'd["stdout"].strip()' fetched
check_eq "the damaged environment is compiled deny-all: ci-fragile gets 403" "$(static ci-fragile)" 403
as root GET /api/v1/status
check_api "/api/v1/status names fragile as damaged, compiled deny-all" 200 \
  "any(p.get('environment') == '$fragile' and p.get('name') == 'fragile' and 'damaged' in p.get('message', '') and 'deny-all' in p.get('message', '') for p in d['snapshot']['problems'])" true
check_api "... the build itself did not fail" 200 'd["snapshot"]["build_error"]' null
as root DELETE /api/v1/clients/ci-fragile
check_api "the static client of the damaged environment can be deleted" 204
as root DELETE /api/v1/environments/fragile
check_api "... and the damaged environment itself" 204

# --- a damaged repository record: its sandboxes lose their git access, nothing else -------------------
# corrupt_repo JSON : acme/site's stored protected branches become JSON (the row in sluice.db).
corrupt_repo() {
  "$FX_PYTHON" - "$SBX_DATA/sluice.db" "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
n = db.execute("UPDATE repos SET protected_json = ? WHERE name = 'acme/site'", (sys.argv[2],)).rowcount
db.commit()
db.close()
sys.exit(0 if n == 1 else 1)
EOF
}
# git_problem WANT : /api/v1/status's snapshot lists alice's sandbox as having no git access (WANT
# true) or not (false), and every proxy acknowledged that snapshot. A change's snapshot is built
# after the change is answered, so this is waited for (at most 15 s).
git_problem() {
  as root GET /api/v1/status
  [ "$(sbx_field "'%s/%s' % (any(p.get('client') == '$s1' and 'no git access' in p.get('message', '') for p in d['snapshot']['problems']), all(x['acknowledged_version'] == d['snapshot']['version'] for x in d['snapshot']['proxies']))")" = "$1/True" ]
}
corrupt_repo '["release/*",' || fx_bail "corrupt the repository row"
as root PATCH /api/v1/users/carol '{"email":"carol@example.com"}'
check_api "acme/site's protected branches corrupted in sluice.db; a change makes a new snapshot" 200
if fx_wait 15 git_problem True; then
  ok "/api/v1/status says alice's sandbox gets no git access (the snapshot every proxy took)"
else
  not_ok "/api/v1/status says alice's sandbox gets no git access (the snapshot every proxy took)"
  sbx_show
fi
in_sbx "$s1" 'true'
check_api "... its calls are refused while the record is damaged (fail closed)" 500
# The control plane refuses the sandbox's calls now, so the container is entered as an operator
# would (docker exec: the container's own environment, so git goes through the proxy as before).
n=$(wc -l <"$FX_GIT_LOG")
cid=$(sbx_cid "$s1" || true)
o=$(sbx_dockerctl exec "$cid" sh -c "cd /workspace/repo && GIT_TERMINAL_PROMPT=0 git fetch origin 2>&1; echo rc=\$?; curl -sS --max-time 10 -o /dev/null -w 'origin=%{http_code}' $(sbx_url_http /hello)" || true)
check_match "... its git fetch fails: the proxy adds no credential, the server says 401" "$o" 'rc=[1-9]'
check "... git wanted a user name" grep -qE "could not read Username|Authentication failed" <<<"$o"
check_ge "... the server's 401 for acme/site, without the token" \
  "$(tail -n +"$((n + 1))" "$FX_GIT_LOG" | grep '"uri":"/acme/site.git/info/refs' | grep -c '"status":401,"auth":0' || true)" 1
check_eq "... and no request with it" \
  "$(tail -n +"$((n + 1))" "$FX_GIT_LOG" | grep -c '"auth":1' || true)" 0
check_match "... while the sandbox keeps its entry (origin.py through the proxy: 200)" "$o" 'origin=200$'
corrupt_repo '["release/*"]' || fx_bail "repair the repository row"
as root PATCH /api/v1/users/carol '{"email":null}'
check_api "repaired; a change makes a new snapshot" 200
check "... which no longer names alice's sandbox" fx_wait 15 git_problem False
in_sbx "$s1" 'cd /workspace/repo && git fetch -q origin && echo fetched'
check_api "... and its git works again" 200 'd["stdout"].strip()' fetched

# --- alice lowered to read ---------------------------------------------------------------------------------
as root PUT "$R/members/alice" '{"role":"read"}'
check_api "alice lowered to read → 200" 200
sbx_exec "$s1" "$P; git push origin HEAD:feature-y 2>&1; echo rc=\$?"
check_api "... her own exec → 403" 403 'd.get("message")' "write access required"
before=$(refs acme/site)
in_sbx "$s1" "$P; git push origin HEAD:feature-y >/tmp/out-push-ro 2>&1; echo rc=\$?; cat /tmp/out-push-ro"
o=$(out)
check_match "her open sandbox's next git push is refused" "$o" '^rc=[1-9]'
check "... git shows the proxy's git-read-only refusal (remote: sluice: ... git-read-only ...)" \
  grep -qE "^remote: sluice: .* denied: git-read-only .*git access to the repository is read-only" \
  <<<"$o"
[ "$FX_LAST" = 0 ] || echo "#   git said: $(tr '\n' '|' <<<"$o" | head -c 600)"
check_eq "... the server's refs are unchanged" "$(refs acme/site)" "$before"
check_audit "audit: git-read-only" client="$s1" reason=git-read-only decision=deny status=403
in_sbx "$s1" 'cd /workspace/repo && git fetch -q origin && echo fetched'
check_api "... while fetch still works (read access)" 200 'd["stdout"].strip()' fetched
as root PUT "$R/members/alice" '{"role":"write"}'
check_api "alice a writer again" 200

# --- alice disabled ------------------------------------------------------------------------------------------
check_eq "positive control: her sandbox reaches origin.py through the proxy" "$(proxy_status "$s1")" 200
as root PATCH /api/v1/users/alice '{"disabled":true}'
check_api "disable alice → 200" 200 'd["disabled"]' true
check_eq "... her sandbox's proxy token gets 407 at once" "$(proxy_status "$s1")" 407
in_sbx "$s1" "$P; git fetch origin 2>&1; echo rc=\$?"
check_match "... and so does its git (the fetch fails)" "$(out)" 'rc=[1-9]'
as alice GET /api/v1/me
check_api "... her token → 401 account disabled" 401 'd.get("message")' "account disabled"
as aliceread GET /api/v1/repos
check_api "... her read-scoped token too" 401 'd.get("message")' "account disabled"
sbx_exec "$s1" 'true'
check_api "... her exec is refused" 401 'd.get("message")' "account disabled"
as root PATCH /api/v1/users/alice '{"disabled":false}'
check_api "enable alice → 200" 200
check_eq "... her sandbox's entry is back" "$(proxy_status "$s1")" 200

# --- archived --------------------------------------------------------------------------------------------------
as root PUT "$R" '{"visibility":"private","default_branch":"main","protected_branches":["release/*"],"archived":true}'
check_api "archive acme/site → 200" 200 'd["archived"]' true
sbx_exec "$s1" 'true'
check_api "archived: exec → 403" 403 'd.get("message")' "$ARCH"
sbx_create || true
check_api "archived: create → 403" 403 'd.get("message")' "$ARCH"
before=$(refs acme/site)
o=$(sbx_dockerctl exec "$cid" sh -c "cd /workspace/repo && GIT_TERMINAL_PROMPT=0 git push origin HEAD:feature-z 2>&1; echo rc=\$?; git fetch -q origin && echo fetched" || true)
check_match "archived: the open sandbox's push is refused (docker exec), git-read-only" "$o" \
  'denied: git-read-only'
check_match "... its fetch still works (read access)" "$o" 'rc=[1-9].*fetched'
check_eq "... the server's refs are unchanged" "$(refs acme/site)" "$before"
as root PUT "$R" '{"visibility":"private","default_branch":"main","protected_branches":["release/*"],"archived":false}'
check_api "unarchive → 200" 200
sbx_close "$s1" || true
check_api "close → 204" 204

sbx_shutdown_checks
check "no container of this test's network survives" fx_wait 15 sbx_no_leftovers
fx_done
