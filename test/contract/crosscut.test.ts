import t from 'tap';
import { eventually, startTrackd, type HttpResult } from '../helpers/trackd.js';
import { INTEGRATOR_SCOPES } from '../../src/auth/tokens.js';
import { expectError, expectRateHeaders } from '../helpers/wire.js';
import { inlineRefs } from '../helpers/openapi.js';

/**
 * Contract audit: the cross-cutting rules of interface.md checked on EVERY operation of the served
 * OpenAPI document (so a path added later is covered without touching this file): HEAD (1.4),
 * 405/OPTIONS (1.5), path ids (4, 7.2), unknown query names and list filters on detail/write
 * endpoints (4), rate-limit headers on every /api response (8), instance = request path (7.1),
 * scopes (5.4) and the outbound timestamp form (2.8).
 */

interface Operation {
  method: string;
  path: string;
  scopes: string[];
  queryNames: string[];
  /** Path parameters that are text (a bulk job id), not integer ids. */
  textParams: string[];
  /** The media types of a streamed upload body (bulk imports), else empty. */
  uploadTypes: string[];
}

const BAD_IDS: [string, string][] = [
  ['0', 'too_small'],
  ['-1', 'too_small'],
  ['2147483648', 'too_large'],
  ['abc', 'invalid_value'],
];

/** The list filters of interface 4.3; on a detail or write endpoint each one is invalid_context. */
const LIST_FILTERS = ['limit=5', 'offset=0', 'sort=name', 'q=x', 'external_key=A', 'include_deleted=true', 'location_id=1'];

const TIMESTAMP_FIELDS = new Set([
  'valid_from',
  'valid_to',
  'created_at',
  'updated_at',
  'deleted_at',
  'event_observed_at',
  'asset_last_seen',
  'asset_deleted_at',
  'last_seen_at',
]);
const OUTBOUND_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** Every timestamp-named field anywhere in a response body, with its JSON path. */
function timestampFields(node: unknown, at = '$'): [string, unknown][] {
  if (Array.isArray(node)) return node.flatMap((item, i) => timestampFields(item, `${at}[${i}]`));
  if (node === null || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([key, value]) => [
    ...(TIMESTAMP_FIELDS.has(key) ? ([[`${at}.${key}`, value]] as [string, unknown][]) : []),
    ...timestampFields(value, `${at}.${key}`),
  ]);
}

const fieldCodes = (res: HttpResult) => (res.json?.error?.fields ?? []).map((f: { field: string; code: string }) => [f.field, f.code]);

t.test('cross-cutting contract rules on every documented operation', async (t) => {
  // A webhook to a loopback port nothing listens on: its deliveries fail and wait, harmlessly.
  const trackd = await startTrackd(t, { env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' } });
  const org = await trackd.createOrg('Audit');
  // Every scope a key can hold (the interface's five and the webhook scopes): every operation is reachable.
  const { token } = await trackd.createKey(org.id, [...INTEGRATOR_SCOPES]);

  // Fixture: a root and a child location (the child with a tag), an asset with a tag and a scan.
  // Inbound timestamps use an offset and nine fractional digits: outbound must be UTC .NNNZ, truncated.
  const root = await trackd.request('POST', '/api/v1/locations', {
    token,
    body: { external_key: 'ROOT', name: 'Root', valid_from: '2020-01-01T05:00:00.999999999+05:00' },
  });
  t.equal(root.status, 201, 'root location');
  t.equal(root.json.data.valid_from, '2020-01-01T00:00:00.999Z', 'offset converted to UTC, sub-millisecond digits truncated');
  const child = await trackd.request('POST', '/api/v1/locations', {
    token,
    body: {
      external_key: 'DOCK',
      name: 'Dock',
      parent_id: root.json.data.id,
      tags: [{ tag_type: 'ble', value: 'beacon-1' }],
      valid_to: '2999-12-31T23:59:59.1239Z',
    },
  });
  t.equal(child.status, 201, 'child location');
  t.equal(child.json.data.valid_to, '2999-12-31T23:59:59.123Z');
  const asset = await trackd.request('POST', '/api/v1/assets', {
    token,
    body: { external_key: 'PUMP', name: 'Pump', tags: [{ tag_type: 'rfid', value: 'E-PUMP' }], valid_from: '2021-06-01T12:00:00Z' },
  });
  t.equal(asset.status, 201, 'asset');
  t.equal(asset.json.data.valid_from, '2021-06-01T12:00:00.000Z', 'whole seconds gain .000');
  await trackd.cli([
    'scans',
    'publish',
    '--org',
    String(org.id),
    '--location',
    'DOCK',
    '--tag',
    'rfid:E-PUMP',
    '--observed-at',
    '2026-11-21T10:00:00.123456+02:00',
  ]);
  await eventually(async () => (await trackd.request('GET', '/api/v1/reports/asset-locations', { token })).json?.total_count === 1, 10_000);

  const job = await trackd.request('POST', '/api/v1/assets/bulk', { token, body: 'name\nImported\n', contentType: 'text/csv' });
  t.equal(job.status, 202, 'an import job');
  const locationJob = await trackd.request('POST', '/api/v1/locations/bulk', { token, body: 'name\nImported\n', contentType: 'text/csv' });
  t.equal(locationJob.status, 202, 'a location import job');
  const webhook = await trackd.request('POST', '/api/v1/webhooks', {
    token,
    body: { url: 'http://127.0.0.1:9/hook', event_types: ['asset.moved'] },
  });
  t.equal(webhook.status, 201, 'a webhook');
  const sent = await trackd.request('POST', `/api/v1/webhooks/${webhook.json.data.id}/test`, { token, body: {} });
  t.equal(sent.status, 202, 'a test event for it');
  const delivery = await eventually(async () => {
    const log = await trackd.request('GET', `/api/v1/webhooks/${webhook.json.data.id}/deliveries`, { token });
    return log.json?.data?.[0];
  }, 30_000);
  const ids: Record<string, number | string> = {
    asset_id: asset.json.data.id,
    location_id: child.json.data.id,
    job_id: job.json.job_id,
    webhook_id: webhook.json.data.id,
    delivery_id: delivery.id,
  };
  const tagIds: Record<string, number> = { asset_id: asset.json.data.tags[0].id, location_id: child.json.data.tags[0].id };
  const concrete = (path: string, override: Record<string, string> = {}) =>
    path.replace(/\{(\w+)\}/g, (_m, name: string) => {
      if (override[name] !== undefined) return override[name];
      if (name === 'tag_id') return String(path.includes('{asset_id}') ? tagIds.asset_id : tagIds.location_id);
      if (name === 'job_id' && path.startsWith('/api/v1/locations/')) return locationJob.json.job_id;
      return String(ids[name]);
    });
  /** A body the operation would accept, so that only the rule under test can fail. */
  const validBody = (op: Operation): unknown => {
    // A webhook's merge patch must change something (minProperties 1).
    if (op.method === 'PATCH') return op.path.startsWith('/api/v1/webhooks') ? { description: 'Never stored' } : {};
    if (op.method !== 'POST') return undefined;
    if (op.path === '/api/v1/webhooks') return { url: 'http://127.0.0.1:9/never', event_types: ['asset.moved'] };
    if (op.path.endsWith('/replay')) return { after: 0 };
    if (op.path.startsWith('/api/v1/webhooks/')) return {};
    // An import body (a CSV with a header row); none of the checks below lets one through.
    if (op.uploadTypes.length > 0) return 'name\nNever stored\n';
    if (op.path.endsWith('/rename')) return { external_key: 'RENAMED' };
    if (op.path.endsWith('/tags')) return { tag_type: 'barcode', value: 'never-stored' };
    if (op.path.endsWith('/events/tickets')) return {};
    return { name: 'Never stored' };
  };

  const doc = inlineRefs((await trackd.request('GET', '/api/openapi.json')).json);
  const operations: Operation[] = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      scopes: op['x-required-scopes'] as string[],
      queryNames: ((op.parameters ?? []) as { name: string; in: string }[]).filter((p) => p.in === 'query').map((p) => p.name),
      textParams: ((op.parameters ?? []) as { name: string; in: string; schema: { type: string } }[])
        .filter((p) => p.in === 'path' && p.schema.type === 'string')
        .map((p) => p.name),
      uploadTypes: Object.keys(op.requestBody?.content ?? {}).filter(
        (type) => type !== 'application/json' && type !== 'application/merge-patch+json',
      ),
    })),
  );
  t.ok(operations.length >= 22, `${operations.length} documented operations`);
  const send = (op: Operation, path: string, extra: { token?: string; contentType?: string | null } = {}) =>
    trackd.request(op.method, path, {
      token: 'token' in extra ? extra.token : token,
      body: validBody(op),
      contentType: 'contentType' in extra ? extra.contentType : op.uploadTypes[0],
    });

  t.test('HEAD on every GET path: same status and headers as GET, empty body (interface 1.4)', async (t) => {
    const gets = operations.filter((op) => op.method === 'GET');
    for (const op of gets) {
      for (const [label, path, auth] of [
        ['', concrete(op.path), true],
        [' (missing id)', concrete(op.path, { asset_id: '2147483647', location_id: '2147483647', job_id: 'NO-SUCH-JOB' }), true],
        [' (no key)', concrete(op.path), false],
      ] as const) {
        if (label === ' (missing id)' && !op.path.includes('{')) continue;
        const get = await trackd.request('GET', path, auth ? { token } : {});
        const head = await trackd.request('HEAD', path, auth ? { token } : {});
        const name = `HEAD ${op.path}${label}`;
        t.equal(head.status, get.status, `${name}: status ${get.status}`);
        t.equal(head.text, '', `${name}: empty body`);
        // A streamed export (chunked) has no length before it is written: its HEAD says 0.
        const streamed = get.status === 200 && get.headers.get('content-type') !== 'application/json';
        const length = streamed ? '0' : String(Buffer.byteLength(get.text));
        t.equal(head.headers.get('content-length'), length, `${name}: Content-Length of the GET body`);
        const names = (h: Headers) => [...h.keys()].filter((n) => n !== 'date' && n !== 'connection').sort();
        t.same(names(head.headers), names(get.headers), `${name}: same header names`);
        expectRateHeaders(t, head, name);
      }
    }
    t.ok(
      gets.some((op) => op.path.endsWith('/history')) &&
        gets.some((op) => op.path.includes('/reports/')) &&
        gets.some((op) => op.path.endsWith('/descendants')),
      'report, history and tree paths are among them',
    );
  });

  t.test('every path id out of 1..2147483647 is 400 validation_error naming the parameter, on every operation (7.2)', async (t) => {
    for (const op of operations) {
      const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!).filter((name) => !op.textParams.includes(name));
      for (const param of params) {
        for (const [id, code] of BAD_IDS) {
          const path = concrete(op.path, { [param]: id });
          const res = await send(op, path);
          const label = `${op.method} ${path}`;
          expectError(t, res, { status: 400, type: 'validation_error', instance: path, fields: res.json?.error?.fields }, label);
          t.same(fieldCodes(res), [[param, code]], `${label}: ${param} ${code}`);
          t.equal(res.json?.error?.detail, res.json?.error?.fields?.[0]?.message, `${label}: detail is the field message`);
          expectRateHeaders(t, res, label);
        }
      }
    }
  });

  t.test('unknown query parameters: unknown_field, one entry per key, on every operation (4)', async (t) => {
    for (const op of operations) {
      const path = concrete(op.path);
      const res = await send(op, `${path}?colour=red&shade=dark&colour=blue`);
      const label = `${op.method} ${op.path}`;
      expectError(t, res, { status: 400, type: 'validation_error', instance: path, fields: res.json?.error?.fields }, label);
      t.same(
        fieldCodes(res),
        [
          ['colour', 'unknown_field'],
          ['shade', 'unknown_field'],
        ],
        `${label}: one entry per key`,
      );
      t.equal(res.json?.error?.detail, `${res.json?.error?.fields?.[0]?.message} (and 1 more validation errors)`, `${label}: detail rule`);
    }
  });

  t.test('list filters on detail and write endpoints: invalid_context (4, 4.6)', async (t) => {
    for (const op of operations.filter((o) => !o.queryNames.includes('limit'))) {
      const path = concrete(op.path);
      for (const filter of LIST_FILTERS) {
        const name = filter.slice(0, filter.indexOf('='));
        // An export takes its list's filters (not its paging).
        if (op.queryNames.includes(name)) continue;
        const res = await send(op, `${path}?${filter}`);
        const label = `${op.method} ${op.path}?${filter}`;
        expectError(t, res, { status: 400, type: 'validation_error', instance: path, fields: res.json?.error?.fields }, label);
        t.same(fieldCodes(res), [[name, 'invalid_context']], `${label}: invalid_context`);
      }
    }
  });

  t.test('401 without a key and 403 without the scope, with rate-limit headers, on every operation (5, 8)', async (t) => {
    const keysLacking = new Map<string, string>();
    for (const op of operations) {
      const path = concrete(op.path);
      const label = `${op.method} ${op.path}`;
      const anonymous = await send(op, path, { token: undefined });
      expectError(
        t,
        anonymous,
        { status: 401, type: 'unauthorized', detail: 'Missing authorization header', instance: path },
        `${label} (no key)`,
      );
      t.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="trackd-api"', `${label}: challenge`);
      expectRateHeaders(t, anonymous, `${label} (no key)`);
      if (op.scopes.length === 0) continue;
      const lacking = op.scopes.join(',');
      if (!keysLacking.has(lacking))
        keysLacking.set(
          lacking,
          (
            await trackd.createKey(
              org.id,
              INTEGRATOR_SCOPES.filter((s) => !op.scopes.includes(s)),
            )
          ).token,
        );
      const forbidden = await send(op, path, { token: keysLacking.get(lacking) });
      expectError(t, forbidden, { status: 403, type: 'forbidden', instance: path }, `${label} without ${op.scopes.join(',')}`);
      expectRateHeaders(t, forbidden, `${label} (403)`);
    }
  });

  t.test('415 on every body-taking operation carries the rate-limit headers (4.1, 8)', async (t) => {
    for (const op of operations.filter((o) => o.method === 'POST' || o.method === 'PATCH')) {
      const path = concrete(op.path);
      for (const contentType of [null, op.method === 'POST' ? 'application/merge-patch+json' : 'application/json']) {
        const res = await send(op, path, { contentType });
        const label = `${op.method} ${op.path} with ${contentType ?? 'no Content-Type'}`;
        const detail =
          op.uploadTypes.length > 0
            ? `Content-Type must be one of: ${op.uploadTypes.join(', ')}`
            : op.method === 'POST'
              ? 'Content-Type must be application/json'
              : 'Content-Type must be application/merge-patch+json on PATCH operations';
        expectError(t, res, { status: 415, type: 'unsupported_media_type', detail, instance: path }, label);
        expectRateHeaders(t, res, label);
      }
    }
  });

  t.test('404 for an in-range id that does not resolve, on every operation with an id (7.1)', async (t) => {
    for (const op of operations.filter((o) => o.path.includes('{'))) {
      const path = concrete(op.path, {
        asset_id: '2147483647',
        location_id: '2147483647',
        tag_id: '2147483647',
        job_id: 'NO-SUCH-JOB',
        webhook_id: '2147483647',
        delivery_id: '2147483647',
      });
      const res = await send(op, path);
      const label = `${op.method} ${op.path}`;
      expectError(t, res, { status: 404, type: 'not_found', instance: path }, label);
      expectRateHeaders(t, res, label);
    }
  });

  t.test('every GET answers 200 with rate-limit headers and .NNNZ UTC timestamps (2.8, 8)', async (t) => {
    let seen = 0;
    const fieldNames = new Set<string>();
    for (const op of operations.filter((o) => o.method === 'GET')) {
      const path = concrete(op.path);
      const res = await trackd.request('GET', path, { token });
      t.equal(res.status, 200, `GET ${path}`);
      expectRateHeaders(t, res, `GET ${path}`);
      for (const [at, value] of timestampFields(res.json)) {
        fieldNames.add(at.slice(at.lastIndexOf('.') + 1));
        if (value === null) continue;
        seen++;
        t.match(value, OUTBOUND_TIMESTAMP, `GET ${op.path} ${at}`);
      }
    }
    // The report and the history must have contributed their own timestamp fields.
    for (const name of [
      'asset_last_seen',
      'asset_deleted_at',
      'event_observed_at',
      'valid_from',
      'valid_to',
      'created_at',
      'updated_at',
      'deleted_at',
    ]) {
      t.ok(fieldNames.has(name), `${name} was checked`);
    }
    const history = await trackd.request('GET', `/api/v1/assets/${ids.asset_id}/history`, { token });
    t.equal(history.json.data[0].event_observed_at, '2026-11-21T08:00:00.123Z', 'history: offset converted, truncated to ms');
    const report = await trackd.request('GET', '/api/v1/reports/asset-locations', { token });
    t.equal(report.json.data[0].asset_last_seen, '2026-11-21T08:00:00.123Z', 'report: offset converted, truncated to ms');
    t.ok(seen > 20, `${seen} timestamps checked`);
  });
});
