// pages/users.js: the Users page (see app.js for the page contract).
//
// A search of the project's accounts (client.admin.users.list, paged by
// nextCursor), the detail of one account (route param ?id=): its fields, its
// role, disable/enable, revoking its sessions (all, or one by one), deleting
// it (with an inline confirmation), its audit events; and the project's whole
// audit log with a type filter. Route params: q (the search), id (the open
// account).
import { h, replace, field, button, errorBox, table, time, badge, action, pager } from '../dom.js';

const PAGE = 50;

// The audit event types of docs/api.md (the filter of the audit log).
const AUDIT_TYPES = [
  'login', 'login-failed-threshold', 'logout', 'register', 'totp-enabled', 'totp-disabled',
  'password-changed', 'password-reset', 'email-verified', 'email-changed', 'role-changed',
  'account-disabled', 'account-enabled', 'account-deleted', 'sessions-revoked', 'key-created',
  'key-deleted', 'oauth-linked', 'anonymous-linked', 'smtp-changed',
];

// Labels of the account fields the detail shows first (others by their name).
const FIELD_LABELS = {
  id: 'Id', email: 'Email', name: 'Name', role: 'Role', totpEnabled: 'TOTP', emailVerified: 'Email verified',
  disabled: 'Disabled', anonymous: 'Anonymous', createdAt: 'Created', updatedAt: 'Updated',
};

function yesNo(v, yes = 'yes', no = 'no') {
  return v ? badge(yes, 'ok') : badge(no);
}

/** detailText is an audit event's detail as "k=v, k=v". */
function detailText(d) {
  if (!d || typeof d !== 'object') return '';
  return Object.entries(d).map(([k, v]) => `${k}=${v}`).join(', ');
}

/** fieldValue shows any value of a user record. */
function fieldValue(k, v) {
  if (v === null || v === undefined || v === '') return h('span', { class: 'muted' }, '—');
  if (typeof v === 'boolean') return yesNo(v);
  if (/At$/.test(k) && typeof v === 'string') return h('time', { datetime: v }, time(v));
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export default {
  id: 'users',
  title: 'Users',
  needs: 'owner',
  async render(root, ctx) {
    const { client, signal } = ctx;
    const users = client.admin.users;
    const me = client.auth.user();
    let query = ctx.params.get('q') || '';
    let openId = ctx.params.get('id') || '';

    const saveParams = () => {
      const p = {};
      if (query) p.q = query;
      if (openId) p.id = openId;
      ctx.setParams(p);
    };

    // ---- search and results
    const q = h('input', { type: 'search', id: 'users-query', name: 'q', value: query, autocomplete: 'off', placeholder: 'email prefix, user id or part of a name' });
    const resultsHolder = h('div', { id: 'users-results' });
    const list = pager(async (cursor) => {
      const r = await users.list({ query, cursor: cursor || undefined, limit: PAGE });
      return { items: r.users || [], nextCursor: r.nextCursor };
    }, drawResults, { prefix: 'users' });

    function drawResults(items) {
      if (signal.aborted) return;
      replace(resultsHolder, table([
        { label: 'Email', get: (u) => button(u.email || '(no email)', () => openUser(u.id), { class: 'link users-open', 'data-id': u.id, 'aria-label': `Open ${u.email || u.id}` }) },
        { label: 'Name', get: (u) => u.name || '' },
        { label: 'Id', get: (u) => h('code', null, u.id) },
        { label: 'Role', get: (u) => (u.role === 'owner' ? badge('owner', 'info') : badge(u.role || 'user')) },
        { label: 'TOTP', get: (u) => yesNo(u.totpEnabled, 'on', 'off') },
        { label: 'Verified', get: (u) => yesNo(u.emailVerified) },
        { label: 'Disabled', get: (u) => (u.disabled ? badge('disabled', 'bad') : badge('no')) },
        { label: 'Created', get: (u) => time(u.createdAt) },
      ], items, { caption: query ? `Accounts matching “${query}”` : 'Accounts', empty: 'No account on this page.' }));
      for (const tr of resultsHolder.querySelectorAll('tbody tr')) {
        const b = tr.querySelector('.users-open');
        if (b) {
          tr.dataset.id = b.dataset.id;
          if (b.dataset.id === openId) tr.classList.add('selected');
        }
      }
    }

    const searchForm = h('form', {
      class: 'toolbar users-search', role: 'search', 'aria-label': 'Search accounts',
      on: {
        submit: (e) => {
          e.preventDefault();
          query = q.value.trim();
          saveParams();
          list.reset();
        },
      },
    }, field('Search accounts', q), h('button', { type: 'submit', id: 'users-search' }, 'Search'));

    // ---- detail of one account
    // What the last action did (a live region kept across re-renders).
    const detailStatus = h('p', { id: 'users-detail-status', class: 'ok', 'aria-live': 'polite' });
    const listStatus = h('p', { id: 'users-list-status', class: 'ok', 'aria-live': 'polite' });
    const say = (text) => { detailStatus.textContent = text; };
    const detail = h('section', { id: 'users-detail', class: 'card users-detail', 'aria-labelledby': 'users-detail-h', hidden: true });

    async function openUser(id) {
      openId = id;
      listStatus.textContent = '';
      saveParams();
      for (const tr of resultsHolder.querySelectorAll('tbody tr')) tr.classList.toggle('selected', tr.dataset.id === id);
      await drawDetail(id, true);
    }

    async function drawDetail(id, focus) {
      detail.hidden = false;
      replace(detail, h('h2', { id: 'users-detail-h', tabindex: '-1' }, 'Account'), h('p', { class: 'muted' }, 'Loading…'));
      let u;
      try {
        u = await users.get(id);
      } catch (err) {
        if (signal.aborted || openId !== id) return;
        replace(detail, h('h2', { id: 'users-detail-h', tabindex: '-1' }, 'Account'), errorBox(err),
          button('Close', closeDetail, { id: 'users-close' }));
        return;
      }
      if (signal.aborted || openId !== id) return;
      showUser(u);
      if (focus) detail.querySelector('#users-detail-h').focus();
    }

    function closeDetail() {
      openId = '';
      saveParams();
      detail.hidden = true;
      replace(detail);
      for (const tr of resultsHolder.querySelectorAll('tr.selected')) tr.classList.remove('selected');
      q.focus();
    }

    function updateRow(u) {
      list.replaceItem((x) => x.id === u.id, u);
    }

    function showUser(u, keep) {
      if (!keep) detailStatus.textContent = '';
      const self = me && me.id === u.id;
      const msg = h('div', { id: 'users-detail-msg', 'aria-live': 'assertive' });

      // All fields, known ones first.
      const order = ['id', 'email', 'name', 'role', 'totpEnabled', 'emailVerified', 'disabled', 'anonymous', 'createdAt', 'updatedAt'];
      const keys = [...order.filter((k) => k in u), ...Object.keys(u).filter((k) => !order.includes(k)).sort()];
      const dl = h('dl', { class: 'kv users-fields' }, keys.map((k) => [h('dt', null, FIELD_LABELS[k] || k), h('dd', { 'data-field': k }, fieldValue(k, u[k]))]));

      // Role.
      const role = h('select', { id: 'users-role', name: 'role' },
        ['user', 'owner'].map((r) => h('option', { value: r, selected: (u.role || 'user') === r }, r)));
      const saveRole = button('Save role', async () => {
        const r = await action(saveRole, msg, () => users.setRole(u.id, role.value));
        if (r) {
          say(`Role of ${u.email || u.id}: ${role.value}.`);
          const nu = r.user || { ...u, role: role.value };
          updateRow(nu);
          showUser(nu, true);
          auditList.reset();
          detail.querySelector('#users-role')?.focus();
        }
      }, { id: 'users-save-role' });

      // Disable / enable, revoke sessions.
      const toggle = button(u.disabled ? 'Enable account' : 'Disable account', async () => {
        const r = await action(toggle, msg, () => (u.disabled ? users.enable(u.id) : users.disable(u.id)));
        if (r) {
          const nu = r.user || { ...u, disabled: !u.disabled };
          say(`${u.email || u.id} ${nu.disabled ? 'disabled: every session ended' : 'enabled'}.`);
          updateRow(nu);
          showUser(nu, true);
          auditList.reset();
          detail.querySelector('#users-toggle')?.focus();
        }
      }, { id: 'users-toggle', class: u.disabled ? null : 'danger' });
      const revokeAll = button('Revoke all sessions', async () => {
        const r = await action(revokeAll, msg, () => users.revokeSessions(u.id));
        if (r) {
          say(`Every session of ${u.email || u.id} ended.`);
          loadSessions();
          auditList.reset();
        }
      }, { id: 'users-revoke-all', class: 'secondary' });

      // Delete, with an inline confirmation.
      const confirmRow = h('div', { class: 'users-confirm', hidden: true, role: 'group', 'aria-labelledby': 'users-confirm-text' });
      const del = button('Delete account…', () => {
        confirmRow.hidden = false;
        confirmRow.querySelector('#users-delete-confirm').focus();
      }, { id: 'users-delete', class: 'danger' });
      const yes = button('Delete permanently', async () => {
        const r = await action(yes, msg, () => users.delete(u.id));
        if (r) {
          listStatus.textContent = `${u.email || u.id} deleted.`;
          list.replaceItem((x) => x.id === u.id, null);
          closeDetail();
        }
      }, { id: 'users-delete-confirm', class: 'danger' });
      const no = button('Cancel', () => { confirmRow.hidden = true; del.focus(); }, { id: 'users-delete-cancel', class: 'secondary' });
      // Escape in the confirmation cancels it too.
      confirmRow.addEventListener('keydown', (e) => { if (e.key === 'Escape') no.click(); });
      replace(confirmRow,
        h('p', { id: 'users-confirm-text' }, `Delete ${u.email || u.id}? Their sessions, devices and documents under users/${u.id}/ go too. This cannot be undone.`),
        yes, no);

      // Sessions.
      const sessions = h('div', { id: 'users-sessions' }, h('p', { class: 'muted' }, 'Loading…'));
      async function loadSessions() {
        let list;
        try {
          list = await users.sessions(u.id);
        } catch (err) {
          if (!signal.aborted) replace(sessions, errorBox(err));
          return;
        }
        if (signal.aborted || openId !== u.id) return;
        list = Array.isArray(list) ? list : (list && list.sessions) || [];
        replace(sessions, table([
          { label: 'Created', get: (s) => time(s.createdAt) },
          { label: 'Last used', get: (s) => time(s.lastUsedAt) },
          { label: 'Address', get: (s) => s.address || '' },
          { label: 'User agent', get: (s) => h('span', { class: 'users-ua' }, s.userAgent || '') },
          {
            label: 'Revoke',
            get: (s) => {
              const b = button('Revoke', async () => {
                const r = await action(b, msg, () => users.revokeSession(u.id, s.id));
                if (r) {
                  say('Session revoked.');
                  await loadSessions();
                  (sessions.querySelector('.users-revoke') || revokeAll).focus();
                }
              }, { class: 'small secondary users-revoke', 'data-session': s.id, 'aria-label': `Revoke the session opened ${time(s.createdAt)} by ${s.userAgent || 'an unknown agent'}` });
              return b;
            },
          },
        ], list, { caption: 'Live sessions', empty: 'No live session.' }));
        for (const b of sessions.querySelectorAll('.users-revoke')) b.closest('tr').dataset.session = b.dataset.session;
      }

      // The account's audit events.
      const eventsHolder = h('div', { id: 'users-user-audit' });
      const userAudit = pager(async (cursor) => {
        const r = await client.admin.audit.list({ userId: u.id, cursor: cursor || undefined, limit: 20 });
        return { items: r.events || [], nextCursor: r.nextCursor };
      }, (items) => replace(eventsHolder, auditTable(items, `Events of ${u.email || u.id}`)), { prefix: 'users' });

      replace(detail,
        h('div', { class: 'users-detail-head' },
          h('h2', { id: 'users-detail-h', tabindex: '-1' }, u.email || u.id),
          button('Close', closeDetail, { id: 'users-close', class: 'secondary', 'aria-label': 'Close the account' })),
        self ? h('p', { class: 'muted' }, 'This is your own account: its role cannot be changed here, and it cannot be disabled or deleted here.') : null,
        dl,
        detailStatus,
        msg,
        h('div', { class: 'toolbar users-role-row' }, field('Role', role), saveRole),
        h('div', { class: 'toolbar users-actions' }, toggle, revokeAll, del,
          h('a', { href: `#/push?user=${encodeURIComponent(u.id)}`, class: 'button secondary', id: 'users-push-link' }, 'Devices and topics')),
        confirmRow,
        h('h3', null, 'Sessions'),
        sessions,
        h('h3', null, 'Audit events'),
        eventsHolder,
        userAudit.nav);
      loadSessions();
      userAudit.reset();
    }

    // ---- the project's audit log
    const typeSel = h('select', { id: 'users-audit-type', name: 'type' },
      h('option', { value: '' }, 'All types'), AUDIT_TYPES.map((t) => h('option', { value: t }, t)));
    const auditHolder = h('div', { id: 'users-audit' });
    const auditList = pager(async (cursor) => {
      const r = await client.admin.audit.list({ type: typeSel.value || undefined, cursor: cursor || undefined, limit: PAGE });
      return { items: r.events || [], nextCursor: r.nextCursor };
    }, (items) => {
      if (!signal.aborted) replace(auditHolder, auditTable(items, 'Audit log, newest first'));
    }, { prefix: 'users' });
    typeSel.addEventListener('change', () => auditList.reset());

    function auditTable(items, caption) {
      return table([
        { label: 'Time', get: (e) => h('time', { datetime: e.time }, time(e.time)) },
        { label: 'Type', get: (e) => h('span', { class: 'users-event-type' }, e.type) },
        { label: 'User', get: (e) => (e.userId ? button(e.userId, () => openUser(e.userId), { class: 'link', 'aria-label': `Open account ${e.userId}` }) : '') },
        { label: 'Actor', get: (e) => e.actorId || '' },
        { label: 'Address', get: (e) => e.address || '' },
        { label: 'Detail', get: (e) => detailText(e.detail) },
      ], items, { caption, empty: 'No event on this page.' });
    }

    root.append(
      h('h1', { id: 'h-users' }, 'Users'),
      h('div', { class: 'users-layout' },
        h('section', { class: 'card users-list', 'aria-labelledby': 'users-list-h' },
          h('h2', { id: 'users-list-h' }, 'Accounts'),
          searchForm,
          listStatus,
          resultsHolder,
          list.nav),
        detail),
      h('section', { class: 'card users-audit', 'aria-labelledby': 'users-audit-h' },
        h('h2', { id: 'users-audit-h' }, 'Audit log'),
        h('div', { class: 'toolbar' }, field('Event type', typeSel),
          button('Refresh', () => auditList.reset(), { id: 'users-audit-refresh', class: 'secondary' })),
        auditHolder,
        auditList.nav));

    list.reset();
    auditList.reset();
    if (openId) drawDetail(openId, false);
  },
};
