#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/integration/proxy_clients.sh - real, unmodified clients through `sluice proxy`
# (docs/reference/proxy.md §4.1, §4.2, §4.4, §4.6), trusting its CA the way a user would
# (PIP_CERT / REQUESTS_CA_BUNDLE, npm's cafile, NODE_EXTRA_CA_CERTS, SSL_CERT_FILE) and told of
# it by HTTPS_PROXY, pip's --proxy with a sandbox's id and token, npm's https-proxy: pip against
# a static "simple" index whose files are on another host (a 302 away), npm against a static
# registry (a scoped package, whose URL has %2f; npm install, then npm ci), Node's https.request
# through a CONNECT agent (keep-alive, a WebSocket upgrade) and http.request in absolute form,
# Python's urllib and requests, curl --http2 (over TLS ALPN picks http/1.1; on http:// its h2c
# offer is ignored), and a response that streams: its first bytes reach the client long before
# the origin ends it. Everything is served by nginx and origin.py on loopback.
set -euo pipefail

SLUICE_SRC=${SLUICE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source-path=SCRIPTDIR source=../support/fixture.sh
source "$SLUICE_SRC/tests/support/fixture.sh"
fx_init
fx_test_ca || fx_bail "test CA"

# --- the registries: a PyPI simple index, its files host, an npm registry ---------------------
mapfile -t xp < <(fx_free_ports 3)
PYPI_PORT=${xp[0]} FILES_PORT=${xp[1]} NPM_PORT=${xp[2]}
REG=$FX_WORK/reg
NPM_URL=https://npm.sluice.test:$NPM_PORT
mkdir -p "$REG/simple/sluicedemo" "$REG/files" "$REG/npm" "$FX_WORK/pkg"
# A wheel of 2 MB (several TLS records and reads), written by hand: no build backend needed.
"$FX_PYTHON" - "$REG/files" <<'PY'
import base64, hashlib, sys, zipfile
files = {
    "sluicedemo/__init__.py": b"X = 1\n" + b"#" * 2000000 + b"\n",
    "sluicedemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sluicedemo\nVersion: 1.0\n",
    "sluicedemo-1.0.dist-info/WHEEL":
        b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append("sluicedemo-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(f"{sys.argv[1]}/sluicedemo-1.0-py3-none-any.whl", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("sluicedemo-1.0.dist-info/RECORD", "\n".join(record) + "\n")
PY
whl=sluicedemo-1.0-py3-none-any.whl
printf '<!DOCTYPE html><html><body><a href="/packages/%s#sha256=%s">%s</a></body></html>\n' \
  "$whl" "$(fx_sha256 "$REG/files/$whl")" "$whl" >"$REG/simple/sluicedemo/index.html"
# npm: an unscoped and a scoped package, their tarballs made by npm pack.
npm_ok=0
if command -v npm >/dev/null; then
  npm_ok=1
  for p in lefty @scope/pkg; do
    base=${p#*/}
    mkdir -p "$FX_WORK/pkg/$base" "$REG/npm/$p/-"
    printf '{"name":"%s","version":"1.0.0","main":"index.js"}\n' "$p" >"$FX_WORK/pkg/$base/package.json"
    printf 'module.exports = "%s";\n' "$p" >"$FX_WORK/pkg/$base/index.js"
    tgz=$(cd "$FX_WORK/pkg/$base" && npm pack --silent 2>/dev/null | tail -n 1) || npm_ok=0
    [ -f "$FX_WORK/pkg/$base/$tgz" ] || {
      npm_ok=0
      break
    }
    cp "$FX_WORK/pkg/$base/$tgz" "$REG/npm/$p/-/$base-1.0.0.tgz"
    printf '{"name":"%s","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"%s","version":"1.0.0","main":"index.js","dist":{"tarball":"%s/%s/-/%s-1.0.0.tgz","shasum":"%s","integrity":"sha512-%s"}}}}\n' \
      "$p" "$p" "$NPM_URL" "$p" "$base" "$(sha1sum "$REG/npm/$p/-/$base-1.0.0.tgz" | cut -d' ' -f1)" \
      "$(openssl dgst -sha512 -binary "$REG/npm/$p/-/$base-1.0.0.tgz" | base64 -w0)" \
      >"$REG/npm/$p/index.json"
  done
fi
# The index sends its files to another host (as pypi.org does); the registry's documents are
# at /NAME and /@SCOPE%2fNAME (nginx matches the decoded path), its tarballs under NAME/-/.
FX_NGINX_EXTRA="
$(fx__nginx_tls_server "$PYPI_PORT" good "root $REG; location /simple/ { index index.html; }
    location /packages/ { return 302 https://files.sluice.test:$FILES_PORT\$request_uri; }")
$(fx__nginx_tls_server "$FILES_PORT" good "location /packages/ { alias $REG/files/; }")
$(fx__nginx_tls_server "$NPM_PORT" good "root $REG/npm;
    location ~ ^/(@[^/]+/[^/]+|[^@/][^/]*)\$ { default_type application/json; try_files /\$1/index.json =404; }
    location / { }")"
FX_NGINX_EXTRA_PORTS="$PYPI_PORT $FILES_PORT $NPM_PORT"
fx_nginx_start || fx_bail "nginx starts"
fx_origin_start || fx_bail "origin.py starts"

tok=sb-$(fx_random_hex 16)
policy=$FX_WORK/policy.json
fx_policy "$policy" "{
  \"version\": 1,
  \"environments\": { \"dev\": { \"default\": \"deny\", \"rules\": [
    { \"host\": \"pypi.sluice.test:$PYPI_PORT\" }, { \"host\": \"files.sluice.test:$FILES_PORT\" },
    { \"host\": \"npm.sluice.test:$NPM_PORT\" }, { \"host\": \"a.sluice.test:$FX_PY_TLS_PORT\" },
    { \"host\": \"a.sluice.test:$FX_PY_HTTP_PORT\" } ] } },
  \"clients\": [ { \"id\": \"local\", \"cidr\": \"127.0.0.0/8\", \"environment\": \"dev\" },
                 { \"id\": \"sb1\", \"token\": \"$tok\", \"environment\": \"dev\" } ]
}"
fx_resolve a.sluice.test
fx_proxy_start --policy "$policy" --upstream-ca "$FX_TEST_CA" --allow-upstream 127.0.0.0/8 \
  --workers 2 "${FX_RESOLVE[@]}" --resolve "pypi.sluice.test:$PYPI_PORT:127.0.0.1" \
  --resolve "files.sluice.test:$FILES_PORT:127.0.0.1" \
  --resolve "npm.sluice.test:$NPM_PORT:127.0.0.1" || fx_bail "sluice proxy starts"
ok "sluice proxy starts"
P=http://127.0.0.1:$FX_PROXY_PORT
CA=$FX_SLUICE_CA
# The clients trust the sluice CA and nothing else, whatever this machine's environment says.
clean=(env -u SSL_CERT_DIR -u PIP_FIND_LINKS -u PIP_INDEX_URL -u no_proxy -u NO_PROXY
  PIP_CONFIG_FILE=/dev/null SSL_CERT_FILE="$CA" REQUESTS_CA_BUNDLE="$CA" PIP_CERT="$CA"
  CURL_CA_BUNDLE="$CA" NODE_EXTRA_CA_CERTS="$CA" HTTPS_PROXY="$P" https_proxy="$P"
  HTTP_PROXY="$P" http_proxy="$P" HOME="$FX_WORK")
lines() {
  sleep 0.3
  fx_jsonl_count "$FX_AUDIT" "$@"
}

# --- (1) pip ----------------------------------------------------------------------------------
if "$FX_PYTHON" -m pip --version >/dev/null 2>&1; then
  out=$(cd "$FX_WORK" && timeout 120 "${clean[@]}" "$FX_PYTHON" -m pip download --no-deps \
    --no-cache-dir --retries 0 --timeout 20 -d "$FX_WORK/dl" \
    --index-url "https://pypi.sluice.test:$PYPI_PORT/simple/" sluicedemo 2>&1 || true)
  check_eq "pip download (HTTPS_PROXY): the wheel, from the files host a 302 away" \
    "$(fx_sha256 "$FX_WORK/dl/$whl" 2>/dev/null)" "$(fx_sha256 "$REG/files/$whl")"
  [ "$FX_LAST" = 0 ] || printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
  check_eq "... the index page and the wheel each have an allowed line" \
    "$(lines client=local path=/simple/sluicedemo/ status=200) $(lines client=local \
      host=files.sluice.test path=/packages/$whl status=200 bytes_down="$(stat -c %s "$REG/files/$whl")")" "1 1"
  out=$(cd "$FX_WORK" && timeout 120 "${clean[@]}" "$FX_PYTHON" -m pip download --no-deps \
    --no-cache-dir --retries 0 --timeout 20 -d "$FX_WORK/dl2" --proxy "http://sb1:$tok@127.0.0.1:$FX_PROXY_PORT" \
    --index-url "https://pypi.sluice.test:$PYPI_PORT/simple/" sluicedemo 2>&1 || true)
  check_eq "pip download --proxy http://ID:TOKEN@HOST:PORT: the wheel" \
    "$(fx_sha256 "$FX_WORK/dl2/$whl" 2>/dev/null)" "$(fx_sha256 "$REG/files/$whl")"
  check "... identified as sb1 by the token pip sent on its CONNECTs" \
    fx_audit_has client=sb1 method=CONNECT host=files.sluice.test status=200
else
  not_ok "pip through the proxy: $FX_PYTHON -m pip is not installed (tools/deps.sh test installs python3-pip)"
fi

# --- (2) npm ----------------------------------------------------------------------------------
if [ "$npm_ok" = 1 ]; then
  mkdir -p "$FX_WORK/app"
  printf '{"name":"app","version":"1.0.0","dependencies":{"lefty":"1.0.0","@scope/pkg":"1.0.0"}}\n' \
    >"$FX_WORK/app/package.json"
  printf 'registry=%s/\nhttps-proxy=%s/\ncafile=%s\ncache=%s\naudit=false\nfund=false\nupdate-notifier=false\nfetch-retries=0\n' \
    "$NPM_URL" "$P" "$CA" "$FX_WORK/npm-cache" >"$FX_WORK/app/.npmrc"
  out=$(cd "$FX_WORK/app" && timeout 120 "${clean[@]}" npm install 2>&1 || true)
  check_eq "npm install: both packages, the scoped one too" \
    "$(cd "$FX_WORK/app" && node -e 'console.log(require("lefty"), require("@scope/pkg"))' 2>&1)" \
    "lefty @scope/pkg"
  [ "$FX_LAST" = 0 ] || printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
  check "... the scoped package's document was asked for as /@scope%2fpkg, and forwarded so" \
    fx_jsonl_has "$FX_NGINX_LOG" uri=/@scope%2fpkg status=200
  rm -rf "$FX_WORK/app/node_modules" "$FX_WORK/npm-cache"
  out=$(cd "$FX_WORK/app" && timeout 120 "${clean[@]}" npm ci 2>&1 || true)
  check_match "npm ci from the lock file, with an empty cache" "$out" "added 2 packages"
  check "... the tarballs came through the proxy again" \
    test "$(lines host=npm.sluice.test path=/lefty/-/lefty-1.0.0.tgz status=200)" -ge 2
else
  fx_skip "npm through the proxy" "npm is not installed (or npm pack failed)"
fi

# --- (3) node ---------------------------------------------------------------------------------
if command -v node >/dev/null; then
  cat >"$FX_WORK/client.mjs" <<'EOF'
import http from 'node:http'; import https from 'node:https'; import tls from 'node:tls';
const [proxyPort, host, tlsPort, plainPort] = process.argv.slice(2);
// The CONNECT agent of many libraries: a tunnel, then TLS trusting NODE_EXTRA_CA_CERTS.
class ConnectAgent extends https.Agent {
  createConnection(opts, cb) {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT',
      path: `${opts.host}:${opts.port}`, headers: { Host: `${opts.host}:${opts.port}` } });
    req.on('connect', (res, sock) => res.statusCode === 200
      ? cb(null, tls.connect({ socket: sock, servername: opts.host, ALPNProtocols: ['http/1.1'] }))
      : cb(new Error(`CONNECT ${res.statusCode}`)));
    req.on('error', cb);
    req.end();
  }
}
const agent = new ConnectAgent({ keepAlive: true });
const get = (path) => new Promise((ok) => https.get({ host, port: tlsPort, path, agent }, (res) => {
  let n = 0; res.on('data', (d) => { n += d.length; }); res.on('end', () => ok(`${res.statusCode}/${n}`));
}).on('error', (e) => ok(`error ${e.message}`)));
console.log(`connect ${await get('/hello?probe=nodeka-1')} ${await get('/hello?probe=nodeka-2')}`);
const abs = await new Promise((ok) => http.get({ host: '127.0.0.1', port: proxyPort,
  path: `http://${host}:${plainPort}/hello?probe=node-abs`, headers: { Host: `${host}:${plainPort}` } },
  (res) => { res.resume(); res.on('end', () => ok(res.statusCode)); }).on('error', (e) => ok(e.message)));
console.log(`absolute ${abs}`);
const ws = await new Promise((ok) => {
  const req = https.request({ host, port: tlsPort, path: '/ws', agent: new ConnectAgent(), headers: {
    Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version': '13' } });
  req.on('upgrade', (res, sock) => {
    let got = '';
    sock.on('data', (d) => { got += d; if (got.includes('BYE')) { sock.end(); ok(`${res.statusCode} ${got}`); } });
    sock.write('ping BYE');
  });
  req.on('response', (res) => ok(`no upgrade ${res.statusCode}`));
  req.on('error', (e) => ok(e.message));
  req.end();
});
console.log(`websocket ${ws}`);
agent.destroy();
process.exit(0);
EOF
  out=$(timeout 30 "${clean[@]}" node "$FX_WORK/client.mjs" "$FX_PROXY_PORT" a.sluice.test \
    "$FX_PY_TLS_PORT" "$FX_PY_HTTP_PORT" 2>&1 | paste -sd' ' -)
  check_eq "node: https.request through a CONNECT agent twice, http.request in absolute form, a WebSocket" \
    "$out" "connect 200/21 200/21 absolute 200 websocket 101 ping BYE"
  check_eq "... the agent's two requests shared one tunnel and one upstream connection" \
    "$(fx_jsonl_distinct "$FX_ORIGIN_LOG" conn path=/hello target~probe=nodeka-)" 1
else
  fx_skip "node through the proxy" "node is not installed"
fi

# --- (4) Python: urllib, requests ------------------------------------------------------------
out=$(timeout 60 "${clean[@]}" "$FX_PYTHON" - "$FX_PY_TLS_PORT" "$FX_PY_HTTP_PORT" "$tok" "$FX_PROXY_PORT" <<'PY' 2>&1
import sys, urllib.request
tls_port, plain_port, tok, proxy_port = sys.argv[1:]
got = []
for url in (f"https://a.sluice.test:{tls_port}/hello?probe=urllib",
            f"http://a.sluice.test:{plain_port}/hello?probe=urllib"):
    with urllib.request.urlopen(url, timeout=20) as r:
        got.append(f"{r.status}/{len(r.read())}")
opener = urllib.request.build_opener(urllib.request.ProxyHandler(
    {"https": f"http://sb1:{tok}@127.0.0.1:{proxy_port}"}))
with opener.open(f"https://a.sluice.test:{tls_port}/hello?probe=urllib-tok", timeout=20) as r:
    got.append(f"{r.status}/{len(r.read())}")
import requests
with requests.Session() as s:
    for _ in range(2):
        got.append(str(s.get(f"https://a.sluice.test:{tls_port}/hello?probe=requests", timeout=20).status_code))
print(" ".join(got))
PY
)
check_match "python: urllib over https and http, with the token in the proxy URL; requests twice" \
  "$out" '^200/21 200/21 200/21 200 200$'
check "... urllib's token identified sb1" fx_audit_has client=sb1 method=GET path=/hello status=200

# --- (5) curl --http2: ALPN offers h2 and http/1.1 (the proxy picks http/1.1); on http:// URLs
# curl offers h2c with Upgrade, which the proxy ignores, as an origin without h2c does --------
for url in "https://a.sluice.test:$FX_PY_TLS_PORT" "http://a.sluice.test:$FX_PY_HTTP_PORT"; do
  out=$(timeout 30 "${clean[@]}" curl -sS --http2 -x "$P" "$url/hello?probe=h2-${url%%:*}" \
    -w ' %{http_code} %{http_version}' 2>&1 || true)
  check_eq "curl --http2 ${url%%:*}://: the answer in HTTP/1.1" "$out" "hello from origin.py
 200 1.1"
done
out=$(timeout 30 "${clean[@]}" curl -sS --http2 -x "$P" --data-binary 'h2c and a body' \
  "http://a.sluice.test:$FX_PY_HTTP_PORT/echo?probe=h2-post" 2>&1 || true)
check_match "curl --http2 -d on http://: the body reached the origin" "$out" '"body_length": 14'
check_eq "... the origin got the plain one without the h2c offer" \
  "$("$FX_PYTHON" -c '
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(line)
    if "probe=h2-http" in d["target"] and "h2-https" not in d["target"]:
        print(sorted(n.lower() for n, v in d["headers"] if n.lower() in ("upgrade", "http2-settings", "connection")))' "$FX_ORIGIN_LOG")" "[]"

# --- (6) a response that streams is not held back ---------------------------------------------
# /slow dribbles 300000 bytes over about 3 s: the first ones must reach the client at once, not
# when the origin ends the response.
for url in "https://a.sluice.test:$FX_PY_TLS_PORT" "http://a.sluice.test:$FX_PY_HTTP_PORT"; do
  out=$(timeout 30 "${clean[@]}" "$FX_PYTHON" - "$url/slow?bytes=300000&ms=3000" <<'PY' 2>&1
import sys, time, urllib.request
t = time.monotonic()
with urllib.request.urlopen(sys.argv[1], timeout=20) as r:
    first = r.read1(65536)
    t_first = time.monotonic() - t
    n = len(first) + len(r.read())
print(f"first={'early' if t_first < 1.5 else f'late({t_first:.2f}s)'} total={n} "
      f"end={'late' if time.monotonic() - t > 2.0 else 'early'}")
PY
)
  check_eq "streaming (${url%%:*}): the first bytes before the origin ends the response" \
    "$out" "first=early total=300000 end=late"
done

check "the proxy is still running" fx_proxy_alive
check "SIGTERM stops the proxy with exit 0" fx_proxy_stop
fx_done
