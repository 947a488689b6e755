#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_transparent.sh - the DNS responder and transparent interception
# (docs/reference/proxy.md §4.12), with real clients that ignore proxy settings.
#
# A network namespace of the test's own (ip netns add) is joined to this one by a veth pair;
# the proxy listens on the host side's address: --dns-listen ADDR:53, --transparent ADDR (443,
# 80 and the redirect port 3129) and an explicit --listen ADDR:3128. An nftables table of the
# test's own (inet sluice_t_*, which `tools/dockerd.sh clean` removes when a run leaves it
# behind) redirects the veth's TCP to two more ports to 3129, as the control plane's host table
# does for ports rules name. The namespace's resolv.conf (/etc/netns/NAME/resolv.conf, which
# `ip netns exec` mounts) names the proxy's DNS responder and nothing else. The policy's client
# for the namespace's address has a token, as a sandbox's entry does: transparent connections
# and DNS queries are identified by address alone.
#
# The origin is the fixture's nginx on 127.251.N.1 (ports 443, 80, 8443 and 9443), reached by
# name through the proxy's --resolve pins. From inside the namespace, with no proxy setting at
# all: python3's getaddrinfo and raw UDP and TCP queries (A, AAAA, MX, a name the proxy would
# never resolve), then curl --noproxy '*', Node's fetch() without an agent, python3's urllib with
# proxies disabled and git clone with http.proxy unset, each reaching the allowed origin with the
# credential injected (seen by nginx) and each refused with host-not-allowed for another host;
# plain HTTP; a redirected port a rule names (through SO_ORIGINAL_DST) and one no rule names; a
# direct connection to the redirect port; a ClientHello without SNI; an SNI and Host that
# disagree (421); a first write that is neither TLS nor HTTP; an address no client has; the
# explicit proxy from the same namespace at the same time; and --max-connections-per-client 2
# counting the namespace's transparent and explicit connections together. Root only.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_setup

for tool in ip nft node git openssl; do
  if ! command -v "$tool" >/dev/null; then
    fx_skip "transparent interception" "needs $tool"
    fx_done
  fi
done
if [ "$(id -u)" != 0 ]; then
  fx_skip "transparent interception" "needs root for a network namespace, nftables and ports 53, 80, 443"
  fx_done
fi
fx_test_ca || fx_bail "the test CA"

# --- the namespace, the veth pair, the redirect ---------------------------------------------
# One /30 of 10.251.0.0/16 that no route of this host covers, and a name of its own.
tag=$(fx_random_hex 4)
N=$((16#${tag:0:2} % 250 + 1))
for ((i = 0; i < 250; i++)); do
  if ! ip -4 route show | grep -q "^10\.251\.$N\." && ! ip -4 addr show | grep -q " 10\.251\.$N\."; then
    break
  fi
  N=$((N % 250 + 1))
done
GW=10.251.$N.1
CL=10.251.$N.2
ORIGIN=127.251.$N.1
NS=sluice_t_$tag
VH=sltv$tag
VN=sltn$tag
TABLE=sluice_t_$tag
REDIRECT_PORT=3129
RULE_PORT=8443
BARE_PORT=9443
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup_net() {
  nft delete table inet "$TABLE" 2>/dev/null || true
  ip link del "$VH" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "/etc/netns/$NS"
  rmdir /etc/netns 2>/dev/null || true
}
# The fixture's EXIT trap reads the exit status first: it is kept for it.
trap 'rc=$?; cleanup_net; (exit "$rc"); fx__cleanup' EXIT
{
  ip netns add "$NS" &&
    ip link add "$VH" type veth peer name "$VN" &&
    ip link set "$VN" netns "$NS" &&
    ip addr add "$GW/30" dev "$VH" &&
    ip link set "$VH" up &&
    ip -n "$NS" addr add "$CL/30" dev "$VN" &&
    ip -n "$NS" link set "$VN" up &&
    ip -n "$NS" link set lo up &&
    mkdir -p "/etc/netns/$NS" &&
    printf 'nameserver %s\noptions timeout:2 attempts:2\n' "$GW" >"/etc/netns/$NS/resolv.conf" &&
    nft -f - <<EOF
table inet $TABLE {
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    iifname "$VH" tcp dport { $RULE_PORT, $BARE_PORT } redirect to :$REDIRECT_PORT
  }
}
EOF
} 2>"$FX_WORK/net.err" || {
  fx__dump "$FX_WORK/net.err"
  fx_bail "namespace $NS, veth $VH/$VN ($GW, $CL), table inet $TABLE"
}
ok "namespace $NS at $CL, joined to $GW; TCP to $RULE_PORT and $BARE_PORT redirected to $REDIRECT_PORT"
# in_ns CMD... : CMD in the namespace, with its resolv.conf and no proxy in the environment.
in_ns() { ip netns exec "$NS" env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY "$@"; }
check_eq "namespace: its resolv.conf names only the proxy's DNS responder" \
  "$(in_ns grep '^nameserver' /etc/resolv.conf)" "nameserver $GW"

# --- the origin: nginx on $ORIGIN, ports 443, 80, 8443 and 9443; a git repository ------------
FX_NGINX_EXTRA=
for p in 443 "$RULE_PORT" "$BARE_PORT"; do
  FX_NGINX_EXTRA+="
  server {
    listen $ORIGIN:$p ssl;
    ssl_certificate $FX_PKI/good.pem;
    ssl_certificate_key $FX_PKI/good.key;
    include $FX_WORK/nginx/common.conf;
  }"
done
FX_NGINX_EXTRA+="
  server { listen $ORIGIN:80; include $FX_WORK/nginx/common.conf; }"
fx_nginx_start || fx_bail "nginx starts"
for p in 443 80 "$RULE_PORT" "$BARE_PORT"; do
  fx_wait 10 fx_port_open "$p" "$ORIGIN" || fx_bail "nginx answers on $ORIGIN:$p"
done
repo_src=$FX_WORK/repo-src
{
  git init -q -b main "$repo_src" &&
    printf 'hello through the gateway\n' >"$repo_src/README" &&
    git -C "$repo_src" -c user.name=t -c user.email=t@t add README &&
    git -C "$repo_src" -c user.name=t -c user.email=t@t commit -qm one &&
    git clone -q --bare "$repo_src" "$FX_NGINX_DIR/www/repo.git" &&
    git -C "$FX_NGINX_DIR/www/repo.git" update-server-info
} 2>"$FX_WORK/git.err" || {
  fx__dump "$FX_WORK/git.err"
  fx_bail "a bare repository served by nginx (git's dumb HTTP)"
}

# --- the proxy --------------------------------------------------------------------------------
SECRET=Bearer-s3cr3t-$(fx_random_hex 8)
policy=$FX_WORK/policy.json
fx_policy "$policy" "{ \"version\": 1, \"environments\": { \"dev\": { \"default\": \"deny\", \"rules\": [
    { \"host\": \"allowed.sluice.test\", \"credential\": { \"header\": \"Authorization\", \"value\": \"$SECRET\" } },
    { \"host\": \"alt.sluice.test:$RULE_PORT\", \"credential\": { \"header\": \"Authorization\", \"value\": \"$SECRET\" } },
    { \"host\": \"plain.sluice.test\" },
    { \"host\": \"pass.sluice.test\", \"tls\": \"passthrough\" } ] } },
  \"clients\": [ { \"id\": \"sb_t\", \"token\": \"t0k3n\", \"ip\": \"$CL\", \"environment\": \"dev\" } ] }"
pins=()
for h in allowed denied alt plain pass; do
  for p in 443 80 "$RULE_PORT" "$BARE_PORT"; do pins+=(--resolve "$h.sluice.test:$p:$ORIGIN"); done
done
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --listen "$GW:3128" --dns-listen "$GW:53" --transparent "$GW" "${pins[@]}" --workers 2 ||
  fx_bail "sluice proxy starts with --dns-listen $GW:53 --transparent $GW"
CA=$FX_SLUICE_CA
for p in 443 80 "$REDIRECT_PORT" 3128; do
  check "the proxy listens on $GW:$p" fx_port_open "$p" "$GW"
done

# --- (1) DNS ------------------------------------------------------------------------------------
dnsq() { # dnsq udp|tcp NAME TYPE : prints "rcode=R an=N ttl=T addr=A" of the answer
  in_ns "$FX_PYTHON" - "$GW" "$@" <<'EOF'
import random, socket, struct, sys
server, transport, name, qtype = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
qid = random.randrange(65536)
q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
for label in name.split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", qtype, 1)
if transport == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    a = s.recv(2048)
else:
    s = socket.create_connection((server, 53), timeout=3)
    s.sendall(struct.pack(">H", len(q)) + q)
    a = b""
    while len(a) < 2 or len(a) < 2 + struct.unpack(">H", a[:2])[0]:
        chunk = s.recv(2048)
        if not chunk:
            break
        a += chunk
    a = a[2:]
rid, flags, qd, an = struct.unpack(">HHHH", a[:8])
assert rid == qid, "id"
ttl, addr = "-", "-"
if an:
    rr = a[len(q):]
    ttl = struct.unpack(">I", rr[6:10])[0]
    addr = socket.inet_ntoa(rr[12:16])
print(f"rcode={flags & 15} an={an} ttl={ttl} addr={addr}")
EOF
}
check_eq "DNS over UDP: A allowed.sluice.test is the gateway, TTL 5" \
  "$(dnsq udp allowed.sluice.test 1)" "rcode=0 an=1 ttl=5 addr=$GW"
check_eq "DNS over TCP: the same answer" "$(dnsq tcp allowed.sluice.test 1)" \
  "rcode=0 an=1 ttl=5 addr=$GW"
# One client address holds at most 8 TCP connections (one sandbox cannot take all 64 slots):
# 12 opened from the namespace, 8 stay open; meanwhile a query from another address (the host's
# own, on the gateway) is answered over TCP.
in_ns "$FX_PYTHON" - "$GW" >"$FX_WORK/dns-held" 2>&1 <<'EOF' &
import socket, sys, time
socks = [socket.create_connection((sys.argv[1], 53), timeout=3) for _ in range(12)]
time.sleep(1)
alive = 0
for s in socks:
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print(alive)
time.sleep(1.5)
EOF
held_pid=$!
sleep 1.2
other=$("$FX_PYTHON" - "$GW" <<'EOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x01a\x06sluice\x04test\x00"
q += struct.pack(">HH", 1, 1)
s = socket.create_connection((sys.argv[1], 53), timeout=3)
s.sendall(struct.pack(">H", len(q)) + q)
a = b""
while len(a) < 2 or len(a) < 2 + struct.unpack(">H", a[:2])[0]:
    chunk = s.recv(2048)
    if not chunk:
        break
    a += chunk
print("answered" if len(a) > 12 and struct.unpack(">H", a[2:4])[0] == 7 else "none")
EOF
) || other=failed
wait "$held_pid" || true
check_eq "DNS over TCP: 12 connections from one address, 8 kept open" "$(cat "$FX_WORK/dns-held")" 8
check_eq "DNS over TCP: ... while another address is answered" "$other" answered
# Addresses working together cannot keep another out: 8 addresses of the namespace (.16-.23, a
# route of the veth's own; it goes with the veth) take all 64 slots, 8 each; a ninth address's
# connection is answered, in place of the oldest connection of an address holding 8.
DNS_BASE=10.251.$N.16
if ip -n "$NS" addr add "$DNS_BASE/28" dev "$VN" noprefixroute 2>"$FX_WORK/dns-addr.err" &&
  ip route add "$DNS_BASE/28" dev "$VH" 2>>"$FX_WORK/dns-addr.err"; then
  for i in $(seq 17 24); do ip -n "$NS" addr add "10.251.$N.$i/32" dev "$VN"; done
  crowd=$(in_ns "$FX_PYTHON" - "$GW" "10.251.$N" <<'EOF'
import socket, struct, sys, time
gw, net = sys.argv[1], sys.argv[2]
def conn(src):
    s = socket.socket()
    s.settimeout(3)
    s.bind((src, 0))
    s.connect((gw, 53))
    return s
socks = []
for a in range(16, 24):
    for _ in range(8):
        socks.append(conn(f"{net}.{a}"))
        time.sleep(0.005)
time.sleep(0.5)
q = struct.pack(">HHHHHH", 9, 0x0100, 1, 0, 0, 0) + b"\x01a\x06sluice\x04test\x00"
q += struct.pack(">HH", 1, 1)
s = conn(f"{net}.24")
s.sendall(struct.pack(">H", len(q)) + q)
a = b""
try:
    while len(a) < 2 or len(a) < 2 + struct.unpack(">H", a[:2])[0]:
        chunk = s.recv(2048)
        if not chunk:
            break
        a += chunk
except OSError:
    pass
answered = len(a) > 12 and struct.unpack(">H", a[2:4])[0] == 9
time.sleep(0.3)
alive = []
for x in socks:
    x.setblocking(False)
    try:
        alive.append(x.recv(1) != b"")
    except BlockingIOError:
        alive.append(True)
    except OSError:
        alive.append(False)
print("answered" if answered else "none", sum(alive), "first-closed" if not alive[0] else "first-open")
EOF
  ) || crowd=failed
  check_eq "DNS over TCP: with 8 addresses holding all 64, a ninth address is answered, the oldest connection closed for it" \
    "$crowd" "answered 63 first-closed"
else
  fx__dump "$FX_WORK/dns-addr.err"
  not_ok "DNS over TCP: addresses $DNS_BASE/28 in the namespace"
fi
check_eq "DNS: AAAA is NOERROR without an answer" "$(dnsq udp allowed.sluice.test 28)" \
  "rcode=0 an=0 ttl=- addr=-"
check_eq "DNS: MX is REFUSED" "$(dnsq udp allowed.sluice.test 15)" "rcode=5 an=0 ttl=- addr=-"
check_eq "DNS: a name of the outside world is answered with the gateway too (nothing forwarded)" \
  "$(dnsq udp www.debian.org 1)" "rcode=0 an=1 ttl=5 addr=$GW"
check_eq "DNS: getaddrinfo in the namespace (python3) gives the gateway, IPv4 only" \
  "$(in_ns "$FX_PYTHON" -c 'import socket; print(sorted({a[4][0] for a in socket.getaddrinfo("denied.sluice.test", 443)}))')" \
  "['$GW']"
check_eq "DNS: getent ahosts in the namespace" \
  "$(in_ns getent ahosts plain.sluice.test | awk 'NR == 1 { print $1 }')" "$GW"
check_audit "DNS: an audit line per query, the client found by its address" \
  method=DNS decision=dns client=sb_t environment=dev host=allowed.sluice.test \
  reason=null rule=allowed.sluice.test 'dns~"type": "A"' 'dns~"transport": "udp"'
check_audit "DNS: the TCP query's line" method=DNS host=allowed.sluice.test 'dns~"transport": "tcp"'
check_audit "DNS: a name no rule allows is marked host-not-allowed" \
  method=DNS client=sb_t host=denied.sluice.test reason=host-not-allowed
check_audit "DNS: the MX query's line says REFUSED" method=DNS 'dns~"type": "MX"' \
  'dns~"rcode": "REFUSED"'

# --- (2) curl --noproxy '*' ---------------------------------------------------------------------
# tcurl ARGS... : curl in the namespace, no proxy, trusting the sluice CA (FX_CODE etc. as fx_curl).
tcurl() {
  local w
  fx__curl_reset
  w=$(in_ns curl -q -sS --max-time 20 --noproxy '*' --cacert "$CA" -D "$FX_HDRS" -o "$FX_BODY" \
    -w '%{http_code}' "$@" 2>"$FX_ERR") || FX_RC=$?
  FX_CODE=${w:-000}
  # shellcheck disable=SC2034 # read by fx_curl_show
  FX_CONNECT_CODE=000
}
# shellcheck disable=SC2317 # called through fx_wait
nginx_saw() { # nginx_saw URI-PART AUTH : nginx logged a request for URI-PART with that Authorization
  fx_jsonl_has "$FX_NGINX_LOG" "uri~$1" "authorization=$2"
}
tcurl "https://allowed.sluice.test/echo-auth?probe=curl-tls"
check_status "curl https (no proxy): 200 from the origin" 200 -
check_eq "curl https: the credential was injected" "$(cat "$FX_BODY")" "auth=$SECRET"
check "curl https: nginx got it with the credential" fx_wait 5 nginx_saw probe=curl-tls "$SECRET"
check_audit "curl https: the tunnel's line, CONNECT allowed, mode transparent" \
  method=CONNECT host=allowed.sluice.test port=443 decision=allow mode=transparent client=sb_t \
  status=200
check_audit "curl https: the request's line, credential injected, mode transparent" \
  method=GET host=allowed.sluice.test path=/echo-auth credential=true mode=transparent status=200
tcurl "https://denied.sluice.test/echo-auth?probe=curl-denied"
check_status "curl https to a host no rule allows: 403 host-not-allowed, inside the TLS" 403 \
  host-not-allowed
check_match "curl https denied: the refusal says what would allow it" "$(cat "$FX_BODY")" \
  'add \{"host":"denied.sluice.test","methods":\["GET"\]\} to environment dev'
check_audit "curl https denied: its line" host=denied.sluice.test reason=host-not-allowed \
  decision=deny mode=transparent
tcurl -H 'Host: other.sluice.test' "https://allowed.sluice.test/hello"
check_status "curl https, SNI allowed.sluice.test and Host other.sluice.test: 421 host-mismatch" \
  421 host-mismatch
tcurl "http://plain.sluice.test/hello"
check_status "curl http (port 80, no proxy): 200" 200 -
check_eq "curl http: nginx's answer" "$(cat "$FX_BODY")" "hello from nginx"
check_audit "curl http: its line, mode transparent, scheme http, port 80" method=GET \
  scheme=http host=plain.sluice.test port=80 decision=allow mode=transparent
tcurl "http://allowed.sluice.test/echo-auth"
check_status "curl http to a host whose rule has a credential: 403 credential-needs-tls" 403 \
  credential-needs-tls
tcurl "http://denied.sluice.test/hello"
check_status "curl http to a host no rule allows: 403 host-not-allowed" 403 host-not-allowed

w=$(in_ns curl -q -sS --max-time 20 --noproxy '*' --cacert "$FX_TEST_CA" -o "$FX_BODY" \
  -w '%{http_code}' "https://pass.sluice.test/hello?probe=pass" 2>"$FX_ERR") || true
check_eq "curl https to a passthrough rule's host: the origin's own certificate, 200" "$w" 200
check_audit "passthrough: the tunnel's one line, tls passthrough, mode transparent" \
  method=CONNECT host=pass.sluice.test tls=passthrough mode=transparent decision=allow
# A transparent passthrough tunnel guards a second ClientHello as a CONNECT's does (§4.1): the
# SNI after a HelloRetryRequest (which nginx sends to a hello with no key share) must be the
# first one's. tests/support/tls_hrr.py, straight to the transparent port from the namespace.
hrr_t() { # hrr_t SNI2 : prints tls_hrr.py's answers on one line
  in_ns timeout 20 "$FX_PYTHON" "$FX_SUPPORT/tls_hrr.py" --direct "$GW:443" \
    --sni1 pass.sluice.test --sni2 "$1" | paste -sd' ' -
}
check_eq "passthrough, transparent: a HelloRetryRequest, then the same SNI: the handshake goes on" \
  "$(hrr_t pass.sluice.test)" "hrr hello"
check_eq "... then SNI allowed.sluice.test instead: refused (illegal_parameter, 47)" \
  "$(hrr_t allowed.sluice.test)" "hrr alert=47"
check_audit "... with its line: host-mismatch, mode transparent" host=pass.sluice.test \
  tls=passthrough reason=host-mismatch decision=error mode=transparent

# --- (3) Node fetch() without an agent ------------------------------------------------------------
node_fetch() { # node_fetch URL : prints "STATUS REASON BODY"
  in_ns env NODE_EXTRA_CA_CERTS="$CA" timeout 30 node -e '
fetch(process.argv[1]).then(async (r) => {
  console.log(r.status, r.headers.get("x-sluice-reason") || "-", (await r.text()).trim());
}).catch((e) => { console.log("error", e.cause ? e.cause.code || e.cause.message : e.message); });
' "$1" 2>&1 | head -n 1
}
check_eq "Node fetch(): allowed, the credential injected" \
  "$(node_fetch "https://allowed.sluice.test/echo-auth?probe=node")" "200 - auth=$SECRET"
check "Node fetch(): nginx got it with the credential" fx_wait 5 nginx_saw probe=node "$SECRET"
check_match "Node fetch(): a host not allowed is 403 host-not-allowed" \
  "$(node_fetch "https://denied.sluice.test/echo-auth")" '^403 host-not-allowed sluice: GET'

# --- (4) python3 urllib with proxies disabled --------------------------------------------------------
py_get() { # py_get URL : prints "STATUS REASON BODY"
  in_ns "$FX_PYTHON" - "$1" "$CA" <<'EOF'
import ssl, sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                     urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=sys.argv[2])))
try:
    r = opener.open(sys.argv[1], timeout=20)
    print(r.status, r.headers.get("X-Sluice-Reason") or "-", r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("X-Sluice-Reason") or "-", e.read().decode().strip())
EOF
}
check_eq "python3 urllib (proxies disabled): allowed, the credential injected" \
  "$(py_get "https://allowed.sluice.test/echo-auth?probe=python")" "200 - auth=$SECRET"
check "python3 urllib: nginx got it with the credential" fx_wait 5 nginx_saw probe=python "$SECRET"
check_match "python3 urllib: a host not allowed is 403 host-not-allowed" \
  "$(py_get "https://denied.sluice.test/echo-auth")" '^403 host-not-allowed sluice: GET'

# --- (5) git clone with http.proxy unset ----------------------------------------------------------
gitc() { # gitc URL DIR : git clone in the namespace, no proxy, trusting the sluice CA
  in_ns env -u GIT_HTTP_PROXY GIT_SSL_CAINFO="$CA" GIT_TERMINAL_PROMPT=0 timeout 60 \
    git -c http.proxy= -c https.proxy= clone -q "$1" "$2" >"$FX_WORK/git-clone.out" 2>&1
}
rm -rf "$FX_WORK/clone"
check "git clone https://allowed.sluice.test/repo.git (no proxy): cloned" \
  gitc https://allowed.sluice.test/repo.git "$FX_WORK/clone"
if [ "$FX_LAST" = 1 ]; then fx__dump "$FX_WORK/git-clone.out"; fi
check_eq "git clone: the file is there" "$(cat "$FX_WORK/clone/README" 2>/dev/null)" \
  "hello through the gateway"
check "git clone: nginx got info/refs with the credential" \
  nginx_saw "/repo.git/info/refs" "$SECRET"
if gitc https://denied.sluice.test/repo.git "$FX_WORK/clone-denied"; then
  not_ok "git clone of a host not allowed fails"
else
  check_match "git clone of a host not allowed fails with the 403" \
    "$(cat "$FX_WORK/git-clone.out")" '403'
fi
check_audit "git clone denied: its line" host=denied.sluice.test path~/repo.git/ \
  reason=host-not-allowed mode=transparent

# --- (6) ports through the redirect (SO_ORIGINAL_DST) ---------------------------------------------
tcurl "https://alt.sluice.test:$RULE_PORT/echo-auth?probe=redirect"
check_status "a port a rule names ($RULE_PORT, redirected to $REDIRECT_PORT): 200" 200 -
check_eq "redirected port: the credential injected" "$(cat "$FX_BODY")" "auth=$SECRET"
check "redirected port: nginx on $RULE_PORT got it" fx_wait 5 nginx_saw probe=redirect "$SECRET"
check_audit "redirected port: the tunnel's line names port $RULE_PORT" method=CONNECT \
  host=alt.sluice.test port="$RULE_PORT" decision=allow mode=transparent
tcurl "https://allowed.sluice.test:$BARE_PORT/hello?probe=bare"
check "a port no rule names ($BARE_PORT, redirected): refused, no answer" \
  test "$FX_CODE" = 000 -a "$FX_RC" != 0
check_audit "a port no rule names: audited port-not-allowed, port $BARE_PORT" \
  host=allowed.sluice.test port="$BARE_PORT" reason=port-not-allowed decision=deny \
  mode=transparent status=0
check "a port no rule names: nginx never saw it" test "$(fx_jsonl_count "$FX_NGINX_LOG" uri~probe=bare)" = 0
tcurl "https://allowed.sluice.test:7443/hello"
check "a port nothing redirects: the connection is refused by the kernel" \
  test "$FX_CODE" = 000 -a "$FX_RC" = 7
raw() { # raw PORT HEXBYTES : connects from the namespace, writes the bytes, prints what came back
  in_ns "$FX_PYTHON" - "$GW" "$@" <<'EOF'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
if sys.argv[3]:
    s.sendall(bytes.fromhex(sys.argv[3]))
s.settimeout(5)
try:
    data = s.recv(4096)
except OSError as e:
    data = b""
print(len(data))
EOF
}
check_eq "a connection made to $REDIRECT_PORT itself (no original destination): closed unanswered" \
  "$(raw "$REDIRECT_PORT" '')" 0
check_audit "... audited bad-request, port $REDIRECT_PORT" port="$REDIRECT_PORT" \
  reason=bad-request mode=transparent client=null

# --- (7) what is neither a ClientHello with an SNI nor HTTP ----------------------------------------
in_ns timeout 10 openssl s_client -connect "$GW:443" -noservername -CAfile "$CA" </dev/null \
  >"$FX_WORK/nosni.out" 2>&1 || true
check "a ClientHello without SNI: no certificate, the handshake fails" \
  grep -q 'no peer certificate available' "$FX_WORK/nosni.out"
check_audit "... audited bad-host" method=CONNECT host=null port=443 reason=bad-host \
  mode=transparent status=0 client=sb_t
check_eq "a first write that is neither TLS nor HTTP: closed unanswered" \
  "$(raw 443 00010203deadbeef0d0a0d0a)" 0
check_audit "... audited not-tls" reason=not-tls mode=transparent port=443 client=sb_t

# --- (8) an address no client has, and the explicit proxy alongside ------------------------------
curl -q -sS --max-time 10 --noproxy '*' --cacert "$CA" --resolve "allowed.sluice.test:443:$GW" \
  -o /dev/null "https://allowed.sluice.test/hello" 2>/dev/null && rc=0 || rc=$?
check "from an address no client has ($GW): refused" test "$rc" != 0
check_audit "... closed at once, audited no-identity" reason=no-identity mode=transparent \
  client=null port=443 src~"$GW:"
fx__curl_reset
w=$(in_ns curl -q -sS --max-time 20 --proxy "http://sb_t:t0k3n@$GW:3128" --cacert "$CA" \
  -o "$FX_BODY" -w '%{http_code}' "https://allowed.sluice.test/echo-auth?probe=explicit" \
  2>"$FX_ERR") || true
check_eq "the explicit proxy from the same namespace (HTTPS_PROXY's way): 200" "$w" 200
check_eq "explicit: the credential injected" "$(cat "$FX_BODY")" "auth=$SECRET"
check_audit "explicit: its line has no mode" method=GET path=/echo-auth client=sb_t \
  decision=allow mode!=transparent credential=true
check "no line ever held the credential" fx_absent "$SECRET" "$FX_AUDIT" "$FX_PROXY_LOG"

# --- (9) metrics ------------------------------------------------------------------------------------
fx_admin GET /metrics
check_match "metrics: DNS answers counted by rcode" "$(cat "$FX_ADMIN_BODY")" \
  'sluice_dns_queries_total\{rcode="REFUSED"\} [1-9]'
check_match "metrics: NOERROR answers counted" "$(cat "$FX_ADMIN_BODY")" \
  'sluice_dns_queries_total\{rcode="NOERROR"\} [1-9]'

fx_proxy_stop "$FX_PROXY_PID"
check_eq "the proxy stops cleanly (SIGTERM)" "$FX_PROXY_EXIT" 0

# --- (10) --max-connections-per-client on the transparent listeners ---------------------------------
# The namespace's address ($CL) is one client: its transparent and explicit connections share
# one count (docs/reference/proxy.md §4.10). Cap 2: two idle transparent connections held, a
# third is closed unanswered (audited client-overloaded), the explicit proxy from the same
# address gets 503 client-overloaded, and once one of the two closes a request gets through.
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --listen "$GW:3128" --transparent "$GW" "${pins[@]}" --workers 2 \
  --max-connections-per-client 2 ||
  fx_bail "sluice proxy starts with --transparent $GW --max-connections-per-client 2"
tr_hold=$FX_WORK/tr-hold.out
rm -f "$FX_WORK/tr-close1" "$FX_WORK/tr-stop"
in_ns "$FX_PYTHON" "$SLUICE_SRC/tests/support/hold_conns.py" "$GW" 443 2 "$FX_WORK" tr 8 \
  >"$tr_hold" 2>&1 &
tr_hold_pid=$!
FX_PIDS+=("$tr_hold_pid")
fx_wait 10 grep -q held "$tr_hold" || true
# shellcheck disable=SC2317 # called through fx_wait
tr_conns_are() { fx_admin GET /v1/status && [ "$(fx_json "$FX_ADMIN_BODY" 'str(d["connections"])')" = "$1" ]; }
check "per client: the proxy holds the two transparent connections of $CL" fx_wait 5 tr_conns_are 2
check_eq "per client: a third transparent connection from $CL is closed unanswered" \
  "$(raw 443 16030100)" 0
check_audit "... audited client-overloaded, mode transparent" reason=client-overloaded \
  mode=transparent decision=error src~"$CL:"
fx__curl_reset
w=$(in_ns curl -q -sS --max-time 20 --proxy "http://sb_t:t0k3n@$GW:3128" --cacert "$CA" \
  -D "$FX_HDRS" -o "$FX_BODY" -w '%{http_code}' "http://plain.sluice.test/hello?probe=tr-cap" \
  2>"$FX_ERR") || true
check_eq "per client: the explicit proxy from the same address shares the count: 503" "$w" 503
check_match "... X-Sluice-Reason: client-overloaded" "$(tr -d '\r' <"$FX_HDRS")" \
  'X-Sluice-Reason: client-overloaded'
touch "$FX_WORK/tr-close1"
fx_wait 5 grep -q "closed one" "$tr_hold" || true
check "per client: one of the two closes (1 connection within 5 s)" fx_wait 5 tr_conns_are 1
# This proxy has no DNS responder: the name is pinned to the transparent address.
tcurl --resolve "allowed.sluice.test:443:$GW" "https://allowed.sluice.test/echo-auth?probe=tr-cap-again"
check_status "per client: then a transparent request from $CL is served" 200 -
touch "$FX_WORK/tr-stop"
wait "$tr_hold_pid" 2>/dev/null || true
check "per client: every connection released (0 within 5 s)" fx_wait 5 tr_conns_are 0
fx_proxy_stop "$FX_PROXY_PID"
check_eq "the --max-connections-per-client 2 proxy stops cleanly (SIGTERM)" "$FX_PROXY_EXIT" 0
fx_done
