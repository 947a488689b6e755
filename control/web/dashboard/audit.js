// SPDX-License-Identifier: Apache-2.0
// sluice dashboard, the audit page (docs/reference/api.md §5.6, §5.7; docs/dashboard.md): the
// proxy's decisions that the user may see, filtered by client, environment, decision, reason,
// host and time (the filters live in the page's hash, #audit?host=...&view=groups, so a reload
// or a link keeps them), either as the live tail of recent lines (GET /api/v1/audit every 2 s
// while shown) or as the refusals grouped by environment, host, port, method and reason (GET
// /api/v1/audit/refusals), each with the rule that would allow it; for those who may change that
// environment, "Add rule" shows exactly what will be applied and applies it on confirm (POST
// .../suggestions/apply). Built with window.sluice's helpers (app.js): never HTML from strings.
'use strict';

(function () {
  const S = window.sluice;
  const { $, el, api } = S;
  const POLL_MS = 2000;
  const FILTERS = ['client', 'environment', 'decision', 'reason', 'host', 'since', 'until'];
  // The reason codes of docs/reference/proxy.md §4.5, offered in the reason field.
  const REASONS = ['host-not-allowed', 'port-not-allowed', 'method-not-allowed', 'no-identity', 'expired',
    'credential-needs-tls', 'private-address', 'placeholder-misuse', 'git-read-only', 'git-protected-branch',
    'git-bad-push', 'no-policy', 'bad-request', 'bad-host', 'host-mismatch', 'not-tls', 'dns',
    'upstream-unreachable', 'upstream-tls', 'upstream-timeout', 'upstream-closed', 'too-large', 'overloaded',
    'client-overloaded', 'out-of-memory', 'audit-unavailable'];

  // filters: what the API is asked (since/until as RFC 3339 UTC); view: 'lines' or 'groups';
  // loads: how many answers the groups view has shown (as #audit-groups' data-loads, for tests).
  const page = { filters: {}, view: 'lines', timer: null, gen: 0, shown: false, groups: [], applied: null, loads: 0 };

  // ---- the filters, in the hash ---------------------------------------------------------------

  function fromHash(hash) {
    const q = new URLSearchParams((hash || '').replace(/^#audit\??/, ''));
    const f = {};
    for (const k of FILTERS) if (q.get(k)) f[k] = q.get(k);
    page.filters = f;
    page.view = q.get('view') === 'groups' ? 'groups' : 'lines';
  }
  // The page's own state survives app.js's showTab() (which sets #audit): read it before that.
  if (location.hash.startsWith('#audit?')) fromHash(location.hash);

  function query(extra) {
    const q = new URLSearchParams();
    for (const k of FILTERS) if (page.filters[k]) q.set(k, page.filters[k]);
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q.toString();
  }

  function saveHash() {
    const q = query(page.view === 'groups' ? { view: 'groups' } : {});
    history.replaceState(null, '', '#audit' + (q ? '?' + q : ''));
  }

  // An RFC 3339 UTC time as the value of a datetime-local input (the browser's time), and back.
  function toLocalInput(ts) {
    const d = new Date(ts);
    if (Number.isNaN(d.getTime())) return '';
    const p = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }
  function fromLocalInput(v) {
    if (!v) return '';
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? null : d.toISOString();
  }

  const inputs = () => ({
    client: $('af-client'), environment: $('af-environment'), decision: $('af-decision'),
    reason: $('af-reason'), host: $('af-host'), since: $('af-since'), until: $('af-until'),
  });

  function fillForm() {
    const i = inputs();
    for (const k of ['client', 'reason', 'host', 'decision']) i[k].value = page.filters[k] || '';
    // An environment the list does not hold (yet): an option of its own, so the value shows.
    const env = page.filters.environment || '';
    if (env && ![...i.environment.options].some((o) => o.value === env)) {
      i.environment.append(el('option', { value: env, text: env }));
    }
    i.environment.value = env;
    i.since.value = page.filters.since ? toLocalInput(page.filters.since) : '';
    i.until.value = page.filters.until ? toLocalInput(page.filters.until) : '';
  }

  // The form's values as filters; an unreadable time is marked at its field (null returned).
  function readForm() {
    const i = inputs();
    const f = {};
    for (const k of ['client', 'reason', 'host', 'decision', 'environment']) {
      const v = i[k].value.trim();
      if (v) f[k] = v;
    }
    for (const k of ['since', 'until']) {
      const v = fromLocalInput(i[k].value);
      if (v === null) {
        S.markField(i[k], k, 'not a time');
        return null;
      }
      if (v) f[k] = v;
    }
    return f;
  }

  function clearErrors() {
    S.clearFormErrors($('audit-filters'), $('audit-filter-error'));
  }

  // An API refusal of the filters: next to the field it names (a 422), else in the banner.
  function showFilterError(err) {
    clearErrors();
    S.showFormError($('audit-filter-error'), inputs(), err);
  }

  $('audit-filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearErrors();
    const f = readForm();
    if (!f) return;
    page.filters = f;
    page.applied = null;
    saveHash();
    refresh();
  });
  $('af-clear').addEventListener('click', () => {
    clearErrors();
    page.filters = {};
    page.applied = null;
    fillForm();
    saveHash();
    refresh();
  });

  // The environments (for the select) and, for admins, the static clients (for the datalist).
  async function loadChoices() {
    const envSelect = $('af-environment');
    try {
      const data = await api('GET', '/api/v1/environments');
      const envs = (data && data.environments) || [];
      const keep = page.filters.environment || '';
      envSelect.replaceChildren(el('option', { value: '', text: 'Any' }),
        ...envs.map((e) => el('option', { value: e.id, text: e.name + (e.scope === 'global' ? '' : ' (yours)') })));
      fillForm();
      envSelect.value = keep;
    } catch (e) {
      // The select keeps "Any"; the tail still works.
    }
    if (S.state.me && S.state.me.admin) {
      try {
        const data = await api('GET', '/api/v1/clients');
        for (const c of (data && data.clients) || []) seenClients.add(c.id);
      } catch (e) {
        // Nothing more to offer.
      }
    }
    offerClients();
  }

  // The clients offered in the client field: those of the lines shown so far (the user's own
  // sandboxes, for a user) and, for admins, the static clients. At most 200.
  const seenClients = new Set();
  function offerClients() {
    const ids = [...seenClients].sort();
    const list = $('af-clients');
    if (list.children.length === ids.length) return;
    list.replaceChildren(...ids.map((id) => el('option', { value: id })));
  }

  // ---- the views ---------------------------------------------------------------------------------

  function setView(view) {
    page.view = view;
    $('audit-show-lines').setAttribute('aria-pressed', String(view === 'lines'));
    $('audit-show-groups').setAttribute('aria-pressed', String(view === 'groups'));
    $('audit-show-lines').classList.toggle('active', view === 'lines');
    $('audit-show-groups').classList.toggle('active', view === 'groups');
    $('audit-lines-card').hidden = view !== 'lines';
    $('audit-groups-card').hidden = view !== 'groups';
  }
  $('audit-show-lines').addEventListener('click', () => { setView('lines'); saveHash(); refresh(); });
  $('audit-show-groups').addEventListener('click', () => { setView('groups'); saveHash(); refresh(); });

  function truncatedNote(box, data) {
    box.hidden = !data.truncated;
    box.textContent = data.truncated
      ? 'Only the newest 4 MiB of the audit log were searched, back to ' + S.when(data.scanned_to)
        + ' UTC; older matching lines are not shown. Narrow the time range to reach them.'
      : '';
  }

  // ---- recent decisions (the live tail) --------------------------------------------------------

  function auditRow(a) {
    // deny: the policy refused it; error: the proxy could not carry it out; challenge: a 407
    // asking for credentials; a transfer cut short (aborted) began as an allow and did not end.
    // observed: let out by learn mode although the policy refuses it (would_deny says why).
    const cut = a.aborted && typeof a.aborted === 'object' ? a.aborted : null;
    const badge = (cut || a.observed === true) && a.decision === 'allow' ? 'warn' : S.decisionBadge(a.decision);
    const verdict = a.decision + (a.status ? ' ' + a.status : '') + (cut ? ' cut (' + cut.side + ' ' + cut.cause + ')' : '');
    const target = (a.method ? a.method + ' ' : '') + (a.scheme ? a.scheme + '://' : '') + (a.host || '') + (a.port ? ':' + a.port : '') + (a.path || '');
    const reason = el('td', { class: 'audit-reason-cell' });
    if (a.reason) reason.append(el('code', { class: 'reason', 'data-testid': 'audit-reason', text: a.reason }));
    if (a.observed === true) reason.append(el('span', { class: 'badge observe observed', 'data-testid': 'audit-observed', text: 'observed — would deny: ' + (a.would_deny || '?') }));
    if (a.suggestion) reason.append(el('span', { class: 'suggestion', 'data-testid': 'audit-suggestion', text: a.suggestion }));
    return el('tr', { 'data-testid': 'audit-row', 'data-host': a.host || '', 'data-client': a.client || '', 'data-decision': a.decision || '', 'data-observed': a.observed === true ? 'true' : null },
      el('td', { class: 'sub', title: a.ts || '', text: (a.ts || '').replace(/^.*T/, '').replace('Z', '') }),
      el('td', { class: 'mono', text: a.client || '—' }),
      el('td', { text: a.environment_name || a.environment || '—' }),
      el('td', { class: 'mono audit-target', text: target }),
      el('td', {}, el('span', { class: 'badge ' + badge, 'data-testid': 'audit-decision', text: verdict })),
      reason);
  }

  async function pollLines(gen) {
    page.timer = null;
    try {
      const data = await api('GET', '/api/v1/audit?' + query({ limit: '100' }));
      if (gen !== page.gen) return;
      const entries = data.entries || [];
      $('audit').replaceChildren(...entries.map(auditRow));
      for (const a of entries) if (a.client && seenClients.size < 200) seenClients.add(a.client);
      offerClients();
      $('audit-empty').hidden = entries.length > 0;
      $('audit-empty').textContent = Object.keys(page.filters).length ? 'No decisions match the filters.' : 'No decisions logged yet.';
      $('audit-error').textContent = '';
      $('audit-filter-error').textContent = '';
      $('audit-scope').textContent = (data.all ? 'Every client' : 'The clients of your sandboxes')
        + (Object.keys(page.filters).length ? ', filtered' : '') + ', newest first (at most 100).';
      truncatedNote($('audit-truncated'), data);
    } catch (e) {
      if (gen !== page.gen) return;
      if (e.status === 422) {
        // The filters are refused: no use asking again until they change.
        showFilterError(e);
        $('audit').replaceChildren();
        return;
      }
      $('audit-error').textContent = e.message;
    }
    // A stop (or a restart) meanwhile ended this chain of polls.
    if (gen === page.gen && page.shown && page.view === 'lines' && S.state.me && $('audit-live').checked) {
      page.timer = setTimeout(() => pollLines(gen), POLL_MS);
    }
  }

  $('audit-live').addEventListener('change', () => { if (page.shown) refresh(); });

  // ---- grouped refusals ----------------------------------------------------------------------

  const ruleText = (rule) => JSON.stringify(rule);
  // What makes a group the same group across reloads (the API groups by these).
  const groupKey = (g) => JSON.stringify([g.environment ? g.environment.id : null, g.host, g.port, g.method, g.reason]);

  function groupRow(g, i) {
    const env = g.environment;
    const envName = env ? (env.name || env.id + ' (deleted)') : '—';
    const target = (g.method ? g.method + ' ' : '') + (g.host || '?') + (g.port ? ':' + g.port : '');
    const rule = el('td', { class: 'group-rule' });
    if (g.rule) {
      rule.append(el('code', { class: 'rule-json', 'data-testid': 'group-rule', text: ruleText(g.rule) }));
      if (g.extends) rule.append(el('span', { class: 'muted small block', text: 'adds ' + (g.rule.methods || []).join(', ') + ' to the rule for ' + g.extends }));
      if (g.can_apply) {
        rule.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'group-apply', onclick: (ev) => preview(i, ev.currentTarget.closest('tr')) }, 'Add rule…'));
      } else {
        rule.append(el('span', { class: 'muted small block', 'data-testid': 'group-no-apply',
          text: env && env.name ? 'You may not change ' + env.name + ' (admins change global environments, owners their own).' : '' }));
      }
    } else {
      rule.append(el('span', { class: 'muted small', 'data-testid': 'group-no-rule',
        text: env && env.name ? 'no rule to suggest (allowed by now, or not a matter of rules)' : 'no environment to add a rule to' }));
    }
    return el('tr', { 'data-testid': 'group-row', 'data-host': g.host || '', 'data-method': g.method || '', 'data-env': env ? env.id : '' },
      el('td', { 'data-label': 'Environment', text: envName }),
      el('td', { class: 'mono audit-target', 'data-label': 'Request', text: target }),
      el('td', { 'data-label': 'Reason' }, el('code', { class: 'reason', text: g.reason || '—' })),
      el('td', { class: 'num', 'data-label': 'Count', 'data-testid': 'group-count', text: String(g.count) }),
      el('td', { class: 'sub', 'data-label': 'Seen' },
        el('span', { class: 'block', title: g.first || '', text: 'first ' + S.localTime(g.first) }),
        el('span', { class: 'block', title: g.last || '', text: 'last ' + S.localTime(g.last) })),
      rule);
  }

  async function loadGroups(gen) {
    try {
      const data = await api('GET', '/api/v1/audit/refusals?' + query());
      if (gen !== page.gen) return;
      // An "Add rule" preview open under a row stays open across a reload (a view switch's or a
      // refresh's) while its group is still there with the same rule to apply; else it goes.
      const open = $('audit-groups').querySelector('tr.apply-row');
      page.groups = data.groups || [];
      const rows = page.groups.map(groupRow);
      $('audit-groups').replaceChildren(...rows);
      if (open) {
        const i = page.groups.findIndex((g) => groupKey(g) === open.dataset.key);
        if (i >= 0 && page.groups[i].can_apply && ruleText(page.groups[i].rule) === open.dataset.rule) rows[i].after(open);
      }
      $('audit-groups').dataset.loads = String(++page.loads);
      $('audit-groups-empty').hidden = page.groups.length > 0;
      $('audit-groups-error').textContent = '';
      $('audit-filter-error').textContent = '';
      $('audit-groups-scope').textContent = data.lines + (data.lines === 1 ? ' refusal' : ' refusals')
        + ' of ' + (data.all ? 'every client' : 'the clients of your sandboxes')
        + ' in ' + page.groups.length + (page.groups.length === 1 ? ' group' : ' groups') + ', most refused first'
        + (data.left_out ? '; ' + data.left_out + ' more in groups not shown' : '') + '.';
      truncatedNote($('audit-groups-truncated'), data);
      $('audit-applied').hidden = !page.applied;
      $('audit-applied').textContent = page.applied || '';
    } catch (e) {
      if (gen !== page.gen) return;
      if (e.status === 422) {
        showFilterError(e);
        $('audit-groups').replaceChildren();
      } else {
        $('audit-groups-error').textContent = e.message;
      }
    }
  }
  $('audit-groups-refresh').addEventListener('click', () => { page.applied = null; refresh(); });

  // Shows, under group i's row `row`, exactly what "Add rule" will do, and does it on confirm.
  function preview(i, row) {
    const g = page.groups[i];
    for (const open of $('audit-groups').querySelectorAll('tr.apply-row')) open.remove();
    const error = el('p', { class: 'form-error', 'data-testid': 'apply-error', role: 'alert' });
    const confirm = el('button', { type: 'button', class: 'btn primary', 'data-testid': 'apply-confirm' }, 'Add to ' + g.environment.name);
    const cancel = el('button', { type: 'button', class: 'btn', 'data-testid': 'apply-cancel' }, 'Cancel');
    const box = el('div', { class: 'apply-preview', 'data-testid': 'apply-preview', 'data-env': g.environment.id },
      el('p', {}, 'This adds one rule to environment ', el('strong', { 'data-testid': 'apply-env', text: g.environment.name }),
        g.extends ? ' (its methods go into the rule for ' + g.extends + ', which a second rule for that host would lose to):' : ':'),
      el('pre', { class: 'rule-json', 'data-testid': 'apply-rule', text: JSON.stringify(g.rule, null, 2) }),
      el('p', { class: 'muted small', text: 'It is validated and stored like any change of the environment; the proxies let the '
        + 'request through once they hold the new snapshot, in a moment.' }),
      error,
      el('div', { class: 'apply-actions' }, confirm, cancel));
    const tr = el('tr', { class: 'apply-row edit-row', 'data-key': groupKey(g), 'data-rule': ruleText(g.rule) },
      el('td', { colspan: '6' }, box));
    row.after(tr);
    cancel.addEventListener('click', () => tr.remove());
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      error.textContent = '';
      try {
        await api('POST', '/api/v1/environments/' + encodeURIComponent(g.environment.id) + '/suggestions/apply', { rules: [g.rule] });
        page.applied = 'Added ' + ruleText(g.rule) + ' to environment ' + g.environment.name + '.';
        S.toast(page.applied, 'ok');
        tr.remove();
        refresh();
      } catch (e) {
        const errs = (e.body && e.body.errors) || [];
        error.textContent = e.message + errs.map((x) => ' ' + x.field + ': ' + x.message).join('');
        confirm.disabled = false;
      }
    });
    confirm.focus();
  }

  // ---- the page --------------------------------------------------------------------------------

  function stop() {
    page.gen++;
    if (page.timer !== null) clearTimeout(page.timer);
    page.timer = null;
  }

  function refresh() {
    stop();
    if (page.view === 'groups') loadGroups(page.gen);
    else pollLines(page.gen);
  }

  S.page('audit', {
    load() {
      page.shown = true;
      setView(page.view);
      fillForm();
      saveHash();
      refresh();
      loadChoices();
    },
    leave() {
      page.shown = false;
      stop();
      for (const open of document.querySelectorAll('#audit-groups tr.apply-row')) open.remove();
    },
    reset() {
      page.shown = false;
      stop();
      page.filters = {};
      page.view = 'lines';
      page.groups = [];
      page.applied = null;
      seenClients.clear();
      $('audit').replaceChildren();
      $('audit-groups').replaceChildren();
      $('af-clients').replaceChildren();
      $('af-environment').replaceChildren(el('option', { value: '', text: 'Any' }));
      for (const id of ['audit-scope', 'audit-groups-scope', 'audit-error', 'audit-groups-error', 'audit-filter-error']) $(id).textContent = '';
      for (const id of ['audit-truncated', 'audit-groups-truncated', 'audit-applied']) $(id).hidden = true;
      clearErrors();
      fillForm();
    },
  });

  $('af-reasons').replaceChildren(...REASONS.map((r) => el('option', { value: r })));
})();
