// SPDX-License-Identifier: Apache-2.0
// tests/browser/dashboard.mjs - the dashboard (docs/reference/api.md §5.6) in headless Chromium, driven by
// playwright-core. Run by tests/integration/dashboard.sh, which starts the control plane, the
// proxy, origin.py and users, and passes them in DASH_* variables. The pages of environments,
// sandboxes and the audit tail (issue #8), then repositories, tokens and users (issue #16).
// Prints TAP-style lines (ok / not ok / # skip) and exits 1 when any step failed. Every wait is
// bounded.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import {
  ALICE, ARTIFACTS, BASE, HTTP_PORT, IMAGE, REPO, ROOT, SANDBOXES, TLS_PORT,
  api, check, finish, hex, ok, originSaw, page, proxyCurl, shot, signIn, step, until,
} from './harness.mjs';

const CRED = 'Bearer dash-cred-' + hex(12);
const SECRET = 'dash-secret-' + hex(12);
const ENV_NAME = 'dash-web';
const ALLOWED_HOST = `a.sluice.test:${TLS_PORT}`;

const row = (scope, name) => page.locator(`#${scope}-envs tr[data-env="${name}"]`);

let thrown;
try {
  // ---- static files -------------------------------------------------------------------------
  await step('/dashboard redirects to /dashboard/ and the page loads under its CSP', async () => {
    const res = await page.goto(BASE + '/dashboard');
    const csp = res.headers()['content-security-policy'] || '';
    return res.status() === 200 && page.url() === BASE + '/dashboard/' && csp.includes("script-src 'self'")
      && !csp.includes('unsafe-inline') && res.headers()['cache-control'] === 'no-cache';
  });
  await step('assets have their types, an unknown one is 404, a POST is 405, no token needed', async () => {
    const js = await fetch(BASE + '/dashboard/app.js');
    const css = await fetch(BASE + '/dashboard/style.css');
    const nope = await fetch(BASE + '/dashboard/nope.js');
    const up = await fetch(BASE + '/dashboard/../api/v1/me');
    const post = await fetch(BASE + '/dashboard/', { method: 'POST' });
    return check('  app.js is text/javascript', js.status === 200 && js.headers.get('content-type') === 'text/javascript; charset=utf-8')
      && check('  style.css is text/css', css.status === 200 && css.headers.get('content-type') === 'text/css; charset=utf-8')
      && check('  nope.js → 404', nope.status === 404)
      && check('  a dot-dot path gets no data without a token', up.status === 401 || up.status === 404, String(up.status))
      && check('  POST → 405', post.status === 405);
  });

  await step('GET /api/v1/me names the caller and role; the audit limit is bounded (422 on limit)', async () => {
    const me = await api(ALICE, 'GET', '/api/v1/me');
    const bad = await api(ROOT, 'GET', '/api/v1/audit?limit=501');
    const zero = await api(ROOT, 'GET', '/api/v1/audit?limit=0');
    const none = await fetch(BASE + '/api/v1/audit');
    return check('  me', me.status === 200 && me.data.name === 'alice' && me.data.admin === false, JSON.stringify(me))
      && check('  limit=501 and limit=0 → 422 naming the field', bad.status === 422 && bad.data.errors[0].field === 'limit' && zero.status === 422, JSON.stringify(bad))
      && check('  no token → 401', none.status === 401);
  });

  // ---- sign in ------------------------------------------------------------------------------
  await step('a wrong token gets a clear error', async () => {
    await signIn('not-a-token-' + hex(4));
    await page.locator('[data-testid=signin-error]').filter({ hasText: 'not valid' }).waitFor();
    return (await page.locator('#signin').isVisible()) && (await page.evaluate(() => sessionStorage.length)) === 0;
  });
  await shot('01-signin-error');
  await step('root signs in and is shown as admin', async () => {
    await signIn(ROOT);
    await page.locator('[data-testid=who-name]', { hasText: 'root' }).waitFor();
    return (await page.textContent('[data-testid=who-role]')) === 'admin';
  });
  await step('user and global environments are listed apart (sbx is global)', async () => {
    await row('global', 'sbx').waitFor();
    return (await row('user', 'sbx').count()) === 0;
  });

  await step('the list shows each environment\'s base image', async () => {
    const shown = (await row('global', 'sbx').locator('[data-testid=env-image]').textContent()).trim();
    if (shown !== IMAGE) throw new Error(`sbx shows image '${shown}', not '${IMAGE}'`);
    return true;
  });

  // ---- create ---------------------------------------------------------------------------------
  await step('create a global environment with a secret variable and a credential rule', async () => {
    await page.click('[data-testid=env-new]');
    const ph = await page.locator('#f-base_image').getAttribute('placeholder');
    if (ph !== 'sluice/sandbox:bookworm') throw new Error(`the base image placeholder is ${ph}, not the default image`);
    await page.fill('#f-name', ENV_NAME);
    await page.selectOption('#f-scope', 'global');
    await page.fill('#f-description', 'web builds');
    await page.fill('#f-base_image', IMAGE);
    await page.selectOption('#f-network', 'on');
    await page.selectOption('#f-egress-default', 'deny');
    await page.click('[data-testid=f-env-add]');
    await page.click('[data-testid=f-env-add]');
    const vars = page.locator('#f-env tr');
    await vars.nth(0).locator('.v-name').fill('PLAIN');
    await vars.nth(0).locator('.v-value').fill('visible');
    await vars.nth(1).locator('.v-name').fill('API_SECRET');
    await vars.nth(1).locator('.v-secret').check();
    await vars.nth(1).locator('.v-value').fill(SECRET);
    if ((await vars.nth(1).locator('.v-value').getAttribute('type')) !== 'password') throw new Error('a secret value is not masked while typed');
    await page.click('[data-testid=f-rule-add]');
    const rules = page.locator('#f-rules tr');
    await rules.nth(0).locator('.r-host').fill(ALLOWED_HOST);
    await rules.nth(0).locator('.r-methods').fill('GET, POST');
    await rules.nth(0).locator('.r-header').fill('Authorization');
    await rules.nth(0).locator('.r-value').fill(CRED);
    await page.fill('#f-repositories', REPO);
    await shot('02-create-drawer');
    await page.click('[data-testid=env-save]');
    await page.locator('#drawer').waitFor({ state: 'hidden' });
    await row('global', ENV_NAME).waitFor();
    return true;
  });

  // ---- reload: masks ------------------------------------------------------------------------
  await step('after a reload (still signed in) the secret is masked and the credential is "keep existing"', async () => {
    await page.reload();
    await row('global', ENV_NAME).waitFor();
    await row('global', ENV_NAME).locator('[data-testid=env-edit]').click();
    await page.locator('#drawer').waitFor();
    const v = page.locator('#f-env tr').nth(1);
    const name = await v.locator('.v-name').inputValue();
    const value = await v.locator('.v-value').inputValue();
    const type = await v.locator('.v-value').getAttribute('type');
    const ph = await page.locator('#f-rules tr').nth(0).locator('.r-value').getAttribute('placeholder');
    const credValue = await page.locator('#f-rules tr').nth(0).locator('.r-value').inputValue();
    await shot('03-edit-masked');
    return check('  secret variable shows ****** in a password field', name === 'API_SECRET' && value === '******' && type === 'password', `${name}=${value} (${type})`)
      && check('  credential value is empty with the "keep existing" placeholder', ph === 'keep existing' && credValue === '', `${ph} / ${credValue}`);
  });

  // ---- edit another field -------------------------------------------------------------------
  await step('edit the description and CPUs (from Default to Custom) and save', async () => {
    await page.fill('#f-description', 'edited in the browser');
    await page.check('#f-cpus-custom');
    await page.fill('#f-cpus', '1.5');
    await page.click('[data-testid=env-save]');
    await page.locator('#drawer').waitFor({ state: 'hidden' });
    await row('global', ENV_NAME).filter({ hasText: 'edited in the browser' }).waitFor();
    return true;
  });
  let envDoc = null;
  await step('the API has the edit, the secret masked and the credential kept (has_value)', async () => {
    const r = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    envDoc = r.data;
    const sec = (r.data.env || []).find((v) => v.name === 'API_SECRET');
    const rule = (r.data.egress.rules || [])[0] || {};
    return check('  description and cpus saved', r.data.description === 'edited in the browser' && r.data.cpus === 1.5, JSON.stringify(r.data))
      && check('  API_SECRET is still secret and masked', sec && sec.secret === true && sec.value === '******', JSON.stringify(sec))
      && check('  the credential still has its value', rule.credential && rule.credential.has_value === true && rule.credential.header === 'Authorization', JSON.stringify(rule));
  });

  // ---- the proxy injects the unchanged credential -------------------------------------------
  let client = null;
  await step('a static client bound to the environment gets the stored credential injected by the proxy', async () => {
    const r = await api(ROOT, 'POST', '/api/v1/clients', { id: 'dash-ci', token: true, environment: ENV_NAME });
    if (r.status !== 201) throw new Error(`POST /api/v1/clients: ${r.status} ${JSON.stringify(r.data)}`);
    client = r.data;
    const probe = 'dash-probe-' + hex(6);
    // The snapshot with the new client reaches the proxy within a moment: retry until then.
    const res = await until('the proxy lets the client through', async () => {
      const c = proxyCurl('dash-ci', client.token, `https://${ALLOWED_HOST}/echo`, ['-H', `X-Probe: ${probe}`]);
      return c.code === '200' ? c : null;
    });
    const seen = await until('origin.py logs the request', async () => { const s = originSaw(probe); return s.length ? s : null; }, 5000);
    return check('  origin.py received exactly the credential typed in the browser', seen.length === 1 && seen[0].authorization === CRED,
      JSON.stringify(seen).slice(0, 400) + ' / ' + res.code);
  });

  // ---- a refusal in the audit tail ----------------------------------------------------------
  const refusedHost = 'b.sluice.test';
  const wantSuggestion = `to allow it, add {"host":"${refusedHost}:${HTTP_PORT}","methods":["GET"]} to environment ${ENV_NAME}`;
  await step('a request to a host not allowed is refused by the proxy (403 host-not-allowed)', async () => {
    const c = proxyCurl('dash-ci', client ? client.token : 'x', `http://${refusedHost}:${HTTP_PORT}/refused-${hex(4)}`);
    return check('  403 with X-Sluice-Reason: host-not-allowed', c.code === '403' && c.reason === 'host-not-allowed', c.out.slice(0, 400));
  });
  await step('the audit tail shows the refusal with its reason code and suggested rule', async () => {
    await page.click('.tab[data-tab=audit]');
    const r = page.locator(`#audit tr[data-host="${refusedHost}"]`).first();
    await r.waitFor();
    const reason = await r.locator('[data-testid=audit-reason]').textContent();
    const sugg = await r.locator('[data-testid=audit-suggestion]').textContent();
    await shot('04-audit');
    return check('  reason host-not-allowed', reason === 'host-not-allowed', reason)
      && check('  suggestion names the rule and the environment', sugg === wantSuggestion, `${sugg}\nwant ${wantSuggestion}`);
  });
  await step('the audit tail polls: a new refusal appears without a reload', async () => {
    const path = `/later-${hex(4)}`;
    proxyCurl('dash-ci', client ? client.token : 'x', `http://${refusedHost}:${HTTP_PORT}${path}`);
    await page.locator('#audit tr', { hasText: path }).first().waitFor({ timeout: 10000 });
    return true;
  });

  // ---- learn mode: observe, the observed lines, suggestions applied, stop (issue 18) ----------
  // c.sluice.test resolves at the proxy too (dashboard.sh: SBX_NAMES). b stays refused after all
  // this: the sandbox steps below expect it.
  const observedHost = 'c.sluice.test';
  const observeRow = () => row('global', ENV_NAME);
  const learnRow = (host) => page.locator(`#learn-suggestions tr[data-host="${host}"]`);
  await step('Observe: root puts the environment in observe for 4 hours from its row; the row is marked with the deadline', async () => {
    await page.click('.tab[data-tab=environments]');
    await observeRow().locator('[data-testid=env-observe]').click();
    const form = page.locator('#global-envs [data-testid=observe-row]');
    const choices = await form.locator('[data-testid=observe-minutes] option').evaluateAll((os) => os.map((o) => o.value));
    const dflt = await form.locator('[data-testid=observe-minutes]').inputValue();
    await form.locator('[data-testid=observe-minutes]').selectOption('240');
    const before = Date.now();
    await form.locator('[data-testid=observe-start]').click();
    const badge = observeRow().locator('[data-testid=observe-badge]');
    await badge.waitFor();
    const text = await badge.textContent();
    const r = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    const until = Date.parse(r.data.observe_until);
    // As the page says it, in the browser's locale: the time, after the day when that is not
    // today (a 4-hour deadline is tomorrow from 20:00 on).
    const shownAt = await page.evaluate((u) => {
      const d = new Date(u);
      const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      return d.toDateString() === new Date().toDateString() ? t
        : d.toLocaleDateString([], { weekday: 'short', day: 'numeric', month: 'short' }) + ' ' + t;
    }, until);
    await shot('learn-1-observing');
    return check('  durations 15 min to 24 h, 1 h chosen by default', JSON.stringify(choices) === '["15","60","240","1440"]' && dflt === '60', `${choices} ${dflt}`)
      && check('  the API has a deadline 4 hours on', Math.abs(until - before - 4 * 3600000) < 120000, r.data.observe_until)
      && check('  the mark says "observing until" the local time', text === `observing until ${shownAt}`, `${text} / ${shownAt}`)
      && check('  the row offers Stop observing', await observeRow().locator('[data-testid=env-observe-stop]').isVisible());
  });
  await step('Observe: a request the policy refuses is let out and its audit line is marked observed', async () => {
    // origin.py answers /hello with 200 (another path: 404).
    const c = await until('the proxy lets the refused host out in observe', async () => {
      const x = proxyCurl('dash-ci', client ? client.token : 'x', `http://${observedHost}:${HTTP_PORT}/hello`);
      return x.code === '200' ? x : null;
    });
    proxyCurl('dash-ci', client ? client.token : 'x', `http://${refusedHost}:${HTTP_PORT}/observed-too`);
    await page.click('.tab[data-tab=audit]');
    const line = page.locator(`#audit tr[data-observed=true][data-host="${observedHost}"]`).first();
    await line.waitFor({ timeout: 10000 });
    const tag = await line.locator('[data-testid=audit-observed]').textContent();
    const decision = await line.locator('[data-testid=audit-decision]').textContent();
    await shot('learn-2-audit-observed');
    return check('  200 through the proxy', c.code === '200', c.out.slice(0, 300))
      && check('  the line says allow 200 and "observed — would deny: host-not-allowed"', decision === 'allow 200' && tag === 'observed — would deny: host-not-allowed', `${decision} / ${tag}`);
  });
  await step('Suggestions: the drawer shows the proposed rules, every one ticked; wildcards on request', async () => {
    await page.click('.tab[data-tab=environments]');
    await observeRow().locator('[data-testid=env-suggestions]').click();
    await page.locator('#learn-drawer').waitFor();
    const b = learnRow(`${refusedHost}:${HTTP_PORT}`);
    const c = learnRow(`${observedHost}:${HTTP_PORT}`);
    await b.waitFor();
    await c.waitFor();
    const methods = await c.locator('[data-testid=suggestion-methods]').textContent();
    const count = await b.locator('[data-testid=suggestion-count]').textContent();
    const ticked = await page.locator('#learn-suggestions [data-testid=suggestion-use]').evaluateAll((xs) => xs.every((x) => x.checked));
    const status = await page.textContent('[data-testid=learn-status]');
    const apply = await page.textContent('[data-testid=learn-apply]');
    await shot('learn-3-suggestions');
    await page.check('[data-testid=learn-wildcards]');
    const wild = learnRow(`*.sluice.test:${HTTP_PORT}`);
    await wild.waitFor();
    const hosts = await wild.locator('[data-testid=suggestion-hosts]').textContent();
    const rows = await page.locator('#learn-suggestions tr').count();
    await shot('learn-4-wildcards');
    await page.uncheck('[data-testid=learn-wildcards]');
    await b.waitFor();
    await c.waitFor();
    return check('  c.sluice.test with GET', methods === 'GET', methods)
      && check('  b.sluice.test counts its refusals and its observed request', /^\d+ \(([1-9]\d*) observed, ([2-9]|\d\d+) refused\)$/.test(count), count)
      && check('  all ticked, Apply names how many', ticked && apply === 'Apply 2 rules', `${ticked} ${apply}`)
      && check('  the status says observing until', /is observing until /.test(status), status)
      && check('  wildcards: one *.sluice.test rule covering b and c', rows === 1 && hosts === `seen: ${refusedHost}, ${observedHost}`, `${rows} ${hosts}`);
  });
  await step('Suggestions: Apply posts only the ticked rule; the drawer shows the environment\'s rules after it', async () => {
    await learnRow(`${refusedHost}:${HTTP_PORT}`).locator('[data-testid=suggestion-use]').uncheck();
    const label = await page.textContent('[data-testid=learn-apply]');
    await page.click('[data-testid=learn-apply]');
    await page.locator('[data-testid=learn-result]').waitFor();
    const shown = await page.locator('#learn-result-rules tr').evaluateAll((rs) => rs.map((r) => r.dataset.host));
    // Re-fetched: what the rules allow by now is left out.
    await learnRow(`${observedHost}:${HTTP_PORT}`).waitFor({ state: 'detached' });
    const left = await learnRow(`${refusedHost}:${HTTP_PORT}`).count();
    await shot('learn-5-applied');
    await page.click('#learn-drawer-cancel');
    await page.locator('#learn-drawer').waitFor({ state: 'hidden' });
    await observeRow().filter({ hasText: 'deny · 2 rules' }).waitFor();
    const r = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    const hosts = r.data.egress.rules.map((x) => x.host + ' ' + JSON.stringify(x.methods));
    return check('  Apply named one rule', label === 'Apply 1 rule', label)
      && check('  the result lists the old rule and the new one', JSON.stringify(shown) === JSON.stringify([ALLOWED_HOST, `${observedHost}:${HTTP_PORT}`]), JSON.stringify(shown))
      && check('  the API has exactly that rule added', JSON.stringify(hosts) === JSON.stringify([`${ALLOWED_HOST} ["GET","POST"]`, `${observedHost}:${HTTP_PORT} ["GET"]`]), JSON.stringify(hosts))
      && check('  the unticked suggestion is still proposed', left === 1, String(left));
  });
  await step('Stop observing: the mark goes, the page says when, and the proxy refuses again what no rule allows', async () => {
    await observeRow().locator('[data-testid=env-observe-stop]').click();
    await page.locator('[data-testid=toast]', { hasText: `${ENV_NAME} stopped observing at` }).waitFor();
    await observeRow().locator('[data-testid=observe-badge]').waitFor({ state: 'detached' });
    const r = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    // DELETE answered once every proxy held it: no retry needed.
    const refused = proxyCurl('dash-ci', client ? client.token : 'x', `http://${refusedHost}:${HTTP_PORT}/after-observe`);
    const allowed = proxyCurl('dash-ci', client ? client.token : 'x', `http://${observedHost}:${HTTP_PORT}/hello`);
    return check('  observe_until is null', r.data.observe_until === null, JSON.stringify(r.data.observe_until))
      && check('  no Stop observing any more', (await observeRow().locator('[data-testid=env-observe-stop]').count()) === 0)
      && check('  b.sluice.test: 403 host-not-allowed again', refused.code === '403' && refused.reason === 'host-not-allowed', refused.out.slice(0, 300))
      && check('  c.sluice.test: 200 by the applied rule', allowed.code === '200', allowed.out.slice(0, 300));
  });

  // ---- validation errors next to their fields ------------------------------------------------
  await step('a 422 from the API is shown next to the rule host it names', async () => {
    await page.click('.tab[data-tab=environments]');
    await page.click('[data-testid=env-new]');
    await page.fill('#f-name', 'bad-rules');
    await page.fill('#f-base_image', IMAGE);
    await page.click('[data-testid=f-rule-add]');
    await page.click('[data-testid=f-rule-add]');
    await page.locator('#f-rules tr').nth(0).locator('.r-host').fill('ok.example.com');
    await page.locator('#f-rules tr').nth(1).locator('.r-host').fill('bad host!.example');
    await page.click('[data-testid=env-save]');
    const err = page.locator('#f-rules tr').nth(1).locator('.r-host + .field-error');
    await err.waitFor();
    const field = await err.getAttribute('data-field');
    const cls = await page.locator('#f-rules tr').nth(1).locator('.r-host').getAttribute('class');
    const first = await page.locator('#f-rules tr').nth(0).locator('.field-error').count();
    await shot('05-validation-error');
    await page.click('#drawer-cancel');
    return check('  the error names egress.rules[1].host and marks that input only', field === 'egress.rules[1].host' && /invalid/.test(cls) && first === 0, `${field} ${cls} ${first}`);
  });

  // ---- set default, delete guarded ----------------------------------------------------------
  await step('an admin sets the default; deleting the default shows the API\'s 409', async () => {
    await row('global', 'sbx-off').locator('[data-testid=env-set-default]').click();
    await row('global', 'sbx-off').locator('[data-testid=default-badge]').waitFor();
    await row('global', 'sbx-off').locator('[data-testid=env-delete]').click();
    await page.locator('[data-testid=toast]', { hasText: 'promote another first' }).waitFor();
    await shot('06-delete-default-refused');
    const r = await api(ROOT, 'GET', '/api/v1/environments/sbx-off');
    return check('  sbx-off is still there and default', r.status === 200 && r.data.is_default === true, JSON.stringify(r.data).slice(0, 200));
  });
  await page.click('.tab[data-tab=environments]');
  await row('global', ENV_NAME).waitFor();
  await page.locator('[data-testid=toast]').first().waitFor({ state: 'detached', timeout: 10000 }).catch(() => {});
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png') });

  // ---- sign out ---------------------------------------------------------------------------------
  await step('sign out clears the token', async () => {
    await page.click('[data-testid=sign-out]');
    await page.locator('#signin').waitFor();
    return (await page.evaluate(() => sessionStorage.getItem('sluice.token'))) === null;
  });

  // ---- a non-admin --------------------------------------------------------------------------
  await step('alice (not an admin) sees global environments without write actions', async () => {
    const own = await api(ALICE, 'POST', '/api/v1/environments', { name: 'alice-learn', base_image: IMAGE, network: 'on', egress: { default: 'deny', rules: [{ host: 'a.sluice.test' }] } });
    if (own.status !== 201) throw new Error('POST alice-learn: ' + JSON.stringify(own));
    await signIn(ALICE);
    await page.locator('[data-testid=who-role]', { hasText: 'user' }).waitFor();
    const r = row('global', ENV_NAME);
    await r.waitFor();
    const edit = await r.locator('[data-testid=env-edit]').textContent();
    const setDef = await page.locator('#global-envs [data-testid=env-set-default]').count();
    const del = await page.locator('#global-envs [data-testid=env-delete]').count();
    const learn = await page.locator('#global-envs [data-testid=env-observe], #global-envs [data-testid=env-suggestions], #global-envs [data-testid=env-observe-stop]').count();
    await row('user', 'alice-learn').waitFor();
    const ownLearn = await row('user', 'alice-learn').locator('[data-testid=env-observe], [data-testid=env-suggestions]').count();
    await r.locator('[data-testid=env-edit]').click();
    await page.locator('#drawer').waitFor();
    const saveHidden = await page.locator('[data-testid=env-save]').isHidden();
    const nameDisabled = await page.locator('#f-name').isDisabled();
    await shot('07-alice-read-only');
    await page.click('#drawer-cancel');
    await page.click('[data-testid=env-new]');
    const globalOffered = await page.locator('#f-scope option[value=global]').evaluate((o) => !o.hidden && !o.disabled);
    await page.click('#drawer-cancel');
    return check('  View instead of Edit, no Set default, no Delete', edit === 'View' && setDef === 0 && del === 0, `${edit} ${setDef} ${del}`)
      && check('  no Observe or Suggestions on global environments, both on her own', learn === 0 && ownLearn === 2, `${learn} ${ownLearn}`)
      && check('  the global environment opens read only', saveHidden && nameDisabled)
      && check('  a new environment cannot be global', !globalOffered);
  });
  await step('the resolution view names the environment bound to the repository', async () => {
    await page.fill('[data-testid=resolve-repo]', REPO);
    await page.click('[data-testid=resolve-submit]');
    await page.locator('[data-testid=resolve-result]').waitFor();
    const name = await page.textContent('[data-testid=resolved-env] strong');
    const by = await page.textContent('[data-testid=resolved-matched-by]');
    await shot('08-resolve');
    return check(`  ${REPO} → ${ENV_NAME} by global-binding`, name === ENV_NAME && by === 'global-binding', `${name} ${by}`);
  });

  // ---- a sandbox: the secret, the audit scope, close from the page ----------------------------
  const created = SANDBOXES ? await api(ALICE, 'POST', `/api/v1/repos/${REPO}/sandboxes`, { environment: ENV_NAME }) : null;
  if (!SANDBOXES) {
    console.log('# skip the sandbox steps (secret inside a sandbox, audit scope, close from the page): no Docker');
    await step('without Docker the sandboxes page lists none', async () => {
      await page.click('.tab[data-tab=sandboxes]');
      await page.locator('#sandboxes-empty').waitFor();
      return true;
    });
  } else if (!check('alice creates a sandbox with the environment (API)', created.status === 201, JSON.stringify(created.data))) {
    console.log('# the sandbox steps cannot run: no sandbox');
  } else {
    const id = created.data.id;
    const ex = (cmd) => api(ALICE, 'POST', `/api/v1/repos/${REPO}/sandboxes/${id}/exec`, { cmd });
    await step('the stored secret is unchanged after the edit (its hash inside the sandbox)', async () => {
      const r = await ex('printf %s "$API_SECRET" | sha256sum | cut -d" " -f1');
      const want = createHash('sha256').update(SECRET).digest('hex');
      return check('  sha256 of $API_SECRET matches what was typed', r.status === 200 && r.data.stdout.trim() === want, JSON.stringify(r.data).slice(0, 300));
    });
    await step('alice\'s audit tail holds her sandbox\'s refusal and not the static client\'s lines', async () => {
      const r = await ex(`curl -s -o /dev/null -w '%{http_code}' --max-time 10 http://${refusedHost}:${HTTP_PORT}/from-sandbox`);
      if (!(r.status === 200 && r.data.stdout === '403')) throw new Error('the sandbox request was not refused: ' + JSON.stringify(r.data));
      const a = await until('the line appears', async () => {
        const t = await api(ALICE, 'GET', '/api/v1/audit?limit=500');
        return (t.data.entries || []).some((e) => e.client === id) ? t.data : null;
      });
      const root = await api(ROOT, 'GET', '/api/v1/audit?limit=500');
      return check('  only her client', a.all === false && a.entries.every((e) => e.client === id), JSON.stringify(a.entries.map((e) => e.client)))
        && check('  the admin sees both', root.data.all === true && root.data.entries.some((e) => e.client === 'dash-ci') && root.data.entries.some((e) => e.client === id));
    });
    await step('the sandboxes list shows it and Close closes it', async () => {
      await page.click('.tab[data-tab=sandboxes]');
      const r = page.locator(`#sandboxes tr[data-sandbox="${id}"]`);
      await r.waitFor();
      const repo = await r.locator('td').nth(1).textContent();
      await shot('09-sandboxes');
      await r.locator('[data-testid=sandbox-close]').click();
      await r.waitFor({ state: 'detached', timeout: 60000 });
      const list = await api(ALICE, 'GET', '/api/v1/sandboxes');
      return check('  row shows the repository', repo === REPO, repo)
        && check('  the API no longer lists it', list.status === 200 && !list.data.some((s) => s.id === id), JSON.stringify(list.data));
    });
  }

  // ---- users, tokens, repositories and members (issue 16) -------------------------------------
  const DAVE = 'dave';
  const NEWREPO = 'acme/dash-repo';
  const fieldError = (input) => page.locator(`${input} + .field-error`);
  const switchError = (input) => page.locator(`label:has(${input}) + .field-error`);
  const userRow = (name) => page.locator(`#users tr[data-user="${name}"]`);
  const tokenRow = (name) => page.locator(`#tokens tr[data-name="${name}"]`);
  const repoRow = (name) => page.locator(`#repos tr[data-repo="${name}"]`);
  const memberRow = (name) => page.locator(`#r-members tr[data-member="${name}"]`);
  async function signInAs(token, name) {
    if (await page.locator('[data-testid=sign-out]').isVisible()) await page.click('[data-testid=sign-out]');
    await page.locator('#signin').waitFor();
    await signIn(token);
    await page.locator('[data-testid=who-name]', { hasText: name }).waitFor();
  }

  await step('alice (not an admin) has no Users tab and cannot offer the admin scope', async () => {
    await signInAs(ALICE, 'alice');
    const usersTab = await page.locator('.tab[data-tab=users]').isVisible();
    await page.click('.tab[data-tab=tokens]');
    await page.locator('#view-tokens').waitFor();
    const adminScope = await page.locator('#t-scope option[value=admin]').evaluate((o) => !o.hidden && !o.disabled);
    return check('  no Users tab', !usersTab) && check('  no admin scope', !adminScope);
  });

  await step('root signs in again and the Users tab is there', async () => {
    await signInAs(ROOT, 'root');
    await page.click('.tab[data-tab=users]');
    await userRow('alice').waitFor();
    return userRow('root').locator('[data-testid=user-role]').filter({ hasText: 'admin' }).isVisible();
  });

  let daveToken = null;
  await step('Users: create dave with an email; his token is shown once and works', async () => {
    await page.fill('#u-name', DAVE);
    await page.fill('#u-email', 'dave@example.com');
    await page.click('[data-testid=user-create]');
    await page.locator('[data-testid=user-once]').waitFor();
    daveToken = await page.inputValue('[data-testid=user-once-value]');
    await userRow(DAVE).waitFor();
    await shot('10-user-created');
    const me = await api(daveToken, 'GET', '/api/v1/me');
    const email = await userRow(DAVE).locator('[data-testid=user-email]').textContent();
    return check('  the token is an API token of dave, scope write', /^sl_/.test(daveToken) && me.status === 200
      && me.data.name === DAVE && me.data.scope === 'write', JSON.stringify(me))
      && check('  the row shows his email and active', email === 'dave@example.com'
        && (await userRow(DAVE).locator('[data-testid=user-status]').textContent()) === 'active', email);
  });
  await step('Users: the token is gone from the page once dismissed', async () => {
    await page.click('#user-once-hide');
    return (await page.locator('[data-testid=user-once]').isHidden()) && (await page.inputValue('#user-once-value')) === '';
  });
  await step('Users: a taken name and a bad email are shown next to their fields', async () => {
    await page.fill('#u-name', DAVE);
    await page.click('[data-testid=user-create]');
    const taken = await fieldError('#u-name').textContent();
    await page.fill('#u-name', 'erin');
    await page.fill('#u-email', 'not an address');
    await page.click('[data-testid=user-create]');
    await fieldError('#u-email').waitFor();
    const bad = await fieldError('#u-email').getAttribute('data-field');
    const nameCleared = await fieldError('#u-name').count();
    await shot('11-user-errors');
    const erin = await api(ROOT, 'GET', '/api/v1/users/erin');
    await page.fill('#u-name', '');
    await page.fill('#u-email', '');
    return check('  409 next to the name', taken === `a user named '${DAVE}' exists already`, taken)
      && check('  422 next to the email (field email), the old error gone', bad === 'email' && nameCleared === 0, `${bad} ${nameCleared}`)
      && check('  erin was not created', erin.status === 404, JSON.stringify(erin));
  });
  await step('Users: edit dave\'s email and make him an admin, then not', async () => {
    await userRow(DAVE).locator('[data-testid=user-edit]').click();
    const edit = page.locator('#users [data-testid=user-edit-row]');
    await edit.locator('[data-testid=user-edit-email]').fill('dave@corp.example');
    await edit.locator('[data-testid=user-edit-admin]').check();
    await edit.locator('[data-testid=user-edit-save]').click();
    await userRow(DAVE).locator('[data-testid=user-email]', { hasText: 'dave@corp.example' }).waitFor();
    const a = await api(ROOT, 'GET', `/api/v1/users/${DAVE}`);
    await userRow(DAVE).locator('[data-testid=user-edit]').click();
    await page.locator('#users [data-testid=user-edit-row] [data-testid=user-edit-admin]').uncheck();
    await page.locator('#users [data-testid=user-edit-row] [data-testid=user-edit-save]').click();
    await userRow(DAVE).locator('[data-testid=user-role]', { hasText: 'user' }).waitFor();
    const b = await api(ROOT, 'GET', `/api/v1/users/${DAVE}`);
    return check('  the API has the email and the admin flag', a.data.email === 'dave@corp.example' && a.data.admin === true, JSON.stringify(a.data))
      && check('  ... and the flag cleared again', b.data.admin === false, JSON.stringify(b.data));
  });
  await step('Users: the last enabled admin cannot be demoted (409 next to the admin flag)', async () => {
    await userRow('root').locator('[data-testid=user-edit]').click();
    const edit = page.locator('#users [data-testid=user-edit-row]');
    await edit.locator('[data-testid=user-edit-admin]').uncheck();
    await edit.locator('[data-testid=user-edit-save]').click();
    const msg = await edit.locator('label:has([data-testid=user-edit-admin]) + .field-error').textContent();
    await edit.locator('button', { hasText: 'Cancel' }).click();
    const me = await api(ROOT, 'GET', '/api/v1/me');
    return check('  the API\'s message', /last enabled admin/.test(msg), msg) && check('  root is still an admin', me.data.admin === true);
  });
  await step('Users: disable dave (his token gets 401 account disabled), enable him again', async () => {
    await userRow(DAVE).locator('[data-testid=user-toggle]', { hasText: 'Disable' }).click();
    await userRow(DAVE).locator('[data-testid=user-status]', { hasText: 'disabled' }).waitFor();
    const off = await api(daveToken, 'GET', '/api/v1/me');
    await shot('12-users');
    await userRow(DAVE).locator('[data-testid=user-toggle]', { hasText: 'Enable' }).click();
    await userRow(DAVE).locator('[data-testid=user-status]', { hasText: 'active' }).waitFor();
    const on = await api(daveToken, 'GET', '/api/v1/me');
    return check('  disabled: 401 account disabled', off.status === 401 && off.data.message === 'account disabled', JSON.stringify(off))
      && check('  enabled: 200', on.status === 200, JSON.stringify(on));
  });

  let readToken = null;
  await step('Tokens: create a read-scoped token that expires in 7 days; shown once, listed', async () => {
    await page.click('.tab[data-tab=tokens]');
    await page.fill('#t-name', 'dash reader');
    await page.selectOption('#t-scope', 'read');
    await page.fill('#t-expires', '7');
    await page.click('[data-testid=token-create]');
    await page.locator('[data-testid=token-once]').waitFor();
    readToken = await page.inputValue('[data-testid=token-once-value]');
    await tokenRow('dash reader').waitFor();
    const scope = await tokenRow('dash reader').locator('[data-testid=token-scope]').textContent();
    const expires = await tokenRow('dash reader').locator('[data-testid=token-expires]').textContent();
    await shot('13-token-created');
    const list = await api(ROOT, 'GET', '/api/v1/tokens');
    const t = (list.data.tokens || []).find((x) => x.name === 'dash reader') || {};
    const days = (Date.parse(t.expires_at) - Date.parse(t.created_at)) / 86400000;
    return check('  the row says read and an expiry', scope === 'read' && /^\d{4}-\d\d-\d\d /.test(expires), `${scope} ${expires}`)
      && check('  the API has scope read, 7 days, and never the token itself', t.scope === 'read' && Math.round(days) === 7
        && !JSON.stringify(list.data).includes(readToken), JSON.stringify(t));
  });
  await step('Tokens: the read-scoped token reads but cannot write', async () => {
    const get = await api(readToken, 'GET', '/api/v1/environments');
    const post = await api(readToken, 'POST', '/api/v1/environments', { name: 'nope', base_image: IMAGE, network: 'off' });
    const tok = await api(readToken, 'POST', '/api/v1/tokens', { name: 'more', scope: 'read' });
    return check('  GET → 200', get.status === 200, JSON.stringify(get).slice(0, 200))
      && check('  POST an environment → 403 this token may only read', post.status === 403 && post.data.message === 'this token may only read (scope read)', JSON.stringify(post))
      && check('  POST a token → 403', tok.status === 403 && tok.data.message === 'this token may only read (scope read)', JSON.stringify(tok));
  });
  await step('Tokens: an expiry of 0 days and the admin scope without an admin token are refused next to their fields', async () => {
    await page.fill('#t-name', 'zero');
    await page.selectOption('#t-scope', 'write');
    await page.fill('#t-expires', '0');
    await page.click('[data-testid=token-create]');
    await fieldError('#t-expires').waitFor();
    const f = await fieldError('#t-expires').getAttribute('data-field');
    await page.fill('#t-expires', '');
    await page.fill('#t-name', '');
    const list = await api(ROOT, 'GET', '/api/v1/tokens');
    return check('  the error names expires_in_days', f === 'expires_in_days', f)
      && check('  nothing was created', !(list.data.tokens || []).some((x) => x.name === 'zero'));
  });
  await step('Tokens: signed in with the read token, the page shows the API\'s refusal to create one', async () => {
    await signInAs(readToken, 'root');
    const role = await page.textContent('[data-testid=who-role]');
    await page.click('.tab[data-tab=tokens]');
    await page.fill('#t-name', 'from a reader');
    await page.click('[data-testid=token-create]');
    const banner = page.locator('[data-testid=token-form-error]');
    await banner.filter({ hasText: 'only read' }).waitFor();
    await shot('14-read-token-refused');
    return check('  a read token acts as no admin', role === 'user', role)
      && check('  the banner holds the 403', /this token may only read \(scope read\)/.test(await banner.textContent()));
  });
  await step('Tokens: root revokes it; the row goes and the token gets 401', async () => {
    await signInAs(ROOT, 'root');
    await page.click('.tab[data-tab=tokens]');
    await tokenRow('dash reader').locator('[data-testid=token-revoke]').click();
    await tokenRow('dash reader').waitFor({ state: 'detached' });
    const r = await api(readToken, 'GET', '/api/v1/me');
    return check('  401 unknown API token', r.status === 401 && r.data.message === 'unknown API token', JSON.stringify(r));
  });

  await step('Repositories: a bad protected-branch glob is shown next to the list', async () => {
    await page.click('.tab[data-tab=repos]');
    await repoRow(REPO).waitFor();
    await page.click('[data-testid=repo-new]');
    await page.locator('#repo-drawer').waitFor();
    await page.fill('#r-name', NEWREPO);
    await page.fill('#r-protected', 'release/*\nbad..name');
    await page.click('[data-testid=repo-save]');
    await fieldError('#r-protected').waitFor();
    const f = await fieldError('#r-protected').getAttribute('data-field');
    const r = await api(ROOT, 'GET', '/api/v1/repos/' + NEWREPO);
    return check('  the error names protected_branches[1]', f === 'protected_branches[1]', f)
      && check('  nothing was registered', r.status === 404, JSON.stringify(r));
  });
  await step('Repositories: register it (private, main, release/* and hotfix/*); the drawer turns to its members', async () => {
    await page.fill('#r-protected', 'release/*\nhotfix/*');
    await page.click('[data-testid=repo-save]');
    await page.locator('#repo-drawer-title', { hasText: `Edit ${NEWREPO}` }).waitFor();
    await page.locator('#r-members-box').waitFor();
    await repoRow(NEWREPO).waitFor();
    const r = await api(ROOT, 'GET', '/api/v1/repos/' + NEWREPO);
    return check('  the API has it', r.status === 200 && r.data.visibility === 'private' && r.data.default_branch === 'main'
      && JSON.stringify(r.data.protected_branches) === '["release/*","hotfix/*"]' && r.data.archived === false, JSON.stringify(r.data));
  });
  await step('Repositories: add dave as a writer; an unknown user is shown next to the user field', async () => {
    await page.fill('#m-user', DAVE);
    await page.selectOption('#m-role', 'write');
    await page.click('[data-testid=m-add]');
    await memberRow(DAVE).waitFor();
    await page.fill('#m-user', 'nobody');
    await page.click('[data-testid=m-add]');
    const msg = await fieldError('#m-user').textContent();
    await page.fill('#m-user', '');
    const m = await api(ROOT, 'GET', `/api/v1/repos/${NEWREPO}/members/${DAVE}`);
    const sbx = await api(daveToken, 'GET', `/api/v1/repos/${NEWREPO}`);
    return check('  the API has dave as write', m.status === 200 && m.data.role === 'write', JSON.stringify(m))
      && check('  dave sees the private repository with his role', sbx.status === 200 && sbx.data.role === 'write', JSON.stringify(sbx))
      && check('  404 no user next to the field', msg === "no user 'nobody'", msg);
  });
  await step('Repositories: change dave to read; add alice as a repository admin', async () => {
    await memberRow(DAVE).locator('[data-testid=member-role]').selectOption('read');
    await page.locator('[data-testid=toast]', { hasText: `${DAVE} is read in ${NEWREPO}` }).waitFor();
    await page.fill('#m-user', 'alice');
    await page.selectOption('#m-role', 'admin');
    await page.click('[data-testid=m-add]');
    await memberRow('alice').waitFor();
    await shot('15-repo-members');
    const m = await api(ROOT, 'GET', `/api/v1/repos/${NEWREPO}/members`);
    return check('  the API has dave read, alice admin', JSON.stringify(m.data.members) === '[{"user":"alice","role":"admin"},{"user":"dave","role":"read"}]', JSON.stringify(m.data));
  });
  await step('Repositories: archive it; the list says archived and the API refuses its sandboxes', async () => {
    await page.check('#r-archived');
    await page.click('[data-testid=repo-save]');
    await page.locator('#repo-drawer').waitFor({ state: 'hidden' });
    await repoRow(NEWREPO).locator('[data-testid=repo-archived]').waitFor();
    await shot('16-repos');
    const r = await api(ROOT, 'GET', '/api/v1/repos/' + NEWREPO);
    // Without Docker sandboxes are off (503) before any repository is looked at.
    const sbx = SANDBOXES ? await api(ALICE, 'POST', `/api/v1/repos/${NEWREPO}/sandboxes`, {}) : null;
    return check('  the API has archived, the rest kept', r.data.archived === true && r.data.protected_branches.length === 2, JSON.stringify(r.data))
      && (!SANDBOXES || check('  a sandbox there → 403 repository is archived (read-only)', sbx.status === 403 && sbx.data.message === 'repository is archived (read-only)', JSON.stringify(sbx)));
  });
  await step('Repositories: alice, an admin of it, manages its members but not its settings', async () => {
    await signInAs(ALICE, 'alice');
    await page.click('.tab[data-tab=repos]');
    await repoRow(NEWREPO).waitFor();
    const register = await page.locator('[data-testid=repo-new]').isVisible();
    const label = await repoRow(NEWREPO).locator('[data-testid=repo-open]').textContent();
    await repoRow(NEWREPO).locator('[data-testid=repo-open]').click();
    await memberRow(DAVE).waitFor();
    const settingsLocked = await page.locator('#r-visibility').isDisabled() && await page.locator('#r-archived').isDisabled()
      && await page.locator('[data-testid=repo-save]').isHidden();
    await shot('17-alice-repo-admin');
    await memberRow(DAVE).locator('[data-testid=member-remove]').click();
    await memberRow(DAVE).waitFor({ state: 'detached' });
    const m = await api(ROOT, 'GET', `/api/v1/repos/${NEWREPO}/members/${DAVE}`);
    await page.click('#repo-drawer-cancel');
    return check('  no Register button, Members instead of Edit', !register && label === 'Members', `${register} ${label}`)
      && check('  the settings are read only', settingsLocked)
      && check('  dave removed: 404 no member', m.status === 404 && m.data.message === `no member '${DAVE}'`, JSON.stringify(m));
  });
  await step('Repositories: in a repository where alice writes, she only views the members', async () => {
    const label = await repoRow(REPO).locator('[data-testid=repo-open]').textContent();
    const role = await repoRow(REPO).locator('[data-testid=repo-role]').textContent();
    await repoRow(REPO).locator('[data-testid=repo-open]').click();
    await memberRow('alice').waitFor();
    const add = await page.locator('#r-member-add').isVisible();
    const selects = await page.locator('#r-members select').count();
    const removes = await page.locator('#r-members [data-testid=member-remove]').count();
    await page.keyboard.press('Escape');
    await page.locator('#repo-drawer').waitFor({ state: 'hidden' });
    return check('  View, role write', label === 'View' && role === 'write', `${label} ${role}`)
      && check('  no add form, no role selects, no Remove', !add && selects === 0 && removes === 0, `${add} ${selects} ${removes}`);
  });
  await step('the environments page is still the first after all this', async () => {
    await page.click('.tab[data-tab=environments]');
    await row('global', ENV_NAME).waitFor();
    await page.click('[data-testid=sign-out]');
    await page.locator('#signin').waitFor();
    return (await page.locator('[data-testid=user-once]').isHidden()) && (await page.locator('[data-testid=token-once]').isHidden());
  });

} catch (e) {
  thrown = e;
}
await finish(thrown);
