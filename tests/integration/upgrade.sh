#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/upgrade.sh - a database written by sluice 0.1.0 (tests/data/upgrade/v0.1.0:
# the file and its README with the key and the tokens) opened by this binary
# (docs/reference/data.md "The database", docs/install.md "Upgrades"): the control plane starts,
# migrates it to its own schema version, and the environments, secrets (they open under the
# README's key, and do not under another), static clients and schedules read back. A database
# whose schema is newer than this binary's is refused with a clear message and left unchanged.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup

old=${SLUICE_TEST_DATA:-$SLUICE_SRC/tests/data}/upgrade/v0.1.0
readme=$old/README
key=$(sed -n 's/^SLUICE_ENCRYPTION_KEY=\([^ ]*\).*/\1/p' "$readme")
read -r admin alice <<<"$(sed -n 's/^Users: .*API tokens (admin alice): //p' "$readme")"
check "the README gives the key and both tokens" test -n "$key" -a -n "$admin" -a -n "$alice"

data=$FX_WORK/data
mkdir -m 0700 "$data"
cp "$old/sluice.db" "$data/sluice.db"
chmod 600 "$data/sluice.db"
port=$(fx_free_port)
control_pid=

# control_start KEY : sluice control on $data with KEY; waits for /healthz.
control_start() {
  SLUICE_ENCRYPTION_KEY=$1 "$SLUICE_BIN" control --listen "127.0.0.1:$port" --data "$data" \
    >>"$FX_WORK/control.log" 2>&1 &
  control_pid=$!
  FX_PIDS+=("$control_pid")
  fx_wait 15 curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"
}
get() { # TOKEN PATH: prints the JSON body (empty on an error status)
  curl -sf --max-time 10 -H "Authorization: Bearer $1" "http://127.0.0.1:$port$2" || true
}
# field JSON EXPR: a Python expression over the parsed document `d`.
field() {
  "$FX_PYTHON" -c 'import json, sys
d = json.loads(sys.argv[1])
print(eval(sys.argv[2]))' "$1" "$2"
}
schema_of() {
  "$FX_PYTHON" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT version FROM schema_version").fetchone()[0])' "$1"
}

"$SLUICE_BIN" user add probe --data "$FX_WORK/fresh" >/dev/null
current=$(schema_of "$FX_WORK/fresh/sluice.db")
check_eq "the old database has schema version 2" "$(schema_of "$data/sluice.db")" 2

control_start "$key" || fx_bail "sluice control starts on the 0.1.0 database"
ok "sluice control starts on the 0.1.0 database"
check_eq "it migrated the database to this binary's schema ($current)" \
  "$(schema_of "$data/sluice.db")" "$current"

base=$(get "$admin" /api/v1/environments/base)
check_eq "base reads back: global, the default" "$(field "$base" '(d["scope"], d["is_default"])')" \
  "('global', True)"
check_eq "its variables: LOG_LEVEL=debug, PYPI_TOKEN secret (masked)" \
  "$(field "$base" 'sorted((v["name"], v["value"], v["secret"]) for v in d["env"])')" \
  "[('LOG_LEVEL', 'debug', False), ('PYPI_TOKEN', '******', True)]"
check_eq "its rules: pypi.org, and api.example.com GET with a stored credential" \
  "$(field "$base" '[(r["host"], r["methods"], r.get("credential", {}).get("has_value")) for r in d["egress"]["rules"]]')" \
  "[('pypi.org', [], None), ('api.example.com', ['GET'], True)]"
check_eq "every sealed value opens under the README's key (nothing undecryptable)" \
  "$(field "$base" 'd.get("undecryptable")')" None
ci=$(get "$admin" /api/v1/environments/ci)
check_eq "ci reads back with its repository" "$(field "$ci" '(d["egress"]["default"], d["repositories"])')" \
  "('allow', ['acme/site'])"
mine=$(get "$alice" /api/v1/environments/mine)
check_eq "alice's own environment reads back (network off)" "$(field "$mine" '(d["owner"], d["network"])')" \
  "('alice', 'off')"
clients=$(get "$admin" /api/v1/clients)
check_eq "the static clients read back" \
  "$(field "$clients" 'sorted((c["id"], c.get("cidr")) for c in d["clients"])')" \
  "[('builder', None), ('ci-runners', '10.20.0.0/16')]"
sched=$(get "$alice" /api/v1/schedules)
check_eq "alice's schedule reads back" \
  "$(field "$sched" '[(s["name"], s["cron"], s["enabled"]) for s in d["schedules"]]')" \
  "[('nightly', '0 3 * * *', False)]"
fx_stop_pid "$control_pid" 30 || true

# Under another key the same values are reported, by name, as not opening.
control_start "$(head -c 32 /dev/urandom | base64)" || fx_bail "sluice control starts under another key"
base=$(get "$admin" /api/v1/environments/base)
check_eq "under another key: PYPI_TOKEN, LOG_LEVEL and api.example.com do not open" \
  "$(field "$base" 'sorted(d.get("undecryptable", []))')" "['LOG_LEVEL', 'PYPI_TOKEN', 'api.example.com']"
fx_stop_pid "$control_pid" 30 || true

# A database from a newer release is refused and left alone.
newer=$FX_WORK/newer
mkdir -m 0700 "$newer"
cp "$old/sluice.db" "$newer/sluice.db"
"$FX_PYTHON" -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("UPDATE schema_version SET version = 999"); c.commit()' \
  "$newer/sluice.db"
sum_before=$(fx_sha256 "$newer/sluice.db")
rc=0
SLUICE_ENCRYPTION_KEY=$key timeout 15 "$SLUICE_BIN" control --listen "127.0.0.1:$port" \
  --data "$newer" >"$FX_WORK/newer.log" 2>&1 || rc=$?
check_eq "a database of a newer release: sluice control exits 1" "$rc" 1
check_match "... saying so" "$(cat "$FX_WORK/newer.log")" \
  "sluice.db has schema version 999; this sluice knows $current: upgrade sluice"
check_eq "... and the file is unchanged" "$(fx_sha256 "$newer/sluice.db")" "$sum_before"

fx_done
