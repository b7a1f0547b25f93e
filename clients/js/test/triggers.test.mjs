// client.triggers against a real node: a webhook trigger delivering to a
// real HTTP receiver of the test (node:http on loopback, allowed by the
// node's --allow-private-webhooks 127.0.0.1), which checks the signature
// with its own HMAC; the status; bad input; dead letters and their replay.
import { test, after } from 'node:test';
import { createServer } from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { assert, owner, newUser, unique, rejectsWith, waitFor } from './helpers.mjs';

/**
 * A webhook receiver: every request is kept ({headers, raw, body, status});
 * answer(req) gives the status to answer (default 200).
 */
async function startReceiver() {
  const r = { requests: [], answer: () => 200 };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try {
        body = JSON.parse(raw);
      } catch (_) {
        // kept as raw: the assertions say what is wrong
      }
      const got = { method: req.method, url: req.url, headers: req.headers, raw, body };
      got.status = r.answer(got);
      r.requests.push(got);
      res.writeHead(got.status, { 'Content-Type': 'text/plain' });
      res.end(got.status < 300 ? 'ok' : 'no');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${server.address().port}`;
  r.close = () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); });
  /** The requests to path (the receiver's URL path), in arrival order. */
  r.to = (path) => r.requests.filter((x) => x.url === path);
  return r;
}

const receiver = await startReceiver();
after(() => receiver.close());

/**
 * verify checks Edgebase-Signature as a receiver does (Stripe's scheme):
 * t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>, t within
 * 5 minutes. Returns the reason it fails, or '' when it holds.
 */
function verify(secret, header, raw) {
  const parts = Object.fromEntries(String(header || '').split(',').map((p) => p.split('=', 2)));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || !parts.v1) return `malformed signature header ${JSON.stringify(header)}`;
  if (Math.abs(Date.now() / 1000 - t) > 300) return `timestamp ${t} is more than 5 minutes away`;
  const want = createHmac('sha256', secret).update(`${t}.${raw}`).digest();
  const got = Buffer.from(parts.v1, 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want)) return 'the signature does not match the body';
  return '';
}

/** checkDelivery asserts the wire of one delivery: headers, signature, payload. */
function checkDelivery(d, secret, name, attempt = 1) {
  assert.equal(d.method, 'POST');
  assert.match(d.headers['content-type'], /^application\/json/);
  assert.equal(d.headers['user-agent'], 'edgebase-webhooks/1');
  assert.equal(verify(secret, d.headers['edgebase-signature'], d.raw), '', `signature of ${d.raw}`);
  assert.ok(d.body, `the body is JSON: ${d.raw}`);
  assert.equal(d.headers['idempotency-key'], d.body.id);
  // trigger:revision:path, the path escaped as Go's url.PathEscape (the same as encodeURIComponent here).
  assert.equal(d.body.id, `${name}:${d.body.revision}:${encodeURIComponent(d.body.path)}`);
  assert.equal(d.headers['edgebase-trigger'], name);
  assert.equal(d.headers['edgebase-revision'], String(d.body.revision));
  assert.equal(d.headers['edgebase-attempt'], String(attempt));
  assert.equal(d.body.trigger, name);
  assert.ok(!Number.isNaN(Date.parse(d.body.time)), `time ${d.body.time}`);
}

test('a webhook trigger delivers every change of its match, signed, in order; list and get show its status', async () => {
  const o = await owner();
  const name = unique('hook');
  const coll = unique('orders');
  const secret = 'whsec_' + unique('test');
  const hookPath = '/' + name;

  const put = await o.triggers.put(name, { match: `${coll}/{id}`, action: { webhook: { url: receiver.url + hookPath, secret } } });
  assert.equal(put.created, true);
  assert.ok(put.revision > 0, `revision ${put.revision}`);
  assert.equal(put.trigger.name, name);
  assert.equal(put.trigger.match, `${coll}/{id}`);
  assert.deepEqual([...put.trigger.on].sort(), ['create', 'delete', 'update']);
  assert.equal(put.trigger.action.webhook.secret, secret, 'the secret sent is answered once');

  const got = await o.triggers.get(name);
  assert.equal(got.name, name);
  assert.equal(got.action.webhook.url, receiver.url + hookPath);
  assert.equal(got.action.webhook.secret, undefined, 'GET never shows the secret');
  assert.equal(got.action.webhook.secretHint, secret.slice(-4));
  assert.equal(typeof got.status.cursor, 'number');

  // A document outside the match fires nothing; three changes of one inside do.
  await o.db.set(unique('other') + '/x', { n: 0 });
  const created = await o.db.set(`${coll}/a`, { n: 1 });
  const updated = await o.db.set(`${coll}/a`, { n: 2 });
  const deleted = await o.db.delete(`${coll}/a`);
  await waitFor(() => receiver.to(hookPath).length >= 3, 20000, 'three deliveries');
  const ds = receiver.to(hookPath);
  for (const d of ds) checkDelivery(d, secret, name);
  // One node, no leadership change: each change exactly once, in revision order.
  const revs = ds.map((d) => d.body.revision);
  assert.deepEqual(revs, [created.revision, updated.revision, deleted.revision], `revisions ${revs}`);
  const [c, u, del] = [created.revision, updated.revision, deleted.revision].map((rev) => ds.find((d) => d.body.revision === rev).body);
  assert.equal(c.type, 'create');
  assert.equal(c.path, `${coll}/a`);
  assert.equal(c.before, null);
  assert.deepEqual(c.after, { n: 1 });
  assert.deepEqual(c.params, { id: 'a' });
  assert.equal(u.type, 'update');
  assert.deepEqual(u.before, { n: 1 });
  assert.deepEqual(u.after, { n: 2 });
  assert.equal(del.type, 'delete');
  assert.deepEqual(del.before, { n: 2 });
  assert.equal(del.after, null);

  // The status: delivered, the cursor past the last change (checkpointed shortly after).
  const st = await waitFor(async () => {
    const t = (await o.triggers.list()).find((x) => x.name === name);
    return t && t.status.delivered >= 3 && t.status.cursor >= deleted.revision ? t.status : null;
  }, 10000, 'the status to show 3 deliveries');
  assert.equal(st.pending, 0);
  assert.equal(st.deadLetters, 0);
  assert.ok(st.lastSuccessAt, 'lastSuccessAt');
  const names = (await o.triggers.list()).map((t) => t.name);
  assert.deepEqual(names, [...names].sort(), 'list is sorted by name');

  // Replacing it without a secret keeps the secret: the next delivery still verifies.
  const again = await o.triggers.put(name, { match: `${coll}/{id}`, on: ['create'], condition: 'after.n > 5', action: { webhook: { url: receiver.url + hookPath } } });
  assert.equal(again.created, false);
  assert.equal(again.trigger.action.webhook.secret, undefined);
  assert.equal(again.trigger.action.webhook.secretHint, secret.slice(-4));
  assert.deepEqual(again.trigger.on, ['create']);
  await o.db.set(`${coll}/small`, { n: 1 }); // condition false: not delivered
  const big = await o.db.set(`${coll}/big`, { n: 9 });
  await waitFor(() => receiver.to(hookPath).some((d) => d.body.revision === big.revision), 20000, 'the delivery after the replace');
  const later = receiver.to(hookPath).filter((d) => d.body.revision > deleted.revision);
  assert.ok(later.every((d) => d.body.path === `${coll}/big`), `only the change that meets the condition: ${later.map((d) => d.body.path)}`);
  checkDelivery(later[0], secret, name);

  const gone = await o.triggers.delete(name);
  assert.equal(gone.deleted, true);
  assert.ok(gone.revision > big.revision);
  assert.equal(await o.triggers.get(name), null);
  assert.ok(!(await o.triggers.list()).some((t) => t.name === name));
});

test('a secret made by the server is answered once and signs the deliveries', async () => {
  const o = await owner();
  const name = unique('made');
  const coll = unique('made');
  const hookPath = '/' + name;
  const put = await o.triggers.put(name, { match: `${coll}/**`, on: ['create'], action: { webhook: { url: receiver.url + hookPath } } });
  const secret = put.trigger.action.webhook.secret;
  assert.match(secret || '', /^whsec_[A-Za-z0-9_-]{40,}$/);
  assert.equal((await o.triggers.get(name)).action.webhook.secret, undefined);
  const w = await o.db.set(`${coll}/deep/er`, { x: 'y' });
  const d = await waitFor(() => receiver.to(hookPath)[0], 20000, 'the delivery');
  checkDelivery(d, secret, name);
  assert.equal(d.body.revision, w.revision);
  assert.equal(d.body.path, `${coll}/deep/er`);
  assert.match(verify('whsec_wrong', d.headers['edgebase-signature'], d.raw), /does not match/, 'the oracle can fail');
  await o.triggers.delete(name);
});

test('triggers: bad input, absent triggers, owners only', async () => {
  const o = await owner();
  const hook = { webhook: { url: receiver.url + '/bad' } };
  await rejectsWith(o.triggers.put('bad name!', { match: 'a/{id}', action: hook }), 400, 'invalid_argument');
  await rejectsWith(o.triggers.put('x'.repeat(65), { match: 'a/{id}', action: hook }), 400, 'invalid_argument');
  await rejectsWith(o.triggers.put(unique('t'), { action: hook }), 400, 'invalid_argument', 'match');
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', action: {} }), 400, 'invalid_argument', 'action');
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', on: ['created'], action: hook }), 400, 'invalid_argument');
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', condition: 'after.n >', action: hook }), 400, 'invalid_argument', 'condition');
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', action: { webhook: { url: 'ftp://example.com/x' } } }), 400, 'invalid_argument', 'action.webhook.url');
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', action: hook, extra: 1 }), 400, 'invalid_argument');
  // A private address not allowed by --allow-private-webhooks (only 127.0.0.1 is).
  await rejectsWith(o.triggers.put(unique('t'), { match: 'a/{id}', action: { webhook: { url: 'http://10.0.0.1/hook' } } }), 400, 'url_not_allowed', 'action.webhook.url');

  const absent = unique('absent');
  assert.equal(await o.triggers.get(absent), null);
  await rejectsWith(o.triggers.delete(absent), 404, 'not_found');
  await rejectsWith(o.triggers.deadLetters(absent), 404, 'not_found');
  await rejectsWith(o.triggers.replay(absent), 404, 'not_found');

  const { c } = await newUser();
  await rejectsWith(c.triggers.list(), 403, 'forbidden');
  await rejectsWith(c.triggers.put(unique('t'), { match: 'a/{id}', action: hook }), 403, 'forbidden');
});

test('a refused delivery (400) is a dead letter at once; replay delivers it when the receiver takes it', async () => {
  const o = await owner();
  const name = unique('dead');
  const coll = unique('dead');
  const hookPath = '/' + name;
  const secret = 'whsec_' + unique('dead');
  let accept = false;
  const prev = receiver.answer;
  receiver.answer = (req) => (req.url === hookPath && !accept ? 400 : prev(req));
  try {
    await o.triggers.put(name, { match: `${coll}/{id}`, on: ['create'], action: { webhook: { url: receiver.url + hookPath, secret } } });
    const w1 = await o.db.set(`${coll}/one`, { n: 1 });
    const w2 = await o.db.set(`${coll}/two`, { n: 2 });
    const page = await waitFor(async () => {
      const p = await o.triggers.deadLetters(name);
      return p.deadLetters.length >= 2 ? p : null;
    }, 20000, 'two dead letters');
    assert.equal(page.deadLetters.length, 2);
    assert.deepEqual(page.deadLetters.map((d) => d.revision).sort((a, b) => a - b), [w1.revision, w2.revision]);
    const one = page.deadLetters.find((d) => d.revision === w1.revision);
    assert.equal(one.path, `${coll}/one`);
    assert.equal(one.type, 'create');
    assert.deepEqual(one.after, { n: 1 });
    assert.equal(one.attempts, 1, 'a 400 is not retried');
    assert.match(one.lastError || '', /400/);
    assert.ok(!Number.isNaN(Date.parse(one.deadAt)), `deadAt ${one.deadAt}`);
    assert.equal(typeof one.id, 'string');
    assert.equal(receiver.to(hookPath).length, 2, 'one attempt each');

    const st = await waitFor(async () => {
      const t = await o.triggers.get(name);
      return t.status.deadLetters === 2 && t.status.dead >= 2 ? t.status : null;
    }, 10000, 'the status to count the dead letters');
    assert.match(st.lastError || '', /400/);
    assert.ok(st.failed >= 2);

    // Paging: one at a time.
    const p1 = await o.triggers.deadLetters(name, { limit: 1 });
    assert.equal(p1.deadLetters.length, 1);
    assert.ok(p1.nextPageToken, 'a next page');
    const p2 = await o.triggers.deadLetters(name, { limit: 1, pageToken: p1.nextPageToken });
    assert.equal(p2.deadLetters.length, 1);
    assert.notEqual(p2.deadLetters[0].id, p1.deadLetters[0].id);

    await rejectsWith(o.triggers.replay(name, [one.id, 'no-such-id']), 404, 'not_found', 'ids[1]');

    accept = true;
    const r = await o.triggers.replay(name, [one.id]);
    assert.equal(r.replayed, 1);
    assert.ok(r.revision > w2.revision);
    const ok = await waitFor(() => receiver.to(hookPath).find((d) => d.status === 200), 20000, 'the replayed delivery');
    checkDelivery(ok, secret, name);
    assert.equal(ok.body.revision, w1.revision);
    const left = await waitFor(async () => {
      const p = await o.triggers.deadLetters(name);
      return p.deadLetters.length === 1 ? p : null;
    }, 10000, 'one dead letter left');
    assert.equal(left.deadLetters[0].revision, w2.revision);

    // Replay without ids: all of them.
    const all = await o.triggers.replay(name);
    assert.equal(all.replayed, 1);
    await waitFor(() => receiver.to(hookPath).some((d) => d.status === 200 && d.body.revision === w2.revision), 20000, 'the second replayed delivery');
    await waitFor(async () => (await o.triggers.deadLetters(name)).deadLetters.length === 0, 10000, 'no dead letter left');
    await waitFor(async () => {
      const t = await o.triggers.get(name);
      return t.status.deadLetters === 0 && t.status.pending === 0 && t.status.delivered >= 2;
    }, 10000, 'the status after the replays');
  } finally {
    receiver.answer = prev;
    await o.triggers.delete(name).catch(() => {});
  }
});
