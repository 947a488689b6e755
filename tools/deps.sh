#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/deps.sh [build|run|deb|test] - make this Debian 12 machine able to build, run (and test)
# sluice.
#
#   build  the compiler, CMake and the -dev packages the build links against (default)
#   run    also what `sluice up` uses (make run): docker.io for sandboxes, nftables, mmdebstrap
#          for the default sandbox image, curl for the example it prints
#   deb    also the Debian packaging tools `make deb` uses: debhelper, devscripts, lintian,
#          dpkg-dev
#   test   also the real peers and tools the tests use (clang for fuzzing, nginx, curl, openssl,
#          python3 with pip and requests (clients the tests drive), clang-format, docker.io,
#          nftables, mmdebstrap, fcgiwrap, git, iproute2, chromium, testssl.sh, docker-registry and apache2-utils (htpasswd), the packaging tools of `deb`, logrotate; Node.js and npm from Debian when no `node` is on the PATH), then
#          the npm packages of every tests/*/package-lock.json (`npm ci`, into that folder's
#          node_modules; only when the lock file changed since the last install)
#
# Missing Debian packages are installed with apt-get when run as root; otherwise the script
# names them and exits 1. Then llhttp 9.2 is fetched: Debian 13's libllhttp-dev, downloaded with
# `apt-get download` under a private apt configuration kept in build/deps/apt (its own sources
# list, lists and cache; the mirror URI read from this machine's Debian sources, the suite
# switched to Debian 13) and unpacked with `dpkg -x` into build/deps/llhttp. The system's apt
# sources, lists and installed packages are never touched by that step.
set -euo pipefail

mode=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
deps_dir=${SLUICE_DEPS_DIR:-$top/build/deps}
llhttp_suite=trixie
llhttp_min=9.2

build_pkgs=(build-essential cmake pkg-config ca-certificates
  libuv1-dev libssl-dev libsqlite3-dev libjansson-dev libsodium-dev libcurl4-openssl-dev
  libcmocka-dev libnftables-dev libarchive-dev)
deb_pkgs=(debhelper devscripts lintian dpkg-dev)
test_pkgs=(clang libclang-rt-14-dev clang-format nginx curl openssl python3
  python3-pip python3-requests procps
  docker.io nftables mmdebstrap fcgiwrap git iproute2 chromium testssl.sh logrotate
  docker-registry apache2-utils "${deb_pkgs[@]}")

run_pkgs=(docker.io nftables mmdebstrap curl)

case "$mode" in
build) want=("${build_pkgs[@]}") ;;
run) want=("${build_pkgs[@]}" "${run_pkgs[@]}") ;;
deb) want=("${build_pkgs[@]}" "${deb_pkgs[@]}") ;;
test)
  want=("${build_pkgs[@]}" "${test_pkgs[@]}")
  # A Node.js that is already there (another vendor's package, say) is used as it is: Debian's
  # npm would conflict with it.
  command -v node >/dev/null 2>&1 || want+=(nodejs)
  command -v npm >/dev/null 2>&1 || want+=(npm)
  ;;
-h | --help)
  sed -n '3,23p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
*)
  echo "deps.sh: unknown mode '$mode' (expected build, run, deb or test)" >&2
  exit 2
  ;;
esac

say() { echo "deps: $*" >&2; }

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages: ${missing[*]}"
    say "install them as root: apt-get update && apt-get install -y ${missing[*]}"
    exit 1
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A package's postinst must not start daemons (docker.io would start dockerd through
  # /etc/init.d): policy-rc.d answering 101 forbids it. tools/dockerd.sh starts dockerd for the
  # tests. A policy-rc.d that was already there is left alone.
  policy_rc=/usr/sbin/policy-rc.d
  own_policy_rc=0
  if [ ! -e "$policy_rc" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy_rc"
    chmod 0755 "$policy_rc"
    own_policy_rc=1
    trap 'rm -f "$policy_rc"' EXIT
  fi
  apt-get update -q >/dev/null || { say "apt-get update failed"; exit 1; }
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    say "apt-get install failed for: ${missing[*]}"
    exit 1
  fi
  if [ "$own_policy_rc" = 1 ]; then
    rm -f "$policy_rc"
    trap - EXIT
  fi
fi

# ---- npm packages of the tests (tests/*/package-lock.json) ----------------------------------

if [ "$mode" = test ]; then
  for lock in "$top"/tests/*/package-lock.json; do
    [ -f "$lock" ] || continue
    dir=$(dirname "$lock")
    stamp=$dir/node_modules/.package-lock.json
    if [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ]; then
      continue
    fi
    say "npm ci in ${dir#"$top"/}"
    if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2); then
      say "npm ci failed in ${dir#"$top"/}"
      exit 1
    fi
  done
fi

# ---- llhttp 9.2 from Debian 13 -------------------------------------------------------------

llhttp_dir=$deps_dir/llhttp
have_version() {
  [ -f "$llhttp_dir/version" ] && [ -f "$llhttp_dir/usr/include/llhttp.h" ] \
    && compgen -G "$llhttp_dir/usr/lib/*/libllhttp.a" >/dev/null \
    && dpkg --compare-versions "$(cat "$llhttp_dir/version")" ge "$llhttp_min"
}
if have_version; then
  exit 0
fi

# The machine's own Debian mirror (tools/lib/mirror.sh): only its URI and keyring are used.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || { say "cannot tell the Debian release from /etc/os-release"; exit 1; }
# shellcheck source=tools/lib/mirror.sh
. "$top/tools/lib/mirror.sh"
if ! find_debian_mirror "$codename"; then
  say "found no Debian source for '$codename' in /etc/apt; cannot fetch libllhttp-dev"
  exit 1
fi

apt_dir=$deps_dir/apt
rm -rf "$apt_dir"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc/preferences.d" \
  "$apt_dir/download"
echo "deb [signed-by=$keyring] $mirror $llhttp_suite main" >"$apt_dir/etc/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/etc/sources.list"
  -o "Dir::Etc::SourceParts=$apt_dir/etc/sources.list.d"
  -o "Dir::Etc::Preferences=$apt_dir/etc/preferences"
  -o "Dir::Etc::PreferencesParts=$apt_dir/etc/preferences.d"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::Cache=$apt_dir/cache"
  -o "Dir::Cache::pkgcache="
  -o "Dir::Cache::srcpkgcache="
  -o "APT::Sandbox::User=$(id -un)"
  -o "Debug::NoLocking=1"
)
mkdir -p "$apt_dir/etc/sources.list.d"
say "fetching libllhttp-dev from Debian 13 ($llhttp_suite) into $llhttp_dir"
if ! apt-get "${apt_opts[@]}" -q update >"$apt_dir/update.log" 2>&1; then
  say "private apt-get update failed; see $apt_dir/update.log"
  exit 1
fi
if ! (cd "$apt_dir/download" && apt-get "${apt_opts[@]}" -q download libllhttp-dev >"$apt_dir/download.log" 2>&1); then
  say "apt-get download libllhttp-dev failed; see $apt_dir/download.log"
  exit 1
fi
deb=$(ls "$apt_dir"/download/libllhttp-dev_*.deb | head -n 1)
version=$(dpkg-deb -f "$deb" Version)
upstream=${version%%~*}
upstream=${upstream%%-*}
if ! dpkg --compare-versions "$upstream" ge "$llhttp_min"; then
  say "libllhttp-dev $version is older than $llhttp_min"
  exit 1
fi
rm -rf "$llhttp_dir"
mkdir -p "$llhttp_dir"
dpkg -x "$deb" "$llhttp_dir"
echo "$upstream" >"$llhttp_dir/version"
say "llhttp $upstream unpacked"
