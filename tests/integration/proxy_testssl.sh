#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_testssl.sh - Debian's testssl.sh against the interception side (the
# TLS server the proxy shows a client inside a CONNECT tunnel; SECURITY.md §3): TLS 1.2 and 1.3
# only; for TLS 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305 (no CBC: LUCKY13), TLS 1.3's
# three suites; and every vulnerability check testssl.sh runs (-U) says OK.
#
# testssl.sh has --proxy, but the CONNECT lines its own sockets send end in a bare LF, which the
# proxy's strict HTTP/1.1 parser refuses (400 bad-request) as it refuses every such head. So
# testssl.sh talks to tests/support/connect_relay.py, which opens each connection as a proper
# CONNECT a.sluice.test:PORT through the proxy; testssl.sh sends SNI a.sluice.test (--ip
# 127.0.0.1, no DNS lookups: -n none). Three check groups (-p protocols, -e each cipher, -U
# vulnerabilities) take about a minute, ten seconds of it testssl.sh's own start-up.
#
# BREACH is about compressed HTTP responses that reflect secrets. The proxy compresses nothing
# and relays an origin's body as the origin sent it; here testssl.sh's request (a Host without
# the tunnel's port) is answered by the proxy itself (421), so its OK says the proxy's own
# answers are not compressed.
set -euo pipefail

: "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_init

TESTSSL=$(command -v testssl || command -v testssl.sh || true)
if [ -z "$TESTSSL" ]; then
  fx_bail "testssl.sh is installed (Debian: apt-get install -y testssl.sh; tools/deps.sh test)"
fi

fx_nginx_start || fx_bail "nginx starts"
A=a.sluice.test
policy=$FX_WORK/policy.json
fx_local_policy "$policy" tls "$A:$FX_TLS_PORT"
fx_resolve "$A"
FX_LOG_LEVEL=info fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" \
  --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"

ready=$FX_WORK/relay.port
"$FX_PYTHON" "$FX_SUPPORT/connect_relay.py" --proxy "127.0.0.1:$FX_PROXY_PORT" \
  --connect "$A:$FX_TLS_PORT" --ready "$ready" 2>"$FX_WORK/relay.log" &
FX_PIDS+=("$!")
fx_wait 10 test -s "$ready" || fx_bail "connect_relay.py listens"
relay=$(cat "$ready")

# The path testssl.sh takes works for an ordinary client first: a verified handshake through the
# relay, with the sluice CA's leaf for $A.
out=$(timeout 20 openssl s_client -connect "127.0.0.1:$relay" -servername "$A" \
  -verify_hostname "$A" -CAfile "$FX_SLUICE_CA" -verify_return_error </dev/null 2>&1 || true)
check "through the relay, a client gets a verified handshake with $A's leaf" \
  grep -q 'Verify return code: 0 (ok)' <<<"$out"

json=$FX_WORK/testssl.json
start=$SECONDS
rc=0
# NO_ENGINE: no GOST engine is loaded (no GOST suite is of interest here); without it testssl.sh
# warns "No engine or GOST support" on every machine without libengine-gost-openssl.
NO_ENGINE=true timeout 240 "$TESTSSL" --quiet --color 0 --warnings off -n none --ip 127.0.0.1 \
  --connect-timeout 10 --openssl-timeout 10 --jsonfile "$json" -p -e -U "$A:$relay" \
  >"$FX_WORK/testssl.out" 2>&1 || rc=$?
fx_note "testssl.sh took $((SECONDS - start)) s (exit $rc; output in testssl.out)"
if [ ! -s "$json" ] || ! grep -q '"scanTime"' "$json"; then
  tail -n 20 "$FX_WORK/testssl.out" | sed 's/^/#   /'
  fx_bail "testssl.sh completes its scan (JSON with scanTime)"
fi

# One line per check from the JSON findings: "ok DESC" or "not ok DESC", then "#" details.
verdicts=$("$FX_PYTHON" - "$json" <<'PY'
import json
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    found = {x["id"]: x for x in json.load(f)}


def report(desc, bad):
    print(("not ok " if bad else "ok ") + desc)
    for b in bad:
        print("#   " + b)


bad = [p + ": " + found.get(p, {}).get("finding", "(not tested)")
       for p in ("SSLv2", "SSLv3", "TLS1", "TLS1_1")
       if not found.get(p, {}).get("finding", "").startswith("not offered")]
report("SSLv2, SSLv3, TLS 1.0 and TLS 1.1 are not offered", bad)
bad = [p + ": " + found.get(p, {}).get("finding", "(not tested)")
       for p in ("TLS1_2", "TLS1_3")
       if not found.get(p, {}).get("finding", "").startswith("offered")]
report("TLS 1.2 and TLS 1.3 are offered", bad)

# A cipher row reads: hexcode, OpenSSL name, key exchange, its bits, encryption, bits, IANA name.
ciphers = {k[len("cipher_"):]: v["finding"].split() for k, v in found.items()
           if k.startswith("cipher_x")}
bad = ["%s %s (%s, %s)" % (h, row[1], row[2], row[4]) for h, row in sorted(ciphers.items())
       if len(row) < 5 or row[4] not in ("AESGCM", "ChaCha20") or row[2] != "ECDH"]
report("every suite offered is ECDHE with AES-GCM or ChaCha20-Poly1305 (no CBC)", bad)
want = {"x1301", "x1302", "x1303", "xc02b", "xc02c", "xcca9"}
got = set(ciphers)
report("the suites offered are TLS 1.3's three and ECDHE-ECDSA with AES-128/256-GCM and "
       "ChaCha20-Poly1305",
       [] if got == want else ["offered: " + " ".join(sorted(got)),
                               "expected: " + " ".join(sorted(want))])

vulns = ("heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego",
         "CRIME_TLS", "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN",
         "LOGJAM", "BEAST", "LUCKY13", "RC4")
bad = ["%s: %s %s" % (v, found.get(v, {}).get("severity", "-"),
                      found.get(v, {}).get("finding", "(not tested)"))
       for v in vulns if found.get(v, {}).get("severity") != "OK"]
report("every vulnerability check says OK (LUCKY13, BEAST, SWEET32, ROBOT, CRIME, BREACH, "
       "POODLE, Heartbleed, ...)", bad)
bad = ["%s: %s %s" % (k, v.get("severity"), v.get("finding", "")) for k, v in found.items()
       if v.get("severity") not in ("OK", "INFO")]
report("no finding at any severity above INFO, and no testing warning", bad)
PY
) || fx_bail "the testssl.sh JSON can be read"
while IFS= read -r line; do
  case $line in
  "ok "*) ok "${line#ok }" ;;
  "not ok "*) not_ok "${line#not ok }" ;;
  *) echo "$line" ;;
  esac
done <<<"$verdicts"

# Hundreds of odd handshakes later, the proxy still serves a request.
fx_curl "https://$A:$FX_TLS_PORT/hello"
check_status "after the scan, a request through the proxy still works" 200 -
check "the proxy is still running" fx_proxy_alive

fx_done
