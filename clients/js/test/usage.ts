// A typed use of every method of the SDK: `tsc --noEmit --strict` checks it
// against edgebase.d.ts (TestTypes in ../node_test.go). It is never run.
import createDefault, {
  createClient, EdgebaseError, EdgebaseClient, Document, RealtimeEvent, Notification, RealtimeStatus,
  StorageAdapter, BatchWrite, LoginResult, Preferences, Query, QueryEvent, QuerySubscription,
  User, PasswordReset, OAuthProviderSummary, SessionInfo, APIKeyCreated, AuditEvent, SMTPSettingsInfo, EmailKind, AuthSettings,
  createOperator, OperatorClient, ProjectInfo, NodeStatus, Child, RulesTestResult, IndexInfo, UserSessionInfo, FCMCredentialsInfo,
  memoryAdapter, indexedDBAdapter, fileAdapter, CacheAdapter, Persistence, PendingWrite, Conflict, WriteEvents, WriteResult, Writes,
  JSONValue, JSONObject, CacheBatchOp, Trigger, TriggerDefinition, TriggerStatus, DeadLetter,
} from '../edgebase.js';

interface Note {
  title: string;
  done: boolean;
  [key: string]: string | boolean;
}

const memory = new Map<string, string>();
const storage: StorageAdapter = {
  getItem: (k) => memory.get(k) ?? null,
  setItem: (k, v) => { memory.set(k, v); },
  removeItem: (k) => { memory.delete(k); },
};

export async function everything(): Promise<void> {
  const c: EdgebaseClient = createClient({ url: 'http://localhost:8080', projectId: 'p', apiKey: 'k', storage });
  const d: EdgebaseClient = createDefault({ projectId: 'p', retries: 1, maxRetryWait: 5, timeout: 0, minBackoff: 10, maxBackoff: 100, pingInterval: 0 });
  d.close();

  // auth
  const reg = await c.auth.register('a@example.com', 'a long password', 'A');
  const id: string = reg.user.id;
  const li: LoginResult = await c.auth.login('a@example.com', 'a long password');
  if (li.requiresTotp) {
    const v = await c.auth.loginVerify(li.loginTicket, '123456');
    const t: string = v.token;
    void t;
  } else {
    const t: string = li.token;
    void t;
  }
  const me = await c.auth.me({ minRevision: 3 });
  const role: string = me.role;
  const totp: boolean = me.totpEnabled;
  const en = await c.auth.enrollAuthenticator();
  const url: string = en.otpauthUrl;
  const conf = await c.auth.confirmAuthenticator('123456');
  const codes: string[] = conf.recoveryCodes;
  const ver = await c.auth.verifyAuthenticator('a@example.com', '123456');
  await c.auth.resetPassword('a@example.com', ver.verifyToken, 'another long password');
  const cp = await c.auth.changePassword('a long password', 'another long password');
  const newToken: string = cp.token;
  await c.auth.reauthenticate('another long password', '123456');
  const off = await c.auth.disableTotp('123456');
  const f: false = off.totpEnabled;
  const tok: string | null = c.auth.token();
  const user = c.auth.user();
  const name: string | undefined = user?.name;
  const unsub: () => void = c.auth.onChange((s) => { const t: string | undefined = s?.token; void t; });
  unsub();
  const out = await c.auth.logout();
  const ok: true = out.ok;

  // db
  const doc: Document<Note> | null = await c.db.get<Note>('notes/1', { consistency: 'local', minRevision: 4 });
  const title: string | undefined = doc?.data.title;
  const set = await c.db.set<Note>('notes/1', { title: 't', done: false }, { ifMatch: 0 });
  const created: boolean = set.created;
  const rev: number = set.revision;
  const upd = await c.db.update('notes/1', { oldKey: 'title', newKey: 'name', value: 'x', type: 'string' }, { ifMatch: rev });
  const updRev: number = upd.revision;
  await c.db.update('notes/1', { oldKey: 'done', value: true });
  await c.db.deleteField('notes/1', 'name');
  const del = await c.db.delete('notes/1', { ifMatch: updRev });
  const deleted: true = del.deleted;
  const page = await c.db.list<Note>('notes', { limit: 10, pageToken: 'abc', consistency: 'strong' });
  const next: string | undefined = page.nextPageToken;
  const first: Note | undefined = page.documents[0]?.data;
  const writes: BatchWrite[] = [
    { op: 'set', collection: 'a/b', data: { x: 1 } },
    { op: 'update', collection: 'a/b', oldKey: 'x', newKey: 'y', value: 2, ifMatch: 3 },
    { op: 'delete', collection: 'a/c' },
    { op: 'deleteField', collection: 'a/b', field: 'y' },
    { op: 'increment', collection: 'a/n', field: 'k', by: 1 },
    { op: 'serverTimestamp', collection: 'a/n', field: 'at' },
    { op: 'arrayUnion', collection: 'a/n', field: 'l', values: [1] },
    { op: 'arrayRemove', collection: 'a/n', field: 'l', values: [1] },
  ];
  const batch = await c.db.batch(writes);
  const exists: boolean = batch.results[0].exists;
  const rules = await c.db.getRules();
  await c.db.setRules(rules.rules);
  const q: Query = {
    collection: 'notes',
    where: [{ field: 'done', op: '==', value: false }, { field: 'tags', op: 'array-contains-any', value: ['a', 'b'] }],
    orderBy: [{ field: 'title', direction: 'desc' }],
    limit: 20,
    select: ['title'],
  };
  const qp = await c.db.query<Note>(q, { consistency: 'strong', minRevision: 2 });
  const qFirst: Note | undefined = qp.documents[0]?.data;
  const qNext: string | undefined = qp.nextCursor;
  if (qNext) await c.db.query<Note>({ ...q, startAfter: qNext });
  const counted = await c.db.query({ collection: 'notes', collectionGroup: true, count: true });
  const n: number = counted.count;

  // realtime
  const sub = c.realtime.subscribe<Note>('notes', { prefix: true, resumeEvents: true }, (ev: RealtimeEvent<Note>) => {
    switch (ev.type) {
      case 'snapshot': {
        const docs: Document<Note>[] = ev.documents;
        void docs;
        break;
      }
      case 'change': {
        const kind: 'set' | 'delete' = ev.changeType;
        const data: Note | null = ev.data;
        void kind;
        void data;
        break;
      }
      case 'reset': {
        const r: number = ev.revision;
        void r;
        break;
      }
      case 'resumed': {
        const r: number = ev.revision;
        void r;
        break;
      }
      case 'error': {
        const e: EdgebaseError = ev.error;
        void e.code;
        break;
      }
    }
  });
  const subRev: number = sub.revision;
  sub.unsubscribe();
  const sub2 = c.realtime.subscribe('notes/1', (ev) => { void ev.type; });
  sub2.unsubscribe();
  const live: QuerySubscription<Note> = c.realtime.subscribeQuery<Note>({ collection: 'notes', orderBy: [{ field: 'title' }], limit: 10 },
    (ev: QueryEvent<Note>, docs: Document<Note>[]) => {
      if (ev.type === 'change') {
        const kind: 'added' | 'modified' | 'removed' = ev.changeType;
        const at: number = ev.index;
        const d: Note | null = ev.data;
        void kind; void at; void d;
      }
      const shown: string | undefined = docs[0]?.data.title;
      void shown;
    }, { resumeEvents: true });
  const liveDocs: Document<Note>[] = live.docs;
  const liveRev: number = live.revision;
  live.unsubscribe();
  const offNote = c.realtime.onNotification((n: Notification) => { const t: string = n.title; void t; });
  offNote();
  const offStatus = c.realtime.onStatus((s: RealtimeStatus) => {
    if (s.state === 'disconnected') { const ms: number = s.retryIn; void ms; }
  });
  offStatus();
  const state: string = c.realtime.status.state;
  c.realtime.reconnect();
  c.realtime.close();

  // push
  const dev = await c.push.register('fcm-token', 'android');
  await c.push.register('web-token');
  await c.push.unregister(dev.token);
  const devices = await c.push.devices();
  const platform: string = devices[0].platform;
  await c.push.subscribe('news');
  await c.push.unsubscribe('news');
  const topics: string[] = await c.push.topics();
  const prefs: Preferences = await c.push.getPreferences();
  await c.push.setPreferences({ quietHoursEnabled: true, quietHoursStart: '22:00', timezone: 'Europe/Paris' });
  const hist = await c.push.history({ limit: 20, cursor: '' });
  const delivered: number = hist.notifications[0].delivered;
  const sched = await c.push.schedule({ title: 'Hi', body: 'later', sendAt: '2030-01-01T00:00:00Z', target: { topic: 'news' } });
  const list = await c.push.scheduled({ limit: 5 });
  const cancelled = await c.push.cancel(list.scheduled[0]?.id ?? sched.id);
  const status: string = cancelled.status;
  const tp = await c.push.togglePush(true);
  const on: boolean = tp.pushEnabled;
  const s1 = await c.push.sendToProject({ title: 'All', body: 'b', data: { k: 'v' }, category: 'general' });
  await c.push.sendToUser(id, { title: 'You' });
  await c.push.sendToTopic('news', { title: 'News', category: 'marketing' });
  const targets: number = s1.targets;

  // errors
  try {
    await c.db.get('x');
  } catch (e) {
    if (e instanceof EdgebaseError) {
      const s: number = e.status;
      const code: string = e.code;
      const field: string | null = e.field;
      const after: number | null = e.retryAfter;
      const unknown: boolean = e.unknownOutcome;
      void [s, code, field, after, unknown];
    }
  }
  void [role, totp, url, codes, newToken, f, tok, name, ok, title, created, deleted, next, first, exists,
    subRev, state, platform, topics, prefs, delivered, on, targets, qFirst, n, liveDocs, liveRev];
}

// The accounts API: email codes and links, anonymous users, OAuth, sessions,
// and the owner's administration.
export async function accounts(c: EdgebaseClient): Promise<void> {
  const verified: boolean = (await c.auth.me()).emailVerified;
  const sent = await c.auth.sendVerification();
  const already: true | undefined = sent.alreadyVerified;
  const u1: User = await c.auth.verifyEmail({ email: 'a@example.com', code: '123456' });
  const u2: User = await c.auth.verifyEmail({ token: 'link-token' });
  await c.auth.requestPasswordReset('a@example.com');
  const reset: PasswordReset = { email: 'a@example.com', emailCode: '123456', newPassword: 'a new long password' };
  await c.auth.resetPassword(reset);
  await c.auth.resetPassword({ email: 'a@example.com', verifyToken: 'ebv_x', newPassword: 'a new long password' });
  await c.auth.requestEmailCode('a@example.com');
  const byCode: LoginResult = await c.auth.loginWithEmailCode('a@example.com', '123456');
  const byLink: LoginResult = await c.auth.loginWithEmailCode({ token: 'link-token' });
  await c.auth.resetPassword({ token: 'link-token', newPassword: 'a new long password' });
  const changedByLink: User = (await c.auth.changeEmail({ token: 'link-token' })).user;
  const codeSent: true = (await c.auth.changeEmail('b@example.com')).codeSent;
  const changed: User = (await c.auth.changeEmail('b@example.com', '123456')).user;
  const anon = await c.auth.signInAnonymously();
  const isAnon: boolean | undefined = anon.user.anonymous;
  const linked = await c.auth.linkEmail('c@example.com', 'a long password');
  const sameId: boolean = linked.user.id === anon.user.id;
  const providers: OAuthProviderSummary[] = await c.auth.oauthProviders();
  const start: string = c.auth.oauthStartUrl('google', 'https://app.example.com/done');
  const ex: LoginResult = await c.auth.oauthExchange('one-time-code');
  const linkUrl: string = (await c.auth.oauthLink('github', 'https://app.example.com/done')).url;
  const sessions: SessionInfo[] = await c.auth.listSessions();
  const current: boolean = sessions[0].current;
  await c.auth.revokeSession(sessions[0].id);
  const gone: true = (await c.auth.deleteAccount()).deleted;

  // administration
  const page = await c.admin.users.list({ query: 'a@', limit: 10, cursor: '' });
  const firstUser: User | undefined = page.users?.[0];
  const more: string = page.nextCursor;
  const one: User = await c.admin.users.get('uid');
  const disabled: boolean | undefined = (await c.admin.users.disable('uid')).user.disabled;
  await c.admin.users.enable('uid');
  await c.admin.users.revokeSessions('uid');
  await c.admin.users.delete('uid');
  const key: APIKeyCreated = await c.admin.keys.create('ci');
  const secret: string = key.key;
  const keys = await c.admin.keys.list();
  const prefix: string = keys[0].prefix;
  await c.admin.keys.delete(key.id);
  const audit = await c.admin.audit.list({ limit: 20, userId: 'uid', type: 'login' });
  const ev: AuditEvent | undefined = audit.events?.[0];
  const smtp: SMTPSettingsInfo | null = await c.admin.smtp.get();
  const set = await c.admin.smtp.set({ host: 'smtp.example.com', port: 587, username: 'u', password: 'p', from: 'noreply@example.com', fromName: 'App', security: 'starttls' });
  const pwSet: boolean = set.passwordSet;
  await c.admin.smtp.delete();
  const templates = await c.admin.emailTemplates.list();
  const custom: boolean = templates['sign-in-code'].custom;
  const kind: EmailKind = 'verification';
  await c.admin.emailTemplates.set(kind, { subject: 'Your code', text: 'Code: {{.Code}}', html: '<p>{{.Code}}</p>' });
  await c.admin.emailTemplates.reset('password-reset');
  const settings: AuthSettings = await c.admin.authSettings.get();
  const anonOn: boolean = (await c.admin.authSettings.set({ anonymousSignIn: false })).anonymousSignIn;
  const listed: OAuthProviderSummary[] = await c.admin.oauthProviders.list();
  const prov = await c.admin.oauthProviders.set('corp', { clientId: 'id', clientSecret: 's', issuer: 'https://id.example.com', redirectUrls: ['https://app.example.com/done'] });
  const secretSet: boolean = prov.secretSet;
  const got = await c.admin.oauthProviders.get('corp');
  const issuer: string = got.issuer;
  await c.admin.oauthProviders.delete('corp');
  void [verified, already, u1, u2, byCode, byLink, changedByLink, codeSent, changed, isAnon, sameId, providers, start, ex, linkUrl, current, gone,
    firstUser, more, one, disabled, secret, prefix, ev, smtp, pwSet, custom, settings, anonOn, listed, secretSet, issuer];
}

// The console's additions: the owner's tools and the operator client.
export async function consoleAdditions(c: EdgebaseClient): Promise<void> {
  const page = await c.db.children('users', { limit: 10, pageToken: 't', consistency: 'local' });
  const child: Child = page.children[0];
  const hasDoc: boolean = child.document;
  const next: string | undefined = page.nextPageToken;
  const root = await c.db.children('');
  const t: RulesTestResult = await c.db.testRules({ op: 'write', path: 'notes/n1', userId: 'uid', data: { title: 'x' },
    rules: [{ match: 'notes/{id}', read: 'true', write: 'auth != null' }] });
  const allowed: boolean = t.allowed;
  const ruleIndex: number = t.rule;
  const uid: string | undefined = t.auth?.uid;
  await c.db.testRules({ op: 'read', path: 'notes/n1' });
  const ix = await c.db.getIndexes({ consistency: 'strong' });
  const first: IndexInfo = ix.indexes[0];
  const state: string = first.state;
  const setIx = await c.db.setIndexes([{ collection: 'orders', fields: [{ field: 'status' }, { field: 'at', direction: 'desc' }] },
    { collection: 'notes', collectionGroup: true, fields: [{ field: 'at' }] }]);
  const ixRev: number | undefined = setIx.revision;
  const role: string = (await c.admin.users.setRole('uid', 'owner')).user.role;
  const sessions: UserSessionInfo[] = await c.admin.users.sessions('uid');
  await c.admin.users.revokeSession('uid', sessions[0].id);
  const devices = await c.push.devices({ userId: 'uid' });
  const topics: string[] = await c.push.topics({ userId: 'uid' });
  const pt = await c.push.projectTopics();
  const subs: number = pt[0].subscribers;
  const on: boolean = (await c.push.pushEnabled()).pushEnabled;
  const creds: FCMCredentialsInfo = await c.push.getCredentials();
  await c.push.setCredentials({ type: 'service_account', project_id: 'p' });
  const setCreds = await c.push.setCredentials('{"type":"service_account"}');
  const credRev: number | undefined = setCreds.revision;

  const op: OperatorClient = createOperator({ url: 'http://localhost:8080', adminToken: 'tok', timeout: 1000, retries: 1 });
  const projects = await op.projects.list({ limit: 50, cursor: '' });
  const p0: ProjectInfo = projects.projects[0];
  const lastRev: number | undefined = p0.lastWrite?.revision;
  const nextCursor: string = projects.nextCursor;
  const created = await op.projects.create({ name: 'n', ownerEmail: 'o@example.com', ownerPassword: 'a long password' });
  const apiKey: string = created.apiKey;
  await op.projects.setOwner(created.projectId, 'o@example.com');
  const st = await op.cluster.status();
  const n0: NodeStatus = st.nodes[0];
  const applied: number = n0.appliedIndex;
  const leader: string = (await op.cluster.transferLeadership('n2')).leader;
  await op.cluster.transferLeadership();
  const removed: string = (await op.cluster.removeNode('n3')).removed;
  const b = await op.backup();
  const size: number = b.blob.size;
  const name: string = b.filename;
  const bRev: number | null = b.revision;
  const text: string = await op.metrics();
  void [hasDoc, next, root, allowed, ruleIndex, uid, state, ixRev, role, devices, topics, subs, on, creds, credRev,
    lastRev, nextCursor, apiKey, applied, leader, removed, size, name, bRev, text];
}

// Offline-first (issue 21): the persistent cache, the write queue, conflicts.
export async function offline(): Promise<void> {
  // Every form of the persistence option.
  const forms: Persistence[] = ['memory', 'indexeddb', 'file:/tmp/cache', memoryAdapter(), { adapter: fileAdapter('/tmp/cache') },
    indexedDBAdapter('edgebase:p:http://localhost:8080')];
  // An adapter of one's own, with the optional lock.
  const kv = new Map<string, JSONValue>();
  let held: Promise<unknown> = Promise.resolve();
  const mine: CacheAdapter = {
    get: async (k) => kv.get(k),
    set: async (k, v) => { kv.set(k, JSON.parse(JSON.stringify(v))); },
    delete: async (k) => { kv.delete(k); },
    keys: async (prefix) => [...kv.keys()].filter((k) => k.startsWith(prefix)).sort(),
    lock: (name, fn, opts) => {
      const run = held.then(() => {
        if (opts?.signal?.aborted) throw new Error('aborted');
        return fn();
      });
      held = run.catch(() => undefined);
      void name;
      return run;
    },
  };
  const noLock: CacheAdapter = { get: mine.get, set: mine.set, delete: mine.delete, keys: mine.keys };
  const bulk: CacheAdapter = {
    ...noLock,
    entries: async (prefix) => [...kv.entries()].filter(([k]) => k.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : 1)),
    batch: async (ops: CacheBatchOp[]) => {
      for (const o of ops) {
        if (o.delete) kv.delete(o.key);
        else kv.set(o.key, o.value);
      }
    },
  };
  const many = await bulk.entries?.('d:');
  await bulk.batch?.([{ key: 'd:x', value: { v: 1 } }, { key: 'd:y', delete: true }]);
  const stored: JSONValue | undefined = await noLock.get('d:notes/1');
  const c = createClient({ url: 'http://localhost:8080', projectId: 'p', persistence: { adapter: mine }, minBackoff: 50, maxBackoff: 1000 });
  const f = createClient({ projectId: 'p', persistence: 'file:./cache' });
  const named = createClient({ projectId: 'p', persistence: { adapter: noLock, name: 'shared' } });
  named.close();
  f.close();

  // Reads: the source option, fromCache and pendingWrites.
  const cached: Document<Note> | null = await c.db.get<Note>('notes/1', { source: 'cache' });
  const fromCache: boolean | undefined = cached?.fromCache;
  const pendingDoc: boolean | undefined = cached?.pendingWrites;
  await c.db.get('notes/1', { source: 'server', consistency: 'strong' });
  await c.db.get('notes/1', { source: 'default' });
  const page = await c.db.list<Note>('notes', { source: 'cache', limit: 20 });
  const pageFromCache: boolean | undefined = page.fromCache;
  const pagePending: boolean | undefined = page.documents[0]?.pendingWrites;
  const qOff = await c.db.query<Note>({ collection: 'notes', where: [{ field: 'done', op: '==', value: false }] }, { source: 'cache' });
  const qFromCache: boolean | undefined = qOff.fromCache;
  const qCount = await c.db.query({ collection: 'notes', count: true }, { source: 'default' });
  const countFromCache: boolean | undefined = qCount.fromCache;

  // Writes: queued with a base, blind, or with an explicit ifMatch.
  const set = await c.db.set<Note>('notes/1', { title: 't', done: false });
  const setCreated: boolean = set.created;
  await c.db.set('notes/2', { title: 'x' }, { blind: true });
  await c.db.update('notes/1', { oldKey: 'done', value: true }, { blind: true });
  await c.db.deleteField('notes/1', 'title', { ifMatch: set.revision });
  await c.db.delete('notes/2', { blind: true });
  await c.flush();

  // The queue.
  const w: Writes = c.writes;
  const pending: PendingWrite[] = await w.pending();
  const p0: PendingWrite | undefined = pending[0];
  if (p0) {
    const op: 'set' | 'update' | 'deleteField' | 'delete' = p0.op;
    const base: number | null = p0.ifMatch;
    const st: 'queued' | 'sending' | 'uncertain' | 'conflict' = p0.state;
    const at: string = p0.createdAt;
    const oldKey: string | undefined = p0.change?.oldKey;
    const data: JSONObject | undefined = p0.data;
    const field: string | undefined = p0.field;
    const srv: Document | null | undefined = p0.server;
    void [op, base, st, at, oldKey, data, field, srv];
  }
  const offConflict = w.on('conflict', async (cf: Conflict) => {
    const mineNow: Note | undefined = (cf.local?.data as Note | undefined);
    const theirs: number | undefined = cf.server?.revision;
    const path: string = cf.path;
    const write: PendingWrite = cf.write;
    void [mineNow, theirs, path, write, cf.id];
    if (cf.server === null) await cf.retry(null);
    else if (cf.write.op === 'set') await cf.retry({ title: 'merged', done: true });
    else if (cf.write.op === 'update') await cf.retry();
    else await cf.discard();
  });
  const offAcked = w.on('acked', (ev: WriteEvents['acked']) => {
    const r: WriteResult = ev.result;
    const rev: number = r.revision ?? 0;
    const id: string = ev.write.id;
    void [rev, id];
  });
  const offRejected = w.on('rejected', ({ write, error }) => {
    const code: string = error.code;
    const path: string = write.path;
    void [code, path];
  });
  const offChange = w.on('change', ({ pending: n, conflicts: k }) => {
    const total: number = n + k;
    void total;
  });
  offConflict(); offAcked(); offRejected(); offChange();
  const conflicts: Conflict[] = await w.conflicts();
  for (const cf of conflicts) await cf.discard();
  await w.settled();
  w.replay();
  const leader: boolean = w.leader;

  // A conflict as the write's own promise sees it.
  try {
    await c.db.set('notes/3', { title: 'y' }, { ifMatch: 4 });
  } catch (e) {
    if (e instanceof EdgebaseError && e.conflict) {
      const again: WriteResult = await e.conflict.retry();
      void again;
    }
  }

  // Subscriptions: served from the cache, local changes marked.
  const sub = c.realtime.subscribe<Note>('notes', { prefix: true }, (ev) => {
    if (ev.type === 'snapshot') {
      const fc: boolean | undefined = ev.fromCache;
      const pw: boolean | undefined = ev.documents[0]?.pendingWrites;
      void [fc, pw];
    } else if (ev.type === 'change') {
      const pw: boolean | undefined = ev.pendingWrites;
      const local: boolean | undefined = ev.local;
      const at: string | null = ev.updateTime;
      void [pw, local, at];
    }
  });
  sub.unsubscribe();
  await c.close();
  void [qFromCache, countFromCache];
  void [forms, stored, many, fromCache, pendingDoc, pageFromCache, pagePending, setCreated, leader];
}

export async function triggers(c: EdgebaseClient): Promise<void> {
  const def: TriggerDefinition = {
    match: 'orders/{id}', on: ['create', 'update'], condition: 'after.total > 100',
    action: { webhook: { url: 'https://hooks.example.com/orders', headers: { 'X-Team': 'shop' } } },
  };
  const put = await c.triggers.put('orders-hook', def);
  const created: boolean = put.created;
  const secret: string | undefined = put.trigger.action.webhook?.secret;
  const rev: number | null = put.revision;
  await c.triggers.put('notify-seller', {
    match: 'orders/{id}', on: ['create'],
    action: { push: { to: 'user', userIdFrom: 'after.sellerId', title: 'New order', body: 'Order {{ params.id }}', data: { id: '{{ params.id }}' } } },
  });
  await c.triggers.put('count-orders', {
    match: 'orders/{id}', on: ['create'], disabled: true,
    action: { write: { op: 'increment', collection: 'stats/orders', field: 'count', by: 1 } },
  });
  const all: Trigger[] = await c.triggers.list();
  const one: Trigger | null = await c.triggers.get('orders-hook');
  const st: TriggerStatus | undefined = one?.status;
  const lag: number = st ? st.lagRevisions + st.cursor + st.pending + st.deadLetters + st.delivered + st.failed : 0;
  const lastError: string | undefined = st?.lastError;
  const page = await c.triggers.deadLetters('orders-hook', { limit: 10 });
  const dead: DeadLetter[] = page.deadLetters;
  const next: string | undefined = page.nextPageToken;
  const more = next ? await c.triggers.deadLetters('orders-hook', { pageToken: next }) : page;
  const r1 = await c.triggers.replay('orders-hook', dead.map((d) => d.id));
  const r2 = await c.triggers.replay('orders-hook');
  const replayed: number = r1.replayed + r2.replayed;
  const del = await c.triggers.delete('count-orders');
  const deleted: true = del.deleted;
  void [created, secret, rev, all, lag, lastError, more, replayed, deleted, dead[0]?.after, dead[0]?.attempts];
}

export function session(): void {
  const a = createClient({ url: 'http://us.example', projectId: 'p' });
  const b = createClient({ url: 'http://ap.example', projectId: 'p', sessionRevision: a.sessionRevision });
  const off = createClient({ url: 'http://ap.example', projectId: 'p', session: false });
  const r: number = b.observeRevision(42) + off.sessionRevision;
  void r;
}
