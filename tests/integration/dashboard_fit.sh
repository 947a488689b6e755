#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/dashboard_fit.sh - the dashboard (docs/reference/api.md §5.6) fits every screen
# and passes an accessibility checker, in real headless Chromium (tests/browser/dashboard_fit.mjs)
# against a real `sluice control` and `sluice proxy` (tests/support/dashboard.sh's setting). At
# 390x844 and 1440x900, as root and as alice: every tab of the nav shown in turn, and the
# environment drawer open, each screenshotted, none wider than the screen, every tab and Sign out
# reachable and clickable, and axe-core (tests/browser/node_modules) finding no serious or
# critical violation; the drawer takes the focus and gives it back when Escape closes it. Then
# the environment form: CPUs and memory Default or Custom (1.5 CPUs and 2 GiB reach the API as
# 1.5 and "2GiB", "1024MiB" comes back as 1 GiB, 1.5 GiB goes as "1536MiB", Default sends null),
# a Custom left empty and the API's 422 on memory next to their inputs, and the egress section
# hidden while the network is off, its default and rules still there when it is on again; a
# credential's placeholder variable kept when the form saves.
# Screenshots go to build/test-artifacts/dashboard_fit. Without Docker everything runs (no
# sandbox step here).
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/dashboard.sh
source "$SLUICE_SRC/tests/support/dashboard.sh"

# Network sl-t-dfit, its own subnet:
SUBNET=10.213.42.0/24
dash_main dashboard_fit sl-t-dfit "$SUBNET"
