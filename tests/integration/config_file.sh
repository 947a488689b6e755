#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/config_file.sh - configuration files (docs/reference/cli.md "Configuration
# files", §1.8): `sluice config check` on good and bad files (every problem by line and key, the
# summary, the exit statuses), and `sluice proxy --config` with flags on the command line too:
# the file's values are used, a flag given on the command line wins over every value the file
# has for it, and a bad file stops the command with its line named.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup origin

# ---- sluice config check ---------------------------------------------------------------------

good=$FX_WORK/good.conf
cat >"$good" <<'EOF'
# the packaged shape
[up]
data = /var/lib/sluice
control-listen = 127.0.0.1:8080
log-level = info

[control]
image = sluice/sandbox:bookworm

[proxy]
audit-failure = deny
resolve = a.example:443:127.0.0.1
resolve = b.example:443:127.0.0.1
EOF
out=$("$SLUICE_BIN" config check "$good") && rc=0 || rc=$?
check_eq "a good file: exit 0" "$rc" 0
check_eq "... with a summary" "$out" \
  "$good: valid for sluice up, 6 keys ([up] 3 lines, [control] 1 line, [proxy] 3 lines)"
out=$("$SLUICE_BIN" config check "$good" --for proxy) && rc=0 || rc=$?
check_eq "the same file for the proxy alone: exit 0, the other sections not read" "$rc/$out" \
  "0/$good: valid for sluice proxy, 2 keys ([proxy] 3 lines); not read: [up] 3 lines, [control] 1 line"

bad=$FX_WORK/bad.conf
cat >"$bad" <<'EOF'
[up]
control-listen = 127.0.0.1:8080
bogus = 1
restart-backoff = soon
listen = 127.0.0.1:9
[proxy]
workers = 2
workers = 3
data = /x
audit-failure = maybe
[nope]
EOF
printf 'just words\n--cert-cache = 5\n' >>"$bad"
out=$("$SLUICE_BIN" config check "$bad") && rc=0 || rc=$?
check_eq "a bad file: exit 1" "$rc" 1
expected="$bad:3: unknown key 'bogus' (sluice up has no --bogus)
$bad:4: key 'restart-backoff': option '--restart-backoff' needs a whole number from 1 to 600000, not 'soon'
$bad:5: key 'listen': unknown option '--listen': use --control-listen (the API) or --proxy-listen (the proxy)
$bad:8: key 'workers': option given twice: '--workers' (see sluice proxy --help)
$bad:9: key 'data' in [proxy]: sluice up gives its proxy this itself (set it in [up])
$bad:10: key 'audit-failure': option '--audit-failure' needs deny or allow, not 'maybe'
$bad:11: unknown section [nope] (the sections are [up], [control] and [proxy])
$bad:12: expected KEY = VALUE
$bad:13: key '--cert-cache': write it without the leading --
$bad: invalid, 9 errors"
check_eq "... naming the line and key of every problem, in line order" "$out" "$expected"
out=$("$SLUICE_BIN" config check "$FX_WORK/missing.conf" 2>&1) && rc=0 || rc=$?
check_eq "a missing file: exit 1" "$rc" 1
check_match "... said on standard error" "$out" 'config check: cannot read .*missing.conf'
"$SLUICE_BIN" config check >/dev/null 2>&1 && rc=0 || rc=$?
check_eq "no FILE: a usage error (exit 2)" "$rc" 2

# ---- sluice proxy --config with flags ---------------------------------------------------------

fx_resolve origin.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" c "origin.sluice.test:$FX_PY_HTTP_PORT"
read -r file_port other_port <<<"$(fx_free_ports 2 | tr '\n' ' ')"
conf=$FX_WORK/proxy.conf
{
  echo "# the proxy's own keys at the top"
  echo "listen = 127.0.0.1:$file_port"
  echo "policy = $policy"
  echo "allow-upstream = 127.0.0.0/8"
  for ((i = 1; i < ${#FX_RESOLVE[@]}; i += 2)); do echo "resolve = ${FX_RESOLVE[i]}"; done
  echo "log-level = warn"
  echo "[up]"
  echo "bogus = not read by the proxy"
} >"$conf"
check "sluice config check --for proxy accepts it" "$SLUICE_BIN" config check "$conf" --for proxy
# fx_proxy_start gives --listen on the command line: it wins over the file's listen.
fx_proxy_start --config "$conf" || fx_bail "sluice proxy starts with --config and flags"
ok "sluice proxy starts with --config and flags"
fx_curl "http://origin.sluice.test:$FX_PY_HTTP_PORT/hello"
check_status "the file's policy, resolve and allow-upstream are in force" 200
not_listening() { ! fx_port_open "$1"; }
check "the command line's --listen won: nothing listens on the file's port" not_listening "$file_port"
check "the command line's --log-level won (debug lines in the log)" grep -q ' debug ' "$FX_PROXY_LOG"
fx_proxy_stop

echo "workers = 0" >"$FX_WORK/bad-proxy.conf"
out=$("$SLUICE_BIN" proxy --config "$FX_WORK/bad-proxy.conf" --listen "127.0.0.1:$other_port" 2>&1) && rc=0 || rc=$?
check_eq "a bad value in the file: exit 2" "$rc" 2
check_match "... naming the option and pointing at config check" "$out" \
  "option '--workers' needs a whole number from 1 to 64, not '0'.*sluice config check .*bad-proxy.conf --for proxy"
echo "wokers = 2" >"$FX_WORK/typo.conf"
out=$("$SLUICE_BIN" proxy --config "$FX_WORK/typo.conf" 2>&1) && rc=0 || rc=$?
check_eq "an unknown key: exit 2" "$rc" 2
check_eq "... named with its line" "$out" \
  "sluice: proxy: $FX_WORK/typo.conf:1: unknown key 'wokers' (sluice proxy has no --wokers)"

fx_done
