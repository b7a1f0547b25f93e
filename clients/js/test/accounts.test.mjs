// The accounts API through the SDK, against a real node whose default SMTP
// server is a real go-smtp server of the Go test (node_test.go): the codes
// are read from the emails it received (GET <control>/mail?to=).
import { test } from 'node:test';
import {
  assert, client, createClient, env, newUser, owner, PASSWORD, rejectsWith, unique, waitFor,
} from './helpers.mjs';

const smtp = { host: process.env.EDGEBASE_SMTP_HOST, port: Number(process.env.EDGEBASE_SMTP_PORT) };

/** The emails the node sent to `to`, oldest first: [{to, subject, text, html, code}]. */
async function mailTo(to) {
  const r = await fetch(env.control + '/mail?to=' + encodeURIComponent(to));
  assert.equal(r.status, 200);
  return r.json();
}

/**
 * Waits for the (n+1)-th email to `to` (n = how many there were before the
 * request that sends it) and returns it.
 */
async function nextMail(to, n, what = 'an email') {
  return waitFor(async () => {
    const ms = await mailTo(to);
    return ms.length > n ? ms[n] : null;
  }, 30000, `${what} to ${to}`);
}

/** Asserts that the email carries a 6-digit code and returns it. */
function codeOf(m) {
  assert.match(m.code, /^[0-9]{6}$/, `no code in ${JSON.stringify(m)}`);
  return m.code;
}

/** A code that is none of codes (a wrong guess). */
function other(...codes) {
  for (let n = 0; ; n++) {
    const c = String(n).padStart(6, '0');
    if (!codes.includes(c)) return c;
  }
}

test('email verification: sendVerification emails a code, verifyEmail proves it once', async () => {
  const { c, email, user } = await newUser();
  assert.equal(user.emailVerified, false);
  const before = (await mailTo(email)).length;
  // Two requests: the newer code replaces the older one.
  const s1 = await c.auth.sendVerification();
  const s2 = await c.auth.sendVerification();
  assert.equal(s1.ok, true);
  assert.equal(s1.alreadyVerified, undefined);
  assert.ok(s2.revision > s1.revision, 'each request commits');
  // The leader may send the two in either order: the code of the second
  // request is the one that works, and it is the only one.
  const first = codeOf(await nextMail(email, before, 'the first verification'));
  const second = codeOf(await nextMail(email, before + 1, 'the second verification'));
  await rejectsWith(c.auth.verifyEmail({ email, code: other(first, second) }), 400, 'invalid_code');
  assert.equal(c.auth.user().emailVerified, false);
  let u = null;
  let code = null;
  for (const candidate of [first, second]) {
    try {
      u = await c.auth.verifyEmail({ email, code: candidate });
      code = candidate;
      break;
    } catch (e) {
      assert.equal(e.code, 'invalid_code', e.message);
    }
  }
  assert.ok(u, 'one of the two codes proves the address');
  if (first !== second) {
    const older = code === first ? second : first;
    await rejectsWith(c.auth.verifyEmail({ email, code: older }), 400, 'invalid_code');
  }
  assert.equal(u.id, user.id);
  assert.equal(u.emailVerified, true);
  assert.equal(c.auth.user().emailVerified, true, 'the session keeps the changed user');
  assert.equal((await c.auth.me()).emailVerified, true);
  // Single use.
  await rejectsWith(c.auth.verifyEmail({ email, code }), 400, 'invalid_code');
  // Nothing left to prove.
  const again = await c.auth.sendVerification();
  assert.equal(again.ok, true);
  assert.equal(again.alreadyVerified, true);
  // Bad input names the field.
  await rejectsWith(c.auth.verifyEmail({ email: 'not an email', code }), 400, 'invalid_argument', 'email');
  await rejectsWith(client().auth.sendVerification(), 401, 'missing_token');
});

test('password reset by emailed code: the same answer for unknown addresses, sessions end', async () => {
  const { c, email } = await newUser();
  const anon = client();
  const nobody = unique('nobody') + '@example.com';
  const known = await anon.auth.requestPasswordReset(email);
  const unknown = await anon.auth.requestPasswordReset(nobody);
  assert.equal(known.ok, true);
  assert.deepEqual(Object.keys(known).sort(), Object.keys(unknown).sort(), 'no answer tells the two apart');
  const code = codeOf(await nextMail(email, 0, 'the reset code'));
  assert.deepEqual(await mailTo(nobody), [], 'nothing is sent to an address without an account');

  const newPassword = 'a brand new password 7';
  await rejectsWith(anon.auth.resetPassword({ email, emailCode: other(code), newPassword }), 400, 'invalid_code', 'emailCode');
  await rejectsWith(anon.auth.resetPassword({ email, emailCode: code, verifyToken: 'ebv_x', newPassword }), 400, 'invalid_argument');
  await rejectsWith(anon.auth.resetPassword({ email, emailCode: code, newPassword: 'short' }), 400, 'invalid_argument', 'newPassword');
  const done = await anon.auth.resetPassword({ email, emailCode: code, newPassword });
  assert.equal(done.ok, true);
  assert.ok(done.revision > 0);
  // Every session of the account ended; the new password works, the old does not.
  await rejectsWith(c.auth.me({ minRevision: done.revision }), 401, 'invalid_token');
  await rejectsWith(client().auth.login(email, PASSWORD), 401, 'invalid_credentials');
  const li = await client().auth.login(email, newPassword);
  assert.equal(li.requiresTotp, false);
  assert.equal(li.user.emailVerified, true, 'proving the code proved the address');
  // Single use.
  await rejectsWith(anon.auth.resetPassword({ email, emailCode: code, newPassword: 'yet another password 8' }), 400, 'invalid_code');
});

test('passwordless sign-in: requestEmailCode then loginWithEmailCode; unknown emails get no account', async () => {
  const { email, user } = await newUser();
  const c = client();
  assert.deepEqual(Object.keys(await c.auth.requestEmailCode(email)).sort(), ['ok', 'revision']);
  const code = codeOf(await nextMail(email, 0, 'the sign-in code'));
  await rejectsWith(c.auth.loginWithEmailCode(email, other(code)), 400, 'invalid_code');
  assert.equal(c.auth.token(), null);
  const li = await c.auth.loginWithEmailCode(email, code);
  assert.equal(li.requiresTotp, false);
  assert.match(li.token, /^ebt_/);
  assert.equal(li.user.id, user.id);
  assert.equal(li.user.emailVerified, true);
  assert.equal(c.auth.token(), li.token);
  assert.equal((await c.auth.me()).id, user.id);
  await rejectsWith(client().auth.loginWithEmailCode(email, code), 400, 'invalid_code');

  // An address without an account: the same request answer, no email, and
  // any code is refused without creating the account.
  const nobody = unique('nobody') + '@example.com';
  assert.deepEqual(Object.keys(await c.auth.requestEmailCode(nobody)).sort(), ['ok', 'revision']);
  await rejectsWith(client().auth.loginWithEmailCode(nobody, '123456'), 400, 'invalid_code');
  await rejectsWith(client().auth.login(nobody, PASSWORD), 401, 'invalid_credentials');
  const reg = await client().auth.register(nobody, PASSWORD, 'Later');
  assert.equal(reg.user.email, nobody, 'the address was still free');
});

test('changeEmail sends a code to the new address and changes it with the code', async () => {
  const { c, email, user } = await newUser();
  const newEmail = unique('moved') + '@example.com';
  const taken = (await newUser()).email;
  await rejectsWith(c.auth.changeEmail(taken), 409, 'email_taken', 'newEmail');
  await rejectsWith(c.auth.changeEmail('not an email'), 400, 'invalid_argument', 'newEmail');
  const sent = await c.auth.changeEmail(newEmail);
  assert.equal(sent.ok, true);
  assert.equal(sent.codeSent, true);
  const code = codeOf(await nextMail(newEmail, 0, 'the change-email code'));
  assert.deepEqual(await mailTo(email), [], 'the code goes to the new address only');
  await rejectsWith(c.auth.changeEmail(newEmail, other(code)), 400, 'invalid_code');
  const done = await c.auth.changeEmail(newEmail, code);
  assert.equal(done.user.id, user.id);
  assert.equal(done.user.email, newEmail);
  assert.equal(done.user.emailVerified, true);
  assert.equal(c.auth.user().email, newEmail);
  assert.equal((await client().auth.login(newEmail, PASSWORD)).user.id, user.id);
  await rejectsWith(client().auth.login(email, PASSWORD), 401, 'invalid_credentials');
  // The old address is free again.
  assert.equal((await client().auth.register(email, PASSWORD, 'New owner')).user.email, email);
});

test('anonymous users: sign in, keep the uid when linking an email, and the owner can turn it off', async () => {
  const c = client();
  const anon = await c.auth.signInAnonymously();
  assert.match(anon.token, /^ebt_/);
  assert.equal(anon.user.anonymous, true);
  assert.equal(anon.user.email, '');
  assert.equal(anon.user.emailVerified, false);
  assert.equal(c.auth.token(), anon.token);
  await rejectsWith(c.auth.sendVerification(), 409, 'no_email');

  const email = unique('linked') + '@example.com';
  const taken = (await newUser()).email;
  await rejectsWith(c.auth.linkEmail(taken, PASSWORD), 409, 'email_taken', 'email');
  await rejectsWith(c.auth.linkEmail(email, 'short'), 400, 'invalid_argument', 'password');
  const linked = await c.auth.linkEmail(email, PASSWORD);
  assert.equal(linked.user.id, anon.user.id, 'the same uid');
  assert.equal(linked.user.email, email);
  assert.ok(!linked.user.anonymous);
  assert.equal(c.auth.token(), linked.token);
  await rejectsWith(c.auth.linkEmail(unique('again') + '@example.com', PASSWORD), 409, 'already_linked');
  assert.equal((await client().auth.login(email, PASSWORD)).user.id, anon.user.id);

  const o = await owner();
  await rejectsWith(c.admin.authSettings.get(), 403, 'forbidden');
  assert.deepEqual(await o.admin.authSettings.get(), { anonymousSignIn: true, emailActionUrl: '' });
  const off = await o.admin.authSettings.set({ anonymousSignIn: false });
  try {
    assert.equal(off.anonymousSignIn, false);
    assert.equal(off.emailActionUrl, '');
    await rejectsWith(client().auth.signInAnonymously(), 403, 'anonymous_disabled');
    await rejectsWith(o.admin.authSettings.set({ emailActionUrl: 'ftp://app.example.com/x' }), 400, 'invalid_argument', 'emailActionUrl');
    assert.equal((await o.admin.authSettings.get()).anonymousSignIn, false, 'a refused change changes nothing');
  } finally {
    const on = await o.admin.authSettings.set({ anonymousSignIn: true });
    assert.equal(on.anonymousSignIn, true);
  }
  assert.equal((await client().auth.signInAnonymously()).user.anonymous, true);
});

test('deleteAccount removes the account and its data and frees the email', async () => {
  const { c, email, user } = await newUser();
  const notes = `users/${user.id}/notes`;
  await c.db.set(notes + '/n1', { text: 'mine' });
  await c.db.set(notes + '/n2/deeper/d1', { text: 'mine too' });
  const del = await c.auth.deleteAccount();
  assert.equal(del.ok, true);
  assert.equal(del.deleted, true);
  assert.equal(c.auth.token(), null, 'signed out here');
  await rejectsWith(client().auth.login(email, PASSWORD), 401, 'invalid_credentials');
  const again = await client().auth.register(email, PASSWORD, 'Again');
  assert.notEqual(again.user.id, user.id);
  // The user's documents go too (in chunks after the account: poll).
  const o = await owner();
  await waitFor(async () => (await o.db.get(notes + '/n1')) === null && (await o.db.get(notes + '/n2/deeper/d1')) === null,
    15000, "the deleted user's documents to go");
  assert.deepEqual((await o.db.list(`users/${user.id}`)).documents, []);
  // The project's only owner cannot leave it ownerless.
  await rejectsWith(o.auth.deleteAccount(), 409, 'last_owner');
  assert.equal((await o.auth.me()).email, env.ownerEmail);
});

test('sessions: listSessions shows each with its client, revokeSession ends one', async () => {
  const { c, email } = await newUser();
  const c2 = client();
  await c2.auth.login(email, PASSWORD);
  const list = await c.auth.listSessions();
  assert.equal(list.length, 2);
  const mine = list.filter((s) => s.current);
  assert.equal(mine.length, 1, 'exactly one is this client');
  for (const s of list) {
    assert.equal(typeof s.id, 'string');
    assert.ok(!Number.isNaN(Date.parse(s.createdAt)), s.createdAt);
    assert.ok(!Number.isNaN(Date.parse(s.lastUsedAt)), s.lastUsedAt);
    assert.match(s.address, /127\.0\.0\.1/);
    assert.equal(typeof s.userAgent, 'string');
  }
  const theirs = list.find((s) => !s.current);
  const r = await c.auth.revokeSession(theirs.id);
  assert.equal(r.ok, true);
  await rejectsWith(c2.auth.me({ minRevision: r.revision }), 401, 'invalid_token');
  assert.equal((await c.auth.listSessions()).length, 1);
  // Another user's session, or none: not found.
  const stranger = await newUser();
  const strangers = await stranger.c.auth.listSessions();
  await rejectsWith(c.auth.revokeSession(strangers[0].id), 404, 'not_found', 'sessionId');
  await rejectsWith(c.auth.revokeSession('no-such-session'), 404, 'not_found', 'sessionId');
  assert.equal((await stranger.c.auth.me()).email, stranger.email, 'the stranger is still signed in');
});

test('admin.users: search, read, disable (sessions end, sign-in refused), enable, revoke, delete', async () => {
  const o = await owner();
  const { c, email, user } = await newUser();
  await rejectsWith(c.admin.users.list(), 403, 'forbidden');

  const found = await o.admin.users.list({ query: email });
  assert.deepEqual(found.users.map((u) => u.id), [user.id]);
  assert.equal(found.nextCursor, '');
  assert.equal((await o.admin.users.list({ query: user.id })).users[0].email, email);
  assert.equal((await o.admin.users.get(user.id)).email, email);
  await rejectsWith(o.admin.users.get('no-such-user'), 404, 'not_found');
  await rejectsWith(o.admin.users.list({ limit: 0 }), 400, 'invalid_argument', 'limit');
  await rejectsWith(o.admin.users.list({ cursor: 'bogus' }), 400, 'invalid_argument', 'cursor');

  // Paging: pages of 1 walk every user once.
  const seen = new Set();
  let cursor = '';
  for (let i = 0; i < 1000; i++) {
    const page = await o.admin.users.list({ limit: 1, cursor });
    for (const u of page.users) {
      assert.ok(!seen.has(u.id), 'no user twice');
      seen.add(u.id);
    }
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  assert.ok(seen.has(user.id));

  const dis = await o.admin.users.disable(user.id);
  assert.equal(dis.user.disabled, true);
  await rejectsWith(c.auth.me({ minRevision: dis.revision }), 401, 'invalid_token');
  await rejectsWith(client().auth.login(email, PASSWORD), 403, 'account_disabled');
  const me = (await o.auth.me()).id;
  await rejectsWith(o.admin.users.disable(me), 409, 'own_account');

  const en = await o.admin.users.enable(user.id);
  assert.ok(!en.user.disabled);
  const c2 = client();
  await c2.auth.login(email, PASSWORD);
  const rev = await o.admin.users.revokeSessions(user.id);
  assert.equal(rev.ok, true);
  await rejectsWith(c2.auth.me({ minRevision: rev.revision }), 401, 'invalid_token');

  const del = await o.admin.users.delete(user.id);
  assert.equal(del.ok, true);
  await rejectsWith(o.admin.users.get(user.id), 404, 'not_found');
  await rejectsWith(client().auth.login(email, PASSWORD), 401, 'invalid_credentials');
  await rejectsWith(o.admin.users.delete(me), 409, 'own_account');
});

test('admin.keys: a new key works at once, shows once, and stops working when deleted', async () => {
  const o = await owner();
  const name = unique('ci');
  await rejectsWith(o.admin.keys.create(''), 400, 'invalid_argument', 'name');
  const k = await o.admin.keys.create(name);
  assert.equal(k.name, name);
  assert.equal(typeof k.key, 'string');
  assert.ok(k.key.length >= 20);
  const list = await o.admin.keys.list();
  const listed = list.find((x) => x.id === k.id);
  assert.ok(listed, 'the new key is listed');
  assert.equal(listed.name, name);
  assert.ok(k.key.startsWith(listed.prefix) && listed.prefix.length < k.key.length, 'only a prefix is shown');
  assert.ok(!JSON.stringify(list).includes(k.key), 'the secret is never listed');
  assert.ok(list.some((x) => x.id === 'default'), 'the original key is "default"');

  const withKey = createClient({ url: env.url, projectId: env.projectId, apiKey: k.key });
  assert.equal((await withKey.auth.login(env.ownerEmail, env.ownerPassword)).requiresTotp, false);
  const del = await o.admin.keys.delete(k.id);
  assert.equal(del.ok, true);
  await rejectsWith(withKey.auth.login(env.ownerEmail, env.ownerPassword), 401, 'invalid_api_key');
  await rejectsWith(o.admin.keys.delete(k.id), 404, 'not_found', 'id');
  const { c } = await newUser();
  await rejectsWith(c.admin.keys.list(), 403, 'forbidden');
});

test('admin.audit lists the project\'s security events, newest first, filtered and paged', async () => {
  const o = await owner();
  const { c, email, user } = await newUser();
  await c.auth.logout();
  const c2 = client();
  await c2.auth.login(email, PASSWORD);
  const page = await waitFor(async () => {
    const p = await o.admin.audit.list({ userId: user.id });
    return p.events && p.events.length >= 3 ? p : null;
  }, 15000, 'three events of the user');
  const types = page.events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 3), ['login', 'logout', 'register'], 'newest first');
  for (const e of page.events) {
    assert.equal(e.userId, user.id);
    assert.ok(!Number.isNaN(Date.parse(e.time)));
  }
  const logins = await o.admin.audit.list({ userId: user.id, type: 'login' });
  assert.deepEqual(logins.events.map((e) => e.type), ['login']);
  const one = await o.admin.audit.list({ userId: user.id, limit: 1 });
  assert.equal(one.events.length, 1);
  assert.notEqual(one.nextCursor, '');
  const two = await o.admin.audit.list({ userId: user.id, limit: 1, cursor: one.nextCursor });
  assert.equal(two.events[0].type, 'logout');
  await rejectsWith(o.admin.audit.list({ limit: 1000 }), 400, 'invalid_argument', 'limit');
  await rejectsWith(c2.admin.audit.list(), 403, 'forbidden');
});

test('admin.smtp and admin.emailTemplates: the project\'s server and a custom template are used', async () => {
  const o = await owner();
  assert.equal(await o.admin.smtp.get(), null, 'the cluster default is in use');
  await rejectsWith(o.admin.smtp.set({ host: '', port: 25, from: 'a@example.com' }), 400, 'invalid_argument', 'host');
  await rejectsWith(o.admin.smtp.set({ host: smtp.host, port: smtp.port, password: 'secret', from: 'app@sdk-js.example', security: 'none' }),
    400, 'invalid_argument');
  const set = await o.admin.smtp.set({
    host: smtp.host, port: smtp.port, username: 'app', password: 'secret', from: 'app@sdk-js.example',
    fromName: 'The App', security: 'none',
  });
  try {
    assert.equal(set.host, smtp.host);
    assert.equal(set.username, 'app');
    assert.equal(set.passwordSet, true);
    assert.equal(set.password, undefined, 'never the password');
    const got = await o.admin.smtp.get();
    assert.equal(got.from, 'app@sdk-js.example');
    assert.equal(got.fromName, 'The App');
    assert.equal(got.passwordSet, true);
    assert.equal(got.password, undefined);
    // The test's server takes mail without authentication: no user, no password.
    const plain = await o.admin.smtp.set({ host: smtp.host, port: smtp.port, from: 'app@sdk-js.example', fromName: 'The App', security: 'none' });
    assert.equal(plain.passwordSet, false);

    const all = await o.admin.emailTemplates.list();
    assert.deepEqual(Object.keys(all).sort(), ['change-email', 'password-reset', 'sign-in-code', 'verification']);
    assert.equal(all.verification.custom, false);
    await rejectsWith(o.admin.emailTemplates.set('verification', { subject: 'Code {{.Code', text: 'x' }), 400, 'invalid_argument', 'subject');
    await rejectsWith(o.admin.emailTemplates.set('no-such-kind', { subject: 's', text: 't' }), 404, 'not_found');
    const tpl = await o.admin.emailTemplates.set('verification', {
      subject: 'Custom {{.Code}} for {{.Project}}', text: 'Your code is {{.Code}} ({{.ExpiresMinutes}} minutes).', html: '<b>{{.Code}}</b>',
    });
    assert.equal(tpl.custom, true);
    assert.equal((await o.admin.emailTemplates.list()).verification.custom, true);

    const { c, email } = await newUser();
    await c.auth.sendVerification();
    const m = await nextMail(email, 0, 'the custom verification');
    const code = codeOf(m);
    assert.ok(m.subject.startsWith('Custom ' + code + ' for '), m.subject);
    assert.deepEqual(m.to, [email]);
    assert.ok(m.text.includes(`Your code is ${code} (10 minutes).`), m.text);
    assert.equal((await c.auth.verifyEmail({ email, code })).emailVerified, true);

    await o.admin.emailTemplates.reset('verification');
    assert.equal((await o.admin.emailTemplates.list()).verification.custom, false);
  } finally {
    await o.admin.smtp.delete();
  }
  assert.equal(await o.admin.smtp.get(), null);
});

const oidc = {
  provider: process.env.EDGEBASE_OIDC_PROVIDER,
  issuer: process.env.EDGEBASE_OIDC_ISSUER,
  clientId: process.env.EDGEBASE_OIDC_CLIENT_ID,
  clientSecret: process.env.EDGEBASE_OIDC_CLIENT_SECRET,
  password: process.env.EDGEBASE_OIDC_PASSWORD,
};

/** The app page sign-ins return to; never opened (browse stops at it). */
const APP = 'http://127.0.0.1:9/signed-in';

const unescapeHTML = (s) => s.replace(/&#34;|&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/**
 * A browser: opens start (the node's start URL or an oauth-link URL),
 * follows redirects with cookies, fills in the provider's login form as
 * email, and returns the query of the redirect to the app.
 */
async function browse(start, email) {
  const jar = new Map(); // host -> Map(name, value)
  let url = start;
  let init = { method: 'GET' };
  let loggedIn = false;
  for (let hops = 0; hops < 20; hops++) {
    const u = new URL(url);
    if (u.origin + u.pathname === APP) return u.searchParams;
    const headers = { ...(init.headers || {}) };
    const cookies = jar.get(u.host);
    if (cookies && cookies.size) headers.Cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const sc of r.headers.getSetCookie()) {
      const kv = sc.split(';')[0];
      const eq = kv.indexOf('=');
      if (!jar.has(u.host)) jar.set(u.host, new Map());
      jar.get(u.host).set(kv.slice(0, eq).trim(), kv.slice(eq + 1).trim());
    }
    init = { method: 'GET' };
    if (r.status >= 300 && r.status < 400) {
      url = new URL(r.headers.get('location'), url).toString();
      await r.arrayBuffer();
      continue;
    }
    const page = await r.text();
    const m = /name="id" value="([^"]+)"/.exec(page);
    assert.ok(r.status === 200 && m && !loggedIn, `${url}: status ${r.status}, not the provider's login form: ${page.slice(0, 300)}`);
    loggedIn = true;
    url = new URL('/login/username', url).toString();
    init = {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ id: unescapeHTML(m[1]), username: email, password: oidc.password }).toString(),
    };
  }
  throw new Error(`too many redirects from ${start}`);
}

test('OAuth with a real OpenID provider: configure, sign in, exchange once, refuse bad state, link an anonymous user', async () => {
  const o = await owner();
  const c = client();
  await rejectsWith(c.auth.oauthExchange('bogus'), 400, 'invalid_code', 'code');
  const { c: user } = await newUser();
  await rejectsWith(user.admin.oauthProviders.set(oidc.provider, { clientId: oidc.clientId, clientSecret: oidc.clientSecret, issuer: oidc.issuer, redirectUrls: [APP] }), 403, 'forbidden');
  await rejectsWith(o.admin.oauthProviders.set(oidc.provider, { clientId: oidc.clientId, clientSecret: oidc.clientSecret, issuer: oidc.issuer, redirectUrls: ['javascript:alert(1)'] }),
    400, 'invalid_argument', 'redirectUrls[0]');
  await rejectsWith(o.admin.oauthProviders.get(oidc.provider), 404, 'not_found', 'provider');

  const set = await o.admin.oauthProviders.set(oidc.provider, {
    clientId: oidc.clientId, clientSecret: oidc.clientSecret, issuer: oidc.issuer, redirectUrls: [APP],
  });
  assert.equal(set.provider, oidc.provider);
  assert.equal(set.issuer, oidc.issuer);
  assert.equal(set.secretSet, true);
  assert.equal(set.clientSecret, undefined, 'never the secret');
  assert.equal(set.callbackUrl, `${env.url}/api/auth/oauth/${oidc.provider}/callback`);
  assert.deepEqual(await c.auth.oauthProviders(), [{ provider: oidc.provider, issuer: oidc.issuer }]);
  assert.deepEqual(await o.admin.oauthProviders.list(), [{ provider: oidc.provider, issuer: oidc.issuer }]);
  const { revision, ...stored } = set;
  assert.ok(revision > 0);
  assert.deepEqual(await o.admin.oauthProviders.get(oidc.provider), stored);

  // A redirect the provider does not allow is refused before the browser leaves.
  const bad = await fetch(c.auth.oauthStartUrl(oidc.provider, 'http://127.0.0.1:9/elsewhere'), { redirect: 'manual' });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.field, 'redirect');

  // Sign in: start URL, the provider's login, back to the app with a one-time code.
  const q = await browse(c.auth.oauthStartUrl(oidc.provider, APP), 'oidc-user@example.com');
  assert.equal(q.get('error'), null, q.get('error_description'));
  const code = q.get('code');
  assert.ok(code);
  const li = await c.auth.oauthExchange(code);
  assert.equal(li.requiresTotp, false);
  assert.equal(c.auth.token(), li.token);
  assert.equal(li.user.email, 'oidc-user@example.com');
  assert.equal(li.user.emailVerified, true);
  assert.deepEqual(li.user.providers, [oidc.provider]);
  await rejectsWith(client().auth.oauthExchange(code), 400, 'invalid_code', 'code');
  // Signing in again reaches the same account.
  const again = await client().auth.oauthExchange((await browse(c.auth.oauthStartUrl(oidc.provider, APP), 'oidc-user@example.com')).get('code'));
  assert.equal(again.user.id, li.user.id);

  // A forged state is refused in JSON, not redirected anywhere.
  const forged = await fetch(`${env.url}/api/auth/oauth/${oidc.provider}/callback?state=forged&code=x`, { redirect: 'manual' });
  assert.equal(forged.status, 400);
  assert.deepEqual((await forged.json()).error.code, 'invalid_state');

  // An address the provider does not vouch for never signs in to the
  // account that has it; the account is untouched.
  const victim = await client().auth.register('oidc-unverified@example.com', PASSWORD, 'Victim');
  const uq = await browse(c.auth.oauthStartUrl(oidc.provider, APP), 'oidc-unverified@example.com');
  assert.equal(uq.get('code'), null);
  assert.equal(uq.get('error'), 'account_exists_unverified');
  assert.equal((await client().auth.login('oidc-unverified@example.com', PASSWORD)).user.id, victim.user.id);
  assert.equal((await o.admin.users.get(victim.user.id)).providers, undefined, 'nothing linked');

  // Linking: an anonymous user keeps its uid and data.
  const anon = client();
  const a = await anon.auth.signInAnonymously();
  await rejectsWith(anon.auth.oauthLink(oidc.provider, 'http://127.0.0.1:9/elsewhere'), 400, 'invalid_argument', 'redirect');
  await anon.db.set(`users/${a.user.id}/notes/n1`, { text: 'before linking' });
  const { url } = await anon.auth.oauthLink(oidc.provider, APP);
  const lq = await browse(url, 'oidc-linked@example.com');
  assert.equal(lq.get('error'), null, lq.get('error_description'));
  const linked = await anon.auth.oauthExchange(lq.get('code'));
  assert.equal(linked.user.id, a.user.id, 'the same uid');
  assert.ok(!linked.user.anonymous);
  assert.equal(linked.user.email, 'oidc-linked@example.com');
  assert.deepEqual(linked.user.providers, [oidc.provider]);
  assert.equal((await anon.db.get(`users/${a.user.id}/notes/n1`)).data.text, 'before linking');

  const del = await o.admin.oauthProviders.delete(oidc.provider);
  assert.equal(del.ok, true);
  assert.deepEqual(await c.auth.oauthProviders(), []);
});
