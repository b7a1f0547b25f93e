// pages/push.js: the Push page (see app.js for the page contract).
//
// The project's push switch and FCM credentials, one user's devices and
// topics, the project's topics, composing a notification (sent now or
// scheduled), the schedules (cancel) and the history of what was sent.
// Route param: user (the user whose devices are shown).
import { h, replace, field, button, errorBox, table, time, badge, action, pager } from '../dom.js';

const PAGE = 20;

/** shortToken shows a device token's start and end. */
function shortToken(t) {
  const s = String(t || '');
  return s.length > 24 ? `${s.slice(0, 12)}…${s.slice(-8)}` : s;
}

/** targetText describes a notification's or a schedule's audience. */
function targetText(t) {
  if (!t || t.project) return 'project';
  if (t.userId) return `user ${t.userId}`;
  if (t.topic) return `topic ${t.topic}`;
  return JSON.stringify(t);
}

function statusBadge(s) {
  const kind = { sent: 'ok', delivered: 'ok', queued: 'info', sending: 'info', scheduled: 'info', cancelled: 'warn', fired: 'ok' }[s];
  return badge(s || '', kind);
}

/** num is a right-aligned count cell's content. */
function num(v) {
  return v === undefined || v === null ? '' : String(v);
}

/**
 * toUTC turns the value of an <input type=datetime-local> (the browser's
 * local time) into RFC 3339 in UTC with a Z, or '' when it is not a date.
 */
export function toUTC(local) {
  if (!local) return '';
  const d = new Date(local);
  if (Number.isNaN(d.getTime())) return '';
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function card(id, title, ...children) {
  return h('section', { id, class: 'card push-card', 'aria-labelledby': `${id}-h` }, h('h2', { id: `${id}-h` }, title), children);
}

export default {
  id: 'push',
  title: 'Push',
  needs: 'owner',
  async render(root, ctx) {
    const { client, signal } = ctx;
    const push = client.push;

    // ---- status: the switch and the FCM credentials
    const switchLine = h('div', { id: 'push-switch', class: 'row' });
    const switchMsg = h('div', { 'aria-live': 'assertive' });
    const switchStatus = h('span', { class: 'ok', 'aria-live': 'polite' });
    let enabled = null; // unknown until read
    function drawSwitch() {
      const state = enabled === null ? badge('unknown', 'warn') : enabled ? badge('on', 'ok') : badge('off', 'bad');
      const set = (on) => async (e) => {
        const r = await action(e.currentTarget, switchMsg, () => push.togglePush(on));
        if (r) {
          enabled = !!r.pushEnabled;
          drawSwitch();
          switchStatus.textContent = `Push turned ${enabled ? 'on' : 'off'}.`;
          switchLine.querySelector('#push-toggle')?.focus();
        }
      };
      const buttons = enabled === null
        ? [button('Turn push on', set(true), { id: 'push-toggle' }), button('Turn push off', set(false), { id: 'push-toggle-off', class: 'secondary' })]
        : [button(enabled ? 'Turn push off' : 'Turn push on', set(!enabled), { id: 'push-toggle', class: enabled ? 'secondary' : null, 'aria-describedby': 'push-switch-state' })];
      replace(switchLine, h('span', { id: 'push-switch-state' }, 'Push for this project: ', state), buttons, switchStatus);
      switchLine.dataset.state = enabled === null ? 'unknown' : enabled ? 'on' : 'off';
    }
    async function loadSwitch() {
      try {
        const r = await push.pushEnabled();
        enabled = !!r.pushEnabled;
      } catch (err) {
        if (!signal.aborted) replace(switchMsg, errorBox(err));
      }
      if (!signal.aborted) drawSwitch();
    }

    const credsView = h('div', { id: 'push-creds-state' });
    function drawCreds(c) {
      credsView.dataset.configured = c && c.configured ? 'true' : 'false';
      replace(credsView, h('dl', { class: 'kv' },
        h('dt', null, 'Configured'), h('dd', null, c && c.configured ? badge('yes', 'ok') : badge('no', 'warn')),
        h('dt', null, 'FCM project'), h('dd', { id: 'push-fcm-project' }, (c && c.fcmProjectId) || '—'),
        h('dt', null, 'Client email'), h('dd', null, (c && c.clientEmail) || '—'),
        h('dt', null, 'Updated'), h('dd', null, c && c.updatedAt ? time(c.updatedAt) : '—')));
    }
    const credsMsg = h('div', { 'aria-live': 'assertive' });
    const credsSaved = h('p', { class: 'ok', 'aria-live': 'polite' });
    async function loadCreds() {
      try {
        const c = await push.getCredentials();
        drawCreds(c);
        // Configured: the upload form folds away until wanted.
        credsDetails.open = !(c && c.configured);
      } catch (err) {
        if (!signal.aborted) replace(credsMsg, errorBox(err));
      }
    }
    const credsText = h('textarea', { id: 'push-creds', class: 'code push-creds', name: 'serviceAccount', spellcheck: 'false', autocomplete: 'off', placeholder: '{"type": "service_account", "project_id": …}' });
    const credsFile = h('input', { type: 'file', id: 'push-creds-file', accept: 'application/json,.json' });
    credsFile.addEventListener('change', () => {
      const f = credsFile.files && credsFile.files[0];
      if (!f) return;
      const reader = new FileReader();
      reader.onload = () => { credsText.value = String(reader.result || ''); credsText.focus(); };
      reader.onerror = () => replace(credsMsg, errorBox(reader.error || new Error('could not read the file')));
      reader.readAsText(f);
    });
    const credsForm = h('form', {
      class: 'stack push-creds-form',
      on: {
        submit: async (e) => {
          e.preventDefault();
          const text = credsText.value.trim();
          credsSaved.textContent = '';
          if (!text) {
            replace(credsMsg, h('p', { class: 'error', role: 'alert' }, 'Paste the service account JSON or choose its file first.'));
            credsText.focus();
            return;
          }
          const r = await action(e.submitter || credsForm.querySelector('button[type=submit]'), credsMsg, () => push.setCredentials(text));
          if (r) {
            credsText.value = '';
            credsFile.value = '';
            drawCreds(r);
            credsSaved.textContent = `Saved: ${r.clientEmail || 'the service account'}.`;
            // Saved: the form folds away; the focus stays on its summary.
            credsDetails.open = false;
            credsDetails.querySelector('summary').focus();
          }
        },
      },
    },
    field('Service account JSON (paste it here)', credsText, 'The key file from the Firebase console. It is stored sealed; the key is never shown again.'),
    field('…or choose the JSON file', credsFile),
    h('div', { class: 'row' }, h('button', { type: 'submit', id: 'push-creds-save' }, 'Save credentials')));

    const credsDetails = h('details', { class: 'push-creds-details', open: true },
      h('summary', null, 'Upload or replace the service account'), credsForm);

    // ---- devices and topics of one user
    const userInput = h('input', { type: 'text', id: 'push-user', name: 'user', autocomplete: 'off', value: ctx.params.get('user') || '', placeholder: 'user id or email' });
    const devicesView = h('div', { id: 'push-user-devices' });
    const devicesMsg = h('div', { 'aria-live': 'assertive' });
    async function resolveUser(v) {
      if (!v.includes('@')) return { id: v, label: v };
      const want = v.toLowerCase();
      let cursor;
      for (let i = 0; i < 20; i++) { // follow short pages (the server bounds each call)
        const r = await client.admin.users.list({ query: v, cursor, limit: 100 });
        const u = (r.users || []).find((x) => (x.email || '').toLowerCase() === want);
        if (u) return { id: u.id, label: `${u.email} (${u.id})` };
        cursor = r.nextCursor;
        if (!cursor) break;
      }
      const err = new Error(`no account with the email ${v}`);
      err.code = 'not_found';
      err.field = 'email';
      throw err;
    }
    async function showDevices(btn) {
      const v = userInput.value.trim();
      if (!v) {
        replace(devicesMsg, h('p', { class: 'error', role: 'alert' }, 'Enter a user id or an email.'));
        return;
      }
      ctx.setParams({ user: v });
      await action(btn, devicesMsg, async () => {
        const who = await resolveUser(v);
        const [devices, topics] = await Promise.all([push.devices({ userId: who.id }), push.topics({ userId: who.id })]);
        if (signal.aborted) return;
        devicesView.dataset.user = who.id;
        replace(devicesView,
          table([
            { label: 'Token', get: (d) => h('code', { title: d.token }, shortToken(d.token)) },
            { label: 'Platform', get: (d) => d.platform || '' },
            { label: 'Registered', get: (d) => time(d.registeredAt) },
          ], devices || [], { caption: `Devices of ${who.label}`, empty: 'No device registered.' }),
          h('h3', { class: 'push-sub' }, `Topics of ${who.label}`),
          (topics || []).length
            ? h('ul', { class: 'plain push-user-topics' }, topics.map((t) => h('li', null, h('code', null, typeof t === 'string' ? t : t.topic))))
            : h('p', { class: 'empty' }, 'Follows no topic.'));
      });
    }
    const devicesForm = h('form', {
      class: 'toolbar push-user-form',
      on: { submit: (e) => { e.preventDefault(); showDevices(e.submitter); } },
    }, field('User id or email', userInput), h('button', { type: 'submit', id: 'push-user-show' }, 'Show devices'));

    // ---- topics of the project
    const topicsView = h('div', { id: 'push-project-topics' });
    const topicsMsg = h('div', { 'aria-live': 'assertive' });
    async function loadTopics(btn) {
      await action(btn, topicsMsg, async () => {
        const list = await push.projectTopics();
        if (signal.aborted) return;
        replace(topicsView, table([
          { label: 'Topic', get: (t) => h('code', null, t.topic) },
          { label: 'Subscribers', get: (t) => num(t.subscribers) },
          { label: 'Send', get: (t) => button('Compose', () => composeTo('topic', t.topic), { class: 'small secondary push-compose-topic', 'aria-label': `Compose a notification to the topic ${t.topic}` }) },
        ], list, { caption: 'Topics followed by at least one account', empty: 'No topic has subscribers.' }));
        for (const tr of topicsView.querySelectorAll('tbody tr')) {
          const c = tr.querySelector('code');
          if (c) tr.dataset.topic = c.textContent;
          if (tr.cells[1]) tr.cells[1].classList.add('num');
        }
      });
    }

    // ---- compose
    const title = h('input', { type: 'text', id: 'push-title', name: 'title', required: true, maxlength: '256', autocomplete: 'off' });
    const body = h('textarea', { id: 'push-body', name: 'body', maxlength: '2048', rows: '3' });
    const data = h('textarea', { id: 'push-data', class: 'code push-data', name: 'data', rows: '3', spellcheck: 'false', placeholder: '{"screen": "offers"}' });
    const category = h('select', { id: 'push-category', name: 'category' },
      ['general', 'marketing', 'security'].map((c) => h('option', { value: c }, c)));
    const audience = h('select', { id: 'push-audience', name: 'audience' },
      h('option', { value: 'project' }, 'Everyone in the project'),
      h('option', { value: 'user' }, 'One user'),
      h('option', { value: 'topic' }, 'A topic'));
    const audienceValue = h('input', { type: 'text', id: 'push-audience-value', name: 'audienceValue', autocomplete: 'off' });
    const audienceField = field('User id', audienceValue);
    audienceField.hidden = true;
    audience.addEventListener('change', () => {
      audienceField.hidden = audience.value === 'project';
      audienceField.querySelector('label').textContent = audience.value === 'topic' ? 'Topic' : 'User id';
    });
    const sendAt = h('input', { type: 'datetime-local', id: 'push-send-at', name: 'sendAt', step: '60' });
    const composeMsg = h('div', { id: 'push-compose-msg', 'aria-live': 'assertive' });
    const result = h('p', { id: 'push-result', 'aria-live': 'polite' });

    /** composeTo points the form at an audience and puts the focus on the title. */
    function composeTo(kind, value) {
      audience.value = kind;
      audience.dispatchEvent(new Event('change'));
      audienceValue.value = value;
      title.focus();
    }

    function invalid(ctl, text) {
      ctl.setAttribute('aria-invalid', 'true');
      replace(composeMsg, h('p', { class: 'error', role: 'alert' }, text));
      ctl.focus();
      return null;
    }

    /** notification reads the form: {n, target} or null (the error shown). */
    function notification() {
      for (const c of [title, data, audienceValue, sendAt]) c.removeAttribute('aria-invalid');
      const n = { title: title.value.trim(), category: category.value };
      if (!n.title) return invalid(title, 'A title is needed.');
      if (body.value.trim()) n.body = body.value;
      const raw = data.value.trim();
      if (raw) {
        let obj;
        try {
          obj = JSON.parse(raw);
        } catch (err) {
          return invalid(data, `Data is not JSON: ${err.message}`);
        }
        if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return invalid(data, 'Data must be a JSON object of strings, e.g. {"screen": "offers"}.');
        const bad = Object.entries(obj).find(([, v]) => typeof v !== 'string');
        if (bad) return invalid(data, `Data values must be strings: data.${bad[0]} is not (FCM carries only strings).`);
        n.data = obj;
      }
      let target = { project: true };
      if (audience.value !== 'project') {
        const v = audienceValue.value.trim();
        if (!v) return invalid(audienceValue, audience.value === 'topic' ? 'Name the topic.' : 'Name the user (id).');
        target = audience.value === 'topic' ? { topic: v } : { userId: v };
      }
      return { n, target };
    }

    async function sendNow(btn) {
      const f = notification();
      if (!f) return;
      const { n, target } = f;
      const r = await action(btn, composeMsg, () => (target.userId ? push.sendToUser(target.userId, n)
        : target.topic ? push.sendToTopic(target.topic, n) : push.sendToProject(n)));
      if (!r) return;
      result.dataset.notification = r.notificationId || '';
      replace(result, 'Queued notification ', h('code', null, r.notificationId || ''), ` to ${targetText(target)}: ${r.targets} device${r.targets === 1 ? '' : 's'} targeted.`);
      hist.reset();
    }

    async function scheduleIt(btn) {
      const f = notification();
      if (!f) return;
      const at = toUTC(sendAt.value);
      if (!at) {
        invalid(sendAt, 'Choose the date and time to send at.');
        return;
      }
      const r = await action(btn, composeMsg, () => push.schedule({ ...f.n, sendAt: at, target: f.target }));
      if (!r) return;
      result.dataset.schedule = r.id || '';
      replace(result, 'Scheduled ', h('code', null, r.id || ''), ` for ${time(r.sendAt || at)} (${r.sendAt || at}) to ${targetText(r.target || f.target)}.`);
      schedules.reset();
    }

    const composeForm = h('form', {
      id: 'push-compose-form',
      class: 'stack',
      on: { submit: (e) => { e.preventDefault(); sendNow(e.submitter || composeForm.querySelector('#push-send')); } },
    },
    field('Title', title),
    field('Body', body),
    field('Data (optional)', data, 'A JSON object whose values are strings.'),
    h('div', { class: 'row push-compose-row' }, field('Category', category), field('Audience', audience), audienceField),
    h('div', { class: 'row' }, h('button', { type: 'submit', id: 'push-send' }, 'Send now')),
    h('fieldset', { class: 'push-schedule-set' },
      h('legend', null, 'Or schedule it'),
      h('div', { class: 'row push-compose-row' },
        field('Send at (your local time)', sendAt),
        button('Schedule', (e) => scheduleIt(e.currentTarget), { id: 'push-schedule', class: 'secondary' }))),
    composeMsg,
    result);

    // ---- schedules
    const schedView = h('div', { id: 'push-schedules-list' });
    const schedMsg = h('div', { 'aria-live': 'assertive' });
    const schedStatus = h('p', { class: 'ok', 'aria-live': 'polite' });
    const schedules = pager(async (cursor) => {
      const r = await push.scheduled({ limit: PAGE, cursor: cursor || undefined });
      return { items: r.scheduled || [], nextCursor: r.nextCursor };
    }, (items) => {
      if (signal.aborted) return;
      replace(schedView, table([
        { label: 'Title', get: (s) => s.title || '' },
        { label: 'Category', get: (s) => s.category || 'general' },
        { label: 'Audience', get: (s) => targetText(s.target) },
        { label: 'Send at', get: (s) => h('time', { datetime: s.sendAt }, time(s.sendAt)) },
        { label: 'Status', get: (s) => statusBadge(s.status) },
        {
          label: 'Cancel',
          get: (s) => (s.status !== 'scheduled' ? '' : button('Cancel', async (e) => {
            const r = await action(e.currentTarget, schedMsg, () => push.cancel(s.id));
            if (r) {
              await schedules.reset();
              schedStatus.textContent = `Cancelled “${s.title || s.id}”.`;
              (schedView.querySelector('button.push-cancel') || root.querySelector('#push-schedules-refresh')).focus();
            }
          }, { class: 'small secondary push-cancel', 'data-id': s.id, 'aria-label': `Cancel the schedule “${s.title || s.id}” at ${time(s.sendAt)}` })),
        },
      ], items, { caption: 'Scheduled notifications', empty: 'Nothing scheduled.' }));
      const rows = schedView.querySelectorAll('tbody tr');
      items.forEach((s, i) => { if (rows[i]) { rows[i].dataset.id = s.id; rows[i].dataset.status = s.status; } });
    }, { prefix: 'push' });

    // ---- history
    const histView = h('div', { id: 'push-history-list' });
    const hist = pager(async (cursor) => {
      const r = await push.history({ limit: PAGE, cursor: cursor || undefined });
      return { items: r.notifications || [], nextCursor: r.nextCursor };
    }, (items) => {
      if (signal.aborted) return;
      const counts = ['targets', 'delivered', 'failed', 'pruned', 'skipped', 'deferred'];
      replace(histView, table([
        { label: 'Title', get: (n) => n.title || '' },
        { label: 'Category', get: (n) => n.category || '' },
        { label: 'Audience', get: (n) => targetText(n.target) },
        { label: 'Status', get: (n) => statusBadge(n.status) },
        { label: 'Created', get: (n) => time(n.createdAt) },
        { label: 'Sent', get: (n) => time(n.sentAt) },
        ...counts.map((k) => ({ label: k[0].toUpperCase() + k.slice(1), get: (n) => num(n[k]) })),
        { label: 'Last error', get: (n) => (n.lastError ? h('span', { class: 'error push-last-error' }, n.lastError) : '') },
      ], items, { caption: 'Sent by the project, newest first', empty: 'Nothing sent yet.' }));
      const rows = histView.querySelectorAll('tbody tr');
      items.forEach((n, i) => {
        if (!rows[i]) return;
        rows[i].dataset.id = n.id;
        for (const k of counts) rows[i].dataset[k] = String(n[k] ?? '');
        for (let c = 6; c < 12 && c < rows[i].cells.length; c++) rows[i].cells[c].classList.add('num');
      });
    }, { prefix: 'push' });

    root.append(
      h('h1', { id: 'h-push' }, 'Push'),
      card('push-status', 'Status',
        switchLine, switchMsg,
        h('h3', { class: 'push-sub' }, 'FCM credentials'),
        credsView, credsSaved, credsMsg, credsDetails),
      h('div', { class: 'split' },
        card('push-devices', 'Devices of a user', devicesForm, devicesMsg, devicesView),
        card('push-topics', 'Topics',
          h('div', { class: 'toolbar' }, button('Refresh', (e) => loadTopics(e.currentTarget), { id: 'push-topics-refresh', class: 'secondary' })),
          topicsMsg, topicsView)),
      card('push-compose', 'Compose', composeForm),
      card('push-schedules', 'Schedules',
        h('div', { class: 'toolbar' }, button('Refresh', () => schedules.reset(), { id: 'push-schedules-refresh', class: 'secondary' })),
        schedMsg, schedStatus, schedView, schedules.nav),
      card('push-history', 'History',
        h('div', { class: 'toolbar' }, button('Refresh', () => hist.reset(), { id: 'push-history-refresh', class: 'secondary' })),
        histView, hist.nav));

    loadSwitch();
    loadCreds();
    loadTopics();
    schedules.reset();
    hist.reset();
    if (userInput.value) showDevices();
  },
};
