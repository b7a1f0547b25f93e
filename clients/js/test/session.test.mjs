// Session consistency: the client tracks the highest revision it has seen
// and asks every read (X-Min-Revision) and every new subscription
// (minRevision) for at least it.
import { test } from 'node:test';
import { createClient } from '../edgebase.js';
import { assert, client, env, newUser, PASSWORD, rejectsWith, waitFor, WS } from './helpers.mjs';

/** A fetch that records the headers of every request, then does it. */
function recordingFetch() {
  const calls = [];
  const f = (url, init) => {
    calls.push({ method: init.method, path: new URL(url).pathname, minRevision: init.headers['X-Min-Revision'] });
    return fetch(url, init);
  };
  return { f, calls, take: () => calls.splice(0) };
}

/** A WebSocket that records what the client sends. */
function recordingWS() {
  const sent = [];
  class RecordingWS extends WS {
    send(data) {
      sent.push(JSON.parse(data));
      return super.send(data);
    }
  }
  return { RecordingWS, sent };
}

test('session on by default: reads carry the revision of the last write; answers move it on', async (t) => {
  const rec = recordingFetch();
  const { c, user } = await newUser({ fetch: rec.f });
  t.after(() => c.close());
  const p = `users/${user.id}/sess/a`;
  const before = c.sessionRevision;
  const w = await c.db.set(p, { v: 1 });
  assert.ok(w.revision > before, `write revision ${w.revision}, session was ${before}`);
  assert.equal(c.sessionRevision, w.revision);
  rec.take();
  const d = await c.db.get(p);
  assert.deepEqual(d.data, { v: 1 });
  const [get] = rec.take();
  assert.equal(get.method, 'GET');
  assert.equal(get.minRevision, String(w.revision), 'the read asks for the write');
  // A lower explicit minRevision does not lower it.
  await c.db.get(p, { minRevision: 1 });
  assert.equal(rec.take()[0].minRevision, String(c.sessionRevision));
  // Queries are reads too (POST /api/db/query).
  const q = await c.db.query({ collection: `users/${user.id}/sess` });
  assert.ok(q.documents.some((x) => x.collection === p));
  const [qc] = rec.take();
  assert.equal(qc.method, 'POST');
  assert.equal(qc.path, '/api/db/query');
  assert.equal(qc.minRevision, String(c.sessionRevision));
  // Writes carry no X-Min-Revision.
  await c.db.set(p, { v: 2 });
  assert.equal(rec.take()[0].minRevision, undefined);
});

test('session: false sends no X-Min-Revision but still tracks', async (t) => {
  const rec = recordingFetch();
  const { c, user } = await newUser({ fetch: rec.f, session: false });
  t.after(() => c.close());
  const p = `users/${user.id}/sess/off`;
  const w = await c.db.set(p, { v: 1 });
  assert.equal(c.sessionRevision, w.revision);
  rec.take();
  await c.db.get(p);
  assert.equal(rec.take()[0].minRevision, undefined);
});

test('sessionRevision carries the session to another client; bad values are refused', async (t) => {
  const { c, email, user } = await newUser();
  t.after(() => c.close());
  const p = `users/${user.id}/sess/carry`;
  await c.db.set(p, { v: 1 });
  const rec = recordingFetch();
  const other = client({ fetch: rec.f, sessionRevision: c.sessionRevision });
  t.after(() => other.close());
  await other.auth.login(email, PASSWORD);
  rec.take();
  assert.deepEqual((await other.db.get(p)).data, { v: 1 });
  const got = Number(rec.take()[0].minRevision);
  assert.ok(got >= c.sessionRevision, `carried minRevision ${got} < ${c.sessionRevision}`);
  assert.equal(other.observeRevision(1), other.sessionRevision, 'observe never moves back');
  for (const bad of [-1, 1.5, 'x']) {
    assert.throws(() => createClient({ url: env.url, projectId: env.projectId, sessionRevision: bad }), (e) => e.code === 'invalid_argument' && e.field === 'sessionRevision');
  }
});

test('the node honours the session: a revision it has not applied is 503 after the read timeout', async (t) => {
  const { c, email, user } = await newUser();
  t.after(() => c.close());
  await c.db.set(`users/${user.id}/sess/far`, { v: 1 });
  const far = client({ sessionRevision: c.sessionRevision + 1_000_000, retries: 0 });
  t.after(() => far.close());
  await far.auth.login(email, PASSWORD); // a write-free POST: no X-Min-Revision
  const start = Date.now();
  await rejectsWith(far.db.get(`users/${user.id}/sess/far`), 503, 'unavailable');
  assert.ok(Date.now() - start >= 4000, 'refused before the read timeout: the header was not waited for');
});

test('subscribe sends minRevision; socket revisions move the session on', async (t) => {
  const { RecordingWS, sent } = recordingWS();
  const { c, user, email } = await newUser({ WebSocket: RecordingWS });
  t.after(() => c.close());
  const base = `users/${user.id}/sess/live`;
  const w = await c.db.set(base + '/a', { v: 1 });
  const events = [];
  c.realtime.subscribe(base, { prefix: true }, (ev) => events.push(ev));
  await waitFor(() => events.length >= 1, 10000, 'snapshot');
  const sub = sent.find((m) => m.op === 'subscribe');
  assert.equal(sub.minRevision, w.revision, 'subscribe asks for the last write');
  assert.equal(events[0].type, 'snapshot');
  assert.ok(c.sessionRevision >= events[0].revision);
  // A write by another client arrives as a change: the session follows it.
  const other = client();
  t.after(() => other.close());
  await other.auth.login(email, PASSWORD);
  const w2 = await other.db.set(base + '/b', { v: 2 });
  await waitFor(() => events.some((e) => e.type === 'change' && e.revision === w2.revision), 10000, 'the change');
  assert.equal(c.sessionRevision, w2.revision, 'the session follows the change');
});
