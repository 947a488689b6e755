// SPDX-License-Identifier: Apache-2.0
// tests/support/node_https_key.mjs - what a Node SDK does with an API key from its environment:
// one request with node:https through an HTTP proxy (a CONNECT by node:http, then https.request
// over the tunnel's socket), `Authorization: Bearer $VAR`.
//
//   node node_https_key.mjs PROXY URL CAFILE VAR [--show]
//
// PROXY is a port on 127.0.0.1, or `env`: the proxy URL in HTTPS_PROXY (or https_proxy), its
// user and password sent as Proxy-Authorization, as in a sandbox. CAFILE is the file the
// origin is verified against, or `env`: Node's own trust store, which NODE_EXTRA_CA_CERTS
// extends. Prints "status=N" and the body, or "error ..." (exit 1); with --show first
// "client=node VERSION" and "sent=Authorization: VALUE" (what left the client). Bounded: 20 s.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

const [proxyArg, url, cafile, variable, flag] = process.argv.slice(2);
const show = flag === '--show';
const u = new URL(url);
const port = Number(u.port || 443);
const timer = setTimeout(() => {
  console.log('error timeout');
  process.exit(1);
}, 20000);
const fail = (e) => {
  console.log(`error ${e.message}`);
  process.exit(1);
};

let proxyHost = '127.0.0.1';
let proxyPort = Number(proxyArg);
const connectHeaders = { Host: `${u.hostname}:${port}` };
if (proxyArg === 'env') {
  const p = new URL(process.env.HTTPS_PROXY || process.env.https_proxy);
  proxyHost = p.hostname;
  proxyPort = Number(p.port || 80);
  if (p.username !== '') {
    const cred = `${decodeURIComponent(p.username)}:${decodeURIComponent(p.password)}`;
    connectHeaders['Proxy-Authorization'] = `Basic ${Buffer.from(cred).toString('base64')}`;
  }
}
const auth = `Bearer ${process.env[variable]}`;
if (show) {
  console.log(`client=node ${process.version}`);
  console.log(`sent=Authorization: ${auth}`);
}

const connect = http.request({
  host: proxyHost,
  port: proxyPort,
  method: 'CONNECT',
  path: `${u.hostname}:${port}`,
  headers: connectHeaders,
});
connect.on('error', fail);
connect.on('response', (res) => fail(new Error(`CONNECT answered ${res.statusCode}`)));
connect.on('connect', (res, socket) => {
  if (res.statusCode !== 200) {
    fail(new Error(`CONNECT answered ${res.statusCode}`));
  }
  const options = { socket, servername: u.hostname };
  if (cafile !== 'env') {
    options.ca = fs.readFileSync(cafile);
  }
  const req = https.request({
    host: u.hostname,
    port,
    path: u.pathname + u.search,
    method: 'GET',
    headers: { Authorization: auth },
    createConnection: () => tls.connect(options),
  });
  req.on('error', fail);
  req.on('response', (r) => {
    let body = '';
    r.setEncoding('utf8');
    r.on('data', (d) => {
      body += d;
    });
    r.on('end', () => {
      console.log(`status=${r.statusCode}`);
      process.stdout.write(body);
      clearTimeout(timer);
      process.exit(0);
    });
  });
  req.end();
});
connect.end();
