#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/support/run_integration.sh SCRIPT LIMIT - how CTest runs an integration test: SCRIPT's output
# (stdout and stderr) is held in a file and printed when it ends, after a summary of its failed
# checks when it failed. A long test's first lines are what a truncated report shows (CTest's
# --output-on-failure, a CI page cut to its head and tail), and its `not ok` lines were often
# hundreds of lines further down. SCRIPT runs for at most LIMIT seconds, which
# tests/CMakeLists.txt sets below the test's CTest TIMEOUT, so that its output is printed even
# when it hangs: CTest kills a test that overruns without a word of what it printed.
#
# SLUICE_TEST_LIVE=1 runs SCRIPT directly instead, its output as it comes (ctest -V by hand).
# SLUICE_TEST_LIMIT, when set, replaces LIMIT.
set -uo pipefail

script=${1:?usage: run_integration.sh SCRIPT LIMIT}
if [ "${SLUICE_TEST_LIVE:-0}" = 1 ]; then
  exec bash "$script"
fi
limit=${SLUICE_TEST_LIMIT:-${2:?usage: run_integration.sh SCRIPT LIMIT}}
out=$(mktemp "${TMPDIR:-/tmp}/sluice-test-out-XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

# SIGTERM first so the script's EXIT trap stops what it started; SIGKILL 20 s later.
timeout -k 20 "$limit" bash "$script" >"$out" 2>&1
rc=$?

if [ "$rc" != 0 ]; then
  echo "# ---- $(basename "$script") failed (exit $rc); its failed checks, then its whole output ----"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "# it did not end within ${limit} s and was stopped"
  fi
  # Each `not ok` line with the diagnostic lines (`#`, indented) right after it, at most 60
  # lines in all; lines that are not TAP (an error from bash, a sanitizer's report) are in the
  # whole output below.
  awk '
    shown >= 60 { exit }
    /^not ok/ { keep = 1; n = 0; print; shown++; next }
    keep && (/^#/ || /^[ \t]/) && n < 8 { print; n++; shown++; next }
    { keep = 0 }
  ' "$out"
  if ! grep -q '^not ok' "$out"; then
    echo "# no check failed: the script itself exited $rc (see the end of its output)"
  fi
  echo "# ---- the whole output ----"
fi
cat "$out"
exit "$rc"
