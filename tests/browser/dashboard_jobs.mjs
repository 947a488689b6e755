// SPDX-License-Identifier: Apache-2.0
// tests/browser/dashboard_jobs.mjs - the dashboard's Jobs page (docs/reference/api.md §5.5, §5.6;
// control/web/dashboard/jobs.js) in headless Chromium, run by tests/integration/dashboard_jobs.sh
// (tests/support/dashboard.sh's setting). As root and as alice: the composer lists the
// repositories with their default branch as the ref and, resolving per repository, what each
// gets and why (as GET /api/v1/resolve says); a bad ref's 422 shows next to that repository's
// ref; a batch over two repositories runs in real sandboxes and the list (polled) and the job's
// view show stdout, stderr and exit code 3; a job with a chosen environment records it; a
// schedule `30 2 * * MON-FRI` is previewed (its words and next 5 runs, weekdays at 02:30 UTC)
// before saving, listed with them, disabled from the list (the runs go, the API says enabled
// false), enabled again and deleted; a bad cron's day-of-week message shows next to the cron
// field before saving; at 390 px the page does not scroll sideways. Without Docker the sandbox
// steps print `# skip` and a batch is only seen queued instead. Every wait is bounded.
import {
  ALICE, IMAGE, REPO, ROOT, SANDBOXES,
  api, check, finish, fitsWidth, hex, ok, page, shot, signIn, step, until, BASE,
} from './harness.mjs';

const TAG = hex(4);
const BOUND = 'djobs-bound';
const EXTRA = 'acme/djobs-extra';
const JOB_MS = 180000;
const WEEKDAY_0230 = (ts) => {
  const d = new Date(ts);
  return d.getUTCDay() >= 1 && d.getUTCDay() <= 5 && d.getUTCHours() === 2 && d.getUTCMinutes() === 30
    && d.getUTCSeconds() === 0 && d.getTime() > Date.now();
};

const repoRow = (box, name) => page.locator(`#${box} [data-testid=repo-row][data-repo="${name}"]`);
const jobRow = (id) => page.locator(`#jobs tr[data-job="${id}"]`);
const schedRow = (name) => page.locator(`#schedules tr[data-name="${name}"]`);

// The elements whose right edge is beyond `width` and that no scrolling box (a .table-wrap, a
// <pre>, the top bar's tabs) holds: {what, jobs (inside the Jobs page)}.
async function sticksOut(width) {
  return page.evaluate((w) => {
    const held = (e) => {
      for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX !== 'visible') return true;
      }
      return false;
    };
    const out = [];
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 || r.right <= w + 1 || held(e)) continue;
      out.push({
        what: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '') + ' right ' + Math.round(r.right),
        jobs: !!e.closest('#view-jobs'),
      });
    }
    return out;
  }, width);
}

// The runs listed in `locator` (an <ol> of <li data-ts>), as API times.
async function runsIn(locator) {
  return locator.locator('li').evaluateAll((lis) => lis.map((li) => li.dataset.ts));
}

// The user's jobs whose command holds `mark`, as the API lists them.
async function jobsWith(token, mark) {
  const r = await api(token, 'GET', '/api/v1/jobs?limit=500');
  return (r.data.jobs || []).filter((j) => j.command.includes(mark));
}

async function asUser(who, token) {
  const mark = `jobs-ui-${TAG}-${who}`;
  const SCHED = `nightly-${who}-${TAG}`;

  await step(`${who}: signs in and opens Jobs: the composer lists the repositories, their default branch as the ref`, async () => {
    await signIn(token);
    await page.locator('[data-testid=who-name]', { hasText: who }).waitFor();
    await page.click('.tab[data-tab=jobs]');
    await repoRow('job-repos', REPO).waitFor();
    await repoRow('job-repos', EXTRA).waitFor();
    await repoRow('job-repos', REPO).locator('[data-testid=repo-pick]').check();
    await repoRow('job-repos', EXTRA).locator('[data-testid=repo-pick]').check();
    const refs = [await repoRow('job-repos', REPO).locator('[data-testid=repo-ref]').inputValue(),
      await repoRow('job-repos', EXTRA).locator('[data-testid=repo-ref]').inputValue()];
    const env = await page.locator('#job-env').inputValue();
    return check('  refs main and trunk (each repository\'s default branch)', refs[0] === 'main' && refs[1] === 'trunk', refs.join(' '))
      && check('  the environment picker starts at "Resolve per repository"', env === '' && (await page.locator('#job-env option:checked').textContent()) === 'Resolve per repository', env);
  });

  await step(`${who}: resolving per repository shows what each gets and why, as GET /api/v1/resolve says`, async () => {
    let good = true;
    for (const name of [REPO, EXTRA]) {
      const want = (await api(token, 'GET', '/api/v1/resolve?repo=' + encodeURIComponent(name))).data;
      const line = repoRow('job-repos', name).locator('[data-testid=repo-resolved]');
      await line.locator('[data-testid=resolved-matched-by]').waitFor();
      const env = await line.locator('[data-testid=resolved-env]').textContent();
      const by = await line.locator('[data-testid=resolved-matched-by]').textContent();
      const text = await line.textContent();
      good = check(`  ${name} → ${env} by ${by}`, env === (want.environment ? want.environment.name : '(none)') && by === want.matched_by
        && text.includes(want.matched_by === 'global-binding' ? 'a global environment bound to this repository' : ''), `${text} / ${JSON.stringify(want)}`) && good;
    }
    const website = await repoRow('job-repos', REPO).locator('[data-testid=resolved-env]').textContent();
    return check(`  ${REPO} resolves to ${BOUND} (bound to it)`, website === BOUND, website) && good;
  });

  await step(`${who}: a bad ref: the 422 next to that repository's ref, nothing queued`, async () => {
    const before = (await jobsWith(token, mark)).length;
    await repoRow('job-repos', REPO).locator('[data-testid=repo-ref]').fill('bad ref');
    await page.fill('#job-command', `echo ${mark}`);
    await page.click('[data-testid=job-submit]');
    // acme/djobs-extra comes first (by name): acme/website's ref is repos[1].ref.
    const err = repoRow('job-repos', REPO).locator('[data-testid=field-error][data-field="repos[1].ref"]');
    await err.waitFor();
    const text = await err.textContent();
    const invalid = await repoRow('job-repos', REPO).locator('[data-testid=repo-ref]').evaluate((e) => e.classList.contains('invalid'));
    const other = await repoRow('job-repos', EXTRA).locator('[data-testid=field-error]').count();
    const banner = await page.textContent('[data-testid=job-form-error]');
    const after = (await jobsWith(token, mark)).length;
    await repoRow('job-repos', REPO).locator('[data-testid=repo-ref]').fill('main');
    return check('  the message is the API\'s', text === 'a branch, tag or commit: 1-255 bytes, no spaces', text)
      && check('  the ref input is outlined, the other repository untouched', invalid && other === 0, `${invalid} ${other}`)
      && check('  the banner names the field', banner.includes('repos[1].ref'), banner)
      && check('  no job was queued', before === after, `${before} ${after}`);
  });

  if (SANDBOXES) {
    await step(`${who}: a batch over two repositories, resolved per repository, runs in sandboxes: stdout, stderr, exit 3`, async () => {
      await page.fill('#job-command', `echo ${mark}; echo err-${TAG} >&2; exit 3`);
      await page.fill('#job-timeout', '120');
      await page.click('[data-testid=job-submit]');
      const jobs = await until('the two jobs are listed by the API', async () => {
        const v = await jobsWith(token, mark);
        return v.length === 2 ? v : null;
      });
      const web = jobs.find((j) => j.repo_id === REPO);
      // The list is polled every 2 s while a job is queued or running: no click needed.
      for (const j of jobs) await page.locator(`#jobs tr[data-job="${j.id}"][data-status=failed]`).waitFor({ timeout: JOB_MS });
      const exits = await page.locator(`#jobs tr[data-job="${web.id}"] [data-testid=job-exit]`).textContent();
      const listEnv = await jobRow(web.id).locator('[data-testid=job-env]').textContent();
      await jobRow(web.id).locator('[data-testid=job-open]').click();
      const detail = page.locator(`#job-detail[data-job="${web.id}"][data-status=failed]`);
      await detail.waitFor();
      const stdout = await page.textContent('[data-testid=job-stdout]');
      const stderr = await page.textContent('[data-testid=job-stderr]');
      const exit = await page.textContent('[data-testid=job-detail-exit]');
      const env = await page.textContent('[data-testid=job-detail-env]');
      const got = (await api(token, 'GET', '/api/v1/jobs/' + web.id)).data;
      await shot(`${who}-1-job-output`);
      return check('  the list: failed, exit code 3, the environment resolution chose', exits === '3' && listEnv === `${BOUND} · global-binding`, `${exits} ${listEnv}`)
        && check('  the job: stdout and stderr in their <pre>', stdout.trim() === mark && stderr.trim() === `err-${TAG}`, `${stdout} / ${stderr}`)
        && check('  ... exit code 3, environment and matched_by', exit === '3' && env === `${BOUND} · global-binding`, `${exit} ${env}`)
        && check('  ... as the API has it', got.status === 'failed' && got.result.exitCode === 3 && got.result.stdout.trim() === mark
          && got.environment.name === BOUND && got.environment.matched_by === 'global-binding' && got.timeoutMs === 120000, JSON.stringify(got));
    });

    await step(`${who}: a job in a chosen environment records it`, async () => {
      const off = (await api(token, 'GET', '/api/v1/environments/sbx-off')).data;
      await repoRow('job-repos', EXTRA).locator('[data-testid=repo-pick]').uncheck();
      await page.selectOption('#job-env', off.id);
      const hidden = await repoRow('job-repos', REPO).locator('[data-testid=repo-resolved]').isHidden();
      await page.fill('#job-command', `echo chosen-${mark}`);
      await page.fill('#job-timeout', '');
      await page.click('[data-testid=job-submit]');
      const [job] = await until('the job is listed by the API', async () => {
        const v = await jobsWith(token, `chosen-${mark}`);
        return v.length === 1 ? v : null;
      });
      // One job opens by itself; the poll shows how it ends.
      await page.locator(`#job-detail[data-job="${job.id}"][data-status=succeeded]`).waitFor({ timeout: JOB_MS });
      const env = await page.textContent('[data-testid=job-detail-env]');
      const stdout = await page.textContent('[data-testid=job-stdout]');
      const listEnv = await jobRow(job.id).locator('[data-testid=job-env]').textContent();
      const got = (await api(token, 'GET', '/api/v1/jobs/' + job.id)).data;
      await page.selectOption('#job-env', '');
      return check('  the resolution lines go while an environment is chosen', hidden)
        && check('  the page shows sbx-off, explicit', env === 'sbx-off · explicit' && listEnv === 'sbx-off · explicit' && stdout.trim() === `chosen-${mark}`, `${env} ${listEnv} ${stdout}`)
        && check('  the API recorded it: requested and used', got.environment_requested === off.id && got.environment.id === off.id
          && got.environment.matched_by === 'explicit' && got.timeoutMs === null, JSON.stringify(got));
    });
  } else {
    console.log(`# skip ${who}: the jobs that run in sandboxes (their output, exit code, chosen environment): no Docker`);
    await step(`${who}: without Docker a batch is queued (and waits for sandboxes), listed as queued`, async () => {
      await page.fill('#job-command', `echo ${mark}`);
      await page.click('[data-testid=job-submit]');
      const jobs = await until('the two jobs are listed by the API', async () => {
        const v = await jobsWith(token, mark);
        return v.length === 2 ? v : null;
      });
      for (const j of jobs) await page.locator(`#jobs tr[data-job="${j.id}"][data-status=queued]`).waitFor();
      const env = await jobRow(jobs[0].id).locator('[data-testid=job-env]').textContent();
      return check('  not started yet: resolved when it starts', env === 'resolved when it starts', env);
    });
  }

  await step(`${who}: a new schedule's cron is previewed before saving: its words and the next 5 runs`, async () => {
    await page.click('[data-testid=sched-new]');
    await page.fill('#sched-name', SCHED);
    await page.fill('#sched-cron', '30 2 * * MON-FRI');
    const words = page.locator('[data-testid=sched-preview-words]');
    await words.filter({ hasText: 'at 02:30, Monday through Friday (UTC)' }).waitFor();
    const runs = await runsIn(page.locator('[data-testid=sched-preview-runs]'));
    const want = (await api(token, 'GET', '/api/v1/schedules/preview?cron=' + encodeURIComponent('30 2 * * MON-FRI'))).data;
    const shown = await page.locator('[data-testid=sched-preview-runs] li').first().textContent();
    return check('  5 runs, each a weekday at 02:30 UTC, as the API previews them', runs.length === 5 && runs.every(WEEKDAY_0230)
      && JSON.stringify(runs) === JSON.stringify(want.next_runs), JSON.stringify(runs))
      && check('  shown with the weekday, in UTC', /^(Mon|Tue|Wed|Thu|Fri) \d{4}-\d\d-\d\d 02:30 UTC$/.test(shown), shown);
  });

  await step(`${who}: saved, the schedule is listed with its words and next runs`, async () => {
    await repoRow('sched-repos', REPO).locator('[data-testid=repo-pick]').check();
    await page.fill('#sched-command', 'echo nightly');
    await page.click('[data-testid=sched-save]');
    await schedRow(SCHED).waitFor();
    const words = await schedRow(SCHED).locator('[data-testid=sched-words]').textContent();
    const runs = await runsIn(schedRow(SCHED).locator('[data-testid=sched-runs]'));
    const env = await schedRow(SCHED).locator('[data-testid=sched-env]').textContent();
    const formHidden = await page.locator('#sched-form').isHidden();
    const s = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).find((x) => x.name === SCHED);
    return check('  the words', words === 'at 02:30, Monday through Friday (UTC)', words)
      && check('  5 weekday runs at 02:30 UTC, the first next_run_at', runs.length === 5 && runs.every(WEEKDAY_0230) && s && runs[0] === s.next_run_at, JSON.stringify(runs))
      && check('  resolved per repository, the form closed', env === 'resolve per repository' && formHidden, `${env} ${formHidden}`)
      && check('  the API has it: enabled, no environment, main', s && s.enabled === true && s.environment === null && s.repos[0].repo_id === REPO
        && s.repos[0].ref === 'main' && s.command === 'echo nightly', JSON.stringify(s));
  });

  await step(`${who}: a bad cron shows the API's day-of-week message next to the field before saving`, async () => {
    const before = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).length;
    await page.click('[data-testid=sched-new]');
    await page.fill('#sched-name', 'bad-' + SCHED);
    await page.fill('#sched-cron', '0 0 * * 8');
    const err = page.locator('#sched-form [data-testid=field-error][data-field=cron]');
    await err.waitFor();
    const text = await err.textContent();
    const follows = await page.locator('#sched-cron').evaluate((e) => e.nextElementSibling && e.nextElementSibling.dataset.field === 'cron');
    const words = await page.textContent('[data-testid=sched-preview-words]');
    const after = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).length;
    // Fixed, the message goes and the words come.
    await page.fill('#sched-cron', '0 0 * * 7');
    await page.locator('[data-testid=sched-preview-words]', { hasText: 'at 00:00, on Sunday (UTC)' }).waitFor();
    const gone = await err.count();
    await page.click('[data-testid=sched-cancel]');
    return check('  the message', text === 'day-of-week: 8 is out of range 0-7', text)
      && check('  right after the cron input, no words meanwhile', follows && words === '', `${follows} '${words}'`)
      && check('  nothing was saved', before === after, `${before} ${after}`)
      && check('  a good cron clears it', gone === 0);
  });

  await step(`${who}: disabled from the list: the runs go, the API says enabled false`, async () => {
    await schedRow(SCHED).locator('[data-testid=sched-toggle]').uncheck();
    await schedRow(SCHED).locator('[data-testid=sched-runs-none]', { hasText: 'disabled' }).waitFor();
    const runs = await schedRow(SCHED).locator('[data-testid=sched-runs]').count();
    const s = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).find((x) => x.name === SCHED);
    return check('  no runs listed', runs === 0)
      && check('  enabled false, no next runs; the rest kept', s.enabled === false && s.next_run_at === null && s.next_runs.length === 0
        && s.cron === '30 2 * * MON-FRI' && s.command === 'echo nightly' && s.repos[0].ref === 'main', JSON.stringify(s));
  });

  await step(`${who}: enabled again: the 5 runs are back`, async () => {
    await schedRow(SCHED).locator('[data-testid=sched-toggle]').check();
    await schedRow(SCHED).locator('[data-testid=sched-runs]').waitFor();
    await schedRow(SCHED).scrollIntoViewIfNeeded();
    await shot(`${who}-2-schedules`);
    const runs = await runsIn(schedRow(SCHED).locator('[data-testid=sched-runs]'));
    const s = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).find((x) => x.name === SCHED);
    return check('  weekdays at 02:30 UTC', runs.length === 5 && runs.every(WEEKDAY_0230), JSON.stringify(runs))
      && check('  the API says enabled', s.enabled === true && JSON.stringify(s.next_runs) === JSON.stringify(runs), JSON.stringify(s));
  });

  await step(`${who}: at 390 px wide the page does not scroll sideways (Jobs tab open)`, async () => {
    const wide = await fitsWidth(1440);
    await shot(`${who}-3-jobs-1440`);
    const narrow = await fitsWidth(390);
    const out = await sticksOut(390);
    await shot(`${who}-4-jobs-390`);
    await page.setViewportSize({ width: 1360, height: 900 });
    const mine = out.filter((o) => o.jobs);
    return check('  1440 px', wide.fits, JSON.stringify(wide))
      && check('  390 px: nothing of the Jobs page sticks out (tables scroll inside their card)', mine.length === 0, JSON.stringify(mine.slice(0, 8)))
      && check('  390 px: the page fits, top bar included', narrow.fits && out.length === 0, JSON.stringify([narrow, out.slice(0, 8)]));
  });

  await step(`${who}: deleted from the list`, async () => {
    const s = ((await api(token, 'GET', '/api/v1/schedules')).data.schedules || []).find((x) => x.name === SCHED);
    await schedRow(SCHED).locator('[data-testid=sched-delete]').click();
    await schedRow(SCHED).waitFor({ state: 'detached' });
    const got = await api(token, 'GET', '/api/v1/schedules/' + s.id);
    return check('  the API: 404', got.status === 404, JSON.stringify(got));
  });

  await step(`${who}: signs out: the Jobs page keeps nothing`, async () => {
    await page.click('[data-testid=sign-out]');
    await page.locator('#signin').waitFor();
    const left = await page.locator('#view-jobs [data-testid=repo-row], #jobs tr, #schedules tr').count();
    return left === 0;
  });
}

let thrown;
try {
  await step('setting: an environment bound to acme/website, a second repository (default branch trunk)', async () => {
    const env = await api(ROOT, 'POST', '/api/v1/environments',
      { name: BOUND, scope: 'global', base_image: IMAGE, network: 'off', repositories: [REPO] });
    const repo = await api(ROOT, 'PUT', '/api/v1/repos/' + EXTRA, { visibility: 'private', default_branch: 'trunk' });
    const member = await api(ROOT, 'PUT', `/api/v1/repos/${EXTRA}/members/alice`, { role: 'write' });
    return check('  environment', env.status === 201, JSON.stringify(env))
      && check('  repository and alice a writer', repo.status === 201 && member.status === 201, JSON.stringify([repo, member]));
  });
  await page.goto(BASE + '/dashboard/');
  await asUser('root', ROOT);
  await asUser('alice', ALICE);
  ok('both users went through the Jobs page');
} catch (e) {
  thrown = e;
}
await finish(thrown);
