import { createHmac, generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { SignJWT, importJWK } from 'jose';
import { ALL_SCOPES, eventually, startTrackd, tempDir, testClock } from '../helpers/trackd.js';
import { envelopeProblems, shardSnapshotter } from '../helpers/hostile.js';
import { operationsOf, type Operation } from '../helpers/openapiFuzz.js';
import { natsClient, publish, scanBody } from '../helpers/scans.js';
import { inlineRefs } from '../helpers/openapi.js';
import { runImport } from '../helpers/bulk.js';

/**
 * Keys and organization isolation over EVERY operation of the OpenAPI document: forged and borrowed
 * tokens on scoped endpoints (the foundation tests cover /orgs/me), and a key of organization B
 * naming organization A's ids and keys gets exactly what it gets for a record that does not exist.
 */

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const part = (token: string, i: number) => JSON.parse(Buffer.from(token.split('.')[i]!, 'base64url').toString());
/** An id no organization has: what "missing" looks like. */
const MISSING_ID = 2_147_000_001;

t.test('isolation and forged keys across every operation', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { clock });
  const orgA = await trackd.createOrg('Tenant A');
  const orgB = await trackd.createOrg('Tenant B');
  const keyA = await trackd.createKey(orgA.id);
  const keyB = await trackd.createKey(orgB.id);
  const doc = inlineRefs((await trackd.request('GET', '/api/openapi.json')).json);
  // The operations the interface's five scopes reach; webhook endpoints' isolation is test/webhooks/api.test.ts's.
  const ops = operationsOf(doc).filter((op) => op.scopes.every((scope) => ALL_SCOPES.includes(scope)));
  const reqA = (method: string, p: string, body?: unknown) => trackd.request(method, p, { token: keyA.token, body });
  const reqB = (method: string, p: string, body?: unknown) => trackd.request(method, p, { token: keyB.token, body });

  // Organization A: a small tree, an asset with a tag, a tag on a location, and scans (report and history rows).
  const root = (await reqA('POST', '/api/v1/locations', { external_key: 'A-ROOT', name: 'Secret Root' })).json.data;
  const dock = (
    await reqA('POST', '/api/v1/locations', {
      external_key: 'A-DOCK',
      name: 'Secret Dock',
      parent_id: root.id,
      tags: [{ tag_type: 'barcode', value: 'A-DOCK-TAG' }],
    })
  ).json.data;
  const asset = (
    await reqA('POST', '/api/v1/assets', {
      external_key: 'A-PALLET',
      name: 'Secret Pallet',
      tags: [{ tag_type: 'rfid', value: 'A-EPC-1' }],
    })
  ).json.data;
  t.ok(root?.id && dock?.id && asset?.id, 'organization A seeded');
  const nc = await natsClient(t, trackd.natsUrl);
  await publish(nc, `scans.${orgA.id}.fixed`, scanBody('A-DOCK', ['rfid:A-EPC-1'], new Date(Date.now() - 60_000)));
  await publish(nc, `scans.${orgA.id}.fixed`, scanBody('A-ROOT', ['rfid:A-EPC-1'], new Date(Date.now() - 30_000)));
  await eventually(async () => (await reqA('GET', `/api/v1/assets/${asset.id}/history`)).json?.total_count === 2, 10_000);
  const reportA = await reqA('GET', '/api/v1/reports/asset-locations');
  t.equal(reportA.json.total_count, 1, 'A sees its asset in the report');
  // Organization B has rows of its own, so an empty answer is not an empty organization.
  const rootB = (await reqB('POST', '/api/v1/locations', { external_key: 'B-ROOT', name: 'B Root' })).json.data;
  const assetB = (
    await reqB('POST', '/api/v1/assets', { external_key: 'B-PALLET', name: 'B Pallet', tags: [{ tag_type: 'rfid', value: 'B-EPC-1' }] })
  ).json.data;
  await publish(nc, `scans.${orgB.id}.fixed`, scanBody('B-ROOT', ['rfid:B-EPC-1']));
  await eventually(async () => (await reqB('GET', '/api/v1/reports/asset-locations')).json?.total_count === 1, 10_000);

  const jobA = await runImport(trackd, keyA.token, 'assets', 'external_key,name\nA-BULK,Secret Bulk\n');
  t.ok(jobA.job_id, 'organization A has an import job');

  const snapshot = shardSnapshotter(t, trackd);

  // Which of A's ids a path parameter names, per operation path.
  const idOfA = (op: Operation, param: string): number | string => {
    if (param === 'job_id') return jobA.job_id;
    if (param === 'asset_id') return asset.id;
    if (param === 'location_id') return dock.id;
    if (param === 'tag_id') return (op.path.startsWith('/api/v1/assets') ? asset : dock).tags[0].id;
    throw new Error(`no A id for ${param} in ${op.path}`);
  };
  const bodyFor = (op: Operation): unknown => {
    if (op.requestBody === undefined) return undefined;
    if (op.path.endsWith('/rename')) return { external_key: 'HIJACKED' };
    if (op.path.endsWith('/tags')) return { tag_type: 'rfid', value: 'HIJACK-TAG' };
    if (op.method === 'PATCH') return { name: 'Hijacked' };
    return { name: 'Hijacked' };
  };
  const normalize = (text: string, ids: Array<number | string>) => {
    let out = text
      .replace(/"request_id":"[^"]*"/, '')
      .split(String(MISSING_ID))
      .join('<id>');
    for (const id of ids) out = out.replace(new RegExp(`\\b${id}\\b`, 'g'), '<id>');
    return out;
  };

  t.test('B naming A ids by path gets what B gets for a missing id, on every operation with a path id', async (t) => {
    const before = snapshot();
    let checked = 0;
    for (const op of ops.filter((o) => o.path.includes('{'))) {
      const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      const aIds = params.map((p) => idOfA(op, p));
      const withA = op.path.replace(/\{(\w+)\}/g, (_m, p: string) => String(idOfA(op, p)));
      const missing = op.path.replace(/\{(\w+)\}/g, () => String(MISSING_ID));
      const asB = await reqB(op.method, withA, bodyFor(op));
      const asMissing = await reqB(op.method, missing, bodyFor(op));
      t.equal(asB.status, 404, `${op.method} ${op.path}: 404 for A's ids`);
      t.equal(asB.status, asMissing.status, `${op.method} ${op.path}: same status as a missing id`);
      const aPath = withA;
      t.equal(
        normalize(asB.text, aIds).replace(aPath, '<path>'),
        normalize(asMissing.text, aIds).replace(missing, '<path>'),
        `${op.method} ${op.path}: same body as a missing id (ids and request_id aside)`,
      );
      t.same(envelopeProblems(asB.status, asB.headers, asB.text, withA), [], 'error envelope');
      t.notMatch(asB.text, /Secret|A-ROOT|A-DOCK|A-PALLET|A-EPC/, 'nothing of A in the answer');
      checked++;
    }
    t.ok(checked >= 10, `${checked} operations with path ids checked`);
    t.equal(snapshot(), before, "nothing changed: B's writes on A's ids were all refused");
    const stillA = await reqA('GET', `/api/v1/assets/${asset.id}`);
    t.equal(stillA.json.data.name, 'Secret Pallet');
    t.equal(stillA.json.data.tags.length, 1);
  });

  t.test("B naming A's keys, ids and names in list filters gets 200 and an empty page, on every list", async (t) => {
    const filterValues: Record<string, string> = {
      external_key: 'A-PALLET',
      parent_id: String(root.id),
      parent_external_key: 'A-ROOT',
      location_id: String(dock.id),
      location_external_key: 'A-ROOT',
      asset_id: String(asset.id),
      asset_external_key: 'A-PALLET',
      q: 'Secret',
    };
    const listFilterValue = (op: Operation, name: string) =>
      name === 'external_key' && op.path.startsWith('/api/v1/locations')
        ? 'A-DOCK'
        : name === 'location_id'
          ? String(root.id)
          : filterValues[name]!;
    let checked = 0;
    // A list answers a page and its total; an export streams every row as NDJSON (no paging).
    const rowsOf = (res: { json?: any; text: string }, isExport: boolean) =>
      isExport
        ? {
            data: res.text.split('\n').filter((line) => line !== ''),
            total_count: res.text.split('\n').filter((line) => line !== '').length,
          }
        : { data: res.json?.data, total_count: res.json?.total_count };
    // An event stream is no page (it stays open): its filters' isolation is test/events/stream.test.ts's.
    const isStream = (op: Operation) => op.responses['200']?.content !== undefined && 'text/event-stream' in op.responses['200'].content;
    for (const op of ops.filter((o) => o.method === 'GET' && !o.path.includes('{') && !isStream(o))) {
      const isExport = op.path.endsWith('/export');
      for (const param of op.parameters.filter((p) => p.in === 'query' && p.name in filterValues)) {
        const url = `${op.path}?${param.name}=${encodeURIComponent(listFilterValue(op, param.name))}&include_deleted=true`;
        const asA = await reqA('GET', url);
        t.ok(rowsOf(asA, isExport).total_count >= 1, `${url}: matches for A (the filter is meaningful)`);
        const asB = await reqB('GET', url);
        t.equal(asB.status, 200, `${url}: 200 for B`);
        t.same(rowsOf(asB, isExport), { data: [], total_count: 0 }, `${url}: empty for B`);
        checked++;
      }
      const everything = await reqB('GET', `${op.path}?include_deleted=true${isExport ? '' : '&limit=200'}`);
      if (everything.status === 200) {
        t.ok(rowsOf(everything, isExport).total_count >= 1, `${op.path}: B sees its own rows`);
        t.notMatch(everything.text, /Secret|A-ROOT|A-DOCK|A-PALLET|A-EPC/, `${op.path}: nothing of A in B's unfiltered list`);
      }
    }
    t.ok(checked >= 8, `${checked} list filters checked`);
  });

  t.test("B's writes that name A's records as references are refused as for missing ones; equal keys do not collide", async (t) => {
    const byA = await reqB('POST', '/api/v1/locations', { name: 'Child', parent_id: root.id });
    const byMissing = await reqB('POST', '/api/v1/locations', { name: 'Child', parent_id: MISSING_ID });
    t.equal(byA.status, 400);
    t.same(
      byA.json.error.fields.map((f: any) => f.code),
      byMissing.json.error.fields.map((f: any) => f.code),
      'parent_id of A: fk_not_found as for a missing id',
    );
    const byKey = await reqB('POST', '/api/v1/locations', { name: 'Child', parent_external_key: 'A-ROOT' });
    t.same(
      byKey.json.error.fields.map((f: any) => f.code),
      ['fk_not_found'],
      'parent_external_key of A: fk_not_found',
    );
    const patch = await reqB('PATCH', `/api/v1/locations/${rootB.id}`, { parent_id: dock.id });
    t.same(
      patch.json.error?.fields?.map((f: any) => f.code),
      ['fk_not_found'],
      'PATCH re-parent under A: fk_not_found',
    );
    // Uniqueness is per organization: A's keys and tag values are free in B.
    const sameKey = await reqB('POST', '/api/v1/assets', {
      external_key: 'A-PALLET',
      name: 'Mine',
      tags: [{ tag_type: 'rfid', value: 'A-EPC-1' }],
    });
    t.equal(sameKey.status, 201, "B may use A's external_key and tag value");
    const sameLoc = await reqB('POST', '/api/v1/locations', {
      external_key: 'A-DOCK',
      name: 'Mine',
      tags: [{ tag_type: 'barcode', value: 'A-DOCK-TAG' }],
    });
    t.equal(sameLoc.status, 201);
    const rename = await reqB('POST', `/api/v1/assets/${assetB.id}/rename`, { external_key: 'A-ROOT' });
    t.equal(rename.status, 200, 'renaming to a key A uses is fine in B');
    // A scan for B that names the now-shared tag moves only B's asset.
    await publish(nc, `scans.${orgB.id}.fixed`, scanBody('A-DOCK', ['rfid:A-EPC-1']));
    await eventually(async () => (await reqB('GET', `/api/v1/assets/${sameKey.json.data.id}/history`)).json?.total_count === 1, 10_000);
    const reportAfter = await reqA('GET', '/api/v1/reports/asset-locations');
    t.same(
      reportAfter.json.data.map((r: any) => [r.asset_id, r.location_id]),
      [[asset.id, root.id]],
      "A's report is untouched",
    );
    const historyA = await reqA('GET', `/api/v1/assets/${asset.id}/history`);
    t.equal(historyA.json.total_count, 2, "A's history is untouched");
  });

  t.test('forged, borrowed and foreign tokens are 401 on every scoped operation', async (t) => {
    const signing = JSON.parse(fs.readFileSync(path.join(trackd.dataDir, 'keys', 'signing-key.json'), 'utf8'));
    const privateKey = await importJWK(signing.privateJwk, 'EdDSA');
    const header = part(keyA.token, 0);
    const claims = part(keyA.token, 1);
    const [h, p, s] = keyA.token.split('.');
    const sign = (hdr: Record<string, unknown>, body: Record<string, unknown>) =>
      new SignJWT(body).setProtectedHeader(hdr as any).sign(privateKey);
    const hsHeader = b64url({ alg: 'HS256', typ: 'JWT', kid: header.kid });
    const stranger = generateKeyPairSync('ed25519');
    const strangerJwk = { ...stranger.privateKey.export({ format: 'jwk' }) };
    const other = tempDir();
    t.teardown(() => fs.rmSync(other, { recursive: true, force: true }));
    const otherOrg = await trackd.cli(['orgs', 'create', '--name', 'Elsewhere'], { DATA_DIR: other });
    const foreign = await trackd.cli(
      [
        'keys',
        'create',
        '--org',
        String(otherOrg.id),
        '--name',
        'x',
        '--scopes',
        'assets:read,locations:read,tracking:read,assets:write,locations:write',
      ],
      { DATA_DIR: other },
    );
    const revoked = await trackd.createKey(orgA.id);
    await trackd.cli(['keys', 'revoke', revoked.api_key_id]);
    const expired = await trackd.createKey(orgA.id, undefined, ['--expires-in', '1s']);
    const now = Math.floor(Date.now() / 1000);
    const forged: Record<string, { token: string; detail: string | RegExp }> = {
      'alg none': { token: `${b64url({ alg: 'none', typ: 'JWT', kid: header.kid })}.${p}.`, detail: 'Invalid or expired token' },
      'HS256 keyed with the public key': {
        token: `${hsHeader}.${p}.${createHmac('sha256', Buffer.from(signing.publicJwk.x, 'base64url')).update(`${hsHeader}.${p}`).digest('base64url')}`,
        detail: 'Invalid or expired token',
      },
      'wrong kid, valid signature': { token: await sign({ ...header, kid: 'not-our-key' }, claims), detail: 'Invalid or expired token' },
      'signed by a stranger under our kid': {
        token: await new SignJWT(claims).setProtectedHeader(header).sign(await importJWK({ ...strangerJwk, alg: 'EdDSA' } as any, 'EdDSA')),
        detail: 'Invalid or expired token',
      },
      'key of another installation': { token: foreign.token, detail: 'Invalid or expired token' },
      'tampered scopes': {
        token: `${h}.${b64url({ ...claims, scopes: [...claims.scopes, 'keys:admin'] })}.${s}`,
        detail: 'Invalid or expired token',
      },
      'tampered org (B)': { token: `${h}.${b64url({ ...claims, org: orgB.id })}.${s}`, detail: 'Invalid or expired token' },
      'not yet valid (nbf in an hour)': { token: await sign(header, { ...claims, nbf: now + 3600 }), detail: 'Invalid or expired token' },
      'expired by exp claim': {
        token: await sign(header, { ...claims, exp: now - 60 }),
        detail: /^(API key has expired|Invalid or expired token)$/,
      },
      'validly signed, org that does not exist': {
        token: await sign(header, { ...claims, org: 999_999 }),
        detail: 'Invalid or expired token',
      },
      'validly signed, key id that does not exist': {
        token: await sign(header, { ...claims, sub: '00000000-0000-4000-8000-000000000000' }),
        detail: 'Invalid or expired token',
      },
      revoked: { token: revoked.token, detail: 'API key has been revoked' },
      expired: { token: expired.token, detail: 'API key has expired' },
      'other environment': {
        token: (await trackd.createKey(orgA.id, undefined, ['--env', 'production'])).token,
        detail: 'Invalid or expired token',
      },
      'session token': {
        token: (await trackd.cli(['sessions', 'create', '--org', String(orgA.id), '--user', 'mallory'])).token,
        detail: 'Invalid or expired token',
      },
    };
    clock.advance(2000); // past the 1 s expiry
    const before = snapshot();
    let checked = 0;
    for (const op of ops.filter((o) => o.scopes.length > 0)) {
      const url = op.path.replace(/\{(\w+)\}/g, (_m, p: string) => String(idOfA(op, p)));
      for (const [name, { token, detail }] of Object.entries(forged)) {
        const res = await trackd.request(op.method, url, { token, body: bodyFor(op) });
        t.equal(res.status, 401, `${op.method} ${op.path} / ${name}: 401`);
        if (typeof detail === 'string') t.equal(res.json?.error?.detail, detail, `${name}: detail`);
        else t.match(res.json?.error?.detail, detail, `${name}: detail`);
        t.equal(res.headers.get('www-authenticate'), 'Bearer realm="trackd-api"', `${name}: challenge`);
        t.same(envelopeProblems(res.status, res.headers, res.text, url), [], `${name}: envelope`);
        checked++;
      }
    }
    t.ok(checked >= 15 * 10, `${checked} forged-token requests`);
    t.equal(snapshot(), before, 'no forged token changed anything');
  });
});
