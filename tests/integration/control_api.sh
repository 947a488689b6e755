#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_api.sh - runs control_api.py (the REST API of docs/reference/api.md §5.1, §5.1b
# and §5.2 against a real `sluice control` on loopback).
set -euo pipefail

: "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
src=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
exec timeout 300 python3 "$src/tests/integration/control_api.py" "$SLUICE_BIN"
