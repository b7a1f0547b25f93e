// pages/data.js: the Data page (see app.js for the page contract).
//
// Route params: path = the collection being browsed ("" = the root), doc =
// the document shown in the editor. The tree pane lists the children of
// path (client.db.children, paged); a child with something below it opens
// (a link to #/data?path=<child>), a child holding a document is viewed in
// the editor pane. The editor saves with If-Match (the revision it loaded)
// and shows both versions on a conflict. Both panes follow the server live
// through client.realtime. Every stored value is shown as text: a <textarea>
// value or a text node, never markup.
import { h, append, clear, replace, field, button, errorBox, errorText, time, pretty, syncDetails } from '../dom.js';

const WHERE_OPS = ['==', '!=', '<', '<=', '>', '>=', 'in', 'not-in', 'array-contains', 'array-contains-any', 'exists'];

/** join appends name to the collection path p ("" is the root). */
function join(p, name) {
  return p ? `${p}/${name}` : name;
}

/** typeOf names a JSON value's type as the field update API does. */
function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** parentOf is the collection that holds path ("" for a top-level one). */
function parentOf(path) {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

/** clean trims a typed path and its slashes. */
function clean(path) {
  return String(path || '').trim().replace(/^\/+|\/+$/g, '');
}

/** parseValue reads a filter's value as JSON, or as the string it is. */
export function parseValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** jsonError describes a JSON.parse failure of text with its line and column when known. */
function jsonError(err, text) {
  const msg = String(err.message || err);
  let m = /line (\d+) column (\d+)/.exec(msg);
  if (m) return msg;
  m = /position (\d+)/.exec(msg);
  if (m) {
    const before = text.slice(0, Number(m[1]));
    const line = before.split('\n').length;
    const col = before.length - before.lastIndexOf('\n');
    return `${msg} (line ${line} column ${col})`;
  }
  return msg;
}

/** parseObject parses text as a JSON object: {value} or {error}. */
function parseObject(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return { error: `Invalid JSON: ${jsonError(err, text)}` };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { error: 'A document is a JSON object: {...}' };
  return { value: v };
}

export default {
  id: 'data',
  title: 'Data',
  needs: 'owner',
  async render(root, ctx) {
    const { client, signal } = ctx;
    const path = clean(ctx.params.get('path'));
    let docPath = clean(ctx.params.get('doc'));
    const alive = () => !signal.aborted;
    const cleanups = [];
    signal.addEventListener('abort', () => { for (const f of cleanups.splice(0)) f(); });

    // ---------------------------------------------------------- header
    const rt = h('span', { id: 'data-rt', class: 'badge', 'data-state': 'idle' }, 'Realtime: idle');
    const showStatus = (s) => {
      const st = (s && s.state) || 'idle';
      rt.dataset.state = st;
      rt.className = `badge ${st === 'ready' ? 'ok' : st === 'stopped' || st === 'disconnected' ? 'bad' : 'info'}`;
      rt.textContent = `Realtime: ${st}${s && s.error ? ` (${errorText(s.error)})` : ''}`;
    };
    showStatus(client.realtime.status);
    cleanups.push(client.realtime.onStatus(showStatus));

    const crumbs = [h('li', null, h('a', { href: '#/data', 'data-path': '', 'aria-current': path ? null : 'location' }, 'root'))];
    let acc = '';
    for (const seg of path ? path.split('/') : []) {
      acc = join(acc, seg);
      crumbs.push(h('li', null, h('a', {
        href: `#/data?${new URLSearchParams({ path: acc })}`, 'data-path': acc, 'aria-current': acc === path ? 'location' : null,
      }, seg)));
    }
    const goto = h('input', { id: 'data-goto', name: 'goto', value: path, placeholder: 'users/u1/notes', autocomplete: 'off', spellcheck: 'false' });
    // Go to a path: a document opens in the editor, listed with its
    // siblings; any other path is browsed as a collection.
    const gotoForm = h('form', { class: 'data-goto-form', on: { submit: async (e) => {
      e.preventDefault();
      const to = clean(goto.value);
      let doc = null;
      if (to) {
        try {
          doc = await client.db.get(to);
        } catch {
          doc = null; // a bad path or no access: the listing says why
        }
      }
      if (!alive()) return;
      if (doc) ctx.navigate('data', parentOf(to) ? { path: parentOf(to), doc: to } : { doc: to });
      else ctx.navigate('data', to ? { path: to } : {});
    } } },
    h('div', { class: 'row data-goto' }, field('Go to path', goto), h('button', { type: 'submit', class: 'secondary' }, 'Go')),
    h('small', { id: 'data-goto-hint', class: 'hint' }, 'A document opens in the editor; anything else is listed.'));
    goto.setAttribute('aria-describedby', 'data-goto-hint');

    root.append(
      h('div', { class: 'row data-head' }, h('h1', { id: 'h-data', class: 'grow' }, 'Data'), rt),
      h('nav', { class: 'data-crumbs', 'aria-label': 'Path' }, h('ol', null, crumbs)),
      gotoForm,
    );

    const treePane = h('section', { class: 'card stack data-tree', 'aria-labelledby': 'data-tree-h' });
    const docPane = h('section', { class: 'card stack data-doc', 'aria-labelledby': 'data-doc-h' });
    root.append(h('div', { class: 'split data-split' }, treePane, docPane));
    const queryPane = h('details', { class: 'card data-query', id: 'data-query' });
    root.append(queryPane);

    // ---------------------------------------------------------- tree
    const list = h('ul', { class: 'plain data-children', id: 'data-children' });
    const treeMsg = h('div', { id: 'data-tree-msg' });
    const more = button('Load more', () => loadChildren(nextToken), { id: 'data-more', class: 'secondary small', hidden: true });
    let nextToken = '';
    let pages = 0; // pages of the listing shown
    let treeDead = false; // the listing's live subscription ended with an error
    const treeNote = h('p', { class: 'warn data-tree-changed', id: 'data-tree-changed', hidden: true }, 'The listing changed on the server. ',
      button('Refresh', () => loadChildren(''), { id: 'data-tree-refresh', class: 'secondary small' }));

    const childItem = (c) => {
      const kids = [h('span', { class: 'data-name mono' }, c.name)];
      const acts = [];
      if (c.children) {
        acts.push(h('a', { class: 'button secondary small data-open', href: `#/data?${new URLSearchParams({ path: c.path })}`, 'aria-label': `Open ${c.path}` }, 'Open ▸'));
      }
      if (c.document) {
        acts.push(button('View', () => openDoc(c.path), {
          class: 'small data-view', 'aria-label': `View document ${c.path}`, 'aria-pressed': c.path === docPath ? 'true' : 'false',
        }));
      }
      return h('li', { class: 'data-child', 'data-path': c.path, 'data-document': String(!!c.document), 'data-children': String(!!c.children) },
        h('span', { class: 'data-kind', 'aria-hidden': 'true' }, c.children ? '▸' : '•'), kids, h('span', { class: 'row data-acts' }, acts));
    };

    async function loadChildren(token) {
      more.disabled = true;
      try {
        const page = await client.db.children(path, { limit: 100, pageToken: token || undefined });
        if (!alive()) return;
        if (!token) {
          clear(list);
          pages = 0;
          treeNote.hidden = !treeDead;
        }
        pages += 1;
        for (const c of page.children || []) list.append(childItem(c));
        nextToken = page.nextPageToken || '';
        more.hidden = !nextToken;
        replace(treeMsg, list.children.length ? null : h('p', { class: 'empty' }, path ? 'Nothing below this path.' : 'The project holds no documents yet.'));
      } catch (err) {
        if (alive()) replace(treeMsg, errorBox(err));
      } finally {
        more.disabled = false;
      }
    }

    // New document under the current collection (create-only: ifMatch 0).
    const newId = h('input', { id: 'data-new-id', name: 'id', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: path ? 'n1' : 'notes/n1' });
    const newJson = h('textarea', { id: 'data-new-json', name: 'data', class: 'code data-new-json', rows: 5, spellcheck: 'false' });
    newJson.value = '{\n  \n}';
    const newMsg = h('div', { id: 'data-new-msg', 'aria-live': 'polite' });
    const create = h('details', { class: 'data-new', id: 'data-new' },
      h('summary', null, 'New document'),
      h('form', { class: 'stack', on: { submit: async (e) => {
        e.preventDefault();
        const id = clean(newId.value);
        if (!id) {
          replace(newMsg, h('p', { class: 'error', role: 'alert' }, 'Give the new document a name.'));
          return;
        }
        const parsed = parseObject(newJson.value);
        if (parsed.error) {
          newJson.setAttribute('aria-invalid', 'true');
          replace(newMsg, h('p', { class: 'error', role: 'alert' }, parsed.error));
          return;
        }
        newJson.removeAttribute('aria-invalid');
        const full = join(path, id);
        try {
          await client.db.set(full, parsed.value, { ifMatch: 0 });
          if (!alive()) return;
          clear(newMsg);
          newId.value = '';
          loadChildren('');
          await selectDoc(full);
          if (alive()) replace(docMsg, h('p', { class: 'ok' }, `Created ${full}.`));
        } catch (err) {
          if (!alive()) return;
          replace(newMsg, err.code === 'precondition_failed'
            ? h('p', { class: 'error', role: 'alert' }, `${full} exists already: open it to edit it.`)
            : errorBox(err));
        }
      } } },
      field(path ? `Name (under ${path}/)` : 'Path', newId),
      field('Data (JSON object)', newJson),
      newMsg,
      h('div', { class: 'row' }, h('button', { type: 'submit', id: 'data-create' }, 'Create'))));

    append(treePane, [
      h('h2', { id: 'data-tree-h' }, path ? `Children of ${path}` : 'Top-level collections'),
      treeNote, list, treeMsg, h('div', { class: 'row data-more-row' }, more), create,
    ]);

    // The listing follows the server: a document added or removed below
    // path reloads the first page (or, when more pages are shown, offers to).
    let treeTimer = null;
    const treeChanged = () => {
      clearTimeout(treeTimer);
      if (pages > 1) {
        if (!treeDead) treeNote.hidden = false;
        return;
      }
      treeTimer = setTimeout(() => { if (alive()) loadChildren(''); }, 250);
    };
    cleanups.push(() => clearTimeout(treeTimer));
    if (path) {
      let first = true;
      try {
        const sub = client.realtime.subscribeQuery({ collection: path, limit: 100 }, (ev) => {
          if (ev.type === 'snapshot' && first) { first = false; return; }
          if ((ev.type === 'change' && ev.changeType !== 'modified') || ev.type === 'snapshot') treeChanged();
          if (ev.type === 'error' && alive()) {
            treeDead = true;
            treeNote.hidden = false;
            replace(treeNote, `The listing does not follow the server (${errorText(ev.error)}). `,
              button('Refresh', () => loadChildren(''), { id: 'data-tree-refresh', class: 'secondary small' }));
          }
        });
        cleanups.push(() => sub.unsubscribe());
      } catch (err) {
        treeMsg.append(errorBox(err));
      }
    }

    // ---------------------------------------------------------- document
    let cur = null; // {collection, data, revision, createTime, updateTime} as loaded
    let loadedText = '';
    let docSub = null;
    const editor = h('textarea', { id: 'data-editor', class: 'code data-editor', name: 'document', rows: 16, spellcheck: 'false' });
    const meta = h('dl', { class: 'kv data-meta', id: 'data-meta' });
    const docMsg = h('div', { id: 'data-msg', 'aria-live': 'polite' });
    const changed = h('div', { id: 'data-changed', class: 'data-changed', hidden: true, role: 'status' });
    const conflict = h('div', { id: 'data-conflict', class: 'data-conflict stack', hidden: true });
    const fields = h('ul', { class: 'plain data-fields', id: 'data-fields' });
    const confirmBox = h('div', { class: 'row data-confirm', id: 'data-confirm', hidden: true });
    const docHead = h('h2', { id: 'data-doc-h', class: 'mono' }, 'Document');
    const dirty = () => cur !== null && editor.value !== loadedText;

    editor.addEventListener('input', () => {
      editor.removeAttribute('aria-invalid');
    });

    const saveBtn = h('button', { type: 'submit', id: 'data-save' }, 'Save');
    const reloadBtn = button('Reload', () => loadDoc(true), { id: 'data-reload', class: 'secondary' });
    const deleteBtn = button('Delete…', () => askDelete(), { id: 'data-delete', class: 'danger' });
    const editorForm = h('form', { class: 'stack data-editor-form', on: { submit: (e) => { e.preventDefault(); save(false); } } },
      field('Document (JSON)', editor),
      h('div', { class: 'row' }, saveBtn, reloadBtn, deleteBtn),
      confirmBox);

    function showDoc(d) {
      cur = d;
      clear(confirmBox);
      confirmBox.hidden = true;
      changed.hidden = true;
      conflict.hidden = true;
      if (!d) {
        replace(docHead, docPath || 'Document');
        replace(meta);
        replace(fields);
        editorForm.hidden = true;
        fieldsBox.hidden = true;
        replace(docMsg, h('p', { class: 'empty' }, docPath ? `No document at ${docPath}.` : 'Select a document to view it.'));
        return;
      }
      editorForm.hidden = false;
      fieldsBox.hidden = false;
      replace(docHead, d.collection);
      replace(meta,
        h('dt', null, 'Revision'), h('dd', { id: 'data-revision', 'data-revision': String(d.revision) }, String(d.revision)),
        h('dt', null, 'Created'), h('dd', null, time(d.createTime)),
        h('dt', null, 'Updated'), h('dd', { id: 'data-updated' }, time(d.updateTime)));
      loadedText = pretty(d.data);
      editor.value = loadedText;
      editor.removeAttribute('aria-invalid');
      const keys = d.data && typeof d.data === 'object' ? Object.keys(d.data) : [];
      replace(fields, keys.length
        ? keys.map((k) => h('li', { class: 'row data-field', 'data-field': k },
          h('code', { class: 'grow truncate' }, k),
          h('span', { class: 'muted data-field-type' }, typeOf(d.data[k])),
          button('Delete field', () => deleteField(k), { class: 'secondary small', 'data-field-delete': k, 'aria-label': `Delete field ${k}` })))
        : h('li', { class: 'empty' }, 'No fields.'));
    }
    const fieldsBox = h('details', { class: 'data-fields-box', id: 'data-fields-box' }, h('summary', null, 'Fields'), fields);

    // loadDoc reads the document at docPath and shows it. Unless forced (the
    // Reload buttons), it leaves alone a version the live subscription has
    // already shown (the user may be typing in it); an answer for a document
    // no longer selected is dropped.
    let loadSeq = 0;
    async function loadDoc(force = false) {
      const seq = ++loadSeq;
      const want = docPath;
      if (!want) {
        showDoc(null);
        return;
      }
      try {
        const d = await client.db.get(want);
        if (!alive() || seq !== loadSeq || want !== docPath) return;
        if (!force && d && cur && cur.collection === want && d.revision <= cur.revision) return;
        clear(docMsg);
        showDoc(d);
      } catch (err) {
        if (alive() && seq === loadSeq && want === docPath) {
          showDoc(null);
          replace(docMsg, errorBox(err));
        }
      }
    }

    function onDocEvent(ev) {
      if (!alive()) return;
      let d;
      if (ev.type === 'snapshot') {
        d = (ev.documents || []).find((x) => x.collection === docPath) || null;
        if (d && cur && d.revision <= cur.revision) return;
        if (!d && !cur) return;
      } else if (ev.type === 'change') {
        if (ev.collection !== docPath) return;
        if (cur && ev.revision <= cur.revision) return; // our own save, or already shown
        if (ev.changeType === 'delete' && !cur) return; // deleted here, or never shown
        d = ev.changeType === 'delete' ? null : {
          collection: docPath, data: ev.data, revision: ev.revision,
          createTime: cur ? cur.createTime : ev.updateTime, updateTime: ev.updateTime,
        };
      } else if (ev.type === 'error') {
        replace(docMsg, errorBox(ev.error));
        return;
      } else {
        return;
      }
      if (dirty() || !conflict.hidden) {
        // Keep the user's edits: say what happened and offer to reload.
        changed.hidden = false;
        replace(changed,
          h('span', { class: 'warn' }, d ? `Changed on the server (revision ${d.revision}).` : 'Deleted on the server.'),
          ' ', button('Reload', () => loadDoc(true), { id: 'data-changed-reload', class: 'secondary small' }));
        changed.dataset.revision = d ? String(d.revision) : '';
        return;
      }
      showDoc(d);
      replace(docMsg, d
        ? h('p', { class: 'muted', id: 'data-live' }, `Revision ${d.revision} arrived live.`)
        : h('p', { class: 'warn' }, `${docPath} was deleted.`));
    }

    function subscribeDoc() {
      if (docSub) docSub.unsubscribe();
      docSub = null;
      if (!docPath) return;
      try {
        docSub = client.realtime.subscribe(docPath, onDocEvent);
      } catch (err) {
        docMsg.append(errorBox(err));
      }
    }
    cleanups.push(() => { if (docSub) docSub.unsubscribe(); });

    /** openDoc shows the document at p, after asking when the editor holds unsaved edits. */
    function openDoc(p) {
      if (p === docPath || !dirty()) {
        if (p !== docPath || !cur) selectDoc(p);
        else editor.focus();
        return;
      }
      const keep = button('Keep editing', () => { clear(docMsg); editor.focus(); }, { id: 'data-keep', class: 'secondary small' });
      replace(docMsg, h('div', { class: 'row data-discard', role: 'alert' },
        h('span', { class: 'warn' }, `${docPath} has unsaved edits.`),
        button(`Discard them and open ${p}`, () => selectDoc(p), { id: 'data-discard', class: 'danger small' }),
        keep));
      keep.focus();
    }

    function selectDoc(p) {
      docPath = p;
      cur = null; // what the editor holds is the last document's: not this one's edits
      ctx.setParams(path ? { path, doc: p } : { doc: p });
      for (const b of list.querySelectorAll('.data-view')) {
        b.setAttribute('aria-pressed', b.closest('li').dataset.path === p ? 'true' : 'false');
      }
      clear(docMsg);
      subscribeDoc();
      return loadDoc().then(() => {
        if (alive() && cur) editor.focus();
      });
    }

    async function save(force, forceRev) {
      if (!cur && !force) return;
      const parsed = parseObject(editor.value);
      if (parsed.error) {
        editor.setAttribute('aria-invalid', 'true');
        replace(docMsg, h('p', { class: 'error', role: 'alert', id: 'data-json-error' }, parsed.error));
        editor.focus();
        return;
      }
      const ifMatch = force ? forceRev : cur.revision;
      saveBtn.disabled = true;
      try {
        const d = await client.db.set(docPath, parsed.value, { ifMatch });
        if (!alive()) return;
        showDoc(d);
        replace(docMsg, h('p', { class: 'ok' }, `Saved: revision ${d.revision}.`));
      } catch (err) {
        if (!alive()) return;
        if (err.code === 'precondition_failed') await showConflict(parsed.value);
        else replace(docMsg, errorBox(err));
      } finally {
        saveBtn.disabled = false;
      }
    }

    async function showConflict(mine) {
      let theirs;
      try {
        theirs = await client.db.get(docPath);
      } catch (err) {
        replace(docMsg, errorBox(err));
        return;
      }
      if (!alive()) return;
      changed.hidden = true;
      clear(docMsg);
      conflict.hidden = false;
      const mineArea = h('textarea', { id: 'data-conflict-mine', class: 'code', readOnly: true, rows: 12 });
      mineArea.value = pretty(mine);
      const theirsArea = h('textarea', { id: 'data-conflict-theirs', class: 'code', readOnly: true, rows: 12 });
      theirsArea.value = theirs ? pretty(theirs.data) : '(deleted)';
      const rev = theirs ? theirs.revision : 0;
      replace(conflict,
        h('p', { class: 'error', role: 'alert' }, theirs
          ? `Conflict: the document changed on the server (now revision ${theirs.revision}) since you loaded revision ${cur.revision}.`
          : 'Conflict: the document was deleted on the server since you loaded it.'),
        h('div', { class: 'split data-versions' },
          field('Yours', mineArea), field(theirs ? `Server's (revision ${theirs.revision})` : "Server's", theirsArea)),
        h('div', { class: 'row' },
          button(theirs ? 'Overwrite with mine' : 'Create it again with mine', () => save(true, rev), { id: 'data-overwrite', class: 'danger' }),
          button('Take theirs', () => {
            showDoc(theirs);
            if (!theirs) replace(docMsg, h('p', { class: 'warn' }, `${docPath} was deleted.`));
            else editor.focus();
          }, { id: 'data-take-theirs', class: 'secondary' })));
      conflict.dataset.revision = String(rev);
      conflict.querySelector('#data-overwrite').focus();
    }

    function askDelete() {
      confirmBox.hidden = false;
      const no = button('No', () => { confirmBox.hidden = true; clear(confirmBox); deleteBtn.focus(); }, { id: 'data-delete-no', class: 'secondary' });
      replace(confirmBox,
        h('span', { role: 'alert' }, `Delete ${docPath}?`),
        button('Yes, delete', async () => {
          try {
            await client.db.delete(docPath, { ifMatch: cur.revision });
            if (!alive()) return;
            const gone = docPath;
            cur = null;
            showDoc(null);
            replace(docMsg, h('p', { class: 'ok' }, `Deleted ${gone}.`));
            loadChildren('');
          } catch (err) {
            if (!alive()) return;
            confirmBox.hidden = true;
            replace(docMsg, err.code === 'precondition_failed'
              ? h('p', { class: 'error', role: 'alert' }, 'Not deleted: the document changed on the server since you loaded it. Reload and try again.')
              : errorBox(err));
          }
        }, { id: 'data-delete-yes', class: 'danger' }),
        no);
      no.focus();
    }

    async function deleteField(k) {
      try {
        const d = await client.db.deleteField(docPath, k, { ifMatch: cur.revision });
        if (!alive()) return;
        showDoc(d);
        replace(docMsg, h('p', { class: 'ok' }, `Deleted field ${k}: revision ${d.revision}.`));
      } catch (err) {
        if (!alive()) return;
        replace(docMsg, err.code === 'precondition_failed'
          ? h('p', { class: 'error', role: 'alert' }, 'Field not deleted: the document changed on the server since you loaded it. Reload and try again.')
          : errorBox(err));
      }
    }

    append(docPane, [docHead, meta, changed, conflict, docMsg, editorForm, fieldsBox]);

    // ---------------------------------------------------------- query
    const filters = h('div', { class: 'stack data-q-filters', id: 'data-q-filters' });
    let nFilter = 0;
    const addFilter = () => {
      nFilter += 1;
      const n = nFilter;
      const f = h('input', { name: 'field', autocomplete: 'off', spellcheck: 'false', placeholder: 'status' });
      const op = h('select', { name: 'op' }, WHERE_OPS.map((o) => h('option', { value: o }, o)));
      const v = h('input', { name: 'value', autocomplete: 'off', spellcheck: 'false', placeholder: '"open" or 10 or true' });
      const row = h('fieldset', { class: 'row data-q-filter' }, h('legend', null, `Filter ${n}`),
        field('Field', f), field('Operator', op), field('Value (JSON, else text)', v),
        button('Remove', () => { row.remove(); }, { class: 'secondary small', 'aria-label': `Remove filter ${n}` }));
      filters.append(row);
      f.focus();
    };
    const orderField = h('input', { id: 'data-q-order-field', name: 'orderField', autocomplete: 'off', spellcheck: 'false', placeholder: 'createdAt' });
    const orderDir = h('select', { id: 'data-q-order-dir', name: 'orderDir' }, h('option', { value: 'asc' }, 'ascending'), h('option', { value: 'desc' }, 'descending'));
    const limit = h('input', { id: 'data-q-limit', name: 'limit', type: 'number', min: 1, max: 1000, value: '20' });
    const qResults = h('ol', { class: 'plain data-q-results', id: 'data-q-results' });
    const qMsg = h('div', { id: 'data-q-msg', 'aria-live': 'polite' });
    const qNext = button('Next page', () => runQuery(qCursor), { id: 'data-q-next', class: 'secondary small', hidden: true });
    let qCursor = '';
    let lastQuery = null;

    function buildQuery() {
      const q = { collection: path };
      const where = [];
      for (const row of filters.querySelectorAll('.data-q-filter')) {
        const f = row.querySelector('[name=field]').value.trim();
        if (!f) continue;
        where.push({ field: f, op: row.querySelector('[name=op]').value, value: parseValue(row.querySelector('[name=value]').value) });
      }
      if (where.length) q.where = where;
      if (orderField.value.trim()) q.orderBy = [{ field: orderField.value.trim(), direction: orderDir.value }];
      const n = Number(limit.value);
      if (n) q.limit = n;
      return q;
    }

    async function runQuery(cursor) {
      const q = cursor ? { ...lastQuery, startAfter: cursor } : buildQuery();
      if (!cursor) lastQuery = q;
      qNext.disabled = true;
      try {
        const page = await client.db.query(q);
        if (!alive()) return;
        if (!cursor) clear(qResults);
        for (const d of page.documents || []) {
          qResults.append(h('li', { class: 'data-q-doc card', 'data-path': d.collection },
            h('div', { class: 'row' },
              h('code', { class: 'grow truncate' }, d.collection),
              h('span', { class: 'muted' }, `rev ${d.revision}`),
              button('View', () => openDoc(d.collection), { class: 'small secondary', 'aria-label': `View document ${d.collection}` })),
            h('pre', { class: 'json' }, pretty(d.data))));
        }
        qCursor = page.nextCursor || '';
        qNext.hidden = !qCursor;
        const n = qResults.children.length;
        replace(qMsg, h('p', { class: 'muted', id: 'data-q-count' }, `${n} document${n === 1 ? '' : 's'}${qCursor ? ' so far' : ''}.`));
      } catch (err) {
        if (!alive()) return;
        if (!cursor) clear(qResults);
        qNext.hidden = true;
        replace(qMsg, h('div', { id: 'data-q-error', class: 'error', role: 'alert' },
          h('strong', null, err.code === 'index_required' ? 'This query needs an index. ' : ''), errorText(err)));
      } finally {
        qNext.disabled = false;
      }
    }

    append(queryPane, [
      h('summary', null, path ? `Query ${path}` : 'Query (choose a collection first)'),
      path
        ? h('form', { class: 'stack', on: { submit: (e) => { e.preventDefault(); runQuery(''); } } },
          filters,
          h('div', { class: 'row' }, button('Add filter', addFilter, { id: 'data-q-add', class: 'secondary small' })),
          h('div', { class: 'row' }, field('Order by field', orderField), field('Direction', orderDir), field('Limit', limit)),
          h('div', { class: 'row' }, h('button', { type: 'submit', id: 'data-q-run' }, 'Run query')),
          qMsg, qResults, h('div', { class: 'row' }, qNext))
        : h('p', { class: 'muted' }, 'Queries run on the direct children of a collection: open one in the tree.'),
    ]);

    // ---------------------------------------------------------- start
    syncDetails(root);
    showDoc(null);
    await Promise.all([loadChildren(''), docPath ? loadDoc() : null]);
    subscribeDoc();
  },
};
