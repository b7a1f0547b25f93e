import { test } from 'node:test';
import { assert, client, EdgebaseError, newUser, owner, rejectsWith, unique } from './helpers.mjs';

test('documents: set, get, update, rename, deleteField, delete, list', async () => {
  const { c, user } = await newUser();
  const base = `users/${user.id}/notes`;
  assert.equal(await c.db.get(base + '/missing'), null);

  const a = await c.db.set(base + '/a', { title: 'first', n: 1 });
  assert.equal(a.created, true);
  assert.equal(a.collection, base + '/a');
  assert.deepEqual(a.data, { title: 'first', n: 1 });
  assert.ok(a.revision > 0);
  assert.ok(a.createTime && a.updateTime);
  const a2 = await c.db.set(base + '/a', { title: 'second', n: 2 });
  assert.equal(a2.created, false);
  assert.ok(a2.revision > a.revision);

  const got = await c.db.get(base + '/a', { minRevision: a2.revision, consistency: 'local' });
  assert.deepEqual(got.data, { title: 'second', n: 2 });
  assert.equal(got.revision, a2.revision);

  const u = await c.db.update(base + '/a', { oldKey: 'n', value: 3, type: 'integer' });
  assert.deepEqual(u.data, { title: 'second', n: 3 });
  assert.ok(u.revision > a2.revision);
  const rn = await c.db.update(base + '/a', { oldKey: 'title', newKey: 'name', value: 'renamed', type: 'string' });
  assert.deepEqual(rn.data, { name: 'renamed', n: 3 });
  const df = await c.db.deleteField(base + '/a', 'n');
  assert.deepEqual(df.data, { name: 'renamed' });

  await c.db.set(base + '/b', { i: 2 });
  await c.db.set(base + '/c', { i: 3 });
  const p1 = await c.db.list(base, { limit: 2 });
  assert.deepEqual(p1.documents.map((d) => d.collection), [base + '/a', base + '/b']);
  assert.ok(p1.nextPageToken);
  const p2 = await c.db.list(base, { limit: 2, pageToken: p1.nextPageToken });
  assert.deepEqual(p2.documents.map((d) => d.collection), [base + '/c']);
  assert.equal(p2.nextPageToken, undefined);

  const del = await c.db.delete(base + '/a');
  assert.equal(del.deleted, true);
  assert.ok(del.revision > df.revision);
  assert.equal(await c.db.get(base + '/a', { minRevision: del.revision }), null);
});

test('If-Match guards writes; 412 otherwise', async () => {
  const { c, user } = await newUser();
  const p = `users/${user.id}/guarded`;
  const created = await c.db.set(p, { v: 1 }, { ifMatch: 0 });
  assert.equal(created.created, true);
  await rejectsWith(c.db.set(p, { v: 2 }, { ifMatch: 0 }), 412, 'precondition_failed');
  await rejectsWith(c.db.set(p, { v: 2 }, { ifMatch: created.revision + 100 }), 412, 'precondition_failed');
  const next = await c.db.set(p, { v: 2 }, { ifMatch: created.revision });
  await rejectsWith(c.db.update(p, { oldKey: 'v', value: 3 }, { ifMatch: created.revision }), 412, 'precondition_failed');
  const upd = await c.db.update(p, { oldKey: 'v', value: 3 }, { ifMatch: next.revision });
  await rejectsWith(c.db.deleteField(p, 'v', { ifMatch: next.revision }), 412, 'precondition_failed');
  await rejectsWith(c.db.delete(p, { ifMatch: next.revision }), 412, 'precondition_failed');
  const del = await c.db.delete(p, { ifMatch: upd.revision });
  assert.equal(del.deleted, true);
});

test('batch commits atomically at one revision', async () => {
  const { c, user } = await newUser();
  const b = `users/${user.id}/batch`;
  await c.db.set(b + '/x', { keep: true, list: [1] });
  const r = await c.db.batch([
    { op: 'set', collection: b + '/a', data: { n: 1 } },
    { op: 'update', collection: b + '/x', oldKey: 'keep', newKey: 'kept', value: 'yes' },
    { op: 'increment', collection: b + '/counter', field: 'hits', by: 5 },
    { op: 'serverTimestamp', collection: b + '/a', field: 'at' },
    { op: 'arrayUnion', collection: b + '/x', field: 'list', values: [1, 2] },
    { op: 'deleteField', collection: b + '/x', field: 'kept' },
  ]);
  assert.ok(r.revision > 0);
  assert.equal(r.results.length, 6);
  for (const res of r.results) assert.equal(res.revision, r.revision);
  assert.deepEqual((await c.db.get(b + '/x')).data, { list: [1, 2] });
  assert.equal((await c.db.get(b + '/counter')).data.hits, 5);
  assert.match((await c.db.get(b + '/a')).data.at, /^\d{4}-\d\d-\d\dT/);

  const r2 = await c.db.batch([{ op: 'delete', collection: b + '/a', ifMatch: r.revision }]);
  assert.equal(r2.results[0].exists, false);

  // One refused write refuses all; field names the write.
  await rejectsWith(c.db.batch([
    { op: 'set', collection: b + '/y', data: { n: 1 } },
    { op: 'delete', collection: b + '/missing' },
  ]), 404, 'not_found', 'writes[1]');
  assert.equal(await c.db.get(b + '/y'), null);
  await rejectsWith(c.db.batch([{ op: 'set', collection: b + '/z', data: {}, ifMatch: 7 }]), 412, 'precondition_failed', 'writes[0]');
  await rejectsWith(c.db.batch([{ op: 'set', collection: 'elsewhere/doc', data: {} }]), 403, 'forbidden', 'writes[0]');
  await rejectsWith(c.db.batch([{ op: 'nope', collection: b + '/z' }]), 400, 'invalid_argument');
  await rejectsWith(c.db.batch([]), 400, 'invalid_argument');
});

test('bad input and access: the API error codes', async () => {
  const { c, user } = await newUser();
  const mine = `users/${user.id}/doc`;
  await rejectsWith(c.db.get(''), 400, 'invalid_path', 'collection');
  await rejectsWith(c.db.get('a//b'), 400, 'invalid_path', 'collection');
  await rejectsWith(c.db.set('_private/x', { a: 1 }), 400, 'invalid_path');
  await rejectsWith(c.db.set(mine, [1, 2]), 400, 'invalid_argument');
  await rejectsWith(c.db.get(mine, { consistency: 'eventual' }), 400, 'invalid_argument', 'consistency');
  await rejectsWith(c.db.list(mine, { limit: 5000 }), 400, 'invalid_argument');
  await rejectsWith(c.db.get('users/someone-else/doc'), 403, 'forbidden');
  await rejectsWith(c.db.set('shared/doc', { a: 1 }), 403, 'forbidden');
  await rejectsWith(c.db.delete(mine), 404, 'not_found');
  await c.db.set(mine, { a: 1, b: 2 });
  await rejectsWith(c.db.deleteField(mine, 'zz'), 404, 'field_not_found');
  await rejectsWith(c.db.update(mine, { oldKey: 'zz', newKey: 'yy', value: 1 }), 404, 'field_not_found');
  await rejectsWith(c.db.update(mine, { oldKey: 'a', newKey: 'b', value: 1 }), 409, 'field_exists');
  await rejectsWith(c.db.update(mine, { oldKey: 'a', value: 'text', type: 'number' }), 400, 'invalid_argument');
  await rejectsWith(c.db.set(mine, { big: 'x'.repeat((1 << 20) + 10) }), 413, 'document_too_large');
  await rejectsWith(client().db.get(mine), 401, 'missing_token');
  await rejectsWith(c.db.getRules(), 403, 'forbidden');
});

test('owner: rules round trip', async () => {
  const o = await owner();
  const { rules } = await o.db.getRules();
  assert.ok(rules.length >= 2);
  const r = await o.db.setRules(rules);
  assert.ok(r.revision > 0);
  await rejectsWith(o.db.setRules([{ match: '**', read: 'nonsense ==', write: '' }]), 400, 'invalid_argument', 'rules[0].read');
  const owned = await o.db.set(unique('shared') + '/doc', { a: 1 });
  assert.equal(owned.created, true);
});

// ---- retry policy, with a fetch that answers what the test wants ----

function scripted(answers) {
  const calls = [];
  const f = async (url, init) => {
    calls.push({ url, init });
    const a = answers.shift();
    if (a instanceof Error) throw a;
    const headers = new Headers(a.headers || {});
    headers.set('Content-Type', 'application/json');
    return new Response(JSON.stringify(a.body), { status: a.status, headers });
  };
  return { f, calls };
}

const unavailable = (msg, retryAfter = '0') => ({
  status: 503, headers: { 'Retry-After': retryAfter }, body: { error: { code: 'unavailable', message: msg } },
});
const doc = { collection: 'a/b', data: {}, revision: 9, createTime: 't', updateTime: 't' };

test('retries: reads and If-Match writes retry 503/429; others never', async () => {
  // A read retries a 503 and a 429, honouring Retry-After.
  let s = scripted([unavailable('retry'), { status: 429, headers: { 'Retry-After': '1' }, body: { error: { code: 'rate_limited', message: 'slow down' } } }, { status: 200, body: doc }]);
  let c = client({ fetch: s.f });
  const t0 = Date.now();
  assert.deepEqual(await c.db.get('a/b'), doc);
  assert.equal(s.calls.length, 3);
  assert.ok(Date.now() - t0 >= 900, 'Retry-After: 1 was honoured');

  // A plain write is not retried.
  s = scripted([unavailable('the cluster has no leader right now; retry'), { status: 200, body: doc }]);
  c = client({ fetch: s.f });
  await rejectsWith(c.db.set('a/b', {}), 503, 'unavailable');
  assert.equal(s.calls.length, 1);

  // A write with ifMatch is retried...
  s = scripted([{ status: 503, headers: { 'Retry-After': '0' }, body: { error: { code: 'no_leader', message: 'no leader' } } }, { status: 200, headers: { 'X-Revision': '9' }, body: doc }]);
  c = client({ fetch: s.f });
  assert.equal((await c.db.set('a/b', {}, { ifMatch: 3 })).revision, 9);
  assert.equal(s.calls.length, 2);
  assert.equal(s.calls[1].init.headers['If-Match'], '3');

  // ...but never after "may or may not have been applied".
  s = scripted([unavailable('the write may or may not have been applied; read before retrying', '1'), { status: 200, body: doc }]);
  c = client({ fetch: s.f });
  await assert.rejects(c.db.set('a/b', {}, { ifMatch: 3 }), (e) => {
    assert.ok(e instanceof EdgebaseError);
    assert.equal(e.unknownOutcome, true);
    assert.equal(e.retryAfter, 1);
    return true;
  });
  assert.equal(s.calls.length, 1);

  // Bounded: the third retry's answer is thrown.
  s = scripted([unavailable('a'), unavailable('b'), unavailable('c'), unavailable('d'), { status: 200, body: doc }]);
  c = client({ fetch: s.f });
  await rejectsWith(c.db.get('a/b'), 503, 'unavailable');
  assert.equal(s.calls.length, 4);

  // A Retry-After longer than maxRetryWait is thrown at once.
  s = scripted([unavailable('later', '120'), { status: 200, body: doc }]);
  c = client({ fetch: s.f });
  await assert.rejects(c.db.get('a/b'), (e) => e.retryAfter === 120);
  assert.equal(s.calls.length, 1);

  // A network failure: reads retry, writes throw it as network_error with an unknown outcome.
  s = scripted([new TypeError('fetch failed'), { status: 200, body: doc }]);
  c = client({ fetch: s.f });
  assert.deepEqual(await c.db.get('a/b'), doc);
  s = scripted([new TypeError('fetch failed')]);
  c = client({ fetch: s.f });
  await assert.rejects(c.db.delete('a/b'), (e) => e.status === 0 && e.code === 'network_error' && e.unknownOutcome === true);

  // A batch is retried only when every write carries ifMatch.
  s = scripted([unavailable('x'), { status: 200, body: { revision: 4, results: [] } }]);
  c = client({ fetch: s.f });
  await rejectsWith(c.db.batch([{ op: 'delete', collection: 'a/b', ifMatch: 1 }, { op: 'delete', collection: 'a/c' }]), 503, 'unavailable');
  s = scripted([unavailable('x'), { status: 200, body: { revision: 4, results: [] } }]);
  c = client({ fetch: s.f });
  assert.equal((await c.db.batch([{ op: 'delete', collection: 'a/b', ifMatch: 1 }])).revision, 4);
});
