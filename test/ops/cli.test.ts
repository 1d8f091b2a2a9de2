import t from 'tap';
import { startTrackd } from '../helpers/trackd.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('trackd CLI (operations.md 2): one JSON document on stdout, one-line errors on stderr', async (t) => {
  const trackd = await startTrackd(t);
  const run = (args: string[], env: Record<string, string> = {}) => {
    const r = trackd.cliRaw(args, env);
    return { ...r, lines: r.stdout.split('\n').filter(Boolean) };
  };
  // Through the binary: exit 0, nothing on stderr, the JSON document on one line of stdout. Every
  // command prints through the same line of main.ts, so the shapes below are read in process.
  const wire = (args: string[]) => {
    const r = run(args);
    t.equal(r.status, 0, `trackd ${args.join(' ')}: exit 0`);
    t.equal(r.stderr, '', `trackd ${args.join(' ')}: nothing on stderr`);
    t.equal(r.lines.length, 1, `trackd ${args.join(' ')}: one line on stdout`);
    return JSON.parse(r.stdout);
  };
  const ok = (args: string[]) => trackd.cli(args);

  t.test('every command prints the documented shape, while the server runs', async (t) => {
    const org = wire(['orgs', 'create', '--name', 'Acme Logistics']);
    t.same(Object.keys(org), ['id', 'name']);
    t.match(org, { id: Number, name: 'Acme Logistics' });
    const second = await ok(['orgs', 'create', '--name', 'Beta']);
    t.equal(second.id, org.id + 1);
    t.same(await ok(['orgs', 'list']), [org, second]);

    const key = await ok(['keys', 'create', '--org', String(org.id), '--name', 'integration', '--scopes', 'assets:read,tracking:read']);
    t.same(Object.keys(key), ['api_key_id', 'token', 'expires_at', 'scopes']);
    t.match(key.api_key_id, UUID);
    t.match(key.token, JWT);
    t.equal(key.expires_at, null, 'no expiry unless asked');
    t.same(key.scopes, ['assets:read', 'tracking:read']);
    const me = await trackd.request('GET', '/api/v1/orgs/me', { token: key.token });
    t.same(
      me.json.data,
      { id: org.id, name: 'Acme Logistics', scopes: ['assets:read', 'tracking:read'], api_key_id: key.api_key_id },
      'the running server accepts it',
    );

    const before = Date.now();
    const monthly = await ok([
      'keys',
      'create',
      '--org',
      String(org.id),
      '--name',
      'm',
      '--scopes',
      'locations:write',
      '--expires-in',
      '30d',
    ]);
    t.match(monthly.expires_at, ISO);
    const delta = Date.parse(monthly.expires_at) - before - 30 * 86_400_000;
    t.ok(delta > -1000 && delta < 60_000, '--expires-in 30d is 30 days from now (whole seconds)');
    const fixed = await ok([
      'keys',
      'create',
      '--org',
      String(org.id),
      '--name',
      'f',
      '--scopes',
      'assets:write',
      '--expires-at',
      '2031-02-03T04:05:06+02:00',
    ]);
    t.equal(fixed.expires_at, '2031-02-03T02:05:06.000Z', '--expires-at in any offset, printed in UTC');
    const production = await ok([
      'keys',
      'create',
      '--org',
      String(org.id),
      '--name',
      'p',
      '--scopes',
      'assets:read',
      '--env',
      'production',
    ]);
    t.equal(JSON.parse(Buffer.from(production.token.split('.')[1], 'base64url').toString()).env, 'production');

    const listed = wire(['keys', 'list', '--org', String(org.id)]);
    t.equal(listed.length, 4);
    t.notOk(JSON.stringify(listed).includes(key.token.split('.')[2]), 'no token material in the list');
    t.notOk(
      listed.some((k: Record<string, unknown>) => 'token' in k),
      'no token field',
    );
    t.match(listed[0], {
      api_key_id: key.api_key_id,
      org_id: org.id,
      name: 'integration',
      scopes: ['assets:read', 'tracking:read'],
      env: 'preview',
      expires_at: null,
      revoked_at: null,
    });
    t.match(listed[0].created_at, ISO);
    t.same(await ok(['keys', 'list', '--org', String(second.id)]), [], 'an org without keys lists none');

    const revoked = await ok(['keys', 'revoke', key.api_key_id]);
    t.same(Object.keys(revoked), ['api_key_id', 'revoked_at']);
    t.equal(revoked.api_key_id, key.api_key_id);
    t.match(revoked.revoked_at, ISO);
    t.same(await ok(['keys', 'revoke', key.api_key_id]), revoked, 'revoking twice keeps the first time');
    t.equal((await ok(['keys', 'list', '--org', String(org.id)]))[0].revoked_at, revoked.revoked_at);

    const session = await ok(['sessions', 'create', '--org', String(org.id), '--user', 'alice']);
    t.same(Object.keys(session), ['token']);
    t.match(session.token, JWT);
    t.equal((await trackd.request('GET', '/api/v1/orgs/me', { token: session.token })).status, 401, 'the API refuses the session token');
  });
});
