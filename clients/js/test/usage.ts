// A typed use of every method of the SDK: `tsc --noEmit --strict` checks it
// against edgebase.d.ts (TestTypes in ../node_test.go). It is never run.
import createDefault, {
  createClient, EdgebaseError, EdgebaseClient, Document, RealtimeEvent, Notification, RealtimeStatus,
  StorageAdapter, BatchWrite, LoginResult, Preferences, Query, QueryEvent, QuerySubscription,
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
