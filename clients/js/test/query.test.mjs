import { test } from 'node:test';
import {
  assert, client, controlledWebSocket, newUser, PASSWORD, rejectsWith, waitFor,
} from './helpers.mjs';

const fast = { minBackoff: 50, maxBackoff: 400 };

async function writerFor(email) {
  const w = client();
  await w.auth.login(email, PASSWORD);
  return w;
}

const view = (docs) => docs.map((d) => [d.collection, d.data]);

test('db.query: where, orderBy, limit, cursors, select, count; a bad query names its field', async () => {
  const { c, user } = await newUser();
  const base = `users/${user.id}/orders`;
  for (let i = 1; i <= 5; i++) {
    await c.db.set(`${base}/o${i}`, { status: i % 2 ? 'open' : 'done', total: i * 10, note: 'n' + i });
  }
  const q = { collection: base, where: [{ field: 'status', op: '==', value: 'open' }], orderBy: [{ field: 'total', direction: 'desc' }], limit: 2 };
  const p1 = await c.db.query(q);
  assert.deepEqual(p1.documents.map((d) => d.collection), [`${base}/o5`, `${base}/o3`]);
  assert.equal(typeof p1.documents[0].revision, 'number');
  assert.ok(p1.nextCursor, 'a cursor while more may follow');
  const p2 = await c.db.query({ ...q, startAfter: p1.nextCursor });
  assert.deepEqual(p2.documents.map((d) => d.collection), [`${base}/o1`]);
  assert.equal(p2.nextCursor, undefined);

  const sel = await c.db.query({ collection: base, where: [{ field: 'total', op: '>', value: 30 }], orderBy: [{ field: 'total' }], select: ['total'] },
    { consistency: 'strong' });
  assert.deepEqual(view(sel.documents), [[`${base}/o4`, { total: 40 }], [`${base}/o5`, { total: 50 }]]);

  assert.deepEqual(await c.db.query({ collection: base, where: [{ field: 'status', op: 'in', value: ['open', 'done'] }], count: true }), { count: 5 });
  await rejectsWith(c.db.query({ collection: base, where: [{ field: 'total', op: '~', value: 1 }] }), 400, 'invalid_argument', 'where[0].op');
  await rejectsWith(c.db.query({ ...q, startAfter: 'not a cursor' }), 400, 'invalid_cursor', 'startAfter');
});

/** Applies a live query's change event to an application's own copy of the window. */
function applyEvent(copy, ev) {
  if (ev.type === 'snapshot') return ev.documents.map((d) => ({ collection: d.collection, data: d.data }));
  if (ev.type !== 'change') return copy;
  const at = copy.findIndex((d) => d.collection === ev.collection);
  if (ev.changeType === 'removed') {
    assert.equal(at, ev.index, `removed ${ev.collection} at ${ev.index}, the copy has it at ${at}`);
  }
  if (at >= 0) copy.splice(at, 1);
  if (ev.changeType !== 'removed') {
    assert.ok(ev.index <= copy.length, `${ev.changeType} ${ev.collection} at ${ev.index} of ${copy.length}`);
    copy.splice(ev.index, 0, { collection: ev.collection, data: ev.data });
  }
  return copy;
}

test('subscribeQuery: the window live, and resumed across a drop without a new snapshot', async () => {
  const ws = controlledWebSocket();
  const { c, user, email } = await newUser({ ...fast, WebSocket: ws.WebSocket });
  const w = await writerFor(email);
  const base = `users/${user.id}/board`;
  for (let i = 1; i <= 6; i++) await w.db.set(`${base}/t${i}`, { col: 'todo', rank: i });
  const lq = { collection: base, where: [{ field: 'col', op: '==', value: 'todo' }], orderBy: [{ field: 'rank' }], limit: 3 };

  const events = [];
  let copy = [];
  let last = [];
  const sub = c.realtime.subscribeQuery(lq, (ev, docs) => {
    events.push(ev);
    copy = applyEvent(copy, ev);
    last = docs;
  }, { resumeEvents: true });
  const same = async () => {
    const want = view((await w.db.query(lq)).documents);
    return JSON.stringify(view(last)) === JSON.stringify(want) && JSON.stringify(view(copy)) === JSON.stringify(want)
      && JSON.stringify(view(sub.docs)) === JSON.stringify(want);
  };
  await waitFor(() => events.length >= 1, 10000, 'snapshot');
  assert.equal(events[0].type, 'snapshot');
  assert.deepEqual(last.map((d) => d.collection), [`${base}/t1`, `${base}/t2`, `${base}/t3`]);

  await w.db.set(`${base}/t0`, { col: 'todo', rank: 0 });
  await waitFor(same, 10000, 'the window after an entry');
  const entered = events.filter((e) => e.type === 'change').map((e) => [e.changeType, e.collection, e.index]);
  assert.deepEqual(entered, [['removed', `${base}/t3`, 2], ['added', `${base}/t0`, 0]]);

  // The connection drops on the next change message and stays down while
  // documents in the window, beyond it and new ones change.
  ws.block();
  ws.dropWhen((m) => m.op === 'change');
  await w.db.delete(`${base}/t1`); // leaves: removed, then the refill's added (the drop comes between)
  await waitFor(() => c.realtime.status.state !== 'ready', 10000, 'the drop');
  await w.db.set(`${base}/t2`, { col: 'done', rank: 2 });
  await w.db.set(`${base}/t5`, { col: 'todo', rank: 0.5 });
  await w.db.set(`${base}/t7`, { col: 'todo', rank: 1.5 });
  await w.db.set(`${base}/t0`, { col: 'todo', rank: 0, edited: true });
  const before = events.length;
  ws.unblock();
  await waitFor(() => events.slice(before).some((e) => e.type === 'resumed'), 10000, 'resumed');
  assert.ok(ws.state.opened >= 2, 'reconnected');
  assert.equal(events.filter((e) => e.type === 'snapshot').length, 1, 'resumed, not a second snapshot');
  assert.equal(events.filter((e) => e.type === 'reset').length, 0);
  assert.ok(await same(), `after the resume: ${JSON.stringify(view(last))}`);
  assert.deepEqual(last.map((d) => d.collection), [`${base}/t0`, `${base}/t5`, `${base}/t7`]);

  // Live again.
  await w.db.set(`${base}/t7`, { col: 'todo', rank: -1 });
  await waitFor(same, 10000, 'the window after the resume');
  sub.unsubscribe();

  // A refused live query ends with an error naming the field.
  const errs = [];
  c.realtime.subscribeQuery({ collection: base, limit: 5000 }, (ev) => errs.push(ev));
  await waitFor(() => errs.length >= 1, 10000, 'the error');
  assert.equal(errs[0].type, 'error');
  assert.equal(errs[0].error.code, 'invalid_argument');
  assert.equal(errs[0].error.field, 'query.limit');
  c.close();
});
