# shellcheck shell=bash disable=SC2034
# SPDX-License-Identifier: Apache-2.0
#
# tests/support/gitserver.sh - a git smart-HTTP server for the sandbox and proxy tests
# (docs/reference/api.md §5.3, git platform): nginx (TLS, the fixture's good.pem, which covers
# git.sluice.test) in front of fcgiwrap running `git http-backend`, on 127.0.0.1 and a port the
# kernel picks. A request must carry exactly `Authorization: Basic base64(x-access-token:TOKEN)`,
# except a read (not a push: no git-receive-pack in the path or the query) of a repository made
# public with fx_git_public; anything else gets 401 with `WWW-Authenticate: Basic` (and the
# request is logged with auth=0). The repository is taken from nginx's $uri, which is decoded
# and normalised (`..`, `%73`), as a server would. Sourced after fixture.sh and fx_init; every
# process it starts is in FX_PIDS, so the fixture's EXIT trap kills it.
#
#   fx_git_server TOKEN       starts it. Exports FX_GIT_PORT, FX_GIT_ROOT (GIT_PROJECT_ROOT),
#                             FX_GIT_URL (https://git.sluice.test:PORT), FX_GIT_LOG (JSON lines:
#                             method, uri (as sent: $request_uri), status, auth (1 = the right
#                             header), ua)
#   fx_git_start [OWNER/REPO...]  fx_git_server with a fresh token, GIT_TOKEN (and GIT_BASIC_B64,
#                             base64 of x-access-token:TOKEN), then fx_git_repo of each
#                             OWNER/REPO; bails (fx_bail) when any of them fails
#   fx_git_repo OWNER/REPO    creates OWNER/REPO.git: branch main (2 commits, README.md,
#                             src/hello.sh), tag v1 (the first commit), branch feature (one
#                             more commit, feature.txt). Sets FX_GIT_MAIN_SHA, FX_GIT_V1_SHA,
#                             FX_GIT_FEATURE_SHA. Private (the token is needed) until
#   fx_git_public OWNER/REPO  lets anyone read OWNER/REPO without a header (pushes still need it).
#   fx_git_sha OWNER/REPO REF prints the commit REF names.
#   fx_git_check              clones the first repo over loopback with and without the header:
#                             the fixture checking itself (`git -c http.extraHeader=...`).

fx_git_server() {
  local token=$1 d=$FX_WORK/git basic
  if ! command -v fcgiwrap >/dev/null && [ ! -x /usr/sbin/fcgiwrap ]; then
    echo "# fx_git_server: fcgiwrap not found (Debian: apt-get install -y fcgiwrap)"
    return 1
  fi
  fx_test_ca || return 1
  mkdir -p "$d/root" "$d/tmp"
  FX_GIT_ROOT=$d/root
  FX_GIT_LOG=$d/access.log
  FX_GIT_TOKEN=$token
  basic=$(printf 'x-access-token:%s' "$token" | base64 -w0)
  FX_GIT_PORT=$(fx_free_port)
  FX_GIT_URL=https://git.sluice.test:$FX_GIT_PORT
  export FX_GIT_PORT FX_GIT_ROOT FX_GIT_URL FX_GIT_LOG
  mkdir -p "$d/public"
  FX_GIT_PUBLIC=$d/public
  local fcgi=/usr/sbin/fcgiwrap
  command -v fcgiwrap >/dev/null && fcgi=$(command -v fcgiwrap)
  # A process group of its own, killed whole by the cleanup ("-PGID"): fcgiwrap's workers
  # outlive a TERM to their parent.
  setsid "$fcgi" -c 4 -s "unix:$d/fcgiwrap.sock" >"$d/fcgiwrap.log" 2>&1 &
  FX_PIDS+=("-$!")
  FX_FCGI_PID=$!
  if ! fx_wait 10 test -S "$d/fcgiwrap.sock"; then
    echo "# fx_git_server: fcgiwrap did not create its socket"
    fx__dump "$d/fcgiwrap.log"
    return 1
  fi
  cat >"$d/nginx.conf" <<EOF
$(fx__nginx_main "$d" 256)
http {
  map_hash_bucket_size 256;
  map \$http_authorization \$fx_git_auth {
    default 0;
    "Basic $basic" 1;
  }
  # The repository a request reads or writes (OWNER/REPO, without .git), and whether it pushes.
  map \$uri \$fx_git_repo {
    default "-";
    "~^/(?<r>[^/]+/[^/]+?)(\\.git)?/(info/refs|git-upload-pack|git-receive-pack|HEAD|objects/.*|info/lfs/.*)\$" \$r;
  }
  map "\$uri?\$args" \$fx_git_push {
    default 0;
    "~git-receive-pack" 1;
  }
  log_format fxgit escape=json '{"method":"\$request_method","uri":"\$request_uri",'
    '"status":\$status,"auth":\$fx_git_auth,"ua":"\$http_user_agent"}';
  access_log $d/access.log fxgit;
$(fx__nginx_http "$d")
  server {
    listen 127.0.0.1:$FX_GIT_PORT ssl;
    ssl_certificate $FX_PKI/good.pem;
    ssl_certificate_key $FX_PKI/good.key;
    set \$fx_git_anon 0;
    if (-f $d/public/\$fx_git_repo) {
      set \$fx_git_anon 1;
    }
    if (\$fx_git_push = 1) {
      set \$fx_git_anon 0;
    }
    set \$fx_git_ok "\$fx_git_auth\$fx_git_anon";
    location / {
      if (\$fx_git_ok = 00) {
        add_header WWW-Authenticate 'Basic realm="sluice test git"' always;
        return 401 "authorization required\n";
      }
      fastcgi_pass unix:$d/fcgiwrap.sock;
      fastcgi_buffering off;
      fastcgi_request_buffering off;
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
      fastcgi_param GIT_PROJECT_ROOT $FX_GIT_ROOT;
      fastcgi_param GIT_HTTP_EXPORT_ALL 1;
      fastcgi_param PATH_INFO \$uri;
      fastcgi_param REMOTE_USER x-access-token;
      fastcgi_param GIT_CONFIG_NOSYSTEM 1;
    }
  }
}
EOF
  "$FX_NGINX" -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" >"$d/stdout" 2>&1 &
  FX_GIT_NGINX_PID=$!
  FX_PIDS+=("$FX_GIT_NGINX_PID")
  if ! fx__wait_listen "$FX_GIT_NGINX_PID" "$FX_GIT_PORT" 10; then
    echo "# fx_git_server: nginx is not answering on 127.0.0.1:$FX_GIT_PORT"
    fx__dump "$d/stdout" "$d/error.log"
    return 1
  fi
}

# fx_git_start [OWNER/REPO...] : see the header.
fx_git_start() {
  local r
  GIT_TOKEN=gt-$(fx_random_hex 32)
  GIT_BASIC_B64=$(printf 'x-access-token:%s' "$GIT_TOKEN" | base64 -w0)
  fx_git_server "$GIT_TOKEN" || fx_bail "git server starts"
  for r in "$@"; do
    fx_git_repo "$r" || fx_bail "fixture repository $r"
  done
}

# fx_git_repo OWNER/REPO : see the header.
fx_git_repo() {
  local name=$1 bare=$FX_GIT_ROOT/$1.git src=$FX_WORK/git/src-${1//\//_}
  (
    set -e
    export GIT_CONFIG_NOSYSTEM=1 HOME=$FX_WORK/git GIT_AUTHOR_NAME=fixture \
      GIT_AUTHOR_EMAIL=fixture@sluice.test GIT_COMMITTER_NAME=fixture \
      GIT_COMMITTER_EMAIL=fixture@sluice.test
    mkdir -p "$src" "$(dirname "$bare")"
    cd "$src"
    git init -q -b main .
    printf '# %s\nfirst\n' "$name" >README.md
    git add README.md
    git commit -q -m first
    git tag -a v1 -m v1
    mkdir -p src
    printf '#!/bin/sh\necho hello from %s\n' "$name" >src/hello.sh
    chmod 755 src/hello.sh
    printf 'second\n' >>README.md
    git add -A
    git commit -q -m second
    git checkout -q -b feature
    printf 'feature branch\n' >feature.txt
    git add feature.txt
    git commit -q -m feature
    git checkout -q main
    git clone -q --bare "$src" "$bare"
    git -C "$bare" config http.uploadpack true
  ) >"$FX_WORK/git/repo.log" 2>&1 || {
    echo "# fx_git_repo: failed:"
    fx__dump "$FX_WORK/git/repo.log"
    return 1
  }
  FX_GIT_MAIN_SHA=$(fx_git_sha "$name" main)
  FX_GIT_V1_SHA=$(fx_git_sha "$name" 'v1^{commit}')
  FX_GIT_FEATURE_SHA=$(fx_git_sha "$name" feature)
  FX_GIT_FIRST_REPO=${FX_GIT_FIRST_REPO:-$name}
}

# fx_git_public OWNER/REPO : anyone may read OWNER/REPO (clone, fetch) without a header.
fx_git_public() {
  mkdir -p "$(dirname "$FX_GIT_PUBLIC/$1")"
  : >"$FX_GIT_PUBLIC/$1"
}

# fx_git_sha OWNER/REPO REF : the commit REF names in the bare repository.
fx_git_sha() {
  git -C "$FX_GIT_ROOT/$1.git" rev-parse --verify -q "$2^{commit}"
}

# fx_git_basic : the header value the server accepts.
fx_git_basic() {
  printf 'Basic %s' "$(printf 'x-access-token:%s' "$FX_GIT_TOKEN" | base64 -w0)"
}

# fx_git_clone DIR ARGS... : git clone of the first repo straight to the server over loopback
# (no proxy), trusting the test CA, bounded by `timeout 60`; ARGS go before the URL (-c ...).
fx_git_clone() {
  local dir=$1
  shift
  env -u GIT_ASKPASS GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$FX_TEST_CA" GIT_CONFIG_NOSYSTEM=1 \
    HOME="$FX_WORK/git" timeout 60 git "$@" clone -q \
    -c "http.curloptResolve=git.sluice.test:$FX_GIT_PORT:127.0.0.1" \
    "$FX_GIT_URL/$FX_GIT_FIRST_REPO.git" "$dir"
}

# fx_git_check : the fixture checking itself (see the header); reporting through check*.
fx_git_check() {
  local d=$FX_WORK/git/check
  rm -rf "$d"
  mkdir -p "$d"
  fx_git_clone "$d/good" -c "http.extraHeader=Authorization: $(fx_git_basic)" >"$d/good.log" 2>&1 || true
  check_eq "git fixture: clone with the token header works (main checked out)" \
    "$(git -C "$d/good" rev-parse HEAD 2>/dev/null)" "$FX_GIT_MAIN_SHA"
  fx_git_clone "$d/none" >"$d/none.log" 2>&1 || true
  check "git fixture: clone without a header fails" test ! -d "$d/none/.git"
  fx_git_clone "$d/bad" -c "http.extraHeader=Authorization: Basic $(printf 'x-access-token:wrong' | base64 -w0)" \
    >"$d/bad.log" 2>&1 || true
  check "git fixture: clone with a wrong token fails" test ! -d "$d/bad/.git"
  check "git fixture: the server logged 401s for them" \
    fx_jsonl_has "$FX_GIT_LOG" status=401 auth=0
  check "git fixture: tag v1 and branch feature exist" \
    test -n "$(fx_git_sha "$FX_GIT_FIRST_REPO" v1)" -a -n "$(fx_git_sha "$FX_GIT_FIRST_REPO" feature)"
}
