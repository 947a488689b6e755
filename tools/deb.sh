#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/deb.sh [--prebuilt BIN] [--version V] [--no-lintian] - the Debian package
# build/deb/sluice_VERSION_amd64.deb (make deb; docs/install.md).
#
# The tree is copied (the files git knows, tracked or not ignored) to build/deb/src/sluice-V and
# dpkg-buildpackage runs there, so nothing outside build/ is written. VERSION is the project's
# (CMakeLists.txt), or V (the changelog's version of the copy is changed). With --prebuilt BIN,
# that binary is packaged instead of building one (the package test's shortcut; make deb always
# builds). lintian then checks the package and fails on an error (overrides, each with its
# reason, in debian/sluice.lintian-overrides). Build-dependencies are not checked by
# dpkg-buildpackage (-d): llhttp comes from tools/deps.sh, not from a Debian 12 package.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/deb
prebuilt=
version=
lint=1
while [ $# -gt 0 ]; do
  case $1 in
  --prebuilt) prebuilt=$(realpath "$2"); shift 2 ;;
  --version) version=$2; shift 2 ;;
  --no-lintian) lint=0; shift ;;
  -h | --help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "deb.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

say() { echo "deb: $*" >&2; }

project_version=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
version=${version:-$project_version}
src=$out/src/sluice-$version
rm -rf "$out/src"
mkdir -p "$src"
(
  cd "$top"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
      [ -e "$f" ] && printf '%s\0' "$f"
    done | tar --null -T - -cf -
  else
    tar --exclude=./build --exclude=./var -cf - .
  fi
) | tar -xf - -C "$src"
if [ "$version" != "$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)" ]; then
  sed -i "1s/(.*)/($version)/" "$src/debian/changelog"
fi

export SLUICE_DEPS_DIR=${SLUICE_DEPS_DIR:-$top/build/deps}
export SLUICE_PREBUILT=$prebuilt
say "building sluice $version in ${src#"$top"/}${prebuilt:+ (packaging $prebuilt)}"
(cd "$src" && dpkg-buildpackage -b -us -uc -d) >"$out/build.log" 2>&1 || {
  tail -n 40 "$out/build.log" >&2
  say "dpkg-buildpackage failed (log: ${out#"$top"/}/build.log)"
  exit 1
}
deb=$out/sluice_${version}_amd64.deb
mv -f "$out/src/sluice_${version}_amd64.deb" "$deb"
rm -f "$out"/src/*.buildinfo "$out"/src/*.changes "$out"/src/*.ddeb
say "wrote ${deb#"$top"/}"
if [ "$lint" = 1 ]; then
  lintian --fail-on error --suppress-tags-from-file /dev/null "$deb" >"$out/lintian.log" 2>&1 || {
    cat "$out/lintian.log" >&2
    say "lintian found errors"
    exit 1
  }
  say "lintian: no errors ($(grep -c '^[WI]:' "$out/lintian.log" || true) warnings and notes in ${out#"$top"/}/lintian.log)"
fi
