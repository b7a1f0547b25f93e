import { test } from 'node:test';
import {
  assert, client, createClient, env, EdgebaseError, newUser, PASSWORD, rejectsWith, totpGenerator, unique,
} from './helpers.mjs';

test('register, me, logout, login, onChange and the storage adapter', async () => {
  const saved = new Map();
  const storage = {
    getItem: (k) => (saved.has(k) ? saved.get(k) : null),
    setItem: (k, v) => saved.set(k, v),
    removeItem: (k) => saved.delete(k),
  };
  const c = client({ storage });
  const seen = [];
  const off = c.auth.onChange((s) => seen.push(s && s.token));
  assert.equal(c.auth.token(), null);
  assert.equal(c.auth.user(), null);

  const email = unique('Alice') + '@Example.com';
  const reg = await c.auth.register(email, PASSWORD, 'Alice');
  assert.match(reg.token, /^ebt_/);
  assert.equal(reg.user.email, email.toLowerCase());
  assert.equal(reg.user.name, 'Alice');
  assert.equal(reg.user.role, 'user');
  assert.equal(c.auth.token(), reg.token);
  assert.deepEqual(c.auth.user(), reg.user);
  assert.deepEqual(seen, [reg.token]);

  // The session is in the adapter: a second client on it is signed in.
  const key = 'edgebase.session.' + env.projectId;
  assert.equal(JSON.parse(saved.get(key)).token, reg.token);
  const c2 = client({ storage });
  assert.equal(c2.auth.token(), reg.token);
  assert.equal((await c2.auth.me()).id, reg.user.id);

  const me = await c.auth.me();
  assert.deepEqual(me, reg.user);

  const out = await c.auth.logout();
  assert.equal(out.ok, true);
  assert.ok(out.revision > 0, 'logout carries its revision');
  assert.equal(c.auth.token(), null);
  assert.equal(saved.has(key), false);
  assert.deepEqual(seen, [reg.token, null]);
  // The old token is dead everywhere (the logout's revision rules out a stale read).
  await rejectsWith(c2.auth.me({ minRevision: out.revision }), 401, 'invalid_token');
  // Logging out of a dead session still forgets it locally.
  assert.deepEqual(await c2.auth.logout(), { ok: true });
  assert.equal(c2.auth.token(), null);

  const li = await c.auth.login(email, PASSWORD);
  assert.equal(li.requiresTotp, false);
  assert.match(li.token, /^ebt_/);
  assert.equal(c.auth.token(), li.token);
  assert.deepEqual(seen, [reg.token, null, li.token]);
  off();
  await c.auth.logout();
  assert.equal(seen.length, 3, 'no calls after unsubscribe');
});

test('auth errors carry status, code, field and retryAfter', async () => {
  const c = client();
  await rejectsWith(c.auth.register('not an email', PASSWORD, 'x'), 400, 'invalid_argument', 'email');
  await rejectsWith(c.auth.register(unique('u') + '@example.com', 'short', 'x'), 400, 'invalid_argument', 'password');
  await rejectsWith(c.auth.register(unique('u') + '@example.com', 'password', 'x'), 400, 'invalid_argument', 'password');
  const { email } = await newUser();
  await rejectsWith(c.auth.register(email, PASSWORD, 'again'), 409, 'email_taken');
  await rejectsWith(c.auth.login(email, 'wrong password 1'), 401, 'invalid_credentials');
  await rejectsWith(c.auth.login(unique('nobody') + '@example.com', PASSWORD), 401, 'invalid_credentials');
  await rejectsWith(c.auth.me(), 401, 'missing_token');
  await rejectsWith(c.auth.loginVerify('ebl_bogus', '123456'), 401, 'invalid_ticket');
  await rejectsWith(c.auth.resetPassword(email, 'ebv_bogus', 'another password 9'), 401, 'invalid_verify_token');
  await rejectsWith(c.auth.enrollAuthenticator(), 401, 'missing_token');

  const badKey = createClient({ url: env.url, projectId: env.projectId, apiKey: 'wrong' });
  await rejectsWith(badKey.auth.login(email, PASSWORD), 401, 'invalid_api_key');
  const noKey = createClient({ url: env.url, projectId: env.projectId });
  await rejectsWith(noKey.auth.login(email, PASSWORD), 401, 'missing_api_key');

  // Ten wrong passwords from one address lock the account for it: 429 with Retry-After.
  const { email: victim } = await newUser();
  let limited;
  for (let i = 0; i < 12 && !limited; i++) {
    try {
      await c.auth.login(victim, 'wrong password ' + i);
    } catch (e) {
      assert.ok(e instanceof EdgebaseError);
      if (e.status === 429) limited = e;
      else assert.equal(e.code, 'invalid_credentials');
    }
  }
  assert.ok(limited, 'no 429 after 12 wrong passwords');
  assert.equal(limited.code, 'rate_limited');
  assert.ok(limited.retryAfter > 0 && limited.retryAfter <= 15 * 60, `retryAfter ${limited.retryAfter}`);

  assert.throws(() => createClient({ url: env.url }), (e) => e instanceof EdgebaseError && e.field === 'projectId');
});

test('change password replaces the session; the old one ends', async () => {
  const { c, email } = await newUser();
  const other = client();
  await other.auth.login(email, PASSWORD);
  const before = c.auth.token();
  let changed = null;
  c.auth.onChange((s) => { changed = s; });
  await rejectsWith(c.auth.changePassword('not the password', 'new password 123'), 401, 'invalid_credentials', 'currentPassword');
  await rejectsWith(c.auth.changePassword(PASSWORD, 'x'), 400, 'invalid_argument', 'newPassword');
  const r = await c.auth.changePassword(PASSWORD, 'new password 123');
  assert.equal(r.ok, true);
  assert.notEqual(r.token, before);
  assert.equal(c.auth.token(), r.token);
  assert.equal(changed.token, r.token);
  assert.equal((await c.auth.me({ minRevision: r.revision })).email, email);
  await rejectsWith(other.auth.me({ minRevision: r.revision }), 401, 'invalid_token');
  const li = await client().auth.login(email, 'new password 123');
  assert.equal(li.requiresTotp, false);
});

test('TOTP: enroll, confirm, two-step login, reset password with a verify token, disable', async () => {
  const { c, email, user } = await newUser();
  const en = await c.auth.enrollAuthenticator();
  assert.match(en.secret, /^[A-Z2-7]+=*$/);
  assert.match(en.otpauthUrl, /^otpauth:\/\/totp\//);
  assert.ok(en.qrPng.length > 100);
  const code = totpGenerator(en.secret);

  await rejectsWith(c.auth.confirmAuthenticator('000000'), 400, 'invalid_code');
  const conf = await c.auth.confirmAuthenticator(await code());
  assert.equal(conf.totpEnabled, true);
  assert.equal(conf.recoveryCodes.length, 10);
  assert.equal((await c.auth.me()).totpEnabled, true);

  // Login now takes a second step.
  const c2 = client();
  const step1 = await c2.auth.login(email, PASSWORD);
  assert.equal(step1.requiresTotp, true);
  assert.match(step1.loginTicket, /^ebl_/);
  assert.equal(step1.expiresIn, 300);
  assert.equal(c2.auth.token(), null, 'not signed in before the second step');
  await rejectsWith(c2.auth.loginVerify(step1.loginTicket, '12345'), 400, 'invalid_code');
  const step2 = await c2.auth.loginVerify(step1.loginTicket, await code());
  assert.equal(step2.user.id, user.id);
  assert.equal(c2.auth.token(), step2.token);
  // A ticket is single use.
  await rejectsWith(c2.auth.loginVerify(step1.loginTicket, '123456'), 401, 'invalid_ticket');

  // Forgotten password: prove a code (here a recovery code), then reset.
  await rejectsWith(client().auth.verifyAuthenticator(email, '000000'), 400, 'invalid_code');
  const v = await client().auth.verifyAuthenticator(email, conf.recoveryCodes[0]);
  assert.match(v.verifyToken, /^ebv_/);
  assert.equal(v.expiresIn, 600);
  const reset = await client().auth.resetPassword(email, v.verifyToken, 'reset password 456');
  assert.equal(reset.ok, true);
  await rejectsWith(c2.auth.me({ minRevision: reset.revision }), 401, 'invalid_token');
  const c3 = client();
  const again = await c3.auth.login(email, 'reset password 456');
  assert.equal(again.requiresTotp, true);
  await c3.auth.loginVerify(again.loginTicket, conf.recoveryCodes[1]);

  // A second enrollment is refused while TOTP is on; disabling needs a code.
  await rejectsWith(c3.auth.enrollAuthenticator(), 409, 'totp_already_enabled');
  await rejectsWith(c3.auth.reauthenticate('wrong password 0'), 401, 'invalid_credentials', 'password');
  const re = await c3.auth.reauthenticate('reset password 456', conf.recoveryCodes[2]);
  assert.equal(re.ok, true);
  const off = await c3.auth.disableTotp(await code());
  assert.equal(off.totpEnabled, false);
  assert.equal(c3.auth.user().totpEnabled, false);
  assert.equal((await client().auth.login(email, 'reset password 456')).requiresTotp, false);
});
