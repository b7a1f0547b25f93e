// The JSC scenario's Node side (bench/jscache.go): what the JavaScript SDK's
// persistent cache costs. One mode per process; it prints one JSON line.
//
// Environment: EB_URL, EB_PROJECT, EB_API_KEY, EB_TOKEN (a session token),
// EB_PREFIX (the path whose documents the subscription holds, with prefix),
// EB_MODE, EB_DIR (file modes), EB_OPENS (memory mode).
//
// Modes:
//   fill    subscribe with persistence "file:EB_DIR", wait for the server's
//           snapshot and for the cache to be stored, close; then measure the
//           directory: {docs, snapshotMs, flushMs, files, bytes, allocatedBytes}
//   open    a fresh process with the same cache: the time from createClient
//           to the cached snapshot (openMs) and to the subscription resumed
//           from the network (liveMs): {docs, openMs, liveMs, resumed}
//   memory  fill with memoryAdapter() (the heap it retains, after two forced
//           GCs), then EB_OPENS new clients on that adapter in this process,
//           each timed as in open: {docs, heapBytes, snapshotMs, openMs: [], liveMs: []}
//   cold    no persistence: the time from createClient to the server's
//           snapshot, what the cache saves an online app: {docs, snapshotMs}
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createClient, memoryAdapter } from '../../clients/js/edgebase.js';
import { env, ownerStorage } from './env.mjs';

const storage = ownerStorage();
const prefix = env('EB_PREFIX');
const now = () => performance.now();
const TIMEOUT = 120000;

function gc() {
  if (typeof global.gc !== 'function') throw new Error('run node with --expose-gc');
  global.gc();
  global.gc();
}

function clientWith(persistence) {
  return createClient({ url: env('EB_URL'), projectId: env('EB_PROJECT'), apiKey: env('EB_API_KEY'), storage, persistence });
}

/**
 * Subscribes to prefix and resolves with the times (ms after t0) of the
 * first snapshot, of the snapshot from the server (or the resume, after a
 * cached one), and the first snapshot's documents.
 */
function timeSubscription(client, t0) {
  return new Promise((resolve, reject) => {
    let first = null;
    const timer = setTimeout(() => reject(new Error('no snapshot within ' + TIMEOUT + ' ms')), TIMEOUT);
    const done = (live, resumed) => {
      clearTimeout(timer);
      sub.unsubscribe();
      resolve({ ...first, liveMs: live - t0, resumed });
    };
    const sub = client.realtime.subscribe(prefix, { prefix: true }, (e) => {
      const t = now();
      if (e.type === 'error') {
        clearTimeout(timer);
        reject(e.error);
      } else if (e.type === 'snapshot' && !first) {
        first = { firstMs: t - t0, docs: e.documents.length, fromCache: e.fromCache === true };
        if (!first.fromCache) done(t, false);
      } else if (e.type === 'resumed') {
        done(t, true);
      } else if (e.type === 'snapshot') {
        done(t, false); // after a reset
      }
    });
  });
}

async function du(dir) {
  let files = 0;
  let bytes = 0;
  let allocated = 0;
  for (const ent of await readdir(dir, { withFileTypes: true })) {
    // "%%": the file adapter's temporary and lock files, not the cache (a
    // closed client may still be removing its lock file).
    if (ent.name.startsWith('%%')) continue;
    const p = join(dir, ent.name);
    if (ent.isDirectory()) {
      const d = await du(p);
      files += d.files;
      bytes += d.bytes;
      allocated += d.allocatedBytes;
    } else {
      const s = await stat(p);
      files++;
      bytes += s.size;
      allocated += s.blocks * 512;
    }
  }
  return { files, bytes, allocatedBytes: allocated };
}

async function fill(persistence) {
  const t0 = now();
  const c = clientWith(persistence);
  const r = await timeSubscription(c, t0);
  if (r.fromCache) throw new Error('fill: the cache was not empty');
  const t1 = now();
  await c.flush();
  const flushMs = now() - t1;
  c.close();
  return { docs: r.docs, snapshotMs: r.firstMs, flushMs };
}

async function open(persistence) {
  const t0 = now();
  const c = clientWith(persistence);
  const r = await timeSubscription(c, t0);
  if (!r.fromCache) throw new Error('open: no snapshot from the cache');
  await c.flush();
  c.close();
  return { docs: r.docs, openMs: r.firstMs, liveMs: r.liveMs, resumed: r.resumed };
}

const mode = env('EB_MODE');
let out;
if (mode === 'fill') {
  const dir = env('EB_DIR');
  out = { ...await fill('file:' + dir), ...await du(dir) };
} else if (mode === 'open') {
  out = await open('file:' + env('EB_DIR'));
} else if (mode === 'memory') {
  const opens = Number(env('EB_OPENS'));
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const adapter = memoryAdapter();
  const f = await fill({ adapter });
  gc();
  const heapBytes = process.memoryUsage().heapUsed - heap0;
  out = { docs: f.docs, heapBytes, snapshotMs: f.snapshotMs, openMs: [], liveMs: [] };
  for (let i = 0; i < opens; i++) {
    const o = await open({ adapter });
    if (o.docs !== f.docs) throw new Error(`memory open ${i}: ${o.docs} documents, filled ${f.docs}`);
    out.openMs.push(o.openMs);
    out.liveMs.push(o.liveMs);
  }
} else if (mode === 'cold') {
  const t0 = now();
  const c = clientWith(undefined);
  const r = await timeSubscription(c, t0);
  c.close();
  out = { docs: r.docs, snapshotMs: r.firstMs };
} else {
  throw new Error('unknown EB_MODE ' + mode);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
