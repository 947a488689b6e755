#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_registry.sh - docs/reference/api.md §5.1/§5.3, docs/reference/containers.md:
# images from a registry. A real one on loopback: Debian's docker-registry with TLS (a leaf of
# the test CA, which dockerd trusts through /etc/docker/certs.d/HOST:PORT/ca.crt, made and
# removed here) and htpasswd (bcrypt) authentication, reached through a relay that trickles
# its answers (tests/support/slow_relay.py) so that the pull can be watched. An image with a
# layer of its own is pushed to it with the docker CLI (a temporary DOCKER_CONFIG for the
# login). Then: an environment naming it pulls on the first create (the list shows `pulling`
# with bytes), reuses it on the second (if-missing), pulls again with `always`; a wrong
# password is 424 `registry authentication failed for HOST`, a missing tag 424
# `image not found: NAME`, the registry down 502 `registry unreachable: HOST: ...`. The
# registry password is in no API answer, no control-plane log line, no container's
# environment. Network sl-t-registry, subnet 10.213.36.0/24.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"

for tool in docker-registry htpasswd docker; do
  if ! command -v "$tool" >/dev/null; then
    echo "1..0 # SKIP $tool is not installed (README: docker-registry, apache2-utils, docker.io)"
    exit 0
  fi
done
if [ ! -w /etc/docker ] && ! mkdir -p /etc/docker/certs.d 2>/dev/null; then
  echo "1..0 # SKIP /etc/docker/certs.d is not writable (dockerd must trust the test CA)"
  exit 0
fi

fx_setup
sbx_setup sl-t-registry 36

REG_USER=tester
REG_PASS="reg-pass-$(fx_random_hex 16)"
BAD_PASS="bad-pass-$(fx_random_hex 16)"
ports=$(fx_free_ports 2)
REG_PORT=${ports%%$'\n'*}
RELAY_PORT=${ports##*$'\n'}
REG_HOST=127.0.0.1:$RELAY_PORT
REG_CERTS=/etc/docker/certs.d/$REG_HOST
IMG=$REG_HOST/sluice-t/img
export DOCKER_CONFIG=$FX_WORK/docker-config
REG_TMP=sluice-t-registry-$(fx_random_hex 6)

reg_cleanup() {
  local rc=$?
  set +e
  docker rm -f "$REG_TMP" >/dev/null 2>&1
  docker rmi -f "$IMG:v1" >/dev/null 2>&1
  rm -rf "$REG_CERTS"
  (exit "$rc")
  sbx__cleanup
}
trap reg_cleanup EXIT

# --- the registry -------------------------------------------------------------------------------
fx_test_ca || fx_bail "test CA"
mkdir -p "$FX_WORK/registry" "$DOCKER_CONFIG" "$REG_CERTS"
cp "$FX_TEST_CA" "$REG_CERTS/ca.crt"
htpasswd -Bbn "$REG_USER" "$REG_PASS" >"$FX_WORK/htpasswd" 2>/dev/null
cat >"$FX_WORK/registry.yml" <<EOF
version: 0.1
log: {level: info, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $FX_WORK/registry}}
http:
  addr: 127.0.0.1:$REG_PORT
  tls: {certificate: $FX_PKI/good.pem, key: $FX_PKI/good.key}
auth:
  htpasswd: {realm: sluice-test, path: $FX_WORK/htpasswd}
EOF
docker-registry serve "$FX_WORK/registry.yml" >"$FX_WORK/registry.log" 2>&1 &
FX_PIDS+=($!)
fx_wait 10 fx_port_open "$REG_PORT" || fx_bail "docker-registry listens on $REG_PORT"
relay_start() {
  "$FX_PYTHON" "$FX_SUPPORT/slow_relay.py" --listen "$RELAY_PORT" --to "$REG_PORT" \
    --rate "${1:-0}" >"$FX_WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  FX_PIDS+=("$RELAY_PID")
  fx_wait 10 fx_port_open "$RELAY_PORT"
}
relay_stop() {
  kill "$RELAY_PID" 2>/dev/null || true
  wait "$RELAY_PID" 2>/dev/null || true
}
relay_start 0 || fx_bail "the relay listens on $RELAY_PORT"
check "the registry answers with TLS and wants a password" \
  test "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$FX_TEST_CA" "https://$REG_HOST/v2/")" = 401

# An image with a layer of its own (6 MiB that do not compress), pushed, then removed here.
head -c $((6 * 1024 * 1024)) /dev/urandom >"$FX_WORK/blob"
docker create --name "$REG_TMP" "$SBX_IMAGE" >/dev/null || fx_bail "docker create"
docker cp "$FX_WORK/blob" "$REG_TMP:/opt/blob" >/dev/null || fx_bail "docker cp"
docker commit "$REG_TMP" "$IMG:v1" >/dev/null || fx_bail "docker commit"
docker rm -f "$REG_TMP" >/dev/null
echo "$REG_PASS" | docker login -u "$REG_USER" --password-stdin "$REG_HOST" >"$FX_WORK/login.log" 2>&1 ||
  { fx__dump "$FX_WORK/login.log"; fx_bail "docker login"; }
docker push "$IMG:v1" >"$FX_WORK/push.log" 2>&1 || { fx__dump "$FX_WORK/push.log"; fx_bail "docker push"; }
docker logout "$REG_HOST" >/dev/null 2>&1
docker rmi -f "$IMG:v1" >/dev/null
check "the image is gone from the daemon before the first create" \
  bash -c "! '$FX_PYTHON' '$FX_SUPPORT/dockerctl.py' image-exists '$IMG:v1'"

# --- environments ---------------------------------------------------------------------------------
env_doc() { # NAME IMAGE PULL PASSWORD|-
  NAME=$1 IMAGE=$2 PULL=$3 PW=$4 U=$REG_USER "$FX_PYTHON" -c '
import json, os
e = os.environ
d = {"name": e["NAME"], "scope": "global", "base_image": e["IMAGE"], "image_pull": e["PULL"],
     "network": "off", "registry_auth": {"username": e["U"]}}
if e["PW"] != "-":
    d["registry_auth"]["password"] = e["PW"]
print(json.dumps(d))'
}
SBX_WHO=root sbx_api POST /api/v1/environments "$(env_doc reg "$IMG:v1" if-missing "$REG_PASS")" >/dev/null
check_api "an environment with registry credentials (201)" 201 'd["registry_auth"]' \
  "{\"username\": \"$REG_USER\", \"has_value\": true}"
REG_ENV=$(sbx_field 'd["id"]')
check_eq "... its pull policy" "$(sbx_field 'd["image_pull"]')" if-missing
check "... and the password is not in the answer" bash -c "! grep -qF -- '$REG_PASS' '$SBX_BODY'"
SBX_WHO=root sbx_api POST /api/v1/environments "$(env_doc reg-bad "$IMG:v1" always "$BAD_PASS")" >/dev/null
check_api "an environment with a wrong password (201)" 201
SBX_WHO=root sbx_api POST /api/v1/environments "$(env_doc reg-missing "$IMG:v9" if-missing "$REG_PASS")" >/dev/null
check_api "an environment naming a tag the registry lacks (201)" 201
SBX_WHO=root sbx_api POST /api/v1/environments '{"name":"reg-x","scope":"global","base_image":"x","network":"off","image_pull":"sometimes"}' >/dev/null
check_api "image_pull other than if-missing/always → 422" 422 'd["errors"][0]["field"]' image_pull

pulls() { grep -c 'msg="pulling image"' "$SBX_CONTROL_LOG" || true; }

# --- first create: pulled, with progress ------------------------------------------------------------
relay_stop
relay_start 1048576 || fx_bail "the slow relay listens"
SBX_BODY_BG=$FX_WORK/create1.body
curl -q -sS --max-time 200 -X POST -H "Authorization: Bearer $SBX_TOK_alice" \
  -H 'Content-Type: application/json' --data '{"ref":"main","environment":"reg"}' \
  -o "$SBX_BODY_BG" -w '%{http_code}' \
  "http://127.0.0.1:$SBX_CPORT/api/v1/repos/$SBX_REPO/sandboxes" >"$FX_WORK/create1.status" &
create_pid=$!
seen=$FX_WORK/seen-pulling
: >"$seen"
while kill -0 "$create_pid" 2>/dev/null; do
  sbx_api GET "" >/dev/null
  sbx_field '[x for x in d if x.get("status") == "pulling"]' | grep -v '^\[\]$' >>"$seen" || true
  sleep 0.2
done
wait "$create_pid" || true
check_eq "the first create → 201" "$(cat "$FX_WORK/create1.status")" 201
id1=$(fx_json "$SBX_BODY_BG" 'd["id"]')
check "the list showed the sandbox as pulling while the create ran" test -s "$seen"
max_bytes=$("$FX_PYTHON" -c '
import json, sys
m = 0
for line in open(sys.argv[1]):
    for x in json.loads(line):
        p = x.get("pull") or {}
        if p.get("image") == sys.argv[2] and p.get("bytes_total", 0) > 0:
            m = max(m, p.get("bytes", 0))
print(m)' "$seen" "$IMG:v1" 2>/dev/null || echo 0)
check_ge "... with the bytes downloaded so far (its layer: 6 MiB)" "$max_bytes" 1
check_eq "one pull so far (control log)" "$(pulls)" 1
check "the image is in the daemon now" sbx_dockerctl image-exists "$IMG:v1"
sbx_exec "$id1" 'test -s /opt/blob && echo layer-there'
check_api "the sandbox runs the pulled image" 200 'd["stdout"].strip()' layer-there
relay_stop
relay_start 0 || fx_bail "the relay listens again"

# --- second create: if-missing reuses it; always pulls again ----------------------------------------
sbx_create reg main || true
check_api "the second create → 201" 201
id2=$SBX_ID
check_eq "... without a pull (if-missing)" "$(pulls)" 1
SBX_WHO=root sbx_api PUT "/api/v1/environments/$REG_ENV" "$(env_doc reg "$IMG:v1" always -)" >/dev/null
check_api "switched to always, the password kept (200)" 200 'd["registry_auth"]["has_value"]' true
sbx_create reg main || true
check_api "a create with always → 201" 201
id3=$SBX_ID
check_eq "... pulled again" "$(pulls)" 2
check_match "... and logged as pulled" "$(grep 'msg="image pulled"' "$SBX_CONTROL_LOG" | tail -1)" "image=$IMG:v1"

# --- failures named ---------------------------------------------------------------------------------
before=$(sbx_leftovers | "$FX_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')
sbx_create reg-bad main || true
check_api "a wrong password → 424 naming the registry" 424 'd.get("message")' \
  "registry authentication failed for $REG_HOST"
sbx_create reg-missing main || true
check_api "a missing tag → 424 naming the image" 424 'd.get("message")' "image not found: $IMG:v9"
relay_stop
sbx_create reg main || true
check_api "the registry down → 502" 502
check_match "... registry unreachable: HOST: why" "$(sbx_field 'd.get("message")')" \
  "^registry unreachable: $REG_HOST: .+"
after=$(sbx_leftovers | "$FX_PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))')
check_eq "... and the failed creates left no container" "$after" "$before"

# --- the password nowhere -----------------------------------------------------------------------------
SBX_WHO=root sbx_api GET "/api/v1/environments/$REG_ENV" >/dev/null
check "GET of the environment: no password" bash -c "! grep -qF -- '$REG_PASS' '$SBX_BODY'"
SBX_WHO=root sbx_api GET /api/v1/environments >/dev/null
check "the environments list: no password" bash -c "! grep -qF -- '$REG_PASS' '$SBX_BODY' && ! grep -qF -- '$BAD_PASS' '$SBX_BODY'"
SBX_WHO=alice sbx_api GET "/api/v1/resolve?repo=$SBX_REPO&environment=reg" >/dev/null
check "resolve: no password" bash -c "! grep -qF -- '$REG_PASS' '$SBX_BODY'"
check "the control plane's log: no password" \
  bash -c "! grep -qF -- '$REG_PASS' '$SBX_CONTROL_LOG' && ! grep -qF -- '$BAD_PASS' '$SBX_CONTROL_LOG'"
for id in "$id1" "$id2" "$id3"; do
  cid=$(sbx_cid "$id" || true)
  check "container of $id: no password in its inspect" \
    bash -c "test -n '$cid' && ! '$FX_PYTHON' '$FX_SUPPORT/dockerctl.py' inspect '$cid' | grep -qF -- '$REG_PASS'"
done
sbx_exec "$id1" "env; cat /proc/1/environ | tr '\\0' '\\n'"
check "... nor in a sandbox's environment" bash -c "! grep -qF -- '$REG_PASS' '$SBX_BODY'"

for id in "$id1" "$id2" "$id3"; do
  sbx_close "$id" >/dev/null || true
done
fx_done
