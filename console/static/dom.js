// dom.js: the console's only way to build DOM. Text goes in as text nodes
// (never innerHTML), so a stored value such as <img src=x onerror=...> is
// shown as text. Every page builds its view with h().

/**
 * h(tag, attrs, ...children) creates an element.
 *  attrs: null or an object. `class`, `id`, `for`, `type`, `name`, `value`,
 *  `placeholder`, `role`, `tabindex`, `title`, `href`, `download`, `aria-*`,
 *  `data-*` and other attributes are set with setAttribute; `checked`,
 *  `disabled`, `selected`, `hidden`, `readOnly`, `required`, `multiple` as
 *  properties; `on: {click: fn, submit: fn, ...}` adds listeners; `ref: fn`
 *  is called with the element. Values null/undefined/false are skipped.
 *  children: strings and numbers become text nodes, nodes are appended,
 *  arrays are flattened, null/undefined/false are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      } else if (k === 'ref') {
        v(el);
      } else if (PROPS.has(k)) {
        el[k] = v;
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
  }
  append(el, children);
  return el;
}

const PROPS = new Set(['checked', 'disabled', 'selected', 'hidden', 'readOnly', 'required', 'multiple', 'value']);

/** append adds children (as h does) to el and returns el. */
export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** clear removes every child of el and returns el. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** replace clears el, then appends children. */
export function replace(el, ...children) {
  return append(clear(el), children);
}

let uid = 0;
/** nextId returns a fresh element id with the given prefix (for label/for pairs). */
export function nextId(prefix = 'f') {
  uid += 1;
  return `${prefix}-${uid}`;
}

/**
 * field(label, control, hint?) wraps a control with its <label for=...>: every
 * input of the console has a label. control gets an id when it has none.
 * Returns <div class="field">.
 */
export function field(label, control, hint) {
  if (!control.id) control.id = nextId('f');
  const kids = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hid = control.id + '-hint';
    control.setAttribute('aria-describedby', hid);
    kids.push(h('small', { id: hid, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, kids);
}

/** button(text, onClick, attrs?) is a <button type="button">. */
export function button(text, onClick, attrs = {}) {
  return h('button', { type: 'button', ...attrs, on: { click: onClick, ...(attrs.on || {}) } }, text);
}

/**
 * errorText(err) is one line for an error of the SDK (EdgebaseError: status,
 * code, field, message) or any other.
 */
export function errorText(err) {
  if (!err) return '';
  if (err.code) {
    const where = err.field ? ` (${err.field})` : '';
    return `${err.status || ''} ${err.code}${where}: ${err.message}`.trim();
  }
  return String(err.message || err);
}

/** errorBox(err) is <p class="error" role="alert"> with errorText(err). */
export function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' }, errorText(err));
}

/**
 * table(columns, rows, opts?) renders a table. columns: [{label, get(row) ->
 * string | Node}]; opts.caption names it (for screen readers), opts.empty is
 * the text when there are no rows.
 */
export function table(columns, rows, opts = {}) {
  const body = rows.length
    ? rows.map((r) => h('tr', null, columns.map((c) => h('td', { 'data-label': c.label }, c.get(r)))))
    : [h('tr', null, h('td', { colspan: columns.length, class: 'empty' }, opts.empty || 'Nothing here.'))];
  return h('div', { class: 'table-wrap' },
    h('table', null,
      opts.caption ? h('caption', null, opts.caption) : null,
      h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c.label)))),
      h('tbody', null, body)));
}

/** toast(text, kind?) shows a short message in the status region (aria-live). */
export function toast(text, kind = 'info') {
  const region = document.getElementById('toasts');
  if (!region) return;
  const el = h('div', { class: `toast ${kind}` }, text);
  region.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

/** time(iso) is a short local date-time for an RFC 3339 string ('' stays ''). */
export function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** pretty(value) is JSON with two-space indentation. */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** badge(text, kind?) is a small label; kind is a class of style.css (ok, warn, bad, info). */
export function badge(text, kind) {
  return h('span', { class: `badge ${kind || ''}`.trim() }, text);
}

/**
 * action(btn, slot, fn) runs fn with btn disabled, showing a failure in slot
 * (a live region) and answering undefined then; else fn's answer.
 */
export async function action(btn, slot, fn) {
  if (btn) btn.disabled = true;
  replace(slot);
  try {
    return await fn();
  } catch (err) {
    replace(slot, errorBox(err));
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}

/**
 * syncDetails hides the content of each closed <details> in root (the
 * hidden attribute, kept in sync on toggle), so that what a closed
 * disclosure holds is out of the layout, the accessibility tree and the
 * Tab order in every browser.
 */
export function syncDetails(root) {
  for (const d of root.querySelectorAll('details')) {
    const sync = () => {
      for (const c of d.children) if (c.tagName !== 'SUMMARY') c.hidden = !d.open;
    };
    d.addEventListener('toggle', sync);
    sync();
  }
}

/**
 * pager(load, draw, opts) is a list growing by pages: load(cursor) answers
 * {items, nextCursor}; draw(items) renders what is held. opts.label names
 * the "Load more" button; opts.prefix (a page id) prefixes the classes of
 * its parts: <prefix>-pager (nav), <prefix>-more (the button),
 * <prefix>-pager-status. Returns {reset(), nav, items(), replaceItem(pred, item)}.
 * A short or empty page with a cursor is not the end (the server examines a
 * bounded number of records per call).
 */
export function pager(load, draw, opts = {}) {
  const prefix = opts.prefix || 'page';
  let items = [];
  let cursor = '';
  let seq = 0;
  const status = h('p', { class: `muted ${prefix}-pager-status`, 'aria-live': 'polite' });
  const errs = h('div', { 'aria-live': 'assertive' });
  const more = button(opts.label || 'Load more', () => next(false), { class: `secondary ${prefix}-more`, hidden: true });
  async function next(fresh) {
    const mine = ++seq;
    if (fresh) { items = []; cursor = ''; }
    more.disabled = true;
    replace(errs);
    status.textContent = 'Loading…';
    try {
      const page = await load(cursor);
      if (mine !== seq) return;
      items = items.concat(page.items || []);
      cursor = page.nextCursor || '';
      draw(items);
      more.hidden = !cursor;
      status.textContent = cursor
        ? `${items.length} shown; there may be more.`
        : `${items.length} shown, no more.`;
    } catch (err) {
      if (mine !== seq) return;
      status.textContent = '';
      replace(errs, errorBox(err));
    } finally {
      if (mine === seq) more.disabled = false;
    }
  }
  return {
    reset: () => next(true),
    nav: h('div', { class: `${prefix}-pager` }, more, status, errs),
    items: () => items,
    replaceItem(pred, item) {
      items = items.map((x) => (pred(x) ? item : x)).filter(Boolean);
      draw(items);
    },
  };
}
