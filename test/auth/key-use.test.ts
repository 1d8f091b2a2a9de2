import t from 'tap';
import { KEY_USE_GRAIN_MS, KeyUse } from '../../src/auth/keyUse.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { tempDir } from '../helpers/trackd.js';

/**
 * An API key's last use (control migration 004): a request queues it at most once a minute per
 * thread, a timer writes the queue, and the write moves last_used_at only when the stored one is a
 * minute older, so that threads and processes sharing control.sqlite write a key once a minute.
 */
t.test('key use: queued once a minute per thread, written once a minute between writers', async (t) => {
  const dir = tempDir();
  const control = await ControlPlane.open(dir);
  t.teardown(() => control.close());
  const org = await control.createOrg('Org', 1);
  const key = await control.createKey({ orgId: org.id, name: 'k', scopes: ['assets:read'], env: 'test', expiresAt: null });
  const other = await control.createKey({ orgId: org.id, name: 'other', scopes: ['assets:read'], env: 'test', expiresAt: null });
  const lastUsed = (id = key.id) => control.getKey(id)!.last_used_at;
  const T = Date.UTC(2026, 0, 1);
  t.equal(lastUsed(), null, 'a new key was never used');

  const thread = new KeyUse(control);
  thread.seen(key.id, T);
  t.equal(lastUsed(), null, 'nothing is written on the request path');
  thread.flush();
  t.equal(lastUsed(), T, 'the timer writes it');

  // Within the minute this thread queues nothing: a row cleared by hand stays cleared after a flush.
  control.db.prepare('UPDATE api_keys SET last_used_at = NULL WHERE id = ?').run(key.id);
  thread.seen(key.id, T + KEY_USE_GRAIN_MS - 1);
  thread.flush();
  t.equal(lastUsed(), null, 'a use within the minute is not queued');
  thread.seen(key.id, T + KEY_USE_GRAIN_MS);
  thread.seen(other.id, T + KEY_USE_GRAIN_MS);
  thread.flush();
  t.same(
    [lastUsed(), lastUsed(other.id)],
    [T + KEY_USE_GRAIN_MS, T + KEY_USE_GRAIN_MS],
    'a minute later it is, with every key queued, in one write',
  );

  const cases: [string, number, number][] = [
    ['another thread, within the minute: kept', T + KEY_USE_GRAIN_MS + 30_000, T + KEY_USE_GRAIN_MS],
    ['another thread, an older use: kept', T, T + KEY_USE_GRAIN_MS],
    ['another thread, a minute later: written', T + 2 * KEY_USE_GRAIN_MS, T + 2 * KEY_USE_GRAIN_MS],
  ];
  for (const [what, at, stored] of cases) {
    const another = new KeyUse(control);
    another.seen(key.id, at);
    another.flush();
    t.equal(lastUsed(), stored, what);
  }

  const second = await ControlPlane.open(dir);
  t.teardown(() => second.close());
  second.db.pragma('busy_timeout = 0');
  control.db.exec('BEGIN IMMEDIATE');
  const queued = new KeyUse(second);
  queued.seen(key.id, T + 3 * KEY_USE_GRAIN_MS);
  t.throws(() => queued.flush(), /locked|busy/i, 'a busy control file fails the write');
  control.db.exec('COMMIT');
  queued.flush();
  t.equal(lastUsed(), T + 3 * KEY_USE_GRAIN_MS, 'the failed use stayed queued and is written by the next flush');
});
