#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_audit_disk.sh - the audit log of `sluice proxy` against rotation and a
# full disk (docs/reference/proxy.md §4.7, §4.8, §4.9):
#   - rotation under load: four clients send 600 plain requests while the log is moved away and
#     the proxy gets SIGUSR1, twice; every request has exactly one whole line across the files;
#   - a full file system (a tmpfs of 256 KiB mounted by the test, filled up) with
#     --audit-failure deny: requests the policy allows are refused 503 audit-unavailable, the
#     alarm is up (sluice_audit_healthy 0, write failures counted, /v1/status audit healthy
#     false); once space is freed service comes back by itself and the held lines are written;
#   - the control plane pushing to that proxy shows the alarm too (GET /api/v1/status: the proxy's
#     "audit" healthy false, "audit_healthy" false), and clears it when the proxy heals;
#   - the same with --audit-failure allow: requests are served and the failures counted;
#   - a log that does not keep up (a FIFO nobody reads) under a flood of refused requests: once
#     12 of the 16 MiB are pending, allowed requests are refused 503 audit-unavailable and only
#     their lines are still queued; service comes back once the log is read again;
#   - whatever happened, the log holds whole JSON lines only, one per request.
# The full-disk part needs root (mount); without it that part is skipped.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup origin

policy=$FX_WORK/policy.json
fx_local_policy "$policy" disk "origin.sluice.test:$FX_PY_HTTP_PORT"
fx_resolve origin.sluice.test

# load PREFIX N THREADS [ROTATE_FILE PID] : N plain GETs of /PREFIX/i through the proxy from
# THREADS threads; with ROTATE_FILE, the log is renamed to ROTATE_FILE.1 and .2 and PID gets
# SIGUSR1 after a third and two thirds of the requests. Prints "STATUS COUNT" lines.
load() {
  "$FX_PYTHON" - "$FX_PROXY_PORT" "$FX_PY_HTTP_PORT" "$@" <<'EOF'
import collections, os, signal, socket, sys, threading
proxy, port, prefix, n, threads = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rotate = sys.argv[6:8]
statuses = collections.Counter()
lock = threading.Lock()
done = [0]
rotated = [0]
def one(i):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=10)
    s.sendall(("GET http://origin.sluice.test:%s/%s/%d HTTP/1.1\r\nHost: origin.sluice.test:%s\r\n"
               "Connection: close\r\n\r\n" % (port, prefix, i, port)).encode())
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    while s.recv(65536):
        pass
    s.close()
    return data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "000"
def worker(k):
    for i in range(k, n, threads):
        st = one(i)
        with lock:
            statuses[st] += 1
            done[0] += 1
            if rotate and rotated[0] < 2 and done[0] >= (rotated[0] + 1) * n // 3:
                rotated[0] += 1
                os.rename(rotate[0], "%s.%d" % (rotate[0], rotated[0]))
                os.kill(int(rotate[1]), signal.SIGUSR1)
ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
for st, c in sorted(statuses.items()):
    print(st, c)
EOF
}

# audit_check PREFIX N FILE... : "ONCE BAD TOTAL": how many of /PREFIX/0..N-1 have exactly one
# line across the files, how many lines are not whole JSON, and how many lines have the prefix.
audit_check() {
  "$FX_PYTHON" - "$@" <<'EOF'
import json, sys
prefix, n, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
seen, bad, total = {}, 0, 0
for f in files:
    try:
        fh = open(f, "rb")
    except FileNotFoundError:
        continue
    with fh:
        for line in fh:
            try:
                doc = json.loads(line)
                assert line.endswith(b"\n")
            except (ValueError, AssertionError):
                bad += 1
                continue
            p = doc.get("path") or ""
            if p.startswith("/%s/" % prefix):
                seen[p] = seen.get(p, 0) + 1
                total += 1
once = sum(1 for i in range(n) if seen.get("/%s/%d" % (prefix, i)) == 1)
print(once, bad, total)
EOF
}

metric() { # NAME: its value in the proxy's /metrics
  fx_admin GET /metrics
  awk -v m="$1" '$1 == m { print $2 }' "$FX_ADMIN_BODY"
}

# ---- rotation under load -----------------------------------------------------------------------

fx_proxy_start --policy "$policy" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" ||
  fx_bail "sluice proxy starts"
out=$(load rot 600 4 "$FX_AUDIT" "$FX_PROXY_PID")
check_eq "600 requests from 4 clients across two rotations: all served (the origin's 404)" "$out" "404 600"
check_eq "two reopens counted" "$(metric sluice_audit_reopens_total)" 2
fx_proxy_stop
read -r once bad total <<<"$(audit_check rot 600 "$FX_AUDIT.1" "$FX_AUDIT.2" "$FX_AUDIT")"
check_eq "every request has exactly one line across the three files" "$once/$total" "600/600"
check_eq "no line is torn" "$bad" 0
for f in "$FX_AUDIT.1" "$FX_AUDIT.2" "$FX_AUDIT"; do
  check "$(basename "$f") has lines" test -s "$f"
done
check_eq "the file opened after the rotation is 0600" "$(stat -c %a "$FX_AUDIT")" 600

# ---- a log that does not keep up --------------------------------------------------------------------
# The log is a FIFO that the test holds open and does not read: the writer blocks, lines pile up.
# One client floods the proxy with refused requests (each a line); once 3/4 of the 16 MiB are
# pending, requests the policy allows are refused 503 audit-unavailable (--audit-failure deny):
# a flood of refusals must not push the lines of requests that left out of the log. Once the FIFO
# is read again, service comes back by itself.
fifo=$FX_WORK/proxy$((FX_PROXY_N + 1)).audit.log
mkfifo "$fifo"
exec 3<>"$fifo"
fx_proxy_start --policy "$policy" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" ||
  fx_bail "sluice proxy starts (its log a FIFO nobody reads)"
# flood N : N refused requests pipelined on 4 connections (denied host); prints the answers seen.
flood() {
  "$FX_PYTHON" - "$FX_PROXY_PORT" "$FX_PY_HTTP_PORT" "$1" <<'EOF2'
import socket, sys, threading, time
proxy, port, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) // 4
one = ("GET http://denied.sluice.test:%d/flood HTTP/1.1\r\nHost: denied.sluice.test:%d\r\n\r\n"
       % (port, port)).encode()
seen = [0] * 4
def run(k):
    s = socket.create_connection(("127.0.0.1", proxy), timeout=30)
    threading.Thread(target=lambda: s.sendall(one * n), daemon=True).start()
    tail, end = b"", time.monotonic() + 60
    while seen[k] < n and time.monotonic() < end:
        try:
            chunk = s.recv(1 << 16)
        except socket.timeout:
            break
        if not chunk:
            break
        tail += chunk
        seen[k] += tail.count(b"HTTP/1.1 403 ")
        tail = tail[-16:] if b"HTTP/1.1 403 " not in tail[-16:] else b""
ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(seen))
EOF2
}
check_eq "a log nobody reads: one allowed request first, served (the origin's 404)" \
  "$(load slow-a 1 1)" "404 1"
pending_over() { [ "$(metric sluice_audit_pending_bytes)" -ge "$1" ]; }
check_eq "a flood of 48 000 refused requests is answered" "$(flood 48000)" 48000
check "... and 12 MiB of lines (less one) wait for the log" pending_over $(((12 << 20) - (16 << 10)))
fx_curl "http://origin.sluice.test:$FX_PY_HTTP_PORT/slow-b"
check_status "an allowed request while the log does not keep up: 503 audit-unavailable" 503 \
  audit-unavailable
check_match "... the refusal says why" "$(cat "$FX_BODY")" "the audit log does not keep up"
check_ge "the refusals' lines beyond 12 MiB are dropped and counted" \
  "$(metric sluice_audit_dropped_total)" 1
cat <&3 >"$FX_WORK/fifo.out" &
FX_PIDS+=("$!")
drained() { [ "$(metric sluice_audit_pending_bytes)" = 0 ]; }
check "the log read again: the pending lines drain" fx_wait 20 drained
check_eq "and allowed requests are served again" "$(load slow-c 5 1)" "404 5"
fx_proxy_stop
exec 3>&-
read -r once bad total <<<"$(audit_check slow-a 1 "$FX_WORK/fifo.out")"
check_eq "the request served before the flood has its line" "$once" 1
read -r once bad total <<<"$(audit_check slow-c 5 "$FX_WORK/fifo.out")"
check_eq "and so do the ones after it" "$once" 5
check_eq "no line is torn" "$bad" 0

# ---- a full file system --------------------------------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
  fx_skip "the audit log on a full file system" "needs root to mount a tmpfs"
  fx_done
fi
fs=$FX_WORK/auditfs
mkdir -p "$fs"
if ! mount -t tmpfs -o size=256k,mode=0700 sluice-audit-test "$fs"; then
  fx_skip "the audit log on a full file system" "mounting a tmpfs failed"
  fx_done
fi
# The script's exit status must survive the unmount (fx__cleanup reads it from $?).
trap 'fx_rc=$?; umount -l "$fs" 2>/dev/null || true; (exit "$fx_rc"); fx__cleanup' EXIT

fill() { dd if=/dev/zero of="$fs/fill" bs=4k >/dev/null 2>&1 || true; sync; }
healthy_is() { [ "$(metric sluice_audit_healthy)" = "$1" ]; }

# full_disk MODE : one proxy with --audit-failure MODE writing on the tmpfs; the disk filled
# after 20 requests, then requests until the alarm is up, then 30 more, then space freed.
full_disk() {
  local mode=$1 log="$fs/audit-$1.log" first last before code refused=0 served=0 i
  rm -f "$fs/fill"
  # fx_proxy_start names the log proxyN.audit.log: that name points into the tmpfs.
  ln -sf "$log" "$FX_WORK/proxy$((FX_PROXY_N + 1)).audit.log"
  fx_proxy_start --policy "$policy" --allow-upstream 127.0.0.0/8 "${FX_RESOLVE[@]}" \
    --audit-failure "$mode" || fx_bail "sluice proxy starts (--audit-failure $mode)"
  first=$(load "$mode-a" 20 1)
  check_eq "[$mode] 20 requests with room on the disk: all served (the origin's 404)" "$first" "404 20"
  fx_wait 5 test -s "$log"
  fill
  # The first request after the disk filled may pass: its own line is what fails.
  for ((i = 0; i < 50; i++)); do
    load "$mode-b$i" 1 1 >/dev/null
    healthy_is 0 && break
    sleep 0.1
  done
  check "[$mode] the alarm: sluice_audit_healthy 0" healthy_is 0
  check_ge "[$mode] write failures counted" "$(metric sluice_audit_write_failures_total)" 1
  if [ "$mode" = deny ]; then
    fx_control_start "$cdata" "$cport" "$cnet"
    check "[deny] the control plane's /api/v1/status shows the alarm" fx_wait 5 control_alarm false
  fi
  fx_admin GET /v1/status
  check_match "[$mode] /v1/status: audit healthy false, the reason" "$(cat "$FX_ADMIN_BODY")" \
    "\"audit\":\\{\"healthy\":false,\"failure_mode\":\"$mode\".*\"error\":\"No space left on device\""
  last=$(load "$mode-c" 30 2)
  if [ "$mode" = deny ]; then
    check_eq "[deny] 30 requests on the full disk: all refused 503" "$last" "503 30"
    fx_curl "http://origin.sluice.test:$FX_PY_HTTP_PORT/$mode-d"
    check_status "[deny] the refusal's reason is audit-unavailable" 503 audit-unavailable
    check_ge "[deny] counted in sluice_requests_total" \
      "$(metric 'sluice_requests_total{decision="error",reason="audit-unavailable"}')" 30
  else
    check_eq "[allow] 30 requests on the full disk: all served" "$last" "404 30"
    fx_curl "http://origin.sluice.test:$FX_PY_HTTP_PORT/$mode-d"
    check_status "[allow] one more: served" 404
    check_ge "[allow] the held lines are counted" "$(metric sluice_audit_pending_bytes)" 1000
  fi
  rm -f "$fs/fill"
  check "[$mode] space freed: healthy again by itself" fx_wait 5 healthy_is 1
  if [ "$mode" = deny ]; then
    check "[deny] ... and clears it" fx_wait 5 control_alarm true
    fx_stop_pid "$FX_CONTROL_PID" 30 || true
  fi
  last=$(load "$mode-e" 10 1)
  check_eq "[$mode] and requests are served again" "$last" "404 10"
  fx_proxy_stop
  read -r once bad before <<<"$(audit_check "$mode-c" 30 "$log")"
  check_eq "[$mode] the 30 requests of the full disk each have one line (held, then written)" \
    "$once" 30
  read -r once bad before <<<"$(audit_check "$mode-a" 20 "$log")"
  check_eq "[$mode] so do the 20 before" "$once" 20
  check_eq "[$mode] no line is torn" "$bad" 0
}

# A control plane that pushes to the current proxy (no Docker, a network name of its own).
cdata=$FX_WORK/control-data
fx_control_data "$cdata"
ctoken=$FX_CONTROL_TOKEN
cport=$(fx_free_port)
cnet=sad$((RANDOM % 100000))
# control_alarm BOOL : /api/v1/status says audit_healthy BOOL, and so does the proxy's entry.
control_alarm() {
  curl -sf -H "Authorization: Bearer $ctoken" "http://127.0.0.1:$cport/api/v1/status" |
    "$FX_PYTHON" -c 'import json, sys
d = json.load(sys.stdin)
want = sys.argv[1] == "true"
p = d["snapshot"]["proxies"][0]["audit"]
sys.exit(0 if d["audit_healthy"] == want and p["healthy"] == want else 1)' "$1"
}

full_disk deny
full_disk allow
fx_done
