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
import cluster from './pages/cluster.js';

const pages = [signin, projects, data, rules, users, push, cluster];
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
  const who = document.getElementById('who');
  const parts = [];
  const user = state.client()?.auth.user();
  if (user) parts.push(h('span', null, `${user.email} · ${state.projectId()}`));
  if (state.operator()) parts.push(h('span', null, 'operator'));
  parts.push(h('a', { href: hashOf('signin') }, parts.length ? 'Accounts' : 'Sign in'));
  replace(who, parts);
}

async function route() {
  if (leave) leave.abort();
  leave = new AbortController();
  const { signal } = leave;
  let { id, params } = parseHash();
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
  const ctx = {
    client: state.client(),
    operator: state.operator(),
    sdk,
    params,
    signal,
    navigate: (to, p) => { location.hash = hashOf(to, p); },
    setParams: (p) => { history.replaceState(null, '', hashOf(page.id, p)); },
    refresh: () => route(),
  };
  try {
    await page.render(root, ctx);
  } catch (err) {
    if (!signal.aborted) root.append(errorBox(err));
  }
}

state.init(sdk, () => route());
window.addEventListener('hashchange', route);
route();
