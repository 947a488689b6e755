// SPDX-License-Identifier: Apache-2.0
// tests/support/node_connect.mjs - Node's documented CONNECT pattern through the proxy
// (https://nodejs.org/api/http.html, event 'connect'): http.request({method: 'CONNECT',
// path: 'host:port'}) to the proxy - Node then sends the proxy's own address as Host -, then TLS
// over the tunnel's socket (verified against CAFILE), then one GET.
//
//   node node_connect.mjs PROXY_PORT HOST:PORT CAFILE PATH [INNER_HOST]
//
// INNER_HOST is the GET's Host header (default HOST:PORT).
// Prints "connect=STATUS", then "tls=ok" and the response's status line ("status=200"), or
// "error ..." (exit 1). Bounded: 10 s in all.
import fs from 'node:fs';
import http from 'node:http';
import tls from 'node:tls';

const [proxyPort, target, cafile, path, innerHost] = process.argv.slice(2);
const host = target.slice(0, target.lastIndexOf(':'));
const timer = setTimeout(() => {
  console.log('error timeout');
  process.exit(1);
}, 10000);

const req = http.request({ host: '127.0.0.1', port: Number(proxyPort), method: 'CONNECT', path: target });
req.on('error', (e) => {
  console.log(`error ${e.message}`);
  process.exit(1);
});
req.on('response', (res) => {
  // A refused CONNECT (Node emits 'connect' only for 2xx... and 'response' otherwise).
  console.log(`connect=${res.statusCode}`);
  clearTimeout(timer);
  process.exit(0);
});
req.on('connect', (res, socket) => {
  console.log(`connect=${res.statusCode}`);
  if (res.statusCode !== 200) {
    clearTimeout(timer);
    socket.destroy();
    process.exit(0);
  }
  const t = tls.connect({ socket, servername: host, ca: fs.readFileSync(cafile) }, () => {
    console.log('tls=ok');
    t.write(`GET ${path} HTTP/1.1\r\nHost: ${innerHost || target}\r\nConnection: close\r\n\r\n`);
  });
  let got = '';
  t.on('data', (d) => {
    got += d.toString('latin1');
  });
  t.on('error', (e) => {
    console.log(`error ${e.message}`);
    process.exit(1);
  });
  t.on('end', () => {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
    console.log(m ? `status=${m[1]}` : `error no status line: ${JSON.stringify(got.slice(0, 80))}`);
    clearTimeout(timer);
    process.exit(m ? 0 : 1);
  });
});
req.end();
