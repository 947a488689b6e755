// SPDX-License-Identifier: Apache-2.0
// sluice dashboard: one sandbox (docs/reference/api.md §5.3), opened with *Open* in the Sandboxes
// list (app.js passes the list's entry to load). Its fields, refreshed from GET /api/v1/sandboxes;
// a console that runs a command in it (POST .../exec {cmd, timeoutMs}) and shows stdout, stderr,
// the exit code, the duration and whether the time limit stopped it, with the runs made in this
// view listed newest first (kept until another sandbox is opened or the user signs out); and its
// recent decisions (GET /api/v1/audit?client=ID&limit=50). Fields and decisions are fetched again
// every 5 s while the view is shown, the decisions also right after each run. The page has no
// tab of its own: the Sandboxes tab stays marked.
(function () {
  'use strict';
  const S = window.sluice;
  const { $, el } = S;
  const REFRESH_MS = 5000;
  const RUNS_MAX = 20;
  const LIMIT_MAX_S = 86400;

  const sb = { current: null, timer: null, gen: 0, soon: null };

  // .../repos/OWNER/NAME/sandboxes/ID (the repository is owner/name: api.md §5.3).
  const sandboxPath = (s) => '/api/v1/repos/' + s.repo.split('/').map(encodeURIComponent).join('/')
    + '/sandboxes/' + encodeURIComponent(s.id);

  function markTab() {
    for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === 'sandboxes');
  }

  // ---- fields -------------------------------------------------------------------------------

  function renderFields(s) {
    const clone = s.clone ? s.clone + (s.clone === 'failed' && s.clone_error ? ': ' + s.clone_error : '') : '(no git platform)';
    const pairs = [
      ['Id', s.id, 'mono'], ['Repository', s.repo, 'mono'], ['Ref', s.ref || '(default)'],
      ['Environment', s.environment || '(none)'], ['Status', s.status + (s.pull ? ' (pulling ' + s.pull.image + ')' : '')],
      ['Clone', clone], ['Created', S.when(s.created_at)], ['Expires', S.when(s.expires_at)],
    ];
    $('sb-fields').replaceChildren(...pairs.flatMap(([k, v, cls]) => [el('dt', { text: k }), el('dd', { class: cls, 'data-field': k.toLowerCase(), text: v || '—' })]));
    $('sb-title').textContent = s.id;
  }

  async function refreshFields(gen) {
    const id = sb.current.id;
    try {
      const list = await S.api('GET', '/api/v1/sandboxes');
      if (gen !== sb.gen) return;
      const s = list.find((x) => x.id === id);
      if (s) {
        sb.current = s;
        renderFields(s);
        $('sb-fields-error').textContent = '';
      } else {
        $('sb-fields-error').textContent = 'This sandbox is not among your open sandboxes any more (closed, or it expired).';
      }
    } catch (e) {
      if (gen === sb.gen) $('sb-fields-error').textContent = 'Cannot refresh the sandbox: ' + e.message;
    }
  }

  // ---- the console --------------------------------------------------------------------------

  function output(name, text) {
    const empty = !text;
    return el('div', { class: 'sb-out' },
      el('h3', { text: name }),
      el('pre', { class: 'sb-pre' + (empty ? ' is-empty' : ''), 'data-testid': 'sb-' + name, 'aria-label': name, tabindex: '0', text: empty ? '(nothing)' : text }));
  }

  // The run's entry, first "running…", then its result or its error.
  function runEntry(cmd, seconds) {
    const status = el('span', { class: 'badge neutral', 'data-testid': 'sb-exit', text: 'running…' });
    const meta = el('span', { class: 'small muted', 'data-testid': 'sb-duration', text: 'limit ' + seconds + ' s' });
    const summary = el('summary', {}, el('code', { class: 'sb-cmd-text', text: '$ ' + cmd }), ' ', status, ' ', meta);
    const body = el('div', { class: 'sb-run-body' });
    const entry = el('details', { class: 'sb-run', 'data-testid': 'sb-run-entry', open: true }, summary, body);
    return { entry, status, meta, body };
  }

  function showResult(run, r, seconds) {
    const timedOut = r.timedOut === true;
    run.entry.dataset.exit = String(r.exitCode);
    run.entry.dataset.timedOut = String(timedOut);
    run.status.className = 'badge ' + (timedOut ? 'warn' : r.exitCode === 0 ? 'ok' : 'bad');
    run.status.textContent = 'exit ' + r.exitCode;
    run.meta.textContent = r.durationMs + ' ms';
    if (timedOut) {
      run.status.after(' ', el('span', { class: 'badge warn', 'data-testid': 'sb-timed-out', text: 'timed out after ' + seconds + ' s' }));
    }
    run.body.replaceChildren(...[
      r.truncated ? el('p', { class: 'small muted', text: 'Output cut at 1 MiB per stream.' }) : null,
      output('stdout', r.stdout), output('stderr', r.stderr)].filter(Boolean));
  }

  async function runCommand(ev) {
    ev.preventDefault();
    const form = $('sb-console');
    S.clearFormErrors(form, $('sb-console-error'));
    const s = sb.current;
    const cmd = $('sb-cmd').value;
    const seconds = Number($('sb-timeout').value.trim());
    if (!cmd.trim()) {
      S.markField($('sb-cmd'), 'cmd', 'type a command');
      return;
    }
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > LIMIT_MAX_S) {
      S.markField($('sb-timeout'), 'timeoutMs', 'a whole number of seconds from 1 to ' + LIMIT_MAX_S);
      return;
    }
    const run = runEntry(cmd, seconds);
    for (const d of $('sb-runs').querySelectorAll('details[open]')) d.open = false;
    $('sb-runs').prepend(run.entry);
    while ($('sb-runs').children.length > RUNS_MAX) $('sb-runs').lastElementChild.remove();
    try {
      const r = await S.api('POST', sandboxPath(s) + '/exec', { cmd, timeoutMs: seconds * 1000 });
      showResult(run, r, seconds);
    } catch (e) {
      run.entry.dataset.error = 'true';
      run.status.className = 'badge bad';
      run.status.textContent = 'failed';
      run.meta.textContent = '';
      run.body.replaceChildren(el('p', { class: 'form-error', 'data-testid': 'sb-run-error', text: e.message + (e.status ? ' (HTTP ' + e.status + ')' : '') }));
    }
    // What the command sent through the proxy: its lines reach the log within moments.
    if (sb.current === s && S.state.tab === 'sandbox') {
      if (sb.soon !== null) clearTimeout(sb.soon);
      sb.soon = setTimeout(() => { sb.soon = null; refreshDecisions(sb.gen); }, 800);
    }
  }

  // ---- recent decisions ---------------------------------------------------------------------

  function decisionRow(a) {
    const target = (a.method ? a.method + ' ' : '') + (a.scheme ? a.scheme + '://' : '') + (a.host || '') + (a.port ? ':' + a.port : '') + (a.path || '');
    const reason = el('td', {});
    if (a.reason) reason.append(el('code', { class: 'reason', text: a.reason }));
    if (a.suggestion) reason.append(el('span', { class: 'suggestion', text: a.suggestion }));
    return el('tr', { 'data-testid': 'sb-decision', 'data-host': a.host || '', 'data-decision': a.decision || '' },
      el('td', { class: 'sub', text: a.ts ? new Date(a.ts).toLocaleTimeString() : '' }),
      el('td', { class: 'mono audit-target', text: target }),
      el('td', {}, el('span', { class: 'badge ' + S.decisionBadge(a.decision), text: (a.decision || '') + (a.status ? ' ' + a.status : '') })),
      reason);
  }

  async function refreshDecisions(gen) {
    const id = sb.current.id;
    try {
      const d = await S.api('GET', '/api/v1/audit?client=' + encodeURIComponent(id) + '&limit=50');
      if (gen !== sb.gen) return;
      const entries = d.entries || [];
      $('sb-decisions').replaceChildren(...entries.map(decisionRow));
      $('sb-decisions-empty').hidden = entries.length > 0;
      $('sb-decisions-error').textContent = d.truncated ? 'Only the newest 4 MiB of the audit log were searched.' : '';
    } catch (e) {
      if (gen === sb.gen) $('sb-decisions-error').textContent = 'Cannot read the decisions: ' + e.message;
    }
  }

  async function poll(gen) {
    sb.timer = null;
    await Promise.all([refreshFields(gen), refreshDecisions(gen)]);
    if (gen === sb.gen && S.state.tab === 'sandbox' && S.state.me) {
      sb.timer = setTimeout(() => poll(gen), REFRESH_MS);
    }
  }

  // ---- the page -----------------------------------------------------------------------------

  function stop() {
    sb.gen++;
    if (sb.timer !== null) clearTimeout(sb.timer);
    if (sb.soon !== null) clearTimeout(sb.soon);
    sb.timer = null;
    sb.soon = null;
  }

  function clear() {
    for (const id of ['sb-fields', 'sb-runs', 'sb-decisions']) $(id).replaceChildren();
    for (const id of ['sb-title', 'sb-fields-error', 'sb-console-error', 'sb-decisions-error']) $(id).textContent = '';
    $('sb-decisions-empty').hidden = true;
    S.clearFormErrors($('sb-console'), $('sb-console-error'));
  }

  function load(s) {
    stop();
    markTab();
    if (s && s.id && s.repo) {
      if (!sb.current || sb.current.id !== s.id) {
        clear();
        $('sb-cmd').value = '';
      }
      sb.current = s;
    }
    $('sb-none').hidden = !!sb.current;
    $('sb-detail').hidden = !sb.current;
    if (!sb.current) return;
    renderFields(sb.current);
    poll(sb.gen);
  }

  S.page('sandbox', {
    load,
    leave: stop,
    reset() {
      stop();
      sb.current = null;
      clear();
      $('sb-cmd').value = '';
    },
  });

  $('sb-console').addEventListener('submit', runCommand);
  // Ctrl+Enter (Cmd+Enter) in the command runs it; Enter alone starts a new line.
  $('sb-cmd').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      $('sb-console').requestSubmit();
    }
  });
  $('sb-back').addEventListener('click', () => S.showTab('sandboxes'));
  $('sb-decisions-refresh').addEventListener('click', () => refreshDecisions(sb.gen));
})();
