// state.js: the console's credentials, kept in localStorage so that a second
// tab of the console is signed in too. The project session itself is the
// SDK's (its storage); here are the project id and API key that name it, and
// the operator's admin token.
const PROJECT = 'edgebase.console.project';
const OPERATOR = 'edgebase.console.operator';

let sdk = null;
let onChange = () => {};
let client = null;
let operator = null;

function read(key) {
  try {
    return JSON.parse(localStorage.getItem(key) || 'null');
  } catch {
    return null;
  }
}

function openClient() {
  if (client) client.close();
  client = null;
  const p = read(PROJECT);
  if (!p || !sdk) return;
  const c = sdk.createClient({ url: location.origin, projectId: p.projectId, apiKey: p.apiKey });
  if (c.auth.token()) client = c;
  c.auth.onChange((session) => {
    const was = client;
    client = session ? c : null;
    if (was !== client) onChange();
  });
  if (!client) c.close();
}

function openOperator() {
  operator = null;
  const o = read(OPERATOR);
  if (o && sdk && typeof sdk.createOperator === 'function') {
    operator = sdk.createOperator({ url: location.origin, adminToken: o.adminToken });
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
      if (e.key === PROJECT) { openClient(); onChange(); }
      if (e.key === OPERATOR) { openOperator(); onChange(); }
    });
  },
  client: () => client,
  operator: () => operator,
  projectId: () => read(PROJECT)?.projectId || '',
  project: () => read(PROJECT),
  /** setProject names the project to sign in to (the SDK client for it). */
  newClient(projectId, apiKey) {
    return sdk.createClient({ url: location.origin, projectId, apiKey });
  },
  /** signedIn stores the project of a client that just signed in. */
  signedIn(c) {
    localStorage.setItem(PROJECT, JSON.stringify({ projectId: c.projectId, apiKey: c.apiKey || '' }));
    openClient();
    onChange();
  },
  async signOut() {
    if (client) {
      try { await client.auth.logout(); } catch { /* the session may be gone already */ }
      client.close();
    }
    client = null;
    localStorage.removeItem(PROJECT);
    onChange();
  },
  setOperator(adminToken) {
    localStorage.setItem(OPERATOR, JSON.stringify({ adminToken }));
    openOperator();
    onChange();
  },
  clearOperator() {
    localStorage.removeItem(OPERATOR);
    operator = null;
    onChange();
  },
};
