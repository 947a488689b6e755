// SPDX-License-Identifier: Apache-2.0
// sluice dashboard, the Jobs page (docs/reference/api.md §5.5, docs/dashboard.md "Jobs and
// schedules"): a composer that runs one command across repositories (each with its ref) in an
// environment chosen, or resolved per repository with what each would get and why (§5.2); the
// job list, polled while a job is queued or running, and a job's output; schedules with their
// cron in words and their next runs, enabled from the list, and a form whose cron is previewed
// as it is typed. The words and the runs always come from the control plane's cron parser
// (GET /api/v1/schedules/preview and the schedule answers): the page never parses cron itself.
// Built with window.sluice's helpers (app.js); values from the API only ever become text.
(function () {
  'use strict';
  const S = window.sluice;
  const { $, el, api, toast, when, clearFormErrors, markField } = S;
  const POLL_MS = 2000;
  const PREVIEW_MS = 300;
  const LIVE = ['queued', 'running'];
  const STATUS_BADGE = { queued: 'neutral', running: '', succeeded: 'ok', failed: 'bad', error: 'warn' };
  const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

  // repos: GET /api/v1/repos; envs: GET /api/v1/environments; resolved: repo -> the resolve
  // answer (or {error}), resolving: the calls in flight, session: counts sign-outs; jobs,
  // schedules: the lists; timer/gen: the job poll (gen ends a chain);
  // open: the job shown below the list; editing: the schedule in the form (null: a new one).
  const st = {
    repos: [], envs: [], resolved: new Map(), resolving: new Map(), session: 0, jobs: [], schedules: [],
    timer: null, gen: 0, open: null, openStatus: null, editing: null, previewTimer: null, previewGen: 0,
  };

  // ---- small helpers ------------------------------------------------------------------------

  // An API time in UTC as "Tue 2026-12-01 02:30 UTC" (the schedules' times are UTC).
  function utcRun(ts) {
    const d = new Date(ts);
    if (Number.isNaN(d.getTime())) return ts;
    return WEEKDAYS[d.getUTCDay()] + ' ' + ts.slice(0, 10) + ' ' + ts.slice(11, 16) + ' UTC';
  }

  function duration(j) {
    let ms = j.result && typeof j.result.durationMs === 'number' ? j.result.durationMs : null;
    if (ms === null && j.started_at && j.finished_at) ms = Date.parse(j.finished_at) - Date.parse(j.started_at);
    if (ms === null || !Number.isFinite(ms)) return '—';
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
  }

  // `ts` as when() says it, without the date when it is `created`'s: "22:46:33".
  function sameDay(created, ts) {
    if (!ts) return '—';
    const t = when(ts);
    return t.slice(0, 10) === when(created).slice(0, 10) ? t.slice(11) : t;
  }

  function envName(id) {
    const e = st.envs.find((x) => x.id === id);
    return e ? e.name : id;
  }

  // What a job ran in (or will): the environment and matched_by once it started.
  function jobEnvText(j) {
    if (j.environment) return (j.environment.name || '(none)') + ' · ' + j.environment.matched_by;
    if (j.environment_requested) return envName(j.environment_requested) + ' · chosen';
    return 'resolved when it starts';
  }

  // "12" seconds -> 12000 ms; empty -> null (the API's default); anything else as typed, for the
  // API to judge (and name the field).
  function timeoutValue(input) {
    const v = input.value.trim();
    if (v === '') return null;
    return /^\d+(\.\d+)?$/.test(v) ? Math.round(Number(v) * 1000) : v;
  }

  // The environment pickers: "Resolve per repository" or one environment the caller sees.
  function fillEnvSelect(select, keep) {
    const value = keep !== undefined ? keep : select.value;
    const options = [el('option', { value: '', text: 'Resolve per repository' })];
    for (const e of st.envs) {
      options.push(el('option', { value: e.id, 'data-name': e.name, text: e.name + (e.scope === 'global' ? ' · global' : ' · yours') }));
    }
    if (value && !st.envs.some((e) => e.id === value)) {
      options.push(el('option', { value, text: value + ' (no longer visible)' }));
    }
    select.replaceChildren(...options);
    select.value = value || '';
  }

  // ---- the repository picker (composer and schedule form) -----------------------------------

  // A list of repositories to tick, each with its ref (a new tick takes the repository's default
  // branch) and, while `envSelect` says "Resolve per repository", what GET /api/v1/resolve
  // says the repository would get and why.
  function makePicker(box, prefix, envSelect) {
    let rows = [];

    function resolvedLine(row) {
      const line = row.resolvedEl;
      if (!row.check.checked || envSelect.value !== '') {
        line.hidden = true;
        line.replaceChildren();
        return;
      }
      line.hidden = false;
      const r = st.resolved.get(row.repo);
      if (!r) {
        line.replaceChildren(el('span', { class: 'muted', text: 'resolving…' }));
        resolve(row.repo).then(() => { if (rows.includes(row)) resolvedLine(row); });
        return;
      }
      if (r.error) {
        line.replaceChildren(el('span', { class: 'field-error', text: 'cannot resolve: ' + r.error }));
        return;
      }
      const env = r.environment;
      line.dataset.env = env ? env.name : '';
      line.dataset.matchedBy = r.matched_by;
      line.replaceChildren('→ ', el('strong', { 'data-testid': 'resolved-env', text: env ? env.name : '(none)' }),
        ' · ', el('code', { 'data-testid': 'resolved-matched-by', text: r.matched_by }),
        el('span', { class: 'muted', text: ' — ' + (S.MATCHED[r.matched_by] || '') }));
    }

    // `chosen`: repo -> ref (null: the default branch at run time) to tick, or undefined.
    function render(chosen) {
      const names = st.repos.map((r) => r.name);
      for (const name of (chosen ? chosen.keys() : [])) if (!names.includes(name)) names.push(name);
      rows = names.map((name, i) => {
        const repo = st.repos.find((r) => r.name === name) || { name, role: null, default_branch: '' };
        const usable = (repo.role === 'write' || repo.role === 'admin') && !repo.archived;
        const id = prefix + '-r' + i;
        const check = el('input', { type: 'checkbox', id, 'data-testid': 'repo-pick', disabled: !usable && !(chosen && chosen.has(name)) });
        const ref = el('input', { id: id + '-ref', class: 'mono', 'data-testid': 'repo-ref', spellcheck: 'false', placeholder: repo.default_branch || 'default branch', disabled: true });
        const resolvedEl = el('div', { class: 'jobs-resolved', 'data-testid': 'repo-resolved', hidden: true });
        const row = { repo: name, check, ref, resolvedEl, defaultRef: repo.default_branch || '' };
        if (chosen && chosen.has(name)) {
          check.checked = true;
          ref.disabled = false;
          ref.value = chosen.get(name) || '';
        }
        check.addEventListener('change', () => {
          ref.disabled = !check.checked;
          if (check.checked && ref.value === '') ref.value = row.defaultRef;
          resolvedLine(row);
        });
        row.el = el('div', { class: 'jobs-repo', 'data-repo': name, 'data-testid': 'repo-row' },
          el('label', { class: 'switch jobs-pick', for: id }, check, ' ', el('span', { class: 'mono', text: name }),
            usable ? null : el('span', { class: 'badge neutral', text: repo.archived ? 'archived' : 'read only' })),
          el('div', { class: 'jobs-ref' }, el('label', { for: id + '-ref', class: 'muted', text: 'ref' }), ref),
          resolvedEl);
        return row;
      });
      box.replaceChildren(...rows.map((r) => r.el));
      if (!rows.length) box.append(el('p', { class: 'empty', text: 'No repositories you can see.' }));
      refresh();
    }

    function refresh() {
      for (const row of rows) resolvedLine(row);
    }

    envSelect.addEventListener('change', refresh);
    return {
      render,
      refresh,
      chosen: () => rows.filter((r) => r.check.checked),
      rowOf: (name) => rows.find((r) => r.repo === name),
    };
  }

  // One resolve call per repository at a time; an answer for an earlier session is dropped
  // (resolution depends on who asks).
  function resolve(repo) {
    if (!st.resolving.has(repo)) {
      const session = st.session;
      const call = api('GET', '/api/v1/resolve?repo=' + encodeURIComponent(repo))
        .catch((e) => ({ error: e.message }))
        .then((r) => {
          if (session === st.session) st.resolved.set(repo, r);
          if (st.resolving.get(repo) === call) st.resolving.delete(repo);
        });
      st.resolving.set(repo, call);
    }
    return st.resolving.get(repo);
  }

  const jobPicker = makePicker($('job-repos'), 'jr', $('job-env'));
  const schedPicker = makePicker($('sched-repos'), 'sr', $('sched-env'));

  // An API error on a form: a 422's errors next to the inputs their fields name (`repos[2].ref`
  // is the ref of the third ticked repository), the message in the banner; a refusal naming a
  // repository (`{"message","repo"}`: 403 write access required, 404 repository not found) next
  // to it; `404 no environment` next to the environment picker.
  function showErrors(banner, picker, inputs, err) {
    const errors = (err.body && err.body.errors) || [];
    const chosen = picker.chosen();
    const target = (field) => {
      const m = /^repos\[(\d+)\](\.ref)?/.exec(field);
      if (m && chosen[Number(m[1])]) return m[2] ? chosen[Number(m[1])].ref : chosen[Number(m[1])].check;
      return inputs[field.split(/[.[]/)[0]] || null;
    };
    if (!errors.length) {
      const row = err.body && err.body.repo ? picker.rowOf(err.body.repo) : null;
      const input = row ? row.check : (/^no environment/.test(err.message) ? inputs.environment : null);
      if (input) {
        markField(input, row ? 'repos' : 'environment', err.message);
        return;
      }
    }
    banner.textContent = err.message + (errors.length || !err.status ? '' : ' (HTTP ' + err.status + ')');
    for (const x of errors) {
      const field = String(x.field || '');
      const input = target(field);
      if (input) markField(input, field, String(x.message || ''));
      else banner.textContent += '\n' + field + ': ' + String(x.message || '');
    }
  }

  // ---- the composer -------------------------------------------------------------------------

  $('job-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const banner = $('job-form-error');
    clearFormErrors($('job-form'), banner);
    const env = $('job-env').value;
    const body = {
      repos: jobPicker.chosen().map((r) => ({ repo_id: r.repo, ref: r.ref.value.trim() || null })),
      command: $('job-command').value,
      environment: env || null,
      timeoutMs: timeoutValue($('job-timeout')),
    };
    const button = $('job-form').querySelector('[type=submit]');
    button.disabled = true;
    try {
      const res = await api('POST', '/api/v1/jobs', body);
      const n = (res.job_ids || []).length;
      toast(n === 1 ? 'Queued 1 job' : 'Queued ' + n + ' jobs', 'ok');
      // One job opens below the list (the poll shows its output once it ends).
      if (n === 1) {
        st.open = res.job_ids[0];
        st.openStatus = null;
      }
      await loadJobs();
    } catch (err) {
      showErrors(banner, jobPicker,
        { repos: $('job-repos'), command: $('job-command'), environment: $('job-env'), timeoutMs: $('job-timeout') }, err);
    } finally {
      button.disabled = false;
    }
  });

  // ---- the job list and one job -------------------------------------------------------------

  function statusBadge(status) {
    return el('span', { class: 'badge ' + (STATUS_BADGE[status] || 'neutral'), 'data-testid': 'job-status', text: status });
  }

  function jobRow(j) {
    const exit = j.result && typeof j.result.exitCode === 'number' ? String(j.result.exitCode) : '—';
    return el('tr', { 'data-job': j.id, 'data-status': j.status, 'data-testid': 'job-row', class: j.id === st.open ? 'jobs-open' : null, onclick: () => openJob(j.id) },
      el('td', {}, el('button', { type: 'button', class: 'btn small mono', 'data-testid': 'job-open', 'aria-label': 'Open the job in ' + j.repo_id, text: j.repo_id, onclick: (ev) => { ev.stopPropagation(); openJob(j.id); } })),
      el('td', { class: 'mono', text: j.ref || '(default)' }),
      el('td', { class: 'mono jobs-cmd', title: j.command, text: j.command }),
      el('td', { 'data-testid': 'job-env', text: jobEnvText(j) }),
      el('td', {}, statusBadge(j.status)),
      el('td', { class: 'mono', 'data-testid': 'job-exit', text: exit }),
      el('td', { class: 'sub', text: duration(j) }),
      el('td', { class: 'sub', text: when(j.created_at) }),
      el('td', { class: 'sub', text: sameDay(j.created_at, j.started_at) }),
      el('td', { class: 'sub', text: sameDay(j.created_at, j.finished_at) }));
  }

  function stopPolling() {
    st.gen++;
    if (st.timer !== null) clearTimeout(st.timer);
    st.timer = null;
  }

  // Lists the jobs; while one is queued or running and the tab is open, again in POLL_MS.
  async function loadJobs() {
    const gen = st.gen;
    if (st.timer !== null) clearTimeout(st.timer);
    st.timer = null;
    let list;
    try {
      list = (await api('GET', '/api/v1/jobs')).jobs || [];
      $('jobs-error').textContent = '';
    } catch (e) {
      if (gen === st.gen) $('jobs-error').textContent = e.message;
      list = null;
    }
    // Left the tab (or signed out) meanwhile: this answer is stale.
    if (gen !== st.gen || !S.state.me) return;
    if (list) {
      st.jobs = list;
      $('jobs').replaceChildren(...list.map(jobRow));
      $('jobs-empty').hidden = list.length > 0;
      const open = list.find((j) => j.id === st.open);
      if (open && open.status !== st.openStatus) openJob(open.id);
    }
    const live = st.jobs.some((j) => LIVE.includes(j.status));
    if ((live || !list) && S.state.tab === 'jobs' && st.timer === null) {
      st.timer = setTimeout(loadJobs, POLL_MS);
    }
  }

  function fact(name, ...value) {
    return [el('dt', { text: name }), el('dd', {}, ...value)];
  }

  async function openJob(id) {
    st.open = id;
    for (const tr of $('jobs').querySelectorAll('tr')) tr.classList.toggle('jobs-open', tr.dataset.job === id);
    let j;
    try {
      j = await api('GET', '/api/v1/jobs/' + encodeURIComponent(id));
    } catch (e) {
      toast('Cannot read the job: ' + e.message, 'error');
      return;
    }
    if (st.open !== id || !S.state.me) return;
    st.openStatus = j.status;
    const r = j.result;
    const marks = [];
    if (r && r.timedOut) marks.push(el('span', { class: 'badge warn', 'data-testid': 'job-timedout', text: 'timed out' }), ' ');
    if (r && r.truncated) marks.push(el('span', { class: 'badge warn', 'data-testid': 'job-truncated', text: 'truncated' }), ' ');
    $('job-detail-title').textContent = 'Job ' + j.id;
    $('job-detail').dataset.job = j.id;
    $('job-detail').dataset.status = j.status;
    $('job-detail-facts').replaceChildren(
      ...fact('Repository', el('span', { class: 'mono', text: j.repo_id + ' @ ' + (j.ref || '(default branch)') })),
      ...fact('Command', el('code', { class: 'jobs-cmd-full', text: j.command })),
      ...fact('Environment', el('span', { 'data-testid': 'job-detail-env', text: jobEnvText(j) }),
        j.environment ? el('span', { class: 'muted', text: ' — ' + (S.MATCHED[j.environment.matched_by] || '') }) : null),
      ...fact('Status', statusBadge(j.status), ' ', ...marks),
      ...fact('Exit code', el('span', { class: 'mono', 'data-testid': 'job-detail-exit', text: r && typeof r.exitCode === 'number' ? String(r.exitCode) : '—' })),
      ...fact('Times', el('span', { class: 'sub', text: 'created ' + when(j.created_at) + (j.started_at ? ' · started ' + when(j.started_at) : '') + (j.finished_at ? ' · finished ' + when(j.finished_at) : '') + ' · ' + duration(j) })),
      ...fact('Sandbox', el('span', { class: 'mono', text: j.sandbox_id || '—' })),
      ...(j.schedule_id ? fact('Schedule', el('span', { class: 'mono', text: j.schedule_id })) : []));
    $('job-detail-error').textContent = j.error || '';
    $('job-stdout').textContent = r ? r.stdout || '' : '';
    $('job-stderr').textContent = r ? r.stderr || '' : '';
    $('job-detail').hidden = false;
  }

  function closeJob() {
    st.open = null;
    st.openStatus = null;
    $('job-detail').hidden = true;
    for (const id of ['job-detail-facts', 'job-stdout', 'job-stderr']) $(id).replaceChildren();
    $('job-detail-error').textContent = '';
    for (const tr of $('jobs').querySelectorAll('tr.jobs-open')) tr.classList.remove('jobs-open');
  }
  $('job-detail-close').addEventListener('click', closeJob);

  // ---- schedules ----------------------------------------------------------------------------

  function runsList(runs, testid) {
    return el('ol', { class: 'jobs-runs', 'data-testid': testid }, ...runs.map((t) => el('li', { 'data-ts': t, text: utcRun(t) })));
  }

  // A schedule as the API wants it back whole (PUT), with `enabled` changed.
  function scheduleBody(s, enabled) {
    return {
      name: s.name, cron: s.cron, repos: s.repos, command: s.command,
      environment: s.environment ? s.environment.id : null, timeoutMs: s.timeoutMs, enabled,
    };
  }

  function scheduleRow(s) {
    const enabled = el('input', { type: 'checkbox', 'data-testid': 'sched-toggle', checked: s.enabled });
    enabled.addEventListener('change', () => setEnabled(s, enabled));
    let runs;
    if (!s.enabled) runs = el('span', { class: 'muted', 'data-testid': 'sched-runs-none', text: 'disabled' });
    else if (!s.next_runs.length) runs = el('span', { class: 'muted', 'data-testid': 'sched-runs-none', text: 'never' });
    else runs = runsList(s.next_runs, 'sched-runs');
    return el('tr', { 'data-schedule': s.id, 'data-name': s.name, 'data-testid': 'sched-row' },
      el('td', {}, el('strong', { text: s.name })),
      el('td', {}, el('code', { 'data-testid': 'sched-cron', text: s.cron }),
        el('div', { class: 'sub', 'data-testid': 'sched-words', text: s.cron_text || '' })),
      el('td', {}, runs),
      el('td', { class: 'mono' }, ...s.repos.map((r) => el('div', { text: r.repo_id + (r.ref ? ' @ ' + r.ref : '') }))),
      el('td', { 'data-testid': 'sched-env', text: s.environment ? (s.environment.name || s.environment.id + ' (deleted, or another user\'s)') : 'resolve per repository' }),
      el('td', {}, el('label', { class: 'switch' }, enabled, ' enabled')),
      el('td', { class: 'actions' },
        el('button', { type: 'button', class: 'btn small', 'data-testid': 'sched-edit', text: 'Edit', onclick: () => openSchedule(s) }),
        el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'sched-delete', text: 'Delete', onclick: (ev) => deleteSchedule(s, ev.target) })));
  }

  async function loadSchedules() {
    let list;
    try {
      list = (await api('GET', '/api/v1/schedules')).schedules || [];
      $('schedules-error').textContent = '';
    } catch (e) {
      $('schedules-error').textContent = e.message;
      return;
    }
    if (!S.state.me) return;
    st.schedules = list;
    $('schedules').replaceChildren(...list.map(scheduleRow));
    $('schedules-empty').hidden = list.length > 0;
  }

  async function setEnabled(s, input) {
    input.disabled = true;
    try {
      await api('PUT', '/api/v1/schedules/' + encodeURIComponent(s.id), scheduleBody(s, input.checked));
      toast(s.name + (input.checked ? ' enabled' : ' disabled'), 'ok');
    } catch (e) {
      input.checked = !input.checked;
      toast('Cannot change ' + s.name + ': ' + e.message, 'error');
    }
    input.disabled = false;
    loadSchedules();
  }

  async function deleteSchedule(s, button) {
    if (!window.confirm('Delete the schedule ' + s.name + '? Its jobs stay.')) return;
    button.disabled = true;
    try {
      await api('DELETE', '/api/v1/schedules/' + encodeURIComponent(s.id));
      toast('Deleted ' + s.name, 'ok');
      if (st.editing === s.id) closeSchedule();
    } catch (e) {
      toast('Cannot delete ' + s.name + ': ' + e.message, 'error');
    }
    loadSchedules();
  }

  // The cron field's preview: its words and next runs from the control plane, or the 422 next
  // to the field, PREVIEW_MS after the last keystroke. An answer to an older text is dropped.
  function clearCronError() {
    const input = $('sched-cron');
    input.classList.remove('invalid');
    for (const e of $('sched-form').querySelectorAll('.field-error.dynamic[data-field=cron]')) e.remove();
  }

  function schedulePreview() {
    if (st.previewTimer !== null) clearTimeout(st.previewTimer);
    st.previewTimer = setTimeout(preview, PREVIEW_MS);
  }

  async function preview() {
    st.previewTimer = null;
    const gen = ++st.previewGen;
    const cron = $('sched-cron').value.trim();
    if (cron === '') {
      clearCronError();
      $('sched-preview-words').textContent = '';
      $('sched-preview-runs').replaceChildren();
      return;
    }
    let r = null;
    let err = null;
    try {
      r = await api('GET', '/api/v1/schedules/preview?cron=' + encodeURIComponent(cron));
    } catch (e) {
      err = e;
    }
    if (gen !== st.previewGen || $('sched-form').hidden) return;
    clearCronError();
    if (err) {
      const x = ((err.body && err.body.errors) || []).find((e) => e.field === 'cron');
      $('sched-preview-words').textContent = '';
      $('sched-preview-runs').replaceChildren();
      markField($('sched-cron'), 'cron', x ? String(x.message || '') : err.message);
      return;
    }
    $('sched-preview-words').textContent = r.cron_text + (r.next_runs.length ? '. Next runs:' : '. No run comes.');
    $('sched-preview-runs').replaceChildren(...r.next_runs.map((t) => el('li', { 'data-ts': t, text: utcRun(t) })));
  }
  $('sched-cron').addEventListener('input', schedulePreview);

  function openSchedule(s) {
    const form = $('sched-form');
    clearFormErrors(form, $('sched-form-error'));
    st.editing = s ? s.id : null;
    $('sched-form-title').textContent = s ? 'Edit ' + s.name : 'New schedule';
    $('sched-name').value = s ? s.name : '';
    $('sched-cron').value = s ? s.cron : '';
    $('sched-command').value = s ? s.command : '';
    $('sched-timeout').value = s && s.timeoutMs ? String(s.timeoutMs / 1000) : '';
    $('sched-enabled').checked = s ? s.enabled : true;
    fillEnvSelect($('sched-env'), s && s.environment ? s.environment.id : '');
    schedPicker.render(s ? new Map(s.repos.map((r) => [r.repo_id, r.ref])) : null);
    $('sched-preview-words').textContent = '';
    $('sched-preview-runs').replaceChildren();
    form.hidden = false;
    if (s) preview();
    $('sched-name').focus();
  }

  function closeSchedule() {
    st.editing = null;
    st.previewGen++;
    if (st.previewTimer !== null) clearTimeout(st.previewTimer);
    st.previewTimer = null;
    clearFormErrors($('sched-form'), $('sched-form-error'));
    $('sched-form').hidden = true;
    $('sched-preview-words').textContent = '';
    $('sched-preview-runs').replaceChildren();
  }

  $('sched-new').addEventListener('click', () => openSchedule(null));
  $('sched-cancel').addEventListener('click', closeSchedule);

  $('sched-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const banner = $('sched-form-error');
    clearFormErrors($('sched-form'), banner);
    const env = $('sched-env').value;
    const body = {
      name: $('sched-name').value.trim(),
      cron: $('sched-cron').value.trim(),
      repos: schedPicker.chosen().map((r) => ({ repo_id: r.repo, ref: r.ref.value.trim() || null })),
      command: $('sched-command').value,
      environment: env || null,
      timeoutMs: timeoutValue($('sched-timeout')),
      enabled: $('sched-enabled').checked,
    };
    const button = $('sched-form').querySelector('[type=submit]');
    button.disabled = true;
    try {
      const s = st.editing
        ? await api('PUT', '/api/v1/schedules/' + encodeURIComponent(st.editing), body)
        : await api('POST', '/api/v1/schedules', body);
      toast('Saved ' + s.name + ': ' + s.cron_text, 'ok');
      closeSchedule();
      loadSchedules();
    } catch (err) {
      showErrors(banner, schedPicker,
        {
          name: $('sched-name'), cron: $('sched-cron'), repos: $('sched-repos'), command: $('sched-command'),
          environment: $('sched-env'), timeoutMs: $('sched-timeout'), enabled: $('sched-enabled'),
        }, err);
    } finally {
      button.disabled = false;
    }
  });

  // ---- the page -----------------------------------------------------------------------------

  // What the pickers offer: the repositories and environments the caller sees.
  async function loadChoices() {
    try {
      const [repos, envs] = await Promise.all([api('GET', '/api/v1/repos'), api('GET', '/api/v1/environments')]);
      if (!S.state.me) return;
      st.repos = repos.repos || [];
      st.envs = envs.environments || [];
    } catch (e) {
      $('job-form-error').textContent = 'Cannot list repositories and environments: ' + e.message;
      return;
    }
    // A refresh keeps what was ticked and typed.
    const keep = new Map(jobPicker.chosen().map((r) => [r.repo, r.ref.value]));
    st.resolved.clear();
    fillEnvSelect($('job-env'));
    jobPicker.render(keep);
    if (!$('sched-form').hidden) {
      const kept = new Map(schedPicker.chosen().map((r) => [r.repo, r.ref.value]));
      fillEnvSelect($('sched-env'));
      schedPicker.render(kept);
    }
  }

  function load() {
    loadChoices();
    loadJobs();
    loadSchedules();
    if (st.open) openJob(st.open);
  }
  $('jobs-refresh').addEventListener('click', load);

  function leave() {
    stopPolling();
    st.previewGen++;
    if (st.previewTimer !== null) clearTimeout(st.previewTimer);
    st.previewTimer = null;
  }

  // Signed out: nothing of this session stays for the next one.
  function reset() {
    closeJob();
    closeSchedule();
    Object.assign(st, { repos: [], envs: [], jobs: [], schedules: [] });
    st.session++;
    st.resolved.clear();
    st.resolving.clear();
    for (const id of ['job-repos', 'sched-repos', 'jobs', 'schedules', 'job-env', 'sched-env']) $(id).replaceChildren();
    for (const id of ['job-command', 'job-timeout']) $(id).value = '';
    clearFormErrors($('job-form'), $('job-form-error'));
    $('jobs-error').textContent = '';
    $('schedules-error').textContent = '';
  }

  S.page('jobs', { load, leave, reset });
})();
