#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/checksrc.sh - the source rules of docs/style.md §5 and §11 that no compiler flag enforces:
# banned calls, direct malloc/free outside base/mem, stderr outside base/log, // comments,
# TODO without an issue number; and one rule of the tests: every Docker-using integration test
# has a network name and a 10.213.N.0/24 subnet of its own (tests/support/README.md), since
# CTest runs them side by side. Prints each offence as file:line: rule, exits 1 if any.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' | grep -v '^build/' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
bad=0
report() { echo "$1: $2"; bad=1; }
for f in "${files[@]}"; do
  # Strip string literals and comments before looking for calls, so that a message that names
  # a banned function is not an offence.
  code=$(sed -E 's/"([^"\\]|\\.)*"/""/g' "$f")
  while IFS=: read -r line text; do
    report "$f:$line" "banned call: $(echo "$text" | grep -oE '\b(sprintf|strcpy|strcat|strncpy|strtok|gets|atoi|atol|alloca)\s*\(' | head -1)"
  done < <(echo "$code" | grep -nE '(^|[^_a-zA-Z0-9.>])(sprintf|strcpy|strcat|strncpy|strtok|gets|atoi|atol|alloca)\s*\(' | grep -vE '^\s*[0-9]+:\s*(/\*|\*)')
  case "$f" in
  base/mem.c) ;;
  *)
    while IFS=: read -r line _; do
      report "$f:$line" "direct malloc/calloc/realloc/free (use sl_malloc and friends)"
    done < <(echo "$code" | grep -nE '(^|[^_a-zA-Z0-9.>])(malloc|calloc|realloc|free)\s*\(' | grep -vE '^\s*[0-9]+:\s*(/\*|\*)')
    ;;
  esac
  case "$f" in
  base/log.c) ;;
  *)
    while IFS=: read -r line _; do
      report "$f:$line" "stderr outside base/log (use sl_log or sl_eprintf)"
    done < <(echo "$code" | grep -nE '\bstderr\b')
    ;;
  esac
  while IFS=: read -r line _; do
    report "$f:$line" "// comment (use /* */)"
  done < <(echo "$code" | grep -nE '(^|[^:"])//' )
  while IFS=: read -r line _; do
    report "$f:$line" "TODO without an issue number (write TODO(#N))"
  done < <(grep -nE 'TODO' "$f" | grep -vE 'TODO\(#[0-9]+\)')
done
# The sandbox tests' networks: `sbx_setup NAME N` (and a script's own SUBNET=10.213.N.0/24).
declare -A seen_n=() seen_name=()
while IFS=: read -r f line name n; do
  if [ -n "${seen_n[$n]:-}" ]; then
    report "$f:$line" "subnet 10.213.$n.0/24 is also ${seen_n[$n]}'s (take a free N)"
  fi
  if [ -n "${seen_name[$name]:-}" ]; then
    report "$f:$line" "network $name is also ${seen_name[$name]}'s"
  fi
  seen_n[$n]=$f
  seen_name[$name]=$f
done < <(git grep -nE '^\s*(sbx_setup [a-z0-9-]+ [0-9]+|SUBNET=10\.213\.[0-9]+\.0/24)' -- 'tests/integration/*.sh' |
  sed -nE 's/^([^:]+):([0-9]+):\s*sbx_setup ([a-z0-9-]+) ([0-9]+).*/\1:\2:\3:\4/p; s/^([^:]+):([0-9]+):\s*SUBNET=10\.213\.([0-9]+)\.0\/24.*/\1:\2:\1:\3/p')
if [ $bad -eq 0 ]; then
  echo "checksrc: ${#files[@]} files clean"
fi
exit $bad
