#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/dashboard_audit.sh - the dashboard's audit page (docs/reference/api.md §5.6,
# §5.7; issue 20 item 3) in real headless Chromium (tests/browser/dashboard_audit.mjs) against a
# real control plane and proxy (tests/support/dashboard.sh's setting). A static client bound to a
# global environment is refused by the proxy (three GETs and a POST to b.sluice.test, a GET to
# c.sluice.test); the page's filters (decision, host, client, time range; a bad range's error next
# to its field; kept in the hash across a reload) show only matching lines; the grouped view shows
# the three GETs as one group of count 3 with its suggested rule; root's "Add rule" previews the
# environment and the rule, applies it on confirm, the environment has the rule (API) and the same
# request through the proxy is then allowed; alice's group from her sandbox in that global
# environment has no Add button (with Docker); the page fits 390 and 1440 px with every suggested
# rule inside its card; no console errors. Screenshots go to build/test-artifacts/dashboard_audit.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/dashboard.sh
source "$SLUICE_SRC/tests/support/dashboard.sh"

# Network sl-t-daudit, its own subnet:
SUBNET=10.213.39.0/24
dash_main dashboard_audit sl-t-daudit "$SUBNET"
