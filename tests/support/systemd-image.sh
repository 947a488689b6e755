#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/support/systemd-image.sh [--image NAME] - the image tests/integration/package.sh boots:
# Debian 12 with systemd as PID 1, logrotate, curl and python3 (the origin), and every library
# the sluice package depends on, so that `dpkg -i` works inside it with no network. Built
# offline by mmdebstrap from this machine's own Debian mirror (tools/lib/mirror.sh), like
# tools/sandbox-image.sh, and cached by content: the image carries the recipe's hash as the
# label sluice.image.recipe, and $SLUICE_CACHE_DIR/systemd-<hash>.tar (default
# /var/cache/sluice) keeps a `docker save` of it. Prints nothing on stdout; exits 0 when NAME
# (default sluice/systemd-test:bookworm) is there.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
image=sluice/systemd-test:bookworm
if [ "${1:-}" = --image ]; then
  image=$2
fi

say() { echo "systemd-image: $*" >&2; }
die() { say "$*"; exit 1; }

suite=bookworm
variant=minbase
packages=(systemd systemd-sysv dbus adduser logrotate curl python3 procps ca-certificates
  libuv1 libjansson4 libsodium23 libsqlite3-0 libssl3 libcurl4 libarchive13 libnftables1)
# shellcheck disable=SC2016 # expanded by mmdebstrap's hook shell
hooks=('rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'
  'systemctl --root="$1" mask getty@tty1.service console-getty.service systemd-logind.service systemd-resolved.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer logrotate.timer e2scrub_all.timer fstrim.timer'
  'echo sluice-test >"$1"/etc/hostname')
changes=('CMD ["/lib/systemd/systemd"]' 'ENV container=docker')
label=sluice.image.recipe
recipe_hash=$({
  echo "sluice systemd test image recipe 1"
  echo "suite $suite variant $variant"
  printf 'package %s\n' "${packages[@]}"
  printf 'hook %s\n' "${hooks[@]}"
  printf 'change %s\n' "${changes[@]}"
} | sha256sum | cut -c1-16)
cache_dir=${SLUICE_CACHE_DIR:-/var/cache/sluice}
cache=$cache_dir/systemd-$recipe_hash.tar

have_label() {
  [ "$(docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null)" \
    = "$recipe_hash" ]
}

have_label && exit 0
mkdir -p "$cache_dir"
exec 9>"$cache_dir/.systemd.lock"
flock 9
have_label && exit 0
if [ -f "$cache" ]; then
  if ref=$(docker load --quiet --input "$cache" 2>/dev/null | sed -n 's/^Loaded image\( ID\)\{0,1\}: //p' | tail -n 1) \
    && [ -n "$ref" ] && docker tag "$ref" "$image" && have_label; then
    say "$image loaded from $cache"
    exit 0
  fi
  rm -f "$cache"
fi
[ "$(id -u)" -eq 0 ] || die "building the image needs root"
command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing"
# shellcheck source=tools/lib/mirror.sh
. "$top/tools/lib/mirror.sh"
find_debian_mirror "$suite" || die "no Debian source for '$suite' in /etc/apt"
args=(--quiet --variant="$variant" --include="$(IFS=,; echo "${packages[*]}")")
for h in "${hooks[@]}"; do args+=(--customize-hook="$h"); done
import=()
for c in "${changes[@]}" "LABEL $label=$recipe_hash"; do import+=(--change "$c"); done
log=$cache_dir/systemd-build.log
say "building $image (recipe $recipe_hash) with mmdebstrap"
id=$(mmdebstrap "${args[@]}" "$suite" - "deb [signed-by=$keyring] $mirror $suite main" 2>"$log" |
  docker import "${import[@]}" - 2>>"$log") || { tail -n 20 "$log" >&2; die "build failed (log: $log)"; }
docker tag "$id" "$image"
have_label || die "$image has no $label=$recipe_hash"
docker save --output "$cache.tmp.$$" "$image" && mv "$cache.tmp.$$" "$cache" || rm -f "$cache.tmp.$$"
say "$image built"
