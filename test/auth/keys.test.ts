import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { eventually, startTrackd, testClock } from '../helpers/trackd.js';
import { REALM_HEADER, expectError } from '../helpers/wire.js';

const ME = '/api/v1/orgs/me';

t.test('key lifecycle on the running server: revocation, expiry, deleted organization', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { clock });
  const org = await trackd.createOrg('Acme');
  const key = await trackd.createKey(org.id, ['assets:read']);

  t.test('a revoked key is refused by the running server within one second', async (t) => {
    const victim = await trackd.createKey(org.id, ['assets:read']);
    t.equal((await trackd.request('GET', ME, { token: victim.token })).status, 200, 'works before (and is now cached)');
    const revoked = await trackd.cli(['keys', 'revoke', victim.api_key_id]);
    const revokedAt = Date.now();
    t.equal(revoked.api_key_id, victim.api_key_id);
    const res = await eventually(
      async () => {
        const r = await trackd.request('GET', ME, { token: victim.token });
        return r.status === 401 ? r : undefined;
      },
      1000,
      20,
    );
    const elapsed = Date.now() - revokedAt;
    t.ok(elapsed <= 1000, `refused ${elapsed} ms after the revoke command returned`);
    expectError(t, res, { status: 401, type: 'unauthorized', detail: 'API key has been revoked', instance: ME });
    t.equal(res.headers.get('www-authenticate'), REALM_HEADER);
    const fresh = await trackd.createKey(org.id, ['assets:read']);
    await trackd.cli(['keys', 'revoke', fresh.api_key_id]);
    const uncached = await trackd.request('GET', ME, { token: fresh.token });
    expectError(
      t,
      uncached,
      { status: 401, type: 'unauthorized', detail: 'API key has been revoked', instance: ME },
      'revoked before first use',
    );
  });

  t.test('an expired key gets its own detail, cached or not', async (t) => {
    const unused = await trackd.createKey(org.id, ['assets:read'], ['--expires-in', '2s']);
    const shortLived = await trackd.createKey(org.id, ['assets:read'], ['--expires-in', '5s']);
    t.equal((await trackd.request('GET', ME, { token: shortLived.token })).status, 200, 'valid before expiry');
    const lastExpiry = Math.max(Date.parse(unused.expires_at as string), Date.parse(shortLived.expires_at as string));
    clock.advance(lastExpiry + 1000 - Date.now());
    for (const [name, token] of [
      ['used before expiry', shortLived.token],
      ['first used after expiry', unused.token],
    ]) {
      const res = await trackd.request('GET', ME, { token });
      expectError(t, res, { status: 401, type: 'unauthorized', detail: 'API key has expired', instance: ME }, name);
      t.equal(res.headers.get('www-authenticate'), REALM_HEADER);
    }
  });

  t.test('422 missing_org_context when the key organization no longer exists', async (t) => {
    const doomed = await trackd.createOrg('Doomed');
    const cachedKey = await trackd.createKey(doomed.id, ['assets:read']);
    const uncachedKey = await trackd.createKey(doomed.id, ['locations:read']);
    t.equal((await trackd.request('GET', ME, { token: cachedKey.token })).status, 200);
    const db = new Database(path.join(trackd.dataDir, 'control.sqlite'));
    db.prepare('DELETE FROM orgs WHERE id = ?').run(doomed.id);
    db.close();
    for (const [name, token] of [
      ['cached key', cachedKey.token],
      ['uncached key', uncachedKey.token],
    ]) {
      const res = await trackd.request('GET', ME, { token });
      expectError(t, res, { status: 422, type: 'missing_org_context', instance: ME }, name);
    }
    t.equal((await trackd.request('GET', ME, { token: key.token })).status, 200, 'other organizations are unaffected');
  });
});

t.test('an unexpected failure is 500 internal_error with a generic detail, logged with the request id', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Acme');
  const key = await trackd.createKey(org.id, ['assets:read']);
  t.equal((await trackd.request('GET', ME, { token: key.token })).status, 200);
  // Storage failure: the organizations table disappears under the running server.
  const db = new Database(path.join(trackd.dataDir, 'control.sqlite'));
  db.exec('ALTER TABLE orgs RENAME TO orgs_moved');
  db.close();
  const res = await trackd.request('GET', ME, { token: key.token, headers: { 'x-request-id': 'support-case-42' } });
  expectError(t, res, { status: 500, type: 'internal_error', instance: ME });
  t.equal(res.json.error.request_id, 'support-case-42');
  t.notMatch(res.json.error.detail, /sqlite|orgs|table|SELECT/i, 'no driver text on the wire');
  const logged = await eventually(() => trackd.logs().find((l) => l.level === 50 && l.request_id === 'support-case-42'));
  t.match(logged.err?.message ?? '', /no such table: orgs/, 'the log keeps the driver error');
  t.equal(logged.path, ME);
});
