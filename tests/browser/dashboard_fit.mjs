// SPDX-License-Identifier: Apache-2.0
// tests/browser/dashboard_fit.mjs - the dashboard fits every screen and passes axe-core (issue 20,
// items 5 and 6). Run by tests/integration/dashboard_fit.sh (tests/support/dashboard.sh's setting).
// At 390x844 and 1440x900, as root and then as alice, every tab button of the nav (whatever pages
// there are: the `.tab` elements the user is shown) and the environment drawer: a screenshot, the
// page no wider than the screen, each tab and Sign out reachable (in view, or scrolled into view
// inside the nav) and clickable, and no serious or critical axe-core violation. Then the
// environment form's CPUs and memory (Default / Custom, a value with a MiB or GiB unit) against
// what the API stores, and its egress section shown only while the network is on.
// Prints TAP-style lines and exits 1 when a check failed. Every wait is bounded.
import { readFileSync } from 'node:fs';
import {
  ALICE, BASE, HTTP_PORT, IMAGE, ROOT, STEP_MS, api, check, finish, fitsWidth, hex, notOk, page, proxyCurl, shot, signIn,
  sleep, step, until,
} from './harness.mjs';

const SIZES = [[390, 844], [1440, 900]];
const ENV_NAME = 'fit-' + hex(4);
const RULE_HOST = 'a.sluice.test';

let AXE = null;
try {
  AXE = readFileSync(new URL('./node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
} catch (e) {
  notOk('axe-core is installed (npm ci in tests/browser)', e.message);
}

// axe-core is evaluated in the page through the DevTools protocol, which the page's CSP
// (script-src 'self') does not govern: the page itself runs under its CSP as ever, and a
// <script> the test added would be refused (and reported as a violation).
async function axeScan(what) {
  if (!AXE) return false;
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 4).map((n) => n.target.join(' ') + ': ' + (n.failureSummary || '').replace(/\s+/g, ' ')),
    }));
  });
  const text = (v) => `${v.impact} ${v.id} (${v.help})\n  ${v.nodes.join('\n  ')}`;
  const bad = found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  for (const v of found.filter((x) => !bad.includes(x))) console.log(`# axe, ${what}: ${text(v).split('\n').join('\n#   ')}`);
  return check(`  ${what}: axe-core finds no serious or critical violation`, bad.length === 0, bad.map(text).join('\n'));
}

// Every tab button the user is shown and Sign out (with a drawer open: its buttons, the page
// behind being inert): scrolled into view (inside the nav when the tabs do not fit), then within
// the screen's width and hit by a click at their middle.
const TOPBAR = '#tabs .tab:visible, [data-testid=sign-out]';
async function reachable(what, width, selector) {
  const items = page.locator(selector);
  const n = await items.count();
  const missed = [];
  for (let i = 0; i < n; i++) {
    const b = items.nth(i);
    const name = (await b.textContent()).trim();
    try {
      await b.scrollIntoViewIfNeeded({ timeout: 3000 });
      await b.click({ trial: true, timeout: 3000 });
      const box = await b.boundingBox();
      if (!box || box.x < 0 || box.x + box.width > width) missed.push(`${name} at ${JSON.stringify(box)}`);
    } catch (e) {
      missed.push(`${name}: ${e.message.split('\n')[0]}`);
    }
  }
  // Back to the start of the bar (a later screenshot shows it as a user first sees it).
  await page.evaluate(() => { document.getElementById('tabs').scrollLeft = 0; });
  const names = selector === TOPBAR ? `${n - 1} tabs and Sign out` : `its ${n} buttons`;
  return check(`  ${what}: ${names} reachable and clickable`, n > 1 && missed.length === 0, missed.join('\n'));
}

// The checks of one screen state.
async function screen(w, h, who, name, selector = TOPBAR) {
  const what = `${w}px ${who} ${name}`;
  await shot(`${w}-${who}-${name}`);
  const f = await fitsWidth(w, h);
  const fits = check(`  ${what}: the page is no wider than the screen`, f.fits, `scrollWidth ${f.scrollWidth} > ${f.width}`);
  const reach = await reachable(what, w, selector);
  const clean = await axeScan(what);
  return fits && reach && clean;
}

// The lists of a tab have come (or said why not): no request of the page open for a moment.
// Bounded like any step (STEP_MS), not tighter: a tab's list can wait on the Docker daemon (the
// sandboxes), which other tests keep busy when they run beside this one.
let pending = 0;
page.on('request', () => { pending++; });
page.on('requestfinished', () => { pending--; });
page.on('requestfailed', () => { pending--; });
async function settled() {
  await sleep(300);
  await until('the page has no request open', () => pending <= 0, STEP_MS);
  await sleep(200);
}

async function everyScreen(w, h, who, token) {
  await step(`${w}px: ${who} signs in`, async () => {
    await page.setViewportSize({ width: w, height: h });
    await page.goto(BASE + '/dashboard/');
    await signIn(token);
    await page.locator('[data-testid=who-name]', { hasText: who }).waitFor();
    return true;
  });
  const tabs = await page.locator('#tabs .tab').evaluateAll((bs) => bs.filter((b) => !b.hidden && b.checkVisibility()).map((b) => b.dataset.tab));
  check(`${w}px ${who}: the nav shows tabs (${tabs.join(', ')})`, tabs.length >= 5, tabs.join(', '));
  for (const tab of tabs) {
    await step(`${w}px ${who}: the ${tab} tab fits, is reachable and passes axe-core`, async () => {
      const b = page.locator(`#tabs .tab[data-tab="${tab}"]`);
      await b.scrollIntoViewIfNeeded();
      await b.click();
      await page.locator(`#view-${tab}`).waitFor();
      if ((await b.getAttribute('aria-current')) !== 'page') throw new Error(`the ${tab} tab is not aria-current=page`);
      await settled();
      return screen(w, h, who, tab);
    });
  }
  await step(`${w}px ${who}: the environment drawer fits, is a modal dialog with the focus, and passes axe-core`, async () => {
    await page.click('#tabs .tab[data-tab=environments]');
    await settled();
    await page.click('[data-testid=env-new]');
    await page.locator('#drawer').waitFor();
    const dialog = await page.evaluate(() => {
      const d = document.getElementById('drawer');
      return {
        role: d.getAttribute('role'), modal: d.getAttribute('aria-modal'),
        label: (document.getElementById(d.getAttribute('aria-labelledby')) || {}).textContent,
        focusInside: d.contains(document.activeElement), focused: document.activeElement.id,
        inert: document.querySelector('main').inert,
      };
    });
    const box = await page.locator('#drawer').boundingBox();
    const good = check('  role=dialog, aria-modal, labelled by its title', dialog.role === 'dialog' && dialog.modal === 'true' && dialog.label === 'New environment', JSON.stringify(dialog))
      && check('  the focus is in the drawer (its name) and the page behind is inert', dialog.focusInside && dialog.focused === 'f-name' && dialog.inert, JSON.stringify(dialog))
      && check(`  the drawer is ${w <= 640 ? 'the full width' : 'within the screen'}`, box && box.x >= 0 && box.x + box.width <= w + 0.5 && (w > 640 || box.width >= w - 0.5), JSON.stringify(box));
    const fits = await screen(w, h, who, 'env-drawer', '#drawer .drawer-head button, #drawer .drawer-foot button');
    await page.keyboard.press('Escape');
    await page.locator('#drawer').waitFor({ state: 'hidden' });
    const back = await page.evaluate(() => document.activeElement && document.activeElement.dataset.testid);
    return good && fits && check('  Escape closes it and the focus is back on New environment', back === 'env-new', back);
  });
  await step(`${w}px ${who}: signs out`, async () => {
    await page.click('[data-testid=sign-out]');
    await page.locator('#signin').waitFor();
    return true;
  });
}

// ---- the environment form --------------------------------------------------------------------

const row = () => page.locator(`#user-envs tr[data-env="${ENV_NAME}"]`);
const stored = async () => (await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME)).data;
async function openEdit() {
  await row().locator('[data-testid=env-edit]').click();
  await page.locator('#drawer').waitFor();
  await page.locator('#drawer-title', { hasText: ENV_NAME }).waitFor();
}
async function save() {
  await page.click('[data-testid=env-save]');
  await page.locator('#drawer').waitFor({ state: 'hidden' });
}
const shown = () => page.evaluate(() => ({
  cpusCustom: document.getElementById('f-cpus-custom').checked,
  cpusDefault: document.getElementById('f-cpus-default').checked,
  cpus: document.getElementById('f-cpus').value,
  memoryCustom: document.getElementById('f-memory-custom').checked,
  memoryDefault: document.getElementById('f-memory-default').checked,
  memory: document.getElementById('f-memory').value,
  unit: document.getElementById('f-memory-unit').value,
}));

async function formSteps(w, h) {
  await step(`${w}px: root signs in for the form`, async () => {
    await page.setViewportSize({ width: w, height: h });
    await signIn(ROOT);
    await page.locator('[data-testid=who-name]', { hasText: 'root' }).waitFor();
    return true;
  });
  await step('a new environment starts with CPUs and memory on Default, their inputs hidden', async () => {
    await page.click('[data-testid=env-new]');
    await page.locator('#drawer').waitFor();
    const s = await shown();
    return check('  both Default', s.cpusDefault && !s.cpusCustom && s.memoryDefault && !s.memoryCustom, JSON.stringify(s))
      && check('  the number inputs are hidden', (await page.locator('#f-cpus').isHidden()) && (await page.locator('#f-memory').isHidden()));
  });
  await step('Custom left empty is asked for next to its input, and nothing is sent', async () => {
    await page.fill('#f-name', ENV_NAME);
    await page.fill('#f-base_image', IMAGE);
    await page.check('#f-cpus-custom');
    await page.click('[data-testid=env-save]');
    const err = page.locator('#f-cpus + .field-error');
    await err.waitFor();
    const r = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    return check('  the message names what to do', /type a value, or choose Default/.test(await err.textContent()))
      && check('  nothing was created', r.status === 404, JSON.stringify(r));
  });
  await step('create with Custom 1.5 CPUs and 2 GiB of memory: the API has cpus 1.5 and memory "2GiB"', async () => {
    await page.fill('#f-cpus', '1.5');
    await page.check('#f-memory-custom');
    await page.fill('#f-memory', '2');
    await page.selectOption('#f-memory-unit', 'GiB');
    await page.selectOption('#f-network', 'on');
    await page.click('[data-testid=f-rule-add]');
    await page.locator('#f-rules tr').nth(0).locator('.r-host').fill(RULE_HOST);
    await shot(`${w}-form-custom`);
    await save();
    await row().waitFor();
    const e = await stored();
    return check('  cpus 1.5, memory "2GiB"', e.cpus === 1.5 && e.memory === '2GiB', JSON.stringify({ cpus: e.cpus, memory: e.memory }));
  });
  await step('edit: the form shows Custom 1.5 CPUs and 2 GiB', async () => {
    await openEdit();
    const s = await shown();
    await shot(`${w}-form-edit`);
    await page.click('#drawer-cancel');
    return check('  Custom, 1.5, 2 GiB', s.cpusCustom && s.cpus === '1.5' && s.memoryCustom && s.memory === '2' && s.unit === 'GiB', JSON.stringify(s));
  });
  await step('memory stored as "1024MiB" shows as 1 GiB; "1536MiB" stays 1536 MiB', async () => {
    const doc = await stored();
    const put = async (memory) => {
      const r = await api(ROOT, 'PUT', '/api/v1/environments/' + ENV_NAME, { ...doc, memory });
      if (r.status !== 200) throw new Error(`PUT memory ${memory}: ${r.status} ${JSON.stringify(r.data)}`);
    };
    await put('1024MiB');
    await openEdit();
    const a = await shown();
    await page.click('#drawer-cancel');
    await put('1536MiB');
    await openEdit();
    const b = await shown();
    await page.click('#drawer-cancel');
    return check('  1024MiB → 1 GiB', a.memory === '1' && a.unit === 'GiB', JSON.stringify(a))
      && check('  1536MiB → 1536 MiB', b.memory === '1536' && b.unit === 'MiB', JSON.stringify(b));
  });
  await step('1.5 GiB typed is sent as "1536MiB"; 0 MiB is the API\'s 422, shown next to the memory input', async () => {
    await openEdit();
    await page.fill('#f-memory', '0');
    await page.selectOption('#f-memory-unit', 'MiB');
    await page.click('[data-testid=env-save]');
    const err = page.locator('#f-memory-value .with-unit + .field-error');
    await err.waitFor();
    const field = await err.getAttribute('data-field');
    const marked = /invalid/.test(await page.locator('#f-memory').getAttribute('class'));
    await shot(`${w}-form-memory-error`);
    await page.fill('#f-memory', '1.5');
    await page.selectOption('#f-memory-unit', 'GiB');
    await save();
    const e = await stored();
    return check('  the 422 names memory and marks its input', field === 'memory' && marked, `${field} ${marked}`)
      && check('  memory "1536MiB"', e.memory === '1536MiB', e.memory);
  });
  await step('memory switched to Default: the API has none, the CPUs are kept', async () => {
    await openEdit();
    await page.check('#f-memory-default');
    const hidden = await page.locator('#f-memory').isHidden();
    await save();
    const e = await stored();
    return check('  the memory input is hidden', hidden)
      && check('  memory null, cpus 1.5', e.memory === null && e.cpus === 1.5, JSON.stringify({ cpus: e.cpus, memory: e.memory }));
  });
  await step('network off hides the egress section; on again, its default and rules are still there', async () => {
    await openEdit();
    const visibleOn = await page.locator('[data-testid=egress-box]').isVisible();
    await page.selectOption('#f-egress-default', 'allow');
    await page.selectOption('#f-network', 'off');
    const hiddenOff = await page.locator('[data-testid=egress-box]').isHidden()
      && await page.locator('#f-egress-default').isHidden() && await page.locator('[data-testid=f-rule-add]').isHidden();
    await shot(`${w}-form-network-off`);
    await page.selectOption('#f-network', 'on');
    const back = await page.locator('[data-testid=egress-box]').isVisible();
    const host = await page.locator('#f-rules tr').nth(0).locator('.r-host').inputValue();
    const dflt = await page.locator('#f-egress-default').inputValue();
    await page.click('#drawer-cancel');
    return check('  shown with the network on', visibleOn)
      && check('  hidden (not just greyed) with it off', hiddenOff)
      && check('  on again: the rule and the default chosen are kept', back && host === RULE_HOST && dflt === 'allow', `${back} ${host} ${dflt}`);
  });
  await step('a credential\'s placeholder variable: shown in its rule, kept when the form saves, changed from the form', async () => {
    const doc = await stored();
    const r = await api(ROOT, 'PUT', '/api/v1/environments/' + ENV_NAME, {
      ...doc, egress: { default: 'deny', rules: [{ host: RULE_HOST, credential: { header: 'Authorization', value: 'Bearer fit-' + hex(8), placeholder_env: 'FIT_API_KEY' } }] },
    });
    if (r.status !== 200) throw new Error(`PUT placeholder: ${r.status} ${JSON.stringify(r.data)}`);
    await openEdit();
    const shownVar = await page.locator('#f-rules [data-testid=rule-placeholder]').first().inputValue();
    await page.fill('#f-description', 'saved by the form');
    await save();
    const e = await stored();
    const cred = ((e.egress && e.egress.rules) || [])[0] || {};
    await openEdit();
    await page.locator('#f-rules [data-testid=rule-placeholder]').first().fill('FIT_OTHER_KEY');
    await save();
    const e2 = await stored();
    const cred2 = ((e2.egress && e2.egress.rules) || [])[0] || {};
    return check('  the rule shows FIT_API_KEY', shownVar === 'FIT_API_KEY', shownVar)
      && check('  placeholder_env FIT_API_KEY and the value kept', e.description === 'saved by the form' && cred.credential
        && cred.credential.placeholder_env === 'FIT_API_KEY' && cred.credential.has_value === true, JSON.stringify(e.egress))
      && check('  changed in the form: FIT_OTHER_KEY, the value still kept', cred2.credential
        && cred2.credential.placeholder_env === 'FIT_OTHER_KEY' && cred2.credential.has_value === true, JSON.stringify(e2.egress));
  });
  await step('a placeholder variable that is no shell name: the API\'s 422 next to it', async () => {
    await openEdit();
    const input = page.locator('#f-rules [data-testid=rule-placeholder]').first();
    await input.fill('not-a-name');
    await page.click('[data-testid=env-save]');
    const err = page.locator('#f-rules [data-testid=field-error], #f-rules .field-error').first();
    await err.waitFor({ timeout: 10000 });
    const invalid = await input.evaluate((n) => n.classList.contains('invalid'));
    const text = await err.textContent();
    await page.keyboard.press('Escape');
    await page.locator('#drawer').waitFor({ state: 'hidden' });
    const e = await stored();
    return check('  marked, with a message', invalid && /placeholder|name|identifier/i.test(text), `${invalid} ${text}`)
      && check('  nothing saved', e.egress.rules[0].credential.placeholder_env === 'FIT_OTHER_KEY', JSON.stringify(e.egress));
  });
  await step('saved with the network off, the API has no egress; the form opens it with the section hidden', async () => {
    await openEdit();
    await page.selectOption('#f-network', 'off');
    await save();
    const e = await stored();
    await openEdit();
    const hidden = await page.locator('[data-testid=egress-box]').isHidden();
    await page.keyboard.press('Escape');
    await page.locator('#drawer').waitFor({ state: 'hidden' });
    return check('  network off, no egress', e.network === 'off' && !e.egress, JSON.stringify({ network: e.network, egress: e.egress }))
      && check('  the section is hidden when the drawer opens', hidden);
  });
}

// Long words the lists must wrap or scroll inside their cards, never the page: an environment
// with a long name, rule host and repository paths, a static client of it refused a host (an
// audit line with a long suggestion), tokens with long names.
async function longContent() {
  await step('long names, hosts, paths and an audit line with a suggestion to show', async () => {
    const name = 'fit-long-' + 'environment-name-'.repeat(5) + hex(3);
    const host = 'a-rather-long-subdomain-' + hex(8) + '.deeply.nested.packages.mirror.example.org';
    const e = await api(ROOT, 'POST', '/api/v1/environments', {
      name, scope: 'global', base_image: IMAGE, network: 'on', description: 'D'.repeat(90),
      egress: { default: 'deny', rules: [{ host, methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] }] },
      repositories: ['some-organisation-with-a-long-name/and-a-repository-with-an-even-longer-name', 'acme/fit-' + hex(3)],
    });
    if (e.status !== 201) throw new Error(`POST environment: ${e.status} ${JSON.stringify(e.data)}`);
    const c = await api(ROOT, 'POST', '/api/v1/clients', { id: 'fit-ci', token: true, environment: name });
    if (c.status !== 201) throw new Error(`POST client: ${c.status} ${JSON.stringify(c.data)}`);
    // Refused once the snapshot with the client reached the proxy (a 407 before).
    await until('the proxy refuses the client a host', async () => {
      const r = proxyCurl('fit-ci', c.data.token, `http://b.sluice.test:${HTTP_PORT}/a/rather/long/path/` + 'segment/'.repeat(12) + hex(4));
      return r.code === '403' ? r : null;
    });
    for (const token of [ROOT, ALICE]) {
      const t = await api(token, 'POST', '/api/v1/tokens', { name: 'a-token-with-a-long-name-for-the-fit-test-' + hex(16), scope: 'read' });
      if (t.status !== 201) throw new Error(`POST token: ${t.status} ${JSON.stringify(t.data)}`);
    }
    await until('the audit line is there', async () => {
      const a = await api(ROOT, 'GET', '/api/v1/audit?limit=20');
      return (a.data.entries || []).some((x) => x.suggestion);
    });
    return true;
  });
}

let thrown;
try {
  await step('the dashboard loads', async () => {
    const res = await page.goto(BASE + '/dashboard/');
    return res.status() === 200;
  });
  await longContent();
  for (const [w, h] of SIZES) {
    await everyScreen(w, h, 'root', ROOT);
    await everyScreen(w, h, 'alice', ALICE);
  }
  await formSteps(390, 844);
} catch (e) {
  thrown = e;
}
await finish(thrown);
