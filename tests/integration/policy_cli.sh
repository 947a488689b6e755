#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/policy_cli.sh - `sluice policy check|explain` as a person or a script uses
# them (docs/reference/cli.md §1): exit codes, the summary line, the exact error lines with their JSON paths,
# the warning lines (host patterns in upper case or with a trailing dot),
# explain's verdicts and hints, a credential value never printed, one-line usage errors.
set -euo pipefail

bin=${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}
data=${SLUICE_TEST_DATA:?SLUICE_TEST_DATA must name tests/data}/policy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source-path=SCRIPTDIR source=../support/clitest.sh
source "${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/support/clitest.sh"
cd "$data"

# run WANT_EXIT ARGS...: runs sluice, keeps stdout/stderr in $work/out and $work/err.
run() {
    local want=$1 rc=0
    shift
    "$bin" "$@" >"$work/out" 2>"$work/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "sluice $* exited $rc, want $want"
}

# usage WANT_SUBSTRING ARGS...: a usage error is exit 2, one line on stderr, nothing on stdout.
usage() {
    cli_usage 2 sluice "$@"
}

# ---- check ----

run 0 policy check valid-spec.json
[ "$(cat "$work/out")" = "valid-spec.json: valid, version 7, 2 environments, 2 clients, 4 rules, 2 credentials" ] \
    || fail "summary line of valid-spec.json"
ok "check prints the one-line summary of a valid file"

run 0 policy check valid-minimal.json
[ "$(cat "$work/out")" = "valid-minimal.json: valid, version 1, 1 environment, 0 clients, 0 rules, 0 credentials" ] \
    || fail "summary line of valid-minimal.json"
ok "check counts in the singular where it should"

run 0 policy check valid-full.json
ok "check accepts the full example"

for errors in invalid-*.errors; do
    file=${errors%.errors}.json
    run 1 policy check "$file"
    n=$(wc -l <"$errors")
    head -n "$n" "$work/out" | diff -u "$errors" - >"$work/diff" || { cat "$work/diff"; fail "errors of $file"; }
    word=errors
    [ "$n" -eq 1 ] && word=error
    [ "$(tail -n 1 "$work/out")" = "$file: invalid, $n $word" ] || fail "last line of check $file"
    [ "$(wc -l <"$work/out")" -eq $((n + 1)) ] || fail "extra output for $file"
    ok "check lists every error of $file with its JSON path, exit 1"
done

run 0 policy check valid-warnings.json
cat >"$work/want" <<'EOF'
$.environments.dev.rules[0].host: warning: host pattern "API.GITHUB.TEST" is matched as "api.github.test" (host names are matched in lower case)
$.environments.dev.rules[1].host: warning: host pattern "api.github.test." is matched as "api.github.test" (the trailing dot is dropped)
valid-warnings.json: valid, version 1, 1 environment, 0 clients, 3 rules, 0 credentials
EOF
diff -u "$work/want" "$work/out" >"$work/diff" || { cat "$work/diff"; fail "warnings of valid-warnings.json"; }
ok "check accepts a host pattern in upper case or with a trailing dot, with a warning naming its path"

run 1 policy check invalid-credentials.json
if grep -q 's3cr3t' "$work/out" "$work/err"; then fail "a credential value appears in check's errors"; fi
ok "check never prints a credential value, even one it refuses"

run 0 policy check - <valid-spec.json
[ "$(cat "$work/out")" = "-: valid, version 7, 2 environments, 2 clients, 4 rules, 2 credentials" ] \
    || fail "check from stdin"
ok "check reads standard input for -"

run 1 policy check "$work/missing.json"
[ ! -s "$work/out" ] || fail "unreadable file printed on stdout"
grep -qF "$work/missing.json" "$work/err" || fail "the message does not name the file"
ok "check names an unreadable file and exits 1"

run 1 policy check "$work"
grep -qF "$work" "$work/err" || fail "the message does not name the directory"
ok "check refuses a directory, exit 1"

truncate -s $((64 * 1024 * 1024 + 1)) "$work/huge.json"
run 1 policy check "$work/huge.json"
grep -qF "larger than 64 MiB" "$work/err" || fail "huge file message"
ok "check refuses a file over 64 MiB"

truncate -s $((64 * 1024 * 1024)) "$work/big.json"
run 1 policy check "$work/big.json"
grep -qF "invalid JSON" "$work/out" || fail "a 64 MiB file is read and parsed"
ok "check reads a file of exactly 64 MiB"

run 0 policy check --help
grep -q "usage: sluice policy check FILE" "$work/out" || fail "check --help"
ok "check --help exits 0"
run 0 policy --help
grep -q "usage: sluice policy check FILE" "$work/out" || fail "policy --help"
ok "policy --help exits 0"
run 0 policy explain --help
grep -q -- "--client ID-OR-IP" "$work/out" || fail "explain --help"
ok "explain --help exits 0"

usage "missing FILE" policy check
usage "unexpected argument 'b.json'" policy check a.json b.json
usage "unknown option '--strict'" policy check --strict valid-spec.json
usage "missing command" policy
usage "unknown command 'lint'" policy lint valid-spec.json

# ---- explain ----

explain() {
    local want=$1
    shift
    run "$want" policy explain valid-spec.json "$@"
    if grep -q -e 's3cr3t' -e 'Z2l0OnRva2Vu' -e 'pt_9c0ffee' "$work/out" "$work/err"; then
        fail "a secret appears in the output of explain $*"
    fi
}

# has LINE: stdout has exactly this line.
has() {
    grep -qxF -- "$1" "$work/out" || fail "stdout lacks the line '$1'"
}

explain 0 --client bench --url https://api.example.com:8443/v1/things
has "decision: allow"
has "reason: none"
has "request: GET https://api.example.com:8443/v1/things"
has "client: bench"
has "environment: ci-python"
has "rule: api.example.com:8443"
has "credential: Authorization header injected (value not shown)"
ok "explain allows with a credential, names its header, never its value"

explain 1 --client sb_4f2a --url https://api.github.com/repos --method POST
has "decision: deny"
has "reason: method-not-allowed"
has "rule: *.github.com"
has "credential: none"
has 'to allow it, add {"host":"api.github.com","methods":["GET","HEAD","POST"]} to environment ci-python'
ok "explain refuses a method and says what would allow it"

explain 0 --client sb_4f2a --url https://API.GitHub.com./repos?page=2
has "rule: *.github.com"
has "request: GET https://api.github.com/repos?page=2"
ok "explain normalises the URL's host and defaults the method to GET"

explain 1 --client 127.0.0.1 --url https://evil.example.com/
has "reason: host-not-allowed"
has "client: bench"
has "rule: none"
has 'to allow it, add {"host":"evil.example.com","methods":["GET"]} to environment ci-python'
ok "explain identifies a client by address (cidr) and refuses an unknown host"

explain 1 --client 0x7f.0.0.9 --url https://pkgs.example.org:8443/
has "reason: port-not-allowed"
has "client: bench"
has 'to allow it, add {"host":"pkgs.example.org:8443","methods":["GET"]} to environment ci-python'
ok "explain reads any IPv4 spelling for --client and refuses an uncovered port"

explain 1 --client sb_4f2a --url http://git.example.com/org/repo.git
has "reason: credential-needs-tls"
has "rule: git.example.com"
has "credential: not injected (request refused)"
ok "explain refuses a credential rule over plain HTTP"

explain 0 --client sb_4f2a --url https://git.example.com/org/repo.git
has "rule: git.example.com"
has "credential: Authorization header injected (value not shown)"
ok "explain applies a client's runtime rules"

explain 1 --client sb_4f2a --url https://api.example.com:8443/ --method TRACE
has "reason: method-not-allowed"
ok "explain refuses TRACE on a rule with a credential"

explain 1 --client 10.213.0.5 --url https://pkgs.example.org/
has "reason: no-identity"
has "client: none"
ok "explain does not identify a token client by its address alone"

explain 1 --client nobody --url https://pkgs.example.org/
has "reason: no-identity"
ok "explain refuses an unknown client id"

explain 0 --url https://pkgs.example.org/simple/ --method=HEAD --client=bench
has "request: HEAD https://pkgs.example.org/simple/"
ok "explain takes flags in any order, with = too"

cat >"$work/pin.json" <<'EOF'
{ "version": 1,
  "environments": { "pin": { "default": "deny", "rules": [
    { "host": "pinned.example.com", "tls": "passthrough" },
    { "host": "pkgs.example.org" } ] } },
  "clients": [ { "id": "bench", "cidr": "127.0.0.0/8", "environment": "pin" } ] }
EOF
run 0 policy explain "$work/pin.json" --client bench --url https://pinned.example.com/
has "rule: pinned.example.com"
grep -q '^tls: passthrough ' "$work/out" || fail "explain does not say passthrough"
ok "explain shows that the winning rule passes its tunnel through uninspected"
run 0 policy explain "$work/pin.json" --client bench --url https://pkgs.example.org/
has "tls: intercept"
ok "explain shows that other https requests are intercepted"
run 1 policy explain "$work/pin.json" --client bench --url http://pinned.example.com/
has "reason: not-tls"
grep -qF 'to allow it, use https: rule {"host":"pinned.example.com","tls":"passthrough"}' \
    "$work/out" || fail "explain's hint for plain HTTP under a passthrough rule"
ok "explain refuses plain HTTP under a passthrough rule (not-tls) and says to use https"

# A client's git access (docs/reference/snapshot.md §3 `git`): valid-full.json's sb_1 has acme/site
# on git.example.test:8443 under /git, access write, main and release/* and *-stable protected.
gitx() { # WANT_EXIT PATH ARGS... : explain a request of sb_1 to its git host
    local want=$1 path=$2
    shift 2
    run "$want" policy explain valid-full.json --client sb_1 --url "https://git.example.test:8443$path" "$@"
}
gitx 0 '/git/acme/site.git/info/refs?service=git-upload-pack'
has "credential: Authorization header injected (the git credential; value not shown)"
has "git: acme/site (access write): info/refs (git-upload-pack), the git credential is injected"
! grep -q '^push:' "$work/out" || fail "explain: push line for a fetch"
ok "explain: the git credential is injected on the repository's own info/refs"
gitx 0 '/git/acme/other.git/info/refs?service=git-upload-pack'
has "credential: none"
has "git: acme/site (access write): not one of its paths: forwarded without the git credential"
ok "explain: another repository on the git host goes without the credential"
for trick in '/git/acme/%73ite.git/git-upload-pack' '/git/acme/site/../site.git/git-upload-pack' \
    '/git/acme//site.git/git-upload-pack'; do
    gitx 0 "$trick" --method POST
    has "credential: none"
done
ok "explain: percent-encoded, '..' and '//' spellings of the repository get no credential"
gitx 0 /git/acme/site.git/git-receive-pack --method POST
has "git: acme/site (access write): git-receive-pack, the git credential is injected"
has "push: refused (git-protected-branch) when it updates, creates or deletes refs/heads/main or a branch matching release/* or a branch matching *-stable"
ok "explain: a push names the branches it may not touch"
gitx 0 /git/acme/site.git/git-receive-pack --method POST --push-ref refs/heads/feature-x
has "push: refs/heads/feature-x passes"
ok "explain --push-ref: a feature branch passes"
for ref in refs/heads/main refs/heads/release/1 refs/heads/v2-stable refs/heads/MAIN; do
    gitx 1 /git/acme/site.git/git-receive-pack --method POST --push-ref "$ref"
    has "decision: deny"
    has "reason: git-protected-branch"
    has "push: $ref refused: agents may not push to protected or default branches"
done
ok "explain --push-ref: the default and protected branches are refused (exit 1)"
gitx 1 /git/acme/site.git/git-upload-pack --method TRACE
has "reason: method-not-allowed"
has "TRACE is never allowed on the paths of the client's git repository (it would echo the credential)"
ok "explain: TRACE on the repository's paths is refused"
run 1 policy explain valid-full.json --client sb_1 --url http://git.example.test:8443/git/acme/site/git-upload-pack --method POST
has "reason: credential-needs-tls"
ok "explain: the git credential needs TLS"
sed 's/"access": "write"/"access": "read"/' valid-full.json >"$work/ro.json"
run 1 policy explain "$work/ro.json" --client sb_1 --url https://git.example.test:8443/git/acme/site/git-receive-pack --method POST
has "reason: git-read-only"
run 0 policy explain "$work/ro.json" --client sb_1 --url https://git.example.test:8443/git/acme/site/git-upload-pack --method POST
has "git: acme/site (access read): git-upload-pack, the git credential is injected"
ok "explain: read access refuses pushes (git-read-only) and still fetches"
! grep -q "eC1hY2Nlc3MtdG9rZW46dA" "$work/out" || fail "explain printed the git credential"
ok "explain never prints the git credential's value"

run 1 policy explain invalid-typos.json --client sb_1 --url https://a.example.com/
[ ! -s "$work/out" ] || fail "invalid policy printed a decision"
grep -qF "invalid-typos.json: invalid policy, 8 errors" "$work/err" || fail "invalid policy message"
ok "explain refuses to explain with an invalid policy, exit 1"

run 1 policy explain "$work/missing.json" --client bench --url https://a.example.com/
grep -qF "$work/missing.json" "$work/err" || fail "explain: unreadable file message"
ok "explain names an unreadable file and exits 1"

usage "--client ID-OR-IP is required" policy explain valid-spec.json --url https://a.example.com/
usage "--url URL is required" policy explain valid-spec.json --client bench
usage "missing FILE" policy explain --client bench --url https://a.example.com/
usage "unexpected argument" policy explain valid-spec.json extra --client bench --url https://a.example.com/
usage "unknown option '--verbose'" policy explain valid-spec.json --verbose --client bench --url https://a.example.com/
usage "missing value for option '--url'" policy explain valid-spec.json --client bench --url
usage "option given twice" policy explain valid-spec.json --client bench --client x --url https://a.example.com/
usage "bad --url 'ftp://a.example.com/': scheme is not http or https" policy explain valid-spec.json --client bench --url ftp://a.example.com/
usage "user information ('@') is not allowed" policy explain valid-spec.json --client bench --url http://u@a.example.com/
usage "port out of range" policy explain valid-spec.json --client bench --url http://a.example.com:70000/
usage "bad --url 'http://a..example.com/': empty label" policy explain valid-spec.json --client bench --url "http://a..example.com/"
usage "bad --method" policy explain valid-spec.json --client bench --url https://a.example.com/ --method "G T"

# The example policy that `make run` starts the proxy with must stay valid.
run 0 policy check "${SLUICE_SRC:?}/examples/policy.json"
grep -q "valid, version 1" "$work/out" || fail "examples/policy.json: summary"
ok "examples/policy.json is valid"

echo "policy_cli: $checks checks"
echo "$checks passed, 0 failed"
