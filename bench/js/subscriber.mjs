// The JS scenario's subscriber: one JavaScript SDK client (clients/js) in
// a Node process, driven by the bench over stdin/stdout, one JSON line each
// way.
//
// Environment: EB_URL, EB_PROJECT, EB_API_KEY, EB_TOKEN (a session token),
// EB_MEM_PREFIX (a path holding the documents of the memory measurement).
//
// On start it measures the heap an app needs to hold a subscription's
// snapshot of the documents under EB_MEM_PREFIX (the SDK's subscription
// plus the documents it delivered, kept in a Map by path as an app does),
// then prints {"ready":true, "memDocs", "memBytes", "heapBeforeBytes"}.
//
// Commands (stdin, one per line):
//   {"cmd":"subscribe","prefix":P}  subscribe to P (prefix); answers {"subscribed":P,"revision"} after the snapshot
//   {"cmd":"stats"}                 answers the counters since the last stats and resets them
//   {"cmd":"exit"}
//
// A change's data carries "t": the bench's wall clock in milliseconds when
// it sent the write; lag is the time from then to this handler.
import { createInterface } from 'node:readline';
import { createClient } from '../../clients/js/edgebase.js';
import { env, ownerStorage } from './env.mjs';

const storage = ownerStorage();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const now = () => performance.timeOrigin + performance.now();

function gc() {
  if (typeof global.gc !== 'function') throw new Error('run node with --expose-gc');
  global.gc();
  global.gc();
}

async function snapshotOf(client, prefix, onChange) {
  const docs = new Map();
  let sub;
  const revision = await new Promise((resolve, reject) => {
    sub = client.realtime.subscribe(prefix, { prefix: true }, (e) => {
      if (e.type === 'snapshot') {
        for (const d of e.documents) docs.set(d.collection, d);
        resolve(e.revision);
      } else if (e.type === 'error') {
        reject(e.error);
      } else if (onChange) {
        onChange(e, docs);
      }
    });
  });
  return { sub, docs, revision };
}

// ---- memory: a client subscribed to EB_MEM_PREFIX, its snapshot held

const memClient = createClient({ url: env('EB_URL'), projectId: env('EB_PROJECT'), apiKey: env('EB_API_KEY'), storage });
gc();
const heapBefore = process.memoryUsage().heapUsed;
const mem = await snapshotOf(memClient, env('EB_MEM_PREFIX'));
gc();
const heapAfter = process.memoryUsage().heapUsed;
const memDocs = mem.docs.size;
mem.sub.unsubscribe();
memClient.close();
mem.docs.clear();

// ---- rate: one client, one subscription at a time

const client = createClient({ url: env('EB_URL'), projectId: env('EB_PROJECT'), apiKey: env('EB_API_KEY'), storage });
let counters = fresh();
function fresh() {
  return { events: 0, first: 0, last: 0, lags: [], resets: 0, snapshots: 0, disconnects: 0, outOfOrder: 0, lastRev: 0 };
}
client.realtime.onStatus((s) => {
  if (s.state === 'disconnected' || s.state === 'stopped') counters.disconnects++;
});
let current = null;

out({ ready: true, memDocs, memBytes: heapAfter - heapBefore, heapBeforeBytes: heapBefore });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  let m;
  try {
    m = JSON.parse(line);
  } catch (e) {
    out({ error: `bad command ${line}` });
    continue;
  }
  if (m.cmd === 'subscribe') {
    if (current) current.sub.unsubscribe();
    try {
      current = await snapshotOf(client, m.prefix, (e) => {
        const c = counters;
        if (e.type === 'change') {
          const t = now();
          if (c.events === 0) c.first = t;
          c.events++;
          c.last = t;
          if (e.revision < c.lastRev) c.outOfOrder++;
          c.lastRev = e.revision;
          if (e.data && typeof e.data.t === 'number') c.lags.push(t - e.data.t);
        } else if (e.type === 'reset') {
          c.resets++;
        } else if (e.type === 'snapshot') {
          c.snapshots++;
        }
      });
      out({ subscribed: m.prefix, revision: current.revision });
    } catch (e) {
      out({ error: String(e && e.message || e) });
    }
  } else if (m.cmd === 'stats') {
    const c = counters;
    counters = fresh();
    c.lags.sort((a, b) => a - b);
    const pct = (p) => (c.lags.length ? c.lags[Math.min(c.lags.length - 1, Math.floor((p / 100) * c.lags.length))] : 0);
    out({
      events: c.events, firstMs: c.first, lastMs: c.last, resets: c.resets, snapshots: c.snapshots, disconnects: c.disconnects,
      outOfOrder: c.outOfOrder, lagP50Ms: pct(50), lagP99Ms: pct(99), lagMaxMs: c.lags.length ? c.lags[c.lags.length - 1] : 0,
      heapBytes: process.memoryUsage().heapUsed,
    });
  } else if (m.cmd === 'exit') {
    break;
  } else {
    out({ error: `unknown command ${m.cmd}` });
  }
}
client.close();
process.exit(0);
