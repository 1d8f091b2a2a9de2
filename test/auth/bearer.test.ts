import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startTrackd, tempDir } from '../helpers/trackd.js';
import { REALM_HEADER, expectError, expectRateHeaders } from '../helpers/wire.js';

const ME = '/api/v1/orgs/me';

const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

function decodePart(token: string, index: number): any {
  return JSON.parse(Buffer.from(token.split('.')[index]!, 'base64url').toString());
}

t.test('API key authentication on GET /api/v1/orgs/me (interface 5)', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Acme');
  const key = await trackd.createKey(org.id, ['assets:read', 'tracking:read']);
  const header = decodePart(key.token, 0);
  const claims = decodePart(key.token, 1);

  t.test('a valid key answers the organization, its scopes and the key id', async (t) => {
    const res = await trackd.request('GET', ME, { token: key.token });
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-type'), 'application/json');
    t.same(res.json, { data: { id: org.id, name: 'Acme', scopes: ['assets:read', 'tracking:read'], api_key_id: key.api_key_id } });
    t.equal(claims.sub, key.api_key_id, 'sub is api_key_id');
    t.equal(claims.org, org.id, 'the key carries its org');
    t.same(claims.scopes, ['assets:read', 'tracking:read'], 'the key carries its scopes');
    t.equal(claims.env, 'preview', 'the key carries its environment');
    t.equal(header.alg, 'EdDSA', 'asymmetric signature');
    t.type(header.kid, 'string', 'kid set');
    t.equal(res.headers.get('www-authenticate'), null, 'no challenge on success');
    const both = await trackd.request('GET', ME, { token: key.token, headers: { 'x-api-key': 'ignored' } });
    t.equal(both.status, 200, 'X-API-Key beside a valid Authorization header is ignored');
  });

  // Tokens forged or borrowed in every way section 5 and the issue name.
  const other = tempDir();
  t.teardown(() => fs.rmSync(other, { recursive: true, force: true }));
  const otherOrg = await trackd.cli(['orgs', 'create', '--name', 'Elsewhere'], { DATA_DIR: other });
  const foreign = await trackd.cli(['keys', 'create', '--org', String(otherOrg.id), '--name', 'x', '--scopes', 'assets:read'], {
    DATA_DIR: other,
  });
  const production = await trackd.createKey(org.id, ['assets:read'], ['--env', 'production']);
  const session = await trackd.cli(['sessions', 'create', '--org', String(org.id), '--user', 'alice']);
  const signingKey = JSON.parse(fs.readFileSync(path.join(trackd.dataDir, 'keys', 'signing-key.json'), 'utf8'));
  const [h, p, s] = key.token.split('.');
  const noneToken = `${b64url({ alg: 'none', typ: 'JWT', kid: header.kid })}.${p}.`;
  const hsHeader = b64url({ alg: 'HS256', typ: 'JWT', kid: header.kid });
  const hsWith = (secret: string | Buffer) =>
    `${hsHeader}.${p}.${createHmac('sha256', secret).update(`${hsHeader}.${p}`).digest('base64url')}`;
  const tampered = `${h}.${b64url({ ...claims, scopes: ['assets:read', 'assets:write', 'keys:admin'] })}.${s}`;
  const otherOrgClaims = `${h}.${b64url({ ...claims, org: org.id + 1 })}.${s}`;
  const wrongKid = `${b64url({ ...header, kid: 'another-key' })}.${p}.${s}`;

  const cases: { name: string; headers: Record<string, string>; detail: string }[] = [
    { name: 'no Authorization header', headers: {}, detail: 'Missing authorization header' },
    { name: 'X-API-Key alone', headers: { 'x-api-key': key.token }, detail: 'Use Authorization: Bearer <token>' },
    {
      name: 'Basic scheme',
      headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      detail: 'Invalid authorization header format',
    },
    { name: 'token without a scheme', headers: { authorization: key.token }, detail: 'Invalid authorization header format' },
    { name: 'Bearer without a token', headers: { authorization: 'Bearer' }, detail: 'Invalid authorization header format' },
    {
      name: 'Bearer with two words',
      headers: { authorization: `Bearer ${key.token} extra` },
      detail: 'Invalid authorization header format',
    },
    { name: 'garbage token', headers: { authorization: 'Bearer not-a-jwt' }, detail: 'Invalid or expired token' },
    { name: 'three garbage segments', headers: { authorization: 'Bearer a.b.c' }, detail: 'Invalid or expired token' },
    { name: 'alg none', headers: { authorization: `Bearer ${noneToken}` }, detail: 'Invalid or expired token' },
    {
      name: 'HS256 signed with the public key (x)',
      headers: { authorization: `Bearer ${hsWith(Buffer.from(signingKey.publicJwk.x, 'base64url'))}` },
      detail: 'Invalid or expired token',
    },
    {
      name: 'HS256 signed with the public JWK text',
      headers: { authorization: `Bearer ${hsWith(JSON.stringify(signingKey.publicJwk))}` },
      detail: 'Invalid or expired token',
    },
    { name: 'wrong kid', headers: { authorization: `Bearer ${wrongKid}` }, detail: 'Invalid or expired token' },
    { name: 'tampered scopes', headers: { authorization: `Bearer ${tampered}` }, detail: 'Invalid or expired token' },
    { name: 'tampered org', headers: { authorization: `Bearer ${otherOrgClaims}` }, detail: 'Invalid or expired token' },
    { name: 'key of another installation', headers: { authorization: `Bearer ${foreign.token}` }, detail: 'Invalid or expired token' },
    { name: 'key of the other TRACKD_ENV', headers: { authorization: `Bearer ${production.token}` }, detail: 'Invalid or expired token' },
    { name: 'session JWT', headers: { authorization: `Bearer ${session.token}` }, detail: 'Invalid or expired token' },
  ];
  for (const c of cases) {
    t.test(`401: ${c.name}`, async (t) => {
      const res = await trackd.request('GET', ME, { headers: c.headers });
      expectError(t, res, { status: 401, type: 'unauthorized', detail: c.detail, instance: ME }, c.name);
      t.equal(res.headers.get('www-authenticate'), REALM_HEADER, 'WWW-Authenticate: Bearer realm, no other parameter');
      expectRateHeaders(t, res, c.name);
    });
  }
});
