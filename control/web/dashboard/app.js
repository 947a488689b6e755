// SPDX-License-Identifier: Apache-2.0
// sluice dashboard (docs/reference/api.md §5.6): a static page that talks to the REST API of §5 with the
// user's token: environments (with learn mode: observe and suggested rules), sandboxes, repositories and members, API tokens, users (the audit page is audit.js). No framework, no build step; the Content-Security-Policy forbids inline script,
// so every handler is attached here and the page never builds HTML from strings.
// The other pages live in files of their own, loaded after this one (index.html, all `defer`):
// each calls window.sluice.page(NAME, {load, leave, reset}) with the helpers this file hands out
// in window.sluice, and the tabs show it like the pages here. The page starts (signs in with the
// saved token) once every file ran (DOMContentLoaded). The drawers are modal dialogs (the page
// behind inert, the focus taken and given back); a table that scrolls sideways takes the focus.
'use strict';

(function () {
  const TOKEN_KEY = 'sluice.token';
  const MASK = '******';

  const TABS = ['environments', 'sandboxes', 'repos', 'tokens', 'users'];
  const ROLES = ['read', 'write', 'admin'];

  const state = { token: null, me: null, envs: [], editing: null, repo: null, learn: null, tab: 'environments', observeTimer: null };

  const $ = (id) => document.getElementById(id);

  // el('td', {class: 'x', text: 'y'}, child...) builds an element; text goes in as textContent, never as markup.
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

  // A fresh id, for a label's `for` in rows built here.
  let idSeq = 0;
  const freshId = (prefix) => prefix + '-' + (++idSeq);

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
    // What only admins may do is not offered to others (the API refuses it anyway).
    for (const e of document.querySelectorAll('.admin-only')) {
      e.hidden = !state.me.admin;
      if (e.tagName === 'OPTION') e.disabled = !state.me.admin;
    }
    $('signin').hidden = true;
    $('who').hidden = false;
    $('tabs').hidden = false;
    // A page may keep its own state after a '?' in the hash (#audit?host=x).
    showTab(location.hash.replace('#', '').split('?')[0] || 'environments');
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    state.me = null;
    closeDrawer();
    closeRepoDrawer();
    closeLearnDrawer();
    if (state.observeTimer !== null) clearTimeout(state.observeTimer);
    state.observeTimer = null;
    hideOnce();
    for (const p of Object.values(pages)) {
      if (p.leave) p.leave();
      if (p.reset) p.reset();
    }
    // Nothing of this session stays in the page: the next one (maybe another user's) starts
    // from empty lists and never reads a stale row.
    for (const id of ['user-envs', 'global-envs', 'sandboxes', 'repos', 'tokens', 'users', 'learn-suggestions', 'learn-result-rules']) $(id).replaceChildren();
    $('resolve-result').replaceChildren();
    $('resolve-result').hidden = true;
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

  // The pages of the other files: name -> {load(), leave(), reset()}, each optional. load runs
  // when the tab is shown, leave when another is (stop polling there), reset at sign-out (empty
  // every list: nothing of one session stays for the next).
  const pages = {};
  function registerPage(name, hooks) {
    if (TABS.includes(name) || pages[name]) throw new Error('page ' + name + ' is registered twice');
    pages[name] = hooks || {};
  }

  // `arg` goes to the page's load (the sandbox page: which sandbox to show).
  function showTab(name, arg) {
    if ((!TABS.includes(name) && !pages[name]) || (name === 'users' && !state.me.admin)) name = 'environments';
    state.tab = name;
    history.replaceState(null, '', '#' + name);
    for (const b of document.querySelectorAll('.tab')) {
      b.classList.toggle('active', b.dataset.tab === name);
      if (b.dataset.tab === name) b.setAttribute('aria-current', 'page');
      else b.removeAttribute('aria-current');
    }
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + name;
    for (const [n, p] of Object.entries(pages)) if (n !== name && p.leave) p.leave();
    if (pages[name] && pages[name].load) pages[name].load(arg);
    if (name === 'environments') loadEnvs();
    if (name === 'sandboxes') loadSandboxes();
    if (name === 'repos') loadRepos();
    if (name === 'tokens') loadTokens();
    if (name === 'users') loadUsers();
  }
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => showTab(b.dataset.tab));

  // ---- environments -------------------------------------------------------------------------

  // An image pull's progress (api.md §5.3): "12.3 / 40.0 MiB, 2/5 layers".
  function pullText(p) {
    const mib = (n) => (n / 1048576).toFixed(1);
    const bytes = p.bytes_total > 0 ? mib(p.bytes) + ' / ' + mib(p.bytes_total) + ' MiB, ' : '';
    return bytes + p.layers_done + '/' + p.layers + ' layers';
  }

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
    const until = observing(e) ? e.observe_until : null;
    const nameCell = el('td', {},
      el('div', {}, el('strong', { text: e.name }), ' ', e.is_default ? el('span', { class: 'badge default', text: 'default', 'data-testid': 'default-badge' }) : null),
      until ? el('div', {}, el('span', { class: 'badge observe', 'data-testid': 'observe-badge', 'data-until': until, title: 'learn mode: what its policy refuses is let out and recorded until ' + until, text: 'observing until ' + localTime(until) })) : null,
      e.description ? el('div', { class: 'sub', text: e.description }) : null);
    const actions = el('td', { class: 'actions' });
    actions.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-edit', text: canWrite(e) ? 'Edit' : 'View', onclick: () => openDrawer(e.id) }));
    // Learn mode (api.md §5.1): admins on global environments, owners on their own; a network-off
    // environment has nothing to let out, nor rules to add.
    // On a line of their own, under the others.
    const learn = canWrite(e) && e.network === 'on' ? el('div', { class: 'learn-actions' }) : null;
    if (learn) {
      learn.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-observe', text: until ? 'New deadline…' : 'Observe…', onclick: (ev) => toggleObserveRow(e, ev.target.closest('tr')) }));
      if (until) learn.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-observe-stop', text: 'Stop observing', onclick: (ev) => stopObserving(e, ev.target) }));
      learn.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-suggestions', text: 'Suggestions', onclick: () => openLearnDrawer(e) }));
    }
    if (e.scope === 'global' && state.me.admin && !e.is_default) {
      actions.append(el('button', { type: 'button', class: 'btn small', 'data-testid': 'env-set-default', text: 'Set default', onclick: () => setDefault(e) }));
    }
    if (canWrite(e)) {
      actions.append(el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'env-delete', text: 'Delete', onclick: () => deleteEnv(e) }));
    }
    if (learn) actions.append(learn);
    return el('tr', { 'data-env': e.name, 'data-testid': 'env-row' },
      nameCell,
      el('td', { class: 'mono', 'data-testid': 'env-image', text: e.base_image + (e.image_pull === 'always' ? ' (always pulled)' : '') }),
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
    // The focus stays on the same button of the same environment's new row (a drawer closed
    // gives it back to its Edit button just before this).
    const had = document.activeElement;
    const tr = had && had.dataset.testid ? had.closest('tr[data-env]') : null;
    const list = tr ? tr.parentElement : null;
    $('user-envs').replaceChildren(...mine.map(envRow));
    $('global-envs').replaceChildren(...global.map(envRow));
    if (tr && !tr.isConnected) {
      const again = list.querySelector('tr[data-env="' + CSS.escape(tr.dataset.env) + '"] [data-testid="' + CSS.escape(had.dataset.testid) + '"]');
      if (again) again.focus();
    }
    $('user-envs-empty').hidden = mine.length > 0;
    $('global-envs-empty').hidden = global.length > 0;
    // The marks go when the first deadline passes (the proxies end observe by themselves then).
    if (state.observeTimer !== null) clearTimeout(state.observeTimer);
    state.observeTimer = null;
    const next = Math.min(...state.envs.filter(observing).map((e) => Date.parse(e.observe_until)));
    if (Number.isFinite(next)) {
      state.observeTimer = setTimeout(() => {
        state.observeTimer = null;
        if (state.me && state.tab === 'environments') loadEnvs();
      }, Math.min(next - Date.now() + 1000, 2147483647));
    }
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

  // ---- learn mode (api.md §5.1) -------------------------------------------------------------

  // The minutes observe may last (the API takes 1 to 1440; 60 when none is sent).
  const OBSERVE_CHOICES = [[15, '15 minutes'], [60, '1 hour'], [240, '4 hours'], [1440, '24 hours (the most)']];

  function observing(e) {
    return !!e.observe_until && Date.parse(e.observe_until) > Date.now();
  }

  // A time of the API in the browser's time zone: "14:05", or "Tue, 3 Dec 14:05" on another day.
  function localTime(ts) {
    const d = new Date(ts);
    if (Number.isNaN(d.getTime())) return ts || '';
    const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    return d.toDateString() === new Date().toDateString() ? t
      : d.toLocaleDateString([], { weekday: 'short', day: 'numeric', month: 'short' }) + ' ' + t;
  }

  // Opens (or closes) the row under `tr` that puts the environment in observe: the duration, and
  // what observe means, before anything changes.
  function toggleObserveRow(e, tr) {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains('edit-row')) {
      next.remove();
      return;
    }
    const minutes = el('select', { id: freshId('observe-minutes'), 'data-field': 'minutes', 'data-testid': 'observe-minutes' },
      ...OBSERVE_CHOICES.map(([m, label]) => el('option', { value: String(m), text: label })));
    minutes.value = '60';
    const banner = el('p', { class: 'form-error', 'data-testid': 'observe-error', role: 'alert' });
    const form = el('form', { class: 'observe-form', novalidate: true },
      el('p', { class: 'small', text: 'While in observe, what the policy of ' + e.name + ' refuses for its host, port or method is let out (without any credential) and recorded in the audit log, '
        + 'until the deadline or until you stop it. Its suggestions then propose the rules; nothing is added before you apply them.' }),
      el('div', { class: 'row' },
        el('div', { class: 'field' }, el('label', { for: minutes.id, text: 'Observe for' }), minutes),
        el('div', { class: 'field end' },
          el('button', { type: 'submit', class: 'btn primary small', 'data-testid': 'observe-start', text: observing(e) ? 'Set the new deadline' : 'Start observing' }), ' ',
          el('button', { type: 'button', class: 'btn small', text: 'Cancel', onclick: () => row.remove() }))),
      banner);
    const row = el('tr', { class: 'edit-row', 'data-testid': 'observe-row' }, el('td', { colspan: '7' }, form));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearFormErrors(form, banner);
      const button = form.querySelector('[type=submit]');
      button.disabled = true;
      try {
        const saved = await api('POST', '/api/v1/environments/' + encodeURIComponent(e.id) + '/observe', { minutes: Number(minutes.value) });
        toast(saved.name + ' is observing until ' + localTime(saved.observe_until), 'ok');
        loadEnvs();
      } catch (err) {
        showFormError(banner, { minutes }, err, null);
        button.disabled = false;
      }
    });
    tr.after(row);
    minutes.focus();
  }

  // DELETE answers once every proxy holds the environment without observe: that is when it
  // took effect.
  async function stopObserving(e, button) {
    button.disabled = true;
    button.textContent = 'Stopping…';
    try {
      await api('DELETE', '/api/v1/environments/' + encodeURIComponent(e.id) + '/observe');
      toast(e.name + ' stopped observing at ' + new Date().toLocaleTimeString() + ': every proxy refuses what its policy refuses again', 'ok');
    } catch (err) {
      toast('Cannot stop observing ' + e.name + ': ' + err.message, 'error');
    }
    loadEnvs();
  }

  // The drawer of suggestions: what the API proposes, each rule ticked; Apply posts exactly the
  // ticked ones.
  async function loadSuggestions() {
    const e = state.learn;
    if (!e) return;
    const wildcards = $('learn-wildcards').checked;
    $('learn-error').textContent = '';
    $('learn-apply-error').textContent = '';
    $('learn-apply').disabled = true;
    let data;
    try {
      data = await api('GET', '/api/v1/environments/' + encodeURIComponent(e.id) + '/suggestions' + (wildcards ? '?wildcards=1' : ''));
    } catch (err) {
      if (state.learn !== e) return;
      $('learn-suggestions').replaceChildren();
      $('learn-empty').hidden = true;
      $('learn-error').textContent = 'Cannot read the suggestions: ' + err.message;
      return;
    }
    // A later fetch (the checkbox again, another environment) wins.
    if (state.learn !== e || $('learn-wildcards').checked !== wildcards) return;
    const list = data.suggestions || [];
    $('learn-status').textContent = (data.observe_until ? e.name + ' is observing until ' + localTime(data.observe_until) + '. ' : e.name + ' is not observing: these come from its refusals. ')
      + 'From the newest ' + data.lines + ' audit lines of its sandboxes and clients'
      + (data.left_out ? '; ' + data.left_out + ' more hosts were left out' : '') + '. What its rules allow by now is left out.';
    $('learn-suggestions').replaceChildren(...list.map(suggestionRow));
    $('learn-empty').hidden = list.length > 0;
    syncApply();
  }

  function suggestionRow(s) {
    const rule = s.rule || {};
    const tick = el('input', { type: 'checkbox', class: 's-use', 'data-testid': 'suggestion-use', 'aria-label': 'add ' + rule.host });
    tick.checked = true;
    tick.addEventListener('change', syncApply);
    const tr = el('tr', { 'data-host': rule.host || '', 'data-testid': 'suggestion-row' },
      el('td', { class: 'center' }, tick),
      el('td', { class: 'mono' }, el('span', { 'data-testid': 'suggestion-host', text: rule.host || '' }),
        s.hosts ? el('div', { class: 'sub', 'data-testid': 'suggestion-hosts', text: 'seen: ' + s.hosts.join(', ') }) : null),
      el('td', { class: 'mono', 'data-testid': 'suggestion-methods', text: (rule.methods || []).length ? rule.methods.join(', ') : 'any' }),
      el('td', { 'data-testid': 'suggestion-count', text: s.count + ' (' + s.observed + ' observed, ' + s.refused + ' refused)' }),
      el('td', { class: 'mono small', text: (s.would_deny || []).join(', ') || '—' }),
      el('td', { class: 'sub', text: s.last_seen ? localTime(s.last_seen) : '' }));
    tr.suggested = rule;
    return tr;
  }

  function tickedRows() {
    return [...$('learn-suggestions').children].filter((tr) => tr.querySelector('.s-use').checked);
  }

  function syncApply() {
    const n = tickedRows().length;
    $('learn-apply').disabled = n === 0;
    $('learn-apply').textContent = n === 1 ? 'Apply 1 rule' : 'Apply ' + n + ' rules';
  }

  function showLearnResult(env, n) {
    $('learn-result-title').textContent = 'Added ' + n + (n === 1 ? ' rule' : ' rules') + '. The rules of ' + env.name + ' now:';
    $('learn-result-rules').replaceChildren(...((env.egress && env.egress.rules) || []).map((r) => el('tr', { 'data-host': r.host, 'data-testid': 'learn-result-rule' },
      el('td', { class: 'mono', text: r.host }),
      el('td', { class: 'mono', text: (r.methods || []).length ? r.methods.join(', ') : 'any' }),
      el('td', { class: 'sub', text: [r.credential ? 'credential' : '', r.tls || ''].filter((x) => x).join(', ') }))));
    $('learn-result').hidden = false;
  }

  function openLearnDrawer(e) {
    state.learn = e;
    $('learn-drawer-title').textContent = 'Suggested rules for ' + e.name;
    $('learn-wildcards').checked = false;
    $('learn-status').textContent = '';
    $('learn-suggestions').replaceChildren();
    $('learn-empty').hidden = true;
    $('learn-result').hidden = true;
    $('learn-apply').textContent = 'Apply';
    showDialog($('learn-drawer'));
    loadSuggestions();
  }

  function closeLearnDrawer() {
    hideDialog($('learn-drawer'));
    state.learn = null;
  }
  $('learn-wildcards').addEventListener('change', loadSuggestions);
  $('learn-drawer-close').addEventListener('click', closeLearnDrawer);
  $('learn-drawer-cancel').addEventListener('click', closeLearnDrawer);
  $('scrim').addEventListener('click', closeLearnDrawer);
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && !$('learn-drawer').hidden) closeLearnDrawer(); });

  $('learn-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const e = state.learn;
    const rows = tickedRows();
    clearFormErrors($('learn-form'), $('learn-apply-error'));
    if (!e || rows.length === 0) return;
    $('learn-apply').disabled = true;
    try {
      const env = await api('POST', '/api/v1/environments/' + encodeURIComponent(e.id) + '/suggestions/apply', { rules: rows.map((tr) => tr.suggested) });
      if (state.learn !== e) return;
      toast('Added ' + rows.length + (rows.length === 1 ? ' rule' : ' rules') + ' to ' + env.name, 'ok');
      showLearnResult(env, rows.length);
      loadEnvs();
      await loadSuggestions();
    } catch (err) {
      // rules[N] is the N-th rule sent: its host in the list; anything else next to Apply.
      const errors = (err.body && err.body.errors) || [];
      $('learn-apply-error').textContent = err.message + (errors.length || !err.status ? '' : ' (HTTP ' + err.status + ')');
      for (const x of errors) {
        const m = /^rules\[(\d+)\]/.exec(String(x.field || ''));
        const tr = m ? rows[Number(m[1])] : null;
        if (tr) markField(tr.querySelector('.s-use'), String(x.field), String(x.message || ''));
        else $('learn-apply-error').textContent += '\n' + String(x.field || '') + ': ' + String(x.message || '');
      }
      syncApply();
    }
  });

  // ---- drawers are modal dialogs -------------------------------------------------------------

  // An open drawer (role=dialog, aria-modal) makes the page behind it inert, takes the focus (its
  // first control that can have it, else its close button), keeps Tab inside it, and on closing
  // gives the focus back to what had it before (the button that opened it). Escape and the scrim
  // close it (each drawer's own handlers).
  const openers = new Map();

  function openDialogs() {
    return [...document.querySelectorAll('.drawer')].filter((d) => !d.hidden);
  }

  function focusables(d) {
    return [...d.querySelectorAll('button, input, select, textarea')].filter((x) => !x.disabled && x.checkVisibility());
  }

  function syncInert() {
    const open = openDialogs().length > 0;
    $('scrim').hidden = !open;
    for (const x of document.querySelectorAll('body > header, body > main')) x.inert = open;
  }

  function showDialog(d) {
    if (d.hidden) openers.set(d, document.activeElement);
    d.hidden = false;
    syncInert();
    const body = focusables(d).filter((x) => x.closest('.drawer-body'));
    (body[0] || d.querySelector('.drawer-head button')).focus();
  }

  function hideDialog(d) {
    if (d.hidden) return;
    d.hidden = true;
    syncInert();
    const back = openers.get(d);
    openers.delete(d);
    if (back && back.isConnected && openDialogs().length === 0) back.focus();
  }

  document.addEventListener('keydown', (ev) => {
    const d = openDialogs()[0];
    if (ev.key !== 'Tab' || !d) return;
    const f = focusables(d);
    if (!f.length) return;
    const inside = d.contains(document.activeElement);
    if (ev.shiftKey && (!inside || document.activeElement === f[0])) {
      ev.preventDefault();
      f[f.length - 1].focus();
    } else if (!ev.shiftKey && (!inside || document.activeElement === f[f.length - 1])) {
      ev.preventDefault();
      f[0].focus();
    }
  });

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
    row.querySelector('.r-placeholder').value = (cred && cred.placeholder_env) || '';
    // Not shown, but sent back, so that saving the form keeps it (a PUT replaces the whole rule).
    if (r && r.tls) row.dataset.tls = r.tls;
    row.querySelector('.r-remove').addEventListener('click', () => row.remove());
    $('f-rules').append(row);
    return row;
  }

  // The egress section is there only with the network on; off, it is hidden (not sent: off
  // stores no egress policy) and keeps what it holds, so switching back on brings it back.
  function syncNetwork() {
    $('egress-box').hidden = $('f-network').value === 'off';
  }
  $('f-network').addEventListener('change', syncNetwork);

  // CPUs and memory are each Default (null: inherited from the default environment at run
  // time, api.md §5.2) or Custom (a number; memory a value and a unit).
  const RESOURCES = ['cpus', 'memory'];

  function syncResources() {
    for (const k of RESOURCES) {
      const custom = $('f-' + k + '-custom').checked;
      $('f-' + k + '-value').hidden = !custom;
      $('f-' + k + '-hint').hidden = custom;
    }
  }
  for (const k of RESOURCES) {
    for (const mode of ['default', 'custom']) $('f-' + k + '-' + mode).addEventListener('change', syncResources);
  }

  function setResource(k, custom) {
    $('f-' + k + '-custom').checked = custom;
    $('f-' + k + '-default').checked = !custom;
  }

  // The API's memory ("2GiB", "1536MiB") as the form shows it: a whole number of GiB in GiB
  // (so "1024MiB" is 1 GiB), anything else in MiB as stored.
  function memoryParts(memory) {
    const m = /^(\d+)(MiB|GiB)$/.exec(memory || '');
    if (!m) return { value: '', unit: 'GiB' };
    const n = Number(m[1]);
    if (m[2] === 'MiB' && n % 1024 === 0) return { value: String(n / 1024), unit: 'GiB' };
    return { value: m[1], unit: m[2] };
  }

  // The form's value and unit as the API's string: "2" GiB is "2GiB"; a fraction of a GiB that
  // is a whole number of MiB goes in MiB ("1.5" GiB is "1536MiB"); anything else as typed, for
  // the API to judge (and name the field).
  function memoryString(text, unit) {
    const n = Number(text);
    if (unit === 'GiB' && text !== '' && n > 0 && !Number.isInteger(n) && Number.isInteger(n * 1024)) return n * 1024 + 'MiB';
    return text + unit;
  }
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
    $('f-image_pull').value = (e && e.image_pull) || 'if-missing';
    const reg = (e && e.registry_auth) || null;
    $('f-registry_user').value = (reg && reg.username) || '';
    $('f-registry_password').value = '';
    // A stored password is never sent to the page: empty keeps it.
    $('f-registry_password').placeholder = reg && reg.has_value ? 'keep existing' : '';
    const cpus = e && e.cpus !== null && e.cpus !== undefined ? e.cpus : null;
    setResource('cpus', cpus !== null);
    $('f-cpus').value = cpus !== null ? String(cpus) : '';
    const memory = (e && e.memory) || null;
    const parts = memoryParts(memory);
    setResource('memory', memory !== null);
    $('f-memory').value = parts.value;
    $('f-memory-unit').value = parts.unit;
    $('f-network').value = e ? e.network : 'on';
    $('f-egress-default').value = (e && e.egress && e.egress.default) || 'deny';
    $('f-env').replaceChildren();
    $('f-rules').replaceChildren();
    for (const v of (e && e.env) || []) addVarRow(v);
    for (const r of (e && e.egress && e.egress.rules) || []) addRuleRow(r);
    $('f-repositories').value = ((e && e.repositories) || []).join('\n');
    syncNetwork();
    syncResources();
  }

  function setReadonly(ro) {
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
    showDialog($('drawer'));
  }

  function closeDrawer() {
    hideDialog($('drawer'));
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
    const memoryText = $('f-memory').value.trim();
    const body = {
      name: $('f-name').value.trim(),
      description: $('f-description').value,
      scope: $('f-scope').value,
      base_image: $('f-base_image').value.trim(),
      image_pull: $('f-image_pull').value,
      cpus: !$('f-cpus-custom').checked ? null : (cpusText !== '' && Number.isFinite(cpusNum) ? cpusNum : cpusText),
      memory: !$('f-memory-custom').checked ? null : memoryString(memoryText, $('f-memory-unit').value),
      network: $('f-network').value,
      env: [],
      repositories: $('f-repositories').value.split('\n').map((s) => s.trim()).filter((s) => s !== ''),
    };
    const regUser = $('f-registry_user').value.trim();
    const regPassword = $('f-registry_password').value;
    if (regUser !== '' || regPassword !== '') {
      body.registry_auth = { username: regUser };
      // Empty with a stored password: send none, the API keeps the stored one.
      if (regPassword !== '') body.registry_auth.password = regPassword;
    }
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
        const placeholder = row.querySelector('.r-placeholder').value.trim();
        if (header || value || placeholder) {
          rule.credential = { header };
          // Empty with a stored value: send no value, the API keeps the stored one.
          if (value !== '') rule.credential.value = value;
          if (placeholder !== '') rule.credential.placeholder_env = placeholder;
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
      const key = m[2] === 'credential' ? ({ value: 'value', placeholder_env: 'placeholder' }[m[3]] || 'header') : m[2];
      const cls = { host: '.r-host', methods: '.r-methods', header: '.r-header', value: '.r-value', placeholder: '.r-placeholder', tls: '.r-host' }[key] || '.r-host';
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
    // The memory value's error goes under its unit too.
    (input.closest('.with-unit') || input).insertAdjacentElement('afterend', p);
  }

  $('env-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    // Custom with nothing typed (or what the number input cannot read) is neither a value nor
    // the default: asked here, not sent.
    const empty = RESOURCES.filter((k) => $('f-' + k + '-custom').checked && $('f-' + k).value.trim() === '');
    for (const k of empty) showFieldError(k, $('f-' + k).validity.badInput ? 'not a number' : 'type a value, or choose Default');
    if (empty.length) {
      $('f-' + empty[0]).focus();
      return;
    }
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
        // The first input in error takes the focus (and comes into view).
        const first = $('env-form').querySelector('input.invalid, select.invalid, textarea.invalid');
        if (first) first.focus();
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
      el('td', {}, el('span', { class: 'badge ' + (s.status === 'ready' ? 'ok' : 'warn'), text: s.status }),
        s.pull ? el('div', { class: 'sub', 'data-testid': 'sb-pull', text: pullText(s.pull) }) : null),
      el('td', { class: 'sub', text: (s.expires_at || '').replace('T', ' ').replace('Z', '') }),
      el('td', { class: 'actions' },
        el('button', { type: 'button', class: 'btn small', 'data-testid': 'sandbox-open', text: 'Open', onclick: () => showTab('sandbox', s) }),
        el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'sandbox-close', text: 'Close', onclick: (ev) => closeSandbox(s, ev.target) })))));
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

  // ---- the badge of an audit line (audit.js) -------------------------------------------------

  // The badge of an audit line: allow green, deny red; a challenge (the 407 that asks a client
  // for its proxy credentials, which it then sends) is no refusal: grey.
  function decisionBadge(decision) {
    if (decision === 'deny') return 'bad';
    if (decision === 'error') return 'warn';
    if (decision === 'challenge') return 'neutral';
    return 'ok';
  }

  // ---- errors next to their fields (users, tokens, repositories) -----------------------------

  // A time of the API as "YYYY-MM-DD HH:MM:SS".
  function when(ts) {
    return (ts || '').replace('T', ' ').replace(/\..*|Z$/, '');
  }

  function clearFormErrors(box, banner) {
    if (banner) banner.textContent = '';
    for (const e of box.querySelectorAll('.invalid')) e.classList.remove('invalid');
    for (const e of box.querySelectorAll('.field-error.dynamic')) e.remove();
  }

  // Marks `input` and puts `message` right after it (after its label for a switch).
  function markField(input, field, message) {
    input.classList.add('invalid');
    const anchor = input.type === 'checkbox' && input.parentElement.tagName === 'LABEL' ? input.parentElement : input;
    const p = el('p', { class: 'field-error dynamic', 'data-testid': 'field-error', 'data-field': field, text: message });
    anchor.insertAdjacentElement('afterend', p);
  }

  // An API error shown on a form: a 422's errors next to the inputs their fields name (`inputs`
  // maps a field's first part, `protected_branches` for `protected_branches[3]`, to its input),
  // with the message in the banner; an error without field errors next to `input` when one is
  // given (a 409 on a name), else in the banner.
  function showFormError(banner, inputs, err, input) {
    const errors = (err.body && err.body.errors) || [];
    if (!errors.length && input) {
      markField(input, input.dataset.field || '', err.message);
      return;
    }
    banner.textContent = err.message + (errors.length || !err.status ? '' : ' (HTTP ' + err.status + ')');
    for (const x of errors) {
      const field = String(x.field || '');
      const target = inputs[field.split(/[.[]/)[0]];
      if (target) markField(target, field, String(x.message || ''));
      else banner.textContent += '\n' + field + ': ' + String(x.message || '');
    }
  }

  // ---- a token shown once -------------------------------------------------------------------

  function showOnce(which, title, token) {
    $(which + '-once-title').textContent = title;
    $(which + '-once-value').value = token;
    $(which + '-once').hidden = false;
    $(which + '-once-value').select();
  }

  function hideOnce() {
    for (const which of ['token', 'user']) {
      $(which + '-once').hidden = true;
      $(which + '-once-value').value = '';
      $(which + '-once-title').textContent = '';
    }
  }

  for (const which of ['token', 'user']) {
    const input = $(which + '-once-value');
    $(which + '-once-hide').addEventListener('click', hideOnce);
    $(which + '-once-copy').addEventListener('click', () => {
      const done = () => toast('Copied to the clipboard', 'ok');
      const select = () => { input.select(); toast('Copy the selected token (Ctrl+C)'); };
      if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(input.value).then(done, select);
      else select();
    });
  }

  // ---- tokens -------------------------------------------------------------------------------

  function scopeBadge(scope) {
    return { read: 'neutral', write: '', admin: 'warn' }[scope] || '';
  }

  function tokenRow(t) {
    return el('tr', { 'data-token': t.id, 'data-name': t.name, 'data-testid': 'token-row' },
      el('td', {}, el('strong', { text: t.name })),
      el('td', { class: 'mono', text: t.id }),
      el('td', {}, el('span', { class: 'badge ' + scopeBadge(t.scope), 'data-testid': 'token-scope', text: t.scope })),
      el('td', { class: 'sub', text: when(t.created_at) }),
      el('td', { class: 'sub', 'data-testid': 'token-expires' }, t.expires_at ? when(t.expires_at) : 'never',
        t.expired ? ' ' : null, t.expired ? el('span', { class: 'badge bad', text: 'expired' }) : null),
      el('td', { class: 'actions' }, el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'token-revoke', text: 'Revoke', onclick: (ev) => revokeToken(t, ev.target) })));
  }

  async function loadTokens() {
    $('tokens-error').textContent = '';
    let list;
    try {
      list = (await api('GET', '/api/v1/tokens')).tokens || [];
    } catch (e) {
      $('tokens').replaceChildren();
      $('tokens-empty').hidden = true;
      $('tokens-error').textContent = e.message;
      return;
    }
    $('tokens').replaceChildren(...list.map(tokenRow));
    $('tokens-empty').hidden = list.length > 0;
  }

  async function revokeToken(t, button) {
    if (!window.confirm('Revoke token ' + t.name + ' (' + t.id + ')? Whoever uses it is refused from now on.')) return;
    button.disabled = true;
    try {
      await api('DELETE', '/api/v1/tokens/' + encodeURIComponent(t.id));
      toast('Revoked ' + t.name, 'ok');
    } catch (e) {
      toast('Cannot revoke ' + t.name + ': ' + e.message, 'error');
    }
    // Revoking the token of this page signed it out (its next call was a 401).
    if (state.me) loadTokens();
  }

  $('token-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const banner = $('token-form-error');
    clearFormErrors($('token-form'), banner);
    hideOnce();
    // Sent as typed: the API, not the page, judges the number (and names the field).
    const days = $('t-expires').value.trim();
    const body = {
      name: $('t-name').value.trim(),
      scope: $('t-scope').value,
      expires_in_days: days === '' ? null : (/^-?\d+(\.\d+)?$/.test(days) ? Number(days) : days),
    };
    const button = $('token-form').querySelector('[type=submit]');
    button.disabled = true;
    try {
      const t = await api('POST', '/api/v1/tokens', body);
      showOnce('token', 'Token ' + t.name + ' (scope ' + t.scope + (t.expires_at ? ', expires ' + when(t.expires_at) : ', no expiry') + ').', t.token);
      $('t-name').value = '';
      $('t-expires').value = '';
      loadTokens();
    } catch (err) {
      showFormError(banner, { name: $('t-name'), scope: $('t-scope'), expires_in_days: $('t-expires') }, err,
        err.status === 403 && /scope admin/.test(err.message) ? $('t-scope')
          : err.status === 400 && /cannot expire later/.test(err.message) ? $('t-expires') : null);
    } finally {
      button.disabled = false;
    }
  });

  // ---- users (admins) -----------------------------------------------------------------------

  function userRow(u) {
    const tr = el('tr', { 'data-user': u.name, 'data-testid': 'user-row' },
      el('td', {}, el('strong', { text: u.name }), u.name === state.me.name ? el('span', { class: 'muted', text: ' (you)' }) : null),
      el('td', { class: 'mono', 'data-testid': 'user-email', text: u.email || '—' }),
      el('td', {}, el('span', { class: 'badge ' + (u.admin ? 'default' : 'neutral'), 'data-testid': 'user-role', text: u.admin ? 'admin' : 'user' })),
      el('td', {}, el('span', { class: 'badge ' + (u.disabled ? 'bad' : 'ok'), 'data-testid': 'user-status', text: u.disabled ? 'disabled' : 'active' })),
      el('td', { class: 'sub', text: when(u.created_at) }),
      el('td', { class: 'actions' },
        el('button', { type: 'button', class: 'btn small', 'data-testid': 'user-edit', text: 'Edit', onclick: () => toggleUserEdit(u, tr) }),
        el('button', { type: 'button', class: 'btn small' + (u.disabled ? '' : ' danger'), 'data-testid': 'user-toggle', text: u.disabled ? 'Enable' : 'Disable', onclick: (ev) => setDisabled(u, !u.disabled, ev.target) })));
    return tr;
  }

  async function loadUsers() {
    $('users-error').textContent = '';
    let list;
    try {
      list = (await api('GET', '/api/v1/users')).users || [];
    } catch (e) {
      $('users').replaceChildren();
      $('users-error').textContent = e.message;
      return;
    }
    $('users').replaceChildren(...list.map(userRow));
  }

  async function setDisabled(u, disabled, button) {
    if (disabled && !window.confirm('Disable ' + u.name + '? Their tokens stop working and their sandboxes lose the proxy at once.')) return;
    button.disabled = true;
    try {
      await api('PATCH', '/api/v1/users/' + encodeURIComponent(u.name), { disabled });
      toast((disabled ? 'Disabled ' : 'Enabled ') + u.name, 'ok');
    } catch (e) {
      toast('Cannot ' + (disabled ? 'disable ' : 'enable ') + u.name + ': ' + e.message, 'error');
    }
    if (state.me) loadUsers();
  }

  // Opens (or closes) the row under `tr` that edits a user's email and admin flag.
  function toggleUserEdit(u, tr) {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains('edit-row')) {
      next.remove();
      return;
    }
    const email = el('input', { id: freshId('user-edit-email'), class: 'e-email', 'data-field': 'email', 'data-testid': 'user-edit-email', spellcheck: 'false', placeholder: 'none' });
    email.value = u.email || '';
    const admin = el('input', { id: freshId('user-edit-admin'), type: 'checkbox', class: 'e-admin', 'data-field': 'admin', 'data-testid': 'user-edit-admin' });
    admin.checked = !!u.admin;
    const banner = el('p', { class: 'form-error', 'data-testid': 'user-edit-error', role: 'alert' });
    const form = el('form', { novalidate: true, autocomplete: 'off' },
      el('div', { class: 'row' },
        el('div', { class: 'field grow' }, el('label', { for: email.id, text: 'Email (empty for none)' }), email),
        el('div', { class: 'field' }, el('label', { for: admin.id, text: 'Admin' }), el('label', { class: 'switch' }, admin, ' admin')),
        el('div', { class: 'field end' },
          el('button', { type: 'submit', class: 'btn primary small', 'data-testid': 'user-edit-save', text: 'Save' }), ' ',
          el('button', { type: 'button', class: 'btn small', text: 'Cancel', onclick: () => row.remove() }))),
      banner);
    const row = el('tr', { class: 'edit-row', 'data-testid': 'user-edit-row' }, el('td', { colspan: '6' }, form));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearFormErrors(form, banner);
      const body = { email: email.value.trim() === '' ? null : email.value.trim(), admin: admin.checked };
      try {
        await api('PATCH', '/api/v1/users/' + encodeURIComponent(u.name), body);
        toast('Saved ' + u.name, 'ok');
        loadUsers();
      } catch (err) {
        // 409: the last enabled admin cannot be demoted.
        showFormError(banner, { email, admin }, err, err.status === 409 ? admin : null);
      }
    });
    tr.after(row);
    email.focus();
  }

  $('user-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const banner = $('user-form-error');
    clearFormErrors($('user-form'), banner);
    hideOnce();
    const body = { name: $('u-name').value.trim(), admin: $('u-admin').checked };
    if ($('u-email').value.trim() !== '') body.email = $('u-email').value.trim();
    const button = $('user-form').querySelector('[type=submit]');
    button.disabled = true;
    try {
      const u = await api('POST', '/api/v1/users', body);
      showOnce('user', 'The API token of ' + u.name + ' (scope ' + (u.admin ? 'admin' : 'write') + ').', u.token);
      $('u-name').value = '';
      $('u-email').value = '';
      $('u-admin').checked = false;
      loadUsers();
    } catch (err) {
      // 409: the name is taken.
      showFormError(banner, { name: $('u-name'), email: $('u-email'), admin: $('u-admin') }, err,
        err.status === 409 ? $('u-name') : null);
    } finally {
      button.disabled = false;
    }
  });

  // ---- repositories and members -------------------------------------------------------------

  function repoPath(name) {
    const i = name.indexOf('/');
    return '/api/v1/repos/' + encodeURIComponent(name.slice(0, i)) + '/' + encodeURIComponent(name.slice(i + 1));
  }

  // Global admins (acting as admins) and the repository's admins manage its members.
  function canManageMembers(r) {
    return !!state.me.admin || r.role === 'admin';
  }

  function repoRow(r) {
    const label = state.me.admin ? 'Edit' : (canManageMembers(r) ? 'Members' : 'View');
    return el('tr', { 'data-repo': r.name, 'data-testid': 'repo-row' },
      el('td', { class: 'mono repo-name' }, el('strong', { text: r.name }), r.archived ? ' ' : null,
        r.archived ? el('span', { class: 'badge warn', 'data-testid': 'repo-archived', text: 'archived' }) : null),
      el('td', {}, el('span', { class: 'badge ' + (r.visibility === 'public' ? 'ok' : 'neutral'), 'data-testid': 'repo-visibility', text: r.visibility })),
      el('td', { class: 'mono', text: r.default_branch }),
      el('td', { class: 'mono', 'data-testid': 'repo-protected', text: (r.protected_branches || []).join(', ') || '—' }),
      el('td', {}, r.role ? el('span', { class: 'badge', 'data-testid': 'repo-role', text: r.role }) : el('span', { class: 'muted', text: '—' })),
      el('td', { class: 'actions' }, el('button', { type: 'button', class: 'btn small', 'data-testid': 'repo-open', text: label, onclick: () => openRepoDrawer(r.name) })));
  }

  async function loadRepos() {
    $('repos-error').textContent = '';
    let list;
    try {
      list = (await api('GET', '/api/v1/repos')).repos || [];
    } catch (e) {
      $('repos').replaceChildren();
      $('repos-empty').hidden = true;
      $('repos-error').textContent = e.message;
      return;
    }
    $('repos').replaceChildren(...list.map(repoRow));
    $('repos-empty').hidden = list.length > 0;
  }

  async function openRepoDrawer(name) {
    clearFormErrors($('repo-form'), $('repo-form-error'));
    $('r-members-error').textContent = '';
    let r = null;
    if (name) {
      try {
        r = await api('GET', repoPath(name));
      } catch (e) {
        toast('Cannot read ' + name + ': ' + e.message, 'error');
        return;
      }
    }
    state.repo = r;
    const admin = !!state.me.admin;
    $('r-name').value = r ? r.name : '';
    $('r-name').disabled = !!r;
    $('r-visibility').value = r ? r.visibility : 'private';
    $('r-default-branch').value = r ? r.default_branch : 'main';
    $('r-protected').value = r ? (r.protected_branches || []).join('\n') : '';
    $('r-archived').checked = !!(r && r.archived);
    for (const id of ['r-visibility', 'r-default-branch', 'r-protected', 'r-archived']) $(id).disabled = !admin;
    $('repo-save').hidden = !admin;
    $('repo-drawer-title').textContent = !r ? 'Register repository' : (admin ? 'Edit ' + r.name : r.name + ' (settings read only)');
    $('r-members-box').hidden = !r;
    $('m-user').value = '';
    if (r) await loadMembers(r);
    showDialog($('repo-drawer'));
  }

  function closeRepoDrawer() {
    hideDialog($('repo-drawer'));
    state.repo = null;
  }
  $('repo-new').addEventListener('click', () => openRepoDrawer(null));
  $('repo-drawer-close').addEventListener('click', closeRepoDrawer);
  $('repo-drawer-cancel').addEventListener('click', closeRepoDrawer);
  $('scrim').addEventListener('click', closeRepoDrawer);
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && !$('repo-drawer').hidden) closeRepoDrawer(); });

  $('repo-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const banner = $('repo-form-error');
    clearFormErrors($('repo-form'), banner);
    if (!state.me.admin) return;
    const r = state.repo;
    const name = r ? r.name : $('r-name').value.trim();
    // The page needs the two parts to build the URL; the API judges the rest (400).
    if (!/^[^/\s]+\/[^/\s]+$/.test(name)) {
      markField($('r-name'), 'name', 'owner/name: two parts joined by one /');
      return;
    }
    const body = {
      visibility: $('r-visibility').value,
      protected_branches: $('r-protected').value.split('\n').map((x) => x.trim()).filter((x) => x !== ''),
      archived: $('r-archived').checked,
    };
    if ($('r-default-branch').value.trim() !== '') body.default_branch = $('r-default-branch').value.trim();
    const save = $('repo-save');
    save.disabled = true;
    try {
      const saved = await api('PUT', repoPath(name), body);
      toast((r ? 'Saved ' : 'Registered ') + saved.name, 'ok');
      loadRepos();
      // A new repository stays open for its members.
      if (r) closeRepoDrawer();
      else await openRepoDrawer(saved.name);
    } catch (err) {
      showFormError(banner, {
        visibility: $('r-visibility'), default_branch: $('r-default-branch'),
        protected_branches: $('r-protected'), archived: $('r-archived'),
      }, err, err.status === 400 ? $('r-name') : null);
    } finally {
      save.disabled = false;
    }
  });

  function memberRow(r, m, manage) {
    let role;
    if (manage) {
      role = el('select', { class: 'm-row-role', 'data-testid': 'member-role', 'aria-label': 'Role of ' + m.user },
        ...ROLES.map((x) => el('option', { value: x, text: x })));
      role.value = m.role;
      role.addEventListener('change', () => setMember(r, m.user, role));
    } else {
      role = el('span', { class: 'badge', 'data-testid': 'member-role', text: m.role });
    }
    return el('tr', { 'data-member': m.user, 'data-testid': 'member-row' },
      el('td', { class: 'mono', text: m.user }),
      el('td', {}, role),
      el('td', { class: 'actions' }, manage ? el('button', { type: 'button', class: 'btn small danger', 'data-testid': 'member-remove', text: 'Remove', onclick: (ev) => removeMember(r, m.user, ev.target) }) : null));
  }

  async function loadMembers(r) {
    const manage = canManageMembers(r);
    $('r-member-add').hidden = !manage;
    let list;
    try {
      list = (await api('GET', repoPath(r.name) + '/members')).members || [];
    } catch (e) {
      $('r-members').replaceChildren();
      $('r-members-empty').hidden = true;
      $('r-members-error').textContent = e.message;
      return;
    }
    $('r-members').replaceChildren(...list.map((m) => memberRow(r, m, manage)));
    $('r-members-empty').hidden = list.length > 0;
  }

  // After a change of members: the drawer's list, and the caller's role in the page's list.
  async function membersChanged(r) {
    if (state.repo === r) await loadMembers(r);
    loadRepos();
  }

  async function setMember(r, user, select) {
    clearFormErrors($('r-members-box'), $('r-members-error'));
    try {
      const m = await api('PUT', repoPath(r.name) + '/members/' + encodeURIComponent(user), { role: select.value });
      toast(m.user + ' is ' + m.role + ' in ' + r.name, 'ok');
      await membersChanged(r);
    } catch (e) {
      markField(select, 'role', e.message);
    }
  }

  async function removeMember(r, user, button) {
    if (!window.confirm('Remove ' + user + ' from ' + r.name + '? Their sandboxes there lose the proxy at once.')) return;
    clearFormErrors($('r-members-box'), $('r-members-error'));
    button.disabled = true;
    try {
      await api('DELETE', repoPath(r.name) + '/members/' + encodeURIComponent(user));
      toast('Removed ' + user + ' from ' + r.name, 'ok');
    } catch (e) {
      $('r-members-error').textContent = 'Cannot remove ' + user + ': ' + e.message;
    }
    await membersChanged(r);
  }

  async function addMember() {
    const r = state.repo;
    if (!r) return;
    clearFormErrors($('r-members-box'), $('r-members-error'));
    const user = $('m-user').value.trim();
    if (user === '') {
      markField($('m-user'), 'user', 'the user\'s name is required');
      return;
    }
    $('m-add').disabled = true;
    try {
      const m = await api('PUT', repoPath(r.name) + '/members/' + encodeURIComponent(user), { role: $('m-role').value });
      toast(m.user + ' is ' + m.role + ' in ' + r.name, 'ok');
      $('m-user').value = '';
      await membersChanged(r);
    } catch (err) {
      // 404 "no user 'NAME'" is about the name typed; another 404 (the repository) is not.
      showFormError($('r-members-error'), { role: $('m-role'), user: $('m-user') }, err,
        err.status === 404 && /^no user /.test(err.message) ? $('m-user') : null);
    } finally {
      $('m-add').disabled = false;
    }
  }
  $('m-add').addEventListener('click', addMember);
  // Enter in the user field adds the member (it would otherwise submit the repository's form).
  $('m-user').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') {
      ev.preventDefault();
      addMember();
    }
  });

  // ---- what the other files use ---------------------------------------------------------------

  window.sluice = Object.freeze({
    $, el, toast, api, ApiError, state, page: registerPage, showTab,
    when, localTime, clearFormErrors, markField, showFormError, decisionBadge,
    MATCHED,
  });

  // ---- tables that scroll --------------------------------------------------------------------

  // A .table-wrap scrolls sideways on a narrow screen: it takes the focus (Tab), so the arrow keys
  // scroll it too, and not only a mouse or a finger. Also those the other pages add later.
  function focusableWraps(root) {
    const wraps = root.matches('.table-wrap') ? [root] : root.querySelectorAll('.table-wrap');
    // A form's tables (variables, rules) hold inputs, which the focus reaches anyway.
    for (const w of wraps) if (!w.hasAttribute('tabindex') && !w.closest('form')) w.tabIndex = 0;
  }
  new MutationObserver((changes) => {
    for (const c of changes) for (const n of c.addedNodes) if (n.nodeType === 1) focusableWraps(n);
  }).observe(document.body, { childList: true, subtree: true });
  focusableWraps(document.body);

  // ---- start --------------------------------------------------------------------------------

  // Once every deferred file ran and registered its page.
  document.addEventListener('DOMContentLoaded', () => {
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) {
      signIn(saved).catch((e) => signOut(e.status === 401 ? 'Your saved token is no longer accepted; sign in again.' : 'Cannot reach the control plane: ' + e.message));
    } else {
      signOut('');
    }
  });
})();
