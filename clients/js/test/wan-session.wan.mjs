// Session consistency across edges with the JavaScript SDK, run by
// e2e/wan/session_test.go (TestWANSessionMoveJS) against the simulated WAN:
// a user writes through the edge in us, then at once reads through the
// edge in ap with consistency=local. With the session (on by default,
// carried over with the sessionRevision option) the read sees the write
// every time; the control without it (session: false) is stale at least
// once. Not a *.test.mjs: it needs the WAN cluster's URLs.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createClient } from '../edgebase.js';
import { NodeWebSocket } from './wsshim.mjs';

const WS = globalThis.WebSocket || NodeWebSocket;

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through go test ./e2e/wan -run TestWANSessionMoveJS`);
  return v;
}

const env = {
  us: need('EDGEBASE_WAN_US_URL'),
  ap: need('EDGEBASE_WAN_AP_URL'),
  projectId: need('EDGEBASE_PROJECT_ID'),
  apiKey: need('EDGEBASE_API_KEY'),
  iterations: Number(process.env.EDGEBASE_WAN_ITERATIONS || 20),
  requireStale: process.env.EDGEBASE_WAN_REQUIRE_STALE === '1',
};

function memory() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => { m.set(k, v); }, removeItem: (k) => { m.delete(k); } };
}

/** Every client made, closed after each test (a failed assertion must not leave sockets open). */
const made = new Set();

/** A client at url sharing storage (so the same signed-in user). */
function at(url, storage, extra = {}) {
  const c = createClient({ url, projectId: env.projectId, apiKey: env.apiKey, storage, WebSocket: WS, ...extra });
  made.add(c);
  return c;
}

afterEach(async () => {
  const all = [...made];
  made.clear();
  await Promise.all(all.map((c) => c.close()));
});

async function signedUp() {
  const storage = memory();
  const us = at(env.us, storage);
  const r = await us.auth.register('wan-' + randomBytes(5).toString('hex') + '@example.com', 'wan session password 1', 'WAN');
  return { storage, us, base: `users/${r.user.id}/wan-session` };
}

test('read your writes after moving from e-us to e-ap (consistency=local)', async () => {
  const { storage, us, base } = await signedUp();
  const path = base + '/rest';
  let stale = 0;
  for (let i = 1; i <= env.iterations; i++) {
    const w = await us.db.set(path, { i: 2 * i });
    assert.equal(us.sessionRevision, w.revision);
    // The user moves: a new client in ap, the session carried over.
    const ap = at(env.ap, storage, { sessionRevision: us.sessionRevision, retries: 0 });
    const d = await ap.db.get(path, { consistency: 'local' });
    assert.ok(d, `iteration ${i}: the document is missing at e-ap with the session`);
    assert.deepEqual(d.data, { i: 2 * i }, `iteration ${i}: stale read at e-ap with the session`);
    assert.ok(ap.sessionRevision >= w.revision);
    ap.close();

    // The control: no session.
    const w2 = await us.db.set(path, { i: 2 * i + 1 });
    const ctl = at(env.ap, storage, { session: false, retries: 0 });
    const c = await ctl.db.get(path, { consistency: 'local' });
    if (!c || c.data.i !== 2 * i + 1 || c.revision < w2.revision) stale++;
    ctl.close();
  }
  console.log(`control reads without the session: ${stale} of ${env.iterations} stale`);
  if (env.requireStale) assert.ok(stale > 0, 'the control read was never stale: e-ap does not lag, the check proves nothing');
  us.close();
});

/** Subscribes to path at c and resolves with the first snapshot (or error) event. */
function firstSnapshot(c, path) {
  return new Promise((resolve, reject) => {
    let sub = null;
    const timer = setTimeout(() => reject(new Error('no snapshot within 10 s')), 10000);
    sub = c.realtime.subscribe(path, (ev) => {
      if (ev.type === 'snapshot' || ev.type === 'error') {
        clearTimeout(timer);
        resolve({ ev, sub });
      }
    });
  });
}

test('subscribe at e-ap right after a write through e-us: the snapshot holds it', async () => {
  const { storage, us, base } = await signedUp();
  const path = base + '/socket';
  // One connection at e-ap, open before the writes: connecting syncs the
  // node with the leader (authentication), which would hide a missing wait.
  const ap = at(env.ap, storage);
  const warm = await firstSnapshot(ap, base + '/warm');
  assert.equal(warm.ev.type, 'snapshot');
  for (let i = 1; i <= 5; i++) {
    const w = await us.db.set(path, { i });
    // The session moves with the user: the open client learns it.
    ap.observeRevision(us.sessionRevision);
    const { ev: snap, sub } = await firstSnapshot(ap, path);
    assert.equal(snap.type, 'snapshot', `iteration ${i}: ${snap.error || ''}`);
    assert.ok(snap.revision >= w.revision, `iteration ${i}: snapshot at ${snap.revision}, the write at ${w.revision}`);
    assert.deepEqual(snap.documents.map((d) => d.data), [{ i }], `iteration ${i}: the snapshot lacks the write`);
    sub.unsubscribe();
  }
});
