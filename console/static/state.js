// state.js: the console's credentials, kept in localStorage so that a second
// tab of the console is signed in too. The project session itself is the
// SDK's (its storage, edgebase.session.<project id>); here are the project id
// and API key that name it, and the operator's admin token.
//
// A session the server no longer knows (401 invalid_token: signed out
// elsewhere, revoked, expired, password changed) or an admin token it refuses
// ends the sign-in here: the change callback runs, the pages that need it are
// no longer allowed, and notice() tells the sign-in page why.
const PROJECT = 'edgebase.console.project';
const OPERATOR = 'edgebase.console.operator';
const LAST = 'edgebase.console.last'; // the last project id, key and email signed in with (prefill)

let sdk = null;
let onChange = () => {};
let client = null;
let operator = null;
let notice = '';
let expiring = false;

function read(key) {
  try {
    return JSON.parse(localStorage.getItem(key) || 'null');
  } catch {
    return null;
  }
}

/**
 * watchedFetch is fetch that calls onRefused when an answer to a request
 * carrying credentials is a 401 whose code says the credentials are gone.
 */
function watchedFetch(onRefused, codes) {
  return async (input, init) => {
    const res = await fetch(input, init);
    if (res.status === 401 && init && init.headers && init.headers.Authorization) {
      let code = '';
      try {
        code = ((await res.clone().json()) || {}).error?.code || '';
      } catch {
        code = '';
      }
      if (codes.includes(code)) onRefused(code);
    }
    return res;
  };
}

function sessionEnded() {
  if (expiring || !client) return;
  expiring = true;
  const c = client;
  notice = `Your session on project ${c.projectId} ended (signed out elsewhere, revoked or expired). Sign in again.`;
  localStorage.removeItem(PROJECT);
  // logout answers 401 too and then forgets the session: onChange(null) follows.
  c.auth.logout().catch(() => {}).finally(() => {
    expiring = false;
    if (client === c) {
      client = null;
      c.close();
      onChange();
    }
  });
}

function tokenRefused() {
  if (!operator) return;
  notice = 'The cluster refused the admin token (it changed or was removed). Sign in as the operator again.';
  localStorage.removeItem(OPERATOR);
  operator = null;
  onChange();
}

function openClient() {
  if (client) client.close();
  client = null;
  const p = read(PROJECT);
  if (!p || !sdk) return;
  const c = sdk.createClient({
    url: location.origin, projectId: p.projectId, apiKey: p.apiKey,
    fetch: watchedFetch(sessionEnded, ['invalid_token', 'missing_token']),
  });
  if (c.auth.token()) client = c;
  c.auth.onChange((session) => {
    const was = client;
    client = session ? c : null;
    if (!session) localStorage.removeItem(PROJECT);
    if (was !== client) onChange();
  });
  if (!client) c.close();
}

function openOperator() {
  operator = null;
  const o = read(OPERATOR);
  if (o && sdk && typeof sdk.createOperator === 'function') {
    operator = sdk.createOperator({
      url: location.origin, adminToken: o.adminToken,
      fetch: watchedFetch(tokenRefused, ['unauthorized', 'invalid_token', 'invalid_admin_token', 'missing_token']),
    });
  }
}

export const state = {
  /** init loads the stored credentials; change is called when they change. */
  init(module, change) {
    sdk = module;
    onChange = change;
    openClient();
    openOperator();
    window.addEventListener('storage', (e) => {
      if (e.key === PROJECT || e.key === null) { openClient(); onChange(); }
      if (e.key === OPERATOR || e.key === null) { openOperator(); onChange(); }
    });
  },
  client: () => client,
  operator: () => operator,
  projectId: () => read(PROJECT)?.projectId || '',
  project: () => read(PROJECT),
  /** last is {projectId, apiKey, email} of the last owner sign-in, or null (to prefill the form). */
  last: () => read(LAST),
  /** takeNotice returns (once) why the console signed someone out, or ''. */
  takeNotice() {
    const n = notice;
    notice = '';
    return n;
  },
  /** newClient is an SDK client of the project to sign in to (not stored until signedIn). */
  newClient(projectId, apiKey) {
    return sdk.createClient({ url: location.origin, projectId, apiKey });
  },
  /** signedIn stores the project of a client that just signed in (its session is in the SDK's storage). */
  signedIn(c) {
    localStorage.setItem(PROJECT, JSON.stringify({ projectId: c.projectId, apiKey: c.apiKey || '' }));
    const user = c.auth.user();
    localStorage.setItem(LAST, JSON.stringify({ projectId: c.projectId, apiKey: c.apiKey || '', email: user?.email || '' }));
    notice = '';
    openClient();
    onChange();
  },
  async signOut() {
    const c = client;
    client = null;
    localStorage.removeItem(PROJECT);
    if (c) {
      try { await c.auth.logout(); } catch { /* the session may be gone already */ }
      c.close();
    }
    onChange();
  },
  setOperator(adminToken) {
    localStorage.setItem(OPERATOR, JSON.stringify({ adminToken }));
    notice = '';
    openOperator();
    onChange();
  },
  clearOperator() {
    localStorage.removeItem(OPERATOR);
    operator = null;
    onChange();
  },
};
