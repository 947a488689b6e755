# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/support/clitest.sh - the checks of a test that runs one command-line program directly,
# without the fixture (tests/integration/policy_cli.sh for `sluice policy`, runner.sh for
# sluice-run): TAP-like lines, the first failure ending the test with the program's last output.
# The test sets `work` (a directory; its `out` and `err` hold the last run's stdout and stderr)
# and defines `run WANT_EXIT ARGS...`, then sources this file.
#
#   ok DESC                    prints `ok - DESC`, counts it in `checks`
#   fail DESC                  prints `not ok - DESC` and the last stdout and stderr, exit 1
#   cli_usage CODE NAME WANT_SUBSTRING ARGS...  `run CODE ARGS...` is a usage error: exit CODE,
#                              one line on stderr containing WANT_SUBSTRING, nothing on stdout
#                              (NAME: the program, for the messages)

checks=0

fail() {
    echo "not ok - $*"
    echo "--- stdout:"; cat "$work/out" 2>/dev/null || true
    echo "--- stderr:"; cat "$work/err" 2>/dev/null || true
    exit 1
}

ok() {
    checks=$((checks + 1))
    echo "ok - $*"
}

cli_usage() {
    local code=$1 name=$2 want=$3
    shift 3
    run "$code" "$@"
    [ ! -s "$work/out" ] || fail "$name $*: usage error printed on stdout"
    [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name $*: usage error is not one line"
    grep -qF -- "$want" "$work/err" || fail "$name $*: stderr lacks '$want'"
    ok "usage error exits $code with one line: $name $*"
}
