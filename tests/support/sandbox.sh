# shellcheck shell=bash disable=SC2034
# SPDX-License-Identifier: Apache-2.0
#
# tests/support/sandbox.sh - shared setup of the sandbox tests (docs/reference/api.md §5.3, docs/reference/containers.md §5.4): origin.py,
# `sluice control` with its own Docker network, `sluice proxy` on that network's gateway, users,
# environments, and helpers for the sandbox REST API. Sourced after fixture.sh; it sources
# gitserver.sh itself (the git platform a test's sandboxes may clone from: fx_git_start). Every
# test uses its own network name and subnet (ctest runs tests in parallel): `sbx_setup NET N`
# uses 10.213.N.0/24.
#
#   sbx_setup NET N [CONTROL ARGS...]  everything below, in order; skips the whole test (exit 0)
#                              when no Docker daemon answers or the sandbox image is missing
#     sbx_prepare              origin.py, the data directory (CA, key), users root, alice, bob
#                              (SBX_TOK_*), SBX_PPORT, SBX_SOCK, SBX_CRED, SBX_SECRET
#     sbx_control_start ARGS   sluice control (SBX_CPORT, SBX_CONTROL_PID, SBX_CONTROL_LOG)
#     sbx_wait_ready           GET /api/v1/status until sandboxes.ready (≤ 30 s), else bail
#     sbx_proxy_start          sluice proxy on SBX_GW:SBX_PPORT (SBX_PROXY_PID, SBX_PROXY_LOG,
#                              SBX_AUDIT), same admin socket SBX_SOCK every time; it resolves
#                              a.sluice.test, b.sluice.test and the names in SBX_NAMES
#                              (space-separated) on origin.py's ports to 127.0.0.1, and so each
#                              HOST:PORT of SBX_RESOLVE (another peer of the test: nginx);
#                              the array SBX_PROXY_EXTRA, when a test sets it, is added to its arguments
#                              at every start (a restart too), e.g. `--dns-listen GW:53
#                              --transparent GW`; unset, the proxy is the explicit one alone
#     sbx_env_setup            global environments `sbx` (network on, a.sluice.test allowed on
#                              origin.py's ports with credential SBX_CRED on TLS, env SBX_PLAIN and
#                              secret SBX_SECRET) and `sbx-off` (network off); registers SBX_REPO
#                              and every repository of SBX_REPOS (space-separated) with alice and
#                              bob as writers (sbx_repo_register)
#   sbx_repo_register REPO    as root: PUT the repository (private, main), alice and bob writers
#   sbx_api METHOD PATH [BODY]  a control-plane call as SBX_WHO (default alice; root, bob); PATH
#                              relative to the repo's sandboxes (`/ID/exec`) unless it starts with
#                              /api; sets SBX_STATUS, writes the body to SBX_BODY and prints it
#   sbx_create [ENV [REF]]     POST a sandbox (default env sbx, ref main); SBX_ID on 201
#   sbx_create_checked [ENV [REF]]  the same as a check; bails without a sandbox
#   sbx_exec ID CMD [TIMEOUT_MS [CWD [ENV_JSON]]]    POST exec (body in SBX_BODY)
#   sbx_read ID PATH, sbx_write ID PATH FILE [MODE], sbx_close ID
#   sbx_field EXPR             fx_json over SBX_BODY (`d`)
#   sbx_cid ID, sbx_ip ID, sbx_token ID   container id, address on the network, proxy token
#                              (from the container's Config.Env: exec output hides it)
#   sbx_host_curl ID TOKEN URL [ARGS]     curl from the host through the proxy at the gateway
#                              with --proxy-user ID:TOKEN (FX_CODE, FX_HDRS, FX_BODY as fx_curl)
#   sbx_leftovers              prints this test's containers (JSON list)
#   sbx_need_dev_image         DEV_IMAGE (SBX_DEV_IMAGE, default sluice/sandbox:bookworm-dev);
#                              skips the whole test when Docker answers without it
# The EXIT trap stops the control plane (SIGTERM), removes every container of this test, the
# network and the nftables table, then runs the fixture's cleanup.

# shellcheck source-path=SCRIPTDIR source=../support/gitserver.sh
source "$FX_SUPPORT/gitserver.sh"

SBX_IMAGE=${SBX_IMAGE:-sluice/sandbox:bookworm}
SBX_REPO=${SBX_REPO:-acme/widget}
SBX_WHO=alice

sbx_dockerctl() {
  "$FX_PYTHON" "$FX_SUPPORT/dockerctl.py" "$@"
}

# sbx_need_dev_image : DEV_IMAGE (SBX_DEV_IMAGE, default sluice/sandbox:bookworm-dev); when a
# Docker daemon answers but lacks that image, skips the whole test (exit 0).
sbx_need_dev_image() {
  DEV_IMAGE=${SBX_DEV_IMAGE:-sluice/sandbox:bookworm-dev}
  if sbx_dockerctl ping && ! sbx_dockerctl image-exists "$DEV_IMAGE"; then
    echo "1..0 # SKIP image $DEV_IMAGE is missing (tools/sandbox-image.sh)"
    exit 0
  fi
}

# sbx_prepare : what every control plane of a test needs before it starts: the origin, the data
# directory with its CA and encryption key, users root (admin), alice and bob with their tokens
# (SBX_TOK_*), the proxy's port and socket, a credential and a secret to look for.
sbx_prepare() {
  fx_origin_start || fx_bail "origin.py starts"
  SBX_DATA=$FX_WORK/sluice-data
  mkdir -p "$SBX_DATA"
  "$SLUICE_BIN" ca init --out "$SBX_DATA" >"$FX_WORK/ca-init.out" 2>&1 || {
    fx__dump "$FX_WORK/ca-init.out"
    fx_bail "sluice ca init"
  }
  FX_SLUICE_CA=$SBX_DATA/ca.pem
  SBX_KEY=$(head -c 32 /dev/urandom | base64 -w0)
  export SLUICE_ENCRYPTION_KEY=$SBX_KEY
  SBX_TOK_root=$("$SLUICE_BIN" user add root --admin --data "$SBX_DATA" 2>>"$FX_WORK/user.err") ||
    fx_bail "sluice user add root"
  SBX_TOK_alice=$("$SLUICE_BIN" user add alice --data "$SBX_DATA" 2>>"$FX_WORK/user.err") ||
    fx_bail "sluice user add alice"
  SBX_TOK_bob=$("$SLUICE_BIN" user add bob --data "$SBX_DATA" 2>>"$FX_WORK/user.err") ||
    fx_bail "sluice user add bob"
  SBX_PPORT=$(fx_free_port)
  SBX_SOCK=$FX_WORK/proxy.sock
  SBX_CRED="Bearer sbx-cred-$(fx_random_hex 24)"
  SBX_SECRET="sbx-secret-$(fx_random_hex 24)"
  SBX_CONTROL_N=0
  SBX_PROXY_N=0
}

# sbx_require_docker : skips the whole test (TAP "1..0 # SKIP", exit 0) when no Docker daemon
# answers or the sandbox image is missing.
sbx_require_docker() {
  if ! sbx_dockerctl ping; then
    echo "1..0 # SKIP no Docker daemon answers on /var/run/docker.sock"
    exit 0
  fi
  if ! sbx_dockerctl image-exists "$SBX_IMAGE"; then
    echo "1..0 # SKIP image $SBX_IMAGE is missing"
    exit 0
  fi
}

sbx_setup() {
  SBX_NET=$1
  SBX_N=$2
  shift 2
  SBX_SUBNET=10.213.$SBX_N.0/24
  SBX_GW=10.213.$SBX_N.1
  SBX_TABLE=sluice_${SBX_NET//[^a-zA-Z0-9]/_}
  sbx_require_docker
  trap sbx__cleanup EXIT
  # Leftovers of an earlier run that was killed (our own names only).
  sbx_dockerctl cleanup "$SBX_NET" | sed 's/^/# stale: /'
  nft delete table inet "$SBX_TABLE" 2>/dev/null || true
  sbx_prepare
  sbx_control_start "$@" || fx_bail "sluice control starts"
  sbx_wait_ready || fx_bail "sandboxes ready"
  sbx_proxy_start || fx_bail "sluice proxy starts on the gateway"
  sbx_env_setup || fx_bail "environments created"
}

sbx__cleanup() {
  local rc=$?
  set +e
  trap - EXIT
  if [ -n "${SBX_CONTROL_PID:-}" ] && kill -0 "$SBX_CONTROL_PID" 2>/dev/null; then
    sbx_control_stop >/dev/null
  fi
  if [ -n "${SBX_NET:-}" ]; then
    sbx_dockerctl cleanup "$SBX_NET" | sed 's/^/# cleanup: /'
    nft delete table inet "$SBX_TABLE" 2>/dev/null
  fi
  if [ "$rc" != 0 ]; then
    fx__dump "${SBX_CONTROL_LOG:-}" "${SBX_PROXY_LOG:-}"
  fi
  (exit "$rc")
  fx__cleanup
}

# sbx_control_start [ARGS...] : ARGS replace the extra arguments of the first start when given;
# a restart without ARGS reuses them.
sbx_control_start() {
  if [ $# -gt 0 ] || [ -z "${SBX_CONTROL_ARGS+x}" ]; then
    SBX_CONTROL_ARGS=("$@")
  fi
  SBX_CONTROL_N=$((SBX_CONTROL_N + 1))
  SBX_CPORT=$(fx_free_port)
  SBX_CONTROL_LOG=$FX_WORK/control$SBX_CONTROL_N.log
  "$SLUICE_BIN" control --listen "127.0.0.1:$SBX_CPORT" --data "$SBX_DATA" \
    --proxy-admin-socket "$SBX_SOCK" --network "$SBX_NET" --subnet "$SBX_SUBNET" \
    --proxy-port "$SBX_PPORT" --image "$SBX_IMAGE" --log-level debug \
    "${SBX_CONTROL_ARGS[@]}" >"$SBX_CONTROL_LOG" 2>&1 &
  SBX_CONTROL_PID=$!
  FX_PIDS+=("$SBX_CONTROL_PID")
  if ! fx_wait 15 sbx__healthy; then
    echo "# sluice control is not answering /healthz on 127.0.0.1:$SBX_CPORT"
    fx__dump "$SBX_CONTROL_LOG"
    return 1
  fi
}

sbx__healthy() {
  kill -0 "$SBX_CONTROL_PID" 2>/dev/null || return 1
  [ "$(curl -q -s --max-time 2 -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$SBX_CPORT/healthz")" = 200 ]
}

# sbx_control_stop : SIGTERM, wait ≤ 30 s (SIGKILL after). SBX_CONTROL_EXIT = status.
sbx_control_stop() {
  local rc=0
  fx_stop_pid "$SBX_CONTROL_PID" 30 || rc=$?
  SBX_CONTROL_EXIT=$FX_EXIT
  return "$rc"
}

sbx__ready() {
  SBX_WHO=root sbx_api GET /api/v1/status >/dev/null
  [ "$SBX_STATUS" = 200 ] && [ "$(sbx_field 'd["sandboxes"]["ready"]')" = true ]
}

sbx_wait_ready() {
  if ! fx_wait 30 sbx__ready; then
    echo "# /api/v1/status never said sandboxes.ready: status $SBX_STATUS"
    head -c 600 "$SBX_BODY" | sed 's/^/#   /'
    echo
    fx__dump "$SBX_CONTROL_LOG"
    return 1
  fi
  local net gw
  net=$(sbx_field 'd["sandboxes"].get("network")')
  gw=$(sbx_field 'd["sandboxes"].get("gateway")')
  if [ "$net" != "$SBX_NET" ] || [ "$gw" != "$SBX_GW" ]; then
    echo "# status says network '$net' gateway '$gw', want '$SBX_NET' '$SBX_GW'"
  fi
}

sbx_proxy_start() {
  local args=() h p
  SBX_PROXY_N=$((SBX_PROXY_N + 1))
  SBX_PROXY_LOG=$FX_WORK/proxy$SBX_PROXY_N.log
  SBX_AUDIT=$FX_WORK/audit.log
  FX_AUDIT=$SBX_AUDIT
  for h in a.sluice.test b.sluice.test ${SBX_NAMES:-}; do
    for p in $FX_PY_TLS_PORT $FX_PY_HTTP_PORT; do
      args+=(--resolve "$h:$p:127.0.0.1")
    done
  done
  for h in ${SBX_RESOLVE:-}; do
    args+=(--resolve "$h:127.0.0.1")
  done
  if [ -n "${FX_GIT_PORT:-}" ]; then
    args+=(--resolve "git.sluice.test:$FX_GIT_PORT:127.0.0.1")
  fi
  rm -f "$SBX_SOCK"
  "$SLUICE_BIN" proxy --listen "$SBX_GW:$SBX_PPORT" --data "$SBX_DATA" \
    --admin-socket "$SBX_SOCK" --audit-log "$SBX_AUDIT" --upstream-ca "$FX_TEST_CA" \
    --allow-upstream 127.0.0.0/8 --log-level debug "${args[@]}" \
    ${SBX_PROXY_EXTRA[@]+"${SBX_PROXY_EXTRA[@]}"} >"$FX_WORK/proxy$SBX_PROXY_N.stdout" 2>"$SBX_PROXY_LOG" &
  SBX_PROXY_PID=$!
  FX_PIDS+=("$SBX_PROXY_PID")
  if ! fx_wait 10 sbx__proxy_listening; then
    echo "# sluice proxy is not accepting on $SBX_GW:$SBX_PPORT"
    fx__dump "$SBX_PROXY_LOG"
    return 1
  fi
  # The control plane pushes the snapshot when the admin socket appears: wait for a version.
  fx_wait 10 sbx__proxy_has_policy || echo "# the proxy has no policy 10 s after start"
}

sbx__proxy_listening() {
  kill -0 "$SBX_PROXY_PID" 2>/dev/null && fx_port_open "$SBX_PPORT" "$SBX_GW"
}

sbx__proxy_has_policy() {
  local v
  v=$(curl -q -s --max-time 2 --unix-socket "$SBX_SOCK" http://localhost/v1/status 2>/dev/null |
    "$FX_PYTHON" -c 'import json,sys; print(json.load(sys.stdin).get("version") or 0)' 2>/dev/null)
  [ "${v:-0}" -gt 0 ] 2>/dev/null
}

# sbx_proxy_kill : SIGKILL to the proxy (a crash, not a clean stop).
sbx_proxy_kill() {
  kill -KILL "$SBX_PROXY_PID" 2>/dev/null
  wait "$SBX_PROXY_PID" 2>/dev/null || true
}

sbx_env_setup() {
  local doc
  doc=$(SBX_IMAGE=$SBX_IMAGE SBX_CRED=$SBX_CRED SBX_SECRET=$SBX_SECRET "$FX_PYTHON" -c '
import json, os
e = os.environ
rules = [{"host": "a.sluice.test:%s" % e["FX_PY_TLS_PORT"],
          "credential": {"header": "Authorization", "value": e["SBX_CRED"]}},
         {"host": "a.sluice.test:%s" % e["FX_PY_HTTP_PORT"]}]
print(json.dumps({"name": "sbx", "scope": "global", "base_image": e["SBX_IMAGE"],
                  "network": "on",
                  "env": [{"name": "SBX_PLAIN", "value": "plain-value", "secret": False},
                          {"name": "SBX_SECRET", "value": e["SBX_SECRET"], "secret": True}],
                  "egress": {"default": "deny", "rules": rules}}))')
  SBX_WHO=root sbx_api POST /api/v1/environments "$doc" >/dev/null
  if [ "$SBX_STATUS" != 201 ]; then
    echo "# POST environment sbx: $SBX_STATUS $(head -c 300 "$SBX_BODY")"
    return 1
  fi
  SBX_ENV_ID=$(sbx_field 'd["id"]')
  SBX_WHO=root sbx_api POST /api/v1/environments \
    "{\"name\":\"sbx-off\",\"scope\":\"global\",\"base_image\":\"$SBX_IMAGE\",\"network\":\"off\"}" \
    >/dev/null
  if [ "$SBX_STATUS" != 201 ]; then
    echo "# POST environment sbx-off: $SBX_STATUS $(head -c 300 "$SBX_BODY")"
    return 1
  fi
  SBX_ENV_OFF_ID=$(sbx_field 'd["id"]')
  local r
  for r in $SBX_REPO ${SBX_REPOS:-}; do
    sbx_repo_register "$r" || return 1
  done
}

sbx_repo_register() {
  local who
  SBX_WHO=root sbx_api PUT "/api/v1/repos/$1" '{"visibility":"private","default_branch":"main"}'     >/dev/null
  if [ "$SBX_STATUS" != 201 ] && [ "$SBX_STATUS" != 200 ]; then
    echo "# PUT repository $1: $SBX_STATUS $(head -c 300 "$SBX_BODY")"
    return 1
  fi
  for who in alice bob; do
    SBX_WHO=root sbx_api PUT "/api/v1/repos/$1/members/$who" '{"role":"write"}' >/dev/null
    if [ "$SBX_STATUS" != 201 ] && [ "$SBX_STATUS" != 200 ]; then
      echo "# PUT member $who of $1: $SBX_STATUS $(head -c 300 "$SBX_BODY")"
      return 1
    fi
  done
}

# sbx_api METHOD PATH [BODY|@FILE] : see the header. SBX_API_TIMEOUT (default 240 s) bounds it.
sbx_api() {
  local method=$1 path=$2 tokvar="SBX_TOK_$SBX_WHO" data=()
  SBX_BODY=$FX_WORK/api.body
  : >"$SBX_BODY"
  case "$path" in
  /api/*) ;;
  *) path=/api/v1/repos/$SBX_REPO/sandboxes$path ;;
  esac
  if [ $# -ge 3 ]; then
    data=(-H 'Content-Type: application/json' --data-binary "$3")
  fi
  SBX_STATUS=$(curl -q -sS --max-time "${SBX_API_TIMEOUT:-240}" -X "$method" \
    -H "Authorization: Bearer ${!tokvar}" "${data[@]}" -o "$SBX_BODY" -w '%{http_code}' \
    "http://127.0.0.1:$SBX_CPORT$path" 2>"$FX_WORK/api.err") || true
  SBX_STATUS=${SBX_STATUS:-000}
  cat "$SBX_BODY"
}

sbx_field() {
  fx_json "$SBX_BODY" "$1"
}

# sbx_show : the last API answer, as comments (for failure messages).
sbx_show() {
  echo "#   status $SBX_STATUS body: $(head -c 400 "$SBX_BODY" | tr -c '[:print:]' '.')"
}

# sbx_create [ENV [REF]] : SBX_ID on 201 (fails otherwise).
sbx_create() {
  local env=${1:-sbx} ref=${2:-main}
  SBX_ID=
  sbx_api POST "" "{\"ref\":\"$ref\",\"environment\":\"$env\"}" >/dev/null
  [ "$SBX_STATUS" = 201 ] || return 1
  SBX_ID=$(sbx_field 'd["id"]')
  [ -n "$SBX_ID" ]
}

# sbx_create_checked [ENV [REF]] : sbx_create as a check ("create a sandbox (201)"); bails when
# no sandbox was created.
sbx_create_checked() {
  sbx_create "$@" || true
  check_api "create a sandbox (201)" 201
  [ -n "$SBX_ID" ] || fx_bail "no sandbox to test"
}

# sbx_exec ID CMD [TIMEOUT_MS [CWD [ENV_JSON]]] : POST exec; body in SBX_BODY (not printed).
sbx_exec() {
  local body
  body=$(CMD=$2 TMO=${3:-} CWD=${4:-__none__} ENVJ=${5:-} "$FX_PYTHON" -c '
import json, os
e = os.environ
d = {"cmd": e["CMD"]}
if e["TMO"]:
    d["timeoutMs"] = int(e["TMO"])
if e["CWD"] != "__none__":
    d["cwd"] = e["CWD"]
if e["ENVJ"]:
    d["env"] = json.loads(e["ENVJ"])
print(json.dumps(d))')
  sbx_api POST "/$1/exec" "$body" >/dev/null
}

# sbx_run ID CMD : exec and print stdout (nothing when the call failed).
sbx_run() {
  sbx_exec "$1" "$2" >/dev/null
  [ "$SBX_STATUS" = 200 ] && sbx_field 'd["stdout"]'
}

sbx_read() {
  sbx_api POST "/$1/read" "$(P=$2 "$FX_PYTHON" -c 'import json,os; print(json.dumps({"path": os.environ["P"]}))')" \
    >/dev/null
}

# sbx_write ID PATH FILE [MODE] : MODE is sent as given (a JSON value: 493 or "0755").
sbx_write() {
  local f=$FX_WORK/write.json
  P=$2 F=$3 M=${4:-} "$FX_PYTHON" -c '
import base64, json, os
e = os.environ
d = {"path": e["P"], "content": base64.b64encode(open(e["F"], "rb").read()).decode()}
if e["M"]:
    d["mode"] = json.loads(e["M"])
print(json.dumps(d))' >"$f"
  sbx_api POST "/$1/write" "@$f" >/dev/null
}

sbx_close() {
  sbx_api POST "/$1/close" >/dev/null
  [ "$SBX_STATUS" = 204 ]
}

sbx_cid() {
  sbx_dockerctl cid "$1"
}

sbx_ip() {
  local cid
  cid=$(sbx_cid "$1") || return 1
  sbx_dockerctl ip "$cid" "$SBX_NET"
}

# sbx_token ID : the proxy token in the container's HTTP_PROXY (http://ID:TOKEN@GW:PORT).
sbx_token() {
  local cid
  cid=$(sbx_cid "$1") || return 1
  sbx_dockerctl env "$cid" | sed -n 's|^HTTP_PROXY=http://[^:]*:\([^@]*\)@.*|\1|p' | head -n 1
}

sbx_container_gone() {
  ! sbx_cid "$1" >/dev/null
}

sbx_leftovers() {
  sbx_dockerctl ls "$SBX_NET"
}

sbx_no_leftovers() {
  [ "$(sbx_leftovers)" = "[]" ]
}

# sbx_host_curl ID TOKEN URL [ARGS...] : curl on the host through the proxy at the gateway.
sbx_host_curl() {
  local id=$1 tok=$2 url=$3 w
  shift 3
  fx__curl_reset
  w=$(curl -q -sS --max-time 10 --proxy "http://$SBX_GW:$SBX_PPORT" --proxy-user "$id:$tok" \
    --cacert "$FX_SLUICE_CA" -D "$FX_HDRS" -o "$FX_BODY" \
    -w '%{http_code} %{http_connect}' "$@" "$url" 2>"$FX_ERR") || FX_RC=$?
  read -r FX_CODE FX_CONNECT_CODE <<<"$w" || true
  FX_CODE=${FX_CODE:-000}
  FX_CONNECT_CODE=${FX_CONNECT_CODE:-000}
  if [ "$FX_CODE" = 000 ] && [ "$FX_CONNECT_CODE" != 000 ]; then
    FX_CODE=$FX_CONNECT_CODE
  fi
}

# sbx_curl_from IP ID TOKEN PROBE : from a helper container at address IP on the sandbox
# network (the address a closed sandbox had: the proxy binds a sandbox's token to its address),
# a plain-HTTP request through the proxy at the gateway as ID:TOKEN to origin.py's /hello with
# X-Probe PROBE. Prints the status (000 when the proxy did not answer).
sbx_curl_from() {
  local out
  out=$(sbx_dockerctl oneshot "$SBX_NET-probe" "$SBX_NET" "$1" "$SBX_NET" "$SBX_IMAGE" \
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "X-Probe: $4" \
    --proxy "http://$2:$3@$SBX_GW:$SBX_PPORT" "$(sbx_url_http /hello)" 2>&1) || true
  echo "${out:0:3}"
  [ ${#out} -le 3 ] || echo "#   helper output: ${out:3:300}" >&2
}

# sbx_origin_count PROBE : origin.py requests whose X-Probe header (in headers) contains PROBE.
sbx_origin_count() {
  fx_jsonl_count "$FX_ORIGIN_LOG" "headers~$1"
}

# sbx_url_tls PATH / sbx_url_http PATH : origin.py through a.sluice.test.
sbx_url_tls() {
  echo "https://a.sluice.test:$FX_PY_TLS_PORT$1"
}
sbx_url_http() {
  echo "http://a.sluice.test:$FX_PY_HTTP_PORT$1"
}

# check_api DESCRIPTION STATUS [FIELD-EXPR WANT] : the last sbx_api answered STATUS (and, when
# given, sbx_field EXPR prints WANT).
check_api() {
  local got=""
  if [ $# -ge 4 ]; then got=$(sbx_field "$3"); fi
  if [ "$SBX_STATUS" = "$2" ] && { [ $# -lt 4 ] || [ "$got" = "$4" ]; }; then
    ok "$1"
    FX_LAST=0
  else
    not_ok "$1"
    if [ $# -ge 4 ]; then
      echo "#   want status $2 and $3 = \"$4\" (got \"$got\")"
    else
      echo "#   want status $2"
    fi
    sbx_show
    FX_LAST=1
  fi
  return 0
}

# sbx_shutdown_checks : SIGTERM to the control plane: exit 0 and the nftables table removed.
sbx_shutdown_checks() {
  sbx_control_stop
  check_eq "control plane exits 0 on SIGTERM" "$SBX_CONTROL_EXIT" 0
  check "the nftables table inet $SBX_TABLE is removed on clean shutdown" \
    sbx__no_table
}

sbx__no_table() {
  ! nft list table inet "$SBX_TABLE" >/dev/null 2>&1
}
