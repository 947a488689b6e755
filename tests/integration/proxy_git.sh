#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_git.sh - a client's git credential reaches one repository, and its
# pushes meet the guardrails (docs/reference/snapshot.md §3 `git`, docs/reference/proxy.md
# §4.11), with the real `git` client through `sluice proxy` to a real smart-HTTP git server
# (tests/support/gitserver.sh: nginx + git http-backend over TLS on loopback). No Docker.
#
# The server has a private repository acme/site (the client's own), a second private one
# acme/other and a public one pub/lib. The client sends no credential of its own: the proxy
# injects the server's token on acme/site's smart-HTTP and LFS paths only. Checked: clone and
# push of a branch work; pushes that update, create or delete main or release/* are refused
# with git's own report (the exact guardrail text) and never reach the server; the public clone
# works anonymously; acme/other gets the server's 401; path tricks (`..`, percent-encoding,
# `//`) get no credential; raw receive-pack bodies (the probe, side-band, chunked with
# Expect: 100-continue, malformed, over the bound, gzip) get what the contract says; access
# "read" refuses pushes with git-read-only; a token client's first request is a 407 challenge,
# audited as "challenge"; neither token is in any log.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/gitserver.sh
source "$SLUICE_SRC/tests/support/gitserver.sh"
fx_setup

guard='agents may not push to protected or default branches; open a pull request'
token=gt-$(fx_random_hex 24)
proxy_token=pt-$(fx_random_hex 24)
fx_git_server "$token" || fx_bail "the git server starts"
fx_git_repo acme/site || fx_bail "acme/site is created"
site_main=$FX_GIT_MAIN_SHA
fx_git_repo acme/other || fx_bail "acme/other is created"
fx_git_repo pub/lib || fx_bail "pub/lib is created"
fx_git_public pub/lib
basic=$(fx_git_basic)
host=git.sluice.test:$FX_GIT_PORT
url=https://$host

# policy VERSION ACCESS IDENTITY : the snapshot; IDENTITY is the client's identity members.
policy() {
  printf '{ "version": %s,
  "environments": { "dev": { "default": "deny", "rules": [] } },
  "clients": [ { "id": "sb", %s, "environment": "dev",
    "rules": [ { "host": "%s" } ],
    "git": { "host": "%s", "base_path": "", "repo": "acme/site", "access": "%s",
             "credential": { "header": "Authorization", "value": "%s" },
             "default_branch": "main", "protected_branches": ["release/*"] } } ] }\n' \
    "$1" "$3" "$host" "$host" "$2" "$basic"
}
pfile=$FX_WORK/policy.json
fx_policy "$pfile" "$(policy 1 write '"cidr": "127.0.0.0/8"')"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$pfile' >/dev/null"
fx_proxy_start --policy "$pfile" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --resolve "$host:127.0.0.1" || fx_bail "sluice proxy starts"
ok "sluice proxy starts with a git client"

# reload VERSION ACCESS IDENTITY : a new snapshot through the policy file, waited for.
reload() {
  fx_policy "$pfile" "$(policy "$@")"
  kill -HUP "$FX_PROXY_PID"
  fx_wait 10 bash -c "curl -sS --unix-socket '$FX_ADMIN_SOCK' http://localhost/v1/status |
    grep -q '\"version\":$1,'"
}

mkdir -p "$FX_WORK/home"
# gitp ARGS... : the real git client through the proxy (http.proxy), trusting the proxy's CA,
# with no credential of its own and no prompt; bounded.
gitp() {
  env -u GIT_ASKPASS -u SSH_ASKPASS GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$FX_SLUICE_CA" \
    GIT_CONFIG_NOSYSTEM=1 HOME="$FX_WORK/home" GIT_AUTHOR_NAME=agent \
    GIT_AUTHOR_EMAIL=agent@sluice.test GIT_COMMITTER_NAME=agent \
    GIT_COMMITTER_EMAIL=agent@sluice.test timeout 60 \
    git -c "http.proxy=${GITP_PROXY:-http://127.0.0.1:$FX_PROXY_PORT}" -c credential.helper= "$@"
}
# server_ref REPO REF : REF as the server has it, asked over HTTPS straight (no proxy), with the
# token; empty when it does not exist.
server_ref() {
  env -u GIT_ASKPASS GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$FX_TEST_CA" GIT_CONFIG_NOSYSTEM=1 \
    HOME="$FX_WORK/home" timeout 60 git -c "http.curloptResolve=$host:127.0.0.1" \
    -c "http.extraHeader=Authorization: $basic" ls-remote "$url/$1.git" "$2" | cut -f1
}
# posts PATH : how many POSTs the server logged whose uri contains PATH.
posts() {
  fx_jsonl_count "$FX_GIT_LOG" method=POST uri~"$1"
}

# --- the own private repository: clone with the injected credential, push a branch ------------
site=$FX_WORK/site
gitp clone -q "$url/acme/site.git" "$site" >"$FX_WORK/clone.out" 2>&1 || true
check_eq "clone of the own private repository through the proxy (the client sent no credential)" \
  "$(git -C "$site" rev-parse HEAD 2>/dev/null)" "$site_main"
check "... the server saw the smart-HTTP requests with the token" \
  fx_jsonl_has "$FX_GIT_LOG" uri~/acme/site.git/git-upload-pack auth=1 status=200
check_audit "... audited with credential true" \
  decision=allow client=sb path=/acme/site.git/git-upload-pack credential=true status=200
git -C "$site" commit -q --allow-empty -m agent-work
work=$(git -C "$site" rev-parse HEAD)
gitp -C "$site" push origin HEAD:feature-x >"$FX_WORK/push-x.out" 2>&1 || true
check_eq "git push origin HEAD:feature-x succeeds (the server has the commit)" \
  "$(server_ref acme/site refs/heads/feature-x)" "$work"
check_audit "... the push is audited allow with the credential" \
  decision=allow method=POST path=/acme/site.git/git-receive-pack credential=true status=200

# --- pushes to the default and protected branches: git's own report, nothing sent -------------
# push_refused DESCRIPTION REFSPEC... : the push fails with the guardrail text, main unchanged,
# and no POST of it reached the server but PROBES of git's probes (default 0).
push_refused() {
  local what=$1 before out=$FX_WORK/push.out
  shift
  before=$(($(posts /git-receive-pack) + ${PROBES:-0}))
  gitp -C "$site" push origin "$@" >"$out" 2>&1 && echo "# push succeeded" || true
  check "$what: git prints the guardrail text" grep -qF "$guard" "$out"
  [ "$FX_LAST" = 0 ] || sed 's/^/#   git: /' "$out"
  check "$what: git reports the ref as remote rejected" grep -q '\[remote rejected\]' "$out"
  check_eq "$what: nothing of the push reached the server" "$(posts /git-receive-pack)" "$before"
  check_eq "$what: main unchanged on the server" "$(server_ref acme/site refs/heads/main)" \
    "$site_main"
}
push_refused "push HEAD:main" HEAD:main
check_audit "... audited deny git-protected-branch, status 200, no credential" \
  decision=deny reason=git-protected-branch method=POST path=/acme/site.git/git-receive-pack \
  status=200 credential=false client=sb
push_refused "push HEAD:release/1" HEAD:release/1
check_eq "... release/1 does not exist on the server" \
  "$(server_ref acme/site refs/heads/release/1)" ""
push_refused "deleting main" :main
push_refused "push HEAD:refs/heads/MAIN (case)" HEAD:refs/heads/MAIN
push_refused "a push of feature-y and main together" HEAD:feature-y HEAD:main
check_eq "... every ref of it is rejected: feature-y was not created" \
  "$(server_ref acme/site refs/heads/feature-y)" ""
gitp -C "$site" push origin HEAD:release >"$FX_WORK/push-r.out" 2>&1 || true
check_eq "a branch named release (no '/') is not protected by release/*" \
  "$(server_ref acme/site refs/heads/release)" "$work"

# A push larger than git's http.postBuffer: git sends its probe (a body of 0000) first, then the
# pack chunked. Allowed, both reach the server; refused, the 3 MiB body is read and dropped.
head -c $((3 << 20)) /dev/urandom >"$site/big.bin"
git -C "$site" add big.bin
git -C "$site" commit -q -m big
big=$(git -C "$site" rev-parse HEAD)
PROBES=1 push_refused "a 3 MiB push to main (its probe passes, then its chunked pack)" HEAD:main
check_audit "... the refused pack's body was read and dropped (audited once drained)" \
  decision=deny reason=git-protected-branch status=200 bytes_up=0
before=$(posts /acme/site.git/git-receive-pack)
gitp -C "$site" push origin HEAD:feature-big >"$FX_WORK/push-big.out" 2>&1 || true
check_eq "a 3 MiB push of a branch succeeds (probe, then chunked)" \
  "$(server_ref acme/site refs/heads/feature-big)" "$big"
check_eq "... the server saw its probe and its pack: two POSTs" \
  "$(posts /acme/site.git/git-receive-pack)" "$((before + 2))"
sleep 1 # the audit writer's batch
check_ge "... the pack went up whole: its audit line's bytes_up is over 3 MiB" \
  "$("$FX_PYTHON" -c 'import json, sys
print(max([json.loads(l).get("bytes_up", 0) for l in open(sys.argv[1])
           if "git-receive-pack" in l and "\"allow\"" in l] + [0]))' "$FX_AUDIT")" $((3 << 20))

# --- other repositories on the git host get no credential --------------------------------------
gitp clone -q "$url/pub/lib.git" "$FX_WORK/lib" >"$FX_WORK/clone-pub.out" 2>&1 || true
check_eq "clone of a public repository works (anonymously)" \
  "$(git -C "$FX_WORK/lib" rev-parse HEAD 2>/dev/null)" "$(fx_git_sha pub/lib main)"
check_eq "... the server saw no token for it" \
  "$(fx_jsonl_count "$FX_GIT_LOG" uri~/pub/lib auth=1)" 0
rc=0
gitp clone -q "$url/acme/other.git" "$FX_WORK/other" >"$FX_WORK/clone-other.out" 2>&1 || rc=$?
check "clone of the second private repository fails" test "$rc" != 0 -a ! -d "$FX_WORK/other/.git"
check "... with the server's 401 (git: Authentication failed / could not read Username)" \
  grep -qE 'Authentication failed|could not read Username' "$FX_WORK/clone-other.out"
check "... the server answered 401 to a request without the token" \
  fx_jsonl_has "$FX_GIT_LOG" uri~/acme/other.git/info/refs status=401 auth=0
check_audit "... audited allow, credential false" \
  decision=allow path=/acme/other.git/info/refs credential=false status=401

# --- path tricks: curl sends them as written; the server decodes and normalises ----------------
trick() { # DESCRIPTION PATH : the server saw PATH without the token and answered 401
  fx_curl --path-as-is "$url$2"
  check_status "$1: the server's own 401" 401 -
  check "$1: the server saw it without the token" \
    fx_jsonl_has "$FX_GIT_LOG" uri="$2" auth=0 status=401
}
fx_curl "$url/acme/site.git/info/refs?service=git-upload-pack"
check_status "curl: own info/refs gets 200 (the credential is injected)" 200 -
trick "a '..' segment" "/acme/site/../other/info/refs?service=git-upload-pack"
trick "a percent-encoded name (%73ite)" "/acme/%73ite.git/info/refs?service=git-upload-pack"
trick "an empty segment (//)" "/acme//site.git/info/refs?service=git-upload-pack"
trick "a '.' segment" "/acme/./site.git/info/refs?service=git-upload-pack"
trick "another service query" "/acme/site.git/info/refs?service=git-upload-pack&x=1"
fx_curl -H "Authorization: $basic" "$url/acme/other.git/info/refs?service=git-upload-pack"
check_status "the client's own Authorization passes untouched on another repository" 200 -
fx_curl -H "Authorization: Basic $(printf 'x-access-token:wrong' | base64 -w0)" \
  "$url/acme/site.git/info/refs?service=git-upload-pack"
check_status "on the own repository a client's Authorization is replaced by the credential" 200 -

# --- Git LFS paths -------------------------------------------------------------------------------
lfs() { # DESCRIPTION AUTH ARGS... : the server saw the LFS request with auth AUTH
  local what=$1 want=$2 before
  shift 2
  before=$(fx_jsonl_count "$FX_GIT_LOG" uri~/info/lfs/ auth="$want")
  fx_curl "$@"
  check_eq "$what" "$(fx_jsonl_count "$FX_GIT_LOG" uri~/info/lfs/ auth="$want")" "$((before + 1))"
}
lfs "LFS batch (POST) on the own repository carries the credential" 1 -X POST \
  -H 'Content-Type: application/vnd.git-lfs+json' --data '{"operation":"download","objects":[]}' \
  "$url/acme/site.git/info/lfs/objects/batch"
lfs "LFS upload (PUT) on the own repository carries it under write access" 1 -X PUT \
  --data-binary x "$url/acme/site.git/info/lfs/objects/0123abcd"
lfs "LFS on another repository does not" 0 -X POST --data '{}' \
  "$url/acme/other.git/info/lfs/objects/batch"

# --- raw receive-pack bodies ---------------------------------------------------------------------
z=0000000000000000000000000000000000000000
# body FILE LINE... : pkt-lines of the LINEs (python escapes: \0 and \n), a flush, then "PACK".
body() {
  "$FX_PYTHON" - "$@" <<'PY'
import sys
out = b""
for line in sys.argv[2:]:
    data = line.encode().decode("unicode_escape").encode("latin-1")
    out += b"%04x" % (len(data) + 4) + data
open(sys.argv[1], "wb").write(out + b"0000PACK-not-read")
PY
}
# report FILE BAND REF... : the receive-pack result git expects for REFs all rejected with the
# guardrail text: report-status pkt-lines and a flush, in side-band channel 1 packets and a
# flush when BAND is 1; written by hand here, from gitprotocol-pack(5).
report() {
  "$FX_PYTHON" - "$guard" "$@" <<'PY'
import sys
guard, path, band, refs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
pkt = lambda d: b"%04x" % (len(d) + 4) + d
rs = pkt(b"unpack ok\n") + b"".join(pkt(b"ng %s %s\n" % (r.encode(), guard.encode())) for r in refs)
rs += b"0000"
open(path, "wb").write(pkt(b"\x01" + rs) + b"0000" if band == "1" else rs)
PY
}
rp() { # BODYFILE CURLARGS... : POST it to the own git-receive-pack
  local body=$1
  shift
  fx_curl -X POST -H 'Content-Type: application/x-git-receive-pack-request' \
    --data-binary "@$body" "$@" "$url/acme/site.git/git-receive-pack"
}
printf '0000' >"$FX_WORK/probe"
before=$(posts /acme/site.git/git-receive-pack)
rp "$FX_WORK/probe"
check_status "git's probe (a body of 0000) passes" 200 -
check_eq "... and reaches the server" "$(posts /acme/site.git/git-receive-pack)" \
  "$((before + 1))"
rp "$FX_WORK/probe" -H 'Expect: 100-continue' -H 'Transfer-Encoding: chunked'
check_status "the probe chunked with Expect: 100-continue passes" 200 -
check "... curl got 100 Continue before the server's 200" grep -q '^HTTP/1.1 100' "$FX_HDRS"
before=$((before + 1))
body "$FX_WORK/sb" "$z $work refs/heads/main\\0report-status side-band-64k agent=t\\n"
rp "$FX_WORK/sb" -H 'Expect: 100-continue' -H 'Transfer-Encoding: chunked'
check_status "a raw push to main (chunked, Expect: 100-continue) is answered 200" 200 \
  git-protected-branch
check_eq "... Content-Type application/x-git-receive-pack-result" \
  "$(fx_header Content-Type)" application/x-git-receive-pack-result
report "$FX_WORK/want-sb" 1 refs/heads/main
check "... its body is report-status in side-band channel 1, then a flush (byte for byte)" \
  cmp "$FX_BODY" "$FX_WORK/want-sb"
check "... curl got the proxy's 100 Continue" grep -q '^HTTP/1.1 100' "$FX_HDRS"
body "$FX_WORK/nb" "$z $work refs/heads/release/7\\0report-status\\n"
rp "$FX_WORK/nb"
report "$FX_WORK/want-nb" 0 refs/heads/release/7
check "without side-band: plain report-status lines (byte for byte)" cmp "$FX_BODY" \
  "$FX_WORK/want-nb"
# A refused push drains its body and the connection goes on: a request pipelined after it is
# answered by the server.
raw=$("$FX_PYTHON" - "$z $work" "$host" <<'PY'
import sys
cmd = (sys.argv[1] + " refs/heads/main\0report-status\n").encode()
body = b"%04x" % (len(cmd) + 4) + cmd + b"0000" + b"PACK" + b"x" * 40000
head = "POST /acme/site.git/git-receive-pack HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
req = (head % (sys.argv[2], len(body))).encode() + body
req += ("GET /acme/site.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: %s\r\n\r\n"
        % sys.argv[2]).encode()
print(req.decode("latin-1").encode("unicode_escape").decode())
PY
)
check_eq "a refused push, then a request pipelined on its connection: both answered" \
  "$(fx_pc --connect "$host" --raw "$raw" --responses 2 | grep -o 'status=[0-9]* reason=[a-z-]*' |
    tr '\n' ' ')" "status=200 reason=git-protected-branch status=200 reason=- "
body "$FX_WORK/nocaps" "$z $work refs/heads/main\\n"
rp "$FX_WORK/nocaps"
check_status "a push to main that asked no report-status: 403 git-protected-branch" 403 \
  git-protected-branch
printf 'zzzz' >"$FX_WORK/bad"
rp "$FX_WORK/bad"
check_status "a malformed command list: 400 git-bad-push" 400 git-bad-push
mapfile -t many < <(for ((i = 0; i < 1100; i++)); do echo "$z $work refs/heads/b$i\\n"; done)
body "$FX_WORK/big" "$z $work refs/heads/x\\0report-status\\n" "${many[@]}"
rp "$FX_WORK/big"
check_status "a command list over the bound: 400 git-bad-push" 400 git-bad-push
gzip -c "$FX_WORK/probe" >"$FX_WORK/probe.gz"
rp "$FX_WORK/probe.gz" -H 'Content-Encoding: gzip'
check_status "a gzip body: 400 git-bad-push" 400 git-bad-push
check_eq "none of the refused raw pushes reached the server" \
  "$(posts /acme/site.git/git-receive-pack)" "$((before + 1))"

# --- access "read": pushes refused by the proxy --------------------------------------------------
reload 2 read '"cidr": "127.0.0.0/8"' || fx_bail "the read-only policy is loaded"
git -C "$site" commit -q --allow-empty -m more-work
gitp -C "$site" push origin HEAD:feature-z >"$FX_WORK/push-ro.out" 2>&1 || true
check "read access: the push fails, git shows git-read-only" \
  grep -q 'git-read-only' "$FX_WORK/push-ro.out"
[ "$FX_LAST" = 0 ] || sed 's/^/#   git: /' "$FX_WORK/push-ro.out"
check "... and says the git access is read-only" \
  grep -q "git access to the repository is read-only" "$FX_WORK/push-ro.out"
check_eq "... feature-z was not created" "$(server_ref acme/site refs/heads/feature-z)" ""
check_audit "... audited deny git-read-only" \
  decision=deny reason=git-read-only path=/acme/site.git/info/refs policy_version=2
rp "$FX_WORK/probe"
check_status "read access: POST git-receive-pack is 403 git-read-only" 403 git-read-only
rc=0
gitp -C "$site" fetch -q origin >"$FX_WORK/fetch-ro.out" 2>&1 || rc=$?
check_eq "read access: fetching still works" "$rc" 0
lfs "read access: LFS batch still carries the credential" 1 -X POST --data '{}' \
  "$url/acme/site.git/info/lfs/objects/batch"
fx_curl -X PUT --data-binary x "$url/acme/site.git/info/lfs/objects/0123abcd"
check_status "read access: an LFS upload is 403 git-read-only" 403 git-read-only

# --- a token client: git's first request is a 407 challenge, audited as such -------------------
reload 3 write "\"token\": \"$proxy_token\"" || fx_bail "the token policy is loaded"
GITP_PROXY=http://sb:$proxy_token@127.0.0.1:$FX_PROXY_PORT gitp clone -q "$url/acme/site.git" \
  "$FX_WORK/site2" >"$FX_WORK/clone-tok.out" 2>&1 || true
check_eq "token client: the clone works" "$(git -C "$FX_WORK/site2" rev-parse HEAD 2>/dev/null)" \
  "$(server_ref acme/site refs/heads/main)"
check_audit "token client: git's first CONNECT is audited as a challenge (407, no-identity)" \
  decision=challenge reason=no-identity method=CONNECT status=407 policy_version=3
check_eq "... and no 407 of it is audited as a denial" \
  "$(fx_jsonl_count "$FX_AUDIT" decision=deny reason=no-identity)" 0
fx_curl --proxy-user "sb:wrong-$proxy_token" "$url/acme/site.git/info/refs?service=git-upload-pack"
check_status "token client: a wrong token is 407" 407 no-identity
check_audit "... audited deny (not a challenge)" decision=deny reason=no-identity status=407
fx_admin GET /metrics
check_match "metrics count the challenges apart" "$(cat "$FX_ADMIN_BODY")" \
  'sluice_requests_total\{decision="challenge",reason="no-identity"\} [1-9]'
check_match "... and the wrong token as a denial" "$(cat "$FX_ADMIN_BODY")" \
  'sluice_requests_total\{decision="deny",reason="no-identity"\} 1'

sleep 1 # the audit writer's batch
check "neither the git token nor the proxy token is in the audit log or the proxy's log" \
  fx_absent "$token" "$FX_AUDIT" "$FX_PROXY_LOG" "$FX_WORK/proxy$FX_PROXY_N.stdout"
check "... nor the proxy token" fx_absent "$proxy_token" "$FX_AUDIT" "$FX_PROXY_LOG"
check "... nor the git credential's Basic value" fx_absent "${basic#Basic }" "$FX_AUDIT" \
  "$FX_PROXY_LOG"
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop

fx_done
