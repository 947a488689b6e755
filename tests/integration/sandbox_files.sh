#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/sandbox_files.sh - docs/reference/api.md §5.3 read/write: a 5 MiB random binary round
# trip (SHA-256 equal both ways), mode honoured, parent directories created, relative paths
# under /workspace/repo and absolute paths, empty files, overwrite; errors: path is required,
# not a valid path (., .., empty components), not found, path is a directory, file too large
# (> 64 MiB). Network sl-t-files, subnet
# 10.213.13.0/24.
# shellcheck disable=SC2016 # commands run inside the sandbox are single-quoted on purpose
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
# shellcheck source-path=SCRIPTDIR source=../support/sandbox.sh
source "$SLUICE_SRC/tests/support/sandbox.sh"
fx_setup
sbx_setup sl-t-files 13

sbx_create_checked sbx main
id=$SBX_ID

is_4xx() { [ "${SBX_STATUS:0:1}" = 4 ]; }
check_err() { # check_err DESC WANT-REGEX
  local e
  e=$(sbx_field 'd.get("error")' || true)
  if is_4xx && [[ $e =~ $2 ]]; then
    ok "$1"
  else
    not_ok "$1"
    echo "#   want 4xx with error matching /$2/"
    sbx_show
  fi
}

# --- 5 MiB random binary, parent directories created ------------------------------------------
head -c 5242880 /dev/urandom >"$FX_WORK/blob.bin"
sha=$(fx_sha256 "$FX_WORK/blob.bin")
sbx_write "$id" "data/deep/er/blob.bin" "$FX_WORK/blob.bin"
check_api "write 5 MiB to data/deep/er/blob.bin (parents missing): 200 ok" 200 'd.get("ok")' true
check_eq "... size 5242880" "$(sbx_field 'd.get("size")')" 5242880
check_match "... path names the file" "$(sbx_field 'd.get("path")')" "(^|/workspace/repo/)data/deep/er/blob.bin$"
sbx_exec "$id" 'sha256sum data/deep/er/blob.bin | cut -d" " -f1; stat -c %s data/deep/er/blob.bin'
check_eq "inside: same SHA-256 and size" "$(sbx_field 'd["stdout"].split()')" "[\"$sha\", \"5242880\"]"
sbx_read "$id" "data/deep/er/blob.bin"
check_api "read it back: 200, size 5242880" 200 'd.get("size")' 5242880
check_eq "... content (base64) has the same SHA-256" \
  "$(sbx_field '__import__("hashlib").sha256(__import__("base64").b64decode(d["content"])).hexdigest()')" "$sha"
sbx_read "$id" "/workspace/repo/data/deep/er/blob.bin"
check_eq "the same file by its absolute path" \
  "$(sbx_field '__import__("hashlib").sha256(__import__("base64").b64decode(d["content"])).hexdigest()')" "$sha"

# a binary file made inside, read out
sbx_exec "$id" 'head -c 300000 /dev/urandom > made.bin; sha256sum made.bin | cut -d" " -f1'
inner=$(sbx_field 'd["stdout"].strip()')
sbx_read "$id" "made.bin"
check_eq "a binary file made inside reads back byte for byte" \
  "$(sbx_field '__import__("hashlib").sha256(__import__("base64").b64decode(d["content"])).hexdigest()')" \
  "${inner:-none}"

# --- modes --------------------------------------------------------------------------------------
printf '#!/bin/sh\necho script-ran\n' >"$FX_WORK/script.sh"
sbx_write "$id" "bin/run.sh" "$FX_WORK/script.sh" '"0755"'
mode_form=string
if [ "$SBX_STATUS" != 200 ]; then
  fx_note "mode \"0755\" (string) refused: $SBX_STATUS $(head -c 200 "$SBX_BODY"); trying 493 (number)"
  sbx_write "$id" "bin/run.sh" "$FX_WORK/script.sh" 493
  mode_form=number
fi
check_api "write with mode 0755 ($mode_form form): 200" 200
sbx_exec "$id" 'stat -c %a bin/run.sh; ./bin/run.sh'
check_eq "stat says 755 and the script runs" "$(sbx_field 'd["stdout"].split()')" '["755", "script-ran"]'
if [ "$mode_form" = string ]; then m='"0600"'; else m=384; fi
sbx_write "$id" "secret.txt" "$FX_WORK/script.sh" "$m"
check_api "write with mode 0600: 200" 200
sbx_exec "$id" 'stat -c %a secret.txt'
check_api "mode 0600 honoured" 200 'd["stdout"].strip()' 600
sbx_write "$id" "plain.txt" "$FX_WORK/script.sh"
sbx_exec "$id" 'stat -c %a plain.txt'
fx_note "default mode of a written file: $(sbx_field 'd["stdout"].strip()')"

# --- overwrite, empty, absolute, names with spaces -------------------------------------------------
printf 'v1 longer content\n' >"$FX_WORK/v1"
printf 'v2\n' >"$FX_WORK/v2"
sbx_write "$id" "over.txt" "$FX_WORK/v1"
sbx_write "$id" "over.txt" "$FX_WORK/v2"
sbx_exec "$id" 'cat over.txt'
check_api "a second write replaces the file (no leftover bytes)" 200 'd["stdout"]' "v2"
: >"$FX_WORK/empty"
sbx_write "$id" "empty.txt" "$FX_WORK/empty"
check_api "write an empty file: size 0" 200 'd.get("size")' 0
sbx_read "$id" "empty.txt"
check_eq "read an empty file: size 0, content ''" "$(sbx_field '[d.get("size"), d.get("content")]')" '[0, ""]'
sbx_write "$id" "/tmp/abs dir/f.txt" "$FX_WORK/v1"
check_api "write an absolute path with a space (/tmp/abs dir/f.txt)" 200
sbx_exec "$id" 'cat "/tmp/abs dir/f.txt"'
check_api "... it is there" 200 'd["stdout"]' "v1 longer content"
sbx_exec "$id" 'echo hello > rel.txt'
sbx_read "$id" "rel.txt"
check_eq "read a relative path (relative to /workspace/repo)" \
  "$(sbx_field '__import__("base64").b64decode(d["content"]).decode()')" "hello"
sbx_read "$id" "/etc/hostname"
check_api "read an absolute path outside the repo (/etc/hostname)" 200

# --- errors -----------------------------------------------------------------------------------
sbx_api POST "/$id/read" '{}' >/dev/null
check_err "read without path → 4xx path is required" '^path is required$'
sbx_api POST "/$id/write" '{"content":"aGk="}' >/dev/null
check_err "write without path → 4xx path is required" '^path is required$'
for p in ../../etc/hostname a/../rel.txt ./rel.txt /etc/./hostname /etc//hostname data/; do
  sbx_read "$id" "$p"
  check_err "read '$p' (a ., .. or empty component) → 400 path is not a valid path" \
    '^path is not a valid path$'
done
sbx_write "$id" "../../tmp/x" "$FX_WORK/v1"
check_err "write '../../tmp/x' → 400 path is not a valid path" '^path is not a valid path$'
sbx_read "$id" "no/such/file.txt"
check_err "read a missing file → 4xx not found: PATH" '^not found: .*no/such/file\.txt$'
sbx_read "$id" "data"
check_err "read a directory → 4xx path is a directory" '^path is a directory'
sbx_write "$id" "data" "$FX_WORK/v1"
check "write over a directory → 4xx" is_4xx
[ "$FX_LAST" = 0 ] || sbx_show
sbx_exec "$id" 'truncate -s 67108865 huge.bin && truncate -s 67108864 edge.bin && echo ok'
sbx_read "$id" "huge.bin"
check_err "read a file of 64 MiB + 1 → 4xx file too large" '^file too large'
SBX_API_TIMEOUT=120 sbx_read "$id" "edge.bin"
check_api "read a file of exactly 64 MiB works" 200 'd.get("size")' 67108864

# Symbolic links and special files are conditions inside the sandbox: 4xx {"error"} at worst,
# never a 5xx "runtime failed" (docs/reference/api.md §5.3); a link to a regular file reads as that file.
sbx_exec "$id" 'printf "linked\n" > target.txt && ln -sf target.txt link.txt && mkfifo fifo && ln -sf /nonexistent dangling && echo ok'
for p in link.txt /etc/os-release; do
  sbx_read "$id" "$p"
  if [ "$SBX_STATUS" = 200 ]; then
    ok "read through the symbolic link $p: 200"
  else
    not_ok "read through the symbolic link $p: 200 (the target's content)"
    sbx_show
  fi
done
sbx_read "$id" link.txt
check_eq "... link.txt reads as target.txt" \
  "$(sbx_field '__import__("base64").b64decode(d.get("content", "")).decode()' || true)" "linked"
for p in dangling /dev/zero fifo; do
  SBX_API_TIMEOUT=30 sbx_read "$id" "$p"
  check_err "read $p → 4xx with an error" '.'
done

sbx_close "$id" || true
check_api "close → 204" 204
sbx_shutdown_checks
fx_done
