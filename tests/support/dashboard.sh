# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # the SBX_* variables are tests/support/sandbox.sh's, set and read there
# SPDX-License-Identifier: Apache-2.0
# tests/support/dashboard.sh - the setting of every browser test of the dashboard (api.md §5.6):
# a real `sluice control` with its Docker network and a real `sluice proxy` on its gateway
# (tests/support/sandbox.sh), origin.py behind the proxy as a.sluice.test, b.sluice.test and
# c.sluice.test, users root (admin) and alice, the repository acme/website (alice a writer), and
# then one script of tests/browser/ in headless Chromium (playwright-core), handed all of it in
# DASH_* variables (tests/browser/harness.mjs reads them). Without Docker (or the sandbox image,
# or with SLUICE_TEST_NO_DOCKER=1) everything but the sandbox steps still runs: the control plane
# answers sandbox calls with 503 and the proxy listens on 127.0.0.1 instead of a gateway.
#
#   dash_main NAME NETWORK 10.213.N.0/24    runs tests/browser/NAME.mjs on that network and subnet
#
# Each caller (tests/integration/dashboard*.sh) takes a network and N of its own and writes
# SUBNET=10.213.N.0/24 on a line of its own, which tools/checksrc.sh checks for clashes.
# Screenshots go to $SLUICE_ARTIFACTS (default build/test-artifacts/NAME under ctest). Sourcing
# this file sources tests/support/fixture.sh and tests/support/sandbox.sh (SLUICE_SRC set first).

# shellcheck source-path=SCRIPTDIR source=fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"

dash_main() {
  DASH_NAME=$1
  DASH_NET=$2
  DASH_N=$(echo "$3" | cut -d. -f3)
  BROWSER_DIR=$SLUICE_SRC/tests/browser
  CHROMIUM=${SLUICE_CHROMIUM:-/usr/bin/chromium}
  if ! command -v node >/dev/null 2>&1; then
    echo "1..0 # SKIP node is not installed (tools/deps.sh test installs it)"
    exit 0
  fi
  if [ ! -x "$CHROMIUM" ]; then
    echo "1..0 # SKIP $CHROMIUM is missing (Debian: apt-get install -y chromium)"
    exit 0
  fi
  if [ ! -d "$BROWSER_DIR/node_modules/playwright-core" ]; then
    echo "1..0 # SKIP playwright-core is not installed: run npm ci in tests/browser (tools/deps.sh test)"
    exit 0
  fi

  # Without Docker (or the sandbox image) everything but the sandbox steps still runs: the control
  # plane answers sandbox calls with 503 and the proxy listens on 127.0.0.1 instead of a gateway.
  # SLUICE_TEST_NO_DOCKER=1 takes that path on purpose.
  dash_setup_without_docker() {
    SBX_NET=$DASH_NET
    SBX_N=$DASH_N
    SBX_SUBNET=10.213.$DASH_N.0/24
    SBX_GW=127.0.0.1
    SBX_TABLE=sluice_${DASH_NET//-/_}
    trap sbx__cleanup EXIT
    sbx_prepare
    sbx_control_start --docker-socket "$FX_WORK/no-docker.sock" --audit-log "$FX_WORK/audit.log" ||
      fx_bail "sluice control starts"
    sbx_proxy_start || fx_bail "sluice proxy starts on 127.0.0.1"
    sbx_env_setup || fx_bail "environments created"
  }

  fx_setup
  # The repository of the page's sandbox steps (tests/browser/dashboard.mjs REPO), registered with
  # alice as a writer by sbx_env_setup.
  SBX_REPOS=acme/website
  # The learn-mode steps' second refused host, resolved by the proxy like a. and b.sluice.test.
  SBX_NAMES=c.sluice.test
  DASH_SANDBOXES=1
  if [ "${SLUICE_TEST_NO_DOCKER:-0}" != 1 ] && sbx_dockerctl ping &&
    sbx_dockerctl image-exists "$SBX_IMAGE"; then
    # The control plane tails the proxy's audit log (sbx_proxy_start writes it there).
    sbx_setup "$DASH_NET" "$DASH_N" --audit-log "$FX_WORK/audit.log"
  else
    echo "# skip the sandbox steps: no Docker daemon or no image $SBX_IMAGE (or SLUICE_TEST_NO_DOCKER=1)"
    DASH_SANDBOXES=0
    dash_setup_without_docker
  fi

  PROFILE=$FX_WORK/chromium-profile
  DASH_PGID=
  # node runs in a process group of its own (setsid), ended whatever happens. playwright-core ends
  # Chromium (its own process group) when node exits, or on SIGTERM/SIGINT (timeout sends TERM).
  # shellcheck disable=SC2317 # called by the EXIT trap
  dash__cleanup() {
    local rc=$?
    # Under set -e, `(exit "$rc")` below would end the trap itself when rc is not 0.
    set +e
    if [ -n "$DASH_PGID" ]; then
      kill -KILL -- "-$DASH_PGID" 2>/dev/null || true
    fi
    (exit "$rc")
    sbx__cleanup
  }
  trap dash__cleanup EXIT

  # Beside the binary: build/test-artifacts/NAME under ctest.
  ARTIFACTS=${SLUICE_ARTIFACTS:-$(cd "$(dirname "$SLUICE_BIN")" && pwd)/test-artifacts/$DASH_NAME}
  mkdir -p "$ARTIFACTS"
  rm -f "$ARTIFACTS"/*.png
  fx_note "screenshots in $ARTIFACTS"

  rc=0
  DASH_URL="http://127.0.0.1:$SBX_CPORT" \
    DASH_ROOT_TOKEN=$SBX_TOK_root DASH_ALICE_TOKEN=$SBX_TOK_alice \
    DASH_PROXY="http://$SBX_GW:$SBX_PPORT" DASH_SLUICE_CA=$FX_SLUICE_CA \
    DASH_TLS_PORT=$FX_PY_TLS_PORT DASH_HTTP_PORT=$FX_PY_HTTP_PORT \
    DASH_ORIGIN_LOG=$FX_ORIGIN_LOG DASH_IMAGE=$SBX_IMAGE DASH_CHROMIUM=$CHROMIUM \
    DASH_PROFILE=$PROFILE DASH_ARTIFACTS=$ARTIFACTS DASH_SANDBOXES=$DASH_SANDBOXES \
    setsid timeout 600 node "$BROWSER_DIR/$DASH_NAME.mjs" &
  DASH_PGID=$!
  wait "$DASH_PGID" || rc=$?
  kill -KILL -- "-$DASH_PGID" 2>/dev/null || true
  DASH_PGID=
  if [ "$rc" != 0 ]; then
    not_ok "the browser steps pass (tests/browser/$DASH_NAME.mjs exited $rc)"
  else
    ok "the browser steps pass"
  fi
  if [ "$DASH_SANDBOXES" = 1 ]; then
    check "no container of this test is left running" sbx_no_leftovers
  fi
  # A clean stop (exit 0: under ASan, also no leak) removes the firewall table.
  sbx_shutdown_checks
  fx_done
}
