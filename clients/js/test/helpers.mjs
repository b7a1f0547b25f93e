// Shared helpers of the SDK's Node tests. clients/js/node_test.go starts the
// node and passes where it is in the environment.
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, EdgebaseError } from '../edgebase.js';
import { NodeWebSocket } from './wsshim.mjs';

/** The WebSocket the tests use: Node's own (Node >= 22, or 20 with --experimental-websocket), else the shim. */
export const WS = (!process.env.EDGEBASE_TEST_WS_SHIM && globalThis.WebSocket) || NodeWebSocket;

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./clients/js`);
  return v;
}

export const env = {
  url: need('EDGEBASE_URL'),
  projectId: need('EDGEBASE_PROJECT_ID'),
  apiKey: need('EDGEBASE_API_KEY'),
  adminToken: need('EDGEBASE_ADMIN_TOKEN'),
  ownerEmail: need('EDGEBASE_OWNER_EMAIL'),
  ownerPassword: need('EDGEBASE_OWNER_PASSWORD'),
  control: need('EDGEBASE_CONTROL_URL'),
};

export const PASSWORD = 'correct horse battery 42';

/** A client of the test project (memory storage unless given). */
export function client(extra = {}) {
  return createClient({ url: env.url, projectId: env.projectId, apiKey: env.apiKey, WebSocket: WS, ...extra });
}

export function unique(prefix = 'x') {
  return prefix + '-' + randomBytes(5).toString('hex');
}

/** A client with a freshly registered user signed in. */
export async function newUser(extra = {}) {
  const c = client(extra);
  const email = unique('user') + '@example.com';
  const r = await c.auth.register(email, PASSWORD, 'Test User');
  return { c, email, user: r.user };
}

/** A client with the project owner signed in. */
export async function owner(extra = {}) {
  const c = client(extra);
  const r = await c.auth.login(env.ownerEmail, env.ownerPassword);
  assert.equal(r.requiresTotp, false);
  return c;
}

/** Asserts that p rejects with an EdgebaseError of that status and code (and field). */
export async function rejectsWith(p, status, code, field) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof EdgebaseError, `not an EdgebaseError: ${e}`);
    assert.equal(e.name, 'EdgebaseError');
    assert.equal(e.status, status, `status of ${e.code}: ${e.message}`);
    assert.equal(e.code, code, e.message);
    assert.equal(typeof e.message, 'string');
    if (field !== undefined) assert.equal(e.field, field);
    return true;
  });
}

/** Polls f until it returns a truthy value, or fails after ms. */
export async function waitFor(f, ms = 15000, what = 'condition') {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// ---- TOTP (RFC 6238, SHA-1, 6 digits, 30 s), the test's own oracle ----

function base32(s) {
  const alpha = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  const out = [];
  for (const ch of s.replace(/=+$/, '').toUpperCase()) {
    const i = alpha.indexOf(ch);
    if (i < 0) throw new Error('bad base32 ' + s);
    value = (value << 5) | i;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

export function totpAt(secret, step) {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(step));
  const h = createHmac('sha1', base32(secret)).update(msg).digest();
  const off = h[h.length - 1] & 0x0f;
  const n = (h.readUInt32BE(off) & 0x7fffffff) % 1000000;
  return String(n).padStart(6, '0');
}

/**
 * Codes for one secret, each of a later step than the last (the server
 * accepts a step once, and no earlier one after it), within its ±1 window;
 * waits for the clock when the window is used up.
 */
export function totpGenerator(secret) {
  let last = -Infinity;
  return async function next() {
    for (;;) {
      const cur = Math.floor(Date.now() / 30000);
      const step = Math.max(last + 1, cur - 1);
      if (step <= cur + 1) {
        last = step;
        return totpAt(secret, step);
      }
      await new Promise((r) => setTimeout(r, (step - 1) * 30000 - Date.now() + 50));
    }
  };
}

// ---- the node ----

/** SIGKILLs the node and starts it again (the Go test does it), waiting until it is ready. */
export async function restartNode(query = '') {
  const r = await fetch(env.control + '/restart' + query, { method: 'POST' });
  assert.equal(r.status, 204, await r.text());
}

/**
 * A WebSocket class for one client whose connections the test controls:
 * block() makes new connections fail (as if the node were unreachable),
 * dropWhen(pred) cuts the connection right after delivering the first
 * message pred accepts.
 */
export function controlledWebSocket() {
  const state = { blocked: false, dropWhen: null, opened: 0 };
  class ControlledWebSocket {
    constructor(url) {
      const real = new WS(state.blocked ? 'ws://127.0.0.1:9/' : url);
      this._real = real;
      this._dead = false;
      this.onopen = this.onmessage = this.onerror = this.onclose = null;
      real.onopen = (e) => {
        state.opened++;
        if (this.onopen) this.onopen(e);
      };
      real.onmessage = (e) => {
        if (this._dead) return;
        if (this.onmessage) this.onmessage(e);
        const pred = state.dropWhen;
        if (pred && pred(JSON.parse(e.data))) {
          state.dropWhen = null;
          this._dead = true;
          real.close();
        }
      };
      real.onerror = (e) => this.onerror && this.onerror(e);
      real.onclose = (e) => this.onclose && this.onclose(e);
    }
    send(d) { this._real.send(d); }
    close(code, reason) {
      try {
        this._real.close(code, reason);
      } catch (_) {
        this._real.close();
      }
    }
  }
  return {
    WebSocket: ControlledWebSocket,
    state,
    block() { state.blocked = true; },
    unblock() { state.blocked = false; },
    dropWhen(pred) { state.dropWhen = pred; },
  };
}

/** Subscribes and records every event. */
export function record(c, path, opts = {}) {
  const events = [];
  const sub = c.realtime.subscribe(path, opts, (ev) => events.push(ev));
  return {
    events,
    sub,
    changes: () => events.filter((e) => e.type === 'change'),
    ofType: (t) => events.filter((e) => e.type === t),
    until: (pred, ms, what) => waitFor(() => pred(events), ms, what),
  };
}

/** Reconnect backoff short enough for tests (ms). */
export const fast = { minBackoff: 50, maxBackoff: 400 };

/** The (revision, collection, changeType) of change events, for comparing sequences. */
export const keyOf = (e) => `${e.revision} ${e.collection} ${e.changeType}`;

/** A second signed-in client of the same user, without persistence: the writer, and the oracle of the server's state. */
export async function writerFor(email) {
  const w = client();
  await w.auth.login(email, PASSWORD);
  return w;
}

/** Fails unless changes holds no (revision, collection) twice and revisions never go down. */
export function assertOnceInOrder(changes) {
  const seen = new Set();
  let last = 0;
  for (const e of changes) {
    const k = e.revision + ' ' + e.collection;
    assert.ok(!seen.has(k), `duplicate change ${k}`);
    seen.add(k);
    assert.ok(e.revision >= last, `revision ${e.revision} after ${last}`);
    last = e.revision;
  }
}

/** A new temporary directory for a file cache. */
export function tempDir(prefix = 'edgebase-cache-') {
  return mkdtemp(join(tmpdir(), prefix));
}

export { assert, createClient, EdgebaseError };
