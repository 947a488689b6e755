#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_basic.sh - `sluice proxy` against real peers (nginx, origin.py, curl,
# openssl s_client), per docs/reference/snapshot.md §3 and docs/reference/proxy.md §4: an allowed host is intercepted with a leaf from the
# sluice CA; a denied host is refused at CONNECT and never reached; a method filter works inside
# the tunnel, method-override headers included; the policy's credential replaces the client's and never leaks; no policy -> 503;
# identity by token (407, expired 403); ALPN offers http/1.1 only.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup nginx origin

secret="Bearer sl-$(fx_random_hex 24)"
secret_token=${secret#Bearer }
policy=$FX_WORK/policy.json
fx_local_policy "$policy" basic "a.sluice.test:$FX_TLS_PORT" "a.sluice.test:$FX_PY_TLS_PORT" \
  "a.sluice.test:$FX_PY_HTTP_PORT" \
  "{ \"host\": \"m.sluice.test:$FX_PY_TLS_PORT\", \"methods\": [\"GET\", \"HEAD\"] }" \
  "$(fx_cred_rule "cred.sluice.test:$FX_PY_TLS_PORT" "$secret")" \
  "$(fx_cred_rule "cred.sluice.test:$FX_PY_HTTP_PORT" "$secret")"

fx_resolve a.sluice.test m.sluice.test cred.sluice.test deny.sluice.test
common=(--upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}")
fx_proxy_start --policy "$policy" "${common[@]}" || fx_bail "sluice proxy starts with a policy"
ok "sluice proxy starts with a policy"

# --- (1) an allowed host: the origin's body, through a certificate minted by the sluice CA -----
fx_curl -H 'X-Probe: allow-1' "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "allowed host: 200 through the tunnel" 200 -
check_eq "allowed host: the body is nginx's" "$(cat "$FX_BODY")" "hello from nginx"
check_eq "allowed host: the CONNECT was answered 200" "$FX_CONNECT_CODE" 200
check_eq "allowed host: nginx saw the request once" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=allow-1 uri=/hello status=200)" 1
check_eq "allowed host: the upstream TLS carried SNI a.sluice.test" \
  "$(fx_jsonl_count "$FX_NGINX_LOG" probe=allow-1 sni=a.sluice.test)" 1
check_audit "allowed host: audit line (allow, client, environment, host, port, path, status)" \
  decision=allow reason=null client=local environment=basic method=GET scheme=https \
  host=a.sluice.test port="$FX_TLS_PORT" path=/hello status=200 credential=false \
  policy_version=1

sclient=$FX_WORK/s_client.out
timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" \
  -connect "a.sluice.test:$FX_TLS_PORT" -servername a.sluice.test -CAfile "$FX_SLUICE_CA" \
  -verify_hostname a.sluice.test -alpn http/1.1 </dev/null >"$sclient" 2>&1 || true
check "s_client through the proxy: Verify return code: 0 (ok)" \
  grep -q 'Verify return code: 0 (ok)' "$sclient"
check "s_client: the issuer is the sluice interception CA" \
  grep -q '^issuer=.*sluice interception CA' "$sclient"
openssl x509 -in "$sclient" -noout -ext subjectAltName >"$FX_WORK/leaf.san" 2>/dev/null || true
check "s_client: the leaf names a.sluice.test" grep -q 'DNS:a.sluice.test' "$FX_WORK/leaf.san"
check "s_client: the leaf is not the origin's certificate (no *.sluice.test)" \
  bash -c "grep -q DNS: '$FX_WORK/leaf.san' && ! grep -qF '*.sluice.test' '$FX_WORK/leaf.san'"

# --- (2) a host the policy does not name: refused at CONNECT, never reached -------------------
fx_curl -H 'X-Probe: deny-1' "https://deny.sluice.test:$FX_TLS_PORT/hello"
check_eq "denied host: curl exit 56 (CONNECT refused)" "$FX_RC" 56
check_eq "denied host: the CONNECT is answered 403" "$FX_CONNECT_CODE" 403
check "denied host: curl says 'CONNECT tunnel failed, response 403'" \
  grep -q 'CONNECT tunnel failed, response 403' "$FX_ERR"
check_eq "denied host: X-Sluice-Reason host-not-allowed" "$(fx_reason)" host-not-allowed
check_eq "denied host: nginx never saw it" "$(fx_jsonl_count "$FX_NGINX_LOG" probe=deny-1)" 0
check_audit "denied host: audit line with reason host-not-allowed and the environment" \
  decision=deny reason=host-not-allowed host=deny.sluice.test port="$FX_TLS_PORT" \
  environment=basic client=local
fx_pyclient --connect "deny.sluice.test:$FX_TLS_PORT" --dump "$FX_WORK/deny.raw" \
  >"$FX_WORK/deny.out" || true
check_eq "denied host: a raw CONNECT gets 403 host-not-allowed" "$(head -n 1 "$FX_WORK/deny.out")" \
  "connect=403 reason=host-not-allowed"
sed -e '1,/^\r$/d' "$FX_WORK/deny.raw" >"$FX_WORK/deny.body" 2>/dev/null || true
check "denied host: the refusal body is one line naming the host" \
  bash -c "[ \"\$(grep -c '' '$FX_WORK/deny.body')\" = 1 ] && grep -q deny.sluice.test '$FX_WORK/deny.body'"

# --- (3) method filter inside the tunnel ------------------------------------------------------
fx_curl "https://m.sluice.test:$FX_PY_TLS_PORT/echo?probe=m-get"
check_status "method filter: GET passes" 200 -
fx_curl -I "https://m.sluice.test:$FX_PY_TLS_PORT/hello"
check_status "method filter: HEAD passes" 200 -
fx_curl -X POST --data-binary 'body' "https://m.sluice.test:$FX_PY_TLS_PORT/echo?probe=m-post"
check_status "method filter: POST gets 403 method-not-allowed" 403 method-not-allowed
check_eq "method filter: the refusal came inside the tunnel (CONNECT 200)" "$FX_CONNECT_CODE" 200
check "method filter: the refusal body is one line" \
  bash -c "[ \"\$(grep -c '' '$FX_BODY')\" = 1 ]"
check_eq "method filter: the origin never saw the POST" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=m-post)" 0
check_eq "method filter: the origin saw the GET" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" method=GET target~probe=m-get)" 1
check_audit "method filter: audit line for the POST" \
  decision=deny reason=method-not-allowed method=POST host=m.sluice.test environment=basic
# A refused request without a body leaves the connection open: the next request on it is
# answered (inside the tunnel and in plain HTTP), not left hanging.
fx_pyclient --connect "m.sluice.test:$FX_PY_TLS_PORT" --request 'DELETE /echo?probe=kept-t1' \
  --request 'GET /echo?probe=kept-t2' >"$FX_WORK/kept.out" 2>&1 || true
check_eq "method filter: after a refusal in the tunnel the next request is answered" \
  "$(grep -o '^status=[0-9]* reason=[a-z-]*' "$FX_WORK/kept.out" | tr '\n' ' ')" \
  "status=403 reason=method-not-allowed status=200 reason=- "
fx_pyclient --absolute "http://deny.sluice.test:$FX_PY_HTTP_PORT/x" --pipeline \
  --request "GET http://deny.sluice.test:$FX_PY_HTTP_PORT/echo?probe=kept-p1" \
  --request "GET http://a.sluice.test:$FX_PY_HTTP_PORT/echo?probe=kept-p2" >"$FX_WORK/kept.out" \
  2>&1 || true
check_eq "plain HTTP, pipelined: after a refusal the next request is answered" \
  "$(grep -o '^status=[0-9]* reason=[a-z-]*' "$FX_WORK/kept.out" | tr '\n' ' ')" \
  "status=403 reason=host-not-allowed status=200 reason=- "
check_eq "... and reached the origin" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=kept-p2)" 1
fx_pyclient --raw "GET http://deny.sluice.test:$FX_PY_HTTP_PORT/x HTTP/1.1\r\nHost: deny.sluice.test:$FX_PY_HTTP_PORT\r\n\r\n" \
  --then "GET http://a.sluice.test:$FX_PY_HTTP_PORT/echo?probe=kept-p3 HTTP/1.1\r\nHost: a.sluice.test:$FX_PY_HTTP_PORT\r\nConnection: close\r\n\r\n" \
  --timeout 10 >"$FX_WORK/kept.out" 2>&1 || true
check "plain HTTP: a request sent after a refusal was read is answered too" \
  grep -q '^recv=HTTP/1.1 200 OK' "$FX_WORK/kept.out"
fx_pyclient --raw "GET http://deny.sluice.test:$FX_PY_HTTP_PORT/ws HTTP/1.1\r\nHost: deny.sluice.test:$FX_PY_HTTP_PORT\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" \
  --show-header Connection --eof-wait 5 --timeout 10 >"$FX_WORK/kept.out" 2>&1 || true
check_eq "a refused upgrade request: 403, Connection: close, and the connection closes" \
  "$(grep -o '^status=[0-9]* reason=[a-z-]*\|^header connection=.*\|^eof.*\|^open' "$FX_WORK/kept.out" | tr '\n' ' ')" \
  "status=403 reason=host-not-allowed header connection=close eof "
# A method-override header is decided too: servers that honour it would run its method.
for hdr in X-HTTP-Method-Override X-HTTP-Method x-method-override; do
  fx_curl -H "$hdr: delete" "https://m.sluice.test:$FX_PY_TLS_PORT/echo?probe=m-ovr-$hdr"
  check_status "method filter: GET with $hdr: delete gets 403 method-not-allowed" 403 \
    method-not-allowed
  check_eq "... the origin never saw it" \
    "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=m-ovr-"$hdr")" 0
done
check "... the refusal names the header and its method, and the hint that method" \
  grep -q 'X-Method-Override names DELETE.*add "DELETE" to the methods of' "$FX_BODY"
fx_curl -H 'X-HTTP-Method-Override: HEAD' "https://m.sluice.test:$FX_PY_TLS_PORT/echo?probe=m-ovr-ok"
check_status "method filter: an override naming an allowed method passes" 200 -
check_eq "... and reaches the origin with its header" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" method=GET target~probe=m-ovr-ok)" 1
fx_curl -H 'X-HTTP-Method-Override: DE LETE' "https://m.sluice.test:$FX_PY_TLS_PORT/echo?probe=m-ovr-bad"
check_status "method filter: an override that is not a method gets 400 bad-request" 400 \
  bad-request

# --- (4) credential injection -----------------------------------------------------------------
auth_seen() { # the Authorization values /echo reported, as a JSON list
  fx_json "$FX_BODY" '[v for n, v in d["headers"] if n.lower() == "authorization"]'
}
want_auth=$(printf '["%s"]' "$secret")
fx_curl -H 'Authorization: Bearer client-own-1' "https://cred.sluice.test:$FX_PY_TLS_PORT/echo?probe=inj-1"
check_status "injection: 200" 200 -
check_eq "injection: the origin got exactly the policy's Authorization" "$(auth_seen)" "$want_auth"
fx_curl -H 'authorization: Bearer client-own-2' "https://cred.sluice.test:$FX_PY_TLS_PORT/echo?probe=inj-2"
check_eq "injection: a lower-case client header is replaced too" "$(auth_seen)" "$want_auth"
fx_curl "https://cred.sluice.test:$FX_PY_TLS_PORT/echo?probe=inj-3"
check_eq "injection: added when the client sent none" "$(auth_seen)" "$want_auth"
check_eq "injection: origin log has the policy value for all three" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=inj- authorization="$secret")" 3
check "injection: the client's own values never reached the origin" \
  fx_absent client-own- "$FX_ORIGIN_LOG"
check_audit "injection: audit line says credential true" \
  decision=allow host=cred.sluice.test credential=true path=/echo
check "audit: the query string is dropped from path" fx_absent 'probe=inj' "$FX_AUDIT"

# Refusals on the credential's rule: their bodies must not carry the secret.
fx_curl -X TRACE "https://cred.sluice.test:$FX_PY_TLS_PORT/echo?probe=trace"
check_status "injection: TRACE on a rule with a credential is refused (403)" 403
check_eq "injection: the origin never saw the TRACE" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" method=TRACE)" 0
cp "$FX_HDRS" "$FX_WORK/trace.headers"
cp "$FX_BODY" "$FX_WORK/trace.body"
fx_curl "http://cred.sluice.test:$FX_PY_HTTP_PORT/echo?probe=plain"
check_status "injection: plain HTTP to a rule with a credential: 403 credential-needs-tls" \
  403 credential-needs-tls
check_eq "injection: the origin never saw the plain request" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" target~probe=plain)" 0
cp "$FX_HDRS" "$FX_WORK/plain.headers"
cp "$FX_BODY" "$FX_WORK/plain.body"
fx_admin GET /metrics
cp "$FX_ADMIN_BODY" "$FX_WORK/metrics.txt"
sleep 1 # let the audit writer catch up before searching its file
check "injection: the secret is in no log, audit line, error or metric" \
  fx_absent "$secret_token" "$FX_PROXY_LOG" "$FX_AUDIT" "$FX_WORK/trace.headers" \
  "$FX_WORK/trace.body" "$FX_WORK/plain.headers" "$FX_WORK/plain.body" "$FX_WORK/metrics.txt" \
  "$FX_WORK/proxy$FX_PROXY_N.stdout"

# --- ALPN: http/1.1 only ----------------------------------------------------------------------
alpn() { # alpn PROTOS: s_client through the proxy offering PROTOS
  timeout 20 openssl s_client -proxy "127.0.0.1:$FX_PROXY_PORT" \
    -connect "a.sluice.test:$FX_TLS_PORT" -servername a.sluice.test -CAfile "$FX_SLUICE_CA" \
    -alpn "$1" </dev/null >"$FX_WORK/alpn.out" 2>&1
}
rc=0
alpn h2 || rc=$?
check "ALPN h2 alone: the handshake fails" \
  bash -c "[ $rc -ne 0 ] && grep -q 'Cipher is (NONE)' '$FX_WORK/alpn.out'"
check "ALPN h2 alone: the proxy sends a no_application_protocol alert" \
  grep -qi 'no application protocol' "$FX_WORK/alpn.out"
rc=0
alpn h2,http/1.1 || rc=$?
check "ALPN h2,http/1.1: the proxy picks http/1.1" \
  grep -q '^ALPN protocol: http/1.1' "$FX_WORK/alpn.out"

check "SIGTERM stops the first proxy with exit 0" fx_proxy_stop

# --- (13) no policy loaded: 503 no-policy -----------------------------------------------------
fx_proxy_start "${common[@]}" || fx_bail "sluice proxy starts without a policy"
fx_curl -H 'X-Probe: nopol-1' "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "no policy: https gets 503 no-policy" 503 no-policy
fx_curl -H 'X-Probe: nopol-2' "http://a.sluice.test:$FX_PY_HTTP_PORT/hello"
check_status "no policy: plain http gets 503 no-policy" 503 no-policy
check_eq "no policy: nothing reached nginx" "$(fx_jsonl_count "$FX_NGINX_LOG" probe~nopol-)" 0
check_audit "no policy: audit line with reason no-policy (not a decision of the policy: error)" decision=error reason=no-policy
check "SIGTERM stops the proxy without a policy with exit 0" fx_proxy_stop

# --- (13) identity by token -------------------------------------------------------------------
tok=pt_$(fx_random_hex 16)
tpolicy=$FX_WORK/token-policy.json
fx_policy "$tpolicy" "{
  \"version\": 1,
  \"environments\": { \"basic\": { \"default\": \"deny\", \"rules\": [
    { \"host\": \"a.sluice.test:$FX_TLS_PORT\" },
    { \"host\": \"a.sluice.test:$FX_PY_HTTP_PORT\" } ] } },
  \"clients\": [
    { \"id\": \"tok\", \"token\": \"$tok\", \"environment\": \"basic\" },
    { \"id\": \"old\", \"token\": \"pt_old\", \"environment\": \"basic\",
      \"expires_at\": \"2020-01-01T00:00:00Z\" } ]
}"
check "the token policy is valid (sluice policy check)" \
  bash -c "'$SLUICE_BIN' policy check '$tpolicy' >/dev/null"
fx_proxy_start --policy "$tpolicy" "${common[@]}" || fx_bail "sluice proxy starts (token policy)"
fx_curl "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "identity: no Proxy-Authorization -> 407 no-identity" 407 no-identity
check_eq "identity: Proxy-Authenticate: Basic realm=\"sluice\"" \
  "$(fx_header Proxy-Authenticate)" 'Basic realm="sluice"'
fx_curl --proxy-user "tok:wrong-$tok" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "identity: a wrong token -> 407" 407 no-identity
fx_curl --proxy-user "nobody:$tok" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "identity: an unknown id -> 407" 407 no-identity
# The 407's body says what would identify the client (proxy.md §4.5 "Hints"): the source address
# the proxy saw, and how a client is made (this proxy reads a policy file) or names itself;
# never the credential that was sent.
id_hint='to be identified, add a client with this "ip" (or a "cidr" holding it) to the policy file, or send a client'"'"'s id and token as Proxy-Authorization: Basic base64(ID:TOKEN) (curl --proxy-user ID:TOKEN)'
fx_curl "http://a.sluice.test:$FX_PY_HTTP_PORT/hello"
check_eq "identity: the 407 body names the source address and how to be identified" \
  "$(cat "$FX_BODY")" "sluice: GET http://a.sluice.test:$FX_PY_HTTP_PORT/hello denied: no-identity: source address 127.0.0.1 is not a registered client, and the request sent no Proxy-Authorization; $id_hint"
fx_curl --proxy-user "nobody:wrong-$tok" "http://a.sluice.test:$FX_PY_HTTP_PORT/hello"
check_eq "identity: ... for a wrong credential, that it names no client there (not the token)" \
  "$(cat "$FX_BODY")" "sluice: GET http://a.sluice.test:$FX_PY_HTTP_PORT/hello denied: no-identity: the id and token of the Proxy-Authorization name no client at source address 127.0.0.1; $id_hint"
check_eq "identity: ... the status line, the reason and Proxy-Authenticate as before" \
  "$(grep '^HTTP/1.1 407' "$FX_HDRS" | tr -d '\r') $(fx_reason) $(fx_header Proxy-Authenticate)" \
  'HTTP/1.1 407 Proxy Authentication Required (sluice: no-identity) no-identity Basic realm="sluice"'
fx_curl --proxy-user "tok:$tok" "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "identity: the right token -> 200" 200 -
check_eq "identity: ... with the origin's body" "$(cat "$FX_BODY")" "hello from nginx"
fx_curl --proxy-user old:pt_old "https://a.sluice.test:$FX_TLS_PORT/hello"
check_status "identity: an expired client -> 403 expired" 403 expired
check_audit "identity: audit line for the expired client" decision=deny reason=expired client=old
check_audit "identity: the 407 for no Proxy-Authorization is audited as a challenge" \
  decision=challenge reason=no-identity status=407 client=null
check_audit "identity: the 407s for a wrong token or an unknown id are audited deny" \
  decision=deny reason=no-identity status=407
fx_curl --proxy-user "tok:$tok" "http://a.sluice.test:$FX_PY_HTTP_PORT/echo?probe=pauth"
check_status "identity: plain http with the right token -> 200" 200 -
check_eq "identity: Proxy-Authorization is not forwarded" \
  "$(fx_json "$FX_BODY" '[n for n, v in d["headers"] if n.lower() == "proxy-authorization"]')" '[]'
check "identity: the token (plain or base64) is in no log or audit line" \
  fx_absent "$tok" "$FX_PROXY_LOG" "$FX_AUDIT" "$FX_ORIGIN_LOG"
check "identity: ... nor its Basic credentials" \
  fx_absent "$(printf 'tok:%s' "$tok" | base64 -w0)" "$FX_PROXY_LOG" "$FX_AUDIT" "$FX_ORIGIN_LOG"
check "SIGTERM stops the token proxy with exit 0" fx_proxy_stop

fx_done
