// pages/rules.js: the Rules page (see app.js for the page contract).
//
// The access rules are edited as a form, one fieldset per rule (match, read,
// write), so that an error the server names by field (rules[2].read) lands
// on that very input: aria-invalid, the message next to it
// (aria-describedby), focus. The same rules can be edited as JSON (a
// textarea with a line-number gutter; a parse error names its line). The
// test panel asks the server how a request would be judged
// (client.db.testRules) under the editor's unsaved rules or the saved ones,
// and the deciding rule is highlighted in the form. The indexes table lists
// the project's declared indexes with their state on this node.
import { h, append, clear, replace, field, button, errorBox, errorText, table, syncDetails } from '../dom.js';

/** lineOf returns the 1-based line and column of offset in text. */
function lineOf(text, offset) {
  const before = text.slice(0, offset);
  return { line: before.split('\n').length, col: before.length - before.lastIndexOf('\n') };
}

/** parseJSON parses text: {value} or {error, line} (line when the engine tells the position). */
export function parseJSON(text) {
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    const msg = String(err.message || err);
    let m = /line (\d+) column (\d+)/.exec(msg);
    if (m) return { error: msg, line: Number(m[1]) };
    m = /position (\d+)/.exec(msg);
    if (m) {
      const at = lineOf(text, Number(m[1]));
      return { error: `${msg} (line ${at.line} column ${at.col})`, line: at.line };
    }
    return { error: msg, line: 0 };
  }
}

/** fieldPath splits "rules[2].read" into {index: 2, key: 'read'} (key '' for "rules[2]"); null otherwise. */
export function fieldPath(f) {
  const m = /^rules\[(\d+)\](?:\.(\w+))?/.exec(f || '');
  return m ? { index: Number(m[1]), key: m[2] || '' } : null;
}

export default {
  id: 'rules',
  title: 'Rules',
  needs: 'owner',
  async render(root, ctx) {
    const { client, signal } = ctx;
    const alive = () => !signal.aborted;
    let rules = []; // the editor's rules: [{match, read, write}]

    root.append(h('h1', { id: 'h-rules' }, 'Rules'));
    const editorCard = h('section', { class: 'card stack rules-editor', 'aria-labelledby': 'rules-editor-h' });
    const testCard = h('section', { class: 'card stack rules-test', 'aria-labelledby': 'rules-test-h' });
    const indexCard = h('section', { class: 'card stack rules-indexes', 'aria-labelledby': 'rules-indexes-h' });
    root.append(h('div', { class: 'split wide-left rules-split' }, editorCard, testCard), indexCard);

    // ---------------------------------------------------------- editor (form)
    const list = h('ol', { class: 'plain stack rules-list', id: 'rules-list' });
    const msg = h('div', { id: 'rules-msg', 'aria-live': 'polite' });
    let decider = -1; // the rule the last test against the editor's rules named

    function clearErrors() {
      for (const el of root.querySelectorAll('.rules-list [aria-invalid]')) {
        el.removeAttribute('aria-invalid');
        const d = (el.getAttribute('aria-describedby') || '').split(' ').filter((x) => !x.startsWith('rules-err-'));
        if (d.length) el.setAttribute('aria-describedby', d.join(' '));
        else el.removeAttribute('aria-describedby');
      }
      for (const el of root.querySelectorAll('.rules-list .rules-field-error')) el.remove();
      for (const el of root.querySelectorAll('.rules-rule.rules-bad')) el.classList.remove('rules-bad');
    }

    function ruleItem(r, i) {
      const ctl = (key, multi) => {
        const el = multi
          ? h('textarea', { class: 'code rules-expr', rows: 2, spellcheck: 'false', name: `${key}-${i}`, 'data-field': `rules[${i}].${key}` })
          : h('input', { class: 'mono', spellcheck: 'false', autocomplete: 'off', name: `${key}-${i}`, 'data-field': `rules[${i}].${key}` });
        el.value = r[key] || '';
        el.addEventListener('input', () => {
          rules[i][key] = el.value;
          markDirty();
          if (el.getAttribute('aria-invalid')) {
            el.removeAttribute('aria-invalid');
            el.parentElement.querySelector('.rules-field-error')?.remove();
          }
        });
        return el;
      };
      // Moving or removing a rule keeps the focus in the list (and forgets
      // the last test's deciding rule, whose index no longer holds).
      const move = (to) => {
        const [x] = rules.splice(i, 1);
        rules.splice(to, 0, x);
        decider = -1;
        drawRules();
        const li = list.children[to];
        const same = li?.querySelector(to < i ? '.rules-up' : '.rules-down');
        (same && !same.disabled ? same : li?.querySelector('.rules-up:not(:disabled), .rules-down:not(:disabled)'))?.focus();
      };
      const remove = () => {
        rules.splice(i, 1);
        decider = -1;
        drawRules();
        (list.children[Math.min(i, rules.length - 1)]?.querySelector('input') || root.querySelector('#rules-add')).focus();
      };
      return h('li', { class: `rules-rule${i === decider ? ' rules-decider' : ''}`, 'data-rule': String(i) },
        h('fieldset', { class: 'stack' },
          h('legend', null, `Rule ${i + 1}`, h('span', { class: 'badge info rules-decider-badge', hidden: i !== decider }, 'decided the test')),
          field('Match (path pattern)', ctl('match', false)),
          field('Read (CEL; empty denies)', ctl('read', true)),
          field('Write (CEL; empty denies)', ctl('write', true)),
          h('div', { class: 'row' },
            button('Move up', () => move(i - 1), { class: 'secondary small rules-up', disabled: i === 0, 'aria-label': `Move rule ${i + 1} up` }),
            button('Move down', () => move(i + 1), { class: 'secondary small rules-down', disabled: i === rules.length - 1, 'aria-label': `Move rule ${i + 1} down` }),
            button('Remove', remove, { class: 'secondary small', 'aria-label': `Remove rule ${i + 1}` }))));
    }

    /** markDecider highlights rule i (-1: none) as the one the last test named. */
    function markDecider(i) {
      decider = i;
      for (const li of list.querySelectorAll('.rules-rule')) {
        const on = Number(li.dataset.rule) === i;
        li.classList.toggle('rules-decider', on);
        const b = li.querySelector('.rules-decider-badge');
        if (b) b.hidden = !on;
      }
    }

    // Whether the form differs from the rules last loaded or saved.
    let savedKey = '';
    const dirtyBadge = h('span', { class: 'badge warn', id: 'rules-dirty', hidden: true }, 'Unsaved changes');
    const markDirty = () => { dirtyBadge.hidden = JSON.stringify(rules) === savedKey; };

    function drawRules() {
      markDirty();
      replace(list, rules.length ? rules.map(ruleItem) : h('li', { class: 'empty' }, 'No rules: every request is denied.'));
    }

    /** showFieldError puts the server's message at the input its field names, and focuses it. */
    function showFieldError(err) {
      const where = fieldPath(err.field);
      const el = err.field ? root.querySelector(`.rules-list [data-field="${CSS.escape(err.field)}"]`) : null;
      if (el) {
        const id = `rules-err-${where.index}-${where.key}`;
        el.setAttribute('aria-invalid', 'true');
        el.setAttribute('aria-describedby', [el.getAttribute('aria-describedby'), id].filter(Boolean).join(' '));
        el.parentElement.append(h('p', { class: 'error rules-field-error', id, role: 'alert', 'data-for': err.field }, errorText(err)));
        el.closest('.rules-rule')?.classList.add('rules-bad');
        el.focus();
        replace(msg, h('p', { class: 'error' }, `Not saved: rule ${where.index + 1} (${err.field}) is invalid; the rules in force did not change.`));
        return;
      }
      if (where) {
        const li = list.children[where.index];
        if (li) li.classList.add('rules-bad');
      }
      replace(msg, errorBox(err));
    }

    async function save() {
      clearErrors();
      saveBtn.disabled = true;
      try {
        const r = await client.db.setRules(rules);
        if (!alive()) return;
        replace(msg, h('p', { class: 'ok', id: 'rules-saved' }, `Saved: revision ${r.revision}.`));
        savedKey = JSON.stringify(rules);
        markDirty();
      } catch (err) {
        if (alive()) showFieldError(err);
      } finally {
        saveBtn.disabled = false;
      }
    }

    const saveBtn = h('button', { type: 'submit', id: 'rules-save' }, 'Save rules');
    const form = h('form', { class: 'stack', on: { submit: (e) => { e.preventDefault(); save(); } } },
      list,
      h('div', { class: 'row' },
        button('Add rule', () => {
          rules.push({ match: '', read: '', write: '' });
          drawRules();
          list.lastElementChild.querySelector('input').focus();
        }, { id: 'rules-add', class: 'secondary' }),
        saveBtn,
        button('Reload saved', () => load(), { id: 'rules-reload', class: 'secondary' })),
      msg);

    // ---------------------------------------------------------- editor (JSON)
    const gutter = h('div', { class: 'rules-gutter mono', 'aria-hidden': 'true', id: 'rules-gutter' });
    const jsonArea = h('textarea', { id: 'rules-json', class: 'code rules-json', spellcheck: 'false', wrap: 'off', rows: 14 });
    const jsonMsg = h('div', { id: 'rules-json-msg', 'aria-live': 'polite' });
    let badLine = 0;
    const drawGutter = () => {
      const n = jsonArea.value.split('\n').length;
      if (gutter.childElementCount !== n || gutter.dataset.bad !== String(badLine)) {
        const lines = [];
        for (let i = 1; i <= n; i++) lines.push(h('span', { class: i === badLine ? 'rules-line-bad' : null, 'data-line': String(i) }, String(i)));
        replace(gutter, lines);
        gutter.dataset.bad = String(badLine);
      }
      gutter.scrollTop = jsonArea.scrollTop;
    };
    jsonArea.addEventListener('input', () => {
      if (badLine) {
        badLine = 0;
        jsonArea.removeAttribute('aria-invalid');
        clear(jsonMsg);
      }
      drawGutter();
    });
    jsonArea.addEventListener('scroll', () => { gutter.scrollTop = jsonArea.scrollTop; });
    const fillJSON = () => {
      jsonArea.value = `{"rules": [\n${rules.map((r) => `  ${JSON.stringify({ match: r.match, read: r.read, write: r.write })}`).join(',\n')}\n]}\n`;
      badLine = 0;
      jsonArea.removeAttribute('aria-invalid');
      clear(jsonMsg);
      drawGutter();
    };
    const applyJSON = () => {
      const p = parseJSON(jsonArea.value);
      let error = p.error ? `Invalid JSON: ${p.error}` : '';
      let line = p.line || 0;
      const v = p.value;
      if (!error && (!v || !Array.isArray(v.rules))) error = 'Expected {"rules": [{"match", "read", "write"}, ...]}';
      if (!error) {
        const bad = v.rules.findIndex((r) => !r || typeof r !== 'object' || ['match', 'read', 'write'].some((k) => r[k] != null && typeof r[k] !== 'string'));
        if (bad >= 0) {
          error = `rules[${bad}]: match, read and write are strings`;
          line = 0;
        }
      }
      if (error) {
        badLine = line;
        jsonArea.setAttribute('aria-invalid', 'true');
        jsonArea.setAttribute('aria-describedby', 'rules-json-error');
        replace(jsonMsg, h('p', { class: 'error', role: 'alert', id: 'rules-json-error', 'data-line': String(line) }, line ? `Line ${line}: ${error}` : error));
        drawGutter();
        jsonArea.focus();
        return false;
      }
      rules = v.rules.map((r) => ({ match: r.match || '', read: r.read || '', write: r.write || '' }));
      decider = -1;
      drawRules();
      clearErrors();
      replace(jsonMsg, h('p', { class: 'ok' }, `Applied ${rules.length} rule${rules.length === 1 ? '' : 's'} to the form (not saved yet).`));
      return true;
    };
    const jsonBox = h('details', { class: 'rules-json-box', id: 'rules-json-box', on: { toggle: () => { if (jsonBox.open) fillJSON(); } } },
      h('summary', null, 'Edit as JSON'),
      h('div', { class: 'stack' },
        h('label', { for: 'rules-json' }, 'Rules (JSON)'),
        h('div', { class: 'rules-code' }, gutter, jsonArea),
        jsonMsg,
        h('div', { class: 'row' },
          button('Apply to the form', () => applyJSON(), { id: 'rules-json-apply', class: 'secondary' }),
          button('Apply and save', () => { if (applyJSON()) save(); }, { id: 'rules-json-save' }))));

    append(editorCard, [
      h('div', { class: 'row' }, h('h2', { id: 'rules-editor-h', class: 'grow' }, 'Access rules'), dirtyBadge),
      h('p', { class: 'hint' }, 'The first rule whose pattern matches decides; no match denies. Expressions are CEL over auth, path variables, resource.data and request.data.'),
      form, jsonBox,
    ]);

    async function load() {
      clearErrors();
      try {
        const r = await client.db.getRules();
        if (!alive()) return;
        rules = (r.rules || []).map((x) => ({ match: x.match || '', read: x.read || '', write: x.write || '' }));
        savedKey = JSON.stringify(rules);
        decider = -1;
        drawRules();
        clear(msg);
        if (jsonBox.open) fillJSON();
      } catch (err) {
        if (alive()) replace(msg, errorBox(err));
      }
    }

    // ---------------------------------------------------------- test panel
    const op = h('select', { id: 'rules-test-op', name: 'op' }, h('option', { value: 'read' }, 'read'), h('option', { value: 'write' }, 'write'));
    const tpath = h('input', { id: 'rules-test-path', name: 'path', class: 'mono', autocomplete: 'off', spellcheck: 'false', placeholder: 'users/u1/notes/n1', required: true });
    const uid = h('input', { id: 'rules-test-user', name: 'userId', class: 'mono', autocomplete: 'off', spellcheck: 'false' });
    const email = h('input', { id: 'rules-test-email', name: 'email', type: 'search', autocomplete: 'off', placeholder: 'ada@' });
    const found = h('ul', { class: 'plain rules-found', id: 'rules-found' });
    const tdata = h('textarea', { id: 'rules-test-data', name: 'data', class: 'code rules-test-data', rows: 4, spellcheck: 'false' });
    const dataField = field('Data after the write (JSON; empty = a delete)', tdata);
    const syncOp = () => { dataField.hidden = op.value !== 'write'; };
    op.addEventListener('change', syncOp);
    syncOp();
    const verdict = h('div', { id: 'rules-verdict', class: 'rules-verdict', 'aria-live': 'polite' });

    const findUsers = async () => {
      try {
        const r = await client.admin.users.list({ query: email.value.trim(), limit: 10 });
        if (!alive()) return;
        const users = r.users || [];
        replace(found, users.length
          ? users.map((u) => h('li', null, button(`Use ${u.email || u.id}`, () => {
            uid.value = u.id;
            clear(found);
            uid.focus();
          }, { class: 'link', 'data-user': u.id, 'aria-label': `Use ${u.email || '(no email)'} (${u.id}) as the caller` }), h('span', { class: 'muted' }, ` ${u.id}${u.role ? ` · ${u.role}` : ''}`)))
          : h('li', { class: 'empty' }, 'No user matches.'));
      } catch (err) {
        if (alive()) replace(found, h('li', null, errorBox(err)));
      }
    };

    async function runTest(withEditor) {
      const t = { op: op.value, path: tpath.value.trim().replace(/^\/+|\/+$/g, '') };
      if (uid.value.trim()) t.userId = uid.value.trim();
      for (const el of [op, tpath, uid, tdata]) el.removeAttribute('aria-invalid');
      if (t.op === 'write' && tdata.value.trim()) {
        const p = parseJSON(tdata.value);
        if (p.error) {
          tdata.setAttribute('aria-invalid', 'true');
          replace(verdict, h('p', { class: 'error', role: 'alert' }, `Invalid JSON in the data: ${p.error}`));
          tdata.focus();
          return;
        }
        t.data = p.value;
      }
      if (withEditor) t.rules = rules;
      try {
        const r = await client.db.testRules(t);
        if (!alive()) return;
        showVerdict(r, withEditor);
      } catch (err) {
        if (!alive()) return;
        markDecider(-1);
        if (withEditor && fieldPath(err.field)) {
          clearErrors();
          showFieldError(err);
        }
        const input = { path: tpath, userId: uid, op, data: tdata }[err.field];
        if (input) {
          input.setAttribute('aria-invalid', 'true');
          input.focus();
        }
        replace(verdict, errorBox(err));
      }
    }

    function showVerdict(r, withEditor) {
      markDecider(withEditor ? r.rule : -1);
      const a = r.auth;
      replace(verdict,
        h('p', { class: 'rules-verdict-line' },
          h('span', { id: 'rules-verdict-badge', class: `badge ${r.allowed ? 'ok' : 'bad'}`, 'data-allowed': String(!!r.allowed) }, r.allowed ? 'Allowed' : 'Denied'),
          ' ', withEditor ? 'under the editor’s rules (unsaved)' : 'under the saved rules'),
        h('dl', { class: 'kv' },
          h('dt', null, 'Deciding rule'),
          h('dd', { id: 'rules-verdict-rule', 'data-rule': String(r.rule) }, r.rule >= 0 ? `Rule ${r.rule + 1}: ${r.match}` : 'No rule matched (denied)'),
          r.rule >= 0 ? [h('dt', null, 'Expression'), h('dd', null, h('code', { id: 'rules-verdict-expr' }, r.expression || '(empty: denies)'))] : null,
          h('dt', null, 'Caller'),
          h('dd', { id: 'rules-verdict-auth' }, a ? `${a.uid}${a.role ? ` · ${a.role}` : ''}${a.email ? ` · ${a.email}` : ''}` : 'unauthenticated'),
          r.error ? [h('dt', null, 'Error'), h('dd', { class: 'error', id: 'rules-verdict-error' }, r.error)] : null));
      if (withEditor && r.rule >= 0) list.children[r.rule]?.scrollIntoView({ block: 'nearest' });
    }

    append(testCard, [
      h('h2', { id: 'rules-test-h' }, 'Test a request'),
      h('form', { class: 'stack', on: { submit: (e) => { e.preventDefault(); runTest(true); } } },
        h('div', { class: 'row' }, field('Operation', op), field('Path', tpath)),
        field('User id', uid, 'Empty: an unauthenticated caller.'),
        h('div', { class: 'row rules-find' }, field('Find a user by email', email),
          button('Find', findUsers, { id: 'rules-find', class: 'secondary' })),
        found,
        dataField,
        h('div', { class: 'row' },
          h('button', { type: 'submit', id: 'rules-test-editor' }, 'Test against the editor’s rules (unsaved)'),
          button('Test against the saved rules', () => runTest(false), { id: 'rules-test-saved', class: 'secondary' }))),
      verdict,
    ]);

    // ---------------------------------------------------------- indexes
    const indexBox = h('div', { id: 'rules-index-table' });
    // While an index is building on this node, the table polls every 2 s
    // until every index is ready (stopping when the page is left).
    let indexTimer = null;
    signal.addEventListener('abort', () => clearTimeout(indexTimer));
    async function loadIndexes() {
      clearTimeout(indexTimer);
      try {
        const r = await client.db.getIndexes();
        if (!alive()) return;
        if ((r.indexes || []).some((x) => x.state !== 'ready')) indexTimer = setTimeout(loadIndexes, 2000);
        replace(indexBox, table([
          { label: 'Collection', get: (x) => h('code', null, x.collection) },
          { label: 'Scope', get: (x) => (x.collectionGroup ? 'collection group' : 'collection') },
          { label: 'Fields', get: (x) => (x.fields || []).map((f) => `${f.field} ${f.direction || 'asc'}`).join(', ') },
          { label: 'State', get: (x) => h('span', { class: `badge ${x.state === 'ready' ? 'ok' : 'warn'}`, 'data-state': x.state }, x.state) },
        ], r.indexes || [], { caption: 'Declared indexes (state on this node)', empty: 'No declared indexes: equality filters on top-level fields use the automatic ones.' }));
        for (const [i, tr] of [...indexBox.querySelectorAll('tbody tr')].entries()) {
          const x = (r.indexes || [])[i];
          if (x) tr.dataset.index = x.id || '';
        }
      } catch (err) {
        if (alive()) replace(indexBox, errorBox(err));
      }
    }
    append(indexCard, [
      h('div', { class: 'row' }, h('h2', { id: 'rules-indexes-h', class: 'grow' }, 'Indexes'),
        button('Refresh', () => loadIndexes(), { id: 'rules-index-refresh', class: 'secondary small' })),
      indexBox,
      h('p', { class: 'hint' }, 'Declare indexes with PUT /api/db/indexes (or client.db.setIndexes); a query that needs one says which.'),
    ]);

    syncDetails(root);
    await Promise.all([load(), loadIndexes()]);
  },
};
