// pages/triggers.js: the Triggers page (see app.js for the page contract).
//
// The project's triggers with their delivery status (cursor, lag, pending,
// dead letters, delivered, failed, last error), refreshed every 5 s while
// the page is shown; a form to create or replace one (the action as JSON);
// delete (with a confirmation); and one trigger's dead letters with replay.
// Route param: trigger (the trigger whose dead letters are shown).
//
// Rows are built once per trigger and updated in place, so that the focus
// and an open confirmation survive the refreshes.
import { h, append, replace, field, button, errorBox, errorText, table, time, badge, action, pager, pretty } from '../dom.js';

const REFRESH_MS = 5000;
const DEAD_PAGE = 20;

/** EXAMPLES fill the action editor: one per kind of action. */
const EXAMPLES = {
  webhook: { webhook: { url: 'https://hooks.example.com/edgebase' } },
  push: { push: { to: 'user', userIdFrom: 'after.ownerId', title: 'Updated', body: '{{ path }} changed', data: { path: '{{ path }}' } } },
  write: { write: { op: 'increment', collection: 'stats/{{ params.id }}', field: 'changes', by: 1 } },
};

/** actionText is one line saying what an action does. */
export function actionText(a) {
  if (!a) return '';
  if (a.webhook) return `webhook → ${a.webhook.url || ''}`;
  if (a.push) return `push to ${a.push.to || ''}${a.push.to === 'topic' && a.push.topic ? ` ${a.push.topic}` : ''}`;
  if (a.write) return `write: ${a.write.op || ''} ${a.write.collection || ''}`;
  return JSON.stringify(a);
}

/** editableAction is the action as the editor shows it: without what answers add (secretHint). */
export function editableAction(a) {
  const out = JSON.parse(JSON.stringify(a || {}));
  if (out.webhook) {
    delete out.webhook.secretHint;
    delete out.webhook.secret;
  }
  return out;
}

/** controlOf names the form control a server error's field is about. */
export function controlOf(f) {
  const s = String(f || '');
  if (s === 'name') return 'name';
  if (s === 'match') return 'match';
  if (s === 'on' || s.startsWith('on[') || s.startsWith('on.')) return 'on';
  if (s === 'condition') return 'condition';
  if (s === 'disabled') return 'disabled';
  if (s === 'action' || s.startsWith('action.') || s.startsWith('action[')) return 'action';
  return '';
}

const num = (v) => (v === undefined || v === null ? '' : String(v));

export default {
  id: 'triggers',
  title: 'Triggers',
  needs: 'owner',
  async render(root, ctx) {
    const { client, signal } = ctx;
    const alive = () => !signal.aborted;
    const tr = client.triggers;

    // ---------------------------------------------------------- the list
    const listMsg = h('div', { id: 'triggers-list-msg', 'aria-live': 'assertive' });
    const listStatus = h('p', { class: 'ok', id: 'triggers-list-status', 'aria-live': 'polite' });
    const tbody = h('tbody');
    const empty = h('p', { class: 'empty', id: 'triggers-empty', hidden: true }, 'No triggers yet: create one below.');
    const columns = ['Trigger', 'Action', 'Cursor', 'Lag', 'Pending', 'Dead letters', 'Delivered', 'Failed', 'Last error', 'Actions'];
    const numeric = new Set(['Cursor', 'Lag', 'Pending', 'Dead letters', 'Delivered', 'Failed']);
    const tableWrap = h('div', { class: 'table-wrap', id: 'triggers-list' },
      h('table', null,
        h('caption', null, 'Triggers of the project and their delivery'),
        h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col', class: numeric.has(c) ? 'num' : null }, c)))),
        tbody));
    const rows = new Map(); // name -> {tr, cells, buttons}
    let triggers = [];

    function makeRow(name) {
      const cells = {};
      for (const c of columns) cells[c] = h('td', { 'data-label': c, class: numeric.has(c) ? 'num' : null });
      const edit = button('Edit', () => startEdit(name), { class: 'small secondary triggers-edit', 'aria-label': `Edit ${name}` });
      const dead = button('Dead letters', () => showDead(name, true), { class: 'small secondary triggers-dead', 'aria-label': `Dead letters of ${name}` });
      const del = button('Delete', () => confirmBox(true), { class: 'small danger triggers-delete', 'aria-label': `Delete ${name}` });
      const yes = button(`Delete ${name}`, () => { confirmBox(false); remove(name, del); }, { class: 'small danger triggers-confirm-delete' });
      const no = button('Cancel', () => { confirmBox(false); del.focus(); }, { class: 'small secondary triggers-cancel-delete' });
      const confirm = h('div', { class: 'triggers-confirm', role: 'group', 'aria-label': `Confirm deleting ${name}`, hidden: true },
        h('span', null, `Delete ${name}? Its progress and dead letters go with it.`), ' ', yes, ' ', no);
      function confirmBox(open) {
        confirm.hidden = !open;
        del.hidden = open;
        if (open) yes.focus();
      }
      confirm.addEventListener('keydown', (ev) => {
        if (ev.key === 'Escape') {
          confirmBox(false);
          del.focus();
        }
      });
      cells.Actions.append(h('div', { class: 'row triggers-actions' }, edit, dead, del), confirm);
      const row = h('tr', { 'data-trigger': name }, Object.values(cells));
      return { tr: row, cells };
    }

    function drawList() {
      const seen = new Set();
      triggers.forEach((t, i) => {
        seen.add(t.name);
        let r = rows.get(t.name);
        if (!r) {
          r = makeRow(t.name);
          rows.set(t.name, r);
        }
        if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null);
        const s = t.status || {};
        const c = r.cells;
        replace(c.Trigger, h('code', { class: 'triggers-name' }, t.name), ' ',
          t.disabled ? badge('disabled', 'warn') : badge('enabled', 'ok'),
          h('div', { class: 'muted triggers-match' }, h('code', null, t.match || ''), ` · ${(t.on || []).join(', ')}`),
          t.condition ? h('div', { class: 'muted triggers-cond' }, 'if ', h('code', null, t.condition)) : null);
        replace(c.Action, h('span', { class: 'triggers-action-text' }, actionText(t.action)));
        replace(c.Cursor, num(s.cursor));
        replace(c.Lag, num(s.lagRevisions));
        replace(c.Pending, num(s.pending));
        replace(c['Dead letters'], s.deadLetters ? badge(String(s.deadLetters), 'bad') : num(s.deadLetters));
        replace(c.Delivered, num(s.delivered));
        replace(c.Failed, num(s.failed));
        replace(c['Last error'], s.lastError
          ? h('span', { class: 'error triggers-last-error' }, s.lastError, s.lastErrorAt ? h('small', { class: 'muted' }, ` (${time(s.lastErrorAt)})`) : null)
          : (s.lastSuccessAt ? h('span', { class: 'muted' }, `last success ${time(s.lastSuccessAt)}`) : ''));
        const d = r.tr.dataset;
        d.delivered = num(s.delivered);
        d.failed = num(s.failed);
        d.deadLetters = num(s.deadLetters);
        d.pending = num(s.pending);
        d.cursor = num(s.cursor);
        d.disabled = String(!!t.disabled);
      });
      for (const [name, r] of rows) {
        if (seen.has(name)) continue;
        r.tr.remove();
        rows.delete(name);
      }
      empty.hidden = triggers.length > 0;
      tableWrap.hidden = triggers.length === 0;
    }

    let timer = null;
    signal.addEventListener('abort', () => clearTimeout(timer));
    async function load() {
      clearTimeout(timer);
      try {
        const list = await tr.list();
        if (!alive()) return;
        triggers = list;
        drawList();
        replace(listMsg);
      } catch (err) {
        if (alive()) replace(listMsg, errorBox(err));
      }
      if (alive()) timer = setTimeout(load, REFRESH_MS);
    }

    async function remove(name, btn) {
      const r = await action(btn, listMsg, () => tr.delete(name));
      if (!r || !alive()) return;
      listStatus.textContent = `Deleted ${name} (revision ${r.revision}).`;
      if (deadName === name) showDead('', false);
      if (editing === name) startNew(false);
      await load();
      (tbody.querySelector('button.triggers-edit') || root.querySelector('#triggers-refresh')).focus();
    }

    // ---------------------------------------------------------- the form
    const nameIn = h('input', { id: 'trigger-name', name: 'name', class: 'mono', autocomplete: 'off', spellcheck: 'false', required: true, maxlength: '64', pattern: '[A-Za-z0-9][A-Za-z0-9_\\-]*', placeholder: 'order-created' });
    const matchIn = h('input', { id: 'trigger-match', name: 'match', class: 'mono', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'orders/{id}' });
    const onBoxes = ['create', 'update', 'delete'].map((k) => h('input', { type: 'checkbox', id: `trigger-on-${k}`, name: 'on', value: k, checked: true }));
    const onSet = h('fieldset', { class: 'triggers-on', id: 'trigger-on' },
      h('legend', null, 'On'),
      h('div', { class: 'row' }, onBoxes.map((b) => h('div', { class: 'field inline' }, b, h('label', { for: b.id }, b.value)))));
    const condIn = h('textarea', { id: 'trigger-condition', name: 'condition', class: 'code triggers-condition', rows: 2, spellcheck: 'false', placeholder: 'after.total > 100' });
    const actionIn = h('textarea', { id: 'trigger-action', name: 'action', class: 'code triggers-action', rows: 8, spellcheck: 'false', wrap: 'off' });
    const disabledIn = h('input', { type: 'checkbox', id: 'trigger-disabled', name: 'disabled' });
    const formMsg = h('div', { id: 'trigger-msg', 'aria-live': 'polite' });
    const secretBox = h('div', { id: 'trigger-secret', class: 'triggers-secret', hidden: true, 'aria-live': 'polite' });
    const formTitle = h('h2', { id: 'triggers-form-h' }, 'New trigger');
    const controls = { name: nameIn, match: matchIn, on: onBoxes[0], condition: condIn, action: actionIn, disabled: disabledIn };
    let editing = ''; // the name loaded in the form ('' for a new trigger)

    function clearErrors() {
      for (const el of root.querySelectorAll('#triggers-form [aria-invalid]')) el.removeAttribute('aria-invalid');
      for (const el of root.querySelectorAll('#triggers-form .triggers-field-error')) {
        const ctl = root.querySelector(`[aria-describedby~="${el.id}"]`);
        if (ctl) {
          const rest = ctl.getAttribute('aria-describedby').split(' ').filter((x) => x !== el.id);
          if (rest.length) ctl.setAttribute('aria-describedby', rest.join(' '));
          else ctl.removeAttribute('aria-describedby');
        }
        el.remove();
      }
    }

    /** fieldError shows text at control key (focused), or in the form's message when none fits. */
    function fieldError(key, text, f) {
      const ctl = controls[key];
      if (!ctl) {
        replace(formMsg, h('p', { class: 'error', role: 'alert' }, text));
        return;
      }
      const id = `trigger-err-${key}`;
      ctl.setAttribute('aria-invalid', 'true');
      ctl.setAttribute('aria-describedby', [ctl.getAttribute('aria-describedby'), id].filter(Boolean).join(' '));
      const at = key === 'on' ? onSet : ctl.closest('.field');
      at.append(h('p', { class: 'error triggers-field-error', id, role: 'alert', 'data-for': f || key }, text));
      ctl.focus();
      replace(formMsg, h('p', { class: 'error' }, 'Not saved: fix the field marked.'));
    }

    /** definition reads the form: the wire body, or null (an error shown). */
    function definition() {
      const name = nameIn.value.trim();
      if (!name) {
        fieldError('name', 'A name is needed (letters, digits, - and _).');
        return null;
      }
      const match = matchIn.value.trim();
      if (!match) {
        fieldError('match', 'A path pattern is needed, e.g. orders/{id}.');
        return null;
      }
      const on = onBoxes.filter((b) => b.checked).map((b) => b.value);
      if (!on.length) {
        fieldError('on', 'Choose at least one kind of change.');
        return null;
      }
      let act;
      try {
        act = JSON.parse(actionIn.value);
      } catch (err) {
        fieldError('action', `The action is not JSON: ${err.message}`);
        return null;
      }
      if (!act || typeof act !== 'object' || Array.isArray(act)) {
        fieldError('action', 'The action is a JSON object with one member: webhook, push or write.');
        return null;
      }
      const def = { match, on, action: act };
      if (condIn.value.trim()) def.condition = condIn.value.trim();
      if (disabledIn.checked) def.disabled = true;
      return { name, def };
    }

    async function save(btn) {
      clearErrors();
      replace(formMsg);
      const d = definition();
      if (!d) return;
      btn.disabled = true;
      try {
        const r = await tr.put(d.name, d.def);
        if (!alive()) return;
        const t = r.trigger || {};
        editing = d.name;
        formTitle.textContent = `Edit ${d.name}`;
        nameIn.readOnly = true;
        replace(formMsg, h('p', { class: 'ok', id: 'trigger-saved' }, `${r.created ? 'Created' : 'Saved'} ${d.name}: revision ${r.revision}.`));
        const secret = t.action && t.action.webhook && t.action.webhook.secret;
        if (secret) {
          secretBox.hidden = false;
          replace(secretBox, h('p', null, h('strong', null, 'Signing secret: '), h('code', { id: 'trigger-secret-value' }, secret)),
            h('p', { class: 'hint' }, 'Copy it now: it is never shown again. Receivers check Edgebase-Signature with it; saving without a secret keeps it.'));
        } else {
          secretBox.hidden = true;
          replace(secretBox);
        }
        actionIn.value = pretty(editableAction(t.action || d.def.action));
        await load();
      } catch (err) {
        if (!alive()) return;
        const key = controlOf(err.field);
        if (key) fieldError(key, errorText(err), err.field);
        else replace(formMsg, errorBox(err));
      } finally {
        btn.disabled = false;
      }
    }

    function fill(t) {
      clearErrors();
      nameIn.value = t ? t.name : '';
      nameIn.readOnly = !!t;
      matchIn.value = t ? t.match || '' : '';
      const on = t && t.on && t.on.length ? t.on : ['create', 'update', 'delete'];
      for (const b of onBoxes) b.checked = on.includes(b.value);
      condIn.value = t ? t.condition || '' : '';
      actionIn.value = pretty(t ? editableAction(t.action) : EXAMPLES.webhook);
      disabledIn.checked = !!(t && t.disabled);
      secretBox.hidden = true;
      replace(secretBox);
      replace(formMsg);
    }

    async function startEdit(name) {
      let t = triggers.find((x) => x.name === name);
      try {
        t = (await tr.get(name)) || t;
      } catch (err) {
        if (alive()) replace(formMsg, errorBox(err));
      }
      if (!alive() || !t) return;
      editing = name;
      formTitle.textContent = `Edit ${name}`;
      fill(t);
      const hint = t.action && t.action.webhook && t.action.webhook.secretHint;
      if (hint) replace(formMsg, h('p', { class: 'hint' }, `The webhook's secret ends in ${hint}; it is kept unless the action names a new one.`));
      matchIn.focus();
    }

    function startNew(focus = true) {
      editing = '';
      formTitle.textContent = 'New trigger';
      fill(null);
      if (focus) nameIn.focus();
    }

    const saveBtn = h('button', { type: 'submit', id: 'trigger-save' }, 'Save trigger');
    const form = h('form', {
      id: 'triggers-form',
      class: 'stack',
      on: { submit: (e) => { e.preventDefault(); save(saveBtn); } },
    },
    h('div', { class: 'row' },
      field('Name', nameIn, 'Letters, digits, - and _; at most 64.'),
      field('Match (path pattern)', matchIn, 'As in the access rules: orders/{id}, users/{uid}/**.')),
    onSet,
    field('Condition (CEL, optional)', condIn, 'Over before, after, path, revision, type, time and params; must be true to fire.'),
    field('Action (JSON)', actionIn, 'Exactly one of webhook {url, secret?, headers?}, push {to, userIdFrom?, topic?, title, body, data?} or write {op, collection, ...}; templates use {{ expr }}.'),
    h('div', { class: 'row triggers-examples', role: 'group', 'aria-label': 'Fill the action with an example' },
      h('span', { class: 'muted' }, 'Examples:'),
      Object.keys(EXAMPLES).map((k) => button(k, () => {
        actionIn.value = pretty(EXAMPLES[k]);
        actionIn.focus();
      }, { class: 'small secondary triggers-example', 'data-kind': k, 'aria-label': `Fill the action with a ${k} example` }))),
    h('div', { class: 'field inline' }, disabledIn, h('label', { for: 'trigger-disabled' }, 'Disabled (changes wait until enabled again)')),
    h('div', { class: 'row' }, saveBtn, button('New trigger', () => startNew(), { id: 'trigger-new', class: 'secondary' })),
    formMsg,
    secretBox);

    // ---------------------------------------------------------- dead letters
    let deadName = ctx.params.get('trigger') || '';
    const deadTitle = h('h2', { id: 'triggers-dead-h' }, 'Dead letters');
    const deadHint = h('p', { class: 'hint', id: 'triggers-dead-hint' }, 'Choose “Dead letters” on a trigger to see the events it could not deliver.');
    const deadMsg = h('div', { id: 'triggers-dead-msg', 'aria-live': 'assertive' });
    const deadStatus = h('p', { class: 'ok', id: 'triggers-dead-status', 'aria-live': 'polite' });
    const deadView = h('div', { id: 'triggers-dead-list' });
    const replayAll = button('Replay all', (e) => replay(e.currentTarget, null), { id: 'triggers-replay-all', hidden: true });
    const deadRefresh = button('Refresh', () => dead.reset(), { id: 'triggers-dead-refresh', class: 'secondary', hidden: true });
    const dead = pager(async (cursor) => {
      if (!deadName) return { items: [] };
      const r = await tr.deadLetters(deadName, { limit: DEAD_PAGE, pageToken: cursor || undefined });
      return { items: r.deadLetters || [], nextCursor: r.nextPageToken };
    }, (items) => {
      if (!alive()) return;
      replace(deadView, table([
        { label: 'Path', get: (d) => h('code', null, d.path || '') },
        { label: 'Revision', get: (d) => num(d.revision) },
        { label: 'Type', get: (d) => d.type || '' },
        { label: 'Attempts', get: (d) => num(d.attempts) },
        { label: 'Last error', get: (d) => (d.lastError ? h('span', { class: 'error triggers-last-error' }, d.lastError) : '') },
        { label: 'Dead at', get: (d) => time(d.deadAt) },
        {
          label: 'Event',
          get: (d) => h('details', { class: 'triggers-event' }, h('summary', { 'aria-label': `The event of ${d.path} at revision ${d.revision}` }, 'Show'),
            h('pre', { class: 'json' }, pretty({ before: d.before ?? null, after: d.after ?? null, params: d.params || {} }))),
        },
        {
          label: 'Replay',
          get: (d) => button('Replay', (e) => replay(e.currentTarget, [d.id]), { class: 'small secondary triggers-replay', 'data-id': d.id, 'aria-label': `Replay ${d.path} at revision ${d.revision}` }),
        },
      ], items, { caption: `Dead letters of ${deadName}`, empty: 'No dead letters.' }));
      const trs = deadView.querySelectorAll('tbody tr');
      items.forEach((d, i) => {
        if (!trs[i]) return;
        trs[i].dataset.id = d.id;
        trs[i].dataset.revision = num(d.revision);
        trs[i].cells[1]?.classList.add('num');
        trs[i].cells[3]?.classList.add('num');
      });
      replayAll.hidden = items.length === 0;
    }, { prefix: 'triggers', label: 'More dead letters' });

    async function replay(btn, ids) {
      const name = deadName;
      const r = await action(btn, deadMsg, () => tr.replay(name, ids || undefined));
      if (!r || !alive()) return;
      deadStatus.textContent = `Replayed ${r.replayed} event${r.replayed === 1 ? '' : 's'} of ${name} (revision ${r.revision}): queued again for delivery.`;
      await dead.reset();
      await load();
      (deadView.querySelector('button.triggers-replay') || deadRefresh).focus();
    }

    function showDead(name, focus) {
      deadName = name;
      ctx.setParams(name ? { trigger: name } : {});
      deadTitle.textContent = name ? `Dead letters of ${name}` : 'Dead letters';
      deadHint.hidden = !!name;
      deadRefresh.hidden = !name;
      replayAll.hidden = true;
      deadStatus.textContent = '';
      replace(deadMsg);
      if (!name) {
        replace(deadView);
        dead.nav.hidden = true;
        return;
      }
      dead.nav.hidden = false;
      dead.reset();
      if (focus) {
        deadTitle.setAttribute('tabindex', '-1');
        deadTitle.focus();
      }
    }

    // ---------------------------------------------------------- layout
    append(root, [
      h('h1', { id: 'h-triggers' }, 'Triggers'),
      h('section', { id: 'triggers-list-card', class: 'card stack', 'aria-labelledby': 'triggers-list-h' },
        h('div', { class: 'row' }, h('h2', { id: 'triggers-list-h', class: 'grow' }, 'Triggers'),
          button('Refresh', () => load(), { id: 'triggers-refresh', class: 'secondary small' })),
        h('p', { class: 'hint' }, 'Each committed change of a matching document runs the action, at least once and in order per document. The status refreshes every 5 seconds.'),
        listMsg, listStatus, empty, tableWrap),
      h('section', { id: 'triggers-form-card', class: 'card stack', 'aria-labelledby': 'triggers-form-h' }, formTitle, form),
      h('section', { id: 'triggers-dead-card', class: 'card stack', 'aria-labelledby': 'triggers-dead-h' },
        h('div', { class: 'row' }, deadTitle, h('span', { class: 'grow' }), replayAll, deadRefresh),
        deadHint, deadMsg, deadStatus, deadView, dead.nav),
    ]);
    fill(null);
    showDead(deadName, false);
    await load();
  },
};
