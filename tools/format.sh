#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/format.sh [--check] - format (or, with --check, verify the format of) every C file.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' | grep -v '^build/' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
if [ "${1:-}" = "--check" ]; then
  clang-format --dry-run --Werror "${files[@]}"
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
