#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/package.sh - the Debian package end to end (docs/install.md), in a container
# booted with systemd as PID 1 and no network but its loopback:
#   - the package is built (tools/deb.sh with this build's binary; lintian finds no error), and
#     an older version of it (the same files, version 0.1.0~old) for the upgrade;
#   - the older one is installed: the sluice user, /var/lib/sluice 0700, the service started by
#     the package, the CA and the encryption key made on its first start with the warning in the
#     journal, /readyz ready; the newer one installed over it restarts the service (a new main
#     pid), the data kept;
#   - an environment and a static client created over REST with the admin token of
#     /var/lib/sluice/admin.token; through the proxy, a request to an origin inside the container
#     is allowed and one to another host refused (403 host-not-allowed);
#   - `logrotate -f` twice during a request loop: every request has exactly one whole line across
#     the rotated files;
#   - `systemctl restart`; `sluice backup`, the data directory wiped, `sluice restore`: the
#     environment is back and the request allowed again;
#   - `dpkg -r` keeps the data, the audit log and the configuration; `dpkg --purge` removes them.
# Skips (exit 0, with the reason) where it cannot run: not root, no Docker daemon it may start,
# no mmdebstrap or packaging tools, or a sanitizer build (the package carries the release binary).
# The Docker daemon is started only when none answers (tools/dockerd.sh start) and never stopped.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"

skip_all() {
  echo "1..0 # SKIP $*"
  exit 0
}

: "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
[ "$(id -u)" -eq 0 ] || skip_all "needs root (dpkg, docker, a container with systemd)"
for tool in docker mmdebstrap dpkg-buildpackage dh lintian; do
  command -v "$tool" >/dev/null 2>&1 || skip_all "$tool is missing (tools/deps.sh test installs it)"
done
if grep -qaE '__asan_init|__tsan_init' "$SLUICE_BIN" 2>/dev/null; then
  skip_all "a sanitizer build: the package carries the release binary (run it in build/)"
fi
if [ "$(curl -s --max-time 2 --unix-socket /var/run/docker.sock http://localhost/_ping 2>/dev/null)" != OK ]; then
  "$SLUICE_SRC/tools/dockerd.sh" start test >&2 || skip_all "no Docker daemon answers and none could be started"
fi

fx_init
name=sluice-pkg-$$
deb_dir=$SLUICE_SRC/build/deb
# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup_container() {
  docker rm -f "$name" >/dev/null 2>&1 || true
}
trap 'cleanup_container; fx__cleanup' EXIT

# ---- the packages ------------------------------------------------------------------------------

if ! "$SLUICE_SRC/tools/deb.sh" --prebuilt "$SLUICE_BIN" >"$FX_WORK/deb.log" 2>&1; then
  fx__dump "$FX_WORK/deb.log"
  fx_bail "tools/deb.sh builds the package, lintian finds no error"
fi
ok "tools/deb.sh builds the package, lintian finds no error"
version=$(dpkg-parsechangelog -l "$SLUICE_SRC/debian/changelog" -S Version)
new_deb=$deb_dir/sluice_${version}_amd64.deb
old_version=$version~old
old_deb=$deb_dir/sluice_${old_version}_amd64.deb
rm -rf "$FX_WORK/repack"
dpkg-deb -R "$new_deb" "$FX_WORK/repack"
sed -i "s/^Version: .*/Version: $old_version/" "$FX_WORK/repack/DEBIAN/control"
dpkg-deb --root-owner-group -b "$FX_WORK/repack" "$old_deb" >/dev/null
check "an older version of the package for the upgrade ($old_version)" test -s "$old_deb"
check_match "it depends on the libraries the binary links and recommends docker.io and nftables" \
  "$(dpkg-deb -f "$new_deb" Depends) / $(dpkg-deb -f "$new_deb" Recommends)" \
  'libsqlite3-0.*libssl3.*libuv1.* / docker.io.*nftables'

# ---- the container -----------------------------------------------------------------------------

"$SLUICE_SRC/tests/support/systemd-image.sh" || fx_bail "the systemd test image builds"
mkdir -p "$FX_WORK/pkg"
cp "$new_deb" "$old_deb" "$FX_WORK/pkg/"
# systemd as PID 1 under Docker 20.10: CAP_SYS_ADMIN and no seccomp or AppArmor profile (it
# mounts and makes namespaces for the units' sandboxing), CAP_NET_ADMIN and CAP_DAC_READ_SEARCH
# (with CAP_SYS_ADMIN and CAP_NET_BIND_SERVICE of Docker's default set, the capabilities
# sluice.service keeps), a private cgroup namespace, tmpfs for /run; no network but loopback.
# Not --privileged: it asks for every capability, and a daemon without them all refuses it.
docker run -d --name "$name" --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add DAC_READ_SEARCH \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined --cgroupns=private \
  --network none --tmpfs /run --tmpfs /run/lock --stop-signal SIGRTMIN+3 \
  -v "$FX_WORK/pkg:/pkg:ro" sluice/systemd-test:bookworm >/dev/null ||
  fx_bail "the container with systemd starts"
in_c() { docker exec "$name" "$@"; }
booted() { [[ "$(in_c systemctl is-system-running 2>/dev/null)" =~ ^(running|degraded)$ ]]; }
fx_wait 60 booted || fx_bail "systemd boots in the container ($(in_c systemctl is-system-running 2>&1 || true))"
ok "systemd boots in the container"

admin_token() { in_c cat /var/lib/sluice/admin.token; }
api() { # METHOD PATH [BODY]: the REST API inside the container; prints "STATUS BODY"
  in_c curl -sS --max-time 10 -o /tmp/api.body -w '%{http_code}' -X "$1" \
    -H "Authorization: Bearer $(admin_token)" -H 'Content-Type: application/json' \
    ${3:+-d "$3"} "http://127.0.0.1:8080$2" || true
}
ready() { [ "$(in_c curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/readyz)" = 200 ]; }
main_pid() { in_c systemctl show -P MainPID sluice.service; }

# ---- install, upgrade --------------------------------------------------------------------------

check "dpkg -i of $old_version" in_c dpkg -i "/pkg/$(basename "$old_deb")"
check_eq "the package started sluice.service" "$(in_c systemctl is-active sluice.service || true)" active
check_eq "sluice-proxy.service is installed, not enabled" \
  "$(in_c systemctl is-enabled sluice-proxy.service 2>&1 || true)" disabled
check "/readyz answers 200" fx_wait 30 ready
check_match "/readyz says ready" "$(in_c curl -s http://127.0.0.1:8080/readyz)" '"ready":true'
check_eq "the sluice system user exists" "$(in_c id -u sluice >/dev/null && echo yes)" yes
check_eq "/var/lib/sluice is 0700, owned by sluice" "$(in_c stat -c '%a %U' /var/lib/sluice)" \
  "700 sluice"
check_eq "the first start made the CA, the encryption key and the admin token" \
  "$(in_c sh -c 'cd /var/lib/sluice && ls ca.pem ca.key encryption.key admin.token sluice.db | wc -l')" 5
check "the journal has the encryption key warning" \
  bash -c "docker exec $name journalctl -u sluice.service --no-pager | grep -q 'a new encryption key was written to /var/lib/sluice/encryption.key'"
check_eq "/etc/sluice/sluice.conf is 0640 root:sluice" \
  "$(in_c stat -c '%a %U:%G' /etc/sluice/sluice.conf)" "640 root:sluice"
check "sluice config check accepts the packaged file (for up and for the proxy)" \
  in_c sh -c 'sluice config check /etc/sluice/sluice.conf && sluice config check /etc/sluice/sluice.conf --for proxy'
ca_before=$(in_c sha256sum /var/lib/sluice/ca.pem)
pid_before=$(main_pid)
check "dpkg -i of $version over it" in_c dpkg -i "/pkg/$(basename "$new_deb")"
check_eq "the upgrade restarted the service (active)" "$(in_c systemctl is-active sluice.service || true)" active
check "... with a new main process" test "$(main_pid)" != "$pid_before"
check "/readyz answers 200 after the upgrade" fx_wait 30 ready
check_eq "the upgrade kept the data (the same CA)" "$(in_c sha256sum /var/lib/sluice/ca.pem)" "$ca_before"

# ---- an environment, requests through the proxy -----------------------------------------------

# The origin: python3 on the container's loopback. The proxy may dial it through a name pinned
# to 127.0.0.1 and an allow for that address (both in [proxy] of the configuration file).
in_c sh -c 'mkdir -p /srv/www/r && echo hello >/srv/www/index.html'
docker exec -d "$name" python3 -m http.server 18000 --bind 127.0.0.1 --directory /srv/www
in_c sh -c "cat >>/etc/sluice/sluice.conf <<'EOF'
resolve = origin.test:18000:127.0.0.1
resolve = other.test:18000:127.0.0.1
allow-upstream = 127.0.0.1/32
EOF"
check "sluice config check accepts the edited file" in_c sluice config check /etc/sluice/sluice.conf
in_c systemctl restart sluice.service
check "/readyz answers 200 after a restart" fx_wait 30 ready
env_body='{"name":"pkg","scope":"global","base_image":"sluice/sandbox:bookworm","network":"on","egress":{"default":"deny","rules":[{"host":"origin.test:18000"}]}}'
check_eq "POST /api/v1/environments: 201" "$(api POST /api/v1/environments "$env_body")" 201
check_eq "POST /api/v1/clients (127.0.0.0/8 -> pkg): 201" \
  "$(api POST /api/v1/clients '{"id":"local","environment":"pkg","cidr":"127.0.0.0/8"}')" 201
proxied() { # URL: the status through the proxy, and its reason
  in_c curl -s --max-time 10 -o /dev/null -D /tmp/h -w '%{http_code}' -x http://127.0.0.1:3128 "$1" || true
  in_c sh -c "tr -d '\r' </tmp/h | sed -n 's/^X-Sluice-Reason: //Ip'" | tr -d '\n' | sed 's/^/ /'
}
allowed_now() { [ "$(proxied http://origin.test:18000/)" = 200 ]; }
check "a request to the origin through the proxy is allowed (the snapshot arrives)" fx_wait 10 allowed_now
check_eq "a request to another host is refused" "$(proxied http://other.test:18000/)" "403 host-not-allowed"

# ---- log rotation under load --------------------------------------------------------------------

in_c sh -c 'for i in $(seq 1 300); do curl -s -o /dev/null -x http://127.0.0.1:3128 http://origin.test:18000/r/$i; done; touch /tmp/loop.done' &
loop=$!
sleep 1
check "logrotate -f during the request loop" in_c logrotate -f /etc/logrotate.d/sluice
sleep 1
check "logrotate -f again during the loop" in_c logrotate -f /etc/logrotate.d/sluice
wait "$loop" || true
sleep 1
count_lines='
import glob, gzip, json, sys
seen = {}
bad = 0
for f in glob.glob("/var/log/sluice/audit.log*"):
    op = gzip.open if f.endswith(".gz") else open
    with op(f, "rt") as fh:
        for line in fh:
            try:
                doc = json.loads(line)
            except ValueError:
                bad += 1
                continue
            p = doc.get("path") or ""
            if p.startswith("/r/"):
                seen[p] = seen.get(p, 0) + 1
once = sum(1 for i in range(1, 301) if seen.get("/r/%d" % i) == 1)
print(once, bad, len(glob.glob("/var/log/sluice/audit.log*")))
'
read -r once bad files <<<"$(in_c python3 -c "$count_lines")"
check_eq "every one of the 300 requests has exactly one audit line" "$once" 300
check_eq "no line is torn" "$bad" 0
check_ge "the lines are spread over the rotated files" "$files" 3
check_eq "the rotated log is 0600 sluice" "$(in_c stat -c '%a %U' /var/log/sluice/audit.log)" "600 sluice"

# ---- restart, backup, wipe, restore -------------------------------------------------------------

in_c systemctl restart sluice.service
check "systemctl restart: /readyz answers 200" fx_wait 30 ready
check "sluice backup while it runs" in_c sluice backup --data /var/lib/sluice --out /root/sluice.tar
in_c systemctl stop sluice.service
in_c sh -c 'rm -rf /var/lib/sluice/* /var/lib/sluice/.[!.]*'
check_eq "the data directory is empty" "$(in_c sh -c 'ls -A /var/lib/sluice | wc -l')" 0
check "sluice restore into it" in_c sluice restore --from /root/sluice.tar --data /var/lib/sluice
in_c chown -R sluice:sluice /var/lib/sluice
in_c systemctl start sluice.service
check "after the restore: /readyz answers 200" fx_wait 30 ready
check_eq "the environment is back" "$(api GET /api/v1/environments/pkg)" 200
check "a request to the origin is allowed again" fx_wait 10 allowed_now

# ---- remove, purge ------------------------------------------------------------------------------

check "dpkg -r sluice" in_c dpkg -r sluice
check_eq "the service is gone" "$(in_c systemctl is-active sluice.service 2>&1 || true)" inactive
check "the binary is gone" in_c test ! -e /usr/bin/sluice
check_eq "removal keeps the data, the audit log and the configuration" \
  "$(in_c sh -c 'ls /var/lib/sluice/sluice.db /var/lib/sluice/encryption.key /var/log/sluice/audit.log /etc/sluice/sluice.conf | wc -l')" 4
check "dpkg --purge sluice" in_c dpkg --purge sluice
check "purge removes the data, the logs and the configuration" \
  in_c sh -c '! test -e /var/lib/sluice && ! test -e /var/log/sluice && ! test -e /etc/sluice'

fx_done
