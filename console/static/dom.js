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
