import t from 'tap';
import { seed } from '../helpers/masterdata.js';
import { metric, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { expectError } from '../helpers/wire.js';
import { inlineRefs } from '../helpers/openapi.js';

// One trackd and org for the file; the reads are checked against a small, fixed scan history.
const trackd = await startTrackd(t);
const org = await trackd.createOrg('Reads Org');
const admin = (await trackd.createKey(org.id)).token;
const reader = (await trackd.createKey(org.id, ['tracking:read'])).token;
const noTracking = (await trackd.createKey(org.id, ['assets:read', 'locations:read'])).token;
const ids = await seed(trackd, admin, {
  locations: [{ external_key: 'L-A' }, { external_key: 'L-B', tags: ['ble:LB-BEACON'] }, { external_key: 'L-C' }],
  assets: [
    { external_key: 'R-1', name: 'Forklift Alpha', tags: ['rfid:T1'] },
    { external_key: 'R-2', name: 'Pallet Beta', tags: ['rfid:T2', 'barcode:SPECIAL-99'] },
    { external_key: 'R-3', name: 'Crate Gamma', tags: ['rfid:T3'] },
    { external_key: 'R-4', name: 'Never Scanned', tags: ['rfid:T4'] },
  ],
});
const nc = await natsClient(t, trackd.natsUrl);
const BASE = Date.parse('2026-11-01T08:00:00.000Z');
const at = (s: number) => new Date(BASE + s * 1000).toISOString();
const scans: [string, string, number][] = [
  ['L-A', 'rfid:T1', 0],
  ['L-A', 'rfid:T1', 60],
  ['L-B', 'rfid:T1', 1000],
  ['L-C', 'rfid:T1', 5000],
  ['L-B', 'rfid:T2', 2000],
  ['L-A', 'rfid:T3', 3000],
];
for (const [loc, tag, s] of scans) await publish(nc, `scans.${org.id}.fixed`, scanBody(loc, [tag], at(s)));
await eventually(async () => (await metric(trackd, 'trackd_scans_applied_total')) === scans.length);

const get = (path: string, token = reader) => trackd.request('GET', path, { token });
const report = async (query = '') => {
  const res = await get(`/api/v1/reports/asset-locations${query}`);
  if (res.status !== 200) throw new Error(`report ${query}: ${res.status} ${res.text}`);
  return res.json;
};
const keys = (page: { data: { asset_external_key: string }[] }) => page.data.map((r) => r.asset_external_key);

t.test('report: one row per scanned asset, default sort -asset_last_seen, list envelope', async (t) => {
  const page = await report();
  t.same(keys(page), ['R-1', 'R-3', 'R-2']);
  t.equal(page.limit, 50);
  t.equal(page.offset, 0);
  t.equal(page.total_count, 3);
  t.same(page.data[0], {
    asset_id: ids.assets['R-1'],
    asset_external_key: 'R-1',
    location_id: ids.locations['L-C'],
    location_external_key: 'L-C',
    asset_last_seen: at(5000),
    asset_deleted_at: null,
  });
});

t.test('report sorts', async (t) => {
  t.same(keys(await report('?sort=asset_external_key')), ['R-1', 'R-2', 'R-3']);
  t.same(keys(await report('?sort=-asset_external_key')), ['R-3', 'R-2', 'R-1']);
  t.same(keys(await report('?sort=asset_last_seen')), ['R-2', 'R-3', 'R-1']);
  t.same(keys(await report('?sort=location_external_key,asset_external_key')), ['R-3', 'R-2', 'R-1']);
  t.same(keys(await report('?sort=-location_external_key')), ['R-1', 'R-2', 'R-3']);
  const bad = await get('/api/v1/reports/asset-locations?sort=name');
  expectError(t, bad, {
    status: 400,
    type: 'validation_error',
    detail: 'unknown sort field: name',
    instance: '/api/v1/reports/asset-locations',
    fields: [
      {
        field: 'sort',
        code: 'invalid_value',
        message: 'unknown sort field: name',
        params: { allowed_values: ['asset_last_seen', 'asset_external_key', 'location_external_key'] },
      },
    ],
  });
});

t.test('report filters: repeatable any-of, pairs are ambiguous, different pairs intersect, q', async (t) => {
  t.same(keys(await report(`?location_id=${ids.locations['L-A']}`)), ['R-3']);
  t.same(keys(await report('?location_external_key=L-B&location_external_key=L-C')), ['R-1', 'R-2']);
  t.same(keys(await report(`?asset_id=${ids.assets['R-1']}&asset_id=${ids.assets['R-2']}&sort=asset_external_key`)), ['R-1', 'R-2']);
  t.same(keys(await report('?asset_external_key=R-2')), ['R-2']);
  t.same(keys(await report('?asset_external_key=R-4')), [], 'never scanned: no row');
  t.same(keys(await report(`?location_external_key=L-B&asset_external_key=R-1`)), []);
  t.same(keys(await report('?q=ALPHA')), ['R-1'], 'asset name, case-insensitive');
  t.same(keys(await report('?q=special-9')), ['R-2'], 'active tag value');
  t.same(keys(await report('?q=r-3')), ['R-3'], 'asset external_key');
  t.same(keys(await report('?q=L-B')), [], 'not location fields');
  const path = '/api/v1/reports/asset-locations';
  const both = await get(`${path}?location_id=${ids.locations['L-A']}&location_external_key=L-A`);
  const message = 'location_id and location_external_key name the same thing; send only one of them';
  expectError(t, both, {
    status: 400,
    type: 'validation_error',
    instance: path,
    detail: `${message} (and 1 more validation errors)`,
    fields: [
      { field: 'location_id', code: 'ambiguous_fields', message },
      { field: 'location_external_key', code: 'ambiguous_fields', message },
    ],
  });
  const assetPair = await get(`${path}?asset_id=${ids.assets['R-1']}&asset_external_key=R-1`);
  t.same(
    assetPair.json.error.fields.map((f: any) => [f.field, f.code]),
    [
      ['asset_id', 'ambiguous_fields'],
      ['asset_external_key', 'ambiguous_fields'],
    ],
  );
  const comma = await get(`${path}?asset_external_key=R-1,R-2`);
  t.equal(comma.json.error.fields[0].code, 'invalid_value');
  const unknown = await get(`${path}?colour=red`);
  t.same(
    unknown.json.error.fields.map((f: any) => [f.field, f.code]),
    [['colour', 'unknown_field']],
  );
});

t.test('report paging', async (t) => {
  const first = await report('?limit=2');
  t.same([keys(first), first.limit, first.offset, first.total_count], [['R-1', 'R-3'], 2, 0, 3]);
  const second = await report('?limit=2&offset=2');
  t.same([keys(second), second.limit, second.offset, second.total_count], [['R-2'], 2, 2, 3]);
  t.same((await report('?offset=10')).data, []);
  const big = await get('/api/v1/reports/asset-locations?limit=201');
  t.same(
    big.json.error.fields.map((f: any) => [f.field, f.code]),
    [['limit', 'too_large']],
  );
});

t.test('history: visits with the joined location and its tags; from/to; sort; paging', async (t) => {
  const asset = ids.assets['R-1'];
  const res = await get(`/api/v1/assets/${asset}/history`);
  t.equal(res.status, 200);
  t.same(
    res.json.data.map((e: any) => [e.location.external_key, e.event_observed_at, e.last_seen_at, e.read_count]),
    [
      ['L-C', at(5000), at(5000), 1],
      ['L-B', at(1000), at(1000), 1],
      ['L-A', at(0), at(60), 2],
    ],
    'default sort -event_observed_at (newest first)',
  );
  t.equal(res.json.total_count, 3);
  const lb = res.json.data[1];
  t.same(lb.location, {
    id: ids.locations['L-B'],
    external_key: 'L-B',
    name: 'L-B',
    parent_id: null,
    is_active: true,
    tags: [{ id: lb.location.tags[0].id, tag_type: 'ble', value: 'LB-BEACON' }],
  });
  t.equal(lb.location_id, ids.locations['L-B']);
  t.equal(lb.asset_id, asset);
  const asc = await get(`/api/v1/assets/${asset}/history?sort=event_observed_at`);
  t.same(
    asc.json.data.map((e: any) => e.event_observed_at),
    [at(0), at(1000), at(5000)],
  );
  const window = await get(
    `/api/v1/assets/${asset}/history?from=${encodeURIComponent(at(1000))}&to=${encodeURIComponent('2026-11-01T10:23:20+01:00')}`,
  );
  t.same(
    window.json.data.map((e: any) => e.event_observed_at),
    [at(5000), at(1000)],
    'from and to are inclusive and take any offset',
  );
  const paged = await get(`/api/v1/assets/${asset}/history?limit=1&offset=1`);
  t.same(
    [paged.json.data.map((e: any) => e.event_observed_at), paged.json.total_count, paged.json.limit, paged.json.offset],
    [[at(1000)], 3, 1, 1],
  );
});

t.test('history errors: unknown or foreign asset 404, bad ids, bad bounds', async (t) => {
  const missing = await get('/api/v1/assets/2000000000/history');
  expectError(t, missing, { status: 404, type: 'not_found', instance: '/api/v1/assets/2000000000/history' });
  const other = await trackd.createOrg('Other Org');
  const otherKey = (await trackd.createKey(other.id, ['tracking:read'])).token;
  t.equal((await get(`/api/v1/assets/${ids.assets['R-1']}/history`, otherKey)).status, 404, 'another org cannot see it');
  t.equal((await get(`/api/v1/reports/asset-locations`, otherKey)).json.total_count, 0);
  const zero = await get('/api/v1/assets/0/history');
  t.equal(zero.status, 400);
  t.equal(zero.json.error.fields[0].field, 'asset_id');
  const badFrom = await get(`/api/v1/assets/${ids.assets['R-1']}/history?from=2026-11-01`);
  t.same(
    badFrom.json.error.fields.map((f: any) => [f.field, f.code]),
    [['from', 'invalid_value']],
  );
  const reversed = await get(`/api/v1/assets/${ids.assets['R-1']}/history?from=${at(10)}&to=${at(5)}`);
  t.same(
    reversed.json.error.fields.map((f: any) => [f.field, f.code]),
    [['to', 'invalid_value']],
  );
  const sentinel = await get(`/api/v1/assets/${ids.assets['R-1']}/history?to=1970-01-01T00:00:00Z`);
  t.match(sentinel.json.error.fields[0], { field: 'to', code: 'invalid_value', message: /sentinel/ });
});

t.test('scope tracking:read guards both reads and is published in the OpenAPI document', async (t) => {
  const reportPath = '/api/v1/reports/asset-locations';
  const historyPath = `/api/v1/assets/${ids.assets['R-1']}/history`;
  expectError(t, await get(reportPath, noTracking), { status: 403, type: 'forbidden', instance: reportPath });
  expectError(t, await get(historyPath, noTracking), { status: 403, type: 'forbidden', instance: historyPath });
  t.equal((await trackd.request('GET', reportPath)).status, 401);
  const doc = inlineRefs((await trackd.request('GET', '/api/openapi.json')).json);
  const reportOp = doc.paths['/api/v1/reports/asset-locations'].get;
  const historyOp = doc.paths['/api/v1/assets/{asset_id}/history'].get;
  t.same(reportOp['x-required-scopes'], ['tracking:read']);
  t.same(historyOp['x-required-scopes'], ['tracking:read']);
  const item = reportOp.responses['200'].content['application/json'].schema.properties.data.items;
  t.same(item.required.sort(), [
    'asset_deleted_at',
    'asset_external_key',
    'asset_id',
    'asset_last_seen',
    'location_external_key',
    'location_id',
  ]);
  t.equal(item.properties.location_external_key.nullable, true);
  const event = historyOp.responses['200'].content['application/json'].schema.properties.data.items;
  t.ok(event.properties.event_observed_at && event.properties.location);
  t.same(historyOp.parameters.map((p: any) => p.name).sort(), ['asset_id', 'from', 'limit', 'offset', 'sort', 'to']);
});

t.test('soft-deletes: include_deleted shows deleted assets; a deleted location leaves location_external_key null', async (t) => {
  const r3 = ids.assets['R-3'];
  t.equal((await trackd.request('DELETE', `/api/v1/assets/${r3}`, { token: admin })).status, 204);
  t.same(keys(await report()), ['R-1', 'R-2']);
  const withDeleted = await report('?include_deleted=true&asset_external_key=R-3');
  t.equal(withDeleted.data[0].asset_id, r3);
  t.match(withDeleted.data[0].asset_deleted_at, /^\d{4}-.*\.\d{3}Z$/);
  // R-2 sits at L-B: the location cannot go while a live asset is placed there.
  const blocked = await trackd.request('DELETE', `/api/v1/locations/${ids.locations['L-B']}`, { token: admin });
  expectError(t, blocked, {
    status: 409,
    type: 'conflict',
    instance: `/api/v1/locations/${ids.locations['L-B']}`,
    detail: /^location has assets placed at it/,
  });
  // L-A holds only the deleted R-3 now.
  t.equal((await trackd.request('DELETE', `/api/v1/locations/${ids.locations['L-A']}`, { token: admin })).status, 204);
  const row = (await report('?include_deleted=true&asset_external_key=R-3')).data[0];
  t.same([row.location_id, row.location_external_key], [ids.locations['L-A'], null]);
  const history = await get(`/api/v1/assets/${ids.assets['R-1']}/history?sort=event_observed_at`);
  t.same(
    [history.json.data[0].location_id, history.json.data[0].location],
    [ids.locations['L-A'], null],
    'the joined location follows the currently-effective rule',
  );
});

t.test('history: visits with equal event_observed_at come in id order, in the direction of the sort', async (t) => {
  const tiedOrg = await trackd.createOrg('Tied Visits Org');
  const token = (await trackd.createKey(tiedOrg.id)).token;
  const tied = await seed(trackd, token, {
    locations: [{ external_key: 'TIE-X' }, { external_key: 'TIE-Y' }, { external_key: 'TIE-Z' }],
    assets: [{ external_key: 'TIE-1', name: 'Tied', tags: ['rfid:TIE1'] }],
  });
  const applied = await metric(trackd, 'trackd_scans_applied_total');
  const when = at(9000);
  for (const loc of ['TIE-X', 'TIE-Y', 'TIE-Z']) await publish(nc, `scans.${tiedOrg.id}.fixed`, scanBody(loc, ['rfid:TIE1'], when));
  await eventually(async () => (await metric(trackd, 'trackd_scans_applied_total')) === applied + 3);
  const visits = async (sort: string) => {
    const res = await get(`/api/v1/assets/${tied.assets['TIE-1']}/history?sort=${sort}`, token);
    t.equal(res.status, 200);
    return res.json.data.map((v: { location_id: number; event_observed_at: string }) => [v.location_id, v.event_observed_at]);
  };
  const [x, y, z] = ['TIE-X', 'TIE-Y', 'TIE-Z'].map((k) => tied.locations[k]);
  t.same(
    await visits('event_observed_at'),
    [x, y, z].map((l) => [l, when]),
    'ascending: the first arrival first',
  );
  t.same(
    await visits('-event_observed_at'),
    [z, y, x].map((l) => [l, when]),
    'descending: the last arrival first',
  );
});
