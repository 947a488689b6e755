// SPDX-License-Identifier: Apache-2.0
// sluice dashboard: the Overview tab (docs/reference/api.md §5.7, GET /api/v1/overview). Each
// proxy with the snapshot version it acknowledged against the newest and its health, the decisions
// of the last hour per minute as a stacked bar chart drawn here as inline SVG (no chart library),
// the caller's open sandboxes and running and queued jobs, linking to their tabs. Refreshed every
// 5 s while the tab is shown; the chart is drawn again when its box changes width.
(function () {
  'use strict';
  const S = window.sluice;
  const { $, el } = S;
  const REFRESH_MS = 5000;
  const NS = 'http://www.w3.org/2000/svg';
  const HEIGHT = 200;
  // Room for the axes' labels: left (counts), bottom (times), top and right margins.
  const PAD = { left: 40, right: 8, top: 10, bottom: 24 };

  const ov = { timer: null, gen: 0, data: null, width: 0 };

  // svg('rect', {x: 1}) builds an SVG element; text goes in as textContent, never as markup.
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children) if (c) e.append(c);
    return e;
  }

  const plural = (n, one, many) => n + ' ' + (n === 1 ? one : many);

  // "last hour: 120 allowed, 7 refused, 1 error" (and what the sum left out).
  function summary(dec) {
    const t = { allowed: 0, refused: 0, errors: 0 };
    for (const m of dec.per_minute || []) {
      t.allowed += m.allowed;
      t.refused += m.refused;
      t.errors += m.errors;
    }
    return 'last hour: ' + t.allowed + ' allowed, ' + t.refused + ' refused, ' + plural(t.errors, 'error', 'errors')
      + (dec.partial ? ' (older lines not read: the audit log was read only as far as 4 MiB)' : '');
  }

  // A step for the count axis: 1, 2 or 5 times a power of ten, so that about 4 steps cover `max`.
  function niceStep(max) {
    const raw = Math.max(1, max / 4);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const f of [1, 2, 5, 10]) if (f * p >= raw) return f * p;
    return 10 * p;
  }

  const hhmm = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

  // The chart: one column per minute, oldest left; allowed at the bottom, refused on it, errors
  // on top. Its <title> and aria-label carry the summary for screen readers; each column's
  // <title> its own counts (a tooltip on hover).
  function chart(dec, width) {
    const minutes = dec.per_minute || [];
    const text = summary(dec);
    const max = Math.max(1, ...minutes.map((m) => m.allowed + m.refused + m.errors));
    const step = niceStep(max);
    const top = Math.ceil(max / step) * step;
    const plotW = width - PAD.left - PAD.right;
    const plotH = HEIGHT - PAD.top - PAD.bottom;
    const colW = plotW / Math.max(1, minutes.length);
    const barW = Math.max(1, colW - (colW > 4 ? 1 : 0));
    const y = (v) => PAD.top + plotH - (v / top) * plotH;
    const root = svg('svg', {
      width, height: HEIGHT, viewBox: '0 0 ' + width + ' ' + HEIGHT, role: 'img',
      'aria-label': text, 'data-testid': 'ov-chart-svg', class: 'ov-svg',
    }, svg('title', { text }));
    const axis = svg('g', { class: 'ov-axis', 'aria-hidden': 'true' });
    for (let v = 0; v <= top; v += step) {
      axis.append(svg('line', { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v), class: v === 0 ? 'ov-base' : 'ov-grid' }),
        svg('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end', text: String(v) }));
    }
    // A time under the newest minute and every 15th before it, every 30th when 15 minutes are
    // narrower than a label (about 90 px).
    const every = colW * 15 >= 90 ? 15 : 30;
    minutes.forEach((m, i) => {
      const back = minutes.length - 1 - i;
      if (back % every !== 0) return;
      const x = PAD.left + i * colW + colW / 2;
      axis.append(svg('text', { x, y: HEIGHT - 6, 'text-anchor': back === 0 ? 'end' : 'middle', text: hhmm(m.minute) }));
    });
    root.append(axis);
    const bars = svg('g', { class: 'ov-bars' });
    minutes.forEach((m, i) => {
      const x = PAD.left + i * colW + (colW - barW) / 2;
      const col = svg('g', {
        'data-testid': 'ov-bar', 'data-minute': m.minute,
        'data-allowed': m.allowed, 'data-refused': m.refused, 'data-errors': m.errors,
      }, svg('title', { text: hhmm(m.minute) + ': ' + m.allowed + ' allowed, ' + m.refused + ' refused, ' + plural(m.errors, 'error', 'errors') }));
      let base = 0;
      for (const [kind, n] of [['allowed', m.allowed], ['refused', m.refused], ['errors', m.errors]]) {
        if (n <= 0) continue;
        col.append(svg('rect', { class: 'ov-' + kind, 'data-kind': kind, x, width: barW, y: y(base + n), height: y(base) - y(base + n) }));
        base += n;
      }
      // The whole column takes the pointer, so an empty minute shows its tooltip too.
      col.prepend(svg('rect', { class: 'ov-hit', x: PAD.left + i * colW, width: colW, y: PAD.top, height: plotH }));
      bars.append(col);
    });
    root.append(bars);
    return root;
  }

  // Drawn for the box's width in pixels (the text keeps its size at any width).
  function drawChart() {
    if (!ov.data) return;
    const box = $('ov-chart');
    ov.width = Math.floor(box.clientWidth);
    box.replaceChildren(chart(ov.data.decisions || {}, Math.max(200, ov.width)));
  }

  function proxyCard(p, newest) {
    const health = p.healthy ? el('span', { class: 'badge ok', 'data-testid': 'ov-proxy-health', text: 'healthy' })
      : el('span', { class: 'badge bad', 'data-testid': 'ov-proxy-health', text: 'unhealthy' });
    const version = p.current ? el('span', { class: 'badge ok', 'data-testid': 'ov-proxy-current', text: 'current' })
      : el('span', { class: 'badge warn', 'data-testid': 'ov-proxy-current', text: 'behind' });
    return el('div', { class: 'ov-proxy', 'data-testid': 'ov-proxy', 'data-socket': p.socket || p.url, 'data-current': String(!!p.current), 'data-healthy': String(!!p.healthy) },
      el('div', { class: 'mono ov-socket', text: p.socket || p.url }),
      el('div', {}, health, ' ', version),
      el('div', { class: 'small', 'data-testid': 'ov-proxy-version', text: 'snapshot ' + p.acknowledged_version + ' acknowledged, newest ' + newest }),
      p.last_error ? el('div', { class: 'field-error', 'data-testid': 'ov-proxy-error', text: p.last_error }) : null);
  }

  // 500 counted means "500 or more" (api.md §5.7).
  const jobCount = (n) => (n >= 500 ? '500+' : String(n));

  function render(d) {
    ov.data = d;
    $('ov-sandboxes').textContent = String(d.sandboxes_open);
    $('ov-running').textContent = jobCount(d.jobs.running);
    $('ov-queued').textContent = jobCount(d.jobs.queued);
    $('ov-scope').textContent = S.state.me && S.state.me.admin ? '(every client)' : '(your sandboxes)';
    $('ov-summary').textContent = summary(d.decisions);
    drawChart();
    const snap = d.snapshot;
    $('ov-snapshot').textContent = snap ? 'newest snapshot ' + snap.version + (snap.built_at ? ', built ' + S.localTime(snap.built_at) : '') : '';
    $('ov-proxies').replaceChildren(...(d.proxies || []).map((p) => proxyCard(p, snap ? snap.version : 0)));
    if (!(d.proxies || []).length) {
      $('ov-proxies').append(el('p', { class: 'empty', text: 'No proxy: the control plane has no --proxy-admin-socket, so it pushes no snapshot.' }));
    }
    $('ov-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }

  async function poll(gen) {
    ov.timer = null;
    try {
      const d = await S.api('GET', '/api/v1/overview');
      if (gen !== ov.gen) return;
      $('ov-error').textContent = '';
      render(d);
    } catch (e) {
      if (gen !== ov.gen) return;
      $('ov-error').textContent = 'Cannot load the overview: ' + e.message;
    }
    // A leave (or a new load) meanwhile ended this chain of polls.
    if (gen === ov.gen && S.state.tab === 'overview' && S.state.me) {
      ov.timer = setTimeout(() => poll(gen), REFRESH_MS);
    }
  }

  function stop() {
    ov.gen++;
    if (ov.timer !== null) clearTimeout(ov.timer);
    ov.timer = null;
  }


  S.page('overview', {
    load() {
      stop();
      poll(ov.gen);
    },
    leave: stop,
    reset() {
      stop();
      ov.data = null;
      for (const id of ['ov-chart', 'ov-proxies']) $(id).replaceChildren();
      for (const id of ['ov-sandboxes', 'ov-running', 'ov-queued']) $(id).textContent = '–';
      for (const id of ['ov-summary', 'ov-snapshot', 'ov-scope', 'ov-updated', 'ov-error']) $(id).textContent = '';
    },
  });

  $('ov-to-sandboxes').addEventListener('click', () => S.showTab('sandboxes'));
  // The jobs tab is another file's (jobs.js); without it the button is not offered.
  $('ov-to-jobs').hidden = !document.querySelector('.tab[data-tab="jobs"]');
  $('ov-to-jobs').addEventListener('click', () => S.showTab('jobs'));
  // A new width (the window, or the tab shown again): drawn again before the next paint. The box's
  // width is its card's, whatever the chart inside it measures, so this never feeds itself.
  new ResizeObserver(() => {
    if (Math.floor($('ov-chart').clientWidth) !== ov.width && $('ov-chart').clientWidth > 0) drawChart();
  }).observe($('ov-chart'));
})();
