import { test } from 'node:test';
import {
  assert, assertOnceInOrder, controlledWebSocket, fast, keyOf, newUser, owner, PASSWORD, record, restartNode, waitFor, writerFor,
} from './helpers.mjs';

test('subscribe: snapshot, then every change once, batches at one revision; unsubscribe', async () => {
  const { c, user, email } = await newUser(fast);
  const w = await writerFor(email);
  const base = `users/${user.id}/live`;
  await w.db.set(base + '/a', { n: 1 });
  await w.db.set(base + '/b', { n: 2 });

  const r = record(c, base, { prefix: true });
  const one = record(c, base + '/a');
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
  const snap = r.events[0];
  assert.equal(snap.type, 'snapshot');
  assert.deepEqual(snap.documents.map((d) => [d.collection, d.data]), [[base + '/a', { n: 1 }], [base + '/b', { n: 2 }]]);
  assert.ok(snap.revision > 0);
  await one.until((ev) => ev.length >= 1, 10000, 'snapshot of one document');
  assert.deepEqual(one.events[0].documents.map((d) => d.collection), [base + '/a']);

  const s1 = await w.db.set(base + '/c', { n: 3 });
  const b = await w.db.batch([
    { op: 'set', collection: base + '/a', data: { n: 10 } },
    { op: 'delete', collection: base + '/b' },
    { op: 'set', collection: base + '/d/deep', data: { n: 4 } },
  ]);
  const u = await w.db.update(base + '/c', { oldKey: 'n', value: 30 });
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= 5, 10000, 'five changes');
  const ch = r.changes();
  assert.deepEqual(ch.map((e) => [e.revision, e.collection, e.changeType]), [
    [s1.revision, base + '/c', 'set'],
    [b.revision, base + '/a', 'set'],
    [b.revision, base + '/b', 'delete'],
    [b.revision, base + '/d/deep', 'set'],
    [u.revision, base + '/c', 'set'],
  ]);
  assert.deepEqual(ch[0].data, { n: 3 });
  assert.equal(ch[2].data, null);
  assert.ok(ch[0].updateTime);
  assert.equal(r.sub.revision, u.revision);
  await one.until((ev) => ev.length >= 2, 10000, 'change of a');
  assert.deepEqual(one.changes().map((e) => e.revision), [b.revision]);

  r.sub.unsubscribe();
  one.sub.unsubscribe();
  await w.db.set(base + '/e', { n: 5 });
  await new Promise((res) => setTimeout(res, 300));
  assert.equal(r.changes().length, 5, 'nothing after unsubscribe');
  await waitFor(() => c.realtime.status.state === 'idle', 5000, 'idle after the last unsubscribe');

  // A subscription the rules refuse ends with an error event.
  const denied = record(c, 'users/someone-else', { prefix: true });
  await denied.until((ev) => ev.length >= 1, 10000, 'forbidden');
  assert.equal(denied.events[0].type, 'error');
  assert.equal(denied.events[0].error.code, 'forbidden');
  const bad = record(c, 'a//b');
  await bad.until((ev) => ev.length >= 1, 10000, 'invalid_path');
  assert.equal(bad.events[0].error.code, 'invalid_path');
  c.close();
});

test('a connection cut in the middle of a batch: the rest arrives once after resuming', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const w = await writerFor(email);
  const base = `users/${user.id}/cut`;
  const r = record(c, base, { prefix: true });
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
  assert.equal(ws.state.opened, 1);

  // Cut after the second change of the batch.
  let seenOfBatch = 0;
  ws.dropWhen((m) => m.op === 'change' && ++seenOfBatch === 2);
  const b = await w.db.batch([1, 2, 3, 4].map((i) => ({ op: 'set', collection: `${base}/d${i}`, data: { i } })));
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= 4, 10000, 'four changes');
  assert.ok(ws.state.opened >= 2, 'reconnected');
  const after = await w.db.set(base + '/d5', { i: 5 });
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= 5, 10000, 'the fifth change');
  await new Promise((res) => setTimeout(res, 200));
  assert.deepEqual(r.changes().map(keyOf), [
    ...[1, 2, 3, 4].map((i) => `${b.revision} ${base}/d${i} set`),
    `${after.revision} ${base}/d5 set`,
  ]);
  assert.equal(r.ofType('snapshot').length, 1, 'resumed, not a second snapshot');
  assert.equal(r.ofType('reset').length, 0);
  c.close();
});

test('resumeEvents: a resumed event follows the replayed changes; other subscriptions get none', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const w = await writerFor(email);
  const base = `users/${user.id}/resumeev`;
  const r = record(c, base, { prefix: true, resumeEvents: true });
  const plain = record(c, base, { prefix: true });
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
  await plain.until((ev) => ev.length >= 1, 10000, 'snapshot');

  // The connection drops on the first change and cannot come back until a
  // second write has happened meanwhile.
  ws.block();
  ws.dropWhen((m) => m.op === 'change');
  const a = await w.db.set(base + '/a', { n: 1 });
  await waitFor(() => c.realtime.status.state !== 'ready', 10000, 'the drop');
  const b = await w.db.set(base + '/b', { n: 2 });
  ws.unblock();
  await r.until((ev) => ev.some((e) => e.type === 'resumed'), 10000, 'resumed');
  assert.ok(ws.state.opened >= 2, 'reconnected');
  const types = r.events.map((e) => e.type);
  assert.deepEqual(types, ['snapshot', 'change', 'change', 'resumed']);
  assert.deepEqual(r.changes().map((e) => e.revision), [a.revision, b.revision]);
  const resumed = r.ofType('resumed')[0];
  assert.ok(resumed.revision >= b.revision, `resumed at ${resumed.revision}, below ${b.revision}`);
  assert.equal(r.sub.revision, resumed.revision);

  await plain.until((ev) => ev.filter((e) => e.type === 'change').length >= 2, 10000, 'the plain subscription catches up');
  assert.deepEqual(plain.events.map((e) => e.type), ['snapshot', 'change', 'change']);
  c.close();
});

test('a token change re-authenticates the connection; no change is lost or repeated', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const w = await writerFor(email);
  const base = `users/${user.id}/reauth`;
  const r = record(c, base, { prefix: true });
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
  const x = await c.db.set(base + '/x', { v: 1 });
  await r.until((ev) => ev.some((e) => e.revision === x.revision), 10000, 'x');

  const opened = ws.state.opened;
  const cp = await c.auth.changePassword(PASSWORD, 'changed password 77');
  await waitFor(() => ws.state.opened > opened && c.realtime.status.state === 'ready', 10000, 'a new authenticated connection');
  // The writer's session ended with the password change; it signs in again.
  await w.auth.login(email, 'changed password 77');
  const y = await w.db.set(base + '/y', { v: 2 });
  await r.until((ev) => ev.some((e) => e.type === 'change' && e.revision === y.revision) ||
    ev.some((e) => e.type === 'snapshot' && e.revision >= y.revision), 10000, 'y');
  assert.ok(cp.revision > 0);
  assertOnceInOrder(r.changes());
  // The server may start over (an account change inside the resume window): then a reset and a snapshot holding x.
  const resets = r.ofType('reset');
  if (resets.length > 0) {
    const last = r.ofType('snapshot').at(-1);
    assert.ok(last.documents.some((d) => d.collection === base + '/x'));
  }
  c.close();
});

test('resume across a node restart (SIGKILL) with writes made meanwhile: no gap, no duplicate', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const w = await writerFor(email);
  const base = `users/${user.id}/restart`;
  const statuses = [];
  c.realtime.onStatus((s) => statuses.push(s.state));
  const r = record(c, base, { prefix: true });
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
  const expected = [];
  const b0 = await w.db.batch([{ op: 'set', collection: base + '/p', data: { v: 0 } }, { op: 'set', collection: base + '/q', data: { v: 0 } }]);
  expected.push(`${b0.revision} ${base}/p set`, `${b0.revision} ${base}/q set`);
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= 2, 10000, 'first batch');

  // The node dies while the subscriber is kept away; writes land after it is back.
  ws.block();
  await restartNode();
  await waitFor(() => statuses.includes('disconnected'), 10000, 'the subscriber noticed');
  for (let i = 0; i < 5; i++) {
    const s = await w.db.set(`${base}/s${i}`, { i });
    expected.push(`${s.revision} ${base}/s${i} set`);
  }
  const b = await w.db.batch([
    { op: 'set', collection: base + '/p', data: { v: 1 } },
    { op: 'delete', collection: base + '/q' },
    { op: 'increment', collection: base + '/n', field: 'k', by: 1 },
  ]);
  expected.push(`${b.revision} ${base}/p set`, `${b.revision} ${base}/q delete`, `${b.revision} ${base}/n set`);
  const d = await w.db.delete(base + '/s0');
  expected.push(`${d.revision} ${base}/s0 delete`);
  assert.equal(r.changes().length, 2, 'nothing arrived while disconnected');

  ws.unblock();
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= expected.length, 20000, 'every change');
  const live = await w.db.set(base + '/after', { ok: true });
  expected.push(`${live.revision} ${base}/after set`);
  await r.until((ev) => ev.filter((e) => e.type === 'change').length >= expected.length, 10000, 'a live change after the resume');
  await new Promise((res) => setTimeout(res, 200));
  assert.deepEqual(r.changes().map(keyOf), expected);
  assertOnceInOrder(r.changes());
  assert.equal(r.ofType('snapshot').length, 1, 'resumed, not a second snapshot');
  assert.equal(r.ofType('reset').length, 0);
  c.close();
});

test('a rules change inside the resume window: reset, then a fresh snapshot', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const o = await owner();
  const w = await writerFor(email);
  const base = `users/${user.id}/rules`;
  await w.db.set(base + '/a', { v: 1 });
  const r = record(c, base, { prefix: true });
  await r.until((ev) => ev.length >= 1, 10000, 'snapshot');

  ws.block();
  c.realtime.reconnect(); // cuts the connection; the next ones fail while blocked
  await waitFor(() => c.realtime.status.state === 'disconnected', 10000, 'disconnected');
  const { rules } = await o.db.getRules();
  await o.db.setRules(rules);
  const bw = await w.db.set(base + '/b', { v: 2 });
  ws.unblock();
  await r.until((ev) => ev.filter((e) => e.type === 'snapshot').length >= 2, 15000, 'reset and snapshot');
  const types = r.events.map((e) => e.type);
  assert.deepEqual(types, ['snapshot', 'reset', 'snapshot']);
  const snap = r.events[2];
  assert.deepEqual(snap.documents.map((d) => d.collection), [base + '/a', base + '/b']);
  assert.ok(snap.revision >= bw.revision);
  const next = await w.db.set(base + '/c', { v: 3 });
  await r.until((ev) => ev.some((e) => e.type === 'change' && e.revision === next.revision), 10000, 'a change after the reset');
  c.close();
});

test('the change log no longer reaches back: reset, then a fresh snapshot', async () => {
  // A node that keeps changes for one second.
  await restartNode('?changelogRetention=1s');
  try {
    const ws = controlledWebSocket();
    const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
    const w = await writerFor(email);
    const base = `users/${user.id}/old`;
    await w.db.set(base + '/a', { v: 1 });
    const r = record(c, base, { prefix: true });
    await r.until((ev) => ev.length >= 1, 10000, 'snapshot');
    ws.block();
    c.realtime.reconnect();
    await waitFor(() => c.realtime.status.state === 'disconnected', 10000, 'disconnected');
    const gone = await w.db.set(base + '/b', { v: 2 });
    await new Promise((res) => setTimeout(res, 2500)); // the change of b is compacted away
    ws.unblock();
    await r.until((ev) => ev.filter((e) => e.type === 'snapshot').length >= 2, 15000, 'reset and snapshot');
    assert.deepEqual(r.events.map((e) => e.type), ['snapshot', 'reset', 'snapshot']);
    assert.deepEqual(r.events[2].documents.map((d) => d.collection), [base + '/a', base + '/b']);
    assert.ok(r.events[2].revision >= gone.revision);
    c.close();
  } finally {
    await restartNode();
  }
});
