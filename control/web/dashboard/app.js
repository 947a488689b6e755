// SPDX-License-Identifier: Apache-2.0
// sluice dashboard (docs/reference/api.md §5.6): a static page that talks to the REST API of §5 with the
// user's token. No framework, no build step; the Content-Security-Policy forbids inline script,
// so every handler is attached here and the page never builds HTML from strings.
'use strict';

(function () {
  const TOKEN_KEY = 'sluice.token';
  const MASK = '******';
  const AUDIT_MS = 2000;

  const state = { token: null, me: null, envs: [], editing: null, tab: 'environments', auditTimer: null, auditGen: 0 };

  const $ = (id) => document.getElementById(id);

  // el('td', {class: 'x', text: 'y'}, child...) builds an element without innerHTML.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function toast(message, kind) {
    const t = el('div', { class: 'toast ' + (kind || ''), role: 'status', 'data-testid': 'toast', text: message });
    $('toasts').append(t);
    setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
  }

  // ---- the API ------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      super((body && (body.message || body.error)) || 'HTTP ' + status);
      this.status = status;
      this.body = body || {};
    }
  }

  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + state.token };
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, { message: 'the control plane does not answer (' + e.message + ')' });
    }
    let data = null;
    const text = await res.text();
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = { message: text.slice(0, 200) }; }
    }
    if (res.status === 401 && state.me) {
      signOut('Your token is no longer accepted; sign in again.');
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  // ---- sign in / out ------------------------------------------------------------------------

  async function signIn(token) {
    state.token = token;
    try {
      state.me = await api('GET', '/api/v1/me');
    } catch (e) {
      state.token = null;
      state.me = null;
      throw e;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $('who-name').textContent = state.me.name;
    $('who-role').textContent = state.me.admin ? 'admin' : 'user';
    document.body.classList.toggle('is-admin', !!state.me.admin);
    $('signin').hidden = true;
    $('who').hidden = false;
    $('tabs').hidden = false;
    showTab(location.hash.replace('#', '') || 'environments');
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    state.me = null;
    stopAudit();
    closeDrawer();
    for (const v of document.querySelectorAll('.view')) v.hidden = true;
    $('who').hidden = true;
    $('tabs').hidden = true;
    $('signin').hidden = false;
    $('token').value = '';
    $('signin-error').textContent = message || '';
  }

  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const token = $('token').value.trim();
    $('signin-error').textContent = '';
    if (!token) {
      $('signin-error').textContent = 'Paste your API token.';
      return;
    }
    try {
      await signIn(token);
    } catch (e) {
      $('signin-error').textContent = e.status === 401
        ? 'This token is not valid: the control plane says "' + e.message + '".'
        : 'Cannot sign in: ' + e.message;
    }
  });
  $('sign-out').addEventListener('click', () => signOut(''));

  // ---- tabs ---------------------------------------------------------------------------------

  function showTab(name) {
    if (!['environments', 'sandboxes', 'audit'].includes(name)) name = 'environments';
    state.tab = name;
    history.replaceState(null, '', '#' + name);
    for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === name);
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + name;
    stopAudit();
    if (name === 'environments') loadEnvs();
    if (name === 'sandboxes') loadSandboxes();
    if (name === 'audit') startAudit();
  }
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => showTab(b.dataset.tab));

  // ---- environments -------------------------------------------------------------------------

  function egressSummary(e) {
    if (e.network === 'off') return 'none';
    const rules = (e.egress && e.egress.rules) || [];
    const d = (e.egress && e.egress.default) || 'deny';
    return d + ' · ' + rules.length + (rules.length === 1 ? ' rule' : ' rules');
  }

  function canWrite(e) {
    return e.scope === 'user' || (state.me && state.me.admin);
  }

  function envRow(e) {
    const nameCell = el('td', {},
      el('div', {}, el('strong', { text: e.name }), ' ', e.is_default ? el('span', { class: 'badge default', text: 'default', 'data-testid': 'default-badge' }) : null),
      e.description ? el('div', { class: 'sub', text: e.description }) : null);
    const actions = el('td', { class: 'actions' });
    actions.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-edit', text: canWrite(e) ? 'Edit' : 'View', onclick: () => openDrawer(e.id) }));
    if (e.scope === 'global' && state.me.admin && !e.is_default) {
      actions.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-set-default', text: 'Set default', onclick: () => setDefault(e) }));
    }
    if (canWrite(e)) {
      actions.append(el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'env-delete', text: 'Delete', onclick: () => deleteEnv(e) }));
    }
    return el('tr', { 'data-env': e.name, 'data-testid': 'env-row' },
      nameCell,
      el('td', {}, el('span', { class: 'badge ' + (e.network === 'on' ? 'ok' : ''), text: e.network })),
      el('td', { text: egressSummary(e) }),
      el('td', { class: 'mono', text: (e.repositories || []).join(', ') }),
      el('td', { class: 'sub', text: (e.updated_at || '').replace('T', ' ').replace(/\..*|Z$/, '') }),
      actions);
  }

  async function loadEnvs() {
    try {
      const data = await api('GET', '/api/v1/environments');
      state.envs = data.environments || [];
    } catch (e) {
      toast('Cannot list environments: ' + e.message, 'error');
      return;
    }
    const mine = state.envs.filter((e) => e.scope === 'user');
    const global = state.envs.filter((e) => e.scope === 'global');
    $('user-envs').replaceChildren(...mine.map(envRow));
    $('global-envs').replaceChildren(...global.map(envRow));
    $('user-envs-empty').hidden = mine.length > 0;
    $('global-envs-empty').hidden = global.length > 0;
  }

  async function setDefault(e) {
    try {
      await api('POST', '/api/v1/environments/' + encodeURIComponent(e.id) + '/set-default');
      toast(e.name + ' is now the default environment', 'ok');
    } catch (err) {
      toast('Cannot make ' + e.name + ' the default: ' + err.message, 'error');
    }
    loadEnvs();
  }

  async function deleteEnv(e) {
    if (!window.confirm('Delete environment ' + e.name + '?')) return;
    try {
      await api('DELETE', '/api/v1/environments/' + encodeURIComponent(e.id));
      toast('Deleted ' + e.name, 'ok');
    } catch (err) {
      toast('Cannot delete ' + e.name + ': ' + err.message, 'error');
    }
    loadEnvs();
  }

  $('env-new').addEventListener('click', () => openDrawer(null));

  // ---- the drawer ---------------------------------------------------------------------------

  function addVarRow(v) {
    const row = $('tpl-env-row').content.firstElementChild.cloneNode(true);
    const value = row.querySelector('.v-value');
    const secret = row.querySelector('.v-secret');
    row.querySelector('.v-name').value = (v && v.name) || '';
    value.value = (v && v.value) || '';
    secret.checked = !!(v && v.secret);
    value.type = secret.checked ? 'password' : 'text';
    if (v && v.secret && v.value === MASK) value.title = 'stored secret: leave ' + MASK + ' to keep it';
    secret.addEventListener('change', () => { value.type = secret.checked ? 'password' : 'text'; });
    row.querySelector('.v-remove').addEventListener('click', () => row.remove());
    $('f-env').append(row);
    return row;
  }

  function addRuleRow(r) {
    const row = $('tpl-rule-row').content.firstElementChild.cloneNode(true);
    const cred = (r && r.credential) || null;
    row.querySelector('.r-host').value = (r && r.host) || '';
    row.querySelector('.r-methods').value = ((r && r.methods) || []).join(', ');
    row.querySelector('.r-header').value = (cred && cred.header) || '';
    const value = row.querySelector('.r-value');
    if (cred && cred.has_value) {
      value.placeholder = 'keep existing';
      row.dataset.hasValue = 'true';
    } else {
      value.placeholder = cred ? 'value' : '';
    }
    if (r && r.tls) row.dataset.tls = r.tls;
    row.querySelector('.r-remove').addEventListener('click', () => row.remove());
    $('f-rules').append(row);
    return row;
  }

  function syncNetwork() {
    const off = $('f-network').value === 'off';
    $('egress-box').classList.toggle('muted', off);
    $('f-egress-default').disabled = off || $('env-form').dataset.readonly === 'true';
  }
  $('f-network').addEventListener('change', syncNetwork);
  $('f-env-add').addEventListener('click', () => addVarRow(null).querySelector('.v-name').focus());
  $('f-rule-add').addEventListener('click', () => addRuleRow(null).querySelector('.r-host').focus());

  function fillForm(e) {
    $('f-name').value = e ? e.name : '';
    $('f-description').value = (e && e.description) || '';
    const scope = $('f-scope');
    scope.querySelector('option[value=global]').hidden = !state.me.admin;
    scope.querySelector('option[value=global]').disabled = !state.me.admin;
    scope.value = e ? e.scope : 'user';
    $('f-base_image').value = (e && e.base_image) || '';
    $('f-cpus').value = e && e.cpus !== null && e.cpus !== undefined ? String(e.cpus) : '';
    $('f-memory').value = (e && e.memory) || '';
    $('f-network').value = e ? e.network : 'on';
    $('f-egress-default').value = (e && e.egress && e.egress.default) || 'deny';
    $('f-env').replaceChildren();
    $('f-rules').replaceChildren();
    for (const v of (e && e.env) || []) addVarRow(v);
    for (const r of (e && e.egress && e.egress.rules) || []) addRuleRow(r);
    $('f-repositories').value = ((e && e.repositories) || []).join('\n');
    syncNetwork();
  }

  function setReadonly(ro) {
    $('env-form').dataset.readonly = ro ? 'true' : 'false';
    for (const i of $('env-form').querySelectorAll('input, select, textarea, .v-remove, .r-remove, #f-env-add, #f-rule-add')) {
      i.disabled = ro;
    }
    $('env-save').hidden = ro;
  }

  async function openDrawer(id) {
    clearErrors();
    let e = null;
    if (id) {
      try {
        e = await api('GET', '/api/v1/environments/' + encodeURIComponent(id));
      } catch (err) {
        toast('Cannot read the environment: ' + err.message, 'error');
        return;
      }
    }
    state.editing = e;
    fillForm(e);
    const ro = !!e && !canWrite(e);
    setReadonly(ro);
    $('f-scope').disabled = ro || !!e;
    $('drawer-title').textContent = !e ? 'New environment' : (ro ? '' : 'Edit ') + e.name + (ro ? ' (read only)' : '');
    $('drawer').hidden = false;
    $('scrim').hidden = false;
    $('f-name').focus();
  }

  function closeDrawer() {
    $('drawer').hidden = true;
    $('scrim').hidden = true;
    state.editing = null;
  }
  $('drawer-close').addEventListener('click', closeDrawer);
  $('drawer-cancel').addEventListener('click', closeDrawer);
  $('scrim').addEventListener('click', closeDrawer);
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && !$('drawer').hidden) closeDrawer(); });

  // The body of §5.1 from the form. Numbers and lists are sent as typed so that the API, not
  // the page, judges them (and names the field when they are wrong).
  function formBody() {
    const cpusText = $('f-cpus').value.trim();
    const cpusNum = Number(cpusText);
    const body = {
      name: $('f-name').value.trim(),
      description: $('f-description').value,
      scope: $('f-scope').value,
      base_image: $('f-base_image').value.trim(),
      cpus: cpusText === '' ? null : (Number.isFinite(cpusNum) ? cpusNum : cpusText),
      memory: $('f-memory').value.trim() === '' ? null : $('f-memory').value.trim(),
      network: $('f-network').value,
      env: [],
      repositories: $('f-repositories').value.split('\n').map((s) => s.trim()).filter((s) => s !== ''),
    };
    for (const row of $('f-env').children) {
      body.env.push({
        name: row.querySelector('.v-name').value.trim(),
        value: row.querySelector('.v-value').value,
        secret: row.querySelector('.v-secret').checked,
      });
    }
    if (body.network === 'on') {
      body.egress = { default: $('f-egress-default').value, rules: [] };
      for (const row of $('f-rules').children) {
        const rule = { host: row.querySelector('.r-host').value.trim() };
        const methods = row.querySelector('.r-methods').value.split(/[\s,]+/).filter((s) => s !== '');
        if (methods.length) rule.methods = methods;
        const header = row.querySelector('.r-header').value.trim();
        const value = row.querySelector('.r-value').value;
        if (header || value) {
          rule.credential = { header };
          // Empty with a stored value: send no value, the API keeps the stored one.
          if (value !== '') rule.credential.value = value;
        }
        if (row.dataset.tls) rule.tls = row.dataset.tls;
        body.egress.rules.push(rule);
      }
    }
    return body;
  }

  // ---- errors next to their fields ----------------------------------------------------------

  function clearErrors() {
    $('form-error').textContent = '';
    for (const e of $('env-form').querySelectorAll('.invalid')) e.classList.remove('invalid');
    for (const e of $('env-form').querySelectorAll('.field-error.dynamic')) e.remove();
    for (const e of $('env-form').querySelectorAll('[data-error-for]')) e.textContent = '';
  }

  // The input an error's field path (`egress.rules[2].host`, `env[0].name`, `cpus`) names, or
  // null when none does.
  function inputFor(field) {
    let m = /^egress\.rules\[(\d+)\](?:\.(\w+))?(?:\.(\w+))?/.exec(field);
    if (m) {
      const row = $('f-rules').children[Number(m[1])];
      if (!row) return $('f-rules');
      const key = m[2] === 'credential' ? (m[3] === 'value' ? 'value' : 'header') : m[2];
      const cls = { host: '.r-host', methods: '.r-methods', header: '.r-header', value: '.r-value', tls: '.r-host' }[key] || '.r-host';
      return row.querySelector(cls);
    }
    m = /^env\[(\d+)\](?:\.(\w+))?/.exec(field);
    if (m) {
      const row = $('f-env').children[Number(m[1])];
      if (!row) return $('f-env');
      return row.querySelector(m[2] === 'value' || m[2] === 'secret' ? (m[2] === 'value' ? '.v-value' : '.v-secret') : '.v-name');
    }
    if (/^repositories/.test(field)) return $('f-repositories');
    if (field === 'egress.default') return $('f-egress-default');
    if (/^egress\.rules$/.test(field)) return $('f-rules');
    if (field === 'egress') return $('egress-box');
    if (field === 'env') return $('f-env');
    const direct = $('env-form').querySelector('[data-field="' + CSS.escape(field.split(/[.[]/)[0]) + '"]');
    return direct;
  }

  function showFieldError(field, message) {
    const input = inputFor(field);
    const text = field + ': ' + message;
    if (!input) {
      $('form-error').textContent += ($('form-error').textContent ? '\n' : '') + text;
      return;
    }
    if (input.tagName === 'TBODY' || input.tagName === 'FIELDSET') {
      const holder = $('env-form').querySelector('[data-error-for="' + (input.dataset.field || 'egress') + '"]');
      if (holder) { holder.textContent += (holder.textContent ? ' ' : '') + text; return; }
    }
    input.classList.add('invalid');
    const p = el('p', { class: 'field-error dynamic', 'data-testid': 'field-error', 'data-field': field, text: message });
    input.insertAdjacentElement('afterend', p);
  }

  $('env-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    const body = formBody();
    const e = state.editing;
    const save = $('env-save');
    save.disabled = true;
    try {
      const saved = e
        ? await api('PUT', '/api/v1/environments/' + encodeURIComponent(e.id), body)
        : await api('POST', '/api/v1/environments', body);
      toast((e ? 'Saved ' : 'Created ') + saved.name, 'ok');
      closeDrawer();
      loadEnvs();
    } catch (err) {
      const errors = (err.body && err.body.errors) || [];
      if (errors.length) {
        $('form-error').textContent = err.message;
        for (const x of errors) showFieldError(String(x.field || ''), String(x.message || ''));
      } else {
        $('form-error').textContent = err.message + (err.status ? ' (HTTP ' + err.status + ')' : '');
      }
    } finally {
      save.disabled = false;
    }
  });

  // ---- resolution ---------------------------------------------------------------------------

  const MATCHED = {
    explicit: 'chosen explicitly',
    'user-binding': 'your environment bound to this repository',
    'global-binding': 'a global environment bound to this repository',
    'global-default': 'the global default',
    none: 'no environment applies (network off)',
  };

  $('resolve-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('resolve-error').textContent = '';
    $('resolve-result').hidden = true;
    const repo = $('resolve-repo').value.trim();
    let r;
    try {
      r = await api('GET', '/api/v1/resolve?repo=' + encodeURIComponent(repo));
    } catch (e) {
      $('resolve-error').textContent = e.message;
      return;
    }
    const env = r.environment;
    const rules = (r.egress && r.egress.rules) || [];
    const dl = el('dl', { class: 'resolved' },
      el('dt', { text: 'Environment' }), el('dd', { 'data-testid': 'resolved-env' }, el('strong', { text: env ? env.name : '(none)' }), env && env.scope ? el('span', { class: 'muted', text: ' · ' + env.scope }) : null),
      el('dt', { text: 'Matched by' }), el('dd', {}, el('code', { 'data-testid': 'resolved-matched-by', text: r.matched_by }), el('span', { class: 'muted', text: ' — ' + (MATCHED[r.matched_by] || '') })),
      el('dt', { text: 'Base image' }), el('dd', { class: 'mono', text: r.base_image }),
      el('dt', { text: 'CPUs / memory' }), el('dd', { text: (r.cpus === null ? 'unlimited' : r.cpus) + ' / ' + (r.memory || 'unlimited') }),
      el('dt', { text: 'Network' }), el('dd', { text: r.network + (r.network === 'on' && r.egress ? ' · default ' + r.egress.default + ' · ' + rules.map((x) => x.host).join(', ') : '') }),
      el('dt', { text: 'Variables' }), el('dd', { class: 'mono', text: (r.env || []).map((v) => v.name + (v.secret ? ' (secret)' : '') + (v.inherited ? ' ← default' : '')).join(', ') || '—' }));
    $('resolve-result').replaceChildren(dl);
    $('resolve-result').hidden = false;
  });

  // ---- sandboxes ----------------------------------------------------------------------------

  async function loadSandboxes() {
    $('sandboxes-error').textContent = '';
    let list;
    try {
      list = await api('GET', '/api/v1/sandboxes');
    } catch (e) {
      $('sandboxes').replaceChildren();
      $('sandboxes-empty').hidden = true;
      $('sandboxes-error').textContent = e.message;
      return;
    }
    $('sandboxes').replaceChildren(...list.map((s) => el('tr', { 'data-sandbox': s.id, 'data-testid': 'sandbox-row' },
      el('td', { class: 'mono', text: s.id }),
      el('td', { class: 'mono', text: s.repo }),
      el('td', { text: s.ref || '(default)' }),
      el('td', { text: s.environment || '(none)' }),
      el('td', {}, el('span', { class: 'badge ' + (s.status === 'ready' ? 'ok' : 'warn'), text: s.status })),
      el('td', { class: 'sub', text: (s.expires_at || '').replace('T', ' ').replace('Z', '') }),
      el('td', { class: 'actions' }, el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'sandbox-close', text: 'Close', onclick: (ev) => closeSandbox(s, ev.target) })))));
    $('sandboxes-empty').hidden = list.length > 0;
  }

  async function closeSandbox(s, button) {
    button.disabled = true;
    button.textContent = 'Closing…';
    const [owner, name] = s.repo.split('/');
    try {
      await api('POST', '/api/v1/repos/' + encodeURIComponent(owner) + '/' + encodeURIComponent(name) + '/sandboxes/' + encodeURIComponent(s.id) + '/close');
      toast('Closed sandbox ' + s.id, 'ok');
    } catch (e) {
      toast('Cannot close ' + s.id + ': ' + e.message, 'error');
    }
    loadSandboxes();
  }
  $('sandboxes-refresh').addEventListener('click', loadSandboxes);

  // ---- audit tail ---------------------------------------------------------------------------

  function auditRow(a) {
    // deny: the policy refused it; error: the proxy could not carry it out; a transfer cut
    // short (aborted) began as an allow and did not end.
    const cut = a.aborted && typeof a.aborted === 'object' ? a.aborted : null;
    const badge = a.decision === 'deny' ? 'bad' : (a.decision === 'error' || cut) ? 'warn' : 'ok';
    const verdict = a.decision + (a.status ? ' ' + a.status : '') + (cut ? ' cut (' + cut.side + ' ' + cut.cause + ')' : '');
    const target = (a.method ? a.method + ' ' : '') + (a.scheme ? a.scheme + '://' : '') + (a.host || '') + (a.port ? ':' + a.port : '') + (a.path || '');
    const reason = el('td', {});
    if (a.reason) reason.append(el('code', { class: 'reason', 'data-testid': 'audit-reason', text: a.reason }));
    if (a.suggestion) reason.append(el('span', { class: 'suggestion', 'data-testid': 'audit-suggestion', text: a.suggestion }));
    return el('tr', { 'data-testid': 'audit-row', 'data-host': a.host || '' },
      el('td', { class: 'sub', text: (a.ts || '').replace(/^.*T/, '').replace('Z', '') }),
      el('td', { class: 'mono', text: a.client || '—' }),
      el('td', { text: a.environment_name || a.environment || '—' }),
      el('td', { class: 'mono', text: target }),
      el('td', {}, el('span', { class: 'badge ' + badge, 'data-testid': 'audit-decision', text: verdict })),
      reason);
  }

  async function pollAudit(gen) {
    state.auditTimer = null;
    try {
      const data = await api('GET', '/api/v1/audit?limit=100');
      $('audit').replaceChildren(...(data.entries || []).map(auditRow));
      $('audit-empty').hidden = (data.entries || []).length > 0;
      $('audit-error').textContent = '';
      $('audit-scope').textContent = data.all
        ? 'Every client, newest first (you are an admin).'
        : 'The clients of your sandboxes, newest first.';
    } catch (e) {
      $('audit-error').textContent = e.message;
    }
    // A stop (or a restart) meanwhile ended this chain of polls.
    if (gen === state.auditGen && state.tab === 'audit' && state.me && $('audit-live').checked) {
      state.auditTimer = setTimeout(() => pollAudit(gen), AUDIT_MS);
    }
  }

  function startAudit() {
    stopAudit();
    pollAudit(state.auditGen);
  }

  function stopAudit() {
    state.auditGen++;
    if (state.auditTimer !== null) clearTimeout(state.auditTimer);
    state.auditTimer = null;
  }
  $('audit-live').addEventListener('change', () => { if ($('audit-live').checked && state.tab === 'audit') startAudit(); else stopAudit(); });

  // ---- start --------------------------------------------------------------------------------

  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) {
    signIn(saved).catch((e) => signOut(e.status === 401 ? 'Your saved token is no longer accepted; sign in again.' : 'Cannot reach the control plane: ' + e.message));
  } else {
    signOut('');
  }
})();
