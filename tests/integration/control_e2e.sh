#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/control_e2e.sh - `sluice control` driving a real `sluice proxy` in front of
# nginx (docs/reference/snapshot.md §3, docs/reference/proxy.md §4.9, docs/reference/api.md §5.1, §5.1b): policy changes reach traffic within a second, a proxy
# restarted after kill -9 gets the current policy, a stopped control plane leaves the last one in
# force, 32 concurrent API clients, bad input leaves the database unchanged, restart keeps
# everything, a corrupt database is refused and left alone, a changed or malformed encryption key.
# The checks live in control_e2e.py; this script starts nginx with tests/support/fixture.sh.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx

rc=0
SLUICE_BIN=$SLUICE_BIN FX_TLS_PORT=$FX_TLS_PORT FX_TEST_CA=$FX_TEST_CA \
  FX_NGINX_LOG=$FX_NGINX_LOG FX_WORK=$FX_WORK \
  timeout 240 python3 "$SLUICE_SRC/tests/integration/control_e2e.py" || rc=$?
exit "$rc"
