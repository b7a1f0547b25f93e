import { test } from 'node:test';
import { assert, env, newUser, owner, rejectsWith, unique, waitFor } from './helpers.mjs';

test('push: devices, topics, preferences', async () => {
  const { c, user } = await newUser();
  const tok = unique('device-token');
  const reg = await c.push.register(tok, 'android');
  assert.equal(reg.token, tok);
  assert.equal(reg.platform, 'android');
  assert.ok(reg.registeredAt);
  assert.ok(reg.revision > 0);
  const web = await c.push.register(unique('web-token'));
  assert.equal(web.platform, 'web');
  const devs = await c.push.devices();
  assert.equal(devs.length, 2);
  assert.ok(devs.every((d) => d.userId === user.id));
  assert.equal((await c.push.unregister(tok)).ok, true);
  assert.deepEqual((await c.push.devices()).map((d) => d.token), [web.token]);
  await rejectsWith(c.push.unregister(tok), 404, 'not_found');
  await rejectsWith(c.push.register(unique('t'), 'windows'), 400, 'invalid_argument');

  const sub = await c.push.subscribe('news');
  assert.equal(sub.topic, 'news');
  assert.equal(sub.subscribed, true);
  assert.equal((await c.push.subscribe('news')).subscribed, true, 'idempotent');
  await c.push.subscribe('sports');
  assert.deepEqual((await c.push.topics()).sort(), ['news', 'sports']);
  const un = await c.push.unsubscribe('sports');
  assert.equal(un.subscribed, false);
  assert.deepEqual(await c.push.topics(), ['news']);
  await rejectsWith(c.push.subscribe('bad topic!'), 400, 'invalid_argument');

  const prefs = await c.push.getPreferences();
  assert.equal(prefs.pushEnabled, true);
  assert.equal(prefs.marketingEnabled, false);
  assert.equal(prefs.timezone, 'UTC');
  const set = await c.push.setPreferences({ marketingEnabled: true, quietHoursStart: '23:00', timezone: 'Europe/Paris' });
  assert.equal(set.marketingEnabled, true);
  assert.equal(set.quietHoursStart, '23:00');
  assert.equal(set.timezone, 'Europe/Paris');
  assert.deepEqual(await c.push.getPreferences(), { ...prefs, marketingEnabled: true, quietHoursStart: '23:00', timezone: 'Europe/Paris' });
  await rejectsWith(c.push.setPreferences({ quietHoursEnd: '7am' }), 400, 'invalid_argument');
  await rejectsWith(c.push.setPreferences({}), 400, 'invalid_argument');
});

test('push: owner sends, users receive on realtime; history; schedules', async () => {
  const o = await owner();
  const { c, user } = await newUser({ minBackoff: 50, maxBackoff: 500 });
  await c.push.subscribe('deals');

  // A user may not send or switch push.
  await rejectsWith(c.push.togglePush(true), 403, 'forbidden');
  await rejectsWith(c.push.sendToProject({ title: 'x' }), 403, 'forbidden');
  await rejectsWith(c.push.sendToUser(user.id, { title: 'x' }), 403, 'forbidden');
  await rejectsWith(c.push.sendToTopic('deals', { title: 'x' }), 403, 'forbidden');

  const tog = await o.push.togglePush(true);
  assert.deepEqual({ projectId: tog.projectId, pushEnabled: tog.pushEnabled }, { projectId: env.projectId, pushEnabled: true });

  const notes = [];
  const off = c.realtime.onNotification((n) => notes.push(n));
  await waitFor(() => c.realtime.status.state === 'ready', 10000, 'realtime ready');

  const toUser = await o.push.sendToUser(user.id, { title: 'Hello', body: 'just you', data: { k: 'v' } });
  assert.equal(toUser.status, 'queued');
  assert.ok(toUser.notificationId);
  const toTopic = await o.push.sendToTopic('deals', { title: 'Deal', body: 'cheap' });
  const toAll = await o.push.sendToProject({ title: 'All', category: 'general' });
  await waitFor(() => notes.length >= 3, 15000, 'three notifications');
  const byTitle = Object.fromEntries(notes.map((n) => [n.title, n]));
  assert.equal(byTitle.Hello.type, 'notification');
  assert.equal(byTitle.Hello.id, toUser.notificationId);
  assert.deepEqual(byTitle.Hello.data, { k: 'v' });
  assert.equal(byTitle.Deal.id, toTopic.notificationId);
  assert.equal(byTitle.All.id, toAll.notificationId);
  assert.ok(byTitle.Hello.revision > 0);
  off();

  await rejectsWith(o.push.sendToUser('no-such-user', { title: 'x' }), 404, 'not_found', 'userId');
  await rejectsWith(o.push.sendToProject({ body: 'no title' }), 400, 'invalid_argument', 'title');
  await rejectsWith(o.push.sendToProject({ title: 'x', data: { k: 1 } }), 400, 'invalid_argument', 'data.k');

  const mine = await waitFor(async () => {
    const h = await c.push.history({ limit: 10 });
    return h.notifications.length >= 3 && h;
  }, 15000, 'user history');
  assert.ok(mine.notifications.every((n) => n.status === 'delivered'));
  const sent = await o.push.history({ limit: 2 });
  assert.equal(sent.notifications.length, 2);
  assert.ok(sent.nextCursor);
  const more = await o.push.history({ limit: 2, cursor: sent.nextCursor });
  assert.ok(more.notifications.length >= 1);
  await rejectsWith(o.push.history({ limit: 1000 }), 400, 'invalid_argument', 'limit');

  const sendAt = new Date(Date.now() + 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const sc = await c.push.schedule({ title: 'Reminder', body: 'later', sendAt });
  assert.equal(sc.status, 'scheduled');
  assert.equal(sc.sendAt, sendAt);
  const osc = await o.push.schedule({ title: 'To deals', sendAt, target: { topic: 'deals' } });
  assert.deepEqual(osc.target, { topic: 'deals' });
  await rejectsWith(c.push.schedule({ title: 'x', sendAt, target: { project: true } }), 403, 'forbidden');
  await rejectsWith(c.push.schedule({ title: 'x', sendAt: 'tomorrow' }), 400, 'invalid_argument');
  const list = await c.push.scheduled({ limit: 10 });
  assert.deepEqual(list.scheduled.map((s) => s.id), [sc.id]);
  const all = await o.push.scheduled();
  assert.ok(all.scheduled.some((s) => s.id === osc.id) && all.scheduled.some((s) => s.id === sc.id));
  const cancelled = await c.push.cancel(sc.id);
  assert.equal(cancelled.status, 'cancelled');
  await rejectsWith(c.push.cancel(sc.id), 409, 'not_cancellable');
  await rejectsWith(c.push.cancel(osc.id), 404, 'not_found');
  await o.push.cancel(osc.id);
  c.close();
});
