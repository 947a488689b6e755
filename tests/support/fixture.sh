# shellcheck shell=bash disable=SC2034
# SPDX-License-Identifier: Apache-2.0
#
# tests/support/fixture.sh - real peers for the proxy's integration tests: a throwaway origin CA,
# nginx, tests/support/origin.py, and `sluice proxy` itself, all on 127.0.0.1 and on ports the
# kernel picks. Sourced by tests/integration/proxy_*.sh; tests/support/README.md lists every
# function and variable. Rules it keeps: loopback only, no fixed port, every wait bounded, every
# process it starts killed by the EXIT trap, every key generated at test time in the work dir.
#
# Functions that set variables (fx_setup, fx_init, fx_test_ca, fx_nginx_start, fx_origin_start,
# fx_proxy_start, fx_proxy_stop, fx_curl) must be called in the test's own shell, never inside
# $(...), or what they set is lost.

if [ -n "${FX_LOADED:-}" ]; then
  return 0
fi
FX_LOADED=1

FX_SUPPORT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SLUICE_SRC=${SLUICE_SRC:-$(cd "$FX_SUPPORT/../.." && pwd)}
FX_NGINX=${FX_NGINX:-/usr/sbin/nginx}
# Debian's interpreter, whose modules (pip, requests) tools/deps.sh installs; failing that, the
# interpreter behind `python3` itself, never a shim in front of it: the tests call Python
# hundreds of times (clients, probes, JSON), and pyenv's shims fork a dozen processes per call,
# ~0.3 s each, which made the slowest tests minutes longer and, with ctest -j, can exhaust the
# process limit.
if [ -z "${FX_PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then
    FX_PYTHON=/usr/bin/python3
  else
    FX_PYTHON=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || echo python3)
  fi
fi

# ---------------------------------------------------------------------------------------------
# Work dir, cleanup, reporting

fx_init() {
  FX_WORK=$(mktemp -d /tmp/sluice-it-XXXXXX)
  FX_PIDS=()
  FX_PROXY_N=0
  FX_FAILURES=0
  FX_CHECKS=0
  FX_LAST=0
  # The tests choose the proxy explicitly; a proxy in the environment must not interfere.
  unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy
  trap fx__cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
  echo "# work dir $FX_WORK"
}

# fx_setup [PEER...] : the start every proxy test shares: SLUICE_BIN must be set, fx_init, then
# each PEER in the order given, the test bailing out when one does not start: `nginx`
# (fx_nginx_start), `origin` (fx_origin_start).
# shellcheck disable=SC2120 # the peers are optional
fx_setup() {
  local peer
  : "${SLUICE_BIN:?SLUICE_BIN must name the sluice binary}"
  fx_init
  for peer in "$@"; do
    case $peer in
    nginx) fx_nginx_start || fx_bail "nginx starts" ;;
    origin) fx_origin_start || fx_bail "origin.py starts" ;;
    *) fx_bail "fx_setup: no peer named '$peer'" ;;
    esac
  done
}

fx__cleanup() {
  local rc=$? pid i
  trap - EXIT
  for pid in "${FX_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 30; i++)); do
    fx__any_alive || break
    sleep 0.1
  done
  for pid in "${FX_PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ "${FX_KEEP:-0}" = 1 ]; then
    echo "# FX_KEEP=1: kept $FX_WORK"
  elif [ -n "${FX_WORK:-}" ] && [ -d "$FX_WORK" ]; then
    rm -rf "$FX_WORK"
  fi
  exit "$rc"
}

fx__any_alive() {
  local pid
  for pid in "${FX_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then return 0; fi
  done
  return 1
}

ok() {
  FX_CHECKS=$((FX_CHECKS + 1))
  echo "ok - $1"
}

not_ok() {
  FX_CHECKS=$((FX_CHECKS + 1))
  FX_FAILURES=$((FX_FAILURES + 1))
  echo "not ok - $1"
}

fx_note() { echo "# $*"; }

# fx_skip DESCRIPTION WHY : a check that cannot run here (TAP "# SKIP"; not a failure).
fx_skip() {
  FX_CHECKS=$((FX_CHECKS + 1))
  echo "ok - $1 # SKIP $2"
}

# check_le DESCRIPTION GOT MAX / check_ge DESCRIPTION GOT MIN : integer comparisons, shown.
check_le() {
  if [ "${2:-x}" -le "$3" ] 2>/dev/null; then ok "$1 ($2 <= $3)"; else not_ok "$1 ($2 > $3)"; fi
}
check_ge() {
  if [ "${2:-x}" -ge "$3" ] 2>/dev/null; then ok "$1 ($2 >= $3)"; else not_ok "$1 ($2 < $3)"; fi
}

# check DESCRIPTION COMMAND... : ok when the command succeeds. Always returns 0 (safe under
# set -e); FX_LAST is 0 when the check passed, 1 when it failed.
check() {
  local what=$1
  shift
  if "$@"; then
    ok "$what"
    FX_LAST=0
  else
    not_ok "$what"
    FX_LAST=1
  fi
  return 0
}

# check_eq DESCRIPTION GOT WANT : ok when the two strings are equal; shows both when not.
check_eq() {
  if [ "$2" = "$3" ]; then
    ok "$1"
    FX_LAST=0
  else
    not_ok "$1"
    echo "#   got:  '$2'"
    echo "#   want: '$3'"
    FX_LAST=1
  fi
  return 0
}

# check_match DESCRIPTION TEXT REGEX : ok when TEXT matches the extended REGEX; shows TEXT when not.
check_match() {
  if [[ $2 =~ $3 ]]; then
    ok "$1"
    FX_LAST=0
  else
    not_ok "$1"
    echo "#   got:  '$2'"
    echo "#   want: /$3/"
    FX_LAST=1
  fi
  return 0
}

# fx_bail MESSAGE : a failure that makes the rest of the script meaningless.
fx_bail() {
  not_ok "$1"
  echo "# bailing out: the remaining checks need this"
  fx_done
}

fx_done() {
  if [ "$FX_FAILURES" -ne 0 ]; then
    fx__show_logs
    echo "# $FX_FAILURES of $FX_CHECKS check(s) failed"
    exit 1
  fi
  echo "# all $FX_CHECKS checks passed"
  exit 0
}

# Prints the tails of the peers' logs, to explain failures.
fx__show_logs() {
  local f
  for f in "$FX_WORK"/proxy*.log "$FX_WORK"/nginx/error.log "$FX_WORK"/origin/stderr; do
    [ -s "$f" ] || continue
    echo "# --- last lines of ${f#"$FX_WORK"/}"
    tail -n 15 "$f" | sed 's/^/#   /'
  done
}

# fx_wait SECONDS COMMAND... : polls COMMAND every 0.1 s until it succeeds (0) or SECONDS pass (1).
fx_wait() {
  local secs=$1 i
  shift
  for ((i = 0; i < secs * 10; i++)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  "$@"
}

# ---------------------------------------------------------------------------------------------
# Ports

# fx_free_port : prints a TCP port that is free on 127.0.0.1 (the kernel's choice).
fx_free_port() {
  fx_free_ports 1
}

# fx_free_ports N : prints N distinct free ports, one a line (all bound at once, then released).
fx_free_ports() {
  "$FX_PYTHON" -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
' "$1"
}

# fx_port_open PORT [ADDR] : succeeds when something accepts TCP connections on ADDR:PORT.
# FX_PROBE_IN, when set, is a command prefix the probe runs under (a function that enters a
# network namespace, say).
fx_port_open() {
  ${FX_PROBE_IN:-} "$FX_PYTHON" -c '
import socket, sys
try:
    socket.create_connection((sys.argv[2], int(sys.argv[1])), timeout=1).close()
except OSError:
    sys.exit(1)
' "$1" "${2:-127.0.0.1}"
}

# fx_have_ipv6 : succeeds when ::1 can be bound here.
fx_have_ipv6() {
  "$FX_PYTHON" -c '
import socket
s = socket.socket(socket.AF_INET6)
s.bind(("::1", 0))
' 2>/dev/null
}

# fx_netns_own PID : the process PID has a network namespace of its own (not this shell's), as
# `unshare --net` gives it once it has started.
fx_netns_own() {
  local mine theirs
  mine=$(readlink /proc/self/ns/net)
  theirs=$(readlink "/proc/$1/ns/net" 2>/dev/null) || return 1
  [ -n "$theirs" ] && [ "$theirs" != "$mine" ]
}

# ---------------------------------------------------------------------------------------------
# The origin test CA

# fx_test_ca : creates (once) in $FX_WORK/pki, with the openssl CLI, EC P-256 throughout:
#   ca.pem/ca.key              "sluice test origin CA" (FX_TEST_CA is ca.pem; give it to
#                              the proxy as --upstream-ca)
#   good.pem/good.key          *.sluice.test, sluice.test, IP 127.0.0.1, IP ::1 (chain-less leaf)
#   wrong.pem/wrong.key        wrong.example only
#   expired.pem/expired.key    *.sluice.test, valid 2020-01-01 to 2020-01-02
#   untrusted.pem/untrusted.key *.sluice.test, signed by rogue-ca.pem (not trusted by anyone)
fx_test_ca() {
  local d=$FX_WORK/pki
  FX_PKI=$d
  FX_TEST_CA=$d/ca.pem
  if [ -f "$d/untrusted.pem" ]; then return 0; fi
  mkdir -p "$d"
  (
    set -e
    cd "$d"
    exec 2>>"$d/openssl.log"
    cat >req.cnf <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
    mkca() { # mkca NAME CN
      fx__ec "$1.key"
      openssl req -config req.cnf -new -x509 -key "$1.key" -out "$1.pem" -days 30 \
        -subj "/O=sluice tests/CN=$2" -extensions v3_ca -sha256
    }
    mkca ca "sluice test origin CA"
    mkca rogue-ca "sluice test rogue CA"
    fx__leaf good ca "$FX_GOOD_SAN"
    fx__leaf wrong ca "DNS:wrong.example"
    fx__leaf untrusted rogue-ca "$FX_GOOD_SAN"
    # An expired leaf needs a notAfter in the past: `openssl ca` takes explicit dates.
    fx__leaf_dated expired 20200101000000Z 20200102000000Z "$FX_GOOD_SAN"
  ) || {
    echo "# fx_test_ca: openssl failed:"
    sed 's/^/#   /' "$d/openssl.log"
    return 1
  }
}

# The names and addresses of good.pem (and of the bad leaves that differ from it in one way).
FX_GOOD_SAN='DNS:*.sluice.test, DNS:sluice.test, IP:127.0.0.1, IP:::1'

# Leaf helpers of fx_test_ca and fx_test_ca_matrix; they run in $FX_PKI with stderr logged.
fx__ec() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
}

# fx__leafext FILE SAN [EKU] : an extension section "leaf"; SAN "-" leaves subjectAltName out.
fx__leafext() {
  {
    printf '[leaf]\nbasicConstraints = critical, CA:FALSE\n'
    printf 'keyUsage = critical, digitalSignature\nextendedKeyUsage = %s\n' "${3:-serverAuth}"
    printf 'subjectKeyIdentifier = hash\n'
    if [ "${4:-}" != self ]; then printf 'authorityKeyIdentifier = keyid\n'; fi
    if [ "$2" != - ]; then printf 'subjectAltName = %s\n' "$2"; fi
  } >"$1"
}

# fx__leaf NAME CA SAN [EKU [CN]] : NAME.pem/NAME.key signed by CA.pem, valid 30 days, subject
# CN NAME unless CN is given.
fx__leaf() {
  fx__ec "$1.key"
  openssl req -config req.cnf -new -key "$1.key" -subj "/O=sluice tests/CN=${5:-$1}" -out "$1.csr"
  fx__leafext "$1.ext" "$3" "${4:-serverAuth}"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$1.ext" -extensions leaf -out "$1.pem"
}

# fx__leaf_dated NAME START END SAN : NAME.pem signed by ca.pem with explicit validity dates
# (YYYYMMDDHHMMSSZ), through `openssl ca` (x509 -req only counts days from now).
fx__leaf_dated() {
  fx__ec "$1.key"
  openssl req -config req.cnf -new -key "$1.key" -subj "/O=sluice tests/CN=$1" -out "$1.csr"
  fx__leafext "$1.ext" "$4"
  if [ ! -f ca-db/ca.cnf ]; then
    mkdir -p ca-db
    : >ca-db/index.txt
    echo 1000 >ca-db/serial
    cat >ca-db/ca.cnf <<EOF
[ca]
default_ca = test_ca
[test_ca]
dir = $PWD/ca-db
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
default_md = sha256
policy = any
unique_subject = no
email_in_dn = no
copy_extensions = none
[any]
organizationName = optional
commonName = supplied
EOF
  fi
  openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in "$1.csr" \
    -out "$1.pem" -notext -startdate "$2" -enddate "$3" -extfile "$1.ext" -extensions leaf
}

# fx_test_ca_matrix : fx_test_ca, plus (once) leaves that each break one rule of upstream
# verification (docs/reference/proxy.md §4.4) and are otherwise like good.pem (signed by ca.pem, valid now, P-256):
#   notyet.pem       good.pem's names, valid from 2099-01-01 (not yet valid)
#   cnonly.pem       no subjectAltName at all; subject CN a.sluice.test
#   sanother.pem     SAN DNS:other.example only; subject CN a.sluice.test
#   clientauth.pem   good.pem's names, extendedKeyUsage clientAuth only
#   selfsigned.pem   good.pem's names, subject CN a.sluice.test, self-signed (not ca.pem)
#   rsa1024.pem      good.pem's names, a 1024-bit RSA key (below OpenSSL's security level 2)
fx_test_ca_matrix() {
  fx_test_ca || return 1
  local d=$FX_PKI
  if [ -f "$d/selfsigned.pem" ]; then return 0; fi
  (
    set -e
    cd "$d"
    exec 2>>"$d/openssl.log"
    fx__leaf_dated notyet 20990101000000Z 20991231000000Z "$FX_GOOD_SAN"
    fx__leaf cnonly ca - serverAuth a.sluice.test
    fx__leaf sanother ca "DNS:other.example" serverAuth a.sluice.test
    fx__leaf clientauth ca "$FX_GOOD_SAN" clientAuth
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out rsa1024.key
    openssl req -config req.cnf -new -key rsa1024.key -subj "/O=sluice tests/CN=rsa1024" \
      -out rsa1024.csr
    fx__leafext rsa1024.ext "$FX_GOOD_SAN" serverAuth
    openssl x509 -req -in rsa1024.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
      -sha256 -extfile rsa1024.ext -extensions leaf -out rsa1024.pem
    fx__ec selfsigned.key
    fx__leafext selfsigned.ext "$FX_GOOD_SAN" serverAuth self
    cat req.cnf selfsigned.ext >selfsigned.cnf
    openssl req -config selfsigned.cnf -new -x509 -key selfsigned.key -out selfsigned.pem \
      -days 30 -subj "/O=sluice tests/CN=a.sluice.test" -extensions leaf -sha256
  ) || {
    echo "# fx_test_ca_matrix: openssl failed:"
    sed 's/^/#   /' "$d/openssl.log"
    return 1
  }
}

# ---------------------------------------------------------------------------------------------
# nginx

# fx_nginx_start : a real nginx (FX_NGINX, default /usr/sbin/nginx) in $FX_WORK/nginx, one
# process (master_process off), listening on 127.0.0.1 only. Exports
#   FX_TLS_PORT        TLS 1.2/1.3, good.pem (*.sluice.test), keep-alive, session cache + tickets
#   FX_WRONG_PORT      TLS, wrong.pem (wrong.example)
#   FX_EXPIRED_PORT    TLS, expired.pem
#   FX_UNTRUSTED_PORT  TLS, untrusted.pem (rogue CA)
#   FX_HTTP_PORT       plain HTTP
#   FX_TLS6_PORT       TLS with good.pem on [::1] (empty when this host has no IPv6 loopback)
#   FX_NGINX_LOG       access log: one JSON object per request with port, conn (nginx's
#                      connection serial), seq, method, uri, status, host, authorization, probe
#                      (X-Probe), request_length, bytes_sent, tls, sni, reused ("r" when the
#                      connection resumed a TLS session, "." when not)
#   FX_NGINX_DIR, FX_NGINX_PID
# Every server serves: / (index.html), /hello ("hello from nginx\n"), /204, /304 (return 304),
# /static.txt (static, with ETag and Last-Modified), /echo-auth ("auth=<Authorization>\n"),
# /big (after fx_nginx_big), anything else 404.
# FX_NGINX_EXTRA, when set, is added inside http { } (more server blocks; they may include
# $FX_NGINX_DIR/common.conf, which exists by then), and the ports listed in FX_NGINX_EXTRA_PORTS
# are waited for like the others.
fx_nginx_start() {
  local d=$FX_WORK/nginx ports listen6="" i
  if [ ! -x "$FX_NGINX" ]; then
    echo "# fx_nginx_start: $FX_NGINX not found (Debian: apt-get install -y nginx)"
    return 1
  fi
  fx_test_ca || return 1
  mkdir -p "$d/www" "$d/tmp"
  FX_NGINX_DIR=$d
  FX_NGINX_LOG=$d/access.log
  mapfile -t ports < <(fx_free_ports 5)
  FX_TLS_PORT=${ports[0]}
  FX_WRONG_PORT=${ports[1]}
  FX_EXPIRED_PORT=${ports[2]}
  FX_UNTRUSTED_PORT=${ports[3]}
  FX_HTTP_PORT=${ports[4]}
  FX_TLS6_PORT=
  if fx_have_ipv6; then
    FX_TLS6_PORT=$("$FX_PYTHON" -c '
import socket
s = socket.socket(socket.AF_INET6)
s.bind(("::1", 0))
print(s.getsockname()[1])')
    listen6="listen [::1]:$FX_TLS6_PORT ssl;"
  fi
  export FX_TLS_PORT FX_WRONG_PORT FX_EXPIRED_PORT FX_UNTRUSTED_PORT FX_HTTP_PORT FX_TLS6_PORT
  printf 'sluice fixture index\n' >"$d/www/index.html"
  printf 'static file for conditional requests\n' >"$d/www/static.txt"

  cat >"$d/common.conf" <<EOF
root $d/www;
location = / { index index.html; }
location = /hello { default_type text/plain; return 200 "hello from nginx\n"; }
location = /204 { return 204; }
location = /304 { return 304; }
location = /echo-auth { default_type text/plain; return 200 "auth=\$http_authorization\n"; }
location / { }
EOF
  cat >"$d/nginx.conf" <<EOF
$(fx__nginx_main "$d" 1024)
http {
  default_type application/octet-stream;
  log_format fx escape=json '{"port":\$server_port,"conn":\$connection,'
    '"seq":\$connection_requests,"method":"\$request_method","uri":"\$request_uri",'
    '"status":\$status,"host":"\$host","authorization":"\$http_authorization",'
    '"probe":"\$http_x_probe","request_length":\$request_length,'
    '"bytes_sent":\$body_bytes_sent,"tls":"\$ssl_protocol","sni":"\$ssl_server_name",'
    '"reused":"\$ssl_session_reused"}';
  access_log $d/access.log fx;
  sendfile on;
  tcp_nodelay on;
  keepalive_timeout 300s;
  keepalive_requests 100000;
$(fx__nginx_http "$d")
  ssl_session_cache shared:FX:1m;
  ssl_session_timeout 1h;
  ssl_session_tickets on;
$(fx__nginx_tls_server "$FX_TLS_PORT" good "include $d/common.conf;" "$listen6")
$(fx__nginx_tls_server "$FX_WRONG_PORT" wrong "include $d/common.conf;")
$(fx__nginx_tls_server "$FX_EXPIRED_PORT" expired "include $d/common.conf;")
$(fx__nginx_tls_server "$FX_UNTRUSTED_PORT" untrusted "include $d/common.conf;")
  server {
    listen 127.0.0.1:$FX_HTTP_PORT;
    include $d/common.conf;
  }
${FX_NGINX_EXTRA:-}
}
EOF
  "$FX_NGINX" -p "$d/" -c "$d/nginx.conf" -e "$d/error.log" >"$d/stdout" 2>&1 &
  FX_NGINX_PID=$!
  FX_PIDS+=("$FX_NGINX_PID")
  for i in "${ports[@]}" ${FX_NGINX_EXTRA_PORTS:-}; do
    if ! fx__wait_listen "$FX_NGINX_PID" "$i" 10; then
      echo "# fx_nginx_start: nginx is not answering on 127.0.0.1:$i"
      fx__dump "$d/stdout" "$d/error.log"
      return 1
    fi
  done
  if [ -n "$FX_TLS6_PORT" ] && ! fx_wait 10 fx_port_open "$FX_TLS6_PORT" ::1; then
    echo "# fx_nginx_start: nginx is not answering on [::1]:$FX_TLS6_PORT"
    fx__dump "$d/error.log"
    return 1
  fi
}

# fx__nginx_main DIR CONNECTIONS : the main context of an nginx.conf for an nginx run in DIR,
# in the foreground, one process (as root, its workers stay root: they read the work dir).
fx__nginx_main() {
  if [ "$(id -u)" = 0 ]; then
    echo "user root root;"
  fi
  cat <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log info;
events { worker_connections $2; }
EOF
}

# fx__nginx_http DIR : what every http { } of the fixtures sets: temporary files in DIR/tmp, no
# body size limit, TLS 1.2 and 1.3.
fx__nginx_http() {
  cat <<EOF
  client_max_body_size 0;
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
  ssl_protocols TLSv1.2 TLSv1.3;
EOF
}

# fx__nginx_tls_server PORT LEAF BODY [LISTEN] : a server { } on 127.0.0.1:PORT with TLS and
# the test CA's leaf LEAF (FX_PKI/LEAF.pem, .key), BODY inside it, LISTEN an extra listen line.
fx__nginx_tls_server() {
  printf '  server {\n    listen 127.0.0.1:%s ssl;\n' "$1"
  if [ -n "${4:-}" ]; then
    printf '    %s\n' "$4"
  fi
  printf '    ssl_certificate %s.pem;\n    ssl_certificate_key %s.key;\n    %s\n  }\n' \
    "$FX_PKI/$2" "$FX_PKI/$2" "$3"
}

# fx_nginx_big : creates /big, a 1 GiB sparse file of zeros (FX_BIG_SIZE bytes, FX_BIG_SHA256).
fx_nginx_big() {
  truncate -s 1G "$FX_NGINX_DIR/www/big"
  FX_BIG_SIZE=1073741824
  FX_BIG_SHA256=49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14
}

# fx__wait_listen PID PORT SECONDS : waits until PORT accepts; fails at once if PID exits.
fx__wait_listen() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 1
    if fx_port_open "$2"; then return 0; fi
    sleep 0.1
  done
  return 1
}

fx__dump() {
  local f
  for f in "$@"; do
    [ -s "$f" ] || continue
    echo "# --- $f"
    tail -n 30 "$f" | sed 's/^/#   /'
  done
}

# ---------------------------------------------------------------------------------------------
# origin.py

# fx_origin_start : tests/support/origin.py on 127.0.0.1, plain and TLS (good.pem). Exports
# FX_PY_HTTP_PORT, FX_PY_TLS_PORT, FX_ORIGIN_LOG (JSON lines, one per request: conn, port, tls,
# seq, method, target, path, authorization, headers) and FX_ORIGIN_PID.
fx_origin_start() {
  local d=$FX_WORK/origin line
  fx_test_ca || return 1
  mkdir -p "$d"
  FX_ORIGIN_LOG=$d/requests.log
  "$FX_PYTHON" "$FX_SUPPORT/origin.py" serve --ports-file "$d/ports" --log "$FX_ORIGIN_LOG" \
    --cert "$FX_PKI/good.pem" --key "$FX_PKI/good.key" 2>"$d/stderr" &
  FX_ORIGIN_PID=$!
  FX_PIDS+=("$FX_ORIGIN_PID")
  if ! fx_wait 10 test -s "$d/ports"; then
    echo "# fx_origin_start: origin.py did not start"
    fx__dump "$d/stderr"
    return 1
  fi
  line=$(cat "$d/ports")
  FX_PY_HTTP_PORT=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$line")
  FX_PY_TLS_PORT=$(sed -n 's/.*tls=\([0-9]*\).*/\1/p' <<<"$line")
  export FX_PY_HTTP_PORT FX_PY_TLS_PORT
  fx_port_open "$FX_PY_HTTP_PORT" && fx_port_open "$FX_PY_TLS_PORT"
}

# fx_pattern_sha256 N : SHA-256 of the first N bytes of origin.py's pattern.
fx_pattern_sha256() {
  "$FX_PYTHON" "$FX_SUPPORT/origin.py" pattern "$1" | sha256sum | cut -d' ' -f1
}

# fx_pattern N : the first N bytes of origin.py's pattern on stdout.
fx_pattern() {
  "$FX_PYTHON" "$FX_SUPPORT/origin.py" pattern "$1"
}

# ---------------------------------------------------------------------------------------------
# sluice proxy

# fx_resolve HOST... : sets the array FX_RESOLVE to `--resolve HOST:PORT:127.0.0.1` for every
# HOST and every fixture port known so far (nginx's and origin.py's), for fx_proxy_start.
fx_resolve() {
  local h p
  FX_RESOLVE=()
  for h in "$@"; do
    for p in ${FX_TLS_PORT:-} ${FX_WRONG_PORT:-} ${FX_EXPIRED_PORT:-} ${FX_UNTRUSTED_PORT:-} \
      ${FX_HTTP_PORT:-} ${FX_PY_HTTP_PORT:-} ${FX_PY_TLS_PORT:-}; do
      FX_RESOLVE+=(--resolve "$h:$p:127.0.0.1")
    done
  done
}

# fx_proxy_start ARGS... : starts `$SLUICE_BIN proxy` on a free 127.0.0.1 port with a CA made by
# `sluice ca init` (once per test, in $FX_WORK/sluice-data), its own audit log, admin socket and
# log (stderr; level $FX_LOG_LEVEL, default debug), plus ARGS. Waits up to 10 s for the port.
# Exports
#   FX_PROXY_PORT, FX_PROXY_PID, FX_SLUICE_CA (ca.pem to trust), FX_AUDIT, FX_PROXY_LOG,
#   FX_ADMIN_SOCK
# Each call starts another proxy (proxyN.*); the previous one keeps running until fx_proxy_stop.
fx_proxy_start() {
  local data=$FX_WORK/sluice-data n
  if [ -z "${SLUICE_BIN:-}" ] || [ ! -x "$SLUICE_BIN" ]; then
    echo "# fx_proxy_start: SLUICE_BIN ('${SLUICE_BIN:-}') is not an executable"
    return 1
  fi
  if [ ! -f "$data/ca.pem" ]; then
    if ! "$SLUICE_BIN" ca init --out "$data" >"$FX_WORK/ca-init.out" 2>&1; then
      echo "# fx_proxy_start: sluice ca init failed:"
      fx__dump "$FX_WORK/ca-init.out"
      return 1
    fi
  fi
  FX_SLUICE_CA=$data/ca.pem
  FX_PROXY_N=$((FX_PROXY_N + 1))
  n=$FX_PROXY_N
  FX_PROXY_PORT=$(fx_free_port)
  FX_AUDIT=$FX_WORK/proxy$n.audit.log
  FX_PROXY_LOG=$FX_WORK/proxy$n.log
  FX_ADMIN_SOCK=$FX_WORK/proxy$n.sock
  FX_PROXY_EXIT=
  "$SLUICE_BIN" proxy --listen "127.0.0.1:$FX_PROXY_PORT" --data "$data" \
    --audit-log "$FX_AUDIT" --admin-socket "$FX_ADMIN_SOCK" \
    --log-level "${FX_LOG_LEVEL:-debug}" "$@" \
    >"$FX_WORK/proxy$n.stdout" 2>"$FX_PROXY_LOG" &
  FX_PROXY_PID=$!
  FX_PIDS+=("$FX_PROXY_PID")
  export FX_PROXY_PORT FX_SLUICE_CA FX_AUDIT FX_PROXY_LOG FX_ADMIN_SOCK
  if ! fx__wait_listen "$FX_PROXY_PID" "$FX_PROXY_PORT" 10; then
    if kill -0 "$FX_PROXY_PID" 2>/dev/null; then
      echo "# fx_proxy_start: sluice proxy (pid $FX_PROXY_PID) is not accepting on port $FX_PROXY_PORT after 10 s"
    else
      local rc=0
      wait "$FX_PROXY_PID" || rc=$?
      echo "# fx_proxy_start: sluice proxy exited with status $rc"
    fi
    fx__dump "$FX_PROXY_LOG" "$FX_WORK/proxy$n.stdout"
    return 1
  fi
}

# fx_proxy_stop [PID] : SIGTERM to the proxy (default FX_PROXY_PID), then fx_proxy_wait_exit.
fx_proxy_stop() {
  local pid=${1:-$FX_PROXY_PID}
  kill -TERM "$pid" 2>/dev/null || true
  fx_proxy_wait_exit "$pid"
}

# fx_proxy_wait_exit [PID] : fx_wait_exit for the proxy (default FX_PROXY_PID) with
# FX_STOP_SECONDS (default 20); its status in FX_PROXY_EXIT.
fx_proxy_wait_exit() {
  local rc=0
  fx_wait_exit "${1:-$FX_PROXY_PID}" "${FX_STOP_SECONDS:-20}" || rc=$?
  FX_PROXY_EXIT=$FX_EXIT
  return "$rc"
}

# fx_stop_pid PID SECS : SIGTERM to PID (a child of this shell), then fx_wait_exit PID SECS.
fx_stop_pid() {
  kill -TERM "$1" 2>/dev/null || true
  fx_wait_exit "$1" "$2"
}

# fx_wait_exit PID SECS : waits up to SECS for PID (a child of this shell) to exit, SIGKILL
# after that. Sets FX_EXIT to its exit status (or "timeout") and succeeds only when it is 0.
fx_wait_exit() {
  local pid=$1 secs=$2 i rc=0
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    FX_EXIT=timeout
    echo "# fx_wait_exit: pid $pid still running ${secs} s after SIGTERM; killed"
    return 1
  fi
  wait "$pid" 2>/dev/null || rc=$?
  FX_EXIT=$rc
  if [ "$rc" != 0 ]; then
    echo "# fx_wait_exit: pid $pid exited with status $rc"
  fi
  [ "$rc" = 0 ]
}

# fx_proxy_alive : the current proxy process is still running.
fx_proxy_alive() {
  kill -0 "$FX_PROXY_PID" 2>/dev/null
}

# fx_sanitized : SLUICE_BIN is an ASan/TSan build (memory figures are then meaningless).
fx_sanitized() {
  grep -qaE '__asan_init|__tsan_init' "$SLUICE_BIN" 2>/dev/null
}

# fx_proxy_mem FIELD : the proxy's /proc/PID/status FIELD (VmRSS, VmHWM) in KiB.
fx_proxy_mem() {
  awk -v f="$1:" '$1 == f { print $2 }' "/proc/$FX_PROXY_PID/status" 2>/dev/null || echo 0
}

# fx_policy FILE JSON : writes a policy snapshot atomically (a temporary file renamed over FILE,
# so a watching proxy never reads half a file).
fx_policy() {
  printf '%s\n' "$2" >"$1.tmp.$$"
  mv -f "$1.tmp.$$" "$1"
}

# fx_local_policy FILE ENV RULE... : fx_policy FILE with a version 1 snapshot of one environment
# ENV (default deny) and one client `local` (127.0.0.0/8) in it; each RULE is a host pattern
# (`{ "host": RULE }`) or, starting with `{`, a whole rule in JSON. Then checks that `sluice
# policy check` takes the file (one check line).
fx_local_policy() {
  local file=$1 env=$2 rule rules=
  shift 2
  for rule in "$@"; do
    case $rule in
      "{"*) ;;
      *) rule="{ \"host\": \"$rule\" }" ;;
    esac
    rules+="${rules:+,
    }$rule"
  done
  fx_policy "$file" "{
  \"version\": 1,
  \"environments\": { \"$env\": { \"default\": \"deny\", \"rules\": [
    $rules ] } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"$env\" } ]
}"
  check "the test policy is valid (sluice policy check)" \
    bash -c "'$SLUICE_BIN' policy check '$file' >/dev/null"
}

# fx_cred_rule HOST VALUE : prints a rule for fx_local_policy: HOST, its requests given the
# credential `Authorization: VALUE` by the proxy.
fx_cred_rule() {
  printf '{ "host": "%s", "credential": { "header": "Authorization", "value": "%s" } }' "$1" "$2"
}

# fx_admin METHOD PATH [curl args...] : an admin-socket request. Sets FX_CODE and writes the
# body to $FX_WORK/admin.body (FX_ADMIN_BODY).
fx_admin() {
  local method=$1 path=$2
  shift 2
  FX_ADMIN_BODY=$FX_WORK/admin.body
  : >"$FX_ADMIN_BODY"
  FX_CODE=$(curl -q -sS --max-time 10 --unix-socket "$FX_ADMIN_SOCK" -X "$method" \
    -o "$FX_ADMIN_BODY" -w '%{http_code}' "$@" "http://localhost$path" 2>"$FX_WORK/admin.err") ||
    true
  FX_CODE=${FX_CODE:-000}
}

# ---------------------------------------------------------------------------------------------
# A control plane without Docker, pushing to the current proxy

# fx_control_data DIR : DIR (made with mode 0700 when missing) readied as a control plane's data
# directory: an encryption key and an admin user, whose token goes to FX_CONTROL_TOKEN.
fx_control_data() {
  [ -d "$1" ] || mkdir -m 0700 "$1"
  head -c 32 /dev/urandom | base64 >"$1/encryption.key"
  chmod 600 "$1/encryption.key"
  FX_CONTROL_TOKEN=$("$SLUICE_BIN" user add admin --admin --data "$1")
}

# fx_control_start DATA PORT NETWORK : `sluice control` on 127.0.0.1:PORT with the data directory
# DATA, pushing to the current proxy's admin socket, its sandbox network named NETWORK and a
# Docker socket nobody listens on; output appended to $FX_WORK/control.log. Sets
# FX_CONTROL_PID; fails unless /healthz answers within 15 s.
fx_control_start() {
  "$SLUICE_BIN" control --listen "127.0.0.1:$2" --data "$1" \
    --proxy-admin-socket "$FX_ADMIN_SOCK" --network "$3" \
    --docker-socket "$FX_WORK/no-docker.sock" >>"$FX_WORK/control.log" 2>&1 &
  FX_CONTROL_PID=$!
  FX_PIDS+=("$FX_CONTROL_PID")
  fx_wait 15 curl -sf -o /dev/null "http://127.0.0.1:$2/healthz"
}

# ---------------------------------------------------------------------------------------------
# curl through the proxy

# fx_curl ARGS... : curl through the proxy, trusting the sluice CA, --max-time 20 (ARGS may add
# another --max-time; curl uses the last). Never fails; sets
#   FX_RC            curl's exit status
#   FX_CODE          status of the final response; the CONNECT status when the tunnel was refused
#                    (curl then has no final response); 000 when there was no answer at all
#   FX_CONNECT_CODE  the CONNECT status (000 for plain http:// requests)
#   FX_SIZE          body bytes received (curl's size_download; with -I, FX_BODY holds the head)
# and writes FX_HDRS (every head curl saw, CONNECT answer included), FX_BODY, FX_ERR (stderr).
# FX_CURL_IN, when set, is a command prefix curl runs under (e.g. nsenter into a namespace).
fx_curl() {
  local w
  fx__curl_reset
  w=$(${FX_CURL_IN:-} curl -q -sS --max-time 20 --proxy "http://127.0.0.1:$FX_PROXY_PORT" \
    --cacert "$FX_SLUICE_CA" -D "$FX_HDRS" -o "$FX_BODY" \
    -w '%{http_code} %{http_connect} %{size_download}' "$@" 2>"$FX_ERR") || FX_RC=$?
  read -r FX_CODE FX_CONNECT_CODE FX_SIZE <<<"$w" || true
  FX_CODE=${FX_CODE:-000}
  FX_CONNECT_CODE=${FX_CONNECT_CODE:-000}
  FX_SIZE=${FX_SIZE:-0}
  # A proxy that stops answering would make every later request wait for its --max-time: give
  # up after three timeouts in a row.
  if [ "$FX_RC" = 28 ] && [ "$FX_CODE" = 000 ]; then
    FX_TIMEOUTS=$((${FX_TIMEOUTS:-0} + 1))
    if [ "$FX_TIMEOUTS" -ge 3 ]; then
      fx_curl_show
      fx_bail "the proxy stopped answering (three requests in a row timed out)"
    fi
  else
    FX_TIMEOUTS=0
  fi
  if [ "$FX_CODE" = 000 ] && [ "$FX_CONNECT_CODE" != 000 ] && [ "$FX_CONNECT_CODE" != 200 ]; then
    FX_CODE=$FX_CONNECT_CODE
  fi
}

# fx__curl_reset : the files of the next curl (FX_HDRS and FX_BODY emptied, FX_ERR) and FX_RC 0.
fx__curl_reset() {
  FX_HDRS=$FX_WORK/curl.headers
  FX_BODY=$FX_WORK/curl.body
  FX_ERR=$FX_WORK/curl.err
  : >"$FX_HDRS"
  : >"$FX_BODY"
  FX_RC=0
}

# fx_header NAME [FILE] : value of header NAME in the last head of FILE (default FX_HDRS).
fx_header() {
  awk -v want="$(tr '[:upper:]' '[:lower:]' <<<"$1")" '
    { sub(/\r$/, "") }
    /^HTTP\// { val = ""; next }
    {
      i = index($0, ":")
      if (i > 0 && tolower(substr($0, 1, i - 1)) == want) {
        v = substr($0, i + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v); val = v
      }
    }
    END { print val }' "${2:-$FX_HDRS}"
}

# fx_reason : the X-Sluice-Reason of the last fx_curl (empty when none).
fx_reason() {
  fx_header X-Sluice-Reason
}

# fx_curl_show : prints what the last fx_curl got, as comments.
fx_curl_show() {
  echo "#   curl exit $FX_RC, status $FX_CODE, CONNECT $FX_CONNECT_CODE, reason '$(fx_reason)'"
  if [ -s "$FX_ERR" ]; then sed 's/^/#   stderr: /' "$FX_ERR" | head -n 5; fi
  if [ -s "$FX_BODY" ]; then head -c 300 "$FX_BODY" | tr -c '[:print:]\n' '.' |
    sed 's/^/#   body: /' | head -n 5; fi
}

# check_status DESCRIPTION STATUS [REASON] : the last fx_curl got STATUS (and, when given,
# X-Sluice-Reason REASON; "-" means no X-Sluice-Reason header at all).
check_status() {
  local what=$1 want=$2 reason=${3:-} got_reason
  got_reason=$(fx_reason)
  if [ "$FX_CODE" = "$want" ] &&
    { [ -z "$reason" ] || [ "$got_reason" = "$reason" ] ||
      { [ "$reason" = - ] && [ -z "$got_reason" ]; }; }; then
    ok "$what"
    FX_LAST=0
  else
    not_ok "$what"
    # shellcheck disable=SC2016
    echo "#   want status $want${reason:+ reason '$reason'}"
    fx_curl_show
    FX_LAST=1
  fi
  return 0
}

# check_refused DESCRIPTION REASON : the last fx_curl was refused by the proxy (a 4xx/5xx with
# X-Sluice-Reason REASON), before or inside the tunnel; the status is not checked.
check_refused() {
  local got_reason
  got_reason=$(fx_reason)
  if [ "$got_reason" = "$2" ] && [ "$FX_CODE" -ge 400 ] 2>/dev/null; then
    ok "$1"
    FX_LAST=0
  else
    not_ok "$1"
    echo "#   want a refusal with reason '$2'"
    fx_curl_show
    FX_LAST=1
  fi
  return 0
}

# fx_body_sha256 : SHA-256 of the last fx_curl body.
fx_body_sha256() {
  fx_sha256 "$FX_BODY"
}

# fx_sha256 FILE : SHA-256 of FILE, or "missing".
fx_sha256() {
  if [ -f "$1" ]; then sha256sum <"$1" | cut -d' ' -f1; else echo missing; fi
}

# ---------------------------------------------------------------------------------------------
# JSON-lines logs (audit log, origin.py log, nginx access log)

# fx_jsonl_count FILE COND... : prints how many JSON lines of FILE satisfy every COND:
#   key=value   the field equals value (numbers, true/false/null compared as JSON text)
#   key!=value  the field differs from value
#   key~text    the field, as text, contains text
# Lines that are not JSON objects are ignored.
fx_jsonl_count() {
  fx__jsonl count "$1" - "${@:2}"
}

# fx_jsonl_distinct FILE FIELD COND... : prints how many distinct values FIELD takes among the
# lines that satisfy every COND.
fx_jsonl_distinct() {
  fx__jsonl distinct "$@"
}

fx__jsonl() {
  "$FX_PYTHON" - "$@" <<'EOF'
import json, sys
mode, path, field, conds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return json.dumps(v)
def parse(cond):
    for op in ("!=", "=", "~"):
        k, sep, want = cond.partition(op)
        if sep and k and not any(c in k for c in "=~!"):
            return k, op, want
    raise SystemExit(f"fx_jsonl: bad condition {cond!r}")
tests = [parse(c) for c in conds]
def match(doc):
    for k, op, want in tests:
        got = text(doc.get(k))
        if op == "=" and not (k in doc and got == want):
            return False
        if op == "!=" and got == want:
            return False
        if op == "~" and not (k in doc and want in got):
            return False
    return True
n, seen = 0, set()
try:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and match(doc):
                n += 1
                seen.add(json.dumps(doc.get(field)))
except FileNotFoundError:
    pass
print(n if mode == "count" else len(seen))
EOF
}

# fx_jsonl_has FILE COND... : at least one line of FILE satisfies every COND.
fx_jsonl_has() {
  [ "$(fx_jsonl_count "$@")" -gt 0 ]
}

# fx_audit_has COND... : an audit line (FX_AUDIT) satisfies every COND (fx_jsonl_count syntax).
# The audit log is written asynchronously, so this waits up to 5 s for the line.
fx_audit_has() {
  fx_wait 5 fx_jsonl_has "$FX_AUDIT" "$@"
}

# fx_audit_show COND... : prints the audit lines (as comments), for failure messages.
fx_audit_show() {
  echo "#   audit log ($FX_AUDIT):"
  if [ -s "$FX_AUDIT" ]; then tail -n 5 "$FX_AUDIT" | sed 's/^/#     /'; else echo "#     (empty)"; fi
}

# check_audit DESCRIPTION COND... : fx_audit_has, with the log shown on failure.
check_audit() {
  local what=$1
  shift
  if fx_audit_has "$@"; then
    ok "$what"
    FX_LAST=0
  else
    not_ok "$what"
    echo "#   no audit line with: $*"
    fx_audit_show
    FX_LAST=1
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# tests/support/proxy_client.py

# fx_pyclient ARGS... : proxy_client.py through the current proxy, trusting the sluice CA,
# bounded by `timeout 120`. Output on stdout (see proxy_client.py).
fx_pyclient() {
  timeout 120 "$FX_PYTHON" "$FX_SUPPORT/proxy_client.py" --proxy "127.0.0.1:$FX_PROXY_PORT" \
    --cafile "$FX_SLUICE_CA" "$@"
}

# fx_pyclient_bg OUTFILE ARGS... : fx_pyclient in the background, output in OUTFILE; FX_BG_PID
# is its pid (killed by the EXIT trap).
fx_pyclient_bg() {
  local outfile=$1
  shift
  timeout 120 "$FX_PYTHON" "$FX_SUPPORT/proxy_client.py" --proxy "127.0.0.1:$FX_PROXY_PORT" \
    --cafile "$FX_SLUICE_CA" "$@" >"$outfile" 2>&1 &
  FX_BG_PID=$!
  FX_PIDS+=("$FX_BG_PID")
}

# fx_pc ARGS... : fx_pyclient with 10 s per socket operation, its output (stderr too) on one
# line, the events joined by spaces, status lines cut to "status=N reason=R" and "tls=ok ..." to
# "tls=ok": one string to compare with what a test expects. Never fails.
fx_pc() {
  { fx_pyclient --timeout 10 "$@" 2>&1 || true; } |
    sed -E 's/^(status=[0-9]+ reason=[^ ]+) .*/\1/; s/^tls=ok .*/tls=ok/' | paste -sd' ' -
}

# fx_seen TEXT : how many requests origin.py logged whose target contains TEXT.
fx_seen() {
  fx_jsonl_count "$FX_ORIGIN_LOG" target~"$1"
}

# fx_client_open NAME ARGS... : starts an interactive proxy_client.py (a tunnel kept open);
# requests are sent with fx_client_send. Output goes to $FX_WORK/client-NAME.out.
fx_client_open() {
  local name=$1 fifo=$FX_WORK/client-$1.in fd
  shift
  mkfifo "$fifo"
  "$FX_PYTHON" "$FX_SUPPORT/proxy_client.py" --proxy "127.0.0.1:$FX_PROXY_PORT" \
    --cafile "$FX_SLUICE_CA" --interactive "$@" <"$fifo" >"$FX_WORK/client-$name.out" \
    2>"$FX_WORK/client-$name.err" &
  FX_PIDS+=("$!")
  printf -v "FX_CLIENT_PID_$name" '%s' "$!"
  exec {fd}>"$fifo"
  printf -v "FX_CLIENT_FD_$name" '%s' "$fd"
  # The tunnel is up once the handshake line is printed (or it failed).
  fx_wait 20 grep -qE '^(tls=|tls-error|connect=[^2]|error)' "$FX_WORK/client-$name.out"
  grep -q '^tls=ok' "$FX_WORK/client-$name.out"
}

# fx_client_send NAME 'METHOD PATH' : sends one request on client NAME's tunnel and prints the
# response line (status=... reason=...), or "error ..." / "" when the client is gone. Waits up
# to 20 s.
fx_client_send() {
  local name=$1 fdvar="FX_CLIENT_FD_$1" pidvar="FX_CLIENT_PID_$1" out=$FX_WORK/client-$1.out
  local before
  before=$(wc -l <"$out")
  if ! kill -0 "${!pidvar}" 2>/dev/null; then
    echo "error client $name has exited: $(tail -n 1 "$out")"
    return 0
  fi
  { printf '%s\n' "$2" >&"${!fdvar}"; } 2>/dev/null || true
  fx_wait 20 fx__more_lines "$out" "$before" || true
  tail -n +"$((before + 1))" "$out" | head -n 1
}

fx__more_lines() {
  [ "$(wc -l <"$1")" -gt "$2" ]
}

# fx_client_close NAME : ends client NAME (EOF on its input) and waits up to 5 s for it.
fx_client_close() {
  local fdvar="FX_CLIENT_FD_$1" pidvar="FX_CLIENT_PID_$1" fd
  fd=${!fdvar}
  exec {fd}>&-
  fx_wait 5 fx__dead "${!pidvar}" || kill -KILL "${!pidvar}" 2>/dev/null || true
}

fx__dead() {
  ! kill -0 "$1" 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# Small helpers

# fx_json FILE EXPR : evaluates the Python expression EXPR with `d` bound to FILE's JSON; prints
# a string result as is and anything else as JSON. Prints nothing (and fails) when FILE is not
# JSON or EXPR raises.
fx_json() {
  "$FX_PYTHON" - "$@" <<'PY' 2>/dev/null
import json, sys
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    d = json.load(f)
r = eval(sys.argv[2], {"d": d, "json": json})
print(r if isinstance(r, str) else json.dumps(r))
PY
}

# fx_absent TEXT FILE... : none of the FILEs (that exist) contains TEXT; names the ones that do.
fx_absent() {
  local text=$1 f found=0
  shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    if grep -qaF -- "$text" "$f"; then
      echo "#   found in ${f#"$FX_WORK"/}"
      found=1
    fi
  done
  [ "$found" = 0 ]
}

# fx_random_hex N : N random hex digits.
fx_random_hex() {
  od -An -tx1 -N "$1" /dev/urandom | tr -d ' \n' | head -c "$1"
}
