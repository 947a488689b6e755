#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/dashboard.sh - the dashboard (docs/reference/api.md §5.6) in real headless Chromium, driven
# by playwright-core (tests/browser/dashboard.mjs), against a real `sluice control` with its
# Docker network and a real `sluice proxy` on its gateway (tests/support/sandbox.sh), origin.py
# behind the proxy as a.sluice.test and b.sluice.test, users root (admin) and alice. The browser
# signs in, creates and edits an environment with a secret and a credential, checks the masks,
# the non-admin view, resolution, the audit tail of a refused request, an API validation error
# next to its field, and closes a sandbox; the script checks the stored secret and credential
# through the API, a sandbox and the proxy. Then the pages of issue 16: Users (create a user,
# his token shown once and working, a taken name and a bad email next to their fields, edit
# email and admin flag, the last admin kept, disable → 401 account disabled, enable), Tokens (a
# read-scoped token with an expiry, shown once; it reads but cannot write, through the API and
# signed in to the page; a bad expiry next to its field; revoked → 401), Repositories (a bad
# glob next to its field, register with protected branches, members added, changed, an unknown
# user next to its field, archived → 403 for a sandbox; alice, an admin of it, manages its
# members but not its settings, and only views those of a repository she writes to). Learn mode
# (issue 18): root puts the environment in observe from its row (the mark with the deadline), a
# refused host (c.sluice.test) is let out and its audit line marked observed, the suggestions
# drawer proposes the rules (wildcards on request), Apply adds only the ticked one, Stop observing
# refuses again what no rule allows; alice gets no learn actions on global environments.
# The setting (control plane, proxy, origin, users, Chromium) is tests/support/dashboard.sh's;
# screenshots go to build/test-artifacts/dashboard. Without Docker, all but the sandbox steps run.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/dashboard.sh
source "$SLUICE_SRC/tests/support/dashboard.sh"

# Network sl-t-dash, its own subnet:
SUBNET=10.213.23.0/24
dash_main dashboard sl-t-dash "$SUBNET"
