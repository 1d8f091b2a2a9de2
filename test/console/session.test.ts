import t from 'tap';
import { cliUsers, createUser, createUserAtPrompt, login, PASSWORD } from '../helpers/console.js';
import { eventually, startTrackd, testClock } from '../helpers/trackd.js';

const KEYS = '/console/api/keys';
const SESSION = '/console/api/session';

t.test('console sessions, CSRF, login limits and the key service over the request pipeline', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { clock });
  const acme = await trackd.createOrg('Acme');
  const beta = await trackd.createOrg('Beta');
  const other = await trackd.createOrg('Other');
  createUser(trackd, 'ann@example.com', [acme.id, beta.id]);
  createUser(trackd, 'bob@example.com', [acme.id]);

  t.test('users create: the password comes from stdin, is checked, and is never stored in the clear', async (t) => {
    const short = cliUsers(trackd, 'cy@example.com', [acme.id], 'short');
    t.not(short.status, 0, 'a short password is refused');
    t.match(short.stderr, /at least 10 characters/);
    t.not(cliUsers(trackd, 'not-an-email', [acme.id], PASSWORD).status, 0, 'a malformed email is refused');
    t.not(cliUsers(trackd, 'cy@example.com', [999], PASSWORD).status, 0, 'an unknown organization is refused');
    const again = createUser(trackd, 'Bob@Example.com', [beta.id]);
    t.same(
      { created: again.created, orgs: again.orgs },
      { created: false, orgs: [acme.id, beta.id] },
      'an existing user gains the organization',
    );
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(`${trackd.dataDir}/control.sqlite`, { readonly: true });
    const stored = db.prepare('SELECT password_hash FROM users WHERE email = ?').pluck().get('ann@example.com') as string;
    db.close();
    t.match(stored, /^scrypt\$32768\$8\$1\$/, 'an scrypt hash with its cost');
    const shown = await createUserAtPrompt(trackd, 'tty@example.com', acme.id, 'typed at the prompt');
    t.match(shown, 'password:', 'a terminal gets a prompt');
    t.notMatch(shown, 'typed at the prompt', 'the typed password is not echoed');
    t.match(shown, '"created":true');
    t.equal(
      (await login(trackd, 'tty@example.com', acme.id, 'typed at the prompt')).body.data.user.email,
      'tty@example.com',
      'and it signs in',
    );
    t.notMatch(stored, PASSWORD);
  });

  t.test('a user of several organizations picks one; a single-org user goes straight in', async (t) => {
    const first = await trackd.request('POST', '/console/api/login', { body: { email: 'ann@example.com', password: PASSWORD } });
    t.equal(first.status, 200);
    t.same(first.json.data.choose_org.map((o: { id: number }) => o.id).sort(), [acme.id, beta.id].sort());
    t.equal(first.headers.get('set-cookie'), null, 'no session before the choice');
    const notMine = await trackd.request('POST', '/console/api/login', {
      body: { email: 'ann@example.com', password: PASSWORD, org_id: other.id },
    });
    t.equal(notMine.status, 400);
    t.same(
      notMine.json.error.fields.map((f: { field: string }) => f.field),
      ['org_id'],
      'the error names the field',
    );
    const ann = await login(trackd, 'ann@example.com', beta.id);
    t.equal(ann.body.data.org.id, beta.id);
    const cookie = (
      await trackd.request('POST', '/console/api/login', { body: { email: 'ann@example.com', password: PASSWORD, org_id: beta.id } })
    ).headers.get('set-cookie')!;
    t.match(cookie, /^trackd_session=[^;]+; Path=\/console; HttpOnly; SameSite=Strict; Max-Age=28800$/, 'HttpOnly, SameSite=Strict, 8 h');
    const tls = await trackd.request('POST', '/console/api/login', {
      body: { email: 'ann@example.com', password: PASSWORD, org_id: beta.id },
      headers: { 'x-forwarded-proto': 'https' },
    });
    t.match(tls.headers.get('set-cookie'), /; Secure$/, 'Secure behind a TLS proxy');
    const switched = await trackd.request('POST', '/console/api/session/org', {
      body: { org_id: acme.id },
      headers: { cookie: ann.cookie, 'x-csrf-token': ann.csrf },
    });
    t.equal(switched.status, 200);
    t.equal(switched.json.data.org.id, acme.id, 'switched organization');
    t.equal(
      (await trackd.request('GET', SESSION, { headers: { cookie: ann.cookie } })).status,
      401,
      'the old session ended with the switch',
    );
  });

  t.test('the public API refuses session tokens and ignores the cookie', async (t) => {
    const ann = await login(trackd, 'ann@example.com', acme.id);
    const token = ann.cookie.split('=')[1]!;
    const bearer = await trackd.request('GET', '/api/v1/orgs/me', { token });
    t.equal(bearer.status, 401);
    t.equal(bearer.json.error.detail, 'Invalid or expired token');
    const cookieOnly = await trackd.request('GET', '/api/v1/assets', { headers: { cookie: ann.cookie } });
    t.equal(cookieOnly.status, 401);
    t.equal(cookieOnly.json.error.detail, 'Missing authorization header');
  });

  t.test('CSRF: writes need the session token and this origin', async (t) => {
    const ann = await login(trackd, 'ann@example.com', acme.id);
    const body = { name: 'ci', scopes: ['assets:read'], expires_in: '30d', org_id: acme.id };
    const cases: [string, Record<string, string>, number][] = [
      ['no token', { cookie: ann.cookie }, 403],
      ['a wrong token', { cookie: ann.cookie, 'x-csrf-token': `${ann.csrf.slice(1)}x` }, 403],
      [
        'the token from another origin',
        { cookie: ann.cookie, 'x-csrf-token': ann.csrf, origin: 'http://evil.example', host: '127.0.0.1:1' },
        403,
      ],
      ['a cross-site fetch', { cookie: ann.cookie, 'x-csrf-token': ann.csrf, 'sec-fetch-site': 'cross-site' }, 403],
      ['no cookie', { 'x-csrf-token': ann.csrf }, 401],
      [
        'the token and this origin',
        { cookie: ann.cookie, 'x-csrf-token': ann.csrf, origin: 'http://127.0.0.1:1', host: '127.0.0.1:1' },
        201,
      ],
    ];
    for (const [name, headers, status] of cases) {
      const res = await trackd.request('POST', KEYS, { body, headers });
      t.equal(res.status, status, name);
    }
    const keys = await trackd.request('GET', KEYS, { headers: { cookie: ann.cookie } });
    t.equal(keys.json.data.length, 1, 'only the accepted request minted a key');
    const crossLogin = await trackd.request('POST', '/console/api/login', {
      body: { email: 'ann@example.com', password: PASSWORD, org_id: acme.id },
      headers: { origin: 'http://evil.example', host: '127.0.0.1:1' },
    });
    t.equal(crossLogin.status, 403, 'a login posted from another origin is refused');
  });

  t.test('the key service: validation beside each field, mint, list, revoke (the same keys as the CLI)', async (t) => {
    const bob = await login(trackd, 'bob@example.com', acme.id);
    const headers = { cookie: bob.cookie, 'x-csrf-token': bob.csrf };
    const cases: [string, Record<string, unknown>, string[]][] = [
      ['empty', {}, ['name', 'scopes', 'expires_in', 'org_id']],
      ['blank name', { name: '  ', scopes: ['assets:read'], expires_in: '30d', org_id: acme.id }, ['name']],
      ['no scopes', { name: 'x', scopes: [], expires_in: '30d', org_id: acme.id }, ['scopes']],
      ['admin scope', { name: 'x', scopes: ['assets:read', 'keys:admin'], expires_in: '30d', org_id: acme.id }, ['scopes[1]']],
      ['unknown expiry', { name: 'x', scopes: ['assets:read'], expires_in: '2d', org_id: acme.id }, ['expires_in']],
      ['another org', { name: 'x', scopes: ['assets:read'], expires_in: '30d', org_id: other.id }, ['org_id']],
    ];
    for (const [name, body, fields] of cases) {
      const res = await trackd.request('POST', KEYS, { body, headers });
      t.equal(res.status, 400, name);
      t.same(res.json.error.fields.map((f: { field: string }) => f.field).sort(), [...fields].sort(), `${name}: fields`);
    }
    const wholeSecondsIn90Days = (now: number) => Math.floor((now + 90 * 86_400_000) / 1000) * 1000;
    const earliest = wholeSecondsIn90Days(clock.now());
    const minted = await trackd.request('POST', KEYS, {
      body: { name: 'dock sync', scopes: ['assets:read', 'tracking:read'], expires_in: '90d', org_id: acme.id },
      headers,
    });
    const latest = wholeSecondsIn90Days(clock.now());
    t.equal(minted.status, 201);
    const key = minted.json.data;
    const expires = Date.parse(key.expires_at);
    // The clock may cross a second while the request runs (a loaded machine).
    t.ok(expires % 1000 === 0 && expires >= earliest && expires <= latest, `90 days, whole seconds (${key.expires_at})`);
    t.equal((await trackd.request('GET', '/api/v1/orgs/me', { token: key.token })).status, 200, 'the key works on the public API');
    const cliList = await trackd.cli(['keys', 'list', '--org', String(acme.id)]);
    t.ok(
      cliList.some((k: { api_key_id: string; name: string }) => k.api_key_id === key.api_key_id && k.name === 'dock sync'),
      'the CLI lists it',
    );
    const listed = await trackd.request('GET', KEYS, { headers });
    t.notOk(JSON.stringify(listed.json).includes(key.token), 'the list never shows a token');
    const foreign = await trackd.createKey(other.id, ['assets:read']);
    const refused = await trackd.request('POST', `${KEYS}/revoke`, { body: { api_key_id: foreign.api_key_id }, headers });
    t.equal(refused.status, 404, 'a key of an organization the user is not in cannot be revoked');
    const revoked = await trackd.request('POST', `${KEYS}/revoke`, { body: { api_key_id: key.api_key_id }, headers });
    t.equal(revoked.status, 200);
    t.ok(revoked.json.data.revoked_at);
    const after = await eventually(
      async () => {
        const r = await trackd.request('GET', '/api/v1/orgs/me', { token: key.token });
        return r.status === 401 ? r : undefined;
      },
      1000,
      20,
    );
    t.equal(after.json.error.detail, 'API key has been revoked', 'refused within a second');

    // Last use: recorded off the request path (the thread's 200 ms timer), to the minute.
    const used = (
      await trackd.request('POST', KEYS, { body: { name: 'in use', scopes: ['assets:read'], expires_in: '30d', org_id: acme.id }, headers })
    ).json.data;
    const usedAt = async () => {
      const r = await trackd.request('GET', KEYS, { headers });
      return r.json.data.find((k: { api_key_id: string }) => k.api_key_id === used.api_key_id).last_used_at as string | null;
    };
    t.equal(await usedAt(), null, 'never used yet');
    t.equal((await trackd.request('GET', '/api/v1/orgs/me', { token: used.token })).status, 200);
    const firstUse = Date.parse((await eventually(usedAt, 2000, 20)) ?? '');
    t.ok(Math.abs(firstUse - clock.now()) < 5000, 'last used: the use just made');
    clock.advance(61_000);
    t.equal((await trackd.request('GET', '/api/v1/orgs/me', { token: used.token })).status, 200);
    const later = await eventually(async () => {
      const at = await usedAt();
      return at !== null && Date.parse(at) >= firstUse + 60_000 ? at : undefined;
    });
    t.ok(later, 'a minute on, the next use moves it');
  });

  t.test('logout and expiry end the session on the server', async (t) => {
    const ann = await login(trackd, 'ann@example.com', acme.id);
    t.equal((await trackd.request('GET', SESSION, { headers: { cookie: ann.cookie } })).status, 200);
    const out = await trackd.request('POST', '/console/api/logout', { headers: { cookie: ann.cookie, 'x-csrf-token': ann.csrf } });
    t.equal(out.status, 204);
    t.match(out.headers.get('set-cookie'), /Max-Age=0/, 'the cookie is cleared');
    const kept = await trackd.request('GET', SESSION, { headers: { cookie: ann.cookie } });
    t.equal(kept.status, 401, 'a kept cookie no longer works');
    t.equal(kept.json.error.detail, 'Your session has ended; sign in again');
    const bob = await login(trackd, 'bob@example.com', acme.id);
    clock.advance(8 * 3600_000 - 60_000);
    t.equal((await trackd.request('GET', SESSION, { headers: { cookie: bob.cookie } })).status, 200, 'valid a minute before 8 h');
    clock.advance(61_000);
    t.equal((await trackd.request('GET', SESSION, { headers: { cookie: bob.cookie } })).status, 401, 'ended after 8 h');
    const forged = await trackd.request('GET', SESSION, {
      headers: { cookie: `trackd_session=${bob.cookie.split('=')[1]!.slice(0, -4)}AAAA` },
    });
    t.equal(forged.status, 401, 'a tampered cookie is refused');
  });

  t.test('failed logins are limited per email (429 with Retry-After); the right password waits too', async (t) => {
    const attempt = (password: string) =>
      trackd.request('POST', '/console/api/login', { body: { email: 'bob@example.com', password, org_id: acme.id } });
    for (let i = 0; i < 5; i++) {
      const res = await attempt('wrong password!');
      t.equal(res.status, 401, `failure ${i + 1}`);
      t.equal(res.json.error.detail, 'Wrong email or password');
    }
    const limited = await attempt(PASSWORD);
    t.equal(limited.status, 429, 'the sixth attempt is refused, right password or not');
    t.ok(
      Number(limited.headers.get('retry-after')) > 0 && Number(limited.headers.get('retry-after')) <= 900,
      'Retry-After within the window',
    );
    clock.advance(15 * 60_000 + 1000);
    t.equal((await attempt(PASSWORD)).status, 200, 'after the window the right password works');
    const unknown = await trackd.request('POST', '/console/api/login', { body: { email: 'nobody@example.com', password: PASSWORD } });
    t.equal(unknown.status, 401, 'an unknown email gets the same answer');
    t.equal(unknown.json.error.detail, 'Wrong email or password');
    const invalid = await trackd.request('POST', '/console/api/login', { body: { email: '', password: '' } });
    t.same(invalid.json.error.fields.map((f: { field: string }) => f.field).sort(), ['email', 'password']);
  });

  t.test('the console page: CSP, no third-party reference, its bundle', async (t) => {
    const page = await trackd.request('GET', '/console/');
    t.equal(page.status, 200);
    const csp = page.headers.get('content-security-policy') ?? '';
    t.match(csp, "default-src 'none'");
    t.match(csp, "script-src 'self'");
    t.notMatch(csp, 'unsafe-inline');
    t.notMatch(page.text, /https?:\/\//, 'the page names no other origin');
    const script = await trackd.request('GET', '/console/app.js');
    t.equal(script.status, 200);
    t.match(script.headers.get('content-type'), 'text/javascript');
    t.notMatch(script.text, /https?:\/\/(?!www\.w3\.org)/, 'the bundle names no other origin');
    t.equal((await trackd.request('GET', '/console/api/tree')).status, 401, 'console data needs a session');
  });
});
