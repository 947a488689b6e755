#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/ca_cli.sh - `sluice ca init|show|mint` as a user runs them: files and modes,
# refusal to overwrite, --force, the PEM that `ca show` prints, usage errors and exit codes.
set -euo pipefail

bin=${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}
work=$(mktemp -d /tmp/sluice-ca-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT

failures=0
ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; failures=$((failures + 1)); }
check() { # check DESCRIPTION COMMAND... : passes when the command succeeds
  local what=$1
  shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# run EXPECTED_STATUS ARGS...: runs sluice with stdout/stderr in $work/out and $work/err, and
# reports whether it exited with EXPECTED_STATUS.
run() {
  local want=$1 got=0
  shift
  "$bin" "$@" >"$work/out" 2>"$work/err" || got=$?
  if [ "$got" -ne "$want" ]; then
    echo "# sluice $*: exit $got, expected $want; stderr:" >&2
    sed 's/^/#   /' "$work/err" >&2
    return 1
  fi
}

lines() { wc -l <"$1" | tr -d ' '; }
mode() { stat -c '%a' "$1"; }

dir="$work/data"

check "ca init --out DIR succeeds" run 0 ca init --out "$dir"
check "ca init reports where it wrote the certificate" grep -qF "$dir/ca.pem" "$work/out"
check "ca init reports where it wrote the key" grep -qF "$dir/ca.key" "$work/out"
check "ca init creates DIR with mode 0700" test "$(mode "$dir")" = 700
check "ca.pem has mode 0644" test "$(mode "$dir/ca.pem")" = 644
check "ca.key has mode 0600" test "$(mode "$dir/ca.key")" = 600
check "ca.key is a private key" grep -q 'BEGIN PRIVATE KEY' "$dir/ca.key"
check "ca init leaves no temporary file" test "$(find "$dir" -mindepth 1 | wc -l)" -eq 2

cp "$dir/ca.pem" "$work/first.pem"
check "a second ca init fails with exit 1" run 1 ca init --out "$dir"
check "the refusal is one line naming the file" \
  test "$(lines "$work/err")" = 1 -a -n "$(grep -F "$dir/ca.pem" "$work/err")"
check "the refusal leaves the CA untouched" cmp -s "$dir/ca.pem" "$work/first.pem"

rm "$dir/ca.pem"
check "ca init refuses when only ca.key exists" run 1 ca init --out "$dir"
check "that refusal names ca.key" grep -qF "$dir/ca.key" "$work/err"
cp "$work/first.pem" "$dir/ca.pem"

check "ca init --force replaces the CA" run 0 ca init --out "$dir" --force
check "the replaced certificate differs" bash -c "! cmp -s '$dir/ca.pem' '$work/first.pem'"
check "modes survive --force" test "$(mode "$dir/ca.pem")$(mode "$dir/ca.key")" = 644600

check "ca show --data DIR succeeds" run 0 ca show --data "$dir"
check "ca show prints exactly ca.pem" cmp -s "$work/out" "$dir/ca.pem"
cp "$work/out" "$work/shown.pem"
check "openssl parses the shown PEM" \
  bash -c "openssl x509 -noout -text -in '$work/shown.pem' >'$work/text'"
check "the CA is CA:TRUE, pathlen:0" grep -q 'CA:TRUE, pathlen:0' "$work/text"
check "basicConstraints is critical" grep -q 'Basic Constraints: critical' "$work/text"
check "the key usage is Certificate Sign, CRL Sign" grep -q 'Certificate Sign, CRL Sign' "$work/text"
check "the subject names sluice" grep -q 'Subject: O = sluice, CN = sluice interception CA ' \
  "$work/text"
check "the key is ECDSA P-256" grep -q 'NIST CURVE: P-256' "$work/text"
check "the key matches the certificate" bash -c \
  "cmp -s <(openssl x509 -noout -pubkey -in '$dir/ca.pem') <(openssl pkey -pubout -in '$dir/ca.key')"

check "SLUICE_DATA is the default directory" \
  bash -c "SLUICE_DATA='$work/env' '$bin' ca init >/dev/null && test -f '$work/env/ca.key' &&
           SLUICE_DATA='$work/env' '$bin' ca show | cmp -s - '$work/env/ca.pem'"
check "./var is the default without SLUICE_DATA" \
  bash -c "cd '$work' && env -u SLUICE_DATA '$bin' ca init >/dev/null && test -f var/ca.pem"

for args in "ca --help" "ca init --help" "ca show --help" "ca mint --help" "ca init -h"; do
  # shellcheck disable=SC2086
  check "sluice $args prints usage and exits 0" run 0 $args
  check "sluice $args output starts with usage" grep -q '^usage: sluice ca' "$work/out"
done
check "sluice --help lists ca mint, as sluice ca --help does" \
  bash -c "'$bin' --help | grep -q '^  ca mint HOST \[--data DIR\] '"

check "ca init --bogus exits 2" run 2 ca init --bogus
check "ca init --bogus prints one line naming the option" \
  test "$(lines "$work/err")" = 1 -a -n "$(grep -F "'--bogus'" "$work/err")" -a ! -s "$work/out"
check "ca bogus exits 2" run 2 ca bogus
check "ca bogus prints one line naming the command" \
  test "$(lines "$work/err")" = 1 -a -n "$(grep -F "'bogus'" "$work/err")"
check "ca init --out without a value exits 2" run 2 ca init --out
check "the missing value is named on one line" \
  test "$(lines "$work/err")" = 1 -a -n "$(grep -F -- "--out" "$work/err")"
check "ca show --data without a value exits 2" run 2 ca show --data
check "ca without a command exits 2" run 2 ca
check "ca show --nope exits 2" run 2 ca show --nope

check "ca show --data /nonexistent exits 1" run 1 ca show --data /nonexistent
check "that failure names the path on one line" \
  test "$(lines "$work/err")" = 1 -a -n "$(grep -F /nonexistent/ca.pem "$work/err")"
echo "not a certificate" >"$work/bad.pem"
mkdir "$work/bad" && cp "$work/bad.pem" "$work/bad/ca.pem"
check "ca show of a malformed ca.pem exits 1" run 1 ca show --data "$work/bad"
check "that failure names the file" grep -qF "$work/bad/ca.pem" "$work/err"

# ca mint: the leaf the proxy would show, verified the way a client verifies it.
check "ca mint HOST prints a leaf" run 0 ca mint api.sluice.test --data "$dir"
cp "$work/out" "$work/leaf.pem"
check "openssl verify accepts the leaf for its host" \
  bash -c "openssl verify -CAfile '$dir/ca.pem' -verify_hostname api.sluice.test '$work/leaf.pem' >/dev/null"
check "openssl verify refuses the leaf for another host" \
  bash -c "! openssl verify -CAfile '$dir/ca.pem' -verify_hostname other.sluice.test '$work/leaf.pem' >/dev/null 2>&1"
check "ca mint normalises the host (API.Sluice.TEST.)" run 0 ca mint API.Sluice.TEST. --data "$dir"
check "the normalised leaf names api.sluice.test" \
  bash -c "openssl x509 -noout -ext subjectAltName -in '$work/out' | grep -q 'DNS:api.sluice.test'"
check "ca mint of an IPv6 literal names the address" run 0 ca mint '[::1]' --data "$dir"
check "the IPv6 leaf verifies for ::1" \
  bash -c "openssl verify -CAfile '$dir/ca.pem' -verify_ip ::1 '$work/out' >/dev/null"
check "ca mint never prints a private key" bash -c "! grep -q PRIVATE '$work/out'"
check "ca mint of a bad host exits 2" run 2 ca mint 'a b.example' --data "$dir"
check "ca mint without HOST exits 2" run 2 ca mint --data "$dir"
check "ca mint without the CA key exits 1" run 1 ca mint x.sluice.test --data "$work/bad"

if [ "$failures" -ne 0 ]; then
  echo "# $failures check(s) failed"
  exit 1
fi
