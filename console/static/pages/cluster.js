// pages/cluster.js: the Cluster page (see app.js for the page contract).
// The members with their state (refreshed every 2 s), removing a member and
// handing the leadership over, a backup download, and live charts of this
// node's /metrics (per node: the node that serves the console).
import { h, replace, button, errorBox, errorText } from '../dom.js';
import { humanBytes } from './projects.js';

const EVERY = 2000; // ms between two reads of the status and of /metrics
const POINTS = 60; // points a chart keeps (two minutes)
const SVG = 'http://www.w3.org/2000/svg';

// ---------------------------------------------------------------- metrics

/**
 * parseMetrics(text) reads the Prometheus text format into samples:
 * [{name, labels: {k: v}, value}] (comments and malformed lines skipped).
 */
export function parseMetrics(text) {
  const out = [];
  for (const raw of String(text).split('\n')) {
    const line = raw.trim();
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3])) !== null) {
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
      }
    }
    const v = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    out.push({ name: m[1], labels, value: v });
  }
  return out;
}

/** sum of the samples named name whose labels pass keep. */
function sum(samples, name, keep = () => true) {
  let s = 0;
  for (const x of samples) if (x.name === name && Number.isFinite(x.value) && keep(x.labels)) s += x.value;
  return s;
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const READ_ROUTES = new Set(['/api/db/query', '/api/db/rules/test']);
const isDb = (l) => l.route === '/api/db' || (l.route || '').startsWith('/api/db/');
const isWrite = (l) => isDb(l) && WRITE_METHODS.has(l.method) && !READ_ROUTES.has(l.route) && l.route !== '/api/db/indexes' && l.route !== '/api/db/rules';
const isRead = (l) => isDb(l) && (l.method === 'GET' || READ_ROUTES.has(l.route));

/** The charts: what each reads from a scrape (counter: a rate per second; gauge: the value). */
const SERIES = [
  { id: 'writes', title: 'Writes', unit: '/s', kind: 'counter', help: 'database write requests answered (POST, PUT, DELETE on /api/db and /api/db/batch)', read: (s) => sum(s, 'edgebase_http_requests_total', isWrite) },
  { id: 'reads', title: 'Reads', unit: '/s', kind: 'counter', help: 'database read requests answered (GET /api/db…, queries)', read: (s) => sum(s, 'edgebase_http_requests_total', isRead) },
  { id: 'realtime', title: 'Realtime connections', unit: '', kind: 'gauge', help: 'authenticated WebSocket connections open on this node', read: (s) => sum(s, 'edgebase_realtime_connections') },
  { id: 'push', title: 'Push notifications', unit: '/s', kind: 'counter', help: 'notifications queued for delivery by this node, and device messages it sent', read: (s) => sum(s, 'edgebase_push_notifications_queued_total') + sum(s, 'edgebase_push_messages_sent_total') },
];

function fmt(v, unit) {
  if (!Number.isFinite(v)) return '–';
  const n = Math.abs(v) >= 100 || unit === '' ? Math.round(v).toString() : v.toFixed(v === 0 ? 0 : 2);
  return unit ? `${n} ${unit}` : n;
}

function svgEl(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

/** A small line chart: the figure, and update(points) that redraws it. */
function chart(spec) {
  const W = 300;
  const H = 80;
  const now = h('strong', { class: 'cluster-chart-now', id: `cluster-now-${spec.id}` }, '–');
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'cluster-chart-svg', role: 'img', preserveAspectRatio: 'none', focusable: 'false' });
  const title = svgEl('title', {});
  svg.append(title);
  const area = svgEl('path', { class: 'cluster-chart-area', d: '' });
  const line = svgEl('polyline', { class: 'cluster-chart-line', points: '', fill: 'none' });
  const base = svgEl('line', { class: 'cluster-chart-base', x1: 0, y1: H - 1, x2: W, y2: H - 1 });
  const dot = svgEl('circle', { class: 'cluster-chart-dot', r: 3, cx: -10, cy: -10 });
  svg.append(base, area, line, dot);
  const maxEl = h('span', { class: 'muted cluster-chart-max' }, '');
  const fig = h('figure', { class: 'cluster-chart card', id: `cluster-chart-${spec.id}`, 'data-points': '0', 'data-last': '' },
    h('figcaption', null, h('span', { class: 'cluster-chart-title' }, spec.title), ' ', now),
    svg,
    h('small', { class: 'hint' }, spec.help, ' ', maxEl));
  function update(points) {
    const vals = points.map((p) => p.v);
    const last = vals.length ? vals[vals.length - 1] : NaN;
    const max = Math.max(1e-9, ...vals, spec.unit === '' ? 1 : 0.1);
    const step = W / (POINTS - 1);
    const x0 = W - (vals.length - 1) * step;
    const xy = vals.map((v, i) => [x0 + i * step, H - 2 - (Math.max(0, v) / max) * (H - 6)]);
    line.setAttribute('points', xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' '));
    if (xy.length) {
      dot.setAttribute('cx', (xy[xy.length - 1][0] - 3).toFixed(1));
      dot.setAttribute('cy', xy[xy.length - 1][1].toFixed(1));
    }
    area.setAttribute('d', xy.length > 1 ? `M${xy[0][0].toFixed(1)},${H - 1} ${xy.map(([x, y]) => `L${x.toFixed(1)},${y.toFixed(1)}`).join(' ')} L${xy[xy.length - 1][0].toFixed(1)},${H - 1} Z` : '');
    const text = fmt(last, spec.unit);
    replace(now, text);
    replace(maxEl, vals.length ? `(peak ${fmt(Math.max(...vals), spec.unit)} over ${Math.round((vals.length * EVERY) / 1000)} s)` : '');
    const label = `${spec.title}: now ${text}; peak ${fmt(vals.length ? Math.max(...vals) : NaN, spec.unit)} over the last ${Math.round((vals.length * EVERY) / 1000)} seconds`;
    svg.setAttribute('aria-label', label);
    title.textContent = label;
    fig.setAttribute('data-points', String(vals.length));
    fig.setAttribute('data-last', Number.isFinite(last) ? String(last) : '');
  }
  return { fig, update };
}

// ---------------------------------------------------------------- page

function roleOf(n, leader) {
  if (n.id === leader) return 'leader';
  const s = String(n.state || '').toLowerCase();
  if (s === 'leader' || s === 'follower' || s === 'candidate') return s;
  return s || 'unreachable';
}

function roleBadge(role) {
  const kind = { leader: 'ok', follower: 'info', candidate: 'warn' }[role] || 'bad';
  return h('span', { class: `badge ${kind}` }, role);
}

export default {
  id: 'cluster',
  title: 'Cluster',
  needs: 'operator',
  async render(root, ctx) {
    const op = ctx.operator;
    const alive = () => !ctx.signal.aborted;
    const timers = [];
    const objectURLs = [];
    ctx.signal.addEventListener('abort', () => {
      for (const t of timers) clearInterval(t);
      for (const u of objectURLs) URL.revokeObjectURL(u);
    });

    // ---- nodes
    let status = null;
    let busy = false; // a leadership transfer or a removal in flight
    const rows = new Map(); // node id -> {tr, cells, actions}
    const tbody = h('tbody');
    const summary = h('p', { class: 'muted', id: 'cluster-summary', 'aria-live': 'polite' }, 'Reading the cluster…');
    const pollError = h('div', { class: 'cluster-poll-error' });
    const actionOut = h('div', { class: 'cluster-action-out', role: 'status', 'aria-live': 'polite' });
    const handOver = button('Hand over leadership', () => transfer(''), { id: 'cluster-handover', class: 'secondary' });

    function say(text, ok = true) {
      replace(actionOut, h('p', { class: ok ? 'ok' : 'error' }, text));
    }

    async function transfer(id) {
      if (busy) return;
      busy = true;
      syncButtons();
      replace(actionOut, h('p', { class: 'muted' }, id ? `Handing the leadership to ${id}…` : 'Handing the leadership over…'));
      try {
        const r = await op.cluster.transferLeadership(id || undefined);
        if (!alive()) return;
        say(`The leader is now ${r.leader}.`);
      } catch (err) {
        if (!alive()) return;
        replace(actionOut, errorBox(err));
      } finally {
        busy = false;
        if (alive()) await pollStatus();
      }
    }

    async function remove(id) {
      if (busy) return;
      busy = true;
      syncButtons();
      replace(actionOut, h('p', { class: 'muted' }, `Removing ${id}…`));
      try {
        await op.cluster.removeNode(id);
        if (!alive()) return;
        say(`${id} was removed from the cluster.`);
      } catch (err) {
        if (!alive()) return;
        replace(actionOut, errorBox(err));
      } finally {
        busy = false;
        if (alive()) await pollStatus();
      }
    }

    // A row is built once per member and updated in place, so that focus
    // (and an open confirmation) survives the refreshes.
    const self = String(op.url).replace(/\/+$/, '');
    const isSelf = (n) => String(n.httpAddr || '').replace(/\/+$/, '') === self;

    function makeRow(id, n) {
      const cells = {
        id: h('td', { 'data-label': 'Node' }),
        role: h('td', { 'data-label': 'Role' }),
        kind: h('td', { 'data-label': 'Kind' }),
        addr: h('td', { 'data-label': 'HTTP address' }),
        applied: h('td', { 'data-label': 'Applied index', class: 'cluster-applied' }),
        lag: h('td', { 'data-label': 'Lag', class: 'cluster-lag' }),
        actions: h('td', { 'data-label': 'Actions' }),
      };
      const makeLeader = button('Make leader', () => transfer(id), { class: 'small secondary cluster-make-leader', 'aria-label': `Make ${id} the leader` });
      const removeBtn = button('Remove', () => confirmBox(true), { class: 'small danger cluster-remove', 'aria-label': `Remove ${id}` });
      const yes = button(`Remove ${id}`, () => { confirmBox(false); remove(id); }, { class: 'small danger cluster-confirm-remove' });
      const no = button('Cancel', () => { confirmBox(false); removeBtn.focus(); }, { class: 'small secondary cluster-cancel-remove' });
      const confirm = h('div', { class: 'cluster-confirm', role: 'group', 'aria-label': `Confirm the removal of ${id}`, hidden: true },
        h('span', null, `Remove ${id} from the cluster? It stops serving, and a removed node must be wiped before it joins again.`,
          isSelf(n) ? ' It is the node serving this console: the console stops working with it.' : ''), ' ', yes, ' ', no);
      function confirmBox(open) {
        confirm.hidden = !open;
        removeBtn.hidden = open;
        if (open) yes.focus();
      }
      confirm.addEventListener('keydown', (ev) => {
        if (ev.key === 'Escape') {
          confirmBox(false);
          removeBtn.focus();
        }
      });
      cells.actions.append(h('div', { class: 'row cluster-actions' }, makeLeader, removeBtn), confirm);
      const tr = h('tr', { 'data-node': id }, Object.values(cells));
      return { tr, cells, makeLeader, removeBtn, yes };
    }

    function syncButtons() {
      handOver.disabled = busy || !status || status.nodes.filter((n) => n.voter).length < 2;
      for (const r of rows.values()) {
        r.makeLeader.disabled = busy;
        r.removeBtn.disabled = busy;
        r.yes.disabled = busy;
      }
    }

    function drawNodes() {
      const leader = status.leader;
      const leaderNode = status.nodes.find((n) => n.id === leader);
      const top = leaderNode ? leaderNode.appliedIndex : Math.max(0, ...status.nodes.map((n) => n.appliedIndex || 0));
      const seen = new Set();
      status.nodes.forEach((n, i) => {
        seen.add(n.id);
        let r = rows.get(n.id);
        if (!r) {
          r = makeRow(n.id, n);
          rows.set(n.id, r);
        }
        if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null);
        const role = roleOf(n, leader);
        replace(r.cells.id, h('span', { class: 'mono' }, n.id), n.id === leader ? [' ', h('span', { class: 'badge ok cluster-leader-badge' }, '★ leader')] : null,
          isSelf(n) ? [' ', h('span', { class: 'badge info cluster-self-badge', title: 'The console and its charts are served by this node' }, 'this console')] : null);
        replace(r.cells.role, roleBadge(role));
        replace(r.cells.kind, n.voter ? 'voter' : 'edge');
        replace(r.cells.addr, h('span', { class: 'mono' }, n.httpAddr || ''));
        replace(r.cells.applied, String(n.appliedIndex ?? ''));
        const lag = Math.max(0, top - (n.appliedIndex || 0));
        replace(r.cells.lag, role === 'unreachable' ? '–' : lag === 0 ? '0' : h('span', { class: lag > 100 ? 'warn' : '' }, String(lag)));
        r.tr.setAttribute('data-role', role);
        r.tr.setAttribute('data-voter', String(!!n.voter));
        r.tr.setAttribute('data-applied', String(n.appliedIndex ?? ''));
        // Only a voter that is not the leader can take the leadership.
        const canLead = n.voter && n.id !== leader;
        if (r.makeLeader.hidden === canLead) {
          if (!canLead && document.activeElement === r.makeLeader) handOver.focus();
          r.makeLeader.hidden = !canLead;
        }
      });
      for (const [id, r] of rows) {
        if (!seen.has(id)) {
          if (r.tr.contains(document.activeElement)) handOver.focus();
          r.tr.remove();
          rows.delete(id);
        }
      }
      const voters = status.nodes.filter((n) => n.voter).length;
      replace(summary, `${status.nodes.length} node${status.nodes.length === 1 ? '' : 's'}: ${voters} voter${voters === 1 ? '' : 's'}, ${status.nodes.length - voters} edge; leader ${leader || 'unknown'}.`);
      root.setAttribute('data-leader', leader || '');
      root.setAttribute('data-nodes', String(status.nodes.length));
      syncButtons();
    }

    let statusBusy = false;
    async function pollStatus() {
      if (statusBusy) return;
      statusBusy = true;
      try {
        const st = await op.cluster.status();
        if (!alive()) return;
        status = { leader: st.leader || '', nodes: st.nodes || [] };
        replace(pollError);
        drawNodes();
      } catch (err) {
        if (!alive()) return;
        replace(pollError, h('p', { class: 'error', role: 'alert' }, `Could not read the cluster: ${errorText(err)}`));
      } finally {
        statusBusy = false;
      }
    }

    // ---- backup
    const backupBtn = button('Download a backup', () => backup(), { id: 'cluster-backup' });
    const backupOut = h('div', { id: 'cluster-backup-out', role: 'status', 'aria-live': 'polite' });
    async function backup() {
      backupBtn.disabled = true;
      replace(backupOut, h('p', { class: 'muted' }, 'Reading the backup…'));
      try {
        const b = await op.backup();
        if (!alive()) return;
        for (const u of objectURLs.splice(0)) URL.revokeObjectURL(u);
        const url = URL.createObjectURL(b.blob);
        objectURLs.push(url);
        const link = h('a', { href: url, download: b.filename, id: 'cluster-backup-link', class: 'button secondary small' }, `Save ${b.filename} again`);
        replace(backupOut, h('p', { class: 'ok', id: 'cluster-backup-result', 'data-size': String(b.blob.size), 'data-revision': b.revision == null ? '' : String(b.revision) },
          `Backup of ${humanBytes(b.blob.size)} (${b.blob.size.toLocaleString()} bytes)`,
          b.revision == null ? '' : ` at revision ${b.revision}`, '. '), link);
        link.click();
      } catch (err) {
        if (!alive()) return;
        replace(backupOut, errorBox(err));
      } finally {
        backupBtn.disabled = false;
      }
    }

    // ---- charts
    const charts = SERIES.map((s) => ({ spec: s, points: [], ...chart(s) }));
    const metricsError = h('div');
    let prev = null; // {t, values}
    let metricsBusy = false;
    async function pollMetrics() {
      if (metricsBusy) return;
      metricsBusy = true;
      let text;
      try {
        text = await op.metrics();
      } catch (err) {
        if (!alive()) return;
        replace(metricsError, h('p', { class: 'error', role: 'alert' }, `Could not read /metrics: ${errorText(err)}`));
        return;
      } finally {
        metricsBusy = false;
      }
      if (!alive()) return;
      replace(metricsError);
      const samples = parseMetrics(text);
      const t = performance.now();
      const values = charts.map((c) => c.spec.read(samples));
      charts.forEach((c, i) => {
        let v;
        if (c.spec.kind === 'gauge') {
          v = values[i];
        } else if (prev) {
          const dt = (t - prev.t) / 1000;
          const d = values[i] - prev.values[i];
          v = dt > 0 && d >= 0 ? d / dt : 0; // a reset (node restart) counts as 0
        } else {
          return; // a rate needs two scrapes
        }
        c.points.push({ t, v });
        if (c.points.length > POINTS) c.points.shift();
        c.update(c.points);
      });
      prev = { t, values };
    }

    const host = (() => {
      try {
        return new URL(op.url).host;
      } catch {
        return op.url;
      }
    })();

    root.append(
      h('h1', { id: 'h-cluster' }, 'Cluster'),
      h('section', { class: 'card', 'aria-labelledby': 'cluster-nodes-h' },
        h('div', { class: 'toolbar' }, h('h2', { id: 'cluster-nodes-h', class: 'grow' }, 'Nodes'), handOver),
        summary, pollError, actionOut,
        h('div', { class: 'table-wrap' },
          h('table', { class: 'cluster-nodes' },
            h('caption', { class: 'sr-only' }, 'Members of the cluster, refreshed every 2 seconds'),
            h('thead', null, h('tr', null, ['Node', 'Role', 'Kind', 'HTTP address', 'Applied index', 'Lag', 'Actions'].map((l) => h('th', { scope: 'col' }, l)))),
            tbody)),
        h('p', { class: 'hint' }, 'Lag is the leader\'s applied index minus the node\'s. "Make leader" hands the leadership to that voter; "Hand over leadership" to any other voter.')),
      h('section', { class: 'card', 'aria-labelledby': 'cluster-backup-h' },
        h('h2', { id: 'cluster-backup-h' }, 'Backup'),
        h('p', { class: 'muted' }, 'A consistent copy of the whole cluster (every project), for edgebase restore. It holds password hashes and sealed secrets: keep it safe.'),
        h('div', { class: 'row' }, backupBtn), backupOut),
      h('section', { class: 'card', 'aria-labelledby': 'cluster-metrics-h' },
        h('h2', { id: 'cluster-metrics-h' }, 'Activity of this node'),
        h('p', { class: 'muted', id: 'cluster-metrics-note' },
          `Metrics are per node: these charts read /metrics of ${host}, the node serving this console, every 2 seconds (the last two minutes). Other nodes' traffic is not in them.`),
        metricsError,
        h('div', { class: 'cluster-charts' }, charts.map((c) => c.fig))),
    );

    await Promise.all([pollStatus(), pollMetrics()]);
    if (!alive()) return;
    timers.push(setInterval(() => { if (!busy) pollStatus(); }, EVERY));
    timers.push(setInterval(pollMetrics, EVERY));
  },
};
