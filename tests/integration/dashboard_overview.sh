#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/dashboard_overview.sh - the dashboard's Overview tab and sandbox detail view
# (docs/reference/api.md §5.6, §5.7 GET /api/v1/overview, §5.3) in real headless Chromium
# (tests/browser/dashboard_overview.mjs) against a real `sluice control` and `sluice proxy`
# (tests/support/dashboard.sh). The overview shows the proxy with the newest snapshot acknowledged
# and healthy, a static client's allowed and refused requests in the chart's current minute and
# its summary text, and the open sandboxes count; a sandbox opened from the Sandboxes list runs
# commands in its console (stdout, stderr, exit code, a time limit that stops one) and lists the
# decisions of its own requests; neither view scrolls sideways at 390 px. Without Docker, all but
# the sandbox steps run. Screenshots go to build/test-artifacts/dashboard_overview.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/dashboard.sh
source "$SLUICE_SRC/tests/support/dashboard.sh"

# Network sl-t-dover, its own subnet:
SUBNET=10.213.40.0/24
dash_main dashboard_overview sl-t-dover "$SUBNET"
