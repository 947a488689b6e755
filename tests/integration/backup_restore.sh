#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/backup_restore.sh - `sluice backup` and `sluice restore` (docs/reference/cli.md
# §1.9) around a running control plane and proxy: an environment whose credential the proxy
# injects; a backup taken while environments are being written; the data directory wiped and
# restored; the same environment back and its secret usable (the credential injected again on
# a request through the proxy); a restore under another key names the values that do not open;
# a non-empty directory is refused; with SLUICE_ENCRYPTION_KEY set the key is not in the backup
# and the command says so.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup origin

data=$FX_WORK/sluice-data
secret="Bearer bk-$(fx_random_hex 16)"
net=sbk$((RANDOM % 100000))
fx_resolve origin.sluice.test
fx_proxy_start --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" ||
  fx_bail "sluice proxy starts"
fx_control_data "$data"
token=$FX_CONTROL_TOKEN
# As sluice up keeps it (docs/reference/data.md): part of what a backup holds.
(umask 077 && echo "$token" >"$data/admin.token")
cport=$(fx_free_port)

api() { # METHOD PATH [BODY]: prints the status; the body is in $FX_WORK/api.body
  curl -sS --max-time 10 -o "$FX_WORK/api.body" -w '%{http_code}' -X "$1" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    ${3:+-d "$3"} "http://127.0.0.1:$cport$2" || true
}
injected_on() { # PATH: a request through the proxy reached the origin with the credential
  fx_curl "https://origin.sluice.test:$FX_PY_TLS_PORT$1"
  [ "$FX_CODE" != 000 ] && [ "$FX_CODE" -lt 500 ] &&
    fx_jsonl_has "$FX_ORIGIN_LOG" "path=$1" "authorization=$secret"
}

fx_control_start "$data" "$cport" "$net" || fx_bail "sluice control starts"
env_body="{\"name\":\"bk\",\"scope\":\"global\",\"base_image\":\"debian:12\",\"network\":\"on\",
  \"env\":[{\"name\":\"TOKEN\",\"value\":\"t-$(fx_random_hex 8)\",\"secret\":true}],
  \"egress\":{\"default\":\"deny\",\"rules\":[{\"host\":\"origin.sluice.test:$FX_PY_TLS_PORT\",
  \"credential\":{\"header\":\"Authorization\",\"value\":\"$secret\"}}]}}"
check_eq "an environment with a credential: 201" "$(api POST /api/v1/environments "$env_body")" 201
check_eq "a static client for 127.0.0.0/8: 201" \
  "$(api POST /api/v1/clients '{"id":"local","environment":"bk","cidr":"127.0.0.0/8"}')" 201
check "through the proxy the credential is injected" fx_wait 10 injected_on /before

# A writer keeps committing while the backup runs.
(for i in $(seq 1 40); do api POST /api/v1/environments "{\"name\":\"w$i\",\"base_image\":\"x\",\"network\":\"off\"}" >/dev/null; done) &
writer=$!
"$SLUICE_BIN" backup --data "$data" --out "$FX_WORK/b.tar" >"$FX_WORK/backup.out" 2>"$FX_WORK/backup.err"
rc=$?
wait "$writer" || true
check_eq "sluice backup while the control plane writes: exit 0" "$rc" 0
check_match "it says what it wrote" "$(cat "$FX_WORK/backup.out")" \
  'wrote .*b.tar \(mode 0600\): sluice.db \(schema version [0-9]+, a consistent copy\), ca.pem, ca.key, admin.token, encryption.key'
check_match "and warns that the key is in it" "$(cat "$FX_WORK/backup.err")" 'WARNING: .* holds the encryption key'
check_eq "the backup is 0600" "$(stat -c %a "$FX_WORK/b.tar")" 600
check_eq "it holds the database, the CA, the token, the key and the manifest" \
  "$(tar tf "$FX_WORK/b.tar" | sort | tr '\n' ' ')" "MANIFEST admin.token ca.key ca.pem encryption.key sluice.db "
check_match "the manifest says the key is included" "$(tar xOf "$FX_WORK/b.tar" MANIFEST)" \
  'encryption_key included'
check "sluice backup refuses to overwrite" bash -c "! '$SLUICE_BIN' backup --data '$data' --out '$FX_WORK/b.tar' 2>/dev/null"

# Wipe, restore, start again.
fx_stop_pid "$FX_CONTROL_PID" 30 || true
fx_proxy_stop || true
rm -rf "${data:?}"/*
out=$("$SLUICE_BIN" restore --from "$FX_WORK/b.tar" --data "$data" 2>&1)
check_match "sluice restore into the wiped directory" "$out" 'every sealed secret opens under the encryption key'
check_eq "the files come back with their modes" \
  "$(cd "$data" && stat -c '%n %a' ca.key ca.pem encryption.key sluice.db admin.token | tr '\n' ' ')" \
  "ca.key 600 ca.pem 644 encryption.key 600 sluice.db 600 admin.token 600 "
check "restore refuses a non-empty directory" bash -c "! '$SLUICE_BIN' restore --from '$FX_WORK/b.tar' --data '$data' 2>/dev/null"
fx_proxy_start --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" ||
  fx_bail "sluice proxy starts again"
fx_control_start "$data" "$cport" "$net" || fx_bail "sluice control starts on the restored data"
check_eq "the environment is back" "$(api GET /api/v1/environments/bk)" 200
check "its credential is usable: injected on a request through the proxy" fx_wait 10 injected_on /after
check_eq "the restored token is the admin's" "$(cat "$data/admin.token")" "$token"

# Under another key.
other=$(head -c 32 /dev/urandom | base64)
out=$(SLUICE_ENCRYPTION_KEY=$other "$SLUICE_BIN" restore --from "$FX_WORK/b.tar" --data "$FX_WORK/other" 2>&1)
check_match "a restore under another key names what does not open" "$out" \
  "environment bk \\([0-9a-f-]+\\): these values do not open .*TOKEN.*origin.sluice.test:$FX_PY_TLS_PORT"
check_match "... and warns" "$out" 'WARNING: restore: [0-9]+ sealed values do not open'

# With the key in the environment, the backup does not hold it.
out=$(SLUICE_ENCRYPTION_KEY=$(cat "$data/encryption.key") "$SLUICE_BIN" backup --data "$data" \
  --out "$FX_WORK/env.tar" 2>&1)
check_match "with SLUICE_ENCRYPTION_KEY set the backup says the key is NOT in it" "$out" \
  'WARNING: the encryption key is NOT in'
check "... and it is not" bash -c "! tar tf '$FX_WORK/env.tar' | grep -q encryption.key"
check_match "... as the manifest says" "$(tar xOf "$FX_WORK/env.tar" MANIFEST)" 'encryption_key NOT included'

fx_done
