#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/sandbox-image.sh [--image NAME] [--check] - the sandbox images, built offline from Debian
# packages (docs/reference/containers.md §5.4), made by mmdebstrap from this machine's own Debian
# mirror (tools/lib/mirror.sh) and piped into `docker import`. No registry is involved. Two
# recipes, chosen by the tag of NAME:
#   *-dev (sluice/sandbox:bookworm-dev)  the image for agents: the base below plus nodejs, npm,
#             python3 with venv and pip, build-essential, pkg-config, git-lfs, jq, zip, unzip,
#             xz-utils, gnupg and openssh-client
#   any other (sluice/sandbox:bookworm)  a Debian 12 minbase with bash, coreutils, procps, curl,
#             git and ca-certificates
#
#   --image NAME  the tag to give it (default sluice/sandbox:bookworm)
#   --check       only say whether NAME is up to date (exit 0) or not (exit 1); change nothing
#
# Cached by content: the recipe (suite, variant, packages, dpkg filters, hooks, import changes)
# is hashed, and the image carries the hash as the label sluice.image.recipe.
#   1. NAME exists with that label: nothing to do.
#   2. $SLUICE_CACHE_DIR/sandbox-[dev-]<hash>.tar exists (default /var/cache/sluice): `docker
#      load` it.
#   3. Otherwise build it (about 35 s on 2 cores; the dev image a few minutes), then `docker
#      save` it there, so a wiped docker data root gets the image back in seconds.
# Needs a reachable dockerd (tools/dockerd.sh start) and, to build, root and mmdebstrap.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
image=sluice/sandbox:bookworm
check=0
while [ $# -gt 0 ]; do
  case "$1" in
  --image)
    [ $# -ge 2 ] && [ -n "$2" ] || { echo "sandbox-image.sh: --image needs a name" >&2; exit 2; }
    image=$2
    shift 2
    ;;
  --check)
    check=1
    shift
    ;;
  -h | --help)
    sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "sandbox-image.sh: unknown argument '$1' (see --help)" >&2
    exit 2
    ;;
  esac
done

say() { echo "sandbox-image: $*" >&2; }
die() { say "$*"; exit 1; }

# ---- the recipe: everything here goes into the hash -----------------------------------------

suite=bookworm
variant=minbase
packages=(bash coreutils procps curl git ca-certificates)
# dpkg path filters take one glob each (no braces): no documentation, manuals or translations.
dpkg_opts=(
  'path-exclude=/usr/share/doc/*'
  'path-exclude=/usr/share/man/*'
  'path-exclude=/usr/share/info/*'
  'path-exclude=/usr/share/locale/*'
  'path-include=/usr/share/locale/locale.alias'
)
# "$1" is the root directory, expanded by mmdebstrap's hook shell, not here.
# shellcheck disable=SC2016
hooks=('rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*.log')
changes=(
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  'CMD ["/bin/bash"]'
)
# The image for agents: toolchains an agent expects to find (Node.js with npm, Python 3 with pip
# and venv, `python` for python3, a C toolchain, git-lfs, jq and the archive tools); pip may
# install system-wide, as on a CI runner.
kind=base
# The tag is what follows the last ':' of the last path component (a registry's port is not).
case "${image##*/}" in
*:*-dev)
  kind=dev
  packages+=(nodejs npm python3 python3-pip python3-venv python-is-python3 build-essential
    pkg-config git-lfs jq zip unzip xz-utils gnupg openssh-client)
  changes+=('ENV PIP_BREAK_SYSTEM_PACKAGES=1')
  ;;
esac
label=sluice.image.recipe
recipe_hash=$({
  echo "sluice sandbox image recipe 1"
  echo "suite $suite"
  echo "variant $variant"
  printf 'package %s\n' "${packages[@]}"
  printf 'dpkgopt %s\n' "${dpkg_opts[@]}"
  printf 'hook %s\n' "${hooks[@]}"
  printf 'change %s\n' "${changes[@]}"
} | sha256sum | cut -c1-16)

cache_dir=${SLUICE_CACHE_DIR:-/var/cache/sluice}
# The base image's cache keeps its name of before (sandbox-HASH.tar, 16 hex digits).
prefix=sandbox-
[ "$kind" = dev ] && prefix=sandbox-dev-
cache=$cache_dir/$prefix$recipe_hash.tar

# ---- is it there already? -------------------------------------------------------------------

command -v docker >/dev/null 2>&1 || die "no docker CLI (install docker.io: tools/deps.sh test)"
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  die "cannot reach dockerd (${DOCKER_HOST:-unix:///var/run/docker.sock}); start one with tools/dockerd.sh start"
fi

have_label() {
  [ "$(docker image inspect --format "{{index .Config.Labels \"$label\"}}" "$image" 2>/dev/null)" \
    = "$recipe_hash" ]
}

if have_label; then
  say "$image is up to date (recipe $recipe_hash)"
  exit 0
fi
if [ "$check" = 1 ]; then
  say "$image is missing or not built from recipe $recipe_hash"
  exit 1
fi

mkdir -p "$cache_dir" || die "cannot create the cache directory $cache_dir"
# One build at a time per cache directory.
exec 9>"$cache_dir/.${prefix%-}.lock"
flock 9
if have_label; then
  say "$image is up to date (recipe $recipe_hash; built by another run)"
  exit 0
fi

start=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) $start" | awk '{ printf "%.1f", $1 - $2 }'; }

# `docker load` prints "Loaded image: NAME" or "Loaded image ID: sha256:..."; whichever it is,
# the result gets our tag.
if [ -f "$cache" ]; then
  say "loading $image from $cache"
  if out=$(docker load --quiet --input "$cache" 2>&1); then
    ref=$(echo "$out" | sed -n 's/^Loaded image\( ID\)\{0,1\}: //p' | tail -n 1)
    if [ -n "$ref" ] && docker tag "$ref" "$image" && have_label; then
      say "$image loaded in $(elapsed) s (recipe $recipe_hash)"
      exit 0
    fi
  fi
  say "the cached image $cache is unusable ($out); rebuilding"
  rm -f "$cache"
fi

# ---- build ----------------------------------------------------------------------------------

[ "$(id -u)" -eq 0 ] || die "building the image needs root (mmdebstrap in root mode)"
command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing (tools/deps.sh test installs it)"
# shellcheck source=tools/lib/mirror.sh
. "$top/tools/lib/mirror.sh"
if ! find_debian_mirror "$suite"; then
  die "found no Debian source for '$suite' in /etc/apt (sources.list or sources.list.d); cannot build $image"
fi

mm_args=(--quiet --variant="$variant" --include="$(IFS=,; echo "${packages[*]}")")
for o in "${dpkg_opts[@]}"; do mm_args+=(--dpkgopt="$o"); done
for h in "${hooks[@]}"; do mm_args+=(--customize-hook="$h"); done
import_args=()
for c in "${changes[@]}" "LABEL $label=$recipe_hash"; do import_args+=(--change "$c"); done

say "building $image (recipe $recipe_hash) with mmdebstrap from this machine's Debian mirror"
log=$cache_dir/${prefix}build.log
# Imported untagged first: a failed or truncated build must never carry the name.
if ! id=$(mmdebstrap "${mm_args[@]}" "$suite" - "deb [signed-by=$keyring] $mirror $suite main" \
  2>"$log" | docker import "${import_args[@]}" - 2>>"$log"); then
  tail -n 20 "$log" >&2
  [[ "${id:-}" == sha256:* ]] && docker rmi "$id" >/dev/null 2>&1
  die "building $image failed (log: $log)"
fi
old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
docker tag "$id" "$image" || die "docker tag $id $image failed"
# The image the tag left behind, unless a container still uses it.
if [ -n "$old" ] && [ "$old" != "$id" ]; then
  docker rmi "$old" >/dev/null 2>&1 || true
fi
have_label || die "$image has no $label=$recipe_hash after the build"
say "$image built in $(elapsed) s"

tmp=$cache.tmp.$$
if docker save --output "$tmp" "$image" && mv "$tmp" "$cache"; then
  # Older caches of the same recipe kind (16 hex digits after the prefix) go.
  for old in "$cache_dir/$prefix"????????????????.tar; do
    [ -e "$old" ] && [ "$old" != "$cache" ] && rm -f "$old"
  done
  say "saved to $cache ($(du -h "$cache" | cut -f1))"
else
  rm -f "$tmp"
  say "warning: could not save $image to $cache; the next wiped docker will rebuild it"
fi
