#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_access.sh - runs control_access.py: who may do what (users, token
# scopes and expiry, repositories and roles, the checks of sandboxes and jobs, the content type
# of writes) against a real `sluice control` pushing to two real `sluice proxy` admin sockets;
# changes that remove access wait for both proxies or answer 503 naming the one that is down; a
# damaged database row is reported and never holds a revocation back.
set -euo pipefail

: "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
src=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
exec timeout 300 python3 "$src/tests/integration/control_access.py" "$SLUICE_BIN"
