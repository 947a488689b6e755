#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_learn.sh - learn mode end to end in a real sandbox (SECURITY.md
# promise 8b, docs/reference/api.md §5.1 "Learn mode"): `pip install` and `npm install` inside a
# sandbox on the image sluice/sandbox:bookworm-dev (the environment's base_image) against local
# registries the test builds and serves with nginx over TLS: a PyPI simple index with a wheel
# zipped here, an npm registry with a package's metadata, its `npm pack` tarball and the audit
# endpoint (Debian's npm 9.2 in the image sends no audit request here; the endpoint is there in
# case another npm does). Under default deny with no rule for them both installs fail; in observe
# both pass and their audit lines say observed; the suggestions name the two registry hosts and
# the methods seen and nothing else; applied, and observe ended, the same
# two commands pass under deny, nothing marked observed any more, while a host nobody asked for
# is still refused. No network: the registries are on loopback, reached by names the proxy
# resolves (SBX_RESOLVE). Network sl-t-learn, subnet 10.213.35.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
sbx_need_dev_image
if ! command -v npm >/dev/null; then
  echo "1..0 # SKIP npm is not installed here (it packs the test's package)"
  exit 0
fi
fx_setup
fx_test_ca || fx_bail "the origin test CA"

# --- the registries ---------------------------------------------------------------------------
REG=$FX_WORK/registries
mapfile -t reg_ports < <(fx_free_ports 2)
PYPI_PORT=${reg_ports[0]}
NPM_PORT=${reg_ports[1]}
PYPI=pypi.sluice.test:$PYPI_PORT
NPM=npm.sluice.test:$NPM_PORT
mkdir -p "$REG/pypi/simple/sluice-tiny" "$REG/pypi/packages" "$REG/npm/sluice-tiny/-" \
  "$REG/src/sluice-tiny" "$REG/npm-home"

# A wheel, zipped by hand (what `pip wheel` would make of a one-module package).
wheel=sluice_tiny-1.0.0-py3-none-any.whl
"$FX_PYTHON" - "$REG/pypi/packages/$wheel" <<'PY' || fx_bail "the test wheel"
import base64, hashlib, sys, zipfile
files = {
    "sluice_tiny/__init__.py": b'VALUE = "sluice-tiny-py-ok"\n',
    "sluice_tiny-1.0.0.dist-info/METADATA":
        b"Metadata-Version: 2.1\nName: sluice-tiny\nVersion: 1.0.0\n",
    "sluice_tiny-1.0.0.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: sluice-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += "%s,sha256=%s,%d\n" % (name, digest, len(data))
record += "sluice_tiny-1.0.0.dist-info/RECORD,,\n"
files["sluice_tiny-1.0.0.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        z.writestr(name, data)
PY
wheel_sha=$(sha256sum <"$REG/pypi/packages/$wheel" | cut -d' ' -f1)
printf '<!DOCTYPE html>\n<html><body><a href="sluice-tiny/">sluice-tiny</a></body></html>\n' \
  >"$REG/pypi/simple/index.html"
printf '<!DOCTYPE html>\n<html><body><a href="../../packages/%s#sha256=%s">%s</a></body></html>\n' \
  "$wheel" "$wheel_sha" "$wheel" >"$REG/pypi/simple/sluice-tiny/index.html"

# An npm package, packed by npm itself (offline), and its registry metadata.
printf '{"name":"sluice-tiny","version":"1.0.0","main":"index.js","license":"MIT"}\n' \
  >"$REG/src/sluice-tiny/package.json"
printf 'module.exports = { value: "sluice-tiny-js-ok" };\n' >"$REG/src/sluice-tiny/index.js"
(cd "$REG/src/sluice-tiny" && HOME=$REG/npm-home timeout 60 npm pack --offline \
  --no-update-notifier --pack-destination "$REG/npm/sluice-tiny/-" >"$REG/pack.out" 2>&1) || {
  fx__dump "$REG/pack.out"
  fx_bail "npm pack of the test package"
}
tgz=$REG/npm/sluice-tiny/-/sluice-tiny-1.0.0.tgz
[ -s "$tgz" ] || fx_bail "npm pack made $tgz"
TGZ=$tgz NPM=$NPM "$FX_PYTHON" -c '
import base64, hashlib, json, os
data = open(os.environ["TGZ"], "rb").read()
dist = {"tarball": "https://%s/sluice-tiny/-/sluice-tiny-1.0.0.tgz" % os.environ["NPM"],
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()}
v = {"name": "sluice-tiny", "version": "1.0.0", "main": "index.js", "dist": dist}
print(json.dumps({"name": "sluice-tiny", "dist-tags": {"latest": "1.0.0"},
                  "versions": {"1.0.0": v}}))' >"$REG/npm/sluice-tiny.json"

FX_NGINX_EXTRA_PORTS="$PYPI_PORT $NPM_PORT"
FX_NGINX_EXTRA=$(
  cat <<EOF
  server {
    listen 127.0.0.1:$PYPI_PORT ssl;
    ssl_certificate $FX_WORK/pki/good.pem;
    ssl_certificate_key $FX_WORK/pki/good.key;
    root $REG/pypi;
    types { text/html html; application/octet-stream whl; }
    index index.html;
  }
  server {
    listen 127.0.0.1:$NPM_PORT ssl;
    ssl_certificate $FX_WORK/pki/good.pem;
    ssl_certificate_key $FX_WORK/pki/good.key;
    root $REG/npm;
    types { application/octet-stream tgz; }
    location = /sluice-tiny { default_type application/json; alias $REG/npm/sluice-tiny.json; }
    location = /-/npm/v1/security/advisories/bulk {
      default_type application/json;
      return 200 "{}";
    }
    location / { }
  }
EOF
)
fx_nginx_start || fx_bail "nginx serves the registries"
check_eq "the PyPI index serves the wheel (from the host)" \
  "$(curl -q -sS --max-time 5 --cacert "$FX_TEST_CA" --resolve "$PYPI:127.0.0.1" \
    "https://$PYPI/packages/$wheel" | sha256sum | cut -d' ' -f1)" "$wheel_sha"
check_match "the npm registry serves the metadata (from the host)" \
  "$(curl -q -sS --max-time 5 --cacert "$FX_TEST_CA" --resolve "$NPM:127.0.0.1" \
    "https://$NPM/sluice-tiny")" '"latest": "1.0.0"'

SBX_RESOLVE="$PYPI $NPM"
sbx_setup sl-t-learn 35 --audit-log "$FX_WORK/audit.log"

# --- the environment: default deny, one rule that is not a registry -------------------------------
doc=$(DEV=$DEV_IMAGE "$FX_PYTHON" -c '
import json, os
print(json.dumps({"name": "learn", "scope": "global", "base_image": os.environ["DEV"],
                  "network": "on",
                  "egress": {"default": "deny",
                             "rules": [{"host": "a.sluice.test:%s" % os.environ["FX_PY_TLS_PORT"]}]}}))')
SBX_WHO=root sbx_api POST /api/v1/environments "$doc" >/dev/null
check_api "POST environment learn (default deny, base_image $DEV_IMAGE) → 201" 201
ENV=/api/v1/environments/learn
sbx_create learn || true
check_api "create a sandbox in learn → 201" 201
sid=$SBX_ID
[ -n "$sid" ] || fx_bail "no sandbox to test"

# The two commands, the same every time: a fresh target and cache, so each run asks the registry.
PIP_CMD="d=\$(mktemp -d) && pip install --no-cache-dir --disable-pip-version-check --retries 0 \
--timeout 20 --index-url https://$PYPI/simple/ --target \"\$d\" sluice-tiny \
&& PYTHONPATH=\"\$d\" python3 -c 'import sluice_tiny; print(sluice_tiny.VALUE)'"
NPM_CMD="d=\$(mktemp -d) && cd \"\$d\" && npm install --registry https://$NPM/ \
--cache \"\$d/.npm-cache\" --no-update-notifier --no-fund --fetch-retries 0 \
--fetch-timeout 20000 sluice-tiny && node -p 'require(\"sluice-tiny\").value'"

# install NAME : runs NAME's command in the sandbox; OUT its stdout and stderr, RC its exit code.
install() {
  local cmd=$PIP_CMD
  if [ "$1" = npm ]; then cmd=$NPM_CMD; fi
  sbx_exec "$sid" "$cmd" 150000 >/dev/null
  RC=$(sbx_field 'd.get("exitCode")')
  OUT=$(sbx_field 'd.get("stdout", "") + d.get("stderr", "")')
}
# shellcheck disable=SC2034 # read through ${!want}
WANT_pip=sluice-tiny-py-ok
# shellcheck disable=SC2034
WANT_npm=sluice-tiny-js-ok

# installs_work LABEL : pip and npm install the package (exit 0) and it works, checked as LABEL.
installs_work() {
  local m want
  for m in pip npm; do
    install "$m"
    want=WANT_$m
    check_eq "$m install $1: exit 0" "$RC" 0
    check_match "... and the package works" "$OUT" "${!want}"
    [ "$FX_LAST" = 0 ] || echo "#   output: ${OUT: -1500}"
  done
}

proxy_version() {
  curl -q -s --max-time 2 --unix-socket "$SBX_SOCK" http://localhost/v1/status 2>/dev/null |
    "$FX_PYTHON" -c 'import json,sys; print(json.load(sys.stdin).get("version") or 0)' \
      2>/dev/null || echo 0
}
# registry_hits PORT : how many requests nginx logged on PORT.
registry_hits() {
  fx_jsonl_count "$FX_NGINX_LOG" "port=$1"
}
# observed_lines : the sandbox's audit lines marked observed.
observed_lines() {
  fx_jsonl_count "$SBX_AUDIT" client="$sid" observed=true
}

# --- under deny: both installs fail, nothing reaches the registries -------------------------------
hits0="$(registry_hits "$PYPI_PORT")/$(registry_hits "$NPM_PORT")"
for m in pip npm; do
  install "$m"
  check "$m install under deny fails (exit ${RC:-?})" test "${RC:-0}" != 0 -a "$SBX_STATUS" = 200
  want=WANT_$m
  check "... without the package" bash -c '[[ $1 != *"$2"* ]]' _ "$OUT" "${!want}"
done
check_audit "audit: pip's CONNECT refused host-not-allowed" client="$sid" method=CONNECT \
  host=pypi.sluice.test decision=deny reason=host-not-allowed
check_audit "audit: npm's CONNECT refused host-not-allowed" client="$sid" method=CONNECT \
  host=npm.sluice.test decision=deny reason=host-not-allowed
check_eq "nothing reached either registry (nginx's requests: the host's two checks)" \
  "$(registry_hits "$PYPI_PORT")/$(registry_hits "$NPM_PORT")" "$hits0"

# --- observe: both pass, marked -------------------------------------------------------------------
v=$(proxy_version)
SBX_WHO=root sbx_api POST "$ENV/observe" '{"minutes": 30}' >/dev/null
check_api "POST observe (30 minutes) → 200" 200
check_match "the environment shows observe_until" "$(sbx_field 'd.get("observe_until") or ""')" 'Z$'
check "the proxy got a snapshot in observe" fx_wait 10 test "$(proxy_version)" -gt "$v"
installs_work "in observe"
check "pip's requests reached the index" test "$(registry_hits "$PYPI_PORT")" -ge 3
check "npm's requests reached the registry" test "$(registry_hits "$NPM_PORT")" -ge 3
check_audit "audit: pip's wheel download let out, observed, would_deny host-not-allowed" \
  client="$sid" method=GET host=pypi.sluice.test "path~$wheel" decision=allow observed=true \
  would_deny=host-not-allowed
check_audit "audit: npm's tarball let out, observed" client="$sid" method=GET \
  host=npm.sluice.test path~sluice-tiny-1.0.0.tgz decision=allow observed=true
check_audit "audit: the tunnels' CONNECTs observed too" client="$sid" method=CONNECT \
  host=pypi.sluice.test observed=true

# --- suggestions ----------------------------------------------------------------------------------
SBX_WHO=root sbx_api GET "$ENV/suggestions" >/dev/null
check_api "GET suggestions → 200" 200
fx_note "suggestions: $(sbx_field 'd.get("suggestions")')"
check_eq "the suggestions are the two registries, nothing else" \
  "$(sbx_field 'sorted(x["rule"]["host"] for x in d["suggestions"])')" \
  "[\"$NPM\", \"$PYPI\"]"
check_eq "pypi: GET" \
  "$(H=$PYPI sbx_field '[sorted(x["rule"].get("methods") or []) for x in d["suggestions"] if x["rule"]["host"] == __import__("os").environ["H"]]')" \
  '[["GET"]]'
check_eq "npm: GET" \
  "$(H=$NPM sbx_field '[sorted(x["rule"].get("methods") or []) for x in d["suggestions"] if x["rule"]["host"] == __import__("os").environ["H"]]')" \
  '[["GET"]]'
check_eq "each was observed and refused before, for its host" \
  "$(sbx_field 'sorted((x["observed"] > 0, x["refused"] > 0, x["would_deny"]) for x in d["suggestions"])')" \
  '[[true, true, ["host-not-allowed"]], [true, true, ["host-not-allowed"]]]'
rules=$(sbx_field 'json.dumps({"rules": [x["rule"] for x in d["suggestions"]]})')

# --- apply, end observe ----------------------------------------------------------------------------
SBX_WHO=root sbx_api POST "$ENV/suggestions/apply" "$rules" >/dev/null
check_api "apply the suggested rules → 200" 200
check_eq "the environment's rules: the old one and the two applied" \
  "$(sbx_field '[r["host"] for r in d["egress"]["rules"]]')" \
  "[\"a.sluice.test:$FX_PY_TLS_PORT\", \"$NPM\", \"$PYPI\"]"
SBX_WHO=root sbx_api DELETE "$ENV/observe" >/dev/null
check_api "DELETE observe → 200, observe_until null" 200 'd.get("observe_until")' null
SBX_WHO=root sbx_api GET "$ENV/suggestions" >/dev/null
check_api "nothing left to suggest" 200 'd["suggestions"]' '[]'

# --- the same commands under deny -------------------------------------------------------------------
before=$(observed_lines)
hits=$(registry_hits "$NPM_PORT")
installs_work "under deny with the applied rules"
check "npm's requests reached the registry again" test "$(registry_hits "$NPM_PORT")" -gt "$hits"
check_audit "audit: npm's tarball allowed by the applied rule" client="$sid" method=GET \
  host=npm.sluice.test path~sluice-tiny-1.0.0.tgz decision=allow "rule=$NPM" 'observed!=true'
check_audit "audit: pip's wheel allowed by the applied rule" client="$sid" method=GET \
  host=pypi.sluice.test "path~$wheel" decision=allow "rule=$PYPI" 'observed!=true'
check_eq "no line marked observed since observe ended" "$(observed_lines)" "$before"
sbx_exec "$sid" "curl -sS --max-time 10 -o /dev/null -w '%{http_connect}' https://b.sluice.test:$FX_PY_TLS_PORT/hello"
check_api "a host nobody asked for is refused: 403" 200 'd["stdout"]' 403

sbx_close "$sid" || true
check_api "close → 204" 204
sbx_shutdown_checks
fx_done
