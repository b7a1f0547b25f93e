// app.js: the console's shell. It holds the credentials (a project owner's
// session through the SDK, and/or the operator's admin token), draws the
// navigation, and routes #/<page>?<params> to the page modules of pages/.
//
// The page contract (every pages/<id>.js):
//
//   export default {
//     id: 'data',          // route #/data
//     title: 'Data',       // nav label and document title
//     needs: 'owner',      // 'owner': a signed-in project owner; 'operator': the admin token; 'none'
//     async render(root, ctx) { ... },
//   };
//
// render builds the page in root (an empty element) with dom.js's h(); ctx:
//   ctx.client    the SDK client (createClient) of the signed-in project, or null
//   ctx.operator  the SDK's operator client (createOperator), or null
//   ctx.sdk       the SDK module (createClient, createOperator, EdgebaseError)
//   ctx.params    URLSearchParams of the route (#/data?path=users%2Fu1)
//   ctx.navigate(page, params?)   go to another route (adds a history entry)
//   ctx.setParams(params)         change this route's params without rendering again
//   ctx.signal    an AbortSignal aborted when the page is left: unsubscribe,
//                 stop timers and ignore late answers then
//   ctx.refresh() render the current route again (e.g. after sign-in)
import * as sdk from '/_/sdk/edgebase.js';
import { h, replace, errorBox } from './dom.js';
import { state } from './state.js';

import signin from './pages/signin.js';
import projects from './pages/projects.js';
import data from './pages/data.js';
import rules from './pages/rules.js';
import users from './pages/users.js';
import push from './pages/push.js';
import triggers from './pages/triggers.js';
import cluster from './pages/cluster.js';

const pages = [signin, projects, data, rules, users, push, triggers, cluster];
const byId = new Map(pages.map((p) => [p.id, p]));

let leave = null; // aborts the current page

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [id, query = ''] = raw.split('?');
  return { id: id || '', params: new URLSearchParams(query) };
}

function hashOf(id, params) {
  const q = params ? new URLSearchParams(params).toString() : '';
  return `#/${id}${q ? `?${q}` : ''}`;
}

function allowed(page) {
  if (page.needs === 'owner') return state.client() !== null;
  if (page.needs === 'operator') return state.operator() !== null;
  return true;
}

function home() {
  if (state.client()) return 'data';
  if (state.operator()) return 'projects';
  return 'signin';
}

function drawNav(current) {
  const nav = document.getElementById('nav');
  const links = pages.filter((p) => p.id !== 'signin' && allowed(p)).map((p) =>
    h('a', { href: hashOf(p.id), 'aria-current': p.id === current ? 'page' : null }, p.title));
  replace(nav, links);
  nav.hidden = links.length === 0;
  const who = document.getElementById('who');
  const parts = [];
  const c = state.client();
  if (c) {
    const user = c.auth.user();
    parts.push(h('span', { class: 'who-owner', title: `${user?.email || ''} on project ${c.projectId}` },
      h('span', { class: 'badge ok' }, 'owner'), ' ',
      h('span', { class: 'hidden-sm' }, user?.email || ''), ' ',
      h('span', { class: 'mono' }, c.projectId)));
  }
  if (state.operator()) parts.push(h('span', { class: 'badge info' }, 'operator'));
  parts.push(h('a', { href: hashOf('signin'), 'aria-current': current === 'signin' ? 'page' : null },
    parts.length ? 'Accounts' : 'Sign in'));
  replace(who, parts);
}

// focusHeading moves the focus to the page's heading after a navigation, so
// keyboard and screen reader users start at the new page.
function focusHeading(root, id) {
  const h1 = root.querySelector(`#h-${id}`);
  if (!h1) return false;
  h1.setAttribute('tabindex', '-1');
  h1.focus({ preventScroll: false });
  return true;
}

let renders = 0;
let shown = null; // {page, client, operator}: what the current page was rendered with

// changed follows a change of the credentials (here or in another tab): the
// page is rendered again only when it depends on what changed (it may hold
// unsaved edits); otherwise the header alone is redrawn.
function changed() {
  const keep = shown && shown.page.id !== 'signin' && allowed(shown.page) &&
    (shown.page.needs !== 'owner' || state.client() === shown.client) &&
    (shown.page.needs !== 'operator' || state.operator() === shown.operator);
  if (keep) drawNav(shown.page.id);
  else route(false);
}

async function route(focus = true) {
  if (leave) leave.abort();
  leave = new AbortController();
  const { signal } = leave;
  const { id, params } = parseHash();
  let page = byId.get(id);
  if (!page || !allowed(page)) {
    const to = page ? 'signin' : home();
    if (to !== id) {
      location.replace(hashOf(to));
      return;
    }
    page = byId.get(to);
  }
  drawNav(page.id);
  document.title = `${page.title} · edgebase console`;
  const main = document.getElementById('main');
  const root = h('section', { class: `page page-${page.id}`, 'aria-labelledby': `h-${page.id}` });
  replace(main, root);
  main.dataset.renders = String(++renders);
  shown = { page, client: state.client(), operator: state.operator() };
  const ctx = {
    client: state.client(),
    operator: state.operator(),
    sdk,
    params,
    signal,
    navigate: (to, p) => { location.hash = hashOf(to, p); },
    setParams: (p) => { history.replaceState(null, '', hashOf(page.id, p)); },
    refresh: () => route(false),
  };
  let focused = false;
  try {
    const done = page.render(root, ctx);
    // Pages put their heading first: focus it before the page's data arrives.
    if (focus) focused = focusHeading(root, page.id);
    await done;
  } catch (err) {
    if (!signal.aborted) root.append(errorBox(err));
  }
  if (focus && !focused && !signal.aborted) focusHeading(root, page.id);
}

state.init(sdk, changed);
window.addEventListener('hashchange', () => route(true));
route(true);
// A stored session may have ended while the console was closed: ask once
// (a 401 invalid_token signs out through state.js and shows why).
state.client()?.auth.me().catch(() => {});
