// loco's run dashboard (docs/dashboard.md), served by `loco coordinator` (with the run's status token) and by
// `loco dashboard` (run directories). 2 s after each update it asks /status (the member table, the events) and
// /history?after=SEQ (only the metric points it has not seen), keeps each member's series here (thinned past
// MAX_POINTS), and redraws. Values reach the page as text (textContent) or as pixels, never as markup, and
// nothing is fetched from anywhere but the server that sent this file (its Content-Security-Policy says so).
'use strict';
(() => {
  const POLL_MS = 2000;
  const MAX_POINTS = 4096;
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf',
                  '#7f7f7f', '#bcbd22'];
  const CHARTS = [
    {title: 'loss against tokens (dots: eval loss)', x: 'tokens', y: 'loss', dots: 'eval_loss'},
    {title: 'loss against wall clock (s)', x: 'time_s', y: 'loss', dots: 'eval_loss'},
    {title: 'tokens/s against wall clock (s)', x: 'time_s', y: 'tokens_per_s'},
    {title: 'bytes sent against wall clock (s)', x: 'time_s', y: 'bytes_sent'},
    {title: 'exposed communication (s waited, total) against wall clock (s)', x: 'time_s', y: 'comm_s'},
  ];

  const token = new URLSearchParams(location.search).get('token');
  const request = token ? {headers: {'X-Loco-Token': token}} : {};
  const series = new Map();  // member (or run directory) name -> {column name: [values]}
  const colors = new Map();
  let seq = 0;

  const $ = (id) => document.getElementById(id);
  const text = (tag, value, className) => {
    const el = document.createElement(tag);
    el.textContent = value === undefined || value === null ? '' : String(value);
    if (className) el.className = className;
    return el;
  };
  const number = (v, digits) => (typeof v === 'number' && isFinite(v) ? v.toFixed(digits) : '');
  const colorOf = (name) => {
    if (!colors.has(name)) colors.set(name, COLORS[colors.size % COLORS.length]);
    return colors.get(name);
  };

  // The series' name of a member: the coordinator's ids are name#join, its history is by name.
  const seriesName = (m) => (typeof m.name === 'string' ? m.name : String(m.id || ''));

  function memberState(m) {
    if (m.former) return 'left';
    if ('healthy' in m) {
      if (!m.healthy) return 'silent';
      return typeof m.waiting_s === 'number' ? 'waiting' : 'training';
    }
    return typeof m.updated_age_s === 'number' && m.updated_age_s < 60 ? 'writing' : 'idle';
  }

  function renderSummary(status) {
    if (status.source === 'files') {
      $('title').textContent = 'dashboard';
      $('summary').textContent = `${status.members.length} metrics file(s) from the run directories given`;
      $('age-heading').textContent = 'last line (s ago)';
      return;
    }
    $('title').textContent = `run ${status.run_id}`;
    const q = status.quorum || {};
    const members = Array.isArray(q.members) ? q.members.length : 0;
    $('summary').textContent =
        `coordinator incarnation ${status.incarnation}, furthest step ${status.furthest_step}` +
        `${status.finished ? ' (finished)' : ''}; quorum q${q.id} of ${members} member(s)` +
        `${q.broken ? ' (broken: a member left)' : ''}; waiting for: ${status.waiting_for}`;
    $('age-heading').textContent = 'last heartbeat (s ago)';
  }

  function renderMembers(status) {
    const body = $('members').tBodies[0];
    const rows = [];
    const former = (status.former_members || []).map((m) => ({...m, former: true, step: (m.metrics || {}).step}));
    for (const m of (status.members || []).concat(former)) {
      const metrics = m.metrics || {};
      const state = memberState(m);
      const row = document.createElement('tr');
      const name = text('td', m.id || m.name);
      name.style.borderLeft = `6px solid ${colorOf(seriesName(m))}`;
      row.append(name, text('td', state, `state-${state}`), text('td', m.step), text('td', number(metrics.loss, 4)),
                 text('td', number(metrics.eval_loss, 4)), text('td', number(metrics.tokens_per_s, 0)),
                 text('td', number('heartbeat_age_s' in m ? m.heartbeat_age_s : m.updated_age_s, 1)),
                 text('td', m.quorum_id === undefined ? '' : `q${m.quorum_id}`), text('td', metrics.heals));
      rows.push(row);
    }
    body.replaceChildren(...rows);
  }

  function renderEvents(status) {
    const rows = (status.events || []).slice(-50).reverse().map((e) => {
      const row = document.createElement('tr');
      row.append(text('td', number(e.time_s, 1)), text('td', e.kind), text('td', e.detail));
      return row;
    });
    $('events').tBodies[0].replaceChildren(...rows);
  }

  // Appends /history's new points to each series; halves a series past MAX_POINTS.
  function takeHistory(history) {
    if (typeof history.seq === 'number' && history.seq < seq) {
      // The server started again (a new coordinator, a new loco dashboard): read everything anew.
      series.clear();
      seq = 0;
      return;
    }
    for (const s of history.series || []) {
      if (typeof s.name !== 'string' || !Array.isArray(s.step)) continue;
      let mine = series.get(s.name);
      if (!mine) {
        mine = {};
        series.set(s.name, mine);
      }
      for (const [column, values] of Object.entries(s)) {
        if (column === 'name' || !Array.isArray(values)) continue;
        mine[column] = (mine[column] || []).concat(values);
      }
      const length = mine.step.length;
      if (length > MAX_POINTS) {  // every other point, the newest kept
        for (const column of Object.keys(mine)) mine[column] = mine[column].filter((_, i) => (length - 1 - i) % 2 === 0);
      }
    }
    if (typeof history.seq === 'number') seq = history.seq;
  }

  // Round numbers for an axis from lo to hi, about `count` of them.
  function ticks(lo, hi, count) {
    const raw = (hi - lo) / count;
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((f) => f * magnitude).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }

  function label(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return `${(v / 1e9).toPrecision(3)}G`;
    if (a >= 1e6) return `${(v / 1e6).toPrecision(3)}M`;
    if (a >= 1e3) return `${(v / 1e3).toPrecision(3)}K`;
    return Number(v.toPrecision(4)).toString();
  }

  // Draws one chart: a line per series (and dots for `dots`), axes with round ticks. Sets data-points on
  // the canvas to the number of points drawn (the browser test reads it).
  function drawChart(canvas, chart) {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 460, height = canvas.clientHeight || 260;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.font = '11px system-ui, sans-serif';
    const finite = (v) => typeof v === 'number' && isFinite(v);
    let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity;
    for (const s of series.values()) {
      const xs = s[chart.x] || [];
      for (const column of [chart.y, chart.dots]) {
        const ys = (column && s[column]) || [];
        for (let i = 0; i < xs.length; ++i) {
          if (!finite(xs[i]) || !finite(ys[i])) continue;
          xlo = Math.min(xlo, xs[i]); xhi = Math.max(xhi, xs[i]);
          ylo = Math.min(ylo, ys[i]); yhi = Math.max(yhi, ys[i]);
        }
      }
    }
    let drawn = 0;
    if (!(xlo <= xhi)) {
      ctx.fillStyle = '#888';
      ctx.fillText('no points yet', width / 2 - 30, height / 2);
      canvas.dataset.points = '0';
      return;
    }
    if (xhi === xlo) { xlo -= 1; xhi += 1; }
    if (yhi === ylo) { ylo -= Math.abs(ylo) * 0.05 + 1e-9; yhi += Math.abs(yhi) * 0.05 + 1e-9; }
    const pad = (yhi - ylo) * 0.05;
    ylo -= pad; yhi += pad;
    const left = 56, right = 10, top = 8, bottom = 24;
    const px = (x) => left + (x - xlo) / (xhi - xlo) * (width - left - right);
    const py = (y) => height - bottom - (y - ylo) / (yhi - ylo) * (height - top - bottom);
    ctx.strokeStyle = '#eee';
    ctx.fillStyle = '#555';
    for (const t of ticks(ylo, yhi, 5)) {
      ctx.beginPath(); ctx.moveTo(left, py(t)); ctx.lineTo(width - right, py(t)); ctx.stroke();
      ctx.fillText(label(t), 4, py(t) + 4);
    }
    for (const t of ticks(xlo, xhi, 6)) {
      ctx.beginPath(); ctx.moveTo(px(t), top); ctx.lineTo(px(t), height - bottom); ctx.stroke();
      ctx.fillText(label(t), px(t) - 12, height - 6);
    }
    ctx.strokeStyle = '#999';
    ctx.strokeRect(left, top, width - left - right, height - top - bottom);
    for (const [name, s] of series) {
      const xs = s[chart.x] || [], ys = s[chart.y] || [];
      ctx.strokeStyle = ctx.fillStyle = colorOf(name);
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      let pen = false;
      for (let i = 0; i < xs.length; ++i) {
        if (!finite(xs[i]) || !finite(ys[i])) continue;
        if (pen) ctx.lineTo(px(xs[i]), py(ys[i])); else ctx.moveTo(px(xs[i]), py(ys[i]));
        pen = true;
        ++drawn;
      }
      ctx.stroke();
      const dots = (chart.dots && s[chart.dots]) || [];
      for (let i = 0; i < xs.length; ++i) {
        if (!finite(xs[i]) || !finite(dots[i])) continue;
        ctx.beginPath(); ctx.arc(px(xs[i]), py(dots[i]), 3, 0, 2 * Math.PI); ctx.fill();
        ++drawn;
      }
    }
    canvas.dataset.points = String(drawn);
  }

  function renderCharts() {
    const holder = $('charts');
    if (holder.children.length === 0) {
      for (const chart of CHARTS) {
        const figure = document.createElement('figure');
        figure.append(text('figcaption', chart.title), document.createElement('canvas'));
        holder.append(figure);
      }
    }
    CHARTS.forEach((chart, i) => drawChart(holder.children[i].querySelector('canvas'), chart));
    const legend = [...series.keys()].map((name) => {
      const item = document.createElement('li');
      const swatch = text('span', '', 'swatch');
      swatch.style.background = colorOf(name);
      item.append(swatch, text('span', name));
      return item;
    });
    $('legend').replaceChildren(...legend);
  }

  async function fetchJson(path) {
    const response = await fetch(path, request);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  async function update() {
    try {
      const [status, history] = await Promise.all([fetchJson('/status'), fetchJson(`/history?after=${seq}`)]);
      if (!Array.isArray(status.members)) throw new Error('/status lists no members: the status token is missing or wrong');
      takeHistory(history);
      // /history answers at most ~16K points at a time (the oldest first): ask on until the page has them all.
      for (let more = history.more === true, pieces = 1; more && pieces < 64; ++pieces) {
        const next = await fetchJson(`/history?after=${seq}`);
        takeHistory(next);
        more = next.more === true;
      }
      renderSummary(status);
      renderMembers(status);
      renderEvents(status);
      renderCharts();
      $('problem').hidden = true;
      document.body.dataset.updated = String(Date.now());
    } catch (error) {
      $('problem').textContent = `cannot update: ${error.message}`;
      $('problem').hidden = false;
    }
  }

  if (token) {
    const suffix = `token=${encodeURIComponent(token)}`;
    $('status-link').href = `/status?${suffix}`;
    $('history-link').href = `/history?after=0&${suffix}`;
  }
  // The next update starts POLL_MS after the last one ended: two at once would both ask after the same seq and
  // append the same points twice.
  const poll = async () => {
    await update();
    setTimeout(poll, POLL_MS);
  };
  poll();
})();
