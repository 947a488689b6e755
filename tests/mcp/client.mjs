// SPDX-License-Identifier: Apache-2.0
// tests/mcp/client.mjs - sluice's /mcp driven by a client nobody here wrote: the official MCP
// TypeScript SDK, its Client over the Streamable HTTP transport, with the bearer token in
// requestInit headers, in one of two eras (MCP_ERA):
//   - "handshake" (default): @modelcontextprotocol/sdk 1.x, initialize with revision 2025-11-25;
//   - "stateless": @modelcontextprotocol/client 2.x pinned to revision 2026-07-28
//     (server/discover, no initialize, the revision and the method in every request).
// Both pinned in package-lock.json. Run by tests/integration/mcp.sh against a real control plane
// with Docker sandboxes; prints one TAP line per check ("ok - ..." / "not ok - ...") and exits 1
// when any failed.
//
// Environment: MCP_URL (http://127.0.0.1:PORT/mcp), TOK_root, TOK_alice, TOK_bob, REPO
// (owner/name; the sandbox tools take it as `owner` and `repo`, as the seed names them), SECRET (the value of the secret variable of global environment `sbx`), CRED (its
// credential value), ALICE_SECRET and ALICE_CRED (alice's environment `alice-env`), ALICE_ENV_ID,
// MCP_ERA; MCP_SCENARIO=clone runs cloneScenario() below instead (with MAIN_SHA).
const E = process.env;
const STATELESS = E.MCP_ERA === 'stateless';
const { Client, StreamableHTTPClientTransport } = STATELESS
  ? await import('@modelcontextprotocol/client')
  : {
    Client: (await import('@modelcontextprotocol/sdk/client/index.js')).Client,
    StreamableHTTPClientTransport:
      (await import('@modelcontextprotocol/sdk/client/streamableHttp.js'))
        .StreamableHTTPClientTransport,
  };
const url = new URL(E.MCP_URL);
const restBase = `${url.origin}/api/v1`;
let failures = 0;

function check(cond, desc, detail) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${desc}`);
  if (!cond) {
    failures++;
    if (detail !== undefined) {
      console.log(`#   ${JSON.stringify(detail).slice(0, 800)}`);
    }
  }
}

async function connect(token) {
  const client = new Client({ name: 'sluice-mcp-test', version: '1.0.0' },
    STATELESS ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : undefined);
  const headers = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

// A tool call; a thrown protocol error becomes {thrown}.
async function call(client, name, args) {
  try {
    const params = { name, arguments: args };
    const opts = { timeout: 240000 };
    // 2.x: (params, options); 1.x: (params, resultSchema, options).
    return await (STATELESS ? client.callTool(params, opts) : client.callTool(params, undefined, opts));
  } catch (e) {
    return { thrown: String(e && e.message), code: e && e.code };
  }
}

const text = (r) => (r && r.content && r.content[0] && r.content[0].text) || '';
const sc = (r) => (r && r.structuredContent) || {};
const okResult = (r) => r && !r.thrown && r.isError !== true;

// The REST answer for the same request, to compare error texts.
async function rest(token, method, path, body) {
  const res = await fetch(`${restBase}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const t = await res.text();
  let doc = null;
  try {
    doc = t ? JSON.parse(t) : null;
  } catch {
    doc = null;
  }
  return { status: res.status, doc };
}
const restText = (r) => (r.doc && (r.doc.message || r.doc.error)) || '';

const TOOLS = ['list_environments', 'get_environment', 'submit_job', 'get_job', 'sandbox_create',
  'sandbox_exec', 'sandbox_read_file', 'sandbox_write_file', 'sandbox_close'];

async function main() {
  // --- tokens --------------------------------------------------------------------------------
  for (const [desc, tok] of [['no token', undefined], ['a wrong token', 'not-a-token']]) {
    let err = null;
    try {
      const c = await connect(tok);
      await c.client.close();
    } catch (e) {
      err = e;
    }
    // 1.x carries the server's text; 2.x fails its server/discover with the HTTP status.
    check(err !== null && (STATELESS ? err.status === 401
      : err.code === 401 && /API token/.test(String(err.message))),
    `connect with ${desc} fails with 401`,
    err && { code: err.code, status: err.status, msg: String(err.message) });
  }

  // --- connect and list ------------------------------------------------------------------------
  const alice = await connect(E.TOK_alice);
  const bob = await connect(E.TOK_bob);
  const root = await connect(E.TOK_root);
  const hello = STATELESS ? 'server/discover' : 'initialize';
  const info = alice.client.getServerVersion();
  check(info && info.name === 'sluice' && typeof info.version === 'string',
    `${hello}: serverInfo names sluice with a version`, info);
  if (STATELESS) {
    const d = alice.client.getDiscoverResult();
    check(alice.client.getProtocolEra() === 'modern' &&
      alice.client.getNegotiatedProtocolVersion() === '2026-07-28',
    'server/discover: the SDK\'s stateless revision 2026-07-28 is chosen',
    { era: alice.client.getProtocolEra(), v: alice.client.getNegotiatedProtocolVersion() });
    check(d && JSON.stringify(d.supportedVersions) ===
      JSON.stringify(['2026-07-28', '2025-11-25', '2025-06-18']),
    'server/discover: the three revisions spoken', d && d.supportedVersions);
  } else {
    check(alice.transport.protocolVersion === '2025-11-25',
      'initialize: the SDK\'s revision 2025-11-25 is negotiated', alice.transport.protocolVersion);
  }
  check(alice.client.getServerCapabilities() && alice.client.getServerCapabilities().tools,
    `${hello}: capabilities announce tools`, alice.client.getServerCapabilities());
  check(alice.transport.sessionId === undefined, 'no session id is issued (stateless server)',
    alice.transport.sessionId);
  if (!STATELESS) {
    // 2026-07-28 has no ping (the 2.x client refuses it itself).
    await alice.client.ping();
    check(true, 'ping answers');
  }

  const listed = await alice.client.listTools();
  const names = listed.tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify([...TOOLS].sort()), 'tools/list: the nine tools',
    names);
  for (const t of listed.tools) {
    const s = t.inputSchema || {};
    check(s.type === 'object' && typeof s.properties === 'object' &&
      s.additionalProperties === false && typeof t.description === 'string',
    `tools/list: ${t.name} has a closed object inputSchema and a description`, s);
  }

  // --- environments ------------------------------------------------------------------------------
  const le = await call(alice.client, 'list_environments', {});
  const envNames = (sc(le).environments || []).map((e) => e.name).sort();
  check(okResult(le) && envNames.includes('sbx') && envNames.includes('sbx-off') &&
    envNames.includes('alice-env'), 'list_environments (alice): the globals and her own', envNames);
  check(JSON.stringify(JSON.parse(text(le))) === JSON.stringify(sc(le)),
    'list_environments: the text content is the structured content as JSON');
  const leAll = JSON.stringify(le);
  check(!leAll.includes(E.SECRET) && !leAll.includes(E.CRED) && !leAll.includes('plain-value') &&
    !leAll.includes(E.ALICE_SECRET), 'list_environments: no variable value at all');
  const leBob = await call(bob.client, 'list_environments', {});
  check(okResult(leBob) && !(sc(leBob).environments || []).some((e) => e.name === 'alice-env'),
    'list_environments (bob): not alice\'s environment');

  const ge = await call(alice.client, 'get_environment', { environment: 'sbx' });
  const ev = sc(ge);
  const secretVar = (ev.env || []).find((v) => v.name === 'SBX_SECRET') || {};
  const plainVar = (ev.env || []).find((v) => v.name === 'SBX_PLAIN') || {};
  const credRule = ((ev.egress && ev.egress.rules) || []).find((r) => r.credential) || {};
  check(okResult(ge) && ev.name === 'sbx', 'get_environment sbx by name', ge);
  check(secretVar.value === '******' && secretVar.secret === true,
    'get_environment: the secret is masked as ******', secretVar);
  check(plainVar.value === 'plain-value', 'get_environment: a plain value is shown', plainVar);
  check(credRule.credential && credRule.credential.has_value === true &&
    !('value' in credRule.credential), 'get_environment: the credential has has_value only',
  credRule);
  const geAll = JSON.stringify(ge);
  check(!geAll.includes(E.SECRET), 'get_environment: the secret value appears nowhere');
  check(!geAll.includes(E.CRED) && !geAll.includes(E.CRED.replace(/^Bearer /, '')),
    'get_environment: the credential value appears nowhere');
  const geId = await call(alice.client, 'get_environment', { environment: E.ALICE_ENV_ID });
  check(okResult(geId) && sc(geId).name === 'alice-env' && !JSON.stringify(geId).includes(E.ALICE_SECRET) &&
    !JSON.stringify(geId).includes(E.ALICE_CRED), 'get_environment alice-env by id (alice): masked');
  for (const key of ['alice-env', E.ALICE_ENV_ID]) {
    const r = await call(bob.client, 'get_environment', { environment: key });
    const rr = await rest(E.TOK_bob, 'GET', `/environments/${encodeURIComponent(key)}`);
    check(r.isError === true && rr.status === 404 && text(r) === restText(rr) &&
      sc(r).status === 404 && !JSON.stringify(r).includes(E.ALICE_SECRET),
    `get_environment ${key === 'alice-env' ? 'by name' : 'by id'} (bob): tool error with the REST text "${restText(rr)}"`,
    { tool: r, rest: rr });
  }

  // --- sandboxes -----------------------------------------------------------------------------
  const [owner, repo] = E.REPO.split('/');
  const W = { owner, repo };
  const cr = await call(alice.client, 'sandbox_create', { ...W, ref: 'main', environment: 'sbx' });
  const sid = sc(cr).id;
  check(okResult(cr) && typeof sid === 'string' && sc(cr).environment === 'sbx' && sc(cr).ref === 'main',
    'sandbox_create {owner, repo, ref, environment}: an id, the ref and the environment', cr);
  const oldNames = await call(alice.client, 'sandbox_create', { repo: E.REPO });
  check(oldNames.isError === true && text(oldNames) === 'invalid arguments: owner: required',
    'sandbox_create with repo "owner/name" and no owner: a tool error naming owner', oldNames);
  if (!sid) {
    console.log('# no sandbox: the sandbox checks cannot run');
    return;
  }
  console.log(`# sandbox ${sid}`);
  const S = { ...W, sandbox_id: sid };
  // Text in, text out; the text holds what JSON escapes and a character beyond the BMP.
  const txt = 'h\u00e9llo "w\u00f6rld"\n\ttab \u{1F600}\n';
  const wt = await call(alice.client, 'sandbox_write_file', { ...S, path: 'dir/sub/note.txt', content: txt });
  check(okResult(wt) && sc(wt).ok === true && sc(wt).size === Buffer.byteLength(txt, 'utf8') &&
    /\/workspace\/repo\/dir\/sub\/note\.txt$/.test(sc(wt).path),
  'sandbox_write_file: text written as UTF-8 (size in bytes), parent directories made', wt);
  const rt = await call(alice.client, 'sandbox_read_file', { ...S, path: 'dir/sub/note.txt' });
  check(okResult(rt) && sc(rt).content === txt && sc(rt).encoding === undefined &&
    sc(rt).size === Buffer.byteLength(txt, 'utf8'),
  'sandbox_read_file of UTF-8: the text as it was written, no encoding', rt);
  const hx = await call(alice.client, 'sandbox_exec', { ...S, command: 'od -An -tx1 dir/sub/note.txt | tr -d " \n"' });
  check(okResult(hx) && sc(hx).stdout === Buffer.from(txt, 'utf8').toString('hex'),
    'sandbox_exec: the file holds exactly the UTF-8 bytes of the text', hx);
  // Binary: written through REST (base64), read through MCP as base64.
  const bytes = Buffer.from([0x68, 0x69, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0x41]);
  const wb = await rest(E.TOK_alice, 'POST', `/repos/${E.REPO}/sandboxes/${sid}/write`,
    { path: 'dir/data.bin', content: bytes.toString('base64'), mode: 493 });
  check(wb.status === 200, 'REST write of a binary file (base64 as before)', wb);
  const rd = await call(alice.client, 'sandbox_read_file', { ...S, path: 'dir/data.bin' });
  check(okResult(rd) && sc(rd).encoding === 'base64' && sc(rd).content === bytes.toString('base64') &&
    sc(rd).size === bytes.length,
  'sandbox_read_file of binary: encoding base64 and the same bytes', rd);
  const ex = await call(alice.client, 'sandbox_exec',
    { ...S, command: 'stat -c %a data.bin; wc -c < data.bin; echo "$GREETING"; echo to-stderr >&2',
      cwd: 'dir', env: { GREETING: 'hello from mcp' }, timeout_seconds: 60 });
  check(okResult(ex) && sc(ex).exitCode === 0 && sc(ex).stdout === '755\n8\nhello from mcp\n' &&
    sc(ex).stderr === 'to-stderr\n' && sc(ex).timedOut === false,
  'sandbox_exec {command, cwd, env, timeout_seconds}: stdout, stderr, exit code 0', ex);
  const slow = await call(alice.client, 'sandbox_exec', { ...S, command: 'sleep 30; echo late', timeout_seconds: 1 });
  check(okResult(slow) && sc(slow).exitCode === 124 && sc(slow).timedOut === true &&
    sc(slow).durationMs < 20000, 'sandbox_exec with timeout_seconds 1: stopped, exitCode 124, timedOut', slow);
  const ex3 = await call(alice.client, 'sandbox_exec', { ...S, command: 'echo no; exit 3' });
  check(okResult(ex3) && sc(ex3).exitCode === 3 && sc(ex3).stdout === 'no\n',
    'sandbox_exec: a non-zero exit is a normal result (exitCode 3, not a tool error)', ex3);
  const exs = await call(alice.client, 'sandbox_exec', { ...S, command: 'echo "$SBX_SECRET"' });
  check(okResult(exs) && !JSON.stringify(exs).includes(E.SECRET) && sc(exs).stdout.includes('***'),
    'sandbox_exec: the secret is redacted in the output', exs);
  const miss = await call(alice.client, 'sandbox_read_file', { ...S, path: 'nope.txt' });
  const missRest = await rest(E.TOK_alice, 'POST', `/repos/${E.REPO}/sandboxes/${sid}/read`, { path: 'nope.txt' });
  check(miss.isError === true && missRest.status >= 400 && text(miss) === restText(missRest) &&
    sc(miss).status === missRest.status, `sandbox_read_file of a missing file: tool error "${restText(missRest)}" as REST`,
  { tool: miss, rest: missRest });
  const badcwd = await call(alice.client, 'sandbox_exec', { ...S, command: 'true', cwd: 'no/such' });
  check(badcwd.isError === true && /^cwd does not exist: /.test(text(badcwd)),
    'sandbox_exec in a missing cwd: tool error "cwd does not exist: ..."', badcwd);
  const noarg = await call(alice.client, 'sandbox_exec', { ...S });
  check(noarg.isError === true && text(noarg) === 'invalid arguments: command: required',
    'sandbox_exec without command: tool error naming the argument', noarg);
  const restName = await call(alice.client, 'sandbox_exec', { ...S, command: 'true', timeoutMs: 5 });
  check(restName.isError === true && text(restName) === 'invalid arguments: timeoutMs: unknown argument',
    'sandbox_exec with the REST name timeoutMs: tool error (the tool says timeout_seconds)', restName);

  // Another user: the same refusals as REST.
  for (const [tool, args, action, body] of [
    ['sandbox_exec', { command: 'id' }, 'exec', { cmd: 'id' }],
    ['sandbox_read_file', { path: 'dir/data.bin' }, 'read', { path: 'dir/data.bin' }],
    ['sandbox_write_file', { path: 'x', content: 'x' }, 'write', { path: 'x', content: 'eA==' }],
    ['sandbox_close', {}, 'close', undefined]]) {
    const r = await call(bob.client, tool, { ...S, ...args });
    const rr = await rest(E.TOK_bob, 'POST', `/repos/${E.REPO}/sandboxes/${sid}/${action}`, body);
    check(r.isError === true && rr.status === 403 && text(r) === restText(rr) && text(r) === 'not your sandbox',
      `${tool} on alice's sandbox (bob): tool error "not your sandbox" as REST`, { tool: r, rest: rr });
  }
  const rootEx = await call(root.client, 'sandbox_exec', { ...S, command: 'cat dir/data.bin | wc -c' });
  check(okResult(rootEx) && sc(rootEx).stdout === '8\n', 'sandbox_exec on alice\'s sandbox (root, an admin): allowed',
    rootEx);
  const other = await call(alice.client, 'sandbox_exec', { owner: 'acme', repo: 'other', sandbox_id: sid, command: 'true' });
  check(other.isError === true && text(other) === 'sandbox not found',
    'sandbox_exec naming another repository: "sandbox not found"', other);

  // Calls at once (each is its own POST and its own REST job).
  const many = await Promise.all(Array.from({ length: 8 }, (_, i) =>
    call(alice.client, 'sandbox_exec', { ...S, command: `echo ${i}` })));
  check(many.every((r, i) => okResult(r) && sc(r).stdout === `${i}\n`),
    '8 sandbox_exec calls at once each get their own answer', many.map(text));

  const cl = await call(alice.client, 'sandbox_close', { ...S });
  check(okResult(cl) && sc(cl).closed === true, 'sandbox_close: {"closed":true}', cl);
  const after = await call(alice.client, 'sandbox_exec', { ...S, command: 'true' });
  check(after.isError === true && text(after) === 'sandbox not found',
    'sandbox_exec after close: tool error "sandbox not found"', after);

  // --- jobs ----------------------------------------------------------------------------------
  await jobs(alice, bob);

  const bad = await call(alice.client, 'no_such_tool', {});
  check(bad.thrown !== undefined && bad.code === -32602 && /Unknown tool/.test(bad.thrown),
    'an unknown tool is a protocol error -32602', bad);

  await Promise.all([alice.client.close(), bob.client.close(), root.client.close()]);
}

async function jobs(alice, bob) {
  const submit = async (command) => call(alice.client, 'submit_job', {
    repos: [{ repo_id: E.REPO, ref: 'main' }], command, environment: 'sbx-off', timeoutMs: 60000,
  });
  const good = await submit('echo job-ran');
  const bad = await submit('echo failing; exit 7');
  const ids = [good, bad].map((r) => (sc(r).job_ids || [])[0]);
  check(okResult(good) && okResult(bad) && ids.every((id) => typeof id === 'string') &&
    (sc(good).job_ids || []).length === 1, 'submit_job: one job id per repository', { good, bad });
  if (!ids.every((id) => typeof id === 'string')) {
    return;
  }
  // Poll until both finished (bounded: 240 rounds of 0.5 s).
  const jobsDone = {};
  for (let i = 0; i < 240 && Object.keys(jobsDone).length < 2; i++) {
    for (const id of ids) {
      if (jobsDone[id]) {
        continue;
      }
      const gj = await call(alice.client, 'get_job', { id });
      if (!okResult(gj) || ['succeeded', 'failed', 'error'].includes(sc(gj).status)) {
        jobsDone[id] = gj;
      }
    }
    await new Promise((res) => setTimeout(res, 500));
  }
  const g = sc(jobsDone[ids[0]]);
  const b = sc(jobsDone[ids[1]]);
  check(g.status === 'succeeded' && g.result && g.result.exitCode === 0 &&
    g.result.stdout === 'job-ran\n' && g.repo_id === E.REPO,
  'get_job: the first job succeeded with its output', g);
  check(g.environment && g.environment.name === 'sbx-off' && g.environment.matched_by === 'explicit',
    'get_job: the environment used, matched_by explicit', g.environment);
  check(b.status === 'failed' && b.result && b.result.exitCode === 7 && b.result.stdout === 'failing\n',
    'get_job: the failing command is failed with exit code 7', b);
  const gb = await call(bob.client, 'get_job', { id: ids[0] });
  const gbRest = await rest(E.TOK_bob, 'GET', `/jobs/${ids[0]}`);
  check(gb.isError === true && gbRest.status === 403 && text(gb) === restText(gbRest),
    `get_job of alice's job (bob): tool error "${restText(gbRest)}" as REST`, { tool: gb, rest: gbRest });
  const missing = await call(alice.client, 'get_job', { id: 'no-such-job' });
  const missingRest = await rest(E.TOK_alice, 'GET', '/jobs/no-such-job');
  check(missing.isError === true && missingRest.status === 404 && text(missing) === restText(missingRest),
    `get_job of an unknown id: tool error "${restText(missingRest)}" as REST`, { tool: missing, rest: missingRest });
  const body = { repos: [{ repo_id: E.REPO }], command: 'true', environment: 'alice-env' };
  const sjBad = await call(bob.client, 'submit_job', body);
  const sjBadRest = await rest(E.TOK_bob, 'POST', '/jobs', body);
  check(sjBad.isError === true && sjBadRest.status === 404 && text(sjBad) === restText(sjBadRest),
    `submit_job with alice's environment (bob): tool error "${restText(sjBadRest)}" as REST`,
    { tool: sjBad, rest: sjBadRest });
  const noCmd = await call(alice.client, 'submit_job', { repos: [{ repo_id: E.REPO }] });
  check(noCmd.isError === true && text(noCmd) === 'invalid arguments: command: required',
    'submit_job without command: tool error naming the argument', noCmd);
}

// MCP_SCENARIO=clone (tests/integration/mcp.sh stops the git server first): sandbox_create
// answers while the clone cannot go on; the first sandbox_exec waits for it (the script resumes
// the server a few seconds after the line "# waiting-for-clone") and runs on the clone (MAIN_SHA);
// an unknown ref's clone fails, and sandbox_read_file and sandbox_exec say so as tool errors.
async function cloneScenario() {
  const alice = await connect(E.TOK_alice);
  const [owner, repo] = E.REPO.split('/');
  const W = { owner, repo, environment: 'sbx' };
  const t0 = Date.now();
  const cr = await call(alice.client, 'sandbox_create', { ...W, ref: 'main' });
  const sid = sc(cr).id;
  check(okResult(cr) && typeof sid === 'string' && sc(cr).ref === 'main',
    'sandbox_create answers while the git server is stopped (the clone runs in the background)', cr);
  console.log(`# sandbox_create took ${Date.now() - t0} ms`);
  console.log('# waiting-for-clone');
  const t1 = Date.now();
  const ex = await call(alice.client, 'sandbox_exec',
    { owner, repo, sandbox_id: sid, command: 'git rev-parse HEAD' });
  const waited = Date.now() - t1;
  check(okResult(ex) && sc(ex).exitCode === 0 && sc(ex).stdout === `${E.MAIN_SHA}\n`,
    'sandbox_exec then runs on the clone: main\'s commit', ex);
  check(waited >= 2500, `... after waiting for the clone (${waited} ms; the server was resumed after 3 s)`);
  await call(alice.client, 'sandbox_close', { owner, repo, sandbox_id: sid });

  const bad = await call(alice.client, 'sandbox_create', { ...W, ref: 'no-such-branch' });
  const bid = sc(bad).id;
  check(okResult(bad) && typeof bid === 'string', 'sandbox_create with an unknown ref answers (the clone finds it out)', bad);
  const rd = await call(alice.client, 'sandbox_read_file', { owner, repo, sandbox_id: bid, path: 'README.md' });
  check(rd.isError === true && text(rd) === 'the clone failed: unknown ref' && sc(rd).status === 409,
    '... sandbox_read_file: tool error "the clone failed: unknown ref" (409)', rd);
  const bx = await call(alice.client, 'sandbox_exec', { owner, repo, sandbox_id: bid, command: 'true' });
  check(bx.isError === true && text(bx) === 'the clone failed: unknown ref',
    '... and sandbox_exec the same', bx);
  const bc = await call(alice.client, 'sandbox_close', { owner, repo, sandbox_id: bid });
  check(okResult(bc) && sc(bc).closed === true, '... sandbox_close works', bc);
  check(true, 'the clone scenario ran to its end');
}

try {
  await (E.MCP_SCENARIO === 'clone' ? cloneScenario() : main());
} catch (e) {
  check(false, `the client ran to the end (${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e})`);
}
console.log(`# mcp client: ${failures} failure(s)`);
process.exit(failures === 0 ? 0 : 1);
