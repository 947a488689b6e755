#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/mcp.sh - docs/reference/mcp.md §5.5, the MCP endpoint /mcp (docs/mcp.md): a real control
# plane and proxy with Docker sandboxes (tests/support/sandbox.sh) and a git platform (the git
# server of tests/support/gitserver.sh with acme/widget and acme/other), users root/alice/bob, the
# global environments sbx/sbx-off and alice's own alice-env; then
#   - the official MCP TypeScript SDKs (tests/mcp/client.mjs, their Client over the Streamable HTTP
#     transport: 1.x with initialize, 2.x pinned to the stateless revision 2026-07-28) connect,
#     list the tools and call each one, as alice, bob and root: secrets
#     masked, credentials never present, a sandbox write/read/exec/close round trip with the
#     seed's argument names (owner, repo, command, timeout_seconds; text and base64 files), another
#     user's environment, sandbox and job refused with the REST texts, two jobs (one succeeds with
#     its output, one fails with its exit code), a missing or wrong token failing the connect;
#   - the 1.x SDK with the git server stopped: sandbox_create answers before the clone, the first
#     sandbox_exec waits for it and runs on main's commit; an unknown ref's clone fails and
#     sandbox_read_file and sandbox_exec are tool errors `the clone failed: unknown ref` (409);
#   - raw curl checks of the protocol edges: parse error, invalid request, batch, unknown method,
#     bad params, notification 202, GET/DELETE 405, 401 with WWW-Authenticate, Origin (403 for a
#     rebound name), unsupported MCP-Protocol-Version (-32022 with the revisions), 2026-07-28
#     without initialize and its mirrored headers (-32020), Content-Type, a sandbox token, at
#     most 64 tool calls in flight (70 at once: 6 get 503), 413.
# Network sl-t-mcp, subnet 10.213.31.0/24.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup

MCP_DIR=$SLUICE_SRC/tests/mcp
if ! command -v node >/dev/null || [ ! -d "$MCP_DIR/node_modules/@modelcontextprotocol/sdk" ] ||
  [ ! -d "$MCP_DIR/node_modules/@modelcontextprotocol/client" ]; then
  fx_bail "node and tests/mcp/node_modules (the MCP SDKs) are installed: run tools/deps.sh test"
fi

# A git platform: the sandboxes clone their repository, in the background.
fx_git_start acme/other acme/widget
SBX_REPOS=acme/other sbx_setup sl-t-mcp 31 --git-url "$FX_GIT_URL" --git-token "$GIT_TOKEN"
MCP_URL=http://127.0.0.1:$SBX_CPORT/mcp

# alice's own environment: a secret variable and a credential bob must never see.
ALICE_SECRET="alice-secret-$(fx_random_hex 24)"
ALICE_CRED="Bearer alice-cred-$(fx_random_hex 24)"
doc=$(ALICE_SECRET=$ALICE_SECRET ALICE_CRED=$ALICE_CRED SBX_IMAGE=$SBX_IMAGE "$FX_PYTHON" -c '
import json, os
e = os.environ
print(json.dumps({"name": "alice-env", "scope": "user", "base_image": e["SBX_IMAGE"],
                  "network": "on",
                  "env": [{"name": "ALICE_SECRET", "value": e["ALICE_SECRET"], "secret": True}],
                  "egress": {"default": "deny", "rules": [
                      {"host": "api.example.com", "methods": ["GET"],
                       "credential": {"header": "Authorization", "value": e["ALICE_CRED"]}}]}}))')
SBX_WHO=alice sbx_api POST /api/v1/environments "$doc" >/dev/null
check_api "alice creates her environment alice-env" 201
ALICE_ENV_ID=$(sbx_field 'd["id"]')

# --- the SDK clients: 1.x with initialize (2025-11-25), 2.x stateless (2026-07-28) --------------
for era in handshake stateless; do
  out=$FX_WORK/client-$era.out
  rc=0
  (cd "$MCP_DIR" && MCP_ERA=$era MCP_URL=$MCP_URL TOK_root=$SBX_TOK_root \
    TOK_alice=$SBX_TOK_alice TOK_bob=$SBX_TOK_bob REPO=$SBX_REPO SECRET=$SBX_SECRET \
    CRED=$SBX_CRED ALICE_SECRET=$ALICE_SECRET ALICE_CRED=$ALICE_CRED ALICE_ENV_ID=$ALICE_ENV_ID \
    timeout 600 node client.mjs) >"$out" 2>&1 || rc=$?
  while IFS= read -r line; do
    case "$line" in
    "ok - "*) ok "mcp client ($era): ${line#ok - }" ;;
    "not ok - "*) not_ok "mcp client ($era): ${line#not ok - }" ;;
    *) echo "# $line" ;;
    esac
  done <"$out"
  check_eq "the SDK client ($era) exits 0" "$rc" 0
  check "the client ($era) ran to its last check" grep -qE '^(not )?ok - an unknown tool' "$out"
done

# --- the clone in the background, through the SDK (1.x) ----------------------------------------
# The git server stopped: sandbox_create answers, and sandbox_exec waits until it goes on.
out=$FX_WORK/client-clone.out
kill -STOP -- "-$FX_FCGI_PID"
(cd "$MCP_DIR" && MCP_SCENARIO=clone MCP_URL=$MCP_URL TOK_alice=$SBX_TOK_alice REPO=$SBX_REPO \
  MAIN_SHA=$FX_GIT_MAIN_SHA timeout 300 node client.mjs) >"$out" 2>&1 &
clone_pid=$!
if fx_wait 120 grep -q '^# waiting-for-clone' "$out"; then
  sleep 3
fi
kill -CONT -- "-$FX_FCGI_PID"
rc=0
wait "$clone_pid" || rc=$?
while IFS= read -r line; do
  case "$line" in
  "ok - "*) ok "mcp client (clone): ${line#ok - }" ;;
  "not ok - "*) not_ok "mcp client (clone): ${line#not ok - }" ;;
  *) echo "# $line" ;;
  esac
done <"$out"
check_eq "the SDK client (clone) exits 0" "$rc" 0
check "the client (clone) ran to its last check" grep -qE '^ok - the clone scenario ran to its end' "$out"

# --- raw protocol edges ----------------------------------------------------------------------
MCP_BODY=$FX_WORK/mcp.body
MCP_HDRS=$FX_WORK/mcp.headers
# mcp_post BODY [CURL ARGS...] : POST /mcp with the SDK's headers, as alice; the variables
# AUTH, CT and ACCEPT replace the Authorization, Content-Type and Accept values ("" leaves the
# header out); ARGS add headers. Sets MCP_STATUS, MCP_BODY, MCP_HDRS.
mcp_post() {
  local body=$1 hdrs=()
  shift
  local auth=${AUTH-Bearer $SBX_TOK_alice} ct=${CT-application/json}
  local accept=${ACCEPT-application/json, text/event-stream}
  [ -z "$auth" ] || hdrs+=(-H "Authorization: $auth")
  [ -z "$ct" ] || hdrs+=(-H "Content-Type: $ct")
  [ -z "$accept" ] || hdrs+=(-H "Accept: $accept")
  MCP_STATUS=$(curl -q -sS --max-time 30 -o "$MCP_BODY" -D "$MCP_HDRS" -w '%{http_code}' \
    "${hdrs[@]}" "$@" --data-binary "$body" "$MCP_URL" 2>"$FX_WORK/curl.err") || true
}
mcp_field() {
  fx_json "$MCP_BODY" "$1" || true
}
# check_rpc DESCRIPTION STATUS CODE : the last answer is STATUS with JSON-RPC error CODE.
check_rpc() {
  local got
  got="$MCP_STATUS $(mcp_field 'd["error"]["code"]')"
  check_eq "$1" "$got" "$2 $3"
  [ "$FX_LAST" = 0 ] || echo "#   body: $(head -c 300 "$MCP_BODY")"
}

mcp_post '{"jsonrpc":"2.0","id":1,"method":"tools/list"'
check_rpc "malformed JSON → 400, -32700 parse error" 400 -32700
check_eq "... with a null id" "$(mcp_field 'd["id"]')" null
mcp_post '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
check_rpc "a batch → 400, -32600 (2025-11-25 has no batches)" 400 -32600
mcp_post '{"jsonrpc":"2.0","id":1}'
check_rpc "no method → 400, -32600" 400 -32600
mcp_post '{"jsonrpc":"2.0","id":"u1","method":"resources/list"}'
check_rpc "unknown method → 200, -32601" 200 -32601
check_eq "... answered with the request's id" "$(mcp_field 'd["id"]')" u1
mcp_post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}'
check_rpc "tools/call of an unknown tool → -32602" 200 -32602
mcp_post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_job","arguments":[1]}}'
check_rpc "tools/call with arguments that are not an object → -32602" 200 -32602
mcp_post '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"owner":"acme","repo":"widget","sandbox_id":"x","command":"id","timeout_seconds":"soon"}}}'
check_eq "arguments against the schema → a tool error naming the field" \
  "$MCP_STATUS $(mcp_field '[d["result"]["isError"], d["result"]["content"][0]["text"]]')" \
  '200 [true, "invalid arguments: timeout_seconds: must be an integer"]'
mcp_post '{"jsonrpc":"2.0","method":"notifications/initialized"}'
check_eq "a notification → 202 without a body" "$MCP_STATUS $(wc -c <"$MCP_BODY")" "202 0"
mcp_post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H 'MCP-Protocol-Version: 2025-11-25'
check_eq "ping with MCP-Protocol-Version 2025-11-25 → 200 {}" \
  "$MCP_STATUS $(mcp_field 'd["result"]')" "200 {}"
check_match "... Content-Type application/json" "$(cat "$MCP_HDRS")" $'[Cc]ontent-[Tt]ype: application/json\r'
mcp_post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H 'MCP-Protocol-Version: 1900-01-01'
check_rpc "an unsupported MCP-Protocol-Version → 400, -32022" 400 -32022
check_eq "... naming it and the revisions spoken" \
  "$(mcp_field '[d["error"]["data"]["requested"]] + d["error"]["data"]["supported"]')" \
  '["1900-01-01", "2026-07-28", "2025-11-25", "2025-06-18"]'
# 2026-07-28 with curl: the mirrored headers are checked against the body.
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
mcp_post "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{$META}}" \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list'
check_eq "2026-07-28 tools/list without initialize → the tools, complete, with cache hints" \
  "$MCP_STATUS $(mcp_field '[len(d["result"]["tools"]), d["result"]["resultType"], d["result"]["ttlMs"], d["result"]["cacheScope"]]')" \
  '200 [9, "complete", 0, "private"]'
mcp_post "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{$META}}" \
  -H 'MCP-Protocol-Version: 2026-07-28'
check_rpc "2026-07-28 without Mcp-Method → 400, -32020" 400 -32020
mcp_post "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{$META,\"name\":\"list_environments\"}}" \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: get_job'
check_rpc "2026-07-28 with an Mcp-Name that is not the body's tool → 400, -32020" 400 -32020
CT=text/plain mcp_post '{"jsonrpc":"2.0","id":4,"method":"ping"}'
check_rpc "Content-Type text/plain → 415" 415 -32600
ACCEPT=text/event-stream mcp_post '{"jsonrpc":"2.0","id":4,"method":"ping"}'
check_rpc "Accept without application/json → 406" 406 -32600
mcp_post '{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
check_eq "initialize asking for 2024-11-05 → our latest, 2025-11-25" \
  "$(mcp_field 'd["result"]["protocolVersion"]')" 2025-11-25
check "... and no Mcp-Session-Id" bash -c "! grep -qi '^mcp-session-id' '$MCP_HDRS'"

for m in GET DELETE; do
  MCP_STATUS=$(curl -q -sS --max-time 10 -o "$MCP_BODY" -D "$MCP_HDRS" -w '%{http_code}' -X "$m" \
    -H "Authorization: Bearer $SBX_TOK_alice" -H 'Accept: text/event-stream' "$MCP_URL") || true
  check_eq "$m /mcp → 405" "$MCP_STATUS" 405
  check_match "... with Allow: POST" "$(cat "$MCP_HDRS")" $'[Aa]llow: POST\r'
done

AUTH='' mcp_post '{"jsonrpc":"2.0","id":6,"method":"ping"}'
check_eq "no token → 401" "$MCP_STATUS" 401
check_match "... with WWW-Authenticate: Bearer" "$(cat "$MCP_HDRS")" $'[Ww][Ww][Ww]-[Aa]uthenticate: Bearer realm="sluice"\r'
check_eq "... and the REST text" "$(mcp_field 'd["message"]')" \
  "an API token is required: Authorization: Bearer TOKEN"
AUTH='Bearer wrong-token' mcp_post '{"jsonrpc":"2.0","id":6,"method":"ping"}'
check_eq "a wrong token → 401 unknown API token" "$MCP_STATUS $(mcp_field 'd["message"]')" \
  "401 unknown API token"

mcp_post '{"jsonrpc":"2.0","id":7,"method":"ping"}' -H "Origin: http://127.0.0.1:$SBX_CPORT"
check_eq "Origin: the request's own loopback origin → 200" "$MCP_STATUS" 200
mcp_post '{"jsonrpc":"2.0","id":7,"method":"ping"}' -H "Origin: http://rebound.example:$SBX_CPORT" \
  -H "Host: rebound.example:$SBX_CPORT"
check_rpc "Origin: a rebound DNS name (Host matching it) → 403" 403 -32600
AUTH='' mcp_post '{"jsonrpc":"2.0","id":7,"method":"ping"}' -H 'Origin: http://evil.example'
check_eq "... checked before the token (403, not 401)" "$MCP_STATUS" 403

# A sandbox's proxy token is not an API token, on /mcp as on REST.
if sbx_create sbx-off main; then
  tok=$(sbx_token "$SBX_ID" || true)
  AUTH="Bearer ${tok:-none}" mcp_post '{"jsonrpc":"2.0","id":8,"method":"tools/list"}'
  check_eq "a sandbox token on /mcp → 403 as on REST" "$MCP_STATUS $(mcp_field 'd["message"]')" \
    "403 sandbox tokens cannot use the API nor start sandboxes"
  # At most SL_MCP_MAX_CALLS (64) tool calls in flight: 70 slow ones at once, 6 turned away.
  call=$(I=$SBX_ID R=$SBX_REPO "$FX_PYTHON" -c '
import json, os
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "sandbox_exec", "arguments": {"owner": os.environ["R"].split("/")[0],
                                          "repo": os.environ["R"].split("/")[1],
                                          "sandbox_id": os.environ["I"],
                                          "command": "sleep 6; echo done"}}}))')
  mkdir -p "$FX_WORK/flood"
  pids=()
  for i in $(seq 1 70); do
    curl -q -sS --max-time 120 -o "$FX_WORK/flood/$i.body" -w '%{http_code}\n' \
      -H "Authorization: Bearer $SBX_TOK_alice" -H 'Content-Type: application/json' \
      --data-binary "$call" "$MCP_URL" >"$FX_WORK/flood/$i.code" 2>/dev/null &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  n200=$(cat "$FX_WORK"/flood/*.code | grep -c '^200$' || true)
  n503=$(cat "$FX_WORK"/flood/*.code | grep -c '^503$' || true)
  check_eq "70 tool calls at once: 64 run, 6 get 503" "$n200 $n503" "64 6"
  check_eq "... the 64 ran to the end" "$(grep -l '"exitCode":0' "$FX_WORK"/flood/*.body | wc -l)" 64
  check_eq "... the 6 say so in a JSON-RPC error -32000" \
    "$(grep -l '"code":-32000,"message":"too many tool calls at once; try again"' "$FX_WORK"/flood/*.body | wc -l)" 6
  mcp_post "$call"
  check_eq "... and afterwards calls run again" "$MCP_STATUS $(mcp_field 'd["result"]["structuredContent"]["stdout"]')" \
    "200 done"
  sbx_close "$SBX_ID" || true
  check_api "that sandbox closes" 204
else
  not_ok "a sandbox for the sandbox-token check"
  sbx_show
fi

# The request body limit is the REST API's (64 MiB → 413).
head -c $((64 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$FX_WORK/big.json"
MCP_STATUS=$(curl -q -sS --max-time 60 -o "$MCP_BODY" -w '%{http_code}' \
  -H "Authorization: Bearer $SBX_TOK_alice" -H 'Content-Type: application/json' \
  --data-binary "@$FX_WORK/big.json" "$MCP_URL" 2>"$FX_WORK/curl.err") || true
rm -f "$FX_WORK/big.json"
check_eq "a body over 64 MiB → 413" "$MCP_STATUS" 413

check "no sandbox container is left over" sbx_no_leftovers
sbx_shutdown_checks
fx_done
