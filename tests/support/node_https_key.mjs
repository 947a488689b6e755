// SPDX-License-Identifier: Apache-2.0
// tests/support/node_https_key.mjs - what a Node SDK does with an API key from its environment:
// one request with node:https through an HTTP proxy (a CONNECT by node:http, then https.request
// over the tunnel's socket, verified against CAFILE), `Authorization: Bearer $VAR`.
//
//   node node_https_key.mjs PROXY_PORT URL CAFILE VAR
//
// Prints "status=N" and the body, or "error ..." (exit 1). Bounded: 20 s.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

const [proxyPort, url, cafile, variable] = process.argv.slice(2);
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

const connect = http.request({
  host: '127.0.0.1',
  port: Number(proxyPort),
  method: 'CONNECT',
  path: `${u.hostname}:${port}`,
  headers: { Host: `${u.hostname}:${port}` },
});
connect.on('error', fail);
connect.on('response', (res) => fail(new Error(`CONNECT answered ${res.statusCode}`)));
connect.on('connect', (res, socket) => {
  if (res.statusCode !== 200) {
    fail(new Error(`CONNECT answered ${res.statusCode}`));
  }
  const req = https.request({
    host: u.hostname,
    port,
    path: u.pathname + u.search,
    method: 'GET',
    headers: { Authorization: `Bearer ${process.env[variable]}` },
    createConnection: () =>
      tls.connect({ socket, servername: u.hostname, ca: fs.readFileSync(cafile) }),
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
