// The SDK methods the admin console uses: the owner's tools (children,
// rules test, indexes, roles, a user's sessions, push administration) and
// the operator client (projects, cluster, backup, metrics).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { createOperator, EdgebaseError } from '../edgebase.js';
import { env, client, owner, newUser, unique, rejectsWith, waitFor, PASSWORD } from './helpers.mjs';

const operator = (extra = {}) => createOperator({ url: env.url, adminToken: env.adminToken, ...extra });

/** Asserts that p rejects with an EdgebaseError of that status (and field), whatever its code. */
async function rejectsStatus(p, status, field) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof EdgebaseError, `not an EdgebaseError: ${e}`);
    assert.equal(e.status, status, `status of ${e.code}: ${e.message}`);
    if (field !== undefined) assert.equal(e.field, field, e.message);
    return true;
  });
}

test('createOperator needs an adminToken and sends it as a bearer without X-Project-Id', async () => {
  assert.throws(() => createOperator({ url: env.url }), (e) => e instanceof EdgebaseError && e.field === 'adminToken');
  const seen = [];
  const op = operator({
    fetch: (url, init) => {
      seen.push({ url, headers: init.headers });
      return fetch(url, init);
    },
  });
  const st = await op.cluster.status();
  assert.equal(seen.length, 1);
  assert.equal(seen[0].headers.Authorization, 'Bearer ' + env.adminToken);
  assert.equal(seen[0].headers['X-Project-Id'], undefined);
  assert.equal(st.leader, 'n1');
  assert.equal(st.nodes.length, 1);
  const n = st.nodes[0];
  assert.equal(n.id, 'n1');
  assert.equal(n.voter, true);
  assert.equal(n.state, 'leader');
  assert.ok(n.appliedIndex > 0);
  assert.match(n.httpAddr, /^http:\/\/127\.0\.0\.1:\d+$/);

  await rejectsWith(createOperator({ url: env.url, adminToken: 'wrong' }).cluster.status(), 401, 'invalid_token');
  await rejectsWith(op.cluster.removeNode('n9'), 404, 'not_found');
});

test('operator projects: create (the key works), set an owner, bad input', async () => {
  const op = operator();
  const ownerEmail = unique('op-owner') + '@example.com';
  const created = await op.projects.create({ name: 'console test', ownerEmail, ownerPassword: PASSWORD });
  assert.match(created.projectId, /^[A-Za-z0-9-]+$/);
  assert.ok(created.apiKey.length > 20);
  assert.ok(created.ownerId);
  assert.ok(created.revision > 0);
  // The new project's key signs its owner in.
  const c = client({ projectId: created.projectId, apiKey: created.apiKey });
  const li = await c.auth.login(ownerEmail, PASSWORD);
  assert.equal(li.requiresTotp, false);
  assert.equal(li.user.role, 'owner');
  // A second account becomes an owner through the operator.
  const other = unique('op-user') + '@example.com';
  await client({ projectId: created.projectId, apiKey: created.apiKey }).auth.register(other, PASSWORD);
  const so = await op.projects.setOwner(created.projectId, other);
  assert.equal(so.user.email, other);
  assert.equal(so.user.role, 'owner');
  assert.ok(so.revision >= created.revision);

  await rejectsWith(op.projects.create({ name: '', ownerEmail, ownerPassword: PASSWORD }), 400, 'invalid_argument', 'name');
  await rejectsWith(op.projects.create({ name: 'x', ownerEmail: '', ownerPassword: PASSWORD }), 400, 'invalid_argument', 'ownerEmail');
  await rejectsWith(op.projects.setOwner(created.projectId, 'nobody@example.com'), 404, 'not_found', 'email');
  await rejectsWith(op.projects.setOwner(created.projectId, ''), 400, 'invalid_argument', 'email');
});

test('operator projects.list pages over every project', async () => {
  const op = operator();
  const seen = new Map();
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const page = await op.projects.list({ limit: 1, cursor });
    assert.ok(Array.isArray(page.projects));
    assert.ok(page.projects.length <= 1);
    for (const p of page.projects) {
      assert.ok(!seen.has(p.id), 'project listed twice: ' + p.id);
      seen.set(p.id, p);
    }
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  const mine = seen.get(env.projectId);
  assert.ok(mine, 'the test project is listed');
  assert.equal(mine.name, 'sdk-js');
  assert.equal(typeof mine.documents, 'number');
  assert.equal(typeof mine.bytes, 'number');
  assert.ok(!Number.isNaN(Date.parse(mine.createdAt)));
  await rejectsWith(op.projects.list({ limit: -1 }), 400, 'invalid_argument');
});

test('operator backup: a blob with the backup header, its filename and revision', async () => {
  const o = await owner();
  const w = await o.db.set('console/backup', { at: 1 });
  const b = await operator().backup();
  assert.ok(b.blob instanceof Blob);
  assert.ok(b.blob.size > 100);
  const head = new TextDecoder().decode(new Uint8Array(await b.blob.slice(0, 16).arrayBuffer()));
  assert.equal(head, 'edgebase backup\n');
  assert.equal(b.filename, 'edgebase.backup');
  assert.equal(typeof b.revision, 'number');
  assert.ok(b.revision >= w.revision, `backup revision ${b.revision} < write ${w.revision}`);
  await rejectsWith(createOperator({ url: env.url, adminToken: 'nope' }).backup(), 401, 'invalid_token');
});

test('operator metrics: the Prometheus text of the node', async () => {
  const text = await operator().metrics();
  assert.equal(typeof text, 'string');
  assert.match(text, /^# (HELP|TYPE) /m);
  assert.match(text, /edgebase_/);
});

test('operator transferLeadership: a single voter has nobody to hand over to', async () => {
  const op = operator();
  await rejectsWith(op.cluster.transferLeadership('n9'), 404, 'not_found', 'id');
  // The only voter has nobody to hand over to.
  await rejectsWith(op.cluster.transferLeadership(), 409, 'no_other_voter');
  await rejectsWith(createOperator({ url: env.url, adminToken: 'nope' }).cluster.transferLeadership(), 401, 'invalid_token');
});

test('db indexes: set, get, bad definitions, owner only', async () => {
  const o = await owner();
  const before = await o.db.getIndexes();
  assert.ok(Array.isArray(before.indexes));
  const coll = 'cx' + unique('i').replace(/-/g, '');
  const keep = before.indexes.map(({ collection, collectionGroup, fields }) => (collectionGroup ? { collection, collectionGroup, fields } : { collection, fields }));
  const set = await o.db.setIndexes([...keep, { collection: coll, fields: [{ field: 'status' }, { field: 'at', direction: 'desc' }] }]);
  assert.ok(set.revision > 0);
  const mine = set.indexes.find((i) => i.collection === coll);
  assert.ok(mine && mine.id);
  assert.ok(['building', 'ready'].includes(mine.state));
  const got = await waitFor(async () => {
    const g = await o.db.getIndexes({ minRevision: set.revision });
    const i = g.indexes.find((x) => x.id === mine.id);
    return i && i.state === 'ready' ? g : null;
  }, 15000, 'index ready');
  assert.deepEqual(got.indexes.find((x) => x.id === mine.id).fields, [{ field: 'status', direction: 'asc' }, { field: 'at', direction: 'desc' }]);
  await rejectsWith(o.db.setIndexes([{ collection: coll, fields: [{ field: 'a', direction: 'up' }] }]), 400, 'invalid_argument', 'indexes[0].fields[0].direction');
  const { c } = await newUser();
  await rejectsWith(c.db.getIndexes(), 403, 'forbidden');
  // Restore the list as it was.
  await o.db.setIndexes(keep);
});

test('admin.users.setRole: owner and back, bad role, not an owner', async () => {
  const o = await owner();
  const { c, user } = await newUser();
  const up = await o.admin.users.setRole(user.id, 'owner');
  assert.equal(up.user.id, user.id);
  assert.equal(up.user.role, 'owner');
  assert.ok(up.revision > 0);
  const down = await o.admin.users.setRole(user.id, 'user');
  assert.equal(down.user.role, 'user');
  assert.ok(down.revision > up.revision);
  await rejectsWith(o.admin.users.setRole(user.id, 'king'), 400, 'invalid_argument');
  await rejectsWith(o.admin.users.setRole('no-such-user', 'owner'), 404, 'not_found');
  await rejectsWith(c.admin.users.setRole(user.id, 'owner'), 403, 'forbidden');
});

test('push credentials: get, set from an object and from a string, bad input', async () => {
  const o = await owner();
  const before = await o.push.getCredentials();
  assert.equal(typeof before.configured, 'boolean');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const sa = {
    type: 'service_account', project_id: 'console-fcm', private_key_id: 'abc123',
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
    client_email: 'firebase-adminsdk@console-fcm.iam.gserviceaccount.com', client_id: '1',
    token_uri: 'https://oauth2.googleapis.com/token',
  };
  const set = await o.push.setCredentials(sa);
  assert.equal(set.configured, true);
  assert.equal(set.fcmProjectId, 'console-fcm');
  assert.equal(set.clientEmail, sa.client_email);
  assert.ok(set.revision > 0);
  assert.equal(set.private_key, undefined);
  const again = await o.push.setCredentials(JSON.stringify({ ...sa, project_id: 'console-fcm-2' }));
  assert.equal(again.fcmProjectId, 'console-fcm-2');
  const got = await o.push.getCredentials();
  assert.equal(got.configured, true);
  assert.equal(got.fcmProjectId, 'console-fcm-2');
  assert.ok(!JSON.stringify(got).includes('PRIVATE KEY'));
  await rejectsWith(o.push.setCredentials('{not json'), 400, 'invalid_json');
  const { c } = await newUser();
  await rejectsWith(c.push.getCredentials(), 403, 'forbidden');
});

test('db.children: the direct child segments, paged, owner only', async () => {
  const o = await owner();
  const base = 'kids' + unique('c').replace(/-/g, '');
  await o.db.set(base + '/a', { n: 1 });
  await o.db.set(base + '/b/x/y', { n: 2 });
  const w = await o.db.set(base + '/c', { n: 3 });
  await o.db.set(base + '/c/d', { n: 4 });
  const all = await o.db.children(base, { minRevision: w.revision });
  assert.deepEqual(all.children.map((x) => [x.name, x.path, x.document, x.children]), [
    ['a', base + '/a', true, false],
    ['b', base + '/b', false, true],
    ['c', base + '/c', true, true],
  ]);
  assert.equal(all.nextPageToken, undefined);
  const p1 = await o.db.children(base, { limit: 2 });
  assert.equal(p1.children.length, 2);
  assert.ok(p1.nextPageToken);
  const p2 = await o.db.children(base, { limit: 2, pageToken: p1.nextPageToken });
  assert.deepEqual(p2.children.map((x) => x.name), ['c']);
  const root = await o.db.children('');
  assert.ok(root.children.length > 0);
  assert.ok(root.children.every((x) => !x.name.startsWith('_')));
  await rejectsWith(o.db.children(base, { limit: 0 }), 400, 'invalid_argument', 'limit');
  const { c } = await newUser();
  await rejectsWith(c.db.children(base), 403, 'forbidden');
});

test('db.testRules: evaluates without saving', async () => {
  const o = await owner();
  const { user } = await newUser();
  const rules = [{ match: 'tr/{id}', read: "auth.uid != ''", write: "auth.uid != '' && auth.uid == id" }];
  const anon = await o.db.testRules({ op: 'read', path: 'tr/x', rules });
  assert.equal(anon.allowed, false);
  assert.equal(anon.auth, null);
  const signed = await o.db.testRules({ op: 'read', path: 'tr/x', userId: user.id, rules });
  assert.equal(signed.allowed, true);
  assert.equal(signed.rule, 0);
  assert.equal(signed.match, 'tr/{id}');
  assert.equal(signed.expression, "auth.uid != ''");
  assert.equal(signed.auth.uid, user.id);
  const own = await o.db.testRules({ op: 'write', path: 'tr/' + user.id, userId: user.id, data: { a: 1 }, rules });
  assert.equal(own.allowed, true);
  const other = await o.db.testRules({ op: 'write', path: 'tr/someone', userId: user.id, data: { a: 1 }, rules });
  assert.equal(other.allowed, false);
  const none = await o.db.testRules({ op: 'read', path: 'elsewhere/x', rules });
  assert.equal(none.allowed, false);
  assert.equal(none.rule, -1);
  await rejectsStatus(o.db.testRules({ op: 'read', path: 'tr/x', rules: [{ match: 'tr/{id}', read: 'auth ==', write: 'false' }] }), 400, 'rules[0].read');
  await rejectsWith(o.db.testRules({ op: 'read', path: 'tr/x', userId: 'no-such-user' }), 404, 'not_found', 'userId');
  await rejectsWith(o.db.testRules({ op: 'delete', path: 'tr/x' }), 400, 'invalid_argument', 'op');
  await rejectsWith(o.db.testRules({ op: 'read', path: '/bad//path' }), 400, 'invalid_path', 'path');
});

test('admin.users.sessions and revokeSession', async () => {
  const o = await owner();
  const { c, user } = await newUser();
  const list = await o.admin.users.sessions(user.id);
  assert.equal(list.length, 1);
  const s = list[0];
  for (const k of ['id', 'createdAt', 'lastUsedAt', 'address', 'userAgent']) assert.equal(typeof s[k], 'string', k);
  const r = await o.admin.users.revokeSession(user.id, s.id);
  assert.equal(r.ok, true);
  assert.ok(r.revision > 0);
  await rejectsStatus(c.auth.me({ minRevision: r.revision }), 401);
  assert.deepEqual(await o.admin.users.sessions(user.id), []);
  const { c: plain } = await newUser();
  await rejectsWith(plain.admin.users.sessions(user.id), 403, 'forbidden');
});

test('push administration: devices and topics of a user, project topics, pushEnabled', async () => {
  const o = await owner();
  const { c, user } = await newUser();
  const topic = unique('news');
  const token = unique('device-token') + 'x'.repeat(40);
  await c.push.register(token, 'web');
  await c.push.subscribe(topic);
  const devices = await o.push.devices({ userId: user.id });
  assert.deepEqual(devices.map((d) => d.token), [token]);
  assert.deepEqual(await o.push.topics({ userId: user.id }), [topic]);
  const pt = await o.push.projectTopics();
  assert.deepEqual(pt.find((x) => x.topic === topic), { topic, subscribers: 1 });
  const on = await o.push.pushEnabled();
  assert.equal(on.projectId, env.projectId);
  assert.equal(typeof on.pushEnabled, 'boolean');
  const { user: u2, c: c2 } = await newUser();
  await rejectsWith(c2.push.devices({ userId: user.id }), 403, 'forbidden');
  await rejectsWith(c2.push.projectTopics(), 403, 'forbidden');
  assert.deepEqual(await c2.push.devices({ userId: u2.id }), []);
});
