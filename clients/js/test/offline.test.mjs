// The persistent cache (issue 21, slice 1): subscriptions served from the
// cache and resumed exactly across a restart of the client, and reads
// answered from the cache when the network is down; with the file adapter,
// against a real node.
import { test } from 'node:test';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  assert, assertOnceInOrder, client, controlledWebSocket, createClient, env, EdgebaseError, fast, keyOf, newUser, PASSWORD, record, rejectsWith,
  restartNode, tempDir, waitFor, writerFor, WS,
} from './helpers.mjs';
import { fileAdapter, memoryAdapter } from '../edgebase.js';

const docsOf = (ev) => ev.documents.map((d) => [d.collection, d.data]);

/** A fetch the test cuts: while offline is true it fails as a browser's does offline. */
function cuttable() {
  const net = { offline: false };
  net.fetch = (...a) => (net.offline ? Promise.reject(new TypeError('Failed to fetch')) : fetch(...a));
  return net;
}

test('adapters: memory and file keep JSON values, list keys by prefix, delete; long keys work', async () => {
  const dir = await tempDir();
  try {
    for (const a of [memoryAdapter(), fileAdapter(join(dir, 'nested', 'cache'))]) {
      assert.equal(await a.get('missing'), undefined);
      await a.set('d:users/1/a', { n: 1, s: 'é/%~' });
      await a.set('d:users/1/b', [1, 2]);
      await a.set('s:x', { revision: 3 });
      const long = 'd:' + 'x/'.repeat(200) + 'end';
      await a.set(long, { long: true });
      assert.deepEqual(await a.get('d:users/1/a'), { n: 1, s: 'é/%~' });
      assert.deepEqual(await a.keys('d:users/1/'), ['d:users/1/a', 'd:users/1/b']);
      assert.deepEqual(await a.get(long), { long: true });
      assert.ok((await a.keys('d:x/')).includes(long));
      const v = await a.get('d:users/1/b');
      v.push(3); // a copy: the stored value does not change
      assert.deepEqual(await a.get('d:users/1/b'), [1, 2]);
      await a.delete('d:users/1/a');
      await a.delete('d:never');
      assert.deepEqual(await a.keys('d:users/'), ['d:users/1/b']);
      assert.equal((await a.keys('')).length, 3);
    }
    // Atomic writes leave no temporary file behind.
    assert.ok((await readdir(join(dir, 'nested', 'cache'))).every((n) => !n.startsWith('%%')));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('persistence option: a bad value is refused; a custom adapter is used', async () => {
  assert.throws(() => client({ persistence: 'sqlite' }), (e) => e instanceof EdgebaseError && e.code === 'invalid_argument' && e.field === 'persistence');
  assert.throws(() => client({ persistence: 'indexeddb' }), (e) => e instanceof EdgebaseError && e.code === 'persistence_unavailable');
  const seen = [];
  const inner = memoryAdapter();
  const adapter = {
    get: (k) => inner.get(k),
    set: (k, v) => { seen.push(k); return inner.set(k, v); },
    delete: (k) => inner.delete(k),
    keys: (p) => inner.keys(p),
  };
  const { c, user } = await newUser({ persistence: { adapter } });
  await c.db.set(`users/${user.id}/custom`, { v: 1 });
  const doc = await c.db.get(`users/${user.id}/custom`);
  assert.equal(doc.fromCache, undefined, 'online answers carry no fromCache');
  await c.flush();
  // The write went through the queue (q:<id>) into the document cache (d:<path>).
  assert.ok(seen.includes(`d:users/${user.id}/custom`), seen.join(' '));
  assert.ok(seen.some((k) => k.startsWith('q:')), seen.join(' '));
  assert.deepEqual(await inner.keys('q:'), [], 'the acknowledged write left the queue');
  assert.equal(doc.pendingWrites, undefined);
  // Without persistence nothing changes: flush resolves at once.
  await client().flush();
});

test('a new client with the same cache serves the snapshot at once, then exactly the missed changes', async () => {
  const dir = await tempDir();
  try {
    const { c: a, user, email } = await newUser({ ...fast, persistence: 'file:' + dir });
    const w = await writerFor(email);
    const base = `users/${user.id}/cached`;
    await w.db.set(base + '/a', { n: 1 });
    await w.db.set(base + '/b', { n: 2 });
    const ra = record(a, base, { prefix: true });
    await ra.until((ev) => ev.length >= 1, 10000, 'snapshot');
    assert.equal(ra.events[0].type, 'snapshot');
    assert.equal(ra.events[0].fromCache, undefined, 'a snapshot from the server carries no fromCache');
    const c1 = await w.db.set(base + '/c', { n: 3 });
    await ra.until((ev) => ev.length >= 2, 10000, 'the change of c');
    await a.flush();
    await a.close();

    // Written while no client of the cache runs.
    const expected = [];
    const d1 = await w.db.set(base + '/d', { n: 4 });
    expected.push(`${d1.revision} ${base}/d set`);
    const b = await w.db.batch([
      { op: 'set', collection: base + '/a', data: { n: 10 } },
      { op: 'delete', collection: base + '/b' },
    ]);
    expected.push(`${b.revision} ${base}/a set`, `${b.revision} ${base}/b delete`);
    const u = await w.db.update(base + '/c', { oldKey: 'n', value: 30 });
    expected.push(`${u.revision} ${base}/c set`);

    // Not signed in yet: the cached snapshot comes without the network.
    const b2 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, ...fast, persistence: 'file:' + dir });
    const rb = record(b2, base, { prefix: true });
    await rb.until((ev) => ev.length >= 1, 5000, 'the cached snapshot');
    const snap = rb.events[0];
    assert.equal(snap.type, 'snapshot');
    assert.equal(snap.fromCache, true);
    assert.equal(snap.revision, c1.revision);
    assert.deepEqual(docsOf(snap), [[base + '/a', { n: 1 }], [base + '/b', { n: 2 }], [base + '/c', { n: 3 }]]);
    assert.equal(snap.documents[2].revision, c1.revision);
    assert.equal(rb.events.length, 1);

    await b2.auth.login(email, PASSWORD);
    await rb.until((ev) => ev.some((e) => e.type === 'resumed'), 15000, 'resumed');
    const live = await w.db.set(base + '/e', { n: 5 });
    await rb.until((ev) => ev.filter((e) => e.type === 'change').length >= expected.length + 1, 10000, 'a live change');
    expected.push(`${live.revision} ${base}/e set`);
    assert.deepEqual(rb.events.map((e) => e.type), ['snapshot', 'change', 'change', 'change', 'change', 'resumed', 'change']);
    assert.deepEqual(rb.changes().map(keyOf), expected);
    assertOnceInOrder(rb.changes());
    assert.equal(rb.ofType('resumed')[0].revision >= u.revision, true);
    await b2.flush();
    await b2.close();

    // A third client sees the cache equal to the server's state.
    const c3 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, persistence: 'file:' + dir });
    const r3 = record(c3, base, { prefix: true });
    await r3.until((ev) => ev.length >= 1, 5000, 'the cached snapshot');
    assert.equal(r3.events[0].fromCache, true);
    assert.equal(r3.events[0].revision, live.revision);
    const server = await w.db.list(base);
    assert.deepEqual(docsOf(r3.events[0]), server.documents.map((d) => [d.collection, d.data]));
    assert.deepEqual(docsOf(r3.events[0]), [[base + '/a', { n: 10 }], [base + '/c', { n: 30 }], [base + '/d', { n: 4 }], [base + '/e', { n: 5 }]]);
    await c3.close();
    await w.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a connection cut inside one revision: the cache resumes without a duplicate', async () => {
  const dir = await tempDir();
  try {
    const ws = controlledWebSocket();
    const { c: a, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket, persistence: 'file:' + dir });
    const w = await writerFor(email);
    const base = `users/${user.id}/cut`;
    const ra = record(a, base, { prefix: true });
    await ra.until((ev) => ev.length >= 1, 10000, 'snapshot');
    // The first change of a three-document batch arrives, then the connection drops and the client stays away.
    ws.dropWhen((m) => m.op === 'change');
    ws.block();
    const b = await w.db.batch([
      { op: 'set', collection: base + '/x', data: { v: 1 } },
      { op: 'set', collection: base + '/y', data: { v: 2 } },
      { op: 'set', collection: base + '/z', data: { v: 3 } },
    ]);
    await ra.until((ev) => ev.filter((e) => e.type === 'change').length >= 1, 10000, 'the first change');
    await waitFor(() => a.realtime.status.state === 'disconnected', 10000, 'disconnected');
    await a.flush();
    await a.close();
    assert.equal(ra.changes().length, 1);

    const b2 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, ...fast, persistence: 'file:' + dir });
    await b2.auth.login(email, PASSWORD);
    const rb = record(b2, base, { prefix: true });
    await rb.until((ev) => ev.some((e) => e.type === 'resumed'), 15000, 'resumed');
    assert.equal(rb.events[0].fromCache, true);
    assert.deepEqual(docsOf(rb.events[0]), [[base + '/x', { v: 1 }]]);
    assert.deepEqual(rb.changes().map(keyOf), [`${b.revision} ${base}/y set`, `${b.revision} ${base}/z set`]);
    await b2.close();
    await w.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('offline reads: get and list answer from the cache with fromCache; uncached reads throw the network error', async () => {
  const dir = await tempDir();
  try {
    const { c, user } = await newUser({ persistence: 'file:' + dir });
    const base = `users/${user.id}/off`;
    await c.db.set(base + '/a', { v: 1 });
    await c.db.set(base + '/b', { v: 2 });
    const got = await c.db.get(base + '/a');
    assert.equal(got.fromCache, undefined);
    const page = await c.db.list(base);
    assert.equal(page.fromCache, undefined);
    assert.equal(page.documents.length, 2);
    assert.equal(await c.db.get(base + '/none'), null);
    await c.flush();

    // A node nobody listens on.
    const off = createClient({ url: 'http://127.0.0.1:1', projectId: env.projectId, apiKey: env.apiKey, retries: 0, persistence: 'file:' + dir });
    const g = await off.db.get(base + '/a');
    assert.equal(g.fromCache, true);
    assert.deepEqual(g.data, { v: 1 });
    assert.equal(g.revision, got.revision);
    // b was only listed: its document came with the page.
    const gb = await off.db.get(base + '/b');
    assert.equal(gb.fromCache, true);
    assert.deepEqual(gb.data, { v: 2 });
    const l = await off.db.list(base);
    assert.equal(l.fromCache, true);
    assert.deepEqual(l.documents.map((d) => [d.collection, d.data]), page.documents.map((d) => [d.collection, d.data]));
    // none was read absent (404): the cache knows it is absent; never was never read.
    assert.equal(await off.db.get(base + '/none'), null);
    await rejectsWith(off.db.get(base + '/never'), 0, 'network_error');
    await rejectsWith(off.db.list(base, { limit: 1 }), 0, 'network_error');

    // A fetch that rejects, as a browser offline.
    let calls = 0;
    const cut = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, retries: 0, persistence: 'file:' + dir,
      fetch: async () => { calls++; throw new TypeError('Failed to fetch'); } });
    assert.equal((await cut.db.get(base + '/a')).fromCache, true);
    await rejectsWith(cut.db.get(base + '/c'), 0, 'network_error');
    assert.equal(calls, 2);

    // An answer of the server (not a network failure) is never replaced by the cache.
    const other = await newUser({ persistence: 'file:' + dir });
    await rejectsWith(other.c.db.get(base + '/a'), 403, 'forbidden');

    // A document deleted online is known absent in the cache (a tombstone), not served stale.
    await c.db.delete(base + '/a');
    assert.equal(await c.db.get(base + '/a'), null);
    await c.flush();
    assert.equal(await off.db.get(base + '/a'), null);
    assert.equal(await off.db.get(base + '/a', { source: 'cache' }), null);
    assert.deepEqual((await off.db.get(base + '/b', { source: 'cache' })).data, { v: 2 });
    await rejectsWith(off.db.get(base + '/b', { source: 'server' }), 0, 'network_error');
    await Promise.all([c, off, cut, other.c].map((x) => x.close()));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the change log no longer reaches back: the cached subscription gets a reset and a fresh snapshot, and the cache follows', async () => {
  const dir = await tempDir();
  await restartNode('?changelogRetention=1s');
  try {
    const { c: a, user, email } = await newUser({ ...fast, persistence: 'file:' + dir });
    const w = await writerFor(email);
    const base = `users/${user.id}/old`;
    await w.db.set(base + '/a', { v: 1 });
    const ra = record(a, base, { prefix: true });
    await ra.until((ev) => ev.length >= 1, 10000, 'snapshot');
    await a.flush();
    await a.close();
    await w.db.delete(base + '/a');
    const gone = await w.db.set(base + '/b', { v: 2 });
    await new Promise((res) => setTimeout(res, 2500)); // the changes are compacted away

    const b2 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, ...fast, persistence: 'file:' + dir });
    await b2.auth.login(email, PASSWORD);
    const rb = record(b2, base, { prefix: true });
    await rb.until((ev) => ev.filter((e) => e.type === 'snapshot').length >= 2, 15000, 'reset and snapshot');
    assert.deepEqual(rb.events.map((e) => e.type), ['snapshot', 'reset', 'snapshot']);
    assert.equal(rb.events[0].fromCache, true);
    assert.deepEqual(docsOf(rb.events[0]), [[base + '/a', { v: 1 }]]);
    assert.equal(rb.events[2].fromCache, undefined);
    assert.deepEqual(docsOf(rb.events[2]), [[base + '/b', { v: 2 }]]);
    assert.ok(rb.events[2].revision >= gone.revision);
    await b2.flush();
    await b2.close();

    const c3 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, persistence: 'file:' + dir });
    const r3 = record(c3, base, { prefix: true });
    await r3.until((ev) => ev.length >= 1, 5000, 'the cached snapshot');
    assert.equal(r3.events[0].fromCache, true);
    assert.equal(r3.events[0].revision, rb.events[2].revision);
    assert.deepEqual(docsOf(r3.events[0]), [[base + '/b', { v: 2 }]]);
    await c3.close();
    await w.close();
  } finally {
    await restartNode();
    await rm(dir, { recursive: true, force: true });
  }
});

test('write queue: offline writes show at once, land in order on reconnect; a stale base is a conflict resolved by retry or discard', async () => {
  const dir = await tempDir();
  const net = cuttable();
  try {
    const { c, user, email } = await newUser({ ...fast, persistence: 'file:' + dir, fetch: net.fetch });
    const w = await writerFor(email);
    const base = `users/${user.id}/q`;
    await w.db.set(base + '/a', { n: 1 });
    await w.db.set(base + '/b', { n: 1 });
    assert.equal((await c.db.get(base + '/a')).data.n, 1);
    assert.equal((await c.db.get(base + '/b')).data.n, 1);
    assert.equal(c.writes.leader, true);

    net.offline = true;
    const events = { acked: [], conflict: [] };
    c.writes.on('acked', (e) => events.acked.push(e));
    c.writes.on('conflict', (e) => events.conflict.push(e));
    const pa1 = c.db.update(base + '/a', { oldKey: 'n', value: 2 });
    const pa2 = c.db.update(base + '/a', { oldKey: 'm', value: 'x' });
    const pb = c.db.set(base + '/b', { n: 5 });
    const pcreate = c.db.set(base + '/new', { fresh: true });
    pa1.catch(() => {}); pa2.catch(() => {}); pb.catch(() => {}); pcreate.catch(() => {});
    await waitFor(async () => (await c.writes.pending()).length === 4, 5000, 'four queued');
    const la = await c.db.get(base + '/a');
    assert.equal(la.fromCache, true);
    assert.equal(la.pendingWrites, true);
    assert.deepEqual(la.data, { n: 2, m: 'x' });
    const pend = await c.writes.pending();
    assert.deepEqual(pend.map((x) => [x.op, x.path.slice(base.length), x.ifMatch !== null]), [
      ['update', '/a', true], ['update', '/a', true], ['set', '/b', true], ['set', '/new', false],
    ]);
    // Someone else changes b meanwhile.
    await w.db.set(base + '/b', { n: 100 });

    net.offline = false;
    c.writes.replay();
    const r1 = await pa1;
    const r2 = await pa2;
    assert.ok(r2.revision > r1.revision);
    assert.deepEqual(r2.data, { n: 2, m: 'x' });
    const e = await pb.then(() => null, (x) => x);
    assert.equal(e.code, 'precondition_failed');
    assert.equal(e.conflict.server.data.n, 100);
    assert.equal(e.conflict.local.data.n, 5);
    assert.equal((await pcreate).created, true);
    await c.writes.settled();
    const cs = await c.writes.conflicts();
    assert.equal(cs.length, 1);
    assert.equal(events.conflict.length, 1);
    assert.equal(events.acked.length, 3);
    const merged = await cs[0].retry({ n: 105 });
    assert.equal(merged.data.n, 105);
    assert.deepEqual((await w.db.get(base + '/b')).data, { n: 105 });
    assert.deepEqual(await c.writes.pending(), []);
    for (const p of ['/a', '/b', '/new']) {
      const server = await w.db.get(base + p);
      const cached = await c.db.get(base + p, { source: 'cache' });
      assert.deepEqual([cached.data, cached.revision], [server.data, server.revision], p);
    }
    await c.close();
    await w.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a conflict survives a restart of the client: conflicts() lists it, and retry() from the new client lands', async () => {
  const dir = await tempDir();
  const net = cuttable();
  try {
    const { c, user, email } = await newUser({ ...fast, persistence: 'file:' + dir, fetch: net.fetch });
    const w = await writerFor(email);
    const p = `users/${user.id}/survive`;
    await w.db.set(p, { n: 1 });
    const seen = await c.db.get(p);
    net.offline = true;
    c.db.set(p, { n: 2 }).catch(() => {});
    await w.db.set(p, { n: 3 });
    net.offline = false;
    c.writes.replay();
    await waitFor(async () => (await c.writes.conflicts()).length === 1, 10000, 'the conflict');
    await c.flush();
    await c.close();

    const c2 = createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, ...fast, persistence: 'file:' + dir });
    await c2.auth.login(email, PASSWORD);
    const cs = await c2.writes.conflicts();
    assert.equal(cs.length, 1);
    assert.equal(cs[0].path, p);
    assert.equal(cs[0].write.ifMatch, seen.revision);
    assert.deepEqual(cs[0].server.data, { n: 3 });
    assert.deepEqual(cs[0].local.data, { n: 2 });
    assert.equal((await c2.db.get(p, { source: 'cache' })).pendingWrites, true);
    const r = await cs[0].retry();
    assert.deepEqual(r.data, { n: 2 });
    assert.deepEqual((await w.db.get(p)).data, { n: 2 });
    assert.deepEqual(await c2.writes.pending(), []);
    await rejectsWith(cs[0].discard(), 0, 'not_found');
    await c2.close();
    await w.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('db.query offline: the last answer of the query comes from the cache (fromCache), its documents as the local view shows them', async () => {
  const dir = await tempDir();
  const net = cuttable();
  try {
    const { c, user } = await newUser({ ...fast, persistence: 'file:' + dir, fetch: net.fetch, retries: 0 });
    const base = `users/${user.id}/orders`;
    for (const [id, total] of [['o1', 10], ['o2', 40], ['o3', 70]]) await c.db.set(`${base}/${id}`, { total });
    const q = { collection: base, where: [{ field: 'total', op: '>', value: 20 }], orderBy: [{ field: 'total' }] };
    const online = await c.db.query(q);
    assert.equal(online.fromCache, undefined);
    assert.deepEqual(online.documents.map((d) => d.data.total), [40, 70]);
    await rejectsWith(c.db.query({ ...q, limit: 1 }, { source: 'cache' }), 0, 'not_cached');

    net.offline = true;
    c.db.update(`${base}/o2`, { oldKey: 'total', value: 45 }).catch(() => {});
    c.db.delete(`${base}/o3`).catch(() => {});
    const off = await c.db.query(q);
    assert.equal(off.fromCache, true);
    assert.deepEqual(off.documents.map((d) => [d.collection, d.data.total, d.pendingWrites]), [[`${base}/o2`, 45, true]]);
    // A query never answered throws the network error.
    await rejectsWith(c.db.query({ ...q, limit: 1 }), 0, 'network_error');
    // The documents of the answer are in the document cache too.
    assert.deepEqual((await c.db.get(`${base}/o3`, { source: 'cache' })), null);
    assert.equal((await c.db.get(`${base}/o2`, { source: 'cache' })).data.total, 45);

    net.offline = false;
    c.writes.replay();
    await c.writes.settled();
    assert.deepEqual((await c.db.query(q)).documents.map((d) => d.data.total), [45]);
    await c.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
