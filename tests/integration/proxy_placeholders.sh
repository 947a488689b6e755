#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_placeholders.sh - placeholder credentials and observe in `sluice proxy`
# (docs/reference/snapshot.md §3, docs/reference/proxy.md §4.5-§4.7), with real clients: curl
# (Bearer, Basic through -u, any header), Python's requests and http.client and Node's https each
# taking the key from the environment as an SDK does. The origin (nginx) sees the real value only
# toward the rule's host; the placeholder sent anywhere else is refused placeholder-misuse before
# anything is dialled, and no log line (nginx's, the audit log) holds a placeholder. The
# injecting credential works as before. Observe lets out what no rule allows, marked, until its
# deadline, checked per request.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"

fx_init
fx_test_ca || fx_bail "the origin test CA"
# One more nginx server that logs (and echoes) every header a key may travel in.
KEY_PORT=$(fx_free_port)
FX_NGINX_EXTRA_PORTS=$KEY_PORT
# shellcheck disable=SC2016 # nginx variables
FX_NGINX_EXTRA=$(
  cat <<EOF
  log_format keys escape=json '{"host":"\$host","uri":"\$request_uri",'
    '"authorization":"\$http_authorization","x_api_key":"\$http_x_api_key",'
    '"x_other":"\$http_x_other"}';
  server {
    listen 127.0.0.1:$KEY_PORT ssl;
    ssl_certificate $FX_WORK/pki/good.pem;
    ssl_certificate_key $FX_WORK/pki/good.key;
    access_log $FX_WORK/keys.log keys;
    location = /echo-auth { default_type text/plain; return 200 "auth=\$http_authorization\n"; }
    location = /echo-key { default_type text/plain; return 200 "key=\$http_x_api_key\n"; }
    location / { default_type text/plain; return 200 "ok\n"; }
  }
EOF
)
fx_nginx_start || fx_bail "nginx starts"
KEYS_LOG=$FX_WORK/keys.log

PH_OPENAI=sluice-ph-openaiopenaiopenaiopenaiopenaiopenai2345
PH_ANTH=sluice-ph-anthropicanthropicanthropicanthropicanth
PH_BASIC=sluice-ph-basicbasicbasicbasicbasicbasicbasicbasic
PH_PLAIN=sluice-ph-plainplainplainplainplainplainplainplain
for ph in "$PH_OPENAI" "$PH_ANTH" "$PH_BASIC" "$PH_PLAIN"; do
  [ ${#ph} = 50 ] || fx_bail "test placeholder $ph has 50 characters"
done

# snapshot VERSION [OBSERVE_UNTIL] : the test policy (for 127/8), in observe until the given time.
snapshot() {
  local observe=""
  if [ -n "${2:-}" ]; then observe="\"observe_until\": \"$2\", "; fi
  cat <<EOF
{ "version": $1,
  "environments": { "ph": { "default": "deny", ${observe}"rules": [
    { "host": "api.sluice.test:$KEY_PORT", "credential": { "header": "Authorization",
      "value": "sk-REAL-openai", "placeholder_env": "OPENAI_API_KEY" } },
    { "host": "anth.sluice.test:$KEY_PORT", "credential": { "header": "x-api-key",
      "value": "sk-ant-REAL", "placeholder_env": "ANTHROPIC_API_KEY" } },
    { "host": "basic.sluice.test:$KEY_PORT", "credential": { "header": "Authorization",
      "value": "pw-REAL", "placeholder_env": "BASIC_PASSWORD" } },
    { "host": "plain.sluice.test:$FX_HTTP_PORT", "credential": { "header": "Authorization",
      "value": "sk-plain-REAL", "placeholder_env": "PLAIN_KEY" } },
    { "host": "inject.sluice.test:$KEY_PORT", "credential": { "header": "Authorization",
      "value": "Bearer injected-REAL" } },
    { "host": "other.sluice.test:$KEY_PORT" },
    { "host": "get.sluice.test:$KEY_PORT", "methods": ["GET"] } ] } },
  "clients": [ { "id": "local", "cidr": "127.0.0.0/8", "environment": "ph",
    "placeholders": { "OPENAI_API_KEY": "$PH_OPENAI", "ANTHROPIC_API_KEY": "$PH_ANTH",
                      "BASIC_PASSWORD": "$PH_BASIC", "PLAIN_KEY": "$PH_PLAIN" } } ] }
EOF
}

fx_resolve api.sluice.test anth.sluice.test basic.sluice.test inject.sluice.test \
  other.sluice.test get.sluice.test new.sluice.test
resolve_key=()
for h in api anth basic inject other get new; do
  resolve_key+=(--resolve "$h.sluice.test:$KEY_PORT:127.0.0.1")
done
policy=$FX_WORK/policy.json
fx_policy "$policy" "$(snapshot 1)"
check "the test policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$policy' >/dev/null"
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  "${resolve_key[@]}" --resolve "plain.sluice.test:$FX_HTTP_PORT:127.0.0.1" ||
  fx_bail "sluice proxy starts with the placeholder policy"
ok "sluice proxy starts with the placeholder policy"
api=https://api.sluice.test:$KEY_PORT

# --- the placeholder replaced toward its rule's host ----------------------------------------
fx_curl -H "Authorization: Bearer $PH_OPENAI" "$api/echo-auth"
check_status "curl Bearer placeholder to its host: 200" 200 -
check_eq "the origin got the real value" "$(cat "$FX_BODY")" "auth=Bearer sk-REAL-openai"
check_audit "its audit line says a credential went out" \
  decision=allow host=api.sluice.test path=/echo-auth credential=true

fx_curl -u "user:$PH_BASIC" "https://basic.sluice.test:$KEY_PORT/echo-auth"
check_status "curl -u user:placeholder: 200" 200 -
check_eq "Basic decoded, the password replaced, encoded again" "$(cat "$FX_BODY")" \
  "auth=Basic $(printf 'user:pw-REAL' | base64)"

fx_curl -H "x-api-key: $PH_ANTH" "https://anth.sluice.test:$KEY_PORT/echo-key"
check_status "curl x-api-key placeholder: 200" 200 -
check_eq "any header: the origin got the real key" "$(cat "$FX_BODY")" "key=sk-ant-REAL"

export OPENAI_API_KEY=$PH_OPENAI
for mode in requests http.client; do
  out=$(timeout 60 "$FX_PYTHON" "$FX_SUPPORT/key_client.py" "$mode" "127.0.0.1:$FX_PROXY_PORT" \
    "$api/echo-auth" "$FX_SLUICE_CA" OPENAI_API_KEY Authorization 2>&1 || true)
  check_eq "python $mode with OPENAI_API_KEY from its environment: the origin got the real key" \
    "$out" "status=200
auth=Bearer sk-REAL-openai"
done
out=$(timeout 60 "$FX_PYTHON" "$FX_SUPPORT/key_client.py" requests "127.0.0.1:$FX_PROXY_PORT" \
  "https://basic.sluice.test:$KEY_PORT/echo-auth" "$FX_SLUICE_CA" OPENAI_API_KEY Authorization \
  --basic me 2>&1 || true)
check_match "python requests, the placeholder as a Basic password toward another rule's host: refused" \
  "$out" '^status=403'
if command -v node >/dev/null; then
  out=$(timeout 60 node "$FX_SUPPORT/node_https_key.mjs" "$FX_PROXY_PORT" "$api/echo-auth" \
    "$FX_SLUICE_CA" OPENAI_API_KEY 2>&1 || true)
  check_eq "node https with OPENAI_API_KEY from its environment: the origin got the real key" \
    "$out" "status=200
auth=Bearer sk-REAL-openai"
  out=$(timeout 60 node "$FX_SUPPORT/node_https_key.mjs" "$FX_PROXY_PORT" \
    "https://other.sluice.test:$KEY_PORT/x" "$FX_SLUICE_CA" OPENAI_API_KEY 2>&1 || true)
  check_match "node https, the same key to another allowed host: 403" "$out" '^status=403'
else
  fx_skip "node https with OPENAI_API_KEY" "node is not installed"
fi

# --- anywhere else: placeholder-misuse, nothing dialled -------------------------------------
before=$(wc -l <"$KEYS_LOG")
fx_curl -H "Authorization: Bearer $PH_OPENAI" "https://other.sluice.test:$KEY_PORT/x"
check_status "the placeholder to another allowed host: 403 placeholder-misuse" 403 \
  placeholder-misuse
check_match "the refusal names the variable and where it is replaced" "$(cat "$FX_BODY")" \
  'the Authorization header carries the placeholder in OPENAI_API_KEY; the placeholder in OPENAI_API_KEY stands for a credential of \{"host":"api.sluice.test:[0-9]+"\}'
check_audit "audited deny placeholder-misuse" decision=deny reason=placeholder-misuse \
  host=other.sluice.test
fx_curl -u "u:$PH_OPENAI" "https://other.sluice.test:$KEY_PORT/x"
check_status "... inside a Basic credential too" 403 placeholder-misuse
fx_curl -H "X-Other: $PH_OPENAI" "$api/x"
check_status "... in another header toward its own host" 403 placeholder-misuse
fx_curl -H "Authorization: Bearer $PH_ANTH" "$api/x"
check_status "... another variable's placeholder toward this host" 403 placeholder-misuse
fx_curl "$api/v1/$PH_OPENAI?key=$PH_OPENAI"
check_status "... in the target" 403 placeholder-misuse
check_eq "the refusal does not show the placeholder" "$(grep -c sluice-ph-openai "$FX_BODY")" 0
fx_curl -H "x-api-key: $PH_ANTH" "https://$PH_ANTH.sluice.test:$KEY_PORT/"
check_refused "... in a host name (the CONNECT's)" placeholder-misuse
check_eq "nothing of these reached the origin" "$(wc -l <"$KEYS_LOG")" "$before"
fx_curl -H "Authorization: Bearer $PH_PLAIN" "http://plain.sluice.test:$FX_HTTP_PORT/echo-auth"
check_status "plain HTTP to a placeholder rule's host: 403 credential-needs-tls" 403 \
  credential-needs-tls
check_eq "the origin never saw a placeholder (any header, any target)" \
  "$(grep -c 'sluice-ph-' "$KEYS_LOG" "$FX_NGINX_LOG" | awk -F: '{ s += $2 } END { print s }')" 0
check_eq "the audit log holds no placeholder (masked)" \
  "$(grep -cE 'sluice-ph-[a-z2-7]{40}' "$FX_AUDIT" || true)" 0
check_audit "the target's placeholder is masked in its line" reason=placeholder-misuse \
  'path~/v1/sluice-ph-****'

# --- the injecting credential as before, and a client-sent value elsewhere ------------------
fx_curl -H "Authorization: Bearer mine" "https://inject.sluice.test:$KEY_PORT/echo-auth"
check_eq "an injecting credential replaces the client's header as before" "$(cat "$FX_BODY")" \
  "auth=Bearer injected-REAL"
fx_curl -H "Authorization: Bearer sk-user-own" "$api/echo-auth"
check_eq "toward a placeholder rule's host, a header without the placeholder goes as sent" \
  "$(cat "$FX_BODY")" "auth=Bearer sk-user-own"

# --- observe --------------------------------------------------------------------------------
fx_curl "https://new.sluice.test:$KEY_PORT/x"
check_status "no rule allows new.sluice.test: 403 host-not-allowed" 403 host-not-allowed
until=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
fx_admin PUT /v1/snapshot --data-binary "$(snapshot 2 "$until")"
check_eq "a snapshot in observe loads" "$FX_CODE" 200
fx_curl "https://new.sluice.test:$KEY_PORT/x"
check_status "in observe, new.sluice.test is let out: 200" 200 -
check_audit "its line is marked observed, with the refusal it escaped" decision=allow \
  host=new.sluice.test observed=true would_deny=host-not-allowed credential=false
check_audit "so is its tunnel's CONNECT" method=CONNECT host=new.sluice.test observed=true
fx_curl -X POST "https://get.sluice.test:$KEY_PORT/x"
check_status "a method the rule refuses is let out too" 200 -
check_audit "... would_deny method-not-allowed, the rule named" host=get.sluice.test method=POST \
  observed=true would_deny=method-not-allowed rule="get.sluice.test:$KEY_PORT"
fx_curl -H "Authorization: Bearer $PH_OPENAI" "https://new.sluice.test:$KEY_PORT/x"
check_status "observe lets no placeholder out: 403 placeholder-misuse" 403 placeholder-misuse
fx_curl "https://get.sluice.test:$KEY_PORT/x"
check_audit "an allowed request is not marked" host=get.sluice.test method=GET \
  'observed!=true' decision=allow
# A deadline just ahead: the proxy ends observe by itself, without a new snapshot.
until=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
fx_admin PUT /v1/snapshot --data-binary "$(snapshot 3 "$until")"
fx_curl "https://new.sluice.test:$KEY_PORT/y"
check_status "observe until three seconds from now: let out" 200 -
sleep 4
fx_curl "https://new.sluice.test:$KEY_PORT/z"
check_status "past the deadline, with the same snapshot loaded: 403 host-not-allowed" 403 \
  host-not-allowed
fx_done
