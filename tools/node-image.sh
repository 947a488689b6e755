#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/node-image.sh SLUICE_BIN OUT.tar - the root filesystem of the node image of a Swarm (or
# any engine on another host; docs/scale-lab.md): the sluice binary as /sluice, the shared
# libraries ldd names for it at the same paths, /tmp and an empty /etc/sluice, and nothing else
# (no shell). Built offline from this machine's files; load it into a node with
#   docker import --change 'ENTRYPOINT ["/sluice"]' OUT.tar IMAGE
# It serves two roles: the inner wall's helper (control/sandbox/docker_wall.c: `/sluice wall
# ...` in a sandbox's network namespace with CAP_NET_ADMIN alone) and the node's proxy
# (`/sluice proxy ...` on the sandbox overlay and a network with a way out).
set -euo pipefail

[ $# -eq 2 ] || {
  echo "usage: tools/node-image.sh SLUICE_BIN OUT.tar" >&2
  exit 2
}
bin=$1
out=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

install -D -m 0755 "$bin" "$root/sluice"
# Debugging sections are of no use on a node and most of the binary.
strip --strip-debug "$root/sluice"
# "name => /path (addr)" and the loader's "/lib64/ld-linux-x86-64.so.2 (addr)".
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
  while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
mkdir -p "$root/tmp" "$root/etc/sluice"
chmod 1777 "$root/tmp"
chmod 0755 "$root"
tar -C "$root" --owner=0 --group=0 --numeric-owner -cf "$out" .
