#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_placeholders.sh - placeholder credentials inside real sandboxes
# (SECURITY.md promise 2a, docs/reference/api.md §5.1, docs/reference/containers.md §5.4): an
# environment on the image sluice/sandbox:bookworm-dev (its base_image) with a credential whose
# placeholder_env is OPENAI_API_KEY. Python (requests — pip's vendored copy when the module is
# not installed, as in that image — and http.client) and Node's https take the key from their
# environment and the proxy from HTTPS_PROXY, as SDKs do, and call origin.py over TLS: the
# origin gets the real value; the container's Config.Env, every process's environment, its
# files and the clients' output hold only the placeholder. The placeholder sent to another
# allowed host is refused placeholder-misuse (audited) and nothing reaches that host. Two
# sandboxes get different placeholders, each replaced for its own sandbox only. No log holds
# the value or an unmasked placeholder. Network sl-t-ph, subnet 10.213.34.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
sbx_need_dev_image
fx_setup
# api.sluice.test: the placeholder credential's host; other.sluice.test: allowed, no credential.
SBX_NAMES="api.sluice.test other.sluice.test"
sbx_setup sl-t-ph 34

VALUE="sk-real-$(fx_random_hex 24)"
API=https://api.sluice.test:$FX_PY_TLS_PORT
OTHER=https://other.sluice.test:$FX_PY_TLS_PORT
PH_RE='^sluice-ph-[a-z2-7]{40}$'
NL=$'\n'

# --- the environment --------------------------------------------------------------------------
doc=$(DEV=$DEV_IMAGE VALUE=$VALUE "$FX_PYTHON" -c '
import json, os
e = os.environ
port = e["FX_PY_TLS_PORT"]
print(json.dumps({"name": "ph", "scope": "global", "base_image": e["DEV"], "network": "on",
                  "egress": {"default": "deny", "rules": [
                      {"host": "api.sluice.test:%s" % port,
                       "credential": {"header": "Authorization", "value": e["VALUE"],
                                      "placeholder_env": "OPENAI_API_KEY"}},
                      {"host": "other.sluice.test:%s" % port}]}}))')
SBX_WHO=root sbx_api POST /api/v1/environments "$doc" >/dev/null
check_api "POST environment ph (base_image $DEV_IMAGE, a placeholder credential) → 201" 201
check_eq "the answer names the variable, never the value" \
  "$(sbx_field '[d["egress"]["rules"][0]["credential"].get(k) for k in ("placeholder_env", "has_value", "value")]')" \
  '["OPENAI_API_KEY", true, null]'
check "the value is in no API answer" bash -c "! grep -qF -- '$VALUE' '$SBX_BODY'"

# --- two sandboxes, two placeholders ------------------------------------------------------------
sbx_create ph || true
check_api "create sandbox 1 in ph → 201" 201
s1=$SBX_ID
sbx_create ph || true
check_api "create sandbox 2 in ph → 201" 201
s2=$SBX_ID
if [ -z "$s1" ] || [ -z "$s2" ]; then fx_bail "no sandboxes to test"; fi
cid1=$(sbx_cid "$s1" || true)
cid2=$(sbx_cid "$s2" || true)
check_eq "sandbox 1 runs the environment's base_image" \
  "$(sbx_dockerctl inspect "$cid1" | "$FX_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Config"]["Image"])')" \
  "$DEV_IMAGE"
env1=$(sbx_dockerctl env "$cid1" || true)
env2=$(sbx_dockerctl env "$cid2" || true)
ph1=$(sed -n 's/^OPENAI_API_KEY=//p' <<<"$env1")
ph2=$(sed -n 's/^OPENAI_API_KEY=//p' <<<"$env2")
check_match "sandbox 1's OPENAI_API_KEY (Config.Env) is a placeholder" "$ph1" "$PH_RE"
check_match "sandbox 2's OPENAI_API_KEY (Config.Env) is a placeholder" "$ph2" "$PH_RE"
check "the two placeholders differ" test "$ph1" != "$ph2"
check "Config.Env of either holds no value" \
  bash -c '[[ $1$2 != *"$3"* ]]' _ "$env1" "$env2" "$VALUE"
check_eq "inside sandbox 1, \$OPENAI_API_KEY is that placeholder" \
  "$(sbx_run "$s1" 'printf %s "$OPENAI_API_KEY"')" "$ph1"

# --- the clients in sandbox 1, toward the credential's host ------------------------------------
for f in key_client.py node_https_key.mjs; do
  sbx_write "$s1" "/tmp/$f" "$FX_SUPPORT/$f" || true
  check_api "write $f into sandbox 1" 200
  sbx_write "$s2" "/tmp/$f" "$FX_SUPPORT/$f" || true
  check_api "write $f into sandbox 2" 200
done

# client NAME : the command line of a client taking everything from its environment.
client() {
  case "$1" in
  requests | http.client)
    echo "python3 /tmp/key_client.py $1 env $2 env OPENAI_API_KEY Authorization --show"
    ;;
  node) echo "node /tmp/node_https_key.mjs env $2 env OPENAI_API_KEY --show" ;;
  esac
}

# run_client ID NAME URL OUTFILE : the client in the sandbox, its output also kept in OUTFILE
# there (so the search of the container's files covers it); stdout in OUT.
run_client() {
  sbx_exec "$1" "$(client "$2" "$3") 2>&1 | tee $4" 60000 >/dev/null
  OUT=$(sbx_field 'd["stdout"]')
}

for c in requests http.client node; do
  probe=ph-own-$c-$(fx_random_hex 6)
  run_client "$s1" "$c" "$API/hello?probe=$probe" "/tmp/out-own-$c.txt"
  check_match "$c: 200 from the credential's host" "$OUT" "(^|$NL)status=200(\$|$NL)"
  check_match "$c: it sent the placeholder" "$OUT" "sent=Authorization: Bearer $ph1"
  check "$c: its output never holds the value" bash -c '[[ $1 != *"$2"* ]]' _ "$OUT" "$VALUE"
  fx_wait 5 fx_jsonl_has "$FX_ORIGIN_LOG" "target~$probe" || true
  check_eq "$c: the origin got the real value" \
    "$(fx_jsonl_count "$FX_ORIGIN_LOG" "target~$probe" "authorization=Bearer $VALUE")" 1
  if [ "$c" = requests ]; then
    fx_note "$(grep '^client=' <<<"$OUT" || echo "client=? $OUT")"
  fi
done
check_audit "audit: the requests carried a credential, named sandbox 1" client="$s1" \
  decision=allow host=api.sluice.test credential=true

# --- the placeholder toward another allowed host: placeholder-misuse ---------------------------
sbx_exec "$s1" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' $OTHER/hello?probe=ph-control"
check_api "control: other.sluice.test is allowed without a key (curl: 200)" 200 'd["stdout"]' 200
# misuse_lines : the audit lines of sandbox 1's refusals for placeholder-misuse (the audit
# path has no query, so the lines are counted).
misuse_lines() {
  fx_jsonl_count "$SBX_AUDIT" client="$s1" decision=deny reason=placeholder-misuse \
    host=other.sluice.test status=403
}
for c in requests http.client node; do
  probe=ph-misuse-$c-$(fx_random_hex 6)
  want=$(($(misuse_lines) + 1))
  run_client "$s1" "$c" "$OTHER/hello?probe=$probe" "/tmp/out-misuse-$c.txt"
  check_match "$c, the key to other.sluice.test: 403" "$OUT" "(^|$NL)status=403(\$|$NL)"
  check "$c: the refusal shows neither the value nor the placeholder" \
    bash -c '[[ $1 != *"$2"* ]] && [[ $(grep -v ^sent= <<<"$1") != *"$3"* ]]' _ "$OUT" "$VALUE" "$ph1"
  fx_wait 5 test "$(misuse_lines)" -ge "$want" || true
  check_eq "$c: one audit line deny placeholder-misuse toward other.sluice.test" \
    "$(misuse_lines)" "$want"
done
sleep 0.5
check_eq "nothing of the refused requests reached the origin" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "target~ph-misuse-")" 0
check_eq "no placeholder reached the origin (any host, any header, any target)" \
  "$(grep -c 'sluice-ph-' "$FX_ORIGIN_LOG" || true)" 0

# --- sandbox 2: its own placeholder works, sandbox 1's is only a string ------------------------
probe=ph-s2-$(fx_random_hex 6)
run_client "$s2" node "$API/hello?probe=$probe" /tmp/out-s2.txt
check_match "sandbox 2, node with its own placeholder: 200" "$OUT" "(^|$NL)status=200(\$|$NL)"
check_match "... it sent sandbox 2's placeholder" "$OUT" "sent=Authorization: Bearer $ph2"
fx_wait 5 fx_jsonl_has "$FX_ORIGIN_LOG" "target~$probe" || true
check_eq "... and the origin got the real value" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "target~$probe" "authorization=Bearer $VALUE")" 1
probe=ph-s2-foreign-$(fx_random_hex 6)
sbx_exec "$s2" "curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $ph1' '$API/hello?probe=$probe'"
check_api "sandbox 2 sending sandbox 1's placeholder: the call answers" 200
fx_note "sandbox 2 with sandbox 1's placeholder: status $(sbx_field 'd["stdout"]')"
sleep 0.5
check_eq "... and the value is not put in for it" \
  "$(fx_jsonl_count "$FX_ORIGIN_LOG" "target~$probe" "authorization~$VALUE")" 0
check_audit "audit: sandbox 2's own request named it" client="$s2" host=api.sluice.test \
  credential=true

# --- nothing inside holds the value --------------------------------------------------------------
# Files: everything but /proc, /sys and /dev (the processes' environments are read apart). The
# value to look for comes in two halves (so that no environment holds it whole, the search's
# own included); the placeholder, kept in a file first, is the search's positive control.
half=$((${#VALUE} / 2))
for id in "$s1" "$s2"; do
  sbx_exec "$id" '
v=$V1$V2
printf "%s\n" "$OPENAI_API_KEY" >/tmp/ph-control
for e in /proc/[0-9]*/environ; do tr "\0" "\n" <"$e" 2>/dev/null; done >/tmp/all-environ
echo "environ-value=$(grep -cF -- "$v" /tmp/all-environ)"
echo "environ-placeholder=$(grep -cxF -- "OPENAI_API_KEY=$OPENAI_API_KEY" /tmp/all-environ)"
rm -f /tmp/all-environ
x="--exclude-dir=proc --exclude-dir=sys --exclude-dir=dev"
echo "files-value=$(grep -rlsF $x -- "$v" / | wc -l)"
echo "files-placeholder=$(grep -rlsF $x -- "$OPENAI_API_KEY" / | grep -c "^/tmp/ph-control$")"
' 120000 "" "{\"V1\":\"${VALUE:0:$half}\",\"V2\":\"${VALUE:$half}\"}"
  out=$(sbx_field 'd["stdout"]')
  check_match "sandbox $id: the value is in no process's environment, the placeholder is" \
    "$out" "environ-value=0"$'\n'"environ-placeholder=[1-9]"
  check_match "sandbox $id: the value is in no file under /, the placeholder's file is found" \
    "$out" "files-value=0"$'\n'"files-placeholder=1"
done

# --- no log holds the value or an unmasked placeholder -------------------------------------------
check_eq "the audit log holds no unmasked placeholder" \
  "$(grep -cE 'sluice-ph-[a-z2-7]{40}' "$SBX_AUDIT" || true)" 0
check "neither the audit log, the proxy's nor the control plane's log holds the value" \
  fx_absent "$VALUE" "$SBX_AUDIT" "$SBX_PROXY_LOG" "$SBX_CONTROL_LOG"

# --- close ---------------------------------------------------------------------------------------
for id in "$s1" "$s2"; do
  sbx_close "$id" || true
  check_api "close $id → 204" 204
done
sbx_shutdown_checks
fx_done
