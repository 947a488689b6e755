// SPDX-License-Identifier: Apache-2.0
// tests/browser/harness.mjs - what every browser test of the dashboard shares: the DASH_* variables
// tests/support/dashboard.sh passes, TAP-style checks (ok / not ok), steps that screenshot their
// failure, the API and the proxy as a client sees them, bounded waits, and the one Chromium page
// (headless, a persistent profile, console errors and CSP violations collected in `problems`).
// A test imports it, runs its steps inside try/finally and ends with finish().
import { chromium } from 'playwright-core';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.log(`not ok - ${name} is set`);
    process.exit(2);
  }
  return v;
};
export const BASE = env('DASH_URL');
export const ROOT = env('DASH_ROOT_TOKEN');
export const ALICE = env('DASH_ALICE_TOKEN');
export const PROXY = env('DASH_PROXY');
export const SLUICE_CA = env('DASH_SLUICE_CA');
export const TLS_PORT = env('DASH_TLS_PORT');
export const HTTP_PORT = env('DASH_HTTP_PORT');
export const ORIGIN_LOG = env('DASH_ORIGIN_LOG');
export const IMAGE = env('DASH_IMAGE');
export const CHROMIUM = env('DASH_CHROMIUM');
export const PROFILE = env('DASH_PROFILE');
export const ARTIFACTS = env('DASH_ARTIFACTS');
// 0 when the test runs without Docker: the sandbox steps are skipped (visibly).
export const SANDBOXES = process.env.DASH_SANDBOXES !== '0';
// The repository registered for the sandbox steps (tests/support/dashboard.sh SBX_REPOS), alice a
// writer of it, and the environment every sandbox of it resolves to (sbx_env_setup: "sbx").
export const REPO = 'acme/website';
export const STEP_MS = 15000;

export const hex = (n) => randomBytes(n).toString('hex');

let failures = 0;
let checks = 0;
export function ok(what) { checks++; console.log(`ok - ${what}`); }
export function notOk(what, detail) {
  checks++;
  failures++;
  console.log(`not ok - ${what}`);
  if (detail !== undefined) console.log(`#   ${String(detail).split('\n').join('\n#   ')}`);
}
export function check(what, cond, detail) { if (cond) ok(what); else notOk(what, detail); return !!cond; }
// A step that throws (a locator that never appears, an API error) fails with its message.
export async function step(what, fn) {
  try {
    const r = await fn();
    if (r === false) notOk(what); else ok(what);
  } catch (e) {
    notOk(what, e && e.message ? e.message.split('\n').slice(0, 6).join('\n') : e);
    await page.screenshot({ path: join(ARTIFACTS, `failed-${checks}.png`) }).catch(() => {});
  }
}

export async function api(token, method, path, body) {
  const res = await fetch(BASE + path, {
    method,
    headers: { Authorization: 'Bearer ' + token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(240000),
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  return { status: res.status, data };
}

// curl through the proxy as a static client; returns {code, reason, body}.
export function proxyCurl(id, token, url, extra = []) {
  const r = spawnSync('curl', ['-q', '-sS', '--max-time', '10', '--proxy', PROXY, '--proxy-user', `${id}:${token}`,
    '--cacert', SLUICE_CA, '-D', '-', '-o', '/dev/null', '-w', '\n%{http_code}', ...extra, url], { encoding: 'utf8', timeout: 20000 });
  const out = r.stdout || '';
  const code = out.trim().split('\n').pop();
  const m = /^x-sluice-reason:\s*(\S+)/im.exec(out);
  return { code, reason: m ? m[1] : null, out: out + (r.stderr || '') };
}

export function originSaw(probe) {
  let text = '';
  try { text = readFileSync(ORIGIN_LOG, 'utf8'); } catch { return []; }
  return text.split('\n').filter((l) => l.includes(probe)).map((l) => { try { return JSON.parse(l); } catch { return {}; } });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function until(what, fn, ms = STEP_MS) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(250);
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

mkdirSync(ARTIFACTS, { recursive: true });
export const context = await chromium.launchPersistentContext(PROFILE, {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1360, height: 900 },
  timeout: 60000,
});
context.setDefaultTimeout(STEP_MS);
export const page = context.pages()[0] || await context.newPage();
export const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
page.on('console', (m) => {
  if (m.type() === 'error' && !/status of (401|403|404|409|422)/.test(m.text())) problems.push('console: ' + m.text());
});
page.on('dialog', (d) => d.accept());
export const shot = async (name) => page.screenshot({ path: join(ARTIFACTS, name + '.png'), fullPage: false });

// Whether the page, shown `width` pixels wide, scrolls sideways: {fits, scrollWidth, width}. The
// viewport is left at that width (set it back with page.setViewportSize).
export async function fitsWidth(width, height = 900) {
  await page.setViewportSize({ width, height });
  await sleep(100);
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  return { fits: scrollWidth <= width, scrollWidth, width };
}

export async function signIn(token) {
  await page.fill('#token', token);
  await page.click('[data-testid=signin-submit]');
}

// The end of every browser test: the page-error check, the browser closed, the summary line and
// the exit status (1 when a check failed). `e` is what the test's try block threw, if anything.
export async function finish(e) {
  if (e !== undefined) {
    notOk('the browser session', e && e.stack ? e.stack : e);
    await shot('failure').catch(() => {});
  } else {
    check('no page errors and no CSP violations', problems.length === 0, problems.join('\n'));
  }
  await context.close().catch(() => {});
  console.log(failures ? `# ${failures} of ${checks} browser check(s) failed` : `# all ${checks} browser checks passed`);
  process.exit(failures ? 1 : 0);
}
