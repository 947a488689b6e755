#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_basic.sh - docs/reference/api.md §5.3, docs/reference/containers.md §5.4, the basics of a sandbox: the network
# and firewall table exist once sandboxes are ready; create/list; an allowed host is reached
# through the proxy with the credential injected (origin.py logs it) while nothing inside the
# sandbox holds it; a denied host gets 403 with X-Sluice-Reason and never reaches the origin;
# the environment variables (SLUICE_API_URL set, yet unreachable), the CA bundle and resolv.conf;
# close removes the container; the agents' image sluice/sandbox:bookworm-dev as a base_image
# (node, npm, python3 -m venv, pip, gcc, git-lfs, jq); a clean shutdown removes the table. Network sl-t-basic, subnet 10.213.11.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-basic 11

# --- the network ------------------------------------------------------------------------------
check "network $SBX_NET exists" sbx_dockerctl network-exists "$SBX_NET"
check "bridge interface $SBX_NET carries the gateway $SBX_GW" \
  bash -c "ip -4 addr show dev '$SBX_NET' | grep -qF 'inet $SBX_GW/24'"
check "nftables table inet $SBX_TABLE is installed" nft list table inet "$SBX_TABLE"

# --- create, list -----------------------------------------------------------------------------
sbx_create sbx main || true
check_api "POST sandboxes → 201" 201
check_eq "201 body: ref" "$(sbx_field 'd.get("ref")')" main
check_eq "201 body: environment is the name" "$(sbx_field 'd.get("environment")')" sbx
[ -n "$SBX_ID" ] || fx_bail "no sandbox to test"
id=$SBX_ID
fx_note "sandbox $id"
sbx_api GET "" >/dev/null
check_api "GET sandboxes → 200" 200
check_eq "the list holds the sandbox with ref and environment" \
  "$(I=$id sbx_field '[ (x["ref"], x["environment"]) for x in (d if isinstance(d, list) else d.get("sandboxes", [])) if x.get("id") == __import__("os").environ["I"]]')" \
  '[["main", "sbx"]]'
cid=$(sbx_cid "$id" || true)
check "a container labelled sluice.sandbox=$id exists" test -n "$cid"
token=$(sbx_token "$id" || true)
check "its HTTP_PROXY carries a token (docker inspect)" test -n "$token"
ip=$(sbx_ip "$id" || true)
check_match "its address is in $SBX_SUBNET" "$ip" "^10\.213\.$SBX_N\.[0-9]+$"

# --- allowed host, credential injected ----------------------------------------------------------
probe=basic-allow-$(fx_random_hex 8)
sbx_exec "$id" "curl -sS --max-time 10 -H 'X-Probe: $probe' $(sbx_url_tls /echo)"
check_api "curl to the allowed host: exit 0" 200 'd["exitCode"]' 0
fx_wait 5 fx_jsonl_has "$FX_ORIGIN_LOG" "headers~$probe" || true
check_eq "origin.py saw the request once" "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~$probe")" 1
check_eq "origin.py saw the injected credential" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~$probe" "authorization=$SBX_CRED")" 1
out=$(sbx_field 'd["stdout"]')
check "the echoed credential is redacted in exec stdout" \
  bash -c '[[ $1 != *"$2"* ]] && [[ $1 == *"***"* ]]' _ "$out" "${SBX_CRED#Bearer }"

# plain HTTP to the allowed host (no credential on that rule)
probe2=basic-http-$(fx_random_hex 8)
sbx_exec "$id" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'X-Probe: $probe2' $(sbx_url_http /hello)"
check_api "plain HTTP to the allowed host: 200" 200 'd["stdout"]' 200

# nothing inside the sandbox holds the credential or the proxy token in clear
credpart=${SBX_CRED#Bearer sbx-cred-}
sbx_exec "$id" "{ env; cat /proc/1/environ | tr '\\0' '\\n'; } | grep -cF -- '$credpart'; grep -rlsF -- '$credpart' /workspace /root /etc /tmp 2>/dev/null | wc -l"
check_api "no credential in the env or in /workspace, /root, /etc, /tmp" 200 'd["stdout"].split()' '["0", "0"]'
check "the credential is not in the container's Config.Env" \
  bash -c "! '$FX_PYTHON' '$FX_SUPPORT/dockerctl.py' env '$cid' | grep -qF -- '$credpart'"

# --- denied host ---------------------------------------------------------------------------------
probe3=basic-deny-$(fx_random_hex 8)
sbx_exec "$id" "curl -sS --max-time 10 -o /dev/null -D - -w 'connect=%{http_connect}\\n' -H 'X-Probe: $probe3' https://b.sluice.test:$FX_PY_TLS_PORT/hello; echo rc=\$?"
out=$(sbx_field 'd["stdout"]')
check_match "denied host (TLS): CONNECT answered 403" "$out" "connect=403"
check_match "denied host (TLS): X-Sluice-Reason host-not-allowed" "$out" \
  "[Xx]-[Ss]luice-[Rr]eason: host-not-allowed"
check_match "denied host (TLS): curl fails" "$out" "rc=[1-9]"
probe4=basic-deny-http-$(fx_random_hex 8)
sbx_exec "$id" "curl -sS --max-time 10 -o /dev/null -D - -H 'X-Probe: $probe4' http://b.sluice.test:$FX_PY_HTTP_PORT/hello"
out=$(sbx_field 'd["stdout"]')
check_match "denied host (plain HTTP): 403 with X-Sluice-Reason host-not-allowed" "$out" \
  "^HTTP/1\.1 403.*[Xx]-[Ss]luice-[Rr]eason: host-not-allowed"
sleep 0.5
check_eq "origin.py never saw the denied requests" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "headers~basic-deny-")" 0
check_audit "audit: the refusal names the sandbox as client" client="$id" \
  decision=deny reason=host-not-allowed host=b.sluice.test
check_audit "audit: the allowed request names the sandbox and the environment" client="$id" \
  decision=allow host=a.sluice.test credential=true

# --- environment variables --------------------------------------------------------------------
sbx_exec "$id" 'for v in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NO_PROXY no_proxy SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO CI SLUICE SLUICE_SANDBOX SLUICE_REF SLUICE_CLONE_URL SLUICE_API_URL SBX_PLAIN; do printf "%s=%s\n" "$v" "${!v-<unset>}"; done'
check_api "exec printing the environment" 200
out=$(sbx_field 'd["stdout"]')
for v in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy; do
  check_match "$v = http://$id:***@$SBX_GW:$SBX_PPORT (token redacted)" "$out" \
    "(^|"$'\n'")$v=http://$id:\*\*\*@$SBX_GW:$SBX_PPORT($|"$'\n'")"
done
for v in NO_PROXY no_proxy; do
  check_match "$v is empty" "$out" "(^|"$'\n'")$v=(<unset>)?($|"$'\n'")"
done
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
  check_match "$v = /etc/sluice/ca-bundle.pem" "$out" "(^|"$'\n'")$v=/etc/sluice/ca-bundle.pem($|"$'\n'")"
done
# Without a git platform there is no clone URL; the API's URL is there, though not reachable.
for kv in CI=true SLUICE=true SLUICE_SANDBOX=true SLUICE_REF=main SLUICE_CLONE_URL= \
  "SLUICE_API_URL=http://127.0.0.1:$SBX_CPORT" SBX_PLAIN=plain-value; do
  check_match "$kv" "$out" "(^|"$'\n'")$kv($|"$'\n'")"
done
# SLUICE_API_URL names the API; a sandbox cannot reach it, through the proxy (the address is not a
# destination any rule allows) or around it (the walls).
sbx_exec "$id" 'curl -sS -o /dev/null -w "%{http_code}" --max-time 5 "$SLUICE_API_URL/api/v1/me"; echo " rc=$?"; curl -sS -o /dev/null -w "%{http_code}" --max-time 5 --noproxy "*" "http://'"$SBX_GW:$SBX_CPORT"'/api/v1/me"; echo " rc=$?"'
out=$(sbx_field 'd["stdout"]')
check_match "SLUICE_API_URL through the proxy: refused (403), never the API's 401" "$out" "^403 rc=0"
check_match "... and the API's port on the gateway around the proxy: no connection" "$out" \
  $'\n''000 rc=[1-9]'
sbx_exec "$id" "[ \"\$SBX_SECRET\" = '$SBX_SECRET' ] && echo secret-ok; echo \"\$SBX_SECRET\""
out=$(sbx_field 'd["stdout"]')
check_match "the secret variable holds its value inside" "$out" "^secret-ok"
check "... and is redacted in exec stdout" \
  bash -c '[[ $1 != *"$2"* ]] && [[ $1 == *"***"* ]]' _ "$out" "$SBX_SECRET"
envlist=$(sbx_dockerctl env "$cid" || true)
check_match "Config.Env: HTTP_PROXY has the real token" "$envlist" \
  "HTTP_PROXY=http://$id:[^@*]+@$SBX_GW:$SBX_PPORT"
check_eq "label sluice.sandbox=$id" \
  "$(sbx_dockerctl inspect "$cid" | "$FX_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Config"]["Labels"].get("sluice.sandbox"))')" "$id"

# --- CA bundle --------------------------------------------------------------------------------
ca_line=$(sed -n 2p "$FX_SLUICE_CA")
sbx_exec "$id" "grep -c 'BEGIN CERTIFICATE' /etc/sluice/ca-bundle.pem; grep -cF -- '$ca_line' /etc/sluice/ca-bundle.pem"
out=$(sbx_field 'd["stdout"].split()')
check "CA bundle holds the system CAs and the sluice CA" \
  "$FX_PYTHON" -c 'import json,sys; a=json.loads(sys.argv[1]); sys.exit(not (int(a[0]) > 1 and int(a[1]) == 1))' "${out:-[0,0]}"

# --- hardening (docs/reference/containers.md §5.4): NET_RAW dropped, no-new-privileges -----------------------------------
sbx_exec "$id" 'awk "/^(CapEff|NoNewPrivs):/ {print \$2}" /proc/self/status'
caps=$(sbx_field 'd["stdout"].split()')
check "CapEff lacks NET_RAW (bit 13) and NoNewPrivs is 1 ($caps)" "$FX_PYTHON" -c '
import json, sys
c = json.loads(sys.argv[1])
sys.exit(not (len(c) == 2 and not (int(c[0], 16) >> 13) & 1 and c[1] == "1"))' "${caps:-[]}"

# --- DNS --------------------------------------------------------------------------------------
sbx_exec "$id" 'cat /etc/resolv.conf'
out=$(sbx_field 'd["stdout"]')
check_match "resolv.conf: nameserver $SBX_GW (the gateway)" "$out" "(^|"$'\n'")nameserver ${SBX_GW//./\\.}"
check_eq "resolv.conf: no other nameserver" "$(grep -c '^nameserver' <<<"$out")" 1
check_match "resolv.conf: options timeout:1 attempts:2" "$out" "(^|"$'\n'")options timeout:1 attempts:2"
# This proxy has no DNS responder (no --dns-listen): nothing answers on the gateway's port 53,
# and the lookup fails at once (port unreachable) rather than hanging.
sbx_exec "$id" 's=$(date +%s%N); getent hosts a.sluice.test; echo rc=$?; echo ms=$((($(date +%s%N)-s)/1000000))'
out=$(sbx_field 'd["stdout"]')
check_match "a name does not resolve inside" "$out" "rc=[1-9]"
ms=$(sed -n 's/^ms=//p' <<<"$out")
check "... and fails within 2 s (${ms:-?} ms)" test "${ms:-99999}" -lt 2000

# --- close ------------------------------------------------------------------------------------
sbx_close "$id" || true
check_api "close → 204" 204
check "the container is gone after close" fx_wait 10 sbx_container_gone "$id"
sbx_api GET "" >/dev/null
check_eq "the list no longer holds it" \
  "$(I=$id sbx_field 'len([x for x in (d if isinstance(d, list) else d.get("sandboxes", [])) if x.get("id") == __import__("os").environ["I"]])')" 0
sbx_exec "$id" "true"
check_api "exec on a closed sandbox → 404 sandbox not found" 404 'd.get("message")' "sandbox not found"
sbx_api POST "/nosuchid/exec" '{"cmd":"true"}' >/dev/null
check_api "unknown id → 404 sandbox not found" 404 'd.get("message")' "sandbox not found"

# --- the agents' image (docs/reference/containers.md §5.4) -------------------------------------------
# sluice/sandbox:bookworm-dev as an environment's base_image: Node.js with npm, Python 3 with venv
# and pip (`python` is python3), a C toolchain, git-lfs and jq. make test builds it; a missing
# image fails here rather than skipping.
DEV_IMAGE=sluice/sandbox:bookworm-dev
if ! sbx_dockerctl image-exists "$DEV_IMAGE"; then
  not_ok "image $DEV_IMAGE is present (tools/sandbox-image.sh --image $DEV_IMAGE builds it)"
else
  SBX_WHO=root sbx_api POST /api/v1/environments \
    "{\"name\":\"sbx-dev\",\"scope\":\"global\",\"base_image\":\"$DEV_IMAGE\",\"network\":\"off\"}" \
    >/dev/null
  check_api "an environment with base_image $DEV_IMAGE → 201" 201 'd.get("base_image")' "$DEV_IMAGE"
  sbx_create sbx-dev main || true
  check_api "a sandbox in it → 201" 201 'd.get("environment")' sbx-dev
  dev_id=$SBX_ID
  check_eq "... its container runs $DEV_IMAGE" \
    "$(sbx_dockerctl inspect "$(sbx_cid "$dev_id")" | "$FX_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Config"]["Image"])')" \
    "$DEV_IMAGE"
  sbx_exec "$dev_id" 'set -e; node --version; npm --version >/dev/null && echo npm-ok
python3 -m venv /tmp/venv && /tmp/venv/bin/pip --version >/dev/null && echo venv-ok
python --version; pip3 --version >/dev/null && echo pip-ok; echo "pip-break=$PIP_BREAK_SYSTEM_PACKAGES"
printf "int main(void){return 7;}" >/tmp/t.c && gcc -o /tmp/t /tmp/t.c && make --version >/dev/null
{ /tmp/t || echo "cc-ok $?"; }; pkg-config --version >/dev/null && echo pkg-config-ok
git lfs version; echo "{\"a\":[1,2]}" | jq -c ".a|length"' 120000
  check_api "the toolchains run in it" 200 'd.get("exitCode")' 0
  out=$(sbx_field 'd.get("stdout", "")')
  check_match "node (v18 or later) and npm" "$out" "^v(1[89]|[2-9][0-9])\.[0-9]+\.[0-9]+"$'\n'"npm-ok"
  check_match "python3 -m venv with pip, python is python3, pip system-wide" "$out" \
    "venv-ok"$'\n'"Python 3\.[0-9]+\.[0-9]+"$'\n'"pip-ok"$'\n'"pip-break=1"
  check_match "gcc, make and pkg-config" "$out" "cc-ok 7"$'\n'"pkg-config-ok"
  check_match "git-lfs and jq" "$out" "git-lfs/[0-9.]+ .*"$'\n'"2("$'\n'"|$)"
  sbx_close "$dev_id" || true
  check_api "... close → 204" 204
fi

sbx_shutdown_checks
fx_done
