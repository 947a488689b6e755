#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_learn.sh - learn mode end to end without containers
# (docs/reference/api.md §5.1 observe and suggestions): a static client in a global environment
# with default deny, observe, the suggestions from the audit log, applying them, the end of
# observe explicit and by its deadline. The checks live in control_learn.py; this script starts
# nginx with tests/support/fixture.sh (it serves any name pinned to it with --resolve).
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx

rc=0
SLUICE_BIN=$SLUICE_BIN FX_TLS_PORT=$FX_TLS_PORT FX_TEST_CA=$FX_TEST_CA FX_WORK=$FX_WORK \
  timeout 300 python3 "$SLUICE_SRC/tests/integration/control_learn.py" || rc=$?
exit "$rc"
