// SPDX-License-Identifier: Apache-2.0
// tests/browser/dashboard_audit.mjs - the dashboard's audit page (docs/reference/api.md §5.6, §5.7;
// control/web/dashboard/audit.js) in headless Chromium, run by tests/integration/dashboard_audit.sh
// (the setting: tests/support/dashboard.sh). Static clients bound to a global environment are
// refused by the proxy; the filters show only matching lines (decision, host, client, time range,
// a bad range's error next to its field, the hash keeping them across a reload); the grouped view
// counts the refusals of one host and method as one group with its suggested rule; root's "Add
// rule" shows the environment and the rule, applies it on confirm, and the proxy then lets the
// request through; alice's group in that global environment has no Add button (with Docker);
// the page fits 390 and 1440 px with every rule inside its card. Prints TAP-style lines and exits
// 1 when any step failed. Every wait is bounded.
import {
  ALICE, BASE, HTTP_PORT, IMAGE, REPO, ROOT, SANDBOXES, TLS_PORT,
  api, check, finish, fitsWidth, hex, page, proxyCurl, shot, signIn, step, until,
} from './harness.mjs';

const ENV_NAME = 'daudit-web';
const ALLOWED = `a.sluice.test:${TLS_PORT}`;
const REFUSED = 'b.sluice.test';
const OTHER = 'c.sluice.test';
const RULE = { host: `${REFUSED}:${HTTP_PORT}`, methods: ['GET'] };

// A time as a datetime-local input's value, in the browser's (and this process's) time zone.
const p2 = (n) => String(n).padStart(2, '0');
const localInput = (ms) => {
  const d = new Date(ms);
  return `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())}T${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}`;
};

const rows = () => page.locator('#audit tr[data-testid=audit-row]');
// Resolves once the page has shown the groups again (audit.js counts its loads in data-loads);
// started before the click that reloads them.
async function groupsLoaded() {
  const before = Number(await page.locator('#audit-groups').getAttribute('data-loads') || 0);
  return async () => page.waitForFunction((n) => Number(document.getElementById('audit-groups').dataset.loads || 0) > n,
    before, { timeout: 10000 });
}
const groupRow = (host, method) => page.locator(`#audit-groups tr[data-testid=group-row][data-host="${host}"][data-method="${method}"]`);

// The attribute `name` of every line shown.
const shown = (name) => rows().evaluateAll((trs, n) => trs.map((t) => t.getAttribute(n)), name);

// Applies the filters given (the others cleared) through the form.
async function filter(f) {
  await page.click('[data-testid=af-clear]');
  if (f.client !== undefined) await page.fill('#af-client', f.client);
  if (f.decision !== undefined) await page.selectOption('#af-decision', f.decision);
  if (f.reason !== undefined) await page.fill('#af-reason', f.reason);
  if (f.host !== undefined) await page.fill('#af-host', f.host);
  if (f.since !== undefined) await page.fill('#af-since', f.since);
  if (f.until !== undefined) await page.fill('#af-until', f.until);
  await page.click('[data-testid=af-apply]');
}

// Waits until every line shown passes `ok` (and at least `min` are shown).
async function linesUntil(what, ok, min = 1) {
  return until(what, async () => {
    const n = await rows().count();
    if (n < min) return null;
    const all = await rows().evaluateAll((trs) => trs.map((t) => ({
      host: t.getAttribute('data-host'), client: t.getAttribute('data-client'), decision: t.getAttribute('data-decision'),
    })));
    return all.every(ok) ? all : null;
  }, 10000);
}

// Every suggested rule, table and preview of the audit page inside its card, no table scrolled
// sideways inside its card: [] or what sticks out. On a phone (`scrollOk`) a table may scroll
// sideways inside its .table-wrap (the layout of wide tables at 640 px and narrower): then the
// wrap must be inside its card, and what is in it is reached by scrolling the wrap.
const outOfCard = (scrollOk) => page.evaluate((scrollOk) => {
  const bad = [];
  const scrolls = (w) => w && w.scrollWidth > w.clientWidth + 1;
  for (const e of document.querySelectorAll('#view-audit .suggestion, #view-audit [data-testid=group-rule], #view-audit pre.rule-json, #view-audit table, #view-audit .table-wrap')) {
    if (!e.offsetParent) continue;
    if (scrollOk && scrolls(e.parentElement.closest('.table-wrap'))) continue;
    const card = e.closest('.card').getBoundingClientRect();
    const r = e.getBoundingClientRect();
    if (r.left < card.left - 0.5 || r.right > card.right + 0.5) {
      bad.push(`${e.tagName}.${e.className} [${Math.round(r.left)}, ${Math.round(r.right)}] outside card [${Math.round(card.left)}, ${Math.round(card.right)}]`);
    }
  }
  for (const w of document.querySelectorAll('#view-audit .table-wrap')) {
    if (!scrollOk && w.offsetParent && scrolls(w)) bad.push(`a table scrolls in its card: ${w.scrollWidth} > ${w.clientWidth}`);
  }
  return bad;
}, scrollOk);

// What sticks out past the right edge of a `width`-pixel page, outermost first (for the detail
// of a failed fit): "header.topbar > nav.tabs" ...
const sticksOut = (width) => page.evaluate((w) => {
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    if (!e.offsetParent || e.getBoundingClientRect().right <= w + 0.5) continue;
    if (out.some((o) => o.contains(e))) continue;
    out.push(e);
  }
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '');
  return out.slice(0, 5).map((e) => (e.parentElement ? name(e.parentElement) + ' > ' : '') + name(e));
}, width);

// The page at `width` px: no horizontal scroll of the page, nothing of the audit view past the
// viewport, every rule and table inside its card.
async function layoutAt(width, name) {
  const fit = await fitsWidth(width);
  await page.waitForTimeout(300);
  const phone = width <= 640;
  const bad = await outOfCard(phone);
  // Past the viewport, except what a scrolling .table-wrap clips on a phone.
  const viewOut = await page.evaluate(([w, phone]) => [...document.querySelectorAll('#view-audit *')]
    .filter((e) => e.offsetParent && e.getBoundingClientRect().right > w + 0.5)
    .filter((e) => {
      const wrap = e.closest('.table-wrap');
      return !(phone && wrap && wrap !== e && wrap.scrollWidth > wrap.clientWidth + 1);
    })
    .slice(0, 5).map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)), [width, phone]);
  await shot(name);
  const a = check(`  ${width} px: no horizontal page scroll`, fit.fits, JSON.stringify(fit) + ' sticking out: ' + (await sticksOut(width)).join(', '));
  const b = check(`  ${width} px: nothing of the audit view past the viewport`, viewOut.length === 0, viewOut.join(', '));
  const c = check(`  ${width} px: every rule and table inside its card`, bad.length === 0, bad.join('\n'));
  return a && b && c;
}

let thrown;
let client = null;
let other = null;
try {
  await page.goto(BASE + '/dashboard/');
  await signIn(ROOT);
  await page.locator('#who').waitFor();

  // ---- the setting: a global environment, two static clients, refusals ------------------------
  await step('root creates a global environment that allows a.sluice.test only, and two static clients in it', async () => {
    const e = await api(ROOT, 'POST', '/api/v1/environments', {
      name: ENV_NAME, scope: 'global', base_image: IMAGE, network: 'on',
      egress: { default: 'deny', rules: [{ host: ALLOWED }] },
    });
    if (e.status !== 201) throw new Error(`POST environment: ${e.status} ${JSON.stringify(e.data)}`);
    const c1 = await api(ROOT, 'POST', '/api/v1/clients', { id: 'daudit-ci', token: true, environment: ENV_NAME });
    const c2 = await api(ROOT, 'POST', '/api/v1/clients', { id: 'daudit-other', token: true, environment: ENV_NAME });
    if (c1.status !== 201 || c2.status !== 201) throw new Error(`POST clients: ${c1.status} ${c2.status}`);
    client = c1.data;
    other = c2.data;
    // The snapshot with the clients reaches the proxy within a moment.
    await until('the proxy knows the clients', async () => proxyCurl('daudit-ci', client.token, `https://${ALLOWED}/echo`).code === '200'
      && proxyCurl('daudit-other', other.token, `https://${ALLOWED}/echo`).code === '200');
    return true;
  });

  const before = Date.now() - 2000;
  await step('the proxy refuses 3 GETs and a POST to b.sluice.test, and a GET to c.sluice.test by the other client (403 host-not-allowed)', async () => {
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push(proxyCurl('daudit-ci', client.token, `http://${REFUSED}:${HTTP_PORT}/get-${i}-${hex(3)}`));
    codes.push(proxyCurl('daudit-ci', client.token, `http://${REFUSED}:${HTTP_PORT}/post-${hex(3)}`, ['-X', 'POST', '-d', 'x=1']));
    codes.push(proxyCurl('daudit-other', other.token, `http://${OTHER}:${HTTP_PORT}/other-${hex(3)}`));
    return check('  all 403 host-not-allowed', codes.every((c) => c.code === '403' && c.reason === 'host-not-allowed'),
      codes.map((c) => c.out.slice(0, 200)).join('\n'));
  });
  const after = Date.now() + 2000;
  await until('the refusals are in the audit log', async () => {
    const r = await api(ROOT, 'GET', '/api/v1/audit?decision=deny&limit=500');
    return (r.data.entries || []).length >= 5;
  });

  // ---- the filters --------------------------------------------------------------------------------
  await step('the audit page shows every decision unfiltered (allows too)', async () => {
    await page.click('.tab[data-tab=audit]');
    const all = await linesUntil('lines shown', () => true, 6);
    return check('  both allows and denies', all.some((l) => l.decision === 'allow') && all.some((l) => l.decision === 'deny'), JSON.stringify(all));
  });
  await step('decision deny shows refusals only; with reason host-not-allowed, exactly the 5 made', async () => {
    await filter({ decision: 'deny' });
    const denies = await linesUntil('only denies', (l) => l.decision === 'deny', 5);
    await filter({ decision: 'deny', reason: 'host-not-allowed' });
    const all = await linesUntil('only host-not-allowed', (l) => l.decision === 'deny' && l.host !== 'a.sluice.test', 5);
    return check('  denies only', denies.length >= 5, JSON.stringify(denies))
      && check('  the 5 refusals', all.length === 5, JSON.stringify(all));
  });
  await step('host "B.SLUICE" (any case) shows b.sluice.test only; the filter is kept in the hash, across a reload', async () => {
    await filter({ host: 'B.SLUICE' });
    const all = await linesUntil('only b', (l) => l.host === REFUSED, 4);
    const hash = await page.evaluate(() => location.hash);
    await page.reload();
    await page.locator('#who').waitFor();
    const kept = await page.inputValue('#af-host');
    const again = await linesUntil('only b after the reload', (l) => l.host === REFUSED, 4);
    await shot('audit-1-host-filter');
    return check('  4 lines of b.sluice.test', all.length === 4, JSON.stringify(all))
      && check('  #audit?host=B.SLUICE in the hash', hash === '#audit?host=B.SLUICE', hash)
      && check('  the reload keeps the filter', kept === 'B.SLUICE' && again.length === 4, `${kept} ${again.length}`);
  });
  await step('client daudit-other shows its line only', async () => {
    await filter({ client: 'daudit-other' });
    const all = await linesUntil('only the other client', (l) => l.client === 'daudit-other', 1);
    return check('  only daudit-other, its refusal among them', all.some((l) => l.host === OTHER), JSON.stringify(all));
  });
  await step('a time range: the refusals inside it; none after them', async () => {
    await filter({ reason: 'host-not-allowed', since: localInput(before), until: localInput(after) });
    const inside = await linesUntil('the refusals in the range', (l) => l.decision === 'deny', 5);
    await filter({ reason: 'host-not-allowed', since: localInput(after), until: localInput(after + 3600000) });
    await page.locator('#audit-empty').filter({ hasText: 'No decisions match' }).waitFor({ timeout: 10000 });
    return check('  5 inside', inside.length === 5, JSON.stringify(inside))
      && check('  none after', (await rows().count()) === 0);
  });
  await step('a range that ends before it starts is refused, the error next to "To"', async () => {
    await filter({ since: localInput(after), until: localInput(before) });
    const err = page.locator('#af-until + .field-error');
    await err.waitFor({ timeout: 10000 });
    const text = await err.textContent();
    const banner = await page.locator('[data-testid=audit-filter-error]').textContent();
    await shot('audit-2-bad-range');
    return check('  "must be a time after since" at the field', text === 'must be a time after since', text)
      && check('  the banner names until', banner.startsWith('until: '), banner);
  });

  // ---- grouped refusals ------------------------------------------------------------------------
  await step('Grouped refusals: GET b.sluice.test is one group of 3 with its rule; POST another of 1', async () => {
    await page.click('[data-testid=af-clear]');
    await page.click('[data-testid=audit-show-groups]');
    const get = groupRow(REFUSED, 'GET');
    await get.waitFor({ timeout: 10000 });
    const count = await get.locator('[data-testid=group-count]').textContent();
    const rule = await get.locator('[data-testid=group-rule]').textContent();
    const postCount = await groupRow(REFUSED, 'POST').locator('[data-testid=group-count]').textContent();
    const counts = (await page.locator('#audit-groups [data-testid=group-count]').allTextContents()).map(Number);
    const hash = await page.evaluate(() => location.hash);
    return check('  count 3', count === '3', count)
      && check('  the rule', JSON.stringify(JSON.parse(rule)) === JSON.stringify(RULE), rule)
      && check('  POST: its own group, count 1', postCount === '1', postCount)
      && check('  the most refused first', counts.every((n, i) => i === 0 || counts[i - 1] >= n), JSON.stringify(counts))
      && check('  the view is kept in the hash', hash === '#audit?view=groups', hash);
  });
  await step('the page fits 390 and 1440 px, every suggested rule inside its card (grouped, then lines)', async () => {
    const results = [await layoutAt(1440, 'audit-3-groups-1440'), await layoutAt(390, 'audit-4-groups-390')];
    await page.click('[data-testid=audit-show-lines]');
    await page.locator('#audit [data-testid=audit-suggestion]').first().waitFor({ timeout: 10000 });
    results.push(await layoutAt(390, 'audit-5-lines-390'), await layoutAt(1440, 'audit-6-lines-1440'));
    await page.setViewportSize({ width: 1360, height: 900 });
    const shownAgain = await groupsLoaded();
    await page.click('[data-testid=audit-show-groups]');
    await shownAgain();
    return results.every(Boolean);
  });
  await step('root: "Add rule" shows the environment and the rule first, and changes nothing yet', async () => {
    await groupRow(REFUSED, 'GET').locator('[data-testid=group-apply]').click();
    const box = page.locator('[data-testid=apply-preview]');
    await box.waitFor();
    const env = await box.locator('[data-testid=apply-env]').textContent();
    const rule = await box.locator('[data-testid=apply-rule]').textContent();
    const stored = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    await shot('audit-7-apply-preview');
    const bad = await outOfCard();
    // A reload of the groups (here the refresh button) keeps the open preview, its rule unchanged.
    const reloaded = await groupsLoaded();
    await page.click('[data-testid=audit-groups-refresh]');
    await reloaded();
    const kept = await page.locator('#audit-groups [data-testid=apply-preview]').count();
    const keptRule = kept === 1 ? await box.locator('[data-testid=apply-rule]').textContent() : '';
    return check('  the environment', env === ENV_NAME, env)
      && check('  exactly the rule', JSON.stringify(JSON.parse(rule)) === JSON.stringify(RULE), rule)
      && check('  not applied yet', !stored.data.egress.rules.some((r) => r.host === RULE.host), JSON.stringify(stored.data.egress))
      && check('  the preview inside its card', bad.length === 0, bad.join('\n'))
      && check('  a reload of the groups keeps it open', kept === 1 && keptRule === rule, `${kept} ${keptRule}`);
  });
  await step('confirm: the page says so, the environment has the rule, the proxy lets the GET through', async () => {
    await page.click('[data-testid=apply-confirm]');
    const done = page.locator('[data-testid=apply-done]');
    await done.waitFor({ timeout: 10000 });
    const text = await done.textContent();
    const stored = await api(ROOT, 'GET', '/api/v1/environments/' + ENV_NAME);
    const rule = stored.data.egress.rules.find((r) => r.host === RULE.host);
    const c = await until('the proxy allows the GET', async () => {
      const x = proxyCurl('daudit-ci', client.token, `http://${REFUSED}:${HTTP_PORT}/hello`);
      return x.code === '200' ? x : null;
    });
    await page.click('[data-testid=audit-groups-refresh]');
    await groupRow(REFUSED, 'GET').locator('[data-testid=group-no-rule]').waitFor({ timeout: 10000 });
    await shot('audit-8-applied');
    return check('  "Added ... to environment daudit-web."', text === `Added ${JSON.stringify(RULE)} to environment ${ENV_NAME}.`, text)
      && check('  the stored rule', rule && JSON.stringify(rule.methods) === '["GET"]', JSON.stringify(stored.data.egress))
      && check('  200 through the proxy', c.code === '200', c.out.slice(0, 300));
  });

  // ---- alice on a global environment --------------------------------------------------------------
  if (!SANDBOXES) {
    console.log('# skip alice\'s grouped refusals (a sandbox of hers in the global environment): no Docker');
  } else {
    const sb = await api(ALICE, 'POST', `/api/v1/repos/${REPO}/sandboxes`, { environment: ENV_NAME });
    if (!check('alice creates a sandbox in the global environment (API)', sb.status === 201, JSON.stringify(sb.data))) {
      console.log('# alice\'s steps cannot run: no sandbox');
    } else {
      const id = sb.data.id;
      await step('alice\'s refused POST is a group with its rule but no Add button (can_apply false)', async () => {
        const r = await api(ALICE, 'POST', `/api/v1/repos/${REPO}/sandboxes/${id}/exec`,
          { cmd: `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST http://${REFUSED}:${HTTP_PORT}/from-sandbox` });
        if (!(r.status === 200 && r.data.stdout === '403')) throw new Error('the sandbox request was not refused: ' + JSON.stringify(r.data));
        const g = await until('alice\'s group', async () => {
          const x = await api(ALICE, 'GET', `/api/v1/audit/refusals?client=${id}`);
          return (x.data.groups || []).find((y) => y.method === 'POST') || null;
        });
        await page.click('[data-testid=sign-out]');
        await signIn(ALICE);
        await page.locator('#who').waitFor();
        await page.click('.tab[data-tab=audit]');
        await page.click('[data-testid=audit-show-groups]');
        const row = groupRow(REFUSED, 'POST');
        await row.waitFor({ timeout: 10000 });
        const buttons = await row.locator('[data-testid=group-apply]').count();
        const why = await row.locator('[data-testid=group-no-apply]').textContent();
        const rule = await row.locator('[data-testid=group-rule]').textContent();
        const others = await page.locator('#audit-groups tr[data-testid=group-row]').count();
        await shot('audit-9-alice');
        return check('  the API: can_apply false, the rule extends the GET rule', g.can_apply === false
            && JSON.stringify(g.rule) === JSON.stringify({ host: RULE.host, methods: ['POST'] }) && g.extends === RULE.host, JSON.stringify(g))
          && check('  no Add button, and why', buttons === 0 && why.startsWith('You may not change ' + ENV_NAME), `${buttons} ${why}`)
          && check('  the rule is shown', JSON.parse(rule).host === RULE.host, rule)
          && check('  only her sandbox\'s refusals', others === 1, String(others));
      });
      const closed = await api(ALICE, 'POST', `/api/v1/repos/${REPO}/sandboxes/${id}/close`);
      check('alice\'s sandbox closed', closed.status === 204, JSON.stringify(closed.data));
    }
  }
} catch (e) {
  thrown = e;
}
await finish(thrown);
