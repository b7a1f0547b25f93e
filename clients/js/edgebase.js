// edgebase.js: the JavaScript SDK of edgebase (https://github.com/edgebase/edgebase).
// A zero-dependency ES module (ES2020) for browsers and Node >= 20. The
// reference is docs/sdk-js.md; the types are in edgebase.d.ts. A node serves
// this file at /_/sdk/edgebase.js.

/**
 * Every failure of the SDK: an error answer of the API, a network failure
 * (status 0, code "network_error") or a missing WebSocket (code
 * "websocket_unavailable").
 */
export class EdgebaseError extends Error {
  /**
   * @param {{status?: number, code?: string, message?: string, field?: string|null,
   *   retryAfter?: number|null, requestId?: string|null, unknownOutcome?: boolean, cause?: unknown}} o
   */
  constructor(o) {
    super(o.message || o.code || 'edgebase error');
    this.name = 'EdgebaseError';
    /** HTTP status; 0 when no answer arrived. */
    this.status = o.status || 0;
    /** The API's error code, e.g. "invalid_path", "rate_limited". */
    this.code = o.code || 'unknown';
    /** The request field the error is about, when the API names one. */
    this.field = o.field == null ? null : o.field;
    /** Seconds to wait before retrying (Retry-After), when the API sent one. */
    this.retryAfter = o.retryAfter == null ? null : o.retryAfter;
    /** X-Request-Id of the answer, for the node's logs. */
    this.requestId = o.requestId == null ? null : o.requestId;
    /** A write that may or may not have been applied: read before retrying. */
    this.unknownOutcome = !!o.unknownOutcome;
    if (o.cause !== undefined) this.cause = o.cause;
    /** For a queued write in conflict (412, persistence): the Conflict to resolve. */
    if (o.conflict) this.conflict = o.conflict;
  }
}

const UNKNOWN_OUTCOME = /may or may not have been applied/i;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Exponential backoff for attempt n (from 0), capped, jittered within [d/2, d]. */
function backoff(n, min, max) {
  const d = Math.min(max, min * 2 ** Math.min(n, 20));
  return d / 2 + Math.random() * (d / 2);
}

/** Retry-After as seconds: delta-seconds or an HTTP date. */
function parseRetryAfter(v) {
  if (!v) return null;
  if (/^\s*\d+\s*$/.test(v)) return Number(v);
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, Math.ceil((t - Date.now()) / 1000));
}

function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => { m.set(k, String(v)); },
    removeItem: (k) => { m.delete(k); },
  };
}

function defaultStorage() {
  try {
    if (typeof window !== 'undefined' && window.localStorage) return window.localStorage;
  } catch (_) {
    // localStorage may throw (disabled cookies, sandboxed frames): use memory.
  }
  return memoryStorage();
}

/**
 * Creates a client of one project.
 * @param {import('./edgebase').ClientOptions} options
 * @returns {import('./edgebase').EdgebaseClient}
 */
export function createClient(options) {
  return new Client(options || {});
}

/**
 * The transport both clients share: one API call with timeouts, retries of
 * safe requests and EdgebaseError for every failure. A subclass gives the
 * credentials in _headers().
 */
class Http {
  constructor(o, what) {
    let url = o.url;
    if (!url && typeof location !== 'undefined') url = location.origin;
    if (!url) throw new EdgebaseError({ code: 'invalid_argument', field: 'url', message: what + ' needs a url' });
    this.url = String(url).replace(/\/+$/, '');
    this.fetch = o.fetch || (typeof fetch !== 'undefined' ? fetch.bind(globalThis) : null);
    this.retries = o.retries == null ? 3 : o.retries;
    this.maxRetryWait = o.maxRetryWait == null ? 10 : o.maxRetryWait;
    this.timeout = o.timeout == null ? 30000 : o.timeout;
  }

  _headers() { return {}; }

  /** Adds what a request needs besides credentials (session consistency). */
  _readHeaders(_method, _path, _h) {}

  /** Sees a successful answer (session consistency). */
  _seen(_r) {}

  /**
   * One API call. Retries 429 and 503 (bounded, honouring Retry-After) only
   * when safe is true: reads and writes that carry If-Match. body is sent
   * as JSON, rawBody (a string) as it is; as is 'json' (the default),
   * 'text' or 'blob': how a successful answer is read.
   */
  async request(method, path, { query, body, rawBody, headers, safe = false, as = 'json', retries = this.retries } = {}) {
    if (!this.fetch) throw new EdgebaseError({ code: 'fetch_unavailable', message: 'no fetch: pass one in the client options' });
    let target = this.url + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.set(k, String(v));
      const s = q.toString();
      if (s) target += '?' + s;
    }
    const h = this._headers();
    let payload;
    if (rawBody !== undefined) payload = rawBody;
    else if (body !== undefined) payload = JSON.stringify(body);
    if (payload !== undefined) h['Content-Type'] = 'application/json';
    Object.assign(h, headers);
    this._readHeaders(method, path, h);
    const init = { method, headers: h, body: payload };
    for (let attempt = 0; ; attempt++) {
      let err;
      try {
        const r = await this._once(target, init, method, as);
        this._seen(r);
        return r;
      } catch (e) {
        err = e;
      }
      const retryable = safe && attempt < retries &&
        (err.status === 429 || (err.status === 503 && err.code !== 'node_removed') || err.status === 0) &&
        !err.unknownOutcome;
      if (!retryable) throw err;
      const wait = err.retryAfter != null ? err.retryAfter * 1000 : backoff(attempt, 200, 2000);
      if (wait > this.maxRetryWait * 1000) throw err;
      await sleep(wait);
    }
  }

  async _once(target, init, method, as = 'json') {
    let res;
    const ctl = typeof AbortController !== 'undefined' && this.timeout > 0 ? new AbortController() : null;
    const timer = ctl ? setTimeout(() => ctl.abort(), this.timeout) : null;
    try {
      res = await this.fetch(target, ctl ? { ...init, signal: ctl.signal } : init);
    } catch (e) {
      // No answer: a write may have reached the node.
      throw new EdgebaseError({ status: 0, code: 'network_error', message: `${method} ${target}: ${e && e.message ? e.message : e}`,
        unknownOutcome: method !== 'GET', cause: e });
    } finally {
      if (timer) clearTimeout(timer);
    }
    const requestId = res.headers.get('X-Request-Id');
    const rev = res.headers.get('X-Revision');
    if (res.ok && as !== 'json') {
      let data;
      try {
        data = as === 'blob' ? await res.blob() : await res.text();
      } catch (e) {
        throw new EdgebaseError({ status: 0, code: 'network_error', message: `${method} ${target}: ${e && e.message ? e.message : e}`,
          requestId, cause: e });
      }
      return { status: res.status, data, revision: rev ? Number(rev) : null, headers: res.headers };
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = null;
      }
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      const message = e.message || `${res.status} ${res.statusText || ''}`.trim();
      throw new EdgebaseError({
        status: res.status, code: e.code || 'http_' + res.status, message, field: e.field,
        retryAfter: parseRetryAfter(res.headers.get('Retry-After')), requestId,
        unknownOutcome: method !== 'GET' && res.status === 503 && UNKNOWN_OUTCOME.test(message),
      });
    }
    return { status: res.status, data, revision: rev ? Number(rev) : null, headers: res.headers };
  }
}

class Client extends Http {
  constructor(o) {
    super(o, 'createClient');
    if (!o.projectId) throw new EdgebaseError({ code: 'invalid_argument', field: 'projectId', message: 'createClient needs a projectId' });
    this.projectId = o.projectId;
    this.apiKey = o.apiKey || '';
    // Session consistency: the highest revision this client has seen;
    // reads and new subscriptions ask the node for at least it.
    this._session = o.session !== false;
    this._sessionRev = 0;
    if (o.sessionRevision != null) {
      const n = Number(o.sessionRevision);
      if (!Number.isSafeInteger(n) || n < 0) {
        throw new EdgebaseError({ code: 'invalid_argument', field: 'sessionRevision', message: 'sessionRevision must be a non-negative integer' });
      }
      this._sessionRev = n;
    }
    const adapter = adapterOf(o.persistence, o);
    /** The persistent cache, or null without the persistence option. */
    this._cache = adapter ? new Cache(adapter) : null;
    this.auth = new Auth(this, o.storage || defaultStorage());
    /** The durable write queue (empty and unused without persistence). */
    this.writes = new Writes(this, this._cache, storageName(o.persistence, o), o);
    this.db = new Db(this);
    this.realtime = new Realtime(this, o);
    this.push = new Push(this);
    this.triggers = new Triggers(this);
    this.admin = new Admin(this);
  }

  /** Resolves when every write to the persistent cache asked for so far is stored (at once without persistence). */
  flush() {
    return this._cache ? this.writes.stored().then(() => this._cache.flush()) : Promise.resolve();
  }

  /** Closes the realtime connection and stops listening to storage. */
  /**
   * Closes the realtime connection, stops the write queue and stops
   * listening to storage. Resolves once the cache has stored everything and
   * the queue's leadership is released (a write in flight finishes first).
   */
  close() {
    this.realtime.close();
    const released = this.writes.close();
    this.auth._detach();
    return Promise.all([released, this._cache ? this._cache.flush() : null]).then(() => undefined);
  }

  /**
   * The highest revision this client has seen (X-Revision of answers,
   * revisions of documents, snapshot, resumed and change revisions on the
   * socket): with session consistency on (the default) every read carries
   * X-Min-Revision and every new subscription minRevision = it, so the
   * client reads its own writes on any node. Pass it to another client as
   * the sessionRevision option to carry the session over.
   */
  get sessionRevision() { return this._sessionRev; }

  /** Records a revision the application saw elsewhere (never moves back); returns the session revision. */
  observeRevision(rev) {
    const n = Number(rev);
    if (Number.isSafeInteger(n) && n > this._sessionRev) this._sessionRev = n;
    return this._sessionRev;
  }

  _readHeaders(method, path, h) {
    if (!this._session || !this._sessionRev) return;
    // Reads: every GET, and the POST reads (queries).
    if (method !== 'GET' && !/\/query$/.test(path)) return;
    const explicit = Number(h['X-Min-Revision'] || 0);
    h['X-Min-Revision'] = String(Math.max(explicit, this._sessionRev));
  }

  _seen(r) {
    if (!r) return;
    if (r.revision != null) this.observeRevision(r.revision);
    const d = r.data;
    if (!d || typeof d !== 'object') return;
    if (typeof d.revision === 'number') this.observeRevision(d.revision);
    for (const list of [d.documents, d.results]) {
      if (!Array.isArray(list)) continue;
      for (const x of list) if (x && typeof x.revision === 'number') this.observeRevision(x.revision);
    }
  }

  _headers() {
    const h = { 'X-Project-Id': this.projectId };
    if (this.apiKey) h['X-API-Key'] = this.apiKey;
    const token = this.auth.token();
    if (token) h.Authorization = 'Bearer ' + token;
    return h;
  }
}

/** Adds the write's revision (X-Revision) to an object answer. */
function withRevision(r) {
  const out = r.data && typeof r.data === 'object' ? r.data : {};
  if (r.revision != null && out.revision === undefined) out.revision = r.revision;
  return out;
}

const ifMatchHeader = (o) => (o && o.ifMatch != null ? { 'If-Match': String(o.ifMatch) } : undefined);
const readHeaders = (o) => (o && o.minRevision != null ? { 'X-Min-Revision': String(o.minRevision) } : undefined);

// ---------------------------------------------------------------- auth

class Auth {
  constructor(client, storage) {
    this._c = client;
    this._storage = storage;
    this._key = 'edgebase.session.' + client.projectId;
    this._listeners = new Set();
    this._session = this._load();
    // Another tab logging in or out changes localStorage: follow it.
    if (typeof window !== 'undefined' && window.addEventListener && storage === defaultStorageOf()) {
      this._onStorage = (e) => {
        if (e.key === this._key) this._set(this._load(), false);
      };
      window.addEventListener('storage', this._onStorage);
    }
  }

  _detach() {
    if (this._onStorage) window.removeEventListener('storage', this._onStorage);
  }

  _load() {
    try {
      const raw = this._storage.getItem(this._key);
      const s = raw ? JSON.parse(raw) : null;
      return s && typeof s.token === 'string' ? { token: s.token, user: s.user || null } : null;
    } catch (_) {
      return null;
    }
  }

  _set(session, persist = true) {
    const before = this._session ? this._session.token : null;
    this._session = session;
    if (persist) {
      if (session) this._storage.setItem(this._key, JSON.stringify(session));
      else this._storage.removeItem(this._key);
    }
    if ((session ? session.token : null) !== before) {
      for (const cb of [...this._listeners]) {
        try {
          cb(session);
        } catch (e) {
          console.error('edgebase: auth.onChange listener threw', e);
        }
      }
    }
  }

  _action(action, fields, safe = false) {
    return this._c.request('POST', '/api/auth', { body: { action, ...fields }, safe });
  }

  /** The session token, or null when signed out. */
  token() { return this._session ? this._session.token : null; }

  /** The signed-in user as last seen, or null. */
  user() { return this._session ? this._session.user : null; }

  /** Calls cb(session | null) after every change of the session token; returns an unsubscribe. */
  onChange(cb) {
    this._listeners.add(cb);
    return () => { this._listeners.delete(cb); };
  }

  async register(email, password, name) {
    const r = await this._action('register', { email, password, name: name || '' });
    this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /** Either {requiresTotp:false, token, user} (signed in) or {requiresTotp:true, loginTicket, expiresIn}. */
  async login(email, password) {
    const r = await this._action('login', { email, password });
    if (!r.data.requiresTotp) this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  async loginVerify(loginTicket, code) {
    const r = await this._action('login-verify', { loginTicket, code: String(code) });
    this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /** Ends the session on the server and forgets it here (also when the server no longer knows it). */
  async logout() {
    try {
      const r = await this._action('logout', {});
      return withRevision(r);
    } catch (e) {
      if (e.status !== 401) throw e;
      return { ok: true };
    } finally {
      this._set(null);
    }
  }

  async me(opts) {
    const r = await this._c.request('POST', '/api/auth', { body: { action: 'me' }, headers: readHeaders(opts), safe: true });
    if (this._session) this._set({ token: this._session.token, user: r.data.user });
    return r.data.user;
  }

  /** Changes the password; every other session ends and this one is replaced by the answer's token. */
  async changePassword(currentPassword, newPassword) {
    const r = await this._action('change-password', { currentPassword, newPassword });
    this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /**
   * Resets a forgotten password: resetPassword({email, emailCode, newPassword})
   * with a code from requestPasswordReset (or {token, newPassword} with the
   * token of its emailed link), or ({email, verifyToken,
   * newPassword}) / (email, verifyToken, newPassword) with a token from
   * verifyAuthenticator. Every session of the account ends.
   */
  async resetPassword(emailOrReset, verifyToken, newPassword) {
    let body;
    if (emailOrReset && typeof emailOrReset === 'object') {
      const o = emailOrReset;
      body = { newPassword: o.newPassword };
      if (o.email != null) body.email = o.email;
      if (o.token != null) body.token = o.token;
      if (o.emailCode != null) body.emailCode = String(o.emailCode);
      if (o.verifyToken != null) body.verifyToken = o.verifyToken;
    } else {
      body = { email: emailOrReset, verifyToken, newPassword };
    }
    return withRevision(await this._action('reset-password', body));
  }

  /** Proves the password again (and the code when TOTP is on) for second-factor changes. */
  async reauthenticate(password, code) {
    return withRevision(await this._action('reauthenticate', code == null ? { password } : { password, code: String(code) }));
  }

  async disableTotp(code) {
    const r = await this._action('disable-totp', { code: String(code) });
    if (this._session && r.data.user) this._set({ token: this._session.token, user: r.data.user });
    return withRevision(r);
  }

  async enrollAuthenticator() {
    return withRevision(await this._c.request('POST', '/api/authenticator/enroll', {}));
  }

  async confirmAuthenticator(code) {
    return withRevision(await this._c.request('POST', '/api/authenticator/confirm', { body: { code: String(code) } }));
  }

  /** Proves a TOTP code for a password reset; returns {verifyToken, expiresIn}. */
  async verifyAuthenticator(email, code) {
    const r = await this._c.request('POST', '/api/authenticator/verify',
      { body: { email, code: String(code), projectId: this._c.projectId } });
    return r.data;
  }

  // ---- email codes and links, anonymous users, deletion, OAuth, sessions ----

  /** Keeps the session's user current after an answer that carries it. */
  _userChanged(user) {
    if (this._session && user && this._session.user && this._session.user.id === user.id) {
      this._set({ token: this._session.token, user });
    }
  }

  /** A sign-in answer: {requiresTotp:false, token, user} signs in; a TOTP ticket waits for loginVerify. */
  _signedIn(r) {
    if (r.data && r.data.token && !r.data.requiresTotp) this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /** Emails the signed-in user a code (and a link when the project set one) to prove their address. */
  async sendVerification() {
    return withRevision(await this._action('send-verification', {}));
  }

  /** Proves an address with {email, code} or a link's {token}; returns the user (emailVerified true). */
  async verifyEmail(proof) {
    const p = proof || {};
    const body = p.token != null ? { token: p.token } : { email: p.email, code: p.code == null ? undefined : String(p.code) };
    const r = await this._action('verify-email', body);
    this._userChanged(r.data.user);
    return r.data.user;
  }

  /** Emails a password reset code; the same answer whether or not the account exists. */
  async requestPasswordReset(email) {
    return withRevision(await this._action('request-password-reset', { email }));
  }

  /** Emails a sign-in code; the same answer whether or not the account exists. */
  async requestEmailCode(email) {
    return withRevision(await this._action('request-email-code', { email }));
  }

  /**
   * Signs in with an emailed code (email, code), or the emailed link's
   * ({token}): like login, {requiresTotp:false, token, user} or a TOTP ticket.
   */
  async loginWithEmailCode(email, code) {
    const body = email && typeof email === 'object' ? { token: email.token } : { email, code: String(code) };
    return this._signedIn(await this._action('login-email-code', body));
  }

  /**
   * Changes the signed-in user's address: without code, emails a code to
   * newEmail ({ok, codeSent}); with it (or with the emailed link's {token}
   * in place of both), makes the change and returns {user}.
   */
  async changeEmail(newEmail, code) {
    let body;
    if (newEmail && typeof newEmail === 'object') body = { token: newEmail.token };
    else body = code == null ? { newEmail } : { newEmail, code: String(code) };
    const r = await this._action('change-email', body);
    if (r.data && r.data.user) this._userChanged(r.data.user);
    return withRevision(r);
  }

  /** Deletes the signed-in user's account and everything that is theirs; signs out here. */
  async deleteAccount() {
    const r = await this._action('delete-account', {});
    this._set(null);
    return withRevision(r);
  }

  /** Creates an anonymous account and signs in to it. */
  async signInAnonymously() {
    const r = await this._action('sign-in-anonymously', {});
    this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /** Gives the signed-in anonymous account an email and password (same uid, same data). */
  async linkEmail(email, password) {
    const r = await this._action('link-email', { email, password });
    this._set({ token: r.data.token, user: r.data.user });
    return withRevision(r);
  }

  /** The project's sign-in providers, for a login page: [{provider, issuer}]. */
  async oauthProviders() {
    const r = await this._c.request('GET', '/api/auth/oauth', { safe: true });
    return r.data.providers || [];
  }

  /**
   * The URL to open in the browser to sign in with provider; the node sends
   * the browser back to redirect?code=... (pass the code to oauthExchange)
   * or redirect?error=...&error_description=....
   */
  oauthStartUrl(provider, redirect) {
    const q = new URLSearchParams({ projectId: this._c.projectId, redirect });
    return this._c.url + '/api/auth/oauth/' + encodeURIComponent(provider) + '/start?' + q.toString();
  }

  /** Trades the one-time code of the OAuth redirect for a session (like login). */
  async oauthExchange(code) {
    return this._signedIn(await this._action('oauth-exchange', { code }));
  }

  /** The provider's authorization URL whose sign-in links provider to the signed-in account: {url}. */
  async oauthLink(provider, redirect) {
    return withRevision(await this._action('oauth-link', { provider, redirect }));
  }

  /** The signed-in user's sessions: [{id, createdAt, lastUsedAt, address, userAgent, current}]. */
  async listSessions() {
    const r = await this._action('list-sessions', {}, true);
    return r.data.sessions || [];
  }

  /** Ends one of the signed-in user's sessions (this one too: then the next call is 401). */
  async revokeSession(sessionId) {
    return withRevision(await this._action('revoke-session', { sessionId }));
  }
}

let _localStorageRef;
function defaultStorageOf() {
  if (_localStorageRef === undefined) {
    try {
      _localStorageRef = typeof window !== 'undefined' ? window.localStorage : null;
    } catch (_) {
      _localStorageRef = null;
    }
  }
  return _localStorageRef;
}

// ---------------------------------------------------------------- persistence

/**
 * A key/value adapter of the persistent cache keeping everything in memory
 * (gone with the page or process). Values are JSON-serialisable; each is
 * copied on the way in and out.
 * @returns {import('./edgebase').CacheAdapter}
 */
export function memoryAdapter() {
  const m = new Map();
  const copy = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  return {
    async get(key) { return m.has(key) ? copy(m.get(key)) : undefined; },
    async set(key, value) { m.set(key, copy(value)); },
    async delete(key) { m.delete(key); },
    async keys(prefix) { return [...m.keys()].filter((k) => k.startsWith(prefix || '')).sort(); },
    async entries(prefix) { return [...m.keys()].filter((k) => k.startsWith(prefix || '')).sort().map((k) => [k, copy(m.get(k))]); },
    async batch(ops) {
      for (const o of ops) {
        if (o.delete) m.delete(o.key);
        else m.set(o.key, copy(o.value));
      }
    },
  };
}

const idbDone = (req) => new Promise((resolve, reject) => {
  req.onsuccess = () => resolve(req.result);
  req.onerror = () => reject(req.error);
});

/**
 * An IndexedDB adapter (browsers): one database per name (createClient
 * uses "edgebase:<projectId>:<url>"), one object store "kv".
 * @param {string} name
 * @returns {import('./edgebase').CacheAdapter}
 */
export function indexedDBAdapter(name) {
  const idb = typeof indexedDB !== 'undefined' ? indexedDB : null;
  if (!idb) throw new EdgebaseError({ code: 'persistence_unavailable', message: 'no indexedDB here: use persistence "memory", "file:<dir>" or an adapter' });
  let dbp = null;
  const open = () => {
    if (!dbp) {
      const req = idb.open(name, 1);
      req.onupgradeneeded = () => { req.result.createObjectStore('kv'); };
      dbp = idbDone(req);
    }
    return dbp;
  };
  const run = async (mode, f) => {
    const db = await open();
    const tx = db.transaction('kv', mode);
    const committed = mode === 'readwrite' ? new Promise((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onerror = tx.onabort = () => reject(tx.error);
    }) : null;
    const out = await f(tx.objectStore('kv'));
    if (committed) await committed;
    return out;
  };
  const range = (prefix) => (prefix ? IDBKeyRange.bound(prefix, prefix + '\uffff') : undefined);
  return {
    get: (key) => run('readonly', (s) => idbDone(s.get(key))),
    set: (key, value) => run('readwrite', (s) => idbDone(s.put(value, key))).then(() => undefined),
    delete: (key) => run('readwrite', (s) => idbDone(s.delete(key))).then(() => undefined),
    keys: (prefix) => run('readonly', (s) => idbDone(s.getAllKeys(range(prefix)))).then((ks) => ks.map(String)),
    // One transaction each: a snapshot's documents are read and stored at once.
    entries: (prefix) => run('readonly', async (s) => {
      const [ks, vs] = await Promise.all([idbDone(s.getAllKeys(range(prefix))), idbDone(s.getAll(range(prefix)))]);
      return ks.map((k, i) => [String(k), vs[i]]);
    }),
    batch: (ops) => run('readwrite', (s) => Promise.all(ops.map((o) => idbDone(o.delete ? s.delete(o.key) : s.put(o.value, o.key))))).then(() => undefined),
  };
}

/** Whether the process pid runs (Node). */
function processAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return !!e && e.code === 'EPERM';
  }
}

/** FNV-1a 32-bit of a string, as hex: the tail of long file names. */
function fnv(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/**
 * A file adapter (Node): one file per key in dir, {"k":key,"v":value},
 * written atomically (a temporary file, then rename). node:fs/promises is
 * imported on first use only, so the module still loads in browsers.
 * @param {string} dir
 * @returns {import('./edgebase').CacheAdapter}
 */
export function fileAdapter(dir) {
  let fsp = null;
  let made = null;
  let tmpSeq = 0;
  const fs = async () => {
    if (!fsp) fsp = await import('node:fs/promises');
    if (!made) made = fsp.mkdir(dir, { recursive: true });
    await made;
    return fsp;
  };
  const sep = dir.endsWith('/') ? '' : '/';
  // encodeURIComponent never writes "%%" or "%~": temporary files start with
  // "%%", names of long keys (cut, with a hash) with "%~".
  const nameOf = (key) => {
    const e = encodeURIComponent(key);
    return e.length <= 200 ? e : '%~' + e.slice(0, 180) + '.' + fnv(key);
  };
  const read = async (f, name) => {
    try {
      return JSON.parse(await f.readFile(dir + sep + name, 'utf8'));
    } catch (e) {
      if (e && e.code === 'ENOENT') return undefined;
      throw e;
    }
  };
  return {
    async get(key) {
      const rec = await read(await fs(), nameOf(key));
      return rec && rec.k === key ? rec.v : undefined;
    },
    async set(key, value) {
      const f = await fs();
      const tmp = dir + sep + '%%' + process.pid + '.' + ++tmpSeq + '.' + Math.random().toString(36).slice(2) + '.tmp';
      await f.writeFile(tmp, JSON.stringify({ k: key, v: value }));
      await f.rename(tmp, dir + sep + nameOf(key));
    },
    async delete(key) {
      const f = await fs();
      try {
        await f.unlink(dir + sep + nameOf(key));
      } catch (e) {
        if (!e || e.code !== 'ENOENT') throw e;
      }
    },
    /**
     * Runs fn holding an exclusive lock shared by every client of dir, in
     * any process: a lock file created with O_EXCL, taken over when the
     * process that holds it is gone.
     */
    async lock(name, fn, opts) {
      const f = await fs();
      const file = dir + sep + '%%lock.' + fnv(name);
      const token = process.pid + '.' + Math.random().toString(36).slice(2);
      const signal = opts && opts.signal;
      const holderOf = async () => {
        try {
          return JSON.parse(await f.readFile(file, 'utf8'));
        } catch (_) {
          return null;
        }
      };
      for (;;) {
        if (signal && signal.aborted) throw new EdgebaseError({ code: 'aborted', message: 'the lock request was aborted' });
        try {
          await f.writeFile(file, JSON.stringify({ pid: process.pid, token }), { flag: 'wx' });
          break;
        } catch (e) {
          if (!e || e.code !== 'EEXIST') throw e;
        }
        const holder = await holderOf();
        if (holder && holder.pid !== process.pid && !processAlive(holder.pid)) {
          const again = await holderOf();
          if (again && again.token === holder.token) await f.unlink(file).catch(() => undefined);
          continue;
        }
        // Poll; an abort (the client closes) ends the wait at once.
        await new Promise((resolve) => {
          const done = () => {
            clearTimeout(t);
            if (signal) signal.removeEventListener('abort', done);
            resolve();
          };
          const t = setTimeout(done, 100);
          if (t.unref) t.unref();
          if (signal) signal.addEventListener('abort', done);
        });
      }
      try {
        return await fn();
      } finally {
        const cur = await holderOf();
        if (cur && cur.token === token) await f.unlink(file).catch(() => undefined);
      }
    },
    /** Many writes and deletes, 32 files at a time (each still atomic). */
    async batch(ops) {
      for (let i = 0; i < ops.length; i += 32) {
        await Promise.all(ops.slice(i, i + 32).map((o) => (o.delete ? this.delete(o.key) : this.set(o.key, o.value))));
      }
    },
    async keys(prefix) {
      const f = await fs();
      const out = [];
      for (const name of await f.readdir(dir)) {
        if (name.startsWith('%%')) continue;
        let k;
        if (name.startsWith('%~')) {
          const rec = await read(f, name);
          k = rec && rec.k;
        } else {
          try {
            k = decodeURIComponent(name);
          } catch (_) {
            k = undefined;
          }
        }
        if (typeof k === 'string' && k.startsWith(prefix || '')) out.push(k);
      }
      return out.sort();
    },
  };
}

/** The adapter of createClient's persistence option, or null (no cache). */
function adapterOf(p, o) {
  if (p == null || p === false || p === 'none') return null;
  if (p === 'memory') return memoryAdapter();
  if (p === 'indexeddb') return indexedDBAdapter('edgebase:' + storageName(p, o));
  if (typeof p === 'string' && p.startsWith('file:')) return fileAdapter(p.slice(5));
  const a = p && typeof p === 'object' && p.adapter ? p.adapter : p;
  if (a && ['get', 'set', 'delete', 'keys'].every((k) => typeof a[k] === 'function')) return a;
  throw new EdgebaseError({ code: 'invalid_argument', field: 'persistence',
    message: 'persistence is "memory", "indexeddb", "file:<dir>" or an adapter {get, set, delete, keys}' });
}

/**
 * The name shared by every client of the same storage: the IndexedDB
 * database, the BroadcastChannel and the leader lock of the write queue.
 * Memory is never shared.
 */
function storageName(p, o) {
  const site = o.projectId + ':' + String(o.url || (typeof location !== 'undefined' ? location.origin : '')).replace(/\/+$/, '');
  if (p === 'memory') return 'memory:' + Math.random().toString(36).slice(2);
  if (typeof p === 'string' && p.startsWith('file:')) return 'file:' + p.slice(5).replace(/\/+$/, '');
  if (p && typeof p === 'object' && typeof p.name === 'string' && p.name) return p.name;
  return site;
}

/**
 * The persistent cache over an adapter. Keys: "d:<path>" a document as
 * db.get answered it; "l:<json>" a db.list page; "s:<sub key>" a
 * subscription's state {revision, open, seen}; "sd:<sub key>\u0000<path>"
 * a document of that subscription. Writes run one after another, in the
 * order they were asked for, so a subscription's stored revision is only
 * written after the changes up to it.
 */
class Cache {
  constructor(adapter) {
    this.a = adapter;
    this._chain = Promise.resolve();
  }

  /** Queues f after every earlier write; failures are logged, never thrown at the caller. */
  write(f) {
    const p = this._chain.then(f).catch((e) => { console.error('edgebase: cache write failed', e); });
    this._chain = p;
    return p;
  }

  /** Resolves when every write queued so far is done. */
  flush() { return this._chain; }

  async read(key) {
    await this._chain;
    return this.a.get(key);
  }

  static subKey(path, prefix) { return JSON.stringify([path, !!prefix]); }

  /** [[key, value], ...] of every key under prefix: one call when the adapter has entries. */
  async entries(prefix) {
    if (typeof this.a.entries === 'function') return this.a.entries(prefix);
    const ks = await this.a.keys(prefix);
    const out = [];
    for (let i = 0; i < ks.length; i += 64) {
      const vs = await Promise.all(ks.slice(i, i + 64).map((k) => this.a.get(k)));
      vs.forEach((v, j) => { if (v !== undefined) out.push([ks[i + j], v]); });
    }
    return out;
  }

  /** Applies [{key, value} | {key, delete: true}, ...]: one call (one transaction) when the adapter has batch. */
  async batch(ops) {
    if (!ops.length) return;
    if (typeof this.a.batch === 'function') {
      await this.a.batch(ops);
      return;
    }
    for (const o of ops) {
      if (o.delete) await this.a.delete(o.key);
      else await this.a.set(o.key, o.value);
    }
  }

  /** The subscription's cached state {revision, open, seen}, or null. */
  async loadState(key) {
    await this._chain;
    const st = await this.a.get('s:' + key);
    return st && typeof st.revision === 'number' ? st : null;
  }

  /** The subscription's cached documents, in path order. */
  async loadDocs(key) {
    await this._chain;
    const docs = (await this.entries('sd:' + key + '\u0000')).map(([, d]) => d);
    return docs.filter((d) => d && typeof d === 'object').sort((x, y) => (x.collection < y.collection ? -1 : x.collection > y.collection ? 1 : 0));
  }

  /**
   * Replaces the subscription's documents with a snapshot's, and brings
   * the document cache (d:) up to it: the snapshot is the whole truth of
   * what it covers at its revision, so a cached document it lacks was
   * deleted since (a tombstone). The state goes first and comes back last:
   * a crash midway leaves no cached subscription, never a wrong one.
   */
  saveSnapshot(key, documents, revision) {
    return this.write(async () => {
      // Another tab of the same storage may have stored a newer state.
      const st = await this.a.get('s:' + key);
      if (st && typeof st.revision === 'number' && st.revision > revision) return;
      await this.a.delete('s:' + key);
      const pre = 'sd:' + key + '\u0000';
      const [path, prefix] = JSON.parse(key);
      const have = new Map(documents.map((d) => [d.collection, d]));
      const ops = [];
      for (const k of await this.a.keys(pre)) if (!have.has(k.slice(pre.length))) ops.push({ key: k, delete: true });
      for (const d of documents) ops.push({ key: pre + d.collection, value: d });
      const cached = prefix ? await this.entries(path === '' ? 'd:' : 'd:' + path + '/') : [];
      const self = await this.a.get('d:' + path);
      if (self !== undefined) cached.push(['d:' + path, self]);
      const old = new Map(cached.map(([k, v]) => [k.slice(2), v]));
      for (const d of documents) {
        const o = old.get(d.collection);
        if (!(o && typeof o.revision === 'number' && typeof d.revision === 'number' && o.revision > d.revision)) ops.push({ key: 'd:' + d.collection, value: d });
      }
      for (const [p, o] of old) {
        if (have.has(p) || !o || o.deleted || (typeof o.revision === 'number' && o.revision >= revision)) continue;
        ops.push({ key: 'd:' + p, value: { collection: p, deleted: true, revision } });
      }
      await this.batch(ops);
      await this.a.set('s:' + key, { revision, open: false, seen: [] });
    });
  }

  /** Applies one change to the subscription's documents, then stores its state. */
  saveChange(key, m, state) {
    return this.write(async () => {
      const st = await this.a.get('s:' + key);
      if (st && typeof st.revision === 'number' && st.revision > m.revision) return;
      const k = 'sd:' + key + '\u0000' + m.collection;
      if (m.type === 'delete') {
        await this.a.delete(k);
      } else {
        const old = await this.a.get(k);
        const d = { collection: m.collection, data: m.data === undefined ? null : m.data, revision: m.revision, updateTime: m.updateTime || null };
        if (old && old.createTime) d.createTime = old.createTime;
        await this.a.set(k, d);
      }
      await this.a.set('s:' + key, state);
    });
  }

  saveState(key, state) {
    return this.write(async () => {
      const st = await this.a.get('s:' + key);
      if (st && typeof st.revision === 'number' && st.revision > state.revision) return;
      await this.a.set('s:' + key, state);
    });
  }

  /**
   * The server's version of the document at path as last seen ("d:<path>"):
   * a document, a tombstone {collection, deleted: true, revision} or null
   * when the cache knows nothing of it.
   */
  async getDoc(path) {
    await this._chain;
    const d = await this.a.get('d:' + path);
    return d && typeof d === 'object' ? d : null;
  }

  /**
   * Stores the server's version of a document (or a tombstone), never
   * replacing a newer revision unless force (a strong read's answer).
   */
  putDoc(doc, force = false) {
    if (!doc || typeof doc.collection !== 'string') return Promise.resolve();
    const k = 'd:' + doc.collection;
    return this.write(async () => {
      if (!force) {
        const old = await this.a.get(k);
        if (old && typeof old.revision === 'number' && typeof doc.revision === 'number' && old.revision > doc.revision) return;
      }
      await this.a.set(k, doc);
    });
  }

  /** The adapter's keys under prefix once every queued write is stored. */
  async keysAfterWrites(prefix) {
    await this._chain;
    return this.a.keys(prefix);
  }

  dropSub(key) { return this.write(() => this.a.delete('s:' + key)); }
}

/** An answer of list or query as the local view shows its documents, with extra fields. */
function localAnswer(w, res, extra) {
  return Array.isArray(res.documents)
    ? { ...res, ...extra, documents: res.documents.map((d) => w.view(d.collection, d)).filter(Boolean) }
    : { ...res, ...extra };
}

/** The rejection of a queued write's promise when its conflict is discarded. */
function discardedError() {
  return new EdgebaseError({ status: 412, code: 'precondition_failed', message: 'discarded' });
}

/** Whether a browser says it has no network (navigator.onLine false); never in Node. */
function browserOffline() {
  return typeof navigator !== 'undefined' && navigator.onLine === false && typeof window !== 'undefined';
}

/** Deep equality of JSON values (key order ignored). */
function jsonEqual(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k], b[k]));
}

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

/** Whether a subscription on path (with prefix: everything below it) covers the document at p. */
function covers(path, prefix, p) {
  return p === path || (prefix && p.startsWith(path === '' ? '' : path + '/'));
}

/**
 * The document a queued write w makes of doc (null: absent), as the local
 * view shows it. revision stays the server's (the base of the view).
 */
function applyWrite(doc, w) {
  if (w.op === 'delete') return null;
  const base = doc ? { ...doc } : { collection: w.path, data: null, revision: null, createTime: null, updateTime: null };
  if (w.op === 'set') {
    base.data = clone(w.data);
    return base;
  }
  const data = base.data && typeof base.data === 'object' && !Array.isArray(base.data) ? { ...base.data } : {};
  if (w.op === 'update') {
    const c = w.change || {};
    const newKey = c.newKey == null ? c.oldKey : c.newKey;
    if (c.oldKey !== newKey) delete data[c.oldKey];
    data[newKey] = clone(c.value);
  } else if (w.op === 'deleteField') {
    delete data[w.field];
  }
  base.data = data;
  return base;
}

/** Whether the server's document already is what the write makes (its outcome is known to be applied). */
function writeShows(w, server) {
  if (w.op === 'delete') return server == null;
  if (server == null) return false;
  const data = server.data;
  if (w.op === 'set') return jsonEqual(data, w.data);
  if (!data || typeof data !== 'object' || Array.isArray(data)) return false;
  if (w.op === 'deleteField') return !Object.prototype.hasOwnProperty.call(data, w.field);
  const c = w.change || {};
  const newKey = c.newKey == null ? c.oldKey : c.newKey;
  if (!Object.prototype.hasOwnProperty.call(data, newKey) || !jsonEqual(data[newKey], c.value)) return false;
  return c.oldKey === newKey || !Object.prototype.hasOwnProperty.call(data, c.oldKey);
}

/** The promise answer of an acknowledged write, as Db's methods answer without persistence. */
function answerOf(w, r) {
  const out = withRevision(r);
  if (w.op === 'set') out.created = r.status === 201;
  return out;
}

/** A plain copy of a queued write for the application (no internals). */
function publicWrite(w) {
  const o = { id: w.id, op: w.op, path: w.path, ifMatch: w.ifMatch, createdAt: w.createdAt, state: w.state };
  if (w.op === 'set') o.data = clone(w.data);
  if (w.op === 'update') o.change = clone(w.change);
  if (w.op === 'deleteField') o.field = w.field;
  if (w.state === 'conflict') o.server = clone(w.server === undefined ? null : w.server);
  return o;
}

/**
 * The durable write queue of a client with persistence (issue 21). Each
 * write is stored as "q:<id>" (ids sort in creation order across tabs),
 * applied to the local view at once and replayed in order by one leader
 * among the clients of the same storage. Other tabs learn of every change
 * over a BroadcastChannel and reload the queue from storage.
 */
class Writes {
  constructor(client, cache, name, o) {
    this._c = client;
    this._cache = cache;
    this._name = name;
    this._q = [];
    this._cbs = { conflict: new Set(), acked: new Set(), rejected: new Set(), change: new Set() };
    this._waiters = new Map();
    this._unsaved = new Set();
    /** Ids this tab removed from the queue: a reload never brings them back. */
    this._gone = new Set();
    this._enq = Promise.resolve();
    this._settled = [];
    this._tab = Math.random().toString(36).slice(2, 8);
    this._seq = 0;
    this._attempt = 0;
    this._minBackoff = o.minBackoff == null ? 250 : o.minBackoff;
    this._maxBackoff = o.maxBackoff == null ? 30000 : o.maxBackoff;
    this._timer = null;
    this._pumping = false;
    this._again = false;
    this._paused = false;
    this._inflight = null;
    this._closed = false;
    this.leader = false;
    this._loaded = cache ? this._reload() : Promise.resolve();
    if (!cache) return;
    if (typeof BroadcastChannel !== 'undefined') {
      this._ch = new BroadcastChannel('edgebase:' + name);
      if (this._ch.unref) this._ch.unref();
      this._ch.onmessage = (e) => { this._heard(e.data).catch((err) => console.error('edgebase: write queue message failed', err)); };
    }
    if (typeof window !== 'undefined' && window.addEventListener) {
      this._onOnline = () => this.replay();
      window.addEventListener('online', this._onOnline);
    }
    this._offAuth = client.auth.onChange(() => {
      this._paused = false;
      this.replay();
    });
    this._elect();
  }

  // ------------------------------------------------------------ public

  /** Every queued write, oldest first (conflicts included). */
  async pending() {
    await this.stored();
    return this._q.map(publicWrite);
  }

  /** The writes in conflict, each with retry and discard. */
  async conflicts() {
    await this.stored();
    return this._q.filter((w) => w.state === 'conflict').map((w) => this._conflictOf(w));
  }

  /** Calls cb on 'conflict', 'acked', 'rejected' or 'change'; returns an unsubscribe. */
  on(type, cb) {
    const set = this._cbs[type];
    if (!set) throw new EdgebaseError({ code: 'invalid_argument', field: 'type', message: 'writes.on: type is conflict, acked, rejected or change' });
    set.add(cb);
    return () => { set.delete(cb); };
  }

  /** Resolves once nothing is left to send (the queue is empty or holds only conflicts). */
  settled() {
    return this.stored().then(() => {
      if (this._isSettled()) return undefined;
      return new Promise((resolve) => { this._settled.push(resolve); });
    });
  }

  /** Replays now, cutting a backoff short. */
  replay() {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    this._attempt = 0;
    this._pump();
  }

  /** Stops replaying; resolves once the leadership is released (after a write in flight). */
  close() {
    this._closed = true;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    // A write in flight finishes (and is recorded) before another tab leads.
    if (this._release && !this._pumping) this._release();
    if (this._abort) this._abort.abort();
    if (this._ch) this._ch.close();
    if (this._onOnline) window.removeEventListener('online', this._onOnline);
    if (this._offAuth) this._offAuth();
    this.leader = false;
    return Promise.resolve(this._lockDone).then(() => undefined);
  }

  // ------------------------------------------------------------ the local view

  /** The queued writes of path, in order. */
  _of(path) { return this._q.filter((w) => w.path === path); }

  /** The paths with queued writes. */
  _paths() { return [...new Set(this._q.map((w) => w.path))]; }

  /**
   * The local view of path over the server's document (null: absent):
   * the queued writes applied in order, marked pendingWrites.
   */
  view(path, server) {
    const ws = this._of(path);
    if (!ws.length) return server;
    let d = server;
    for (const w of ws) d = applyWrite(d, w);
    return d ? { ...d, pendingWrites: true } : null;
  }

  /** Whether path has queued writes. */
  touches(path) { return this._q.some((w) => w.path === path); }

  // ------------------------------------------------------------ enqueue

  /**
   * Queues one write; resolves or rejects when the server decides. Writes
   * are queued one after another, in the order they were made.
   */
  enqueue(op, path, fields, opts) {
    // In the local view at once; its base and its place in storage follow,
    // one write after another in call order.
    const id = Date.now().toString(36).padStart(9, '0') + '-' + String(++this._seq).padStart(6, '0') + '-' + this._tab;
    const w = { id, op, path, ...fields, ifMatch: null, base: null, createdAt: new Date().toISOString(), state: 'queued' };
    const done = new Promise((resolve, reject) => { this._waiters.set(id, { resolve, reject }); });
    this._unsaved.add(id);
    this._q.push(w);
    this._q.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this._local(path);
    this._enq = this._enq.then(() => this._enqueue(w, opts)).catch((e) => {
      this._unsaved.delete(id);
      this._q = this._q.filter((x) => x !== w);
      this._local(path);
      this._settle(id, (x) => x.reject(e));
    });
    return done;
  }

  async _enqueue(w, opts) {
    await this._loaded;
    const o = opts || {};
    const known = await this._cache.getDoc(w.path);
    const earlier = this._q.filter((x) => x.path === w.path && x.id < w.id);
    let base = null;
    if (earlier.length) base = earlier[earlier.length - 1].base;
    else if (known) base = known.deleted ? 0 : known.revision;
    w.base = base;
    if (o.ifMatch != null) w.ifMatch = Number(o.ifMatch);
    else if (!o.blind) w.ifMatch = base;
    await this._cache.write(() => this._cache.a.set('q:' + w.id, w));
    this._unsaved.delete(w.id);
    this._changed({ t: 'queued', id: w.id });
    this._pump();
  }

  /** Resolves once every write made so far is in storage. */
  async stored() {
    await this._loaded;
    await this._enq;
  }

  // ------------------------------------------------------------ replay

  _isSettled() { return this._q.every((w) => w.state === 'conflict'); }

  /** The next write to send: the oldest not in conflict and not behind a conflict of its path. */
  _next() {
    const blocked = new Set();
    for (const w of this._q) {
      if (w.state === 'conflict') {
        blocked.add(w.path);
        continue;
      }
      if (blocked.has(w.path)) continue;
      if (this._unsaved.has(w.id)) return null; // its base is not known yet: in order, nothing after it either
      return w;
    }
    return null;
  }

  async _pump() {
    if (!this._cache || this._closed) return;
    if (this._pumping) {
      this._again = true;
      return;
    }
    this._pumping = true;
    try {
      await this._loaded;
      while (this.leader && !this._closed && !this._paused && !this._timer) {
        const w = this._next();
        if (!w) break;
        this._inflight = w.id;
        let wait;
        try {
          wait = await this._step(w);
        } finally {
          this._inflight = null;
        }
        if (wait != null) {
          this._timer = setTimeout(() => {
            this._timer = null;
            this._pump();
          }, wait);
          if (this._timer.unref) this._timer.unref();
          break;
        }
        this._attempt = 0;
      }
    } catch (e) {
      console.error('edgebase: write queue replay failed', e);
    } finally {
      this._pumping = false;
      if (this._closed && this._release) this._release();
      if (this._again) {
        this._again = false;
        this._pump();
      }
    }
    this._checkSettled();
  }

  _retryWait(e) {
    if (e && e.retryAfter != null) return Math.min(e.retryAfter * 1000, this._maxBackoff);
    return backoff(this._attempt++, this._minBackoff, this._maxBackoff);
  }

  /** The server's document at path (strong read), null when absent. */
  async _readServer(path) {
    try {
      const r = await this._c.request('GET', '/api/db', { query: { collection: path }, safe: true, retries: 0 });
      this._cache.putDoc(r.data);
      return r.data;
    } catch (e) {
      if (e.status === 404 && e.code === 'not_found') {
        this._cache.putDoc({ collection: path, deleted: true, revision: 0 });
        return null;
      }
      throw e;
    }
  }

  _request(w) {
    const headers = w.ifMatch != null ? { 'If-Match': String(w.ifMatch) } : undefined;
    const base = { headers, retries: 0 };
    switch (w.op) {
      case 'set':
        return this._c.request('POST', '/api/db', { ...base, body: { collection: w.path, data: w.data } });
      case 'update':
        return this._c.request('PUT', '/api/db', { ...base, query: { collection: w.path }, body: w.change });
      case 'deleteField':
        return this._c.request('DELETE', '/api/db', { ...base, query: { collection: w.path, field: w.field } });
      default:
        return this._c.request('DELETE', '/api/db', { ...base, query: { collection: w.path } });
    }
  }

  /** A transient failure: wait and try again. */
  static _transient(e) {
    return e.status === 0 || e.status === 429 || (e.status === 503 && e.code !== 'node_removed') || e.status >= 500;
  }

  /**
   * Sends one write or settles its uncertain outcome. Answers null when it
   * is decided (acknowledged, in conflict or refused) or a wait in ms
   * before trying again.
   */
  async _step(w) {
    if (w.state === 'uncertain' || w.state === 'sending') {
      // It may have been applied: read first, never send it blindly again.
      let server;
      try {
        server = await this._readServer(w.path);
      } catch (e) {
        if (e.status === 401) return this._pause();
        if (Writes._transient(e)) return this._retryWait(e);
        await this._reject(w, e);
        return null;
      }
      if (writeShows(w, server)) {
        const r = { status: 200, data: server || { deleted: true }, revision: server ? server.revision : null };
        await this._ack(w, r, server);
        return null;
      }
      const holds = server ? server.revision === w.ifMatch : w.ifMatch === 0;
      if (w.ifMatch != null && !holds) {
        await this._conflict(w, server);
        return null;
      }
      w.state = 'queued';
    }
    w.state = 'sending';
    await this._cache.write(() => this._cache.a.set('q:' + w.id, w));
    let r;
    try {
      r = await this._request(w);
    } catch (e) {
      if (e.status === 412) {
        let server;
        try {
          server = await this._readServer(w.path);
        } catch (e2) {
          w.state = 'queued';
          await this._persist(w);
          return this._retryWait(e2);
        }
        if (writeShows(w, server)) {
          // An earlier attempt of this write landed, or someone made the same change: nothing to resolve.
          await this._ack(w, { status: 200, data: server || { deleted: true }, revision: server ? server.revision : null }, server);
          return null;
        }
        await this._conflict(w, server);
        return null;
      }
      if (e.unknownOutcome || e.status === 0) {
        w.state = 'uncertain';
        await this._persist(w);
        return this._retryWait(e);
      }
      w.state = 'queued';
      await this._persist(w);
      if (e.status === 401) return this._pause();
      if (Writes._transient(e)) return this._retryWait(e);
      await this._reject(w, e);
      return null;
    }
    const doc = w.op === 'delete' ? null : r.data;
    await this._ack(w, r, doc);
    return null;
  }

  _pause() {
    this._paused = true;
    return null;
  }

  _persist(w) { return this._cache.write(() => this._cache.a.set('q:' + w.id, w)); }

  _remove(w) {
    this._gone.add(w.id);
    this._q = this._q.filter((x) => x.id !== w.id);
    return this._cache.write(() => this._cache.a.delete('q:' + w.id));
  }

  async _ack(w, r, doc) {
    const rev = r.revision != null ? r.revision : doc && doc.revision;
    this._cache.putDoc(doc || { collection: w.path, deleted: true, revision: rev || 0 });
    // The later writes of the path were made on top of this one: rebase them.
    const nb = w.op === 'delete' ? 0 : rev;
    if (nb != null) await this._rebase(w, nb, false);
    await this._remove(w);
    this._confirm(w.path, rev);
    const result = answerOf(w, r);
    this._changed({ t: 'acked', id: w.id, write: publicWrite(w), result });
    this._emit('acked', { write: publicWrite(w), result });
    this._settle(w.id, (x) => x.resolve(result));
  }

  async _conflict(w, server) {
    w.state = 'conflict';
    w.server = server || null;
    await this._persist(w);
    this._changed({ t: 'conflict', id: w.id });
    this._announceConflict(w);
  }

  /** Fires 'conflict' for w and rejects its promise (if this tab holds it) with the conflict. */
  _announceConflict(w) {
    const c = this._conflictOf(w);
    this._emit('conflict', c);
    this._settle(w.id, (x) => x.reject(new EdgebaseError({
      status: 412, code: 'precondition_failed', message: 'the document changed since the revision this write was based on', conflict: c,
    })));
  }

  /**
   * The later writes of w's path made on the same base were made on top of
   * w: they move to base nb (and so does an ifMatch that was that base).
   * With withConflicts, writes in conflict move too.
   */
  async _rebase(w, nb, withConflicts) {
    for (const x of this._q) {
      if (x === w || x.path !== w.path || x.base !== w.base || (x.state === 'conflict' && !withConflicts)) continue;
      if (x.ifMatch != null && x.ifMatch === x.base) x.ifMatch = nb;
      x.base = nb;
      await this._persist(x);
    }
  }

  async _reject(w, e) {
    await this._remove(w);
    this._local(w.path);
    const error = { status: e.status, code: e.code, message: e.message, field: e.field };
    this._changed({ t: 'rejected', id: w.id, write: publicWrite(w), error });
    this._emit('rejected', { write: publicWrite(w), error: e });
    this._settle(w.id, (x) => x.reject(e));
  }

  _conflictOf(w) {
    const local = this.view(w.path, w.server || null);
    return {
      id: w.id,
      path: w.path,
      write: publicWrite(w),
      local: local ? clone(local) : null,
      server: clone(w.server || null),
      retry: (data) => this._resolve(w.id, data === undefined ? 'again' : 'replace', data),
      discard: () => this._resolve(w.id, 'discard').then(() => undefined),
    };
  }

  /** retry / discard of a conflict, in any tab. */
  async _resolve(id, how, data) {
    await this._reload();
    const w = this._q.find((x) => x.id === id);
    if (!w || w.state !== 'conflict') {
      throw new EdgebaseError({ code: 'not_found', message: 'no conflict ' + id + ' in the write queue (already resolved?)' });
    }
    if (how === 'discard') {
      await this._remove(w);
      this._local(w.path);
      this._changed({ t: 'discarded', id });
      this._settle(id, (x) => x.reject(discardedError()));
      this._checkSettled();
      return undefined;
    }
    const server = w.server || null;
    const nb = server ? server.revision : 0;
    if (how === 'replace') {
      if (data === null) {
        w.op = 'delete';
      } else {
        w.op = 'set';
        w.data = clone(data);
      }
      delete w.change;
      delete w.field;
    }
    // Later writes of the path based on the same revision follow it onto the server's version.
    await this._rebase(w, nb, true);
    w.ifMatch = nb;
    w.base = nb;
    w.state = 'queued';
    delete w.server;
    const done = new Promise((resolve, reject) => { this._waiters.set(id, { resolve, reject }); });
    await this._persist(w);
    this._local(w.path);
    this._changed({ t: 'queued', id });
    this._pump();
    return done;
  }

  // ------------------------------------------------------------ tabs

  _elect() {
    const lockName = 'edgebase-writes:' + this._name;
    const hold = () => new Promise((resolve) => {
      this._release = resolve;
      if (this._closed) {
        resolve();
        return;
      }
      this.leader = true;
      this._reload().then(() => this._pump());
    });
    const locks = typeof navigator !== 'undefined' && navigator.locks && typeof navigator.locks.request === 'function' ? navigator.locks : null;
    const a = this._cache.a;
    this._abort = typeof AbortController !== 'undefined' ? new AbortController() : null;
    const signal = this._abort ? this._abort.signal : undefined;
    // ENOENT: the cache's directory was removed while waiting for the lock.
    const swallow = (e) => { if (!this._closed && !(e && e.code === 'ENOENT')) console.error('edgebase: write queue leader election failed', e); };
    if (locks) this._lockDone = locks.request(lockName, { signal }, hold).catch(swallow);
    else if (typeof a.lock === 'function') this._lockDone = Promise.resolve(a.lock(lockName, hold, { signal })).catch(swallow);
    else hold();
  }

  /** Tells the other tabs, and this tab's listeners, that the queue changed. */
  _changed(msg) {
    if (this._ch && !this._closed) {
      try {
        this._ch.postMessage(msg);
      } catch (e) {
        console.error('edgebase: write queue broadcast failed', e);
      }
    }
    this._emit('change', this._counts());
    this._checkSettled();
  }

  /** Another tab changed the queue: reload it and follow. */
  async _heard(msg) {
    if (!msg || typeof msg !== 'object' || this._closed) return;
    const before = new Map(this._q.map((w) => [w.id, w.path]));
    await this._reload();
    const paths = new Set();
    for (const [id, path] of before) if (!this._q.some((w) => w.id === id)) paths.add(path);
    const w = this._q.find((x) => x.id === msg.id);
    if (w) paths.add(w.path);
    if (msg.write && msg.write.path) paths.add(msg.write.path);
    switch (msg.t) {
      case 'acked':
        if (msg.write) {
          paths.delete(msg.write.path);
          this._confirm(msg.write.path, msg.result && msg.result.revision);
        }
        this._emit('acked', { write: msg.write, result: msg.result });
        this._settle(msg.id, (x) => x.resolve(msg.result));
        break;
      case 'rejected': {
        const e = new EdgebaseError(msg.error || {});
        this._emit('rejected', { write: msg.write, error: e });
        this._settle(msg.id, (x) => x.reject(e));
        break;
      }
      case 'conflict':
        if (w) this._announceConflict(w);
        break;
      case 'discarded':
        this._settle(msg.id, (x) => x.reject(discardedError()));
        break;
      default:
        break;
    }
    for (const p of paths) this._local(p);
    this._emit('change', this._counts());
    this._checkSettled();
    if (this.leader) this._pump();
  }

  /** Reads the queue from storage; the write being sent keeps this tab's copy. */
  async _reload() {
    if (!this._cache) return;
    const before = new Set(this._q.map((w) => w.id));
    const ks = await this._cache.keysAfterWrites('q:');
    const listed = new Set(ks.map((k) => k.slice(2)));
    for (const id of this._gone) if (!listed.has(id)) this._gone.delete(id);
    const mine = new Map(this._q.map((w) => [w.id, w]));
    const q = [];
    for (const k of ks) {
      const stored = await this._cache.a.get(k);
      if (!stored || typeof stored !== 'object' || !stored.id) continue;
      if (this._gone.has(stored.id)) continue; // removed here meanwhile: never sent again
      const w = mine.get(stored.id);
      if (w && (this._inflight === w.id)) q.push(w);
      else if (w) q.push(Object.assign(w, stored));
      else q.push(stored);
    }
    // Writes made while the reload ran, or not yet stored, stay.
    for (const w of this._q) if ((this._unsaved.has(w.id) || !before.has(w.id)) && !q.some((x) => x.id === w.id)) q.push(w);
    q.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this._q = q;
  }

  // ------------------------------------------------------------ events

  /** The 'change' event: how many writes are queued, and how many of them in conflict. */
  _counts() {
    return { pending: this._q.length, conflicts: this._q.filter((w) => w.state === 'conflict').length };
  }

  _emit(type, ev) {
    for (const cb of [...this._cbs[type]]) emit(cb, ev);
  }

  _settle(id, f) {
    const x = this._waiters.get(id);
    if (!x) return;
    this._waiters.delete(id);
    f(x);
  }

  _checkSettled() {
    if (!this._isSettled()) return;
    const s = this._settled;
    this._settled = [];
    for (const f of s) f();
  }

  /**
   * A write of path was acknowledged at revision rev: subscriptions that
   * already delivered that revision (with pendingWrites) see the local
   * view again; the others get the server's change as usual.
   */
  _confirm(path, rev) { this._show(path, rev); }

  /** Shows path's local view to this tab's subscriptions. */
  _local(path) { this._show(path, null); }

  /** Local-view events go out one after another, in the order they happened. */
  _show(path, rev) {
    this._shown = (this._shown || Promise.resolve()).then(() => this._cache.getDoc(path)).then((server) => {
      const d = server && !server.deleted ? server : null;
      this._c.realtime._localChange(path, this.view(path, d), rev);
    }).catch((e) => console.error('edgebase: local view failed', e));
  }
}

// ---------------------------------------------------------------- db

class Db {
  constructor(client) { this._c = client; }

  _read(query, opts) {
    return this._c.request('GET', '/api/db', {
      query: { ...query, consistency: opts && opts.consistency },
      headers: readHeaders(opts),
      safe: true,
    });
  }

  /**
   * The document at path, or null when there is none. With persistence the
   * answer is the local view (queued writes applied, pendingWrites: true);
   * source 'cache' reads only the cache, 'server' never falls back to it,
   * and the default answers from the cache (fromCache: true) when the
   * network fails and the cache knows the document.
   */
  async get(path, opts) {
    const o = opts || {};
    const cache = this._c._cache;
    const w = this._c.writes;
    // undefined: the cache knows nothing of path.
    const fromCache = async () => {
      await w.stored();
      const d = await cache.getDoc(path);
      if (!d && !w.touches(path)) return undefined;
      const v = w.view(path, d && !d.deleted ? d : null);
      return v ? { ...v, fromCache: true } : null;
    };
    return this._withCache(o, fromCache, async () => {
      let doc;
      try {
        doc = (await this._read({ collection: path }, o)).data;
      } catch (e) {
        if (e.status !== 404 || e.code !== 'not_found') throw e;
        if (!cache) return null;
        cache.putDoc({ collection: path, deleted: true, revision: 0 }, true);
        return w.view(path, null);
      }
      if (!cache || !doc || typeof doc !== 'object') return doc;
      cache.putDoc(doc);
      return w.view(path, doc);
    }, () => null);
  }

  /**
   * One page of the direct children of path: {documents, nextPageToken?};
   * with persistence its documents are the local view, and source works as
   * for get (a page the cache has never seen is not_cached).
   */
  async list(path, opts) {
    const o = opts || {};
    const cache = this._c._cache;
    const key = 'l:' + JSON.stringify([path, o.limit == null ? null : o.limit, o.pageToken == null ? null : o.pageToken]);
    return this._withCache(o, () => this._cachedAnswer(key), async () => {
      const page = (await this._read({ collection: path, list: 'true', limit: o.limit, pageToken: o.pageToken }, o)).data;
      if (!cache || !page || typeof page !== 'object') return page;
      cache.write(() => cache.a.set(key, page));
      for (const d of page.documents || []) if (d && d.collection) cache.putDoc(d);
      return localAnswer(this._c.writes, page);
    }, () => {
      throw new EdgebaseError({ code: 'not_cached', message: 'the cache holds no such page of ' + path });
    });
  }

  /**
   * A read with persistence around online(): source 'cache' answers
   * fromCache() alone (undefined: the cache cannot answer, then missing());
   * the default answers from the cache at once while the browser says it is
   * offline, without waiting out the retries, and after a network failure;
   * 'server' never uses the cache. Without persistence: online().
   */
  async _withCache(o, fromCache, online, missing) {
    if (!this._c._cache) return online();
    if (o.source === 'cache') {
      const hit = await fromCache();
      return hit === undefined ? missing() : hit;
    }
    if ((!o.source || o.source === 'default') && browserOffline()) {
      const hit = await fromCache().catch(() => undefined);
      if (hit !== undefined) return hit;
    }
    try {
      return await online();
    } catch (e) {
      if (e.status === 0 && o.source !== 'server') {
        const hit = await fromCache().catch(() => undefined);
        if (hit !== undefined) return hit;
      }
      throw e;
    }
  }

  /** The answer of a list or query cached under key, as the local view shows it (fromCache), or undefined. */
  async _cachedAnswer(key) {
    const w = this._c.writes;
    await w.stored();
    const hit = await this._c._cache.read(key);
    return hit && typeof hit === 'object' ? localAnswer(w, hit, { fromCache: true }) : undefined;
  }

  /** Creates or replaces the document; `created` says which. */
  async set(path, data, opts) {
    if (this._c._cache) return this._c.writes.enqueue('set', path, { data: clone(data) }, opts);
    const r = await this._c.request('POST', '/api/db', {
      body: { collection: path, data }, headers: ifMatchHeader(opts), safe: !!(opts && opts.ifMatch != null),
    });
    return { ...withRevision(r), created: r.status === 201 };
  }

  /** Sets a field (oldKey == newKey, the default) or renames oldKey to newKey with value. */
  async update(path, change, opts) {
    const c = change || {};
    const body = { oldKey: c.oldKey, newKey: c.newKey == null ? c.oldKey : c.newKey, value: c.value };
    if (c.type != null) body.type = c.type;
    if (this._c._cache) return this._c.writes.enqueue('update', path, { change: clone(body) }, opts);
    const r = await this._c.request('PUT', '/api/db', {
      query: { collection: path }, body, headers: ifMatchHeader(opts), safe: !!(opts && opts.ifMatch != null),
    });
    return withRevision(r);
  }

  async deleteField(path, field, opts) {
    if (this._c._cache) return this._c.writes.enqueue('deleteField', path, { field }, opts);
    const r = await this._c.request('DELETE', '/api/db', {
      query: { collection: path, field }, headers: ifMatchHeader(opts), safe: !!(opts && opts.ifMatch != null),
    });
    return withRevision(r);
  }

  async delete(path, opts) {
    if (this._c._cache) return this._c.writes.enqueue('delete', path, {}, opts);
    const r = await this._c.request('DELETE', '/api/db', {
      query: { collection: path }, headers: ifMatchHeader(opts), safe: !!(opts && opts.ifMatch != null),
    });
    return withRevision(r);
  }

  /** Commits 1..500 writes atomically: {revision, results}. Retried only when every write carries ifMatch. */
  async batch(writes) {
    const safe = Array.isArray(writes) && writes.length > 0 && writes.every((w) => w && w.ifMatch != null);
    return withRevision(await this._c.request('POST', '/api/db/batch', { body: { writes }, safe }));
  }

  /**
   * Runs a query (POST /api/db/query): {documents, nextCursor?}, or with
   * count: true, {count}. q: {collection, where?, orderBy?, limit?,
   * startAfter?, select?, count?, collectionGroup?}.
   */
  async query(q, opts) {
    const o = opts || {};
    const body = {};
    for (const k of ['collection', 'collectionGroup', 'where', 'orderBy', 'limit', 'startAfter', 'select', 'count']) {
      if (q && q[k] != null) body[k] = q[k];
    }
    const cache = this._c._cache;
    // With persistence the last answer of each query is cached; offline it
    // is answered again (fromCache), its documents as the local view shows
    // them: the query is not evaluated again on the client.
    const key = 'qy:' + JSON.stringify(body);
    return this._withCache(o, () => this._cachedAnswer(key), async () => {
      const res = (await this._c.request('POST', '/api/db/query', {
        query: { consistency: o.consistency }, body, headers: readHeaders(o), safe: true,
      })).data;
      if (!cache || !res || typeof res !== 'object') return res;
      cache.write(() => cache.a.set(key, res));
      if (!body.select) for (const d of res.documents || []) if (d && d.collection) cache.putDoc(d);
      return localAnswer(this._c.writes, res);
    }, () => {
      throw new EdgebaseError({ code: 'not_cached', message: 'the cache holds no answer of this query' });
    });
  }

  async getRules() {
    return (await this._c.request('GET', '/api/db/rules', { safe: true })).data;
  }

  async setRules(rules) {
    return withRevision(await this._c.request('PUT', '/api/db/rules', { body: { rules } }));
  }

  /**
   * One page of the direct child segments of path ("" or absent: the root)
   * that hold a document or have something below them, in key order
   * (owner only): {children:[{name, path, document, children}], nextPageToken?}.
   */
  async children(path, opts) {
    const o = opts || {};
    return (await this._c.request('GET', '/api/db/children', {
      query: { collection: path || undefined, limit: o.limit, pageToken: o.pageToken, consistency: o.consistency },
      headers: readHeaders(o), safe: true,
    })).data;
  }

  /**
   * Evaluates the rules for one request without saving anything (owner
   * only): t is {op: "read"|"write", path, userId?, data?, rules?}; without
   * rules, the rules in force. Answers {allowed, rule, match, expression, auth, error?}.
   */
  async testRules(t) {
    const o = t || {};
    const body = { op: o.op, path: o.path };
    for (const k of ['userId', 'data', 'rules']) if (o[k] !== undefined) body[k] = o[k];
    return (await this._c.request('POST', '/api/db/rules/test', { body, safe: true })).data;
  }

  /** The project's declared indexes with their state on the node that answers (owner only). */
  async getIndexes(opts) {
    return (await this._c.request('GET', '/api/db/indexes', {
      query: { consistency: opts && opts.consistency }, headers: readHeaders(opts), safe: true,
    })).data;
  }

  /** Replaces the project's whole list of indexes (owner only): {indexes, revision}. */
  async setIndexes(indexes) {
    return withRevision(await this._c.request('PUT', '/api/db/indexes', { body: { indexes: indexes || [] } }));
  }
}

// ---------------------------------------------------------------- push

class Push {
  constructor(client) { this._c = client; }

  async _post(route, body, opts) {
    return withRevision(await this._c.request('POST', '/api/notifications/' + route, { body, ...opts }));
  }

  async _get(route, query) {
    return (await this._c.request('GET', '/api/notifications/' + route, { query, safe: true })).data;
  }

  register(token, platform) { return this._post('register', { token, deviceInfo: { platform: platform || 'web' } }); }
  unregister(token) { return this._post('unregister', { token }); }
  /** The caller's devices; an owner may name another user with {userId}. */
  async devices(opts) { return (await this._get('devices', { userId: opts && opts.userId })).devices; }
  subscribe(topic) { return this._post('subscribe', { topic }); }
  unsubscribe(topic) { return this._post('unsubscribe', { topic }); }
  /** The caller's topics; an owner may name another user with {userId}. */
  async topics(opts) { return (await this._get('topics', { userId: opts && opts.userId })).topics; }
  /** Every topic of the project with its number of subscribers (owner only): [{topic, subscribers}]. */
  async projectTopics() { return (await this._get('project-topics')).topics || []; }
  /** Whether push is on for the project (owner only): {projectId, pushEnabled}. */
  pushEnabled() { return this._get('toggle-push'); }
  /** The project's FCM credentials, never the key (owner only): {configured, fcmProjectId, clientEmail, updatedAt}. */
  getCredentials() { return this._get('fcm-credentials'); }
  /** Sets the FCM service account: the JSON file as Firebase gives it, as an object or a string (owner only). */
  async setCredentials(serviceAccount) {
    const rawBody = typeof serviceAccount === 'string' ? serviceAccount : JSON.stringify(serviceAccount);
    return withRevision(await this._c.request('PUT', '/api/notifications/fcm-credentials', { rawBody }));
  }
  getPreferences() { return this._get('preferences'); }
  async setPreferences(prefs) {
    return withRevision(await this._c.request('PUT', '/api/notifications/preferences', { body: prefs || {} }));
  }
  history(opts) { return this._get('history', { limit: opts && opts.limit, cursor: opts && opts.cursor }); }
  schedule(notification) { return this._post('schedule', notification); }
  scheduled(opts) { return this._get('scheduled', { limit: opts && opts.limit, cursor: opts && opts.cursor }); }
  async cancel(id) {
    return withRevision(await this._c.request('DELETE', '/api/notifications/scheduled/' + encodeURIComponent(id)));
  }
  togglePush(enabled) { return this._post('toggle-push', { projectId: this._c.projectId, enabled: !!enabled }); }
  sendToProject(n) { return this._post('send-to-project/' + encodeURIComponent(this._c.projectId), n); }
  sendToUser(userId, n) { return this._post('send-to-user/' + encodeURIComponent(userId), n); }
  sendToTopic(topic, n) { return this._post('send-to-topic', { ...n, topic }); }
}

// ---------------------------------------------------------------- triggers

/**
 * The project's triggers (owner only): a declared match on document paths
 * that calls a webhook, sends a notification or makes a derived write for
 * each committed change, with its delivery status and dead letters.
 */
class Triggers {
  constructor(client) { this._c = client; }

  _path(name, rest) {
    return '/api/triggers/' + encodeURIComponent(name) + (rest || '');
  }

  /** Every trigger of the project, sorted by name: [{...definition, status}]. */
  async list() {
    return (await this._c.request('GET', '/api/triggers', { safe: true })).data.triggers || [];
  }

  /** The trigger {...definition, status}, or null when there is none of that name. */
  async get(name) {
    try {
      return (await this._c.request('GET', this._path(name), { safe: true })).data;
    } catch (e) {
      if (e.status === 404 && e.code === 'not_found') return null;
      throw e;
    }
  }

  /**
   * Creates or replaces the trigger name with def ({match, on?, condition?,
   * action, disabled?}): {trigger, created, revision}. A webhook's secret is
   * in trigger only when the server made it or def sent it; omitting it on
   * an existing webhook trigger keeps the old one.
   */
  async put(name, def) {
    const r = await this._c.request('PUT', this._path(name), { body: def || {} });
    return { trigger: r.data, created: r.status === 201, revision: r.revision };
  }

  /** Deletes the trigger with its progress and dead letters: {deleted, revision}. */
  async delete(name) {
    return withRevision(await this._c.request('DELETE', this._path(name)));
  }

  /** One page of the trigger's dead letters: {deadLetters: [{id, ...}], nextPageToken?}. */
  async deadLetters(name, opts) {
    const o = opts || {};
    const d = (await this._c.request('GET', this._path(name, '/dead'), {
      query: { limit: o.limit, pageToken: o.pageToken }, safe: true,
    })).data || {};
    if (!Array.isArray(d.deadLetters)) d.deadLetters = [];
    return d;
  }

  /**
   * Queues dead letters again for delivery, in order on their paths: the
   * ones of ids, or all (at most 1000 a call) without: {replayed, revision}.
   */
  async replay(name, ids) {
    const body = ids && ids.length ? { ids } : {};
    return withRevision(await this._c.request('POST', this._path(name, '/replay'), { body }));
  }
}

// ---------------------------------------------------------------- admin

/**
 * The project owner's administration: users, API keys, the audit log, SMTP
 * settings, email templates, sign-in settings and OAuth providers. Every
 * call needs the signed-in user to be an owner (403 forbidden otherwise).
 */
class Admin {
  constructor(client) {
    const c = client;
    const get = async (path, query) => (await c.request('GET', path, { query, safe: true })).data;
    const write = async (method, path, body) => withRevision(await c.request(method, path, body === undefined ? {} : { body }));
    const enc = encodeURIComponent;
    this.users = {
      list: (o) => get('/api/auth/users', { query: o && o.query, cursor: o && o.cursor, limit: o && o.limit }),
      get: async (id) => (await get('/api/auth/users/' + enc(id))).user,
      disable: (id) => write('POST', '/api/auth/users/' + enc(id) + '/disable'),
      enable: (id) => write('POST', '/api/auth/users/' + enc(id) + '/enable'),
      revokeSessions: (id) => write('POST', '/api/auth/users/' + enc(id) + '/revoke-sessions'),
      delete: (id) => write('DELETE', '/api/auth/users/' + enc(id)),
      /** Makes another account of the project an owner or a user (the set-role action): {user, revision}. */
      setRole: (id, role) => write('POST', '/api/auth', { action: 'set-role', userId: id, role }),
      /** The account's sessions: [{id, createdAt, lastUsedAt, address, userAgent}]. */
      sessions: async (id) => (await get('/api/auth/users/' + enc(id) + '/sessions')).sessions || [],
      /** Ends one session of the account: {ok, revision}. */
      revokeSession: (id, sessionId) => write('DELETE', '/api/auth/users/' + enc(id) + '/sessions/' + enc(sessionId)),
    };
    this.keys = {
      create: (name) => write('POST', '/api/keys', { name }),
      list: async () => (await get('/api/keys')).keys || [],
      delete: (id) => write('DELETE', '/api/keys/' + enc(id)),
    };
    this.audit = {
      list: (o) => get('/api/auth/audit', { cursor: o && o.cursor, limit: o && o.limit, userId: o && o.userId, type: o && o.type }),
    };
    this.smtp = {
      /** The project's SMTP settings, or null when it uses the cluster's default server. */
      get: async () => {
        try {
          return await get('/api/auth/smtp');
        } catch (e) {
          if (e.status === 404 && e.code === 'not_found') return null;
          throw e;
        }
      },
      set: (settings) => write('PUT', '/api/auth/smtp', settings),
      delete: () => write('DELETE', '/api/auth/smtp'),
    };
    this.emailTemplates = {
      list: async () => (await get('/api/auth/email-templates')).templates,
      set: (kind, template) => write('PUT', '/api/auth/email-templates/' + enc(kind), template),
      /** Restores the built-in template of kind. */
      reset: (kind) => write('DELETE', '/api/auth/email-templates/' + enc(kind)),
    };
    this.authSettings = {
      get: () => get('/api/auth/settings'),
      set: (settings) => write('PUT', '/api/auth/settings', settings),
    };
    this.oauthProviders = {
      list: async () => (await get('/api/auth/oauth')).providers || [],
      get: (provider) => get('/api/auth/oauth/' + enc(provider)),
      set: (provider, config) => write('PUT', '/api/auth/oauth/' + enc(provider), config),
      delete: (provider) => write('DELETE', '/api/auth/oauth/' + enc(provider)),
    };
  }
}

// ---------------------------------------------------------------- operator

/**
 * Creates a client of the cluster's operator: the /admin routes with the
 * admin token (Authorization: Bearer), and /metrics.
 * @param {import('./edgebase').OperatorOptions} options
 * @returns {import('./edgebase').OperatorClient}
 */
export function createOperator(options) {
  return new Operator(options || {});
}

const BACKUP_MAGIC = 'edgebase backup\n';

/** The revision in a backup file's header (magic, version, uvarint length, JSON), or null. */
async function backupRevision(blob) {
  try {
    const head = new Uint8Array(await blob.slice(0, 16 + 1 + 10 + (64 << 10)).arrayBuffer());
    if (new TextDecoder().decode(head.subarray(0, 16)) !== BACKUP_MAGIC) return null;
    let n = 0;
    let shift = 0;
    let i = 17;
    for (; i < head.length && i < 27; i++) {
      n += (head[i] & 0x7f) * 2 ** shift;
      shift += 7;
      if (head[i] < 0x80) break;
    }
    i++;
    if (i + n > head.length) return null;
    const info = JSON.parse(new TextDecoder().decode(head.subarray(i, i + n)));
    return typeof info.revision === 'number' ? info.revision : null;
  } catch (_) {
    return null;
  }
}

/** The filename of a Content-Disposition header, or null. */
function dispositionFilename(v) {
  if (!v) return null;
  const star = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(v);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch (_) {
      // fall through to the plain form
    }
  }
  const m = /filename\s*=\s*(?:"([^"]*)"|([^;\s]+))/.exec(v);
  return m ? (m[1] !== undefined ? m[1] : m[2]) : null;
}

class Operator extends Http {
  constructor(o) {
    super(o, 'createOperator');
    if (!o.adminToken) throw new EdgebaseError({ code: 'invalid_argument', field: 'adminToken', message: 'createOperator needs an adminToken' });
    this._token = o.adminToken;
    const get = async (path, query) => (await this.request('GET', path, { query, safe: true })).data;
    const write = async (method, path, body) => withRevision(await this.request(method, path, body === undefined ? {} : { body }));
    const enc = encodeURIComponent;
    this.projects = {
      list: (opts) => get('/admin/projects', { limit: opts && opts.limit, cursor: opts && opts.cursor || undefined }),
      create: (p) => write('POST', '/admin/projects', { name: p && p.name, ownerEmail: p && p.ownerEmail, ownerPassword: p && p.ownerPassword }),
      setOwner: (id, email) => write('PUT', '/admin/projects/' + enc(id) + '/owner', { email }),
    };
    this.cluster = {
      status: () => get('/admin/cluster'),
      removeNode: async (id) => (await this.request('DELETE', '/admin/cluster/nodes/' + enc(id))).data,
      transferLeadership: async (id) => (await this.request('POST', '/admin/cluster/leader', { body: id ? { id } : {} })).data,
    };
  }

  _headers() { return { Authorization: 'Bearer ' + this._token }; }

  /**
   * A backup of the whole cluster: {blob, filename, revision}. The revision
   * comes from X-Revision when the answer carries it (it is a trailer, which
   * fetch does not show), else from the file's own header.
   */
  async backup() {
    const r = await this.request('GET', '/admin/backup', { safe: true, as: 'blob' });
    const blob = r.data;
    let revision = r.revision;
    if (revision == null) revision = await backupRevision(blob);
    const filename = dispositionFilename(r.headers.get('Content-Disposition')) || 'edgebase-backup.ebbk';
    return { blob, filename, revision };
  }

  /** The Prometheus text of GET /metrics of the node at url. */
  async metrics() {
    return (await this.request('GET', '/metrics', { safe: true, as: 'text' })).data;
  }
}

// ---------------------------------------------------------------- realtime

// Close codes after which reconnecting with the same credentials cannot help
// (bad or ended session, origin refused, protocol violation): the connection
// waits for a token change or realtime.reconnect().
const FINAL_CLOSE = new Set([1008, 4001, 4003]);

class Realtime {
  constructor(client, o) {
    this._c = client;
    this._WS = o.WebSocket || null;
    this._minBackoff = o.minBackoff == null ? 100 : o.minBackoff;
    this._maxBackoff = o.maxBackoff == null ? 5000 : o.maxBackoff;
    this._pingInterval = o.pingInterval == null ? 20000 : o.pingInterval;
    this._subs = new Map();
    this._notes = new Set();
    this._statusCbs = new Set();
    this._status = { state: 'idle' };
    this._ws = null;
    this._ready = false;
    this._attempt = 0;
    this._timer = null;
    this._pinger = null;
    this._seq = 0;
    this._closed = false;
    this._stopped = false;
    this._serverError = null;
    client.auth.onChange(() => this._credentialsChanged());
  }

  /** The connection's state: idle, connecting, ready, disconnected or stopped (with error). */
  get status() { return this._status; }

  onStatus(cb) {
    this._statusCbs.add(cb);
    return () => { this._statusCbs.delete(cb); };
  }

  /** Calls cb({type:"notification", ...}) for each push notification delivered to the signed-in user. */
  onNotification(cb) {
    this._notes.add(cb);
    this._closed = false;
    this._ensure();
    return () => {
      this._notes.delete(cb);
      this._idleCheck();
    };
  }

  /**
   * Subscribes to the document at path (with {prefix:true}, also to every
   * document below it). onEvent gets a snapshot, then changes, each once and
   * in order across reconnects; or a reset followed by a fresh snapshot; or
   * an error that ends the subscription. With {resumeEvents:true} it also
   * gets {type:"resumed", revision} after each reconnect that resumed
   * without a new snapshot.
   */
  subscribe(path, opts, onEvent) {
    if (typeof opts === 'function') {
      onEvent = opts;
      opts = {};
    }
    if (typeof onEvent !== 'function') {
      throw new EdgebaseError({ code: 'invalid_argument', field: 'onEvent', message: 'subscribe needs an onEvent callback' });
    }
    const sub = {
      id: 's' + ++this._seq, path, prefix: !!(opts && opts.prefix), resumeEvents: !!(opts && opts.resumeEvents), onEvent,
      started: false, pending: [], rev: 0, open: false, seen: new Set(), loading: false, cacheKey: null, fromCache: false,
    };
    this._subs.set(sub.id, sub);
    this._closed = false;
    const cache = this._c._cache;
    if (cache) {
      // Serve the cached snapshot first; only then subscribe, with since.
      sub.cacheKey = Cache.subKey(path, sub.prefix);
      sub.loading = true;
      // The cached state first: the subscription is sent with since at
      // once, and what the node answers is held until the cached snapshot
      // (read meanwhile) has been delivered.
      const failed = (e) => {
        console.error('edgebase: cache read failed', e);
        return null;
      };
      cache.loadState(sub.cacheKey).catch(failed).then((st) => {
        sub.loading = false;
        if (this._subs.get(sub.id) !== sub) return;
        if (st) {
          sub.started = true;
          sub.fromCache = true;
          sub.holding = [];
          sub.rev = st.revision;
          sub.open = !!st.open;
          sub.seen = new Set(Array.isArray(st.seen) ? st.seen : []);
        }
        if (this._ready) this._sendSubscribe(sub);
        if (!st) return;
        Promise.all([cache.loadDocs(sub.cacheKey), this._c.writes._loaded]).catch(failed).then((got) => {
          const held = sub.holding || [];
          sub.holding = null;
          if (this._subs.get(sub.id) !== sub) return;
          if (!got) {
            // The documents cannot be read: forget the cached subscription
            // (a new one starts afresh) and end this one, never a wrong snapshot.
            cache.dropSub(sub.cacheKey);
            this._handle(sub, { op: 'error', code: 'cache_unreadable', message: 'the cached documents of this subscription cannot be read: subscribe again' });
            this._send({ op: 'unsubscribe', id: sub.id });
            return;
          }
          emit(sub.onEvent, { type: 'snapshot', documents: this._overlay(sub, got[0]), revision: st.revision, fromCache: true });
          for (const m of held) if (this._subs.get(sub.id) === sub) this._handle(sub, m);
        });
      });
    }
    if (this._ready) this._sendSubscribe(sub);
    else this._ensure();
    return {
      id: sub.id,
      get revision() { return sub.rev; },
      unsubscribe: () => {
        if (this._subs.get(sub.id) !== sub) return;
        this._subs.delete(sub.id);
        if (this._ready) this._send({ op: 'unsubscribe', id: sub.id });
        this._idleCheck();
      },
    };
  }

  /**
   * Subscribes to a live query: q is db.query's body without count and
   * startAfter. onEvent(event, docs) gets a snapshot, then each change of
   * the window ({type:"change", changeType:"added"|"modified"|"removed",
   * collection, data, index, revision}), with docs the window after it, in
   * query order. After a reconnect the window resumes from the last revision
   * it was complete at: the changes that turn the window last delivered into
   * the current one come as changes (then {type:"resumed"} with
   * resumeEvents), or a reset and a fresh snapshot.
   */
  subscribeQuery(q, onEvent, opts) {
    if (typeof onEvent !== 'function') {
      throw new EdgebaseError({ code: 'invalid_argument', field: 'onEvent', message: 'subscribeQuery needs an onEvent callback' });
    }
    const body = {};
    for (const k of ['collection', 'collectionGroup', 'where', 'orderBy', 'limit', 'select']) {
      if (q && q[k] != null) body[k] = q[k];
    }
    const sub = {
      id: 'q' + ++this._seq, query: body, resumeEvents: !!(opts && opts.resumeEvents), onEvent,
      started: false, pending: [], rev: 0, win: [], base: [], baseRev: 0, shown: null, resuming: false,
    };
    this._subs.set(sub.id, sub);
    this._closed = false;
    if (this._ready) this._sendSubscribe(sub);
    else this._ensure();
    return {
      id: sub.id,
      get revision() { return sub.rev; },
      get docs() { return (sub.resuming ? sub.shown : sub.win).slice(); },
      unsubscribe: () => {
        if (this._subs.get(sub.id) !== sub) return;
        this._subs.delete(sub.id);
        if (this._ready) this._send({ op: 'unsubscribe', id: sub.id });
        this._idleCheck();
      },
    };
  }

  /** Tries to connect again at once (after a stop, or to cut a backoff short). */
  reconnect() {
    this._stopped = false;
    this._attempt = 0;
    this._restart();
  }

  /** Ends every subscription and the connection. */
  close() {
    this._closed = true;
    this._subs.clear();
    this._notes.clear();
    this._teardown(1000, 'closed');
    this._setStatus({ state: 'idle' });
  }

  _setStatus(s) {
    this._status = s;
    for (const cb of [...this._statusCbs]) {
      try {
        cb(s);
      } catch (e) {
        console.error('edgebase: realtime.onStatus listener threw', e);
      }
    }
  }

  _wanted() { return !this._closed && (this._subs.size > 0 || this._notes.size > 0); }

  _idleCheck() {
    if (!this._wanted()) {
      this._teardown(1000, 'idle');
      this._setStatus({ state: 'idle' });
    }
  }

  _ensure() {
    if (!this._wanted() || this._ws || this._timer || this._stopped) return;
    this._connect();
  }

  _credentialsChanged() {
    // The connection authenticated with the old token: start over with the
    // new one; subscriptions resume with since.
    this._stopped = false;
    this._attempt = 0;
    this._restart();
  }

  _restart() {
    this._teardown(1000, 'reconnecting');
    if (this._wanted()) this._connect();
  }

  _teardown(code, reason) {
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    this._stopPinger();
    const ws = this._ws;
    this._ws = null;
    this._ready = false;
    for (const sub of this._subs.values()) sub.pending = [];
    if (ws) {
      ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
      try {
        ws.close(code, reason);
      } catch (_) {
        // already closed
      }
    }
  }

  _connect() {
    const token = this._c.auth.token();
    if (!token) {
      this._setStatus({ state: 'stopped', error: new EdgebaseError({ code: 'missing_token', message: 'sign in to use realtime' }) });
      return;
    }
    const WS = this._WS || (typeof WebSocket !== 'undefined' ? WebSocket : null);
    if (!WS) {
      this._stopped = true;
      this._setStatus({ state: 'stopped', error: new EdgebaseError({ code: 'websocket_unavailable',
        message: 'no WebSocket: pass one in createClient options (Node 20: run with --experimental-websocket)' }) });
      return;
    }
    const url = this._c.url.replace(/^http/, 'ws') + '/api/realtime';
    this._setStatus({ state: 'connecting' });
    this._serverError = null;
    let ws;
    try {
      ws = new WS(url);
    } catch (e) {
      this._scheduleReconnect(new EdgebaseError({ code: 'network_error', message: String(e && e.message ? e.message : e), cause: e }));
      return;
    }
    this._ws = ws;
    ws.onopen = () => {
      // Credentials go in the first message, never in the URL.
      ws.send(JSON.stringify({ op: 'auth', token, projectId: this._c.projectId, apiKey: this._c.apiKey }));
    };
    ws.onmessage = (ev) => this._onMessage(ev.data);
    // Some WebSockets (Node 20's) report a failed connection with an error
    // and no close event: anything but an open socket counts as closed.
    ws.onerror = () => {
      if (ws.readyState !== 1) this._onClose(1006, 'connection failed');
    };
    ws.onclose = (ev) => this._onClose(ev.code, ev.reason);
  }

  _onClose(code, reason) {
    const err = this._serverError || new EdgebaseError({ status: 0, code: 'connection_closed', message: `connection closed (${code}${reason ? ' ' + reason : ''})` });
    this._teardown(1000, '');
    if (!this._wanted()) return;
    if (FINAL_CLOSE.has(code)) {
      this._stopped = true;
      this._setStatus({ state: 'stopped', code, error: err });
      return;
    }
    this._scheduleReconnect(err, code);
  }

  _scheduleReconnect(error, code) {
    this._ws = null;
    const wait = backoff(this._attempt++, this._minBackoff, this._maxBackoff);
    this._setStatus({ state: 'disconnected', code, error, retryIn: Math.round(wait) });
    this._timer = setTimeout(() => {
      this._timer = null;
      if (this._wanted() && !this._ws) this._connect();
    }, wait);
  }

  _send(msg) {
    if (this._ws) this._ws.send(JSON.stringify(msg));
  }

  _startPinger() {
    if (!(this._pingInterval > 0)) return;
    let waiting = false;
    this._heard = () => { waiting = false; };
    this._pinger = setInterval(() => {
      if (waiting) {
        // No answer to the last ping: the connection is dead.
        const ws = this._ws;
        this._teardown(1000, 'ping timeout');
        if (ws) this._scheduleReconnect(new EdgebaseError({ code: 'connection_closed', message: 'ping unanswered' }));
        return;
      }
      waiting = true;
      this._send({ op: 'ping' });
    }, this._pingInterval);
  }

  _stopPinger() {
    if (this._pinger) clearInterval(this._pinger);
    this._pinger = null;
    this._heard = null;
  }

  _onMessage(raw) {
    let m;
    try {
      m = JSON.parse(typeof raw === 'string' ? raw : new TextDecoder().decode(raw));
    } catch (_) {
      return;
    }
    if (this._heard) this._heard();
    // A snapshot, resume, change or notification: state this client has
    // seen (ready's revision is only the node's).
    if (m && typeof m.revision === 'number' && m.op !== 'ready' && m.op !== 'error') this._c.observeRevision(m.revision);
    switch (m.op) {
      case 'ready':
        this._ready = true;
        this._attempt = 0;
        this._startPinger();
        this._setStatus({ state: 'ready', userId: m.userId, revision: m.revision });
        for (const sub of this._subs.values()) this._sendSubscribe(sub);
        // Connected again: the network is back, replay the queued writes.
        this._c.writes.replay();
        return;
      case 'pong':
      case 'unsubscribed':
        return;
      case 'notification': {
        const n = { ...m, type: 'notification' };
        delete n.op;
        for (const cb of [...this._notes]) emit(cb, n);
        return;
      }
      case 'error':
        if (!m.id) {
          // The server is about to close (bad credentials, ended session).
          this._serverError = new EdgebaseError({ code: m.code, message: m.message });
          return;
        }
        break;
      default:
        break;
    }
    const sub = m.id && this._subs.get(m.id);
    if (sub && sub.holding) sub.holding.push(m);
    else if (sub) this._handle(sub, m);
  }

  _sendSubscribe(sub) {
    if (sub.query) {
      const qm = { op: 'subscribe', id: sub.id, query: sub.query };
      if (sub.started) {
        // Resume from the last revision the window was complete at; the
        // replay rebuilds it from there, out of the application's sight.
        if (!sub.resuming) sub.shown = sub.win;
        sub.resuming = true;
        sub.win = sub.base.slice();
        sub.rev = sub.baseRev;
        qm.since = sub.baseRev;
      }
      sub.pending = [];
      this._withSession(qm);
      this._send(qm);
      return;
    }
    if (sub.loading) return; // sent once the cache is read
    const msg = { op: 'subscribe', id: sub.id, collection: sub.path };
    if (sub.prefix) msg.prefix = true;
    if (sub.started) {
      // The changes of the last revision may have been cut by the drop: ask
      // for that revision again and drop the changes already delivered.
      msg.since = sub.open && sub.rev > 0 ? sub.rev - 1 : sub.rev;
    }
    sub.pending = [];
    this._withSession(msg);
    this._send(msg);
  }

  /** Session consistency: the node sends the snapshot or replay only once it has applied what this client has seen. */
  _withSession(msg) {
    const c = this._c;
    if (c._session && c._sessionRev > 0) msg.minRevision = c._sessionRev;
  }

  /**
   * A subscription's documents as the local view shows them (persistence):
   * queued writes applied, documents created or deleted only locally added
   * or left out, in path order.
   */
  _overlay(sub, documents) {
    const w = this._c.writes;
    const paths = w._paths().filter((p) => covers(sub.path, sub.prefix, p));
    if (!paths.length) return documents;
    const byPath = new Map(documents.map((d) => [d.collection, d]));
    for (const p of paths) {
      const v = w.view(p, byPath.get(p) || null);
      if (v) byPath.set(p, v);
      else byPath.delete(p);
    }
    return [...byPath.values()].sort((x, y) => (x.collection < y.collection ? -1 : x.collection > y.collection ? 1 : 0));
  }

  /** A change of the local view of path (a queued write made, refused or dropped), shown to the subscriptions covering it. */
  _localChange(path, view, confirmed) {
    for (const sub of this._subs.values()) {
      if (sub.query || !sub.started || !covers(sub.path, sub.prefix, path)) continue;
      if (confirmed != null && sub.rev < confirmed) continue; // the server's change is still to come
      emit(sub.onEvent, {
        type: 'change', collection: path, revision: sub.rev, changeType: view ? 'set' : 'delete',
        data: view ? clone(view.data) : null, updateTime: null,
        pendingWrites: this._c.writes.touches(path), local: true,
      });
    }
  }

  _handle(sub, m) {
    if (sub.query) {
      this._handleQuery(sub, m);
      return;
    }
    const cache = sub.cacheKey ? this._c._cache : null;
    const state = () => ({ revision: sub.rev, open: sub.open, seen: [...sub.seen] });
    switch (m.op) {
      case 'snapshot':
        sub.pending.push(...(m.documents || []));
        if (m.more) return;
        sub.started = true;
        sub.fromCache = false;
        sub.rev = m.revision;
        sub.open = false;
        sub.seen.clear();
        // The cache gets its own copy: the application may change the event's.
        if (cache) cache.saveSnapshot(sub.cacheKey, clone(sub.pending), m.revision);
        emit(sub.onEvent, { type: 'snapshot', documents: this._overlay(sub, sub.pending), revision: m.revision });
        sub.pending = [];
        return;
      case 'reset':
        sub.pending = [];
        emit(sub.onEvent, { type: 'reset', revision: m.revision });
        return;
      case 'resumed':
        if (m.revision >= sub.rev) {
          sub.rev = m.revision;
          sub.open = false;
          sub.seen.clear();
          if (cache) cache.saveState(sub.cacheKey, state());
        }
        // Opt-in (always after a snapshot from the cache): the replayed
        // changes (if any) are delivered and the subscription is live
        // again without a new snapshot.
        if (sub.resumeEvents || sub.fromCache) emit(sub.onEvent, { type: 'resumed', revision: sub.rev });
        sub.fromCache = false;
        return;
      case 'change': {
        if (m.revision > sub.rev) {
          sub.rev = m.revision;
          sub.open = true;
          sub.seen.clear();
        } else if (!(m.revision === sub.rev && sub.open && !sub.seen.has(m.collection))) {
          return; // already delivered before the reconnect
        }
        sub.seen.add(m.collection);
        const ev = {
          type: 'change', collection: m.collection, revision: m.revision, changeType: m.type,
          data: m.data === undefined ? null : m.data, updateTime: m.updateTime || null,
        };
        if (cache) {
          cache.saveChange(sub.cacheKey, m, state());
          cache.putDoc(m.type === 'delete' ? { collection: m.collection, deleted: true, revision: m.revision }
            : { collection: m.collection, data: clone(ev.data), revision: m.revision, updateTime: ev.updateTime });
          const w = this._c.writes;
          if (w.touches(m.collection)) {
            // Queued writes still change it: the app sees the local view.
            const v = w.view(m.collection, m.type === 'delete' ? null : { collection: m.collection, data: ev.data, revision: m.revision, updateTime: ev.updateTime });
            ev.changeType = v ? 'set' : 'delete';
            ev.data = v ? v.data : null;
            ev.pendingWrites = true;
          }
        }
        emit(sub.onEvent, ev);
        return;
      }
      case 'error':
        this._subs.delete(sub.id);
        if (cache) cache.dropSub(sub.cacheKey);
        emit(sub.onEvent, { type: 'error', error: new EdgebaseError({ code: m.code, message: m.message }) });
        this._idleCheck();
        return;
      default:
    }
  }
}

// ---------------------------------------------------------------- live queries

Realtime.prototype._handleQuery = function handleQuery(sub, m) {
  const deliver = (ev, docs) => {
    if (!docs) docs = sub.win.slice();
    try {
      sub.onEvent(ev, docs);
    } catch (e) {
      console.error('edgebase: event listener threw', e);
    }
  };
  const boundary = (rev) => {
    sub.rev = rev;
    sub.baseRev = rev;
    sub.base = sub.win.slice();
  };
  switch (m.op) {
    case 'snapshot':
      sub.pending.push(...(m.documents || []));
      if (m.more) return;
      sub.started = true;
      sub.win = sub.pending;
      sub.pending = [];
      sub.resuming = false;
      sub.shown = null;
      boundary(m.revision);
      deliver({ type: 'snapshot', documents: sub.win.slice(), revision: m.revision });
      return;
    case 'reset':
      sub.pending = [];
      deliver({ type: 'reset', revision: m.revision });
      return;
    case 'resumed': {
      const changes = sub.resuming ? windowDiff(sub.shown, sub.win, m.revision) : [];
      // The application gets the changes from the window it last saw to
      // the current one, each with the window after it.
      const seen = sub.resuming ? sub.shown.slice() : null;
      sub.resuming = false;
      sub.shown = null;
      boundary(m.revision);
      for (const ev of changes) {
        const at = seen.findIndex((d) => d.collection === ev.collection);
        if (at >= 0) seen.splice(at, 1);
        if (ev.changeType !== 'removed') seen.splice(ev.index, 0, sub.win.find((d) => d.collection === ev.collection));
        deliver(ev, seen.slice());
      }
      if (sub.resumeEvents) deliver({ type: 'resumed', revision: m.revision });
      return;
    }
    case 'change': {
      if (m.revision < sub.rev) return;
      sub.rev = m.revision;
      const ev = applyWindow(sub.win, m);
      if (m.checkpoint) {
        // The window is now exactly the query's at this revision.
        sub.base = sub.win.slice();
        sub.baseRev = m.revision;
      }
      if (ev && !sub.resuming) deliver(ev);
      return;
    }
    case 'error':
      this._subs.delete(sub.id);
      emit(sub.onEvent, { type: 'error', error: new EdgebaseError({ code: m.code, message: m.message, field: m.field }) });
      this._idleCheck();
      return;
    default:
  }
};

/** Applies a live query's change message to the window (in place); the event, or null. */
function applyWindow(win, m) {
  if (typeof m.index !== 'number') return null;
  const at = win.findIndex((d) => d.collection === m.collection);
  if (at >= 0) win.splice(at, 1);
  const ev = { type: 'change', changeType: m.type, collection: m.collection, index: m.index, revision: m.revision,
    data: m.data === undefined ? null : m.data, updateTime: m.updateTime || null };
  if (m.type === 'added' || m.type === 'modified') {
    win.splice(Math.min(Math.max(m.index, 0), win.length), 0,
      { collection: m.collection, data: m.data, revision: m.revision, createTime: m.createTime, updateTime: m.updateTime });
  } else if (m.type !== 'removed') {
    return null;
  }
  return ev;
}

/**
 * The changes that turn window `from` into `to` as the server would send
 * them: removals first, then insertions and moves by ascending position,
 * as change events; the windows are not modified.
 */
function windowDiff(from, to, revision) {
  const inTo = new Map(to.map((d, i) => [d.collection, i]));
  const out = [];
  const change = (changeType, d, index) => out.push({ type: 'change', changeType, collection: d.collection, index, revision,
    data: changeType === 'removed' ? null : d.data, updateTime: changeType === 'removed' ? null : d.updateTime || null });
  for (let i = from.length - 1; i >= 0; i--) {
    if (!inTo.has(from[i].collection)) change('removed', from[i], i);
  }
  const work = from.filter((d) => inTo.has(d.collection));
  const same = (a, b) => a.updateTime === b.updateTime && JSON.stringify(a.data) === JSON.stringify(b.data);
  to.forEach((d, i) => {
    if (i < work.length && work[i].collection === d.collection) {
      if (!same(work[i], d)) change('modified', d, i);
      work[i] = d;
      return;
    }
    const j = work.findIndex((x, t) => t > i && x.collection === d.collection);
    if (j < 0) {
      change('added', d, i);
    } else {
      work.splice(j, 1);
      change('modified', d, i);
    }
    work.splice(i, 0, d);
  });
  return out;
}

function emit(cb, ev) {
  try {
    cb(ev);
  } catch (e) {
    console.error('edgebase: event listener threw', e);
  }
}

export default createClient;
