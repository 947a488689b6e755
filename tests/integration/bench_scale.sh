#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/bench_scale.sh - bench/scale (the snapshot's growth with the number of
# clients) run small against the real binaries: a proxy and a control plane on loopback, 2
# environments, 0 then 60 token clients. Its table and scale.json must show a snapshot that
# grows with the clients, a build time, a change acknowledged by the proxy, and both processes'
# memory; a bad --clients is refused with a message naming it.
set -euo pipefail

: "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
src=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d /tmp/sluice-bench-scale-XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then printf 'ok - %s\n' "$what"; else printf 'not ok - %s\n' "$what"; fails=$((fails + 1)); fi
}

build=$(dirname "$SLUICE_BIN")
timeout 300 "$src/bench/scale" --build "$build" --out "$work" --clients 0,60 --environments 2 \
  --rules 2 --changes 2 >"$work/table.md" 2>"$work/err" || {
  cat "$work/err"
  printf 'not ok - bench/scale runs\n'
  exit 1
}
check "the table has a row per count" \
  grep -Eq '^\| 60 \| [0-9.]+ KiB \| [0-9.]+ ms \| [0-9.]+ ms \| [0-9]+ \|' "$work/table.md"
check "scale.json: the snapshot grows with the clients, builds take time, changes are acked" \
  python3 - "$work/scale.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
r0, r1 = doc["rows"]
assert (r0["clients"], r1["clients"]) == (0, 60), doc
# 60 clients each add at least an id, a token and their environment's id.
assert r1["bytes"] > r0["bytes"] + 60 * 40, (r0["bytes"], r1["bytes"])
assert r0["build_us"] > 0 and r1["build_us"] > 0, doc
assert all(0 < t < 10000 for r in doc["rows"] for t in r["change_to_ack_ms"]), doc
assert r1["proxy_rss_kib"] > 1000 and r1["control_rss_kib"] > 1000, doc
PY
if "$src/bench/scale" --build "$build" --clients 100,10 >/dev/null 2>"$work/bad"; then
  printf 'not ok - descending --clients refused\n'
  fails=$((fails + 1))
else
  check "descending --clients refused, naming the flag" grep -q -- '--clients must be ascending' "$work/bad"
fi
exit $((fails > 0))
