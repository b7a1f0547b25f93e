// Offline writes (issue 21, slice 2): the write queue of the SDK with the
// file adapter, against a real node. The network is cut per client by a
// fetch wrapper the test controls (fail before sending: offline; forward
// and then throw: the answer was lost) and a WebSocket wrapper.
import { test } from 'node:test';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import {
  assert, client, createClient, env, EdgebaseError, fast, owner, PASSWORD, record, rejectsWith, restartNode, tempDir, unique, waitFor,
  writerFor, WS,
} from './helpers.mjs';

/** Removes dir, again while a closed client's last cache write may still land in it; never throws. */
async function removeDir(dir) {
  const end = Date.now() + 3000;
  for (;;) {
    await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 20 }).catch(() => {});
    if (!existsSync(dir) || Date.now() > end) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A localStorage stand-in shared by the clients ("tabs", restarts) of one test, so they share the session. */
function sharedSessionStore() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => { m.set(k, String(v)); },
    removeItem: (k) => { m.delete(k); },
  };
}

/** The document path a request of /api/db is about (body or query), or null. */
function collectionOf(url, init) {
  const u = new URL(url);
  if (!u.pathname.endsWith('/api/db')) return null;
  if (u.searchParams.has('collection')) return u.searchParams.get('collection');
  if (init && typeof init.body === 'string') {
    try {
      return JSON.parse(init.body).collection || null;
    } catch (_) {
      return null;
    }
  }
  return null;
}

/**
 * The network of one client, controlled by the test: fetch and WebSocket
 * for createClient. offline() makes every request fail before it is sent
 * and closes the realtime connection (unless realtime: false); loseNext(pred)
 * sends the next matching request and then throws as if the answer were
 * lost, and goes offline; dropNext(pred) fails the next matching request
 * without sending it, and goes offline; answerNext(pred, status, body,
 * forward) answers the next matching request itself (after sending it when
 * forward). log holds every request: {method, url, collection, outcome}
 * with outcome 'sent', 'offline', 'lost', 'dropped' or 'faked'.
 */
function network() {
  const real = globalThis.fetch.bind(globalThis);
  const st = { offline: false, wsBlocked: false, lose: null, drop: null, fake: null };
  const log = [];
  const sockets = new Set();
  const goOffline = (realtime = true) => {
    st.offline = true;
    if (realtime) {
      st.wsBlocked = true;
      for (const s of [...sockets]) s._cut();
    }
  };
  async function netFetch(url, init = {}) {
    const e = { method: (init.method || 'GET').toUpperCase(), url: String(url), collection: collectionOf(url, init), outcome: 'sent' };
    log.push(e);
    if (st.offline) {
      e.outcome = 'offline';
      throw new TypeError('fetch failed (the test cut the network)');
    }
    if (st.drop && st.drop(e)) {
      st.drop = null;
      e.outcome = 'dropped';
      goOffline(false);
      throw new TypeError('fetch failed (the test dropped the request)');
    }
    if (st.lose && st.lose(e)) {
      st.lose = null;
      e.outcome = 'lost';
      const r = await real(url, init);
      e.status = r.status;
      await r.text();
      goOffline(false);
      throw new TypeError('fetch failed (the test lost the answer)');
    }
    if (st.fake && st.fake.pred(e)) {
      const f = st.fake;
      st.fake = null;
      e.outcome = 'faked';
      if (f.forward) {
        const r = await real(url, init);
        e.status = r.status;
        await r.text();
      }
      return new Response(JSON.stringify(f.body), { status: f.status, headers: { 'Content-Type': 'application/json', ...(f.headers || {}) } });
    }
    const r = await real(url, init);
    e.status = r.status;
    return r;
  }
  class NetWebSocket {
    constructor(url) {
      const ws = new WS(st.wsBlocked ? 'ws://127.0.0.1:9/' : url);
      this._real = ws;
      this._dead = false;
      this.onopen = this.onmessage = this.onerror = this.onclose = null;
      sockets.add(this);
      ws.onopen = (e) => { if (!this._dead && this.onopen) this.onopen(e); };
      ws.onmessage = (e) => { if (!this._dead && this.onmessage) this.onmessage(e); };
      ws.onerror = (e) => { if (!this._dead && this.onerror) this.onerror(e); };
      ws.onclose = (e) => {
        sockets.delete(this);
        if (!this._dead && this.onclose) this.onclose(e);
      };
    }
    get readyState() { return this._dead ? 3 : this._real.readyState; }
    send(d) { if (!this._dead) this._real.send(d); }
    close(code, reason) {
      try {
        this._real.close(code, reason);
      } catch (_) {
        this._real.close();
      }
    }
    /** The connection dies now: the client hears a close, nothing more arrives. */
    _cut() {
      if (this._dead) return;
      this._dead = true;
      sockets.delete(this);
      try {
        this._real.close();
      } catch (_) {
        // already closed
      }
      if (this.onclose) this.onclose({ code: 1006, reason: 'cut by the test' });
    }
  }
  return {
    fetch: netFetch,
    WebSocket: NetWebSocket,
    log,
    offline({ realtime = true } = {}) { goOffline(realtime); },
    online() {
      st.offline = false;
      st.wsBlocked = false;
    },
    loseNext(pred) { st.lose = pred; },
    dropNext(pred) { st.drop = pred; },
    answerNext(pred, status, body, forward = false, headers) { st.fake = { pred, status, body, forward, headers }; },
    /** The requests that may have reached the node that write path. */
    writesTo(path) { return log.filter((e) => e.method !== 'GET' && e.collection === path && e.outcome !== 'offline' && e.outcome !== 'dropped'); },
    readsOf(path) { return log.filter((e) => e.method === 'GET' && e.collection === path && e.outcome === 'sent'); },
  };
}

/** A user registered with the given session storage. */
async function register(storage) {
  const c = client({ storage });
  const email = unique('user') + '@example.com';
  const r = await c.auth.register(email, PASSWORD, 'Offline Writer');
  c.close();
  return { email, user: r.user };
}

/** A client of the project on the file cache dir, signed in through storage, on net. */
function persisted(dir, storage, net, extra = {}) {
  return createClient({
    url: env.url, projectId: env.projectId, apiKey: env.apiKey, ...fast, retries: 0,
    storage, fetch: net.fetch, WebSocket: net.WebSocket, persistence: 'file:' + dir, ...extra,
  });
}

/** Fails after ms unless p settles. */
function within(p, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** Follows a write's promise without awaiting it (offline it stays pending). */
function track(p) {
  const t = { state: 'pending', value: undefined, error: undefined, p };
  p.then((v) => { t.state = 'resolved'; t.value = v; }, (e) => { t.state = 'rejected'; t.error = e; });
  return t;
}

/** Records the events of client.writes. */
function writeEvents(c) {
  const ev = { acked: [], conflict: [], rejected: [], change: [] };
  for (const type of Object.keys(ev)) c.writes.on(type, (x) => ev[type].push(x));
  return ev;
}

const dataOf = (d) => (d ? d.data : null);

/** The server's documents below base, as {path: data}. */
async function serverState(w, base) {
  const out = {};
  const page = await w.db.list(base, { limit: 1000 });
  for (const d of page.documents) out[d.collection] = d.data;
  return out;
}

/** Fails unless the local view (source: 'cache') of every path equals the server's document, without pendingWrites. */
async function assertCacheIsServer(c, w, paths) {
  for (const p of paths) {
    const [local, server] = [await c.db.get(p, { source: 'cache' }), await w.db.get(p)];
    if (server === null) {
      assert.equal(local, null, `${p}: the cache holds ${JSON.stringify(local)}, the server nothing`);
      continue;
    }
    assert.ok(local, `${p}: not in the cache`);
    assert.deepEqual(local.data, server.data, p);
    assert.equal(local.revision, server.revision, p);
    assert.ok(!local.pendingWrites, `${p}: pendingWrites after the queue emptied`);
  }
}

/** One client on a fresh file cache, its network, a writer of the same user, and a base path. */
async function setup(name) {
  const dir = await tempDir('edgebase-writes-');
  const storage = sharedSessionStore();
  const { email, user } = await register(storage);
  const net = network();
  const a = persisted(dir, storage, net);
  const w = await writerFor(email);
  const closers = [a, w];
  const dirs = [dir];
  return {
    dir, storage, email, user, net, a, w, base: `users/${user.id}/${name}`,
    open(n, extra, on = dir, session = storage) {
      const c = persisted(on, session, n, extra);
      closers.push(c);
      return c;
    },
    /** Another cache dir, removed by done(). */
    async tempDir() {
      const d = await tempDir('edgebase-writes-');
      dirs.push(d);
      return d;
    },
    async done() {
      for (const c of closers) {
        await within(c.flush(), 5000, 'flush').catch(() => {});
        c.close();
      }
      for (const d of dirs) await removeDir(d);
    },
  };
}

test('50 offline edits, 5 changed meanwhile by someone else: 45 acked, 5 conflicts resolved by retry, retry(data), retry(null) and discard; the cache ends equal to the server', async () => {
  const s = await setup('fifty');
  try {
    const { a, w, net, base } = s;
    const path = (i) => `${base}/d${String(i).padStart(2, '0')}`;
    const all = Array.from({ length: 50 }, (_, i) => path(i));
    const created = await w.db.batch(all.map((p, i) => ({ op: 'set', collection: p, data: { n: i, v: 0 } })));
    const page = await a.db.list(base, { limit: 100 });
    assert.equal(page.documents.length, 50);
    const ev = writeEvents(a);

    net.offline();
    const edits = all.map((p, i) => (i % 2 === 0
      ? track(a.db.set(p, { n: i, v: 1, by: 'a' }))
      : track(a.db.update(p, { oldKey: 'v', value: 1 }))));
    const mine = (i) => (i % 2 === 0 ? { n: i, v: 1, by: 'a' } : { n: i, v: 1 });

    // The local view shows every edit at once, on the server's revision.
    for (const i of [0, 1, 49]) {
      const d = await a.db.get(path(i), { source: 'cache' });
      assert.deepEqual(d.data, mine(i));
      assert.equal(d.pendingWrites, true);
      assert.equal(d.revision, created.revision);
    }
    const offlineGet = await a.db.get(path(7));
    assert.equal(offlineGet.fromCache, true);
    assert.equal(offlineGet.pendingWrites, true);
    assert.deepEqual(offlineGet.data, mine(7));
    const queued = await a.writes.pending();
    assert.deepEqual(queued.map((q) => q.path), all);
    assert.deepEqual(queued.map((q) => q.op), all.map((_, i) => (i % 2 === 0 ? 'set' : 'update')));
    assert.ok(queued.every((q) => q.ifMatch === created.revision), 'each write is based on the revision the cache knew');
    assert.ok(queued.every((q) => q.state === 'queued' || q.state === 'uncertain'), queued.map((q) => q.state).join());
    assert.ok(queued.every((q) => typeof q.id === 'string' && !Number.isNaN(Date.parse(q.createdAt))));
    assert.equal(new Set(queued.map((q) => q.id)).size, 50);
    assert.ok(edits.every((t) => t.state === 'pending'), 'offline, no promise settles');

    // Someone else changes 5 of them meanwhile.
    const hit = [3, 10, 17, 30, 44];
    const theirs = {};
    for (const i of hit) theirs[i] = await w.db.set(path(i), { n: i, v: 0, w: 1 });

    net.online();
    a.writes.replay();
    await within(a.writes.settled(), 30000, 'settled after going online');
    assert.deepEqual(ev.change[ev.change.length - 1], { pending: 5, conflicts: 5 });
    assert.equal(ev.acked.length, 45, `acked ${ev.acked.length}`);
    assert.equal(ev.conflict.length, 5, `conflicts ${ev.conflict.length}`);
    assert.deepEqual(ev.acked.map((x) => x.write.path).sort(), all.filter((_, i) => !hit.includes(i)));
    await waitFor(() => edits.every((t) => t.state !== 'pending'), 5000, 'every promise settled');
    for (let i = 0; i < 50; i++) {
      const t = edits[i];
      if (!hit.includes(i)) {
        assert.equal(t.state, 'resolved', `${path(i)}: ${t.error}`);
        assert.equal(t.value.collection, path(i));
        assert.deepEqual(t.value.data, mine(i));
        assert.ok(t.value.revision > created.revision);
        if (i % 2 === 0) assert.equal(t.value.created, false);
        continue;
      }
      assert.equal(t.state, 'rejected', path(i));
      assert.ok(t.error instanceof EdgebaseError);
      assert.equal(t.error.status, 412);
      assert.equal(t.error.code, 'precondition_failed');
      assert.equal(t.error.conflict.path, path(i));
    }
    const conflicts = await a.writes.conflicts();
    assert.deepEqual(conflicts.map((c) => c.path), hit.map(path));
    for (const c of conflicts) {
      const i = Number(c.path.slice(-2));
      assert.equal(c.write.state, 'conflict');
      assert.equal(c.write.path, c.path);
      assert.deepEqual(c.server.data, { n: i, v: 0, w: 1 });
      assert.equal(c.server.revision, theirs[i].revision);
      // local: the local view now, i.e. the write applied to their version.
      assert.deepEqual(c.local.data, i % 2 === 0 ? mine(i) : { n: i, v: 1, w: 1 });
      assert.deepEqual(c.write.server.data, { n: i, v: 0, w: 1 });
    }
    assert.deepEqual(ev.conflict.map((c) => c.path), hit.map(path));
    // A conflict stays in the queue; its path still shows the local version.
    assert.equal((await a.writes.pending()).length, 5);
    const local3 = await a.db.get(path(3), { source: 'cache' });
    assert.deepEqual(local3.data, { n: 3, v: 1, w: 1 });
    assert.equal(local3.revision, theirs[3].revision);
    assert.equal(local3.pendingWrites, true);
    // The server holds the 45 edits and their 5 changes.
    const mid = await serverState(w, base);
    for (let i = 0; i < 50; i++) assert.deepEqual(mid[path(i)], hit.includes(i) ? { n: i, v: 0, w: 1 } : mine(i), path(i));

    const byPath = Object.fromEntries(conflicts.map((c) => [c.path, c]));
    const r3 = await byPath[path(3)].retry(); // the update again, on their version
    assert.deepEqual(r3.data, { n: 3, v: 1, w: 1 });
    const r10 = await byPath[path(10)].retry({ n: 10, v: 1, by: 'a', w: 1 }); // merged
    assert.deepEqual(r10.data, { n: 10, v: 1, by: 'a', w: 1 });
    assert.equal(r10.created, false);
    await byPath[path(17)].discard();
    const r30 = await byPath[path(30)].retry(); // the set again
    assert.deepEqual(r30.data, mine(30));
    const r44 = await byPath[path(44)].retry(null); // delete it
    assert.equal(r44.deleted, true);
    await within(a.writes.settled(), 10000, 'settled after resolving');
    assert.deepEqual(await a.writes.pending(), []);
    assert.deepEqual(await a.writes.conflicts(), []);
    assert.deepEqual(ev.change[ev.change.length - 1], { pending: 0, conflicts: 0 });

    const want = {};
    for (let i = 0; i < 50; i++) if (i !== 44) want[path(i)] = mine(i);
    want[path(3)] = { n: 3, v: 1, w: 1 };
    want[path(10)] = { n: 10, v: 1, by: 'a', w: 1 };
    want[path(17)] = { n: 17, v: 0, w: 1 };
    assert.deepEqual(await serverState(w, base), want);
    await assertCacheIsServer(a, w, all);
    // Each write reached the node once (the retries are new writes of their own).
    for (let i = 0; i < 50; i++) assert.equal(net.writesTo(path(i)).length, hit.includes(i) && i !== 17 ? 2 : 1, path(i));
  } finally {
    await s.done();
  }
});

test('a restart with writes queued: the new client lists them, then each lands once', async () => {
  const s = await setup('restart');
  try {
    const { a, w, base, net } = s;
    await w.db.set(base + '/up', { v: 0, keep: true });
    await w.db.set(base + '/gone', { v: 0 });
    await a.db.list(base);
    const r = record(w, base, { prefix: true });
    await r.until((ev) => ev.length >= 1, 10000, 'the oracle snapshot');

    net.offline();
    a.db.set(base + '/new', { v: 1 }).catch(() => {});
    a.db.update(base + '/up', { oldKey: 'v', value: 1 }).catch(() => {});
    a.db.delete(base + '/gone').catch(() => {});
    a.db.set(base + '/twice', { v: 1 }).catch(() => {});
    a.db.update(base + '/twice', { oldKey: 'v', value: 2 }).catch(() => {});
    const before = await a.writes.pending();
    assert.equal(before.length, 5);
    await a.flush();
    a.close();

    const net2 = network();
    net2.offline();
    const b = s.open(net2);
    const ev = writeEvents(b);
    const after = await b.writes.pending();
    assert.deepEqual(after.map((q) => [q.id, q.op, q.path]), before.map((q) => [q.id, q.op, q.path]));
    assert.deepEqual(after[0].data, { v: 1 });
    assert.deepEqual(after[1].change && after[1].change.value, 1);
    assert.deepEqual((await b.db.get(base + '/twice', { source: 'cache' })).data, { v: 2 });
    assert.equal(await b.db.get(base + '/gone', { source: 'cache' }), null);

    net2.online();
    b.writes.replay();
    await within(b.writes.settled(), 20000, 'settled');
    assert.deepEqual(ev.acked.map((x) => x.write.id), before.map((q) => q.id));
    assert.deepEqual(await b.writes.pending(), []);
    assert.deepEqual(await serverState(w, base), {
      [base + '/new']: { v: 1 }, [base + '/twice']: { v: 2 }, [base + '/up']: { v: 1, keep: true },
    });
    // Fence: a later write of the oracle arrives after every change of the queue.
    const fence = await w.db.set(base + '/fence', { f: 1 });
    await r.until((evs) => evs.some((e) => e.type === 'change' && e.revision === fence.revision), 10000, 'the fence');
    const count = (p) => r.changes().filter((e) => e.collection === base + p).length;
    assert.deepEqual(['/new', '/up', '/gone', '/twice'].map(count), [1, 1, 1, 2]);
    await assertCacheIsServer(b, w, ['/new', '/up', '/gone', '/twice'].map((p) => base + p));
  } finally {
    await s.done();
  }
});

test('uncertain: the answer of an applied write is lost, the client restarts, reads, acks it and sends nothing again', async () => {
  const s = await setup('lost');
  try {
    const { w, base } = s;
    const p = base + '/doc';
    const q = base + '/blind';
    const v0 = await w.db.set(p, { v: 0 });
    await s.a.db.get(p);
    const r = record(w, base, { prefix: true });
    await r.until((ev) => ev.length >= 1, 10000, 'the oracle snapshot');

    /** c makes the write, its answer is lost (the node applied it), c stops; a new client takes over. */
    const loseAndRestart = async (c, net, path, write) => {
      net.loseNext((e) => e.method !== 'GET' && e.collection === path);
      const t = track(write(c));
      await waitFor(() => r.changes().some((e) => e.collection === path), 10000, 'the node applied it');
      await waitFor(async () => {
        const ws = await c.writes.pending();
        return ws.length === 1 && ws[0].state === 'uncertain';
      }, 10000, 'the lost write uncertain');
      assert.equal(t.state, 'pending');
      assert.equal(net.writesTo(path).length, 1);
      await c.flush();
      c.close();
      const net2 = network();
      const next = s.open(net2);
      const ev = writeEvents(next);
      await waitFor(() => ev.acked.length >= 1, 20000, 'acked after the restart');
      await within(next.writes.settled(), 10000, 'settled');
      assert.deepEqual(ev.acked.map((x) => x.write.path), [path]);
      assert.equal(net2.writesTo(path).length, 0, 'the applied write is not sent again');
      assert.ok(net2.readsOf(path).length >= 1, 'it read the document');
      assert.deepEqual(ev.conflict, []);
      return { next, net2, ev };
    };

    // Round 1: an update based on the revision the cache knew.
    const one = await loseAndRestart(s.a, s.net, p, (c) => c.db.update(p, { oldKey: 'v', value: 1 }));
    const applied = r.changes().find((e) => e.collection === p);
    assert.deepEqual(applied.data, { v: 1 });
    assert.equal(one.ev.acked[0].result.revision, applied.revision);
    assert.deepEqual(one.ev.acked[0].result.data, { v: 1 });
    // Round 2: a set of a path never seen (no base).
    const two = await loseAndRestart(one.next, one.net2, q, (c) => c.db.set(q, { b: 1 }));
    assert.deepEqual(two.ev.acked[0].result.data, { b: 1 });

    const fence = await w.db.set(base + '/fence', { f: 1 });
    await r.until((evs) => evs.some((e) => e.type === 'change' && e.revision === fence.revision), 10000, 'the fence');
    assert.equal(r.changes().filter((e) => e.collection === p).length, 1);
    assert.equal(r.changes().filter((e) => e.collection === q).length, 1);
    const now = await w.db.get(p);
    assert.equal(now.revision, applied.revision, 'the document did not move a second time');
    assert.ok(now.revision > v0.revision);
    await assertCacheIsServer(two.next, w, [p, q]);
  } finally {
    await s.done();
  }
});

test('uncertain: the write never reached the node; after the restart it is read, then sent once', async () => {
  const s = await setup('dropped');
  try {
    const { a, w, base, net } = s;
    const p = base + '/doc';
    await w.db.set(p, { v: 0 });
    await a.db.get(p);
    const r = record(w, base, { prefix: true });
    await r.until((ev) => ev.length >= 1, 10000, 'the oracle snapshot');

    net.dropNext((e) => e.method !== 'GET' && e.collection === p);
    a.db.set(p, { v: 2 }).catch(() => {});
    await waitFor(() => net.log.some((e) => e.outcome === 'dropped'), 10000, 'the dropped request');
    await waitFor(async () => (await a.writes.pending())[0].state !== 'sending', 10000, 'the failure handled');
    await a.flush();
    const state = (await a.writes.pending())[0].state;
    a.close();

    const net2 = network();
    const b = s.open(net2);
    const ev = writeEvents(b);
    await waitFor(() => ev.acked.length >= 1, 20000, 'acked after the restart');
    const sent = net2.writesTo(p);
    assert.equal(sent.length, 1, 'sent once');
    if (state === 'uncertain') {
      // Uncertain: read first, saw the document at the write's base, sent it.
      const read = net2.readsOf(p)[0];
      assert.ok(read && net2.log.indexOf(read) < net2.log.indexOf(sent[0]), 'read before sending again');
    }
    assert.deepEqual((await w.db.get(p)).data, { v: 2 });
    const fence = await w.db.set(base + '/fence', { f: 1 });
    await r.until((evs) => evs.some((e) => e.type === 'change' && e.revision === fence.revision), 10000, 'the fence');
    assert.equal(r.changes().filter((e) => e.collection === p).length, 1);
    await assertCacheIsServer(b, w, [p]);
  } finally {
    await s.done();
  }
});

test('a 503 "may or may not have been applied" is settled by a read; a 429 is retried; each lands once', async () => {
  const s = await setup('unknown');
  try {
    const { a, w, base, net } = s;
    const p = base + '/maybe';
    const q = base + '/limited';
    await w.db.set(p, { v: 0 });
    await a.db.get(p);
    const ev = writeEvents(a);
    net.answerNext((e) => e.method !== 'GET' && e.collection === p, 503,
      { error: { code: 'unavailable', message: 'the write may or may not have been applied' } }, true);
    const t = track(a.db.update(p, { oldKey: 'v', value: 1 }));
    await within(a.writes.settled(), 15000, 'settled after the 503');
    assert.equal(t.state, 'resolved', String(t.error));
    assert.deepEqual(t.value.data, { v: 1 });
    assert.equal(net.writesTo(p).length, 1, 'not sent twice');
    assert.ok(net.readsOf(p).length >= 1, 'read after the unknown outcome');

    net.answerNext((e) => e.method !== 'GET' && e.collection === q, 429,
      { error: { code: 'rate_limited', message: 'slow down' } }, false, { 'Retry-After': '0' });
    const u = track(a.db.set(q, { z: 1 }));
    await within(a.writes.settled(), 15000, 'settled after the 429');
    assert.equal(u.state, 'resolved', String(u.error));
    assert.equal(u.value.created, true);
    assert.equal(net.writesTo(q).filter((e) => e.outcome === 'sent').length, 1);
    assert.deepEqual(await serverState(w, base), { [p]: { v: 1 }, [q]: { z: 1 } });
    assert.equal(ev.acked.length, 2);
    assert.deepEqual(ev.rejected, []);
  } finally {
    await s.done();
  }
});

/** Whether a subscription with since still resumes (the change log reaches back to since). */
function logReachesBack(token, path, since) {
  return new Promise((resolve, reject) => {
    const ws = new WS(env.url.replace(/^http/, 'ws') + '/api/realtime');
    const t = setTimeout(() => { ws.close(); reject(new Error('no answer to the probe')); }, 10000);
    const end = (v) => { clearTimeout(t); ws.close(); resolve(v); };
    ws.onopen = () => ws.send(JSON.stringify({ op: 'auth', token, projectId: env.projectId, apiKey: env.apiKey }));
    ws.onerror = () => { clearTimeout(t); reject(new Error('probe connection failed')); };
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.op === 'ready') ws.send(JSON.stringify({ op: 'subscribe', id: 'probe', collection: path, prefix: true, since }));
      else if (m.id === 'probe' && m.op === 'reset') end(false);
      else if (m.id === 'probe' && (m.op === 'change' || m.op === 'resumed' || m.op === 'snapshot')) end(true);
      else if (m.id === 'probe' && m.op === 'error') { clearTimeout(t); ws.close(); reject(new Error(m.code + ': ' + m.message)); }
    };
  });
}

test('reset: the change log no longer reaches back; the reopened client gets a reset and a fresh snapshot with its queued writes overlaid', async () => {
  await restartNode('?changelogRetention=2s');
  const s = await setup('reset');
  try {
    const { a, w, base, net, storage } = s;
    await w.db.set(base + '/a', { v: 1 });
    await w.db.set(base + '/b', { v: 2 });
    const ra = record(a, base, { prefix: true });
    await ra.until((ev) => ev.length >= 1, 10000, 'snapshot');
    const cachedAt = ra.events[0].revision;
    // Queued offline, never sent before the restart.
    net.offline();
    a.db.set(base + '/mine', { m: 1 }).catch(() => {});
    a.db.update(base + '/b', { oldKey: 'v', value: 20 }).catch(() => {});
    assert.equal((await a.writes.pending()).length, 2);
    await a.flush();
    a.close();

    await w.db.delete(base + '/a');
    await w.db.set(base + '/c', { v: 3 });
    const token = JSON.parse(storage.getItem('edgebase.session.' + env.projectId)).token;
    await waitFor(async () => !(await logReachesBack(token, base, cachedAt)), 30000, 'the change log to be compacted');

    // Realtime online, writes not yet: the snapshots show the overlay.
    const net2 = network();
    net2.offline({ realtime: false });
    const b = s.open(net2);
    const rb = record(b, base, { prefix: true });
    await rb.until((ev) => ev.filter((e) => e.type === 'snapshot').length >= 2, 15000, 'reset and a fresh snapshot');
    assert.deepEqual(rb.events.map((e) => e.type), ['snapshot', 'reset', 'snapshot']);
    const view = (ev) => ev.documents.map((d) => [d.collection, d.data, !!d.pendingWrites]).sort((x, y) => (x[0] < y[0] ? -1 : 1));
    assert.equal(rb.events[0].fromCache, true);
    assert.deepEqual(view(rb.events[0]), [
      [base + '/a', { v: 1 }, false], [base + '/b', { v: 20 }, true], [base + '/mine', { m: 1 }, true],
    ]);
    const fresh = rb.events[2];
    assert.ok(!fresh.fromCache);
    assert.deepEqual(view(fresh), [
      [base + '/b', { v: 20 }, true], [base + '/c', { v: 3 }, false], [base + '/mine', { m: 1 }, true],
    ]);
    const server = await w.db.list(base);
    assert.deepEqual(server.documents.map((d) => [d.collection, d.data]), [[base + '/b', { v: 2 }], [base + '/c', { v: 3 }]]);
    assert.equal(fresh.documents.find((d) => d.collection === base + '/b').revision, server.documents[0].revision);
    assert.equal(fresh.documents.find((d) => d.collection === base + '/mine').revision, null);

    net2.online();
    b.writes.replay();
    await within(b.writes.settled(), 20000, 'settled');
    await rb.until((ev) => ev.filter((e) => e.type === 'change' && !e.pendingWrites).length >= 2, 10000, 'the server changes of the queued writes');
    assert.deepEqual(await serverState(w, base), { [base + '/b']: { v: 20 }, [base + '/c']: { v: 3 }, [base + '/mine']: { m: 1 } });
    await assertCacheIsServer(b, w, ['a', 'b', 'c', 'mine'].map((x) => base + '/' + x));
  } finally {
    await s.done();
    await restartNode();
  }
});

test('two clients on one file cache ("tabs"): one leader, each write lands once, both see the same view and events; the other takes over when the leader closes', async () => {
  const s = await setup('tabs');
  try {
    const { a: t0, w, base, net: n0 } = s;
    const n1 = network();
    const t1 = s.open(n1);
    const tabs = [t0, t1];
    const nets = [n0, n1];
    await waitFor(() => t0.writes.leader !== t1.writes.leader, 10000, 'exactly one leader');
    const li = t0.writes.leader ? 0 : 1;
    const [L, F] = [tabs[li], tabs[1 - li]];
    const [nL, nF] = [nets[li], nets[1 - li]];
    await w.db.set(base + '/shared', { a: 0, b: 0 });
    await L.db.get(base + '/shared');
    const subs = tabs.map((t) => record(t, base, { prefix: true }));
    for (const r of subs) await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
    const evs = tabs.map(writeEvents);

    nL.offline({ realtime: false });
    nF.offline({ realtime: false });
    // One write after another, each once both tabs hold it: the queue's order is known.
    const made = [];
    const step = async (t, f) => {
      made.push(track(f(t.db)));
      const k = made.length;
      await waitFor(async () => (await t0.writes.pending()).length === k && (await t1.writes.pending()).length === k, 10000, `both tabs hold write ${k}`);
    };
    await step(t0, (db) => db.set(base + '/x0', { t: 0 }));
    await step(t1, (db) => db.set(base + '/x1', { t: 1 }));
    await step(t0, (db) => db.update(base + '/shared', { oldKey: 'a', value: 1 }));
    await step(t1, (db) => db.update(base + '/shared', { oldKey: 'b', value: 1 }));
    await step(t1, (db) => db.set(base + '/y1', { t: 1 }));
    await step(t0, (db) => db.delete(base + '/x0'));
    const paths = ['/x0', '/x1', '/shared', '/y1'].map((p) => base + p);
    const [q0, q1] = [await t0.writes.pending(), await t1.writes.pending()];
    assert.deepEqual(q0.map((q) => q.id), q1.map((q) => q.id));
    assert.deepEqual(q0.map((q) => q.path), [paths[0], paths[1], paths[2], paths[2], paths[3], paths[0]]);
    for (const p of paths) {
      assert.deepEqual(await t0.db.get(p, { source: 'cache' }), await t1.db.get(p, { source: 'cache' }), p);
    }
    assert.deepEqual(dataOf(await t1.db.get(base + '/shared', { source: 'cache' })), { a: 1, b: 1 });
    assert.equal(await t1.db.get(base + '/x0', { source: 'cache' }), null);
    // Every tab's subscription saw every local change, whichever tab made it.
    for (const r of subs) {
      await r.until((ev) => ev.filter((e) => e.type === 'change' && e.pendingWrites).length >= 6, 10000, 'the local changes in each tab');
    }
    assert.deepEqual(subs[0].changes().map((e) => [e.collection, e.data]), subs[1].changes().map((e) => [e.collection, e.data]));

    nL.online();
    nF.online();
    L.writes.replay();
    for (const t of tabs) await within(t.writes.settled(), 20000, 'settled');
    await waitFor(() => evs.every((e) => e.acked.length === 6), 10000, 'six acked in each tab');
    assert.deepEqual(evs[0].acked.map((x) => x.write.id), q0.map((q) => q.id));
    assert.deepEqual(evs[1].acked.map((x) => x.write.id), q0.map((q) => q.id));
    await waitFor(() => made.every((t) => t.state === 'resolved'), 10000, 'every promise resolved, in both tabs');
    for (const p of paths) {
      const sends = nL.writesTo(p).length + nF.writesTo(p).length;
      assert.equal(sends, p === paths[2] || p === paths[0] ? 2 : 1, `${p} sent ${sends} times`);
    }
    assert.equal(nF.log.filter((e) => e.method !== 'GET' && e.collection && e.outcome === 'sent').length, 0, 'the follower sends nothing');
    assert.deepEqual(await serverState(w, base), { [base + '/shared']: { a: 1, b: 1 }, [base + '/x1']: { t: 1 }, [base + '/y1']: { t: 1 } });
    for (const t of tabs) {
      assert.deepEqual(await t.writes.pending(), []);
      await assertCacheIsServer(t, w, paths);
    }

    // The leader closes while a follower's write waits: the follower takes over and sends it.
    nL.offline({ realtime: false });
    const late = track(F.db.set(base + '/late', { late: true }));
    await waitFor(async () => (await L.writes.pending()).length === 1, 10000, 'the leader hears of the write');
    assert.equal(F.writes.leader, false);
    L.close();
    await waitFor(() => F.writes.leader, 10000, 'the follower becomes the leader');
    await waitFor(() => late.state !== 'pending', 15000, 'the late write');
    assert.equal(late.state, 'resolved', String(late.error));
    assert.equal(late.value.created, true);
    assert.equal(nF.writesTo(base + '/late').length, 1);
    assert.deepEqual(await F.writes.pending(), []);
  } finally {
    await s.done();
  }
});

test('blind writes are last-writer-wins: {blind: true} and a path never seen', async () => {
  const s = await setup('blind');
  try {
    const { a, w, base, net } = s;
    await w.db.set(base + '/known', { v: 0 });
    await a.db.get(base + '/known');
    net.offline();
    const t1 = track(a.db.set(base + '/known', { v: 'a' }, { blind: true }));
    const t2 = track(a.db.set(base + '/never', { v: 'a' }));
    const q = await a.writes.pending();
    assert.deepEqual(q.map((x) => x.ifMatch), [null, null]);
    await w.db.set(base + '/known', { v: 'w' });
    await w.db.set(base + '/never', { v: 'w' });
    net.online();
    a.writes.replay();
    await within(a.writes.settled(), 15000, 'settled');
    assert.equal(t1.state, 'resolved', String(t1.error));
    assert.equal(t2.state, 'resolved', String(t2.error));
    assert.equal(t2.value.created, false);
    assert.deepEqual(await serverState(w, base), { [base + '/known']: { v: 'a' }, [base + '/never']: { v: 'a' } });
    assert.deepEqual(await a.writes.conflicts(), []);
  } finally {
    await s.done();
  }
});

test('a write the rules forbid (403) is rejected and the local view goes back; a subscriber sees the local change, then the revert', async () => {
  const o = await owner();
  const { rules } = await o.db.getRules();
  const s = await setup('forbidden');
  try {
    const { a, base, user } = s;
    await o.db.setRules([{ match: 'readonly/{uid}/**', read: 'auth.uid == uid', write: "auth.role == 'owner'" }, ...rules]);
    const p = `readonly/${user.id}/doc`;
    await o.db.set(p, { v: 1 });
    const ev = writeEvents(a);
    const r = record(a, p);
    await r.until((evs) => evs.length >= 1, 10000, 'snapshot');
    assert.deepEqual(r.events[0].documents.map((d) => d.data), [{ v: 1 }]);
    const t = track(a.db.set(p, { v: 2 }));
    await waitFor(() => t.state !== 'pending', 10000, 'the answer');
    await rejectsWith(t.p, 403, 'forbidden');
    await waitFor(() => ev.rejected.length === 1, 5000, 'rejected');
    assert.equal(ev.rejected[0].write.path, p);
    assert.equal(ev.rejected[0].error.status, 403);
    await r.until((evs) => evs.filter((e) => e.type === 'change').length >= 2, 10000, 'the local change and the revert');
    const [local, revert] = r.changes();
    assert.deepEqual([local.data, local.pendingWrites, local.changeType], [{ v: 2 }, true, 'set']);
    assert.equal(local.revision, r.events[0].revision);
    assert.equal(local.updateTime, null);
    assert.deepEqual(revert.data, { v: 1 });
    assert.ok(!revert.pendingWrites);
    assert.equal(r.sub.revision, r.events[0].revision, 'local events do not move the revision');
    assert.deepEqual(dataOf(await a.db.get(p, { source: 'cache' })), { v: 1 });
    assert.deepEqual(await a.writes.pending(), []);
    assert.equal(ev.conflict.length, 0);
  } finally {
    await o.db.setRules(rules);
    o.close();
    await s.done();
  }
});

test('rename, deleteField and chained writes to one path: both offline updates land, no self-conflict', async () => {
  const s = await setup('chain');
  try {
    const { a, w, base, net } = s;
    const p = base + '/doc';
    const v0 = await w.db.set(p, { title: 't', n: 1, k: 0 });
    await a.db.get(p);
    net.offline();
    const ts = [
      track(a.db.update(p, { oldKey: 'title', newKey: 'name', value: 'renamed' })),
      track(a.db.deleteField(p, 'n')),
      track(a.db.update(p, { oldKey: 'k', value: 1 })),
      track(a.db.update(p, { oldKey: 'k', value: 2 })),
    ];
    const local = await a.db.get(p, { source: 'cache' });
    assert.deepEqual(local.data, { name: 'renamed', k: 2 });
    assert.equal(local.revision, v0.revision);
    assert.equal(local.pendingWrites, true);
    const q = await a.writes.pending();
    assert.deepEqual(q.map((x) => x.op), ['update', 'deleteField', 'update', 'update']);
    assert.equal(q[1].field, 'n');
    assert.ok(q.every((x) => x.ifMatch === v0.revision));
    net.online();
    a.writes.replay();
    await within(a.writes.settled(), 15000, 'settled');
    assert.deepEqual(ts.map((t) => t.state), ['resolved', 'resolved', 'resolved', 'resolved'], ts.map((t) => String(t.error)).join());
    assert.deepEqual(ts.map((t) => t.value.data), [
      { name: 'renamed', n: 1, k: 0 }, { name: 'renamed', k: 0 }, { name: 'renamed', k: 1 }, { name: 'renamed', k: 2 },
    ]);
    assert.ok(ts[0].value.revision < ts[1].value.revision && ts[2].value.revision < ts[3].value.revision);
    assert.deepEqual(await a.writes.conflicts(), []);
    assert.deepEqual(dataOf(await w.db.get(p)), { name: 'renamed', k: 2 });
    await assertCacheIsServer(a, w, [p]);
  } finally {
    await s.done();
  }
});

test('delete based on a revision; ifMatch 0 (and a known absence) conflicts when someone else created the document', async () => {
  const s = await setup('bases');
  try {
    const { a, w, base, net } = s;
    const [d1, d2, c1, c2] = ['/del1', '/del2', '/new1', '/new2'].map((x) => base + x);
    const r1 = await w.db.set(d1, { v: 1 });
    const r2 = await w.db.set(d2, { v: 1 });
    await a.db.list(base);
    assert.equal(await a.db.get(c1), null); // the cache now knows c1 is absent
    const ev = writeEvents(a);
    net.offline();
    const t1 = track(a.db.delete(d1));
    const t2 = track(a.db.delete(d2));
    const t3 = track(a.db.set(c1, { mine: 1 }));
    const t4 = track(a.db.set(c2, { mine: 2 }, { ifMatch: 0 }));
    const q = await a.writes.pending();
    assert.deepEqual(q.map((x) => x.ifMatch), [r1.revision, r2.revision, 0, 0]);
    assert.equal(await a.db.get(d2, { source: 'cache' }), null);
    assert.deepEqual((await a.db.get(c1, { source: 'cache' })).revision, null);
    const theirs2 = await w.db.set(d2, { v: 'w' });
    const theirs3 = await w.db.set(c1, { w: 1 });
    await w.db.set(c2, { w: 2 });
    net.online();
    a.writes.replay();
    await within(a.writes.settled(), 15000, 'settled');
    assert.equal(t1.state, 'resolved', String(t1.error));
    assert.equal(t1.value.deleted, true);
    for (const t of [t2, t3, t4]) assert.equal(t.state, 'rejected');
    for (const t of [t2, t3, t4]) assert.equal(t.error.code, 'precondition_failed');
    assert.deepEqual(ev.conflict.map((c) => c.path), [d2, c1, c2]);
    const byPath = Object.fromEntries((await a.writes.conflicts()).map((c) => [c.path, c]));
    assert.deepEqual(byPath[d2].server.data, { v: 'w' });
    assert.equal(byPath[d2].server.revision, theirs2.revision);
    assert.equal(byPath[d2].local, null);
    assert.deepEqual(byPath[c1].server.data, { w: 1 });
    assert.equal(byPath[c1].server.revision, theirs3.revision);
    assert.deepEqual(byPath[c1].local.data, { mine: 1 });

    const del = await byPath[d2].retry();
    assert.equal(del.deleted, true);
    await byPath[c1].discard();
    assert.deepEqual(dataOf(await a.db.get(c1, { source: 'cache' })), { w: 1 });
    const set2 = await byPath[c2].retry();
    assert.deepEqual(set2.data, { mine: 2 });
    await within(a.writes.settled(), 10000, 'settled');
    assert.deepEqual(await serverState(w, base), { [c1]: { w: 1 }, [c2]: { mine: 2 } });
    await assertCacheIsServer(a, w, [d1, d2, c1, c2]);
  } finally {
    await s.done();
  }
});

test('a write behind a conflicted one on the same path waits; other paths go on; it follows the retry', async () => {
  const s = await setup('behind');
  try {
    const { a, w, base, net } = s;
    const p = base + '/p';
    const o = base + '/other';
    await w.db.set(p, { x: 0, y: 0 });
    await a.db.get(p);
    const ev = writeEvents(a);
    net.offline();
    const first = track(a.db.set(p, { x: 1, y: 0 }));
    const second = track(a.db.update(p, { oldKey: 'y', value: 2 }));
    const other = track(a.db.set(o, { z: 1 }));
    await w.db.set(p, { x: 0, y: 0, w: 1 });
    net.online();
    a.writes.replay();
    await waitFor(() => ev.conflict.length === 1 && other.state === 'resolved', 15000, 'the conflict, and the other path acked');
    const q = await a.writes.pending();
    assert.deepEqual(q.map((x) => [x.path, x.state]), [[p, 'conflict'], [p, 'queued']]);
    assert.equal(second.state, 'pending');
    // The first was tried offline (uncertain): read, not at its base, in conflict without being sent again.
    assert.ok(net.writesTo(p).every((e) => e.method === 'POST'), 'the write behind the conflict is not sent');
    assert.deepEqual(dataOf(await a.db.get(p, { source: 'cache' })), { x: 1, y: 2 });

    await ev.conflict[0].retry();
    await within(a.writes.settled(), 15000, 'settled');
    await waitFor(() => second.state !== 'pending', 5000, 'the second write');
    assert.equal(second.state, 'resolved', String(second.error));
    assert.deepEqual(second.value.data, { x: 1, y: 2 });
    assert.deepEqual(dataOf(await w.db.get(p)), { x: 1, y: 2 });
    await assertCacheIsServer(a, w, [p, o]);
  } finally {
    await s.done();
  }
});

test('settled() waits offline and resolves once the queue is sent', async () => {
  const s = await setup('settled');
  try {
    const { a, w, base, net } = s;
    await within(a.writes.settled(), 2000, 'settled with an empty queue');
    net.offline();
    a.db.set(base + '/s', { v: 1 }).catch(() => {});
    let done = false;
    a.writes.settled().then(() => { done = true; });
    // The replay tried (and failed) at least twice, on its backoff timer: still not settled.
    await waitFor(() => net.log.filter((e) => e.outcome === 'offline' && e.collection === base + '/s').length >= 2, 10000, 'two attempts');
    assert.equal(done, false);
    assert.equal((await a.writes.pending()).length, 1);
    net.online();
    await waitFor(() => done, 10000, 'settled once online (backoff timer, no replay call)');
    assert.deepEqual(dataOf(await w.db.get(base + '/s')), { v: 1 });
  } finally {
    await s.done();
  }
});

test('sources: server never uses the cache, cache makes no request; pendingWrites on get, list, snapshots and changes', async () => {
  const s = await setup('flags');
  try {
    const { a, w, base, net } = s;
    const [pa, pb, pc] = ['/a', '/b', '/c'].map((x) => base + x);
    await w.db.set(pa, { n: 1 });
    await w.db.set(pb, { n: 2 });
    await a.db.list(base);
    const r = record(a, base, { prefix: true });
    await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
    const snapRev = r.events[0].revision;

    net.offline({ realtime: false });
    await rejectsWith(a.db.get(pa, { source: 'server' }), 0, 'network_error');
    await rejectsWith(a.db.list(base, { source: 'server' }), 0, 'network_error');
    const n = net.log.length;
    assert.deepEqual(dataOf(await a.db.get(pa, { source: 'cache' })), { n: 1 });
    assert.equal(await a.db.get(base + '/unknown', { source: 'cache' }), null);
    await assert.rejects(a.db.list(base, { source: 'cache', limit: 1 }), (e) => e instanceof EdgebaseError && e.code === 'not_cached');
    assert.equal(net.log.length, n, 'source cache sends nothing');

    a.db.update(pa, { oldKey: 'n', value: 10 }).catch(() => {});
    a.db.delete(pb).catch(() => {});
    a.db.set(pc, { n: 3 }).catch(() => {});
    await r.until((ev) => ev.filter((e) => e.type === 'change').length >= 3, 5000, 'three local changes');
    assert.deepEqual(r.changes().map((e) => [e.collection, e.changeType, e.data, e.revision, e.updateTime, e.pendingWrites]).sort(), [
      [pa, 'set', { n: 10 }, snapRev, null, true],
      [pb, 'delete', null, snapRev, null, true],
      [pc, 'set', { n: 3 }, snapRev, null, true],
    ]);
    assert.equal(r.sub.revision, snapRev);

    const ga = await a.db.get(pa); // offline: from the cache
    assert.equal(ga.fromCache, true);
    assert.equal(ga.pendingWrites, true);
    assert.deepEqual(ga.data, { n: 10 });
    const gc = await a.db.get(pc, { source: 'cache' });
    assert.equal(gc.revision, null);
    assert.equal(gc.pendingWrites, true);
    const page = await a.db.list(base);
    assert.equal(page.fromCache, true);
    const byPath = Object.fromEntries(page.documents.map((d) => [d.collection, d]));
    assert.deepEqual(byPath[pa].data, { n: 10 });
    assert.equal(byPath[pa].pendingWrites, true);
    assert.equal(byPath[pb], undefined, 'deleted locally');
    const view = (snap) => snap.documents.map((d) => [d.collection, d.data, !!d.pendingWrites]).sort((x, y) => (x[0] < y[0] ? -1 : 1));
    // The same subscription again: its cached snapshot carries the local view.
    const r2 = record(a, base, { prefix: true });
    await r2.until((ev) => ev.length >= 1, 10000, 'the cached snapshot');
    assert.equal(r2.events[0].fromCache, true);
    assert.deepEqual(view(r2.events[0]), [[pa, { n: 10 }, true], [pc, { n: 3 }, true]]);
    // Snapshots from the server: one changed, one deleted and one created locally.
    const [sa, sb, sc] = [pa, pb, pc].map((p) => record(a, p));
    for (const x of [sa, sb, sc]) await x.until((ev) => ev.length >= 1, 10000, 'a server snapshot');
    assert.ok([sa, sb, sc].every((x) => x.events[0].type === 'snapshot' && !x.events[0].fromCache));
    assert.deepEqual(view(sa.events[0]), [[pa, { n: 10 }, true]]);
    assert.deepEqual(view(sb.events[0]), []);
    assert.deepEqual(view(sc.events[0]), [[pc, { n: 3 }, true]]);

    net.online();
    a.writes.replay();
    await within(a.writes.settled(), 15000, 'settled');
    // The server's change of each path (marked pendingWrites when it came before the answer of its
    // write; then the acknowledgement shows the local view again): the last event of each path has none.
    const lastOf = (p) => r.changes().slice(3).filter((e) => e.collection === p).pop();
    await r.until(() => [pa, pb, pc].every((p) => lastOf(p) && !lastOf(p).pendingWrites), 10000, 'the server changes');
    const server = [pa, pb, pc].map(lastOf);
    assert.deepEqual(server.map((e) => [e.collection, e.changeType, e.data]), [[pa, 'set', { n: 10 }], [pb, 'delete', null], [pc, 'set', { n: 3 }]]);
    assert.ok(server.every((e) => e.revision > snapRev));
    const online = await a.db.get(pa, { source: 'server' });
    assert.equal(online.fromCache, undefined);
    assert.ok(!online.pendingWrites);
    assert.deepEqual(online.data, { n: 10 });
    await assertCacheIsServer(a, w, [pa, pb, pc]);
  } finally {
    await s.done();
  }
});

test('a process holding the queue dies: its lock and its queued write are taken over by another process', async () => {
  const s = await setup('crash');
  let child;
  try {
    const { w, base } = s;
    // The other process's client is the leader; ours waits.
    const dir2 = await s.tempDir();
    const sdk = new URL('../edgebase.js', import.meta.url).href;
    const code = `
      import { createClient } from ${JSON.stringify(sdk)};
      const c = createClient({ url: 'http://127.0.0.1:1', projectId: ${JSON.stringify(env.projectId)}, apiKey: 'k', retries: 0,
        minBackoff: 50, maxBackoff: 200, persistence: ${JSON.stringify('file:' + dir2)} });
      c.db.set(${JSON.stringify(base + '/orphan')}, { from: 'child' }).catch(() => {});
      let n = 0;
      setInterval(async () => {
        const q = await c.writes.pending();
        if (c.writes.leader && q.length === 1) console.log('ready');
        else if (n++ % 20 === 0) console.log('leader', c.writes.leader, 'pending', q.length);
      }, 50);`;
    const { spawn } = await import('node:child_process');
    child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await waitFor(() => out.includes('ready'), 15000, 'the child leads with a queued write').catch((e) => {
      throw new Error(e.message + '; the child said: ' + out);
    });

    const net = network();
    const b = s.open(net, {}, dir2);
    const ev = writeEvents(b);
    assert.deepEqual((await b.writes.pending()).map((x) => x.path), [base + '/orphan']);
    assert.equal(b.writes.leader, false, 'the live child holds the lock');
    child.kill('SIGKILL');
    await exited;
    child = null;
    await waitFor(() => b.writes.leader, 10000, 'the lock taken over');
    await waitFor(() => ev.acked.length === 1, 15000, 'the orphan write acked');
    assert.deepEqual(dataOf(await w.db.get(base + '/orphan')), { from: 'child' });
    assert.equal(net.writesTo(base + '/orphan').length, 1);
  } finally {
    if (child) child.kill('SIGKILL');
    await s.done();
  }
});

test('a 401 pauses the queue without dropping anything; signing in resumes it', async () => {
  const s = await setup('unauth');
  try {
    const { w, base, email } = s;
    const dir = await s.tempDir();
    const storage = sharedSessionStore();
    storage.setItem('edgebase.session.' + env.projectId, JSON.stringify({ token: 'not-a-token', user: null }));
    const net = network();
    const c = s.open(net, {}, dir, storage);
    const ev = writeEvents(c);
    const t = track(c.db.set(base + '/after-login', { v: 1 }));
    await waitFor(() => net.log.some((e) => e.collection === base + '/after-login' && e.status === 401), 10000, 'the 401');
    const q = await c.writes.pending();
    assert.equal(q.length, 1);
    assert.equal(t.state, 'pending');
    assert.deepEqual(ev.rejected, []);
    await c.auth.login(email, PASSWORD);
    await waitFor(() => t.state !== 'pending', 10000, 'the write after signing in');
    assert.equal(t.state, 'resolved', String(t.error));
    assert.deepEqual(dataOf(await w.db.get(base + '/after-login')), { v: 1 });
  } finally {
    await s.done();
  }
});

test('a realtime connection coming back replays the queue at once, cutting the backoff short', async () => {
  const s = await setup('reconnect');
  try {
    const { w, base } = s;
    const dir = await s.tempDir();
    const net = network();
    // A backoff of at least 15 s: only the reconnect can send the write within the test's 10 s.
    const c = s.open(net, { minBackoff: 30000, maxBackoff: 60000 }, dir);
    net.offline();
    const t = track(c.db.set(base + '/r', { v: 1 }));
    await waitFor(() => net.log.some((e) => e.outcome === 'offline' && e.collection === base + '/r'), 10000, 'the first attempt');
    net.online();
    assert.equal(c.realtime.status.state, 'idle');
    const r = record(c, base, { prefix: true });
    await waitFor(() => t.state !== 'pending', 10000, 'the write after the connection came back');
    assert.equal(t.state, 'resolved', String(t.error));
    assert.deepEqual(dataOf(await w.db.get(base + '/r')), { v: 1 });
    assert.ok(r.events.length >= 1);
  } finally {
    await s.done();
  }
});

test('tabs: a conflict shows in both, the follower resolves it, the leader sends the retry', async () => {
  const s = await setup('tabconflict');
  try {
    const { a: t0, w, base, net: n0 } = s;
    const n1 = network();
    const t1 = s.open(n1);
    await waitFor(() => t0.writes.leader !== t1.writes.leader, 10000, 'exactly one leader');
    const [L, F] = t0.writes.leader ? [t0, t1] : [t1, t0];
    const [nL, nF] = t0.writes.leader ? [n0, n1] : [n1, n0];
    const p = base + '/doc';
    const v0 = await w.db.set(p, { a: 0, b: 0 });
    await F.db.get(p);
    const evs = [L, F].map(writeEvents);
    nL.offline({ realtime: false });
    nF.offline({ realtime: false });
    const t = track(F.db.update(p, { oldKey: 'a', value: 1 }));
    await waitFor(async () => (await L.writes.pending()).length === 1, 10000, 'the leader holds the follower\'s write');
    assert.equal((await L.writes.pending())[0].ifMatch, v0.revision);
    const theirs = await w.db.set(p, { a: 0, b: 2 });
    nL.online();
    nF.online();
    L.writes.replay();
    await waitFor(() => evs.every((e) => e.conflict.length === 1), 15000, 'the conflict in both tabs');
    await waitFor(() => t.state !== 'pending', 5000, 'the follower\'s promise');
    assert.equal(t.state, 'rejected');
    assert.equal(t.error.code, 'precondition_failed');
    for (const e of evs) {
      assert.deepEqual(e.conflict[0].server.data, { a: 0, b: 2 });
      assert.equal(e.conflict[0].server.revision, theirs.revision);
    }
    const [c] = await F.writes.conflicts();
    const retried = await within(c.retry(), 15000, 'the retry, sent by the leader');
    assert.deepEqual(retried.data, { a: 1, b: 2 });
    assert.equal(nF.log.filter((e) => e.method !== 'GET' && e.collection === p).length, 0, 'the follower sent nothing');
    // The first attempt, if made offline (uncertain), is settled by a read: no second send of it.
    assert.ok([1, 2].includes(nL.writesTo(p).length), `the leader sent ${nL.writesTo(p).length} writes`);
    assert.deepEqual(dataOf(await w.db.get(p)), { a: 1, b: 2 });
    for (const tab of [L, F]) {
      await within(tab.writes.settled(), 10000, 'settled');
      assert.deepEqual(await tab.writes.pending(), []);
    }
    await waitFor(() => evs.every((e) => e.acked.length === 1), 10000, 'acked in both tabs');
  } finally {
    await s.done();
  }
});
