#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/dashboard_jobs.sh - the dashboard's Jobs page (docs/reference/api.md §5.5, §5.6;
# control/web/dashboard/jobs.js) in real headless Chromium (tests/browser/dashboard_jobs.mjs),
# against a real `sluice control` with its Docker network and a real `sluice proxy`. As root and
# as alice: the composer's repositories with their default branch as the ref and, resolving per
# repository, what each gets and why; a bad ref's 422 next to that repository's ref; a batch over
# two repositories run in real sandboxes, its stdout, stderr and exit code 3 shown from the
# polled list; a job in a chosen environment that records it; a schedule `30 2 * * MON-FRI`
# previewed in words with its next 5 runs (weekdays at 02:30 UTC) before saving, listed,
# disabled and enabled from the list, deleted; a bad cron's day-of-week message next to the cron
# field before saving; no sideways scroll at 390 px; no console errors. The setting is
# tests/support/dashboard.sh's; screenshots go to build/test-artifacts/dashboard_jobs. Without
# Docker the sandbox steps print `# skip`.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/dashboard.sh
source "$SLUICE_SRC/tests/support/dashboard.sh"

# Network sl-t-djobs, its own subnet:
SUBNET=10.213.38.0/24
dash_main dashboard_jobs sl-t-djobs "$SUBNET"
