# SPDX-License-Identifier: Apache-2.0
#
# tools/lib/mirror.sh - sourced by tools/deps.sh and tools/sandbox-image.sh (bash only).
#
# find_debian_mirror CODENAME
#   Sets `mirror` to the URI of this machine's own Debian mirror, taken from the first "deb"
#   source for suite CODENAME in /etc/apt, in either the one-line (*.list) or the deb822
#   (*.sources) format, and `keyring` to that source's signed-by file (the Debian archive
#   keyring when it names none or the file is missing). Returns 1, with both empty, when no
#   source for CODENAME exists. Only the URI and the keyring are taken from the source; the
#   repository never names a mirror itself.

find_mirror_list() {
  local f=$1 codename=$2 line
  while read -r line; do
    line=${line%%#*}
    # deb [options] URI suite components...
    # shellcheck disable=SC2086 # split the line into words on purpose
    set -- $line
    [ "${1:-}" = deb ] || continue
    shift
    local opts=""
    if [[ "${1:-}" == \[* ]]; then
      while [ $# -gt 0 ]; do opts+=" $1"; [[ "$1" == *\] ]] && { shift; break; }; shift; done
    fi
    if [ "${2:-}" = "$codename" ]; then
      mirror=$1
      if [[ "$opts" =~ signed-by=([^] ]+) ]]; then keyring=${BASH_REMATCH[1]}; fi
      return 0
    fi
  done <"$f"
  return 1
}

find_mirror_deb822() {
  local f=$1 codename=$2
  local out
  out=$(awk -v want="$codename" '
    function flush() {
      if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uris != "" && !found) {
        split(uris, u, " "); print u[1] "\t" key; found = 1
      }
      types = ""; suites = ""; uris = ""; key = ""
    }
    /^[ \t]*#/ { next }
    /^[ \t]*$/ { flush(); next }
    tolower($1) == "types:"     { $1 = ""; types = $0 }
    tolower($1) == "suites:"    { $1 = ""; suites = $0 }
    tolower($1) == "uris:"      { $1 = ""; uris = $0 }
    tolower($1) == "signed-by:" { $1 = ""; key = $0 }
    END { flush() }' "$f")
  [ -n "$out" ] || return 1
  mirror=$(echo "$out" | cut -f1 | xargs)
  keyring=$(echo "$out" | cut -f2 | xargs)
  return 0
}

find_debian_mirror() {
  local codename=$1 f
  mirror=""
  keyring=""
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && find_mirror_list "$f" "$codename" && break
  done
  if [ -z "$mirror" ]; then
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && find_mirror_deb822 "$f" "$codename" && break
    done
  fi
  if [ -z "$mirror" ]; then
    keyring=""
    return 1
  fi
  [ -n "$keyring" ] && [ -f "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  return 0
}
